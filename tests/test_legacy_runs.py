"""Run directories written before the explicit algorithm contract (coplay as of
commit ea11801; `tests/data/make_legacy_runs.py` wrote them) still load, with
exactly the parameters they stored, and evaluate."""

import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import serialization

from coplay.experiment import checkpoint
from coplay.experiment.playback import evaluate_run, load_run
from coplay.wrappers.episode_stats import is_info_entry

LEGACY = Path(__file__).parent / "data" / "legacy_runs"
RUNS = sorted(p.name for p in LEGACY.iterdir() if p.is_dir())


@pytest.mark.parametrize("name", RUNS)
def test_an_older_run_loads_with_the_parameters_it_stored(name):
    run = load_run(LEGACY / name)
    (path,) = checkpoint.list_checkpoints(LEGACY / name / "checkpoints")
    stored = serialization.msgpack_restore(path.read_bytes())["state"]
    leaves = {jax.tree_util.keystr(key_path): leaf
              for key_path, leaf in jax.tree_util.tree_flatten_with_path(run.state)[0]}
    assert set(stored) <= set(leaves)
    for name, leaf in leaves.items():
        if name in stored:
            np.testing.assert_array_equal(np.asarray(leaf), stored[name])
        else:  # an info entry an environment added since (spread's invalid_actions): it starts at zero
            assert is_info_entry(name) and not np.asarray(leaf).any(), name
    assert run.meta["chunk"] == 1


@pytest.mark.parametrize("name", ["ippo-spread", "selfplay_ppo-tic_tac_toe"])
def test_an_older_run_evaluates(name, tmp_path):
    shutil.copytree(LEGACY / name, tmp_path / name)
    out = evaluate_run(tmp_path / name, episodes=4, gif=False)
    assert len(out["per_seed"]) == 2 and np.all(np.isfinite(out["per_seed"]))
