"""Sparse tensors (`sparse_tensor`, formats, stored values and indices) against SciPy, NumPy and phiml, on every
backend: values stay sparse through the operations that keep zeros, and everything else sees the dense values."""

import pickle
import warnings
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import batch, channel, dual, instance, spatial

pytestmark = pytest.mark.usefixtures('backend')

ROWS, COLS = 4, 3
COORDS = [(2, 0), (0, 1), (2, 0), (1, 1), (3, 2)]  # (2, 0) twice: its values add up
VALUES = [1., 2., 3., 4., 5.]


def matrix(coords=COORDS, values=VALUES, fmt=None):
    indices = math.tensor(np.array(coords, dtype=np.int64).reshape(-1, 2), instance('nnz'), channel(idx='x,~y'))
    values = math.tensor(np.array(values, dtype=np.float32), instance('nnz'))
    return math.sparse_tensor(indices, values, spatial(x=ROWS) & dual(y=COLS), format=fmt)


def scipy_matrix(coords=COORDS, values=VALUES):
    from scipy.sparse import coo_matrix
    rows, cols = zip(*coords, strict=True) if coords else ((), ())
    return coo_matrix((values, (rows, cols)), shape=(ROWS, COLS))


def close(tensor, expected, order='x,~y'):
    np.testing.assert_allclose(math.dense(tensor).numpy(order), expected, rtol=1e-6, atol=1e-6)


def test_dense_adds_up_repeated_coordinates_as_scipy():
    m = matrix()
    assert math.is_sparse(m) and math.get_format(m) == 'coo' and not math.is_sparse(math.dense(m))
    close(m, scipy_matrix().toarray())


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, ROWS - 1), st.integers(0, COLS - 1)), max_size=12))
def test_random_coordinates_densify_and_sort_as_scipy(coords):
    values = list(np.arange(1., len(coords) + 1))
    m = matrix(coords, values)
    close(m, scipy_matrix(coords, values).toarray())
    csr = math.to_csr(m)
    reference = scipy_matrix(coords, values).tocsr()
    reference.sum_duplicates()
    rows = np.repeat(np.arange(ROWS), np.diff(reference.indptr))
    np.testing.assert_array_equal(math.stored_indices(csr).numpy('entries,index'),
                                  np.stack([rows, reference.indices], -1).reshape(-1, 2))
    np.testing.assert_allclose(math.stored_values(csr).numpy(), reference.data)
    close(csr, reference.toarray())


def test_formats_round_trip_and_sort_as_phiml():
    phiml = pytest.importorskip('phiml')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        pm = phiml.math
        theirs = pm.sparse_tensor(pm.tensor(COORDS, pm.instance('nnz'), pm.channel(idx='x,~y')),
                                  pm.tensor(VALUES, pm.instance('nnz')), pm.spatial(x=ROWS) & pm.dual(y=COLS))
        for fmt in ('coo', 'csr', 'csc'):
            ours, reference = math.to_format(matrix(), fmt), pm.to_format(theirs, fmt)
            assert math.get_format(ours) == pm.get_format(reference) == fmt
            expected_indices = pm.stored_indices(reference)
            assert math.stored_indices(ours).shape.get_item_names('index') == \
                expected_indices.shape.get_item_names('index')
            np.testing.assert_array_equal(math.stored_indices(ours).numpy('entries,index'),
                                          expected_indices.numpy('entries,index'))
            np.testing.assert_allclose(math.stored_values(ours).numpy(), pm.stored_values(reference).numpy())
            assert math.get_format(math.to_coo(ours)) == 'coo'
            close(ours, pm.dense(reference).numpy('x,~y'))


def test_dense_tensors_become_sparse_in_row_major_order():
    d = math.dense(matrix())
    for fmt, expected in (('coo', 'coo'), ('sparse', None), ('csc', 'csc'), ('compact-cols', 'compact-cols')):
        s = math.to_format(d, fmt)
        assert math.get_format(s) == (expected or ('csr' if d.backend.name in ('numpy', 'torch') else 'coo'))
        close(s, scipy_matrix().toarray())
    coo = math.to_coo(d)
    order = d.shape.names  # all dims of a dense tensor become sparse, its coordinates in row-major order
    indices = math.stored_indices(coo)
    assert indices.shape.get_item_names('index') == order
    np.testing.assert_array_equal(indices.numpy('entries,index'), np.stack(np.nonzero(d.numpy(order)), -1))
    assert math.to_format(matrix(), 'dense').shape == d.shape and math.sparse(matrix()) is not None
    assert math.get_format(math.to_compact_rows(d)) == 'compact-rows'
    assert math.get_format(math.to_csc(d)) == 'csc'


def test_stored_values_and_indices_of_dense_tensors_list_everything():
    d = math.tensor(np.arange(6.).reshape(2, 3), spatial('x,y'))
    np.testing.assert_allclose(math.stored_values(d).numpy(), np.arange(6.))
    np.testing.assert_array_equal(math.stored_indices(d).numpy('entries,index'),
                                  [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]])
    assert math.get_sparsity(d) == 1.
    assert math.get_sparsity(math.expand(d, batch(b=4))) == .25
    assert math.get_sparsity(matrix()) == 5 / 12
    with pytest.raises(ValueError, match='batch'):
        math.stored_indices(math.expand(d, batch(b=2))._dense())


def test_compress_as_phimls_test_coo_writes_it():
    """phiml's own `test_coo`: the matrix of a function, compressed along its rows, multiplies as before."""
    x = math.ones(spatial(x=5))
    coo, _ = math.matrix_from_function(math.laplace, x)
    csr = coo.compress(math.non_dual)
    math.assert_close(math.laplace(x), coo @ x, csr @ x)
    assert math.get_format(coo) == 'coo' and math.get_format(csr) == 'csr'
    csc = coo.compress(math.dual)
    assert math.get_format(csc) == 'csc' and math.get_format(coo.compress_cols()) == 'csc'
    assert math.get_format(coo.compress_rows()) == 'csr'
    math.assert_close(math.dense(csc), math.dense(coo))
    grid, _ = math.matrix_from_function(math.laplace, math.ones(spatial(x=3, y=2)))
    with pytest.raises(ValueError, match=r"select \['x'\]; lazyphi compresses all the rows"):
        grid.compress('x')


def test_repr_names_format_and_entry_count_without_densifying():
    huge = math.sparse_tensor(math.tensor([(1, 2)], instance('nnz'), channel(idx='x,~x')), 1.,
                              spatial(x=10 ** 6) & dual(x=10 ** 6))
    text = repr(huge)
    assert text.startswith('sparse coo') and '1 entries' in text
    assert repr(math.to_csr(matrix())).startswith('sparse csr')
    assert math.sparse_tensor(None, 1., spatial(x=3)).shape.get_size('x') == 3


def test_operations_keeping_zeros_stay_sparse():
    m, expected = matrix(), scipy_matrix().toarray()
    scale = math.tensor([1., 2., 3., 4.], spatial('x'))
    column = np.array([[1.], [2.], [3.], [4.]])
    for result, reference in ((-m, -expected), (abs(-m), expected), (m * 2, 2 * expected),
                              (m * scale, expected * column), (m / scale, expected / column),
                              (math.sqrt(m), np.sqrt(expected)), (m ** 2, expected ** 2), (m * m, expected ** 2),
                              (math.to_float(m), expected)):
        assert math.is_sparse(result)
        close(result, reference)
    plus = m + 1
    assert not math.is_sparse(plus)
    close(plus, expected + 1)


def test_reductions_over_value_and_sparse_dims():
    vectors = math.sparse_tensor(math.tensor([(0, 1), (2, 0)], instance('nnz'), channel(idx='x,~y')),
                                 math.tensor([[3., 4.], [6., 8.]], instance('nnz'), channel(vector='a,b')),
                                 spatial(x=ROWS) & dual(y=COLS))
    length = math.vec_length(vectors)
    assert math.is_sparse(length) and 'vector' not in length.shape
    close(length, [[0, 5, 0], [0, 0, 0], [10, 0, 0], [0, 0, 0]])
    expected = scipy_matrix().toarray()
    np.testing.assert_allclose(math.sum(matrix(), '~y').numpy('x'), expected.sum(1))
    np.testing.assert_allclose(math.sum(matrix(), 'x').numpy('~y'), expected.sum(0))
    np.testing.assert_allclose(float(math.sum(matrix())), expected.sum())
    np.testing.assert_allclose(math.max(matrix(), '~y').numpy('x'), expected.max(1))


def test_matrix_products_gather_and_add_up_as_scipy():
    m, reference = matrix(), scipy_matrix()
    y = np.array([1., -2., 3.])
    np.testing.assert_allclose((m @ math.tensor(y, spatial('y'))).numpy('x'), reference @ y, rtol=1e-6)
    batched = np.array([[1., -2., 3.], [0., 1., 2.]])
    result = m @ math.tensor(batched, batch('b'), spatial('y'))
    np.testing.assert_allclose(result.numpy('b,x'), (reference @ batched.T).T, rtol=1e-6)
    row = np.array([1., 2., 3., 4.])
    np.testing.assert_allclose(math.dot(math.tensor(row, spatial('x')), 'x', m, 'x').numpy('~y'), row @ reference,
                               rtol=1e-6)


def test_slicing_filters_entries():
    m, expected = matrix(), scipy_matrix().toarray()
    for selection, reference, order in (({'x': slice(1, 3)}, expected[1:3], 'x,~y'), ({'x': 2}, expected[2], '~y'),
                                        ({'~y': slice(1, None)}, expected[:, 1:], 'x,~y')):
        part = m[selection]
        assert math.is_sparse(part)
        close(part, reference, order)
    vectors = math.sparse_tensor(math.tensor([(0, 1)], instance('nnz'), channel(idx='x,~y')),
                                 math.tensor([[3., 4.]], instance('nnz'), channel(vector='a,b')),
                                 spatial(x=ROWS) & dual(y=COLS))
    close(vectors.vector['b'], [[0, 4, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]])


def test_jit_compiled_functions_take_and_return_sparse_tensors():
    @math.jit_compile
    def scaled_product(m, y):
        return m * 2, m @ y, math.dense(m)
    y = math.tensor([1., -2., 3.], spatial('y'))
    scaled, product, densified = scaled_product(matrix(), y)
    assert math.is_sparse(scaled)
    close(scaled, 2 * scipy_matrix().toarray())
    np.testing.assert_allclose(product.numpy('x'), scipy_matrix() @ [1., -2., 3.], rtol=1e-6)
    close(densified, scipy_matrix().toarray())


def test_bad_input_raises_value_errors():
    with pytest.raises(ValueError, match='format'):
        math.to_format(matrix(), 'bsr')
    with pytest.raises(ValueError, match='compact'):
        math.sparse_tensor(math.zeros(spatial(x=3), dtype=int), 1., spatial(x=3))
    with pytest.raises(ValueError, match='label'):
        math.sparse_tensor(math.tensor([(0, 1)], instance('nnz'), channel(idx='a,b')), 1., spatial(x=2) & dual(y=2))
    with pytest.raises(ValueError, match="along 'y' reach 2, outside 0 to 1"):
        math.sparse_tensor(math.tensor([(0, 1), (1, 2)], instance('nnz'), channel(idx='x,y')), 1., spatial(x=2, y=2))
    with pytest.raises(ValueError, match="along 'x' reach -1"):
        math.sparse_tensor(math.tensor([(-1, 0)], instance('nnz'), channel(idx='x,y')), 1., spatial(x=2, y=2))
    with pytest.raises(ValueError, match='invalid'):
        math.stored_values(matrix(), invalid='drop')
    with pytest.raises(ValueError, match='batch'):
        math.to_coo(math.zeros(batch(b=2), spatial(x=2)))


def test_tensor_like_replaces_the_stored_values():
    m = math.to_csr(matrix())
    like = math.tensor_like(m, math.tensor([1., 2., 3., 4.], instance('v')))
    assert math.is_sparse(like) and math.get_format(like) == 'csr'
    np.testing.assert_allclose(math.stored_values(like).numpy(), [1, 2, 3, 4])
    close(math.tensor_like(m, 1.), scipy_matrix().toarray() != 0)


def test_the_sparse_cells_of_phimls_matrices_notebook():
    indices = math.wrap([(0, 0), (1, 1)], instance('indices'), channel(vector='rows,~cols'))
    values = math.expand(math.wrap(1.), instance(indices))
    dense_shape = channel(rows=3) & dual(cols=3)
    matrix = math.sparse_tensor(indices, values, dense_shape, format='coo', can_contain_double_entries=False)
    for fmt in ('csr', 'csc'):
        assert math.get_format(math.sparse_tensor(indices, values, dense_shape, format=fmt)) == fmt
    row0 = matrix.rows[0:1] * 2
    joined = math.concat([row0, matrix.rows[1:]], 'rows')
    np.testing.assert_allclose(math.dense(joined).numpy('rows,~cols'), [[2, 0, 0], [0, 1, 0], [0, 0, 0]])


def test_solve_linear_iterates_with_the_sparse_product():
    idx = math.tensor([(0, 0), (1, 1), (2, 2), (0, 1), (1, 0)], instance('nnz'), channel(idx='x,~x'))
    m = math.sparse_tensor(idx, math.tensor([4., 4., 4., 1., 1.], instance('nnz')), spatial(x=3) & dual(x=3))
    y = math.tensor([1., 2., 3.], spatial('x'))
    x = math.solve_linear(m, y, math.Solve('CG', 1e-6, 1e-6, x0=math.zeros(spatial(x=3))))
    expected = np.linalg.solve([[4., 1., 0.], [1., 4., 0.], [0., 0., 4.]], [1., 2., 3.])
    np.testing.assert_allclose(x.numpy('x'), expected, rtol=1e-4)


def small(fmt):
    return math.to_format(math.tensor([[0, 1], [-1, 2], [0, 0]], channel('c'), dual('d')), fmt)


@pytest.mark.parametrize('fmt', ['coo', 'csr', 'csc'])
def test_min_max_mean_over_sparse_dims_see_only_stored_values_as_phiml(fmt):
    m = small(fmt)  # row 2 stores nothing: inf, -inf and NaN there, as phiml
    np.testing.assert_allclose(math.min(m, dual).numpy('c'), [1, -1, np.inf])
    np.testing.assert_allclose(math.max(m, dual).numpy('c'), [1, 2, -np.inf])
    np.testing.assert_allclose(math.mean(m, dual).numpy('c'), [1, .5, np.nan])
    np.testing.assert_allclose(math.min(m, channel).numpy('~d'), [-1, 1])
    np.testing.assert_allclose(math.mean(m, channel).numpy('~d'), [-1, 1.5])
    np.testing.assert_allclose(math.sum(m, channel).numpy('~d'), [-1, 3])
    assert float(math.mean(m)) == pytest.approx(2 / 3) and int(math.max(m)) == 2 and int(math.min(m)) == -1
    np.testing.assert_array_equal(math.any(m != 0, dual).numpy('c'), [True, True, False])
    phiml = pytest.importorskip('phiml')
    pm = phiml.math
    theirs = pm.to_format(pm.tensor([[0, 1], [-1, 2], [0, 0]], pm.channel('c'), pm.dual('d')), fmt)
    for ours, reference in ((math.min(m, dual), pm.min(theirs, pm.dual)), (math.max(m, channel),
                            pm.max(theirs, pm.channel)), (math.mean(m, dual), pm.mean(theirs, pm.dual))):
        np.testing.assert_allclose(ours.numpy(), reference.numpy())


def test_repeated_coordinates_add_up_before_max():
    np.testing.assert_allclose(math.max(matrix(), '~y').numpy('x'), [2, 4, 4, 5])  # (2, 0) holds 1 + 3
    np.testing.assert_allclose(math.mean(matrix(), 'x').numpy('~y'), [4, 3, 5])


def test_scatter_mean_into_a_new_grid_leaves_unreached_cells_nan():
    idx = math.tensor([0, 1, 1], instance('e'))
    result = math.scatter(spatial(x=3), {'x': idx}, math.tensor([1., 2., 4.], instance('e')), mode='mean')
    np.testing.assert_allclose(result.numpy(), [1, 3, np.nan])


@pytest.mark.parametrize('fmt', ['coo', 'csr', 'csc'])
def test_stack_concat_and_expand_of_one_pattern_stay_sparse(fmt):
    m = small(fmt)
    expected = np.array([[0, 1], [-1, 2], [0, 0]])
    stacked = math.stack([m, m * 2], channel(vector='x,y'))
    assert math.is_sparse(stacked) and math.get_format(stacked) == fmt
    close(stacked, np.stack([expected, 2 * expected]), 'vector,c,~d')
    expanded = math.expand(m, channel(vector=1))
    assert math.is_sparse(expanded) and expanded.shape.get_size('vector') == 1
    joined = math.concat([expanded, expanded * 3], 'vector')
    assert math.is_sparse(joined)
    close(joined, np.stack([expected, 3 * expected]), 'vector,c,~d')
    rows = math.concat([m.c[:1], m.c[1:]], 'c')
    assert math.is_sparse(rows) and math.get_format(rows) == 'coo'
    close(rows, expected, 'c,~d')
    other = math.to_format(math.tensor([[1, 0], [0, 0], [0, 3]], channel('c'), dual('d')), fmt)
    mixed = math.stack([m, other], batch('b'))  # different patterns: the values of both, as dense
    close(mixed, np.stack([expected, [[1, 0], [0, 0], [0, 3]]]), 'b,c,~d')


@pytest.mark.parametrize('kind', ['coo', 'csr', 'csc'])
def test_scipy_sparse_matrices_become_sparse_tensors_on_the_default_backend(kind):
    import scipy.sparse
    dense_values = np.array([[1, 0, 3], [0, 2, 0]])
    native = getattr(scipy.sparse, f'{kind}_matrix')(dense_values)
    t = math.tensor(native, channel('c') & dual)
    assert math.is_sparse(t) and math.get_format(t) == kind and t.dtype.kind is int
    assert t.backend is math.choose_backend_t(math.zeros()) and t.shape.get_size('~c') == 3
    close(t, dense_values, 'c,~c')
    np.testing.assert_allclose(math.sum(t, dual).numpy('c'), native.sum(1).A1)
    flags = math.tensor(getattr(scipy.sparse, f'{kind}_matrix')(dense_values != 0), channel('c') & dual)
    assert flags.dtype.kind is bool and math.dense(flags).dtype.kind is bool
    close(flags, dense_values != 0, 'c,~c')
    kept = math.wrap(native, '~cols,rows:i')  # rows along the primal dim, columns along the dual one, as phiml
    assert kept.backend.name == 'numpy' and kept.shape.get_size('rows') == 2 and kept.shape.get_size('~cols') == 3
    close(kept, dense_values, 'rows,~cols')
    both = math.wrap(native, 'rows:i,cols:c')
    close(both, dense_values, 'rows,cols')
    tall = np.arange(12).reshape(6, 2) % 5
    grid = math.tensor(getattr(scipy.sparse, f'{kind}_matrix')(tall), spatial(a=2, b=3) & dual('d'))
    close(grid, tall.reshape(2, 3, 2), 'a,b,~d')  # several dims on the row side: row-major
    with pytest.raises(ValueError, match='rows and columns'):
        math.tensor(native, spatial('x'))
    with pytest.raises(ValueError, match='has 2'):
        math.tensor(native, spatial(x=3) & dual('y'))


def test_stored_indices_of_a_lazily_expanded_tensor_list_all_its_coordinates():
    d = math.tensor(np.arange(6.).reshape(2, 3), spatial('x'), dual('x'))
    like = math.tensor_like(d, 1)
    np.testing.assert_array_equal(math.stored_indices(like).numpy('entries,index'),
                                  math.stored_indices(d).numpy('entries,index'))
    np.testing.assert_allclose(math.stored_values(like).numpy(), 1)


def products(m, t):
    """`m @ t` and `t`'s row through `m` (`dot` over `x`), the second where `t` has `x`."""
    return m @ t if 'y' in t.shape else math.dot(t, 'x', m, 'x')


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, ROWS - 1), st.integers(0, COLS - 1)), max_size=12),
       st.sampled_from(['y', 'x']), st.booleans(), st.booleans(), st.sampled_from([np.float32, np.float64]))
def test_products_with_dense_tensors_equal_the_dense_matrix_products(coords, side, batched, vector, dtype):
    values = list(np.linspace(-1, 2, len(coords)))
    m = matrix(coords, values)
    shape = (batch(b=2) if batched else math.EMPTY_SHAPE) & spatial(**{side: ROWS if side == 'x' else COLS}) & \
        (channel(v='a,b') if vector else math.EMPTY_SHAPE)
    t = math.tensor(np.random.default_rng(len(coords)).standard_normal(shape.sizes).astype(dtype), shape)
    found, expected = products(m, t), products(math.dense(m), t)
    assert found.shape == expected.shape and found.dtype == expected.dtype
    order = found.shape.names
    np.testing.assert_allclose(found.numpy(order), expected.numpy(order), rtol=1e-5, atol=1e-5)


def test_numpy_products_run_through_one_kept_scipy_matrix(backend):
    m, y = matrix(), math.tensor(np.array([1., -2., 3.], np.float32), spatial('y'))
    expected = scipy_matrix().toarray() @ [1., -2., 3.]
    with mock.patch('lazyphi.math._sparse_kind.gather_in_range', side_effect=AssertionError('gathered')) as gathered:
        if backend.name == 'numpy':
            np.testing.assert_allclose((m @ y).numpy('x'), expected, rtol=1e-6)
            np.testing.assert_allclose((m @ (2 * y)).numpy('x'), 2 * expected, rtol=1e-6)
            kept = m.host_csr(('x',), ('~y',), (m @ y).dtype)
            assert kept is m.host_csr(('x',), ('~y',), (m @ y).dtype) and kept.nnz == 4  # (2, 0) added up
        else:  # other backends gather and add up, where autodiff and compilers see the operations
            with pytest.raises(AssertionError, match='gathered'):
                m @ y
    assert gathered.called == (backend.name != 'numpy')


def test_products_of_integer_matrices_keep_integer_values():
    m = math.sparse_tensor(math.tensor([(0, 1), (1, 0), (1, 0)], instance('nnz'), channel(idx='x,~y')),
                           math.tensor([2, 3, 4], instance('nnz')), spatial(x=2) & dual(y=2))
    result = m @ math.tensor([5, 7], spatial('y'))
    assert result.dtype.kind is int
    np.testing.assert_array_equal(result.numpy('x'), [14, 35])


def test_products_with_matrices_of_batch_or_value_dims_add_up_per_entry():
    idx = math.tensor([(0, 1), (1, 0)], instance('nnz'), channel(idx='x,~y'))
    values = math.tensor([[1., 2.], [3., 4.]], instance('nnz'), batch('b'))
    m = math.sparse_tensor(idx, values, spatial(x=2) & dual(y=2))
    result = m @ math.tensor([5., 7.], spatial('y'))
    np.testing.assert_allclose(result.numpy('b,x'), [[7., 15.], [14., 20.]])


# --- phiml's three sparse classes ------------------------------------------------------------------------------


def test_each_format_has_phiml_class_and_pickles_as_it():
    classes = {'coo': math.SparseCoordinateTensor, 'csr': math.CompressedSparseMatrix,
               'csc': math.CompressedSparseMatrix, 'compact-cols': math.CompactSparseTensor,
               'compact-rows': math.CompactSparseTensor}
    for fmt, cls in classes.items():
        m = math.to_format(matrix(), fmt)
        assert type(m) is cls and math.is_sparse(m), fmt
        assert type(m * 2) is cls and type(math.stack([m, m * 2], channel(vector='a,b'))) is cls, fmt
        restored = pickle.loads(pickle.dumps(m))
        assert type(restored) is cls and math.get_format(restored) == fmt
        close(restored, scipy_matrix().toarray())


def test_compressed_sparse_matrix_from_pointers_as_scipy():
    from scipy.sparse import csr_matrix
    # rows 0 and 2 empty, row 3 with two entries; the last pointer is the number of entries
    data, columns, pointers = [1., 2., 3.], [1, 0, 2], [0, 0, 1, 1, 3]
    m = math.CompressedSparseMatrix(math.tensor(columns, instance('nnz')), math.tensor(pointers, instance('ptr')),
                                    math.tensor(np.float32(data), instance('nnz')), dual(y=COLS), spatial(x=ROWS))
    assert math.get_format(m) == 'csr' and isinstance(m, math.CompressedSparseMatrix)
    expected = csr_matrix((data, columns, pointers), shape=(ROWS, COLS)).toarray()
    close(m, expected)
    np.testing.assert_allclose((m @ math.tensor([1., 2., 3.], channel('y'))).numpy('x'), expected @ [1., 2., 3.])

    @math.jit_compile
    def product(columns, pointers, values, vector):  # the rows are computed from traced pointers
        return math.CompressedSparseMatrix(columns, pointers, values, dual(y=COLS), spatial(x=ROWS)) @ vector
    traced = product(math.tensor(columns, instance('nnz')), math.tensor(pointers, instance('ptr')),
                     math.tensor(np.float32(data), instance('nnz')), math.tensor([1., 2., 3.], channel('y')))
    np.testing.assert_allclose(traced.numpy('x'), expected @ [1., 2., 3.])
    by_columns = math.CompressedSparseMatrix(math.tensor(columns, instance('nnz')),
                                             math.tensor([0, 1, 2, 3], instance('ptr')),
                                             math.tensor(np.float32(data), instance('nnz')), spatial(x=ROWS),
                                             dual(y=COLS))
    assert math.get_format(by_columns) == 'csc'
    close(by_columns, csr_matrix((data, columns, [0, 1, 2, 3]), shape=(COLS, ROWS)).toarray().T)
    with pytest.raises(ValueError, match=r'compressed_dims.volume \+ 1 = 5'):
        math.CompressedSparseMatrix(math.tensor(columns, instance('nnz')), math.tensor([0, 3], instance('ptr')),
                                    math.tensor(data, instance('nnz')), dual(y=COLS), spatial(x=ROWS))
    with pytest.raises(ValueError, match='uncompressed_offset must be None'):
        math.CompressedSparseMatrix(math.tensor(columns, instance('nnz')), math.tensor(pointers, instance('ptr')),
                                    math.tensor(data, instance('nnz')), dual(y=COLS), spatial(x=ROWS), True, 2)


def test_compact_sparse_tensor_lists_the_entries_of_each_row():
    indices = math.tensor([(0, 2), (1, 2)], instance('row'), dual('col'))
    values = math.tensor(np.float32([(1, 2), (3, 4)]), instance('row'), dual('col'))
    m = math.CompactSparseTensor(indices, values, dual(col=3))
    assert math.get_format(m) == 'compact-cols' and set(m.shape.names) == {'row', '~col'}
    assert m.shape.get_size('~col') == 3 and m.shape.get_size('row') == 2
    expected = [[1., 0., 2.], [0., 3., 4.]]
    np.testing.assert_allclose(math.dense(m).numpy('row,~col'), expected)
    np.testing.assert_allclose((m @ math.tensor([2., 3., 4.], channel('col'))).numpy(), [10., 25.])
    np.testing.assert_allclose(math.max(m, '~col').numpy(), [2., 4.])  # over the stored values, as phiml
    created = math.sparse_tensor(math.tensor([[1], [0]], spatial('row'), dual('col')), 5., spatial(row=2) & dual(col=2))
    assert type(created) is math.CompactSparseTensor
    np.testing.assert_allclose(math.dense(created).numpy('row,~col'), [[0., 5.], [5., 0.]])
    two_row_dims = math.tensor(np.array([[[0], [2]], [[1], [1]]]), spatial('a,b'), dual('col'))
    expected = np.zeros((2, 2, 3))
    expected[0, 0, 0] = expected[0, 1, 2] = expected[1, 0, 1] = expected[1, 1, 1] = 1.
    np.testing.assert_allclose(math.dense(math.CompactSparseTensor(two_row_dims, 1., dual(col=3))).numpy('a,b,~col'),
                               expected)  # one value for all entries
    with pytest.raises(ValueError, match='compressed_dims must be one dim with its size'):
        math.CompactSparseTensor(indices, values, dual(col=3) & spatial(z=2))
    with pytest.raises(ValueError, match="along the compressed dim 'z'"):
        math.CompactSparseTensor(indices, values, spatial(z=3))


def test_sparsity_counts_what_is_stored_as_phiml():
    zeros = math.zeros(batch(b=4))
    stacked = math.stack([zeros, zeros + 1, zeros * 2], channel('vector'))
    assert math.get_sparsity(stacked) == .25  # three values stored, expanded along b
    np.testing.assert_allclose(stacked.numpy('b,vector'), [[0., 1., 0.]] * 4)
    assert math.get_sparsity(math.stack([math.tensor([1., 2.], spatial('x')), zeros], batch('s'))) == 1.
    assert math.get_sparsity(math.CompressedSparseMatrix(
        math.tensor([0, 1, 1], instance('nnz')), math.tensor([0, 1, 3], instance('ptr')), math.ones(instance(nnz=3)),
        spatial(x=10), spatial(y=2))) == 3 / 20
