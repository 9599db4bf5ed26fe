#version 330 core
// Instance pass of the feedback and accuracy shaders: position and UV only. The fragment
// shaders derive the mip level from UV derivatives, so nothing else is needed.
in vec3 in_position;
in vec2 in_uv;

uniform mat4 u_model;
uniform mat4 u_view_proj;

out vec2 v_uv;

void main() {
    v_uv = in_uv;
    gl_Position = u_view_proj * u_model * vec4(in_position, 1.0);
}
