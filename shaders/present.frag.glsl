#version 330 core
// Tone map the linear HDR colour (ACES fit by Narkowicz) and encode sRGB by hand, so the
// 8-bit output holds display values whatever the framebuffer's sRGB state.
in vec2 v_uv;
uniform sampler2D u_hdr;
uniform float u_exposure;
uniform bool u_tonemap;
out vec4 f_color;

vec3 aces(vec3 x) {
    return clamp((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0);
}

vec3 srgb_encode(vec3 c) {
    c = clamp(c, 0.0, 1.0);
    return mix(c * 12.92, 1.055 * pow(c, vec3(1.0 / 2.4)) - 0.055, step(0.0031308, c));
}

void main() {
    vec3 c = texture(u_hdr, v_uv).rgb * u_exposure;
    f_color = vec4(srgb_encode(u_tonemap ? aces(c) : c), 1.0);
}
