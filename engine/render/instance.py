"""One drawn object of a scene: a mesh, a material and a model matrix.

Its own module because the scene and its object arrays both need it: an assignment to
`mesh`, `material` or `model` tells the owner (the scene's `ObjectArrays`) that its row is
stale, so neither has to import the other to know what an instance is.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pyglm import glm

from .material import Material
from .mesh import Mesh


@dataclass(eq=False)
class Instance:
    """One drawn object. Assigning `mesh`, `material` or `model` tells the owning scene that
    this row of its object arrays is stale (only that row is recomputed next frame)."""

    mesh: Mesh
    material: Material
    model: glm.mat4 = field(default_factory=glm.mat4)

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        owner = self.__dict__.get("_owner")
        if owner is not None:
            owner._changed(self)

    @property
    def scale(self) -> float:
        """The largest axis scale of the model matrix (conservative for bounds)."""
        return max(glm.length(glm.vec3(self.model[i])) for i in range(3))

    @property
    def center(self) -> glm.vec3:
        return glm.vec3(self.model * glm.vec4(*self.mesh.center, 1.0))

    @property
    def radius(self) -> float:
        return self.mesh.radius * self.scale

    @property
    def uv_density(self) -> float:
        """UV units per world unit: the mesh's, shrunk by the instance scale."""
        return self.mesh.uv_density / max(self.scale, 1e-9)
