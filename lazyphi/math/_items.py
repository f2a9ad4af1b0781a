"""What `t[item]` selects: any slicing expression turned into `{dim: int | slice | tuple of ints}`.

Pure shape logic: this module knows Shapes but no tensor class. Index tensors (int tensors to gather,
bool masks) are not resolved here; `selection_items` sets them apart for the tensor to apply.
"""

from __future__ import annotations

import operator

from .._errors import LabelNotFound
from ._shape import Shape, resolve_dims

_FORMS = ("a dict {dim: index}, t.dim[index], a label string like 'x' or 'y,x', an int, slice or list of ints "
          "for a tensor with one channel dim (or one non-batch dim), or an index tensor")


def is_index_tensor(value) -> bool:
    """A tensor with dims: an index tensor or mask (a 0-d int tensor is an ordinary index). Tensors are known by
    their kind protocol's `_dense`, as this module knows no tensor class."""
    return getattr(type(value), '_dense', None) is not None and value.shape.rank > 0


def selection_items(shape: Shape, item) -> dict:
    """`item` as {dim name: selection}, for the dims of `shape` it names; selections are not yet normalised.

    The keys are dim names; a selection may be an index tensor (see `is_index_tensor`). Dims `shape` lacks
    are left out: they may exist on other values sliced by the same dict.
    """
    if item is None:
        return {}
    if isinstance(item, Shape):  # its dim names, as labels
        item = list(item.names)
    if isinstance(item, dict):
        result = {}
        for dim, sel in item.items():
            name = key_name(dim, shape, item)
            if name in shape.names:
                result[name] = sel
        return result
    if isinstance(item, str):
        return _selection_by_labels(shape, item)
    if isinstance(item, tuple) and item and item[0] is Ellipsis:
        return _positional(shape.channel, item[1:], item)
    if isinstance(item, (tuple, list)) and item and all(isinstance(i, (str, dict)) for i in item):
        if shape.channel.rank == 1 and all(isinstance(i, str) for i in item) and \
                all(label in (shape.channel.labels[0] or ()) for i in item for label in _label_list(i)):
            return {shape.channel.names[0]: tuple(label for i in item for label in _label_list(i))}
        result = {}
        for i in item:
            result.update(selection_items(shape, i))
        return result
    if isinstance(item, tuple) and len(item) == shape.channel.rank > 1:
        return _positional(shape.channel, item, item)
    if is_index_tensor(item):
        return {_index_dims(shape, item): item}
    for dims in (shape.channel, shape.non_batch):
        if dims.rank == 1:
            return {dims.names[0]: item}
    raise TypeError(f'Cannot slice a tensor of shape {shape} with {item!r}. Accepted: {_FORMS}.')


def _positional(dims: Shape, selections: tuple, item) -> dict:
    if len(selections) != dims.rank:
        raise TypeError(f'{item!r} selects {len(selections)} channel dims by position but the tensor has '
                        f'{dims.rank}: {dims}')
    return dict(zip(dims.names, selections, strict=True))


def _index_dims(shape: Shape, index) -> str | tuple:
    """The dims an index tensor used as `t[index]` selects, as phiml picks them.

    A bool mask: its non-batch dims (the others act as batch dims), as a str for one dim. An int index tensor: a
    tuple, as `gather` picks them (`indexed_dims`): the labels of its channel dim (`t[vec(y=1, x=2)]`), else the
    spatial dims of `shape`, else its instance dims.
    """
    if index.dtype.kind is bool:
        dims = index.shape.non_batch or index.shape
        return dims.names[0] if dims.rank == 1 else dims.names
    return tuple(indexed_dims(shape, index_list_dim(index.shape), None, 't[index]'))


def index_list_dim(index_shape: Shape, pref_index_dim: str = 'index') -> Shape:
    """The channel dim of an index tensor's shape that lists one component per indexed dim (empty if none)."""
    index_dim = index_shape.channel
    if index_dim.rank >= 2:
        if pref_index_dim not in index_dim.names:
            raise ValueError(f'indices {index_shape} have several channel dims; pref_index_dim={pref_index_dim!r} '
                             f'must name the one listing the indexed dims')
        index_dim = index_dim.only(pref_index_dim)
    return index_dim


def indexed_dims(values_shape: Shape, index_dim: Shape, dims, what: str) -> tuple:
    """The dims of the values that the components of an index refer to: `dims`, the labels of `index_dim`, or
    the values' spatial dims, else their instance dims."""
    if dims is not None:
        return resolve_dims(dims, values_shape)
    if index_dim and index_dim.labels[0] is not None:
        return index_dim.labels[0]
    spatial_dims, instance_dims = values_shape.spatial, values_shape.instance
    if spatial_dims and instance_dims:
        raise ValueError(f'{what}: the values {values_shape} have spatial and instance dims; say which are indexed '
                         f'with dims= or by labelling the index dim of the indices (vec(y=1, x=2))')
    found = (spatial_dims or instance_dims).names
    if not found:
        raise ValueError(f'{what}: the values {values_shape} have no spatial or instance dims to index; pass dims= '
                         f'(t[{{dim: index}}] for t[index])')
    return found


def _label_list(labels: str) -> list:
    return [s.strip() for s in labels.split(',') if s.strip()]


def key_name(key, shape: Shape, item=None) -> str | None:
    """The dim a key of a slicing dict names: a str, a single-dim Shape, or a dim filter such as `batch` applied to
    `shape` (None where it selects no dim of `shape`, as for a name `shape` lacks).

    Raises:
        TypeError: `key` is none of these, or a filter selecting several dims.
    """
    if isinstance(key, Shape):
        return key.name
    if isinstance(key, str):
        return key
    if callable(key):
        selected = key(shape)
        if isinstance(selected, Shape) and selected.rank <= 1:
            return selected.names[0] if selected.rank else None
        if isinstance(selected, Shape):
            raise TypeError(f'Cannot slice along {getattr(key, "__name__", key)}: it selects the dims '
                            f'{selected.names} of {shape}, and a slicing key names one dim')
    raise TypeError(f'Cannot slice along {key!r}: dims are named by str, a single-dim Shape or a dim filter such as '
                    f'batch, in {item!r}')


def normalize_selection(shape: Shape, item) -> dict:
    """Turn any slicing expression without index tensors into {dim: int | slice | tuple of ints}.

    Accepted: see `selection_items`. Labels are resolved to positions, negative ints wrapped, and the
    parts of slices may be ints, NumPy ints, 0-d int tensors or labels.
    """
    return {dim: normalize_dim_selection(shape, dim, sel) for dim, sel in selection_items(shape, item).items()}


def normalize_dim_selection(shape: Shape, dim: str, sel):
    """One dim's selection as an int, a slice of ints or a tuple of ints."""
    size = shape.get_size(dim)
    if isinstance(sel, Shape):  # the dims' names, as labels
        sel = sel.names
    if isinstance(sel, bool):
        raise TypeError(f'Cannot index dim {dim!r} with the bool {sel}; use an int, slice, label or index tensor.')
    if isinstance(sel, slice):
        return slice(_slice_bound(shape, dim, sel.start, 0), _slice_bound(shape, dim, sel.stop, 1),
                     None if sel.step is None else _index(sel.step, dim))
    if isinstance(sel, str):
        names = _label_list(sel)
        if ',' in sel:
            return tuple(_label_index(shape, dim, n) for n in names)
        return _label_index(shape, dim, names[0])
    if isinstance(sel, (tuple, list)):
        return tuple(_label_index(shape, dim, s) if isinstance(s, str) else normalize_dim_selection(shape, dim, s)
                     for s in sel)
    index = _index(sel, dim)
    if isinstance(size, int) and not -size <= index < size:
        raise IndexError(f'Index {index} is out of range for dim {dim!r} of size {size}')
    return index % size if isinstance(size, int) else index


def _index(value, dim: str) -> int:
    """An int from an int, a NumPy int or a 0-d int tensor (anything with `__index__`)."""
    if isinstance(value, bool) or not hasattr(type(value), '__index__'):
        raise TypeError(f'Cannot select {value!r} along dim {dim!r}; accepted: int, slice, label str, '
                        f'a list of ints or labels, or an index tensor.')
    return operator.index(value)


def _slice_bound(shape: Shape, dim: str, bound, past_label: int):
    if bound is None:
        return None
    if isinstance(bound, str):  # a label: the stop label is included
        return _label_index(shape, dim, bound) + past_label
    return _index(bound, dim)


def _label_index(shape: Shape, dim: str, label: str) -> int:
    labels = shape.get_item_names(dim)
    if labels is None or label not in labels:
        raise LabelNotFound(f'Label {label!r} not found along dim {dim!r}; its labels are {labels}')
    return labels.index(label)


def _selection_by_labels(shape: Shape, item: str) -> dict:
    names = _label_list(item)
    for dim, labels in zip(shape.names, shape.labels, strict=True):
        if labels is not None and all(n in labels for n in names):
            if len(names) == 1 and ',' not in item:
                return {dim: names[0]}
            return {dim: tuple(names)}
    missing = ', '.join(repr(n) for n in names)
    raise LabelNotFound(f'Label {missing} not found: no dim of {shape} has the labels {tuple(names)}. '
                        f'Select by index with a dict instead: t[{{"dim": 0}}]')
