"""The configuration reference (docs/config.md): every key of ``conf/`` with its default, its allowed range or words
(as train.py checks them: :func:`nmt.settings.allowed`, from the ``Annotated`` and ``Literal`` hints of the arguments
that take them, or ``RANGES`` and ``CHOICES``) and its meaning (the comment beside it), read from the YAML files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from nmt import settings
from nmt.bounds import Choice, Range
from tables import Results, grid, table

CONF = Path(__file__).resolve().parents[3] / "conf"
LINE = re.compile(r"^(?P<indent> *)(?:- )?(?P<key>[\w./@-]+):(?P<value>[^#]*?)\s*(?:#\s?(?P<comment>.*))?$")
COMMENT = re.compile(r"^(?P<indent> *)#\s?(?P<text>.*)$")


@dataclass
class Key:
    name: str
    default: str
    meaning: str


def header(path: Path) -> str:
    """The file's leading comment, joined (the ``@package`` directive left out)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        if "@package" not in line:
            lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def keys(path: Path, prefix: str) -> list[Key]:
    """Every leaf key of a YAML file (dotted, under ``prefix``) with its value and comment; a comment on the lines
    right below a key, indented past its start, continues that key's meaning."""
    out: list[Key] = []
    stack: list[tuple[int, str]] = []
    last: Key | None = None
    last_indent = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            last = None if not line.strip() else last
            continue
        if c := COMMENT.match(line):
            if last is not None and len(c.group("indent")) > last_indent:
                last.meaning = f"{last.meaning} {c.group('text').strip()}".strip()
            else:
                last = None
            continue
        m = LINE.match(line)
        if not m or m.group("key") == "defaults" or line.lstrip().startswith("- "):
            last = None
            continue
        indent = len(m.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group("key")))
        value, comment = m.group("value").strip(), (m.group("comment") or "").strip()
        name = ".".join([*([prefix] if prefix else []), *(k for _, k in stack)])
        last_indent = indent
        if value:
            last = Key(name, value, comment)
            out.append(last)
        else:
            last = Key(name, "", comment)  # a section: its comment describes what follows
            if comment:
                out.append(last)
    return out


# the bounds that only say "any integer a C int holds", written short so that the column stays narrow
SHORT = {"2,147,483,647": "2³¹ − 1", "4,294,967,295": "2³² − 1"}


def bounds_of(rel: str, prefix: str, names: list[str]) -> dict[str, Range | Choice]:
    """The range or words of each of ``names`` (keys of ``rel``, a file of ``conf/``, under ``prefix``) as train.py
    checks them (:func:`nmt.settings.allowed`): from the targets and typed sections of the file itself, and where a
    number's target is chosen elsewhere (an experiment's ``model.encoder.num_layers``), from the config the file is
    composed into (its group's option chosen: ``experiment=tatoeba_fast``)."""
    from omegaconf import OmegaConf

    tree = OmegaConf.create({prefix: OmegaConf.load(CONF / rel)} if prefix else OmegaConf.load(CONF / rel))
    found = settings.allowed(tree)
    numbers = [n for n in names if type(OmegaConf.select(tree, n, throw_on_resolution_failure=False)) in (int, float)]
    if all(n in found for n in numbers):  # (a word-valued key's words come with the target that takes it)
        return found
    from hydra import compose, initialize_config_dir

    group, _, stem = rel.removesuffix(".yaml").rpartition("/")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return found | settings.allowed(compose(config_name="config", overrides=[f"{group}={stem}"] if group else []))


def allowed(name: str, bounds: dict[str, Range | Choice]) -> str:
    """The range or the allowed words of a key among ``bounds`` (its file's: :func:`bounds_of`), or "–"."""
    text = str(bounds[name]) if name in bounds else "–"
    for long, short in SHORT.items():
        text = text.replace(long, short)
    return text


def escape(text: str) -> str:
    return text.replace("|", "\\|")


HEAD = ("key", "default", "allowed", "meaning")
LONG = 20  # a file with more keys than this gets a table per section, each under its own heading


def fixed(rows: list[tuple[str, str, str, str]]) -> str:
    """One table of keys, of class ``config-keys``: docs/_static/readable.css fixes its columns' widths, so that every
    column stays on screen at 1366 px however long a key or a default is (a long one wraps inside its cell)."""
    return f":::{{table}}\n:class: config-keys\n\n{grid(HEAD, rows)}\n:::"


def tables_of(rows: list[tuple[str, str, str, str]]) -> str:
    """The rows of one file as one table, or, past :data:`LONG` rows, as a table per section (``loss``,
    ``callbacks``, ``data.prepare``, ...: the first part of the key that not every key shares), so that a long file
    reads in parts and each part is in the page's contents."""
    if len(rows) <= LONG:
        return fixed(rows)
    names = [row[0].strip("`").split(".") for row in rows]
    common = 0  # the parts every key shares (``data`` in data/base.yaml): the sections are the part after them
    while all(len(n) > common + 1 and n[common] == names[0][common] for n in names):
        common += 1
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    for name, row in zip(names, rows):
        sections.setdefault(".".join(name[: common + 1]) if len(name) > common + 1 else "", []).append(row)
    return "\n\n".join(
        (f"### `{section}.*`\n\n" if section else "") + fixed(part) for section, part in sections.items()
    )


@table("config_reference")
def config_reference(results: Results) -> str:
    parts, files = [], []
    top = [
        "config.yaml",
        *(f"{g.name}/{f.name}" for g in sorted(CONF.iterdir()) if g.is_dir() for f in sorted(g.glob("*.yaml"))),
    ]
    for rel in top:
        path = CONF / rel
        group = rel.split("/")[0] if "/" in rel else ""
        prefix = "" if not group or "@package _global_" in path.read_text(encoding="utf-8") else group
        files.append((rel, path, group, prefix, keys(path, prefix)))
    meanings = {}  # a key set again elsewhere (an experiment, another option) means what its commented line says
    for *_, found in sorted(files, key=lambda f: f[0].startswith("experiment/")):  # defining files first
        for k in found:
            meanings.setdefault(k.name, k.meaning) if k.meaning else None
    for rel, path, group, prefix, found in files:
        title = "`conf/config.yaml` (the root)" if not group else f"`{group}={path.stem}` (`conf/{rel}`)"
        rows = []
        bounds = bounds_of(rel, prefix, [k.name for k in found if k.default])
        for k in found:
            if k.name.startswith("hydra.") or k.name.endswith("._target_") and not k.meaning:
                continue
            default = f"`{escape(k.default)}`" if k.default else "(section)"
            meaning = k.meaning or meanings.get(k.name, "")
            rows.append((f"`{k.name}`", default, allowed(k.name, bounds), escape(meaning) or "–"))
        about = header(path)
        parts.append(f"## {title}\n\n{about}\n\n" + (tables_of(rows) if rows else "(no keys of its own)"))
    generated = "<small>Generated from `conf/` and the code that takes each key by `docs/generator/report.py`.</small>"
    return "\n\n".join(parts) + "\n\n" + generated
