"""What ``--attention-dir`` and ``--html`` write beside the output of ``translate.py`` and ``align.py``: the
attention of each line as JSON and heatmaps, and the viewer page."""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
from pathlib import Path

from nmt.cli.options import special
from nmt.inference.translator import Translation, Translator

log = logging.getLogger("views")


def write_views(args: argparse.Namespace, results: list[Translation], translator: Translator) -> None:
    """``--attention-dir``'s files and ``--html``'s viewer of ``results``, read with ``translator``'s attention."""
    from nmt.views.viewer import write_report

    if (args.attention_dir or args.html) and not translator.engine.every_map:
        log.warning("the engine returns one attention map (its export's choice): the viewer and heatmaps show only it")
    if args.attention_dir:
        export_attention(results, translator, Path(args.attention_dir))
    if args.html:
        title = f"Attention alignments: {' + '.join(args.ckpt)}"
        if not special(Path(args.html)):
            write_report(args.html, [("", html_sentences(results, translator))], title)
        else:  # written beside, then into it: a device or a pipe is never replaced by a file
            with tempfile.TemporaryDirectory() as folder:
                write_report(Path(folder) / "report.html", [("", html_sentences(results, translator))], title)
                Path(args.html).write_bytes((Path(folder) / "report.html").read_bytes())


def export_attention(results: list[Translation], translator: Translator, directory: Path) -> None:
    """Per line ``i``: ``i.json`` (its viewer sentences) and a heatmap per part (``i.png``, ``i_k.png``)."""
    from nmt.views.plotting import heatmap, save
    from nmt.views.translation_attention import sentence_attention

    directory.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(results):
        parts = [(ids, h[:1]) for ids, h in r.parts]
        sentences = sentence_attention(translator.engine, translator.tok, r.source, parts, choice=translator.alignment)
        for k, sentence in enumerate(sentences):
            view = sentence.hypotheses[0]
            fig = heatmap(view.cross, view.src_pieces, view.out_pieces, title=view.text)
            save(fig, str(directory / (f"{i}.png" if len(sentences) == 1 else f"{i}_{k}.png")))
        parts_json = [s.to_json() for s in sentences]
        (directory / f"{i}.json").write_text(
            json.dumps({"source": r.source, "translation": r.text, "parts": parts_json}, ensure_ascii=False)
        )


def html_sentences(results: list[Translation], translator: Translator) -> list[dict]:
    """The viewer's sentences: each line (each part of a split line) with its n-best, each with its own attention."""
    from nmt.views.translation_attention import sentence_attention

    model, tok, choice = translator.engine, translator.tok, translator.alignment
    return [s.to_json() for r in results for s in sentence_attention(model, tok, r.source, r.parts, choice=choice)]
