#version 330 core
// GPU feedback: per fragment of a low-resolution pass, which albedo texture is sampled here and
// the chain level the hardware would pick for it at FULL render resolution.
// The pass is depth-tested, so occluded surfaces leave nothing behind; the CPU reduces the
// image to the finest level per texture. Texture id 0 means "no albedo" (texture-less
// materials still write depth, so they occlude): an integer target can only be cleared to 0
// portably through moderngl (its clear converts floats), so ids are stored as provider id + 1.
in vec2 v_uv;

uniform uint u_texture_id;  // provider id + 1, or 0 for a material without albedo
uniform vec2 u_chain_size;  // level 0 of the albedo chain, in texels
uniform vec2 u_downscale;   // full-resolution pixels per feedback pixel, per axis

out uvec2 f_feedback;

void main() {
    // A feedback pixel spans u_downscale full-resolution pixels, so its UV derivatives are
    // that many times larger: divide them back down (the same rho as mipdebug.glsl).
    vec2 dx = dFdx(v_uv * u_chain_size) / u_downscale.x;
    vec2 dy = dFdy(v_uv * u_chain_size) / u_downscale.y;
    float rho2 = max(dot(dx, dx), dot(dy, dy));
    float lod = max(0.5 * log2(max(rho2, 1e-12)), 0.0);
    f_feedback = uvec2(u_texture_id, uint(floor(lod)));
}
