"""Environment -> environment transformations."""

from coplay.wrappers.agent_id import AgentID
from coplay.wrappers.autoreset import AutoReset
from coplay.wrappers.episode_stats import EpisodeStats, StatsState
from coplay.wrappers.preference import Preference, PreferenceState
from coplay.wrappers.scalarise import Accrued, Objectives, Scalarise, ScalariseState, chebyshev
from coplay.wrappers.social import ActionCost, InequityAversion, RewardExchange, SocialValueOrientation

__all__ = ["Accrued", "ActionCost", "AgentID", "AutoReset", "EpisodeStats", "InequityAversion", "Objectives",
           "Preference", "PreferenceState", "RewardExchange", "Scalarise", "ScalariseState", "SocialValueOrientation",
           "StatsState", "chebyshev"]
