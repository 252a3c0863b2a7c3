"""#81: a preset of a config group (``conf/<group>/<option>.yaml``) writes its own section, or names in its header each
other section it writes (and why): a reader of ``trainer=gpu`` learns there that it sets the batch and learning rate."""

import re
from pathlib import Path

import yaml

from conftest import ROOT

GLOBAL = "# @package _global_"


def foreign_sections(path: Path) -> list[str]:
    """The top-level sections a preset writes besides its group's that its leading comment does not name."""
    text = path.read_text(encoding="utf-8")
    if path.parent.name == "experiment" or not text.startswith(GLOBAL):
        return []  # an experiment sets what it needs by nature; a packaged preset writes its group's section alone
    header = " ".join(line.lstrip("#") for line in text.splitlines() if line.startswith("#"))
    written = [k for k in (yaml.safe_load(text) or {}) if k not in ("defaults", path.parent.name)]
    return [k for k in written if k not in re.findall(r"\w+", header)]


def test_each_preset_names_the_other_sections_it_writes():
    presets = sorted((ROOT / "conf").glob("*/*.yaml"))
    assert len(presets) > 20
    unnamed = {str(p.relative_to(ROOT)): foreign_sections(p) for p in presets if foreign_sections(p)}
    assert not unnamed, unnamed


def test_the_preset_check_finds_a_section_written_unnamed(tmp_path):
    planted = tmp_path / "trainer" / "fast.yaml"
    planted.parent.mkdir()
    body = "trainer:\n  devices: 1\ndata:\n  max_tokens: 8\n"
    planted.write_text(f"{GLOBAL}\n# One GPU, the trainer's settings.\n{body}")
    assert foreign_sections(planted) == ["data"]
    planted.write_text(f"{GLOBAL}\n# One GPU: the trainer's settings, and data (the batch for it).\n{body}")
    assert foreign_sections(planted) == []
