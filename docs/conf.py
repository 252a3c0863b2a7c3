"""Sphinx configuration of the docs site: Markdown pages (MyST), the tour notebook rendered from its saved outputs
(myst-nb), the API reference from the docstrings (autodoc, napoleon). Built in CI with warnings as errors:

    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

project = "Attention NMT"
author = "the Attention NMT authors"
copyright = "2026, " + author

extensions = [
    "myst_nb",  # Markdown (MyST) and notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md", "generator"]  # generator: the results pages' code
root_doc = "index"

# no dollarmath: the few formulas are written in Unicode, so that no page loads MathJax (a script from a CDN) and the
# site reads the same offline
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4  # [text](page.md#a-heading) links resolve
nb_execution_mode = "off"  # the tour is shown with its committed outputs; tests/test_tour.py executes it
nb_merge_streams = True

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # Lightning's own docstrings use roles of its docs build
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = "Attention NMT"
html_static_path = ["_static"]
html_css_files = ["readable.css"]  # code blocks wrap, and tables fit the column at 1366 px
