"""Every tensor kind gives the dense result, for every operation category and every reduction.

The same values are held as a `Dense` tensor and as each other kind (`Expanded`, `Stacked`, `Joined`,
`Layout` of Python numbers, and a non-uniform `Stacked` for reductions); each operation runs on both and
the results must agree.
This is the drift alarm for the one dispatch path: a kind that handles a category or a reduction
its own way (part by part, on an inner tensor) must agree with materialising first.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import Layout, batch, instance, spatial
from lazyphi.math.kinds import REDUCTIONS, Dense, Expanded, Joined, Stacked

DIMS = ('b', 'x', 'y')
TYPES = {'b': 'batch', 'x': 'spatial', 'y': 'spatial'}
KINDS = ('expanded', 'stacked', 'joined', 'layout')
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def dense(values: np.ndarray, names=DIMS) -> Dense:
    return math.wrap(values, ','.join(f'{n}:{TYPES[n][0]}' for n in names))


@st.composite
def values(draw, non_finite: bool = True) -> np.ndarray:
    sizes = tuple(draw(st.integers(1, 4)) for _ in DIMS)
    elements = st.floats(-10, 10, allow_nan=False, width=64)
    if non_finite:
        elements = st.one_of(elements, st.sampled_from([np.nan, np.inf, -np.inf]))
    flat = draw(st.lists(elements, min_size=int(np.prod(sizes)), max_size=int(np.prod(sizes))))
    return np.asarray(flat, dtype=np.float64).reshape(sizes)


@st.composite
def as_kind(draw, array: np.ndarray, kind: str):
    """(`array` held as the tensor kind `kind`, the same values as a Dense tensor)."""
    if kind == 'expanded':  # constant along the dims left out of the inner tensor
        kept = draw(st.lists(st.sampled_from(DIMS), unique=True, max_size=2))
        inner = array[tuple(slice(None) if n in kept else slice(0, 1) for n in DIMS)]
        inner_tensor = dense(inner.reshape([s for s, n in zip(inner.shape, DIMS, strict=True) if n in kept]),
                             [n for n in DIMS if n in kept])
        full = np.broadcast_to(inner, array.shape)
        return Expanded(inner_tensor, dense(full).shape), dense(full)
    if kind == 'layout':  # nested lists of Python numbers, one level per dim
        return Layout(array.tolist(), dense(array).shape), dense(array)
    dim = draw(st.sampled_from(DIMS))
    axis = DIMS.index(dim)
    if kind == 'stacked':  # parts without the dim, stacked along it
        rest = [n for n in DIMS if n != dim]
        parts = [dense(np.take(array, i, axis), rest) for i in range(array.shape[axis])]
        return Stacked(parts, dense(array).shape[dim]), dense(array)
    cuts = sorted(draw(st.lists(st.integers(1, max(1, array.shape[axis] - 1)), unique=True, max_size=2)))
    cuts = [c for c in cuts if 0 < c < array.shape[axis]]
    pieces = np.split(array, cuts, axis)
    assume(len(pieces) > 1)
    return Joined([dense(p) for p in pieces], dim), dense(array)


def assert_same(result, expected):
    assert result.shape.names == expected.shape.names or set(result.shape.names) == set(expected.shape.names)
    assert result.shape == expected.shape.only(result.shape.names, reorder=True) or \
        set(zip(result.shape.names, result.shape.sizes, strict=True)) == \
        set(zip(expected.shape.names, expected.shape.sizes, strict=True))
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    order = expected.shape.names
    np.testing.assert_allclose(result.numpy(order), expected.numpy(order), rtol=1e-9, atol=1e-9, equal_nan=True)


def dim_subsets():
    return st.lists(st.sampled_from(DIMS), unique=True, max_size=3).map(tuple)


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
@pytest.mark.parametrize('kind', KINDS)
@given(data=st.data())
@SETTINGS
def test_reduction(name, kind, data):
    array = data.draw(values(non_finite=name.startswith('finite')))
    if name in ('any', 'all'):
        array = array > 0
    elif name == 'prod':
        array = np.clip(array, -2, 2)
    with math.precision(64):
        tensor, reference = data.draw(as_kind(array, kind))
        dims = data.draw(dim_subsets())
        reduction = REDUCTIONS[name]
        assert_same(reduction(tensor, dims), reduction(reference, dims))


@pytest.mark.parametrize('name', sorted(REDUCTIONS))
@given(data=st.data())
@SETTINGS
def test_reduction_of_non_uniform_stack(name, data):
    """Parts of different sizes along x, stacked along s: reduce s and x together, compare with the values."""
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=3))
    assume(len(set(sizes)) > 1)
    finite = not name.startswith('finite')
    parts = [data.draw(st.lists(st.floats(-10, 10, allow_nan=False) if finite else
                                st.one_of(st.floats(-10, 10, allow_nan=False), st.sampled_from([np.nan, np.inf])),
                                min_size=n, max_size=n)) for n in sizes]
    arrays = [np.asarray(p, np.float64) for p in parts]
    if name in ('any', 'all'):
        arrays = [a > 0 for a in arrays]
    elif name == 'prod':
        arrays = [np.clip(a, -2, 2) for a in arrays]
    with math.precision(64):
        stacked = Stacked([math.wrap(a, spatial('x')) for a in arrays], batch(s=len(arrays)))
        assert not stacked.shape.is_uniform
        reduction = REDUCTIONS[name]
        result = reduction(stacked, ('s', 'x'))
        expected = reduction(math.wrap(np.concatenate(arrays), spatial('x')), ('x',))
        assert_same(result, expected)


def elementwise_ops(other):
    return {
        'add': lambda t: t + other,
        'mul_scalar': lambda t: t * 3.0,
        'sqrt_abs': lambda t: math.sqrt(math.abs(t)),
        'where': lambda t: math.where(t > 0, t, -t),
        'maximum': lambda t: math.maximum(t, other),
        'compare': lambda t: t >= other,
    }


@pytest.mark.parametrize('kind', KINDS)
@given(data=st.data())
@SETTINGS
def test_every_category(kind, data):
    array = data.draw(values(non_finite=False))
    with math.precision(64):
        tensor, reference = data.draw(as_kind(array, kind))
        shape = reference.shape
        other_dims = data.draw(st.lists(st.sampled_from(DIMS), unique=True, max_size=3))
        other = dense(np.random.default_rng(0).normal(size=[shape.get_size(n) for n in other_dims]), other_dims)
        dim = data.draw(st.sampled_from(DIMS))
        size = shape.get_size(dim)
        start = data.draw(st.integers(0, size - 1))
        index = math.wrap(np.asarray(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=4))),
                          instance('i'))
        operations = {
            **elementwise_ops(other),
            'slice': lambda t: t[{dim: slice(start, None)}],
            'index': lambda t: t[{dim: start}],
            'pick': lambda t: t[{dim: (start, 0)}],
            'rename': lambda t: math.rename_dims(t, dim, 'z'),
            'pack': lambda t: math.pack_dims(t, 'x,y', instance('p')),
            'transpose': lambda t: math.transpose(t, 'y,b,x'),
            'concat': lambda t: math.concat([t, t], dim),
            'stack': lambda t: math.stack([t, t], batch('s')),
            'fft': lambda t: math.fft(t, dim),
            'gather_tensor': lambda t: t[{dim: index}],
            # along dims (category ALONG)
            'sort': lambda t: math.sort(t, dim),
            'argmax': lambda t: math.argmax(t, dim),
            'quantile': lambda t: math.quantile(t, [0.25, 0.5], dim),
            'cumulative_sum': lambda t: math.cumulative_sum(t, dim, include_0=True),
            'dot': lambda t: math.dot(t, dim, other, dim) if dim in other.shape else math.dot(t, dim, t, dim),
            'scatter': lambda t: math.scatter(t, math.vec(**{dim: index}), 1.0, mode='add'),
            'histogram': lambda t: math.histogram(t, instance(bins=3))[0],
        }
        for name, operation in operations.items():
            try:
                assert_same(operation(tensor), operation(reference))
            except AssertionError as err:
                raise AssertionError(f'{name} on {type(tensor).__name__}: {err}') from err
