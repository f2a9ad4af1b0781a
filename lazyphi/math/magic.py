"""phiml's magic protocols: what lets an object of yours take part in `lazyphi.math`'s shape operations.

An object *holds dims* (`Shaped`) when it has a Shape-valued `shape` attribute or a `__shape__()` method.
It is *sliceable* (`Sliceable`) when it also has `__getitem__` taking a dict {dim: index} (use
`slicing_dict(self, item)` to accept every form a tensor does). It is *shapable* (`Shapable`) when the
shape operations can combine and reshape it: through `__stack__`, or `__concat__` together with
`__expand__` (the other protocol methods, `__replace_dims__`, `__pack_dims__`, `__unpack_dim__`,
`__flatten__`, `__unstack__`, are optional: without them the operations unstack and stack again). A
*tree node* (`PhiTreeNode`) is a tensor, a tuple, list or dict of tree nodes, a dataclass instance, or an
object naming the attributes that hold its data in `__value_attrs__()` / `__variable_attrs__()`.

These classes only answer `isinstance` and `issubclass`; nothing needs to inherit from them.
"""

import dataclasses

from ._bound import BoundDim, BoundDims
from ._dims import shape
from ._items import normalize_selection
from ._shape import Shape
from ._tensor import Tensor
from ._tree import holds_dims, value_attributes, variable_attributes

__all__ = ['BoundDim', 'BoundDims', 'PhiTreeNode', 'Shapable', 'Shaped', 'Sliceable', 'slicing_dict',
           'value_attributes', 'variable_attributes']


def _holds_dims(obj) -> bool:
    if isinstance(obj, (Tensor, Shape)) or holds_dims(obj):
        return True
    try:
        shape(obj)
    except (TypeError, ValueError):
        return False
    return True


class _ShapedCheck(type):
    def __instancecheck__(cls, instance) -> bool:
        return _holds_dims(instance)

    def __subclasscheck__(cls, subclass) -> bool:
        return True  # whether an instance holds dims depends on its values, not its class


class Shaped(metaclass=_ShapedCheck):
    """Objects holding dims: a Shape-valued `shape` attribute or a `__shape__()` method, or a tree of such."""


class _SliceableCheck(type):
    def __instancecheck__(cls, instance) -> bool:
        if isinstance(instance, (str, Shape)):
            return False
        return _holds_dims(instance) and (hasattr(instance, '__getitem__') or isinstance(instance, PhiTreeNode))

    def __subclasscheck__(cls, subclass) -> bool:
        return subclass not in (str, Shape) and hasattr(subclass, '__getitem__')


class Sliceable(metaclass=_SliceableCheck):
    """Objects holding dims that can be sliced with a dict {dim: index} (`__getitem__`)."""


def _combinable(cls_or_obj) -> bool:
    return hasattr(cls_or_obj, '__stack__') or (hasattr(cls_or_obj, '__concat__') and hasattr(cls_or_obj, '__expand__'))


class _ShapableCheck(type):
    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, Sliceable) and (_combinable(instance) or isinstance(instance, PhiTreeNode))

    def __subclasscheck__(cls, subclass) -> bool:
        return issubclass(subclass, Sliceable) and (_combinable(subclass) or issubclass(subclass, PhiTreeNode))


class Shapable(metaclass=_ShapableCheck):
    """Sliceable objects the shape operations can combine: `__stack__`, or `__concat__` with `__expand__`."""


class _TreeNodeCheck(type):
    def __instancecheck__(cls, instance) -> bool:
        if instance is None or isinstance(instance, Tensor):
            return True
        if isinstance(instance, (tuple, list)):
            return all(isinstance(item, PhiTreeNode) for item in instance)
        if isinstance(instance, dict):
            return all(isinstance(v, (PhiTreeNode, Shaped)) for v in instance.values())
        if dataclasses.is_dataclass(instance) and not isinstance(instance, type):
            return True
        return hasattr(instance, '__value_attrs__') or hasattr(instance, '__variable_attrs__')

    def __subclasscheck__(cls, subclass) -> bool:
        return (issubclass(subclass, (Tensor, tuple, list, dict)) or dataclasses.is_dataclass(subclass)
                or hasattr(subclass, '__value_attrs__') or hasattr(subclass, '__variable_attrs__'))


class PhiTreeNode(metaclass=_TreeNodeCheck):
    """Trees the shape operations traverse: tensors, tuples, lists, dicts, dataclasses, `__value_attrs__` objects."""


def slicing_dict(obj, item, existing_only: bool = True) -> dict:
    """The dict {dim name: selection} meant by `item`, as given to `obj.__getitem__`.

    Accepts what tensors accept: a dict (keys may be names, rank-1 Shapes or dim filters such as `spatial`),
    a label str like 'x' or 'y,z' (looked up among the item labels of `obj`'s dims), or a tuple of those.

    Args:
        obj: the object being sliced (its shape resolves labels and filters).
        item: the argument of `__getitem__`.
        existing_only: leave out dims `obj` does not have.
    """
    if item is None:
        return {}
    full = shape(obj)
    if isinstance(item, dict):
        result = {}
        for key, value in item.items():
            if callable(key) and not isinstance(key, Shape):
                key = key(full)
            if isinstance(key, Shape):
                if key.rank != 1:
                    raise TypeError(f'A slicing dict takes single dims as keys, got {key} in {item!r}')
                key = key.name
            if not isinstance(key, str):
                raise TypeError(f'A slicing dict takes dim names, single-dim Shapes or dim filters as keys, got '
                                f'{key!r} in {item!r}')
            if not existing_only or key in full.names:
                result[key] = value
        return result
    if isinstance(item, (str, tuple, list)):
        return normalize_selection(full, item)
    raise TypeError(f'Cannot slice {type(obj).__name__} with {item!r}: expected a dict {{dim: index}}, a label str '
                    f'like "x" or "y,z", or a tuple of those')
