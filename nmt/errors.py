"""Bad input ends a command with one line, ``error: ...``, and exit status 1, never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

# what bad input raises here: ValueError (bad values, corpora, checkpoints: CorpusError, CheckpointError),
# OSError (files) and FloatingPointError (a NaN loss)
BAD_INPUT = (ValueError, OSError, FloatingPointError)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Print bad input's error as one line on stderr and exit 1; anything else (a bug) keeps its traceback."""
    try:
        yield
    except Exception as e:
        cause = e
        if type(e).__name__ == "InstantiationException" and e.__cause__ is not None:  # Hydra's wrapper
            cause = e.__cause__
        if not isinstance(cause, BAD_INPUT):
            raise
        print(f"error: {cause}", file=sys.stderr)
        sys.exit(1)
