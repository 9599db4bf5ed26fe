"""Two engine views of different scenes in one Qt window, sharing one GPU-memory budget.

Each `EngineWidget` has its own GL context (and so its own engine device and ledger); both
take a seat on one `ViewShares` (engine.memory.shares), the left with weight 1 (the streaming
gallery), the right with weight 2 (the glTF box). Their summed memory never exceeds the shared
budget; hiding a view (here: the right one, after --frames) drops it to its floor and the
other view's share grows.

    python examples/embed_qt_views.py --frames 0          # until the window is closed
    python examples/embed_qt_views.py --frames 6          # what tests do: then hide the right
                                                          # view, draw 6 more on the left

Prints one JSON line (per view: grants and ledger totals before and after the hide, objects
left at shutdown); exits 0 when both views released every GL object.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys

from PySide6.QtWidgets import QApplication, QHBoxLayout, QWidget

from engine.demos import gallery, gltf_demo
from engine.hosts.qt import EngineWidget, request_core_profile
from engine.memory.shares import ShareSettings, ViewShares
from engine.streaming.settings import StreamerSettings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=0, help="frames per view (0: until closed)")
    ap.add_argument("--size", type=int, nargs=2, default=(320, 240), help="each view's size")
    ap.add_argument("--budget", default="32MiB", help="the budget both views share")
    args, qt_args = ap.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    request_core_profile()
    app = QApplication([sys.argv[0], *qt_args])
    views = ViewShares(args.budget)
    window = QWidget()
    window.setWindowTitle("two engine views, one budget")
    layout = QHBoxLayout(window)
    # The gallery wants far more detail than fits (a negative mip bias): it takes what the
    # box leaves, and more when the box is hidden.
    left = EngineWidget(gallery.build, max_frames=args.frames, provider="streaming",
                        streamer=StreamerSettings(virtual="off", mip_bias=-6),
                        share=ShareSettings(views, weight=1),
                        options={"count": 24, "texture_size": 512})
    right = EngineWidget(gltf_demo.build, max_frames=args.frames,
                         share=ShareSettings(views, weight=2))
    for view in (left, right):
        view.setFixedSize(*args.size)
        layout.addWidget(view)
    result: dict = {}

    def seat(view: EngineWidget) -> dict:
        share = view.frames.loop.governor.share if view.frames else None
        return {"grant": share.grant if share else None,
                "total": view.device.ledger.total if view.device else None}

    done = set()

    def after_hide() -> None:
        result["left_after_hide"] = seat(left)
        result["right_after_hide"] = seat(right)
        finish()

    def both_drawn(view: EngineWidget) -> None:
        done.add(view)
        if len(done) < 2:
            return
        result["left_shown"], result["right_shown"] = seat(left), seat(right)
        right.hide()  # the right view drops to its floor (frames drawn unseen)
        left.max_frames += args.frames  # the left one draws on into the freed memory
        left.framesDone.disconnect()
        left.framesDone.connect(after_hide)
        left.update()

    def finish() -> None:
        result["sum_within_budget"] = sum(
            (seat(v)["total"] or 0) for v in (left, right)) <= views.budget
        for view in (left, right):
            view.shutdown_engine()
        window.close()
        app.quit()

    left.framesDone.connect(lambda: both_drawn(left))
    right.framesDone.connect(lambda: both_drawn(right))
    for view in (left, right):
        view.failed.connect(lambda message: app.exit(2))
    window.show()
    status = app.exec()
    for view in (left, right):
        view.shutdown_engine()
    result.update(budget=views.budget, left_objects=left.left, right_objects=right.left,
                  errors=[left.error, right.error], platform=app.platformName())
    print(json.dumps(result), flush=True)
    ok = status == 0 and left.left == 0 and right.left == 0 and not any(result["errors"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
