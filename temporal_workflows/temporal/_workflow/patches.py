"""Which behaviour a run was recorded with: every ``workflow.patched`` id, asked for at the run's start.

A patch asked for in the middle of a run can break its replay. When a query
reaches a run while a local activity of its workflow task runs, the SDK may
complete that task with the activity's result alone, so the code after the
result runs in the next task. A replay runs that code in the first task, where
the patch's marker is not found: ``patched()`` says no, and the marker that
follows in history fails the replay ("patch marker encountered … but there is
no corresponding change command"). A status query polled right after
``start_run`` did exactly that to the topology activity.

So a run asks for the patches every run reaches (:data:`PATCHES`) in its first
activation, before any activity, behind one patch of its own
(:data:`PATCHES_AT_START`). A run recorded before that one asks for each patch
where it always did, as it was recorded.

Each patch a run asks for costs it a marker and an upsert of Temporal's
``TemporalChangeVersion`` search attribute listing every patch so far (about
3.4 KB of history for the nine markers a run used to record at its start). So
a run started now records one marker, :data:`PATCHES_BUNDLE`, which stands
for every patch of this module:
each behaviour they gate is on, asked at the start or not. A run recorded
before the bundle asks as it was recorded (the bundle's marker is not in its
history, so ``patched`` says no to it). A patch added later is asked after the
bundle, and the bundle's list never changes.
"""

from __future__ import annotations

from temporalio import workflow

__all__ = [
    "BUNDLED",
    "PATCHES",
    "PATCH_ARRIVAL_ORDER",
    "PATCHES_AT_START",
    "PATCHES_BUNDLE",
    "PATCH_CARRY_LATER",
    "PATCH_CHECKPOINT_FAILURE_FAILS_RUN",
    "PATCH_CHILD_START",
    "PATCH_CONCURRENT_INPUT",
    "PATCH_DEFAULT_HEARTBEAT",
    "PATCH_ENTRY_CHECKPOINT",
    "PATCH_EVERY_FAILED_STEP",
    "PATCH_FIRST_COME",
    "PATCH_RELEASE_OUTPUTS",
    "PATCH_STATUS_ON_CONTINUE_AS_NEW",
    "PATCH_STATE_LIMIT",
    "PATCH_STATE_PAGES",
    "PATCH_STATUS_ON_EVERY_FAILURE",
    "PATCH_TASK_BUDGET",
    "PATCH_VALIDATE_IN_ACTIVITY",
    "PATCH_WAIT_FOR_SIGNATURE",
    "RunPatches",
    "patched",
]

PATCHES_AT_START = "patches-at-start"
"""Runs recorded before this asked for each patch where its behaviour starts (see the module)."""

PATCH_EVERY_FAILED_STEP = "report-every-failed-step"
"""Runs recorded before this failed at a superstep's first failed step; newer ones wait for every step."""

PATCH_CHECKPOINT_FAILURE_FAILS_RUN = "checkpoint-failure-fails-run"
"""Runs recorded before this went on (with a warning) when an automatic checkpoint could not be saved."""

PATCH_STATUS_ON_EVERY_FAILURE = "status-on-every-failure"
"""Runs recorded before this left the status search attribute as it was when the run failed outside
the superstep driver (an activity of the workflow's own failing for good)."""

PATCH_TASK_BUDGET = "task-budget"
"""Runs recorded before this scheduled everything a workflow task asked for in that task; newer ones
end the task with a short timer when what it records would pass ``TASK_BUDGET_BYTES``."""

PATCH_CARRY_LATER = "continue-as-new-after-large-input"
"""Runs recorded before this failed (``RunTooLargeError``) when history was long at a boundary whose
unprocessed outside input was too large to carry; newer ones continue as new once it is processed."""

PATCH_DEFAULT_HEARTBEAT = "default-heartbeat-timeout"
"""Runs recorded before steps had a default heartbeat timeout scheduled theirs without one."""

PATCH_STATUS_ON_CONTINUE_AS_NEW = "status-on-continue-as-new"
"""Runs recorded before this left the status search attribute of a segment that continued as new as it
was (e.g. ``waiting_for_input``), so a query for waiting runs also listed closed segments."""

PATCH_ENTRY_CHECKPOINT = "checkpoint-before-first-superstep"
"""Runs recorded before this took no automatic checkpoint of new input before its first superstep (Agent
Framework's "iteration 0"), which newer runs take, in process as on Temporal."""

PATCH_CHILD_START = "child-workflow-start-bounded-terminate"
"""Runs recorded before this started child workflows under their readable id however long (a server with the
default ``limit.maxIDLength`` refused one over 1,000 bytes) and with parent close policy ``REQUEST_CANCEL``,
which a child stuck in a failing workflow task, or a step ignoring its cancel, outlived; newer ones bound the id
(``_engine/ids.py``) and use ``TERMINATE``."""

PATCH_STATE_LIMIT = "committed-state-limit"
"""Runs recorded before this committed state past the payload limit as a whole (and then failed, on Temporal
only, when a query could not carry it); newer ones fail the superstep that would, as in process."""

PATCH_FIRST_COME = "first-come-first-served"
"""What happened first wins, as recorded in history. Runs recorded before this resumed a sub-workflow's child
by timing out its due requests first (an answer its parent took before the deadline lost when the parent's
superstep started after it; newer children take their responses first, as every boundary does). It also gated
a step ending the run before the others finished, which only the retired LlamaIndex import-swap front end's
steps did; graph runs still ask for it where they always did (``supersteps.py``)."""

PATCH_RELEASE_OUTPUTS = "release-oldest-outputs"
"""Runs recorded before this failed (``RunTooLargeError``) when their outputs added up past one payload, or
could not be carried by a continue-as-new; newer ones release the oldest outputs (each was an ``output``
event when committed) and count them in ``outputs_released``."""

PATCH_STATE_PAGES = "committed-state-in-pages"
"""Runs recorded before this failed a superstep whose commit took the committed state as a whole past one
payload (a step read it in one query, a continue-as-new carried it); newer ones allow ``STATE_PAYLOADS``
payloads (a step reads the state in pages) and, while history has room, continue as new later when the
state is too large to carry, saying so in the status's warnings."""

PATCH_VALIDATE_IN_ACTIVITY = "validate-outside-input-in-activity"
"""Runs recorded before this type-checked an update's (or a ``deliver`` signal's) input in a local activity
inside its handler, which concurrent updates and a query could make unreplayable (``locals.py``); newer
ones check it in a regular activity, issued only while none of the run's local activities is in flight."""

PATCH_WAIT_FOR_SIGNATURE = "wait-for-a-worker-of-the-run-signature"
"""Runs recorded before this failed a step whose every attempt met workers of another graph signature
(a deploy without Worker Versioning); newer ones schedule it again, with backoff, for ``SIGNATURE_WAIT``."""

PATCH_ARRIVAL_ORDER = "arrival-order"
"""Gated queueing a superstep's sends in the order its steps finished, for the retired LlamaIndex import-swap
front end's runs only. Kept because every run asks for the patches of :data:`PATCHES` at its start (graph runs
recorded with ``patches-at-start`` after it was added have its marker there) and :data:`BUNDLED` never changes;
nothing reads its answer now."""
PATCH_CONCURRENT_INPUT = "concurrent-input-policy"
"""A message sent while the run was busy with policy interrupt or rollback abandons the running superstep
(its steps' activities are cancelled) and interrupts the turn at the next boundary. Asked only when such a
message arrives: a run recorded before it never had one."""

PATCHES = (
    PATCH_DEFAULT_HEARTBEAT,
    PATCH_TASK_BUDGET,
    PATCH_ENTRY_CHECKPOINT,
    PATCH_CHILD_START,
    PATCH_STATE_LIMIT,
    PATCH_FIRST_COME,
    PATCH_RELEASE_OUTPUTS,
    PATCH_STATE_PAGES,
    PATCH_VALIDATE_IN_ACTIVITY,
    PATCH_ARRIVAL_ORDER,
)
"""The patches a run asks for at its start: those every run reaches, first right after its topology
activity (a step's options, the task budget, the checkpoint before the first superstep). Each is a marker
in history, so the others, reached only when something fails or the run continues as new, are still
asked where their behaviour starts. A new patch every run reaches is appended here (a run recorded without
its marker then says no, as ``patched`` does anywhere)."""


PATCHES_BUNDLE = "patches-1"
"""One marker for every patch above (:data:`BUNDLED`): a run that records it has all their behaviours."""

BUNDLED = (
    PATCHES_AT_START,
    *PATCHES,
    PATCH_EVERY_FAILED_STEP,
    PATCH_CHECKPOINT_FAILURE_FAILS_RUN,
    PATCH_STATUS_ON_EVERY_FAILURE,
    PATCH_CARRY_LATER,
    PATCH_STATUS_ON_CONTINUE_AS_NEW,
    PATCH_WAIT_FOR_SIGNATURE,
)
"""What :data:`PATCHES_BUNDLE` stands for: every patch of this module when it was made. Never changes (a run
recorded with the bundle replays with exactly these on); a new patch is asked on its own, after the bundle."""


class RunPatches:
    """One run's answers, asked for once, first thing (see the module)."""

    def __init__(self) -> None:
        self._answers: dict[str, bool] | None = None

    def ask_at_start(self) -> None:
        """Call first in the run, before any activity or timer."""
        if workflow.patched(PATCHES_BUNDLE):
            self._answers = dict.fromkeys(BUNDLED, True)
        elif workflow.patched(PATCHES_AT_START):
            self._answers = {patch: workflow.patched(patch) for patch in PATCHES}

    def get(self, patch: str) -> bool:
        """Whether the run has ``patch`` (asked where the behaviour starts for runs recorded before)."""
        if self._answers is not None and patch in self._answers:
            return self._answers[patch]
        return workflow.patched(patch)


def patched(patch: str) -> bool:
    """``workflow.patched(patch)``, answered from the current run's start when it asked there."""
    answers = getattr(workflow.instance(), "patches", None)
    if isinstance(answers, RunPatches):
        return answers.get(patch)
    return workflow.patched(patch)
