"""eflomal as the project's aligner: symmetrisation, links read back in the project's word indices, the cache, errors
whose advice works, and guided training from its links."""

from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import datamodule, run_train
from nmt.alignment import eflomal
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import grow_diag_final_and, intersection, union
from nmt.data import training_links
from nmt.data.training_links import links_dir
from nmt.inference import pair_links as links

FR = "chat chien maison rouge bleu petit grand mange voit dort table livre porte fenêtre jardin arbre fleur lune"
FR = FR.split()
EN = "cat dog house red blue small big eats sees sleeps table book door window garden tree flower moon".split()


def reversed_corpus(path, n=500, seed=0):
    """``n`` TSV pairs whose English is the French word for word, in reverse order: word i links to n - 1 - i."""
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            pick = rng.choice(len(FR), rng.integers(3, 8), replace=False)
            f.write(" ".join(FR[k] for k in pick) + "\t" + " ".join(EN[k] for k in pick[::-1]) + "\n")
    return path


def aligned(tmp_path, corpus, cache="cache", **aligner):
    dm = datamodule(
        "tsv",
        path=str(corpus),
        cache_dir=str(tmp_path / cache),
        spm=dict(vocab_size=60, model_type="bpe"),
        split=dict(valid=0.1, test=0.05),
        align="eflomal",
        aligner=dict(symmetrisation="intersection") | aligner,
        links=True,
    )
    dm.prepare_data()
    dm.setup("fit")
    return dm


def test_symmetrisations_of_a_hand_made_example():
    forward = {(0, 0), (1, 1), (2, 1), (3, 3), (6, 5), (7, 0)}
    reverse = {(0, 0), (1, 1), (1, 2), (3, 3), (4, 3), (1, 3)}
    assert intersection(forward, reverse) == {(0, 0), (1, 1), (3, 3)}
    assert union(forward, reverse) == forward | reverse
    # grown: (2,1), (1,2) and (4,3) neighbour a link and touch an unlinked word; (1,3) neighbours (1,2) but both its
    # words are linked by then; final-and: (6,5) joins two unlinked words, (7,0) does not (English word 0 is linked)
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (1, 1), (3, 3), (2, 1), (1, 2), (4, 3), (6, 5)}
    # nothing to grow from: only links between two words still unlinked, in order
    assert grow_diag_final_and(set(), reverse) == {(0, 0), (1, 1), (3, 3)}


def test_eflomal_links_are_read_back_in_the_projects_word_indices(tmp_path):
    dm = aligned(tmp_path, reversed_corpus(tmp_path / "c.tsv"))
    train, got = dm.corpus.splits["train"], dm.training_links
    right = total = 0
    starts = got.starts
    for k in range(len(train)):
        words = int(training_links.words_of_pieces(train.src(k), starts[0])[-1]) + 1
        for i, j in zip(got.src[got.offsets[k] : got.offsets[k + 1]], got.tgt[got.offsets[k] : got.offsets[k + 1]]):
            right += j == words - 1 - i
            total += 1
    assert total > 2 * len(train) and right / total > 0.95, (right, total)
    valid = dm.references("valid")  # no gold links: eflomal's stand in, numbered by the text's words
    assert valid.possible == [""] * len(valid) and len(valid.sure) == len(valid)
    pairs = [(parse_links(s), len(t.split())) for s, t in zip(valid.sure, valid.tgt)]
    assert sum(j == n - 1 - i for found, n in pairs for i, j in found) / sum(len(f) for f, _ in pairs) > 0.95


def test_the_links_are_cached_by_the_corpus_and_the_aligner_settings(tmp_path, monkeypatch):
    corpus = reversed_corpus(tmp_path / "c.tsv")
    first = aligned(tmp_path, corpus, model=1)  # IBM1: the links' quality is not asked here
    runs = []
    counted = lambda *a, **k: runs.append(k["draws"]) or eflomal.align_block(*a, **k)  # noqa: E731
    monkeypatch.setattr(training_links, "align_block", counted)
    again = aligned(tmp_path, corpus, model=1)
    assert not runs and again.prepared_dir == first.prepared_dir  # the same settings: reused
    other = aligned(tmp_path, corpus, model=1, symmetrisation="grow-diag-final-and")
    assert runs == [1] and links_dir(other.prepared_dir, other.aligner) != links_dir(first.prepared_dir, first.aligner)
    aligned(tmp_path, corpus, model=1, draws=3)  # data.aligner.draws: another folder, eflomal run three times
    assert runs == [1, 3]
    assert len(list(first.prepared_dir.glob("links-*"))) == 3
    changed = reversed_corpus(tmp_path / "c.tsv", seed=1)
    assert aligned(tmp_path, changed, model=1).prepared_dir != first.prepared_dir


def test_a_missing_aligner_and_a_block_too_large_are_one_line_whose_advice_works(tmp_path, monkeypatch):
    corpus = reversed_corpus(tmp_path / "c.tsv", n=100)
    monkeypatch.setattr(eflomal, "PROGRAM", "eflomal-align-not-installed")
    with pytest.raises(eflomal.AlignerError, match=r"needs eflomal's aligner .* pip install 'nmt-attention\[align\]'"):
        aligned(tmp_path, corpus)
    monkeypatch.undo()
    monkeypatch.setattr(eflomal, "available_memory", lambda: eflomal.BASE_BYTES + 20 * 40 * eflomal.BYTES_PER_WORD)
    too_large = r"about \d+ MiB for a block of \d+ pairs .* lower data.aligner.block_pairs"
    with pytest.raises(eflomal.AlignerError, match=too_large):
        aligned(tmp_path, corpus, cache="big")
    dm = aligned(tmp_path, corpus, cache="big", block_pairs=20)  # the advice, followed
    assert len(dm.training_links.offsets) == len(dm.corpus.splits["train"]) + 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_guided_training_from_eflomal_links_lowers_the_attention_aer_against_them(tmp_path):
    corpus = reversed_corpus(tmp_path / "c.tsv", n=1500)
    common = [
        "data=tsv",
        f"data.source.path={corpus}",
        "data.align=eflomal",
        "data.prepare.spm.vocab_size=60",
        "data.prepare.split.valid=0.05",
        "model=transformer",
        "data.max_tokens=1024",
        "trainer.max_steps=300",
        "trainer.max_epochs=1000",
        "trainer.val_check_interval=150",
        "run_test=false",
    ]
    aer = {}
    for name, weight in (("plain", 0.0), ("guided", 1.0)):
        run_train(tmp_path / name, tmp_path / "cache", *common, f"loss.align_weight={weight}", toy=False)
        events = EventAccumulator(str(tmp_path / name / "tb"))
        events.Reload()
        aer[name] = events.Scalars("val/aer")[-1].value  # against eflomal's links of the validation pairs
    assert aer["guided"] < aer["plain"] - 0.1, aer
    assert torch.isfinite(torch.tensor(list(aer.values()))).all()


def test_eflomal_links_of_given_pairs_learnt_with_a_corpus_are_those_pairs_in_their_whitespace_words(tmp_path):
    """``align.py --adapt-links eflomal``: the pairs' links, learnt with the corpus's pairs before them, come
    back for the pairs (not the corpus's first ones), in each side's whitespace words."""
    corpus = reversed_corpus(tmp_path / "c.tsv", n=400)
    rows = [line.split("\t") for line in reversed_corpus(tmp_path / "p.tsv", n=12, seed=5).read_text().splitlines()]
    sources, targets = [r[0] for r in rows], [r[1].strip() for r in rows]
    expected = [{(i, len(s.split()) - 1 - i) for i in range(len(s.split()))} for s in sources]
    got = links.pair_links("eflomal", sources, targets, str(corpus))
    assert len(got) == len(sources)
    hits = sum(len(g & e) for g, e in zip(got, expected))
    assert hits >= 0.9 * sum(map(len, expected)) and hits >= 0.9 * sum(map(len, got))
    bad = tmp_path / "bad.tsv"
    bad.write_text("un chat\tone cat\nsans anglais\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: .*column"):
        links.pair_links("eflomal", sources, targets, str(bad))


def test_the_links_of_several_draws_are_voted_and_one_draw_astray_is_outvoted(tmp_path, monkeypatch):
    """``draws``: eflomal runs that many times and each direction keeps the links of more than half of them."""
    a, b, c = {(0, 0), (1, 1)}, {(0, 0), (1, 2)}, {(2, 2)}
    assert eflomal.voted([[a], [b], [a | c]]) == [{(0, 0), (1, 1)}]  # 3 of 3, 2 of 3 kept; 1 of 3 left out
    assert eflomal.voted([[a], [b]]) == [{(0, 0)}]  # of two draws, only what both found
    rows = [line.split("\t") for line in reversed_corpus(tmp_path / "c.tsv", n=300).read_text().splitlines()]
    pairs = [(s.split(), t.split()) for s, t in rows]
    expected = [{(i, len(s) - 1 - i) for i in range(len(s))} for s, _ in pairs]
    real, calls = eflomal._run, []

    def one_astray(cmd, bar, **kwargs):  # the second run's forward links all point at English word 0
        done = real(cmd, bar, **kwargs)
        calls.append(cmd)
        if len(calls) == 2:
            path = cmd[cmd.index("-f") + 1]
            Path(path).write_text("".join(" ".join(f"{i}-0" for i in range(len(s))) + "\n" for s, _ in pairs))
        return done

    monkeypatch.setattr(eflomal, "_run", one_astray)
    forward, _ = eflomal.align_after([], pairs, draws=3)
    assert len(calls) == 3
    assert sum(len(f & e) for f, e in zip(forward, expected)) > 0.95 * sum(map(len, expected))
    assert sum(len(f - e) for f, e in zip(forward, expected)) < 0.05 * sum(map(len, expected))
    calls.clear()
    astray, _ = eflomal.align_after([], pairs, draws=2)  # of two, the astray run's links are not all kept
    assert len(calls) == 2 and sum(len(f - e) for f, e in zip(astray, expected)) < 0.05 * sum(map(len, expected))
