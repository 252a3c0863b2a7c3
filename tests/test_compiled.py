"""compile.enabled=true: the compiled training step gives the eager step's losses, and where compiling fails the
run goes on eager after one warning."""

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import FAMILIES, run_train, tiny_model
from nmt.training.compiled import Compilation, CompiledLoss

pytestmark = pytest.mark.slow  # torch.compile of real training steps


def losses(run_dir) -> dict[int, float]:
    ea = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0})
    ea.Reload()
    return {e.step: e.value for e in ea.Scalars("train/loss")}


def test_a_compiled_run_has_the_eager_run_s_losses(data_cache, tmp_path):
    no_dropout = ["model.dropout=0", "model.encoder.attention_dropout=0", "model.decoder.attention_dropout=0"]
    common = ["model=transformer", *no_dropout, "trainer.max_steps=6", "trainer.log_every_n_steps=2",
              "trainer.val_check_interval=6", "run_test=false"]  # fmt: skip
    eager = run_train(tmp_path / "eager", data_cache, *common)
    padded = ["compile.enabled=true", "data.pad_multiple=8"]  # padding, as on a GPU, changes nothing learned
    compiled = run_train(tmp_path / "compiled", data_cache, *common, *padded, timeout=600)
    assert "compile: " in compiled.stdout and "graph(s) compiled" in compiled.stdout
    assert "compile: " not in eager.stdout
    a, b = losses(tmp_path / "eager"), losses(tmp_path / "compiled")
    assert sorted(a) == sorted(b) == [1, 3, 5]  # (logged every 2 steps)
    for step in a:  # the same updates: lengths padded to multiples of 8 are masked, not learned from
        assert b[step] == pytest.approx(a[step], rel=1e-4)


def test_where_compiling_fails_one_warning_and_the_eager_step(caplog):
    import torch._inductor.config as inductor

    torch._dynamo.reset()
    model = tiny_model("luong")
    src, src_len = torch.randint(4, 40, (3, 5)), torch.tensor([5, 4, 2])
    tgt = torch.randint(4, 30, (3, 6))
    step = CompiledLoss(model.loss, dynamic=None)
    expected = model.loss(src, src_len, tgt[:, :-1], tgt[:, 1:], 0.1)[0]
    with inductor.patch({"cpp.cxx": ("/nonexistent/c++",)}):  # no C++ compiler for Inductor's kernels
        for _ in range(2):
            got = step(src, src_len, tgt[:, :-1], tgt[:, 1:], 0.1)[0]
            assert torch.allclose(got, expected)
    assert step.failed and step.graphs == 0
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "compile:" in r.getMessage()]
    assert len(warnings) == 1 and "training goes on without compiling" in warnings[0].getMessage()
    torch._dynamo.reset()


def test_a_compiled_step_draws_the_eager_step_s_dropout_masks():
    torch._dynamo.reset()
    model = tiny_model("transformer", dropout=0.3, attention_dropout=0.3, encoder={"attention_dropout": 0.3}).train()
    src, src_len = torch.randint(4, 40, (3, 8)), torch.tensor([8, 5, 2])
    tgt = torch.randint(4, 30, (3, 9))
    args = (src, src_len, tgt[:, :-1], tgt[:, 1:], 0.1)
    losses, grads = [], []
    for loss_fn in (model.loss, CompiledLoss(model.loss, dynamic=None)):
        torch.manual_seed(6)
        model.zero_grad()
        loss = loss_fn(*args)[0]
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert torch.allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)
    torch.manual_seed(7)  # another seed draws other masks: the dropout is real
    assert model.loss(*args)[0].item() != pytest.approx(losses[0], rel=1e-5)
    torch._dynamo.reset()


def loss_and_grads(model, loss_fn, src, src_len, tgt) -> tuple[float, torch.Tensor]:
    """The loss of one batch through ``loss_fn`` and the model's gradients from it, flattened into one vector."""
    model.zero_grad()
    loss = loss_fn(src, src_len, tgt[:, :-1], tgt[:, 1:], 0.1)[0]
    loss.backward()
    return loss.item(), torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


@pytest.mark.parametrize("name", FAMILIES)
def test_a_compiled_step_compiles_once_for_batches_of_every_shape(name):
    """One graph set for every batch: the first batch's equal source and target lengths are not tied, and the
    Bahdanau decoder's loop over time is not unrolled into a graph per target length. Each batch's loss and gradients
    are the eager step's."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = tiny_model(name).train()
    step = CompiledLoss(model.loss, dynamic=Compilation().dynamic)
    graphs = []
    for B, S, T in [(20, 8, 8), (24, 9, 7), (18, 8, 12), (30, 5, 6), (16, 11, 10)]:  # (batch, source, target)
        src, src_len = torch.randint(4, 40, (B, S)), torch.randint(1, S + 1, (B,))
        src_len[0] = S
        tgt = torch.randint(4, 30, (B, T + 1))
        compiled_loss, compiled_grads = loss_and_grads(model, step, src, src_len, tgt)
        eager_loss, eager_grads = loss_and_grads(model, model.loss, src, src_len, tgt)
        assert compiled_loss == pytest.approx(eager_loss, rel=1e-5)
        assert torch.allclose(compiled_grads, eager_grads, rtol=1e-4, atol=1e-6)
        graphs.append(counters["stats"]["unique_graphs"])
    assert not step.failed and step.graphs > 0
    assert graphs[1:] == graphs[:1] * 4, f"graphs compiled after each batch: {graphs}"
    torch._dynamo.reset()
