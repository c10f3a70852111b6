"""Checkpoints in a safe format (msgpack via flax.serialization: no pickle, no
code runs on load). The state is stored leaf by leaf under its pytree path, so
any pytree (flax or chex dataclasses, replay-buffer states, dicts) round-trips
into the structure of a template. Files are written atomically: the bytes go to a temporary file in the
same directory, are flushed to disk, and only then renamed over the final name,
so a crash or interrupt leaves either the old checkpoint or the new one, never a
torn file. Each checkpoint carries the hash of the config that produced it."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import serialization

from coplay.core.errors import CheckpointError

_NAME = re.compile(r"^ckpt_(\d{8})\.msgpack$")


def atomic_write(path: Path, data: bytes) -> None:
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


def save(directory: Path, chunk: int, state: Any, meta: dict, keep: int = 2) -> Path:
    """Write `state` (any pytree of arrays) as checkpoint number `chunk`; keep the newest `keep`."""
    directory = Path(directory)
    host = jax.device_get(state)
    leaves = {jax.tree_util.keystr(path): np.asarray(leaf)
              for path, leaf in jax.tree_util.tree_flatten_with_path(host)[0]}
    payload = {"meta": json.dumps(meta, sort_keys=True), "state": leaves}
    path = directory / f"ckpt_{chunk:08d}.msgpack"
    atomic_write(path, serialization.msgpack_serialize(payload))
    for old in list_checkpoints(directory)[:-keep] if keep > 0 else []:
        old.unlink(missing_ok=True)
    return path


def list_checkpoints(directory: Path) -> list[Path]:
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name))


def load(path: Path, target: Any) -> tuple[Any, dict]:
    """Restore a checkpoint into the structure of `target` (same pytree, same shapes)."""
    path = Path(path)
    try:
        payload = serialization.msgpack_restore(path.read_bytes())
        meta = json.loads(payload["meta"])
        stored = payload["state"]
    except Exception as e:  # noqa: BLE001 - any decoding failure means an unusable file
        raise CheckpointError(f"checkpoint {path} cannot be read: {e}") from e
    paths, treedef = jax.tree_util.tree_flatten_with_path(target)
    leaves = []
    for key_path, want in paths:
        name = jax.tree_util.keystr(key_path)
        if not isinstance(stored, dict) or name not in stored:
            raise CheckpointError(f"checkpoint {path} has no entry {name}: it was written by a different config")
        got = stored[name]
        if np.shape(want) != np.shape(got):
            raise CheckpointError(
                f"checkpoint {path} holds {name} of shape {np.shape(got)} where the config expects "
                f"{np.shape(want)}: it was written by a different config"
            )
        leaves.append(np.asarray(got, dtype=np.asarray(want).dtype))
    if len(stored) != len(paths):
        raise CheckpointError(f"checkpoint {path} holds {len(stored)} arrays where the config expects "
                              f"{len(paths)}: it was written by a different config")
    return jax.tree_util.tree_unflatten(treedef, leaves), meta


def latest(directory: Path, target: Any) -> tuple[Any, dict, Path]:
    """The newest readable checkpoint in `directory` (an unreadable newest one is skipped)."""
    errors = []
    for path in reversed(list_checkpoints(directory)):
        try:
            state, meta = load(path, target)
            return state, meta, path
        except CheckpointError as e:
            errors.append(str(e))
    detail = ("; ".join(errors)) if errors else "none found"
    raise CheckpointError(f"no usable checkpoint in {directory}: {detail}")
