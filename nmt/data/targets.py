"""The target sides of a corpus's training split: what a model trained on it may reproduce by recall.

A score on held-out pairs is split by them (:func:`nmt.scores.score_split`): the pairs whose reference is among them
and the unseen ones. They are read from the corpus's own inputs as preparation splits them (held-out files, or a hash
of the French), every training pair counted, before any length filter.

    seen = config_targets(OmegaConf.load(run_dir / ".hydra" / "config.yaml"))
"""

from __future__ import annotations

from pathlib import Path

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
