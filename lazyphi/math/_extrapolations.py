"""The base class of extrapolations and the ones that stand alone: constants, copies from inside, the
symmetric gradient, and none. `extrapolation` (the public module) adds those built from others and the
functions making them; see its docstring.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import numpy as np

from ..backend import NUMPY
from ._compare import always_close
from ._dims import channel
from ._elementwise import where as select
from ._kinds import expand_to
from ._npz import to_dict as tensor_to_dict
from ._shape import EMPTY_SHAPE, Shape
from ._structure import concat_tensors, rename_tensor_dims, stack_tensors
from ._tensor import NUMBER_TYPES, Dense, Tensor, as_tensor
from .magic import slicing_dict


class Extrapolation:
    """How values continue beyond the edges of a tensor along its dims (see the module docstring)."""

    pad_rank = 0
    """Order in which `combine_sides` pads with its extrapolations (lowest first): periodic 1, zero-gradient 2,
    symmetric 3, reflect 4, constants 5, as phiml does, so corner values agree with it."""

    @property
    def shape(self) -> Shape:
        """The dims of the values this extrapolation holds (a constant tensor's, a mask's)."""
        return EMPTY_SHAPE

    @property
    def is_flexible(self) -> bool:
        """Whether the values beyond the edges follow the values inside (a constant's do not, nor a periodic's,
        whose outside is inside)."""
        raise NotImplementedError(type(self).__name__)

    def to_dict(self) -> dict:
        """This extrapolation as plain data (dicts, strings, numbers, lists), readable by `from_dict`."""
        raise NotImplementedError(type(self).__name__)

    def spatial_gradient(self) -> Extrapolation:
        """The extrapolation of the spatial gradient of values extrapolated by this one (phiml's rules)."""
        raise NotImplementedError(type(self).__name__)

    def determines_boundary_values(self, boundary_key: str) -> bool:
        """Whether the values on the boundary faces `boundary_key` (`'x-'`, `'x+'` or `'x'`) follow from this
        extrapolation alone, so they need not be stored."""
        raise NotImplementedError(type(self).__name__)

    def valid_outer_faces(self, dim: str) -> tuple[bool, bool]:
        """(lower, upper): whether the outermost faces along `dim` hold values of their own."""
        return not self.determines_boundary_values(dim + '-'), not self.determines_boundary_values(dim + '+')

    def is_copy_pad(self, dim: str, upper_edge: bool) -> bool:
        """Whether the values beyond this edge are copies of values inside."""
        return False

    def shortest_distance(self, start: Tensor, end: Tensor, domain_size: Tensor) -> Tensor:
        """The shortest way from `start` to `end`, both inside a domain of `domain_size` (periodic ones wrap)."""
        return end - start

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        """The `width` values beyond the lower (or upper) edge of `value` along `dim`, nearest to the edge last
        (lower) or first (upper): what padding adds there. `already_padded` {dim: (lower, upper)} says by how
        much `value` has been padded already along other dims (constant tensors and masks follow it)."""
        raise NotImplementedError(type(self).__name__)

    def pad(self, value: Tensor, widths: dict, already_padded: dict | None = None, **kwargs) -> Tensor:
        """`value` padded by `widths` {dim: (lower, upper)} (non-negative), one dim after the other.

        The labels of padded dims are dropped. Dims `value` lacks are skipped.
        """
        value = as_tensor(value)
        done = dict(already_padded or {})
        for dim, (lower, upper) in widths.items():
            if dim not in value.shape.names or (lower == 0 and upper == 0):
                continue
            if lower < 0 or upper < 0:
                raise ValueError(f'Extrapolation.pad() takes non-negative widths; got {(lower, upper)} for {dim!r} '
                                 f'(math.pad() slices for negative ones)')
            if self._uniform_along(value, dim):  # the padded values equal those inside: stay lazily expanded
                size = value.shape.get_size(dim) + lower + upper
                value = expand_to(value[{dim: 0}], value.shape.with_dim_size(dim, size))
                done = added_widths(done, {dim: (lower, upper)})
                continue
            parts = [_unlabelled(self.pad_values(value, lower, dim, False, done, **kwargs), dim)] if lower else []
            parts.append(_unlabelled(value, dim))
            if upper:
                parts.append(_unlabelled(self.pad_values(value, upper, dim, True, done, **kwargs), dim))
            value = concat_tensors(parts, dim)
            done = added_widths(done, {dim: (lower, upper)})
        return value

    def _uniform_along(self, value: Tensor, dim: str) -> bool:
        """Whether padding `value` along `dim` adds only values equal to those inside, which `value` holds once."""
        return False

    def transform_coordinates(self, coordinates: Tensor, shape: Shape, **kwargs) -> Tensor:
        """Integer grid positions mapped to the positions inside a grid of `shape` whose values they take:
        copies map to their source, others are clamped to the edge (the grid is taken to hold the boundary
        values there). `coordinates` list the dims along a `vector` channel dim (labelled by dim names, or in
        the order of `shape`'s spatial dims); without one, `shape` has a single spatial dim."""
        coordinates = as_tensor(coordinates)
        if 'vector' not in coordinates.shape.names:
            dims = shape.spatial if shape.spatial.rank else shape
            if dims.rank != 1:
                raise ValueError(f'transform_coordinates(): coordinates {coordinates.shape} need a vector dim listing '
                                 f'the dims of {shape}')
            return self._transform_dim(coordinates, dims.name, dims.size)
        labels = coordinates.shape.get_item_names('vector') or (shape.spatial or shape).names
        parts = [self._transform_dim(coordinates[{'vector': i}], dim, shape.get_size(dim))
                 for i, dim in enumerate(labels)]
        return stack_tensors(parts, channel(vector=tuple(labels)))

    def _transform_dim(self, position: Tensor, dim: str, n: int) -> Tensor:
        lower, upper = self._for(dim, False), self._for(dim, True)
        if lower == upper:
            return lower._transform_1d(position, n)
        return select(position <= 0, lower._transform_1d(position, n), upper._transform_1d(position, n))

    def _transform_1d(self, position: Tensor, n: int) -> Tensor:
        return _clamped(position, n)

    def _for(self, dim: str, upper_edge: bool | None = None) -> Extrapolation:
        """The extrapolation used along `dim` (at one of its edges)."""
        return self

    def __getitem__(self, item) -> Extrapolation:
        """This extrapolation for a slice of the padded tensor (constant tensors and masks are sliced too)."""
        return self

    def _getitem_with_domain(self, item: dict, dim: str, upper_edge: bool, all_dims: Sequence[str]) -> Extrapolation:
        """This extrapolation at one edge of a domain of `all_dims`, for a slice `item` (see `domain_slice`)."""
        return self[item]

    def __repr__(self) -> str:
        return type(self).__name__

    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    # --- arithmetic: the values beyond the edges combine like the values inside ---

    _nesting = 0  # built from other extrapolations: the one nested deeper distributes arithmetic over its parts

    def _combine(self, op: Callable, other: Extrapolation, self_first: bool) -> Extrapolation:
        """`op(self, other)` (or `op(other, self)`) part by part, for extrapolations built from others."""
        raise NotImplementedError(type(self).__name__)

    def _children_map(self, f: Callable) -> Extrapolation | None:
        """The same combination of `f` applied to each part, for extrapolations built from others; None for leaves."""
        return None

    def _unary(self, op: Callable) -> Extrapolation:
        raise TypeError(f'{op.__name__}() is not defined for the extrapolation {self!r}')

    def __neg__(self) -> Extrapolation:
        return _unary(operator.neg, self)

    def __abs__(self) -> Extrapolation:
        return _unary(operator.abs, self)

    def __add__(self, other):
        return _binary(operator.add, self, other)

    def __radd__(self, other):
        return _binary(operator.add, other, self)

    def __sub__(self, other):
        return _binary(operator.sub, self, other)

    def __rsub__(self, other):
        return _binary(operator.sub, other, self)

    def __mul__(self, other):
        return _binary(operator.mul, self, other)

    def __rmul__(self, other):
        return _binary(operator.mul, other, self)

    def __truediv__(self, other):
        return _binary(operator.truediv, self, other)

    def __rtruediv__(self, other):
        return _binary(operator.truediv, other, self)

    def __lt__(self, other):
        return _binary(operator.lt, self, other)

    def __gt__(self, other):
        return _binary(operator.gt, self, other)


def added_widths(done: dict, widths: dict) -> dict:
    result = dict(done)
    for dim, (lower, upper) in widths.items():
        before = result.get(dim, (0, 0))
        result[dim] = (before[0] + lower, before[1] + upper)
    return result


def _unlabelled(value: Tensor, dim: str) -> Tensor:
    labels = value.shape.get_item_names(dim)
    if labels is None:
        return value
    return rename_tensor_dims(value, dim, value.shape[dim].with_size(value.shape.get_size(dim)))


def _clamped(position: Tensor, n: int) -> Tensor:
    return select(position < 0, 0, select(position > n - 1, n - 1, position))


def _operand(value) -> Extrapolation | None:
    if isinstance(value, Extrapolation):
        return value
    if isinstance(value, (Tensor, *NUMBER_TYPES)):
        return ConstantExtrapolation(value)
    return None


def _unary(op: Callable, ext: Extrapolation) -> Extrapolation:
    combined = ext._children_map(lambda e: _unary(op, e))
    return combined if combined is not None else ext._unary(op)


def _binary(op: Callable, a, b):
    """`op(a, b)` of two extrapolations (a number or tensor stands for a constant); NotImplemented for others."""
    a, b = _operand(a), _operand(b)
    if a is None or b is None:
        return NotImplemented
    for first in (a, b):
        if isinstance(first, (_NoExtrapolation, Undefined)):
            return first
    outer, outer_first = (a, True) if a._nesting >= b._nesting else (b, False)
    if outer._nesting:
        return outer._combine(op, b if outer_first else a, outer_first)
    if isinstance(a, ConstantExtrapolation) and isinstance(b, ConstantExtrapolation):
        return ConstantExtrapolation(op(a.value, b.value))
    result = _neutral(op, a, b)
    if result is None:
        raise TypeError(f'Cannot combine the extrapolations {a!r} and {b!r} with {op.__name__}: only constants '
                        f'combine with each other, extrapolations of one kind with themselves, and any with the '
                        f'constants that leave it unchanged (+ 0, * 1, / 1) or make it a constant (* 0)')
    return result


def _neutral(op: Callable, a: Extrapolation, b: Extrapolation) -> Extrapolation | None:
    """`op(a, b)` by the rules of zeros and ones, or of a copying extrapolation with itself; None if none applies."""
    zero_a, zero_b = _is_constant(a, 0), _is_constant(b, 0)
    if op in (operator.add, operator.sub) and zero_b:
        return a
    if op is operator.add and zero_a:
        return b
    if op is operator.sub and zero_a:
        return -b
    if op is operator.mul:
        if zero_a or _is_constant(b, 1):
            return a
        if zero_b or _is_constant(a, 1):
            return b
    if op is operator.truediv and (zero_a or _is_constant(b, 1)):
        return a
    if op in (operator.add, operator.sub, operator.mul, operator.truediv) and isinstance(a, _CopyExtrapolation) \
            and type(a) is type(b):
        return a
    return None


def _is_constant(ext: Extrapolation, number) -> bool:
    return isinstance(ext, ConstantExtrapolation) and not ext.value.shape.rank and ext.value.numpy().item() == number


class ConstantExtrapolation(Extrapolation):
    """A fixed value beyond the edges: a number or a tensor (broadcast by dim name against the padded values)."""

    pad_rank = 5

    def __init__(self, value):
        self.value = value if isinstance(value, Tensor) else as_tensor(value)
        if self.value.dtype.kind not in (bool, int, float, complex):
            raise TypeError(f'ConstantExtrapolation takes a number or a numeric tensor, got {value!r}')

    @property
    def shape(self) -> Shape:
        return self.value.shape

    @property
    def is_flexible(self) -> bool:
        return False

    def to_dict(self) -> dict:
        value = self.value.numpy().item() if not self.value.shape.rank else tensor_to_dict(self.value)
        return {'type': 'constant', 'value': value}

    def spatial_gradient(self) -> Extrapolation:
        return ZERO

    def determines_boundary_values(self, boundary_key: str) -> bool:
        return True

    def _uniform_along(self, value: Tensor, dim: str) -> bool:
        if value._names or self.value.shape.rank or not value.available:
            return False
        return always_close(value[{d: 0 for d in value.shape.names}], self.value, 0, 0, equal_nan=True)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        constant = self.value
        grown = {d: w for d, w in (already_padded or {}).items() if d in constant.shape.names and d != dim}
        if grown:
            constant = ZERO.pad(constant, grown)
        return expand_to(constant, value.shape.with_dim_size(dim, width) & constant.shape)

    def __getitem__(self, item) -> Extrapolation:
        if not self.value.shape.rank:
            return self
        item = slicing_dict(self, item)
        return ConstantExtrapolation(self.value[item]) if item else self

    def _unary(self, op: Callable) -> Extrapolation:
        return ConstantExtrapolation(op(self.value))

    def __repr__(self) -> str:
        return repr(self.value) if self.value.shape.rank else repr(self.value.numpy().item())

    def __eq__(self, other) -> bool:
        if not isinstance(other, ConstantExtrapolation):
            return False
        return always_close(self.value, other.value, rel_tolerance=0, abs_tolerance=0, equal_nan=True)

    def __hash__(self) -> int:
        if self.value.shape.rank:
            return hash(('constant', frozenset(self.value.shape.names)))
        number = self.value.numpy().item()
        return hash(('constant', 'nan' if number != number else number))


class _CopyExtrapolation(Extrapolation):
    """Values beyond the edges copied from inside: `source(i, n)` says where, for integer positions `i`."""

    name = ''

    @property
    def is_flexible(self) -> bool:
        return True

    def to_dict(self) -> dict:
        return {'type': self.name}

    def spatial_gradient(self) -> Extrapolation:
        return self

    def determines_boundary_values(self, boundary_key: str) -> bool:
        return False

    def is_copy_pad(self, dim: str, upper_edge: bool) -> bool:
        return True

    def _uniform_along(self, value: Tensor, dim: str) -> bool:
        return dim not in value._names and not self._signed

    _signed = False  # whether some copies change sign

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        """The positions inside `0..n-1` whose values positions `i` (an integer tensor) take, and the sign they
        take them with (None: unchanged)."""
        raise NotImplementedError(type(self).__name__)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        n = value.shape.get_size(dim)
        if not isinstance(n, int) or n < 1:
            raise ValueError(f'{self!r} padding needs at least one value along {dim!r}, got size {n}')
        positions = np.arange(n, n + width) if upper_edge else np.arange(-width, 0)
        along = value.shape[dim].with_size(width)
        index, sign = self.source(Dense(positions, along, NUMPY), n)
        copied = value[{dim: tuple(int(i) for i in index.numpy())}]
        return copied if sign is None else copied * sign

    def _transform_1d(self, position: Tensor, n: int) -> Tensor:
        return self.source(position, n)[0]

    def _unary(self, op: Callable) -> Extrapolation:
        return self

    def __repr__(self) -> str:
        return self.name


def _folded(i: Tensor, n: int) -> Tensor:
    """Positions mirrored at both edges with the edge values repeating: c b a | a b c | c b a."""
    folded = i % (2 * n)
    return select(folded < n, folded, 2 * n - 1 - folded)


def _reflected(i: Tensor, n: int) -> Tensor:
    """Positions mirrored at the edge values, which do not repeat: c b | a b c | b a."""
    period = max(2 * n - 2, 1)
    folded = i % period
    return select(folded < n, folded, period - folded)


class _Periodic(_CopyExtrapolation):
    name = 'periodic'
    pad_rank = 1

    @property
    def is_flexible(self) -> bool:
        return False

    def determines_boundary_values(self, boundary_key: str) -> bool:
        if not boundary_key.endswith(('+', '-')):
            raise ValueError(f'Periodic boundaries are defined on grids, by keys like "x-" and "x+"; got '
                             f'{boundary_key!r}')
        return boundary_key.endswith('+')

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return i % n, None

    def shortest_distance(self, start: Tensor, end: Tensor, domain_size: Tensor) -> Tensor:
        return (end - start + domain_size / 2) % domain_size - domain_size / 2


class _ZeroGradient(_CopyExtrapolation):
    name = 'zero-gradient'
    pad_rank = 2

    def spatial_gradient(self) -> Extrapolation:
        return ZERO

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return _clamped(i, n), None


class _Symmetric(_CopyExtrapolation):
    name = 'symmetric'
    pad_rank = 3

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return _folded(i, n), None


class _Antisymmetric(_Symmetric):
    name = 'antisymmetric'
    _signed = True

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return _folded(i, n), 1 - 2 * ((i // n) % 2)


class _Reflect(_CopyExtrapolation):
    name = 'reflect'
    pad_rank = 4

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        return _reflected(i, n), None


class _Antireflect(_Reflect):
    name = 'antireflect'
    _signed = True

    def source(self, i: Tensor, n: int) -> tuple[Tensor, Tensor | None]:
        m = max(n - 1, 1)  # each mirror image spans m positions beyond the last
        mirrors = select(i < 0, (m - 1 - i) // m, select(i > 0, (i - 1) // m, 0))
        return _reflected(i, n), 1 - 2 * (mirrors % 2)


class _SymmetricGradient(Extrapolation):
    """Differences mirrored at the edge: the value beyond is twice the edge value minus its mirror image inside."""

    pad_rank = 3

    @property
    def is_flexible(self) -> bool:
        return True

    def to_dict(self) -> dict:
        return {'type': 'symmetric-gradient'}

    def spatial_gradient(self) -> Extrapolation:
        raise NotImplementedError('The spatial gradient of SYMMETRIC_GRADIENT is not defined (nor in phiml)')

    def determines_boundary_values(self, boundary_key: str) -> bool:
        raise NotImplementedError('SYMMETRIC_GRADIENT does not say which boundary values it determines (nor in phiml)')

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        mirrored = ANTIREFLECT.pad_values(value, width, dim, upper_edge, already_padded, **kwargs)
        return mirrored + 2 * value[{dim: -1 if upper_edge else 0}]

    def __repr__(self) -> str:
        return 'symmetric-gradient'


class _NoExtrapolation(Extrapolation):
    """No values beyond the edges: padding leaves a tensor unchanged; arithmetic keeps it."""

    pad_rank = -1

    @property
    def is_flexible(self) -> bool:
        raise ValueError('NONE extrapolation has no values beyond the edges, so is_flexible is not defined')

    def to_dict(self) -> dict:
        return {'type': 'none'}

    def spatial_gradient(self) -> Extrapolation:
        return self

    def determines_boundary_values(self, boundary_key: str) -> bool:
        return False

    def pad(self, value: Tensor, widths: dict, already_padded: dict | None = None, **kwargs) -> Tensor:
        return as_tensor(value)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        return expand_to(as_tensor(0.), value.shape.with_dim_size(dim, 0))

    def __repr__(self) -> str:
        return 'none'


class Undefined(Extrapolation):
    """An extrapolation not known yet, standing in for one `derived_from` another: using its values raises."""

    pad_rank = -1

    def __init__(self, derived_from: Extrapolation):
        self.derived_from = derived_from

    @property
    def is_flexible(self) -> bool:
        raise ValueError(f'Undefined extrapolation (derived from {self.derived_from!r}) has no is_flexible')

    def to_dict(self) -> dict:
        return {'type': 'undefined', 'derived_from': self.derived_from.to_dict()}

    def spatial_gradient(self) -> Extrapolation:
        return self

    def determines_boundary_values(self, boundary_key: str) -> bool:
        return self.derived_from.determines_boundary_values(boundary_key)

    def pad(self, value: Tensor, widths: dict, already_padded: dict | None = None, **kwargs) -> Tensor:
        if any(tuple(w) != (0, 0) for w in widths.values()):
            raise ValueError(f'Cannot pad with an undefined extrapolation (derived from {self.derived_from!r}); got '
                             f'widths {widths}')
        return as_tensor(value)

    def pad_values(self, value: Tensor, width: int, dim: str, upper_edge: bool, already_padded: dict | None = None,
                   **kwargs) -> Tensor:
        raise ValueError(f'An undefined extrapolation (derived from {self.derived_from!r}) has no values beyond the '
                         f'edges')

    def __eq__(self, other) -> bool:
        return isinstance(other, Undefined) and other.derived_from == self.derived_from

    def __hash__(self) -> int:
        return hash(('undefined', self.derived_from))

    def __repr__(self) -> str:
        return 'undefined'


ZERO = ConstantExtrapolation(0)
ONE = ConstantExtrapolation(1)
PERIODIC = _Periodic()
ZERO_GRADIENT = _ZeroGradient()
BOUNDARY = ZERO_GRADIENT
SYMMETRIC = _Symmetric()
REFLECT = _Reflect()
ANTISYMMETRIC = _Antisymmetric()
ANTIREFLECT = _Antireflect()
SYMMETRIC_GRADIENT = _SymmetricGradient()
NONE = _NoExtrapolation()
