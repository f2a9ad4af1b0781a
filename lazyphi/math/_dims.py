"""The dim constructors and filters (`batch`, `spatial`, ..., `non_batch`, ...) and the Shape of any value.

`batch(x=3)` makes dims; `batch(obj)` selects the batch dims of a Shape, a tensor or a tree of them,
measured by `shape`, which knows tensors, numbers, tuples, lists, dicts and dataclass instances.
"""

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from ._bound import BoundDim
from ._fields import data_fields, field_names
from ._shape import (
    BATCH,
    CHANNEL,
    DIM_TYPES,
    DUAL,
    EMPTY_SHAPE,
    INSTANCE,
    SPATIAL,
    Shape,
    checked_name,
    parse_size,
)
from ._shape import concat_shapes as _concat_shapes
from ._shape import merge_shapes as _merge_shapes
from ._tensor import NUMBER_TYPES, Tensor

_TREE_FORMS = 'a Tensor, a number, or a tuple, list, dict or dataclass instance holding those'


def shape(obj, allow_unshaped: bool = False) -> Shape:
    """The Shape of a Tensor, a shaped object, or a tree of them.

    Args:
        obj: a Tensor or Shape; a number, bool, None, str or bytes (no dims); a tuple or list of numbers
            (the channel dim `vector` of their count); a tuple, list or dict of other values, whose shapes
            are merged (no new dim is added); a dataclass instance, whose data fields' shapes are merged
            unless it has a Shape-valued `shape` attribute; an object with a Shape-valued `shape` attribute
            or a `__shape__()` method; an object listing its data in `__value_attrs__()`; a bound dim `t.x`.
        allow_unshaped: give the empty shape for any other object instead of raising.

    Raises:
        TypeError: `obj` is none of these, such as an array whose axes have no names.
        IncompatibleShapes: the shapes of the elements of a tree disagree on a dim.
    """
    try:
        return _shape_of(obj)
    except TypeError:
        if allow_unshaped:
            return EMPTY_SHAPE
        raise


def _shape_of(obj) -> Shape:
    if isinstance(obj, Tensor):
        return obj.shape
    if isinstance(obj, Shape):
        return obj
    if obj is None or isinstance(obj, (*NUMBER_TYPES, str, bytes)):
        return EMPTY_SHAPE
    if isinstance(obj, (tuple, list)):
        if obj and all(isinstance(item, NUMBER_TYPES) for item in obj):
            return channel(vector=len(obj))
        return _merge_shapes(*map(shape, obj)) if obj else EMPTY_SHAPE
    if isinstance(obj, dict):
        return _merge_shapes(*map(shape, obj.values())) if obj else EMPTY_SHAPE
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # only a `shape` the class declares counts: a `__getattr__` that looks up dims must not be asked for it
        own = obj.shape if hasattr(type(obj), 'shape') or 'shape' in field_names(obj) else None
        if isinstance(own, Shape):
            return own
        return _merge_shapes(*[shape(getattr(obj, f.name)) for f in data_fields(obj)])
    own = getattr(obj, 'shape', None)
    if isinstance(own, Shape):
        return own
    if hasattr(obj, '__shape__'):
        return obj.__shape__()
    if isinstance(obj, BoundDim):
        return shape(obj.obj)[obj.name]
    if hasattr(obj, '__value_attrs__') or hasattr(obj, '__variable_attrs__'):
        names = obj.__value_attrs__() if hasattr(obj, '__value_attrs__') else obj.__variable_attrs__()
        return _merge_shapes(*[shape(getattr(obj, n)) for n in names])
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if isinstance(own, tuple):
        if not own:
            return EMPTY_SHAPE
        raise TypeError(f"Cannot determine the Shape of a {name} with axes of sizes {own}: its axes have no names. "
                        f"Wrap it first, e.g. tensor(array, batch('b'), spatial('x')).")
    raise TypeError(f"Cannot determine the Shape of {obj!r} of type {name}: expected {_TREE_FORMS}, "
                    f"a Shape, or an object with a Shape-valued .shape attribute")


_DUAL_PREFIX_NOTE = " Names get a '~' prefix if they lack one."
_CONSTRUCTOR_DOC = """{Type} dims from names and sizes, or the {type} dims of one shaped object.{prefix}

    Args:
        *args: dim names as str ('x' or 'x,y'; size unknown), or a single Shape or shaped object to filter.
        **dims: name=size with an int, None, a NonUniform, or item labels as a str 'a,b' or a tuple of str.

    Returns:
        The new dims in argument order (keyword dims last), or the filtered dims.
    """


def _dim_constructor(dim_type: str) -> Callable[..., Shape]:
    def construct(*args, **dims) -> Shape:
        if args and not isinstance(args[0], str):
            if len(args) != 1 or dims:
                raise TypeError(f"{dim_type}() filters exactly one Shape or shaped object and takes no keyword sizes "
                                f"then, but got {len(args)} positional and {len(dims)} keyword arguments")
            return shape(args[0])._of_type(dim_type)
        for arg in args:
            if not isinstance(arg, str):
                raise TypeError(f"{dim_type}() takes dim names as str or one Shape to filter, but got {arg!r}")
        names, sizes, labels = [], [], []
        for raw_name, value in [(n, None) for arg in args for n in arg.split(',')] + list(dims.items()):
            name = checked_name(raw_name, dim_type)
            if name in names:
                raise ValueError(f"Dim {name!r} is given more than once")
            size, item_labels = parse_size(value, name)
            names.append(name)
            sizes.append(size)
            labels.append(item_labels)
        return Shape(tuple(sizes), tuple(names), (dim_type,) * len(names), tuple(labels))

    construct.__name__ = construct.__qualname__ = dim_type
    construct.dim_type = dim_type  # lets Shape.as_type and dim filters recognise the constructor
    construct.__doc__ = _CONSTRUCTOR_DOC.format(type=dim_type, Type=dim_type.capitalize(),
                                                prefix=_DUAL_PREFIX_NOTE if dim_type == DUAL else '')
    return construct


def _dim_excluder(dim_type: str) -> Callable[[Any], Shape]:
    def exclude(obj) -> Shape:
        return shape(obj)._not_of_type(dim_type)

    exclude.__name__ = exclude.__qualname__ = f'non_{dim_type}'
    exclude.__doc__ = f"All dims of `obj` (a Shape or shaped object) except {dim_type} dims."
    return exclude


batch = _dim_constructor(BATCH)
dual = _dim_constructor(DUAL)
instance = _dim_constructor(INSTANCE)
spatial = _dim_constructor(SPATIAL)
channel = _dim_constructor(CHANNEL)
non_batch = _dim_excluder(BATCH)
non_dual = _dim_excluder(DUAL)
non_instance = _dim_excluder(INSTANCE)
non_spatial = _dim_excluder(SPATIAL)
non_channel = _dim_excluder(CHANNEL)
_CONSTRUCTORS = {BATCH: batch, DUAL: dual, INSTANCE: instance, SPATIAL: spatial, CHANNEL: channel}


def primal(obj) -> Shape:
    """The dims of `obj` (a Shape or shaped object) that are neither batch nor dual."""
    return shape(obj).primal


def non_primal(obj) -> Shape:
    """The batch and dual dims of `obj` (a Shape or shaped object)."""
    return shape(obj).non_primal


def merge_shapes(*objs, allow_varying_sizes: bool = False, allow_varying_labels: bool = False) -> Shape:
    """Union of the dims of `objs`: Shapes, tensors, or trees of them (see `shape`).

    Dims are ordered by type (batch, dual, instance, spatial, channel), within a type by first appearance.

    Args:
        allow_varying_sizes: a dim whose sizes differ gets size None instead of raising.
        allow_varying_labels: a dim whose labels differ gets no labels instead of raising.

    Raises:
        IncompatibleShapes: a shared dim differs in size, type or labels.
    """
    return _merge_shapes(*[o if isinstance(o, Shape) else shape(o) for o in objs],
                         allow_varying_sizes=allow_varying_sizes, allow_varying_labels=allow_varying_labels)


def concat_shapes(*shapes) -> Shape:
    """The dims of `shapes` (Shapes, tensors, or trees of them) in the order given.

    Raises:
        IncompatibleShapes: a dim name occurs more than once.
    """
    return _concat_shapes(*[s if isinstance(s, Shape) else shape(s) for s in shapes])


def to_dict(value: Shape) -> dict:
    """A Shape as a dict of plain Python values (names, types, sizes, item labels), e.g. for JSON."""
    if not isinstance(value, Shape):
        raise TypeError(f'to_dict() takes a Shape, got {type(value).__name__} {value!r}')
    if not value.is_uniform:
        raise ValueError(f'to_dict() needs a shape of uniform sizes, got {value}')
    return {'names': value.names, 'types': list(value.types), 'item_names': value.labels, 'sizes': value.sizes}


def from_dict(data: dict) -> Shape:
    """The Shape `to_dict` described."""
    try:
        names, types, sizes, labels = data['names'], data['types'], data['sizes'], data['item_names']
    except (KeyError, TypeError):
        raise ValueError(f"from_dict() takes the dict to_dict() makes, with 'names', 'types', 'sizes' and "
                         f"'item_names'; got {data!r}") from None
    dims = [_CONSTRUCTORS[t](**{n: tuple(lab) if lab is not None else s})
            for n, t, s, lab in zip(names, types, sizes, labels, strict=True)]
    return _concat_shapes(*dims)


def _volume_of_type(dim_type: str) -> Callable[[Any], int | None]:
    def volume(obj) -> int | None:
        return shape(obj)._of_type(dim_type).volume
    volume.__name__ = volume.__qualname__ = f'{dim_type[0]}size'
    volume.__doc__ = f'The number of elements along the {dim_type} dims of `obj` (None where a size is unknown).'
    return volume


dsize = _volume_of_type(DUAL)
isize = _volume_of_type(INSTANCE)
ssize = _volume_of_type(SPATIAL)
csize = _volume_of_type(CHANNEL)


# --- dim specs -------------------------------------------------------------------------------

_SPEC = re.compile(r"""\s*(?:
      (?P<tilde>~?)(?P<name>\w+)(?::(?P<type>\w+))?(?:=\((?P<labels>[^)]*)\))?   # name, :type, =(labels)
    | (?P<vtilde>~?)\((?P<vlabels>[^)]*)\)                                     # (labels): the vector dim
    )\s*(?:,|$)""", re.VERBOSE)
_TYPE_WORDS = {'b': BATCH, 'd': DUAL, 'i': INSTANCE, 's': SPATIAL, 'c': CHANNEL, **{t: t for t in DIM_TYPES}}


def parse_dim_spec(spec: str, default_type: str | None = None) -> Shape:
    """The dims a spec string describes, e.g. 'b:b,x:s,vector:c', 'points:i,(x,y)' or 'row:c,~col'.

    Each comma-separated entry is `name:type` (a type letter b, d, i, s, c or the type's name), optionally
    followed by `=(a,b)` item labels; `name=(a,b)` is a channel dim with labels; `(a,b)` the channel dim
    `vector` with labels; `~name` a dual dim; a single letter such as `x` a spatial dim. A plain name takes
    `default_type` if given. Sizes are unknown unless labels give them.
    """
    if not isinstance(spec, str):
        raise TypeError(f"A dim spec must be a str like 'b:b,x:s,vector:c' but got {spec!r}")
    sizes, names, types, labels = [], [], [], []
    pos = 0
    while pos < len(spec):
        match = _SPEC.match(spec, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"Invalid dim spec {spec!r} at {spec[pos:]!r}: expected entries like 'name:type', "
                             f"'name:type=(a,b)', '(a,b)', '~name' or a single letter, the type being b, d, i, s or "
                             f"c (batch, dual, instance, spatial, channel)")
        pos = match.end()
        if match['vlabels'] is not None:
            tilde, name, type_word, items = match['vtilde'], 'vector', None, match['vlabels']
        else:
            tilde, name, type_word, items = match['tilde'], match['name'], match['type'], match['labels']
        dim_type = _spec_type(spec, tilde, name, type_word, items, default_type)
        name = checked_name(tilde + name, dim_type)
        if name in names:
            raise ValueError(f"Dim {name!r} appears more than once in {spec!r}")
        item_labels = parse_size(items, name)[1] if items is not None else None
        names.append(name)
        types.append(dim_type)
        labels.append(item_labels)
        sizes.append(len(item_labels) if item_labels else None)
    return Shape(tuple(sizes), tuple(names), tuple(types), tuple(labels))


def _spec_type(spec: str, tilde: str, name: str, type_word, items, default_type) -> str:
    """The dim type of one entry of a dim spec (see `parse_dim_spec`)."""
    if type_word is not None:
        dim_type = _TYPE_WORDS.get(type_word)
        if dim_type is None:
            raise ValueError(f"Invalid dim type {type_word!r} in the dim spec {spec!r}: expected one of b, d, i, s, c "
                             f"or {', '.join(DIM_TYPES)}")
        if tilde and dim_type != DUAL:
            raise ValueError(f"Invalid dim spec {spec!r}: only dual dims are written with a '~', as in '~{name}:d'")
        return dim_type
    if tilde:
        return DUAL
    if items is not None:
        return CHANNEL
    if len(name) == 1:
        return SPATIAL
    if default_type is not None:
        return default_type
    raise ValueError(f"Invalid dim spec {spec!r}: the dim {name!r} needs a type, as in '{name}:s' (b, d, i, s or c); "
                     f"only single-letter names default to spatial")
