"""Hosts: putting the engine inside applications people already use.

An app-level package (it may import every layer below it):
- `frames`: the engine's frame loop at a size and a moment the host chooses;
- `qt`: `EngineWidget`, a PySide6 QOpenGLWidget drawing the engine in Qt's own context
  (the `qt` extra; examples/embed_qt.py);
- `canvas`: `CanvasHost`, the engine on any rendercanvas canvas (Qt, wx, Jupyter's remote
  frame buffer, offscreen) through the bitmap present path (the `canvas` extra;
  examples/embed_canvas.py); several canvases may draw with one device.
The GL side (adopting a host's context, drawing into its framebuffer, keeping the caller's
current context) is `engine.gl.hosts`. `HostFrames` and `CanvasHost` are importable from
here (neither needs its toolkit at import); `EngineWidget` needs PySide6, so it stays in
`engine.hosts.qt`.
"""
from .canvas import CanvasHost
from .frames import HostFrames

__all__ = ["CanvasHost", "HostFrames"]
