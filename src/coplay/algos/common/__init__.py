"""Machinery that more than one algorithm needs, written once."""
