"""The CUDA-graph training loss on the CPU (capture off): the static-shape loss is the indexed one, a fixed run trains
the same through it, and compile.graphs is refused in one line where it cannot capture. Its capture on a GPU is
tests/test_gpu.py's."""

from __future__ import annotations

import pytest
import torch

from conftest import tiny_model
from nmt.data.collate import pad
from nmt.training.graphs import GraphedLoss, check_graphs


def batches(n: int, seed: int = 0, rows: int = 6, width: int = 16) -> list[tuple[torch.Tensor, ...]]:
    """``n`` padded batches of one shape ``(rows, width)``: random lengths, an empty target row in each."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        src_len = torch.randint(1, width + 1, (rows,), generator=g)
        tgt_lens = torch.randint(0, width, (rows,), generator=g)
        tgt_lens[-1] = 0  # a row whose target is EOS alone
        src = pad([torch.randint(4, 40, (int(k),), generator=g).tolist() for k in src_len], multiple=width)
        tgt = [torch.randint(4, 30, (int(k),), generator=g).tolist() for k in tgt_lens]
        tgt_in, tgt_out = pad(tgt, bos=True, multiple=width), pad(tgt, eos=True, multiple=width)
        out.append((src[:, :width], src_len, tgt_in[:, :width], tgt_out[:, :width]))
    return out


def test_the_static_loss_is_the_indexed_loss_with_its_gradients():
    """Every position through the output layer, weighted by the mask, gives the loss, NLL, token count and
    gradients of the loss over the real positions alone."""
    torch.manual_seed(0)
    model = tiny_model("transformer").eval()
    src, src_len, tgt_in, tgt_out = batches(1)[0]
    indexed = model.loss(src, src_len, tgt_in, tgt_out, 0.1)
    static = model.loss(src, src_len, tgt_in, tgt_out, 0.1, static=True)
    for a, b in zip(indexed[:3], static[:3]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    params = [p for p in model.parameters() if p.requires_grad]
    for a, b in zip(torch.autograd.grad(indexed[0], params), torch.autograd.grad(static[0], params)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_a_fixed_run_trains_the_same_through_the_graphed_loss_with_capture_off():
    """Eight Adam steps with dropout from one seed: the loss at every step through :class:`GraphedLoss` (capture off:
    what a graph replays, run eagerly) is the model's own."""
    data = batches(8, seed=1)
    losses = []
    for graphed in (False, True):
        torch.manual_seed(0)
        model = tiny_model("transformer", dropout=0.1).train()
        fn = GraphedLoss(model, 0.1, capture=False) if graphed else None
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        run = []
        for src, src_len, tgt_in, tgt_out in data:
            if fn is None:
                loss = model.loss(src, src_len, tgt_in, tgt_out, 0.1, tgt_tokens=int((tgt_out != 0).sum()))[0]
            else:
                loss = fn(src, src_len, tgt_in, tgt_out)[0]
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            run.append(loss.item())
        losses.append(run)
    assert losses[0][-1] < losses[0][0]  # it trains
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=1e-4, atol=1e-5)


def graphs_config(*overrides: str):
    from hydra import compose, initialize_config_dir

    from conftest import ROOT

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=["compile.graphs=true", *overrides])


GPU = ["trainer=gpu", "model=transformer", "data.shapes=12"]


@pytest.mark.parametrize(
    "overrides,says",
    [
        (["model=transformer", "data.shapes=12"], "needs a GPU"),
        (["trainer=gpu", "model=transformer"], "set data.shapes"),
        (["trainer=gpu", "model=transformer", "data.shapes=40"], "set data.shapes=16 or less"),
        ([*GPU, "trainer.devices=2"], "set trainer.devices=1"),
        ([*GPU, "compile.enabled=true"], "set compile.enabled=false"),
        ([*GPU, "loss.align_weight=0.1"], "loss.align_weight=0"),
        (["trainer=gpu", "model=bahdanau", "data.shapes=12"], "model.encoder (nmt.models.encoder"),
    ],
)
def test_compile_graphs_is_refused_where_it_cannot_capture(overrides, says):
    with pytest.raises(ValueError, match=r"^compile\.graphs=true ") as e:
        check_graphs(graphs_config(*overrides))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_compile_graphs_passes_where_it_can_capture():
    check_graphs(graphs_config(*GPU))  # nothing raised
    check_graphs(graphs_config("compile.graphs=false"))
