"""`python -m lab bench | soak`: the benchmarks and the soak harness, under the engine's CLI rule
(engine.cli runs this `Program`: one-line user errors, --debug, signals)."""
from __future__ import annotations

from engine.cli import Program

from . import bench_command, soak_command

LAB = Program("python -m lab", "The engine's lab: benchmark suites and the soak harness, run "
                               "from a checkout of the repository.", (bench_command, soak_command))
