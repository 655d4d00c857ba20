"""``python tests/held_train.py WHERE [python -m jaxrl.train arguments]``: training, held once.

``WHERE`` is ``compile`` (the compile of the chunk step) or ``chunk:N`` (the N-th chunk this
process runs, from 1). When the run gets there it prints ``held`` and waits for a line on
stdin before going on, so a test knows where the run is when it sends a signal, without
sleeping: synchronised on a printed line, never on the clock. The hold runs where the real
compile or chunk runs (the worker thread), so the main thread is as free as in a real run.
"""

from __future__ import annotations

import signal
import sys

import jaxrl.commands.train as train_module
from jaxrl.run import chunk_source

# A background job of a non-interactive shell (CI) inherits SIGINT ignored, and jaxrl.run.driver
# leaves an ignored signal ignored; take it back, as an interactive terminal has it.
signal.signal(signal.SIGINT, signal.default_int_handler)

WHERE = sys.argv[1]
_calls = {"chunk": 0}


def _hold() -> None:
    print("held", flush=True)
    sys.stdin.readline()


_compile = chunk_source._compile
_run_chunk = chunk_source._run_chunk


def held_compile(*args):
    if WHERE == "compile":
        _hold()
    return _compile(*args)


def held_chunk(*args):
    _calls["chunk"] += 1
    if WHERE == f"chunk:{_calls['chunk']}":
        _hold()
    return _run_chunk(*args)


chunk_source._compile = held_compile
chunk_source._run_chunk = held_chunk

if __name__ == "__main__":
    sys.exit(train_module.main(sys.argv[2:]))
