"""Advice that an error gives (a key to set, a command to run) works when followed, as a user would follow it.

The Ctrl-C advice (the resume command) is followed in test_train.py, the damaged-cache advice in
test_prepared_cache.py."""

import re

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from conftest import ROOT, run_train
from nmt.data.readers import CorpusError

KEY = re.compile(r"\b([a-z_]+(?:\.[a-z_]+)+)(?:=([^\s,;)]+))?")  # a config key, and the value advised if any


def config(*overrides: str):
    """The config train.py composes from these command-line overrides (Hydra refuses keys that do not exist)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def prepare(cfg):
    dm = instantiate(cfg.data)
    dm.prepare_data()
    dm.setup("fit")
    return dm


@pytest.mark.slow
def test_a_corpus_line_that_is_not_utf8_names_a_key_that_skips_it(tmp_path):
    lines = [f"le chat {i} mange\tthe cat {i} eats".encode() for i in range(300)]
    lines[50] = b"le chat \xff mange\tthe cat eats"
    (tmp_path / "c.tsv").write_bytes(b"\n".join(lines) + b"\n")
    corpus = ["data=tsv", f"data.source.path={tmp_path / 'c.tsv'}", f"data.cache_dir={tmp_path / 'cache'}",
              "data.prepare.spm.vocab_size=120"]  # fmt: skip
    with pytest.raises(CorpusError) as e:
        prepare(config(*corpus))
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'c.tsv'}:51: invalid UTF-8"), message
    advised = re.search(r"\(set (\S+=\S+) ", message).group(1)
    dm = prepare(config(*corpus, advised))  # followed: the line is skipped, the rest prepared
    assert sum(len(dm.references(s).src) for s in ("valid", "test")) + len(dm.corpus.splits["train"]) == 299


@pytest.mark.slow
def test_a_loss_that_is_not_finite_advises_keys_that_exist(tmp_path):
    proc = run_train(tmp_path / "run", tmp_path / "cache", "optim.lr=1e38", "schedule=constant", check=False)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and last.startswith("error: training loss is "), proc.stderr[-2000:]
    advice = last.split("stopping;", 1)[1]
    keys = KEY.findall(advice)
    assert {k for k, _ in keys} >= {"optim.lr", "trainer.gradient_clip_val"}  # (the run is in float32 already)
    base = config()
    for key, value in keys:  # each key exists where the advice puts it, and takes the advised value
        current = OmegaConf.select(base, key)
        assert current is not None, key
        assert str(OmegaConf.select(config(f"{key}={value or current}"), key)) == str(value or current)


@pytest.mark.slow
def test_guided_alignment_without_links_advises_a_command_that_makes_them(trained, tmp_path, capsys):
    import shlex

    import align as cli

    pairs = [(f"le chat {i} mange la pomme", f"the cat {i} eats the apple") for i in range(300)]
    (tmp_path / "c.tsv").write_text("".join(f"{fr}\t{en}\n" for fr, en in pairs))
    corpus = ["data=tsv", f"data.source.path={tmp_path / 'c.tsv'}", f"data.cache_dir={tmp_path / 'cache'}",
              "data.prepare.spm.vocab_size=120"]  # fmt: skip
    with pytest.raises(InstantiationException) as e:  # refused as the data module is made, before preparation
        instantiate(config(*corpus).data, links=True)
    command = re.search(r"e\.g\. from (python align\.py .*?> FILE)", str(e.value)).group(1)
    (tmp_path / "TRAIN.fr").write_text("".join(fr + "\n" for fr, _ in pairs))
    (tmp_path / "TRAIN.en").write_text("".join(en + "\n" for _, en in pairs))
    ckpt = str(trained["bahdanau"] / "checkpoints" / "last.ckpt")
    args = shlex.split(command.replace("MODEL", ckpt).replace("TRAIN.", str(tmp_path / "TRAIN.")))
    assert args[:2] == ["python", "align.py"] and args[-2:] == [">", "FILE"]
    assert cli.main(args[2:-2]) == 0  # followed: its standard output is the links file
    (tmp_path / "links").write_text(capsys.readouterr().out)
    dm = instantiate(config(*corpus, f"data.align={tmp_path / 'links'}").data, links=True)
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.training_links.offsets) == len(dm.corpus.splits["train"]) + 1 and len(dm.training_links.src) > 0
    assert "set data.align=eflomal" in str(e.value)  # the other advice, followed
    dm = instantiate(config(*corpus, "data.align=eflomal").data, links=True)
    dm.prepare_data()
    dm.setup("fit")
    assert len(dm.training_links.offsets) == len(dm.corpus.splits["train"]) + 1 and len(dm.training_links.src) > 0
