"""The PostgreSQL catalog's schema: the same tables as the SQLite catalog's, and its migrations.

Keys are `bytea` (their UTF-8 bytes): bytea compares as memcmp whatever the database's locale
or collation, which is S3's listing order (UTF-8 byte order), and holds any byte, NUL included
(PostgreSQL's text cannot hold U+0000; S3 and the SQLite catalog take it). Names and ids that
are ordered or compared take the "C" collation, for the same reason. Attributes and manifests
are the JSON text the SQLite catalog stores (rows.py), so a catalog moves between the two row
for row.

The version is a row of `schema_version`. A gateway migrates the schema the first time it
connects, in one transaction that holds that row's lock, so that nodes starting together
migrate once: a race on `CREATE ... IF NOT EXISTS` between two of them (PostgreSQL's IF NOT
EXISTS is not atomic across sessions) ends in a unique violation for one, which tries again and
finds the work done.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import psycopg
from psycopg import errors as pg_errors

from ..outbox import partition

SCHEMA_VERSION = 11

# Schema 7's document parts and the kind of their rows at 8.
_PARTS = (
    "(VALUES ('user', 'users'), ('group', 'groups'), ('role', 'roles'), "
    "('policy', 'policies')) p (kind, part)"
)

# version -> the statements that bring the schema from the version before it to this one.
# (A callable step runs Python in the migration's transaction: what SQL alone cannot compute.)
MIGRATIONS: dict[int, tuple[str | Callable[[psycopg.Connection], None], ...]] = {
    1: (
        """CREATE TABLE IF NOT EXISTS buckets (
            name        text COLLATE "C" PRIMARY KEY,
            owner       text NOT NULL,
            region      text NOT NULL,
            created_ns  bigint NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS objects (
            bucket      text COLLATE "C" NOT NULL,
            key         bytea NOT NULL,
            size        bigint NOT NULL,
            etag        text NOT NULL,
            content_md5 text,
            mtime_ns    bigint NOT NULL,
            attrs       text NOT NULL,
            manifest    text NOT NULL,
            parts       text,
            upload_id   text,
            PRIMARY KEY (bucket, key)
        )""",
        """CREATE TABLE IF NOT EXISTS uploads (
            id           text COLLATE "C" PRIMARY KEY,
            bucket       text COLLATE "C" NOT NULL,
            key          bytea NOT NULL,
            initiated_ns bigint NOT NULL,
            owner        text NOT NULL,
            attrs        text NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS uploads_by_key ON uploads (bucket, key, initiated_ns, id)",
        """CREATE TABLE IF NOT EXISTS parts (
            upload_id   text COLLATE "C" NOT NULL,
            number      integer NOT NULL,
            size        bigint NOT NULL,
            etag        text NOT NULL,
            mtime_ns    bigint NOT NULL,
            manifest    text NOT NULL,
            checksum    text,
            PRIMARY KEY (upload_id, number)
        )""",
        """CREATE TABLE IF NOT EXISTS blobs (
            id          text COLLATE "C" PRIMARY KEY,
            size        bigint NOT NULL,
            refs        bigint NOT NULL,
            data        bytea
        )""",
    ),
    # Versioning (versions.py): a bucket's state, the current version's id (NULL: the null
    # version), and the other versions and delete markers, ordered by `seq` in byte order
    # ("C") as on SQLite. Rows already stored are their keys' null versions, in place.
    2: (
        "ALTER TABLE buckets ADD COLUMN IF NOT EXISTS versioning text",
        'ALTER TABLE objects ADD COLUMN IF NOT EXISTS version_id text COLLATE "C"',
        """CREATE TABLE IF NOT EXISTS versions (
            bucket      text COLLATE "C" NOT NULL,
            key         bytea NOT NULL,
            seq         text COLLATE "C" NOT NULL,
            is_null     boolean NOT NULL,
            marker      boolean NOT NULL,
            size        bigint NOT NULL,
            etag        text NOT NULL,
            content_md5 text,
            mtime_ns    bigint NOT NULL,
            attrs       text NOT NULL,
            manifest    text NOT NULL,
            parts       text,
            upload_id   text,
            PRIMARY KEY (bucket, key, seq)
        )""",
        # A key has at most one null version.
        "CREATE UNIQUE INDEX IF NOT EXISTS versions_null ON versions (bucket, key) WHERE is_null",
        # The per-key lock of versioned writes on a key with no current object (queries.py):
        # a row lives only inside the transaction that holds it.
        """CREATE TABLE IF NOT EXISTS key_locks (
            bucket      text COLLATE "C" NOT NULL,
            key         bytea NOT NULL,
            PRIMARY KEY (bucket, key)
        )""",
    ),
    # Object Lock (objectlock.py): a bucket's configuration (NULL: never enabled), a version's
    # retention and legal hold, and what CreateMultipartUpload asked for the object; JSON text
    # as on SQLite (rows.py). NULL everywhere in rows already stored: nothing was locked.
    3: (
        "ALTER TABLE buckets ADD COLUMN IF NOT EXISTS object_lock text",
        "ALTER TABLE objects ADD COLUMN IF NOT EXISTS lock text",
        "ALTER TABLE versions ADD COLUMN IF NOT EXISTS lock text",
        "ALTER TABLE uploads ADD COLUMN IF NOT EXISTS lock text",
    ),
    # A bucket's configuration documents by name (CORS, policy, ACL, ...) as one JSON text,
    # as on SQLite; NULL: none set.
    4: ("ALTER TABLE buckets ADD COLUMN IF NOT EXISTS settings text",),
    # Blob intents (gateway/store/intents.py): a blob file being written and not yet committed,
    # recorded before the file is published and deleted by the commit that inserts the blob's
    # row; past `expires_ns` (its writer's clock) any node may take the row and delete the file.
    5: (
        """CREATE TABLE IF NOT EXISTS blob_intents (
            blob_id     text COLLATE "C" PRIMARY KEY,
            node        text NOT NULL,
            expires_ns  bigint NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS blob_intents_by_expiry ON blob_intents (expires_ns)",
    ),
    # The catalog's id, also recorded in its data folder (Store.check_folder); one row.
    6: (
        """CREATE TABLE IF NOT EXISTS catalog_id (
            one integer PRIMARY KEY CHECK (one = 1),
            id  text NOT NULL
        )""",
    ),
    # IAM (gateway/iam/): each account's identities as one JSON document, and which account
    # each access key belongs to.
    7: (
        """CREATE TABLE IF NOT EXISTS identities (
            account     text COLLATE "C" PRIMARY KEY,
            doc         text NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS access_keys (
            access_key  text COLLATE "C" PRIMARY KEY,
            account     text COLLATE "C" NOT NULL
        )""",
    ),
    # IAM's rows: the account's own row (its root's access keys: the row a change of the
    # account's identities holds), a row per user, group, role and customer managed policy by
    # its lower-case name, each its entity's JSON; the indexes a rule or a look-up reads
    # instead of every entity (an access key's user, a group's members, a managed policy's
    # attachments). Schema 7's documents are split into them.
    8: (
        """CREATE TABLE IF NOT EXISTS iam_accounts (
            account     text COLLATE "C" PRIMARY KEY,
            doc         text NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS iam_entities (
            account     text COLLATE "C" NOT NULL,
            kind        text COLLATE "C" NOT NULL,
            name        text COLLATE "C" NOT NULL,
            doc         text NOT NULL,
            PRIMARY KEY (account, kind, name)
        )""",
        """CREATE TABLE IF NOT EXISTS iam_members (
            account     text COLLATE "C" NOT NULL,
            group_name  text COLLATE "C" NOT NULL,
            user_name   text COLLATE "C" NOT NULL,
            PRIMARY KEY (account, group_name, user_name)
        )""",
        """CREATE TABLE IF NOT EXISTS iam_attachments (
            account     text COLLATE "C" NOT NULL,
            policy_arn  text COLLATE "C" NOT NULL,
            kind        text COLLATE "C" NOT NULL,
            name        text COLLATE "C" NOT NULL,
            PRIMARY KEY (account, policy_arn, kind, name)
        )""",
        """ALTER TABLE access_keys
            ADD COLUMN IF NOT EXISTS user_name text COLLATE "C" NOT NULL DEFAULT ''""",
        "CREATE INDEX IF NOT EXISTS access_keys_by_user ON access_keys (account, user_name)",
        """INSERT INTO iam_accounts (account, doc)
            SELECT account, coalesce(doc::json -> 'root', '{"name":"","keys":{}}'::json)::text
            FROM identities""",
        f"""INSERT INTO iam_entities (account, kind, name, doc)
            SELECT i.account, p.kind, e.key, e.value::text
            FROM identities i CROSS JOIN {_PARTS}, json_each(i.doc::json -> p.part) e""",
        """INSERT INTO iam_members (account, group_name, user_name)
            SELECT i.account, g.value, u.key FROM identities i,
            json_each(i.doc::json -> 'users') u, json_array_elements_text(u.value -> 'groups') g""",
        f"""INSERT INTO iam_attachments (account, policy_arn, kind, name)
            SELECT DISTINCT i.account, a.value, p.kind, e.key
            FROM identities i CROSS JOIN {_PARTS}, json_each(i.doc::json -> p.part) e,
            json_array_elements_text(e.value -> 'attached') a WHERE p.kind <> 'policy'""",
        """UPDATE access_keys k SET user_name = u.key FROM identities i,
            json_each(i.doc::json -> 'users') u
            WHERE i.account = k.account AND u.value -> 'keys' -> k.access_key IS NOT NULL""",
        "DROP TABLE identities",
    ),
    # Events (gateway/store/outbox.py): a change someone outside may need to hear about,
    # written in the transaction of the change, removed once every consumer acknowledged it;
    # `seq` is an identity (never used twice: the records' sequencer only increases for a
    # key). Leases: background work held by one process at a time across every node.
    # Topics: each account's notification topics, a JSON document by name (until then files
    # of the data folder, imported at the next start: Store.sweep).
    9: (
        """CREATE TABLE IF NOT EXISTS topics (
            account     text COLLATE "C" NOT NULL,
            name        text COLLATE "C" NOT NULL,
            doc         text NOT NULL,
            PRIMARY KEY (account, name)
        )""",
        """CREATE TABLE IF NOT EXISTS outbox (
            seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            bucket      text COLLATE "C" NOT NULL,
            key         bytea NOT NULL,
            event       text NOT NULL,
            version_id  text,
            time_ns     bigint NOT NULL,
            facts       text NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS leases (
            name        text COLLATE "C" PRIMARY KEY,
            holder      text NOT NULL,
            expires_ns  bigint NOT NULL
        )""",
    ),
    # Replication remotes: each account's, a JSON document by the destination bucket's name,
    # its secret key sealed (gateway/replication/remotes.py).
    10: (
        """CREATE TABLE IF NOT EXISTS remotes (
            account     text COLLATE "C" NOT NULL,
            name        text COLLATE "C" NOT NULL,
            doc         text NOT NULL,
            PRIMARY KEY (account, name)
        )""",
    ),
    # The outbox's partitions (outbox.partition): a column and its index; the rows waiting
    # are each put in their key's partition, as a new row of the key would be.
    11: (
        "ALTER TABLE outbox ADD COLUMN IF NOT EXISTS part integer NOT NULL DEFAULT 0",
        "CREATE INDEX IF NOT EXISTS outbox_by_part ON outbox (part, seq)",
        lambda conn: _partition_outbox(conn),  # defined below
    ),
}


def _partition_outbox(conn: psycopg.Connection) -> None:
    rows = conn.execute("SELECT seq, bucket, key FROM outbox").fetchall()
    with conn.cursor() as cursor:
        cursor.executemany(
            "UPDATE outbox SET part = %s WHERE seq = %s",
            [(partition(bucket, bytes(key).decode()), seq) for seq, bucket, key in rows],
        )


_VERSION_TABLE = """CREATE TABLE IF NOT EXISTS schema_version (
    one     integer PRIMARY KEY CHECK (one = 1),
    version integer NOT NULL
)"""

# Conflicts between nodes creating the schema at once: tried again.
_RACES = (pg_errors.UniqueViolation, pg_errors.SerializationFailure, pg_errors.DeadlockDetected)


class SchemaTooNew(psycopg.DatabaseError):
    """The database was migrated by a newer gateway."""


class MigrationFailed(psycopg.DatabaseError):
    """A migration step failed: its transaction is rolled back, the schema is as it was."""


def initialise(conn: psycopg.Connection) -> None:
    """Create or migrate the schema over `conn` (autocommit)."""
    for attempt in range(10):
        try:
            with conn.transaction():
                _migrate(conn)
            return
        except _RACES:
            if attempt == 9:
                raise
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))


def _migrate(conn: psycopg.Connection) -> None:
    conn.execute(_VERSION_TABLE)
    row = conn.execute("SELECT version FROM schema_version WHERE one = 1 FOR UPDATE").fetchone()
    version = row[0] if row else 0
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(f"schema {version} is newer than this gateway's ({SCHEMA_VERSION})")
    if version == SCHEMA_VERSION:
        return
    for step in range(version + 1, SCHEMA_VERSION + 1):
        for statement in MIGRATIONS[step]:
            try:
                if callable(statement):
                    statement(conn)
                else:
                    conn.execute(statement)
            except _RACES:
                raise  # another node migrating at the same time: tried again
            except psycopg.Error as exc:
                # Raised inside initialise's transaction, which rolls every step back: the
                # steps before this one too, and the version row.
                reason = " ".join(str(exc).split()) or type(exc).__name__
                if version == 0:
                    raise MigrationFailed(
                        f"creating the schema failed ({reason}): nothing was written"
                    ) from exc
                raise MigrationFailed(
                    f"migrating the schema from {version} to {SCHEMA_VERSION} failed at step "
                    f"{step} ({reason}): rolled back, the catalog is still at schema {version} "
                    "and unchanged"
                ) from exc
    if row is None:
        conn.execute("INSERT INTO schema_version (one, version) VALUES (1, %s)", (SCHEMA_VERSION,))
    else:
        conn.execute("UPDATE schema_version SET version = %s WHERE one = 1", (SCHEMA_VERSION,))
