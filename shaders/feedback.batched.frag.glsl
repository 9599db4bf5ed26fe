#version 450 core
// GPU feedback, batched: as feedback.frag.glsl (which explains the pass), with the albedo
// texture id from the object's row and its chain size from the texture rows (objects.glsl)
// instead of per-material uniforms.
#include "objects.glsl"

in vec2 v_uv;
flat in uint v_object;

uniform vec2 u_downscale;   // full-resolution pixels per feedback pixel, per axis

out uvec2 f_feedback;

void main() {
    ObjectData o = objects[v_object];
    vec2 duvx = dFdx(v_uv), duvy = dFdy(v_uv);
    int id = o.tex.x;
    if ((floatBitsToUint(o.params.w) & FLAG_ALBEDO) == 0u || id < 0) {
        f_feedback = uvec2(0u);  // no albedo: depth only (it still occludes)
        return;
    }
    vec2 chain = textures[id].lod.zw;
    vec2 dx = duvx * chain / u_downscale.x;
    vec2 dy = duvy * chain / u_downscale.y;
    float rho2 = max(dot(dx, dx), dot(dy, dy));
    float lod = max(0.5 * log2(max(rho2, 1e-12)), 0.0);
    f_feedback = uvec2(uint(id + 1), uint(floor(lod)));
}
