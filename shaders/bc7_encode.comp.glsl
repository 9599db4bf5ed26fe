#version 430
// BC7 blocks in mode 6, one invocation a block.
//
// Mode 6 is one subset of RGBA: two endpoints of 7 bits a channel plus one p-bit each (the
// endpoint's lowest bit, shared by its four channels), and sixteen 4-bit indices into the
// 16 colours between them (weights of 64: 0 4 9 13 17 21 26 30 34 38 43 47 51 55 60 64,
// colour = ((64 - w) e0 + w e1 + 32) >> 6). Bit layout, from bit 0: the mode (six 0 bits and
// a 1), R0 R1 G0 G1 B0 B1 A0 A1 (7 bits each), P0, P1, then the indices, texel 0's with
// 3 bits (its top bit is implied 0: the "anchor"), the others with 4.
//
// Endpoints: the texels' extremes along their principal axis (RGBA), then least-squares
// refits to the chosen indices; each candidate is quantised with every p-bit pair, indexed
// and kept when its error (sum of squared RGBA differences) is lower. A block whose texels
// are all opaque keeps both p-bits 1 and alpha 127, so it decodes alpha 255 exactly.
#include "bc_encode_common.glsl"

layout(std430, binding = 0) writeonly buffer Blocks { uvec4 blocks[]; };

const int WEIGHTS[16] = int[16](0, 4, 9, 13, 17, 21, 26, 30, 34, 38, 43, 47, 51, 55, 60, 64);

ivec4 quantize(vec4 e, int p, bool opaque) {
    ivec4 q = clamp(ivec4(floor((e - float(p)) / 2.0 + 0.5)), ivec4(0), ivec4(127));
    if (opaque) q.a = 127;
    return q;
}

// Indices and error for decoded endpoints d0, d1 (0..255 each channel).
float indices(vec4 px[16], ivec4 d0, ivec4 d1, out uint idx[16]) {
    vec4 pal[16];
    for (int k = 0; k < 16; ++k) {
        pal[k] = vec4(((64 - WEIGHTS[k]) * d0 + WEIGHTS[k] * d1 + 32) >> 6);
    }
    vec4 dir = vec4(d1 - d0);
    float len2 = dot(dir, dir);
    float total = 0.0;
    for (int i = 0; i < 16; ++i) {
        // the projection's nearest index and its neighbours: the weights are nearly even
        int guess = len2 > 0.0 ? int(floor(clamp(dot(px[i] - vec4(d0), dir) / len2, 0.0, 1.0)
                                           * 15.0 + 0.5)) : 0;
        float best = 1e30;
        uint pick = 0u;
        for (int k = max(guess - 1, 0); k <= min(guess + 1, 15); ++k) {
            vec4 d = px[i] - pal[k];
            float e = dot(d, d);
            if (e < best) { best = e; pick = uint(k); }
        }
        idx[i] = pick;
        total += best;
    }
    return total;
}

// Best p-bit pair for float endpoints (e0, e1): quantised endpoints, p-bits, indices, error.
float quantized(vec4 px[16], vec4 e0, vec4 e1, bool opaque, out ivec4 q0, out ivec4 q1,
                out int p0, out int p1, out uint idx[16]) {
    float best = 1e30;
    int pairs = opaque ? 1 : 4;
    for (int k = 0; k < pairs; ++k) {
        int a = opaque ? 1 : (k & 1), b = opaque ? 1 : (k >> 1);
        ivec4 c0 = quantize(e0, a, opaque), c1 = quantize(e1, b, opaque);
        uint cand[16];
        float e = indices(px, c0 * 2 + a, c1 * 2 + b, cand);
        if (e < best) {
            best = e; q0 = c0; q1 = c1; p0 = a; p1 = b; idx = cand;
        }
    }
    return best;
}

bool refit(vec4 px[16], uint idx[16], out vec4 e0, out vec4 e1) {
    float aa = 0.0, ab = 0.0, bb = 0.0;
    vec4 ax = vec4(0.0), bx = vec4(0.0);
    for (int i = 0; i < 16; ++i) {
        float w = float(WEIGHTS[idx[i]]) / 64.0;
        float v = 1.0 - w;
        aa += v * v; ab += v * w; bb += w * w;
        ax += v * px[i]; bx += w * px[i];
    }
    float det = aa * bb - ab * ab;
    if (abs(det) < 1e-6) return false;
    e0 = clamp((bb * ax - ab * bx) / det, vec4(0.0), vec4(255.0));
    e1 = clamp((aa * bx - ab * ax) / det, vec4(0.0), vec4(255.0));
    return true;
}

// Appends `n` bits of `v` at bit `pos` of the 128-bit block.
void put(inout uvec4 word, inout int pos, uint v, int n) {
    int w = pos >> 5, s = pos & 31;
    word[w] |= v << s;
    if (s + n > 32) word[w + 1] |= v >> (32 - s);
    pos += n;
}

void main() {
    int local = int(gl_GlobalInvocationID.x);
    if (local >= block_count) return;
    int block = first_block + local;
    vec4 px[16];
    load_block(block, px);
    bool use[16];
    bool opaque = true;
    vec4 mean = vec4(0.0);
    for (int i = 0; i < 16; ++i) {
        use[i] = true;
        mean += px[i];
        opaque = opaque && px[i].a == 255.0;
    }
    mean /= 16.0;
    vec4 axis = principal_axis(px, use, mean, opaque ? 3 : 4);
    float lo = 1e30, hi = -1e30;
    for (int i = 0; i < 16; ++i) {
        float s = dot(px[i] - mean, axis);
        lo = min(lo, s);
        hi = max(hi, s);
    }
    ivec4 q0, q1;
    int p0, p1;
    uint idx[16];
    float err = quantized(px, mean + lo * axis, mean + hi * axis, opaque, q0, q1, p0, p1, idx);
    for (int pass = 0; pass < 2 && err > 0.0; ++pass) {
        vec4 e0, e1;
        if (!refit(px, idx, e0, e1)) break;
        ivec4 n0, n1;
        int np0, np1;
        uint nidx[16];
        float nerr = quantized(px, e0, e1, opaque, n0, n1, np0, np1, nidx);
        if (nerr >= err) break;
        q0 = n0; q1 = n1; p0 = np0; p1 = np1; idx = nidx; err = nerr;
    }
    if (idx[0] >= 8u) {  // the anchor's top bit must be 0: swap the endpoints
        ivec4 tq = q0; q0 = q1; q1 = tq;
        int tp = p0; p0 = p1; p1 = tp;
        for (int i = 0; i < 16; ++i) idx[i] = 15u - idx[i];
    }
    uvec4 word = uvec4(0u);
    int pos = 0;
    put(word, pos, 64u, 7);
    for (int c = 0; c < 4; ++c) {
        put(word, pos, uint(q0[c]), 7);
        put(word, pos, uint(q1[c]), 7);
    }
    put(word, pos, uint(p0), 1);
    put(word, pos, uint(p1), 1);
    put(word, pos, idx[0], 3);
    for (int i = 1; i < 16; ++i) put(word, pos, idx[i], 4);
    blocks[out_base + block] = word;
}
