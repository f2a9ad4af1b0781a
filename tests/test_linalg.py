"""Matrices over named dims: `@`, `svd`, `fit_hyperplane`, `eigenvalues`, `matrix_rank`, `with_diagonal`,
`factor_ilu` and `matrix_from_function`, on every backend."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import IncompatibleShapes, batch, channel, dual, instance, matrix_from_function, spatial, stack, wrap

RNG = np.random.default_rng(7)


# --- @ ---------------------------------------------------------------------------------------------------------

def test_matmul_sums_each_dual_dim_with_its_primal_dim(backend):
    a, v = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 5))
    matrix = math.tensor(a, channel('c'), dual('d'))
    vectors = math.tensor(v, channel('d'), batch('b'))
    result = matrix @ vectors
    assert set(result.shape.names) == {'c', 'b'}
    np.testing.assert_allclose(result.numpy('c,b'), a @ v, rtol=1e-5)


def test_matmul_pairs_all_dual_dims_with_the_one_dim_of_a_vector(backend):
    a, v = RNG.normal(size=(3, 2, 2)), RNG.normal(size=4)
    matrix = math.tensor(a, channel('c'), dual('x,y'))
    result = matrix @ math.tensor(v, instance('points'))
    np.testing.assert_allclose(result.numpy('c'), a.reshape(3, 4) @ v, rtol=1e-5)


def test_matmul_without_dual_dims_is_a_dot_product_over_shared_channels_else_a_product(backend):
    x, y = RNG.normal(size=3), RNG.normal(size=3)
    assert float(math.tensor(x, channel('v')) @ math.tensor(y, channel('v'))) == pytest.approx(x @ y, rel=1e-5)
    product = math.tensor(x, channel('v')) @ math.tensor(y, instance('i'))
    np.testing.assert_allclose(product.numpy('v,i'), np.outer(x, y), rtol=1e-6)


def test_matmul_of_square_matrices_keeps_the_rows_of_the_left_and_the_columns_of_the_right(backend):
    a, b = RNG.normal(size=(2, 3, 3)), RNG.normal(size=(3, 3))
    left = math.tensor(a, batch('m'), spatial('x'), dual('x'))
    right = math.tensor(b, spatial('x'), dual('x'))
    product = left @ right  # (x, ~x) @ (x, ~x), as phiml multiplies square matrices
    assert product.shape == batch(m=2) & spatial(x=3) & dual(x=3)
    np.testing.assert_allclose(product.numpy('m,x,~x'), a @ b, rtol=1e-5, atol=1e-6)
    chained = right @ right @ math.tensor(b[0], spatial('x'))
    np.testing.assert_allclose(chained.numpy('x'), b @ b @ b[0], rtol=1e-5, atol=1e-6)


def test_matmul_refuses_what_does_not_pair():
    with pytest.raises(IncompatibleShapes, match='none of the dims'):
        math.zeros(channel(c=2), dual(d=3)) @ math.zeros(channel(e=2), instance(i=2))
    with pytest.raises(IncompatibleShapes, match='no dual dims'):
        math.zeros(spatial(x=2)) @ math.zeros(spatial(x=2))
    with pytest.raises(TypeError, match='needs two tensors'):
        math.zeros(dual(d=2)) @ np.zeros(2)


# --- svd -------------------------------------------------------------------------------------------------------

def test_svd_as_phiml_prints_it(backend):
    """phiml's own example: a matrix with a dual dim, its factors multiplied back with `@`."""
    mat = math.randn(channel(c=3), dual(d=2))
    lat, s, conv = math.svd(mat)
    assert lat.shape.names == ('~d', 'singular') and s.shape.names == ('singular',)
    assert set(conv.shape.names) == {'~singular', 'c'}
    math.assert_close(mat, conv @ (lat * s), rel_tolerance=1e-5, abs_tolerance=1e-5)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 3))
def test_svd_gives_numpys_singular_values_and_rebuilds_every_matrix(rows, columns, matrices):
    values = RNG.normal(size=(matrices, rows, columns))
    x = math.tensor(values, batch('m'), instance('rows'), channel('cols'))
    latents, singular, features = math.svd(x)
    k = min(rows, columns)
    assert latents.shape.get_size('singular') == singular.shape.get_size('singular') == k
    np.testing.assert_allclose(singular.numpy('m,singular'), np.linalg.svd(values, compute_uv=False), rtol=1e-5,
                               atol=1e-6)
    math.assert_close(features @ (latents * singular), x, abs_tolerance=1e-5)


def test_svd_truncates_to_the_size_of_the_latent_dim_and_warns_where_too_few_exist(backend):
    x = math.randn(instance(items=6), channel(features=4))
    _, singular, features = math.svd(x, latent_dim=channel(singular=2))
    assert singular.shape.get_size('singular') == 2 and features.shape.get_size('~singular') == 2
    with pytest.warns(UserWarning, match='asks for 9 singular values but there are 4'):
        math.svd(x, latent_dim=channel(singular=9))


def test_svd_of_rows_of_non_uniform_length_as_phiml_prints_it():
    matrix = stack([
        math.random_normal(instance(voxels=3), spatial(x=2, y=2)),
        math.random_normal(instance(voxels=5), spatial(x=2, y=2)),
    ], batch('example'))
    latents, s, v = math.svd(matrix, 'x,y', 'example,voxels', 'singular')
    assert {'example', 'voxels', 'singular'} <= set(latents.shape.names)
    assert 'singular' in s.shape and {'~singular', 'x', 'y'} <= set(v.shape.names)
    for i, voxels in enumerate((3, 5)):  # one decomposition of all 8 rows: each row is rebuilt from its latents
        part = latents.example[i]
        assert part.shape.get_size('voxels') == voxels
        math.assert_close(v @ (part * s), matrix.example[i], abs_tolerance=1e-5)


def test_svd_refuses_dims_it_cannot_find():
    x = math.zeros(instance(i=3), channel(c=2))
    with pytest.raises(ValueError, match=r'feature_dim=.*selects none'):
        math.svd(x, feature_dim='z')
    with pytest.raises(ValueError, match=r'list_dim=.*selects none'):
        math.svd(x, list_dim='z')


# --- fit_hyperplane --------------------------------------------------------------------------------------------

def test_fit_hyperplane_as_phiml_prints_it(backend):
    x = math.random_normal(instance(batch=20), channel(vector='x0,x1')) + (1, 1)  # noqa: RUF005 (a tensor plus a vector)
    y = math.stack([0.8 * x[0] - x[1] + 1, -0.8 * x[0]], channel(features='y0,y1'))
    w, b = math.fit_hyperplane(x, y, 'batch')
    math.assert_close(w, wrap([(0.8, -1), (-0.8, 0)], channel(y), channel(x)), abs_tolerance=1e-3)
    math.assert_close(b, wrap((1, 0), channel(y)), abs_tolerance=1e-3)


def test_fit_hyperplane_weighs_each_point_as_numpys_weighted_least_squares(backend):
    points, values, weights = RNG.normal(size=(30, 3)), RNG.normal(size=30), RNG.uniform(0.1, 2, size=30)
    slope, offset = math.fit_hyperplane(math.tensor(points, instance('p'), channel('v')),
                                        math.tensor(values, instance('p')), weights=math.tensor(weights, instance('p')))
    rows = np.concatenate([points, np.ones((30, 1))], 1) * np.sqrt(weights)[:, None]
    expected = np.linalg.lstsq(rows, values * np.sqrt(weights), rcond=None)[0]
    np.testing.assert_allclose(slope.numpy('v'), expected[:3], rtol=1e-3, atol=1e-4)
    assert float(offset) == pytest.approx(expected[3], rel=1e-3, abs=1e-4)


def test_fit_hyperplane_refuses_what_is_not_a_set_of_points():
    x = math.zeros(instance(p=5), channel(v=2))
    with pytest.raises(ValueError, match='point_dim'):
        math.fit_hyperplane(x, math.zeros(instance(p=5)), point_dim='q')
    with pytest.raises(ValueError, match='one channel dim'):
        math.fit_hyperplane(math.zeros(instance(p=5)), math.zeros(instance(p=5)))
    with pytest.raises(ValueError, match="components' dim"):
        math.fit_hyperplane(x, x)


# --- matrix_from_function ------------------------------------------------------------------------------------

def test_matrix_from_function_as_phimls_example_prints_it(backend):
    def f(x):
        return math.rename_dims(x, 'x', 'y')
    mat, _ = math.matrix_from_function(f, math.zeros(spatial(x=3)))
    assert dual(mat) == dual(x=3) and spatial(mat) == spatial(y=3)
    np.testing.assert_array_equal(mat.numpy('y,~x'), np.eye(3))


def test_matrix_from_function_of_a_function_reducing_with_a_dim_filter_as_phimls_notebooks_write_it(backend):
    def neighbor_mean(grid):  # phiml's N_Dimensional and Examples notebooks
        left, right = math.shift(grid, (-1, 1), padding=math.extrapolation.PERIODIC)
        return math.mean([left, right], math.non_spatial)  # also reduces dims the function is not given
    mat, _ = math.matrix_from_function(neighbor_mean, math.zeros(spatial(x=5)))
    assert mat.shape == dual(x=5) & spatial(x=5)
    expected = (np.roll(np.eye(5), 1, axis=1) + np.roll(np.eye(5), -1, axis=1)) / 2
    np.testing.assert_allclose(mat.numpy('x,~x'), expected)
    grid = math.random_normal(spatial(x=3, y=4))
    mat_2d, _ = math.matrix_from_function(neighbor_mean, math.zeros(spatial(x=3, y=4)))
    math.assert_close(mat_2d @ grid, neighbor_mean(grid), abs_tolerance=1e-6)


def test_matrix_from_function_of_a_function_building_from_the_inputs_whole_shape(backend):
    """phiml's Matrices notebook, as written (`math.range(x.shape)` cannot take the basis vectors' numbering)."""
    example_input = math.zeros(channel(vector=3))

    def mask_first(x, n: int):
        one_hot = math.range(x.shape) == n
        return x * one_hot

    matrix, bias = matrix_from_function(mask_first, example_input, n=2)
    math.print(matrix)
    np.testing.assert_array_equal(matrix.numpy('vector,~vector'), np.diag([0., 0., 1.]))
    math.assert_close(bias, 0)

    def broken(x, n: int):
        return x * math.wrap([1., 2.], channel('vector'))  # an error of the function itself still reaches the caller
    with pytest.raises(IncompatibleShapes, match="'vector' has size 3 in one and 2"):
        matrix_from_function(broken, example_input, n=2)


def test_the_matrix_and_bias_of_an_affine_function_give_its_values_back(backend):
    kernel = math.tensor(RNG.normal(size=3), spatial('x'))
    weights = math.tensor(RNG.normal(size=(2, 4)), channel('c'), channel('vector'))
    offset = math.tensor([1., -1.], channel('c'))

    def affine(u, scale, offset=0.):
        return math.convolve(u, kernel, 'same', 0) @ weights * scale + offset

    u = math.tensor(RNG.normal(size=(2, 6, 4)), batch('b'), spatial('x'), channel('vector'))
    matrix, bias = math.matrix_from_function(affine, u, 3., offset=offset, debug_checks=True)
    # one sparse matrix for every batch entry, as phiml's; the bias has the batch dims of the input
    assert math.is_sparse(matrix) and set(dual(matrix).names) == {'~x', '~vector'}
    assert set(matrix.shape.names) - set(dual(matrix).names) == {'x', 'c'} and set(bias.shape.names) == {'b', 'x', 'c'}
    math.assert_close(matrix @ u + bias, affine(u, 3., offset), rel_tolerance=1e-4, abs_tolerance=1e-4)
    # the matrix acts on any input of that shape: it depends on the function only
    other = math.tensor(RNG.normal(size=(2, 6, 4)), batch('b'), spatial('x'), channel('vector'))
    math.assert_close(matrix @ other + bias, affine(other, 3., offset), rel_tolerance=1e-4, abs_tolerance=1e-4)


def _laplace_matrix(nx: int, ny: int) -> np.ndarray:
    """The 5-point Laplace stencil with zero boundaries on an nx x ny grid, rows and columns in row-major order."""
    def second_differences(n):
        return np.diag(np.full(n, -2.)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    return np.kron(second_differences(nx), np.eye(ny)) + np.kron(np.eye(nx), second_differences(ny))


def test_matrix_from_function_of_a_stencil_is_sparse_and_built_from_bounded_batches_of_basis_vectors(backend,
                                                                                                     monkeypatch):
    from lazyphi.math import _linalg
    monkeypatch.setattr(_linalg, '_PROBED_VALUES', 200)  # 200 // 48 = 4 basis vectors per call
    probed = []

    def laplace(x):
        probed.append(x.shape.volume)
        return math.laplace(x, padding=0)
    x = math.random_normal(batch(b=2), spatial(x=6, y=8))
    matrix, bias = math.matrix_from_function(laplace, x)
    assert math.is_sparse(matrix) and math.get_format(matrix) == 'coo'
    assert matrix.shape == spatial(x=6, y=8) & dual(x=6, y=8) and bias.shape == x.shape
    expected = _laplace_matrix(6, 8)
    assert math.stored_values(matrix).shape.volume == np.count_nonzero(expected)
    np.testing.assert_allclose(math.dense(matrix).numpy('x,y,~x,~y').reshape(48, 48), expected)
    # never the whole identity at once: 4 columns sampled alone, then 2 x 9 colour probes and a random one, at most 4
    # vectors a call
    assert max(probed) <= 200 and len(probed) > 6
    math.assert_close(matrix @ x + bias, math.laplace(x, padding=0), abs_tolerance=1e-5)
    compressed, _ = math.matrix_from_function(laplace, x, auto_compress=True)
    assert math.get_format(compressed) == 'csr'
    math.assert_close(math.dense(compressed), math.dense(matrix))


def test_matrix_from_function_agrees_with_phiml_on_a_grid_operator(backend):
    phiml = pytest.importorskip('phiml.math')

    def operator(m, x):
        shifted = m.shift(x, (1,), 'x', padding=0, stack_dim=None)[0]
        return m.laplace(x, padding=m.extrapolation.PERIODIC) - 0.5 * shifted
    values = RNG.normal(size=(5, 4))
    matrix, _ = math.matrix_from_function(lambda x: operator(math, x), math.tensor(values, spatial('x,y')))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # phiml's tracer warns about its own internals
        expected, _ = phiml.matrix_from_function(lambda x: operator(phiml, x),
                                                 phiml.tensor(values, phiml.spatial('x,y')))
    expected = phiml.dense(expected).numpy('x,y,~x,~y')
    np.testing.assert_allclose(math.dense(matrix).numpy('x,y,~x,~y'), expected, atol=1e-6)
    assert math.stored_values(matrix).shape.volume == np.count_nonzero(expected)  # the nonzero entries only


def _counting(f):
    """`f`, counting the vectors it is applied to (the size of the dim numbering them, else 1) in `.vectors`."""
    def counted(x):
        counted.vectors += x.shape.batch.volume
        return f(x)
    counted.vectors = 0
    return counted


@pytest.mark.parametrize('padding', ['zero', 'periodic'])
def test_a_stencil_on_a_grid_takes_a_few_coloured_probes_instead_of_one_per_element(backend, padding):
    nx, ny = 24, 20
    x = math.random_normal(spatial(x=nx, y=ny))
    extrapolation = 0 if padding == 'zero' else math.extrapolation.PERIODIC

    def stencil(u):  # not symmetric: a drift along x besides the Laplace operator
        return math.laplace(u, padding=extrapolation) + 0.5 * math.shift(u, (1,), 'x', padding=extrapolation,
                                                                             stack_dim=None)[0]
    counted = _counting(stencil)
    matrix, _ = math.matrix_from_function(counted, x)
    assert math.is_sparse(matrix) and counted.vectors < 200  # 49 columns alone, 2 x 9 colours, a check: not 480
    expected = _stencil_matrix(nx, ny, padding == 'periodic')
    np.testing.assert_allclose(math.dense(matrix).numpy('x,y,~x,~y').reshape(nx * ny, nx * ny), expected, atol=1e-6)
    assert math.stored_values(matrix).shape.volume == np.count_nonzero(expected)


def _stencil_matrix(nx: int, ny: int, periodic: bool) -> np.ndarray:
    """The matrix of `laplace(u) + 0.5 * u[x + 1]` on an nx x ny grid (zero or periodic boundaries), row-major."""
    def shift(n, k):
        return np.roll(np.eye(n), k, axis=1) if periodic else np.eye(n, k=k)

    def second_differences(n):
        return shift(n, 1) + shift(n, -1) - 2 * np.eye(n)
    return np.kron(second_differences(nx), np.eye(ny)) + np.kron(np.eye(nx), second_differences(ny)) + \
        0.5 * np.kron(shift(nx, 1), np.eye(ny))


def test_a_coupling_beyond_the_sampled_reach_is_caught_and_every_column_probed_alone(backend):
    """One row reads an element six cells away, which the columns probed alone do not show: the coloured probes
    would add it to the column of the same colour beside that row; the weighted check sees that."""
    nx, ny = 24, 20
    row = math.tensor(np.eye(nx)[3][:, None] * np.eye(ny)[7][None, :], spatial('x,y'))

    def stencil(u):
        return math.laplace(u, padding=0) + 0.25 * row * u.x[9].y[7]
    counted = _counting(stencil)
    matrix, _ = math.matrix_from_function(counted, math.zeros(spatial(x=nx, y=ny)))
    expected = _laplace_matrix(nx, ny)
    expected[3 * ny + 7, 9 * ny + 7] += 0.25
    np.testing.assert_allclose(math.dense(matrix).numpy('x,y,~x,~y').reshape(nx * ny, nx * ny), expected, atol=1e-6)
    assert counted.vectors >= nx * ny  # every column alone after the failed check


def test_a_large_matrix_with_many_nonzero_entries_is_dense(backend):
    """Coordinates of all 1600^2 entries would take several times the memory of the dense matrix; a small matrix
    stays sparse whatever its share of nonzero entries, as phiml's."""
    def spread(x):
        return x + math.mean(x, 'x,y')
    small, _ = math.matrix_from_function(spread, math.zeros(spatial(x=4, y=3)))
    assert math.is_sparse(small)
    np.testing.assert_allclose(math.dense(small).numpy('x,y,~x,~y').reshape(12, 12), np.eye(12) + 1 / 12, rtol=1e-6)
    large, _ = math.matrix_from_function(spread, math.zeros(spatial(x=40, y=40)))
    assert not math.is_sparse(large)
    np.testing.assert_allclose(large.numpy('x,y,~x,~y').reshape(1600, 1600), np.eye(1600) + 1 / 1600, rtol=1e-5)


def test_a_function_whose_matrix_differs_per_batch_entry_gives_a_dense_matrix_per_entry(backend):
    scale = math.tensor([2., 3.], batch('b'))
    matrix, _ = math.matrix_from_function(lambda x: x * scale, math.ones(spatial(x=3)))
    assert not math.is_sparse(matrix) and set(matrix.shape.names) == {'b', 'x', '~x'}
    np.testing.assert_allclose(matrix.numpy('b,x,~x'), [2 * np.eye(3), 3 * np.eye(3)])


def test_derivatives_reach_the_other_arguments_through_the_sparse_matrix(backend):
    if backend.name == 'numpy':
        pytest.skip('NumPy has no automatic differentiation')

    def total(weight):
        matrix, _ = math.matrix_from_function(lambda x, w: math.laplace(x, padding=0) * w, math.ones(spatial(x=4)),
                                              weight)
        return math.sum(math.dense(matrix) ** 2)
    weight = math.tensor(1.5)
    value, derivative = math.gradient(total, 'weight', get_output=True)(weight)
    squares = 4 * 2 ** 2 + 6  # the 1-D stencil: -2 on the diagonal, 1 beside it
    assert abs(float(value) - squares * 1.5 ** 2) < 1e-4 and abs(float(derivative) - 2 * squares * 1.5) < 1e-4


def test_a_stencil_that_is_not_affine_fails_the_random_check_of_the_colour_probes(backend):
    # |laplace| looks linear on the colour probes (sums of basis vectors, weighted by positive factors), not on the
    # random input probed with them: the matrix is then built dense, from f on the whole identity
    matrix, _ = math.matrix_from_function(lambda x: abs(math.laplace(x, padding=0)), math.zeros(spatial(x=12, y=12)))
    assert not math.is_sparse(matrix)
    np.testing.assert_allclose(matrix.numpy('x,y,~x,~y').reshape(144, 144), np.abs(_laplace_matrix(12, 12)))


def test_debug_checks_catch_a_function_that_is_not_affine(backend):
    def square(x):
        return x * x
    x = math.range(spatial(x=3)) + 1.
    with pytest.raises(ValueError, match="square is not affine in 'x'"):
        math.matrix_from_function(square, x, debug_checks=True)
    math.matrix_from_function(lambda x: x * 2 + 1, x, debug_checks=True)


def test_the_target_backend_holds_the_matrix_and_bias():
    matrix, bias = math.matrix_from_function(lambda x: x * 2, math.ones(spatial(x=3)), target_backend='numpy')
    assert matrix.backend.name == bias.backend.name == 'numpy'
    np.testing.assert_array_equal(matrix.numpy('x,~x'), 2 * np.eye(3))


def test_auxiliary_args_name_the_arguments_passed_on_as_given(backend):
    def f(coefficients, x):
        return x * coefficients
    c = math.tensor([2., 3.], spatial('x'))
    matrix, bias = math.matrix_from_function(f, c, math.ones(spatial(x=2)), auxiliary_args='coefficients')
    np.testing.assert_allclose(matrix.numpy('x,~x'), np.diag([2., 3.]))
    np.testing.assert_allclose(bias.numpy('x'), 0)


@pytest.mark.parametrize('call, error, message', [
    (lambda f, x: math.matrix_from_function(f, x, x, auxiliary_args=''), ValueError, 'exactly one argument'),
    (lambda f, x: math.matrix_from_function(f, 1.), ValueError, 'must be a Tensor'),
    (lambda f, x: math.matrix_from_function(f, x, auxiliary_args=['y']), TypeError, 'comma-separated str'),
    (lambda f, x: math.matrix_from_function(f, x, x, x), TypeError, '3 positional arguments'),
    (lambda f, x: math.matrix_from_function(f, math.zeros(dual(x=2))), ValueError, 'dual dims already'),
])
def test_matrix_from_function_names_bad_arguments(call, error, message):
    def f(x, y=None):
        return x * 2
    with pytest.raises(error, match=message):
        call(f, math.zeros(spatial(x=2)))


# --- eigenvalues, matrix_rank, with_diagonal ---------------------------------------------------------------------

def phiml_math():
    """phiml.math where it is installed, to compare with; its import and calls warn about things lazyphi ignores."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return pytest.importorskip('phiml.math')


def ordered(values: np.ndarray) -> np.ndarray:
    """Eigenvalues in one order (libraries list them in their own): by real part, then imaginary part."""
    return np.sort_complex(np.round(values, 4))


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 5), st.integers(1, 3))
def test_eigenvalues_are_numpys_for_every_matrix_of_a_batch(size, matrices):
    values = RNG.normal(size=(matrices, size, size))
    result = math.eigenvalues(math.tensor(values, batch('m'), instance('i'), dual('i')))
    assert result.shape == batch(m=matrices) & channel(eigenvalues=size) and result.dtype.kind is complex
    found = result.numpy('m,eigenvalues')
    for m in range(matrices):
        np.testing.assert_allclose(ordered(found[m]), ordered(np.linalg.eigvals(values[m])), atol=2e-3)


def test_eigenvalues_on_every_backend_are_complex_also_where_all_are_real(backend):
    symmetric = RNG.normal(size=(4, 4))
    symmetric = symmetric + symmetric.T
    result = math.eigenvalues(math.tensor(symmetric, spatial('x'), dual('x')), 'ev')
    assert result.shape == channel(ev=4) and result.dtype.kind is complex
    np.testing.assert_allclose(np.sort(result.numpy().real), np.linalg.eigvalsh(symmetric), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(result.numpy().imag, 0, atol=1e-4)
    integers = math.eigenvalues(math.tensor(np.array([[2, 0], [0, 3]]), instance('i'), dual('i')))
    np.testing.assert_allclose(np.sort(integers.numpy().real), [2, 3], rtol=1e-6)


def test_eigenvalues_pair_each_column_dim_with_the_row_dim_of_its_name_whatever_their_order(backend):
    a = RNG.normal(size=(6, 6))  # rows and columns numbered (x, y) row-major
    columns_swapped = a.reshape(2, 3, 2, 3).transpose(0, 1, 3, 2)  # the columns listed as (~y, ~x)
    matrix = math.tensor(columns_swapped, spatial('x,y'), dual('y,x'))
    found = math.eigenvalues(matrix).numpy()
    np.testing.assert_allclose(ordered(found), ordered(np.linalg.eigvals(a)), atol=1e-3)


def test_eigenvalues_of_rows_named_otherwise_are_taken_along_the_primal_dims(backend):
    a = RNG.normal(size=(2, 3, 3))
    result = math.eigenvalues(math.tensor(a, batch('b'), instance('rows'), dual('cols')), channel('e'))
    for b in range(2):
        np.testing.assert_allclose(ordered(result.b[b].numpy()), ordered(np.linalg.eigvals(a[b])), atol=1e-3)


def test_eigenvalues_as_phiml_gives_them():
    pm = phiml_math()
    a = np.arange(9.).reshape(3, 3) + np.eye(3)
    ours = math.eigenvalues(math.tensor(a, instance('i'), dual('i')))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        theirs = pm.eigenvalues(pm.tensor(a, pm.instance('i'), pm.dual('i')))
    assert ours.shape.names == theirs.shape.names == ('eigenvalues',)
    np.testing.assert_allclose(ordered(ours.numpy()), ordered(theirs.numpy().astype(complex)), atol=1e-6)


def test_eigenvalues_refuse_what_is_not_a_square_matrix():
    with pytest.raises(ValueError, match='no dual dim'):
        math.eigenvalues(math.zeros(instance(i=3), channel(c=3)))
    with pytest.raises(ValueError, match='not square: 3 rows'):
        math.eigenvalues(math.zeros(instance(i=3), dual(j=2)))


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 5))
def test_matrix_rank_is_numpys(rows, columns, rank):
    values = RNG.normal(size=(2, rows, rank)) @ RNG.normal(size=(2, rank, columns))  # of rank min(rows, columns, rank)
    result = math.matrix_rank(math.tensor(values, batch('b'), instance('i'), dual('j')))
    assert result.shape == batch(b=2) and result.dtype == math.DType(int, 64)
    np.testing.assert_array_equal(result.numpy('b'), np.linalg.matrix_rank(values))


def test_matrix_rank_on_every_backend(backend):
    full, low = RNG.normal(size=(4, 4)), RNG.normal(size=(4, 1)) @ RNG.normal(size=(1, 4))
    matrices = math.tensor(np.stack([full, low, np.zeros((4, 4))]), batch('b'), spatial('x'), dual('x'))
    np.testing.assert_array_equal(math.matrix_rank(matrices).numpy('b'), [4, 1, 0])
    assert int(math.matrix_rank(math.tensor(np.array([[1, 2], [2, 4]]), instance('i'), dual('i')))) == 1
    assert int(math.matrix_rank(math.tensor([0., 2., 0.], instance('i')))) == 1  # without dual dims: one column


def test_matrix_rank_as_phiml_gives_it():
    pm = phiml_math()
    a = np.arange(16.).reshape(2, 2, 4)  # two matrices of rank 2 with rows (x, y)
    ours = math.matrix_rank(math.tensor(a, spatial('x,y'), dual('c')))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        theirs = pm.matrix_rank(pm.tensor(a, pm.spatial('x,y'), pm.dual('c')))
    assert int(ours) == int(theirs) == 2


def test_with_diagonal_replaces_the_diagonal_by_a_number_or_a_value_per_row(backend):
    a = RNG.normal(size=(3, 3))
    matrix = math.tensor(a, instance('i'), dual('i'))
    zeroed = math.with_diagonal(matrix, 0)
    np.testing.assert_allclose(zeroed.numpy('i,~i'), a - np.diag(np.diag(a)), rtol=1e-6)
    per_row = math.with_diagonal(matrix, math.tensor([1., 2., 3.], instance('i')))
    np.testing.assert_allclose(per_row.numpy('i,~i'), a - np.diag(np.diag(a)) + np.diag([1, 2, 3]), rtol=1e-6)


def test_with_diagonal_of_several_dims_and_batches(backend):
    a = RNG.normal(size=(2, 6, 6))  # rows and columns numbered (x, y) row-major
    matrix = math.tensor(a.reshape(2, 2, 3, 2, 3).transpose(0, 1, 2, 4, 3), batch('b'), spatial('x,y'), dual('y,x'))
    result = math.with_diagonal(matrix, math.tensor([5., 7.], batch('b')))
    expected = a.copy()
    expected[0][np.diag_indices(6)], expected[1][np.diag_indices(6)] = 5, 7
    np.testing.assert_allclose(result.numpy('b,x,y,~x,~y').reshape(2, 6, 6), expected, rtol=1e-6)


def test_with_diagonal_of_a_rectangular_matrix_only_without_check_square(backend):
    matrix = math.tensor(RNG.normal(size=(2, 3)), instance('rows'), dual('cols'))
    with pytest.raises(ValueError, match='not square: 2 rows'):
        math.with_diagonal(matrix, 1)
    result = math.with_diagonal(matrix, 1, check_square=False).numpy('rows,~cols')
    np.testing.assert_allclose(np.diag(result), 1)
    with pytest.raises(ValueError, match='no dual dim'):
        math.with_diagonal(math.zeros(instance(i=2), channel(c=2)), 1)


def test_with_diagonal_as_phiml_gives_it_for_its_sparse_matrices():
    pm = phiml_math()
    a = np.arange(9.).reshape(3, 3) + 1
    values = [5., 6., 7.]
    ours = math.with_diagonal(math.tensor(a, instance('i'), dual('i')), math.tensor(values, instance('i')))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        sparse = pm.to_format(pm.tensor(a, pm.instance('i'), pm.dual('i')), 'csr')  # phiml's is for sparse only
        theirs = pm.dense(pm.with_diagonal(sparse, pm.tensor(values, pm.instance('i'))))
    np.testing.assert_array_equal(ours.numpy('i,~i'), theirs.numpy('i,~i'))


# --- factor_ilu ------------------------------------------------------------------------------------------------

def diagonally_dominant(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Random square matrices whose diagonal outweighs the rest of each row and column: LU with partial pivoting
    swaps no rows."""
    a = rng.normal(size=shape)
    weight = np.abs(a).sum(-1) + np.abs(a).sum(-2) + 1
    return a + weight[..., None] * np.eye(shape[-1])


def test_factor_ilu_as_phiml_prints_it(backend):
    """phiml's example, with enough sweeps for the exact factors: L as printed there, and L @ U giving the matrix
    back (the dual dim of L renamed so that it pairs with the rows of U)."""
    matrix = wrap([[-2, 1, 0], [1, -2, 1], [0, 1, -2]], channel('row'), dual('col'))
    lower, upper = math.factor_ilu(matrix, 4)
    assert lower.shape == upper.shape == matrix.shape and lower.dtype.kind is float
    np.testing.assert_allclose(lower.numpy('row,~col'), [[1, 0, 0], [-.5, 1, 0], [0, -2 / 3, 1]], rtol=1e-6)
    np.testing.assert_allclose(upper.numpy('row,~col'), [[-2, 1, 0], [0, -1.5, 1], [0, 0, -4 / 3]], rtol=1e-6)
    product = math.rename_dims(lower, '~col', dual('row')) @ upper
    np.testing.assert_allclose(product.numpy('row,~col'), [[-2, 1, 0], [1, -2, 1], [0, 1, -2]], atol=1e-6)


def test_factor_ilu_picks_phimls_number_of_sweeps(backend):
    """`iterations=None` gives a 3x3 matrix 2 sweeps (phiml's count for dense matrices): not yet exact."""
    matrix = wrap([[-2, 1, 0], [1, -2, 1], [0, 1, -2]], channel('row'), dual('col'))
    lower, upper = math.factor_ilu(matrix, None)
    twice = math.factor_ilu(matrix, 2)
    np.testing.assert_array_equal(lower.numpy('row,~col'), twice[0].numpy('row,~col'))
    np.testing.assert_array_equal(upper.numpy('row,~col'), twice[1].numpy('row,~col'))
    np.testing.assert_allclose(lower.numpy('row,~col')[2, 1], -.5)


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3))
def test_factor_ilu_converges_to_scipys_lu_without_pivoting(size, matrices):
    scipy_linalg = pytest.importorskip('scipy.linalg')
    a = diagonally_dominant(RNG, matrices, size, size)
    matrix = math.tensor(a, batch('m'), instance('i'), dual('i'))
    lower, upper = math.factor_ilu(matrix, 2 * size)
    assert lower.shape == upper.shape == matrix.shape
    for m in range(matrices):
        permutation, expected_lower, expected_upper = scipy_linalg.lu(a[m])
        np.testing.assert_array_equal(permutation, np.eye(size))  # diagonal dominance: no row swapped
        np.testing.assert_allclose(lower.m[m].numpy('i,~i'), expected_lower, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(upper.m[m].numpy('i,~i'), expected_upper, rtol=1e-4, atol=1e-5)
    product = np.einsum('mik,mkj->mij', lower.numpy('m,i,~i'), upper.numpy('m,i,~i'))
    np.testing.assert_allclose(product, a, rtol=1e-4, atol=1e-4)


def test_factor_ilu_of_a_batch_factors_each_matrix_on_its_own(backend):
    a = diagonally_dominant(RNG, 3, 6, 6)  # rows and columns numbered (x, y) row-major
    matrix = math.tensor(a.reshape(3, 2, 3, 2, 3), batch('b'), spatial('x,y'), dual('x,y'))
    lower, upper = math.factor_ilu(matrix, 12)
    assert lower.shape == upper.shape == matrix.shape
    found_lower, found_upper = lower.numpy('b,x,y,~x,~y').reshape(3, 6, 6), upper.numpy('b,x,y,~x,~y').reshape(3, 6, 6)
    for b in range(3):
        single_lower, single_upper = math.factor_ilu(math.tensor(a[b], instance('i'), dual('i')), 12)
        np.testing.assert_allclose(found_lower[b], single_lower.numpy('i,~i'), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(found_upper[b], single_upper.numpy('i,~i'), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(np.triu(found_lower[b], 1), 0)
        np.testing.assert_array_equal(np.diag(found_lower[b]), 1)
        np.testing.assert_array_equal(np.tril(found_upper[b], -1), 0)
    np.testing.assert_allclose(np.einsum('bik,bkj->bij', found_lower, found_upper), a, rtol=1e-4, atol=1e-4)


def test_factor_ilu_safe_gives_numbers_where_a_rank_deficient_matrix_gives_nan(backend):
    """A rank short by 3 (ones everywhere): NaN without `safe`, numbers with it. Zeros on the diagonal of the
    matrix itself are safe too (phiml divides by them once without `safe`)."""
    ones = math.ones(instance(i=4), dual(i=4))
    zero_diagonal = math.tensor(np.diag([2., 0., 0., 0.]), instance('i'), dual('i'))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # NumPy's for 0 / 0
        assert np.isnan(math.factor_ilu(ones, 3)[0].numpy('i,~i')).any()
        assert np.isnan(math.factor_ilu(zero_diagonal, 3)[0].numpy('i,~i')).any()
    lower, upper = (f.numpy('i,~i') for f in math.factor_ilu(ones, 3, safe=True))
    assert np.isfinite(lower).all() and np.isfinite(upper).all()
    np.testing.assert_array_equal(lower[:, 0], 1)  # each row is the first one: L's first column, U's first row
    np.testing.assert_array_equal(upper[0], 1)
    np.testing.assert_array_equal(np.triu(lower, 1), 0)
    lower, upper = math.factor_ilu(zero_diagonal, 3, safe=True)
    np.testing.assert_array_equal(lower.numpy('i,~i'), np.eye(4))
    np.testing.assert_array_equal(upper.numpy('i,~i'), np.diag([2., 0., 0., 0.]))


@pytest.mark.parametrize('safe', [False, True])
def test_factor_ilu_as_phiml_gives_it(safe):
    pm = phiml_math()
    a = np.stack([diagonally_dominant(RNG, 4, 4), np.ones((4, 4))])  # the second of rank 1, short by 3
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # phiml's, and NumPy's for 0 / 0 in the second matrix without `safe`
        ours = math.factor_ilu(math.tensor(a, batch('b'), channel('row'), dual('col')), 3, safe=safe)
        theirs = pm.factor_ilu(pm.tensor(a, pm.batch('b'), pm.channel('row'), pm.dual('col')), 3, safe=safe)
        for mine, phimls in zip(ours, theirs, strict=True):
            assert set(mine.shape.names) == set(phimls.shape.names)
            expected = phimls.numpy('b,row,~col')
            assert np.isnan(expected).any() != safe  # the second matrix: NaN without `safe`
            np.testing.assert_allclose(mine.numpy('b,row,~col'), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('call, error, message', [
    (lambda: math.factor_ilu(math.zeros(instance(i=3), channel(c=3)), None), ValueError, 'no dual dim'),
    (lambda: math.factor_ilu(math.zeros(instance(i=3), dual(j=2)), None), ValueError, 'not square: 3 rows'),
    (lambda: math.factor_ilu(math.ones(instance(i=2), dual(i=2)), -1), ValueError, 'iterations must be 0 or more'),
    (lambda: math.factor_ilu(math.ones(instance(i=2), dual(i=2)), 2.5), TypeError, 'iterations must be an int'),
])
def test_factor_ilu_names_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
