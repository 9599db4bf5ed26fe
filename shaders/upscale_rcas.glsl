#version 330
// RCAS, the robust contrast-adaptive sharpening pass of FidelityFX Super Resolution 1.0,
// written from AMD's published description of the algorithm. It runs at output resolution on
// EASU's result. The output is the 5-tap cross
//     (e + w (b + d + f + h)) / (1 + 4 w),   w <= 0 (a negative lobe sharpens)
// where w is, per pixel, the strongest lobe for which no channel can leave [0, 1] given the
// neighbourhood's min and max (so it never clips and never rings past the local range),
// capped at LIMIT, scaled by the user's sharpness and damped where the centre looks like noise.
uniform sampler2D u_src;      // EASU output, output-sized, read with texelFetch
uniform vec2 u_dst_origin;    // viewport origin in window coordinates
uniform float u_sharpness;    // linear amount, 2^-stops: 1 = strongest
out vec4 frag;

const float LIMIT = 0.25 - 1.0 / 16.0;
const float EPS = 1.0 / 65536.0;

vec3 fetch(ivec2 p) {
    return texelFetch(u_src, clamp(p, ivec2(0), textureSize(u_src, 0) - 1), 0).rgb;
}

float luma(vec3 c) {
    return c.g + 0.5 * (c.r + c.b);
}

void main() {
    ivec2 p = ivec2(gl_FragCoord.xy - u_dst_origin);
    vec3 b = fetch(p + ivec2(0, -1));
    vec3 d = fetch(p + ivec2(-1, 0));
    vec3 e = fetch(p);
    vec3 f = fetch(p + ivec2(1, 0));
    vec3 h = fetch(p + ivec2(0, 1));

    vec3 mn = min(min(b, d), min(f, h));
    vec3 mx = max(max(b, d), max(f, h));
    // Darkest possible result >= 0 needs w >= -min(mn, e) / (4 mx);
    // brightest possible result <= 1 needs w >= (1 - max(mx, e)) / (4 mn - 4).
    vec3 low_bound = -min(mn, e) / max(4.0 * mx, EPS);
    vec3 high_bound = (1.0 - max(mx, e)) / min(4.0 * mn - 4.0, -EPS);
    vec3 bound = max(low_bound, high_bound);
    float w = max(-LIMIT, min(max(bound.r, max(bound.g, bound.b)), 0.0)) * u_sharpness;

    // Noise damping: a centre far from its neighbours' mean, relative to the local luma
    // range, is more likely grain than detail; halve the lobe at most.
    float lb = luma(b), ld = luma(d), le = luma(e), lf = luma(f), lh = luma(h);
    float range = max(max(max(lb, ld), max(lf, lh)), le) - min(min(min(lb, ld), min(lf, lh)), le);
    float noise = range > 0.0 ? clamp(abs(0.25 * (lb + ld + lf + lh) - le) / range, 0.0, 1.0) : 0.0;
    w *= 1.0 - 0.5 * noise;

    frag = vec4((e + w * (b + d + f + h)) / (1.0 + 4.0 * w), 1.0);
}
