"""Tensors and trees in NumPy's `.npz` files (`math.save` / `math.load`) and as plain dicts (`to_dict`).

`save(file, obj)` writes every tensor of the tree `obj` as a NumPy array (lazily expanded tensors as their
stored values, stacked ones part by part, layouts as their trees) and the tree around them pickled, as
phiml does. A layout of file names saves one file per entry, each with its slice of `obj`; `load` of such
a layout stacks what it reads. Files are read with pickle: load only files you trust.

`to_dict(t)` / `from_dict(d)` give a tensor or Shape as plain Python data (lists, str, numbers) that JSON
can hold, and back.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from .._errors import IncompatibleShapes
from ..backend import NUMPY, default_backend
from ._convert import to_backend
from ._dims import from_dict as shape_from_dict
from ._dims import to_dict as shape_to_dict
from ._kinds import Expanded, Stacked, expand_to
from ._layout import Layout
from ._magic_ops import slice_, stack
from ._shape import Shape
from ._tensor import Dense, Tensor, read_only_native
from ._tree import tree_map

# --- shapes and tensors as plain data ------------------------------------------------------


def _spec(shape: Shape) -> dict:
    """The dims of `shape` for a file: names, sizes (None where non-uniform, read again from the tree), types,
    labels."""
    return {'names': shape.names, 'sizes': tuple(s if isinstance(s, int) else None for s in shape.sizes),
            'types': shape.types, 'labels': shape.labels}


def _shape(spec: dict) -> Shape:
    return Shape(spec['sizes'], spec['names'], spec['types'], spec['labels'])


def to_dict(value: Tensor | Shape) -> dict:
    """A tensor (its shape, dtype and values as nested lists) or a Shape as plain Python data, e.g. for JSON.

    A Shape gives its names, types, sizes and item names; a tensor adds `dtype` and `data` (a layout: its
    tree, with `layout` set).
    """
    if isinstance(value, Shape):
        return shape_to_dict(value)
    if not isinstance(value, Tensor):
        raise TypeError(f'to_dict() takes a Tensor or Shape, got {type(value).__name__} {value!r}')
    if type(value) is Layout:
        return {**shape_to_dict(value.shape), 'layout': True, 'data': value.native(value.shape.names)}
    return {**shape_to_dict(value.shape), 'dtype': repr(value.dtype),
            'data': value.backend.numpy(value.native(value.shape.names)).tolist()}


def from_dict(dict_: dict, convert: bool = False) -> Tensor | Shape:
    """The tensor or Shape `dict_` describes (see `to_dict`); `convert` puts a tensor on the default backend."""
    shape = shape_from_dict(dict_)
    if 'data' not in dict_:
        return shape
    if dict_.get('layout'):
        return Layout(dict_['data'], shape)
    array = np.asarray(dict_['data'], dtype=np.dtype(dict_['dtype']))
    result = Dense(read_only_native(array), shape, NUMPY)
    return to_backend(result, default_backend()) if convert else result


# --- .npz files ------------------------------------------------------------------------------

class _Saved:
    """Stands for a tensor in the pickled tree; `parts` refer to arrays (by number) or other `_Saved`."""

    def __init__(self, kind: str, shape: dict, content, dtype: str | None = None):
        self.kind, self.shape, self.content, self.dtype = kind, shape, content, dtype


def _saved(t: Tensor, arrays: list) -> _Saved:
    """`t` as a `_Saved`, its values appended to `arrays` (NumPy, as stored)."""
    shape = _spec(t.shape)
    if type(t) is Layout:
        return _Saved('layout', _spec(t._stack), tree_map(lambda leaf: _saved(leaf, arrays), t._obj))
    if type(t) is Expanded:
        return _Saved('expanded', shape, _saved(t._inner, arrays))
    if type(t) is Stacked:
        return _Saved('stacked', _spec(t._dim), [_saved(p, arrays) for p in t.parts])
    arrays.append(t.backend.numpy(t.native(t.shape.names)))
    return _Saved('dense', shape, len(arrays) - 1, repr(t.dtype))


def _restored(saved: _Saved, arrays) -> Tensor:
    shape = _shape(saved.shape)
    if saved.kind == 'layout':
        return Layout(_restore_tree(saved.content, arrays), shape)
    if saved.kind == 'expanded':
        return expand_to(_restored(saved.content, arrays), shape)
    if saved.kind == 'stacked':
        return Stacked([_restored(p, arrays) for p in saved.content], shape)
    return Dense(read_only_native(arrays[f'array{saved.content}']), shape, NUMPY)


def _restore_tree(tree, arrays):
    if isinstance(tree, _Saved):
        return _restored(tree, arrays)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_restore_tree(v, arrays) for v in tree)
    if isinstance(tree, dict):
        return {k: _restore_tree(v, arrays) for k, v in tree.items()}
    return tree


def save(file, obj, mkdir: bool = True) -> None:
    """Write the tensor or tree `obj` to the `.npz` file `file` (the ending is added if missing).

    Args:
        file: a path, or a tensor of paths (e.g. `-f-f'data/run_{arange(batch(b=3))}.npz'`): then `obj` is
            sliced along the dims of `file` and each slice written to its path.
        obj: a tensor, or a tree (tuple, list, dict, dataclass) holding tensors and other picklable values.
        mkdir: create missing directories of the path.
    """
    if isinstance(file, Tensor):
        for position in _positions(file.shape):
            save(file[position].native(), slice_(obj, position), mkdir)
        return
    if not isinstance(file, (str, os.PathLike)):
        raise TypeError(f'save(): file must be a path or a tensor of paths, got {type(file).__name__} {file!r}')
    arrays: list = []
    tree = tree_map(lambda t: _saved(t, arrays), obj)
    directory = os.path.dirname(os.fspath(file))
    if mkdir and directory:
        os.makedirs(directory, exist_ok=True)
    holder = np.empty((), object)
    holder[()] = tree
    np.savez(file, tree=holder, **{f'array{i}': a for i, a in enumerate(arrays)})


def load(file):
    """What `save` wrote to `file` (a path, or a tensor of paths: the contents are stacked along its dims).

    Tensors come back on NumPy. The tree is unpickled: load only files you trust.
    """
    if isinstance(file, Tensor):
        positions = _positions(file.shape)
        values = [load(file[p].native()) for p in positions]
        for dim in reversed(file.shape):  # stack the innermost dim first
            size = dim.size
            values = [stack(values[i:i + size], dim) for i in range(0, len(values), size)]
        return values[0]
    path = os.fspath(file)
    if not os.path.exists(path) and os.path.exists(path + '.npz'):
        path += '.npz'
    with np.load(path, allow_pickle=True) as data:
        arrays = {k: data[k] for k in data.files if k != 'tree'}
        return _restore_tree(data['tree'][()], arrays)


def _positions(shape: Shape) -> list:
    if not shape.is_uniform:
        raise IncompatibleShapes(f'A tensor of paths must have a uniform shape, got {shape}')
    return [dict(zip(shape.names, index, strict=True)) for index in itertools.product(*map(range, shape.sizes))]

