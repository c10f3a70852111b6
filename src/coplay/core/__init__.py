"""Types and contracts shared by every layer above."""

from coplay.core.env import Env, State, Wrapper
from coplay.core.errors import (
    ActionError,
    CheckpointError,
    ConfigError,
    CoplayError,
    TrainingError,
    UnknownNameError,
)
from coplay.core.registry import ENVS, Registry
from coplay.core.spaces import Box, Discrete, MultiDiscrete, Space
from coplay.core.types import EnvSpec, TimeStep

__all__ = [
    "ENVS", "ActionError", "Box", "CheckpointError", "ConfigError", "CoplayError", "Discrete",
    "Env", "EnvSpec", "MultiDiscrete", "Registry", "Space", "State", "TimeStep", "TrainingError",
    "UnknownNameError", "Wrapper",
]
