#version 330
// EASU, the edge-adaptive spatial upsampling pass of FidelityFX Super Resolution 1.0, written
// from AMD's published description of the algorithm:
//   * 12 source texels around the sample point (the 2x2 bilinear footprint plus its border),
//   * a luma analysis of the 2x2 footprint that yields a gradient direction and an "edge
//     length" (how monotonic the gradient is: 1 on a clean edge, 0 on flat areas and thin
//     features), bilinearly blended to the sample point,
//   * a Lanczos-2-like kernel, polynomial rather than sinc, rotated onto the gradient,
//     compressed across the edge and stretched along it, with a negative lobe that shrinks
//     on edges,
//   * a deringing clamp of the result to the min/max of the 2x2 footprint.
// Input is display-space colour (tone-mapped, sRGB-encoded), as FSR 1 expects.
uniform sampler2D u_src;     // read with texelFetch: the filter state does not matter
uniform ivec2 u_src_size;    // pixels of u_src in use, from its origin
uniform vec2 u_dst_origin;   // viewport origin in window coordinates
uniform vec2 u_dst_size;     // viewport size
out vec4 frag;

// Tap offsets from the texel at or below-left of the sample point:
//        0 1
//      2 3 4 5
//      6 7 8 9
//       10 11
const ivec2 TAPS[12] = ivec2[12](
    ivec2(0, -1), ivec2(1, -1),
    ivec2(-1, 0), ivec2(0, 0), ivec2(1, 0), ivec2(2, 0),
    ivec2(-1, 1), ivec2(0, 1), ivec2(1, 1), ivec2(2, 1),
    ivec2(0, 2), ivec2(1, 2));

vec3 fetch(ivec2 p) {
    return texelFetch(u_src, clamp(p, ivec2(0), u_src_size - 1), 0).rgb;
}

// Cheap luma (twice Rec.601-ish weights: only ratios of differences are used).
float luma(vec3 c) {
    return c.g + 0.5 * (c.r + c.b);
}

// How edge-like the centre of three samples along one axis is: |a - b| against the largest
// single step. 1 when the run is monotonic with even steps, 0 when the centre is an extremum.
float edge_length(float a, float centre, float b) {
    float step = max(abs(b - centre), abs(centre - a));
    float r = step > 0.0 ? clamp(abs(b - a) / step, 0.0, 1.0) : 0.0;
    return r * r;
}

// Add one footprint texel's gradient and edge length, weighted by its bilinear weight.
void analyse(float w, float left, float centre, float right, float up, float down,
             inout vec2 dir, inout float len) {
    dir += vec2(right - left, down - up) * w;
    len += (edge_length(left, centre, right) + edge_length(up, centre, down)) * w;
}

void main() {
    vec2 pos = (gl_FragCoord.xy - u_dst_origin) * vec2(u_src_size) / u_dst_size - 0.5;
    ivec2 base = ivec2(floor(pos));
    vec2 f = pos - vec2(base);

    vec3 c[12];
    float l[12];
    for (int i = 0; i < 12; ++i) {
        c[i] = fetch(base + TAPS[i]);
        l[i] = luma(c[i]);
    }

    vec2 dir = vec2(0.0);
    float len = 0.0;
    analyse((1.0 - f.x) * (1.0 - f.y), l[2], l[3], l[4], l[0], l[7], dir, len);
    analyse(f.x * (1.0 - f.y), l[3], l[4], l[5], l[1], l[8], dir, len);
    analyse((1.0 - f.x) * f.y, l[6], l[7], l[8], l[3], l[10], dir, len);
    analyse(f.x * f.y, l[7], l[8], l[9], l[4], l[11], dir, len);

    float d2 = dot(dir, dir);
    dir = d2 < 1.0 / 32768.0 ? vec2(1.0, 0.0) : dir * inversesqrt(d2);
    len = 0.25 * len * len;  // (len / 2)^2: both axes summed to at most 2

    // On a diagonal the texel grid is sqrt(2) coarser along the gradient: stretch for it.
    float stretch = 1.0 / max(abs(dir.x), abs(dir.y));
    vec2 axis_scale = vec2(1.0 + (stretch - 1.0) * len, 1.0 - 0.5 * len);
    // Window parameter: 1/2 (soft, small negative lobe) off edges, 0.21 (sharper) on edges.
    float lobe = 0.5 - 0.29 * len;
    float cutoff = 1.0 / lobe;  // the window's zero: no weight beyond it

    vec3 acc = vec3(0.0);
    float wsum = 0.0;
    for (int i = 0; i < 12; ++i) {
        vec2 off = vec2(TAPS[i]) - f;
        vec2 v = vec2(dot(off, dir), dot(off, vec2(-dir.y, dir.x))) * axis_scale;
        float x2 = min(dot(v, v), cutoff);
        // Lanczos-2 approximated: base (25/16 (2/5 x^2 - 1)^2 - 9/16) has its zero at x = 1,
        // window (lobe x^2 - 1)^2 ends the negative lobe at x^2 = 1/lobe.
        float b = 0.4 * x2 - 1.0;
        float win = lobe * x2 - 1.0;
        float w = (1.5625 * b * b - 0.5625) * win * win;
        acc += c[i] * w;
        wsum += w;
    }
    vec3 lo = min(min(c[3], c[4]), min(c[7], c[8]));
    vec3 hi = max(max(c[3], c[4]), max(c[7], c[8]));
    vec3 result = wsum > 0.0 ? acc / wsum : c[3];
    frag = vec4(clamp(result, lo, hi), 1.0);
}
