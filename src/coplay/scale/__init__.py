"""Scaling out: several devices (`coplay.scale.devices`)."""
