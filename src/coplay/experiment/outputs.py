"""What a command writes, checked before it does its work: a tournament, an
evaluation or a sweep that could not write its results refuses to start, rather
than finishing and then failing.

    check_output(path, "dir", what="tournament directory")    files go in this directory
    check_output(path, "file", what="episode animation")      this file is written (replaced atomically)

A path is refused (`StorageError`, naming the path, what it is for and why) when
it is a file where a directory is needed or the other way round, when the
directory it needs cannot be made (a regular file in the way) or written in
(permissions, `/proc`, a read-only file system), or when it is a file that the
command must not replace. The check makes and changes nothing: the command
makes its directories when it writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from coplay.core.errors import StorageError, unknown_name
from coplay.experiment.rundir import check_writable, reason

KINDS = ("dir", "file")


def check_output(path: str | os.PathLike, kind: Literal["dir", "file"] = "dir", *, what: str = "output",
                 overwrite: bool = True, fix: str = "") -> Path:
    """`path` checked as somewhere this process can write a directory of files (`kind="dir"`,
    an existing directory or one that can be made) or one file (`kind="file"`; an existing
    one only where `overwrite`); returned as a `Path`. `what` names it in the refusal, and
    `fix`, where given, ends it (another way to run the command)."""
    if kind not in KINDS:
        raise unknown_name("output kind", kind, KINDS)
    path = Path(path)
    try:
        _check(path, kind, what, overwrite)
    except StorageError as e:
        raise StorageError(f"{e}; {fix}" if fix else str(e)) from None
    return path


def _check(path: Path, kind: str, what: str, overwrite: bool) -> None:
    try:
        if kind == "dir" and path.exists() and not path.is_dir():
            raise StorageError(f"the {what} {path} is a file, and a directory is needed there: name a directory "
                               "(one that does not exist yet is made)")
        if kind == "file" and path.is_dir():
            raise StorageError(f"the {what} {path} is a directory, and a file is needed there")
        if kind == "file" and path.exists() and not overwrite:
            raise StorageError(f"the {what} {path} exists already and is not replaced: name another, or remove it")
        directory = path if kind == "dir" else path.parent
        existing = directory
        while not existing.exists() and not existing.is_symlink():   # the nearest part of the path that exists
            existing = existing.parent
        if not existing.is_dir():
            raise StorageError(f"cannot make the {what} {path}: {existing} is not a directory")
    except OSError as e:
        if isinstance(e, StorageError):
            raise
        raise StorageError(f"cannot reach the {what} {path}: {reason(e)}") from None
    try:
        check_writable(existing)
    except StorageError as e:
        raise StorageError(f"cannot write the {what} {path}: {e}") from None
