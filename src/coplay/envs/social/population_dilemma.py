"""A population playing a two-player dilemma with partner selection, direct and
third-party punishment, and public reputations: the mechanisms of Dasgupta &
Musolesi (2023, "Investigating the Impact of Direct Punishment on the Emergence of
Cooperation in Multi-Agent Reinforcement Learning Systems"), each switchable, in
pure JAX.

N agents play `rounds` rounds. A round has up to three phases, one env step each,
in which every agent acts at once:

1. select (with `partner_selection`): each agent names a partner (action j, any
   other agent). Without it, each agent's partner is drawn uniformly from the others
   at the start of the round.
2. play: each agent cooperates (0) or defects (1). Every agent i plays one game with
   its partner p(i), with its one move of the round: i gets A[a_i, a_p(i)] and p(i)
   gets A[a_p(i), a_i] (`payoff` A = ((3, 0), (5, 1)), the row player's, cooperate
   first). An agent named by several plays in each of their games.
3. punish (with `direct_punishment` or `third_party_punishment`): 0 nobody,
   1 its partner p(i) (direct; whatever the partner played), 2 the defectors of the
   game it watched (third party: each agent watches the game of one other agent k,
   k drawn at the start of the round, and may punish whichever of k and p(k)
   defected, itself excepted), 3 both. Each punishment costs the punished
   `punish_fine` and the punisher `punish_cost`, or `unjust_punish_cost` where the
   punished cooperated this round (only a direct punishment can be unjust; unset, it is
   `punish_cost`); a negative cost is a reward for punishing. The defaults make
   punishment costly to the punisher (1.0), the second-order dilemma of costly
   sanctions. The code released with the paper pays +2 for punishing a defector and
   charges 10 for punishing a cooperator, with a fine of 3 (`punish_cost=-2
   unjust_punish_cost=10`), and plays the payoff ((3, 0), (4, 1)).

Reputations (with `reputation`) are public: after each play, r_i <- (1 - rate) r_i
+ rate [a_i = cooperate] (`reputation_rate`), starting at 0.5; every agent sees every
reputation. Without it, they read 0.5.

Observation of agent i (float32, 3 + 5 N + 6): the phase (one-hot 3); its index
(one-hot N); the reputations (N); its partner (one-hot N); the agent it watches
(one-hot N); the agents that named it (N); its partner's move and its own in this
round's play (one-hot 2 each, zeros before the play); whether each player of the
watched game defected (2). Action space: Discrete(max(N, 4)), masked to the phase's
choices; an action the mask forbids names no partner (the drawn one stays), plays
defection, or punishes nobody, and is counted in `info["invalid_actions"]`.
info: "cooperation" (the share of cooperative moves, on play steps), "direct" and
"third_party" (punishments dealt this step), "reputation" (the mean), and the social
metrics on the episode's last step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.spaces import Box, Discrete, outside
from coplay.core.types import EnvSpec, TimeStep
from coplay.envs.social.metrics import Tally, report

SELECT, PLAY, PUNISH = range(3)
COOPERATE, DEFECT = 0, 1


class PopulationState(struct.PyTreeNode):
    phase: jax.Array        # [] int32 index into the env's phases
    round: jax.Array        # [] int32
    partner: jax.Array      # [N] int32 p(i)
    watched: jax.Array      # [N] int32 the agent whose game i watches
    moves: jax.Array        # [N] int32 this round's moves (-1 before the play)
    reputation: jax.Array   # [N] float32
    tally: Tally


def _other(key: jax.Array, n: int) -> jax.Array:
    """[N] for each agent a uniformly drawn other agent."""
    pick = jax.random.randint(key, (n,), 0, n - 1)
    return (pick + (pick >= jnp.arange(n))).astype(jnp.int32)


class PopulationDilemma(Env):
    def __init__(self, n_agents: int = 6, rounds: int = 10, partner_selection: bool = True,
                 direct_punishment: bool = True, third_party_punishment: bool = True, reputation: bool = True,
                 payoff: tuple = ((3.0, 0.0), (5.0, 1.0)), punish_cost: float = 1.0,
                 unjust_punish_cost: float | None = None, punish_fine: float = 3.0, reputation_rate: float = 0.5):
        def need(name, value, ok, what):
            if not ok:
                raise ConfigError(f"{name}={value!r} is out of range; it must be {what}")

        need("n_agents", n_agents, isinstance(n_agents, int) and not isinstance(n_agents, bool)
             and 3 <= n_agents <= 64, "an integer in [3, 64] (a game and a third party to watch it)")
        need("rounds", rounds, isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 1,
             "an integer >= 1")
        matrix = np.asarray(payoff, dtype=float) if np.ndim(payoff) == 2 else np.zeros(0)
        need("payoff", payoff, matrix.shape == (2, 2), "a 2 x 2 matrix ((CC, CD), (DC, DD)), the row player's")
        def number(v):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v))

        need("punish_cost", punish_cost, number(punish_cost), "a number (negative: a reward for punishing)")
        need("unjust_punish_cost", unjust_punish_cost, unjust_punish_cost is None or number(unjust_punish_cost),
             "a number (negative: a reward for punishing) or None (punish_cost)")
        need("punish_fine", punish_fine, number(punish_fine) and punish_fine >= 0, "a number >= 0")
        need("reputation_rate", reputation_rate, isinstance(reputation_rate, (int, float))
             and 0 < reputation_rate <= 1, "a number in (0, 1]")
        self.n_agents, self.rounds = n_agents, rounds
        self.selection, self.direct, self.third = bool(partner_selection), bool(direct_punishment), \
            bool(third_party_punishment)
        self.use_reputation = bool(reputation)
        self.payoff = jnp.asarray(matrix, jnp.float32)
        self.cost_defector = float(punish_cost)
        self.cost_cooperator = self.cost_defector if unjust_punish_cost is None else float(unjust_punish_cost)
        self.punish_fine, self.rate = float(punish_fine), float(reputation_rate)
        self.phases = ((SELECT,) if self.selection else ()) + (PLAY,) + \
            ((PUNISH,) if self.direct or self.third else ())
        steps = rounds * len(self.phases)
        width = 3 + 5 * n_agents + 6
        self.num_actions = max(n_agents, 4)
        self.spec = EnvSpec(name="population_dilemma", num_agents=n_agents, obs_space=Box(0.0, 1.0, (width,)),
                            action_space=Discrete(self.num_actions),
                            global_state_space=Box(0.0, 1.0, (n_agents * width,)), max_steps=steps,
                            render_text=self.render_text)

    # ----- reset --------------------------------------------------------------------------------
    def _new_round(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        k_partner, k_watch = jax.random.split(key)
        return _other(k_partner, self.n_agents), _other(k_watch, self.n_agents)

    def _reset(self, key: jax.Array) -> tuple[PopulationState, TimeStep]:
        n = self.n_agents
        partner, watched = self._new_round(key)
        state = PopulationState(phase=jnp.zeros((), jnp.int32), round=jnp.zeros((), jnp.int32), partner=partner,
                                watched=watched, moves=jnp.full((n,), -1, jnp.int32),
                                reputation=jnp.full((n,), 0.5, jnp.float32), tally=Tally.zeros(n))
        z = jnp.zeros((), jnp.int32)
        return state, self._timestep(state, jnp.zeros((n,), jnp.float32), jnp.zeros((), bool),
                                     jnp.zeros((), jnp.float32), z, z)

    # ----- dynamics -----------------------------------------------------------------------------
    def _step(self, state: PopulationState, actions: jax.Array, key: jax.Array) -> tuple[PopulationState, TimeStep]:
        n = self.n_agents
        invalid = outside(self.spec.action_space, actions) | ~jnp.take_along_axis(
            self._mask(state), jnp.clip(actions, 0, self.num_actions - 1)[:, None], 1)[:, 0]
        kind = jnp.asarray(self.phases)[state.phase]
        idx = jnp.arange(n)
        zero = jnp.zeros((n,), jnp.float32)
        # select: the named partner, or (an invalid name) the one drawn
        partner = jnp.where((kind == SELECT) & ~invalid, actions, state.partner).astype(jnp.int32)
        # play
        moves = jnp.where(kind == PLAY, jnp.where(invalid, DEFECT, actions), state.moves).astype(jnp.int32)
        mine, theirs = moves, moves[partner]
        earned = self.payoff[mine, theirs]                                          # as the one who named
        named = jnp.zeros((n,), jnp.float32).at[partner].add(self.payoff[theirs, mine])   # as the one named
        play_reward = jnp.where(kind == PLAY, earned + named, zero)
        cooperated = jnp.mean((moves == COOPERATE).astype(jnp.float32))
        reputation = jnp.where((kind == PLAY) & self.use_reputation,
                               (1 - self.rate) * state.reputation + self.rate * (moves == COOPERATE),
                               state.reputation)
        # punish
        choice = jnp.where((kind == PUNISH) & ~invalid, actions, 0)
        direct = ((choice == 1) | (choice == 3)) & self.direct
        third = ((choice == 2) | (choice == 3)) & self.third
        k, pk = state.watched, partner[state.watched]
        hit_k = third & (moves[k] == DEFECT) & (k != idx)
        hit_pk = third & (moves[pk] == DEFECT) & (pk != idx)
        fines = jnp.zeros((n,), jnp.float32).at[partner].add(direct).at[k].add(hit_k).at[pk].add(hit_pk)
        # a third party punishes only defectors; a direct punishment whatever the partner played
        cost = jnp.where(moves[partner] == DEFECT, self.cost_defector, self.cost_cooperator) * direct \
            + self.cost_defector * (hit_k.astype(jnp.float32) + hit_pk)
        punish_reward = -cost - self.punish_fine * fines
        reward = (play_reward + jnp.where(kind == PUNISH, punish_reward, zero)).astype(jnp.float32)
        # the next phase, or the next round
        last_phase = state.phase == len(self.phases) - 1
        rnd = state.round + last_phase
        new_partner, new_watched = self._new_round(key)
        done = rnd >= self.rounds
        tally = state.tally.add(reward, jnp.zeros((n,), bool))
        new = PopulationState(phase=jnp.where(last_phase, 0, state.phase + 1).astype(jnp.int32), round=rnd,
                              partner=jnp.where(last_phase, new_partner, partner),
                              watched=jnp.where(last_phase, new_watched, state.watched),
                              moves=jnp.where(last_phase, -1, moves), reputation=reputation, tally=tally)
        coop = jnp.where(kind == PLAY, cooperated, 0.0)
        return new, self._timestep(new, reward, done, coop, jnp.sum(direct, dtype=jnp.int32),
                                   jnp.sum(hit_k, dtype=jnp.int32) + jnp.sum(hit_pk, dtype=jnp.int32),
                                   jnp.sum(invalid, dtype=jnp.int32))

    # ----- observation --------------------------------------------------------------------------
    def _mask(self, state: PopulationState) -> jax.Array:
        n, a = self.n_agents, self.num_actions
        kind = jnp.asarray(self.phases)[state.phase]
        cols = jnp.arange(a)[None, :]
        select = (cols < n) & (cols != jnp.arange(n)[:, None])
        play = jnp.broadcast_to(cols < 2, (n, a))
        allowed = jnp.array([True, self.direct, self.third, self.direct and self.third])
        punish = jnp.broadcast_to((cols < 4) & jnp.pad(allowed, (0, a - 4))[None, :], (n, a))
        return jnp.select([kind == SELECT, kind == PLAY], [select, play], punish)

    def _timestep(self, state: PopulationState, reward, done, cooperation, direct, third,
                  invalid=None) -> TimeStep:
        n = self.n_agents
        kind = jnp.asarray(self.phases)[state.phase]
        eye = jnp.eye(n, dtype=jnp.float32)
        played = state.moves >= 0
        move = jax.nn.one_hot(state.moves, 2) * played[:, None]                      # [N, 2]
        k, pk = state.watched, state.partner[state.watched]
        watched_defects = jnp.stack([state.moves[k] == DEFECT, state.moves[pk] == DEFECT], -1) & played[k][:, None]
        named_by = jnp.zeros((n, n), jnp.float32).at[state.partner, jnp.arange(n)].set(1.0)
        obs = jnp.concatenate([
            jnp.broadcast_to(jax.nn.one_hot(kind, 3), (n, 3)), eye,
            jnp.broadcast_to(state.reputation, (n, n)), eye[state.partner], eye[state.watched], named_by,
            move[state.partner], move, watched_defects.astype(jnp.float32)], -1).astype(jnp.float32)
        info = {"cooperation": jnp.asarray(cooperation, jnp.float32), "direct": direct, "third_party": third,
                "reputation": jnp.mean(state.reputation), "invalid_actions": jnp.zeros((), jnp.int32)
                if invalid is None else invalid, **report(state.tally, done)}
        return TimeStep(obs=obs, reward=reward, done=done, truncated=jnp.zeros((), bool), active=jnp.ones((n,), bool),
                        action_mask=self._mask(state), global_state=obs.reshape(-1), info=info)

    def render_text(self, state: PopulationState) -> str:
        names = {SELECT: "select", PLAY: "play", PUNISH: "punish"}
        kind = self.phases[int(state.phase)]
        lines = [f"round {int(state.round) + 1} of {self.rounds}, phase {names[kind]}"]
        for i in range(self.n_agents):
            m = int(state.moves[i])
            lines.append(f"agent {i}: partner {int(state.partner[i])}, watches {int(state.watched[i])}, "
                         f"move {'-' if m < 0 else 'CD'[m]}, reputation {float(state.reputation[i]):.2f}")
        return "\n".join(lines)
