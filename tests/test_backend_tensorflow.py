"""What is particular to the TensorFlow backend: NumPy's typing rules on a library that does not promote,
compositions of what TensorFlow lacks, autodiff and graph compilation, devices, DLPack, lazy import.

The operations all backends share are tested by the backend contract suite.
"""

import json
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

tf = pytest.importorskip('tensorflow')

from lazyphi.backend import (  # noqa: E402  (after the skip: these tests need TensorFlow)
    NUMPY,
    DType,
    backend_by_name,
    choose_backend,
    convert,
    default_backend,
    precision,
    set_global_default_backend,
)
from lazyphi.backend.tensorflow import TENSORFLOW  # noqa: E402

TF = TENSORFLOW
RNG = np.random.default_rng(7)


def same(actual, expected, rtol=1e-5, atol=1e-6):
    """Equal values and dtypes, element by element through tuples and lists."""
    if isinstance(expected, tuple | list):
        assert isinstance(actual, tuple | list) and len(actual) == len(expected), (actual, expected)
        for a, e in zip(actual, expected, strict=True):
            same(a, e, rtol, atol)
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def native(value):
    return tf.constant(value) if isinstance(value, np.ndarray) else value


# --- registration ---

def test_registered_under_its_name_and_chosen_for_tensorflow_values():
    assert backend_by_name('tensorflow') is TF and backend_by_name('TensorFlow') is TF
    assert choose_backend(tf.ones(2)) is TF and choose_backend(tf.Variable([1.0])) is TF
    assert choose_backend(tf.ones(2), np.ones(2), 1.5) is TF  # NumPy arrays are accepted, TensorFlow's held
    assert TF.is_tensor(np.ones(2)) and not TF.is_tensor(np.ones(2), only_native=True)
    assert pickle.loads(pickle.dumps(TF)) is TF


def test_default_backend_by_context_and_globally():
    with TF:
        assert default_backend() is TF
    previous = default_backend()
    try:
        assert set_global_default_backend('tensorflow') is TF and default_backend() is TF
    finally:
        set_global_default_backend(previous)


# what TensorFlow has no public operation for: compressed sparse matrices and sparse triangular solves
LEFT_OUT = ('csr_matrix', 'csc_matrix', 'csr_matrix_batched', 'csc_matrix_batched', 'solve_triangular_sparse')


def test_supports_what_tensorflow_offers_and_not_the_left_out_families():
    for op in set(NUMPY.implemented_ops()) - set(LEFT_OUT):
        assert TF.supports(op), op
    for op in ('jit_compile', 'jacobian', 'jit_compile_grad', 'custom_gradient', 'stop_gradient', 'while_loop',
               'vectorized_call', 'numpy_call', 'sparse_coo_tensor', 'sparse_coo_tensor_batched', 'linear_solve',
               'conjugate_gradient', 'minimize', 'hessian', 'jit_compile_hessian', 'variable'):
        assert TF.supports(op), op
    for op in LEFT_OUT:
        assert not TF.supports(op), op


def test_import_is_lazy_and_a_tensorflow_value_loads_the_backend():
    script = textwrap.dedent("""
        import json, sys
        import lazyphi
        from lazyphi import math
        from lazyphi.backend import choose_backend
        imported_by_lazyphi = 'tensorflow' in sys.modules
        import tensorflow as tf
        loaded_by_tensorflow = 'lazyphi.backend.tensorflow' in sys.modules
        name = choose_backend(tf.ones(2)).name
        loaded = 'lazyphi.backend.tensorflow' in sys.modules
        print(json.dumps([imported_by_lazyphi, loaded_by_tensorflow, name, loaded]))
    """)
    out = subprocess.run([sys.executable, '-c', script], check=True, capture_output=True, text=True).stdout
    assert json.loads(out.splitlines()[-1]) == [False, False, 'tensorflow', True]


# --- types: the same as NumPy's ---

_INT32, _FLOAT32 = np.arange(1, 7, dtype=np.int32).reshape(2, 3), RNG.uniform(0.5, 2, (2, 3)).astype(np.float32)
_MIXED_TYPES = [
    ('add', (_INT32, _FLOAT32.astype(np.float64))), ('add', (_INT32, 2.5)), ('add', (_FLOAT32, 2.5)),
    ('add', (_INT32, _INT32.astype(np.int64))), ('add', (_INT32 > 2, _INT32 < 5)),
    ('sub', (3, _INT32.astype(np.uint8))),
    ('mul', (_INT32 > 2, True)), ('div', (_INT32, _INT32)), ('div', (_INT32.astype(np.int8), 2)),
    ('pow', (_FLOAT32, 2)), ('mod', (_INT32, 4.0)), ('floordiv', (_FLOAT32, 2)), ('equal', (_INT32, 2.0)),
    ('greater_than', (_INT32 > 2, _INT32 > 4)), ('maximum', (_INT32, _FLOAT32)), ('minimum', (_INT32 > 2, False)),
    ('and_', (_INT32, _INT32.astype(np.int64))), ('xor', (_INT32 > 2, True)), ('invert', (_INT32 > 2,)),
    ('shift_bits_left', (_INT32, 2)), ('arctan2', (_INT32, _FLOAT32)), ('sqrt', (_INT32,)), ('exp', (_INT32 > 3,)),
    ('log2', (_INT32.astype(np.int64),)), ('sin', (_FLOAT32.astype(np.float16),)), ('abs', (_INT32.astype(np.uint8),)),
    ('sign', (-_INT32,)), ('round', (_INT32,)), ('round', (_FLOAT32 * (1 + 1j),)), ('ceil', (_INT32,)),
    ('isnan', (_INT32,)), ('isfinite', (np.array([1, np.nan + 1j, np.inf], np.complex64),)), ('real', (_INT32,)),
    ('imag', (_FLOAT32,)), ('erf', (_INT32,)), ('log_gamma', (_FLOAT32,)), ('gamma_inc_l', (2.0, _FLOAT32)),
    ('gamma_inc_u', (_FLOAT32, _FLOAT32)),
    ('clip', (_INT32, 1.5, 4)), ('where', (_INT32 > 2, _INT32, 0.5)), ('divide_no_nan', (_INT32, _INT32 - 1)),
    ('sigmoid', (_INT32,)), ('softplus', (_FLOAT32,)),
    ('sum', (_INT32,)), ('sum', (_INT32 > 2,)), ('prod', (_INT32.astype(np.uint8), 1)), ('mean', (_INT32, 0)),
    ('std', (_INT32 > 2,)), ('cumsum', (_INT32, 1)), ('max', (_INT32 > 2, 0)), ('argmax', (_INT32 > 3, 1)),
    ('any', (_INT32, 1)), ('quantile', (_INT32, [0.2, 0.5])), ('quantile', (_FLOAT32, 0.3)),
    ('stack', ([_INT32, _FLOAT32],)), ('concat', ([_FLOAT32, _FLOAT32.astype(np.float64)], 1)),
    ('tensordot', (_INT32, (1,), _FLOAT32, (1,))), ('einsum', ('ij,ij->i', _INT32, _INT32.astype(np.int64))),
    ('fft', (_INT32, [0])), ('fft', (_FLOAT32.astype(np.float64), [1])), ('fft', (_FLOAT32, [])),
    ('scatter', (np.zeros((1, 4, 1), np.int32), np.array([[[1], [3]]]), _FLOAT32[:1, :2, None], 'add')),
]


@pytest.mark.parametrize('op, args', _MIXED_TYPES, ids=[f'{op}-{i}' for i, (op, _) in enumerate(_MIXED_TYPES)])
def test_results_have_the_types_numpy_gives(op, args):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # NumPy's divide-by-zero notes in divide_no_nan
        expected = getattr(NUMPY, op)(*args)
    tensor_args = [[native(a) for a in arg] if isinstance(arg, list) else native(arg) for arg in args]
    same(getattr(TF, op)(*tensor_args), expected, rtol=2e-3)


def test_floats_take_the_current_precision():
    assert TF.as_tensor(1.5).dtype == tf.float32 and TF.as_tensor([1, 2]).dtype == tf.int64
    assert TF.as_tensor(tf.constant(1.0, tf.float64)).dtype == tf.float32
    assert TF.as_tensor(1.5, convert_external=False) == 1.5
    assert TF.zeros((2,)).dtype == tf.float32 and TF.linspace(0, 1, 3).dtype == tf.float32
    with precision(64):
        assert TF.as_tensor(1.5).dtype == tf.float64 and TF.random_normal((2,)).dtype == tf.float64
        assert TF.as_tensor(np.ones(2, np.complex64)).dtype == tf.complex128
        assert TF.fft(tf.ones(4), [0]).dtype == tf.complex64  # the input's precision, not the current one
        assert TF.fft(tf.ones(4, tf.int32), [0]).dtype == tf.complex128
    assert TF.cast(2.7, DType(int, 64)).dtype == tf.int64 and TF.dtype(tf.ones(2, tf.uint8)) == DType(int, 8, True)


def test_random_values_honour_dtype_and_seed():
    assert TF.random_uniform((4,), 0, 5, DType(int, 8)).dtype == tf.int8
    assert TF.random_uniform((4,), 0, 1, DType(complex, 64)).dtype == tf.complex64
    assert TF.random_uniform((4,), 0, 1, DType(bool)).dtype == tf.bool
    assert TF.random_normal((4,), DType(float, 16)).dtype == tf.float16
    TF.seed(5)
    first = TF.random_normal((3,))
    TF.seed(5)
    same(TF.random_normal((3,)), first)
    with pytest.raises(ValueError, match='random_normal supports float and complex types, not int32'):
        TF.random_normal((3,), DType(int, 32))


# --- compositions of operations TensorFlow lacks ---

_SORTED = np.sort(RNG.standard_normal((2, 6)).astype(np.float32))
_COMPOSITIONS = {
    'quantile': lambda b, t: b.quantile(t(_FLOAT32), np.array([[0.1, 0.9], [0.5, 1.0]])),
    'unique': lambda b, t: b.unique(t(np.array([3, 1, 3, 2, 1])), True, True, None),
    'unique rows': lambda b, t: b.unique(t(np.array([[1, 2], [0, 1], [1, 2], [0, 0]])), True, True, 0),
    'unique columns': lambda b, t: b.unique(t(np.array([[1, 2, 1], [0, 1, 0]])), False, True, 1),
    'searchsorted': lambda b, t: b.searchsorted(t(_SORTED[0]), t(_FLOAT32), 'left'),
    'searchsorted rows': lambda b, t: b.searchsorted(t(_SORTED), t(_FLOAT32[:, :2]), 'right', DType(int, 64)),
    'histogram1d': lambda b, t: b.histogram1d(t(np.array([[0., 1., 2., 3., 3., -1.]])), t(np.arange(6)[None]),
                                              t(np.array([[0., 1.5, 3.]]))),
    'indexed_segment_sum': lambda b, t: b.indexed_segment_sum(t(np.arange(24.).reshape(2, 6, 2)),
                                                              t(np.array([[0, 2, 2, 5], [1, 1, 3, 4]])), 1),
    'pad': lambda b, t: [b.pad(t(np.arange(4.)), [(6, 7)], mode) for mode in ('periodic', 'symmetric', 'reflect',
                                                                              'boundary')],
    'tile': lambda b, t: b.tile(t(_FLOAT32), (2, 1, 3)),
    'repeat': lambda b, t: b.repeat(t(_FLOAT32), [2, 0], 0, new_length=3),
    'nonzero': lambda b, t: b.nonzero(t(_INT32 > 2), 5, -1),
    'boolean_mask': lambda b, t: b.boolean_mask(t(_FLOAT32), t(np.array([True, False, True])), 1, 4, -2.0),
    'gather': lambda b, t: (b.gather(t(_FLOAT32), np.array([-1, 0]), 1), b.gather(t(_FLOAT32), t(np.array([-1])), 0)),
    'batch_gather': lambda b, t: b.batch_gather(t(_FLOAT32), [1, 0, 1]),
    'gather_by_component_indices': lambda b, t: b.gather_by_component_indices(t(_FLOAT32), t(np.array([0, 1])),
                                                                              t(np.array([2, 0]))),
    'batched_gather_nd': lambda b, t: b.batched_gather_nd(t(np.arange(24.).reshape(1, 4, 3, 2)),
                                                          t(np.array([[[0, 1], [3, 2]], [[1, 1], [2, 0]]]))),
    'get_diagonal': lambda b, t: b.get_diagonal(t(np.arange(24.).reshape(1, 3, 4, 2)), -1),
    'conv': lambda b, t: b.conv(t(np.arange(42.).reshape(1, 2, 7, 3)), t(np.ones((1, 2, 2, 2, 2))), True),
    'fft': lambda b, t: (b.fft(t(np.arange(120.).reshape(2, 3, 4, 5)), [0, 2]), b.ifft(t(np.ones((2, 3, 2, 2))),
                                                                                        [0, 1, 2, 3])),
    'grid_sample': lambda b, t: [b.grid_sample(t(np.arange(12.).reshape(1, 4, 3, 1)),
                                               t(np.array([[[-1.5, 0.3], [2.2, 4.1], [0.5, 0.5]]])), extrapolation)
                                 for extrapolation in ('zeros', 'boundary', 'periodic', 'symmetric', 'reflect')],
}


@pytest.mark.parametrize('name', list(_COMPOSITIONS))
def test_compositions_match_numpy(name):
    same(_COMPOSITIONS[name](TF, native), _COMPOSITIONS[name](NUMPY, lambda x: x), rtol=1e-4, atol=1e-5)


def test_compositions_say_what_they_cannot_do():
    assert TF.pad(tf.ones(3), [(1, 1)], 'nonsense') is NotImplemented
    assert TF.grid_sample(tf.ones((1, 3, 1)), tf.ones((1, 2, 1)), 'nonsense') is NotImplemented
    with pytest.raises(NotImplementedError, match='TensorFlow convolves 1 to 3 spatial dims, not 4'):
        TF.conv(tf.ones((1, 1, 3, 3, 3, 3)), tf.ones((1, 1, 1, 2, 2, 2, 2)))
    with pytest.raises(ValueError, match=r"scatter mode must be .* but got 'mul'"):
        TF.scatter(tf.ones((1, 3, 1)), tf.zeros((1, 2, 1), tf.int32), tf.ones((1, 2, 1)), 'mul')


# --- functions of functions ---

def _loss_and_output(x, y):
    return TF.sum(x * x * y), (x * 2,)


def test_jacobian_of_a_scalar_with_outputs_and_integer_arguments():
    x = tf.constant([1.0, 2.0, 3.0])
    grad = TF.jacobian(_loss_and_output, [0, 1], get_output=True, is_f_scalar=True)
    doubled, dx, dy = grad(x, 2)  # the integer 2 is differentiated as a float
    same(doubled, np.float32([2, 4, 6]))
    same(dx, np.float32([4, 8, 12]))
    same(dy, np.float32(14))
    same(TF.jacobian(lambda a, b: (TF.sum(a), ()), [1], False, True)(x, tf.ones(2)), (np.zeros(2, np.float32),))


def test_jacobian_of_a_vector_puts_the_loss_axes_first():
    x = tf.constant([1.0, 2.0, 3.0])
    (jacobian,) = TF.jacobian(lambda a: (a * a, ()), [0], get_output=False, is_f_scalar=False)(x)
    same(jacobian, np.diag([2.0, 4.0, 6.0]).astype(np.float32))


def test_gradients_compile_and_custom_gradients_replace_backpropagation():
    x = tf.constant([1.0, 2.0, 3.0])
    compiled = TF.jit_compile_grad(_loss_and_output, [0], False, True)
    same(compiled(x, tf.constant(3.0)), (np.float32([6, 12, 18]),))
    scaled = TF.custom_gradient(lambda a, b: a * b, lambda args, y, dy: (dy * 100, None))
    dx, db = TF.jacobian(lambda a, b: (TF.sum(scaled(a, b)), ()), [0, 1], False, True)(x, tf.ones(3))
    same(dx, np.full(3, 100, np.float32))
    same(db, np.zeros(3, np.float32))  # the gradient function gave none: zeros
    assert TF.stop_gradient(x) is not x


def test_jit_compile_traces_a_graph_once_per_signature():
    traces = []

    def f(a):
        traces.append(tf.executing_eagerly())
        return TF.sum(a * 2)
    compiled = TF.jit_compile(f)
    same(compiled(tf.ones(3)), np.float32(6))
    same(compiled(tf.zeros(3)), np.float32(0))
    assert traces == [False]
    assert TF.is_available(tf.ones(1))
    assert not tf.function(lambda a: tf.constant(TF.is_available(a)))(tf.ones(1))  # graph tensors have no values


def _countdown(remaining, count):
    return remaining - 1, count + 1


@pytest.mark.parametrize('max_iter', [10, 2, None, [0, 1, 5], [3]])
def test_while_loop_matches_the_python_loop_eagerly_and_compiled(max_iter):
    values = (np.int64(3), np.int64(0))
    expected = NUMPY.while_loop(_countdown, values, 50 if max_iter is None else max_iter)
    same(TF.while_loop(_countdown, values, max_iter), expected)
    compiled = TF.jit_compile(lambda r, c: TF.while_loop(_countdown, (r, c), max_iter))
    same(compiled(tf.constant(3, tf.int64), tf.constant(0, tf.int64)), expected)


def test_vectorized_call_maps_the_first_axis_and_broadcasts_size_one():
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((1, 4)).astype(np.float32)
    result = TF.vectorized_call(lambda x, y, scale: TF.sum(x * y) * scale, tf.constant(a), tf.constant(b), scale=2)
    same(result, np.array([2 * np.dot(a[i], b[0]) for i in range(3)]), rtol=1e-5)


def test_numpy_call_runs_numpy_code_also_in_graphs():
    x = tf.constant([1.0, 2.0, 3.0])
    same(TF.numpy_call(np.cumsum, (3,), DType(float, 32), x), np.float32([1, 3, 6]))
    both = TF.jit_compile(lambda a: TF.numpy_call(lambda v: (v.sum(), v * 2), ((), (3,)),
                                                  (DType(float, 64), DType(int, 32)), a))(x)
    same(both, (np.float64(6), np.int32([2, 4, 6])))
    with pytest.raises(tf.errors.InvalidArgumentError, match='not compatible with expected shape'):
        TF.numpy_call(np.cumsum, (2,), DType(float, 32), x)


# --- devices and conversion ---

def test_devices_are_tensorflows_physical_devices():
    cpus = TF.list_devices('CPU')
    assert cpus and cpus[0].memory > 0 and cpus[0].processor_count > 0 and cpus[0].backend is TF
    assert len(TF.list_devices('GPU')) == len(tf.config.list_physical_devices('GPU'))
    assert TF.get_device(tf.ones(2)) == cpus[0] and TF.get_device(3.0) == TF.get_default_device()
    assert TF.get_device_by_ref(cpus[0].ref) is cpus[0]


def test_new_tensors_go_to_the_default_device():
    cpu, previous = TF.list_devices('CPU')[0], TF.get_default_device()
    try:
        assert TF.set_default_device('CPU')
        for created in (TF.zeros((2,)), TF.random_normal((2,)), TF.as_tensor([1.0]), TF.range(3)):
            assert TF.get_device(created) == cpu
        moved = TF.allocate_on_device(tf.ones(2), cpu)
        assert TF.get_device(moved) == cpu
        if not TF.list_devices('GPU'):
            with pytest.warns(RuntimeWarning, match="tensorflow has no 'GPU' device"):
                assert not TF.set_default_device('GPU')
    finally:
        TF.set_default_device(previous)
    with pytest.raises(ValueError, match="belongs to backend numpy, not tensorflow"):
        TF.allocate_on_device(tf.ones(2), NUMPY.get_default_device())


def _aligned_arange(size):
    """`np.arange(size, dtype=float64)` in memory aligned to 64 bytes, which TensorFlow can view."""
    buffer = np.zeros(8 * size + 64, np.uint8)
    start = -buffer.ctypes.data % 64
    array = buffer[start:start + 8 * size].view(np.float64)
    array[:] = np.arange(size)
    return array


def test_dlpack_shares_memory_with_numpy_and_keeps_dtypes():
    array = _aligned_arange(6).reshape(2, 3)  # float64 stays float64: conversion does not apply the precision
    tensor = convert(array, TF)
    assert isinstance(tensor, tf.Tensor) and tensor.dtype == tf.float64
    array[0, 0] = 7  # the tensor views the array's memory
    assert TF.numpy(tensor)[0, 0] == 7
    back = convert(tensor, NUMPY)
    assert not back.flags.writeable  # a view of the tensor's memory, which must not change
    same(back, array)
    read_only = array.view()
    read_only.flags.writeable = False  # DLPack cannot export read-only arrays to TensorFlow: copied instead
    same(TF.from_dlpack(read_only), array)
    same(TF.from_dlpack(np.arange(3).__dlpack__()), np.arange(3))  # a legacy capsule
    assert NUMPY.content_hash(array) == TF.content_hash(convert(array, TF))


def test_dlpack_copies_memory_tensorflow_cannot_view():
    torch = pytest.importorskip('torch')
    offset = np.arange(9.0)[1:]  # 8 bytes past an allocation: TensorFlow's kernels would abort on a view of it
    for source in (offset, torch.arange(9.0)[1:], np.arange(16.0).reshape(4, 4)[:, 1]):
        tensor = TF.from_dlpack(source)
        same(tf.broadcast_to(tensor[None], (2, 8 if tensor.shape[0] == 8 else 4)), np.stack([np.asarray(source)] * 2))
    same(TF.from_dlpack(torch.arange(4.0).expand(2, 4)), np.tile(np.arange(4.0, dtype=np.float32), (2, 1)))
