"""The interactive alignment viewer: one self-contained HTML file (``templates/alignments.html`` + the data as JSON).

Each hypothesis carries the cross-attention of every layer and head, and for the chosen one (an
:class:`~nmt.alignment.choice.AttentionChoice`: what alignments read) the map at the piece level and at the
word level (the aggregation the AER uses), the hard links (each target word to its most attended
source word) and, for a decoder with self-attention, the look-ahead map of the chosen layer. The page
lets one pick any layer, head (or a layer's head mean) and readout, and recomputes the word map and
links from it as :mod:`nmt.alignment` does. No network, no external script.
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.views.translation_attention import SentenceAttention

TEMPLATE = Path(__file__).with_name("templates") / "alignments.html"
# inside <script>, markup ("</script>", "<!--") changes how the page parses, and U+2028/U+2029 end a line in
# older JavaScript: JSON allows every one of them as a \uXXXX escape, which no text can turn back into markup
SCRIPT_SAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def render(data: dict) -> str:
    """The viewer page with ``data`` (``{"title", "steps": [{"label", "sentences"}], "live" (optional)}``) inside.

    ``live`` (the server's page): ``{"beam_size", "nbest", "max_beam", "max_lines", "max_chars"}``; the page then
    has a form that posts to ``translate`` and draws the answer's sentences.
    """
    payload = json.dumps(data, ensure_ascii=False).translate(SCRIPT_SAFE)
    return TEMPLATE.read_text(encoding="utf-8").replace("__DATA__", payload)


def write_report(path: str | Path, steps: list[tuple[str, list[SentenceAttention | dict]]], title: str) -> None:
    """Write the viewer for ``steps`` (label, sentences, each a :class:`SentenceAttention` or its JSON form);
    several steps get a slider."""
    json_form = lambda s: s if isinstance(s, dict) else s.to_json()  # noqa: E731
    steps_data = [{"label": label, "sentences": [json_form(s) for s in sentences]} for label, sentences in steps]
    html = render({"title": title, "steps": steps_data})
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
