"""The bench suites by name, and their rows as a text table."""
from __future__ import annotations

SUITES = ("accounting", "streaming", "wall", "upload", "startup", "peers", "bake", "resolution",
          "scaling", "frame", "virtual", "encode", "transcode")
#: Suites run only when named: `viewers` starts a process per viewer and data set and runs
#: the peers (napari, fastplotlib) where they are installed (the `peers` extra); `deepzoom`
#: generates and bakes a huge image first.
ON_REQUEST = ("viewers", "deepzoom")


def rows_table(rows: list[dict]) -> str:
    """A suite's rows as an aligned text table."""
    if not rows:
        return "  (no rows)"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else str(v)
    widths = {c: max(len(c), *(len(fmt(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  " + "  ".join(c.ljust(widths[c]) for c in cols)]
    for r in rows:
        lines.append("  " + "  ".join(fmt(r.get(c, "")).ljust(widths[c]) for c in cols))
    return "\n".join(lines)
