#version 450 core
#extension GL_ARB_shader_draw_parameters : require
// Batched instance pass of the virtual-texture feedback shader: as feedback.batched.vert,
// plus each slot's virtual-texture id + 1 and level-0 size as flat varyings (the fragment
// stage takes its LOD from them before any branch on storage-buffer data).
#include "objects.glsl"

in vec3 in_position;
in vec2 in_uv;

uniform mat4 u_view_proj;

out vec2 v_uv;
flat out uvec3 v_vt;
flat out vec2 v_vt_size[3];

void main() {
    uint id = uint(gl_BaseInstanceARB + gl_InstanceID);
    ObjectData o = objects[id];
    vec3 uv1 = vec3(in_uv, 1.0);
    v_uv = vec2(dot(o.uv_row0.xyz, uv1), dot(o.uv_row1.xyz, uv1));
    uint flags = floatBitsToUint(o.params.w);
    uint slot_flags[3] = uint[3](FLAG_ALBEDO, FLAG_NORMAL, FLAG_RM);
    for (int k = 0; k < 3; ++k) {
        int t = o.tex[k];
        bool on = t >= 0 && (flags & slot_flags[k]) != 0u;
        v_vt[k] = on ? textures[t].handle.z : 0u;
        v_vt_size[k] = on ? textures[t].lod.zw : vec2(0.0);
    }
    gl_Position = u_view_proj * o.model * vec4(in_position, 1.0);
}
