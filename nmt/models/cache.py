"""What one-step decoding keeps of the positions already decoded (keys and values, past states): a buffer that
is appended to in place and grows by doubling, so a step costs the same however long the output already is."""

from __future__ import annotations

from torch import Tensor


def append(buffer: Tensor, length: int, new: Tensor, dim: int) -> Tensor:
    """``buffer``, of which the first ``length`` positions along ``dim`` are in use, with ``new`` written after
    them, in place; a buffer too small is replaced by one of twice the room (O(1) a position, amortised)."""
    n = new.shape[dim]
    if length + n > buffer.shape[dim]:
        shape = list(buffer.shape)
        shape[dim] = max(2 * buffer.shape[dim], length + n, 16)
        grown = buffer.new_zeros(shape)
        grown.narrow(dim, 0, length).copy_(buffer.narrow(dim, 0, length))
        buffer = grown
    buffer.narrow(dim, length, n).copy_(new)
    return buffer


def decoded(state: dict[str, Tensor]) -> int:
    """Positions already decoded, from a state's ``length`` (one count per row, all equal)."""
    return int(state["length"][0]) if len(state["length"]) else 0
