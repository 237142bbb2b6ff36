"""What a storage failure is: transient (worth a retry) or not, and which typed ``StorageError`` it
becomes. Backends wrap their client's error (botocore, gcsfs, azure) in an OSError, so every test
looks through the chain of causes; ``retry.Retry.run`` is the one caller that types them."""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import Iterator

from ..errors import (
    AccessDenied,
    BucketNotFound,
    CheckpointError,
    CredentialsMissing,
    ReadOnlyStorage,
    StorageError,
    StorageFull,
    StorageUnavailable,
)

_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "ConditionalRequestConflict",
        "OperationAborted",
        "ServerBusy",
        "OperationTimedOut",
    }
)
_TRANSIENT_TYPES = frozenset(
    {
        "ServerDisconnectedError",
        "ClientConnectionError",
        "ClientConnectorError",
        "ClientOSError",
        "ClientPayloadError",
        "ServiceRequestError",
        "ServiceResponseError",
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "IncompleteRead",
        "ProtocolError",
        "RemoteDisconnected",
    }
)
_PERMANENT = (FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError)


def _status_transient(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (value in (408, 429) or 500 <= value < 600)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its chain of causes: fsspec backends wrap the client's error (botocore ClientError,
    gcsfs HttpError, azure HttpResponseError) in an OSError."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)


def _code(e: BaseException) -> str | None:
    """The service's error code: botocore ``response["Error"]["Code"]``, azure ``error_code``."""
    response = getattr(e, "response", None)
    if isinstance(response, dict):
        code = (response.get("Error") or {}).get("Code")
        return code if isinstance(code, str) else None
    code = getattr(e, "error_code", None)
    return code if isinstance(code, str) else None


def _status(e: BaseException) -> object:
    response = getattr(e, "response", None)
    if isinstance(response, dict):  # botocore ClientError
        return (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return getattr(e, "code", None) if hasattr(e, "code") else getattr(e, "status_code", None)


def is_transient(exc: BaseException) -> bool:
    """True for errors worth retrying: throttling, 5xx, 409 conflicts, resets and timeouts."""
    for e in _causes(exc):
        if isinstance(e, _PERMANENT):
            return False
        if isinstance(e, ConnectionError | TimeoutError | asyncio.TimeoutError):
            return True
        if type(e).__name__ in _TRANSIENT_TYPES:
            return True
        response = getattr(e, "response", None)
        if isinstance(response, dict):  # botocore ClientError
            http = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if _code(e) in _TRANSIENT_CODES or _status_transient(http):
                return True
        if _status_transient(getattr(e, "code", None)) or _status_transient(getattr(e, "status_code", None)):
            return True  # gcsfs HttpError.code, azure HttpResponseError.status_code
        if getattr(e, "error_code", None) in _TRANSIENT_CODES:
            return True
    return False


_NO_BUCKET_CODES = frozenset({"NoSuchBucket", "ContainerNotFound"})
_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "AuthorizationFailure",
        "AuthenticationFailed",
        "AuthorizationPermissionMismatch",
    }
)
_NO_CREDENTIALS_TYPES = frozenset({"NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError"})
_BACKEND_MODULES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "google", "azure", "adlfs", "requests")


def _no_bucket(exc: BaseException) -> bool:
    for e in _causes(exc):
        if _code(e) in _NO_BUCKET_CODES:
            return True
        if isinstance(e, FileNotFoundError) and "bucket does not exist" in str(e).lower():
            return True  # gcsfs: a 404 whose message names the bucket
    return False


def empty_object(exc: BaseException) -> bool:
    """HTTP 416 to a read from byte 0: the object is there and empty. A range is unsatisfiable only when
    its first byte is at or past the end (RFC 9110, 14.1.1), and S3, GCS and Azure all answer so a ranged
    GET of an empty object (checked on moto, fake-gcs-server and Azurite), where an unranged one gets b""."""
    return any(_status(e) == 416 for e in _causes(exc))


def absent(exc: BaseException) -> bool:
    """A key or folder that is not there (an answer), as opposed to a bucket that is not (an error)."""
    return isinstance(exc, FileNotFoundError) and not _no_bucket(exc)


@contextlib.contextmanager
def unless_absent() -> Iterator[None]:
    """Ignore an absent key or folder (deleting it is done), never an absent bucket."""
    try:
        yield
    except FileNotFoundError as exc:
        if not absent(exc):
            raise


def _detail(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def storage_error(exc: BaseException, root: str, key: str, attempts: int = 1) -> StorageError | None:
    """The typed error for a backend failure on ``key``, with a message that says what to do; None for
    what is not one (an absent key, one of our own errors, a bug in the caller)."""
    if isinstance(exc, CheckpointError):
        return None
    bucket = root.lstrip("/").split("/", 1)[0]
    root = root or "/"
    where = f"{root}/{key}" if key else root
    detail = _detail(exc)
    if _no_bucket(exc):
        return BucketNotFound(f"bucket {bucket!r} does not exist: create it, or fix the archive URL")
    for e in _causes(exc):
        if type(e).__name__ in _NO_CREDENTIALS_TYPES:
            return CredentialsMissing(
                f"no credentials to reach {root!r} ({detail}): give them in storage_options or the "
                "environment (e.g. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or anon=True for a public bucket"
            )
        number = getattr(e, "errno", None)
        if number in (errno.ENOSPC, errno.EDQUOT):
            return StorageFull(f"no space left writing {where!r} ({detail}): free space or raise the quota, then retry")
        if number == errno.EROFS:
            return ReadOnlyStorage(f"{root!r} is on read-only storage ({detail}): reads work; write to a writable copy")
        if number == errno.ENOTDIR or isinstance(e, NotADirectoryError):
            return StorageError(f"{root!r} or a folder in it is a file: point the archive URL at a folder")
        if isinstance(e, PermissionError) or _code(e) in _DENIED_CODES or _status(e) == 403:
            return AccessDenied(f"access to {where!r} denied ({detail}): check the credentials and their permissions")
    if isinstance(exc, FileNotFoundError | FileExistsError):
        return None  # answers, not failures: the callers ask for them
    if is_transient(exc):
        return StorageUnavailable(
            f"storage at {root!r} did not answer after {attempts} attempt(s) ({detail}): check the endpoint "
            "and the network, then try again"
        )
    if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _BACKEND_MODULES:
        return StorageError(f"storage error at {where!r}: {detail}")
    return None
