#version 430
// BC1 (S3TC DXT1) blocks, one invocation a block.
//
// A block is two RGB565 endpoints and sixteen 2-bit indices. With color0 > color1 (as
// 16-bit numbers) the palette is c0, c1, (2 c0 + c1) / 3, (c0 + 2 c1) / 3; with color0 <=
// color1 it is c0, c1, (c0 + c1) / 2 and transparent black (index 3), which `punch` blocks
// (BC1 with 1-bit alpha) use when a texel's alpha is below 128.
//
// Endpoints: the extremes of the texels along their principal axis, then least-squares
// refits of the endpoints to the chosen indices; each candidate is quantised to 565,
// re-indexed and kept when its error (sum of squared RGB differences) is lower.
#include "bc_encode_common.glsl"

layout(std430, binding = 0) writeonly buffer Blocks { uvec2 blocks[]; };
uniform int punch;  // 1: BC1 with 1-bit alpha (3-colour blocks where alpha < 128)

uint pack565(vec3 c) {
    vec3 q = clamp(floor(c * vec3(31.0, 63.0, 31.0) / 255.0 + 0.5), vec3(0.0),
                   vec3(31.0, 63.0, 31.0));
    return (uint(q.r) << 11) | (uint(q.g) << 5) | uint(q.b);
}

vec3 unpack565(uint c) {
    uint r = (c >> 11) & 31u, g = (c >> 5) & 63u, b = c & 31u;
    return vec3(float((r << 3) | (r >> 2)), float((g << 2) | (g >> 4)), float((b << 3) | (b >> 2)));
}

// The block's palette for endpoints (a, b) in the mode the order of a and b selects.
void palette(uint a, uint b, out vec3 pal[4]) {
    vec3 p0 = unpack565(a), p1 = unpack565(b);
    pal[0] = p0;
    pal[1] = p1;
    if (a > b) {
        pal[2] = floor((2.0 * p0 + p1) / 3.0);
        pal[3] = floor((p0 + 2.0 * p1) / 3.0);
    } else {
        pal[2] = floor((p0 + p1) / 2.0);
        pal[3] = vec3(0.0);
    }
}

// Indices and error of endpoints (a, b); `hole` texels take index 3 (3-colour mode only).
float indices(vec3 px[16], bool hole[16], uint a, uint b, out uint idx[16]) {
    vec3 pal[4];
    palette(a, b, pal);
    int choices = a > b ? 4 : 3;
    float total = 0.0;
    for (int i = 0; i < 16; ++i) {
        if (hole[i]) { idx[i] = 3u; continue; }
        float best = 1e30;
        uint pick = 0u;
        for (int k = 0; k < choices; ++k) {
            vec3 d = px[i] - pal[k];
            float e = dot(d, d);
            if (e < best) { best = e; pick = uint(k); }
        }
        idx[i] = pick;
        total += best;
    }
    return total;
}

// Endpoints (in the mode's order) from two colours: 4-colour wants a > b, 3-colour a <= b.
void order(vec3 e0, vec3 e1, bool three, out uint a, out uint b) {
    a = pack565(e0);
    b = pack565(e1);
    if (three ? a > b : a < b) { uint t = a; a = b; b = t; }
}

// Least squares for the endpoints given indices: the weights of endpoint b per index.
bool refit(vec3 px[16], bool hole[16], uint idx[16], bool three, out vec3 e0, out vec3 e1) {
    float w4[4] = float[4](0.0, 1.0, 1.0 / 3.0, 2.0 / 3.0);
    float w3[4] = float[4](0.0, 1.0, 0.5, 0.0);
    float aa = 0.0, ab = 0.0, bb = 0.0;
    vec3 ax = vec3(0.0), bx = vec3(0.0);
    for (int i = 0; i < 16; ++i) {
        if (hole[i]) continue;
        float w = three ? w3[idx[i]] : w4[idx[i]];
        float v = 1.0 - w;
        aa += v * v; ab += v * w; bb += w * w;
        ax += v * px[i]; bx += w * px[i];
    }
    vec4 f0, f1;
    if (!solve_endpoints(aa, ab, bb, vec4(ax, 0.0), vec4(bx, 0.0), f0, f1)) return false;
    e0 = f0.rgb;
    e1 = f1.rgb;
    return true;
}

void main() {
    vec4 t[16];
    int block = this_block(t);
    if (block < 0) return;
    vec3 px[16];
    bool hole[16];
    bool use[16];
    int opaque = 0;
    vec4 mean = vec4(0.0);
    for (int i = 0; i < 16; ++i) {
        px[i] = t[i].rgb;
        hole[i] = punch == 1 && t[i].a < 128.0;
        use[i] = !hole[i];
        if (use[i]) { mean += vec4(px[i], 0.0); opaque += 1; }
    }
    if (opaque == 0) {  // every texel transparent: a 3-colour block of index 3 throughout
        blocks[out_base + block] = uvec2(0u, 0xFFFFFFFFu);
        return;
    }
    bool three = opaque < 16;
    mean /= float(opaque);
    vec4 axis = principal_axis(t, use, mean, 3);
    float lo = 1e30, hi = -1e30;
    for (int i = 0; i < 16; ++i) {
        if (!use[i]) continue;
        float s = dot(vec4(px[i], 0.0) - mean, axis);
        lo = min(lo, s);
        hi = max(hi, s);
    }
    uint a, b;
    order(mean.rgb + hi * axis.rgb, mean.rgb + lo * axis.rgb, three, a, b);
    uint idx[16];
    float err = indices(px, hole, a, b, idx);
    for (int pass = 0; pass < 2 && err > 0.0; ++pass) {
        vec3 e0, e1;
        if (!refit(px, hole, idx, three, e0, e1)) break;
        uint na, nb;
        order(e0, e1, three, na, nb);
        uint nidx[16];
        float nerr = indices(px, hole, na, nb, nidx);
        if (nerr >= err) break;
        a = na; b = nb; err = nerr; idx = nidx;
    }
    uint bits = 0u;
    for (int i = 0; i < 16; ++i) bits |= idx[i] << (2 * i);
    blocks[out_base + block] = uvec2(a | (b << 16), bits);
}
