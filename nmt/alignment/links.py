"""Word links as Pharaoh text (``0-0 1-2``: source word - target word, 0-based) and back."""

from __future__ import annotations

from collections.abc import Sequence


def parse_links(text: str) -> set[tuple[int, int]]:
    """``"0-0 1-2"`` -> ``{(0, 0), (1, 2)}`` (source word, target word)."""
    return {(int(i), int(j)) for i, j in (link.split("-") for link in text.split())}


def pharaoh(links: set[tuple[int, int]] | Sequence[tuple[int, int]]) -> str:
    """``{(0, 0), (2, 1)}`` -> ``"0-0 2-1"``: source (French) word - target (English) word, 0-based."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))

