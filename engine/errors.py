"""The engine's typed errors, in one module so callers can catch by kind.

Every error a user can provoke with input (a file, a size, a budget) is one of these,
never a bare KeyError/struct.error/zlib.error leaking out of a parser or GL call.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class TextureFormatError(EngineError, ValueError):
    """A texture file is malformed or hostile. The message names the file and the field."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):
        # Errors cross process boundaries (bake workers): rebuild from the fields.
        return (TextureFormatError, (self.path, self.problem))


class UnsupportedFormatError(TextureFormatError):
    """A well-formed file whose payload the engine cannot use (BasisLZ, UASTC, ETC, ...)."""

    def __init__(self, path: object, format_name: str, why: str = "") -> None:
        self.format_name = format_name
        msg = f"unsupported format {format_name}" + (f" ({why})" if why else "")
        super().__init__(path, msg)
        self.why = why

    def __reduce__(self):
        return (UnsupportedFormatError, (self.path, self.format_name, self.why))


class ImageSourceError(TextureFormatError):
    """A scientific image source (OME-Zarr, OME-TIFF, tiled TIFF; a path or a URL) that is
    missing, unreadable or whose metadata is wrong. The message names the source and the
    field."""

    def __reduce__(self):
        return (ImageSourceError, (self.path, self.problem))


class GltfError(EngineError, ValueError):
    """A malformed or hostile glTF file. The message names the file and the field."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):
        return (type(self), (self.path, self.problem))


class UnsupportedGltfError(GltfError):
    """A well-formed glTF using a feature the engine does not implement (sparse accessors,
    Draco, required extensions, ...)."""


class BudgetError(EngineError, ValueError):
    """A budget specification that cannot be honoured (unparsable, zero with no floor, ...)."""


class GLError(EngineError, RuntimeError):
    """A GL call reported an error (glGetError or KHR_debug high severity)."""

    def __init__(self, message: str, codes: tuple[int, ...] = ()) -> None:
        self.codes = codes
        super().__init__(message)


class GLOutOfMemoryError(GLError, MemoryError):
    """GL_OUT_OF_MEMORY while allocating. The half-made object is already deleted and unledgered."""

    def __init__(self, what: str, nbytes: int) -> None:
        self.nbytes = nbytes
        self.what = what
        super().__init__(f"GL_OUT_OF_MEMORY allocating {what} ({nbytes} bytes)", (0x0505,))


class ContextError(EngineError, RuntimeError):
    """No usable GL context could be made or adopted, or GL was touched off the render thread."""


class LeakError(EngineError, AssertionError):
    """GL objects made inside a leak check were still alive at its end."""

    def __init__(self, leaks: list) -> None:
        self.leaks = leaks
        lines = [f"{len(leaks)} GL object(s) leaked:"]
        for rec in leaks:
            lines.append("  " + rec.describe())
        super().__init__("\n".join(lines))


class UsageError(EngineError, ValueError):
    """An argument outside its accepted range (a picture size, a count), caught before any
    work or allocation starts. The message names the option and the range; the CLI prints
    it as one line and exits with status 2."""


class OutputExistsError(EngineError, FileExistsError):
    """An output would overwrite a file this command did not make (pass --force to allow)."""

    def __init__(self, path: object, why: str) -> None:
        self.path = str(path)
        self.why = why
        super().__init__(f"{self.path}: {why}")

    def __reduce__(self):
        return (type(self), (self.path, self.why))


class UnsafeStateError(EngineError, PermissionError):
    """A folder or file of shared state (a share group, the monitor's state files) that this
    user does not own alone: a symbolic link, another user's, open to others, not a folder or
    not a regular file. Another local user could plant files there or turn our writes into
    writes of theirs, so the engine refuses it; the message names the path and why."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}; refusing to use it (remove it, or point "
                         f"$XDG_RUNTIME_DIR at a folder only you can write)")
        self.filename = self.path  # the CLI's rule: an OSError naming a path is the user's

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):
        return (type(self), (self.path, self.problem))


class OutputWriteError(EngineError):
    """An output the user asked for (a report, a trace, a screenshot) could not be written:
    a full disk, a quota, a read-only file system. Raised once the run has released what it
    made and the temporary file is removed; the message names the file and the reason."""

    def __init__(self, path: object, why: str) -> None:
        self.path = str(path)
        self.why = why
        super().__init__(f"cannot write {self.path}: {why} (no partial file left)")

    def __reduce__(self):
        return (type(self), (self.path, self.why))


#: The name the package is installed by (pyproject.toml's project name).
DISTRIBUTION = "vram-budget-renderer"


def install_hint(extra: str) -> str:
    """The command an installed user runs to get an optional extra: every message that
    names a missing optional feature says it this one way."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


class FaultKind(str, Enum):
    """What kind of failure the engine survived and reported (a `FaultEvent`)."""

    #: a whole-level read failed: the texture stays at the levels it holds
    LEVEL_READ = "level_read"
    #: a whole-level upload or allocation failed (GL OOM etc.): the texture stays put
    LEVEL_UPLOAD = "level_upload"
    #: a virtual texture's tile read failed: it keeps its resident tiles
    TILE_READ = "tile_read"
    #: render targets at a scale could not be allocated
    TARGET_ALLOC = "target_alloc"
    #: ... and a smaller scale was taken instead
    TARGET_FALLBACK = "target_fallback"


@dataclass(frozen=True)
class FaultEvent:
    """One failure the engine degraded around, as data: `subject` names what it hit (a
    texture key, a virtual texture's path, a target set's label)."""

    kind: FaultKind
    subject: str
    detail: str = ""


class FaultReport:
    """The stream of `FaultEvent`s of one device: the parts that survive a failure report it
    here (besides their log line), and whoever needs to count faults (the soak, a host's
    monitor) subscribes, so no one has to parse log messages."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[FaultEvent], None]] = []

    def subscribe(self, listener: Callable[[FaultEvent], None]) -> Callable[[], None]:
        """Call `listener` with every event from now on; returns the unsubscribe call."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def report(self, kind: FaultKind, subject: object, detail: object = "") -> None:
        event = FaultEvent(kind, str(subject), str(detail))
        for listener in list(self._listeners):
            listener(event)
