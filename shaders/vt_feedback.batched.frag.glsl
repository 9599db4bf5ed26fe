#version 450 core
// Virtual-texture feedback of the batched scene pass (vertex stage feedback.batched.vert, shared with the mip feedback):
// per pixel the packed key of the tile the object's virtual texture needs
// (vt_feedback_key_at), 0 where the object has none. An object with several virtual slots
// (albedo, normal, roughness-metal) writes them in turn, one per 2x2 pixel quad of a pattern
// that rotates with the frame, so every slot is asked for. The LODs are taken first, in
// uniform control flow from flat varyings (see vt_sample_at in vt_sample.glsl).
#include "vt_sample.glsl"

in vec2 v_uv;
flat in uvec3 v_vt;
flat in vec2 v_vt_size[3];

uniform float u_vt_lod_bias;  // -log2(render size / this pass's size)
uniform int u_vt_frame;

out uvec2 f_key;

void main() {
    vec3 lod = vec3(vt_lod_implicit(v_uv, ivec2(v_vt_size[0])),
                    vt_lod_implicit(v_uv, ivec2(v_vt_size[1])),
                    vt_lod_implicit(v_uv, ivec2(v_vt_size[2]))) + u_vt_lod_bias;
    uint vts[3];
    float lods[3];
    int n = 0;
    for (int k = 0; k < 3; ++k) {
        if (v_vt[k] != 0u) {
            vts[n] = v_vt[k] - 1u;
            lods[n] = lod[k];
            ++n;
        }
    }
    if (n == 0) {
        f_key = uvec2(0u);  // nothing virtual: depth only (it still occludes)
        return;
    }
    ivec2 q = ivec2(gl_FragCoord.xy) / 2;
    int pick = (q.x + q.y + u_vt_frame) % n;
    f_key = vt_feedback_key_at(vts[pick], v_uv, lods[pick]);
}
