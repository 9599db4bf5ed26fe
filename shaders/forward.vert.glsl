#version 330 core
// Forward pass vertex shader: world-space position/normal/tangent for lighting.
in vec3 in_position;
in vec3 in_normal;
in vec2 in_uv;
in vec4 in_tangent;

uniform mat4 u_model;
uniform mat3 u_normal_matrix;
uniform mat4 u_view_proj;
// The material's UV transform (KHR_texture_transform) as its two rows MINUS the identity's,
// so the all-zero default of an unset uniform leaves UVs as they are.
uniform vec3 u_uv_row0_delta;
uniform vec3 u_uv_row1_delta;

out vec3 v_world;
out vec3 v_normal;
out vec2 v_uv;
out vec4 v_tangent;

void main() {
    vec4 world = u_model * vec4(in_position, 1.0);
    v_world = world.xyz;
    v_normal = normalize(u_normal_matrix * in_normal);
    v_tangent = vec4(normalize(mat3(u_model) * in_tangent.xyz), in_tangent.w);
    vec3 uv1 = vec3(in_uv, 1.0);
    v_uv = in_uv + vec2(dot(u_uv_row0_delta, uv1), dot(u_uv_row1_delta, uv1));
    gl_Position = u_view_proj * world;
}
