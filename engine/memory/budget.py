"""The one VRAM budget, as the user states it and as it changes at run time.

A budget is written absolutely ("512MiB"), as a fraction of detected VRAM ("80%", like a
per-process memory-fraction cap), or resolves against a *virtual* VRAM size where no probe
exists (CI on llvmpipe). Listeners (the governor) are told of every change.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from ..errors import BudgetError
from .probe import VramReading
from .sizes import format_bytes, parse_bytes

log = logging.getLogger(__name__)

#: VRAM assumed where no probe reports any (llvmpipe): budgets in percent resolve against it.
DEFAULT_VIRTUAL_VRAM = 2 << 30


@dataclass(frozen=True)
class BudgetSpec:
    """A parsed budget: either absolute bytes or a fraction of total VRAM."""

    absolute: int | None = None
    fraction: float | None = None

    @classmethod
    def parse(cls, spec: str | float | BudgetSpec) -> BudgetSpec:
        if isinstance(spec, BudgetSpec):
            return spec
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            if spec < 0:
                raise BudgetError(f"budget must not be negative, got {spec}")
            return cls(absolute=int(spec))
        text = str(spec).strip()
        if text.endswith("%"):
            try:
                pct = float(text[:-1])
            except ValueError:
                raise BudgetError(f"cannot parse budget {spec!r}") from None
            if not 0 < pct <= 100:
                raise BudgetError(f"budget percentage must be in (0, 100], got {spec!r}")
            return cls(fraction=pct / 100.0)
        try:
            value = parse_bytes(text)
        except ValueError as exc:
            raise BudgetError(str(exc)) from None
        return cls(absolute=value)

    def resolve(self, vram_total: int) -> int:
        if self.absolute is not None:
            return self.absolute
        assert self.fraction is not None
        return int(vram_total * self.fraction)

    def __str__(self) -> str:
        if self.absolute is not None:
            return format_bytes(self.absolute)
        return f"{self.fraction * 100:g}%"


#: The one default budget: most of the device, leaving room for the desktop and other programs.
DEFAULT_BUDGET = BudgetSpec.parse("80%")


class HasVram(Protocol):
    """What a budget is resolved against: anything that reads the device's memory."""

    def vram(self) -> VramReading: ...


class Budget:
    """The user's budget in bytes, thread-safe (a host's UI thread may set it). The governor
    owns it and is its only reader; a change takes effect at the governor's next split."""

    def __init__(self, spec: str | int | BudgetSpec = DEFAULT_BUDGET, *,
                 vram_total: int | None = None,
                 virtual_vram: int = DEFAULT_VIRTUAL_VRAM) -> None:
        self._lock = threading.Lock()
        self.vram_total = vram_total
        self.virtual_vram = virtual_vram
        self._spec = BudgetSpec.parse(spec)
        self._bytes = self._spec.resolve(self.reference_total)

    @classmethod
    def on_device(cls, device: HasVram, spec: BudgetSpec | Budget | None = None) -> Budget:
        """The one way a run's budget meets its device: a percentage is taken of the device's
        probed memory (the virtual size where the driver reports none); None is the default;
        a Budget made already is the caller's and is kept as it is."""
        if isinstance(spec, Budget):
            return spec
        return cls(DEFAULT_BUDGET if spec is None else spec,
                   vram_total=device.vram().total_bytes)

    @property
    def reference_total(self) -> int:
        """What a percentage is taken of: the probed VRAM, else the virtual size."""
        return self.vram_total if self.vram_total else self.virtual_vram

    @property
    def spec(self) -> BudgetSpec:
        return self._spec

    @property
    def bytes(self) -> int:
        return self._bytes

    def set(self, spec: str | int | BudgetSpec) -> int:
        """Change the budget at run time; returns the new byte value."""
        parsed = BudgetSpec.parse(spec)
        with self._lock:
            old = self._bytes
            self._spec = parsed
            self._bytes = parsed.resolve(self.reference_total)
            new = self._bytes
        if new != old:
            log.info("budget %s -> %s", format_bytes(old), format_bytes(new))
        return new

    def __repr__(self) -> str:
        return f"Budget({self._spec}, {format_bytes(self._bytes)})"
