"""PSRO with best responses trained by PPO: population learning for games without
an exact tree (Lanctot et al., 2017).

    result = psro_ppo.run(coplay.make("connect_four"), psro_ppo.Config(iterations=6), key)
    result.exploitability          # [iterations + 1] each mixture's (approximate) exploitability
    result.policy["meta_strategy"] # [K] the final mixture over the population
    result.details["br_value"]     # [iterations] what each new response earns against the mixture it answered

The population starts from the uniform random policy (an actor network with
zero weights). Every iteration:

1. the empirical meta-game: every pair of members plays `meta_games` games in
   each seating (compiled matches, `coplay.algos.common.matches`);
   `payoffs[i, j]` is member i's mean return against member j over both seats,
2. a meta-solver (`nash`, `replicator`, `uniform`;
   `coplay.algos.common.meta_solvers`) picks a mixture over the population,
3. a fresh self-play PPO learner is trained against that mixture (each game
   draws its opponent from the population with the mixture's weights, the
   learner in a random seat: `selfplay_ppo.response_trainer`) and joins the
   population.

Seats are drawn at random in every game, so the game is symmetric and one
population serves both seats; the meta-game is antisymmetric and its
equilibrium mixture is played in every seat. The games must be two-player and
zero-sum, like the meta-solvers.

The response trained at iteration t is an approximate best response to mixture
t, so `br_value[t]` (its mean return against that mixture over both seats,
read from the meta-game) estimates the mixture's exploitability from below,
the field's usual "approximate exploitability"; one more response, trained
against the final mixture and not admitted, scores the returned solution. On
games played from an exact tree (`tree:kuhn_poker`, `tree:leduc_holdem`)
every member is instead read back as a table over information sets and the
mixture's exact exploitability, (BR_0 + BR_1) / 2, is the curve.

The response trainer's settings (`lr`, `num_envs`, `hidden_size`, ...) are
the config's own fields, the PPO family's (`coplay.algos.common.ppo`) with
selfplay_ppo's defaults, so every one is `algo.FIELD=` on the command line.

Members play their stochastic policies. Populations are preallocated to
`iterations + 1` members, so the response trainer and the matches compile
once; unused members carry zero weight.

The meta-game's games of a new member against the population are two calls of
`seat_returns`, one per seating, each with its own key. `dispatch=` (a
`coplay.core.dispatch.Dispatch`, e.g. `coplay.scale.ray_tasks.RayDispatch`) makes
them elsewhere, as Ray tasks over a cluster's nodes, with the same payoffs bit for
bit; by default they run here, compiled once for the whole run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos import psro, selfplay_ppo
from coplay.algos.common import opponent_pool, ppo
from coplay.algos.common.matches import bare_env, make_match
from coplay.algos.common.meta_solvers import META_SOLVERS, solve_meta_game
from coplay.algos.solvers import GameSupport, Log, SolveResult, validate
from coplay.core.compile import jit
from coplay.core.config import param
from coplay.core.dispatch import Dispatch
from coplay.core.env import Env
from coplay.core.policy import Policy
from coplay.envs.trees import TreeArrays
from coplay.envs.trees.env import TreeGameEnv
from coplay.envs.trees.values import exploitability
from coplay.nets import ACTIVATIONS
from coplay.nets.agent import torso_param

EXACT = "exact exploitability of the meta-strategy mixture: (BR_0 + BR_1) / 2, members read back as tables"
APPROXIMATE = ("approximate exploitability: a PPO best response's mean return against the mixture, both seats "
               "(an estimate from below)")
GAMES = "two-player zero-sum games (e.g. tree:kuhn_poker, tree:leduc_holdem, tic_tac_toe, connect_four, pgx:<id>)"


@dataclass(frozen=True)
class Config(ppo.PPOConfig):
    meta_solver: str = param("nash", "how the mixture over the population is chosen: nash (linear programming), "
                                     "replicator dynamics, or uniform", choices=META_SOLVERS)
    iterations: int = param(8, "PSRO iterations: each trains a best response and adds it to the population",
                            min=1)
    br_updates: int = param(100, "PPO updates that train each best response", min=1)
    meta_games: int = param(2000, "games per pair of members and seating that estimate the meta-game", min=1)
    # The response trainer: selfplay_ppo's defaults, except that a best response should commit:
    # a small entropy bonus, and no random opening moves (against a fixed mixture every
    # position it meets is already one the mixture reaches).
    lr: float = param(1e-3, "Adam learning rate of each response", min=0.0, min_exclusive=True)
    num_envs: int = param(64, "parallel games of each response's training", min=1)
    rollout_len: int = param(16, "steps per game between updates", min=1)
    minibatches: int = param(4, "minibatches per epoch", min=1)
    gamma: float = param(0.99, "discount", min=0.0, max=1.0)
    ent_coef: float = param(0.01, "entropy bonus weight", min=0.0)
    hidden_size: int = param(128, "units per hidden layer of every member", min=1)
    num_layers: int = param(2, "hidden layers of every member", min=1)
    activation: str = param("relu", "hidden activation", choices=tuple(ACTIVATIONS))
    torso: str = torso_param("mlp")    # as selfplay_ppo's: the flattened board its defaults were tuned with
    greedy_eval: bool = param(False, "members always play their stochastic policies, in the meta-game and "
                                     "in exact scores", choices=(False,))
    random_opening: int = param(0, "each training game opens with k uniformly random moves, k drawn from "
                                   "0..random_opening per game", min=0)


def response_config(config: Config) -> selfplay_ppo.Config:
    """The response trainer's config: every field it shares with `config`."""
    ours = {f.name for f in dataclasses.fields(config)}
    return selfplay_ppo.Config(**{f.name: getattr(config, f.name) for f in dataclasses.fields(selfplay_ppo.Config)
                                  if f.name in ours})


def game_problem(game: Env) -> str | None:
    """Why PSRO with PPO responses cannot play `game`, None when it can."""
    spec = bare_env(game).spec
    if spec.num_agents != 2:
        return f"it has {spec.num_agents} players"
    return "; ".join(selfplay_ppo.SelfPlayPPO.capabilities.problems(spec)) or None


def check(game: Env, config: Config) -> None:
    """Refuse a response trainer that cannot be built (e.g. minibatches that do not divide its batch)."""
    selfplay_ppo.SelfPlayPPO(response_config(config), game, config.br_updates)


SUPPORT = GameSupport(uses=GAMES, default="tree:kuhn_poker", problem=game_problem, check=check)


def seat_scorer(game: Env, policy: Policy, games: int, second: bool) -> Callable[..., jax.Array]:
    """`score(params, population, key) -> [K]` (compiled): seat 0's mean return over `games`
    games of the member `params` against each of the K members of `population` (every
    leaf stacked [K, ...]), the member seated first, or second when `second`; every
    pairing plays with the same `key`."""
    match = make_match(game, [policy, policy], games)
    seat0_return = lambda a, b, k: jnp.mean(match([a, b], k)["return"][:, 0])  # noqa: E731
    if second:
        return jit(jax.vmap(lambda a, b, k: seat0_return(b, a, k), in_axes=(None, 0, None)))
    return jit(jax.vmap(seat0_return, in_axes=(None, 0, None)))


def seat_returns(game: Env, policy: Policy, games: int, params: Any, population: Any, key: jax.Array,
                 second: bool) -> np.ndarray:
    """One seating of a new member's games against the population (`seat_scorer`), as a
    call that may run in another process: `[K]` seat 0's mean returns."""
    return np.asarray(seat_scorer(game, policy, games, second)(params, population, key))


def run(game: Env, config: Config = Config(), key: jax.Array | None = None, *, log: Log | None = None,
        dispatch: Dispatch | None = None) -> SolveResult:
    """PSRO on two-player zero-sum game `game`.

    Returns `policy = {"population": actor params, every leaf stacked [K, ...] (member
    0 plays uniformly), "meta_strategy": [K] the final mixture}`, the curve (exact on
    game trees, else trained responses' values) at iterations 0..T, and in `details`:
    `payoffs` `[K, K]` (member i's mean return against member j, both seats),
    `meta_strategies` `[T, K]` (the mixture each iteration's response answered,
    zero-padded), `br_value` `[T]`, `member_policy` (how every member plays, a
    `Policy` for matches and tournaments), and on game trees `exact_exploitability`
    `[T + 1]` and `table` `[I, A]` (the final mixture as one behaviour policy);
    elsewhere `final_br_value`. K = T + 1, T = iterations.

    `dispatch`: where the meta-game's games are played (see the module's doc); None
    plays them here."""
    validate("psro_ppo", game, config)
    key = jax.random.PRNGKey(0) if key is None else key
    _, k_loop = jax.random.split(key)
    cap = config.iterations + 1

    responses = response_config(config)
    probe = selfplay_ppo.SelfPlayPPO(responses, game, 1)
    uniform = probe.zero_policy_params()   # zero logits: uniform play
    population = jax.tree.map(lambda x: jnp.broadcast_to(x, (cap, *x.shape)), uniform)
    policy = probe.policy()

    train = selfplay_ppo.response_trainer(responses, game, config.br_updates,
                                          opponent_pool.from_population(population, jnp.ones(cap)))
    # The new member against every member, seated first and then second: seat 0's mean return.
    as_first, as_second = (seat_scorer(game, policy, config.meta_games, second) for second in (False, True))
    exact = _exact_scorer(game, probe)

    r0 = np.zeros((cap, cap))  # r0[i, j]: seat 0's mean return with member i in seat 0, member j in seat 1

    def against_population(params: Any, key: jax.Array) -> tuple[np.ndarray, np.ndarray]:
        k1, k2 = jax.random.split(key)
        if dispatch is not None:
            first, second = dispatch(seat_returns, [(game, policy, config.meta_games, params, population, k, s)
                                                    for k, s in ((k1, False), (k2, True))])
            return first, second
        return np.asarray(as_first(params, population, k1)), np.asarray(as_second(params, population, k2))

    def admit(k: int, params: Any, key: jax.Array) -> None:
        nonlocal population
        population = jax.tree.map(lambda s, p: s.at[k].set(p), population, params)
        r0[k, :], r0[:, k] = against_population(params, key)

    def payoffs(count: int) -> np.ndarray:
        return ((r0 - r0.T) / 2.0)[:count, :count]

    def weights(mixture: np.ndarray) -> jax.Array:
        return jnp.zeros(cap, jnp.float32).at[: mixture.size].set(jnp.asarray(mixture, jnp.float32))

    keys = jax.random.split(k_loop, 2 * config.iterations + 1)
    admit(0, uniform, keys[0])
    mixtures = np.zeros((config.iterations, cap))
    br_values, exact_curve = [], []
    for t in range(config.iterations):
        count = t + 1
        mixture, _ = solve_meta_game(payoffs(count), config.meta_solver)
        mixtures[t, :count] = mixture
        if exact is not None:
            exact_curve.append(exact(population, weights(mixture))[0])
        pool = opponent_pool.from_population(population, weights(mixture))
        response, metrics = train(pool, keys[2 * t + 1])
        admit(count, response, keys[2 * t + 2])
        br_values.append(float(payoffs(count + 1)[count, :count] @ mixture))
        if log is not None:
            log({"step": t, "exploitability": exact_curve[-1] if exact is not None else br_values[-1],
                 "population": count, "br_value": br_values[-1],
                 "br_train_win": float(np.nanmean(np.asarray(metrics["win"])[-10:]))})

    final, _ = solve_meta_game(payoffs(cap), config.meta_solver)
    details: dict[str, Any] = {"payoffs": payoffs(cap), "meta_strategies": mixtures,
                               "br_value": np.asarray(br_values), "member_policy": policy}
    if exact is not None:
        value, table = exact(population, weights(final))
        exact_curve.append(value)
        curve, measure = np.asarray(exact_curve), EXACT
        details.update(exact_exploitability=curve, table=table)
    else:
        # One more response, against the final mixture, scores the returned solution.
        k_train, k_score = jax.random.split(jax.random.fold_in(k_loop, 2 * config.iterations + 1))
        response, _ = train(opponent_pool.from_population(population, weights(final)), k_train)
        first, second = against_population(response, k_score)
        details["final_br_value"] = float(((first - second) / 2.0) @ final)
        curve, measure = np.asarray([*br_values, details["final_br_value"]]), APPROXIMATE
    if log is not None:
        log({"step": config.iterations, "exploitability": float(curve[-1]), "population": cap})
    return SolveResult(exploitability=curve, steps=np.arange(config.iterations + 1), measure=measure,
                       policy={"population": population, "meta_strategy": final}, details=details)


def _exact_scorer(env: Env, trainer: selfplay_ppo.SelfPlayPPO):
    """`score(population, weights) -> (exploitability, [I, A] table)` of the mixture, for games
    with an exact tree; None for other games."""
    game = bare_env(env)
    if not isinstance(game, TreeGameEnv):
        return None
    t = TreeArrays.from_tree(game.tree)
    obs, mask, owner = game.infoset_views()
    rows = jnp.arange(owner.shape[0])

    @jit
    def score(population, w):
        # Each member as a table [I, A] over information sets, then the mixture as one behaviour policy.
        tables = jax.vmap(lambda p: trainer.action_probs(p, obs, mask)[rows, owner])(population)
        mix = psro.joint(t, psro.mixture_policy(t, tables, w, 0), psro.mixture_policy(t, tables, w, 1))
        return exploitability(t, mix), mix

    def scored(population, w) -> tuple[float, np.ndarray]:
        value, mix = score(population, w)
        return float(value), np.asarray(mix)

    return scored
