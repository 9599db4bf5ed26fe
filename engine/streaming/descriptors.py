"""The process's limit on open file descriptors, raised to what the system allows.

Why: a virtual texture keeps its file open (and mapped; a mapping holds a descriptor of its
own) so that tile reads cost no open; a wall of ten thousand virtual textures needs tens of
thousands of descriptors, far past the soft limit most shells start with (1,024), while the
hard limit the system sets is usually much higher. Raising the soft limit to the hard one
is what runtimes such as Go do at start; it changes nothing for other processes.
"""
from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

_lock = threading.Lock()
_raised: list[int] = []  # the soft limit once raised (or found), so it is done once


def raise_open_file_limit() -> int | None:
    """Raise the soft RLIMIT_NOFILE to the hard limit (once per process); the soft limit
    now, or None where the platform has no such limit."""
    with _lock:
        if _raised:
            return _raised[0]
        try:
            import resource
        except ImportError:  # not a POSIX system
            return None
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        if want > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                log.info("open file limit raised from %d to %d", soft, want)
                soft = want
            except (ValueError, OSError) as exc:
                log.info("open file limit stays %d: %s", soft, exc)
        _raised.append(soft)
        return soft
