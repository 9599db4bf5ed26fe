// What both block encoders share: where a block's texels come from and where its words go.
//
// One invocation encodes one 4x4 block of one mip level of `src` (an RGBA8 texture read with
// texelFetch, so no filtering touches the texels). Blocks are numbered row by row from the
// level's top-left block; an invocation encodes block `first_block + gl_GlobalInvocationID.x`
// and writes it at `out_base + that number` of the output buffer, so a level encoded in bands
// of any size gives the same bytes as one dispatch. Texels past the level's edge repeat the
// last row and column (edge padding, as the CPU encoder pads).
layout(local_size_x = 64) in;

uniform sampler2D src;
uniform int level;        // mip level of src
uniform ivec2 size;       // that level's size in texels
uniform int blocks_x;     // blocks per row of the level
uniform int first_block;  // first block of this band
uniform int block_count;  // blocks in this band
uniform int out_base;     // where the level's block 0 goes in the output buffer (in blocks)
uniform int srgb_source;  // 1: src is an sRGB texture; texels are brought back to sRGB bytes

float to_srgb_byte(float c) {
    float s = c <= 0.0031308 ? c * 12.92 : 1.055 * pow(c, 1.0 / 2.4) - 0.055;
    return floor(clamp(s, 0.0, 1.0) * 255.0 + 0.5);
}

vec4 texel_bytes(ivec2 p) {
    vec4 t = texelFetch(src, min(p, size - 1), level);
    if (srgb_source == 1) {
        return vec4(to_srgb_byte(t.r), to_srgb_byte(t.g), to_srgb_byte(t.b),
                    floor(t.a * 255.0 + 0.5));
    }
    return floor(t * 255.0 + 0.5);
}

// Texel i (row-major in the block) of block `block`.
void load_block(int block, out vec4 px[16]) {
    ivec2 origin = ivec2(block % blocks_x, block / blocks_x) * 4;
    for (int i = 0; i < 16; ++i) {
        px[i] = texel_bytes(origin + ivec2(i & 3, i >> 2));
    }
}

// The principal axis of `n` points (power iteration on their covariance), unit length; a
// flat block gives the grey diagonal.
// The block this invocation encodes, its texels loaded into px; -1 past the band's end.
int this_block(out vec4 px[16]) {
    int local = int(gl_GlobalInvocationID.x);
    if (local >= block_count) return -1;
    load_block(first_block + local, px);
    return first_block + local;
}

// Least-squares endpoints from the sums over a block's texels of (1-w)^2, (1-w)w, w^2,
// (1-w)p and w p, clamped to bytes; false when the system is singular (keep the old ones).
bool solve_endpoints(float aa, float ab, float bb, vec4 ax, vec4 bx,
                     out vec4 e0, out vec4 e1) {
    float det = aa * bb - ab * ab;
    if (abs(det) < 1e-6) return false;
    e0 = clamp((bb * ax - ab * bx) / det, vec4(0.0), vec4(255.0));
    e1 = clamp((aa * bx - ab * ax) / det, vec4(0.0), vec4(255.0));
    return true;
}

vec4 principal_axis(vec4 px[16], bool use[16], vec4 mean, int channels) {
    mat4 cov = mat4(0.0);
    for (int i = 0; i < 16; ++i) {
        if (!use[i]) continue;
        vec4 d = px[i] - mean;
        if (channels == 3) d.w = 0.0;
        cov += outerProduct(d, d);
    }
    vec4 axis = vec4(1.0, 1.0, 1.0, channels == 3 ? 0.0 : 1.0);
    // start from the widest channel spread: power iteration then converges in few steps
    vec4 diag = vec4(cov[0][0], cov[1][1], cov[2][2], cov[3][3]);
    float widest = max(max(diag.x, diag.y), max(diag.z, diag.w));
    if (widest <= 0.0) return normalize(axis);
    axis = cov * (diag / widest + vec4(0.01));
    for (int k = 0; k < 8; ++k) {
        vec4 next = cov * axis;
        float len = length(next);
        if (len < 1e-12) break;
        axis = next / len;
    }
    float len = length(axis);
    return len > 1e-12 ? axis / len : normalize(vec4(1.0, 1.0, 1.0, channels == 3 ? 0.0 : 1.0));
}
