#version 400 core
// Textured quads for the virtual-texture test path: position, UV and the quad's texture id.
in vec3 in_position;
in vec2 in_uv;
in float in_vt;
uniform mat4 u_view_proj;
out vec2 v_uv;
flat out uint v_vt;

void main() {
    v_uv = in_uv;
    v_vt = uint(in_vt + 0.5);
    gl_Position = u_view_proj * vec4(in_position, 1.0);
}
