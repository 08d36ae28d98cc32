"""The layers hold without review: each module's imports, read from its source, against the
rules of docs/architecture.md."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every module `path` imports (relative imports resolved; `from a import b` counts as
    both a and a.b, since b may be a module)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


MODULES = {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _offenders(where: str, forbidden: tuple[str, ...], exempt: tuple[str, ...] = ()) -> list[str]:
    """`exempt`: module names, or packages written `name.*` (the package and what is in it)."""

    def is_exempt(module: str) -> bool:
        return any(_under(module, e[:-2]) if e.endswith(".*") else module == e for e in exempt)

    return sorted(
        f"{module} imports {imported}"
        for module, imports in MODULES.items()
        if _under(module, where) and not is_exempt(module)
        for imported in imports
        if any(_under(imported, f) for f in forbidden)
    )


def test_the_modules_were_read() -> None:
    assert "gateway.s3.handler" in MODULES and "gateway.store.sqlite" in MODULES
    assert "gateway.store.sqlite.queries" in MODULES["gateway.store.sqlite"]
    assert "psycopg" in MODULES["gateway.store.postgres"]


@pytest.mark.parametrize(
    ("where", "forbidden", "exempt"),
    [
        # The protocol layer reaches storage through the Store service only: no adapter, no
        # SQL, no blob files, no file calls (but sendfile.py's socket calls, on a file the Store
        # opened).
        (
            "gateway.s3",
            ("gateway.store.sqlite", "gateway.store.blobs", "sqlite3", "os"),
            ("gateway.s3.sendfile",),
        ),
        # Operations are reached through the dispatcher only; the request path's own modules
        # (authorisation, routing, middleware) sit below them.
        ("gateway.s3", ("gateway.s3.ops",), ("gateway.s3.ops.*", "gateway.s3.dispatch")),
        # Storage knows nothing of HTTP or of S3's wire formats.
        ("gateway.store", ("aiohttp", "gateway.s3", "gateway.app", "gateway.server"), ()),
        # The blob tiers that speak HTTP sit beside the store, handed to it as factories by
        # the composition root: the store never picks one itself.
        ("gateway.store", ("gateway.tiers",), ()),
        # A tier speaks S3 as a client, not through the protocol layer of this gateway.
        ("gateway.tiers", ("gateway.s3", "gateway.app", "gateway.server"), ()),
        # The console acts through the Store service and authorize, never an operation's
        # code, an adapter or the blob files.
        (
            "gateway.console",
            (
                "gateway.s3.ops",
                "gateway.s3.dispatch",
                "gateway.store.sqlite",
                "gateway.store.blobs",
                "sqlite3",
            ),
            (),
        ),
        # The website endpoint reads through the dispatcher's reads, handed to it (app.py):
        # never an operation's code, the dispatcher itself, an adapter or the blob files.
        (
            "gateway.website",
            (
                "gateway.s3.ops",
                "gateway.s3.dispatch",
                "gateway.store.sqlite",
                "gateway.store.postgres",
                "gateway.store.blobs",
                "sqlite3",
                "os",
            ),
            (),
        ),
        # Notifications: configuration, records, matching and the networks bound are pure
        # (no HTTP), so the outbox's consumer and every door can use them; the sender and the
        # SNS API sit in modules of their own. No adapter either way.
        (
            "gateway.notify",
            ("aiohttp",),
            ("gateway.notify.webhook", "gateway.notify.sns"),
        ),
        (
            "gateway.notify",
            ("gateway.store.sqlite", "gateway.store.postgres", "gateway.store.blobs", "sqlite3"),
            (),
        ),
        # Replication's configuration and remotes are pure (no HTTP, no adapter): the worker
        # and every door read them.
        (
            "gateway.replication",
            ("aiohttp", "gateway.store.sqlite", "gateway.store.postgres", "gateway.store.blobs"),
            (),
        ),
        # Settings and users sit below the protocol: neither imports from it.
        ("gateway.config", ("gateway.s3",), ()),
        ("gateway.users", ("gateway.s3",), ()),
        # SQL to SQLite, and to PostgreSQL, is spoken in its adapter only.
        ("gateway", ("sqlite3",), ("gateway.store.sqlite.*",)),
        ("gateway", ("psycopg",), ("gateway.store.postgres.*",)),
        # Only the composition root (gateway.store's open_store) picks the catalog adapter.
        ("gateway", ("gateway.store.sqlite",), ("gateway.store.sqlite.*", "gateway.store")),
        ("gateway", ("gateway.store.postgres",), ("gateway.store.postgres.*", "gateway.store")),
    ],
)
def test_layer_rule(where: str, forbidden: tuple[str, ...], exempt: tuple[str, ...]) -> None:
    assert _offenders(where, forbidden, exempt) == []


# The Store's writes of objects and parts: one write path (gateway.s3.writes) calls them.
_STORE_WRITES = frozenset(
    ("stage", "put_object", "copy_object", "upload_part", "upload_part_copy", "complete_upload")
)


def _store_write_calls(path: Path) -> list[str]:
    """`x.stage(...)` and the like in `path`, where x is not the writes module itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        if node.func.attr in _STORE_WRITES and not (
            isinstance(receiver, ast.Name) and receiver.id == "writes"
        ):
            found.append(f"{_module_name(path)}:{node.lineno} calls .{node.func.attr}()")
    return found


def test_only_the_write_path_calls_the_stores_writes() -> None:
    """The S3 operations, the POST form, the console and log delivery write through
    gateway.s3.writes, so that a bucket's defaults, the ETag rule and the copy's sharing of
    blobs are decided once. The store itself is exempt."""
    offenders = [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _under(_module_name(path), "gateway.store")
        and _module_name(path) != "gateway.s3.writes"
        for call in _store_write_calls(path)
    ]
    assert offenders == []
    # The check sees what it looks for: the write path itself calls each of them.
    seen = {c.rpartition(".")[2] for c in _store_write_calls(PACKAGE / "s3" / "writes.py")}
    assert seen == {f"{name}()" for name in _STORE_WRITES}


def test_the_write_path_knows_no_http() -> None:
    imports = MODULES["gateway.s3.writes"]
    assert not [m for m in imports if _under(m, "aiohttp") or _under(m, "gateway.s3.ops")]
    assert not [m for m in imports if _under(m, "gateway.s3.dispatch")]


def _edges(path: Path) -> set[str]:
    """The product modules `path` imports at run time, imports inside functions included and
    `if TYPE_CHECKING:` blocks left out; `from p import m` counts as importing the module p.m
    when m is one (p is then already imported, as a parent package always is), else p."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in MODULES else module)
    return {m for m in found if m in MODULES and m != name}


def test_no_import_cycle() -> None:
    """No two product modules import each other, however indirectly, imports inside
    functions included (an import moved into a function to dodge a cycle is still one)."""
    graph = {_module_name(p): _edges(p) for p in sorted(PACKAGE.rglob("*.py"))}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert cycles == []
    # The graph is the real one: the dispatcher reaches the operations it runs.
    assert "gateway.s3.ops.objects" in graph["gateway.s3.dispatch"]


@pytest.mark.parametrize(
    ("where", "forbidden"),
    [
        # Metrics sit below everything that reports to them.
        ("gateway.metrics", ("gateway.store", "gateway.s3")),
        # The protocol never reaches into the background workers; the application wires them.
        ("gateway.s3", ("gateway.workers",)),
        # The workers act through the Store and the write path, never an operation.
        ("gateway.workers", ("gateway.s3.ops", "gateway.s3.dispatch")),
    ],
)
def test_run_time_imports(where: str, forbidden: tuple[str, ...]) -> None:
    offenders = sorted(
        f"{_module_name(path)} imports {imported}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if _under(_module_name(path), where)
        for imported in _edges(path)
        if any(_under(imported, f) for f in forbidden)
    )
    assert offenders == []
