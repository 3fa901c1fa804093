"""The response a ``@response_handler`` receives when its request times out."""

from __future__ import annotations

import sys
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from temporal_workflows._engine.registry import library_types

__all__ = ["RequestTimedOut"]


class RequestTimedOut(BaseModel):
    """Nobody answered a request made with ``timeout=`` in time.

    Delivered, in place of a response, to the executor's ``@response_handler``
    for requests made with ``on_timeout="respond"`` (the default). Such a
    handler declares it in its response annotation, e.g.
    ``response: Approval | RequestTimedOut``, and decides what silence means.

    Attributes:
        request_id: The request that expired.
        timeout: Its timeout, in seconds.
        deadline: When it expired (UTC).
    """

    model_config = ConfigDict(frozen=True)

    request_id: str
    timeout: float
    deadline: datetime


library_types(sys.modules[__name__])  # decodable in a process that never encoded one
