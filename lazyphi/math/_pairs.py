"""Pairs of points: `pairwise_differences` between all of them, `find_closest` of a set to each query,
`map_pairs` of a function over the pairs of a dense connection matrix, and `count_intersections` of lists.

All results are dense: lazyphi has no sparse tensors, so the pairs a neighbour search would keep are all
computed, and those farther apart than a cut-off are masked instead of left out. The neighbours of a point
are listed along the dual twins `~d` of the dims `d` listing the points, as phiml lists them. The one
host-side algorithm is `find_closest(method='kd')`, SciPy's k-d tree; where the values are not at hand
(inside `jit_compile`, while tracing, on disk) it computes the same result densely.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..backend import DType
from ._convert import all_available, choose_backend_t, convert
from ._creation import range_tensor, wrap
from ._dims import batch, channel, instance
from ._gather_scatter import gather, nonzero
from ._magic_ops import expand, pack_dims, rename_dims, stack, unpack_dim
from ._ops import cast, where
from ._reduce import all_, any_, sum_
from ._shape import Shape
from ._sorting import argmin
from ._sparse import make_sparse, to_format
from ._tensor import Tensor, as_tensor, dims_in

INDEX = channel('index')  # the dim listing the components of the indices of `find_closest` by default
_SPARSE_FORMATS = ('sparse', 'coo', 'csr', 'csc')
_METHODS = ('auto', 'sparse', 'scipy-kd')  # phiml's neighbour searches; all give the same dense result
_ENTRIES = instance('entries')  # the dim listing the pairs handed to the function of `map_pairs`, as phiml names it
_PAIRS = '_pairs'  # the dim through which `pairwise_differences` lists the points again along the dual dims
_OTHER = '_other_element'  # the dim of the elements of the other list in `count_intersections`
_CANDIDATE = '_candidate_'  # prefix of the dims listing the vectors searched by `find_closest`


def pairwise_differences(positions: Tensor, max_distance=None, format='dense', domain=None, periodic=False,
                         method: str = 'auto', default: float = float('nan'), avg_neighbors=8.) -> Tensor:
    """The vector from each point to each other point: `positions[~d] - positions[d]`, a dense matrix.

    The points are listed along the non-batch, non-channel dims `d` of `positions`; the result lists them
    twice: along `d` (the origin) and along their dual twins `~d` (the neighbour the vector points to).

    Args:
        positions: the points; exactly one channel dim lists their components. Batch dims list independent
            sets of points.
        max_distance: a cut-off: vectors longer than it are replaced by `default` (the vector to the point
            itself is always kept). A number, or a tensor of one per point (along `d`) or per batch entry.
            None: no cut-off.
        format: 'dense', or a tensor whose dual dims list the neighbours in place of `~d` (of the same
            number of elements). The sparse formats 'sparse', 'coo', 'csr' and 'csc' raise `ValueError`:
            lazyphi has no sparse tensors.
        domain: `(lower, upper)` corners of the box holding the points; needed where `periodic`.
        periodic: True (or a bool per component, along the channel dim) for a periodic box: each vector
            is the shortest one to a periodic image of the neighbour.
        method: phiml's neighbour search ('auto', 'sparse' or 'scipy-kd'): a dense result does not use it.
        default: the value of the vectors beyond `max_distance`.
        avg_neighbors: a buffer size for phiml's sparse searches: a dense result does not use it.

    Returns:
        The vectors: the dims of `positions` and the dual dims of the neighbours.

    Raises:
        ValueError: a sparse or unknown `format`, an unknown `method`, `positions` without exactly one channel
            dim or without dims listing points, neighbour dims of another number of elements, or `periodic`
            without `domain`.
    """
    positions = as_tensor(positions)
    if isinstance(format, str):
        if format not in ('dense', *_SPARSE_FORMATS):
            raise ValueError(f"pairwise_differences(): format must be 'dense', one of {_SPARSE_FORMATS} or a tensor, "
                             f"got {format!r}")
        if format != 'dense' and max_distance is None:
            raise ValueError(f'pairwise_differences(): format={format!r} keeps the pairs within max_distance, '
                             f'so max_distance must be given')
    elif not isinstance(format, Tensor):
        raise TypeError(f"pairwise_differences(): format must be 'dense' or a tensor, got {type(format).__name__}")
    if method not in _METHODS:
        raise ValueError(f'pairwise_differences(): method must be one of {_METHODS}, got {method!r}')
    components = positions.shape.channel
    if components.rank != 1:
        raise ValueError(f'pairwise_differences(): positions must have exactly one channel dim listing the '
                         f'components of the points, but have {components or "none"} ({positions.shape})')
    points = positions.shape.non_batch.non_channel.non_dual
    if not points:
        raise ValueError(f'pairwise_differences(): positions {positions.shape} have no instance or spatial dim '
                         f'listing the points')
    neighbors = points.as_dual() if isinstance(format, str) else format.shape.dual
    if not neighbors or neighbors.volume != points.volume:
        raise ValueError(f'pairwise_differences(): the dual dims {neighbors} of format must list as many '
                         f'neighbours as there are points ({points})')
    others = unpack_dim(pack_dims(positions, points, instance(_PAIRS)), _PAIRS, neighbors)
    dx = others - positions
    if isinstance(periodic, (bool, np.bool_)):
        periodic = bool(periodic)
    if periodic is not False:
        dx = _shortest_periodic(dx, domain, periodic)
    if max_distance is None:
        return dx
    within = sum_(dx ** 2, components) <= as_tensor(max_distance) ** 2
    if isinstance(format, str) and format != 'dense':
        return _sparse_pairs(dx, within, points, neighbors, format)
    return where(within, dx, default)


def _sparse_pairs(dx: Tensor, within: Tensor, points: Shape, neighbors: Shape, format: str) -> Tensor:
    """The vectors `dx` of the pairs `within` the distance as a sparse matrix, rows `points`, columns `neighbors`.

    Where the values are at hand, the pairs are found among all distances and listed by row, then column. Where
    they are not (inside `jit_compile`), their number cannot depend on them: all pairs are stored, each point with
    itself first, and the pairs farther apart hold zero vectors.
    """
    if within.shape.without((*points.names, *neighbors.names)):
        raise ValueError(f'pairwise_differences(): a sparse format takes points without batch dims (one '
                         f'max_distance for all); got {within.shape}. Use format=\'dense\' or loop over the batch')
    matrix = points & neighbors
    labels = channel(index=(*points.names, *neighbors.names))
    if within.available:
        indices = nonzero(within, instance('pairs'), channel('index'), (), matrix.names)
        found = indices.shape.get_item_names('index')
        indices = indices[{'index': tuple(found.index(n) for n in labels.item_names[0])}]
        pairs = make_sparse(indices, gather(dx, indices), matrix, unique=True)
        pairs = to_format(pairs, 'csr')._with(format='coo')  # sorted by row, then column
    else:
        count = points.volume
        flat = np.concatenate([np.stack([np.arange(count)] * 2, -1),
                               np.argwhere(~np.eye(count, dtype=bool))]).astype(np.int64)
        coords = np.concatenate([np.stack(np.unravel_index(flat[:, 0], points.sizes), -1),
                                 np.stack(np.unravel_index(flat[:, 1], neighbors.sizes), -1)], -1)
        indices = convert(wrap(coords, instance('pairs'), labels), choose_backend_t(dx))
        pairs = make_sparse(indices, gather(where(within, dx, 0), indices), matrix, unique=True)
    return to_format(pairs, format)


def _shortest_periodic(dx: Tensor, domain, periodic) -> Tensor:
    """`dx` replaced, along the periodic components, by the shortest vector to a periodic image."""
    if periodic is True or isinstance(periodic, Tensor):
        if domain is None:
            raise ValueError('pairwise_differences(): periodic boundaries need the box: pass domain=(lower, upper)')
        if not isinstance(domain, (tuple, list)) or len(domain) != 2:
            raise ValueError(f'pairwise_differences(): domain must be (lower, upper), got {domain!r}')
        size = as_tensor(domain[1]) - as_tensor(domain[0])
        wrapped = (dx + size / 2) % size - size / 2
        return wrapped if periodic is True else where(periodic, wrapped, dx)
    raise TypeError(f'pairwise_differences(): periodic must be a bool or a bool tensor along the components, got '
                    f'{periodic!r}')


def find_closest(vectors: Tensor, query: Tensor | None = None, /, method: str = 'kd', index_dim=INDEX):
    """The index of the vector of `vectors` closest to each query point (Euclidean distance).

    Args:
        vectors: the candidates, listed along their non-batch, non-channel dims; channel dims list their
            components. Batch dims list independent sets, searched by the query points of the same batch entry.
        query: the points to find the closest candidate for, with the components' dims of `vectors`. None:
            return a function of the query (with `method='kd'`, the k-d trees are built once, for all calls).
        method: 'kd': SciPy's k-d tree (`scipy.spatial.cKDTree`) on the host, on every backend; where the values
            are not at hand (inside `jit_compile`, while tracing) the 'dense' computation runs instead.
            'dense': the distances to all candidates, then the index of the smallest (of the first of equal
            ones), with lazyphi operations, so every backend, compiler and tracer takes part.
        index_dim: the channel dim listing the index components, labelled by the dims of the candidates, so that
            `vectors[index]` are the closest vectors. None: a plain integer index, for candidates listed along
            one dim.

    Returns:
        64-bit integer indices: the non-channel dims of `query`, the batch dims of `vectors` and `index_dim`.

    Raises:
        ValueError: an unknown `method`, `vectors` without dims listing candidates, `index_dim=None` with
            several of them, or a `query` with other components.
    """
    if method not in ('kd', 'dense'):
        raise ValueError(f"find_closest(): method must be 'kd' or 'dense', got {method!r}")
    vectors = as_tensor(vectors)
    listed = vectors.shape.non_batch.non_channel
    if not listed:
        raise ValueError(f'find_closest(): vectors {vectors.shape} have no instance, spatial or dual dim listing '
                         f'the candidates')
    if index_dim is None and listed.rank != 1:
        raise ValueError(f'find_closest(): index_dim=None gives a plain index, which needs candidates listed along '
                         f'one dim, but vectors list them along {listed}; pass an index_dim')
    if isinstance(index_dim, str):
        index_dim = channel(index_dim)
    index = None if index_dim is None else index_dim.with_size(listed.names)
    trees = _kd_trees(vectors) if method == 'kd' and query is None and vectors.available else None

    def closest(query: Tensor) -> Tensor:
        query = as_tensor(query)
        if set(query.shape.channel.names) != set(vectors.shape.channel.names):
            raise ValueError(f'find_closest(): the query {query.shape} must have the components\' dims '
                             f'{vectors.shape.channel} of the vectors')
        if method == 'kd' and all_available(vectors, query):
            result = _closest_on_host(vectors, query, trees or _kd_trees(vectors), listed)
        else:
            result = _closest_dense(vectors, query, listed)
        return result.index[0] if index is None else rename_dims(result, 'index', index)
    return closest if query is None else closest(query)


def _closest_dense(vectors: Tensor, query: Tensor, listed: Shape) -> Tensor:
    """Indices along `channel('index')` of the closest vectors: the arg-min of all squared distances."""
    candidates = instance(**{f'{_CANDIDATE}{name}': size for name, size in zip(listed.names, listed.sizes,
                                                                               strict=True)})
    distances = sum_((query - rename_dims(vectors, listed, candidates)) ** 2, channel)
    return argmin(distances, candidates.names)


def _kd_trees(vectors: Tensor) -> list:
    """A k-d tree of the candidates of each batch entry of `vectors` (row-major), read on the host."""
    from scipy.spatial import cKDTree
    components = vectors.shape.channel
    listed = vectors.shape.non_batch.non_channel
    return [cKDTree(vectors[entry].numpy([*listed.names, *components.names]).reshape(listed.volume, -1))
            for entry in vectors.shape.batch.meshgrid()]


def _closest_on_host(vectors: Tensor, query: Tensor, trees: list, listed: Shape) -> Tensor:
    """Indices along `channel('index')` of the closest vectors, from the k-d tree of each batch entry."""
    components = vectors.shape.channel.names
    results = []
    for entry, tree in zip(vectors.shape.batch.meshgrid(), trees, strict=True):
        points = query[entry]
        spread = points.shape.non_channel
        flat = tree.query(points.numpy([*spread.names, *components]).reshape(spread.volume, -1))[1]
        multi = np.stack(np.unravel_index(flat.reshape(spread.sizes), listed.sizes), -1).astype(np.int64)
        results.append(wrap(multi, spread, channel(index=listed.names)))
    result = stack(results, vectors.shape.batch) if vectors.shape.batch else results[0]
    return convert(result, choose_backend_t(vectors, query))


def map_pairs(map_function: Callable, values: Tensor, connections: Tensor) -> Tensor:
    """`map_function(origin, neighbor)` for every pair of entries of `values` that `connections` lists.

    `connections` is a dense matrix: each of its rows `d` (dims of `values`) is connected to each of its
    columns `~d`, whatever its values, and its other dims play no part (phiml reads the stored entries of a
    sparse matrix; lazyphi has no sparse tensors, and a dense one stores all). The pairs are listed along the
    instance dim `entries`, as phiml lists them, so `map_function` receives `values` of the origin and of the
    neighbour of each pair.

    Args:
        map_function: `(origin, neighbor) -> Tensor`, applied to all pairs at once.
        values: the entries, listed along the dims `d` whose dual twins `~d` are the columns of `connections`;
            no dual dims.
        connections: a tensor with the dual dims `~d` (of the sizes of `d` in `values`) and maybe `d`.

    Returns:
        The results along the dims `d` and `~d`, with the other dims `map_function` gives.

    Raises:
        ValueError: `values` have dual dims, or `connections` has no dual dim whose twin `values` have, or
            one of another size.
    """
    values, connections = as_tensor(values), as_tensor(connections)
    if values.shape.dual:
        raise ValueError(f'map_pairs(): values must have no dual dims, but have {values.shape.dual}')
    columns = connections.shape.dual.only([f'~{name}' for name in values.shape.names])
    if not columns:
        raise ValueError(f'map_pairs(): connections {connections.shape} must have a dual dim ~d for a dim d of '
                         f'values {values.shape}, listing the neighbours')
    rows = values.shape.only([name[1:] for name in columns.names], reorder=True)
    if rows.sizes != columns.sizes:
        raise ValueError(f'map_pairs(): the neighbours {columns} of connections must be as many as the entries '
                         f'{rows} of values')
    pairs = rows + columns
    origin = pack_dims(expand(values, columns), pairs, _ENTRIES)
    neighbor = pack_dims(expand(rename_dims(values, rows, columns), rows), pairs, _ENTRIES)
    return unpack_dim(map_function(origin, neighbor), _ENTRIES.name, pairs)


def count_intersections(values: Tensor, arg_dims, list_dims=instance, feature_dims=channel) -> Tensor:
    """How many distinct elements each pair of lists shares.

    Two elements are equal if all their components along `feature_dims` are (NaN equals nothing). The counts
    form a matrix over the lists: rows along `arg_dims`, columns along their dual twins; its diagonal is 0.
    It compares every element of every list with every element of every other list: memory for (lists x
    elements)² comparisons.

    Args:
        values: the lists, with equal numbers of elements (uniform shape).
        arg_dims: the dims listing the lists (not `batch`).
        list_dims: the dims listing the elements of each list (those of `arg_dims` excluded).
        feature_dims: the dims listing the components of one element.

    Returns:
        64-bit integer counts: `arg_dims`, their dual twins, and the dims of `values` not named in the arguments
        (each entry of those has lists of its own).

    Raises:
        ValueError: `arg_dims` is `batch` or selects no dim, no dims are left to list the elements, or the
            shape of `values` is not uniform.
    """
    if arg_dims is batch:
        raise ValueError('count_intersections(): arg_dims=batch: batch dims list independent entries, not lists; '
                         'name the dims listing the lists')
    values = as_tensor(values)
    if not values.shape.is_uniform:
        raise ValueError(f'count_intersections(): values {values.shape} must be uniform (lists of equal length); '
                         f'pad the lists first')
    args = values.shape.only(arg_dims)
    features = values.shape.only(feature_dims).without(args.names)
    elements = values.shape.only(list_dims).without(args.names).without(features.names)
    if not args or not elements:
        raise ValueError(f'count_intersections(): arg_dims={arg_dims!r} must select the dims listing the lists and '
                         f'list_dims={list_dims!r} the dims listing their elements, in {values.shape}; found '
                         f'{args or "no lists"} and {elements or "no elements"}')
    items = instance('_element')
    own = pack_dims(values, elements, items)
    other = rename_dims(own, items.name, _OTHER)

    def same(a: Tensor, b: Tensor) -> Tensor:
        equal = a == b
        return all_(equal, dims_in(equal.shape, features.names)) if features else equal

    in_other_list = any_(same(own, rename_dims(other, args, args.as_dual())), _OTHER)
    earlier = range_tensor(instance(**{_OTHER: own.shape.get_size(items.name)})) < range_tensor(own.shape[items.name])
    repeated = any_(same(own, other) & earlier, _OTHER)  # counted at its first position only
    counts = sum_(cast(in_other_list & ~repeated, DType(int, 64)), items.name)
    return where(range_tensor(args) == range_tensor(args.as_dual()), 0, counts)
