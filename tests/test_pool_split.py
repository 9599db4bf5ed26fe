"""The governor holds the page cache's share of the pool (engine.memory.split): one split,
one place for its hysteresis."""
from engine.memory.governor import Governor, GovernorInputs, budget_range
from engine.memory.split import CacheNeeds, share_pool

MIB = 1 << 20


def _inputs(cache: CacheNeeds | None) -> GovernorInputs:
    return GovernorInputs(budget_bytes=256 * MIB, fixed_bytes=16 * MIB, target_bytes=0,
                          streamed_bytes=8 * MIB, target_curve=((1.0, 0),),
                          stream_wanted=64 * MIB, stream_min=4 * MIB, cache=cache)


def test_the_split_gives_the_cache_its_share_of_the_pool():
    needs = CacheNeeds(current=0, min_bytes=2 * MIB, screen_bytes=2 * MIB, screen_factor=8.0,
                       whole_min_bytes=4 * MIB)
    split = Governor().decide(_inputs(needs))
    assert split.pool_allowance == 240 * MIB
    assert split.cache_allowance == share_pool(split.pool_allowance, needs) == 16 * MIB
    assert Governor().decide(_inputs(None)).cache_allowance is None


def test_the_cache_share_moves_only_when_worth_a_rebuild():
    held = CacheNeeds(current=15 * MIB, min_bytes=2 * MIB, screen_bytes=2 * MIB,
                      screen_factor=7.5, whole_min_bytes=4 * MIB)
    assert Governor().decide(_inputs(held)).cache_allowance == 15 * MIB  # within the band
    small = CacheNeeds(current=15 * MIB, min_bytes=2 * MIB, screen_bytes=1 * MIB,
                       screen_factor=4.0, whole_min_bytes=4 * MIB)
    assert Governor().decide(_inputs(small)).cache_allowance == 4 * MIB  # shrank by half


def test_budget_range_spans_floor_to_full_detail():
    floor, ceiling = budget_range(10, 20, 80, 5, 100, extra=7)
    assert (floor, ceiling) == (35, 197)
    assert budget_range(10, 20, 0, 5, 0) == (35, 35)  # the ceiling is never below the floor
