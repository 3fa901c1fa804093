"""LlamaIndex's ``StepStateChanged`` in a step's result as a tiny tuple: what its activity's step already says.

A LlamaIndex step streams ``running`` then ``not_running`` for each event it
handles (``stream_events(expose_internal=True)``), as LlamaIndex does; they are
custom events of the step's result, like its other stream writes, so both
hosts publish them alike. Spelled out, the two cost about 650 bytes of history
per step (the wrapping event's and the state's type keys, five field names,
``str()`` of two classes): half again what a whole step cost before. Almost
all of it is known where the result is decoded: the step's name is the
executor's, and the class names are those of a message the step received,
sent or yielded (or ``NoneType``). So the activity writes each as a JSON array
in place of the envelope, and the workflow rebuilds the very envelope::

    [state, worker, input, output]     # trailing defaults left out

* ``state``: ``"r"`` running, ``"p"`` preparing (worker ``<enqueued>``),
  ``"n"`` not_running;
* ``worker``: the worker id as a number (default 0);
* ``input``: the index of the first message of the step's input, its sent
  messages and its outputs (in that order) whose class is the input event's,
  or that class's type key (default 0);
* ``output`` (``not_running`` only, absent when there is none): ``"-"`` for
  ``NoneType``, else an index or a type key, as ``input``.

So a chain step's pair is ``["r"],["n",0,0,0]``. An event this cannot say
exactly (checked by rebuilding it before it is sent) travels spelled out, and
a result holding no array decodes as it always did. Pure string work: this
module imports nothing of the LlamaIndex front end (its type keys are written
here, and ``tests/test_llama_step_state.py`` checks them), so the workflow, in
or out of the sandbox, rebuilds the events without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporal_workflows._engine.serde import Envelope

__all__ = ["LLAMA_STREAM_EVENT", "STEP_STATE_CHANGED", "compact_event", "expand_event"]

LLAMA_STREAM_EVENT = "temporal_workflows.llama._runtime:LlamaStreamEvent"
"""Type key of ``temporal_workflows.llama._runtime.LlamaStreamEvent`` (a step's stream write)."""
STEP_STATE_CHANGED = "temporal_workflows.llama.events:StepStateChanged"
"""Type key of ``temporal_workflows.llama.StepStateChanged``."""

_STATES = {"r": "running", "p": "preparing", "n": "not_running"}
_CODES = {v: k for k, v in _STATES.items()}
_NONE = "<class 'NoneType'>"
_ENQUEUED = "<enqueued>"


def _class_name(key: str) -> str:
    """``__name__`` of the class with type key ``module:qualname`` (how ``running`` names its input)."""
    return key.partition(":")[2].rsplit(".", 1)[-1]


def _class_str(key: str) -> str:
    """``str()`` of the class with type key ``module:qualname`` (how ``not_running`` names its classes)."""
    module, _, qualname = key.partition(":")
    return f"<class '{module}.{qualname}'>"


def _resolve(ref: Any, candidates: Sequence[str | None]) -> str:
    if isinstance(ref, int) and not isinstance(ref, bool) and 0 <= ref < len(candidates):
        key = candidates[ref]
        if key is not None:
            return key
    if isinstance(ref, str) and ":" in ref:
        return ref
    raise ValueError(f"no class for {ref!r}")


def expand_event(item: Sequence[Any], executor_id: str, candidates: Sequence[str | None]) -> Envelope:
    """The ``LlamaStreamEvent`` envelope of a compact ``StepStateChanged`` (see the module).

    Args:
        item: ``[state, worker, input, output]``, trailing defaults left out.
        executor_id: The step's executor (the state's ``name``).
        candidates: Type keys of the step's input messages, then of its sent
            messages, then of its outputs.

    Raises:
        ValueError: ``item`` is not such a tuple (a corrupted result).
    """
    if not item or item[0] not in _STATES or len(item) > 4:
        raise ValueError(f"not a compact step state: {list(item)!r}")
    state = _STATES[item[0]]
    worker = item[1] if len(item) > 1 else 0
    input_key = _resolve(item[2] if len(item) > 2 else 0, candidates)
    output: str | None = None
    if len(item) > 3:
        output = _NONE if item[3] == "-" else _class_str(_resolve(item[3], candidates))
    data = {
        "name": executor_id,
        "step_state": state,
        "worker_id": _ENQUEUED if state == "preparing" else str(worker),
        "input_event_name": _class_str(input_key) if state == "not_running" else _class_name(input_key),
        "output_event_name": output,
    }
    return Envelope(LLAMA_STREAM_EVENT, {"type": "llama", "event": {"type": STEP_STATE_CHANGED, "data": data}})


def _ref(name: str, candidates: Sequence[str | None], spell: Any) -> Any:
    """The first candidate whose class is named ``name`` (as ``spell`` names a type key), else ``None``."""
    for i, key in enumerate(candidates):
        if key is not None and ":" in key and spell(key) == name:
            return i
    return None


def compact_event(env: Envelope, executor_id: str, candidates: Sequence[str | None]) -> list[Any] | None:
    """The compact form of ``env`` if it is a ``StepStateChanged`` that :func:`expand_event` gives back exactly."""
    if env.type != LLAMA_STREAM_EVENT or not isinstance(env.data, dict):
        return None
    inner = env.data.get("event")
    if (
        not isinstance(inner, dict)
        or inner.get("type") != STEP_STATE_CHANGED
        or not isinstance(inner.get("data"), dict)
    ):
        return None
    data = inner["data"]
    code = _CODES.get(data.get("step_state"))  # type: ignore[arg-type]
    if code is None:
        return None
    worker_id = data.get("worker_id")
    worker = int(worker_id) if isinstance(worker_id, str) and worker_id.isdigit() else 0
    name = data.get("input_event_name")
    if not isinstance(name, str):
        return None
    spell = _class_str if code == "n" else _class_name
    found = _ref(name, candidates, spell)
    item: list[Any] = [code, worker, found if found is not None else _key_of(name, code)]
    output = data.get("output_event_name")
    if output is not None:
        if output == _NONE:
            item.append("-")
        else:
            ref = _ref(output, candidates, _class_str) if isinstance(output, str) else None
            item.append(ref if ref is not None else _key_of(output, "n"))
    while output is None and len(item) > 1 and item[-1] == 0:
        item.pop()
    try:
        back = expand_event(item, executor_id, candidates)
    except ValueError:
        return None
    return item if back == env else None


def _key_of(name: Any, code: str) -> str:
    """A type key spelling ``name`` for ``not_running`` (``<class 'm.Q'>`` → ``m:Q``); ``""`` if there is none."""
    if code == "n" and isinstance(name, str) and name.startswith("<class '") and name.endswith("'>"):
        module, _, qualname = name[len("<class '") : -len("'>")].rpartition(".")
        if module:
            return f"{module}:{qualname}"
    return ""
