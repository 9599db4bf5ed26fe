"""Entry points of the GPU-driven frame (SSBOs, indirect draws, bindless handles, timer
queries), bound with ctypes through the context's own loader, as engine/gl/raw.py does.

They live apart from raw.py's table so the modules that use them (buffers, indirect, bindless,
timing) own their slice of GL; a driver that lacks one gets None and the caller checks the
capability first. Also the two accessors every module of the frame uses to reach the device's
raw GL and allocator.
"""
from __future__ import annotations

import ctypes as C
import logging
from collections.abc import Callable
from typing import Any

from .ctypes_table import FunctionTable

log = logging.getLogger(__name__)

u32, i32, u64, i64 = C.c_uint, C.c_int, C.c_uint64, C.c_int64
ptr, sizei, intptr, sizeiptr = C.c_void_p, C.c_int, C.c_ssize_t, C.c_ssize_t

SIGNATURES: dict[str, tuple[object, tuple[object, ...]]] = {
    "glBindBufferBase": (None, (u32, u32, u32)),
    "glBindBufferRange": (None, (u32, u32, u32, intptr, sizeiptr)),
    "glBufferData": (None, (u32, sizeiptr, ptr, u32)),
    "glBufferSubData": (None, (u32, intptr, sizeiptr, ptr)),
    "glUseProgram": (None, (u32,)),
    "glBindVertexArray": (None, (u32,)),
    "glMultiDrawElementsIndirect": (None, (u32, u32, ptr, sizei, sizei)),
    "glDrawElementsInstancedBaseVertexBaseInstance": (None, (u32, sizei, u32, ptr, sizei, i32,
                                                             u32)),
    "glGetTextureHandleARB": (u64, (u32,)),
    "glMakeTextureHandleResidentARB": (None, (u64,)),
    "glMakeTextureHandleNonResidentARB": (None, (u64,)),
    "glIsTextureHandleResidentARB": (C.c_ubyte, (u64,)),
    "glGenQueries": (None, (sizei, C.POINTER(u32))),
    "glDeleteQueries": (None, (sizei, C.POINTER(u32))),
    "glBeginQuery": (None, (u32, u32)),
    "glEndQuery": (None, (u32,)),
    "glGetQueryObjectiv": (None, (u32, u32, C.POINTER(i32))),
    "glGetQueryObjectui64v": (None, (u32, u32, C.POINTER(u64))),
}

SHADER_STORAGE_BUFFER = 0x90D2
DRAW_INDIRECT_BUFFER = 0x8F3F
SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT = 0x90DF
STREAM_DRAW = 0x88E0
TRIANGLES = 0x0004
UNSIGNED_INT = 0x1405
TIME_ELAPSED = 0x88BF
QUERY_RESULT = 0x8866
QUERY_RESULT_AVAILABLE = 0x8867


def raw_of(device: Any) -> Any:
    """The device's RawGL (engine/gl only)."""
    return device._raw


def guarded(device: Any, what: str, nbytes: int, make, destroy) -> Any:
    """Run an allocation under the device's GL-error guard (typed error, nothing left)."""
    return device._alloc.guarded(what, nbytes, make, destroy)


def register(device: Any, obj: Any, kind: str, category: str, label: str, nbytes: int,
             glo: int, destroy, alive=None) -> Any:
    """Record a complete object in the ledger and the leak tracker."""
    return device._alloc.register(obj, kind, category, label, nbytes, glo, destroy, alive)


class Extensions(FunctionTable):
    """ctypes callables for SIGNATURES; missing ones are None."""

    def __init__(self, loader: Callable[[str], int | None]) -> None:
        super().__init__(SIGNATURES, loader)


def extensions(device: Any) -> Extensions:
    """The device's Extensions, made once and kept on the device."""
    ext = getattr(device, "_frame_extensions", None)
    if ext is None:
        ext = Extensions(device.handle.loader)
        device._frame_extensions = ext
    return ext

