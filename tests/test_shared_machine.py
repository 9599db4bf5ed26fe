"""A local attacker on a shared machine (issue 35): planted state folders, symbolic links,
forged group rows and malformed monitor entries. Each case builds its hostile folder or file
in tmp_path; the victim is this test process. What must hold: no file outside the engine's
own is written or deleted, no member is starved, and every refusal is one line naming the
folder or the row."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.cli import main
from engine.diagnostics import live
from engine.diagnostics.live_entry import EntryError, parse_entry
from engine.diagnostics.monitor import request_snapshot, watch
from engine.errors import UnsafeStateError, UsageError
from engine.memory import group
from engine.memory.shares import MAX_WEIGHT, Claim, Seat, ShareSettings
from engine.statedir import private_dir

MIB = 1 << 20
ROOT_USER = os.getuid() == 0
OTHER_UID = 54321


def _victim_file(tmp_path: Path) -> Path:
    victim = tmp_path / "home" / "important.txt"
    victim.parent.mkdir(mode=0o700)
    victim.write_text("precious")
    return victim


# --------------------------------------------------------------------------- folders
def test_a_missing_state_folder_is_made_private(tmp_path):
    path = private_dir(tmp_path / "state")
    assert (path.stat().st_mode & 0o777) == 0o700 and path.stat().st_uid == os.getuid()


@pytest.mark.parametrize("plant", ["mode777", "symlink", "file", "other_user"])
def test_a_planted_state_folder_is_refused_with_its_name(tmp_path, plant):
    path = tmp_path / "state"
    if plant == "mode777":
        path.mkdir()
        path.chmod(0o777)
    elif plant == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        path.symlink_to(tmp_path / "elsewhere")
    elif plant == "file":
        path.write_text("")
    else:
        if not ROOT_USER:
            pytest.skip("making a folder of another user needs root")
        path.mkdir(mode=0o700)
        os.chown(path, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeStateError, match=str(path)):
        private_dir(path)


def test_a_state_folder_in_a_folder_others_can_rename_in_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all and not sticky: our folder could be swapped
    with pytest.raises(UnsafeStateError, match="not sticky"):
        private_dir(shared / "state")


def test_a_planted_share_folder_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    planted = tmp_path / "engine-share"
    planted.mkdir()
    planted.chmod(0o777)
    with pytest.raises(UnsafeStateError, match="engine-share: has mode 0777"):
        group.join_group(ShareSettings("work"), 8 * MIB)
    assert list(planted.iterdir()) == []


def test_a_group_file_planted_as_a_symlink_is_never_written_through(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    victim = _victim_file(tmp_path)
    private_dir(tmp_path / "engine-share")
    (tmp_path / "engine-share" / "work").symlink_to(victim)
    with pytest.raises(UnsafeStateError, match="work: is a symbolic link"):
        group.join_group(ShareSettings("work"), 8 * MIB)
    assert victim.read_text() == "precious"


def test_the_cli_refuses_a_planted_monitor_folder_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    victim = _victim_file(tmp_path)
    (tmp_path / "100.1.json").write_text("x")  # the victim's files, named like ours
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (victim.parent / f"{dead}.json").write_text("{}")
    (tmp_path / "engine-monitor").symlink_to(victim.parent)
    assert main(["monitor", "--once", "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "engine-monitor: is a symbolic link" in err[0], err
    assert sorted(p.name for p in victim.parent.iterdir()) == [f"{dead}.json", "important.txt"]


def test_the_monitor_deletes_only_its_own_files(tmp_path):
    folder = private_dir(tmp_path / "mon")
    victim = _victim_file(tmp_path)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)
    (folder / f"{dead}.1.json").symlink_to(victim)  # a link named like a dead state file
    (folder / f"{dead}.2.json").write_text("not ours")  # no magic: not the engine's
    (folder / f"{dead}.2.notes").write_text("beside it")
    state = live.StateFile(folder / f"{dead}.3.json")  # the engine's, of a dead process
    state.write(json.dumps({"pid": dead, "start": None}).encode())
    state._map.close()
    assert live.read_all(folder) == []
    assert sorted(p.name for p in folder.iterdir()) == [
        f"{dead}.1.json", f"{dead}.2.json", f"{dead}.2.notes"]
    assert victim.read_text() == "precious"


# --------------------------------------------------------------------------- group rows
def _raw_row(pid: int, ticks: int, beat: float, weight: float, floor: int, reserved: int
             ) -> bytes:
    return group._ROW.pack(pid, ticks, beat, weight, floor, floor, True, reserved, reserved,
                           reserved, reserved)


@pytest.mark.parametrize("pid,beat,weight,why", [
    (1, 0.0, 1.0, "no process id"), (-1, 0.0, 1.0, "no process id"),
    (2**31 - 1, 0.0, 1.0, "no process id"), (100, 0.0, float("inf"), "weight"),
    (100, 0.0, float("nan"), "weight"), (100, 0.0, 0.0, "weight"),
    (100, float("nan"), 1.0, "heartbeat"), (100, 1e12, 1.0, "heartbeat"),
])
def test_an_impossible_row_is_rejected(pid, beat, weight, why):
    with pytest.raises(group.RowRejected, match=why):
        group.parse_row(_raw_row(pid, 1, beat, weight, 0, 0), 8 * MIB, time.monotonic(), 32768)


def test_what_a_row_can_claim_is_clamped():
    row = group.parse_row(_raw_row(100, 1, 0.0, 1e9, 1 << 62, 1 << 62), 8 * MIB, 10.0, 32768)
    assert row.seat.claim.weight == MAX_WEIGHT
    assert row.seat.claim.floor == row.seat.reserved == 8 * MIB
    counted = group.as_counted(row.seat, members=2, budget=8 * MIB, stale=False)
    assert counted.claim.floor == 4 * MIB  # never more than an equal part
    hidden = group.as_counted(Seat(Claim(1.0, MIB, 8 * MIB)), 2, 8 * MIB, stale=True)
    assert (hidden.claim.demand, hidden.claim.visible) == (MIB, False)


def _plant_row(name: str, raw: bytes, index: int = 5) -> None:
    path = group.group_path(name)
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, raw, group._HEADER.size + index * group._ROW.size)
    finally:
        os.close(fd)


def test_a_forged_row_neither_starves_nor_blames_the_member(tmp_path, monkeypatch, caplog):
    """The issue's attack: a row with a live pid and its start time, floor = reserved =
    budget, weight 1e9, a future heartbeat; and one with weight inf for the next joiner."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    budget = 8 * MIB
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        me = group.join_group(ShareSettings("work"), budget)
        ticks = group.start_ticks(sleeper.pid)
        assert ticks is not None
        # a live process of this user that holds no descriptor of the group file
        _plant_row("work", _raw_row(sleeper.pid, ticks, time.monotonic() + 0.5, 1e9, budget,
                                    budget))
        caplog.set_level(logging.WARNING, "engine.memory.group")
        grants = [me.exchange(0, budget, 0) for _ in range(5)]
        assert grants == [budget] * 5
        named = [r.message for r in caplog.records if "ignored a row" in r.message]
        assert len(named) == 1 and "does not hold the group file open" in named[0]
        _plant_row("work", _raw_row(sleeper.pid, ticks, time.monotonic(), float("inf"), 0, 0))
        other = group.join_group(ShareSettings("work", weight=2.0), budget)  # no BudgetError
        other.exchange(0, budget, 0)
        assert other.peers == 2  # the forged row is not counted
        other.leave()
        me.leave()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert list((tmp_path / "engine-share").iterdir()) == []


def test_a_row_of_an_implausible_pid_is_cleared(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    me = group.join_group(ShareSettings("work"), 8 * MIB)
    for i, pid in enumerate((1, -1, 2**31 - 1)):
        _plant_row("work", _raw_row(pid, 1, time.monotonic(), 1.0, 8 * MIB, 8 * MIB), 3 + i)
    assert me.exchange(0, 8 * MIB, 0) == 8 * MIB and me.peers == 1
    assert [r.pid for r in group.members("work")] == [os.getpid()]
    me.leave()


# --------------------------------------------------------------------------- monitor entries
def _entry(pid: int, **kw: object) -> dict:
    doc = {key: 0 for key in ("frame", "budget_bytes", "effective_budget_bytes",
                              "external_pressure_bytes", "total_bytes", "resident_bytes",
                              "wanted_bytes", "cache_slots", "cache_slots_used",
                              "reads_in_flight", "uploads_in_flight", "read_mb_s",
                              "upload_mb_s")}
    doc.update(pid=pid, name=f"{pid}.1", program="engine demo", by_category={"user": 1},
               resident_by_tier={}, render_scale=1.0, scale_reason="", times={"ms_p50": None},
               start=live.process_start(pid) if pid == os.getpid() else None)
    doc.update(kw)
    return doc


MALFORMED = {
    "huge pid": json.dumps(_entry(1)).replace('"pid": 1', '"pid": 99999999999999999999'),
    "pid 1": json.dumps(_entry(1)),
    "pid -1": json.dumps(_entry(-1)),
    "deep": "[" * 50000 + "]" * 50000,
    "missing key": json.dumps({k: v for k, v in _entry(os.getpid()).items()
                               if k != "total_bytes"}),
    "nan": json.dumps(_entry(os.getpid(), read_mb_s=float("nan"))),
    "infinity": json.dumps(_entry(os.getpid(), upload_mb_s=float("inf"))),
    "1e400": json.dumps(_entry(os.getpid())).replace('"read_mb_s": 0', '"read_mb_s": 1e400'),
    "wrong type": json.dumps(_entry(os.getpid(), by_category=[1, 2])),
    "long digits": json.dumps(_entry(os.getpid())).replace('"frame": 0', '"frame": ' + "9" * 5000),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_entry_is_refused(case):
    with pytest.raises(EntryError):
        parse_entry(MALFORMED[case].encode())


def test_the_monitor_survives_every_malformed_entry(tmp_path):
    folder = private_dir(tmp_path / "mon")
    states = []
    for i, body in enumerate(MALFORMED.values(), start=2):
        states.append(live.StateFile(folder / f"{os.getpid()}.{i}.json"))
        states[-1].write(body.encode()[:live.FILE_BYTES - 16])
    os.mkfifo(folder / f"{os.getpid()}.99.json")  # a FIFO named like a state file
    good = live.StateFile(folder / f"{os.getpid()}.1.json")
    good.write(json.dumps(_entry(os.getpid())).encode())
    out = io.StringIO()
    started = time.monotonic()
    assert watch(as_json=True, once=True, out=out, folder=folder) == 0
    assert time.monotonic() - started < 5
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["name"] == f"{os.getpid()}.1"
    for s in (*states, good):
        s.close()


def test_a_snapshot_request_keeps_the_out_file_until_it_is_replaced(tmp_path):
    folder = private_dir(tmp_path / "mon")
    state = live.StateFile(folder / f"{os.getpid()}.1.json")
    state.write(json.dumps(_entry(os.getpid())).encode())
    keep = tmp_path / "keep.json"
    keep.write_text("mine")
    with pytest.raises(UsageError, match="no snapshot after"):
        request_snapshot(os.getpid(), keep, folder=folder, wait_s=0.2, sleep=time.sleep)
    assert keep.read_text() == "mine"
    state.close()



def test_a_state_file_of_a_killed_process_is_removed_even_before_its_first_write(tmp_path):
    folder = private_dir(tmp_path / "mon")
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout)
    state = live.StateFile(folder / f"{dead}.1.json")  # made, never written: sequence 0
    state._map.close()
    assert live.read_all(folder) == [] and list(folder.iterdir()) == []
