"""The GPU check (bench/gpu/gpu_check.py, with its pack, steps and summary in bench/gpu/gpu_pack.py, gpu_steps.py and
gpu_summary.py) on the CPU: JoeyNMT's environment made from an interpreter that is itself a virtual environment
(bench/anchors/joeynmt_env.py), Hydra and pytest installed from their wheels alone, the summary worked out from the
steps' figures (every target present, "not measured" and why where a figure is missing), the steps' order and caps,
stopping a step's whole process group, and the one-line refusal where the pack is missing."""

from __future__ import annotations

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

from bench.anchors import joeynmt_env
from bench.gpu import gpu_check, gpu_pack, gpu_steps, gpu_summary
from conftest import ROOT

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


def speed_row(model: str, tokens: int, precision: str, rate: float, compiled: bool = False) -> dict:
    return {
        "model": model,
        "max_tokens": tokens,
        "precision": precision,
        "compiled": compiled,
        "tgt_tokens_per_s": rate,
    }


def figures() -> dict:
    """Every step's figures, made up: bf16 2x float32 at 7,440 (1.2x at 16,000), TF32 1.5x highest."""
    speed = {f"speed_{n}": {"runs": []} for n in gpu_steps.SIZES}
    for n in gpu_steps.SIZES:
        for model, base in (("bahdanau", 100_000), ("luong", 150_000), ("transformer", 120_000)):
            factor = 2.0 if n == 7440 else 1.2
            speed[f"speed_{n}"]["runs"] += [speed_row(model, n, "32-true", base),
                                            speed_row(model, n, "bf16-mixed", base * factor)]  # fmt: skip
    speed["speed_highest"] = {"runs": [speed_row("transformer", 7440, "32-true", 80_000)]}
    speed["speed_cudnn_first"] = {"runs": [speed_row("transformer", 7440, "bf16-mixed", 48_000)]}
    speed["speed_compiled"] = {"runs": [speed_row("transformer", 7440, "32-true", 180_000, True),
                                        speed_row("transformer", 7440, "bf16-mixed", 240_000, True)]}  # fmt: skip
    steps = {name: {"name": name, "status": "ok", "rc": 0} for name in (s.name for s in gpu_steps.STEPS)}
    steps["test_gpu"]["result"] = "9 passed in 61.20s"
    joeynmt = {"rnn": {"tok_per_s_steady_median": 25_000.0, "batch_padded_tokens": 16384},
               "transformer": {"tok_per_s_steady_median": 60_000.0, "batch_padded_tokens": 16384}}  # fmt: skip
    default = {"test_bleu": 99.1, "wall_s": 120.0, "updates": 1030}
    reference = json.loads(gpu_summary.REFERENCE.read_text())
    return {"speed": speed, "steps": steps, "default": default, "joeynmt": joeynmt, "reference": reference}


def test_the_summary_works_out_every_ratio_and_judges_it():
    s = gpu_summary.summarise(**figures(), sizes=SIZES)
    judged = lambda key: tuple(s[key][k] for k in ("value", "threshold", "pass", "status"))  # noqa: E731
    assert judged("bf16_vs_tf32.bahdanau.7440") == (2.0, ">= 1", True, "pass")
    assert s["bf16_vs_tf32.transformer.16000"]["value"] == 1.2 and s["bf16_vs_tf32.transformer.16000"]["pass"]
    assert s["bf16_vs_tf32.transformer.7440"]["threshold"] == ">= 1.5" and s["bf16_vs_tf32.transformer.7440"]["pass"]
    assert s["bf16_vs_highest.transformer.7440"]["value"] == 3.0  # 240,000 / 80,000
    assert s["tf32_vs_highest.transformer.7440"]["value"] == 1.5 and s["tf32_vs_highest.transformer.7440"]["pass"]
    assert judged("cudnn_first_vs_default.transformer.7440") == (0.2, None, None, "info")
    rnn, transformer = s["ours_vs_joeynmt.rnn"], s["ours_vs_joeynmt.transformer"]
    assert rnn["value"] == 8.0 and rnn["pass"] and rnn["inputs"]["ours"] == 200_000  # bf16 Bahdanau at 7,440
    assert rnn["inputs"]["ours_precision"] == "bf16-mixed"  # the faster, as trainer.precision=auto chooses
    assert transformer["value"] == 4.0 and transformer["status"] == "fail"
    slow_bf16 = figures()
    for row in slow_bf16["speed"]["speed_7440"]["runs"]:
        row["tgt_tokens_per_s"] /= 4 if row["precision"] == "bf16-mixed" else 1  # bf16 now half float32's speed
    rnn = gpu_summary.summarise(**slow_bf16, sizes=SIZES)["ours_vs_joeynmt.rnn"]
    assert rnn["inputs"]["ours_precision"] == "32-true" and rnn["value"] == 4.0  # 100,000 / 25,000
    bleu = s["default_run.bleu_vs_cpu"]
    assert (
        bleu["value"] == round(99.1 - 99.6312, 3) and bleu["pass"] and bleu["inputs"]["reference_test_bleu"] == 99.6312
    )
    assert s["default_run.wall_s"]["value"] == 120.0 and s["default_run.wall_s"]["status"] == "fail"
    assert s["test_gpu"]["value"] == 0 and s["test_gpu"]["pass"]
    assert s["compiled_vs_eager.transformer.7440.bf16-mixed"]["value"] == 1.0  # 240,000 / 240,000


def test_a_missing_figure_is_not_measured_with_its_reason_and_every_target_stays():
    full = gpu_summary.summarise(**figures(), sizes=SIZES)
    empty = gpu_summary.summarise({}, {}, {}, {}, {}, SIZES)
    assert set(empty) == set(full) and len(full) == 16
    assert all(e["status"] == "not measured" and e["why"] and e["value"] is None for e in empty.values())

    parts = figures()
    del parts["speed"]["speed_16000"]
    parts["steps"]["speed_16000"] = {"name": "speed_16000", "status": "timed out", "rc": None}
    parts["joeynmt"]["transformer"] = {"parse_error": "AttributeError: 'NoneType' object has no attribute 'group'"}
    parts["default"] = {}
    parts["steps"]["default_run"] = {"name": "default_run", "status": "skipped", "why": "3 s of the budget left"}
    parts["steps"]["test_gpu"]["result"] = "9 skipped in 2.01s"
    s = gpu_summary.summarise(**parts, sizes=SIZES)
    assert s["bf16_vs_tf32.luong.16000"]["why"] == "step speed_16000 timed out"
    assert s["bf16_vs_tf32.luong.7440"]["status"] == "pass"
    assert "AttributeError" in s["ours_vs_joeynmt.transformer"]["why"] and s["ours_vs_joeynmt.rnn"]["pass"]
    assert (
        s["default_run.bleu_vs_cpu"]["why"]
        == s["default_run.wall_s"]["why"]
        == ("step default_run skipped (3 s of the budget left)")
    )
    assert s["test_gpu"]["value"] == 9 and s["test_gpu"]["status"] == "fail"  # skipped is not green


# --- the steps ------------------------------------------------------------------------------------------------------


def test_the_steps_run_in_order_within_caps_that_add_up_to_the_budget():
    names = [s.name for s in gpu_steps.STEPS]
    assert names == ["wheels", "test_gpu", "speed_7440", "speed_16000", "speed_highest", "speed_cudnn_first",
                     "default_run", "joeynmt_env", "joeynmt_rnn", "joeynmt_transformer", "speed_compiled"]  # fmt: skip
    assert sum(s.cap for s in gpu_steps.STEPS) == gpu_steps.BUDGET == 480
    *steps, last = gpu_steps.STEPS  # the last step gets what the others leave: its estimate may pass its cap
    assert all(s.estimate <= s.cap for s in steps) and sum(s.estimate for s in gpu_steps.STEPS) <= 480
    docs = (ROOT / "docs" / "developing.md").read_text(encoding="utf-8")
    for s in gpu_steps.STEPS:
        assert f"  {s.name:<20} {s.cap:>4.0f} {s.estimate:>4.0f} {s.smoke_cap:>5.0f}" in gpu_steps.steps_help()
        assert re.search(rf"^\| `{s.name}` \| .* \| {s.cap:.0f} \| {s.estimate:.0f} \|$", docs, re.M), (
            s.name
        )  # the table


def test_a_step_stops_at_its_cap_with_what_it_started_and_the_last_gets_what_is_left(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_steps, "MIN_STEP", 0)
    check = gpu_steps.Check(tmp_path, budget=48)  # a tenth of the caps: wheels' 1 s
    assert check.limit("wheels") == pytest.approx(1.0) and check.limit("default_run") == pytest.approx(11.5)
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


def test_a_speed_step_stopped_at_its_cap_keeps_the_runs_it_finished_and_never_an_earlier_checks(tmp_path):
    check = gpu_steps.Check(tmp_path, budget=480)
    args = SimpleNamespace(accelerator="gpu", data=tmp_path, cache=tmp_path, smoke=False, steps=20)
    out = tmp_path / "parts" / "speed_7440.json"
    out.parent.mkdir()
    out.write_text(json.dumps({"runs": [speed_row("luong", 7440, "32-true", 1.0)]}))  # an earlier check's
    finished = {"complete": False, "runs": [speed_row("bahdanau", 7440, "32-true", 225_000.0)]}

    def stopped(name, cmd, env):  # train_speed.py wrote its first run, then the cap came
        out.write_text(json.dumps(finished))
        return check.steps.setdefault(name, {"name": name, "status": "timed out"})

    check.run = stopped
    assert gpu_steps.speed_run(check, "speed_7440", args, {}, [], []) == finished
    assert check.steps["speed_7440"]["runs_measured"] == 1
    check.run = lambda name, cmd, env: {"name": name, "status": "failed"}  # wrote nothing: nothing, not the old file
    assert gpu_steps.speed_run(check, "speed_7440", args, {}, [], []) == {}


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
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
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
