"""The project's commands named as the user started them: ``nmt-translate`` where the program runs as an installed
console script (``[project.scripts]`` of ``pyproject.toml``), ``python translate.py`` in a checkout.

Every message, hint and ``--help`` text that names a command goes through :func:`command` (how to run it) or
:func:`program_name` (its name in prose), or has its text rewritten by :func:`named_as_started`; the choice is made from
``sys.argv[0]``'s name.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

COMMANDS = ("train", "translate", "align", "serve", "export", "average")  # each a root script and an nmt-* command
PREFIX = "nmt-"  # an installed command's name: nmt-<command>
# "python translate.py" or a bare "translate.py", not a path's end (bench/train.py, nmt/cli/export.py) nor a longer name
_NAMED = re.compile(rf"(?<![\w/.\\-])(python3? )?({'|'.join(COMMANDS)})\.py\b")


def installed(argv0: str | None = None) -> bool:
    """Whether the program runs as an installed console script (``argv0``, default ``sys.argv[0]``: ``nmt-...``)."""
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    return name.startswith(PREFIX)


def command(name: str, argv0: str | None = None) -> str:
    """How to run the command ``name`` (``"translate"``): ``nmt-translate`` installed, else
    ``python translate.py``."""
    if name not in COMMANDS:
        raise KeyError(f"{name}: not a command of the project ({', '.join(COMMANDS)})")
    return PREFIX + name if installed(argv0) else f"python {name}.py"


def program_name(name: str, argv0: str | None = None) -> str:
    """The command ``name`` in prose ("a model export.py wrote"): ``nmt-export`` installed, else ``export.py``."""
    return command(name, argv0).removeprefix("python ")


def named_as_started(text: str, argv0: str | None = None) -> str:
    """``text`` with every ``python X.py`` and bare ``X.py`` of the project's commands named as the user started the
    program (unchanged in a checkout)."""
    if not installed(argv0):
        return text
    return _NAMED.sub(lambda m: PREFIX + m.group(2), text)


def rendered(parser: argparse.ArgumentParser, argv0: str | None = None) -> argparse.ArgumentParser:
    """``parser`` with its usage, description, epilog and every option's help :func:`named_as_started` (in place)."""
    for attr in ("usage", "description", "epilog"):
        if getattr(parser, attr):
            setattr(parser, attr, named_as_started(getattr(parser, attr), argv0))
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = named_as_started(action.help, argv0)
    return parser
