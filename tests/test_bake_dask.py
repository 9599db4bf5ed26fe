"""bake_many through a dask.distributed client's executor: the tasks must be picklable
top-level functions and the futures plain concurrent.futures ones."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine.textures
from engine.textures.bake import bake_image, bake_many

distributed = pytest.importorskip("distributed")


def test_bake_many_on_a_local_cluster(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    images = []
    for i, (h, w) in enumerate([(64, 64), (40, 72), (128, 32)]):
        img = rng.integers(0, 256, (h, w, 4), np.uint8)
        img[..., 3] = 255
        images.append((f"tex{i}", img))

    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        results = bake_many(images, tmp_path / "dask", "bc1", executor=client.get_executor(), progress=False)

    assert [r.source for r in results] == ["tex0", "tex1", "tex2"]
    for (name, img), r in zip(images, results):
        local = bake_image(img, tmp_path / "local" / f"{name}.ktx2", "bc1")
        assert Path(r.output).read_bytes() == local.output.read_bytes()
        tex = engine.textures.open(r.output)
        assert (tex.width, tex.height) == (img.shape[1], img.shape[0])
