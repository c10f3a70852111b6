"""One writer at a time: a lock on a run directory or a dataset being written.

    with held(run_dir / LOCK_NAME, f"the run {run_dir}"):
        ...   # only this process writes in run_dir

The lock is an advisory `flock` on a small file that also names its holder (pid,
host, command, start time). The operating system releases a `flock` when its holder
exits in any way, kill -9 included, so a lock never outlives its process. A second
process meets `InUseError`, naming the holder. A lock file still naming a holder
whose lock is gone (the holder died) is stale: it is taken over with a warning.
The lock file itself stays (emptied) after a clean exit: removing it would let a
third process lock a new file while a second still holds the old one.

Where the file system has no `flock` (some network file systems), the holder is
checked by its pid instead: on the same host a holder whose process is gone is
stale; a holder on another host is trusted, and the error says how to clear it.

Locks are re-entrant within one process: holding a path already held is a no-op,
so a command may hold a dataset while the function that saves it holds it too.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from coplay.core.errors import StorageError

LOCK_NAME = ".coplay.lock"

_HELD: dict[str, int] = {}          # resolved lock path -> how many times this process holds it


class InUseError(StorageError):
    """Another live process holds the run directory or dataset."""


class StaleLockWarning(UserWarning):
    """A lock left by a process that is gone was taken over."""


def _me() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join([os.path.basename(sys.argv[0] or "python"), *sys.argv[1:]])[:300]}


def _read(fd: int) -> dict | None:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    if not raw.strip():
        return None
    try:
        holder = json.loads(raw)
    except ValueError:
        return {"pid": "?", "host": "?", "note": "unreadable lock file"}
    return holder if isinstance(holder, dict) else {"pid": "?", "host": "?"}


def _write(fd: int, holder: dict | None) -> None:
    os.ftruncate(fd, 0)
    if holder is not None:
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(holder).encode())
    os.fsync(fd)


def describe(holder: dict) -> str:
    text = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
    if holder.get("command"):
        text += f" (`{holder['command']}`, since {holder.get('since', '?')})"
    return text


def _alive(holder: dict) -> bool:
    """Whether the holder may still run: a pid of this host that exists, or any other host's."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder["pid"]), 0)
    except (ProcessLookupError, ValueError, KeyError, TypeError):
        return False
    except PermissionError:
        return True
    return True


def _flock(fd: int) -> bool | None:
    """Take the flock: True, False when another holds it, None where the file system has none."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as e:
        if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return None
        raise


@contextmanager
def held(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold the lock file `path` (made if missing) for `what` (e.g. "the run runs/x") inside;
    `InUseError` at once when another live process holds it."""
    path = Path(path)
    key = str(path.resolve())
    if _HELD.get(key):
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StorageError(f"cannot make the lock file {path} for {what}: {e.strerror or e}") from None
    try:
        got = _flock(fd)
        holder = _read(fd)
        if got is False or (got is None and holder is not None and _alive(holder)):
            shown = describe(holder) if holder else "another process"
            clear = "" if got is False else (f"; if that process is gone, delete {path}")
            raise InUseError(f"{what} is in use by {shown}: one process at a time may write it. Wait for that "
                             f"process to finish, or stop it{clear}")
        if holder is not None and holder.get("pid") != os.getpid():
            warnings.warn(f"{what} was left locked by {describe(holder)}, which is gone; taking it over",
                          StaleLockWarning, stacklevel=3)
        _write(fd, _me())
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
            try:
                _write(fd, None)
            except OSError:
                pass          # a full disk must not hide what happened inside; the flock goes with the fd
    finally:
        os.close(fd)
