"""Progress for a person at a terminal: per phase, tasks done, documents, MB/s and ETA. Without a
terminal (CI, logs) one summary line per phase instead of a redrawn bar."""
from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from ylink_data.core.redaction import redact_text


class RunProgress:
    def __init__(self, enabled: bool | None = None):
        self.console = Console(stderr=True, soft_wrap=True)  # log lines stay whole in files and CI
        self.live = sys.stderr.isatty() if enabled is None else enabled
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[files]}"), TextColumn("{task.fields[docs]:>9,} docs"),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(), console=self.console, disable=not self.live, transient=False)
        self._started: dict[int, float] = {}
        self._totals: dict[int, list] = {}
        self._before: dict[int, int] = {}  # tasks a resumed run found done
        self._shown: dict[int, str] = {}  # the bar's label
        self._waiting: str | None = None

    def __enter__(self) -> "RunProgress":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def phase(self, label: str, total: int, already_done: int = 0) -> int:
        """A phase of `total` tasks, `already_done` of them by an earlier attempt of this run: the
        counts include those (where the run stands), and say how many they were."""
        shown = f"{label} ({already_done} done before)" if already_done else label
        handle = self.progress.add_task(shown, total=total, completed=already_done, docs=0, rate="", files="")
        self._started[handle] = time.perf_counter()
        self._totals[handle] = [label, total, already_done, 0, 0, 0]
        self._before[handle] = already_done
        self._shown[handle] = shown
        return handle

    def advance(self, handle: int, docs: int = 0, nbytes: int = 0, files: int = 0) -> None:
        t = self._totals[handle]
        t[2] += 1
        t[3] += docs
        t[4] += nbytes
        t[5] += files
        elapsed = max(time.perf_counter() - self._started[handle], 1e-9)
        rate = f"{t[4] / elapsed / 1e6:6.1f} MB/s" if t[4] else ""
        self.progress.update(handle, advance=1, docs=t[3], rate=rate, files=f"{t[5]:,} files" if t[5] else "")

    def finish(self, handle: int) -> None:
        label, total, done, docs, nbytes, files = self._totals[handle]
        elapsed = time.perf_counter() - self._started[handle]
        if not self.live:
            rate = f", {nbytes / elapsed / 1e6:.1f} MB/s" if nbytes and elapsed > 0 else ""
            read = f", {files:,} files" if files else ""
            now = f" ({self._before[handle]} done before this run)" if self._before[handle] else ""
            self.console.print(f"{label}: {done}/{total} tasks{now}{read}, {docs:,} docs in {elapsed:.1f}s{rate}",
                               highlight=False)

    def waiting(self, message: str | None) -> None:
        """What the run waits for, a CPU (None: no longer), after the current phase's bar; without a
        terminal one line when the wait starts and one when it ends."""
        if self.live and self._totals:
            handle = max(self._totals)
            label = self._shown[handle]
            self.progress.update(handle, description=f"{label} [{message}]" if message else label)
        elif message is not None and self._waiting is None:
            self.console.print(redact_text(message), highlight=False)
        elif message is None and self._waiting is not None:
            self.console.print("a CPU is available again: the run goes on", highlight=False)
        self._waiting = message

    def note(self, message: str) -> None:
        self.console.print(redact_text(message), highlight=False)  # notes name output URLs
