"""IAM's wildcards (`*` any run of characters, `?` any one), as policies match actions,
resources and condition values: in time linear in the text, whatever the pattern (a pattern
of many stars never backtracks), and prepared once per pattern."""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class _Run:
    """The pattern between two stars: literal pieces at fixed offsets, with a `?` (any one
    character) at every offset no piece covers."""

    length: int
    pieces: tuple[tuple[int, str], ...]  # (offset, non-empty literal)

    @classmethod
    def of(cls, text: str) -> _Run:
        pieces, offset = [], 0
        for literal in text.split("?"):
            if literal:
                pieces.append((offset, literal))
            offset += len(literal) + 1
        return cls(len(text), tuple(pieces))

    def at(self, text: str, start: int) -> bool:
        return start + self.length <= len(text) and all(
            text.startswith(literal, start + offset) for offset, literal in self.pieces
        )

    def find(self, text: str, start: int, end: int) -> int:
        """The first position >= start where the run matches and ends by `end`, or -1."""
        if not self.pieces:
            return start if start + self.length <= end else -1
        first_offset, first = self.pieces[0]
        hit = text.find(first, start + first_offset)
        while hit != -1:
            begin = hit - first_offset
            if begin + self.length > end:
                return -1
            if self.at(text, begin):
                return begin
            hit = text.find(first, hit + 1)
        return -1


@dataclass(frozen=True)
class Wildcard:
    """IAM's wildcard (reference_policies_elements_resource.html): `*` any run of characters,
    none included, `?` exactly one, everything else literal.

    Matched without regular expressions: a policy's pattern once became a backtracking regex,
    and `*a*a…*b` against a 300-byte key held a worker for 77 s. Here the runs between stars
    are fixed-length, so the leftmost place for each is always a right one: one pass, left to
    right, with str.find, at most len(pattern) * len(text) steps."""

    runs: tuple[_Run, ...]  # one run: no star; else prefix, middles, suffix
    ignore_case: bool = False

    def matches(self, text: str) -> bool:
        if self.ignore_case:
            text = text.lower()
        runs = self.runs
        if len(runs) == 1:
            return runs[0].length == len(text) and runs[0].at(text, 0)
        head, tail = runs[0], runs[-1]
        end = len(text) - tail.length
        if end < head.length or not head.at(text, 0) or not tail.at(text, end):
            return False
        position = head.length
        for run in runs[1:-1]:
            found = run.find(text, position, end)
            if found == -1:
                return False
            position = found + run.length
        return True


@functools.lru_cache(maxsize=4096)
def wildcard(pattern: str, *, ignore_case: bool = False) -> Wildcard:
    """`pattern` ready to match (case-insensitively for action names)."""
    if ignore_case:
        pattern = pattern.lower()
    return Wildcard(tuple(_Run.of(run) for run in pattern.split("*")), ignore_case)
