"""Indirect multi-draws: many objects in one GL call from a draw-command buffer.

A command is glDrawElementsIndirectCommand (count, instanceCount, firstIndex, baseVertex,
baseInstance). The renderer builds an array of them with numpy (one per visible object;
baseInstance = the object's row in the per-frame object data, which the vertex shader reads as
gl_BaseInstanceARB), writes it with the object data into the frame ring, and draws a run of
commands with one glMultiDrawElementsIndirect: the per-object cost is numpy, not Python.

`batched_frame_supported` says whether the device's profile chose the batched frame: GLSL
4.30, indirect multi-draws, shader storage buffers, base instances and
ARB_shader_draw_parameters (llvmpipe 22.3 has all of them at GL 4.5; GL 4.6 in core).
"""
from __future__ import annotations

import ctypes as C
from typing import Any, Self

import numpy as np

from .extensions import (
    DRAW_INDIRECT_BUFFER,
    SHADER_STORAGE_BUFFER,
    TRIANGLES,
    UNSIGNED_INT,
    extensions,
    raw_of,
)

#: glDrawElementsIndirectCommand, 20 bytes, tightly packed.
DRAW_COMMAND = np.dtype([("count", "<u4"), ("instance_count", "<u4"), ("first_index", "<u4"),
                         ("base_vertex", "<i4"), ("base_instance", "<u4")])


def batched_frame_supported(device: Any) -> bool:
    """The device profile's draw path (engine/gl/profile.py decides it once)."""
    return device.profile.draw_path == "batched"


def draw_commands(index_count: np.ndarray, first_index: np.ndarray, base_vertex: np.ndarray,
                  objects: np.ndarray) -> np.ndarray:
    """One command per object: `index_count`/`first_index`/`base_vertex` are per object (its
    mesh's range in the shared geometry), `objects` the row each command's shader reads."""
    cmds = np.empty(len(objects), DRAW_COMMAND)
    cmds["count"] = index_count
    cmds["instance_count"] = 1
    cmds["first_index"] = first_index
    cmds["base_vertex"] = base_vertex
    cmds["base_instance"] = objects
    return cmds


def bind_storage(device: Any, binding: int, buffer_glo: int, offset: int, nbytes: int) -> None:
    """Bind bytes [offset, offset + nbytes) of a buffer to shader storage block `binding`."""
    extensions(device).glBindBufferRange(SHADER_STORAGE_BUFFER, binding, buffer_glo, offset,
                                         max(int(nbytes), 16))


class DrawSession:
    """Program, vertex array and draw-indirect buffer bound once for a run of draws
    (`with DrawSession(...) as d: d.indirect(offset, count); d.direct(command)`), restored
    to none afterwards so moderngl's own draws find the state they expect."""

    def __init__(self, device: Any, program_glo: int, vao_glo: int, buffer_glo: int) -> None:
        self._ext, self._raw = extensions(device), raw_of(device)
        self._args = (program_glo, vao_glo, buffer_glo)
        self._draw = self._ext.glDrawElementsInstancedBaseVertexBaseInstance

    def __enter__(self) -> Self:
        prog, vao, buf = self._args
        self._ext.glUseProgram(prog)
        self._ext.glBindVertexArray(vao)
        self._raw.glBindBuffer(DRAW_INDIRECT_BUFFER, buf)
        return self

    def indirect(self, offset: int, count: int) -> None:
        """glMultiDrawElementsIndirect of `count` commands at byte `offset`."""
        if count > 0:
            self._ext.glMultiDrawElementsIndirect(TRIANGLES, UNSIGNED_INT,
                                                  C.c_void_p(int(offset)), int(count),
                                                  DRAW_COMMAND.itemsize)

    def direct_values(self, count: int, instance_count: int, first_index: int,
                      base_vertex: int, base_instance: int) -> None:
        """`direct` from the command's five values (plain ints)."""
        self._draw(TRIANGLES, count, UNSIGNED_INT, C.c_void_p(first_index * 4),
                   instance_count, base_vertex, base_instance)

    def direct(self, command: np.void) -> None:
        """One command drawn from its values on the CPU
        (glDrawElementsInstancedBaseVertexBaseInstance, GL 4.2): for a run of a single
        command, cheaper than an indirect draw where the driver reads the indirect buffer
        on the CPU (llvmpipe)."""
        self._ext.glDrawElementsInstancedBaseVertexBaseInstance(
            TRIANGLES, int(command["count"]), UNSIGNED_INT,
            C.c_void_p(int(command["first_index"]) * 4), int(command["instance_count"]),
            int(command["base_vertex"]), int(command["base_instance"]))

    def __exit__(self, *exc) -> None:
        self._raw.glBindBuffer(DRAW_INDIRECT_BUFFER, 0)
        self._ext.glBindVertexArray(0)

