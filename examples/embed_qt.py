"""Embedding the engine in a Qt application (`pip install -e '.[qt]'`: PySide6-Essentials).

Qt owns the window, the GL context and the event loop. A `QOpenGLWidget` hands the engine its
context in `initializeGL` (the engine adopts it: `engine.gl.hosts.adopt_current_context`) and
its framebuffer in `paintGL` (`defaultFramebufferObject()`, which Qt composes into the
window): the engine renders its frame into its own targets, then copies the output there.
Engine objects are released in the slot of `aboutToBeDestroyed`, while the context lives, as
Qt's documentation asks.

    python examples/embed_qt.py --frames 120            # 0 = until the window is closed
    python examples/embed_qt.py --frames 5 --grab out/qt.png   # what tests do

Prints one JSON line (frames, size, GL renderer, objects left); exits 0 when every GL
object the engine made was released, 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QSurfaceFormat
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QApplication

from engine.demos.gltf_demo import build
from engine.gl.hosts import adopt_current_context, framebuffer_size, present_to
from engine.hosts.frames import HostFrames

log = logging.getLogger("embed_qt")


class EngineWidget(QOpenGLWidget):
    """A widget whose picture is the engine's scene. `max_frames` frames are rendered (0:
    one per repaint, forever); later repaints show the last one again."""

    def __init__(self, budget: str = "256MiB", max_frames: int = 0) -> None:
        super().__init__()
        self.budget = budget
        self.max_frames = max_frames
        self.device = None
        self.frames: HostFrames | None = None
        self.left: int | None = None  # GL objects alive at shutdown (None: not shut down)
        self.ledger_after: int | None = None  # ledgered bytes after shutdown (0: all freed)
        self.error: str | None = None  # an exception in a GL callback (Qt would swallow it)
        self.renderer_name = ""
        self.on_done = None  # called once max_frames frames are on screen

    def initializeGL(self) -> None:
        try:
            self._initialize()
        except Exception as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        """Qt prints and swallows exceptions from its callbacks; stop the app instead."""
        log.exception("engine failed inside a Qt GL callback")
        self.error = f"{type(exc).__name__}: {exc}"
        QApplication.instance().exit(2)

    def _initialize(self) -> None:
        self.device = adopt_current_context()
        self.renderer_name = self.device.caps.renderer
        # Qt may destroy the context before the widget object: release while it lives.
        self.context().aboutToBeDestroyed.connect(self.shutdown_engine)
        glo = self.defaultFramebufferObject()
        size = framebuffer_size(self.device, glo) if glo else self._pixel_size()
        self.frames = HostFrames(self.device, build, size, budget=self.budget)

    def _pixel_size(self) -> tuple[int, int]:
        ratio = self.devicePixelRatioF()
        return round(self.width() * ratio), round(self.height() * ratio)

    def paintGL(self) -> None:
        if self.frames is None or self.error is not None:
            return
        try:
            self._paint()
        except Exception as exc:
            self._fail(exc)

    def _paint(self) -> None:
        glo = self.defaultFramebufferObject()
        if self.max_frames <= 0 or self.frames.frame < self.max_frames:
            self.frames.render(framebuffer_size(self.device, glo))
            more = self.max_frames <= 0 or self.frames.frame < self.max_frames
            if more:
                self.update()  # schedule the next frame
            elif self.on_done is not None:
                QTimer.singleShot(0, self.on_done)
        present_to(self.device, self.frames.output_fbo, glo)

    def shutdown_engine(self) -> None:
        """Release every engine object (the context stays Qt's). Safe to call twice."""
        if self.device is None or self.left is not None:
            return
        self.makeCurrent()
        try:
            if self.frames is not None:
                self.frames.release()
                self.frames = None
            self.left = len(self.device.shutdown())
            self.ledger_after = self.device.ledger.total
        finally:
            self.doneCurrent()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=0, help="frames to draw (0: until closed)")
    ap.add_argument("--size", type=int, nargs=2, default=(640, 400))
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--grab", type=Path, help="save grabFramebuffer() here after --frames")
    args, qt_args = ap.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    fmt = QSurfaceFormat()
    fmt.setVersion(3, 3)
    fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
    QSurfaceFormat.setDefaultFormat(fmt)  # before the QApplication: every context is 3.3 core
    app = QApplication([sys.argv[0], *qt_args])
    widget = EngineWidget(args.budget, args.frames)
    widget.setWindowTitle("Qt + engine")
    widget.resize(*args.size)
    result: dict = {}

    def finish() -> None:
        if args.grab is not None:
            image = widget.grabFramebuffer()  # repaints (the last frame) and reads it back
            args.grab.parent.mkdir(parents=True, exist_ok=True)
            result["grab_saved"] = bool(image.save(str(args.grab)))
            result["grab_size"] = [image.width(), image.height()]
        result["frames"] = widget.frames.frame if widget.frames else 0
        result["output_size"] = list(widget.frames.size) if widget.frames else None
        widget.shutdown_engine()
        widget.close()
        app.quit()

    if args.frames > 0:
        widget.on_done = finish
    widget.show()
    status = app.exec()
    widget.shutdown_engine()  # closed by the user: the slot may already have run
    result.update(renderer=widget.renderer_name, left=widget.left,
                  ledger_bytes_after=widget.ledger_after, platform=app.platformName(),
                  error=widget.error)
    print(json.dumps(result), flush=True)
    log.info("%s frames on %s, %s GL object(s) left at shutdown", result.get("frames"),
             widget.renderer_name, widget.left)
    return 0 if widget.left == 0 and status == 0 and widget.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
