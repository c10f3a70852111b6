"""Exact game trees of small imperfect-information games, for tabular solvers
(CFR and its variants, exact best response, exploitability)."""

from __future__ import annotations

from functools import cache

from coplay.core.errors import unknown_name
from coplay.envs.trees.kuhn import KuhnRules
from coplay.envs.trees.leduc import LeducRules
from coplay.envs.trees.tree import CHANCE, GameTree, Rules, build_tree
from coplay.envs.trees.values import TreeArrays

_RULES: dict[str, type[Rules]] = {"kuhn_poker": KuhnRules, "leduc_holdem": LeducRules}


def tree_names() -> list[str]:
    return sorted(_RULES)


@cache
def game_tree(name: str) -> GameTree:
    """The exact tree of game `name` (built once per process)."""
    if name not in _RULES:
        raise unknown_name("game tree", name, _RULES)
    return build_tree(_RULES[name]())


__all__ = ["CHANCE", "GameTree", "Rules", "TreeArrays", "build_tree", "game_tree", "tree_names"]
