"""The engine's lab: benchmark suites, baselines, peer runners and the soak harness.

It lives beside the product, not in it: `engine` never imports it and the wheel does not ship
it; it uses the engine's public API only. Run it from a checkout of the repository:
`python -m lab bench [SUITE...] [--json OUT] [--quick]`, `python -m lab soak`, or one suite's
own command (`python -m lab.wall`, ...). Results and the H200 device scripts live in
benchmarks/. Every suite reports ratios measured side by side in one run (against a naive
path, a peer, or the hardware ceiling), with medians over repeats: these machines are shared
and noisy.
"""
