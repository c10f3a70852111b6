"""Self-play PPO: one learner against a pool of its own past snapshots.

Every parallel game seats the learner in one seat (drawn anew for each game, so
it learns every seat) and a snapshot from the opponent pool in the others.
Opponents are drawn per game from the pool (`coplay.algos.common.opponent_pool`):
the latest snapshot, a uniform one (fictitious self-play), or prioritised by
the learner's results against them (PFSP, Vinyals et al., 2019). Each game
gathers its own opponent's parameters inside the compiled step, so hundreds
of games against different opponents run in one `vmap`. Every
`snapshot_every` updates the learner's current policy joins the pool, which
keeps the newest `pool_size` snapshots.

Learning uses only the learner's seat. In turn-based games the learner acts
on its own turns (the policy loss is weighted by `active`), but its value is
trained at every step, the opponent's turns included, so the advantage of a
move sees the opponent's reply and GAE never bootstraps from an untrained
value between turns. The critic sees whether it is the learner's turn.

Training games open with k uniformly random moves (k drawn from
0..`random_opening` per game), which carry no policy gradient: self-play
between near-deterministic policies otherwise visits few positions, and a
policy trained on few positions fails in the others (against random or
perfect play). A one-hot of the seat is appended to each observation, so one
network plays every seat: to the flattened observation (`algo.torso=mlp`, the
default, as the defaults below were tuned), or as constant channels of an image
`[H, W, C]` read by a CNN (`algo.torso=cnn`, or `auto`). Feed-forward networks only.

The defaults (learning rate 1e-3, entropy bonus 0.1, 64 games x 16 steps per
update) are tuned on tic-tac-toe and connect four: with PPO's usual 3e-4 and
0.01 the updates were tiny (approximate KL ~1e-3) and the policy collapsed
onto one line of play before it had learned to defend.

Evaluation (the run's `eval/...` figures) plays the learner against uniformly
random legal moves in every seat; `return` is the learner's mean return there
and `win`, `draw`, `loss` its rates.

`SelfPlayPPO(..., opponents=pool)` trains a best response to a fixed
population instead (`opponent_pool.from_population`): no snapshots are added
and opponents are drawn with the pool's weights; `init_against(key, pool)`
starts a learner against another population of the same shapes, so one
compiled trainer serves every population. PSRO uses this.

The PPO objective and minibatch epochs are MAPPO's (`coplay.algos.common.ppo`),
weighted by the learner's own moves for the policy and by every step for the
value.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from coplay.algos.base import Capabilities, Health, Trainer, per_env
from coplay.algos.common import opponent_pool, ppo
from coplay.algos.common.advantages import gae
from coplay.algos.common.arena import PoolConfig, after_games, against_random, redraw_ended, seat_row
from coplay.algos.common.matches import outcomes, sample_from_mask
from coplay.algos.common.opponent_pool import Pool
from coplay.algos.common.rollout import reset_envs, rollout
from coplay.core.compile import jit
from coplay.core.config import param, param_default
from coplay.core.env import Env
from coplay.core.errors import ConfigError
from coplay.core.policy import Evaluator, Policy
from coplay.core.types import TimeStep
from coplay.nets import ACTIVATIONS, distributions
from coplay.nets.agent import AgentNet, apply_agents, choose_torso, torso_param
from coplay.wrappers import AutoReset, EpisodeStats
from coplay.wrappers.agent_id import with_agent_id


@dataclass(frozen=True)
class Config(ppo.PPOConfig, PoolConfig):
    lr: float = param(1e-3, "Adam learning rate", min=0.0, min_exclusive=True)
    num_envs: int = param(64, "parallel games per seed", min=1)
    rollout_len: int = param(16, "steps per game between updates", min=1)
    minibatches: int = param(4, "minibatches per epoch", min=1)
    gamma: float = param(0.99, "discount", min=0.0, max=1.0)
    ent_coef: float = param(0.1, "entropy bonus weight", min=0.0)
    hidden_size: int = param(128, "units per hidden layer", min=1)
    num_layers: int = param(2, "hidden layers", min=1)
    activation: str = param("relu", "hidden activation", choices=tuple(ACTIVATIONS))
    # The flattened board by default: the defaults here were tuned with it, and runs made before
    # the field existed keep their parameters.
    torso: str = torso_param("mlp")
    greedy_eval: bool = param(True, "evaluate with the most likely action (else sample the policy)")
    opponent: str = param("pfsp", "how each game's opponent is drawn from the pool",
                          choices=("latest", "uniform", "pfsp"))
    pool_size: int = param_default(PoolConfig, "pool_size", 16)
    snapshot_every: int = param_default(PoolConfig, "snapshot_every", 20)
    random_opening: int = param(3, "each training game opens with k uniformly random moves, k drawn from "
                                   "0..random_opening per game (wider coverage of positions)", min=0)


@struct.dataclass
class TrainState:
    params: dict
    opt_state: Any
    pool: Pool
    key: jax.Array
    updates: jax.Array
    env_state: Any = per_env()
    ts: TimeStep = per_env()           # batched [E, ...]
    seat: jax.Array = per_env()        # [E] int32 the learner's seat in each game
    opponent: jax.Array = per_env()    # [E] int32 the pool slot playing the other seats
    opening: jax.Array = per_env()     # [E] int32 random moves still to play at the start of each game


def features(obs: jax.Array, image: bool = False) -> jax.Array:
    """obs [B, N, ...] -> [B, N, D + N]: each seat's flattened view and its one-hot seat;
    with `image`, obs [B, N, H, W, C] -> [B, N, H, W, C + N]: the seat as N constant channels."""
    b, n = obs.shape[:2]
    if image:
        return with_agent_id(obs.astype(jnp.float32), obs.ndim - 2)
    flat = obs.reshape(b, n, -1).astype(jnp.float32)
    return jnp.concatenate([flat, jnp.broadcast_to(jnp.eye(n, dtype=jnp.float32), (b, n, n))], axis=-1)


class SelfPlayPPO(Trainer[Config]):
    """Self-play PPO for one seed; `update` is pure and the experiment layer vmaps it over seeds."""

    name = "selfplay_ppo"
    config_class = Config
    capabilities = Capabilities(turn_based=True, rivals=True, min_agents=2)
    return_convention = "the learner's mean episode return against uniformly random legal moves, every seat"

    def __init__(self, config: Config, env: Env, num_updates: int, opponents: Pool | None = None):
        super().__init__(config, env, num_updates)
        spec = env.spec
        batch = config.num_envs * config.rollout_len
        if batch % config.minibatches:
            raise ConfigError(f"algo.minibatches={config.minibatches} must divide num_envs * rollout_len = {batch}")
        self.fixed_pool = opponents
        self.sampling = "fixed" if opponents is not None else config.opponent
        self.env = AutoReset(EpisodeStats(env))
        self.num_agents = spec.num_agents
        c = config
        self.dist = distributions.Categorical()
        self.torso = choose_torso(c.torso, spec.obs_space.shape)     # refused before anything compiles
        self.features = functools.partial(features, image=self.torso == "cnn")
        self.actor = AgentNet(spec.num_actions, c.hidden_size, c.num_layers, c.activation, False, torso=self.torso)
        self.critic = AgentNet(0, c.hidden_size, c.num_layers, c.activation, False, torso=self.torso)
        self.optimizer = ppo.adam(c, num_updates)

    # ----- networks ---------------------------------------------------------------------------
    def _apply(self, net, params, x: jax.Array) -> jax.Array:
        """x [B, N, D] -> [B, N, out] (or [B, N] for the critic)."""
        b, n = x.shape[:2]
        _, y = apply_agents(net, params, jnp.zeros((b, n, 0)), x, jnp.zeros(b, bool), shared=True)
        return y

    def _critic_in(self, x: jax.Array, active: jax.Array) -> jax.Array:
        """x [..., D] or [..., H, W, C] and whether it is the learner's turn, `active` [...],
        appended as one more entry (or one more constant channel)."""
        turn = active.reshape(*active.shape, *([1] * (x.ndim - active.ndim))).astype(x.dtype)
        return jnp.concatenate([x, jnp.broadcast_to(turn, (*x.shape[:-1], 1))], axis=-1)

    def _opponent_logits(self, pool: Pool, slots: jax.Array, x: jax.Array) -> jax.Array:
        """Each game's own opponent: params gathered per game, x [E, N, D] -> [E, N, A]."""
        per_game = opponent_pool.gather(pool, slots)
        return jax.vmap(lambda p, xe: self._apply(self.actor, p, xe[None])[0])(per_game, x)

    # ----- initialisation (one seed, outside vmap) --------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        """A fresh learner against the constructor's population, or else its own snapshots."""
        return self.init_against(key, self.fixed_pool)

    def init_against(self, key: jax.Array, pool: Pool | None) -> TrainState:
        """A fresh learner against `pool` (shaped like the constructor's population),
        or, with None and no population, against a pool of its own snapshots."""
        k_actor, k_critic, k_env, k_seat, k_opp, k_open, k_state = jax.random.split(key, 7)
        env_state, ts = reset_envs(self.env, k_env, self.config.num_envs)
        x = self.features(ts.obs[:1])[0]
        none, no = jnp.zeros((1, 0)), jnp.zeros((1,), bool)
        params = {"actor": self.actor.init(k_actor, none, x[:1], no),
                  "critic": self.critic.init(k_critic, none, self._critic_in(x, ts.active[0])[:1], no)}
        if pool is None and self.fixed_pool is None:
            pool = opponent_pool.create(params["actor"], self.config.pool_size)
        elif pool is None or self.fixed_pool is None:
            raise ConfigError("selfplay_ppo: a learner against a fixed population needs the population both "
                              "when the trainer is built (opponents=) and when it starts (init_against)")
        e = self.config.num_envs
        return TrainState(
            params=params, opt_state=self.optimizer.init(params), env_state=env_state, ts=ts, pool=pool,
            seat=jax.random.randint(k_seat, (e,), 0, self.num_agents, jnp.int32),
            opponent=opponent_pool.sample(pool, k_opp, e, self.sampling, self.config.pfsp_power),
            opening=self._draw_opening(k_open, e), key=k_state, updates=jnp.zeros((), jnp.int32),
        )

    # ----- acting -------------------------------------------------------------------------------
    def _draw_opening(self, key: jax.Array, e: int) -> jax.Array:
        return jax.random.randint(key, (e,), 0, self.config.random_opening + 1, jnp.int32)

    def _act(self, params, pool: Pool, carry, ts: TimeStep, key):
        seat, opponent, opening = carry
        e, n = ts.active.shape
        k_seat, k_opp, k_me, k_them, k_open, k_rand = jax.random.split(key, 6)
        # A game that just ended starts again with a new seat, opponent and opening.
        seat, opponent = redraw_ended(k_seat, k_opp, ts.done, seat, opponent, pool, n, self.sampling,
                                      self.config.pfsp_power)
        opening = jnp.where(ts.done, self._draw_opening(k_open, e), opening)

        x = self.features(ts.obs)
        mine = self.dist.prepare(self._apply(self.actor, params["actor"], x), ts.action_mask)
        theirs = self.dist.prepare(self._opponent_logits(pool, opponent, x), ts.action_mask)
        a_me, a_them = self.dist.sample(k_me, mine), self.dist.sample(k_them, theirs)
        action = jnp.where(jax.nn.one_hot(seat, n, dtype=bool), a_me, a_them)
        in_opening = opening > 0
        action = jnp.where(in_opening[:, None], sample_from_mask(k_rand, ts.action_mask), action)
        value = self._apply(self.critic, params["critic"], self._critic_in(x, ts.active))
        extras = {"logp": seat_row(self.dist.log_prob(mine, action), seat), "value": seat_row(value, seat),
                  "seat": seat, "opponent": opponent, "learner_moved": seat_row(ts.active, seat) & ~in_opening}
        return (seat, opponent, opening - 1), action, extras

    def health(self) -> Health:
        return ppo.health(self.config, self.env.spec)

    def policy(self) -> Policy:
        greedy = self.config.greedy_eval

        def act(params, obs, mask, key, carry, reset):
            logits = self.dist.prepare(self._apply(self.actor, params, self.features(obs)), mask)
            return (self.dist.mode(logits) if greedy else self.dist.sample(key, logits)), carry

        return Policy(act=act, initial_carry=lambda batch: jnp.zeros((*batch, self.num_agents, 0)), env=self.env)

    def action_probs(self, params, obs: jax.Array, mask: jax.Array) -> jax.Array:
        """The actor's action probabilities: obs [B, N, ...], mask [B, N, A] -> [B, N, A]."""
        return jax.nn.softmax(self.dist.prepare(self._apply(self.actor, params, self.features(obs)), mask), axis=-1)

    def policy_params(self, state: TrainState) -> Any:
        return state.params["actor"]

    def evaluator(self, episodes: int) -> Evaluator:
        """`evaluate(params, key) -> dict of [episodes']` against random legal moves, the
        learner in each seat for an equal share of the games (episodes' >= episodes)."""
        return against_random(self.env, self.policy(), episodes)

    # ----- learning -----------------------------------------------------------------------------
    def _loss(self, params, mb: dict):
        logits = self.dist.prepare(self._apply(self.actor, params["actor"], mb["x"][:, None])[:, 0],
                                   mb["action_mask"])
        value = self._apply(self.critic, params["critic"], mb["critic_in"][:, None])[:, 0]
        return ppo.objective(self.dist, logits, value, mb, self.config, mb["moved"], jnp.ones_like(mb["moved"]))

    def update(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        c = self.config
        key, k_roll, k_epochs = jax.random.split(state.key, 3)
        act = lambda carry, ts, k: self._act(state.params, state.pool, carry, ts, k)  # noqa: E731
        (env_state, ts, (seat, opponent, opening)), traj = rollout(
            self.env, act, state.env_state, state.ts, (state.seat, state.opponent, state.opening), k_roll,
            c.rollout_len)

        # The learner's seat only: [T, E, ...].
        mine = traj.extras["seat"]
        x = seat_row(jax.vmap(self.features)(traj.ts.obs), mine)
        active = seat_row(traj.ts.active, mine)
        moved = traj.extras["learner_moved"]   # the learner's own moves: random opening moves excluded
        last_x = seat_row(self.features(ts.obs), seat)
        last_value = self._apply(self.critic, state.params["critic"],
                                 self._critic_in(last_x, seat_row(ts.active, seat))[:, None])[:, 0]
        reward = seat_row(traj.reward, mine)
        adv, target = gae(reward, traj.extras["value"], traj.done, last_value, c.gamma, c.gae_lambda)
        batch = {"x": x, "critic_in": self._critic_in(x, active), "moved": moved,
                 "action_mask": seat_row(traj.ts.action_mask, mine), "action": seat_row(traj.action, mine),
                 "logp": traj.extras["logp"], "value": traj.extras["value"], "adv": adv, "target": target}
        batch = jax.tree.map(lambda v: v.reshape(-1, *v.shape[2:]), batch)

        params, opt_state, metrics = ppo.train_epochs(k_epochs, self._loss, self.optimizer, state.params,
                                                      state.opt_state, batch, c.epochs, ppo.shuffled(c.minibatches))

        # Results against each opponent feed PFSP; then, on schedule, the learner joins the pool.
        ended = traj.info["episode/done"]
        result = outcomes(traj.info["episode/return"], mine)
        updates = state.updates + 1
        pool = after_games(state.pool, traj.extras["opponent"], result["points"], ended, c.pfsp_decay, params["actor"],
                           updates, c.snapshot_every, snapshots=self.fixed_pool is None)

        metrics.update(self._metrics(traj, result, ended, state.pool))
        new_state = TrainState(params=params, opt_state=opt_state, env_state=env_state, ts=ts, pool=pool,
                               seat=seat, opponent=opponent, opening=opening, key=key, updates=updates)
        return new_state, metrics

    def _metrics(self, traj, result: dict, ended: jax.Array, pool: Pool) -> dict[str, jax.Array]:
        """Training-game figures (against the pool), means over the games that ended (NaN if none)."""
        done = ended.astype(jnp.float32)
        count = jnp.sum(done)
        mean = lambda v: jnp.sum(v * done) / jnp.where(count > 0, count, jnp.nan)  # noqa: E731
        age = (jnp.max(pool.added_at) - pool.added_at[traj.extras["opponent"]]).astype(jnp.float32)
        return {"episodes": count, "return": mean(result["return"]), "win": mean(result["win"]),
                "draw": mean(result["draw"]), "loss": mean(result["loss"]),
                "length": mean(traj.info["episode/length"].astype(jnp.float32)),
                "pool/size": jnp.sum(pool.filled).astype(jnp.float32), "pool/opponent_age": mean(age)}


def response_trainer(config: Config, env: Env, updates: int, population: Pool):
    """`train(pool, key) -> (actor params, metrics)`: a fresh learner trained for `updates`
    updates against the fixed population `pool` (a best response to its mixture), compiled
    once for every pool shaped like `population` (`opponent_pool.from_population`)."""
    if isinstance(updates, bool) or not isinstance(updates, int) or updates < 1:
        raise ConfigError(f"updates={updates!r} must be an integer >= 1")
    trainer = SelfPlayPPO(config, env, updates, opponents=population)

    def train(pool: Pool, key: jax.Array):
        state, metrics = jax.lax.scan(lambda s, _: trainer.update(s), trainer.init_against(key, pool), None,
                                      length=updates)
        return trainer.policy_params(state), metrics

    return jit(train)

