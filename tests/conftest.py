"""Shared fixtures: tiny toy data and tiny models, trained once per test session through train.py."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from forked import run_script

from nmt.config_keys import model_families

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = model_families()  # conf/model/*.yaml: every family a model test is parametrised over

def family(name: str, root: Path = ROOT) -> dict:
    """A model family's settings as ``conf/model/<name>.yaml`` (of the tree at ``root``) writes them, ``name`` aside."""
    from omegaconf import OmegaConf

    settings = OmegaConf.to_container(OmegaConf.load(root / "conf" / "model" / f"{name}.yaml"))
    settings.pop("name", None)
    return settings


# The sizes a tiny model is given, each capped where its family's YAML has the key ("part.key" before "key"): any
# family, a new one included, shrinks by the keys it shares with these, and keeps its others as its YAML has them.
TINY_SIZES = {"emb_size": 16, "readout_size": 16, "encoder.hidden_size": 12, "decoder.hidden_size": 20,
              "attn_hidden": 10, "num_layers": 2, "heads": 2, "ff_size": 24}  # fmt: skip
RUN_SIZES = {"emb_size": 32, "readout_size": 32, "encoder.hidden_size": 32, "decoder.hidden_size": 48,
             "attn_hidden": 32, "num_layers": 2, "ff_size": 64}  # fmt: skip  # train.py's tiny runs, which learn
OFF = ("dropout", "attention_dropout")  # what a tiny model built in the test's process turns off


def shrunk(settings: dict, sizes: dict, part: str = "") -> dict:
    """``settings`` (a family's, or one part's) with each key of ``sizes`` it has capped there."""
    out = {}
    for key, value in settings.items():
        cap = sizes.get(f"{part}.{key}", sizes.get(key))
        if isinstance(value, dict):
            out[key] = shrunk(value, sizes, key)
        elif cap is not None and isinstance(value, int) and not isinstance(value, bool):
            out[key] = min(value, cap)
        else:
            out[key] = value
    return out


def chosen_family(overrides: tuple[str, ...] | list[str]) -> str:
    """The family ``model=...`` among ``overrides`` names, else conf/config.yaml's default."""
    import yaml

    named = [o.split("=", 1)[1] for o in overrides if o.startswith("model=")]
    if named:
        return named[-1]
    defaults = yaml.safe_load((ROOT / "conf" / "config.yaml").read_text())["defaults"]
    return next(d["model"] for d in defaults if isinstance(d, dict) and "model" in d)


def tiny_model_overrides(*overrides: str, root: Path = ROOT) -> list[str]:
    """The overrides that give the chosen family (``model=...`` among ``overrides``; of the tree at ``root``) its tiny
    sizes (RUN_SIZES): every key the sizes cap, so that an experiment's own sizes give way too."""
    def leaves(tree: dict, prefix: str = "model") -> dict:
        out = {}
        for key, value in tree.items():
            out |= leaves(value, f"{prefix}.{key}") if isinstance(value, dict) else {f"{prefix}.{key}": value}
        return out

    name = chosen_family(overrides)
    if not (root / "conf" / "model" / f"{name}.yaml").is_file():
        return []  # no such family: train.py refuses it, in its own words
    settings = family(name, root)
    capped = [k for k in leaves(settings) if k.removeprefix("model.") in RUN_SIZES or k.rpartition(".")[2] in RUN_SIZES]
    return [f"{k}={v}" for k, v in leaves(shrunk(settings, RUN_SIZES)).items() if k in capped]


TINY_MODEL = tiny_model_overrides()  # the default family's tiny sizes


TINY_DATA = [
    "data.source.train_size=600",
    "data.source.valid_size=24",
    "data.source.test_size=24",
    "data.prepare.spm.vocab_size=300",
    "data.max_tokens=1024",
]


def train_command(run_dir: Path, cache: Path, *overrides: str, toy: bool = True, tiny: bool = True) -> list[str]:
    """The real train.py through Hydra with tiny settings (``toy``: a small built-in corpus; ``tiny``: the chosen
    model's tiny sizes, else those ``overrides`` give)."""
    return [
        sys.executable,
        str(ROOT / "train.py"),
        f"hydra.run.dir={run_dir}",
        f"data.cache_dir={cache}",
        *(TINY_DATA if toy else []),
        *(tiny_model_overrides(*overrides) if tiny else []),
        "trainer.max_steps=16",
        "trainer.val_check_interval=8",
        "trainer.check_val_every_n_epoch=null",
        "trainer.log_every_n_steps=4",
        "trainer.enable_progress_bar=false",
        "trainer.accelerator=cpu",
        "callbacks.heatmaps.num_sentences=2",
        "callbacks.throughput.window_size=4",
        *overrides,
    ]


# what commands cache between runs (the aligner's tokens of a corpus: nmt.inference.pair_links.user_cache) goes to a
# folder of the test session, never the user's, for this process and every command it starts
os.environ["NMT_CACHE"] = tempfile.mkdtemp(prefix="nmt-test-cache-")
TRAIN_ENV = dict(os.environ, OMP_NUM_THREADS="1")
if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n: the workers share the cores, one thread each (as train.py's)
    import torch

    torch.set_num_threads(1)


def run_train(
    run_dir: Path,
    cache: Path,
    *overrides: str,
    check: bool = True,
    timeout: int = 300,
    toy: bool = True,
    tiny: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run :func:`train_command` to its end (in ``env``, :data:`TRAIN_ENV` by default); with ``check``, a failure is
    the test's failure."""
    cmd = train_command(run_dir, cache, *overrides, toy=toy, tiny=tiny)
    proc = run_script(cmd, ROOT, env or TRAIN_ENV, timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def shared_folder(tmp_path_factory, name: str) -> Path:
    """A folder of this test run that every pytest-xdist worker shares (``-n``): each worker's base folder lies in
    the run's own, so a session fixture that builds something there under a lock (``fcntl.flock``) builds it
    once for all workers instead of once a worker. Without workers, a folder of the session's."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory) -> Path:
    """The prepared-data cache the tests' train.py runs share (train.py prepares each corpus once, under its lock)."""
    return shared_folder(tmp_path_factory, "cache")


# what the tests translate, align and serve with: each family, and a Bahdanau model trained en->fr
TINY_RUNS = {name: [f"model={name}"] for name in FAMILIES} | {"en_fr": ["model=bahdanau", "data.prepare.reverse=true"]}


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory, data_cache) -> dict[str, Path]:
    """The TINY_RUNS, trained side by side (one thread each; the shared cache is prepared once, under its lock), once
    for all the workers of a test run: name -> run directory."""
    folder = shared_folder(tmp_path_factory, "tiny_runs")
    runs = {name: folder / name for name in TINY_RUNS}
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "done").exists():
            train_side_by_side({name: train_command(runs[name], data_cache, *TINY_RUNS[name]) for name in TINY_RUNS})
            (folder / "done").touch()
    return runs


def train_side_by_side(commands: dict[str, list[str]]) -> None:
    """Run each of ``commands`` (train.py's) at once and wait for them all; any failure is the test's."""
    procs = {
        name: subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=TRAIN_ENV, cwd=ROOT
        )
        for name, cmd in commands.items()
    }
    failed = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            failed[name] = err[-3000:]
    assert not failed, failed


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that needs the tiny runs (through any fixture) is a slow one: the fast lane (``-m "not slow"``) trains
    no model, so that it runs in the minutes a change of code can wait for; the full suite runs them all."""
    for item in items:
        if "tiny_runs" in item.fixturenames:  # the closure: every fixture the test needs, directly or not
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def trained(tiny_runs) -> dict[str, Path]:
    """One tiny trained run per model: name -> run directory."""
    return {name: tiny_runs[name] for name in FAMILIES}


@pytest.fixture(scope="session")
def trained_reverse(tiny_runs) -> Path:
    """A tiny Bahdanau model trained the other way (English to French): its last checkpoint."""
    return tiny_runs["en_fr"] / "checkpoints" / "last.ckpt"


def tiny_model(
    name: str, src_vocab: int = 40, tgt_vocab: int = 30, encoder: dict | None = None, sizes: dict = TINY_SIZES, **kw
):
    """A small untrained model of the family ``name``, built from its ``conf/model/<name>.yaml`` with ``sizes``
    (TINY_SIZES), dropout off and untied, unshared embeddings unless given; ``kw`` go to its decoder, except the
    keys the whole model takes (emb_size, readout_size, dropout, tie_embeddings, share_embeddings); ``encoder``'s to
    its encoder."""
    from nmt.models.seq2seq import build_model

    model = shrunk(family(name), sizes) | {"tie_embeddings": False, "share_embeddings": False}
    for part in ("encoder", "decoder"):
        model[part] |= {k: 0.0 for k in OFF if k in model[part]}
    model |= {k: 0.0 for k in OFF if k in model} | {k: kw.pop(k) for k in list(kw) if k in model or k == "readout_size"}
    model["encoder"] |= encoder or {}
    model["decoder"] |= kw
    return build_model(src_vocab_size=src_vocab, tgt_vocab_size=tgt_vocab, **model)


def families_whose(test) -> list[str]:
    """The families whose tiny model passes ``test``: what a model has (a recurrent state, a self-attention), not its
    family's name, chooses the families a test is for."""
    return [name for name in FAMILIES if test(tiny_model(name))]


def self_attending(model) -> bool:
    """Whether the decoder of ``model`` attends to its own outputs (teacher-forced: a third output)."""
    import torch

    with torch.no_grad():
        return model(torch.tensor([[5, 6]]), torch.tensor([2]), torch.tensor([[2, 7]]))[2] is not None


def data_settings(kind: str = "toy", **settings) -> dict:
    """``conf/data/<kind>.yaml`` as keyword arguments of the DataModule, with ``settings`` merged in: each key goes
    to the section that holds it (``source``, ``prepare`` or the top level); a dict merges into a dict. The
    ``source`` section stays a dict, its ``_target_`` included."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"data={kind}"])
    out = {k: v for k, v in OmegaConf.to_container(cfg.data, resolve=True).items() if not k.startswith("_")}
    for k, v in settings.items():
        section = next((out[s] for s in ("source", "prepare") if k in out[s]), out)
        section[k] = section[k] | v if isinstance(section.get(k), dict) and isinstance(v, dict) else v
    return out


def datamodule(kind: str = "toy", **settings):
    from hydra.utils import instantiate

    from nmt.training.datamodule import TranslationDataModule

    kwargs = data_settings(kind, **settings)
    return TranslationDataModule(**kwargs | {"source": instantiate(kwargs["source"])})


def chromium():
    paths = shutil.which("chromium"), shutil.which("chromedriver")
    if None in paths:
        if os.environ.get("CI"):
            pytest.fail("CI must install chromium and chromium-driver (see .ci/run)")
        pytest.skip("no chromium/chromedriver on this machine (CI installs them)")
    return paths


def headless_chromium(tmp_path):
    """A headless Chromium driven by Selenium, with its own profile and no network of its own."""
    browser, driver_path = chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver_path), options=options)
