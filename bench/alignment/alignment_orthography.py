"""Is it the form of the Hansards text that the models' attention fails on? The same lines rewritten in the
orthography the models were trained on, their links mapped back to the set's words.

    python -m bench.alignment.alignment_orthography --ckpts TATOEBA_CKPT ... [--hansards DIR]
        [--json bench/results/alignment_orthography.json]

--hansards is the Hansards development part (default data/hansards-dev): dev.fr, dev.en and the gold links
dev.en-fr.gold.

The Hansards French is lowercased and tokenised with elisions and contractions written out (``le ordre``,
``à le``, ``ce ne est``, ``peut - être``), its English tokenised (``Speaker ,``); Tatoeba, which the models saw,
writes ``l'ordre``, ``au``, ``c'est``, ``peut-être``, ``Speaker,`` and capitalises the first word. Each line is
rewritten that way (a rewritten word stands for one or more of the set's words), teacher-forced through the model,
and every attention choice's links (each layer, head and readout, each way of reading links) are mapped back: a
link to a rewritten word links each of the set's words it stands for. Its AER beside that of the lines as given.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bench.common import options, table, write_json
from nmt import checkpoint
from nmt.alignment.aer import AERCounts
from nmt.alignment.choice import READOUTS, every_map
from nmt.alignment.gold import Gold, hansards
from nmt.alignment.symmetrisation import COMBINATIONS
from nmt.alignment.words import piece_words, word_attention, word_links

VOWEL_START = tuple("aeiouyàâäéèêëîïôöœùûü")
ELIDED = {"le", "la", "je", "me", "te", "se", "ne", "de", "que", "ce", "lorsque", "puisque", "quelque", "jusque"}
CONTRACTED = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du", ("de", "les"): "des"}
ATTACHED = {",", ".", ")", "'s", "n't"}  # written against the word before them

Word = tuple[str, list[int]]  # a rewritten word and the indices of the set's words it stands for


def french(words: list[str]) -> list[Word]:
    out: list[Word] = []
    for k, w in enumerate(words):
        prev, idx = out[-1] if out else ("", [])
        low = prev.lower()
        if (low, w) in CONTRACTED:
            out[-1] = (CONTRACTED[(low, w)], [*idx, k])
        elif low in ELIDED and w.lower().startswith(VOWEL_START):
            out[-1] = (prev[:-1] + "'" + w, [*idx, k])
        elif low == "si" and w in ("il", "ils"):
            out[-1] = ("s'" + w, [*idx, k])
        elif out and (w in ATTACHED or w == "-" or prev.endswith("-")):
            out[-1] = (prev + w, [*idx, k])
        else:
            out.append((w, [k]))
    return capitalised(out)


def english(words: list[str]) -> list[Word]:
    out: list[Word] = []
    for k, w in enumerate(words):
        if out and w in ATTACHED | {"?", "!", ":", ";"}:
            out[-1] = (out[-1][0] + w, [*out[-1][1], k])
        else:
            out.append((w, [k]))
    return capitalised(out)


def capitalised(words: list[Word]) -> list[Word]:
    if words:
        words[0] = (words[0][0][:1].upper() + words[0][0][1:], words[0][1])
    return words


def as_given(words: list[str]) -> list[Word]:
    return [(w, [k]) for k, w in enumerate(words)]


def best_of_every_choice(ckpt: Path, lines: Gold, rewrite: bool) -> dict:
    """The lowest AER of every way of reading links (over layers, heads and readouts), and the best overall."""
    loaded = checkpoint.load_checkpoint(ckpt)
    tok, model = loaded.tokenizer, loaded.model
    counts: dict[tuple, AERCounts] = {}
    skipped = 0
    for k in range(len(lines.src)):
        src_words, tgt_words = lines.src[k].split(), lines.tgt[k].split()
        src = french(src_words) if rewrite else as_given(src_words)
        tgt = english(tgt_words) if rewrite else as_given(tgt_words)
        [src_ids] = tok.encode_src([" ".join(w for w, _ in src)])
        [tgt_ids] = tok.encode_tgt([" ".join(w for w, _ in tgt)])
        with torch.no_grad():
            _, cross, _ = model.read(torch.tensor([src_ids]), torch.tensor([len(src_ids)]), tgt_ids)
        src_index, tgt_index = piece_words(tok.src_pieces(src_ids)), piece_words(tok.tgt_pieces(tgt_ids))
        if (src_index[-1] + 1, tgt_index[-1] + 1) != (len(src), len(tgt)):
            skipped += 1
            continue
        maps = every_map(cross)[..., : len(tgt_ids), : len(src_ids)]
        words = word_attention(maps, src_index, tgt_index)  # (readouts, layers, heads + 1, target, source)
        for r, layer, h in torch.cartesian_prod(*(torch.arange(n) for n in words.shape[:3])).tolist():
            for name in COMBINATIONS:
                links = word_links(words[r, layer, h], name)
                found = {(a, b) for i, j in links for a in src[i][1] for b in tgt[j][1]}
                choice = (READOUTS[r], layer, h, name)
                counts.setdefault(choice, AERCounts()).add(found, lines.sure[k], lines.possible[k])
    aer = {choice: AERCounts.aer(c.as_tensor()) for choice, c in counts.items()}
    by_links = {name: round(min(a for c, a in aer.items() if c[3] == name), 4) for name in COMBINATIONS}
    return {"skipped": skipped, "best_of_each_links": by_links, "best": round(min(aer.values()), 4)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpts", nargs="+", required=True, help="Tatoeba checkpoints")
    options(p, "hansards", "json")
    args = p.parse_args()
    lines = hansards(args.hansards)
    rows = []
    for ckpt in map(Path, args.ckpts):
        for rewrite in (False, True):
            found = best_of_every_choice(ckpt, lines, rewrite)
            rows.append({"ckpt": str(ckpt), "text": "Tatoeba's orthography" if rewrite else "as given", **found})
    flat = [{**r, **r["best_of_each_links"]} for r in rows]
    print(table(flat, ["ckpt", "text", "best", *COMBINATIONS]))
    write_json(args.json, {"lines": len(lines.src), "models": rows})


if __name__ == "__main__":
    main()
