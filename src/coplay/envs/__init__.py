"""Built-in environments, pure JAX, grouped by kind. Each registers itself here."""

from coplay.core.registry import ENVS
from coplay.envs.cooperative.foraging import Foraging
from coplay.envs.cooperative.spread import Spread
from coplay.envs.cooperative.treasure import Treasure
from coplay.envs.cooperative.two_step import TwoStep
from coplay.envs.mixed.beach import Beach
from coplay.envs.mixed.matrix import MatrixGame
from coplay.envs.social.clean_up import CleanUp
from coplay.envs.social.coins import Coins
from coplay.envs.social.commons_harvest import CommonsHarvest
from coplay.envs.social.coop_mining import CoopMining
from coplay.envs.social.pd_arena import PDArena
from coplay.envs.social.population_dilemma import PopulationDilemma
from coplay.envs.text import TextNim, TextTreeGame
from coplay.envs.trees.env import TreeGameEnv

ENVS.register(
    "spread", Spread, kind="cooperative",
    description="Cooperative navigation (MPE simple_spread): N agents cover N landmarks, avoid collisions.",
)
ENVS.register(
    "foraging", Foraging, kind="cooperative",
    description="Level-based foraging: agents collect food whose level needs adjacent agents' levels to add up.",
)
ENVS.register(
    "two_step", TwoStep, kind="cooperative",
    description="QMIX's two-step game: agent 0 picks the second state; 7 everywhere in one, up to 8 in the other.",
)
ENVS.register(
    "treasure", Treasure, kind="cooperative",
    description="Deep-sea salvage with two objectives (treasure, time): two submarines lift a chest together; "
                "deeper chests are worth more; its Pareto front is computed in code.",
)
ENVS.register(
    "beach", Beach, kind="mixed",
    description="MOMAland's beach problem domain with two objectives (capacity, mixture): N agents of two types "
                "choose beach sections; individual or team rewards.",
)
ENVS.register(
    "matrix", MatrixGame, kind="mixed",
    description="Repeated two-player normal-form games: climbing, penalty, prisoners_dilemma, stag_hunt, rps; "
                "with two objectives: imbalancing_act, imbalancing_act_without_m, vector_payoffs.",
)
ENVS.register(
    "commons_harvest", CommonsHarvest, kind="social",
    description="Commons Harvest (Melting Pot's open, closed and partnership maps): apples regrow only near apples "
                "left; agents can zap each other off the map.",
)
ENVS.register(
    "clean_up", CleanUp, kind="social",
    description="Clean Up (Melting Pot's map): apples grow only while the river is clean, and cleaning it pays "
                "nobody; agents can zap each other off the map.",
)
ENVS.register(
    "coins", Coins, kind="social",
    description="Coins (2 or N players): taking a coin of another's colour pays the taker and costs its owner more.",
)
ENVS.register(
    "coop_mining", CoopMining, kind="social",
    description="Cooperative Mining (Melting Pot's map): iron one agent can mine; gold, worth more, needs two "
                "distinct miners within a few steps.",
)
ENVS.register(
    "pd_arena", PDArena, kind="social",
    description="The prisoner's dilemma in a grid arena (Melting Pot's): agents collect cooperation and defection "
                "resources and play the dilemma with whom they meet, with the strategy their inventory makes.",
)
ENVS.register(
    "population_dilemma", PopulationDilemma, kind="social",
    description="A population playing the prisoner's dilemma with partner selection, direct and third-party "
                "punishment and public reputations, each switchable.",
)

__all__ = ["Beach", "CleanUp", "Coins", "CommonsHarvest", "CoopMining", "Foraging", "MatrixGame", "PDArena",
           "PopulationDilemma", "Spread", "TextNim", "TextTreeGame", "Treasure", "TreeGameEnv", "TwoStep"]
