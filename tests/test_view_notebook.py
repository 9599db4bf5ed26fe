"""A notebook executed headless (nbclient, no browser) shows the wall in its first frame:
the jupyter_rfb canvas reports 1x1 until a browser sends its size, and the host draws at
the size the canvas was made with meanwhile (engine.hosts.canvas)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("jupyter_rfb")

ROOT = Path(__file__).resolve().parents[1]

# the cells of examples/view_jupyter.py's docstring, on a folder of two images
CELLS = [
    "from PIL import Image\n"
    "for i, size in enumerate([(300, 200), (200, 300)]):\n"
    "    Image.new('RGB', size, (200, 60 + 80 * i, 30)).save(f'{i}.png')",
    "from rendercanvas.jupyter import RenderCanvas\n"
    "import engine\n"
    "from engine.hosts.canvas import CanvasHost\n"
    "wall = engine.ImageWall(['.'], detail=False, workers=1, progress=False)\n"
    "canvas = RenderCanvas(size=(320, 180))\n"
    "host = CanvasHost(canvas, wall, provider='streaming', on_frame=wall.hooks())\n"
    "canvas",
    "frame = canvas.snapshot().data\n"
    "print('SHAPE', frame.shape, 'SPREAD', int(frame[..., :3].max()) - int(frame[..., :3].min()))\n"
    "host.close()",
]


@pytest.mark.slow
def test_a_notebook_run_headless_draws_its_first_frame(tmp_path, isolated_cache,
                                                       monkeypatch):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    # the kernel imports this checkout's engine
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT),
                                                      os.environ.get("PYTHONPATH", "")]))
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
    assert "SHAPE (180, 320, " in text, text
    spread = int(text.split("SPREAD")[1].split()[0])
    # not a blank frame: the images (grey placeholders on a cold cache, 128) on the
    # background (about 80)
    assert spread >= 40, text
