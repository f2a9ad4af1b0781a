"""The public reduction functions, over tensors, sequences of tensors and trees; the table is `_reductions.py`.

Every function reduces through the `REDUCTIONS` table, so every tensor kind and the tracer take part.
A tuple or list of tensors is stacked along a batch dim `'0'` when that dim is among those reduced
(`sum([a, b], '0')`), and reduced element by element otherwise; other trees are reduced leaf by leaf.
The shorthands `csum`, `smean`, `finite_imax`, ... reduce (and `ssort`, ... sort) along the dims of one
type (c: channel, d: dual, i: instance, p: primal, s: spatial).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np

from ._dims import channel, dual, instance, merge_shapes, non_batch, primal, spatial
from ._elementwise import where
from ._reductions import REDUCTIONS
from ._shape import Shape
from ._sorting import at_max, at_min, sort
from ._structure import stack_tensors
from ._tensor import NUMBER_TYPES, Tensor, as_tensor, dims_in
from ._tree import tree_map

# the dim a sequence of values is stacked along to reduce across it (phiml's name, not an identifier)
SEQUENCE_DIM = Shape((None,), ('0',), ('batch',), (None,))


def reduce(name: str, value, dim):
    """The reduction `name` of `value` (a Tensor, number, sequence or tree) along `dim`; `value` if `dim` is empty."""
    if not dim and not callable(dim):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (Tensor, *NUMBER_TYPES)) for v in value):
        full = merge_shapes(SEQUENCE_DIM.with_size(len(value)), *[as_tensor(v).shape for v in value],
                            allow_varying_sizes=True)
        if SEQUENCE_DIM.name in dims_in(full, dim):
            value = stack_tensors(value, SEQUENCE_DIM)
    if isinstance(value, (Tensor, *NUMBER_TYPES)):
        value = as_tensor(value)
        return REDUCTIONS[name](value, dims_in(value.shape, dim))
    return tree_map(lambda v: reduce(name, v, dim), value)


def sum_(value, dim=non_batch):
    """Sum of the values along `dim` (any dim filter; by default every non-batch dim).

    Bools count as 0 and 1. A tuple or list is stacked along a batch dim '0' if `dim` includes it.
    """
    return reduce('sum', value, dim)


def prod(value, dim=non_batch):
    """Product of the values along `dim`."""
    return reduce('prod', value, dim)


def std(value, dim=non_batch):
    """Standard deviation (population) of the values along `dim`; 0 along dims the value lacks."""
    return reduce('std', value, dim)


def mean(value, dim=non_batch, weight=None, where_no_weight=np.nan, epsilon: float = 1e-10):
    """Mean of the values along `dim`, optionally weighted.

    Args:
        value: a Tensor, sequence or tree.
        dim: the dims to average over.
        weight: weights of the values (broadcast by dim name); a sequence of weights for a sequence of values.
        where_no_weight: with `weight`, the result where the weights sum to less than `epsilon` in magnitude;
            NaN (the default) divides anyway.
        epsilon: the threshold for `where_no_weight`.
    """
    if weight is None:
        return reduce('mean', value, dim)
    if isinstance(value, (tuple, list)):
        if not isinstance(weight, (tuple, list)):
            raise TypeError('mean(): a sequence of values needs a sequence of weights')
        value, weight = stack_tensors(value, SEQUENCE_DIM), stack_tensors(weight, SEQUENCE_DIM)
    value, weight = as_tensor(value), as_tensor(weight)
    dims = dims_in(merge_shapes(value.shape, weight.shape), dim)
    weighted = value * weight
    total = REDUCTIONS['sum'](weighted, tuple(d for d in dims if d in weighted.shape.names))
    weight_sum = REDUCTIONS['sum'](weight, tuple(d for d in dims if d in weight.shape.names))
    if np.isnan(where_no_weight):
        return total / weight_sum
    no_weight = abs(weight_sum) < epsilon
    return where(no_weight, where_no_weight, total / where(no_weight, 1, weight_sum))


def max_(value, dim=non_batch, key: Tensor | None = None):
    """Maximum of the values along `dim`; with `key`, the entries of `value` (any tree) where `key` is largest."""
    if key is not None:
        return at_max(value, key, dim)
    return reduce('max', value, dim)


def min_(value, dim=non_batch, key: Tensor | None = None):
    """Minimum of the values along `dim`; with `key`, the entries of `value` (any tree) where `key` is smallest."""
    if key is not None:
        return at_min(value, key, dim)
    return reduce('min', value, dim)


def any_(boolean_value, dim=non_batch):
    """Whether any value along `dim` is true (non-zero)."""
    return reduce('any', boolean_value, dim)


def all_(boolean_value, dim=non_batch):
    """Whether all values along `dim` are true (non-zero)."""
    return reduce('all', boolean_value, dim)


def _finite(name: str, value, dim, default):
    """The reduction `name` over the finite values only; `default` where a result has no finite value."""
    result = reduce(name, value, dim)
    if not isinstance(result, Tensor) or (name == 'finite_mean' and np.isnan(default)):
        return result
    value = as_tensor(value)
    count = REDUCTIONS['finite_count'](value, dims_in(value.shape, dim))
    return where(count > 0, result, default)


def finite_sum(value, dim=non_batch, default=np.nan):
    """Sum along `dim` of the finite values (ignoring NaN and infinities); `default` where there are none."""
    return _finite('finite_sum', value, dim, default)


def finite_mean(value, dim=non_batch, default=np.nan):
    """Mean along `dim` of the finite values; `default` where there are none."""
    return _finite('finite_mean', value, dim, default)


def finite_std(value, dim=non_batch, default=np.nan):
    """Standard deviation (population) along `dim` of the finite values; `default` where there are none."""
    return _finite('finite_std', value, dim, default)


def finite_max(value, dim=non_batch, default=np.nan):
    """Maximum along `dim` of the finite values; `default` where there are none."""
    return _finite('finite_max', value, dim, default)


def finite_min(value, dim=non_batch, default=np.nan):
    """Minimum along `dim` of the finite values; `default` where there are none."""
    return _finite('finite_min', value, dim, default)


# --- shorthands for the dims of one type ---------------------------------------------------

_TYPES = {'c': (channel, 'channel'), 'd': (dual, 'dual'), 'i': (instance, 'instance'), 'p': (primal, 'primal'),
          's': (spatial, 'spatial')}


def _typed(function: Callable, letter: str, public_name: str) -> Callable:
    """`function` reducing the dims of one type by default, with `dim` (and what follows it) keyword-only."""
    dim_filter, type_name = _TYPES[letter]
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    parameters = [parameters[0]] + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                                              default=dim_filter if p.name == 'dim' else p.default)
                                    for p in parameters[1:]]

    def typed(value, **kwargs):
        kwargs.setdefault('dim', dim_filter)
        return function(value, **kwargs)
    typed.__signature__ = signature.replace(parameters=parameters)
    typed.__name__ = typed.__qualname__ = public_name
    typed.__doc__ = f'`{function.__name__.rstrip("_")}` along the {type_name} dims (see there).'
    return typed


csum = _typed(sum_, 'c', 'csum')
dsum = _typed(sum_, 'd', 'dsum')
isum = _typed(sum_, 'i', 'isum')
psum = _typed(sum_, 'p', 'psum')
ssum = _typed(sum_, 's', 'ssum')
cprod = _typed(prod, 'c', 'cprod')
dprod = _typed(prod, 'd', 'dprod')
iprod = _typed(prod, 'i', 'iprod')
pprod = _typed(prod, 'p', 'pprod')
sprod = _typed(prod, 's', 'sprod')
cmean = _typed(mean, 'c', 'cmean')
dmean = _typed(mean, 'd', 'dmean')
imean = _typed(mean, 'i', 'imean')
pmean = _typed(mean, 'p', 'pmean')
smean = _typed(mean, 's', 'smean')
cstd = _typed(std, 'c', 'cstd')
dstd = _typed(std, 'd', 'dstd')
istd = _typed(std, 'i', 'istd')
pstd = _typed(std, 'p', 'pstd')
sstd = _typed(std, 's', 'sstd')
cmax = _typed(max_, 'c', 'cmax')
dmax = _typed(max_, 'd', 'dmax')
imax = _typed(max_, 'i', 'imax')
pmax = _typed(max_, 'p', 'pmax')
smax = _typed(max_, 's', 'smax')
cmin = _typed(min_, 'c', 'cmin')
dmin = _typed(min_, 'd', 'dmin')
imin = _typed(min_, 'i', 'imin')
pmin = _typed(min_, 'p', 'pmin')
smin = _typed(min_, 's', 'smin')
finite_csum = _typed(finite_sum, 'c', 'finite_csum')
finite_dsum = _typed(finite_sum, 'd', 'finite_dsum')
finite_isum = _typed(finite_sum, 'i', 'finite_isum')
finite_psum = _typed(finite_sum, 'p', 'finite_psum')
finite_ssum = _typed(finite_sum, 's', 'finite_ssum')
finite_cmean = _typed(finite_mean, 'c', 'finite_cmean')
finite_dmean = _typed(finite_mean, 'd', 'finite_dmean')
finite_imean = _typed(finite_mean, 'i', 'finite_imean')
finite_pmean = _typed(finite_mean, 'p', 'finite_pmean')
finite_smean = _typed(finite_mean, 's', 'finite_smean')
finite_cstd = _typed(finite_std, 'c', 'finite_cstd')
finite_dstd = _typed(finite_std, 'd', 'finite_dstd')
finite_istd = _typed(finite_std, 'i', 'finite_istd')
finite_pstd = _typed(finite_std, 'p', 'finite_pstd')
finite_sstd = _typed(finite_std, 's', 'finite_sstd')
finite_cmax = _typed(finite_max, 'c', 'finite_cmax')
finite_dmax = _typed(finite_max, 'd', 'finite_dmax')
finite_imax = _typed(finite_max, 'i', 'finite_imax')
finite_pmax = _typed(finite_max, 'p', 'finite_pmax')
finite_smax = _typed(finite_max, 's', 'finite_smax')
finite_cmin = _typed(finite_min, 'c', 'finite_cmin')
finite_dmin = _typed(finite_min, 'd', 'finite_dmin')
finite_imin = _typed(finite_min, 'i', 'finite_imin')
finite_pmin = _typed(finite_min, 'p', 'finite_pmin')
finite_smin = _typed(finite_min, 's', 'finite_smin')
csort = _typed(sort, 'c', 'csort')
dsort = _typed(sort, 'd', 'dsort')
isort = _typed(sort, 'i', 'isort')
psort = _typed(sort, 'p', 'psort')
ssort = _typed(sort, 's', 'ssort')
