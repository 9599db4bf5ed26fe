"""Package layout that pyproject.toml alone cannot express.

The repository keeps GLSL in top-level shaders/, the demo scenes in demos/ and sample assets in
assets/, where people look for them; the wheel carries all three inside the import package, as
`engine.shaders`, `engine.demos` and `engine.assets`, so an installed engine has its shaders,
demos and photographs, and puts no stray top-level `demos` module in site-packages.
"""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["engine", "engine.*"])
    + ["engine.shaders", "engine.demos", "engine.assets"],
    package_dir={"engine.shaders": "shaders", "engine.demos": "demos", "engine.assets": "assets"},
    package_data={"engine.shaders": ["*.glsl"], "engine.diagnostics": ["*.html"],
                  "engine.assets": ["*.md", "photos/*", "models/*/*"]},
)
