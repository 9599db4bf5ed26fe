#version 450 core
#extension GL_ARB_shader_draw_parameters : require
// Batched forward pass, vertex stage: the object's row comes from the storage buffer, found
// through the draw's base instance (no per-object uniforms).
#include "batched_vertex.glsl"

in vec3 in_position;
in vec3 in_normal;
in vec2 in_uv;
in vec4 in_tangent;

uniform mat4 u_view_proj;

out vec3 v_world;
out vec3 v_normal;
out vec2 v_uv;
out vec4 v_tangent;
flat out uint v_object;

void main() {
    uint id = object_id();
    ObjectData o = objects[id];
    vec4 world = o.model * vec4(in_position, 1.0);
    mat3 nm = mat3(o.normal_col[0].xyz, o.normal_col[1].xyz, o.normal_col[2].xyz);
    v_world = world.xyz;
    v_normal = normalize(nm * in_normal);
    v_tangent = vec4(normalize(mat3(o.model) * in_tangent.xyz), in_tangent.w);
    v_uv = object_uv(o, in_uv);
    v_object = id;
    write_slot_vts(o, false);
    gl_Position = u_view_proj * world;
}
