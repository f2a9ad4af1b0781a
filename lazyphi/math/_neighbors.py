"""Values taken from other cells of a grid: copies shifted by index vectors (`index_shift`), the neighbour whose key
is largest or smallest (`at_max_neighbor`, `at_min_neighbor`) and a sub-grid between the cells (`sample_subgrid`).

All of them slice, pad, stack and gather, so every tensor kind and the tracer take part; only the offsets and the
sub-grid's start are read as Python numbers, because the results' sizes depend on them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._padding import pad
from ._tensor import Tensor, as_tensor

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
    if not isinstance(offsets, (tuple, list)):
        raise TypeError(f'index_shift(): offsets must be a tuple or list of offsets, got {offsets!r}')
    if not offsets:
        raise ValueError('index_shift(): needs at least one offset')
    vectors = [_index_vector(o, x) for o in offsets]
    names = [n for n in x.shape.names if any(n in v for v in vectors)]
    low = {n: min(v.get(n, 0) for v in vectors) for n in names}
    high = {n: max(v.get(n, 0) for v in vectors) for n in names}
    if padding is None:
        return [x[{n: slice(v.get(n, 0) - low[n], x.shape.get_size(n) - (high[n] - v.get(n, 0))) for n in names}]
                for v in vectors]
    below = {n: max(0, -low[n]) for n in names}
    padded = pad(x, {n: (below[n], max(0, high[n])) for n in names}, padding)
    return [padded[{n: slice(below[n] + v.get(n, 0), below[n] + v.get(n, 0) + x.shape.get_size(n)) for n in names}]
            for v in vectors]


def _index_vector(offset, x: Tensor) -> dict:
    """An offset of `index_shift` as `{dim: int}`."""
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
    unknown = [n for n in labels if n not in x.shape.names]
    if unknown:
        raise ValueError(f'index_shift(): the offset {offset} names {unknown}, which the grid {x.shape} lacks')
    if not offset.available:
        raise ValueError('index_shift(): the offsets are read as ints, so they must have values (not be traced)')
    result = {}
    for n in labels:
        value = float(offset[{dims.name: n}])
        if value != int(value):
            raise ValueError(f'index_shift(): offsets must be integers, got {value} for {n!r}')
        result[n] = int(value)
    return result
