"""The composition root: the frame loop, the memory reaction, the provider registry and run
settings. The only layer that knows all the others; the hosts that drive its loop (headless,
window, Qt, canvases) sit above it, in engine.hosts."""
