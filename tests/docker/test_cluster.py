"""`make test-docker`: docker-compose.cluster.yml on a real Docker daemon.

The images build (the gateway's, and PostgreSQL's and HAProxy's from Debian packages on the
same base), PostgreSQL and the three nodes come up healthy, HAProxy on the published port
spreads requests over all three nodes, every object lands in the PostgreSQL catalog, and when
one node is killed the cluster keeps serving every read and write through the same port.

Same conditions as test_compose.py (DOCKER_TESTS=1, a daemon, compose v1 or v2); its own
project, image tags and loopback port; containers and volumes removed at the end.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.docker.test_compose import COMPOSE, ROOT, WHY_NOT, Project

pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)

CLUSTER_FILE = ROOT / "docker-compose.cluster.yml"
PROJECT = "s3gw-test-cluster"
NODES = ("s3gw-node1", "s3gw-node2", "s3gw-node3")
IMAGES = {
    "postgres": "s3gw-postgres:test-docker",
    "haproxy": "s3gw-haproxy:test-docker",
    **{node: "s3gw:test-docker" for node in NODES},
}


class Cluster(Project):
    """The cluster file as its own project, with the images tagged for the tests."""

    def __post_init__(self) -> None:
        super().__post_init__()
        lines = ["services:"]
        for service, image in IMAGES.items():
            lines += [f"  {service}:", f"    image: {image}"]
        self.override.write_text("\n".join(lines) + "\n")

    def argv(self, *args: str) -> list[str]:
        files = ["-f", str(CLUSTER_FILE), "-f", str(self.override)]
        return [*COMPOSE, "--env-file", str(self.env_file), "-p", PROJECT, *files, *args]

    def service(self, name: str) -> str:
        cid = self.compose("ps", "-a", "-q", name).strip()
        assert cid, f"no container for {name}"
        return cid

    def health(self, name: str) -> str:
        state = "{{.State.Status}} {{.State.Health.Status}}"
        out = subprocess.run(
            ["docker", "inspect", "-f", state, self.service(name)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return out.stdout.strip()

    def wait_ready(self, names: tuple[str, ...], timeout: float = 240) -> None:
        """Every node in `names` healthy, and the load balancer answering ready."""
        deadline = time.monotonic() + timeout
        while True:
            states = {name: self.health(name) for name in names}
            if all(s == "running healthy" for s in states.values()) and self.balancer_ready():
                return
            assert time.monotonic() < deadline, f"{states}\n{self.cluster_logs()}"
            time.sleep(1)

    def balancer_ready(self) -> bool:
        try:
            url = f"http://127.0.0.1:{self.port}/health/ready"
            with urllib.request.urlopen(url, timeout=5) as reply:
                return bool(reply.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def cluster_logs(self) -> str:
        return self.compose("logs", "--no-color", check=False)[-4000:]

    def psql(self, sql: str) -> str:
        psql = ["psql", "-U", "s3gw", "-d", "s3gw", "-tAc", sql]
        return self.compose("exec", "-T", "postgres", *psql).strip()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("cluster"))
    cluster.compose("down", "-v", "--remove-orphans", check=False)
    try:
        cluster.compose("build", timeout=1800)
        cluster.compose("up", "-d")
        cluster.wait_ready(NODES)
        yield cluster
    finally:
        print(cluster.cluster_logs()[-1500:])
        cluster.compose("down", "-v", "--remove-orphans", check=False)


def test_three_nodes_behind_haproxy_survive_one_killed(cluster):
    out = cluster.compose("exec", "-T", NODES[0], "s3gw", "credentials")
    keys = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        keys[name] = value
    s3 = cluster.client(keys)
    s3.create_bucket(Bucket="cluster")
    bodies = {f"before/{n}": os.urandom(n * 40_000 + 1) for n in range(30)}
    for key, body in bodies.items():
        s3.put_object(Bucket="cluster", Key=key, Body=body)

    # HAProxy spread the requests: every node served some (its access log says so).
    for node in NODES:
        logged = cluster.compose("logs", "--no-color", node, check=False)
        assert "PUT /cluster/before/" in logged, f"{node} served no PUT:\n{logged[-1500:]}"
    # The catalog is PostgreSQL's: every object is a row there.
    assert cluster.psql("SELECT count(*) FROM objects WHERE bucket = 'cluster'") == "30"

    subprocess.run(["docker", "kill", cluster.service(NODES[1])], check=True, timeout=60)
    for key, body in bodies.items():
        got = s3.get_object(Bucket="cluster", Key=key)["Body"].read()
        assert hashlib.md5(got).digest() == hashlib.md5(body).digest(), key
    for n in range(20):
        s3.put_object(Bucket="cluster", Key=f"after/{n}", Body=b"x" * n)
    listed = s3.list_objects_v2(Bucket="cluster")["KeyCount"]
    assert listed == 50

    # Back again: it rejoins behind the balancer and serves what was written without it.
    cluster.compose("start", NODES[1])
    cluster.wait_ready(NODES)
    assert s3.get_object(Bucket="cluster", Key="after/19")["Body"].read() == b"x" * 19
