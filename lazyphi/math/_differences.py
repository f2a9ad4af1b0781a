"""Derivatives on grids: finite differences (`spatial_gradient`, `laplace`, the reductions of neighbours in
`neighbor_reduce`) and the spectral Laplace operator and its inverse (`fourier_laplace`, `fourier_poisson`);
resampling by a factor of two (`downsample2x`, `upsample2x`), as a multigrid method does; and filling invalid
cells from valid neighbours (`finite_fill`, `masked_fill`); and `frequency_loss`, a loss on the Fourier transform
damped at high frequencies.

The finite differences are built on `shift`: the values one cell below and above along each dim, with the
extrapolation `padding` supplying those beyond the edges (None: no padding, so the result is smaller than
the grid). The spectral ones multiply the Fourier transform by `-(2 pi k)^2` for the frequencies `k` of
`fftfreq`: exact for periodic fields.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable

import numpy as np

from ..backend import DType
from ._creation import meshgrid, wrap
from ._dims import batch, channel, spatial
from ._elementwise import cast_tensor, where
from ._magic_ops import pack_dims, rename_dims, stack
from ._ops import abs_square, exp, fft, ifft, is_finite, maximum, real, safe_div, sqrt, to_complex, to_float
from ._padding import pad, shift, shifts_per_dim
from ._reduce import max_, mean, min_, sum_
from ._shape import Shape
from ._tensor import Tensor, as_tensor, dims_in
from ._tree import leaves
from ._vectors import l1_loss, l2_loss
from .extrapolation import ZERO, ZERO_GRADIENT

_AXES = '_laplace_axes'  # the batch dim along which `laplace` holds the second differences of each dim
_PAIR = '_neighbors'  # the batch dim along which `neighbor_reduce` stacks a cell and its upper neighbour
_HALVES = '_halves'  # the dim along which `upsample2x` lists the two new cells of each old one
_AROUND = '_around'  # the batch dim along which the fills stack a cell's neighbours
_OFFSETS = {'central': (-1, 1), 'forward': (0, 1), 'backward': (-1, 0)}
GRADIENT_DIM = channel('gradient')  # the default dim listing the derivatives of `spatial_gradient`


def spatial_gradient(grid: Tensor, dx=1, difference: str = 'central', padding=ZERO_GRADIENT, dims=spatial,
                     stack_dim: Shape | None = GRADIENT_DIM, pad=0, padding_kwargs: dict | None = None) -> Tensor:
    """The finite-difference derivatives of `grid` along each of `dims`, listed along `stack_dim`.

    Args:
        grid: the values on a regular grid.
        dx: the spacing of the grid: a number, or a tensor with a component per dim along a channel dim labelled by
            the dims' names (`vec(x=0.1, y=0.2)`).
        difference: 'central' (`(g[i+1] - g[i-1]) / 2dx`), 'forward' (`(g[i+1] - g[i]) / dx`) or 'backward'
            (`(g[i] - g[i-1]) / dx`).
        padding: the extrapolation giving the values beyond the edges; None: no padding, so the result is
            smaller than `grid`.
        dims: the dims to differentiate along.
        stack_dim: the new dim listing the derivatives, labelled by the dims (labels of its own choose and order
            them); None for a single dim. A dim of `grid` of that name and size 1 is replaced.
        pad: cells to add to the result at both ends (an int, or (lower, upper)), values from `padding`.
        padding_kwargs: passed on to the extrapolation.

    Raises:
        ValueError: an unknown `difference`, labels of `stack_dim` that are not the dims, or a `stack_dim` that
            `grid` has already with more than one entry.
    """
    grid = as_tensor(grid)
    offsets = _OFFSETS.get(difference.lower() if isinstance(difference, str) else difference)
    if offsets is None:
        raise ValueError(f"spatial_gradient(): difference must be one of {tuple(_OFFSETS)}, got {difference!r}")
    if isinstance(stack_dim, str):
        stack_dim = channel(stack_dim)
    if stack_dim is not None and stack_dim.name in grid.shape.names:
        if grid.shape.get_size(stack_dim.name) != 1:
            raise ValueError(f"spatial_gradient(): cannot list the derivatives along {stack_dim.name!r}, which the "
                             f"grid {grid.shape} has already")
        grid = grid[{stack_dim.name: 0}]
    names = dims_in(grid.shape, dims)  # the order `shift` lists them in
    order = stack_dim.labels[0] if stack_dim is not None else None
    if order is not None and set(order) != set(names):
        raise ValueError(f"spatial_gradient(): the labels {order} of stack_dim are not the dims {names} to "
                         f"differentiate along")
    low, high = shift(grid, offsets, names, padding, stack_dim and stack_dim.without_sizes(), extend_bounds=pad,
                      padding_kwargs=padding_kwargs)
    step = _per_dim(dx, names, stack_dim.name if stack_dim is not None else None)
    result = (high - low) / (step * (offsets[1] - offsets[0]))
    return result if order is None or tuple(order) == names else result[{stack_dim.name: list(order)}]


def laplace(x: Tensor, dx=1, padding=ZERO_GRADIENT, dims=spatial, weights: Tensor | None = None,
            padding_kwargs: dict | None = None) -> Tensor:
    """The sum over `dims` of the second finite differences of `x`: `(x[i-1] - 2 x[i] + x[i+1]) / dx²` per dim.

    Args:
        x: the values on a regular grid (each other dim, such as vector components, on its own).
        dx: the spacing: a number, a tuple or list with one per dim (in the order of `dims` in `x`), or a tensor with a
            component per dim along a channel dim labelled by the dims' names.
        padding: the extrapolation giving the values beyond the edges; None: the result is two cells smaller.
        dims: the dims whose second differences are summed.
        weights: factors for the terms of the dims before they are summed: a tensor with a channel dim labelled by
            (at least) the dims' names.
        padding_kwargs: passed on to the extrapolation.

    Raises:
        ValueError: `x` has none of `dims`.
    """
    x = as_tensor(x)
    names = dims_in(x.shape, dims)
    if not names:
        raise ValueError(f"laplace(): {x.shape} has no dims to differentiate along (dims="
                         f"{getattr(dims, '__name__', dims)!r}); give a grid with such dims")
    steps = _per_dim(dx, names, _AXES) ** 2
    factors = _per_dim(weights, names, _AXES) if weights is not None else None
    # the terms of the dims added one by one, not stacked and summed: no copies of the grid (matrix_from_function
    # applies the operator to stacks of probe vectors, whose copies took half its time)
    shifted = shifts_per_dim(x, (-1, 0, 1), names, padding, padding_kwargs=padding_kwargs)
    result = None
    for i, (below, centre, above) in enumerate(shifted.values()):
        term = (below + above - 2 * centre) / _along(steps, i)
        if factors is not None:
            term = term * _along(factors, i)
        result = term if result is None else result + term
    return result


def _along(value: Tensor, i: int) -> Tensor:
    """Entry `i` of a `_per_dim` value along `_AXES`, or the value itself where it is one for all dims."""
    return value[{_AXES: i}] if _AXES in value.shape.names else value


def _per_dim(value, names: tuple, along: str | None):
    """`value` (a number, a tuple or list per dim, or a tensor with a channel dim labelled by dim names) with one entry
    per dim of `names` along the dim `along` of the differences; a number as it is."""
    if isinstance(value, (tuple, list)):
        if len(value) != len(names):
            raise ValueError(f"{len(value)} values {value} for the {len(names)} dims {names}")
        if along is None:  # a single dim
            return as_tensor(value[0])
        return stack([as_tensor(v) for v in value], batch(**{along: names}) if along == _AXES else
                     channel(**{along: names}))
    value = as_tensor(value)
    labelled = [d for d in value.shape.channel.names if set(names) <= set(value.shape.get_labels(d) or ())]
    if not labelled:
        return value
    dim = labelled[0]
    selected = value[{dim: names}]
    if along is None:
        return selected[{dim: 0}]
    return rename_dims(selected, dim, batch(along) if along == _AXES else channel(along))


def neighbor_reduce(reduce_fun: Callable, grid: Tensor, dims=spatial, padding=None, padding_kwargs: dict | None = None,
                    extend_bounds=0) -> Tensor:
    """`reduce_fun` of each cell and its upper neighbour along each of `dims` in turn: with two dims, of 4 values.

    Args:
        reduce_fun: a reduction taking `(values, dim)`, such as `math.mean` or `math.max`.
        grid: the values.
        dims: the dims to reduce neighbours along.
        padding: the extrapolation giving the neighbours beyond the upper edges; None: the result has one cell less
            along each dim.
        padding_kwargs: passed on to the extrapolation.
        extend_bounds: cells to add at both ends (an int, or (lower, upper)), values from `padding`.
    """
    result = as_tensor(grid)
    for name in dims_in(result.shape, dims):
        cell, upper = shift(result, (0, 1), name, padding, None, extend_bounds=extend_bounds,
                            padding_kwargs=padding_kwargs)
        result = reduce_fun(stack([cell, upper], batch(_PAIR)), _PAIR)
    return result


def neighbor_mean(grid: Tensor, dims=spatial, padding=None, extend_bounds=0) -> Tensor:
    """The mean of each cell and its upper neighbours (`neighbor_reduce` with `mean`)."""
    return neighbor_reduce(mean, grid, dims, padding, extend_bounds=extend_bounds)


def neighbor_sum(grid: Tensor, dims=spatial, padding=None, extend_bounds=0) -> Tensor:
    """The sum of each cell and its upper neighbours (`neighbor_reduce` with `sum`)."""
    return neighbor_reduce(sum_, grid, dims, padding, extend_bounds=extend_bounds)


def neighbor_max(grid: Tensor, dims=spatial, padding=None, extend_bounds=0) -> Tensor:
    """The largest of each cell and its upper neighbours (`neighbor_reduce` with `max`)."""
    return neighbor_reduce(max_, grid, dims, padding, extend_bounds=extend_bounds)


def neighbor_min(grid: Tensor, dims=spatial, padding=None, extend_bounds=0) -> Tensor:
    """The smallest of each cell and its upper neighbours (`neighbor_reduce` with `min`)."""
    return neighbor_reduce(min_, grid, dims, padding, extend_bounds=extend_bounds)


def fftfreq(resolution: Shape, dx=1, dtype: DType | None = None) -> Tensor:
    """The frequencies of the entries of `math.fft` of a grid of `resolution`, one component per spatial dim along a
    channel dim `vector`, in cycles per unit of `dx` (as `numpy.fft.fftfreq`).

    Args:
        resolution: a Shape with the grid's spatial dims and sizes (other dims are ignored).
        dx: the spacing of the grid: a number, or a tensor with a component per dim (`vec(x=0.1, y=0.2)`).
        dtype: the dtype of the result; None: floats of the current precision.

    Raises:
        ValueError: `resolution` has no spatial dim.
    """
    if not isinstance(resolution, Shape) or not resolution.spatial:
        raise ValueError(f'fftfreq() needs a Shape with spatial dims, got {resolution!r}')
    grid = resolution.spatial
    frequencies = meshgrid(**{name: wrap(np.fft.fftfreq(size), spatial(name))
                              for name, size in zip(grid.names, grid.sizes, strict=True)}) / dx
    return to_float(frequencies) if dtype is None else cast_tensor(frequencies, dtype)


def fourier_laplace(grid: Tensor, dx, times: int = 1) -> Tensor:
    """The Laplace operator applied `times` times to `grid` (periodic along its spatial dims), in Fourier space: exact
    for periodic fields, close to but not the same as `laplace`, at a cost independent of `times`.

    Args:
        grid: the values; periodic along its spatial dims.
        dx: the spacing: a number, or a tensor with a component per spatial dim along `vector`.
        times: how often the operator is applied.
    """
    grid = as_tensor(grid)
    return _spectral(grid, _laplace_symbol(grid, dx) ** times)


def fourier_poisson(grid: Tensor, dx, times: int = 1) -> Tensor:
    """The inverse of `fourier_laplace`: the periodic field whose Laplace operator (applied `times` times) is `grid`,
    with mean zero (the constant component, which the operator removes, is set to zero).

    Args:
        grid: the values; periodic along its spatial dims.
        dx: the spacing: a number, or a tensor with a component per spatial dim along `vector`.
        times: how often the operator is inverted.
    """
    grid = as_tensor(grid)
    return _spectral(grid, safe_div(1, _laplace_symbol(grid, dx) ** times))


def _laplace_symbol(grid: Tensor, dx) -> Tensor:
    """`-(2 pi k)^2` for the frequencies `k` of `grid`'s spatial dims: the Laplace operator in Fourier space."""
    return -(2 * np.pi) ** 2 * sum_(fftfreq(grid.shape, dx) ** 2, 'vector')


def _spectral(grid: Tensor, factor: Tensor) -> Tensor:
    return cast_tensor(real(ifft(fft(to_complex(grid)) * factor)), grid.dtype)


def frequency_loss(x, frequency_falloff: float = 100, threshold=1e-5, ignore_mean=False, n=2) -> Tensor:
    """A loss on the Fourier transform of `x` (along its spatial dims) that weighs low frequencies more than high ones:
    the transform is damped by `exp(-k² falloff² / 2)` for the frequencies `k` of `fftfreq`, its magnitudes are
    raised to at least `sqrt(threshold)`, and `l2_loss` (n=2) or `l1_loss` (n=1) of them is the result.

    Args:
        x: a tensor with spatial dims, typically `prediction - target`, or a tree of such tensors (the losses of its
            tensors are summed).
        frequency_falloff: how fast the weights fall with the frequency; 1 weighs all frequencies nearly alike, the
            default 100 leaves little but the mean. The loss's scale changes with it.
        threshold: the smallest squared magnitude counted; above 0, the gradient stays finite where a magnitude is 0.
        ignore_mean: subtract the mean over all non-batch dims (channel dims included, as phiml does) first.
        n: 2 for the sum of squares over 2, 1 for the sum of magnitudes.

    Returns:
        The loss per entry of the batch dims.

    Raises:
        ValueError: `n` is not 1 or 2, `x` holds no tensor, or a tensor without spatial dims.
    """
    if n not in (1, 2):
        raise ValueError(f'frequency_loss(): n must be 1 or 2, got {n!r}')
    tensors = [x] if isinstance(x, Tensor) else leaves(x)
    if not tensors:
        raise ValueError(f'frequency_loss(): needs a tensor or a tree of tensors, got {x!r}')
    losses = [_frequency_loss(t, frequency_falloff, threshold, ignore_mean, l2_loss if n == 2 else l1_loss)
              for t in tensors]
    return functools.reduce(operator.add, losses)


def _frequency_loss(x: Tensor, frequency_falloff, threshold, ignore_mean: bool, loss: Callable) -> Tensor:
    if not x.shape.spatial:
        raise ValueError(f'frequency_loss(): needs spatial dims to transform along, got a tensor of shape {x.shape}')
    if ignore_mean:
        x = x - mean(x, x.shape.non_batch)
    weights = exp(-0.5 * frequency_falloff ** 2 * sum_(fftfreq(x.shape) ** 2, 'vector'))
    return loss(sqrt(maximum(abs_square(fft(x) * weights), threshold)))


def downsample2x(grid: Tensor, padding=ZERO_GRADIENT, dims=spatial) -> Tensor:
    """`grid` with half as many cells along each of `dims`: each new cell the mean of two neighbours (of 2^d cells in
    d dims). A dim of odd size is first padded by one cell at its upper end, with values from `padding`."""
    grid = as_tensor(grid)
    names = dims_in(grid.shape, dims)
    odd = {name: (0, 1) for name in names if grid.shape.get_size(name) % 2}
    if odd:
        grid = pad(grid, odd, padding)
    for name in names:
        grid = (grid[{name: slice(0, None, 2)}] + grid[{name: slice(1, None, 2)}]) / 2
    return grid


def upsample2x(grid: Tensor, padding=ZERO_GRADIENT, dims=spatial, padding_kwargs: dict | None = None) -> Tensor:
    """`grid` with twice as many cells along each of `dims`, linearly interpolated: each cell becomes two, at a quarter
    of the way towards its lower and its upper neighbour (`0.75 c + 0.25 n`); `padding` gives the neighbours beyond
    the edges."""
    grid = as_tensor(grid)
    for name in dims_in(grid.shape, dims):
        below, centre, above = shift(grid, (-1, 0, 1), name, padding, None, padding_kwargs=padding_kwargs)
        halves = stack([0.75 * centre + 0.25 * below, 0.75 * centre + 0.25 * above], channel(_HALVES))
        grid = pack_dims(halves, (name, _HALVES), grid.shape[name].with_size(2 * grid.shape.get_size(name)))
    return grid


def finite_fill(values: Tensor, dims=spatial, distance: int = 1, diagonal: bool = True, padding=ZERO_GRADIENT,
                padding_kwargs: dict | None = None) -> Tensor:
    """`values` with each non-finite entry (NaN, ±inf) replaced by the mean of its finite neighbours, `distance` times
    over, so that finite values spread `distance` cells; entries without a finite neighbour stay as they are.

    Args:
        values: floating-point values.
        dims: the dims to look for neighbours along.
        distance: the number of steps, each filling one cell further out.
        diagonal: neighbours are the whole box around a cell (3^d - 1 cells); False: the two along each dim.
        padding: the extrapolation of `values` beyond the edges (it decides whether edges fill from outside).
        padding_kwargs: passed on to the extrapolation.
    """
    values = as_tensor(values)
    names = dims_in(values.shape, dims)
    for _ in range(max(0, min(distance, sum(values.shape.only(names).sizes) if names else 0))):
        valid = is_finite(values)
        total, count = _neighbour_sums(where(valid, values, 0), to_float(valid), names, diagonal, padding,
                                       padding_kwargs)
        values = where(valid | (count == 0), values, total / where(count > 0, count, 1))
    return values


def masked_fill(values: Tensor, valid: Tensor, distance: int = 1) -> tuple[Tensor, Tensor]:
    """`values` with the cells where `valid` is zero filled by the mean of the valid cells around them (the whole box,
    along all spatial dims, nothing from beyond the edges), `distance` times over; and the mask of the cells that are
    valid afterwards (1 and 0).
    """
    values = as_tensor(values)
    valid = to_float(as_tensor(valid) != 0)
    names = values.shape.spatial.names
    for _ in range(max(0, min(distance, max(values.shape.spatial.sizes, default=0)))):
        total, count = _neighbour_sums(values * valid, valid, names, True, ZERO, None)
        values = where(valid > 0, values, where(count > 0, total / where(count > 0, count, 1), values))
        valid = to_float(count > 0)
    return values, valid


def _neighbour_sums(values: Tensor, weights: Tensor, names: tuple, diagonal: bool, padding, padding_kwargs):
    """The sums of `values` and of `weights` over each cell's neighbourhood along the dims `names`: the box around it
    (the cell included) where `diagonal`, else the cell's two neighbours along each dim (the cell excluded)."""
    def summed(parts: list) -> Tensor:
        return sum_(stack(parts, batch(_AROUND)), _AROUND)

    def around(t: Tensor, name: str, offsets: tuple) -> list:
        return shift(t, offsets, name, padding, None, padding_kwargs=padding_kwargs)

    if diagonal:  # the box: the three cells along each dim in turn
        for name in names:
            values, weights = (summed(around(t, name, (-1, 0, 1))) for t in (values, weights))
        return values, weights
    return tuple(summed([part for name in names for part in around(t, name, (-1, 1))]) for t in (values, weights))
