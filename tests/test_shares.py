"""Shared budgets without GL: the water-filling arbitration (`fair_shares`), the reservation
rule (`settle`) that keeps the sum under the budget while shares move, the in-process board,
and the cross-process group file (a child process holding a seat, killed with SIGKILL)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import BudgetError
from engine.memory.budget import Budget
from engine.memory import group as groups
from engine.memory.shares import (Claim, Seat, ShareSettings, ViewShares, fair_shares, settle,
                                  shortfall)

MIB = 1 << 20
ROOT = Path(__file__).resolve().parents[1]

claims = st.builds(Claim, weight=st.floats(0.1, 10.0), floor=st.integers(0, 64 * MIB),
                   demand=st.integers(0, 256 * MIB), visible=st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 512 * MIB), st.lists(claims, min_size=1, max_size=8))
def test_shares_never_exceed_the_budget_and_honour_floors(budget, cs):
    shares = fair_shares(budget, cs)
    assert sum(shares) <= budget
    assert all(s >= 0 for s in shares)
    assert all(s <= c.wanted for s, c in zip(shares, cs))  # nobody gets more than it can use
    if sum(c.floor for c in cs) <= budget:  # feasible floors are honoured
        assert all(s >= c.floor for s, c in zip(shares, cs))
    if sum(c.wanted for c in cs) > budget + len(cs):  # contended: nothing is left unused
        assert sum(shares) >= budget - len(cs)


@settings(max_examples=300, deadline=None)
@given(st.integers(MIB, 512 * MIB), st.lists(claims, min_size=2, max_size=8))
def test_weights_are_respected_above_the_floors(budget, cs):
    shares = fair_shares(budget, cs)
    for i, (si, ci) in enumerate(zip(shares, cs)):
        for sj, cj in zip(shares, cs):
            # i is held below its weighted level only by its own demand; j above it only by
            # its floor: so unless one of those binds, shares go as the weights (+-2 bytes).
            if si < ci.wanted and sj > cj.floor:
                assert si / ci.weight >= sj / cj.weight - 2 / min(ci.weight, cj.weight)


def test_worked_examples():
    # weights 1, 1, 1, 2 and nobody bound by floor or demand: budget x weight / 5
    assert fair_shares(100, [Claim(1, 0, 1000)] * 3 + [Claim(2, 0, 1000)]) == [20, 20, 20, 40]
    # a member wanting less than its share leaves the rest to the others, by weight
    assert fair_shares(100, [Claim(1, 0, 1000), Claim(1, 0, 10), Claim(2, 0, 1000)]) \
        == [30, 10, 60]
    # a floor above the weighted share is kept; the others share what is left
    assert fair_shares(100, [Claim(1, 50, 1000), Claim(1, 0, 1000), Claim(1, 0, 1000)]) \
        == [50, 25, 25]
    # hidden: down to the floor; shown again: back to its share
    assert fair_shares(100, [Claim(1, 5, 1000, False), Claim(1, 0, 1000)]) == [5, 95]
    # floors that do not fit: the same fraction of each
    assert fair_shares(100, [Claim(1, 100, 1000), Claim(1, 100, 1000)]) == [50, 50]
    assert fair_shares(100, []) == []


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "2", True])
def test_bad_weights_are_refused(bad):
    with pytest.raises(BudgetError):
        fair_shares(100, [Claim(bad, 0, 10)])
    with pytest.raises(BudgetError):
        ShareSettings("g", weight=bad)


def test_bad_floor_and_group_are_refused():
    with pytest.raises(BudgetError):
        ShareSettings("g", floor="lots")
    with pytest.raises(BudgetError):
        ShareSettings(42)  # type: ignore[arg-type]
    with pytest.raises(BudgetError):
        groups.group_path("../etc")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 64 * MIB), st.lists(claims, min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), claims, st.floats(0.0, 1.0)), max_size=40))
def test_reservations_keep_what_is_held_under_the_budget(budget, start, moves):
    """Members exchange in any order with any claims; each then holds anything up to its
    grant, or keeps (or lowers) what it held: what the members hold never exceeds the budget
    once it started within it."""
    seats = [Seat(c) for c in start]
    held = [0] * len(seats)
    for who, claim, fill in moves:
        me = who % len(seats)
        seat = settle(budget, seats, me, claim, held[me])
        assert seat.grant <= seat.share and seat.reserved >= held[me]
        # the executor: drop to the grant if above it, else use up to `fill` of it
        held[me] = min(held[me], seat.grant) if held[me] > seat.grant \
            else int(seat.grant * fill)
        seats[me] = seat
        assert sum(s.reserved for s in seats) <= budget
        assert sum(held) <= budget


def test_views_hidden_give_their_share_to_the_visible():
    board = ViewShares("100MiB")
    a, b = board.join(ShareSettings(board)), board.join(ShareSettings(board, weight=3))
    for _ in range(2):
        a.exchange(MIB, 1 << 40, 0), b.exchange(MIB, 1 << 40, 0)
    assert (a.grant, b.grant) == (25 * MIB, 75 * MIB)
    b.visible = False
    b.exchange(MIB, 1 << 40, 75 * MIB)  # still holds 75 MiB: reserved until it evicts
    assert a.exchange(MIB, 1 << 40, 25 * MIB) == 25 * MIB
    b.exchange(MIB, 1 << 40, MIB)  # evicted to its floor
    assert a.exchange(MIB, 1 << 40, 25 * MIB) == 99 * MIB
    b.leave()
    assert a.exchange(MIB, 1 << 40, 25 * MIB) == 100 * MIB
    assert len(board.seats()) == 1
    with pytest.raises(BudgetError):
        b.exchange(0, 0, 0)


def test_a_floor_that_does_not_fit_names_who_holds_what() -> None:
    seats = [Seat(Claim(1, 3 * MIB, 9 * MIB), held=6 * MIB, grant=6 * MIB),
             Seat(Claim(1, 5 * MIB, 9 * MIB), held=MIB, grant=2 * MIB)]
    said = shortfall(8 * MIB, seats, 1, ["view 0", "view 1"])
    assert said is not None
    assert said.startswith("floor 5.0 MiB does not fit: granted 2.0 MiB of the 8.0 MiB")
    assert "view 0 holds 6.0 MiB (floor 3.0 MiB)" in said
    assert "view 1 (this one) holds 1.0 MiB (floor 5.0 MiB)" in said
    assert shortfall(8 * MIB, seats, 0, ["view 0", "view 1"]) is None


def test_a_view_is_told_once_while_its_floor_does_not_fit(caplog):
    board = ViewShares("8MiB")
    a, b = board.join(ShareSettings(board)), board.join(ShareSettings(board))
    a.exchange(MIB, 1 << 40, 0)
    a.exchange(MIB, 1 << 40, 7 * MIB)  # holds 7 MiB, reserved until it gives them back
    with caplog.at_level("WARNING", "engine.memory.shares"):
        for _ in range(3):
            b.exchange(4 * MIB, 1 << 40, 0)
        a.exchange(MIB, 1 << 40, MIB)  # gives room back: b's floor fits again
        b.exchange(4 * MIB, 1 << 40, 0)
    told = [r.message for r in caplog.records if "does not fit" in r.message]
    assert len(told) == 1 and "view 0 holds 7.0 MiB" in told[0], told
    assert b.grant >= 4 * MIB


HOLDER = """
import sys, time
from engine.memory.group import join_group
from engine.memory.shares import ShareSettings
m = join_group(ShareSettings(sys.argv[1], weight=1.0), int(sys.argv[2]))
m.exchange(0, 1 << 40, 0); m.exchange(0, 1 << 40, m.grant)
print(m.grant, flush=True)
while True:
    m.exchange(0, 1 << 40, m.grant); time.sleep(0.01)
"""


def test_group_member_killed_gives_its_share_back(tmp_path, monkeypatch):
    """A child process holding a seat in a group; SIGKILL; the parent's seat gets the whole
    budget back at its next exchange (the kernel dropped the child's lock with it)."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    name, budget = f"t{os.getpid()}", 64 * MIB
    child = subprocess.Popen([sys.executable, "-c", HOLDER, name, str(budget)],
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert int(child.stdout.readline()) == budget  # alone: all of it
        me = groups.join_group(ShareSettings(name, weight=3.0), budget)
        for _ in range(200):  # the child lowers its reservation at its next exchange
            if me.exchange(0, 1 << 40, me.grant) == 48 * MIB:
                break
            time.sleep(0.01)
        assert (me.grant, me.share, me.peers) == (48 * MIB, 48 * MIB, 2)
        assert [r.pid for r in groups.members(name)] == [child.pid, os.getpid()]
        child.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        child.wait()
        me.exchange(0, 1 << 40, me.grant)
        assert (me.grant, me.peers) == (budget, 1)
        assert time.monotonic() - killed < 1.0
        me.leave()
        assert groups.members(name) == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_governor_publishes_floor_and_demand_and_takes_its_grant():
    """The governor's split exchanges first: floor = fixed + smallest targets + tails, demand
    = the same at full detail and the highest scale; the grant is the split's budget."""
    from engine.memory.governor import Governor

    board = ViewShares(100 * MIB)
    govs = [Governor(budget=Budget("1GiB"), share=board.join(ShareSettings(board, weight=w)))
            for w in (1, 3)]
    usage = {"buffer": 10 * MIB, "texture.streamed": 5 * MIB, "target": 2 * MIB}
    curve = ((0.5, MIB // 2), (1.0, 2 * MIB))
    for _ in range(2):
        splits = [g.split(usage, target_curve=curve, stream_wanted=405 * MIB,
                          stream_min=5 * MIB, stream_wanted_scale=1.0,
                          resizable_target_bytes=2 * MIB) for g in govs]
    seat = govs[0].share
    assert (seat.claim.floor, seat.claim.demand) == (10 * MIB + MIB // 2 + 5 * MIB,
                                                     10 * MIB + 2 * MIB + 405 * MIB)
    assert [s.effective_budget for s in splits] == [25 * MIB, 75 * MIB]
    assert splits[0].pool_allowance + splits[0].targets_allowance == 25 * MIB - 10 * MIB
    govs[1].close()
    assert govs[0].split(usage, target_curve=curve, stream_wanted=405 * MIB,
                         stream_min=5 * MIB).effective_budget == 100 * MIB


def test_group_member_without_heartbeat_counts_at_its_floor(tmp_path, monkeypatch):
    """A live member that stopped exchanging (stopped, not drawing) keeps its reservation,
    since it still holds its memory, but its claim counts as hidden: its floor."""
    import dataclasses

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    a = groups.join_group(ShareSettings("beat", floor=MIB), 64 * MIB)
    b = groups.join_group(ShareSettings("beat"), 64 * MIB)
    a.exchange(MIB, 1 << 40, 0)
    b.exchange(0, 1 << 40, 0)
    assert b.share == 32 * MIB
    with a._file.locked():
        rows = a._file.read()[1]
        row = rows[a._index]
        a._file.write_row(a._index, dataclasses.replace(
            row, heartbeat=row.heartbeat - 2 * groups.STALE_S))
    b.exchange(0, 1 << 40, 0)
    assert b.share == 63 * MIB and b.grant == 64 * MIB - a.reserved
    a.exchange(MIB, 1 << 40, 0)  # drawing again: back to its share
    b.exchange(0, 1 << 40, 0)
    assert b.share == 32 * MIB
    a.leave(), b.leave()


def test_group_file_removed_by_hand_is_made_again_and_a_full_group_refuses(
        tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    a = groups.join_group(ShareSettings("hand"), 64 * MIB)
    a.exchange(0, 1 << 40, 0)
    groups.group_path("hand").unlink()
    assert a.exchange(0, 1 << 40, 0) == 64 * MIB  # made again, rejoined
    assert [r.pid for r in groups.members("hand")] == [os.getpid()]
    more = [groups.join_group(ShareSettings("hand"), 64 * MIB)
            for _ in range(groups.MAX_MEMBERS - 1)]
    with pytest.raises(BudgetError, match="is full"):
        groups.join_group(ShareSettings("hand"), 64 * MIB)
    for m in [a, *more]:
        m.leave()
    assert not groups.group_path("hand").exists()


def test_a_member_still_follows_outside_pressure_below_its_grant():
    """Processes outside the group show only through the driver's free figure (NVX): the
    effective budget is the lower of the grant and what the driver leaves."""
    from engine.memory.governor import Governor
    from engine.memory.probe import VramReading

    board = ViewShares(100 * MIB)
    free = {"bytes": 10 << 30}
    gov = Governor(budget=Budget("1GiB"), share=board.join(ShareSettings(board)),
                   pressure=lambda: VramReading("NVX", 16 << 30, free["bytes"]))
    usage = {"buffer": 10 * MIB, "texture.streamed": 20 * MIB}

    def effective() -> int:
        return gov.split(usage, stream_wanted=500 * MIB, stream_min=MIB).effective_budget

    assert effective() == 100 * MIB  # the grant binds
    free["bytes"] = 64 * MIB + 40 * MIB  # an outsider took all but 40 MiB above the reserve
    split = gov.split(usage, stream_wanted=500 * MIB, stream_min=MIB)
    assert split.effective_budget == 30 * MIB + 40 * MIB
    assert split.external_pressure_bytes == 100 * MIB - 70 * MIB


def test_a_member_says_when_its_seat_went_back(tmp_path, monkeypatch):
    """`left_at` is the moment the row was cleared, inside the file lock: from then on the
    others may be granted what it held (the share bench ends its span there)."""
    import time

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    a = groups.join_group(ShareSettings("left"), 64 * MIB)
    b = groups.join_group(ShareSettings("left"), 64 * MIB)
    a.exchange(0, 1 << 40, 0)
    b.exchange(0, 1 << 40, 0)
    assert a.left_at is None and b.share == 32 * MIB
    before = time.monotonic()
    a.leave()
    assert a.left_at is not None and before <= a.left_at <= time.monotonic()
    b.exchange(0, 1 << 40, 0)
    assert b.peers == 1 and b.share == 64 * MIB
    b.leave()
