"""Scaling out: several devices (`coplay.scale.devices`), many trials on Ray Tune
(`coplay.scale.ray_trials`) and independent calls as Ray tasks over a cluster's nodes
(`coplay.scale.ray_tasks`); the Ray modules import Ray only when they run."""
