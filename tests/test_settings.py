"""Every numeric value a user can set in conf/ has a range, and a value outside it is one clear error."""

import copy
import functools
import math

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from conftest import FAMILIES, ROOT, chosen_family
from nmt.bounds import Range
from nmt.settings import CHOICES, RANGES, allowed, check_config

CONFIGS = [
    [],
    *([f"model={name}"] for name in FAMILIES if name != chosen_family(())),  # every family beside the default
    ["data=tsv", "data.source.path=x.tsv"],
    ["data=tatoeba"],
    ["experiment=tatoeba_bahdanau"],
    ["experiment=tatoeba_luong"],
    ["experiment=tatoeba_transformer"],
    ["experiment=converged_bahdanau"],
    ["experiment=converged_luong_sampling"],
    ["experiment=converged_fast"],
    ["optim=adamw", "schedule=plateau"],
    ["trainer=gpu"],
    ["trainer=ddp"],
    ["averaging=ema"],
    ["schedule=budgeted"],
]


GROUPS = {p.relative_to(ROOT / "conf").as_posix() for p in (ROOT / "conf").rglob("*") if p.is_dir()}  # model, ...


@functools.cache
def composed_once(overrides: tuple[str, ...]) -> DictConfig:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def composed(overrides) -> DictConfig:
    """The configuration train.py composes from ``overrides`` (a copy: tests change it). The choices of config groups
    are composed by Hydra (once for each set); the plain ``key=value`` overrides that follow them are parsed by Hydra's
    parser and set as Hydra sets them (``OmegaConf.update(..., merge=True)``), without composing again."""
    overrides = list(overrides)
    parsed = OverridesParser.create().parse_overrides(overrides)
    plain = [o.key_or_group not in GROUPS and not o.key_or_group.startswith("hydra") and o.package is None
             and not (o.is_add() or o.is_delete() or o.is_force_add() or o.is_sweep_override())
             for o in parsed]  # fmt: skip
    first = next((i for i in range(len(parsed)) if all(plain[i:])), len(parsed))
    cfg = copy.deepcopy(composed_once(tuple(overrides[:first])))
    for override in parsed[first:]:
        try:
            OmegaConf.update(cfg, override.key_or_group, override.value(), merge=True)
        except (ConfigAttributeError, ConfigKeyError) as e:  # Hydra's words for a key the config lacks
            raise ConfigCompositionException(
                f"Could not override '{override.key_or_group}'.\nTo append to your config use +{override.input_line}"
            ) from e
    return cfg


def numeric_leaves(node, prefix=""):
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from numeric_leaves(value, name + ".")
        elif isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            yield name
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            yield name


def outside(allowed: Range):
    """Values the range must refuse."""
    bad = ["ten", True, math.inf, -math.inf, math.nan]  # no key takes an infinite or undefined value
    if allowed.lo > -math.inf:
        bad.append(allowed.lo - 1)
        if allowed.lo_open:
            bad.append(allowed.lo)
    if allowed.hi < math.inf:
        bad.append(allowed.hi + 1)
        if allowed.hi_open:
            bad.append(allowed.hi)
    if allowed.integer:
        bad.append(max(allowed.lo, 0) + 1.5)
    if not allowed.null:
        bad.append(None)
    return bad


def test_every_numeric_key_in_conf_has_a_range():
    for overrides in CONFIGS:
        cfg = OmegaConf.to_container(composed(overrides), resolve=False)
        cfg.pop("hydra", None)
        ranged = {k for k, b in allowed(composed(overrides)).items() if isinstance(b, Range)}
        unranged = [k for k in numeric_leaves(cfg) if k not in ranged]
        assert not unranged, (overrides, unranged)
        check_config(composed(overrides))  # the shipped values are all in range


@functools.cache
def ranged_keys() -> dict[str, tuple[str, Range, tuple[str, ...]]]:
    """Each key with a range (RANGES', or its argument's ``Annotated`` one), once for each range it has (a key two
    model parts take may have two), with the first config that sets it."""
    found = {}
    for overrides in CONFIGS:
        cfg = composed_once(tuple(overrides))
        for key, bound in allowed(cfg).items():
            if isinstance(bound, Range) and OmegaConf.select(cfg, key, default="__none__") != "__none__":
                found.setdefault(f"{key} {bound}", (key, bound, tuple(overrides)))
    return found


@pytest.mark.parametrize("overrides", CONFIGS, ids=lambda o: " ".join(o) or "defaults")
def test_a_value_outside_the_range_names_key_value_and_range(overrides):
    """Each ranged key, under the first config that sets it (its range there), refuses every value outside it."""
    cases = [(key, bound) for key, bound, first in ranged_keys().values() if first == tuple(overrides)]
    wrong = []
    for key, bound in cases:
        cfg = composed(overrides)
        for value in outside(bound):
            if key == "trainer.devices" and isinstance(value, str):
                continue  # Lightning's "auto" and "0,1" forms are strings
            with open_dict(cfg):
                OmegaConf.update(cfg, key, [0.9, value] if key == "optim.betas" else value, force_add=True)
            try:
                check_config(cfg)
                wrong.append(f"{key}={value!r}: taken")
            except ValueError as e:
                if not (str(e).startswith(f"{key}=") and f"must be {bound}" in str(e)):
                    wrong.append(f"{key}={value!r}: {e}")
    assert not wrong, wrong
    assert cases or overrides, "the defaults set ranged keys"


def test_cross_key_rules():
    cfg = composed(["decoding.beam_size=2", "decoding.nbest=3"])
    with pytest.raises(ValueError, match=r"decoding.nbest=3: must be at most decoding.beam_size \(2\)"):
        check_config(cfg)
    with pytest.raises(ValueError, match="data.prepare.split.valid \\+ data.prepare.split.test = 1: must be below 1"):
        check_config(composed(["data=tatoeba", "data.prepare.split.valid=0.5", "data.prepare.split.test=0.5"]))
    with pytest.raises(ValueError, match="^model.share_embeddings=true: needs one vocabulary for both languages: add "
                                         "data.prepare.spm.joint=true$"):  # fmt: skip
        check_config(composed(["model=transformer", "model.share_embeddings=true"]))
    check_config(composed(["model=transformer", "model.share_embeddings=true", "data.prepare.spm.joint=true"]))
    with pytest.raises(ValueError, match=r"^data.source: has no value \(the data config chosen leaves it to another\); "
                                         r"choose data=tatoeba or data=toy or data=tsv$"):  # fmt: skip
        check_config(composed(["data=base"]))  # offered by --help, not a corpus
    every = "callbacks.checkpoint.last_every_n_train_steps=3"
    with pytest.raises(ValueError, match=r"^callbacks.checkpoint.last_every_n_train_steps=3: saves last.ckpt, which "
                                         r"callbacks.checkpoint.save_last=false turns off"):  # fmt: skip
        check_config(composed([every, "callbacks.checkpoint.save_last=false"]))
    check_config(composed([every]))


@pytest.mark.slow
def test_train_py_reports_a_bad_value_in_one_line(data_cache, tmp_path):
    from conftest import run_train

    for override, message in (
        ("model.dropout=1.5", "model.dropout=1.5: must be a number in [0, 1)"),
        ("data.max_tokens=0", "data.max_tokens=0: must be an integer in [1, 1,048,576]"),
        ("optim.lr=-1", "optim.lr=-1: must be a number > 0"),
    ):
        proc = run_train(tmp_path / override.split("=")[0], data_cache, override, check=False)
        assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1] == f"error: {message}", proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr


# written out here, not read from nmt.settings.RANGES: the table the checks must agree with
REFUSED = [
    ("model.dropout=1.0", "model.dropout=1.0: must be a number in [0, 1)"),
    ("model.emb_size=0", "model.emb_size=0: must be an integer in [1, 65,536]"),
    ("model.decoder.hidden_size=2.5", "model.decoder.hidden_size=2.5: must be an integer in [1, 65,536]"),
    ("optim.lr=0", "optim.lr=0: must be a number > 0"),
    ("optim.betas=[0.9,1.0]", "optim.betas=[0.9, 1.0]: must be a list of numbers in [0, 1)"),
    # #82: a list where a number goes, a number where a list goes, a word of a list alone
    ("model.emb_size=[32]", "model.emb_size=[32]: must be an integer in [1, 65,536]"),
    ("model.dropout=[0.1]", "model.dropout=[0.1]: must be a number in [0, 1)"),
    ("optim.betas=0.9", "optim.betas=0.9: must be a list of numbers in [0, 1)"),
    ("trainer.precision=[32-true]",
     "trainer.precision=['32-true']: must be one of auto, 32-true, bf16-mixed, 16-mixed"),  # fmt: skip
    ("kernels.attention=math", "kernels.attention='math': must be a list of flash, efficient, cudnn, math"),
    # the -true halves and doubles cannot train this project's batches: refused, not failed after preparation
    ("trainer.precision=bf16-true",
     "trainer.precision='bf16-true': must be one of auto, 32-true, bf16-mixed, 16-mixed"),  # fmt: skip
    ("trainer.precision=64-true", "trainer.precision='64-true': must be one of auto, 32-true, bf16-mixed, 16-mixed"),
    # a lower-is-better metric watched as if higher were better: the worst checkpoint kept as the best
    ("callbacks.checkpoint.monitor=val/aer", "callbacks.checkpoint.mode=max: takes the highest val/aer as the best, "
     "and a lower val/aer is better: add callbacks.checkpoint.mode=min"),  # fmt: skip
    ("callbacks.early_stopping.monitor=val/loss", "callbacks.early_stopping.mode=max: takes the highest val/loss as "
     "the best, and a lower val/loss is better: add callbacks.early_stopping.mode=min"),  # fmt: skip
    # Lightning's Timer forms only: DD:HH:MM:SS or a mapping of units
    ("trainer.max_time=garbage", "trainer.max_time='garbage': must be DD:HH:MM:SS (e.g. 00:00:15:00), or a mapping "
     "of days, hours, minutes, seconds (e.g. {minutes: 15})"),  # fmt: skip
    ("trainer.max_time=00:15", "trainer.max_time='00:15': must be DD:HH:MM:SS (e.g. 00:00:15:00), or a mapping "
     "of days, hours, minutes, seconds (e.g. {minutes: 15})"),  # fmt: skip
    ("trainer.max_time=00:00:00:00", "trainer.max_time='00:00:00:00': must be more than no time"),
    ("schedule.scheduler.warmup_steps=-1",
     "schedule.scheduler.warmup_steps=-1: must be an integer in [0, 2,147,483,647]"),  # fmt: skip
    ("loss.label_smoothing=1", "loss.label_smoothing=1: must be a number in [0, 1)"),
    ("decoding.beam_size=0", "decoding.beam_size=0: must be an integer in [1, 128]"),
    ("decoding.max_len_a=-0.5", "decoding.max_len_a=-0.5: must be a number in [0, 10]"),
    ("data.max_tokens=0", "data.max_tokens=0: must be an integer in [1, 1,048,576]"),
    ("data.prepare.spm.vocab_size=7", "data.prepare.spm.vocab_size=7: must be an integer in [8, 1,048,576]"),
    ("data.prepare.split.valid=1", "data.prepare.split.valid=1: must be a number in [0, 1)"),
    ("data.prepare.num_proc=0", "data.prepare.num_proc=0: must be an integer in [1, 4,096] (or null)"),
    ("data.prepare.max_ratio=0.5", "data.prepare.max_ratio=0.5: must be a number >= 1"),
    ("data.source.max_words=2", "data.source.max_words=2: must be an integer in [3, 1,000]"),
    ("data.sampling.alpha=1.5", "data.sampling.alpha=1.5: must be a number in [0, 1]"),
    ("trainer.max_epochs=-2", "trainer.max_epochs=-2: must be an integer in [-1, 2,147,483,647] (or null)"),
    ("trainer.val_check_interval=0", "trainer.val_check_interval=0: must be a number in (0, 2,147,483,647]"),
    ("callbacks.ema.decay=1", "callbacks.ema.decay=1: must be a number in (0, 1)"),
    ("average_best=-1", "average_best=-1: must be an integer in [0, 2,147,483,647]"),
    ("seed=1.5", "seed=1.5: must be an integer in [0, 4,294,967,295]"),
    ("onednn_cache=-1", "onednn_cache=-1: must be an integer in [0, 2,147,483,647] (or null)"),
    # upper bounds (#59): the budgets, beam and sizes that overflowed or tried to allocate terabytes
    ("decoding.max_len_a=11", "decoding.max_len_a=11: must be a number in [0, 10]"),
    ("decoding.max_len_b=1025", "decoding.max_len_b=1025: must be an integer in [0, 1,024]"),
    ("decoding.beam_size=129", "decoding.beam_size=129: must be an integer in [1, 128]"),
    ("model.decoder.hidden_size=100000", "model.decoder.hidden_size=100000: must be an integer in [1, 65,536]"),
    # keys of one model only: composed with it (the Luong decoder's heads, the Transformer's positions)
    ("model.decoder.heads=0", "model.decoder.heads=0: must be an integer in [1, 1,024]"),
    ("model.encoder.max_positions=0", "model.encoder.max_positions=0: must be an integer in [1, 65,536]"),
    ("data.max_tokens=2000000", "data.max_tokens=2000000: must be an integer in [1, 1,048,576]"),
    ("data.pad_multiple=0", "data.pad_multiple=0: must be an integer in [1, 64]"),
    ("data.pad_multiple=65", "data.pad_multiple=65: must be an integer in [1, 64]"),
    ("trainer.devices=2000", "trainer.devices=2000: must be an integer in [1, 1,024]"),
    ("trainer.max_steps=1e30", "trainer.max_steps=1e+30: must be an integer in [-1, 2,147,483,647]"),
    # inf and nan: no key takes them
    ("decoding.max_len_a=inf", "decoding.max_len_a=inf: must be a number in [0, 10]"),
    ("optim.lr=inf", "optim.lr=inf: must be a number > 0"),
    ("optim.lr=nan", "optim.lr=nan: must be a number > 0"),
    ("loss.align_weight=inf", "loss.align_weight=inf: must be a number >= 0"),
    ("trainer.gradient_clip_val=inf", "trainer.gradient_clip_val=inf: must be a number > 0 (or null)"),
    ("data.prepare.max_ratio=inf", "data.prepare.max_ratio=inf: must be a number >= 1"),
]


@functools.cache
def having(key: str) -> tuple[str, ...]:
    """The group choice (``averaging=ema``, ``model=transformer``) under which the composed config has ``key``: none
    where the defaults have it; the first option of a group that sets it otherwise."""
    from omegaconf import OmegaConf

    absent = object()
    if OmegaConf.select(composed([]), key, default=absent) is not absent:
        return ()
    for group in sorted(p for p in (ROOT / "conf").iterdir() if p.is_dir() and p.name != "experiment"):
        for option in sorted(group.glob("*.yaml")):
            if OmegaConf.select(composed([f"{group.name}={option.stem}"]), key, default=absent) is not absent:
                return (f"{group.name}={option.stem}",)
    raise AssertionError(f"{key}: no config of conf/ has it")


@pytest.mark.parametrize("override, message", REFUSED)
def test_a_fixed_table_of_refused_values(override, message):
    """Each key under the config that has it: a key of one model or one averaging only is in the table too."""
    with pytest.raises(ValueError) as e:
        check_config(composed([*having(override.split("=", 1)[0]), override]))
    assert str(e.value) == message


def test_data_join_max_pairs_has_one_bound_in_the_config_check_and_in_joining():
    """#81: the bound written once (on Joining's field): the config check and Joining refuse the same values, in the
    same words."""
    from nmt.data.joining import MAX_PAIRS, Joining

    for value in (0, MAX_PAIRS + 1):
        said = rf"^data.join.max_pairs={value}: must be an integer in \[1, {MAX_PAIRS:,}\]$"
        with pytest.raises(ValueError, match=said):
            check_config(composed([f"data.join.max_pairs={value}"]))
        with pytest.raises(ValueError, match=said):
            Joining(max_pairs=value)
    for value in (1, MAX_PAIRS):
        check_config(composed([f"data.join.max_pairs={value}"]))
        assert Joining(max_pairs=value).max_pairs == value


def declared_in(target: str, name: str) -> str:
    """The module of the function that declares the argument ``name`` of ``target``, following ``**kwargs`` up a
    class's bases (RunCheckpoint's save_top_k is Lightning's ModelCheckpoint's); "" where none does."""
    import inspect

    from hydra.utils import get_object

    obj = get_object(target)
    chain = [k.__init__ for k in obj.__mro__ if "__init__" in vars(k) and k is not object] if isinstance(obj, type) \
        else [obj]  # fmt: skip
    for function in chain:
        if name in inspect.signature(function).parameters:
            return function.__module__
    return ""


def own_bounds(ranges: dict) -> list[str]:
    """The keys of ``ranges`` (RANGES', CHOICES') that belong on an argument of the project's code (``Annotated[int,
    SIZE]``, ``Literal[...]``), not in a table: an argument the project declares, or a key under a section the
    project's code takes."""
    from nmt.config_keys import targeted_nodes

    wrong = set()
    for overrides in CONFIGS:
        cfg = composed(overrides)
        takers: dict[str, list[str]] = {}
        for path, target, _ in targeted_nodes(cfg):
            takers.setdefault(path, []).append(target)
        for key in ranges:
            section, _, name = key.rpartition(".")
            if OmegaConf.select(cfg, section or "seed", default=None) is None:
                continue  # not in this config
            if any(declared_in(t, name).startswith("nmt.") for t in takers.get(section, [])):
                wrong.add(key)
            parts = section.split(".") if section else []
            if any(t.startswith("nmt.") for i in range(len(parts)) for t in takers.get(".".join(parts[:i]), [])):
                if not takers.get(section):
                    wrong.add(key)  # read from a dict under one of the project's sections: its type should say
    return sorted(wrong)


def test_ranges_holds_only_what_the_project_s_arguments_cannot():
    """#81: a range (or a set of words) is written once: on the argument of the project's code that takes the key;
    RANGES and CHOICES only for other libraries' arguments (torch's, Lightning's) and the sections read by hand (loss,
    schedule, kernels, the top level). Each RANGES key is set by a shipped config, and no two ranges name one key."""
    assert own_bounds(RANGES | CHOICES) == []
    assert own_bounds({"model.emb_size": RANGES["seed"], "callbacks.heatmaps.num_sentences": RANGES["seed"],
                       "data.prepare.spm.sample": RANGES["seed"]}) == [  # fmt: skip
        "callbacks.heatmaps.num_sentences", "data.prepare.spm.sample", "model.emb_size"]  # planted: each found
    set_keys = {key for key, *_ in ranged_keys().values()}
    assert not RANGES.keys() - set_keys, sorted(RANGES.keys() - set_keys)
    from nmt.arguments import value_bounds
    from nmt.config_keys import targeted_nodes

    for overrides in CONFIGS:
        nodes = targeted_nodes(composed(overrides))
        annotated = {f"{path}.{k}" for path, target, node in nodes for k in value_bounds(target) if k in node}
        assert not annotated & RANGES.keys(), (overrides, sorted(annotated & RANGES.keys()))


def test_a_value_set_after_composing_is_the_value_hydra_composes():
    """:func:`composed` sets plain overrides on the composed groups as Hydra would: the same config, for values of
    every kind (numbers in every spelling, lists, strings, null, interpolations, nested keys)."""
    overrides = ["model=transformer", "trainer.max_steps=1e30", "optim.lr=inf", "trainer.precision=['32-true']",
                 "kernels.attention=math", "trainer.gradient_clip_val=null", "decoding.beam_size=${decoding.nbest}",
                 "data.prepare.split.valid=0.5", "model.encoder.max_positions=0"]  # fmt: skip
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        hydra_s = compose(config_name="config", overrides=overrides)
    ours = composed(overrides)
    assert OmegaConf.to_container(ours) == OmegaConf.to_container(hydra_s)
    assert OmegaConf.to_yaml(ours) == OmegaConf.to_yaml(hydra_s)
    for missing in ("model.no_such=1", "trainer.max_step=3"):  # a key the config lacks: Hydra's refusal
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            with pytest.raises(ConfigCompositionException) as theirs:
                compose(config_name="config", overrides=["model=luong", missing])
        with pytest.raises(ConfigCompositionException) as e:
            composed(["model=luong", missing])
        assert str(e.value) == str(theirs.value)
