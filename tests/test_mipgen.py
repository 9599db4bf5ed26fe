"""Mip chains: GL dimensions at odd sizes, linear-light and alpha-aware filtering."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.memory.sizes import mip_count, mip_dims
from engine.textures.mipgen import (
    _box_weights,
    downsample,
    generate_mips,
    linear_to_srgb,
    srgb_to_linear,
)


def _checker(h: int, w: int, a: int = 0, b: int = 255) -> np.ndarray:
    img = np.full((h, w, 4), 255, np.uint8)
    mask = (np.add.outer(np.arange(h), np.arange(w)) % 2).astype(bool)
    img[..., :3] = np.where(mask[..., None], b, a)
    return img


@pytest.mark.parametrize("w,h", [(256, 256), (37, 19), (1, 7), (1, 1), (640, 427), (3, 2)])
def test_chain_dimensions_follow_the_gl_rule(w: int, h: int) -> None:
    levels = generate_mips(np.zeros((h, w, 4), np.uint8))
    assert len(levels) == mip_count(w, h)
    for i, lvl in enumerate(levels):
        assert lvl.shape == (*mip_dims(w, h, i)[::-1], 4)
        assert lvl.dtype == np.uint8
    assert levels[-1].shape[:2] == (1, 1)


def test_max_levels_truncates_the_chain() -> None:
    assert len(generate_mips(np.zeros((64, 64, 4), np.uint8), max_levels=3)) == 3


def test_black_white_checker_averages_in_linear_light() -> None:
    lvl1 = generate_mips(_checker(8, 8), colorspace="srgb")[1]
    # 50% light is sRGB 187.5; averaging the encoded values would give 128.
    assert np.all(np.abs(lvl1[..., :3].astype(int) - 188) <= 1)
    assert np.all(lvl1[..., 3] == 255)


def test_linear_data_is_averaged_as_is() -> None:
    lvl1 = generate_mips(_checker(8, 8), colorspace="linear")[1]
    assert np.all(np.abs(lvl1[..., :3].astype(int) - 128) <= 1)


def test_transparent_texels_do_not_bleed_into_colour() -> None:
    img = np.zeros((8, 8, 4), np.uint8)  # transparent black ...
    mask = (np.add.outer(np.arange(8), np.arange(8)) % 2).astype(bool)
    img[mask] = (255, 0, 0, 255)  # ... checkered with opaque red
    weighted = generate_mips(img)[1]
    assert np.all(weighted[..., 0] == 255) and np.all(weighted[..., 1:3] == 0)
    assert np.all(np.abs(weighted[..., 3].astype(int) - 128) <= 1)
    naive = generate_mips(img, alpha_weighted=False)[1]
    assert np.all(naive[..., 0] < 200)  # red darkened by the invisible black: the bug avoided


def test_fully_transparent_regions_stay_transparent() -> None:
    img = np.zeros((16, 16, 4), np.uint8)
    img[:8, :, :] = (10, 200, 30, 255)
    levels = generate_mips(img)
    assert np.all(levels[1][4:, :, 3] == 0)
    assert np.all(levels[1][:4, :, :3] == (10, 200, 30))


@pytest.mark.parametrize("w,h", [(37, 19), (5, 3), (640, 427)])
def test_constant_image_stays_constant_at_odd_sizes(w: int, h: int) -> None:
    img = np.empty((h, w, 4), np.uint8)
    img[:] = (90, 160, 220, 255)
    for lvl in generate_mips(img):
        assert np.all(lvl == (90, 160, 220, 255))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300))
def test_box_weights_cover_every_source_texel_exactly_once(n_in: int, n_out_div: int) -> None:
    n_out = max(1, n_in // max(1, n_out_div % 4 + 1))
    idx, w = _box_weights(n_in, n_out)
    assert np.allclose(w.sum(axis=0), 1.0, atol=1e-6)  # each output is a weighted mean
    coverage = np.zeros(n_in)
    np.add.at(coverage, idx.ravel(), w.ravel() * (n_in / n_out))
    assert np.allclose(coverage, 1.0, atol=1e-5)  # each input counted once in total


def test_downsample_preserves_the_mean_at_npot_sizes() -> None:
    rng = np.random.default_rng(1)
    img = rng.random((19, 37, 3), dtype=np.float32)
    small = downsample(img, 18, 9)
    assert small.shape == (9, 18, 3)
    assert np.allclose(small.mean(axis=(0, 1)), img.mean(axis=(0, 1)), atol=1e-5)


def test_power_of_two_is_the_plain_2x2_box() -> None:
    rng = np.random.default_rng(2)
    img = rng.random((8, 8, 4), dtype=np.float32)
    expect = img.reshape(4, 2, 4, 2, 4).mean(axis=(1, 3))
    assert np.allclose(downsample(img, 4, 4), expect, atol=1e-6)


def test_normal_maps_stay_unit_length() -> None:
    rng = np.random.default_rng(3)
    v = rng.normal(size=(32, 32, 3))
    v[..., 2] = np.abs(v[..., 2]) + 0.5
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    img = np.empty((32, 32, 4), np.uint8)
    img[..., :3] = np.rint((v * 0.5 + 0.5) * 255)
    img[..., 3] = 255
    for lvl in generate_mips(img, colorspace="normal")[1:]:
        n = lvl[..., :3].astype(np.float64) / 255 * 2 - 1
        assert np.allclose(np.linalg.norm(n, axis=-1), 1.0, atol=0.02)


def test_srgb_transfer_round_trips_every_byte() -> None:
    x = np.arange(256, dtype=np.uint8)
    back = np.rint(linear_to_srgb(srgb_to_linear(x)) * 255)
    assert np.array_equal(back, x)
    assert srgb_to_linear(x).dtype == np.float32


def test_rejects_non_rgba8() -> None:
    with pytest.raises(ValueError):
        generate_mips(np.zeros((4, 4, 3), np.uint8))


def test_the_table_conversion_to_srgb_bytes_is_the_exact_one():
    from engine.textures.mipgen import _srgb8_exact, linear_to_srgb8

    one = int(np.float32(1.0).view(np.uint32))
    every = np.arange(0, one + 1, 61, dtype=np.uint32).view(np.float32)  # 17M of the floats
    edges = np.array([-1.0, -0.0, 0.0, 1.0, 1.5, np.inf], np.float32)
    for v in (every, edges):
        assert np.array_equal(linear_to_srgb8(v), _srgb8_exact(v))
