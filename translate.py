"""Translate French to English with a checkpoint from train.py.

    python translate.py --ckpt best.ckpt < input.fr > output.en
    python translate.py --ckpt best.ckpt --input test.fr --output test.en --beam-size 5 --ref test.en.ref
    python translate.py --ckpt best.ckpt --interactive
    python translate.py --ckpt best.ckpt --input test.fr --html report.html --alignments test.align
    python translate.py --ckpt best.ckpt --input test.fr --align-to test.en > test.align   # align, not translate

One output line per input line, in input order; only translations go to stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from nmt.errors import BAD_INPUT
from nmt.search import SearchOptions
from nmt.settings import POSITIVE, RANGES
from nmt.translator import Batching

log = logging.getLogger("translate")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    search, batching = SearchOptions(), Batching()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--ckpt",
        required=True,
        nargs="+",
        help="checkpoint written by train.py; several: an ensemble (log-probs averaged)",
    )
    p.add_argument("--input", help="French text, one sentence a line (default: stdin)")
    p.add_argument("--output", help="where the English goes (default: stdout)")
    p.add_argument("--beam-size", type=int, default=search.beam_size, help="1 for greedy search")
    p.add_argument("--length-penalty", type=float, default=search.alpha, help="GNMT alpha; 0 for none")
    p.add_argument("--max-len-a", type=float, default=search.max_len_a, help="output budget a * source length + b")
    p.add_argument("--max-len-b", type=int, default=search.max_len_b)
    p.add_argument("--nbest", type=int, default=search.nbest, help="print the N best as index<TAB>score<TAB>hypothesis")
    p.add_argument(
        "--batch-size",
        type=int,
        default=batching.batch_size,
        help="per batch: source tokens x beam (tokens) or sentences",
    )
    p.add_argument("--batch-type", choices=["sentences", "tokens"], default=batching.batch_type)
    p.add_argument(
        "--max-src-len",
        type=int,
        default=batching.max_src_len,
        help="longer lines (in subwords) are split or truncated",
    )
    p.add_argument("--long-lines", choices=["split", "truncate"], default=batching.long_lines)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    p.add_argument("--attention-dir", help="write a PNG heatmap and a JSON file of attention per sentence here")
    p.add_argument("--html", help="write the interactive alignment viewer of every sentence here (one HTML file)")
    p.add_argument("--alignments", help="write word links (Pharaoh i-j: French word i, English word j) per line here")
    p.add_argument(
        "--align-to",
        help="English translations of the input: align them (forced decoding) instead of translating; "
        "the output is then their word links in Pharaoh format",
    )
    p.add_argument("--interactive", action="store_true", help="prompt for one sentence at a time")
    p.add_argument("--ref", help="English references: print BLEU and chrF (sacrebleu) to stderr")
    return p.parse_args(argv)


def format_output(results, nbest: int) -> list[str]:
    """One line per input line, or with ``nbest`` > 1 ``index<TAB>score<TAB>text`` rows: up to N per line, only real
    hypotheses (an empty line has none), keyed by the 0-based line index."""
    if nbest == 1:
        return [r.text for r in results]
    return [f"{i}\t{score:.4f}\t{text}" for i, r in enumerate(results) for score, text in zip(r.scores, r.texts)]


def export_attention(results, tok, directory: Path) -> None:
    from nmt.plotting import heatmap, save

    directory.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(results):
        entries = []
        for k, (src_ids, hyps) in enumerate(r.parts):
            hyp = hyps[0]
            src_pieces, out_pieces = tok.src_pieces(src_ids), tok.output_labels(hyp.tokens)
            weights = hyp.attention.numpy()
            entries.append(
                {"source_pieces": src_pieces, "output_pieces": out_pieces, "weights": weights.round(5).tolist()}
            )
            name = f"{i}.png" if len(r.parts) == 1 else f"{i}_{k}.png"
            save(heatmap(weights, src_pieces, out_pieces, title=tok.decode_tgt([hyp.tokens])[0]), str(directory / name))
        (directory / f"{i}.json").write_text(
            json.dumps({"source": r.source, "translation": r.text, "parts": entries}, ensure_ascii=False)
        )


def html_sentences(results, translator) -> list[dict]:
    """The viewer's sentences: each line (each part of a split line) with its n-best, each with its own attention."""
    import torch

    from nmt.viewer import hypothesis_view

    sentences = []
    model, tok, device = translator.model, translator.tok, translator.device
    for r in results:
        for k, (src_ids, hyps) in enumerate(r.parts):
            src = torch.tensor([src_ids], device=device)
            views = []
            for hyp in hyps:
                _, _, self_map = model.read(src, torch.tensor([len(src_ids)], device=device), hyp.tokens)
                views.append(hypothesis_view(tok, src_ids, hyp, None if self_map is None else self_map.cpu().numpy()))
            title = r.source if len(r.parts) == 1 else f"{r.source} (part {k + 1} of {len(r.parts)})"
            sentences.append({"source": title, "hypotheses": views})
    return sentences


def interactive(translator) -> None:
    while True:
        print("fr> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            break
        print(translator.translate([line.rstrip("\n")])[0].text, flush=True)


# every numeric option and its range (the search options share theirs with conf/'s decoding)
ARG_RANGES = {
    "beam_size": RANGES["decoding.beam_size"],
    "length_penalty": RANGES["decoding.alpha"],
    "max_len_a": RANGES["decoding.max_len_a"],
    "max_len_b": RANGES["decoding.max_len_b"],
    "nbest": RANGES["decoding.nbest"],
    "batch_size": POSITIVE,
    "max_src_len": POSITIVE,
}


def check_args(args: argparse.Namespace) -> None:
    for dest, allowed in ARG_RANGES.items():
        allowed.check("--" + dest.replace("_", "-"), getattr(args, dest))
    if args.nbest > args.beam_size:
        raise ValueError(f"--nbest={args.nbest}: must be at most --beam-size ({args.beam_size})")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s", stream=sys.stderr)
    tmp = None
    try:
        check_args(args)
        if args.output:  # fail before any work if the output cannot be written; publish only when complete
            out_dir = Path(args.output).resolve().parent
            if not out_dir.is_dir():
                raise ValueError(f"{args.output}: cannot write: folder {out_dir} does not exist")
            try:
                fd, tmp = tempfile.mkstemp(prefix=".translate-", dir=out_dir)
                os.close(fd)
            except OSError as e:
                raise ValueError(f"{args.output}: cannot write ({e.strerror})") from None

        import torch

        from nmt import ensemble
        from nmt.data.readers import read_lines
        from nmt.translator import Translator
        from nmt.viewer import line_links, pharaoh, write_report

        search = SearchOptions(args.beam_size, args.length_penalty, args.max_len_a, args.max_len_b, args.nbest)
        batching = Batching(args.batch_size, args.batch_type, args.max_src_len, args.long_lines)
        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        translator = Translator(*ensemble.load(args.ckpt, device), search, batching)
        if args.interactive:
            interactive(translator)
            return 0
        sentences = read_lines(args.input)
        refs = read_lines(args.ref) if args.ref else None
        if refs is not None and len(refs) != len(sentences):
            raise ValueError(f"{args.ref} has {len(refs)} lines but the input has {len(sentences)}")
        if args.align_to:
            targets = read_lines(args.align_to)
            if len(targets) != len(sentences):
                raise ValueError(f"{args.align_to} has {len(targets)} lines but the input has {len(sentences)}")
            results = translator.force(sentences, targets)
            lines = [pharaoh(line_links(translator.tok, r.parts)) for r in results]
        else:
            results = translator.translate(sentences)
            lines = format_output(results, args.nbest)
        text = "".join(line + "\n" for line in lines)
        if tmp:
            Path(tmp).write_text(text, encoding="utf-8")
            os.replace(tmp, args.output)
            tmp = None
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
        if args.attention_dir:
            export_attention(results, translator.tok, Path(args.attention_dir))
        if args.alignments:
            links = "".join(pharaoh(line_links(translator.tok, r.parts)) + "\n" for r in results)
            Path(args.alignments).write_text(links, encoding="utf-8")
        if args.html:
            write_report(
                args.html, [("", html_sentences(results, translator))], f"Attention alignments: {' + '.join(args.ckpt)}"
            )
        if refs is not None:
            import sacrebleu

            hyps = [r.text for r in results]
            for metric in (sacrebleu.BLEU(), sacrebleu.CHRF()):
                score = metric.corpus_score(hyps, [refs])
                print(f"{score}  ({metric.get_signature()})", file=sys.stderr)
        return 0
    except BAD_INPUT as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
