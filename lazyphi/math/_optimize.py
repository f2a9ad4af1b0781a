"""Solving linear systems `f(x) = y`: `solve_linear`, configured by a `Solve`, reported by a `SolveInfo`.

The iterative methods (conjugate gradient, BiCGStab) step on natives with the backend's operations: vectors laid
out (batch entries, values of one system), the rest (batch entries, 1), so that they broadcast; only the operator
sees tensors. The backend's `while_loop` runs them on NumPy, PyTorch, JAX and TensorFlow (JAX and TensorFlow
inside their compiled loops where the values are traced); a sparse matrix whose values, like the vectors', are at
hand on the CPU is applied by SciPy, and the loop then steps on NumPy arrays whatever the tensors' library
(`_host_product`).
Each batch entry stops on its own: an entry that converged or diverged keeps its state while the others go on.
The direct method lays the matrix out as one per batch entry (`reshaped_native`) and hands it to the backend's
`matrix_solve_least_squares`, except a sparse matrix at hand shared by all entries, which SciPy factors on the
host. Gradients flow through a solve by implicit differentiation: the backward pass solves the transposed system
(for a function, the same one, assumed symmetric) with `Solve.gradient_solve`.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable

import numpy as np

from ..backend import (
    DIVERGENCE_GROWTH,
    NUMPY,
    DType,
    NoBackendFound,
    adaptive_cg_step,
    bicgstab_step,
    cg_step,
    choose_backend,
    convert,
)
from ._autodiff import compiling, custom_gradient, when_available
from ._conversion import reshaped_native
from ._creation import reshaped_tensor, wrap, zeros_like
from ._dims import batch, channel, dual, instance, merge_shapes, non_batch
from ._gather_scatter import gather
from ._layout import layout
from ._linalg import affine_argument, matrix_from_function
from ._linear_function import LinearFunction
from ._magic_ops import concat, expand, pack_dims, rename_dims, stack, unpack_dim
from ._natives import common_backend
from ._ops import cast, is_finite, maximum, sqrt, to_float, to_int32
from ._reduce import any_, max_, sum_
from ._scipy_linear import NEEDS_MATRIX, SCIPY_ITERATIVE, SparseDirect, host_matrix, scipy_solve, status_message
from ._shape import EMPTY_SHAPE, Shape
from ._solves import Solve, SolveInfo, _copy, _trajectory, record, recording
from ._sparse import SparseTensor, stored_indices, stored_values, tensor_like
from ._tensor import Dense, Tensor, as_tensor
from ._tree import leaves as tree_leaves
from ._tree import tree_map

_ITERATIVE = ('auto', 'CG', 'CG-adaptive', 'biCG-stab', 'biCG-stab(1)')
_DIRECT = ('direct', 'scipy-direct')
_SWAP = '_solve_transposed_'  # prefix of the temporary names while the rows and columns of a matrix are swapped


def solve_linear(f, y, solve: Solve, *f_args, grad_for_f=False, f_kwargs: dict | None = None, **f_kwargs_):
    """The solution `x` of the linear system `f(x) = y`.

    'direct' and 'scipy-direct' solve each batch entry exactly (least squares where the matrix is singular). A
    dense matrix, or a function's matrix, is solved by the backend's dense least-squares solver, on its device. A
    sparse matrix whose indices and values are at hand (not traced inside `jit_compile`) and that has no batch dims
    is never laid out densely: SciPy factors it once on the host (`scipy.sparse.linalg.splu`; a singular matrix's
    null vector projected out of the solution, or `lsqr` per entry where it has more than one or is not square) and
    solves all entries with it, in float64; the solution has the backend and dtype of `x0`.

    The 'scipy-*' methods run `scipy.sparse.linalg` on the host, one system per batch entry, in float64 (a matrix
    as is, a sparse one at hand without batch dims as one `scipy.sparse` matrix for all entries, its 'ilu' factors
    computed once; a function through a `LinearOperator` that calls it; for 'scipy-biCG', 'scipy-QMR', 'scipy-lsqr',
    with `preconditioner='ilu'` and inside `jit_compile` through its dense matrix from `matrix_from_function`). They
    take `rel_tol` and `abs_tol` as SciPy's `rtol` and `atol` ('scipy-lsqr': `rel_tol` as its `atol` and `btol`,
    `abs_tol` unused) and count the iterations by SciPy's callback; the solution has the backend and dtype of `x0`.
    Inside `jit_compile` SciPy runs in a host callback of the compiled program (the backend's `numpy_call`), and
    `NotConverged` / `Diverged` are raised once the compiled function has returned.

    Args:
        f: a function linear (or affine: it is solved by `f(x) - f(0)`) in its first argument (a `Tensor`;
            `jit_compile_linear` functions included), called as `f(x, *f_args, **f_kwargs)`, acting on the
            non-batch dims that `y` and `x0` share, or a matrix: a tensor whose dual dims `~d` are the dims `d` of `x`
            and whose other non-batch dims are those of `y`, applied as `f @ x`. Where the rows are named apart
            from the columns, they pair with them in shape order.
        y: the right-hand side, a `Tensor`; its batch dims (and those of `solve.x0` and of a matrix) list
            independent systems, each converging on its own, as do non-batch dims of `y` or `x0` that the
            system lacks (see `f`). Native arrays (or Python numbers) `y` and `solve.x0` give a native solution:
            with a native matrix `(*batch, N, N)` they are `(*batch, N)`, or `(*batch, N, K)` for `K`
            right-hand sides; a function receives them as tensors with the dims `batch0, ...` and `vector`.
            Trees of tensors (dataclasses, tuples, dicts) `y` and `solve.x0` give a tree like `x0`: the function
            receives a tree like `x0` and returns one whose leaves have the non-batch shapes of `y`'s.
        solve: the method, tolerances and initial guess `x0` (required).
        *f_args: further positional arguments of `f` (one tuple is spread out), not solved for.
        grad_for_f: also compute the gradient with respect to the matrix `f`, or with respect to the tensors among
            a function's further arguments: the function's matrix is then built (`matrix_from_function`)
            and solved with.
        f_kwargs: keyword arguments of `f`, not solved for; `**f_kwargs_` adds to them.

    Returns:
        `x`, shaped like `solve.x0` with the batch dims of the systems.

    Raises:
        NotConverged: a batch entry did not reach the tolerance within `solve.max_iterations` (not while a compiler
            traces lazyphi's own methods; for the 'scipy-*' methods after the `jit_compile`d function returns).
        Diverged: the residual of a batch entry became non-finite or grew too large.
        ValueError: no `x0`, a method or a feature lazyphi does not offer, or a matrix without dual dims.
    """
    if not isinstance(solve, Solve):
        raise TypeError(f'solve_linear(): solve must be a Solve, got {solve!r}')
    if solve.x0 is None:
        raise ValueError('solve_linear(): the Solve has no initial guess; pass Solve(..., x0=initial_guess)')
    if solve.method not in _ITERATIVE + _DIRECT + tuple(SCIPY_ITERATIVE):
        raise ValueError(f'solve_linear(): method {solve.method!r} is not offered; lazyphi offers '
                         f'{", ".join(_ITERATIVE + _DIRECT + tuple(SCIPY_ITERATIVE))}')
    if solve.preconditioner is not None and solve.method not in SCIPY_ITERATIVE:
        raise ValueError(f'solve_linear(): preconditioner={solve.preconditioner!r} is taken by the \'scipy-*\' '
                         f'iterative methods only ({", ".join(SCIPY_ITERATIVE)}), not by {solve.method!r}; pass '
                         f'preconditioner=None or one of those methods')
    f_kwargs = {**(f_kwargs or {}), **f_kwargs_}
    f_args = f_args[0] if len(f_args) == 1 and isinstance(f_args[0], tuple) else f_args
    if not isinstance(y, Tensor) and not isinstance(solve.x0, Tensor) and _is_native(y) and _is_native(solve.x0):
        return _solve_natives(f, y, solve, f_args, grad_for_f, f_kwargs)
    if not isinstance(y, Tensor) or not isinstance(solve.x0, Tensor):
        if isinstance(y, Tensor) or isinstance(solve.x0, Tensor) or _is_native(y) or _is_native(solve.x0) or \
                not (tree_leaves(y) and tree_leaves(solve.x0)):
            raise TypeError(f'solve_linear(): y and Solve.x0 must both be Tensors, both native arrays or numbers, or '
                            f'both trees of Tensors, got {_type_name(y)} and {_type_name(solve.x0)}')
        return _solve_trees(f, y, solve, f_args, grad_for_f, f_kwargs)
    if isinstance(f, Tensor):
        if not f.shape.dual:
            raise ValueError(f'solve_linear(): a matrix needs dual dims naming its columns (~x for the dim x of the '
                             f'solution), got {f.shape}')
        matrix, y = _rows_named_as_columns(f, y)
    elif callable(f):
        matrix = None
    else:
        raise TypeError(f'solve_linear(): f must be a linear function or a matrix Tensor, got {type(f).__name__}')
    if (y.dtype.kind is complex) or (solve.x0.dtype.kind is complex):
        raise ValueError('solve_linear(): complex systems are not offered; solve real and imaginary parts apart')
    # a function's matrix (sparse where its values are at hand, as phiml's) for the direct methods, and to
    # differentiate by the function's arguments through its entries; a LinearFunction keeps it for the next solve
    linear = _linear_in_x0(f, solve.x0, f_args, f_kwargs)
    if matrix is None and (solve.method in _DIRECT or solve.method in NEEDS_MATRIX or solve.preconditioner is not None
                           or grad_for_f or (solve.method in SCIPY_ITERATIVE and not _on_host(y, solve.x0))
                           or (linear and solve.method in _ITERATIVE and _on_cpu(y, solve.x0, f_args, f_kwargs))):
        if linear and not grad_for_f:  # a matrix holding derivatives is built anew for each solve
            matrix, bias = f.sparse_matrix_and_bias(solve.x0, *f_args, **f_kwargs)
        else:
            matrix, bias = matrix_from_function(_operator(None, f_args, f, f_kwargs), solve.x0)
        y = _named_as_rows(matrix, y) - bias
    function = None if matrix is not None else f
    known = None
    if solve.method in SCIPY_ITERATIVE and not _on_host(y, solve.x0):
        # traced: SciPy's host callback runs out here and the custom gradient's forward pass hands its solution on,
        # so that the convergence check deferred to after the compiled call holds no tracer of JAX's custom_vjp
        known = _solved(y, matrix, f_args, solve, function, f_kwargs)
    # everything a compiler or autodiff may trace is an argument, not a closure (JAX rejects leaked tracers): the
    # initial guess too (x0=0 * y is traced where y is), apart from the rest of the Solve
    solve_function = custom_gradient(_forward, _backward, auxiliary_args='solve,function,f_kwargs,grad_for_f')
    return solve_function(y, matrix, f_args, _copy(solve, x0=None), function, f_kwargs, grad_for_f, known, solve.x0)


def _linear_in_x0(f, x0: Tensor, f_args: tuple, f_kwargs: dict) -> bool:
    """Whether `f` is a `LinearFunction` affine in its first parameter alone, which takes `x0`: its matrix at these
    arguments is the one it keeps (`LinearFunction.sparse_matrix_and_bias`)."""
    if not isinstance(f, LinearFunction):
        return False
    try:
        return affine_argument(f.f, (x0, *f_args), f_kwargs, f.matrix_auxiliary_args)[1] == \
            next(iter(inspect.signature(f.f).parameters))
    except (TypeError, ValueError):  # affine in another argument, or in several: called as a function
        return False


def _on_cpu(y: Tensor, x0: Tensor, f_args: tuple, f_kwargs: dict) -> bool:
    """Whether lazyphi's iterative methods step with a function's matrix rather than calling it: where every tensor
    is at hand (nothing being compiled) on the CPU, as phiml solves a `LinearFunction` with its matrix, so that the
    loop steps on the host with SciPy's compiled sparse product (`_host_product`). The 5-point Laplace operator on a
    64x64 grid, solved by CG: 58 ms calling the function at each step, 14 ms on its kept matrix (built once in
    8 ms). Elsewhere (a GPU, inside `jit_compile`) the function is called, compiled, at each step."""
    return bool(non_batch(x0)) and _at_hand_on_cpu([y, x0, *tree_leaves(f_args), *tree_leaves(f_kwargs)])


def _at_hand_on_cpu(tensors: list) -> bool:
    """Whether every tensor's values are at hand on the CPU (NumPy's, or another library's CPU arrays, nothing
    being compiled), where NumPy reads them without copying."""
    if compiling():
        return False
    return all(t.available and (t.backend is NUMPY or t.device.device_type == 'CPU') for t in tensors)


def _type_name(value) -> str:
    return f'{type(value).__module__}.{type(value).__qualname__}'


def _axes(value) -> tuple:
    return tuple(int(n) for n in value.shape)


def _is_native(value) -> bool:
    """Whether `value` is an array of some backend or a Python number (not a bool, list or tree)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    try:
        return choose_backend(value).is_tensor(value, True)
    except NoBackendFound:
        return False


_ENTRIES = '_solve_entries'  # the instance dim along which the values of trees are listed for a solve


def _solve_trees(f, y, solve: Solve, f_args: tuple, grad_for_f: bool, f_kwargs: dict):
    """`solve_linear` of trees of Tensors (dataclasses, tuples, dicts, ...), answered with a tree shaped like `x0`.

    The non-batch values of all leaves of `x0` are listed one after the other along one instance dim, and so are
    those of `y`; the function receives a tree like `x0` and returns one whose leaves have the non-batch shapes of
    `y`'s (in the same order), which is listed the same way.
    """
    if isinstance(f, Tensor) or not callable(f):
        raise TypeError(f'solve_linear(): trees of Tensors are solved for a linear function, got {_type_name(f)}')
    x_leaves, y_leaves = tree_leaves(solve.x0), tree_leaves(y)
    batches = merge_shapes(*[t.shape.batch for t in x_leaves + y_leaves])

    def listed(leaves: list) -> Tensor:
        parts = [pack_dims(expand(t, batches), t.shape.non_batch, instance(_ENTRIES)) for t in leaves]
        return parts[0] if len(parts) == 1 else concat(parts, _ENTRIES)

    def tree_of(values: Tensor, templates: list, tree):
        parts, start = [], 0
        for template in templates:
            size = template.shape.non_batch.volume
            part = values[{_ENTRIES: slice(start, start + size)}]
            parts.append(unpack_dim(part, _ENTRIES, template.shape.non_batch))
            start += size
        found = iter(parts)
        return tree_map(lambda _: next(found), tree)

    def listed_function(values: Tensor, *args, **kwargs) -> Tensor:
        output = f(tree_of(values, x_leaves, solve.x0), *args, **kwargs)
        out_leaves = tree_leaves(output)
        if [t.shape.non_batch for t in out_leaves] != [t.shape.non_batch for t in y_leaves]:
            raise ValueError(f'solve_linear(): f returned a tree of the non-batch shapes '
                             f'{[t.shape.non_batch for t in out_leaves]}, but y has '
                             f'{[t.shape.non_batch for t in y_leaves]}')
        return listed(out_leaves)
    x = solve_linear(listed_function, listed(y_leaves), _copy(solve, x0=listed(x_leaves)), *f_args,
                     grad_for_f=grad_for_f, f_kwargs=f_kwargs)
    return tree_of(x, x_leaves, solve.x0)


def _solve_natives(f, y, solve: Solve, f_args: tuple, grad_for_f: bool, f_kwargs: dict):
    """`solve_linear` of native arrays, answered with a native array.

    A matrix has the axes `(*batch, N, N)`; `y` and `x0` have `(*batch, N)`, or `(*batch, N, K)` for `K`
    right-hand sides at once. For a function, `y` and `x0` have `(*batch, N)` (or no axes) and the function
    receives tensors with the dims `batch0, batch1, ...` and the channel dim `vector`.
    """
    backend = choose_backend(y, solve.x0)
    y_rank, x_rank = backend.ndims(y), backend.ndims(solve.x0)
    if y_rank != x_rank:
        raise ValueError(f'solve_linear(): native y and x0 need the same number of axes, got shapes '
                         f'{_axes(y)} and {_axes(solve.x0)}')
    if isinstance(f, Tensor):
        raise TypeError('solve_linear(): a matrix Tensor needs y and Solve.x0 as Tensors, got native arrays')
    if not _is_native(f):
        if not callable(f):
            raise TypeError(f'solve_linear(): f must be a linear function or a matrix, got {_type_name(f)}')
        dims = [batch(f'batch{i}') for i in range(y_rank - 1)] + ([channel('vector')] if y_rank else [])
        extra = ()
        matrix = f
    else:
        matrix_rank = choose_backend(f).ndims(f)
        if matrix_rank < 2 or y_rank not in (matrix_rank - 1, matrix_rank):
            raise ValueError(f'solve_linear(): a native matrix has the axes (*batch, N, N) and y, x0 the axes '
                             f'(*batch, N) or (*batch, N, K); got shapes {_axes(f)} and '
                             f'{_axes(y)}')
        batches = [batch(f'batch{i}') for i in range(matrix_rank - 2)]
        matrix = wrap(f, *batches, channel('vector'), dual('vector'))
        extra = (batch('extra_batch'),) if y_rank == matrix_rank else ()
        dims = [*batches, channel('vector')]
    y_tensor, x0_tensor = wrap(y, *dims, *extra), wrap(solve.x0, *dims, *extra)
    x = solve_linear(matrix, y_tensor, _copy(solve, x0=x0_tensor), *f_args, grad_for_f=grad_for_f,
                     f_kwargs=f_kwargs)
    return x.native(x0_tensor.shape)


def _rows_named_as_columns(matrix: Tensor, y: Tensor) -> tuple:
    """`matrix` and `y` with the matrix's row dims renamed to its columns' names where the two differ.

    A matrix may map the dims `x` of the solution to other dims `b` of `y` (`~x, b`); the iterative methods
    need residuals and solutions in one space, so the rows `b` take the names `x` (pairwise in shape order, as
    phiml pairs them when it lays the matrix out). The solution keeps the dims of `x0`.
    """
    columns = matrix.shape.dual
    column_names = [n[1:] for n in columns.names]
    rows = matrix.shape.non_batch.without(columns.names)
    own_rows = [n for n in rows.names if n not in column_names]
    own_columns = [n for n in column_names if n not in rows.names]
    if not own_rows and not own_columns:
        return matrix, y
    if len(own_rows) != len(own_columns) or \
            [rows.get_size(n) for n in own_rows] != [columns.get_size('~' + n) for n in own_columns]:
        raise ValueError(f'solve_linear(): the matrix {matrix.shape} has rows {own_rows} that do not pair up with '
                         f'its columns {["~" + n for n in own_columns]}: give it as many row dims as column dims '
                         f'of the same sizes, or name the rows like the columns')
    return rename_dims(matrix, own_rows, own_columns), rename_dims(y, own_rows, own_columns)


def _named_as_rows(matrix: Tensor, y: Tensor) -> Tensor:
    """`y`, checked against the rows of a function's `matrix` (what the function returns).

    Dims of `y` that neither the rows nor the columns have list independent systems (as batch dims do); a dim of
    the columns that `y` has but the function does not return is refused.
    """
    rows = matrix.shape.non_batch.without(matrix.shape.dual.names)
    columns = [n[1:] for n in matrix.shape.dual.names]
    stray = [n for n in non_batch(y).names if n not in rows and n in columns]
    if stray:
        raise ValueError(f'solve_linear(): the function returns the dims {rows} but y has {non_batch(y)}: the dims '
                         f'{stray} of x are not among its outputs; lazyphi solves functions whose output has the '
                         f'non-batch dims of y')
    return y


def _operator(matrix: Tensor | None, f_args: tuple, function: Callable | None, f_kwargs: dict,
              takes: Shape | None = None) -> Callable:
    """`x -> matrix @ x`, or `x -> function(x, ...)`.

    Given the dims the function `takes` (those of `x0`), an `x` with further non-batch dims (independent systems
    listed by dims of `y` alone) is passed whole first; where the function fails on it (`x * (2, 1)` is ambiguous
    with two channel dims), it is called on each slice along those dims from then on, as phiml applies the
    function's matrix to each.
    """
    if matrix is not None:
        return lambda x: matrix @ x
    sliced = []  # holds an entry once the function failed on the dims it does not take

    def apply(x: Tensor) -> Tensor:
        extra = non_batch(x).without(takes.names) if takes is not None else EMPTY_SHAPE
        if extra and not sliced:
            try:
                return function(x, *f_args, **f_kwargs)
            except (ValueError, TypeError, KeyError):  # e.g. IncompatibleShapes, DimNotFound
                sliced.append(True)
        if extra:
            dim = extra.names[0]
            return stack([apply(x[{dim: i}]) for i in range(x.shape.get_size(dim))], x.shape.only(dim))
        return function(x, *f_args, **f_kwargs)
    return apply


def _linear_part(operator: Callable, y: Tensor, x0: Tensor) -> tuple:
    """The linear part `x -> f(x) - f(0)` of an affine function `f`, the right-hand side `y - f(0)`, and the shape of
    what `f` returns for `x0`.

    A function such as a Laplacian padded with a constant other than zero is affine; the iterative methods step
    along directions and need its linear part (phiml drops the constants of extrapolations inside its solves
    instead, which covers that case only). `f(0)` is evaluated once and not counted in the function evaluations;
    where its values show it is zero, `f` and `y` stay as they are.
    """
    bias = operator(zeros_like(to_float(x0)))
    if not isinstance(bias, Tensor):
        raise TypeError(f'solve_linear(): f must return a Tensor, got {_type_name(bias)}')
    if bias.available and not bool(any_(bias != 0, bias.shape)):
        return operator, y, bias.shape
    return (lambda x: operator(x) - bias), y - bias, bias.shape


def _forward(y: Tensor, matrix: Tensor | None, f_args: tuple, solve: Solve, function: Callable | None,
             f_kwargs: dict, grad_for_f: bool, known: Tensor | None, x0: Tensor) -> Tensor:
    """The solution: `known` where it was found already (outside the custom gradient), else solved for now from
    `x0` (the initial guess, apart from the rest of `solve`)."""
    return known if known is not None else _solved(y, matrix, f_args, _copy(solve, x0=x0), function, f_kwargs)


def _solved(y: Tensor, matrix: Tensor | None, f_args: tuple, solve: Solve, function: Callable | None,
            f_kwargs: dict) -> Tensor:
    """Solves, records the `SolveInfo` on the tapes and raises where the solve failed."""
    solve = solve.with_defaults('solve')
    if solve.preprocess_y is not None:
        y = solve.preprocess_y(y, *solve.preprocess_y_args)
    operator = _operator(matrix, f_args, function, f_kwargs, solve.x0.shape)
    start = time.perf_counter()
    returns = None  # for a function, the shape of what it returns
    if matrix is None:
        operator, y, returns = _linear_part(operator, y, solve.x0)
    if solve.method not in _ITERATIVE and recording(solve):
        raise ValueError(f'solve_linear(): method {solve.method!r} records no trajectory in lazyphi; use '
                         f'SolveTape(record_trajectories=False) or one of {", ".join(_ITERATIVE)}')
    if solve.method in _DIRECT:
        result = _direct(matrix, y, solve)
    elif solve.method in SCIPY_ITERATIVE:
        system = _system_dims(matrix, y, solve.x0, returns)
        independent = (non_batch(y) & non_batch(solve.x0)).without(system.names)
        if independent:  # SciPy solves them as batch entries, one system each; x gets the dims' types back
            as_batch = independent.as_type(batch)
            y = expand(_retyped(y, independent, as_batch), system)  # y may reach the system's dims by broadcasting
            result = _scipy_iterative(matrix, operator, y, _copy(solve, x0=_retyped(solve.x0, independent, as_batch)))
            result.solve, result.x = solve, _retyped(result.x, as_batch, independent)
        else:
            result = _scipy_iterative(matrix, operator, y, solve)
    else:
        with np.errstate(all='ignore'):  # a diverging solve meets non-finite values; the result reports them
            x, result = _iterative(operator, y, solve, _system_dims(matrix, y, solve.x0, returns), matrix)
    if solve.method not in _ITERATIVE:
        x = result.x
    result.solve_time = time.perf_counter() - start
    record(result)
    result.convergence_check(False)
    return x


def _retyped(value: Tensor, old: Shape, new: Shape) -> Tensor:
    """`value` with those of the dims `old` it has replaced by their counterparts in `new` (same order)."""
    names = [n for n in old.names if n in value.shape.names]
    return rename_dims(value, names, new[[old.names.index(n) for n in names]]) if names else value


def _backward(inputs: dict, x: Tensor, dx: Tensor) -> dict:
    """Implicit differentiation: `dy` solves the transposed system for `dx`; the matrix gets `-dy ⊗ x`."""
    solve, matrix = _copy(inputs['solve'], x0=inputs['x0']), inputs['matrix']
    gradient_solve = solve.gradient_solve
    y = inputs['y']
    if matrix is None:  # a function: taken as symmetric, as phiml does; it takes what the forward x0 has
        if gradient_solve.x0 is None:
            gradient_solve = _copy(gradient_solve, x0=zeros_like(solve.x0 if solve.x0 is not None else y))
        dy = solve_linear(inputs['function'], dx, gradient_solve, *inputs['f_args'], f_kwargs=inputs['f_kwargs'])
        extra = non_batch(dy).without(y.shape.names)
        if extra:  # y reached those dims by broadcasting: its gradient sums over them
            dy = sum_(dy, extra)
    else:
        if gradient_solve.x0 is None:
            gradient_solve = _copy(gradient_solve, x0=zeros_like(y))
        dy = solve_linear(_transposed(matrix, x.shape), dx, gradient_solve)
    result = {'y': dy}
    if inputs['grad_for_f']:
        result['matrix'] = _matrix_gradient(matrix, x, dy)
    return result


def _matrix_gradient(matrix: Tensor, x: Tensor, dy: Tensor) -> Tensor:
    """The gradient by the matrix: `-dy ⊗ x`, summed over the dims the matrix lacks. Of a sparse matrix, at its
    entries only: a sparse tensor with its indices (as phiml differentiates by a sparse matrix's stored values)."""
    if not isinstance(matrix, SparseTensor):
        columns = non_batch(x)
        outer = -rename_dims(x, columns, columns.as_dual()) * dy
        return sum_(outer, outer.shape.without(matrix.shape.names))
    indices = stored_indices(matrix)
    columns = [n for n in indices.shape.get_item_names('index') if n in matrix.shape.dual.names]
    rows = [n for n in indices.shape.get_item_names('index') if n not in columns]
    products = -gather(x, indices[{'index': columns}], dims=[n[1:] for n in columns]) * \
        gather(dy, indices[{'index': rows}], dims=rows)
    return tensor_like(matrix, sum_(products, products.shape.without(matrix.shape.names).without('entries')))


def _transposed(matrix: Tensor, x_shape: Shape) -> Tensor:
    """`matrix` with rows and columns swapped: `~x, y` becomes `~y, x` (through temporary names, as `x` and
    `y` often share theirs); `x_shape` gives the dims `x` their types. Dims of the solution `x` that the matrix lacks
    (independent systems) stay out of it."""
    columns = x_shape.non_batch.only([n[1:] for n in matrix.shape.dual.names])
    rows = matrix.shape.non_batch.without(matrix.shape.dual.names)
    temporary = [f'{_SWAP}{n}' for n in rows.names]
    swapped = rename_dims(matrix, rows.names, temporary)
    swapped = rename_dims(swapped, columns.as_dual(), columns)
    return rename_dims(swapped, temporary, rows.as_dual())


# --- the iterative methods ------------------------------------------------------------------


def _dot(a: Tensor, b: Tensor, dims=non_batch) -> Tensor:
    """The inner product over `dims` (by default the non-batch dims): one value per batch entry."""
    return sum_(a * b, dims)


def _system_dims(matrix: Tensor | None, y: Tensor, x0: Tensor, returns: Shape | None) -> Shape:
    """The dims one system of equations spans: the matrix's columns, or for a function the non-batch dims of `x0`
    that it `returns`. Other non-batch dims of `y` and `x0` list independent systems, like batch dims (as phiml
    treats a `vector` dim of `y` that the matrix lacks, or one `y` has where its function takes `x0` without it)."""
    if matrix is not None:
        names = [n[1:] for n in matrix.shape.dual.names]
        return (non_batch(x0) & non_batch(y)).only(names)
    return non_batch(x0).only(returns.non_batch.names)


def _iterative(operator: Callable, y: Tensor, solve: Solve, system: Shape, matrix: Tensor | None = None) -> tuple:
    """The solution and the `SolveInfo` (with a trajectory where a tape records one) of an iterative method; the
    `operator` applies `matrix` where one is given."""
    y, x0 = to_float(y), to_float(solve.x0)
    given = common_backend([y._dense(), x0._dense()])  # the solution's backend
    product = _host_product(matrix, system, x0.dtype, [y, x0])
    if product is not None:  # the products on the host, also r0's

        def operator(x: Tensor) -> Tensor:
            rest = x.shape.without(system.names)
            image = product(convert(reshaped_native(x, [rest, system]), NUMPY))
            return reshaped_tensor(convert(image, given), [rest, system], convert=False)
    r0 = y - operator(x0)
    independent = (non_batch(y) & non_batch(x0) & non_batch(r0)).without(system.names)
    batches = merge_shapes(batch(y), batch(x0), batch(r0), batch(solve.max_iterations), batch(solve.rel_tol),
                           batch(solve.abs_tol), independent)
    x_shape = r_shape = batches + system  # the independent dims first, as phiml orders its solutions

    def dot(a: Tensor, b: Tensor) -> Tensor:
        return _dot(a, b, system)
    rsq0 = dot(r0, r0)
    # CG is relative to the initial residual, the others to y, as in phiml
    reference = rsq0 if solve.method == 'CG' else dot(y, y)
    tolerance = maximum(solve.rel_tol ** 2 * reference, solve.abs_tol ** 2)
    zero = expand(to_int32(wrap(0)), batches)
    common = {'iterations': zero, 'evaluations': zero + 1}
    if solve.method == 'biCG-stab' or solve.method == 'biCG-stab(1)':
        state, step, name = _bicgstab_start(x0, r0, dot), bicgstab_step, 'biCG-stab'
    elif solve.method == 'CG':
        state, step, name = _cg_start(x0, r0, rsq0), cg_step, 'CG'
    else:  # 'auto', 'CG-adaptive'
        state, step, name = _adaptive_cg_start(operator, x0, r0, rsq0), adaptive_cg_step, 'CG-adaptive'
        common['evaluations'] = zero + 2
    shapes = {**{k: batches for k in common}, **{k: s(x_shape, r_shape, batches) for k, s in state[1].items()}}
    state = {n: expand(as_tensor(v), shapes[n]) for n, v in {**common, **state[0]}.items()}
    # the loop runs on natives: vectors laid out (entries, values of one system), the rest (entries, 1), so that
    # they broadcast; a step costs the backend's operations and the operator, not lazyphi's for each of them
    per_entry = [batches, EMPTY_SHAPE]
    groups = {n: [batches, system] if shapes[n] != batches else per_entry for n in state}
    vector_dtype = state['x'].dtype
    b = NUMPY if product is not None else given  # the backend the loop steps on

    def native(t: Tensor, group: list):
        return convert(given.stop_gradient(convert(reshaped_native(t, group), given)), b)  # no copy on the CPU
    natives = {n: native(t, groups[n]) for n, t in state.items()}
    limits, bound = (native(expand(t, batches), per_entry) for t in (
        cast(solve.max_iterations, DType(int, 32)), cast(tolerance, state['rsq'].dtype)))
    initial = natives['rsq']
    unpacked, packed = batches + system, (batches.volume, system.volume)

    def apply(vector):
        if product is not None:
            image = product(vector)
            return image if image.dtype == vector.dtype else image.astype(vector.dtype)
        image = operator(Dense(b.reshape(vector, unpacked.sizes), unpacked, b))
        image = b.reshape(convert(expand(image, batches).native(unpacked.names), b), packed)
        return image if b.dtype(image) == vector_dtype else b.cast(image, vector_dtype)

    def inner(u, v):
        return b.sum(u * v, -1, True)

    def check(iterations, rsq) -> dict:
        converged = rsq <= bound
        diverged = ~b.isfinite(rsq) | ((b.divide_no_nan(rsq, initial) > DIVERGENCE_GROWTH) & (iterations >= 8))
        return {'continue': ~converged & ~diverged & (iterations < limits), 'converged': converged,
                'diverged': diverged}
    natives.update(check(natives['iterations'], natives['rsq']))
    names = ['continue', *(n for n in natives if n != 'continue')]
    dtypes = {n: b.dtype(v) for n, v in natives.items()}
    groups.update({n: per_entry for n in ('continue', 'converged', 'diverged')})

    def body(*values) -> tuple:
        s = dict(zip(names, values, strict=True))
        active = s['continue']
        new = step(apply, s, inner, b.divide_no_nan)
        count = b.cast(active, b.dtype(s['iterations']))
        iterations, evaluations = s['iterations'] + count, s['evaluations'] + count * new.pop('evaluations')
        flags = check(iterations, new['rsq'])
        new.update(flags)
        if b is not NUMPY or not active.all():  # the systems that stopped keep their state (NumPy's values at hand)
            new = {k: b.where(active, v, s[k]) if k != 'continue' else v for k, v in new.items()}
        new.update({'iterations': iterations, 'evaluations': evaluations})
        return tuple(new[n] if b.dtype(new[n]) == dtypes[n] else b.cast(new[n], dtypes[n]) for n in names)

    def tensors(values) -> dict:
        return {n: reshaped_tensor(convert(v, given), groups[n], convert=False)
                for n, v in zip(names, values, strict=True)}
    limit = int(max_(solve.max_iterations, solve.max_iterations.shape))
    states = [] if recording(solve) else None
    final = _loop(body, tuple(natives[n] for n in names), tensors, b, limit, states)
    messages = _messages(final, name, solve)
    found = final if states is None else _trajectory(states, limit + 1)  # phiml: a state per iteration count
    return final['x'], SolveInfo(solve, found['x'], found['residual'], found['iterations'], found['evaluations'],
                     found['converged'], found['diverged'], f'lazyphi {name}', messages, 0.)


def _host_product(matrix: Tensor | None, system: Shape, dtype: DType, tensors: list) -> Callable | None:
    """`vectors -> matrix @ vectors` on NumPy arrays `(entries, values of one system)` through SciPy's compiled
    sparse product (`SparseTensor.host_csr`, in `dtype`), where `matrix` is sparse with its rows and columns the
    `system`'s dims and no batch or value dims, and the values of it and of the `tensors` are at hand on the CPU: the
    loop then steps on NumPy, also for another library's CPU tensors (NumPy reads them without copying; the solution
    is converted back). A 128x128 Laplace solved by CG on PyTorch's CPU: 388 ms calling the function or 30 ms on the
    host. None elsewhere: the loop steps on the backend of the tensors, applying the operator as a tensor function."""
    if not isinstance(matrix, SparseTensor) or not _at_hand_on_cpu([stored_values(matrix), *tensors]):
        return None
    rows = matrix.shape.non_batch.without(matrix.shape.dual.names)
    if set(rows.names) != set(system.names):
        return None
    csr = matrix.host_csr(system.names, system.as_dual().names, dtype)
    return None if csr is None else lambda vectors: (csr @ vectors.T).T


def _cg_start(x0: Tensor, r0: Tensor, rsq0: Tensor) -> tuple:
    state = {'x': x0, 'residual': r0, 'direction': r0, 'rsq': rsq0}
    shapes = {'x': lambda xs, rs, b: xs, 'residual': lambda xs, rs, b: rs, 'direction': lambda xs, rs, b: rs,
              'rsq': lambda xs, rs, b: b}
    return state, shapes


def _adaptive_cg_start(operator: Callable, x0: Tensor, r0: Tensor, rsq0: Tensor) -> tuple:
    state = {'x': x0, 'residual': r0, 'direction': r0, 'image': operator(r0), 'rsq': rsq0}
    shapes = {'x': lambda xs, rs, b: xs, 'residual': lambda xs, rs, b: rs, 'direction': lambda xs, rs, b: rs,
              'image': lambda xs, rs, b: rs, 'rsq': lambda xs, rs, b: b}
    return state, shapes


def _bicgstab_start(x0: Tensor, r0: Tensor, dot: Callable) -> tuple:
    one = expand(wrap(1.), batch(r0))
    state = {'x': x0, 'residual': r0, 'shadow': r0, 'p': r0 * 0, 'v': r0 * 0, 'rho': one, 'alpha': one,
             'omega': one, 'rsq': dot(r0, r0)}
    vector, scalar = (lambda xs, rs, b: rs), (lambda xs, rs, b: b)
    shapes = {'x': lambda xs, rs, b: xs, 'residual': vector, 'shadow': vector, 'p': vector, 'v': vector,
              'rho': scalar, 'alpha': scalar, 'omega': scalar, 'rsq': scalar}
    return state, shapes


def _while(body: Callable, state: dict, shapes: dict, max_iterations: int, trajectory: list | None = None) -> dict:
    """Runs `state = body(state)` while any `state['continue']` is true, on the backend's `while_loop`.

    The tensors travel as natives with the axes of `shapes` and the dtypes of the initial `state`. Given a list
    `trajectory`, the loop runs in Python instead and appends the initial state and the one after each iteration.
    NumPy's loop runs on the tensors themselves, in the dtypes of the initial state: nothing compiles it, so the
    state is not laid out as natives at each step (gradient descent; the linear methods step on natives, `_loop`).
    """
    names = ['continue'] + [n for n in state if n != 'continue']
    state = {n: expand(as_tensor(state[n]), shapes[n]) for n in names}
    dtypes = {n: state[n].dtype for n in names}
    backend = common_backend([state[n]._dense() for n in names])

    def natives(values: dict) -> tuple:
        return tuple(convert(_typed(values[n], dtypes[n]).native(shapes[n]), backend) for n in names)

    def tensors(values) -> dict:
        return {n: Dense(v, shapes[n], backend) for n, v in zip(names, values, strict=True)}

    if trajectory is None and backend is NUMPY:  # nothing compiles the loop: the tensors step themselves
        for _ in range(max_iterations):
            if not bool(any_(state['continue'], shapes['continue'])):
                break
            state = {n: _typed(value, dtypes[n]) for n, value in body(state).items()}
        return tensors(natives(state))
    return _loop(lambda *values: natives(body(tensors(values))), natives(state), tensors, backend, max_iterations,
                 trajectory)


def _loop(body: Callable, values: tuple, tensors: Callable, backend, max_iterations: int,
          trajectory: list | None) -> dict:
    """Runs `values = body(*values)` on natives while any of `values[0]` is true, at most `max_iterations` times, on
    the backend's `while_loop`, and gives the final values as `tensors(values)`. Given a list `trajectory`, the loop
    runs in Python instead and appends the initial state and the one after each iteration, as tensors (while a
    compiler traces, all `max_iterations` of them)."""
    if trajectory is None:
        return tensors(backend.while_loop(body, values, max_iterations))
    trajectory.append(tensors(values))
    for _ in range(max_iterations):
        proceed = trajectory[-1]['continue']
        if proceed.available and not bool(any_(proceed, proceed.shape)):
            break
        values = body(*values)
        trajectory.append(tensors(values))
    return trajectory[-1]


def _typed(value: Tensor, dtype: DType) -> Tensor:
    return value if value.dtype == dtype else cast(value, dtype)


def _messages(final: dict, method: str, solve: Solve) -> Tensor:
    """A message per batch entry, as a layout along the batch dims (empty while a compiler traces the solve)."""
    shape = final['converged'].shape
    if not (final['converged'].available and final['rsq'].available):
        return _per_entry(lambda index: '', shape)
    converged, diverged = final['converged'].numpy(shape), final['diverged'].numpy(shape)
    iterations, norms = final['iterations'].numpy(shape), sqrt(final['rsq']).numpy(shape)
    rel_tol = float(max_(solve.rel_tol, solve.rel_tol.shape))
    abs_tol = float(max_(solve.abs_tol, solve.abs_tol.shape))

    def message(index: tuple) -> str:
        if diverged[index]:
            return f'{method} diverged within {iterations[index]} iterations'
        if not converged[index]:
            return f'{method} did not converge to rel_tol={rel_tol:.0e}, abs_tol={abs_tol:.0e} within ' \
                   f'{iterations[index]} iterations; |residual| = {norms[index]:.3g}'
        return f'Converged within {iterations[index]} iterations.'
    return _per_entry(message, shape)


def _per_entry(message: Callable, shape: Shape) -> Tensor:
    """A layout along `shape` of `message(index)` for each index."""
    text = np.empty(shape.sizes, dtype=object)
    for index in np.ndindex(*shape.sizes):
        text[index] = message(index)
    return layout(text.tolist() if shape else text.item(), *[shape[i] for i in range(shape.rank)])


# --- the direct method ----------------------------------------------------------------------


def _direct(matrix: Tensor, y: Tensor, solve: Solve) -> SolveInfo:
    """A solve per batch entry: of one sparse matrix at hand by SciPy's sparse LU on the host (`SparseDirect`),
    else densely by the backend's least-squares solver (exact for an invertible matrix)."""
    y, x0 = to_float(y), to_float(solve.x0)
    given, matrix = matrix, to_float(matrix)  # SciPy factors the given values in float64, kept with the given matrix
    columns = x0.shape.non_batch
    missing = [d for d in columns.as_dual().names if d not in matrix.shape]
    if missing:
        raise ValueError(f'solve_linear(): the matrix {matrix.shape} lacks the dual dims {missing} of the solution\'s '
                         f'dims {columns}')
    rows = matrix.shape.non_batch.without(matrix.shape.dual.names)
    independent = (non_batch(y) & non_batch(x0)).without(rows.names).without(columns.names)
    batches = merge_shapes(batch(matrix), batch(y), batch(x0), independent)
    shared = host_matrix(given, rows, columns.as_dual())
    if shared is not None:  # factored once and kept with the matrix; the entries are solved on the host, also from a
        # compiled program (a 128x128 Laplace: 23 ms to factor, 1.3 ms to solve)
        solver = given.derived(('direct', rows.names, columns.names), lambda: SparseDirect(shared))
        backend = common_backend([y._dense(), x0._dense()])
        # SciPy's solution carries no derivatives: solve_linear's custom gradient differentiates the solve
        native_y = backend.stop_gradient(convert(reshaped_native(expand(y, batches), [batches, rows]), backend))
        solution = backend.numpy_call(solver, (batches.volume, columns.volume), x0.dtype, native_y)
        method = f'lazyphi direct ({solver.method})'
    else:
        native_matrix = reshaped_native(expand(matrix, batches), [batches, rows, columns.as_dual()])
        native_y = reshaped_native(expand(y, batches), [batches, rows, ()])
        backend = common_backend([matrix._dense(), y._dense()])
        solution = backend.matrix_solve_least_squares(convert(native_matrix, backend), convert(native_y, backend))[0]
        solution = solution[..., 0]
        method = 'lazyphi direct (least squares)'
    x = reshaped_tensor(solution, [batches, columns], convert=False)
    x = x if shared is None or x.dtype == x0.dtype else cast(x, x0.dtype)  # NumPy's numpy_call keeps SciPy's float64
    residual = y - matrix @ x
    norm = sqrt(_dot(residual, residual))
    limit = maximum(solve.rel_tol * sqrt(_dot(y, y)), solve.abs_tol)
    converged = expand(is_finite(norm) & (norm <= limit), batches)
    none = expand(to_int32(wrap(-1)), batches)
    flags, norms = (converged.numpy(converged.shape), expand(norm, batches).numpy(converged.shape)) \
        if converged.available else (None, None)

    def message(index: tuple) -> str:
        if flags is None:  # traced by a compiler: no values yet
            return ''
        return f'norm(residual)={norms[index]:.3g}' if flags[index] else \
            f'Direct solution does not satisfy tolerance: norm(residual)={norms[index]:.3g}'
    msg = _per_entry(message, converged.shape)
    return SolveInfo(solve, x, residual, none, none, converged, ~converged, method, msg, 0.)


# --- SciPy's iterative methods --------------------------------------------------------------


def _on_host(y: Tensor, x0: Tensor) -> bool:
    """Whether a 'scipy-*' method can apply a function on the host (values at hand, nothing being compiled);
    otherwise the function's matrix is built in the traced program and handed to SciPy."""
    return not compiling() and y._dense().available and x0._dense().available


def _scipy_iterative(matrix: Tensor | None, operator: Callable, y: Tensor, solve: Solve) -> SolveInfo:
    """A 'scipy-*' iterative method on the host (`_scipy_linear.py`), through the backend's `numpy_call`.

    Inside `jit_compile` the flags come back only when the compiled function runs: the convergence check is then
    deferred to that moment (`when_available`), and the messages are empty in the traced `SolveInfo`.
    """
    if solve.method == 'scipy-lsqr' and solve.preconditioner is not None:
        raise ValueError(f'solve_linear(): \'scipy-lsqr\' takes no preconditioner, got '
                         f'{solve.preconditioner!r}; pass preconditioner=None')
    found = scipy_solve(solve.method, matrix, operator, to_float(y),
                        to_float(solve.x0), solve.rel_tol, solve.abs_tol, solve.max_iterations, solve.preconditioner)
    method = f'SciPy {solve.method[len("scipy-"):]}'

    def info(x: Tensor, residual: Tensor, iterations: Tensor, converged: Tensor, diverged: Tensor,
             status: Tensor) -> SolveInfo:
        codes = status.numpy(status.shape) if status.available else None
        messages = _per_entry(lambda index: '' if codes is None else status_message(solve.method, int(codes[index])),
                              status.shape)
        return SolveInfo(solve, x, residual, iterations, iterations + 1, converged, diverged, method, messages, 0.)
    parts = (found['x'], found['residual'], found['iterations'], found['converged'], found['diverged'],
             found['status'])
    if not found['converged'].available:  # traced: check once the compiled function has run, on its values
        when_available(lambda *values: info(*values).convergence_check(False), *parts)
    return info(*parts)
