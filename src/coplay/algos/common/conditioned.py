"""What the preference-conditioned trainers share (`pc_mappo`, `mo_qmix`): one
network takes the preference weight as input, each episode draws its own
(`coplay.wrappers.Preference`), and evaluations play that one network at
weights spread evenly over the simplex, reporting each one's vector return so
that the experiment layer scores the front as it scores the weight sweep's.

A trainer mixes in `Conditioned` ahead of its family's trainer and builds its
environment with `conditioned_env` before that trainer's `__init__`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

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


class Conditioned:
    """Acting and evaluation of one preference-conditioned network (see the module doc)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    config: Any                     # has `weights`, `show_weight` and `concentration`
    objectives: Env                 # the environment with its vector reward, before the preference is shown
    preferences: np.ndarray | None  # [W, K] the evaluation's weights (set by `conditioned_env`)
    fronts: Fronts | None
    objective_names: tuple[str, ...]
    num_objectives: int
    wrap: Callable[[Env], Env]      # the family trainer's: the environment as it steps it

    def conditioned_env(self, env: Env, config: Any) -> Env:
        """The environment the family's trainer is built on: the vector reward kept, each
        objective in `info`, a weight drawn per episode and shown. Refuses a scalar reward
        first, naming the trainers that take it."""
        check_env_support(env.spec, self.name, self.capabilities)
        check_show_weight(config)
        self.objectives = Objectives(env)
        self.num_objectives = env.spec.reward_dim
        self.preferences = spread_weights(env.spec.reward_dim, config.weights)
        self.fronts = Fronts(self.preferences, self.front)
        self.objective_names = env.spec.objective_names
        return Preference(self.objectives, concentration=config.concentration)

    def update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]:
        """The family trainer's update; `return` is the utility w . R of each episode under its
        own weight, not the mean of the objectives the family would report."""
        state, metrics = super().update(state)  # type: ignore[misc]
        metrics.pop("return_sum", None)
        metrics["return"] = metrics["utility"]
        return state, metrics

    def at_weight(self, weight: Any) -> Policy:
        """The policy acting for one preference (`[K]`; may be traced)."""
        return dataclasses.replace(super().policy(), env=self.wrap(Preference(self.objectives,  # type: ignore[misc]
                                                                              weights=weight)))

    def _weights(self) -> np.ndarray:
        assert self.preferences is not None, "conditioned_env sets the evaluation weights"
        return self.preferences

    def policy(self) -> Policy:
        """The policy at evaluation weight `algo.show_weight` (what `coplay eval` and `record` play)."""
        return self.at_weight(self._weights()[self.config.show_weight])

    def evaluator(self, episodes: int) -> Evaluator:
        """The policy plays `episodes` episodes at each evaluation weight: its return in
        each objective (`w<i>/objective/<name>`), and `return`, its utility under each
        weight averaged over the weights."""
        w = jnp.asarray(self._weights(), jnp.float32)

        def evaluate(params: Any, key: jax.Array) -> dict[str, jax.Array]:
            play = lambda weight, k: make_evaluator(self.at_weight(weight), episodes)(params, k)  # noqa: E731
            out = jax.vmap(play)(w, jax.random.split(key, w.shape[0]))       # each [W, episodes]
            return per_weight_results(out, w, self.objective_names)

        return evaluate

    def front(self, results: Mapping[str, np.ndarray]) -> np.ndarray:
        """`[S, W, K]`: each seed's mean vector return of the policy at every evaluation weight."""
        return read_front(results, self.config.weights, self.objective_names)
