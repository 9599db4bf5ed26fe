#version 450 core
#extension GL_ARB_shader_draw_parameters : require
// Batched instance pass of the GPU feedback shader: every object in one multi-draw, its
// transform and UV transform from the object rows (objects.glsl), found by base instance.
#include "batched_vertex.glsl"

in vec3 in_position;
in vec2 in_uv;

uniform mat4 u_view_proj;

out vec2 v_uv;
flat out uint v_object;

void main() {
    uint id = object_id();
    ObjectData o = objects[id];
    v_uv = object_uv(o, in_uv);
    v_object = id;
    gl_Position = u_view_proj * o.model * vec4(in_position, 1.0);
}
