"""Tensor-like slicing for dataclasses: `obj[{'b': 0}]`, `obj['x']`, `obj.b[1:3]`, `obj.Tc`.

`getitem` slices every Tensor in an instance's data fields through `lazyphi.math._tree.slice_`,
which also slices the Tensors its cached properties hold instead of dropping them, so a slice
never recomputes what the whole already computed. `sliceable` installs `__getitem__`,
dim attributes, the transposing properties `Tc`, `Ts`, `Ti`, a shape-based repr and an HTML repr
for notebooks on a dataclass, each only where the class does not define that member itself.
"""

import dataclasses
import reprlib
import threading
from typing import TypeVar

import numpy as np

from ..math import DUAL, Shape, Tensor, rename_dims, shape, slice_, unstack
from ..math.kinds import class_attribute, normalize_selection
from ._html import dataclass_html

T = TypeVar('T')

_ITEM_FORMS = ("a dict {dim: int, slice, label, list of those or index tensor}, a label str like 'x' or 'x,y', "
               "a tuple or list of those, a bool mask tensor with one dim, or an int index tensor whose channel dim "
               "lists the dims it indexes as item labels")
# names never resolved as dims: `math.shape` asks for `shape` (resolving it as a dim would recurse), and the
# transposing properties are members of the class. Names starting with '_' are never dims either.
_NOT_DIMS = frozenset({'shape', 'Tc', 'Ts', 'Ti'})
_resolving = threading.local()  # ids of the instances whose shape __getattr__ is computing, per thread


def getitem(obj: T, item, keepdims=None) -> T:
    """Slice or gather a dataclass instance by applying `item` to every Tensor of its data fields.

    Cached property values that are Tensors are sliced along with the data instead of recomputed;
    a cached Tensor lacking a sliced dim of the data is dropped, since it may have been reduced along it.

    Args:
        obj: dataclass instance.
        item: a dict `{dim: selection}` (int, slice, item label, list of ints or labels, or index tensor;
            dims `obj` lacks are ignored), a label str like `'x'` or `'x,y'` looked up among the labels
            of `obj`'s dims, a tuple or list of those, a bool Tensor with one dim masking that dim, or an int
            Tensor of indices whose channel dim names the dims it indexes by its item labels
            (`obj[wrap([[3], [1]], instance('k'), channel(index='i'))]` gathers items 3 and 1 of `i` into `k`).
        keepdims: dim filter of the dims kept with size 1 (and their labels) when a single item is selected.

    Returns:
        A copy of `obj` of the same type with sliced data fields; `obj` itself when nothing is selected.
        No `__init__` or `__post_init__` runs on the copy.

    Raises:
        TypeError: `obj` is not a dataclass instance, or `item` has none of the accepted forms.
        LabelNotFound: a label is not among the labels of the dim (a KeyError).
        IndexError: an index is out of range.
    """
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"getitem() slices dataclass instances, but got {obj!r} of type {type(obj).__qualname__}")
    full = shape(obj)
    if isinstance(item, Tensor) and item.dtype.kind is int:
        return slice_(obj, item)
    selection = _selection(obj, full, item)
    if keepdims is not None and selection:
        kept = set(full.only(keepdims).names)
        selection = {dim: _as_range(sel) if dim in kept else sel for dim, sel in selection.items()}
    return slice_(obj, selection) if selection else obj


def _selection(obj, full: Shape, item) -> dict:
    """`item` as a dict {dim: int | slice | tuple of ints | index Tensor} of dims `full` has."""
    if isinstance(item, Tensor):
        return _mask_selection(obj, full, item)
    if isinstance(item, dict):
        plain, index_tensors = {}, {}
        for dim, sel in item.items():
            name = dim.name if isinstance(dim, Shape) else dim
            if not (isinstance(sel, Tensor) and sel.shape.rank):
                plain[dim] = sel
            elif name in full.names:  # gathered by each tensor itself
                index_tensors[name] = sel
        return {**normalize_selection(full, plain), **index_tensors}
    if isinstance(item, (str, tuple, list)):
        return normalize_selection(full, item)
    raise TypeError(f"Cannot slice {type(obj).__qualname__} with {item!r} of type {type(item).__name__}. "
                    f"Accepted: {_ITEM_FORMS}.")


def _mask_selection(obj, full: Shape, mask: Tensor) -> dict:
    if mask.dtype.kind is not bool or mask.shape.rank != 1 or mask.shape.names[0] not in full.names:
        raise TypeError(f"Cannot slice {type(obj).__qualname__} of shape {full} with a tensor of shape {mask.shape} "
                        f"and dtype {mask.dtype}: a tensor used as an item must be a bool mask with one dim of the "
                        f"object or an int index tensor. Accepted: {_ITEM_FORMS}.")
    return {mask.shape.names[0]: tuple(int(i) for i in np.flatnonzero(mask.numpy()))}


def _as_range(sel):
    """A single-item selection as a slice of length 1, so that the dim stays; anything else as it is."""
    if type(sel) is not int:
        return sel
    return slice(sel, sel + 1 if sel != -1 else None)


class BoundDim:
    """One dim of a sliceable object, `obj.b`: slice it with `obj.b[1:3]`, iterate it, ask its size and labels."""

    __slots__ = ('name', 'obj')

    def __init__(self, obj, name: str):
        self.obj = obj
        self.name = name

    def __getitem__(self, item):
        return self.obj[{self.name: item}]

    def __iter__(self):
        return iter(unstack(self.obj, self.name))

    @property
    def exists(self) -> bool:
        """Whether the object has this dim."""
        return self.name in shape(self.obj).names

    @property
    def size(self):
        """Size of the dim: an int, None if unknown, or a `NonUniform`."""
        return shape(self.obj).get_size(self.name)

    @property
    def type(self) -> str:
        """Type of the dim: 'batch', 'dual', 'instance', 'spatial' or 'channel'."""
        return shape(self.obj).get_type(self.name)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """Item labels of the dim, or None."""
        return shape(self.obj).get_item_names(self.name)

    item_names = labels

    def __repr__(self) -> str:
        return f"{shape(self.obj)[self.name]} of a {type(self.obj).__qualname__}"


class _DimAttribute:
    """Class-level attribute for a dim seen at construction (`lazy_dims=False`): `obj.x` without `__getattr__`."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        if self.name in shape(obj).names:
            return BoundDim(obj, self.name)
        raise AttributeError(f"{type(obj).__qualname__!r} object has no dim {self.name!r} "
                             f"(dims: {shape(obj).names})")


def _dim_getattr(obj, name: str):
    cls = type(obj)
    if name.startswith('_') or name in _NOT_DIMS or any(f.name == name for f in dataclasses.fields(cls)):
        raise AttributeError(_missing(cls, name))
    owner, declared = class_attribute(cls, name)
    if owner is not None and not isinstance(declared, _DimAttribute):
        # a property or descriptor of the class raised AttributeError itself
        raise AttributeError(f"{cls.__qualname__}.{name} raised AttributeError while being computed")
    busy = _resolving.__dict__.setdefault('ids', set())
    if id(obj) in busy:  # computing the shape needed this very attribute
        raise AttributeError(_missing(cls, name))
    busy.add(id(obj))
    try:
        names = shape(obj).names
    finally:
        busy.discard(id(obj))
    if name in names:
        return BoundDim(obj, name)
    raise AttributeError(f"{_missing(cls, name)} (dims: {names})")


def _missing(cls: type, name: str) -> str:
    return f"{cls.__qualname__!r} object has no attribute or dim {name!r}"


def _transposed(obj, dim_type: str):
    """`obj` with its `dim_type` dims turned dual and its matching dual dims turned `dim_type`.

    A dual dim `~n` is turned into `dim_type` unless `n` names a dim of another type, so that
    `Tc` of a matrix with dims (~x, x, vector) swaps vector and ~vector but leaves ~x alone.
    """
    full = shape(obj)
    primal = [n for n, t in zip(full.names, full.types, strict=True) if t == dim_type]
    other = {n for n, t in zip(full.names, full.types, strict=True) if t not in (dim_type, DUAL)}
    dual = [n for n, t in zip(full.names, full.types, strict=True) if t == DUAL and n[1:] not in other]
    if not primal and not dual:
        return obj
    old = (*primal, *dual)
    names = (*('~' + n for n in primal), *(n[1:] for n in dual))
    types = (DUAL,) * len(primal) + (dim_type,) * len(dual)
    # sizes and labels None: each tensor keeps its own
    return rename_dims(obj, old, Shape((None,) * len(old), names, types, (None,) * len(old)))


def _shape_repr(obj) -> str:
    try:
        return f"{type(obj).__qualname__}{shape(obj)}"
    except (TypeError, ValueError):  # data whose shape cannot be merged: show the fields instead
        fields = ', '.join(f"{f.name}={getattr(obj, f.name)!r}" for f in dataclasses.fields(obj) if f.repr)
        return f"{type(obj).__qualname__}({fields})"


def _has_generated_repr(cls: type) -> bool:
    """Whether `cls` has no `__repr__` of its own making: object's, or one written by `dataclasses`."""
    for klass in cls.__mro__:
        if '__repr__' in vars(klass):
            fn = vars(klass)['__repr__']
            if klass is object:
                return True
            code = getattr(getattr(fn, '__wrapped__', fn), '__code__', None)
            return dataclasses.is_dataclass(klass) and code is not None and code.co_filename == '<string>'
    return True


def sliceable(cls=None, /, *, dim_attrs: bool = True, t_props: bool = True, keepdims=None, dim_repr: bool = True,
              lazy_dims: bool = True):
    """Class decorator giving a dataclass tensor-like slicing: `obj[{'b': 0}]`, `obj['x']`, `obj.b[1:3]`.

    Members the class defines itself (`__getitem__`, `__getattr__`, `__repr__`, `Tc`, ...) are kept.
    Equality and hashing stay those of the dataclass. Works on frozen and non-frozen dataclasses.

    Args:
        cls: the dataclass to decorate; leave out to pass options, as in `@sliceable(keepdims='vector')`.
        dim_attrs: add `__getattr__` so that `obj.dim` gives a `BoundDim` for every dim of `shape(obj)` that is
            not a real attribute; unknown names raise AttributeError.
        t_props: add the properties `Tc`, `Ts`, `Ti`, which swap the channel, spatial or instance dims with
            the dual dims (matrix transposes).
        keepdims: dim filter of the dims that `obj[...]` keeps with size 1 when a single item is selected.
        dim_repr: replace the repr written by `dataclasses` by the class name and `shape(obj)`, and give the
            class the HTML view of `dataclass_html` for notebooks (`_repr_html_`) unless it has one.
        lazy_dims: if False, every dim of `shape(obj)` becomes a class attribute when an instance is constructed,
            so that dims show in `dir(obj)` and are found without `__getattr__`; dims added later (by stacking)
            are still found through `__getattr__`.

    Raises:
        TypeError: `cls` is not a dataclass.
    """
    def decorate(cls):
        if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
            raise TypeError(f"@sliceable decorates dataclasses, but got {cls!r}. Put it above @dataclass: "
                            f"@sliceable\\n@dataclass(frozen=True)\\nclass {getattr(cls, '__name__', 'Name')}: ...")
        own = vars(cls)
        if '__getitem__' not in own:
            def __getitem__(self, item):
                return getitem(self, item, keepdims=keepdims)
            __getitem__.__qualname__ = f'{cls.__qualname__}.__getitem__'
            cls.__getitem__ = __getitem__
            if '__iter__' not in own:
                cls.__iter__ = None  # __getitem__ alone would make iter() probe obj[0], obj[1], ...
        if dim_attrs and not hasattr(cls, '__getattr__'):
            cls.__getattr__ = _dim_getattr
        if t_props:
            for name, dim_type in (('Tc', 'channel'), ('Ts', 'spatial'), ('Ti', 'instance')):
                if not hasattr(cls, name):
                    prop = property(lambda self, t=dim_type: _transposed(self, t),
                                    doc=f"This object with its {dim_type} and matching dual dims swapped.")
                    setattr(cls, name, prop)
        if dim_repr and _has_generated_repr(cls):
            cls.__repr__ = reprlib.recursive_repr(f'{cls.__qualname__}(...)')(_shape_repr)
        if dim_repr and not hasattr(cls, '_repr_html_'):
            cls._repr_html_ = dataclass_html
        if not lazy_dims:
            _wrap_init(cls)
        return cls

    return decorate if cls is None else decorate(cls)


def _wrap_init(cls: type) -> None:
    original = cls.__init__
    field_names = {f.name for f in dataclasses.fields(cls)}

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        for name in shape(self).names:
            if name.isidentifier() and not name.startswith('_') and name not in _NOT_DIMS \
                    and name not in field_names and not hasattr(cls, name):
                setattr(cls, name, _DimAttribute(name))

    __init__.__wrapped__ = original
    __init__.__qualname__ = f'{cls.__qualname__}.__init__'
    cls.__init__ = __init__

