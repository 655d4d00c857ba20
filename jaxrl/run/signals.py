"""Signals of a training run: SIGINT (Ctrl-C) and SIGTERM (as schedulers send).

The first one lets the step in flight (a compiled chunk, or a host update) finish; the driver
then checkpoints it and stops with :class:`TrainingInterrupted` (exit ``128 + signal``, 130 for
Ctrl-C). A second one aborts at once. Before the first step starts (setup, compile) an
interrupt stops at once. The compile and each step run on a worker thread
(:func:`in_worker`) so that the main thread, where Python runs signal handlers, is never stuck
in XLA. Imports no JAX.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class TrainingInterrupted(KeyboardInterrupt):
    """A signal stopped training; :attr:`message` says what was saved and how to go on.

    A ``KeyboardInterrupt``, so that code catching Ctrl-C around a training call still does.
    """

    def __init__(
        self,
        signum: int,
        run_dir: Path,
        saved: int | None,
        *,
        graceful: bool,
        trained: bool,
        removed: bool = False,
    ):
        super().__init__(signum)
        self.signum = signum  # the signal that stopped the run (the exit status is 128 + it)
        self.run_dir = run_dir
        self.saved = saved  # newest checkpointed update, None: no checkpoint at all
        self.graceful = graceful  # True: the step in flight was finished and saved
        self.trained = trained  # False: stopped before any step of this process ran
        self.removed = removed  # True: the run directory this call created was removed

    @property
    def message(self) -> str:
        """One line: what happened, what is on disk, the command that goes on."""
        name = signal.Signals(self.signum).name
        resume = f"resume with --resume {self.run_dir}"
        if self.graceful:
            return f"{name}: saved update {self.saved}; {resume}"
        if self.removed:
            return (
                f"{name} before training started: nothing trained, nothing saved; "
                f"removed {self.run_dir}, which this run had created"
            )
        if not self.trained and self.saved is None:
            return (
                f"{name} before training started: nothing trained, nothing saved; "
                f"--resume {self.run_dir} starts it from update 0 with its saved config, "
                f"or delete {self.run_dir}"
            )
        if not self.trained:
            return f"{name} before training went on: checkpoint update {self.saved} kept; {resume}"
        last = (
            f"last checkpoint update {self.saved}; {resume}"
            if self.saved is not None
            else f"no checkpoint; --resume {self.run_dir} starts from update 0"
        )
        return f"{name} again: aborted, the chunk in flight is lost; {last}"


def interrupt_ignored() -> bool:
    """Whether this process ignores SIGINT (a background job of a script, ``nohup``)."""
    return (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )


def stop_hint() -> str:
    """How to stop the run so that it saves the step in flight (the summary's words)."""
    if interrupt_ignored():
        return f"SIGINT is ignored here: kill -TERM {os.getpid()} saves the chunk in flight"
    return "Ctrl-C or SIGTERM saves the chunk in flight"


class Signals:
    """SIGINT/SIGTERM handlers for the time a run trains (main thread only).

    Before :attr:`training` is set (setup, compile) a signal raises ``KeyboardInterrupt`` at
    once. While training, the first one only sets :attr:`signum` (the driver stops after the
    step in flight) and a second raises, unless it comes within :attr:`GRACE_S` of the
    first: GNU ``timeout`` sends its signal to the command and then to the command's process
    group, so ``timeout -s INT`` delivers SIGINT twice at once (that abort lost a 60-minute
    run's last 4M env steps). A signal the process ignores (``nohup``, a background job)
    stays ignored.
    """

    GRACE_S = 1.0  # a repeat this soon after the first signal is the same request

    def __init__(self) -> None:
        self.signum: int | None = None  # first signal received
        self.first_at = 0.0  # time.monotonic() of the first signal
        self.training = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        del frame
        first = self.signum is None
        now = time.monotonic()
        if first:
            self.signum, self.first_at = signum, now
        elif self.training and now - self.first_at < self.GRACE_S:
            return  # the same stop request delivered twice (timeout: command, then group)
        if first and self.training:
            name = signal.Signals(signum).name
            notice = f"{name}: finishing the chunk in flight, then saving it; {name} again aborts"
            _notice(notice)
            return
        raise KeyboardInterrupt


def _notice(text: str) -> None:
    """``text`` on its own line of stderr, the progress bar redrawn below it."""
    try:
        from tqdm import tqdm  # noqa: PLC0415

        tqdm.write(text, file=sys.stderr)
    except RuntimeError:  # the handler interrupted a write to stderr (reentrant call)
        os.write(2, f"\n{text}\n".encode())


def in_worker(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a worker thread while the main thread waits, able to run handlers.

    Python runs a signal handler only when the main thread executes bytecode, and an XLA
    compile or a running chunk holds it in C++ for seconds to minutes. The main thread waits
    on an ``Event`` in 0.1-second polls, so a handler runs within 0.1 s whichever thread the
    kernel handed the signal to; if it raises, the worker is left to finish on its own (a
    daemon: it does not hold the exit).
    """
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # noqa: BLE001 - re-raised on the main thread
            box["error"] = err
        finally:
            done.set()

    threading.Thread(target=work, name="jaxrl-worker", daemon=True).start()
    # Poll: a signal the kernel hands to another thread (XLA's, the worker) does not interrupt
    # this wait, and its Python handler runs only when the main thread wakes. Without a timeout
    # a held chunk never woke it (a CI run hung until its timeout on a lost SIGINT).
    while not done.wait(0.1):
        pass
    if "error" in box:
        raise box["error"]
    return box["value"]


def worker_busy() -> bool:
    """Whether a compile or step abandoned by an interrupt still runs (exit with os._exit)."""
    return any(t.name == "jaxrl-worker" and t.is_alive() for t in threading.enumerate())
