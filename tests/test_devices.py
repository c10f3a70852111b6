"""Seeds, and each seed's environments, spread over several devices (CPU devices
forced by XLA_FLAGS in a child process)."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import coplay
from coplay.scale.devices import describe, mesh_shape, run_mesh
from tiny_run import TINY

SMALL = TINY + ["seeds=2"]

CHILD = """
import json, logging, sys, jax, numpy as np, coplay
compiles = []   # the chunk's compilations (cache hits included), from JAX's compile log
handler = logging.Handler()
handler.emit = lambda r: compiles.append(r.getMessage()) if "jit(one_seed)" in r.getMessage() or \
    "jit(only_seed)" in r.getMessage() else None
logging.getLogger("jax").addHandler(handler)
jax.config.update("jax_log_compiles", True)
result = coplay.train(sys.argv[1:])
leaf = jax.tree.leaves(result.state)[0]
print(json.dumps({
    "devices": len(jax.devices()),
    "leaf_devices": len(leaf.sharding.device_set),
    "env_obs_spec": str(result.state.ts.obs.sharding.spec),
    "params_spec": str(jax.tree.leaves(result.state.params)[0].sharding.spec),
    "summary_devices": result.summary["devices"],
    "per_seed": result.summary["final"]["return"]["per_seed"],
    "params": [float(np.abs(np.asarray(x)).sum()) for x in jax.tree.leaves(result.state.params)],
    "chunk_compiles": sum(m.startswith("Compiling jit(") for m in compiles),
}))
"""


@pytest.mark.slow
def test_seeds_spread_over_two_devices_train_as_on_one(tmp_path):
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    args = SMALL + [f"out_dir={tmp_path / 'two'}"]
    out = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, check=True)
    two = json.loads(out.stdout.strip().splitlines()[-1])
    assert two["devices"] == 2 and two["leaf_devices"] == 2          # the state lives on both devices
    assert two["summary_devices"] == "2 seeds over 2 cpu devices, 1 each"
    assert two["chunk_compiles"] == 1    # both chunks run one program: the state comes back placed as it went in

    one = coplay.train(SMALL + [f"out_dir={tmp_path / 'one'}"])
    assert one.summary["devices"] == "2 seed(s) on one cpu device"
    np.testing.assert_allclose(two["per_seed"], one.summary["final"]["return"]["per_seed"], rtol=1e-5)
    params_one = [float(np.abs(np.asarray(x)).sum()) for x in jax.tree.leaves(one.state.params)]
    np.testing.assert_allclose(two["params"], params_one, rtol=1e-4)


def _two_devices(args):
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_one_seeds_environments_split_over_two_devices_train_as_on_one(tmp_path):
    small = [a for a in SMALL if not a.startswith("seeds=")] + ["seeds=1"]
    two = _two_devices(small + [f"out_dir={tmp_path / 'two'}"])
    assert two["devices"] == 2 and two["leaf_devices"] == 2
    # After training, observations [S, E, N, ...] are still split along the
    # environments, and parameters are replicated over them.
    assert two["env_obs_spec"] in ("P(None, 'envs')", "P('seeds', 'envs')"), two["env_obs_spec"]
    assert "envs" not in two["params_spec"], two["params_spec"]
    assert two["summary_devices"] == ("1 seed(s) over 2 cpu devices: seeds split 1 way(s), each seed's "
                                      "8 environments split 2 ways (4 per device)")
    assert two["chunk_compiles"] == 1
    one = coplay.train(small + [f"out_dir={tmp_path / 'one'}"])
    # The gradient is summed across devices, so only the order of float sums differs.
    np.testing.assert_allclose(two["per_seed"], one.summary["final"]["return"]["per_seed"], rtol=1e-4)
    params_one = [float(np.abs(np.asarray(x)).sum()) for x in jax.tree.leaves(one.state.params)]
    np.testing.assert_allclose(two["params"], params_one, rtol=1e-3)


def test_mesh_uses_every_device_for_seeds_then_environments():
    assert mesh_shape(4, 64, 1) is None
    assert mesh_shape(4, 64, 2) == (2, 1)      # seeds only
    assert mesh_shape(1, 64, 2) == (1, 2)      # one seed: its environments split
    assert mesh_shape(2, 64, 8) == (2, 4)      # both
    assert mesh_shape(3, 64, 2) == (1, 2)
    assert mesh_shape(3, 7, 2) is None         # neither divides: one device
    cpu = jax.devices()[0]
    assert run_mesh(4, 8, [cpu]) is None
    assert run_mesh(4, 8, [cpu, cpu]).shape == {"seeds": 2, "envs": 1}
    assert "one cpu device" in describe(3, 7) or "divide neither" in describe(3, 7)
