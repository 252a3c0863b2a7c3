"""Word alignment against gold links: every attention choice of our models beside eflomal's own links, on the
built-in corpus's test split and on real text (the Hansards development part: --hansards DIR).

    python -m bench.alignment.alignment [--runs runs/bench_toy_bahdanau ...] [--ckpts TATOEBA_CKPT ...]
        [--hansards DIR] [--tatoeba DIR]

The real text is read from --hansards (default data/hansards-dev: dev.fr, dev.en and the gold links dev.en-fr.gold)
and eflomal's training text from --tatoeba (default data/fra-eng: the models' training split, train.tsv). Where
the default Hansards folder is missing and neither --ckpts nor --pair is given, only the built-in corpus is measured.

Built-in corpus, for each run of bench/quality/toy_quality.py: `align.py` (forced decoding of the
reference, as val/aer and test/aer read the attention of the reference) writes Pharaoh links for the test split
with the best checkpoint; their AER against the corpus's sure/possible links is set beside the test/aer that
train.py logged for the same checkpoint and split. Pairs whose pieces do not form the gold words are left out of
both. The links are read from the attention choice the checkpoint recorded (lowest validation AER), as
align.py does by default. Then, per run, the test-split AER of every attention choice (teacher-forced
reference, as test/aer): each layer's head mean and its best single head, with the "output" readout (the row that
outputs word j) and the "input" readout (the row whose input is word j: Shift-Att, Chen et al., 2020). Beside
them eflomal (nmt/alignment/eflomal.py), trained on the run's training pairs with the test lines appended.

Real text, for each Tatoeba checkpoint given with --ckpts: the same on the Hansards development part (French
lowercased and tokenised as the set gives it), overall and by French line length; beside it eflomal trained on the
Tatoeba training split (its raw text, whitespace words) with the Hansards lines appended, both directions and each
symmetrisation, and the seconds it took. Every choice includes the way links are read from the map (forward,
reverse or both symmetrised); for the Transformer, every choice is also scored with each head's weights scaled by
the norm of what each source position adds through it (Kobayashi et al. 2020: "norm_weighted"). With --revalidate
the choice translate.py reads is measured again on the run's validation split, as training now records it.

With --adapt-epochs E each model (and each --pair, adapted once and read with every symmetrisation by the aligner
align.py runs) first trains E epochs on the lines it aligns (align.py --adapt-epochs); with --adapt-guide
eflomal's links of the lines guide that training too (align.py --adapt-links): those of the eflomal run reported
beside the models (a direction or symmetrisation of it), or with 'translate' a run of eflomal's own, as align.py
--adapt-links eflomal --adapt-corpus TATOEBA/train.tsv makes it. With --adapt-one-run each model adapts once, for
the largest E, and its links are read after each E (the model after epoch E is the one an E-epoch adaptation gives:
tests/test_translate.py); beside each E's AER stand the E whose links agree best with the guide (chosen without the
gold) and a cross-validated AER of choosing E on the gold: E chosen on a random half of the lines, scored on the
other half and the other way round, for --halvings random halvings (mean, min, max).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench import common
from bench.alignment.alignment_reading import align_to, choice_grid, eflomal_aer, print_layers, within
from bench.common import DATA, MODELS, check, compose, options, prepared_corpus, table, tsv_words, write_json
from nmt import checkpoint
from nmt.alignment import gold
from nmt.alignment.choice import AttentionChoice
from nmt.alignment.eflomal import EflomalSettings
from nmt.alignment.links import pharaoh
from nmt.alignment.symmetrisation import COMBINATIONS, turned
from nmt.data.training_links import training_words
from nmt.inference import adaptation
from nmt.inference.adaptation import Adaptation
from nmt.inference.aligner import Aligner, agreement, reading
from nmt.inference.loading import load_model
from nmt.inference.pair_links import GUIDE, pair_links
from nmt.inference.translator import Translator


def parser() -> argparse.ArgumentParser:
    """The script's options (the Hansards and Tatoeba folders checked only where the real text is measured)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # fmt: off
    p.add_argument("--runs", nargs="*", default=[f"runs/bench_toy_{m}" for m in MODELS])
    p.add_argument("--ckpts", nargs="*", default=[], help="Tatoeba checkpoints measured on the Hansards lines")
    p.add_argument("--pair", nargs=2, action="append", default=[], metavar=("FR_EN", "EN_FR"),
                   help="a French-English checkpoint and one trained the other way (data.prepare.reverse=true): each "
                   "alone and both symmetrised (--reverse-ckpt) on the Hansards lines; may be given again")
    options(p, "hansards", "tatoeba", hansards=DATA / "hansards-dev", tatoeba=DATA / "fra-eng")
    p.add_argument("--revalidate", action="store_true",
                   help="measure each --ckpts checkpoint's attention choice again on its run's validation split, as "
                   "training now records it (for checkpoints trained before a choice axis existed), instead of "
                   "reading the recorded one")
    p.add_argument("--adapt-epochs", nargs="*", type=int, default=[],
                   help="also measure what align.py --adapt-epochs E gives (each model first trained E epochs on the "
                   "lines it aligns), for each E: the --ckpts with their recorded choice, the --pair symmetrised")
    p.add_argument("--adapt-guide", choices=[*COMBINATIONS, "translate"],
                   help="with --adapt-epochs: eflomal's links of the lines guide the models as they adapt "
                   "(--adapt-links): this direction or symmetrisation of the run beside the models, or 'translate': "
                   "align.py runs eflomal itself (--adapt-links eflomal --adapt-corpus the Tatoeba training split)")
    p.add_argument("--adapt-align-weight", type=float, default=Adaptation().align_weight,
                   help="the guidance's weight (align.py --adapt-align-weight)")
    p.add_argument("--adapt-one-run", action="store_true",
                   help="adapt each --ckpts model once, for the largest --adapt-epochs, reading its links after each "
                   "E; with the E that agrees best with the guide and a cross-validated choice of E on the gold")
    p.add_argument("--halvings", type=int, default=20, help="with --adapt-one-run: random halvings of the lines")
    p.add_argument("--eflomal-draws", type=int, default=1,
                   help="runs of eflomal voted for its links beside the models and the guide (data.aligner.draws; "
                   "with --adapt-guide translate, align.py --adapt-draws)")
    # fmt: on
    options(p, "json")
    return p


def main() -> None:
    p = parser()
    args = p.parse_args()
    if args.adapt_one_run and not args.adapt_epochs:
        p.error("--adapt-one-run: give the epochs to read with --adapt-epochs")
    if args.adapt_one_run and args.pair:
        p.error("--adapt-one-run: measures the --ckpts models alone, not a --pair")
    real = args.ckpts or args.pair or Path(args.hansards).exists()  # else the built-in corpus alone
    if real:  # the real text's inputs (their defaults checked here)
        args.hansards = check(p, "--hansards", common.hansards, args.hansards)
        args.tatoeba = check(p, "--tatoeba", common.training_split, args.tatoeba)
    result = {"built_in": built_in([Path(r) for r in args.runs if Path(r).is_dir()])}
    if real:
        with tempfile.TemporaryDirectory() as tmp:
            result["hansards_dev"] = hansards_dev(args, Path(tmp))
    write_json(args.json, result)


def hansards_dev(args: argparse.Namespace, tmp: Path) -> dict:
    """The Hansards lines: eflomal beside the models, each model as recorded and adapted (or, with
    ``--adapt-one-run``, each model adapted once and read after each E), and each ``--pair``."""
    lines = gold.hansards(args.hansards)
    train = tsv_words(args.tatoeba / "train.tsv")
    efl, efl_links = eflomal_aer(train, lines, args.eflomal_draws)
    translate = args.adapt_guide == "translate"  # align.py runs eflomal itself, on the Tatoeba split (read in ROOT)
    corpus = str((args.tatoeba / "train.tsv").resolve()) if translate else None
    links = "eflomal" if translate else str(tmp / "guide.align")
    if args.adapt_guide and not translate:  # the links of the run beside the models
        Path(links).write_text("".join(pharaoh(x) + "\n" for x in efl_links[args.adapt_guide]), encoding="utf-8")
    adapt = Adapting(args.adapt_epochs, args.adapt_guide, links, args.adapt_align_weight, corpus, args.eflomal_draws)
    if args.adapt_one_run:
        print(table([{"eflomal": k, **v} for k, v in efl["aer"].items()], ["eflomal", "aer", "by_length"]))
        one_run = {c: by_epoch(Path(c), lines, adapt, args.halvings) for c in args.ckpts}
        return {"lines": len(lines.src), "eflomal": efl, "adapted_by_epoch": one_run}
    out = real_text(lines, efl, args.ckpts, args.revalidate, adapt)
    return out | {"pairs": [both_ways(Path(f), Path(r), lines, adapt) for f, r in args.pair]}


@dataclass(frozen=True)
class Adapting:
    """The adaptations measured: each of ``epochs``, guided by eflomal's ``guide`` links (``links``: a file of
    them, or ``eflomal``: translate.py runs it, learning from ``corpus`` too)."""

    epochs: Sequence[int] = ()
    guide: str | None = None
    links: str | None = None
    weight: float = Adaptation().align_weight
    corpus: str | None = None
    draws: int = 1

    def options(self, epochs: int) -> tuple[str, ...]:
        """translate.py's options for ``epochs`` epochs (none for 0: translate.py refuses options that do nothing)."""
        if not epochs:
            return ()
        guided = ("--adapt-links", self.links, "--adapt-align-weight", str(self.weight)) if self.guide else ()
        own = ("--adapt-corpus", self.corpus, "--adapt-draws", str(self.draws)) if self.corpus else ()
        return ("--adapt-epochs", str(epochs), *guided, *own)

    @property
    def aligner(self) -> EflomalSettings:
        """How translate.py's eflomal links the lines: its guide's settings with these draws."""
        return replace(GUIDE, draws=self.draws)

    def describe(self) -> dict:
        guide = self.guide and ("eflomal run by translate.py" if self.links == "eflomal" else f"eflomal, {self.guide}")
        draws = self.draws if self.guide else None
        return {"guide": guide, "align_weight": self.weight if self.guide else None, "eflomal_draws": draws}


def built_in(runs: list[Path]) -> dict:
    """The built-in corpus's test split: each run's exported links, every choice, and eflomal (on the default
    corpus where no run is given)."""
    rows, grids = [], []
    for run in runs:
        ckpt = next((run / "checkpoints").glob("best-*.ckpt"))
        model = torch.load(ckpt, weights_only=True)["hyper_parameters"]["model"]["name"]
        test = gold.corpus_gold(prepared_corpus(config(run)).references["test"])
        exported = test.aer(align_to(ckpt, test, checkpoint.load_checkpoint(ckpt).checkpoint.alignment))
        events = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
        events.Reload()
        logged = events.Scalars("test/aer")[-1].value
        row = {
            "model": model,
            "pairs": len(test.src),
            "skipped": exported["skipped"],
            "aer_of_exported_links": exported["aer"],
        }
        rows.append(row | {"test_aer_logged": round(logged, 4), "difference": round(exported["aer"] - logged, 4)})
        grids.append({"model": model, "run": str(run), **choice_grid(ckpt, test)})
    if rows:
        print(table(rows, list(rows[0])))
        print_layers(grids)
    corpus = prepared_corpus(config(runs[0]) if runs else compose([]))
    train = list(training_words(corpus.splits["train"], corpus.tokenizer))
    efl, _ = eflomal_aer(train, gold.corpus_gold(corpus.references["test"]))
    print(table([{"eflomal": k, **v} for k, v in efl["aer"].items()], ["eflomal", "aer", "skipped"]))
    command = "align.py (forced decoding of the reference); every choice teacher-forced"
    return {"command": command, "runs": rows, "choices": grids, "eflomal": efl}


def real_text(lines: gold.Gold, efl: dict, ckpts: list[str], revalidate: bool, adapt: Adapting) -> dict:
    """The Hansards lines: eflomal trained on the Tatoeba training split (``efl``), and each checkpoint's attention
    (also adapted to the lines as ``adapt`` says, with its recorded choice)."""
    print(table([{"eflomal": k, **v} for k, v in efl["aer"].items()], ["eflomal", "aer", "skipped", "by_length"]))
    models = []
    for ckpt in map(Path, ckpts):
        record = validation_choice(ckpt) if revalidate else checkpoint.load_checkpoint(ckpt).checkpoint.alignment_record
        choice = checkpoint.alignment({"nmt": {"alignment": record}})
        recorded = lines.aer(align_to(ckpt, lines, choice))
        grid = choice_grid(ckpt, lines, choice)
        models.append({"ckpt": str(ckpt), "validation": record, "revalidated": revalidate, "recorded_choice": recorded})
        models[-1] |= grid
        print(f"{ckpt}: AER of align.py with the choice recorded on validation ({choice}) {recorded}")
        models[-1]["adapted"] = adapted(ckpt, lines, adapt, choice if revalidate else None)  # None: translate.py's
    if models:
        print_layers([{"model": m["ckpt"], **m} for m in models])
    return {"lines": len(lines.src), "eflomal": efl, "models": models}


def both_ways(forward: Path, reverse: Path, lines: gold.Gold, adapt: Adapting) -> dict:
    """A French-English model and an English-French one on the lines: each alone (its recorded choice; the second
    reads the English as its source, its links turned round) and both symmetrised by each rule, as translate.py
    --reverse-ckpt gives them; then the same adapted to the lines as ``adapt`` says (``forward`` and ``reverse`` of
    the rules: each model alone), with the seconds each took."""
    back = [None if x is None else turned(x) for x in align_to(reverse, lines.turned())]
    out = {"fr_en": str(forward), "en_fr": str(reverse), "alone": {"fr_en": lines.aer(align_to(forward, lines))}}
    out["alone"]["en_fr"] = lines.aer(back)
    out["symmetrised"] = {
        rule: lines.aer(align_to(forward, lines, options=("--reverse-ckpt", str(reverse), "--symmetrisation", rule)))
        for rule in COMBINATIONS
    }
    rows = [{"links": k, **v} for k, v in (out["alone"] | out["symmetrised"]).items()]
    print(table(rows, ["links", "aer", "skipped", "by_length"]))
    out["adapted"], out["adaptation"] = {}, adapt.describe()
    for epochs in adapt.epochs:
        out["adapted"][epochs] = adapted_pair(forward, reverse, lines, adapt, epochs)
        rows = [{"links": f"{k}, adapted {epochs} epochs", **v} for k, v in out["adapted"][epochs].items()]
        print(table(rows, ["links", "aer", "skipped", "by_length"]))
    return out


def adapted_pair(forward: Path, reverse: Path, lines: gold.Gold, adapt: Adapting, epochs: int) -> dict:
    """What ``align.py --reverse-ckpt --adapt-epochs`` gives for each ``--symmetrisation``, by the
    aligner it runs (``nmt.inference.aligner``: the pair adapted once, its links combined by each rule), with the
    seconds that adapting took (eflomal's run included where it guides), and where links guide, the AER of those links
    themselves and of what ``translate.py`` gives by default (the reading and rule that agree best with them)."""
    fw, bw = (load_model([str(c)], torch.device("cpu")) for c in (forward, reverse))
    translator = Translator(fw.model, fw.tokenizer, alignment=fw.resolve(fw.recorded))
    start = time.perf_counter()
    guide = pair_links(adapt.links, lines.src, lines.tgt, adapt.corpus, adapt.aligner) if adapt.guide else None
    how = Adaptation(epochs=epochs, align_weight=adapt.weight)
    pair = Aligner.of(translator, bw, COMBINATIONS[0]).adapted(lines.src, lines.tgt, how, guide)
    seconds = round(time.perf_counter() - start, 1)
    out = {"guide": lines.aer(guide)} if guide is not None else {}  # the links that guided, on the same gold
    if guide is not None:  # what translate.py gives: read and joined as agrees best with the guide (Aligner.closest)
        pair = pair.closest(lines.src, lines.tgt, guide)
        out["translate.py"] = lines.aer(within(pair.align(lines.src, lines.tgt)[1], lines))
        out["translate.py"] |= {"reading": pair.forward.alignment.links, "symmetrisation": pair.symmetrisation}
    for rule in COMBINATIONS:  # each rule, the models read as translate.py reads them
        out[rule] = lines.aer(within(Aligner(pair.forward, pair.backward, rule).align(lines.src, lines.tgt)[1], lines))
        out[rule]["seconds_adapting"] = seconds
    return out


def adapted(ckpt: Path, lines: gold.Gold, adapt: Adapting, choice: AttentionChoice | None) -> dict:
    """The AER of ``align.py --adapt-epochs E`` (the model alone, read with ``choice`` or as
    translate.py reads it by default) for each E of ``adapt``, with the seconds each took (adapting and aligning)."""
    out = {"adaptation": adapt.describe()}
    for epochs in adapt.epochs:
        start = time.perf_counter()
        out[epochs] = lines.aer(align_to(ckpt, lines, choice, adapt.options(epochs)))
        out[epochs]["seconds"] = round(time.perf_counter() - start, 1)
        print(f"{ckpt}: adapted {epochs} epochs to the lines: {out[epochs]}")
    return out


def by_epoch(ckpt: Path, lines: gold.Gold, adapt: Adapting, halvings: int) -> dict:
    """What ``align.py --adapt-epochs E`` gives for each E of ``adapt`` (the model alone, read as
    translate.py reads it), from one adaptation for the largest E read after each; the E whose links agree best with
    the guide (no gold used); and E chosen on the gold of a random half of the lines, scored on the other half (and
    the other way round, every line scored once), for ``halvings`` seeded halvings."""
    loaded = load_model([str(ckpt)], torch.device("cpu"))
    translator = Translator(loaded.model, loaded.tokenizer, alignment=loaded.resolve(loaded.recorded))
    start = time.perf_counter()
    guide = pair_links(adapt.links, lines.src, lines.tgt, adapt.corpus, adapt.aligner) if adapt.guide else None
    found: dict[int, list] = {}  # epoch: each line's links
    out: dict = {"ckpt": str(ckpt), "adaptation": adapt.describe(), "epochs": {}}

    def read(epoch: int, model: torch.nn.Module) -> None:
        if epoch in adapt.epochs:
            aligner = Aligner(reading(translator, model=model))
            aligner = aligner.closest(lines.src, lines.tgt, guide) if guide is not None else aligner
            found[epoch] = aligner.align(lines.src, lines.tgt)[1]
            out["epochs"][epoch] = lines.aer(within(found[epoch], lines)) | {"reading": aligner.forward.alignment.links}
            if guide is not None:
                out["epochs"][epoch]["aer_against_guide"] = round(agreement(found[epoch], guide), 4)
            print(f"{ckpt}: adapted {epoch} epochs ({time.perf_counter() - start:.0f} s): {out['epochs'][epoch]}")

    how = Adaptation(epochs=max(adapt.epochs), align_weight=adapt.weight)
    model, tok = translator.engine.module, translator.tok
    adaptation.adapted(model, tok, lines.src, lines.tgt, how, guide, translator.alignment, read)
    out["seconds"] = round(time.perf_counter() - start, 1)
    if guide is not None:
        closest = min(found, key=lambda e: out["epochs"][e]["aer_against_guide"])
        out["closest_to_guide"] = {"epochs": closest, **out["epochs"][closest]}
    out["cross_validated"] = lines.cross_validated({e: within(f, lines) for e, f in found.items()}, halvings)
    cv = out["cross_validated"]
    rows = [{"epochs": e, **v} for e, v in out["epochs"].items()]
    print(table(rows, ["epochs", "aer", "skipped", "by_length", "reading", *(["aer_against_guide"] * bool(guide))]))
    print(f"{ckpt}: E chosen on half the gold, scored on the other half: {cv['aer_mean']} "
          f"(min {cv['aer_min']}, max {cv['aer_max']}, {halvings} halvings)")  # fmt: skip
    return out


def config(run: Path):
    return OmegaConf.load(run / ".hydra" / "config.yaml")


def validation_choice(ckpt: Path) -> dict:
    """The record of the attention choice training keeps (the choice, its validation AER), measured with this code:
    Lightning validates the checkpoint's module on its run's validation split (``ckpt`` in ``RUN/checkpoints/``) and
    the module picks the choice of lowest AER."""
    import lightning as L
    from hydra.utils import instantiate

    from nmt.training.module import TranslationModule

    cfg = config(ckpt.parent.parent)
    datamodule = instantiate(cfg.data, links=False)
    datamodule.prepare_data()
    datamodule.setup("fit")
    module = TranslationModule.from_config(cfg, datamodule.tokenizer)
    module.load_state_dict(torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"])
    quiet = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    L.Trainer(accelerator="cpu", **quiet).validate(module, datamodule=datamodule, verbose=False)
    print(f"{ckpt}: on validation, {module.alignment} (AER {module.alignment_record['aer']:.4f})")
    return module.alignment_record


if __name__ == "__main__":
    main()
