"""Time the code token of a typical class: what `plan` spends on covering the code and the values it reads.

The class has three cached or parallel properties, a helper method, two module-level helpers, a frozen dataclass
config, a dict and a SimpleNamespace of settings, a 64-element array and `@sliceable`. Prints the CPU time of one
`code_token` (best and median of 7 batches) and of one `plan` with its traces cached, and the time to tokenize a
global list of a million floats and a 256 MiB array (values cost what their size does).

Usage: python benchmarks/bench_code_token.py
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass

import numpy as np

from lazyphi import math
from lazyphi.dataclasses import cached_property, sliceable
from lazyphi.math import Tensor, batch
from lazyphi.parallel import MIXED, parallel_property, plan
from lazyphi.parallel._code import code_token, value_token


@dataclass(frozen=True)
class Physics:
    gravity: float = 9.81
    damping: float = 0.1


PHYSICS = Physics()
SETTINGS = {'order': 2, 'method': 'rk4', 'tol': 1e-6, 'weights': [0.1, 0.2, 0.3, 0.4]}
NS = types.SimpleNamespace(scale=2.0, shift=(1, 2, 3))
KERNEL = np.linspace(0, 1, 64)


def smooth(x):
    return x * KERNEL[3] + SETTINGS['weights'][1]


def energy(v):
    return 0.5 * smooth(v) ** 2 * PHYSICS.gravity


@sliceable
@dataclass(frozen=True)
class Model:
    positions: Tensor
    velocities: Tensor
    label: str = 'run'
    LIMITS = {'low': 0.0, 'high': 1.0}  # noqa: RUF012 - a class-level settings dict, as users write them

    def helper(self, x):
        return x * NS.scale

    @cached_property
    def kinetic(self) -> Tensor:
        return energy(self.velocities)

    @cached_property
    def potential(self) -> Tensor:
        return self.positions * PHYSICS.gravity + self.LIMITS['low']

    @parallel_property(requires=MIXED)
    def total(self) -> Tensor:
        return math.sum(self.helper(self.kinetic + self.potential), 'example')


def _cpu_seconds(function, repeat: int) -> float:
    start = time.process_time()
    for _ in range(repeat):
        function()
    return (time.process_time() - start) / repeat


def main() -> None:
    code_token(Model)
    runs = sorted(_cpu_seconds(lambda: code_token(Model), 300) for _ in range(7))
    print(f'code_token(Model): best {runs[0] * 1e6:.0f} us, median {runs[3] * 1e6:.0f} us (CPU time)')
    m = Model(math.random_normal(batch(example=64)), math.random_normal(batch(example=64)))
    plan(m, [Model.total])
    print(f'plan(m, [Model.total]), traces cached: {_cpu_seconds(lambda: plan(m, [Model.total]), 20) * 1e6:.0f} us')
    floats = [float(i) for i in range(1_000_000)]
    print(f'a list of 10^6 floats: {_cpu_seconds(lambda: value_token(floats), 1) * 1e3:.0f} ms')
    array = np.random.default_rng(0).random(2 ** 25)
    print(f'a 256 MiB array: {_cpu_seconds(lambda: value_token(array), 3) * 1e3:.0f} ms')


if __name__ == '__main__':
    main()
