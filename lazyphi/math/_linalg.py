"""Matrices over named dims: `svd`, `fit_hyperplane`, `eigenvalues`, `matrix_rank`, `with_diagonal`,
`factor_ilu` and `matrix_from_function`.

A matrix lists its columns along dual dims `~d` and its rows along the dims `d` of the same names (or, where
it has none of those, along its other non-batch dims), as `@` pairs them. The decompositions lay their
tensors out as a batch of matrices, one axis each for the batch, the rows and the columns
(`reshaped_native`, each axis packing the dims of one group), hand them to the backend (`svd`,
`matrix_solve_least_squares`, `eigvals`), and name the axes of the results again (`reshaped_tensor`). `svd`
takes rows of non-uniform length too: the rows of all slices form one matrix, whose latent vectors are split
again. `matrix_rank` counts the singular values above NumPy's tolerance; `with_diagonal` is a `where` on the
positions whose row and column numbers agree. `factor_ilu` runs its fixed-point sweeps as tensor operations
(masks from the row and column numbers, one `dot` per sweep), so every backend and the tracer take part.
`matrix_from_function` only calls the function, on basis vectors and on zeros.
"""

from __future__ import annotations

import inspect
import itertools
import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from ..backend import DType, convert, get_precision
from ._autodiff import compiling
from ._compare import always_close
from ._conversion import reshaped_native
from ._convert import convert as convert_tensors
from ._convert import to_backend
from ._creation import random_normal, range_tensor, reshaped_tensor, wrap, zeros_like
from ._dims import batch, channel, instance, merge_shapes, non_batch, parse_dim_spec
from ._gather_scatter import gather
from ._magic_ops import concat, expand, pack_dims, rename_dims, stack, unstack
from ._ops import abs_, cast, safe_div, sqrt, to_float, where
from ._reduce import max_, sum_
from ._shape import EMPTY_SHAPE, Shape
from ._sparse import SparseTensor, make_sparse, to_format
from ._structure import transpose
from ._tensor import Tensor, as_tensor, dims_in
from ._trace import DataNeeded, Tracer
from ._vectors import dot

SINGULAR = channel('singular')  # the latent dim of `svd` by default
EIGENVALUES = channel('eigenvalues')  # the dim listing the results of `eigenvalues` by default
_INNER = '_ilu_inner_'  # prefix of the dims a sweep of `factor_ilu` sums over
_COLUMN = '_column_of_'  # prefix of the batch dims numbering the basis vectors in `matrix_from_function`
_PROBED_VALUES = 2 ** 20  # `matrix_from_function` applies the function to at most this many values of basis vectors
_DENSEST = 1 / 8  # the share of nonzero entries above which a matrix over 2^20 entries is built dense
# how closely a matrix found by `matrix_from_function` must give the function's value on a random input
_REL_TOLERANCE, _ABS_TOLERANCE = 1e-4, 1e-5


def svd(x, feature_dim=channel, list_dim=None, latent_dim=SINGULAR, full_matrices: bool = False):
    """Singular value decomposition of `x`, read as a list of feature vectors.

    `features @ (latents * singular)` gives `x` back (up to rounding; truncated, its best approximation of that
    rank): `@` sums the dual latent dim of `features` with the latent dim of the others.

    Args:
        x: tensor holding `feature_dim` and `list_dim`; its other dims list independent matrices.
        feature_dim: the dims listing the features (the matrix columns).
        list_dim: the dims listing the items (the rows). Default: the non-batch dims that are not features, or
            else all dims that are not features. Rows of non-uniform length are concatenated into one matrix.
        latent_dim: the dim of the latent vectors (a Shape, or a spec such as `'singular'`, channel by default).
            With a size, only that many leading singular values are kept.
        full_matrices: whether the backend computes full square factors (only `min(rows, columns)` of their
            vectors pair with singular values).

    Returns:
        latents: the latent vector of each item: `list_dim` and `latent_dim` (plus the matrices' dims).
        singular: the singular values in descending order: `latent_dim`.
        features: the feature vector of each latent dim: the dual of `latent_dim` and `feature_dim`.

    Raises:
        ValueError: `feature_dim` or `list_dim` selects no dim of `x`, or sizes vary along dims other than rows.
    """
    x = as_tensor(x)
    features = x.shape.only(dims_in(x.shape, feature_dim), reorder=True)
    if not features:
        raise ValueError(f'svd(): feature_dim={feature_dim!r} selects none of the dims of {x.shape}; pass the dims '
                         f'listing the features (the matrix columns)')
    if list_dim is None:
        listed = non_batch(x).without(features.names) or x.shape.without(features.names)
    else:
        listed = x.shape.only(dims_in(x.shape, list_dim), reorder=True)
    if not listed:
        raise ValueError(f'svd(): list_dim={list_dim!r} selects none of the dims of {x.shape} but {features}; pass '
                         f'the dims listing the items (the matrix rows)')
    matrices = x.shape.without(features.names).without(listed.names)
    latent = parse_dim_spec(latent_dim, 'channel') if isinstance(latent_dim, str) else latent_dim
    backend = x.backend
    along = x.shape.non_uniform_shape
    if not set(along.names) <= set(listed.names) or not set(x.shape.non_uniform.names) <= set(listed.names):
        raise ValueError(f'svd(): the sizes of {x.shape.non_uniform} vary along {along}; only the rows '
                         f'(list_dim={listed}) may have non-uniform length')
    parts = [x[dict(zip(along.names, index, strict=True))] for index in itertools.product(*map(range, along.sizes))]
    rows = [part.shape.only(listed.names) for part in parts]
    natives = [reshaped_native(part, [matrices, row, features]) for part, row in zip(parts, rows, strict=True)]
    u, s, vh = backend.svd(backend.concat(natives, 1) if len(natives) > 1 else natives[0], full_matrices=full_matrices)
    if latent.size is not None:
        available = backend.staticshape(s)[-1]
        if available < latent.size:
            warnings.warn(f'svd(): {latent} asks for {latent.size} singular values but there are {available}',
                          stacklevel=2)
        u, s, vh = u[..., :latent.size], s[..., :latent.size], vh[..., :latent.size, :]
    latents, start = [], 0
    for row in rows:
        latents.append(reshaped_tensor(u[:, start:start + row.volume], [matrices, row, latent], convert=False))
        start += row.volume
    return (_stacked(latents, along), reshaped_tensor(s, [matrices, latent], convert=False),
            reshaped_tensor(vh, [matrices, latent.as_dual(), features], convert=False))


def _stacked(parts: list, along: Shape) -> Tensor:
    """The tensors `parts`, listed row-major over the dims `along`, stacked along them."""
    for dim in reversed(along.names):
        size = along.get_size(dim)
        parts = [stack(parts[i:i + size], along[dim]) for i in range(0, len(parts), size)]
    return parts[0]


def fit_hyperplane(x, y, point_dim=instance, weights=1.):
    """The plane `y = slope · x + offset` that fits the points `(x, y)` best (least squares).

    Args:
        x: the points' coordinates: `point_dim` and one channel dim listing the components.
        y: the value at each point: `point_dim`, without the components' dim. Its other dims, and those of
            `x`, list independent fits.
        point_dim: the dim listing the points (one dim; default: the instance dim).
        weights: each point's weight: the fit minimises the weighted sum of squared errors. A single weight
            changes nothing.

    Returns:
        slope: the plane's slope along each component of `x`: the components' dim and the fits' dims.
        offset: its value at `x = 0`, per fit.

    Raises:
        ValueError: `point_dim` is not one dim of `x`, `x` has not exactly one channel dim besides it, or `y`
            has that dim too.
    """
    x, y, weights = as_tensor(x), as_tensor(y), as_tensor(weights)
    point = x.shape.only(dims_in(x.shape, point_dim))
    if point.rank != 1:
        raise ValueError(f'fit_hyperplane(): point_dim={point_dim!r} selects {point} of {x.shape}; it must select '
                         f'the one dim listing the points')
    components = channel(x).without(point.names)
    if components.rank != 1:
        raise ValueError(f'fit_hyperplane(): x must have one channel dim listing the components of each point, '
                         f'besides {point}, but has {components or "none"} ({x.shape})')
    if components.name in y.shape:
        raise ValueError(f'fit_hyperplane(): y must hold one value per point but has the components\' dim '
                         f'{components} of x ({y.shape})')
    fits = merge_shapes(x.shape.without(components.name), y.shape, weights.shape).without(point.name)
    root = sqrt(weights * 1.)  # minimising the sum of w * error² scales each row by √w
    rows = expand(root, x.shape.without(components.name))
    backend = (x * root).backend
    columns = [reshaped_native(x * root, [fits, point, components]),
               convert(reshaped_native(rows, [fits, point, ()]), backend)]
    matrix = backend.concat(columns, -1)
    rhs = convert(reshaped_native(y * root, [fits, point, ()]), backend)
    solution = backend.matrix_solve_least_squares(matrix, rhs)[0]
    return (reshaped_tensor(solution[:, :-1, 0], [fits, components], convert=False),
            reshaped_tensor(solution[:, -1, 0], [fits], convert=False))


def eigenvalues(matrix: Tensor, eigen_dim=EIGENVALUES) -> Tensor:
    """The eigenvalues of the square matrices in `matrix`, as complex numbers listed along `eigen_dim`.

    Args:
        matrix: columns along dual dims, rows along the dims of the same names (or, if it has none of those,
            along its non-batch, non-dual dims); its other dims list independent matrices. Integers and
            booleans are taken as floats of the current precision.
        eigen_dim: the dim listing the eigenvalues (a Shape, or a spec such as `'eigenvalues'`, channel by
            default), in the order the backend gives them.

    Returns:
        Complex eigenvalues (on every backend, also where all are real), with the dims of the matrices and
        `eigen_dim`.

    Raises:
        ValueError: `matrix` has no dual dim, or its rows and columns differ in number.
    """
    matrix = as_tensor(matrix)
    rows, columns = _rows_and_columns(matrix, 'eigenvalues')
    if rows.volume != columns.volume:
        raise ValueError(f'eigenvalues(): the matrix {matrix.shape} is not square: {rows.volume} rows ({rows}) '
                         f'but {columns.volume} columns ({columns})')
    matrices = matrix.shape.without(rows.names).without(columns.names)
    if matrix.dtype.kind not in (float, complex):
        matrix = to_float(matrix)
    values = matrix.backend.eigvals(reshaped_native(matrix, [matrices, rows, columns]))
    eigen = parse_dim_spec(eigen_dim, 'channel') if isinstance(eigen_dim, str) else eigen_dim
    return reshaped_tensor(values, [matrices, eigen], convert=False)


def matrix_rank(matrix: Tensor) -> Tensor:
    """The rank of each matrix in `matrix`: the number of its singular values above a tolerance.

    The tolerance is NumPy's (`numpy.linalg.matrix_rank`): the largest singular value times the larger of the
    numbers of rows and columns times the machine epsilon of the singular values' precision.

    Args:
        matrix: columns along its dual dims, rows along all its other non-batch dims; each batch entry is a
            matrix of its own. Without dual dims, each matrix is one column.

    Returns:
        64-bit integers with the batch dims of `matrix`.
    """
    matrix = as_tensor(matrix)
    rows, columns, matrices = matrix.shape.primal, matrix.shape.dual, matrix.shape.batch
    if matrix.dtype.kind not in (float, complex):
        matrix = to_float(matrix)
    singular = matrix.backend.svd(reshaped_native(matrix, [matrices, rows, columns]), full_matrices=False)[1]
    values = reshaped_tensor(singular, [matrices, channel('_singular')], convert=False)
    epsilon = float(np.finfo(np.dtype(f'float{values.dtype.bits}')).eps)
    tolerance = max_(values, '_singular') * (max(rows.volume, columns.volume) * epsilon)
    return cast(sum_(values > tolerance, '_singular'), DType(int, 64))


def with_diagonal(matrix: Tensor, values, check_square: bool = True) -> Tensor:
    """A copy of the dense matrix `matrix` whose diagonal holds `values`.

    The diagonal is where the row and the column have the same number, both counted row-major over their dims:
    with rows `x, y` and columns `~x, ~y`, where `x == ~x` and `y == ~y`.

    Args:
        matrix: columns along dual dims; rows along the dims of the same names, else along the non-batch,
            non-dual dims, else along the batch dims. Other dims list independent matrices.
        values: the new diagonal: a number, or a tensor whose dims broadcast against `matrix` (along the rows,
            one value per diagonal entry).
        check_square: refuse matrices with more rows than columns or fewer; otherwise the diagonal of a
            rectangular matrix has as many entries as it has rows or columns, whichever is fewer.

    Raises:
        ValueError: `matrix` has no dual dim, or is not square with `check_square`.
    """
    matrix = as_tensor(matrix)
    rows, columns = _rows_and_columns(matrix, 'with_diagonal', matrix.shape.batch)
    if check_square and rows.volume != columns.volume:
        raise ValueError(f'with_diagonal(): the matrix {matrix.shape} is not square: {rows.volume} rows ({rows}) '
                         f'but {columns.volume} columns ({columns}); pass check_square=False for the diagonal of '
                         f'a rectangular matrix')
    return where(range_tensor(rows) == range_tensor(columns), values, matrix)


def factor_ilu(matrix: Tensor, iterations: int | None, safe: bool = False) -> tuple[Tensor, Tensor]:
    """An incomplete LU factorisation `matrix ≈ L @ U` of dense matrices by fixed-point sweeps (Chow and Patel).

    `U` starts as the diagonal of `matrix` and `L` as each column divided by its diagonal entry; each sweep then
    recomputes every entry of both from the previous sweep's values (all entries at once, so a sweep is a
    matrix product and element-wise operations). For dense matrices the sweeps converge to the exact LU
    factors without pivoting after finitely many sweeps; the automatic count aims at a preconditioner.

    Args:
        matrix: dense matrices: columns along dual dims, rows along the dims of the same names (or, if it has
            none of those, along its non-batch, non-dual dims); its other dims list independent matrices.
            Integers and booleans are taken as floats of the current precision. Sparse matrices are not offered.
        iterations: the number of sweeps (required, as in phiml). `None` picks the count phiml's `solve_linear`
            uses for the ILU preconditioner of a dense matrix of `n` rows, counting the `n * n` entries of one
            matrix: 1 where `n < 3`, else `ceil(sqrt(d * n ** (1 / d)))` with
            `d = (n - 1) / 2`.
        safe: divisions by zero diagonal entries (of `matrix` first, of `U` in the sweeps) give 0 instead of
            infinities and NaN, so that matrices whose rank falls short by 2 or more still factor (their `L` is
            not unique: the undetermined entries are 0). Without it, a shortfall of 1 still factors and larger
            ones give NaN. Unlike phiml's, this also covers zeros on the diagonal of `matrix`.

    Returns:
        `(L, U)`, both with the dims of `matrix`: `L` lower triangular with ones on its diagonal, `U` upper
        triangular, rows and columns numbered row-major over their dims.

    Raises:
        ValueError: `matrix` has no dual dim, is not square, or `iterations` is negative.
        TypeError: `iterations` is not an integer.
    """
    matrix = as_tensor(matrix)
    rows, columns = _rows_and_columns(matrix, 'factor_ilu')
    if rows.volume != columns.volume:
        raise ValueError(f'factor_ilu(): the matrix {matrix.shape} is not square: {rows.volume} rows ({rows}) '
                         f'but {columns.volume} columns ({columns})')
    if iterations is None:
        iterations = _ilu_sweeps(columns.volume)
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)):
        raise TypeError(f'factor_ilu(): iterations must be an int or None, not {iterations!r}')
    if iterations < 0:
        raise ValueError(f'factor_ilu(): iterations must be 0 or more, not {iterations}')
    if matrix.dtype.kind not in (float, complex):
        matrix = to_float(matrix)
    row_number, column_number = range_tensor(rows), range_tensor(columns)
    lower_mask, diagonal_mask = row_number > column_number, row_number == column_number
    upper_mask = row_number < column_number
    inner = channel(**{f'{_INNER}{i}': size for i, size in enumerate(columns.sizes)})

    def column_diagonal(values: Tensor) -> Tensor:  # the diagonal entry of each column, along the columns
        return sum_(values * diagonal_mask, rows)

    def divide(numerator: Tensor, denominator: Tensor) -> Tensor:
        return safe_div(numerator, denominator) if safe else numerator / denominator

    lu = matrix * diagonal_mask + divide(matrix, column_diagonal(matrix)) * lower_mask
    for _ in range(iterations):
        products = dot(rename_dims(lu * lower_mask, columns, inner), inner,
                       rename_dims(lu * upper_mask, rows, inner), inner)
        remainder = matrix - products
        lu = where(lower_mask, divide(remainder, column_diagonal(lu)), remainder)
    order = matrix.shape.names
    return transpose(lu * lower_mask + diagonal_mask, order), transpose(lu * ~lower_mask, order)


def _ilu_sweeps(n: int) -> int:
    """phiml's number of sweeps for a dense matrix with `n` rows, whose rows each hold `n` entries."""
    d = (n - 1) / 2
    return 1 if d < 1 else math.ceil(math.sqrt(d * n ** (1 / d)))


def _rows_and_columns(matrix: Tensor, function: str, last_resort: Shape = EMPTY_SHAPE) -> tuple[Shape, Shape]:
    """The columns (the dual dims) of `matrix` and its rows: the dims named like the columns, in their order;
    where there are none, the non-batch, non-dual dims; where there are none of those either, `last_resort`."""
    columns = matrix.shape.dual
    if not columns:
        raise ValueError(f'{function}(): the matrix {matrix.shape} has no dual dim; a matrix lists its columns '
                         f'along dual dims (~d) and its rows along the dims of the same names')
    named = [name[1:] for name in columns.names if name[1:] in matrix.shape]
    rows = matrix.shape.only(named, reorder=True) if named else matrix.shape.primal or last_resort
    return rows, columns


def matrix_from_function(f, *args, auxiliary_args: str | None = None, auto_compress: bool = False,
                         target_backend=None, debug_checks: bool = False, **kwargs) -> tuple[Tensor, Tensor]:
    """The matrix and bias of `f`, a function affine in one tensor argument: `f(x) = matrix @ x + bias`.

    The matrix's columns are the dual dims `~d` of the non-batch dims `d` of `x`, its rows the dims of `f`'s
    output; the bias is `f` at zeros. Where the values are at hand (not while a compiler traces), the matrix is
    sparse, as phiml's: `f` is applied to basis vectors and the nonzero entries of its outputs are kept. Where its
    output has the dims of `x` and each column reaches only nearby rows (a stencil on a grid), a few probes that
    sum far-apart basis vectors suffice, checked by a second weighted probe (`_colored_columns`); otherwise the
    basis vectors (one per element of `x`) go a batch at a time, at most 2^20 values per call: the memory is
    bounded, the time grows with the number of input times output elements (phiml traces `f` once instead). The basis
    vectors have no batch dims: the matrix is one for all batch entries of `x`, and has batch dims only where `f`
    gives them even so (an argument with batch dims: a matrix per entry); then, while a compiler traces, and where
    more than an eighth of over 2^20 entries are nonzero (coordinates would take more memory), the matrix is dense: `f`
    of the whole identity, its basis vectors numbered by batch dims of their own, which `f` maps like any batch dim.
    A function that also acts on the numbering dims (a reduction over `non_spatial`, say) gives a matrix that
    fails a check on a random input, and one that cannot take them (building a tensor from the input's whole
    shape) raises; then `f` is applied to the basis vectors one at a time instead, and the matrix is dense. Traced by
    the planner (`lazyphi.parallel.plan`), it raises the tracer's `DataNeeded`: the property runs on values.

    Args:
        f: the function, called with keyword arguments: on zeros, on batches of basis vectors, on a random input
            (once more with `debug_checks`), and once per element of `x` where it acts on the numbering dims.
        *args: the arguments of `f`, by position; with `**kwargs`, exactly one of those not named in
            `auxiliary_args` must be a tensor: the one `f` is affine in.
        auxiliary_args: comma-separated names of the parameters `f` is not affine in, passed on as given;
            None: all but the first.
        auto_compress: a sparse matrix in the format 'csr' (rows sorted) instead of coordinates ('coo').
        target_backend: the backend (or its name) of the matrix and bias; None: where `f` computes them.
        debug_checks: also call `f(x)` and raise `ValueError` where it differs from `matrix @ x + bias`
            (`f` is not affine in `x`).
        **kwargs: the keyword arguments of `f`.

    Returns:
        `(matrix, bias)`.
    """
    given, name = affine_argument(f, args, kwargs, auxiliary_args)
    x = given[name]
    if x.shape.dual:
        raise ValueError(f'matrix_from_function(): the input {x.shape} has dual dims already; the matrix names its '
                         f'columns by dual dims')
    dtype = x.dtype if x.dtype.kind in (float, complex) else DType(float, get_precision())
    bias = f(**{**given, name: zeros_like(x)})
    if isinstance(x, Tracer) or isinstance(bias, Tracer):
        # planning traces shapes; the matrix is found from values (which entries are zero): a traced stand-in would
        # apply f to the whole identity (2^28 values for a 128x128 grid, 29 s) to give a dense shape the run has not
        raise DataNeeded('matrix_from_function', 'the matrix is built from the values of f at basis vectors')
    # f at zeros without the batch dims of x, subtracted from its values at the basis vectors (which have none)
    origin = f(**{**given, name: zeros_like(x[{d: 0 for d in x.shape.batch.names}])}) if x.shape.batch else bias
    sparse = bool(x.shape.non_batch) and not compiling() and x.available
    matrix, checked = _sparse_columns(f, given, name, x, origin, dtype) if sparse else (None, False)
    # the coloured probes check a random input of their own, the same check as `_represents` where x has no batch dims
    checked = checked and not x.shape.batch
    if matrix is None or not (checked or _represents(matrix, bias, f, given, name, x, dtype)):
        matrix = _dense_columns(f, given, name, x, origin, bias, dtype)
    elif auto_compress:
        matrix = to_format(matrix, 'csr')
    if debug_checks:
        expected, found = f(**given), matrix @ x + bias
        if not _close(found, expected):
            raise ValueError(f'matrix_from_function(): {getattr(f, "__name__", f)} is not affine in {name!r}: '
                             f'matrix @ {name} + bias differs from its value by up to '
                             f'{float(max_(abs_(found - expected))):.3g}')
    if target_backend is not None:
        matrix, bias = convert_tensors(matrix, target_backend), convert_tensors(bias, target_backend)
    return matrix, bias


def affine_argument(f, args: tuple, kwargs: dict, auxiliary_args: str | None) -> tuple[dict, str]:
    """The arguments of `f` by parameter name, and the name of the one `f` is affine in (see `matrix_from_function`).

    Raises:
        TypeError: `auxiliary_args` is not a str or None, or more positional arguments than `f` takes.
        ValueError: not exactly one argument outside `auxiliary_args`, or it is not a tensor.
    """
    if auxiliary_args is not None and not isinstance(auxiliary_args, str):
        raise TypeError(f'matrix_from_function(): auxiliary_args must be a comma-separated str or None, got '
                        f'{auxiliary_args!r}')
    positional = [p.name for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(args) > len(positional):
        raise TypeError(f'matrix_from_function(): {len(args)} positional arguments for the {len(positional)} '
                        f'parameters {positional} of {getattr(f, "__name__", f)}')
    given = {**kwargs, **dict(zip(positional, args, strict=False))}
    aux = {s.strip() for s in auxiliary_args.split(',') if s.strip()} if isinstance(auxiliary_args, str) \
        else set(positional[1:])
    traced = [name for name in given if name not in aux]
    if len(traced) != 1 or not isinstance(given[traced[0]], Tensor):
        raise ValueError(f'matrix_from_function(): exactly one argument outside auxiliary_args must be a Tensor, '
                         f'the one the function is affine in; got {sorted(traced)}')
    return given, traced[0]


class _NotProbed(Exception):
    """`f` cannot take the dim numbering the probe vectors, or gives values that are not at hand."""


def _probed(f, given: dict, name: str, x: Tensor, origin: Tensor, dtype: DType, vectors: Callable, count: int):
    """Yields `(start, output)`: `f` minus `origin` applied to the vectors `vectors(start, stop)` (a NumPy array, one
    row per vector over the flattened non-batch dims of `x`) numbered along the batch dim `_COLUMN`, `count` vectors
    in all, at most `_PROBED_VALUES` values per call.

    Raises:
        _NotProbed: `f` cannot take the numbering dim (a reduction with a dim filter, a tensor built from the
            input's whole shape) or its output is not at hand.
    """
    columns, rows = x.shape.non_batch, origin.shape
    backend = x._dense().backend
    step = max(1, _PROBED_VALUES // max(columns.volume, rows.volume))
    for start in range(0, count, step):
        stop = min(start + step, count)
        probe = cast(reshaped_tensor(convert(vectors(start, stop), backend), [batch(**{_COLUMN: stop - start}),
                                                                              columns], convert=False), dtype)
        try:
            output = f(**{**given, name: probe}) - origin
        except (ValueError, TypeError, KeyError) as err:
            raise _NotProbed() from err
        if set(output.shape.names) != {_COLUMN, *rows.names} or not output.available:
            raise _NotProbed()
        yield start, output


def _entries(output: Tensor, positions: np.ndarray, names: Sequence[str]) -> Tensor:
    """The values of `output` at the flat `positions` (indices into its values ordered along the dims `names`),
    listed along `entries`: gathered from the flattened values (by one index each, not along a batch dim), so
    derivatives flow through them."""
    flat = pack_dims(output, list(names), instance('_probed_values'))
    return gather(flat, wrap(positions.astype(np.int64, copy=False), instance('entries')), dims='_probed_values')


def _sparse_columns(f, given: dict, name: str, x: Tensor, origin: Tensor, dtype: DType) -> tuple[Tensor | None, bool]:
    """The matrix of `f` as a sparse tensor of coordinates, from `f` applied to basis vectors, keeping the nonzero
    entries: coloured (`_colored_columns`) where that is shown exact, else a batch of basis vectors at a time; and
    whether `f` minus `origin` was found to equal it on a random input without batch dims (the coloured probes check
    that).

    The basis vectors have no batch dims of `x` (nor has `origin`, `f` at zeros without them): the matrix is the
    same for every batch entry. Where `f` gives batch dims even so (an argument with batch dims, a matrix per
    entry), or cannot take the dim numbering the vectors, None: the caller builds the dense matrix. Which entries
    are nonzero is read on the host; their values are gathered from `f`'s output, so derivatives with respect to
    the other arguments of `f` flow through them.
    """
    columns, rows = x.shape.non_batch, origin.shape
    if rows.batch or rows.dual or not origin.available:
        return None, False
    count = columns.volume

    def identity(start: int, stop: int) -> np.ndarray:
        vectors = np.zeros((stop - start, count))
        vectors[np.arange(stop - start), np.arange(start, stop)] = 1
        return vectors
    try:
        found = _colored_columns(f, given, name, x, origin, dtype)
        if found is not None:
            return found
        coordinates, values, stored = [], [], 0
        order = [_COLUMN, *rows.names]
        for start, output in _probed(f, given, name, x, origin, dtype, identity, count):
            probed = output.numpy(order)
            positions = np.flatnonzero(probed)
            stored += len(positions)
            if stored > _DENSEST * count * rows.volume > _DENSEST * _PROBED_VALUES:  # a large matrix, whose
                return None, False  # coordinates would take more memory than its dense values
            values.append(_entries(output, positions, order))
            where = np.stack(np.unravel_index(positions, probed.shape), -1)
            where[:, 0] += start
            coordinates.append(where)
    except _NotProbed:
        return None, False
    where = np.concatenate(coordinates)
    listed = np.concatenate([where[:, 1:], np.stack(np.unravel_index(where[:, 0], columns.sizes), -1)], 1)
    return _coordinates_matrix(listed, concat(values, 'entries') if len(values) > 1 else values[0], rows, columns,
                               x._dense().backend), False


def _coordinates_matrix(listed: np.ndarray, values: Tensor, rows: Shape, columns: Shape, backend) -> SparseTensor:
    """A sparse matrix of the coordinates `listed` (one row per entry: the row's, then the column's coordinates)."""
    indices = wrap(listed, instance('entries'), channel(index=(*rows.names, *columns.as_dual().names)))
    return make_sparse(to_backend(indices, backend), values, merge_shapes(rows, columns.as_dual()), unique=True)


# coordinates (from either end) of the columns probed alone, with the middle one, to learn the reach: first the lower
# end only (a column wrapping round a periodic boundary shows it there), then, where the reach they show fails the
# check, both ends and the columns next to them, which may reach farther (one-sided stencils)
_SAMPLED = ((0,), (0, 1, 2, -3, -2, -1))


def _colored_columns(f, given: dict, name: str, x: Tensor, origin: Tensor, dtype: DType) -> tuple | None:
    """The matrix of an `f` whose output has the dims of its input and whose columns reach only nearby rows (a
    stencil on a grid), from a few probes instead of one per element; None where it cannot be shown exact.

    The columns at the lower end and in the middle of every dim are probed alone, which gives the reach `w` along each
    dim (how far a column's nonzero rows lie from it, periodic boundaries counted the short way round). Columns
    `2 w + 1` apart along every dim share a colour (along a dim where a probed column reached across the boundary,
    the last few columns get colours of their own, so that colours stay apart across it), and one probe per colour,
    the sum of its basis vectors, gives each row's entry to the one column of that colour in reach. That rests on
    the reach holding for every column, which a second probe per colour checks: its basis vectors weighted by random
    factors must give each row the same value times its column's factor. Where the check fails, the columns at and
    next to both ends are probed too (`_SAMPLED`) and the colouring tried once more; a nonzero row with no column of its
    colour in reach, or a failed check then, gives None (each column is then probed alone).

    Returns the matrix and whether `f` minus `origin` equals it on a random input without batch dims (as
    `_represents` checks), which goes along with the coloured probes.
    """
    columns, rows = x.shape.non_batch, origin.shape
    if set(rows.names) != set(columns.names) or any(rows.get_size(n) != columns.get_size(n) for n in columns.names):
        return None
    tried = []
    for sampled in _SAMPLED:
        axes = [sorted({c % n for c in sampled if -n <= c < n} | {n // 2}) for n in columns.sizes]
        if axes in tried or math.prod(len(a) for a in axes) > 1024:
            continue  # the same columns as before (a small grid), or too many
        tried.append(axes)
        found = _colored_with(f, given, name, x, origin, dtype, axes)
        if found is not None:
            return found
    return None


def _colored_with(f, given: dict, name: str, x: Tensor, origin: Tensor, dtype: DType, axes: list) -> tuple | None:
    """`_colored_columns` with the reach learnt from the columns at the coordinates `axes` (one list per dim)."""
    columns = x.shape.non_batch
    sizes = columns.sizes
    sample = np.ravel_multi_index(np.stack(np.meshgrid(*axes, indexing='ij'), 0).reshape(len(sizes), -1), sizes)

    def basis(start: int, stop: int) -> np.ndarray:
        vectors = np.zeros((stop - start, columns.volume))
        vectors[np.arange(stop - start), sample[start:stop]] = 1
        return vectors
    reach = np.zeros(len(sizes), np.int64)
    periodic = np.zeros(len(sizes), bool)  # whether a sampled column reached rows across the boundary
    for start, output in _probed(f, given, name, x, origin, dtype, basis, len(sample)):
        found = np.nonzero(output.numpy([_COLUMN, *columns.names]))
        column = np.unravel_index(sample[start + found[0]], sizes)
        for d, n in enumerate(sizes):
            distance = np.abs(found[1 + d] - column[d])
            short = np.minimum(distance, n - distance)
            reach[d] = max(reach[d], int(np.max(short, initial=0)))
            periodic[d] |= bool(np.any(short < distance))
    spacing = 2 * reach + 1
    # along a periodic dim the last few columns get colours of their own, so that colours stay apart across the
    # boundary; along the others the colours repeat every 2 w + 1 columns (9 probes for a 5-point stencil, not 25)
    repeats = [n // p if wraps else 0 for n, p, wraps in zip(sizes, spacing, periodic, strict=True)]
    colors = [p + n - r * p if r >= 2 else (n if wraps else min(n, p))
              for n, p, r, wraps in zip(sizes, spacing, repeats, periodic, strict=True)]
    if math.prod(colors) * 4 > columns.volume or math.prod(colors) * columns.volume > 8 * _PROBED_VALUES:
        return None  # no fewer probes, or their outputs together would take more memory than probing in batches

    def color(d: int, c: np.ndarray) -> np.ndarray:
        if not periodic[d]:
            return c % spacing[d]
        if repeats[d] < 2:
            return c
        return np.where(c < repeats[d] * spacing[d], c % spacing[d], spacing[d] + c - repeats[d] * spacing[d])
    coordinates = np.unravel_index(np.arange(columns.volume), sizes)
    flat_color = np.ravel_multi_index(tuple(color(d, c) for d, c in enumerate(coordinates)), colors)
    factors = np.random.default_rng(0).integers(256, 512, columns.volume) / 256  # exact in every float type

    count = math.prod(colors)
    random = cast(random_normal(columns), dtype).numpy(columns.names).reshape(-1)  # the last probe
    every = np.arange(columns.volume)

    def colored(start: int, stop: int) -> np.ndarray:
        # each column is in one plain probe (its colour) and one weighted probe (count further): set those entries
        vectors = np.zeros((stop - start, columns.volume), random.dtype)
        for first, weight in ((0, 1), (count, factors)):
            probe = flat_color + first - start
            inside = (probe >= 0) & (probe < stop - start)
            vectors[probe[inside], every[inside]] = weight if np.isscalar(weight) else weight[inside]
        if start <= 2 * count < stop:
            vectors[2 * count - start] = random
        return vectors
    outputs = list(_probed(f, given, name, x, origin, dtype, colored, 2 * count + 1))
    order = [_COLUMN, *columns.names]
    probed = np.concatenate([o.numpy(order) for _, o in outputs])
    plain, weighted, response = probed[:count], probed[count:2 * count], probed[2 * count].reshape(-1)
    # the column of each colour in reach of each row, per dim (-1: none)
    owner = [np.full((n, k), -1) for n, k in zip(sizes, colors, strict=True)]
    for d, n in enumerate(sizes):
        for offset in range(-int(reach[d]), int(reach[d]) + 1):
            position, row = np.arange(n) + offset, np.arange(n)
            if periodic[d]:  # also across the boundary: colours stay apart there too
                position %= n
            else:
                row, position = row[(position >= 0) & (position < n)], position[(position >= 0) & (position < n)]
            owner[d][row, color(d, position)] = position
    # the nonzero entries by their flat positions (1-d indexing is several times faster than by coordinates)
    positions = np.flatnonzero(plain)
    found = np.unravel_index(positions, plain.shape)
    color_index = np.unravel_index(found[0], colors)
    column = [owner[d][found[1 + d], color_index[d]] for d in range(len(sizes))]
    if any(np.any(c < 0) for c in column):
        return None
    flat_column = np.ravel_multi_index(tuple(column), sizes)
    tolerance = 100 * np.finfo(plain.dtype if plain.dtype.kind == 'f' else np.float64).eps * \
        (np.max(np.abs(weighted), initial=0) + 2 * np.max(np.abs(plain), initial=0))
    expected = np.zeros(weighted.size, weighted.dtype)
    expected[positions] = plain.reshape(-1)[positions] * factors[flat_column]
    if np.max(np.abs(weighted.reshape(-1) - expected), initial=0) > tolerance:
        return None
    volume = columns.volume  # the values per probe
    bounds = np.searchsorted(positions, [[start * volume, (start + o.shape.get_size(_COLUMN)) * volume]
                                         for start, o in outputs])
    values = [_entries(o, positions[low:high] - start * volume, order)
              for (start, o), (low, high) in zip(outputs, bounds, strict=True) if start < count]
    listed = np.stack([*found[1:], *column], -1)
    rows = origin.shape.only(columns.names, reorder=True)
    terms = plain.reshape(-1)[positions] * random[flat_column]  # the matrix times the random probe, summed per row
    product = np.bincount(positions % volume, terms.real, volume)
    if np.iscomplexobj(terms):
        product = product + 1j * np.bincount(positions % volume, terms.imag, volume)
    represents = bool(np.all(np.abs(product - response) <= _ABS_TOLERANCE + _REL_TOLERANCE * np.abs(response)))
    return _coordinates_matrix(listed, concat(values, 'entries') if len(values) > 1 else values[0], rows, columns,
                               x._dense().backend), represents


def _dense_columns(f, given: dict, name: str, x: Tensor, origin: Tensor, bias: Tensor, dtype: DType) -> Tensor:
    """The matrix of `f` from one call on the whole identity, or from one call per basis vector where that one
    fails or gives a matrix that fails the check on a random input."""
    columns = x.shape.non_batch
    numbering = batch(**{f'{_COLUMN}{dim}': columns.get_size(dim) for dim in columns.names})
    identity = None
    for dim, column in zip(columns.names, numbering.names, strict=True):
        one = range_tensor(columns.only(dim)) == range_tensor(numbering.only(column))
        identity = one if identity is None else identity & one
    basis = cast(identity if identity is not None else True, dtype)
    matrix = _all_columns(f, given, name, basis, origin, numbering, columns)
    if columns and (matrix is None or not _represents(matrix, bias, f, given, name, x, dtype)):
        matrix = stack([f(**{**given, name: vector}) - origin for vector in unstack(basis, numbering)],
                       columns.as_dual())
    return matrix


def _all_columns(f, given: dict, name: str, basis: Tensor, bias: Tensor, numbering: Shape, columns: Shape):
    """The matrix from one call of `f` on all basis vectors, or None where `f` cannot take the numbering dims
    (it builds a tensor from the input's whole shape, as `math.range(x.shape)` in phiml's Matrices notebook):
    then each basis vector goes alone, and an error of `f` itself shows there."""
    if not columns:
        return f(**{**given, name: basis}) - bias
    try:
        return rename_dims(f(**{**given, name: basis}) - bias, numbering, columns.as_dual())
    except (ValueError, TypeError, KeyError):
        return None


def _represents(matrix: Tensor, bias: Tensor, f, given: dict, name: str, x: Tensor, dtype: DType) -> bool:
    """Whether `matrix @ v + bias` equals `f(v)` for a random `v` shaped like `x`."""
    probe = cast(random_normal(x.shape), dtype)
    try:
        return _close(matrix @ probe + bias, f(**{**given, name: probe}))
    except (ValueError, TypeError):  # the shapes do not even match: the matrix lacks or mixes dims
        return False


def _close(found: Tensor, expected: Tensor) -> bool:
    return set(found.shape.names) == set(expected.shape.names) and found.shape.is_compatible(expected.shape) \
        and always_close(found, expected, rel_tolerance=_REL_TOLERANCE, abs_tolerance=_ABS_TOLERANCE)
