"""Leaving and entering named tensors: natives and NumPy arrays in chosen layouts, backends and devices,
and printing values."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ..backend import (
    Backend,
    ComputeDevice,
    choose_backend,
    set_global_default_backend,
)
from ._shape import Shape, resolve_dims
from ._structure import expand_tensor, transpose
from ._tensor import ELEMENTWISE, NUMBER_TYPES, Dense, Op, Tensor, dispatch, read_only_native
from ._tree import tree_map


def native(value):
    """The backend native of a tensor (in its dims' order), or `value` itself for a number or native."""
    if isinstance(value, Tensor):
        return value.native()
    if isinstance(value, (tuple, list, dict)) or hasattr(type(value), '__dataclass_fields__'):
        return tree_map(lambda t: t.native(), value)
    return value


def numpy(value):
    """The values of a tensor as a NumPy array (in its dims' order); natives converted; NumPy arrays as they are."""
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (tuple, list, dict)) or hasattr(type(value), '__dataclass_fields__'):
        return tree_map(lambda t: t.numpy(), value)
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, NUMBER_TYPES):
        return np.asarray(value)
    return choose_backend(value).numpy(value)


def _groups(value_shape: Shape, groups) -> list[tuple]:
    """Each group of `groups` as (the dim names it packs, the dims of a given Shape it lists), `...` resolved."""
    resolved, ellipsis = [], None
    for i, group in enumerate(groups):
        if group is Ellipsis:
            if ellipsis is not None:
                raise ValueError('reshaped_native(): groups may contain ... only once')
            ellipsis = i
            resolved.append(None)
        elif group is None or group == ():
            resolved.append(((), None))
        elif isinstance(group, Shape):
            resolved.append((group.names, group))
        elif isinstance(group, str):
            resolved.append((resolve_dims(group), None))
        elif callable(group):
            resolved.append((resolve_dims(group, value_shape), None))
        else:
            resolved.append((resolve_dims(group, value_shape), None))
    listed = {n for g in resolved if g is not None for n in g[0]}
    if ellipsis is not None:
        resolved[ellipsis] = (tuple(n for n in value_shape.names if n not in listed), None)
    return resolved


def reshaped_native(value: Tensor, groups, force_expand=True, to_numpy: bool = False):
    """The native of `value` with its dims packed into one axis per group, in the order of `groups`.

    Args:
        value: the tensor.
        groups: one entry per axis of the result: a dim name, a Shape (dims packed, in its order), a dim
            filter such as `spatial`, `...` (every dim not listed elsewhere, once), or None / () (an axis
            of size 1). Every dim of `value` must be in some group.
        force_expand: `True`: dims a group lists that `value` lacks are repeated to their size (for a Shape
            with sizes); `False`: only where the group has some of its dims; a sequence of dims: for the
            groups holding one of them.
        to_numpy: return a NumPy array.
    """
    groups = _groups(value.shape, groups)
    uncovered = [n for n in value.shape.names if not any(n in g[0] for g in groups)]
    if uncovered:
        raise ValueError(f'reshaped_native(): the groups {groups} leave out the dims {uncovered} of {value.shape}')
    expand_names = set(resolve_dims(force_expand, value.shape)) if not isinstance(force_expand, bool) else None
    added = []
    for names, given in groups:
        missing = [n for n in names if n not in value.shape.names]
        if not missing or given is None:
            continue
        present = len(missing) < len(names)
        expand = force_expand is True or present or (expand_names is not None and bool(expand_names & set(names)))
        if expand:
            added.append(given[missing])
    if added:
        value = expand_tensor(value, *added)
    order = [n for names, _ in groups for n in names if n in value.shape.names]
    dense = value._dense()
    native_value = dense._native_in(order) if order else dense._native
    backend = dense.backend
    sizes = [math.prod(value.shape.get_size(n) for n in names if n in value.shape.names) for names, _ in groups]
    result = backend.reshape(native_value, tuple(sizes))
    return read_only_native(backend.numpy(result)) if to_numpy else result


def reshaped_numpy(value: Tensor, groups, force_expand=True) -> np.ndarray:
    """`reshaped_native` as a NumPy array."""
    return reshaped_native(value, groups, force_expand, to_numpy=True)


def swap_axes(x, axes):
    """`x` with its axes reordered: a tensor by dim names (or positions), a native by positions (`transpose`)."""
    if isinstance(x, Tensor):
        if all(isinstance(a, int) for a in axes):
            return transpose(x, [x.shape.names[a] for a in axes])
        return transpose(x, axes)
    return choose_backend(x).transpose(x, tuple(axes))


# --- backends and devices ------------------------------------------------------------------


def use(backend) -> Backend:
    """Make `backend` (a Backend or a name like 'torch') the default for new tensors, globally; returns it."""
    return set_global_default_backend(backend)


def _device(backend: Backend, device) -> ComputeDevice:
    if isinstance(device, ComputeDevice):
        return device
    found = backend.list_devices(device)
    if not found:
        raise ValueError(f'The {backend.name} backend has no {device!r} device; it has {backend.list_devices()}')
    return found[0]


def _dense_to_device(ts, device: ComputeDevice) -> Dense:
    t = ts[0]
    return Dense(t._backend.allocate_on_device(t._native, device), t._shape, t._backend)


TO_DEVICE = Op('to_device', ELEMENTWISE, _dense_to_device)


def _dense_copy(ts) -> Dense:
    t = ts[0]
    return Dense(read_only_native(t._backend.copy(t._native)), t._shape, t._backend)


COPY = Op('copy', ELEMENTWISE, _dense_copy)


def copy(value):
    """A tensor equal to `value` whose values lie in new native arrays of the same backend and device.

    A kind that holds its values in several natives, or lazily (an expanded tensor), copies each of its
    natives and stays that kind. Trees of tensors give trees of copies; numbers are returned as they are,
    natives are copied by their backend.
    """
    if isinstance(value, Tensor):
        return dispatch(COPY, (value,))
    if isinstance(value, NUMBER_TYPES) or value is None:
        return value
    if isinstance(value, (tuple, list, dict)) or hasattr(type(value), '__dataclass_fields__'):
        return tree_map(copy, value)
    return choose_backend(value).copy(value)


def to_device(value, device, convert: bool = True, use_dlpack: bool = True):
    """`value` (a tensor, native or tree) with its values on `device` (a ComputeDevice, or a type like 'CPU').

    Args:
        value: the values; numbers are returned as they are.
        device: a `ComputeDevice`, or 'CPU' / 'GPU' for the first such device of the value's backend.
        convert: move values of another backend to the device's backend first.
        use_dlpack: convert through DLPack where possible.
    """
    if isinstance(value, NUMBER_TYPES) or value is None:
        return value
    if isinstance(value, (tuple, list, dict)) or hasattr(type(value), '__dataclass_fields__'):
        return tree_map(lambda t: to_device(t, device, convert, use_dlpack), value)
    backend = value.backend if isinstance(value, Tensor) else choose_backend(value)
    target = _device(backend, device)
    if target.backend is not backend:
        if not convert:
            raise ValueError(f'to_device(): {target} belongs to the {target.backend.name} backend but the value to '
                             f'{backend.name}; pass convert=True')
        value = convert(value, target.backend, use_dlpack)
    if isinstance(value, Tensor):
        return dispatch(TO_DEVICE, (value,), (target,))
    return target.backend.allocate_on_device(value, target)


def to_cpu(value, *, device='CPU', convert: bool = True, use_dlpack: bool = True):
    """`to_device(value, 'CPU')`."""
    return to_device(value, device, convert, use_dlpack)


def to_gpu(value, *, device='GPU', convert: bool = True, use_dlpack: bool = True):
    """`to_device(value, 'GPU')`."""
    return to_device(value, device, convert, use_dlpack)


# --- printing ------------------------------------------------------------------------------


def print_(obj=None, name: str = '') -> None:
    """Print `obj` with all its values: a tensor's shape and values laid out by its dims, a tree leaf by leaf."""
    prefix = f'{name}: ' if name else ''
    if isinstance(obj, Tensor):
        if not obj.available:
            builtins.print(f'{prefix}{obj!r}')
        elif obj.shape.rank == 0:
            builtins.print(f'{prefix}{obj.numpy().item()!r}')
        elif not obj.shape.is_uniform:
            builtins.print(f'{prefix}{obj.shape} {obj.dtype} (non-uniform)')
        else:
            values = np.array2string(obj.numpy(obj.shape.names), separator=', ')
            builtins.print(f'{prefix}{obj.shape} {obj.dtype}\n{values}')
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            print_(item, f'{name}[{i}]')
    elif isinstance(obj, dict):
        for key, item in obj.items():
            print_(item, f'{name}[{key!r}]')
    else:
        builtins.print(f'{prefix}{obj!r}')
