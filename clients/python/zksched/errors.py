"""The errors of the client, typed by the API's answer (its status) or by what failed on the way."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class ZkschedError(Exception):
    """The base of every error the client raises.

    ``status`` is the API's HTTP status (None when no answer came), ``message`` the API's
    error message (``{"error": {"status", "message"}}``) or what failed on the way.
    """

    def __init__(self, message: str, status: Optional[int] = None, body: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message if status is None else "%d: %s" % (status, message))
        self.message = message
        self.status = status
        self.body = body


class BadRequest(ZkschedError):
    """400: a malformed id, an unknown parameter, params the workflow does not declare, a
    workflow file that does not parse. The message says what, one problem a line."""


class Unauthorized(ZkschedError):
    """401: no token, or a wrong one."""


class Forbidden(ZkschedError):
    """403: an action above the token user's role."""


class NotFound(ZkschedError):
    """404: no such instance, definition, schedule or endpoint."""


class Conflict(ZkschedError):
    """409: the state does not allow the action (a kill of a finished task, a signal of a task
    that is not waiting, a trigger that created nothing)."""


class PayloadTooLarge(ZkschedError):
    """413: a body over the API's limit."""


class RateLimited(ZkschedError):
    """429: too many requests, or too many wrong tokens; ``retry_after`` is the answer's
    Retry-After in seconds."""

    def __init__(self, message: str, status: Optional[int] = None, body: Optional[Dict[str, Any]] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message, status, body)
        self.retry_after = retry_after


class Unavailable(ZkschedError):
    """503: the master cannot reach PostgreSQL or ZooKeeper, or is busy; ``retry_after`` is the
    answer's Retry-After in seconds, if it gave one."""

    def __init__(self, message: str, status: Optional[int] = None, body: Optional[Dict[str, Any]] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message, status, body)
        self.retry_after = retry_after


class ServerError(ZkschedError):
    """Any other answer of 500 or above."""


class TransportError(ZkschedError):
    """No answer: the master could not be reached, or the connection broke before its answer."""


class WaitTimeout(ZkschedError):
    """A wait ended by its timeout before the workflow instance did."""


_BY_STATUS: Dict[int, Type[ZkschedError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
}


def error_for(status: int, message: str, body: Optional[Dict[str, Any]], retry_after: Optional[float]) -> ZkschedError:
    """Return the error of an answer with this status."""
    if status == 429:
        return RateLimited(message, status, body, retry_after)
    if status == 503:
        return Unavailable(message, status, body, retry_after)
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else ZkschedError
    return cls(message, status, body)
