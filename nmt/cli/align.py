"""Align French lines with their given English translations: the word links of each pair, read from a model's
attention as it reads the translation (forced decoding), or from two models trained in opposite directions,
symmetrised; the models may first adapt to the pairs, guided by eflomal's links or a link file.

    python align.py --ckpt fr-en.ckpt --input test.fr --align-to test.en > test.align
    python align.py --ckpt fr-en.ckpt --reverse-ckpt en-fr.ckpt --input test.fr --align-to test.en > test.align
    python align.py --ckpt fr-en.ckpt --reverse-ckpt en-fr.ckpt --input test.fr --align-to test.en --adapt-links eflomal
    python align.py --ckpt fr-en.ckpt --input dev.fr --align-to dev.en --gold dev.en-fr.gold > dev.align
    python align.py --ckpt fr-en.ckpt --input test.fr --align-to test.en --html report.html

One line of links per input line (Pharaoh: French word i - English word j, from 0) on stdout or --alignments;
with --gold, the alignment error rate, precision and recall on stderr. Adapting under eflomal's links learns them
best with a corpus before the pairs: --adapt-corpus train.tsv (the models' training split).
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import replace
from pathlib import Path

from nmt.alignment.aer import AERCounts
from nmt.alignment.eflomal import EflomalSettings
from nmt.alignment.symmetrisation import Links
from nmt.alignment.tokenisation import LINES
from nmt.bounds import COUNT, POSITIVE, Range
from nmt.cli.options import (
    ARG_RANGES,
    Needs,
    add_attention_options,
    add_cut_options,
    add_loading_options,
    add_reverse_options,
    alignment_choice,
    check_outputs,
    load_reverse,
    option,
    parse,
    refuse_ignored,
    symmetrisation,
    translation_model,
    written,
)
from nmt.cli.view_files import write_views
from nmt.errors import run
from nmt.inference.adaptation import Adaptation
from nmt.inference.aligner import Aligner
from nmt.inference.pair_links import GUIDE
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator

log = logging.getLogger("align")


def _parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_loading_options(p)
    add_cut_options(p)
    add_attention_options(p, adapts=True)
    p.add_argument("--input", help="French text, one sentence a line (default: stdin)")
    p.add_argument("--align-to", required=True, help="the English translations of the input, a line per input line")
    p.add_argument("--alignments", help="write the word links here (default: stdout)")
    p.add_argument("--gold", help=GOLD_HELP)
    p.add_argument("--html", help="write the interactive alignment viewer of every pair here (one HTML file)")
    p.add_argument("--attention-dir", help="write a PNG heatmap and a JSON file of attention per pair here")
    p.add_argument(
        "--length-penalty",
        type=float,
        default=SearchOptions().alpha,
        help="GNMT alpha of the reading's score that --html and --attention-dir show; 0 for none",
    )
    add_reverse_options(p, "both directions", adapts=True)
    add_adaptation_options(p)
    return parse(p, argv)


GOLD_HELP = (
    "gold links of the pairs (the WPT-2003 form of the Hansards set's dev.en-fr.gold: a line per pair, 1-based, the "
    "English word first, e-f sure, epf, e?f or e-f-P possible): print AER, precision and recall to stderr"
)

NEEDS = (  # what each option needs to do anything; the first rule broken is the one refused
    Needs(
        ("length_penalty",),
        lambda a: bool(a.html or a.attention_dir),
        "only where the scores of the readings are shown: --html or --attention-dir",
    ),
    Needs(
        ("symmetrisation",),
        lambda a: bool(a.reverse_ckpt),
        "only with --reverse-ckpt: it combines the links of two models",
    ),
    Needs(
        ("adapt_lr", "adapt_links"),
        lambda a: a.adapt_epochs > 0,
        "only with --adapt-epochs N (N > 0): it sets how the models adapt",
    ),
    Needs(("adapt_align_weight",), lambda a: bool(a.adapt_links), "only with --adapt-links: it weighs their guidance"),
    Needs(
        ("adapt_corpus", "adapt_draws", "adapt_lines"),
        lambda a: a.adapt_links == "eflomal",
        "only with --adapt-links eflomal (a link file's links are given)",
    ),
)


def add_adaptation_options(p: argparse.ArgumentParser) -> None:
    """``--adapt-epochs`` and ``--adapt-lr``: the models adapt to the pairs they align
    (:mod:`nmt.inference.adaptation`)."""
    how = Adaptation()
    p.add_argument(
        "--adapt-epochs",
        type=int,
        default=how.epochs,
        help="with --align-to: first train (a copy of) each model this many epochs on the pairs it aligns, as a "
        "statistical aligner learns from the text it aligns (0: off; docs/alignment.md's commands use 20; with "
        "--adapt-links, 40 aligned its gold lines a little better, in twice the time)",
    )
    p.add_argument("--adapt-lr", type=float, default=how.lr, help="Adam's learning rate while adapting")
    p.add_argument(
        "--adapt-links",
        metavar="FILE|eflomal",
        help="with --adapt-epochs: word links of the pairs that guide each model's recorded attention as it adapts: "
        "a Pharaoh file (i-j, a line per input line, words as --align-to numbers them), or eflomal: the statistical "
        "aligner's, learnt from the pairs and --adapt-corpus (docs/alignment.md)",
    )
    p.add_argument(
        "--adapt-corpus",
        metavar="TSV",
        help="with --adapt-links eflomal: more pairs for eflomal to learn from (French<TAB>English a line, e.g. the "
        "models' training corpus)",
    )
    p.add_argument(
        "--adapt-draws",
        type=int,
        help=f"with --adapt-links eflomal: runs of eflomal whose links are voted (default {GUIDE.draws}; each "
        "direction keeps the links of more than half of them; they align better than one run: docs/alignment.md)",
    )
    p.add_argument(
        "--adapt-lines",
        choices=LINES,
        help=f"with --adapt-links eflomal: how the lines to align are written, for eflomal to read them and "
        f"--adapt-corpus in one tokenisation (default {GUIDE.lines}: tokenised, as the Hansards and Europarl are; raw: "
        "as typed, split by the Moses tokenizer as the corpus is; whitespace: every side's words as they are); links "
        "are given for the lines' whitespace words either way",
    )
    p.add_argument(
        "--adapt-align-weight",
        type=float,
        default=how.align_weight,
        help="with --adapt-links: the weight of their guidance beside the translation loss (default "
        f"{how.align_weight:g}: every alignment figure of docs/alignment.md)",
    )


def adaptation(args: argparse.Namespace) -> Adaptation:
    """How the models adapt (``--adapt-*``), each value checked against its range."""
    COUNT.check("--adapt-epochs", args.adapt_epochs)
    Range(0, 1, lo_open=True).check("--adapt-lr", args.adapt_lr)
    Range(0, 100, lo_open=True).check("--adapt-align-weight", args.adapt_align_weight)
    if args.adapt_draws is not None:
        POSITIVE.check("--adapt-draws", args.adapt_draws)
    return Adaptation(epochs=args.adapt_epochs, lr=args.adapt_lr, align_weight=args.adapt_align_weight)


def guide_settings(args: argparse.Namespace) -> EflomalSettings:
    """How eflomal links the pairs for ``--adapt-links eflomal``: :data:`~nmt.inference.pair_links.GUIDE` but for what
    ``--adapt-draws`` and ``--adapt-lines`` set."""
    given = {"draws": args.adapt_draws, "lines": args.adapt_lines}
    return replace(GUIDE, **{key: value for key, value in given.items() if value is not None})


def align_lines(args: argparse.Namespace) -> int:
    """Align ``--input`` with ``--align-to`` as ``args`` say; the links go to ``--alignments`` or stdout. Every option
    and file is checked before a model loads."""
    from nmt.alignment.gold import read_gold
    from nmt.alignment.links import pharaoh
    from nmt.data.readers import read_lines
    from nmt.inference.pair_links import pair_links

    refuse_ignored(args, NEEDS)
    for dest in ("threads", "max_src_len", "length_penalty"):
        ARG_RANGES[dest].check(option(dest), getattr(args, dest))
    how = adaptation(args)  # its ranges checked before anything loads
    adapt_links = None if args.adapt_links == "eflomal" else args.adapt_links
    reads = {"--input": args.input, "--align-to": args.align_to, "--gold": args.gold, "--adapt-links": adapt_links,
             "--adapt-corpus": args.adapt_corpus}  # fmt: skip
    for name, path in reads.items():
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{name} {path}: no such file")
    check_outputs(
        {"--alignments": args.alignments, "--html": args.html, "--attention-dir/": args.attention_dir},
        {**reads, "--ckpt": args.ckpt, "--reverse-ckpt": args.reverse_ckpt},
    )
    sentences, targets = read_lines(args.input), read_lines(args.align_to)
    if len(targets) != len(sentences):
        raise ValueError(f"{args.align_to} has {len(targets)} lines but the input has {len(sentences)}")
    gold = read_gold(args.gold, sentences, targets) if args.gold else None
    with written("--alignments", args.alignments) as out:
        loaded = translation_model(args)
        choice = loaded.resolve(alignment_choice(args, loaded.recorded))
        search, cut = (
            SearchOptions(alpha=args.length_penalty),
            Batching(max_src_len=args.max_src_len, long_lines=args.long_lines),
        )
        translator = Translator(loaded.model, loaded.tokenizer, search, cut, choice, searches=False)
        aligner = Aligner.of(translator, load_reverse(args, loaded), symmetrisation(args))
        aligner.check_lengths(sentences, targets)  # before eflomal or adapting take their time
        guide = None
        if args.adapt_links:
            settings = guide_settings(args)
            guide = pair_links(args.adapt_links, sentences, targets, args.adapt_corpus, settings, loaded.languages)
        aligner, results, links = aligner.run(sentences, targets, how, guide, args.align_links, args.symmetrisation)
        out.write("".join(pharaoh(x) + "\n" for x in links))
    write_views(args, results, aligner.forward)  # the model that aligned: what --attention-dir and --html show
    if gold is not None:
        print(scores(links, *gold, args.gold), file=sys.stderr)
    return 0


def scores(links: list[Links], sure: list[Links], possible: list[Links], path: str) -> str:
    """The line ``--gold`` prints: AER, precision and recall of ``links`` against the gold, in percent."""
    counts = AERCounts()
    for found, s, p in zip(links, sure, possible):
        counts.add(found, s, p)
    aer, precision, recall = (100 * x for x in counts.scores())
    return (
        f"AER = {aer:.2f}%  precision = {precision:.2f}%  recall = {recall:.2f}%  (gold {path}: {len(sure)} pairs, "
        f"{counts.s} sure links, {sum(map(len, possible))} possible)"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    return run(lambda: align_lines(args))


if __name__ == "__main__":
    sys.exit(main())
