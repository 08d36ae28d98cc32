"""Runs ceph's s3-tests against a gateway it starts, then prints passed / failed / errors /
skipped overall and per feature family. It reports, it does not gate: it exits 0 whatever the
tests say (non-zero only when it could not run them).

    python s3tests/run.py --suite /path/to/s3-tests [-- extra pytest args]

The suite runs from its own virtualenv (`<suite>/.venv` unless --venv), created on first use
with the suite's requirements.txt and pytest-timeout from PyPI.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.process import GatewayProcess

TEMPLATE = Path(__file__).resolve().parent / "s3tests.conf.in"

# test_s3.py is the S3 API; test_headers.py the malformed-header and authorization cases.
# The other files test IAM, STS, SNS and S3 Select, services an S3 server does not have.
DEFAULT_TESTS = [
    "s3tests/functional/test_s3.py",
    "s3tests/functional/test_headers.py",
    # RGW's SNS-compatible topics for bucket notifications, served since issue 41.
    "s3tests/functional/test_sns.py",
]

# Deselected by default: tests that need something no plain S3 server has. The suite's README
# suggests `not fails_on_aws` only for runs against AWS itself, so those tests stay in (they are
# counted apart in the summary). A `-m` among the extra pytest args replaces this expression.
EXCLUDED_MARKERS: dict[str, tuple[str, ...]] = {
    # IAM's account model (test_iam.py's [iam root] and [iam alt root] accounts: users, groups,
    # roles, policies) is served and runs. These are RGW's older model, where an admin user
    # puts policies on other accounts' root users and roles have ARNs of no account
    # (arn:aws:iam:::role/NAME), which AWS has no equivalent of (docs/iam.md).
    "RGW's account-less IAM and STS (user policies on other users, tenants, web identity)": (
        "iam_tenant",
        "user_policy",
        "session_policy",
        "abac_test",
        "test_of_sts",
        "webidentity_test",
        "token_claims_trust_policy_test",
        "token_principal_tag_role_policy_test",
        "token_request_tag_trust_policy_test",
        "token_resource_tags_test",
        "token_role_tags_test",
        "token_tag_keys_test",
    ),
    "S3 Select": ("s3select",),
    "a second S3 endpoint as a tiering target ([s3 cloud])": (
        "cloud_transition",
        "cloud_restore",
        "target_by_bucket",
    ),
    "lifecycle transitions to other storage classes (this gateway has one)": (
        "lifecycle_transition",
    ),
}

# The family of a test, from its name: the first pattern that matches wins, so the specific
# features come before the operations they ride on (`test_versioning_copy_obj_version` is
# versioning, `test_copy_object_ifmatch_good` is copy).
FAMILIES: list[tuple[str, str]] = [
    ("auth sigv2", r"_aws2$|_v2$"),
    ("logging", r"logging"),
    ("lifecycle", r"lifecycle|restore|read_through"),
    ("object lock", r"object_lock"),
    ("encryption", r"encrypt|sse_|_enc_|_enc$"),
    ("policy", r"polic|public_block|block_public|ignore_public"),
    ("cors", r"cors"),
    ("acl", r"acl|grant|access_bucket|ownership"),
    ("tagging", r"tag"),
    ("versioning", r"version|delete_marker"),
    ("checksums", r"checksum|cksum"),
    ("post object", r"post_object"),
    ("attributes", r"attributes"),
    ("copy", r"copy"),
    ("conditional", r"if_?match|if_?none_?match|ifnonmatch|modifiedsince|conditional"),
    ("multipart", r"multipart|_part|abort_"),
    ("bucket", r"list_buckets|buckets_"),
    ("list", r"list|key_count|delimiter|prefix|marker|continuationtoken|startafter"),
    ("auth", r"auth|presign|x_amz_expires|anon|amz_date|_expired"),
    ("range", r"range"),
    ("bucket", r"bucket|usage"),
    ("object", r"object|atomic|100_continue|metadata"),
]


@dataclass(frozen=True)
class Result:
    name: str  # the test function's name, without parameters
    outcome: str  # passed, failed, error or skipped


def family(name: str) -> str:
    for fam, pattern in FAMILIES:
        if re.search(pattern, name.removeprefix("test_")):
            return fam
    return "other"


def render_config(host: str, port: int) -> str:
    return TEMPLATE.read_text().replace("@HOST@", host).replace("@PORT@", str(port))


def users_toml(config_text: str) -> str:
    """The gateway's users file, from the suite's user sections (user_id -> canonical_id; the
    email its grants by e-mail address name the user by)."""
    cfg = configparser.RawConfigParser()
    cfg.read_string(config_text)
    out = []
    for section in ("s3 main", "s3 alt", "s3 tenant", "iam root", "iam alt root"):
        s = cfg[section]
        out.append("[[user]]")
        for field, value in (
            ("access_key", s["access_key"]),
            ("secret_key", s["secret_key"]),
            # The IAM accounts' roots have no display name in the suite's configuration.
            ("display_name", s.get("display_name", section.replace(" ", "-"))),
            ("canonical_id", s["user_id"]),
            ("email", s["email"]),
        ):
            out.append(f"{field} = {json.dumps(value)}")  # a JSON string is a TOML string
        out.append("")
    return "\n".join(out)


def ensure_venv(suite: Path, venv: Path) -> Path:
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import boto3, munch, pytest, pytest_timeout"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"setting up the suite's virtualenv in {venv} (its requirements, from PyPI)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "-r", str(suite / "requirements.txt"), "pytest-timeout"], check=True)
    return python


def markers_by_test(suite: Path, files: list[str]) -> dict[str, set[str]]:
    """`@pytest.mark.X` decorators of each test function, read from the suite's source."""
    marks: dict[str, set[str]] = {}
    for name in files:
        path = suite / name
        for source in [path] if path.is_file() else sorted(path.glob("test_*.py")):
            for node in ast.parse(source.read_text()).body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                    marks[node.name] = {
                        d.attr
                        for d in node.decorator_list
                        if isinstance(d, ast.Attribute) and ast.unparse(d.value) == "pytest.mark"
                    }
    return marks


def read_junit(path: Path) -> list[Result]:
    # A test can be reported twice (a failure, then an error in its teardown): keep the worst.
    rank = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}
    worst: dict[str, str] = {}
    for case in ET.parse(path).iter("testcase"):
        tags = {child.tag for child in case}
        outcome = next(
            (
                o
                for t, o in (("failure", "failed"), ("error", "error"), ("skipped", "skipped"))
                if t in tags
            ),
            "passed",
        )
        key = f"{case.get('classname')}::{case.get('name')}"
        if rank[outcome] >= rank[worst.get(key, "passed")]:
            worst[key] = outcome
    return [Result(key.rpartition("::")[2].partition("[")[0], o) for key, o in worst.items()]


def run_suite(
    python: Path, suite: Path, conf: Path, pytest_args: list[str], log: Path, max_minutes: float
) -> bool:
    """Runs pytest in the suite's folder; True if it had to be stopped at the time limit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # The suite's clients name no region: make sure none leaks in from the caller's AWS config.
    env |= {
        "S3TEST_CONF": str(conf),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(python), "-m", "pytest", *pytest_args],
            cwd=suite,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            proc.wait(timeout=max_minutes * 60)
            return False
        except subprocess.TimeoutExpired:
            # SIGINT, not SIGKILL: pytest stops and still writes the JUnit report.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return True


# Outcome (as read from the report) -> column heading.
COLUMNS = {"passed": "passed", "failed": "failed", "error": "errors", "skipped": "skipped"}


def print_summary(results: list[Result], marks: dict[str, set[str]]) -> None:
    by_family: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        by_family[family(r.name)][r.outcome] += 1
    total = Counter(r.outcome for r in results)
    rgw_only = Counter(r.outcome for r in results if "fails_on_aws" in marks.get(r.name, ()))

    def row(label: str, cells: list[object]) -> str:
        return f"{label:<14}" + "".join(f"{cell:>9}" for cell in cells)

    def counts(c: Counter[str]) -> list[object]:
        return [c[outcome] for outcome in COLUMNS] + [c.total()]

    print()
    print(row("family", [*COLUMNS.values(), "total"]))
    for fam in sorted(by_family, key=lambda f: (-by_family[f].total(), f)):
        print(row(fam, counts(by_family[fam])))
    print(row("all", counts(total)))
    print(row("fails_on_aws", counts(rgw_only)) + "   (of all: RGW behaviour AWS lacks too)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite",
        default=os.environ.get("S3TESTS_DIR", ""),
        help="a checkout of https://github.com/ceph/s3-tests (env S3TESTS_DIR)",
    )
    parser.add_argument("--venv", type=Path, help="the suite's virtualenv (<suite>/.venv)")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test (120)")
    parser.add_argument("--max-minutes", type=float, default=25, help="for the whole run (25)")
    parser.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    args = parser.parse_args(argv)
    suite = Path(args.suite).resolve() if args.suite else None
    if suite is None or not (suite / "s3tests" / "functional").is_dir():
        parser.error(
            "--suite must name a checkout of the suite: git clone https://github.com/ceph/s3-tests"
        )
    python = ensure_venv(suite, args.venv or suite / ".venv")

    work = Path(tempfile.mkdtemp(prefix="s3gw-s3tests-"))
    chosen = [a for a in args.pytest_args if a.startswith("s3tests/")]
    paths = [a.partition("::")[0] for a in chosen] or DEFAULT_TESTS
    # A -m of the caller's replaces ours rather than narrowing it.
    own_filter = "-m" not in args.pytest_args
    expression = " or ".join(m for ms in EXCLUDED_MARKERS.values() for m in ms)
    report = work / "report.xml"
    pytest_args = [
        *([] if chosen else DEFAULT_TESTS),
        *(["-m", f"not ({expression})"] if own_filter else []),
        "-v", "--tb=short", "-p", "no:cacheprovider",
        f"--timeout={args.timeout}", f"--junitxml={report}",
        *args.pytest_args,
    ]  # fmt: skip

    users = work / "users.toml"
    # The suite's SSE-KMS tests name the keys testkey-1 and testkey-2 (its defaults), and its
    # SSE-C tests run over plain HTTP, which AWS (and s3gw by default) refuses.
    kms_keys = work / "kms.toml"
    kms_keys.write_text('[[key]]\nid = "testkey-1"\n\n[[key]]\nid = "testkey-2"\n')
    gateway = GatewayProcess(
        work / "data",
        {
            "S3GW_USERS": str(users),
            "S3GW_ACCESS_KEY": "",
            "S3GW_SECRET_KEY": "",
            # The suite assumes ACLs work on a new bucket and nothing is blocked, as buckets
            # were before April 2023; its own home (RGW) is configured that way.
            "S3GW_BUCKET_DEFAULTS": "legacy",
            # Its lifecycle tests count "days" of 10 s (lc_debug_interval, the conf's default).
            "S3GW_LIFECYCLE_DAY": "10",
            # Its logging tests wait 5.5 s for a log object (RGW's roll time of 5 s, which
            # its README asks for), then expect the records of the requests before in one.
            "S3GW_LOG_DELIVERY_INTERVAL": "4",
            # One process: each process delivers the records it took in objects of its own,
            # and those tests expect every record of a test in one object. (The suite sends
            # one request at a time: a second process would not make it faster.)
            "S3GW_WORKERS": "1",
            "S3GW_KMS_KEYS": str(kms_keys),
            "S3GW_SSE_C_OVER_HTTP": "allow",
            # Its test_bucket_acl_grant_email grants by e-mail address, which AWS (and s3gw by
            # default) has refused since October 2025.
            "S3GW_EMAIL_GRANTS": "resolve",
        },
    )
    conf = work / "s3tests.conf"
    print(f"s3-tests from {suite}, in {work}")
    if own_filter:
        print("deselected: the tests marked as needing")
        for reason, markers in EXCLUDED_MARKERS.items():
            print(f"  {reason}: {', '.join(markers)}")
    try:
        # The users come from the template itself: they must exist before the gateway
        # starts, and the address is known only after.
        users.write_text(users_toml(TEMPLATE.read_text()))
        gateway.start()
        url = urlsplit(gateway.url)
        assert url.hostname is not None and url.port is not None
        conf.write_text(render_config(url.hostname, url.port))
        print(f"gateway {gateway.url}; pytest {' '.join(pytest_args)}")
        print(f"progress: tail -f {work / 'pytest.log'}", flush=True)
        stopped = run_suite(python, suite, conf, pytest_args, work / "pytest.log", args.max_minutes)
    finally:
        gateway.stop()
        (work / "gateway.log").write_text("".join(gateway.log))
        shutil.rmtree(work / "data", ignore_errors=True)
    if stopped:
        print(f"stopped after {args.max_minutes:g} minutes: the figures cover the tests run")
    if not report.exists():
        print(f"no JUnit report: see {work / 'pytest.log'}")
        return 1
    print_summary(read_junit(report), markers_by_test(suite, paths))
    print(f"\nreport {report}, logs {work / 'pytest.log'} and {work / 'gateway.log'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
