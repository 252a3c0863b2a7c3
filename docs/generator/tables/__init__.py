"""The results tables of the docs and the README, each rendered from JSON under ``bench/results/`` by a function that
``@table("name")`` registers; ``docs/generator/report.py`` puts each where a page asks for it. A module per docs page,
named for it (a long page's sections in modules of their own: ``alignment_*.py``, ``speed_*.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TABLES: dict[str, Callable[[Results], str]] = {}


def table(name: str) -> Callable[[Callable[[Results], str]], Callable[[Results], str]]:
    """Register a renderer under ``name``: a page holds it as ``<!-- results: name -->`` ... ``<!-- /results -->``."""

    def register(render: Callable[[Results], str]) -> Callable[[Results], str]:
        if name in TABLES:
            raise ValueError(f"two tables named {name!r}")
        TABLES[name] = render
        return render

    return register


@dataclass
class Results:
    """The result files under one folder, read by their path relative to it; remembers which were read, so that a
    rendered table can name its sources and their provenance."""

    folder: Path
    read: list[str] = field(default_factory=list)

    def __call__(self, name: str) -> dict:
        """The JSON of ``name`` (relative to the folder, e.g. ``"engine.json"``), its provenance left out."""
        if name not in self.read:
            self.read.append(name)
        data = self.load(name)
        data.pop("provenance", None)
        return data

    def load(self, name: str) -> dict:
        """The whole JSON of ``name``, provenance included."""
        return json.loads((self.folder / name).read_text(encoding="utf-8"))

    def glob(self, pattern: str) -> list[str]:
        """The names matching ``pattern`` (relative, sorted)."""
        return sorted(p.relative_to(self.folder).as_posix() for p in self.folder.glob(pattern))


def grid(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def num(x: float | int | None, digits: int = 1) -> str:
    """``x`` with ``digits`` decimals and thousands separators; "–" for None."""
    if x is None:
        return "–"
    return f"{x:,.{digits}f}" if isinstance(x, float) or digits else f"{x:,}"


def pct(x: float | None, digits: int = 1) -> str:
    """A share (0.123) as a percentage ("12.3%"); "–" for None."""
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def times(x: float | None, digits: int = 2) -> str:
    """A ratio as "1.23×"; "–" for None."""
    return "–" if x is None else f"{x:.{digits}f}×"


SPLIT = ("beam 5: unseen references", "beam 5: seen references")


def split_cells(row: dict) -> list[str]:
    """A score row's BLEU on its unseen and its seen part (:func:`nmt.scores.score_split`), "–" where not measured."""
    return [num(row.get("unseen_bleu")), num(row.get("seen_bleu"))]


def split_note(rows: list[list[dict]]) -> str:
    """What the unseen and seen columns count, from the first row that was split; for rows that were not, why "–"."""
    split = [r for group in rows for r in group if r.get("unseen_sentences") is not None]
    unsplit = any(r.get("unseen_sentences") is None for group in rows for r in group)
    note = ""
    if split:
        r = split[0]
        note = (f"Unseen: the {r['unseen_sentences']:,} of {r['sentences']:,} test pairs whose English side does not "
                f"occur in the run's training data (translation); seen: the other {r['seen_sentences']:,}, which a "
                "model can score on by recall.")  # fmt: skip
    return " ".join(filter(None, [note, "–: measured before scores were split." if unsplit else ""]))
