"""Test BLEU/chrF of a JoeyNMT 2.3 Transformer checkpoint (e.g. the anchor after its 15-minute budget), decoded by
this project's search with JoeyNMT's decoding settings.

    python -m bench.anchors.joeynmt_quality --joeynmt-ckpt <work>/models/transformer15/latest.ckpt \
        --spm <work>/data/spm \
        --template runs/bench_quality_transformer/checkpoints/last.ckpt [--data DIR] \
        [--json bench/results/joeynmt_quality.json]

The JoeyNMT weights are converted into one of our checkpoints (the inverse of ``bench/anchors/joeynmt_decode.py``'s
mapping; the anchor's sentencepiece models get <pad> and <unk> swapped into our ids, and the weights' rows
with them; no output bias) with the settings of ``--template`` (a checkpoint of the same sizes). Our search
then decodes the 3,086-sentence test split (of --data: a folder with the splits train.tsv, valid.tsv and test.tsv,
default data/fra-eng, e.g. a copy of the Tatoeba splits) as JoeyNMT does (64-sentence batches, no length penalty,
output up to 1.5 x the source): on identical weights its translations and JoeyNMT's own agree on nearly every
sentence and it decodes several times faster (the "joeynmt" rows of ``bench/results/engine.json``, docs/ct2.md), which
is what makes scoring a barely trained model (long outputs) affordable here.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import sacrebleu
import torch
from sentencepiece import sentencepiece_model_pb2

from bench.anchors.joeynmt_decode import SWAPPED, names, swap
from bench.common import options, timed, write_json
from nmt import checkpoint
from nmt.data.readers import read_tsv
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator


def our_ids(model: bytes) -> bytes:
    """A JoeyNMT-style sentencepiece model (<unk> 0, <pad> 1) with <pad> 0 and <unk> 1, as ours are."""
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    unk, pad = (sentencepiece_model_pb2.ModelProto.SentencePiece() for _ in range(2))
    unk.CopyFrom(proto.pieces[0])
    pad.CopyFrom(proto.pieces[1])
    proto.pieces[0].CopyFrom(pad)
    proto.pieces[1].CopyFrom(unk)
    proto.trainer_spec.pad_id, proto.trainer_spec.unk_id = 0, 1
    return proto.SerializeToString()


def our_state(theirs: dict, layers: tuple[int, int]) -> dict:
    """JoeyNMT's Transformer weights under our names, ``model.`` prefixed as the LightningModule saves them
    (:func:`joeynmt_decode.names` read backwards; JoeyNMT's tied output layer has no bias: ours gets zeros)."""
    theirs = {**theirs, "decoder.output_layer.bias": torch.zeros(len(theirs["decoder.output_layer.weight"]))}
    same, fused = names(layers)
    out = {mine: swap(theirs[their]) for mine, their in SWAPPED.items()}
    for mine, their in same.items():
        for p in ("weight", "bias"):
            out[f"{mine}.{p}"] = theirs[f"{their}.{p}"]
    for mine, key, value in fused:
        for p in ("weight", "bias"):
            out[f"{mine}.{p}"] = torch.cat([theirs[f"{key}.{p}"], theirs[f"{value}.{p}"]])
    return {f"model.{k}": v.contiguous() for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--joeynmt-ckpt", required=True)
    p.add_argument("--spm", required=True, help="the anchor's folder of fr.model and en.model")
    p.add_argument("--template", required=True, help="one of our checkpoints of the same sizes (its settings)")
    options(p, "data", "threads", "sentences")
    p.add_argument("--out", default="/tmp/joeynmt_as_ours.ckpt")
    options(p, "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    joey = torch.load(args.joeynmt_ckpt, map_location="cpu", weights_only=False)
    template = torch.load(args.template, map_location="cpu", weights_only=False)
    model_cfg = template["hyper_parameters"]["model"]
    layers = (model_cfg["encoder"]["num_layers"], model_cfg["decoder"]["num_layers"])
    spm = Path(args.spm)
    tok = {"src": our_ids((spm / "fr.model").read_bytes()), "tgt": our_ids((spm / "en.model").read_bytes())}
    ckpt = {
        "hyper_parameters": template["hyper_parameters"],
        "state_dict": our_state(joey["model_state"], layers),
        "global_step": joey.get("steps"),
        "nmt": checkpoint.nmt_section(tok),
    }
    checkpoint.write(args.out, ckpt)
    loaded = checkpoint.load_checkpoint(args.out)  # every weight checked against the settings
    test = read_tsv(args.data / "test.tsv")
    test = test.select(list(range(min(args.sentences or len(test), len(test)))))
    rows = []
    for beam in (1, 5):
        search = SearchOptions(beam_size=beam, alpha=0.0, max_len_a=1.5, max_len_b=0)
        translator = Translator(loaded.model, loaded.tokenizer, search, Batching(64, "sentences"))
        seconds, hyps = timed(translator, list(test.src))
        rows.append({
            "search": "greedy" if beam == 1 else "beam 5",
            "bleu": round(sacrebleu.corpus_bleu(hyps, [list(test.tgt)]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hyps, [list(test.tgt)]).score, 2),
            "decode_s": round(seconds, 1),
        })  # fmt: skip
        print(rows[-1], flush=True)
    steps = joey.get("steps") or int(re.findall(r"\d+", Path(args.joeynmt_ckpt).resolve().name)[0])
    write_json(args.json, {"joeynmt_ckpt": args.joeynmt_ckpt, "updates": steps, "rows": rows})


if __name__ == "__main__":
    main()
