#version 330 core
// Tiles of a chunked scientific image (engine/science/gpu.py): each vertex carries its
// level-0 position, its texel position in its level, the whole-texel shift from the level
// to the tile's slot in the value cache, the tile's first and last texel in its level (for
// linear sampling), the channel it shows and, for BC4 slots (ENCODED 1), the slot's map
// from the normalised texel to the value. The shift is applied after rounding down, so
// every channel of a level picks the same texel at a pixel.
#define ENCODED 0
in vec2 in_world;
in vec2 in_texel;
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

void main() {
    vec2 p = (in_world - u_center) / (u_scale * 0.5 * u_screen);
    v_texel = in_texel;
    v_shift = ivec2(round(in_shift));
    v_tile = ivec4(round(in_tile));
    v_channel = int(in_channel + 0.5);
#if ENCODED
    v_range = in_range;
#endif
    gl_Position = vec4(p.x, -p.y, 0.0, 1.0);  // image rows go down, GL's y up
}
