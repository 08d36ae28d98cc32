"""`make smoke`: starts a gateway on a free port of 127.0.0.1 with a fresh data folder, points
the smoke suite at it through the environment, runs it, and exits with pytest's status.

    python s3tests/smoke/run.py [--tls] [pytest args]

--tls serves HTTPS with a self-signed certificate, trusted through AWS_CA_BUNDLE. To run the
suite against another S3 instead, set the variables listed in conftest.py and run pytest on
this folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.process import ACCESS_KEY, SECRET_KEY, GatewayProcess

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def suite_environment(url: str, ca_bundle: Path | None) -> dict[str, str]:
    # Nothing of the caller's AWS setup (profile, session token, config) reaches the suite.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
    env.update(
        S3_ENDPOINT_URL=url,
        AWS_ACCESS_KEY_ID=ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY=SECRET_KEY,
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        # The aws command of this virtualenv, for the CLI pass.
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    if ca_bundle is not None:
        env["AWS_CA_BUNDLE"] = str(ca_bundle)
    return env


def main(argv: list[str]) -> int:
    tls = "--tls" in argv
    pytest_args = [a for a in argv if a != "--tls"]
    work = Path(tempfile.mkdtemp(prefix="s3gw-smoke-"))
    gateway = GatewayProcess(work / "data", {"S3GW_TLS_SELF_SIGNED": "1"} if tls else {})
    try:
        gateway.start()
        ca_bundle = gateway.data / "tls" / "localhost.crt" if tls else None
        print(f"smoke suite against a gateway on {gateway.url}", flush=True)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", str(HERE), "-p", "no:cacheprovider", *pytest_args],
            cwd=ROOT,
            env=suite_environment(gateway.url, ca_bundle),
        )
        # The suite must leave an S3 as it found it: here, with no bucket at all.
        s3 = gateway.client(verify=str(ca_bundle) if ca_bundle else None)
        left = [b["Name"] for b in s3.list_buckets()["Buckets"]]
        if left:
            print(f"the smoke suite left buckets behind: {left}", file=sys.stderr)
    finally:
        gateway.stop()
        shutil.rmtree(work, ignore_errors=True)
    if done.returncode == 0:
        return 1 if left else 0
    fd, log = tempfile.mkstemp(prefix="s3gw-smoke-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        f.writelines(gateway.log)
    tail = "".join(gateway.log[-40:])
    print(f"the gateway's log ends with:\n{tail}\nall of it: {log}", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
