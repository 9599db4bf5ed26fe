#version 450 core
#extension GL_ARB_shader_draw_parameters : require
// Batched instance pass of the virtual-texture feedback shader: as feedback.batched.vert,
// plus each slot's virtual-texture id + 1 and level-0 size as flat varyings (the fragment
// stage takes its LOD from them before any branch on storage-buffer data).
#include "batched_vertex.glsl"

in vec3 in_position;
in vec2 in_uv;

uniform mat4 u_view_proj;

out vec2 v_uv;
flat out uvec3 v_vt;
flat out vec2 v_vt_size[3];

void main() {
    ObjectData o = objects[object_id()];
    v_uv = object_uv(o, in_uv);
    for (int k = 0; k < 3; ++k) {
        v_vt[k] = slot_vt(o, k, true);
        v_vt_size[k] = slot_vt_size(o, k, true);
    }
    gl_Position = u_view_proj * o.model * vec4(in_position, 1.0);
}
