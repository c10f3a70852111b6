"""Checkpoints in a safe format (msgpack via flax.serialization: no pickle, no
code runs on load). The state is stored leaf by leaf under its pytree path, so
any pytree (flax or chex dataclasses, replay-buffer states, dicts) round-trips
into the structure of a template. Each checkpoint carries the hash of the
config that produced it.

Nothing is lost and nothing damaged is used:

- Files are written atomically: the bytes go to a temporary file in the same
  directory, are flushed to disk, and only then renamed over the final name,
  so a crash or interrupt leaves either the old checkpoint or the new one,
  never a torn file. A temporary file that a killed write left behind is
  removed by `remove_temporaries` (at every checkpoint, and when a run resumes).
- The checkpoint's contents are stored with their SHA-256 digest, checked on
  load: a file whose bytes changed on disk is refused (`CheckpointError`), and
  `latest` falls back to the newest intact checkpoint, with a
  `CheckpointWarning` naming every file it skipped. Checkpoints written before
  digests were stored (no `sha256` entry) still load, unchecked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from coplay.core.errors import CheckpointConfigError, CheckpointError

_NAME = re.compile(r"^ckpt_(\d{8})\.msgpack$")
_TEMPORARY = re.compile(r"^\..+\.\w{8}\.tmp$")  # what `atomic_write` writes before its rename
FORMAT = 2  # 1: {"meta", "state"}; 2: {"format", "sha256", "body"} with body the format-1 bytes


class CheckpointWarning(UserWarning):
    """A damaged or unusable checkpoint was skipped for an older one."""


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a crash leaves the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file ordinary permissions
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_temporaries(directory: Path) -> list[Path]:
    """Remove the temporary files that killed `atomic_write`s left in `directory`."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    left = [p for p in directory.iterdir() if _TEMPORARY.match(p.name) and p.is_file()]
    for p in left:
        p.unlink(missing_ok=True)
    return left


def save(directory: Path, chunk: int, state: Any, meta: dict, keep: int = 2) -> Path:
    """Write `state` (any pytree of arrays) as checkpoint number `chunk`; keep the newest `keep`."""
    directory = Path(directory)
    remove_temporaries(directory)
    host = jax.device_get(state)
    leaves = {jax.tree_util.keystr(path): np.asarray(leaf)
              for path, leaf in jax.tree_util.tree_flatten_with_path(host)[0]}
    body = serialization.msgpack_serialize({"meta": json.dumps(meta, sort_keys=True), "state": leaves})
    payload = {"format": FORMAT, "sha256": hashlib.sha256(body).hexdigest(), "body": body}
    path = directory / f"ckpt_{chunk:08d}.msgpack"
    atomic_write(path, serialization.msgpack_serialize(payload))
    for old in list_checkpoints(directory)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return path


def _contents(path: Path) -> dict:
    """The checkpoint's `{"meta", "state"}`, its digest checked where it has one."""
    try:
        payload = serialization.msgpack_restore(path.read_bytes())
    except Exception as e:  # noqa: BLE001 - any decoding failure means an unusable file
        raise CheckpointError(f"checkpoint {path} cannot be read: {e}") from e
    if not isinstance(payload, dict):
        raise CheckpointError(f"checkpoint {path} cannot be read: it holds a {type(payload).__name__}, "
                              f"not a checkpoint")
    if "body" not in payload:  # format 1: written before digests were stored
        return payload
    body, digest = payload.get("body"), payload.get("sha256")
    if not isinstance(body, bytes) or hashlib.sha256(body).hexdigest() != digest:
        raise CheckpointError(f"checkpoint {path} is damaged: its contents do not match the SHA-256 digest "
                              f"stored with them")
    try:
        return serialization.msgpack_restore(body)
    except Exception as e:  # noqa: BLE001 - intact bytes that do not decode: written by something else
        raise CheckpointError(f"checkpoint {path} cannot be read: {e}") from e


def arrays(path: Path) -> dict[str, Any]:
    """A checkpoint's state as arrays by name (`.params['agent']...`), read without
    the config that wrote it."""
    stored = _contents(Path(path)).get("state")
    if not isinstance(stored, dict):
        raise CheckpointError(f"checkpoint {path} cannot be read: it holds no state")
    return stored


def list_checkpoints(directory: Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name))


def load(path: Path, target: Any, check: Callable[[dict, Path], None] | None = None,
         may_be_new: Callable[[str], bool] | None = None) -> tuple[Any, dict]:
    """Restore a checkpoint into the structure of `target` (same pytree, same shapes).
    `check(meta, path)`, where given, vets the checkpoint's meta first (e.g. that it
    was written by the same config, raising `CheckpointConfigError` otherwise).
    Leaves of `target` that the checkpoint lacks and `may_be_new(name)` accepts
    (state that a newer coplay added, with a meaningful starting value) keep
    `target`'s value; any other difference in structure is refused."""
    path = Path(path)
    payload = _contents(path)
    try:
        meta = json.loads(payload["meta"])
        stored = payload["state"]
    except Exception as e:  # noqa: BLE001 - any decoding failure means an unusable file
        raise CheckpointError(f"checkpoint {path} cannot be read: {e}") from e
    if check is not None:
        check(meta, path)
    paths, treedef = jax.tree_util.tree_flatten_with_path(target)
    leaves = []
    added = 0
    for key_path, want in paths:
        name = jax.tree_util.keystr(key_path)
        if isinstance(stored, dict) and name not in stored and may_be_new is not None and may_be_new(name):
            leaves.append(np.asarray(want))
            added += 1
            continue
        if not isinstance(stored, dict) or name not in stored:
            raise CheckpointError(f"checkpoint {path} has no entry {name}: it was written by a different config")
        got = stored[name]
        if np.shape(want) != np.shape(got):
            raise CheckpointError(
                f"checkpoint {path} holds {name} of shape {np.shape(got)} where the config expects "
                f"{np.shape(want)}: it was written by a different config"
            )
        leaves.append(np.asarray(got, dtype=np.asarray(want).dtype))
    if len(stored) != len(paths) - added:
        raise CheckpointError(f"checkpoint {path} holds {len(stored)} arrays where the config expects "
                              f"{len(paths) - added}: it was written by a different config")
    return jax.tree_util.tree_unflatten(treedef, leaves), meta


def latest(directory: Path, target: Any, check: Callable[[dict, Path], None] | None = None,
           may_be_new: Callable[[str], bool] | None = None) -> tuple[Any, dict, Path]:
    """The newest usable checkpoint in `directory`; newer ones that are damaged or
    unusable are skipped with a `CheckpointWarning` that names them. One written by
    another config (`check` raising `CheckpointConfigError`, see `load`) is refused:
    an older one would be from that config too. `may_be_new`: see `load`."""
    errors = []
    for path in reversed(list_checkpoints(directory)):
        try:
            state, meta = load(path, target, check, may_be_new)
        except CheckpointConfigError:
            raise
        except CheckpointError as e:
            errors.append(str(e))
            continue
        for error in errors:
            warnings.warn(f"{error}; using the older {path.name} instead", CheckpointWarning, stacklevel=2)
        return state, meta, path
    detail = ("; ".join(errors)) if errors else "none found"
    raise CheckpointError(f"no usable checkpoint in {directory}: {detail}")
