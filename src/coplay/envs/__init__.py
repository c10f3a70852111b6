"""Built-in environments, pure JAX, grouped by kind. Each registers itself here."""

from coplay.core.registry import ENVS
from coplay.envs.cooperative.foraging import Foraging
from coplay.envs.cooperative.spread import Spread
from coplay.envs.mixed.matrix import MatrixGame

ENVS.register(
    "spread", Spread, kind="cooperative",
    description="Cooperative navigation (MPE simple_spread): N agents cover N landmarks, avoid collisions.",
)
ENVS.register(
    "foraging", Foraging, kind="cooperative",
    description="Level-based foraging: agents collect food whose level needs adjacent agents' levels to add up.",
)
ENVS.register(
    "matrix", MatrixGame, kind="mixed",
    description="Repeated two-player normal-form games: climbing, penalty, prisoners_dilemma, stag_hunt, rps.",
)

__all__ = ["Foraging", "MatrixGame", "Spread"]
