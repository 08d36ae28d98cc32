"""`make test-docker`: docker-compose.seaweed.yml on a real Docker daemon.

The images build (the gateway's, and SeaweedFS's, PostgreSQL's and HAProxy's on the same
base); the one-shot services make the shared keys and the bucket below; both nodes come up
healthy, each on a data volume of its own. An object written through one node reads back
through the other (and through HAProxy), its bytes are objects in SeaweedFS's bucket, and no
node's data folder holds a blob.

Same conditions as test_compose.py (DOCKER_TESTS=1, a daemon, compose v1 or v2); its own
project, image tags and loopback ports (the nodes' and SeaweedFS's published by the test's
override only); containers and volumes removed at the end.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.docker.test_cluster import Cluster
from tests.docker.test_compose import COMPOSE, ROOT, WHY_NOT, _free_port

pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)

SEAWEED_FILE = ROOT / "docker-compose.seaweed.yml"
PROJECT = "s3gw-test-seaweed"
NODES = ("s3gw-node1", "s3gw-node2")
IMAGES = {
    "seaweedfs": "s3gw-seaweedfs:test-docker",
    "postgres": "s3gw-postgres:test-docker",
    "haproxy": "s3gw-haproxy:test-docker",
    **{s: "s3gw:test-docker" for s in ("s3gw-secrets", "s3gw-blob-bucket", *NODES)},
}
BUCKET, PREFIX = "s3gw-blobs", "nodes/"  # the file's default S3GW_BLOBS
MiB = 1024 * 1024


@dataclass
class SeaweedCluster(Cluster):
    """The SeaweedFS file as its own project; each node and SeaweedFS's S3 port on a
    loopback port of their own, so that the test picks the node it talks to."""

    node_ports: dict[str, int] = field(default_factory=dict)
    seaweed_port: int = field(default_factory=_free_port)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.node_ports = {node: _free_port() for node in NODES}
        published = {**self.node_ports, "seaweedfs": self.seaweed_port}
        inside = {"seaweedfs": 8333}
        lines = ["services:"]
        for service, image in IMAGES.items():
            lines += [f"  {service}:", f"    image: {image}"]
            if service in published:
                port = f"127.0.0.1:{published[service]}:{inside.get(service, 9000)}"
                lines += ["    ports:", f'      - "{port}"']
        self.override.write_text("\n".join(lines) + "\n")

    def argv(self, *args: str) -> list[str]:
        files = ["-f", str(SEAWEED_FILE), "-f", str(self.override)]
        return [*COMPOSE, "--env-file", str(self.env_file), "-p", PROJECT, *files, *args]

    def node_client(self, node: str, keys: dict[str, str]) -> Any:
        port, self.port = self.port, self.node_ports[node]
        try:
            return self.client(keys)
        finally:
            self.port = port

    def seaweed_client(self) -> Any:
        """SeaweedFS's own S3, with the keys the nodes use (the secrets volume's file)."""
        import boto3
        from botocore.config import Config

        text = self.compose("exec", "-T", NODES[0], "cat", "/secrets/blobs.credentials")
        ini = configparser.ConfigParser()
        ini.read_string(text)
        return boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.seaweed_port}",
            aws_access_key_id=ini["default"]["aws_access_key_id"],
            aws_secret_access_key=ini["default"]["aws_secret_access_key"],
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedCluster]:
    cluster = SeaweedCluster(tmp_path_factory.mktemp("seaweed"))
    cluster.compose("down", "-v", "--remove-orphans", check=False)
    try:
        cluster.compose("build", timeout=1800)
        cluster.compose("up", "-d", timeout=600)
        cluster.wait_ready(NODES)
        yield cluster
    finally:
        print(cluster.cluster_logs()[-1500:])
        cluster.compose("down", "-v", "--remove-orphans", check=False)


def test_two_nodes_share_blobs_in_seaweedfs_and_no_volume(cluster):
    # One pair of keys on both nodes: the one-shot s3gw-secrets made it, each node copied it.
    said = {}
    for node in NODES:
        out = cluster.compose("exec", "-T", node, "s3gw", "credentials")
        said[node] = dict(
            line.removeprefix("export ").partition("=")[::2] for line in out.splitlines()
        )
    assert said[NODES[0]] == said[NODES[1]]
    keys = said[NODES[0]]
    # ... and one keyring: the same master key in each folder.
    masters = {
        cluster.compose("exec", "-T", node, "sha256sum", "/data/master.key").split()[0]
        for node in NODES
    }
    assert len(masters) == 1

    one, other = (cluster.node_client(node, keys) for node in NODES)
    one.create_bucket(Bucket="tier")
    # Above the tier's 256 KiB inline threshold: each a blob below; the last a multipart
    # upload below (over 8 MiB). SSE-S3 by default: what lands below is ciphertext, which
    # only the shared keyring opens on the other node.
    bodies = {f"k{n}": os.urandom(300_000 + n * 70_000) for n in range(8)}
    bodies["large"] = os.urandom(20 * MiB + 5)
    for key, body in bodies.items():
        one.put_object(Bucket="tier", Key=key, Body=body)
    one.put_object(Bucket="tier", Key="small", Body=b"inline in the catalog")
    for key, body in bodies.items():
        got = other.get_object(Bucket="tier", Key=key)["Body"].read()
        assert hashlib.sha256(got).digest() == hashlib.sha256(body).digest(), key
    ranged = other.get_object(Bucket="tier", Key="large", Range="bytes=9000000-9000099")
    assert ranged["Body"].read() == bodies["large"][9_000_000:9_000_100]
    # Written through the other node, read through the balancer.
    other.put_object(Bucket="tier", Key="back", Body=b"y" * 400_000)
    assert cluster.client(keys).get_object(Bucket="tier", Key="back")["Body"].read() == (
        b"y" * 400_000
    )

    # Below: one object per blob (the 9 through one node, "back" through the other, no
    # copies of them elsewhere), and the bucket's pairing with the catalog.
    seaweed = cluster.seaweed_client()
    found = []
    for page in seaweed.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX):
        found += [o["Key"] for o in page.get("Contents", [])]
    blobs = [k for k in found if k.startswith(f"{PREFIX}blobs/")]
    assert len(blobs) == len(bodies) + 1, found
    assert f"{PREFIX}catalog-id" in found
    # Not in a shared folder: no node's data folder holds a blob file.
    for node in NODES:
        out = cluster.compose("exec", "-T", node, "find", "/data", "-type", "f")
        files = out.split()
        assert not [f for f in files if f.startswith("/data/blobs/")], files
    # The nodes' data volumes are their own: /data is a different volume in each.
    volumes = set()
    for node in NODES:
        where = '{{range .Mounts}}{{if eq .Destination "/data"}}{{.Name}}{{end}}{{end}}'
        out = subprocess.run(
            ["docker", "inspect", "-f", where, cluster.service(node)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        volumes.add(out.stdout.strip())
    assert len(volumes) == len(NODES) and "" not in volumes, volumes
