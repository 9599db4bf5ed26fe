"""A photo browser widget in a Qt application (`pip install 'vram-budget-renderer[qt]'`):
`engine.ImageWall` in `engine.hosts.qt.EngineWidget`, the wheel zooming at the cursor, a left
drag panning, a click showing the image and pixel under the cursor in a label.

    python examples/view_qt.py photos/
    python examples/view_qt.py photos/ --frames 5     # draw 5 frames, then quit
"""
from __future__ import annotations

import argparse
import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

import engine
from engine.hosts.qt import EngineWidget, request_core_profile


class WallWidget(EngineWidget):
    """The engine widget with the wall's mouse navigation."""

    def __init__(self, wall: engine.ImageWall, label: QLabel, **kw) -> None:
        super().__init__(wall, provider="streaming", on_frame=wall.hooks(), **kw)
        self.wall, self.label, self._last = wall, label, None

    def _ndc(self, pos) -> tuple[float, float]:
        return (2 * pos.x() / max(1, self.width()) - 1, 1 - 2 * pos.y() / max(1, self.height()))

    def wheelEvent(self, event) -> None:
        self.wall.navigator.zoom(event.angleDelta().y() / 120, self._ndc(event.position()))

    def mousePressEvent(self, event) -> None:
        self._last = event.position()
        self.label.setText(str(self.wall.pick(self._ndc(event.position()))))

    def mouseMoveEvent(self, event) -> None:
        if event.buttons() & Qt.MouseButton.LeftButton and self._last is not None:
            pos = event.position()
            self.wall.navigator.drag(pos.x() - self._last.x(), pos.y() - self._last.y())
            self._last = pos


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--frames", type=int, default=0, help="frames to draw, then quit (0: until "
                                                          "the window is closed)")
    args, qt_args = ap.parse_known_args(argv)
    wall = engine.ImageWall(args.paths)
    request_core_profile()
    app = QApplication([sys.argv[0], *qt_args])
    window, label = QWidget(), QLabel("click an image")
    view = WallWidget(wall, label, budget=args.budget, max_frames=args.frames)
    if args.frames:
        view.framesDone.connect(app.quit)
    view.setMinimumSize(960, 540)
    layout = QVBoxLayout(window)
    layout.addWidget(view)
    layout.addWidget(label)
    window.show()
    status = app.exec()
    view.shutdown_engine()
    return status or (1 if view.left else 0)


if __name__ == "__main__":
    sys.exit(main())
