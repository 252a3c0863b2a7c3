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

ROOT = Path(__file__).resolve().parents[1]
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
    """--check compares the README's tables too, and the provenance lines below them: a figure, a commit or a
    command changed in a JSON makes it fail naming README.md and the table; as committed it passes."""
    root, results = readme_alone(tmp_path)
    check = ("--check", "--root", str(root), "--results", str(results))
    done = report(*check)
    assert done.returncode == 0, done.stderr  # the README's tables as their JSON renders them, provenance included
    for name, change in [
        ("toy_quality.json", lambda d: d["runs"][0].update(test_bleu=d["runs"][0]["test_bleu"] + 1.0)),  # a figure
        ("quality_luong.json", lambda d: d["provenance"].update(commit="0123456789abcdef")),  # where it came from
        ("quality_luong.json", lambda d: d["provenance"].update(command="python -m bench.quality.quality --model x")),
    ]:
        original = (results / name).read_text()
        edited(results / name, change)
        done = report(*check)
        assert done.returncode == 1 and "README.md: headline" in done.stderr, (name, done.stderr)
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
        original = (results / "quality_luong.json").read_text()
        edited(results / "quality_luong.json", change)
        assert report("--root", str(root), "--results", str(results)).returncode == 0  # rewritten as it is
        done = report("--check", "--root", str(root), "--results", str(results))
        assert done.returncode == 1 and f"bench/results/quality_luong.json: {lacks}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        (results / "quality_luong.json").write_text(original)
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
