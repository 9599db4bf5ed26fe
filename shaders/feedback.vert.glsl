#version 330 core
// Instance pass of the feedback, tile-feedback and accuracy shaders: position and UV only.
// The fragment shaders derive the mip level from UV derivatives, so nothing else is needed.
in vec3 in_position;
in vec2 in_uv;

uniform mat4 u_model;
uniform mat4 u_view_proj;
// The material's UV transform as its two rows minus the identity's (forward.vert.glsl).
uniform vec3 u_uv_row0_delta;
uniform vec3 u_uv_row1_delta;

out vec2 v_uv;

void main() {
    vec3 uv1 = vec3(in_uv, 1.0);
    v_uv = in_uv + vec2(dot(u_uv_row0_delta, uv1), dot(u_uv_row1_delta, uv1));
    gl_Position = u_view_proj * u_model * vec4(in_position, 1.0);
}
