"""Exceptions raised by graph building, the engine and the runners.

Every error names what is at fault (the executor, the state key, the request
id, the superstep) because a workflow that fails in production is read from a
log line or the Temporal Web UI, not from a debugger.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import sys
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporal_workflows._events import WorkflowRunResult

__all__ = [
    "UnknownGraphError",
    "RunTooLargeError",
    "RunClosedError",
    "RunBusyError",
    "DeliveryForgottenError",
    "ReducerError",
    "InvalidRunInputError",
    "AlreadyAnsweredError",
    "CheckpointNotFoundError",
    "CheckpointStorageError",
    "ExecutorFailedError",
    "GraphSignatureMismatchError",
    "GraphValidationError",
    "InvalidResponseError",
    "NotSerializableError",
    "PayloadTooLargeError",
    "StateConflictError",
    "SuperstepLimitError",
    "UndeliverableMessageError",
    "UnknownRequestError",
    "WorkflowError",
    "WorkflowRunError",
    "WorkerVersionNotReadyError",
]


class WorkflowError(Exception):
    """Base class of every error this library raises."""


class GraphValidationError(WorkflowError):
    """The graph handed to :class:`WorkflowBuilder` cannot run as built.

    Raised by ``build()`` so that a bad graph fails before it is deployed,
    not in the middle of a run.
    """


class NotSerializableError(WorkflowError, TypeError):
    """A message, state value, request or output cannot round-trip JSON.

    Raised where the value is handed over (``send_message``, ``set_state``,
    ``yield_output``, ``request_info``) so the stack trace points at the user
    code that produced it, not at a later checkpoint or Temporal payload.
    """


class PayloadTooLargeError(WorkflowError):
    """A value (or a step's whole result) is larger than Temporal accepts in one payload.

    Temporal refuses payloads over 2 MiB only after the fact, with an error
    that names neither the value nor the fix, and a step's retries run it
    again first. This is raised where the value was produced (at the end of
    the step that wrote it, or in the client before sending), in process as
    on Temporal, and is never retried.

    Attributes:
        what: What is too large: ``"state key 'report'"``, ``"message to 'writer'"``,
            ``"output"``, ``"the step's result"``, ``"start message"``, ...
        size: Its size in bytes, as JSON.
        limit: The limit it exceeds (see ``temporal_workflows._engine.limits``).
        executor_id: The executor that produced it (``None`` for client input).
    """

    def __init__(self, message: str, *, what: str, size: int, limit: int, executor_id: str | None = None) -> None:
        super().__init__(message)
        self.what = what
        self.size = size
        self.limit = limit
        self.executor_id = executor_id


class UndeliverableMessageError(WorkflowError):
    """A sent message has no connected target that accepts its type.

    The peers drop such messages silently; a dropped message is a lost step,
    so here it is an error naming the sender, the type and the targets.
    """

    def __init__(self, message: str, *, source_id: str, type_name: str, targets: list[str]) -> None:
        super().__init__(message)
        self.source_id = source_id
        self.type_name = type_name
        self.targets = targets

    @staticmethod
    def no_executor_text(
        executor_id: str, graph: str | None, executors: Collection[str], quote: Callable[[str], str] = repr
    ) -> str:
        """The one wording of "a message names an executor the graph does not have", on every host.

        ``quote``: how the outside id is quoted (a Temporal run cuts a long one: ``_protocol.quote``).
        """
        return f"no executor {quote(executor_id)} in graph {graph!r}; executors: {sorted(executors)}"

    @classmethod
    def no_executor(
        cls, executor_id: str, graph: str | None, executors: Collection[str], *, type_name: str = "json"
    ) -> UndeliverableMessageError:
        """The error for a message from outside to an executor the graph does not have."""
        return cls(
            cls.no_executor_text(executor_id, graph, executors),
            source_id="<input>",
            type_name=type_name,
            targets=[executor_id],
        )


class UnknownRequestError(WorkflowError, KeyError):
    """A response names a request id that is not pending."""

    def __init__(self, request_id: str, pending: list[str]) -> None:
        self.request_id = request_id
        self.pending = pending
        super().__init__(self.text(request_id, pending))

    @staticmethod
    def text(request_id: str, pending: Collection[str], quote: Callable[[str], str] = repr) -> str:
        """The one wording of "no such request is pending", on every host (a refusal, a warning or this error).

        ``quote``: how the outside id is quoted (a Temporal run cuts a long one: ``_protocol.quote``).
        """
        return f"no pending request with id {quote(request_id)}; pending request ids: {sorted(pending) or 'none'}"

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0])


class InvalidResponseError(WorkflowError, ValueError):
    """A response does not validate against the request's response type."""

    def __init__(self, request_id: str, executor_id: str, detail: str) -> None:
        self.request_id = request_id
        self.executor_id = executor_id
        super().__init__(f"response to request {request_id!r} (from executor {executor_id!r}) is invalid: {detail}")


class AlreadyAnsweredError(WorkflowError, KeyError):
    """A response names a request that was answered already (the first answer stands)."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(self.text(request_id))

    @staticmethod
    def text(request_id: str, quote: Callable[[str], str] = repr) -> str:
        """The one wording of "answered already", on every host (a refusal, a warning or this error)."""
        return f"request {quote(request_id)} was already answered"

    def __str__(self) -> str:
        return str(self.args[0])


class RunClosedError(WorkflowError):
    """Input for a run that has completed, failed, or is closing: it can take no more."""


class RunBusyError(WorkflowError):
    """The run could not take this input just now; sending it again later is safe (nothing was delivered).

    On Temporal: the server's limit of updates in flight per run, its query
    buffer, or the run's own local activity in flight (see
    ``temporal_workflows.temporal._workflow.locals``). The client retries these with
    backoff and raises this only when they last longer than its retry budget.
    """


class RunInProgressError(WorkflowError):
    """The run is working on earlier input and its concurrent-input policy is ``"reject"``.

    Not a load refusal (:class:`RunBusyError`, which clients send again by
    themselves): the run said no to a second message while busy, as the
    policy asked. Nothing was delivered; send it again once the run is idle,
    or with another policy (``enqueue``, ``interrupt``, ``rollback``).
    """


class WorkerVersionNotReadyError(WorkflowError):
    """A start pinned to a Worker Deployment version its task queue had not learned, for longer than the client
    waits (``temporal/_client/starting.py``): nothing was started.

    The server refuses such a start until a worker of that version has polled the queue and the queue has
    learned the version; the client sends it again meanwhile, for a few seconds. Start a worker of that version
    on the queue (or make a version hosting the graph current), then start the run again.
    """


class ScheduleError(WorkflowError):
    """A schedule could not be created or changed: a bad calendar, an unknown overlap policy, a taken id."""


class ScheduleNotFoundError(ScheduleError):
    """No schedule has this id (in this namespace)."""


class StoredValueMissingError(WorkflowError):
    """A value kept by reference (large values: docs/values.md) is not in its store, or not as it was stored.

    Names the store, the key and the digest the reference holds. The step (or
    reader) that needed it fails; nothing else of the run changes.
    """


class DeliveryForgottenError(WorkflowError, KeyError):
    """A delivery reached the run and was processed, but its outcome is older than those the run keeps.

    Distinct from a delivery that never arrived: sending it again would deliver it twice.
    """


class InvalidRunInputError(WorkflowError):
    """A run's start input is malformed (on Temporal the run fails at once, naming the field)."""


class UnknownGraphError(WorkflowError):
    """No worker hosts a graph of this name (the Temporal workflow type)."""


class CheckpointNotFoundError(WorkflowError, KeyError):
    """No checkpoint with the given id exists in the storage."""

    def __init__(self, checkpoint_id: str) -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(f"checkpoint {checkpoint_id!r} not found")

    def __str__(self) -> str:
        return str(self.args[0])


class GraphSignatureMismatchError(WorkflowError):
    """A checkpoint was taken under a different graph than the one resuming it."""


class WorkflowRunError(WorkflowError):
    """A run failed. Carries the superstep and, when known, the executor at fault.

    Attributes:
        superstep: The superstep in which the run failed.
        executor_id: The executor at fault, if one is.
        result: The run's result so far (events up to the failure), when the
            in-process runner raised it.
    """

    def __init__(self, message: str, *, superstep: int, executor_id: str | None = None) -> None:
        super().__init__(message)
        self.superstep = superstep
        self.executor_id = executor_id
        self.result: WorkflowRunResult | None = None


class ExecutorFailedError(WorkflowRunError):
    """A step failed (its handler raised, after its retries on Temporal); the superstep's writes were discarded.

    Attributes:
        error_type: The class name of the step's error (``"ValueError"``; on
            Temporal also ``"TimeoutError"`` for a step that overran its timeout).
        detail: The step error's message, without its type.
        original: The step's exception where the host has it (in process;
            also ``__cause__``); ``None`` on Temporal, where it was raised in
            an activity.
        error_class: The step error's class by its qualified name
            (``"app.errors.QuotaExceeded"``, ``"builtins.ValueError"``), the
            same in process and on Temporal: a Temporal step's failure carries it, so a
            client can tell (and :func:`step_error` rebuild) the user's own
            exception class; ``None`` where the error named its own type
            (a Temporal ``ApplicationError``) or a run recorded before.
        error_args: The step error's ``args`` as JSON, where its message alone
            does not give them back (``KeyError('missing-key')``, whose
            message is ``'missing-key'`` with the quotes): a Temporal step's
            failure carries them, so :func:`step_error` makes the same
            exception again (``str()`` reads as in Python, as in process).
    """

    def __init__(
        self,
        executor_id: str,
        superstep: int,
        original: BaseException | None = None,
        *,
        error_type: str | None = None,
        detail: str | None = None,
        error_class: str | None = None,
        error_args: list[Any] | None = None,
    ) -> None:
        self.error_type = error_type or type(original).__name__
        self.detail = detail if detail is not None else str(original)
        self.error_class = error_class
        self.error_args = error_args if error_args is not None else (error_args_of(original) if original else None)
        super().__init__(
            f"executor {executor_id!r} failed in superstep {superstep}: {self.error_type}: {self.detail}",
            superstep=superstep,
            executor_id=executor_id,
        )
        self.original = original
        self.__cause__ = original

    @property
    def summary(self) -> str:
        """The failure in one line, naming the executor, superstep and the step's error.

        ``str()`` of a plain ``ExecutorFailedError``; also what the
        ``WorkflowFailedEvent`` says. Kept here for the error a graph-API run
        raises, whose ``str()`` is the step's own message (:func:`peer_error`).
        """
        if getattr(type(self), "_peer_of", None) is None:
            return str(self)
        return str(self.__dict__.get("_summary", ""))  # kept apart: the step's class may have a ``detail`` of its own


class ReducerError(WorkflowRunError):
    """A callable state reducer raised while a superstep was committed; nothing of the superstep was committed.

    Attributes:
        key: The state key whose reducer failed.
        error_type: The class name of the reducer's error.
        detail: Its message.
    """

    def __init__(self, key: str, superstep: int, error_type: str, detail: str) -> None:
        super().__init__(
            f"the reducer of state key {key!r} failed while superstep {superstep} was committed: "
            f"{error_type}: {detail}",
            superstep=superstep,
        )
        self.key = key
        self.error_type = error_type
        self.detail = detail


class CheckpointStorageError(WorkflowRunError):
    """A checkpoint could not be saved; the run is told, never just a log line.

    Raised by a storage's ``save`` (then ``superstep`` is 0) and, for an
    automatic checkpoint, as the run's failure naming the superstep: a run
    whose checkpoint policy cannot be kept fails in process and on Temporal rather than
    going on without the checkpoints a later resume would need.
    """

    def __init__(self, message: str, *, superstep: int = 0, executor_id: str | None = None) -> None:
        super().__init__(message, superstep=superstep, executor_id=executor_id)


class RunTooLargeError(WorkflowRunError):
    """What the run must carry in one payload is over the limit.

    Its outputs (a Temporal run's result carries every one) or, when it
    continues as new, its state, pending messages and outputs together.
    """


class StateConflictError(WorkflowRunError):
    """Two steps of one superstep wrote one state key that has no reducer.

    The peers resolve this by wall-clock last-writer-wins, which makes the
    result depend on timing; here it is an error unless the key declares a
    reducer with ``WorkflowBuilder.add_state_reducer``.
    """

    def __init__(self, key: str, executor_ids: tuple[str, str], superstep: int, *, message: str | None = None) -> None:
        super().__init__(
            message
            or f"state key {key!r} was written by both {executor_ids[0]!r} and {executor_ids[1]!r} "
            f"in superstep {superstep}; declare a reducer for it with "
            f"WorkflowBuilder.add_state_reducer({key!r}, ...) or write it from one executor",
            superstep=superstep,
            executor_id=executor_ids[1],
        )
        self.key = key
        self.executor_ids = executor_ids


class SuperstepLimitError(WorkflowRunError):
    """The run needed more supersteps than ``max_iterations`` allows."""

    def __init__(self, limit: int, superstep: int, pending_targets: list[str]) -> None:
        super().__init__(
            f"max_iterations={limit} exceeded: superstep {superstep} would deliver to "
            f"{sorted(set(pending_targets))}; raise max_iterations or give the loop an exit",
            superstep=superstep,
        )
        self.limit = limit


class RequestTimeoutError(WorkflowRunError):
    """A request made with ``on_timeout="fail"`` got no response before its deadline."""

    def __init__(self, request_id: str, executor_id: str, timeout: float, superstep: int) -> None:
        super().__init__(
            f"request {request_id!r} from executor {executor_id!r} got no response within {timeout:g} s",
            superstep=superstep,
            executor_id=executor_id,
        )
        self.request_id = request_id


def storage_failure(error: BaseException) -> CheckpointStorageError:
    """A storage's failure to save as the graph hosts report it: its own message if any, else type and message."""
    if isinstance(error, CheckpointStorageError):
        return error
    return CheckpointStorageError(f"{type(error).__name__}: {error}")


def failure_details(error: WorkflowError) -> dict[str, Any]:
    """What an error carries besides its message, as JSON (for a Temporal failure's details)."""
    out: dict[str, Any] = {}
    for key, value in vars(error).items():
        if key.startswith("_") or key in ("result", "original"):
            continue
        if value is None or isinstance(value, (str, int, float, bool)):
            out[key] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value):
            out[key] = list(value)
    return out


def error_classes() -> dict[str, type[WorkflowError]]:
    """Every error class of the library by name: how a failure's type is read back."""
    found: dict[str, type[WorkflowError]] = {}
    todo: list[type[WorkflowError]] = [WorkflowError]
    while todo:
        cls = todo.pop()
        if "_peer_of" in vars(cls):
            continue  # a step's class combined with ExecutorFailedError (``peer_error``): named like the step's class
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def rebuild_error(type_name: str, message: str, details: dict[str, Any] | None = None) -> WorkflowError | None:
    """The library error a failure of type ``type_name`` stands for, with its message and attributes.

    Built without calling the class's constructor (whose arguments differ per
    class): the message is the one the failing side made, so it reads the
    same in process and on Temporal. ``None`` when the type is not one of the library's.
    """
    cls = error_classes().get(type_name)
    if cls is None:
        return None
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    if isinstance(error, WorkflowRunError):
        error.superstep = 0
        error.executor_id = None
        error.result = None
    if isinstance(error, ExecutorFailedError):
        error.original = None
        error.error_class = None  # runs recorded before failures carried it
        error.error_args = None
    for key, value in (details or {}).items():
        if isinstance(key, str) and not key.startswith("_") and key != "original":
            setattr(error, key, tuple(value) if key == "executor_ids" and isinstance(value, list) else value)
    if isinstance(error, ExecutorFailedError):
        # The step's own exception, where its class can be had again here (``step_error``), as in process.
        own = step_error(error)
        error.original = own if own is not error else None
    return error


def class_path(cls: type) -> str:
    """A class's qualified name, ``module.QualName`` (how a step's error class travels)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def imported_class(path: str) -> type | None:
    """The class ``path`` (``module.QualName``) names, if its module is imported already; never imports one.

    A failure's class name comes from a worker, through the server: looking
    it up must not run any module's code. A program that catches the class
    has imported it.
    """
    module_name, _, rest = path.partition(".")
    while rest:
        module = sys.modules.get(module_name)
        if module is not None:
            found: Any = module
            for part in rest.split("."):
                found = getattr(found, part, None)
                if found is None:
                    break
            if isinstance(found, type):
                return found
        head, _, rest = rest.partition(".")
        module_name = f"{module_name}.{head}"
    return None


_ARGS_JSON_LIMIT = 8192
"""Most characters of text an exception's ``args`` may hold to travel with its failure (the message is there too)."""


def error_args_of(e: BaseException) -> list[Any] | None:
    """``e.args`` as JSON when its message alone would not make ``e`` again; ``None`` when it would, or cannot be sent.

    Most exceptions take their message as their one argument (``ValueError('x')``:
    ``str()`` is ``x``), so the message is enough. Some do not:
    ``KeyError('missing-key')`` reads ``'missing-key'`` (quoted), ``KeyError(42)``
    reads ``42``, ``OSError(2, 'gone')`` reads ``[Errno 2] gone``. Their
    arguments travel with the failure when they are plain scalars of bounded size.
    """
    args = e.args
    if len(args) == 1 and type(args[0]) is str and str(e) == args[0]:
        return None
    if not all(a is None or type(a) in (str, int, float, bool) for a in args):
        return None
    if sum(len(a) if isinstance(a, str) else 24 for a in args) > _ARGS_JSON_LIMIT:
        return None
    return list(args)


def _made_again(cls: type, args: Sequence[Any], message: str) -> BaseException | None:
    """``cls(*args)`` if it reads ``message``, else ``None`` (a constructor that takes other arguments)."""
    try:
        made = cls(*args)
    except Exception:
        return None
    return made if str(made) == message else None


def _literal(message: str) -> list[Any] | None:
    """The one argument a quoting exception's message shows (``'missing-key'`` → ``missing-key``), if it is one."""
    if not message or message[0] not in "'\"0123456789-":
        return None
    with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
        value = ast.literal_eval(message)
        if value is None or type(value) in (str, int, float, bool):
            return [value]
    return None


def step_error(error: ExecutorFailedError) -> BaseException:
    """A failed step's own exception, as the peer raises it: the step's class, where it can be had again.

    In process that is the exception the step raised (``error.original``). From
    a Temporal run it is rebuilt from :attr:`ExecutorFailedError.error_class`
    when the class is imported in this process, is an ``Exception`` that is
    not one of the library's, and can be made again reading the same message:
    from the arguments the failure carried (:attr:`ExecutorFailedError.error_args`,
    ``KeyError('missing-key')``), else from the message (``cls(message)``;
    a builtin that quotes its argument, from what the message shows), ``str()``
    the same as the step's; its ``__cause__`` is ``error`` (which names the
    executor and superstep).
    Otherwise ``error`` itself, whose ``error_type`` and ``error_class`` name
    the step's class.
    """
    original = getattr(error, "original", None)
    if original is not None:
        return original  # type: ignore[no-any-return]
    path = getattr(error, "error_class", None)
    cls = imported_class(path) if isinstance(path, str) else None
    if cls is None and isinstance(error.error_type, str):
        # Runs recorded before failures carried the class: builtin classes by their name, as before.
        cls = _builtin_exception(error.error_type)
    if cls is None or not issubclass(cls, Exception) or issubclass(cls, WorkflowError):
        return error
    args = getattr(error, "error_args", None)
    rebuilt = _made_again(cls, args, error.detail) if isinstance(args, list) else None
    if rebuilt is None:
        rebuilt = _made_again(cls, [error.detail], error.detail)
    if rebuilt is None and cls.__module__ == "builtins":
        # A run recorded before failures carried the arguments: a builtin that quotes its one
        # argument (KeyError) is made from what its message shows.
        shown = _literal(error.detail)
        rebuilt = _made_again(cls, shown, error.detail) if shown is not None else None
    if rebuilt is None:
        return error  # its constructor does not give the message back: not one we can make again
    rebuilt.__cause__ = error
    return rebuilt


_PEER_CLASSES: dict[type, type] = {}
"""One derived class per step error class, so ``type(e)`` is the same for every run that raises it."""

_OWN_ATTRIBUTES = ("executor_id", "superstep", "result", "error_type", "detail", "error_class")


def peer_error(error: WorkflowRunError) -> WorkflowRunError:
    """The error a graph-API (Agent Framework) run raises for ``error``: the step's own exception, as MAF raises it.

    Agent Framework's ``workflow.run()`` raises the exception the executor
    raised (``except MyError`` catches it, ``str(e)`` is its message). This
    library's callers catch ``ExecutorFailedError`` too, so a step's failure
    is raised as one exception that is both: an instance of a class derived
    from the step's class and :class:`ExecutorFailedError`, named like the
    step's class (tracebacks and ``repr`` read ``MyError('boom x')``), with
    the step's ``args``, attributes, traceback and notes, plus
    ``executor_id``, ``superstep``, ``error_type``, ``detail``,
    ``error_class``, ``original`` (the step's exception itself) and a note
    naming the executor and superstep; :attr:`ExecutorFailedError.summary`
    is the library's one-line message. Where the step's exception has an
    attribute of one of those names, its own is kept.

    ``error`` itself when there is no such exception to combine: a failure
    that is not a step's, a step failing with one of the library's errors
    (an undeliverable message, a payload past the limit, a failed
    sub-workflow) or with Temporal's ``ApplicationError``, a Temporal run whose step class is not imported here or
    cannot be made again from its message (:func:`step_error`), or a class
    that cannot be combined (``type(e) is MyError`` is never true: it is a
    subclass).
    """
    if type(error) is not ExecutorFailedError:
        return error
    own = error.original
    if not isinstance(own, Exception) or isinstance(own, WorkflowError) or _temporal_failure(own):
        return error
    cls = _peer_class(type(own))
    if cls is None:
        return error
    try:
        combined: ExecutorFailedError = cls.__new__(cls, *own.args)
    except Exception:
        return error
    combined.args = own.args
    combined.__dict__["_summary"] = str(error)
    for name in _OWN_ATTRIBUTES:
        _set_unless_own(combined, name, getattr(error, name, None))
    _set_unless_own(combined, "original", own)
    combined.__dict__.update({k: v for k, v in vars(own).items() if k != "__notes__"})
    combined.__traceback__ = own.__traceback__
    combined.__cause__ = own.__cause__ if own.__cause__ is not error else None
    combined.__context__ = own.__context__ if own.__context__ is not error else None
    combined.__suppress_context__ = own.__suppress_context__
    combined.__notes__ = [
        *getattr(own, "__notes__", ()),
        f"executor {error.executor_id!r} failed in superstep {error.superstep}",
    ]
    return combined


def library_account(error: BaseException) -> tuple[str, str]:
    """The library's class name and message for ``error``, as the run's ``WorkflowFailedEvent`` gives them.

    For a step's own exception raised by :func:`peer_error`,
    ``("ExecutorFailedError", summary)`` naming the executor and superstep
    (what the CLI and logs print); otherwise ``error``'s own class name and message.
    """
    if isinstance(error, ExecutorFailedError) and getattr(type(error), "_peer_of", None) is not None:
        return ExecutorFailedError.__name__, error.summary
    return type(error).__name__, str(error)


def attach_result(error: WorkflowRunError, result: WorkflowRunResult) -> None:
    """Give a failed ``run()`` call's events to its error (``error.result``).

    Unless the step's own class has a ``result`` (:func:`peer_error`): its own wins.
    """
    if getattr(type(error), "_peer_of", None) is not None:
        _set_unless_own(error, "result", result)
    else:
        error.result = result


def _set_unless_own(error: BaseException, name: str, value: Any) -> None:
    if hasattr(type(error)._peer_of, name):  # type: ignore[attr-defined]
        return  # the step's class defines it (a property, a class attribute): its own wins
    with contextlib.suppress(AttributeError, TypeError):  # a read-only attribute of its own
        setattr(error, name, value)


def _temporal_failure(error: Exception) -> bool:
    """A step raised one of Temporal's failures (``ApplicationError`` naming its type, non-retryable): on
    Temporal that is the step's failure itself, with no class to make again, so it stays ExecutorFailedError
    in process and on Temporal."""
    return type(error).__module__.split(".")[0] == "temporalio"


def _peer_class(cls: type[Exception]) -> type[ExecutorFailedError] | None:
    """The class of both ``cls`` and :class:`ExecutorFailedError`, named like ``cls``; ``None`` if they cannot mix."""
    found = _PEER_CLASSES.get(cls)
    if found is None:
        try:
            metaclass: Any = type(cls)
            found = metaclass(
                cls.__name__,
                (cls, ExecutorFailedError),
                {
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "__doc__": cls.__doc__,
                    "__reduce__": _reduce_peer,
                    "_peer_of": cls,
                },
            )
        except Exception:  # a layout or metaclass conflict, a class that cannot be subclassed
            return None
        _PEER_CLASSES[cls] = found
    return found if issubclass(found, ExecutorFailedError) else None


def _reduce_peer(self: ExecutorFailedError) -> tuple[Any, ...]:
    """Pickled as the step's class and the failure's attributes (the class itself is made, not importable)."""
    state = {k: v for k, v in vars(self).items() if k != "result"}
    return (_unpickle_peer, (type(self)._peer_of, self.args, state))  # type: ignore[attr-defined]


def _unpickle_peer(cls: type[Exception], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    peer = _peer_class(cls)
    error: BaseException = (peer or cls).__new__(peer or cls, *args)
    error.args = args
    error.__dict__.update(state)
    if peer is not None:
        error.__dict__.setdefault("result", None)
    return error


def _builtin_exception(name: str) -> type | None:
    found = getattr(builtins, name, None)
    return found if isinstance(found, type) and found.__module__ == "builtins" else None


def describe(value: Any) -> str:
    """Short type name for error messages."""
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
