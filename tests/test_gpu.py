"""On a GPU: every model trains through train.py with trainer=gpu in bf16 mixed precision, its checkpoint translates
on the GPU as on the CPU, the GPU's float32 loss is the CPU's, and its bf16 loss under the default kernels is close to
it. Skipped where there is no GPU (tests/test_kernels.py checks the mechanisms on the CPU)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from conftest import FAMILIES, run_train, tiny_model
from nmt import checkpoint
from nmt.hardware import Kernels
from nmt.inference.translator import translate

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")

MODELS = FAMILIES
SENTENCES = ["Le chat mange la pomme rouge.", "Je ne mange pas.", "Est-ce que tu dors ?", "Il a une tasse bleue."]


@pytest.fixture(scope="module")
def gpu_runs(tmp_path_factory):
    """The three models trained at once on the one GPU (each run is mostly start-up: one after another they took
    longer than the GPU check gives this file); the first to come prepares the corpus, the others wait for it."""
    cache = tmp_path_factory.mktemp("cache")
    dirs = {name: tmp_path_factory.mktemp(f"gpu_{name}") for name in MODELS}

    def train(name: str):
        return run_train(dirs[name], cache, f"model={name}", "trainer=gpu", "trainer.accelerator=gpu",
                         "trainer.precision=bf16-mixed", "trainer.max_steps=60",
                         "trainer.val_check_interval=30")  # fmt: skip

    with ThreadPoolExecutor(len(MODELS)) as pool:
        procs = dict(zip(MODELS, pool.map(train, MODELS)))
    return {name: (dirs[name], procs[name]) for name in MODELS}


@pytest.mark.parametrize("name", MODELS)
def test_trains_in_bf16_on_the_gpu_and_translates_there_as_on_the_cpu(gpu_runs, name):
    run_dir, proc = gpu_runs[name]
    assert "GPU available: True (cuda), used: True" in proc.stdout + proc.stderr
    last = run_dir / "checkpoints" / "last.ckpt"
    saved = checkpoint.load_checkpoint(last).checkpoint
    assert saved.step == 60 and saved.model_settings["name"] == name
    weights = saved.weights.values()
    assert all(w.dtype == torch.float32 and w.device.type == "cpu" and torch.isfinite(w).all() for w in weights)
    gpu = translate(str(last), SENTENCES, beam_size=3, device="cuda")
    cpu = translate(str(last), SENTENCES, beam_size=3, device="cpu")
    assert all(gpu) and sum(g == c for g, c in zip(gpu, cpu)) >= len(SENTENCES) - 1  # float32 on both: ties aside


@pytest.mark.parametrize("name", MODELS)
def test_the_float32_loss_and_gradients_on_the_gpu_are_the_cpus(name):
    torch.manual_seed(0)
    model = tiny_model(name)
    src = torch.randint(4, 40, (6, 9))
    src_len = torch.tensor([9, 8, 7, 5, 3, 1])
    tgt = torch.randint(4, 30, (6, 8))
    tgt[3:, 6:] = 0  # padding

    def loss_and_grads(device):
        m = model.to(device)
        m.zero_grad()
        loss, *_ = m.loss(src.to(device), src_len.to(device), tgt[:, :-1].to(device), tgt[:, 1:].to(device), 0.1)
        loss.backward()
        return loss.item(), [p.grad.detach().cpu().clone() for p in m.parameters() if p.grad is not None]

    cpu_loss, cpu_grads = loss_and_grads("cpu")
    with Kernels(float32_matmul="highest").applied():  # float32 products on the GPU, not TF32
        gpu_loss, gpu_grads = loss_and_grads("cuda")
    assert gpu_loss == pytest.approx(cpu_loss, rel=1e-5)
    for a, b in zip(cpu_grads, gpu_grads):
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_the_bf16_loss_under_the_default_kernels_is_the_float32_loss_within_bf16s_rounding(name):
    torch.manual_seed(0)
    model = tiny_model(name, dropout=0.1).cuda().train()
    src = torch.randint(4, 40, (16, 21), device="cuda")
    src_len = torch.randint(1, 22, (16,), device="cuda")
    tgt = torch.randint(4, 30, (16, 19), device="cuda")
    with Kernels().applied():
        torch.manual_seed(1)
        full, *_ = model.loss(src, src_len, tgt[:, :-1], tgt[:, 1:], 0.1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            torch.manual_seed(1)
            mixed, *_ = model.loss(src, src_len, tgt[:, :-1], tgt[:, 1:], 0.1)
            mixed.backward()  # the backward of every kernel the defaults pick
    assert mixed.item() == pytest.approx(full.item(), rel=2e-2)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_the_captured_loss_trains_as_the_eager_one():
    """compile.graphs: eight Adam steps over batches of two shapes (each captured at its first batch, then replayed),
    without dropout, in float32: every step's loss is the eager run's, and two graphs were captured."""
    from test_graphs import batches

    from nmt.training.graphs import GraphedLoss

    data = [b for pair in zip(batches(4, seed=1), batches(4, seed=2, rows=4, width=24)) for b in pair]
    losses = []
    for capture in (False, True):
        torch.manual_seed(0)
        model = tiny_model("transformer").cuda().train()
        fn = GraphedLoss(model, 0.1, capture=capture)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, fused=True)
        run = []
        for batch in data:
            loss = fn(*(t.cuda() for t in batch))[0]
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            run.append(loss.item())
        losses.append(run)
        assert len(fn.graphs) == (2 if capture else 0)
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=1e-3, atol=1e-4)
