"""Whole-level streaming: the planner (which levels to hold under the pool), its prefetch and
fades, the screen-space estimator, the GL backends and the `LevelStreamer` that runs them.
It never imports the virtual-texture wing (engine.streaming.virtual); what both use lives
in engine.streaming itself (tiers, level I/O, the RAM cache, file handles).
"""
