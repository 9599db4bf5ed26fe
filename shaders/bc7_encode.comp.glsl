#version 430
// BC7 blocks in mode 6 or (opaque blocks) mode 1, one invocation a block.
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
//
// Opaque blocks also try mode 1: two subsets of RGB (alpha decodes 255), one of 64 fixed
// partitions of the 16 texels, endpoints of 6 bits a channel plus one p-bit per subset
// (shared by its two endpoints), 3-bit indices (weights 0 9 18 27 37 46 55 64). The
// partition is the one whose subsets lie closest to a line each (the least energy off each
// subset's principal axis); each subset's endpoints are its extremes along that axis, then
// one least-squares refit, with the p-bit whose quantised endpoints land closest; the block
// keeps whichever mode decodes closer. Bit layout: the
// mode (0 then 1), the partition (6 bits), R of subset 0's two endpoints then subset 1's
// (6 bits each), the same for G and B, the two p-bits, then the indices, texel 0's and the
// second subset's anchor texel's with 2 bits (top bit implied 0), the others with 3.
#include "bc_encode_common.glsl"
#include "bc7_partitions.glsl"

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
    return solve_endpoints(aa, ab, bb, ax, bx, e0, e1);
}

// Appends `n` bits of `v` at bit `pos` of the 128-bit block.
void put(inout uvec4 word, inout int pos, uint v, int n) {
    int w = pos >> 5, s = pos & 31;
    word[w] |= v << s;
    if (s + n > 32) word[w + 1] |= v >> (32 - s);
    pos += n;
}

const int WEIGHTS3[8] = int[8](0, 9, 18, 27, 37, 46, 55, 64);

// Energy off the principal axis of n points with sum `s`, sums of squares `d` and of cross
// products `c` (rg, rb, gb): the error a line fit through them cannot avoid, for ranking
// partitions. The largest eigenvalue of their covariance comes from a few power steps.
float line_residual(float n, vec3 s, vec3 d, vec3 c) {
    if (n < 1.0) return 0.0;
    vec3 diag = d - s * s / n;
    vec3 off = c - vec3(s.r * s.g, s.r * s.b, s.g * s.b) / n;
    mat3 cov = mat3(diag.x, off.x, off.y, off.x, diag.y, off.z, off.y, off.z, diag.z);
    vec3 axis = diag + vec3(1e-3);
    for (int k = 0; k < 3; ++k) axis = cov * normalize(axis);
    vec3 u = normalize(axis);
    return diag.x + diag.y + diag.z - dot(u, cov * u);
}

// Mean and unit principal axis of the texels of subset `s` of `mask`.
void subset_axis(vec3 px[16], uint mask, uint s, out vec3 mean, out vec3 axis) {
    vec3 sum = vec3(0.0);
    float n = 0.0;
    for (int i = 0; i < 16; ++i) {
        if (((mask >> i) & 1u) == s) { sum += px[i]; n += 1.0; }
    }
    mean = sum / max(n, 1.0);
    mat3 cov = mat3(0.0);
    for (int i = 0; i < 16; ++i) {
        if (((mask >> i) & 1u) != s) continue;
        vec3 d = px[i] - mean;
        cov += outerProduct(d, d);
    }
    axis = vec3(cov[0][0], cov[1][1], cov[2][2]) + vec3(1e-3);
    for (int k = 0; k < 4; ++k) {
        vec3 next = cov * axis;
        float len = length(next);
        if (len < 1e-9) break;
        axis = next / len;
    }
    axis = normalize(axis);
}

// Decoded 8-bit endpoint of a mode-1 6-bit value and p-bit.
ivec3 expand6(ivec3 q, int p) {
    ivec3 v = (q << 1) | p;
    return (v << 1) | (v >> 6);
}

// Mode 1's indices, 4 bits a texel (texel i in word i / 8): small enough to copy freely.
uint get4(uvec2 v, int i) { return (v[i >> 3] >> ((i & 7) * 4)) & 15u; }
void set4(inout uvec2 v, int i, uint x) {
    int w = i >> 3, sh = (i & 7) * 4;
    v[w] = (v[w] & ~(15u << sh)) | (x << sh);
}

// One subset of mode 1 for float endpoints (e0, e1): quantised endpoints, p-bit, the
// indices of the subset's texels (set in idx) and error.
float subset_quantized(vec3 px[16], uint mask, uint s, vec3 e0, vec3 e1, out ivec3 q0,
                       out ivec3 q1, out int pbit, inout uvec2 idx) {
    // the p-bit whose quantised endpoints land closest to (e0, e1)
    float qerr = 1e30;
    for (int p = 0; p < 2; ++p) {
        ivec3 c0 = clamp(ivec3(floor((e0 * 127.0 / 255.0 - float(p)) / 2.0 + 0.5)), 0, 63);
        ivec3 c1 = clamp(ivec3(floor((e1 * 127.0 / 255.0 - float(p)) / 2.0 + 0.5)), 0, 63);
        vec3 a = vec3(expand6(c0, p)) - e0, b = vec3(expand6(c1, p)) - e1;
        float q = dot(a, a) + dot(b, b);
        if (q < qerr) { qerr = q; q0 = c0; q1 = c1; pbit = p; }
    }
    vec3 d0 = vec3(expand6(q0, pbit)), d1 = vec3(expand6(q1, pbit));
    vec3 dir = d1 - d0;
    float len2 = dot(dir, dir);
    float total = 0.0;
    for (int i = 0; i < 16; ++i) {
        if (((mask >> i) & 1u) != s) continue;
        int guess = len2 > 0.0 ? int(floor(clamp(dot(px[i] - d0, dir) / len2, 0.0, 1.0)
                                           * 7.0 + 0.5)) : 0;
        float e = 1e30;
        uint pick = 0u;
        for (int k = max(guess - 1, 0); k <= min(guess + 1, 7); ++k) {
            float w = float(WEIGHTS3[k]);
            vec3 d = px[i] - floor(((64.0 - w) * d0 + w * d1 + 32.0) / 64.0);
            float ek = dot(d, d);
            if (ek < e) { e = ek; pick = uint(k); }
        }
        set4(idx, i, pick);
        total += e;
    }
    return total;
}

bool subset_refit(vec3 px[16], uint mask, uint s, uvec2 idx, out vec3 e0, out vec3 e1) {
    float aa = 0.0, ab = 0.0, bb = 0.0;
    vec3 ax = vec3(0.0), bx = vec3(0.0);
    for (int i = 0; i < 16; ++i) {
        if (((mask >> i) & 1u) != s) continue;
        float w = float(WEIGHTS3[get4(idx, i)]) / 64.0;
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

// Mode 1 for an opaque block: its 128 bits and their error (RGB).
float mode1(vec3 px[16], out uvec4 word) {
    vec3 ts = vec3(0.0), td = vec3(0.0), tc = vec3(0.0);
    vec3 sq[16], cr[16];
    for (int i = 0; i < 16; ++i) {
        vec3 x = px[i];
        sq[i] = x * x;
        cr[i] = vec3(x.r * x.g, x.r * x.b, x.g * x.b);
        ts += x; td += sq[i]; tc += cr[i];
    }
    int part = 0;
    float best = 1e30;
    for (int p = 0; p < 64; ++p) {
        uint mask = PARTITION2[p];
        vec3 s1 = vec3(0.0), d1 = vec3(0.0), c1 = vec3(0.0);
        float n1 = 0.0;
        for (int i = 0; i < 16; ++i) {
            float w = float((mask >> i) & 1u);
            n1 += w; s1 += w * px[i]; d1 += w * sq[i]; c1 += w * cr[i];
        }
        float r = line_residual(n1, s1, d1, c1)
            + line_residual(16.0 - n1, ts - s1, td - d1, tc - c1);
        if (r < best) { best = r; part = p; }
    }
    uint mask = PARTITION2[part];
    ivec3 q[4];
    int pb[2];
    uvec2 idx = uvec2(0u);
    float err = 0.0;
    for (uint s = 0u; s < 2u; ++s) {
        vec3 mean, axis;
        subset_axis(px, mask, s, mean, axis);
        float lo = 1e30, hi = -1e30;
        for (int i = 0; i < 16; ++i) {
            if (((mask >> i) & 1u) != s) continue;
            float t = dot(px[i] - mean, axis);
            lo = min(lo, t);
            hi = max(hi, t);
        }
        ivec3 q0, q1;
        int pbit;
        float e = subset_quantized(px, mask, s, mean + lo * axis, mean + hi * axis, q0, q1,
                                   pbit, idx);
        for (int pass = 0; pass < 1 && e > 0.0; ++pass) {
            vec3 e0, e1;
            if (!subset_refit(px, mask, s, idx, e0, e1)) break;
            ivec3 n0, n1;
            int np;
            uvec2 nidx = idx;
            float ne = subset_quantized(px, mask, s, e0, e1, n0, n1, np, nidx);
            if (ne >= e) break;
            e = ne; q0 = n0; q1 = n1; pbit = np; idx = nidx;
        }
        q[2 * s] = q0;
        q[2 * s + 1] = q1;
        pb[s] = pbit;
        err += e;
    }
    // anchors: texel 0 for subset 0, ANCHOR2[part] for subset 1, their top bit implied 0
    int anchor1 = ANCHOR2[part];
    for (uint s = 0u; s < 2u; ++s) {
        if (get4(idx, s == 0u ? 0 : anchor1) < 4u) continue;
        ivec3 t = q[2 * s]; q[2 * s] = q[2 * s + 1]; q[2 * s + 1] = t;
        for (int i = 0; i < 16; ++i) {
            if (((mask >> i) & 1u) == s) set4(idx, i, 7u - get4(idx, i));
        }
    }
    word = uvec4(0u);
    int pos = 0;
    put(word, pos, 2u, 2);
    put(word, pos, uint(part), 6);
    for (int c = 0; c < 3; ++c) {
        for (int k = 0; k < 4; ++k) put(word, pos, uint(q[k][c]), 6);
    }
    put(word, pos, uint(pb[0]), 1);
    put(word, pos, uint(pb[1]), 1);
    for (int i = 0; i < 16; ++i) {
        put(word, pos, get4(idx, i), (i == 0 || i == anchor1) ? 2 : 3);
    }
    return err;
}

vec3[16] px_rgb(vec4 px[16]) {
    vec3 out_[16];
    for (int i = 0; i < 16; ++i) out_[i] = px[i].rgb;
    return out_;
}

void main() {
    vec4 px[16];
    int block = this_block(px);
    if (block < 0) return;
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
    if (opaque && err > 0.0) {
        uvec4 two;
        if (mode1(px_rgb(px), two) < err) {
            blocks[out_base + block] = two;
            return;
        }
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
