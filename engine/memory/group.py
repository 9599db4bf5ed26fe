"""A budget shared by the engine processes of one machine: a named group, with no daemon.

Why a file and a lock. Processes on one GPU (a notebook user each, a render job each) saw each
other only as outside pressure through the driver, a frame late, each taking what another had
just freed. Here they meet in one small file per group in the user's runtime folder
(``$XDG_RUNTIME_DIR/engine-share/GROUP``, a tmpfs on systemd machines, else
``/tmp/engine-share-UID/GROUP``): a header with the group budget and one fixed-size row (a
`Seat`) per member; the last member to leave removes it. A member exchanges once per frame under an exclusive `fcntl.flock` of the file: it
reads every row, drops the dead, writes its claim, reservation and heartbeat, and computes its
grant with `engine.memory.shares.settle`, so the reservation rule holds across processes as
it does between views. The kernel drops a flock when its holder dies, so a `kill -9` cannot
leave the group locked. No broker: nothing to start, nothing that can die and take the group
with it.

Liveness. A row belongs to a process id and that process's start time (``/proc/PID/stat``, so
a reused pid is not mistaken for the member); each member watches the others through a pidfd
(`Liveness`). A row whose process is gone (or a zombie) is cleared by the next exchange of
any member: its reservation, and with it its share, goes back
to the others within one of their frames. A member whose heartbeat is older than
`STALE_S` (stopped, or no longer drawing) still holds its memory, so its reservation stays;
its claim counts as hidden (its floor) until it exchanges again.

Hostile rows. The folder is checked before use (engine.statedir: this user's, 0700, no
symbolic link) and the file is opened with O_NOFOLLOW, so another user can neither plant a
group nor turn our writes into writes of their file. A row is still read as hostile input
(`parse_row`): a pid outside 2..pid_max, a weight or heartbeat that is not a finite number, a
weight <= 0 or a heartbeat in the future (one CLOCK_MONOTONIC serves every process, so no
member can write one) make it rejected; a row whose process belongs to another user or does
not hold this group's file open is no member (`Liveness`). Such a row is cleared and named
once in a warning, never blamed on this member's own options. What a valid row can claim is
clamped: its weight to `MIN_WEIGHT..MAX_WEIGHT` (the range a member's own option accepts),
its byte figures to the group budget, and its floor, as the others count it, to an equal part
of the budget (``budget // members``): a floor is what a member never drops below, and no one
member may declare more of it than an equal split, so the floors always fit and each member
keeps at least ``min(its floor, budget // members)``. Reservations are not clamped: they
stand for memory a member really holds, and the invariant that the group never holds more
than its budget rests on them; only a live process of this user that holds the group file
can write one, i.e. another engine run of the same user.

The group budget is set by the member that finds no live member in the file; a member joining
an existing group with another budget follows the group's (and says so in the log).

`join_share` is the one way in for a run: it seats a governor on an in-process board
(`engine.memory.shares.ViewShares`) or in a named group here, so it lives above both.
"""
from __future__ import annotations

import fcntl
import logging
import math
import os
import select
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import BudgetError
from ..statedir import open_state, pid_max, private_dir
from .shares import (
    MAX_WEIGHT,
    MIN_WEIGHT,
    Claim,
    MemberState,
    Seat,
    ShareMember,
    ShareSettings,
    ViewShares,
    check_group_name,
    settle,
    shortfall,
)
from .sizes import format_bytes

log = logging.getLogger(__name__)

#: Seconds without a heartbeat after which a live member's claim counts as hidden.
STALE_S = 1.0
#: Rows in a group file: members beyond it are refused with a clear error.
MAX_MEMBERS = 64
#: How long a joining member with a floor waits for the others to free that floor.
JOIN_WAIT_S = 2.0

_MAGIC = b"ENGSHR01"
_HEADER = struct.Struct("<8sQ")  # magic, group budget
# pid, start ticks, heartbeat (CLOCK_MONOTONIC, one clock for every process of the machine),
# weight, floor, demand, visible, reserved, held, share, grant
_ROW = struct.Struct("<iQddQQ?QQQQ")
_SIZE = _HEADER.size + MAX_MEMBERS * _ROW.size
#: A group budget read from the file must be below this (8 EiB): anything else is no budget.
MAX_BUDGET = 1 << 63


def runtime_dir(create: bool = True) -> Path:
    """Where group files live: the user's runtime folder (tmpfs, private to the user),
    checked (and made, with `create`) by engine.statedir's rules: UnsafeStateError when
    another user could reach it."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base) and os.access(base, os.W_OK):
        path = Path(base) / "engine-share"
    else:
        path = Path(f"/tmp/engine-share-{os.getuid()}")
    return private_dir(path, create=create)


def group_path(name: str, create: bool = True) -> Path:
    return runtime_dir(create) / check_group_name(name)


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone or a
    zombie (dead, not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold ')'
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True)
class Row:
    """One member as the group file holds it."""

    pid: int
    ticks: int
    heartbeat: float
    seat: Seat

    def pack(self) -> bytes:
        c, s = self.seat.claim, self.seat
        return _ROW.pack(self.pid, self.ticks, self.heartbeat, c.weight, c.floor, c.demand,
                         c.visible, s.reserved, s.held, s.share, s.grant)


class RowRejected(ValueError):
    """A row no member could have written (`parse_row`); the message says why."""


def parse_row(data: bytes, budget: int, now: float, max_pid: int) -> Row:
    """A row of the group file read as hostile input (module docstring, "Hostile rows"):
    RowRejected for one no member could have written, else the row with its weight clamped
    to MIN_WEIGHT..MAX_WEIGHT and its byte figures to the group budget."""
    pid, ticks, beat, w, floor, demand, vis, reserved, held, share, grant = _ROW.unpack(data)
    if not 1 < pid <= max_pid:
        raise RowRejected(f"pid {pid} is no process id (2..{max_pid})")
    if not (math.isfinite(w) and w > 0):
        raise RowRejected(f"pid {pid}: weight {w!r} is not a finite number > 0")
    if not (math.isfinite(beat) and 0 <= beat <= now + STALE_S):
        raise RowRejected(f"pid {pid}: heartbeat {beat!r} is not a time this machine has seen")
    b = [min(v, budget) for v in (floor, demand, reserved, held, share, grant)]
    claim = Claim(min(max(w, MIN_WEIGHT), MAX_WEIGHT), b[0], b[1], vis)
    return Row(pid, ticks, beat, Seat(claim, b[2], b[3], b[4], b[5]))


def as_counted(seat: Seat, members: int, budget: int, stale: bool) -> Seat:
    """Another member's seat as this one counts it: its floor at most an equal part of the
    budget, and only its floor wanted while it is `stale` (alive, not drawing)."""
    c = seat.claim
    floor = min(c.floor, budget // max(1, members))
    demand, visible = (floor, False) if stale else (c.demand, c.visible)
    return Seat(Claim(c.weight, floor, demand, visible), seat.reserved, seat.held)


_EMPTY = _ROW.pack(0, 0, 0.0, 0.0, 0, 0, False, 0, 0, 0, 0)


class GroupFile:
    """The group's file: locked read-modify-write of its header and rows."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = group_path(name)
        self._fd = open_state(self.path, create=True)
        #: (device, inode) of the open file: every member holds a descriptor of it
        self.identity = self._identity()
        #: rows the last `read` rejected: index -> why (cleared by `live_rows`)
        self.rejected: dict[int, str] = {}
        self._max_pid = pid_max()

    def _identity(self) -> tuple[int, int]:
        st = os.fstat(self._fd)
        return st.st_dev, st.st_ino

    @contextmanager
    def locked(self) -> Iterator[GroupFile]:
        """The file, locked. The last member to leave removes it; one that opened it just
        before finds, once it holds the lock, that its file is no longer the group's, and
        opens the group's anew (made again if need be)."""
        while True:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                same = os.lstat(self.path).st_ino == self.identity[1]
            except FileNotFoundError:
                same = False
            if same:
                break
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = open_state(self.path, create=True)
            self.identity = self._identity()
        try:
            yield self
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def remove_if_empty(self) -> None:
        """Remove the file when no live member is left in it; call with the lock held."""
        budget, rows = self.read()
        if budget is None or all(r is None for r in rows):
            self.path.unlink(missing_ok=True)

    def read(self) -> tuple[int | None, list[Row | None]]:
        """(group budget or None for a new file, rows; None for a free row)."""
        data = os.pread(self._fd, _SIZE, 0)
        self.rejected = {}
        budget = _HEADER.unpack_from(data)[1] if len(data) >= _SIZE else 0
        if data[:8] != _MAGIC or not 0 < budget < MAX_BUDGET:
            return None, [None] * MAX_MEMBERS
        rows: list[Row | None] = []
        now = time.monotonic()
        for i in range(MAX_MEMBERS):
            raw = data[_HEADER.size + i * _ROW.size:_HEADER.size + (i + 1) * _ROW.size]
            row = None
            if raw != _EMPTY:
                try:
                    row = parse_row(raw, budget, now, self._max_pid)
                except RowRejected as exc:
                    self.rejected[i] = str(exc)
            rows.append(row)
        return budget, rows

    def write_header(self, budget: int) -> None:
        os.pwrite(self._fd, _HEADER.pack(_MAGIC, budget) + _EMPTY * MAX_MEMBERS, 0)

    def write_row(self, index: int, row: Row | None) -> None:
        os.pwrite(self._fd, _EMPTY if row is None else row.pack(),
                  _HEADER.size + index * _ROW.size)

    def close(self) -> None:
        os.close(self._fd)


def not_a_member(pid: int, group_file: tuple[int, int]) -> str | None:
    """Why process `pid` cannot be a member of the group whose file is `group_file` (device,
    inode), or None when it can: it must belong to this user and hold that file open (every
    member keeps a descriptor of it from join to leave). A process whose descriptors cannot be
    listed (not dumpable) is taken on its owner alone."""
    if pid == os.getpid():
        return None
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None  # gone: the start-time check says so
    if owner != os.getuid():
        return f"pid {pid} belongs to uid {owner}, not to this user"
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # not dumpable (its owner decides), or gone (the start time says so)
        return None
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == group_file:
            return None
    return f"pid {pid} does not hold the group file open (no engine member of this group)"


class Liveness:
    """Which members' processes are gone, in one `poll` per exchange: a pidfd per process,
    opened once (after its start time matched the row's, so a reused pid is not taken for the
    member) and readable from the moment the process exits. Reading ``/proc/PID/stat`` for
    every member on every frame cost most of an exchange. Without pidfds (Linux < 5.3) each
    check reads the start time again. A process first seen is also checked to be a member
    (`not_a_member`); one that is not is reported, never watched."""

    def __init__(self) -> None:
        self._fds: dict[tuple[int, int], int] = {}
        self._poll = select.poll()
        #: (pid, ticks) of rows found to be no member -> why
        self.foreign: dict[tuple[int, int], str] = {}

    def _fd(self, pid: int, ticks: int) -> int | None:
        """The pidfd watching (pid, ticks); None when that process is gone or pidfds are
        unavailable (then -1 is stored and start times are read)."""
        key = (pid, ticks)
        if key not in self._fds:
            if start_ticks(pid) != ticks:
                return None
            try:
                fd = os.pidfd_open(pid)
            except (AttributeError, OSError):
                fd = -1
            if fd >= 0 and start_ticks(pid) != ticks:  # exited (and reused) in between
                os.close(fd)
                return None
            self._fds[key] = fd
            if fd >= 0:
                self._poll.register(fd, select.POLLIN)
        return self._fds[key]

    def gone(self, rows: list[Row | None], group_file: tuple[int, int],
             skip: int | None = None) -> set[int]:
        """Indices of the rows whose process has exited or is no member of the group whose
        file is `group_file` (the latter also in `foreign`)."""
        watched: dict[int, int] = {}
        out = set()
        for i, row in enumerate(rows):
            if row is None or i == skip:
                continue
            key = (row.pid, row.ticks)
            if key not in self._fds:
                why = not_a_member(row.pid, group_file)
                if why is not None:
                    self.foreign[key] = why
                    out.add(i)
                    continue
            fd = self._fd(row.pid, row.ticks)
            if fd is None or (fd < 0 and start_ticks(row.pid) != row.ticks):
                out.add(i)
            elif fd >= 0:
                watched[fd] = i
        if watched:
            out |= {watched[fd] for fd, _ in self._poll.poll(0) if fd in watched}
        return out

    def close(self) -> None:
        for fd in self._fds.values():
            if fd >= 0:
                os.close(fd)
        self._fds.clear()


def live_rows(file: GroupFile, rows: list[Row | None], liveness: Liveness,
              skip: int | None = None) -> list[Row | None]:
    """`rows` with those of exited processes, of processes that are no members and those
    `file.read` rejected cleared (in the file too; the last two named once in a warning);
    call with the lock held. `skip`: this member's own row."""
    gone = liveness.gone(rows, file.identity, skip)
    for i, why in file.rejected.items():
        _name_once(file, why)
        file.write_row(i, None)
    file.rejected = {}
    out: list[Row | None] = []
    for i, row in enumerate(rows):
        if i in gone and row is not None:
            why = liveness.foreign.get((row.pid, row.ticks))
            if why is not None:
                _name_once(file, why)
            else:
                log.info("share group %s: member pid %d is gone; its %s go back to the group",
                         file.name, row.pid, format_bytes(row.seat.reserved))
            file.write_row(i, None)
            row = None
        out.append(row)
    return out


_named: set[tuple[str, str]] = set()


def _name_once(file: GroupFile, why: str) -> None:
    """One warning per group and reason for a row no member wrote: the row is cleared, and
    whoever keeps writing it is not worth a line per frame."""
    if (file.name, why) not in _named:
        _named.add((file.name, why))
        log.warning("share group %s: ignored a row no member of this user wrote (%s); cleared "
                    "it", file.name, why)


class GroupMember(MemberState):
    """This process's seat in a group (a `ShareMember`). One per governor; a process may hold
    several (several views in one group)."""

    def __init__(self, settings: ShareSettings, budget: int) -> None:
        assert isinstance(settings.group, str)
        super().__init__(settings)
        self.peers = 1  # live members (this one included) at the last exchange
        self.exchanged_at = 0.0  # time.monotonic() of the last exchange
        self.left_at: float | None = None  # time.monotonic() its seat was given back
        self.pid = os.getpid()
        ticks = start_ticks(self.pid)
        assert ticks is not None
        self._ticks = ticks
        self._file = GroupFile(settings.group)
        self._liveness = Liveness()
        self._index: int | None = None
        try:
            self._join(budget)
        except BaseException:
            self._file.close()
            self._liveness.close()
            raise

    @property
    def left(self) -> bool:
        return self._index is None

    @property
    def group(self) -> str:
        return self._file.name

    def _join(self, budget: int) -> None:
        floor = int(self.settings.floor)
        with self._file.locked():
            group_budget, rows = self._file.read()
            if group_budget is not None:
                rows = live_rows(self._file, rows, self._liveness)
            if group_budget is None or all(r is None for r in rows):
                self._file.write_header(budget)
                group_budget, rows = budget, [None] * MAX_MEMBERS
                log.info("share group %s: made with %s", self.group, format_bytes(budget))
            elif group_budget != budget:
                log.info("share group %s: following the group's budget %s (asked for %s)",
                         self.group, format_bytes(group_budget), format_bytes(budget))
            try:
                self._index = rows.index(None)
            except ValueError:
                raise BudgetError(f"share group {self.group} is full ({MAX_MEMBERS} members)"
                                  ) from None
            self.budget = group_budget
            claim = Claim(self.settings.weight, floor, floor)
            self._file.write_row(self._index, Row(self.pid, self._ticks, time.monotonic(),
                                                  Seat(claim)))
        if floor:
            # Wait (bounded) until the others have freed the floor: what this process
            # allocates while it builds its scene then fits beside them.
            deadline = time.monotonic() + JOIN_WAIT_S
            while self.exchange(floor, floor, 0) < floor and time.monotonic() < deadline:
                time.sleep(0.01)
            if self.grant < floor:
                log.warning("share group %s: only %s of the floor %s free after %.0f s",
                            self.group, format_bytes(self.grant), format_bytes(floor),
                            JOIN_WAIT_S)

    def exchange(self, floor: int, demand: int, held: int) -> int:
        if self._index is None:
            raise BudgetError(f"this process left share group {self.group}")
        now = time.monotonic()
        claim = Claim(self.settings.weight, max(floor, int(self.settings.floor)), demand,
                      self.visible)
        with self._file.locked():
            group_budget, rows = self._file.read()
            if group_budget is None:  # removed or overwritten by hand: made again, rejoined
                log.warning("share group %s: its file %s was removed or overwritten; made "
                            "again", self.group, self._file.path)
                self._file.write_header(self.budget)
                group_budget, rows = self.budget, [None] * MAX_MEMBERS
            rows = live_rows(self._file, rows, self._liveness, self._index)
            seats, me, names = [], 0, []
            members = 1 + len(rows) - rows.count(None) - (rows[self._index] is not None)
            for i, row in enumerate(rows):
                if i == self._index:
                    me = len(seats)
                    seats.append(Seat(claim))
                    names.append(f"pid {self.pid}")
                elif row is not None:  # alive, not drawing (stale): at its floor
                    names.append(f"pid {row.pid}")
                    seats.append(as_counted(row.seat, members, group_budget,
                                            stale=now - row.heartbeat > STALE_S))
            seat = settle(group_budget, seats, me, claim, held)
            seats[me] = seat
            self.peers = len(seats)
            self._file.write_row(self._index, Row(self.pid, self._ticks, now, seat))
        self.exchanged_at = now
        self.budget = group_budget
        return self._settled(seat, shortfall(group_budget, seats, me, names))

    def leave(self) -> None:
        if self._index is None:
            return
        with self._file.locked():
            self._file.write_row(self._index, None)
            self.left_at = time.monotonic()  # from here on the others may take its memory
            live_rows(self._file, self._file.read()[1], self._liveness)
            self._file.remove_if_empty()
        self._index = None
        self._file.close()
        self._liveness.close()


def join_group(settings: ShareSettings, budget: int) -> GroupMember:
    """Join (or make) the group `settings.group` on this machine."""
    return GroupMember(settings, budget)


def members(name: str) -> list[Row]:
    """The live members of a group (for reports and `engine` tools); [] for no group."""
    path = group_path(name, create=False)
    if not os.path.lexists(path):
        return []
    file, liveness = GroupFile(name), Liveness()
    try:
        with file.locked():
            budget, rows = file.read()
            return [] if budget is None else \
                [r for r in live_rows(file, rows, liveness) if r is not None]
    finally:
        file.close()
        liveness.close()


def join_share(spec: str | ViewShares | ShareSettings, budget: int) -> ShareMember:
    """A seat for `spec`: on the in-process board it names, or in the named group on this
    machine (made with `budget` bytes if no live member has it). Views drawing with one
    device each take a seat of their own: the device's ledger tells each governor its own
    bytes (engine.memory.ledger, "Owners"). Here rather than in shares.py, which stays free of
    the OS side (files, locks) that a named group needs."""
    settings = ShareSettings.of(spec)
    if isinstance(settings.group, ViewShares):
        return settings.group.join(settings)
    return join_group(settings, budget)
