"""The run directory: where a run lives, whether it can be written, how it is
resumed, and what a failed write or Ctrl-C leaves of it.

    new_run_dir        a fresh `<time>-<algo>-<env>` directory, never somebody else's
    open_run_dir       a fresh one, or a run directory to resume, checked writable
    hold_run_dir       the run directory held by this process alone (`coplay.core.lock`)
    storage_errors     a write that fails midway becomes a StorageError naming the resume command
    interrupt_guard    first Ctrl-C finishes the chunk and checkpoints; a second stops at once
"""

from __future__ import annotations

import errno
import re
import shlex
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from coplay.core.errors import CoplayError, StorageError
from coplay.core.lock import LOCK_NAME, held
from coplay.experiment import checkpoint


def portable(name: str) -> str:
    """`name` as part of a file name on every system: `text:kuhn_poker` -> `text_kuhn_poker`
    (a `:` is refused on Windows and read as `host:path` by rsync and scp, `name:path` by TensorBoard)."""
    return re.sub(r"[^A-Za-z0-9._=+-]+", "_", name)


def new_run_dir(out_dir: str | Path, name: str | None, algo: str, env: str) -> Path:
    """Make and return a new run directory under `out_dir`: `name`, by default
    `<time>-<algo>-<env>`, with `-1`, `-2`, ... appended while that exists.
    One that cannot be made or written in is refused (`StorageError`)."""
    out = Path(out_dir)
    name = name or f"{datetime.now():%Y%m%d-%H%M%S}-{algo}-{portable(env)}"
    path = out / name
    i = 1
    try:
        out.mkdir(parents=True, exist_ok=True)
        while True:  # never write into somebody else's run, even one made a moment ago by another process
            try:
                path.mkdir()
                break
            except FileExistsError:
                path = out / f"{name}-{i}"
                i += 1
    except OSError as e:
        raise StorageError(f"cannot make the run directory {path} (out_dir={str(out_dir)!r}): "
                           f"{reason(e)}") from None
    try:
        check_writable(path)
    except StorageError:
        path.rmdir()
        raise
    return path


def open_run_dir(out_dir: str | Path, name: str | None, algo: str, env: str, resume: Path | None) -> Path:
    """`resume` checked as a run directory that can be written in, or a new run directory."""
    if resume is None:
        return new_run_dir(out_dir, name, algo, env)
    for directory in (resume, resume / "checkpoints"):
        if directory.exists() and not directory.is_dir():
            raise StorageError(f"{directory} is not a directory; a run keeps its checkpoints in one")
        if directory.is_dir():
            check_writable(directory)
    return resume


def hold_run_dir(run_dir: Path):
    """Hold `run_dir` for this process alone while inside: a second `coplay train` on it (a
    resume, or the same `name`) is refused at once, naming this one (`InUseError`)."""
    return held(run_dir / LOCK_NAME, f"the run directory {run_dir}")


def check_writable(directory: Path) -> None:
    """Refuse a directory in which no file can be written (`StorageError`)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise StorageError(f"cannot write in {directory}: {reason(e)}") from None


def reason(e: OSError) -> str:
    return e.strerror or str(e)


def resume_command(run_dir: Path) -> str:
    """The command that resumes `run_dir`, quoted for a shell."""
    return f"coplay train resume={shlex.quote(str(run_dir))}"


@contextmanager
def storage_errors(run_dir: Path) -> Iterator[None]:
    """A write that fails inside (a full disk) is raised as a `StorageError` that says
    what was kept and how to resume."""
    try:
        yield
    except OSError as e:
        if isinstance(e, CoplayError):
            raise
        last = checkpoint.list_checkpoints(run_dir / "checkpoints")
        kept = f"the newest checkpoint is {last[-1]}" if last else "no checkpoint was written yet"
        where = f" {e.filename}" if e.filename else ""
        fix = "Make room" if e.errno in (errno.ENOSPC, errno.EDQUOT) else "Fix that"
        raise StorageError(f"writing{where} in {run_dir} failed: {reason(e)}; {kept}. {fix} and resume "
                           f"with: {resume_command(run_dir)}") from e


class Interrupt:
    """First Ctrl-C: finish the chunk, checkpoint, stop. Second: stop at once."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\ninterrupt: finishing this chunk and saving a checkpoint (Ctrl-C again to abort)",
              file=sys.stderr, flush=True)


@contextmanager
def interrupt_guard() -> Iterator[Interrupt]:
    """An `Interrupt` installed as the SIGINT handler inside (in the main thread; elsewhere
    the handler is not installed and `requested` stays false)."""
    interrupt = Interrupt()
    try:
        previous = signal.signal(signal.SIGINT, interrupt)
    except ValueError:  # not the main thread: run without the handler
        yield interrupt
        return
    try:
        yield interrupt
    finally:
        signal.signal(signal.SIGINT, previous)
