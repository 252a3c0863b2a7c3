"""The results tables of the README and the docs are what docs/generator/report.py renders from bench/results/, and
every result file says what produced it."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
GENERATOR = ROOT / "docs" / "generator"
sys.path.insert(0, str(GENERATOR))
import report as generator  # noqa: E402


def report(*args: str) -> subprocess.CompletedProcess:
    """docs/generator/report.py's main with ``args``, in this process (a start of its own would import torch and
    Lightning again for each of the tests' passes): its exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            generator.main(list(args))
        except SystemExit as e:  # sys.exit(1), or sys.exit("a message") as a start of its own prints it
            code = e.code if isinstance(e.code, int) else 1
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    return subprocess.CompletedProcess(["report.py", *args], code, out.getvalue(), err.getvalue())


def test_committed_tables_are_rendered_from_the_json():
    done = report("--check")
    assert done.returncode == 0, done.stderr


def test_a_changed_result_makes_the_check_fail(tmp_path):
    """A figure changed in one JSON: the check names the page and the table that no longer agree."""
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    path = results / "toy_quality.json"
    data = json.loads(path.read_text())
    data["runs"][0]["test_bleu"] += 1.0
    path.write_text(json.dumps(data))
    done = report("--check", "--results", str(results))
    assert done.returncode == 1
    assert re.search(r"docs/results/models\.md: .*models_toy", done.stderr), done.stderr


def test_a_table_without_its_result_file_is_one_line(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    (results / "engine.json").unlink()
    done = report("--check", "--results", str(results))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "engine.json: no such result file" in done.stderr


def test_a_superseded_run_of_the_recipe_leaves_its_table_for_the_earlier_settings_one(tmp_path):
    """A budgeted run of the fast recipe that bench/quality/records.py marked superseded (the recipe moved on) is no
    longer shown as the recipe's (the README's table) but among its earlier settings, with the overrides that give it
    back."""
    from tables import Results
    from tables.curves import fast_recipe_test, fast_recipe_test_earlier, recipe_runs

    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    shipped = recipe_runs(Results(results))
    path = results / "quality_tatoeba_fast_30min.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data | {"superseded": {"marked_at": "0123456", "overrides": ["model.dropout=0.3"]}}))
    assert len(recipe_runs(Results(results))) == len(shipped) - 1
    assert "model.dropout=0.3" in fast_recipe_test_earlier(Results(results))
    assert "model.dropout=0.3" not in fast_recipe_test(Results(results))


def test_every_result_file_has_its_provenance():
    missing = []
    for path in sorted(RESULTS.rglob("*.json")):
        prov = json.loads(path.read_text()).get("provenance") or {}
        machine = prov.get("machine") or {}
        if not all(prov.get(k) for k in ("command", "commit", "date", "torch")) or not machine.get("cpu"):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"result files without provenance (command, commit, date, machine, torch): {missing}"


def test_every_registered_table_is_on_a_page():
    """A renderer no page asks for is a table that went stale unseen."""
    sys.path.insert(0, str(GENERATOR))
    try:
        import importlib
        import pkgutil

        import tables

        for module in pkgutil.iter_modules(tables.__path__):
            importlib.import_module(f"tables.{module.name}")
        pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
        used = {m for p in pages for m in re.findall(r"<!-- results: ([\w.-]+) -->", p.read_text())}
        assert not set(tables.TABLES) - used, f"tables no page shows: {sorted(set(tables.TABLES) - used)}"
    finally:
        sys.path.remove(str(GENERATOR))


def readme_alone(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout holding the README alone (an empty docs/), and a copy of the result files, to change and check."""
    root, results = tmp_path / "root", tmp_path / "results"
    (root / "docs").mkdir(parents=True)
    shutil.copy(ROOT / "README.md", root / "README.md")
    shutil.copytree(RESULTS, results)
    return root, results


def edited(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_check_reads_the_readme_and_its_provenance_lines(tmp_path):
    """--check compares the README's tables too, their source lines (records, machine, dates) and the provenance page
    they link: a figure, a date or a machine changed in a JSON makes it fail naming README.md and the table; a commit
    or a command, naming the provenance page; as committed it passes."""
    root, results = readme_alone(tmp_path)
    shutil.copy(ROOT / "docs" / "provenance.md", root / "docs" / "provenance.md")
    check = ("--check", "--root", str(root), "--results", str(results))
    done = report(*check)
    assert done.returncode == 0, done.stderr  # the README's tables as their JSON renders them, provenance included
    luong = "quality_tatoeba_luong.json"  # a record the README's headline reads
    for name, change, says in [
        ("toy_quality.json", lambda d: d["runs"][0].update(test_bleu=d["runs"][0]["test_bleu"] + 1.0), "README.md"),
        (luong, lambda d: d["provenance"].update(date="2020-01-01T00:00:00"), "README.md"),
        (luong, lambda d: d["provenance"]["machine"].update(cpu="Another CPU"), "README.md"),
        (luong, lambda d: d["provenance"].update(commit="0123456789abcdef"), "docs/provenance.md"),
        (luong, lambda d: d["provenance"].update(command="python -m bench.quality.quality --model x"),
         "docs/provenance.md"),
    ]:
        original = (results / name).read_text()
        edited(results / name, change)
        done = report(*check)
        table = "headline" if says == "README.md" else "provenance"
        assert done.returncode == 1 and f"{says}: {table}" in done.stderr, (name, done.stderr)
        (results / name).write_text(original)


def test_the_check_fails_on_a_table_read_from_a_file_without_its_provenance(tmp_path):
    """A result file whose provenance is gone or lacks a field fails --check, naming the file, even where the
    README was rendered from it that way (no traceback either way)."""
    root, results = readme_alone(tmp_path)
    for change, lacks in [
        (lambda d: d.pop("provenance"), "no provenance"),
        (lambda d: d["provenance"].pop("torch"), "provenance without torch"),
        (lambda d: d["provenance"]["machine"].pop("cpu"), "provenance without machine.cpu"),
    ]:
        original = (results / "quality_tatoeba_luong.json").read_text()
        edited(results / "quality_tatoeba_luong.json", change)
        assert report("--root", str(root), "--results", str(results)).returncode == 0  # rewritten as it is
        done = report("--check", "--root", str(root), "--results", str(results))
        assert done.returncode == 1 and f"bench/results/quality_tatoeba_luong.json: {lacks}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        (results / "quality_tatoeba_luong.json").write_text(original)
        shutil.copy(ROOT / "README.md", root / "README.md")


def test_a_lane_that_grew_or_was_never_timed_is_stale():
    from bench.suite.test_lanes import command, stale
    timed = [{"lane": "fast", "passed": 480, "skipped": 6, "failed": 4}, {"lane": "full", "passed": 560}]
    assert stale(timed, {"fast": 500, "full": 600}) == []  # within a tenth
    assert stale(timed, {"fast": 540, "full": 560}) == ["fast: 490 tests when timed, 540 now"]
    assert stale(timed[:1], {"fast": 490, "full": 560}) == ["full: not timed"]
    before = [{"lane": "full", "passed": 560, "command": "python -m pytest -q tests"}]  # timed in one process
    assert stale(before, {"full": 560}) == [f"full: timed as python -m pytest -q tests, run as {command('full')} now"]


def test_the_lanes_timed_are_the_commands_the_docs_give():
    """The full lane is the README's test command and CI's; both lanes are the developer guide's."""
    from bench.suite.test_lanes import command

    pages = {name: (ROOT / name).read_text() for name in ("README.md", ".ci/run", "docs/developing.md")}
    assert command("full") in pages["README.md"] and command("full") in pages[".ci/run"]
    assert command("fast") in pages["docs/developing.md"] and command("full") in pages["docs/developing.md"]


def test_a_test_that_needs_the_tiny_runs_is_left_out_of_the_fast_lane():
    """Whichever fixture brings them (a module's checkpoint fixture, ``trained``...), a test that needs the tiny runs
    is marked slow at collection, and one that needs none is left as it is."""
    import conftest

    class Item:
        def __init__(self, *fixtures: str):
            self.fixturenames, self.marks = list(fixtures), []

        def add_marker(self, mark) -> None:
            self.marks.append(mark.name)

    needs, does_not = Item("ckpt", "trained", "tiny_runs", "tmp_path"), Item("tmp_path", "data_cache")
    conftest.pytest_collection_modifyitems([needs, does_not])
    assert needs.marks == ["slow"] and does_not.marks == []


def test_a_lane_s_time_is_summed_by_test_file_from_pytest_s_durations():
    from bench.suite.test_lanes import by_file
    output = "\n".join([
        "== slowest durations ==",
        "12.50s call     tests/test_a.py::test_x[1 2]",
        "3.00s setup    tests/test_b.py::test_y",
        "2.00s call     tests/test_a.py::test_z",
        "0.07s teardown tests/test_b.py::test_y",
        "1.00s call     tests/test_c.py::test_w",
        "== 3 passed in 19.00s ==",
    ])  # fmt: skip
    assert by_file(output, top=2) == [{"file": "tests/test_a.py", "seconds": 14.5},
                                      {"file": "tests/test_b.py", "seconds": 3.1}]  # fmt: skip


@pytest.mark.slow  # collects the whole suite (about 20 s)
def test_the_recorded_test_lanes_are_this_suite_s():
    """The docs' lane times (bench/results/test_lanes.json) were measured on a suite of about this size."""
    done = subprocess.run([sys.executable, "-m", "bench.suite.test_lanes", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr


REFERENCE_PAGES = sorted((ROOT / "docs" / "results").glob("*.md"))


def tables_of(text: str) -> list[list[str]]:
    """The Markdown tables of a page: each its rows (header and separator left out)."""
    found, rows = [], None
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            rows = [] if rows is None else rows
            rows.append(line)
        elif rows is not None:
            found.append(rows[2:])
            rows = None
    return found


def test_the_reference_pages_are_short_and_fold_nothing():
    """Each page under docs/results/ is a reference a reader can take in: at most 250 lines, no table over 12 rows,
    nothing folded away in <details> (provenance is one line a table and a page of its own); the README folds
    nothing either."""
    assert REFERENCE_PAGES, "no reference page under docs/results/"
    for page in REFERENCE_PAGES:
        text = page.read_text()
        assert len(text.splitlines()) <= 250, f"{page.name}: {len(text.splitlines())} lines"
        assert "<details>" not in text, page.name
        assert all(len(rows) <= 12 for rows in tables_of(text)), (page.name, [len(r) for r in tables_of(text)])
    assert "<details>" not in (ROOT / "README.md").read_text()
    assert [len(r) for r in tables_of("a\n| h |\n|---|\n| 1 |\n| 2 |\n\n| h |\n|---|\n")] == [2, 0]


def test_a_reference_table_refuses_a_record_that_is_not_a_shipped_experiment_s(tmp_path):
    """The README's headline reads the fast recipe's 15-minute record: given an override beyond a data path, a seed
    and a time budget, or marked superseded, --check fails in one line naming the page, the table and the record;
    the same record renders in the lab notebook."""
    root, results = readme_alone(tmp_path)
    check = ("--check", "--root", str(root), "--results", str(results))
    assert report(*check).returncode == 0
    record = results / "quality_tatoeba_fast.json"
    original = record.read_text()
    for change, says in [
        (lambda d: d.update(overrides=["model.dropout=0.1"]), "with model.dropout=0.1 (more than a data path"),
        (lambda d: d.update(superseded={"marked_at": "0123456", "overrides": ["x=1"]}), "as it was before 0123456"),
        (lambda d: d.update(experiment="tatoeba_gone"), "experiment=tatoeba_gone, which conf/experiment/ no longer"),
    ]:
        edited(record, change)
        done = report(*check)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "README.md: table 'headline' reads bench/results/quality_tatoeba_fast.json: " in done.stderr
        assert says in done.stderr, done.stderr
        lab = root / "docs" / "lab" / "x.md"
        lab.parent.mkdir(exist_ok=True)
        lab.write_text("<!-- results: headline -->\n<!-- /results -->\n")
        assert report("--root", str(root), "--results", str(results), "--page", str(lab)).returncode == 0
        lab.unlink()
        record.write_text(original)


def test_the_harness_s_own_overrides_are_a_shipped_run_s_and_a_variant_s_are_not():
    from bench.quality.records import not_shipped

    harness = ["experiment=tatoeba_fast", "paths.tatoeba_splits=/data", "data.cache_dir=/tmp/c", "hydra.run.dir=/r",
               "run_test=false", "trainer.enable_progress_bar=false", "trainer.max_epochs=100", "seed=2",
               "data.prepare.num_proc=2", "+trainer.limit_val_batches=0", "callbacks.early_stopping=null",
               "callbacks.heatmaps=null", "callbacks.checkpoint.save_top_k=0", "callbacks.checkpoint.save_last=false",
               "+callbacks.clock.budget_s=900", "trainer.max_time=00:00:15:00", "data.num_workers=0"]  # fmt: skip
    run = {"system": "ours", "experiment": "tatoeba_fast", "settings": {}, "overrides": harness}
    assert not_shipped(run) is None
    for variant in ("trainer.precision=auto", "model.dropout=0.0", "trainer=gpu", "trainer.max_epochs=3"):
        assert variant in (not_shipped(run | {"overrides": [*harness, variant]}) or ""), variant
    assert not_shipped({"system": "joeynmt", "model": "transformer", "overrides": ["anything"]}) is None


def test_each_reference_figure_of_curves_draws_at_most_six_shipped_runs():
    """A curve figure on a reference page is one a summary of bench/quality/curve.py drew: at most six curves, each
    a shipped experiment's or JoeyNMT's."""
    from bench.quality.records import not_shipped

    summaries = {json.loads(p.read_text()).get("figure"): p for p in RESULTS.rglob("curves/**/*.json")}
    shown = 0
    for page in [ROOT / "README.md", *REFERENCE_PAGES]:
        for image in re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", page.read_text()):
            figure = (page.parent / image).resolve().relative_to(ROOT).as_posix()
            if (summary := summaries.get(figure)) is None:
                continue  # not a curve figure (a heatmap, a screenshot)
            data = json.loads(summary.read_text())
            assert len(data["files"]) <= 6, (figure, len(data["files"]))
            assert not_shipped(data) is None, (figure, not_shipped(data))
            shown += 1
    assert shown, "no curve figure on a reference page"


COMMAND_SCRIPT = re.compile(r"(?:^|[\s`(])((?:\S*/)?[\w/]+\.py)\b(?=[\s`)]|$)")
BENCH_MODULE = re.compile(r"python3? -m (bench(?:\.\w+)+)")


def test_every_command_a_page_shows_names_a_script_that_exists():
    """A command on a page (typed, or rendered from a record's provenance) names scripts and benchmark modules that
    exist today: no ``bench/<script>.py`` from before the scripts moved, no script that is gone."""
    missing = []
    for page in generator.pages(ROOT):
        text = page.read_text()
        for module in BENCH_MODULE.findall(text):
            if not (ROOT / Path(*module.split("."))).with_suffix(".py").is_file():
                missing.append(f"{page.relative_to(ROOT)}: python -m {module}")
        for block in re.findall(r"```bash\n(.*?)```|`([^`\n]+)`", text, re.S):
            for command in filter(None, block):
                if block[1] and not re.search(r"\bpython3? ", command):
                    continue  # an inline span that is not a command (a module's file name, say)
                command = re.sub(r"(^|\s)#.*", "", command)  # a comment names things, it runs nothing
                for script in COMMAND_SCRIPT.findall(command):
                    if script.startswith(("bench/", "docs/", "tests/")) or "/" not in script:
                        if not (ROOT / script).is_file():
                            missing.append(f"{page.relative_to(ROOT)}: {script}")
    assert not missing, missing
    assert generator.shown("OMP_NUM_THREADS=2 python bench/curve.py --plot x") == \
        "OMP_NUM_THREADS=2 python -m bench.quality.curve --plot x"


def test_a_recorded_command_s_paths_render_the_same_wherever_the_pages_are_rendered():
    """A record's paths are read against the checkout it ran in (its ``provenance.root``), not the one rendering the
    page: under it, relative to it; any other folder of that machine, DIR. (CI renders in another folder than the
    sessions that record.)"""
    command = "python -m bench.quality.curve --json /a/main/bench/results/x.json --data /a/shared/fra ../shared/y"
    want = "python -m bench.quality.curve --json bench/results/x.json --data DIR DIR"
    assert generator.shown(command, "/a/main") == want
    elsewhere = command.replace("/a/main", str(ROOT))  # this checkout's path, recorded on another machine
    assert generator.shown(elsewhere, "/a/main") == want.replace("bench/results/x.json", "DIR")
    relative = "python x.py --json bench/results/x.json"
    assert generator.shown(relative, "/a/main") == relative
