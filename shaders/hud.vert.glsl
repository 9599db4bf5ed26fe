#version 330 core
// HUD vertices come in output pixels (origin top-left, y down), like the text layout.
in vec2 in_pos;
in vec2 in_uv;
in vec4 in_color;
uniform vec2 u_size;
out vec2 v_uv;
out vec4 v_color;
void main() {
    v_uv = in_uv;
    v_color = in_color;
    gl_Position = vec4(in_pos.x / u_size.x * 2.0 - 1.0, 1.0 - in_pos.y / u_size.y * 2.0, 0.0, 1.0);
}
