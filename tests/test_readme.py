"""The README's API example runs as written (on a small KTX2 file standing in for rock.ktx2)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from engine.memory.sizes import level_bytes, mip_dims
from engine.textures.ktx2_write import write_ktx2

README = Path(__file__).resolve().parents[1] / "README.md"


# BC7 keeps its 368 bytes where the driver samples BC7 or serves it as BC3 (same blocks)
@pytest.mark.needs("BC3 sampling")
def test_readme_api_example_runs(tmp_path, capsys):
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Using it"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    rock = tmp_path / "rock.ktx2"
    rng = np.random.default_rng(3)
    write_ktx2(rock, "BC7", 64, 64, [rng.integers(0, 256, level_bytes("BC7", *mip_dims(64, 64, i)),
                                                  dtype=np.uint8).tobytes() for i in range(7)])
    exec(compile(code.replace('"rock.ktx2"', repr(str(rock))), "README.md", "exec"), {})
    assert "'texture.static': 368" in capsys.readouterr().out  # levels 2..6 of a 64² BC7
