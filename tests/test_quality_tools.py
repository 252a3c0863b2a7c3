"""Ensembles, checkpoint averaging and the EMA of the weights."""

import pytest
import torch

import average as average_cli
import translate as cli
from conftest import run_train
from nmt import checkpoint, ensemble
from nmt.checkpoint import CheckpointError
from nmt.search import SearchOptions
from nmt.translator import Translator

LINES = ["Le chat mange la pomme rouge.", "Est-ce que tu dors ?", "", "Je ne mange pas."]


@pytest.fixture(scope="module")
def ckpt(trained):
    return str(trained["bahdanau"] / "checkpoints" / "last.ckpt")


@pytest.mark.parametrize("beam", [1, 3])
def test_an_ensemble_of_a_checkpoint_with_itself_is_that_checkpoint(ckpt, beam):
    alone, tok = ensemble.load([ckpt])
    pair, _ = ensemble.load([ckpt, ckpt])
    assert isinstance(pair, ensemble.Ensemble) and not isinstance(alone, ensemble.Ensemble)
    search = SearchOptions(beam_size=beam, nbest=beam)
    one, two = (Translator(m, tok, search).translate(LINES) for m in (alone, pair))
    for a, b in zip(one, two):
        assert a.texts == b.texts and a.scores == b.scores
        for (_, ha), (_, hb) in zip(a.parts, b.parts):
            assert all(torch.equal(x.attention, y.attention) for x, y in zip(ha, hb))


def test_an_ensemble_averages_the_members_log_probabilities(trained, ckpt):
    best = str(next((trained["bahdanau"] / "checkpoints").glob("best-*.ckpt")))
    pair, _ = ensemble.load([ckpt, best])
    a, b = pair.members
    src, src_len = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
    state = pair.encode(src, src_len)
    logp, _, row = pair.step(state, torch.tensor([2]))
    la, _, ra = a.step(a.encode(src, src_len), torch.tensor([2]))
    lb, _, rb = b.step(b.encode(src, src_len), torch.tensor([2]))
    assert torch.allclose(logp, (la + lb) / 2) and torch.allclose(row, (ra + rb) / 2)
    assert not torch.allclose(la, lb)  # two different members


def test_ensemble_members_must_share_their_vocabularies(ckpt, tmp_path, capsys):
    tok = checkpoint.load(ckpt).tokenizer
    other = tok.state_dict() | {"tgt": tok.src_bytes}  # a real model, another vocabulary (of the same size)
    b = tmp_path / "b.ckpt"
    torch.save(torch.load(ckpt, weights_only=True) | {"nmt": {"format": 3, "tokenizer": other}}, b)
    with pytest.raises(CheckpointError, match="b.ckpt: another target vocabulary than .*: the members of an ensemble"):
        ensemble.load([ckpt, str(b)])
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    outputs = []
    for ckpts in ([ckpt], [ckpt, ckpt]):  # translate.py --ckpt a.ckpt b.ckpt
        assert cli.main(["--ckpt", *ckpts, "--input", str(tmp_path / "in.fr"), "--beam-size", "2"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].split("\n")) == len(LINES) + 1


def test_averaging_checkpoints(trained, ckpt, tmp_path, capsys):
    best = str(next((trained["bahdanau"] / "checkpoints").glob("best-*.ckpt")))
    assert average_cli.main(["--out", str(tmp_path / "avg.ckpt"), ckpt, best]) == 0
    avg = checkpoint.load(tmp_path / "avg.ckpt")
    a, b = (checkpoint.load(p).model.state_dict() for p in (ckpt, best))
    for k, v in avg.model.state_dict().items():
        assert torch.allclose(v, (a[k] + b[k]) / 2, atol=1e-6), k
    # one checkpoint "averaged" with itself translates as it does
    assert average_cli.main(["--out", str(tmp_path / "same.ckpt"), ckpt, ckpt]) == 0
    same = checkpoint.load(tmp_path / "same.ckpt")
    orig = checkpoint.load(ckpt)
    texts = [Translator(m.model, m.tokenizer).translate(LINES) for m in (orig, same)]
    assert [t.text for t in texts[0]] == [t.text for t in texts[1]]
    # another model's checkpoint cannot be averaged in
    luong = str(trained["luong"] / "checkpoints" / "last.ckpt")
    assert average_cli.main(["--out", str(tmp_path / "bad.ckpt"), ckpt, luong]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {luong}: its weights do not fit those of {ckpt}")


def test_ema_training_and_averaging_the_best_at_the_end(data_cache, tmp_path):
    run = tmp_path / "ema"
    overrides = ["averaging=ema", "callbacks.ema.update_starting_at_step=0", "callbacks.ema.decay=0.9"]
    overrides += ["average_best=2", "callbacks.checkpoint.save_top_k=2"]
    proc = run_train(run, data_cache, *overrides)
    # a checkpoint saved during training (at its end Lightning copies the average into the model)
    last = torch.load(next((run / "checkpoints").glob("best-*.ckpt")), weights_only=True)
    # Lightning's EMAWeightAveraging: the saved weights are the average; the current ones are kept beside them
    assert "current_model_state" in last
    assert any(not torch.equal(last["state_dict"][k], last["current_model_state"][k]) for k in last["state_dict"])
    averaged = run / "checkpoints" / "averaged.ckpt"
    assert averaged.is_file() and len(torch.load(averaged, weights_only=True)["nmt"]["averaged_from"]) == 2
    assert f"best checkpoint: {averaged}" in proc.stderr + proc.stdout
    checkpoint.load(averaged)
    proc = run_train(tmp_path / "bad", data_cache, "average_best=3", check=False)
    assert proc.returncode == 1 and "average_best=3: must be at most callbacks.checkpoint.save_top_k (1)" in proc.stderr
