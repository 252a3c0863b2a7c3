"""The package as a user installs it: requires-python true to the pins, and `pip install .` giving the commands."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from conftest import ROOT, TINY_DATA, TINY_MODEL

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins() -> dict[str, Version]:
    """requirements.txt's pinned packages (name -> version)."""
    out = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            out[name.strip().lower()] = Version(version.strip())
    return out


def oldest_python(requires: str) -> Version:
    """The oldest Python release (3.x) that ``requires`` admits."""
    return next(Version(f"3.{minor}") for minor in range(30) if Version(f"3.{minor}") in SpecifierSet(requires))


def test_requires_python_admits_no_python_a_pin_refuses():
    """Every pinned package installs on the oldest Python that pyproject.toml admits (its own Requires-Python)."""
    oldest = oldest_python(PROJECT["requires-python"])
    refused = {}
    for name, version in pins().items():
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue  # an extra left out of this environment
        needs = dist.metadata.get("Requires-Python")
        if dist.version == str(version) and needs and oldest not in SpecifierSet(needs):
            refused[f"{name}=={version}"] = needs
    assert not refused, f"requires-python {PROJECT['requires-python']} admits Python {oldest}, which these refuse"
    assert Version(f"{sys.version_info.major}.{sys.version_info.minor}") in SpecifierSet(PROJECT["requires-python"])


def test_the_code_is_checked_for_the_oldest_python_it_admits():
    """ruff reads the code as the oldest supported Python does (syntax and APIs of later versions are errors), and
    the interpreter running the tests is one the package admits."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]
    oldest = oldest_python(PROJECT["requires-python"])
    assert tool["target-version"] == f"py{oldest.major}{oldest.minor}"


def test_the_pins_satisfy_the_package_dependencies():
    """requirements.txt installs versions that pyproject.toml's dependencies and extras accept."""
    pinned = pins()
    wanted = [Requirement(r) for r in PROJECT["dependencies"]]
    wanted += [Requirement(r) for extra in PROJECT["optional-dependencies"].values() for r in extra]
    outside = [
        f"{r.name}: pinned {pinned[r.name.lower()]}, wanted {r.specifier}"
        for r in wanted
        if r.name.lower() in pinned and pinned[r.name.lower()] not in r.specifier
    ]
    unpinned = [r.name for r in wanted if r.name.lower() not in pinned and r.name != PROJECT["name"]]
    assert not outside and not unpinned, (outside, unpinned)


@pytest.mark.slow
def test_pip_install_gives_commands_that_train_and_translate_from_any_folder(tmp_path):
    """`pip install .` into a fresh virtual environment (its dependencies seen from this one), then `nmt-train` and
    `nmt-translate` in an empty folder elsewhere: the configuration travels inside the package."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # this interpreter's packages seen from the new one (where this one is itself a venv, as CI's is, venv's
    # --system-site-packages would show the base interpreter's instead); its editable nmt is not among them
    (next((venv / "lib").glob("python*/site-packages")) / "outer.pth").write_text("\n".join(site.getsitepackages()))
    py, bin_dir = venv / "bin" / "python", venv / "bin"
    build = tmp_path / "source"  # the checkout's files, so that the build leaves nothing in it
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).exists() or (ROOT / name).is_symlink():
            (build / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, build / name, follow_symlinks=False)
    pip = [str(py), "-m", "pip", "install", "--quiet", "--no-deps", str(build)]
    subprocess.run(pip, check=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    where = subprocess.run([str(py), "-c", "import nmt; print(nmt.__file__)"], cwd=work, env=env, capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    assert str(venv) in where, where  # the installed copy, not the checkout
    train = [str(bin_dir / "nmt-train"), "hydra.run.dir=run", "paths.data_cache=cache", *TINY_DATA, *TINY_MODEL]
    train += ["model.decoder.attn_hidden=32", "trainer.max_steps=20", "trainer.val_check_interval=10"]
    train += ["trainer.check_val_every_n_epoch=null", "trainer.enable_progress_bar=false", "run_test=false"]
    done = subprocess.run(train, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ckpt = work / "run" / "checkpoints" / "last.ckpt"
    # the end of the run names the commands as the user has them: nmt-translate, not a checkout's python translate.py
    console = done.stdout + done.stderr
    summary = r"\]\[train\]\[INFO\] - translate: +nmt-translate --ckpt \S+\.ckpt < input\.fr$"
    assert re.search(summary, console, re.M), console[-3000:]
    assert "translate.py" not in console
    helped = subprocess.run([str(bin_dir / "nmt-translate"), "--help"], cwd=work, env=env, capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert helped.returncode == 0 and "nmt-translate --ckpt best.ckpt" in helped.stdout, helped.stdout
    assert ".py" not in helped.stdout, helped.stdout
    translate = [str(bin_dir / "nmt-translate"), "--ckpt", str(ckpt), "--beam-size", "2"]
    out = subprocess.run(translate, cwd=work, env=env, input="Le chat dort.\nJe vois la maison.\n",
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(out.stdout.splitlines()) == 2
    assert not (work / "conf").exists() and (work / "cache").is_dir()  # the configuration came from the package

