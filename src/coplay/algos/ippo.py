"""IPPO: independent PPO (de Witt et al., 2020).

Each agent learns from its own observation with its own value estimate: the
MAPPO trainer (`coplay.algos.mappo`) with a decentralised critic, which reads
the agent's own observation instead of the global state. Everything else, the
networks, the objective, the rollout and the epochs, is MAPPO's."""

from __future__ import annotations

from dataclasses import dataclass

import jax

from coplay.algos import mappo
from coplay.algos.base import Capabilities
from coplay.core.types import TimeStep


@dataclass(frozen=True)
class Config(mappo.Config):
    pass


class IPPO(mappo.MAPPO):
    name = "ippo"
    config_class = Config
    capabilities = Capabilities(continuous_actions=True, recurrent=True)

    def critic_torso(self) -> str:
        return self.torso

    def critic_input(self, ts: TimeStep) -> jax.Array:
        """[B, N, ...]: each agent's own observation, read by the actor's torso (flattened by the MLP)."""
        return ts.obs
