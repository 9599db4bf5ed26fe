"""Raw GL entry points that moderngl does not expose, bound with ctypes.

moderngl cannot upload pre-compressed data, make immutable storage, copy images, label
objects, read debug output or commit sparse pages. We fetch those functions through the
*same* loader the context uses (glcontext's `load(name)`, or glfw.get_proc_address for an
adopted context), so they hit the same driver and the same current context.
Entry points a driver lacks are None; callers check the capability first.
"""
from __future__ import annotations

import ctypes as C
import logging
from collections.abc import Callable

from .ctypes_table import FunctionTable

log = logging.getLogger(__name__)

u32, i32, i64, u64, f32 = C.c_uint, C.c_int, C.c_int64, C.c_uint64, C.c_float
ptr, sizei, intptr, sizeiptr = C.c_void_p, C.c_int, C.c_ssize_t, C.c_ssize_t
u32p, i32p, i64p = C.POINTER(u32), C.POINTER(i32), C.POINTER(i64)

DEBUGPROC = C.CFUNCTYPE(None, u32, u32, u32, u32, sizei, C.c_char_p, ptr)

# name -> (restype, argtypes). Only what the engine calls.
SIGNATURES: dict[str, tuple[object, tuple[object, ...]]] = {
    "glGetError": (u32, ()),
    "glGetIntegerv": (None, (u32, i32p)),
    "glGetInteger64v": (None, (u32, i64p)),
    "glGetString": (C.c_char_p, (u32,)),
    "glGetStringi": (C.c_char_p, (u32, u32)),
    "glGenTextures": (None, (sizei, u32p)),
    "glDeleteTextures": (None, (sizei, u32p)),
    "glBindTexture": (None, (u32, u32)),
    "glActiveTexture": (None, (u32,)),
    "glTexParameteri": (None, (u32, u32, i32)),
    "glTexParameterf": (None, (u32, u32, f32)),
    "glGetTexParameteriv": (None, (u32, u32, i32p)),
    "glTexStorage2D": (None, (u32, sizei, u32, sizei, sizei)),
    "glTexStorage3D": (None, (u32, sizei, u32, sizei, sizei, sizei)),
    "glTexStorage2DMultisample": (None, (u32, sizei, u32, sizei, sizei, C.c_ubyte)),
    "glTexSubImage2D": (None, (u32, i32, i32, i32, sizei, sizei, u32, u32, ptr)),
    "glTexSubImage3D": (None, (u32, i32, i32, i32, i32, sizei, sizei, sizei, u32, u32, ptr)),
    "glCompressedTexSubImage2D": (None, (u32, i32, i32, i32, sizei, sizei, u32, sizei, ptr)),
    "glCompressedTexSubImage3D": (None, (u32, i32, i32, i32, i32, sizei, sizei, sizei, u32,
                                         sizei, ptr)),
    "glGetTexLevelParameteriv": (None, (u32, i32, u32, i32p)),
    "glGetCompressedTexImage": (None, (u32, i32, ptr)),
    "glGetTexImage": (None, (u32, i32, u32, u32, ptr)),
    "glGetInternalformativ": (None, (u32, u32, u32, sizei, i32p)),
    "glCopyImageSubData": (None, (u32, u32, i32, i32, i32, i32, u32, u32, i32, i32, i32, i32,
                                  sizei, sizei, sizei)),
    "glPixelStorei": (None, (u32, i32)),
    "glGenerateMipmap": (None, (u32,)),
    "glBindBuffer": (None, (u32, u32)),
    "glGenBuffers": (None, (sizei, u32p)),
    "glDeleteBuffers": (None, (sizei, u32p)),
    "glObjectLabel": (None, (u32, u32, sizei, C.c_char_p)),
    "glDebugMessageCallback": (None, (DEBUGPROC, ptr)),
    "glDebugMessageControl": (None, (u32, u32, u32, sizei, u32p, C.c_ubyte)),
    "glEnable": (None, (u32,)),
    "glDisable": (None, (u32,)),
    "glFenceSync": (ptr, (u32, u32)),
    "glClientWaitSync": (u32, (ptr, u32, u64)),
    "glDeleteSync": (None, (ptr,)),
    "glFlush": (None, ()),
    "glFinish": (None, ()),
    "glBufferStorage": (None, (u32, sizeiptr, ptr, u32)),
    "glMapBufferRange": (ptr, (u32, intptr, sizeiptr, u32)),
    "glFlushMappedBufferRange": (None, (u32, intptr, sizeiptr)),
    "glUnmapBuffer": (C.c_ubyte, (u32,)),
    "glTexPageCommitmentARB": (None, (u32, i32, i32, i32, i32, sizei, sizei, sizei, C.c_ubyte)),
}


class RawGL(FunctionTable):
    """ctypes bindings of the entry points in SIGNATURES, resolved through `loader`.

    Attribute access returns the callable, or None when the driver does not export it.
    """

    def __init__(self, loader: Callable[[str], int | None]) -> None:
        super().__init__(SIGNATURES, loader)

    def get_int(self, pname: int) -> int:
        v = i32(0)
        self._fns["glGetIntegerv"](pname, C.byref(v))
        return v.value

    def get_ints(self, pname: int, count: int) -> list[int]:
        arr = (i32 * max(count, 1))()
        self._fns["glGetIntegerv"](pname, arr)
        return list(arr[:count])

    def gen_texture(self) -> int:
        name = u32(0)
        self._fns["glGenTextures"](1, C.byref(name))
        return name.value

    def delete_texture(self, name: int) -> None:
        arr = u32(name)
        self._fns["glDeleteTextures"](1, C.byref(arr))

    def gen_buffer(self) -> int:
        name = u32(0)
        self._fns["glGenBuffers"](1, C.byref(name))
        return name.value

    def delete_buffer(self, name: int) -> None:
        arr = u32(name)
        self._fns["glDeleteBuffers"](1, C.byref(arr))

    def tex_level_int(self, target: int, level: int, pname: int) -> int:
        v = i32(0)
        self._fns["glGetTexLevelParameteriv"](target, level, pname, C.byref(v))
        return v.value
