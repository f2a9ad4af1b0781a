"""What is particular to the JAX backend: 64-bit mode, the PRNG key, transformations, devices, DLPack, lazy import.

The operations it shares with the other backends are checked by `test_backend_contract.py`.
"""

import os
import pickle
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

jax = pytest.importorskip('jax')
jnp = pytest.importorskip('jax.numpy')

from lazyphi.backend import (  # noqa: E402  (after the skip: the module imports jax)
    NUMPY,
    DType,
    backend_by_name,
    choose_backend,
    convert,
    default_backend,
    precision,
    set_global_default_backend,
)
from lazyphi.backend.jax import JAX  # noqa: E402

RNG = np.random.default_rng(7)


def _count_down(remaining, count):
    return remaining - 1, count + 1


def _aligned(size: int, dtype=np.float64) -> np.ndarray:
    """A writable NumPy array whose data starts on a 64-byte boundary, which JAX needs to share it."""
    itemsize = np.dtype(dtype).itemsize
    buffer = np.empty(size * itemsize + 64, np.uint8)
    offset = -buffer.ctypes.data % 64
    array = buffer[offset:offset + size * itemsize].view(dtype)
    array[:] = RNG.standard_normal(size)
    return array


# --- registry ---

def test_registered_under_its_name_and_chosen_for_jax_arrays():
    assert backend_by_name('jax') is JAX and backend_by_name('JAX') is JAX
    assert choose_backend(jnp.ones(2)) is JAX
    assert choose_backend(np.ones(2), jnp.ones(2), 1.5) is JAX  # holding one JAX array decides
    assert choose_backend(np.ones(2)) is NUMPY and choose_backend(1.5) is NUMPY
    assert JAX.is_tensor(np.ones(2)) and JAX.is_tensor([1, jnp.ones(())]) and not JAX.is_tensor(np.ones(2), True)
    assert not JAX.is_tensor(np.array([None])) and not JAX.is_tensor('a')
    assert pickle.loads(pickle.dumps(JAX)) is JAX


def test_default_backend_by_name_and_context():
    with JAX:
        assert default_backend() is JAX and choose_backend(1.0, prefer_default=True) is JAX
    try:
        assert set_global_default_backend('jax') is JAX and default_backend() is JAX
    finally:
        set_global_default_backend(NUMPY)


def test_lazy_import():
    code = textwrap.dedent("""
        import sys
        import lazyphi, lazyphi.math
        assert 'jax' not in sys.modules and 'lazyphi.backend.jax' not in sys.modules
        import jax.numpy as jnp
        assert 'lazyphi.backend.jax' not in sys.modules  # importing jax alone does not load the backend
        from lazyphi.backend import choose_backend
        assert choose_backend(jnp.ones(2)).name == 'jax' and 'lazyphi.backend.jax' in sys.modules
    """)
    subprocess.run([sys.executable, '-c', code], check=True)


# --- 64-bit values and precision ---

def test_x64_is_enabled_so_64_bit_inputs_keep_their_type():
    assert jax.config.read('jax_enable_x64')
    assert JAX.as_tensor(np.arange(3)).dtype == np.int64
    assert JAX.cast(np.arange(3), DType(int, 64)).dtype == np.int64
    with precision(64):
        assert JAX.as_tensor(np.ones(2)).dtype == np.float64
        assert JAX.as_tensor(np.ones(2, np.float32)).dtype == np.float64
        assert JAX.as_tensor(1.5).dtype == np.float64
    assert JAX.dtype(jnp.ones(2, jnp.float64)) == DType(float, 64)


@pytest.mark.parametrize('bits', [16, 32, 64])
def test_creation_and_conversion_follow_the_precision_like_numpy(bits):
    with precision(bits):
        for make in (lambda b: b.as_tensor(1.5), lambda b: b.as_tensor([1.5, 2]), lambda b: b.as_tensor(np.ones(2)),
                     lambda b: b.zeros((2,)), lambda b: b.ones((2,)), lambda b: b.linspace(0, 1, 3),
                     lambda b: b.random_normal((2,), None), lambda b: b.random_uniform((2,), 0, 1, None),
                     lambda b: b.to_complex(np.ones(2)), lambda b: b.fft(np.arange(4), (0,)),
                     lambda b: b.as_tensor(1j), lambda b: b.as_tensor(3), lambda b: b.range(4)):
            assert np.asarray(make(JAX)).dtype == np.asarray(make(NUMPY)).dtype


def test_fft_keeps_the_precision_of_its_input():
    assert JAX.fft(jnp.ones(4, jnp.float32), (0,)).dtype == np.complex64
    assert JAX.fft(jnp.ones(4, jnp.float64), (0,)).dtype == np.complex128
    assert JAX.ifft(jnp.ones(4, jnp.complex64), (0,)).dtype == np.complex64
    np.testing.assert_allclose(JAX.fft(np.arange(6.).reshape(2, 3), [0, 1]), np.fft.fft2(np.arange(6.).reshape(2, 3)),
                               rtol=1e-5)


def test_python_numbers_stay_numbers_without_conversion():
    assert JAX.as_tensor(2.5, convert_external=False) == 2.5
    assert isinstance(JAX.as_tensor(2.5), jax.Array)


# --- randomness ---

def test_seed_makes_random_values_reproducible():
    JAX.seed(11)
    first = [JAX.random_normal((5,), None), JAX.random_uniform((5,), 0, 1, None)]
    JAX.seed(11)
    again = [JAX.random_normal((5,), None), JAX.random_uniform((5,), 0, 1, None)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], JAX.random_normal((5,), None))  # each call draws a fresh key
    JAX.seed(None)
    assert not np.array_equal(JAX.random_normal((5,), None), first[0])


def test_random_values_honour_dtype_and_range():
    uniform = JAX.random_uniform((1000,), 2, 3, None)
    assert uniform.dtype == np.float32 and bool(jnp.all((uniform >= 2) & (uniform < 3)))
    integers = JAX.random_uniform((1000,), 0, 5, DType(int, 64))
    assert integers.dtype == np.int64 and set(np.unique(integers)) == {0, 1, 2, 3, 4}
    assert JAX.random_uniform((3,), 0, 1, DType(bool)).dtype == bool
    z = JAX.random_normal((4000,), DType(complex, 128))
    assert z.dtype == np.complex128 and abs(float(jnp.std(z.real)) - 1) < .1 and abs(float(jnp.std(z.imag)) - 1) < .1
    with pytest.raises(ValueError, match="random_normal supports float and complex types, not int32"):
        JAX.random_normal((3,), DType(int, 32))
    with pytest.raises(ValueError, match=r"random_uniform supports .* not str"):
        JAX.random_uniform((3,), 0, 1, DType(str))


def test_random_draws_in_threads_use_distinct_keys():
    draws = []
    threads = [threading.Thread(target=lambda: draws.append(np.asarray(JAX.random_normal((8,), None))))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({d.tobytes() for d in draws}) == 8


def test_random_inside_jit_draws_its_key_while_tracing():
    noisy = JAX.jit_compile(lambda x: x + JAX.random_normal((3,), None))
    first = noisy(jnp.zeros(3, jnp.float32))
    np.testing.assert_array_equal(first, noisy(jnp.zeros(3, jnp.float32)))  # the key is a constant of the trace
    assert JAX.is_available(JAX.random_normal((2,), None))  # no tracer leaked into the backend's key


# --- transformations ---

def test_jit_compile_traces_once_per_signature():
    traces = []

    def f(x, y):
        traces.append(JAX.is_available(x))
        return JAX.sum(x * y, 0)
    compiled = JAX.jit_compile(f)
    assert JAX.supports('jit_compile') and JAX.requires_fixed_shapes_when_tracing()
    np.testing.assert_allclose(compiled(jnp.arange(3.), 2.), 6.)
    np.testing.assert_allclose(compiled(jnp.ones(3), 3.), 9.)
    assert traces == [False]


@pytest.mark.parametrize('get_output', [True, False])
def test_jacobian_of_a_scalar_loss(get_output):
    def loss(x, y):
        return JAX.sum(x ** 2 * y), (x * y, y)
    gradient = JAX.jacobian(loss, [0, 1], get_output, True)
    result = gradient(jnp.arange(3.), jnp.float64(2))
    expected = (jnp.array([0., 2, 4]), 2., jnp.array([0., 4, 8]), 5.)
    for actual, wanted in zip(result, expected if get_output else expected[2:], strict=True):
        np.testing.assert_allclose(actual, wanted)


def test_jacobian_of_a_vector_loss_puts_loss_dims_first_and_differentiates_integers():
    jacobian = JAX.jacobian(lambda x: (x[:2] * 3, ()), [0], False, False)
    (matrix,) = jacobian(jnp.arange(4))  # int argument: differentiated as float of the current precision
    assert matrix.shape == (2, 4) and matrix.dtype == np.float32
    np.testing.assert_array_equal(matrix, [[3, 0, 0, 0], [0, 3, 0, 0]])
    compiled = JAX.jit_compile_grad(lambda x: (JAX.sum(x ** 3), ()), [0], False, True)
    np.testing.assert_allclose(compiled(jnp.array([1., 2.]))[0], [3., 12.])


def test_gradients_by_complex_arguments_are_conjugated():
    (gradient,) = JAX.jacobian(lambda z: (JAX.real(z * jnp.conj(z) * 1j + z), ()), [0], False, True)(jnp.array(1 + 2j))
    # d/dz* convention of PyTorch: the gradient of real(z) is 1, of real(i |z|^2) is 0
    np.testing.assert_allclose(gradient, 1)


def test_custom_gradient_replaces_the_derivative():
    seen = []

    def gradient(args, output, d_output):
        seen.append(len(args))
        return 10 * d_output, None
    square = JAX.custom_gradient(lambda x, n: x ** n, gradient)
    assert JAX.supports('custom_gradient')
    np.testing.assert_allclose(square(3., 2), 9.)
    np.testing.assert_allclose(jax.grad(square)(3., 2), 10.)
    assert seen == [2]


def test_stop_gradient():
    np.testing.assert_allclose(jax.grad(lambda x: JAX.stop_gradient(x) * x)(3.), 3.)
    tree = JAX.stop_gradient_tree({'a': (jnp.ones(2), [2.])})
    assert isinstance(tree['a'][1], list)


def test_vectorized_call_maps_the_first_axis_and_broadcasts_size_one():
    matrices, vector = jnp.asarray(RNG.standard_normal((3, 2, 4))), jnp.asarray(RNG.standard_normal((1, 4)))
    result = JAX.vectorized_call(lambda m, v, scale: scale * (m @ v), matrices, vector, scale=2.)
    np.testing.assert_allclose(result, 2 * np.einsum('bij,j->bi', matrices, vector[0]), rtol=1e-6)


def test_numpy_call_runs_on_the_host_also_when_traced():
    def host_only(a, axis):
        assert isinstance(a, np.ndarray)
        return np.cumsum(a, axis)
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    expected = np.cumsum(np.arange(6.).reshape(2, 3), 1)
    eager = JAX.numpy_call(host_only, (2, 3), DType(float, 32), x, axis=1)
    assert isinstance(eager, jax.Array) and eager.dtype == np.float32
    np.testing.assert_allclose(eager, expected)
    traced = jax.jit(lambda x: JAX.numpy_call(lambda a: (a.sum(), a.max()), [(), ()], [DType(float, 64)] * 2, x))
    np.testing.assert_allclose(traced(x), (15., 5.))
    mapped = JAX.vectorized_call(lambda row: JAX.numpy_call(np.cumsum, (3,), DType(float, 32), row), x)
    np.testing.assert_allclose(mapped, expected)


@pytest.mark.parametrize('max_iter', [10, 2, [0, 1, 5], [5, 0]])
def test_while_loop_traced_matches_the_python_loop(max_iter):
    start = (np.int64(3), np.int64(0))
    expected = NUMPY.while_loop(_count_down, start, max_iter)
    eager = JAX.while_loop(_count_down, tuple(jnp.asarray(v) for v in start), max_iter)
    traced = JAX.jit_compile(lambda r, c: JAX.while_loop(_count_down, (r, c), max_iter))(*start)
    for result in (eager, traced):
        for actual, wanted in zip(result, expected, strict=True):
            np.testing.assert_array_equal(actual, wanted)


def test_while_loop_without_limit_runs_until_the_condition_fails():
    remaining = jnp.array([3, 1])
    final, count = JAX.while_loop(lambda r, c: (jnp.maximum(r - 1, 0), c + 1), (remaining, jnp.int64(0)), None)
    np.testing.assert_array_equal(final, [0, 0])
    assert int(count) == 3


def test_traceable_selection_with_fixed_lengths():
    @JAX.jit_compile
    def select(mask, repeats):
        return (JAX.boolean_mask(jnp.arange(4.), mask, 0, new_length=5, fill_value=-1),
                JAX.nonzero(mask, length=2), JAX.repeat(jnp.arange(3.), repeats, 0, new_length=5))
    masked, nonzero, repeated = select(jnp.array([True, False, True, True]), jnp.array([1, 0, 2]))
    np.testing.assert_array_equal(masked, [0, 2, 3, -1, -1])
    np.testing.assert_array_equal(nonzero, [[0], [2]])
    np.testing.assert_array_equal(repeated, [0, 2, 2, 0, 0])


# --- operations whose JAX implementation differs most from NumPy's ---

@pytest.mark.parametrize('extrapolation', ['undefined', 'zeros', 'boundary', 'periodic', 'symmetric', 'reflect'])
def test_grid_sample_agrees_with_numpy(extrapolation):
    grid, coordinates = RNG.standard_normal((2, 5, 4, 3)).astype(np.float32), RNG.uniform(-4, 8, (1, 30, 2))
    expected = NUMPY.grid_sample(grid, coordinates, extrapolation)
    actual = JAX.grid_sample(jnp.asarray(grid), jnp.asarray(coordinates), extrapolation)
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)
    assert JAX.grid_sample(grid, coordinates, 'nonsense') is NotImplemented


@pytest.mark.parametrize('kernel_batch', [1, 2])
@pytest.mark.parametrize('zero_padding', [True, False])
def test_conv_agrees_with_numpy(kernel_batch, zero_padding):
    value = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    kernel = RNG.standard_normal((kernel_batch, 4, 3, 3, 2)).astype(np.float32)
    expected = NUMPY.conv(value, kernel, zero_padding)
    actual = JAX.conv(jnp.asarray(value), jnp.asarray(kernel), zero_padding)
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)


def test_scatter_modes_agree_with_numpy():
    grid, values = RNG.standard_normal((2, 4, 5, 3)), RNG.standard_normal((2, 6, 3))
    indices = RNG.integers(0, 4, (1, 6, 2))
    for mode in ('add', 'max', 'min'):
        np.testing.assert_allclose(JAX.scatter(grid, indices, values, mode), NUMPY.scatter(grid, indices, values, mode))
    unique = np.array([[[0, 1], [2, 3]]])
    np.testing.assert_allclose(JAX.scatter(grid, unique, values[:, :2], 'update'),
                               NUMPY.scatter(grid, unique, values[:, :2], 'update'))
    with pytest.raises(ValueError, match=r"scatter mode must be .* but got 'mul'"):
        JAX.scatter(grid, indices, values, 'mul')


# --- devices ---

def test_devices_report_what_jax_reports():
    cpus = JAX.list_devices('CPU')
    assert cpus and all(d.backend is JAX and d.ref.platform == 'cpu' for d in cpus)
    assert cpus[0].memory > 2 ** 20 and cpus[0].processor_count == os.cpu_count()
    assert repr(cpus[0]).startswith("jax device 'CPU:0' (CPU) | ") and 'JAX' in cpus[0].description  # phiml's layout
    gpus = [d for d in jax.local_devices() if d.platform == 'gpu']
    assert [d.ref for d in JAX.list_devices('GPU')] == gpus
    assert JAX.get_default_device().ref == jax.local_devices()[0]
    for gpu in JAX.list_devices('GPU'):
        assert gpu.memory > 0 and gpu.processor_count > 0


def test_new_arrays_go_to_the_default_device_and_can_be_moved():
    cpu = JAX.list_devices('CPU')[0]
    previous = JAX.get_default_device()
    try:
        assert JAX.set_default_device('CPU') and JAX.get_default_device() == cpu
        for array in (JAX.zeros((2,)), JAX.as_tensor([1, 2]), JAX.random_normal((2,), None), JAX.range(3)):
            assert JAX.get_device(array) == cpu
        moved = JAX.allocate_on_device(jnp.ones(2), cpu)
        assert JAX.get_device(moved) == cpu
    finally:
        JAX.set_default_device(previous)
    assert JAX.get_device(3.0) == previous
    with pytest.raises(ValueError, match="Device 'CPU' belongs to backend numpy, not jax"):
        JAX.allocate_on_device(jnp.ones(2), NUMPY.list_devices()[0])


@pytest.mark.skipif(any(d.platform == 'gpu' for d in jax.local_devices()), reason="a GPU is present")
def test_setting_a_missing_device_type_warns():
    with pytest.warns(RuntimeWarning, match="jax has no 'GPU' device"):
        assert JAX.set_default_device('GPU') is False


# --- DLPack and copies ---

def test_convert_shares_memory_with_numpy_through_dlpack():
    array = _aligned(1000)
    shared = convert(array, JAX)
    assert isinstance(shared, jax.Array) and np.shares_memory(np.asarray(shared), array)
    back = convert(shared, NUMPY)
    assert isinstance(back, np.ndarray) and np.shares_memory(back, array)
    copied = convert(array, JAX, use_dlpack=False)  # a copy through NumPy, of the same dtype
    assert not np.shares_memory(np.asarray(copied), array)
    assert copied.dtype == array.dtype
    np.testing.assert_array_equal(copied, array)


def test_read_only_numpy_arrays_are_copied_not_refused():
    array = _aligned(16)
    view = array.view()
    view.flags.writeable = False  # NumPy does not export read-only arrays through DLPack
    converted = convert(view, JAX)
    np.testing.assert_array_equal(converted, array)
    assert not np.shares_memory(np.asarray(converted), array)


def test_copy_and_numpy():
    x = jnp.arange(3.)
    assert JAX.copy(x, only_mutable=True) is x  # JAX arrays never change
    copied = JAX.copy(x)
    assert copied is not x and np.array_equal(copied, x)
    host = np.ones(3)
    assert isinstance(JAX.copy(host, only_mutable=True), jax.Array)
    numpy = JAX.numpy(x)
    assert isinstance(numpy, np.ndarray) and not numpy.flags.writeable
    assert JAX.block_until_ready((x, 1)) is None


def test_content_hash_equals_numpys_for_equal_data():
    data = RNG.standard_normal((3, 4)).astype(np.float32)
    assert JAX.content_hash(jnp.asarray(data)) == NUMPY.content_hash(data)
    assert JAX.content_hash(jnp.asarray(data.T)) == NUMPY.content_hash(np.ascontiguousarray(data.T))
    assert JAX.content_hash(jnp.asarray(data, jnp.float64)) != NUMPY.content_hash(data)
