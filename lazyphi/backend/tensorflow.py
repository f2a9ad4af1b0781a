"""The TensorFlow backend: `tf.Tensor` and `tf.Variable` values; NumPy arrays and Python numbers are converted on use.

Importing this module imports TensorFlow and registers `TENSORFLOW`. lazyphi imports it the first time
`choose_backend()` meets a TensorFlow value or the backend is asked for by name, so `import lazyphi` never
loads TensorFlow.

Results have the data types `NUMPY` gives. TensorFlow does not promote mixed operand types, so element-wise
entries first cast their operands to the types NumPy's ufunc would pick (`ufunc.resolve_dtypes`, see
`_tensorflow_types`), and reductions accumulate small integers in 64 bits as NumPy does. What TensorFlow lacks
(quantiles, sorted `unique`, histograms, FFTs over arbitrary axes, edge and periodic padding, ...) is composed of
TensorFlow operations in the operation table (`_tensorflow_ops`); no operation passes data through NumPy except
`numpy_call`, whose purpose that is. Sparse matrices are `tf.SparseTensor`s (`_tensorflow_sparse`); left out are
`csr_matrix`, `csc_matrix` and their batched forms (TensorFlow has no public compressed sparse type) and
`solve_triangular_sparse` (nor a sparse triangular solve). The iterative linear solvers and `minimize` are the base
class's.

Beyond NumPy: `jit_compile` (`tf.function`), gradients (`jacobian` with `tf.GradientTape`, `hessian` with nested
tapes, `custom_gradient`, `stop_gradient`), `variable` (`tf.Variable`), `while_loop` (`tf.while_loop`, also in
compiled functions), `vectorized_call` (`tf.vectorized_map`) and `numpy_call` (`tf.numpy_function`).
"""

import importlib
import os

# TensorFlow's C++ code logs INFO lines (CPU instruction sets, oneDNN) when imported; keep a user's own setting.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')

import platform
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import tensorflow as tf

from . import _tensorflow_ops as ops
from ._backend import Backend, LazyFunction, hessian_result
from ._device import ComputeDevice, cpu_memory
from ._registry import register_backend
from ._tensorflow_types import NATIVE, bind_default_device, to_native


def _compute_device(backend: Backend, physical: Any) -> ComputeDevice:
    """The `ComputeDevice` of a `tf.config.PhysicalDevice`; its ref is the name `tf.device()` takes."""
    ref = physical.name.replace('/physical_device:', '/device:')
    name = ref.rpartition('/device:')[2]  # such as 'GPU:0'
    if physical.device_type == 'CPU':
        return ComputeDevice(backend, name, 'CPU', cpu_memory(), os.cpu_count() or -1,
                             f"TensorFlow {tf.__version__} on {platform.machine() or 'unknown machine'}", ref)
    details = tf.config.experimental.get_device_details(physical)
    capability = details.get('compute_capability')
    description = details.get('device_name', physical.device_type) + (
        f" (compute capability {capability[0]}.{capability[1]})" if capability else '')
    return ComputeDevice(backend, name, physical.device_type, -1, -1, description, ref)  # TF reports neither


class TensorFlowBackend(Backend):
    """Backend for TensorFlow tensors and variables, accepting NumPy arrays and Python numbers as well.

    New tensors (creation, random values, conversions) are placed on the default device; other operations run
    where TensorFlow places them (next to their inputs, or on the first GPU).
    """

    OPS: ClassVar[dict[str, Callable | LazyFunction]] = ops.OPS

    def __init__(self) -> None:
        devices = [_compute_device(self, physical) for physical in tf.config.list_physical_devices()
                   if physical.device_type in ('CPU', 'GPU', 'TPU')]
        # TensorFlow places operations on the first GPU if there is one; the default device agrees
        default = next((d for d in devices if d.device_type == 'GPU'), devices[0])
        super().__init__('tensorflow', devices, default)
        bind_default_device(self.get_default_device)
        self._device_by_name: dict[str, ComputeDevice] = {}

    def get_device(self, tensor: Any) -> ComputeDevice:
        """The device holding `tensor`; the default device for values not yet placed (numbers, graph tensors)."""
        name = getattr(tensor, 'device', '') if isinstance(tensor, NATIVE) else ''
        if not name:
            return self.get_default_device()
        device = self._device_by_name.get(name)
        if device is None:
            spec = tf.DeviceSpec.from_string(name)
            device = self.get_device_by_ref(f'/device:{spec.device_type}:{spec.device_index or 0}')
            self._device_by_name[name] = device
        return device

    def allocate_on_device(self, tensor: Any, device: ComputeDevice) -> Any:
        """A copy of `tensor` on `device` (`tensor` itself if it is there already)."""
        if device.backend is not self:
            raise ValueError(f"Device '{device.name}' belongs to backend {device.backend.name}, not tensorflow")
        if isinstance(tensor, NATIVE) and self.get_device(tensor) == device:
            return tensor
        with tf.device(device.ref):
            return tf.identity(tensor)

    def nn_library(self) -> Any:
        """The module of `lazyphi.nn` for TensorFlow networks (Keras models), `lazyphi.nn._tensorflow`."""
        # looked up by name, as the registry finds backend modules: the backend layer does not import lazyphi.nn
        return importlib.import_module('lazyphi.nn._tensorflow')

    # --- compilation, differentiation and control flow ---

    def jit_compile(self, f: Callable) -> Callable:
        """`f` traced into a TensorFlow graph (`tf.function`) on its first call per input signature.

        AutoGraph is off: `f` runs as written while tracing, so control flow that depends on tensor values must
        use `while_loop` (or TensorFlow's own functions).
        """
        return tf.function(f, autograph=False)

    def jacobian(self, f: Callable, wrt: Sequence[int], get_output: bool, is_f_scalar: bool) -> Callable:
        """Returns `g(*args)` computing the derivatives of `f`'s first output with respect to `args[i]`, `i in wrt`.

        Args:
            f: Returns `(loss, output)`: the value to differentiate and a tuple of further outputs.
            wrt: Indices of the arguments to differentiate by; integer and boolean arguments become floats.
            get_output: Whether `g` returns `(*output, *gradients)` rather than the gradients alone.
            is_f_scalar: Whether `loss` is a scalar. Otherwise the gradients have `loss`'s axes first (Jacobians).
        """
        def gradient_of_f(*args: Any) -> tuple:
            args = [self._differentiable(a) if i in wrt else a for i, a in enumerate(args)]
            sources = [args[i] for i in wrt]
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                for source in sources:
                    tape.watch(source)
                loss, output = f(*args)
            scalar = is_f_scalar or not isinstance(loss, NATIVE) or loss.shape.rank == 0
            differentiate = tape.gradient if scalar else tape.jacobian
            gradients = tuple(tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g  # gathers' gradients
                              for g in differentiate(loss, sources, unconnected_gradients=tf.UnconnectedGradients.ZERO))
            if not get_output:
                return gradients
            return (*(output if isinstance(output, tuple | list) else (output,)), *gradients)
        gradient_of_f.__name__ = f"gradient_of_{getattr(f, '__name__', 'f')}"
        return gradient_of_f

    def hessian(self, f: Callable, wrt: Sequence[int], get_output: bool, get_gradient: bool) -> Callable:
        """Hessians of `f`'s loss by `args[i]`, `i in wrt`, per entry of the batch (first) axis, with nested
        `tf.GradientTape`s; see `TorchBackend.hessian` for the arguments and results."""
        def hessian_of_f(*args: Any) -> tuple:
            args = [self._differentiable(a) if i in wrt else a for i, a in enumerate(args)]
            sources = [args[i] for i in wrt]
            zero = tf.UnconnectedGradients.ZERO
            with tf.GradientTape(persistent=True, watch_accessed_variables=False) as outer:
                for source in sources:
                    outer.watch(source)
                with tf.GradientTape(watch_accessed_variables=False) as inner:
                    for source in sources:
                        inner.watch(source)
                    loss, output = f(*args)
                gradients = inner.gradient(loss, sources, unconnected_gradients=zero)
            # entries are independent: the batch Jacobian of an entry's gradient is that entry's Hessian
            hessian = tuple(tuple(outer.batch_jacobian(g, s, unconnected_gradients=zero) for s in sources)
                            for g in gradients)
            del outer
            return hessian_result(output, gradients, hessian, get_output, get_gradient)
        hessian_of_f.__name__ = f"hessian_of_{getattr(f, '__name__', 'f')}"
        return hessian_of_f

    def jit_compile_hessian(self, f: Callable, wrt: Sequence[int], get_output: bool, get_gradient: bool) -> Callable:
        """`hessian(f, ...)` traced into a TensorFlow graph."""
        return self.jit_compile(self.hessian(f, wrt, get_output, get_gradient))

    def _differentiable(self, value: Any) -> Any:
        value = to_native(value)
        return self.to_float(value) if self.dtype(value).kind in (bool, int) else value

    def jit_compile_grad(self, f: Callable, wrt: Sequence[int], get_output: bool, is_f_scalar: bool) -> Callable:
        """`jacobian(f, ...)` traced into a TensorFlow graph."""
        return self.jit_compile(self.jacobian(f, wrt, get_output, is_f_scalar))

    def custom_gradient(self, f: Callable, gradient: Callable, get_external_cache: Callable | None = None,
                        on_call_skipped: Callable | None = None) -> Callable:
        """Returns `f` with backpropagation through `gradient(x, y, dy) -> dx` (`tf.custom_gradient`).

        `x` is the tuple of inputs, `y` the output of `f` and `dy` its cotangent (a tuple if `f` returns one);
        `dx` holds one gradient per input. The returned function takes positional arguments only.
        """
        @tf.custom_gradient
        def with_custom_gradient(*x: Any) -> tuple:
            y = f(*x)

            def backward(*dy: Any) -> tuple:
                dx = gradient(x, y, tuple(dy) if isinstance(y, tuple | list) else dy[0])
                return tuple(dx)
            return y, backward
        return with_custom_gradient

    def _run_loop(self, loop: Callable, values: tuple, iterations: int | None, count: Any) -> tuple[tuple, Any]:
        """A `tf.while_loop`, in eager mode and inside `jit_compile` alike."""
        run, values = tf.while_loop(lambda run, current: ops.any_true(current[0]),
                                    lambda run, current: (run + 1, tuple(loop(*current))),
                                    (tf.constant(0), values), maximum_iterations=iterations)
        return tuple(values), count + run

    def _select_tree(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        if isinstance(condition, bool):
            return if_true if condition else if_false
        return tf.nest.map_structure(lambda a, b: tf.where(condition, a, b), if_true, if_false)

    def vectorized_call(self, f: Callable, *args: Any, output_dtypes: Any = None, **aux_args: Any) -> Any:
        """`f` mapped over the first axis of `args` with `tf.vectorized_map`; arguments of size 1 there broadcast."""
        size = self.determine_size(args, 0)
        mapped = [i for i, a in enumerate(args) if self.staticshape(a)[0] == size]
        fixed = [a[0] if i not in mapped else None for i, a in enumerate(args)]

        def call_for_entry(entries: tuple) -> Any:
            call_args = list(fixed)
            for i, entry in zip(mapped, entries, strict=True):
                call_args[i] = entry
            return f(*call_args, **aux_args)
        return tf.vectorized_map(call_for_entry, tuple(to_native(args[i]) for i in mapped))


TENSORFLOW = TensorFlowBackend()
"""The backend for TensorFlow tensors."""

register_backend(TENSORFLOW)
