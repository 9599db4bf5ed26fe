"""Shared helpers of the benchmark suites: draws that touch textures, payload bytes."""
from __future__ import annotations

import datetime
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.memory.ledger import Category

FULLSCREEN_VS = """#version 330
out vec2 uv;
void main() {
    vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}"""
SAMPLE_FS = """#version 330
uniform sampler2D tex;
in vec2 uv;
out vec4 color;
void main() { color = texture(tex, uv); }"""


def run_document(device, suites: dict, **extra) -> dict:
    """The JSON document a bench run writes: the machine, the date, `extra` keys, and each
    suite's rows and notes (one shape for `lab bench` and the single-suite commands)."""
    return {"machine": {"renderer": device.caps.renderer, "gl_version": device.caps.gl_version,
                        "host": platform.node(), "cpu_count": os.cpu_count()},
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **extra, "suites": suites}


def write_run(path: str | Path, device, name: str, rows: list, notes: list) -> None:
    """Write one suite's run (`run_document`) as JSON at `path`."""
    import json

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(run_document(device, {name: {"rows": rows,
                                                                  "notes": notes}}), indent=2))


@dataclass
class SuiteResult:
    """One suite's output: rows for the table and the raw figures for the JSON."""

    name: str
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class TextureToucher:
    """Draws a fullscreen triangle sampling each texture, so drivers that place textures on
    first use (NVIDIA, see DESIGN.md section 2) really have them resident."""

    def __init__(self, device) -> None:
        self.device = device
        self.prog = device.program(vertex_shader=FULLSCREEN_VS, fragment_shader=SAMPLE_FS,
                                   label="bench-sample")
        self.vao = device.vertex_array(self.prog, [], label="bench-fullscreen")
        self.color = device.texture((64, 64), label="bench-touch-target", category=Category.TARGET)
        self.fbo = device.framebuffer([self.color], label="bench-touch-fbo")

    def touch(self, textures) -> None:
        self.fbo.use()
        for tex in textures:
            tex.use(0)
            self.vao.render(vertices=3)
        self.device.finish()

    def release(self) -> None:
        for obj in (self.vao, self.prog, self.fbo, self.color):
            self.device.release(obj)


def random_blocks(nbytes: int, seed: int = 0) -> bytes:
    """Payload for compressed uploads where content does not matter (sizes, speed)."""
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes()


def drop_page_cache(*paths: Path) -> bool:
    """Ask the OS to forget the files' cached pages (clean pages go; no privileges needed),
    so the next read comes from the disk. False where the OS has no such call."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True
