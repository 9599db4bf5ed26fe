"""A moderngl render engine that lives inside a GPU-memory budget."""
__version__ = "0.1.0"
