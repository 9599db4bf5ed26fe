"""Perspective camera, scripted camera paths and a fly camera.

Demos and tests drive the camera from a `CameraPath` evaluated at a fixed time step, so the
same frame number always shows the same picture (reference images depend on it). The window
uses `FlyCamera` for free movement.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pyglm import glm

Vec3 = tuple[float, float, float]


def mat_to_numpy(m: glm.mat4) -> np.ndarray:
    """glm stores column-major; numpy rows are rows, so transpose the column list."""
    return np.array(m.to_list(), dtype=np.float32).T


@dataclass
class Camera:
    """A look-at perspective camera."""

    position: glm.vec3 = field(default_factory=lambda: glm.vec3(0.0, 1.6, 5.0))
    target: glm.vec3 = field(default_factory=lambda: glm.vec3(0.0, 1.6, 0.0))
    up: glm.vec3 = field(default_factory=lambda: glm.vec3(0.0, 1.0, 0.0))
    fovy_deg: float = 60.0
    near: float = 0.05
    far: float = 500.0

    @property
    def fovy(self) -> float:
        return math.radians(self.fovy_deg)

    def view_matrix(self) -> glm.mat4:
        return glm.lookAt(self.position, self.target, self.up)

    def proj_matrix(self, aspect: float) -> glm.mat4:
        return glm.perspective(self.fovy, aspect, self.near, self.far)


@dataclass(frozen=True)
class Keyframe:
    time: float
    position: Vec3
    target: Vec3


def _catmull_rom(p0: glm.vec3, p1: glm.vec3, p2: glm.vec3, p3: glm.vec3,
                 t: float) -> glm.vec3:
    t2, t3 = t * t, t * t * t
    return 0.5 * ((2.0 * p1) + (-p0 + p2) * t + (2.0 * p0 - 5.0 * p1 + 4.0 * p2 - p3) * t2
                  + (-p0 + 3.0 * p1 - 3.0 * p2 + p3) * t3)


@dataclass
class CameraPath:
    """Keyframes (sorted by time) interpolated linearly or with a Catmull-Rom spline, which
    passes through every keyframe with a continuous velocity (no jolts at keys)."""

    keys: Sequence[Keyframe]
    mode: Literal["linear", "catmull-rom"] = "catmull-rom"
    loop: bool = False

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("a camera path needs at least one keyframe")
        self.keys = sorted(self.keys, key=lambda k: k.time)

    @property
    def duration(self) -> float:
        return self.keys[-1].time - self.keys[0].time

    def sample(self, t: float) -> tuple[glm.vec3, glm.vec3]:
        """(position, target) at time t (clamped to the path, or wrapped when looping)."""
        keys = self.keys
        t0 = keys[0].time
        if self.loop and self.duration > 0:
            t = t0 + (t - t0) % self.duration
        if t <= t0 or len(keys) == 1:
            return glm.vec3(keys[0].position), glm.vec3(keys[0].target)
        if t >= keys[-1].time:
            return glm.vec3(keys[-1].position), glm.vec3(keys[-1].target)
        i = next(j for j in range(len(keys) - 1) if keys[j + 1].time >= t)
        a, b = keys[i], keys[i + 1]
        u = (t - a.time) / max(b.time - a.time, 1e-9)
        if self.mode == "linear":
            return (glm.mix(glm.vec3(a.position), glm.vec3(b.position), u),
                    glm.mix(glm.vec3(a.target), glm.vec3(b.target), u))
        prev, nxt = keys[max(i - 1, 0)], keys[min(i + 2, len(keys) - 1)]
        pos = _catmull_rom(*(glm.vec3(k.position) for k in (prev, a, b, nxt)), u)
        tgt = _catmull_rom(*(glm.vec3(k.target) for k in (prev, a, b, nxt)), u)
        return pos, tgt

    def apply(self, camera: Camera, t: float) -> None:
        camera.position, camera.target = self.sample(t)


@dataclass
class FlyCamera:
    """WASD + mouse-look: yaw/pitch in degrees; Q/E move down/up."""

    position: glm.vec3 = field(default_factory=lambda: glm.vec3(0.0, 1.6, 5.0))
    yaw: float = -90.0
    pitch: float = 0.0
    speed: float = 4.0  # world units per second
    sensitivity: float = 0.15  # degrees per pixel of mouse motion

    @classmethod
    def from_camera(cls, camera: Camera) -> FlyCamera:
        d = glm.normalize(camera.target - camera.position)
        return cls(glm.vec3(camera.position), math.degrees(math.atan2(d.z, d.x)),
                   math.degrees(math.asin(max(-1.0, min(1.0, d.y)))))

    @property
    def forward(self) -> glm.vec3:
        y, p = math.radians(self.yaw), math.radians(self.pitch)
        return glm.vec3(math.cos(y) * math.cos(p), math.sin(p), math.sin(y) * math.cos(p))

    def look(self, dx: float, dy: float) -> None:
        self.yaw += dx * self.sensitivity
        self.pitch = max(-89.0, min(89.0, self.pitch - dy * self.sensitivity))

    def move(self, dt: float, forward: float, right: float, up: float) -> None:
        """Axis inputs in -1..1 (from keys)."""
        f = self.forward
        r = glm.normalize(glm.cross(f, glm.vec3(0, 1, 0)))
        self.position += (f * forward + r * right + glm.vec3(0, 1, 0) * up) * self.speed * dt

    def apply(self, camera: Camera) -> None:
        camera.position = glm.vec3(self.position)
        camera.target = self.position + self.forward
