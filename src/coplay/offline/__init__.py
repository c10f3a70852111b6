"""Learning from fixed data: datasets recorded from any policy, in OG-MARL's layout."""

from coplay.offline.dataset import QUALITIES, Dataset, dataset_stats, epsilon_mixture, load, random_policy, record, save

__all__ = ["QUALITIES", "Dataset", "dataset_stats", "epsilon_mixture", "load", "random_policy", "record", "save"]
