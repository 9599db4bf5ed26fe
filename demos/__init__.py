"""Demo scenes, by name: `python -m engine demo NAME`.

A demo is a scene factory `(device, provider, options) -> Scene`, optionally with per-frame
hooks (`hooks(options) -> list[FrameHook]`) for scripted events such as budget changes. Add
one by putting a `Demo` in `DEMOS` (or calling `register`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.app.loop import FrameHook, SceneFactory


@dataclass(frozen=True)
class Demo:
    name: str
    factory: SceneFactory
    description: str = ""
    hooks: Callable[[Mapping[str, Any]], list[FrameHook]] = field(default=lambda opts: [])
    #: the `demo` command's scene options this demo reads (--count, --texture-size, --format,
    #: --model): the others are refused, naming the demos that take them
    options: tuple[str, ...] = ()
    #: without --budget, the budget is measured from the scene so that it binds
    #: (demos.pressure.binding_hooks) instead of 80% of the device, which never would
    measured_budget: bool = False


DEMOS: dict[str, Demo] = {}


def register(demo: Demo) -> Demo:
    DEMOS[demo.name] = demo
    return demo


def _builtin() -> None:
    from . import gallery, gltf_demo, pressure

    textures = ("count", "texture_size", "format")
    register(Demo("gallery", gallery.build, "corridor of large BC7 textures, scripted "
                  "fly-through, under a budget measured to bind", options=textures,
                  measured_budget=True))
    register(Demo("pressure", gallery.build, "the gallery while the budget rises and falls",
                  pressure.hooks, options=textures))
    register(Demo("gltf", gltf_demo.build, "Khronos BoxTextured glTF sample on an orbit",
                  options=("model",)))
    from . import wall

    register(Demo("wall", wall.build, "thousands of photographs in a zoomable grid: overview, "
                  "dive, pan, cuts, zoom out", wall.hooks, options=("count", "texture_size")))


_builtin()
