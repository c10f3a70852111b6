"""Scaling out: several devices (`coplay.scale.devices`) and many trials on Ray Tune
(`coplay.scale.ray_trials`, which imports Ray only when trials run)."""
