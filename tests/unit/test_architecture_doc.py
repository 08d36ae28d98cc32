"""docs/architecture.md names every module of the package with its job: a module added without
a line there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _named() -> set[str]:
    """The paths the layers' table names: a line's first column holds comma-separated paths,
    an unindented one from the repository's root (the first sets the folder of the others),
    an indented one (by two spaces) relative to the last unindented folder; a line indented
    further continues the description above it."""
    text = DOC.read_text()
    table = re.search(r"## Layers\s+```\n(.*?)```", text, re.DOTALL)
    assert table is not None, "no table under ## Layers"
    named: set[str] = set()
    folder = ""
    for line in table.group(1).splitlines():
        if line.startswith("   "):  # a description's second line
            continue
        column = re.split(r"\s{2,}", line.strip())[0] if line.strip() else ""
        if not column or not re.match(r"[\w<>]", column):
            continue
        names = [n.strip() for n in column.split(",") if n.strip()]
        if line.startswith(" "):
            named.update(folder + n for n in names)
            continue
        first = names[0]
        here = first if first.endswith("/") else first.rpartition("/")[0] + "/"
        named.add(first)
        named.update(here + n for n in names[1:])
        if first.endswith("/"):
            folder = first
    return named


def _covered(module: str, named: set[str]) -> bool:
    if module in named:
        return True
    folder, _, name = module.rpartition("/")
    if name == "__init__.py" and folder + "/" in named:
        return True
    # ops/<family>.py: every module of that folder.
    return any(
        n.endswith("/<family>.py") and folder + "/" == n[: -len("<family>.py")] for n in named
    )


def test_every_module_is_in_the_architecture_doc() -> None:
    named = _named()
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "gateway").rglob("*.py"))
    assert "gateway/s3/writes.py" in named  # the table was read
    assert [m for m in modules if not _covered(m, named)] == []


def test_what_the_doc_names_exists() -> None:
    missing = [n for n in _named() if "<" not in n and not (ROOT / n.rstrip("/")).exists()]
    assert missing == []
