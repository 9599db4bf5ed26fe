"""When a texture whose GL upload failed may stream again.

A GL out-of-memory is usually passing (another application's allocation, a driver's
fragmentation), unlike a corrupt file: the texture keeps what is resident and is tried
again after a back-off that doubles with each further failure, so a lasting shortage
costs a few refused uploads a minute, not one a frame. Pure: the caller passes the time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: seconds before the first retry; each further failure doubles it, up to LAST_S
FIRST_S = 1.0
LAST_S = 32.0


@dataclass
class UploadRetries:
    """The textures waiting to retry an upload, and when each may."""

    due: dict[int, float] = field(default_factory=dict)
    failures: dict[int, int] = field(default_factory=dict)

    def failed(self, texture: int, now: float) -> float:
        """Record a failed upload at `now`; the time the texture may try again."""
        n = self.failures.get(texture, 0)
        self.failures[texture] = n + 1
        self.due[texture] = now + min(LAST_S, FIRST_S * 2 ** n)
        return self.due[texture]

    def ready(self, now: float) -> list[int]:
        """The textures whose wait is over (each returned once per failure)."""
        out = [t for t, at in self.due.items() if at <= now]
        for t in out:
            del self.due[t]
        return out

    def succeeded(self, texture: int) -> None:
        """A load of the texture went through: its next failure waits FIRST_S again."""
        self.failures.pop(texture, None)

    def forget(self, texture: int) -> None:
        """The texture will not be retried (its storage is gone, or a read failed)."""
        self.due.pop(texture, None)
        self.failures.pop(texture, None)
