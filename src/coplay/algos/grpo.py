"""Group-relative policy optimisation for agents that speak (`algo=grpo`).

A token-level policy (`coplay.nets.token_policy`) reads each agent's view of a
text environment and writes its utterance; one update plays `episodes`
episodes to their end, in groups of `group_size` that start from the same
state (the same deal, the same problem: one reset key per group) and differ
only in their sampling keys, scores every turn with a group-relative
estimator (`algo.estimator`, any of `coplay.algos.common.group_advantages`),
and takes PPO-clipped steps on the utterances' tokens.

Seats and roles (`opponent`, `bot_share`, `explore`: the self-play arena,
`coplay.algos.common.arena`). By default the learner plays every seat of every
game and learns from every seat, as one model that plays both sides of a game
in SPIRAL's self-play; snapshots of itself from a pool, or a scripted bot
saying its moves in words, can take the other seats of some or all groups, and
exploratory moves (uniformly random legal moves, never trained) can replace
some of its own. Only the learner's turns are trained. The model is
conditioned on the agent's index (its role); `share_params=false` gives every
agent index a model of its own.

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
`kl_coef > 0`), or the policy at the last refresh (`reference_every`, the
regularised Nash dynamics of `coplay.algos.common.group_rl`).

Rewards beyond the environment's: `entropy_reward` (maximum-entropy RL over
utterances) and `repeat_penalty` (R-Zero's repetition penalty, Huang et al.,
2025, with exact matches for its BLEU clusters: a batch-level term that keeps a
proposer from posing one problem over and over). Padding, finished episodes'
steps, the opponents' turns and the tokens after `<end>` carry no weight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

import jax
import jax.numpy as jnp
from flax import struct

from coplay.algos.base import Capabilities, Health, Trainer
from coplay.algos.common import opponent_pool, ppo
from coplay.algos.common.arena import (
    POOL_OPPONENTS,
    ArenaConfig,
    after_group_games,
    check_opponents,
    choose,
    draw_seats,
    exploratory_moves,
    opponents_say,
    seat_rows,
)
from coplay.algos.common.evaluation import text_evaluator
from coplay.algos.common.group_advantages import Episodes, estimator, view_keys
from coplay.algos.common.group_rl import GroupRLConfig, check_group_rl
from coplay.algos.common.repetition import agent_set, repeat_share
from coplay.algos.common.rollout import play_until_done
from coplay.algos.common.token_loss import aggregate_tokens, clipped_token_loss, token_mean
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.core.types import EnvSpec
from coplay.envs.text.base import MovesAsMask, TextEnv
from coplay.envs.text.vocab import PAD, spoken
from coplay.nets.token_policy import Speakers, TokenPolicy, scripted
from coplay.wrappers import EpisodeStats

Alphabet = Literal["speech", "all"]
Decoding = Literal["free", "moves", "legal"]      # token by token: any tokens, any move, a legal move
ALPHABETS: tuple[str, ...] = get_args(Alphabet)
DECODINGS: tuple[str, ...] = get_args(Decoding)


@dataclass(frozen=True)
class Config(GroupRLConfig, ArenaConfig):
    max_turns: int = param(0, "the most steps an episode may take (one still running then is cut and scored "
                                "by the rewards it has had); 0: the environment's max_steps", min=0)
    ent_coef: float = param(0.0, "per-token entropy bonus weight", min=0.0)
    entropy_reward: float = param(0.0, "tau: each utterance y adds -tau log pi(y) to its speaker's reward "
                                       "(maximum-entropy RL over utterances)", min=0.0)
    repeat_penalty: float = param(0.0, "lambda: each utterance of an agent in repeat_agents loses lambda times the "
                                       "share of that agent's utterances in the update that are the same as it "
                                       "(R-Zero's repetition penalty: keeps a proposer's problems varied)", min=0.0)
    repeat_agents: str = param("all", "the agents (indices, comma-separated, e.g. 0 for text:arithmetic_roles' "
                                      "proposer) whose utterances repeat_penalty counts; all: every agent")
    alphabet: Alphabet = param("speech", "tokens the policy may write: speech (the environment's own words and <end>; "
                                    "which of them, in what order and where to stop is still learned) or all "
                                    "(the whole vocabulary)", choices=ALPHABETS)
    decoding: Decoding = param("free", "which utterances the policy may write: free (any tokens of its alphabet: the "
                                  "format is learned), moves (only the environment's moves, written as it reads "
                                  "them) or legal (only the moves legal now, the environment's move_mask)",
                          choices=DECODINGS)
    share_params: bool = param(True, "one model for every seat and role (else one per agent index)")
    width: int = param(64, "transformer width", min=1)
    layers: int = param(2, "transformer blocks", min=1)
    heads: int = param(4, "attention heads (must divide width)", min=1)

    # Plain self-play settles on a pure strategy in poker; mirror descent (a KL to a reference
    # refreshed every few hundred updates), legal decoding and a smaller model do not.
    _POKER: ClassVar[dict[str, Any]] = dict(decoding="legal", estimator="dr_grpo", kl_coef=0.2, reference_every=100,
                                            lr=3e-4, anneal_lr=True, layers=1, width=32)
    recommended: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "text:kuhn_poker": _POKER,
        "text:leduc_holdem": {**_POKER, "kl_coef": 0.5, "reference_every": 200, "entropy_reward": 0.5},
    }

    def horizon(self, spec: EnvSpec) -> int:
        """The most steps one episode of an update may take."""
        return self.max_turns or spec.max_steps


@struct.dataclass
class TrainState:
    params: Any          # one model, or each leaf [N, ...] (one per agent index) with share_params=false
    opt_state: Any
    reference: Any       # the KL's reference params where kl_coef > 0 (initial, or the last refresh's), else {}
    pool: Any            # opponent_pool.Pool with a pool opponent (latest, uniform, pfsp), else {}
    baseline: jax.Array  # [1, N] rae's moving average per role (unused by the other estimators)
    key: jax.Array
    updates: jax.Array


class GRPO(Trainer[Config]):
    """GRPO with a token-level policy for one seed (see the module's doc)."""

    name = "grpo"
    config_class = Config
    capabilities = Capabilities(discrete_actions=False, utterances=True, turn_based=True,
                                image_obs=False)   # a token policy: its observations are token ids
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
        self.bot = check_opponents(c.opponent, c.bot_share, c.bot, env)
        self.horizon = c.horizon(spec)
        self.turn_based = spec.turn_based and n > 1
        self.slots = 1 if self.turn_based else n        # utterances written per step
        samples = self.horizon * c.episodes * self.slots
        if samples % c.minibatches:
            raise ConfigError(f"algo.minibatches={c.minibatches} must divide the turns of one update "
                              f"({self.horizon} steps x {c.episodes} episodes x {self.slots} = {samples})")
        self.env: TextEnv = env
        self.num_agents = n
        self.view_len = int(spec.obs_space.shape[-1])
        self.max_tokens = int(spec.action_space.shape[-1])
        vocab = int(max(spec.action_space.nvec))   # type: ignore[attr-defined]  # MultiDiscrete (capabilities)
        self.move_table = env.move_tokens()             # [A, T] each move's utterance
        self.model = TokenPolicy(vocab, n, self.view_len, self.max_tokens, c.width, c.layers, c.heads,
                                 alphabet=env.speech_tokens() if c.alphabet == "speech" else None,
                                 moves=None if c.decoding == "free" else self.move_table)
        self.speakers = Speakers(self.model, n, c.share_params, c.temperature)
        self.num_moves = len(env.move_texts)
        self.optimizer = ppo.adam(c, num_updates)
        self.estimator_options = c.estimator_options()

    @property
    def num_envs(self) -> int:
        """The update's episodes, played side by side."""
        return int(self.config.episodes)

    # ----- the model ----------------------------------------------------------------------------
    def _legal(self, env_state: Any, agents: jax.Array) -> jax.Array | None:
        """The moves legal now for each speaker [E, K, A] (decoding=legal), else None."""
        if self.config.decoding != "legal":
            return None
        return seat_rows(jax.vmap(self.env.move_mask)(env_state), agents)

    # ----- the contract ---------------------------------------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        k_params, k_state = jax.random.split(key)
        params = self.speakers.init(k_params)
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
            out = self.speakers.generate(params, obs, jnp.broadcast_to(jnp.arange(n), (b, n)), key, legal)
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
        """Self-play episodes with the rate of invalid utterances, and the text policy's
        exact exploitability or its results against random legal moves (`text_evaluator`)."""
        c = self.config
        return text_evaluator(self.env, self.policy(), self.model, episodes, c.temperature,
                              per_role=not c.share_params, legal_only=c.decoding == "legal")

    # ----- one update -------------------------------------------------------------------------------
    def _play(self, state: TrainState, key: jax.Array):
        """Play `episodes` episodes in groups; returns per-step buffers [H, E, ...], whether
        each episode is still running [E], and who sat where (`arena.Seats`)."""
        c, n, h, k_slots = self.config, self.num_agents, self.horizon, self.slots
        e, groups = c.episodes, c.episodes // c.group_size
        k_reset, k_seat, k_opp, k_run = jax.random.split(key, 4)
        starts = jnp.repeat(jax.random.split(k_reset, groups), c.group_size, axis=0)
        env_state, ts = jax.vmap(self.env.reset)(starts)
        seats = draw_seats(k_seat, k_opp, groups, c.group_size, n, c.opponent, c.bot_share,
                           state.pool if c.opponent in POOL_OPPONENTS else None, c.pfsp_power)
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
            views = seat_rows(ts.obs, agents)
            legal = self._legal(env_state, agents)
            said = self.speakers.generate(state.params, views, agents, k_me, legal)
            spoke = seat_rows(ts.active, agents) & alive[:, None]
            if c.opponent == "self" and c.bot_share == 0:
                learner = spoke
            else:
                theirs = opponents_say(self.speakers, state.pool if c.opponent in POOL_OPPONENTS else None, self.bot,
                                       self.env, env_state, views, agents, seats, k_them, legal)
                mine = (seats.seat[:, None] < 0) | (agents == seats.seat[:, None])
                said = choose(mine, said, theirs)
                learner = spoke & mine
            if c.explore > 0:   # exploratory moves (the arena's): random legal moves in words, never trained
                moves = seat_rows(jax.vmap(self.env.move_mask)(env_state), agents) if legal is None else legal
                move, explored = exploratory_moves(jax.random.fold_in(k_me, 0x5E), learner & ~seats.vs_bot[:, None],
                                                   moves, c.explore)
                said = choose(explored, scripted(self.move_table[move]), said)
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
        return buf, alive, seats

    def _advantages(self, buf: dict, state: TrainState) -> tuple[jax.Array, jax.Array]:
        """Per-turn advantages [H, E, N] from the update's episodes, and the new baseline."""
        c = self.config
        e = c.episodes
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
        """[H, E, N]: at each learner turn of an agent in `repeat_agents`, the share of its utterances
        in the update that are the same as the one said there (`repetition.repeat_share`)."""
        said = buf["learner"] & jnp.isin(buf["agent"], jnp.asarray(self.repeat_agents))
        return repeat_share(buf["tokens"], buf["agent"], said, self.num_agents)

    def _loss(self, params: Any, mb: dict) -> tuple[jax.Array, dict[str, jax.Array]]:
        c = self.config
        logp, entropy = self.speakers.token_log_probs(params, mb["view"], mb["agent"], mb["tokens"], mb.get("legal"))
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
        buf, alive, seats = self._play(state, k_play)
        adv, baseline = self._advantages(buf, state)
        batch = {"view": buf["view"], "agent": buf["agent"], "tokens": buf["tokens"], "logp": buf["logp"],
                 "learner": buf["learner"], "adv": jnp.take_along_axis(adv, buf["agent"], axis=2)}
        if "legal" in buf:
            batch["legal"] = buf["legal"]
        batch = jax.tree.map(lambda v: v.reshape(-1, *v.shape[3:]), batch)
        batch["adv"] = jnp.where(batch["learner"], batch["adv"], 0.0)
        if c.kl_coef > 0:
            batch["ref_logp"] = self.speakers.token_log_probs(state.reference, batch["view"], batch["agent"],
                                                      batch["tokens"], batch.get("legal"))[0]
        params, opt_state, stats = ppo.train_epochs(k_epochs, self._loss, self.optimizer, state.params,
                                                    state.opt_state, batch, c.epochs, ppo.shuffled(c.minibatches))

        returns = buf["reward"].sum(0)                                       # [E, N] the environment's
        updates = state.updates + 1
        pool, outcome = after_group_games(c, state.pool, seats, returns, ~alive, params, updates)
        stats.update(outcome)
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
            "turns_per_episode": jnp.sum(buf["acted"]) / self.config.episodes,
            "finished": jnp.mean(~alive),
            "zero_advantage": jnp.sum(learner & (batch["adv"] == 0)) / turns,
        })
        if "explored" in buf:   # the share of the learner's turns (trained or not) that were random moves
            explored = jnp.sum(buf["explored"])
            metrics["explored"] = explored / jnp.maximum(explored + jnp.sum(buf["acted"]), 1)
        return metrics

