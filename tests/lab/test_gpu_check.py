"""The GPU check (bench/gpu/gpu_check.py, with its pack, steps and summary in bench/gpu/gpu_pack.py, gpu_steps.py and
gpu_summary.py) on the CPU: JoeyNMT's environment made from an interpreter that is itself a virtual environment
(bench/anchors/joeynmt_env.py), Hydra and pytest installed from their wheels alone, the summary worked out from the
steps' figures (every target present, "not measured" and why where a figure is missing), the steps' order and caps,
stopping a step's whole process group, and the one-line refusal where the pack is missing."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from forked import run_script

from bench.anchors import joeynmt_env
from bench.gpu import gpu_check, gpu_pack, gpu_steps, gpu_summary
from bench.speed import step_batches, step_settings, step_speed
from conftest import ROOT, TRAIN_ENV

SIZES = {n: n for n in gpu_steps.SIZES}


def kept(request, tmp_path_factory, name: str) -> Path:
    """A folder in pytest's cache (a temporary one without it): wheels fetched once, not once a run."""
    cache = getattr(request.config, "cache", None)
    return cache.mkdir(name) if cache else tmp_path_factory.mktemp(name)


@pytest.fixture(scope="session")
def joeynmt_wheels(request, tmp_path_factory) -> Path:
    """JoeyNMT's wheels for this Python (from PyPI), fetched once."""
    folder = kept(request, tmp_path_factory, "joeynmt-wheels")
    try:
        for requirement in joeynmt_env.REQUIREMENTS:
            joeynmt_env.wheel_for(requirement, folder)
    except FileNotFoundError:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(folder)]
        subprocess.run([*cmd, *joeynmt_env.REQUIREMENTS], check=True, timeout=300)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("pip", [True, False], ids=["pip", "unpacked"])
def test_joeynmt_env_made_from_a_venv_imports_joeynmt_and_the_outer_torch(joeynmt_wheels, tmp_path, pip):
    assert sys.prefix != sys.base_prefix, "the test runs from a virtual environment, as the GPU machine's python"
    python = joeynmt_env.make_env(tmp_path / "venv", joeynmt_wheels, pip=pip)
    code = "import joeynmt.training, sentencepiece, torch; print(sentencepiece.__version__, torch.__file__)"
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["0.2.0", torch.__file__]  # its own sentencepiece wins; torch is this interpreter's


@pytest.mark.slow
@pytest.mark.parametrize("wheels", gpu_pack.WHEELS, ids=lambda w: w.module)
def test_hydra_and_pytest_installed_from_their_wheels_alone_import_from_the_work_folder(
    request, tmp_path_factory, tmp_path, wheels
):
    """As the check installs Hydra and pytest where the GPU machine lacks them: into a folder put first on
    PYTHONPATH, without pip (unpacked), so that their modules and pytest's plugin come from there."""
    folder = kept(request, tmp_path_factory, f"{wheels.module}-wheels")
    if not (folder / wheels.wheel).is_file():
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder), *wheels.requirements]
        subprocess.run(cmd, check=True, timeout=300)
    joeynmt_env.install(wheels.requirements, folder, tmp_path / "packages", pip=False)
    module, version = wheels.module, wheels.requirements[0].split("==")[1]
    code = f"import {module}; print({module}.__version__, {module}.__file__)"
    env = {"PYTHONPATH": str(tmp_path / "packages"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split() == [version, str(tmp_path / "packages" / module / "__init__.py")]
    if module == "pytest":  # pytest-timeout found by its entry point, as the project's `timeout` setting needs
        cmd = [sys.executable, "-m", "pytest", "--version", "--version"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
        assert f"pytest-timeout-2.4.0 at {tmp_path / 'packages' / 'pytest_timeout.py'}" in out.stdout + out.stderr


def test_the_packed_wheels_pin_the_projects_versions():
    """Hydra's and pytest's wheels are the versions requirements.txt pins (the others, what pytest imports)."""
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().split() if "==" in line)
    for wheels in gpu_pack.WHEELS:
        for requirement in wheels.requirements:
            name, version = requirement.split("==")
            assert pins.get(name, version) == version, requirement
    assert {"pytest", "pytest-timeout", "hydra-core", "omegaconf"} <= {
        r.split("==")[0] for w in gpu_pack.WHEELS for r in w.requirements
    }


def test_a_wheel_is_chosen_for_this_python_and_a_missing_one_named(tmp_path):
    this = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for name in ("sentencepiece-0.2.0-cp39-cp39-manylinux2014_x86_64.whl",
                 f"sentencepiece-0.2.0-{this}-{this}-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                 "subword_nmt-0.3.8-py3-none-any.whl"):  # fmt: skip
        (tmp_path / name).touch()
    assert this in joeynmt_env.wheel_for("sentencepiece==0.2.0", tmp_path).name
    assert joeynmt_env.wheel_for("subword-nmt==0.3.8", tmp_path).name.startswith("subword_nmt-0.3.8")
    with pytest.raises(FileNotFoundError, match="joeynmt==2.3.0"):
        joeynmt_env.wheel_for("joeynmt==2.3.0", tmp_path)


def test_joeynmts_timed_config_validates_beyond_the_run_on_the_gpu_at_its_batch():
    training = {"batch_size": 2048, "logging_freq": 50, "validation_freq": 150, "use_cuda": False}
    text = yaml.safe_dump({"use_cuda": False, "training": training})
    cfg = yaml.safe_load(gpu_steps.joeynmt_config(text, gpu=True, batch=16384, logging_freq=5))
    assert cfg["use_cuda"] is cfg["training"]["use_cuda"] is True
    assert cfg["training"]["batch_size"] == 16384 and cfg["training"]["logging_freq"] == 5
    assert cfg["training"]["validation_freq"] >= 10**9


# --- the summary ----------------------------------------------------------------------------------------------------

TIGHT = [1.0 + d for d in (-0.004, 0.002, -0.001, 0.003, 0.0, -0.002, 0.001, -0.003, 0.004, 0.0, 0.002, -0.002)]
NOISY = [1.0 + d for d in (-0.2, 0.15, -0.1, 0.25, 0.0, -0.2, 0.1, -0.15, 0.2, 0.05, -0.25, 0.1)]  # IQR/median ~ 0.3
BATCHES, TOKENS = 6, 40_800  # a made-up block: 6 batches of 6,800 real target tokens


def speed_run(name: str, tokens: int, rate: float, blocks: int = 12, spread=TIGHT, busy: float = 0.95):
    """A step_speed.py run of ``name`` at ``tokens`` made up: ``rate`` target tokens/s in every block (times the
    ``spread`` pattern), its host half its wall, its GPU busy ``busy`` of its median block."""
    setting = step_settings.Setting.parse(name)
    batches = step_batches.Batches(tokens, device=[None] * BATCHES, tokens=TOKENS, flops={setting.model: 1e12})
    run = step_speed.Run(setting, batches, warmup_s=1.0)
    run.walls = [TOKENS / (rate * f) for f in spread[:blocks]]
    run.hosts = [w / 2 for w in run.walls]
    run.device_s, run.device_ops = busy * TOKENS / rate, 900 * BATCHES
    return run


def speed_part(*runs) -> dict:
    """A step_speed.py JSON of ``runs``, as its Recorder writes it."""
    gemm = {"tf32": 4e5, "bf16": 8e5, "highest": 6e4}
    measured = [r for r in runs if r.walls]
    return {"runs": [r.row(gemm) for r in runs], "ratios": step_speed.ratios(measured), "not_measured": {},
            "state": {"phase": "done"}, "peak_rss_gib": 2.5, "complete": True}  # fmt: skip


def figures() -> dict:
    """Every step's figures, made up: bf16 2x TF32 at 7,440 and 32,000 (1.5x at 16,000), TF32 1.5x IEEE float32, CUDA
    graphs 3x eager, every run's blocks within 1%."""
    rnn = [("bahdanau", 100_000), ("luong", 150_000)]
    speed = {
        "speed_7440": speed_part(
            speed_run("transformer:tf32", 7440, 120_000), speed_run("transformer:bf16", 7440, 240_000),
            speed_run("transformer:highest", 7440, 80_000), speed_run(gpu_steps.CUDNN_SETTING, 7440, 48_000),
            speed_run("transformer:tf32:graphs", 7440, 360_000), speed_run("transformer:bf16:graphs", 7440, 720_000),
            *(speed_run(f"{m}:{p}", 7440, r * f) for m, r in rnn for p, f in (("tf32", 1), ("bf16", 2))),
        ),
        "speed_large": speed_part(
            speed_run("transformer:tf32", 16000, 300_000), speed_run("transformer:bf16", 16000, 450_000),
            speed_run("transformer:tf32", 32000, 600_000), speed_run("transformer:bf16", 32000, 1_200_000),
            speed_run("transformer:bf16:graphs", 16000, 900_000),
            speed_run("transformer:bf16:graphs", 32000, 2_000_000),
        ),
        "speed_compiled": speed_part(
            speed_run("transformer:tf32", 7440, 120_000), speed_run("transformer:bf16", 7440, 240_000),
            speed_run("transformer:tf32:compile", 7440, 180_000), speed_run("transformer:bf16:compile", 7440, 240_000),
        ),
    }  # fmt: skip
    steps = {name: {"name": name, "status": "ok", "rc": 0} for name in (s.name for s in gpu_steps.STEPS)}
    steps["test_gpu"]["result"] = "9 passed in 61.20s"
    joeynmt = {"rnn": {"tok_per_s_steady_median": 25_000.0, "batch_padded_tokens": 16384},
               "transformer": {"tok_per_s_steady_median": 60_000.0, "batch_padded_tokens": 16384}}  # fmt: skip
    default = {"test_bleu": 99.1, "wall_s": 120.0, "updates": 1030}
    reference = json.loads(gpu_summary.REFERENCE.read_text())
    return {"speed": speed, "steps": steps, "default": default, "joeynmt": joeynmt, "reference": reference}


def test_the_summary_works_out_every_ratio_and_judges_it():
    s = gpu_summary.summarise(**figures(), sizes=SIZES)
    assert s["graphs_vs_eager.transformer.7440.bf16"]["value"] == pytest.approx(3.0)
    assert s["tokens_per_s.transformer.32000.bf16.graphs"]["status"] == "pass"
    judged = lambda key: tuple(s[key][k] for k in ("value", "threshold", "pass", "status"))  # noqa: E731
    assert judged("bf16_vs_tf32.bahdanau.7440") == (2.0, ">= 1", True, "pass") and s["bf16_vs_tf32.luong.7440"]["pass"]
    assert judged("bf16_vs_tf32.transformer.16000") == (1.5, ">= 1.3", True, "pass")
    assert judged("bf16_vs_tf32.transformer.32000") == (2.0, ">= 1.3", True, "pass")
    assert judged("bf16_vs_tf32.transformer.7440") == (2.0, None, None, "info")  # reported at 7,440
    assert (
        s["bf16_vs_tf32.transformer.16000"]["trusted"] and s["bf16_vs_tf32.transformer.16000"]["inputs"]["blocks"] == 12
    )
    assert s["bf16_vs_highest.transformer.7440"]["value"] == 3.0  # 240,000 / 80,000, block by block
    assert judged("tf32_vs_highest.transformer.7440") == (1.5, ">= 1.3", True, "pass")
    assert judged("cudnn_first_vs_default.transformer.7440") == (0.2, None, None, "info")
    step_ms = round(TOKENS / 120_000 / BATCHES * 1e3, 3)  # 56.7 ms: far from 8
    assert judged("step_ms.transformer.7440.tf32") == (step_ms, "<= 8", False, "fail")
    assert s["step_ms.transformer.7440.bf16"]["threshold"] == "<= 6" and s["step_ms.transformer.7440.bf16"]["trusted"]
    assert judged("host_ms.transformer.7440.bf16") == (round(step_ms / 4, 3), "<= 2", False, "fail")  # half of bf16's
    assert judged("gpu_busy.transformer.7440.tf32") == (0.95, ">= 0.9", True, "pass")
    assert judged("tokens_per_s.transformer.32000.bf16") == (1_200_000, ">= 1e+06", True, "pass")
    rnn, transformer = s["ours_vs_joeynmt.rnn"], s["ours_vs_joeynmt.transformer"]
    assert rnn["value"] == 8.0 and rnn["pass"] and rnn["inputs"]["ours"] == 200_000  # bf16 Bahdanau at 7,440
    assert rnn["inputs"]["ours_precision"] == "bf16"  # the faster, as trainer.precision=auto chooses
    assert transformer["value"] == 4.0 and transformer["status"] == "fail"
    slow_bf16 = figures()
    slow_bf16["speed"]["speed_7440"] = speed_part(speed_run("bahdanau:tf32", 7440, 100_000),
                                                  speed_run("bahdanau:bf16", 7440, 50_000))  # fmt: skip
    s2 = gpu_summary.summarise(**slow_bf16, sizes=SIZES)
    assert s2["ours_vs_joeynmt.rnn"]["inputs"]["ours_precision"] == "tf32" and s2["ours_vs_joeynmt.rnn"]["value"] == 4.0
    assert judged_of(s2, "bf16_vs_tf32.bahdanau.7440") == (0.5, ">= 1", False, "fail")
    bleu = s["default_run.bleu_vs_cpu"]
    assert (
        bleu["value"] == round(99.1 - 99.6312, 3) and bleu["pass"] and bleu["inputs"]["reference_test_bleu"] == 99.6312
    )
    assert s["default_run.wall_s"]["value"] == 120.0 and s["default_run.wall_s"]["status"] == "fail"
    assert s["test_gpu"]["value"] == 0 and s["test_gpu"]["pass"]
    assert s["compiled_vs_eager.transformer.7440.tf32"]["value"] == 1.5  # 180,000 / 120,000
    assert s["compiled_vs_eager.transformer.7440.bf16"]["value"] == 1.0


def judged_of(summary: dict, key: str) -> tuple:
    return tuple(summary[key][k] for k in ("value", "threshold", "pass", "status"))


def test_a_ratio_is_judged_only_where_both_runs_spread_little_over_enough_blocks():
    """A ratio whose settings' blocks spread over 5% (IQR/median), or that has under 10 blocks, is "untrusted": its
    value is there, neither pass nor fail, and why says which spread; a value target keeps its verdict, its trust
    beside it."""
    parts = figures()
    parts["speed"]["speed_large"] = speed_part(
        speed_run("transformer:tf32", 16000, 300_000), speed_run("transformer:bf16", 16000, 450_000, spread=NOISY),
        speed_run("transformer:tf32", 32000, 600_000, blocks=9), speed_run("transformer:bf16", 32000, 1_200_000),
    )  # fmt: skip
    s = gpu_summary.summarise(**parts, sizes=SIZES)
    noisy, short = s["bf16_vs_tf32.transformer.16000"], s["bf16_vs_tf32.transformer.32000"]
    assert noisy["status"] == "untrusted" and noisy["pass"] is None and noisy["trusted"] is False
    assert noisy["value"] == pytest.approx(1.5, rel=0.1)
    assert "IQR/median transformer:bf16 26.8%, transformer:tf32 0.4% over 12 blocks" in noisy["why"]
    assert short["status"] == "untrusted" and short["value"] == 2.0 and "0.4% over 9 blocks" in short["why"]
    big = s["tokens_per_s.transformer.32000.bf16"]
    assert big["status"] == "pass" and big["trusted"] is True
    parts["speed"]["speed_7440"]["runs"][0] = speed_run("transformer:tf32", 7440, 1e7, spread=NOISY).row({})
    fast = gpu_summary.summarise(**parts, sizes=SIZES)["step_ms.transformer.7440.tf32"]  # a value: judged all the same
    assert fast["status"] == "pass" and fast["trusted"] is False and fast["inputs"]["iqr_over_median"] > 0.05
    parts["speed"]["speed_large"]["runs"][1]["iqr_over_median"] = 0.3
    assert gpu_summary.summarise(**parts, sizes=SIZES)["bf16_vs_tf32.transformer.16000"]["status"] == "untrusted"


def test_a_missing_figure_is_not_measured_with_its_reason_and_every_target_stays():
    full = gpu_summary.summarise(**figures(), sizes=SIZES)
    empty = gpu_summary.summarise({}, {}, {}, {}, {}, SIZES)
    assert set(empty) == set(full) and len(full) == 31
    assert all(e["status"] == "not measured" and e["why"] and e["value"] is None for e in empty.values())
    assert {e["status"] for e in full.values()} <= {"pass", "fail", "info"}

    parts = figures()
    del parts["speed"]["speed_large"]
    parts["steps"]["speed_large"] = {"name": "speed_large", "status": "timed out", "rc": None}
    parts["speed"]["speed_compiled"] = {  # stopped while compiling its second setting, before any block
        "runs": [r.row({}) for r in (speed_run("transformer:tf32", 7440, 1.0, blocks=0),)],
        "ratios": [], "state": {"phase": "warm-up", "setting": "transformer:tf32:compile", "since_s": 31.0},
        "not_measured": {"transformer:bf16:compile": "not warmed up: 50 s of the 60 s limit gone"},
    }  # fmt: skip
    parts["steps"]["speed_compiled"] = {"name": "speed_compiled", "status": "timed out", "rc": None}
    parts["joeynmt"]["transformer"] = {"parse_error": "AttributeError: 'NoneType' object has no attribute 'group'"}
    parts["default"] = {}
    parts["steps"]["default_run"] = {"name": "default_run", "status": "skipped", "why": "3 s of the budget left"}
    parts["steps"]["test_gpu"]["result"] = "9 skipped in 2.01s"
    s = gpu_summary.summarise(**parts, sizes=SIZES)
    assert s["bf16_vs_tf32.transformer.16000"]["why"] == "step speed_large timed out"
    assert s["tokens_per_s.transformer.32000.bf16"]["why"] == "step speed_large timed out"
    assert s["bf16_vs_tf32.luong.7440"]["status"] == "pass"
    tf32 = s["compiled_vs_eager.transformer.7440.tf32"]["why"]
    assert "timed out" in tf32 and "setting transformer:tf32:compile" in tf32 and "since_s 31.0" in tf32
    assert "not warmed up: 50 s" in s["compiled_vs_eager.transformer.7440.bf16"]["why"]
    assert "AttributeError" in s["ours_vs_joeynmt.transformer"]["why"] and s["ours_vs_joeynmt.rnn"]["pass"]
    assert (
        s["default_run.bleu_vs_cpu"]["why"]
        == s["default_run.wall_s"]["why"]
        == ("step default_run skipped (3 s of the budget left)")
    )
    assert s["test_gpu"]["value"] == 9 and s["test_gpu"]["status"] == "fail"  # skipped is not green
    assert {m["step"] for m in gpu_summary.memory(parts["speed"])} == {"speed_7440", "speed_compiled"}


# --- bench/speed/step_speed.py: its batches, blocks and ratios ---------------------------------------------------


def test_the_fixed_batches_cover_every_shape_where_they_can_and_stand_for_the_epoch_where_not():
    shapes = [(32, 8, 8)] * 10 + [(16, 16, 16)] * 5 + [(8, 24, 32)] * 2 + [(4, 48, 56)]
    chosen = step_batches.choose(shapes, 6)
    assert {shapes[i] for i in chosen} == set(shapes) and len(chosen) == 6 and chosen == sorted(chosen)
    assert step_batches.choose(shapes, 4) == [0, 10, 15, 17]  # one of each shape, no more
    assert [shapes[i] for i in step_batches.choose(shapes, 3)] == [(32, 8, 8), (32, 8, 8), (8, 24, 32)]  # quantiles
    assert len(step_batches.choose(shapes, 40)) == len(shapes)


def test_ratios_come_from_the_same_blocks_and_are_trusted_only_when_both_spread_little():
    tight, noisy = speed_run("transformer:tf32", 7440, 100_000), speed_run("transformer:bf16", 7440, 200_000)
    other = speed_run("luong:tf32", 7440, 50_000)
    found = {(r["a"], r["b"]): r for r in step_speed.ratios([tight, noisy, other])}
    assert set(found) == {("transformer:tf32", "transformer:bf16"), ("transformer:bf16", "transformer:tf32")}
    assert (
        found["transformer:bf16", "transformer:tf32"]["value"] == 2.0
        and found["transformer:bf16", "transformer:tf32"]["trusted"]
    )
    noisy.walls = [TOKENS / (200_000 * f) for f in NOISY]
    assert not step_speed.ratios([tight, noisy])[0]["trusted"]
    noisy.walls = [TOKENS / (200_000 * f) for f in TIGHT[:9]]  # tight, but under 10 blocks
    assert [r["blocks"] for r in step_speed.ratios([tight, noisy])] == [9, 9]
    assert not any(r["trusted"] for r in step_speed.ratios([tight, noisy]))
    row = tight.row({"tf32": 1e3})
    assert row["step_ms"] == round(TOKENS / 100_000 / BATCHES * 1e3, 3) and row["gpu_busy"] == 0.95
    assert row["iqr_over_median"] < 0.01 and row["fraction_of_gemm"] == round(1e12 * 100_000 / TOKENS / 1e9 / 1e3, 4)


def test_gpu_busy_adds_the_devices_own_activity_and_leaves_the_hosts_and_annotations_out():
    from torch.autograd import DeviceType

    event = lambda device, us, note=False: SimpleNamespace(device_type=device, self_device_time_total=us,  # noqa: E731
                                                           is_user_annotation=note)  # fmt: skip
    events = [event(DeviceType.CUDA, 30.0), event(DeviceType.CUDA, 12.5), event(DeviceType.CPU, 500.0),
              event(DeviceType.CUDA, 900.0, note=True)]  # fmt: skip
    assert step_speed.device_activity(events) == (42.5, 2)


def test_a_setting_is_parsed_into_its_overrides_and_a_wrong_one_refused():
    s = step_settings.Setting.parse(gpu_steps.CUDNN_SETTING)
    cudnn_first = ("cudnn", "flash", "efficient", "math")
    assert (s.model, s.precision, s.attention, s.kind) == ("transformer", "bf16", cudnn_first, "eager")
    assert s.name == gpu_steps.CUDNN_SETTING and "kernels.attention=[cudnn,flash,efficient,math]" in s.overrides()
    compiled = step_settings.Setting.parse("transformer:highest:compile")
    assert {"compile.enabled=true", "kernels.float32_matmul=highest"} <= set(compiled.overrides())
    assert step_settings.Setting.parse("transformer:bf16:graphs").overrides()[-1] == "compile.graphs=true"
    for wrong in ("transformer:fp16", "rnn:tf32", "luong:bf16:graphs", "transformer:bf16:cuda"):
        with pytest.raises(argparse.ArgumentTypeError, match=wrong.split(":")[0]):
            step_settings.Setting.parse(wrong)
    used = [*gpu_steps.SETTINGS_7440, *gpu_steps.SETTINGS_LARGE, *gpu_steps.SETTINGS_COMPILED]
    assert all(step_settings.Setting.parse(x).name == x for x in used)


# --- the steps ------------------------------------------------------------------------------------------------------


def test_the_steps_run_in_order_within_caps_that_add_up_to_the_budget():
    names = [s.name for s in gpu_steps.STEPS]
    assert names == ["wheels", "test_gpu", "speed_7440", "speed_large", "default_run", "joeynmt_env", "joeynmt_rnn",
                     "joeynmt_transformer", "speed_compiled"]  # fmt: skip
    assert sum(s.cap for s in gpu_steps.STEPS) == gpu_steps.BUDGET == 480
    *steps, last = gpu_steps.STEPS  # the last step gets what the others leave: its estimate may pass its cap
    assert all(s.estimate <= s.cap for s in steps) and sum(s.estimate for s in gpu_steps.STEPS) <= 480
    caps = {s.name: s.cap for s in gpu_steps.STEPS}
    assert caps["test_gpu"] > 75  # what it ran out of in the first check (gpu_check_h100_4d85f5c.json)
    docs = (ROOT / "docs" / "developing.md").read_text(encoding="utf-8")
    for s in gpu_steps.STEPS:
        assert f"  {s.name:<20} {s.cap:>4.0f} {s.estimate:>4.0f} {s.smoke_cap:>5.0f}" in gpu_steps.steps_help()
        assert re.search(rf"^\| `{s.name}` \| .* \| {s.cap:.0f} \| {s.estimate:.0f} \|$", docs, re.M), (
            s.name
        )  # the table


def test_a_step_stops_at_its_cap_with_what_it_started_and_the_last_gets_what_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_steps, "MIN_STEP", 0)
    check = gpu_steps.Check(tmp_path, budget=48)  # a tenth of the caps: wheels' 0.5 s
    assert check.limit("wheels") == pytest.approx(0.5) and check.limit("default_run") == pytest.approx(11.5)
    assert check.limit("speed_compiled") == pytest.approx(48, abs=0.5)  # the last: all that is left
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    step = check.run("wheels", ["bash", "-c", f"sleep 60 & echo $! > {pid_file}; wait"])
    assert step["status"] == "timed out" and time.monotonic() - started < 10
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    assert check.run("test_gpu", ["true"])["status"] == "ok"
    assert (tmp_path / "logs" / "wheels.log").is_file()


def test_a_speed_step_ends_itself_in_its_cap_keeps_what_it_measured_and_never_an_earlier_checks(tmp_path):
    check = gpu_steps.Check(tmp_path, budget=480)
    args = SimpleNamespace(accelerator="gpu", data=tmp_path, cache=tmp_path, smoke=False, batches=6, blocks=12)
    out = tmp_path / "parts" / "speed_7440.json"
    out.parent.mkdir()
    out.write_text(json.dumps(speed_part(speed_run("luong:tf32", 7440, 1.0))))  # an earlier check's
    finished = speed_part(speed_run("bahdanau:tf32", 7440, 225_000.0, blocks=3),
                          speed_run("bahdanau:bf16", 7440, 1.0, blocks=0)) | {"complete": False}  # fmt: skip
    commands = []

    def stopped(name, cmd, env):  # step_speed.py wrote its third block, then the cap came
        commands.append(cmd)
        out.write_text(json.dumps(finished))
        return check.steps.setdefault(name, {"name": name, "status": "timed out"})

    check.run = stopped
    got = gpu_steps.speed_run(check, "speed_7440", args, {}, gpu_steps.SETTINGS_7440, ["7440"])
    assert got == finished and check.steps["speed_7440"]["runs_measured"] == 1
    cmd = commands[0]
    limit = cmd[cmd.index("--time-limit") + 1]
    assert limit == f"{90 - gpu_steps.SPEED_MARGIN_S}" and cmd[-len(gpu_steps.SETTINGS_7440) - 1] == "--settings"
    assert cmd[cmd.index("--blocks") + 1] == "12" and cmd[cmd.index("--max-tokens") + 1] == "7440"
    check.run = lambda name, cmd, env: {"name": name, "status": "failed"}  # wrote nothing: nothing, not the old file
    assert gpu_steps.speed_run(check, "speed_7440", args, {}, gpu_steps.SETTINGS_7440, ["7440"]) == {}


@pytest.mark.slow
def test_step_speed_on_the_cpu_writes_what_the_summary_reads(tmp_path):
    """bench/speed/step_speed.py for real on a tiny corpus and model: each setting's blocks, the ratios of the same
    blocks and the shapes it drew, read by the summary as the speed_7440 step's."""
    import random

    rng = random.Random(1)
    fr, en = (
        "le la un une chat chien mange voit rouge bleu petit grand maison".split(),
        "the a cat dog eats sees red blue small big house".split(),
    )
    data = tmp_path / "splits"
    data.mkdir()
    for split, n in (("train", 600), ("valid", 20), ("test", 20)):
        words = lambda vocab: " ".join(rng.choices(vocab, k=rng.randint(2, 12)))  # noqa: E731
        lines = [f"{words(fr)}\t{words(en)}" for _ in range(n)]
        (data / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "speed.json"
    cmd = [sys.executable, "-m", "bench.speed.step_speed", "data.prepare.spm.vocab_size=60", "model.emb_size=32",
           "model.encoder.num_layers=1", "model.decoder.num_layers=1", "model.encoder.ff_size=64",
           "model.decoder.ff_size=64", "--data", str(data), "--cache", str(tmp_path / "cache"), "--json", str(out),
           "--threads", "1", "--gemm-n", "64", "--max-tokens", "96", "--batches", "3", "--blocks", "4",
           "--settings", "transformer:tf32", "transformer:highest"]  # fmt: skip
    proc = run_script(cmd, ROOT, TRAIN_ENV, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = json.loads(out.read_text())
    assert payload["complete"] and payload["state"]["phase"] == "done" and len(payload["sizes"]) == 1
    size = payload["sizes"][0]
    assert size["batches"] == 3 == sum(s["batches"] for s in size["shapes"]) and size["pad_multiple"] == 8
    assert all(s["shape"][1] % 8 == 0 and s["shape"][2] % 8 == 0 for s in size["shapes"])
    runs = {r["setting"]: r for r in payload["runs"]}
    assert set(runs) == {"transformer:tf32", "transformer:highest"}
    assert all(r["blocks"] == 4 and len(r["block_seconds"]) == 4 and r["gpu_busy"] is None for r in runs.values())
    assert {(r["a"], r["b"]) for r in payload["ratios"]} == {("transformer:tf32", "transformer:highest"),
                                                             ("transformer:highest", "transformer:tf32")}  # fmt: skip
    s = gpu_summary.summarise({"speed_7440": payload}, {}, {}, {}, {}, {7440: 96, 16000: 0, 32000: 0})
    assert s["tf32_vs_highest.transformer.7440"]["status"] == "untrusted"  # 4 blocks: under 10
    assert s["tf32_vs_highest.transformer.7440"]["value"] > 0 and s["step_ms.transformer.7440.tf32"]["value"] > 0


def test_a_step_without_budget_left_is_skipped_and_says_so(tmp_path):
    check = gpu_steps.Check(tmp_path, budget=0)
    assert check.run("test_gpu", ["true"]) == {"name": "test_gpu", "status": "skipped", "why": "0 s of the budget left"}


def test_a_missing_pack_is_refused_in_one_line_that_says_how_to_make_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(gpu_check, "PACK", tmp_path / ".gpu")
    monkeypatch.setattr(sys, "argv", ["gpu_check.py"])
    with pytest.raises(SystemExit) as e:
        gpu_check.main()
    assert "--data" in str(e.value) and "python -m bench.gpu.gpu_check --pack" in str(e.value)
    assert "\n" not in str(e.value)

    data = tmp_path / "splits"
    data.mkdir()
    for split in ("train.tsv", "valid.tsv", "test.tsv"):
        (data / split).write_text("Bonjour.\tHello.\n")
    cmd = [sys.executable, "-m", "bench.gpu.gpu_check", "--data", str(data), "--joeynmt-wheels", str(tmp_path / "none")]
    proc = run_script(cmd, ROOT, TRAIN_ENV, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "--joeynmt-wheels" in proc.stderr and "--pack" in proc.stderr


@pytest.mark.parametrize("packed, commit, dirty", [("abc123-dirty", "abc123", True), ("abc123", "abc123", False)])
def test_the_packed_commit_wins_over_the_git_of_the_copy_it_was_sent_with(monkeypatch, packed, commit, dirty):
    """A lent machine's copy may carry the .git of an older commit than its files: the pack's commit is the one."""
    from bench import common

    monkeypatch.setenv("NMT_COMMIT", packed)
    seen = common.provenance()
    assert (seen["commit"], seen["dirty"], seen["commit_from"]) == (commit, dirty, "NMT_COMMIT")
    monkeypatch.delenv("NMT_COMMIT")
    assert common.provenance()["commit"] == common.git("rev-parse", "HEAD") and "commit_from" not in common.provenance()
