"""Flax modules: MLP and GRU torsos, actor and value heads, masked categorical."""

from coplay.nets import distributions
from coplay.nets.gru import ResetGRU
from coplay.nets.init import init_stacked
from coplay.nets.mlp import ACTIVATIONS, MLP, ActorHead, ValueHead

__all__ = ["ACTIVATIONS", "MLP", "ActorHead", "ResetGRU", "ValueHead", "distributions", "init_stacked"]
