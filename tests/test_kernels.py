"""How a run computes, checked on the CPU for what a GPU run relies on: the attention backends and float32 products
of ``kernels`` applied around training's forward and backward; the look-ahead mask given to the fused kernel as
``is_causal``; recurrent states in float32 under bf16 autocast and validation decoding in float32; ``trainer=gpu``'s
padded lengths; nothing in the package or ``bench/`` that reads a device tensor as a numpy array."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from conftest import ROOT, TINY_DATA, families_whose, self_attending, tiny_model, tiny_model_overrides
from nmt.hardware import Kernels, current_attention_backends
from nmt.models import attention
from nmt.models.attention import DotProductAttention, causal_mask


def compose(*overrides: str):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


# --- the setting ----------------------------------------------------------------------------------------------------


def _float32_products() -> tuple:
    """What Lightning, Dynamo and Inductor read (the legacy switches: they raise where torch's two APIs were mixed),
    and cuDNN's recurrent layers' precision."""
    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.rnn.fp32_precision,
        torch.backends.mkldnn.matmul.fp32_precision,  # the CPU's: never changed
    )


def test_kernels_restrict_and_order_the_attention_backends_and_turn_tf32_on_within_the_block():
    before = (current_attention_backends(), _float32_products())
    cpu = torch.backends.mkldnn.matmul.fp32_precision
    with Kernels(("math", "flash"), "high").applied():
        assert current_attention_backends() == [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]
        assert _float32_products() == ("high", True, True, "tf32", cpu)
    with Kernels(float32_matmul="highest").applied():
        assert _float32_products() == ("highest", False, False, "ieee", cpu)  # cuDNN's GRUs in full float32 too
        assert SDPBackend.CUDNN_ATTENTION not in current_attention_backends()  # the default leaves cuDNN out
        with Kernels(float32_matmul="high").applied():
            assert _float32_products()[:4] == ("high", True, True, "tf32")
        assert _float32_products()[:4] == ("highest", False, False, "ieee")
    assert (current_attention_backends(), _float32_products()) == before


def test_kernels_applied_for_the_process_stay_applied(monkeypatch):
    """``apply()`` (translate.py, align.py, serve.py) keeps its settings: nothing undoes them, the garbage collector
    included."""
    import gc

    from nmt import hardware

    monkeypatch.setattr(hardware, "_APPLIED", [])
    before = (current_attention_backends(), _float32_products())
    Kernels(("math",), "highest").apply()
    gc.collect()
    try:
        assert current_attention_backends() == [SDPBackend.MATH]
        assert _float32_products()[:4] == ("highest", False, False, "ieee")
    finally:
        for stack in reversed(hardware._APPLIED):
            stack.close()
    assert (current_attention_backends(), _float32_products()) == before


@pytest.mark.slow
@pytest.mark.parametrize("name", ["translate", "align", "serve"])
@pytest.mark.parametrize("given, backends, products", [
    ([], [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH], "high"),  # conf/'s defaults
    (["--attention-backends", "math", "efficient", "--float32-matmul", "highest"],
     [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION], "highest"),
])  # fmt: skip
def test_a_commands_kernel_options_are_what_its_translations_run_with(name, given, backends, products, trained,
                                                                       monkeypatch):  # fmt: skip
    """``--attention-backends`` and ``--float32-matmul`` of translate.py, align.py and serve.py (through each one's
    own parsing and loading), observed inside the attention of a translation, and conf/'s kernels where not given."""
    import importlib

    from nmt import hardware
    from nmt.cli.options import translation_model
    from nmt.inference.search import SearchOptions

    monkeypatch.setattr(hardware, "_APPLIED", [])
    before = (current_attention_backends(), _float32_products())
    seen, fused = [], F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        seen.append((current_attention_backends(), torch.get_float32_matmul_precision()))
        return fused(*args, **kwargs)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", recording)
    ckpt = trained["transformer"] / "checkpoints" / "last.ckpt"
    command = importlib.import_module(f"nmt.cli.{name}")
    args = command._parse_args(["--ckpt", str(ckpt), *given, *(["--align-to", "x"] if name == "align" else [])])
    contrary = Kernels(("efficient", "math"), "highest" if products == "high" else "high")  # what it must set aside
    try:
        with contrary.applied():
            assert (current_attention_backends(), torch.get_float32_matmul_precision()) != (backends, products)
            loaded = translation_model(args)
            loaded.model.translate_batch(torch.randint(4, 40, (2, 5)), torch.tensor([5, 3]), SearchOptions(beam_size=2))
            assert seen and all(call == (backends, products) for call in seen), seen
            for stack in reversed(hardware._APPLIED):  # the process's kernels given back, inside the contrary ones
                stack.close()
    finally:
        for stack in reversed(hardware._APPLIED):
            stack.close()
    assert (current_attention_backends(), _float32_products()) == before


@pytest.mark.parametrize(
    "section, message",
    [
        ({"attention": ["fast"]}, "kernels.attention=['fast']: must be a list of flash, efficient, cudnn, math"),
        ({"attention": []}, "kernels.attention=[]: name at least one of flash, efficient, cudnn, math"),
        ({"attention": ["math", "math"]}, "kernels.attention=[math,math]: a backend is named twice"),
        ({"float32_matmul": "medium"}, "kernels.float32_matmul='medium': must be one of high, highest"),
        ({"tf32": True}, "kernels.tf32: not a setting (kernels.attention, kernels.float32_matmul)"),
    ],
)
def test_a_bad_kernels_setting_is_refused_in_one_line_before_anything_runs(section, message):
    from omegaconf import OmegaConf

    from nmt.settings import check_config

    cfg = compose()
    cfg.kernels = OmegaConf.create(section)
    with pytest.raises(ValueError) as e:
        check_config(cfg)
    assert str(e.value) == message


def test_the_kernels_of_config_are_applied_around_trainings_forward_and_backward(tmp_path):
    """Every forward and backward of a real fit sees kernels.attention (an order no default has)."""
    import lightning as L
    from hydra.utils import instantiate

    from nmt.training.module import TranslationModule

    overrides = ["model=transformer", *tiny_model_overrides("model=transformer"), *TINY_DATA]
    cfg = compose(*overrides, f"data.cache_dir={tmp_path}", "data.num_workers=0", "kernels.attention=[math,flash]")
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    module = TranslationModule.from_config(cfg, dm.tokenizer)
    seen: dict[str, list] = {"forward": [], "backward": []}
    layer = module.model.decoder.layers[0]
    layer.register_forward_hook(lambda *_: seen["forward"].append(current_attention_backends()))
    layer.register_full_backward_hook(lambda *_: seen["backward"].append(current_attention_backends()))
    trainer = L.Trainer(
        max_steps=2, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(module, datamodule=dm)
    wanted = [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]
    assert len(seen["forward"]) == 2 and len(seen["backward"]) == 2
    assert all(backends == wanted for backends in seen["forward"] + seen["backward"]), seen
    assert current_attention_backends() != wanted  # given back when fitting ends


# --- the look-ahead mask as is_causal -------------------------------------------------------------------------------


def test_the_look_ahead_mask_reaches_the_fused_kernel_as_is_causal_and_gives_the_masked_attention():
    torch.manual_seed(0)
    B, H, T, d = 3, 2, 7, 8
    q, k, v = (torch.randn(B, H, T, d) for _ in range(3))
    attn = DotProductAttention().eval()
    weighted, w = attn(q, k, v, attn_mask=causal_mask(T))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):  # takes no mask: only is_causal can reach it
        fused, none = attn(q, k, v, need_weights=False, causal=True)
    assert none is None and torch.allclose(fused, weighted, atol=1e-5)
    also, w2 = attn(q, k, v, causal=True)  # the weights path builds the mask itself
    assert torch.allclose(also, weighted, atol=1e-6) and torch.equal(w2, w)
    # with valid lengths too, one combined mask: each query sees its past and nothing past its row's length
    lens = torch.tensor([7, 4, 1])
    both, wb = attn(q, k, v, valid_lens=lens, causal=True)
    fused_both, _ = attn(q, k, v, valid_lens=lens, causal=True, need_weights=False)
    assert torch.allclose(fused_both, both, atol=1e-5)
    assert (wb[1, :, :, 4:] == 0).all() and (wb.triu(1) == 0).all()


@pytest.mark.parametrize("name", families_whose(self_attending))
def test_a_decoders_training_pass_gives_its_self_attention_the_look_ahead_as_is_causal(name, monkeypatch):
    calls = []
    fused = F.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, is_causal=False, **kw):
        calls.append((q.shape[-2], k.shape[-2], attn_mask is None, is_causal))
        return fused(q, k, v, attn_mask=attn_mask, is_causal=is_causal, **kw)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", recording)
    model = tiny_model(name).eval()
    src, src_len = torch.randint(4, 40, (3, 6)), torch.tensor([6, 4, 2])
    tgt = torch.randint(4, 30, (3, 9))
    with torch.no_grad():
        model.loss(src, src_len, tgt[:, :-1], tgt[:, 1:], 0.0)
    self_calls = [c for c in calls if c[0] == c[1] == 8]  # the target over itself (the source is 6 long)
    assert self_calls and all(mask_free and causal for *_, mask_free, causal in self_calls), calls


# --- precision ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", families_whose(lambda m: any(isinstance(x, torch.nn.GRU) for x in m.modules())))
def test_recurrent_states_stay_float32_under_bf16_autocast(name):
    torch.manual_seed(0)
    model = tiny_model(name).eval()
    src, src_len = torch.randint(4, 40, (2, 5)), torch.tensor([5, 3])
    tgt = torch.randint(4, 30, (2, 12))
    grus = [m for m in model.modules() if isinstance(m, torch.nn.GRU)]  # cuDNN's GRU would carry bf16 states on a GPU
    autocast_in_gru = []
    for gru in grus:
        gru.register_forward_pre_hook(lambda *_: autocast_in_gru.append(torch.is_autocast_enabled("cpu")))
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            states, final = model.encoder(src, src_len)
            state = model.decoder.init_state(states, src_len, final)
            assert states.dtype == final.dtype == state["h"].dtype == torch.float32
            features, *_ = model.decoder(tgt, state, need_weights=False)
            _, after, _ = model.decoder.step(tgt[:, 0], state)
            assert after["h"].dtype == torch.float32
            hidden = features[..., : model.decoder.hidden_size]  # the GRU's own states, first in the features
            assert hidden.dtype == torch.float32
        assert len(autocast_in_gru) >= len(grus) and not any(autocast_in_gru)  # each GRU ran, in float32
        reference, *_ = model.decoder(tgt, model.decoder.init_state(*model.encoder(src, src_len)[:1], src_len,
                                                                        model.encoder(src, src_len)[1]))  # fmt: skip
    # rounded to bfloat16 at every step the states would drift by ~1e-2 over 12 steps; here only the products round
    assert torch.allclose(hidden, reference[..., : model.decoder.hidden_size], atol=2e-2)


def test_validation_decodes_in_float32_under_the_training_autocast():
    from nmt.training.module import TranslationModule

    cfg = compose("model=transformer", *tiny_model_overrides("model=transformer"))
    from omegaconf import OmegaConf

    sections = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in ("model", "optim", "schedule", "loss")}
    module = TranslationModule(**sections, decoding={"beam_size": 2}, src_vocab_size=40, tgt_vocab_size=30).eval()
    src, src_len = torch.randint(4, 40, (2, 5)), torch.tensor([5, 3])
    with torch.no_grad():
        plain = module.translate(src, src_len)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mixed = module.translate(src, src_len)
    assert [h.tokens for h, *_ in mixed] == [h.tokens for h, *_ in plain]
    assert all(h.attention.dtype == torch.float32 and torch.equal(h.attention, p.attention)
               for (h, *_), (p, *_) in zip(mixed, plain))  # fmt: skip


# --- trainer=gpu ----------------------------------------------------------------------------------------------------


def test_trainer_gpu_pads_every_batch_to_a_multiple_of_8_and_sets_the_gpu_loader(tmp_path):
    from hydra.utils import instantiate

    cfg = compose("trainer=gpu", *TINY_DATA, f"data.cache_dir={tmp_path}")
    assert cfg.trainer.precision == "auto" and cfg.data.pin_memory and cfg.data.num_workers > 0
    dm = instantiate(cfg.data, links=False)  # as train.py builds it
    dm.num_workers = 0  # the batches, in this process
    dm.prepare_data()
    dm.setup("fit")
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        batches = [b for _, b in zip(range(5), loader)]
        widths = {w for b in batches for w in (b.src.shape[1], b.tgt_in.shape[1], b.tgt_out.shape[1])}
        assert widths and all(w % 8 == 0 for w in widths), widths
    assert compose("experiment=tatoeba_transformer", "trainer=gpu").data.max_tokens == 2400  # an experiment wins


# --- no device tensor read as a numpy array -------------------------------------------------------------------------


def _numpy_calls_off_the_host(path: Path, root: Path = ROOT) -> list[str]:
    """``x.numpy()`` calls whose receiver is not ``....cpu()``: each would fail on a GPU tensor (named by its path
    under ``root`` and its line)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy":
            receiver = node.func.value
            on_host = (
                isinstance(receiver, ast.Call)
                and isinstance(receiver.func, ast.Attribute)
                and receiver.func.attr == "cpu"
            )
            if not on_host:
                bad.append(f"{path.relative_to(root)}:{node.lineno}")
    return bad


def test_nothing_in_the_package_or_bench_reads_a_tensor_as_numpy_without_bringing_it_to_the_host_first():
    files = [*(ROOT / "nmt").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    assert len(files) > 50
    bad = [where for f in files for where in _numpy_calls_off_the_host(f)]
    assert not bad, f"call .cpu() before .numpy(): {bad}"


def test_the_check_finds_a_numpy_call_on_a_device_tensor(tmp_path):
    sample = tmp_path / "bench" / "_probe_numpy.py"  # not in the checkout: other workers read bench/ meanwhile
    sample.parent.mkdir()
    sample.write_text("def f(batch):\n    return batch.src_len.numpy(), batch.tgt_len.cpu().numpy()\n")
    assert _numpy_calls_off_the_host(sample, tmp_path) == ["bench/_probe_numpy.py:2"]


def test_the_speed_meter_counts_tokens_per_interval_after_its_warmup():
    from bench.speed.train_speed import Meter

    class Batch:
        def __init__(self, n):
            self.src_len, self.tgt_len = torch.full((4,), n), torch.full((4,), n + 1)

    class Module:
        device = torch.device("cpu")

    model = {"name": "bahdanau", "emb_size": 8, "readout_size": 8, "encoder": {"hidden_size": 8},
             "decoder": {"hidden_size": 8, "attn_hidden": 8}}  # fmt: skip
    meter = Meter(model, 50, warmup=3, every=5)
    for i in range(3 + 12):
        meter.on_train_batch_end(None, Module(), None, Batch(i), i)
    assert [(tokens, steps) for _, tokens, _, steps in meter.intervals] == [(4 * sum(range(4, 9)), 5),
                                                                            (4 * sum(range(9, 14)), 5)]  # fmt: skip
    assert all(seconds > 0 and flops > 0 for seconds, _, flops, _ in meter.intervals)


def test_word_attention_stays_on_the_device_of_its_weights():
    from nmt.alignment.words import word_attention

    weights = torch.rand(3, 4, device="meta")  # no data: any op that met a CPU tensor here would fail
    words = word_attention(weights, [0, 0, 1, 2], [0, 1, 1])
    assert words.device.type == "meta" and words.shape == (2, 3)


@pytest.mark.parametrize("command", ["translate", "serve"])
def test_translate_and_serve_take_the_kernels_of_training_or_their_own(command):
    import importlib

    from nmt.cli.options import kernels, translation_model

    parse = importlib.import_module(f"nmt.cli.{command}")._parse_args
    assert kernels(parse(["--ckpt", "m.ckpt"])) is None  # the library's default: Kernels(), as training's
    asked = parse(["--ckpt", "m.ckpt", "--attention-backends", "math", "flash", "--float32-matmul", "highest"])
    assert kernels(asked) == Kernels(("math", "flash"), "highest")
    with pytest.raises(ValueError, match="^--attention-backends math math: a backend is named twice$"):
        translation_model(parse(["--ckpt", "never-loaded.ckpt", "--attention-backends", "math", "math"]))
    with pytest.raises(SystemExit):  # a word that names no backend: argparse's choices, its usage line
        parse(["--ckpt", "m.ckpt", "--attention-backends", "fast"])


def test_backends_that_cannot_run_on_the_cpu_are_refused_before_anything_runs():
    from omegaconf import OmegaConf

    from nmt.cli.options import translation_model
    from nmt.cli.translate import _parse_args
    from nmt.settings import check_config

    cfg = compose("model=transformer", "trainer.accelerator=cpu")
    cfg.kernels = OmegaConf.create({"attention": ["cudnn", "efficient"]})
    message = ("kernels.attention=[cudnn,efficient]: none of these runs on the CPU, where this run trains: add math, "
               "e.g. kernels.attention=[cudnn,efficient,math]")  # fmt: skip
    with pytest.raises(ValueError) as e:
        check_config(cfg)
    assert str(e.value) == message
    cfg.kernels.attention = ["cudnn", "efficient", "math"]  # the advice, followed
    check_config(cfg)
    args = _parse_args(["--ckpt", "never-loaded.ckpt", "--device", "cpu", "--attention-backends", "cudnn"])
    with pytest.raises(ValueError) as e:
        translation_model(args)  # refused before the checkpoint is read: it does not exist
    assert str(e.value) == ("--attention-backends cudnn: none of these runs on the CPU (--device cpu): add math, "
                            "e.g. --attention-backends cudnn math")  # fmt: skip
