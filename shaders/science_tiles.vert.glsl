#version 330 core
// Tiles of a chunked scientific image (engine/science/gpu.py), one instance a tile piece:
// its level-0 rectangle, the same rectangle in its level's texels, the whole-texel shift
// from the level to the tile's slot in the value cache, the tile's first and last texel in
// its level (for linear sampling), the channel it shows and, for BC4 slots (ENCODED 1), the
// slot's map from the normalised texel to the value. The six vertices of its two triangles
// pick corners of the rectangles (no arithmetic: the texel positions stay those computed on
// the CPU). The shift is applied after rounding down, so every channel of a level picks the
// same texel at a pixel.
#define ENCODED 0
in vec4 in_world;   // x0, y0, x1, y1
in vec4 in_texel;   // x0, y0, x1, y1
in vec2 in_shift;
in vec4 in_tile;
in float in_channel;
#if ENCODED
in vec2 in_range;
flat out vec2 v_range;
#endif
uniform vec2 u_center;   // level-0 point at the screen centre
uniform float u_scale;   // level-0 pixels per screen pixel
uniform vec2 u_screen;   // screen size in pixels
out vec2 v_texel;
flat out ivec2 v_shift;
flat out ivec4 v_tile;
flat out int v_channel;

// the triangles (x0, y0) (x1, y0) (x1, y1) and (x0, y0) (x1, y1) (x0, y1)
const bool FAR_X[6] = bool[6](false, true, true, false, true, false);
const bool FAR_Y[6] = bool[6](false, false, true, false, true, true);

void main() {
    bool fx = FAR_X[gl_VertexID], fy = FAR_Y[gl_VertexID];
    vec2 world = vec2(fx ? in_world.z : in_world.x, fy ? in_world.w : in_world.y);
    vec2 p = (world - u_center) / (u_scale * 0.5 * u_screen);
    v_texel = vec2(fx ? in_texel.z : in_texel.x, fy ? in_texel.w : in_texel.y);
    v_shift = ivec2(round(in_shift));
    v_tile = ivec4(round(in_tile));
    v_channel = int(in_channel + 0.5);
#if ENCODED
    v_range = in_range;
#endif
    gl_Position = vec4(p.x, -p.y, 0.0, 1.0);  // image rows go down, GL's y up
}
