"""Scaling out: several devices (`coplay.scale.devices`) and many trials on Ray Tune
(`coplay.scale.sweep`, which imports Ray only when trials run)."""
