"""Every setting of conf/ that takes one of several words is refused before any data is prepared, in one line naming
the key, the bad word and the words it may be (the ``Literal`` or ``Annotated[str, Choice(...)]`` hint of the argument
that takes it; nmt.settings.CHOICES for the keys no argument of the project's takes)."""

from __future__ import annotations

import functools

import pytest
from omegaconf import OmegaConf, open_dict
from test_settings import CONFIGS, composed, composed_once

from conftest import run_train
from nmt.bounds import Choice
from nmt.settings import CHOICES, allowed, check_config

# the string settings that take no word from a list: paths, names, patterns, durations, Hydra's own keys
FREE = {
    "ckpt_path", "paths.data_cache", "paths.runs", "paths.tatoeba_splits", "model.name", "data._convert_", "data.seed",
    "data.cache_dir", "trainer.max_time", "callbacks.heatmaps.html", "logger.name", "logger.save_dir", "logger.version",
    *(f"data.source.{k}" for k in ("path", "url", "sha1", "splits", "src", "tgt", "valid", "test", "valid_src",
                                   "valid_tgt", "test_src", "test_tgt")),
    *(f"callbacks.{k}" for k in ("checkpoint.dirpath", "checkpoint.filename", "interrupted.dirpath",
                                 "snapshots.dirpath", "snapshots.filename")),
}  # fmt: skip
BOGUS = "bogus"


def word_leaves(node: dict, prefix: str = ""):
    """The keys of ``node`` whose value is a string or a list of strings (not a class to instantiate)."""
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from word_leaves(value, name + ".")
        elif (isinstance(value, str) and key != "_target_") or (
            isinstance(value, list) and value and all(isinstance(v, str) for v in value)
        ):
            yield name


def with_value(key: str, value):
    """The first config of CONFIGS that has ``key``, with ``value`` there."""
    cfg = composed(first_config(key))
    with open_dict(cfg):
        OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


def test_every_word_valued_key_of_conf_has_its_words():
    """A string setting of any shipped config has its words (in CHOICES, or in the ``Literal`` hint of the argument
    of its ``_target_`` that takes it) or, taking free text, is in FREE; and every key of CHOICES is a setting of
    some config (no stale entry)."""
    seen = set()
    for overrides in CONFIGS:
        cfg = composed(overrides)
        tree = OmegaConf.to_container(cfg, resolve=False)
        tree.pop("hydra", None)
        keys = set(word_leaves(tree))
        seen |= keys
        worded = {k for k, b in allowed(cfg).items() if isinstance(b, Choice)}
        assert not keys - worded - FREE, (overrides, sorted(keys - worded - FREE))
    nullable = {k for k, c in CHOICES.items() if c.null}  # null in conf/: no string there to see
    assert not CHOICES.keys() - seen - nullable, sorted(CHOICES.keys() - seen - nullable)


@functools.cache
def literal_keys() -> list[tuple[str, tuple[str, ...]]]:
    """Each key whose words come from its target's ``Literal`` hint, in the first config that has it."""
    from nmt.arguments import literal_words
    from nmt.config_keys import join_key, targeted_nodes

    found: dict[str, tuple[str, ...]] = {}
    for overrides in CONFIGS:
        for path, target, node in targeted_nodes(composed_once(tuple(overrides))):
            for key, (words, _) in literal_words(target).items():
                if key in node:
                    found.setdefault(join_key(path, key), words)
    return sorted(found.items())


@functools.cache
def worded_keys() -> dict[str, Choice]:
    """Each key with words of its own (CHOICES', or an ``Annotated[str, Choice(...)]`` argument's), as the first
    config that has it checks it; the ``Literal`` hints' are :func:`literal_keys`'."""
    found: dict[str, Choice] = dict(CHOICES)
    literal = dict(literal_keys())
    for overrides in CONFIGS:
        for key, choice in allowed(composed_once(tuple(overrides))).items():
            if isinstance(choice, Choice) and key not in literal:
                found.setdefault(key, choice)
    return found


def first_config(key: str) -> tuple[str, ...]:
    """The overrides of the first config of CONFIGS that has ``key`` (the one :func:`with_value` sets it in)."""
    return next(tuple(o) for o in CONFIGS if OmegaConf.select(composed_once(tuple(o)), key, default=BOGUS) != BOGUS)


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda o: " ".join(o) or "defaults")
def test_a_bad_word_names_the_key_the_word_and_the_allowed_words(overrides):
    """Each key with words of its own, under the first config that has it: a bad word is refused in one line naming
    the key, the word and every allowed word; each allowed word is taken."""
    for key, choice in sorted(worded_keys().items()):
        if first_config(key) != tuple(overrides):
            continue
        listed = key == "kernels.attention"  # a list of words
        cfg = with_value(key, [BOGUS] if listed else BOGUS)
        with pytest.raises(ValueError) as e:
            check_config(cfg)
        message = str(e.value)
        assert message.startswith(key) and BOGUS in message and "\n" not in message, message
        assert all(word in message for word in choice.words), message
        for word in choice.words:  # each allowed word is allowed (with math beside it: this CPU runs nothing else)
            try:
                check_config(with_value(key, [word, *{"math"} - {word}] if listed else word))
            except ValueError as rule:  # a watched metric and its direction must agree: the word itself is allowed
                assert "as the best, and a" in str(rule), str(rule)


def test_a_bad_word_of_a_literal_hint_is_refused_with_the_hint_s_words():
    """The Transformer's norm and positions (and any argument of a model part annotated ``Literal[...]``): a bad word
    is refused before anything is built, naming the words of the hint; each of them is taken."""
    keys = literal_keys()
    assert {"model.encoder.norm", "model.decoder.positions"} <= {k for k, _ in keys}, keys
    for key, words in keys:
        with pytest.raises(ValueError) as e:
            check_config(with_value(key, BOGUS))
        message = str(e.value)
        assert message.startswith(f"{key}={BOGUS!r}: must be one of") and all(w in message for w in words), message
        for word in words:
            check_config(with_value(key, word))


def test_data_align_takes_a_file_of_links_too(tmp_path):
    links = tmp_path / "train.links"
    links.write_text("0-0\n")
    check_config(with_value("data.align", str(links)))
    check_config(with_value("data.align", None))
    with pytest.raises(ValueError, match=r"^data.align='.*missing.links' \(no such file\): must be eflomal, or a"):
        check_config(with_value("data.align", str(tmp_path / "missing.links")))


def test_the_allowed_words_are_those_the_code_takes():
    """The table reads the code's own tuples: a word the table allows, the code builds."""
    from nmt.alignment.symmetrisation import COMBINATIONS
    from nmt.alignment.tokenisation import LINES
    from nmt.arguments import value_bounds
    from nmt.hardware import ATTENTION_BACKENDS
    from nmt.models.transformer import NORMS, POSITION_KINDS

    aligner = value_bounds("nmt.alignment.eflomal.EflomalSettings")
    assert aligner["symmetrisation"].words == COMBINATIONS and aligner["lines"].words == LINES
    assert CHOICES["kernels.attention"].words == tuple(ATTENTION_BACKENDS)
    hinted = dict(literal_keys())  # the Transformer's, from the hints of its parts' arguments
    assert hinted["model.encoder.norm"] == hinted["model.decoder.norm"] == NORMS
    assert hinted["model.encoder.positions"] == hinted["model.decoder.positions"] == POSITION_KINDS


@pytest.mark.slow
@pytest.mark.parametrize(
    "override, line",
    [
        ("model.encoder.norm=bogus", "error: model.encoder.norm='bogus': must be one of pre, post"),
        ("data.aligner.symmetrisation=bogus", "error: data.aligner.symmetrisation='bogus': must be one of forward, "
                                              "reverse, intersection, union, grow-diag-final-and"),
        ("data.prepare.reverse=no", "error: data.prepare.reverse='no': must be true or false"),
        ("compile.enabled=yes", "error: compile.enabled='yes': must be true or false"),
        ("ckpt_path=missing.ckpt", "error: missing.ckpt: checkpoint not found"),  # before preparation too
    ],
)  # fmt: skip
def test_train_py_refuses_a_bad_setting_before_preparing_and_leaves_no_run_directory(tmp_path, override, line):
    run, cache = tmp_path / "run", tmp_path / "cache"
    extra = ["model=transformer"] if override.startswith("model.encoder.norm") else []
    proc = run_train(run, cache, *extra, override, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(line), proc.stderr[-2000:]
    assert not cache.exists()  # nothing generated, prepared or cached
    assert not run.exists()  # no run directory left behind
