"""`LinearFunction`, what `jit_compile_linear` returns: compiled like `jit_compile`, and laid out as a dense
matrix (and bias) by `sparse_matrix` / `sparse_matrix_and_bias`, against NumPy and phiml on every backend."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.math import LinearFunction, batch, channel, dual, jit_compile_linear, spatial

pytestmark = pytest.mark.usefixtures('backend')

LAPLACE = np.diag(-2. * np.ones(4)) + np.diag(np.ones(3), 1) + np.diag(np.ones(3), -1)
LAPLACE6 = np.diag(-2. * np.ones(6)) + np.diag(np.ones(5), 1) + np.diag(np.ones(5), -1)


def laplace(x):
    return math.laplace(x, padding=0)


def phiml_math():
    phiml = pytest.importorskip('phiml.math')
    return phiml


def dense_of(phiml, matrix, order: str) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return phiml.dense(matrix).numpy(order)


def test_jit_compile_linear_returns_a_linear_function_in_both_forms():
    plain = jit_compile_linear(laplace)

    @jit_compile_linear(auxiliary_args='scale')
    def scaled(x, scale: float):
        return x * scale

    assert isinstance(plain, LinearFunction) and isinstance(scaled, LinearFunction)
    assert repr(plain) == 'lin(laplace)' and repr(scaled) == 'lin(scaled)'
    assert jit_compile_linear(plain) is plain  # already one, with the same auxiliary_args
    assert isinstance(jit_compile_linear(math.jit_compile(laplace)), LinearFunction)
    x = math.tensor([1., 4., 9., 16.], spatial('x'))
    np.testing.assert_allclose(plain(x).numpy('x'), LAPLACE @ [1., 4., 9., 16.], rtol=1e-5)
    np.testing.assert_allclose(scaled(x, 3.).numpy('x'), [3., 12., 27., 48.], rtol=1e-5)
    assert plain.traces and scaled.traces  # called through the compiled version


def test_the_sparse_matrix_of_a_laplace_is_numpys_and_phimls():
    matrix = jit_compile_linear(laplace).sparse_matrix(math.zeros(spatial(x=4)))
    assert set(matrix.shape.names) == {'x', '~x'} and matrix.shape.dual.names == ('~x',)
    np.testing.assert_allclose(matrix.numpy('x,~x'), LAPLACE)
    phiml = phiml_math()
    expected = phiml.jit_compile_linear(lambda x: phiml.laplace(x, padding=0)).sparse_matrix(
        phiml.zeros(phiml.spatial(x=4)))
    assert set(expected.shape.names) == set(matrix.shape.names)
    np.testing.assert_allclose(matrix.numpy('x,~x'), dense_of(phiml, expected, 'x,~x'))


def test_a_cached_property_building_a_matrix_is_planned_without_applying_f_to_the_identity(tmp_path):
    from dataclasses import dataclass

    from lazyphi.dataclasses import cached_property
    from lazyphi.parallel import parallel_compute, plan

    largest = []

    def recorded(x):
        largest.append(x.shape.volume)
        return math.laplace(x, padding=0)

    @dataclass(frozen=True)
    class Operator:
        grid: math.Tensor

        @cached_property
        def matrix(self):
            return jit_compile_linear(recorded).sparse_matrix(self.grid)

    grid = math.zeros(spatial(x=32, y=32))
    planned = plan(Operator(grid), [Operator.matrix], cache_dir=str(tmp_path))
    assert max(largest) <= grid.shape.volume  # tracing a dense stand-in took f of all 1024 x 1024 basis vectors
    assert 'matrix_from_function' in str(planned.properties['matrix'].fallbacks)
    assert 'matrix stays in memory' in str(planned)  # its shape shows once computed: not written densely to disk
    operator = Operator(grid)
    parallel_compute(operator, [Operator.matrix], cache_dir=str(tmp_path))
    assert math.is_sparse(operator.matrix)
    np.testing.assert_array_equal(operator.matrix.numpy('x,y,~x,~y'),
                                  jit_compile_linear(laplace).sparse_matrix(grid).numpy('x,y,~x,~y'))


def test_an_affine_function_gives_its_bias_and_has_no_single_matrix():
    def gradient_plus_one(m):
        def f(x):
            return m.spatial_gradient(x, padding=0, dims='x', stack_dim=m.channel('g'))[{'g': 0}] * 2 + 1
        return f
    affine = jit_compile_linear(gradient_plus_one(math))
    matrix, bias = affine.sparse_matrix_and_bias(math.zeros(spatial(x=3)))
    np.testing.assert_allclose(matrix.numpy('x,~x'), [[0, 1, 0], [-1, 0, 1], [0, -1, 0]])
    assert bias.shape == spatial(x=3)
    np.testing.assert_allclose(bias.numpy('x'), [1, 1, 1])
    with pytest.raises(ValueError, match='sparse_matrix_and_bias'):
        affine.sparse_matrix(math.zeros(spatial(x=3)))
    phiml = phiml_math()
    expected_matrix, expected_bias = phiml.jit_compile_linear(gradient_plus_one(phiml)).sparse_matrix_and_bias(
        phiml.zeros(phiml.spatial(x=3)))
    np.testing.assert_allclose(matrix.numpy('x,~x'), dense_of(phiml, expected_matrix, 'x,~x'))
    np.testing.assert_allclose(bias.numpy('x'), expected_bias.numpy('x'))


def test_auxiliary_arguments_and_batch_dims():
    def reversed_plus_scaled(m):
        @m.jit_compile_linear(auxiliary_args='scale')
        def f(x, scale: float):
            return x * scale + x.v[::-1]
        return f
    x = math.ones(batch(b=2), channel(v=2))
    matrix, bias = reversed_plus_scaled(math).sparse_matrix_and_bias(x, 3.)
    # as phiml's, one matrix for all batch entries of x: the function treats them alike
    assert set(matrix.shape.names) == {'v', '~v'} and bias.shape == x.shape
    np.testing.assert_allclose(math.dense(matrix).numpy('v,~v'), [[3, 1], [1, 3]])
    np.testing.assert_allclose(bias.numpy('b,v'), 0)
    phiml = phiml_math()
    expected, expected_bias = reversed_plus_scaled(phiml).sparse_matrix_and_bias(
        phiml.ones(phiml.batch(b=2), phiml.channel(v=2)), 3.)
    np.testing.assert_allclose(math.dense(matrix).numpy('v,~v'), dense_of(phiml, expected, 'v,~v'))
    np.testing.assert_allclose(bias.numpy('b,v'), expected_bias.numpy('b,v'))


def test_by_default_the_arguments_after_the_first_are_not_linear():
    @jit_compile_linear
    def weighted(x, weights):
        return x * weights
    weights = math.tensor([1., 2., 3.], spatial('x'))
    matrix = weighted.sparse_matrix(math.zeros(spatial(x=3)), weights)
    np.testing.assert_allclose(matrix.numpy('x,~x'), np.diag([1., 2., 3.]))


def test_the_matrix_inside_jit_compile():
    function = jit_compile_linear(laplace)

    @math.jit_compile
    def apply_matrix(x):
        return function.sparse_matrix(x) @ x
    x = math.tensor([1., 4., 9., 16.], spatial('x'))
    for _ in range(2):
        np.testing.assert_allclose(apply_matrix(x).numpy('x'), LAPLACE @ [1., 4., 9., 16.], rtol=1e-5)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 2 ** 31))
def test_the_matrix_of_a_random_matrix_product_is_that_matrix(rows, columns, seed):
    values = np.random.default_rng(seed).standard_normal((rows, columns))
    a = math.tensor(values, channel('out'), dual('inp'))
    matrix, bias = jit_compile_linear(lambda x: a @ x).sparse_matrix_and_bias(math.zeros(channel(inp=columns)))
    np.testing.assert_allclose(matrix.numpy('out,~inp'), values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bias.numpy('out'), 0, atol=1e-6)


def test_matrices_are_kept_for_arguments_alike():
    calls = []

    @jit_compile_linear(auxiliary_args='weights,scale')
    def weighted(x, weights, scale: float):
        calls.append(x.shape)
        return laplace(x) * weights * scale
    weights = math.tensor([1., 2., 3., 4.], spatial('x'))
    first = weighted.sparse_matrix(math.zeros(spatial(x=4)), weights, 2.)
    built = len(calls)
    assert weighted.sparse_matrix(math.ones(spatial(x=4)), weights, 2.) is first and len(calls) == built  # values of x
    np.testing.assert_allclose(math.dense(first).numpy('x,~x'), LAPLACE * [[2.], [4.], [6.], [8.]], rtol=1e-6)
    # another tensor (even of equal values), another auxiliary value, another shape of x: built anew
    for x, w, scale in ((math.zeros(spatial(x=4)), weights * 1, 2.), (math.zeros(spatial(x=4)), weights, 3.),
                        (math.zeros(spatial(x=4), batch(b=2)), weights, 2.)):
        assert weighted.sparse_matrix(x, w, scale) is not first
    assert len(weighted._matrices) == 4
    weighted.sparse_matrix(math.zeros(spatial(x=5)), weights[{'x': 0}], 2.)  # a fifth: the oldest is dropped
    assert len(weighted._matrices) == 4
    assert weighted.sparse_matrix(math.zeros(spatial(x=4)), weights, 2.) is not first


def test_matrices_built_inside_jit_compile_are_not_kept(backend):
    function = jit_compile_linear(laplace)

    @math.jit_compile
    def apply_matrix(x):
        return function.sparse_matrix(x) @ x
    apply_matrix(math.tensor([1., 4., 9., 16.], spatial('x')))
    traced = backend.name in ('jax', 'tensorflow')  # NumPy and PyTorch run compiled functions on values
    assert len(function._matrices) == (0 if traced else 1)
    assert all(t.available for _, found in function._matrices.values() for t in found)


def test_iterative_solves_on_the_cpu_step_with_the_kept_matrix(backend):
    calls = []

    @jit_compile_linear
    def counted(x):
        calls.append(1)
        return laplace(x)
    y = math.tensor(np.random.default_rng(0).standard_normal((8, 8)), spatial('x,y'))
    expected = math.solve_linear(lambda x: laplace(x), y, math.Solve('CG', 1e-6, 1e-6, x0=0 * y))
    evaluations = 0
    for method in ('CG', 'CG-adaptive', 'biCG-stab', 'auto'):
        with math.SolveTape() as tape:
            x = math.solve_linear(counted, y, math.Solve(method, 1e-6, 1e-6, x0=0 * y))
        assert x.backend is y.backend  # stepped on the host, handed back
        np.testing.assert_allclose(x.numpy('x,y'), expected.numpy('x,y'), rtol=1e-4, atol=1e-5)
        evaluations += int(tape[0].function_evaluations.max)
    # every backend's values are on the CPU here: one matrix, built by a few probes of the function and kept for
    # all four solves
    assert len(counted._matrices) == 1 and len(calls) < evaluations / 4


def test_iterative_solves_traced_by_jit_compile_call_the_function(backend):
    calls = []

    @jit_compile_linear
    def counted(x):
        calls.append(1)
        return laplace(x)

    @math.jit_compile
    def solve(y):
        return math.solve_linear(counted, y, math.Solve('CG', 1e-6, 1e-6, x0=0 * y))
    y = math.tensor(np.random.default_rng(0).standard_normal((8, 8)), spatial('x,y'))
    expected = math.solve_linear(lambda x: laplace(x), y, math.Solve('CG', 1e-6, 1e-6, x0=0 * y))
    np.testing.assert_allclose(solve(y).numpy('x,y'), expected.numpy('x,y'), rtol=1e-4, atol=1e-5)
    compiled = backend.name != 'numpy'  # NumPy has no compiler: jit_compile runs the function on values
    assert len(counted._matrices) == (0 if compiled else 1)  # compiled: the function is called at each step


def test_direct_solves_reuse_the_kept_matrix_but_build_one_to_differentiate_by_arguments():
    calls = []

    @jit_compile_linear(auxiliary_args='weights')
    def weighted(x, weights):
        calls.append(1)
        return laplace(x) * weights
    y = math.tensor(np.random.default_rng(1).standard_normal(6), spatial('x'))
    weights = math.tensor(np.linspace(1., 2., 6), spatial('x'))
    expected = np.linalg.solve(LAPLACE6 * np.linspace(1., 2., 6)[:, None], y.numpy('x'))
    built = []
    for method in ('direct', 'scipy-direct', 'direct'):
        x = math.solve_linear(weighted, y, math.Solve(method, x0=0 * y), weights)
        np.testing.assert_allclose(x.numpy('x'), expected, rtol=1e-4, atol=1e-5)
        built.append(len(calls))
    assert built[0] > 0 and built[1] == built[2] == built[0]  # the second and third solves found the matrix kept
    x = math.solve_linear(weighted, y, math.Solve('direct', x0=0 * y), weights, grad_for_f=True)
    np.testing.assert_allclose(x.numpy('x'), expected, rtol=1e-4, atol=1e-5)
    assert len(calls) > built[-1]  # its entries carry derivatives by the weights: built for this solve


def test_a_copy_pickled_for_a_worker_compiles_and_keeps_its_own():
    import cloudpickle
    function = jit_compile_linear(laplace)
    x = math.tensor([1., 4., 9., 16.], spatial('x'))
    function(x)
    function.sparse_matrix(x)
    copy = cloudpickle.loads(cloudpickle.dumps(function))  # as a worker of parallel_compute receives it
    assert not copy.traces and not copy._matrices and function.traces and function._matrices
    np.testing.assert_allclose(copy(x).numpy('x'), LAPLACE @ [1., 4., 9., 16.], rtol=1e-5)
    np.testing.assert_allclose(math.dense(copy.sparse_matrix(x)).numpy('x,~x'), LAPLACE)
    assert len(copy._matrices) == 1
