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

Padding is built from slicing and concatenation, so it works on every tensor kind and is traced.
`combine_sides` gives each dim (and each side of it) its own extrapolation.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..backend import NUMPY
from ._dims import shape as shape_of
from ._elementwise import where
from ._kinds import expand_to
from ._shape import Shape
from ._structure import concat_tensors, rename_tensor_dims
from ._tensor import NUMBER_TYPES, Dense, Tensor, as_tensor


class Extrapolation:
    """How values continue beyond the edges of a tensor along its dims (see the module docstring)."""

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, **kwargs) -> Tensor:
        """The `width` values beyond the lower (or upper) edge of `value` along `dim`, nearest to the edge last
        (lower) or first (upper): what padding adds there."""
        raise NotImplementedError(type(self).__name__)

    def pad(self, value: Tensor, widths: dict, **kwargs) -> Tensor:
        """`value` padded by `widths` {dim: (lower, upper)} (non-negative), one dim after the other.

        The labels of padded dims are dropped. Dims `value` lacks are skipped.
        """
        value = as_tensor(value)
        for dim, (lower, upper) in widths.items():
            if dim not in value.shape.names or (lower == 0 and upper == 0):
                continue
            if lower < 0 or upper < 0:
                raise ValueError(f'Extrapolation.pad() takes non-negative widths; got {(lower, upper)} for {dim!r} '
                                 f'(math.pad() slices for negative ones)')
            extrapolation = self._for(dim)
            parts = [_unlabelled(extrapolation.pad_values(value, lower, dim, False, **kwargs), dim)] if lower else []
            parts.append(_unlabelled(value, dim))
            if upper:
                parts.append(_unlabelled(extrapolation.pad_values(value, upper, dim, True, **kwargs), dim))
            value = concat_tensors(parts, dim)
        return value

    def _for(self, dim: str, upper_edge: bool | None = None) -> Extrapolation:
        """The extrapolation used along `dim` (at one of its edges)."""
        return self

    def __getitem__(self, item) -> Extrapolation:
        """This extrapolation for a slice of the padded tensor (a constant tensor value is sliced too)."""
        return self

    def __repr__(self) -> str:
        return type(self).__name__

    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


def _unlabelled(value: Tensor, dim: str) -> Tensor:
    labels = value.shape.get_item_names(dim)
    if labels is None:
        return value
    return rename_tensor_dims(value, dim, value.shape[dim].with_size(value.shape.get_size(dim)))


class ConstantExtrapolation(Extrapolation):
    """A fixed value beyond the edges: a number or a tensor (broadcast by dim name against the padded values)."""

    def __init__(self, value):
        self.value = value if isinstance(value, Tensor) else as_tensor(value)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, **kwargs) -> Tensor:
        return expand_to(self.value, value.shape.with_dim_size(dim, width) & self.value.shape)

    def __getitem__(self, item) -> Extrapolation:
        if isinstance(item, dict) and self.value.shape.rank:
            return ConstantExtrapolation(self.value[item])
        return self

    def __repr__(self) -> str:
        return repr(self.value) if self.value.shape.rank else repr(self.value.numpy().item())

    def __eq__(self, other) -> bool:
        if not isinstance(other, ConstantExtrapolation):
            return False
        if self.value.shape.rank or other.value.shape.rank:
            return self.value is other.value
        return self.value.numpy().item() == other.value.numpy().item()

    def __hash__(self) -> int:
        return hash(('constant', self.value.numpy().item() if not self.value.shape.rank else id(self.value)))


class _CopyExtrapolation(Extrapolation):
    """Values beyond the edges copied from inside: `source(i, n)` says where, for integer positions `i`."""

    name = ''

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        """The positions inside `0..n-1` whose values positions `i` (an integer tensor) take, and the sign they
        take them with (None: unchanged)."""
        raise NotImplementedError(type(self).__name__)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, **kwargs) -> Tensor:
        n = value.shape.get_size(dim)
        if not isinstance(n, int) or n < 1:
            raise ValueError(f'{self!r} padding needs at least one value along {dim!r}, got size {n}')
        positions = np.arange(n, n + width) if upper_edge else np.arange(-width, 0)
        along = value.shape[dim].with_size(width)
        index, sign = self.source(Dense(positions, along, NUMPY), n)
        copied = value[{dim: tuple(int(i) for i in index.numpy())}]
        return copied if sign is None else copied * sign

    def __repr__(self) -> str:
        return self.name


def _folded(i: Tensor, n: int) -> Tensor:
    """Positions mirrored at both edges with the edge values repeating: c b a | a b c | c b a."""
    folded = i % (2 * n)
    return where(folded < n, folded, 2 * n - 1 - folded)


class _Periodic(_CopyExtrapolation):
    name = 'periodic'

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return i % n, None


class _ZeroGradient(_CopyExtrapolation):
    name = 'zero-gradient'

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return where(i < 0, 0, where(i > n - 1, n - 1, i)), None


class _Symmetric(_CopyExtrapolation):
    name = 'symmetric'

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return _folded(i, n), None


class _Reflect(_CopyExtrapolation):
    name = 'reflect'

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        period = max(2 * n - 2, 1)
        folded = i % period
        return where(folded < n, folded, period - folded), None


class _Antisymmetric(_CopyExtrapolation):
    name = 'antisymmetric'

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return _folded(i, n), 1 - 2 * ((i // n) % 2)


class _Sides(Extrapolation):
    """Extrapolations per dim and edge: `{dim: (lower, upper)}`; dims not listed use `default`."""

    def __init__(self, sides: dict, default: Extrapolation | None):
        self.sides = sides
        self.default = default

    def _for(self, dim: str, upper_edge: bool | None = None) -> Extrapolation:
        if dim not in self.sides:
            if self.default is None:
                raise KeyError(f'No extrapolation is given for dim {dim!r}; the dims given are {list(self.sides)}')
            return self.default
        lower, upper = self.sides[dim]
        if upper_edge is None:
            return self if lower != upper else lower
        return upper if upper_edge else lower

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, **kwargs) -> Tensor:
        return self._for(dim, upper_edge).pad_values(value, width, dim, upper_edge, **kwargs)

    def __getitem__(self, item) -> Extrapolation:
        return _Sides({d: (lo[item], up[item]) for d, (lo, up) in self.sides.items()},
                      None if self.default is None else self.default[item])

    def __repr__(self) -> str:
        return f'{self.sides!r}'

    def __eq__(self, other) -> bool:
        return isinstance(other, _Sides) and other.sides == self.sides and other.default == self.default

    def __hash__(self) -> int:
        return hash(tuple(self.sides))


ZERO = ConstantExtrapolation(0)
ONE = ConstantExtrapolation(1)
PERIODIC = _Periodic()
ZERO_GRADIENT = _ZeroGradient()
BOUNDARY = ZERO_GRADIENT
SYMMETRIC = _Symmetric()
REFLECT = _Reflect()
ANTISYMMETRIC = _Antisymmetric()

_BY_NAME = {'zero': ZERO, 'zeros': ZERO, 'one': ONE, 'periodic': PERIODIC, 'zero-gradient': ZERO_GRADIENT,
            'zero_gradient': ZERO_GRADIENT, 'boundary': ZERO_GRADIENT, 'symmetric': SYMMETRIC, 'reflect': REFLECT,
            'antisymmetric': ANTISYMMETRIC}


def as_extrapolation(obj) -> Extrapolation:
    """An `Extrapolation` from itself, a number or tensor (a constant), a name such as 'periodic' or
    'zero-gradient', or a dict {dim: extrapolation or (lower, upper)} (see `combine_sides`)."""
    if isinstance(obj, Extrapolation):
        return obj
    if isinstance(obj, (Tensor, *NUMBER_TYPES)):
        return ConstantExtrapolation(obj)
    if isinstance(obj, str):
        key = obj.strip().lower()
        if key not in _BY_NAME:
            raise ValueError(f'Unknown extrapolation {obj!r}; known names: {sorted(_BY_NAME)}')
        return _BY_NAME[key]
    if isinstance(obj, Mapping):
        return combine_sides(obj)
    raise TypeError(f'Cannot make an extrapolation from {obj!r}: give an Extrapolation, a number or tensor, a name '
                    f'like "periodic", or a dict {{dim: extrapolation}}')


def combine_sides(boundary_dict: Mapping | None = None, **extrapolations) -> Extrapolation:
    """One extrapolation per dim, or per edge of a dim: values are extrapolations or `(lower, upper)` pairs.

    `combine_sides(x=PERIODIC, y=(ZERO, ONE))`; a key `'~'`-free name, a Shape, or `'*'` (every other dim).
    """
    given = dict(boundary_dict or {}, **extrapolations)
    default = as_extrapolation(given.pop('*')) if '*' in given else None
    sides = {}
    for dim, side in given.items():
        names = shape_of(dim).names if isinstance(dim, Shape) else (dim,)
        pair = tuple(as_extrapolation(s) for s in side) if isinstance(side, (tuple, list)) else \
            (as_extrapolation(side),) * 2
        if len(pair) != 2:
            raise ValueError(f'combine_sides(): {dim!r} needs one extrapolation or a (lower, upper) pair, got {side!r}')
        for name in names:
            sides[name] = pair
    return _Sides(sides, default)


__all__ = ['ANTISYMMETRIC', 'BOUNDARY', 'ONE', 'PERIODIC', 'REFLECT', 'SYMMETRIC', 'ZERO', 'ZERO_GRADIENT',
           'ConstantExtrapolation', 'Extrapolation', 'as_extrapolation', 'combine_sides']
