"""Greedy and batched beam search over the one-step API (``Seq2Seq.encode`` / ``step``).

Both work on a batch of sentences at once and drop finished sentences from the batch as
they go; nothing loops over sentences in Python. Each result carries the attention rows
of the hypothesis that was output, so heatmaps show what was actually generated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .seq2seq import Seq2Seq
from .specials import BOS, EOS, PAD


@dataclass(frozen=True)
class SearchOptions:
    """How to search; the one home of these defaults (``translate.py``, ``Translator``, ``decoding`` in ``conf/``)."""

    beam_size: int = 5  # 1: greedy search
    alpha: float = 0.6  # GNMT length penalty; 0 for none
    max_len_a: float = 1.5  # output budget: a * source length + b tokens, EOS included
    max_len_b: int = 10
    nbest: int = 1  # hypotheses returned per sentence, best first

    def __post_init__(self):
        if not 1 <= self.nbest <= self.beam_size:
            raise ValueError(f"nbest ({self.nbest}) must be between 1 and the beam size ({self.beam_size})")


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS/EOS
    score: float  # log-probability divided by the length penalty
    attention: Tensor  # (len(tokens) + 1, src_len): one row per output token and EOS


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT length penalty ``((5 + |Y|) / 6) ** alpha`` (Wu et al., 2016)."""
    return ((5 + length) / 6) ** alpha


def max_lengths(src_len: Tensor, a: float, b: int) -> Tensor:
    """Output budget ``a * src_len + b`` tokens per sentence, EOS included."""
    return (a * src_len.float() + b).long().clamp(min=1)


@torch.inference_mode()
def beam_search(model: Seq2Seq, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
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
    """
    K, nbest, alpha = options.beam_size, options.nbest, options.alpha
    B, S = src.shape
    device = src.device
    budget = max_lengths(src_len, options.max_len_a, options.max_len_b)  # (B,)
    T = int(budget.max())
    state = model.encode(src, src_len)
    lp_max = length_penalty(budget.float(), alpha).clamp(min=1.0)  # the largest over lengths 1..budget (lp(1) = 1)

    active = torch.arange(B, device=device)  # sentence of each row of the shrinking batch
    scores = torch.zeros(B, 1, device=device)  # (n, beams alive): one to start with, then K
    prev = torch.full((B,), BOS, dtype=torch.long, device=device)
    hist = torch.full((B, 1, T), PAD, dtype=torch.long, device=device)
    attn_hist = torch.zeros(B, 1, T, S, device=device)
    fin_scores = torch.full((B, K), float("-inf"), device=device)
    fin_tokens = torch.full((B, K, T), PAD, dtype=torch.long, device=device)
    fin_attn = torch.zeros(B, K, T, S, device=device)
    fin_len = torch.zeros(B, K, dtype=torch.long, device=device)
    rank = torch.arange(2 * K, device=device)

    for t in range(T):
        n, width = scores.shape
        logp, state, row = model.step(state, prev)
        V = logp.shape[-1]
        if 2 * K > V:
            raise ValueError(f"beam size {K} is too large for a vocabulary of {V}")
        logp = logp.view(n, width, V)
        logp[..., PAD] = float("-inf")
        logp[..., BOS] = float("-inf")
        at_limit = t + 1 >= budget[active]  # (n,) force EOS
        if at_limit.any():
            forced = torch.full_like(logp[at_limit], float("-inf"))
            forced[..., EOS] = logp[at_limit][..., EOS]
            logp[at_limit] = forced
        row = row.float().view(n, width, S)

        # the 2K best continuations overall are among each beam's 2K best tokens
        beam_lp, beam_tok = logp.topk(2 * K, dim=-1)  # (n, width, 2K)
        top_s, top_i = (scores.unsqueeze(-1) + beam_lp).view(n, width * 2 * K).topk(2 * K, dim=1)  # (n, 2K)
        origin, tok = top_i // (2 * K), beam_tok.view(n, -1).gather(1, top_i)
        # every candidate's history: its origin beam's tokens and attention, plus this step
        c_tokens = hist.gather(1, origin.unsqueeze(-1).expand(n, 2 * K, T)).clone()  # (n, 2K, T)
        c_tokens[:, :, t] = tok
        c_attn = attn_hist.gather(1, origin[..., None, None].expand(n, 2 * K, T, S)).clone()  # (n, 2K, T, S)
        c_attn[:, :, t] = row.gather(1, origin.unsqueeze(-1).expand(n, 2 * K, S))

        # finished: EOS candidates among the top K join the kept-aside K best
        is_eos = tok == EOS
        eos_s = torch.where(is_eos & (rank < K), top_s / length_penalty(t + 1, alpha), float("-inf"))
        merged_s, pick = torch.cat([fin_scores[active], eos_s], 1).topk(K, dim=1)  # (n, K)
        all_tokens = torch.cat([fin_tokens[active], c_tokens], 1)
        all_attn = torch.cat([fin_attn[active], c_attn], 1)
        all_len = torch.cat([fin_len[active], torch.full_like(tok, t + 1)], 1)
        fin_scores[active] = merged_s
        fin_tokens[active] = all_tokens.gather(1, pick.unsqueeze(-1).expand(n, K, T))
        fin_attn[active] = all_attn.gather(1, pick[..., None, None].expand(n, K, T, S))
        fin_len[active] = all_len.gather(1, pick)

        # alive: the K best candidates that did not end
        alive_s, sel = torch.where(is_eos, float("-inf"), top_s).topk(K, dim=1)  # (n, K)
        scores = alive_s
        hist = c_tokens.gather(1, sel.unsqueeze(-1).expand(n, K, T))
        attn_hist = c_attn.gather(1, sel[..., None, None].expand(n, K, T, S))
        beam_origin = origin.gather(1, sel)
        prev = tok.gather(1, sel).view(-1)

        # an alive hypothesis of raw score s (<= 0) can at best end with s / (largest length penalty)
        hopeless = alive_s[:, 0] / lp_max[active] < fin_scores[active, nbest - 1]
        done = at_limit | (fin_scores[active] > float("-inf")).all(1) | hopeless
        keep = (~done).nonzero().squeeze(1)
        rows = (keep.unsqueeze(1) * width + beam_origin[keep]).view(-1)  # state rows to keep, reordered
        if len(keep) == 0:
            break
        active, scores, hist, attn_hist = active[keep], scores[keep], hist[keep], attn_hist[keep]
        prev = prev.view(n, K)[keep].view(-1)
        state = model.reorder_state(state, rows)

    results = []
    lens = src_len.tolist()
    real = (fin_scores[:, :nbest] > float("-inf")).sum(1).tolist()  # fewer than nbest may have finished
    for b in range(B):
        hyps = []
        for k in range(real[b]):
            length = int(fin_len[b, k])
            hyps.append(
                Hypothesis(
                    fin_tokens[b, k, : length - 1].tolist(),
                    float(fin_scores[b, k]),
                    fin_attn[b, k, :length, : lens[b]].cpu(),
                )
            )
        results.append(hyps)
    return results


@torch.inference_mode()
def greedy_search(model: Seq2Seq, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[Hypothesis]:
    """Most probable token at every step; finished sentences leave the batch. Uses the budget and length penalty."""
    B, S = src.shape
    device = src.device
    budget = max_lengths(src_len, options.max_len_a, options.max_len_b)
    T = int(budget.max())
    state = model.encode(src, src_len)
    active = torch.arange(B, device=device)
    prev = torch.full((B,), BOS, dtype=torch.long, device=device)
    tokens = torch.full((B, T), PAD, dtype=torch.long, device=device)
    attn = torch.zeros(B, T, S, device=device)
    logp_sum = torch.zeros(B, device=device)
    lengths = torch.zeros(B, dtype=torch.long, device=device)
    for t in range(T):
        logp, state, row = model.step(state, prev)
        logp[:, PAD] = float("-inf")
        logp[:, BOS] = float("-inf")
        at_limit = t + 1 >= budget[active]
        best_lp, tok = logp.max(dim=-1)
        tok = torch.where(at_limit, EOS, tok)
        best_lp = torch.where(at_limit, logp[:, EOS], best_lp)
        tokens[active, t] = tok
        attn[active, t] = row.float()
        logp_sum[active] += best_lp
        done = tok == EOS
        lengths[active[done]] = t + 1
        keep = (~done).nonzero().squeeze(1)
        if len(keep) == 0:
            break
        active, prev = active[keep], tok[keep]
        state = model.reorder_state(state, keep)
    lens = src_len.tolist()
    scores = (logp_sum / length_penalty(lengths, options.alpha)).tolist()
    return [
        Hypothesis(tokens[b, : int(lengths[b]) - 1].tolist(), scores[b], attn[b, : int(lengths[b]), : lens[b]].cpu())
        for b in range(B)
    ]


def translate_batch(model: Seq2Seq, src: Tensor, src_len: Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
    """Greedy search for ``beam_size=1``, else beam search."""
    if options.beam_size == 1:
        return [[h] for h in greedy_search(model, src, src_len, options)]
    return beam_search(model, src, src_len, options)
