"""The engine as a Qt widget: a PySide6 `QOpenGLWidget` whose picture is an engine scene
(the `qt` extra: PySide6-Essentials).

Qt owns the window, the GL context and the event loop. The widget hands the engine Qt's
context in `initializeGL` (the engine adopts it, never destroys it) and Qt's framebuffer in
`paintGL` (`defaultFramebufferObject()`, which Qt composes into the window and re-creates on
resize): the engine renders its frame into its own targets, at the framebuffer's size, then
copies the output there. Engine objects are released in the slot of the context's
`aboutToBeDestroyed`, while the context still lives, as Qt's documentation asks.

    request_core_profile()                      # before the QApplication exists
    app = QApplication([])
    widget = EngineWidget(build_scene, budget="256MiB")
    widget.show(); app.exec()

Several widgets share one budget with `share=ShareSettings(views, weight=...)` (a
`ViewShares`; examples/embed_qt_views.py): a hidden widget drops to its floor.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QSurfaceFormat
from PySide6.QtOpenGLWidgets import QOpenGLWidget

from ..gl.device import Device
from ..gl.hosts import adopt_current_context, framebuffer_size, present_to
from .frames import HostFrames, SceneFactory, frames_for

log = logging.getLogger(__name__)


def request_core_profile(major: int = 3, minor: int = 3) -> None:
    """Ask Qt for an OpenGL core profile in every context (the engine needs 3.3 core). Call it
    before the QApplication is made: Qt reads the default format when it makes contexts."""
    fmt = QSurfaceFormat()
    fmt.setVersion(major, minor)
    fmt.setProfile(QSurfaceFormat.OpenGLContextProfile.CoreProfile)
    QSurfaceFormat.setDefaultFormat(fmt)


class EngineWidget(QOpenGLWidget):
    """A widget showing an engine scene. `max_frames` frames are rendered, one per repaint
    (0: forever, a new frame scheduled after each); later repaints show the last one again,
    unless the widget was resized: then one more frame is rendered at the new size.

    Signals: `framesDone` once `max_frames` frames are on screen; `failed(str)` when the
    engine raised inside a GL callback (Qt would print and swallow the exception)."""

    framesDone = Signal()
    failed = Signal(str)

    def __init__(self, scene_factory: SceneFactory, *, budget: Any = "256MiB",
                 max_frames: int = 0, options: Mapping[str, Any] | None = None,
                 parent: Any = None, **loop_kw: Any) -> None:
        super().__init__(parent)
        self.scene_factory = scene_factory
        self.max_frames = int(max_frames)
        self._loop_kw = dict(loop_kw, budget=budget, options=dict(options or {}))
        self.device: Device | None = None
        self.frames: HostFrames | None = None
        self.drawn = 0  # engine frames rendered (kept after shutdown)
        self.left: int | None = None  # GL objects alive at shutdown (None: not shut down)
        self.ledger_after: int | None = None  # ledgered bytes after shutdown (0: all freed)
        self.error: str | None = None

    # ------------------------------------------------------------------ Qt's GL callbacks
    def initializeGL(self) -> None:
        self._guarded(self._initialize)

    def paintGL(self) -> None:
        if self.frames is not None and self.error is None:
            self._guarded(self._paint)

    def _guarded(self, step) -> None:
        try:
            step()
        except Exception as exc:
            log.exception("engine failed inside a Qt GL callback")
            self.error = f"{type(exc).__name__}: {exc}"
            self.failed.emit(self.error)

    def _initialize(self) -> None:
        self.device = adopt_current_context()
        # Qt may destroy the context before the widget object: release while it lives.
        self.context().aboutToBeDestroyed.connect(self.shutdown_engine)
        glo = self.defaultFramebufferObject()
        size = framebuffer_size(self.device, glo) if glo else self.pixel_size()
        self.frames = frames_for(self.scene_factory)(self.device, self.scene_factory, size,
                                                      **self._loop_kw)

    def _paint(self) -> None:
        assert self.device is not None and self.frames is not None
        glo = self.defaultFramebufferObject()
        size = framebuffer_size(self.device, glo)
        wanted = self.max_frames <= 0 or self.frames.frame < self.max_frames
        if wanted or size != self.frames.size:  # a resize always gets a frame of its size
            self.frames.render(size)
            self.drawn = self.frames.frame
            if self.max_frames <= 0 or self.drawn < self.max_frames:
                self.update()  # schedule the next frame
            elif wanted:
                QTimer.singleShot(0, self.framesDone.emit)
        present_to(self.device, self.frames.output_fbo, glo)

    # ------------------------------------------------------------------ visibility
    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if self.frames is not None:
            self.frames.set_visible(True)  # its share comes back at the next frame

    def hideEvent(self, event: Any) -> None:
        """Hidden or minimised: on a share board (`share=` a ViewShares or a group) the view
        drops to its floor, drawing unseen frames until it holds no more."""
        super().hideEvent(event)
        if self.frames is not None and self.frames.loop.governor.share is not None \
                and self.error is None and self.left is None:
            self.makeCurrent()
            try:
                self._guarded(lambda: self.frames.set_visible(False))
            finally:
                self.doneCurrent()

    # ------------------------------------------------------------------ helpers
    def pixel_size(self) -> tuple[int, int]:
        """The widget's size in device pixels (HiDPI screens have more than logical ones)."""
        ratio = self.devicePixelRatioF()
        return round(self.width() * ratio), round(self.height() * ratio)

    @property
    def renderer_name(self) -> str:
        return self.device.caps.renderer if self.device is not None else ""

    def shutdown_engine(self) -> None:
        """Release every engine object; Qt's context stays Qt's. Safe to call twice."""
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
