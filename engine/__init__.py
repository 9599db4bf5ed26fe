"""A moderngl render engine that lives inside a GPU-memory budget.

The names users touch are importable from here: `engine.Device`, `engine.open_texture`,
`engine.StreamingProvider`, `engine.run_scene`, `engine.RunSettings`, ... They are resolved on
first use (PEP 562), so `import engine` stays cheap and a lower layer importing
`engine.__version__` never drags the upper ones in.
"""
import importlib as _importlib

__version__ = "0.2.0"

#: public name -> module that defines it
_API: dict[str, str] = {
    # devices and GL objects
    "Device": "engine.gl.device",
    "GpuTexture": "engine.gl.textures",
    "TrackedContext": "engine.gl.tracking",
    "upload_texture_file": "engine.gl.upload",
    # textures on disk (pure CPU)
    "TextureFile": "engine.textures.container",
    "open_texture": "engine.textures.reader",
    "decode_rgba": "engine.textures.decode",
    "inspect": "engine.textures.inspect",
    "bake_file": "engine.textures.bake",
    "bake_image": "engine.textures.bake",
    "bake_many": "engine.textures.bake",
    # memory
    "Budget": "engine.memory.budget",
    "Category": "engine.memory.ledger",
    "Governor": "engine.memory.governor",
    "GovernorSettings": "engine.memory.governor",
    "Ledger": "engine.memory.ledger",
    "LeakTracker": "engine.memory.leaks",
    # streaming
    "StreamingProvider": "engine.streaming.provider",
    "StreamerSettings": "engine.streaming.settings",
    "StaticTextureProvider": "engine.streaming.static",
    "TextureProvider": "engine.streaming.contract",
    "FrameView": "engine.streaming.contract",
    "ProviderStats": "engine.streaming.contract",
    # scenes and rendering
    "Scene": "engine.render.scene",
    "Camera": "engine.render.camera",
    "Material": "engine.render.material",
    "Mesh": "engine.render.mesh",
    "Renderer": "engine.render.renderer",
    "quad": "engine.render.mesh",
    # the user's images (python -m engine view; docs/view.md)
    "ImageWall": "engine.view.wall",
    "ImageView": "engine.view.wall",
    # scientific images: OME-Zarr, OME-TIFF, slides, URLs (docs/science.md)
    "ScienceView": "engine.science.view",
    "ChannelDisplay": "engine.science.display",
    "open_image_source": "engine.science.readers",
    # running
    "RunSettings": "engine.app.settings",
    "RunResult": "engine.app.loop",
    "FrameLoop": "engine.app.loop",
    "FrameContext": "engine.app.loop",
    "OverBudget": "engine.app.loop",
    "run_scene": "engine.hosts.run",
    # seeing memory: who holds what, now
    "snapshot": "engine.diagnostics.snapshot",
    "register_provider": "engine.app.providers",
    # testing helpers for users' CI
    "run_headless": "engine.testing",
    "assert_under_budget": "engine.testing",
    "assert_no_leaks": "engine.testing",
    "assert_image_close": "engine.testing",
    # errors
    "EngineError": "engine.errors",
    "TextureFormatError": "engine.errors",
    "UnsupportedFormatError": "engine.errors",
    "ImageSourceError": "engine.errors",
    "BudgetError": "engine.errors",
    "GLError": "engine.errors",
    "GLOutOfMemoryError": "engine.errors",
    "LeakError": "engine.errors",
}

__all__ = ["__version__", *sorted(_API)]


def __getattr__(name: str) -> object:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """Only the API (and the version): not the helpers this module imports for itself."""
    return list(__all__)
