"""Embedding the engine in a Qt application (`pip install 'vram-budget-renderer[qt]'`: PySide6-Essentials).

Qt owns the window, the GL context and the event loop; `engine.hosts.qt.EngineWidget` is a
`QOpenGLWidget` that adopts Qt's context in `initializeGL` and draws the engine's frame into
Qt's framebuffer (`defaultFramebufferObject()`) in `paintGL`. Here it sits in a window with
an ordinary Qt label beside it, as it would in an application's layout. Textures stream
within the widget's budget (the default provider, "streaming"); pass `on_over_budget=` to the
widget to be told when a frame goes over it.

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

from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

from engine.demos.gltf_demo import build
from engine.hosts.qt import EngineWidget, request_core_profile

log = logging.getLogger("embed_qt")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=0, help="frames to draw (0: until closed)")
    ap.add_argument("--size", type=int, nargs=2, default=(640, 400),
                    help="the engine widget's size")
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--grab", type=Path, help="save grabFramebuffer() here after --frames")
    ap.add_argument("--resize", type=int, nargs=2, metavar=("W", "H"),
                    help="after --frames: resize the engine widget and grab again "
                         "(to GRAB's name + '.resized.png')")
    args, qt_args = ap.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    request_core_profile()  # before the QApplication: every context is 3.3 core
    app = QApplication([sys.argv[0], *qt_args])
    window = QWidget()
    window.setWindowTitle("Qt + engine")
    layout = QVBoxLayout(window)
    layout.addWidget(QLabel("The engine, inside a Qt layout:"))
    engine_view = EngineWidget(build, budget=args.budget, max_frames=args.frames)
    engine_view.setFixedSize(*args.size)
    layout.addWidget(engine_view)
    result: dict = {}

    def finish() -> None:
        if args.grab is not None:
            image = engine_view.grabFramebuffer()  # repaints (the last frame), reads it back
            args.grab.parent.mkdir(parents=True, exist_ok=True)
            result["grab_saved"] = bool(image.save(str(args.grab)))
            result["grab_size"] = [image.width(), image.height()]
        if args.grab is not None and args.resize:
            engine_view.setFixedSize(*args.resize)
            image = engine_view.grabFramebuffer()  # a repaint at the new size: a new frame
            resized = args.grab.with_name(args.grab.stem + ".resized.png")
            result["resized_saved"] = bool(image.save(str(resized)))
            result["resized_size"] = [image.width(), image.height()]
        result["output_size"] = list(engine_view.frames.size) if engine_view.frames else None
        engine_view.shutdown_engine()
        window.close()
        app.quit()

    engine_view.framesDone.connect(finish)
    engine_view.failed.connect(lambda message: app.exit(2))
    window.show()
    status = app.exec()
    engine_view.shutdown_engine()  # closed by the user: the slot may already have run
    result.update(frames=engine_view.drawn, renderer=engine_view.renderer_name,
                  left=engine_view.left, ledger_bytes_after=engine_view.ledger_after,
                  platform=app.platformName(), error=engine_view.error)
    print(json.dumps(result), flush=True)
    log.info("%d frames on %s, %s GL object(s) left at shutdown", engine_view.drawn,
             engine_view.renderer_name, engine_view.left)
    return 0 if engine_view.left == 0 and status == 0 and engine_view.error is None else 1


if __name__ == "__main__":
    sys.exit(main())
