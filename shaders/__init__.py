"""GLSL sources, installed as the package `engine.shaders` (see setup.py's package_dir).

They live in the repository's top-level shaders/ folder as plain .glsl files, so shader
authors edit them with their editor's GLSL support; `engine.gl.shaders.load` reads them
through importlib.resources, which works from a checkout, an editable install and a wheel.
"""
