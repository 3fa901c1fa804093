"""Outside input reaching the engine: what that means, written once for every host.

Outside input (a graph's ``send`` / ``respond``, the answers a parent hands a
sub-workflow's child) reaches an engine only at a boundary, after its host
checked it. The hosts differ in how input arrives and
how it is checked (in process: the arguments of ``run()``, validated by a call;
on Temporal: signals and updates, validated in activities; a child: its
parent's answers), and in how they report what cannot be taken (a raised
error, a warning, a refused update, a warning event in the parent). What
taking it does is the same everywhere, and is this module:

- :func:`open_request`: whether a response can still answer its request
  (pending, not answered already), or why not (:class:`Unanswerable`);
- :func:`apply`: a checked item to the engine: a response answers its
  request, a message is queued for its executor. It returns what became of
  it (:class:`Applied`): the requests it answered (a host remembers them to
  say "already answered" later).

Checkpoint and reset requests are outside input too, but they do not reach
the engine: they act on the run around it, at fixed points of a boundary
rather than in arrival order (a checkpoint holds what the boundary took; a
reset wins over everything queued with it). A host queues them in its
:class:`BoundaryAsks` (a :class:`CheckpointAsk` each, and the accepted reset's
plan) and the driver serves them there, the same on every host
(``driver.serve_checkpoint_asks``; the order at a boundary is listed in
docs/architecture.md).

A message goes to the executor the client names, a response to its request.
Pure: no host, clock or I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar, get_args

from temporal_workflows._engine.machine import Engine, PendingRequest
from temporal_workflows._engine.serde import Envelope
from temporal_workflows._errors import AlreadyAnsweredError, UnknownRequestError

__all__ = [
    "CONCURRENT_INPUT",
    "DEFAULT_CONCURRENT_INPUT",
    "Applied",
    "ConcurrentInput",
    "CheckpointAsk",
    "BoundaryAsks",
    "Inbound",
    "InboundKind",
    "Unanswerable",
    "apply",
    "arrival",
    "check_policy",
    "open_request",
    "stronger",
]

InboundKind = Literal["respond", "send"]

ConcurrentInput = Literal["enqueue", "reject", "interrupt", "rollback"]
"""What a message that arrives while the run is busy does (LangGraph's double-texting strategies):

- ``"enqueue"``: it waits for the next boundary and is taken there (the default, as before);
- ``"reject"``: it is refused (``RunInProgressError``), nothing delivered;
- ``"interrupt"``: the running superstep's steps are cancelled and commit nothing, the turn's remaining work is
  dropped, committed state stays, and the message is taken at that boundary;
- ``"rollback"``: as interrupt, and the run first goes back to where it was before the turn's input.

"Busy": the run is in a turn (it has work, a superstep is running, or input is queued that will give it work);
a run that is idle, or only waits for answers, is not. A turn starts with the input that wakes the run (its
start message, a message or an answer to an idle run) and ends when the run is idle again.
"""

CONCURRENT_INPUT: tuple[str, ...] = get_args(ConcurrentInput)
DEFAULT_CONCURRENT_INPUT: ConcurrentInput = "enqueue"

Arrival = Literal["take", "refuse", "interrupt", "rollback"]


def check_policy(policy: object, what: str = "concurrent_input") -> ConcurrentInput:
    """``policy`` if it is one of :data:`CONCURRENT_INPUT`.

    Raises:
        ValueError: naming the value and the policies.
    """
    if isinstance(policy, str) and policy in CONCURRENT_INPUT:
        return policy  # type: ignore[return-value]
    raise ValueError(f"{what} must be one of {', '.join(CONCURRENT_INPUT)}, not {policy!r}")


def arrival(policy: ConcurrentInput, *, busy: bool) -> Arrival:
    """What a message does when it arrives, by its policy and whether the run is busy (the one rule)."""
    if not busy or policy == "enqueue":
        return "take"
    if policy == "reject":
        return "refuse"
    return policy


def stronger(a: str | None, b: str) -> str:
    """Of two interruptions waiting for one boundary, the one carried out: a rollback wins over an interrupt."""
    return "rollback" if "rollback" in (a, b) else b


_Plan = TypeVar("_Plan")


@dataclass(frozen=True, slots=True)
class Inbound:
    """One piece of outside input, as a host queues it until a boundary.

    Attributes:
        kind: ``"respond"`` (an answer) or ``"send"`` (a message for one executor).
        key: The request id, or the executor id.
        value: The input, as an envelope.
        checked: Whether its host checked it already (an update's input, a
            value validated at arrival); unchecked input is checked at the
            boundary that takes it, and only checked input reaches :func:`apply`.
    """

    kind: InboundKind
    key: str
    value: Envelope
    checked: bool = False
    interrupts: bool = False
    """It arrived while the run was busy, with policy interrupt or rollback: its host takes it only at a
    boundary where that interruption was carried out (``BoundaryAsks.interrupt``), never at one before."""
    tag: str | None = None
    """Its host's name for it, for a client that follows it (the engine never reads it)."""


@dataclass(eq=False, slots=True)
class CheckpointAsk:
    """A checkpoint asked for from outside, queued until the driver takes it at a boundary.

    Its asker waits for ``done`` and reads the outcome: ``checkpoint_id`` and
    ``superstep``, or ``failure`` (the storage's error) with ``error`` (the
    line a run on Temporal reports it by).

    Attributes:
        label: The asker's label for it (Temporal keeps it with the checkpoint).
        warn: Its failure is a warning of the run's (nobody waits for its
            outcome: a Temporal signal), not only its asker's error.
    """

    label: str | None = None
    warn: bool = False
    checkpoint_id: str | None = None
    superstep: int = 0
    failure: Exception | None = None
    error: str | None = None
    done: bool = False


@dataclass(eq=False, slots=True)
class BoundaryAsks(Generic[_Plan]):
    """Checkpoint and reset requests waiting for a boundary, beside a host's queue of input for the engine.

    At a boundary the driver first carries out an accepted reset (it takes
    precedence over everything queued with it), then the host hands the
    engine its input, due requests expire, and the checkpoints asked for are
    taken, in the order they were asked, so each holds what that boundary
    took. A checkpoint asked for while the run is idle is taken at once.

    Attributes:
        checkpoints: Checkpoints asked for, oldest first.
        reset: The accepted reset, as its host planned it (what it restores);
            a later reset replaces an earlier one not yet carried out.
    """

    checkpoints: list[CheckpointAsk] = field(default_factory=list)
    reset: _Plan | None = None
    interrupt: str | None = None
    """``"interrupt"`` or ``"rollback"``: a message that arrived while the run was busy, with that policy, waits
    (in the host's queue of input); its turn is interrupted at the next boundary, before input is taken."""

    def __bool__(self) -> bool:
        """Whether anything waits for a boundary (an idle run wakes for it)."""
        return bool(self.checkpoints) or self.reset is not None

    @property
    def resetting(self) -> bool:
        """Whether a reset waits: a running superstep is abandoned for it."""
        return self.reset is not None

    @property
    def abandons(self) -> bool:
        """Whether a running superstep is abandoned (its steps cancelled): a reset or an interruption waits."""
        return self.reset is not None or self.interrupt is not None


@dataclass(frozen=True, slots=True)
class Applied:
    """What became of an item applied to the engine.

    Attributes:
        answered: The request ids it answered.
    """

    answered: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Unanswerable:
    """Why a response cannot answer its request, worded once for every host (a warning, a refusal or an error).

    Attributes:
        request_id: The request it names.
        answered: It was answered already (else: no such request is pending).
        pending: The request ids still open, sorted (for "pending request ids: ...").
    """

    request_id: str
    answered: bool
    pending: tuple[str, ...] = ()

    def text(self, quote: Callable[[str], str] = repr) -> str:
        """Why, in the words of its error (``quote``: how the outside id is quoted)."""
        if self.answered:
            return AlreadyAnsweredError.text(self.request_id, quote)
        return UnknownRequestError.text(self.request_id, self.pending, quote)

    def error(self) -> AlreadyAnsweredError | UnknownRequestError:
        """The error a host that raises says it by (in process; a Temporal client rebuilds it from the refusal)."""
        if self.answered:
            return AlreadyAnsweredError(self.request_id)
        return UnknownRequestError(self.request_id, list(self.pending))


def open_request(
    engine: Engine,
    request_id: str,
    *,
    answered: Container[str] = (),
    delivered: Container[str] = (),
) -> PendingRequest | Unanswerable:
    """The pending request a response to ``request_id`` answers, or why it cannot.

    Args:
        answered: Request ids whose answer the host accepted but has not yet
            applied (another answer wins over this one, whatever their order;
            they are not listed as pending).
        delivered: Request ids whose answer the host applied before (so a gone
            request reads "already answered", not "unknown").
    """
    if request_id in answered:
        return Unanswerable(request_id, answered=True)
    request = engine.pending_requests.get(request_id)
    if request is not None:
        return request
    if request_id in delivered:
        return Unanswerable(request_id, answered=True)
    pending = tuple(sorted(r for r in engine.pending_requests if r not in answered))
    return Unanswerable(request_id, answered=False, pending=pending)


def apply(engine: Engine, item: Inbound) -> Applied:
    """Hand a checked item to the engine, at a boundary.

    Raises:
        UnknownRequestError: a response's request is not pending (check it with :func:`open_request`).
        WorkflowError: a message names an executor the graph does not have.
        ValueError: an unchecked item.
    """
    if not item.checked:
        raise ValueError(f"outside input ({item.kind} {item.key!r}) reaches the engine only once checked")
    if item.kind == "respond":
        engine.respond(item.key, item.value)
        return Applied(answered=(item.key,))
    engine.send(item.key, item.value)
    return Applied()
