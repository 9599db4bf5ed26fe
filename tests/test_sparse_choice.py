"""Which textures stream sparsely: the choice is arithmetic on the driver's page geometry, so
it is checked here without GL (the page size and sparse level count are what the H200 reports
for BC7: 256 x 256 texels, levels at least one page wide are sparse)."""
from types import SimpleNamespace

import pytest

from engine.formats import get as get_format
from engine.gl.sparse import PAGE_BYTES, layout
from engine.memory.sizes import level_bytes, mip_count, mip_dims
from engine.streaming.levels.backends import SparseBackend

BC7 = get_format("BC7")
PAGE = (256, 256)


class PagedBackend(SparseBackend):
    """The real choice with the page geometry given instead of asked of a driver."""

    def __init__(self) -> None:  # no device: only the layout arithmetic runs
        self._layouts = {}

    def _layout(self, tf):
        sparse = sum(1 for lvl in range(len(tf.levels))
                     if min(mip_dims(tf.width, tf.height, lvl)) >= PAGE[0])
        return layout(tf.pixel_format, tf.width, tf.height, len(tf.levels), PAGE, sparse)


def chain(size: int, **kw) -> SimpleNamespace:
    levels = [SimpleNamespace(nbytes=level_bytes(BC7, *mip_dims(size, size, lvl)))
              for lvl in range(mip_count(size, size))]
    return SimpleNamespace(pixel_format=BC7, format=BC7.name, width=size, height=size,
                           levels=levels, layers=kw.get("layers", 1), faces=kw.get("faces", 1),
                           depth=1)


@pytest.mark.parametrize("size, sparse", [(256, False), (512, False), (1024, False),
                                          (2048, True), (4096, True)])
def test_sparse_only_where_the_committed_tail_is_a_small_share(size, sparse):
    be = PagedBackend()
    tf = chain(size)
    assert be.supports(tf) is sparse
    if size >= 1024:  # what the rule weighs: one 64 KiB tail page against the whole chain
        share = be._layout(tf).tail_bytes / sum(lv.nbytes for lv in tf.levels)
        assert be._layout(tf).tail_bytes == PAGE_BYTES
        assert (share <= SparseBackend.MAX_TAIL_SHARE) is sparse


def test_arrays_and_cube_maps_never_stream_sparsely():
    be = PagedBackend()
    assert not be.supports(chain(4096, layers=4))
    assert not be.supports(chain(4096, faces=6))
