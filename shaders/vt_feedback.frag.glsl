#version 400 core
// Virtual-texture feedback: per pixel, the packed key of the tile the lookup needs.
#include "vt_sample.glsl"
in vec2 v_uv;
flat in uint v_vt;
uniform float u_vt_lod_bias;  // -log2(downscale of this pass)
out uvec2 f_key;

void main() {
    f_key = vt_feedback_key(v_vt, v_uv, u_vt_lod_bias);
}
