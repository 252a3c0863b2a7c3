"""How long the test lanes take: the fast lane (``-m "not slow"``) and the full suite that CI and the quick start run.

    python -m bench.suite.test_lanes [--lanes fast full] [--json bench/results/test_lanes.json]
    python -m bench.suite.test_lanes --check      # exit 1 where the recorded lanes are no longer this suite's

Each lane runs as the docs give it, in a fresh process, one after the other; the wall-clock time, pytest's own
summary line (passed, skipped, failed) and the test files that took longest (pytest's durations) are recorded.
Run it with the machine to itself: the time is the figure.
--check collects the suite (no test runs, about 20 s) and compares each recorded lane's size with what the lane holds
now: a lane that gained or lost more than a tenth of its tests since it was timed has a stale figure (the full suite
runs this check, so the docs' figure cannot drift far from the suite).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.common import ROOT, options, table, write_json

WORKERS = ["-n", "auto", "--dist", "loadfile"]  # pytest-xdist: a worker a core, each test file on one
LANES = {
    "fast": [sys.executable, "-m", "pytest", "-q", *WORKERS, "-m", "not slow", "tests"],
    "full": [sys.executable, "-m", "pytest", "-q", *WORKERS, "tests"],
}
# every test's phases of at least 0.05 s in pytest's own report (PYTEST_ADDOPTS: the lane's command stays the docs')
DURATIONS = "--durations=0 --durations-min=0.05"
SLOWEST = 10  # the test files recorded of each lane: where its time goes
DRIFT = 0.1  # the share of a lane's tests that may come or go before its recorded time is stale
RUN = ("passed", "skipped", "failed", "errors", "error")  # what pytest's summary counts of the tests a lane ran


def pytest_collection_finish(session) -> None:
    """As a pytest plugin (``-p bench.suite.test_lanes``, from :func:`sizes`): how many tests each lane holds."""
    slow = sum(1 for item in session.items if item.get_closest_marker("slow"))
    print(f"LANES full={len(session.items)} fast={len(session.items) - slow}", flush=True)


def sizes() -> dict[str, int]:
    """The number of tests each lane holds now, from one collection of the suite."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "bench.suite.test_lanes", "tests"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    found = re.search(r"^LANES full=(\d+) fast=(\d+)$", done.stdout, re.M)
    if done.returncode != 0 or not found:
        raise SystemExit(f"collecting the suite failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return {"full": int(found[1]), "fast": int(found[2])}


def command(lane: str) -> str:
    """A lane's command as the docs give it (``python -m pytest ...``)."""
    return "python " + " ".join(f'"{a}"' if " " in a else a for a in LANES[lane][1:])


def stale(recorded: list[dict], now: dict[str, int]) -> list[str]:
    """What is stale in ``recorded`` (test_lanes.json's lanes) against the lanes' sizes ``now``: a lane not timed,
    one timed with another command than its own now, or one whose size moved by more than :data:`DRIFT` since."""
    found = []
    rows = {row["lane"]: row for row in recorded}
    for lane, size in now.items():
        timed = sum(rows[lane].get(k, 0) for k in RUN) if lane in rows else None
        if timed is None:
            found.append(f"{lane}: not timed")
        elif rows[lane].get("command", command(lane)) != command(lane):
            found.append(f"{lane}: timed as {rows[lane]['command']}, run as {command(lane)} now")
        elif abs(size - timed) > DRIFT * timed:
            found.append(f"{lane}: {timed} tests when timed, {size} now")
    return found


def by_file(output: str, top: int = SLOWEST) -> list[dict]:
    """The ``top`` test files that took longest in a pytest output with its durations report (setup, call and
    teardown of their tests summed; shared session fixtures count where they were first set up)."""
    seconds: dict[str, float] = {}
    for took, test in re.findall(r"^([\d.]+)s (?:setup|call|teardown) +(.+)$", output, re.M):
        file = test.split("::")[0]
        seconds[file] = seconds.get(file, 0.0) + float(took)
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:top]
    return [{"file": file, "seconds": round(took, 1)} for file, took in slowest]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lanes", nargs="+", default=list(LANES), choices=list(LANES))
    p.add_argument("--check", action="store_true", help="compare the recorded lanes with the suite; run none")
    options(p, "json")
    args = p.parse_args()
    if args.check:
        if found := stale(json.loads(Path(args.json).read_text())["lanes"], sizes()):
            print(f"{args.json}: stale ({'; '.join(found)}): rerun python -m bench.suite.test_lanes", file=sys.stderr)
            sys.exit(1)
        print(f"{args.json}: every lane as timed, within {DRIFT:.0%} of its tests")
        return
    rows = []
    for lane in args.lanes:
        start = time.perf_counter()
        env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} {DURATIONS}".strip()}
        done = subprocess.run(LANES[lane], cwd=ROOT, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|skipped|failed|errors?|deselected)", summary)}
        rows.append(
            {
                "lane": lane,
                "command": command(lane),
                "seconds": round(seconds, 1),
                "exit": done.returncode,
                "summary": summary,
                **counts,
                "slowest_files": by_file(done.stdout),
            }
        )
        print(f"{lane}: {seconds / 60:.1f} min, {summary}", flush=True)
    print(table(rows, ["lane", "seconds", "exit", "summary"]))
    write_json(args.json, {"lanes": rows})
    sys.exit(max(r["exit"] for r in rows))


if __name__ == "__main__":
    main()
