"""What the two group-relative trainers share: the compiled token policy's
(`algo=grpo`) and the language model's on the host (`algo=lm_grpo`). One
configuration of the group-RL family (episodes in groups, the estimator and its
options, the clipped token loss, the KL and its reference, the optimiser) and the
checks that refuse what cannot train, written once.

The reference of the KL term is the initial policy, or with `reference_every=K`
the policy as it was at the last multiple of K updates: each stretch of K updates
then solves a game regularised towards the previous stretch's result, whose fixed
point is an equilibrium of the game itself (the regularised Nash dynamics of
DeepNash, Perolat et al., 2022, with the regulariser in the loss instead of the
reward)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coplay.algos.base import TrainerConfig
from coplay.algos.common.group_advantages import ESTIMATORS, estimator
from coplay.algos.common.token_loss import TOKEN_NORMS, TokenNorm
from coplay.core.config import param
from coplay.core.errors import ConfigError
from coplay.core.types import EnvSpec
from coplay.envs.text.base import TextEnv
from coplay.envs.text.host_game import HostTextEnv


@dataclass(frozen=True)
class GroupRLConfig(TrainerConfig):
    """The group-RL family's fields; a trainer adds its own (its model, its decoding)
    and may give these other defaults (`coplay.core.config.param_default`)."""

    episodes: int = param(64, "episodes per update: episodes / group_size groups of group_size episodes", min=1)
    group_size: int = param(8, "episodes per group: a group's episodes start from the same state (the same deal, "
                               "the same problem) with different sampling keys", min=1)
    estimator: str = param("grpo", "the advantage estimator (coplay.algos.common.group_advantages)",
                           choices=tuple(ESTIMATORS))
    gamma: float = param(1.0, "discount of the turn-level estimators (mars, at_grpo, turn_rloo, gigpo)",
                         min=0.0, max=1.0)
    rae_alpha: float = param(0.95, "rae: decay of the baseline's moving average per game and role",
                             min=0.0, max=1.0)
    gigpo_omega: float = param(1.0, "gigpo: weight of the step-level (anchor-state) advantage", min=0.0)
    lr: float = param(1e-3, "Adam learning rate", min=0.0, min_exclusive=True)
    anneal_lr: bool = param(False, "decay the learning rate linearly to 0 over the run")
    epochs: int = param(2, "passes over each batch", min=1)
    minibatches: int = param(1, "minibatches per epoch", min=1)
    clip_eps: float = param(0.2, "PPO ratio clip, per token", min=0.0, min_exclusive=True)
    max_grad_norm: float = param(1.0, "gradient-norm clip (global; per adapter for a language model)", min=0.0,
                                 min_exclusive=True)
    token_norm: TokenNorm = param("sequence", "how token terms are averaged: sequence (per utterance, then over "
                                        "utterances: GRPO), token (over all tokens: DAPO), constant (token sum / "
                                        "the most tokens of an utterance: Dr. GRPO)", choices=TOKEN_NORMS)
    kl_coef: float = param(0.0, "weight of the per-token KL to the reference policy (k3 estimator); 0: none",
                           min=0.0)
    reference_every: int = param(0, "updates between refreshes of the KL's reference policy to the current one "
                                    "(regularised Nash dynamics); 0: the initial policy throughout", min=0)
    temperature: float = param(1.0, "sampling temperature, in training and evaluation", min=0.0,
                               min_exclusive=True)

    def horizon(self, spec: EnvSpec) -> int:
        """The most steps one episode of an update may take."""
        return spec.max_steps

    def update_steps(self, spec: EnvSpec) -> int:
        """Steps reserved per update: `horizon` steps for each of the `episodes` episodes
        (episodes that end sooner stop early; the budget counts their full reservation)."""
        return self.episodes * self.horizon(spec)

    @property
    def steps_per_update(self) -> int:
        raise NotImplementedError("a group-RL trainer's steps per update depend on the environment: "
                                  "update_steps(spec)")

    def estimator_options(self) -> dict[str, Any]:
        """The keyword options the chosen estimator declares (`Estimator.options`), from this config."""
        values = {"gamma": self.gamma, "omega": self.gigpo_omega, "alpha": self.rae_alpha}
        return {k: values[k] for k in estimator(self.estimator).options}


def check_group_rl(config: GroupRLConfig, env: Any, trainer: str) -> None:
    """Refuse a group-RL config that cannot train on `env`: an environment that does not
    speak, groups that do not divide the episodes, an estimator that needs state keys the
    environment does not give, a reference refreshed without a KL term to use it."""
    c, spec = config, env.spec
    if not isinstance(env, (TextEnv, HostTextEnv)):
        raise ConfigError(f"{trainer} trains on text environments (coplay.envs.text.TextEnv), and {spec.name!r} is "
                          f"a {type(env).__name__}")
    if c.episodes % c.group_size:
        raise ConfigError(f"algo.group_size={c.group_size} must divide algo.episodes={c.episodes} (the episodes "
                          f"of one update), e.g. algo.episodes={c.group_size * max(1, c.episodes // c.group_size)}")
    if estimator(c.estimator).needs_state and not env.views_are_states:
        raise ConfigError(f"algo.estimator={c.estimator} groups turns by the state they were taken in, and "
                          f"{spec.name!r} gives no state keys (its views are not its states: "
                          f"Env.views_are_states is False); estimators that need none: "
                          f"{', '.join(k for k, e in ESTIMATORS.items() if not e.needs_state)}")
    if c.reference_every and not c.kl_coef:
        raise ConfigError(f"algo.reference_every={c.reference_every} refreshes the reference policy of the KL "
                          f"term, and algo.kl_coef=0 has none; set algo.kl_coef > 0 or algo.reference_every=0")
