// Virtual texture sampling through the page cache (see docs/virtual_texturing.md).
// Include after `#version 330` or later; from 4.00 on the level of detail is the driver's own
// (textureQueryLod), so the picture equals GL's trilinear filtering of the whole texture on
// every driver; 3.30 shaders get log2 of the footprint (exact maths, which drivers round
// differently: llvmpipe uses a piecewise-linear log2). The frame binds:
//   u_vt_table  R32UI page table (engine/streaming/virtual/pagetable.py): row 0 a
//               directory of chunks (word c = where the chunk of textures 2048c.. starts;
//               vt_base), per texture a descriptor ((width - 1) | levels << 24, (height - 1)
//               | wrap << 24, one level word per level), and blocks of entries only
//               for levels with a resident tile: a level word names a block (bits 0..26)
//               and the level it holds (27..31), its own or the finest coarser one with a
//               block. An entry: slot (bits 0..23) | level of the tile in that slot
//               (24..31); slot bit 23 set: a packed small level in a cell of the first slots.
//   u_vt_cache  the page cache: slots of VT_SLOT texels (payload VT_TILE + VT_BORDER each side),
//               sampled with GL_LINEAR at level 0 only; trilinear filtering is done here.
// vt_sample() takes derivatives: call it in uniform control flow (or use vt_sample_grad).
uniform usampler2D u_vt_table;
uniform sampler2D u_vt_cache;
uniform sampler2D u_vt_lod_proxy;  // 1x1, mipmapped filter: only asked for its LOD
uniform int u_vt_slots_x;        // slots per row of the cache
uniform vec2 u_vt_cache_texels;  // cache size in texels
uniform ivec4 u_vt_tail_base;    // first slot of each size class of packed small levels
uniform int u_vt_tail_block;     // block width: a class-k cell holds (block << k) + borders

const int VT_TILE = 128;
const int VT_BORDER = 4;
const int VT_SLOT = VT_TILE + 2 * VT_BORDER;

const int VT_TABLE_SHIFT = 11;  // rows of 2048 words (pagetable.py TABLE_WIDTH)
const uint VT_CHUNK_SHIFT = 11u;  // textures per directory chunk (pagetable.py CHUNK_TEXTURES)

uint vt_word(int i) {
    return texelFetch(u_vt_table, ivec2(i & ((1 << VT_TABLE_SHIFT) - 1), i >> VT_TABLE_SHIFT),
                      0).r;
}

// Where texture vt's range starts: row 0 names the directory chunk, the chunk the base.
int vt_base(uint vt) {
    return int(vt_word(int(vt_word(int(vt >> VT_CHUNK_SHIFT)))
                       + int(vt & ((1u << VT_CHUNK_SHIFT) - 1u))));
}

// A descriptor's size of level 0, level count and wrap rule.
ivec2 vt_size0(int base) {
    return ivec2(int(vt_word(base) & 0xFFFFFFu) + 1, int(vt_word(base + 1) & 0xFFFFFFu) + 1);
}
int vt_levels(int base) { return int(vt_word(base) >> 24); }
bool vt_repeat(int base) { return (vt_word(base + 1) >> 24) == 1u; }

// Texel position in a level of `ls` texels, with the sampler's wrap rule: repeat keeps the
// position in [0, ls) (the tile border holds the wrapped neighbours); clamp keeps it on
// texel centres, so the bilinear footprint never leaves the level.
vec2 vt_level_pos(vec2 uv, ivec2 ls, bool repeat_) {
    vec2 s = vec2(ls);
    return repeat_ ? (uv - floor(uv)) * s : clamp(uv * s, vec2(0.5), s - 0.5);
}

// Bilinear sample of chain level `level` (its finest resident ancestor when the tile is
// missing: the entry says which level its slot holds, and the UV is rescaled into it).
vec4 vt_sample_level(int base, ivec2 size0, bool repeat_, int level, vec2 uv) {
    ivec2 ls = max(size0 >> level, ivec2(1));
    vec2 p = vt_level_pos(uv, ls, repeat_);
    ivec2 grid = (ls + (VT_TILE - 1)) / VT_TILE;
    ivec2 t = min(ivec2(p) / VT_TILE, grid - 1);
    // The level's block, or the finest coarser level's when it has none: read the
    // ancestor's entry there (what this level's own entry would hold).
    uint lw = vt_word(base + 2 + level);
    int blk = int(lw >> 27);
    ivec2 bt = t, bgrid = grid;
    if (blk != level) {
        bgrid = (max(size0 >> blk, ivec2(1)) + (VT_TILE - 1)) / VT_TILE;
        bt = min(t >> (blk - level), bgrid - 1);
    }
    uint e = vt_word(int(lw & 0x7FFFFFFu) + bt.y * bgrid.x + bt.x);
    int slot = int(e & 0xFFFFFFu);
    int held = int(e >> 24);
    if (held != level) {
        // The ancestor the entry names: the tile index shifted by the level distance and
        // clamped to the coarser grid (a non-power-of-two level's last tile may have no
        // parent of its own), not the tile the UV falls in there: with sizes that do not
        // halve exactly the two can differ by a texel at a tile edge, which the border
        // holds.
        ls = max(size0 >> held, ivec2(1));
        p = vt_level_pos(uv, ls, repeat_);
        grid = (ls + (VT_TILE - 1)) / VT_TILE;
        t = min(t >> (held - level), grid - 1);
    }
    vec2 origin;
    if ((e & 0x800000u) != 0u) {
        // A packed small level: cell `slot & 0xFFFFF` of size class (slot >> 20) & 3, in
        // that class's slots at the start of the cache (tiles.py TAIL_CLASS_SHIFT).
        int k = (slot >> 20) & 3;
        int cell = slot & 0xFFFFF;
        int texels = (u_vt_tail_block << k) + 2 * VT_BORDER;
        int per_row = VT_SLOT / texels;
        int per_slot = per_row * per_row;
        int s = u_vt_tail_base[k] + cell / per_slot, c = cell % per_slot;
        origin = vec2(ivec2(s % u_vt_slots_x, s / u_vt_slots_x) * VT_SLOT
                      + ivec2(c % per_row, c / per_row) * texels + VT_BORDER);
    } else {
        origin = vec2(ivec2(slot % u_vt_slots_x, slot / u_vt_slots_x) * VT_SLOT + VT_BORDER);
    }
    return textureLod(u_vt_cache, (origin + p - vec2(t * VT_TILE)) / u_vt_cache_texels, 0.0);
}

// The level of detail of trilinear filtering from explicit gradients: log2 of the longer
// screen-space footprint axis in level-0 texels.
float vt_lod(vec2 dx, vec2 dy, ivec2 size0) {
    vec2 s = vec2(size0);
    vec2 a = dx * s, b = dy * s;
    return 0.5 * log2(max(max(dot(a, a), dot(b, b)), 1e-20));
}

// The level of detail the driver itself would use for a texture of `size0` texels at `uv`
// (implicit derivatives: uniform control flow). Scaling the UV by the texture's size and
// asking a 1x1 texture is exact: the LOD is a function of the scaled derivatives only.
float vt_lod_implicit(vec2 uv, ivec2 size0) {
#if __VERSION__ >= 400
    return textureQueryLod(u_vt_lod_proxy, uv * vec2(size0)).y;
#else
    return vt_lod(dFdx(uv), dFdy(uv), size0);
#endif
}

// Trilinear sample at level of detail `lambda` (clamped to the texture's levels).
vec4 vt_sample_lod(int base, ivec2 size0, int levels, bool repeat_, vec2 uv, float lambda) {
    lambda = clamp(lambda, 0.0, float(levels - 1));
    int l0 = int(floor(lambda));
    float f = lambda - float(l0);
    vec4 a = vt_sample_level(base, size0, repeat_, l0, uv);
    if (f > 0.0) {
        a = mix(a, vt_sample_level(base, size0, repeat_, min(l0 + 1, levels - 1), uv), f);
    }
    return a;
}

// vt_sample with explicit gradients and a minimum level of detail (GL_TEXTURE_MIN_LOD).
vec4 vt_sample_grad(uint vt, vec2 uv, vec2 dx, vec2 dy, float min_lod) {
    int base = vt_base(vt);
    ivec2 size0 = vt_size0(base);
    return vt_sample_lod(base, size0, vt_levels(base), vt_repeat(base), uv,
                         max(vt_lod(dx, dy, size0), min_lod));
}

// The drop-in for texture(sampler, uv) on a virtual texture, with a minimum LOD.
vec4 vt_sample_min(uint vt, vec2 uv, float min_lod) {
    int base = vt_base(vt);
    ivec2 size0 = vt_size0(base);
    float lambda = vt_lod_implicit(uv, size0);
    return vt_sample_lod(base, size0, vt_levels(base), vt_repeat(base), uv,
                         max(lambda, min_lod));
}

vec4 vt_sample(uint vt, vec2 uv) {
    return vt_sample_min(vt, uv, 0.0);
}

// Trilinear sample at a level of detail found elsewhere (vt_lod_implicit on the texture's
// size in uniform control flow): for shaders that branch per object before sampling. On
// llvmpipe a helper pixel of a quad that straddles a triangle edge reads zeros from storage
// buffers, so derivatives taken after a branch on storage-buffer data are wrong there.
vec4 vt_sample_at(uint vt, vec2 uv, float lambda) {
    int base = vt_base(vt);
    return vt_sample_lod(base, vt_size0(base), vt_levels(base), vt_repeat(base), uv, lambda);
}

// The feedback key (low word, high word) at a level of detail found elsewhere (bias
// included): see vt_sample_at.
uvec2 vt_feedback_key_at(uint vt, vec2 uv, float lod) {
    int base = vt_base(vt);
    ivec2 size0 = vt_size0(base);
    int levels = vt_levels(base);
    bool repeat_ = vt_repeat(base);
    float lambda = clamp(lod, 0.0, float(levels - 1));
    int level = int(floor(lambda));
    ivec2 ls = max(size0 >> level, ivec2(1));
    ivec2 grid = (ls + (VT_TILE - 1)) / VT_TILE;
    ivec2 t = min(ivec2(vt_level_pos(uv, ls, repeat_)) / VT_TILE, grid - 1);
    return uvec2((uint(level) << 24) | (uint(t.y) << 12) | uint(t.x), vt + 1u);
}

// What the feedback pass writes for one pixel: the tile the finer level of this lookup
// reads, packed as engine/streaming/virtual/keys.py pack does (low word: level, tile y and
// x; high word: vt + 1), into an RG32UI target. `lod_bias` is
// -log2(downscale) for a pass drawn at 1/downscale of the output resolution.
uvec2 vt_feedback_key(uint vt, vec2 uv, float lod_bias) {
    int base = vt_base(vt);
    ivec2 size0 = vt_size0(base);
    return vt_feedback_key_at(vt, uv, vt_lod_implicit(uv, size0) + lod_bias);
}
