"""`mle-gym run`'s progress display: episodes done, medals so far, and what each running episode is doing.

On a terminal it is a `rich` live view, redrawn in place: one row per running episode (steps
taken, time spent, the last tool it called) under a bar of episodes done with the medals and
crashes so far. A budget bar would stay empty for most of a 24-hour episode, so there is none:
what moves is the step count and the last tool. Elsewhere (a log file, CI) it writes one plain
line per episode start and end, and a heartbeat line while episodes run.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

from mle_gym.runs.rates import EpisodeRecord


def outcome_text(rec: EpisodeRecord) -> str:
    """One line on how an episode ended: its score and medal, why it is invalid, or why it crashed."""
    if rec.status != "finished":
        graded = (f"; on disk: medal {rec.grade.get('medal')}, valid {rec.grade.get('valid_submission')}"
                  if rec.grade is not None else "; not gradable")
        return f"{rec.status.upper()} {(rec.error or '')[:120]}{graded}"
    grade = rec.grade or {}
    if not grade.get("valid_submission"):
        return f"invalid submission ({(grade.get('reason') or 'no grade')[:80]})"
    return f"score {grade.get('score'):.5g}, medal {grade.get('medal')}"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


@dataclass
class _Running:
    max_steps: int
    time_limit_s: float
    started: float
    steps: int = 0
    tool: str = ""


class Progress:
    """Progress of a run on `stream` (stderr by default); events come from the episodes' threads."""

    def __init__(self, total: int, *, stream: TextIO | None = None, tty: bool | None = None,
                 refresh_s: float = 0.5, heartbeat_s: float = 60.0, max_rows: int = 20) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.refresh_s = refresh_s
        self.heartbeat_s = heartbeat_s
        self.max_rows = max_rows
        self._running: dict[str, _Running] = {}
        self._done = self._errors = self._aborted = self._medals = 0
        self._started = time.monotonic()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._closed = False
        self._live: Any = None
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            self._console = Console(file=self.stream, force_terminal=True, highlight=False, soft_wrap=True)
            self._live = Live(console=self._console, get_renderable=self._view, auto_refresh=False,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
        self._ticker.start()

    # -- events -----------------------------------------------------------------------------
    def start(self, key: str, max_steps: int, time_limit_s: float) -> None:
        with self._lock:
            self._running[key] = _Running(max_steps, time_limit_s, time.monotonic())
            if not self.tty:
                self._line(f"[{self._done}/{self.total}] start {key}")
            self._refresh()

    def step(self, key: str, steps: int, info: dict[str, Any]) -> None:
        with self._lock:
            ep = self._running.get(key)
            if ep is not None:
                ep.steps, ep.tool = steps, str(info.get("tool") or "")

    def finish(self, key: str, rec: EpisodeRecord) -> None:
        with self._lock:
            self._running.pop(key, None)
            self._done += 1
            self._errors += rec.status == "crashed"
            self._aborted += rec.status == "aborted"
            self._medals += bool((rec.grade or {}).get("any_medal"))
            spent = ""
            if rec.usage and rec.usage.get("total_tokens") is not None:
                spent = f", {rec.usage['total_tokens']:,} tokens"
                spent += f", ${rec.cost_usd:.4f}" if rec.cost_usd is not None else ""
            mark = "✗" if rec.status != "finished" else "✓"
            self._line(f"[{self._done}/{self.total}] {mark} {key}: {outcome_text(rec)} "
                       f"({rec.steps} steps, {rec.duration_s:.1f}s{spent})")
            self._refresh()

    def close(self) -> None:
        self._stop.set()
        if self._ticker.is_alive() and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=2)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._live is not None:
                self._live.stop()
            self.stream.write(f"{self._summary()} in {time.monotonic() - self._started:.1f}s\n")
            self.stream.flush()

    # -- drawing (with the lock held) -------------------------------------------------------
    def _summary(self) -> str:
        return (f"{self._done}/{self.total} episodes done, {self._medals} with a medal"
                f"{f', {self._errors} crashed' if self._errors else ''}"
                f"{f', {self._aborted} aborted' if self._aborted else ''}")

    def _line(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _refresh(self) -> None:
        if self._live is not None and not self._closed:
            self._live.refresh()

    def _view(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            now = time.monotonic()
            table = Table(box=None, pad_edge=False, show_edge=False, expand=False)
            for name, justify in (("running episode", "left"), ("steps", "right"), ("time", "right"),
                                  ("last tool", "left")):
                table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
            rows = sorted(self._running.items(), key=lambda kv: kv[1].started)
            for key, ep in rows[: self.max_rows]:
                table.add_row(key, f"{ep.steps}/{ep.max_steps}", _clock(now - ep.started), ep.tool or "-")
            if len(rows) > self.max_rows:
                table.add_row(f"... and {len(rows) - self.max_rows} more", "", "", "")
            overall = Table.grid(padding=(0, 1))
            overall.add_row(ProgressBar(total=max(self.total, 1), completed=self._done, width=30),
                            Text(f"{self._summary()}, {len(rows)} running, {_clock(now - self._started)}"))
            return Group(table, overall) if rows else overall

    def _tick(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.wait(self.refresh_s):
            with self._lock:
                if self._closed:
                    return
                if self.tty:
                    self._refresh()
                elif self._running and time.monotonic() - last_beat >= self.heartbeat_s:
                    last_beat = time.monotonic()
                    running = ", ".join(f"{k} ({e.steps} steps, last {e.tool or '-'})" for k, e in self._running.items())
                    self._line(f"[{self._done}/{self.total}] running: {running}")
