"""What names one version of a source file, for every cache made from one.

Why size, modification and change times and inode: a file replaced with the same size and
modification time (`cp -p`, `touch -r`, an editor's save by rename) keeps those two, but
its change time moves and a new file gets a new inode, so a cache keyed by all four never
serves a copy of what the path held before.
"""
from __future__ import annotations

import os


def source_identity(st: os.stat_result) -> str:
    """`st`'s size, modification and change times (ns) and inode, as one string."""
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
