"""Sphinx configuration of gradkern's documentation site (MyST Markdown, furo).

Build: `pip install ".[docs]" && sphinx-build -W -b html docs <out>` (ci/run does, warnings are errors).
"""

from __future__ import annotations

import re

import gradkern

project = "gradkern"
author = "the gradkern authors"
copyright = "the gradkern authors"
release = version = gradkern.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: `{eval-rst}` blocks for autodoc, `$...$`-free pages, anchors for `page.md#heading` links
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# Docstrings are written with Markdown's single backticks: render them as code, not as rST's italics
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "furo"
html_title = f"gradkern {release}"


# gradkern's docstrings are plain text with Markdown's `code` spans, not reStructuredText: escape what rST
# would read as markup outside those spans (`*` emphasis, `|x|` substitutions, `name_` references, `\`), so a
# docstring renders as written and -W holds without rewriting the code's docstrings.
_CODE_SPAN = re.compile(r"(`[^`]*`)")
_MARKUP = re.compile(r"([*|\\]|(?<=\w)_(?=\W|$))")


def _plain_docstring(app, what, name, obj, options, lines):
    for k, line in enumerate(lines):
        parts = _CODE_SPAN.split(line)
        lines[k] = "".join(p if p.startswith("`") else _MARKUP.sub(r"\\\1", p) for p in parts)


def setup(app):
    app.connect("autodoc-process-docstring", _plain_docstring)
