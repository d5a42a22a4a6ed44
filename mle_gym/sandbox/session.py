"""One long-lived bash driven by pexpect; every backend runs its commands through it."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence

import pexpect

from mle_gym.errors import ShellDiedError

log = logging.getLogger(__name__)

_PROMPT = re.compile(rb"__MLE_PROMPT_(\d+)_(\d+)__")
# Linux drops what goes beyond 4095 bytes of one line in canonical mode; longer commands
# travel through a file instead.
MAX_INLINE_BYTES = 3000


def ansi_c_quote(text: str) -> str:
    """Quote any string as one bash $'...' word that holds no raw newline."""
    out = ["$'"]
    for ch in text:
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == "'":
            out.append("\\'")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        else:
            out.append(ch)
    out.append("'")
    return "".join(out)


def sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


class CommandOutcome:
    """What the shell reported for one command line (output lives in a file)."""

    __slots__ = ("exit_code", "timed_out", "restarted", "restart_reason", "shell_said")

    def __init__(self, exit_code: int | None, timed_out: bool, restarted: bool, restart_reason: str | None,
                 shell_said: bytes = b""):
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.restarted = restarted
        self.restart_reason = restart_reason
        self.shell_said = shell_said  # what the shell itself printed on the pty before the prompt


class ShellSession:
    """A persistent interactive bash behind a pty.

    The session prints nothing of the commands' output: each command's stdout and stderr
    go to a file the caller names, and the pty only carries a prompt sentinel with the
    command's number and exit status. That keeps the pty small whatever the command prints,
    and makes the prompt the single signal that a command ended (also after an interrupt).

    `spawn_argv` starts bash (locally or through `docker exec -it`); `kill_foreground(pid)`
    stops the process tree of the shell's foreground job through a side channel, where the
    command runs: that is how timeouts kill for real, also inside a container.
    """

    def __init__(
        self,
        spawn_argv: Sequence[str],
        *,
        kill_foreground: Callable[[int], int],
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self._argv = list(spawn_argv)
        self._kill_foreground = kill_foreground
        self._env = env
        self._cwd = cwd
        self._start_timeout_s = start_timeout_s
        self._child: pexpect.spawn | None = None
        self._counter = 0
        self.shell_pid: int | None = None
        self.on_start: list[str] = []  # lines run in every new shell before its first command
        self._said = b""

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self.alive():
            return
        try:
            child = pexpect.spawn(
                self._argv[0], self._argv[1:], env=self._env, cwd=self._cwd,
                echo=False, timeout=self._start_timeout_s, dimensions=(40, 200),
            )
        except pexpect.ExceptionPexpect as exc:
            raise ShellDiedError(
                f"could not start the sandbox shell with {self._argv!r}: {exc}. "
                "Check that the sandbox is running and has bash."
            ) from exc
        # pexpect waits 50 ms before every send and 0.1 ms after every read by default; a
        # persistent shell must not (the read delay alone was a third of a Docker step).
        child.delaybeforesend = None
        child.delayafterread = None
        # ptyprocess also sleeps 0.1 s after closing the pty and after each signal of a
        # terminate: that was a third of a Docker reset. A shell dies at once on SIGHUP.
        child.ptyproc.delayafterclose = 0.005
        child.ptyproc.delayafterterminate = 0.01
        self._child = child
        setup = (
            "stty -echo 2>/dev/null; unset PROMPT_COMMAND; set +o history; HISTFILE=; PS2=; "
            "__mle_n=0; PS1='\\n__MLE_PROMPT_${__mle_n}_$?__\\n'; "
            "echo __MLE_PID_$$__\n"
        )
        child.send(setup.encode())
        try:
            child.expect(rb"__MLE_PID_(\d+)__")
            self.shell_pid = int(child.match.group(1))
            child.expect(_PROMPT)
        except (pexpect.EOF, pexpect.TIMEOUT) as exc:
            before = (child.before or b"")[-500:].decode("utf-8", "replace")
            self.close()
            raise ShellDiedError(
                f"the sandbox shell {self._argv!r} did not answer within {self._start_timeout_s:.0f} s "
                f"(saw: {before!r}). Check that the sandbox is running and bash starts in it."
            ) from exc
        self._counter = 0
        for line in self.on_start:
            self._counter += 1
            child.send(f"__mle_n={self._counter}; {line}\n".encode())
            if self._wait_prompt(self._counter, self._start_timeout_s) is None:
                self.close()
                raise ShellDiedError(f"the sandbox shell did not run its set-up line {line!r}; check the sandbox")

    def alive(self) -> bool:
        return self._child is not None and self._child.isalive()

    @property
    def started(self) -> bool:
        """Started and not closed (it may have died since: see alive())."""
        return self._child is not None

    def close(self) -> None:
        child, self._child = self._child, None
        self.shell_pid = None
        if child is not None:
            try:
                child.close(force=True)
            except (OSError, pexpect.ExceptionPexpect) as exc:  # already gone: nothing to release
                log.debug("closing shell: %s", exc)

    def restart(self) -> None:
        self.close()
        self.start()

    # -- commands ----------------------------------------------------------------------
    def run(self, line_body: str, *, timeout_s: float) -> CommandOutcome:
        """Run one shell line (already redirected by the caller) and wait for its prompt.

        On timeout the foreground job is killed from outside; if the shell still does not
        come back it gets an interrupt, and failing that a restart.
        """
        if not self.alive():
            self.restart()
            return self._run_fresh(line_body, timeout_s, "the previous shell had exited")
        return self._run(line_body, timeout_s)

    def _run_fresh(self, line_body: str, timeout_s: float, reason: str) -> CommandOutcome:
        outcome = self._run(line_body, timeout_s)
        outcome.restarted = True
        outcome.restart_reason = outcome.restart_reason or reason
        return outcome

    def _run(self, line_body: str, timeout_s: float) -> CommandOutcome:
        assert self._child is not None
        self._counter += 1
        n = self._counter
        self._child.send(f"__mle_n={n}; {line_body}\n".encode())
        code = self._wait_prompt(n, timeout_s)
        if code is not None:
            return CommandOutcome(code, False, False, None, self._said)
        if not self.alive():
            reason = "the shell exited (the command ended it, e.g. `exit` or `exec`)"
            self.restart()
            return CommandOutcome(None, False, True, reason)
        # Timed out: stop the job's tree where it runs (SIGINT, then SIGKILL). If the prompt
        # does not come back (nothing was running but the shell itself, e.g. a builtin loop, or
        # the list moved on to its next program), interrupt the shell too. Repeat a few times.
        pid = self.shell_pid or -1
        interrupted = False
        for _ in range(4):
            if self._kill_foreground(pid) and self._wait_prompt(n, 0.5) is not None:
                break
            self._child.sendintr()
            interrupted = True
            if self._wait_prompt(n, 1.0) is not None:
                break
        else:
            self.restart()
            return CommandOutcome(None, True, True, "the shell did not come back after the timeout kill")
        if interrupted and not self._resync():
            self.restart()
            return CommandOutcome(None, True, True, "the shell did not answer after the timeout interrupt")
        return CommandOutcome(None, True, False, None)

    def _resync(self) -> bool:
        """Make sure an interrupt sent to the shell has been handled before the next command.

        Bash acts on SIGINT at its next safe point. When that falls while it parses the next
        line, it drops the start of the line (the prompt counter's update) and runs the rest,
        so the next command would run but never seem to end. A throwaway line that comes back
        with its own prompt number shows the interrupt is spent.
        """
        assert self._child is not None
        for _ in range(5):
            self._counter += 1
            m = self._counter
            self._child.send(f"__mle_n={m}; :\n".encode())
            if self._wait_prompt(m, 0.5) is not None:
                return True
            if not self.alive():
                return False
        return False

    def _wait_prompt(self, n: int, timeout_s: float) -> int | None:
        """Exit status once prompt `n` shows; None on timeout or a dead shell."""
        assert self._child is not None
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            remaining = deadline - time.monotonic()
            try:
                self._child.expect(_PROMPT, timeout=max(remaining, 0.0))
            except pexpect.TIMEOUT:
                return None
            except pexpect.EOF:
                return None
            if int(self._child.match.group(1)) == n:
                self._said = (self._child.before or b"")[-2000:]
                return int(self._child.match.group(2))
            # An older prompt (an interrupt after the command had already ended): skip it.
