"""Leaving and entering named tensors: natives and NumPy arrays in chosen layouts, backends and devices,
and printing values."""

from __future__ import annotations

import builtins
import math
import sys
from collections.abc import Callable

import numpy as np

from .._errors import IncompatibleShapes
from ..backend import (
    BACKENDS,
    NUMPY,
    Backend,
    ComputeDevice,
    choose_backend,
    default_backend,
    set_global_default_backend,
)
from ..backend import convert as convert_native
from ._convert import convert as convert_tensors
from ._creation import reshaped_tensor
from ._dims import channel, merge_shapes, spatial
from ._shape import EMPTY_SHAPE, Shape, resolve_dims
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


def torch_function(func: Callable, args: tuple, kwargs: dict):
    """What torch's function `func` gives when called with a lazyphi Tensor (`Tensor.__torch_function__`).

    `torch.nn.functional.interpolate` takes a Tensor as its input, as in phiml: its values go to torch as
    (batch, channel, spatial...) axes (batch and channel dims packed, an axis of size 1 where there are none), and
    the result keeps the dims, with the spatial sizes torch gives. `mode='linear'` means linear along every
    spatial dim (torch's 'bilinear' for two, 'trilinear' for three). Other torch functions refuse Tensors
    (`NotImplemented`: torch raises a TypeError).
    """
    torch = sys.modules['torch']  # loaded: torch is calling
    if func is not torch.nn.functional.interpolate or not args or not isinstance(args[0], Tensor):
        return NotImplemented
    value = convert_tensors(args[0], 'torch')
    dims = value.shape
    if kwargs.get('mode') == 'linear' and dims.spatial.rank in (2, 3):
        kwargs = {**kwargs, 'mode': 'bilinear' if dims.spatial.rank == 2 else 'trilinear'}
    native_value = reshaped_native(value, [dims.batch, dims.channel, *dims.spatial.names])
    result = func(native_value, *args[1:], **kwargs)
    return reshaped_tensor(result, [dims.batch, dims.channel, *[spatial(n) for n in dims.spatial.names]],
                           convert=False)


def _dim_group(value, dim_type, what: str) -> Shape:
    """`value` (a Shape, a str of names or None) as dims of `dim_type` for `native_call`."""
    if isinstance(value, Shape):
        return value
    if value is None or value == '':
        return EMPTY_SHAPE
    if isinstance(value, str):
        return dim_type(*[n.strip() for n in value.split(',') if n.strip()])
    raise TypeError(f'native_call(): {what} must be a Shape, a str of dim names or None, got {value!r}')


def _module_backend(f) -> Backend | None:
    """The backend of a loaded library whose module (torch.nn.Module, tf.Module) `f` is, if any."""
    return next((b for b in BACKENDS if b.supports('is_module') and b.is_module(f)), None)


def native_call(f: Callable, *inputs: Tensor, channels_last=None, channel_dim='vector', spatial_dim=None,
                **f_kwargs):
    """Call `f`, a function of natives, on `inputs` laid out as batch, spatial and channel axes, and name its result.

    Each input becomes one native with the axes (batch, spatial..., channel) if `channels_last`, else
    (batch, channel, spatial...): all batch and dual dims of all inputs packed into the first axis, one axis
    per spatial dim of all inputs (in the order of their merged shape), and the input's channel dims packed
    into one axis (of size 1 without any). Batch and spatial dims an input lacks are repeated to the size the
    others give them. The natives belong to one backend: that of `f` if it is a module (`torch.nn.Module`,
    `tf.Module`) of a library lazyphi has loaded, else that of the inputs, and for NumPy inputs the default
    backend, as in phiml.

    The result of `f` is named by its number of axes: one axis is the batch, two are batch and channel,
    more are batch, spatial and channel as in the inputs (or along `spatial_dim`); sizes are taken from the
    result. A channel dim of size 1 without labels is removed.

    Args:
        f: called as `f(*natives, **f_kwargs)`; returns one native, or a tuple or list of natives (each named
            alike; phiml takes only one).
        *inputs: tensors of uniform shape without instance dims (pack or retype those first).
        channels_last: where the channel axis goes; None: where the backend prefers it (last for NumPy,
            JAX and TensorFlow, first after the batch for torch).
        channel_dim: the channel dims of the result, one axis each: a name, names 'a,b', a Shape (for labels)
            or None for a result without a channel axis.
        spatial_dim: the spatial dims of the result, if they are not those of the inputs: names or a Shape.
        **f_kwargs: passed on to `f` as they are.

    Returns:
        A tensor of the result's backend, or a tuple or list of them.
    """
    if not inputs:
        raise ValueError('native_call() needs at least one input tensor')
    for i, value in enumerate(inputs):
        if not isinstance(value, Tensor):
            raise TypeError(f'native_call(): input {i} is a {type(value).__name__}; pass tensors')
        if not value.shape.is_uniform:
            raise ValueError(f'native_call(): input {i} has the non-uniform shape {value.shape}; unstack it or pad '
                             f'it to a uniform shape first (pad_to_uniform)')
        if value.shape.instance:
            raise ValueError(f'native_call(): input {i} has the instance dims {value.shape.instance}, which have no '
                             f'axis in the layout; pack them into a batch, spatial or channel dim first')
    if channels_last not in (None, True, False):
        raise TypeError(f'native_call(): channels_last must be True, False or None, got {channels_last!r}')
    channel_dims = _dim_group(channel_dim, channel, 'channel_dim')
    batch_dims = merge_shapes(*[v.shape.non_primal for v in inputs])
    spatial_dims = merge_shapes(*[v.shape.spatial for v in inputs])
    spatial_groups = [spatial_dims[n] for n in spatial_dims.names]
    backend = _module_backend(f) or _inputs_backend(inputs)
    if channels_last is None:
        channels_last = bool(backend.prefers_channels_last())

    def layout(spatial_axes: list, channel_axes: list) -> list:
        return [batch_dims, *spatial_axes, *channel_axes] if channels_last else \
            [batch_dims, *channel_axes, *spatial_axes]
    natives = [convert_native(reshaped_native(v, layout(spatial_groups, [v.shape.channel])), backend) for v in inputs]
    output = f(*natives, **f_kwargs)
    channel_groups = [channel_dims[n] for n in channel_dims.names]
    result_spatial = spatial_groups if spatial_dim is None else \
        list(_dim_group(spatial_dim, spatial, 'spatial_dim'))

    def named(native) -> Tensor:
        sizes = tuple(choose_backend(native).staticshape(native))
        rank = len(sizes)
        if spatial_dim is None and rank == 1:
            groups = [batch_dims]
        elif spatial_dim is None and rank == 1 + len(channel_groups):
            groups = [batch_dims, *channel_groups]
        else:
            groups = layout(result_spatial, channel_groups)
        try:
            result = reshaped_tensor(native, groups, convert=False)
        except IncompatibleShapes as err:
            raise IncompatibleShapes(f'native_call(): f returned an array of shape {sizes}, which does '
                                     f'not fit the axes {groups}; pass spatial_dim= or channel_dim= to name its '
                                     f'axes') from err
        if channel_dims.rank == 1 and channel_dims.labels[0] is None and \
                result.shape.get_size(channel_dims.name, 0) == 1:
            result = result[{channel_dims.name: 0}]
        return result
    if isinstance(output, (tuple, list)):
        return type(output)(named(o) for o in output)
    return named(output)


def _inputs_backend(inputs) -> Backend:
    """The backend for natives of `inputs`: the one library among them besides NumPy, else the default backend."""
    libraries = list(dict.fromkeys(v.backend for v in inputs if v.backend is not NUMPY))
    if len(libraries) > 1:
        raise TypeError(f'native_call(): the inputs belong to the backends {[b.name for b in libraries]}; convert '
                        f'them to one first (convert(t, backend))')
    return libraries[0] if libraries else default_backend()


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
