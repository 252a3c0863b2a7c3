"""The fields of a block of corpus text, with whitespace collapsed where numpy finds it needs to be.

French text has non-breaking spaces before punctuation and corpora have doubled or trailing
spaces; every field is collapsed to single spaces as ``" ".join(text.split())`` would, but only the
few fields that need it are rebuilt in Python.
"""

from __future__ import annotations

import functools

import numpy as np


def collapse_spaces(text: str) -> str:
    """``text`` with every run of whitespace one space, none at the ends."""
    return " ".join(text.split())


_SPACE, _SEP, _OTHER, _LEAD = 1, 2, 4, 8


@functools.cache
def _byte_classes(tsv: bool) -> tuple[np.ndarray, np.ndarray]:
    """A class per byte value (``_SPACE``, ``_SEP``: a line end or, in a TSV block, a tab, ``_OTHER``: other
    single-byte whitespace for ``str.split``, ``_LEAD``: the first byte of some multi-byte whitespace), and the
    multi-byte whitespace as big-endian integers. Built on first use: scanning Unicode takes 0.2 s."""
    spaces = [chr(c).encode() for c in range(0x110000) if chr(c).isspace()]
    classes = np.zeros(256, np.uint8)
    classes[[s[0] for s in spaces if len(s) > 1]] = _LEAD
    classes[[s[0] for s in spaces if len(s) == 1]] = _OTHER
    classes[ord(" ")] = _SPACE
    classes[[ord("\t"), ord("\n")] if tsv else [ord("\n")]] = _SEP
    return classes, np.array([int.from_bytes(s.ljust(3, b"\0"), "big") for s in spaces if len(s) > 1])


class Fields:
    """The fields of a valid block (ending at line ends and, for a TSV block, at tabs), ``n`` a line.

    Numpy finds the few fields whose whitespace :func:`collapse_spaces` would change (any but single inner
    spaces), so that only those are rebuilt.
    """

    def __init__(self, fields: list[str], n: int, messy: np.ndarray):
        self.fields, self.n, self.messy = fields, n, messy

    @classmethod
    def of(cls, blob: bytes, text: str, lines: int, tsv: bool) -> Fields | None:
        """The fields of ``blob`` (``text``: decoded and in NFC); None unless every line has as many."""
        if not lines:
            return None
        b = np.frombuffer(blob, np.uint8)
        classes, multi = _byte_classes(tsv)
        kind = classes[b]
        seps = np.flatnonzero(kind == _SEP)
        n = 1
        if tsv:
            tab = b[seps] == 9
            n = int(tab.sum()) // lines + 1
            per_line = np.bincount(np.cumsum(~tab)[tab], minlength=lines)  # a tab's line: the line ends before it
            if len(per_line) != lines or np.any(per_line != n - 1):
                return None
        edge = np.ones(len(b) + 2, dtype=bool)  # a space, a separator, or the start or end of the block
        edge[1:-1] = kind & (_SPACE | _SEP) != 0
        messy = (kind == _SPACE) & (edge[:-2] | edge[2:])  # a space at the start or end of a field, or by another
        messy |= kind == _OTHER
        lead = np.flatnonzero(kind == _LEAD)
        if len(lead):
            at = [b[np.minimum(lead + k, len(b) - 1)].astype(np.int64) for k in range(3)]
            two, three = at[0] << 16 | at[1] << 8, at[0] << 16 | at[1] << 8 | at[2]
            messy[lead[np.isin(two, multi) | np.isin(three, multi)]] = True
        fields = text.replace("\n", "\t").split("\t") if tsv else text.split("\n")
        return cls(fields, n, np.unique(np.searchsorted(seps, np.flatnonzero(messy))))

    def column(self, c: int) -> list[str]:
        """Column ``c``, whitespace collapsed."""
        out = self.fields[c :: self.n]
        for i in (self.messy[self.messy % self.n == c] // self.n).tolist():
            out[i] = collapse_spaces(out[i])
        return out

    def raw(self, c: int) -> list[str]:
        return self.fields[c :: self.n]
