"""Reductions of selections too large to load at once: piece by piece, each loaded, reduced and dropped in turn.

Disk-backed and dask-backed tensors load their whole selection for every operation but slicing and
renaming, and keep it in the memory cache. For a reduction of a selection larger than
`OUT_OF_CORE_BYTES` that is not in memory already, `reduce_in_pieces` instead cuts it along one dim at
chunk boundaries into pieces of at most that size (but at least one chunk each), loads each piece past
the memory cache, reduces it and drops it before loading the next; memory then holds one piece and the
reduced values. It cuts along a dim that is kept where it can, so that the pieces' results are simply
joined; cut along a reduced dim, each piece's partial result is merged into those of the pieces before it
as it comes (`Reduction.merge`: memory holds one partial result, not one per piece — 24 pieces of a 6 GiB
mean held 24 of them), and a float sum or mean then adds up partial sums, which may differ from summing all
values at once in the last bits (as a chunked Dask reduction does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..math import Tensor, concat
from ..math.kinds import Dense, Op, reduction_of

OUT_OF_CORE_BYTES = 2 ** 28  # selections larger than this are reduced piece by piece


def reduce_in_pieces(op: Op, tensor: Tensor, dims: tuple, chunks: Callable[[], Sequence[Sequence[int]]],
                     load: Callable[[Tensor], Dense]):
    """The reduction `op` of `tensor` along `dims`, one piece at a time; NotImplemented where that is not needed.

    Args:
        op: a REDUCE operation.
        tensor: a kind whose slices are views reading nothing, with `available` saying whether it is in memory.
        dims: the dims reduced (names of `tensor`).
        chunks: gives, per dim of `tensor`, the lengths of the runs of consecutive elements stored together (in
            one chunk); called only where the selection is cut.
        load: the values of one piece (a slice of `tensor`), read without keeping them in the memory cache.

    Returns:
        The reduced tensor, or NotImplemented: `op` is not in `REDUCTIONS`, the selection is in memory or within
        `OUT_OF_CORE_BYTES`, or it has a single chunk along every dim (nothing to cut).
    """
    reduction = reduction_of(op)
    itemsize = tensor.dtype.itemsize
    volume = tensor.shape.volume
    if reduction is None or volume is None or not itemsize or volume * itemsize <= OUT_OF_CORE_BYTES \
            or tensor.available:
        return NotImplemented
    cut = _cut(tensor.shape.names, tensor.shape.sizes, chunks(), itemsize, dims)
    if cut is None:
        return NotImplemented
    dim, bounds = cut
    pieces = (tensor[{dim: slice(start, stop)}] for start, stop in bounds)
    if dim in dims:  # each piece's partial merged into the last: memory holds one piece and one partial
        merged = None
        for piece in pieces:
            partial = reduction.partial(load(piece), dims)
            merged = partial if merged is None else reduction.merge([merged, partial])
        return reduction.combine([merged])
    return concat([reduction(load(piece), dims) for piece in pieces], dim)


def _cut(names: tuple, sizes: tuple, chunks: Sequence[Sequence[int]], itemsize: float, reduced: tuple):
    """(dim, [(start, stop), ...]): where to cut into pieces of whole chunks of at most `OUT_OF_CORE_BYTES` each.

    Of the dims with more than one chunk, a kept one (not in `reduced`) whose pieces stay within the limit
    comes first; then the one whose largest chunk is the smallest share of the selection. None: no dim has
    more than one chunk.
    """
    volume = math.prod(sizes)
    options = []
    for name, size, runs in zip(names, sizes, chunks, strict=True):
        if len(runs) < 2:
            continue
        largest = max(runs) * volume // size * itemsize
        options.append((name in reduced or largest > OUT_OF_CORE_BYTES, largest, name, runs, volume // size))
    if not options:
        return None
    _, _, name, runs, per_element = min(options, key=lambda option: option[:2])
    limit = max(1, int(OUT_OF_CORE_BYTES // (per_element * itemsize)))  # elements along the dim per piece
    bounds, start, stop = [], 0, 0
    for run in runs:
        if stop > start and stop + run - start > limit:
            bounds.append((start, stop))
            start = stop
        stop += run
    bounds.append((start, stop))
    return name, bounds
