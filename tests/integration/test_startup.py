"""Starting the gateway: a port another gateway holds, every start-up mistake as one line and
exit status 2, the credentials command, the main user beside a users file, the modes of what
the gateway creates, and the secret key kept out of the logs."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from gateway.users import _user
from tests.server import ACCESS_KEY, SECRET_KEY, GatewayProcess

ROOT = Path(__file__).resolve().parents[2]
NO_KEYS = {"S3GW_ACCESS_KEY": "", "S3GW_SECRET_KEY": ""}


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("S3GW_", "AWS_"))}
    return {**clean, **(env or {})}


def gateway(
    *args: str, env: dict[str, str] | None = None, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`s3gw ARGS` run to its end (a start that succeeds would run until the timeout), as
    `user` if given (setpriv: subprocess's own user= cannot exec a Python under /root)."""
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}"]
    return subprocess.run(
        [*prefix, *(["--clear-groups"] if prefix else []), sys.executable, "-m", "gateway", *args],
        env=_environment(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The start failed as a start-up mistake must: status 2, one line, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


# --- the port --------------------------------------------------------------------------------


@pytest.mark.parametrize("first", [1, 2])
@pytest.mark.parametrize("second", [1, 2])
def test_a_port_in_use_is_refused_whatever_the_workers(tmp_path, first, second):
    running = GatewayProcess(tmp_path / "first", {"S3GW_WORKERS": str(first)}).start()
    try:
        port = running.url.rsplit(":", 1)[1]
        done = gateway(
            "serve",
            "--data",
            str(tmp_path / "second"),
            "--address",
            f"127.0.0.1:{port}",
            "--workers",
            str(second),
        )
        assert one_line(done) == f"address 127.0.0.1:{port} is in use"
        # The first gateway still answers every connection itself.
        s3 = running.client()
        for i in range(8):
            s3.create_bucket(Bucket=f"still-mine-{i}")
    finally:
        running.stop()


# --- every mistake one line ------------------------------------------------------------------

USERS_FILES = {
    "single-table": '[user]\naccess_key = "AK1"\nsecret_key = "secret-1"\n',
    "empty-access-key": '[[user]]\naccess_key = ""\nsecret_key = "secret-1"\n',
    "empty-secret": '[[user]]\naccess_key = "AK1"\nsecret_key = ""\n',
    "slash-in-key": '[[user]]\naccess_key = "AK/1"\nsecret_key = "secret-1"\n',
    "duplicate-key": (
        '[[user]]\naccess_key = "AK1"\nsecret_key = "secret-1"\n'
        '[[user]]\naccess_key = "AK1"\nsecret_key = "secret-2"\n'
    ),
    "not-toml": "[[user]\naccess_key = AK1\n",
    "no-secret": '[[user]]\naccess_key = "AK1"\n',
    # A canonical id is an account's name in ARNs, principals and grants: a plain token.
    "star-canonical-id": '[[user]]\naccess_key = "AK1"\nsecret_key = "secret-1"\n'
    'canonical_id = "*"\n',
    "spaced-canonical-id": '[[user]]\naccess_key = "AK1"\nsecret_key = "secret-1"\n'
    'canonical_id = "a b"\n',
    "colon-canonical-id": '[[user]]\naccess_key = "AK1"\nsecret_key = "secret-1"\n'
    'canonical_id = "a:root"\n',
}

# (case, arguments, environment, words the line must hold)
MISTAKES: list[tuple[str, list[str], dict[str, str], list[str]]] = [
    ("port-too-big", ["--address", "127.0.0.1:70000"], {}, ["--address", "S3GW_ADDRESS"]),
    ("port-not-a-number", ["--address", "127.0.0.1:http"], {}, ["--address"]),
    ("no-port", [], {"S3GW_ADDRESS": "localhost"}, ["S3GW_ADDRESS"]),
    ("unknown-host", ["--address", "nosuchhost.invalid:0"], {}, ["--address", "nosuchhost"]),
    ("host-not-here", ["--address", "192.0.2.1:0"], {}, ["--address", "192.0.2.1"]),
    ("data-under-a-file", ["--data", "{tmp}/file/data"], {}, ["--data", "S3GW_DATA"]),
    ("data-is-a-file", ["--data", "{tmp}/file"], {}, ["--data", "not a folder"]),
    (
        "tls-cert-missing",
        ["--tls-cert", "{tmp}/no.crt", "--tls-key", "{tmp}/file"],
        {},
        ["--tls-cert", "no.crt"],
    ),
    (
        "tls-key-missing",
        ["--tls-cert", "{tmp}/file", "--tls-key", "{tmp}/no.key"],
        {},
        ["--tls-key", "no.key"],
    ),
    (
        "tls-not-pem",
        ["--tls-cert", "{tmp}/file", "--tls-key", "{tmp}/file"],
        {},
        ["--tls-cert", "file"],
    ),
    ("tls-cert-alone", [], {"S3GW_TLS_CERT": "{tmp}/file"}, ["--tls-key"]),
    ("tls-self-signed-word", [], {"S3GW_TLS_SELF_SIGNED": "maybe"}, ["S3GW_TLS_SELF_SIGNED"]),
    ("users-missing", ["--users", "{tmp}/none.toml"], {}, ["--users", "none.toml"]),
    *[
        (f"users-{name}", ["--users", f"{{tmp}}/{name}.toml"], {}, ["--users", f"{name}.toml"])
        for name in USERS_FILES
    ],
    ("access-key-alone", [], {"S3GW_ACCESS_KEY": "AK1", "S3GW_SECRET_KEY": ""}, ["--secret-key"]),
    (
        "access-key-slash",
        [],
        {"S3GW_ACCESS_KEY": "A/K", "S3GW_SECRET_KEY": "secret-1"},
        ["--access-key"],
    ),
    ("max-uploads-0", ["--max-uploads", "0"], {}, ["--max-uploads", "S3GW_MAX_UPLOADS"]),
    ("header-size-small", ["--max-header-size", "512"], {}, ["--max-header-size"]),
    ("workers-negative", ["--workers", "-1"], {}, ["--workers"]),
    ("workers-fraction", [], {"S3GW_WORKERS": "1.5"}, ["S3GW_WORKERS"]),
    ("body-timeout-negative", ["--body-timeout", "-5"], {}, ["--body-timeout"]),
    ("idle-timeout-word", [], {"S3GW_IDLE_TIMEOUT": "soon"}, ["S3GW_IDLE_TIMEOUT"]),
    ("inline-max-huge", [], {"S3GW_INLINE_MAX": str(2**40)}, ["S3GW_INLINE_MAX"]),
    ("xml-size-negative", [], {"S3GW_MAX_XML_SIZE": "-1"}, ["S3GW_MAX_XML_SIZE"]),
    ("shutdown-timeout-nan", ["--shutdown-timeout", "nan"], {}, ["--shutdown-timeout"]),
    ("md5-backend", ["--md5-backend", "md6"], {}, ["--md5-backend", "hashlib"]),
    ("log-level", ["--log-level", "loud"], {}, ["--log-level", "info"]),
    ("log-format", [], {"S3GW_LOG_FORMAT": "xml"}, ["S3GW_LOG_FORMAT"]),
    ("loop", ["--loop", "trio"], {}, ["--loop"]),
]


@pytest.mark.parametrize(
    ("arguments", "env", "words"),
    [pytest.param(a, e, w, id=case) for case, a, e, w in MISTAKES],
)
def test_a_start_up_mistake_is_one_line_and_status_2(tmp_path, arguments, env, words):
    (tmp_path / "file").write_text("not a certificate, not a folder\n")
    for name, text in USERS_FILES.items():
        (tmp_path / f"{name}.toml").write_text(text)
    fill = lambda value: value.replace("{tmp}", str(tmp_path))  # noqa: E731
    arguments = [fill(a) for a in arguments]
    if "--data" not in arguments:
        arguments += ["--data", str(tmp_path / "data")]
    if "--address" not in arguments and "S3GW_ADDRESS" not in env:
        arguments += ["--address", "127.0.0.1:0"]
    done = gateway("serve", *arguments, env={k: fill(v) for k, v in env.items()})
    line = one_line(done)
    for word in words:
        assert word in line, line


@pytest.fixture
def public_tmp() -> Iterator[Path]:
    """A folder another user can reach (pytest's own are its user's alone)."""
    path = Path(tempfile.mkdtemp(prefix="s3gw-owner-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _as_another_user() -> int | None:
    """Run as `nobody` where the tests run as root (root may write anywhere)."""
    if os.geteuid() != 0:
        return None
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv to become another user")
    return 65534


def test_a_data_folder_of_another_user_says_what_to_chown(public_tmp):
    data = public_tmp / "data"
    data.mkdir(mode=0o755)
    user = _as_another_user()
    if user is None:
        pytest.skip("needs root to make a folder another user owns")
    (data / "catalog.sqlite3").write_bytes(b"")
    done = gateway("serve", "--data", str(data), "--address", "127.0.0.1:0", user=user)
    line = one_line(done)
    assert "--data" in line and f"chown -R {user}:{user} {data}" in line, line
    assert [p.name for p in data.iterdir()] == ["catalog.sqlite3"]


def test_a_data_folder_that_cannot_be_created(public_tmp):
    parent = public_tmp / "parent"
    parent.mkdir(mode=0o555)
    user = _as_another_user()
    done = gateway("serve", "--data", str(parent / "data"), "--address", "127.0.0.1:0", user=user)
    line = one_line(done)
    assert "--data" in line and str(parent / "data") in line, line


# --- s3gw credentials ------------------------------------------------------------------------


def test_credentials_of_a_folder_without_a_gateway_make_nothing(tmp_path):
    data = tmp_path / "nothing-here"
    line = one_line(gateway("credentials", "--data", str(data)))
    assert "no gateway" in line and str(data) in line, line
    assert not data.exists()

    server = GatewayProcess(data, NO_KEYS).start()
    server.stop()
    done = gateway("credentials", "--data", str(data))
    assert done.returncode == 0, done.stderr
    stored = json.loads((data / "credentials.json").read_text())
    assert f"export AWS_ACCESS_KEY_ID={stored['access_key']}" in done.stdout
    assert f"export AWS_SECRET_ACCESS_KEY={stored['secret_key']}" in done.stdout


# --- the main user and a users file ----------------------------------------------------------

OTHER = '[[user]]\naccess_key = "OTHERACCESSKEY000001"\nsecret_key = "other-secret"\n'


@pytest.mark.parametrize("keys", ["generated", "environment"])
def test_a_users_file_adds_users_and_keeps_the_main_one(tmp_path, keys):
    env = NO_KEYS if keys == "generated" else {}
    data = tmp_path / "data"
    server = GatewayProcess(data, env).start()
    if keys == "generated":
        stored = json.loads((data / "credentials.json").read_text())
        main_keys = (stored["access_key"], stored["secret_key"])
    else:
        main_keys = (ACCESS_KEY, SECRET_KEY)
    server.client(*main_keys).create_bucket(Bucket="made-before-users")
    server.stop()

    users = tmp_path / "users.toml"
    users.write_text(OTHER)
    server = GatewayProcess(data, {**env, "S3GW_USERS": str(users)}).start()
    try:
        main = server.client(*main_keys)
        assert [b["Name"] for b in main.list_buckets()["Buckets"]] == ["made-before-users"]
        other = server.client("OTHERACCESSKEY000001", "other-secret")
        assert other.list_buckets()["Buckets"] == []
    finally:
        server.stop()

    # A file that names the main user's access key gives it another secret, same buckets.
    users.write_text(f'[[user]]\naccess_key = "{main_keys[0]}"\nsecret_key = "rotated-secret"\n')
    server = GatewayProcess(data, {**env, "S3GW_USERS": str(users)}).start()
    try:
        rotated = server.client(main_keys[0], "rotated-secret")
        assert [b["Name"] for b in rotated.list_buckets()["Buckets"]] == ["made-before-users"]
        with pytest.raises(ClientError) as exc:
            server.client(*main_keys).list_buckets()
        assert exc.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    finally:
        server.stop()


# Two users with one canonical id would be one account: each other's buckets, objects, grants.
SAME_ID = "5a3e000000000000000000000000000000000000000000000000000000000001"
MAIN_ID = _user(ACCESS_KEY, SECRET_KEY).canonical_id


def _entry(access: str, secret: str = "secret-of-" + "x" * 10, canonical_id: str = "") -> str:
    extra = f'canonical_id = "{canonical_id}"\n' if canonical_id else ""
    return f'[[user]]\naccess_key = "{access}"\nsecret_key = "{secret}"\n{extra}'


@pytest.mark.parametrize(
    ("text", "env", "words"),
    [
        pytest.param(
            _entry("AK1", canonical_id=SAME_ID) + _entry("AK2", canonical_id=SAME_ID),
            {},
            ["users.toml", "AK1", "AK2", f"one canonical_id {SAME_ID}"],
            id="two-users-one-id",
        ),
        pytest.param(
            _entry("AK2", canonical_id=MAIN_ID),
            {"S3GW_ACCESS_KEY": ACCESS_KEY, "S3GW_SECRET_KEY": SECRET_KEY},
            ["users.toml", ACCESS_KEY, "AK2", f"one canonical_id {MAIN_ID}"],
            id="a-user-with-the-main-users-id",
        ),
        pytest.param(
            _entry("AK1")
            + 'email = "a@example.com"\n'
            + _entry("AK2")
            + 'email = "A@example.com"\n',
            {},
            ["users.toml", "AK1", "AK2", "one email"],
            id="two-users-one-email",
        ),
        pytest.param(
            _entry("AK1") + "email = 7\n",
            {},
            ["users.toml", "user 1", "email", "not a string"],
            id="an-email-not-a-string",
        ),
        pytest.param(
            _entry("AK1", secret="seven77"),
            {},
            ["--users", "users.toml", "secret key of AK1", "at least 8 characters"],
            id="users-file-secret-too-short",
        ),
        pytest.param(
            None,
            {"S3GW_ACCESS_KEY": "AK1", "S3GW_SECRET_KEY": "seven77"},
            ["--secret-key", "S3GW_SECRET_KEY", "secret key of AK1", "at least 8 characters"],
            id="main-secret-too-short",
        ),
    ],
)
def test_users_the_gateway_cannot_keep_apart_or_secrets_too_short(tmp_path, text, env, words):
    arguments = ["--data", str(tmp_path / "data"), "--address", "127.0.0.1:0"]
    if text is not None:
        (tmp_path / "users.toml").write_text(text)
        arguments += ["--users", str(tmp_path / "users.toml")]
    line = one_line(gateway("serve", *arguments, env=env))
    for word in words:
        assert word in line, line
    assert "seven77" not in line  # a secret is never shown


def test_a_secret_of_8_characters_is_enough(tmp_path):
    users = tmp_path / "users.toml"
    users.write_text(_entry("AK8CHARS", secret="eight888"))
    server = GatewayProcess(tmp_path / "data", {"S3GW_USERS": str(users)}).start()
    try:
        assert server.client("AK8CHARS", "eight888").list_buckets()["Buckets"] == []
    finally:
        server.stop()


# --- the KMS keys file -----------------------------------------------------------------------

KMS_FILES: dict[str, tuple[str, list[str]]] = {
    "duplicate-id": (
        '[[key]]\nid = "testkey-1"\n[[key]]\nid = "testkey-2"\n[[key]]\nid = "testkey-1"\n',
        ["key 3", "testkey-1", "twice"],
    ),
    "unknown-key-field": (
        '[[key]]\nid = "testkey-1"\nenabeld = false\n',
        ["key testkey-1", "unknown field 'enabeld'", "arn", "enabled", "id"],
    ),
    "unknown-table": ('[[keys]]\nid = "testkey-1"\n', ["unknown 'keys'", "[[key]]"]),
    "single-table": ('[key]\nid = "testkey-1"\n', ["[[key]] tables"]),
    "no-id": ('[[key]]\narn = "arn:aws:kms:us-east-1:000000000000:key/x"\n', ["key 1", "id"]),
    "enabled-word": ('[[key]]\nid = "testkey-1"\nenabled = "no"\n', ["testkey-1", "enabled"]),
    "not-toml": ("[[key]\nid = testkey-1\n", ["not a TOML file"]),
}


@pytest.mark.parametrize("name", list(KMS_FILES))
def test_a_kms_keys_file_mistake_is_one_line_naming_the_file(tmp_path, name):
    text, words = KMS_FILES[name]
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    data = tmp_path / "data"
    done = gateway(
        "serve", "--data", str(data), "--address", "127.0.0.1:0", "--kms-keys", str(path)
    )
    line = one_line(done)
    for word in ["--kms-keys", "S3GW_KMS_KEYS", str(path), *words]:
        assert word in line, line
    assert not data.exists()  # refused before anything was made


# --- modes -----------------------------------------------------------------------------------


def test_what_the_gateway_creates_is_its_users_alone(tmp_path):
    data = tmp_path / "new" / "data"
    server = GatewayProcess(data, {**NO_KEYS, "S3GW_TLS_SELF_SIGNED": "1"}).start()
    try:
        stored = json.loads((data / "credentials.json").read_text())
        s3 = server.client(
            stored["access_key"], stored["secret_key"], verify=str(data / "tls/localhost.crt")
        )
        s3.create_bucket(Bucket="modes")
        s3.put_object(Bucket="modes", Key="inline", Body=b"x" * 1024)
        s3.put_object(Bucket="modes", Key="file", Body=os.urandom(200_000))
        found = {"dir": 0, "file": 0, "wal": 0, "blob": 0}
        for folder, dirs, files in os.walk(data):
            for name in [*dirs, *files]:
                path = Path(folder, name)
                mode = stat.S_IMODE(path.stat().st_mode)
                assert mode & 0o077 == 0, f"{path} is {mode:o}"
                found["dir" if name in dirs else "file"] += 1
                found["wal"] += name.endswith("-wal")
                found["blob"] += "blobs" in path.parts and name in files
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert stat.S_IMODE((data / "catalog.sqlite3").stat().st_mode) == 0o600
        assert stat.S_IMODE((data / "tmp").stat().st_mode) == 0o700
        assert found["wal"] == 1 and found["blob"] == 1, found
    finally:
        server.stop()


# --- the banner ------------------------------------------------------------------------------


def test_the_secret_key_is_shown_only_on_the_start_that_made_it(tmp_path):
    data = tmp_path / "data"
    server = GatewayProcess(data, NO_KEYS).start()
    server.stop()
    secret = json.loads((data / "credentials.json").read_text())["secret_key"]
    first = "".join(server.log)
    assert secret in first
    assert str(data / "credentials.json") in first and "s3gw credentials" in first

    server = GatewayProcess(data, NO_KEYS).start()
    server.stop()
    again = "".join(server.log)
    assert secret not in again
    assert str(data / "credentials.json") in again and "s3gw credentials" in again

    server = GatewayProcess(tmp_path / "env").start()
    server.stop()
    assert SECRET_KEY not in "".join(server.log)


# --- a folder and the wrong catalog -------------------------------------------------------------


def _blob_files(data: Path) -> list[Path]:
    return sorted(p for p in (data / "blobs").rglob("*") if p.is_file())


def test_a_folder_of_another_catalog_is_refused_and_keeps_its_files(tmp_path):
    """The folder's objects live in a catalog the start was not given (a forgotten
    --catalog makes a new, empty SQLite catalog): the start is one line and deletes nothing,
    where its sweep would have called every file an orphan. fsck --repair refuses the same
    way. Given its own catalog back, the folder serves its object."""
    data = tmp_path / "data"
    body = os.urandom(256 * 1024)  # over --inline-max: a blob file
    server = GatewayProcess(data, None).start()
    try:
        s3 = server.client()
        s3.create_bucket(Bucket="kept")
        s3.put_object(Bucket="kept", Key="big", Body=body)
    finally:
        server.stop()
    files = _blob_files(data)
    assert files
    elsewhere = tmp_path / "its-catalog"
    elsewhere.mkdir()
    for path in data.glob("catalog.sqlite3*"):
        path.rename(elsewhere / path.name)

    line = one_line(gateway("serve", "--data", str(data), "--address", "127.0.0.1:0"))
    assert "another catalog" in line and str(data) in line
    assert _blob_files(data) == files
    repair = gateway("fsck", "--data", str(data), "--repair")
    assert repair.returncode == 2 and "nothing was repaired" in repair.stderr, repair.stderr
    assert _blob_files(data) == files

    for path in data.glob("catalog.sqlite3*"):
        path.unlink()
    for path in elsewhere.iterdir():
        path.rename(data / path.name)
    server = GatewayProcess(data, None).start()
    try:
        assert server.client().get_object(Bucket="kept", Key="big")["Body"].read() == body
    finally:
        server.stop()
