"""The gridworld in words: the view is the board, moves are parsed from words, walls
and edges stop the agent, invalid utterances forfeit or play at random, every drawn
goal is reachable in time, and a breadth-first policy reaches it in exactly the
shortest path's number of moves."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coplay
from coplay.core.errors import ConfigError, UnknownNameError
from coplay.envs.text import VOCAB
from coplay.envs.text.gridworld import GridState


def _say(text: str, length: int = 2) -> jnp.ndarray:
    """The agent's utterance [1, length] (ended with <end> where it fits)."""
    return jnp.asarray(VOCAB.encode(text, length, end=len(text.split()) < length))[None]


def _board(env, walls=(), pos=4, goal=8, t=0) -> GridState:
    """A hand-made state of a 3x3 grid (cells numbered row by row from the top left)."""
    w = np.zeros(env.size * env.size, bool)
    w[list(walls)] = True
    return GridState(walls=jnp.asarray(w), pos=jnp.int32(pos), goal=jnp.int32(goal), t=jnp.int32(t),
                     done=jnp.bool_(False))


def _view(env, state) -> str:
    return VOCAB.decode(env._views(state)[0])


def _unbatch(states, n: int) -> list:
    """A batch of states -> n single states (numpy, for the host-side breadth-first search)."""
    host = jax.device_get(states)
    return [jax.tree.map(lambda x, i=i: x[i], host) for i in range(n)]


def test_a_walk_to_the_goal_in_words():
    env = coplay.make("text:gridworld", size=3, walls=1, step_cost=0.25)
    step = jax.jit(env.step)
    state = _board(env, walls=[2])
    assert _view(env, state) == "grid : _ _ wall / _ x _ / _ _ goal , your move"
    assert env.spec.obs_space.shape == (16,) and env.speech_words() == ("up", "down", "left", "right")
    assert env.shortest_path(state) == 2 and env.optimal_moves(state) == ("down", "right")
    state, ts = step(state, _say("right"), jax.random.PRNGKey(0))
    assert VOCAB.decode(ts.obs[0]) == "grid : _ _ wall / _ _ x / _ _ goal , your move"
    assert ts.reward.tolist() == [-0.25] and not bool(ts.done) and not bool(ts.info["reached"])
    assert ts.global_state.tolist() == [0, 0, 2, 0, 0, 1, 0, 0, 3, 1]   # cell codes, then the moves made
    state, ts = step(state, _say("down"), jax.random.PRNGKey(1))
    assert VOCAB.decode(ts.obs[0]) == "grid : _ _ wall / _ _ _ / _ _ x , game over"
    assert ts.reward.tolist() == [0.75] and bool(ts.done) and not bool(ts.truncated)
    assert bool(ts.info["reached"]) and ts.info["invalid_utterance"].tolist() == [False]
    assert ts.active.tolist() == [False]
    _, after = step(state, _say("up"), jax.random.PRNGKey(2))   # a finished episode stays finished
    assert after.reward.tolist() == [0.0] and bool(after.done) and not bool(after.info["reached"])
    assert env.render_text(state) == "gridworld, move 2 of 6; game over\n..#\n...\n..A"


def test_walls_and_edges_stop_the_agent_and_the_clock_truncates():
    env = coplay.make("text:gridworld", size=3, walls=1, max_steps=3)
    step = jax.jit(env.step)
    state = _board(env, walls=[1], pos=0, goal=8)   # "x wall _ / _ _ _ / _ _ goal"
    seen = []
    for move in ("right", "up", "left"):           # a wall, the top edge, the left edge
        state, ts = step(state, _say(move), jax.random.PRNGKey(0))
        seen.append((int(state.pos), int(state.t), float(ts.reward[0]), bool(ts.done), bool(ts.truncated)))
    assert seen == [(0, 1, 0.0, False, False), (0, 2, 0.0, False, False), (0, 3, 0.0, True, True)]
    assert VOCAB.decode(ts.obs[0]) == "grid : x wall _ / _ _ _ / _ _ goal , game over"
    assert not bool(ts.info["invalid_utterance"].any())
    # a bump repeats the view, so the two turns are one anchor state
    start = _board(env, walls=[1], pos=0, goal=8)
    bumped, _ = step(start, _say("right"), jax.random.PRNGKey(0))
    assert _view(env, bumped) == _view(env, start)


def test_an_utterance_that_names_no_move_forfeits_or_moves_at_random():
    env = coplay.make("text:gridworld", size=3, walls=0)
    step = jax.jit(env.step)
    for utterance in ("up up", "wall", "goal <end>", "left right"):   # two moves, unended, no move, two moves
        ids = jnp.asarray(VOCAB.encode(utterance, 2))[None]
        state, ts = step(_board(env), ids, jax.random.PRNGKey(0))
        assert bool(ts.done) and not bool(ts.truncated) and ts.reward.tolist() == [-1.0]
        assert ts.info["invalid_utterance"].tolist() == [True] and int(state.pos) == 4
    unended = jnp.asarray([[VOCAB.index["up"], VOCAB.index["up"]]], jnp.int32)
    lenient = coplay.make("text:gridworld", size=3, walls=0, invalid="random")
    step = jax.jit(jax.vmap(lenient.step, in_axes=(None, None, 0)))
    states, ts = step(_board(lenient, goal=0), unended, jax.random.split(jax.random.PRNGKey(1), 64))
    assert sorted(set(np.asarray(states.pos).tolist())) == [1, 3, 5, 7]   # the four neighbours of the centre
    assert bool(ts.info["invalid_utterance"].all()) and not bool(ts.done.any())
    assert ts.reward.tolist() == [[0.0]] * 64


def _scripted(env, keys):
    """Play one episode per key with the breadth-first policy; returns (shortest path at
    the start, moves taken, return, reached) per episode."""
    states, ts = jax.jit(jax.vmap(env.reset))(keys)
    step = jax.jit(jax.vmap(env.step))
    first = [env.shortest_path(s) for s in _unbatch(states, len(keys))]
    total = np.zeros(len(keys))
    words = {m: _say(m)[0] for m in env.move_texts}
    for _ in range(env.spec.max_steps):
        best = [env.optimal_moves(s) for s in _unbatch(states, len(keys))]
        said = np.stack([words[b[0] if b else "up"] for b in best])   # a finished episode ignores its move
        states, ts = step(states, jnp.asarray(said)[:, None], keys)
        total += np.asarray(ts.reward[:, 0])
    return np.asarray(first), np.asarray(states.t), total, np.asarray(states.pos == states.goal)


@pytest.mark.parametrize("kwargs", [{}, {"size": 5, "walls": 8, "max_steps": 12, "step_cost": 0.05}])
def test_a_breadth_first_policy_reaches_every_drawn_goal_in_exactly_the_shortest_path(kwargs):
    env = coplay.make("text:gridworld", **kwargs)
    keys = jax.random.split(jax.random.PRNGKey(0), 48)
    first, moves, total, reached = _scripted(env, keys)
    assert bool(reached.all()) and (first >= 1).all() and (first <= env.spec.max_steps).all()
    assert moves.tolist() == first.tolist()
    np.testing.assert_allclose(total, 1.0 - env.step_cost * first, atol=1e-6)
    assert len(set(first.tolist())) >= 4                        # near and far goals are drawn


def test_drawn_layouts_keep_their_walls_and_a_reachable_goal():
    env = coplay.make("text:gridworld", size=4, walls=6, max_steps=5)
    states, _ = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(3), 256))
    walls, pos, goal = np.asarray(states.walls), np.asarray(states.pos), np.asarray(states.goal)
    rows = np.arange(256)
    # 6 walls, or none where they walled the start in on every side (drawn too)
    assert set(walls.sum(1).tolist()) == {0, 6} and not walls[rows, pos].any() and not walls[rows, goal].any()
    paths = [env.shortest_path(s) for s in _unbatch(states, 256)]
    assert (pos != goal).all() and min(paths) == 1 and max(paths) == 5   # in reach within max_steps
    # On a 2x2 grid with 2 walls, a start whose two neighbours are both walls (1 draw in 3)
    # drops its walls; otherwise the goal is the one free neighbour.
    tiny = coplay.make("text:gridworld", size=2, walls=2, max_steps=4)
    states, _ = jax.jit(jax.vmap(tiny.reset))(jax.random.split(jax.random.PRNGKey(4), 300))
    count = np.asarray(states.walls).sum(1)
    paths = np.asarray([tiny.shortest_path(s) for s in _unbatch(states, 300)])
    assert set(count.tolist()) == {0, 2} and (paths[count == 2] == 1).all() and set(paths[count == 0]) == {1, 2}
    assert 0.25 < (count == 0).mean() < 0.42


def test_layouts_are_determined_by_the_key_and_can_be_a_fixed_few():
    env = coplay.make("text:gridworld", size=4, walls=3)
    reset = jax.jit(env.reset)
    a, ta = reset(jax.random.PRNGKey(7))
    b, tb = reset(jax.random.PRNGKey(7))
    assert all(bool(jnp.array_equal(x, y)) for x, y in zip(jax.tree.leaves((a, ta)), jax.tree.leaves((b, tb))))
    keys = jax.random.split(jax.random.PRNGKey(0), 200)
    _, ts = jax.jit(jax.vmap(env.reset))(keys)
    assert len({view.tobytes() for view in np.asarray(ts.obs[:, 0])}) > 150   # layouts=0: each key draws its own
    few = coplay.make("text:gridworld", size=4, walls=3, layouts=3)
    _, ts = jax.jit(jax.vmap(few.reset))(keys)
    assert len({view.tobytes() for view in np.asarray(ts.obs[:, 0])}) == 3


@pytest.mark.parametrize("kwargs, match", [
    ({"size": 1}, "size=1"), ({"size": 9}, "size=9"), ({"walls": 8}, "walls=8: a 3x3 grid takes 0 to 7"),
    ({"walls": -1}, "walls=-1"), ({"max_steps": 0}, "max_steps=0"), ({"layouts": -2}, "layouts=-2"),
    ({"step_cost": 1.0}, "step_cost=1.0"), ({"max_tokens": 0}, "max_tokens=0"),
])
def test_bad_gridworlds_are_refused_before_compiling(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        coplay.make("text:gridworld", **kwargs)


def test_an_unknown_invalid_outcome_is_refused():
    with pytest.raises(UnknownNameError, match="'quit'.*forfeit, random"):
        coplay.make("text:gridworld", invalid="quit")
