"""Cached values carried through slicing, stacking, expanding and renaming are never stale.

A cached tensor survives such an operation only when tracing proves its property mixes none of the
affected dims; otherwise it is dropped and recomputed on access.
"""

from dataclasses import dataclass
from functools import cached_property

from lazyphi import math
from lazyphi.math import Tensor, batch, spatial


@dataclass(frozen=True)
class Samples:
    x: Tensor

    @cached_property
    def centred(self) -> Tensor:  # mixes along batch
        return self.x - math.mean(self.x, batch)

    @cached_property
    def total(self) -> Tensor:  # reduces over batch
        return math.sum(self.x, batch)

    @cached_property
    def doubled(self) -> Tensor:  # element-wise along every dim
        return self.x * 2

    @cached_property
    def first(self) -> Tensor:  # picks one element along batch
        return self.x.b[0]


def computed(s: Samples) -> Samples:
    _ = s.centred, s.total, s.doubled, s.first
    return s


def cached(s) -> set:
    return {n for n in ('centred', 'total', 'doubled', 'first') if n in s.__dict__}


def test_slicing_keeps_only_values_of_properties_element_wise_along_the_sliced_dim():
    s = computed(Samples(math.random_normal(batch(b=8), spatial(x=3))))
    part = math.slice(s, {'b': slice(0, 4)})
    assert cached(part) == {'doubled'}
    fresh = Samples(part.x)
    for name in ('centred', 'total', 'doubled', 'first'):
        math.assert_close(getattr(part, name), getattr(fresh, name))
    along_x = math.slice(s, {'x': slice(0, 2)})
    assert cached(along_x) == {'centred', 'total', 'doubled', 'first'}  # nothing mixes along x


def test_stacking_and_expanding_drop_values_that_mix_along_the_new_dim():
    s = computed(Samples(math.random_normal(batch(b=4), spatial(x=3))))
    stacked = math.stack([s, s], batch('run'))
    assert cached(stacked) == {'doubled', 'first'}  # centred/total reduce over every batch dim, run included
    math.assert_close(stacked.total, Samples(stacked.x).total)
    no_batch = computed(Samples(math.random_normal(batch(b=4), spatial(x=3))))
    expanded = math.expand(no_batch, batch(copies=3))
    math.assert_close(expanded.total, Samples(expanded.x).total)


def test_renaming_drops_values_whose_property_refers_to_the_renamed_dim():
    s = computed(Samples(math.random_normal(batch(b=4), spatial(x=3))))
    renamed = math.rename_dims(s, 'b', 'c')
    assert 'first' not in cached(renamed)  # it selects along 'b' by name
    assert 'doubled' in cached(renamed)
