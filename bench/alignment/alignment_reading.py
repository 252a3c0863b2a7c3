"""How ``bench/alignment/alignment.py`` reads word links on lines with gold links: what ``align.py`` gives a checkpoint
(:func:`align_to`), the AER of every attention choice read teacher-forced (:func:`choice_grid`, with the
norm-weighted readout of Kobayashi et al., 2020), and eflomal's own links (:func:`eflomal_aer`)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from bench.common import ROOT, table
from nmt import checkpoint
from nmt.alignment.aer import AERGrid, aer_grid
from nmt.alignment.choice import READOUTS, AttentionChoice
from nmt.alignment.eflomal import align_after
from nmt.alignment.gold import Gold
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS, Links, combined


def eflomal_aer(
    train: list[tuple[list[str], list[str]]], gold: Gold, draws: int = 1
) -> tuple[dict, dict[str, list[Links]]]:
    """eflomal trained on ``train`` with the gold lines appended (``draws`` runs, voted, as eflomal is used): the gold
    lines' AER for each direction and symmetrisation with the seconds the runs took, and the links themselves."""
    start = time.perf_counter()
    lines = [(s.split(), t.split()) for s, t in zip(gold.src, gold.tgt)]
    forward, reverse = align_after(train, lines, draws=draws)
    seconds = time.perf_counter() - start
    links = {name: [combined(name, f, r) for f, r in zip(forward, reverse)] for name in COMBINATIONS}
    out = {name: gold.aer(found) for name, found in links.items()}
    return {"pairs": len(train), "draws": draws, "seconds": round(seconds, 1), "aer": out}, links


def align_to(
    ckpt: Path, lines: Gold, choice: AttentionChoice | None = None, options: tuple[str, ...] = ()
) -> list[set | None]:
    """``align.py``'s links of each line (None where a link names a word beyond the line's: the
    pieces did not form the gold's words; no link at all is an answer, with no recall), read with ``choice``
    (default: the recorded one) and more ``options``."""
    with tempfile.TemporaryDirectory() as tmp:
        src, ref = Path(tmp) / "src.fr", Path(tmp) / "ref.en"
        src.write_text("".join(s + "\n" for s in lines.src), encoding="utf-8")
        ref.write_text("".join(t + "\n" for t in lines.tgt), encoding="utf-8")
        cmd = [sys.executable, str(ROOT / "align.py"), "--ckpt", str(ckpt), "--input", str(src), "--align-to", str(ref)]
        cmd += options
        if choice is not None:
            head = "mean" if choice.head is None else str(choice.head)
            cmd += ["--align-layer", str(choice.layer), "--align-head", head]
            cmd += ["--align-readout", choice.readout, "--align-links", choice.links]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT).stdout.split("\n")
    return within([parse_links(line) for line in out[: len(lines.src)]], lines)


def within(found: list[set], lines: Gold) -> list[set | None]:
    """Each line's links, or None where a link names a word beyond the line's (the pieces did not form its words)."""
    out = []
    for links, s, t in zip(found, lines.src, lines.tgt):
        whole = not links or (max(i for i, _ in links) < len(s.split()) and max(j for _, j in links) < len(t.split()))
        out.append(links if whole else None)
    return out


def choice_grid(ckpt: Path, lines: Gold, recorded: AttentionChoice | None = None) -> dict:
    """The AER of every attention choice of the checkpoint on the lines (teacher-forced), by readout and layer, and
    the AER of the ``recorded`` one (default: the checkpoint's)."""
    loaded = checkpoint.load_checkpoint(ckpt)
    recorded = recorded or loaded.checkpoint.alignment
    full = recorded.context == "full"  # the pass guided training read (the grid reads that one)
    tok, grid, weighted = loaded.tokenizer, AERGrid(), AERGrid()  # as validation in training adds it up
    srcs, tgts = tok.encode_src(lines.src), tok.encode_tgt(lines.tgt)
    for k, (src_ids, tgt) in enumerate(zip(srcs, tgts)):
        src, src_len = torch.tensor([src_ids]), torch.tensor([len(src_ids)])
        with torch.no_grad():
            _, cross, _ = loaded.model.read(src, src_len, tgt, full_context=full)
            norms = value_norms(loaded.model, src, src_len)  # (layers, heads, S) or None
        words = len(lines.src[k].split()), len(lines.tgt[k].split())
        pair = tok.src_pieces(src_ids), tok.tgt_pieces(tgt), lines.sure[k], lines.possible[k], words
        grid.add(aer_grid(cross, *pair))
        if norms is not None:  # each head's weights times the norm of what each source position adds through it
            w = cross * norms[:, :, None, :]
            weighted.add(aer_grid(w / w.sum(-1, keepdim=True).clamp(min=1e-12), *pair))
    aer = grid.aers()  # (readouts, layers, heads + 1, links)
    heads = aer.shape[2] - 1
    at = lambda x: round(float(x), 4)  # noqa: E731
    layers = {  # the forward links (each English word's most attended French word) of each layer
        r: [{"head_mean": at(a[heads, 0]), "best_head": at(a[:heads, 0].min())} for a in aer[i]]
        for i, r in enumerate(READOUTS)
    }
    links = {name: at(aer[..., k].nan_to_num(1.0).min()) for k, name in enumerate(COMBINATIONS)}
    head = heads if recorded.head is None else recorded.head
    chosen = aer[READOUTS.index(recorded.readout), recorded.layer, head, COMBINATIONS.index(recorded.links)]
    best_choice, best = grid.best()
    best_choice = replace(best_choice, context=recorded.context)  # the pass the grid read
    out = {
        "layers": layers,
        "best_of_each_links": links,
        "best": at(best),
        "best_choice": best_choice.as_dict(),
        "chosen": recorded.as_dict() | {"aer": at(chosen)},
    }
    if weighted.counts is not None:
        aer, (choice, best) = weighted.aers(), weighted.best()
        links = {name: at(aer[..., k].nan_to_num(1.0).min()) for k, name in enumerate(COMBINATIONS)}
        out["norm_weighted"] = {"best_of_each_links": links, "best": at(best), "best_choice": choice.as_dict()}
    return out


def value_norms(model, src: torch.Tensor, src_len: torch.Tensor) -> torch.Tensor | None:
    """``(layers, heads, S)``: for each decoder layer's cross-attention head, the norm of the vector that source
    position j adds to the layer's output through it (its value through the head's share of the output projection):
    Kobayashi et al. (2020), "Attention is not only a weight". None for the RNN models."""
    layers = getattr(model.decoder, "layers", None)
    if layers is None:
        return None
    memory = model.encoder(src, src_len)[0]  # (1, S, d)
    norms = []
    for layer in layers:
        attention = layer.cross_attn
        _, values = attention.keys_values(memory)  # (1, heads, S, d / heads)
        heads, size = values.shape[1], values.shape[-1]
        out = attention.out_proj.weight.view(-1, heads, size)  # (d, heads, d / heads)
        norms.append(torch.einsum("hsk,ohk->hso", values[0], out).norm(dim=-1))  # (heads, S)
    return torch.stack(norms)


def print_layers(grids: list[dict]) -> None:
    layers = [
        {"model": g["model"], "readout": r, "layer": layer, "head_mean": v["head_mean"], "best_head": v["best_head"]}
        for g in grids
        for r, per_layer in g["layers"].items()
        for layer, v in enumerate(per_layer)
    ]
    print(table(layers, list(layers[0])))
