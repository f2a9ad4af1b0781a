"""Reductions, and the one table that says how each behaves.

Every fact about a reduction lives in its `Reduction` entry of `REDUCTIONS`: its dense
implementation, what repeating a value along a reduced dim does to the result (the lazily
expanded kind reduces without materialising), and how to split it into partial results of
disjoint parts and combine those (the stacked and joined kinds reduce part by part; the
planner splits MIXED properties into per-block partials combined on the host). Tensor kinds,
the tracer and the engine read this table; none keeps a list of its own.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..backend import DType
from ._elementwise import IS_FINITE, maximum, minimum, where
from ._tensor import REDUCE, Dense, Op, Tensor, dispatch


@dataclass(frozen=True)
class Reduction:
    """How one reduction behaves.

    Attributes:
        op: the operation dispatched to tensor kinds (category REDUCE, params `(dims,)`).
        repeat: what repeating a value `n` times along reduced dims does to the result: 'scale' (times n),
            'power' (to the n-th power) or 'same'.
        partial: `partial(value, dims)` reduces one part of the data to a tuple of values from which `combine`
            builds the reduction over all parts.
        combine: `combine(partials)` the reduction over the union of disjoint parts, from their partials.
        merge: `merge(partials)` the partial of the union of disjoint parts, from their partials: a reduction over
            many parts folds them as they come, holding one partial instead of all of them.
        exact_kinds: the dtype kinds for which combining partials gives bitwise the result of reducing all values
            at once (floating-point sums round differently when grouped differently).
    """

    op: Op
    repeat: str
    partial: Callable[[Tensor, tuple], tuple]
    combine: Callable[[Sequence[tuple]], Tensor]
    merge: Callable[[Sequence[tuple]], tuple]
    exact_kinds: tuple = ()

    @property
    def name(self) -> str:
        return self.op.name

    def __call__(self, value: Tensor, dims: tuple) -> Tensor:
        """`value` reduced along `dims` (names present in it; none: the reduction of each single value)."""
        return dispatch(self.op, (value,), (dims,))

    def repeated(self, result: Tensor, count: int) -> Tensor:
        """The reduction of values each repeated `count` times, from the reduction `result` of the values."""
        if count == 1 or self.repeat == 'same':
            return result
        return result * count if self.repeat == 'scale' else result ** count


def _dense_reduce(fn_name: str, to_float: bool = False) -> Callable:
    """A reduction on Dense tensors; `to_float`: int and bool values become floats of the current precision first."""
    def run(ts: Sequence[Dense], dims: tuple) -> Dense:
        t = ts[0]
        native = _as_float(t) if to_float else t._native
        native = getattr(t._backend, fn_name)(native, t._shape.indices(dims))
        return Dense(native, t._shape.without(dims), t._backend)
    return run


def _as_float(t: Dense):
    """The native of `t`, cast to the current precision's float type if it holds ints or bools."""
    if t._backend.dtype(t._native).kind in (int, bool):
        return t._backend.cast(t._native, t._backend.float_type)
    return t._native


def _finite(fn: Callable, fill) -> Callable:
    def run(ts: Sequence[Dense], dims: tuple) -> Dense:
        t = ts[0]
        finite = t._backend.isfinite(t._native)
        masked = Dense(t._backend.where(finite, t._native, fill), t._shape, t._backend)
        return fn([masked], dims)
    return run


def _finite_parts(t: Dense, dims: tuple) -> tuple:
    """(sum of the finite values, number of finite values) along `dims`, as natives of `t`'s backend."""
    b = t._backend
    native = _as_float(t)
    finite = b.isfinite(native)
    axes = t._shape.indices(dims)
    return b.sum(b.where(finite, native, 0), axes), b.sum(b.cast(finite, b.dtype(native)), axes)


def _dense_finite_mean(ts: Sequence[Dense], dims: tuple) -> Dense:
    t = ts[0]
    total, count = _finite_parts(t, dims)
    return Dense(_mean_or_nan(t._backend, total, count), t._shape.without(dims), t._backend)


def _mean_or_nan(b, total, count):
    """`total / count`, NaN where `count` is 0 (no finite value), without a division by zero."""
    some = b.greater_than(count, 0)
    return b.where(some, total / b.where(some, count, 1), np.nan)


def _dense_finite_count(ts: Sequence[Dense], dims: tuple) -> Dense:
    """The number of finite values along `dims`, as 64-bit integers."""
    t = ts[0]
    b = t._backend
    count = b.sum(b.cast(b.isfinite(t._native), DType(int, 64)), t._shape.indices(dims))
    return Dense(count, t._shape.without(dims), t._backend)


def _dense_finite_std(ts: Sequence[Dense], dims: tuple) -> Dense:
    """The population std of the finite values along `dims` (NaN where there is none)."""
    t = ts[0]
    finite = dispatch(IS_FINITE, (t,))
    deviation = where(finite, t - _dense_finite_mean(ts, dims), 0)
    count = _dense_finite_count([t], dims)
    spread = _dense_reduce('sum', to_float=True)([deviation * deviation], dims)
    some = count > 0
    return where(some, spread / where(some, count, 1), np.nan) ** 0.5


def _fold(combine_values: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Sequence[tuple]], Tensor]:
    """A combine for reductions whose partial is the reduction itself: fold the parts' results pairwise."""
    def combine(partials: Sequence[tuple]) -> Tensor:
        return functools.reduce(combine_values, [p[0] for p in partials])
    return combine


def _itself(reduction_name: str) -> Callable[[Tensor, tuple], tuple]:
    """A partial that is the reduction `reduction_name` of the part."""
    def partial(value: Tensor, dims: tuple) -> tuple:
        return (REDUCTIONS[reduction_name](value, dims),)
    return partial


def _count(value: Tensor, dims: tuple) -> int:
    count = value.shape.only(dims).volume
    if count is None:
        raise ValueError(f'Cannot count the elements along {dims} of a tensor of shape {value.shape}: '
                         f'their sizes are unknown or non-uniform')
    return count


def _mean_partial(value: Tensor, dims: tuple) -> tuple:
    return _count(value, dims), REDUCTIONS['mean'](value, dims)


def _weighted_means(partials: Sequence[tuple]) -> tuple:
    """Each part's weight (its share of the elements) and the mean of all elements, from (count, mean, ...)."""
    total = sum(p[0] for p in partials)
    weights = [p[0] / total for p in partials]
    return weights, functools.reduce(operator.add, [w * p[1] for w, p in zip(weights, partials, strict=True)])


def _mean_merge(partials: Sequence[tuple]) -> tuple:
    return sum(p[0] for p in partials), _weighted_means(partials)[1]


def _mean_combine(partials: Sequence[tuple]) -> Tensor:
    return _weighted_means(partials)[1]


def _std_partial(value: Tensor, dims: tuple) -> tuple:
    return _count(value, dims), REDUCTIONS['mean'](value, dims), REDUCTIONS['std'](value, dims)


def _std_merge(partials: Sequence[tuple]) -> tuple:
    """(count, mean, pooled population std): the parts' variances plus the variance of their means, weighed by
    count."""
    weights, mean = _weighted_means(partials)
    variance = functools.reduce(operator.add, [w * (std ** 2 + (m - mean) ** 2)
                                               for w, (_, m, std) in zip(weights, partials, strict=True)])
    return sum(p[0] for p in partials), mean, variance ** 0.5


def _std_combine(partials: Sequence[tuple]) -> Tensor:
    return _std_merge(partials)[2]


def _finite_mean_partial(value: Tensor, dims: tuple) -> tuple:
    return REDUCTIONS['finite_sum'](value, dims), REDUCTIONS['finite_count'](value, dims)


def _finite_mean_merge(partials: Sequence[tuple]) -> tuple:
    total = functools.reduce(operator.add, [p[0] for p in partials])
    return total, functools.reduce(operator.add, [p[1] for p in partials])


def _finite_mean_combine(partials: Sequence[tuple]) -> Tensor:
    total, count = _finite_mean_merge(partials)
    return where(count > 0, total / where(count > 0, count, 1), np.nan)


def _finite_std_partial(value: Tensor, dims: tuple) -> tuple:
    return (REDUCTIONS['finite_count'](value, dims), REDUCTIONS['finite_mean'](value, dims),
            REDUCTIONS['finite_std'](value, dims))


def _finite_std_merge(partials: Sequence[tuple]) -> tuple:
    """(count, mean, std) pooled like `std`, weighing each part by its count of finite values; parts without any
    count nothing (where no part has one, the mean is 0 and the std NaN, and weigh nothing when merged again)."""
    count = functools.reduce(operator.add, [p[0] for p in partials])
    some = count > 0
    divisor = where(some, count, 1)
    mean = functools.reduce(operator.add, [where(n > 0, n * m, 0) for n, m, _ in partials]) / divisor
    spread = functools.reduce(operator.add, [where(n > 0, n * (s * s + (m - mean) ** 2), 0) for n, m, s in partials])
    return count, mean, where(some, spread / divisor, np.nan) ** 0.5


def _finite_std_combine(partials: Sequence[tuple]) -> Tensor:
    return _finite_std_merge(partials)[2]


def _reduction(name: str, dense: Callable, repeat: str, partial: Callable, combine: Callable,
               exact_kinds: tuple = (), merge: Callable | None = None) -> Reduction:
    """A table entry; `merge` None: the partial is the reduction itself (`_itself`), so merging is combining."""
    if merge is None:
        def merge(partials: Sequence[tuple]) -> tuple:
            return (combine(partials),)
    return Reduction(Op(name, REDUCE, dense), repeat, partial, combine, merge, exact_kinds)


_ANY_KIND = (bool, int, float, complex)
_INTEGRAL = (bool, int)


REDUCTIONS: dict[str, Reduction] = {r.name: r for r in (
    # name, dense implementation, under repetition, partial, combine, dtype kinds combined exactly
    _reduction('sum', _dense_reduce('sum'), 'scale', _itself('sum'), _fold(operator.add), _INTEGRAL),
    _reduction('prod', _dense_reduce('prod'), 'power', _itself('prod'), _fold(operator.mul), _INTEGRAL),
    _reduction('max', _dense_reduce('max'), 'same', _itself('max'), _fold(maximum), _ANY_KIND),
    _reduction('min', _dense_reduce('min'), 'same', _itself('min'), _fold(minimum), _ANY_KIND),
    _reduction('any', _dense_reduce('any'), 'same', _itself('any'), _fold(operator.or_), _ANY_KIND),
    _reduction('all', _dense_reduce('all'), 'same', _itself('all'), _fold(operator.and_), _ANY_KIND),
    _reduction('mean', _dense_reduce('mean', to_float=True), 'same', _mean_partial, _mean_combine, merge=_mean_merge),
    _reduction('std', _dense_reduce('std', to_float=True), 'same', _std_partial, _std_combine, merge=_std_merge),
    _reduction('finite_sum', _finite(_dense_reduce('sum'), 0), 'scale', _itself('finite_sum'), _fold(operator.add),
               _INTEGRAL),
    _reduction('finite_max', _finite(_dense_reduce('max'), -np.inf), 'same', _itself('finite_max'), _fold(maximum),
               _ANY_KIND),
    _reduction('finite_min', _finite(_dense_reduce('min'), np.inf), 'same', _itself('finite_min'), _fold(minimum),
               _ANY_KIND),
    _reduction('finite_mean', _dense_finite_mean, 'same', _finite_mean_partial, _finite_mean_combine,
               merge=_finite_mean_merge),
    _reduction('finite_std', _dense_finite_std, 'same', _finite_std_partial, _finite_std_combine,
               merge=_finite_std_merge),
    _reduction('finite_count', _dense_finite_count, 'scale', _itself('finite_count'), _fold(operator.add), _ANY_KIND),
)}


def reduction_of(op: Op) -> Reduction | None:
    """The table entry of a REDUCE operation, or None for a reduction the table does not describe."""
    entry = REDUCTIONS.get(op.name)
    return entry if entry is not None and entry.op is op else None
