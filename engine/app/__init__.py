"""The composition root: the frame loop, its hosts (headless, window), the memory reaction,
the provider registry and run settings. The only layer that knows all the others."""
