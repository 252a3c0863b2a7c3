"""The keys of a composed config: each read by someone (:func:`check_keys`: an argument of its section's
``_target_`` or typed section's type, :data:`TYPED_SECTIONS`, or a key ``conf/`` has), and each value of the type its
argument's hint allows (:func:`check_values`). What a target takes is :mod:`nmt.arguments`'; the values' ranges and
words are :mod:`nmt.settings`'."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from nmt.arguments import arguments, hinted, literal_values
from nmt.commands import named_as_started

CONFIG_DIR = Path(__file__).resolve().parent / "conf"  # the shipped configs (Hydra's config path)


def model_families() -> tuple[str, ...]:
    """The model families shipped, sorted: the names of ``conf/model/*.yaml`` (what ``model=`` takes)."""
    return tuple(sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml")))


# keys that moved: a config or a command written before names the key that replaced them
MOVED = {"compile.pad_multiple": "data.pad_multiple"}
# Hydra's keys of a node it instantiates, not arguments of its target
META = {"_target_", "_partial_", "_convert_", "_recursive_", "_args_"}
COLLECTIONS = {"callbacks"}  # sections whose entries are named by the user: each a node with a _target_
# arguments of a target that train.py gives itself (a key there would be overridden or clash): what sets them
_PART = {"vocab_size": "the data's vocabulary", "emb_size": "model.emb_size", "dropout": "model.dropout",
         "pad_id": "the vocabulary"}  # fmt: skip
SUPPLIED = {
    "data": {"links": "loss.align_weight"},
    "model.encoder": _PART,
    "model.decoder": _PART | {"enc_size": "model.encoder", "readout_size": "model.readout_size"},
    "optim": {"params": "the model's parameters"},
    "schedule.scheduler": {"optimizer": "optim", "budgets": "the run's budgets", "agree": "the run's processes"},
    "trainer": {"callbacks": "the callbacks section", "logger": "the logger section"},
}


def check_keys(cfg: Any, overrides: Sequence[str] = (), groups: Collection[str] = (), reference: Any = None) -> None:
    """A ValueError naming the first key of ``cfg`` that nothing reads, and the keys there are.

    Every key of a node with a ``_target_`` must be an argument of it (a target taking ``**kwargs`` takes any); a key
    that a ``+key=value`` (or ``++``) in ``overrides`` added anywhere else is unknown, since ``conf/`` holds every key
    of the other sections, except a new entry of ``callbacks`` with its ``_target_``. ``groups`` are the config groups
    (``+group=option`` adds no key); ``reference`` gives the config without the ``++`` overrides (those that change an
    existing key add none), called only where there is one.
    """
    from omegaconf import OmegaConf

    tree = OmegaConf.to_container(cfg, resolve=False)
    tree.pop("hydra", None)
    for path, node in config_nodes(tree):
        target = node.get("_target_") if isinstance(node, dict) else None
        if not isinstance(target, str) or "${" in target:
            continue
        try:
            found = arguments(target)
        except ValueError as e:
            if path.startswith("model."):  # a model part: the model's build names the parts there are
                continue
            raise ValueError(f"{join_key(path, '_target_')}={target!r}: cannot be imported ({e})") from None
        if found is None or found.open:
            continue
        params = set(found.hints)
        supplied = SUPPLIED.get(path, {})
        for key in node:
            if key in supplied:
                set_by = named_as_started(f"set by train.py from {supplied[key]}")
                raise ValueError(f"{join_key(path, key)}: {set_by}, not a key of its own")
            if key not in META and key not in params:
                known = sorted(params - supplied.keys())
                raise ValueError(unknown_key(join_key(path, key), known, f"the arguments of {node['_target_']}"))
    for key in added_keys(overrides, groups, reference):
        section, _, name = key.rpartition(".")
        parent = _select(tree, section)
        if isinstance(parent, dict) and isinstance(parent.get("_target_"), str):
            continue  # an argument of its target: checked above
        entry = key if section in COLLECTIONS else section if section.rpartition(".")[0] in COLLECTIONS else None
        if entry is not None:  # callbacks.NAME=3, or callbacks.NAME.key=3 without callbacks.NAME._target_
            raise ValueError(f"{entry}: a new entry of {entry.rpartition('.')[0]} needs its class: add "
                             f"+{entry}._target_=CLASS")  # fmt: skip
        raise ValueError(unknown_key(key, sorted(k for k in (parent or {}) if k != name)))


def unknown_key(key: str, known: Sequence[str], owner: str | None = None) -> str:
    """The one line for a key nothing reads: its name, the nearest known ones, else all of them (where few).
    ``owner``: what takes the section's keys (the arguments of its target), where something does."""
    import difflib

    if key in MOVED:
        return f"{key}: no such key since it moved: it is {MOVED[key]} now ({MOVED[key]}=...)"
    section, _, name = key.rpartition(".")
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if near:
        return f"{key}: no such key; did you mean {' or '.join(join_key(section, k) for k in near)}?"
    where = section or "the top level"
    listed = ", ".join(known) if len(known) <= 20 else ""
    if owner:
        return f"{key}: no such key; {where} takes {owner}" + (f": {listed}" if listed else " (see its documentation)")
    return f"{key}: no such key; {where} has {listed or ', '.join(known[:20]) + ', ...'}"


def added_keys(overrides: Sequence[str], groups: Collection[str], reference: Any = None) -> list[str]:
    """The keys that ``+key=value`` and ``++key=value`` overrides add (not those that choose a config group)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    added, ref = [], None
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        key = o.key_or_group
        if key in groups or "/" in key or o.package is not None or not (o.is_add() or o.is_force_add()):
            continue
        if o.is_force_add():  # ++: adds the key only where there is none
            ref = reference() if ref is None and reference is not None else ref
            if ref is None or OmegaConf.select(ref, key, default=META) is not META:
                continue
        added.append(key)
    return added


def config_nodes(tree: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every dict and list of ``tree`` with its dotted path (a list's items numbered)."""
    yield path, tree
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        if isinstance(value, (dict, list)):
            yield from config_nodes(value, join_key(path, str(key)))


def _select(tree: Any, path: str) -> Any:
    for part in path.split(".") if path else []:
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def tree_value(tree: dict, key: str, default: Any = None) -> Any:
    """The value at the dotted ``key`` of a :func:`config_tree` (unresolved, as written), else ``default``."""
    section, _, name = key.rpartition(".")
    node = _select(tree, section)
    return node.get(name, default) if isinstance(node, dict) else default


def join_key(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# Sections of conf/ that no _target_ builds: the types (or functions) train.py hands their keys to, whose arguments'
# hints and bounds count as a _target_'s do
TYPED_SECTIONS: dict[str, tuple[str, ...]] = {
    "trainer": ("lightning.pytorch.Trainer",),
    "compile": ("nmt.training.compiled.Compilation",),
    "model": ("nmt.models.seq2seq.build_model",),
    "decoding": ("nmt.inference.search.SearchOptions",),
    "data.prepare": ("nmt.data.prepare.Preparation",),
    "data.prepare.spm": ("nmt.data.tokenizer.train_tokenizer", "nmt.data.rules.Rules"),  # sample: the rules'
    "data.prepare.split": ("nmt.data.rules.Rules",),
    "data.sampling": ("nmt.data.tokenizer.SubwordSampler",),
    "data.join": ("nmt.data.joining.Joining",),
    "data.aligner": ("nmt.alignment.eflomal.EflomalSettings",),
}


def config_tree(cfg: Any) -> dict:
    """A composed config as plain containers, its interpolations unresolved and Hydra's own section aside; a tree
    already made so is given back as it is (the checks of one config convert it once)."""
    from omegaconf import OmegaConf

    if isinstance(cfg, dict):
        return cfg
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"}


def targeted_nodes(cfg: Any) -> list[tuple[str, str, dict]]:
    """Each section of ``cfg`` (an OmegaConf config, or its :func:`config_tree`) that something takes, as (path,
    target, node): the typed sections (:data:`TYPED_SECTIONS`) and every node with a ``_target_``."""
    tree = config_tree(cfg)
    nodes = [(s, t, n) for s, ts in TYPED_SECTIONS.items() if isinstance(n := _select(tree, s), dict) for t in ts]
    return nodes + [(p, n["_target_"], n) for p, n in config_nodes(tree) if isinstance(n, dict) and "_target_" in n]


def typed_keys(cfg: Any) -> dict[str, tuple[Any, ...]]:
    """Every key of ``cfg`` that reaches an annotated argument of a ``_target_`` (this package's, Lightning's,
    torch's: any) or of a section in :data:`TYPED_SECTIONS`, with the types of its hint; the keys train.py sets
    itself (:data:`SUPPLIED`) aside."""
    found = {}
    for path, target, node in targeted_nodes(cfg):
        hints = hinted(target, any_package=True)
        found.update({join_key(path, k): hints[k] for k in node if k in hints and k not in SUPPLIED.get(path, {})})
    return found


def flags(cfg: Any) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """The keys of ``cfg`` that take true or false: each a shipped config sets so (:func:`shipped_flags`), and each
    whose argument is annotated ``bool`` (:func:`typed_keys`); whether null is allowed too, and the words allowed
    beside true and false (from the annotation)."""
    found = {key: (null, ()) for key, null in shipped_flags().items()}
    found.update({k: (type(None) in t, literal_values(t)) for k, t in typed_keys(cfg).items() if bool in t})
    return found


def _fits(value: Any, kind: Any) -> bool | None:
    """Whether a config value (as ``OmegaConf.to_container`` gives it) is of ``kind``, one type of a hint's union;
    None for a type that a config value cannot be checked against (a class, a callable)."""
    import collections.abc as abc
    import typing

    origin = typing.get_origin(kind) or kind
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    known: dict[Any, bool] = {type(None): value is None, bool: isinstance(value, bool), str: isinstance(value, str),
                              int: number and isinstance(value, int), float: number}  # fmt: skip
    if origin in known:
        return known[origin]
    if origin is typing.Literal:
        return any(value == w and type(value) is type(w) for w in typing.get_args(kind))
    if origin in (list, tuple, set, frozenset, abc.Sequence, abc.Collection, abc.Iterable, abc.MutableSequence):
        return isinstance(value, list)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        return isinstance(value, dict)
    return None


def _kinds(types_: tuple[Any, ...]) -> str:
    """What a union's ``types_`` allow, as the refusal says it: "true or false, or an integer (or null)"."""
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list",
             tuple: "a list", dict: "a mapping"}  # fmt: skip
    import typing

    said = [names.get(typing.get_origin(t) or t, "") for t in types_]
    said = list(dict.fromkeys(x for x in said if x)) + [str(w) for w in literal_values(types_)]
    if "true or false" in said:
        said.remove("true or false")
        text = "true or false" + "".join(f", or {x}" for x in said)
    else:
        text = " or ".join(said)
    return text + (" (or null)" if type(None) in types_ else "")


def check_values(cfg: Any, own: Collection[str] = ()) -> None:
    """A ValueError naming the first key of ``cfg`` whose value its target's argument cannot take (a word for a
    boolean: a non-empty string would be true; a list for a number), or that a shipped config sets to true or false
    and has anything else; ``own``: keys with a range or words of their own, checked there. Interpolations are their
    sources' values, checked where those are."""
    tree = config_tree(cfg)
    typed = typed_keys(tree)
    checks = {**{k: (bool, type(None)) if null else (bool,) for k, null in shipped_flags().items()}, **typed}
    absent = object()
    for key, types_ in checks.items():
        value = tree_value(tree, key, absent)
        if key in own or value is absent:
            continue  # not in this config, or a section turned off (callbacks.early_stopping=null)
        if isinstance(value, str) and "${" in value:
            continue
        verdicts = [_fits(value, t) for t in types_]
        if True not in verdicts and None not in verdicts:
            raise ValueError(f"{key}={value!r}: must be {_kinds(types_)}")


@cache
def shipped_flags(conf_dir: Path = CONFIG_DIR) -> dict[str, bool]:
    """Every key that a shipped config sets to true or false, as the composed config names it (a group's file
    under its group, or where its ``# @package`` line puts it), and whether a shipped config sets it to null too."""
    from omegaconf import OmegaConf

    flags: dict[str, bool] = {}
    nulls: set[str] = set()
    for path in sorted(conf_dir.rglob("*.yaml")):
        first = path.read_text().split("\n", 1)[0]
        group = path.parent.relative_to(conf_dir).as_posix()
        package = first.split("@package", 1)[1].strip() if "@package" in first else ("" if group == "." else group)
        package = "" if package == "_global_" else package.replace("/", ".")
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        tree = {k: v for k, v in tree.items() if k not in ("defaults", "hydra")} if isinstance(tree, dict) else {}
        for node_path, node in config_nodes(tree, package):
            for key, value in node.items() if isinstance(node, dict) else ():
                if isinstance(value, bool):
                    flags[join_key(node_path, key)] = False
                elif value is None:
                    nulls.add(join_key(node_path, key))
    return {key: key in nulls for key in flags}


def missing_keys(cfg: Any) -> list[str]:
    """The keys of a composed config (or its :func:`config_tree`) left without a value (``???``), sorted; Hydra's own
    section aside."""
    tree = config_tree(cfg)
    return sorted(join_key(path, key) for path, node in config_nodes(tree) if isinstance(node, dict)
                  for key, value in node.items() if value == "???")  # fmt: skip


def missing_advice(key: str) -> str:
    """What gives ``key`` a value: for a part of a config group (``data.source``), the group's configs that set it."""
    from omegaconf import OmegaConf

    group, rest = key.split(".", 1) if "." in key else (key, "")
    setting = []
    for option in sorted((CONFIG_DIR / group).glob("*.yaml")) if rest else []:
        *parents, last = rest.split(".")
        node = OmegaConf.load(option)
        parent = OmegaConf.select(node, ".".join(parents), default=None) if parents else node
        if OmegaConf.is_dict(parent) and last in parent and not OmegaConf.is_missing(parent, last):
            setting.append(f"{group}={option.stem}")
    if not setting:
        return f"; set {key}=..."
    return f" (the {group} config chosen leaves it to another); choose {' or '.join(setting)}"
