import pytest
import torch

from conftest import FAMILIES, tiny_model
from nmt.inference.search import SearchOptions, beam_search, greedy_search, length_penalty, max_lengths, translate_batch
from nmt.models.seq2seq import PrefixRerun, Seq2Seq
from nmt.specials import BOS, EOS, PAD


@pytest.fixture(params=[*FAMILIES, "luong-2-heads"])  # every family at its tiny sizes, and Luong with two heads
def model(request):
    torch.manual_seed(0)
    name, _, heads = request.param.partition("-")
    return tiny_model(name, 40, 25, **({"heads": int(heads[0])} if heads else {})).eval()


def batch():
    g = torch.Generator().manual_seed(3)
    src_len = torch.tensor([7, 4, 2, 6, 1])
    src = torch.randint(4, 40, (5, 7), generator=g)
    for i, n in enumerate(src_len):
        src[i, n:] = PAD
    return src, src_len


def test_beam_one_is_greedy(model):
    src, src_len = batch()
    greedy = greedy_search(model, src, src_len, SearchOptions(beam_size=1))
    beam = beam_search(model, src, src_len, SearchOptions(beam_size=1))
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam]
    assert all(abs(h.score - b[0].score) < 1e-4 for h, b in zip(greedy, beam))


def test_nbest_sorted_with_attention_of_the_output(model):
    src, src_len = batch()
    results = beam_search(model, src, src_len, SearchOptions(beam_size=4, nbest=4))
    for hyps, n in zip(results, src_len.tolist()):
        assert len(hyps) == 4
        assert all(a.score >= b.score for a, b in zip(hyps, hyps[1:]))
        for h in hyps:
            layers, heads = h.attention.shape[:2]
            assert h.attention.shape == (layers, heads, len(h.tokens) + 1, n)  # (layers, heads, T + 1, S)
            assert torch.allclose(h.attention.sum(-1), torch.ones(layers, heads, len(h.tokens) + 1), atol=1e-5)


def test_batched_equals_one_at_a_time(model):
    src, src_len = batch()
    together = beam_search(model, src, src_len, SearchOptions(beam_size=3, nbest=2))
    for i in range(len(src_len)):
        n = int(src_len[i])
        alone = beam_search(model, src[i : i + 1, :n], src_len[i : i + 1], SearchOptions(beam_size=3, nbest=2))
        assert [h.tokens for h in alone[0]] == [h.tokens for h in together[i]]


def test_length_budget(model):
    src, src_len = batch()
    budget = max_lengths(src_len, 0.5, 2)
    for hyps, b in zip(
        beam_search(model, src, src_len, SearchOptions(beam_size=3, max_len_a=0.5, max_len_b=2)), budget.tolist()
    ):
        assert len(hyps[0].tokens) + 1 <= b
    for h, b in zip(
        greedy_search(model, src, src_len, SearchOptions(beam_size=1, max_len_a=0.5, max_len_b=2)), budget.tolist()
    ):
        assert len(h.tokens) + 1 <= b


def test_nbest_larger_than_beam_is_an_error(model):
    src, src_len = batch()
    with pytest.raises(ValueError, match="nbest"):
        SearchOptions(beam_size=2, nbest=3)


def gnmt(length: int, alpha: float) -> float:
    """GNMT's length penalty written out (Wu et al., 2016, eq. 14): ((5 + |Y|) / (5 + 1)) ** alpha."""
    return ((5 + length) / 6) ** alpha


@pytest.mark.parametrize(
    "length, alpha, expected",
    [(1, 0.6, 1.0), (7, 0.6, 1.515716566510398), (4, 0.6, 1.2754245006257907), (13, 0.5, 1.7320508075688772),
     (13, 1.0, 3.0), (13, 2.0, 9.0), (26, 0.6, 2.678713497856277), (40, 0.0, 1.0)],
)  # fmt: skip
def test_the_length_penalty_is_gnmt_s(length, alpha, expected):
    """Fixed numbers worked out from the formula: 2**0.6, 1.5**0.6, sqrt(3), 3, 9, (31/6)**0.6, and 1 for alpha 0."""
    assert length_penalty(length, alpha) == pytest.approx(expected, rel=1e-9)
    assert float(length_penalty(torch.tensor([length]), alpha)[0]) == pytest.approx(expected, rel=1e-6)  # a tensor


def reference_beam(model, src, src_len, beam_size, nbest, alpha=0.6, max_len_a=1.5, max_len_b=10):
    """Beam search for one sentence, written plainly: no shrinking batch, no early stop but K finished."""
    K = beam_size
    budget = int(max_lengths(src_len, max_len_a, max_len_b)[0])
    state = model.encode(src, src_len)
    alive, finished = [([], 0.0)], []
    for t in range(budget):
        logp, state, _ = model.step(state, torch.tensor([toks[-1] if toks else BOS for toks, _ in alive]))
        logp[:, PAD] = logp[:, BOS] = float("-inf")
        if t + 1 >= budget:
            logp[:, [v for v in range(logp.shape[1]) if v != EOS]] = float("-inf")
        flat = (torch.tensor([s for _, s in alive]).unsqueeze(1) + logp).view(-1)
        top_s, top_i = flat.topk(2 * K)
        next_alive, rows = [], []
        for rank, (s, i) in enumerate(zip(top_s.tolist(), top_i.tolist())):
            origin, tok = divmod(i, logp.shape[1])
            if tok == EOS:
                if rank < K and s > float("-inf"):
                    finished.append((alive[origin][0], s / gnmt(t + 1, alpha)))
            elif len(next_alive) < K:
                next_alive.append((alive[origin][0] + [tok], s))
                rows.append(origin)
        finished = sorted(finished, key=lambda h: -h[1])[:K]
        if len(finished) == K or t + 1 >= budget:
            break
        alive, state = next_alive, model.reorder_state(state, torch.tensor(rows))
    return finished[:nbest]


class TableModel:
    """A stand-in for ``Seq2Seq`` with the one-step API: log-probs from a random table by (step, previous token)."""

    def __init__(self, vocab: int, sharpness: float, seed: int, steps: int = 40):
        g = torch.Generator().manual_seed(seed)
        self.table = torch.log_softmax(
            sharpness * torch.randn(steps, vocab, vocab, generator=g), dim=-1
        )  # (step, prev, next)
        self.rows = 0

    def encode(self, src, src_len):
        return {"src_len": src_len, "t": torch.zeros_like(src_len)}

    def step(self, state, prev):
        self.rows += len(prev)
        S = int(state["src_len"].max())
        t = state["t"]
        return self.table[t, prev].clone(), {**state, "t": t + 1}, torch.full((len(prev), S), 1.0 / S)

    reorder_state = staticmethod(Seq2Seq.reorder_state)


def test_beam_search_matches_a_plain_reference():
    src, src_len = batch()
    K, nbest = 4, 2
    fast_rows = plain_rows = 0
    for seed in range(4):
        fast, plain = TableModel(12, 2.0, seed), TableModel(12, 2.0, seed)
        results = beam_search(fast, src, src_len, SearchOptions(beam_size=K, nbest=nbest))
        for i in range(len(src_len)):
            n = int(src_len[i])
            expected = reference_beam(plain, src[i : i + 1, :n], src_len[i : i + 1], beam_size=K, nbest=nbest)
            assert [h.tokens for h in results[i]] == [toks for toks, _ in expected]
            assert [h.score for h in results[i]] == pytest.approx([s for _, s in expected], abs=1e-5)
        fast_rows, plain_rows = fast_rows + fast.rows, plain_rows + plain.rows
    # the reference runs until K finished; the early stop cut work without changing the result
    assert fast_rows < plain_rows


@pytest.mark.parametrize("beam, nbest", [(1, 1), (4, 3)])
def test_nbest_attention_and_scores_match_a_teacher_forced_rerun(model, beam, nbest):
    src, src_len = batch()
    results = translate_batch(model, src, src_len, SearchOptions(beam_size=beam, nbest=nbest))  # greedy, beam
    for i, hyps in enumerate(results):
        n = int(src_len[i])
        for h in hyps:
            tgt_in = torch.tensor([[BOS, *h.tokens]])
            logits, cross, _ = model(src[i : i + 1, :n], src_len[i : i + 1], tgt_in)
            assert torch.allclose(h.attention, cross[0], atol=1e-5)  # every head, in its place
            logp = logits[0].log_softmax(-1).gather(1, torch.tensor([[*h.tokens, EOS]]).t()).sum()
            assert h.score == pytest.approx(float(logp) / gnmt(len(h.tokens) + 1, 0.6), abs=1e-4)


def test_only_real_hypotheses_come_out(model):
    src, src_len = batch()
    # a budget of one token: only EOS can be output, so one hypothesis per sentence, not three
    for hyps in beam_search(model, src, src_len, SearchOptions(beam_size=3, nbest=3, max_len_a=0, max_len_b=1)):
        assert len(hyps) == 1 and hyps[0].tokens == [] and hyps[0].score > float("-inf")


@pytest.mark.parametrize("beam, nbest", [(1, 1), (4, 3)])
def test_search_with_the_cache_equals_search_rerunning_the_prefix(model, beam, nbest):
    src, src_len = batch()
    options = SearchOptions(beam_size=beam, nbest=nbest)
    cached = translate_batch(model, src, src_len, options)
    rerun = translate_batch(PrefixRerun(model), src, src_len, options)
    for a, b in zip(cached, rerun):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)
        assert all(torch.allclose(x.attention, y.attention, atol=1e-5) for x, y in zip(a, b))


def test_the_decoding_defaults_of_conf_are_search_s_own():
    """#81: ``decoding`` in conf/config.yaml writes SearchOptions' defaults again (Hydra needs the keys): they agree,
    but for validation's greedy beam, which the config says it chooses."""
    import dataclasses

    from omegaconf import OmegaConf

    from conftest import ROOT
    from nmt.inference.search import SearchOptions

    conf = OmegaConf.load(ROOT / "conf" / "config.yaml").decoding
    own = {f.name: f.default for f in dataclasses.fields(SearchOptions)}
    assert set(conf) == set(own)
    assert {k: v for k, v in conf.items() if k != "beam_size"} == {k: v for k, v in own.items() if k != "beam_size"}
    assert conf.beam_size == 1 and "greedy" in (ROOT / "conf" / "config.yaml").read_text().split("beam_size:")[1][:80]
