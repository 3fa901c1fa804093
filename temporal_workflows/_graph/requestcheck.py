"""At ``build()``: every ``ctx.request_info(...)`` a handler makes has a ``@response_handler`` for each answer.

A request can be answered with its response type and, when it has a
``timeout`` (and does not say ``on_timeout="fail"``), with the
``RequestTimedOut`` the run delivers when nobody answers in time. A handler
annotated with the response type alone used to fail only when the step asked
(or, in Agent Framework, when the deadline passed, days later). The calls are
read from the handlers' source: what cannot be read or resolved (no source, a
request built elsewhere, a response type in a variable) is not judged, so the
check never rejects a graph that works; the step's own check at ``request_info``
still catches the rest.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from temporal_workflows._errors import GraphValidationError
from temporal_workflows._graph.typecheck import compatible, flatten, type_name
from temporal_workflows._requests import RequestTimedOut

__all__ = ["check_response_handlers"]

_UNKNOWN: Any = object()


@dataclass(frozen=True)
class _RequestCall:
    """One ``request_info`` call read from a handler's source."""

    handler: str
    line: int
    request_type: Any  # a class, or _UNKNOWN
    response_type: Any  # an annotation, or _UNKNOWN
    timed: bool


def check_response_handlers(executors: Any) -> None:
    """Raise :class:`GraphValidationError` for a request some answer of which no response handler takes."""
    for ex in executors:
        funcs = [(h.name, h.func) for h in ex.handlers] + [(r.name, r.func) for r in ex.response_handlers]
        for name, func in funcs:
            if getattr(inspect.unwrap(func), "__module__", "").startswith("temporal_workflows."):
                continue  # the library's own executors (agents, sub-workflows) ask with types they handle
            for call in _request_calls(name, func):
                _check(ex, call)


def _check(ex: Any, call: _RequestCall) -> None:
    handlers = [
        r
        for r in ex.response_handlers
        if call.request_type is _UNKNOWN or compatible(call.request_type, r.request_type)
    ]
    request = "?" if call.request_type is _UNKNOWN else _name(call.request_type)
    where = f"executor {ex.id!r}: handler {call.handler!r} (line {call.line}) asks request_info({request}, "
    if call.response_type is _UNKNOWN:
        return
    response = _name(call.response_type)
    if not handlers:
        if call.request_type is _UNKNOWN:
            return
        raise GraphValidationError(
            f"{where}{response}), but the executor has no @response_handler for {request} requests; add "
            f"`@response_handler async def on(self, original_request: {request}, response: {response}, ctx)`"
        )
    takers = [r for r in handlers if compatible(call.response_type, r.response_type)]
    if not takers:
        names = ", ".join(f"{r.name}(response: {_name(r.response_type)})" for r in handlers)
        raise GraphValidationError(
            f"{where}{response}), but no @response_handler for {request} requests takes a {response}: {names}"
        )
    if call.timed and not any(compatible(RequestTimedOut, r.response_type) for r in takers):
        r = takers[0]
        raise GraphValidationError(
            f"{where}{response}, timeout=...), so when nobody answers in time its @response_handler "
            f"{r.name!r} gets a RequestTimedOut, but it takes only {_name(r.response_type)}; annotate the "
            f"response as {response} | RequestTimedOut, or pass on_timeout='fail'"
        )


def _name(tp: Any) -> str:
    """A type as the user wrote it (``LocalAnswer``, not ``test.<locals>.LocalAnswer``)."""
    members = flatten(tp)
    if len(members) > 1:
        return " | ".join(_name(m) for m in members)
    return tp.__name__ if isinstance(tp, type) and tp is not type(None) else type_name(tp)


def _request_calls(handler: str, func: Callable[..., Any]) -> Iterator[_RequestCall]:
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    if code is None:
        return
    try:
        source = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return
    namespace = _namespace(func)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "request_info":
            continue
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        data = node.args[0] if node.args else kwargs.get("request_data")
        rtype = node.args[1] if len(node.args) > 1 else kwargs.get("response_type")
        timeout = kwargs.get("timeout")  # keyword-only
        on_timeout = kwargs.get("on_timeout")
        timed = timeout is not None and not (isinstance(timeout, ast.Constant) and timeout.value is None)
        if isinstance(on_timeout, ast.Constant) and on_timeout.value == "fail":
            timed = False
        elif on_timeout is not None and not isinstance(on_timeout, ast.Constant):
            timed = False  # decided at run time: not judged here
        request = _UNKNOWN
        if isinstance(data, ast.Call):
            built = _resolve(data.func, namespace)
            request = built if isinstance(built, type) else _UNKNOWN
        yield _RequestCall(
            handler=handler,
            line=code.co_firstlineno + node.lineno - 1,
            request_type=request,
            response_type=_resolve(rtype, namespace) if rtype is not None else _UNKNOWN,
            timed=timed,
        )


def _namespace(func: Callable[..., Any]) -> dict[str, Any]:
    ns: dict[str, Any] = dict(vars(builtins))
    ns.update(getattr(func, "__globals__", {}))
    try:
        closure = inspect.getclosurevars(func)
    except (TypeError, ValueError):
        return ns
    ns.update(closure.nonlocals)
    return ns


def _resolve(node: ast.expr, ns: dict[str, Any]) -> Any:
    """The object an expression of names, attributes and ``|`` names, or ``_UNKNOWN``."""
    if isinstance(node, ast.Name):
        return ns.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, ns)
        return _UNKNOWN if base is _UNKNOWN else getattr(base, node.attr, _UNKNOWN)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _resolve(node.left, ns), _resolve(node.right, ns)
        if left is _UNKNOWN or right is _UNKNOWN:
            return _UNKNOWN
        try:
            return left | right
        except TypeError:
            return _UNKNOWN
    if isinstance(node, ast.Constant) and node.value is None:
        return type(None)
    return _UNKNOWN
