"""Bad input ends a command with one line, ``error: ...``, and exit status 1, never a traceback.

``train.py`` (through Hydra), ``translate.py`` and ``average.py`` all end this way: :func:`run` for a
command's ``main``, :func:`one_line_errors` around Hydra's.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

# what bad input raises here: ValueError (bad values, corpora, checkpoints: CorpusError, CheckpointError),
# OSError (files) and FloatingPointError (a NaN loss)
BAD_INPUT = (ValueError, OSError, FloatingPointError)
# terminal control characters (escape sequences included) that a file name or corpus text may carry
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class CorpusError(ValueError):
    """A corpus that cannot be read as asked; the message is one line naming file and line."""


# an error raised in a DataLoader worker comes back as the same type with the worker's traceback as its message
_WORKER = re.compile(r"^Caught \w+ in DataLoader worker process \d+\.\nOriginal Traceback", re.S)


def error_line(e: BaseException) -> str:
    """The one line for ``e``: "error: " and its message as :func:`one_line` writes it (for an error from a
    DataLoader worker, the worker's own message, not its traceback)."""
    message = str(e)
    if _WORKER.match(message):  # the traceback's last line is "module.Type: message"
        message = message.rstrip().rsplit("\n", 1)[-1].split(": ", 1)[-1]
    return "error: " + one_line(message)


def one_line(text: str) -> str:
    """``text`` on one line, with control characters shown as escapes (the server's JSON errors too)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], " ".join(text.split("\n")))


def bad_input(e: BaseException) -> BaseException | None:
    """The bad-input error ``e`` is (Hydra's wrapper of a target's own error unwrapped), or None for a bug."""
    if type(e).__name__ == "InstantiationException" and e.__cause__ is not None:
        e = e.__cause__
    return e if isinstance(e, BAD_INPUT) else None


def report(e: BaseException) -> bool:
    """Print the one line of a bad-input error (Hydra's wrapper unwrapped) on stderr; False for a bug."""
    if (bad := bad_input(e)) is None:
        return False
    print(error_line(bad), file=sys.stderr)
    return True


def run(main: Callable[[], int | None]) -> int:
    """``main()``'s exit status; bad input prints its one line and gives 1. A bug keeps its traceback."""
    try:
        return main() or 0
    except Exception as e:
        if not report(e):
            raise
        return 1


@contextmanager
def one_line_errors() -> Iterator[None]:
    """:func:`run` as a context (around Hydra's main): bad input exits with status 1 after its one line."""
    try:
        yield
    except Exception as e:
        if not report(e):
            raise
        sys.exit(1)


def interrupted(what: str) -> NoReturn:
    """Ctrl-C: one line, ``interrupted: <what>``, and exit status 130 (the shell's for SIGINT)."""
    print(f"interrupted: {what}", file=sys.stderr)
    sys.exit(130)
