#version 330 core
// Mip accuracy, numerically: per pixel, the level the mip-debug view calls "wanted" (the very
// same function, so the numbers match its colours) and the resident min LOD of the texture.
// The CPU compares them (engine/streaming/accuracy.py). Alpha 0 marks pixels without albedo.
#include "mipdebug.glsl"

in vec2 v_uv;

uniform bool u_has_albedo;
uniform vec2 u_chain_size;  // level 0 of the albedo chain, in texels
uniform float u_resident;   // finest chain level the provider holds (min LOD)
uniform float u_top_level;  // levels - 1: the coarsest level there is

out vec4 f_levels;

void main() {
    f_levels = u_has_albedo
        ? vec4(wanted_level(v_uv, u_chain_size), u_resident, u_top_level, 1.0)
        : vec4(0.0);
}
