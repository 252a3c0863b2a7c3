"""The GPU check's pack: the ignored folder .gpu/ that a device call carries (at most 64 MiB), made once on a machine
with the network and ../shared, and what the check needs of it.

    make_pack(PACK, ROOT.parent / "shared")   # python -m bench.gpu.gpu_check --pack
    unready(args)                             # the first input missing, as one line; None when all are there
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.anchors.joeynmt_env import download
from bench.common import ROOT, SPLITS, git

PACK = ROOT / ".gpu"
CARRY_LIMIT = 64 * 2**20  # bytes a device call carries
HYDRA = ("hydra-core==1.3.8", "omegaconf==2.3.1", "antlr4-python3-runtime==4.9.3")
# requirements.txt's pytest and pytest-timeout (its config sets `timeout`), and what pytest imports (the versions
# `pip download pytest==9.2.0` pulls); packaging too, though Lightning brings it, so that the group stands alone
PYTEST = ("pytest==9.2.0", "pytest-timeout==2.4.0", "pluggy==1.7.0", "iniconfig==2.3.1", "pygments==2.21.0",
          "packaging==26.4")  # fmt: skip


@dataclass(frozen=True)
class Wheels:
    """Wheels the pack holds for a package the GPU machine may lack: all of ``requirements`` installed (with no
    dependencies, from the pack alone) where ``module`` cannot be imported; ``option`` names their folder."""

    module: str
    requirements: tuple[str, ...]
    option: str

    @property
    def wheel(self) -> str:
        """The first requirement's wheel, which the folder must hold."""
        name, version = self.requirements[0].split("==")
        return f"{name.replace('-', '_')}-{version}-py3-none-any.whl"

    def missing(self) -> bool:
        return importlib.util.find_spec(self.module) is None


WHEELS = (Wheels("hydra", HYDRA, "wheels"), Wheels("pytest", PYTEST, "pytest_wheels"))


def pack_parts(pack: Path) -> dict[str, Path]:
    """The pack's folders by the option that reads them."""
    return {
        "wheels": pack / "wheels" / "hydra",
        "pytest_wheels": pack / "wheels" / "pytest",
        "joeynmt_wheels": pack / "wheels" / "joeynmt",
        "data": pack / "fra-eng",
        "joeynmt_anchor": pack / "joeynmt" / "anchor",
        "joeynmt_work": pack / "joeynmt" / "prep",
    }


def made(part: Path, make: Callable[[Path], None]) -> None:
    """``part`` made by ``make`` (into a partial folder, renamed once done) unless it is there."""
    if part.is_dir():
        print(f"pack: {part} kept")
        return
    partial = part.with_name(part.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    make(partial)
    partial.rename(part)
    print(f"pack: {part} made")


def copy_files(src: Path, dest: Path, names) -> None:
    """``names`` from ``src`` into ``dest``, without their modes (../shared's are read-only)."""
    for name in names:
        shutil.copyfile(src / name, dest / name)


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def make_pack(pack: Path, shared: Path) -> int:
    """The folder the device call carries, from the network and ``shared`` (../shared); its size in bytes."""
    parts, anchor = pack_parts(pack), shared / "anchors" / "joeynmt"
    if not (anchor / "prep_data.py").is_file() or not (shared / "data" / "fra-eng").is_dir():
        raise SystemExit(f"gpu_check: --shared {shared}: no anchors/joeynmt or data/fra-eng there; pass ../shared")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", "wheel", "--no-deps", "-w"]
    for wheels in WHEELS:
        made(parts[wheels.option], lambda d, w=wheels: subprocess.run([*pip, str(d), *w.requirements], check=True))
    made(parts["joeynmt_wheels"], download)
    made(parts["data"], lambda d: copy_files(shared / "data" / "fra-eng", d, SPLITS))
    made(parts["joeynmt_anchor"], lambda d: copy_files(anchor, d, [f.name for f in anchor.iterdir() if f.is_file()]))
    prep = [sys.executable, str(parts["joeynmt_anchor"] / "prep_data.py"), "--shared", str(parts["data"])]
    made(parts["joeynmt_work"], lambda d: subprocess.run([*prep, "--out", str(d)], check=True))
    commit = git("rev-parse", "HEAD") + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    (pack / "COMMIT").write_text(commit + "\n")
    size = folder_size(pack)
    print(f"pack: {pack} holds {size / 2**20:.1f} MiB (at commit {commit}); "
          "on the device: python -m bench.gpu.gpu_check")
    if size > CARRY_LIMIT:
        raise SystemExit(f"gpu_check: {pack} is {size / 2**20:.1f} MiB, over the {CARRY_LIMIT // 2**20} MiB carried")
    return size


def unready(args) -> str | None:
    """The first input the check lacks, as one line that says how to make it; None when all are there."""
    needs = {
        "data": SPLITS,
        "joeynmt_wheels": ("joeynmt-2.3.0-py3-none-any.whl",),
        "joeynmt_anchor": ("rnn_bahdanau.yaml", "transformer.yaml", "run_train.sh", "parse_train_log.py"),
        "joeynmt_work": ("data/train.fr", "data/spm/fr.model", "data/spm/en.model"),
    }
    needs |= {wheels.option: (wheels.wheel,) for wheels in WHEELS if wheels.missing()}
    for option, files in needs.items():
        folder = getattr(args, option)
        if missing := [f for f in files if not (folder / f).is_file()]:
            return (
                f"gpu_check: --{option.replace('_', '-')} {folder}: no {', '.join(missing)} there; make the pack with "
                f"`python -m bench.gpu.gpu_check --pack` (on a machine with the network and ../shared), then carry .gpu"
            )
    return None
