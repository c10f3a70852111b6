"""The sequential social dilemmas' dynamics: the rules a bug would break (two agents
in one cell, apples regrowing where none are near, a beam through a wall, a removal
that lasts the wrong time), each asserted on hand-set states; and the social
metrics on hand-computed episodes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError
from coplay.envs.social import grid
from coplay.envs.social.commons_harvest import ZAP, apples_near
from coplay.envs.social.metrics import Tally, gini, social_metrics


def _avatars(pos, facing, removed=None, cooldown=None):
    n = len(pos)
    return grid.Avatars(pos=jnp.asarray(pos, jnp.int32), facing=jnp.asarray(facing, jnp.int32),
                        removed=jnp.zeros(n, jnp.int32) if removed is None else jnp.asarray(removed, jnp.int32),
                        cooldown=jnp.zeros(n, jnp.int32) if cooldown is None else jnp.asarray(cooldown, jnp.int32))


# ----- the grid -----------------------------------------------------------------------------------------------

def test_agents_aiming_at_one_cell_never_share_it_and_a_wall_stops_a_step():
    walls = jnp.zeros((5, 5), bool).at[0, 2].set(True)
    # four agents around (2, 2), each facing it, all step forward; a fifth faces the wall at (0, 2)
    pos = [(1, 2), (2, 3), (3, 2), (2, 1), (1, 1)]
    facing = [2, 3, 0, 1, 0]
    for seed in range(16):
        new, _ = grid.move(jnp.asarray(pos), jnp.asarray(facing), jnp.full(5, grid.FORWARD), jnp.ones(5, bool),
                           walls, jax.random.key(seed))
        new = np.asarray(new)
        assert len({tuple(p) for p in new}) == 5, new
        assert sum(tuple(p) == (2, 2) for p in new) == 1            # exactly one of the four got in
        assert tuple(new[4]) == (0, 1)                               # (0, 1) is free floor


def test_moves_are_relative_to_the_facing_and_turns_change_it():
    walls = jnp.zeros((5, 5), bool)
    moves = [grid.FORWARD, grid.BACKWARD, grid.STEP_LEFT, grid.STEP_RIGHT, grid.TURN_LEFT, grid.TURN_RIGHT]
    expect_east = [(2, 3), (2, 1), (1, 2), (3, 2), (2, 2), (2, 2)]     # facing east: forward is col + 1
    for a, where in zip(moves, expect_east):
        pos, facing = grid.move(jnp.array([[2, 2]]), jnp.array([1]), jnp.array([a]), jnp.ones(1, bool), walls,
                                jax.random.key(0))
        assert tuple(np.asarray(pos[0])) == where, (grid.MOVE_NAMES[a], pos)
    _, facing = grid.move(jnp.array([[2, 2]] * 2), jnp.array([1, 0]), jnp.array([grid.TURN_LEFT, grid.TURN_LEFT]),
                          jnp.ones(2, bool), walls, jax.random.key(0))
    assert list(np.asarray(facing)) == [0, 3]


@pytest.mark.parametrize("facing", [0, 1, 2, 3])
def test_the_window_puts_what_is_ahead_above_the_agent_whatever_its_facing(facing):
    image = jnp.zeros((9, 9, 1))
    ahead = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])[facing]
    right = np.array([[-1, 0], [0, 1], [1, 0], [0, -1]])[(facing + 1) % 4]
    thing = np.array([4, 4]) + 2 * ahead + right                         # two ahead, one to the right
    image = image.at[thing[0], thing[1], 0].set(1.0)
    view = grid.egocentric(image, jnp.array([[4, 4]]), jnp.array([facing]), 3, 1, 2)[0, ..., 0]
    # the agent stands at row 3 (ahead), column 2 (side); two ahead and one right is row 1, column 3
    assert view.shape == (5, 5) and float(view[1, 3]) == 1.0 and float(view.sum()) == 1.0


def test_a_beam_stops_at_the_first_wall_in_its_lane():
    walls = jnp.zeros((7, 7), bool).at[1, 3].set(True)
    cells = np.asarray(grid.beam(jnp.array([[4, 3]]), jnp.array([0]), 3, 1, walls)[0])
    assert cells[3, 3] and cells[2, 3] and not cells[1, 3]               # the middle lane stops at (1, 3)
    assert cells[1, 2] and cells[1, 4] and not cells[0, 2]               # the side lanes run their length
    assert not cells[4, 3]                                               # not the firer's own cell


# ----- Commons Harvest ------------------------------------------------------------------------------------------

def test_no_two_agents_ever_share_a_cell_in_random_play():
    env = coplay.make("commons_harvest", beam_length=3, zap_timeout=3)

    def episode(key):
        def body(carry, k):
            state = carry
            k_act, k_step = jax.random.split(k)
            state, ts = env.step(state, jax.random.randint(k_act, (env.n_agents,), 0, 8), k_step)
            a = state.avatars
            same = jnp.all(a.pos[:, None] == a.pos[None], -1) & a.present[:, None] & a.present[None]
            return state, (jnp.sum(same) - jnp.sum(a.present), jnp.sum(~a.present))

        state, _ = env.reset(key)
        _, (clashes, removed) = jax.lax.scan(body, state, jax.random.split(key, 300))
        return clashes, removed

    clashes, removed = jax.jit(jax.vmap(episode))(jax.random.split(jax.random.key(0), 8))
    assert int(jnp.max(clashes)) == 0
    assert int(jnp.sum(removed)) > 0                                     # zapping happened, and removals


def test_apples_regrow_at_the_rate_of_their_neighbours_and_never_where_none_are_near():
    env = coplay.make("commons_harvest", regrowth=(0.0, 0.2, 0.4, 0.6), n_agents=1)
    state, _ = env.reset(jax.random.key(0))
    # one empty apple cell per neighbour count 0..3 in the orchards of the open map
    apples = np.zeros(env.walls.shape, bool)
    targets = {}
    for n_near, (r, c) in zip(range(4), [(1, 1), (3, 6), (8, 19), (8, 3)]):
        assert env.apple_cells[r, c]
        for dr, dc in [(0, 1), (1, 0), (0, -1), (-1, 0)][:n_near]:
            apples[r + dr, c + dc] = True
        targets[n_near] = (r, c)
    near = np.asarray(apples_near(jnp.asarray(apples), 2.0))
    assert [near[rc] for rc in targets.values()] == [0, 1, 2, 3]
    state = state.replace(apples=jnp.asarray(apples))
    stay = jnp.array([grid.STAY])
    keys = jax.random.split(jax.random.key(1), 4000)
    grown = jax.jit(jax.vmap(lambda k: env.step(state, stay, k)[0].apples))(keys)
    for n_near, (r, c) in targets.items():
        rate = float(jnp.mean(grown[:, r, c]))
        p = float(env.regrowth[n_near])
        assert abs(rate - p) <= 4 * np.sqrt(max(p * (1 - p), 1e-12) / len(keys)), (n_near, rate, p)
    assert not bool(jnp.any(grown[:, 1, 1]))                             # no apple within the radius: never
    assert not bool(jnp.any(grown & ~env.apple_cells))                   # and only on apple cells


def test_eating_an_apple_pays_one_and_removes_it():
    env = coplay.make("commons_harvest", n_agents=1)
    state, _ = env.reset(jax.random.key(0))
    state = state.replace(avatars=_avatars([(1, 4)], [3]))               # facing west, (1, 3) is an apple
    assert bool(state.apples[1, 3])
    state, ts = env.step(state, jnp.array([grid.FORWARD]), jax.random.key(1))
    assert float(ts.reward[0]) == 1.0 and not bool(state.apples[1, 3]) and int(ts.info["eaten"]) == 1


def test_a_zapped_agent_is_off_the_map_for_the_timeout_then_back_on_a_spawn_point():
    timeout, cost, penalty = 5, 0.25, 2.0
    env = coplay.make("commons_harvest", n_agents=2, zap_timeout=timeout, zap_cost=cost, zap_penalty=penalty,
                      zap_cooldown=3)
    step = jax.jit(env.step)
    state, _ = env.reset(jax.random.key(0))
    state = state.replace(avatars=_avatars([(12, 5), (10, 5)], [0, 2]))  # 0 faces north at 1, two cells apart
    state, ts = step(state, jnp.array([ZAP, grid.STAY]), jax.random.key(1))
    assert list(np.asarray(ts.reward)) == [-cost, -penalty]
    assert list(np.asarray(ts.active)) == [True, False] and int(ts.info["zapped"]) == 1
    assert float(ts.obs[1].sum()) == 0.0                                  # a removed agent sees nothing
    away = [bool(ts.active[1])]
    for t in range(timeout + 1):
        state, ts = step(state, jnp.array([grid.STAY, grid.STAY]), jax.random.key(2 + t))
        away.append(bool(ts.active[1]))
    assert away == [False] * timeout + [True, True]
    back = tuple(np.asarray(state.avatars.pos[1]))
    assert bool(env.spawn_points[back])


def test_the_zap_cooldown_is_the_number_of_steps_between_shots():
    env = coplay.make("commons_harvest", n_agents=1, zap_cooldown=2)
    step = jax.jit(env.step)
    state, _ = env.reset(jax.random.key(0))
    fired = []
    for t in range(7):
        state, ts = step(state, jnp.array([ZAP]), jax.random.key(t))
        fired.append(int(ts.info["zaps"]))
    assert fired == [1, 0, 0, 1, 0, 0, 1]


# ----- the social metrics ------------------------------------------------------------------------------------

def test_social_metrics_equal_their_definitions_on_a_hand_computed_episode():
    # 3 agents, 4 steps: agent 0 rewarded 1 at steps 1 and 3; agent 1 rewarded 2 at step 4; agent 2 never,
    # and removed at steps 2 and 3
    rewards = [[1, 0, 0], [0, 0, 0], [1, 0, 0], [0, 2, 0]]
    removed = [[0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 0]]
    tally = Tally.zeros(3)
    for r, o in zip(rewards, removed):
        tally = tally.add(jnp.asarray(r, jnp.float32), jnp.asarray(o, bool))
    m = {k: float(v) for k, v in social_metrics(tally).items()}
    assert m["efficiency"] == pytest.approx(4 / 4)
    # returns (2, 2, 0): sum |Ri - Rj| = 8, over 2 N sum R = 24
    assert m["equality"] == pytest.approx(1 - 8 / 24)
    assert m["sustainability"] == pytest.approx(((1 + 3) / 2 + 4) / 2)    # over the two agents rewarded
    assert m["peace"] == pytest.approx((3 * 4 - 2) / 4)
    assert float(gini(jnp.zeros(4))) == 0.0 and float(gini(jnp.array([0.0, 0.0, 0.0, 4.0]))) == pytest.approx(0.75)


def test_an_episode_reports_its_social_metrics_on_its_last_step_only():
    env = coplay.make("commons_harvest", n_agents=2, max_steps=3)
    state, ts = env.reset(jax.random.key(0))
    peace = []
    for t in range(3):
        state, ts = env.step(state, jnp.array([grid.STAY, grid.STAY]), jax.random.key(t))
        peace.append(float(ts.info["social/peace"]))
    assert peace == [0.0, 0.0, 2.0] and bool(ts.done)


# ----- Clean Up -------------------------------------------------------------------------------------------------

def _with_pollution(env, state, fraction):
    """The state with the first `fraction` of the river's dirt-able cells dirty."""
    cells = np.argwhere(np.asarray(env.dirtable))
    k = int(round(fraction * len(cells)))
    dirt = np.zeros(env.walls.shape, bool)
    dirt[tuple(cells[:k].T)] = True
    return state.replace(dirt=jnp.asarray(dirt)), k / len(cells)


@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.4, 0.6])
def test_apples_grow_at_the_rate_the_river_s_pollution_allows_and_not_at_all_past_the_threshold(fraction):
    env = coplay.make("clean_up", n_agents=1, dirt_delay=10**6)
    state, _ = env.reset(jax.random.key(0))
    state, f = _with_pollution(env, state, fraction)
    far = state.replace(avatars=_avatars([(7, 4)], [0]))                  # on sand, away from the orchard
    grown = jax.jit(jax.vmap(lambda k: env.step(far, jnp.array([grid.STAY]), k)[0].apples))(
        jax.random.split(jax.random.key(1), 200))
    rate = float(jnp.sum(grown)) / (200 * int(env.orchard.sum()))
    p = 0.05 * min(max((0.4 - f) / 0.4, 0.0), 1.0)
    if f >= 0.4:
        assert rate == 0.0
    else:
        assert abs(rate - p) <= 4 * np.sqrt(p * (1 - p) / (200 * int(env.orchard.sum()))), (f, rate, p)


def test_the_river_pollutes_only_after_the_delay_one_cell_at_a_time():
    env = coplay.make("clean_up", n_agents=1, dirt_delay=3, dirt_rate=1.0)
    step = jax.jit(env.step)
    state, ts = env.reset(jax.random.key(0))
    state = state.replace(avatars=_avatars([(7, 4)], [0]))
    dirt = [int(ts.info["dirt"])]
    for t in range(6):
        state, ts = step(state, jnp.array([grid.STAY]), jax.random.key(t))
        dirt.append(int(ts.info["dirt"]))
    assert dirt == [79, 79, 79, 79, 80, 81, 82]


def test_the_cleaning_beam_cleans_each_lane_up_to_its_first_dirt_and_costs_the_cleaner():
    env = coplay.make("clean_up", n_agents=1, dirt_delay=10**6, clean_cost=0.5)
    state, _ = env.reset(jax.random.key(0))
    dirt = np.zeros(env.walls.shape, bool)
    dirt[[4, 3], [3, 3]] = True              # middle lane (col 3): dirt at 4 and, behind it, 3
    dirt[2, 2] = True                        # left lane (col 2): dirt 3 cells ahead
    dirt[1, 4] = True                        # right lane (col 4): 4 cells ahead, past the beam's length
    state = state.replace(dirt=jnp.asarray(dirt), avatars=_avatars([(5, 3)], [0]))   # at (5, 3), facing north
    state, ts = env.step(state, jnp.array([8]), jax.random.key(1))
    left = np.asarray(state.dirt)
    assert not left[4, 3] and left[3, 3]                                  # the first dirt only
    assert not left[2, 2] and left[1, 4]                                  # within the length only
    assert float(ts.reward[0]) == -0.5 and int(ts.info["cleaned"]) == 2


# ----- Coins ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n_agents", [2, 3])
def test_taking_another_s_coin_pays_the_taker_and_costs_its_owner(n_agents):
    env = coplay.make("coins", n_agents=n_agents, regrow_rate=0.0)
    state, _ = env.reset(jax.random.key(0))
    coins = jnp.full(env.walls.shape, -1, jnp.int32).at[2, 3].set(1).at[5, 6].set(0)
    pos = [(2, 2), (5, 5)] + [(8, 2 + i) for i in range(n_agents - 2)]
    state = state.replace(coins=coins, avatars=_avatars(pos, [1] * n_agents))   # facing east, each a coin ahead
    state, ts = env.step(state, jnp.full(n_agents, grid.FORWARD), jax.random.key(1))
    # agent 0 took agent 1's coin (+1, and -2 to agent 1); agent 1 took agent 0's (+1, and -2 to agent 0)
    assert list(np.asarray(ts.reward))[:2] == [1.0 - 2.0, 1.0 - 2.0]
    assert int(ts.info["other_coins"]) == 2 and int(ts.info["own_coins"]) == 0 and int(ts.info["coins"]) == 0
    state = state.replace(coins=state.coins.at[2, 4].set(0))
    _, ts = env.step(state, jnp.full(n_agents, grid.FORWARD), jax.random.key(2))
    assert float(ts.reward[0]) == 1.0 and float(ts.reward[1]) == 0.0 and int(ts.info["own_coins"]) == 1


def test_each_agent_sees_its_own_coins_apart_from_the_others():
    env = coplay.make("coins", regrow_rate=0.0)
    state, _ = env.reset(jax.random.key(0))
    coins = jnp.full(env.walls.shape, -1, jnp.int32).at[3, 5].set(0)
    state = state.replace(coins=coins, avatars=_avatars([(5, 5), (5, 8)], [0, 0]))   # both face north
    _, ts = env.step(state, jnp.array([grid.STAY, grid.STAY]), jax.random.key(1))
    # the coin is two ahead of agent 0 (window row 7, column 5): its own for agent 0, another's for agent 1
    assert float(ts.obs[0, 7, 5, 1]) == 1.0 and float(ts.obs[0, 7, 5, 2]) == 0.0
    assert float(ts.obs[1, 7, 2, 1]) == 0.0 and float(ts.obs[1, 7, 2, 2]) == 1.0


# ----- Cooperative Mining ---------------------------------------------------------------------------------------

def _mine(env, ore_at, pos, facing, actions_per_step, keys=range(100)):
    """Steps of coop_mining from a hand-set mine (no ore grows); the rewards and infos."""
    from coplay.envs.social.coop_mining import EMPTY

    step = jax.jit(env.step)
    state, _ = env.reset(jax.random.key(0))
    ore = jnp.full(env.walls.shape, EMPTY, jnp.int32)
    for (r, c), kind in ore_at.items():
        ore = ore.at[r, c].set(kind)
    state = state.replace(ore=ore, avatars=_avatars(pos, facing))
    out = []
    for actions, k in zip(actions_per_step, keys):
        state, ts = step(state, jnp.asarray(actions), jax.random.key(k))
        out.append(([float(x) for x in ts.reward], {k: int(ts.info[k]) for k in ("gold_mined", "gold_expired")}))
    return state, out


MINE_ENV = dict(n_agents=3, iron_rate=0.0, gold_rate=0.0, mine_cooldown=0, gold_window=3)


def test_gold_needs_two_distinct_miners_within_the_window():
    from coplay.envs.social.coop_mining import GOLD, MINE

    env = coplay.make("coop_mining", **MINE_ENV)
    gold = {(3, 3): GOLD}
    # agents 0 and 1 face the gold from the west and the east; agent 2 stands by
    where, facing = [(3, 2), (3, 4), (8, 8)], [1, 3, 0]
    s = grid.STAY
    # both in the same step: both paid
    _, steps = _mine(env, gold, where, facing, [[MINE, MINE, s]])
    assert steps[0][0] == [8.0, 8.0, 0.0] and steps[0][1]["gold_mined"] == 1
    # the second miner two steps later: still within the window
    _, steps = _mine(env, gold, where, facing, [[MINE, s, s], [s, s, s], [s, MINE, s]])
    assert [r for r, _ in steps] == [[0.0] * 3, [0.0] * 3, [8.0, 8.0, 0.0]]
    # three steps later: the window closed, the gold is whole again, and the late hit only starts it
    state, steps = _mine(env, gold, where, facing, [[MINE, s, s], [s, s, s], [s, s, s], [s, MINE, s]])
    assert all(r == [0.0] * 3 for r, _ in steps) and steps[2][1]["gold_expired"] == 1
    assert int(state.first_miner[3, 3]) == 1
    # the same miner twice: nothing
    _, steps = _mine(env, gold, where, facing, [[MINE, s, s], [MINE, s, s]])
    assert all(r == [0.0] * 3 for r, _ in steps)


def test_iron_pays_its_one_miner_and_the_beam_stops_at_a_wall():
    from coplay.envs.social.coop_mining import IRON, MINE

    env = coplay.make("coop_mining", **MINE_ENV)
    s = grid.STAY
    # (3, 9) is a wall: an iron at (3, 10) is behind it for an agent at (3, 8) facing east
    assert bool(env.walls[3, 9])
    _, steps = _mine(env, {(3, 10): IRON, (5, 3): IRON}, [(3, 8), (5, 2), (8, 8)], [1, 1, 0], [[MINE, MINE, s]])
    assert steps[0][0] == [0.0, 1.0, 0.0]


# ----- the prisoner's dilemma arena ---------------------------------------------------------------------------

def _arena(**kw):
    env = coplay.make("pd_arena", n_agents=3, **kw)
    state, _ = env.reset(jax.random.key(0))
    # agents 0 and 1 face each other on open floor (5, 5)-(5, 6); agent 2 far away
    return env, state.replace(avatars=_avatars([(5, 5), (5, 6), (18, 12)], [1, 3, 0]))


def test_a_meeting_pays_each_the_dilemma_of_the_strategies_their_inventories_make():
    from coplay.envs.social.pd_arena import INTERACT

    env, state = _arena(interaction_timeout=7)
    state = state.replace(inventory=jnp.array([[2, 0], [1, 1], [3, 0]], jnp.int32))
    state, ts = env.step(state, jnp.array([INTERACT, grid.STAY, grid.STAY]), jax.random.key(1))
    # s0 = (1, 0), s1 = (1/2, 1/2): r0 = 0.5 * 3 + 0.5 * 0, r1 = 0.5 * 3 + 0.5 * 5
    assert [float(x) for x in ts.reward] == [1.5, 4.0, 0.0]
    assert int(ts.info["interactions"]) == 1 and float(ts.info["cooperation"]) == 1.5
    assert [int(x) for x in state.avatars.removed] == [7, 7, 0]
    assert np.asarray(state.inventory).tolist() == [[0, 0], [0, 0], [3, 0]]


def test_no_meeting_with_an_agent_that_holds_nothing():
    from coplay.envs.social.pd_arena import INTERACT

    env, state = _arena()
    state = state.replace(inventory=jnp.array([[2, 0], [0, 0], [0, 0]], jnp.int32))
    state, ts = env.step(state, jnp.array([INTERACT, INTERACT, grid.STAY]), jax.random.key(1))
    assert int(ts.info["interactions"]) == 0 and float(jnp.abs(ts.reward).sum()) == 0.0


def test_resources_are_collected_by_kind_and_regrow_only_after_the_delay():
    env, state = _arena(regrow_rate=1.0, regrow_delay=3)
    step = jax.jit(env.step)
    # (6, 9) is a cooperation resource; agent 0 steps onto it from (6, 8)
    assert int(state.kind[6, 9]) == 0 and bool(state.full[6, 9])
    state = state.replace(avatars=_avatars([(6, 8), (5, 6), (18, 12)], [1, 3, 0]))
    state, _ = step(state, jnp.array([grid.FORWARD, grid.STAY, grid.STAY]), jax.random.key(1))
    assert np.asarray(state.inventory[0]).tolist() == [1, 0] and not bool(state.full[6, 9])
    state = state.replace(avatars=_avatars([(8, 3), (5, 6), (18, 12)], [1, 3, 0]))   # walk away
    full = []
    for t in range(4):
        state, _ = step(state, jnp.full(3, grid.STAY), jax.random.key(2 + t))
        full.append(bool(state.full[6, 9]))
    assert full == [False, False, True, True]


# ----- the population dilemma ---------------------------------------------------------------------------------

def _population(**kw):
    from coplay.envs.social.population_dilemma import PopulationState

    env = coplay.make("population_dilemma", n_agents=3, **{"punish_cost": 1.0, "punish_fine": 4.0,
                                                           "reputation_rate": 0.5, **kw})
    state, _ = env.reset(jax.random.key(0))
    assert isinstance(state, PopulationState)
    return env, state


def test_each_agent_plays_the_partner_it_names_and_is_paid_as_the_one_named_too():
    env, state = _population()
    state, ts = env.step(state, jnp.array([1, 2, 0]), jax.random.key(1))        # 0 names 1, 1 names 2, 2 names 0
    assert float(jnp.abs(ts.reward).sum()) == 0.0 and np.asarray(state.partner).tolist() == [1, 2, 0]
    state, ts = env.step(state, jnp.array([0, 1, 0]), jax.random.key(2))        # C, D, C
    # 0: A[C, D] + A[C, C] (named by 2) = 0 + 3; 1: A[D, C] + A[D, C] (named by 0) = 10; 2: A[C, C] + A[C, D] = 3
    assert [float(x) for x in ts.reward] == [3.0, 10.0, 3.0]
    assert float(ts.info["cooperation"]) == pytest.approx(2 / 3)
    assert np.asarray(state.reputation).tolist() == pytest.approx([0.75, 0.25, 0.75])


def test_punishment_costs_the_punisher_and_the_punished_what_the_config_says():
    env, state = _population()
    state = state.replace(watched=jnp.array([1, 2, 1]))      # 2 watches 1's game (1 vs its partner 2: excluded)
    state, _ = env.step(state, jnp.array([1, 2, 0]), jax.random.key(1))
    state = state.replace(watched=jnp.array([1, 0, 1]))      # 0 and 2 watch agent 1's game (1 defects against 2)
    state, _ = env.step(state, jnp.array([0, 1, 0]), jax.random.key(2))
    # 0 punishes its partner 1 directly (1 defected); 2 punishes the defectors of 1's game as a third party: 1
    state, ts = env.step(state, jnp.array([1, 0, 2]), jax.random.key(3))
    assert [float(x) for x in ts.reward] == [-1.0, -8.0, -1.0]
    assert int(ts.info["direct"]) == 1 and int(ts.info["third_party"]) == 1
    assert int(state.round) == 1 and bool(jnp.all(state.moves == -1))             # the next round begins


def test_a_punishment_costs_what_the_punished_played_says_and_a_negative_cost_is_a_reward():
    env, state = _population(punish_cost=-2.0, unjust_punish_cost=10.0)   # +2 for punishing a defector
    state, _ = env.step(state, jnp.array([1, 2, 0]), jax.random.key(1))
    state = state.replace(watched=jnp.array([1, 0, 1]))
    state, _ = env.step(state, jnp.array([0, 1, 0]), jax.random.key(2))        # C, D, C
    # 0 punishes its partner 1 (a defector): +2; 1 punishes its partner 2 (a cooperator): -10; 2 punishes the
    # defector of 1's game as a third party: +2. Fines of 4: 1 twice, 2 once.
    state, ts = env.step(state, jnp.array([1, 1, 2]), jax.random.key(3))
    assert [float(x) for x in ts.reward] == [2.0, -18.0, -2.0]
    with pytest.raises(ConfigError, match="unjust_punish_cost='ten' is out of range.*a number"):
        coplay.make("population_dilemma", unjust_punish_cost="ten")
    with pytest.raises(ConfigError, match="punish_fine=-1.*>= 0"):
        coplay.make("population_dilemma", punish_fine=-1)


def test_each_mechanism_switches_off():
    env = coplay.make("population_dilemma", n_agents=4, partner_selection=False, direct_punishment=False,
                      third_party_punishment=True, reputation=False, rounds=3)
    state, ts = env.reset(jax.random.key(0))
    assert env.phases == (1, 2) and env.spec.max_steps == 6
    assert np.asarray(ts.action_mask[0]).tolist() == [True, True, False, False]       # play first: C or D
    state, ts = env.step(state, jnp.zeros(4, jnp.int32), jax.random.key(1))
    assert np.asarray(ts.action_mask[0]).tolist() == [True, False, True, False]       # no direct punishment
    assert np.asarray(state.reputation).tolist() == [0.5] * 4                          # reputations off
