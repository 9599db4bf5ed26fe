#version 330 core
// One texture for text and shapes: glyph coverage in R; shapes sample a solid texel.
in vec2 v_uv;
in vec4 v_color;
uniform sampler2D u_font;
out vec4 f_color;
void main() {
    f_color = vec4(v_color.rgb, v_color.a * texture(u_font, v_uv).r);
}
