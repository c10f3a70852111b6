"""The shared contract suite, applied to every registered environment (with its
defaults and with a few non-default settings), so new environments get it free."""

import numpy as np
import pytest

import coplay
from coplay.core.env import Wrapper
from coplay.core.registry import ENVS
from coplay.core.spaces import Box
from coplay.interop import MissingExtraError
from coplay.testing import check_env
from coplay.wrappers import AgentID, AutoReset, EpisodeStats

# The grid dilemmas run 1,000 steps an episode by default; the suite checks them on short
# episodes (their code does not depend on the length but for when it truncates).
SHORT = ("commons_harvest", "clean_up", "coop_mining", "pd_arena", "coins")
REGISTERED = [(name, {"max_steps": 40} if name in SHORT else {}) for name in ENVS.names()]
VARIANTS = REGISTERED + [
    ("spread", {"n_agents": 4}),
    ("spread", {"continuous_actions": True}),
    ("spread", {"objectives": "energy"}),                     # two objectives: reward [N, 2]
    ("spread", {"objectives": "collisions", "continuous_actions": True}),
    ("foraging", {"force_coop": True, "n_agents": 3, "sight": 2}),
    ("foraging", {"n_food": 4, "food_types": 2, "penalty": 0.1}),   # two objectives: reward [N, 2]
    ("matrix", {"game": "penalty"}),
    ("matrix", {"game": "prisoners_dilemma"}),
    ("matrix", {"game": "stag_hunt"}),
    ("matrix", {"game": "rps"}),
    ("matrix", {"game": "vector_payoffs"}),   # two objectives: reward [2, 2]
    ("treasure", {"crew": "together", "values": "concave"}),
    ("beach", {"reward_mode": "team", "num_timesteps": 4, "num_agents": 7, "type_distribution": (1, 1, 2)}),
    ("tree:kuhn_poker", {}),
    ("tree:leduc_holdem", {}),
    ("text:kuhn_poker", {}),
    ("text:leduc_holdem", {"invalid": "random"}),
]


def _make(name, **kwargs):
    """The environment, or a skip when it needs an optional library that is not installed."""
    try:
        return coplay.make(name, **kwargs)
    except MissingExtraError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("name, kwargs", VARIANTS, ids=[f"{n}-{k}" if k else n for n, k in VARIANTS])
def test_contract(name, kwargs):
    # Traced anew against traced once for each environment as registered; another setting runs
    # the same code.
    check_env(_make(name, **kwargs), retrace=(name, kwargs) in REGISTERED)


# The wrappers see of an environment only the shapes of its views, actions and masks and who
# acts when, so one environment of each such shape stands for the others (each of which passes
# `test_contract` itself): of the text environments one per shape of play, of pgx's games one
# with perfect and one with hidden information (kuhn_poker for leduc_holdem, tic_tac_toe for
# connect_four: the same class, other sizes), and of the grid dilemmas coins (the others'
# views are windows of the same shape, with more planes).
TEXT_SHAPES = ("text:nim", "text:matrix_talk", "text:gridworld", "text:arithmetic_roles")
SAME_SHAPE = ("leduc_holdem", "connect_four", "commons_harvest", "clean_up", "coop_mining", "pd_arena")
THROUGH_WRAPPERS = [n for n in ENVS.names()
                    if (not n.startswith("text:") or n in TEXT_SHAPES) and n not in SAME_SHAPE]


@pytest.mark.parametrize("name", THROUGH_WRAPPERS)
def test_contract_through_wrappers(name):
    env = _make(name)
    if isinstance(env.spec.obs_space, Box) and len(env.spec.obs_space.shape) == 1:   # AgentID takes flat Box views
        env = AgentID(env)
    # The wrappers' code is the same under every environment: traced anew under one of them
    # (spread, whose flat views take AgentID as well).
    check_env(AutoReset(EpisodeStats(env)), steps=10, retrace=name == "spread")


class _CountsItsSteps(Wrapper):
    """Keeps a Python-side count of its steps in the reward: traced once under `jit`, the
    count stays where the trace left it, while each new trace (or running op by op) reads
    it again."""

    def __init__(self, env):
        super().__init__(env)
        self.calls = 0

    def _reset(self, key):
        return self.env.reset(key)

    def _step(self, state, actions, key):
        self.calls += 1
        state, ts = self.env.step(state, actions, key)
        return state, ts.replace(reward=ts.reward + self.calls)


class _DrawsOnTheHost(_CountsItsSteps):
    """Adds a NumPy draw to the reward: a constant of each trace, not a draw per step."""

    rng = np.random.default_rng(0)

    def _step(self, state, actions, key):
        state, ts = self.env.step(state, actions, key)
        return state, ts.replace(reward=ts.reward + self.rng.normal())


@pytest.mark.parametrize("wrapper", [_CountsItsSteps, _DrawsOnTheHost])
def test_tracing_anew_catches_python_side_state(wrapper):
    with pytest.raises(AssertionError, match=r"step traced anew differs from step traced once"):
        check_env(wrapper(coplay.make("matrix")))
    # Without it, the state shows later: the batched step was traced after the single one.
    with pytest.raises(AssertionError, match=r"vmap\(step\) differs"):
        check_env(wrapper(coplay.make("matrix")), retrace=False)
