"""One budget, one owner: a budget change reaches the streamer and the render targets only as
the governor's allowances (the pool granted to the streamer, the targets' allowance handed to
the resolution controller), and neither holds the budget itself."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.app.loop import FrameLoop
from engine.memory.budget import Budget
from engine.memory.governor import BudgetSplit, Governor


def _holds_budget(obj: object, seen: set[int] | None = None, depth: int = 0) -> bool:
    """Does `obj` reach a Budget or a Governor through its attributes (a few levels deep)?"""
    seen = seen if seen is not None else set()
    if id(obj) in seen or depth > 3:
        return False
    seen.add(id(obj))
    if isinstance(obj, (Budget, Governor)):
        return True
    attrs = getattr(obj, "__dict__", None)
    if not attrs:
        return False
    return any(_holds_budget(v, seen, depth + 1) for v in attrs.values()
               if not isinstance(v, (int, float, str, bytes, Path)))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("allowances")


def test_budget_change_reaches_streamer_and_targets_only_as_allowances(device, cache):
    from engine.demos import DEMOS

    loop = FrameLoop.embedded(device, DEMOS["gallery"].factory, size=(160, 120),
                              provider="streaming", budget="256MiB",
                              options={"count": 6, "texture_size": 128, "cache_dir": cache})
    grants: list[int] = []
    targets_allowances: list[int] = []
    splits: list[BudgetSplit] = []
    grant, update = loop.provider.grant, loop.reaction.controller.update
    loop.provider.grant = lambda n: (grants.append(n), grant(n))[1]
    loop.reaction.controller.update = \
        lambda size, allowance, *a: (targets_allowances.append(allowance),
                                     update(size, allowance, *a))[1]
    split = loop.governor.split
    loop.governor.split = lambda *a, **kw: (splits.append(split(*a, **kw)), splits[-1])[1]
    try:
        assert not hasattr(device, "budget")
        assert not _holds_budget(loop.provider) and not _holds_budget(loop.renderer)
        for frame in range(4):
            loop.step(frame)
        # below what is held now: the streamer and the targets must both give memory back
        loop.governor.set_budget(device.ledger.total - loop.renderer.target_bytes // 2)
        for frame in range(4, 8):
            loop.step(frame)
        assert len(grants) == len(splits) == 8
        # each frame the streamer was granted exactly the split's pool, nothing else
        assert grants == [s.pool_allowance for s in splits]
        # and the controller got the split's targets allowance (capped by what is free now)
        assert all(a <= s.targets_allowance for a, s in zip(targets_allowances, splits))
        assert splits[4].effective_budget < splits[3].effective_budget
        assert grants[4] < grants[3]
        assert loop.renderer.render_scale < 1.0  # the targets followed the cut
        assert all(f["total_bytes"] <= f["budget_bytes"] for f in loop.frames[4:])
    finally:
        loop.release()
