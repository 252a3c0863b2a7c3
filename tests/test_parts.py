"""#81: the part contract as code (nmt.models.parts): every shipped family's parts satisfy it, and build_part
refuses a part that does not in one line naming what it lacks."""

import sys
import types

import pytest
from torch import Tensor, nn

from conftest import FAMILIES, tiny_model
from nmt.models.parts import DecoderPart, EncoderPart, lacking
from nmt.models.seq2seq import build_model


@pytest.mark.parametrize("name", FAMILIES)
def test_every_shipped_family_s_parts_satisfy_the_contract(name):
    model = tiny_model(name)
    assert isinstance(model.encoder, EncoderPart) and lacking(model.encoder, EncoderPart) == []
    assert isinstance(model.decoder, DecoderPart) and lacking(model.decoder, DecoderPart) == []


class TwoArgumentEncoder(nn.Module):
    """An encoder written to the contract as an old page gave it: forward(src, src_len), no host_len."""

    def __init__(self, *, vocab_size: int, emb_size: int, dropout: float, pad_id: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size, padding_idx=pad_id)
        self.output_size = emb_size

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor]:
        states = self.embedding(src)
        return states, states.mean(1)


class NoSizeEncoder(TwoArgumentEncoder):
    def __init__(self, *, vocab_size: int, emb_size: int, dropout: float, pad_id: int):
        super().__init__(vocab_size=vocab_size, emb_size=emb_size, dropout=dropout, pad_id=pad_id)
        del self.output_size

    def forward(self, src: Tensor, src_len: Tensor, host_len: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return super().forward(src, src_len)


@pytest.fixture
def fixture_parts(monkeypatch):
    """The classes above as a module of the package (build_part builds classes under nmt. only)."""
    module = types.ModuleType("nmt.models.fixture_parts")
    module.TwoArgumentEncoder, module.NoSizeEncoder = TwoArgumentEncoder, NoSizeEncoder
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__name__


@pytest.mark.parametrize(
    ("cls", "lacks"),
    [
        ("TwoArgumentEncoder", "forward(src, src_len, host_len=None)"),
        ("NoSizeEncoder", "the attribute output_size"),
    ],
)
def test_a_part_that_breaks_the_contract_is_refused_naming_what_it_lacks(fixture_parts, cls, lacks):
    decoder = {"_target_": "nmt.models.decoders.LuongDecoder", "hidden_size": 8, "num_layers": 1}
    with pytest.raises(ValueError) as e:
        build_model(
            src_vocab_size=20, tgt_vocab_size=20, emb_size=8, dropout=0.0, tie_embeddings=False, decoder=decoder,
            encoder={"_target_": f"{fixture_parts}.{cls}"},
        )  # fmt: skip
    assert str(e.value) == (
        f"model.encoder._target_={fixture_parts}.{cls}: not an EncoderPart (nmt.models.parts): it lacks {lacks}"
    )
