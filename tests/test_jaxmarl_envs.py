"""JaxMARL's environments under coplay's contract (`jaxmarl:<name>`): the contract suite,
step-for-step equality with the library's own `reset`/`step_env`, PettingZoo's API tests,
and the refusals. Small maps and short episodes: every environment here compiles a few
programs, which is what these tests cost."""

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("jaxmarl")

import coplay  # noqa: E402
from coplay.core.errors import ConfigError, MissingExtraError, UnknownNameError  # noqa: E402
from coplay.core.registry import ENVS  # noqa: E402
from coplay.interop import jaxmarl as adapter  # noqa: E402
from coplay.testing import check_env, random_actions  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)

# (name, arguments): every environment the adapter promises, at a small size. Each is stepped
# beside the library; the contract suite runs once per code path: the other SMAX maps and
# Overcooked layouts, and the FACMAC sizes built by functions, run the code of the first.
SHORT = {"max_steps": 12}
ADAPTED = [
    *[("HeuristicEnemySMAX", {"scenario": m, **SHORT}) for m in ("3m", "2s3z", "5m_vs_6m", "smacv2_5_units")],
    ("SMAX", {"scenario": "3m", **SHORT}),
    *[("overcooked", {"layout": lay, **SHORT}) for lay in
      ("cramped_room", "asymm_advantages", "coord_ring", "forced_coord", "counter_circuit")],
    ("hanabi", {}),
    ("storm", {"num_inner_steps": 6}),
    ("storm_2p", {"num_inner_steps": 6}),
    ("storm_np", {"num_inner_steps": 6}),
    ("coin_game", {"num_inner_steps": 4, "num_outer_steps": 2}),
    *[(name, {} if name[-5:-3] in ("3a", "6a", "9a") else {"max_steps": 8}) for name in adapter.CLASSES
      if name.startswith("MPE_")],
    ("switch_riddle", {}),
]
IDS = [f"{n}-{kw.get('scenario') or kw.get('layout') or ''}".rstrip("-") for n, kw in ADAPTED]


def _library_views(env, obs):
    """Each agent's observation as the library gives it, flattened (STORM: the view and the
    inventory, which coplay appends as channels)."""
    if env.env_id == "storm_np":
        return [obs[i].reshape(-1) for i in range(env.n)]
    if env.env_id == "storm":
        return [jnp.concatenate([obs["observations"][i].reshape(-1), obs["inventory"][:, i]]) for i in range(env.n)]
    if env.env_id == "storm_2p":
        return [jnp.concatenate([obs[i]["observation"].reshape(-1), obs[i]["inventory"]]) for i in range(env.n)]
    return [obs[a].reshape(-1) for a in env.agents]


def _coplay_views(env, views):
    """The same from coplay's [N, *shape] observation: padding dropped; STORM's inventory
    channels read back from one cell."""
    out = []
    for i in range(env.n):
        v = views[i]
        if env.env_id in ("storm", "storm_2p"):
            k = v.shape[-1] - (5 if env.env_id == "storm" else 6)
            out.append(jnp.concatenate([v[..., :k].reshape(-1), v[0, 0, k:]]))
        else:
            out.append(v.reshape(-1)[:env.obs_sizes[i]])
    return out


def _rewards(env, rewards):
    if isinstance(rewards, dict):
        return jnp.stack([jnp.asarray(rewards[a], jnp.float32) for a in env.agents])
    return jnp.asarray(jnp.stack(list(rewards)) if isinstance(rewards, tuple) else rewards, jnp.float32)


def _lockstep(env, steps: int):
    """A compiled run of coplay's environment and the library's side by side, from the same
    keys and actions, for one episode of `steps` steps: per step, whether the two
    observations, rewards and dones agree (the last step apart, where the inner games of STORM
    and the coin game restart themselves in the library)."""
    lib = env.lib

    def run(key):
        k0, krun = jax.random.split(key)
        state, ts = env.reset(k0)
        lib_obs, lib_state = lib.reset(k0)
        first = jnp.all(jnp.stack([jnp.array_equal(a, b) for a, b in
                                   zip(_coplay_views(env, ts.obs), _library_views(env, lib_obs))]))

        def body(c, k):
            state, ts, lib_state = c
            ka, ks = jax.random.split(k)
            a = random_actions(env, ts, ka)
            state, ts = env.step(state, a, ks)
            acts = {ag: a[i] if env.discrete else a[i, :env.action_dims[i]] for i, ag in enumerate(env.agents)}
            lib_obs, lib_state, rewards, dones, _ = lib.step_env(ks, lib_state, acts)
            same_obs = jnp.all(jnp.stack([jnp.array_equal(x, y) for x, y in
                                          zip(_coplay_views(env, ts.obs), _library_views(env, lib_obs))]))
            same_reward = jnp.array_equal(ts.reward, _rewards(env, rewards))
            return (state, ts, lib_state), (same_obs, same_reward, ts.done, jnp.asarray(dones["__all__"]))

        _, out = jax.lax.scan(body, (state, ts, lib_state), jax.random.split(krun, steps))
        return first, out

    return jax.jit(run)


# storm_2p and storm_np differ from storm only in where the adapter reads each view and
# inventory, which the comparison with the library checks observation for observation.
SAME_CODE = {"HeuristicEnemySMAX-2s3z", "HeuristicEnemySMAX-5m_vs_6m", "HeuristicEnemySMAX-smacv2_5_units",
             "overcooked-asymm_advantages", "overcooked-coord_ring", "overcooked-forced_coord",
             "overcooked-counter_circuit", "MPE_simple_facmac_3a_v1", "MPE_simple_facmac_6a_v1",
             "MPE_simple_facmac_9a_v1", "storm_2p", "storm_np"}


@pytest.mark.parametrize("name,kwargs", ADAPTED, ids=IDS)
def test_contract_and_equality_with_the_library(name, kwargs, request):
    env = coplay.make(f"jaxmarl:{name}", **kwargs)
    if request.node.callspec.id not in SAME_CODE:
        check_env(env, retrace=False, steps=4)

    steps = env.max_steps
    first, (same_obs, same_reward, done, lib_done) = _lockstep(env, steps)(jax.random.PRNGKey(7))
    same_obs, same_reward, done, lib_done = (np.asarray(x) for x in (same_obs, same_reward, done, lib_done))
    assert bool(first), "reset: observations differ from the library's"
    ended = np.flatnonzero(done)
    assert ended.size, f"no episode end within max_steps={steps}"
    end = ended[0]
    inner = name in adapter.INNER_GAMES
    upto = end if inner else end + 1          # the inner games' last step is the documented difference
    assert same_obs[:upto].all(), f"observations differ from the library's at steps {np.flatnonzero(~same_obs[:upto])}"
    assert same_reward[:upto].all(), f"rewards differ at steps {np.flatnonzero(~same_reward[:upto])}"
    if not inner:
        assert np.array_equal(done[:end + 1], lib_done[:end + 1]), "done differs from the library's"


def test_smax_dead_units_are_inactive_with_only_the_stop_action_and_a_won_battle_is_reported():
    env = coplay.make("jaxmarl:HeuristicEnemySMAX", scenario="3m", max_steps=60)
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.PRNGKey(0))
    stop = env.lib.num_movement_actions - 1
    seen_dead = False
    for k in jax.random.split(jax.random.PRNGKey(1), 60):
        # every live ally attacks the first enemy it can, else moves right (towards the enemy)
        mask = np.asarray(ts.action_mask)
        acts = np.where(mask[:, 5:].any(1), 5 + mask[:, 5:].argmax(1), 1)
        state, ts = step(state, jnp.asarray(acts, jnp.int32), k)
        alive = np.asarray(state.env.state.unit_alive[:3])
        if not bool(ts.done):
            assert np.array_equal(np.asarray(ts.active), alive)
            dead = ~alive
            if dead.any():
                seen_dead = True
                rows = np.asarray(ts.action_mask)[dead]
                assert rows[:, stop].all() and rows.sum() == dead.sum()
        else:
            assert not np.asarray(ts.active).any()
            win = np.asarray(ts.info["win"])
            enemies_dead = not np.asarray(state.env.state.unit_alive[3:]).any()
            assert win.all() == (enemies_dead and alive.any())
            break
    assert bool(ts.done), "the battle did not end"
    assert seen_dead, "no ally died before the battle ended: nothing was checked"


def test_a_teams_own_win_is_its_headline_and_a_cooperative_games_win_is_not_one():
    from coplay.experiment.headline import RETURN, TEAM_WIN, WIN, headline_of

    measures = {"return", "win"}
    assert headline_of(measures) is WIN                   # rivals: won against random play
    assert headline_of(measures, "team") is TEAM_WIN       # SMAX against its heuristic enemy
    assert headline_of(measures, None) is RETURN           # Hanabi: one team, nobody wins


def test_hanabi_moves_in_turn_and_other_players_may_only_wait():
    env = coplay.make("jaxmarl:hanabi")
    state, ts = jax.jit(env.reset)(jax.random.PRNGKey(3))
    assert env.spec.turn_based and int(np.asarray(ts.active).sum()) == 1
    mover = int(np.argmax(np.asarray(ts.active)))
    other = 1 - mover
    mask = np.asarray(ts.action_mask)
    assert mask[other].sum() == 1 and mask[other][-1]      # the waiting player's only move: noop
    assert not mask[mover][-1] and mask[mover].sum() > 1


def test_overcooked_keeps_its_grid_and_reports_soups():
    env = coplay.make("jaxmarl:overcooked", layout="cramped_room")
    assert env.spec.obs_space.shape == (4, 5, 26)
    _, ts = env.reset(jax.random.PRNGKey(0))
    assert set(ts.info) >= {"soups", "shaped_reward", "invalid_actions"}
    assert ts.info["soups"].shape == (2,)


def test_different_observation_sizes_are_padded_and_actions_masked():
    env = coplay.make("jaxmarl:MPE_simple_speaker_listener_v4")
    assert env.spec.obs_space.shape == (11,) and env.obs_sizes == [3, 11]
    _, ts = env.reset(jax.random.PRNGKey(0))
    assert np.all(np.asarray(ts.obs)[0, 3:] == 0)
    mask = np.asarray(ts.action_mask)
    assert mask[0].sum() == 3 and mask[1].sum() == 5          # the speaker says one of 3 words
    state, ts = env.step(env.reset(jax.random.PRNGKey(0))[0], jnp.array([4, 0]), jax.random.PRNGKey(1))
    assert np.asarray(ts.info["invalid_actions"]).tolist() == [True, False]


def test_pettingzoo_api_tests_pass():
    pz = pytest.importorskip("pettingzoo.test")
    from coplay.interop.pettingzoo import to_pettingzoo

    for name, kwargs in [("HeuristicEnemySMAX", {"scenario": "3m", "max_steps": 10}),
                         ("MPE_simple_speaker_listener_v4", {"max_steps": 10}),
                         ("hanabi", {})]:
        env = coplay.make(f"jaxmarl:{name}", **kwargs)
        pz.parallel_api_test(to_pettingzoo(env, api="parallel"), num_cycles=30)


def test_names_arguments_and_versions_are_checked_before_anything_is_built(monkeypatch):
    with pytest.raises(UnknownNameError, match="HeuristicEnemySMAX"):
        coplay.make("jaxmarl:HeuristicEnemySmax")
    with pytest.raises(UnknownNameError, match="3m"):
        coplay.make("jaxmarl:HeuristicEnemySMAX", scenario="3marines")
    with pytest.raises(UnknownNameError, match="cramped_room"):
        coplay.make("jaxmarl:overcooked", layout="kitchen")
    with pytest.raises(ConfigError, match="layouts|layout"):
        coplay.make("jaxmarl:overcooked", layot="cramped_room")
    with pytest.raises(ConfigError, match="max_steps"):
        coplay.make("jaxmarl:MPE_simple_spread_v3", max_steps="many")
    with pytest.raises(ConfigError, match="trained policy"):
        coplay.make("jaxmarl:LearnedPolicyEnemySMAX")
    assert "scenario" in ENVS.parameters("jaxmarl:HeuristicEnemySMAX")
    # a run's config names every argument with its default; a subclass's own settings stand
    # (FACMAC fixes its base's num_agents and action type)
    every = ENVS.parameters("jaxmarl:MPE_simple_facmac_v1")
    assert not coplay.make("jaxmarl:MPE_simple_facmac_v1", **every).spec.discrete_actions
    with pytest.raises(MissingExtraError, match=r"jaxmarl 0\.3\.1 .*>=0\.2,<0\.3"):
        adapter.check_version("0.3.1")
    adapter.check_version("0.2.0")


def test_the_cli_lists_a_prefixed_environments_fields(capsys):
    from coplay.cli.main import main

    assert main(["train", "--help", "env=jaxmarl:overcooked"]) == 0
    out = capsys.readouterr().out
    assert "env.layout" in out and "cramped_room" in out
    assert main(["train", "--help", "env=jaxmarl:overcookd"]) == 2
    assert "did you mean 'overcooked'" in capsys.readouterr().err


def test_missing_jaxmarl_names_the_extra(monkeypatch):
    monkeypatch.setattr(adapter, "_CACHE", {})
    monkeypatch.setitem(sys.modules, "jaxmarl", None)         # import jaxmarl now fails
    with pytest.raises(MissingExtraError, match=r"pip install coplay\[jaxmarl\]"):
        coplay.make("jaxmarl:MPE_simple_spread_v3")
    assert "jaxmarl:MPE_simple_spread_v3" not in ENVS


def test_multi_agent_mujoco_without_brax_names_the_extra(monkeypatch):
    import jaxmarl.environments

    monkeypatch.setattr(jaxmarl.environments, "MABRAX_AVAILABLE", False)
    with pytest.raises(MissingExtraError, match=r"brax.*pip install coplay\[mabrax\]"):
        coplay.make("jaxmarl:ant_4x2")
