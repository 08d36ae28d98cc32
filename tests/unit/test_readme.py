"""The README tells the truth: it lists exactly the operations the gateway serves, and every
link in the repository's Markdown resolves inside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.iam.api import IAM_ACTIONS, STS_ACTIONS
from gateway.notify.sns import ACTIONS as SNS_ACTIONS
from gateway.s3.handler import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def test_the_readme_lists_every_operation_served_and_no_other() -> None:
    bullets = [
        line.partition("\n\n")[0].partition(":")[2]
        for line in re.split(r"\n(?=- )", _section(README.read_text(), "What it speaks"))
        if line.startswith("- ")
    ]
    # Operation names are the capitalised words of the bullets before their explanations.
    named = {
        word
        for bullet in bullets
        for word in re.findall(
            r"\b(?:[A-Z][a-z]+|ID(?=[A-Z])){2,}(?:V2)?\b", re.sub(r"\([^)]*\)", "", bullet)
        )
    }
    assert named == set(OPERATIONS) | set(IAM_ACTIONS) | set(STS_ACTIONS) | set(SNS_ACTIONS)


def _markdown_files() -> list[Path]:
    skip = {".venv", ".venv-peers", "node_modules", ".git"}
    return [p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(path: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor
        resolved = (path.parent / target.partition("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{path.name}: {target} leaves the repository"
        assert resolved.exists(), f"{path.name}: {target} does not exist"


# The README and docs/ are what a reader of the repository opens: a file they name (a path
# such as `gateway/store/fsck.py` or docs/iam.md, a module's function such as
# `gateway/keyring.read_kms_keys`, or a bare file name such as pyproject.toml) must be one it
# holds. (Other Markdown, such as s3tests/README.md, also names files of other repositories.)
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
_TOP = sorted(
    p.name
    for p in ROOT.iterdir()
    if p.is_dir() and not p.name.startswith(".") and not p.name.endswith(".egg-info")
)
_TOPS = "|".join(map(re.escape, _TOP))
_PATH = re.compile(rf"(?<![\w./:-])((?:{_TOPS})/[\w./-]*[\w/])")
_BARE = re.compile(r"(?<![\w./:$-])([\w-]+\.(?:md|py|toml|yml|yaml|cfg))(?![\w/-])")


def _defines(module: Path, name: str) -> bool:
    return bool(
        re.search(
            rf"^\s*(?:async def|def|class) {name}\b|^\s*{name}\s*[:=]", module.read_text(), re.M
        )
    )


def _named_file_missing(name: str) -> bool:
    """Whether `name`, a path from the repository's root (a module's dotted attribute after
    it: gateway/keyring.read_kms_keys), is a file or folder the repository does not hold."""
    if (ROOT / name).exists() or (ROOT / f"{name}.py").exists():
        return False
    folder, _, last = name.rpartition("/")
    module, _, attributes = last.partition(".")
    source = ROOT / folder / f"{module}.py"
    return not (
        attributes and source.is_file() and all(_defines(source, a) for a in attributes.split("."))
    )


def _bare_file_missing(doc: Path, name: str) -> bool:
    """Whether a bare file name (DESIGN.md, digest.py) is nowhere in the repository: not at
    its root, not beside the doc, not in any of its folders."""
    if (ROOT / name).exists() or (doc.parent / name).exists():
        return False
    return not any(next((ROOT / top).rglob(name), None) for top in _TOP)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_a_doc_names_is_in_the_repository(doc: Path) -> None:
    text = doc.read_text()
    missing = [n for n in _PATH.findall(text) if _named_file_missing(n)]
    missing += [n for n in _BARE.findall(text) if _bare_file_missing(doc, n)]
    assert not missing, (
        f"{doc.relative_to(ROOT)} names what the repository does not hold: {missing}"
    )
