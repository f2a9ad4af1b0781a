"""`jit_compile` and `gradient` for functions of lazyphi tensors, on the backend of their arguments."""

from __future__ import annotations

import functools
from collections.abc import Callable

from ..backend import Backend
from ._tensor import Dense, Tensor, common_backend
from ._tree import tree_map


def _flatten(tree) -> tuple[list, Callable]:
    """The tensors of `tree` (densified) and a function rebuilding the tree from replacements, in order."""
    leaves = []
    tree_map(lambda t: leaves.append(t._dense()) or t, tree)

    def rebuild(new_leaves: list):
        replacements = iter(new_leaves)
        return tree_map(lambda _: next(replacements), tree)
    return leaves, rebuild


def _backend_of(leaves: list) -> Backend:
    if not leaves:
        raise ValueError('jit_compile / gradient need at least one Tensor among the arguments')
    return common_backend(leaves)


def jit_compile(f: Callable) -> Callable:
    """`f` compiled by the backend of its tensor arguments (jax.jit, tf.function; NumPy and torch run it as is).

    `f` takes and returns tensors or trees of them (tuples, lists, dicts, dataclasses). One compiled
    version is kept per backend and per shapes and dtypes of the arguments; non-tensor arguments are
    part of that key and must be hashable.
    """
    compiled_versions: dict = {}

    @functools.wraps(f)
    def compiled(*args):
        leaves, rebuild = _flatten(args)
        backend = _backend_of(leaves)
        key = (backend.name, tuple((t.shape, t.dtype) for t in leaves), _static_part(args))
        if key not in compiled_versions:
            shapes = [t.shape for t in leaves]
            output = {}

            def native_function(*natives):
                result = f(*rebuild([Dense(n, s, backend) for n, s in zip(natives, shapes, strict=True)]))
                out_leaves, out_rebuild = _flatten(result)
                output['rebuild'], output['shapes'] = out_rebuild, [t.shape for t in out_leaves]
                return tuple(t._native for t in out_leaves)
            compiled_versions[key] = (backend.jit_compile(native_function), output)
        function, output = compiled_versions[key]
        natives = function(*[t._native for t in leaves])
        return output['rebuild']([Dense(n, s, backend) for n, s in zip(natives, output['shapes'], strict=True)])
    return compiled


def _static_part(args: tuple) -> tuple:
    """The non-tensor arguments, which select a compiled version."""
    static = []
    for a in args:
        if not isinstance(a, Tensor):
            try:
                hash(a)
                static.append(a)
            except TypeError:
                static.append(type(a))
    return tuple(static)


def gradient(f: Callable, wrt: int = 0, get_output: bool = True) -> Callable:
    """A function computing the gradient of `f`'s scalar loss with respect to its argument number `wrt`.

    `f` returns the loss (a tensor with one value) or a tuple `(loss, *aux)`. The returned function
    gives `(output, gradient)` with `get_output` (output as `f` returned it), else only the
    gradient, shaped like the argument (a tree of tensors for a tree). Needs a backend with automatic
    differentiation (torch, jax, tensorflow); NumPy raises NotImplementedError.
    """
    @functools.wraps(f)
    def gradient_function(*args):
        leaves, rebuild = _flatten(args)
        backend = _backend_of(leaves)
        if not backend.supports('jacobian'):
            raise NotImplementedError(f"gradient() needs automatic differentiation, which the {backend.name} "
                                      f"backend lacks; use tensors of torch, jax or tensorflow")
        arg_leaves, arg_rebuild = _flatten(args[wrt])
        positions = [next(i for i, t in enumerate(leaves) if t is a) for a in arg_leaves]
        shapes = [t.shape for t in leaves]
        output = {}

        def native_function(*natives):
            result = f(*rebuild([Dense(n, s, backend) for n, s in zip(natives, shapes, strict=True)]))
            loss = result[0] if isinstance(result, tuple) else result
            if not isinstance(loss, Tensor) or loss.shape.volume != 1:
                got = loss.shape if isinstance(loss, Tensor) else type(loss).__name__
                raise ValueError(f'gradient() needs f to return a loss with one value (or a tuple starting with '
                                 f'it), got {got}')
            out_leaves, out_rebuild = _flatten(result)
            output['rebuild'], output['shapes'] = out_rebuild, [t.shape for t in out_leaves]
            return backend.reshape(loss._dense()._native, ()), tuple(t._native for t in out_leaves)
        values = backend.jacobian(native_function, positions, get_output, True)(*[t._native for t in leaves])
        grads = values[-len(positions):]
        grad_tree = arg_rebuild([Dense(g, leaves[p].shape, backend) for g, p in zip(grads, positions, strict=True)])
        if not get_output:
            return grad_tree
        outputs = values[:len(values) - len(positions)]
        return output['rebuild']([Dense(n, s, backend) for n, s in zip(outputs, output['shapes'], strict=True)]), \
            grad_tree
    return gradient_function
