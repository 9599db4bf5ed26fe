#version 400 core
// Reference for the virtual-texture tests: the same quads sampled from a fully resident
// texture with GL's own trilinear filtering (its min LOD clamp set on the texture).
in vec2 v_uv;
flat in uint v_vt;
uniform sampler2D u_texture;
out vec4 f_color;

void main() {
    f_color = texture(u_texture, v_uv);
}
