#version 330 core
// Forward pass vertex shader: world-space position/normal/tangent for lighting.
in vec3 in_position;
in vec3 in_normal;
in vec2 in_uv;
in vec4 in_tangent;

uniform mat4 u_model;
uniform mat3 u_normal_matrix;
uniform mat4 u_view_proj;

out vec3 v_world;
out vec3 v_normal;
out vec2 v_uv;
out vec4 v_tangent;

void main() {
    vec4 world = u_model * vec4(in_position, 1.0);
    v_world = world.xyz;
    v_normal = normalize(u_normal_matrix * in_normal);
    v_tangent = vec4(normalize(mat3(u_model) * in_tangent.xyz), in_tangent.w);
    v_uv = in_uv;
    gl_Position = u_view_proj * world;
}
