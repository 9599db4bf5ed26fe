#version 330 core
// Raw values to colour, as engine/science/display.py `shade` states it: contrast limits,
// gamma, a 256-entry LUT row per channel; the channels add up through ONE, ONE blending.
// VALUE_SAMPLER is usampler2D, isampler2D or sampler2D, by the source's dtype (the cache
// keeps the values as they are: R8UI..R32F), read with texelFetch: nearest, never blended.
#define VALUE_SAMPLER sampler2D
uniform VALUE_SAMPLER u_values;
uniform sampler2D u_luts;       // 256 x channels, RGBA8
uniform vec4 u_params[16];      // per channel: low, high, gamma, LUT row
in vec2 v_texel;
flat in ivec2 v_shift;
flat in int v_channel;
out vec4 f_color;

void main() {
    vec4 p = u_params[v_channel];
    float v = float(texelFetch(u_values, ivec2(floor(v_texel)) + v_shift, 0).r);
    float t = pow(clamp((v - p.x) / (p.y - p.x), 0.0, 1.0), p.z);
    int i = int(floor(t * 255.0 + 0.5));
    f_color = vec4(texelFetch(u_luts, ivec2(i, int(p.w)), 0).rgb, 1.0);
}
