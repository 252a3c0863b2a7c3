"""Every boolean setting takes true or false only: Hydra reads no other word as a boolean, and a word such as ``no``
would reach the code as a non-empty string, which is true. Each key a shipped config sets to true or false, and each
argument annotated ``bool`` of a ``_target_`` of this package or of the trainer, is checked before preparation."""

from __future__ import annotations

import copy
import functools
import re

import pytest
from omegaconf import OmegaConf, open_dict
from test_settings import CONFIGS, composed, composed_once

from nmt.config_keys import config_nodes, flags, join_key, shipped_flags
from nmt.settings import check_config


def boolean_leaves(cfg) -> list[str]:
    """The keys of a composed config whose value is true or false."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    tree.pop("hydra", None)
    return [join_key(path, k) for path, node in config_nodes(tree) if isinstance(node, dict)
            for k, v in node.items() if isinstance(v, bool)]  # fmt: skip


def given(cfg, key: str, value):
    out = copy.deepcopy(cfg)
    with open_dict(out):
        OmegaConf.update(out, key, value, force_add=True)
    return out


def target_of(cfg, key: str) -> str | None:
    """The ``_target_`` nearest above ``key``: the class whose argument takes it (its hint is the check's)."""
    parts = key.split(".")
    for end in range(len(parts) - 1, -1, -1):
        if (target := OmegaConf.select(cfg, ".".join([*parts[:end], "_target_"]))) is not None:
            return target
    return None


@functools.cache
def new_flags() -> dict[tuple[str, ...], list[str]]:
    """For each config of CONFIGS, its booleans that no config before it has under the same ``_target_``."""
    seen, out = set(), {}
    for overrides in CONFIGS:
        cfg = composed_once(tuple(overrides))
        keys = [(key, target_of(cfg, key)) for key in boolean_leaves(cfg)]
        out[tuple(overrides)] = [key for key, target in keys if (key, target) not in seen]
        seen |= set(keys)
    return out


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda o: " ".join(o) or "defaults")
def test_every_boolean_of_every_shipped_config_refuses_any_other_word(overrides):
    """Each boolean of each config, under the class that takes it (a key the configs before share is checked there)."""
    cfg = composed(overrides)
    leaves, known = boolean_leaves(cfg), flags(cfg)
    unchecked = set(leaves) - set(known)
    assert len(leaves) >= 10 and not unchecked, f"booleans of conf/ that nothing checks: {sorted(unchecked)}"
    for key in new_flags()[tuple(overrides)]:
        with pytest.raises(ValueError) as e:
            check_config(given(cfg, key, "no"))
        assert str(e.value).startswith(f"{key}='no': must be true or false"), str(e.value)
        try:  # the other boolean passes this check (a rule between keys may still refuse it)
            check_config(given(cfg, key, not OmegaConf.select(cfg, key)))
        except ValueError as other:
            assert "must be true or false" not in str(other), str(other)


def test_the_shipped_flags_are_found_under_the_keys_the_composed_config_has():
    found = shipped_flags()
    for key in ("data.prepare.reverse", "run_test", "compile.enabled", "model.share_embeddings",
                "trainer.enable_progress_bar", "callbacks.checkpoint.save_last"):  # fmt: skip
        assert key in found


def test_annotations_give_the_flags_no_shipped_config_sets_and_their_other_forms():
    cfg = composed([])
    with pytest.raises(ValueError, match=r"^trainer.detect_anomaly='no': must be true or false$"):
        check_config(given(cfg, "trainer.detect_anomaly", "no"))  # Lightning's hint: conf/ does not set it
    check_config(given(cfg, "trainer.deterministic", "warn"))  # bool | Literal["warn"] | None
    with pytest.raises(ValueError, match=r"^trainer.deterministic='yes': must be true or false, or warn \(or null\)$"):
        check_config(given(cfg, "trainer.deterministic", "yes"))
    check_config(given(cfg, "compile.dynamic", None))  # null: compile after one recompilation
    with pytest.raises(ValueError, match=r"^compile.dynamic=1: must be true or false \(or null\)$"):
        check_config(given(cfg, "compile.dynamic", 1))
    check_config(given(cfg, "callbacks.early_stopping", None))  # a section turned off has none of its flags


LIGHTNING_FLAGS = ["callbacks.checkpoint.save_weights_only", "callbacks.checkpoint.verbose",
                   "callbacks.early_stopping.strict", "callbacks.early_stopping.verbose",
                   "callbacks.lr_monitor.log_momentum", "logger.log_graph"]  # fmt: skip


@pytest.mark.parametrize("key", LIGHTNING_FLAGS)
def test_a_boolean_of_lightnings_classes_refuses_a_word(key):
    """The hints of the classes behind ``callbacks.*`` and ``logger`` count, through ``RunCheckpoint(**kwargs)`` to
    Lightning's ``ModelCheckpoint``: ``no`` would be a non-empty string, so true."""
    cfg = composed([])
    with pytest.raises(ValueError, match=rf"^{re.escape(key)}='no': must be true or false"):
        check_config(given(cfg, key, "no"))
    check_config(given(cfg, key, False))


def test_each_value_is_checked_against_its_targets_hint():
    cfg = composed([])
    with pytest.raises(ValueError, match=r"^trainer.fast_dev_run='no': must be true or false, or an integer$"):
        check_config(given(cfg, "trainer.fast_dev_run", "no"))  # int | bool
    check_config(given(cfg, "trainer.fast_dev_run", 2))
    with pytest.raises(ValueError, match=r"^callbacks.checkpoint.every_n_train_steps=\[3\]: must be an integer"):
        check_config(given(cfg, "callbacks.checkpoint.every_n_train_steps", [3]))
    with pytest.raises(ValueError, match=r"^callbacks.early_stopping.min_delta='x': must be a number$"):
        check_config(given(cfg, "callbacks.early_stopping.min_delta", "x"))
    with pytest.raises(ValueError, match=r"^logger.name=\[1\]: must be a string \(or null\)$"):
        check_config(given(cfg, "logger.name", [1]))


def test_a_key_no_target_takes_and_a_target_that_does_not_exist_are_refused():
    from nmt.config_keys import arguments, check_keys

    cfg = composed([])
    with pytest.raises(ValueError, match=r"^callbacks.checkpoint.foo: no such key; callbacks.checkpoint takes the "
                                         r"arguments of nmt.training.callbacks.RunCheckpoint"):  # fmt: skip
        check_keys(given(cfg, "callbacks.checkpoint.foo", 1))  # through **kwargs to ModelCheckpoint's
    taken = set(arguments("nmt.training.callbacks.RunCheckpoint").hints)
    assert {"save_weights_only", "last_every_n_train_steps"} <= taken
    with pytest.raises(ValueError, match=r"^callbacks.lr_monitor._target_='lightning.NoSuch': cannot be imported \("):
        check_keys(given(cfg, "callbacks.lr_monitor._target_", "lightning.NoSuch"))
