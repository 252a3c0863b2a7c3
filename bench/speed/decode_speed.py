"""Decoding speed on the Tatoeba test split: greedy and beam 5, at two batchings and one sentence at a time.

    python -m bench.speed.decode_speed --ckpt runs/<run>/checkpoints/last.ckpt [--data DIR] [--threads 2]

--data is a folder with the splits (train.tsv, valid.tsv, test.tsv; default data/fra-eng), e.g. a copy of the
Tatoeba splits the JoeyNMT figures were measured on.

All three are timed on the same sentences (the whole test split unless --sentences N):
  - translate.py's default: length-sorted batches of 4,000 source tokens x beam;
  - JoeyNMT's batching: 64 sentences a batch (length-sorted as well);
  - one sentence at a time (the same search, batches of one).
With --rerun, the same model also decodes without its cache, re-running the whole prefix at every step as
JoeyNMT's Transformer does (default batching): the same translations, so the ratio is the cache's alone.
Batched figures are the median of --repeats passes. BLEU/chrF (sacrebleu) of each output is a sanity check.
"""

from __future__ import annotations

import argparse
import statistics

import sacrebleu
import torch

from bench.common import options, table, timed, write_json
from nmt import checkpoint
from nmt.data.readers import read_tsv
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator
from nmt.models.seq2seq import PrefixRerun

# sentences/s of JoeyNMT 2.3.0's RNN anchor, from its anchor's README (64-sentence batches); its Transformer's
# were not measured (see --rerun)
JOEYNMT = {1: 191.9, 5: 48.7}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options(p, "ckpt", "data", "threads", "sentences")
    p.add_argument("--repeats", type=int, default=3, help="passes for each batched figure; the median is reported")
    p.add_argument("--rerun", action="store_true", help="also decode re-running the prefix at every step (no cache)")
    options(p, "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    test = read_tsv(args.data / "test.tsv")
    src, refs = test.src[: args.sentences], test.tgt[: args.sentences]
    module = checkpoint.load_checkpoint(args.ckpt)
    batchings = {"tokens 4000 (default)": Batching(), "64 sentences (JoeyNMT's)": Batching(64, "sentences")}
    rows = []
    model_name = module.checkpoint.model_settings["name"]
    for beam in (1, 5):
        search = SearchOptions(beam_size=beam)
        rnn = JOEYNMT[beam] if model_name != "transformer" else None  # only the RNN anchor's were measured
        plain = [*batchings.items(), ("one at a time", Batching(1, "sentences"))]
        ways = [(module.model, name, b) for name, b in plain]
        if args.rerun:
            ways.append((PrefixRerun(module.model), "tokens 4000, no cache (prefix re-run)", Batching()))
        for model, name, batching in ways:
            translator = Translator(model, module.tokenizer, search, batching)
            timed(translator, src[:64])  # warm-up
            passes = [timed(translator, src) for _ in range(1 if batching.batch_size == 1 else args.repeats)]
            seconds, hyps = statistics.median(s for s, _ in passes), passes[0][1]
            rows.append(
                {
                    "search": "greedy" if beam == 1 else f"beam {beam}",
                    "batching": name,
                    "sentences": len(src),
                    "sent_per_s": round(len(src) / seconds, 1),
                    "vs_joeynmt": None if rnn is None else round(len(src) / seconds / rnn, 2),
                    "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
                    "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2),
                }
            )
    print(f"checkpoint {args.ckpt}, model {model_name}, {args.threads} threads")
    print(table(rows, list(rows[0])))
    write_json(args.json, {"ckpt": args.ckpt, "model": model_name, "threads": args.threads, "runs": rows})


if __name__ == "__main__":
    main()
