"""Translate French to English with a checkpoint from train.py.

    python translate.py --ckpt best.ckpt < input.fr > output.en
    python translate.py --ckpt best.ckpt --input test.fr --output test.en --beam-size 5 --ref test.en.ref
    python translate.py --ckpt best.ckpt --input test.fr --ref test.en --seen train.tsv  # unseen refs too
    python translate.py --ckpt best.ckpt --interactive
    python translate.py --ckpt best.ckpt --input test.fr --html report.html --alignments test.align

One output line per input line, in input order; only translations go to stdout. Aligning given translations is
align.py's."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from nmt.cli.options import (
    Needs,
    add_model_options,
    alignment_choice,
    batching,
    check_args,
    check_beam,
    check_outputs,
    parse,
    refuse_ignored,
    search_options,
    translation_model,
    written,
)
from nmt.cli.view_files import write_views
from nmt.errors import run
from nmt.inference.translator import Translation, Translator
from nmt.scores import read_targets, sacrebleu_lines, score_split

log = logging.getLogger("translate")


def _parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(p)
    p.add_argument("--input", help="French text, one sentence a line (default: stdin)")
    p.add_argument("--output", help="where the English goes (default: stdout)")
    p.add_argument("--attention-dir", help="write a PNG heatmap and a JSON file of attention per sentence here")
    p.add_argument("--html", help="write the interactive alignment viewer of every sentence here (one HTML file)")
    p.add_argument("--alignments", help="write word links (Pharaoh i-j: French word i, English word j) per line here")
    p.add_argument("--interactive", action="store_true", help="prompt for one sentence at a time")
    p.add_argument("--ref", help="English references: print BLEU and chrF (sacrebleu) to stderr")
    p.add_argument(
        "--seen",
        metavar="TRAIN",
        help="the English the model trained on (a .tsv file: its second column; else one sentence a line): --ref's "
        "scores also on the pairs whose reference is not among it (unseen) and on the rest",
    )
    return parse(p, argv)


def reads_attention(args: argparse.Namespace) -> bool:
    return bool(args.alignments or args.html or args.attention_dir)


NEEDS = (  # what each option needs to do anything; the first rule broken is the one refused
    Needs(
        (
            "input",
            "output",
            "ref",
            "seen",
            "alignments",
            "html",
            "attention_dir",
            "nbest",
            "batch_size",
            "batch_type",
        ),  # fmt: skip
        lambda a: not a.interactive,
        "not with --interactive, which translates a line typed at the prompt, alone, and prints its best translation",
    ),
    Needs(("seen",), lambda a: a.ref is not None, "only with --ref, whose scores it splits"),
    Needs(
        ("length_penalty",),
        lambda a: a.beam_size > 1 or bool(a.html or a.attention_dir),
        "only where it changes the search (--beam-size above 1) or the scores shown (--html, --attention-dir): "
        "greedy search picks the same words whatever it is",
    ),
    Needs(
        ("align_layer", "align_head", "align_readout", "align_links"),
        reads_attention,
        "only where attention is read: with --alignments, --html or --attention-dir",
    ),
)


def format_output(results: list[Translation], nbest: int) -> list[str]:
    """One line per input line, or with ``nbest`` > 1 ``index<TAB>score<TAB>text`` rows: up to N per line, only real
    hypotheses (an empty line has none), keyed by the 0-based line index."""
    if nbest == 1:
        return [r.text for r in results]
    return [f"{i}\t{score:.4f}\t{text}" for i, r in enumerate(results) for score, text in zip(r.scores, r.texts)]


def interactive(translator: Translator) -> int:
    while True:
        print("fr> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            return 0
        print(translator.translate([line.rstrip("\n")])[0].text, flush=True)


def _translate(args: argparse.Namespace) -> int:
    refuse_ignored(args, NEEDS)
    check_args(args)
    reads = {"--input": args.input, "--ref": args.ref, "--seen": args.seen}
    for name, path in reads.items():
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{name} {path}: no such file")
    check_outputs(
        {"--output": args.output, "--alignments": args.alignments, "--html": args.html,
         "--attention-dir/": args.attention_dir},
        {**reads, "--ckpt": args.ckpt},
    )  # fmt: skip
    seen = read_targets(args.seen) if args.seen else None  # before the model loads: a bad line costs nothing
    with written("--output", args.output) as out:
        from nmt.data.readers import read_lines

        loaded = translation_model(args)
        check_beam(args, loaded)
        choice = loaded.resolve(alignment_choice(args, loaded.recorded))
        translator = Translator(loaded.model, loaded.tokenizer, search_options(args), batching(args), choice)
        if args.interactive:
            return interactive(translator)
        sentences = read_lines(args.input)
        refs = read_lines(args.ref) if args.ref else None
        check_parallel(args.ref, refs, sentences)
        results = translator.translate(sentences, progress=True)
        out.write("".join(line + "\n" for line in format_output(results, args.nbest)))
    write_outputs(args, results, translator, refs, seen)
    return 0


def check_parallel(path: str | None, lines: list[str] | None, sentences: list[str]) -> None:
    if lines is not None and len(lines) != len(sentences):
        raise ValueError(f"{path} has {len(lines)} lines but the input has {len(sentences)}")


def write_outputs(args: argparse.Namespace, results: list[Translation], translator: Translator,
                  refs: list[str] | None, seen: frozenset | None = None) -> None:  # fmt: skip
    """What goes beside the translations: attention files, the viewer (:func:`write_views`), word links, BLEU and
    chrF (on the unseen and the seen part too, with ``seen``)."""
    from nmt.alignment.links import pharaoh

    write_views(args, results, translator)
    if args.alignments:
        links = [translator.links(r) for r in results]
        Path(args.alignments).write_text("".join(pharaoh(x) + "\n" for x in links), encoding="utf-8")
    if refs is not None:
        hyps = [r.text for r in results]
        for line in sacrebleu_lines(hyps, refs):
            print(line, file=sys.stderr)
        if seen is not None:
            for line in score_split(hyps, refs, seen).lines():
                print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    return run(lambda: _translate(args))


if __name__ == "__main__":
    sys.exit(main())
