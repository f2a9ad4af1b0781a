"""The PyTorch backend: `torch.Tensor`s on the CPU and on CUDA devices.

Importing this module imports torch and registers `TORCH`; `lazyphi` imports it only when a torch tensor
is first seen by `choose_backend()` or the backend is named (`backend_by_name('torch')`).

Operations take torch tensors. The element-wise binary operations also take Python numbers on either
side; every other value (NumPy arrays, lists, numbers) goes through `as_tensor` first, as the math layer
does. Data types follow the NumPy backend: floating-point values made from Python or NumPy data take the
current precision, and tensors created by the backend land on the default device
(`set_default_device`). Results stay on the device of their inputs.

What NumPy cannot do: gradients (`jacobian`, `custom_gradient`, `stop_gradient`), vectorisation with
`torch.vmap` (`vectorized_call`) and calling NumPy code from torch (`numpy_call`). `jit_compile` runs
functions eagerly: `torch.compile` takes seconds to compile per shape and fails on many CPU setups, which
costs more than it saves for the array sizes lazyphi hands to one call (so do `jit_compile_grad` and
`jit_compile_hessian`). `hessian` differentiates autograd's gradient once per parameter; `variable` makes a
`torch.nn.Parameter`.

Sparse matrices are torch's COO, CSR and CSC layouts, batched ones included (`_torch_sparse`); the iterative
linear solvers and `minimize` (SciPy, gradients by autograd) are the base class's; `solve_triangular_sparse` runs
`torch.triangular_solve`, the one torch solver that takes CSR matrices.
"""

import functools
import importlib
import os
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, ClassVar

import torch

from . import _torch_ops as ops
from ._backend import Backend, hessian_result
from ._device import ComputeDevice, cpu_memory
from ._precision import get_precision
from ._registry import register_backend


def _zeros_if_none(gradient: torch.Tensor | None, variable: torch.Tensor) -> torch.Tensor:
    """Autograd reports variables the loss does not depend on with `None`; their gradient is zero."""
    return torch.zeros_like(variable) if gradient is None else gradient


def _watched(args: Sequence, wrt: Sequence[int]) -> tuple[list, list[torch.Tensor]]:
    """`args` with those at `wrt` made float tensors that record gradients, and these tensors."""
    args = list(args)
    for i in wrt:
        arg = ops.as_tensor(args[i])
        if not (arg.is_floating_point() or arg.is_complex()):
            arg = arg.to(ops.FLOAT_BY_PRECISION[get_precision()])
        args[i] = arg.detach().requires_grad_(True)
    return args, [args[i] for i in wrt]


def _detached(output: Any) -> tuple:
    output = tuple(output) if isinstance(output, tuple | list) else (output,)
    return tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in output)


class TorchBackend(Backend):
    """Backend for `torch.Tensor`s; see the module docstring."""

    OPS: ClassVar[dict[str, Callable]] = ops.OPS

    def __init__(self) -> None:
        cpu = ComputeDevice(self, 'CPU', 'CPU', cpu_memory(), os.cpu_count() or -1,
                            f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads", 'cpu')
        gpus = []
        for i in range(torch.cuda.device_count()):
            properties = torch.cuda.get_device_properties(i)
            gpus.append(ComputeDevice(self, properties.name, 'GPU', properties.total_memory,
                                      properties.multi_processor_count,
                                      f"CUDA compute capability {properties.major}.{properties.minor}", f'cuda:{i}'))
        super().__init__('torch', [cpu, *gpus], cpu)
        self._by_ref = {device.ref: device for device in self.devices}

    # --- devices ---

    def set_default_device(self, device: ComputeDevice | str) -> bool:
        """Sets the device tensors created by this backend go to, a `ComputeDevice` or a type like `'GPU'`."""
        if not super().set_default_device(device):
            return False
        ops.use_device(torch.device(self.get_default_device().ref))
        return True

    def get_device(self, tensor: Any) -> ComputeDevice:
        """The device `tensor` lives on; the CPU for values that are no torch tensors."""
        if not isinstance(tensor, torch.Tensor):
            return self._by_ref['cpu']
        return self._by_ref[str(tensor.device)]

    def allocate_on_device(self, tensor: torch.Tensor, device: ComputeDevice) -> torch.Tensor:
        """`tensor` moved to `device` (the tensor itself if it is there already)."""
        if device.backend is not self:
            raise ValueError(f"Device '{device.name}' belongs to backend {device.backend.name}, not torch")
        return tensor.to(device.ref)

    def block_until_ready(self, values: Any) -> None:
        """Waits for queued CUDA kernels; CPU operations run synchronously."""
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def for_pickling(self, native: Any) -> Any:
        """A copy of a view that shows part of its storage: torch pickles a view's whole storage."""
        if isinstance(native, torch.Tensor) and native.untyped_storage().nbytes() > native.numel() * \
                native.element_size():
            return native.clone()
        return native

    def nn_library(self) -> ModuleType:
        """The module of `lazyphi.nn`'s networks and optimizers on torch.

        Looked up by module path, as the registry finds backends by name: a plug-in lookup, so that the
        backend layer imports nothing of the nn layer above it.
        """
        return importlib.import_module('lazyphi.nn._torch')

    # --- functions of functions ---

    def jit_compile(self, f: Callable) -> Callable:
        """Returns a function that runs `f` eagerly (see the module docstring for why nothing is compiled)."""
        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)
        return run

    def jacobian(self, f: Callable, wrt: Sequence[int], get_output: bool, is_f_scalar: bool) -> Callable:
        """Returns `g(*args)` computing the derivatives of `f`'s loss with respect to `args[i]`, `i in wrt`.

        Args:
            f: Returns `(loss, output)`: the value to differentiate and a tuple of further outputs.
            wrt: Indices of the arguments to differentiate by; integer and boolean arguments become floats.
            get_output: Whether `g` returns `(*output, *gradients)` (outputs detached) rather than the gradients.
            is_f_scalar: Whether `loss` is a scalar. Otherwise the gradients have `loss`'s axes first (Jacobians).
        """
        def gradient_of_f(*args: Any) -> tuple:
            args, variables = _watched(args, wrt)
            with torch.enable_grad():
                loss, output = f(*args)
            if is_f_scalar or loss.dim() == 0:
                gradients = torch.autograd.grad(loss.sum(), variables, allow_unused=True)
            else:
                rows = [torch.autograd.grad(entry, variables, retain_graph=True, allow_unused=True)
                        for entry in loss.reshape(-1)]
                gradients = [torch.stack([_zeros_if_none(row[k], v) for row in rows]).reshape(*loss.shape, *v.shape)
                             for k, v in enumerate(variables)]
            gradients = tuple(_zeros_if_none(g, v) for g, v in zip(gradients, variables, strict=True))
            if not get_output:
                return gradients
            return (*_detached(output), *gradients)
        gradient_of_f.__name__ = f"gradient_of_{getattr(f, '__name__', 'f')}"
        return gradient_of_f

    def hessian(self, f: Callable, wrt: Sequence[int], get_output: bool, get_gradient: bool) -> Callable:
        """Returns `h(*args)` computing the Hessians of `f`'s loss by `args[i]`, `i in wrt`, per batch entry.

        The first axis of every argument and of the loss is a batch of independent entries: the loss is summed over
        it, and the second derivatives of an entry's loss by the same entry's parameters are returned.

        Args:
            f: Returns `(loss, output)`: the loss `(batch,)` (or a scalar) and a tuple of further outputs.
            wrt: Indices of the arguments to differentiate by; integer and boolean arguments become floats.
            get_output: Whether `h` returns `output` first.
            get_gradient: Whether `h` returns the gradients (one `(batch, *params)` per argument) before the Hessian.

        Returns:
            A tuple of (`output`,) (the gradients,) the Hessian: `H[i][j]` of shape `(batch, *params_i, *params_j)`.
        """
        def hessian_of_f(*args: Any) -> tuple:
            args, variables = _watched(args, wrt)
            with torch.enable_grad():
                loss, output = f(*args)
                gradients = torch.autograd.grad(loss.sum(), variables, create_graph=True, allow_unused=True)
                gradients = [_zeros_if_none(g, v) for g, v in zip(gradients, variables, strict=True)]
                hessian = []
                for g in gradients:
                    batch, params = g.shape[0], tuple(g.shape[1:])
                    columns = [torch.autograd.grad(entry.sum(), variables, retain_graph=True, allow_unused=True)
                               if entry.requires_grad else (None,) * len(variables)
                               for entry in g.reshape(batch, -1).unbind(1)]
                    hessian.append(tuple(
                        torch.stack([_zeros_if_none(c[j], v) for c in columns], 1).reshape(batch, *params,
                                                                                             *v.shape[1:]).detach()
                        for j, v in enumerate(variables)))
            return hessian_result(_detached(output), [g.detach() for g in gradients], tuple(hessian), get_output,
                                  get_gradient)
        hessian_of_f.__name__ = f"hessian_of_{getattr(f, '__name__', 'f')}"
        return hessian_of_f

    def jit_compile_hessian(self, f: Callable, wrt: Sequence[int], get_output: bool, get_gradient: bool) -> Callable:
        """`hessian`, run eagerly like `jit_compile`."""
        return self.hessian(f, wrt, get_output, get_gradient)

    def jit_compile_grad(self, f: Callable, wrt: Sequence[int], get_output: bool, is_f_scalar: bool) -> Callable:
        """`jacobian`, run eagerly like `jit_compile`."""
        return self.jacobian(f, wrt, get_output, is_f_scalar)

    def custom_gradient(self, f: Callable, gradient: Callable, get_external_cache: Callable | None = None,
                        on_call_skipped: Callable | None = None) -> Callable:
        """Returns `f` with `gradient` used for backpropagation.

        `gradient(x, y, dy)` gets the tuple of `f`'s positional arguments, `f`'s output `y` and the gradient `dy`
        of the loss with respect to `y` (a tuple where `f` returns one), and returns one gradient per argument
        (`None` for arguments without one). The returned function takes positional arguments only.
        """
        class CustomGradient(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *args: Any) -> Any:
                y = f(*args)
                outputs = tuple(y) if isinstance(y, tuple | list) else (y,)
                ctx.tensor_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
                ctx.other_args = [None if isinstance(a, torch.Tensor) else a for a in args]
                ctx.multiple_outputs = isinstance(y, tuple | list)
                ctx.save_for_backward(*[args[i] for i in ctx.tensor_positions], *outputs)
                return outputs if ctx.multiple_outputs else y

            @staticmethod
            def backward(ctx: Any, *dy: torch.Tensor) -> tuple:
                saved, count = ctx.saved_tensors, len(ctx.tensor_positions)
                x = list(ctx.other_args)
                for position, tensor in zip(ctx.tensor_positions, saved[:count], strict=True):
                    x[position] = tensor
                y = saved[count:]
                dx = tuple(gradient(tuple(x), y if ctx.multiple_outputs else y[0],
                                    dy if ctx.multiple_outputs else dy[0]))
                if len(dx) != len(x):
                    raise ValueError(f"The gradient function of {getattr(f, '__name__', f)} returned {len(dx)} "
                                     f"gradients for {len(x)} arguments; return one per argument (None for none)")
                return dx

        @functools.wraps(f)
        def with_custom_gradient(*args: Any) -> Any:
            return CustomGradient.apply(*args)
        return with_custom_gradient

    def vectorized_call(self, f: Callable, *args: Any, output_dtypes: Any = None, **aux_args: Any) -> Any:
        """Calls `f` on the slices of `args` along their first axis with `torch.vmap`; size 1 broadcasts.

        `f` must be written for `torch.vmap`: no conversion of values to Python numbers or NumPy arrays.
        """
        size = self.determine_size(args, 0)
        in_dims = tuple(0 if self.staticshape(a)[0] == size else None for a in args)
        args = [a if dim == 0 else a[0] for a, dim in zip(args, in_dims, strict=True)]
        return torch.vmap(functools.partial(f, **aux_args), in_dims=in_dims)(*args)


TORCH = register_backend(TorchBackend())
"""The backend for PyTorch tensors."""
