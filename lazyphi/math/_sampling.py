"""Reading grids between and beyond their points: `grid_sample` (linear interpolation) and `closest_grid_values`.

Both look values up with `gather` at integer positions that an extrapolation maps into the grid, and weigh
them with element-wise arithmetic, so every tensor kind and the tracer take part and gradients flow to the
grid values and to the coordinates.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from .._errors import IncompatibleShapes
from ..backend import DType
from ._dims import channel
from ._elementwise import FLOOR, cast_tensor, where
from ._gather_scatter import gather
from ._ops import to_float
from ._shape import Shape
from ._structure import rename_tensor_dims, stack_tensors
from ._tensor import Tensor, as_tensor, dispatch
from .extrapolation import ZERO_GRADIENT, ConstantExtrapolation, Extrapolation, as_extrapolation

INT64 = DType(int, 64)


def _sampled_dims(grid: Tensor, coordinates: Tensor) -> tuple[tuple, Shape]:
    """The grid dims the coordinates' components refer to, and the coordinates' component dim."""
    components = coordinates.shape.channel
    if components.rank > 1:
        components = components.only('vector')
    if components.rank == 0 and grid.shape.spatial.rank == 1:  # positions along the one spatial dim
        return grid.shape.spatial.names, components
    if components.rank != 1:
        raise IncompatibleShapes(f'Coordinates need one channel dim listing a component per grid dim, got '
                                 f'{coordinates.shape}')
    labels = components.labels[0]
    dims = labels if labels is not None else grid.shape.spatial.names
    if len(dims) != components.size:
        raise IncompatibleShapes(f'The coordinates {coordinates.shape} have {components.size} components but the grid '
                                 f'{grid.shape} is sampled along {dims}')
    missing = [d for d in dims if d not in grid.shape.names]
    if missing:
        raise IncompatibleShapes(f'The coordinates name dims {missing} that the grid {grid.shape} lacks')
    return tuple(dims), components


def _apart(coordinates: Tensor, dims: tuple) -> tuple[Tensor, dict]:
    """`coordinates` with its dims named like sampled grid dims renamed away, and the renaming to undo."""
    clashes = tuple(n for n in coordinates.shape.names if n in dims)
    if not clashes:
        return coordinates, {}
    temporary = tuple(f'{n}_sampled' for n in clashes)
    return rename_tensor_dims(coordinates, clashes, temporary), dict(zip(temporary, clashes, strict=True))


def _restored(value: Tensor, renamed: dict, original: Shape) -> Tensor:
    present = tuple(n for n in renamed if n in value.shape.names)
    if not present:
        return value
    return rename_tensor_dims(value, present, original.only([renamed[n] for n in present], reorder=True))


def _look_up(grid: Tensor, dims: tuple, positions: list, extrapolation: Extrapolation) -> Tensor:
    """The grid values at integer `positions` (one tensor per dim in `dims`), mapped by the extrapolation."""
    indices, sign, constant, beyond = [], None, None, None  # beyond: where a constant side gives the value
    for dim, i in zip(dims, positions, strict=True):
        n = grid.shape.get_size(dim)
        index = i
        for upper in (False, True):
            side = extrapolation._for(dim, upper)
            outside = i > n - 1 if upper else i < 0
            if isinstance(side, ConstantExtrapolation):
                constant = side.value if constant is None else where(beyond, constant, side.value)
                beyond = outside if beyond is None else beyond | outside
                index = where(outside, n - 1 if upper else 0, index)
            else:
                mapped, factor = side.source(i, n)
                index = where(outside, mapped, index)
                if factor is not None:
                    factor = where(outside, factor, 1)
                    sign = factor if sign is None else sign * factor
        indices.append(index)
    values = gather(grid, stack_tensors(indices, channel(index=dims)))
    if sign is not None:
        values = values * sign
    if constant is not None:
        values = where(beyond, constant, values)
    return values


def _prepared(grid, coordinates, extrap) -> tuple:
    """(grid, extrapolation, sampled dims, the coordinate component of each, a function restoring the
    coordinates' dims named like sampled dims in a result)."""
    grid, coordinates = as_tensor(grid), to_float(as_tensor(coordinates))
    extrapolation = ZERO_GRADIENT if extrap is None else as_extrapolation(extrap)
    dims, components = _sampled_dims(grid, coordinates)
    original = coordinates.shape
    coordinates, renamed = _apart(coordinates, dims)
    position = [coordinates[{components.name: i}] if components else coordinates for i in range(len(dims))]
    if not all(isinstance(side, ConstantExtrapolation) or side.is_copy_pad(d, upper)
               for d in dims for upper in (False, True) for side in [extrapolation._for(d, upper)]):
        # values beyond the edges that are neither constants nor copies (normal/tangential, masked, symmetric
        # gradient): one padded cell, read at the nearest point beyond it
        padded = extrapolation.pad(grid, {d: (1, 1) for d in dims})
        if padded.shape != grid.shape:
            position = [p + 1 for p in position]
        grid, extrapolation = padded, ZERO_GRADIENT
    return grid, extrapolation, dims, position, lambda result: _restored(result, renamed, original)


def grid_sample(grid: Tensor, coordinates: Tensor, extrap, **kwargs) -> Tensor:
    """The values of `grid` at `coordinates`, interpolated linearly between grid points.

    Args:
        grid: the values; the dims the coordinates refer to are sampled, its other dims stay (dims the
            coordinates share are matched point by point).
        coordinates: positions in index space (the first grid point at 0), with one component per sampled dim
            along a channel dim: labelled by the grid dims' names, or in the order of the grid's spatial dims
            (without a channel dim for a grid with one spatial dim).
        extrap: the values beyond the grid's edges: an `Extrapolation`, a number, or None (undefined: the
            nearest edge value). Extrapolations other than constants and copies (`combine_by_direction`,
            `extrapolation.where`, `SYMMETRIC_GRADIENT`) give one cell beyond the edges, the farthest values
            being those of that cell.
        **kwargs: unused (phiml passes them to custom extrapolations).

    Returns:
        A tensor with the coordinates' dims (without the component dim) and the grid's other dims.
    """
    grid, extrapolation, dims, position, undo = _prepared(grid, coordinates, extrap)
    lower = [dispatch(FLOOR, (p,)) for p in position]
    fraction = [p - lo for p, lo in zip(position, lower, strict=True)]
    lower = [cast_tensor(lo, INT64) for lo in lower]
    values = {corner: _look_up(grid, dims, [lo + c for lo, c in zip(lower, corner, strict=True)], extrapolation)
              for corner in itertools.product((0, 1), repeat=len(dims))}
    for f in reversed(fraction):  # interpolate along one dim after the other: v0 + f * (v1 - v0)
        values = {corner[:-1]: values[(*corner[:-1], 0)] + f * (values[(*corner[:-1], 1)] - values[(*corner[:-1], 0)])
                  for corner in values if corner[-1] == 0}
    return undo(values[()])


def closest_grid_values(grid: Tensor, coordinates: Tensor, extrap, stack_dim_prefix: str = 'closest_',
                        **kwargs) -> Tensor:
    """The values of the grid points around each coordinate: the two neighbours along each sampled dim.

    Along a channel dim `<stack_dim_prefix><dim>` of size 2 per sampled dim, the values at the grid point
    below the coordinate (rounded down) and the one above it; `extrap` gives values beyond the edges.
    """
    grid, extrapolation, dims, position, undo = _prepared(grid, coordinates, extrap)
    lower = [cast_tensor(dispatch(FLOOR, (p,)), INT64) for p in position]
    return undo(_corners(grid, dims, lower, extrapolation, stack_dim_prefix, 0))


def _corners(grid: Tensor, dims: tuple, lower: Sequence[Tensor], extrapolation: Extrapolation, prefix: str,
             depth: int, offsets: tuple = ()) -> Tensor:
    if depth == len(dims):
        return _look_up(grid, dims, [lo + o for lo, o in zip(lower, offsets, strict=True)], extrapolation)
    return stack_tensors([_corners(grid, dims, lower, extrapolation, prefix, depth + 1, (*offsets, o)) for o in (0, 1)],
                         channel(f'{prefix}{dims[depth]}'))

