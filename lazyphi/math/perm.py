"""Permutations: random ones (`random_permutation`, `pick_random`), all of them (`all_permutations`) and the
cheapest one-to-one assignment (`optimal_perm`).

Random permutations sort integers by uniform random keys, so they are drawn on the default backend like
`random_uniform`; `all_permutations` lists the orders on the host (NumPy) and `optimal_perm` solves the
assignment problem there with SciPy.
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

from ..backend import NUMPY
from ._creation import arange, random_uniform, reshaped_tensor
from ._dims import batch, channel, concat_shapes, dual, instance, non_batch, primal
from ._dims import shape as shape_of
from ._elementwise import where
from ._gather_scatter import gather, unravel_index
from ._magic_ops import rename_dims, slice_, squeeze, unpack_dim
from ._ops import log, safe_div
from ._shape import EMPTY_SHAPE, Shape
from ._sorting import sort
from ._tensor import Dense, Tensor, as_tensor

_FLAT = instance('_perm_flat')
INDEX_DIM = channel('index')
PERM_DIM = dual('perm')


def _random_order(batches: Shape, n: int) -> Tensor:
    """Per entry of `batches`, the integers 0..n-1 in random order along `_FLAT`."""
    return sort(arange(_FLAT.with_size(n)), _FLAT.name, key=random_uniform(batches & _FLAT.with_size(n)))


def random_permutation(*shape, dims=non_batch, index_dim=INDEX_DIM) -> Tensor:
    """Random permutations of the positions in `dims` (the dims of `shape` that `dims` selects), one per entry of
    the other dims of `shape`.

    With one dim the result holds the permuted integers along it; with several, the multi-indices along
    `index_dim` (labelled by the dims' names), laid out along those dims.
    """
    if dims is batch:
        raise ValueError('random_permutation(): dims cannot be all batch dims (each batch entry gets its own '
                         'permutation); name the batch dims to permute instead')
    full = concat_shapes(*shape)
    if full.dual_rank:
        raise ValueError(f'random_permutation() does not take dual dims, got {full}')
    perm_dims = full.only(dims)
    batches = full.without(perm_dims)
    order = _random_order(batches, perm_dims.volume)
    if perm_dims.rank == 0:
        return order[{_FLAT.name: 0}]
    order = unpack_dim(order, _FLAT.name, perm_dims)
    if perm_dims.rank == 1:
        return order
    return unravel_index(order, perm_dims, index_dim.with_size(perm_dims.names))


def pick_random(value, dim, count=1, weight: Tensor | None = None, same_selection_dims=non_batch,
                selections: Shape = EMPTY_SHAPE):
    """Entries of `value` along `dim` picked at random, without repeating one while there are enough.

    Args:
        value: a tensor or tree (each tensor having `dim` is sliced alike); the type `range` gives the picked
            positions instead.
        dim: the dim to pick along (a Shape or a name; one dim).
        count: how many to pick: an int (1 drops `dim`), a Shape (the picks are listed along it instead of
            `dim`), or None (all, in random order). When `dim` has fewer entries than `count`, they repeat in
            order.
        weight: relative probabilities of the entries along `dim` (not normalised); picks without repetition
            follow them as NumPy's `choice(replace=False, p=...)` does.
        same_selection_dims: dims along which every element gets the same picks; other dims draw their own.
        selections: further dims, each entry drawing its own picks (they become dims of the result).
    """
    v_shape = shape_of(value) if value is not range else EMPTY_SHAPE
    dim = shape_of(dim) if isinstance(dim, Shape) else v_shape.only(dim)
    if dim.rank != 1:
        raise ValueError(f'pick_random() picks along one dim, got {dim} (value shape {v_shape})')
    same = v_shape.only(same_selection_dims).without(dim)
    batches = (selections & v_shape).without(dim).without(same)
    n_all = dim.size
    n = n_all if count is None else (count.volume if isinstance(count, Shape) else int(count))
    if n_all < 1:
        raise ValueError(f'pick_random(): cannot pick from the empty dim {dim}')
    if n <= n_all:
        keys = random_uniform(batches & dim.without_sizes().with_size(n_all))
        if weight is not None:
            weight = as_tensor(weight)  # exponential race: the largest keys win, in weighted order
            keys = where(weight > 0, safe_div(log(keys), weight), -np.inf)
        picked = sort(arange(dim.without_sizes().with_size(n_all)), dim.name, key=-keys)[{dim.name: slice(0, n)}]
    else:
        picked = arange(dim.without_sizes().with_size(n)) % n_all
    if isinstance(count, Shape):
        picked = rename_dims(picked, dim.name, count)
    elif count == 1:
        picked = squeeze(picked, dim.name)
    if value is range:
        return picked
    return slice_(value, {dim.name: picked})


def all_permutations(dims: Shape, list_dim=PERM_DIM, index_dim: Shape | None = INDEX_DIM,
                     convert=False) -> Tensor:
    """Every order of the positions in `dims`, listed along `list_dim` (lexicographic, the identity first).

    Listed on the host with NumPy: the result is a NumPy tensor unless `convert` puts it on the default backend.
    With several dims the positions are multi-indices along `index_dim`; with one, `index_dim=None` gives the
    integers themselves.
    """
    listed = np.asarray(list(permutations(range(dims.volume))), dtype=np.int64).reshape(-1, dims.volume)
    perms = reshaped_tensor(listed, [list_dim, dims], convert=convert)
    if index_dim is None:
        if dims.rank != 1:
            raise ValueError(f'all_permutations(): permutations of several dims {dims} need an index_dim')
        return perms
    return unravel_index(perms, dims, index_dim.with_size(dims.names))


def optimal_perm(cost_matrix: Tensor):
    """The permutation of the dual dim's entries that pairs each primal entry with one of them at the least total
    cost, and those costs.

    Solved on the host by SciPy's `linear_sum_assignment` (the Hungarian method), batch entry by batch entry, so
    `cost_matrix` must hold values (not be traced); the costs are gathered from `cost_matrix`, so gradients reach
    it. Where several assignments cost the same, SciPy's is taken (phiml takes the first in lexicographic order).

    Args:
        cost_matrix: costs of pairing primal entry `i` with dual entry `j`; one primal and one dual dim of equal
            size, and batch dims.

    Returns:
        `(dual_perm, cost)`: for each primal entry, the index of its dual entry (along a channel dim `index`
        labelled by the dual dim's name), and the cost of that pair, along the primal dim.
    """
    from scipy.optimize import linear_sum_assignment

    cost_matrix = as_tensor(cost_matrix)
    rows, cols = primal(cost_matrix).non_batch, dual(cost_matrix)
    if rows.rank != 1 or cols.rank != 1 or rows.size != cols.size:
        raise ValueError(f'optimal_perm() takes one primal and one dual dim of equal size (and batch dims), got '
                         f'{cost_matrix.shape}')
    batches = cost_matrix.shape.without(rows).without(cols)
    costs = cost_matrix.numpy([*batches.names, rows.name, cols.name]).reshape(-1, rows.size, cols.size)
    chosen = np.stack([linear_sum_assignment(c)[1] for c in costs]).reshape(*batches.sizes, rows.size, 1)
    perm = Dense(chosen.astype(np.int64), batches & rows & channel(index=cols.names), NUMPY)
    return perm, gather(cost_matrix, perm)


__all__ = ['all_permutations', 'optimal_perm', 'pick_random', 'random_permutation']
