"""Operations along dims (sort, arg-extrema, quantiles, cumulative sums, dot) against NumPy on every backend;
the shapes they give over any choice of dims checked with hypothesis."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.backend import DType, default_backend
from lazyphi.math import Tensor, batch, channel, instance, spatial

pytestmark = pytest.mark.usefixtures('backend')
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NAMES = ('b', 'x', 'y')


def wrap(data, dims: str) -> Tensor:
    return math.wrap(default_backend().as_tensor(np.asarray(data)), dims)


@st.composite
def arrays(draw) -> np.ndarray:
    sizes = tuple(draw(st.integers(1, 4)) for _ in NAMES)
    values = draw(st.lists(st.integers(-20, 20), min_size=int(np.prod(sizes)), max_size=int(np.prod(sizes))))
    return np.asarray(values, np.float64).reshape(sizes)


def as_tensor(array: np.ndarray) -> Tensor:
    return wrap(array, 'b:b,x:s,y:s')


def test_sort_along_one_dim_drops_its_labels():
    t = wrap([[3, 2, 1], [-1, 5, 2]], 'b:b,x:s')
    assert math.sort(t).numpy('b,x').tolist() == [[1, 2, 3], [-1, 2, 5]]
    assert math.sort(t, 'b').numpy('b,x').tolist() == [[-1, 2, 1], [3, 5, 2]]
    labelled = math.wrap(default_backend().as_tensor(np.asarray([3, 1])), spatial(x='p,q'))
    assert math.sort(labelled).shape.get_item_names('x') is None
    assert math.sort(t, 'z') is t  # a dim it lacks: nothing to sort
    with pytest.raises(ValueError, match='one dim at a time'):
        math.sort(t, 'b,x')


def test_sort_a_tree_by_key_with_the_permutation():
    x = wrap([1, 3, 2, -1], 'x:s')
    result, permutation = math.sort((x * 10, range), key=x)
    assert result.numpy('x').tolist() == [-10, 10, 20, 30]
    assert permutation.numpy('x').tolist() == [3, 0, 2, 1] and permutation.dtype == DType(int, 64)


@given(array=arrays(), dims=st.lists(st.sampled_from(NAMES), unique=True, min_size=1).map(tuple))
@SETTINGS
def test_argmax_and_at_max_over_any_dims(array, dims):
    t = as_tensor(array)
    index = math.argmax(t, dims)
    dims = tuple(n for n in NAMES if n in dims)  # the index lists the dims in the tensor's order
    rest = [n for n in NAMES if n not in dims]
    assert index.shape.names == (*rest, 'index') and index.shape.get_item_names('index') == dims
    moved = np.moveaxis(array, [NAMES.index(d) for d in dims], range(len(rest), 3)).reshape(
        [array.shape[NAMES.index(n)] for n in rest] + [-1])
    flat = np.unravel_index(np.argmax(moved, -1), [array.shape[NAMES.index(d)] for d in dims])
    np.testing.assert_array_equal(index.numpy((*rest, 'index')), np.stack(flat, -1))
    np.testing.assert_array_equal(math.at_max(t, t, dims).numpy(rest), moved.max(-1))
    np.testing.assert_array_equal(math.max(-t, dims, key=-t).numpy(rest), -moved.min(-1))


def test_argmin_and_at_min_of_a_matrix():
    m = wrap([[1, 2], [4, 3]], 'row:c,~col:d')
    a = wrap([10, 20], '~col:d')
    assert math.argmin(m, '~col').numpy('row,index').tolist() == [[0], [1]]
    assert math.at_max(a, m, '~col').numpy('row').tolist() == [20, 10]
    assert math.min(m, '~col', key=m).numpy('row').tolist() == [1, 3]


@given(array=arrays(), dims=st.lists(st.sampled_from(NAMES), unique=True, min_size=1).map(tuple),
       q=st.lists(st.floats(0, 1), min_size=1, max_size=3))
@SETTINGS
def test_quantiles_over_any_dims(array, dims, q):
    t = as_tensor(array)
    rest = [n for n in NAMES if n not in dims]
    moved = np.moveaxis(array, [NAMES.index(d) for d in dims], range(len(rest), 3)).reshape(
        [array.shape[NAMES.index(n)] for n in rest] + [-1])
    result = math.quantile(t, q, dims)
    assert result.shape.names == ('quantiles', *rest) and result.dtype == DType(float, 32)
    np.testing.assert_allclose(result.numpy(('quantiles', *rest)), np.quantile(moved, q, axis=-1), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(math.median(t, dims).numpy(rest), np.median(moved, -1), rtol=1e-5, atol=1e-5)


def test_quantiles_as_a_tensor_list_their_dim():
    t = wrap([(1, 2, 3, 4), (6, 7, 8, 9)], 'batch:b,list:i')
    q = math.quantile(t, wrap([0.5, 0.6], 'q:c'))
    np.testing.assert_allclose(q.numpy('q,batch'), [[2.5, 7.5], [2.8, 7.8]], rtol=1e-6)
    with pytest.raises(ValueError, match=r'\[0, 1\]'):
        math.quantile(t, 1.5)


@given(array=arrays(), dim=st.sampled_from(NAMES), include_0=st.booleans(), include_sum=st.booleans())
@SETTINGS
def test_cumulative_sum_along_one_dim(array, dim, include_0, include_sum):
    t = as_tensor(array.astype(np.int32))
    axis = NAMES.index(dim)
    expected = np.cumsum(array, axis)
    if include_0:
        expected = np.concatenate([np.zeros_like(np.take(expected, [0], axis)), expected], axis)
    if not include_sum:
        expected = np.take(expected, range(expected.shape[axis] - 1), axis)
    result = math.cumulative_sum(t, dim, include_0=include_0, include_sum=include_sum)
    assert result.dtype == DType(int, 64) and result.shape.get_size(dim) == expected.shape[axis]
    np.testing.assert_array_equal(result.numpy(NAMES), expected)


def test_cumulative_sum_over_several_dims_follows_their_order():
    t = wrap([[1, 2], [3, 4]], 'y:s,x:s')
    assert math.cumulative_sum(t, 'y,x').numpy('y,x').tolist() == [[1, 3], [6, 10]]
    assert math.cumulative_sum(t, 'x,y').numpy('y,x').tolist() == [[1, 6], [4, 10]]
    assert math.cumulative_sum(t, 'y,x', include_0=True, include_sum=False).numpy('y,x').tolist() == [[0, 1], [3, 6]]
    with pytest.raises(ValueError, match='exactly one of'):
        math.cumulative_sum(t, 'x,y', include_0=True)
    indexed = math.cumulative_sum(t, 'x', index_dim='i')
    assert indexed.shape.get_item_names('i') == ('x',)


def test_dot_contracts_dims_and_keeps_shared_ones_as_batch():
    a = wrap(np.arange(24.).reshape(2, 3, 4), 'b:b,x:s,a:s')
    c = wrap(np.arange(20.).reshape(4, 5), 'c:s,y:s')
    result = math.dot(a, 'a', c, 'c')
    np.testing.assert_allclose(result.numpy('b,x,y'), np.einsum('bxa,ay->bxy', np.arange(24.).reshape(2, 3, 4),
                                                                np.arange(20.).reshape(4, 5)))
    d = wrap(np.arange(8.).reshape(2, 4), 'b:b,c:s')
    np.testing.assert_allclose(math.dot(a, 'a', d, 'c').numpy('b,x'),
                               np.einsum('bxa,ba->bx', np.arange(24.).reshape(2, 3, 4), np.arange(8.).reshape(2, 4)))
    missing = math.dot(wrap([1., 2.], 'b:b'), 'n', wrap([[3.]], 'n:c,i:c'), 'i')
    assert missing.shape == batch(b=2) & channel(n=1)
    with pytest.raises(math.IncompatibleShapes):
        math.dot(a, 'a', c, 'y')


def test_operations_along_dims_work_on_lazy_and_stacked_kinds():
    t = math.stack([wrap([3, 1, 2], 'x:s'), wrap([0, 5, 4], 'x:s')], instance('i'))
    assert math.sort(t, 'x').numpy('i,x').tolist() == [[1, 2, 3], [0, 4, 5]]
    expanded = math.expand(wrap([2, 1], 'x:s'), batch(b=3))
    assert math.argmax(expanded, 'x').numpy('b,index').tolist() == [[0]] * 3
