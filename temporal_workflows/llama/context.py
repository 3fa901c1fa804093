"""``Context``: LlamaIndex's per-run context, on the engine's committed state and pending requests.

One class with three faces, as in LlamaIndex: before a run (``Context(wf)``,
``Context.from_dict``: the state and position to start from), around a run
(``handler.ctx``: send events in, stream events out, ``to_dict``), and inside
a step (the store, ``send_event``, ``collect_events``, ``wait_for_event``,
``write_event_to_stream``, ``retry_info``).

The store is the run's committed state. A typed state (``Context[MyState]``)
keeps one state key per field and the untyped ``DictState`` one per key, so
two steps of one superstep that change *different* fields merge; two that
write the *same* field raise ``StateConflictError`` naming the key and both
steps (LlamaIndex lets the last writer win, or, with ``edit_state``,
serializes them: neither is a deterministic commit). Inside a step every read
sees the state committed at the last superstep plus this step's own writes;
``edit_state`` is atomic among the invocations of one step task.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, cast

from pydantic import BaseModel
from typing_extensions import TypeVar

from temporal_workflows._engine.machine import EXECUTOR_STATE_PREFIX, is_shared_key, shared_part
from temporal_workflows._engine.serde import Envelope, decode, encode
from temporal_workflows.llama._invocations import current_invocation
from temporal_workflows.llama._run_objects import RunObjects, decode_value, encode_value
from temporal_workflows.llama._snapshots import pre_snapshot, read_snapshot
from temporal_workflows.llama.errors import ContextSerdeError, ContextStateError, WorkflowRuntimeError
from temporal_workflows.llama.events import DictLikeModel, Event
from temporal_workflows.llama.retry_policy import RetryInfo

if TYPE_CHECKING:
    import asyncio

    from temporal_workflows.llama._invocations import Invocation
    from temporal_workflows.llama._local import LlamaLocalRun
    from temporal_workflows.llama.workflow import Workflow

__all__ = ["Context", "DictState", "InMemoryStateStore", "StateStore"]


class DictState(DictLikeModel):
    """The untyped state a workflow gets when no step annotates ``Context[State]``: any keys, dict-style."""


MODEL_T = TypeVar("MODEL_T", bound=BaseModel, default=DictState)
T = TypeVar("T", bound=Event)
_MISSING: Any = ...
_MAX_DEPTH = 1000


class _Backend:
    """Where a store's keys live: a step's view, a run's committed state, or a context not yet run."""

    objects: RunObjects | None = None

    def read(self, key: str) -> Envelope | None:
        raise NotImplementedError

    def stored_keys(self) -> list[str]:
        raise NotImplementedError

    def write(self, key: str, value: Any) -> None:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def value(self, env: Envelope) -> Any:
        return decode_value(env, self.objects)

    def fresh(self, env: Envelope) -> Any:
        """A copy of the value, for ``edit_state`` to change in isolation."""
        if self.objects is not None:
            found, value = self.objects.get(env)
            if found:
                try:
                    return copy.deepcopy(value)
                except Exception:
                    return value
        return decode_value(env, self.objects)


class _StepBackend(_Backend):
    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.objects = inv.task.objects

    def read(self, key: str) -> Envelope | None:
        return self.inv.read(key)

    def stored_keys(self) -> list[str]:
        return self.inv.state_keys()

    def write(self, key: str, value: Any) -> None:
        self.inv.write(key, value)

    def delete(self, key: str) -> None:
        self.inv.delete(key)


class DictBackend(_Backend):
    """State held by a context that is not running (before a run, or restored by ``from_dict``)."""

    def __init__(self, state: dict[str, Envelope] | None = None, objects: RunObjects | None = None) -> None:
        self.state: dict[str, Envelope] = state if state is not None else {}
        self.objects = objects

    def read(self, key: str) -> Envelope | None:
        return self.state.get(key)

    def stored_keys(self) -> list[str]:
        return list(shared_part(self.state))

    def write(self, key: str, value: Any) -> None:
        self.state[key] = encode_value(value, self.objects, f"state key {key!r}")

    def delete(self, key: str) -> None:
        self.state.pop(key, None)


def _check_key(key: str) -> None:
    if not key:
        raise ValueError("Path cannot be empty")
    if not is_shared_key(key):
        raise ValueError(f"state keys starting with {EXECUTOR_STATE_PREFIX!r} are reserved by the engine: {key!r}")


def _step_into(value: Any, segment: str) -> Any:
    if isinstance(value, DictLikeModel) and segment in value._data:
        return value._data[segment]
    if isinstance(value, dict):
        return value[segment]
    if isinstance(value, (list, tuple)):
        return value[int(segment)]
    return getattr(value, segment)


def _assign(value: Any, segment: str, item: Any) -> None:
    if isinstance(value, DictLikeModel) and segment not in type(value).model_fields:
        value._data[segment] = item
    elif isinstance(value, dict):
        value[segment] = item
    elif isinstance(value, list):
        value[int(segment)] = item
    else:
        setattr(value, segment, item)


class StateStore(Generic[MODEL_T]):
    """The run's state: ``get``/``set`` by dotted path, ``get_state``/``set_state``, ``edit_state``.

    Args:
        backend: Where the keys live.
        state_type: The pydantic model of the state (``DictState`` if untyped).
        lock: Makes ``edit_state`` atomic among the holders of the same lock
            (the invocations of one step task).
    """

    def __init__(self, backend: _Backend, state_type: type[MODEL_T], lock: asyncio.Lock | None = None) -> None:
        self._backend = backend
        self.state_type = state_type
        self._lock = lock
        self._typed = not issubclass(state_type, DictLikeModel)

    # -- reading -------------------------------------------------------------------------------------------------

    def _default(self) -> MODEL_T:
        try:
            return self.state_type()
        except Exception as e:
            raise ValueError("State must have defaults for all fields") from e

    def _top(self, key: str) -> tuple[bool, Any]:
        env = self._backend.read(key)
        if env is not None:
            return True, self._backend.value(env)
        if self._typed and key in self.state_type.model_fields:
            return True, getattr(self._default(), key)
        return False, None

    async def get(self, path: str, default: Any = _MISSING) -> Any:
        """The value at a dot-separated path (``"user.name"``); ``default`` if missing, else ``ValueError``."""
        segments = path.split(".") if path else []
        if len(segments) > _MAX_DEPTH:
            raise ValueError(f"Path length exceeds {_MAX_DEPTH} segments")
        if not segments:
            return await self.get_state()
        try:
            found, value = self._top(segments[0])
            if not found:
                raise KeyError(segments[0])
            for segment in segments[1:]:
                value = _step_into(value, segment)
        except Exception:
            if default is not _MISSING:
                return default
            raise ValueError(f"Path '{path}' not found in state") from None
        return value

    def _build(self, fresh: bool) -> MODEL_T:
        backend = self._backend
        state = self._default()
        if self._typed:
            for name in self.state_type.model_fields:
                env = backend.read(name)
                if env is not None:
                    object.__setattr__(state, name, backend.fresh(env) if fresh else backend.value(env))
        else:
            data = cast(DictLikeModel, state)._data
            for key in backend.stored_keys():
                env = backend.read(key)
                if env is not None:
                    data[key] = backend.fresh(env) if fresh else backend.value(env)
        return state

    async def get_state(self) -> MODEL_T:
        """The whole state as its model (a copy: changing it changes nothing; use ``edit_state``)."""
        return self._build(fresh=True)

    # -- writing -------------------------------------------------------------------------------------------------

    def _write_field(self, key: str, value: Any) -> None:
        _check_key(key)
        if self._typed and key not in self.state_type.model_fields:
            raise ValueError(f"{self.state_type.__name__} has no field {key!r}")
        self._backend.write(key, value)

    async def set(self, path: str, value: Any) -> None:
        """Set the value at a dot-separated path (missing intermediate dicts are created)."""
        segments = path.split(".") if path else []
        if not segments:
            raise ValueError("Path cannot be empty")
        if len(segments) > _MAX_DEPTH:
            raise ValueError(f"Path length exceeds {_MAX_DEPTH} segments")
        if len(segments) == 1:
            self._write_field(segments[0], value)
            return
        env = self._backend.read(segments[0])
        found, top = (True, self._backend.fresh(env)) if env is not None else self._top(segments[0])
        if not found or top is None:
            top = {}
        node = top
        for segment in segments[1:-1]:
            try:
                node = _step_into(node, segment)
            except Exception:
                child: dict[str, Any] = {}
                _assign(node, segment, child)
                node = child
        _assign(node, segments[-1], value)
        self._write_field(segments[0], top)

    def _snapshot(self, state: BaseModel) -> dict[str, Envelope | None]:
        """Each field's (or key's) JSON before an edit, to write only what the edit changed."""
        names = type(state).model_fields if self._typed else state._data  # type: ignore[attr-defined]
        out: dict[str, Envelope | None] = {}
        for name in names:
            value = getattr(state, name) if self._typed else state._data[name]  # type: ignore[attr-defined]
            try:
                out[name] = encode(value)
            except Exception:
                out[name] = None
        return out

    def _commit(self, before: dict[str, Envelope | None] | None, after: BaseModel) -> None:
        """Write what differs: each changed field (or key), nothing else.

        ``before``: the JSON of each field when an edit began (``None``: compare
        with what is stored, or with the type's defaults).
        """
        backend = self._backend
        if self._typed:
            defaults = self._snapshot(self._default()) if before is None else before
            for name in type(after).model_fields:
                if name not in self.state_type.model_fields:
                    continue
                new = getattr(after, name)
                env = backend.read(name)
                if before is None and env is not None:
                    if _same_env(env, new, backend):
                        continue
                elif _same_json(defaults.get(name), new):
                    continue
                backend.write(name, new)
            return
        new_data = after._data if isinstance(after, DictLikeModel) else dict(after)
        for key in backend.stored_keys():
            if key not in new_data:
                backend.delete(key)
        for key, value in new_data.items():
            _check_key(key)
            if before is not None and key in before and _same_json(before[key], value):
                continue
            env = backend.read(key)
            if env is None or not _same_env(env, value, backend):
                backend.write(key, value)

    async def set_state(self, state: MODEL_T) -> None:
        """Replace the state with ``state`` (every field or key it has)."""
        self._commit(None, state)

    async def clear(self) -> None:
        """Reset the state to its type's defaults."""
        for key in self._backend.stored_keys():
            self._backend.delete(key)

    @asynccontextmanager
    async def edit_state(self) -> AsyncIterator[MODEL_T]:
        """Change the state in a block; written (only what changed) when the block ends without error."""
        if self._lock is None:
            state = self._build(fresh=True)
            before = self._snapshot(state)
            yield state
            self._commit(before, state)
            return
        async with self._lock:
            state = self._build(fresh=True)
            before = self._snapshot(state)
            yield state
            self._commit(before, state)

    def to_dict(self, serializer: Any = None) -> dict[str, Any]:
        """The state as JSON: its type and each key's value."""
        backend = self._backend
        data: dict[str, Any] = {}
        for key in backend.stored_keys():
            env = backend.read(key)
            if env is not None:
                data[key] = env.to_json() if env.type else env.data
        return {
            "state_type": self.state_type.__name__,
            "state_module": self.state_type.__module__,
            "state_data": data,
            "store_type": "engine",
        }


InMemoryStateStore = StateStore
"""LlamaIndex's default store's name; here every store is the run's committed state."""


def _same_env(env: Envelope, value: Any, backend: _Backend) -> bool:
    if backend.objects is not None:
        found, old = backend.objects.get(env)
        if found and old is value:
            return True
    try:
        new = encode(value)
    except Exception:
        return False
    return new.type == env.type and new.data == env.data


def _same_json(old: Envelope | None, value: Any) -> bool:
    if old is None:
        return False
    try:
        new = encode(value)
    except Exception:
        return False
    return new.type == old.type and new.data == old.data


class _Pre:
    """A context before it runs: where a run of it starts (fresh, or a ``from_dict`` snapshot)."""

    def __init__(self, workflow: Workflow, snapshot: dict[str, Any] | None) -> None:
        self.workflow = workflow
        self.snapshot = snapshot
        state: dict[str, Envelope] = {}
        if snapshot is not None:
            state = {k: Envelope.from_json(v) for k, v in (snapshot.get("state") or {}).items()}
        self.backend = DictBackend(state)

    @property
    def is_running(self) -> bool:
        return bool(self.snapshot and self.snapshot.get("is_running"))


class Context(Generic[MODEL_T]):
    """The context of a run (see the module docstring for its three faces).

    Args:
        workflow: The workflow it belongs to.
        previous_context: A ``to_dict()`` of an earlier context, to resume or continue from.
        serializer: Accepted for LlamaIndex compatibility; values are always JSON here.
    """

    def __init__(
        self, workflow: Workflow, previous_context: dict[str, Any] | None = None, serializer: Any = None
    ) -> None:
        self._workflow = workflow
        self._pre: _Pre | None = _Pre(workflow, read_snapshot(workflow, previous_context) if previous_context else None)
        self._run: LlamaLocalRun | None = None
        self._inv: Invocation | None = None

    # -- faces ---------------------------------------------------------------------------------------------------

    @classmethod
    def _for_invocation(cls, workflow: Workflow, inv: Invocation) -> Context[Any]:
        ctx = cast(Context[Any], object.__new__(cls))
        ctx._workflow = workflow
        ctx._pre = None
        ctx._run = None
        ctx._inv = inv
        return ctx

    def _step(self, fn: str) -> Invocation:
        if self._inv is None:
            if self._pre is not None:
                raise ContextStateError(f"{fn} requires a running workflow. Call workflow.run() first.")
            raise ContextStateError(f"{fn} is only available from within step functions.")
        return self._inv

    def _outside(self, fn: str) -> LlamaLocalRun:
        if self._run is None:
            if self._inv is not None:
                raise ContextStateError(f"{fn} is only available from handler code, not from within steps.")
            raise ContextStateError(f"{fn} requires a running workflow. Call workflow.run() first.")
        return self._run

    @staticmethod
    def get_step_context() -> Context[Any]:
        """The context of the step running now (for decorators around steps)."""
        inv = current_invocation()
        if inv is None:
            raise WorkflowRuntimeError("Context.get_step_context() may only be called from within a step function")
        return Context._for_invocation(inv.task.compiled.workflow, inv)

    @property
    def is_running(self) -> bool:
        if self._inv is not None:
            return True
        if self._run is not None:
            return self._run.is_running
        return self._pre.is_running if self._pre is not None else False

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def store(self) -> StateStore[MODEL_T]:
        """The run's state (see :class:`StateStore`)."""
        state_type = self._workflow._compiled().state_type
        if self._inv is not None:
            return StateStore(_StepBackend(self._inv), state_type, self._inv.task.lock)  # type: ignore[arg-type]
        if self._run is not None:
            return StateStore(self._run.backend(), state_type)  # type: ignore[arg-type]
        assert self._pre is not None
        return StateStore(self._pre.backend, state_type)  # type: ignore[arg-type]

    @property
    def idempotency_key(self) -> str:
        """Unique for this step invocation and the same on its retries and its re-run after ``wait_for_event``.

        Not in LlamaIndex: pass it to external APIs so a side effect of a step
        that runs again (a retry, a Temporal activity retried after a lost
        worker, a re-run after a wait) is applied once.
        """
        return self._step("idempotency_key").key

    # -- serialization ----------------------------------------------------------------------------------------------

    def to_dict(self, serializer: Any = None, *, include_state: bool = True) -> dict[str, Any]:
        """The context as JSON: its state and, mid-run, where the run is (to resume with ``from_dict``).

        Mid-run it is the run at its last superstep boundary: a step running
        now runs again when the context is resumed (at least once, as in
        LlamaIndex).

        Raises:
            ContextSerdeError: a value the run holds has no JSON form (kept
                only as a Python object in this process).
        """
        if self._inv is not None:
            raise ContextStateError("to_dict is only available from handler code, not from within steps.")
        if self._run is not None:
            data = self._run.to_dict()
        else:
            assert self._pre is not None
            data = pre_snapshot(self._workflow, self._pre)
        if not include_state:
            data["state"] = {}
        return data

    @classmethod
    def from_dict(cls, workflow: Workflow, data: dict[str, Any], serializer: Any = None) -> Context[MODEL_T]:
        """A context from :meth:`to_dict`; ``workflow.run(ctx=...)`` resumes (or continues) from it.

        Raises:
            ContextSerdeError: ``data`` is not a context of this workflow.
        """
        try:
            return cls(workflow, previous_context=data, serializer=serializer)
        except (KeyError, TypeError, ValueError) as e:
            raise ContextSerdeError(f"Error creating a Context instance: {e}") from e

    # -- events ----------------------------------------------------------------------------------------------------

    def send_event(self, message: Event, step: str | None = None) -> None:
        """Send an event to the steps that accept it (or to ``step``); from a step, or from outside the run.

        From outside (``handler.ctx.send_event``) it first answers every
        ``wait_for_event`` it matches, as in LlamaIndex.

        Raises:
            WorkflowRuntimeError: ``step`` does not exist or does not accept the event.
        """
        if self._inv is not None:
            self._inv.emit(message, step)
        elif self._run is not None:
            self._run.send_event(message, step)
        else:
            raise ContextStateError("send_event() called before workflow started. Call workflow.run() first.")

    def write_event_to_stream(self, ev: Event | None) -> None:
        """Publish an event to the run's stream (``handler.stream_events()``, ``run.events()`` on Temporal)."""
        inv = self._step("write_event_to_stream")
        if ev is not None:
            inv.stream(ev)

    def collect_events(
        self, ev: Event, expected: list[type[Event]], buffer_id: str | None = None
    ) -> list[Event] | None:
        """Buffer ``ev`` until one event of each type in ``expected`` has arrived; then return them in that order."""
        return self._step("collect_events").collect(ev, expected, buffer_id)

    async def wait_for_event(
        self,
        event_type: type[T],
        waiter_event: Event | None = None,
        waiter_id: str | None = None,
        requirements: dict[str, Any] | None = None,
        timeout: float | None = 2000,
    ) -> T:
        """Wait for an event of ``event_type`` (with ``requirements``) sent into the run.

        The run waits (durably on Temporal) as a pending request; the event
        answers it. ``waiter_event`` is streamed once to ask for it. In
        process the step stays suspended here, so nothing before the wait
        runs twice; on Temporal (or after ``from_dict``) it runs again from
        the top, replaying what it did before the wait instead of redoing it.

        Raises:
            TimeoutError: no such event arrived within ``timeout`` seconds.
        """
        inv = self._step("wait_for_event")
        return cast(T, await inv.wait_for(event_type, waiter_event, waiter_id, requirements, timeout))

    def retry_info(self) -> RetryInfo:
        """Which attempt of the step this is, and why the last one failed."""
        return self._step("retry_info").retry_info()

    # -- around a run ------------------------------------------------------------------------------------------------

    async def running_steps(self) -> list[str]:
        """Steps with an invocation running now."""
        return self._outside("running_steps").running_steps()

    def stream_events(self) -> AsyncGenerator[Event, None]:
        """The run's published events (see ``WorkflowHandler.stream_events``)."""
        return self._outside("stream_events").stream()

    def get_result(self) -> Any:
        """Deprecated: ``await handler`` instead."""
        warnings.warn(
            "Context.get_result() is deprecated and will be removed in a future release. Prefer awaiting the "
            "WorkflowHandler returned by Workflow.run",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._outside("get_result").result_now()


def decode_mapping(state: Mapping[str, Envelope]) -> dict[str, Any]:
    return {k: decode(v) for k, v in shared_part(state).items()}
