"""Package layout that pyproject.toml alone cannot express.

The repository keeps GLSL in top-level shaders/, the demo scenes in demos/, the embedding
examples in examples/ and sample assets in assets/, where people look for them; the wheel
carries all four inside the import package, as `engine.shaders`, `engine.demos`,
`engine.examples` and `engine.assets`, so an installed engine has its shaders, demos, examples
and photographs, and puts no stray top-level `demos` module in site-packages.
"""
from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["engine", "engine.*"])
    + ["engine.shaders", "engine.demos", "engine.examples", "engine.assets"],
    package_dir={"engine.shaders": "shaders", "engine.demos": "demos",
                 "engine.examples": "examples", "engine.assets": "assets"},
    package_data={"engine.shaders": ["*.glsl"], "engine.diagnostics": ["*.html"],
                  "engine.assets": ["*.md", "photos/*", "models/*/*"]},
)
