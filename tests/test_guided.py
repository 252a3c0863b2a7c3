"""Guided alignment: the loss term, the link targets of a batch, link files that do not fit, and training with it."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from conftest import datamodule, run_train
from nmt import checkpoint
from nmt.alignment.choice import CONTEXTS, attention_map
from nmt.alignment.links import pharaoh
from nmt.cli import align as align_cli
from nmt.data.collate import BatchDataset
from nmt.data.encoded import EncodedCorpus
from nmt.data.joining import Joining
from nmt.data.readers import CorpusError
from nmt.data.training_links import TrainingLinks, words_of_pieces
from nmt.inference.translator import Translator
from nmt.models.loss import guided_alignment_loss


def test_the_loss_has_no_gradient_where_attention_equals_the_links_and_pulls_towards_them_otherwise():
    target = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]])  # (B, T, S); row 2 has no link
    # attention that is the links (the masked position exactly zero, as the model's masks make it)
    scores = torch.tensor([[[0.3, 0.3, -1e9], [-1e9, -1e9, 2.0], [0.1, 0.2, 0.3]]], requires_grad=True)
    loss = guided_alignment_loss(scores.softmax(-1), target)
    loss.backward()
    assert loss.item() == pytest.approx(0.0, abs=1e-6) and scores.grad.abs().max() < 1e-6
    # elsewhere: a step against the gradient moves attention mass onto the linked positions
    scores = torch.zeros(1, 3, 3, requires_grad=True)
    loss = guided_alignment_loss(scores.softmax(-1), target)
    loss.backward()
    assert loss.item() > 0.1 and scores.grad[0, 2].abs().max() == 0  # the unlinked row is left alone
    moved = (scores - scores.grad).softmax(-1)
    before = torch.full((3, 3), 1 / 3)
    assert moved[0, 0, :2].sum() > before[0, :2].sum() and moved[0, 1, 2] > before[1, 2]
    assert guided_alignment_loss(torch.rand(2, 4, 5), torch.zeros(2, 4, 5)).item() == 0.0  # no links at all


class Pieces:
    """A tokenizer of a handful of pieces: ids 4.. are the pieces below, for both languages."""

    PIECES = ["<pad>", "<unk>", "<s>", "</s>", "▁le", "▁ch", "at", "▁dort", "▁the", "▁cat", "▁sle", "eps"]
    src_vocab_size = tgt_vocab_size = len(PIECES)

    def src_pieces(self, ids):
        return [self.PIECES[i] for i in ids]

    tgt_pieces = src_pieces


def test_links_spread_over_the_pieces_of_the_linked_words(tmp_path):
    src, tgt = [4, 5, 6, 7], [8, 9, 10, 11]  # le ch|at dort -> the cat sle|eps
    corpus = EncodedCorpus.from_lists([src], [tgt], 20)
    corpus.lines = np.array([2])  # the pair is line 2 of its input
    (tmp_path / "links").write_text("0-0\n0-0 1-1 2-2\n")
    links = TrainingLinks.read(tmp_path / "links", corpus, Pieces(), lines=2)
    assert words_of_pieces(np.array(src), links.starts[0]).tolist() == [0, 1, 1, 2]
    target = links.targets(np.array([0]), [np.array(src)], [np.array(tgt)], (1, 6, 5), [slice(0, 1)])[0]
    expected = torch.zeros(6, 5)
    expected[0, 0] = 1  # the -> le
    expected[1, 1:3] = 0.5  # cat -> both pieces of "chat"
    expected[2:4, 3] = 1  # both pieces of "sleeps" -> dort
    assert torch.equal(target, expected)  # the end of sentence (row 4) and padding get nothing


def test_joined_pairs_are_one_row_whose_links_are_each_pairs_shifted_by_the_words_before_them(tmp_path):
    pairs = [([4, 5, 6], [8, 9]), ([7], [10, 11]), ([4, 7], [8, 10, 11])]  # le ch|at / dort / le dort
    corpus = EncodedCorpus.from_lists([s for s, _ in pairs], [t for _, t in pairs], 20)
    (tmp_path / "links").write_text("0-0 1-1\n0-0\n0-0 1-1\n")
    links = TrainingLinks.read(tmp_path / "links", corpus, Pieces(), by_pair=True)
    joining = Joining(max_pairs=3, seed=5)
    seed = next(s for s in range(100) if len(Joining(3, seed=s).groups(np.arange(3))) == 1)  # all three in one row
    batch = BatchDataset(corpus, links=links, joining=Joining(3, seed=seed))[[0, 1, 2]]
    assert batch.src.tolist() == [[4, 5, 6, 7, 4, 7]] and batch.tgt_out.tolist() == [[8, 9, 10, 11, 8, 10, 11, 3]]
    assert batch.idx.tolist() == [0, 1, 2] and batch.src_len.tolist() == [6] and batch.tgt_len.tolist() == [8]
    expected = torch.zeros(1, 8, 6)
    expected[0, 0, 0] = 1  # the -> le
    expected[0, 1, 1:3] = 0.5  # cat -> ch|at
    expected[0, 2:4, 3] = 1  # sle|eps -> dort (pair 1, French word 0 = word 2 of the row)
    expected[0, 4, 4] = 1  # the -> le (pair 2)
    expected[0, 5:7, 5] = 1  # sle|eps -> dort
    assert torch.equal(batch.align, expected)
    # rows cover the batch in order, 1 to max_pairs pairs each, drawn from the pairs and the seed alone
    rows = joining.groups(np.arange(40, 100))
    assert [i for r in rows for i in range(60)[r]] == list(range(60)) and {r.stop - r.start for r in rows} == {1, 2, 3}
    assert rows == joining.groups(np.arange(40, 100)) and rows != Joining(3, seed=6).groups(np.arange(40, 100))
    assert Joining().groups(np.arange(3)) == [slice(0, 1), slice(1, 2), slice(2, 3)]
    sizes = np.diff([r.start for r in Joining(4, 0.25, seed=1).groups(np.arange(20000))])  # a share of rows joined
    assert abs((sizes > 1).mean() - 0.25 * 3 / 4) < 0.02 and set(sizes) == {1, 2, 3, 4}


@pytest.mark.parametrize(
    "text, message",
    [
        ("0-0\n", r"links has 1 lines but the training corpus has 2: a link file must be parallel"),
        ("0-0\n0-0 1-x\n", r"links:2: '1-x' is not a link i-j"),
        ("0-0\n0-0 3-1\n", r"links:2: link 3-1 names French word 3 and English word 1, but the pair has 3 French"),
    ],
)
def test_a_link_file_that_does_not_fit_is_refused_with_file_and_line(tmp_path, text, message):
    corpus = EncodedCorpus.from_lists([[4, 5, 6, 7]], [[8, 9, 10, 11]], 20)
    corpus.lines = np.array([2])
    (tmp_path / "links").write_text(text)
    with pytest.raises(CorpusError, match=message):
        TrainingLinks.read(tmp_path / "links", corpus, Pieces(), lines=2)


def test_the_built_in_corpus_batches_carry_its_gold_links(tmp_path):
    dm = datamodule("toy", train_size=200, valid_size=10, test_size=10, cache_dir=str(tmp_path), links=True)
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    align, real = batch.align, batch.tgt_out > 3  # (B, T, S); real target pieces (not EOS or padding)
    assert align.shape == (*batch.tgt_out.shape, batch.src.shape[1])
    sums = align.sum(-1)
    assert torch.allclose(sums[sums > 0], torch.ones(int((sums > 0).sum())))  # each linked row: a distribution
    assert (sums[~real] == 0).all() and (sums[real] > 0).float().mean() > 0.6  # most words have a sure link
    assert (align.sum(1)[batch.src == 0] == 0).all()  # no link into source padding


def test_a_guided_training_step_adds_the_weighted_alignment_loss_of_the_guided_head(tmp_path):
    """The loss a guided step minimises is the translation loss plus ``loss.align_weight`` times the guided loss of
    the chosen layer and head: the step pulls that head towards the links (the slow test below trains with it)."""
    from hydra import compose, initialize_config_dir

    from conftest import ROOT, tiny_model_overrides
    from nmt.training.module import TranslationModule

    dm = datamodule("toy", train_size=200, valid_size=10, test_size=10, cache_dir=str(tmp_path), links=True)
    dm.prepare_data()
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    overrides = ["model=transformer", *tiny_model_overrides("model=transformer"), "loss.align_weight=0.5",
                 "loss.align_layer=0", "loss.align_head=1", "model.dropout=0.0"]  # fmt: skip
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    module = TranslationModule.from_config(cfg, dm.tokenizer).eval()  # no dropout: the two passes alike
    loss, step = module.training_loss(batch)
    plain, *_, cross = module._loss(batch, need_weights=True, train=True)
    align = guided_alignment_loss(attention_map(cross, module.align_choice), batch.align)
    assert align > 0 and torch.allclose(step["train/align_loss"], align)
    assert torch.allclose(loss, plain + 0.5 * align)


@pytest.mark.slow
def test_training_with_guidance_lowers_the_guided_loss_and_a_bad_link_file_is_one_line(trained, data_cache, tmp_path):
    args = ("model=transformer", "loss.align_weight=1.0", "loss.align_layer=0", "loss.align_head=1")
    run_train(tmp_path / "guided", data_cache, *args, "trainer.max_steps=24", "run_test=false")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(tmp_path / "guided" / "tb"))
    ea.Reload()
    values = [e.value for e in ea.Scalars("train/align_loss")]
    assert len(values) >= 4 and values[-1] < values[0]
    proc = run_train(tmp_path / "bad", data_cache, *args[:2], "data.align=/nonexistent/links.txt", check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "error: data.align='/nonexistent/links.txt' (no such file): must be eflomal, or a Pharaoh" in proc.stderr
    proc = run_train(tmp_path / "head", data_cache, *args[:3], "loss.align_head=7", check=False)
    assert proc.returncode != 0 and "loss.align_head=7: the model has 4 head(s)" in proc.stderr


@pytest.mark.slow
def test_guidance_in_the_full_context_pass_is_what_alignments_read_after_training(data_cache, tmp_path, capsys):
    args = ("model=transformer", "loss.align_weight=1.0", "loss.align_layer=0", "loss.align_full_context=true")
    run_train(tmp_path / "full", data_cache, *args, "trainer.max_steps=16", "run_test=false")
    ckpt = str(tmp_path / "full" / "checkpoints" / "last.ckpt")
    loaded = checkpoint.load_checkpoint(ckpt)
    choice = loaded.checkpoint.alignment
    assert choice.context == "full" and loaded.checkpoint.alignment_record["context"] == "full"
    fr, en = "Le chat mange la pomme rouge.", "The cat eats the red apple."
    (tmp_path / "in.fr").write_text(fr + "\n")
    (tmp_path / "in.en").write_text(en + "\n")
    files = ["--input", str(tmp_path / "in.fr"), "--align-to", str(tmp_path / "in.en")]
    for options in ([], ["--align-links", "union"]):  # the recorded pass, whatever else is overridden
        assert align_cli.main(["--ckpt", ckpt, *files, "--attention-dir", str(tmp_path / "att"), *options]) == 0
        links = capsys.readouterr().out.strip()
        [shown] = json.loads((tmp_path / "att" / "0.json").read_text())["parts"][0]["hypotheses"]
        read = replace(choice, links=options[1] if options else choice.links)
        by_pass = {}
        for context in CONTEXTS:  # the recorded choice read from either pass, as nmt.inference.translator reads it
            translator = Translator(loaded.model, loaded.tokenizer, alignment=replace(read, context=context))
            [r] = translator.force([fr], [en])
            by_pass[context] = pharaoh(translator.links(r)), attention_map(r.parts[0][1][0].attention, read)
        assert links == by_pass["full"][0] and shown["choice"]["context"] == "full"
        assert torch.allclose(torch.tensor(shown["cross"]), by_pass["full"][1], atol=1e-4)
        assert not torch.allclose(by_pass["full"][1], by_pass["causal"][1], atol=1e-3)
    proc = run_train(tmp_path / "rnn", data_cache, "model=bahdanau", *args[1:], check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "error: loss.align_full_context=true: model=bahdanau has no decoder pass that sees the whole" in proc.stderr
