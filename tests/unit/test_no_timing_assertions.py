"""The tests assert events, not how long they took: a comparison with the clock fails a
correct server on a loaded machine, and passes a wrong one on a fast machine. This scan finds
every comparison in tests/ that involves the clock (time.monotonic(), perf_counter() or a name
computed from them) and fails on one that is neither a wait's bound (`now < deadline`,
the deadline set as now + a margin: the wait ends on the event, and the bound only turns a hang
into a failure) nor named below with the reason its bound is justified."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The clocks that measure durations (time.time() gives dates: retention, expiry, Last-Modified).
CLOCKS = {"monotonic", "perf_counter", "monotonic_ns", "perf_counter_ns"}

# (file under tests/, function): why the comparison with the clock is right there.
ALLOWED = {
    ("contract/test_intents.py", "assert_left_clean"): (
        "settling, not a verdict: the background cleanup can look done for a moment before it "
        "is, so the wait ends when the folder has stayed clean for a second; a slow machine "
        "only makes it wait longer, and the assertions after it judge the folder"
    ),
}


def _is_clock_call(node: ast.AST) -> bool:
    """time.monotonic() and its kin (called as time.X() or as a bare imported name)."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time"
    return isinstance(f, ast.Name) and f.id in CLOCKS


def _uses(node: ast.AST, clock_names: set[str]) -> bool:
    return any(
        _is_clock_call(n) or (isinstance(n, ast.Name) and n.id in clock_names)
        for n in ast.walk(node)
    )


def _deadlines(scope: ast.AST) -> tuple[set[str], set[str]]:
    """Names assigned from the clock in a scope, and among them the deadlines (now + X)."""
    clock_names: set[str] = set()
    deadlines: set[str] = set()
    for _ in range(2):  # a name computed from another clock name
        for n in ast.walk(scope):
            if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                for t in targets:
                    if isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple):
                        for name, value in zip(t.elts, n.value.elts, strict=False):
                            if isinstance(name, ast.Name) and _uses(value, clock_names):
                                clock_names.add(name.id)
                                if _is_deadline(value):
                                    deadlines.add(name.id)
                if names and _uses(n.value, clock_names):
                    clock_names.update(names)
                    if _is_deadline(n.value):
                        deadlines.update(names)
    return clock_names, deadlines


def _is_deadline(value: ast.AST) -> bool:
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.Add)
        and (_is_clock_call(value.left) or _is_clock_call(value.right))
    )


def _is_wait_bound(compare: ast.Compare, deadlines: set[str]) -> bool:
    """`now <op> deadline` (either way round): a wait's bound."""
    sides = [compare.left, *compare.comparators]
    if len(sides) != 2:
        return False
    a, b = sides
    return (_is_clock_call(a) and isinstance(b, ast.Name) and b.id in deadlines) or (
        _is_clock_call(b) and isinstance(a, ast.Name) and a.id in deadlines
    )


def timing_comparisons(path: Path) -> list[tuple[str, int, str]]:
    """(function, line, source) of each comparison with the clock that is not a wait's bound."""
    source = path.read_text()
    tree = ast.parse(source)
    found = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in [tree, *scopes]:
        clock_names, deadlines = _deadlines(scope)
        body = (
            scope.body
            if scope is not tree
            else [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        )
        for stmt in body:
            for n in ast.walk(stmt):
                if (
                    isinstance(n, ast.Compare)
                    and _uses(n, clock_names)
                    and not _is_wait_bound(n, deadlines)
                ):
                    name = scope.name if scope is not tree else "<module>"
                    found.append((name, n.lineno, ast.get_source_segment(source, n) or ""))
    return sorted(set(found))


def test_no_comparison_with_the_clock_but_the_named_ones() -> None:
    unexplained = []
    used = set()
    for path in sorted(TESTS.rglob("*.py")):
        relative = path.relative_to(TESTS).as_posix()
        for function, line, text in timing_comparisons(path):
            if (relative, function) in ALLOWED:
                used.add((relative, function))
            else:
                unexplained.append(f"{relative}:{line} in {function}: {text}")
    assert not unexplained, "timing assertions (assert the event instead):\n" + "\n".join(
        unexplained
    )
    assert used == set(ALLOWED), f"allowed but no longer found: {set(ALLOWED) - used}"


def test_the_scan_finds_a_timing_assertion(tmp_path: Path) -> None:
    # The scan's own control: the pattern this suite had (an elapsed time asserted), and the
    # wait's bound it lets through.
    path = tmp_path / "test_x.py"
    path.write_text(
        "import time\n"
        "def test_fast():\n"
        "    started = time.monotonic()\n"
        "    work()\n"
        "    elapsed = time.monotonic() - started\n"
        "    assert elapsed < 2\n"
        "def test_waits():\n"
        "    deadline = time.monotonic() + 30\n"
        "    while not done():\n"
        "        assert time.monotonic() < deadline\n"
    )
    assert timing_comparisons(path) == [("test_fast", 6, "elapsed < 2")]
