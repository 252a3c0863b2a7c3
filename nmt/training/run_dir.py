"""A run's folders: a fresh run never writes over the checkpoints of another, a refused run leaves no folder that
Hydra made for it, and the latest state a run saved is found for the advice that resumes it."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import hydra
from omegaconf import DictConfig

RESUMABLE = ("last", "on_exception")  # the files that hold a run's latest state (last-v1.ckpt too), newest first
CREATED: set[str] = set()  # run directories that did not exist when this process started them (FreshRun)


def checkpoint_dirs(cfg: DictConfig) -> dict[str, Path]:
    """Where the run's callbacks write checkpoints: ``callbacks.<name>.dirpath`` -> the folder."""
    dirs = {}
    for name, node in (cfg.get("callbacks") or {}).items():
        if isinstance(node, DictConfig) and node.get("dirpath"):
            dirs[f"callbacks.{name}.dirpath"] = Path(str(node.dirpath)).expanduser().resolve()
    return dirs


def latest_saved(cfg: DictConfig) -> Path | None:
    """The checkpoint of the run's latest state among what its callbacks saved (last, on exception or best: the
    latest update, then the newest file), or None."""
    from nmt import checkpoint

    saved = [p for d in checkpoint_dirs(cfg).values() if d.is_dir() for p in d.glob("*.ckpt")
             if p.stem.split("-v")[0] in RESUMABLE or p.stem.startswith("best")]  # fmt: skip
    return max(saved, key=lambda p: (checkpoint.step_of(p) or -1, p.stat().st_mtime)) if saved else None


def refuse_used_run_dir(run_dir: Path, dirs: dict[str, Path], ckpt_path: str | None, key: str = "hydra.run.dir"):
    """A ValueError where the folders ``dirs`` (key -> folder) hold checkpoints that this run would write over: a
    fresh run (no ``ckpt_path``), or one resuming a checkpoint from elsewhere. The line names the checkpoint that
    holds the latest state there, to resume from, and the key (``key``, the run directory) to change instead."""
    held = {p.resolve(): k for k, d in dirs.items() if d.is_dir() for p in d.glob("*.ckpt") if p.is_file()}
    if not held or (ckpt_path and Path(ckpt_path).expanduser().resolve() in held):
        return
    latest = [p for p in held if p.stem.split("-v")[0] in RESUMABLE] or [p for p in held if p.stem != "averaged"]
    newest = max(latest or held, key=lambda p: p.stat().st_mtime)
    run_dir = run_dir.resolve()
    where = f"{key}={run_dir}" if newest.is_relative_to(run_dir) else f"{held[newest]}={newest.parent}"
    other = key if newest.is_relative_to(run_dir) else held[newest]
    if key == "hydra.sweep.dir":  # a sweep's jobs do not continue one checkpoint
        raise ValueError(f"{where}: holds the checkpoints of earlier runs ({newest}), which a fresh sweep would write "
                         f"over; choose another {key}")  # fmt: skip
    doing = f"resuming ckpt_path={ckpt_path} there" if ckpt_path else "a fresh run"
    raise ValueError(
        f"{where}: holds the checkpoints of an earlier run, which {doing} would write over; to continue that run, "
        f"add {shlex.quote(f'ckpt_path={newest}')}; else choose another {other}"
    )


@contextmanager
def forgotten_if_refused(out: Path) -> Iterator[None]:
    """Bad input inside: the run directory goes too, where Hydra made it for this run (it holds nothing else)."""
    from nmt.errors import bad_input

    try:
        yield
    except Exception as e:
        made = {".hydra", f"{hydra.core.hydra_config.HydraConfig.get().job.name}.log"}
        if bad_input(e) and str(out) in CREATED and out.is_dir() and {p.name for p in out.iterdir()} <= made:
            shutil.rmtree(out, ignore_errors=True)
        raise
