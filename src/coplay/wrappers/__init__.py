"""Environment -> environment transformations."""

from coplay.wrappers.agent_id import AgentID
from coplay.wrappers.autoreset import AutoReset
from coplay.wrappers.episode_stats import EpisodeStats, StatsState
from coplay.wrappers.preference import Preference, PreferenceState
from coplay.wrappers.scalarise import Accrued, Objectives, Scalarise, ScalariseState, chebyshev

__all__ = ["Accrued", "AgentID", "AutoReset", "EpisodeStats", "Objectives", "Preference", "PreferenceState",
           "Scalarise", "ScalariseState", "StatsState", "chebyshev"]
