"""How long the test lanes take: the fast lane (``-m "not slow"``) and the full suite that CI and the quick start run.

    python bench/test_lanes.py [--lanes fast full] [--json bench/results/test_lanes.json]

Each lane runs as the docs give it, in a fresh process, one after the other; the wall-clock time and pytest's own
summary line (passed, skipped, failed) are recorded. Run it with the machine to itself: the time is the figure.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

from common import ROOT, options, table, write_json

LANES = {
    "fast": [sys.executable, "-m", "pytest", "-q", "-m", "not slow", "tests"],
    "full": [sys.executable, "-m", "pytest", "-q", "tests"],
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lanes", nargs="+", default=list(LANES), choices=list(LANES))
    options(p, "json")
    args = p.parse_args()
    rows = []
    for lane in args.lanes:
        start = time.perf_counter()
        done = subprocess.run(LANES[lane], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|skipped|failed|errors?|deselected)", summary)}
        command = "python " + " ".join(f'"{a}"' if " " in a else a for a in LANES[lane][1:])
        rows.append(
            {
                "lane": lane,
                "command": command,
                "seconds": round(seconds, 1),
                "exit": done.returncode,
                "summary": summary,
                **counts,
            }
        )
        print(f"{lane}: {seconds / 60:.1f} min, {summary}", flush=True)
    print(table(rows, ["lane", "seconds", "exit", "summary"]))
    write_json(args.json, {"lanes": rows})
    sys.exit(max(r["exit"] for r in rows))


if __name__ == "__main__":
    main()
