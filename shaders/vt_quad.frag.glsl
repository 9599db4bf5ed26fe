#version 400 core
// Virtual-texture colour pass: every quad samples its texture through vt_sample.
#include "vt_sample.glsl"
in vec2 v_uv;
flat in uint v_vt;
uniform float u_vt_min_lod;
out vec4 f_color;

void main() {
    f_color = vt_sample_min(v_vt, v_uv, u_vt_min_lod);
}
