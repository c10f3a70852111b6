"""A PettingZoo ParallelEnv that breaks the API in a chosen way, for the bridge's
checks: `coplay.make("pettingzoo:broken_envs", fault=...)` or `from_pettingzoo`.

Two agents, `Box(-1, 1, (4,))` observations, `Discrete(3)` actions, episodes of 10
steps; the fault happens to agent `a_1` at step `at` of episode `episode` (counted
per copy, so episode 0 is the one the bridge's probe plays when it is built)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

FAULTS = ("none", "vanish", "shape", "nan_obs", "bounds", "drift", "nan_reward", "missing", "stranger", "raise")


class Broken(ParallelEnv):
    metadata = {"name": "broken_v0"}

    def __init__(self, fault: str = "none", at: int = 3, episode: int = 0):
        assert fault in FAULTS, fault
        self.fault, self.at, self.episode = fault, at, episode
        self.possible_agents = ["a_0", "a_1"]
        self.episodes = -1

    def observation_space(self, agent):
        return spaces.Box(-1.0, 1.0, (4,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _now(self, fault: str) -> bool:
        return self.fault == fault and self.t == self.at and self.episodes == self.episode

    def _obs(self):
        obs = {a: np.full(4, 0.5, np.float32) for a in self.agents}
        if self.agents and self.t == self.at and self.episodes == self.episode:
            bad = {"shape": np.zeros(5, np.float32), "nan_obs": np.array([0, np.nan, 0, 0], np.float32),
                   "bounds": np.array([0, 0, 3.0, 0], np.float32), "drift": np.array([0, 0, 1.01, 0], np.float32)}
            if self.fault in bad:
                obs["a_1"] = bad[self.fault]
            if self.fault == "missing":
                del obs["a_1"]
        return obs

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        self.episodes += 1
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self._now("raise"):
            raise KeyError("the environment's own bug")
        if self._now("vanish"):
            self.agents = ["a_0"]  # a_1 leaves without being terminated or truncated
        end = self.t >= 10
        term = {a: False for a in self.agents}
        trunc = {a: end for a in self.agents}
        obs, rew, info = self._obs(), {a: 0.0 for a in self.agents}, {a: {} for a in self.agents}
        if self._now("nan_reward"):
            rew["a_1"] = float("nan")
        if self._now("stranger"):
            rew["a_9"] = 1.0
        if end:
            self.agents = []
        return obs, rew, term, trunc, info


def parallel_env(fault: str = "none", at: int = 3, episode: int = 0) -> Broken:
    return Broken(fault, at, episode)
raw_env = Broken  # its signature lists the environment's parameters (env.fault=..., env.episode=...)
