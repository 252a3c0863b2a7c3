"""The tables of ``docs/training.md``: what was measured on GPUs."""

from __future__ import annotations

from tables import Results, grid, num, pct, table, times
from tables.speed import NAMES, run_of


@table("gpu_first_measurement")
def gpu_first_measurement(r: Results) -> str:
    """The first GPU measurement, of the project before the GPU defaults: float32 (no TF32) against bf16-mixed with
    PyTorch's own choice of attention kernel."""
    data = r("gpu/train_speed_h200_ac4e2cb.json")
    rows = []
    for max_tokens in sorted({run["max_tokens"] for run in data["runs"]}):
        for model in ("bahdanau", "luong", "transformer"):
            f32, bf16 = (run_of(data, model, p, max_tokens=max_tokens) for p in ("32-true", "bf16-mixed"))
            rows.append(
                [
                    NAMES[model],
                    num(max_tokens, 0),
                    num(f32["tgt_tokens_per_s"], 0),
                    num(bf16["tgt_tokens_per_s"], 0),
                    times(bf16["tgt_tokens_per_s"] / f32["tgt_tokens_per_s"]),
                    pct(f32["fraction_of_gemm"]),
                    pct(bf16["fraction_of_gemm"]),
                ]
            )
    gemm = data["gemm_gflops_per_s"]
    header = ["model", "padded tokens a batch", "float32: target tokens/s", "bf16-mixed: target tokens/s",
              "bf16 / float32", "float32: share of its GEMM", "bf16: share of its GEMM"]  # fmt: skip
    return (
        grid(header, rows)
        + f"\n\n{data['device']}; the same card's GEMM in the same run: float32 {num(gemm['float32'] / 1000, 1)} "
        f"TFLOP/s (TF32 off), bfloat16 {num(gemm['bfloat16'] / 1000, 1)} TFLOP/s."
    )


@table("gpu_default_run")
def gpu_default_run(r: Results) -> str:
    """``train.py trainer=gpu`` on the built-in corpus before the GPU defaults, against the same number of updates in
    float32 on a CPU, and the defaults' batch and schedule in float32 on a CPU."""
    runs = [
        ("H200, bf16-mixed (trainer=gpu before these defaults)", r("gpu/default_run_h200_ac4e2cb.json")),
        ("CPU, float32, the same updates", r("gpu/default_run_cpu_835.json")),
        ("CPU, float32, trainer=gpu's batch and schedule (these defaults)", r("gpu/default_run_cpu_gpu_schedule.json")),
    ]
    rows = [
        [name, num(d["step"], 0), num(d["test"]["bleu"]), num(d["test"]["chrf"]), num(d["test"]["aer"], 3)]
        for name, d in runs
    ]
    return grid(["run", "updates", "test BLEU", "test chrF", "test AER"], rows)
