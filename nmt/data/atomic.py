"""Every file of the prepared-data cache is written whole or not at all, and a file-system error names its folder.

A file is written under a temporary name in its own folder and renamed when complete; a folder of
files is built under a temporary name and renamed as a whole. A kill, Ctrl-C or a full disk then
leaves at most a ``*.part`` leftover, never a file that a later run would trust.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def folder_error(e: OSError, folder: Path) -> OSError:
    """``e`` as one line that names the folder (no space left, read-only file system, no permission)."""
    error = OSError(f"cannot write in {folder}: {e.strerror or e}")
    error.errno = e.errno
    return error


def write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as e:
        raise folder_error(e, path.parent) from None
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


@contextmanager
def folder(final: str | Path) -> Iterator[Path]:
    """Build a folder under a temporary name (yielded) that becomes ``final`` only when the block completes.

    Running out of space (or quota, or finding the file system read-only) while the block writes is
    reported as :func:`folder_error` of ``final``'s folder.
    """
    final = Path(final)
    tmp = final.with_name(f"{final.name}.{os.getpid()}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
    except OSError as e:
        raise folder_error(e, final.parent) from None
    try:
        yield tmp
        tmp.rename(final)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise folder_error(e, final.parent) from None
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove_leftovers(folder: str | Path, name: str) -> None:
    """Remove what interrupted writes of ``name`` left in ``folder`` (never trusted: redone)."""
    for stale in Path(folder).glob(f"{name}.*.part"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
