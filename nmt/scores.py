"""BLEU and chrF of translations (sacrebleu), on the whole set and on the part whose references the model never saw.

A test pair whose English side occurs verbatim among the training targets can be scored by recall: Tatoeba holds many
French variants of one English sentence, and a split made by hashing the French puts the same English on both sides
(1,518 of its 3,086 test pairs). :func:`score_split` scores the whole set, its *unseen* part (references not among the
training targets) and its *seen* part, each with its size, so that translation and recall can be told apart.

    seen = read_targets("train.tsv")                     # or training_targets(...) of a run's own corpus
    print(score_split(hyps, refs, seen).lines())
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sacrebleu

PARTS = ("all", "unseen", "seen")


def normalised(sentence: str) -> str:
    """A sentence as it is compared with the training targets: runs of white space made one space, ends stripped."""
    return " ".join(sentence.split())


def corpus_scores(hyps: Sequence[str], refs: Sequence[str]) -> tuple[float, float]:
    """Corpus BLEU and chrF of ``hyps`` against ``refs`` (one reference each, detokenised; sacrebleu's defaults: 13a
    tokenisation, exponential smoothing): every BLEU and chrF the project reports, validation's included."""
    return sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score, sacrebleu.corpus_chrf(list(hyps), [list(refs)]).score


def sacrebleu_lines(hyps: Sequence[str], refs: Sequence[str]) -> list[str]:
    """sacrebleu's own report of BLEU and chrF, each with its signature (``translate.py --ref``)."""
    out = []
    for metric in (sacrebleu.BLEU(), sacrebleu.CHRF()):
        out.append(f"{metric.corpus_score(list(hyps), [list(refs)])}  ({metric.get_signature()})")
    return out


@dataclass(frozen=True)
class Score:
    """Corpus BLEU and chrF (sacrebleu defaults: 13a tokenisation, detokenised text) of ``sentences`` pairs."""

    bleu: float
    chrf: float
    sentences: int

    @classmethod
    def of(cls, hyps: Sequence[str], refs: Sequence[str]) -> Score | None:
        """The score of ``hyps`` against ``refs``; None for no pairs."""
        if not hyps:
            return None
        bleu, chrf = corpus_scores(hyps, refs)
        return cls(round(bleu, 2), round(chrf, 2), len(hyps))


@dataclass(frozen=True)
class ScoreSplit:
    """A set's score, and (where the training targets were given) its unseen and its seen part's."""

    all: Score
    unseen: Score | None = None
    seen: Score | None = None
    split: bool = False  # whether the training targets were given (an empty part is then None)

    def record(self) -> dict:
        """The flat JSON form: ``bleu``, ``chrf``, ``sentences`` and, where split, the same prefixed ``unseen_`` and
        ``seen_`` (None for an empty part)."""
        out = {"bleu": self.all.bleu, "chrf": self.all.chrf, "sentences": self.all.sentences}
        if self.split:
            for name in ("unseen", "seen"):
                part = getattr(self, name)
                out |= {f"{name}_{k}": getattr(part, k, None) for k in ("bleu", "chrf", "sentences")}
        return out

    def lines(self) -> list[str]:
        """One line a part, as a console shows it: ``BLEU 49.14  chrF 62.40  all 3,086 pairs``."""
        named = [("all", self.all)] + ([("unseen", self.unseen), ("seen", self.seen)] if self.split else [])
        return [f"BLEU {p.bleu:5.2f}  chrF {p.chrf:5.2f}  {name} ({p.sentences:,} pairs)" if p else f"{name}: no pairs"
                for name, p in named]  # fmt: skip


def bleu_signature() -> str:
    """sacrebleu's signature of the BLEU :class:`Score` computes (its version, tokenisation, smoothing)."""
    metric = sacrebleu.BLEU()
    metric.corpus_score(["a"], [["a"]])  # a signature needs the number of references: one
    return str(metric.get_signature())


def unseen_mask(refs: Sequence[str], seen: frozenset[str]) -> list[bool]:
    """For each reference, whether it is not among ``seen`` (training targets, :func:`normalised`)."""
    return [normalised(r) not in seen for r in refs]


def score_split(hyps: Sequence[str], refs: Sequence[str], seen: frozenset[str] | None = None) -> ScoreSplit:
    """The score of ``hyps`` against ``refs``; with ``seen`` (the training targets), that of its two parts too."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} translations but {len(refs)} references")
    whole = Score.of(hyps, refs)
    if whole is None:
        raise ValueError("no translations to score")
    if seen is None:
        return ScoreSplit(whole)
    mask = unseen_mask(refs, seen)

    def part(unseen: bool) -> Score | None:
        kept = [i for i, m in enumerate(mask) if m == unseen]
        return Score.of([hyps[i] for i in kept], [refs[i] for i in kept])

    return ScoreSplit(whole, part(True), part(False), split=True)


def targets(sentences: Iterable[str]) -> frozenset[str]:
    """Training targets as :func:`score_split` compares them."""
    return frozenset(normalised(s) for s in sentences)


def read_targets(path: str | Path) -> frozenset[str]:
    """The English sides of a training file: the second column of a ``.tsv`` file (French<TAB>English, as
    ``data=tsv`` and the Tatoeba splits have it), else every line of a text file. A ValueError naming the file and
    line where a TSV line has no second column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text ({e.reason}); give the training file as UTF-8") from None
    lines = [line.removesuffix("\r") for line in text.removesuffix("\n").split("\n")] if text else []
    if path.suffix != ".tsv":
        return targets(lines)
    out = []
    for lineno, row in enumerate(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
        if len(row) < 2:
            raise ValueError(f"{path}:{lineno}: no second (English) column; a .tsv file is French<TAB>English")
        out.append(row[1])
    return targets(out)
