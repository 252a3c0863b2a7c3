"""bench/quality/curve.py: minutes to a BLEU and the speed-up read off curves, JoeyNMT 2.3's log read as a curve, no
comparison across CPUs, and one tiny real run of ours on the training clock."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import torch
from test_settings import composed

from bench.anchors import joeynmt_curve
from bench.quality import curve, recorded_settings, records
from conftest import ROOT, TRAIN_ENV, tiny_model_overrides

CPU = {"model": "Some CPU", "avx512_bf16": True, "amx_bf16": False}


def curve_of(*points: tuple[float, float]) -> list[dict]:
    return [{"minutes": m, "bleu": b, "chrf": 0.0, "step": i} for i, (m, b) in enumerate(points)]


def run(system: str, model: str, points: list[dict], cpu: dict = CPU, budget: float = 30.0) -> dict:
    sample = {"sentences": 1000, "seed": 1, "sha256": "0" * 16}
    return {"system": system, "model": model, "budget_min": budget, "threads": 2, "cpu": cpu, "points": points,
            "valid_sample": sample}  # fmt: skip


def test_minutes_to_a_bleu_is_the_first_crossing_interpolated():
    points = curve_of((1, 5), (2, 15), (3, 25), (4, 22), (5, 45))
    assert curve.minutes_to(points, 20) == pytest.approx(2.5)
    assert curve.minutes_to(points, 24) == pytest.approx(2.9)  # not the later crossing of 22 -> 45
    assert curve.minutes_to(points, 30) == pytest.approx(4 + 8 / 23)
    assert curve.minutes_to(points, 3) == 1  # reached at the first point
    assert curve.minutes_to(points, 50) is None
    assert curve.bleu_at(points, 1.5) == pytest.approx(10)
    assert curve.bleu_at(points, 5) == 45
    assert curve.bleu_at(points, 5.5) is None and curve.bleu_at(points, 0.5) is None


def test_ours_are_compared_with_joeynmt_of_their_family_at_its_budget():
    runs = {
        "transformer": run("ours", "transformer", curve_of((1, 10), (5, 30), (10, 50))),
        "bahdanau": run("ours", "bahdanau", curve_of((1, 2), (10, 18))),
        "joeynmt_transformer": run("joeynmt", "transformer", curve_of((10, 5), (28, 19), (32, 23))),
        "joeynmt_rnn_bahdanau": run("joeynmt", "rnn_bahdanau", curve_of((10, 1), (31, 4))),
    }
    out = curve.summary(runs)
    reach = {r["run"]: r for r in out["reach"]}
    assert reach["transformer"] == {"run": "transformer", "min_to_20": 3.0, "min_to_30": 5.0, "min_to_40": 7.5,
                                    "min_to_50": 10.0}  # fmt: skip
    assert reach["bahdanau"]["min_to_20"] is None
    compared = {(c["ours"], c["joeynmt"]): c for c in out["compared"]}
    assert set(compared) == {("transformer", "joeynmt_transformer"), ("bahdanau", "joeynmt_rnn_bahdanau")}
    tf = compared["transformer", "joeynmt_transformer"]
    assert tf["joeynmt_bleu"] == 21.0  # its curve at 30 minutes: 19 + (30 - 28) / 4 * 4
    assert tf["ours_min"] == 3.2  # 1 + (21 - 10) / 20 * 4
    assert tf["times_sooner"] == 9.38  # 30 / 3.2
    rnn = compared["bahdanau", "joeynmt_rnn_bahdanau"]
    joey = 1 + 20 / 21 * 3
    assert rnn["joeynmt_bleu"] == round(joey, 2) and rnn["ours_min"] == round(1 + (joey - 2) / 16 * 9, 2)


def test_each_run_is_compared_with_the_reference_by_the_settings_it_changed_and_its_bleu():
    ref = run("ours", "transformer", curve_of((10, 30), (20, 40), (30, 50)))
    ref["settings"] = {"optim": {"lr": 1e-3, "betas": [0.9, 0.98]}, "schedule": {"scheduler": {"warmup_steps": 400}}}
    short = run("ours", "transformer", curve_of((5, 20), (15, 44)), budget=15.0)
    short["settings"] = {"optim": {"lr": 2e-3, "betas": [0.9, 0.98]}, "schedule": {"scheduler": {"warmup_steps": 400,
                                                                                                  "final": 0.0}}}
    joey = run("joeynmt", "transformer", curve_of((10, 5), (30, 20)))
    rnn = run("ours", "bahdanau", curve_of((10, 20), (30, 30)))  # another model: its own curve, not a change
    out = curve.summary({"ref": ref, "short": short, "joey": joey, "rnn": rnn}, references=["ref"])
    assert out["references"] == ["ref"]
    changed = {"optim.lr": [1e-3, 2e-3], "schedule.scheduler.final": [None, 0.0]}
    row = {"run": "short", "reference": "ref", "budget_min": 15.0, "changed": changed, "end_min": 15.0,
           "delta_end": 9.0, "delta_15": 9.0, "delta_30": None}  # fmt: skip
    assert out["changes"] == [row]
    with pytest.raises(ValueError, match="--reference nope: not among the curves given"):
        curve.summary({"ref": ref}, references=["nope"])


def test_a_change_outside_the_recorded_settings_is_read_from_the_run_s_command():
    """A setting a curve does not record (``compile.enabled``) changed on the run's command line is a change too:
    the reference's value composed from its own overrides, the run's as typed; recorded keys and the options of the
    benchmark itself are not repeated from the command."""
    ref = run("ours", "transformer", curve_of((5, 20), (15, 40)), budget=15.0)
    ref |= {"overrides": ["experiment=tatoeba_fast", "hydra.run.dir=runs/ref"], "settings": {"loss": {"x": 1}},
            "provenance": {"commit": "aaa", "command": "bench/curve.py --run ours --tag ref --data /d"}}
    ab = ref | {"points": curve_of((5, 18), (15, 37)), "overrides": [*ref["overrides"], "compile.enabled=true"],
                "provenance": {"commit": "aaa", "command": "python -m bench.quality.curve --run ours --tag c --data /d "
                               "compile.enabled=true loss.x=1 +trainer.limit_val_batches=0"}}  # fmt: skip
    rows = curve.summary({"ref": ref, "ab": ab}, references=["ref"])["changes"]
    assert rows[0]["changed"] == {"compile.enabled": [False, "true"], "trainer.limit_val_batches": [None, "0"]}
    assert records.given(ab) == {"compile.enabled": "true", "loss.x": "1", "trainer.limit_val_batches": "0"}


def test_a_run_is_compared_with_the_reference_measured_beside_it():
    """A chain of A/Bs at one commit is compared with its own reference run, at the end of the shorter curve; a run
    of a model whose only reference was measured elsewhere is not compared."""
    commit = lambda r, c: r | {"provenance": {"commit": c}}  # noqa: E731
    first = commit(run("ours", "transformer", curve_of((10, 30), (30, 50))), "aaa")
    again = commit(run("ours", "transformer", curve_of((5, 20), (15, 40)), budget=15.0), "bbb")
    ab = commit(run("ours", "transformer", curve_of((5, 22), (15, 43)), budget=15.0), "bbb")
    older = commit(run("ours", "transformer", curve_of((5, 21), (15, 45)), budget=15.0), "ccc")
    rnn_ref = commit(run("ours", "luong", curve_of((5, 20), (10, 26)), budget=10.0), "bbb")
    rnn_ab = commit(run("ours", "luong", curve_of((5, 21), (10, 28)), budget=10.0), "bbb")
    rnn_old = commit(run("ours", "luong", curve_of((5, 21), (10, 30)), budget=10.0), "ccc")
    runs = {"first": first, "again": again, "ab": ab, "older": older, "rnn_ref": rnn_ref, "rnn_ab": rnn_ab,
            "rnn_old": rnn_old}  # fmt: skip
    rows = {c["run"]: c for c in curve.summary(runs, references=["first", "again", "rnn_ref"])["changes"]}
    assert {n: r["reference"] for n, r in rows.items()} == {"ab": "again", "older": "first", "rnn_ab": "rnn_ref"}
    assert rows["ab"]["end_min"] == 15.0 and rows["ab"]["delta_end"] == 3.0 and rows["ab"]["delta_15"] == 3.0
    assert rows["rnn_ab"]["end_min"] == 10.0 and rows["rnn_ab"]["delta_end"] == 2.0
    assert rows["rnn_ab"]["delta_15"] is None and rows["older"]["delta_end"] == 10.0  # 45 against 30 + 5 / 20 * 20


def test_runs_of_different_machines_are_not_compared(tmp_path, capsys):
    points = curve_of((1, 10), (30, 20))
    other = CPU | {"amx_bf16": True}  # the same model name, another precision flag: another figure
    files = []
    for name, r in {"transformer": run("ours", "transformer", points), "joeynmt_transformer": run(
            "joeynmt", "transformer", points, other)}.items():  # fmt: skip
        files.append(str(tmp_path / f"{name}.json"))
        Path(files[-1]).write_text(json.dumps(r))
    with pytest.raises(SystemExit) as e:
        curve.compare(files, tmp_path / "curves.png", str(tmp_path / "summary.json"))
    assert str(e.value).startswith("error: not compared: the runs were measured on different machines")
    assert "\n" not in str(e.value) and not (tmp_path / "curves.png").exists()
    on_gpu = run("ours", "transformer", points) | {"gpu": "NVIDIA H100 80GB HBM3"}  # the same CPU, trained on a GPU
    Path(files[1]).write_text(json.dumps(on_gpu))
    with pytest.raises(SystemExit, match="different machines"):
        curve.compare(files, tmp_path / "curves.png", str(tmp_path / "summary.json"))
    Path(files[1]).write_text(json.dumps(run("joeynmt", "transformer", points)))  # the same CPU: compared and drawn
    curve.compare(files, tmp_path / "curves.png", str(tmp_path / "summary.json"))
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["cpu"] == CPU and summary["gpu"] is None and summary["compared"][0]["times_sooner"] == 1.0
    curve.compare([*files, str(tmp_path / "summary.json")], tmp_path / "curves.png", str(tmp_path / "again.json"))
    assert json.loads((tmp_path / "again.json").read_text())["files"] == files  # the summary of a glob left out


@pytest.mark.parametrize("accelerator, device", [("gpu", "cuda"), ("cuda", "cuda"), ("cpu", "cpu")])
def test_snapshots_are_scored_where_the_run_trained(tmp_path, accelerator, device):
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(f"trainer:\n  accelerator: {accelerator}\n")
    assert curve.trained_on(tmp_path) == device
    assert curve.gpu("cpu") is None


LAUNCHED = "2025-03-01 10:00:00,000"
LOG = """\
2025-03-01 10:00:02,000 - INFO - root - Hello! This is Joey-NMT (version 2.3.0).
2025-03-01 10:00:09,000 - INFO - joeynmt.training - Model(
\tencoder=RecurrentEncoder(GRU(256, 256, batch_first=True, bidirectional=True)),
2025-03-01 10:00:10,000 - INFO - joeynmt.training - EPOCH 1
2025-03-01 10:01:10,000 - INFO - joeynmt.training - Epoch   1, Step:       50, Batch Loss:     5.123456, Batch Acc: \
0.012345, Tokens per Sec:      820, Lr: 0.001000
2025-03-01 10:02:10,000 - INFO - joeynmt.training - Epoch   1, Step:      100, Batch Loss:     4.923456, Batch Acc: \
0.052345, Tokens per Sec:      830, Lr: 0.001000
2025-03-01 10:02:10,010 - INFO - joeynmt.prediction - Predicting 1000 example(s)... (Greedy decoding with \
min_output_length=1, max_output_length=-1, return_prob='none', generate_unk=True, repetition_penalty=-1, \
no_repeat_ngram_size=-1)
2025-03-01 10:02:40,010 - INFO - joeynmt.prediction - Generation took 29.9800[sec].
2025-03-01 10:02:40,210 - INFO - joeynmt.prediction - Evaluation result (greedy): bleu:   1.23, chrf:   0.12, \
loss:   5.01, ppl: 149.90, acc:   0.10, 0.1900[sec]
2025-03-01 10:02:40,220 - INFO - joeynmt.training - Hooray! New best validation result [bleu]!
2025-03-01 10:02:42,010 - INFO - joeynmt.training - Checkpoint saved in /w/models/curve_rnn_bahdanau/100.ckpt.
2025-03-01 10:03:12,010 - INFO - joeynmt.training - Epoch   1, Step:      150, Batch Loss:     4.5, Batch Acc: \
0.07, Tokens per Sec:      825, Lr: 0.001000
2025-03-01 10:03:42,010 - INFO - joeynmt.training - Epoch   1, Step:      200, Batch Loss:     4.4, Batch Acc: \
0.08, Tokens per Sec:      826, Lr: 0.001000
2025-03-01 10:03:42,020 - INFO - joeynmt.prediction - Predicting 1000 example(s)... (Greedy decoding with ...)
2025-03-01 10:03:52,020 - INFO - joeynmt.prediction - Generation took 9.8000[sec].
2025-03-01 10:03:52,020 - INFO - joeynmt.prediction - Evaluation result (greedy): bleu:   3.50, chrf:   0.20, \
loss:   4.41, ppl:  82.10, acc:   0.13, 0.1500[sec]
2025-03-01 10:04:00,000 - INFO - joeynmt.training - Interrupt at epoch 1, step 230.
2025-03-01 10:04:01,000 - INFO - joeynmt.training - Checkpoint saved in /w/models/curve_rnn_bahdanau/230.ckpt.
"""
VALIDATIONS = (
    "Steps: 100\tloss: 5.01000\tacc: 0.10000\tppl: 149.90000\tbleu: 1.23456\tchrf: 0.12345\tLR: 0.00100000\t*\n"
)


def test_joeynmt_log_is_read_as_a_curve_on_a_clock_without_its_validations():
    launched = datetime.strptime(LAUNCHED, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    first, second = joeynmt_curve.joeynmt_points(LOG, launched, VALIDATIONS)
    # the first: from its Predicting line to its checkpoint, 32 s; scores from validations.txt, chrF in percent
    assert first == {"minutes": round(130.01 / 60, 4), "bleu": 1.23, "chrf": 12.35, "step": 100, "eval_s": 32.0}
    # the second: its 32 s out of the clock; not in validations.txt: the log's scores; ends where the interrupt is
    assert second == {"minutes": round((222.02 - 32.0) / 60, 4), "bleu": 3.5, "chrf": 20.0, "step": 200, "eval_s": 10.0}
    cut = LOG.split("2025-03-01 10:03:52,020")[0]  # killed while validating: no point
    assert len(joeynmt_curve.joeynmt_points(cut, launched)) == 1


def test_joeynmt_config_validates_on_the_sample_in_its_own_folder(tmp_path):
    anchor, work = tmp_path / "anchor", tmp_path / "w"  # the work folder: prep_data.py's
    anchor.mkdir()
    work.mkdir()
    (anchor / "rnn_bahdanau.yaml").write_text(
        'model_dir: "ANCHOR_WORK/models/rnn_bahdanau"\ndata:\n  dev: "ANCHOR_WORK/data/valid"\n'
        "training:\n  logging_freq: 50\n  validation_freq: 150\n  print_valid_sents: [0, 1, 2]\n"
    )
    args = type("Args", (), {"joeynmt_anchor": anchor, "config": "rnn_bahdanau"})
    import yaml

    cfg = yaml.safe_load(joeynmt_curve.joeynmt_config(args, work, "curve_rnn_bahdanau", 30).read_text())
    assert cfg["model_dir"] == str(tmp_path / "w" / "models" / "curve_rnn_bahdanau")
    assert cfg["data"]["dev"] == str(tmp_path / "w" / "data" / "curve_rnn_bahdanau")
    assert cfg["training"] == {"logging_freq": 10, "validation_freq": 30, "print_valid_sents": []}


def test_joeynmt_at_our_sizes_is_its_transformer_anchor_with_the_fast_recipe_s_settings(tmp_path):
    """``--config transformer_fast`` edits the anchor's transformer.yaml where the fast recipe differs, key by key,
    and keeps the rest; each validation's translations are then scored on the sample's unseen part."""
    import yaml

    anchor, work = tmp_path / "anchor", tmp_path / "w"
    anchor.mkdir()
    work.mkdir()
    (anchor / "transformer.yaml").write_text(
        'model_dir: "ANCHOR_WORK/models/transformer"\ndata:\n  dev: "ANCHOR_WORK/data/valid"\n'
        "training:\n  learning_rate: 0.0005\n  learning_rate_warmup: 1000\n  batch_size: 4096\n  label_smoothing: 0.1\n"
        "model:\n  encoder:\n    num_layers: 6\n    dropout: 0.1\n    hidden_size: 256\n"
        "  decoder:\n    num_layers: 6\n    dropout: 0.1\n    hidden_size: 256\n"
    )
    args = type("Args", (), {"joeynmt_anchor": anchor, "config": "transformer_fast"})
    cfg = yaml.safe_load(joeynmt_curve.joeynmt_config(args, work, "curve_transformer_fast", 120).read_text())
    assert cfg["training"] | {"logging_freq": 0, "validation_freq": 0, "print_valid_sents": 0} == {
        "learning_rate": 1.5e-3, "learning_rate_warmup": 400, "batch_size": 2400, "label_smoothing": 0.1,
        "logging_freq": 0, "validation_freq": 0, "print_valid_sents": 0}  # fmt: skip
    for side in ("encoder", "decoder"):
        assert cfg["model"][side] == {"num_layers": 3, "dropout": 0.0, "hidden_size": 256}
    from nmt.data.readers import Pairs

    sample = Pairs(["a", "b"], ["The cat.", "A dog."])
    (work / "120.hyps").write_text("The cat.\nA cat.\n")
    points = joeynmt_curve.with_unseen([{"step": 120, "bleu": 50.0, "chrf": 60.0}, {"step": 240, "bleu": 1.0}], work,
                                       sample, frozenset({"The cat."}))  # fmt: skip
    assert points[0]["bleu"] == 50.0 and points[0]["unseen_sentences"] == 1 and points[0]["seen_chrf"] == 100.0
    assert points[1] == {"step": 240, "bleu": 1.0}  # no translations kept: the logged point as it is


class FakeTrainer:
    """What TrainingClock uses of Lightning's Trainer; a save takes ``save_s`` of the test's clock."""

    def __init__(self, now: list[float], save_s: float):
        self.now, self.save_s = now, save_s
        self.global_step, self.is_global_zero, self.should_stop = 0, True, False

    def save_checkpoint(self, path: Path, weights_only: bool) -> None:
        Path(path).write_text("weights")
        self.now[0] += self.save_s


def test_training_clock_keeps_validation_and_snapshots_out_and_stops_at_the_budget(tmp_path, monkeypatch):
    now = [100.0]  # time.time() as the clock sees it
    monkeypatch.setattr(curve.time, "time", lambda: now[0])
    clock = curve.TrainingClock(launched=100.0, every_s=10, budget_s=30, dirpath=str(tmp_path))
    trainer, batch = FakeTrainer(now, save_s=5), type("Batch", (), {"tgt_len": torch.tensor([3, 4]), "host": None})
    clock.on_train_start(trainer, None)
    while not trainer.should_stop:
        now[0] += 4  # an update takes 4 s
        trainer.global_step += 1
        if trainer.global_step == 4:  # a validation of 100 s after the 4th update
            clock.on_validation_start(trainer, None)
            now[0] += 100
            clock.on_validation_end(trainer, None)
        clock.on_train_batch_end(trainer, None, None, batch, 0)
    clock.on_train_end(trainer, None)
    records = [json.loads(line) for line in (tmp_path / "clock.jsonl").read_text().splitlines()]
    # updates end at 4, 8, 12 (a snapshot: 5 s out), 16, 20 (a snapshot), 24, 28, 32 s of the clock (the last)
    assert [r["minutes"] * 60 for r in records] == pytest.approx([12, 20, 32], abs=0.01)  # to 1e-4 minutes
    assert [r["step"] for r in records] == [3, 5, 8] and [r["tokens"] for r in records] == [21, 35, 56]
    assert [r["save_s"] for r in records] == [5, 5, 5] and (tmp_path / "clock-8.ckpt").is_file()
    assert now[0] - 100 == 8 * 4 + 100 + 3 * 5  # the run's wall time: updates, validation, snapshots


def tiny_splits(folder: Path) -> Path:
    """Made-up French-English pairs of a small grammar as the three splits."""
    nouns = {"le chat": "the cat", "le chien": "the dog", "la femme": "the woman", "l'homme": "the man",
             "le garçon": "the boy", "la fille": "the girl"}  # fmt: skip
    verbs = {"mange": "eats", "voit": "sees", "aime": "loves", "cherche": "looks for", "prend": "takes"}
    objects = {"une pomme": "an apple", "le pain": "the bread", "un livre": "a book", "la voiture": "the car"}
    rows = [f"{n.capitalize()} {v} {o}.\t{nouns[n].capitalize()} {verbs[v]} {objects[o]}."
            for n, v, o in itertools.product(nouns, verbs, objects)]  # fmt: skip
    random.Random(0).shuffle(rows)
    folder.mkdir()
    for name, lines in (("train", rows[:90] * 3), ("valid", rows[90:]), ("test", rows[90:100])):
        (folder / f"{name}.tsv").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.slow
def test_ours_records_points_on_the_training_clock_with_evaluation_apart(tmp_path):
    data, out = tiny_splits(tmp_path / "splits"), tmp_path / "tiny.json"
    cmd = [sys.executable, "-m", "bench.quality.curve", "--run", "ours", "--model", "transformer",
           "--data", str(data), "--threads", "1", "--budget-min", "0.5", "--every-min", "0.1",
           "--valid-sentences", "16", "--run-dir", str(tmp_path / "run"), "--cache", str(tmp_path / "cache"),
           "--json", str(out), *tiny_model_overrides("model=transformer"), "data.prepare.spm.vocab_size=60",
           "data.max_tokens=512", "trainer.max_epochs=100000"]  # fmt: skip
    start = time.time()
    subprocess.run(cmd, env=TRAIN_ENV | {"PYTHONPATH": str(ROOT)}, cwd=ROOT, check=True, capture_output=True)
    result = json.loads(out.read_text())
    points = result["points"]
    minutes = [p["minutes"] for p in points]
    # after start-up and preparation (in the clock), a point just after every 0.1 minute, the last at the budget
    assert len(points) >= 3 and minutes == sorted(set(minutes))
    tenths = [int(m * 10 + 1e-6) for m in minutes[1:]]  # the tenth of a minute each point follows
    assert tenths == list(range(tenths[0], 6)) and all(m * 10 - k < 0.2 for m, k in zip(minutes[1:], tenths)), minutes
    assert [p["step"] for p in points] == sorted({p["step"] for p in points}) and points[0]["step"] > 0
    assert all(p["eval_s"] > 0 and p["save_s"] > 0 and 0 <= p["bleu"] <= 100 for p in points)
    assert result["eval_s"] == pytest.approx(sum(p["eval_s"] for p in points), abs=0.1)
    # the evaluation came after training, outside its clock: the run took longer than the budget and the evaluation
    assert time.time() - start > 0.5 * 60 + sum(p["eval_s"] for p in points)
    assert result["valid_sample"]["sentences"] == 16 and result["cpu"]["model"]
    assert {"avx512_bf16", "amx_bf16"} <= set(result["cpu"]) and result["provenance"]["command"]


RECORDS = list(records.records())


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_a_committed_curve_is_what_its_experiment_composes_to_today(record):
    """The settings a committed curve, budgeted or long run of ours recorded are those its experiment (with the run's
    own overrides of them, and those of its mark if a later recipe superseded it) composes to now: an experiment whose
    settings drift from its measured runs fails here until they are marked (bench/quality/records.py --supersede)."""
    today = recorded_settings.read(composed(records.own_overrides(record.run)), record.keys)  # Hydra's, as composed()
    assert today == record.run["settings"], record.name


def test_a_drifted_record_is_marked_with_the_overrides_that_give_it_back(tmp_path):
    """bench/quality/records.py finds the overrides that give today's experiment a record's settings, checked by
    composing."""
    run = {"overrides": ["experiment=tatoeba_fast", "seed=2"]}
    run["settings"] = recorded_settings.composed(run["overrides"], recorded_settings.CURVE)
    run["settings"]["model"]["dropout"] = 0.3  # measured before the recipe changed
    run["settings"]["optim"]["lr"] = 0.002
    moved = records.Record("x", tmp_path / "x.json", run, run, recorded_settings.CURVE)
    assert recorded_settings.composed(records.own_overrides(run), recorded_settings.CURVE) != run["settings"]
    assert records.reproducing(moved) == ["model.dropout=0.3", "optim.lr=0.002"]
    marked = run | {"superseded": {"overrides": records.reproducing(moved)}}
    assert recorded_settings.composed(records.own_overrides(marked), recorded_settings.CURVE) == run["settings"]
    run["settings"]["model"]["no_such_setting"] = 1
    with pytest.raises(ValueError, match="no_such_setting"):
        records.reproducing(moved)
