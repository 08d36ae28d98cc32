"""S3 errors: one exception type, AWS's codes and statuses, one renderer.

Codes, statuses and default messages follow the table in AWS's "Error responses" page
(https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
"""

from __future__ import annotations

from .xmltext import escape

# code -> (HTTP status, default message)
CODES: dict[str, tuple[int, str]] = {
    "AccessControlListNotSupported": (400, "The bucket does not allow ACLs"),
    "AccessDenied": (403, "Access Denied"),
    # A preflight OPTIONS that CORS refuses (its message says why).
    "AccessForbidden": (403, "CORSResponse: This CORS request is not allowed."),
    "AuthorizationHeaderMalformed": (400, "The authorization header is malformed."),
    "AuthorizationQueryParametersError": (
        400,
        "Error parsing the X-Amz-Credential parameter.",
    ),
    # AWS's answer to a request it cannot parse as HTTP (a bad request line or method, an
    # unreadable Content-Length, bytes left over after a body), recorded by versitygw#1364.
    "BadRequest": (400, "An error occurred when parsing the HTTP request."),
    "BadDigest": (400, "The Content-MD5 you specified did not match what we received."),
    "BucketAlreadyExists": (
        409,
        "The requested bucket name is not available. The bucket namespace is shared by all "
        "users of the system. Please select a different name and try again.",
    ),
    "BucketAlreadyOwnedByYou": (
        409,
        "Your previous request to create the named bucket succeeded and you already own it.",
    ),
    "BucketNotEmpty": (409, "The bucket you tried to delete is not empty"),
    "EntityTooLarge": (400, "Your proposed upload exceeds the maximum allowed size"),
    "EntityTooSmall": (
        400,
        "Your proposed upload is smaller than the minimum allowed object size.",
    ),
    "IllegalLocationConstraintException": (
        400,
        "The unspecified location constraint is incompatible for the region specific endpoint "
        "this request was sent to.",
    ),
    "IllegalVersioningConfigurationException": (
        400,
        "The Versioning element must be specified",
    ),
    "IncorrectNumberOfFilesInPostRequest": (
        400,
        "POST requires exactly one file upload per request.",
    ),
    "IncompleteBody": (
        400,
        "You did not provide the number of bytes specified by the Content-Length HTTP header.",
    ),
    "InternalError": (500, "We encountered an internal error. Please try again."),
    "InvalidAccessKeyId": (
        403,
        "The AWS Access Key Id you provided does not exist in our records.",
    ),
    "InvalidArgument": (400, "Invalid Argument"),
    "InvalidTargetBucketForLogging": (400, "The target bucket for logging does not exist"),
    "InvalidBucketAclWithObjectOwnership": (
        400,
        "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting",
    ),
    "InvalidBucketName": (400, "The specified bucket is not valid."),
    "InvalidBucketOwnerAWSAccountID": (
        400,
        "The value of the expected bucket owner parameter must be an AWS Account ID...",
    ),
    "InvalidBucketState": (409, "The request is not valid with the current state of the bucket."),
    "InvalidDigest": (400, "The Content-MD5 you specified was invalid."),
    "InvalidEncryptionAlgorithmError": (
        400,
        "The Encryption request you specified is not valid. Supported value: AES256.",
    ),
    "InvalidLocationConstraint": (400, "The specified location-constraint is not valid"),
    "InvalidPolicyDocument": (
        400,
        "The content of the form does not meet the conditions specified in the policy document.",
    ),
    # A GET of an archived object (GLACIER, DEEP_ARCHIVE) not restored.
    "InvalidObjectState": (403, "The operation is not valid for the object's storage class"),
    "InvalidPart": (
        400,
        "One or more of the specified parts could not be found.  The part may not have been "
        "uploaded, or the specified entity tag may not match the part's entity tag.",
    ),
    "InvalidPartNumber": (416, "The requested partnumber is not satisfiable"),
    "InvalidPartOrder": (
        400,
        "The list of parts was not in ascending order. Parts must be ordered by part number.",
    ),
    "InvalidRange": (416, "The requested range is not satisfiable"),
    "InvalidRedirectLocation": (
        400,
        "The website redirect location must have a prefix of 'http://' or 'https://' or '/'.",
    ),
    "InvalidRequest": (400, "Invalid Request"),
    # Temporary credentials (STS): a token that is not one of ours, or one past its time.
    "InvalidToken": (400, "The provided token is malformed or otherwise invalid."),
    "ExpiredToken": (400, "The provided token has expired."),
    "InvalidRetentionPeriod": (400, "Default retention period must be a positive integer value."),
    "InvalidStorageClass": (400, "The storage class you specified is not valid"),
    "InvalidTag": (400, "The TagKey you have provided is invalid"),
    "InvalidURI": (400, "Couldn't parse the specified URI."),
    "KeyTooLongError": (400, "Your key is too long"),
    "MalformedACLError": (
        400,
        "The XML you provided was not well-formed or did not validate against our published schema",
    ),
    "MalformedPolicy": (400, "Policies must be valid JSON and the first byte must be '{'"),
    "KMS.DisabledException": (400, "The KMS key is disabled."),
    "KMS.NotFoundException": (400, "The KMS key does not exist."),
    "MalformedXML": (
        400,
        "The XML you provided was not well-formed or did not validate against our published schema",
    ),
    "MalformedTrailerError": (
        400,
        "The request contained trailing data that was not well-formed or did not conform to "
        "our published schema.",
    ),
    "MaxMessageLengthExceeded": (400, "Your request was too big."),
    "MalformedPOSTRequest": (
        400,
        "The body of your POST request is not well-formed multipart/form-data.",
    ),
    "MaxPostPreDataLengthExceededError": (
        400,
        "Your POST request fields preceding the upload file were too large.",
    ),
    "MetadataTooLarge": (
        400,
        "Your metadata headers exceed the maximum allowed metadata size.",
    ),
    "MethodNotAllowed": (405, "The specified method is not allowed against this resource."),
    "MissingContentLength": (411, "You must provide the Content-Length HTTP header."),
    "MissingSecurityHeader": (400, "Your request is missing a required header."),
    "NoSuchBucket": (404, "The specified bucket does not exist"),
    "NoSuchCORSConfiguration": (404, "The CORS configuration does not exist"),
    "NoSuchBucketPolicy": (404, "The bucket policy does not exist"),
    "NoSuchKey": (404, "The specified key does not exist."),
    "NoSuchObjectLockConfiguration": (
        404,
        "The specified object does not have a ObjectLock configuration",
    ),
    "NoSuchLifecycleConfiguration": (404, "The lifecycle configuration does not exist"),
    "NoSuchTagSet": (404, "The TagSet does not exist"),
    "NoSuchWebsiteConfiguration": (
        404,
        "The specified bucket does not have a website configuration",
    ),
    "NoSuchPublicAccessBlockConfiguration": (
        404,
        "The public access block configuration was not found",
    ),
    "NoSuchUpload": (
        404,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may "
        "have been aborted or completed.",
    ),
    "NoSuchVersion": (
        404,
        "The specified version does not exist.",
    ),
    "ObjectLockConfigurationNotFoundError": (
        404,
        "Object Lock configuration does not exist for this bucket",
    ),
    "NotImplemented": (
        501,
        "A header or query you provided implies functionality that is not implemented.",
    ),
    "OwnershipControlsNotFoundError": (404, "The bucket ownership controls were not found"),
    "ReplicationConfigurationNotFoundError": (
        404,
        "The replication configuration was not found",
    ),
    "PreconditionFailed": (412, "At least one of the pre-conditions you specified did not hold"),
    "RequestHeaderSectionTooLarge": (
        400,
        "Your request header section exceeds the maximum allowed size.",
    ),
    "RequestTimeTooSkewed": (
        403,
        "The difference between the request time and the current time is too large.",
    ),
    "RequestTimeout": (
        400,
        "Your socket connection to the server was not read from or written to within the "
        "timeout period.",
    ),
    "ServerSideEncryptionConfigurationNotFoundError": (
        404,
        "The server side encryption configuration was not found",
    ),
    "ServiceUnavailable": (503, "Please reduce your request rate."),
    "SlowDown": (503, "Please reduce your request rate."),
    "SignatureDoesNotMatch": (
        403,
        "The request signature we calculated does not match the signature you provided. "
        "Check your key and signing method.",
    ),
    "UnexpectedContent": (400, "This request does not support content"),
    "UnresolvableGrantByEmailAddress": (
        400,
        "The e-mail address you provided does not match any account on record.",
    ),
    "XAmzContentSHA256Mismatch": (
        400,
        "The provided 'x-amz-content-sha256' header does not match what was computed.",
    ),
}


class S3Error(Exception):
    """An error S3 would answer: code, HTTP status, message and extra XML fields.

    Raised anywhere below the middleware, rendered once by `to_xml`. `fields` become child
    elements of <Error> in order (AWS adds e.g. <Key>, <BucketName>, <Condition>).
    """

    def __init__(self, code: str, message: str | None = None, **fields: object) -> None:
        status, default = CODES[code]
        self.code = code
        self.status = status
        self.message = message or default
        self.fields = {k: str(v) for k, v in fields.items() if v is not None}
        super().__init__(f"{code}: {self.message}")

    def to_xml(self, request_id: str, host_id: str) -> bytes:
        """The <Error> document: Code, Message, the code's own fields, RequestId and HostId
        (the x-amz-request-id and x-amz-id-2 of the answer). No <Resource>: AWS sends none
        (LocalStack's recordings of AWS, Feb 2026)."""
        # The same escaping as every other document: a field may echo a key holding control
        # characters (NoSuchKey), which must not go out as raw bytes.
        extra = "".join(f"<{k}>{escape(v)}</{k}>" for k, v in self.fields.items())
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{self.code}</Code><Message>{escape(self.message)}</Message>"
            f"{extra}<RequestId>{request_id}</RequestId><HostId>{host_id}</HostId></Error>"
        ).encode("utf-8", "replace")  # a field may echo undecodable request bytes


def invalid_argument(message: str, name: str, value: str | None = None) -> S3Error:
    """InvalidArgument names the offending argument, as AWS does."""
    return S3Error("InvalidArgument", message, ArgumentName=name, ArgumentValue=value)
