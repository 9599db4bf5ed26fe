"""Virtual texturing: tile-granular residency through one page cache and a shared page table.

Pure parts (tiles, page table, policy, requests) need no GL; `system.VirtualTextureSystem`
composes them with the I/O workers and the GL executor in engine/gl/vt.py.
See docs/virtual_texturing.md.
"""
