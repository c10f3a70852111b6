"""The environment contract test suite, usable on any coplay environment:

    from coplay.testing import check_env
    check_env(coplay.make("spread"))

Every built-in environment runs it in coplay's tests; call it on your own
environments too. Each check raises AssertionError with what was wrong."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from coplay.core.compile import jit, jit_once
from coplay.core.env import Env
from coplay.core.errors import ActionError
from coplay.core.spaces import Discrete
from coplay.core.types import TimeStep
from coplay.wrappers import AutoReset, EpisodeStats


def random_actions(env: Env, ts: TimeStep, key: jax.Array) -> jax.Array:
    """Uniformly random legal actions for every agent: [N] (or [N, d])."""
    spec = env.spec
    if isinstance(spec.action_space, Discrete):
        logits = jnp.where(ts.action_mask, 0.0, -1e9)
        return jax.random.categorical(key, logits).astype(jnp.int32)
    keys = jax.random.split(key, spec.num_agents)
    return jax.vmap(spec.action_space.sample)(keys)


def check_timestep(env: Env, ts: TimeStep, where: str) -> None:
    spec = env.spec
    n = spec.num_agents
    assert ts.obs.shape == (n, *spec.obs_space.shape), f"{where}: obs shape {ts.obs.shape}"
    assert ts.obs.dtype == spec.obs_space.dtype, f"{where}: obs dtype {ts.obs.dtype} != {spec.obs_space.dtype}"
    assert ts.reward.shape == spec.reward_shape, f"{where}: reward shape {ts.reward.shape} != {spec.reward_shape}"
    assert ts.reward.dtype == jnp.float32, f"{where}: reward dtype {ts.reward.dtype}"
    for name in ("done", "truncated"):
        x = getattr(ts, name)
        assert x.shape == () and x.dtype == jnp.bool_, f"{where}: {name} must be a bool scalar, got {x.dtype}{x.shape}"
    assert ts.active.shape == (n,) and ts.active.dtype == jnp.bool_, \
        f"{where}: active {ts.active.dtype}{ts.active.shape}"
    assert ts.action_mask.shape == (n, spec.num_actions), f"{where}: action_mask shape {ts.action_mask.shape}"
    assert ts.action_mask.dtype == jnp.bool_, f"{where}: action_mask dtype {ts.action_mask.dtype}"
    assert ts.global_state.shape == spec.global_state_space.shape, (
        f"{where}: global_state shape {ts.global_state.shape} != {spec.global_state_space.shape}")
    # The values are checked on the host: an eager jnp reduction compiles a program per shape.
    obs, reward, active, mask = (np.asarray(x) for x in (ts.obs, ts.reward, ts.active, ts.action_mask))
    assert np.all(np.isfinite(obs)), f"{where}: non-finite observation"
    assert np.all(np.isfinite(reward)), f"{where}: non-finite reward"
    if spec.discrete_actions:
        assert np.all(mask.any(axis=-1) | ~active), f"{where}: an active agent has no legal action"
    if spec.turn_based:
        assert int(active.sum()) <= 1 or bool(ts.done), f"{where}: turn-based game with several movers"
    for k, v in ts.info.items():
        assert hasattr(v, "shape"), f"{where}: info[{k!r}] is not an array"


def random_rollout(env: Env, steps: int):
    """A compiled random-action rollout: key -> (final carry, TimeSteps [steps, ...])."""

    def run(key):
        k_reset, k_run = jax.random.split(key)
        state, ts = env.reset(k_reset)

        def body(c, k):
            state, ts = c
            k_act, k_step = jax.random.split(k)
            state, ts = env.step(state, random_actions(env, ts, k_act), k_step)
            return (state, ts), ts

        return jax.lax.scan(body, (state, ts), jax.random.split(k_run, steps))

    return jit(run)


def _assert_trees_close(a, b, what: str) -> None:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b), (  # type: ignore[operator]  # PyTreeDef: no jaxlib stub
        f"{what}: structures differ")
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=1e-5, atol=1e-5,
                                   err_msg=what)


def _row(tree, i: int):
    """Row `i` of every leaf, taken on the host (an eager index compiles a program per shape)."""
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)


def check_env(env: Env, seed: int = 0, steps: int | None = None, retrace: bool = True) -> None:
    """Run the whole contract suite on `env`.

    `retrace=False` leaves out one check: that a reset and two steps, each traced anew,
    give what the programs traced once at the start give. A program bakes in whatever
    Python-side state `reset` or `step` read when it was traced (a counter kept on the
    environment, a NumPy draw, a value cached from an earlier call), so such state shows
    as a difference between two traces, as it would between running op by op and
    compiled, at the cost of three compiles rather than one per operation and shape.
    Leave it on, unless the same code has been checked already (another setting of the
    same environment class, the same wrappers)."""
    spec = env.spec
    steps = steps or min(spec.max_steps + 5, 60)
    key = jax.random.PRNGKey(seed)

    # shapes, dtypes and masks, step by step (compiled; traced anew below)
    reset_j, step_j = jit_once(env.reset), jit_once(env.step)

    def act(ts, k):
        return random_actions(env, ts, k)

    act_j = jit_once(act)
    state, ts = reset_j(key)
    check_timestep(env, ts, "reset")
    info_struct = jax.tree.structure(ts.info)
    info_shapes = [x.shape for x in jax.tree.leaves(ts.info)]
    state_struct = jax.tree.structure(state)
    for i, k in enumerate(jax.random.split(jax.random.PRNGKey(seed + 1), steps)):
        k_act, k_step = jax.random.split(k)
        state, ts = step_j(state, act_j(ts, k_act), k_step)
        check_timestep(env, ts, f"step {i}")
        assert jax.tree.structure(ts.info) == info_struct, (  # type: ignore[operator]  # PyTreeDef: no jaxlib stub
            f"step {i}: info keys change between steps")
        assert [x.shape for x in jax.tree.leaves(ts.info)] == info_shapes, f"step {i}: info shapes change"
        assert jax.tree.structure(state) == state_struct, (  # type: ignore[operator]  # PyTreeDef: no jaxlib stub
            f"step {i}: state structure changes")
        if bool(ts.done):
            break

    # wrong action shape is refused
    bad = jnp.zeros((spec.num_agents + 1, *spec.action_space.shape), spec.action_space.dtype)
    try:
        env.step(state, bad, key)
    except ActionError:
        pass
    else:
        raise AssertionError("actions of the wrong shape were accepted")

    # traced anew equals traced once: a new function object is a new trace, which reads any
    # Python-side state again (JAX keeps traces by function, so jitting `env.step` again would not)
    if retrace:
        def anew(f):
            return jit_once(lambda *args: f(*args))

        state_e, ts_e = anew(env.reset)(key)
        state_j, ts_j = reset_j(key)
        _assert_trees_close((state_e, ts_e), (state_j, ts_j), "reset traced anew differs from reset traced once")
        for k in jax.random.split(key, 2):
            a = act_j(ts_e, k)
            state_e, ts_e = anew(env.step)(state_e, a, k)
            state_j, ts_j = step_j(state_j, a, k)
            _assert_trees_close((state_e, ts_e), (state_j, ts_j), "step traced anew differs from step traced once "
                                "(Python-side state read by step?)")

    # vmap equals one-by-one (both compiled)
    def batched(keys):
        vs, vts = jax.vmap(env.reset)(keys)
        acts = jax.vmap(act)(vts, keys)
        return vs, vts, acts, jax.vmap(env.step)(vs, acts, keys)

    keys = jax.random.split(key, 3)
    vs, vts, acts, (vs2, vts2) = jit_once(batched)(keys)
    for i in range(3):
        si, tsi = reset_j(_row(keys, i))
        _assert_trees_close(_row((vs, vts), i), (si, tsi), "vmap(reset) differs")
        si, tsi = step_j(_row(vs, i), _row(acts, i), _row(keys, i))
        _assert_trees_close(_row((vs2, vts2), i), (si, tsi), "vmap(step) differs")

    # auto-reset inside a compiled scan: episodes end by max_steps and restart; run twice
    # from one key (the second time from a fresh buffer), every state and step is the same
    wrapped = AutoReset(EpisodeStats(env))

    def body(carry, k):
        state, ts = carry
        k_act, k_step = jax.random.split(k)
        state, ts = wrapped.step(state, random_actions(wrapped, ts, k_act), k_step)
        return (state, ts), (state, ts)

    horizon = 2 * spec.max_steps + 3
    run = jit_once(lambda k: jax.lax.scan(body, wrapped.reset(k), jax.random.split(k, horizon))[1])
    states, steps_ = run(key)
    _assert_trees_close((states, steps_), run(jnp.array(key)), "same key gave different results")
    dones, lengths = np.asarray(steps_.done), np.asarray(steps_.info["episode/length"])
    assert dones.sum() >= 2, f"no auto-reset seen: {dones.sum()} episode ends in {horizon} steps"
    assert np.array_equal(dones, np.asarray(steps_.info["episode/done"])), "episode/done disagrees with done"
    assert lengths.max() <= spec.max_steps, f"an episode lasted {lengths.max()} > max_steps={spec.max_steps}"
    assert lengths[dones].min() >= 1, "an episode of length 0 was reported"
