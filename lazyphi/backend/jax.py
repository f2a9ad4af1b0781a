"""The JAX backend: `jax.Array`s (and tracers of them), plus NumPy arrays, Python numbers and lists of them.

Importing this module registers `JAX`; `lazyphi` imports it only when a JAX value is first seen by
`choose_backend()` or `'jax'` is named (`backend_by_name`, `set_global_default_backend`).

**64-bit values.** Importing this module turns on JAX's `jax_enable_x64` flag. Without it JAX silently
truncates float64 to float32 and int64 to int32, so `precision(64)` would have no effect and data types
would follow rules other than `NUMPY`'s. The flag is global: after the import, JAX code outside lazyphi
also gets 64-bit defaults (`jnp.ones(3)` is float64, `jnp.arange(3)` int64). lazyphi itself always names
the float type of the current precision when it creates floating-point arrays, so its own results do not
depend on the flag's default widths.

**Randomness.** The backend holds one PRNG key; every random operation splits a fresh sub-key off it
(thread-safe), and `seed()` restarts the sequence. Inside `jit_compile` the sub-key is drawn while
tracing, so a compiled function returns the same random values on every call.

**Devices.** New arrays go to the backend's default device (`set_default_device`); where that is JAX's
own default device they are left uncommitted, so JAX may still move them as usual.

**Sparse matrices** are `jax.experimental.sparse`'s BCOO and BCSR (batched ones included) and CSC
(`_jax_sparse`), imported on first use. Left out: `csc_matrix_batched` (JAX's CSC has no batches),
`solve_triangular_sparse` (JAX has no sparse triangular solve) and `variable` (JAX arrays are values; there is
nothing to make trainable). `hessian` takes a forward-mode product of the gradient per parameter, mapped with
`vmap`; the iterative linear solvers and `minimize` are the base class's.
"""

import importlib
import os
import platform
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax import lax
from jax.core import Tracer

from . import _jax_ops as ops
from ._backend import Backend
from ._device import ComputeDevice, cpu_memory
from ._registry import register_backend


def _device_type(device: jax.Device) -> str:
    return {'cpu': 'CPU', 'tpu': 'TPU'}.get(device.platform, 'GPU')


def _compute_device(backend: Backend, device: jax.Device) -> ComputeDevice:
    device_type = _device_type(device)
    stats = device.memory_stats() or {}  # None on CPUs
    memory = stats.get('bytes_limit', cpu_memory() if device_type == 'CPU' else -1)
    processors = getattr(device, 'core_count', None) or -1  # multiprocessors of a GPU
    if device_type == 'CPU':
        processors = os.cpu_count() or -1
    host = f" on {platform.machine() or 'unknown machine'}" if device_type == 'CPU' else ''
    description = f"JAX {jax.__version__} {device.device_kind}{host}, id={device.id}"
    return ComputeDevice(backend, f"{device_type}:{device.id}", device_type, memory, processors, description, device)


class JaxBackend(Backend):
    """Backend for `jax.Array`s, accepting NumPy arrays, Python numbers and lists of them as inputs."""

    OPS: ClassVar[dict[str, Callable]] = ops.OPS

    def __init__(self) -> None:
        found = dict.fromkeys([*jax.local_devices(), *jax.local_devices(backend='cpu')])
        devices = [_compute_device(self, device) for device in found]
        super().__init__('jax', devices, devices[0])

    def set_default_device(self, device: ComputeDevice | str) -> bool:
        """Sets the device arrays created by this backend go to, a `ComputeDevice` or a type like `'GPU'`."""
        if not super().set_default_device(device):
            return False
        ops.use_device(self.get_default_device().ref)
        return True

    def get_device(self, tensor: Any) -> ComputeDevice:
        """The device holding `tensor`; the default device for values that are not (yet) on one."""
        if not isinstance(tensor, jax.Array) or isinstance(tensor, Tracer):
            return self._default_device
        return self.get_device_by_ref(min(tensor.devices(), key=lambda device: device.id))

    def allocate_on_device(self, tensor: Any, device: ComputeDevice) -> jax.Array:
        """Returns `tensor` on `device` (a copy unless it is there already)."""
        if device.backend is not self:
            raise ValueError(f"Device '{device.name}' belongs to backend {device.backend.name}, not jax")
        return jax.device_put(tensor, device.ref)

    def nn_library(self) -> ModuleType:
        """`lazyphi.nn`'s network module for JAX, `lazyphi.nn._jax`."""
        # looked up by name, as the registry finds backends: the backend layer must not import lazyphi.nn
        return importlib.import_module('lazyphi.nn._jax')

    def vectorized_call(self, f: Callable, *args: Any, output_dtypes: Any = None, **aux_args: Any) -> Any:
        """`jax.vmap` of `f` along the first axis of `args`; arguments of size 1 there broadcast."""
        return ops.vmap_first_axis(lambda *a: f(*a, **aux_args), *args)

    def _run_loop(self, loop: Callable, values: tuple, iterations: int | None, count: Any) -> tuple[tuple, Any]:
        """The Python loop of `Backend` on concrete values; a `lax.while_loop` on traced ones or without a limit."""
        if iterations is not None and all(self.is_available(v) for v in jax.tree.leaves(values)):
            return super()._run_loop(loop, values, iterations, count)

        def condition(state: tuple) -> Any:
            run, current = state
            proceed = jnp.any(current[0])
            return proceed if iterations is None else proceed & (run < iterations)
        run, values = lax.while_loop(condition, lambda state: (state[0] + 1, tuple(loop(*state[1]))),
                                     (jnp.asarray(0), values))
        return values, count + run

    def _select_tree(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        if isinstance(condition, bool):
            return if_true if condition else if_false
        return jax.tree.map(lambda a, b: jnp.where(condition, a, b), if_true, if_false)


JAX = register_backend(JaxBackend())
"""The backend for JAX arrays."""
