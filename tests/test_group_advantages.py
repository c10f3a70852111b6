"""The group-relative advantage estimators: hand-computed values for each, and the
invariants and edge cases the field's implementations have got wrong (a group
whose rewards are all equal, a group of one, padding, unscorable samples).

Every estimator is compiled once per process and batch shape (`_run`): all
batches below have the shape of `_batch`'s."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from coplay.algos.common import group_advantages as ga
from coplay.core.errors import ConfigError, UnknownNameError

NAMES = sorted(ga.ESTIMATORS)
E, T, N = 6, 3, 2   # two groups of three episodes; agent 0 speaks at steps 0 and 2, agent 1 at step 1


@functools.cache
def _compiled(name: str):
    return jax.jit(ga.estimator(name).fn)


def _run(name: str, ep: ga.Episodes) -> np.ndarray:
    if ga.estimator(name).stateful:
        adv, _ = _compiled(name)(ep, jnp.zeros((1, int(np.max(np.asarray(ep.roles))) + 1)))
    else:
        adv = _compiled(name)(ep)
    return np.asarray(adv)


def _batch(returns=None, group=(0, 0, 0, 1, 1, 1), role=None, state=None) -> ga.Episodes:
    """Episodes whose rewards arrive at the last step: `returns [E, N]` (default: a
    zero-sum game, agent 0 wins, loses, wins, draws, loses, wins)."""
    r = np.array([[1, -1], [-1, 1], [1, -1], [0, 0], [-1, 1], [1, -1]], np.float32) if returns is None \
        else np.asarray(returns, np.float32)
    reward = np.zeros((E, T, N), np.float32)
    reward[:, -1] = r
    acted = np.zeros((E, T, N), bool)
    acted[:, 0, 0] = acted[:, 2, 0] = acted[:, 1, 1] = True
    st = np.zeros((E, T, N), np.int32) if state is None else state
    return ga.Episodes(jnp.asarray(reward), jnp.asarray(acted), jnp.asarray(group, jnp.int32),
                       None if role is None else jnp.asarray(role, jnp.int32), jnp.asarray(st))


def _per_agent(adv: np.ndarray) -> np.ndarray:
    """[E, N]: the advantage at each agent's first turn (outcome estimators give every turn the same)."""
    return np.stack([adv[:, 0, 0], adv[:, 1, 1]], axis=1)


# --- hand-computed values -------------------------------------------------------------

SQRT = np.sqrt
RETURNS = np.array([[1, -1], [-1, 1], [1, -1], [0, 0], [-1, 1], [1, -1]], float)   # _batch's default


def test_grpo_dr_grpo_and_rloo_by_hand():
    ep = _batch()
    # Group 1 pools {0, 0, -1, 1, 1, -1}: mean 0, variance 4/5 with Bessel's correction.
    r = RETURNS
    std = np.array([SQRT(6 / 5)] * 3 + [SQRT(4 / 5)] * 3)[:, None]
    np.testing.assert_allclose(_per_agent(_run("grpo", ep)), r / (std + ga.EPS), rtol=1e-5)
    np.testing.assert_allclose(_per_agent(_run("dr_grpo", ep)), r, atol=1e-6)
    np.testing.assert_allclose(_per_agent(_run("rloo", ep)), r * 6 / 5, rtol=1e-6)   # G/(G-1), G = 6 samples


def test_per_role_estimators_by_hand():
    ep = _batch()
    # Agent 0 in group 0: {1, -1, 1}: mean 1/3, std sqrt(4/3); group 1: {0, -1, 1}: mean 0, std 1.
    a0 = np.array([(1 - 1 / 3), (-1 - 1 / 3), (1 - 1 / 3), 0, -1, 1]) / (np.array([SQRT(4 / 3)] * 3 + [1] * 3) + ga.EPS)
    for name in ("dr_mas", "at_grpo"):   # each agent speaks its k-th turn at the same step: the same groups
        np.testing.assert_allclose(_per_agent(_run(name, ep)), np.stack([a0, -a0], 1), rtol=1e-5, err_msg=name)
    # MARS: per role over every turn of the batch; agent 0's two turns per episode both
    # have the return to go {1, -1, 1, 0, -1, 1}: twelve values, mean 1/6.
    x = np.array([1, -1, 1, 0, -1, 1.0])
    expected = (x - x.mean()) / (np.repeat(x, 2).std(ddof=1) + ga.EPS)
    np.testing.assert_allclose(_run("mars", ep)[:, 0, 0], expected, rtol=1e-5)
    np.testing.assert_allclose(_run("mars", ep)[:, 2, 0], expected, rtol=1e-5)


def test_batch_whitened_estimators_by_hand():
    ep = _batch()
    flat = RETURNS.reshape(-1)   # both groups' pooled means are 0: centring changes nothing
    np.testing.assert_allclose(_per_agent(_run("reinforce_pp", ep)).reshape(-1),
                               (flat - flat.mean()) / (flat.std(ddof=1) + ga.EPS), rtol=1e-5)
    z = _per_agent(_run("grpo", ep)).reshape(-1)   # GDPO with one reward: GRPO's z-scores, whitened
    np.testing.assert_allclose(_per_agent(_run("gdpo", ep)).reshape(-1), (z - z.mean()) / (z.std(ddof=1) + ga.EPS),
                               rtol=1e-5)


def test_gdpo_an_episode_with_one_unscorable_reward_enters_no_statistic():
    # Two rewards; agent 0 of episode 1 has its second reward unscorable (NaN), its first a
    # number. It must count nowhere: the batch gives what it gives with both rewards NaN.
    ep = _batch()
    two = np.stack([np.asarray(ep.reward), 0.5 * np.asarray(ep.reward) + 1.0], axis=-1)
    two[1, -1, 0, 0] = 7.0     # a first reward that would move group 0's statistics
    one_nan, both_nan = two.copy(), two.copy()
    one_nan[1, -1, 0, 1] = np.nan
    both_nan[1, -1, 0, :] = np.nan
    a = np.asarray(jax.jit(ga.gdpo)(ep._replace(reward=jnp.asarray(one_nan))))
    b = np.asarray(jax.jit(ga.gdpo)(ep._replace(reward=jnp.asarray(both_nan))))
    assert np.all(a[1, :, 0] == 0.0) and np.all(np.isfinite(a))
    np.testing.assert_allclose(a, b, atol=1e-6)


# --- a policy that decides when to stop ---------------------------------------------------
# One player, up to three turns; at turn t it goes on with probability sigmoid(theta_t),
# collecting 1, or stops, collecting STOP[t], which ends the episode (so does its third
# turn). The exact policy gradient comes from the closed-form value; each estimator's
# gradient, sum_t A_t d log pi(a_t | t) / d theta, is averaged over groups of 8 episodes.

THETA = jnp.array([0.4, -0.3, 0.2])
STOP = jnp.array([0.5, 2.0, 4.0])


def _stopping_value(theta):
    p = jax.nn.sigmoid(theta)
    reach, value = 1.0, 0.0
    for t in range(3):
        value = value + reach * (1 - p[t]) * (t + STOP[t])
        reach = reach * p[t]
    return value + reach * 3


def _stopping_gradient(advantages, groups=4000, size=8):
    """(mean, standard error) over groups of the estimator's policy gradient."""
    p = jax.nn.sigmoid(THETA)
    go = jax.random.uniform(jax.random.PRNGKey(0), (groups * size, 3)) < p
    alive = jnp.cumprod(jnp.concatenate([jnp.ones((groups * size, 1), bool), go[:, :-1]], 1), 1).astype(bool)
    reward = jnp.where(alive, jnp.where(go, 1.0, STOP), 0.0)
    ep = ga.Episodes(reward[..., None], alive[..., None], jnp.repeat(jnp.arange(groups), size))
    score = jnp.where(alive, go - p, 0.0)          # d log pi(a_t | t) / d theta_t
    g = np.asarray((jax.jit(advantages)(ep)[..., 0] * score).reshape(groups, size, 3).mean(1))
    return g.mean(0), g.std(0, ddof=1) / np.sqrt(groups)


def _per_turn_index(ep):
    """MT-GRPO: each turn's reward centred within (group, turn index), summed from the turn on."""
    keys = [jnp.broadcast_to(k, ep.acted.shape).reshape(-1) for k in (ep.group[:, None, None],
                                                                       jnp.arange(3)[None, :, None])]
    centred = ga.normalise(ep.reward.reshape(-1), ep.acted.reshape(-1), ga.segments(*keys), scale=False)
    return jnp.where(ep.acted, ga.turn_returns(centred.reshape(ep.acted.shape), 1.0), 0.0)


def test_per_turn_index_normalisation_is_biased_where_the_policy_stops_and_turn_rloo_is_not():
    exact = np.asarray(jax.grad(_stopping_value)(THETA))
    m, se = _stopping_gradient(ga.turn_rloo)
    assert np.all(np.abs(m - exact) < 2 * se), ((m - exact) / se, exact)
    # MT-GRPO's baseline counts the group's mean reward once for every turn the episode went on to
    # take: going on is penalised, and the gradient of the middle decision changes sign.
    m, se = _stopping_gradient(_per_turn_index)
    assert np.max(np.abs(m - exact) / se) > 5 and exact[1] > 0 > m[1], ((m - exact) / se, exact)
    # AT-GRPO's per-turn standard deviations reweigh the turns: no rescaling of the exact gradient
    # fits its estimate.
    m, se = _stopping_gradient(ga.at_grpo)
    scale = np.sum(m * exact / se**2) / np.sum(exact**2 / se**2)
    assert np.max(np.abs(m - scale * exact) / se) > 5, (m, scale * exact, se)


def test_rae_keeps_a_moving_baseline_per_role():
    ep = _batch()
    adv, baseline = jax.jit(ga.rae)(ep, jnp.zeros((1, 2)), alpha=0.5)
    b = [0.0, 0.0]
    expected = []
    for e in range(E):                      # episode-major, then agent: read, then update
        row = []
        for n in range(N):
            r = float(np.asarray(ep.reward)[e, -1, n])
            row.append(r - b[n])
            b[n] = 0.5 * b[n] + 0.5 * r
        expected.append(row)
    np.testing.assert_allclose(_per_agent(np.asarray(adv)), expected, atol=1e-6)
    np.testing.assert_allclose(np.asarray(baseline)[0], b, atol=1e-6)
    # two games keep two baselines
    _, two = jax.jit(ga.rae)(ep, jnp.zeros((2, 2)), game=jnp.array([0, 0, 0, 1, 1, 1]))
    assert not np.allclose(np.asarray(two)[0], np.asarray(two)[1])


def test_gigpo_adds_a_step_advantage_within_anchor_states():
    # Agent 0's second view (step 2) is state 7 in episodes 0 and 1 of group 0, state 8 in episode 2.
    state = np.zeros((E, T, N), np.int32)
    state[:, 2, 0] = [7, 7, 8, 9, 9, 9]
    ep = _batch(state=state)
    adv = _run("gigpo", ep)     # mean_norm: F = 1, omega = 1
    r0 = np.array([1, -1, 1, 0, -1, 1.0])
    episode = r0 - np.array([1 / 3] * 3 + [0] * 3)
    # At step 0 every episode of a group shares the state (0): the step part repeats the episode part.
    np.testing.assert_allclose(adv[:, 0, 0], 2 * episode, atol=1e-6)
    # At step 2: the anchor groups {0, 1} (mean 0), {2} alone (0), {3, 4, 5} (mean 0).
    np.testing.assert_allclose(adv[:, 2, 0], episode + np.array([1, -1, 0, 0, -1, 1]), atol=1e-6)
    lone = jax.jit(ga.gigpo, static_argnames="singleton_raw")(_batch(group=range(E), state=state), singleton_raw=True)
    np.testing.assert_allclose(np.asarray(lone)[:, 0, 0], r0, atol=1e-6)   # verl-agent's raw-score convention


# --- invariants and edge cases ----------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in NAMES if n != "rae"])
def test_constant_rewards_give_exactly_zero_and_never_nan(name):
    for value in (0.0, 0.1, 1e6):
        adv = _run(name, _batch(np.full((E, N), value)))
        assert np.all(adv == 0.0), (value, adv)


def test_rae_goes_to_zero_under_a_constant_reward():
    ep = _batch(np.full((E, N), 0.3))
    baseline = jnp.zeros((1, 2))
    for _ in range(200):
        adv, baseline = jax.jit(ga.rae)(ep, baseline)
    assert np.abs(np.asarray(adv)).max() < 1e-6


GROUP_CENTRED = ["grpo", "dr_grpo", "rloo", "reinforce_pp", "dr_mas", "gdpo", "at_grpo", "gigpo"]
SCALE_FREE = ["grpo", "dr_mas", "gdpo", "at_grpo"]


@pytest.mark.parametrize("name", GROUP_CENTRED)
def test_shifting_one_groups_rewards_changes_nothing(name):
    base = _batch()
    shifted = np.asarray(_batch().reward).copy()
    shifted[3:, -1] += 5.0                      # group 1 only
    np.testing.assert_allclose(_run(name, base._replace(reward=jnp.asarray(shifted))), _run(name, base), atol=1e-5)
    if name in SCALE_FREE:
        scaled = np.asarray(base.reward).copy()
        scaled[3:] *= 100.0
        np.testing.assert_allclose(_run(name, base._replace(reward=jnp.asarray(scaled))), _run(name, base),
                                   atol=1e-4)


@pytest.mark.parametrize("name", NAMES)
def test_swapping_the_roles_swaps_their_advantages_and_zero_sum_signs_agree(name):
    r = np.array([[3, -3], [-1, 1], [2, -2], [0, 0], [-1, 1], [5, -5]], np.float32)
    ep = _batch(r, role=np.tile([0, 1], (E, 1)))
    swapped = ga.Episodes(ep.reward[..., ::-1], ep.acted[..., ::-1], ep.group, ep.roles[:, ::-1], ep.state[..., ::-1])
    a, b = _run(name, ep), _run(name, swapped)
    np.testing.assert_allclose(b, a[..., ::-1], atol=1e-5)
    # zero-sum: the winner of an episode gets a positive advantage, the loser a negative one
    first = _per_agent(a)
    win = r[:, 0] > 0
    if name not in ("rae", "mars"):   # baselines over the batch may shift a small win below the mean
        assert np.all(first[win, 0] > 0) and np.all(first[win, 1] < 0), first


def test_more_than_two_players_and_teams_share_statistics_by_role():
    # Three agents, agents 0 and 1 a team (role 0), agent 2 alone (role 1); rewards on another scale.
    e, t, n = 4, 1, 3
    reward = jnp.asarray(np.array([[1, 2, 100], [3, 4, 300], [1, 1, 100], [5, 5, 500]], np.float32)[:, None])
    ep = ga.Episodes(reward, jnp.ones((e, t, n), bool), jnp.zeros(e, jnp.int32), jnp.tile(jnp.array([0, 0, 1]), (e, 1)))
    adv = np.asarray(jax.jit(ga.dr_mas)(ep))[:, 0]
    team = np.array([1, 2, 3, 4, 1, 1, 5, 5.0])
    np.testing.assert_allclose(adv[:, :2].reshape(-1), (team - team.mean()) / (team.std(ddof=1) + ga.EPS), rtol=1e-5)
    solo = np.array([100, 300, 100, 500.0])
    np.testing.assert_allclose(adv[:, 2], (solo - solo.mean()) / (solo.std(ddof=1) + ga.EPS), rtol=1e-5)
    pooled = np.asarray(jax.jit(ga.grpo)(ep))[:, 0]
    # Pooled with the solo agent's hundreds, every team member sits below the group's mean,
    # whatever it did: the pooled baseline drowns the team's own differences.
    assert np.all(pooled[:, :2] < 0) and np.any(adv[:, :2] > 0)


@pytest.mark.parametrize("name", NAMES)
def test_padding_and_unscored_episodes_get_nothing_and_change_nothing(name):
    ep = _batch()
    adv = _run(name, ep)
    assert np.all(adv[~np.asarray(ep.acted)] == 0.0)        # turns not taken get no advantage
    # Episode 2 becomes padding (nobody acted) with a wild reward, episode 5 unscorable (NaN):
    # the others' advantages are those of the batch without them.
    reward, acted = np.asarray(ep.reward).copy(), np.asarray(ep.acted).copy()
    reward[2, -1], acted[2] = [1e9, -1e9], False
    reward[5, -1] = np.nan
    out = _run(name, ep._replace(reward=jnp.asarray(reward), acted=jnp.asarray(acted)))
    assert np.all(np.isfinite(out)) and np.all(out[[2, 5]] == 0.0)
    group = np.array([0, 0, 9, 1, 1, 9])            # the same batch with those two alone in a group of their own
    reward[[2, 5]] = 0.0
    alone = _run(name, _batch(group=group)._replace(reward=jnp.asarray(reward), acted=jnp.asarray(acted)))
    if name in GROUP_CENTRED and name not in ("reinforce_pp", "gdpo"):   # batch-wide statistics see the zeros
        np.testing.assert_allclose(out, alone, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_groups_of_one_and_near_constant_groups_stay_bounded(name):
    lone = _run(name, _batch(group=range(E)))
    assert np.all(np.isfinite(lone))
    if name in ("dr_mas", "at_grpo"):   # one episode per group and role: nothing to compare with
        assert np.all(lone == 0.0)
    r = np.ones((E, N), np.float32)
    r[0, 0] += 1e-6                                     # float noise, not a real difference
    near = _run(name, _batch(r))
    assert np.all(np.isfinite(near)) and np.abs(near).max() <= np.sqrt(E * N) + 1e-3


def test_bad_requests_are_refused_before_compiling():
    with pytest.raises(UnknownNameError, match="unknown estimator 'grop'.*did you mean 'grpo'"):
        ga.estimator("grop")
    with pytest.raises(ConfigError, match="gigpo needs the environment's state keys"):
        ga.gigpo(_batch()._replace(state=None))
    assert ga.estimator("gigpo").needs_state and ga.estimator("rae").stateful


# ----- export in verl's field names -------------------------------------------------------------


def _verl_group_norm(keys, scores, scale):
    """verl's outcome normalisation over rows grouped by `keys`: `score - mean`, divided
    by torch's (Bessel-corrected) std + 1e-6 where `scale` (groups here have 2+ members)."""
    out = np.zeros(len(scores))
    for k in set(keys):
        rows = [i for i, key in enumerate(keys) if key == k]
        x = scores[rows]
        out[rows] = (x - x.mean()) / ((x.std(ddof=1) + 1e-6) if scale else 1.0)
    return out


def test_a_batch_exported_in_verl_field_names_gives_the_same_advantages_under_verl_conventions():
    rng = np.random.default_rng(0)
    # Two agents taking turns, episodes of 2..4 steps, two groups of three: GRPO pools every
    # (trajectory, agent) response of a group, one score per response, as verl's GRPO does.
    e, t = 6, 4
    length = np.array([4, 3, 2, 4, 4, 3])
    live = np.arange(t)[None, :] < length[:, None]
    acted = live[..., None] & (np.arange(2)[None, None, :] == np.arange(t)[None, :, None] % 2)
    reward = np.where(acted, rng.normal(size=(e, t, 2)).round(2), 0.0).astype(np.float32)
    ep = ga.Episodes(jnp.asarray(reward), jnp.asarray(acted), jnp.asarray([0, 0, 0, 1, 1, 1], jnp.int32))
    rows = ga.to_verl(ep, ga.grpo(ep))
    assert len(rows["uid"]) == acted.sum() and rows["active_masks"].all()
    responses = {}
    for u, tr, a, r in zip(rows["uid"], rows["traj_uid"], rows["agent_id"], rows["episode_rewards"]):
        responses[(u, tr, a)] = r
    keys = list(responses)
    adv = dict(zip(keys, _verl_group_norm([k[0] for k in keys], np.array(list(responses.values())), True)))
    expected = [adv[k] for k in zip(rows["uid"], rows["traj_uid"], rows["agent_id"])]
    np.testing.assert_allclose(rows["advantages"], expected, atol=1e-4)
    np.testing.assert_allclose(rows["rewards"], reward[acted])
    # the return from each turn on (gamma 1): the rest of the agent's rewards in its episode
    np.testing.assert_allclose(rows["step_rewards"][rows["turn"] == 0],
                               reward.sum(1)[length > 0, 0], rtol=1e-6)

    # GiGPO, one agent, episodes of equal length, mean_norm (verl-agent's default mode): the
    # episode part centred over the group's rows, the step part over the rows of a group that
    # share an anchor observation, summed with omega = 1
    state = rng.integers(0, 3, size=(e, t, 1)).astype(np.int32)
    solo = ga.Episodes(jnp.asarray(reward[..., :1] + 0.1), jnp.ones((e, t, 1), bool),
                       jnp.asarray([0, 0, 0, 1, 1, 1], jnp.int32), state=jnp.asarray(state))
    rows = ga.to_verl(solo, ga.gigpo(solo, omega=1.0, gamma=0.9), gamma=0.9)
    episode = _verl_group_norm(list(rows["uid"]), rows["episode_rewards"], False)
    step = _verl_group_norm(list(zip(rows["uid"], rows["anchor_obs"])), rows["step_rewards"], False)
    np.testing.assert_allclose(rows["advantages"], episode + step, atol=1e-4)

    # several rewards: each under its name, and their sum as `rewards`
    two = ga.Episodes(jnp.stack([ep.reward, 2 * ep.reward], -1), ep.acted, ep.group)
    rows = ga.to_verl(two, reward_names=("win", "style"))
    np.testing.assert_allclose(rows["rewards/style"], 2 * rows["rewards/win"])
    np.testing.assert_allclose(rows["rewards"], 3 * rows["rewards/win"], rtol=1e-6)
    with pytest.raises(ConfigError, match="reward_names has 1 names for 2 rewards"):
        ga.to_verl(two, reward_names=("win",))


def test_each_estimator_declares_the_options_a_trainer_sets_and_both_trainers_pass_them():
    import inspect

    from coplay.algos.grpo import Config as GRPOConfig
    from coplay.algos.lm_grpo import Config as LMConfig

    settable = {"gamma", "omega", "alpha"}   # the config's gamma, gigpo_omega and rae_alpha
    for name, e in ga.ESTIMATORS.items():
        keywords = set(inspect.signature(e.fn).parameters)
        assert set(e.options) == keywords & settable, name
        for config in (GRPOConfig(estimator=name, gamma=0.9, gigpo_omega=0.5, rae_alpha=0.8),
                       LMConfig(estimator=name, gamma=0.9, gigpo_omega=0.5, rae_alpha=0.8)):
            assert config.estimator_options() == {k: {"gamma": 0.9, "omega": 0.5, "alpha": 0.8}[k]
                                                  for k in e.options}
