"""The smoke suite's fixtures: clients for the S3 endpoint named in the environment, and
buckets with names unique to the run, emptied and deleted after each test whatever S3 it is.

    S3_ENDPOINT_URL        the endpoint (required: the suite never guesses one)
    AWS_ACCESS_KEY_ID      the keys, as boto3 and aws-cli read them
    AWS_SECRET_ACCESS_KEY
    AWS_CA_BUNDLE          for https with a certificate the system does not trust
    AWS_DEFAULT_REGION     (or AWS_REGION) the endpoint's region; default us-east-1
    S3_ADDRESSING_STYLE    path (default), virtual or auto
    S3_BUCKET_PREFIX       prefix of the buckets the suite creates; default s3gw-smoke-
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

ENDPOINT = os.environ.get("S3_ENDPOINT_URL", "")
REGION = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
ADDRESSING_STYLE = os.environ.get("S3_ADDRESSING_STYLE", "path")
BUCKET_PREFIX = os.environ.get("S3_BUCKET_PREFIX", "s3gw-smoke-")
# Unique to this run (and to each process of a parallel one): runs against a shared S3
# never meet each other's buckets.
RUN_ID = uuid.uuid4().hex[:10]
_numbers = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    if not ENDPOINT:
        raise pytest.UsageError(
            "the smoke suite runs against a live S3 endpoint: set S3_ENDPOINT_URL, "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_CA_BUNDLE for https), "
            "or run `make smoke`, which starts a gateway for it"
        )


def make_client(**config: Any) -> Any:
    """A boto3 S3 client for the endpoint; keys and CA bundle come from the environment as
    boto3 reads them. No retries: a smoke test wants the first answer."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=ENDPOINT,
        region_name=REGION,
        config=Config(
            s3={"addressing_style": ADDRESSING_STYLE},
            retries={"total_max_attempts": 1},
            **config,
        ),
    )


def create_bucket(s3: Any, name: str) -> None:
    # Outside us-east-1, S3 wants the region named in the request (IllegalLocationConstraint).
    location = {"CreateBucketConfiguration": {"LocationConstraint": REGION}}
    s3.create_bucket(Bucket=name, **({} if REGION == "us-east-1" else location))


def remove_bucket(s3: Any, name: str) -> None:
    """Aborts the bucket's uploads, deletes its objects, then the bucket; gone already is fine."""
    try:
        for page in s3.get_paginator("list_multipart_uploads").paginate(Bucket=name):
            for upload in page.get("Uploads", []):
                s3.abort_multipart_upload(
                    Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
                )
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                errors = s3.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
                assert not errors.get("Errors"), errors["Errors"]
        s3.delete_bucket(Bucket=name)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchBucket":
            raise


class Buckets:
    """Names and creates the test's buckets; `remove_all` deletes them with their content."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3
        self.names: list[str] = []

    def name(self) -> str:
        """A fresh name, deleted at the end if something (aws-cli, say) creates the bucket."""
        name = f"{BUCKET_PREFIX}{RUN_ID}-{next(_numbers)}"
        assert len(name) <= 63, f"bucket names have at most 63 characters: {name}"
        self.names.append(name)
        return name

    def create(self) -> str:
        name = self.name()
        create_bucket(self.s3, name)
        return name

    def remove_all(self) -> None:
        for name in reversed(self.names):
            remove_bucket(self.s3, name)


@pytest.fixture(scope="session")
def s3() -> Any:
    return make_client()


@pytest.fixture
def buckets(s3: Any) -> Iterator[Buckets]:
    made = Buckets(s3)
    yield made
    made.remove_all()


@pytest.fixture
def bucket(buckets: Buckets) -> str:
    """A new, empty bucket for one test."""
    return buckets.create()
