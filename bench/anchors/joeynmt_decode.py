"""Decoding speed of the same Transformer in JoeyNMT and here, for ``bench/serving/engine.py --joeynmt-venv`` (a
library, not a script): our checkpoint's weights converted into a JoeyNMT 2.3 Transformer, the Tatoeba test split
decoded by each in turn (greedy and beam 5), at the same threads.

Both models are pre-norm with interleaved sinusoidal positions, √d-scaled embeddings and the target embedding
tied to the output layer, so the weights map one to one (JoeyNMT's vocabulary puts <unk> before <pad>: those
two rows swap). Ours has a bias on the output layer, which JoeyNMT's tied output layer lacks, and reads sources
without an end-of-sentence token, which JoeyNMT appends: the JoeyNMT side gets the bias added to its output layer
and its sources encoded without <eos> (patches of its model and data, not of its search). Then the two models
are the same function (up to LayerNorm's epsilon, 1e-6 there, 1e-5 here), so the comparison is of the decoding
alone: JoeyNMT re-runs the whole prefix at every step, ours keeps a key/value cache.

Decoding settings are JoeyNMT's anchor ones on both sides: batches of 64 sentences, no length penalty, an
output budget of 1.5 x the source. JoeyNMT's figure is its own "Generation took" time (model loading
excluded); ours is ``Translator.translate`` on the same sentences. The share of identical translations and
each side's BLEU show that the two decode the same model.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

import sacrebleu
import torch
import yaml

from bench.common import timed
from nmt import checkpoint
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Batching, Translator

# run inside JoeyNMT's environment: its built model gets our output bias and its sources no <eos> (ours were trained
# without one), then `joeynmt test` runs unchanged
PATCH = """
import sys, torch, joeynmt.prediction as p, joeynmt.vocabulary as v
from joeynmt.__main__ import main
ids = v.Vocabulary.sentences_to_ids
def no_source_eos(self, sentences, bos=True, eos=True):  # sources are encoded with bos=False: our model reads none
    return ids(self, sentences, bos=bos, eos=eos and bos)
v.Vocabulary.sentences_to_ids = no_source_eos
build = p.build_model
def with_bias(*args, **kwargs):
    model = build(*args, **kwargs)
    old = model.decoder.output_layer
    new = torch.nn.Linear(old.in_features, old.out_features, bias=True)
    new.weight = old.weight  # still tied to the target embedding
    model.decoder.output_layer = new
    return model
p.build_model = with_bias
sys.argv = ["joeynmt", *sys.argv[1:]]
main()
"""


def names(layers: tuple[int, int]) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    """How our weights map to JoeyNMT's: one to one (ours -> theirs, ``.weight``/``.bias`` left off), and our fused
    key/value projections -> JoeyNMT's separate key and value layers. Embedding and output rows also swap
    (:func:`swap`). Both directions of the conversion use this one table."""
    same = {"encoder.final_norm": "encoder.layer_norm", "decoder.readout": "decoder.layer_norm"}
    fused = []

    def attention(mine: str, theirs: str) -> None:
        same.update({f"{mine}.q_proj": f"{theirs}.q_layer", f"{mine}.out_proj": f"{theirs}.output_layer"})
        fused.append((f"{mine}.kv_proj", f"{theirs}.k_layer", f"{theirs}.v_layer"))

    def feed_forward(mine: str, theirs: str) -> None:
        same.update({f"{mine}.ff.{i}": f"{theirs}.feed_forward.pwff_layer.{i}" for i in (0, 3)})
        same[f"{mine}.sub_ff.norm"] = f"{theirs}.feed_forward.layer_norm"

    for i in range(layers[0]):
        m = t = f"encoder.layers.{i}"
        attention(f"{m}.self_attn", f"{t}.src_src_att")
        same[f"{m}.sub_attn.norm"] = f"{t}.layer_norm"
        feed_forward(m, t)
    for i in range(layers[1]):
        m = t = f"decoder.layers.{i}"
        attention(f"{m}.self_attn", f"{t}.trg_trg_att")
        attention(f"{m}.cross_attn", f"{t}.src_trg_att")
        same.update({f"{m}.sub_self.norm": f"{t}.x_layer_norm", f"{m}.sub_cross.norm": f"{t}.dec_layer_norm"})
        feed_forward(m, t)
    return same, fused


# rows indexed by target or source ids: ours put <pad> at 0 and <unk> at 1, JoeyNMT the other way round
SWAPPED = {
    "encoder.embed.embedding.weight": "src_embed.lut.weight",
    "decoder.embed.embedding.weight": "trg_embed.lut.weight",
    "output.weight": "decoder.output_layer.weight",
    "output.bias": "decoder.output_layer.bias",
}


def swap(w: torch.Tensor) -> torch.Tensor:
    return w[[1, 0, *range(2, len(w))]].clone()


def joeynmt_state(ours: dict, layers: tuple[int, int]) -> dict:
    """Our ``Seq2Seq`` weights (``model.`` prefixed) under JoeyNMT's names."""
    sd = {k.removeprefix("model."): v for k, v in ours.items()}
    same, fused = names(layers)
    out = {theirs: swap(sd[mine]) for mine, theirs in SWAPPED.items()}
    for mine, theirs in same.items():
        for p in ("weight", "bias"):
            out[f"{theirs}.{p}"] = sd[f"{mine}.{p}"]
    for mine, key, value in fused:
        for p in ("weight", "bias"):  # keys first, as our projection's output splits
            out[f"{key}.{p}"], out[f"{value}.{p}"] = sd[f"{mine}.{p}"].chunk(2)
    out["encoder.pe.pe"] = out["decoder.pe.pe"] = positions(out["src_embed.lut.weight"].shape[1])
    return {k: v.contiguous() for k, v in out.items()}


def positions(d: int, max_len: int = 5000) -> torch.Tensor:
    """JoeyNMT's sinusoidal table (a saved buffer there), ``(1, max_len, d)``: sines at even, cosines at odd."""
    pos = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
    freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float) * -(math.log(10000.0) / d))
    table = torch.zeros(max_len, d)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return table.unsqueeze(0)


def prepare(loaded: checkpoint.Loaded, test, work: Path, anchor: Path) -> tuple[Path, Path]:
    """JoeyNMT's config (from the anchor's transformer.yaml, in the folder ``anchor``), checkpoint, sentencepiece
    models, vocabularies and test files in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    model_cfg = loaded.checkpoint.model_settings
    layers = (model_cfg["encoder"]["num_layers"], model_cfg["decoder"]["num_layers"])
    cfg = yaml.safe_load((anchor / "transformer.yaml").read_text().replace("ANCHOR_WORK", str(work)))
    for side, lang, key, pieces in (
        ("src", "fr", "src", loaded.tokenizer.src),
        ("trg", "en", "tgt", loaded.tokenizer.tgt),
    ):
        (work / f"{lang}.model").write_bytes(loaded.checkpoint.tokenizer_state[key])
        vocab = [pieces.id_to_piece(i) for i in range(pieces.get_piece_size())]
        (work / f"{lang}.vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
        cfg["data"][side]["voc_file"] = str(work / f"{lang}.vocab.txt")
        cfg["data"][side]["tokenizer_cfg"]["model_file"] = str(work / f"{lang}.model")
    cfg["model_dir"] = str(work / "model")
    (work / "model").mkdir(exist_ok=True)
    for part, n in zip(("encoder", "decoder"), layers):
        cfg["model"][part]["num_layers"] = n
    cfg["data"].pop("train"), cfg["data"].pop("dev")
    cfg["data"]["test"] = str(work / "test")
    (work / "test.fr").write_text("\n".join(test.src) + "\n", encoding="utf-8")
    (work / "test.en").write_text("\n".join(test.tgt) + "\n", encoding="utf-8")
    ckpt = work / "converted.ckpt"
    torch.save({"model_state": joeynmt_state(loaded.checkpoint.weights, layers), "steps": 0}, ckpt)
    cfg["testing"]["load_model"] = str(ckpt)
    cfg_path = work / "config.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    (work / "patch.py").write_text(PATCH)
    return cfg_path, ckpt


def joeynmt(venv: str, work: Path, cfg_path: Path, beam: int, threads: int) -> tuple[float, list[str]]:
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["testing"]["beam_size"] = beam
    path = work / f"beam{beam}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [f"{venv}/bin/python", str(work / "patch.py"), "test", str(path), "--output-path", str(work / f"hyp{beam}")]
    log = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, check=True).stderr
    generation = float(re.findall(r"Generation took ([0-9.]+)\[sec\]", log)[-1])
    return generation, (work / f"hyp{beam}.test").read_text(encoding="utf-8").splitlines()


def ours(loaded: checkpoint.Loaded, sentences: list[str], beam: int) -> tuple[float, list[str]]:
    search = SearchOptions(beam_size=beam, alpha=0.0, max_len_a=1.5, max_len_b=0)
    return timed(Translator(loaded.model, loaded.tokenizer, search, Batching(64, "sentences")), sentences)


def side_by_side(
    loaded: checkpoint.Loaded, test, venv: str, work: Path, anchor: Path, threads: list[int]
) -> list[dict]:
    """JoeyNMT and ours decoding ``loaded``'s weights on ``test``, greedy and beam 5 at each thread count, in turn:
    sentences/s, BLEU, the speed-up and the share of identical translations, a row each."""
    cfg_path, _ = prepare(loaded, test, work, anchor)
    rows = []
    for beam in (1, 5):
        for n in threads:
            theirs_s, theirs = joeynmt(venv, work, cfg_path, beam, n)
            torch.set_num_threads(n)
            mine_s, mine = ours(loaded, list(test.src), beam)
            row = {"search": "greedy" if beam == 1 else "beam 5", "threads": n, "sentences": len(mine)}
            for name, seconds, hyps in (("joeynmt", theirs_s, theirs), ("ours", mine_s, mine)):
                row[f"{name}_sentences_per_s"] = round(len(hyps) / seconds, 1)
                row[f"{name}_bleu"] = round(sacrebleu.corpus_bleu(hyps, [list(test.tgt)]).score, 2)
            row["speedup"] = round(row["ours_sentences_per_s"] / row["joeynmt_sentences_per_s"], 2)
            row["identical_translations"] = round(sum(a == b for a, b in zip(theirs, mine)) / len(mine), 3)
            rows.append(row)
            print(row, flush=True)
    return rows
