"""Bring your own images: folders, globs and huge images on a fixed slice of GPU memory.

`ImageWall` / `ImageView` (engine.view.wall) build the scene for any host; `python -m engine
view` (engine.commands.view) is the command. Below them: discovery of files (discover), decoding
with fast low-resolution paths (decode), transparency over a checkerboard (backdrop), the
thumbnail and detail cache (cache), the background encoder (encoder), the layout (layout),
what to encode first (priority), mouse navigation (navigator), the window's keys and title
(browse) and when a picture is complete (settle). docs/view.md is the user's guide.
"""
