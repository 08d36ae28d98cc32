"""The PostgreSQL adapter's SQL stays portable to distributed PostgreSQL (CockroachDB,
YugabyteDB), read from its source: what those engines lack or serialise on one node is not
used, and every table has a primary key they can spread over ranges.

What is refused, in the SQL text of gateway/store/postgres/*.py (every string literal that is
not a docstring; comments and docstrings may name what is avoided):
- advisory locks (`pg_advisory_*`, `pg_try_advisory_*`): CockroachDB has none, YugabyteDB's
  are recent and off by default;
- LISTEN / NOTIFY / pg_notify: neither engine delivers them across nodes;
- sequences: `nextval`/`currval`/`setval`, `CREATE SEQUENCE`, SERIAL and BIGSERIAL columns,
  IDENTITY columns. A sequence is one hot row every insert goes through, cached per node (so
  numbers are not in commit order there), and its numbers make a monotonic key;
- old rows returned through PostgreSQL-only means: `RETURNING OLD.` (PostgreSQL 18), the
  system columns `xmax`/`xmin`/`ctid` (e.g. `RETURNING xmax = 0` to tell an insert from an
  update), and an `UPDATE t ... FROM` that joins `t` again to return a row as it was before
  the update. A plain `DELETE ... RETURNING` (the row as deleted) and `UPDATE ... RETURNING`
  (the row as written) are portable and used.

"Ordered for range sharding": CockroachDB and YugabyteDB (range tables) keep each table's rows
in ranges ordered by primary key and split them as they grow. A primary key whose leading
column is given in increasing order (a sequence, an identity, a timestamp) sends every new row
to the last range: one node takes all the inserts of the table, whatever the cluster's size.
So every table must have an explicit primary key whose leading column is a name the client
chose (a bucket, an account), a random id, or a constant of a one-row table: LEADING below says
which, table by table, and a table not listed there fails until someone says.

The isolation a catalog URL chooses (`s3gw_isolation`) and the refusal of a YugabyteDB whose
READ COMMITTED is Snapshot isolation are pure functions, tested here too.

Known exceptions (EXCEPTIONS): the outbox of events numbers its rows with an identity column
(schema 9), which is also its primary key; the records' sequencer is that number
(gateway/store/outbox.py). Giving it up changes what the notifications promise, in files
another piece of work owns: kept, and listed here so that it is the only one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gateway.store.errors import StoreError
from gateway.store.postgres import engine_refusal, schema, split_isolation

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "gateway" / "store" / "postgres"

# (file, the construct's name in FORBIDDEN, a fragment of the statement): allowed, and why.
EXCEPTIONS: dict[tuple[str, str, str], str] = {
    ("schema.py", "sequence", "seq         bigint GENERATED ALWAYS AS IDENTITY"): (
        "the outbox's number is the notification records' sequencer (outbox.py)"
    ),
    ("load.py", "sequence", "setval(pg_get_serial_sequence"): (
        "s3gw migrate moves that identity past the rows it copied"
    ),
}
# Tables whose primary key leads with a monotonic value, by the same reason.
MONOTONIC_EXCEPTIONS = {"outbox": "its `seq`, an identity: the records' sequencer (outbox.py)"}

FORBIDDEN: dict[str, re.Pattern[str]] = {
    "advisory lock": re.compile(r"\bpg_(try_)?advisory_\w*", re.I),
    "LISTEN/NOTIFY": re.compile(r"\b(LISTEN|UNLISTEN|NOTIFY)\s+\w|\bpg_notify\s*\(", re.I),
    "sequence": re.compile(
        r"\b(nextval|currval|setval|lastval)\s*\(|\bCREATE\s+SEQUENCE\b|\b(SMALL|BIG)?SERIAL\b"
        r"|\bAS\s+IDENTITY\b|\bpg_get_serial_sequence\b",
        re.I,
    ),
    "old row through a PostgreSQL-only trick": re.compile(
        r"\bRETURNING\b.*\bOLD\s*\.|\b(xmax|xmin|ctid)\b", re.I | re.S
    ),
}

# table -> what fills the leading column of its primary key (never an increasing value).
LEADING: dict[str, str] = {
    "schema_version": "one: the constant 1 of a one-row table",
    "catalog_id": "one: the constant 1 of a one-row table",
    "buckets": "name: the bucket's name, chosen by its owner",
    "objects": "bucket: the bucket's name (then the key)",
    "versions": "bucket: the bucket's name (then the key, then the time-ordered seq)",
    "key_locks": "bucket: the bucket's name (then the key)",
    "uploads": "id: secrets.token_urlsafe(32) (uploads.py)",
    "parts": "upload_id: the upload's random id (then the part number)",
    "blobs": "id: secrets.token_hex(16) (blobs.new_blob_id)",
    "blob_intents": "blob_id: the blob's random id",
    "iam_accounts": "account: the account's id",
    "iam_entities": "account: the account's id",
    "iam_members": "account: the account's id",
    "iam_attachments": "account: the account's id",
    "access_keys": "access_key: a random access key id",
    "topics": "account: the account's id",
    "remotes": "account: the account's id (then the destination bucket's name)",
    "leases": "name: the name of the background work",
}


def _sql_strings(path: Path) -> list[str]:
    """The string literals of `path` (f-strings' literal parts joined with `{}`), docstrings
    left out."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.add(id(value))
    found: list[str] = []
    inside_fstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                inside_fstrings.add(id(value))
                parts.append(value.value if isinstance(value, ast.Constant) else "{}")
            found.append("".join(str(p) for p in parts))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and id(node) not in inside_fstrings
        ):
            found.append(node.value)
    return found


def _statements() -> list[tuple[str, str]]:
    """(file name, string literal) for every literal of the adapter."""
    files = sorted(ADAPTER.glob("*.py"))
    assert files, ADAPTER
    return [(path.name, text) for path in files for text in _sql_strings(path)]


def _excepted(file: str, construct: str, text: str) -> tuple[str, str, str] | None:
    for key in EXCEPTIONS:
        if key[:2] == (file, construct) and key[2] in text:
            return key
    return None


def test_no_construct_distributed_postgresql_lacks() -> None:
    used: set[tuple[str, str, str]] = set()
    offenders = []
    for file, text in _statements():
        for construct, pattern in FORBIDDEN.items():
            if not pattern.search(text):
                continue
            key = _excepted(file, construct, text)
            if key is None:
                offenders.append(f"{file}: {construct}: {' '.join(text.split())[:160]}")
            else:
                used.add(key)
    assert not offenders, "\n".join(offenders)
    # An exception no longer needed goes from the list: it must not cover a new use.
    assert used == set(EXCEPTIONS), sorted(set(EXCEPTIONS) - used)


def test_update_from_does_not_join_its_own_table() -> None:
    """`UPDATE t SET ... FROM t AS old ... RETURNING old.x`: the row before the update, by
    a self-join only PostgreSQL's snapshot rules make right."""
    update = re.compile(
        r"\bUPDATE\s+(\w+)\b.*?\bFROM\b(?P<from>.*?)(\bWHERE\b|\bRETURNING\b|$)", re.I | re.S
    )
    offenders = []
    for file, text in _statements():
        for match in update.finditer(text):
            table = match.group(1)
            if re.search(rf"\b{table}\b", match.group("from"), re.I):
                offenders.append(f"{file}: {' '.join(text.split())[:160]}")
    assert not offenders, "\n".join(offenders)


# --- primary keys -------------------------------------------------------------------------------

_CREATE = re.compile(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+)\s*\((.*)\)\s*$", re.I | re.S)


def _columns(body: str) -> list[str]:
    """The comma-separated items of a CREATE TABLE's body (commas inside parentheses kept)."""
    items, depth, current = [], 0, ""
    for char in body:
        if char == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current += char
    items.append(current.strip())
    return [item for item in items if item]


def _tables() -> dict[str, list[str]]:
    """Every table the schema leaves (created by a migration, not dropped by a later one):
    name -> its column and constraint definitions."""
    tables: dict[str, list[str]] = {}
    statements = [schema._VERSION_TABLE]
    for step in sorted(schema.MIGRATIONS):
        statements += [s for s in schema.MIGRATIONS[step] if isinstance(s, str)]
    for statement in statements:
        created = _CREATE.match(statement.strip())
        if created:
            tables[created.group(1)] = _columns(created.group(2))
        dropped = re.match(r"DROP TABLE (?:IF EXISTS )?(\w+)", statement.strip(), re.I)
        if dropped:
            tables.pop(dropped.group(1), None)
    return tables


def _primary_key(items: list[str]) -> list[str]:
    for item in items:
        table_key = re.match(r"PRIMARY KEY\s*\(([^)]*)\)", item, re.I)
        if table_key:
            return [c.strip() for c in table_key.group(1).split(",")]
    return [item.split()[0] for item in items if re.search(r"\bPRIMARY KEY\b", item, re.I)]


def test_the_schema_is_read() -> None:
    tables = _tables()
    assert {"objects", "blobs", "versions", "outbox", "schema_version"} <= set(tables)
    assert "identities" not in tables  # dropped at schema 8


@pytest.mark.parametrize("table", sorted(_tables()))
def test_primary_key_ordered_for_range_sharding(table: str) -> None:
    items = _tables()[table]
    key = _primary_key(items)
    assert key, f"{table}: no explicit PRIMARY KEY"
    assert len(key) == len(set(key)), key
    if table in MONOTONIC_EXCEPTIONS:
        return
    assert table in LEADING, f"{table}: say in LEADING what fills its key's first column"
    assert LEADING[table].startswith(key[0] + ":"), (table, key, LEADING[table])
    (definition,) = [i for i in items if i.split()[0] == key[0]]
    generated = re.compile(
        r"\bAS\s+IDENTITY\b|\b(BIG|SMALL)?SERIAL\b|\bDEFAULT\s+(nextval|now|clock_timestamp|"
        r"current_timestamp|statement_timestamp|transaction_timestamp)\b|\btimestamp",
        re.I,
    )
    assert not generated.search(definition), f"{table}: {definition}"
    assert not re.search(r"_(ns|at|time)\b", key[0]), f"{table}: a time leads its key: {key}"


def test_monotonic_exceptions_are_still_monotonic() -> None:
    """An exception that was fixed goes from the list."""
    tables = _tables()
    for table in MONOTONIC_EXCEPTIONS:
        (definition,) = [i for i in tables[table] if i.split()[0] == _primary_key(tables[table])[0]]
        assert re.search(r"\bAS\s+IDENTITY\b", definition, re.I), definition


# --- the isolation the catalog URL chooses, and the YugabyteDB start-up check -----------------

# `SELECT version()` as YugabyteDB answers it (2.20) and as PostgreSQL does.
YB_VERSION = (
    "PostgreSQL 11.2-YB-2.20.1.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 16.0.6, "
    "64-bit"
)
PG_VERSION = "PostgreSQL 15.8 (Debian 15.8-0+deb12u1) on x86_64-pc-linux-gnu, 64-bit"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u@h/db", ("postgresql://u@h/db", "read-committed")),
        (
            "postgresql://u@h/db?s3gw_isolation=serializable",
            ("postgresql://u@h/db", "serializable"),
        ),
        (
            "postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write"
            "&s3gw_isolation=SERIALIZABLE&options=-c%20statement_timeout%3D5s",
            (
                "postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write"
                "&options=-c%20statement_timeout%3D5s",
                "serializable",
            ),
        ),
        (
            "postgresql://u@h/db?s3gw_isolation=read-committed",
            ("postgresql://u@h/db", "read-committed"),
        ),
    ],
)
def test_the_url_chooses_the_isolation_and_libpq_never_sees_the_parameter(
    url: str, expected: tuple[str, str]
) -> None:
    assert split_isolation(url) == expected


def test_an_unknown_isolation_is_refused_in_one_line() -> None:
    with pytest.raises(StoreError) as refused:
        split_isolation("postgresql://u:secret@h/db?s3gw_isolation=snapshot")
    message = str(refused.value)
    assert "s3gw_isolation" in message and "serializable" in message
    assert "secret" not in message and "\n" not in message


@pytest.mark.parametrize(
    ("version", "setting", "isolation", "refused"),
    [
        (PG_VERSION, None, "read-committed", False),  # PostgreSQL: no such setting, no check
        (PG_VERSION, None, "serializable", False),
        (YB_VERSION, "on", "read-committed", False),
        (YB_VERSION, "true", "read-committed", False),
        (YB_VERSION, "off", "read-committed", True),  # Snapshot isolation, silently
        (YB_VERSION, "false", "read-committed", True),
        (YB_VERSION, None, "read-committed", True),  # SHOW did not know it: not on
        (YB_VERSION, "off", "serializable", False),  # the operator chose SERIALIZABLE
        (YB_VERSION, None, "serializable", False),
    ],
)
def test_a_yugabytedb_without_read_committed_is_refused_unless_serializable(
    version: str, setting: str | None, isolation: str, refused: bool
) -> None:
    """Untested against a real YugabyteDB (none can be installed here): the decision alone."""
    reason = engine_refusal(version, setting, isolation)
    assert (reason is not None) == refused
    if reason is not None:
        assert "yb_enable_read_committed_isolation" in reason
        assert "s3gw_isolation=serializable" in reason and "\n" not in reason
