"""The config of `algo=lm_grpo`: a pretrained language model trained with LoRA on a
text environment (`coplay.lm.grpo`). Importing it needs neither torch nor
transformers, so the CLI can check a config before anything is loaded."""

from __future__ import annotations

from dataclasses import dataclass

from coplay.algos.base import Capabilities, TrainerConfig
from coplay.algos.common.group_advantages import ESTIMATORS
from coplay.algos.common.token_loss import TOKEN_NORMS
from coplay.core.config import param
from coplay.core.types import EnvSpec
from coplay.lm.policy import DECODINGS

ADAPTERS = ("shared", "per_role")
CAPABILITIES = Capabilities(discrete_actions=False, utterances=True, turn_based=True)


@dataclass(frozen=True)
class Config(TrainerConfig):
    model: str = param("smollm2", "the language model: smollm2 (SmolLM2-135M-Instruct, after `coplay lm "
                                  "fetch-smollm2`), tiny (a 2-layer Llama with random weights), a directory saved "
                                  "by transformers, a .gguf file, or a model id of a hub you can reach")
    model_seed: int = param(0, "algo.model=tiny: the seed of its random weights", min=0)
    num_envs: int = param(16, "episodes per update: num_envs / group_size groups of group_size episodes", min=1)
    group_size: int = param(4, "episodes per group: a group's episodes start from the same state (the same deal) "
                               "with different sampling keys", min=1)
    estimator: str = param("grpo", "the advantage estimator (coplay.algos.common.group_advantages)",
                           choices=tuple(ESTIMATORS))
    adapters: str = param("shared", "shared: one LoRA adapter plays every role; per_role: one adapter per role on "
                                    "the one frozen base model", choices=ADAPTERS)
    lora_rank: int = param(8, "LoRA rank", min=1)
    lora_alpha: int = param(16, "LoRA scale numerator (the update is scaled by alpha / rank)", min=1)
    lr: float = param(1e-4, "Adam learning rate of the adapters", min=0.0, min_exclusive=True)
    epochs: int = param(1, "passes over each batch", min=1)
    minibatches: int = param(1, "minibatches per epoch", min=1)
    clip_eps: float = param(0.2, "PPO ratio clip, per generated token", min=0.0, min_exclusive=True)
    max_grad_norm: float = param(1.0, "gradient-norm clip, per adapter", min=0.0, min_exclusive=True)
    token_norm: str = param("sequence", "how token terms are averaged: sequence (per reply, then over replies: "
                                        "GRPO), token (over all tokens: DAPO), constant (token sum / "
                                        "max_new_tokens: Dr. GRPO)", choices=TOKEN_NORMS)
    kl_coef: float = param(0.0, "weight of the per-token KL to the base model (k3 estimator; the base model is "
                                "the adapters switched off); 0: none", min=0.0)
    reference_every: int = param(0, "updates between refreshes of the KL's reference to the adapters as they are "
                                    "then (regularised Nash dynamics, as algo=grpo); 0: the base model throughout",
                                 min=0)
    anneal_lr: bool = param(False, "decay the learning rate linearly to 0 over the run")
    temperature: float = param(1.0, "sampling temperature, in training and evaluation", min=0.0,
                               min_exclusive=True)
    max_new_tokens: int = param(8, "the most tokens of one reply", min=1)
    decoding: str = param("free", "free: any reply, parsed by the environment (the format is learned); legal: "
                                  "one of the legal moves, drawn by the model's probability of its reply",
                          choices=DECODINGS)
    gamma: float = param(1.0, "discount of the turn-level estimators (mars, at_grpo, gigpo)", min=0.0, max=1.0)
    rae_alpha: float = param(0.95, "rae: decay of the baseline's moving average per role", min=0.0, max=1.0)
    gigpo_omega: float = param(1.0, "gigpo: weight of the step-level (anchor-state) advantage", min=0.0)
    batch_size: int = param(32, "sequences per forward pass", min=1, affects_results=False)

    def update_steps(self, spec: EnvSpec) -> int:
        """Steps reserved per update: the environment's max_steps for each of the
        num_envs episodes (as for algo=grpo)."""
        return self.num_envs * spec.max_steps

    @property
    def steps_per_update(self) -> int:
        raise NotImplementedError("lm_grpo's steps per update depend on the environment: update_steps(spec)")
