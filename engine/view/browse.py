"""The wall as an image browser in a window: keys, double click and the title.

Why a module of its own: what a key means is plain state over the wall (which image is open,
where the camera goes), testable without a window; the window host only names the keys
(engine.render.scene.Controls). As photo browsers do: Right/Left, PageDown/PageUp, Space and
Backspace step to the next or previous image (opened, i.e. fitted to the screen), Down/Up to
the image below or above (the next row's nearest), Return or a double click opens the image
under the pointer, Esc goes back to the whole wall (and quits from there), Home or `f` fits
everything, `q` quits. The title names the file under the pointer, else the one opened,
else the wall.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .layout import Rect
from .navigator import Navigator

NEXT = ("right", "page_down", "space")
PREVIOUS = ("left", "page_up", "backspace")
VERTICAL = {"down": -1, "up": 1}  # the direction of world y (up on screen)
FIT_ALL = ("home", "f")
#: The window's title for a wall: "engine view", then what is under view.
APP = "engine view"


class Shown(Protocol):
    """An image on the wall, as the browser reads it (engine.view.wall.Item)."""

    index: int
    source: Path
    rect: Rect


class Picked(Protocol):
    index: int


class Browsable(Protocol):
    """What the browser needs of a wall (engine.view.wall.ImageWall): its images, its
    camera's fit and the moves a key makes."""

    navigator: Navigator

    @property
    def items(self) -> Sequence[Shown]: ...

    def zoom_to(self, index: int) -> None: ...

    def fit_all(self) -> None: ...

    def pick(self, ndc: tuple[float, float]) -> Picked | None: ...


@dataclass
class Browser:
    """Which image is open (None: the whole wall) and what each key does to it."""

    wall: Browsable
    current: int | None = None

    def key(self, name: str, cursor_ndc: tuple[float, float] | None = None) -> str | None:
        """A key by name (module docstring): "quit", "handled" or None (not the wall's)."""
        count = len(self.wall.items)
        if name in NEXT or name in PREVIOUS:
            step = 1 if name in NEXT else -1
            if self.current is None:  # from the wall: the image under the pointer, or an end
                under = self._under(cursor_ndc)
                self.open(under if under is not None else (0 if step > 0 else count - 1))
            else:
                self.open((self.current + step) % count)
            return "handled"
        if name in VERTICAL:
            start = self.current if self.current is not None else self._under(cursor_ndc)
            self.open(0 if start is None else self._row_neighbour(start, VERTICAL[name]))
            return "handled"
        if name == "return":
            under = self._under(cursor_ndc)
            target = under if under is not None else self.current
            self.open(target if target is not None else 0)
            return "handled"
        if name == "escape":
            fitted = self.wall.navigator.fitted
            if self.current is None and fitted is not None and \
                    fitted[0] == self.wall.navigator.everything:
                return "quit"  # the whole wall already: nothing to go back from
            self.fit_all()
            return "handled"
        if name in FIT_ALL:
            self.fit_all()
            return "handled"
        if name == "q":
            return "quit"
        return None

    def open(self, index: int) -> None:
        self.current = index
        self.wall.zoom_to(index)

    def fit_all(self) -> None:
        self.current = None
        self.wall.fit_all()

    def open_at(self, cursor_ndc: tuple[float, float]) -> None:
        under = self._under(cursor_ndc)
        if under is not None:
            self.open(under)

    def title(self, cursor_ndc: tuple[float, float] | None) -> str:
        """"engine view - " and the caption of the image under the pointer, else of the
        one open, else of the wall."""
        under = self._under(cursor_ndc)
        return f"{APP} - {self.caption(under if under is not None else self.current)}"

    def caption(self, index: int | None) -> str:
        """"NAME (i/N)" for image `index`, "N images" for None (the window's HUD shows the
        one open, so a screenshot names it too)."""
        count = len(self.wall.items)
        if index is None:
            return f"{count} image{'s' if count != 1 else ''}"
        # a name that is not UTF-8 (caf\xe9.jpg) shown with its byte escaped, not refused
        name = self.wall.items[index].source.name.encode("utf-8", "backslashreplace").decode()
        return f"{name} ({index + 1}/{count})"

    def _row_neighbour(self, index: int, direction: int) -> int:
        """The image in the nearest row above (`direction` 1) or below (-1) image `index`,
        nearest to it across; `index` itself at the top or bottom row."""
        here = self.wall.items[index].rect
        cx, cy = here.center
        beyond = [it for it in self.wall.items
                  if (it.rect.center[1] - cy) * direction > here.height / 2]
        if not beyond:
            return index
        row_y = min((it.rect.center[1] for it in beyond), key=lambda y: abs(y - cy))
        row = [it for it in beyond if abs(it.rect.center[1] - row_y) < 1e-9]
        return min(row, key=lambda it: abs(it.rect.center[0] - cx)).index

    def _under(self, cursor_ndc: tuple[float, float] | None) -> int | None:
        if cursor_ndc is None:
            return None
        pick = self.wall.pick(cursor_ndc)
        return None if pick is None else pick.index
