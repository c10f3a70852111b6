"""A game's exact tree played as a coplay environment: `coplay.make("tree:kuhn_poker")`.

The same rules the tabular solvers use (`coplay.envs.trees`), enumerated once
on the host into node tables, so that deep learners (self-play PPO, PSRO with
PPO best responses) play exactly the game the solvers solve, and any policy
with action probabilities can be read back as a table over information sets
and scored by the exact exploitability (`infoset_views`).

Why beside pgx's Kuhn poker and Leduc hold'em (`kuhn_poker`, `leduc_holdem`):
pgx seats the first mover at random and its observation (own card, chips)
does not say who moved first, so in Kuhn poker "first to act" and "second to
act after a pass" look the same, as do "facing a bet" at either seat. Those
observations are not information sets, the game they define is not the one
the solvers solve, and a network playing them cannot represent Kuhn's
equilibrium. Here seat 0 is always player 0 of the tree and every observation
identifies the player's information state.

    obs           [N, V] float32  one-hot of what each player knows
                  (`Rules.observation_key`), V the number of distinct views
    active        [N] bool  the player to move; all False once done
    action_mask   [N, A] bool  the mover's legal actions; every other row is all
                  True (a player not to move has its action ignored)
    reward        [N] player 0's payoff and its opposite, on the final step
    global_state  [2 V] both players' views
    info          illegal_action [N] bool: the mover chose an illegal action
                  win [N] bool: on the final step, this player's payoff is positive

Chance events (deals) are sampled inside `reset` and `step`, so every state
an agent sees is a decision (or the end). An illegal action (outside the
mover's legal mask) forfeits the game: the move is not played, the game ends,
the offender pays the game's largest stake (`max |utility|`) and the other
player receives it; `info["illegal_action"]` says who.
"""

from __future__ import annotations

from collections.abc import Hashable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import unknown_name
from coplay.core.registry import ENVS
from coplay.core.spaces import Box, Discrete
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.trees.tree import CHANCE, GameTree, Rules

TERMINAL = -1


@struct.dataclass
class TreeState:
    node: jax.Array       # [] int32 the current node (a decision or a terminal)
    forfeit: jax.Array    # [] int32 the player who forfeited by an illegal action, -1 if none


class _Nodes:
    """Host-side enumeration of every history: tables indexed by node."""

    def __init__(self, rules: Rules):
        histories: list[Hashable] = []
        index: dict[Hashable, int] = {}

        def visit(h: Hashable) -> int:
            if h not in index:
                index[h] = len(histories)
                histories.append(h)
            return index[h]

        root = visit(rules.initial())
        player, children, chance_children, chance_probs, utility = {}, {}, {}, {}, {}
        frontier = [root]
        while frontier:
            n = frontier.pop()
            h = histories[n]
            if rules.is_terminal(h):
                player[n], utility[n] = TERMINAL, float(rules.utility(h))
                continue
            p = rules.player(h)
            player[n] = p
            if p == CHANCE:
                outs = list(rules.chance_outcomes(h))
                chance_children[n] = [visit(rules.child(h, a)) for a, _ in outs]
                chance_probs[n] = [prob for _, prob in outs]
                frontier.extend(chance_children[n])
            else:
                row = [-1] * rules.num_actions
                for a in rules.legal_actions(h):
                    row[a] = visit(rules.child(h, a))
                    frontier.append(row[a])
                children[n] = row

        count = len(histories)
        self.histories = histories
        self.player = np.array([player[n] for n in range(count)], np.int32)
        self.utility = np.array([utility.get(n, 0.0) for n in range(count)], np.float32)
        self.children = np.full((count, rules.num_actions), -1, np.int32)
        for n, row in children.items():
            self.children[n] = row
        width = max((len(c) for c in chance_children.values()), default=1)
        self.chance_children = np.zeros((count, width), np.int32)
        self.chance_probs = np.zeros((count, width), np.float32)
        self.chance_probs[:, 0] = 1.0  # rows of non-chance nodes: never used, kept valid
        for n, kids in chance_children.items():
            self.chance_children[n, : len(kids)] = kids
            self.chance_probs[n] = 0.0
            self.chance_probs[n, : len(kids)] = chance_probs[n]
        self.root = root

        # Episode bounds: the most decisions on any path, the most chance events in a row.
        decisions, chance_run = {}, {}
        for n in reversed(range(count)):  # children are numbered after their parents
            if player[n] == TERMINAL:
                decisions[n], chance_run[n] = 0, 0
            elif player[n] == CHANCE:
                decisions[n] = max(decisions[c] for c in chance_children[n])
                chance_run[n] = 1 + max(chance_run[c] for c in chance_children[n])
            else:
                decisions[n] = 1 + max(decisions[c] for c in children[n] if c >= 0)
                chance_run[n] = 0
        self.max_decisions = decisions[root]
        self.chance_depth = max(chance_run.values())

        # What each player knows at every decision and terminal node, as indices into one vocabulary.
        keys: dict[str, int] = {}
        self.view = np.zeros((count, 2), np.int32)
        for n, h in enumerate(histories):
            if self.player[n] == CHANCE:
                continue
            for p in (0, 1):
                self.view[n, p] = keys.setdefault(f"{p}:{rules.observation_key(h, p)}", len(keys))
        self.view_keys = tuple(keys)


class TreeGameEnv(Env):
    """Game `name` of `coplay.envs.trees` (kuhn_poker, leduc_holdem) as an environment."""

    def __init__(self, name: str = "kuhn_poker"):
        from coplay.envs.trees import _RULES, game_tree

        if name not in _RULES:
            raise unknown_name("game tree", name, _RULES)
        rules = _RULES[name]()
        self.rules = rules
        self.tree: GameTree = game_tree(name)
        t = _Nodes(rules)
        self._nodes = t
        self.num_views = len(t.view_keys)
        self.stake = float(np.max(np.abs(t.utility)))
        self._player = jnp.asarray(t.player)
        self._children = jnp.asarray(t.children)
        self._chance_children = jnp.asarray(t.chance_children)
        self._chance_logits = jnp.log(jnp.asarray(t.chance_probs))
        self._utility = jnp.asarray(t.utility)
        self._view = jnp.asarray(t.view)
        self.spec = EnvSpec(
            name=f"tree:{name}", num_agents=2,
            obs_space=Box(0.0, 1.0, (self.num_views,)), action_space=Discrete(rules.num_actions),
            global_state_space=Box(0.0, 1.0, (2 * self.num_views,)), max_steps=t.max_decisions,
            teams=(0, 1), roles=("player_0", "player_1"), turn_based=True,
            render_text=self.render_text,
        )

    # ----- dynamics -------------------------------------------------------------------------------
    def _deal(self, node: jax.Array, key: jax.Array) -> jax.Array:
        """Play out chance events from `node` until a decision or the end."""
        for k in jax.random.split(key, max(self._nodes.chance_depth, 1)):
            outcome = jax.random.categorical(k, self._chance_logits[node])
            node = jnp.where(self._player[node] == CHANCE, self._chance_children[node, outcome], node)
        return node

    def _reset(self, key):
        state = TreeState(node=self._deal(jnp.int32(self._nodes.root), key), forfeit=jnp.int32(-1))
        return state, self._timestep(state, jnp.zeros(2, jnp.float32), jnp.zeros(2, bool))

    def _step(self, state: TreeState, actions, key):
        node = state.node
        mover = self._player[node]
        over = (mover == TERMINAL) | (state.forfeit >= 0)
        seat = jnp.clip(mover, 0, 1)
        action = jnp.asarray(actions)[seat]
        in_range = (action >= 0) & (action < self.spec.num_actions)
        child = self._children[node, jnp.clip(action, 0, self.spec.num_actions - 1)]
        illegal = ~over & (~in_range | (child < 0))
        played = self._deal(jnp.where(illegal | over, node, child), key)
        forfeit = jnp.where(illegal, seat, state.forfeit)
        new = TreeState(node=played, forfeit=forfeit)
        ended_now = ~over & (illegal | (self._player[played] == TERMINAL))
        payoff = jnp.where(illegal, jnp.where(seat == 0, -self.stake, self.stake), self._utility[played])
        reward = jnp.where(ended_now, jnp.stack([payoff, -payoff]), 0.0)
        return new, self._timestep(new, reward, jax.nn.one_hot(seat, 2, dtype=bool) & illegal, ended_now)

    def _timestep(self, state: TreeState, reward, illegal, ended_now=jnp.bool_(False)) -> TimeStep:
        player = self._player[state.node]
        done = (player == TERMINAL) | (state.forfeit >= 0)
        active = jax.nn.one_hot(jnp.clip(player, 0, 1), 2, dtype=bool) & ~done
        legal = self._children[state.node] >= 0
        mask = jnp.where(active[:, None], legal[None, :], True)
        obs = jax.nn.one_hot(self._view[state.node], self.num_views, dtype=jnp.float32)
        return TimeStep(
            obs=obs, reward=reward.astype(jnp.float32), done=done, truncated=jnp.bool_(False), active=active,
            action_mask=mask, global_state=obs.reshape(-1),
            info={"illegal_action": illegal, "win": ended_now & (reward > 0)},
        )

    # ----- exact evaluation ---------------------------------------------------------------------
    def infoset_views(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Every information set of `self.tree` as the environment shows it to its owner:
        `(obs [I, N, V], action_mask [I, N, A], owner [I])`. Row `owner[i]` of `obs[i]` is
        the owner's observation at set i (the other row is zero), so a policy's action
        probabilities at `[i, owner[i]]` are its behaviour there: an `[I, A]` table for the
        tree's exact values (`coplay.envs.trees.values`)."""
        keys = {k: i for i, k in enumerate(self._nodes.view_keys)}
        owner = np.asarray(self.tree.infoset_player)
        rows = [keys[f"{p}:{k}"] for k, p in zip(self.tree.infoset_keys, owner)]
        seat = jax.nn.one_hot(owner, 2, dtype=bool)
        obs = jnp.where(seat[:, :, None], jax.nn.one_hot(jnp.asarray(rows), self.num_views)[:, None, :], 0.0)
        mask = jnp.where(seat[:, :, None], jnp.asarray(self.tree.legal)[:, None, :], True)
        return obs, mask, jnp.asarray(owner)

    # ----- text -----------------------------------------------------------------------------------
    def render_text(self, state: TreeState, viewer: int | None = None) -> str:
        node = int(np.asarray(state.node))
        h = self._nodes.histories[node]
        player = int(self._nodes.player[node])
        seen = [self.rules.observation_key(h, p) for p in (0, 1)]
        forfeit = int(np.asarray(state.forfeit))
        if forfeit >= 0:
            status = f"player_{forfeit} forfeited by an illegal action"
        elif player == TERMINAL:
            u = float(self._nodes.utility[node])
            status = f"game over: player_0 {u:+g}, player_1 {-u:+g}"
        else:
            legal = [self.rules.action_names[a] for a in range(self.spec.num_actions)
                     if self._nodes.children[node, a] >= 0]
            status = f"player_{player} to move; legal: {', '.join(legal)}"
        if viewer is not None:
            return f"{self.rules.name}, player_{viewer} knows {seen[viewer]!r}. {status}."
        return f"{self.rules.name} {h!r}: player_0 knows {seen[0]!r}, player_1 knows {seen[1]!r}. {status}."


def _tree_names():
    from coplay.envs.trees import tree_names

    return tree_names()


ENVS.register_prefix(
    "tree", TreeGameEnv, kind="competitive",
    description="a game of coplay's exact trees (kuhn_poker, leduc_holdem) as an environment, with "
                "observations that identify information sets, for exact exploitability of learned policies",
    choices=_tree_names,
)
