"""The documentation site (docs/) covers what the code has: every public name in the API reference, every
library kernel, every GRADKERN_* variable the package reads, every error, every module in the architecture's
module map; and the README's links lead to files that exist. Quick: nothing is compiled. (The pages' Python
blocks run in tests/meta/test_readme.py; `sphinx-build -W` runs in ci/run.)"""

from __future__ import annotations

import re
from pathlib import Path

import gradkern
import gradkern.kernels

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "gradkern"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_api_reference_names_every_public_name():
    text = page("api.md")
    missing = [n for n in gradkern.__all__ if f"gradkern.{n}" not in text and f"gk.{n}" not in text]
    assert not missing, f"docs/api.md does not document {missing}"


def test_kernel_library_page_documents_every_kernel():
    text = page("kernel-library.md")
    missing = [n for n in gradkern.kernels.__all__ if f"gradkern.kernels.{n}\n" not in text]
    assert not missing, f"docs/kernel-library.md does not document {missing}"


def test_environment_page_lists_every_variable_the_package_reads():
    read = set()
    for path in [*SRC.rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]:
        read |= set(re.findall(r"""(?:environ(?:\.get)?\(?\[?|env_(?:int|float)\()["'](GRADKERN_[A-Z0-9_]+)""",
                               path.read_text()))
    assert len(read) >= 10, read  # the pattern still finds them
    table = page("environment.md")
    missing = sorted(v for v in read if f"| `{v}` |" not in table)
    assert not missing, f"docs/environment.md does not list {missing}"


def test_errors_page_names_every_error():
    text = page("errors.md")
    errors = [n for n in gradkern.__all__ if isinstance(getattr(gradkern, n), type)
              and issubclass(getattr(gradkern, n), (gradkern.GradkernError, Warning))]
    assert len(errors) >= 12
    missing = [n for n in errors if f"`gk.{n}`" not in text]
    assert not missing, f"docs/errors.md does not say when {missing} is raised"


def test_module_map_has_every_module():
    text = page("architecture.md").split("## Module map", 1)[1]
    modules = [p.relative_to(SRC) for p in SRC.rglob("*.py") if p.name != "__init__.py" or p.parent == SRC]
    modules += [p.relative_to(SRC) for p in SRC.rglob("*.h")]
    missing = sorted(str(m) for m in modules if f"`{m.name}`" not in text)
    assert not missing, f"docs/architecture.md's module map lacks {missing}"
    for folder in {m.parts[0] for m in modules if len(m.parts) > 1}:
        assert f"`{folder}/`" in text, f"docs/architecture.md's module map lacks the package {folder}/"


def test_readme_links_lead_to_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, f"README.md links to {missing}"


def test_the_package_cites_its_own_docs():
    """The code explains itself through docs/ (docs/architecture.md, "Where the former design sections went"):
    no citation of the design document outside the repository, and every docs page it names exists."""
    sources = {p: p.read_text(encoding="utf-8") for p in (ROOT / "src" / "gradkern").rglob("*.py")}
    around = [p for folder in ("kernels", "tests", "benchmarks", "ci", "examples") for p in (ROOT / folder).rglob("*")
              if p.suffix in (".py", ".md", "") and p.is_file() and p != Path(__file__)]
    texts = {**sources, **{p: p.read_text(encoding="utf-8", errors="replace") for p in around}}
    stale = [str(p.relative_to(ROOT)) for p, text in texts.items() if "DESIGN §" in text]
    assert not stale, f"cite docs/ pages instead of DESIGN §: {stale}"
    cited = {m for text in sources.values() for m in re.findall(r"docs/([\w-]+\.md)", text)}
    assert len(cited) >= 10
    missing = sorted(m for m in cited if not (ROOT / "docs" / m).exists())
    assert not missing, f"the package cites docs pages that do not exist: {missing}"
