"""#81: a new model family is two files, its part and its ``conf/model/`` YAML. The docs' example (a convolutional
encoder, docs/developing.md "Adding a model") is held to that: built from the page's own blocks, it meets the encoder
protocol, trains a step and decodes step by step as it trains (fast); written into a copy of the tree with nothing
else changed, the parametrised model tests, train.py and translate.py take it (slow)."""

import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import yaml

from conftest import FAMILIES, ROOT, TINY_DATA, TRAIN_ENV, tiny_model_overrides

PAGE = ROOT / "docs" / "developing.md"
FENCE = re.compile(r"^```(python|yaml)\n(.*?)^```", re.M | re.S)


def example() -> tuple[str, str]:
    """The page's example part (the Python block that defines ``ConvEncoder``) and its YAML."""
    found = FENCE.findall(PAGE.read_text(encoding="utf-8"))
    code = next(text for lang, text in found if lang == "python" and "class ConvEncoder" in text)
    config = next(text for lang, text in found if lang == "yaml" and "nmt.models.conv.ConvEncoder" in text)
    return code, config


@pytest.fixture
def conv_family(monkeypatch) -> dict:
    """The example's module, importable as the YAML names it (``nmt.models.conv``), and its model settings."""
    code, config = example()
    module = types.ModuleType("nmt.models.conv")
    exec(compile(code, str(PAGE), "exec"), module.__dict__)  # noqa: S102 - the page's own code, as a reader saves it
    monkeypatch.setitem(sys.modules, "nmt.models.conv", module)
    settings = yaml.safe_load(config)
    settings.pop("name")
    return settings


def test_the_docs_example_encoder_trains_a_step_and_decodes_as_it_trains(conv_family):
    from nmt.models.parts import EncoderPart, lacking
    from nmt.models.seq2seq import build_model
    from nmt.specials import PAD

    settings = conv_family | {"emb_size": 16, "readout_size": 16, "dropout": 0.0}
    settings["encoder"] |= {"hidden_size": 12}
    settings["decoder"] |= {"hidden_size": 20, "attn_hidden": 10}
    torch.manual_seed(0)
    model = build_model(src_vocab_size=40, tgt_vocab_size=30, **settings)
    assert lacking(model.encoder, EncoderPart) == []
    src, src_len = torch.randint(4, 40, (3, 7)), torch.tensor([7, 4, 2])
    for i, n in enumerate(src_len):
        src[i, n:] = PAD
    tgt = torch.randint(4, 30, (3, 6))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    before = model.loss(src, src_len, tgt[:, :-1], tgt[:, 1:])[0]
    before.backward()
    assert all(p.grad is not None for p in model.encoder.parameters())  # the step reaches every convolution
    opt.step()
    model.eval()
    logits, cross, _ = model(src, src_len, tgt)
    state, steps = model.encode(src, src_len), []
    for t in range(tgt.shape[1]):
        logp, state, _ = model.step(state, tgt[:, t])
        steps.append(logp)
    assert torch.allclose(torch.stack(steps, 1), logits.log_softmax(-1), atol=1e-5)  # teacher forcing = step by step
    assert (cross[1, ..., 4:] == 0).all()  # no attention to padding, and what is there changes nothing
    noisy = src.clone()
    noisy[1, 4:], noisy[2, 2:] = 9, 13
    assert torch.allclose(model(noisy, src_len, tgt)[0], logits, atol=1e-6)
    empty = model.encode(torch.zeros(2, 0, dtype=torch.long), torch.tensor([0, 0]))  # a batch of empty sources
    assert model.step(empty, torch.tensor([2, 2]))[0].isfinite().all()


def copy_of_the_tree(dest: Path) -> Path:
    """The checkout's code, configs and tests (not its runs, caches or environment) in ``dest``."""
    keep = ("nmt", "conf", "tests", "docs", "train.py", "translate.py", "align.py", "pyproject.toml")
    for name in keep:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", "_build", "*.pyc"))  # fmt: skip
        elif source.exists():
            shutil.copy(source, dest / name)
    return dest


@pytest.mark.slow
def test_a_new_family_needs_only_its_part_file_and_its_yaml(tmp_path):
    code, config = example()
    tree = copy_of_the_tree(tmp_path / "tree")
    (tree / "nmt" / "models" / "conv.py").write_text(f'"""A convolutional encoder."""\n\n{code}', encoding="utf-8")
    (tree / "conf" / "model" / "conv.yaml").write_text(config, encoding="utf-8")
    env = {**TRAIN_ENV, "PYTHONPATH": str(tree)}
    run = lambda *cmd: subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=900)  # noqa: E731
    model_tests = ["tests/test_models.py", "tests/test_parts.py", "tests/test_settings.py", "tests/test_search.py"]
    listed = run(sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", "-m", "not slow",
                 *model_tests).stdout  # fmt: skip
    ids: dict[str, set[str]] = {}  # test function -> the words of its parameter ids
    for test, params in re.findall(r"^(\S+?)\[(.*)\]$", listed, re.M):
        ids.setdefault(test, set()).update(re.findall(r"\w+", params))
    over_families = [t for t, words in ids.items() if set(FAMILIES) <= words]  # parametrised over every family
    assert len(over_families) >= 8 and all("conv" in ids[t] for t in over_families), over_families
    tests = run(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *model_tests)
    assert tests.returncode == 0, tests.stdout[-3000:]
    tiny = tiny_model_overrides("model=conv", root=tree)
    train = run(sys.executable, "train.py", "model=conv", *TINY_DATA, *tiny,
                f"hydra.run.dir={tmp_path / 'run'}", f"data.cache_dir={tmp_path / 'cache'}", "trainer.max_steps=4",
                "trainer.val_check_interval=4", "trainer.check_val_every_n_epoch=null", "trainer.accelerator=cpu",
                "trainer.enable_progress_bar=false", "callbacks.heatmaps.num_sentences=1")  # fmt: skip
    assert train.returncode == 0, train.stderr[-3000:]
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    (tmp_path / "in.fr").write_text("le chat dort .\nje mange une pomme .\n", encoding="utf-8")
    out = run(sys.executable, "translate.py", "--ckpt", str(ckpt), "--input", str(tmp_path / "in.fr"))
    assert out.returncode == 0 and len(out.stdout.strip().splitlines()) == 2, out.stderr[-2000:]
