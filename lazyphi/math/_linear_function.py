"""`jit_compile_linear` and the `LinearFunction` it returns: a function compiled like `jit_compile` that also
lays itself out as a matrix (and bias) at given arguments, by `matrix_from_function`."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ._autodiff import JitFunction, _names
from ._linalg import matrix_from_function
from ._reduce import any_
from ._tensor import Tensor


class LinearFunction(JitFunction):
    """A function linear (or affine) in its first argument, compiled like `jit_compile` (see `jit_compile_linear`).

    Calling it runs the compiled version; `sparse_matrix` and `sparse_matrix_and_bias` give its matrix at given
    arguments, built by `matrix_from_function` anew at each call of those methods.
    """

    def __init__(self, f: Callable, auxiliary_args: str | None, forget_traces: bool):
        JitFunction.__init__(self, f, _names(auxiliary_args), forget_traces)
        # the parameters the function is not linear in; None: all but the first
        self.matrix_auxiliary_args = auxiliary_args

    def sparse_matrix(self, *args, **kwargs) -> Tensor:
        """The matrix `M` with `f(x) = M @ x` at these arguments (the first tensor is `x`; its values do not matter).

        Its rows are the dims of the output and its columns the dual dims `~d` of the non-batch dims `d` of `x`;
        sparse where values are at hand, dense with batch dims where the other arguments make it differ per batch
        entry (see `matrix_from_function`).

        Raises:
            ValueError: the function is affine, not linear (`f(0)` is not exactly zero); use
                `sparse_matrix_and_bias`. While a compiler traces there are no values and this is not checked.
        """
        matrix, bias = self.sparse_matrix_and_bias(*args, **kwargs)
        if bias.available and bool(any_(bias != 0, bias.shape)):
            raise ValueError(f'LinearFunction.sparse_matrix(): {self!r} is affine, not linear: it maps zeros to a '
                             f'nonzero bias {bias.shape}, which one matrix cannot express; use '
                             f'sparse_matrix_and_bias()')
        return matrix

    def sparse_matrix_and_bias(self, *args, **kwargs) -> tuple[Tensor, Tensor]:
        """The matrix `M` and bias `b` with `f(x) = M @ x + b` at these arguments (the first tensor is `x`).

        Built by `matrix_from_function` (see `sparse_matrix`); the bias is `f` at zeros, shaped like the output.
        """
        return matrix_from_function(self.f, *args, auxiliary_args=self.matrix_auxiliary_args, **kwargs)

    def __repr__(self) -> str:
        return f'lin({getattr(self.f, "__name__", self.f)})'


def jit_compile_linear(f: Callable | None = None, auxiliary_args: str | None = None,
                       forget_traces: bool | None = None) -> LinearFunction:
    """`jit_compile` for a function that is linear in its first argument: a `LinearFunction`.

    Calling it runs `f` compiled like `jit_compile`; `solve_linear` calls it like any function (or builds its
    matrix where a method needs one). Its `sparse_matrix` and `sparse_matrix_and_bias` give the function's
    matrix (`matrix_from_function`). Usable as `@jit_compile_linear` or
    `@jit_compile_linear(...)`.

    Args:
        f: takes tensors and returns a tensor; linear (or affine) in its first argument.
        auxiliary_args: comma-separated names of the parameters `f` is not linear in; None: all but the first
            (they are traced by the compiler all the same; named ones are compiled in, as in `jit_compile`).
        forget_traces: keep only the most recent compiled version.
    """
    if f is None:
        return functools.partial(jit_compile_linear, auxiliary_args=auxiliary_args, forget_traces=forget_traces)
    if isinstance(f, LinearFunction) and f.matrix_auxiliary_args == auxiliary_args:
        return f
    if isinstance(f, JitFunction):
        f = f.f  # the plain function: its matrix is traced from it
    return LinearFunction(f, auxiliary_args, bool(forget_traces))
