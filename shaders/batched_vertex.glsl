// What the batched passes' vertex stages share: each draw's object row, found through its base
// instance (no per-object uniforms), the object's UV transform, and per texture slot the
// virtual-texture id + 1 (0: a plain texture) and level-0 size, as flat varyings, so that
// fragment stages find the LOD before they branch on storage-buffer data (vt_sample.glsl).
// Needs GL_ARB_shader_draw_parameters, enabled by the including stage.
#include "objects.glsl"

uint object_id() {
    return uint(gl_BaseInstanceARB + gl_InstanceID);
}

vec2 object_uv(ObjectData o, vec2 uv) {
    vec3 uv1 = vec3(uv, 1.0);
    return vec2(dot(o.uv_row0.xyz, uv1), dot(o.uv_row1.xyz, uv1));
}

// `by_flags`: leave out slots the object's flags switch off (the feedback pass only asks for
// tiles that the forward pass will sample).
void object_vt(ObjectData o, bool by_flags, out uvec3 vt, out vec2 size[3]) {
    uint flags = floatBitsToUint(o.params.w);
    uint slot_flags[3] = uint[3](FLAG_ALBEDO, FLAG_NORMAL, FLAG_RM);
    for (int k = 0; k < 3; ++k) {
        int t = o.tex[k];
        bool on = t >= 0 && (!by_flags || (flags & slot_flags[k]) != 0u);
        vt[k] = on ? textures[t].handle.z : 0u;
        size[k] = on ? textures[t].lod.zw : vec2(0.0);
    }
}
