"""A virtual environment for JoeyNMT 2.3.0 beside this Python's packages, made offline from a folder of wheels.

JoeyNMT declares 24 requirements (linters, pandas, datasets, ...) that its training never imports, so it is installed
without them, from wheels alone: :data:`REQUIREMENTS` (``subword-nmt`` is imported by ``joeynmt/tokenizers.py`` at
module level; ``importlib_metadata`` is imported but not declared; sentencepiece 0.2.0 because JoeyNMT calls a method
0.2.3 removed). The environment sees this interpreter's packages (torch, numpy, sacrebleu, ...) through a ``.pth``
file naming its ``site.getsitepackages()``: ``venv --system-site-packages`` would not do, since it names the *base*
interpreter's packages, and this interpreter may itself be a virtual environment (where torch is). Its own
site-packages come first on ``sys.path``, so its sentencepiece wins.

    from bench.anchors.joeynmt_env import make_env
    python = make_env(Path("work/joeynmt-venv"), Path("wheels"))   # then: python train_budget.py config.yaml

The wheels: ``pip download --no-deps joeynmt==2.3.0 subword-nmt==0.3.8 importlib_metadata==8.7.0
sentencepiece==0.2.0 -d DIR`` (sentencepiece's wheel is built per Python version: see :func:`download`).
"""

from __future__ import annotations

import importlib.util
import platform
import re
import site
import subprocess
import sys
import zipfile
from pathlib import Path

REQUIREMENTS = ("joeynmt==2.3.0", "subword-nmt==0.3.8", "importlib_metadata==8.7.0", "sentencepiece==0.2.0")
PYTHONS = ("3.10", "3.11", "3.12")  # the Pythons sentencepiece 0.2.0 has wheels for: download() fetches each
CHECK = "import joeynmt.training, sentencepiece, torch; print(sentencepiece.__version__, torch.__version__)"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def site_packages(venv: Path) -> Path:
    """The site-packages folder of a virtual environment made by this interpreter."""
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def wheel_for(requirement: str, wheels: Path) -> Path:
    """The wheel in ``wheels`` of ``name==version`` that this interpreter can install (pure Python, or built for
    this CPython on this machine's architecture)."""
    name, version = (_canonical(part) for part in requirement.split("=="))
    this = f"{sys.version_info.major}{sys.version_info.minor}"
    pythons = {"py3", f"py{this}", f"cp{this}"}
    for wheel in sorted(wheels.glob("*.whl")):
        parts = wheel.stem.split("-")  # name-version[-build]-python-abi-platform
        if (_canonical(parts[0]), _canonical(parts[1])) != (name, version):
            continue
        if set(parts[-3].split(".")) & pythons and (parts[-1] == "any" or platform.machine() in parts[-1]):
            return wheel
    raise FileNotFoundError(f"{wheels}: no wheel of {requirement} for Python {platform.python_version()}")


def install(requirements: tuple[str, ...], wheels: Path, target: Path, pip: bool | None = None) -> str:
    """``requirements`` from ``wheels`` alone (no index, no dependencies) into the folder ``target``, with this
    interpreter's pip, or, where it has none (``pip=False`` asks for this), by unpacking the wheels (none of these
    has scripts or data to place); how it was done."""
    if pip is None:
        pip = importlib.util.find_spec("pip") is not None
    if pip:
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
               "--no-deps", "--find-links", str(wheels), "--target", str(target), *requirements]  # fmt: skip
        subprocess.run(cmd, check=True)
        return "pip install --no-deps --no-index --target"
    for requirement in requirements:
        with zipfile.ZipFile(wheel_for(requirement, wheels)) as whl:
            whl.extractall(target)
    return "unpacked (no pip)"


def make_env(dest: Path, wheels: Path, pip: bool | None = None) -> Path:
    """A fresh virtual environment at ``dest`` with JoeyNMT 2.3.0 installed from ``wheels`` beside this
    interpreter's packages; its python, checked to import JoeyNMT's training, sentencepiece and torch."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(dest)], check=True)
    packages = site_packages(dest)
    (packages / "outer_site_packages.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    install(REQUIREMENTS, wheels, packages, pip)
    python = dest / "bin" / "python"
    subprocess.run([str(python), "-c", CHECK], check=True)
    return python


def download(dest: Path) -> None:
    """:data:`REQUIREMENTS`' wheels into ``dest`` (needs the network): sentencepiece's for each of :data:`PYTHONS` on
    Linux x86-64, the machines the GPU check runs on, as the Python there need not be this one."""
    pure = [r for r in REQUIREMENTS if not r.startswith("sentencepiece")]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"]
    pip += ["-d", str(dest)]
    subprocess.run([*pip, *pure], check=True)
    for version in PYTHONS:
        binary = ["--only-binary=:all:", "--python-version", version, "--platform", "manylinux2014_x86_64"]
        subprocess.run([*pip, *binary, "sentencepiece==0.2.0"], check=True)
