"""The tables of what was measured on GPUs, behind ``docs/training.md``'s GPU defaults, shown in the lab notebook
(``docs/lab/2026-11-26-speed-gpu-first-measurement.md``, ``docs/lab/2026-11-28-speed-gpu-check-first-call.md``)."""

from __future__ import annotations

from nmt.config_keys import model_families
from tables import Results, grid, num, pct, table, times
from tables.speed import NAMES, run_of


@table("gpu_first_measurement")
def gpu_first_measurement(r: Results) -> str:
    """The first GPU measurement, of the project before the GPU defaults: float32 (no TF32) against bf16-mixed with
    PyTorch's own choice of attention kernel."""
    data = r("gpu/train_speed_h200_ac4e2cb.json")
    rows = []
    for max_tokens in sorted({run["max_tokens"] for run in data["runs"]}):
        for model in model_families():
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


GPU_CHECK = "gpu/gpu_check_h100_4d85f5c.json"


def _judged(entry: dict) -> str:
    if entry["status"] == "not measured":
        return f"not measured: {entry['why']}"
    return entry["status"]


@table("gpu_check")
def gpu_check(r: Results) -> str:
    """``bench/gpu/gpu_check.py``'s summary: every target with its value, threshold and verdict; what its speed runs
    used of the card's GEMM rate and how far one run's readings spread; its steps' times."""
    data = r(GPU_CHECK)
    rows = [[f"`{key}`", e["what"], num(e["value"], 2), (e["threshold"] or "–").replace("|", "\\|"), _judged(e)]
            for key, e in data["summary"].items()]  # fmt: skip
    runs = [run for n in (7440, 16000) for run in data["speed"][f"speed_{n}"]["runs"]]  # TF32 and bf16 alike
    shares = [run["fraction_of_gemm"] for run in runs]
    bf16 = [e["value"] for k, e in data["summary"].items() if k.startswith("bf16_vs_tf32.") and e["value"] is not None]
    low, high = run_of(data["speed"]["speed_7440"], "transformer", "32-true", max_tokens=7440)["tgt_tokens_per_s_range"]
    faster = "; ".join(
        f"{model} {times(max(i['ours'], i['ours_float32']) / i['joeynmt'], 1)}"
        for model in ("rnn", "transformer")
        if (i := data["summary"][f"ours_vs_joeynmt.{model}"].get("inputs", {})).get("joeynmt")
    )
    steps = ", ".join(f"{s['name']} {num(s.get('seconds'), 0)} s" + ("" if s["status"] == "ok" else f" ({s['status']})")
                      for s in data["steps"])  # fmt: skip
    return (
        grid(["target", "what", "value", "threshold", "verdict"], rows)
        + f"\n\n{data['speed']['speed_7440']['device']}. The speed runs used "
        f"{pct(min(shares))} to {pct(max(shares))} of the card's GEMM rate in their precision; bf16-mixed was "
        f"slower than float32 (TF32) in {sum(v < 1 for v in bf16)} of {len(bf16)} models and sizes; the float32 "
        f"Transformer's tokens/s at 7,440 spread from {num(low, 0)} to {num(high, 0)} within its run. "
        f"Ours against JoeyNMT in the faster of the two precisions, as `trainer=gpu`'s `auto` now chooses: {faster}. "
        f"Steps: {steps}."
    )
