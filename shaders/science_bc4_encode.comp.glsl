#version 430
// BC4 blocks of one tile of raw values, one invocation a block (engine/science/gpu_encode.py):
// the encoding of engine/science/bc4.py `encode_tile`, in the same float32 steps, so both
// write the same bytes. A texel is mapped to 255ths of the tile's range ((v - low) * scale;
// NaN and infinities to 0), the block's endpoints are the floor and ceiling of its texels
// (red_0 the ceiling, so the eight-step mode), each texel takes the nearest of the eight
// steps (rounded half to even, as numpy's rint). Texels past the tile's edge repeat it.
#define VALUE_SAMPLER usampler2D
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Blocks { uvec2 blocks[]; };
uniform VALUE_SAMPLER src;
uniform ivec2 origin;    // the tile's first texel in the staging texture
uniform ivec2 size;      // the tile's width and height in texels
uniform int blocks_x;    // blocks a side of the slot
uniform int out_base;    // the slot's first block in the buffer
uniform float low;       // the tile's finite minimum
uniform float scale;     // 255 / the tile's span
// BC4 index of the k-th step from red_1 (k = 0) to red_0 (k = 7)
const uint INDEX_OF_STEP[8] = uint[8](1u, 7u, 6u, 5u, 4u, 3u, 2u, 0u);

void main() {
    int b = int(gl_GlobalInvocationID.x);
    if (b >= blocks_x * blocks_x) {
        return;
    }
    ivec2 corner = ivec2(b % blocks_x, b / blocks_x) * 4;
    float t[16];
    float least = 3.0e38, most = -3.0e38;
    for (int i = 0; i < 16; ++i) {
        ivec2 p = min(corner + ivec2(i & 3, i >> 2), size - 1);
        float v = float(texelFetch(src, origin + p, 0).r);
        t[i] = (isnan(v) || isinf(v)) ? 0.0 : (v - low) * scale;
        least = min(least, t[i]);
        most = max(most, t[i]);
    }
    float lo = clamp(floor(least), 0.0, 255.0);
    float hi = clamp(ceil(most), 0.0, 255.0);
    float steps = 7.0 / max(hi - lo, 1.0);
    uint first = 0u, second = 0u;  // rows 0-1 and rows 2-3: 24 bits each
    for (int i = 0; i < 16; ++i) {
        uint k = uint(clamp(roundEven((t[i] - lo) * steps), 0.0, 7.0));
        uint bits = INDEX_OF_STEP[k] << uint(3 * (i & 7));
        if (i < 8) {
            first |= bits;
        } else {
            second |= bits;
        }
    }
    blocks[out_base + b] = uvec2(uint(hi) | (uint(lo) << 8) | ((first & 0xFFFFu) << 16),
                                 (first >> 16) | (second << 8));
}
