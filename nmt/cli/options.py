"""The command-line options that ``translate.py`` and ``serve.py`` share: the model, the search, the batching and
the attention that word links read, each with its default written once (in ``SearchOptions`` and ``Batching``) and
its range checked before anything is loaded."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from nmt.alignment.choice import READOUTS, AttentionChoice
from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.arguments import value_bounds
from nmt.bounds import POSITIVE, Range
from nmt.commands import named_as_started, rendered
from nmt.hardware import ATTENTION_BACKENDS, FLOAT32_MATMUL, Kernels
from nmt.inference.aligner import Aligner
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching

if TYPE_CHECKING:
    from nmt.inference.loading import TranslationModel

# the most pieces a line is read in (--max-src-len) and the longest output search is asked for (its budget): memory
# grows with both, and a Transformer's tables hold no more than export.py's --max-positions allows (MAX_LENGTH + 1)
MAX_LENGTH = 4096


def cores() -> int:
    """The CPU cores this process may run on (``--threads`` asks at most that many)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# every numeric option and its range (the search options share theirs with conf/'s decoding; the output budget they
# give is bounded too: check_budget)
SEARCH = value_bounds(SearchOptions)  # the search options' bounds, where SearchOptions has them
ARG_RANGES = {
    **{dest: SEARCH[field] for dest, field in (("beam_size", "beam_size"), ("length_penalty", "alpha"),
                                               ("max_len_a", "max_len_a"), ("max_len_b", "max_len_b"),
                                               ("nbest", "nbest"))},  # fmt: skip
    "batch_size": POSITIVE,
    "max_src_len": Range(1, MAX_LENGTH, integer=True),
    "threads": Range(0, cores(), integer=True),
}


_UNSET = object()


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed as ``p`` says, with ``given``: the options the command line names, whatever their values (a
    default given again is given too). Its texts name the commands as the program was started (``rendered``)."""
    args = rendered(p).parse_args(argv)
    probe = argparse.Namespace(**{a.dest: _UNSET for a in p._actions})
    p.parse_args(argv, namespace=probe)  # argparse sets a default only where the namespace has no value yet
    args.given = {dest for dest, value in vars(probe).items() if value is not _UNSET}
    return args


@dataclass(frozen=True)
class Needs:
    """Options (by ``dest``) that do something only where ``applies`` holds; ``needs`` says what that takes."""

    options: tuple[str, ...]
    applies: Callable[[argparse.Namespace], bool]
    needs: str


def refuse_ignored(args: argparse.Namespace, rules: Sequence[Needs]) -> None:
    """One line for the first option given that would do nothing here (the first rule it breaks), naming it and
    what it needs: no option is accepted and then ignored."""
    for rule in rules:
        if not rule.applies(args) and (ignored := [d for d in rule.options if d in args.given]):
            raise ValueError(named_as_started(f"--{ignored[0].replace('_', '-')}: {rule.needs}"))


def add_model_options(p: argparse.ArgumentParser) -> None:
    """``--ckpt`` (several: an ensemble), ``--device``, the search, the batching and the ``--align-*`` options."""
    search, batching = SearchOptions(), Batching()
    add_loading_options(p)
    p.add_argument("--beam-size", type=int, default=search.beam_size, help="1 for greedy search")
    p.add_argument("--length-penalty", type=float, default=search.alpha, help="GNMT alpha; 0 for none")
    p.add_argument("--max-len-a", type=float, default=search.max_len_a, help="output budget a * source length + b")
    p.add_argument("--max-len-b", type=int, default=search.max_len_b)
    p.add_argument("--nbest", type=int, default=search.nbest, help="the N best translations of each line")
    p.add_argument(
        "--batch-size",
        type=int,
        default=batching.batch_size,
        help="per batch: source tokens x beam (tokens) or sentences",
    )
    p.add_argument("--batch-type", choices=["sentences", "tokens"], default=batching.batch_type)
    add_cut_options(p)
    add_attention_options(p)


def add_loading_options(p: argparse.ArgumentParser) -> None:
    """``--ckpt`` (several: an ensemble), ``--device``, ``--threads`` and how a model computes."""
    p.add_argument(
        "--ckpt",
        required=True,
        nargs="+",
        help="checkpoint written by train.py; several: an ensemble (log-probs averaged); or a model folder "
        "export.py wrote: it translates on CTranslate2",
    )
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    p.add_argument(
        "--threads", type=int, default=0, help="CPU threads (0: torch's default; an exported model: one replica a core)"
    )
    p.add_argument(
        "--compute-type",
        help="an exported model's compute type (default: its quantisation), e.g. int8 or float32; see export.py",
    )
    kernels = Kernels()  # training's defaults (conf/config.yaml's kernels)
    p.add_argument(
        "--attention-backends",
        nargs="+",
        choices=list(ATTENTION_BACKENDS),
        metavar="BACKEND",
        help="a checkpoint's attention kernels, most preferred first, of "
        f"{', '.join(ATTENTION_BACKENDS)} (default: {' '.join(kernels.attention)}, as training's kernels.attention)",
    )
    p.add_argument(
        "--float32-matmul",
        choices=list(FLOAT32_MATMUL),
        help="a checkpoint's float32 products on a GPU: high (TF32) or highest (full float32) (default: "
        f"{kernels.float32_matmul}, as training's kernels.float32_matmul)",
    )


def add_cut_options(p: argparse.ArgumentParser) -> None:
    """``--max-src-len`` and ``--long-lines``: how long a line is read whole, and what is done with a longer one."""
    batching = Batching()
    p.add_argument(
        "--max-src-len",
        type=int,
        default=batching.max_src_len,
        help="longer lines (in subwords) are split or truncated",
    )
    p.add_argument("--long-lines", choices=["split", "truncate"], default=batching.long_lines)


ADAPTING = "or with --adapt-links the {} that agrees best with them"  # align.py's: said only where a command has it


def add_attention_options(p: argparse.ArgumentParser, adapts: bool = False) -> None:
    """The ``--align-*`` options: which attention word links, heatmaps and the viewer read; ``adapts``: the command
    has ``--adapt-links``, which chooses the reading where ``--align-links`` is not given."""
    chosen = ", " + ADAPTING.format("reading (of both models)") if adapts else ""
    p.add_argument(
        "--align-layer",
        type=int,
        help="attention layer that word links, heatmaps and the viewer read (negative: from the last); "
        "default: the choice of lowest validation AER recorded in the checkpoint, else the last layer",
    )
    p.add_argument("--align-head", help="a head of that layer (0, 1, ...) or mean (of its heads)")
    p.add_argument(
        "--align-readout",
        choices=READOUTS,
        help="output: the row that outputs each word; input: the row whose input is the word (Shift-Att)",
    )
    p.add_argument(
        "--align-links",
        choices=COMBINATIONS,
        help="how links are read from the map: forward (each English word's most attended French word), reverse "
        f"(each French word's most attending English word), or both symmetrised; default: the checkpoint's{chosen}",
    )


def add_reverse_options(p: argparse.ArgumentParser, use: str, adapts: bool = False) -> None:
    """``--reverse-ckpt`` (a model trained the other way) and ``--symmetrisation`` (how the two models' links join);
    ``use`` says where they apply; ``adapts``: the command has ``--adapt-links``, which chooses the rule."""
    chosen = ", " + ADAPTING.format("rule") if adapts else ""
    p.add_argument(
        "--reverse-ckpt",
        nargs="+",
        help=f"{use}: a model trained the other way, English to French (train.py data.prepare.reverse=true; "
        "several: an ensemble); it aligns each line too, and both models' links are symmetrised",
    )
    p.add_argument(
        "--symmetrisation",
        choices=COMBINATIONS,
        help="how --ckpt's links (forward) and --reverse-ckpt's (reverse) are combined; default: grow-diag-final-and "
        f"(it aligned real text best: docs/alignment.md){chosen}",
    )


def symmetrisation(args: argparse.Namespace) -> str:
    """``--symmetrisation``, or the rule that aligned real text best where it is not chosen by the guiding links."""
    return args.symmetrisation or Aligner.symmetrisation


def check_args(args: argparse.Namespace) -> None:
    """One line naming the option for a value out of its range."""
    for dest, allowed in ARG_RANGES.items():
        allowed.check(option(dest), getattr(args, dest))
    SearchOptions.check(args.beam_size, args.nbest, option)
    check_budget(args.max_len_a, args.max_len_b, args.max_src_len)


def option(dest: str) -> str:
    """``max_len_a`` -> ``--max-len-a``."""
    return "--" + dest.replace("_", "-")


def check_budget(a: float, b: int, longest: int) -> None:
    """One line unless the output budget ``a * length + b`` of the longest line read in one part (``longest``
    pieces) is at most :data:`MAX_LENGTH` tokens (and with it the GNMT length penalty, ``decoding.alpha``'s range
    given, stays well inside float32)."""
    budget = a * longest + b
    if not budget <= MAX_LENGTH:  # NaN and infinity too
        fits = int((MAX_LENGTH - b) / a) if a > 0 and b < MAX_LENGTH else 0
        raise ValueError(
            f"--max-len-a {a:g} --max-len-b {b}: a line of {longest} pieces (--max-src-len) would be given {budget:g} "
            f"output tokens, more than the {MAX_LENGTH} a search may give: lower them"
            + (f", or give --max-src-len {fits} or less" if fits >= 1 else "")
        )


def check_beam(args: argparse.Namespace, loaded: TranslationModel, dests: Iterable[str] = ("beam_size",)) -> None:
    """One line unless the beams ``dests`` name fit the model's target vocabulary (a search step takes the 2 x beam
    best tokens of it)."""
    most = loaded.tokenizer.tgt_vocab_size // 2
    for dest in dests:
        if getattr(args, dest) > most:
            raise ValueError(
                f"{option(dest)}={getattr(args, dest)}: must be at most {most} for this model (half its target "
                f"vocabulary of {loaded.tokenizer.tgt_vocab_size})"
            )


def special(path: Path) -> bool:
    """Whether ``path`` is there and no regular file nor folder (``/dev/null``, ``/dev/stdout``, a named pipe): an
    output written into it, never replaced by a file."""
    return path.exists() and not path.is_file() and not path.is_dir()


def output_file(name: str, path: str) -> Path:
    """``path`` if a file can be written there (checked before any work), else one line naming the option ``name``
    and the path."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{name} {path}: is a folder; give a file name")
    if special(p):
        if not os.access(p, os.W_OK):
            raise ValueError(f"{name} {path}: cannot write there (permission denied)")
        return p
    folder = p.absolute().parent
    if not folder.is_dir():
        state = f"{folder} is not a folder" if folder.exists() else f"folder {folder} does not exist"
        raise ValueError(f"{name} {path}: cannot write: {state}")
    if (why := unwritable(folder)) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{name} {path}: cannot write there ({why or 'permission denied'})")
    return p


def unwritable(folder: Path) -> str | None:
    """Why nothing can be written in ``folder`` (tried: a read-only file system, or one like ``/sys``, answers
    ``os.access`` with yes for root), or None where it can."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".nmt-probe-", dir=folder))
    except OSError as e:
        return e.strerror or str(e)
    return None


def output_folder(name: str, path: str) -> Path:
    """``path`` if it is a folder that files can be written in, or one that can be made (its missing parents
    too), else one line naming the option ``name`` and the path (a key, ``name`` ending in ``=``, is written
    ``key=path``)."""
    p = Path(path)
    where = f"{name}{path}" if name.endswith("=") else f"{name} {path}"
    if p.exists() and not p.is_dir():
        raise ValueError(f"{where}: is a file, not a folder; give a folder (it is made if missing)")
    there = p.absolute()
    while not there.exists():
        there = there.parent
    if not there.is_dir():
        raise ValueError(f"{where}: cannot make the folder: {there} is a file")
    if why := unwritable(there):
        raise ValueError(f"{where}: cannot write in {there} ({why})")
    return p


@contextmanager
def written(name: str, path: str | None) -> Iterator[TextIO]:
    """Where a command's text goes: stdout, or ``path`` (the option ``name``'s) written whole or not at all
    (checked before any work)."""
    if not path:
        yield sys.stdout
        sys.stdout.flush()
        return
    if special(output_file(name, path)):  # /dev/null, a named pipe: written to, never replaced by a file
        with open(path, "w", encoding="utf-8") as f:
            yield f
        return
    out_dir = Path(path).resolve().parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=".translate-", dir=out_dir)
    except OSError as e:
        raise ValueError(f"{name} {path}: cannot write in {out_dir} ({e.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def check_outputs(outputs: dict[str, str | None], inputs: dict[str, Sequence[str] | str | None]) -> None:
    """One line for the first output (option -> path; a name ending in ``/`` is a folder) that cannot be written,
    that two options name, or that would overwrite an input (option -> path or paths): all before any work."""
    seen: dict[Path, str] = {}
    given = {name: [p] if isinstance(p, str) else list(p) for name, p in inputs.items() if p}
    read = {Path(path).resolve(): name for name, paths in given.items() for path in paths}
    for name, path in outputs.items():
        if not path:
            continue
        folder = name.endswith("/")
        name = name.rstrip("/")
        (output_folder if folder else output_file)(name, path)
        if special(Path(path)):  # /dev/null may take several outputs; a device or pipe is no file to overwrite
            continue
        where = Path(path).resolve()
        if (other := seen.get(where)) is not None:
            raise ValueError(f"{name} {path}: {other} names it too; give each output its own path")
        if (source := read.get(where)) is not None:
            raise ValueError(f"{name} {path}: is {source} too, which it would overwrite; give another path")
        seen[where] = name


def search_options(args: argparse.Namespace) -> SearchOptions:
    return SearchOptions(args.beam_size, args.length_penalty, args.max_len_a, args.max_len_b, args.nbest)


def batching(args: argparse.Namespace) -> Batching:
    return Batching(args.batch_size, args.batch_type, args.max_src_len, args.long_lines)


def kernels(args: argparse.Namespace) -> Kernels | None:
    """How a checkpoint computes, as ``--attention-backends`` and ``--float32-matmul`` ask (None: neither given)."""
    backends, matmul = getattr(args, "attention_backends", None), getattr(args, "float32_matmul", None)
    if backends is None and matmul is None:
        return None
    given = {"attention": tuple(backends) if backends else None, "float32_matmul": matmul}
    return Kernels(**{k: v for k, v in given.items() if v is not None})


def translation_model(args: argparse.Namespace) -> TranslationModel:
    """What ``--ckpt`` names, loaded as ``--device``, ``--threads``, ``--compute-type``, ``--attention-backends`` and
    ``--float32-matmul`` ask."""
    from nmt.hardware import device
    from nmt.inference.loading import load_model

    on, asked = device("--device", args.device), kernels(args)
    if asked is not None:  # the words were argparse's choices: the rest of the rules
        written = lambda backends: " ".join(["--attention-backends", *backends])  # noqa: E731  as typed
        asked.check(on.type, written, f" (--device {args.device})")
    return load_model(args.ckpt, on, args.threads, args.compute_type, asked)


def load_reverse(args: argparse.Namespace, forward: TranslationModel) -> TranslationModel | None:
    """What ``--reverse-ckpt`` names (None if nothing), loaded as ``--ckpt`` was; refused unless it translates the
    other way."""
    if not args.reverse_ckpt:
        return None
    backward = translation_model(argparse.Namespace(**{**vars(args), "ckpt": args.reverse_ckpt}))
    if backward.languages != forward.languages[::-1]:
        raise ValueError(named_as_started(
            f"--reverse-ckpt {' '.join(args.reverse_ckpt)}: translates {'→'.join(backward.languages)}, as --ckpt does; "
            "give --reverse-ckpt a model trained the other way (train.py trains one with data.prepare.reverse=true)"
        ))  # fmt: skip
    return backward


def alignment_choice(args: argparse.Namespace, recorded: AttentionChoice) -> AttentionChoice:
    """The checkpoint's recorded choice with the ``--align-*`` options that were given put in."""
    head = recorded.head
    if args.align_head is not None:
        if args.align_head != "mean" and not args.align_head.isdigit():
            raise ValueError(f"--align-head={args.align_head!r}: must be a head number (0, 1, ...) or mean")
        head = None if args.align_head == "mean" else int(args.align_head)
    layer = recorded.layer if args.align_layer is None else args.align_layer
    readout, links = args.align_readout or recorded.readout, args.align_links or recorded.links
    return replace(recorded, layer=layer, head=head, readout=readout, links=links)  # the recorded decoder pass
