"""The layout rules: small files and functions, parts that know nothing of Lightning where they should not."""

import ast
import subprocess
import sys

from conftest import ROOT

WORD_TABLES = {"nmt/data/lexicon.py", "nmt/data/words.py"}  # the built-in corpus's word lists, not code
ENTRY_SCRIPTS = ("train.py", "translate.py", "average.py", "serve.py")
CODE = sorted(p for p in (ROOT / "nmt").rglob("*.py")) + [ROOT / n for n in ENTRY_SCRIPTS]


def relative(path) -> str:
    return str(path.relative_to(ROOT))


def test_no_file_over_400_lines_and_no_function_over_60():
    long_files = [
        (relative(p), n)
        for p in CODE
        if (n := len(p.read_text().splitlines())) > 400 and relative(p) not in WORD_TABLES
    ]
    long_functions = [
        (f"{relative(p)}:{node.name}", node.end_lineno - node.lineno + 1)
        for p in CODE
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 60
    ]
    assert not long_files and not long_functions, (long_files, long_functions)


def test_inference_and_preparation_never_load_lightning_or_the_training_module():
    """Translating, ensembles, averaging, export, the engine and corpus preparation load neither Lightning nor the
    LightningModule."""
    modules = ["nmt.checkpoint", "nmt.translator", "nmt.ensemble", "nmt.averaging", "nmt.viewer", "nmt.data.prepared"]
    modules += ["nmt.server", "nmt.service", "nmt.batcher", "nmt.loading", "nmt.engine", "nmt.export"]
    code = f"import sys; import {', '.join(modules)}; print(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "('lightning', 'pytorch_lightning', 'lightning_fabric') or m in ('nmt.module', 'nmt.callbacks')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]", out
