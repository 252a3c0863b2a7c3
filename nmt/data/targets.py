"""The target sides of a corpus's training split: what a model trained on it may reproduce by recall.

A score on held-out pairs is split by them (:func:`nmt.scores.score_split`): the pairs whose reference is among them
and the unseen ones. They are read from the corpus's own inputs as preparation splits them (held-out files, or a hash
of the French), every training pair counted, before any length filter.

    seen = config_targets(OmegaConf.load(run_dir / ".hydra" / "config.yaml"))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt.data.batching import mix64
from nmt.data.encoded import EncodedCorpus
from nmt.data.rules import Rules
from nmt.data.sources import CorpusSource
from nmt.scores import targets


def training_targets(source: CorpusSource, cache_dir: str | Path, rules: Rules, block_lines: int = 100_000
                     ) -> frozenset[str]:  # fmt: skip
    """The target sides of every pair ``source`` puts in its training split (turned round where ``rules.reverse``)."""
    out: list[str] = []
    for stream in source.streams(Path(cache_dir)):
        skips = stream.skips(rules.on_bad_line)
        for block in stream.blocks(block_lines):
            pairs, _, where = stream.read(block, skips, rules)
            out.extend(t for t, split in zip(pairs.tgt, where) if split == "train")
    return targets(out)


def config_targets(cfg) -> frozenset:
    """:func:`training_targets` of a composed train.py config (a run's ``.hydra/config.yaml``): its ``data.source``,
    ``data.cache_dir`` and ``data.prepare`` rules."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from nmt.data.prepare import Preparation

    prep = Preparation(**OmegaConf.to_container(cfg.data.prepare, resolve=True))
    return training_targets(instantiate(cfg.data.source), cfg.data.cache_dir, prep.rules(cfg.seed), prep.block_lines)


def sentence_hashes(flat: np.ndarray, offsets: np.ndarray, start: int, stop: int) -> np.ndarray:
    """A 64-bit hash of each of sentences ``start``..``stop`` of one side (``flat[offsets[i]:offsets[i + 1]]``):
    its ids in order and its length, one pass over them."""
    bounds = np.asarray(offsets[start : stop + 1], np.int64)
    lo, lens = int(bounds[0]), np.diff(bounds)
    ids = np.asarray(flat[lo : int(bounds[-1])], np.uint64)  # (tokens,)
    pos = np.arange(len(ids), dtype=np.int64) - np.repeat(bounds[:-1] - lo, lens)  # each token's place in its sentence
    with np.errstate(over="ignore"):
        mixed = mix64(ids ^ mix64(pos.astype(np.uint64)))
        total = np.concatenate([np.zeros(1, np.uint64), np.cumsum(mixed, dtype=np.uint64)])  # modulo 2**64
        return mix64((total[bounds[1:] - lo] - total[bounds[:-1] - lo]) ^ mix64(lens.astype(np.uint64)))


def _hashes(corpus: EncodedCorpus, start: int, stop: int) -> dict[str, np.ndarray]:
    """Pairs ``start``..``stop``'s hashes: of each pair (both sides) and of each target side."""
    tgt = sentence_hashes(corpus.tgt_flat, corpus.tgt_offsets, start, stop)
    src = sentence_hashes(corpus.src_flat, corpus.src_offsets, start, stop)
    with np.errstate(over="ignore"):
        return {"pair": mix64(src ^ (tgt * np.uint64(0x9E3779B97F4A7C15))), "tgt": tgt}


def in_training(train: EncodedCorpus, held: EncodedCorpus, chunk: int = 1 << 13) -> tuple[int, int]:
    """How many pairs of ``held`` (a held-out split) are also training pairs, and how many of its references are
    training targets (its scores then measure recall as well: :func:`nmt.scores.score_split`'s seen part), by their
    ids: a pass over the training split in chunks, memory as the held-out split's and a chunk's."""
    mine = _hashes(held, 0, len(held))
    wanted = {key: np.unique(h) for key, h in mine.items()}  # sorted, each hash once
    seen = {key: np.zeros(len(w), bool) for key, w in wanted.items()}
    for start in range(0, len(train), chunk):
        theirs = _hashes(train, start, min(start + chunk, len(train)))
        for key, w in wanted.items():
            if len(w):
                at = np.minimum(np.searchsorted(w, theirs[key]), len(w) - 1)
                seen[key][at[w[at] == theirs[key]]] = True
    pairs, targets = (int(np.isin(mine[k], wanted[k][seen[k]]).sum()) for k in ("pair", "tgt"))
    return pairs, targets
