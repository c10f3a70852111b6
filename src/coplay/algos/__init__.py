"""Algorithms, one module each, registered by name."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from coplay.algos import ippo, mappo
from coplay.core.errors import unknown_name


@dataclass(frozen=True)
class AlgoEntry:
    name: str
    module: ModuleType
    description: str

    @property
    def Config(self) -> type:  # noqa: N802 - the module's Config class
        return self.module.Config


ALGOS: dict[str, AlgoEntry] = {
    "mappo": AlgoEntry("mappo", mappo, "multi-agent PPO with a centralised critic on global_state"),
    "ippo": AlgoEntry("ippo", ippo, "independent PPO: each agent's critic sees its own observation"),
}


def get_algo(name: str) -> AlgoEntry:
    if name not in ALGOS:
        raise unknown_name("algorithm", name, ALGOS)
    return ALGOS[name]


def list_algos() -> list[str]:
    return sorted(ALGOS)
