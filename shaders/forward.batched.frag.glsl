#version 450 core
// Batched forward pass, fragment stage: same lighting as forward.frag.glsl, with material
// parameters from the object's row. Textures come from bindless handles in the row when
// BINDLESS is defined (the renderer defines it after #version), else from the three units
// the renderer binds once per texture set.
#ifdef BINDLESS
#extension GL_ARB_bindless_texture : require
#endif
#ifdef LOD_CLAMP_EXT
#extension GL_ARB_sparse_texture_clamp : require
#endif
#include "objects.glsl"
#include "mipdebug.glsl"
// VT_SLOTS (defined by the renderer): bit s set when slot s (albedo, normal,
// roughness-metal) of some object is a virtual texture. Only those slots get vt_sample code:
// llvmpipe runs both sides of every branch with masks, so a slot's vt_sample would cost
// every pixel of the scene even where no object has a virtual texture there.
#ifndef VT_SLOTS
#define VT_SLOTS 0
#endif
#include "vt_sample.glsl"
#include "brdf.glsl"
#include "lighting.glsl"

in vec3 v_world;
in vec3 v_normal;
in vec2 v_uv;
in vec4 v_tangent;
flat in uint v_object;
flat in uvec3 v_vt;        // per slot: virtual-texture id + 1 (0: plain texture)
flat in vec2 v_vt_size[3]; // per slot: level-0 size (the LOD of a virtual slot)

#ifdef BINDLESS
#define ALBEDO_TEX sampler2D(textures[o.tex.x].handle.xy)
#define NORMAL_TEX sampler2D(textures[o.tex.y].handle.xy)
#define RM_TEX sampler2D(textures[o.tex.z].handle.xy)
#else
uniform sampler2D u_albedo_tex;
uniform sampler2D u_normal_tex;
uniform sampler2D u_rm_tex;
#define ALBEDO_TEX u_albedo_tex
#define NORMAL_TEX u_normal_tex
#define RM_TEX u_rm_tex
#endif

uniform int u_view_mode;       // 0 lit, 1 mip debug

out vec4 f_color;

// The streamer's fade-in clamp, in the shader: LOD = max(computed LOD, min_lod).
// With ARB_sparse_texture_clamp the sampler applies it itself (textureClampARB: exactly
// GL_TEXTURE_MIN_LOD's clamp, anisotropic filtering kept). Without, both gradients are
// scaled by 2^(min_lod - lod): that raises the LOD by exactly that much and keeps the
// footprint's shape, so anisotropic filtering still works (unlike textureLod); the LOD it
// starts from is textureQueryLod's, which a driver may compute slightly differently from
// its sampler (llvmpipe: a few pixels in a thousand differ while a level fades in).
vec4 sample_clamped(sampler2D s, vec2 uv, vec2 dx, vec2 dy, float min_lod) {
#ifdef LOD_CLAMP_EXT
    return textureClampARB(s, uv, min_lod);
#else
    float lod = textureQueryLod(s, uv).y;
    float k = exp2(max(min_lod - lod, 0.0));
    return textureGrad(s, uv, dx * k, dy * k);
#endif
}

// Every material texture read of the batched pass goes through these three. A slot whose
// texture is virtual (v_vt: vt id + 1) samples the page cache through vt_sample_at at the
// LOD main() found in uniform control flow (the driver's own, via the proxy): the same
// picture as the whole texture once its tiles are resident.
vec4 sample_albedo(ObjectData o, vec2 uv, vec2 dx, vec2 dy, vec3 vt_lod) {
    float min_lod = textures[o.tex.x].lod.x;
#if (VT_SLOTS & 1) != 0
    if (v_vt.x != 0u) return vt_sample_at(v_vt.x - 1u, uv, max(vt_lod.x, min_lod));
#endif
    return sample_clamped(ALBEDO_TEX, uv, dx, dy, min_lod);
}
vec4 sample_normal(ObjectData o, vec2 uv, vec2 dx, vec2 dy, vec3 vt_lod) {
    float min_lod = textures[o.tex.y].lod.x;
#if (VT_SLOTS & 2) != 0
    if (v_vt.y != 0u) return vt_sample_at(v_vt.y - 1u, uv, max(vt_lod.y, min_lod));
#endif
    return sample_clamped(NORMAL_TEX, uv, dx, dy, min_lod);
}
vec4 sample_rm(ObjectData o, vec2 uv, vec2 dx, vec2 dy, vec3 vt_lod) {
    float min_lod = textures[o.tex.z].lod.x;
#if (VT_SLOTS & 4) != 0
    if (v_vt.z != 0u) return vt_sample_at(v_vt.z - 1u, uv, max(vt_lod.z, min_lod));
#endif
    return sample_clamped(RM_TEX, uv, dx, dy, min_lod);
}

// A slot is sampled when the material has a texture there and (bindless) it has a handle.
bool has_texture(ObjectData o, uint flags, uint flag, int id) {
    if ((flags & flag) == 0u || id < 0) return false;
#ifdef BINDLESS
    return any(notEqual(textures[id].handle.xy, uvec2(0u))) || textures[id].handle.z != 0u;
#else
    return true;
#endif
}

void main() {
    ObjectData o = objects[v_object];
    uint flags = floatBitsToUint(o.params.w);
    vec2 dx = dFdx(v_uv), dy = dFdy(v_uv);
    // Virtual slots' LODs, here in uniform control flow (flat varyings, no storage reads).
    vec3 vt_lod = vec3(0.0);
#if (VT_SLOTS & 1) != 0
    vt_lod.x = vt_lod_implicit(v_uv, ivec2(v_vt_size[0]));
#endif
#if (VT_SLOTS & 2) != 0
    vt_lod.y = vt_lod_implicit(v_uv, ivec2(v_vt_size[1]));
#endif
#if (VT_SLOTS & 4) != 0
    vt_lod.z = vt_lod_implicit(v_uv, ivec2(v_vt_size[2]));
#endif
    vec4 albedo = o.albedo_factor;
    bool has_albedo = has_texture(o, flags, FLAG_ALBEDO, o.tex.x);
    if (has_albedo) albedo *= sample_albedo(o, v_uv, dx, dy, vt_lod);
    if (u_view_mode == 1) {
        vec4 t = has_albedo ? textures[o.tex.x].lod : vec4(0.0);
        f_color = has_albedo
            ? vec4(mip_debug_color(wanted_level(v_uv, t.zw), t.y, albedo.rgb), 1.0)
            : vec4(vec3(0.3), 1.0);
        return;
    }
    float rough = o.params.x;
    float metal = o.params.y;
    if (has_texture(o, flags, FLAG_RM, o.tex.z)) {
        vec3 rm = sample_rm(o, v_uv, dx, dy, vt_lod).rgb;
        rough *= rm.g;
        metal *= rm.b;
    }
    vec3 n = normalize(v_normal);
    if (!gl_FrontFacing) n = -n;
    if (has_texture(o, flags, FLAG_NORMAL, o.tex.y)) {
        vec3 t = normalize(v_tangent.xyz - n * dot(n, v_tangent.xyz));
        vec3 b = cross(n, t) * v_tangent.w;
        vec3 tn = sample_normal(o, v_uv, dx, dy, vt_lod).xyz * 2.0 - 1.0;
        tn.xy *= o.params.z;
        n = normalize(mat3(t, b, n) * tn);
    }
    vec3 color = shade(n, v_world, albedo.rgb, rough, metal, o.emissive.xyz);
    f_color = vec4(color, albedo.a);
}
