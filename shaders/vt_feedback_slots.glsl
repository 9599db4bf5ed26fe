// The tile feedback of one pixel of an object with up to three virtual slots (albedo,
// normal, roughness-metal), shared by the batched pass (slots from flat varyings) and the
// per-object pass (slots from uniforms). Include after vt_sample.glsl.
// `vt[k]`: slot k's virtual-texture id + 1 (0: not virtual); `size[k]`: its level-0 size.
// An object with several virtual slots writes them in turn, one per 2x2 pixel quad of a
// pattern that rotates with the frame, so every slot is asked for. The LODs are taken first,
// in uniform control flow (see vt_sample_at in vt_sample.glsl). 0 where nothing is virtual
// (the pixel still writes depth, so it occludes).
uvec2 vt_feedback_slots(uvec3 vt, vec2 size[3], vec2 uv, float lod_bias, int frame) {
    vec3 lod = vec3(vt_lod_implicit(uv, ivec2(size[0])),
                    vt_lod_implicit(uv, ivec2(size[1])),
                    vt_lod_implicit(uv, ivec2(size[2]))) + lod_bias;
    uint vts[3];
    float lods[3];
    int n = 0;
    for (int k = 0; k < 3; ++k) {
        if (vt[k] != 0u) {
            vts[n] = vt[k] - 1u;
            lods[n] = lod[k];
            ++n;
        }
    }
    if (n == 0) {
        return uvec2(0u);
    }
    ivec2 q = ivec2(gl_FragCoord.xy) / 2;
    int pick = (q.x + q.y + frame) % n;
    return vt_feedback_key_at(vts[pick], uv, lods[pick]);
}
