#version 450 core
#extension GL_ARB_shader_draw_parameters : require
// Batched instance pass of the GPU feedback shader: every object in one multi-draw, its
// transform and UV transform from the object rows (objects.glsl), found by base instance.
#include "objects.glsl"

in vec3 in_position;
in vec2 in_uv;

uniform mat4 u_view_proj;

out vec2 v_uv;
flat out uint v_object;

void main() {
    uint id = uint(gl_BaseInstanceARB + gl_InstanceID);
    ObjectData o = objects[id];
    vec3 uv1 = vec3(in_uv, 1.0);
    v_uv = vec2(dot(o.uv_row0.xyz, uv1), dot(o.uv_row1.xyz, uv1));
    v_object = id;
    gl_Position = u_view_proj * o.model * vec4(in_position, 1.0);
}
