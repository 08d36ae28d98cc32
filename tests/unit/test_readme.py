"""The README tells the truth: it lists exactly the operations the gateway serves, and every
link in the repository's Markdown resolves inside it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.iam.api import IAM_ACTIONS, STS_ACTIONS
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
    assert named == set(OPERATIONS) | set(IAM_ACTIONS) | set(STS_ACTIONS)


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
