"""Jumanji's multi-agent environments under coplay's contract (`jumanji:<name>`): the contract
suite, step-for-step equality with the library's own `reset`/`step`, PettingZoo's API tests,
and the refusals. Small maps and short time limits: compiling Jumanji's steps is what these
tests cost, so each environment compiles its programs once."""

import sys
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("jumanji")

import coplay  # noqa: E402
from coplay.core.errors import ConfigError, MissingExtraError, UnknownNameError  # noqa: E402
from coplay.core.registry import ENVS  # noqa: E402
from coplay.interop import jumanji as adapter  # noqa: E402
from coplay.testing import check_env, random_actions  # noqa: E402

# A short time limit, so that the contract suite sees episodes end and restart.
SMALL = {
    "RobotWarehouse": {"scenario": "tiny-2ag", "time_limit": 8},
    "LevelBasedForaging": {"grid_size": 6, "num_agents": 2, "num_food": 1, "time_limit": 8},
    "Connector": {"grid_size": 5, "num_agents": 2, "time_limit": 8},
    "Cleaner": {"num_rows": 5, "num_cols": 5, "num_agents": 2, "time_limit": 8},
}


def _library_views_match(name, env, views, obs):
    """[] bool: coplay's views `views` [N, ...] say what the library's observation `obs` says,
    read back by the module docstring's rules."""
    n = env.n
    if name in ("RobotWarehouse", "LevelBasedForaging"):
        return jnp.array_equal(views, obs.agents_view.astype(jnp.float32))
    if name == "Connector":
        # agent i sees agent k as k - i: numbering back from each view gives the library's grid
        v = views.astype(jnp.int32)
        me = jnp.arange(n)[:, None, None]
        back = jnp.where(v > 0, 1 + 3 * (((v - 1) // 3 + me) % n) + (v - 1) % 3, 0)
        return jnp.all(back == obs.grid[None]) & jnp.array_equal(views[0], obs.grid.astype(jnp.float32))
    if name == "Cleaner":
        cells = obs.grid.size
        own_first = jnp.stack([jnp.roll(obs.agents_locations, -i, axis=0).reshape(-1) for i in range(n)])
        return (jnp.all(views[:, :cells] == obs.grid.reshape(1, -1))
                & jnp.array_equal(views[:, cells:], own_first.astype(jnp.float32)))
    raise AssertionError(name)


def _deliverable(lib_state, goal):
    """RobotWarehouse's `lib_state` with its first requested shelf moved onto goal cell `goal`
    (x, y as Jumanji lists its goals): the next step delivers it, whatever the agents do."""
    from jumanji.environments.routing.robot_warehouse.constants import _SHELVES

    k = lib_state.request_queue[0]
    shelves = lib_state.shelves
    x, y = shelves.position.x[k], shelves.position.y[k]
    grid = lib_state.grid.at[_SHELVES, x, y].set(0).at[_SHELVES, goal[1], goal[0]].set(k + 1)
    position = shelves.position._replace(x=shelves.position.x.at[k].set(goal[1]),
                                         y=shelves.position.y.at[k].set(goal[0]))
    return lib_state.replace(grid=grid, shelves=shelves._replace(position=position))


def _lockstep(name, env, steps: int):
    """One compiled episode of coplay's environment, each step beside the library's own `step` of
    the same state and actions (random legal ones), after both reset from the same key: per step,
    whether the next states, views, rewards, dones and masks agree, and coplay's done, truncated
    and info. (Equal states after every step make the two episodes equal, step for step; giving
    the library coplay's state lets the compiler share the two runs of the library's code.)"""
    lib = env.lib

    def run(key):
        k0, krun = jax.random.split(key)
        state, ts = env.reset(k0)
        lib_state, lib_ts = lib.reset(k0)
        first = (_library_views_match(name, env, ts.obs, lib_ts.observation)
                 & jnp.array_equal(ts.action_mask, lib_ts.observation.action_mask) & _same(state.env, lib_state))
        if name == "RobotWarehouse":         # a delivery on the first step, for info["deliveries"]
            state = state.replace(env=_deliverable(state.env, lib.goals[0]))

        def body(c, k):
            state, ts = c
            ka, ks = jax.random.split(k)
            a = random_actions(env, ts, ka)
            lib_state, lib_ts = lib.step(state.env, a)
            state, ts = env.step(state, a, ks)
            reward = jnp.broadcast_to(lib_ts.reward, (env.n,)).astype(jnp.float32)
            active = jnp.ones(env.n, bool)
            if name == "Connector":           # connected, or blocked (no move but no-op)
                mask = lib_ts.observation.action_mask
                active = ~(lib_state.agents.connected | ~mask[:, 1:].any(axis=1))
            same = jnp.stack([_same(state.env, lib_state), _library_views_match(name, env, ts.obs, lib_ts.observation),
                              jnp.array_equal(ts.reward, reward), ts.done == lib_ts.last(),
                              jnp.array_equal(ts.action_mask, lib_ts.observation.action_mask),
                              jnp.array_equal(ts.active, active & ~ts.done)])
            limit_reached = state.t >= env.time_limit
            return (state, ts), (same, ts.done, ts.truncated, limit_reached, jnp.any(lib_ts.discount != 0), ts.info)

        return first, jax.lax.scan(body, (state, ts), jax.random.split(krun, steps))[1]

    return jax.jit(run)


def _same(a, b):
    return jnp.all(jnp.stack([jnp.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))]))


_ENVS: dict = {}


def _env(name):
    """The small environment `name`, built once for the file."""
    if name not in _ENVS:
        _ENVS[name] = coplay.make(f"jumanji:{name}", **SMALL[name])
    return _ENVS[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SMALL))
def test_contract_and_equality_with_the_library(name):
    env = _env(name)
    assert env.spec.name == f"jumanji:{name}" and env.spec.max_steps == 8
    assert env.spec.roles == tuple(f"agent_{i}" for i in range(env.n)) and set(env.spec.teams) == {0}
    check_env(env, retrace=False, steps=10)

    first, (same, done, truncated, limit, discount, info) = _lockstep(name, env, 8)(jax.random.PRNGKey(3))
    same, done, truncated, limit, discount = (np.asarray(x) for x in (same, done, truncated, limit, discount))
    assert bool(first), "reset: views or masks differ from the library's"
    ends = np.flatnonzero(done)
    assert ends.size, "no episode end within the time limit"
    end = ends[0]
    what = ["state", "views", "reward", "done", "action mask", "active"]
    for j, part in enumerate(what):
        wrong = np.flatnonzero(~same[:end + 1, j])
        assert not wrong.size, f"{part} differs from the library's at steps {wrong}"
    # truncated: ended by the time limit, not by the game
    assert not truncated[:end].any() and (not truncated[end] or limit[end])
    if name in ("LevelBasedForaging", "Connector"):     # Jumanji truncates these itself (discount 1)
        assert truncated[end] == discount[end]
    assert set(info) >= {"invalid_actions"} and not np.asarray(info["invalid_actions"]).any()
    if name == "RobotWarehouse":
        deliveries = np.asarray(info["deliveries"])
        assert deliveries[0] == 1, "the planted delivery is not in info['deliveries']"
        assert not np.asarray(info["collision"])[:end].any()
        assert bool(np.asarray(info["collision"])[end]) == (not truncated[end])


def test_pettingzoo_api_tests_pass():
    pz = pytest.importorskip("pettingzoo.test")
    from coplay.interop.pettingzoo import to_pettingzoo

    env = _env("Cleaner")
    pz.parallel_api_test(to_pettingzoo(env, api="parallel"), num_cycles=20)


def test_a_forbidden_cleaner_move_ends_the_episode_and_is_counted():
    """Through the PettingZoo export (its compiled step): Jumanji's Cleaner ends the episode when an
    agent picks a move its mask forbids (both agents start in the top-left corner: up is one)."""
    from coplay.interop.pettingzoo import to_pettingzoo

    env = to_pettingzoo(_env("Cleaner"), api="parallel")
    obs, infos = env.reset(seed=0)
    assert all(not info["action_mask"][0] for info in infos.values())
    _, rewards, terminations, truncations, infos = env.step({agent: 0 for agent in env.agents})
    assert all(terminations.values()) and not any(truncations.values())
    assert all(bool(info["invalid_actions"]) for info in infos.values())


MMST_SMALL = {"num_nodes": 12, "num_edges": 18, "max_degree": 4, "num_agents": 3, "num_nodes_per_agent": 3,
              "time_limit": 10}
SAR_SMALL = {"num_searchers": 2, "num_targets": 5, "num_vision": 16, "time_limit": 10}


def test_mmst_and_search_and_rescue_meet_the_contract_in_shape():
    """MMST and SearchAndRescue, traced only (compiling their steps is the dearest of all): shapes,
    spaces and info keys; MMST's mask gives a finished agent node 0."""
    for name, kwargs, shape, actions in [("MMST", MMST_SMALL, (12 + 144 + 3,), jnp.zeros(3, jnp.int32)),
                                         ("SearchAndRescue", SAR_SMALL, (3 * 16 + 1 + 2,), jnp.zeros((2, 2)))]:
        env = coplay.make(f"jumanji:{name}", **kwargs)
        n = env.spec.num_agents
        assert env.spec.obs_space.shape == shape and env.spec.max_steps == 10
        assert env.spec.global_state_space.shape == (n * shape[0] + 1,)
        key = jax.random.PRNGKey(0)
        state, first = jax.eval_shape(env.reset, key)
        _, ts = jax.eval_shape(env.step, state, actions, key)
        for t in (first, ts):
            assert t.obs.shape == (n, *shape) and t.reward.shape == (n,) and t.active.shape == (n,)
            assert t.action_mask.shape == (n, env.spec.num_actions)
        assert {k: (v.shape, v.dtype) for k, v in first.info.items()} == \
            {k: (v.shape, v.dtype) for k, v in ts.info.items()}
        if name == "MMST":
            rows = [[False] * 12, [True] * 12, [False, True] + [False] * 10]
            obs = SimpleNamespace(action_mask=jnp.array(rows))
            mask = np.asarray(env._mask(obs, None))
            assert mask[0].tolist() == [True] + [False] * 11 and mask[1].all() and mask[2].sum() == 1 and mask[2, 1]
        else:
            assert env.spec.action_space.shape == (2,) and env.spec.num_actions == 0


def test_names_arguments_scenarios_and_versions_are_checked_before_anything_is_built(monkeypatch):
    def never(self, p):
        raise AssertionError(f"built with {p}")

    for cls in adapter.CLASSES.values():
        monkeypatch.setattr(cls, "_build", never)
    with pytest.raises(UnknownNameError, match="RobotWarehouse.*LevelBasedForaging|LevelBasedForaging.*RobotWarehouse"):
        coplay.make("jumanji:RobotWarehose")
    with pytest.raises(ConfigError, match="single-agent"):
        coplay.make("jumanji:Snake")
    with pytest.raises(ConfigError, match="single-agent"):
        coplay.make("jumanji:Tetris-v0")
    with pytest.raises(ConfigError, match="shelf_rows"):
        coplay.make("jumanji:RobotWarehouse", shelf_row=1)
    with pytest.raises(ConfigError, match="num_agents"):
        coplay.make("jumanji:RobotWarehouse", num_agents="many")
    with pytest.raises(ConfigError, match="time_limit"):
        coplay.make("jumanji:Cleaner", time_limit="soon")
    with pytest.raises(ConfigError, match="num_agents"):
        coplay.make("jumanji:Connector", num_agents=0)
    with pytest.raises(ConfigError, match="tiny-2ag"):
        coplay.make("jumanji:RobotWarehouse", scenario="huge-2ag")
    with pytest.raises(ConfigError, match="8x8-2p-2f-coop"):
        coplay.make("jumanji:LevelBasedForaging", scenario="8x9-2p-2f")
    with pytest.raises(UnknownNameError, match="shared_dense"):
        coplay.make("jumanji:Connector", reward="dens")

    assert {"scenario", "shelf_rows", "num_agents", "time_limit"} <= set(ENVS.parameters("jumanji:RobotWarehouse"))
    assert ENVS.parameters("jumanji:RobotWarehouse-v0") == ENVS.parameters("jumanji:RobotWarehouse")
    assert {"RobotWarehouse", "Connector-v3", "Snake"} <= set(adapter._choices())
    # a run's config names every argument with its default: that is the default environment
    every = ENVS.parameters("jumanji:LevelBasedForaging")
    assert adapter.LevelBasedForaging._arguments(every) == adapter.LevelBasedForaging.PARAMETERS
    # a scenario sets its fields; a field given with another value than its default overrides it
    p = adapter.RobotWarehouse._arguments({"scenario": "tiny-4ag-easy", "sensor_range": 2})
    assert (p["shelf_rows"], p["shelf_columns"], p["num_agents"], p["request_queue_size"], p["sensor_range"]) == \
        (1, 3, 4, 8, 2)
    p = adapter.LevelBasedForaging._arguments({"scenario": "2s-10x10-3p-3f"})
    assert (p["grid_size"], p["fov"], p["num_agents"], p["num_food"], p["force_coop"]) == (10, 2, 3, 3, False)

    with pytest.raises(MissingExtraError, match=r"jumanji 1\.2\.0 .*>=1\.1,<1\.2"):
        adapter.check_version("1.2.0")
    monkeypatch.setattr(adapter, "_CACHE", {})
    monkeypatch.setattr(adapter, "_installed_version", lambda: "1.0.3")
    with pytest.raises(MissingExtraError, match=r">=1\.1,<1\.2"):
        coplay.make("jumanji:RobotWarehouse")


def test_missing_jumanji_names_the_extra(monkeypatch):
    monkeypatch.setattr(adapter, "_CACHE", {})
    monkeypatch.setitem(sys.modules, "jumanji", None)         # import jumanji now fails
    with pytest.raises(MissingExtraError, match=r"pip install coplay\[jumanji\]"):
        coplay.make("jumanji:Cleaner")
    assert "jumanji:Cleaner" not in ENVS
