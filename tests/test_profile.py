"""The device profile (engine/gl/profile.py) and format serving (engine/textures/transcode.py):
pure policy without GL, then the bytes, then the profile of the live context."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import UnsupportedFormatError
from engine.formats import get
from engine.gl.profile import at_version, decide, describe, parse_glsl_version, software_renderer
from engine.textures.decode import decode_image
from engine.textures.encode import encode_image
from engine.textures.quality import psnr
from engine.textures.transcode import (
    Transcoder,
    block_compatible,
    blocks_transcoder,
    served_format,
    transcode,
)

FULL_45 = {"GL_ARB_shader_draw_parameters", "GL_ARB_texture_compression_bptc",
           "GL_EXT_texture_compression_s3tc", "GL_EXT_texture_sRGB"}
NO_BPTC = {"BC6H_UF", "BC6H_SF", "BC7", "BC7_SRGB"}
S3TC = {"BC1_RGB", "BC1_RGB_SRGB", "BC1_RGBA", "BC1_RGBA_SRGB", "BC2", "BC2_SRGB", "BC3",
        "BC3_SRGB"}


def sampler(missing: set[str]):
    return lambda fmt: not fmt.compressed or fmt.name not in missing


def profile(gl: int, glsl: int, exts=(), missing=frozenset(), **kw):
    args = dict(entry_points=lambda name: True, buffer_storage=gl >= 440, bindless=False,
                sparse=False)
    args.update(kw)
    return decide(gl, glsl, exts, sampler(set(missing)), **args)


def test_the_profile_reduces_on_the_gpu_only_where_compute_runs_on_one():
    for gl, software, where in ((460, False, "gpu"), (410, False, "cpu"), (330, False, "cpu"),
                                (450, True, "cpu")):  # 4.1: macOS; software: on the CPU
        assert profile(gl, gl, software=software).feedback_reduce == where
    assert software_renderer("llvmpipe (LLVM 15.0.6, 256 bits)")
    assert not software_renderer("NVIDIA H200/PCIe/SSE2")


def test_full_driver_gets_the_batched_frame_and_every_format_as_itself():
    p = profile(450, 450, FULL_45)
    assert (p.draw_path, p.feedback_path, p.compute, p.staging) == \
        ("batched", "batched", True, "persistent")
    assert p.fallbacks == {}
    assert "BC7 sampling" not in p.missing


def test_macos_class_driver_is_per_object_without_compute_or_bc7():
    p = profile(410, 410, {"GL_EXT_texture_compression_s3tc", "GL_EXT_texture_sRGB"},
                NO_BPTC, buffer_storage=False)
    assert (p.draw_path, p.feedback_path, p.compute, p.staging) == \
        ("per_object", "per_object", False, "plain")
    assert p.served_as("BC7") == "BC3" and p.served_as("BC7_SRGB") == "BC3_SRGB"
    assert p.served_as("BC6H_UF") == "RGBA16F" and p.served_as("BC6H_SF") == "-"
    assert p.served_as("BC1_RGB") == "BC1_RGB"
    for feature in ("GLSL 4.30", "ARB_multi_draw_indirect", "ARB_compute_shader",
                    "ARB_buffer_storage", "BC7 sampling"):
        assert feature in p.missing
    assert "draw per_object" in describe(p) and "BC7->BC3" in describe(p)


def test_gl43_with_draw_parameters_is_batched_and_gl42_is_not():
    exts = {"GL_ARB_shader_draw_parameters"}
    assert profile(430, 430, exts).draw_path == "batched"
    assert profile(430, 430).draw_path == "per_object"  # no ARB_shader_draw_parameters
    p = profile(420, 420, exts | {"GL_ARB_multi_draw_indirect",
                                  "GL_ARB_shader_storage_buffer_object"})
    assert p.draw_path == "per_object" and "GLSL 4.30" in p.missing
    assert profile(460, 460).draw_path == "batched"  # all of it core


def test_missing_entry_point_keeps_the_per_object_path():
    p = profile(450, 450, FULL_45,
                entry_points=lambda name: name != "glMultiDrawElementsIndirect")
    assert p.draw_path == "per_object" and "ARB_multi_draw_indirect" in p.missing


def test_without_s3tc_colour_is_served_uncompressed():
    p = profile(450, 450, FULL_45, NO_BPTC | S3TC)
    assert p.served_as("BC7") == "RGBA8" and p.served_as("BC1_RGB_SRGB") == "RGBA8_SRGB"
    assert p.served_as("BC4") == "BC4" and p.served_as("BC5") == "BC5"


def test_no_fallback_is_a_typed_error():
    with pytest.raises(UnsupportedFormatError, match=r"hdr\.ktx2.*BC6H_SF.*no fallback"):
        served_format(get("BC6H_SF"), sampler(NO_BPTC), "hdr.ktx2")


@pytest.mark.parametrize("text, gl, want", [
    ("4.50", 450, 450), ("4.10 Mesa 22.3.6", 410, 410), ("4.60 NVIDIA", 460, 460),
    ("3.30", 330, 330), (None, 410, 410), ("", 330, 330), ("4.6", 460, 460)])
def test_glsl_version_parse(text, gl, want):
    assert parse_glsl_version(text, gl) == want


def test_at_version_lowers_only_what_asks_for_more():
    src = "#version 450 core\n#extension GL_X : require\nvoid main() {}\n"
    assert at_version(src, 430).startswith("#version 430 core\n#extension")
    assert at_version(src, 460) == src
    assert at_version("#version 400\nvoid main(){}", 330).startswith("#version 330 core\n")
    assert at_version("#version 330 core\n", 410) == "#version 330 core\n"
    assert at_version("void main(){}", 330) == "void main(){}"


def _photo(h: int = 64, w: int = 96, alpha: bool = False) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 255 // w), (y * 255 // h), ((x * 7 + y * 3) % 256),
                    (x * 255 // w) if alpha else np.full_like(x, 255)], -1)
    return img.astype(np.uint8)


def test_bc7_as_bc3_keeps_the_size_and_most_of_the_picture():
    img = _photo(alpha=True)
    bc7 = encode_image(img, "BC7")
    bc3 = transcode(bc7, get("BC7"), get("BC3"), 96, 64)
    assert len(bc3) == len(bc7) == 24 * 16 * 16
    src, out = decode_image("BC7", bc7, 96, 64), decode_image("BC3", bc3, 96, 64)
    assert psnr(src, out) > 35


def test_bc1_as_rgba8_is_the_exact_decode():
    img = _photo(30, 22)  # not block multiples
    bc1 = encode_image(img, "BC1_RGB_SRGB")
    out = transcode(bc1, get("BC1_RGB_SRGB"), get("RGBA8_SRGB"), 22, 30)
    assert len(out) == 22 * 30 * 4
    assert np.array_equal(np.frombuffer(out, np.uint8).reshape(30, 22, 4),
                          decode_image("BC1_RGB_SRGB", bc1, 22, 30))


def test_bc4_bc5_fall_back_to_their_channels():
    img = _photo()
    r8 = transcode(encode_image(img, "BC4"), get("BC4"), get("R8"), 96, 64)
    rg8 = transcode(encode_image(img, "BC5"), get("BC5"), get("RG8"), 96, 64)
    assert len(r8) == 96 * 64 and len(rg8) == 96 * 64 * 2


def test_tiles_transcode_block_by_block():
    """A run of blocks transcodes as one row: the same bytes as the image it came from."""
    img = _photo(32, 32)
    bc7 = encode_image(img, "BC7")
    whole = transcode(bc7, get("BC7"), get("BC3"), 32, 32)
    serve = blocks_transcoder(get("BC7"), get("BC3"))
    assert serve(bc7) == whole
    assert serve(bc7[:16 * 5]) == whole[:16 * 5]
    assert block_compatible(get("BC7"), get("BC3"))
    assert not block_compatible(get("BC7"), get("BC1_RGB"))
    with pytest.raises(ValueError):
        blocks_transcoder(get("BC7"), get("RGBA8"))


def test_each_pair_is_said_once_with_its_measured_cost(caplog, tmp_path):
    from engine.textures import open_texture
    from engine.textures.ktx2_write import write_ktx2

    img = _photo(64, 64)
    path = tmp_path / "photo.ktx2"
    write_ktx2(path, "BC7_SRGB", 64, 64, [encode_image(img, "BC7_SRGB")])
    tf = open_texture(path)
    t = Transcoder()
    with caplog.at_level("WARNING", logger="engine.textures.transcode"):
        for _ in range(3):
            t.announce(tf, get("BC3_SRGB"))
            t.announce(tf, get("RGBA8_SRGB"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "BC7_SRGB textures are served as BC3_SRGB" in said[0] and "64x64 level" in said[0]
    assert "dB PSNR" in said[0] and "1x its memory" in said[0] and "4x its memory" in said[1]
    cost = t.costs[("BC7_SRGB", "BC3_SRGB")]
    assert cost.psnr_db > 35 and cost.bytes_ratio == 1.0
    assert t.costs[("BC7_SRGB", "RGBA8_SRGB")].psnr_db == float("inf")


def test_a_file_that_cannot_be_read_is_said_without_a_figure(caplog, tmp_path):
    from engine.textures import open_texture
    from engine.textures.ktx2_write import write_ktx2

    path = tmp_path / "short.ktx2"
    write_ktx2(path, "BC7", 64, 64, [bytes(64 * 64)])
    tf = open_texture(path)
    path.write_bytes(path.read_bytes()[:-100])  # truncated after it was opened
    with caplog.at_level("WARNING", logger="engine.textures.transcode"):
        Transcoder().announce(tf, get("BC3"))
    assert "quality not measured" in caplog.records[0].getMessage()


def test_live_profile_matches_the_context(dev):
    """What the device decided agrees with what its context reports."""
    p, caps = dev.profile, dev.caps
    assert p.gl_version == caps.version_code and p.glsl_version == caps.glsl_version
    for name in caps.compressed:
        assert p.served_as(name) == name
    batched = p.draw_path == "batched"
    assert batched == (caps.glsl_version >= 430 and "ARB_multi_draw_indirect" not in p.missing)
    assert p.staging == ("persistent" if caps.buffer_storage else "plain")
