"""A scene: meshes, materials, instances, lights and a camera (optionally on a path).

Per-instance data lives in numpy arrays owned by the scene (`Scene.objects`, see objects.py):
world bounding spheres and UV densities for the texture provider (`Scene.frame_arrays`), and
transforms, material rows and texture ids for the batched renderer, which writes them to the
GPU in one buffer write a frame. The arrays follow the instances incrementally: assigning an
instance's model, mesh or material marks its row stale, so a static scene costs no per-object
Python per frame.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from pyglm import glm

from ..gl.device import Device
from .camera import Camera, CameraPath
from .instance import Instance
from .material import Material
from .mesh import Mesh
from .objects import ObjectArrays

MAX_POINT_LIGHTS = 4


@dataclass
class DirectionalLight:
    direction: tuple[float, float, float] = (-0.3, -1.0, -0.4)  # direction light travels
    color: tuple[float, float, float] = (1.0, 0.97, 0.9)
    intensity: float = 2.5


@dataclass
class PointLight:
    position: tuple[float, float, float]
    color: tuple[float, float, float] = (1.0, 1.0, 1.0)
    intensity: float = 5.0
    range: float = 10.0


@runtime_checkable
class Navigator(Protocol):
    """Camera control by mouse, as plain state a window drives: scroll steps zoom at the
    cursor (normalised device coordinates), drags move by screen pixels, `apply` poses the
    camera each frame once the user has taken over. A navigator that also has
    `resize(width, height)` is told the output's size before each frame's update (a fit
    depends on it; the viewer's does), so the first frame is fitted too."""

    def zoom(self, steps: float, cursor_ndc: tuple[float, float] = (0.0, 0.0)) -> None: ...

    def drag(self, dx_px: float, dy_px: float) -> None: ...

    def apply(self, camera: Camera) -> None: ...

    def follow(self, camera: Camera) -> None:
        """Take the camera's current pose (when the user takes over mid-flight)."""
        ...


class Controls(Protocol):
    """What a scene answers itself in a window (the image browser): keys by name, a double
    click and the window's title. Keys it does not take fall to the window's own."""

    def key(self, name: str, cursor_ndc: tuple[float, float] | None = None) -> str | None:
        """A key pressed ("right", "page_down", "return", "escape", "home", "f", "q", ...)
        with the pointer at `cursor_ndc` (None outside the window): "quit" closes the
        window, "handled" when taken, None when not the scene's key."""
        ...

    def open_at(self, cursor_ndc: tuple[float, float]) -> None:
        """A double click at a point of the screen (normalised device coordinates)."""
        ...

    def title(self, cursor_ndc: tuple[float, float] | None) -> str:
        """The window's title now (`cursor_ndc`: the pointer, None outside the window)."""
        ...


@dataclass
class Scene:
    """Everything drawn. The scene owns its meshes (it releases them); textures belong to
    the provider."""

    device: Device
    meshes: list[Mesh] = field(default_factory=list)
    materials: list[Material] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    sun: DirectionalLight = field(default_factory=DirectionalLight)
    point_lights: list[PointLight] = field(default_factory=list)
    ambient: tuple[float, float, float] = (0.18, 0.19, 0.22)
    camera: Camera = field(default_factory=Camera)
    camera_path: CameraPath | None = None
    clear_color: tuple[float, float, float] = (0.02, 0.02, 0.03)
    #: Tone map the lit colour (filmic, for lit 3D scenes); False shows colour values as
    #: they are (photographs under ambient 1: a pixel comes out as its file says).
    tonemap: bool = True
    on_update: list[Callable[[Scene, float], None]] = field(default_factory=list)
    #: Mouse navigation a window may offer instead of its fly camera (the wall: zoom at the
    #: cursor, drag); None: the fly camera.
    navigator: Navigator | None = None
    #: Keys, double clicks and the title a window leaves to the scene; None: the window's own
    controls: Controls | None = None

    def add_mesh(self, mesh: Mesh) -> Mesh:
        self.meshes.append(mesh)
        return mesh

    def add(self, mesh: Mesh, material: Material, model: glm.mat4 | None = None) -> Instance:
        inst = Instance(mesh, material, model if model is not None else glm.mat4())
        self.instances.append(inst)
        return inst

    def update(self, t: float) -> None:
        """Move the camera along its path (if any) and run scene animations."""
        if self.camera_path is not None:
            self.camera_path.apply(self.camera, t)
        for fn in self.on_update:
            fn(self, t)

    @property
    def objects(self) -> ObjectArrays:
        """Per-instance numpy arrays (transforms, bounds, material rows, texture ids), kept
        up to date incrementally: only rows whose instance changed are recomputed."""
        table = self.__dict__.get("_objects")
        if table is None:
            table = ObjectArrays()
            self.__dict__["_objects"] = table
        table.sync(self.instances)
        return table

    def frame_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(centers Nx3, radii N, uv_density N, texture_ids NxS) for the FrameView; the
        density is as the textures are sampled (`ObjectArrays.texel_density`)."""
        o = self.objects
        return o.center, o.radius, o.texel_density(), o.texture_ids

    def release(self) -> None:
        for mesh in self.meshes:
            mesh.release()
        self.meshes.clear()
        self.instances.clear()
        self.__dict__.pop("_objects", None)
