"""Uploading texture files: immutable storage of exactly the levels asked for.

The streamer and the static loader both come here. A level range base..last of the file's
chain becomes a GpuTexture whose storage holds just those levels (ledgered with their exact
bytes). Formats the driver cannot sample are decoded on the CPU to RGBA8 (sRGB kept) and
accounted at their real 4 bytes per texel; `force_cpu_decode` takes that path on purpose so
tests cover it on drivers that sample everything.
"""
from __future__ import annotations

import logging

from ..errors import UnsupportedFormatError
from ..formats import PixelFormat
from ..formats import get as get_format
from ..textures import TextureFile
from ..textures.transcode import TRANSCODER, served_format
from .device import Device
from .textures import GpuTexture
from ..memory.ledger import Category

log = logging.getLogger(__name__)


def gpu_format(device: Device, tf: TextureFile, force_cpu_decode: bool = False) -> PixelFormat:
    """The format the GPU copy will have: what the device's profile serves the file's format
    as (itself where the driver samples it), or RGBA8 after a CPU decode when forced."""
    fmt = tf.pixel_format
    if force_cpu_decode:
        return get_format("RGBA8_SRGB" if fmt.srgb else "RGBA8")
    served = served_format(fmt, device.caps.can_sample, tf.path)
    TRANSCODER.announce(tf, served)
    return served


def level_payload(tf: TextureFile, fmt: PixelFormat, level: int, layer: int, face: int) -> bytes:
    """Bytes of one image ready for `device.commands.upload` in `fmt` (transcoded when fmt
    differs)."""
    if fmt is tf.pixel_format:
        return tf.read_level(level, layer, face)
    lv = tf.level(level)
    return TRANSCODER(tf.read_level(level, layer, face), tf.pixel_format, fmt, lv.width,
                      lv.height, tf.path)


def upload_texture_file(device: Device, tf: TextureFile, *, base_level: int = 0,
                        last_level: int | None = None, category: Category = Category.STATIC,
                        label: str | None = None, force_cpu_decode: bool = False) -> GpuTexture:
    """Make storage for chain levels base_level..last_level of `tf` and fill them.

    If any read or upload fails the texture is released before the error propagates:
    no half-made texture stays allocated."""
    if tf.depth > 1:
        raise UnsupportedFormatError(tf.path, f"{tf.format} 3D", "3D textures are not uploaded")
    last = len(tf.levels) - 1 if last_level is None else last_level
    if not 0 <= base_level <= last < len(tf.levels):
        raise ValueError(f"{tf.path}: level range {base_level}..{last} outside "
                         f"0..{len(tf.levels) - 1}")
    fmt = gpu_format(device, tf, force_cpu_decode)
    if fmt is not tf.pixel_format:
        log.debug("%s: %s served as %s", tf.path, tf.format, fmt.name)
    tex = device.storage_texture(fmt, tf.width, tf.height, levels=last - base_level + 1,
                                 base_level=base_level, layers=tf.layers, cube=tf.is_cube,
                                 category=category, label=label or tf.path.name)
    try:
        for level in range(base_level, last + 1):
            fill_level(device, tex, tf, level)
    except BaseException:
        device.release(tex)
        raise
    return tex


def fill_level(device: Device, tex: GpuTexture, tf: TextureFile, level: int) -> None:
    """Upload every layer and face of one chain level of `tf` into `tex`."""
    for layer in range(tf.layers):
        for face in range(tf.faces):
            device.commands.upload(tex, level, level_payload(tf, tex.fmt, level, layer, face), layer, face)
