"""Boundary conditions: how the values of a grid continue beyond its edges.

An `Extrapolation` gives the values just outside a tensor along a dim (`pad_values`) and pads a
tensor (`pad`). `math.pad`, `math.shift` and `math.convolve` take one wherever they need values
outside the grid. The common ones are constants:

| name | values beyond the edge (grid `a b c`) |
| --- | --- |
| `ZERO`, `ONE`, `ConstantExtrapolation(v)` | `0 0 \\| a b c \\| 0 0` (a fixed value, a number or a tensor) |
| `PERIODIC` | `b c \\| a b c \\| a b` |
| `ZERO_GRADIENT` (also `BOUNDARY`) | `a a \\| a b c \\| c c` |
| `SYMMETRIC` | `b a \\| a b c \\| c b` (the edge value repeats) |
| `REFLECT` | `c b \\| a b c \\| b a` (the edge value does not repeat) |
| `ANTISYMMETRIC` | `-b -a \\| a b c \\| -c -b` |
| `ANTIREFLECT` | `-c -b \\| a b c \\| -b -a` |
| `SYMMETRIC_GRADIENT` | `2a-c 2a-b \\| a b c \\| 2c-b 2c-a` (the differences mirror at the edge) |
| `NONE` | padding leaves the tensor as it is |

Others are built from these: `combine_sides` gives each dim (and each side of it) its own extrapolation,
`combine_by_direction` one for the component of a `vector` dim normal to the boundary and one for the
others, and `where` chooses between two by a mask. Extrapolations of the same kind combine with `+ - * /`
as the values they extrapolate do (`ONE + ONE` is the constant 2, `PERIODIC * ONE` stays periodic);
`to_dict` and `from_dict` write them as plain data.

Padding is built from slicing and concatenation, so it works on every tensor kind and is traced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ._compare import always_close
from ._dims import channel, merge_shapes
from ._dims import shape as shape_of
from ._elementwise import where as select
from ._extrapolations import (
    ANTIREFLECT,
    ANTISYMMETRIC,
    BOUNDARY,
    NONE,
    ONE,
    PERIODIC,
    REFLECT,
    SYMMETRIC,
    SYMMETRIC_GRADIENT,
    ZERO,
    ZERO_GRADIENT,
    ConstantExtrapolation,
    Extrapolation,
    Undefined,
    _CopyExtrapolation,
    added_widths,
)
from ._npz import from_dict as tensor_from_dict
from ._npz import to_dict as tensor_to_dict
from ._shape import Shape
from ._structure import stack_tensors
from ._tensor import NUMBER_TYPES, Tensor, as_tensor
from .magic import slicing_dict


def _binary_sides(op: Callable, a: Extrapolation, b: Extrapolation) -> Extrapolation:
    """`op` side by side; a plain extrapolation applies to every side."""
    dims = list(dict.fromkeys(d for e in (a, b) if isinstance(e, _Sides) for d in e.sides))
    sides = {dim: tuple(op(a._for(dim, upper), b._for(dim, upper)) for upper in (False, True)) for dim in dims}
    defaults = [e.default if isinstance(e, _Sides) else e for e in (a, b)]
    default = None if None in defaults else op(*defaults)
    return _combined(sides, default)


class _Sides(Extrapolation):
    """Extrapolations per dim and edge: `{dim: (lower, upper)}`; dims not listed use `default`."""

    _nesting = 2

    def __init__(self, sides: dict, default: Extrapolation | None):
        self.sides = sides
        self.default = default

    @property
    def pad_rank(self) -> int:
        return min(e.pad_rank for e in self._parts())

    def _parts(self) -> list:
        return list(dict.fromkeys([e for pair in self.sides.values() for e in pair]
                                  + ([self.default] if self.default is not None else [])))

    @property
    def shape(self) -> Shape:
        return merge_shapes(*[e._shape_in(tuple(self.sides)) if isinstance(e, _NormalTangential) else e.shape
                              for e in self._parts()])

    @property
    def is_flexible(self) -> bool:
        return any(e.is_flexible for e in self._parts())

    def to_dict(self) -> dict:
        dims = {}
        for dim, (lower, upper) in self.sides.items():
            if lower == upper:
                dims[dim] = lower.to_dict()
            else:
                dims[dim + '-'], dims[dim + '+'] = lower.to_dict(), upper.to_dict()
        if self.default is not None:
            dims['*'] = self.default.to_dict()
        return {'type': 'mixed_v2', 'dims': dims}

    def spatial_gradient(self) -> Extrapolation:
        return self._children_map(lambda e: e.spatial_gradient())

    def determines_boundary_values(self, boundary_key: str) -> bool:
        dim, upper = _boundary(boundary_key)
        return self._for(dim, bool(upper)).determines_boundary_values(boundary_key)

    def is_copy_pad(self, dim: str, upper_edge: bool) -> bool:
        return self._for(dim, upper_edge).is_copy_pad(dim, upper_edge)

    def _for(self, dim: str, upper_edge: bool | None = None) -> Extrapolation:
        if dim not in self.sides:
            if self.default is None:
                raise KeyError(f'No extrapolation is given for dim {dim!r}; the dims given are {list(self.sides)}')
            return self.default
        lower, upper = self.sides[dim]
        if upper_edge is None:
            return self if lower != upper else lower
        return upper if upper_edge else lower

    def pad(self, value: Tensor, widths: dict, already_padded: dict | None = None, **kwargs) -> Tensor:
        """Pads with each extrapolation in turn, in the order of `pad_rank`, each at the edges it is given for."""
        value = as_tensor(value)
        done = dict(already_padded or {})
        used = [d for d in widths if d in value.shape.names]
        parts = list(dict.fromkeys(self._for(d, upper) for d in used for upper in (False, True)))
        for ext in sorted(parts, key=lambda e: e.pad_rank):
            own = {d: tuple(w if self._for(d, upper) == ext else 0 for upper, w in zip((False, True), widths[d],
                                                                                        strict=True))
                   for d in used}
            value = ext.pad(value, own, done, **kwargs)
            done = added_widths(done, own)
        return value

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        return self._for(dim, upper_edge).pad_values(value, width, dim, upper_edge, already_padded, **kwargs)

    def __getitem__(self, item) -> Extrapolation:
        item = slicing_dict(self, item)
        dims = tuple(self.sides)
        sides = {d: (lo._getitem_with_domain(item, d, False, dims), up._getitem_with_domain(item, d, True, dims))
                 for d, (lo, up) in self.sides.items()}
        return _combined(sides, None if self.default is None else self.default[item])

    def _getitem_with_domain(self, item: dict, dim: str, upper_edge: bool, all_dims: Sequence[str]) -> Extrapolation:
        return self._for(dim, upper_edge)._getitem_with_domain(item, dim, upper_edge, all_dims)

    def _combine(self, op: Callable, other: Extrapolation, self_first: bool) -> Extrapolation:
        return _binary_sides(op, self, other) if self_first else _binary_sides(op, other, self)

    def _children_map(self, f: Callable) -> Extrapolation:
        return _combined({d: (f(lo), f(up)) for d, (lo, up) in self.sides.items()},
                         None if self.default is None else f(self.default))

    def __repr__(self) -> str:
        shown = {d: lo if lo == up else (lo, up) for d, (lo, up) in self.sides.items()}
        return repr(shown if self.default is None else {**shown, '*': self.default})

    def __eq__(self, other) -> bool:
        return isinstance(other, _Sides) and other.sides == self.sides and other.default == self.default

    def __hash__(self) -> int:
        return hash(frozenset(self.sides))


def _boundary(key: str) -> tuple[str, str]:
    """('x', '+') for 'x+', ('x', '') for 'x'."""
    return (key[:-1], key[-1]) if key[-1:] in ('+', '-') else (key, '')


class _NormalTangential(Extrapolation):
    """One extrapolation for the component of a `vector` dim along the padded dim, another for the others."""

    _nesting = 1

    def __init__(self, normal: Extrapolation, tangential: Extrapolation):
        self.normal = normal
        self.tangential = tangential

    @property
    def pad_rank(self) -> int:
        return min(self.normal.pad_rank, self.tangential.pad_rank)

    @property
    def shape(self) -> Shape:
        return merge_shapes(self.normal.shape, self.tangential.shape)

    def _shape_in(self, dims: tuple) -> Shape:
        return self.shape if 'vector' in self.shape.names else self.shape & channel(vector=dims)

    @property
    def is_flexible(self) -> bool:
        return self.normal.is_flexible

    def to_dict(self) -> dict:
        return {'type': 'normal-tangential', 'normal': self.normal.to_dict(), 'tangential': self.tangential.to_dict()}

    def spatial_gradient(self) -> Extrapolation:
        return self._children_map(lambda e: e.spatial_gradient())

    def determines_boundary_values(self, boundary_key: str) -> bool:
        return self.normal.determines_boundary_values(boundary_key)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        labels = value.shape.get_item_names('vector') if 'vector' in value.shape.names else None
        if labels is None:
            raise ValueError(f'Padding with {self!r} needs a channel dim "vector" labelled by dim names, got '
                             f'{value.shape}')
        parts = [(self.normal if label == dim else self.tangential).pad_values(
            value[{'vector': i}], width, dim, upper_edge, already_padded, **kwargs) for i, label in enumerate(labels)]
        return stack_tensors(parts, value.shape['vector'])

    def __getitem__(self, item) -> Extrapolation:
        if isinstance(item, dict) and 'vector' in item:
            raise ValueError(f'Slicing {self!r} along vector needs the domain dims: use domain_slice()')
        return self

    def _getitem_with_domain(self, item: dict, dim: str, upper_edge: bool, all_dims: Sequence[str]) -> Extrapolation:
        if 'vector' not in item:
            return self
        component = item['vector']
        if isinstance(component, int):
            component = all_dims[component]
        return self.normal if component == dim else self.tangential

    def _combine(self, op: Callable, other: Extrapolation, self_first: bool) -> Extrapolation:
        if isinstance(other, _NormalTangential):
            a, b = (self, other) if self_first else (other, self)
            return combine_by_direction(op(a.normal, b.normal), op(a.tangential, b.tangential))
        return self._children_map(lambda e: op(e, other) if self_first else op(other, e))

    def _children_map(self, f: Callable) -> Extrapolation:
        return combine_by_direction(f(self.normal), f(self.tangential))

    def __repr__(self) -> str:
        return f'normal={self.normal!r}, tangential={self.tangential!r}'

    def __eq__(self, other) -> bool:
        return isinstance(other, _NormalTangential) and (self.normal, self.tangential) == (other.normal,
                                                                                           other.tangential)

    def __hash__(self) -> int:
        return hash((self.normal, self.tangential))


class _Conditional(Extrapolation):
    """`true_ext` where `mask` holds, `false_ext` elsewhere; the mask's values at the edge decide."""

    _nesting = 1

    def __init__(self, mask: Tensor, true_ext: Extrapolation, false_ext: Extrapolation):
        self.mask = mask
        self.true_ext = true_ext
        self.false_ext = false_ext

    @property
    def pad_rank(self) -> int:
        return self.false_ext.pad_rank

    @property
    def shape(self) -> Shape:
        return self.mask.shape & self.true_ext.shape & self.false_ext.shape

    @property
    def is_flexible(self) -> bool:
        return self.true_ext.is_flexible or self.false_ext.is_flexible

    def to_dict(self) -> dict:
        return {'type': 'conditional', 'mask': tensor_to_dict(self.mask), 'true': self.true_ext.to_dict(),
                'false': self.false_ext.to_dict()}

    def spatial_gradient(self) -> Extrapolation:
        return self._children_map(lambda e: e.spatial_gradient())

    def determines_boundary_values(self, boundary_key: str) -> bool:
        both = {self.true_ext.determines_boundary_values(boundary_key),
                self.false_ext.determines_boundary_values(boundary_key)}
        if len(both) != 1:
            raise ValueError(f'{self.true_ext!r} and {self.false_ext!r} disagree on whether they determine the '
                             f'boundary values at {boundary_key!r}')
        return both.pop()

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        mask = self.mask
        grown = {d: w for d, w in (already_padded or {}).items() if d in mask.shape.names and d != dim}
        if grown:
            mask = ZERO_GRADIENT.pad(mask, grown)
        if dim in mask.shape.names:
            mask = mask[{dim: -1 if upper_edge else 0}]
        return select(mask, self.true_ext.pad_values(value, width, dim, upper_edge, already_padded, **kwargs),
                      self.false_ext.pad_values(value, width, dim, upper_edge, already_padded, **kwargs))

    def __getitem__(self, item) -> Extrapolation:
        item = slicing_dict(self, item)
        return where(self.mask[{d: i for d, i in item.items() if d in self.mask.shape.names}],
                     self.true_ext[item], self.false_ext[item])

    def _combine(self, op: Callable, other: Extrapolation, self_first: bool) -> Extrapolation:
        if isinstance(other, _Conditional) and always_close(self.mask, other.mask, 0, 0):
            a, b = (self, other) if self_first else (other, self)
            return where(self.mask, op(a.true_ext, b.true_ext), op(a.false_ext, b.false_ext))
        return self._children_map(lambda e: op(e, other) if self_first else op(other, e))

    def _children_map(self, f: Callable) -> Extrapolation:
        return where(self.mask, f(self.true_ext), f(self.false_ext))

    def __repr__(self) -> str:
        return f'{self.true_ext!r} or {self.false_ext!r}'

    def __eq__(self, other) -> bool:
        return isinstance(other, _Conditional) and (self.true_ext, self.false_ext) == (other.true_ext,
                                                                                       other.false_ext) \
            and always_close(self.mask, other.mask, 0, 0)

    def __hash__(self) -> int:
        return hash((self.true_ext, self.false_ext))


_BY_NAME = {'zero': ZERO, 'zeros': ZERO, 'one': ONE, 'periodic': PERIODIC, 'zero-gradient': ZERO_GRADIENT,
            'zero_gradient': ZERO_GRADIENT, '∇=0': ZERO_GRADIENT, 'boundary': ZERO_GRADIENT, 'symmetric': SYMMETRIC,
            'reflect': REFLECT, 'antisymmetric': ANTISYMMETRIC, 'antireflect': ANTIREFLECT,
            'symmetric-gradient': SYMMETRIC_GRADIENT, 'none': NONE}


def as_extrapolation(obj) -> Extrapolation:
    """An `Extrapolation` from itself, None (`NONE`), a number or tensor (a constant), a name such as 'periodic'
    or 'zero-gradient', a dict {'normal': ..., 'tangential': ...} (see `combine_by_direction`), or a dict
    {dim: extrapolation or (lower, upper)} (see `combine_sides`)."""
    if isinstance(obj, Extrapolation):
        return obj
    if obj is None:
        return NONE
    if isinstance(obj, (Tensor, *NUMBER_TYPES)):
        return ConstantExtrapolation(obj)
    if isinstance(obj, str):
        key = obj.strip().lower()
        if key not in _BY_NAME:
            raise ValueError(f'Unknown extrapolation {obj!r}; known names: {sorted(_BY_NAME)}')
        return _BY_NAME[key]
    if isinstance(obj, Mapping):
        if 'normal' in obj or 'tangential' in obj:
            if set(obj) != {'normal', 'tangential'}:
                raise ValueError(f'A normal/tangential extrapolation dict has exactly the keys "normal" and '
                                 f'"tangential", got {sorted(obj)}')
            return combine_by_direction(obj['normal'], obj['tangential'])
        return combine_sides(obj)
    raise TypeError(f'Cannot make an extrapolation from {obj!r}: give an Extrapolation, a number or tensor, a name '
                    f'like "periodic", or a dict {{dim: extrapolation}}')


def combine_sides(boundary_dict: Mapping | None = None, **extrapolations) -> Extrapolation:
    """One extrapolation per dim, or per edge of a dim: values are extrapolations or `(lower, upper)` pairs.

    `combine_sides(x=PERIODIC, y=(ZERO, ONE))`; keys are dim names, `'x-'`/`'x+'` for one edge, Shapes, or `'*'`
    (every other dim). When all edges get the same extrapolation, that one is returned.
    """
    given = dict(boundary_dict or {}, **extrapolations)
    if not given:
        raise ValueError('combine_sides() needs at least one extrapolation')
    default = as_extrapolation(given.pop('*')) if '*' in given else None
    sides = {}
    for key, side in given.items():
        if isinstance(side, (tuple, list)):
            if len(side) != 2:
                raise ValueError(f'combine_sides(): {key!r} needs one extrapolation or a (lower, upper) pair, got '
                                 f'{side!r}')
            pair = tuple(as_extrapolation(s) for s in side)
        else:
            pair = (as_extrapolation(side),) * 2
        if isinstance(key, str) and key[-1:] in ('+', '-'):
            dim, edge = _boundary(key)
            before = sides.get(dim, (None, None))
            sides[dim] = (before[0], pair[1]) if edge == '+' else (pair[0], before[1])
            continue
        for name in (shape_of(key).names if isinstance(key, Shape) else (key,)):
            sides[name] = pair
    missing = [d for d, pair in sides.items() if None in pair]
    if missing:
        raise ValueError(f'combine_sides(): only one edge of {missing} is given; give both "x-" and "x+"')
    return _combined(sides, default)


def _combined(sides: dict, default: Extrapolation | None) -> Extrapolation:
    if any(isinstance(e, _Sides) for pair in sides.values() for e in pair) or isinstance(default, _Sides):
        raise ValueError(f'combine_sides() does not nest: got {sides} (default {default!r})')
    distinct = set(e for pair in sides.values() for e in pair) | ({default} if default is not None else set())
    if len(distinct) == 1:
        return distinct.pop()
    return _Sides(sides, default)


def combine_by_direction(normal, tangential) -> Extrapolation:
    """`normal` for the component of a `vector` dim (labelled by dim names) along the dim being padded,
    `tangential` for the other components; one extrapolation if both are the same."""
    normal, tangential = as_extrapolation(normal), as_extrapolation(tangential)
    return normal if normal == tangential else _NormalTangential(normal, tangential)


def get_normal(ext: Extrapolation) -> Extrapolation:
    """The extrapolation `ext` uses for the normal component (itself, if it does not distinguish)."""
    if isinstance(ext, _NormalTangential):
        return ext.normal
    return ext._children_map(get_normal) if isinstance(ext, _Sides) else ext


def get_tangential(ext: Extrapolation) -> Extrapolation:
    """The extrapolation `ext` uses for tangential components (itself, if it does not distinguish)."""
    if isinstance(ext, _NormalTangential):
        return ext.tangential
    return ext._children_map(get_tangential) if isinstance(ext, _Sides) else ext


def where(mask: Tensor, true_ext, false_ext) -> Extrapolation:
    """`true_ext` where `mask` is true, `false_ext` where it is false; `mask` has dims of the padded tensor, and
    its values at the edge being padded decide (a mask along the padded dim is read at that edge)."""
    true_ext, false_ext = as_extrapolation(true_ext), as_extrapolation(false_ext)
    mask = as_tensor(mask)
    if always_close(mask, True, 0, 0):
        return true_ext
    if always_close(mask, False, 0, 0) or true_ext == false_ext:
        return false_ext
    return _Conditional(mask, true_ext, false_ext)


def from_dict(dictionary: dict) -> Extrapolation:
    """The extrapolation that `Extrapolation.to_dict` wrote (also phiml's dicts of constants, sides and
    normal/tangential extrapolations)."""
    kind = dictionary.get('type') if isinstance(dictionary, Mapping) else None
    if kind in _BY_NAME:
        return _BY_NAME[kind]
    if kind == 'constant':
        value = dictionary['value']
        return ConstantExtrapolation(tensor_from_dict(value) if isinstance(value, Mapping) else
                                     value.item() if isinstance(value, np.ndarray) and not value.ndim else value)
    if kind == 'mixed':
        return combine_sides({d: (from_dict(lo), from_dict(up)) for d, (lo, up) in dictionary['dims'].items()})
    if kind == 'mixed_v2':
        return combine_sides({d: from_dict(e) for d, e in dictionary['dims'].items()})
    if kind == 'normal-tangential':
        return combine_by_direction(from_dict(dictionary['normal']), from_dict(dictionary['tangential']))
    if kind == 'conditional':
        return where(tensor_from_dict(dictionary['mask']), from_dict(dictionary['true']),
                     from_dict(dictionary['false']))
    if kind == 'undefined':
        return Undefined(from_dict(dictionary['derived_from']))
    raise ValueError(f'from_dict() takes a dict written by Extrapolation.to_dict(); got {dictionary!r}')


def order_by_shape(names: Sequence[str] | Shape, sequence, default=None):
    """The values of a dict `sequence` {dim: value} listed in the order of `names` (`default` for missing dims);
    a sequence of the same length as `names` or a single value is returned as it is."""
    names = names.names if isinstance(names, Shape) else tuple(names)
    if isinstance(sequence, dict):
        return [sequence.get(dim, default) for dim in names]
    if isinstance(sequence, (tuple, list)) and len(sequence) != len(names):
        raise ValueError(f'order_by_shape(): {len(sequence)} values for the {len(names)} dims {names}')
    return sequence


def map(f: Callable[[Extrapolation], Extrapolation], extrapolation) -> Extrapolation:
    """`f` applied to every leaf of `extrapolation` (the parts of `combine_sides`, `combine_by_direction` and
    `where`), combined again the same way (and simplified where the parts became equal)."""
    extrapolation = as_extrapolation(extrapolation)
    combined = extrapolation._children_map(lambda e: map(f, e))
    return f(extrapolation) if combined is None else combined


def remove_constant_offset(extrapolation) -> Extrapolation:
    """`extrapolation` with every constant replaced by zero (NaN constants too)."""
    return map(lambda e: ZERO if isinstance(e, ConstantExtrapolation) else e, extrapolation)


def domain_slice(ext: Extrapolation, item: dict, domain_dims) -> Extrapolation:
    """`ext[item]` for a domain of `domain_dims` (a Shape, names, or 'x,y'), which slicing a normal/tangential
    extrapolation along `vector` needs: component `i` or `'x'` is normal at the edges of its own dim."""
    ext = as_extrapolation(ext)
    if isinstance(ext, (ConstantExtrapolation, _CopyExtrapolation)):
        return ext[item]
    if isinstance(domain_dims, Shape):
        names = domain_dims.names
    elif isinstance(domain_dims, str):
        names = tuple(n.strip() for n in domain_dims.split(',') if n.strip())
    else:
        names = tuple(domain_dims)
    dims = tuple(dict.fromkeys(_boundary(n)[0] for n in names))
    sides = {d: (ext._getitem_with_domain(item, d, False, dims), ext._getitem_with_domain(item, d, True, dims))
             for d in dims}
    return _combined(sides, None)


__all__ = ['ANTIREFLECT', 'ANTISYMMETRIC', 'BOUNDARY', 'NONE', 'ONE', 'PERIODIC', 'REFLECT', 'SYMMETRIC',
           'SYMMETRIC_GRADIENT', 'ZERO', 'ZERO_GRADIENT', 'ConstantExtrapolation', 'Extrapolation', 'Undefined',
           'as_extrapolation', 'combine_by_direction', 'combine_sides', 'domain_slice', 'from_dict', 'get_normal',
           'get_tangential', 'map', 'order_by_shape', 'remove_constant_offset', 'where']
