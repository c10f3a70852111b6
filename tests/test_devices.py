"""Seeds spread over several devices (CPU devices forced by XLA_FLAGS in a child process)."""

import json
import os
import subprocess
import sys

import jax
import numpy as np

import coplay
from coplay.scale.devices import describe, seed_mesh

SMALL = ["env=matrix", "env.game=climbing", "env.rounds=10", "algo=ippo", "algo.num_envs=8", "algo.rollout_len=10",
         "algo.hidden_size=16", "total_steps=800", "chunk_steps=400", "eval_episodes=4", "seeds=4",
         "tensorboard=false", "progress=false"]

CHILD = """
import json, sys, jax, numpy as np, coplay
result = coplay.train(sys.argv[1:])
leaf = jax.tree.leaves(result.state)[0]
print(json.dumps({
    "devices": len(jax.devices()),
    "leaf_devices": len(leaf.sharding.device_set),
    "summary_devices": result.summary["devices"],
    "per_seed": result.summary["final"]["return"]["per_seed"],
    "params": [float(np.abs(np.asarray(x)).sum()) for x in jax.tree.leaves(result.state.params)],
}))
"""


def test_seeds_spread_over_two_devices_train_as_on_one(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"}
    args = SMALL + [f"out_dir={tmp_path / 'two'}"]
    out = subprocess.run([sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True, check=True)
    two = json.loads(out.stdout.strip().splitlines()[-1])
    assert two["devices"] == 2 and two["leaf_devices"] == 2          # the state lives on both devices
    assert two["summary_devices"] == "4 seeds over 2 cpu devices, 2 each"

    one = coplay.train(SMALL + [f"out_dir={tmp_path / 'one'}"])
    assert one.summary["devices"] == "4 seed(s) on one cpu device"
    np.testing.assert_allclose(two["per_seed"], one.summary["final"]["return"]["per_seed"], rtol=1e-5)
    params_one = [float(np.abs(np.asarray(x)).sum()) for x in jax.tree.leaves(one.state.params)]
    np.testing.assert_allclose(two["params"], params_one, rtol=1e-4)


def test_seed_mesh_only_when_devices_divide_the_seeds():
    cpu = jax.devices()[0]
    assert seed_mesh(4, [cpu]) is None
    assert seed_mesh(3, [cpu, cpu]) is None
    assert seed_mesh(4, [cpu, cpu]).shape == {"seeds": 2}
    assert "one cpu device" in describe(3) or "do not divide" in describe(3)
