"""docs/tour.ipynb, the guided tour: it runs top to bottom, and the committed copy is what the current code gives."""

import json
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # the notebook, run on a kernel

TOUR = ROOT / "docs" / "tour.ipynb"
TEXTBOOK_CELLS = 8  # part 1's code cells: seeded, cheap and deterministic, so their committed outputs are checked
# The tour's training, shortened for the test (a third of the updates on a fifth of the pairs): the same cells run
# and draw the same figures; what they print about the trained models is the committed run's, not compared.
SHORTER = {
    '"data.source.train_size=20000"': '"data.source.train_size=4000"',
    '"trainer.max_steps=800"': '"trainer.max_steps=300"',  # the snapshots after 100 and 300 updates are shown
    '"trainer.max_steps=600"': '"trainer.max_steps=200"',
}


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def text_outputs(cell) -> list[str]:
    """A cell's printed and returned text (figures left out: their bytes vary with the platform's fonts)."""
    texts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            texts.append(out.text)
        elif out.output_type in ("execute_result", "display_data") and "text/plain" in out.data:
            if not any(k.startswith("image/") for k in out.data):
                texts.append(out.data["text/plain"])
    return texts


def written() -> set[str]:
    """What git sees beside the tracked files of the checkout (new files, ignored ones), caches left out."""
    out = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=ROOT, capture_output=True, text=True)
    return {line for line in out.stdout.splitlines() if "__pycache__" not in line}


@pytest.mark.timeout(900)
def test_the_tour_runs_and_gives_the_committed_outputs(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's temporary folder, which the tour must leave empty
    before = written()
    committed = nbformat.read(TOUR, as_version=4)
    nb = nbformat.read(TOUR, as_version=4)
    shortened = set()
    for old, new in SHORTER.items():
        cells = [k for k, c in enumerate(code_cells(nb)) if old in c.source]
        assert len(cells) == 1, old  # the tour changed: update SHORTER
        code_cells(nb)[cells[0]].source = code_cells(nb)[cells[0]].source.replace(old, new)
        shortened.add(cells[0])
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    client.execute()  # any cell's error fails here, naming the cell
    fresh, saved = code_cells(nb), code_cells(committed)
    assert all(c.outputs for c in fresh[1:TEXTBOOK_CELLS])  # all but the imports print or draw
    pictures = sum("image/png" in o.get("data", {}) for c in fresh for o in c.outputs)
    assert pictures >= 7  # additive attention, the look-ahead mask, attention over training (2), the AER curve, the
    # three models, the Transformer's grid
    for k in sorted(set(range(TEXTBOOK_CELLS)) - shortened):  # a shortened cell prints what its shorter run did
        assert text_outputs(fresh[k]) == text_outputs(saved[k]), f"code cell {k + 1}: {json.dumps(saved[k].source)}"
    # the committed copy is such a run: every cell once, in order, without error, the pictures where this run drew
    assert [c.execution_count for c in saved] == list(range(1, len(saved) + 1))
    assert not [o for c in saved for o in c.outputs if o.output_type == "error"]
    drew = [["image/png" in o.get("data", {}) for o in c.outputs] for c in fresh]
    assert drew == [["image/png" in o.get("data", {}) for o in c.outputs] for c in saved]
    left = [p.name for p in tmp_path.iterdir() if not p.name.startswith("torchinductor_")]  # torch's own cache
    assert not left and written() == before  # the tour's folder removed, nothing written in the checkout
