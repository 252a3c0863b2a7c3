"""What a ``_target_`` takes: its keyword arguments (following ``**kwargs`` up a class's bases), the types of their
hints, the words of its ``Literal``-annotated ones and the bounds of its ``Annotated[int, SIZE]`` ones: what the key,
word and value checks of a config read (:mod:`nmt.config_keys`, :mod:`nmt.settings`)."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, NamedTuple

from nmt.bounds import UNIONS, Choice, Range, bound_of
from nmt.errors import one_line


class Arguments(NamedTuple):
    """The keyword arguments a ``_target_`` takes, each with the types of its hint's union (``()`` where it has no
    hint, ``(bool, NoneType)`` for ``bool | None``), and whether it takes any other key too (``**kwargs`` that go
    nowhere this can follow)."""

    hints: dict[str, tuple[Any, ...]]
    open: bool
    bounds: dict[str, Range | Choice]  # the bounds of its ``Annotated[int, SIZE]`` arguments


@cache  # read for each node by the key, word and value checks alike: once per target
def arguments(target: str | Any) -> Arguments | None:
    """What ``target`` (a dotted name, or the class or function itself) takes, following ``**kwargs`` up a class's
    bases to the ``__init__`` it forwards them to (:class:`~nmt.training.callbacks.RunCheckpoint` to Lightning's
    ``ModelCheckpoint``); None where it has no signature to read (a C type). A name that does not import is a
    ValueError saying why."""
    import inspect
    import typing

    obj = target
    if isinstance(target, str):
        from hydra.utils import get_object

        try:
            obj = get_object(target)
        except Exception as e:  # noqa: BLE001 - whatever the import raised, in one line
            raise ValueError(f"{type(e).__name__}: {one_line(str(e))[:160]}") from None
    chain = [k.__init__ for k in obj.__mro__ if "__init__" in vars(k) and k is not object] if isinstance(obj, type) \
        else [obj]  # fmt: skip
    union, hints, bounds = UNIONS, {}, {}
    for function in chain:
        try:
            params = inspect.signature(function).parameters.values()
        except (TypeError, ValueError):  # no signature (a C type)
            return None
        try:
            found = typing.get_type_hints(function, include_extras=True)
        except Exception:  # noqa: BLE001 - hints that do not resolve: the names alone
            found = {}
        for p in params:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self" and p.name not in hints:
                h = found.get(p.name)
                kinds = () if h is None else typing.get_args(h) if typing.get_origin(h) in union else (h,)
                hints[p.name] = tuple(typing.get_args(k)[0] if typing.get_origin(k) is Annotated else k for k in kinds)
                if bound := bound_of(h):
                    bounds[p.name] = bound
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return Arguments(hints, False, bounds)
    return Arguments(hints, True, bounds)  # **kwargs to no base that names them


def hinted(target: Any, any_package: bool = False) -> dict[str, tuple[Any, ...]]:
    """The annotated arguments of ``target`` (a dotted name of this package, or of any with ``any_package``)."""
    if not (isinstance(target, str) and (any_package or target.startswith("nmt."))):
        return {}
    try:
        found = arguments(target)
    except ValueError:  # reported by check_keys
        return {}
    return {k: v for k, v in found.hints.items() if v} if found is not None else {}


def literal_words(target: Any) -> dict[str, tuple[tuple[str, ...], bool]]:
    """The arguments of ``target`` (a dotted name of this package: other libraries' hints need not be whole) annotated
    ``Literal[...]`` of words, or ``Literal[...] | None``: their words and whether None is allowed; none where it
    cannot be looked at."""
    import typing

    out = {}
    for name, args in hinted(target).items():
        words = [a for a in args if a is not type(None)]
        if len(words) == 1 and typing.get_origin(words[0]) is typing.Literal:
            if all(isinstance(w, str) for w in typing.get_args(words[0])):
                out[name] = (typing.get_args(words[0]), len(args) > 1)
    return out


def value_bounds(target: Any) -> dict[str, Range | Choice]:
    """The range (or words) each argument of ``target`` (a dotted name, or the class or function) is annotated with,
    ``Annotated[int, SIZE]``: the one record of a setting's bounds where the project's code takes it; none where it
    cannot be looked at."""
    if not (isinstance(target, str) or callable(target)):
        return {}
    try:
        found = arguments(target)
    except ValueError:  # reported by check_keys
        return {}
    return dict(found.bounds) if found is not None else {}


def target_parameters(target: Any) -> set[str] | None:
    """The keyword arguments ``target`` (a dotted name) takes; None where it takes any or cannot be looked at."""
    if not isinstance(target, str):
        return None
    try:
        found = arguments(target)
    except ValueError:
        return None
    return None if found is None or found.open else set(found.hints)


def literal_values(types_: tuple[Any, ...]) -> tuple[Any, ...]:
    """The values of the ``Literal``s among a union's ``types_``."""
    import typing

    return tuple(w for t in types_ if typing.get_origin(t) is typing.Literal for w in typing.get_args(t))


def located(target: Any) -> Any:
    """What a dotted ``_target_`` names, or None where it cannot be imported (its instantiation says why)."""
    import importlib

    if not isinstance(target, str) or "." not in target:
        return None
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except Exception:  # noqa: BLE001 - any import failure: named where the target is built
        return None
