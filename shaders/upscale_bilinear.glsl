#version 330
// Plain bilinear upscale: the baseline FSR has to beat. The four taps are fetched and blended
// here rather than by the texture unit, so the result does not depend on the filter state of
// a texture the caller owns (and needs no sampler object).
uniform sampler2D u_src;     // read with texelFetch
uniform ivec2 u_src_size;    // pixels of u_src in use, from its origin
uniform vec2 u_dst_origin;   // viewport origin in window coordinates
uniform vec2 u_dst_size;     // viewport size
out vec4 frag;

vec3 fetch(ivec2 p) {
    return texelFetch(u_src, clamp(p, ivec2(0), u_src_size - 1), 0).rgb;
}

void main() {
    vec2 pos = (gl_FragCoord.xy - u_dst_origin) * vec2(u_src_size) / u_dst_size - 0.5;
    ivec2 base = ivec2(floor(pos));
    vec2 f = pos - vec2(base);
    vec3 bottom = mix(fetch(base), fetch(base + ivec2(1, 0)), f.x);
    vec3 top = mix(fetch(base + ivec2(0, 1)), fetch(base + ivec2(1, 1)), f.x);
    frag = vec4(mix(bottom, top, f.y), 1.0);
}
