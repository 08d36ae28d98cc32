"""Every size and count limit, in one table: AWS's, with the page that states each, and the
gateway's own bounds on what it reads into memory.

https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html ("Amazon S3 multipart upload
limits") and the API reference of each operation are the sources.
"""

from __future__ import annotations

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TiB = 1024 * GiB

# --- AWS's limits ---------------------------------------------------------------------------------

# PutObject: "Upload an object in a single operation ... up to 5 GB"
# (userguide/upload-objects.html).
MAX_PUT_SIZE = 5 * GiB
# Multipart: a part is 5 MiB to 5 GiB, the last part may be smaller; part numbers 1 to 10,000;
# an object at most 5 TiB (userguide/qfacts.html).
MIN_PART_SIZE = 5 * MiB
MAX_PART_SIZE = 5 * GiB
MAX_PART_NUMBER = 10_000
MAX_OBJECT_SIZE = 5 * TiB
# CopyObject: "You can copy a single object up to 5 GB"; larger ones by UploadPartCopy
# (API_CopyObject.html).
MAX_COPY_SIZE = 5 * GiB
# Object keys: "The name for a key ... up to 1,024 bytes long" (userguide/object-keys.html).
MAX_KEY_BYTES = 1024
# ListObjects(V2), ListObjectVersions, ListMultipartUploads, ListParts: "up to 1,000" a page.
MAX_KEYS = 1000
# DeleteObjects: "up to 1,000 keys" a request (API_DeleteObjects.html).
MAX_DELETE_KEYS = 1000

# --- the gateway's own bounds ---------------------------------------------------------------------

# Request bodies read whole into memory (each also capped by --max-xml-size).
MAX_BUCKET_XML = 64 * KiB  # CreateBucket's configuration
MAX_ACL_XML = 64 * KiB  # an AccessControlPolicy
MAX_DELETE_XML = 2 * MiB  # 1,000 keys of 1,024 bytes, escaped, and room
MAX_COMPLETE_XML = 4 * MiB  # 10,000 parts of about 100 bytes of XML each, and room
# aws-chunked framing: a chunk's size line, and the largest chunk (a part's largest).
MAX_CHUNK_LINE = 1024
MAX_CHUNK_SIZE = MAX_PART_SIZE
