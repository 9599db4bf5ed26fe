"""Bring your own images: folders, globs and huge images on a fixed slice of GPU memory.

`ImageWall` / `ImageView` (engine.view.wall) build the scene for any host; `python -m engine
view` (engine.view.cli) is the command. Below them: discovery of files (discover), decoding
with fast low-resolution paths (decode), the thumbnail and detail cache (cache), the
background encoder (encoder), the layout (layout), what to encode first (priority) and mouse
navigation (navigator). docs/view.md is the user's guide.
"""
