"""The one place a request is allowed or refused: every operation's bucket, and every copy
source, pass through `authorize` (operations never check permissions themselves).

Today's rule is S3's with ACLs and policies off: a bucket and its objects are their owner's
alone. ACLs, bucket policies, public access blocks and ownership controls are decided here too
when they come.
"""

from __future__ import annotations

from ..store import Bucket, Store
from ..users import User
from .errors import S3Error
from .names import could_be_a_bucket


async def resolve_bucket(store: Store, name: str) -> Bucket:
    """The bucket a request names; NoSuchBucket, or InvalidBucketName for a name no bucket
    can have (as AWS answers a GetObject from bucket "a")."""
    bucket = await store.get_bucket(name)
    if bucket is None:
        if not could_be_a_bucket(name):
            raise S3Error("InvalidBucketName", BucketName=name)
        raise S3Error("NoSuchBucket", BucketName=name)
    return bucket


def authorize(user: User, operation: str, bucket: Bucket) -> None:
    """May `user` run `operation` on `bucket` or an object in it? AccessDenied if not."""
    if bucket.owner != user.canonical_id:
        raise S3Error("AccessDenied")
