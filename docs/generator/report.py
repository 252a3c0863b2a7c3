"""Render every results table of the docs and the README from the JSON under ``bench/results/``.

    python docs/generator/report.py            # rewrite the tables in place
    python docs/generator/report.py --check    # exit 1, naming each page and table, if a committed table differs

A page asks for a table by name between two comments; everything between them is the generator's:

    <!-- results: engine_speed -->
    ...
    <!-- /results -->

The renderers are the ``@table`` functions of ``docs/generator/tables/`` (a module per page). Below each table, a
line names the result files it was rendered from and their provenance (command, commit, date, machine, torch).
"""

from __future__ import annotations

import argparse
import html
import importlib
import pkgutil
import re
import sys
from pathlib import Path

import tables
from tables import TABLES, Results

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"(<!-- results: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)


def pages(root: Path) -> list[Path]:
    """The README and every Markdown page of the docs."""
    return [root / "README.md", *sorted(p for p in (root / "docs").rglob("*.md") if "_build" not in p.parts)]


SCRIPT = re.compile(r"^(?:(?:python3?) )?(?:\S*/)?bench/(?:\w+/)?(\w+)\.py(?= |$)")  # a benchmark, as run or typed


def benchmark(stem: str) -> str | None:
    """``bench.<group>.<stem>``, the module of the benchmark script named ``stem`` today, or None."""
    found = sorted((ROOT / "bench").glob(f"*/{stem}.py"))
    return ".".join(found[0].relative_to(ROOT).with_suffix("").parts) if len(found) == 1 else None


def shown(command: str) -> str:
    """``command`` as a page shows it: a benchmark script, recorded by the path it had when it ran (bench/<script>.py,
    before the scripts moved into their groups' folders), as the command that runs it today
    (``python -m bench.<group>.<script>``); a path outside the repository (a folder of the machine that ran it) as
    DIR, as the docs write options that take one."""

    def outside(token: str) -> str:
        key, eq, value = token.rpartition("=") if "=" in token and not token.startswith("-") else ("", "", token)
        if "/" in value and not (ROOT / value).resolve().is_relative_to(ROOT):
            value = "DIR"
        return key + eq + value

    if (script := SCRIPT.match(command)) and (module := benchmark(script[1])):
        command = f"python -m {module}{command[script.end():]}"
    return " ".join(outside(t) for t in command.split(" "))


# what a result file's provenance must say; a file read without it is named by --check (and by a rewrite)
RECORDED = ("command", "commit", "date", "machine", "torch")
UNRECORDED: dict[str, str] = {}  # result file -> what its provenance lacks


def unrecorded(prov: dict | None) -> str:
    """What ``prov`` lacks of :data:`RECORDED` (the machine: its CPU), or "" if nothing."""
    if not isinstance(prov, dict):
        return "no provenance"
    lacking = [key for key in RECORDED if not prov.get(key)]
    if "machine" not in lacking and not (isinstance(prov["machine"], dict) and prov["machine"].get("cpu")):
        lacking.append("machine.cpu")
    return f"provenance without {', '.join(lacking)}" if lacking else ""


def sources(results: Results) -> str:
    """The files a table was read from, each with its provenance, as a folded list below the table."""
    items = []
    for name in results.read:
        prov = results.load(name).get("provenance")
        if lacks := unrecorded(prov):
            UNRECORDED[name] = lacks
            items.append(f"<li><code>{name}</code>: provenance not recorded</li>")
            continue
        machine = prov["machine"]
        where = ", ".join(str(x) for x in (machine["cpu"], machine.get("gpu")) if x)
        detail = (
            f"<code>{html.escape(shown(prov['command']))}</code> at {prov['commit'][:7] or 'no commit'}, "
            f"{prov['date'][:10]}, "
            f"{html.escape(where)}, {machine.get('threads', 'not recorded')} threads, torch {prov['torch']}"
            + (" (provenance reconstructed from git)" if prov.get("reconstructed") else "")
        )
        items.append(f"<li><code>bench/results/{name}</code>: {detail}</li>")
    if not items:
        return ""
    names = ", ".join(f"<code>{n}</code>" for n in results.read)
    return f"<details><summary>Source: {names}</summary><ul>{''.join(items)}</ul></details>"


def render(name: str, folder: Path) -> str:
    if name not in TABLES:
        raise SystemExit(f"no table named {name!r} (docs/generator/tables/ registers {', '.join(sorted(TABLES))})")
    results = Results(folder)
    try:
        body = TABLES[name](results).strip()
    except FileNotFoundError as e:
        raise SystemExit(
            f"table {name!r}: {e.filename}: no such result file (run its benchmark: docs/benchmarks.md)"
        ) from None
    return f"{body}\n\n{line}\n" if (line := sources(results)) else f"{body}\n"


def rendered(text: str, folder: Path) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), folder) + m.group(4), text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 where a page differs")
    p.add_argument(
        "--results", type=Path, default=ROOT / "bench" / "results", help="result folder (default: %(default)s)"
    )
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout whose README and docs/ are rendered")
    args = p.parse_args(argv)
    UNRECORDED.clear()  # of this pass only (tests run several in one process)
    for module in pkgutil.iter_modules(tables.__path__):
        importlib.import_module(f"tables.{module.name}")
    stale = []
    for page in pages(args.root):
        text = page.read_text(encoding="utf-8")
        new = rendered(text, args.results)
        if new != text:
            names = [
                m.group("name") for m, n in zip(BLOCK.finditer(text), BLOCK.finditer(new)) if m.group() != n.group()
            ]
            stale.append(f"{page.relative_to(args.root)}: {', '.join(names)}")
            if not args.check:
                page.write_text(new, encoding="utf-8")
    if UNRECORDED:  # a table whose sources cannot be told: what produced a figure is part of the figure
        lacking = [f"bench/results/{name}: {lacks}" for name, lacks in sorted(UNRECORDED.items())]
        print("result files a table reads, without their provenance (rerun their benchmark: docs/benchmarks.md):",
              *lacking, sep="\n  ", file=sys.stderr)  # fmt: skip
    if args.check and stale:
        print("tables that differ from bench/results (run python docs/generator/report.py):",
              *stale, sep="\n  ", file=sys.stderr)  # fmt: skip
    if args.check and (stale or UNRECORDED):
        sys.exit(1)
    print("\n".join(f"rewrote {s}" for s in stale) or "every table is as its JSON renders it")


if __name__ == "__main__":
    main()
