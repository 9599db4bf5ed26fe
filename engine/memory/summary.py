"""A memory summary in the spirit of torch.cuda.memory_summary(): a dict and a table."""
from __future__ import annotations

from .ledger import Ledger
from .probe import VramReading
from .sizes import format_bytes


def summary_dict(ledger: Ledger, budget_bytes: int, vram: VramReading | None = None) -> dict:
    """Categories with object counts, current and peak bytes; budget, headroom, driver view.
    The budget comes from its owner, the governor (`Governor.budget_bytes`)."""
    current = ledger.by_category()
    counts = ledger.count_by_category()
    peaks = ledger.peak_by_category()
    cats = sorted(set(current) | set(peaks))
    return {
        "categories": {c: {"objects": counts.get(c, 0), "bytes": current.get(c, 0),
                           "peak_bytes": peaks.get(c, 0)} for c in cats},
        "total_bytes": ledger.total,
        "peak_bytes": ledger.peak,
        "budget_bytes": budget_bytes,
        "headroom_bytes": budget_bytes - ledger.total,
        "live_objects": sum(counts.values()),
        "vram": vram.as_dict() if vram else None,
    }


def format_summary(d: dict) -> str:
    """Render summary_dict() as a fixed-width table."""
    rows = [f"{'category':<18}{'objects':>9}{'current':>14}{'peak':>14}", "-" * 55]
    for cat, v in d["categories"].items():
        rows.append(f"{cat:<18}{v['objects']:>9}{format_bytes(v['bytes']):>14}"
                    f"{format_bytes(v['peak_bytes']):>14}")
    rows.append("-" * 55)
    rows.append(f"{'total':<18}{d['live_objects']:>9}{format_bytes(d['total_bytes']):>14}"
                f"{format_bytes(d['peak_bytes']):>14}")
    rows.append(f"budget {format_bytes(d['budget_bytes'])}, headroom "
                f"{format_bytes(d['headroom_bytes'])}")
    v = d.get("vram")
    if v and v.get("source"):
        rows.append(f"driver ({v['source']}): total {format_bytes(v['total_bytes'])}, "
                    f"available {format_bytes(v['available_bytes'])}, "
                    f"evictions {v['evictions_total']}")
    return "\n".join(rows)
