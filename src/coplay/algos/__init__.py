"""Algorithms, one module each, registered by name."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from coplay.algos import ippo, iql, mappo, qmix, selfplay_ppo, vdn
from coplay.core.errors import unknown_name


@dataclass(frozen=True)
class AlgoEntry:
    name: str
    module: ModuleType
    description: str
    continuous_actions: bool = False

    @property
    def Config(self) -> type:  # noqa: N802 - the module's Config class
        return self.module.Config


ALGOS: dict[str, AlgoEntry] = {
    "mappo": AlgoEntry("mappo", mappo, "multi-agent PPO with a centralised critic on global_state",
                       continuous_actions=True),
    "ippo": AlgoEntry("ippo", ippo, "independent PPO: each agent's critic sees its own observation",
                       continuous_actions=True),
    "iql": AlgoEntry("iql", iql, "independent Q-learning: each agent learns its own Q from its own reward"),
    "vdn": AlgoEntry("vdn", vdn, "value decomposition: the team's Q is the sum of the agents' Q"),
    "qmix": AlgoEntry("qmix", qmix, "monotonic mixing of the agents' Q by hypernetworks on the global state"),
    "selfplay_ppo": AlgoEntry("selfplay_ppo", selfplay_ppo,
                              "PPO against a pool of its own snapshots (latest, uniform or PFSP), every seat"),
}


def get_algo(name: str) -> AlgoEntry:
    if name not in ALGOS:
        raise unknown_name("algorithm", name, ALGOS)
    return ALGOS[name]


def list_algos() -> list[str]:
    return sorted(ALGOS)
