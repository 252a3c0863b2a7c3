"""Helpers shared by the benchmarks: config composition, timing, memory, output."""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data" / "fra-eng"


def compose(overrides: list[str]):
    """The Hydra config train.py would see, without starting a run."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def corpus_overrides(data_dir: str | Path, cache_dir: str | Path) -> list[str]:
    d = Path(data_dir).resolve()
    return [
        f"data.source.path={d / 'train.tsv'}",
        f"data.source.valid={d / 'valid.tsv'}",
        f"data.source.test={d / 'test.tsv'}",
        f"data.cache_dir={cache_dir}",
    ]


def prepared_corpus(cfg):
    """The prepared corpus of a composed config (its ``data`` section and seed), without Lightning."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from nmt.data.prepared import Preparation, prepare_corpus

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
    """Real tokens (source, target and its EOS) over padded tokens, for batches of pair indices."""
    src_lens, tgt_lens = np.asarray(src_lens, np.int64), np.asarray(tgt_lens, np.int64)  # stored as small types
    real = sum(src_lens[b].sum() + tgt_lens[b].sum() + len(b) for b in batches)
    padded = sum(len(b) * (src_lens[b].max() + tgt_lens[b].max() + 1) for b in batches)
    return float(real / padded)


def timed(translator, sentences: list[str]) -> tuple[float, list[str]]:
    """Seconds that ``translator`` (an ``nmt.translator.Translator``) takes for ``sentences``, and its outputs."""
    t = time.perf_counter()
    out = [r.text for r in translator.translate(sentences)]
    return time.perf_counter() - t, out


def write_json(path: str | Path, payload: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1))
    print(f"wrote {path}")


def table(rows: list[dict], columns: list[str]) -> str:
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    line = lambda vals: "  ".join(str(v).ljust(w) for v, w in zip(vals, widths))  # noqa: E731
    return "\n".join(
        [line(columns), line(["-" * w for w in widths]), *(line([r.get(c, "") for c in columns]) for r in rows)]
    )
