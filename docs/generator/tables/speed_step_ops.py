"""The table of ``docs/results/speed.md`` on a training step's host cost: the ops one step dispatches, GPU paths
forced, and the Python calls Lightning adds to a bare loop (``bench/speed/step_ops.py``)."""

from __future__ import annotations

from tables import Results, grid, num, table, times

NAMES = {"transformer": "Transformer 6+6", "bahdanau": "Bahdanau", "luong": "Luong"}


@table("speed_step_ops")
def speed_step_ops(r: Results) -> str:
    data = r("step_ops.json")
    rows = [[NAMES[o["model"]], o["precision"], f"**{num(o['kernel_ops'], 0)}**", num(o["casts"], 0),
             num(o["view_ops"], 0)] for o in data["ops"]]  # fmt: skip
    calls = data["python_calls"]
    b = data["batch"]
    out = grid(["model", "precision", "kernel ops a step (casts included)", "casts", "view and metadata ops"], rows)
    return out + (
        f"\n\nA batch of {b['rows']} pairs padded to {b['source']} source and {b['target']} target positions. Python "
        f"calls of a Transformer step: {num(calls['lightning'], 0)} through Lightning's Trainer (train.py's "
        f"callbacks), {num(calls['bare'], 0)} in a bare loop of the same step: {times(calls['ratio'])}."
    )
