"""Engine errors carry a status name that the gRPC edge maps onto a status code."""

from __future__ import annotations


class EngineError(Exception):
    """An operation the engine refuses; `code` names a gRPC status (e.g. "NOT_FOUND")."""

    code = "UNKNOWN"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(EngineError):
    code = "NOT_FOUND"


class AlreadyExists(EngineError):
    code = "ALREADY_EXISTS"


class InvalidArgument(EngineError):
    code = "INVALID_ARGUMENT"


class FailedPrecondition(EngineError):
    code = "FAILED_PRECONDITION"


class ShuttingDown(EngineError):
    code = "CANCELLED"


class StoreFailed(EngineError):
    """The database refused a write; nothing of the request was applied (memory is rolled back too)."""

    code = "UNAVAILABLE"


class StoreFull(StoreFailed):
    """SQLITE_FULL: the disk (or the database's page limit) is full."""

    code = "RESOURCE_EXHAUSTED"
