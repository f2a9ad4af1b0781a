"""Values taken from other cells of a grid: copies shifted by index vectors (`index_shift`), the neighbour whose key
is largest or smallest (`at_max_neighbor`, `at_min_neighbor`) and a sub-grid between the cells (`sample_subgrid`).

All of them slice, pad, stack and gather, so every tensor kind and the tracer take part; only the offsets and the
sub-grid's start are read as Python numbers, because the results' sizes depend on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ._dims import batch, spatial
from ._magic_ops import expand, stack
from ._padding import pad, shift
from ._shape import Shape
from ._sorting import at_max, at_min
from ._tensor import Tensor, as_tensor, dims_in
from ._tree import tree_map

_CANDIDATES = '_candidates'  # the batch dim along which the neighbour selection stacks a cell's candidates
_AXES = '_shift_axes'  # the batch dim along which `shift` lists the shifts along each dim

# --- index_shift -------------------------------------------------------------------------


def index_shift(x: Tensor, offsets: Sequence, padding=None) -> list:
    """Copies of `x` shifted by integer index vectors: entry `i` of the copy for offset `o` is entry `i + o` of `x`.

    Args:
        x: the grid.
        offsets: a tuple or list of offsets, each the int `0` (no shift) or an int vector along a channel dim whose
            labels name dims of `x` (`vec(x=1, y=-1)`); a dim an offset does not name counts as 0 for it.
        padding: the extrapolation giving the values shifted in from beyond the edges, so each copy has the size of
            `x`. None: no padding; each copy is cut, along each named dim, to the cells that every offset can reach
            (`size - (largest - smallest offset)` cells, the first being entry `o - smallest` of `x`).

    Returns:
        A list of tensors, one per offset.

    Raises:
        ValueError: no offsets, a non-zero int, an offset that is not an int vector labelled by dims of `x`.
        TypeError: `offsets` is not a tuple or list.
    """
    x = as_tensor(x)
    vectors = _offset_vectors(offsets)
    unknown = [n for v in vectors for n in v if n not in x.shape.names]
    if unknown:
        raise ValueError(f'index_shift(): an offset names {unknown}, which the grid {x.shape} lacks')
    if padding is None:
        return [x[{n: slice(lower, x.shape.get_size(n) - upper) for n, (lower, upper) in w.items()}]
                for w in _widths(vectors)]
    names = [n for n in x.shape.names if any(n in v for v in vectors)]
    low = {n: min(v.get(n, 0) for v in vectors) for n in names}
    high = {n: max(v.get(n, 0) for v in vectors) for n in names}
    below = {n: max(0, -low[n]) for n in names}
    padded = pad(x, {n: (below[n], max(0, high[n])) for n in names}, padding)
    return [padded[{n: slice(below[n] + v.get(n, 0), below[n] + v.get(n, 0) + x.shape.get_size(n)) for n in names}]
            for v in vectors]


def index_shift_widths(offsets: Sequence) -> list[dict[str, tuple[int, int]]]:
    """How many cells the unpadded `index_shift` cuts from the lower and upper end of each dim, per offset.

    Args:
        offsets: the offsets of `index_shift` (`0` or int vectors such as `vec(x=1)`).

    Returns:
        One dict per offset, mapping each dim that some offset names to `(offset - smallest, largest - offset)`:
        `index_shift_widths([0, vec(x=1)])` is `[{'x': (0, 1)}, {'x': (1, 0)}]`.
    """
    return _widths(_offset_vectors(offsets))


def _widths(vectors: list[dict]) -> list[dict[str, tuple[int, int]]]:
    names = list(dict.fromkeys(n for v in vectors for n in v))
    low = {n: min(v.get(n, 0) for v in vectors) for n in names}
    high = {n: max(v.get(n, 0) for v in vectors) for n in names}
    return [{n: (v.get(n, 0) - low[n], high[n] - v.get(n, 0)) for n in names} for v in vectors]


def _offset_vectors(offsets) -> list[dict]:
    """The offsets of `index_shift` as `{dim: int}` each."""
    if not isinstance(offsets, (tuple, list)):
        raise TypeError(f'index_shift(): offsets must be a tuple or list of offsets, got {offsets!r}')
    if not offsets:
        raise ValueError('index_shift(): needs at least one offset')
    return [_offset_vector(o) for o in offsets]


def _offset_vector(offset) -> dict:
    if isinstance(offset, int) and not isinstance(offset, bool):
        if offset != 0:
            raise ValueError(f'index_shift(): an int offset must be 0, got {offset}; name the dims of a shift with a '
                             f'vector such as vec(x={offset})')
        return {}
    if not isinstance(offset, Tensor):
        raise ValueError(f'index_shift(): an offset must be 0 or an int vector such as vec(x=1), got {offset!r}')
    dims = offset.shape
    labels = dims.get_labels(dims.name) if dims.rank == 1 and dims.channel else None
    if not labels:
        raise ValueError(f'index_shift(): an offset must be a vector along one channel dim labelled by dims of the '
                         f'grid, such as vec(x=1), got one of shape {dims}')
    if not offset.available:
        raise ValueError('index_shift(): the offsets are read as ints, so they must have values (not be traced)')
    result = {}
    for n in labels:
        value = float(offset[{dims.name: n}])
        if value != int(value):
            raise ValueError(f'index_shift(): offsets must be integers, got {value} for {n!r}')
        result[n] = int(value)
    return result


# --- the neighbour with the largest or smallest key --------------------------------------------------


def at_max_neighbor(values, key_grid: Tensor, dims=spatial, padding=None, offsets=(0, 1), diagonal=True):
    """`values` at the neighbour of each cell whose entry of `key_grid` is largest, the neighbours being the cells at
    `offsets` from it along `dims`.

    Args:
        values: a tensor or a tree of tensors (tuple, list, dict, dataclass) on the same grid as `key_grid`; a tensor
            lacking some of the dims is the same along them.
        key_grid: the values compared.
        dims: the dims along which neighbours lie.
        padding: the extrapolation of `values` and `key_grid` beyond the edges; None: no padding, so the result is
            smaller than the grid (by the spread of `offsets` along each dim).
        offsets: int offsets of the neighbours along each dim; 0 is the cell itself.
        diagonal: True: choose along each dim in turn, first among the offsets along the first dim, then among those
            winners along the next, so cells diagonally apart compete too (`len(offsets)^d` of them). False: choose
            once among the cells at the offsets along a single dim (`len(offsets) * d` of them).

    Returns:
        A tree like `values`.

    Raises:
        ValueError: `offsets` is empty or holds something other than ints.
    """
    return _at_neighbor(at_max, values, key_grid, dims, padding, offsets, diagonal)


def at_min_neighbor(values, key_grid: Tensor, dims=spatial, padding=None, offsets=(0, 1), diagonal=True):
    """`values` at the neighbour of each cell whose entry of `key_grid` is smallest (see `at_max_neighbor`)."""
    return _at_neighbor(at_min, values, key_grid, dims, padding, offsets, diagonal)


def _at_neighbor(pick: Callable, values, key_grid: Tensor, dims, padding, offsets, diagonal: bool):
    key = as_tensor(key_grid)
    offsets = tuple(offsets) if isinstance(offsets, (tuple, list)) else (offsets,)
    if not offsets or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
        raise ValueError(f'at_max_neighbor()/at_min_neighbor(): offsets must be a non-empty tuple of ints, got '
                         f'{offsets!r}')
    names = dims_in(key.shape, dims)
    grid = key.shape.only(names)
    values = tree_map(lambda t: expand(t, grid.without(t.shape.names)), values)  # same candidates as the key

    def candidates(t: Tensor, along: tuple) -> Tensor:
        """The cells at `offsets` along each of `along`, stacked along `_CANDIDATES` (offset by offset, each dim in
        `along`'s order, so that a key and its values list them alike)."""
        shifted = shift(t, offsets, along, padding, batch(_AXES))
        return stack([s[{_AXES: name}] for s in shifted for name in along], batch(_CANDIDATES))

    for along in [(name,) for name in names] if diagonal else [names] if names else []:
        stacked = candidates(key, along)
        key, values = pick([stacked, tree_map(lambda t, a=along: candidates(t, a), values)], stacked, _CANDIDATES)
    return values


# --- sample_subgrid --------------------------------------------------------------------------


def sample_subgrid(grid: Tensor, start: Tensor, size: Shape) -> Tensor:
    """The sub-grid of `size` cells whose first cell lies at `start` (in cells, possibly between them) in `grid`,
    linearly interpolated between the two cells around each sample along each dim with a fractional start.

    Args:
        grid: the values, at the cell centres; its spatial dims are sampled.
        start: the position of the sub-grid's first cell, one entry per spatial dim of `grid`: a vector labelled by
            the dims' names (`vec(x=1, y=0.5)`), or a vector or a tuple of numbers in the order of `grid`'s spatial
            dims. Read as Python numbers, since the slices depend on them.
        size: the sub-grid's size along each spatial dim of `grid`.

    Raises:
        ValueError: `size` does not name the grid's spatial dims, `start` has the wrong form or no values (being
            traced), or the sub-grid reaches beyond the grid.
    """
    grid = as_tensor(grid)
    names = grid.shape.spatial.names
    if not isinstance(size, Shape) or set(size.names) != set(names):
        raise ValueError(f'sample_subgrid(): size must be a Shape with the spatial dims {names} of the grid, '
                         f'got {size!r}')
    corner = _start_per_dim(start, names)
    for name in names:
        first, n, k = corner[name], grid.shape.get_size(name), size.get_size(name)
        whole = math.floor(first)
        fraction = first - whole
        if whole < 0 or whole + k + (1 if fraction else 0) > n:
            raise ValueError(f'sample_subgrid(): {k} cells from {first} along {name!r} reach beyond the {n} cells of '
                             f'the grid')
        lower = grid[{name: slice(whole, whole + k)}]
        grid = lower if not fraction else grid[{name: slice(whole + 1, whole + 1 + k)}] * fraction + lower * (
            1 - fraction)
    return grid


def _start_per_dim(start, names: tuple) -> dict:
    """`start` of `sample_subgrid` as `{dim: float}`."""
    if isinstance(start, (tuple, list)):
        entries, labels = list(start), None
    elif isinstance(start, Tensor) and start.shape.rank == 1:
        dim = start.shape.name
        labels = start.shape.get_labels(dim)
        entries = [start[{dim: i}] for i in range(start.shape.get_size(dim))]
    else:
        raise ValueError(f'sample_subgrid(): start must be a vector with one entry per spatial dim {names}, '
                         f'got {start!r}')
    if len(entries) != len(names):
        raise ValueError(f'sample_subgrid(): start has {len(entries)} entries for the {len(names)} spatial dims '
                         f'{names}')
    if any(isinstance(e, Tensor) and not e.available for e in entries):
        raise ValueError('sample_subgrid(): start is read as numbers, so it must have values (not be traced)')
    if labels is not None and set(labels) == set(names):
        return {label: float(entry) for label, entry in zip(labels, entries, strict=True)}
    return {name: float(entry) for name, entry in zip(names, entries, strict=True)}
