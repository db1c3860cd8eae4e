"""The SDK's exceptions: one class per gRPC status code gpupoold answers with, in the groups
gpupoolctl's exit codes use (docs/cli.md, "Exit codes"), so a script can catch as broadly or as
narrowly as it needs:

    GpupoolError
    ├── ConfigError              local: bad login file or CA path; nothing was sent
    └── ApiError                 the server (or gRPC itself) answered with a status
        ├── NotFound
        ├── AlreadyExists
        ├── Rejected             the request was refused as it stands
        │   ├── InvalidArgument      .field names the field at fault
        │   ├── FailedPrecondition
        │   ├── OutOfRange
        │   └── ResourceExhausted    (a rate limit: the message says how long to wait)
        ├── Denied
        │   ├── PermissionDenied
        │   └── Unauthenticated
        ├── Retryable            try again (nothing was done, or it is safe to ask again)
        │   ├── Unavailable          .leader: the address a standby named, when one answered
        │   ├── DeadlineExceeded
        │   └── Aborted
        └── Cancelled, Unknown, Unimplemented, Internal, DataLoss

Every ApiError carries `.code` (a grpc.StatusCode) and `.message` (the API's own words, which
name the field or object at fault, docs/api.md "Errors").
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Tuple, Type

import grpc

# gpupoold's INVALID_ARGUMENT messages are "field: what is wrong" (api/validate.h, Invalid()).
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\[[0-9]+\])?(?:\.[A-Za-z_][A-Za-z0-9_]*"
                    r"(?:\[[0-9]+\])?)*): ")
# A standby names the leader in this trailer (api/client/leader_follow.h).
_LEADER_TRAILER = "gpupool-leader"


class GpupoolError(Exception):
    """Base of every exception the SDK raises on purpose."""


class ConfigError(GpupoolError):
    """The local settings are unusable (login file, CA certificate); no call was made."""


class ApiError(GpupoolError):
    """A call ended with a gRPC status other than OK."""

    def __init__(self, code: grpc.StatusCode, message: str,
                 trailing_metadata: Sequence[Tuple[str, Any]] = ()) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.trailing_metadata: Tuple[Tuple[str, Any], ...] = tuple(trailing_metadata)


class NotFound(ApiError): pass
class AlreadyExists(ApiError): pass
class Rejected(ApiError): pass


class InvalidArgument(Rejected):
    @property
    def field(self) -> str:
        """The field path the message names ("spec.task_count"), or "" when it names none."""
        m = _FIELD.match(self.message)
        return m.group(1) if m else ""


class FailedPrecondition(Rejected): pass
class OutOfRange(Rejected): pass
class ResourceExhausted(Rejected): pass
class Denied(ApiError): pass
class PermissionDenied(Denied): pass
class Unauthenticated(Denied): pass
class Retryable(ApiError): pass


class Unavailable(Retryable):
    @property
    def leader(self) -> str:
        """When a standby replica answered: the leader's address it named ("" if none)."""
        for key, value in self.trailing_metadata:
            if key == _LEADER_TRAILER:
                return value.decode() if isinstance(value, bytes) else str(value)
        return ""


class DeadlineExceeded(Retryable): pass
class Aborted(Retryable): pass
class Cancelled(ApiError): pass
class Unknown(ApiError): pass
class Unimplemented(ApiError): pass
class Internal(ApiError): pass
class DataLoss(ApiError): pass


_BY_CODE: Dict[grpc.StatusCode, Type[ApiError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.DATA_LOSS: DataLoss,
}


def error_for(code: grpc.StatusCode, message: str,
              trailing_metadata: Sequence[Tuple[str, Any]] = ()) -> ApiError:
    """The exception for a status: its code's class (Unknown for a code not listed)."""
    return _BY_CODE.get(code, Unknown)(code, message, trailing_metadata)


def from_rpc_error(e: grpc.RpcError, server: str = "", tls: bool = True) -> ApiError:
    """Converts what grpc (sync or asyncio) raised. `server` and `tls` only improve the message
    when no connection could be made, as gpupoolctl's does."""
    code: Optional[grpc.StatusCode] = e.code() if hasattr(e, "code") else None  # type: ignore
    message: str = (e.details() if hasattr(e, "details") else "") or ""  # type: ignore
    trailers: Sequence[Tuple[str, Any]] = ()
    if hasattr(e, "trailing_metadata"):
        trailers = tuple(e.trailing_metadata() or ())  # type: ignore
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    if code == grpc.StatusCode.UNAVAILABLE and server and (
            "failed to connect" in message or "Connection refused" in message):
        message = f"cannot reach gpupoold at {server}: {message}"
        if not tls:
            message += ("\n(gpupoold serves TLS by default: run 'gpupoolctl login --server "
                        f"{server} --data-dir DATA_DIR' once, or pass ca=DATA_DIR/tls/ca.crt)")
    return error_for(code, message, trailers)
