"""Several chunked sources shown as one view's channels (layers).

Why one list of channels: the view plans, reads, caches and draws channels; layers only
change which source a channel reads and which pyramid its tiles come from. Channel g of
the view is channel g - first[l] of layer l, so one value cache (one texture, one budget)
holds the tiles of every layer by what the screen shows, and a hidden layer (all its
channels hidden) asks for no tile. Layers are placed at their level-0 pixels from the same
origin, as they would overlay in a viewer of one pixel size.

The cache keeps values in one texture format, so the layers must share a dtype; their tiles
may differ (a slot is the largest, smaller tiles sit at its corner).
"""
from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from ..errors import UsageError
from .source import ChunkedSource, LevelInfo


class Layers:
    """Sources in drawing order as one list of channels (the `TileReader`'s source)."""

    def __init__(self, sources: Sequence[ChunkedSource]) -> None:
        if not sources:
            raise UsageError("a view needs at least one source")
        dtypes = {np.dtype(s.dtype).name for s in sources}
        if len(dtypes) > 1:
            raise UsageError(f"layers of one view share a dtype; these are "
                             f"{', '.join(f'{s.name}: {np.dtype(s.dtype).name}' for s in sources)}"
                             f" (show the others in a second view with the same Governor)")
        self.sources = list(sources)
        self.dtype = np.dtype(sources[0].dtype)
        self.tile = max(s.tile for s in sources)
        self.first = [0]
        for s in sources:
            self.first.append(self.first[-1] + s.channels)
        self.channels = self.first[-1]
        self.name = " + ".join(s.name for s in sources)
        self.extent = (max(s.levels[0].shape[0] for s in sources),
                       max(s.levels[0].shape[1] for s in sources))

    def layer_of(self, channel: int) -> int:
        return bisect.bisect_right(self.first, channel) - 1

    def source_of(self, channel: int) -> ChunkedSource:
        return self.sources[self.layer_of(channel)]

    def channels_of(self, layer: int) -> range:
        return range(self.first[layer], self.first[layer + 1])

    def levels_of(self, channel: int) -> tuple[LevelInfo, ...]:
        return self.source_of(channel).levels

    def read_tile(self, level: int, channel: int, ty: int, tx: int) -> np.ndarray:
        layer = self.layer_of(channel)
        return self.sources[layer].read_tile(level, channel - self.first[layer], ty, tx)

    def close(self) -> None:
        for s in self.sources:
            s.close()
