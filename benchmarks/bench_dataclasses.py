"""Time dataclass operations of lazyphi against phiml from the same run (when phiml is importable).

Cases, one function each, every one returning rows of (case, lazyphi seconds, phiml seconds or None):

* `replace`: `replace()` of one field of a frozen dataclass holding 10 computed cached properties,
  5 of which read the replaced field (so the other 5 are carried over);
* `stack`: `math.stack` of 1,000 instances of a frozen dataclass with two tensor fields, without
  and with a computed cached tensor property on each instance;
* `slice`: `obj[{'b': 3}]` of a `@sliceable` frozen dataclass holding a (b=100, x=1000) tensor, whose
  computed cached tensor property is sliced along instead of recomputed.

Target (issue: Dataclasses): no slower than phiml. Prints times and ratios; asserts nothing.

Usage: python benchmarks/bench_dataclasses.py [--quick]
"""

import dataclasses
import functools
import sys
import timeit

import numpy as np

from lazyphi import dataclasses as lazy_dc
from lazyphi import math
from lazyphi.math import Tensor, batch, spatial

try:
    import phiml.dataclasses as phi_dc
    import phiml.math as phi_math
except ImportError:
    phi_dc = phi_math = None

N_PROPERTIES = 10
N_STACKED = 1000


def per_call(fn, budget: float) -> float:
    """Best-of-5 seconds per call, with the repeat count chosen to fill about `budget` seconds."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    number = max(1, int(number * budget / 0.2 / 5))
    return min(timer.repeat(5, number)) / number


def _class_with_properties(cached, tensor_type):
    """A frozen dataclass with fields a, b and 10 cached properties: even ones read a, odd ones read b."""

    @dataclasses.dataclass(frozen=True)
    class Ten:
        a: tensor_type
        b: tensor_type

        @cached
        def p0(self):
            return self.a * 1

        @cached
        def p1(self):
            return self.b * 2

        @cached
        def p2(self):
            return self.a * 3

        @cached
        def p3(self):
            return self.b * 4

        @cached
        def p4(self):
            return self.a * 5

        @cached
        def p5(self):
            return self.b * 6

        @cached
        def p6(self):
            return self.a * 7

        @cached
        def p7(self):
            return self.b * 8

        @cached
        def p8(self):
            return self.a * 9

        @cached
        def p9(self):
            return self.b * 10

    return Ten


def bench_replace(budget: float) -> list:
    """replace() one field of an instance whose 10 cached properties are computed."""
    values = np.arange(100.)
    lazy_cls = _class_with_properties(lazy_dc.cached_property, Tensor)
    obj = lazy_cls(math.wrap(values, spatial('x')), math.wrap(values, spatial('x')))
    for i in range(N_PROPERTIES):
        getattr(obj, f'p{i}')
    new_a = math.wrap(values + 1, spatial('x'))
    kept = set(lazy_dc.cached_values(lazy_dc.replace(obj, a=new_a)))
    if len(kept) != N_PROPERTIES // 2:
        raise RuntimeError(f'lazyphi kept {sorted(kept)}, expected the 5 properties reading b')
    lazy = per_call(lambda: lazy_dc.replace(obj, a=new_a), budget)
    phi = None
    if phi_dc is not None:
        phi_cls = _class_with_properties(functools.cached_property, phi_math.Tensor)
        phi_obj = phi_cls(phi_math.wrap(values, phi_math.spatial('x')), phi_math.wrap(values, phi_math.spatial('x')))
        for i in range(N_PROPERTIES):
            getattr(phi_obj, f'p{i}')
        phi_new_a = phi_math.wrap(values + 1, phi_math.spatial('x'))
        phi = per_call(lambda: phi_dc.replace(phi_obj, a=phi_new_a), budget)
    return [(f'replace, {N_PROPERTIES} cached properties, 5 kept', lazy, phi)]


@dataclasses.dataclass(frozen=True)
class LazyBody:
    position: Tensor
    velocity: Tensor
    name: str = 'body'

    @lazy_dc.cached_property
    def momentum(self) -> Tensor:
        return self.velocity * 2


if phi_math is not None:
    @dataclasses.dataclass(frozen=True)
    class PhiBody:
        position: phi_math.Tensor
        velocity: phi_math.Tensor
        name: str = 'body'

        @functools.cached_property
        def momentum(self) -> phi_math.Tensor:
            return self.velocity * 2


def bench_stack(budget: float) -> list:
    """math.stack of 1,000 instances with two (x=3) tensor fields, without and with a computed cached property."""
    rng = np.random.default_rng(0)
    data = [(rng.normal(size=3), rng.normal(size=3)) for _ in range(N_STACKED)]
    rows = []
    for with_cache in (False, True):
        bodies = [LazyBody(math.wrap(p, spatial('x')), math.wrap(v, spatial('x'))) for p, v in data]
        if with_cache:
            for b in bodies:
                b.momentum  # noqa: B018
        lazy = per_call(lambda bodies=bodies: math.stack(bodies, batch('b')), budget)
        phi = None
        if phi_math is not None:
            phi_bodies = [PhiBody(phi_math.wrap(p, phi_math.spatial('x')), phi_math.wrap(v, phi_math.spatial('x')))
                          for p, v in data]
            if with_cache:
                for b in phi_bodies:
                    b.momentum  # noqa: B018
            phi = per_call(lambda phi_bodies=phi_bodies: phi_math.stack(phi_bodies, phi_math.batch('b')), budget)
        rows.append((f"stack {N_STACKED} instances{', cached property computed' if with_cache else ''}", lazy, phi))
    return rows


def _sliceable_body(sliceable, cached, tensor_type):
    @sliceable
    @dataclasses.dataclass(frozen=True)
    class Field:
        values: tensor_type

        @cached
        def smoothed(self):
            return (self.values * 2 + 1) ** 2

    return Field


def bench_slice(budget: float) -> list:
    """obj[{'b': 3}] of a sliceable instance (b=100, x=1000) with its cached tensor property computed."""
    values = np.random.default_rng(0).normal(size=(100, 1000))
    lazy_obj = _sliceable_body(lazy_dc.sliceable, lazy_dc.cached_property, Tensor)(
        math.wrap(values, batch('b'), spatial('x')))
    lazy_obj.smoothed  # noqa: B018
    if 'smoothed' not in vars(lazy_obj[{'b': 3}]):
        raise RuntimeError('lazyphi dropped the cached property when slicing')
    lazy = per_call(lambda: lazy_obj[{'b': 3}], budget)
    phi = None
    if phi_dc is not None and hasattr(phi_dc, 'sliceable'):
        phi_obj = _sliceable_body(phi_dc.sliceable, functools.cached_property, phi_math.Tensor)(
            phi_math.wrap(values, phi_math.batch('b'), phi_math.spatial('x')))
        phi_obj.smoothed  # noqa: B018
        phi = per_call(lambda: phi_obj[{'b': 3}], budget)
    return [("slice obj[{'b': 3}], cached property computed", lazy, phi)]


CASES = (bench_replace, bench_stack, bench_slice)


def _format(seconds: float) -> str:
    return f'{seconds * 1e6:10.1f} us' if seconds < 1e-3 else f'{seconds * 1e3:10.2f} ms'


def main() -> None:
    budget = 0.2 if '--quick' in sys.argv else 1.0
    print(f"{'case':50s} {'lazyphi':>13s} {'phiml':>13s} {'lazyphi/phiml':>14s}")
    for case in CASES:
        for name, lazy, phi in case(budget):
            ratio = f'{lazy / phi:14.2f}' if phi else f"{'n/a':>14s}"
            print(f"{name:50s} {_format(lazy)} {_format(phi) if phi else 'n/a':>13s} {ratio}")
    if phi_math is None:
        print('phiml is not installed: no comparison')


if __name__ == '__main__':
    main()
