"""Pass 1 of preparation: a uniform sample of the training pairs for sentencepiece, drawn while streaming.

The sample is the pairs of smallest key (a hash of the input, line number and seed: the same
sample whatever the block size or the number of processes). The reading process keeps only the
raw lines whose key may still make the sample; ``num_proc`` processes parse those few (a bad one
stops here already), split off valid/test and drop pairs with an empty side.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator

import numpy as np

from nmt.data.batching import mix64
from nmt.data.parallel import in_order
from nmt.data.readers import Block, Pairs
from nmt.data.rules import Rules
from nmt.data.sources import Stream, input_bytes
from nmt.progress import Progress

log = logging.getLogger(__name__)


def sample_keys(stream: int, linenos: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random 64-bit key per (seed, input, line) (splitmix64): the sample takes the smallest keys."""
    with np.errstate(over="ignore"):
        return mix64(np.asarray(linenos, np.uint64) + np.uint64(((seed * 1_000_003 + stream) << 40) % 2**64))


def _check_drawn(job: tuple[int, Stream, Block, Rules]) -> tuple[np.ndarray, list[str], list[str]]:
    """Parse drawn lines: the positions (in the block) and text of those that are usable training pairs."""
    index, stream, block, rules = job
    pairs, linenos, where = stream.read(block, stream.skips(rules.on_bad_line), rules)  # errors stop here
    usable = [i for i, (w, s, t) in enumerate(zip(where, pairs.src, pairs.tgt)) if w == "train" and s and t]
    position = {n: i for i, n in enumerate(block.numbers())}
    return (
        np.array([position[linenos[i]] for i in usable], np.int64),
        [pairs.src[i] for i in usable],
        [pairs.tgt[i] for i in usable],
    )


class _Draw:
    """The ``size`` lines of smallest sample key seen so far, raw, in input order (pass 1 keeps only these).

    Per line: its key, input and line number, and its raw bytes (a target line too for parallel files; b""
    for TSV lines), in arrays that blocks append to and :meth:`_keep` trims to ``size`` from time to time.
    """

    def __init__(self, size: int, seed: int):
        self.size, self.seed, self.lines_read, self.held = size, seed, 0, 0
        self.parts: list[tuple[np.ndarray, ...]] = []  # per block: its drawn lines' fields
        self.limit = np.uint64(2**64 - 1)

    def add(self, index: int, block: Block) -> None:
        self.lines_read += block.lines
        numbers = np.arange(block.first, block.first + block.lines)
        keys = sample_keys(index, numbers, self.seed)
        pick = np.flatnonzero(keys < self.limit)
        if not len(pick):
            return
        src = _objects(block.src_lines(pick))
        tgt = _objects(block.tgt_lines(pick)) if block.tgt is not None else np.full(len(pick), b"", object)
        self.parts.append((keys[pick], np.full(len(pick), index, np.int32), numbers[pick], src, tgt))
        self.held += len(pick)
        if self.held > 1.5 * self.size:
            self._keep()

    def _keep(self) -> None:
        """Only the ``size`` lines of smallest key, in input order."""
        keys, *rest = (np.concatenate(field) for field in zip(*self.parts))
        pick = np.sort(np.argpartition(keys, self.size)[: self.size]) if len(keys) > self.size else slice(None)
        self.parts = [(keys[pick], *(field[pick] for field in rest))]
        self.held, self.limit = len(self.parts[0][0]), self.parts[0][0].max()

    def blocks(self, streams: list[Stream], block_lines: int) -> Iterator[tuple[int, int, Block]]:
        """(input, first row, block): the drawn lines in blocks of at most ``block_lines`` lines of one input."""
        if not self.parts:
            return
        self._keep()
        self.keys, self.inputs, self.linenos, src, tgt = self.parts[0]
        for index in np.unique(self.inputs).tolist():
            rows = np.flatnonzero(self.inputs == index)  # contiguous: inputs are read one after the other
            for start in range(int(rows[0]), int(rows[-1]) + 1, block_lines):
                end = min(start + block_lines, int(rows[-1]) + 1)
                tgt_text = None if streams[index].path else b"\n".join(tgt[start:end])
                linenos = self.linenos[start:end].tolist()
                yield index, start, Block(linenos[0], end - start, b"\n".join(src[start:end]), tgt_text, linenos)


def _objects(items: list) -> np.ndarray:
    out = np.empty(len(items), object)
    out[:] = items
    return out


def _usable(
    streams: list[Stream], rules: Rules, block_lines: int, num_proc: int, size: int
) -> tuple[np.ndarray, list[str], list[str], int]:
    """Draw the ``size`` lines of smallest key, parse them: the usable pairs' keys and text, and the lines read."""
    draw = _Draw(size, rules.seed)
    with Progress(input_bytes(streams), "sampling") as progress:
        for index, stream in enumerate(streams):
            for block in stream.blocks(block_lines):
                draw.add(index, block)
                progress.update(block.nbytes, block.lines)
    starts: deque = deque()  # each block's first row, filled as the pool takes the blocks

    def jobs() -> Iterator[tuple[int, Stream, Block, Rules]]:
        for index, start, block in draw.blocks(streams, block_lines):
            starts.append(start)
            yield index, streams[index], block, rules

    keys, src, tgt = [np.zeros(0, np.uint64)], [], []
    for picked, s, t in in_order(_check_drawn, jobs(), num_proc):
        keys.append(draw.keys[starts.popleft() + picked])
        src += s
        tgt += t
    return np.concatenate(keys), src, tgt, draw.lines_read


def draw_sample(streams: list[Stream], rules: Rules, block_lines: int, num_proc: int) -> Pairs:
    """Pass 1: the sentencepiece sample, the ``rules.sample`` usable training pairs of smallest key.

    Keys depend on the input and line number only, so this pass keeps the raw lines of smallest key
    (a few more than the sample, for those that land in valid/test or have an empty side) and parses
    only those. Should too few of them be usable, it draws twice as many and reads the inputs again.
    """
    held_out = rules.valid + rules.test if any(s.split is None for s in streams) else 0.0
    size = int(rules.sample / max(1.0 - held_out, 0.01) * 1.02) + 1000
    while True:
        keys, src, tgt, lines_read = _usable(streams, rules, block_lines, num_proc, size)
        if len(src) >= rules.sample or size >= lines_read:
            break
        size *= 2
    pick = np.sort(np.argpartition(keys, rules.sample)[: rules.sample]) if len(keys) > rules.sample else range(len(src))
    return Pairs([src[i] for i in pick], [tgt[i] for i in pick])
