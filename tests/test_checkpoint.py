"""Checkpoints: safe format, atomic writes, the last good one survives."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

from coplay.core.errors import CheckpointError
from coplay.experiment import checkpoint
from coplay.experiment.checkpoint import CheckpointWarning


def _tree(x=1.0):
    return {"a": jnp.full((3,), x), "b": {"c": jnp.arange(4, dtype=jnp.int32)}}


def test_save_load_round_trip(tmp_path):
    checkpoint.save(tmp_path, 0, _tree(2.0), {"chunk": 0})
    state, meta, path = checkpoint.latest(tmp_path, _tree())
    assert meta == {"chunk": 0}
    np.testing.assert_array_equal(state["a"], np.full(3, 2.0))
    assert path.name == "ckpt_00000000.msgpack"


def test_keeps_only_recent(tmp_path):
    for i in range(5):
        checkpoint.save(tmp_path, i, _tree(float(i)), {"chunk": i}, keep=2)
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path)] == ["ckpt_00000003.msgpack",
                                                                       "ckpt_00000004.msgpack"]


def test_torn_newest_checkpoint_falls_back_to_last_good(tmp_path):
    checkpoint.save(tmp_path, 0, _tree(1.0), {"chunk": 0})
    checkpoint.save(tmp_path, 1, _tree(2.0), {"chunk": 1})
    newest = checkpoint.list_checkpoints(tmp_path)[-1]
    newest.write_bytes(newest.read_bytes()[:10])  # as if a crash tore it
    with pytest.warns(CheckpointWarning, match="ckpt_00000001.msgpack cannot be read"):
        state, meta, _ = checkpoint.latest(tmp_path, _tree())
    assert meta["chunk"] == 0
    np.testing.assert_array_equal(state["a"], np.full(3, 1.0))


def test_crash_during_write_leaves_previous(tmp_path, monkeypatch):
    checkpoint.save(tmp_path, 0, _tree(1.0), {"chunk": 0})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        checkpoint.save(tmp_path, 1, _tree(2.0), {"chunk": 1})
    monkeypatch.undo()
    assert [p.name for p in checkpoint.list_checkpoints(tmp_path)] == ["ckpt_00000000.msgpack"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_shape_mismatch_is_refused(tmp_path):
    checkpoint.save(tmp_path, 0, _tree(), {"chunk": 0})
    other = {"a": jnp.zeros((5,)), "b": {"c": jnp.arange(4, dtype=jnp.int32)}}
    with pytest.raises(CheckpointError, match="different config"):
        checkpoint.load(checkpoint.list_checkpoints(tmp_path)[0], other)


def test_no_pickle_in_format(tmp_path):
    path = checkpoint.save(tmp_path, 0, _tree(), {"chunk": 0})
    assert not path.read_bytes().startswith(b"\x80")  # pickle protocol marker


def test_any_pytree_round_trips(tmp_path):
    """A replay buffer's state (a chex dataclass, not a flax one) and scalars of every dtype."""
    import flashbax as fbx
    import jax

    buffer = fbx.make_trajectory_buffer(add_batch_size=2, sample_batch_size=2, sample_sequence_length=2,
                                        period=1, min_length_time_axis=2, max_length_time_axis=8)
    state = buffer.add(buffer.init({"x": jnp.zeros(3)}), {"x": jnp.arange(2 * 5 * 3.0).reshape(2, 5, 3)})
    tree = {"buffer": state, "flag": jnp.array(True), "step": jnp.int32(7), "key": jax.random.PRNGKey(3)}
    checkpoint.save(tmp_path, 0, tree, {"chunk": 0})
    template = {"buffer": buffer.init({"x": jnp.zeros(3)}), "flag": jnp.array(False), "step": jnp.int32(0),
                "key": jax.random.PRNGKey(0)}
    restored, _, _ = checkpoint.latest(tmp_path, template)
    assert type(restored["buffer"]) is type(state)
    for want, got in zip(jax.tree.leaves(tree), jax.tree.leaves(restored)):
        np.testing.assert_array_equal(np.asarray(want), np.asarray(got))
        assert np.asarray(want).dtype == np.asarray(got).dtype


def test_flipped_bits_are_refused_and_the_previous_checkpoint_used_with_a_warning(tmp_path):
    checkpoint.save(tmp_path, 0, _tree(1.0), {"chunk": 0})
    newest = checkpoint.save(tmp_path, 1, _tree(2.0), {"chunk": 1})
    data = bytearray(newest.read_bytes())
    at = bytes(data).rindex(np.full(3, 2.0, np.float32).tobytes())  # inside the array "a"
    data[at + 2] ^= 0b1010  # 2.0 becomes another finite float: readable, but not what was saved
    newest.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="ckpt_00000001.msgpack is damaged: its contents do not match"):
        checkpoint.load(newest, _tree())
    with pytest.warns(CheckpointWarning, match="ckpt_00000001.msgpack is damaged.*using the older ckpt_00000000"):
        state, meta, path = checkpoint.latest(tmp_path, _tree())
    assert meta["chunk"] == 0 and path.name == "ckpt_00000000.msgpack"
    np.testing.assert_array_equal(state["a"], np.full(3, 1.0))


def test_temporary_files_of_killed_writes_are_removed(tmp_path):
    checkpoint.save(tmp_path, 0, _tree(1.0), {"chunk": 0})
    left = tmp_path / ".ckpt_00000001.msgpack.x8_k2abc.tmp"  # what a write killed before its rename leaves
    left.write_bytes(b"half a checkpoint")
    mine = tmp_path / "notes.tmp"  # not one of coplay's temporaries
    mine.write_text("keep")
    checkpoint.save(tmp_path, 1, _tree(2.0), {"chunk": 1})
    assert not left.exists() and mine.exists()
