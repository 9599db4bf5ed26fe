#version 400 core
// Virtual-texture feedback drawn one object at a time (drivers without the batched frame:
// GL 3.3-4.2, macOS): the same keys as the batched pass, the slots from uniforms.
#include "vt_sample.glsl"
#include "vt_feedback_slots.glsl"

in vec2 v_uv;

uniform uvec3 u_vt;          // per slot: virtual-texture id + 1, 0 where not virtual
uniform vec2 u_vt_size[3];   // per slot: level-0 size in texels
uniform float u_vt_lod_bias;  // -log2(render size / this pass's size)
uniform int u_vt_frame;

out uvec2 f_key;

void main() {
    f_key = vt_feedback_slots(u_vt, u_vt_size, v_uv, u_vt_lod_bias, u_vt_frame);
}
