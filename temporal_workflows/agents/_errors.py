"""Model errors that retrying cannot fix, named so a step fails at once instead of retrying them."""

from __future__ import annotations

from temporal_workflows._errors import WorkflowError

__all__ = ["AgentModelError", "is_permanent_model_error"]

_NOT_PERMANENT_STATUS = {408, 409, 425, 429}
"""4xx statuses that another attempt may get past: timeout, conflict, too early, rate limited."""


class AgentModelError(WorkflowError):
    """The model refused the request in a way another attempt would not change.

    A bad request (an invalid argument, a context window overflow), a
    content filter, a rejected credential or an unknown model. The step
    fails at once, on either host, instead of spending its retries: the
    run's ``ExecutorFailedError`` names the executor, and its
    ``error_type`` is ``"AgentModelError"``. Errors another attempt may fix
    (rate limits, timeouts, server errors, dropped connections) are raised
    as they are and retried per the executor's ``retry_policy``.

    Attributes:
        executor_id: The agent's executor.
        model_error: The class name of the error the model client raised.
    """

    def __init__(self, message: str, *, executor_id: str, model_error: str) -> None:
        super().__init__(message)
        self.executor_id = executor_id
        self.model_error = model_error


def _maf_permanent() -> tuple[type[BaseException], ...]:
    try:
        from agent_framework import exceptions as maf
    except ImportError:  # pragma: no cover - the agent layer needs it
        return ()
    names = (
        "AgentInvalidAuthException",
        "AgentInvalidRequestException",
        "AgentContentFilterException",
        "ChatClientInvalidAuthException",
        "ChatClientInvalidRequestException",
        "ChatClientContentFilterException",
        "IntegrationInvalidAuthException",
        "IntegrationInvalidRequestException",
        "IntegrationContentFilterException",
    )
    return tuple(t for n in names if isinstance(t := getattr(maf, n, None), type))


def _pydantic_ai_permanent() -> tuple[type[BaseException], ...]:
    try:
        from pydantic_ai import exceptions as pai
    except ImportError:
        return ()
    names = ("ModelRequestRejectedError", "ContentFilterError", "UserError")
    return tuple(t for n in names if isinstance(t := getattr(pai, n, None), type))


def is_permanent_model_error(e: BaseException) -> bool:
    """Whether ``e``, raised by a model call, would be raised again by the same call."""
    if isinstance(e, _maf_permanent() + _pydantic_ai_permanent()):
        return True
    status = getattr(e, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in _NOT_PERMANENT_STATUS:
        return True  # a provider SDK's client error (openai.BadRequestError, pydantic-ai's ModelHTTPError, ...)
    return "contentfilter" in type(e).__name__.lower()
