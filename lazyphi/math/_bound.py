"""Dim views: `t.x` binds the dim `x` of a tensor (or any object holding dims) for slicing and reshaping along it.

A view holds the object and the dim's name; everything it does is one of the generic operations of
`lazyphi.math` (`unstack`, `rename_dims`, `pack_dims`, ...), reached through the package when the view is
used — so a view works alike on tensors, trees and objects of phiml's magic protocols, and this module
needs nothing of the modules those operations live in.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import math as _math
from .._errors import DimNotFound
from ._shape import Shape


class BoundDim:
    """`obj.x`: the dim `x` of a tensor or of any object holding dims, for slicing and reshaping along it.

    `t.x[1:3]` slices, `t.x.size` and `t.x.labels` describe the dim, `t.x.unstack()` splits along it,
    `t.x.as_batch()` / `.rename('y')` / `.retype(instance)` / `.replace(instance('p'))` / `.unpack(...)`
    change it, `t.x * v` is the dot product along it, and `t.x.y` binds two dims (`BoundDims`). The
    operations are the generic ones of `lazyphi.math` (`rename_dims`, `unstack`, ...), so a `BoundDim` of
    an object of phiml's magic protocols works as one of a tensor.
    """

    __slots__ = ('name', 'obj')

    def __init__(self, obj, name: str):
        self.obj = obj
        self.name = name

    def _shape(self) -> Shape:
        return _math.shape(self.obj)

    @property
    def exists(self) -> bool:
        return self.name in self._shape().names

    @property
    def size(self):
        """The dim's size (None where the object lacks the dim)."""
        return self._shape().get_size(self.name) if self.exists else None

    @property
    def size_or_1(self) -> int:
        return self._shape().get_size(self.name) if self.exists else 1

    @property
    def type(self) -> str:
        """The dim's type: 'batch', 'dual', 'instance', 'spatial' or 'channel'."""
        return self._shape().get_type(self.name)

    @property
    def labels(self):
        return self._shape().get_item_names(self.name)

    item_names = labels

    @property
    def item_name_list(self) -> list:
        return list(self.labels or ())

    @property
    def index(self) -> int:
        """The dim's position in the object's shape."""
        return self._shape().index(self.name)

    @property
    def dual(self) -> BoundDim:
        return BoundDim(self.obj, '~' + self.name)

    def __getitem__(self, item):
        return self.obj[{self.name: item}]

    def __getattr__(self, name: str) -> BoundDims:
        if name.startswith('_'):
            raise AttributeError(name)
        return BoundDims(self.obj, (self.name, name))

    def keys(self):
        """The item labels of the dim, else the range of its indices."""
        return self.labels if self.labels is not None else range(self.size)

    def items(self):
        return zip(self.keys(), self.unstack(), strict=True)

    def unstack(self, size: int | None = None) -> tuple:
        """The slices along the dim; for a dim the object lacks, `size` copies of it (if `size` is given)."""
        if not self.exists and size is not None:
            return (self.obj,) * size
        return _math.unstack(self.obj, self.name)

    def __iter__(self):
        return iter(self.unstack())

    def __len__(self) -> int:
        return self.size

    def rename(self, name: str, **kwargs):
        """The object with this dim renamed to `name`, keeping its type."""
        return _math.rename_dims(self.obj, self.name, name, **kwargs)

    def retype(self, dim_type, **kwargs):
        """The object with this dim of type `dim_type` (a function such as `instance`), keeping its name."""
        return _math.rename_dims(self.obj, self.name, dim_type, **kwargs)

    def replace(self, dim: Shape, **kwargs):
        """The object with this dim replaced by `dim` (a Shape or spec: new name, type, labels)."""
        return _math.rename_dims(self.obj, self.name, dim, **kwargs)

    def _as(self, dim_type: Callable, name: str | None):
        if not self.exists:
            return self.obj
        if name is None:
            return self.retype(dim_type)
        return self.replace(dim_type(**{name: self.labels or self.size}))

    def as_batch(self, name: str | None = None):
        return self._as(_math.batch, name)

    def as_dual(self, name: str | None = None):
        return self._as(_math.dual, name)

    def as_instance(self, name: str | None = None):
        return self._as(_math.instance, name)

    def as_spatial(self, name: str | None = None):
        return self._as(_math.spatial, name)

    def as_channel(self, name: str | None = None):
        return self._as(_math.channel, name)

    def unpack(self, *dims, **kwargs):
        """The object with this dim split into `dims` (see `unpack_dim`)."""
        return _math.unpack_dim(self.obj, self.name, *dims, **kwargs)

    split = unpack

    def sum(self):
        return _math.sum(self.obj, self.name)

    def prod(self):
        return _math.prod(self.obj, self.name)

    def __mul__(self, other):
        """The dot product along this dim with a tensor, a tuple of values along it, or another bound dim.

        A dim the object lacks counts as constant along it (as `dot` does), so `x.neurons * w.input` with
        `input` of size 1 multiplies and sums over `input`.
        """
        if isinstance(other, BoundDim):
            return _math.dot(self.obj, (self.name,), other.obj, (other.name,))
        if isinstance(other, (tuple, list)):
            other = _math.wrap(list(other), self._shape()[self.name])
        if not isinstance(other, _math.Tensor):
            return NotImplemented
        if self.name not in other.shape:
            raise DimNotFound(f'The dot product along {self.name!r} needs a value with that dim, got {other.shape}')
        return _math.dot(self.obj, (self.name,), other, (self.name,))

    __rmul__ = __matmul__ = __rmatmul__ = __mul__

    def __bool__(self):
        raise TypeError(f'{self!r} has no truth value; check `.exists` for whether the dim is present')

    def __repr__(self) -> str:
        if not self.exists:
            return f'{type(self.obj).__name__}.{self.name} (no such dim)'
        return f'{type(self.obj).__name__}.{self._shape()[self.name]}'


class BoundDims:
    """`obj.x.y`: several dims of an object at once, for slicing, packing and retyping them together."""

    __slots__ = ('dims', 'obj')

    def __init__(self, obj, dims: tuple):
        self.obj = obj
        self.dims = dims

    def __getattr__(self, name: str) -> BoundDims:
        if name.startswith('_'):
            raise AttributeError(name)
        return BoundDims(self.obj, (*self.dims, name))

    @property
    def dual(self) -> BoundDims:
        """These dims with the last one replaced by its dual twin (`~name`)."""
        return BoundDims(self.obj, (*self.dims[:-1], '~' + self.dims[-1]))

    def __getitem__(self, item):
        item = item if isinstance(item, tuple) else (item,)
        if len(item) != len(self.dims):
            raise IndexError(f'{self!r} takes one index per dim ({len(self.dims)}), got {item!r}')
        return self.obj[dict(zip(self.dims, item, strict=True))]

    @property
    def size(self):
        raise SyntaxError(f'{self!r} binds several dims: use .volume for their number of elements; .size is the '
                          f'size of one dim')

    @property
    def volume(self) -> int:
        return _math.shape(self.obj).only(self.dims).volume

    def __len__(self) -> int:
        return self.volume

    def unstack(self) -> tuple:
        return _math.unstack(self.obj, self.dims)

    def __iter__(self):
        return iter(self.unstack())

    def pack(self, packed_dim, pos: int | None = None, **kwargs):
        """The object with these dims packed into `packed_dim` (see `pack_dims`)."""
        return _math.pack_dims(self.obj, self.dims, packed_dim, pos=pos, **kwargs)

    def retype(self, dim_type, **kwargs):
        return _math.rename_dims(self.obj, self.dims, dim_type, **kwargs)

    def as_batch(self):
        return self.retype(_math.batch)

    def as_dual(self):
        return self.retype(_math.dual)

    def as_instance(self):
        return self.retype(_math.instance)

    def as_spatial(self):
        return self.retype(_math.spatial)

    def as_channel(self):
        return self.retype(_math.channel)

    def __bool__(self):
        raise TypeError(f'{self!r} has no truth value')

    def __repr__(self) -> str:
        return f'{type(self.obj).__name__}.{".".join(self.dims)}'
