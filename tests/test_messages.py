"""Messages fit how the program was started: the commands named as the user has them (nmt-translate installed,
python translate.py in a checkout), the end-of-run summary on prefixed log lines, a progress bar of three metrics
and none of the Lightning notices the docs call filtered."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from forked import run_script

from conftest import ROOT, TRAIN_ENV, run_train
from nmt.commands import COMMANDS, command, named_as_started, program_name

INSTALLED, CHECKOUT = "/venv/bin/nmt-translate", str(ROOT / "translate.py")
A_SCRIPT = re.compile(rf"(?<![\w/])({'|'.join(COMMANDS)})\.py\b")  # a checkout's script, not a path's end


def test_a_command_is_named_as_the_program_was_started():
    assert command("translate", INSTALLED) == "nmt-translate" and program_name("export", INSTALLED) == "nmt-export"
    assert command("translate", CHECKOUT) == "python translate.py" and program_name("export", CHECKOUT) == "export.py"
    text = "python train.py ckpt_path=x; a model export.py wrote; bench/speed/train_speed.py, nmt/cli/export.py, "
    text += "serve.py."
    assert named_as_started(text, INSTALLED) == (
        "nmt-train ckpt_path=x; a model nmt-export wrote; bench/speed/train_speed.py, nmt/cli/export.py, nmt-serve."
    )
    assert named_as_started(text, CHECKOUT) == text
    with pytest.raises(KeyError):
        command("prepare", INSTALLED)


@pytest.mark.parametrize("name", ["translate", "align", "serve", "export", "average"])
def test_help_names_the_command_as_started(name, monkeypatch, capsys):
    import importlib

    main = importlib.import_module(f"nmt.cli.{name}").main
    for argv0, expected, refused in ((f"/venv/bin/nmt-{name}", f"nmt-{name}", f"{name}.py"),
                                     (str(ROOT / f"{name}.py"), f"{name}.py", f"nmt-{name}")):  # fmt: skip
        monkeypatch.setattr(sys, "argv", [argv0, "--help"])
        with pytest.raises(SystemExit):
            main(["--help"])
        out = capsys.readouterr().out
        assert out.startswith(f"usage: {expected} ") and refused not in out, out
        if argv0.endswith("nmt-" + name):
            assert not A_SCRIPT.search(out), A_SCRIPT.search(out)  # no checkout script named anywhere
        else:
            assert f"python {name}.py" in out  # the examples, as a checkout runs them


def test_an_error_names_the_command_as_started(monkeypatch):
    from nmt.cli.options import Needs, refuse_ignored
    from nmt.cli.translate import _parse_args

    rule = Needs(("ckpt",), lambda a: False, "only where align.py aligns")  # a rule whose text names a command
    for argv0, named in ((INSTALLED, "nmt-align"), (CHECKOUT, "align.py")):
        monkeypatch.setattr(sys, "argv", [argv0])
        with pytest.raises(ValueError, match=rf"^--ckpt: only where {named} aligns$"):
            refuse_ignored(_parse_args(["--ckpt", "x.ckpt"]), [rule])


def test_the_library_s_messages_name_the_command_as_started(monkeypatch, tmp_path):
    """A message of the library that names a command (here the loader's) follows the program's name too."""
    import torch

    from nmt.inference.loading import load_model

    monkeypatch.setattr(sys, "argv", [INSTALLED])
    with pytest.raises(ValueError, match=r"^--compute-type=int8: applies to a model nmt-export wrote"):
        load_model([str(tmp_path / "x.ckpt")], torch.device("cpu"), compute_type="int8")


def test_every_string_of_the_library_that_names_a_command_is_named_as_started():
    """Outside nmt/cli (whose parsers and refusals are rendered whole), each string of nmt/ that names a command's
    script, docstrings aside, is an argument of ``named_as_started``."""
    import ast

    unnamed = []
    for path in sorted((ROOT / "nmt").rglob("*.py")):
        if path.parent.name == "cli" or path.name == "commands.py":
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and n.body and isinstance(n.body[0], ast.Expr)}  # fmt: skip
        named = {id(c) for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "named_as_started"
                 for c in ast.walk(n)}  # fmt: skip
        unnamed += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and A_SCRIPT.search(n.value)
                    and id(n) not in docs and id(n) not in named]  # fmt: skip
    assert not unnamed


def summary_lines(argv0: str, monkeypatch, tmp_path: Path, best: str = "best-8.ckpt", last: str | None = None
                  ) -> list[str]:  # fmt: skip
    from nmt.training.run import announce

    monkeypatch.setattr(sys, "argv", [argv0])
    log = logging.getLogger("train")
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(logging.Formatter("[%(name)s][%(levelname)s] - %(message)s")
                                                 .format(record))  # fmt: skip
    log.addHandler(handler)
    old = log.level
    log.setLevel(logging.INFO)
    try:
        best_path = str(tmp_path / "checkpoints" / best) if best else ""
        announce(tmp_path, best_path, last, "valid bleu 3.2; test bleu 3; all in x")
    finally:
        log.removeHandler(handler)
        log.setLevel(old)
    return "\n".join(records).splitlines()


def test_the_summary_keeps_its_prefix_and_names_the_command_as_started(monkeypatch, tmp_path):
    lines = summary_lines("/venv/bin/nmt-train", monkeypatch, tmp_path)
    assert len(lines) == 6 and all(line.startswith("[train][INFO] - ") for line in lines), lines
    assert lines[0] == "[train][INFO] - scores:          valid bleu 3.2; test bleu 3; all in x"
    best = tmp_path / "checkpoints" / "best-8.ckpt"
    assert lines[-1] == f"[train][INFO] - translate:       nmt-translate --ckpt {best} < input.fr", lines
    checkout = summary_lines(str(ROOT / "train.py"), monkeypatch, tmp_path)
    assert checkout[-1].startswith("[train][INFO] - translate:       python translate.py --ckpt ")
    last = summary_lines("train.py", monkeypatch, tmp_path, best="", last="/r/checkpoints/last.ckpt")
    assert last[-1].endswith("translate.py --ckpt /r/checkpoints/last.ckpt < input.fr"), last
    none = summary_lines("train.py", monkeypatch, tmp_path, best="", last=None)  # save_last=false, no best: no file
    assert len(none) == 5 and not any("--ckpt" in line for line in none), none


def test_the_resume_hint_names_the_command_as_started(monkeypatch):
    import hydra

    from nmt.training.run import resume_command

    hc = SimpleNamespace(overrides=SimpleNamespace(task=["model=luong", "ckpt_path=old.ckpt"]))
    monkeypatch.setattr(hydra.core.hydra_config.HydraConfig, "get", staticmethod(lambda: hc))
    monkeypatch.setattr(sys, "argv", ["/venv/bin/nmt-train"])
    assert resume_command(Path("/r/c/on_exception.ckpt"), Path("/r")) == (
        "nmt-train model=luong hydra.run.dir=/r ckpt_path=/r/c/on_exception.ckpt"  # in its own folder
    )
    monkeypatch.setattr(sys, "argv", ["train.py"])
    want = "python train.py model=luong hydra.run.dir=/r ckpt_path=/r/x.ckpt"
    assert resume_command(Path("/r/x.ckpt"), Path("/r")) == want
    # a change takes the place of the run's own value of that key, once
    assert resume_command(Path("/x.ckpt"), Path("/r"), "model=bahdanau") == (
        "python train.py model=bahdanau hydra.run.dir=/r ckpt_path=/x.ckpt"
    )


def test_the_progress_bar_shows_loss_learning_rate_and_tokens_per_second_only():
    from nmt.training.console import ProgressBar

    optimizer = SimpleNamespace(param_groups=[{"lr": 2e-3}])
    module = SimpleNamespace(logged={"train/loss": 5.7123, "train/ppl": 302.6, "train/grad_norm": 1.5})
    trainer = SimpleNamespace(
        progress_bar_metrics={"val/bleu": 3.2, "val/aer": 0.8, "v_num": "x"},
        logged_metrics={"train/device/items_per_sec": 3792.4, "train/ppl": 300.0, "val/chrf": 4.0},
        optimizers=[optimizer],
        lightning_module=module,  # the loss the module read at its last logging step
    )
    assert ProgressBar().get_metrics(trainer, None) == {"loss": "5.712", "lr": "2.00e-03", "tokens/s": "3,792"}
    trainer.logged_metrics["train/items_per_sec"] = 7584.8  # several devices: all of them
    assert ProgressBar().get_metrics(trainer, None)["tokens/s"] == "7,585"
    trainer.progress_bar_metrics, trainer.logged_metrics, module.logged = {}, {}, {}  # before the first: the rate only
    assert ProgressBar().get_metrics(trainer, None) == {"lr": "2.00e-03"}


NOTICES = """
import logging, sys, warnings
from lightning.pytorch.utilities.rank_zero import rank_zero_info, rank_zero_warn
from nmt.training.console import one_console
logging.basicConfig(level=logging.INFO, stream=sys.stdout)
warnings.simplefilter("always")
one_console()
rank_zero_warn("The 'train_dataloader' does not have many workers which may be a bottleneck.")
rank_zero_warn("Checkpoint directory /r/checkpoints exists and is not empty.")
rank_zero_warn("GPU available but not used. You can set it by doing `Trainer(accelerator='gpu')`.")
rank_zero_warn("The number of training batches (7) is smaller than the logging interval Trainer(log_every_n_steps=50)."
               " Set a lower value for log_every_n_steps if you want to see logs for the training epoch.")
rank_zero_info("💡 Tip: For seamless cloud uploads and versioning, try installing [litmodels]")
logging.getLogger("lightning.pytorch.accelerators.cuda").info("LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]")
logging.getLogger("lightning.pytorch.trainer.connectors.checkpoint_connector").info(
    "`weights_only` was not set, defaulting to `False`.")
rank_zero_info("GPU available: False, used: False")
rank_zero_warn("a warning of the run's own")
"""


def test_the_notices_the_docs_call_filtered_are_left_out():
    """Each notice, raised as Lightning raises it after ``one_console``: only the run's own lines come through."""
    from nmt.training.console import LEFT_OUT

    proc = run_script([sys.executable, "-c", NOTICES], ROOT, TRAIN_ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = proc.stdout + proc.stderr
    assert "GPU available: False, used: False" in printed and "a warning of the run's own" in printed, printed
    assert len(LEFT_OUT) == 10
    for notice in ("many workers", "is not empty", "GPU available but not used", "Tip:", "LOCAL_RANK", "weights_only",
                   "logging interval"):  # fmt: skip
        assert notice not in printed, (notice, printed)


@pytest.mark.slow
def test_a_tiny_run_prints_three_metrics_a_prefixed_summary_and_no_filtered_notice(data_cache, tmp_path):
    proc = run_train(tmp_path / "run", data_cache, "trainer.enable_progress_bar=true")
    printed = proc.stdout + proc.stderr
    bars = [b for b in re.split(r"[\r\n]", printed) if b.startswith("Epoch ") and "loss=" in b]
    shown = [[kv.split("=")[0] for kv in re.search(r"/s, ([^\]]*)\]", b).group(1).split(", ")] for b in bars]
    assert bars and all(names in (["loss", "lr"], ["loss", "lr", "tokens/s"]) for names in shown), bars[-3:]
    assert ["loss", "lr", "tokens/s"] in shown  # the rate, once a window of batches has passed
    summary = [line for line in printed.splitlines() if re.search(r"(scores|run directory|best checkpoint|TensorBoard|"
                                                                   r"alignments|translate): ", line)]  # fmt: skip
    assert len(summary) == 6 and all(re.match(r"\[[\d :,-]+\]\[train\]\[INFO\] - ", s) for s in summary), summary
    assert "python translate.py --ckpt" in summary[-1] and "; test bleu " in summary[0]
    for notice in ("many workers", "is not empty", "Tip:", "LOCAL_RANK", "weights_only", "LeafSpec", "logging interval",
                   "pin_memory", "Test metric", "results.json: {"):  # fmt: skip
        assert notice not in printed, notice
