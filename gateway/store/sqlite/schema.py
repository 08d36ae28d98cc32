"""The SQLite catalog's schema: tables, connections, migrations.

Keys are stored as BLOBs of their UTF-8 bytes, so that SQLite's memcmp ordering is S3's listing
order (UTF-8 byte order) and prefix bounds can be computed on bytes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..outbox import partition

SCHEMA_VERSION = 12

# IAM (gateway/iam/): an account's identities as rows. The account's own row (its root's access
# keys: the row a change of the account's identities holds), a row per user, group, role and
# customer managed policy by its lower-case name (IAM's names are unique without regard to
# case), each its entity's JSON; and the indexes a rule or a look-up reads instead of every
# entity: which account and user an access key is ("" the root), a group's members, a managed
# policy's attachments.
IAM_SCHEMA = """
CREATE TABLE IF NOT EXISTS iam_accounts (
    account     TEXT PRIMARY KEY,
    doc         TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS iam_entities (
    account     TEXT NOT NULL,
    kind        TEXT NOT NULL,  -- user, group, role, policy
    name        TEXT NOT NULL,
    doc         TEXT NOT NULL,
    PRIMARY KEY (account, kind, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS iam_members (
    account     TEXT NOT NULL,
    group_name  TEXT NOT NULL,
    user_name   TEXT NOT NULL,
    PRIMARY KEY (account, group_name, user_name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS iam_attachments (
    account     TEXT NOT NULL,
    policy_arn  TEXT NOT NULL,
    kind        TEXT NOT NULL,  -- user, group, role
    name        TEXT NOT NULL,
    PRIMARY KEY (account, policy_arn, kind, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS access_keys (
    access_key  TEXT PRIMARY KEY,
    account     TEXT NOT NULL,
    user_name   TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS access_keys_by_user ON access_keys (account, user_name);
"""

# 9: schema 8's one document per account (`identities`) split into IAM_SCHEMA's rows, and the
# access keys' index rebuilt from the documents with the user each key is.
_PARTS = (("user", "users"), ("group", "groups"), ("role", "roles"), ("policy", "policies"))
SPLIT_IDENTITIES = (
    "DROP TABLE access_keys;"
    + IAM_SCHEMA
    + "INSERT INTO iam_accounts (account, doc) SELECT account, "
    """coalesce(json_extract(doc, '$.root'), '{"name":"","keys":{}}') FROM identities;"""
    + "".join(
        "INSERT INTO iam_entities (account, kind, name, doc) "
        f"SELECT i.account, '{kind}', e.key, e.value FROM identities i, "
        f"json_each(i.doc, '$.{part}') e;"
        for kind, part in _PARTS
    )
    + "INSERT INTO iam_members (account, group_name, user_name) "
    "SELECT i.account, g.value, u.key FROM identities i, json_each(i.doc, '$.users') u, "
    "json_each(u.value, '$.groups') g;"
    + "".join(
        "INSERT OR IGNORE INTO iam_attachments (account, policy_arn, kind, name) "
        f"SELECT i.account, a.value, '{kind}', e.key FROM identities i, "
        f"json_each(i.doc, '$.{part}') e, json_each(e.value, '$.attached') a;"
        for kind, part in _PARTS[:3]
    )
    + "INSERT INTO access_keys (access_key, account, user_name) "
    "SELECT k.key, i.account, u.key FROM identities i, json_each(i.doc, '$.users') u, "
    "json_each(u.value, '$.keys') k;"
    "INSERT INTO access_keys (access_key, account, user_name) "
    "SELECT k.key, i.account, '' FROM identities i, json_each(i.doc, '$.root.keys') k;"
    "DROP TABLE identities;"
)

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS buckets (
    name        TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    region      TEXT NOT NULL,
    created_ns  INTEGER NOT NULL,
    versioning  TEXT,
    object_lock TEXT,  -- NULL: never enabled; else JSON, with the default retention if any
    settings    TEXT   -- NULL: no configuration set; else JSON, documents by name
) WITHOUT ROWID;

-- The current version of each key, when it is an object (not a delete marker): what
-- ListObjects scans, whatever number of older versions the bucket keeps.

CREATE TABLE IF NOT EXISTS objects (
    bucket      TEXT NOT NULL,
    key         BLOB NOT NULL,
    size        INTEGER NOT NULL,
    etag        TEXT NOT NULL,
    content_md5 TEXT,
    mtime_ns    INTEGER NOT NULL,
    attrs       TEXT NOT NULL,
    manifest    TEXT NOT NULL,
    parts       TEXT,
    upload_id   TEXT,
    lock        TEXT,  -- Object Lock retention and legal hold (JSON), if any
    version_id  TEXT,  -- NULL: the null version
    PRIMARY KEY (bucket, key)
) WITHOUT ROWID;

-- Every other version: noncurrent objects and delete markers (the latest one too). `seq` orders
-- a key's versions newest first: a version's id, or for the null version an id-like string
-- made from its time.
CREATE TABLE IF NOT EXISTS versions (
    bucket      TEXT NOT NULL,
    key         BLOB NOT NULL,
    seq         TEXT NOT NULL,
    is_null     INTEGER NOT NULL,
    marker      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    etag        TEXT NOT NULL,
    content_md5 TEXT,
    mtime_ns    INTEGER NOT NULL,
    attrs       TEXT NOT NULL,
    manifest    TEXT NOT NULL,
    parts       TEXT,
    upload_id   TEXT,
    lock        TEXT,
    PRIMARY KEY (bucket, key, seq)
) WITHOUT ROWID;
-- A key has at most one null version.
CREATE UNIQUE INDEX IF NOT EXISTS versions_null ON versions (bucket, key) WHERE is_null = 1;

CREATE TABLE IF NOT EXISTS uploads (
    id           TEXT PRIMARY KEY,
    bucket       TEXT NOT NULL,
    key          BLOB NOT NULL,
    initiated_ns INTEGER NOT NULL,
    owner        TEXT NOT NULL,
    attrs        TEXT NOT NULL,
    lock         TEXT
);
CREATE INDEX IF NOT EXISTS uploads_by_key ON uploads (bucket, key, initiated_ns, id);

CREATE TABLE IF NOT EXISTS parts (
    upload_id   TEXT NOT NULL,
    number      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    etag        TEXT NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    manifest    TEXT NOT NULL,
    checksum    TEXT,
    PRIMARY KEY (upload_id, number)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS blobs (
    id          TEXT PRIMARY KEY,
    size        INTEGER NOT NULL,
    refs        INTEGER NOT NULL,
    data        BLOB
);

-- A blob file being written and not yet committed (docs/scaling.md, "Orphan blobs"): recorded
-- before the file is published, deleted by the commit that inserts the blob's row. Past
-- `expires_ns` (its writer's clock) any node may take the row and delete the file.
CREATE TABLE IF NOT EXISTS blob_intents (
    blob_id     TEXT PRIMARY KEY,
    node        TEXT NOT NULL,
    expires_ns  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS blob_intents_by_expiry ON blob_intents (expires_ns);
CREATE TABLE IF NOT EXISTS catalog_id (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    id  TEXT NOT NULL
);

-- Events (gateway/store/outbox.py): a change someone outside may need to hear about, written in
-- the transaction of the change, removed once every consumer has acknowledged it. AUTOINCREMENT:
-- a sequence number is never used twice, even once the table has been emptied (it is the
-- records' sequencer, which must only increase for a key).
CREATE TABLE IF NOT EXISTS outbox (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    bucket      TEXT NOT NULL,
    key         BLOB NOT NULL,
    event       TEXT NOT NULL,
    version_id  TEXT,
    time_ns     INTEGER NOT NULL,
    facts       TEXT NOT NULL,
    part        INTEGER NOT NULL DEFAULT 0
);
-- A partition's rows in order (outbox.partition): what its lease's holder reads.
CREATE INDEX IF NOT EXISTS outbox_by_part ON outbox (part, seq);
-- Notification topics (gateway/notify/topics.py): each account's, a JSON document by name.
CREATE TABLE IF NOT EXISTS topics (
    account     TEXT NOT NULL,
    name        TEXT NOT NULL,
    doc         TEXT NOT NULL,
    PRIMARY KEY (account, name)
) WITHOUT ROWID;
-- Replication remotes (gateway/replication/remotes.py): each account's, a JSON document by the
-- destination bucket's name, its secret key sealed.
CREATE TABLE IF NOT EXISTS remotes (
    account     TEXT NOT NULL,
    name        TEXT NOT NULL,
    doc         TEXT NOT NULL,
    PRIMARY KEY (account, name)
) WITHOUT ROWID;
-- Background work held by one process at a time across every node (the outbox's consumers).
CREATE TABLE IF NOT EXISTS leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_ns  INTEGER NOT NULL
) WITHOUT ROWID;
"""
    + IAM_SCHEMA
)


def connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN/COMMIT ourselves; check_same_thread=False only
    # because a connection is created on one thread and then owned by another.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    # FULL: the WAL is fsynced at every commit, so a commit is durable before we answer 200.
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


def migration_failed(version: int, exc: BaseException) -> str:
    """The one line that says a migration failed and nothing of it was kept."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    if version == 0:
        return f"creating the schema failed ({reason}): nothing was written"
    return (
        f"migrating the schema from {version} to {SCHEMA_VERSION} failed ({reason}): "
        f"rolled back, the catalog is still at schema {version} and unchanged"
    )


def _partition_outbox(conn: sqlite3.Connection) -> None:
    rows = conn.execute("SELECT seq, bucket, key FROM outbox").fetchall()
    conn.executemany(
        "UPDATE outbox SET part = ? WHERE seq = ?",
        [(partition(bucket, bytes(key).decode()), seq) for seq, bucket, key in rows],
    )


def initialise(path: Path) -> None:
    conn = connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"schema {version} is newer than this gateway's")
        steps = []
        if version == 1:
            # 2: parts keep the flexible checksum their UploadPart verified.
            steps.append("ALTER TABLE parts ADD COLUMN checksum TEXT;")
        if 0 < version < 3:
            # 3: versioning. Every object already stored becomes its key's null version, in
            # place (the versions table is created by SCHEMA, empty).
            steps.append("ALTER TABLE buckets ADD COLUMN versioning TEXT;")
            steps.append("ALTER TABLE objects ADD COLUMN version_id TEXT;")
        if 0 < version < 4:
            # 4: Object Lock. NULL everywhere: no bucket had it, no version is locked.
            steps.append("ALTER TABLE buckets ADD COLUMN object_lock TEXT;")
            steps.append("ALTER TABLE objects ADD COLUMN lock TEXT;")
            steps.append("ALTER TABLE uploads ADD COLUMN lock TEXT;")
        if version == 3:
            # Older catalogs get the versions table from SCHEMA, with the column.
            steps.append("ALTER TABLE versions ADD COLUMN lock TEXT;")
        if 0 < version < 5:
            # 5: bucket configurations (CORS, policy, ACL, ...): none set yet.
            steps.append("ALTER TABLE buckets ADD COLUMN settings TEXT;")
        # 6: blob intents, a table of its own made by SCHEMA (empty: no write in flight).
        # 7: the catalog's id, also recorded in its data folder (Store.check_folder): made by
        # SCHEMA, empty until the next start claims one.
        # 8: IAM's identities, one document per account, and the access keys' index.
        # 9: IAM's rows (IAM_SCHEMA): a catalog older than 8 gets them from SCHEMA, empty; one
        # at 8 has its documents split into them.
        if version == 8:
            steps.append(SPLIT_IDENTITIES)
        # 10: the outbox and the leases (gateway/store/outbox.py), and the topics (until then
        # files of the data folder, imported at the next start: Store.sweep), tables of their
        # own made by SCHEMA, empty.
        # 11: the accounts' replication remotes, a table of its own made by SCHEMA, empty.
        # 12: the outbox's partitions: a column and its index; the rows waiting are each put
        # in their key's partition (outbox.partition), as a new row of the key would be.
        if 10 <= version < 12:
            steps.append("ALTER TABLE outbox ADD COLUMN part INTEGER NOT NULL DEFAULT 0;")
        # One transaction: a start interrupted mid-migration leaves the old schema whole.
        try:
            conn.executescript(f"BEGIN IMMEDIATE; {' '.join(steps)} {SCHEMA}")
            if 10 <= version < 12:
                _partition_outbox(conn)
            # execute, not executescript (which would commit what is pending first).
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            # executescript stops at the failing statement with the transaction open: undone
            # here, not left to close(), so that the message is true when it is read.
            if conn.in_transaction:
                conn.rollback()
            if version == SCHEMA_VERSION:
                raise  # nothing to migrate: the error says it all
            raise sqlite3.DatabaseError(migration_failed(version, exc)) from exc
    finally:
        conn.close()
