"""``trainer.precision=auto``: the faster of float32 and bf16-mixed on this machine, measured at start on batches of
the training data, leaving the model as it was; the choice written into the trainer's settings and handed to the
processes of other devices."""

from __future__ import annotations

import pytest
import torch

from conftest import ROOT, TINY_DATA, tiny_model_overrides
from nmt.training import precision_auto as precision


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from nmt.training.module import TranslationModule

    cache = tmp_path_factory.mktemp("cache")
    overrides = ["model=transformer", *tiny_model_overrides("model=transformer"), *TINY_DATA,
                 f"data.cache_dir={cache}", "data.num_workers=0", "trainer.precision=auto"]  # fmt: skip
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    return cfg, dm, TranslationModule.from_config(cfg, dm.tokenizer)


def test_the_probe_times_both_precisions_on_training_batches_and_leaves_the_model_as_it_was(prepared):
    _, dm, module = prepared
    batches = precision.probe_batches(dm, 4)
    widths = [b.src.shape[1] for b in batches]
    assert len(batches) == 4 and widths != sorted(widths)[:1] * 4  # spread over the lengths, not one shape
    before = {k: v.clone() for k, v in module.state_dict().items()}
    probe = precision.measure(module, batches, torch.device("cpu"), rounds=1)
    assert set(probe.seconds) == set(precision.CANDIDATES) and all(s > 0 for s in probe.seconds.values())
    assert probe.choice == min(probe.seconds, key=probe.seconds.get)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    assert all(p.grad is None for p in module.parameters())
    assert "trainer.precision=auto: " + probe.choice in probe.describe()


@pytest.mark.parametrize("faster", precision.CANDIDATES)
def test_auto_takes_the_faster_and_hands_it_to_the_other_processes(prepared, monkeypatch, faster):
    cfg, dm, module = prepared
    slower = next(c for c in precision.CANDIDATES if c != faster)
    measured = precision.Probe({faster: 1.0, slower: 2.0}, 6, faster)
    monkeypatch.setattr(precision, "measure", lambda *a, **k: measured)
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: True)  # a CPU where bf16 is worth measuring
    monkeypatch.delenv(precision.CHOSEN, raising=False)
    trainer = cfg.trainer.copy()
    assert precision.resolve(trainer, module, dm) == faster
    assert trainer.precision == faster
    import os

    assert os.environ[precision.CHOSEN] == faster  # Lightning's processes for the other devices inherit it
    monkeypatch.setenv("LOCAL_RANK", "1")  # such a process takes it as it is
    monkeypatch.setattr(precision, "measure", lambda *a, **k: pytest.fail("measured twice"))
    again = cfg.trainer.copy()
    assert precision.resolve(again, module, dm) == faster and again.precision == faster
    monkeypatch.setenv("LOCAL_RANK", "0")  # a first process (the next run of a sweep) measures anew
    with pytest.raises(pytest.fail.Exception, match="measured twice"):
        precision.resolve(cfg.trainer.copy(), module, dm)


def test_a_cpu_without_bf16_instructions_takes_float32_unmeasured(prepared, monkeypatch, caplog):
    """Emulated bf16 products run tens of times slower than float32's: nothing to measure (the probe's bf16 passes
    would cost minutes of the run's budget)."""
    cfg, dm, module = prepared
    monkeypatch.setattr(precision, "cpu_computes_bf16", lambda: False)
    monkeypatch.setattr(precision, "measure", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.delenv(precision.CHOSEN, raising=False)
    trainer = cfg.trainer.copy()
    trainer.accelerator = "cpu"
    with caplog.at_level("INFO", logger=precision.log.name):
        assert precision.resolve(trainer, module, dm) == "32-true" and trainer.precision == "32-true"
    assert "no bfloat16 instructions" in caplog.text and "not measured" in caplog.text
    import os

    assert os.environ[precision.CHOSEN] == "32-true"


def test_a_candidate_past_the_cutoff_in_its_untimed_pass_is_not_timed(prepared, monkeypatch):
    """bf16 whose first pass runs past CUTOFF times float32's stops there and loses, with no timed rounds; one
    within it is timed as before."""
    _, dm, module = prepared
    for slow, cut in ((precision.CUTOFF * 3, True), (precision.CUTOFF / 2, False)):
        calls = []

        def timer(*_, slow=slow, calls=calls):
            def one_pass(p, kernels, deadline=float("inf")):
                calls.append(p)
                took = 1.0 if p == "32-true" else slow
                return float("inf") if took > deadline else took

            return one_pass

        monkeypatch.setattr(precision, "_timer", timer)
        probe = precision.measure(module, [None] * 4, torch.device("cpu"), rounds=2)
        assert probe.choice == "32-true"
        if cut:
            assert calls == ["32-true", "bf16-mixed"] and probe.seconds["bf16-mixed"] == float("inf")
            assert f"stopped after more than {precision.CUTOFF:g}x" in probe.describe()
        else:
            assert len(calls) == 6 and probe.seconds == {"32-true": 0.25, "bf16-mixed": precision.CUTOFF / 8}


def test_a_pass_past_its_deadline_stops_after_the_batch_that_crossed_it(prepared, monkeypatch):
    _, dm, module = prepared
    batches, calls = precision.probe_batches(dm, 4), []
    original = type(module.model).loss
    monkeypatch.setattr(type(module.model), "loss", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    one_pass = precision._timer(module, batches, torch.device("cpu"))
    assert one_pass("32-true", module.kernels, deadline=0.0) == float("inf") and len(calls) == 1
    calls.clear()
    assert one_pass("32-true", module.kernels) < float("inf") and len(calls) == 4


def test_a_precision_that_is_not_auto_is_left_as_given(prepared, monkeypatch):
    cfg, dm, module = prepared
    monkeypatch.setattr(precision, "measure", lambda *a, **k: pytest.fail("measured"))
    trainer = cfg.trainer.copy()
    trainer.precision = "bf16-mixed"
    assert precision.resolve(trainer, module, dm) is None and trainer.precision == "bf16-mixed"


@pytest.mark.parametrize("faster", precision.CPU_KERNELS)
def test_the_cpu_takes_the_faster_of_its_attention_kernels_in_the_run_s_precision(prepared, monkeypatch, faster):
    from dataclasses import replace

    _, dm, module = prepared
    given = module.kernels
    without_flash = replace(given, attention=tuple(k for k in given.attention if k != "flash"))
    assert set(precision.CPU_KERNELS) <= set(given.attention)
    line = precision.cpu_attention(module, dm, "bf16-mixed", batches=1, rounds=1)  # measured for real
    chosen = "flash" if module.kernels == given else "math"
    assert module.kernels in (given, without_flash)
    assert line.startswith(f"kernels.attention on this CPU in bf16-mixed: {chosen} ("), line
    seen = []

    def timer(*_):
        def one_pass(precision_, kernels):
            seen.append(precision_)
            return 1.0 if ("flash" in kernels.attention) == (faster == "flash") else 2.0

        return one_pass

    monkeypatch.setattr(precision, "_timer", timer)
    module.kernels = given
    precision.cpu_attention(module, dm, "32-true")
    assert module.kernels == (given if faster == "flash" else without_flash) and set(seen) == {"32-true"}
    module.kernels = without_flash  # nothing to choose between: left as given
    assert precision.cpu_attention(module, dm, "32-true") == "" and module.kernels == without_flash
    module.kernels = given
