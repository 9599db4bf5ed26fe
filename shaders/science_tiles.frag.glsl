#version 330 core
// Raw values to colour, as engine/science/display.py `shade` states it: contrast limits,
// gamma, a 256-entry LUT row per channel; the channels add up through ONE, ONE blending.
// VALUE_SAMPLER is usampler2D, isampler2D or sampler2D, by the source's dtype (the cache
// keeps the values as they are: R8UI..R32F), read with texelFetch. LINEAR 0: the nearest
// texel; 1 (float data): the four around the pixel centre, weighted bilinearly, each
// clamped to the tile's own texels (the neighbour tile sits in another slot, or nowhere).
// ENCODED 1: BC4 slots, read as [0, 1] and mapped back by the slot's low and span.
#define VALUE_SAMPLER sampler2D
#define LINEAR 0
#define ENCODED 0
#define MAX_CHANNELS 16
uniform VALUE_SAMPLER u_values;
uniform sampler2D u_luts;       // 256 x channels, RGBA8
uniform vec4 u_params[MAX_CHANNELS];  // per channel: low, high, gamma, LUT row
in vec2 v_texel;
flat in ivec2 v_shift;
flat in ivec4 v_tile;           // the tile's first and last texel in its level
flat in int v_channel;
#if ENCODED
flat in vec2 v_range;
#endif
out vec4 f_color;

float value_at(ivec2 texel) {
#if ENCODED
    return v_range.x + texelFetch(u_values, texel + v_shift, 0).r * v_range.y;
#else
    return float(texelFetch(u_values, texel + v_shift, 0).r);
#endif
}

void main() {
    vec4 p = u_params[v_channel];
#if LINEAR
    vec2 at = v_texel - 0.5;
    vec2 below = floor(at);
    vec2 f = at - below;
    ivec2 a = clamp(ivec2(below), v_tile.xy, v_tile.zw);
    ivec2 b = clamp(ivec2(below) + 1, v_tile.xy, v_tile.zw);
    float v = mix(mix(value_at(a), value_at(ivec2(b.x, a.y)), f.x),
                  mix(value_at(ivec2(a.x, b.y)), value_at(b), f.x), f.y);
#else
    float v = value_at(ivec2(floor(v_texel)));
#endif
    float t = pow(clamp((v - p.x) / (p.y - p.x), 0.0, 1.0), p.z);
    int i = int(floor(t * 255.0 + 0.5));
    f_color = vec4(texelFetch(u_luts, ivec2(i, int(p.w)), 0).rgb, 1.0);
}
