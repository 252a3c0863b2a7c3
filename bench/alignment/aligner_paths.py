"""Every path to word links for the Hansards development lines, in one run: eflomal given the text in one
tokenisation by hand, the project's eflomal path (one draw and voted), one model and a pair adapted to the lines
under its guidance, and ``align.py`` end to end beside eflomal's own time.

    python -m bench.alignment.aligner_paths --fr-en FR_EN.ckpt --en-fr EN_FR.ckpt [--hansards DIR] [--tatoeba DIR]
        [--draws 7] [--hand-draws 2] [--epochs 10 20 30 40] [--translate-epochs 20] [--halvings 20]
        [--json bench/results/aligner_paths.json]

--hansards is the Hansards development part (default data/hansards-dev: dev.fr, dev.en, dev.en-fr.gold), --tatoeba
the folder of the Tatoeba training split (train.tsv) that eflomal learns from besides the lines and the models were
trained on. What is measured:

- **by hand**: the Tatoeba pairs tokenised by the Moses tokenizer and rewritten as the lines are written (lowercase,
  elisions and contractions written out, a few regular expressions as one would write them with sed), the lines as
  given, both handed to eflomal's own program (``eflomal-align``); ``--hand-draws`` runs. No code of the project is
  used but the reading of the gold links.
- **the project's eflomal path** (``nmt.alignment.eflomal``: ``data.align=eflomal``, ``align.py --adapt-links
  eflomal``), the lines read as tokenised (the default), ``--draws`` single draws and their vote (what guides the
  models); beside it one draw of the earlier path, every side's whitespace words as written.
- **adapted**: the fr→en model alone and the pair (fr→en, en→fr), each adapted once for the largest of ``--epochs``
  under the voted intersection's guidance and read after each E as ``translate.py`` reads a guided adaptation (as
  agrees best with the guide); the seconds to each E; E chosen on the gold of a random half of the lines and scored
  on the other half (and the other way round), ``--halvings`` seeded halvings.
- **translate.py**: the command a user runs, the pair adapted ``--translate-epochs`` epochs and guided by eflomal
  (its default draws), timed as a whole (loading, eflomal, adapting, aligning), beside the project's eflomal path
  alone with the same draws, timed in the same run.

AER of each direction and symmetrisation, against the gold's sure and possible links (``nmt.alignment.gold``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from bench.common import ROOT, options, table, write_json
from nmt.alignment.eflomal import EflomalSettings, program, token_links, voted
from nmt.alignment.gold import Gold, hansards
from nmt.alignment.links import parse_links
from nmt.alignment.symmetrisation import COMBINATIONS, DIRECTIONS, Links, combined
from nmt.alignment.tokenisation import words_linked
from nmt.data.readers import read_tsv
from nmt.inference import adaptation
from nmt.inference.adaptation import Adaptation
from nmt.inference.aligner import Aligner, reading
from nmt.inference.loading import load_model
from nmt.inference.pair_links import GUIDE, corpus_tokens, pair_links
from nmt.inference.translator import Translator
from nmt.specials import LANGUAGES

SED = [  # French, after the Moses tokenizer and lowercasing: elisions and contractions written out as the lines are
    (
        r"(?<!\S)(l|d|j|m|t|s|c|n)' ",
        {"l": "le", "d": "de", "j": "je", "m": "me", "t": "te", "s": "se", "c": "ce", "n": "ne"},
    ),  # fmt: skip
    (r"(?<!\S)(qu|jusqu|lorsqu|puisqu)' ", None),  # qu' -> que
    (r"(?<!\S)au(?!\S)", "à le"),
    (r"(?<!\S)aux(?!\S)", "à les"),
    (r"(?<!\S)du(?!\S)", "de le"),
    (r"(?<!\S)des(?!\S)", "de les"),
]


def by_hand_line(tokenizer, line: str, french: bool) -> str:
    """A Tatoeba line as one would rewrite it by hand: Moses-tokenised, lowercased, French elisions and
    contractions written out."""
    text = tokenizer.tokenize(line, escape=False, aggressive_dash_splits=True, return_str=True)
    text = text.replace("@-@", "-").replace("’", "'").lower()
    if french:
        for pattern, by in SED:
            if isinstance(by, dict):
                text = re.sub(pattern, lambda m, by=by: by[m[1]] + " ", text)
            else:
                text = re.sub(pattern, (lambda m: m[1] + "e ") if by is None else by, text)
    return text


def by_hand(train: Path, lines: Gold, draws: int) -> dict:
    """eflomal's own program on the Tatoeba pairs rewritten by hand and the lines as given."""
    from sacremoses import MosesTokenizer

    fr, en = MosesTokenizer(lang="fr"), MosesTokenizer(lang="en")
    start = time.perf_counter()
    pairs = read_tsv(train)
    src = [by_hand_line(fr, s, True) for s in pairs.src] + lines.src
    tgt = [by_hand_line(en, t, False) for t in pairs.tgt] + lines.tgt
    rewriting = time.perf_counter() - start
    out = {"rewriting_seconds": round(rewriting, 1), "runs": []}
    with tempfile.TemporaryDirectory(prefix="by-hand-") as tmp:
        files = {name: Path(tmp) / name for name in ("src", "tgt", *DIRECTIONS)}
        files["src"].write_text("\n".join(src) + "\n", encoding="utf-8")
        files["tgt"].write_text("\n".join(tgt) + "\n", encoding="utf-8")
        paths = ("-s", files["src"], "-t", files["tgt"], "-f", files["forward"], "-r", files["reverse"])
        cmd = [program(), *map(str, paths), "--model", "3", "--overwrite"]
        for d in range(draws):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            seconds = time.perf_counter() - start
            read = lambda name: files[name].read_text().split("\n")[len(pairs.src) : len(src)]  # noqa: E731
            fw, rv = ([parse_links(x) for x in read(name)] for name in DIRECTIONS)
            run = {name: lines.aer([combined(name, f, r) for f, r in zip(fw, rv)])["aer"] for name in COMBINATIONS}
            out["runs"].append({"seconds": round(seconds, 1), "aer": run})
            print(f"by hand, draw {d + 1}: {seconds:.1f} s {run}", flush=True)
    return out


def project(train: Path, lines: Gold, draws: int) -> tuple[dict, list[Links]]:
    """The project's eflomal path, ``draws`` single draws and their vote, and one draw of the whitespace path;
    returns the voted intersection too (the guide)."""
    start = time.perf_counter()
    before = corpus_tokens(train, LANGUAGES, EflomalSettings().corpus_lines)  # cached after a first run
    out: dict = {"tokenising_seconds": round(time.perf_counter() - start, 1), "draws": []}
    runs = []
    for d in range(draws):
        start = time.perf_counter()
        pairs, fw, rv = token_links(lines.src, lines.tgt, before, EflomalSettings())
        seconds = time.perf_counter() - start
        runs.append((fw, rv))
        out["draws"].append({"seconds": round(seconds, 1), "aer": aers(lines, pairs, fw, rv)})
        print(f"project's path, draw {d + 1}: {seconds:.1f} s {out['draws'][-1]['aer']}", flush=True)
    fw, rv = (voted([run[k] for run in runs]) for k in range(2))
    out["voted"] = {"draws": draws, "aer": aers(lines, pairs, fw, rv)}
    guide = [words_linked(combined("intersection", f, r), *pair) for f, r, pair in zip(fw, rv, pairs)]
    start = time.perf_counter()
    plain, fw, rv = token_links(lines.src, lines.tgt, read_words(train), EflomalSettings(lines="whitespace"))
    out["whitespace"] = {"seconds": round(time.perf_counter() - start, 1), "aer": aers(lines, plain, fw, rv)}
    print(f"voted: {out['voted']}\nwhitespace words: {out['whitespace']}", flush=True)
    return out, guide


def read_words(train: Path) -> list[tuple[list[str], list[str]]]:
    pairs = read_tsv(train)
    return [(s.split(), t.split()) for s, t in zip(pairs.src, pairs.tgt)]


def aers(lines: Gold, pairs, forward: list[Links], reverse: list[Links]) -> dict:
    """The AER of each direction and symmetrisation of token links, mapped back to the lines' words."""
    return {
        name: lines.aer([words_linked(combined(name, f, r), *p) for f, r, p in zip(forward, reverse, pairs)])["aer"]
        for name in COMBINATIONS
    }


def adapted(ckpts: list[Path], lines: Gold, guide: list[Links], epochs: list[int], halvings: int) -> dict:
    """One model (``ckpts``: fr→en) or a pair (fr→en, en→fr) adapted once for the largest of ``epochs``, read after
    each E as translate.py reads a guided adaptation; the seconds to each E; E cross-validated on halves."""
    loaded = [load_model([str(c)], torch.device("cpu")) for c in ckpts]
    fw = loaded[0]
    translator = Translator(fw.model, fw.tokenizer, alignment=fw.resolve(fw.recorded))
    base = Aligner.of(translator, loaded[1] if len(loaded) > 1 else None, Aligner.symmetrisation)
    recorded = lines.aer(base.align(lines.src, lines.tgt)[1])  # as training recorded it: what --align-to reads
    print(f"{len(ckpts)} model(s) as recorded: {recorded}", flush=True)
    how = Adaptation(epochs=max(epochs))
    models: dict[int, list] = {}
    start = time.perf_counter()
    seconds: dict[int, float] = {}

    def keep(k: int):
        def after(epoch: int, model: torch.nn.Module) -> None:
            if epoch in epochs:
                models.setdefault(epoch, [None] * len(loaded))[k] = model
                seconds[epoch] = seconds.get(epoch, 0.0) + time.perf_counter() - clock[k]
                clock[k] = time.perf_counter()

        return after

    clock = [0.0] * len(loaded)
    sides = [(lines.src, lines.tgt, guide, base.forward)]
    if base.backward is not None:
        sides.append((lines.tgt, lines.src, [{(j, i) for i, j in x} for x in guide], base.backward))
    for k, (src, tgt, links, t) in enumerate(sides):
        clock[k] = time.perf_counter()
        adaptation.adapted(t.engine.module, t.tok, src, tgt, how, links, t.alignment, keep(k))
    total = time.perf_counter() - start
    found, out = {}, {"models": [str(c) for c in ckpts], "adaptation": vars(how) | {"epochs": epochs}}
    out |= {"recorded": recorded | {"symmetrisation": base.symmetrisation if base.backward else None}, "epochs": {}}
    for epoch in epochs:
        one = Aligner(reading(base.forward, model=models[epoch][0]))
        if base.backward is not None:
            one = replace(one, backward=reading(base.backward, model=models[epoch][1]))
        one = one.closest(lines.src, lines.tgt, guide)
        found[epoch] = one.align(lines.src, lines.tgt)[1]
        out["epochs"][epoch] = lines.aer(found[epoch]) | {
            "seconds_adapting": round(sum(seconds[e] for e in epochs if e <= epoch), 1),
            "reading": one.forward.alignment.links,
            "symmetrisation": one.symmetrisation if base.backward is not None else None,
        }
        print(f"{len(ckpts)} model(s) adapted {epoch} epochs: {out['epochs'][epoch]}", flush=True)
    out["seconds_adapting"] = round(total, 1)
    out["cross_validated"] = lines.cross_validated(found, halvings)
    return out


def end_to_end(args: argparse.Namespace, lines: Gold) -> dict:
    """``align.py`` with the pair adapted under eflomal's guidance, timed as a whole, beside the
    project's eflomal path alone with the same draws (the guide translate.py computes), timed in the same run."""
    start = time.perf_counter()
    pair_links("eflomal", lines.src, lines.tgt, str(args.tatoeba / "train.tsv"))  # what translate.py runs first
    eflomal_seconds = time.perf_counter() - start
    d = args.hansards
    cmd = [sys.executable, str(ROOT / "align.py"), "--ckpt", str(args.fr_en), "--reverse-ckpt", str(args.en_fr),
           "--input", str(d / "dev.fr"), "--align-to", str(d / "dev.en"), "--adapt-epochs", str(args.translate_epochs),
           "--adapt-links", "eflomal", "--adapt-corpus", str(args.tatoeba / "train.tsv")]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    found = [parse_links(x) for x in done.stdout.splitlines()]
    out = {
        "command": "python align.py --ckpt FR_EN --reverse-ckpt EN_FR --input dev.fr --align-to dev.en "
        f"--adapt-epochs {args.translate_epochs} --adapt-links eflomal --adapt-corpus train.tsv",
        "epochs": args.translate_epochs,
        "seconds": round(seconds, 1),
        "aer": lines.aer(found)["aer"],
        "eflomal_seconds": round(eflomal_seconds, 1),
        "eflomal_draws": GUIDE.draws,
        "ratio": round(seconds / eflomal_seconds, 2),
    }
    print(f"translate.py: {out}", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fr-en", type=Path, required=True, help="a Tatoeba checkpoint, French to English")
    p.add_argument("--en-fr", type=Path, required=True, help="a Tatoeba checkpoint, English to French")
    options(p, "hansards", "tatoeba")
    p.add_argument("--draws", type=int, default=GUIDE.draws, help="draws of the project's eflomal path (voted)")
    p.add_argument("--hand-draws", type=int, default=2, help="runs of eflomal on the text rewritten by hand")
    p.add_argument("--epochs", type=int, nargs="+", default=[10, 20, 30, 40], help="adapting epochs read")
    p.add_argument("--translate-epochs", type=int, default=20, help="adapting epochs of the translate.py run")
    p.add_argument("--halvings", type=int, default=20, help="random halvings of the lines for the cross-validated E")
    p.add_argument("--skip", nargs="*", default=[], choices=["hand", "single", "pair", "translate"])
    options(p, "json")
    args = p.parse_args()
    lines = hansards(args.hansards)
    train = args.tatoeba / "train.tsv"
    out: dict = {"lines": len(lines.src), "threads": torch.get_num_threads()}
    if "hand" not in args.skip:
        out["by_hand"] = by_hand(train, lines, args.hand_draws)
    out["project"], guide = project(train, lines, args.draws)
    out["guide"] = {"links": f"the intersection of {args.draws} draws voted", **lines.aer(guide)}
    write_json(args.json, out)  # after each stage: a later failure keeps what was measured
    if "single" not in args.skip:
        out["single"] = adapted([args.fr_en], lines, guide, args.epochs, args.halvings)
        write_json(args.json, out)
    if "pair" not in args.skip:
        out["pair"] = adapted([args.fr_en, args.en_fr], lines, guide, args.epochs, args.halvings)
        write_json(args.json, out)
    if "translate" not in args.skip:
        out["translate"] = end_to_end(args, lines)
    rows = [{"path": k, **out["project"][k]["aer"]} for k in ("voted", "whitespace")]
    print(table(rows, ["path", *COMBINATIONS]))
    write_json(args.json, out)


if __name__ == "__main__":
    main()
