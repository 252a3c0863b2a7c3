"""A finished run's results, kept with the run: ``results.json`` in its directory (and a line in its ``train.log``),
so that a run directory, or the runs of a multirun, can be compared without opening TensorBoard."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FILE = "results.json"


BRIEF = ("bleu", "chrf", "aer")  # the scores the end-of-run summary names (results.json has them all)


@dataclass
class RunResults:
    """The scores of a run: ``valid``, its last validation's (``bleu``, ``chrf``, ``loss``, ``aer`` where measured);
    ``test``, the test split's with the checkpoint it tested (None: ``run_test=false``); the ``best_checkpoint`` by
    ``monitor`` with its ``best_score``; the last checkpoint and training ``step``; the attention choice alignments
    read (``alignment``, with its AER, where validation measured one)."""

    run_dir: str
    model: str
    step: int
    valid: dict[str, float] = field(default_factory=dict)
    test: dict[str, float] | None = None
    tested_checkpoint: str | None = None
    monitor: str | None = None
    best_score: float | None = None
    best_checkpoint: str | None = None
    last_checkpoint: str | None = None
    alignment: dict[str, Any] | None = None

    @staticmethod
    def scores(metrics: dict[str, Any], split: str) -> dict[str, float]:
        """``{"bleu": 31.2, ...}`` of the metrics logged as ``<split>/<name>`` (finite numbers only)."""
        out = {}
        for key, value in metrics.items():
            if key.startswith(f"{split}/") and math.isfinite(number := float(value)):
                out[key.removeprefix(f"{split}/")] = round(number, 4)
        return out

    def brief(self) -> str:
        """The scores in one line: ``valid bleu 31.2, chrf 55.1, aer 0.12; test bleu 30.9, ...``."""
        parts = [f"{split} " + ", ".join(f"{k} {v:g}" for k, v in scores.items() if k in BRIEF)
                 for split, scores in (("valid", self.valid), ("test", self.test or {})) if scores]  # fmt: skip
        return "; ".join(parts) or "none, no validation or test ran"

    def write(self, run_dir: str | Path) -> Path:
        """``results.json`` in ``run_dir``. A resumed run only adds to what its directory's file holds: a section it
        did not measure (a resume past ``max_steps`` validates nothing) keeps the earlier run's."""
        path = Path(run_dir) / FILE
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            before = {}
        results = asdict(self)
        if isinstance(before, dict) and before.get("run_dir") == results["run_dir"]:
            results = {k: before.get(k, v) if v in (None, {}) else v for k, v in results.items()}
        path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, run_dir: str | Path) -> RunResults:
        """The results a run left in ``run_dir``; a ValueError naming the file where there are none."""
        path = Path(run_dir) / FILE
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ValueError(f"{path}: no results: the run did not finish (or predates results.json)") from None
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}: not the results of a run ({e})") from None
