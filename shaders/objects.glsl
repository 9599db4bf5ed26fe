// Per-object and per-texture data of the batched frame, written by the renderer in one
// buffer write a frame (engine/render/batch.py static_rows / texture_rows: keep in step).
// Row i of `objects` belongs to draw command i (its baseInstance), so the vertex shader finds
// its row as gl_BaseInstanceARB and hands the index to the fragment shader. Texture data is
// per texture id, not per object: what changes each frame while levels stream and fade in
// (min LOD, bindless handle) is written once per texture however many objects use it, and
// the object rows stay as they are until an object or material changes.
struct ObjectData {
    mat4 model;
    vec4 normal_col[3];   // normal matrix columns (xyz)
    vec4 albedo_factor;
    vec4 params;          // roughness, metalness, normal scale, flag bits (floatBitsToUint)
    vec4 emissive;        // xyz
    ivec4 tex;            // texture ids: albedo, normal, roughness-metal (-1: none)
    vec4 uv_row0;         // UV transform: u' = dot(row0.xyz, vec3(u, v, 1))
    vec4 uv_row1;         //               v' = dot(row1.xyz, vec3(u, v, 1))
};

struct TextureData {
    vec4 lod;             // x: min LOD clamp in the sampled texture's levels (-1000: none)
                          // y: finest chain level resident; zw: chain size (mip-debug view)
    uvec4 handle;         // xy: bindless handle (0: none); z: virtual-texture id + 1 (0: none)
};

layout(std430, binding = 0) readonly buffer Objects {
    ObjectData objects[];
};

layout(std430, binding = 1) readonly buffer Textures {
    TextureData textures[];
};

const uint FLAG_ALBEDO = 1u;
const uint FLAG_NORMAL = 2u;
const uint FLAG_RM = 4u;
