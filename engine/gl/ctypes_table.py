"""A table of typed C entry points: the one way engine/gl binds functions through ctypes.

GL entry points come from the context's loader (a name -> address function), the EGL and
GLX context calls from the platform libraries; either way each gets its declared result and
argument types, so 64-bit pointers are never truncated to int, and a name the driver does
not export is None rather than an error at import time.
"""
from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

log = logging.getLogger(__name__)

#: name -> (result type, argument types)
Signatures = Mapping[str, tuple[Any, Sequence[Any]]]


class FunctionTable:
    """ctypes callables for `signatures`, resolved through `loader`; attribute access returns
    the callable, or None when it is not exported."""

    def __init__(self, signatures: Signatures,
                 loader: Callable[[str], int | None]) -> None:
        self._fns: dict[str, Callable[..., Any] | None] = {}
        for name, (res, args) in signatures.items():
            try:
                addr = loader(name)
            except Exception:  # noqa: BLE001 - a loader that raises for unknown names: absent
                addr = None
            self._fns[name] = ctypes.CFUNCTYPE(res, *args)(addr) if addr else None
        missing = [n for n, f in self._fns.items() if f is None]
        if missing:
            log.debug("entry points not exported here: %s", ", ".join(missing))

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fns"][name]
        except KeyError:
            raise AttributeError(name) from None

    def has(self, *names: str) -> bool:
        """Every one of `names` is exported."""
        return all(self._fns.get(n) is not None for n in names)


def library_loader(library: ctypes.CDLL) -> Callable[[str], int | None]:
    """A loader over a shared library's exported symbols (EGL, GLX)."""
    def address(name: str) -> int | None:
        fn = getattr(library, name, None)
        return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value
    return address
