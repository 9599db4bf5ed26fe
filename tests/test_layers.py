"""The layer contract holds for the engine as it is, and the check really catches violations
(each kind planted in a throwaway tree)."""
from __future__ import annotations

from pathlib import Path

from layer_rules import check_tree, layer_of

ROOT = Path(__file__).resolve().parents[1]


def test_engine_keeps_the_layer_contract():
    violations = check_tree(ROOT)
    assert not violations, "\n".join(map(str, violations))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_lower_layer_importing_a_higher_one_fails(tmp_path):
    root = _tree(tmp_path, {
        "engine/__init__.py": "",
        "engine/memory/__init__.py": "",
        "engine/memory/ledger.py": "from ..render.scene import Scene\n",
        "engine/render/__init__.py": "",
        "engine/render/scene.py": "from ..memory.ledger import Ledger\n",
    })
    found = check_tree(root, mapped={})
    assert [(v.module, v.line) for v in found] == [("engine.memory.ledger", 1)] * 2
    assert "higher layer" in found[0].message


def test_an_import_hidden_in_a_function_still_counts(tmp_path):
    root = _tree(tmp_path, {
        "engine/gl/device.py": "def f():\n    from engine.app import loop\n    return loop\n",
    })
    found = check_tree(root, mapped={})
    assert found and all(v.line == 2 and v.module == "engine.gl.device" for v in found)


def test_moderngl_and_raw_gl_outside_gl_fail(tmp_path):
    root = _tree(tmp_path, {
        "engine/render/pass_.py": ("import moderngl\n"
                                   "def draw(device, tex):\n"
                                   "    device.ctx.finish()\n"
                                   "    device._raw.glBindTexture(1, 2)\n"),
        "engine/gl/ok.py": "import moderngl\ndef f(device):\n    device._raw.glFlush()\n",
    })
    found = {(v.line, v.message.split(" ")[0]) for v in check_tree(root, mapped={})}
    assert (1, "imports") in found  # moderngl outside gl
    assert (3, "uses") in found  # device.ctx
    assert (4, "reaches") in found and (4, "calls") in found  # _raw, glBindTexture
    assert all(v.module == "engine.render.pass_" for v in check_tree(root, mapped={}))


def test_layers_are_ordered_as_documented():
    order = ["engine.errors", "engine.memory.ledger", "engine.textures.ktx2", "engine.gl.device",
             "engine.streaming.provider", "engine.resolution.targets", "engine.render.renderer",
             "engine.diagnostics.hud", "engine.app.loop", "engine.hosts.frames", "engine.cli"]
    assert [layer_of(m) for m in order] == sorted(layer_of(m) for m in order)
    assert layer_of("engine") is None


def test_an_import_cycle_fails_even_inside_a_layer_and_in_functions(tmp_path):
    root = _tree(tmp_path, {
        "engine/__init__.py": "",
        "engine/textures/__init__.py": "",
        "engine/textures/a.py": "def f():\n    from . import b\n",
        "engine/textures/b.py": "from .a import f\n",
        "engine/textures/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from .d import D\n",
        "engine/textures/d.py": "from .c import TYPE_CHECKING\n",
    })
    found = check_tree(root, mapped={})
    assert [v.message for v in found] == [
        "import cycle: engine.textures.a <-> engine.textures.b"]  # c <- d only: typing


def test_a_literal_import_module_fails(tmp_path):
    root = _tree(tmp_path, {
        "engine/render/x.py": ("import importlib\n"
                               "def f(name):\n"
                               "    importlib.import_module(name)\n"
                               "    return importlib.import_module('engine.app.loop')\n"),
    })
    found = check_tree(root, mapped={})
    assert [(v.module, v.line) for v in found] == [("engine.render.x", 4)]
    assert "literal" in found[0].message


def test_moderngl_window_and_glcontext_outside_gl_fail(tmp_path):
    root = _tree(tmp_path, {
        "engine/view/peer.py": "def f():\n    import moderngl_window\n",
        "engine/app/host.py": "from glcontext import egl\n",
        "engine/gl/peers.py": "import moderngl_window\nimport glcontext\n",
        "lab/peers.py": "import moderngl_window\nimport moderngl\n",  # the peer only
    })
    found = sorted((v.module, v.line) for v in check_tree(root, mapped={}))
    assert found == [("engine.app.host", 1), ("engine.app.host", 1), ("engine.view.peer", 2),
                     ("lab.peers", 2)]


def test_the_engine_never_imports_the_lab_and_the_lab_only_public_names(tmp_path):
    root = _tree(tmp_path, {
        "engine/hosts/run.py": "def f():\n    from lab import wall\n",
        "lab/wall.py": "from engine.app.loop import FrameLoop\nfrom engine.app.loop import _hidden\n",
    })
    found = sorted((v.module, v.line, v.message.split(":")[1].strip()[:14])
                   for v in check_tree(root, mapped={}))
    assert found == [("engine.hosts.run", 2, "the engine nev")] * 2 + \
        [("lab.wall", 2, "the lab uses t")]


def test_the_two_streaming_wings_do_not_import_each_other(tmp_path):
    root = _tree(tmp_path, {
        "engine/streaming/levels/planner.py": "from ..virtual.policy import TilePolicy\n",
        "engine/streaming/virtual/policy.py": "from ..tiers import Tier\n",
        "engine/streaming/tiers.py": "",
        "engine/streaming/provider.py": "from .levels import planner\nfrom .virtual import policy\n",
    })
    found = check_tree(root, mapped={})
    assert {(v.module, v.line) for v in found} == {("engine.streaming.levels.planner", 1)}
    assert "do not import each other" in found[0].message
