"""The layout rules: folders that import only downwards, one name per concept, small files and functions, and
Lightning only where training is."""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

from forked import run_script

from conftest import ROOT, TRAIN_ENV

ENTRY_SCRIPTS = ("train.py", "translate.py", "align.py", "average.py", "serve.py", "export.py")
CODE = sorted(p for p in (ROOT / "nmt").rglob("*.py")) + [ROOT / n for n in ENTRY_SCRIPTS]

# Each folder of nmt/ (and each module at its root) with its layer: code imports only from lower layers or its own
# folder. The shared root modules at the bottom; the textbook models, the alignment arithmetic (the eflomal aligner
# included) and what a target takes beside each other; then corpora (the built-in corpus's generator in nmt/data/toy/)
# and the config's keys, checkpoints, their CTranslate2 export, inference (search, translator, ensembles, the aligner,
# both engines and the one loader), the views of attention and the settings' ranges, the server, training, and the
# commands on top.
LAYERS = {
    "specials": 0, "errors": 0, "progress": 0, "hardware": 0, "commands": 0, "scores": 0, "bounds": 0,
    "models": 1, "alignment": 1, "arguments": 1,
    "data": 2, "config_keys": 2,
    "checkpoint": 3,
    "ct2_export": 4,
    "inference": 5,
    "views": 6, "settings": 6,
    "serving": 7,
    "training": 8,
    "cli": 9,
}  # fmt: skip
# What the issue that set the layout asks in so many words, beside the layers (a folder and what it never imports)
NEVER = {
    "models": {"inference", "ct2_export", "serving", "training", "cli", "data", "views"},
    "data": {"models", "inference", "ct2_export", "training", "serving", "views", "cli"},
    "alignment": {"models", "inference", "ct2_export", "training", "serving", "views", "cli", "data"},
}


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def unit(module: str) -> str:
    """The folder of nmt/ a module is in, or the root module's own name."""
    return module.split(".")[1]


def imports(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> the module-level arrows behind it, for every import of nmt in nmt/ (those
    inside functions too)."""
    arrows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in (root / "nmt").rglob("*.py"):
        name = str(path.relative_to(root))
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{name}:{node.lineno}: a relative import; name the module in full")
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "nmt":
                targets = [f"{node.module}.{a.name}" if node.module == "nmt" else node.module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.split(".")[0] == "nmt"]
            else:
                continue
            for target in targets:
                if module.count(".") and target.count(".") and unit(module) != unit(target):
                    arrows[unit(module), unit(target)].append(f"{name}:{node.lineno} imports {target}")
    return arrows


def layering_errors(arrows: dict[tuple[str, str], list[str]]) -> list[str]:
    """Every arrow that points to a higher layer or sideways into another folder of the same layer, every unit
    without a layer, and every import the NEVER table forbids."""
    errors = []
    for (source, target), where in sorted(arrows.items()):
        if source not in LAYERS or target not in LAYERS:
            errors.append(f"{source} -> {target}: give {source if source not in LAYERS else target} a layer")
        elif LAYERS[target] >= LAYERS[source] or target in NEVER.get(source, ()):
            errors.append(f"{source} (layer {LAYERS[source]}) -> {target} (layer {LAYERS[target]}): {where[0]}")
    return errors


def test_folders_import_only_downwards():
    """No arrow back up, so no cycle between folders: each arrow goes to a lower layer (LAYERS)."""
    assert not layering_errors(imports())


def test_the_layering_check_fails_on_an_arrow_back_up(tmp_path):
    """The check itself: an alignment module that reads the tokenizer (the arrow the layout removed) and a model that
    imports the translator are both reported."""
    (tmp_path / "nmt" / "alignment").mkdir(parents=True)
    (tmp_path / "nmt" / "models").mkdir()
    (tmp_path / "nmt" / "alignment" / "words.py").write_text("from nmt.data.tokenizer import WORD_START\n")
    (tmp_path / "nmt" / "models" / "seq2seq.py").write_text("def f():\n    from nmt.inference import translator\n")
    errors = layering_errors(imports(tmp_path))
    expected = ["alignment (layer 1) -> data (layer 2)", "models (layer 1) -> inference (layer 5)"]
    assert [e.split(":")[0] for e in errors] == expected


def test_one_name_per_concept():
    """No two public classes or module-level functions of the package share a name."""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in CODE:
        if path.parent == ROOT:
            continue
        for node in ast.parse(path.read_text()).body:
            named = isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            if named and not node.name.startswith("_") and (node.name, path.parent.name) != ("main", "cli"):
                seen[node.name].append(relative(path))  # each command's main() apart
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def stems_used_twice(root: Path = ROOT) -> dict[str, list[str]]:
    """Module names (a file's stem, ``__init__`` aside) that two modules or folders of ``root/nmt`` share."""
    seen: dict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "nmt").rglob("*")):
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file():
            seen[path.stem].append(str(path.relative_to(root)))
    return {stem: paths for stem, paths in seen.items() if len(paths) > 1}


def test_one_module_name_per_concept():
    """A module's name says which concept it holds, once: no stem names two modules (or a module and a folder)."""
    assert not stems_used_twice()


def test_the_module_name_check_fails_on_a_name_used_twice(tmp_path):
    for path in ("nmt/data/guide.py", "nmt/inference/guide.py", "nmt/views/__init__.py", "nmt/cli/views.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert stems_used_twice(tmp_path) == {"guide": ["nmt/data/guide.py", "nmt/inference/guide.py"],
                                          "views": ["nmt/cli/views.py", "nmt/views"]}  # fmt: skip


def command_imports(root: Path = ROOT) -> list[str]:
    """Each import of one command's module by another module of ``nmt/cli/`` (a command: a module with ``main``)."""
    folder = root / "nmt" / "cli"
    trees = {p.stem: ast.parse(p.read_text()) for p in sorted(folder.glob("*.py"))}
    commands = {name for name, tree in trees.items()
                if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)}  # fmt: skip
    found = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "nmt.cli":
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nmt.cli."):
                targets = [node.module.split(".")[2]]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[2] for a in node.names if a.name.startswith("nmt.cli.")]
            else:
                continue
            found += [f"nmt/cli/{name}.py:{node.lineno} imports nmt.cli.{t}" for t in targets if t in commands]
    return found


def test_no_command_imports_another():
    """What two commands share lives in nmt/cli/options.py (or another module without a main), never in a command."""
    assert not command_imports()


def test_the_command_import_check_fails_on_a_command_that_imports_another(tmp_path):
    (tmp_path / "nmt" / "cli").mkdir(parents=True)
    (tmp_path / "nmt" / "cli" / "align.py").write_text("def main():\n    pass\n")
    (tmp_path / "nmt" / "cli" / "options.py").write_text("X = 1\n")
    (tmp_path / "nmt" / "cli" / "translate.py").write_text(
        "from nmt.cli.options import X\nfrom nmt.cli.align import main as m\n\ndef main():\n"
        "    from nmt.cli import align\n"
    )
    assert command_imports(tmp_path) == ["nmt/cli/translate.py:2 imports nmt.cli.align",
                                         "nmt/cli/translate.py:5 imports nmt.cli.align"]  # fmt: skip


def test_entry_scripts_are_shims_over_the_package():
    """The top-level commands only call nmt.cli; what they do lives in the package."""
    for name in ENTRY_SCRIPTS:
        tree = ast.parse((ROOT / name).read_text())
        imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert imported == [f"nmt.cli.{name.removesuffix('.py')}"], (name, imported)
        assert len((ROOT / name).read_text().splitlines()) <= 12, name


def test_no_file_over_400_lines_and_no_function_over_60():
    """The package and its commands, the benchmarks and the docs' page generator: no file over 400 lines, no function
    over 60."""
    sized = [*CODE, *sorted((ROOT / "bench").rglob("*.py")), *sorted((ROOT / "docs" / "generator").rglob("*.py"))]
    assert len(sized) > len(CODE) + 30  # bench/ and docs/generator/ are there
    long_files = [(relative(p), n) for p in sized if (n := len(p.read_text().splitlines())) > 400]
    long_functions = [
        (f"{relative(p)}:{node.name}", node.end_lineno - node.lineno + 1)
        for p in sized
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > 60
    ]
    assert not long_files and not long_functions, (long_files, long_functions)


def test_lightning_is_imported_by_training_alone():
    """Nothing outside nmt/training imports Lightning, and loading every other module of the package loads neither
    Lightning nor any module of nmt/training."""
    outside = [
        f"{relative(p)}:{node.lineno}"
        for p in CODE
        if "training" not in p.parts
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            (name or "").split(".")[0] in ("lightning", "pytorch_lightning", "lightning_fabric")
            for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module])
        )
    ]
    assert not outside
    modules = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "nmt").rglob("*.py")
        if p.name != "__init__.py" and "training" not in p.parts and p.parent.name != "cli"
    ]
    code = f"import sys; import {', '.join(sorted(modules))}; print(sorted(m for m in sys.modules if "
    code += "m.split('.')[0] in ('lightning', 'pytorch_lightning', 'lightning_fabric') or m.startswith('nmt.training'))"
    code += ")"
    proc = run_script([sys.executable, "-c", code], ROOT, TRAIN_ENV)  # forked: the server loads none of them
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr[-2000:]


MAP = re.compile(r"^May import: (.*?)\.\nStart with: (\S+)", re.M | re.S)


def test_every_folder_has_a_map_that_says_what_it_may_import_and_where_to_start():
    """``help(nmt.<folder>)`` says what the folder holds, what it may import (exactly what LAYERS and NEVER allow)
    and which of its modules to read first."""
    folders = sorted(p.parent for p in (ROOT / "nmt").glob("*/__init__.py"))
    assert {f.name for f in folders} == {u for u in LAYERS if (ROOT / "nmt" / u).is_dir()}
    for folder in folders:
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and (found := MAP.search(doc)), f"nmt/{folder.name}/__init__.py: no map (May import:, Start with:)"
        said = {name.strip().removeprefix("nmt.") for name in found[1].split(",")}
        allowed = {u for u, layer in LAYERS.items() if layer < LAYERS[folder.name]} - NEVER.get(folder.name, set())
        assert said == allowed, (folder.name, said ^ allowed)
        assert (folder / found[2].rstrip(",")).is_file(), (folder.name, found[2])


def test_bench_imports_nothing_of_the_commands():
    """A benchmark measures the package's parts, not a command's ``main()``: nothing under bench/ imports nmt.cli."""
    found = []
    for path in sorted((ROOT / "bench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + ([f"nmt.{a.name}" for a in node.names] if node.module == "nmt" else [])
            cli = [n for n in names if n.split(".")[:2] == ["nmt", "cli"]]
            found += [f"{relative(path)}:{node.lineno} imports {n}" for n in cli]
    assert not found, found


def unnamed_tests(tests: Path, package: Path) -> list[str]:
    """The test files named after a module of the package (``test_<stem>.py``) that do not test it: neither import
    it nor, for a command's module (``nmt.cli``), run or import its entry script ``<stem>.py``."""
    modules = {p.stem: ".".join(p.relative_to(package.parent).with_suffix("").parts)
               for p in package.rglob("*.py") if p.stem != "__init__"}  # fmt: skip
    modules |= {
        p.parent.name: ".".join(p.parent.relative_to(package.parent).parts) for p in package.rglob("__init__.py")
    }
    wrong = []
    for path in sorted(tests.glob("test_*.py")):
        stem = path.stem.removeprefix("test_")
        if (module := modules.get(stem)) is None:
            continue
        text, parent = path.read_text(encoding="utf-8"), module.rpartition(".")[0]
        ways = [rf"\b{re.escape(module)}\b", rf"from {re.escape(parent)} import [^\n]*\b{stem}\b"]
        if module.startswith(f"{package.name}.cli."):
            ways += [rf"\b{stem}\.py\b", rf"^import {stem}\b"]
        if not any(re.search(way, text, re.M) for way in ways):
            wrong.append(f"{path.name}: named after {module}, which it does not test")
    return wrong


def test_a_test_file_named_after_a_module_tests_that_module():
    """#81: ``tests/test_<stem>.py`` named after a package module imports it (a command's: runs its script)."""
    assert unnamed_tests(ROOT / "tests", ROOT / "nmt") == []


def test_the_test_name_check_fails_on_a_test_named_after_a_module_it_does_not_test(tmp_path):
    package = tmp_path / "nmt"
    (package / "models").mkdir(parents=True)
    (package / "models" / "cache.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_cache.py").write_text("from nmt.data import atomic\n")
    assert unnamed_tests(tmp_path / "tests", package) == [
        "test_cache.py: named after nmt.models.cache, which it does not test"
    ]
    (tmp_path / "tests" / "test_cache.py").write_text("from nmt.models import cache\n")
    assert unnamed_tests(tmp_path / "tests", package) == []


def unlisted_modules(package: Path, architecture: str, api: str) -> list[str]:
    """The modules of ``package`` that its folder's map (the ``__init__`` docstring) or ``docs/architecture.md``
    leaves out (each names a module as ``name.py``, ``name`` or ``:mod:`` of it), or that ``docs/api.md`` documents
    no ``automodule`` of; and the modules ``docs/api.md`` documents that do not exist."""
    out = []
    documented = set(re.findall(r"automodule:: ([\w.]+)", api))
    modules = {".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
               for p in package.rglob("*.py")}  # fmt: skip
    out += [f"docs/api.md: {m}: no such module" for m in sorted(documented - modules)]
    for path in sorted(package.rglob("*.py")):
        if path.stem == "__init__":
            continue
        init = path.parent / "__init__.py"
        names = (f"``{path.name}``", f"``{path.stem}``", f".{path.stem}`")
        if path.parent != package and init.is_file() and not any(n in init.read_text(encoding="utf-8") for n in names):
            out.append(f"{path.relative_to(package.parent)}: not in its folder's map")
        if f"`{path.name}`" not in architecture and f"`{path.relative_to(package.parent)}`" not in architecture:
            out.append(f"{path.relative_to(package.parent)}: not in docs/architecture.md")
        if ".".join(path.relative_to(package.parent).with_suffix("").parts) not in documented:
            out.append(f"{path.relative_to(package.parent)}: no automodule in docs/api.md")
    return out


def test_every_module_is_in_its_folder_s_map_and_the_architecture_page():
    """#81: the hand-kept lists of modules name every module there is (and api.md none that is not)."""
    pages = [(ROOT / "docs" / name).read_text(encoding="utf-8") for name in ("architecture.md", "api.md")]
    assert unlisted_modules(ROOT / "nmt", *pages) == []


def test_the_module_list_check_fails_on_a_module_no_list_names(tmp_path):
    (tmp_path / "nmt" / "data").mkdir(parents=True)
    (tmp_path / "nmt" / "data" / "__init__.py").write_text('"""Corpora (``sources.py``)."""\n')
    for name in ("sources.py", "targets.py"):
        (tmp_path / "nmt" / "data" / name).write_text("")
    api = ".. automodule:: nmt.data.sources\n.. automodule:: nmt.data.moved"
    assert unlisted_modules(tmp_path / "nmt", "`sources.py`", api) == [
        "docs/api.md: nmt.data.moved: no such module",
        "nmt/data/targets.py: not in its folder's map",
        "nmt/data/targets.py: not in docs/architecture.md",
        "nmt/data/targets.py: no automodule in docs/api.md",
    ]
