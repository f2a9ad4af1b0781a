"""The contract every backend keeps, checked against the NumPy backend.

Each operation NumPy implements runs on every installed backend with the same random inputs, converted to
that backend's natives, and must give NumPy's result: equal values within a tolerance set by the dtype, equal
dtypes, natives of the backend on its default device. An operation a backend lacks is skipped, naming it,
exactly when `supports()` says so. Further: precision rules, device placement, `choose_backend`, `convert`
(DLPack sharing memory), content hashes equal across backends, and the gradient operations.
"""
# ruff: noqa: B008  (the op cases draw their random inputs once, as default arguments, when the table is built)

import functools

import numpy as np
import pytest
from backends import FOREIGN_PAIRS, get_backend
from random_inputs import RNG, bools, f32, ints, pos, unit

from lazyphi import math as lmath
from lazyphi.backend import (
    NUMPY,
    Backend,
    DType,
    NoBackendFound,
    choose_backend,
    convert,
    default_backend,
    precision,
    set_global_default_backend,
)
from lazyphi.backend._dtype import from_numpy_dtype

_X, _Y, _M, _B, _I = f32(3, 4), f32(3, 4), f32(2, 3, 4), bools(3, 4), ints(3, 4)
_Z = (f32(3) + 1j * f32(3)).astype(np.complex64)


def native_converter(backend: Backend):
    """A function turning NumPy data into natives of `backend` of exactly the same dtype and values."""
    def to_native(data):
        array = np.asarray(data)
        with precision(64):  # as_tensor lifts floats losslessly to 64 bits; cast goes back to the original type
            native = backend.as_tensor(array)
        return backend.cast(native, from_numpy_dtype(array.dtype))
    return to_native


def _counting_loop(remaining, count):
    return remaining - 1, count + 1


def _random_summary(b, values, low=None, high=None):
    """What can be compared of random values: dtype, shape and whether they lie in [low, high)."""
    inside = True if low is None else bool(b.all(b.greater_or_equal(values, low))) and bool(
        b.all(b.greater_than(high, values)))
    return b.dtype(values), tuple(b.staticshape(values)), inside


def _seeding_repeats(b, t):
    b.seed(3)
    first = b.random_normal((4,), None)
    b.seed(3)
    return bool(b.all(b.equal(first, b.random_normal((4,), None))))


def _device_facts(b, t):
    device = b.get_default_device()
    return (device in b.list_devices(), all(d.backend is b for d in b.list_devices()),
            [d.device_type for d in b.list_devices('CPU')] == ['CPU'], b.get_device(t(_X)) == device)


# batched sparse matrices as phiml's backends take them: compressed rows (pointers of 4 rows + 1) and coordinates
_CSR_COLUMNS = np.array([[1, 0, 2, 2], [0, 0, 1, 2]])
_CSR_POINTERS = np.array([[0, 0, 1, 1, 4], [0, 2, 3, 3, 4]])
_COO = np.array([[[1, 1], [3, 0], [3, 2], [3, 2]], [[0, 0], [0, 0], [1, 1], [3, 2]]])
_SPARSE_VALUES = RNG.standard_normal((2, 4, 2)).astype(np.float32)


def test_sparse_matrix_operations_of_numpy_match_scipy():
    from scipy.sparse import coo_matrix, csr_matrix
    for i in range(2):
        for c in range(2):
            scipy_csr = csr_matrix((_SPARSE_VALUES[i, :, c], _CSR_COLUMNS[i], _CSR_POINTERS[i]), shape=(4, 3))
            dense = NUMPY.csr_to_dense(_CSR_COLUMNS, _CSR_POINTERS, _SPARSE_VALUES, (4, 3), True)[i, ..., c]
            np.testing.assert_allclose(dense, scipy_csr.toarray(), rtol=1e-6)
            rows, columns = _COO[i].T
            scipy_coo = coo_matrix((_SPARSE_VALUES[i, :, c], (rows, columns)), shape=(4, 3))
            np.testing.assert_allclose(NUMPY.coo_to_dense(_COO, _SPARSE_VALUES, (4, 3), True)[i, ..., c],
                                       scipy_coo.toarray(), rtol=1e-6)
            other = RNG.standard_normal((1, 3, 2, 5)).astype(np.float32)
            np.testing.assert_allclose(NUMPY.mul_coo_dense(_COO, _SPARSE_VALUES, (4, 3), other)[i, :, c],
                                       scipy_coo @ other[0, :, c], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(NUMPY.mul_csr_dense(_CSR_COLUMNS, _CSR_POINTERS, _SPARSE_VALUES, (4, 3),
                                                           other)[i, :, c], scipy_csr @ other[0, :, c], rtol=1e-5,
                                       atol=1e-6)
    np.testing.assert_array_equal(NUMPY.csr_to_coo(_CSR_COLUMNS, _CSR_POINTERS)[0], _COO[0])


# one 4 x 3 matrix with an empty row, as coordinates, compressed rows and compressed columns
SPARSE = np.array([[0, 2, 0], [1, 0, 0], [0, 0, 0], [3, 0, 4]], np.float64)
SPARSE_COO = (np.array([[0, 1], [1, 0], [3, 0], [3, 2]]), np.array([2., 1, 3, 4]))
SPARSE_CSR = (np.array([1, 0, 0, 2]), np.array([0, 1, 2, 2, 4]), np.array([2., 1, 3, 4]))  # columns, row pointers
SPARSE_CSC = (np.array([0, 2, 3, 4]), np.array([1, 3, 0, 3]), np.array([1., 3, 2, 4]))  # column pointers, rows
_SPARSE_VECTORS = RNG.standard_normal((2, 3))
# [[2, 1, 0], [5, 3, 0], [0, 0, 4]]: a triangular solve reads one triangle of it
TRIANGULAR_CSR = (np.array([0, 1, 0, 1, 2]), np.array([0, 2, 4, 5]), np.array([2., 1, 5, 3, 4]))
TRIANGULAR_COO = (np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 2]]), np.array([2., 1, 5, 3, 4]))
# linear systems of 4 unknowns, solved for 3 right-hand sides; the third entry stops after 2 iterations
SYMMETRIC = (lambda m: m @ m.T + 4 * np.eye(4))(RNG.standard_normal((4, 4)))
UNSYMMETRIC = SYMMETRIC + np.triu(RNG.uniform(0, 1, (4, 4)), 1)
RHS = RNG.standard_normal((3, 4))
ITERATIONS = np.array([[30, 30, 2]])


def _sparse_facts(b, matrix, t):
    """What every library agrees on about a sparse matrix: its format, that it is sparse, its products with vectors,
    and the same of the matrix reassembled from its parts (whose order differs between libraries)."""
    assemble, parts = b.disassemble(matrix)
    again = assemble(b, *parts)
    return [(b.get_sparse_format(m), b.is_sparse(m), b.mul_matrix_batched_vector(m, t(_SPARSE_VECTORS)))
            for m in (matrix, again)]


def _solves(b, t, solve, matrix, **options):
    """The fields of `SolveResult` but the method's name (which names the backend) of solves with a matrix, a function,
    a Jacobi preconditioner, and of three checkpoints."""
    with precision(64):
        a, y, x0 = t(matrix), t(RHS), t(np.zeros((1, 4)))
        jacobi = t(1 / np.diag(matrix))
        runs = [(a, None, ITERATIONS), (lambda v: b.mul_matrix_batched_vector(a, v), None, ITERATIONS),
                (a, lambda v: v * jacobi, ITERATIONS), (a, None, np.array([[1] * 3, [2] * 3, [30] * 3]))]
        return [tuple(solve(lin, y, x0, 1e-9, 1e-12, limits, pre, **options)[1:]) for lin, pre, limits in runs]


# Each case takes (backend, to_native) and returns results. The expected results come from the same case run on
# NUMPY with NumPy inputs; so a case only uses backend operations on natives, numbers and DTypes.
CASES = {
    # --- tensors and types ---
    'is_tensor': lambda b, t: (b.is_tensor(t(_X), True), b.is_tensor([1, 2.5]), b.is_tensor('a'),
                               b.is_tensor([1], True), b.is_tensor(1.5), b.is_tensor(_X)),
    'as_tensor': lambda b, t, x=RNG.standard_normal(3): (b.as_tensor(x), b.as_tensor([1, 2.5]), b.as_tensor(3),
                                                         b.as_tensor(1.5), b.as_tensor(True),
                                                         b.as_tensor(2, convert_external=False)),
    'is_available': lambda b, t: b.is_available(t(_X)),
    'numpy': lambda b, t: (b.numpy(t(_X)), type(b.numpy(t(_I))) is np.ndarray),
    'content_hash': lambda b, t: [b.content_hash(t(x)) for x in (_X, _I, _B, _Z, np.float64(2), _M[:, ::2, 1:])],
    'copy': lambda b, t: ((x := t(_X)), b.copy(x), b.copy(x) is x),
    'for_pickling': lambda b, t: b.for_pickling(t(_X)),  # the same values (a copy only of views: test_tensor.py)
    'to_dlpack': lambda b, t: b.from_dlpack(b.to_dlpack(t(_X))),
    'from_dlpack': lambda b, t: (b.from_dlpack(_X.copy()), b.from_dlpack(np.arange(5))),
    'dtype': lambda b, t: [b.dtype(v) for v in (t(_X), True, 3, 1.5, 1j, t(_I), t(_B), t(_Z), t(np.float16(1)),
                                                t(np.uint8(1)))],
    'cast': lambda b, t: (b.cast(t(_X), DType(int, 64)), b.cast(t(_I), DType(float, 64)), b.cast(2, DType(float, 32)),
                          b.cast(t(_B), DType(int, 8))),
    'staticshape': lambda b, t: (b.staticshape(t(_M)), b.staticshape(1.0)),
    'shape': lambda b, t: b.shape(t(_M)),
    'ndims': lambda b, t: b.ndims(t(_M)),
    'size': lambda b, t: b.size(t(_M)),
    'sizeof': lambda b, t: (b.sizeof(t(_M)), b.sizeof(t(_B)), b.sizeof(t(_Z)), b.sizeof(t(np.int16(3)))),
    'is_module': lambda b, t: b.is_module(t(_X)),
    'is_sparse': lambda b, t: b.is_sparse(t(_X)),
    'prefers_channels_last': lambda b, t: type(b.prefers_channels_last()) is bool,
    'stop_gradient': lambda b, t: b.stop_gradient(t(_X)),
    'copy_leaves': lambda b, t: b.copy_leaves({'a': [t(_X), (t(_Y),)]}),
    'stack_leaves': lambda b, t: b.stack_leaves([{'a': (t(_X),)}, {'a': (t(_Y),)}]),
    'stop_gradient_tree': lambda b, t: b.stop_gradient_tree({'a': (t(_X), [t(_Y)])}),
    'numpy_call': lambda b, t: b.numpy_call(np.cumsum, (3, 4), DType(float, 32), t(_X), axis=1),
    'seed': _seeding_repeats,
    'to_float': lambda b, t: b.to_float(t(_I)),
    'to_int32': lambda b, t: b.to_int32(t(_X)),
    'to_int64': lambda b, t: b.to_int64(t(_X)),
    'to_complex': lambda b, t: b.to_complex(t(_X)),
    'auto_cast': lambda b, t: b.auto_cast(t(_I), t(_X), t(np.float64(1))),
    'combine_types': lambda b, t: b.combine_types(DType(int, 64), DType(float, 64)),
    # --- devices and calls ---
    'list_devices': _device_facts,
    'get_default_device': _device_facts,
    'get_device': _device_facts,
    'set_default_device': lambda b, t: b.set_default_device(b.get_default_device()),
    'get_device_by_ref': lambda b, t: b.get_device_by_ref(b.get_default_device().ref) is b.get_default_device(),
    'allocate_on_device': lambda b, t: b.allocate_on_device(t(_X), b.get_default_device()),
    'call': lambda b, t: b.call(b.add, t(_X), t(_Y), name='plus'),
    'block_until_ready': lambda b, t: b.block_until_ready(t(_X)),
    'requires_fixed_shapes_when_tracing': lambda b, t: type(b.requires_fixed_shapes_when_tracing()) is bool,
    'determine_size': lambda b, t: b.determine_size([t(f32(1, 2)), t(f32(5, 2))], 0),
    'vectorized_call': lambda b, t, u=f32(3, 4), v=f32(1, 4): b.vectorized_call(lambda x, y: b.sum(b.mul(x, y), 0),
                                                                             t(u), t(v)),
    'while_loop': lambda b, t: (b.while_loop(_counting_loop, (t(np.int64(3)), t(np.int64(0))), 10),
                                b.while_loop(_counting_loop, (t(np.int64(2)), t(np.int64(0))), [0, 1, 5])),
    # --- creation ---
    'zeros': lambda b, t: (b.zeros((2, 3)), b.zeros((2,), DType(int, 64)), b.zeros((), DType(complex, 128))),
    'ones': lambda b, t: (b.ones((2, 3), DType(bool)), b.ones((4,))),
    'zeros_like': lambda b, t: (b.zeros_like(t(_I)), b.zeros_like(t(_Z))),
    'ones_like': lambda b, t: b.ones_like(t(_X)),
    'range': lambda b, t: (b.range(5), b.range(2, 10, 3, DType(int, 64))),
    'linspace': lambda b, t: b.linspace(0, 1, 5),
    'linspace_without_last': lambda b, t: b.linspace_without_last(0, 1, 4),
    'meshgrid': lambda b, t, u=f32(2), v=f32(3): b.meshgrid(t(u), t(v)),
    'random_uniform': lambda b, t: [_random_summary(b, b.random_uniform((500,), low, high, dtype), low, high)
                                    for low, high, dtype in ((2, 3, None), (0, 5, DType(int, 64)),
                                                             (-1, 1, DType(float, 64)))] + [
        _random_summary(b, b.random_uniform((4,), 0, 1, DType(complex, 64))),
        _random_summary(b, b.random_uniform((4,), 0, 1, DType(bool)))],
    'random_normal': lambda b, t: (_random_summary(b, r := b.random_normal((2000,), DType(float, 64))),
                                   abs(float(b.std(r)) - 1) < .1, _random_summary(b, b.random_normal((3,), None)),
                                   _random_summary(b, b.random_normal((3,), DType(complex, 128)))),
    # --- shape ---
    'reshape': lambda b, t: b.reshape(t(_M), (4, 6)),
    'broadcast_to': lambda b, t: b.broadcast_to(t(_X), (2, 3, 4)),
    'transpose': lambda b, t: b.transpose(t(_M), (2, 0, 1)),
    'stack': lambda b, t: (b.stack([t(_X), t(_Y)], 1), b.stack([t(_X), t(_Y)])),
    'concat': lambda b, t: b.concat([t(_X), t(_Y)], 1),
    'flip': lambda b, t: (b.flip(t(_M), (0, 2)), b.flip(t(_M), (1,))),
    'flatten': lambda b, t: b.flatten(t(_M)),
    'tile': lambda b, t: b.tile(t(_X), (2, 1, 3)),
    'tile_to': lambda b, t: b.tile_to(t(_X), 0, 9),
    'repeat': lambda b, t: (b.repeat(t(_X), [1, 0, 2], 0), b.repeat(t(_X), [1, 0, 2], 0, new_length=4),
                            b.repeat(t(_X), 2, 1)),
    'expand_dims': lambda b, t: (b.expand_dims(t(_X), -2, 2), b.expand_dims(t(_X)), b.expand_dims(t(_X), 1)),
    'pad': lambda b, t: ([b.pad(t(_X), [(1, 2), (0, 1)], mode, 7) for mode in ('constant', 'boundary', 'periodic')]
                         + [b.pad(t(_X), [(0, 0), (2, 5)], mode) for mode in ('symmetric', 'reflect', 'periodic')]
                         + [b.pad(t(_I), [(1, 0), (1, 1)], 'constant', -1), b.pad(t(_M), [(0, 1), (1, 0), (0, 2)]),
                            b.pad(t(_X), [(1, 1), (1, 1)], 'nonsense')]),
    'pad_to': lambda b, t: (b.pad_to(t(_X), 1, 6, -1), b.pad_to(t(_X), 0, 2, 0), b.pad_to(t(_X), 0, 3, 0)),
    'unstack': lambda b, t: (b.unstack(t(_M), -1), b.unstack(t(_M), 0, keepdims=True)),
    # --- reductions, sorting, counting ---
    'sum': lambda b, t: (b.sum(t(_M), 1, True), b.sum(t(_M)), b.sum(t(_M), (0, 2)), b.sum(t(_B), 0),
                         b.sum(t(_I.astype(np.int32)), None), b.sum(t(_X), ()), b.sum(t(_B), ())),
    'prod': lambda b, t: (b.prod(t(_X), 0), b.prod(t(_M)), b.prod(t(_M), (0, 2)), b.prod(t(_I.astype(np.int32)), 1)),
    'mean': lambda b, t: (b.mean(t(_M), (0, 2), True), b.mean(t(_M)), b.mean(t(_I), 0)),
    'std': lambda b, t: (b.std(t(_M), 1), b.std(t(_M)), b.std(t(_M), (0, 1), True)),
    'max': lambda b, t: (b.max(t(_M), 2, True), b.max(t(_M)), b.max(t(_I), (0, 1)), b.max(t(_B), 1)),
    'min': lambda b, t: (b.min(t(_M), None), b.min(t(_M), 0), b.min(t(_I), 1, True)),
    'any': lambda b, t: (b.any(t(_B), 0), b.any(t(_B)), b.any(t(_B), (0, 1), True)),
    'all': lambda b, t: (b.all(t(_B), 1, True), b.all(t(_B)), b.all(t(_B), (0, 1))),
    'argmax': lambda b, t: (b.argmax(t(_M), 1, True), b.argmax(t(_M), 0)),
    'argmin': lambda b, t: b.argmin(t(_M), 2),
    'cumsum': lambda b, t: (b.cumsum(t(_X), 1), b.cumsum(t(_I.astype(np.int32)), 0), b.cumsum(t(_B), 0)),
    # NumPy interpolates float32 data in mixed precision where the quantiles are a list; only its dtype is compared
    'quantile': lambda b, t: (b.quantile(t(_M.astype(np.float64)), [0.1, 0.5]), b.quantile(t(_X), 0.3),
                              b.quantile(t(_I), [0.25]), b.dtype(b.quantile(t(_X), [0.5]))),
    'argsort': lambda b, t: (b.argsort(t(_X), 0), b.argsort(t(_X))),
    'sort': lambda b, t: (b.sort(t(_X)), b.sort(t(_I), 0)),
    'searchsorted': lambda b, t, s=np.sort(f32(2, 5)), v=f32(2, 3): (
        b.searchsorted(t(s[0]), t(v[0]), 'left'), b.searchsorted(t(s), t(v), 'right', DType(int, 64))),
    'unique': lambda b, t: (b.unique(t(_I), True, True, None), b.unique(t(_I), False, False, None),
                            b.unique(t(np.array([[1, 2], [0, 1], [1, 2]])), True, False, 0)),
    'bincount': lambda b, t, x=ints(20), w=f32(20): (b.bincount(t(x), None, 12), b.bincount(t(x), t(w), 12),
                                                     b.bincount(t(x), t(x.astype(np.int32)), 10)),
    'batched_bincount': lambda b, t, x=ints(2, 20): b.batched_bincount(t(x), None, 10),
    'histogram1d': lambda b, t, v=f32(2, 30), w=pos(2, 30), e=np.sort(f32(2, 6)): (
        b.histogram1d(t(v), t(w), t(e)),
        b.histogram1d(t(np.array([[0., 1, 2, 3, 4]], np.float32)), t(np.ones((1, 5), np.float32)),
                      t(np.array([[1., 2, 3]], np.float32)))),
    'indexed_segment_sum': lambda b, t, x=f32(2, 6, 3), i=np.array([[0, 2, 5], [0, 1, 3]]), y=ints(2, 3, 7): (
        b.indexed_segment_sum(t(x), t(i), 1), b.indexed_segment_sum(t(x), t(np.array([[1, 1, 4]])), 1),
        b.indexed_segment_sum(t(y), t(np.array([[0, 3]])), 2)),
    # --- selection ---
    'where': lambda b, t: (b.where(t(_B), t(_X), t(_Y)), b.where(t(_B)), b.where(t(_B), t(_X), 0.5)),
    'nonzero': lambda b, t: (b.nonzero(t(_B)), b.nonzero(t(_B), 20, -1), b.nonzero(t(_B), 2)),
    'boolean_mask': lambda b, t, m=np.array([True, False, True, True]): (
        b.boolean_mask(t(_X), t(m), 1), b.boolean_mask(t(_X), t(m), 1, new_length=4, fill_value=9),
        b.boolean_mask(t(_X), t(m[:3]), 0, new_length=1)),
    'gather': lambda b, t, i=ints(5, high=4), j=ints(2, 2, high=3): (
        b.gather(t(_X), t(i), 1), b.gather(t(_M), t(j), 1), b.gather(t(_X), t(np.array([-1, 0])), 0),
        b.gather(t(_M), [1, 0, 1], 0), b.gather(t(_X), (3, -1), 1)),  # Python lists and tuples as indices
    'gather_1d': lambda b, t, i=ints(5, high=3): b.gather_1d(t(_X), t(i)),
    'batched_gather_nd': lambda b, t, v=f32(2, 4, 5, 3), i=ints(2, 6, 2, high=4): (
        b.batched_gather_nd(t(v), t(i)), b.batched_gather_nd(t(v[:1]), t(i)), b.batched_gather_nd(t(v), t(i[:1]))),
    'gather_nd': lambda b, t, v=f32(4, 5, 3), i=ints(6, 2, high=4): b.gather_nd(t(v), t(i)),
    'batched_gather_1d': lambda b, t, v=f32(2, 7), i=ints(2, 4, high=7): b.batched_gather_1d(t(v), t(i)),
    'gather_by_component_indices': lambda b, t: b.gather_by_component_indices(t(_X), 1, 2),
    'batch_gather': lambda b, t: (b.batch_gather(t(_M), 1), b.batch_gather(t(_M), [1, 0])),
    'multi_slice': lambda b, t: (b.multi_slice(t(_M), (0, slice(1, None))),
                                 b.multi_slice(t(_M), (slice(None, None, -1), Ellipsis, slice(-1, 0, -2))),
                                 b.multi_slice(t(_M), (1, None, slice(-2, -4, -1))),
                                 b.multi_slice(t(_M), (slice(0, 2, -1),))),
    'scatter': lambda b, t, g=f32(2, 4, 5, 3), i=ints(1, 6, 2, high=4), v=f32(2, 6, 3): (
        [b.scatter(t(g), t(i), t(v), mode) for mode in ('add', 'max', 'min')]
        + [b.scatter(t(g), t(i[:, :1]), t(v[:, :1]), 'update'), b.scatter(t(g[:1]), t(i), t(v), 'add')]),
    'scatter_nd': lambda b, t, g=f32(4, 3), i=np.array([[1], [3], [1]]), v=f32(3, 3): b.scatter_nd(t(g), t(i), t(v),
                                                                                                   'add'),
    'scatter_1d_scalar': lambda b, t, g=f32(5), i=np.array([0, 4, 0]), v=f32(3): b.scatter_1d_scalar(t(g), t(i), t(v),
                                                                                                     'add'),
    'scatter_nd_scalar': lambda b, t, g=f32(3, 4), i=np.array([[0, 1], [2, 3]]), v=f32(2): b.scatter_nd_scalar(
        t(g), t(i), t(v), 'update'),
    'get_diagonal': lambda b, t, m=f32(2, 3, 3, 2): (b.get_diagonal(t(m), 1), b.get_diagonal(t(m))),
    'grid_sample': lambda b, t, g=f32(1, 5, 4, 1), c=RNG.uniform(-3, 8, (1, 30, 2)).astype(np.float32),
                          g1=f32(2, 6, 3), c1=RNG.uniform(-1, 6, (2, 4, 1)): [
        b.grid_sample(t(g), t(c), extrapolation) for extrapolation in
        ('undefined', 'zeros', 'boundary', 'periodic', 'symmetric', 'reflect', 'nonsense')] + [
        b.grid_sample(t(g1), t(c1), 'periodic')],
    'unravel_index': lambda b, t, i=ints(6, high=12): b.unravel_index(t(i), (3, 4)),
    'ravel_multi_index': lambda b, t, i=np.array([[0, 5], [-1, 1], [2, 3]]): [
        b.ravel_multi_index(t(i), (3, 4), mode) for mode in ('undefined', 'periodic', 'clamp', -1)],
    # --- linear algebra and signals ---
    'tensordot': lambda b, t: (b.tensordot(t(_M), (1, 2), t(_X), (0, 1)), b.tensordot(t(_M), 2, t(_X), 1)),
    'einsum': lambda b, t: b.einsum('bij,ij->b', t(_M), t(_X)),
    'mul_matrix_batched_vector': lambda b, t, v=f32(5, 4), m=f32(5, 3, 4): (b.mul_matrix_batched_vector(t(_X), t(v)),
                                                                          b.mul_matrix_batched_vector(t(m), t(v))),
    # sparse matrices: two matrices of 4 x 3, the first with an empty first and third row, the second with repeats
    'coo_to_dense': lambda b, t: (b.coo_to_dense(t(_COO), t(_SPARSE_VALUES), (4, 3), True),
                                  b.coo_to_dense(t(_COO[:1, :2]), t(_SPARSE_VALUES[:1, :2]), (4, 3), False)),
    'csr_to_coo': lambda b, t: b.csr_to_coo(t(_CSR_COLUMNS), t(_CSR_POINTERS)),
    'csr_to_dense': lambda b, t: b.csr_to_dense(t(_CSR_COLUMNS), t(_CSR_POINTERS), t(_SPARSE_VALUES), (4, 3), True),
    'mul_coo_dense': lambda b, t, d=f32(2, 3, 2, 5): b.mul_coo_dense(t(_COO), t(_SPARSE_VALUES), (4, 3), t(d)),
    'mul_csr_dense': lambda b, t, d=f32(1, 3, 2, 5): b.mul_csr_dense(t(_CSR_COLUMNS), t(_CSR_POINTERS),
                                                                    t(_SPARSE_VALUES), (4, 3), t(d)),
    'solve_triangular_dense': lambda b, t, m=f32(3, 4, 4) + 4 * np.eye(4, dtype=np.float32), r=f32(3, 4),
                                     m_int=ints(1, 3, 3, high=4) + 2 * np.eye(3, dtype=int), r_int=ints(2, 3): (
        b.solve_triangular_dense(t(m), t(r), True, False), b.solve_triangular_dense(t(m), t(r), False, True),
        b.solve_triangular_dense(t(m[:1]), t(r), False, False),  # one matrix for every right-hand side
        b.solve_triangular_dense(t(m.astype(np.float64)), t(r[:1]), True, True),
        b.solve_triangular_dense(t(m_int), t(r_int), True, False)),  # integers give floats of the current precision
    'sparse_coo_tensor': lambda b, t: _sparse_facts(b, b.sparse_coo_tensor(*map(t, SPARSE_COO), (4, 3)), t),
    'csr_matrix': lambda b, t: _sparse_facts(b, b.csr_matrix(*map(t, SPARSE_CSR), (4, 3)), t),
    'csc_matrix': lambda b, t: _sparse_facts(b, b.csc_matrix(*map(t, SPARSE_CSC), (4, 3)), t),
    'get_sparse_format': lambda b, t: (b.get_sparse_format(b.sparse_coo_tensor(*map(t, SPARSE_COO), (4, 3))),
                                       b.get_sparse_format(t(_X))),
    'disassemble': lambda b, t: (b.disassemble(t(_X))[0](b, *b.disassemble(t(_X))[1]),
                                 _sparse_facts(b, b.sparse_coo_tensor(*map(t, SPARSE_COO), (4, 3)), t)),
    'solve_triangular': lambda b, t, m=f32(3, 4, 4) + 4 * np.eye(4, dtype=np.float32), r=f32(3, 4): (
        b.solve_triangular(t(m), t(r), True, False), b.solve_triangular(t(m), t(r), False, True)),
    'solve_triangular_sparse': lambda b, t, r=f32(2, 3): [
        b.solve_triangular_sparse(m, t(r), lower, unit) for lower, unit in ((True, False), (False, False), (True, True))
        for m in (b.csr_matrix(*map(t, TRIANGULAR_CSR), (3, 3)), b.sparse_coo_tensor(*map(t, TRIANGULAR_COO), (3, 3)))],
    'conjugate_gradient': lambda b, t: _solves(b, t, b.conjugate_gradient, SYMMETRIC),
    'conjugate_gradient_adaptive': lambda b, t: _solves(b, t, b.conjugate_gradient_adaptive, SYMMETRIC),
    'bi_conjugate_gradient': lambda b, t: [_solves(b, t, b.bi_conjugate_gradient, UNSYMMETRIC, poly_order=order)
                                           for order in (1, 2, 3)],
    'linear_solve': lambda b, t: [_solves(b, t, functools.partial(b.linear_solve, method), matrix)
                                  for method, matrix in (('auto', SYMMETRIC), ('CG', SYMMETRIC),
                                                         ('biCG-stab(1)', UNSYMMETRIC), ('biCG-stab(2)', UNSYMMETRIC))],
    'linear': lambda b, t, v=f32(5, 4): (b.linear(t(_X), t(v)), b.linear(lambda x: b.mul(x, 2), t(v))),
    'conv': lambda b, t, v=f32(2, 3, 9), v2=f32(2, 3, 6, 5), k=[f32(1, 2, 3, 4), f32(2, 2, 3, 3), f32(2, 4, 3, 3, 2),
                                                                f32(1, 1, 3, 2, 3)]: (
        b.conv(t(v), t(k[0])), b.conv(t(v), t(k[1])), b.conv(t(v), t(k[0]), False), b.conv(t(v2), t(k[2])),
        b.conv(t(v2), t(k[3]), False)),
    'fft': lambda b, t: (b.fft(t(_M), (1, 2)), b.fft(t(_I), [0]), b.fft(t(_M.astype(np.float64)), (0,)),
                         b.fft(t(_Z), (0,)), b.fft(t(_X), ())),
    'ifft': lambda b, t, x=f32(4, 6).astype(np.complex128): (b.ifft(t(x), (1,)), b.ifft(t(_Z), (0,))),
    'svd': lambda b, t: _svd_products(b, t(_M)),  # the factors' signs differ between libraries
    'matrix_solve_least_squares': lambda b, t, m=f32(2, 6, 3), r=f32(2, 6, 2):
        b.matrix_solve_least_squares(t(m), t(r))[0],
    'eigvals': lambda b, t, m=f32(2, 4, 4), s=f32(3, 3).astype(np.float64): _eigvals_invariants(b, t(m), t(s + s.T)),
    # --- element-wise ---
    'clip': lambda b, t: (b.clip(t(_X), -0.5, 0.5), b.clip(t(_I), 2, 5), b.clip(t(_X), t(_Y), 1.0)),
    'divide_no_nan': lambda b, t, y=np.array([0, 2, 0, 4], np.float32): b.divide_no_nan(t(_X), t(y)),
    'sigmoid': lambda b, t: b.sigmoid(t(_X)),
    'softplus': lambda b, t, x=np.array([-100, -1, 0, 1, 100], np.float32): b.softplus(t(x)),
    'factorial': lambda b, t: (b.factorial(t(np.arange(13, dtype=np.int32))), b.factorial(t(np.arange(21))),
                               b.factorial(t(np.float32([3, 4.5])))),
    'erf': lambda b, t: b.erf(t(_X)),
    'log_gamma': lambda b, t, x=pos(9): b.log_gamma(t(x)),
    'gamma_inc_l': lambda b, t, x=pos(9).astype(np.float64): (b.gamma_inc_l(2.0, t(x)),
                                                             b.gamma_inc_l(t(x), t(x[::-1].copy()))),
    'gamma_inc_u': lambda b, t, x=pos(9).astype(np.float64): b.gamma_inc_u(1.0, t(x)),
    'invert': lambda b, t: (b.invert(t(_B)), b.invert(t(_I))),
    'real': lambda b, t: (b.real(t(_Z)), b.real(t(_X))),
    'imag': lambda b, t: (b.imag(t(_Z)), b.imag(t(_X))),
    'conj': lambda b, t: (b.conj(t(_Z)), b.conj(t(_X))),
}
_UNARY = {'abs': f32, 'sign': f32, 'round': lambda *s: f32(*s) * 3, 'ceil': f32, 'floor': f32, 'sqrt': pos,
          'exp': f32, 'log': pos, 'log2': pos, 'log10': pos, 'sin': f32, 'arcsin': unit, 'cos': f32, 'arccos': unit,
          'tan': unit, 'arctan': f32, 'sinh': f32, 'arcsinh': f32, 'cosh': f32, 'arccosh': lambda *s: 1 + pos(*s),
          'tanh': f32, 'arctanh': unit,
          'isfinite': lambda *s: np.array([1, np.nan, np.inf, -np.inf], np.float32),
          'isnan': lambda *s: np.array([1, np.nan, np.inf], np.float32),
          'isinf': lambda *s: np.array([1, np.nan, -np.inf], np.float32)}
_BINARY = {'add': (f32, 1.5), 'sub': (f32, 1.5), 'mul': (f32, 1.5), 'div': (pos, 1.5), 'pow': (pos, 1.5),
           'mod': (pos, 1.5), 'floordiv': (pos, 0.5), 'maximum': (f32, 0.5), 'minimum': (f32, 0.5),
           'arctan2': (f32, 1.5), 'equal': (lambda *s: ints(*s, high=2), 1),
           'not_equal': (lambda *s: ints(*s, high=2), 1), 'greater_than': (ints, 5), 'greater_or_equal': (ints, 5),
           'and_': (ints, 6), 'or_': (ints, 6), 'xor': (ints, 6), 'shift_bits_left': (lambda *s: ints(*s, high=5), 2),
           'shift_bits_right': (lambda *s: ints(*s, high=5), 2)}
for _op, _make in _UNARY.items():
    CASES[_op] = lambda b, t, op=_op, x=_make(3, 4): getattr(b, op)(t(x))
for _op, (_make, _number) in _BINARY.items():
    # the math layer passes a Python number on either side of a binary operator
    CASES[_op] = lambda b, t, op=_op, x=_make(3, 4), y=_make(4), n=_number: (
        getattr(b, op)(t(x), t(y)), getattr(b, op)(t(x), n), getattr(b, op)(n, t(x)))
for _op in ('ceil', 'floor', 'round', 'abs', 'sign'):
    CASES[_op] = lambda b, t, op=_op, x=ints(3, 4) - 5, case=CASES[_op]: (case(b, t), getattr(b, op)(t(x)))

_NUMPY_OPS = NUMPY.implemented_ops()


# --- comparing results ---

_TOLERANCES = {'e': (2e-3, 1e-3), 'f': (1e-5, 1e-5), 'd': (1e-10, 1e-12), 'F': (1e-5, 1e-5), 'D': (1e-10, 1e-12)}


def assert_matches(backend: Backend, actual, expected, where: str = 'result'):
    """`actual` (from `backend`) equals `expected` (from NUMPY): structure, dtypes, values within tolerance."""
    if isinstance(expected, tuple | list):
        assert isinstance(actual, tuple | list), f"{where}: expected a sequence but got {type(actual).__name__}"
        assert len(actual) == len(expected), f"{where}: expected {len(expected)} entries but got {len(actual)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_matches(backend, a, e, f'{where}[{i}]')
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), f"{where}: {actual} != {expected}"
        for key in expected:
            assert_matches(backend, actual[key], expected[key], f'{where}[{key!r}]')
    elif isinstance(expected, np.ndarray | np.generic):
        assert backend.is_tensor(actual, True) or isinstance(actual, np.ndarray), \
            f"{where}: expected a native of {backend.name} but got {type(actual).__name__}"
        if backend.is_tensor(actual, True):
            assert backend.get_device(actual) == backend.get_default_device(), \
                f"{where}: the result lies on {backend.get_device(actual)}, not on the default device"
        values = np.asarray(backend.numpy(actual))
        assert values.dtype == expected.dtype, f"{where}: dtype {values.dtype} but NumPy gives {expected.dtype}"
        assert values.shape == np.shape(expected), f"{where}: shape {values.shape} but NumPy gives {expected.shape}"
        if expected.dtype.char in _TOLERANCES:
            rtol, atol = _TOLERANCES[expected.dtype.char]
            np.testing.assert_allclose(values, expected, rtol=rtol, atol=atol, err_msg=where)
        else:
            np.testing.assert_array_equal(values, expected, err_msg=where)
    elif expected is NotImplemented or expected is None:
        assert actual is expected, f"{where}: expected {expected} but got {actual!r}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{where}: {actual!r} != {expected!r}"


def _svd_products(b, matrix) -> tuple:
    """Singular values and the factors multiplied back, reduced and full: what every library agrees on."""
    u, s, vh = b.svd(matrix, full_matrices=False)
    full_u, full_s, full_vh = b.svd(matrix)
    k = b.staticshape(full_s)[-1]
    return s, b.einsum('...ik,...k,...kj->...ij', u, s, vh), \
        b.einsum('...ik,...k,...kj->...ij', full_u[..., :k], full_s, full_vh[..., :k, :])


def _eigvals_invariants(b, matrix, symmetric) -> tuple:
    """What does not depend on the order the libraries list eigenvalues in: their sum and product, and the sorted
    real eigenvalues of a symmetric matrix; all complex."""
    values, real_values = b.eigvals(matrix), b.eigvals(symmetric)
    return b.sum(values, -1), b.prod(values, -1), b.sort(b.real(real_values), -1), b.imag(real_values)


# --- every operation of NumPy, on every backend ---

def test_every_numpy_operation_has_a_case():
    assert sorted(set(_NUMPY_OPS) - set(CASES)) == []


@pytest.mark.parametrize('op', _NUMPY_OPS)
def test_operation_matches_numpy(backend, op):
    case = CASES[op]
    if not backend.supports(op):
        with pytest.raises(NotImplementedError):  # supports() is False exactly where the operation is missing
            case(backend, native_converter(backend))
        pytest.skip(f'{backend.name} lacks {op}')
    expected = case(NUMPY, np.asarray)
    assert_matches(backend, case(backend, native_converter(backend)), expected, op)


# --- data types and precision ---

@pytest.mark.parametrize('bits', [16, 32, 64])
def test_created_and_converted_floats_take_the_current_precision(backend, bits):
    t = native_converter(backend)
    float_type, complex_type = DType(float, bits), DType(complex, max(64, 2 * bits))
    with precision(bits):
        floats = {'as_tensor(1.5)': backend.as_tensor(1.5), 'as_tensor([1, 2.5])': backend.as_tensor([1, 2.5]),
                  'as_tensor(float32)': backend.as_tensor(t(_X)),
                  'as_tensor(float64)': backend.as_tensor(t(_X.astype(np.float64))),
                  'zeros': backend.zeros((2,)), 'ones': backend.ones((2,)), 'linspace': backend.linspace(0, 1, 3),
                  'random_uniform': backend.random_uniform((2,), 0, 1, None),
                  'random_normal': backend.random_normal((2,), None), 'to_float(int)': backend.to_float(t(_I)),
                  'auto_cast(int32, float64)': backend.auto_cast(t(_I.astype(np.int32)), t(np.float64(1)))[0]}
        complexes = {'as_tensor(1j)': backend.as_tensor(1j), 'as_tensor(complex64)': backend.as_tensor(t(_Z)),
                     'to_complex': backend.to_complex(t(_X)), 'fft(int)': backend.fft(t(_I), (0,))}
        for name, native in floats.items():
            assert backend.dtype(native) == float_type, f"{name} gives {backend.dtype(native)} at precision {bits}"
        for name, native in complexes.items():
            assert backend.dtype(native) == complex_type, f"{name} gives {backend.dtype(native)} at precision {bits}"
        # operations on existing values keep their type
        assert backend.dtype(backend.fft(t(_X), (0,))) == DType(complex, 64)
        assert backend.dtype(backend.fft(t(_X.astype(np.float64)), (0,))) == DType(complex, 128)
        assert backend.dtype(backend.add(t(_X), 1.5)) == DType(float, 32)
        assert backend.dtype(backend.as_tensor(3)) == DType(int, 64)


@pytest.mark.parametrize('a, b', [('float32', 'float64'), ('int32', 'int64'), ('bool', 'int32'), ('int8', 'int16'),
                                  ('float32', 'complex64'), ('float64', 'complex64'), ('uint8', 'int8')])
def test_binary_promotion_matches_numpy(backend, a, b):
    t = native_converter(backend)
    x, y = np.ones(3, a), np.ones(3, b)
    result = backend.mul(t(x), t(y))
    assert backend.dtype(result) == from_numpy_dtype(np.multiply(x, y).dtype)


def test_python_numbers_keep_the_tensor_type(backend):
    t = native_converter(backend)
    assert backend.dtype(backend.add(t(_I.astype(np.int32)), 2)) == DType(int, 32)
    assert backend.dtype(backend.mul(2.5, t(_X.astype(np.float16)))) == DType(float, 16)
    assert backend.dtype(backend.sub(t(_X.astype(np.float64)), 1)) == DType(float, 64)


# --- devices ---

def test_created_tensors_land_on_the_default_device(backend):
    created = {'as_tensor': backend.as_tensor([1.0, 2.0]), 'zeros': backend.zeros((2,)), 'ones': backend.ones((2,)),
               'random_uniform': backend.random_uniform((2,), 0, 1, None),
               'random_normal': backend.random_normal((2,), None), 'range': backend.range(3),
               'linspace': backend.linspace(0, 1, 3), 'cast': backend.cast(1.5, DType(float, 32))}
    for name, native in created.items():
        assert backend.get_device(native) == backend.get_default_device(), name


def test_devices_report_memory_and_processors(backend):
    for device in backend.list_devices():
        assert device.backend is backend and device.device_type in ('CPU', 'GPU', 'TPU')
        assert device.memory > 2 ** 20 or device.memory == -1
        assert device.processor_count > 0 or device.processor_count == -1
    assert backend.list_devices('CPU')[0].memory > 2 ** 20


def test_default_device_switches_to_a_gpu_and_back(backend):
    cpu = backend.get_default_device()
    gpus = backend.list_devices('GPU')
    if not gpus:
        with pytest.warns(RuntimeWarning, match=f"{backend.name} has no 'GPU' device"):
            assert backend.set_default_device('GPU') is False
        assert backend.get_default_device() == cpu
        pytest.skip(f'{backend.name} sees no GPU')
    try:
        assert backend.set_default_device('GPU') is True
        zeros = backend.zeros((3,))
        assert backend.get_device(zeros) == gpus[0]
        assert backend.get_device(backend.add(zeros, 1.0)) == gpus[0]
        assert backend.get_device(backend.allocate_on_device(zeros, cpu)) == cpu
    finally:
        backend.set_default_device(cpu)


# --- choose_backend ---

def test_natives_choose_their_backend(backend):
    native = native_converter(backend)(_X)
    assert choose_backend(native) is backend
    assert choose_backend(native, 2.5, True) is backend
    assert choose_backend(native, _Y) is backend  # NumPy arrays join the other library's values
    assert choose_backend(1.5, prefer_default=True) is backend


def test_unknown_types_raise_no_backend_found(backend):
    native = native_converter(backend)(_X)
    with pytest.raises(NoBackendFound, match='dict'):
        choose_backend(native, {'a': 1})
    with pytest.raises(NoBackendFound, match='list'):
        choose_backend([object()], native)


@pytest.mark.parametrize('name, other_name', FOREIGN_PAIRS)
def test_natives_of_two_libraries_raise_naming_both_and_change_no_later_choice(name, other_name):
    backend, other_backend = get_backend(name), get_backend(other_name)
    native, other = native_converter(backend)(_X), native_converter(other_backend)(_Y)
    for values in [(native, other), (other, 1.5, native)]:
        with pytest.raises(NoBackendFound, match=rf'different libraries.*{backend.name} \(.*{other_backend.name} \('
                                                 rf'|different libraries.*{other_backend.name} \(.*{backend.name} \('):
            choose_backend(*values)
    assert choose_backend(native) is backend and choose_backend(other) is other_backend
    assert choose_backend(native, 2.0) is backend and choose_backend(_X, other) is other_backend
    doubled = lmath.wrap(native, lmath.spatial('x'), lmath.channel('c')) * 2  # tensor() would convert
    assert doubled.backend is backend
    np.testing.assert_allclose(doubled.numpy('x,c'), _X * 2, rtol=1e-6)


def test_backend_can_be_selected_by_name(backend):
    try:
        assert set_global_default_backend(backend.name) is backend
        assert default_backend() is backend
    finally:
        set_global_default_backend(NUMPY)


# --- convert ---

SHARES_MEMORY_WITH_NUMPY = {'numpy', 'torch'}  # libraries whose CPU data DLPack passes to and from NumPy uncopied


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64', 'int8', 'bool', 'complex64'])
def test_convert_round_trip_keeps_values_and_dtype(backend, dtype):
    data = (RNG.standard_normal((3, 4)) * 10).astype(dtype)
    native = convert(data, backend)
    assert backend.is_tensor(native, True)
    assert backend.dtype(native) == from_numpy_dtype(data.dtype)
    back = convert(native, NUMPY)
    assert isinstance(back, np.ndarray) and back.dtype == data.dtype
    np.testing.assert_array_equal(back, data)


def test_convert_shares_memory_through_dlpack(backend):
    if backend.name not in SHARES_MEMORY_WITH_NUMPY or backend.get_default_device().device_type != 'CPU':
        pytest.skip(f'{backend.name} copies data on conversion')
    data = np.arange(12.0).reshape(3, 4)
    read_only = data.view()
    read_only.flags.writeable = False  # the math layer hands out read-only views
    for source in (data, read_only, data.T):
        native = convert(source, backend)
        assert np.shares_memory(backend.numpy(native), source)
        assert np.shares_memory(convert(native, NUMPY), source)
    if backend is not NUMPY:
        through_numpy = convert(data, backend, use_dlpack=False)  # a copy or a view, as the library makes it
        np.testing.assert_array_equal(backend.numpy(through_numpy), data)
        for dtype in (np.float16, np.float64, np.complex128, np.int8):  # the dtype is kept, whatever the precision
            kept = convert(data.astype(dtype), backend, use_dlpack=False)
            assert backend.numpy(kept).dtype == dtype and backend.numpy(convert(kept, NUMPY)).dtype == dtype


def test_convert_copies_what_dlpack_cannot_share(backend):
    flipped = np.arange(6.0)[::-1]  # negative strides: DLPack consumers may reject (or crash on) them
    np.testing.assert_array_equal(convert(convert(flipped, backend), NUMPY), flipped)
    swapped = np.arange(4, dtype='>i4')
    np.testing.assert_array_equal(backend.numpy(backend.as_tensor(swapped)), swapped)


# --- content hashes ---

@pytest.mark.parametrize('data', [_X, _I, _B, _Z, _X.astype(np.float64), _X.astype(np.float16), np.float32(3),
                                  _M.transpose(2, 0, 1), _M[:, ::2]], ids=lambda d: f'{d.dtype}{d.shape}')
def test_content_hash_is_equal_across_backends(backend, data):
    native = native_converter(backend)(data)
    assert backend.content_hash(native) == NUMPY.content_hash(data)
    token = lmath.wrap(native, *[lmath.spatial(f'd{i}') for i in range(data.ndim)]).__dask_tokenize__()
    assert token[-1] == NUMPY.content_hash(data)  # the content part of a Tensor's Dask token


def test_content_hash_tells_apart_values_shapes_and_dtypes(backend):
    t = native_converter(backend)
    hashes = {backend.content_hash(t(x)) for x in (_X, _Y, _X.reshape(4, 3), _X.view(np.int32), _X[:2])}
    assert len(hashes) == 5


# --- gradients, compilation, vectorisation (operations NumPy lacks) ---

def _needs(backend: Backend, *ops: str):
    for op in ops:
        if not backend.supports(op):
            pytest.skip(f'{backend.name} lacks {op}')


def test_jacobian_of_a_scalar_loss(backend):
    _needs(backend, 'jacobian')
    t = native_converter(backend)
    x, y = _X[0], pos(4)

    def loss(a, b):
        value = backend.sum(backend.mul(backend.mul(a, a), b))
        return value, (value, backend.mul(a, 2.0))
    gradient = backend.jacobian(loss, wrt=[0, 1], get_output=True, is_f_scalar=True)
    value, doubled, dx, dy = gradient(t(x), t(y))
    assert_matches(backend, (value, doubled, dx, dy), (np.sum(x * x * y), x * 2, 2 * x * y, x * x))
    assert len(backend.jacobian(loss, wrt=[1], get_output=False, is_f_scalar=True)(t(x), t(y))) == 1


def test_jacobian_of_a_vector_loss_puts_loss_dims_first(backend):
    _needs(backend, 'jacobian')
    x = _X[0]
    gradient = backend.jacobian(lambda a: (backend.mul(a, a), ()), wrt=[0], get_output=False, is_f_scalar=False)
    (jacobian,) = gradient(native_converter(backend)(x))
    assert_matches(backend, jacobian, np.diag(2 * x))


def test_stop_gradient_blocks_the_gradient(backend):
    _needs(backend, 'jacobian')
    x = _X[0]
    gradient = backend.jacobian(lambda a: (backend.sum(backend.mul(backend.stop_gradient(a), a)), ()), wrt=[0],
                                get_output=False, is_f_scalar=True)
    assert_matches(backend, gradient(native_converter(backend)(x))[0], x)


def test_custom_gradient_replaces_the_derivative(backend):
    _needs(backend, 'custom_gradient', 'jacobian')
    seen = []

    def gradient(x, y, dy):
        seen.append(len(x))
        return backend.mul(dy, 10.0), None
    scaled = backend.custom_gradient(lambda a, b: backend.mul(a, b), gradient)
    x = _X[0]
    loss = backend.jacobian(lambda a: (backend.sum(scaled(a, 2.0)), ()), wrt=[0], get_output=False, is_f_scalar=True)
    assert_matches(backend, scaled(native_converter(backend)(x), 2.0), x * 2)
    assert_matches(backend, loss(native_converter(backend)(x))[0], np.full(4, 10, np.float32))
    assert seen == [2]


def test_jit_compile_gives_the_same_results(backend):
    _needs(backend, 'jit_compile')
    t = native_converter(backend)
    compiled = backend.jit_compile(lambda a, b: backend.add(backend.mul(a, b), 1.0))
    assert_matches(backend, compiled(t(_X), t(_Y)), _X * _Y + 1)
    assert_matches(backend, compiled(t(_Y), t(_X)), _X * _Y + 1)


def test_jit_compile_grad_matches_jacobian(backend):
    _needs(backend, 'jit_compile_grad')
    gradient = backend.jit_compile_grad(lambda a: (backend.sum(backend.mul(a, a)), ()), wrt=[0], get_output=False,
                                        is_f_scalar=True)
    assert_matches(backend, gradient(native_converter(backend)(_X))[0], 2 * _X)


def test_vectorized_call_broadcasts_size_one_and_passes_keywords(backend):
    t = native_converter(backend)
    u, v = f32(3, 4), f32(1, 4)
    result = backend.vectorized_call(lambda x, y, scale: backend.mul(backend.sum(backend.mul(x, y), 0), scale),
                                     t(u), t(v), scale=2.0)
    assert_matches(backend, result, (u * v).sum(1) * 2)


def test_numpy_call_returns_natives_of_the_declared_types(backend):
    t = native_converter(backend)
    results = backend.numpy_call(lambda a: (np.cumsum(a, 0), np.int32(a.shape[0])), ((3, 4), ()),
                                 (DType(float, 32), DType(int, 32)), t(_X))
    assert_matches(backend, results, (np.cumsum(_X, 0), np.int32(3)))


# (start, max_iter, expected remaining, expected count) for `_counting_loop`, which counts `remaining` down to 0
_WHILE_LOOPS = [
    (2, 100, 0, 2),  # stops when the condition fails
    (3, 2, 1, 2),  # stops at max_iter
    (3, None, 0, 3),  # no limit
    (10, [0, 3, 6], [10, 7, 4], [0, 3, 6]),  # the values at each checkpoint, stacked
    (10, (6, 0, 3), [10, 7, 4], [0, 3, 6]),  # in increasing order
    (2, (1, 5), [1, 1], [1, 1]),  # ended at 2: checkpoint 5 repeats the last one reached, 1
    (2, [0, 1, 5], [2, 1, 1], [0, 1, 1]),
    (2, (0, 5), [2, 2], [0, 0]),
    (2, (5, 7), [0, 0], [2, 2]),  # no checkpoint reached: the final values
    (0, (1, 2), [-1, -2], [1, 2]),  # with checkpoints the first iteration runs whatever the condition
]


@pytest.mark.parametrize('compiled', [False, True], ids=['eager', 'compiled'])
@pytest.mark.parametrize('start, max_iter, remaining, count', _WHILE_LOOPS)
def test_while_loop(backend, compiled, start, max_iter, remaining, count):
    t = native_converter(backend)
    values = (t(np.int64(start)), t(np.int64(0)))
    if compiled:
        _needs(backend, 'jit_compile')
        result = backend.jit_compile(lambda r, c: backend.while_loop(_counting_loop, (r, c), max_iter))(*values)
    else:
        result = backend.while_loop(_counting_loop, values, max_iter)
    assert_matches(backend, tuple(result), (np.asarray(remaining, np.int64), np.asarray(count, np.int64)))
