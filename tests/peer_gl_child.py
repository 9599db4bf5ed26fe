"""Child of tests/test_lab_peer_gl.py: a Qt GL canvas (QOpenGLWidget with depth and stencil)
on the test's X display; makes GL objects of known sizes and prints, as one JSON line, what
lab.peer_gl reports before and after."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from OpenGL import GL
from PySide6.QtGui import QSurfaceFormat
from PySide6.QtOpenGLWidgets import QOpenGLWidget
from PySide6.QtWidgets import QApplication

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lab.peer_gl import gl_census, qt_canvas_framebuffer  # noqa: E402

fmt = QSurfaceFormat()
fmt.setDepthBufferSize(24)
fmt.setStencilBufferSize(8)
fmt.setVersion(4, 5)
fmt.setProfile(QSurfaceFormat.CompatibilityProfile)
QSurfaceFormat.setDefaultFormat(fmt)
app = QApplication(sys.argv)
widget = QOpenGLWidget()
widget.resize(96, 64)
widget.show()
for _ in range(20):
    app.processEvents()
before = gl_census(widget)
widget.makeCurrent()
tex = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 64, 32, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 32, 16, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
half = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, half)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_R16F, 40, 10, 0, GL.GL_RED, GL.GL_FLOAT, None)
rb = GL.glGenRenderbuffers(1)
GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rb)
GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_DEPTH24_STENCIL8, 16, 8)
buf = GL.glGenBuffers(1)
GL.glBindBuffer(GL.GL_ARRAY_BUFFER, buf)
GL.glBufferData(GL.GL_ARRAY_BUFFER, 1000, np.zeros(1000, np.uint8), GL.GL_STATIC_DRAW)
GL.glFinish()
widget.doneCurrent()
after = gl_census(widget)
print(json.dumps({"before": before, "after": after, "framebuffer": qt_canvas_framebuffer(widget),
                  "size": [widget.width(), widget.height()],
                  "ratio": widget.devicePixelRatioF()}))
