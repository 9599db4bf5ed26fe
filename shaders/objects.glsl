// Per-object data of the batched frame: one row per drawn object, written by the renderer
// in one buffer write a frame (engine/render/batch.py pack_rows: keep the two in step).
// Row i belongs to draw command i (its baseInstance), so the vertex shader finds its row as
// gl_BaseInstanceARB and hands the index to the fragment shader.
struct ObjectData {
    mat4 model;
    vec4 normal_col[3];   // normal matrix columns (xyz)
    vec4 albedo_factor;
    vec4 params;          // roughness, metalness, normal scale, flag bits (floatBitsToUint)
    vec4 emissive;        // xyz; w = finest albedo chain level resident (mip-debug view)
    vec4 min_lod;         // per slot (albedo, normal, rm): clamp in storage levels; -1000 none
    vec4 chain;           // xy: albedo chain size in texels (mip-debug view)
    uvec4 handles01;      // bindless handles: albedo (xy), normal (zw)
    uvec4 handles2;       // roughness-metal (xy)
    vec4 uv_row0;         // UV transform: u' = dot(row0.xyz, vec3(u, v, 1))
    vec4 uv_row1;         //               v' = dot(row1.xyz, vec3(u, v, 1))
};

layout(std430, binding = 0) readonly buffer Objects {
    ObjectData objects[];
};

const uint FLAG_ALBEDO = 1u;
const uint FLAG_NORMAL = 2u;
const uint FLAG_RM = 4u;
