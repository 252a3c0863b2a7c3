import pytest
import torch

from conftest import FAMILIES, RUN_SIZES, family, tiny_model
from nmt.specials import PAD

MODELS = list(FAMILIES)


def make(name, **kw):
    torch.manual_seed(0)
    return tiny_model(name, **kw).eval()


def batch():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 40, (3, 7), generator=g)
    src_len = torch.tensor([7, 4, 2])
    for i, n in enumerate(src_len):
        src[i, n:] = PAD
    return src, src_len, torch.randint(4, 30, (3, 6), generator=g)


@pytest.mark.parametrize("name", MODELS)
def test_padding_never_changes_outputs(name):
    model = make(name)
    src, src_len, tgt = batch()
    logits, cross, _ = model(src, src_len, tgt)
    noisy = src.clone()
    noisy[1, 4:], noisy[2, 2:] = 9, 13  # other ids where the padding is
    wider = torch.cat([noisy, torch.full((3, 4), PAD)], 1)  # more padding
    for s in (noisy, wider):
        l2, c2, _ = model(s, src_len, tgt)
        assert (l2 - logits).abs().max() < 1e-6 and (c2[..., :7] - cross).abs().max() < 1e-6
    assert cross.shape == (3, *model.attention_layout, 6, 7)  # (B, layers, heads, T, S): as the model declares
    assert (cross[1, ..., 4:] == 0).all() and (cross[2, ..., 2:] == 0).all()
    assert torch.allclose(cross.sum(-1), torch.ones(cross.shape[:-1]))


@pytest.mark.parametrize(
    "name, sizes",
    [
        *((name, {}) for name in FAMILIES),  # every family as its YAML has it, shrunk; then other sizes of some
        ("luong", dict(heads=2)),
        ("bahdanau", dict(encoder=dict(num_layers=2))),
        ("luong", dict(encoder=dict(num_layers=2), num_layers=2)),
        ("luong", dict(num_layers=2, heads=2)),
        ("transformer", dict(num_layers=3, heads=4, norm="post")),
        ("transformer", dict(positions="learned")),
    ],
)
def test_teacher_forcing_equals_step_by_step(name, sizes):
    model = make(name, **sizes)
    src, src_len, tgt = batch()
    logits, cross, _ = model(src, src_len, tgt)
    state, rows, steps = model.encode(src, src_len), [], []
    for t in range(tgt.shape[1]):
        logp, state, row = model.step(state, tgt[:, t])
        steps.append(logp)
        rows.append(row)
    assert torch.allclose(torch.stack(steps, 1), logits.log_softmax(-1), atol=1e-5)
    assert cross.shape[1:3] == model.attention_layout  # (layers, heads), as the model declares them
    assert torch.allclose(torch.stack(rows, -2), cross, atol=1e-5)  # rows (B, L, H, S) -> (B, L, H, T, S)


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_every_parameter(name):
    model = make(name).train()
    src, src_len, tgt = batch()
    logits, _, _ = model(src, src_len, tgt)
    logits.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing


@pytest.mark.slow  # trains to overfit
@pytest.mark.parametrize("name", MODELS)
def test_overfits_eight_toy_pairs(name):
    from nmt.data.toy import grammar as toy

    g = toy.Grammar(4)
    pairs = [g.pair(3, 25) for _ in range(8)]
    src_vocab = {w: i + 4 for i, w in enumerate(sorted({w for p in pairs for w in p.fr.split()}))}
    tgt_vocab = {w: i + 4 for i, w in enumerate(sorted({w for p in pairs for w in p.en.split()}))}
    S, T = max(len(p.fr.split()) for p in pairs), max(len(p.en.split()) for p in pairs) + 1
    src = torch.full((8, S), PAD)
    tgt_in, tgt_out = torch.full((8, T), PAD), torch.full((8, T), PAD)
    src_len = torch.tensor([len(p.fr.split()) for p in pairs])
    for i, p in enumerate(pairs):
        s, t = [src_vocab[w] for w in p.fr.split()], [tgt_vocab[w] for w in p.en.split()]
        src[i, : len(s)] = torch.tensor(s)
        tgt_in[i, : len(t) + 1] = torch.tensor([2, *t])
        tgt_out[i, : len(t) + 1] = torch.tensor([*t, 3])
    torch.manual_seed(0)
    model = tiny_model(name, len(src_vocab) + 4, len(tgt_vocab) + 4, sizes=RUN_SIZES)  # train.py's tiny runs' sizes
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        logits, _, _ = model(src, src_len, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05


@pytest.mark.parametrize("name", MODELS)
def test_half_precision_with_fully_padded_rows(name):
    model = make(name)
    src, src_len, tgt = batch()
    src_len = torch.tensor([7, 4, 0])  # a row with nothing to attend to
    src[2] = PAD
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("cpu", dtype=dtype):
            logits, cross, _ = model(src, src_len, tgt)
        assert not logits.isnan().any() and not cross.isnan().any() and (cross[2] == 0).all()


def test_tied_embeddings_and_bad_settings():
    from nmt.models.seq2seq import build_model

    encoder = {"_target_": "nmt.models.encoder.Encoder", "hidden_size": 8, "num_layers": 1}
    parts = dict(src_vocab_size=20, tgt_vocab_size=20, emb_size=8, readout_size=8, dropout=0.0, tie_embeddings=False)
    parts["encoder"] = encoder
    model = make("bahdanau", tie_embeddings=True)
    assert model.output.weight is model.decoder.embedding.weight
    with pytest.raises(ValueError, match="readout_size"):
        tiny_model("luong", readout_size=24, tie_embeddings=True)
    with pytest.raises(ValueError, match="heads"):
        tiny_model("luong", heads=3)
    with pytest.raises(ValueError, match="model.decoder.attn_hidden is not a setting of LuongDecoder"):
        tiny_model("luong", attn_hidden=8)
    with pytest.raises(ValueError, match="model.decoder.attn_hidden is missing: BahdanauDecoder needs"):
        bahdanau = family("bahdanau")["decoder"]["_target_"]
        build_model(**parts, decoder={"_target_": bahdanau, "hidden_size": 8})
    # only classes of this package are built, so a checkpoint's settings cannot name other code
    for target in (
        "nmt.models.decoders.TransformerDecoder",
        "subprocess.Popen",
        "torch.nn.Linear",
        "nmt.models.decoders.split_heads",
    ):
        with pytest.raises(ValueError, match=f"model.decoder._target_='{target}': not a model part of this package"):
            build_model(**parts, decoder={"_target_": target, "args": ["true"]})
    with pytest.raises(ValueError, match="model.encoder needs a _target_"):
        build_model(**(parts | {"encoder": {"hidden_size": 8}}), decoder={})


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("name", MODELS)
def test_shared_embeddings_are_one_matrix_for_both_languages_and_the_output(name, tie):
    """model.share_embeddings (one joint vocabulary): the source and target embeddings, and with tie_embeddings the
    output layer, are one parameter, trained as one; two vocabularies are refused in one line."""
    model = tiny_model(name, src_vocab=30, tgt_vocab=30, share_embeddings=True, tie_embeddings=tie)
    assert model.encoder.embedding.weight is model.decoder.embedding.weight
    assert (model.output.weight is model.decoder.embedding.weight) == tie
    shared = [p for p in model.parameters() if p is model.decoder.embedding.weight]
    assert len(shared) == 1 and sum(p.numel() for p in model.parameters()) < sum(
        p.numel() for p in tiny_model(name, src_vocab=30, tgt_vocab=30).parameters()
    )
    src, tgt = torch.randint(3, 30, (2, 5)), torch.randint(3, 30, (2, 4))
    model.loss(src, torch.tensor([5, 3]), tgt[:, :-1], tgt[:, 1:])[0].backward()
    assert model.encoder.embedding.weight.grad is not None
    with pytest.raises(ValueError, match="^model.share_embeddings=true needs one vocabulary for both languages .*"
                                         "add data.prepare.spm.joint=true$"):  # fmt: skip
        tiny_model(name, src_vocab=40, tgt_vocab=30, share_embeddings=True)


def test_output_layer_loss_matches_pytorch_with_its_gradients():
    from nmt.models.loss import output_layer_loss

    torch.manual_seed(0)
    hidden, weight, bias = torch.randn(7, 5), torch.randn(11, 5), torch.randn(11)
    target = torch.randint(0, 11, (7,))
    params = [t.requires_grad_() for t in (hidden, weight, bias)]
    for smoothing in (0.0, 0.1):
        loss, nll = output_layer_loss(hidden, weight, bias, target, smoothing)
        logits = torch.nn.functional.linear(hidden, weight, bias)
        reference = torch.nn.functional.cross_entropy(logits, target, label_smoothing=smoothing)
        assert torch.allclose(loss, reference, atol=1e-6)
        assert torch.allclose(nll, torch.nn.functional.cross_entropy(logits.detach(), target), atol=1e-6)
        grads = torch.autograd.grad(3 * loss, params)  # a scaled loss scales the gradients
        ref_grads = torch.autograd.grad(3 * reference, params)
        assert all(torch.allclose(g, r, atol=1e-5) for g, r in zip(grads, ref_grads))
        with torch.no_grad():  # validation: the same values, no gradient work
            assert torch.allclose(output_layer_loss(hidden, weight, bias, target, smoothing)[0], reference, atol=1e-6)
    # bf16 autocast (trainer=gpu uses it; on CPU here): gradients come back in each input's dtype
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h16 = torch.nn.functional.linear(hidden, torch.eye(5))  # bf16 under autocast, like the readout
        loss, _ = output_layer_loss(h16, weight, bias, target, 0.1)
    assert loss.dtype == torch.float32 and torch.allclose(loss, reference, atol=0.05)
    grads = torch.autograd.grad(loss, params)
    assert [g.dtype for g in grads] == [torch.float32] * 3
    assert all(torch.allclose(g, r / 3, atol=0.02) for g, r in zip(grads, ref_grads))


@pytest.mark.parametrize("name", MODELS)
def test_a_batch_of_empty_sources(name):
    from nmt.inference.search import SearchOptions, translate_batch

    model = make(name)
    src, src_len = torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, dtype=torch.long)
    tgt_in, tgt_out = torch.tensor([[2, 5, 6], [2, 7, 0]]), torch.tensor([[5, 6, 3], [7, 3, 0]])
    loss, _, ntok, cross = model.loss(src, src_len, tgt_in, tgt_out, 0.1, need_weights=True)
    assert torch.isfinite(loss) and ntok == 5 and cross.shape[0] == 2 and cross.shape[-2:] == (3, 0)
    for beam in (1, 3):
        hyps = translate_batch(model, src, src_len, SearchOptions(beam_size=beam))
        assert len(hyps) == 2 and all(h[0].attention.shape[-2:] == (len(h[0].tokens) + 1, 0) for h in hyps)


@pytest.mark.parametrize(
    "name, sizes",
    [
        *((name, {}) for name in FAMILIES),
        ("luong", {"heads": 2}),
        ("luong", {"num_layers": 2, "heads": 4}),
        ("transformer", {"num_layers": 3, "heads": 4}),
    ],
)
def test_a_model_states_its_attention_layout_as_its_attention_has_it(name, sizes):
    from nmt.inference.ensemble import Ensemble
    from nmt.models.seq2seq import PrefixRerun

    model = tiny_model(name, **sizes).eval()
    src = torch.randint(4, 40, (1, 5))
    for decodable in (model, PrefixRerun(model), Ensemble([model, tiny_model(name, **sizes)])):
        _, cross, _ = decodable.read(src, torch.tensor([5]), [5, 6, 7])  # (layers, heads, T + 1, S)
        assert decodable.attention_layout == tuple(cross.shape[:2]), type(decodable).__name__
        rows = decodable.step(decodable.encode(src, torch.tensor([5])), torch.tensor([2]))[2]  # (B, L, H, S)
        assert tuple(rows.shape[1:3]) == decodable.attention_layout
