"""Render every results table of the docs and the README from the JSON under ``bench/results/``.

    python docs/generator/report.py            # rewrite the tables in place
    python docs/generator/report.py --check    # exit 1, naming each page and table, if a committed table differs
    python docs/generator/report.py --page docs/results/speed.md   # that page alone (repeatable)

A page asks for a table by name between two comments; everything between them is the generator's:

    <!-- results: engine_speed -->
    ...
    <!-- /results -->

The renderers are the ``@table`` functions of ``docs/generator/tables/`` (a module per page). Below each table, one
line names the result files it was rendered from, the machine, threads and dates, and links the provenance page
(``docs/provenance.md``, itself rendered: each file's command, commit, date, machine and torch).

Reference pages (the README and ``docs/results/``) show shipped configurations: a table there that reads the record of
a run its experiment alone (plus a data path, a seed and a time budget) does not reproduce, or a record marked
superseded, is refused, naming the page, the table and the record (:func:`bench.quality.records.not_shipped`). The lab
notebook (``docs/lab/``) renders any record.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import posixpath
import re
import sys
from pathlib import Path, PurePosixPath

import tables
from tables import TABLES, Results

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # bench.quality.records: what a reference table may show
from bench.quality.records import not_shipped  # noqa: E402

PROVENANCE = Path("docs") / "provenance.md"  # the page that lists every result file's provenance
RECORDED_ROOT = "/work/main"  # the checkout every record without provenance.root was made in
BLOCK = re.compile(r"(<!-- results: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)


def pages(root: Path) -> list[Path]:
    """The README and every Markdown page of the docs."""
    root = root.resolve()
    return [root / "README.md", *sorted(p for p in (root / "docs").rglob("*.md") if "_build" not in p.parts)]


# a benchmark, as run or typed, anywhere in a command (after VAR=value, timeout 900, ...)
SCRIPT = re.compile(r"(?:(?<= )|^)(?:python3? )?(?:\S*/)?bench/(?:\w+/)?(\w+)\.py(?= |$)")


def benchmark(stem: str) -> str | None:
    """``bench.<group>.<stem>``, the module of the benchmark script named ``stem`` today, or None."""
    found = sorted((ROOT / "bench").glob(f"*/{stem}.py"))
    return ".".join(found[0].relative_to(ROOT).with_suffix("").parts) if len(found) == 1 else None


def shown(command: str, root: str | None = None) -> str:
    """``command`` as a page shows it: a benchmark script, recorded by the path it had when it ran (bench/<script>.py,
    before the scripts moved into their groups' folders), as the command that runs it today
    (``python -m bench.<group>.<script>``); a path in the checkout it ran in (``root``, the record's
    ``provenance.root``; :data:`RECORDED_ROOT` for records from before it was recorded) relative to it; any other
    absolute path, or a relative one that leaves the checkout, (a folder of the machine that ran it) as DIR, as the
    docs write options that take one. Nothing depends on where the page is rendered."""
    base = PurePosixPath(root or RECORDED_ROOT)

    def outside(token: str) -> str:
        key, eq, value = token.rpartition("=") if "=" in token and not token.startswith("-") else ("", "", token)
        if value.startswith("/"):
            path = PurePosixPath(posixpath.normpath(value))
            value = path.relative_to(base).as_posix() if path.is_relative_to(base) else "DIR"
        elif "/" in value and posixpath.normpath(value).startswith(".."):
            value = "DIR"
        return key + eq + value

    command = SCRIPT.sub(lambda m: f"python -m {module}" if (module := benchmark(m[1])) else m[0], command)
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


def reference(page: Path, root: Path) -> bool:
    """Whether ``page`` is a reference page (the README, ``docs/results/``): shipped configurations only."""
    rel = page.relative_to(root)
    return rel == Path("README.md") or rel.parts[:2] == ("docs", "results")


def machine_of(prov: dict) -> str:
    """Where a result was measured, as a source line says it: ``CPU AMD EPYC, 2 threads`` or ``GPU ... (CPU ...)``."""
    return machines([prov])


def machines(provs: list[dict]) -> str:
    """Where results were measured: each machine (its GPU, else its CPU) once, with the threads its results used."""
    by: dict[str, set[int]] = {}
    for prov in provs:
        m = prov["machine"]
        where = f"GPU {m['gpu']} (host CPU {m['cpu']})" if m.get("gpu") else f"CPU {m['cpu']}"
        by.setdefault(where, set()).update([m["threads"]] if isinstance(m.get("threads"), int) else [])
    said = lambda t: "" if not t else f", {min(t)} thread{'s' * (max(t) > 1)}" if len(t) == 1 else \
        f", {min(t)}–{max(t)} threads"  # noqa: E731
    return "; ".join(f"{where}{said(threads)}" for where, threads in sorted(by.items()))


def sources(results: Results, page: Path, root: Path) -> str:
    """One line below a table: the files it was read from (their folder where they are many), where and when they
    were measured, and a link to the provenance page."""
    provs = {}
    for name in results.read:
        prov = results.load(name).get("provenance")
        if lacks := unrecorded(prov):
            UNRECORDED[name] = lacks
        else:
            provs[name] = prov
    if not results.read:
        return ""
    folders = sorted({str(Path("bench/results", n).parent) for n in results.read})
    named = ", ".join(f"`bench/results/{n}`" for n in results.read) if len(results.read) <= 3 else \
        f"{len(results.read)} records in `{'`, `'.join(folders)}`"  # fmt: skip
    where = machines(list(provs.values())) or "provenance not recorded"
    dates = sorted(p["date"][:10] for p in provs.values())
    when = "" if not dates else f"; {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
    link = Path(os.path.relpath(root / PROVENANCE, page.parent)).as_posix()
    return f"*Source: {named}; {where}{when}. Commands and commits: [provenance]({link}).*"


def render(name: str, folder: Path, page: Path, root: Path) -> str:
    """The table ``name`` as ``page`` shows it, with its source line; a SystemExit naming the page, the table and the
    record where a reference page's table reads a record that is not a shipped experiment's."""
    if name not in TABLES:
        raise SystemExit(f"no table named {name!r} (docs/generator/tables/ registers {', '.join(sorted(TABLES))})")
    results = Results(folder)
    try:
        body = TABLES[name](results).strip()
    except FileNotFoundError as e:
        raise SystemExit(
            f"table {name!r}: {e.filename}: no such result file (run its benchmark: docs/benchmarks.md)"
        ) from None
    if reference(page, root):
        for record in results.read:
            if why := not_shipped(results.load(record), folder):
                where = f"{page.relative_to(root)}: table {name!r} reads bench/results/{record}"
                raise SystemExit(f"{where}: {why}; show it in the lab notebook (docs/lab/), or ship what it measured "
                                 "as an experiment")  # fmt: skip
    return f"{body}\n\n{line}\n" if (line := sources(results, page, root)) else f"{body}\n"


def rendered(text: str, folder: Path, page: Path, root: Path) -> str:
    return BLOCK.sub(lambda m: m.group(1) + render(m.group("name"), folder, page, root) + m.group(4), text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 where a page differs")
    p.add_argument(
        "--results", type=Path, default=ROOT / "bench" / "results", help="result folder (default: %(default)s)"
    )
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout whose README and docs/ are rendered")
    p.add_argument("--page", type=Path, action="append", help="render this page alone (repeatable; default: all)")
    args = p.parse_args(argv)
    chosen = pages(args.root)
    if args.page:
        resolved = {page.resolve() for page in args.page}
        if unknown := sorted(str(page) for page in args.page if page.resolve() not in set(chosen)):
            p.error(f"--page {unknown[0]}: not a page of {args.root} (README.md or docs/**/*.md)")
        chosen = [page for page in chosen if page in resolved]
    UNRECORDED.clear()  # of this pass only (tests run several in one process)
    for module in pkgutil.iter_modules(tables.__path__):
        importlib.import_module(f"tables.{module.name}")
    stale = []
    for page in chosen:
        text = page.read_text(encoding="utf-8")
        new = rendered(text, args.results, page, args.root)
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
