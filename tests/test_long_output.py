"""Long outputs: a search step costs the same however long the output is and whatever its length budget. Counted,
not timed: the elements every tensor operation of the search makes, outside the model's own step; and the
decoders' caches, appended to in place rather than copied. bench/speed/long_output.py times the curve."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conftest import FAMILIES, tiny_model
from nmt.inference.search import SearchOptions, translate_batch
from nmt.specials import EOS


class Unstoppable(torch.nn.Module):
    """A model's one-step API with EOS held back until the budget forces it; records each step's state."""

    def __init__(self, model):
        super().__init__()
        self.model, self.states, self.inside = model, [], False

    def encode(self, src, src_len):
        return self.model.encode(src, src_len)

    def step(self, state, prev):
        self.inside = True
        logp, state, row = self.model.step(state, prev)
        self.inside = False
        logp[:, EOS] = -1e4
        self.states.append(state)
        return logp, state, row

    def reorder_state(self, state, index):
        self.inside = True
        out = self.model.reorder_state(state, index)
        self.inside = False
        return out


class SearchWork(TorchDispatchMode):
    """Elements made by the search's own tensor operations (not the model's step or state reordering), per step."""

    def __init__(self, model: Unstoppable):
        super().__init__()
        self.model, self.per_step = model, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.model.inside and self.model.states:  # between steps: the search's bookkeeping
            while len(self.per_step) < len(self.model.states):
                self.per_step.append(0)
            made = out if isinstance(out, (tuple, list)) else [out]
            self.per_step[-1] += sum(t.numel() for t in made if isinstance(t, torch.Tensor))
        return out


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("beam", [1, 3])
def test_a_search_step_costs_the_same_whatever_the_output_length_and_budget(name, beam):
    torch.manual_seed(0)
    src, src_len = torch.randint(4, 40, (2, 30)), torch.tensor([30, 30])
    per_step = {}
    for budget in (30, 150):
        model = Unstoppable(tiny_model(name).eval())
        with SearchWork(model) as work:
            translate_batch(model, src, src_len, SearchOptions(beam_size=beam, max_len_a=0, max_len_b=budget))
        assert len(model.states) == budget
        per_step[budget] = work.per_step
    short, long = per_step[30], per_step[150]
    assert long[20] <= 1.2 * short[20]  # the same step costs the same under a budget 5x as long ...
    assert max(long[20:-2]) <= 1.2 * long[20]  # ... and a late step as much as an early one


@pytest.mark.parametrize("name,key", [("transformer", "self_k"), ("luong", "past")])
def test_the_decoder_cache_is_appended_to_not_copied(name, key):
    torch.manual_seed(0)
    src, src_len = torch.randint(4, 40, (2, 9)), torch.tensor([9, 9])
    model = Unstoppable(tiny_model(name).eval())
    translate_batch(model, src, src_len, SearchOptions(beam_size=1, max_len_a=0, max_len_b=300))
    buffers = {s[key].data_ptr() for s in model.states}  # greedy, every row alive: one buffer per growth
    assert len(model.states) == 300 and len(buffers) <= 6  # 16, 32, ..., 512 positions of room
