#version 400 core
// Forward pass: metal-roughness GGX with normal maps, lit in linear space into an HDR target.
// Albedo textures are sRGB formats, so sampling returns linear values already.
#include "mipdebug.glsl"
#ifdef VT_SLOTS
#include "vt_sample.glsl"
#endif
#include "brdf.glsl"
#include "lighting.glsl"

in vec3 v_world;
in vec3 v_normal;
in vec2 v_uv;
in vec4 v_tangent;

uniform sampler2D u_albedo_tex;
uniform sampler2D u_normal_tex;
uniform sampler2D u_rm_tex;
uniform bool u_has_albedo;
uniform bool u_has_normal;
uniform bool u_has_rm;
uniform vec4 u_albedo_factor;
uniform float u_roughness;
uniform float u_metalness;
uniform float u_normal_scale;
uniform vec3 u_emissive;


uniform int u_view_mode;           // 0 lit, 1 mip debug
uniform vec2 u_albedo_chain_size;  // level 0 of the albedo chain, in texels
uniform float u_albedo_resident;   // finest chain level resident (min LOD)
// Virtual-texture id of each slot (-1: a plain texture on its unit): such a slot samples the
// page cache through vt_sample (below GLSL 4.00: the LOD from the footprint formula). Only
// in the program the renderer compiles with VT_SLOTS for materials with a virtual texture:
// llvmpipe runs both sides of a branch, so the plain program must not carry this code.
uniform int u_albedo_vt = -1;
uniform int u_normal_vt = -1;
uniform int u_rm_vt = -1;

vec4 sample_slot(sampler2D s, int vt, vec2 uv) {
#ifdef VT_SLOTS
    if (vt >= 0) return vt_sample(uint(vt), uv);
#endif
    return texture(s, uv);
}

out vec4 f_color;

void main() {
    vec4 albedo = u_albedo_factor;
    if (u_has_albedo) albedo *= sample_slot(u_albedo_tex, u_albedo_vt, v_uv);
    if (u_view_mode == 1) {
        f_color = u_has_albedo
            ? vec4(mip_debug_color(wanted_level(v_uv, u_albedo_chain_size), u_albedo_resident,
                                   albedo.rgb), 1.0)
            : vec4(vec3(0.3), 1.0);
        return;
    }
    float rough = u_roughness;
    float metal = u_metalness;
    if (u_has_rm) {
        vec3 rm = sample_slot(u_rm_tex, u_rm_vt, v_uv).rgb;
        rough *= rm.g;
        metal *= rm.b;
    }
    vec3 n = normalize(v_normal);
    if (!gl_FrontFacing) n = -n;
    if (u_has_normal) {
        vec3 t = normalize(v_tangent.xyz - n * dot(n, v_tangent.xyz));
        vec3 b = cross(n, t) * v_tangent.w;
        vec3 tn = sample_slot(u_normal_tex, u_normal_vt, v_uv).xyz * 2.0 - 1.0;
        tn.xy *= u_normal_scale;
        n = normalize(mat3(t, b, n) * tn);
    }
    vec3 color = shade(n, v_world, albedo.rgb, rough, metal, u_emissive);
    f_color = vec4(color, albedo.a);
}
