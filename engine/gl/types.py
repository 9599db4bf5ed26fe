"""Names for the GL objects the device hands out, for type hints in the layers above.

Other layers hold and use objects the device made (programs, vertex arrays, framebuffers,
textures, buffers) but never import moderngl; they name the types through these aliases.
"""
from __future__ import annotations

import moderngl

Buffer = moderngl.Buffer
Framebuffer = moderngl.Framebuffer
Program = moderngl.Program
Renderbuffer = moderngl.Renderbuffer
Sampler = moderngl.Sampler
Texture = moderngl.Texture
VertexArray = moderngl.VertexArray
