"""Padding and its relatives: `pad`, `pad_to_uniform`, `slice_off`, `shift` and `convolve`, built on `extrapolation`.

All of them are slicing, concatenation and element-wise arithmetic, so every tensor kind and the
tracer take part without operations of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from .._errors import IncompatibleShapes
from ._creation import zeros_like
from ._dims import channel, shape, spatial
from ._items import normalize_selection
from ._magic_ops import pack_dims, stack
from ._reductions import REDUCTIONS
from ._shape import EMPTY_SHAPE, NonUniform, Shape, resolve_dims
from ._structure import rename_tensor_dims, stack_tensors
from ._tensor import Tensor, as_tensor, dims_in
from .extrapolation import ZERO, ZERO_GRADIENT, Extrapolation, as_extrapolation

SHIFT_DIM = channel('shift')


def pad(value: Tensor, widths, mode=0, **kwargs) -> Tensor:
    """`value` padded along some dims with values given by the extrapolation `mode`; negative widths cut off.

    Args:
        value: the tensor to pad.
        widths: `{dim: (lower, upper)}` (a dim may be a name, a Shape or a filter; an int pads both sides
            alike); `(lower, upper)` for the one non-batch dim of `value`; or a list of slicing dicts, each
            with one `slice` saying where new values go along its dim and other entries saying for which part
            of `value` (the inverse of `slice_off`).
        mode: an `Extrapolation`, a number or tensor (constant), an extrapolation's name, or a dict per dim.
        **kwargs: passed on to the extrapolation.
    """
    value = as_tensor(value)
    mode = as_extrapolation(mode)
    if isinstance(widths, (tuple, list)):
        if not widths or isinstance(widths[0], dict):
            return _pad_slices(value, widths, mode, **kwargs)
        if len(widths) == 2 and all(isinstance(w, int) for w in widths):
            dims = value.shape.non_batch
            if dims.rank != 1:
                raise ValueError(f'pad(): widths (lower, upper) need a value with one non-batch dim, got '
                                 f'{value.shape}; pass a dict {{dim: (lower, upper)}}')
            widths = {dims.name: tuple(widths)}
        else:
            dims = value.shape.non_batch
            if len(widths) != dims.rank:
                raise ValueError(f'pad(): {len(widths)} (lower, upper) pairs for the {dims.rank} non-batch dims of '
                                 f'{value.shape}')
            widths = dict(zip(dims.names, widths, strict=True))
    if not isinstance(widths, dict):
        raise TypeError(f'pad(): widths must be a dict {{dim: (lower, upper)}}, a (lower, upper) tuple or a list of '
                        f'slicing dicts, got {widths!r}')
    per_dim = {}
    for key, width in widths.items():
        pair = (width, width) if isinstance(width, int) else tuple(width)
        for name in resolve_dims(key, value.shape):
            per_dim[name] = pair
    cuts = {d: slice(max(0, -lo), up if up < 0 else None) for d, (lo, up) in per_dim.items() if lo < 0 or up < 0}
    padded = mode.pad(value, {d: (max(0, lo), max(0, up)) for d, (lo, up) in per_dim.items()}, **kwargs)
    return padded[cuts] if cuts else padded


def _inserted(s: slice, size: int) -> tuple[int, int]:
    """(lower, upper) padding that a slice of the padded result describes, for a dim of `size` before padding."""
    if not s.start:
        return s.stop, 0
    return 0, -s.start if s.start < 0 else size - s.start


def _pad_slices(value: Tensor, slices: Sequence[dict], mode: Extrapolation, **kwargs) -> Tensor:
    """Pad the parts of `value` selected by the non-slice entries of each dict where its slice says."""
    selecting = tuple(dict.fromkeys(d for s in slices for d, i in s.items() if not isinstance(i, slice)
                                    and d in value.shape.names))
    resolved = [{d: i if isinstance(i, slice) else normalize_selection(value.shape, {d: i}).get(d, i)
                 for d, i in s.items()} for s in slices]
    return _pad_selected(value, resolved, selecting, mode, **kwargs)


def _pad_selected(value: Tensor, slices: list, selecting: tuple, mode: Extrapolation, **kwargs) -> Tensor:
    """Pad each part of `value` along the dims `selecting` by the slices that select it, then stack the parts."""
    if not selecting:
        return _pad_part(value, slices, mode, **kwargs)
    dim = selecting[0]
    padded = []
    for i in range(value.shape.get_size(dim)):
        matching = [{d: s for d, s in sl.items() if d != dim} for sl in slices if sl.get(dim, i) == i or
                    (isinstance(sl.get(dim), tuple) and i in sl[dim])]
        padded.append(_pad_selected(value[{dim: i}], matching, selecting[1:], mode[{dim: i}], **kwargs))
    if len({p.shape for p in padded}) > 1:
        raise IncompatibleShapes(f'pad(): the slices pad the parts of {value.shape} along {dim!r} by different '
                                 f'amounts: {[p.shape for p in padded]}')
    return stack_tensors(padded, value.shape[dim])


def _pad_part(value: Tensor, slices: list, mode: Extrapolation, **kwargs) -> Tensor:
    widths = {}
    for s in slices:
        entries = [(d, i) for d, i in s.items() if isinstance(i, slice)]
        if len(entries) != 1:
            raise ValueError(f'pad(): each slicing dict needs exactly one slice, saying where to pad; got {s}')
        dim, where = entries[0]
        lower, upper = _inserted(where, value.shape.get_size(dim))
        previous = widths.get(dim, (0, 0))
        widths[dim] = (previous[0] + lower, previous[1] + upper)
    return mode.pad(value, widths, **kwargs)


def pad_to_uniform(x: Tensor, target_shape: Shape = EMPTY_SHAPE, pad_value=0) -> Tensor:
    """`x` padded at the upper end of its dims to one size per dim: a non-uniform tensor becomes uniform.

    Each dim gets the size `target_shape` gives it, else the largest size it has anywhere in `x`. Every part
    of a non-uniform tensor is padded on its own (parts nested along several dims too), then the parts are
    stacked again; a uniform tensor is padded as a whole.

    Args:
        x: the tensor, uniform or not.
        target_shape: sizes for some dims of `x`, at least their largest size (None: every dim its largest).
        pad_value: the value of the new entries, a number or a tensor broadcast to them.
    """
    if not isinstance(x, Tensor):
        raise TypeError(f'pad_to_uniform() takes a Tensor, got {type(x).__name__}')
    if target_shape is None:
        target_shape = EMPTY_SHAPE
    if not isinstance(target_shape, Shape):
        raise TypeError(f'pad_to_uniform(): target_shape must be a Shape such as spatial(x=8), got {target_shape!r}')
    unknown = [n for n in target_shape.names if n not in x.shape.names]
    if unknown:
        raise ValueError(f'pad_to_uniform(): target_shape {target_shape} names dims {unknown} that {x.shape} lacks')
    targets = {}
    for name, size in zip(x.shape.names, x.shape.sizes, strict=True):
        largest = size.max if isinstance(size, NonUniform) else size
        wanted = target_shape.get_size(name) if name in target_shape.names else largest
        if type(wanted) is not int or wanted < largest:
            raise ValueError(f'pad_to_uniform(): dim {name!r} has up to {largest} entries, so it cannot be padded to '
                             f'the size {wanted!r}; give a target size of at least {largest}')
        targets[name] = wanted
    return _padded_to(x, targets, pad_value)


def _padded_to(x: Tensor, targets: dict, pad_value) -> Tensor:
    """`x` padded to the sizes `targets`, part by part along the dims its sizes vary along."""
    varying = x.shape.non_uniform_shape
    if varying:
        dim = varying.names[0]
        parts = [_padded_to(x[{dim: i}], targets, pad_value) for i in range(x.shape.get_size(dim))]
        return stack_tensors(parts, x.shape[dim])
    widths = {n: (0, targets[n] - s) for n, s in zip(x.shape.names, x.shape.sizes, strict=True) if targets[n] > s}
    return pad(x, widths, pad_value) if widths else x


# --- slice_off -----------------------------------------------------------------------------


def _removed(shape: Shape, dim: str, selection) -> set:
    """Indices along `dim` that a selection names (ints, slices, labels, lists); ones out of range are ignored."""
    size = shape.get_size(dim)
    if isinstance(selection, slice):
        return set(range(*selection.indices(size)))
    if isinstance(selection, str):
        labels = shape.get_item_names(dim) or ()
        return {labels.index(n.strip()) for n in selection.split(',') if n.strip() in labels}
    if isinstance(selection, int):
        return {selection % size} if -size <= selection < size else set()
    if isinstance(selection, (tuple, list)):
        return set().union(*[_removed(shape, dim, s) for s in selection]) if selection else set()
    raise TypeError(f'slice_off(): cannot select {selection!r} along {dim!r}; use ints, slices, labels or lists')


def _includes(selection, shape: Shape, dim: str, i: int) -> bool:
    return selection is None or i in _removed(shape, dim, selection)


def slice_off(x, *slices):
    """`x` without the entries that `slices` select: the inverse of padding by slices.

    Each argument is a dict {dim: int, slice, label str or list}; a dict with several dims removes entries
    along one of them within the part the others select, which can give a non-uniform result.
    A tensor argument lists positions along its channel dim, labelled by the dims.
    """
    if not slices:
        return x
    dicts = []
    for s in slices:
        if isinstance(s, Tensor):
            labels = s.shape.channel.labels[0]
            rows = s.numpy(s.shape.without(s.shape.channel).names + s.shape.channel.names).reshape(-1, len(labels))
            dicts.extend({d: int(i) for d, i in zip(labels, row, strict=True)} for row in rows)
        elif isinstance(s, dict):
            dicts.append(s)
        else:
            raise TypeError(f'slice_off(): slices must be dicts {{dim: selection}} or index tensors, got {s!r}')
    x_shape = shape(x)
    dicts = [{d: i for d, i in s.items() if d in x_shape.names} for s in dicts]
    dicts = [s for s in dicts if s]
    if not dicts:
        return x
    dims = tuple(dict.fromkeys(d for s in dicts for d in s))
    if len(dims) == 1 and all(len(s) == 1 for s in dicts):
        dim = dims[0]
        removed = set().union(*[_removed(x_shape, dim, s[dim]) for s in dicts])
        kept = tuple(i for i in range(x_shape.get_size(dim)) if i not in removed)
        if kept == tuple(range(kept[0], kept[-1] + 1)) if kept else True:
            return x[{dim: slice(kept[0], kept[-1] + 1) if kept else slice(0, 0)}]
        return x[{dim: kept}]
    along = _unstack_dim(x_shape, dims)
    parts = []
    for i in range(x_shape.get_size(along)):
        inner = [{d: v for d, v in s.items() if d != along} for s in dicts
                 if _includes(s.get(along), x_shape, along, i) and len(s) > 1]
        part = x[{along: i}]
        parts.append(slice_off(part, *inner) if inner else part)
    assembled = stack(parts, x_shape[along])
    only_along = [s for s in dicts if set(s) == {along}]
    return slice_off(assembled, *only_along) if only_along else assembled


def _unstack_dim(x_shape: Shape, dims: tuple) -> str:
    """The dim to split along: one that non-uniform sizes vary with, else the smallest of `dims`."""
    for size in x_shape.sizes:
        along = getattr(size, 'along', None)
        if along:
            return along[0]
    return min(dims, key=lambda d: x_shape.get_size(d))


# --- shift and convolve --------------------------------------------------------------------


def shift(x: Tensor, offsets: Sequence[int], dims=spatial, padding=ZERO_GRADIENT, stack_dim: Shape | None = SHIFT_DIM,
          extend_bounds=0, padding_kwargs: dict | None = None) -> list:
    """Copies of `x` shifted by each of `offsets` along each of `dims`: entry i of a result is entry i + offset.

    Args:
        x: the grid.
        offsets: the shifts, ints; one result per offset.
        dims: the dims to shift along (default: the spatial dims).
        padding: the extrapolation giving values shifted in from beyond the edges; None: no padding, so the
            results are smaller than `x` (cut to where every shift has values).
        stack_dim: the dim along which the shifts along the different `dims` are stacked (labelled by them);
            None is allowed for a single dim.
        extend_bounds: extra padding on both sides (an int, or (lower, upper)), with `padding` only.
        padding_kwargs: passed on to the extrapolation.
    """
    x = as_tensor(x)
    names = dims_in(x.shape, dims)
    if stack_dim is None and len(names) > 1:
        raise ValueError(f'shift(): stack_dim=None needs one dim to shift along, got {names}')
    per_dim = shifts_per_dim(x, offsets, names, padding, extend_bounds, padding_kwargs)
    if stack_dim is None:
        return per_dim[names[0]]
    return [stack_tensors(list(components), stack_dim.with_size(names))
            for components in zip(*per_dim.values(), strict=True)]


def shifts_per_dim(x: Tensor, offsets: Sequence[int], names: Sequence[str], padding, extend_bounds=0,
                   padding_kwargs: dict | None = None) -> dict:
    """`shift` without stacking: {dim: the copies of `x` shifted by each of `offsets` along that dim}, each a slice
    of `x` padded once (the arguments as `shift`'s, `names` the dims of `x` to shift along). Code that combines the
    shifts of each dim on its own (`laplace`) saves the copies that stacking them makes."""
    lower_extra, upper_extra = (extend_bounds, extend_bounds) if isinstance(extend_bounds, int) else extend_bounds
    if (lower_extra or upper_extra) and padding is None:
        raise ValueError('shift(): extend_bounds needs a padding')
    low, high = min(0, *offsets), max(0, *offsets)
    if padding is not None:
        x = pad(x, {d: (-low + lower_extra, high + upper_extra) for d in names}, padding, **(padding_kwargs or {}))
    size = {d: x.shape.get_size(d) - (high - low) for d in names}
    per_dim = {}
    for d in names:
        inner = {other: slice(-low, -low + size[other]) for other in names if other != d}
        per_dim[d] = [x[{**inner, d: slice(offset - low, offset - low + size[d])}] for offset in offsets]
    return per_dim


def convolve(value: Tensor, kernel: Tensor, size='same', extrapolation=0, dims=spatial, strides=1,
             transpose: bool = False) -> Tensor:
    """The cross-correlation of `value` with `kernel` along the kernel's spatial dims (no kernel flip).

    Entry i of the result is the sum over kernel positions j of `kernel[j] * value[i * stride + j - c]`. With
    stride 1 and a size by name, the centre c is `k // 2` for constant padding and `(k - 1) // 2` for other
    extrapolations (as phiml). Otherwise the padding p that the output size needs, `stride * (out - 1) + k -
    size` (none if that is negative), is split `p // 2` below and the rest above, as phiml's PyTorch backend
    does. Dual dims of `kernel` are summed against the dims of `value` of the same name without the `~`;
    other dims of either are batch dims (shared ones matched by name).

    Args:
        value: the values.
        kernel: the weights along its spatial dims (those selected by `dims`).
        size: the output size along each convolved dim: 'same' (`ceil(size / stride)`), 'valid' (only where the
            kernel fits without padding, `ceil((size - k + 1) / stride)`), 'full' (`(size + k - 1) // stride`), or
            a Shape naming the sizes. Transposed: 'same' is `size * stride` and 'full' is
            `(size + 1) * stride - k`, as in phiml; 'valid' has no transposed form.
        extrapolation: the values beyond the edges (a number, tensor or Extrapolation); None gives 'valid'.
            A transposed convolution pads with zeros only.
        dims: which spatial dims of the kernel to convolve along.
        strides: the step between neighbouring windows: an int for every convolved dim, or `{dim: step}` (other
            dims 1).
        transpose: the transposed convolution, the adjoint of the strided one: entry o is the sum of
            `value[i] * kernel[j]` over all i, j with `i * stride + j = o + c`, where `c` centres the output in
            the `(size - 1) * stride + k` entries that the kernel reaches.

    Raises:
        ValueError: an unknown `size`, a stride that is not a positive int or names a dim not convolved, an
            output of no entries, or `transpose` with an extrapolation other than zero.
    """
    value, kernel = as_tensor(value), as_tensor(kernel)
    if not isinstance(size, Shape) and (not isinstance(size, str) or size not in ('same', 'valid', 'full')):
        raise ValueError(f"convolve(): size must be 'same', 'valid', 'full' or a Shape of output sizes, got {size!r}")
    conv = tuple(n for n in dims_in(kernel.shape, dims) if kernel.shape.get_type(n) == 'spatial')
    missing = [n for n in conv if n not in value.shape.names]
    if missing:
        raise IncompatibleShapes(f'convolve(): the kernel {kernel.shape} runs along {missing}, which the value '
                                 f'{value.shape} lacks')
    steps = _steps(strides, conv)
    if transpose:
        return _convolve_transposed(value, kernel, conv, steps, size, extrapolation)
    if extrapolation is None and isinstance(size, str):
        size = 'valid'
    mode = as_extrapolation(0 if extrapolation is None else extrapolation)
    constant = type(mode).__name__ == 'ConstantExtrapolation'
    widths, out = {}, {}
    for n in conv:
        n_in, k, step = value.shape.get_size(n), kernel.shape.get_size(n), steps[n]
        if isinstance(size, str) and step == 1:
            widths[n] = {'valid': (0, 0), 'full': (k - 1, k - 1),
                         'same': (k // 2, (k - 1) // 2) if constant else ((k - 1) // 2, k // 2)}[size]
            out[n] = n_in + sum(widths[n]) - k + 1
        else:
            out[n] = _output_size(size, n, n_in, k, step)
            padding = max(0, step * (out[n] - 1) + k - n_in)
            widths[n] = (padding // 2, padding - padding // 2)
    _check_sizes(out, value, kernel, size)
    widths = {n: w for n, w in widths.items() if w != (0, 0)}
    return _correlate(mode.pad(value, widths) if widths else value, kernel, conv, out, steps)


def _steps(strides, conv: tuple) -> dict:
    """{dim: step} for the convolved dims `conv` from `convolve`'s `strides`."""
    if isinstance(strides, dict):
        unknown = [n for n in strides if n not in conv]
        if unknown:
            raise ValueError(f'convolve(): strides name {unknown}, which are not convolved; the convolved dims are '
                             f'{list(conv)}')
        steps = {n: strides.get(n, 1) for n in conv}
    else:
        steps = dict.fromkeys(conv, strides)
    bad = {n: st for n, st in steps.items() if isinstance(st, bool) or not isinstance(st, int) or st < 1}
    if bad:
        raise ValueError(f'convolve(): strides must be positive ints (one for all dims or a dict per dim), got {bad}')
    return steps


def _output_size(size, dim: str, n_in: int, k: int, step: int, transpose: bool = False) -> int:
    """The output size along `dim` that `convolve`'s `size` gives (see there)."""
    if isinstance(size, Shape):
        if dim not in size.names:
            raise ValueError(f'convolve(): size {size} lacks the convolved dim {dim!r}')
        return size.get_size(dim)
    if transpose:
        if size == 'valid':
            raise ValueError("convolve(): size='valid' has no transposed form; use 'same', 'full' or a Shape")
        return n_in * step if size == 'same' else (n_in + 1) * step - k
    if size == 'same':
        return -(-n_in // step)
    if size == 'valid':
        return -(-(n_in - k + 1) // step)
    return (n_in + k - 1) // step


def _check_sizes(out: dict, value: Tensor, kernel: Tensor, size) -> None:
    empty = [n for n, o in out.items() if o < 1]
    if empty:
        raise ValueError(f'convolve(): size={size!r} leaves no output along {empty} for the value {value.shape} and '
                         f'the kernel {kernel.shape}')


def _convolve_transposed(value: Tensor, kernel: Tensor, conv: tuple, steps: dict, size, extrapolation) -> Tensor:
    """`convolve(..., transpose=True)`: `value` spread `steps` apart with zeros between, correlated with the
    flipped kernel, and cut (or padded with zeros) to the output size around the centre of what the kernel
    reaches."""
    if extrapolation is not None and as_extrapolation(extrapolation) != ZERO:
        raise ValueError(f'convolve(): transpose=True pads with zeros only, got extrapolation={extrapolation!r}')
    out = {n: _output_size(size, n, value.shape.get_size(n), kernel.shape.get_size(n), steps[n], True) for n in conv}
    _check_sizes(out, value, kernel, size)
    spread, widths = value, {}
    for n in conv:
        k, step = kernel.shape.get_size(n), steps[n]
        if step > 1:
            gaps = [zeros_like(spread)] * (step - 1)
            spread = pack_dims(stack_tensors([spread, *gaps], channel('_gaps')), (n, '_gaps'), spatial(n))
            spread = spread[{n: slice(0, spread.shape.get_size(n) - step + 1)}]
        n_spread = spread.shape.get_size(n)
        lower = k - 1 - (n_spread + k - 1 - out[n]) // 2
        widths[n] = (lower, out[n] + k - 1 - n_spread - lower)
    flipped = kernel[{n: slice(None, None, -1) for n in conv}]
    return _correlate(pad(spread, widths, 0), flipped, conv, out, dict.fromkeys(conv, 1))


def _correlate(padded: Tensor, kernel: Tensor, conv: tuple, out: dict, steps: dict) -> Tensor:
    """The `out` windows of `padded`, `steps` apart, weighted by `kernel` and summed (dual dims of the kernel
    against the value's dims of the same name)."""
    contracted = tuple(n for n in kernel.shape.dual.names if n[1:] in padded.shape.names)
    primal = padded.shape.only([n[1:] for n in contracted], reorder=True)
    weights = rename_tensor_dims(kernel, contracted, primal) if contracted else kernel
    result = None
    for position in itertools.product(*[range(kernel.shape.get_size(n)) for n in conv]):
        window = padded[{n: slice(j, j + steps[n] * (out[n] - 1) + 1, steps[n])
                         for n, j in zip(conv, position, strict=True)}]
        term = window * weights[dict(zip(conv, position, strict=True))]
        result = term if result is None else result + term
    if contracted:
        result = REDUCTIONS['sum'](result, tuple(n[1:] for n in contracted))
    return result
