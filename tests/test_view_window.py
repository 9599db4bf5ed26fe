"""`engine view` in a window behaves as a browser: keys step and open images and go back,
the title names the file under view, a drag moves the wall exactly as far as the pointer at
any frame rate, and a settled window stops drawing. Keys, clicks and pointer moves are
synthetic glfw callbacks (the window's own, fetched from glfw) under Xvfb; the key meanings
themselves are tested without a window."""
from __future__ import annotations

import pytest
from PIL import Image

from engine.view.browse import Browser
from engine.view.wall import ImageWall
from view_helpers import marked, screen_of


@pytest.fixture
def three(tmp_path, isolated_cache) -> ImageWall:
    for i, (w, h) in enumerate([(300, 200), (200, 300), (400, 200)]):
        Image.fromarray(marked(w, h)).save(tmp_path / f"{i}.png")
    return ImageWall([tmp_path], detail=False, workers=1, progress=False)


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


@pytest.mark.window
@pytest.mark.slow
def test_window_drives_keys_title_drag_and_idles(three, xvfb_display, monkeypatch):
    import glfw

    from engine.app import window
    from engine.app.run import run_scene

    monkeypatch.setenv("DISPLAY", xvfb_display)
    monkeypatch.setattr(window, "IDLE_WAIT_S", 0.01)
    seen: dict[str, object] = {}
    nav = three.navigator

    def drive(ctx) -> None:
        win = glfw.get_current_context()
        key = glfw.set_key_callback(win, None)
        glfw.set_key_callback(win, key)
        n = ctx.frame
        if n == 1:
            key(win, glfw.KEY_RIGHT, 0, glfw.PRESS, 0)
        elif n == 2:
            seen["opened"] = glfw.get_window_title(win)
            key(win, glfw.KEY_RIGHT, 0, glfw.PRESS, 0)
        elif n == 3:
            seen["stepped"] = glfw.get_window_title(win)
            key(win, glfw.KEY_HOME, 0, glfw.PRESS, 0)
        elif n == 4:
            seen["home"] = (three.browser.current, nav.fitted is not None)
            button = glfw.set_mouse_button_callback(win, None)
            glfw.set_mouse_button_callback(win, button)
            cursor = glfw.set_cursor_pos_callback(win, None)
            glfw.set_cursor_pos_callback(win, cursor)
            glfw.set_cursor_pos(win, 100, 90)
            before = nav.x
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)
            for k in range(1, 21):  # 200 px in 20 moves within one frame
                cursor(win, 100 + 10 * k, 90)
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)
            per_px = 2 * nav._half_h() / nav.pixels_high
            seen["drag"] = (before - nav.x) / per_px
            scroll = glfw.set_scroll_callback(win, None)
            glfw.set_scroll_callback(win, scroll)
            key(win, glfw.KEY_F, 0, glfw.PRESS, 0)  # fit all again
            glfw.set_cursor_pos(win, *screen_of(nav, three.items[1].rect, (320, 180), 0.5, 0.5))
            far = nav.distance
            scroll(win, 0.0, 2.0)  # the wheel: two steps in, about the pointer
            seen["wheel"] = far / nav.distance
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)  # a double click
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.PRESS, 0)
            button(win, glfw.MOUSE_BUTTON_LEFT, glfw.RELEASE, 0)
            seen["double"] = three.browser.current
        seen["last_drawn"] = n

    # the frame clock (deterministic) at a long dt: levels fade in within a few frames
    result = run_scene(three, headless=False, frames=60, size=(320, 180), dt=0.25,
                       deterministic=True,
                       provider="streaming", budget="64MiB",
                       on_frame=[*three.hooks(), drive])
    assert result.summary["leaked_objects"] == 0
    assert seen["opened"] == "engine view - 0.png (1/3)"
    assert seen["stepped"] == "engine view - 1.png (2/3)"
    assert seen["home"] == (None, True)
    assert seen["drag"] == pytest.approx(200.0, abs=0.5)
    assert seen["wheel"] == pytest.approx(1.2 ** 2)
    assert seen["double"] == 1  # the image under the pointer, opened
    # settled after the drag: the window stops drawing long before its 60 iterations
    assert len(result.frames) < 20, [f["settled"] for f in result.frames]
    assert result.frames[-1]["settled"]
    assert result.image.std() > 20  # the wall, not a cleared screen
