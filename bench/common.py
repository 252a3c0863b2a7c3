"""What the benchmarks have in common: their inputs, config composition, timing, memory, output."""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from nmt.config_keys import model_families

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"  # the repository's data folder: git ignores what is put there

SPLITS = ("train.tsv", "valid.tsv", "test.tsv")
HANSARDS = ("dev.fr", "dev.en", "dev.en-fr.gold")  # read by nmt.alignment.gold.hansards
JOEYNMT_RUN = ("run_train.sh", "train_budget.py", "parse_train_log.py")  # the anchor's training run
JOEYNMT_FIX = "pass --joeynmt-anchor DIR, the folder of the JoeyNMT 2.3 anchor (its configs and scripts)"
SPLITS_HELP = (
    "a folder of the splits train.tsv, valid.tsv and test.tsv (French<TAB>English), e.g. a copy of the Tatoeba "
    "splits (default: %(default)s)"
)


def holding(path: str | Path, names: tuple[str, ...], fix: str) -> Path:
    """``path`` if it is a folder holding each file of ``names``, else argparse's refusal: one line that names the
    folder, what it lacks and ``fix`` (how to give one). An argparse ``type=``, through the helpers below."""
    folder = Path(path)
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{folder}: no such folder (it must hold {', '.join(names)}); {fix}")
    if missing := [n for n in names if not (folder / n).is_file()]:
        raise argparse.ArgumentTypeError(f"{folder}: no {', '.join(missing)} there; {fix}")
    return folder


def splits(path: str | Path) -> Path:
    """A folder of the three splits (``--data``): train.tsv, valid.tsv and test.tsv, French<TAB>English."""
    fix = (
        "pass --data DIR with the three splits as TSV, French<TAB>English (the JoeyNMT comparisons were measured "
        "on the Tatoeba splits they give)"
    )
    return holding(path, SPLITS, fix)


def training_split(path: str | Path) -> Path:
    """A folder holding a training split, train.tsv (French<TAB>English), for scripts that read no other split."""
    return holding(path, SPLITS[:1], "pass a folder with the Tatoeba training split, train.tsv (French<TAB>English)")


def hansards(path: str | Path) -> Path:
    """The Hansards development part with its gold links (``--hansards``), as :func:`nmt.alignment.gold.hansards`
    reads it."""
    fix = (
        "pass --hansards DIR with the Hansards development lines (dev.fr lowercased and tokenised, dev.en) and "
        "their gold links (dev.en-fr.gold)"
    )
    return holding(path, HANSARDS, fix)


MODELS = model_families()  # conf/model/*.yaml
# The options the scripts share, each defined once: ``--NAME`` -> argparse's keywords (see :func:`options`)
# fmt: off
OPTIONS: dict[str, dict] = {
    "data": {"type": splits, "default": str(DATA / "fra-eng"), "metavar": "DIR", "help": SPLITS_HELP},
    "cache": {"default": "data", "help": "the folder of prepared corpora, reused by later runs (default: %(default)s;"
              " None: a new one, so that preparation is measured)"},
    "models": {"nargs": "+", "default": list(MODELS), "choices": MODELS, "help": "the models (default: %(default)s)"},
    "threads": {"type": int, "default": 2, "help": "torch's CPU threads (default: %(default)s)"},
    "ckpt": {"required": True, "help": "the checkpoint measured (train.py's .ckpt)"},
    "sentences": {"type": int, "default": None, "help": "the first N test sentences (default: all)"},
    "precision": {"nargs": "+", "default": ["32-true"], "choices": ["32-true", "bf16-mixed"],
                  "help": "Lightning's precision(s), e.g. 32-true bf16-mixed (default: %(default)s)"},
    "compile": {"nargs": "+", "choices": ["off", "on"], "default": ["off"], "help": "eager, compiled, or both"},
    "hansards": {"type": hansards, "default": str(DATA / "hansards-dev"), "metavar": "DIR",
                 "help": "the Hansards development part: dev.fr, dev.en and the gold links dev.en-fr.gold "
                 "(default: %(default)s)"},
    "tatoeba": {"type": training_split, "default": str(DATA / "fra-eng"), "metavar": "DIR",
                "help": "the folder of the Tatoeba training split, train.tsv: eflomal's training text "
                "(default: %(default)s)"},
    "json": {"help": "the result file (default: %(default)s)"},
}
# fmt: on


def options(p: argparse.ArgumentParser, *names: str, **defaults: object) -> None:
    """Add ``--NAME`` for each of ``names`` as :data:`OPTIONS` defines it, and name the parser's program as it is run
    (:func:`program`). ``defaults`` (by the option's name, dashes as underscores) give a script its own default; one
    given as a ``Path``, not a string, is not checked by argparse (check it with :func:`check` where it is read).
    ``--json`` defaults to ``bench/results/SCRIPT.json``."""
    if p.prog == Path(sys.argv[0]).name:  # argparse's default: the file's name, which python cannot run here
        p.prog = program()
    for name in names:
        spec = {"default": f"bench/results/{Path(sys.argv[0]).stem}.json"} if name == "json" else {}
        spec |= OPTIONS[name]
        if (key := name.replace("-", "_")) in defaults:
            spec["default"] = defaults[key]
        p.add_argument(f"--{name}", **spec)


def tsv_words(path: str | Path) -> list[tuple[list[str], list[str]]]:
    """A TSV corpus's pairs as whitespace words (its raw text, as eflomal's users give it)."""
    rows = (line.split("\t") for line in Path(path).read_text(encoding="utf-8").splitlines())
    return [(r[0].split(), r[1].split()) for r in rows if len(r) >= 2]


def joeynmt_config(path: str | Path) -> Path:
    """The JoeyNMT anchor's folder (``--joeynmt-anchor``) for decoding: its transformer.yaml."""
    return holding(path, ("transformer.yaml",), JOEYNMT_FIX)


def joeynmt_anchor(path: str | Path) -> Path:
    """The JoeyNMT anchor's folder (``--joeynmt-anchor``) for training: transformer.yaml and its run's scripts."""
    return holding(path, ("transformer.yaml", *JOEYNMT_RUN), JOEYNMT_FIX)


def check(parser: argparse.ArgumentParser, option: str, kind, path: str | Path) -> Path:
    """``kind(path)`` for an input checked only where it is needed, or ``parser``'s one-line refusal (as argparse
    gives for a ``type=``)."""
    try:
        return kind(path)
    except argparse.ArgumentTypeError as e:
        parser.error(f"argument {option}: {e}")


def compose(overrides: list[str]):
    """The Hydra config train.py would see, without starting a run."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def corpus_overrides(data_dir: str | Path, cache_dir: str | Path) -> list[str]:
    """Overrides that point an ``experiment=tatoeba_*`` config (``data=tatoeba``) at the splits in ``data_dir`` and its
    prepared data at ``cache_dir``."""
    return [f"paths.tatoeba_splits={Path(data_dir).resolve()}", f"data.cache_dir={cache_dir}"]


def prepared_corpus(cfg):
    """The prepared corpus of a composed config (its ``data`` section and seed), without Lightning."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from nmt.data.prepare import Preparation, prepare_corpus

    prep = Preparation(**OmegaConf.to_container(cfg.data.prepare, resolve=True))
    return prepare_corpus(instantiate(cfg.data.source), prep, cfg.data.cache_dir, cfg.seed)


def peak_rss_gib(children: bool = False) -> float:
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 2**20  # KiB -> GiB


def gemm_gflops(n: int = 1024, repeats: int = 20, device: str = "cpu", dtype: torch.dtype = torch.float32) -> float:
    """Median matrix-multiply throughput on this process's threads (or ``device``'s GPU, in ``dtype``)."""
    if device != "cpu":
        n = max(n, 8192)  # a GPU needs a large product to reach its rate
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device != "cpu" else lambda: None
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        a @ b
        sync()
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times) / 1e9


def padding_efficiency(src_lens, tgt_lens, batches) -> float:
    """Real tokens (source, target and its EOS) over padded tokens, for (non-empty) batches of pair indices."""
    src_lens, tgt_lens = np.asarray(src_lens, np.int64), np.asarray(tgt_lens, np.int64)  # stored as small types
    sizes = np.array([len(b) for b in batches], np.int64)
    idx = np.concatenate([np.asarray(b, np.int64) for b in batches])  # every batch's pairs, one after the other
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # where each batch begins in idx
    src, tgt = src_lens[idx], tgt_lens[idx]
    real = src.sum() + tgt.sum() + len(idx)
    padded = (sizes * (np.maximum.reduceat(src, starts) + np.maximum.reduceat(tgt, starts) + 1)).sum()
    return float(real / padded)


def timed(translator, sentences: list[str]) -> tuple[float, list[str]]:
    """Seconds that ``translator`` (an ``nmt.inference.translator.Translator``) takes for ``sentences``, and its
    outputs."""
    t = time.perf_counter()
    out = [r.text for r in translator.translate(sentences)]
    return time.perf_counter() - t, out


def git(*args: str) -> str:
    """``git args`` in the repository, or "" where there is no git or no repository."""
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (Linux), else the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu() -> dict:
    """The CPU a figure is valid for: its model name and the flags that decide bf16's speed (Linux's /proc/cpuinfo;
    None where it cannot be read)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = set(next(line for line in text.splitlines() if line.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        flags = None
    has = lambda flag: None if flags is None else flag in flags  # noqa: E731
    return {"model": cpu_model(), "avx512_bf16": has("avx512_bf16"), "amx_bf16": has("amx_bf16")}


def gpu(device: str) -> str | None:
    """The GPU a figure is valid for (its name), or None for a run on the CPU alone."""
    return torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else None


def invocation() -> list[str]:
    """How this process's script was started, as a command line shows it: ``python -m bench.<group>.<script>`` for a
    benchmark (run as a module), else ``python <path>`` as typed."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None and spec.name != "__main__":
        return ["python", "-m", spec.name]
    return ["python", Path(sys.argv[0]).as_posix()]


def program() -> str:
    """This script as its usage line and its errors name it: the command that runs it (:func:`invocation`)."""
    return " ".join(invocation())


def provenance() -> dict:
    """What produced a result: the command and the checkout it ran in, the commit (and whether the work tree differed
    from it), the date, the machine (CPU model, cores, torch's threads, GPU if any) and the versions of Python, torch,
    CUDA, cuDNN and Lightning. Where NMT_COMMIT is set (the GPU check sets it from its pack: "HASH" or "HASH-dirty", as
    ``git`` saw the checkout when it packed), the commit is its, and ``commit_from`` says so: a copy on a lent machine
    may have no .git, or the .git of an older commit than the files it was sent."""
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    if packed := os.environ.get("NMT_COMMIT", ""):
        commit, dirty = packed.removesuffix("-dirty"), packed.endswith("-dirty")
        source = {"commit_from": "NMT_COMMIT"}
    elif commit := git("rev-parse", "HEAD"):
        dirty, source = bool(git("status", "--porcelain", "--untracked-files=no")), {}
    else:
        dirty, source = None, {"commit_from": None}
    try:
        lightning = importlib.metadata.version("lightning")
    except importlib.metadata.PackageNotFoundError:
        lightning = None
    return {
        "command": shlex.join([*invocation(), *sys.argv[1:]]),
        "root": str(ROOT),  # the checkout it ran in: pages show the command's paths under it relative to it
        "commit": commit,
        "dirty": dirty,
        **source,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads(), "gpu": gpu},
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "lightning": lightning,
    }


def write_json(path: str | Path, payload: dict) -> None:
    """``payload`` as JSON at ``path``, with the provenance of this run under "provenance" (docs/generator/report.py
    shows it beside every table it renders from the file); written whole or not at all."""
    from nmt.data import atomic

    text = json.dumps({**payload, "provenance": provenance()}, indent=1, ensure_ascii=False) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(Path(path), text)
    print(f"wrote {path}")


def table(rows: list[dict], columns: list[str]) -> str:
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    line = lambda vals: "  ".join(str(v).ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    return "\n".join(
        [line(columns), line(["-" * w for w in widths]), *(line([r.get(c, "") for c in columns]) for r in rows)]
    )
