"""The harness's own verdict, shown failing: a run in which one kind of operation is always
refused (here every CopyObject answers 400, as a broken copy would) must fail, by the 4xx it did
not provoke and by that kind's missing successes, though the model stays consistent (a refused
write changes nothing). The same run with working copies passes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability.harness import (
    Contents,
    CrashableGateway,
    KiB,
    MiB,
    Stats,
    Worker,
    Workload,
    client,
    make_library,
    operations,
    verify,
)

WEIGHTS = {
    "put_small": 30,
    "put_large": 5,
    "copy": 25,
    "delete": 10,
    "delete_objects": 5,
    "multipart": 10,
    "get": 15,
}


class RefusedCopies(Worker):
    """A worker whose copies the server refuses: an unknown x-amz-metadata-directive is 400
    InvalidArgument."""

    def op_copy(self) -> None:
        src, dst = self.key(), self.key()
        out = self.call(
            "CopyObject",
            self.s3.copy_object,
            Bucket=self.w.bucket,
            Key=dst,
            CopySource={"Bucket": self.w.bucket, "Key": src},
            MetadataDirective="NEITHER",
        )
        self.wrote(dst, out, set(), f"copy from {src}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = CrashableGateway(tmp_path_factory.mktemp("harness") / "data").start()
    yield server
    server.stop()


def _run(server: CrashableGateway, bucket: str, kind: type[Worker]) -> tuple[Stats, list[str]]:
    s3 = client(server.url)
    contents, stats = Contents(), Stats()
    library = make_library(s3, contents, f"{bucket}-library", 7)
    s3.create_bucket(Bucket=bucket)
    workload = Workload(bucket, ["a", "b", "c"], contents, library, stats, WEIGHTS, (KiB, MiB))
    workload.url = server.url
    workers = [kind(workload, f"{bucket}/{i}", max_ops=40) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not [w for w in workers if w.is_alive()]
    return stats, verify(s3, workload, rebase=False).losses


def test_the_run_fails_when_copies_answer_400(server: CrashableGateway) -> None:
    stats, losses = _run(server, "refused", RefusedCopies)
    assert losses == []  # the model alone is satisfied: nothing the copies did is expected
    failures = stats.failures(operations(WEIGHTS), minimum=3)
    refused = stats.statuses[("CopyObject", "400 InvalidArgument")]
    assert refused > 0
    assert failures == [
        f"refused: CopyObject 400 InvalidArgument x{refused}",
        "CopyObject succeeded 0 times (at least 3 needed)",
    ]


def test_the_same_run_with_working_copies_passes(server: CrashableGateway) -> None:
    stats, losses = _run(server, "working", Worker)
    assert losses == []
    assert stats.failures(operations(WEIGHTS), minimum=3) == []
