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

// Slot k's virtual-texture id + 1 and level-0 size; `by_flags`: leave out slots the object's
// flags switch off (the feedback pass only asks for tiles the forward pass will sample).
// Per slot, not through an `out` array parameter: NVIDIA's compiler refuses an output
// varying array as an out argument ("lvalue in assignment too complex").
bool slot_on(ObjectData o, int k, bool by_flags) {
    uint slot_flags[3] = uint[3](FLAG_ALBEDO, FLAG_NORMAL, FLAG_RM);
    return o.tex[k] >= 0 && (!by_flags || (floatBitsToUint(o.params.w) & slot_flags[k]) != 0u);
}

uint slot_vt(ObjectData o, int k, bool by_flags) {
    return slot_on(o, k, by_flags) ? textures[o.tex[k]].handle.z : 0u;
}

vec2 slot_vt_size(ObjectData o, int k, bool by_flags) {
    return slot_on(o, k, by_flags) ? textures[o.tex[k]].lod.zw : vec2(0.0);
}

flat out uvec3 v_vt;
flat out vec2 v_vt_size[3];

// Write every slot's virtual-texture varyings (assigned here, not passed as `out` arguments).
void write_slot_vts(ObjectData o, bool by_flags) {
    for (int k = 0; k < 3; ++k) {
        v_vt[k] = slot_vt(o, k, by_flags);
        v_vt_size[k] = slot_vt_size(o, k, by_flags);
    }
}
