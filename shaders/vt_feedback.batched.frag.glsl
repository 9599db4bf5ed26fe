#version 450 core
// Virtual-texture feedback of the batched scene pass (vertex stage feedback.batched.vert,
// shared with the mip feedback): per pixel the packed key of the tile the object's virtual
// texture needs (vt_feedback_slots.glsl), 0 where the object has none.
#include "vt_sample.glsl"
#include "vt_feedback_slots.glsl"

in vec2 v_uv;
flat in uvec3 v_vt;
flat in vec2 v_vt_size[3];

uniform float u_vt_lod_bias;  // -log2(render size / this pass's size)
uniform int u_vt_frame;

out uvec2 f_key;

void main() {
    f_key = vt_feedback_slots(v_vt, v_vt_size, v_uv, u_vt_lod_bias, u_vt_frame);
}
