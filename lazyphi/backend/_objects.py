"""The backend for values that are no numbers: strings, `None` and NumPy object arrays (which may hold anything).

Such values can be stored, stacked, reshaped and compared, but not computed with. The backend also accepts
numbers and NumPy arrays (to compare with them), so it is registered last. Other objects it does not accept:
`choose_backend()` raises for them instead of handing them to a backend that cannot compute with them.
"""

import os
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from ._backend import Backend
from ._device import ComputeDevice, cpu_memory
from ._dtype import DType

_NUMERIC = (int, float, complex, np.generic)  # bool is an int


def _is_tensor(x: Any, only_native: bool = False) -> bool:
    if isinstance(x, np.ndarray):
        return x.dtype.kind == 'O' or not only_native
    if isinstance(x, str) or x is None:
        return True
    return isinstance(x, _NUMERIC) and not only_native  # an object can be compared with a number


def _object_array(x: Any) -> np.ndarray:
    """`x` as a NumPy object array; non-arrays become 0-d arrays holding `x` itself."""
    if isinstance(x, np.ndarray):
        return x.astype(object, copy=False)
    array = np.empty((), object)
    array[()] = x
    return array


def _as_tensor(x: Any, convert_external: bool = True) -> Any:
    return x.astype(object, copy=False) if isinstance(x, np.ndarray) else x


def _dtype(x: Any) -> DType:
    return DType(str) if isinstance(x, str) else DType(object)


def _stack(values: Sequence, axis: int = 0) -> np.ndarray:
    return np.stack([_object_array(v) for v in values], axis)


def _concat(values: Sequence, axis: int) -> np.ndarray:
    return np.concatenate([_object_array(v) for v in values], axis)


def _equal(x: Any, y: Any) -> Any:
    """Element-wise `==` for object arrays; a single `bool` for two plain objects."""
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return np.equal(_object_array(x), _object_array(y))
    return bool(x == y)


class ObjectBackend(Backend):
    """Backend for values that are no numbers: strings, `None` and NumPy object arrays."""

    catch_all = True
    OPS: ClassVar[dict[str, Callable]] = {
        'is_tensor': _is_tensor,
        'as_tensor': _as_tensor,
        'is_available': lambda tensor: True,
        'numpy': _object_array,
        'dtype': _dtype,
        'staticshape': np.shape,
        'shape': np.shape,
        'ndims': np.ndim,
        'reshape': lambda value, shape: np.reshape(_object_array(value), shape),
        'broadcast_to': lambda value, shape: np.broadcast_to(_object_array(value), shape),
        'transpose': lambda tensor, axes: np.transpose(_object_array(tensor), axes),
        'stack': _stack,
        'concat': _concat,
        'equal': _equal,
        'is_module': lambda obj: False,
        'is_sparse': lambda x: False,
        'stop_gradient': lambda value: value,
    }

    def __init__(self) -> None:
        cpu = ComputeDevice(self, 'CPU', 'CPU', cpu_memory(), os.cpu_count() or -1, "Python objects", 'CPU')
        super().__init__('object', [cpu], cpu)

    def get_device(self, tensor: Any) -> ComputeDevice:
        return self._devices[0]


OBJECTS = ObjectBackend()
"""The backend for strings, `None` and NumPy object arrays."""
