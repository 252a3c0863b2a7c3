"""Ensembles, checkpoint averaging and the EMA of the weights."""

import pytest
import torch

import average as average_cli
from conftest import run_train
from nmt import checkpoint
from nmt.checkpoint import CheckpointError
from nmt.cli import translate as cli
from nmt.inference import ensemble
from nmt.inference.search import SearchOptions
from nmt.inference.translator import Translator

LINES = ["Le chat mange la pomme rouge.", "Est-ce que tu dors ?", "", "Je ne mange pas."]


@pytest.fixture(scope="module")
def ckpt(trained):
    return str(trained["bahdanau"] / "checkpoints" / "last.ckpt")


@pytest.mark.parametrize("beam", [1, 3])
def test_an_ensemble_of_a_checkpoint_with_itself_is_that_checkpoint(ckpt, beam):
    alone, tok, _ = ensemble.load_ensemble([ckpt])
    pair, *_ = ensemble.load_ensemble([ckpt, ckpt])
    assert isinstance(pair, ensemble.Ensemble) and not isinstance(alone, ensemble.Ensemble)
    search = SearchOptions(beam_size=beam, nbest=beam)
    one, two = (Translator(m, tok, search).translate(LINES) for m in (alone, pair))
    for a, b in zip(one, two):
        assert a.texts == b.texts and a.scores == b.scores
        for (_, ha), (_, hb) in zip(a.parts, b.parts):
            assert all(torch.equal(x.attention, y.attention) for x, y in zip(ha, hb))


def test_an_ensemble_averages_the_members_log_probabilities(trained, ckpt):
    best = str(next((trained["bahdanau"] / "checkpoints").glob("best-*.ckpt")))
    pair, *_ = ensemble.load_ensemble([ckpt, best])
    a, b = pair.members
    src, src_len = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
    state = pair.encode(src, src_len)
    logp, _, row = pair.step(state, torch.tensor([2]))
    la, _, ra = a.step(a.encode(src, src_len), torch.tensor([2]))
    lb, _, rb = b.step(b.encode(src, src_len), torch.tensor([2]))
    assert torch.allclose(logp, (la + lb) / 2) and torch.allclose(row, (ra + rb) / 2)
    assert not torch.allclose(la, lb)  # two different members


def test_a_transformer_and_an_rnn_model_decode_as_one_ensemble(trained, ckpt, tmp_path, capsys):
    other = str(trained["transformer"] / "checkpoints" / "last.ckpt")
    pair, tok, choice = ensemble.load_ensemble([other, ckpt])
    src, src_len = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4])
    logp, _, row = pair.step(pair.encode(src, src_len), torch.tensor([2]))
    t, r = pair.members
    lt, _, rt = t.step(t.encode(src, src_len), torch.tensor([2]))
    lr, _, rr = r.step(r.encode(src, src_len), torch.tensor([2]))
    assert rt.shape[1:3] == (2, 4) and rr.shape[1:3] == (1, 1)  # members of other layers and heads
    assert torch.allclose(logp, (lt + lr) / 2) and row.shape == (1, 1, 1, 4)  # the members' head means, averaged
    for beam in (1, 3):
        results = Translator(pair, tok, SearchOptions(beam_size=beam), alignment=choice).translate(LINES)
        assert [bool(r.text) for r in results] == [bool(line) for line in LINES]
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    args = ["--input", str(tmp_path / "in.fr"), "--alignments", str(tmp_path / "a")]
    assert cli.main(["--ckpt", other, ckpt, *args]) == 0
    assert len(capsys.readouterr().out.split("\n")) == len(LINES) + 1


def test_ensemble_members_must_share_their_vocabularies(ckpt, tmp_path, capsys):
    tok = checkpoint.load_checkpoint(ckpt).tokenizer
    other = tok.state_dict() | {"tgt": tok.src_bytes}  # a real model, another vocabulary (of the same size)
    b = tmp_path / "b.ckpt"
    torch.save(torch.load(ckpt, weights_only=True) | {"nmt": {"format": 3, "tokenizer": other}}, b)
    with pytest.raises(CheckpointError, match="b.ckpt: another target vocabulary than .*: the members of an ensemble"):
        ensemble.load_ensemble([ckpt, str(b)])
    (tmp_path / "in.fr").write_text("\n".join(LINES) + "\n")
    outputs = []
    for ckpts in ([ckpt], [ckpt, ckpt]):  # translate.py --ckpt a.ckpt b.ckpt
        assert cli.main(["--ckpt", *ckpts, "--input", str(tmp_path / "in.fr"), "--beam-size", "2"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].split("\n")) == len(LINES) + 1


def test_averaging_checkpoints(trained, ckpt, tmp_path, capsys):
    best = str(next((trained["bahdanau"] / "checkpoints").glob("best-*.ckpt")))
    assert average_cli.main(["--out", str(tmp_path / "avg.ckpt"), "--ckpt", ckpt, best]) == 0
    avg = checkpoint.load_checkpoint(tmp_path / "avg.ckpt")
    a, b = (checkpoint.load_checkpoint(p).model.state_dict() for p in (ckpt, best))
    for k, v in avg.model.state_dict().items():
        assert torch.allclose(v, (a[k] + b[k]) / 2, atol=1e-6), k
    # one checkpoint "averaged" with itself translates as it does
    assert average_cli.main(["--out", str(tmp_path / "same.ckpt"), "--ckpt", ckpt, ckpt]) == 0
    same = checkpoint.load_checkpoint(tmp_path / "same.ckpt")
    orig = checkpoint.load_checkpoint(ckpt)
    texts = [Translator(m.model, m.tokenizer).translate(LINES) for m in (orig, same)]
    assert [t.text for t in texts[0]] == [t.text for t in texts[1]]
    # another model's checkpoint cannot be averaged in
    luong = str(trained["luong"] / "checkpoints" / "last.ckpt")
    assert average_cli.main(["--out", str(tmp_path / "bad.ckpt"), "--ckpt", ckpt, luong]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {luong}: its weights do not fit those of {ckpt}")


@pytest.mark.slow
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
    checkpoint.load_checkpoint(averaged)
    proc = run_train(tmp_path / "bad", data_cache, "average_best=3", check=False)
    assert proc.returncode == 1 and "average_best=3: must be at most callbacks.checkpoint.save_top_k (1)" in proc.stderr


def test_average_out_into_a_missing_folder_or_onto_a_folder_is_one_line(ckpt, tmp_path, capsys):
    cases = [
        (
            tmp_path / "nope" / "a.ckpt",
            f"--out {tmp_path / 'nope' / 'a.ckpt'}: cannot write: folder {tmp_path / 'nope'} does not exist",
        ),
        (tmp_path, f"--out {tmp_path}: is a folder; give a file name"),
    ]
    for out, message in cases:
        assert average_cli.main(["--out", str(out), "--ckpt", ckpt, ckpt]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: {message}"), err
    assert not [p for p in tmp_path.rglob("*") if ".part" in p.name]  # nothing left behind


def variant(ckpt, path, scale: float, step: int, plain: float | None = None) -> str:
    """A copy of ``ckpt`` with ``scale`` times its weights (and, as an EMA run keeps, ``plain`` times as plain ones)."""
    c = torch.load(ckpt, weights_only=True)
    weights = c["state_dict"]
    c["state_dict"] = {k: v * scale for k, v in weights.items()}
    if plain is not None:
        c["current_model_state"] = {k: v * plain for k, v in weights.items()}
    c["global_step"] = step
    torch.save(c, path)
    return str(path)


def scaled(path, reference) -> float:
    """The one factor by which ``path``'s weights are ``reference``'s (fails if there is none)."""
    got, ref = torch.load(path, weights_only=True)["state_dict"], torch.load(reference, weights_only=True)["state_dict"]
    k = next(k for k, v in ref.items() if v.abs().sum() > 0)
    factor = float(got[k].abs().sum() / ref[k].abs().sum())
    assert all(torch.allclose(got[n], ref[n] * factor, atol=1e-5) for n in ref)
    return factor


def test_averaging_keeps_the_largest_step_in_any_order_and_can_average_the_plain_weights(ckpt, tmp_path):
    from itertools import permutations

    from nmt.inference.averaging import average_checkpoints

    factors = ((1.0, 30), (2.0, 50), (3.0, 10))  # (factor, step)
    runs = [variant(ckpt, tmp_path / f"{s}.ckpt", s, step, plain=2 * s) for s, step in factors]
    for order in permutations(runs):
        out = average_checkpoints(order, tmp_path / "avg.ckpt")
        assert torch.load(out, weights_only=True)["global_step"] == 50
        assert scaled(out, ckpt) == pytest.approx(2.0)  # the mean of 1, 2 and 3 times the weights
    assert scaled(average_checkpoints(runs, tmp_path / "plain.ckpt", plain=True), ckpt) == pytest.approx(4.0)


@pytest.mark.parametrize("mode, expected", [("max", 3.0), ("min", 2.0)])
def test_average_best_averages_the_best_k_of_more_kept(ckpt, tmp_path, mode, expected):
    from types import SimpleNamespace

    from nmt.inference.averaging import average_best

    scores = {1.0: 10.0, 2.0: 40.0, 3.0: 20.0, 4.0: 30.0}  # weights' factor -> validation score
    record = {variant(ckpt, tmp_path / f"{s}.ckpt", s, int(s)): torch.tensor(v) for s, v in scores.items()}
    callback = SimpleNamespace(best_k_models=record, mode=mode, dirpath=str(tmp_path))
    # max: 40 and 30 (factors 2 and 4); min: 10 and 20 (factors 1 and 3)
    assert scaled(average_best(callback, 2), ckpt) == pytest.approx(expected)


def test_average_best_of_a_run_cut_short_averages_what_it_kept(ckpt, tmp_path, caplog):
    from types import SimpleNamespace

    from nmt.inference.averaging import average_best

    record = {variant(ckpt, tmp_path / f"{s}.ckpt", s, int(s)): torch.tensor(s) for s in (1.0, 3.0)}
    callback = SimpleNamespace(best_k_models=record, mode="max", dirpath=str(tmp_path))
    with caplog.at_level("WARNING"):
        assert scaled(average_best(callback, 5), ckpt) == pytest.approx(2.0)  # both kept, of the 5 asked
    assert "average_best=5: the run kept 2 checkpoint(s) by its end; averaging those 2" in caplog.text
    assert average_best(SimpleNamespace(best_k_models={}, mode="max", dirpath=str(tmp_path)), 5) is None


def test_an_ensemble_reads_as_the_mean_of_its_members(trained, ckpt):
    from nmt.alignment.choice import attention_map

    best = str(next((trained["bahdanau"] / "checkpoints").glob("best-*.ckpt")))
    pair, *_ = ensemble.load_ensemble([ckpt, best])
    src, src_len, tokens = torch.tensor([[5, 6, 7, 8]]), torch.tensor([4]), [9, 10, 11]
    logp, cross, self_attention = pair.read(src, src_len, tokens)
    (la, ca, _), (lb, cb, _) = (m.read(src, src_len, tokens) for m in pair.members)
    assert torch.allclose(logp, (la + lb) / 2) and not torch.allclose(la, lb)
    assert cross.shape == (1, 1, 4, 4) and torch.allclose(cross[0, 0], (attention_map(ca) + attention_map(cb)) / 2)
    assert self_attention is None


def test_ensemble_members_with_another_source_vocabulary_are_refused(ckpt, tmp_path):
    tok = checkpoint.load_checkpoint(ckpt).tokenizer
    b = tmp_path / "b.ckpt"
    other = tok.state_dict() | {"src": tok.tgt_bytes}
    torch.save(torch.load(ckpt, weights_only=True) | {"nmt": {"format": 3, "tokenizer": other}}, b)
    with pytest.raises(CheckpointError, match="b.ckpt: another source vocabulary than .*last.ckpt: the members"):
        ensemble.load_ensemble([ckpt, str(b)])


def test_averaging_is_the_element_wise_mean_of_hand_made_weights_in_their_own_dtype(monkeypatch, tmp_path):
    """#82 §6, in the fast lane: three checkpoints' weights, averaged by hand (float64 sums, each tensor back in its
    own dtype), the largest step, every source named."""
    from types import SimpleNamespace

    from nmt.inference import averaging

    weights = {
        "a": {"w": torch.tensor([1.0, 2.0]), "h": torch.tensor([1.0, 3.0], dtype=torch.bfloat16)},
        "b": {"w": torch.tensor([3.0, 6.0]), "h": torch.tensor([2.0, 3.0], dtype=torch.bfloat16)},
        "c": {"w": torch.tensor([5.0, 1.0]), "h": torch.tensor([3.0, 3.0], dtype=torch.bfloat16)},
    }
    steps = {"a": 30, "b": 90, "c": 60}
    monkeypatch.setattr(checkpoint, "read", lambda path: str(path))
    monkeypatch.setattr(checkpoint, "check_vocabularies", lambda *_: None)  # one model's, by construction
    monkeypatch.setattr(checkpoint, "check_fits", lambda *_: None)
    monkeypatch.setattr(checkpoint.Checkpoint, "of", staticmethod(
        lambda name, path, plain=False: SimpleNamespace(weights=weights[name], step=steps[name], tokenizer_state={})))
    written = {}
    monkeypatch.setattr(checkpoint, "averaged", lambda first, state, step, sources: dict(state=state, step=step,
                                                                                          sources=sources))
    monkeypatch.setattr(checkpoint, "write", lambda out, ckpt: written.update(ckpt) or out)
    averaging.average_checkpoints(["a", "b", "c"], tmp_path / "avg.ckpt")
    assert written["step"] == 90 and written["sources"] == ["a", "b", "c"]
    assert written["state"]["w"].tolist() == [3.0, 3.0] and written["state"]["w"].dtype == torch.float32
    assert written["state"]["h"].tolist() == [2.0, 3.0] and written["state"]["h"].dtype == torch.bfloat16
