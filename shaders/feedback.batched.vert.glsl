#version 450 core
#extension GL_ARB_shader_draw_parameters : require
// Vertex stage of both batched feedback passes (the GPU feedback shader and the virtual-texture
// feedback shader): every object in one multi-draw, its transform and UV transform from the
// object rows, found by base instance; each fragment stage reads the varyings it needs (the
// object for the mip feedback, each slot's virtual-texture id + 1 and level-0 size, for the
// slots the object's flags switch on, for the tile feedback).
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
    write_slot_vts(o, true);
    gl_Position = u_view_proj * o.model * vec4(in_position, 1.0);
}
