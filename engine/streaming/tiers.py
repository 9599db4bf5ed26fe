"""The one priority tier of streamed work, shared by both executors.

Out-of-core viewers rank work this way (Neuroglancer: VISIBLE > PREFETCH > RECENT): what
the screen shows now, what it is predicted to show next, what it showed before, and what it
never showed. Both the whole-level planner (engine.streaming.levels) and the tile policy
(engine.streaming.virtual) speak these tiers, so they are defined once, below both wings.
Smaller is more important: a tier is a rank in the order the work is served.
"""
from __future__ import annotations

from enum import IntEnum


class Tier(IntEnum):
    """Priority tier of a level or a tile; smaller is more important."""

    VISIBLE = 0
    PREFETCH = 1
    RECENT = 2
    NONE = 3
