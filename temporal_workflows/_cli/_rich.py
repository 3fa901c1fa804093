"""The detailed view in colour, with a live status line, when ``rich`` is installed and out is a terminal.

``pip install 'temporal-workflows[rich]'``. The lines are the plain view's
(:class:`~temporal_workflows._cli._render.DetailedView`); rich adds colour by
kind and, below them, one line that stays current: the superstep, the steps
running and for how long.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import IO, Any

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from temporal_workflows._cli._render import DetailedView, Retry, _clock, _retry_text, _seconds, short
from temporal_workflows._engine.driver import RunStatus
from temporal_workflows._events import (
    ExecutorFailedEvent,
    RequestInfoEvent,
    SuperStepStartedEvent,
    WorkflowEvent,
    WorkflowFailedEvent,
    WorkflowOutputEvent,
    WorkflowWarningEvent,
)

__all__ = ["RichView"]

_STYLES: list[tuple[type[WorkflowEvent], str]] = [
    (SuperStepStartedEvent, "bold"),
    (WorkflowOutputEvent, "green"),
    (RequestInfoEvent, "bold yellow"),
    (WorkflowWarningEvent, "yellow"),
    (ExecutorFailedEvent, "red"),
    (WorkflowFailedEvent, "bold red"),
]


class _Status:
    """The live line; rendered afresh on every refresh, so the time and the spinner move between events."""

    def __init__(self, view: RichView) -> None:
        self.view = view
        self.spinner = Spinner("dots")

    def __rich__(self) -> Spinner:
        self.spinner.update(text=Text(self.view.status_text(), style="dim"))
        return self.spinner


class RichView(DetailedView):
    """:class:`DetailedView` in colour, with a live line: superstep, steps running, time so far."""

    def __init__(self, out: IO[str], run_id: str, prog: str, *, internal: bool = False) -> None:
        super().__init__(out, run_id, prog, internal=internal)
        self.console = Console(file=out, highlight=False)
        self.superstep = 0
        self.started = time.monotonic()
        self.live = Live(_Status(self), console=self.console, refresh_per_second=8, transient=True)
        self.live.start()

    def status_text(self) -> str:
        running = self.timing.running() or [step for step, _ in self.llama_running]
        text = f"superstep {self.superstep}" if self.superstep else "waiting for the run to start"
        if self.llama_seen:  # a LlamaIndex run: no supersteps
            text = "running" if self.llama_running else "no step running"
        if running:
            text += f" · running {', '.join(running[:6])}" + (f" (+{len(running) - 6})" if len(running) > 6 else "")
        return text + f" · {_seconds(time.monotonic() - self.started)}"

    def _line(self, at: datetime | None, text: str, style: str = "") -> None:
        stamp = Text(_clock(at) if at is not None else " " * 12, style="dim")
        self.console.print(stamp + Text("  ") + Text(text, style=style))

    def event(self, ev: WorkflowEvent, at: datetime | None) -> None:
        if isinstance(ev, SuperStepStartedEvent):
            self.superstep = ev.superstep
        style = next((s for kind, s in _STYLES if isinstance(ev, kind)), "")
        for i, line in enumerate(self.lines(ev, at)):
            self._line(at if i == 0 else None, line, style if i == 0 else "cyan")

    def retry(self, r: Retry, at: datetime) -> None:
        self._line(at, f"  retry: {_retry_text(r, at)}", "magenta")

    def note(self, text: str) -> None:
        self._line(None, text, "yellow")

    def done(self, result: dict[str, Any], at: datetime) -> None:
        took = f" in {_seconds((at - self.timing.first).total_seconds())}" if self.timing.first else ""
        style = "bold green" if result.get("status") == RunStatus.COMPLETED else "bold"
        if result.get("kind") == "llama_index":
            text = f"{result['status']}{took}: {short(result.get('result'))}"
        else:
            text = f"{result['status']} after {result['superstep']} supersteps{took}"
        self.console.print(Text(_clock(at), style="dim") + Text("  ") + Text(text, style=style))

    def close(self) -> None:
        self.live.stop()
