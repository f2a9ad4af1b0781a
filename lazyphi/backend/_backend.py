"""The `Backend` base class: what a backend is, and the operations written once in terms of others.

A backend is one small subclass of `Backend` that declares a single table `OPS = {op_name: callable}`.
`Backend.__init__` binds every table entry as an instance attribute, so calling `backend.add(a, b)`
costs exactly what the library function costs. Operations that are compositions of other operations
are written once, here, as methods of the base class.
"""

import importlib
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import _linear_solvers, _minimize
from ._device import ComputeDevice
from ._dtype import DType, combine_types
from ._precision import get_precision
from ._registry import backend_by_name, enter_context, exit_context

# Operations each backend provides through its table (or a method override). The base class holds a
# stub for each that raises NotImplementedError, so that `Backend.add` exists for `supports(Backend.add)`.
NATIVE_OPS = frozenset({
    # tensors, types and devices
    'is_tensor', 'as_tensor', 'is_available', 'numpy', 'content_hash', 'copy', 'to_dlpack', 'from_dlpack',
    'dtype', 'cast',
    'shape', 'staticshape', 'is_module', 'is_sparse', 'get_sparse_format', 'disassemble', 'get_device',
    'allocate_on_device', 'seed', 'numpy_call', 'nn_library', 'prefers_channels_last', 'variable',
    # automatic differentiation
    'jacobian', 'hessian', 'jit_compile_grad', 'jit_compile_hessian', 'stop_gradient',
    # creation
    'random_uniform', 'random_normal', 'zeros', 'zeros_like', 'ones', 'ones_like', 'range', 'linspace', 'meshgrid',
    # shape
    'reshape', 'transpose', 'stack', 'concat', 'flip', 'tile', 'repeat', 'expand_dims', 'pad', 'broadcast_to',
    # reductions, sorting, counting
    'sum', 'prod', 'mean', 'std', 'max', 'min', 'any', 'all', 'argmax', 'argmin', 'cumsum', 'quantile',
    'argsort', 'sort', 'searchsorted', 'unique', 'bincount', 'histogram1d', 'indexed_segment_sum',
    # selection
    'where', 'nonzero', 'boolean_mask', 'gather', 'batched_gather_nd', 'scatter', 'get_diagonal', 'grid_sample',
    # linear algebra and signals
    'tensordot', 'einsum', 'mul_matrix_batched_vector', 'conv', 'fft', 'ifft', 'svd', 'eigvals',
    # element-wise
    'add', 'sub', 'mul', 'div', 'pow', 'mod', 'floordiv', 'and_', 'or_', 'xor', 'invert', 'shift_bits_left',
    'shift_bits_right', 'equal', 'greater_than', 'greater_or_equal', 'maximum', 'minimum', 'clip',
    'abs', 'sign', 'round', 'ceil', 'floor', 'sqrt', 'exp', 'log', 'log2', 'log10', 'erf', 'log_gamma',
    'gamma_inc_l', 'gamma_inc_u', 'sin', 'arcsin', 'cos', 'arccos', 'tan', 'arctan', 'arctan2', 'sinh', 'arcsinh',
    'cosh', 'arccosh', 'tanh', 'arctanh', 'isfinite', 'isnan', 'isinf', 'real', 'imag', 'conj',
    # sparse matrices
    'sparse_coo_tensor', 'sparse_coo_tensor_batched', 'csr_matrix', 'csr_matrix_batched', 'csc_matrix',
    'csc_matrix_batched', 'mul_coo_dense', 'mul_csr_dense', 'coo_to_dense', 'csr_to_coo', 'csr_to_dense',
    # solvers (the iterative linear ones are compositions, below)
    'matrix_solve_least_squares', 'solve_triangular_dense', 'solve_triangular_sparse',
})


_FLOAT_TYPES = {bits: DType(float, bits) for bits in (16, 32, 64)}
_COMPLEX_TYPES = {bits: DType(complex, max(64, 2 * bits)) for bits in (16, 32, 64)}


# what `_linear_solvers.iterative_solve` calls: the loop, the products and the convergence checks
_ITERATIVE_SOLVER_OPS = ('while_loop', 'linear', 'sum', 'maximum', 'isfinite', 'divide_no_nan', 'where', 'zeros',
                         'zeros_like', 'ones', 'tile', 'reshape', 'as_tensor', 'cast', 'dtype', 'staticshape', 'stack',
                         'numpy')


def _native_stub(op: str) -> Callable:
    def not_implemented(self: 'Backend', *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Backend '{self.name}' does not implement '{op}'")
    not_implemented.__name__ = not_implemented.__qualname__ = op
    not_implemented.missing = True
    return not_implemented


def hessian_result(output: Any, gradients: Sequence, hessian: tuple, get_output: bool, get_gradient: bool) -> tuple:
    """What a function made by `Backend.hessian` returns: `(output, gradients, hessian)`, the first two where asked
    for, `output` as a tuple."""
    result = (tuple(output) if isinstance(output, tuple | list) else (output,),) if get_output else ()
    if get_gradient:
        result += (tuple(gradients),)
    return (*result, hessian)


def _composite(*requires: str) -> Callable[[Callable], Callable]:
    """Marks a base-class method written in terms of other operations; it is supported where those are."""
    def mark(method: Callable) -> Callable:
        method.requires = requires
        return method
    return mark


def _fallback(method: Callable) -> Callable:
    """Marks a base-class method that does something harmless where a backend lacks the feature.

    `supports()` reports such features as unsupported although calling them works.
    """
    method.fallback = True
    return method


@dataclass(frozen=True)
class LazyFunction:
    """A table entry naming a function of an optional module, imported on the first call.

    After that first call the backend's attribute is the function itself, so later calls cost nothing extra.
    """

    module: str
    attribute: str

    def load(self) -> Callable:
        return getattr(importlib.import_module(self.module), self.attribute)


class Backend:
    """Delegates low-level array operations to one numerics library.

    Subclasses declare `OPS`, a mapping from operation names to functions of their library (or small
    adapters where the signature differs; `LazyFunction` entries are imported on first use). Each entry
    becomes an instance attribute, so `backend.op` *is* the library function. Calling an operation the
    backend lacks raises `NotImplementedError`; `supports()` tells in advance.

    Every backend accepts Python numbers (`bool`, `int`, `float`, `complex`) as tensors, and none holds
    them natively; `choose_backend()` relies on this.

    A backend is a context manager: inside `with backend:` it is the default backend of the current
    thread or task.

    Args:
        name: Name of the backend, such as `'numpy'`.
        devices: The devices this backend can use.
        default_device: Device new tensors go to; the first of `devices` if not given.
    """

    OPS: ClassVar[Mapping[str, Callable | LazyFunction]] = {}
    catch_all: ClassVar[bool] = False
    """Whether this backend accepts the values of other backends (numbers, NumPy arrays) to store and compare them;
    such backends are consulted last."""

    def __init__(self, name: str, devices: Sequence[ComputeDevice], default_device: ComputeDevice | None = None):
        self._name = name
        self._label = name  # what repr() shows; `profile()` marks the backends it times
        self._devices = tuple(devices)
        self._default_device = default_device or (self._devices[0] if self._devices else None)
        self._ops: dict[str, Callable] = {}
        self._supported: dict[str, bool] = {}
        unknown = sorted(set(self.OPS) - OPERATIONS)
        if unknown:
            raise ValueError(f"{type(self).__name__}.OPS names operations that do not exist: {unknown}")
        for op, function in self.OPS.items():
            if isinstance(function, LazyFunction):
                function = self._lazy_binding(op, function)
            self._ops[op] = function
            setattr(self, op, function)

    def _lazy_binding(self, op: str, reference: LazyFunction) -> Callable:
        def load_and_call(*args: Any, **kwargs: Any) -> Any:
            function = reference.load()
            self._ops[op] = function
            if self.__dict__.get(op) is load_and_call:  # not while a profiler has wrapped it
                setattr(self, op, function)
            return function(*args, **kwargs)
        load_and_call.__name__ = load_and_call.__qualname__ = op
        return load_and_call

    def __reduce__(self) -> tuple:
        # the table holds lambdas; another process resolves the name against its own registry instead
        return backend_by_name, (self._name,)

    @property
    def name(self) -> str:
        return self._name

    @property
    def devices(self) -> tuple[ComputeDevice, ...]:
        return self._devices

    def __repr__(self) -> str:
        return self._label

    __str__ = __repr__

    def __enter__(self) -> 'Backend':
        enter_context(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        exit_context(self)

    # --- Capabilities ---

    def supports(self, feature: str | Callable) -> bool:
        """Tells whether this backend implements an operation.

        Args:
            feature: Name of the operation, or the operation itself (e.g. `Backend.fft`, `NUMPY.fft`).

        Returns:
            `True` if the operation is in this backend's table, overridden by its class, or a base-class
            composition of supported operations.

        Raises:
            ValueError: if `feature` does not name an operation of `Backend`.
        """
        if not isinstance(feature, str):
            if any(function is feature for function in self._ops.values()):
                return True
            feature = getattr(feature, '__name__', repr(feature))
        supported = self._supported.get(feature)
        if supported is None:
            supported = self._supported[feature] = self._implements(feature)
        return supported

    def _implements(self, op: str) -> bool:
        if op in self._ops:
            return True
        attribute = None if op.startswith('_') else getattr(type(self), op, None)
        if attribute is None:
            raise ValueError(f"Not a backend operation: {op!r}")
        if getattr(attribute, 'missing', False) or getattr(attribute, 'fallback', False):
            return False
        return all(self.supports(required) for required in getattr(attribute, 'requires', ()))

    def implemented_ops(self) -> list[str]:
        """Names of all operations this backend supports."""
        return sorted(op for op in OPERATIONS if self.supports(op))

    def requires_fixed_shapes_when_tracing(self) -> bool:
        return False

    # --- Devices ---

    def list_devices(self, device_type: str | None = None) -> list[ComputeDevice]:
        """Lists the devices this backend can use, optionally only those of `device_type` ('CPU', 'GPU', 'TPU', in
        any case: torch's and tensordict's 'cpu' works too)."""
        if device_type is None:
            return list(self._devices)
        if not isinstance(device_type, str) or device_type.upper() not in ('CPU', 'GPU', 'TPU'):
            raise ValueError(f"device_type must be 'CPU', 'GPU', 'TPU' (in any case) or None but got {device_type!r}")
        return [device for device in self._devices if device.device_type == device_type.upper()]

    def get_default_device(self) -> ComputeDevice:
        return self._default_device

    def set_default_device(self, device: ComputeDevice | str) -> bool:
        """Sets the device new tensors are allocated on.

        Args:
            device: A `ComputeDevice` of this backend, or a device type such as `'GPU'`.

        Returns:
            Whether the device was set; `False` (with a `RuntimeWarning`) if no device of that type exists.
        """
        if isinstance(device, str):
            matching = self.list_devices(device)
            if not matching:
                warnings.warn(f"{self.name} has no '{device}' device; the default device stays "
                              f"{self._default_device.name}", RuntimeWarning, stacklevel=2)
                return False
            device = matching[0]
        if device.backend is not self:
            raise ValueError(f"Device '{device.name}' belongs to backend {device.backend.name}, not {self.name}")
        self._default_device = device
        return True

    def get_device_by_ref(self, ref: Any) -> ComputeDevice:
        for device in self._devices:
            if device.ref == ref:
                return device
        refs = [d.ref for d in self._devices]
        raise KeyError(f"{self.name} has no device with ref {ref!r}. Refs of its devices: {refs}")

    # --- Data types ---

    @property
    def precision(self) -> int:
        """The current floating-point precision in bits, see `get_precision()`."""
        return get_precision()

    @property
    def float_type(self) -> DType:
        """The floating-point type of the current precision."""
        return _FLOAT_TYPES[get_precision()]

    @property
    def complex_type(self) -> DType:
        """The complex type whose components have the current precision (at least 32 bits each)."""
        return _COMPLEX_TYPES[get_precision()]

    def combine_types(self, *dtypes: DType) -> DType:
        return combine_types(*dtypes, fp_precision=get_precision())

    @_composite('dtype', 'cast')
    def auto_cast(self, *tensors: Any, bool_to_int: bool = False, int_to_float: bool = False) -> list:
        """Casts `tensors` to their common data type (floating-point values to the current precision).

        Args:
            bool_to_int: Cast to `int32` if all tensors are boolean.
            int_to_float: Cast to the float type if the common type is an integer.
        """
        result_type = self.combine_types(*[self.dtype(t) for t in tensors])
        if result_type.kind is bool and bool_to_int:
            result_type = DType(int, 32)
        if result_type.kind is int and int_to_float:
            result_type = self.float_type
        if result_type.kind in (object, str):  # never turn everything into strings
            return list(tensors)
        return [self.cast(t, result_type) for t in tensors]

    @property
    def as_registered(self) -> 'Backend':
        """The registered backend of the same name, importing it on demand."""
        return backend_by_name(self._name)

    # --- Calls ---

    def call(self, f: Callable, *args: Any, name: str | None = None) -> Any:
        """Calls `f(*args)`. Going through the backend makes the call visible to the profiler under `name`."""
        return f(*args)

    def block_until_ready(self, values: Any) -> None:
        """Waits until asynchronously computed `values` are ready; a no-op for eager backends."""

    def for_pickling(self, native: Any) -> Any:
        """What to pickle for `native`: a copy where pickling a view would write all of the memory it views into.

        The native itself here: NumPy pickles a view's own elements, and JAX and TensorFlow slices are copies.
        """
        return native

    @_fallback
    def jit_compile(self, f: Callable) -> Callable:
        """Returns a compiled version of `f`; backends without a compiler return `f` unchanged."""
        return f

    @_fallback
    def custom_gradient(self, f: Callable, gradient: Callable, get_external_cache: Callable | None = None,
                        on_call_skipped: Callable | None = None) -> Callable:
        """Returns `f` with `gradient` used for backpropagation; backends without autodiff return `f` unchanged.

        `gradient(x, y, dy)` receives the tuple of positional arguments of `f`, its output and the gradient of
        the loss with respect to that output, and returns one gradient per argument (`None` where there is none).
        """
        return f

    @_composite('stack', 'staticshape')
    def vectorized_call(self, f: Callable, *args: Any, output_dtypes: Any = None, **aux_args: Any) -> Any:
        """Calls `f` once per entry along the first axis of `args` (size 1 broadcasts) and stacks the results."""
        size = self.determine_size(args, 0)
        return self.stack([f(*[a[min(i, self.staticshape(a)[0] - 1)] for a in args], **aux_args) for i in range(size)])

    @_composite('staticshape')
    def determine_size(self, tensors: Sequence, axis: int) -> int:
        """The common size of `tensors` along `axis`, where size 1 broadcasts."""
        sizes = {self.staticshape(t)[axis] for t in tensors}
        larger = sizes - {1}
        if len(larger) > 1:
            raise ValueError(f"Sizes along axis {axis} do not broadcast: {sorted(sizes)}")
        return larger.pop() if larger else 1

    # --- Compositions of other operations ---

    @_composite('staticshape')
    def ndims(self, tensor: Any) -> int:
        return len(self.staticshape(tensor))

    @_composite('staticshape')
    def size(self, tensor: Any) -> int:
        return math.prod(self.staticshape(tensor))

    @_composite('staticshape', 'dtype')
    def sizeof(self, tensor: Any) -> int:
        """Bytes the elements of `tensor` take: its number of elements times the size of its data type."""
        dtype = self.dtype(tensor)
        if dtype.itemsize is None:
            raise ValueError(f"Elements of type {dtype} have no fixed size in bytes")
        return self.size(tensor) * dtype.itemsize

    @_composite('reshape')
    def flatten(self, x: Any) -> Any:
        return self.reshape(x, (-1,))

    @_composite('cast')
    def to_float(self, x: Any) -> Any:
        """Casts `x` to floating point of the current precision."""
        return self.cast(x, self.float_type)

    @_composite('cast')
    def to_int32(self, x: Any) -> Any:
        return self.cast(x, DType(int, 32))

    @_composite('cast')
    def to_int64(self, x: Any) -> Any:
        return self.cast(x, DType(int, 64))

    @_composite('cast')
    def to_complex(self, x: Any) -> Any:
        return self.cast(x, self.complex_type)

    @_composite('equal', 'where')
    def divide_no_nan(self, x: Any, y: Any) -> Any:
        """Computes `x / y`, with 0 wherever `y` is 0."""
        zero = self.equal(y, 0)
        return self.where(zero, 0, x / self.where(zero, 1, y))

    # --- sparse matrices as phiml's backends take them: batched coordinate (COO) and compressed-row (CSR) parts ---
    @_composite('zeros', 'scatter', 'staticshape', 'dtype')
    def coo_to_dense(self, indices: Any, values: Any, shape: Sequence[int], contains_duplicates: bool) -> Any:
        """Dense arrays `(batch, *shape, channels)` of coordinate matrices: `values (batch, nnz, channels)` at
        `indices (batch, nnz, len(shape))`; repeated coordinates add up where `contains_duplicates`."""
        batch, _, channels = self.staticshape(values)
        base = self.zeros((batch, *shape, channels), self.dtype(values))
        return self.scatter(base, indices, values, 'add' if contains_duplicates else 'update')

    @_composite('zeros', 'ones', 'scatter', 'cumsum', 'reshape', 'stack', 'staticshape', 'dtype', 'cast')
    def csr_to_coo(self, column_indices: Any, row_pointers: Any) -> Any:
        """Coordinates `(batch, nnz, 2)` (row, column) of compressed-row matrices given by `column_indices (batch,
        nnz)` and `row_pointers (batch, rows + 1)`, where each row's entries start in `column_indices`."""
        batch, nnz = self.staticshape(column_indices)
        rows = self.staticshape(row_pointers)[1] - 1
        index_type = self.dtype(column_indices)
        # a 1 where each row after the first starts (one slot past the end for empty last rows), summed up
        starts = self.reshape(row_pointers[:, 1:rows], (batch, rows - 1, 1))
        marks = self.scatter(self.zeros((batch, nnz + 1, 1), index_type), starts,
                             self.ones((batch, rows - 1, 1), index_type), 'add')
        row_of_entry = self.cumsum(marks[:, :nnz, 0], 1)
        return self.stack([self.cast(row_of_entry, index_type), column_indices], -1)

    @_composite('zeros', 'ones', 'scatter', 'cumsum', 'reshape', 'stack', 'staticshape', 'dtype', 'cast')
    def csr_to_dense(self, column_indices: Any, row_pointers: Any, values: Any, shape: Sequence[int],
                     contains_duplicates: bool = False) -> Any:
        """Dense arrays `(batch, rows, cols, channels)` of compressed-row matrices (see `csr_to_coo`)."""
        return self.coo_to_dense(self.csr_to_coo(column_indices, row_pointers), values, shape, contains_duplicates)

    @_composite('zeros', 'scatter', 'batched_gather_nd', 'reshape', 'staticshape', 'dtype')
    def mul_coo_dense(self, indices: Any, values: Any, shape: Sequence[int], dense: Any) -> Any:
        """Coordinate matrices times dense ones: `indices (batch, nnz, 2)` and `values (batch, nnz, channels)` of
        matrices of `shape (rows, cols)` times `dense (batch, cols, channels, dense_cols)` gives `(batch, rows,
        channels, dense_cols)`; repeated coordinates add up."""
        batch, nnz, channels = self.staticshape(values)
        dense_batch, cols, _, dense_cols = self.staticshape(dense)
        flat = self.reshape(dense, (dense_batch, cols, channels * dense_cols))
        picked = self.batched_gather_nd(flat, indices[..., 1:2])  # each entry's column of `dense`
        products = self.reshape(picked, (-1, nnz, channels, dense_cols)) * values[..., None]
        products = self.reshape(products, (-1, nnz, channels * dense_cols))
        out_batch = max(batch, dense_batch)
        base = self.zeros((out_batch, shape[0], channels * dense_cols), self.dtype(products))
        summed = self.scatter(base, indices[..., 0:1], products, 'add')
        return self.reshape(summed, (out_batch, shape[0], channels, dense_cols))

    @_composite('zeros', 'ones', 'scatter', 'cumsum', 'reshape', 'stack', 'staticshape', 'dtype', 'cast',
                'batched_gather_nd')
    def mul_csr_dense(self, column_indices: Any, row_pointers: Any, values: Any, shape: Sequence[int],
                      dense: Any) -> Any:
        """Compressed-row matrices (see `csr_to_coo`) times dense ones (see `mul_coo_dense`)."""
        return self.mul_coo_dense(self.csr_to_coo(column_indices, row_pointers), values, shape, dense)

    @_composite('exp')
    def sigmoid(self, x: Any) -> Any:
        return 1 / (1 + self.exp(-x))

    @_composite('maximum', 'log', 'exp', 'abs')
    def softplus(self, x: Any) -> Any:
        """Computes `log(1 + exp(x))` without overflow for large `x`."""
        return self.maximum(x, 0) + self.log(1 + self.exp(-self.abs(x)))

    @_composite('dtype', 'as_tensor', 'cast', 'gather', 'exp', 'log_gamma')
    def factorial(self, x: Any) -> Any:
        """`x!` element-wise; exact for integers (up to 12! for 32 bits, 20! for 64), via the gamma function else."""
        dtype = self.dtype(x)
        if dtype.kind is int:
            table = [math.factorial(i) for i in range(13 if dtype.bits <= 32 else 21)]
            return self.gather(self.cast(self.as_tensor(table), dtype), x, 0)
        return self.exp(self.log_gamma(self.to_float(x) + 1))

    @_composite('linspace')
    def linspace_without_last(self, start: Any, stop: Any, number: int) -> Any:
        """`number` evenly spaced values from `start` (included) to `stop` (excluded)."""
        return self.linspace(start, stop, number + 1)[:-1]

    @_composite('staticshape', 'tile')
    def tile_to(self, x: Any, axis: int, size: int) -> Any:
        """Tiles `x` along `axis` until it has `size` entries; `size` must be a multiple of the current size."""
        current = self.staticshape(x)[axis]
        if current == size:
            return x
        if size < current or size % current:
            raise ValueError(f"Cannot tile axis {axis} of size {current} to size {size}: not a multiple")
        return self.tile(x, [size // current if i == axis else 1 for i in range(self.ndims(x))])

    @_composite('staticshape', 'pad')
    def pad_to(self, x: Any, axis: int, new_size: int, fill_value: Any) -> Any:
        """Pads `x` with `fill_value` at the upper end of `axis`, or crops it, to `new_size` entries."""
        shape = self.staticshape(x)
        if new_size > shape[axis]:
            widths = [(0, new_size - shape[axis]) if i == axis else (0, 0) for i in range(len(shape))]
            return self.pad(x, widths, 'constant', fill_value)
        if new_size < shape[axis]:
            return x[tuple(slice(new_size) if i == axis else slice(None) for i in range(len(shape)))]
        return x

    @_composite('staticshape')
    def unstack(self, tensor: Any, axis: int = 0, keepdims: bool = False) -> tuple:
        """Splits `tensor` into its slices along `axis`."""
        ndims = len(self.staticshape(tensor))
        if not -ndims <= axis < ndims:
            raise ValueError(f"axis {axis} is out of range for a tensor with {ndims} dims")
        axis %= ndims
        before = (slice(None),) * axis
        if keepdims:
            return tuple(tensor[(*before, slice(i, i + 1))] for i in range(self.staticshape(tensor)[axis]))
        return tuple(tensor[(*before, i)] for i in range(self.staticshape(tensor)[axis]))

    @_composite('stack')
    def unravel_index(self, flat_index: Any, shape: Sequence[int]) -> Any:
        """Converts flat indices to multi-indices, stacked along a new last axis."""
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        return self.stack([flat_index // stride % size for stride, size in zip(strides, shape, strict=True)], -1)

    @_composite('as_tensor', 'cast', 'dtype', 'sum', 'clip', 'all', 'where')
    def ravel_multi_index(self, multi_index: Any, shape: Sequence[int], mode: str | int = 'undefined') -> Any:
        """Converts multi-indices `(batch..., index)` to flat indices `(batch...)` of the dtype of `multi_index`.

        Args:
            mode: What to do with indices outside `shape`: `'undefined'`, `'periodic'` (wrap), `'clamp'`,
                or an `int` returned for every such index.
        """
        if not (isinstance(mode, int) or mode in ('undefined', 'periodic', 'clamp')):
            raise ValueError(f"mode must be 'undefined', 'periodic', 'clamp' or an int but got {mode!r}")
        dtype = self.dtype(multi_index)
        sizes = self.cast(self.as_tensor(list(shape)), dtype)
        if mode == 'periodic':
            multi_index = multi_index % sizes
        elif mode == 'clamp':
            multi_index = self.clip(multi_index, 0, sizes - 1)
        strides = self.cast(self.as_tensor([math.prod(shape[i + 1:]) for i in range(len(shape))]), dtype)
        result = self.sum(multi_index * strides, -1)
        if isinstance(mode, int):
            result = self.where(self.all((multi_index >= 0) & (multi_index < sizes), -1), result, mode)
        return self.cast(result, dtype)

    @_composite('gather')
    def gather_1d(self, values: Any, indices: Any) -> Any:
        return self.gather(values, indices, 0)

    @_composite('batched_gather_nd')
    def gather_nd(self, values: Any, indices: Any) -> Any:
        """Gathers `values (spatial..., channels)` at `indices (indices, multi_index)`."""
        return self.batched_gather_nd(values[None], indices[None])[0]

    @_composite('batched_gather_nd')
    def batched_gather_1d(self, values: Any, indices: Any) -> Any:
        """Gathers `values (batch, spatial)` at `indices (batch, indices)`."""
        return self.batched_gather_nd(values[:, :, None], indices[:, :, None])[..., 0]

    @_composite()
    def gather_by_component_indices(self, values: Any, *component_indices: Any) -> Any:
        return values[component_indices]

    @_composite()
    def batch_gather(self, tensor: Any, batches: int | Sequence[int]) -> Any:
        return tensor[[batches] if isinstance(batches, int) else batches, ...]

    @_composite()
    def multi_slice(self, tensor: Any, slices: tuple) -> Any:
        """`tensor[slices]` for a tuple of slices (negative steps included), integers, `None` and `Ellipsis`."""
        return tensor[slices]

    @_composite('scatter')
    def scatter_nd(self, base_grid: Any, indices: Any, values: Any, mode: str) -> Any:
        """`scatter` without batch dim: `base_grid (spatial..., channels)`, `indices (updates, index)`."""
        return self.scatter(base_grid[None], indices[None], values[None], mode)[0]

    @_composite('scatter')
    def scatter_1d_scalar(self, base_grid: Any, indices: Any, values: Any, mode: str) -> Any:
        """`scatter` into a 1D `base_grid` at 1D `indices`."""
        return self.scatter(base_grid[None, :, None], indices[None, :, None], values[None, :, None], mode)[0, :, 0]

    @_composite('scatter')
    def scatter_nd_scalar(self, base_grid: Any, indices: Any, values: Any, mode: str) -> Any:
        """`scatter` into `base_grid (spatial...)` without channels at `indices (updates, index)`."""
        return self.scatter(base_grid[None, ..., None], indices[None], values[None, :, None], mode)[0, ..., 0]

    @_composite('bincount', 'stack', 'staticshape')
    def batched_bincount(self, x: Any, weights: Any, bins: int) -> Any:
        """`bincount` for each entry of the first axis of `x` (and `weights`)."""
        size = self.determine_size([x] if weights is None else [x, weights], 0)
        counts = []
        for i in range(size):
            w = None if weights is None else weights[min(i, self.staticshape(weights)[0] - 1)]
            counts.append(self.bincount(x[min(i, self.staticshape(x)[0] - 1)], w, bins))
        return self.stack(counts)

    @_composite('equal', 'invert')
    def not_equal(self, x: Any, y: Any) -> Any:
        return self.invert(self.equal(x, y))

    @_composite('mul_matrix_batched_vector', 'stack', 'staticshape')
    def linear(self, lin: Any, vector: Any) -> Any:
        """Applies `lin` (a function, a dense or sparse matrix, or a matrix per batch entry) to `vector (batch, n)`."""
        if callable(lin):
            return lin(vector)
        if isinstance(lin, tuple | list):
            vectors = self.unstack(vector)
            return self.stack([self.mul_matrix_batched_vector(m, v) for m, v in zip(lin, vectors, strict=True)])
        if len(self.staticshape(lin)) != 2:
            raise ValueError(f"lin must be a matrix but has shape {self.staticshape(lin)}")
        return self.mul_matrix_batched_vector(lin, vector)

    @_composite('is_sparse', 'solve_triangular_dense')
    def solve_triangular(self, matrix: Any, rhs: Any, lower: bool, unit_diagonal: bool) -> Any:
        """`solve_triangular_sparse` for a sparse `matrix` of this backend, else `solve_triangular_dense`."""
        if self.is_sparse(matrix):
            return self.solve_triangular_sparse(matrix, rhs, lower, unit_diagonal)
        return self.solve_triangular_dense(matrix, rhs, lower, unit_diagonal)

    @_composite(*_ITERATIVE_SOLVER_OPS)
    def linear_solve(self, method: str, lin: Any, y: Any, x0: Any, rtol: Any, atol: Any, max_iter: Any,
                     pre: Any) -> _linear_solvers.SolveResult:
        """Solves the linear systems `lin(x) = y`, one per batch entry, iteratively.

        Args:
            method: 'auto' (= 'CG-adaptive'), 'CG', 'CG-adaptive', 'biCG-stab' (= 'biCG-stab(1)') or
                'biCG-stab(l)' for BiCGStab(l) of a higher degree `l`.
            lin: A matrix `(rows, cols)` for all entries (dense, or sparse where the backend has sparse
                matrices), a list of one matrix per entry, or a function of `(batch, cols)` natives.
            y: The right-hand sides `(batch, rows)`.
            x0: The initial guesses `(batch, cols)`; batch 1 broadcasts.
            rtol: Relative tolerances `(batch,)` or one number: an entry has converged when `|y - lin(x)| <=
                max(rtol * |y|, atol)` ('CG': `rtol` times the initial residual's norm).
            atol: Absolute tolerances `(batch,)` or one number.
            max_iter: Iteration limits, a NumPy integer array `(checkpoints, batch)` (or `(batch,)`). With several
                checkpoints the results get a first axis listing the state at each.
            pre: None, or a preconditioner: a function of `(batch, rows)` natives approximating the inverse of `lin`
                (or an object with such an `apply` method, as phiml's `Preconditioner`).

        Returns:
            A `SolveResult` (method, x, residual, iterations, function_evaluations, converged, diverged, message).
        """
        solver, order = _linear_solvers.method_of(method)
        if solver == 'CG':
            return self.conjugate_gradient(lin, y, x0, rtol, atol, max_iter, pre)
        if solver == 'CG-adaptive':
            return self.conjugate_gradient_adaptive(lin, y, x0, rtol, atol, max_iter, pre)
        return self.bi_conjugate_gradient(lin, y, x0, rtol, atol, max_iter, pre, poly_order=order)

    @_composite(*_ITERATIVE_SOLVER_OPS)
    def conjugate_gradient(self, lin: Any, y: Any, x0: Any, rtol: Any, atol: Any, max_iter: Any,
                           pre: Any) -> _linear_solvers.SolveResult:
        """The (preconditioned) conjugate gradient method for symmetric positive definite systems; see
        `linear_solve`. Its relative tolerance is relative to the initial residual."""
        return _linear_solvers.iterative_solve(self, 'CG', lin, y, x0, rtol, atol, max_iter, pre)

    @_composite(*_ITERATIVE_SOLVER_OPS)
    def conjugate_gradient_adaptive(self, lin: Any, y: Any, x0: Any, rtol: Any, atol: Any, max_iter: Any,
                                    pre: Any) -> _linear_solvers.SolveResult:
        """Conjugate gradients measuring each step against the residual (Hestenes and Stiefel's variant, phiml's
        'CG-adaptive'), which also settles many nearly symmetric systems; see `linear_solve`. With a preconditioner
        it runs the preconditioned `conjugate_gradient`, as phiml does."""
        return _linear_solvers.iterative_solve(self, 'CG-adaptive', lin, y, x0, rtol, atol, max_iter, pre)

    @_composite(*_ITERATIVE_SOLVER_OPS)
    def bi_conjugate_gradient(self, lin: Any, y: Any, x0: Any, rtol: Any, atol: Any, max_iter: Any, pre: Any,
                              poly_order: int = 2) -> _linear_solvers.SolveResult:
        """The stabilised biconjugate gradient method BiCGStab(l) for general systems; see `linear_solve`.

        Args:
            poly_order: The degree `l` of the stabilising polynomial: 1 is BiCGStab, 2 (the default, as phiml's)
                and more suit systems with complex eigenvalues. An iteration costs `2 l` evaluations of `lin`.
                Plain BiCG (0) is not offered: it needs the transposed operator.
        """
        if not isinstance(poly_order, int) or poly_order < 1:
            raise ValueError(f"bi_conjugate_gradient takes poly_order >= 1 (plain BiCG, 0, needs the transposed "
                             f"operator and is not offered), got {poly_order!r}")
        return _linear_solvers.iterative_solve(self, 'biCG-stab', lin, y, x0, rtol, atol, max_iter, pre,
                                               order=poly_order)

    @_composite('jacobian', 'numpy', 'as_tensor', 'cast', 'dtype', 'sum', 'is_tensor')
    def minimize(self, method: str, f: Callable, x0: Any, atol: Any, max_iter: Any,
                 trj: bool) -> _linear_solvers.SolveResult | list:
        """Minimises `f` from `x0 (batch, parameters)`: a `scipy.optimize.minimize` run per batch entry (in threads,
        each evaluation of `f` covering all entries waiting for one), the gradients from `jacobian`.

        Args:
            method: 'auto' (= 'L-BFGS-B'), a SciPy method taking gradients ('L-BFGS-B', 'BFGS', 'CG', 'SLSQP',
                'trust-constr') or one without ('Nelder-Mead', 'Powell', 'COBYLA').
            f: Takes parameters `(batch, parameters)` and returns the losses `(batch,)`; entries are independent.
            x0: The initial parameters `(batch, parameters)`.
            atol: SciPy's `tol`, per entry `(batch,)` or one number.
            max_iter: The most iterations, per entry `(batch,)` (or the last row of `(checkpoints, batch)`).
            trj: Whether to return the trajectory: a `SolveResult` for the start and each iteration.

        Returns:
            A `SolveResult` with `x (batch, parameters)` and the final losses as `residual (batch,)`, or a list of
            them with `trj`.
        """
        return _minimize.minimize(self, method, f, x0, atol, max_iter, trj)

    @_composite('copy')
    def copy_leaves(self, tree: Any, only_mutable: bool = False) -> Any:
        """Copies every tensor in a tree of tuples, lists and dicts."""
        return _map_tree(lambda x: self.copy(x, only_mutable=only_mutable), tree)

    @_composite('stop_gradient')
    def stop_gradient_tree(self, tree: Any) -> Any:
        return _map_tree(self.stop_gradient, tree)

    @_composite('stack')
    def stack_leaves(self, trees: Sequence, axis: int = 0) -> Any:
        """Stacks corresponding tensors of trees with equal structure."""
        first = trees[0]
        if isinstance(first, tuple | list):
            return type(first)(self.stack_leaves([tree[i] for tree in trees], axis) for i in range(len(first)))
        if isinstance(first, dict):
            return {key: self.stack_leaves([tree[key] for tree in trees], axis) for key in first}
        return self.stack(trees, axis)

    @_composite('any', 'stack', 'copy', 'stop_gradient')
    def while_loop(self, loop: Callable, values: tuple, max_iter: int | Sequence[int] | None) -> Any:
        """Runs `values = loop(*values)` while any of `values[0]` is true (non-zero), at most `max_iter` times.

        Args:
            loop: Takes the values and returns new ones of the same structure, shapes and data types.
            values: The initial values, a tuple.
            max_iter: `None` to loop until the condition fails, an `int` to stop after that many iterations, or a
                sequence of iteration counts (checkpoints). With checkpoints the first iteration runs whatever the
                condition, and checkpoints the loop did not reach repeat the values of the last one it reached
                (the final values if it reached none).

        Returns:
            The final values; with checkpoints, the values at each of them in increasing order, stacked along a
            new first axis. No gradients flow through the loop.
        """
        values = self.stop_gradient_tree(tuple(values))
        if max_iter is None or isinstance(max_iter, int):
            return self.stop_gradient_tree(self._run_loop(loop, values, max_iter, 0)[0])
        trajectory, count, done = [], 0, 0  # count: iterations run (a tensor where traced); done: asked for
        for checkpoint in sorted(max_iter):
            if checkpoint > 0 and done == 0:
                values, count, done = tuple(loop(*values)), 1, 1
            if checkpoint > done:
                values, count = self._run_loop(loop, values, checkpoint - done, count)
                done = checkpoint
            entry = self._select_tree(count == checkpoint, values, trajectory[-1]) if trajectory else values
            trajectory.append(self.copy_leaves(entry, only_mutable=True))
        return self.stop_gradient_tree(self.stack_leaves(trajectory))

    def _run_loop(self, loop: Callable, values: tuple, iterations: int | None, count: Any) -> tuple[tuple, Any]:
        """Runs `loop` while any of `values[0]` is true, at most `iterations` times (`None`: no limit).

        Returns the values and `count` plus the number of iterations run. Backends that trace loops override this.
        """
        run = 0
        while (iterations is None or run < iterations) and self.any(values[0]):
            values, run = tuple(loop(*values)), run + 1
        return values, count + run

    def _select_tree(self, condition: Any, if_true: Any, if_false: Any) -> Any:
        """`if_true` where `condition` holds, else `if_false`: trees of equal structure. Overridden where traced."""
        return if_true if condition else if_false


def _map_tree(function: Callable, tree: Any) -> Any:
    if isinstance(tree, tuple | list):
        return type(tree)(_map_tree(function, item) for item in tree)
    if isinstance(tree, dict):
        return {key: _map_tree(function, item) for key, item in tree.items()}
    return function(tree)


for _op in NATIVE_OPS:
    if not hasattr(Backend, _op):
        setattr(Backend, _op, _native_stub(_op))

OPERATIONS = frozenset(
    name for name, attribute in vars(Backend).items()
    if callable(attribute) and not name.startswith('_') and name not in ('supports', 'implemented_ops')
)
"""Names of all operations a backend may implement."""
