"""Greedy and batched beam search over the one-step API (``Seq2Seq.encode`` / ``step``).

Both work on a batch of sentences at once and drop finished sentences from the batch as
they go; nothing loops over sentences in Python. Each result carries the attention rows
of the hypothesis that was output, so heatmaps show what was actually generated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Protocol

import torch
from torch import Tensor

from nmt.bounds import Range
from nmt.models.attention import AttentionLayout
from nmt.specials import BOS, EOS, PAD

State = dict[str, Tensor]


class Decodable(Protocol):
    """What search needs from a model (``Seq2Seq`` and ``Ensemble`` have it): attention rows are
    ``(B, layers, heads, S)``, teacher-forced attention ``(layers, heads, T, S)``."""

    attention_layout: AttentionLayout  # what attention rows and choices have: (layers, heads)
    position_limit: int | None  # the longest sequence it takes (learned positions), None for any

    def encode(self, src: Tensor, src_len: Tensor) -> State: ...

    def step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]: ...

    def reorder_state(self, state: State, index: Tensor) -> State: ...

    def read(self, src: Tensor, src_len: Tensor, tokens: list[int]) -> tuple[Tensor, Tensor, Tensor | None]: ...


@dataclass(frozen=True)
class SearchOptions:
    """How to search; the one home of these defaults (``translate.py``, ``Translator``, ``decoding`` in ``conf/``)."""

    # 1: greedy search; the beam's hypotheses are a batch each step: 128 is far past where wider beams stop scoring
    # better (and BLEU drops)
    beam_size: Annotated[int, Range(1, 128, integer=True)] = 5
    # GNMT length penalty, 0 for none: useful at 0-2; at 10 a long output's penalty nears float32's largest value
    alpha: Annotated[float, Range(0, 10)] = 0.6
    # output budget: a * source length + b tokens, EOS included (no translation is 10x its source; b at most the
    # positions a model learns)
    max_len_a: Annotated[float, Range(0, 10)] = 1.5
    max_len_b: Annotated[int, Range(0, 1024, integer=True)] = 10
    nbest: Annotated[int, Range(1, 128, integer=True)] = 1  # hypotheses returned per sentence, best first

    def __post_init__(self):
        for name in ("alpha", "max_len_a"):  # an infinite budget overflows to none; an infinite penalty zeroes scores
            if not math.isfinite(value := getattr(self, name)):
                raise ValueError(f"{name}={value!r}: must be a finite number")
        self.check(self.beam_size, self.nbest)

    @staticmethod
    def check(beam_size: int, nbest: int, name: Callable[[str], str] = str) -> None:
        """Raise a ValueError unless the n-best fits the beam, naming the fields by ``name`` (a key or an option)."""
        if nbest > beam_size:
            raise ValueError(f"{name('nbest')}={nbest}: must be at most {name('beam_size')} ({beam_size})")


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    score: float  # log-probability divided by the length penalty
    attention: Tensor  # (layers, heads, len(tokens) + 1, src_len): a row per output token and EOS


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT length penalty ``((5 + |Y|) / 6) ** alpha`` (Wu et al., 2016)."""
    return ((5 + length) / 6) ** alpha


def max_lengths(src_len: Tensor, a: float, b: int) -> Tensor:
    """Output budget ``a * src_len + b`` tokens per sentence, EOS included."""
    return (a * src_len.float() + b).long().clamp(min=1)


@torch.inference_mode()
def beam_search(model: Decodable, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
    """Up to ``nbest`` best hypotheses per sentence, best first. ``beam_size=1`` is greedy search.

    Only real hypotheses come out: when fewer than ``nbest`` can finish within the length budget
    (a budget of one token leaves only EOS), fewer are returned.

    At each step the ``2K`` best continuations are taken; those ending in EOS among the top
    ``K`` join the sentence's finished list (kept aside, ``K`` best by normalised score) and
    the ``K`` best others stay alive. A sentence is done when ``K`` hypotheses finished, when
    no live hypothesis can still enter its ``nbest`` best (its score can only fall, and the
    length penalty is bounded by the length budget), or when its budget is spent (then EOS is
    forced). A sentence starts with one live hypothesis, so the first step runs one row per
    sentence, not ``K``.

    A step appends what it chose (tokens, attention rows, the beam each came from) to a :class:`_Trail`, and the
    hypotheses are read back from it at the end: a step costs the same however long the output already is.
    """
    K, nbest, alpha = options.beam_size, options.nbest, options.alpha
    (B, S), device = src.shape, src.device
    budget = max_lengths(src_len, options.max_len_a, options.max_len_b)  # (B,)
    T, state = int(budget.max()), model.encode(src, src_len)
    lp_max = length_penalty(budget.float(), alpha).clamp(min=1.0)  # the largest over lengths 1..budget (lp(1) = 1)
    active = torch.arange(B, device=device)  # sentence of each row of the shrinking batch
    scores = torch.zeros(B, 1, device=device)  # (n, beams alive): one to start with, then K
    prev = torch.full((B,), BOS, dtype=torch.long, device=device)
    trail = _Trail()

    for t in range(T):
        n, width = scores.shape
        logp, state, row = model.step(state, prev)
        if t == 0:  # attention rows (B, layers, heads, S), kept flat as A numbers per step
            heads, A = row.shape[1:-1], row[0].numel()
            finished = _Finished(B, K, A, device)
        at_limit = t + 1 >= budget[active]  # (n,) force EOS
        logp = _allowed(logp.view(n, width, -1), at_limit, K)
        row = row.float().reshape(n, width, A)

        top_s, origin, tok, c_row = _candidates(logp, scores, row, K)

        # finished: EOS candidates among the top K join the kept-aside K best
        is_eos = tok == EOS
        eos_s = torch.where(is_eos, top_s / length_penalty(t + 1, alpha), float("-inf"))
        eos_s[:, K:] = float("-inf")  # candidates 0..2K-1 come best first
        finished.add(active, eos_s, origin, c_row, t)

        # alive: the K best candidates that did not end
        alive_s, sel = torch.where(is_eos, float("-inf"), top_s).topk(K, dim=1)  # (n, K)
        scores, parent, tok = alive_s, origin.gather(1, sel), tok.gather(1, sel)
        trail.append(active, tok, parent, c_row.gather(1, sel.unsqueeze(-1).expand(n, K, A)))
        prev = tok.view(-1)

        # an alive hypothesis of raw score s (<= 0) can at best end with s / (largest length penalty)
        hopeless = alive_s[:, 0] / lp_max[active] < finished.scores[active, nbest - 1]
        keep = (~(at_limit | (finished.scores[active] > float("-inf")).all(1) | hopeless)).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        active, scores = active[keep], scores[keep]
        prev = prev.view(n, K)[keep].view(-1)
        state = model.reorder_state(state, (keep.unsqueeze(1) * width + parent[keep]).view(-1))  # live rows
    return finished.hypotheses(trail, nbest, src_len.tolist(), heads, S)


def _candidates(logp: Tensor, scores: Tensor, row: Tensor, K: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The ``2K`` best continuations of each sentence: their raw scores, origin beams and tokens ``(n, 2K)``, and
    the attention rows ``(n, 2K, A)`` of the steps that made them."""
    n, width, _ = logp.shape
    # the 2K best continuations overall are among each beam's 2K best tokens
    beam_lp, beam_tok = logp.topk(2 * K, dim=-1)  # (n, width, 2K)
    top_s, top_i = (scores.unsqueeze(-1) + beam_lp).view(n, width * 2 * K).topk(2 * K, dim=1)  # (n, 2K)
    origin, tok = top_i // (2 * K), beam_tok.view(n, -1).gather(1, top_i)
    return top_s, origin, tok, row.gather(1, origin.unsqueeze(-1).expand(n, 2 * K, row.shape[-1]))


def _allowed(logp: Tensor, at_limit: Tensor, K: int) -> Tensor:
    """``logp (n, width, V)`` with PAD and BOS never chosen, and only EOS for sentences ``at_limit`` (n,)."""
    if 2 * K > logp.shape[-1]:
        raise ValueError(f"beam size {K} is too large for a vocabulary of {logp.shape[-1]}")
    logp[..., PAD] = float("-inf")
    logp[..., BOS] = float("-inf")
    if at_limit.any():
        forced = torch.full_like(logp[at_limit], float("-inf"))
        forced[..., EOS] = logp[at_limit][..., EOS]
        logp[at_limit] = forced
    return logp


class _Trail:
    """What every step of beam search kept alive, step by step: the sentences then in the batch ``(n,)``, and per
    live beam ``(n, K)`` its token, the beam of the step before it came from, and its attention row ``(n, K, A)``.
    Appending costs the same at every step; a hypothesis is read back by following the beams it came from."""

    def __init__(self):
        self.active: list[Tensor] = []
        self.tokens: list[Tensor] = []
        self.parents: list[Tensor] = []
        self.rows: list[Tensor] = []

    def append(self, active: Tensor, tokens: Tensor, parents: Tensor, rows: Tensor) -> None:
        self.active.append(active)
        self.tokens.append(tokens)
        self.parents.append(parents)
        self.rows.append(rows)

    def paths(self, ends: list[tuple[int, int, int]]) -> tuple[list[list[int]], list[Tensor]]:
        """For hypotheses that ended at step ``t`` of sentence ``b`` coming from beam ``k`` of step ``t - 1``
        (``(b, t, k)`` each): their tokens before that step, and their rows ``(t, A)`` of those steps."""
        if not ends:
            return [], []
        steps = max(t for _, t, _ in ends)
        K = self.tokens[0].shape[1]
        # on the CPU, once: every step's rows flat, and where each sentence sat in each step's batch
        offsets, position = [0], []
        for active in self.active[:steps]:
            offsets.append(offsets[-1] + len(active) * K)
            position.append({b: i for i, b in enumerate(active.tolist())})
        tokens = [t.tolist() for t in self.tokens[:steps]]
        parents = [p.tolist() for p in self.parents[:steps]]
        flat = torch.cat([r.flatten(0, 1) for r in self.rows[:steps]]) if steps else None
        out_tokens, out_rows = [], []
        for b, t, k in ends:
            path, picks = [], []
            for s in range(t - 1, -1, -1):  # back from the step before the end to the first
                i = position[s][b]
                path.append(tokens[s][i][k])
                picks.append(offsets[s] + i * K + k)
                k = parents[s][i][k]
            out_tokens.append(path[::-1])
            out_rows.append(flat[torch.tensor(picks[::-1], dtype=torch.long, device=flat.device)] if picks else None)
        return out_tokens, out_rows


class _Finished:
    """The ``K`` best finished hypotheses of every sentence: normalised scores, the step each ended at (its EOS),
    the beam of the step before it came from, and its last attention row (the EOS's)."""

    def __init__(self, B: int, K: int, A: int, device: torch.device):
        self.K, self.A = K, A
        self.scores = torch.full((B, K), float("-inf"), device=device)
        self.steps = torch.zeros(B, K, dtype=torch.long, device=device)
        self.origins = torch.zeros(B, K, dtype=torch.long, device=device)
        self.last = torch.zeros(B, K, A, device=device)

    def add(self, active: Tensor, scores: Tensor, origins: Tensor, rows: Tensor, step: int) -> None:
        """Candidates of the ``active`` sentences at ``step`` (``scores`` (n, C), -inf where not finished; the beams
        they came from ``(n, C)`` and their rows ``(n, C, A)``) join the K best."""
        n, K, A = len(active), self.K, self.A
        merged, pick = torch.cat([self.scores[active], scores], 1).topk(K, dim=1)  # (n, K)
        steps = torch.cat([self.steps[active], torch.full_like(origins, step)], 1)
        self.steps[active] = steps.gather(1, pick)
        self.origins[active] = torch.cat([self.origins[active], origins], 1).gather(1, pick)
        self.last[active] = torch.cat([self.last[active], rows], 1).gather(1, pick[..., None].expand(n, K, A))
        self.scores[active] = merged

    def hypotheses(
        self, trail: _Trail, nbest: int, src_lens: list[int], heads: torch.Size, S: int
    ) -> list[list[Hypothesis]]:
        """Up to ``nbest`` per sentence, best first; only real ones (fewer than ``nbest`` may have finished)."""
        real = (self.scores[:, :nbest] > float("-inf")).sum(1).tolist()
        steps, origins, scores = self.steps.tolist(), self.origins.tolist(), self.scores.tolist()
        ends = [(b, steps[b][k], origins[b][k]) for b in range(len(real)) for k in range(real[b])]
        tokens, rows = trail.paths(ends)
        out: list[list[Hypothesis]] = [[] for _ in real]
        for (b, _, _), toks, before, k in zip(ends, tokens, rows, (k for r in real for k in range(r))):
            last = self.last[b, k].unsqueeze(0)  # the EOS's row
            flat = last if before is None else torch.cat([before, last])  # (len(toks) + 1, A)
            out[b].append(Hypothesis(toks, scores[b][k], _rows(flat, heads, S, src_lens[b])))
        return out


@torch.inference_mode()
def greedy_search(model: Decodable, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[Hypothesis]:
    """Most probable token at every step; finished sentences leave the batch. Uses the budget and length penalty."""
    B, S = src.shape
    device = src.device
    budget = max_lengths(src_len, options.max_len_a, options.max_len_b)
    T = int(budget.max())
    state = model.encode(src, src_len)
    active = torch.arange(B, device=device)
    prev = torch.full((B,), BOS, dtype=torch.long, device=device)
    tokens = torch.full((B, T), PAD, dtype=torch.long, device=device)
    logp_sum = torch.zeros(B, device=device)
    lengths = torch.zeros(B, dtype=torch.long, device=device)
    for t in range(T):
        logp, state, row = model.step(state, prev)
        if t == 0:
            heads, A = row.shape[1:-1], row[0].numel()
            attn = torch.zeros(B, T, A, device=device)
        logp[:, PAD] = float("-inf")
        logp[:, BOS] = float("-inf")
        at_limit = t + 1 >= budget[active]
        best_lp, tok = logp.max(dim=-1)
        tok = torch.where(at_limit, EOS, tok)
        best_lp = torch.where(at_limit, logp[:, EOS], best_lp)
        tokens[active, t] = tok
        attn[active, t] = row.float().reshape(len(active), A)
        logp_sum[active] += best_lp
        done = tok == EOS
        lengths[active[done]] = t + 1
        if not done.any():  # every row goes on: the state stays as it is
            prev = tok
            continue
        keep = (~done).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        active, prev = active[keep], tok[keep]
        state = model.reorder_state(state, keep)
    lens = src_len.tolist()
    scores = (logp_sum / length_penalty(lengths, options.alpha)).tolist()
    return [
        Hypothesis(
            tokens[b, : int(lengths[b]) - 1].tolist(), scores[b], _rows(attn[b, : int(lengths[b])], heads, S, lens[b])
        )
        for b in range(B)
    ]


def _rows(flat: Tensor, heads: torch.Size, S: int, src_len: int) -> Tensor:
    """A hypothesis's attention history ``(T, A)`` -> ``(layers, heads, T, src_len)`` on the CPU."""
    return flat.view(len(flat), *heads, S)[..., :src_len].movedim(0, -2).cpu()


def translate_batch(model: Decodable, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
    """Greedy search for ``beam_size=1``, else beam search."""
    if options.beam_size == 1:
        return [[h] for h in greedy_search(model, src, src_len, options)]
    return beam_search(model, src, src_len, options)
