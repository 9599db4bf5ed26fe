"""`engine view` in a window behaves as a browser: keys step and open images and go back,
the title names the file under view, a drag moves the wall exactly as far as the pointer at
any frame rate, and a settled window stops drawing. Keys, clicks and pointer moves are
synthetic glfw callbacks (the window's own, fetched from glfw) under Xvfb; the key meanings
themselves are tested without a window."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from engine.view.browse import Browser
from engine.view.wall import ImageWall
from view_helpers import marked

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def three(tmp_path, isolated_cache) -> ImageWall:
    folder = tmp_path / "images"  # apart from the cache's own textures
    folder.mkdir()
    for i, (w, h) in enumerate([(300, 200), (200, 300), (400, 200)]):
        Image.fromarray(marked(w, h)).save(folder / f"{i}.png")
    return ImageWall([folder], detail=False, workers=1, progress=False)


def test_keys_step_open_and_go_back(three):
    nav, browser = three.navigator, Browser(three)
    assert browser.title(None) == "engine view - 3 images"
    assert browser.key("right") == "handled" and browser.current == 0
    assert nav.fitted is not None and nav.fitted[0] == three.items[0].rect
    assert browser.title(None) == "engine view - 0.png (1/3)"
    browser.key("page_down")
    browser.key("space")
    assert browser.current == 2
    browser.key("right")  # wraps
    assert browser.current == 0
    browser.key("left")
    assert browser.current == 2
    assert browser.key("escape") == "handled" and browser.current is None
    assert nav.fitted[0] == nav.everything
    assert browser.key("escape") == "quit"  # the whole wall: nothing to go back from
    browser.key("return", (0.0, 0.0))  # the image under the pointer
    assert browser.current == three.pick((0.0, 0.0)).index
    nav.zoom(3)
    browser.key("f")
    assert browser.current is None and nav.fitted[0] == nav.everything
    assert browser.key("q") == "quit" and browser.key("x") is None


def test_up_and_down_move_between_rows(tmp_path, isolated_cache):
    """A grid of 3 x 2: Down from the top row's middle opens the bottom row's middle, Up
    goes back, and the edge rows stay."""
    for i in range(6):
        Image.fromarray(marked(200, 200)).save(tmp_path / f"{i}.png")
    wall = ImageWall([tmp_path], detail=False, workers=1, progress=False, layout="grid")
    rows = sorted({round(it.rect.center[1], 9) for it in wall.items}, reverse=True)
    assert len(rows) == 2  # top row first
    top = sorted((it for it in wall.items if round(it.rect.center[1], 9) == rows[0]),
                 key=lambda it: it.rect.center[0])
    bottom = sorted((it for it in wall.items if round(it.rect.center[1], 9) == rows[1]),
                    key=lambda it: it.rect.center[0])
    browser = Browser(wall)
    browser.open(top[1].index)
    browser.key("down")
    assert browser.current == bottom[1].index
    browser.key("down")  # the bottom row: stays
    assert browser.current == bottom[1].index
    browser.key("up")
    assert browser.current == top[1].index


@pytest.mark.window
@pytest.mark.slow
def test_window_drives_keys_title_drag_and_idles(three, xvfb_display, tmp_path):
    """In a window (tests/view_window_child.py): Right opens image 1 and names it in the
    title, Right steps, Home fits all, a 200-px drag in 20 moves within one frame moves the
    wall 200 px, the wheel zooms, a double click opens the image under the pointer, and
    the settled window stops drawing long before its 60 iterations and then costs next to
    no CPU."""
    out = tmp_path / "seen.json"
    env = {k: v for k, v in os.environ.items() if k != "WAYLAND_DISPLAY"}
    env.update(DISPLAY=xvfb_display, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}",
               ENGINE_CACHE=str(tmp_path / "cache"))
    folder = three.items[0].source.parent
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "view_window_child.py"),
                           str(folder), str(out)], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(out.read_text())
    assert seen["leaked"] == 0
    assert seen["opened"] == "engine view - 0.png (1/3)"
    assert seen["stepped"] == "engine view - 1.png (2/3)"
    assert seen["home"] == [None, True]
    assert seen["drag"] == pytest.approx(200.0, abs=0.5)
    assert seen["wheel"] == pytest.approx(1.2 ** 2)
    assert seen["double"] == 1  # the image under the pointer, opened
    assert seen["drawn"] < 20 and seen["settled"], seen
    assert seen["idle_s"] > 0.5 and seen["idle_cpu"] < 0.05, seen  # goal: <= 2% of a core
    assert seen["contrast"] > 20  # the wall, not a cleared screen
