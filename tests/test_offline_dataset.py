"""Offline datasets (`coplay.offline`): recorded deterministically from a seed in
OG-MARL's layout, written atomically through flashbax's Vault and read back
identically by it, OG-MARL vaults read by coplay, and bad datasets refused."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.offline import dataset_stats, epsilon_mixture, load, random_policy, record, save


def _same(a, b):
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


@pytest.fixture(scope="module")
def spread_data():
    env = coplay.make("spread")
    return env, record(env, random_policy(env), 4, jax.random.PRNGKey(0), "poor", meta={"seed": 0})


def test_episodes_are_recorded_one_after_another_in_og_marls_layout_and_from_the_seed_alone(spread_data):
    env, data = spread_data
    x = data.experience
    assert x["observations"].shape == (1, 100, 3, 18) and x["actions"].shape == (1, 100, 3)
    assert x["actions"].dtype == np.int32 and x["rewards"].shape == (1, 100, 3)
    assert x["infos"]["legals"].shape == (1, 100, 3, 5) and x["infos"]["state"].shape == (1, 100, 54)
    # spread ends by its time limit: 25-step episodes, truncated, never terminal
    assert data.episode_ends.tolist() == [24, 49, 74, 99]
    assert x["truncations"][0, [24, 49, 74, 99]].min() == 1 and x["truncations"].sum() == 4 * 3
    assert x["terminals"].sum() == 0
    # the step after an episode's end is the next episode's first observation: a fresh reset
    first = jax.vmap(env.reset)(jax.random.split(jax.random.split(jax.random.PRNGKey(0))[0], 4))[1].obs
    np.testing.assert_allclose(x["observations"][0, [0, 25, 50, 75]], first)
    again = record(env, random_policy(env), 4, jax.random.PRNGKey(0), "poor", meta={"seed": 0})
    assert _same(again.experience, x)
    other = record(env, random_policy(env), 4, jax.random.PRNGKey(1), "poor")
    assert not np.array_equal(other.experience["actions"], x["actions"])


def test_a_turn_based_game_records_which_agent_acted_and_offline_windows_read_it(tmp_path):
    from coplay.algos.common.offline import Windows

    env = coplay.make("tic_tac_toe")
    data = record(env, random_policy(env), 3, jax.random.PRNGKey(0), "poor")
    active = data.experience["infos"]["active"][0]                     # [T, 2]: one mover a step, in turn
    assert active.dtype == bool and np.all(active.sum(-1) == 1)
    inside = np.setdiff1d(np.arange(len(active) - 1), data.episode_ends)     # steps followed by their episode's next
    assert np.all(active[inside] != active[inside + 1])
    back = load(save(data, tmp_path / "ttt.vlt" / "poor"), env=env)
    windows = Windows(back, length=2, agent_id=True)
    np.testing.assert_array_equal(np.asarray(windows.arrays["active"]), active)
    assert "active" not in record(coplay.make("spread"), random_policy(coplay.make("spread")), 1,
                                  jax.random.PRNGKey(0), "poor").experience["infos"]   # everyone acts: OG-MARL's leaves


def test_a_saved_dataset_reads_back_identically_through_coplay_and_flashbaxs_own_vault(spread_data, tmp_path):
    from flashbax.vault import Vault

    env, data = spread_data
    path = save(data, tmp_path / "spread.vlt" / "poor")
    assert path == tmp_path / "spread.vlt" / "poor" and not list((tmp_path / "spread.vlt").glob(".*partial*"))
    back = load(path, env=env)
    assert _same(back.experience, data.experience) and back.meta["quality"] == "poor" and back.meta["seed"] == 0
    theirs = Vault(vault_name="spread.vlt", rel_dir=str(tmp_path), vault_uid="poor").read().experience
    assert _same(jax.tree.map(np.asarray, theirs), data.experience)
    with pytest.raises(ConfigError, match="already exists; remove it or record to another path"):
        save(data, path)


def test_an_og_marl_vault_made_with_flashbax_reads_through_coplay(tmp_path):
    from flashbax.buffers.trajectory_buffer import TrajectoryBufferState
    from flashbax.vault import Vault

    t, n = 6, 2
    rng = np.random.default_rng(0)
    experience = {"observations": rng.normal(size=(1, t, n, 4)).astype(np.float32),
                  "actions": rng.integers(0, 3, (1, t, n)).astype(np.int32),
                  "rewards": rng.normal(size=(1, t, n)).astype(np.float32),
                  "terminals": np.zeros((1, t, n), np.float32), "truncations": np.zeros((1, t, n), np.float32),
                  "infos": {"legals": np.ones((1, t, n, 3), bool),
                            "state": rng.normal(size=(1, t, 8)).astype(np.float32)}}
    experience["terminals"][0, [2, 5]] = 1.0
    state = TrajectoryBufferState(experience=jax.tree.map(jnp.asarray, experience), current_index=jnp.asarray(t),
                                  is_full=jnp.asarray(False))
    Vault(vault_name="smac.vlt", experience_structure=state.experience, rel_dir=str(tmp_path),
          vault_uid="Good").write(state)
    data = load(tmp_path / "smac.vlt" / "Good")
    assert _same(data.experience, experience) and data.meta == {}
    stats = dataset_stats(data)
    assert stats["episodes"] == 2 and stats["length_mean"] == 3.0
    np.testing.assert_allclose(stats["returns"], [experience["rewards"][0, :3].sum(0).mean(),
                                                 experience["rewards"][0, 3:].sum(0).mean()], rtol=1e-6)


def test_statistics_and_an_epsilon_mixture_of_a_fixed_policy():
    env = coplay.make("spread")
    still = lambda key, obs, mask: jnp.zeros(obs.shape[:2], jnp.int32)   # noqa: E731 - every agent stays
    calm = record(env, epsilon_mixture(still, env, 0.0), 2, jax.random.PRNGKey(0), "poor")
    assert np.all(calm.experience["actions"] == 0)
    assert dataset_stats(calm)["action_coverage"] == [0.2, 0.2, 0.2]            # one action of five
    noisy = record(env, epsilon_mixture(still, env, 0.5), 8, jax.random.PRNGKey(0), "mixed")
    share = float(np.mean(noisy.experience["actions"] != 0))
    assert 0.3 < share < 0.5                # half the actions random, four in five of those not "stay"


def test_bad_datasets_and_requests_are_refused_clearly(spread_data, tmp_path):
    env, data = spread_data
    with pytest.raises(ConfigError, match="quality='great' is not one of poor, medium, good, replay, mixed"):
        record(env, random_policy(env), 2, jax.random.PRNGKey(0), "great")
    with pytest.raises(ConfigError, match="episodes=0: a dataset needs a whole number of at least 1 episode"):
        record(env, random_policy(env), 0, jax.random.PRNGKey(0), "poor")
    path = save(data, tmp_path / "spread.vlt" / "poor")
    with pytest.raises(ConfigError, match=r"made for another environment \(num_agents: 3 here, 4 in 'spread'"):
        load(path, env=coplay.make("spread", n_agents=4))
    # a write that died before it was renamed into place is not a dataset
    (tmp_path / "spread.vlt" / ".good.partial-123").mkdir()
    with pytest.raises(ConfigError, match=r"no dataset at .*good \(an unfinished write was left as "
                                          r"\.good\.partial-123\)"):
        load(tmp_path / "spread.vlt" / "good")
    # a dataset that holds fewer steps than it was written with
    meta = json.loads((path / "metadata.json").read_text())
    meta["coplay"]["steps"] = 150
    (path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="holds 100 steps of the 150 it was written with: it is truncated"):
        load(path)
    (path / "manifest.ocdbt").write_bytes(b"damaged")
    with pytest.raises(ConfigError, match="cannot be read"):
        load(path)


def test_a_dataset_directory_or_a_misspelt_quality_is_refused_naming_the_qualities_inside(spread_data, tmp_path):
    env, data = spread_data
    vault = tmp_path / "spread.vlt"
    save(data, vault / "poor")
    save(data, vault / "good")
    with pytest.raises(ConfigError, match=r"no dataset at .*spread\.vlt: it is a dataset directory, which holds the "
                                          r"qualities good, poor; name one of them, e\.g\. .*spread\.vlt/good"):
        load(vault)
    with pytest.raises(ConfigError, match=r"no dataset at .*spread\.vlt/god; did you mean 'good'\? .*spread\.vlt "
                                          r"holds the qualities good, poor"):
        load(vault / "god")
    with pytest.raises(ConfigError, match=r"no dataset at .*spread\.vlt/medium; .*spread\.vlt holds the qualities "
                                          r"good, poor"):
        load(vault / "medium")
    from coplay.experiment.compiled import plan
    from coplay.experiment.config import parse_overrides
    with pytest.raises(ConfigError, match=r"which holds the qualities good, poor"):
        plan(parse_overrides(["algo=cfcql", "env=spread", f"algo.dataset={vault}"]))
