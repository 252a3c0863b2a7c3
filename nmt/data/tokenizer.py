"""Sentencepiece subwords: training (cached), encoding, and models as bytes for checkpoints.

Special ids are the same in every model this project trains (``nmt.specials``):
``PAD=0``, ``UNK=1``, ``BOS=2``, ``EOS=3``.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import shutil
import zlib
from collections import defaultdict
from collections.abc import Sequence
from itertools import chain, count, repeat
from pathlib import Path
from typing import Annotated

import numpy as np
import sentencepiece as spm

from nmt.bounds import INT32, Choice, Range
from nmt.data import atomic
from nmt.specials import BOS, EOS, PAD, UNK

log = logging.getLogger(__name__)

MODEL_TYPES = ("bpe", "unigram")  # data.prepare.spm.model_type: the sentencepiece models data.sampling knows


class Tokenizer:
    """Source and target sentencepiece models (the same object twice when joint)."""

    def __init__(self, src_model: bytes, tgt_model: bytes):
        self.src_bytes, self.tgt_bytes = src_model, tgt_model
        self.src = spm.SentencePieceProcessor(model_proto=src_model)
        self.tgt = self.src if tgt_model == src_model else spm.SentencePieceProcessor(model_proto=tgt_model)
        for sp in (self.src, self.tgt):
            got = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
            if got != (PAD, UNK, BOS, EOS):
                raise ValueError(f"sentencepiece model has special ids {got}, expected {(PAD, UNK, BOS, EOS)}")
        self.src_by_words, self.tgt_by_words = word_local(src_model), word_local(tgt_model)

    def __deepcopy__(self, memo: dict) -> Tokenizer:
        return Tokenizer(self.src_bytes, self.tgt_bytes)  # the processors are C++ objects; their bytes are the model

    @property
    def joint(self) -> bool:
        return self.src is self.tgt

    @property
    def src_vocab_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self.tgt.get_piece_size()

    def encode_src(self, texts: Sequence[str], threads: int = -1) -> list[list[int]]:
        """Ids of French ``texts``; ``threads``: sentencepiece's threads (-1: one a core)."""
        return self.src.encode(list(texts), num_threads=threads)

    def encode_tgt(self, texts: Sequence[str], threads: int = -1) -> list[list[int]]:
        return self.tgt.encode(list(texts), num_threads=threads)

    def encode_src_flat(self, texts: Sequence[str], threads: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """The ids of ``encode_src``, end to end (int32), and each text's number of ids (int64)."""
        return encode_flat(self.src, texts, self.src_by_words, threads)

    def encode_tgt_flat(self, texts: Sequence[str], threads: int = -1) -> tuple[np.ndarray, np.ndarray]:
        return encode_flat(self.tgt, texts, self.tgt_by_words, threads)

    def decode_tgt(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return self.tgt.decode([[i for i in seq if i > EOS] for seq in ids])

    def src_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.src.id_to_piece(int(i)) for i in ids]

    def tgt_pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tgt.id_to_piece(int(i)) for i in ids]

    def output_labels(self, tokens: Sequence[int]) -> list[str]:
        """Labels of a hypothesis's attention rows: its pieces, then the end of sentence."""
        return [*self.tgt_pieces(tokens), "</s>"]

    def input_labels(self, tokens: Sequence[int]) -> list[str]:
        """Labels of the decoder's inputs for a hypothesis (the columns of its self-attention)."""
        return ["<s>", *self.tgt_pieces(tokens)]

    def state_dict(self) -> dict[str, bytes]:
        return {"src": self.src_bytes, "tgt": self.tgt_bytes}

    @classmethod
    def from_state_dict(cls, state: dict[str, bytes]) -> Tokenizer:
        return cls(state["src"], state["tgt"])

    @classmethod
    def load(cls, directory: str | Path) -> Tokenizer:
        d = Path(directory)
        return cls((d / "src.model").read_bytes(), (d / "tgt.model").read_bytes())

    def save(self, directory: str | Path) -> None:
        """Both models into ``directory``, each file written whole or not at all."""
        d = Path(directory)
        atomic.write_bytes(d / "src.model", self.src_bytes)
        atomic.write_bytes(d / "tgt.model", self.tgt_bytes)


def word_local(model: bytes) -> bool:
    """Whether a model encodes a text as it encodes its space-separated words, one by one, end to end.

    True of BPE models whose pieces never hold a word boundary (sentencepiece's default): BPE merges
    the best pair of neighbouring pieces that makes a known piece, so a word's merges never depend
    on its neighbours, and the normaliser rewrites a word alone as it does within its text. Not of
    unigram models: their best segmentation sums scores over the whole text, so near ties could
    fall differently.
    """
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError:  # protobuf missing: encode whole texts
        return False
    proto = pb.ModelProto.FromString(model)
    trainer, normalizer = proto.trainer_spec, proto.normalizer_spec
    return (
        trainer.model_type == pb.TrainerSpec.BPE
        and trainer.split_by_whitespace
        and not trainer.treat_whitespace_as_suffix
        and not trainer.allow_whitespace_only_pieces
        and not trainer.user_defined_symbols
        and normalizer.add_dummy_prefix
        and normalizer.remove_extra_whitespaces
        and normalizer.escape_whitespaces
    )


def encode_flat(
    sp: spm.SentencePieceProcessor, texts: Sequence[str], by_words: bool, threads: int = -1
) -> tuple[np.ndarray, np.ndarray]:
    """The ids of ``texts`` end to end (int32) and each text's number of ids (int64).

    With ``by_words`` (see :func:`word_local`) sentencepiece encodes each distinct word once and numpy
    lays the words' ids out per text: a block of text has far fewer distinct words than words, and no
    list of ids per text is made. That is how subword-nmt and GPT-2 apply BPE (a cache per word).
    """
    if not by_words or not texts:
        ids = sp.encode(list(texts), num_threads=threads)
        lens = np.fromiter(map(len, ids), np.int64, len(ids))
        return np.fromiter(chain.from_iterable(ids), np.int32, int(lens.sum())), lens
    words = " ".join(texts).split(" ")  # texts' words end to end; a text of k spaces has k + 1 words
    index = defaultdict(count().__next__)  # a new word gets the next number
    word = np.fromiter(map(index.__getitem__, words), np.int64, len(words))
    ids = sp.encode(list(index), num_threads=threads)
    word_lens = np.fromiter(map(len, ids), np.int64, len(ids))
    word_ids = np.fromiter(chain.from_iterable(ids), np.int32, int(word_lens.sum()))
    word_starts = np.cumsum(word_lens) - word_lens
    n = word_lens[word]  # ids per word of the texts
    ends = np.cumsum(n)
    flat = word_ids[np.repeat(word_starts[word] - (ends - n), n) + np.arange(int(ends[-1]))]  # [sum n]
    last_word = np.cumsum(np.fromiter(map(str.count, texts, repeat(" ")), np.int64, len(texts)) + 1) - 1
    return flat, np.diff(ends[last_word], prepend=0)


class SubwordSampler:
    """Subword regularisation (Kudo 2018; BPE-dropout for BPE models): re-segments encoded pairs at random.

    The ids are decoded to text and encoded again with sentencepiece sampling, so the stored corpus
    keeps its one best segmentation and every draw of a pair sees a new one. The draw is seeded by
    ``seed`` and the batch's pair indices: batches differ from epoch to epoch, and a resumed run
    sees the segmentations it would have seen.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        alpha: Annotated[float, Range(0, 1)],
        nbest_size: Annotated[int, Range(-1, INT32, integer=True)],
        seed: int,
    ):
        self.tokenizer, self.alpha, self.nbest_size, self.seed = tokenizer, alpha, nbest_size, seed

    def __call__(
        self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], indices: np.ndarray
    ) -> tuple[list[list[int]], list[list[int]]]:
        """New segmentations of the pairs ``indices`` whose ids are ``src`` and ``tgt``."""
        spm.set_random_generator_seed(zlib.crc32(np.asarray(indices, dtype=np.int64).tobytes(), self.seed))
        out = []
        for sp, ids in ((self.tokenizer.src, src), (self.tokenizer.tgt, tgt)):
            texts = sp.decode([[int(i) for i in seq] for seq in ids])
            out.append(  # one thread: threads would draw from their own generators, unseeded
                sp.encode(texts, enable_sampling=True, alpha=self.alpha, nbest_size=self.nbest_size, num_threads=1)
            )
        return out[0], out[1]

    def __getstate__(self) -> dict:  # DataLoader workers get a copy: send the models' bytes
        return {**self.__dict__, "tokenizer": self.tokenizer.state_dict()}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, tokenizer=Tokenizer.from_state_dict(state["tokenizer"]))


# sentencepiece's error for a vocabulary smaller than the characters it must keep: "... 8 vs 23. Increase ..."
_TOO_SMALL = re.compile(r"Vocabulary size is smaller than required_chars\. \d+ vs (\d+)\.")


def train_model(texts: Sequence[str], model_type: str, vocab_size: int, character_coverage: float, seed: int) -> bytes:
    """One sentencepiece model trained on ``texts``, returned as bytes."""
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        model_type=model_type,
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        hard_vocab_limit=False,  # a small corpus gets a smaller vocabulary rather than an error
        input_sentence_size=2_000_000,
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
    )
    got = spm.SentencePieceProcessor(model_proto=model.getvalue()).get_piece_size()
    if got < vocab_size:
        log.info("sentencepiece: %s pieces, not the %s of data.prepare.spm.vocab_size: all this corpus gives",
                 f"{got:,}", f"{vocab_size:,}")  # fmt: skip
    return model.getvalue()


def train_tokenizer(
    src: Sequence[str],
    tgt: Sequence[str],
    cache_dir: str | Path,
    model_type: Annotated[str, Choice(MODEL_TYPES)] = "unigram",
    vocab_size: Annotated[int, Range(8, 2**20, integer=True)] = 8000,  # 1M pieces: 4x the largest NMT vocabularies
    joint: bool = False,
    character_coverage: Annotated[float, Range(0, 1, lo_open=True)] = 1.0,
    seed: int = 1,
) -> Tokenizer:
    """Train (or reuse from ``cache_dir``) the models; the cache key hashes texts and settings."""
    settings = dict(model_type=model_type, vocab_size=vocab_size, joint=joint, coverage=character_coverage, seed=seed)
    h = hashlib.sha1(json.dumps(settings, sort_keys=True).encode())
    for side in (src, tgt):
        for line in side:
            h.update(line.encode())
            h.update(b"\n")
        h.update(b"\0")
    directory = Path(cache_dir) / h.hexdigest()[:16]
    if directory.is_dir():  # complete: the folder is renamed into place only once both models are in it
        try:
            tok = Tokenizer.load(directory)
            log.info("reusing sentencepiece models in %s", directory)
            return tok
        except Exception:  # noqa: BLE001 - damaged (sentencepiece raises its own errors): trained again below
            log.warning("%s: damaged sentencepiece models; training them again", directory)
            shutil.rmtree(directory, ignore_errors=True)
    log.info(
        "training sentencepiece (%s, %d pieces, %s) into %s",
        model_type,
        vocab_size,
        "joint" if joint else "separate",
        directory,
    )
    sides = [[*src, *tgt]] if joint else [src, tgt]
    models, needs = [], []
    for texts in sides:  # each side tried, so that a vocabulary too small for either names what both need
        try:
            models.append(train_model(texts, model_type, vocab_size, character_coverage, seed))
        except RuntimeError as e:
            if (need := _TOO_SMALL.search(str(e))) is None:
                raise
            needs.append(int(need.group(1)))
    if needs:
        raise ValueError(
            f"data.prepare.spm.vocab_size={vocab_size}: too small for this corpus, whose characters and the 4 special "
            f"pieces need {max(needs)}; add data.prepare.spm.vocab_size={max(needs)} or more (or a lower "
            "data.prepare.spm.character_coverage)"
        )
    tok = Tokenizer(models[0], models[-1])
    atomic.remove_leftovers(directory.parent, directory.name)
    with atomic.folder(directory) as tmp:
        tok.save(tmp)
        (tmp / "settings.json").write_text(json.dumps(settings, indent=1))
    return tok
