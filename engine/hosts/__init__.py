"""Hosts: where the engine's frames go, and who decides when the next one is drawn.

The package above engine.app (it drives app's FrameLoop), one module per backend:
- `run`: `run_scene`, the runner that drives a fixed-size loop with a host of its own,
  `headless` (frames into an offscreen output) or `window` (a glfw window: events, fly
  camera, budget keys); `command`: the window-else-headless choice of the commands;
- `frames`: the engine's frame loop at a size and a moment the host chooses;
- `qt`: `EngineWidget`, a PySide6 QOpenGLWidget drawing the engine in Qt's own context
  (the `qt` extra; examples/embed_qt.py);
- `canvas`: `CanvasHost`, the engine on any rendercanvas canvas (Qt, wx, Jupyter's remote
  frame buffer, offscreen) through the bitmap present path (the `canvas` extra;
  examples/embed_canvas.py); several canvases may draw with one device.
The GL side (adopting a host's context, drawing into its framebuffer, keeping the caller's
current context) is `engine.gl.hosts`: nothing outside engine.gl touches GL. `HostFrames`
and `CanvasHost` are importable from here (neither needs its toolkit at import);
`EngineWidget` needs PySide6 and `WindowHost` glfw, so they stay in their modules.
"""
from .canvas import CanvasHost
from .frames import HostFrames

__all__ = ["CanvasHost", "HostFrames"]
