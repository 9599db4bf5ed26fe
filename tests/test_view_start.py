"""The first frame of `engine view` shows everything, fitted, at any output size and any
number of images: the zoom bound (`home`) is known before the first fit, and the frame loop
tells the navigator the output's size before the first frame is posed."""
from __future__ import annotations

import pytest
from PIL import Image

from engine.hosts.run import run_scene
from engine.view.layout import Rect, bounds, justified_rows
from engine.view.navigator import Navigator
from engine.view.wall import ImageWall
from view_helpers import corners_match, marked


def _shows(nav: Navigator, r: Rect) -> bool:
    v = nav.view_rect()
    return v.x0 <= r.x0 and r.x1 <= v.x1 and v.y0 <= r.y0 and r.y1 <= v.y1


@pytest.mark.parametrize("count", [1, 30, 300, 10_000])
@pytest.mark.parametrize("size", [(1280, 720), (1280, 800), (300, 900), (2000, 300)])
def test_a_wall_of_any_count_starts_fitted_at_any_size(count, size):
    wall = bounds(justified_rows([1.5] * count))
    nav = Navigator.fitting(wall)
    nav.resize(*size)
    assert _shows(nav, wall), (nav.view_rect(), wall)
    nav.zoom(-50)  # the farthest zoom out still shows it all
    assert _shows(nav, wall)


def test_the_first_frame_is_fitted_to_the_output(device, tmp_path, isolated_cache):
    """A tall output: frame 0 already shows every image's four corners (it used to be posed
    for 16:9 and refitted from frame 1)."""
    for i, (w, h) in enumerate([(300, 200), (200, 300), (400, 200)]):
        Image.fromarray(marked(w, h)).save(tmp_path / f"{i}.png")
    wall = ImageWall([tmp_path], detail=False, workers=1, progress=False)
    wall.make_thumbnails()  # the corners are drawn from the thumbnails
    result = run_scene(wall, device=device, frames=1, size=(200, 400),
                       provider="streaming", budget="64MiB")
    for it in wall.items:
        assert not corners_match(result.image, wall.navigator, it.rect), it.source.name
