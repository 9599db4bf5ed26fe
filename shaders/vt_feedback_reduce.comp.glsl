#version 430
// The virtual-texture feedback image reduced on the GPU to its unique tile keys and how many
// pixels wrote each (engine/gl/feedback_reduce.py runs it).
//
// Phase 0, one invocation a feedback pixel: its key (two words, RG32UI) goes into an open-
// addressing hash table with linear probing. A slot is claimed one word at a time with
// atomicCompSwap (high word, then low word): every word is written once, so every pixel of
// one key sees the same words on its probe path and stops in the same slot; the pixel count
// is an atomicAdd. Stored words carry bit 31 (a key's high word uses 24 bits, its low word
// 28), so 0 means an empty word; a pixel whose key has bit 31 set, or that finds no slot
// within MAX_PROBES, is counted as spilled and the caller reduces that frame on the CPU.
//
// Phase 1, one invocation a table slot: an occupied slot is appended to the list (an atomic
// counter in the list's header) and cleared, so the table is empty for the next frame.
layout(local_size_x = 64) in;

layout(std430, binding = 0) coherent buffer Table { uint table[]; };  // 4 words a slot
// Header: count, spilled pixels, 0, 0; then entries of low word, high word, pixels, 0.
layout(std430, binding = 1) coherent buffer List { uint list[]; };
layout(rg32ui, binding = 0) uniform readonly uimage2D u_feedback;

uniform int u_phase;
uniform uint u_slots;     // table slots
uniform uint u_entries;   // list entries after the header
uniform uvec2 u_size;     // feedback image size

const uint MARK = 0x80000000u;
const uint MAX_PROBES = 64u;

uint invocation() {
    return gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x
        + gl_GlobalInvocationID.x;
}

uint hash(uint hi, uint lo) {
    uint h = hi * 0x9E3779B1u ^ lo * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h;
}

void insert(uint p) {
    uvec2 key = imageLoad(u_feedback, ivec2(p % u_size.x, p / u_size.x)).xy;
    if (key.x == 0u && key.y == 0u) {
        return;
    }
    if (((key.x | key.y) & MARK) != 0u) {
        atomicAdd(list[1], 1u);
        return;
    }
    uint lo = key.x | MARK, hi = key.y | MARK;
    uint start = hash(hi, lo) % u_slots;
    for (uint n = 0u; n < min(u_slots, MAX_PROBES); ++n) {
        uint s = (start + n) % u_slots * 4u;
        uint got = atomicCompSwap(table[s], 0u, hi);
        if (got != 0u && got != hi) {
            continue;
        }
        got = atomicCompSwap(table[s + 1u], 0u, lo);
        if (got != 0u && got != lo) {
            continue;
        }
        atomicAdd(table[s + 2u], 1u);
        return;
    }
    atomicAdd(list[1], 1u);
}

void compact(uint s) {
    uint hi = table[s * 4u];
    if (hi == 0u) {
        return;
    }
    uint at = atomicAdd(list[0], 1u);
    if (at < u_entries) {
        uint e = 4u + at * 4u;
        list[e] = table[s * 4u + 1u] & ~MARK;
        list[e + 1u] = hi & ~MARK;
        list[e + 2u] = table[s * 4u + 2u];
    }
    table[s * 4u] = 0u;
    table[s * 4u + 1u] = 0u;
    table[s * 4u + 2u] = 0u;
}

void main() {
    uint i = invocation();
    if (u_phase == 0) {
        if (i < u_size.x * u_size.y) {
            insert(i);
        }
    } else if (i < u_slots) {
        compact(i);
    }
}
