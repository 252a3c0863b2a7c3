"""The cost of one decoding step against the output length so far, for outputs that run to the length budget.

    python -m bench.speed.long_output [--label after] [--src-len 512] [--models transformer luong bahdanau]

A model that has not learned to stop decodes until its budget (1.5 x the source + 10 pieces): here an untrained
model at its conf/model sizes, with EOS held back until the budget forces it. Each step is timed from one call
of the model's step to the next, so the search's own work (beam bookkeeping, kept attention, the cache) counts.
Reported per model and search: the median step time in windows of the output length, the last window over the
first (1.0: a step costs the same however long the output is), and the whole search's seconds. Results are kept
per --label in the JSON, so a run before a change and one after sit side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from bench.common import compose, options, table, write_json
from nmt.inference.search import SearchOptions, translate_batch
from nmt.models.seq2seq import build_model
from nmt.specials import EOS


class Unstoppable(nn.Module):
    """A model's one-step API with EOS held back (it is chosen only where the budget forces it); times each step."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model, self.times = model, []

    def encode(self, src: Tensor, src_len: Tensor):
        return self.model.encode(src, src_len)

    def step(self, state, prev_tokens: Tensor):
        self.times.append(time.perf_counter())
        logp, state, row = self.model.step(state, prev_tokens)
        logp[:, EOS] = -1e4
        return logp, state, row

    def reorder_state(self, state, index: Tensor):
        return self.model.reorder_state(state, index)


def measure(name: str, beam: int, src_len: int, window: int) -> dict:
    from omegaconf import OmegaConf

    torch.manual_seed(1)
    cfg = OmegaConf.to_container(compose([f"model={name}"]).model, resolve=True)
    model = Unstoppable(build_model(src_vocab_size=8000, tgt_vocab_size=8000, **cfg).eval())
    src = torch.randint(4, 8000, (1, src_len))
    options = SearchOptions(beam_size=beam, nbest=1)
    t0 = time.perf_counter()
    translate_batch(model, src, torch.tensor([src_len]), options)
    seconds = time.perf_counter() - t0
    steps = [b - a for a, b in zip(model.times, model.times[1:])]
    windows = [statistics.median(steps[i : i + window]) * 1e3 for i in range(0, len(steps) - window + 1, window)]
    return {
        "model": name,
        "search": "greedy" if beam == 1 else f"beam {beam}",
        "steps": len(model.times),
        "step_ms_by_window": [round(w, 2) for w in windows],
        "last_over_first": round(windows[-1] / windows[0], 2),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label", default="after")
    options(p, "models", models=["transformer", "luong", "bahdanau"])
    p.add_argument("--beams", type=int, nargs="+", default=[1, 2, 5])
    p.add_argument("--src-len", type=int, default=512)
    p.add_argument("--window", type=int, default=100, help="steps a median is taken over")
    options(p, "threads", "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rows = [measure(m, b, args.src_len, args.window) for m in args.models for b in args.beams]
    print(table(rows, ["model", "search", "steps", "step_ms_by_window", "last_over_first", "seconds"]))
    path = Path(args.json)
    results = json.loads(path.read_text()) if path.is_file() else {}
    results[args.label] = {"src_len": args.src_len, "window": args.window, "threads": args.threads, "runs": rows}
    write_json(path, results)


if __name__ == "__main__":
    main()
