"""IPPO: independent PPO (de Witt et al., 2020).

Each agent learns from its own observation with its own value estimate: MAPPO
(`coplay.algos.mappo`) with a decentralised critic. The whole PPO machinery is
shared; only the critic's input differs, and that is the algorithm."""

from __future__ import annotations

from dataclasses import dataclass

from coplay.algos import mappo
from coplay.core.config import param
from coplay.core.env import Env


@dataclass(frozen=True)
class Config(mappo.Config):
    critic: str = param("local", "critic input: own observation (IPPO) or global state (MAPPO)",
                        choices=("local", "global"))


steps_per_update = mappo.steps_per_update


def make_trainer(config: Config, env: Env, num_updates: int) -> mappo.Trainer:
    return mappo.Trainer(config, env, num_updates, name="ippo")
