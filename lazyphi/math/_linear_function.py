"""`jit_compile_linear` and the `LinearFunction` it returns: a function compiled like `jit_compile` that also
lays itself out as a matrix (and bias) at given arguments, by `matrix_from_function`, kept for the next call with
the same arguments."""

from __future__ import annotations

import collections
import functools
import threading
from collections.abc import Callable

from ..backend import get_precision
from ._autodiff import JitFunction, _names
from ._linalg import affine_argument, matrix_from_function
from ._reduce import any_
from ._tensor import Tensor
from ._tree import leaves

MATRICES_KEPT = 4  # matrices a LinearFunction keeps, the most recently used ones


class LinearFunction(JitFunction):
    """A function linear (or affine) in its first argument, compiled like `jit_compile` (see `jit_compile_linear`).

    Calling it runs the compiled version; `sparse_matrix` and `sparse_matrix_and_bias` give its matrix at given
    arguments, built by `matrix_from_function`. Like a compiled function's traces, the matrices are kept (the
    `MATRICES_KEPT` most recently used) and reused for arguments alike: a tensor `x` of the same shape, dtype and
    backend (its values do not matter), the same other tensors (the same objects), equal other values, and the same
    precision; arguments holding tensors in containers are not compared, and their matrices not kept. A function
    whose results change without its arguments changing (it reads a global that changes) needs a new
    `jit_compile_linear` after each change, as a compiled function does.
    """

    def __init__(self, f: Callable, auxiliary_args: str | None, forget_traces: bool):
        JitFunction.__init__(self, f, _names(auxiliary_args), forget_traces)
        # the parameters the function is not linear in; None: all but the first
        self.matrix_auxiliary_args = auxiliary_args
        self._matrices = collections.OrderedDict()  # key of the arguments -> (tensors it names, (matrix, bias))
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = JitFunction.__getstate__(self)
        del state['_lock']
        return {**state, '_matrices': collections.OrderedDict()}  # a copy builds its own

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

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

        Built by `matrix_from_function` (see `sparse_matrix`); the bias is `f` at zeros, shaped like the output. Kept
        for the next call with arguments alike (see `LinearFunction`) where their values are at hand.
        """
        key, held = _arguments_key(self.f, args, kwargs, self.matrix_auxiliary_args) or (None, None)
        with self._lock:  # threads of parallel_compute may solve with one function at once
            if key in self._matrices:
                self._matrices.move_to_end(key)
                return self._matrices[key][1]
        found = matrix_from_function(self.f, *args, auxiliary_args=self.matrix_auxiliary_args, **kwargs)
        if key is not None and all(t.available for t in found):
            with self._lock:
                self._matrices[key] = (held, found)  # the tensors named by identity held: their ids stay theirs
                if len(self._matrices) > MATRICES_KEPT:
                    self._matrices.popitem(last=False)
        return found

    def __repr__(self) -> str:
        return f'lin({getattr(self.f, "__name__", self.f)})'


def _arguments_key(f: Callable, args: tuple, kwargs: dict, auxiliary_args: str | None) -> tuple[tuple, list] | None:
    """What the matrix of `f` at these arguments depends on, and the tensors it names by identity: the shape, dtype
    and backend of the tensor `f` is affine in, the precision, other tensors by identity and other values by value.
    None where that cannot be a key: a value that is not hashable or holds tensors (a tuple of tensors, a
    dataclass), or a tensor whose values are not at hand (inside `jit_compile`)."""
    given, affine = affine_argument(f, args, kwargs, auxiliary_args)
    key, held = [get_precision()], []
    for name, value in sorted(given.items()):
        if isinstance(value, Tensor):
            if not value.available:
                return None
            key.append((name, value.shape, value.dtype, value.backend.name) if name == affine else (name, id(value)))
            held += [] if name == affine else [value]
            continue
        if leaves(value):
            return None
        try:
            hash(value)
        except TypeError:
            return None
        key.append((name, type(value), value))
    return tuple(key), held


def jit_compile_linear(f: Callable | None = None, auxiliary_args: str | None = None,
                       forget_traces: bool | None = None) -> LinearFunction:
    """`jit_compile` for a function that is linear in its first argument: a `LinearFunction`.

    Calling it runs `f` compiled like `jit_compile`. `solve_linear` steps with its matrix, kept by the function,
    where all tensors are at hand on the CPU (phiml solves with its matrix on every backend), and calls it like any
    function elsewhere (on a GPU, inside `jit_compile`). Its `sparse_matrix` and `sparse_matrix_and_bias` give the
    function's matrix (`matrix_from_function`). Usable as `@jit_compile_linear` or `@jit_compile_linear(...)`.

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
