"""The examples, installed with the engine: `python -m engine.examples.view_jupyter photos/`
runs one from an installed package as `python examples/view_jupyter.py` does from a clone."""
