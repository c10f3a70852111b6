"""What the preference-conditioned trainers share (`pc_mappo`, `mo_qmix`): one
network takes the preference weight as input, each episode draws its own
(`coplay.wrappers.Preference`), and evaluations play that one network at
weights spread evenly over the simplex, reporting each one's vector return so
that the experiment layer scores the front as it scores the weight sweep's.

A trainer holds a `Conditioning` and delegates to it by name: it builds its
family's machinery on the conditioning's environment, reports the utility as its
return, and acts and evaluates through it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from coplay.algos.base import Capabilities, Fronts, check_env_support
from coplay.algos.common.evaluation import make_evaluator
from coplay.algos.common.preferences import check_show_weight, per_weight_results, read_front, spread_weights
from coplay.core.config import param
from coplay.core.env import Env
from coplay.core.policy import Evaluator, Policy
from coplay.wrappers import Objectives, Preference


def weights_param() -> Any:
    """The `algo.weights` field of a conditioned trainer's config."""
    return param(16, "preference weights each evaluation plays the network at, spread evenly over the simplex of "
                     "the objectives (3 objectives: 3, 6, 10, 15, 21, ...)", min=2)


def concentration_param() -> Any:
    """The `algo.concentration` field of a conditioned trainer's config."""
    return param(1.0, "Dirichlet concentration of the weight drawn for each episode: 1 is uniform over the simplex, "
                      "below 1 favours its corners", min=0.0, min_exclusive=True)


CONDITIONED_RETURN = ("episode utility w . R under the weight the episode was played for, averaged over agents "
                      "(and, in evaluations, over the evaluation weights; undiscounted)")


class Conditioning:
    """Acting and evaluation of one preference-conditioned network (see the module doc),
    held by the trainer that trains it: the trainer builds its family's machinery on
    `env` and hands its family's policy and `wrap` to `policy` and `evaluator`."""

    def __init__(self, name: str, capabilities: Capabilities, env: Env, config: Any):
        """Refuses a scalar reward first, naming the trainers that take it."""
        check_env_support(env.spec, name, capabilities)
        check_show_weight(config)
        self.config = config
        self.objectives = Objectives(env)   # the environment with its vector reward, before the preference is shown
        self.num_objectives = env.spec.reward_dim
        self.preferences = spread_weights(env.spec.reward_dim, config.weights)     # [W, K] the evaluation's weights
        self.objective_names = env.spec.objective_names
        # what the family's trainer is built on: the vector reward kept, each objective in `info`,
        # a weight drawn per episode and shown
        self.env: Env = Preference(self.objectives, concentration=config.concentration)
        self.fronts = Fronts(self.preferences, self.front)

    def returns(self, metrics: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """The family's update metrics with `return` the utility w . R of each episode under its
        own weight, not the mean of the objectives the family would report."""
        metrics.pop("return_sum", None)
        metrics["return"] = metrics["utility"]
        return metrics

    def at_weight(self, policy: Policy, wrap: Callable[[Env], Env], weight: Any) -> Policy:
        """The family's `policy` acting for one preference (`[K]`; may be traced); `wrap`: the
        family trainer's, the environment as it steps it."""
        return dataclasses.replace(policy, env=wrap(Preference(self.objectives, weights=weight)))

    def policy(self, policy: Policy, wrap: Callable[[Env], Env]) -> Policy:
        """The policy at evaluation weight `algo.show_weight` (what `coplay eval` and `record` play)."""
        return self.at_weight(policy, wrap, self.preferences[self.config.show_weight])

    def evaluator(self, policy: Policy, wrap: Callable[[Env], Env], episodes: int) -> Evaluator:
        """The policy plays `episodes` episodes at each evaluation weight: its return in
        each objective (`w<i>/objective/<name>`), and `return`, its utility under each
        weight averaged over the weights."""
        w = jnp.asarray(self.preferences, jnp.float32)

        def evaluate(params: Any, key: jax.Array) -> dict[str, jax.Array]:
            play = lambda weight, k: make_evaluator(self.at_weight(policy, wrap, weight), episodes)(params, k)  # noqa: E731
            out = jax.vmap(play)(w, jax.random.split(key, w.shape[0]))       # each [W, episodes]
            return per_weight_results(out, w, self.objective_names)

        return evaluate

    def front(self, results: Mapping[str, np.ndarray]) -> np.ndarray:
        """`[S, W, K]`: each seed's mean vector return of the policy at every evaluation weight."""
        return read_front(results, self.config.weights, self.objective_names)
