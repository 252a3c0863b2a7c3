import pytest
import torch

from conftest import datamodule
from nmt.alignment.links import parse_links
from nmt.data.readers import CorpusError
from nmt.data.sources import Files, hash_split
from nmt.data.tokenizer import Tokenizer
from nmt.specials import BOS, EOS, PAD, UNK

SPM = dict(vocab_size=120, model_type="unigram")


def tsv_corpus(path, n=300):
    words = ["chat", "chien", "maison", "rouge", "bleu", "petit", "grand", "mange", "voit", "le", "la", "un"]
    en = ["cat", "dog", "house", "red", "blue", "small", "big", "eats", "sees", "the", "the", "a"]
    lines = []
    for i in range(n):
        idx = [(i * 7 + k * 3) % len(words) for k in range(3 + i % 4)]
        lines.append(" ".join(words[j] for j in idx) + f" {i}\t" + " ".join(en[j] for j in idx) + f" {i}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_toy_source_end_to_end(tmp_path):
    dm = datamodule(
        cache_dir=str(tmp_path), source=dict(train_size=300, valid_size=20, test_size=20), spm=SPM, max_tokens=512
    )
    dm.prepare_data()
    dm.setup()
    tok = dm.tokenizer
    assert (tok.src.pad_id(), tok.src.unk_id(), tok.src.bos_id(), tok.src.eos_id()) == (PAD, UNK, BOS, EOS)
    assert len(dm.corpus.splits["train"]) == 300 and dm.references("valid").sure is not None
    assert not set(dm.references("test").src) & set(dm.references("valid").src)
    batch = next(iter(dm.train_dataloader()))
    assert batch.src.shape[0] == batch.src_len.shape[0] and batch.tgt_in[:, 0].eq(BOS).all()
    assert sum(1 for _ in dm.val_dataloader()) >= 1
    # a rerun reuses the cache: the same tokenizer bytes, no retraining
    dm2 = datamodule(
        cache_dir=str(tmp_path), source=dict(train_size=300, valid_size=20, test_size=20), spm=SPM, max_tokens=512
    )
    dm2.setup()
    assert dm2.tokenizer.state_dict() == tok.state_dict()
    assert Tokenizer.from_state_dict(tok.state_dict()).encode_src(["le chat"]) == tok.encode_src(["le chat"])


def test_tsv_hash_split_keeps_a_sentence_in_one_split(tmp_path):
    f = tsv_corpus(tmp_path / "c.tsv", 400)
    dup = f.read_text().splitlines()[0]
    f.write_text(f.read_text() + dup + "\n" + dup.replace("\t", "\tanother ") + "\n")
    dm = datamodule("tsv", path=str(f), cache_dir=str(tmp_path / "cache"), split=dict(valid=0.1, test=0.1), spm=SPM)
    dm.setup()
    splits = {name: set(p.src) for name, p in dm.corpus.references.items()}
    assert not splits["valid"] & splits["test"]
    where = hash_split([dup.split("\t")[0]] * 3, 0.1, 0.1)
    assert len(set(where)) == 1
    assert len(dm.corpus.splits["train"]) + len(dm.references("valid")) + len(dm.references("test")) == 402


def test_parallel_files_with_explicit_valid_and_test(tmp_path):
    lines = tsv_corpus(tmp_path / "c.tsv", 200).read_text().splitlines()
    for name, part in (("train", lines[:160]), ("valid", lines[160:180]), ("test", lines[180:])):
        (tmp_path / f"{name}.fr").write_text("\n".join(x.split("\t")[0] for x in part) + "\n")
        (tmp_path / f"{name}.en").write_text("\n".join(x.split("\t")[1] for x in part) + "\n")
    p = lambda n: str(tmp_path / n)  # noqa: E731
    dm = datamodule(
        "tsv",
        src=p("train.fr"),
        tgt=p("train.en"),
        valid_src=p("valid.fr"),
        valid_tgt=p("valid.en"),
        test_src=p("test.fr"),
        test_tgt=p("test.en"),
        cache_dir=p("cache"),
        spm=SPM,
    )
    dm.setup()
    assert len(dm.corpus.splits["train"]) == 160 and dm.references("test").src[0] == lines[180].split("\t")[0]


def test_filters_log_counts(tmp_path, caplog):
    f = tsv_corpus(tmp_path / "c.tsv", 300)
    long_line = " ".join(["chat"] * 80) + "\tcat\n"
    f.write_text(f.read_text() + "\tempty source\n" + long_line)
    dm = datamodule(
        "tsv", path=str(f), cache_dir=str(tmp_path / "cache"), spm=SPM, max_len=40, split=dict(valid=0.05, test=0.05)
    )
    with caplog.at_level("INFO"):
        dm.setup()
    assert "with an empty side" in caplog.text and "more than 40 subwords" in caplog.text


def test_bad_input_fails_before_training(tmp_path):
    f = tmp_path / "bad.tsv"
    f.write_text("a\tb\nno tab here\n")
    with pytest.raises(CorpusError, match=r"bad\.tsv:2"):
        datamodule("tsv", path=str(f), cache_dir=str(tmp_path / "c"), spm=SPM).prepare_data()
    with pytest.raises(ValueError, match="data.source.path"):
        Files()
    with pytest.raises(ValueError, match="data.prepare.on_bad_line='maybe': must be one of error, skip"):
        datamodule("tsv", cache_dir=str(tmp_path), path=str(f), on_bad_line="maybe")


def test_joint_sentencepiece_model(tmp_path):
    f = tsv_corpus(tmp_path / "c.tsv", 300)
    dm = datamodule(
        "tsv",
        path=str(f),
        cache_dir=str(tmp_path / "cache"),
        spm=SPM | dict(joint=True),
        split=dict(valid=0.1, test=0.1),
    )
    dm.setup()
    tok = dm.tokenizer
    assert tok.joint and tok.src_vocab_size == tok.tgt_vocab_size
    assert tok.encode_src(["chat rouge"]) == tok.encode_tgt(["chat rouge"])


def _segmentations(dm, epochs):
    """Per epoch: pair index -> (source ids, target ids) of every training pair as batched."""
    out = []
    loader = dm.train_dataloader()
    for epoch in range(epochs):
        loader.sampler.set_epoch(epoch)
        seen = {}
        for batch in loader:
            for row, i in enumerate(batch.idx.tolist()):
                src = batch.src[row, : batch.src_len[row]].tolist()
                tgt = batch.tgt_out[row, : batch.tgt_len[row] - 1].tolist()
                seen[i] = (src, tgt)
        out.append(seen)
    return out


def test_subword_sampling_resegments_training_pairs_each_epoch(tmp_path):
    settings = dict(
        cache_dir=str(tmp_path), source=dict(train_size=300, valid_size=20, test_size=20), spm=SPM, max_tokens=512
    )
    plain = datamodule(**settings)
    plain.setup()
    sampled = datamodule(**settings, sampling=dict(alpha=0.5, nbest_size=-1))
    sampled.setup()
    tok = sampled.tokenizer
    first, second = _segmentations(sampled, 2)
    stored = _segmentations(plain, 1)[0]
    assert first.keys() == second.keys() == stored.keys()
    # the same text each time, segmented afresh: most pairs differ from the stored and the last epoch's segmentation
    for i, (src, tgt) in first.items():
        assert tok.src.decode(src) == tok.src.decode(stored[i][0])
        assert tok.tgt.decode(tgt) == tok.tgt.decode(stored[i][1])
    assert sum(first[i] != stored[i] for i in first) > len(first) / 2
    assert sum(first[i] != second[i] for i in first) > len(first) / 2
    # seeded: the same draws again; held-out batches never sampled
    assert _segmentations(sampled, 1)[0] == first
    valid = lambda dm: [b.src.tolist() for b in dm.val_dataloader()]  # noqa: E731
    assert valid(sampled) == valid(plain)


def test_a_reversed_corpus_holds_the_same_pairs_turned_round_with_their_links_transposed(tmp_path):
    kw = dict(cache_dir=str(tmp_path), source=dict(train_size=200, valid_size=20, test_size=20), spm=SPM, links=True)
    fwd, rev = datamodule(**kw), datamodule(**kw, reverse=True)
    for dm in (fwd, rev):
        dm.prepare_data()
        dm.setup("fit")
    assert fwd.corpus.directory != rev.corpus.directory  # the setting is part of the cache key
    turned = lambda links: {(j, i) for i, j in parse_links(links)}  # noqa: E731
    for split in ("valid", "test"):  # the same pairs held out (split by the French), each turned round
        a, b = fwd.references(split), rev.references(split)
        assert (b.src, b.tgt) == (a.tgt, a.src)
        assert [parse_links(x) for x in b.sure] == [turned(x) for x in a.sure]
        assert [parse_links(x) for x in b.possible] == [turned(x) for x in a.possible]
    text = lambda pieces: "".join(pieces).replace("▁", " ").strip()  # noqa: E731
    train_f, train_r = fwd.corpus.splits["train"], rev.corpus.splits["train"]
    assert len(train_f) == len(train_r) == 200
    lf, lr = fwd.training_links, rev.training_links
    links = lambda x, k: set(zip(*(side[x.offsets[k] : x.offsets[k + 1]].tolist() for side in (x.src, x.tgt))))  # noqa: E731
    for k in range(len(train_f)):  # the training pairs in the same order, English first, their gold links turned
        assert text(rev.tokenizer.src_pieces(train_r.src(k).tolist())) == text(fwd.tokenizer.tgt_pieces(train_f.tgt(k)))
        assert text(rev.tokenizer.tgt_pieces(train_r.tgt(k).tolist())) == text(fwd.tokenizer.src_pieces(train_f.src(k)))
        f = links(lf, k)
        assert f and links(lr, k) == {(j, i) for i, j in f}


def test_a_reversed_corpus_split_by_hash_holds_out_the_same_pairs(tmp_path):
    f = tsv_corpus(tmp_path / "c.tsv", 400)
    kw = dict(path=str(f), cache_dir=str(tmp_path / "cache"), split=dict(valid=0.1, test=0.1), spm=SPM)
    fwd, rev = datamodule("tsv", **kw), datamodule("tsv", **kw, reverse=True)
    for dm in (fwd, rev):
        dm.setup()
    for split in ("valid", "test"):  # split by a hash of the French, whichever side is the source
        a, b = fwd.references(split), rev.references(split)
        assert (b.src, b.tgt) == (a.tgt, a.src) and len(a.src) > 10


def test_batches_are_pinned_only_for_a_gpu(tmp_path):
    from types import SimpleNamespace

    dm = datamodule(cache_dir=str(tmp_path), source=dict(train_size=100, valid_size=10, test_size=10), spm=SPM,
                    max_tokens=512, pin_memory=True)  # fmt: skip
    dm.prepare_data()
    dm.setup()
    assert not dm.train_dataloader().pin_memory and not dm.val_dataloader().pin_memory  # no trainer: nothing to pin for
    for device, pinned in (("cpu", False), ("cuda", True)):
        device_of = SimpleNamespace(root_device=torch.device(device))
        dm.trainer = SimpleNamespace(strategy=device_of, global_rank=0, world_size=1)
        assert dm.val_dataloader().pin_memory is pinned


def test_a_held_out_pair_longer_than_its_budget_names_its_split_and_key():
    """#82 §4: one pasted paragraph in valid.tsv is refused once the data is prepared, naming the split and the key
    that applies to it (not max_tokens or max_len, which bound the training pairs)."""
    from types import SimpleNamespace

    import numpy as np

    from nmt.training.datamodule import TranslationDataModule

    def split(longest: int, lines=None) -> SimpleNamespace:
        src = np.array([5, longest, 7], np.uint16)
        return SimpleNamespace(src_lens=src, tgt_lens=np.array([4, 9, 6], np.uint16), lines=lines)

    dm = SimpleNamespace(max_tokens=2400, eval_max_tokens=4096, corpus=SimpleNamespace(splits={
        "train": split(300, np.array([11, 12, 13])), "valid": split(6000), "test": split(40)}))  # fmt: skip
    with pytest.raises(ValueError) as e:
        TranslationDataModule._check_lengths(dm)
    assert str(e.value) == ("the valid split's pair 2 is 6000 pieces long (with its end token): more than "
                            "data.eval_max_tokens=4096: raise data.eval_max_tokens to at least 6000, or shorten that "
                            "pair of the valid split")  # fmt: skip
    dm.corpus.splits["valid"] = split(60)
    dm.corpus.splits["train"] = split(3000, np.array([11, 12, 13]))
    with pytest.raises(ValueError, match=r"^the train split's line 12 of its input is 3000 pieces long .* raise "
                                         r"data.max_tokens to at least 3000, or lower data.prepare.max_len$"):
        TranslationDataModule._check_lengths(dm)
    dm.corpus.splits["train"] = split(300)
    TranslationDataModule._check_lengths(dm)  # every pair within its budget


def test_guided_alignment_without_links_is_refused_when_the_data_module_is_built(tmp_path):
    """#82 §3: a corpus with no links of its own and no data.align: refused before anything is prepared."""
    f = tsv_corpus(tmp_path / "c.tsv", 40)
    with pytest.raises(ValueError, match=r"^loss.align_weight > 0 needs word links: set data.align=eflomal"):
        datamodule("tsv", path=str(f), cache_dir=str(tmp_path / "cache"), links=True)
    assert not (tmp_path / "cache").exists()
    datamodule("tsv", path=str(f), cache_dir=str(tmp_path / "cache"), links=True, align="eflomal")  # links: given
    datamodule("toy", cache_dir=str(tmp_path / "cache"), links=True)  # the built-in corpus's own


def test_an_empty_or_one_column_corpus_is_refused_before_preparation_and_the_advice_works(tmp_path):
    """#82 §3 and §7: what the first lines of a TSV file show is refused when the source is built, naming the key;
    a column key past the file's columns names the columns it has, and giving one of them is taken."""
    empty, one, two = tmp_path / "empty.tsv", tmp_path / "one.tsv", tmp_path / "two.tsv"
    empty.write_text("")
    one.write_text("le chat\nla maison\n")
    two.write_text("le chat\tthe cat\tx\nla maison\tthe house\n")
    cases = [(dict(path=str(empty)), f"data.source.path={empty}: file is empty"),
             (dict(path=str(one)), f"data.source.path={one}: one column on each of its first 2 line(s)"),
             (dict(path=str(two), valid=str(one), test=str(two)), f"data.source.valid={one}: one column"),
             (dict(path=str(two), tgt_col=5), f"data.source.path={two}: 3 tab-separated columns (0 to 2) on its first "
              "lines, and data.source.src_col=0 data.source.tgt_col=5 read column 5: give columns it has"),
             (dict(src=str(tmp_path), tgt=str(two)), f"data.source.src={tmp_path}: a folder, not a file"),
             (dict(src=str(empty), tgt=str(two)), f"data.source.src={empty}: file is empty")]  # fmt: skip
    for given, message in cases:
        with pytest.raises(CorpusError) as e:
            Files(**given)
        assert str(e.value).startswith(message), str(e.value)
    Files(path=str(two), tgt_col=2)  # a column the file has: taken
    Files(path=str(two))
