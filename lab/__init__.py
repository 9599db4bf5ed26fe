"""Benchmarks: `python -m lab bench [SUITE...] [--json OUT] [--quick]`.

Every suite reports ratios measured side by side in one run (against a naive path, a peer, or
the hardware ceiling), with medians over repeats: these machines are shared and noisy.
"""
