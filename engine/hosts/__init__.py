"""Hosts: putting the engine inside applications people already use.

An app-level package (it may import every layer below it): `frames` keeps the engine's frame
loop at the host's size, `canvas` drives it from a rendercanvas canvas (Qt, wx, Jupyter,
offscreen), and `engine.gl.hosts` holds the GL side of drawing into a host's own context
(Qt's QOpenGLWidget, see examples/embed_qt.py).
"""
