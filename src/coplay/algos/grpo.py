"""Group-relative policy optimisation for agents that speak (`algo=grpo`).

A token-level policy (`coplay.nets.token_policy`) reads each agent's view of a
text environment and writes its utterance; one update plays `num_envs`
episodes to their end, in groups of `group_size` that start from the same
state (the same deal, the same problem: one reset key per group) and differ
only in their sampling keys, scores every turn with a group-relative
estimator (`algo.estimator`, any of `coplay.algos.common.group_advantages`),
and takes PPO-clipped steps on the utterances' tokens.

Seats and roles. By default (`opponent=self`) the learner plays every seat of
every game and learns from every seat, as one model that plays both sides of
a game in SPIRAL's self-play. With `opponent=latest|uniform|pfsp` the learner
takes one seat per group (drawn per group) and snapshots of itself from the
opponent pool (`algos.common.opponent_pool`) take the others; with a scripted
bot's name (`opponent=random|minimax`, `algos.common.bots`) that bot takes them,
playing the game underneath the words (a text game, `TextGame`) and saying the
move it chose. With `bot_share=p` a share p of the groups (drawn per group) is
played against a scripted bot (`bot`, random by default) instead, the learner
in one seat, and the rest as `opponent` says: self-play that also sees the
mistakes a weaker player makes. Only the learner's turns are trained.

Exploration (`explore=eps`). Each turn the learner is to speak in a group not
against a scripted bot, with probability eps it says a uniformly random legal
move (of the environment's `move_mask`) instead of its own utterance: the
exploratory moves of self-play systems (AlphaZero's root noise, the
epsilon-greedy moves of TD-Gammon-style self-play), which put the game in
positions a settled self-play would never reach and let the policy in the
other seat show what punishes them. A random move is not the policy's, so its
turn is not trained and takes no part in any group's statistics; the turns
before and after it are trained on the outcome it led to. The model is conditioned
on the agent's index (its role); `share_params=false` gives every agent index a
model of its own.

The loss, for an utterance y with tokens y_1..y_n, sequence advantage A and
per-token ratio r_t = pi(y_t | view, y_<t) / pi_old(y_t | view, y_<t):

    l_t = -min(r_t A, clip(r_t, 1 - eps, 1 + eps) A)
          - ent_coef H_t + kl_coef (exp(q_t) - q_t - 1),   q_t = log pi_ref(y_t) - log pi(y_t)

averaged over tokens as `token_norm` says (sequence, token or constant: GRPO's,
DAPO's and Dr. GRPO's aggregations, `coplay.algos.common.token_loss`).

Decoding (`decoding`). By default the policy may write any tokens of its
alphabet, and an utterance that names no legal move has the environment's
outcome (a forfeit by default): the format is part of what is learned. With
`decoding=moves` it writes only utterances the environment understands (its
`move_tokens()`), and with `decoding=legal` only the moves legal now (its
`move_mask`), token by token (`coplay.nets.token_policy`); the PPO ratio and
the exact evaluation score the utterances under the same restriction.

The reference policy of the KL term is the initial one (kept only when
`kl_coef > 0`), or, with `reference_every=K`, the policy as it was at the last
multiple of K updates: each stretch of K updates then solves a game
regularised towards the previous stretch's result, whose fixed point is an
equilibrium of the game itself (the regularised Nash dynamics of DeepNash,
Perolat et al., 2022, with the regulariser in the loss instead of the reward).

Rewards beyond the environment's: `entropy_reward=tau` adds -tau log pi(y) to
each utterance's speaker, and `repeat_penalty=lambda` takes lambda times the
share of the update's utterances of the same agent (of `repeat_agents`) that
are the same utterance (R-Zero's repetition penalty, Huang et al., 2025, with
exact matches for its BLEU clusters): a batch-level term that no single episode
can compute, and that keeps a proposer from posing one problem over and over.

Padding, finished episodes' steps, the opponents' turns and the tokens after
an utterance's `<end>` carry no weight anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.algos.base import Capabilities, Health, Trainer
from coplay.algos.common import opponent_pool, ppo
from coplay.algos.common.bots import BOTS, make_bot
from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.common.group_advantages import Episodes, estimator, view_keys
from coplay.algos.common.group_rl import GroupRLConfig, check_group_rl
from coplay.algos.common.matches import outcomes
from coplay.algos.common.repetition import agent_set, repeat_share
from coplay.algos.common.rollout import play_until_done
from coplay.algos.common.token_loss import aggregate_tokens, clipped_token_loss, token_mean
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.core.types import EnvSpec
from coplay.envs.text.base import MovesAsMask, TextEnv
from coplay.envs.text.games import TextGame
from coplay.envs.text.vocab import PAD, spoken
from coplay.nets.token_policy import TokenPolicy, Utterance
from coplay.wrappers import EpisodeStats

POOL_OPPONENTS = ("latest", "uniform", "pfsp")
OPPONENTS = ("self", *POOL_OPPONENTS, *BOTS)
ALPHABETS = ("speech", "all")
DECODINGS = ("free", "moves", "legal")


@dataclass(frozen=True)
class Config(GroupRLConfig):
    rollout_len: int = param(0, "the most steps an episode may take (one still running then is cut and scored "
                                "by the rewards it has had); 0: the environment's max_steps", min=0)
    ent_coef: float = param(0.0, "per-token entropy bonus weight", min=0.0)
    entropy_reward: float = param(0.0, "tau: each utterance y adds -tau log pi(y) to its speaker's reward "
                                       "(maximum-entropy RL over utterances)", min=0.0)
    repeat_penalty: float = param(0.0, "lambda: each utterance of an agent in repeat_agents loses lambda times the "
                                       "share of that agent's utterances in the update that are the same as it "
                                       "(R-Zero's repetition penalty: keeps a proposer's problems varied)", min=0.0)
    repeat_agents: str = param("all", "the agents (indices, comma-separated, e.g. 0 for text:arithmetic_roles' "
                                      "proposer) whose utterances repeat_penalty counts; all: every agent")
    alphabet: str = param("speech", "tokens the policy may write: speech (the environment's own words and <end>; "
                                    "which of them, in what order and where to stop is still learned) or all "
                                    "(the whole vocabulary)", choices=ALPHABETS)
    decoding: str = param("free", "which utterances the policy may write: free (any tokens of its alphabet: the "
                                  "format is learned), moves (only the environment's moves, written as it reads "
                                  "them) or legal (only the moves legal now, the environment's move_mask)",
                          choices=DECODINGS)
    share_params: bool = param(True, "one model for every seat and role (else one per agent index)")
    opponent: str = param("self", "who plays the other seats: self (the learner, every seat learns), a "
                                  "snapshot from the pool drawn latest, uniform or by pfsp, or a scripted bot "
                                  "(random, minimax) playing the game under a text game's words (the learner "
                                  "takes one seat per group)", choices=OPPONENTS)
    bot_share: float = param(0.0, "share of the groups in which a scripted bot (algo.bot) takes every seat but "
                                  "the learner's (one seat per group, drawn); the other groups are played as "
                                  "algo.opponent says. Needs a text game", min=0.0, max=1.0)
    bot: str = param("random", "the scripted bot of the bot_share groups", choices=tuple(BOTS))
    explore: float = param(0.0, "epsilon: each learner turn outside the bot groups is, with this probability, "
                                "a uniformly random legal move instead of the policy's, and is not trained", min=0.0,
                           max=1.0)
    pool_size: int = param(8, "snapshots kept in the opponent pool (the oldest leaves first)", min=1)
    snapshot_every: int = param(10, "updates between snapshots of the learner joining the pool", min=1)
    pfsp_power: float = param(2.0, "PFSP weight (1 - score rate) ** power", min=0.0)
    pfsp_decay: float = param(0.99, "per-update decay of the results PFSP weighs by", min=0.0, max=1.0)
    width: int = param(64, "transformer width", min=1)
    layers: int = param(2, "transformer blocks", min=1)
    heads: int = param(4, "attention heads (must divide width)", min=1)

    def horizon(self, spec: EnvSpec) -> int:
        """The most steps one episode of an update may take."""
        return self.rollout_len or spec.max_steps


@struct.dataclass
class TrainState:
    params: Any          # one model, or each leaf [N, ...] (one per agent index) with share_params=false
    opt_state: Any
    reference: Any       # the KL's reference params where kl_coef > 0 (initial, or the last refresh's), else {}
    pool: Any            # opponent_pool.Pool with a pool opponent (latest, uniform, pfsp), else {}
    baseline: jax.Array  # [1, N] rae's moving average per role (unused by the other estimators)
    key: jax.Array
    updates: jax.Array


def _over(result: dict[str, jax.Array], games: jax.Array, prefix: str) -> dict[str, jax.Array]:
    """The learner's mean return, win, draw and loss over the episodes where `games` [E]
    (0 where there are none)."""
    n = jnp.maximum(jnp.sum(games), 1)
    return {prefix + k: jnp.sum(jnp.where(games, result[k], 0.0)) / n for k in ("return", "win", "draw", "loss")}


def _row(x: jax.Array, agents: jax.Array) -> jax.Array:
    """x [E, N, ...], agents [E, K] -> [E, K, ...]."""
    idx = agents.reshape(*agents.shape, *([1] * (x.ndim - 2)))
    return jnp.take_along_axis(x, idx, axis=1)


def _scripted(tokens: jax.Array) -> Utterance:
    """Utterances [..., T] that no policy wrote (a bot's, a random move's): log-probabilities 0."""
    return Utterance(tokens=tokens, log_prob=jnp.zeros(tokens.shape[:-1], jnp.float32),
                     length=jnp.sum(spoken(tokens), axis=-1).astype(jnp.int32),
                     token_log_prob=jnp.zeros(tokens.shape, jnp.float32))


class GRPO(Trainer[Config]):
    """GRPO with a token-level policy for one seed (see the module's doc)."""

    name = "grpo"
    config_class = Config
    capabilities = Capabilities(discrete_actions=False, utterances=True, turn_based=True)
    return_convention = ("episode return averaged over agents, the policy in every seat (0 by construction in a "
                         "zero-sum game against itself; on kuhn_poker and leduc_holdem see eval/exploitability)")

    def __init__(self, config: Config, env: Env, num_updates: int):
        super().__init__(config, env, num_updates)
        c, spec = config, env.spec
        n = spec.num_agents
        check_group_rl(c, env, "grpo")
        assert isinstance(env, TextEnv)
        if c.width % c.heads:
            raise ConfigError(f"algo.heads={c.heads} must divide algo.width={c.width}")
        self.repeat_agents = agent_set(c.repeat_agents, n, spec.name)
        self.estimate = estimator(c.estimator)
        if c.opponent != "self" and n < 2:
            raise ConfigError(f"algo.opponent={c.opponent} needs another seat, and {spec.name!r} has one agent; "
                              f"use algo.opponent=self")
        if c.bot_share > 0 and c.opponent in BOTS:
            raise ConfigError(f"algo.bot_share={c.bot_share} mixes a scripted bot into self-play or pool play, and "
                              f"algo.opponent={c.opponent} is a bot in every group already; use algo.bot_share=0, "
                              f"or algo.opponent=self or one of {', '.join(POOL_OPPONENTS)}")
        if c.bot_share > 0 and n < 2:
            raise ConfigError(f"algo.bot_share={c.bot_share} gives a scripted bot another seat, and {spec.name!r} "
                              f"has one agent; use algo.bot_share=0")
        self.bot: Policy | None = None
        bot, setting = (c.opponent, "algo.opponent") if c.opponent in BOTS else (c.bot, "algo.bot")
        if c.opponent in BOTS or c.bot_share > 0:
            if not isinstance(env, TextGame):
                raise ConfigError(f"{setting}={bot} is a scripted bot, which plays the game under a text "
                                  f"game's words, and {spec.name!r} is not a text game (a TextGame: text:kuhn_poker, "
                                  f"text:leduc_holdem, text:tic_tac_toe, text:connect_four); use "
                                  + ("algo.bot_share=0" if setting == "algo.bot" else
                                     f"algo.opponent=self or one of {', '.join(POOL_OPPONENTS)}"))
            self.bot = make_bot(bot, env.game)
        self.horizon = c.horizon(spec)
        self.turn_based = spec.turn_based and n > 1
        self.slots = 1 if self.turn_based else n        # utterances written per step
        samples = self.horizon * c.num_envs * self.slots
        if samples % c.minibatches:
            raise ConfigError(f"algo.minibatches={c.minibatches} must divide the turns of one update "
                              f"({self.horizon} steps x {c.num_envs} episodes x {self.slots} = {samples})")
        self.env: TextEnv = env
        self.num_agents = n
        self.view_len = int(spec.obs_space.shape[-1])
        self.max_tokens = int(spec.action_space.shape[-1])
        vocab = int(max(spec.action_space.nvec))   # type: ignore[attr-defined]  # MultiDiscrete (capabilities)
        self.move_table = env.move_tokens()             # [A, T] each move's utterance
        self.model = TokenPolicy(vocab, n, self.view_len, self.max_tokens, c.width, c.layers, c.heads,
                                 alphabet=env.speech_tokens() if c.alphabet == "speech" else None,
                                 moves=None if c.decoding == "free" else self.move_table)
        self.num_moves = len(env.move_texts)
        self.optimizer = ppo.adam(c, num_updates)
        self.estimator_options = c.estimator_options()

    @property
    def num_envs(self) -> int:
        return int(self.config.num_envs)

    # ----- the model ----------------------------------------------------------------------------
    def _params_of(self, params: Any, agent: jax.Array) -> Any:
        """The model agent `agent` speaks with."""
        return params if self.config.share_params else jax.tree.map(lambda p: p[agent], params)

    def _generate(self, params: Any, views: jax.Array, agents: jax.Array, key: jax.Array,
                  legal: jax.Array | None = None) -> Utterance:
        """views [B, K, L], agents [B, K], legal moves [B, K, A] (decoding=legal) -> utterances [B, K, ...]."""
        b, k = agents.shape
        keys = jax.random.split(key, b * k).reshape(b, k, -1)
        temperature = self.config.temperature

        def one(v, a, kk, ok):   # (vmap passes legal=None through as None)
            return self.model.generate(self._params_of(params, a), v, a, kk, temperature, ok)

        return jax.vmap(jax.vmap(one))(views, agents, keys, legal)

    def _token_log_probs(self, params: Any, views: jax.Array, agents: jax.Array, tokens: jax.Array,
                         legal: jax.Array | None = None):
        """[B] samples (legal moves [B, A] with decoding=legal) -> (log-probabilities [B, T], entropies [B, T])."""
        temperature = self.config.temperature
        return jax.vmap(lambda v, a, u, ok: self.model.token_log_probs(
            self._params_of(params, a), v, a, u, temperature, ok))(views, agents, tokens, legal)

    def _legal(self, env_state: Any, agents: jax.Array) -> jax.Array | None:
        """The moves legal now for each speaker [E, K, A] (decoding=legal), else None."""
        if self.config.decoding != "legal":
            return None
        return _row(jax.vmap(self.env.move_mask)(env_state), agents)

    def _fresh_params(self, key: jax.Array) -> Any:
        if self.config.share_params:
            return self.model.init(key)
        return jax.vmap(self.model.init)(jax.random.split(key, self.num_agents))

    # ----- the contract ---------------------------------------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        k_params, k_state = jax.random.split(key)
        params = self._fresh_params(k_params)
        c = self.config
        pool: Any = opponent_pool.create(params, c.pool_size) if c.opponent in POOL_OPPONENTS else {}
        return TrainState(params=params, opt_state=self.optimizer.init(params),
                          reference=params if c.kl_coef > 0 else {}, pool=pool,
                          baseline=jnp.zeros((1, self.num_agents), jnp.float32), key=k_state,
                          updates=jnp.zeros((), jnp.int32))

    def policy(self) -> Policy:
        n = self.num_agents

        legal_only, a = self.config.decoding == "legal", self.num_moves

        def act(params, obs, mask, key, carry, reset):
            # decoding=legal reads the legal moves from the mask where it has one flag per move (the game
            # under a text game, or the text environment seen through MovesAsMask); elsewhere any move
            b = obs.shape[0]
            legal = mask if legal_only and mask.shape[-1] == a else None
            out = self._generate(params, obs, jnp.broadcast_to(jnp.arange(n), (b, n)), key, legal)
            return out.tokens, carry

        env = MovesAsMask(self.env) if legal_only else self.env
        return Policy(act=act, initial_carry=lambda batch: jnp.zeros((*batch, n, 0)), env=EpisodeStats(env))

    def policy_params(self, state: TrainState) -> Any:
        return state.params

    def health(self) -> Health:
        c = self.config
        return Health(ranges={"loss/approx_kl": (-1e-3, ppo.KL_BEYOND_CLIP * c.clip_eps,
                                                 f"far beyond the clip range algo.clip_eps={c.clip_eps}")})

    def evaluator(self, episodes: int) -> Evaluator:
        """Self-play episodes (the policy in every seat), with the rate of invalid
        utterances; on a game with an exact tree (text:kuhn_poker, text:leduc_holdem)
        also the text policy's exploitability and NashConv (the same value in every
        episode's entry)."""
        play = make_evaluator(self.policy(), episodes)
        from coplay.envs.text.tree_games import TextTreeGame

        if not isinstance(self.env, TextTreeGame):
            return play
        from coplay.envs.text.scoring import score_text_policy

        env, share, temperature = self.env, self.config.share_params, self.config.temperature
        legal_only = self.config.decoding == "legal"

        def evaluate(params, key):
            out = play(params, key)
            score = score_text_policy(env, self.model, params, temperature, per_role=not share, legal_only=legal_only)
            full = lambda v: jnp.full((episodes,), v, jnp.float32)  # noqa: E731
            out.update({"exploitability": full(score.exploitability), "nash_conv": full(score.nash_conv),
                        "invalid_mass": full(score.invalid.mean())})
            return out

        return evaluate

    # ----- one update -------------------------------------------------------------------------------
    def _play(self, state: TrainState, key: jax.Array):
        """Play `num_envs` episodes in groups; returns per-step buffers [H, E, ...], whether
        each episode is still running [E], the learner's seat [E] (-1: every seat), each
        episode's opponent slot [E] and whether a scripted bot plays its other seats [E]."""
        c, n, h, k_slots = self.config, self.num_agents, self.horizon, self.slots
        e, groups = c.num_envs, c.num_envs // c.group_size
        k_reset, k_seat, k_opp, k_run = jax.random.split(key, 4)
        starts = jnp.repeat(jax.random.split(k_reset, groups), c.group_size, axis=0)
        env_state, ts = jax.vmap(self.env.reset)(starts)
        seat = jnp.full((e,), -1, jnp.int32)
        opponent = jnp.zeros((e,), jnp.int32)          # the pool's slot (self and bots: none)
        vs_bot = jnp.full((e,), c.opponent in BOTS)
        if c.bot_share > 0:
            drawn = jax.random.uniform(jax.random.fold_in(k_seat, 1), (groups,)) < c.bot_share
            vs_bot = jnp.repeat(drawn, c.group_size)
        if c.opponent != "self" or c.bot_share > 0:
            seat = jnp.repeat(jax.random.randint(k_seat, (groups,), 0, n, jnp.int32), c.group_size)
            if c.opponent == "self":
                seat = jnp.where(vs_bot, seat, -1)     # self-play groups: the learner in every seat
        if c.opponent in POOL_OPPONENTS:
            drawn = opponent_pool.sample(state.pool, k_opp, groups, c.opponent, c.pfsp_power)
            opponent = jnp.repeat(drawn, c.group_size)
        t_max = self.max_tokens
        buffers = {
            "view": jnp.zeros((h, e, k_slots, self.view_len), jnp.int32),
            "agent": jnp.zeros((h, e, k_slots), jnp.int32),
            "tokens": jnp.full((h, e, k_slots, t_max), PAD, jnp.int32),
            "logp": jnp.zeros((h, e, k_slots, t_max), jnp.float32),
            "learner": jnp.zeros((h, e, k_slots), bool),
            "reward": jnp.zeros((h, e, n), jnp.float32),       # the environment's
            "surprise": jnp.zeros((h, e, n), jnp.float32),     # -log pi(utterance) of the learner's turns
            "acted": jnp.zeros((h, e, n), bool),
            "invalid": jnp.zeros((h, e, n), bool),
        }
        if c.decoding == "legal":
            buffers["legal"] = jnp.zeros((h, e, k_slots, self.num_moves), bool)
        if self.estimate.needs_state:
            buffers["state"] = jnp.zeros((h, e, n), jnp.int32)
        if c.explore > 0:
            buffers["explored"] = jnp.zeros((h, e, k_slots), bool)

        def body(t, carry):
            env_state, ts, alive, buf = carry
            k_me, k_them, k_env = jax.random.split(jax.random.fold_in(k_run, t), 3)
            if self.turn_based:
                agents = jnp.argmax(ts.active, axis=-1).astype(jnp.int32)[:, None]
            else:
                agents = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (e, n))
            views = _row(ts.obs, agents)
            legal = self._legal(env_state, agents)
            said = self._generate(state.params, views, agents, k_me, legal)
            spoke = _row(ts.active, agents) & alive[:, None]
            if c.opponent == "self" and c.bot_share == 0:
                learner = spoke
            else:
                theirs = self._opponents(state, env_state, views, agents, opponent, vs_bot, k_them, legal)
                mine = (seat[:, None] < 0) | (agents == seat[:, None])
                said = jax.tree.map(lambda a, b: jnp.where(mine.reshape(*mine.shape, *([1] * (a.ndim - 2))), a, b),
                                    said, theirs)
                learner = spoke & mine
            if c.explore > 0:
                said, explored = self._explore(said, env_state, agents, learner & ~vs_bot[:, None], k_me, legal)
                learner = learner & ~explored
            action = jnp.full((e, n, t_max), PAD, jnp.int32).at[jnp.arange(e)[:, None], agents].set(said.tokens)
            env_state, nxt = jax.vmap(self.env.step)(env_state, action, jax.random.split(k_env, e))
            acted = jnp.zeros((e, n), bool).at[jnp.arange(e)[:, None], agents].set(learner)
            invalid = nxt.info.get("invalid_utterance", jnp.zeros((e, n), bool))
            surprise = jnp.zeros((e, n)).at[jnp.arange(e)[:, None], agents].set(
                jnp.where(learner, -said.log_prob, 0.0))
            step = {"view": views, "agent": agents, "tokens": said.tokens, "logp": said.token_log_prob,
                    "learner": learner, "reward": jnp.where(alive[:, None], nxt.reward, 0.0), "surprise": surprise,
                    "acted": acted, "invalid": invalid & alive[:, None]}
            if self.estimate.needs_state:
                step["state"] = view_keys(ts.obs)
            if legal is not None:
                step["legal"] = legal
            if c.explore > 0:
                step["explored"] = explored
            buf = {k: buf[k].at[t].set(v.astype(buf[k].dtype)) for k, v in step.items()}
            return env_state, nxt, alive & ~nxt.done, buf

        start = (env_state, ts, jnp.ones((e,), bool), buffers)
        _, _, alive, buf = play_until_done(self.env, h, body, start, lambda carry: ~carry[2])
        return buf, alive, seat, opponent, vs_bot

    def _explore(self, said: Utterance, env_state: Any, agents: jax.Array, eligible: jax.Array,
                 key: jax.Array, legal: jax.Array | None) -> tuple[Utterance, jax.Array]:
        """Replace each `eligible` utterance [E, K] with probability `explore` by a uniformly
        random legal move's (`legal` [E, K, A]: the step's, where decoding=legal made it);
        returns the utterances and where they were replaced."""
        k_coin, k_move = jax.random.split(jax.random.fold_in(key, 0x5E))
        if legal is None:
            legal = _row(jax.vmap(self.env.move_mask)(env_state), agents)                # [E, K, A]
        move = jax.random.categorical(k_move, jnp.where(legal, 0.0, -jnp.inf))         # [E, K]
        explored = eligible & legal.any(-1) & (jax.random.uniform(k_coin, eligible.shape) < self.config.explore)
        random = _scripted(self.move_table[move])                                       # [E, K, ...]
        pick = lambda r, u: jnp.where(explored.reshape(*explored.shape, *([1] * (u.ndim - 2))), r, u)  # noqa: E731
        return jax.tree.map(pick, random, said), explored

    def _opponents(self, state: TrainState, env_state: Any, views: jax.Array, agents: jax.Array,
                   opponent: jax.Array, vs_bot: jax.Array, key: jax.Array, legal: jax.Array | None) -> Utterance:
        """What the opponents would say in every game [E] (kept where they are to speak):
        the scripted bot's move in words where `vs_bot`, else a pool snapshot's utterance
        (self-play groups: none, the learner speaks in every seat)."""
        e = agents.shape[0]
        pooled = None
        if self.config.opponent in POOL_OPPONENTS:
            def against(p, v, a, kk, ok):   # one game's opponent, with its own parameters (ok: None passes)
                one = jax.tree.map(lambda x: x[None], ok)
                return jax.tree.map(lambda x: x[0], self._generate(p, v[None], a[None], kk, one))

            pooled = jax.vmap(against)(opponent_pool.gather(state.pool, opponent), views, agents,
                                       jax.random.split(key, e), legal)
        if self.bot is None:
            assert pooled is not None
            return pooled
        game: TextGame = self.env  # type: ignore[assignment]  # checked in __init__
        k_bot = key if pooled is None else jax.random.fold_in(key, 1)
        moves, _ = self.bot.act(None, env_state.obs, env_state.legal, k_bot, self.bot.initial_carry((e,)),
                                jnp.zeros((e,), bool))                                      # [E, N]
        scripted = _scripted(game.utterance_of(_row(moves, agents)))                      # [E, K, ...]
        if pooled is None:
            return scripted
        return jax.tree.map(lambda b, p: jnp.where(vs_bot.reshape(-1, *([1] * (b.ndim - 1))), b, p),
                            scripted, pooled)

    def _advantages(self, buf: dict, state: TrainState) -> tuple[jax.Array, jax.Array]:
        """Per-turn advantages [H, E, N] from the update's episodes, and the new baseline."""
        c = self.config
        e = c.num_envs
        reward = buf["reward"] + c.entropy_reward * buf["surprise"]
        if c.repeat_penalty > 0:
            reward = reward - c.repeat_penalty * self._repeats(buf)
        ep = Episodes(reward=jnp.swapaxes(reward, 0, 1), acted=jnp.swapaxes(buf["acted"], 0, 1),
                      group=jnp.arange(e, dtype=jnp.int32) // c.group_size,
                      state=jnp.swapaxes(buf["state"], 0, 1) if self.estimate.needs_state else None)
        if self.estimate.stateful:
            adv, baseline = self.estimate.fn(ep, state.baseline, **self.estimator_options)
        else:
            adv, baseline = self.estimate.fn(ep, **self.estimator_options), state.baseline
        return jnp.swapaxes(adv, 0, 1), baseline

    def _repeats(self, buf: dict) -> jax.Array:
        """[H, E, N]: at each learner turn of an agent in `repeat_agents`, the share of that
        agent's learner utterances in the update that are the same as the one said there."""
        said = buf["learner"] & jnp.isin(buf["agent"], jnp.asarray(self.repeat_agents))
        return repeat_share(buf["tokens"], buf["agent"], said, self.num_agents)

    def _loss(self, params: Any, mb: dict) -> tuple[jax.Array, dict[str, jax.Array]]:
        c = self.config
        logp, entropy = self._token_log_probs(params, mb["view"], mb["agent"], mb["tokens"], mb.get("legal"))
        weight = mb["learner"].astype(jnp.float32)
        tokens = spoken(mb["tokens"]) & mb["learner"][:, None]
        loss, parts = clipped_token_loss(logp, mb["logp"], mb["adv"], tokens, weight, clip_eps=c.clip_eps,
                                         norm=c.token_norm, max_tokens=self.max_tokens, ref_logp=mb.get("ref_logp"),
                                         kl_coef=c.kl_coef)
        loss = loss - c.ent_coef * aggregate_tokens(entropy, tokens, weight, c.token_norm, self.max_tokens)
        ratio = parts["ratio"]
        stats = {"loss/policy": parts["policy"], "loss/entropy": token_mean(entropy, tokens),
                 "loss/approx_kl": token_mean((ratio - 1.0) - parts["log_ratio"], tokens),
                 "loss/clip_frac": token_mean((jnp.abs(ratio - 1.0) > c.clip_eps).astype(jnp.float32), tokens)}
        if parts["kl"] is not None:
            stats["loss/kl_ref"] = token_mean(parts["kl"], tokens)
        return loss, stats

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_play, k_epochs = jax.random.split(state.key, 3)
        buf, alive, seat, opponent, vs_bot = self._play(state, k_play)
        adv, baseline = self._advantages(buf, state)
        batch = {"view": buf["view"], "agent": buf["agent"], "tokens": buf["tokens"], "logp": buf["logp"],
                 "learner": buf["learner"], "adv": jnp.take_along_axis(adv, buf["agent"], axis=2)}
        if "legal" in buf:
            batch["legal"] = buf["legal"]
        batch = jax.tree.map(lambda v: v.reshape(-1, *v.shape[3:]), batch)
        batch["adv"] = jnp.where(batch["learner"], batch["adv"], 0.0)
        if c.kl_coef > 0:
            batch["ref_logp"] = self._token_log_probs(state.reference, batch["view"], batch["agent"],
                                                      batch["tokens"], batch.get("legal"))[0]
        params, opt_state, stats = ppo.train_epochs(k_epochs, self._loss, self.optimizer, state.params,
                                                    state.opt_state, batch, c.epochs, ppo.shuffled(c.minibatches))

        returns = buf["reward"].sum(0)                                       # [E, N] the environment's
        pool = state.pool
        updates = state.updates + 1
        result = outcomes(returns, jnp.maximum(seat, 0))                    # (self-play groups: not read)
        if c.opponent != "self":
            theirs = ~vs_bot if c.opponent in POOL_OPPONENTS else vs_bot    # the groups against algo.opponent
            if c.opponent in POOL_OPPONENTS:
                pool = opponent_pool.record(pool, opponent, result["points"], ~alive & theirs, c.pfsp_decay)
                pool = opponent_pool.add(pool, params, updates, updates % c.snapshot_every == 0)
            stats.update(_over(result, theirs, ""))
        if c.bot_share > 0:
            stats.update(_over(result, vs_bot, "bot/"))
            stats["bot/share"] = jnp.mean(vs_bot.astype(jnp.float32))
        stats.update(self._metrics(buf, batch, returns, alive))
        reference = state.reference
        if c.kl_coef > 0 and c.reference_every > 0:
            refresh = updates % c.reference_every == 0
            reference = jax.tree.map(lambda new, old: jnp.where(refresh, new, old), params, reference)
        new = TrainState(params=params, opt_state=opt_state, reference=reference, pool=pool,
                         baseline=baseline, key=key, updates=updates)
        return new, stats

    def _metrics(self, buf: dict, batch: dict, returns: jax.Array, alive: jax.Array) -> dict[str, jax.Array]:
        turns = jnp.maximum(jnp.sum(buf["acted"]), 1)
        learner = batch["learner"]
        said = jnp.sum(spoken(batch["tokens"]) & learner[:, None], axis=-1)
        metrics = {f"return/{i}": returns[:, i].mean() for i in range(self.num_agents)}
        metrics.update({
            "invalid": jnp.sum(buf["invalid"] & buf["acted"]) / turns,
            "utterance_length": jnp.sum(said) / turns,
            "turns_per_episode": jnp.sum(buf["acted"]) / self.config.num_envs,
            "finished": jnp.mean(~alive),
            "zero_advantage": jnp.sum(learner & (batch["adv"] == 0)) / turns,
        })
        if "explored" in buf:   # the share of the learner's turns (trained or not) that were random moves
            explored = jnp.sum(buf["explored"])
            metrics["explored"] = explored / jnp.maximum(explored + jnp.sum(buf["acted"]), 1)
        return metrics

