"""PettingZoo environments as coplay environments (`from_pettingzoo`,
`pettingzoo:<module>`): faithful steps on mpe2's simple_spread and PettingZoo's
tic-tac-toe, single-use states, copy recycling, resumed handles, and errors
that name the agent and the step when an environment breaks the API."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pettingzoo")
mpe2 = pytest.importorskip("mpe2")

import coplay  # noqa: E402
from coplay.core.errors import ConfigError, UnknownNameError  # noqa: E402
from coplay.interop import from_pettingzoo  # noqa: E402
from coplay.interop.host import HostEnvError, HostState, copy_seed  # noqa: E402
from coplay.wrappers import AutoReset, EpisodeStats  # noqa: E402
from gymnasium import spaces  # noqa: E402
from pettingzoo import ParallelEnv  # noqa: E402
from mpe2 import simple_spread_v3  # noqa: E402

from broken_envs import Broken  # noqa: E402
from coplay.core.errors import callback_errors  # noqa: E402
from coplay.interop.layout import ObservationClipped  # noqa: E402

SPREAD = "pettingzoo:mpe2.simple_spread_v3"


def test_simple_spread_steps_match_mpe2_itself():
    env = coplay.make(SPREAD)
    spec = env.spec
    assert (spec.num_agents, spec.obs_space.shape, spec.action_space.n, spec.max_steps) == (3, (18,), 5, 25)
    assert spec.roles == ("agent_0", "agent_1", "agent_2") and not spec.turn_based
    raw = simple_spread_v3.parallel_env()
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state, ts = reset(jax.random.PRNGKey(3))
    # The copy's seed comes from the key: replay the same seed on a raw mpe2 env.
    obs, _ = raw.reset(seed=copy_seed(np.asarray(jax.random.PRNGKey(3))))
    np.testing.assert_allclose(ts.obs, np.stack([obs[a] for a in raw.possible_agents]), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ts.global_state, raw.state(), rtol=1e-6, atol=1e-6)
    rng = np.random.default_rng(0)
    total = np.zeros(3)
    for t in range(25):
        a = rng.integers(0, 5, 3).astype(np.int32)
        state, ts = step(state, jnp.asarray(a), jax.random.PRNGKey(100 + t))
        obs, rew, *_ = raw.step({f"agent_{i}": int(a[i]) for i in range(3)})
        r = np.array([rew[f"agent_{i}"] for i in range(3)])
        np.testing.assert_allclose(ts.reward, r, rtol=1e-5)
        total += r
        if t < 24:
            assert not bool(ts.done)
            np.testing.assert_allclose(ts.obs, np.stack([obs[f"agent_{i}"] for i in range(3)]), rtol=1e-5, atol=1e-6)
    # The last step ends by mpe2's own truncation; the copy has already started a new episode.
    assert bool(ts.done) and bool(ts.truncated)
    assert not np.allclose(ts.obs, np.stack([obs[f"agent_{i}"] for i in range(3)]))
    assert np.all(np.asarray(ts.active))


def test_vmapped_episodes_under_autoreset_keep_returns_and_lengths():
    env = AutoReset(EpisodeStats(coplay.make(SPREAD)))
    n = 6
    state, ts = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), n))
    assert ts.obs.shape == (n, 3, 18) and ts.obs.dtype == jnp.float32 and ts.action_mask.shape == (n, 3, 5)
    assert len(set(np.asarray(state.env_state.slot).tolist())) == n  # one copy per episode

    @jax.jit
    def roll(state, key):
        def body(s, k):
            a = jax.random.randint(k, (n, 3), 0, 5)
            s, ts = jax.vmap(env.step)(s, a, jax.random.split(k, n))
            return s, (ts.reward.mean(-1), ts.info["episode/return"].mean(-1), ts.info["episode/done"],
                       ts.info["episode/length"])
        return jax.lax.scan(body, state, jax.random.split(key, 60))

    state, (reward, ep_return, done, length) = roll(state, jax.random.PRNGKey(1))
    done = np.asarray(done)
    assert done.sum() == 2 * n and np.all(np.asarray(length)[done] == 25)
    # Episode returns are the rewards summed over the first 25 steps of each copy.
    np.testing.assert_allclose(np.asarray(ep_return)[24], np.asarray(reward)[:25].sum(0), rtol=1e-4)


def test_a_state_is_used_once_and_recycled_copies_refuse_old_handles():
    env = from_pettingzoo(simple_spread_v3.parallel_env, max_copies=2)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    a = jnp.zeros(3, jnp.int32)
    s0, _ = reset(jax.random.PRNGKey(0))
    s1, _ = step(s0, a, jax.random.PRNGKey(1))
    with pytest.raises(Exception, match="stepped twice"):
        step(s0, a, jax.random.PRNGKey(2)).__getitem__(1).reward.block_until_ready()
    s1, _ = step(s1, a, jax.random.PRNGKey(3))  # the live handle goes on
    t0, _ = reset(jax.random.PRNGKey(4))  # second copy
    t1, _ = reset(jax.random.PRNGKey(5))  # pool full: recycles the least recently used copy (s1's)
    assert int(t1.slot) == int(s1.slot)
    with pytest.raises(Exception, match="recycled"):
        step(s1, a, jax.random.PRNGKey(6))[1].reward.block_until_ready()
    with pytest.raises(HostEnvError, match="max_copies"):
        from_pettingzoo(simple_spread_v3.parallel_env, max_copies=0)


def test_a_handle_from_another_process_restarts_its_episode_as_truncated():
    env = coplay.make(SPREAD)
    foreign = HostState(slot=jnp.int32(0), generation=jnp.int32(7), pool=jnp.int32(env.pool.id ^ 1))
    state, ts = jax.jit(env.step)(foreign, jnp.zeros(3, jnp.int32), jax.random.PRNGKey(0))
    assert bool(ts.done) and bool(ts.truncated) and np.all(np.asarray(ts.reward) == 0)
    assert int(state.pool) == env.pool.id
    state, ts = jax.jit(env.step)(state, jnp.zeros(3, jnp.int32), jax.random.PRNGKey(1))
    assert not bool(ts.done) and np.all(np.asarray(ts.reward) < 0)


def test_tictactoe_is_turn_based_with_masks_and_zero_sum_rewards():
    env = coplay.make("pettingzoo:classic.tictactoe_v3", max_steps=9)
    spec = env.spec
    assert spec.turn_based and spec.num_agents == 2 and spec.action_space.n == 9 and spec.obs_space.shape == (18,)
    assert spec.roles == ("player_1", "player_2")
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state, ts = reset(jax.random.PRNGKey(0))
    # player_1 takes squares 0, 1, 2 (PettingZoo numbers squares down the columns), player_2 takes 3, 4.
    moves = [0, 3, 1, 4, 2]
    for t, square in enumerate(moves):
        mover = t % 2
        assert np.asarray(ts.active).tolist() == [mover == 0, mover == 1]
        assert bool(ts.action_mask[mover, square])
        taken = moves[:t]
        assert not np.any(np.asarray(ts.action_mask[mover])[taken])
        actions = jnp.array([square, square], jnp.int32)  # the inactive row is ignored
        state, ts = step(state, actions, jax.random.PRNGKey(t))
        if t < len(moves) - 1:
            assert not bool(ts.done) and np.all(np.asarray(ts.reward) == 0)
    assert bool(ts.done) and not bool(ts.truncated)
    np.testing.assert_array_equal(ts.reward, [1.0, -1.0])
    # The next episode has begun: player_1 to move on an empty board.
    assert np.asarray(ts.active).tolist() == [True, False] and bool(np.all(ts.action_mask[0]))


def test_registry_passes_environment_arguments_and_refuses_unknown_ones():
    env = coplay.make(SPREAD, N=2, max_cycles=10)
    assert env.spec.num_agents == 2 and env.spec.max_steps == 10
    assert "local_ratio" in coplay.ENVS.parameters(SPREAD)
    with pytest.raises(UnknownNameError, match="local_ratio"):
        coplay.make(SPREAD, local_ration=0.3)
    with pytest.raises(ConfigError, match="no such module"):
        coplay.make("pettingzoo:mpe2.no_such_env_v0")
    with pytest.raises(ConfigError, match="api='turns' is not one of auto, parallel, aec"):
        coplay.make(SPREAD, api="turns")
    with pytest.raises(ConfigError, match="valid api values here: aec"):
        coplay.make("pettingzoo:classic.tictactoe_v3", api="parallel")


@pytest.mark.parametrize("fault,message", [
    ("vanish", "agent 'a_1' left `agents` at step 3 without being terminated or truncated"),
    ("shape", r"agent 'a_1' at step 3 returned an observation of shape \(5,\)"),
    ("nan_obs", r"agent 'a_1' at step 3 returned an observation with 1 non-finite entries \(entry \(1,\) is nan\)"),
    ("bounds", r"agent 'a_1' at step 3 returned an observation outside its observation space .*entry \(2,\) is "
               r"3, outside \[-1, 1\].*out_of_bounds=clip"),
    ("nan_reward", "agent 'a_1' at step 3 got reward nan; NaN and infinite rewards are refused"),
    ("missing", r"agent 'a_1' is in `agents` at step 3 but has no observation \(got observations for \['a_0'\]\)"),
    ("stranger", "step 3 gave a reward to 'a_9', which is not one of the environment's agents"),
    ("raise", "broken: the environment raised KeyError: \"the environment's own bug\""),
])
def test_broken_environments_are_refused_naming_agent_and_step(fault, message):
    # Broken in the first episode: caught when the environment is built, before compiling.
    with pytest.raises(HostEnvError, match=message):
        from_pettingzoo(functools.partial(Broken, fault), name="broken")
    # Broken only in a later episode: caught while stepping, with the same message and
    # (around compiled calls, as in `coplay.train` and the CLI) the same type.
    env = from_pettingzoo(functools.partial(Broken, fault, episode=1), name="broken")
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state, _ = reset(jax.random.PRNGKey(0))
    with pytest.raises(HostEnvError, match=message), callback_errors():
        for t in range(10 + 3):  # episode 0 lasts 10 steps; the fault is at step 3 of episode 1
            state, ts = step(state, jnp.zeros(2, jnp.int32), jax.random.PRNGKey(t))
        ts.reward.block_until_ready()


def test_an_action_outside_an_agents_space_is_refused_on_the_host():
    env = from_pettingzoo(Broken, name="fine")
    state, _ = env.reset(jax.random.PRNGKey(0))
    with pytest.raises(HostEnvError, match=r"fine: agent 'a_1' at step 0 was given action 5, outside its action "
                                           r"space Discrete\(3\)"), callback_errors():
        jax.jit(env.step)(state, jnp.array([0, 5], jnp.int32), jax.random.PRNGKey(1))[1].reward.block_until_ready()


def test_observations_that_drift_past_their_bounds_can_be_clipped_and_counted():
    with pytest.raises(HostEnvError, match="entry \\(2,\\) is 1.01"):
        from_pettingzoo(functools.partial(Broken, "drift"), name="drifting")
    with pytest.warns(ObservationClipped, match="1 observations clipped so far"):
        env = from_pettingzoo(functools.partial(Broken, "drift", episode=1), name="drifting", out_of_bounds="clip")
        state, ts = env.reset(jax.random.PRNGKey(0))
        for t in range(10 + 3):
            state, ts = env.step(state, jnp.zeros(2, jnp.int32), jax.random.PRNGKey(t))
    np.testing.assert_array_equal(ts.obs[1], [0.0, 0.0, 1.0, 0.0])  # clipped into the box
    copies = list(env.pool.store.copies.values())
    assert copies[0].layout.clipped == 1  # the copies' shared layout counts what it clipped
    with pytest.raises(ConfigError, match="out_of_bounds='wrap' is not one of refuse, clip"):
        coplay.make("pettingzoo:broken_envs", out_of_bounds="wrap")


def test_non_pettingzoo_objects_and_unsupported_spaces_are_refused():
    with pytest.raises(ConfigError, match="ParallelEnv or AECEnv"):
        from_pettingzoo(lambda: object())

    class Mixed(Broken):
        def action_space(self, agent):
            return spaces.Discrete(3) if agent == "a_0" else spaces.Box(0, 1, (2,))

    with pytest.raises(HostEnvError, match="Discrete actions for every agent or Box actions"):
        from_pettingzoo(lambda: Mixed("none"))


def _random_rollout(env, n: int = 6, steps: int = 30):
    """Rewards and observations of `steps` vmapped random steps of `n` copies."""
    state, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), n))

    @jax.jit
    def roll(state, key):
        def body(s, k):
            a = jax.random.randint(k, (n, 3), 0, 5)
            s, ts = jax.vmap(env.step)(s, a, jax.random.split(k, n))
            return s, (ts.reward, ts.obs, ts.done)
        return jax.lax.scan(body, state, jax.random.split(key, steps))

    return jax.device_get(roll(state, jax.random.PRNGKey(1))[1])


@pytest.mark.parametrize("backend", ["process", pytest.param("ray", marks=pytest.mark.xdist_group("ray"))])
@pytest.mark.slow
def test_copies_in_worker_processes_give_the_same_episodes(backend):
    ray = pytest.importorskip("ray") if backend == "ray" else None
    ray_was_running = ray is not None and ray.is_initialized()
    local = _random_rollout(coplay.make(SPREAD))
    env = coplay.make(SPREAD, workers=2, worker_backend=backend)
    try:
        remote = _random_rollout(env)
        if backend == "process":  # the copies really live in the two worker processes
            assert len(env.pool.store.procs) == 2 and all(p.is_alive() for p in env.pool.store.procs)
        else:  # ... or in two Ray actors
            assert len(env.pool.store.actors) == 2
    finally:
        env.close()
        if ray is not None and not ray_was_running:
            ray.shutdown()
    for a, b in zip(local, remote):
        np.testing.assert_array_equal(a, b)
    assert np.asarray(local[2]).sum() == 6  # every copy finished one 25-step episode


def test_worker_errors_and_deaths_reach_the_caller():
    env = from_pettingzoo(functools.partial(Broken, "vanish", episode=1), name="broken", workers=2)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    try:
        state, _ = reset(jax.random.split(jax.random.PRNGKey(0), 2))
        with pytest.raises(Exception, match="agent 'a_1' left `agents` at step 3"):
            for t in range(13):
                state, ts = step(state, jnp.zeros((2, 2), jnp.int32), jax.random.split(jax.random.PRNGKey(t), 2))
            ts.reward.block_until_ready()
        env.pool.store.procs[1].kill()
        env.pool.store.procs[1].join()
        with pytest.raises(Exception, match="host worker process .* died"):
            reset(jax.random.split(jax.random.PRNGKey(1), 2))[1].reward.block_until_ready()
    finally:
        env.close()
    with pytest.raises(HostEnvError, match="worker_backend='threads' is not one of process, ray"):
        from_pettingzoo(simple_spread_v3.parallel_env, workers=2, worker_backend="threads")


class _TwoObjectives(ParallelEnv):
    """MOMAland's convention for vector rewards: `reward_space(agent)` is a Box of K
    objectives and each reward a numpy vector. Three rounds; action 1 pays (1, 0),
    action 0 pays (0, 1). `k` sets agent a_1's number of objectives (to break it)."""

    metadata = {"name": "two_objectives_v0"}

    def __init__(self, k: int = 2, reward_k: int = 2):
        self.possible_agents, self.k, self.reward_k = ["a_0", "a_1"], k, reward_k

    def observation_space(self, agent):
        return spaces.Box(0.0, 3.0, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reward_space(self, agent):
        return spaces.Box(0.0, 1.0, (2 if agent == "a_0" else self.k,), np.float32)

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = {a: np.full(1, self.t, np.float32) for a in self.agents}
        rew = {a: np.array([actions[a], 1 - actions[a], 0][:self.reward_k], np.float32) for a in self.agents}
        end = {a: self.t >= 3 for a in self.agents}
        if self.t >= 3:
            self.agents = []
        return obs, rew, end, dict.fromkeys(end, False), {a: {} for a in end}


class _BeachLike(_TwoObjectives):
    """As MOMAland's beach: it seeds NumPy's legacy generator (32-bit seeds only), and
    `state()` holds a row per live agent, so it is empty once the episode is over."""

    def reset(self, seed=None, options=None):
        np.random.seed(seed)
        return super().reset(seed, options)

    def state(self):
        return np.concatenate([np.full(2, self.t, np.float32) for _ in self.agents] or [np.zeros(0, np.float32)])


class _WalkerLike(_BeachLike):
    """As MOMAland's multiwalker: `state()` raises once the episode is over."""

    def state(self):
        if not self.agents:
            raise AttributeError("'NoneType' object has no attribute 'position'")
        return super().state()


@pytest.mark.parametrize("game", [_BeachLike, _WalkerLike])
def test_a_32_bit_seeded_environment_whose_state_empties_at_the_end_runs_through_the_bridge(game):
    env = from_pettingzoo(game)
    state, ts = env.reset(jax.random.split(jax.random.PRNGKey(0))[0])   # a seed of more than 32 bits
    assert ts.global_state.shape == (4,)
    for _ in range(3):
        state, ts = env.step(state, jnp.array([1, 0]), jax.random.PRNGKey(1))
    assert bool(ts.done)
    np.testing.assert_array_equal(ts.global_state, np.zeros(4))


class _TupleViews(_TwoObjectives):
    """As MOMAland's item gathering: each view a tuple (agent id as a Discrete, a grid as a Box)."""

    def __init__(self, bad=False, **kwargs):
        super().__init__(**kwargs)
        self.bad = bad

    def observation_space(self, agent):
        return spaces.Tuple((spaces.Discrete(2, start=-2), spaces.Box(-1.0, 3.0, (2, 2), np.float32)))

    def _view(self, i):
        return (-2 + i, np.full((2, 2), self.t, np.float32)) if not self.bad else (0,)

    def reset(self, seed=None, options=None):
        _, info = super().reset(seed, options)
        return {a: self._view(i) for i, a in enumerate(self.agents)}, info

    def step(self, actions):
        live = list(self.agents)
        _, *rest = super().step(actions)
        return ({a: self._view(i) for i, a in enumerate(live)}, *rest)


def test_tuple_views_are_one_hots_and_boxes_side_by_side_and_a_wrong_tuple_is_refused():
    env = from_pettingzoo(_TupleViews)
    assert env.spec.obs_space.shape == (6,) and env.spec.obs_space.low == -1.0 and env.spec.obs_space.high == 3.0
    state, ts = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(ts.obs, [[1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]])
    state, ts = env.step(state, jnp.array([1, 0]), jax.random.PRNGKey(1))
    np.testing.assert_array_equal(ts.obs, [[1, 0, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]])
    with pytest.raises(HostEnvError, match=r"agent 'a_0' at step 0 returned observation \(0,\), but its observation "
                                           r"space is Tuple\(.*\(2 parts\)"):
        from_pettingzoo(functools.partial(_TupleViews, bad=True))


def test_momaland_style_vector_rewards_come_through_as_reward_n_by_k():
    env = EpisodeStats(from_pettingzoo(_TwoObjectives))
    assert env.spec.reward_dim == 2 and env.spec.reward_shape == (2, 2)
    state, ts = env.reset(jax.random.PRNGKey(0))
    assert ts.reward.shape == (2, 2)
    for a in ([1, 0], [1, 1], [0, 1]):
        state, ts = env.step(state, jnp.array(a), jax.random.PRNGKey(1))
    np.testing.assert_array_equal(ts.reward, [[0, 1], [1, 0]])
    np.testing.assert_array_equal(ts.info["episode/return"], [[2, 1], [2, 1]])   # each agent's return per objective


def test_a_vector_reward_of_the_wrong_length_or_mixed_objective_counts_are_refused():
    with pytest.raises(HostEnvError, match=r"agent 'a_0' at step 1 got reward of shape \(3,\), expected 2 objectives"):
        from_pettingzoo(functools.partial(_TwoObjectives, reward_k=3))
    with pytest.raises(HostEnvError, match="reward spaces have different numbers of objectives"):
        from_pettingzoo(functools.partial(_TwoObjectives, k=3))


@pytest.mark.parametrize("api", ["parallel", "aec"])
def test_coplay_vector_rewards_exported_and_imported_back_are_the_same(api):
    from coplay.interop import to_pettingzoo

    game = coplay.make("matrix", game="vector_payoffs", rounds=2)
    exported = to_pettingzoo(game, api=api)
    assert exported.reward_space(exported.possible_agents[0]).shape == (2,)
    back = from_pettingzoo(lambda: to_pettingzoo(coplay.make("matrix", game="vector_payoffs", rounds=2), api=api))
    assert back.spec.reward_dim == 2
    state, ts = back.reset(jax.random.PRNGKey(0))
    moves = [jnp.array([2, 0]), jnp.array([0, 2])] if api == "aec" else [jnp.array([2, 2])]
    for m in moves:     # AEC: the row player moves, then the column player; the reward comes with the second
        state, ts = back.step(state, m, jax.random.PRNGKey(1))
    np.testing.assert_array_equal(ts.reward, [[1, 3], [0, 4]])      # C, C: (1, 3) and (0, 4)
