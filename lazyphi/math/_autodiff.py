"""Transforming functions of tensors: `jit_compile`, `gradient`, `custom_gradient`, `stop_gradient`,
`print_gradient`.

The functions take and return tensors or trees of them (tuples, lists, dicts, dataclasses). They are
flattened to backend natives, handed to the backend's compiler or automatic differentiation, and the
named tensors rebuilt. Arguments are matched to `f`'s parameters by name, so keyword arguments work
and `auxiliary_args` / `wrt` name parameters.
"""

from __future__ import annotations

import builtins
import contextvars
import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from .._errors import IncompatibleShapes, NoBackendFound
from ..backend import Backend, choose_backend, convert, default_backend
from ._conversion import print_
from ._elementwise import positional_tensor
from ._kinds import Expanded, PartsKind
from ._shape import Shape, _canonical, concat_shapes
from ._tensor import ELEMENTWISE, NUMBER_TYPES, Dense, Op, Tensor, as_tensor, common_backend, content_hash, dispatch
from ._tree import leaves as tree_leaves
from ._tree import tree_map, variable_attributes

# While a jit-compiled function is being traced: the callbacks `when_available` defers to after the call
_COMPILING: contextvars.ContextVar = contextvars.ContextVar('lazyphi_compiling', default=None)


def compiling() -> bool:
    """Whether a function is being traced by `jit_compile` for a backend with a compiler."""
    return _COMPILING.get() is not None


def _flatten(tree, structural: list | None = None, attributes: Callable | None = None) -> tuple[list, Callable]:
    """The tensors of `tree` (densified) and a function rebuilding the tree from replacements, in order.

    `attributes` selects the attributes of dataclasses traversed (`variable_attributes` for a function's
    inputs, as phiml traces them); the others stay in the tree as they are. None traverses all data fields.

    A kind with `_jit_parts()` (sparse tensors) contributes those tensors instead of its materialised values and
    is rebuilt by its `_with_jit_parts(replacements)`. A list `structural` gets a flag per tensor: whether it is an
    integer part of such a kind (a sparse tensor's indices), which says where its values are, not what they are.
    """
    leaves = []

    def collect(t: Tensor) -> Tensor:
        parts = t._jit_parts() if hasattr(t, '_jit_parts') else (t,)
        leaves.extend(p._dense() for p in parts)
        if structural is not None:
            structural.extend(p is not t and p.dtype.kind in (int, bool) for p in parts)
        return t
    tree_map(collect, tree, attributes=attributes)

    def rebuild(new_leaves: list):
        replacements = iter(new_leaves)

        def replace(t: Tensor) -> Tensor:
            if hasattr(t, '_jit_parts'):
                return t._with_jit_parts([next(replacements) for _ in t._jit_parts()])
            return next(replacements)
        return tree_map(replace, tree, attributes=attributes)
    return leaves, rebuild


class _TensorSpec(NamedTuple):
    """How `assemble_tensors` rebuilds one tensor from its natives (see `disassemble_tensors`)."""
    rebuild: Callable
    shapes: tuple
    backends: tuple
    expanded_shape: Shape | None  # the shape to expand the rebuilt tensor to, if its natives lack some dims


def disassemble_tensors(tensors: Sequence[Tensor], expand: bool) -> tuple[tuple, tuple, tuple]:
    """The natives holding `tensors`, as `jit_compile` hands them to a library, and what rebuilds the tensors.

    A sparse tensor gives its parts (indices, values), any other tensor its values as one native (see `_flatten`).

    Args:
        tensors: a sequence of tensors.
        expand: whether each native has every dim of its tensor. If False, a tensor constant along some dims gives
            its native without them.

    Returns:
        `(natives, shapes, specs)`: all natives in one flat tuple, each tensor's shape, and one spec per tensor for
        `assemble_tensors`.
    """
    natives, specs = [], []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f'disassemble_tensors(): expected a sequence of Tensors, got {type(t).__name__} {t!r}')
        expanded_shape = None
        if not expand and isinstance(t, Expanded):
            t, expanded_shape = t._inner, t.shape
        leaves, rebuild = _flatten(t)
        natives.extend(leaf._native for leaf in leaves)
        specs.append(_TensorSpec(rebuild, tuple(leaf.shape for leaf in leaves), tuple(leaf.backend for leaf in leaves),
                                 expanded_shape))
    return tuple(natives), tuple(t.shape for t in tensors), tuple(specs)


def assemble_tensors(natives: Sequence, specs: Sequence) -> list[Tensor]:
    """The tensors that `disassemble_tensors` gave `specs` for, rebuilt from `natives` (its natives or replacements
    of the same shapes, such as a compiler's placeholders)."""
    natives = list(natives)
    needed = sum(len(spec.shapes) for spec in specs)
    if len(natives) != needed:
        raise ValueError(f'assemble_tensors(): the specs need {needed} natives, got {len(natives)}')
    result, start = [], 0
    for spec in specs:
        end = start + len(spec.shapes)
        t = _rebuilt(spec.rebuild, natives[start:end], list(spec.shapes), list(spec.backends))
        result.append(t if spec.expanded_shape is None else Expanded(t, spec.expanded_shape))
        start = end
    return result


def _all_available(tree) -> bool:
    """Whether every tensor of `tree` has values or holds only natives, which may be a library's placeholders
    inside its own compiler or autodiff (a JAX or TensorFlow tracer, also inside an `Expanded` or `Stacked` kind),
    which the library differentiates; planning tracers and data still on disk are not."""
    found = []
    tree_map(lambda t: found.append(_holds_natives(t)) or t, tree)
    return all(found)


def _holds_natives(t: Tensor) -> bool:
    if type(t) is Dense or t.available:
        return True
    if isinstance(t, Expanded):
        return _holds_natives(t._inner)
    if isinstance(t, PartsKind):
        return all(_holds_natives(p) for p in t._parts)
    if hasattr(t, '_jit_parts'):  # a sparse tensor whose values a library traces
        return all(_holds_natives(p) for p in t._jit_parts())
    return False


def _backend_of(leaves: list) -> Backend:
    if not leaves:
        raise ValueError('jit_compile / gradient need at least one Tensor among the arguments')
    return common_backend(leaves)


def _parameters(f: Callable) -> inspect.Signature:
    return inspect.signature(f)


def _names(names) -> tuple:
    if names is None:
        return ()
    if isinstance(names, str):
        return tuple(n.strip() for n in names.split(',') if n.strip())
    return tuple(names)


def _bound(signature: inspect.Signature, args: tuple, kwargs: dict) -> dict:
    """The arguments of a call by parameter name, defaults included; a `**kwargs` parameter is spread out."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(value)
        else:
            arguments[name] = value
    return arguments


def _call(f: Callable, signature: inspect.Signature, arguments: dict):
    """`f` called with `arguments` (by name), positional-only and `*args` parameters passed by position."""
    positional, keywords = [], {}
    for name, value in arguments.items():
        parameter = signature.parameters.get(name)
        if parameter is not None and parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(value)
        elif parameter is not None and parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            positional.extend(value)
        else:
            keywords[name] = value
    return f(*positional, **keywords)


def _as_tensors(arguments: dict, static: tuple) -> dict:
    """Numbers and natives among the non-static arguments become tensors: they are traced, not compiled in.

    A native's dims are named by axis position (see `positional_tensor`).
    """
    return {n: v if n in static else _as_tensor(v) for n, v in arguments.items()}


def _as_tensor(value):
    if isinstance(value, NUMBER_TYPES) and not isinstance(value, bool):
        return as_tensor(value)
    if isinstance(value, (Tensor, str, bytes, bool, tuple, list, dict)) or value is None or callable(value) or \
            hasattr(type(value), '__dataclass_fields__'):
        return value
    try:
        return positional_tensor(value)
    except NoBackendFound:
        return value


def _number_as_tensor(value):
    return value if isinstance(value, (Tensor, bool, np.bool_)) else as_tensor(value)


def _natives(leaves: list, backend: Backend) -> list:
    """The natives of `leaves`, those of other backends (NumPy, numbers) converted to `backend`."""
    return [t._native if t.backend is backend else convert(t._native, backend) for t in leaves]


def _rebuilt(rebuild: Callable, natives, shapes: list, backends: list):
    return rebuild([Dense(n, s, b) for n, s, b in zip(natives, shapes, backends, strict=True)])


class JitFunction:
    """A function compiled per backend and per shapes and dtypes of its tensor arguments (see `jit_compile`)."""

    def __init__(self, f: Callable, auxiliary_args: tuple, forget_traces: bool):
        self.f = f
        self.auxiliary_args = auxiliary_args
        self.forget_traces = forget_traces
        self.traces: dict = {}
        self._signature = _parameters(f)
        functools.update_wrapper(self, f)

    def __getstate__(self) -> dict:
        # compiled versions belong to this process (they hold a compiler's context); a copy, such as the one a worker
        # process of parallel_compute unpickles, compiles its own
        return {**self.__dict__, 'traces': {}}

    def _key(self, arguments: dict) -> tuple:
        static = {n: v for n, v in arguments.items() if n in self.auxiliary_args}
        dynamic = {n: v for n, v in arguments.items() if n not in self.auxiliary_args}
        leaves, _ = _flatten(dynamic, attributes=variable_attributes)
        backend = _backend_of(leaves)
        # the values not traced (non-tensors, fields outside variable_attrs) select a version too
        structure = _hashable(tree_map(lambda t: None, dynamic, attributes=variable_attributes))
        return (backend.name, tuple((t.shape, t.dtype) for t in leaves), _hashable(static), structure), leaves, \
            backend, dynamic, static

    def __call__(self, *args, **kwargs):
        arguments = _as_tensors(_bound(self._signature, args, kwargs), self.auxiliary_args)
        key, leaves, backend, dynamic, static = self._key(arguments)
        if key not in self.traces:
            if self.forget_traces:
                self.traces.clear()
            self.traces[key] = self._trace(backend, dynamic, static, [t.shape for t in leaves])
        compiled, output = self.traces[key]
        natives = compiled(*_natives(leaves, backend))
        count = output['count']
        result = _rebuilt(output['rebuild'], natives[:count], output['shapes'], output['backends'])
        deferred = natives[count:]
        for runnable, shapes, start in output['deferred']:
            runnable(*[Dense(n, s, backend) for n, s in zip(deferred[start:start + len(shapes)], shapes, strict=True)])
        return result

    def _trace(self, backend: Backend, dynamic: dict, static: dict, shapes: list) -> tuple:
        _, rebuild = _flatten(dynamic, attributes=variable_attributes)
        output = {'deferred': []}

        def native_function(*natives):
            callbacks = []
            token = _COMPILING.set(callbacks) if backend.supports('jit_compile') else None
            try:
                inputs = {**rebuild([Dense(n, s, backend) for n, s in zip(natives, shapes, strict=True)]), **static}
                result = _call(self.f, self._signature, inputs)
            finally:
                if token is not None:
                    _COMPILING.reset(token)
            out_leaves, out_rebuild = _flatten(result)
            output['rebuild'], output['count'] = out_rebuild, len(out_leaves)
            output['shapes'], output['backends'] = [t.shape for t in out_leaves], [t.backend for t in out_leaves]
            extra, deferred, start = [], [], 0
            for runnable, tensors in callbacks:
                dense = [t._dense() for t in tensors]
                deferred.append((runnable, [t.shape for t in dense], start))
                extra.extend(t._native for t in dense)
                start += len(dense)
            output['deferred'] = deferred
            return tuple(t._native for t in out_leaves) + tuple(extra)
        return backend.jit_compile(native_function), output

    def __repr__(self) -> str:
        return f'jit({getattr(self.f, "__name__", self.f)})'


def _hashable(value):
    """`value` as a key of compiled versions: auxiliary tensors with values by their content (a new tensor of the
    same values reuses the version, as in phiml), other unhashable values by identity."""
    if isinstance(value, Tensor) and value.available:
        dense = value._dense()
        return 'tensor', value.shape, value.dtype, content_hash(dense._native, dense.backend)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value), tuple((f.name, _hashable(getattr(value, f.name))) for f in dataclasses.fields(value))
    try:
        hash(value)
        return value
    except TypeError:
        if isinstance(value, dict):
            return tuple((k, _hashable(v)) for k, v in value.items())
        if isinstance(value, (tuple, list)):
            return tuple(_hashable(v) for v in value)
        return type(value), id(value)


def jit_compile(f: Callable | None = None, auxiliary_args: str = '', forget_traces: bool | None = None) -> Callable:
    """`f` compiled by the backend of its tensor arguments (jax.jit, tf.function; NumPy and torch run it as is).

    One compiled version is kept per backend and per shapes and dtypes of the tensor arguments (numbers
    count as tensors); arguments named in `auxiliary_args` are compiled in, and a new value compiles again
    (tensors are compared by their values).
    Python code in `f` runs only while it is traced. Usable as `@jit_compile` or `@jit_compile(...)`.

    Args:
        f: takes and returns tensors or trees of them.
        auxiliary_args: comma-separated names of parameters that are not tensors to trace.
        forget_traces: keep only the most recent compiled version.

    Returns:
        A callable with `f`'s parameters; its `traces` hold the compiled versions.
    """
    if f is None:
        return functools.partial(jit_compile, auxiliary_args=auxiliary_args, forget_traces=forget_traces)
    return JitFunction(f, _names(auxiliary_args), bool(forget_traces))


def trace_check(traced_function, *args, **kwargs) -> tuple[bool, str]:
    """Whether `traced_function` (from `jit_compile`) has a compiled version for these arguments, and if not why."""
    if not isinstance(traced_function, JitFunction):
        raise TypeError(f'trace_check() takes a function made by jit_compile, got {traced_function!r}')
    arguments = _as_tensors(_bound(traced_function._signature, args, kwargs), traced_function.auxiliary_args)
    key = traced_function._key(arguments)[0]
    if key in traced_function.traces:
        return True, ''
    if not traced_function.traces:
        return False, f'{traced_function!r} has not been traced yet'
    return False, f'{traced_function!r} has no compiled version for these argument shapes, dtypes and auxiliary ' \
                  f'values ({len(traced_function.traces)} others exist)'


def when_available(runnable: Callable, *tensor_args: Tensor) -> None:
    """Call `runnable(*tensor_args)` once their values exist: now, or after a `jit_compile`d function being
    traced has run (with the values of that call)."""
    callbacks = _COMPILING.get()
    if callbacks is None:
        runnable(*tensor_args)
    else:
        callbacks.append((runnable, [as_tensor(t) for t in tensor_args]))


# --- gradients -----------------------------------------------------------------------------


def _wrt_names(signature: inspect.Signature, wrt) -> tuple[tuple, bool]:
    """The parameter names to differentiate by, and whether a list of gradients is returned."""
    names = [n for n, p in signature.parameters.items() if p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                                          inspect.Parameter.VAR_KEYWORD)]
    if wrt is None:
        return (names[0],), True
    if isinstance(wrt, int):
        return (names[wrt],), False
    if isinstance(wrt, str):
        found = _names(wrt)
        return found, ',' in wrt
    if isinstance(wrt, (tuple, list)):
        return tuple(names[w] if isinstance(w, int) else w for w in wrt), True
    raise TypeError(f'wrt must name parameters of f (a str "x,y", an int, or a list of those), got {wrt!r}')


def gradient(f: Callable, wrt=None, get_output: bool = True) -> Callable:
    """A function computing the gradient of `f`'s loss with respect to the parameters `wrt`.

    Args:
        f: returns the loss (a tensor whose dims are all batch dims: the gradient is that of their sum) or a
            tuple starting with it.
        wrt: parameter names as 'x,y' or a list, or positions; a single name or int gives one gradient,
            a list or several names a list of them; by default the first parameter, as a list of one (as phiml).
        get_output: return `(output of f, gradients)` instead of the gradients alone.

    Needs a backend with automatic differentiation (torch, jax, tensorflow): that of the arguments, or for
    arguments of NumPy or Python numbers the default backend (`math.use('torch')`), as in phiml; NumPy alone
    raises NotImplementedError.
    """
    return _derivative(f, wrt, get_output, 'gradient')


def jacobian(f: Callable, wrt=None, get_output: bool = True) -> Callable:
    """A function computing the derivatives of `f`'s first output with respect to the parameters `wrt`.

    For an output whose dims are all batch dims this is `gradient`. An output with other dims gives, per
    argument differentiated by, a tensor with the output's non-batch dims followed by the argument's dims, its
    non-batch dims made dual (`vec` becomes `~vec`, the convention of matrices, so `J @ dx` applies it). Batch
    dims are independent examples, as in `gradient`: the output is summed over its batch dims before
    differentiating, so a batch dim the argument shares gives one Jacobian per entry (a batch dim of the
    result), and one only the output has is summed over.

    Args:
        f: returns a tensor or a tuple starting with it; further outputs are passed through.
        wrt: parameter names as 'x,y' or a list, or positions; a single name or int gives one Jacobian,
            a list or several names a list of them; by default the first parameter, as a list of one.
        get_output: return `(output of f, Jacobians)` instead of the Jacobians alone.

    Computed by the backend (`jax.jacrev`, TensorFlow's `GradientTape.jacobian`, for torch one backward pass
    per entry of the output), also inside `jit_compile`. NumPy has no automatic differentiation and raises
    NotImplementedError, as `gradient` does.
    """
    return _derivative(f, wrt, get_output, 'jacobian')


def _derivative(f: Callable, wrt, get_output: bool, kind: str) -> Callable:
    """`gradient` (kind 'gradient': the output must be a loss) or `jacobian` of `f`."""
    signature = _parameters(f)
    wrt_names, as_list = _wrt_names(signature, wrt)
    missing = [n for n in wrt_names if n not in signature.parameters]
    if missing and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        raise ValueError(f'{kind}(): wrt names {missing}, which are not parameters of {f.__name__}{signature}')

    @functools.wraps(f)
    def derivative_function(*args, **kwargs):
        arguments = _as_tensors(_bound(signature, args, kwargs), ())
        for name in wrt_names:  # numbers inside the trees differentiated by (a dataclass of floats) are variables
            if name in arguments:
                arguments[name] = tree_map(_number_as_tensor, arguments[name], (Tensor, *NUMBER_TYPES))
        leaves, rebuilds, positions, structural = [], {}, {}, []
        for name, value in arguments.items():
            arg_leaves, rebuilds[name] = _flatten(value, structural, variable_attributes)
            positions[name] = list(range(len(leaves), len(leaves) + len(arg_leaves)))
            leaves.extend(arg_leaves)
        backend = _backend_of(leaves)
        if not backend.supports('jacobian') and default_backend().supports('jacobian'):
            backend = default_backend()  # NumPy or Python numbers: differentiated where the default backend can
        if not backend.supports('jacobian'):
            raise NotImplementedError(f"{kind}() needs automatic differentiation, which the {backend.name} "
                                      f"backend lacks; use tensors of torch, jax or tensorflow, or make one of "
                                      f"them the default backend (math.use('torch'))")
        empty = [n for n in wrt_names if not positions.get(n)]
        if empty:
            raise ValueError(f'{kind}(): the arguments {empty} to differentiate by hold no tensors or numbers')
        # a sparse tensor is differentiated by its values: its derivative has the same indices
        flat_positions = [p for name in wrt_names for p in positions[name] if not structural[p]]
        shapes = [t.shape for t in leaves]
        output = {}

        def native_function(*natives):
            tensors = [Dense(n, s, backend) for n, s in zip(natives, shapes, strict=True)]
            inputs = {name: rebuilds[name]([tensors[p] for p in positions[name]]) for name in arguments}
            result = _call(f, signature, inputs)
            first = result[0] if isinstance(result, (tuple, list)) else result
            if not isinstance(first, Tensor) or (kind == 'gradient' and first.shape.non_batch.rank):
                got = first.shape if isinstance(first, Tensor) else type(first).__name__
                raise ValueError(f'gradient() needs f to return a loss whose dims are batch dims (or a tuple '
                                 f'starting with it), got {got}' if kind == 'gradient' else
                                 f'jacobian() needs f to return a Tensor (or a tuple starting with one), got {got}')
            out_leaves, output['rebuild'] = _flatten(result)
            output['shapes'], output['backends'] = [t.shape for t in out_leaves], [t.backend for t in out_leaves]
            total = first._dense()
            native = total._native if total.backend is backend else convert(total._native, backend)
            summed = tuple(i for i, t in enumerate(total.shape.types) if t == 'batch')
            output['rows'] = total.shape.non_batch
            if summed:
                native = backend.sum(native, summed)
            return backend.reshape(native, total.shape.non_batch.sizes), tuple(t._native for t in out_leaves)
        values = backend.jacobian(native_function, flat_positions, get_output,
                                  kind == 'gradient')(*_natives(leaves, backend))
        if output['rows'] and any(hasattr(t, '_jit_parts') for name in wrt_names for t in tree_leaves(arguments[name])):
            raise ValueError('jacobian() of an output with non-batch dims by a sparse tensor is not offered; '
                             'differentiate by a dense tensor (math.dense)')
        derivatives = iter(values[len(values) - len(flat_positions):])
        trees = tuple(rebuilds[name]([leaves[p] if structural[p] else
                                      _derivative_tensor(next(derivatives), output['rows'], leaves[p].shape, backend)
                                      for p in positions[name]]) for name in wrt_names)
        result = list(trees) if as_list else trees[0]
        if not get_output:
            return result
        outputs = values[:len(values) - len(flat_positions)]
        return _rebuilt(output['rebuild'], outputs, output['shapes'], output['backends']), result
    return derivative_function


def _derivative_tensor(native, rows: Shape, argument: Shape, backend: Backend) -> Dense:
    """The derivative by an argument of shape `argument`: its gradient when there are no `rows` (non-batch dims
    of the output), else the Jacobian with the `rows` first and the argument's non-batch dims made dual."""
    if not rows:
        return Dense(native, argument, backend)
    columns = Shape(argument.sizes, tuple(n if t == 'batch' else _dual_name(n) for n, t in
                                          zip(argument.names, argument.types, strict=True)),
                    tuple(t if t == 'batch' else 'dual' for t in argument.types), argument.labels)
    try:
        shape = concat_shapes(rows, columns)
    except IncompatibleShapes as error:
        raise ValueError(f'jacobian(): the output dims {rows} and the dims {columns} of the argument (non-batch '
                         f'dims made dual) share a name; rename one of them') from error
    ordered = _canonical(shape.sizes, shape.names, shape.types, shape.labels)  # batch dims first, as phiml prints
    if ordered.names != shape.names:
        native = backend.transpose(native, shape.indices(ordered.names))
    return Dense(native, ordered, backend)


def _dual_name(name: str) -> str:
    if name.startswith('~'):
        raise ValueError(f'jacobian() by an argument with the dual dim {name!r} is not offered: its column dim '
                         f'would need a second dual prefix')
    return '~' + name


def custom_gradient(f: Callable, gradient: Callable, auxiliary_args: str = '') -> Callable:
    """`f` with `gradient` used for backpropagation instead of differentiating `f`.

    Args:
        f: takes tensors (or trees) and returns a tensor, tree or tuple.
        gradient: called as `gradient(inputs, y, dy)` with the dict of `f`'s arguments by name, `f`'s output
            and the gradient of the loss with respect to it; returns a dict of gradients by argument name
            (arguments left out get none).
        auxiliary_args: comma-separated names of parameters that are not differentiated.
    """
    signature = _parameters(f)
    auxiliary = _names(auxiliary_args)

    @functools.wraps(f)
    def with_custom_gradient(*args, **kwargs):
        arguments = _as_tensors(_bound(signature, args, kwargs), auxiliary)
        if not _all_available(arguments):  # traced or not yet computed: there is no backward pass to define
            return _call(f, signature, arguments)
        static = {n: v for n, v in arguments.items() if n in auxiliary}
        leaves, rebuilds, positions = [], {}, {}
        for name, value in arguments.items():
            if name not in auxiliary:
                arg_leaves, rebuilds[name] = _flatten(value)
                positions[name] = list(range(len(leaves), len(leaves) + len(arg_leaves)))
                leaves.extend(arg_leaves)
        backend = _backend_of(leaves)
        shapes = [t.shape for t in leaves]
        output = {}

        def inputs_of(natives) -> dict:
            tensors = [Dense(n, s, backend) for n, s in zip(natives, shapes, strict=True)]
            return {**{name: rebuilds[name]([tensors[p] for p in positions[name]]) for name in rebuilds}, **static}

        def native_f(*natives):
            out_leaves, output['rebuild'] = _flatten(_call(f, signature, inputs_of(natives)))
            output['shapes'] = [t.shape for t in out_leaves]
            natives_out = tuple(t._native for t in out_leaves)
            return natives_out if len(natives_out) != 1 else natives_out[0]

        def native_gradient(x, y, dy):
            y, dy = (y, dy) if isinstance(y, (tuple, list)) else ((y,), (dy,))
            outputs = output['rebuild']([Dense(n, s, backend) for n, s in zip(y, output['shapes'], strict=True)])
            cotangents = output['rebuild']([Dense(n, s, backend) for n, s in zip(dy, output['shapes'], strict=True)])
            given = gradient(inputs_of(x), outputs, cotangents)
            result = [None] * len(leaves)
            for name, places in positions.items():
                if given.get(name) is not None:
                    for p, t in zip(places, _flatten(given[name])[0], strict=True):
                        if t.dtype.kind in (int, bool):  # where a sparse gradient's values are: no gradient
                            continue
                        # laid out in the dim order of the argument (a matrix's rows and columns may be equal in size)
                        native = t._native_in(shapes[p].names) if set(t.shape.names) == set(shapes[p].names) \
                            else t._native
                        result[p] = native if t.backend is backend else convert(native, backend)
            return result
        natives = backend.custom_gradient(native_f, native_gradient)(*_natives(leaves, backend))
        natives = natives if isinstance(natives, (tuple, list)) else (natives,)
        return output['rebuild']([Dense(n, s, backend) for n, s in zip(natives, output['shapes'], strict=True)])
    return with_custom_gradient


def _dense_stop_gradient(ts: Sequence[Dense]) -> Dense:
    t = ts[0]
    return Dense(t._backend.stop_gradient(t._native), t._shape, t._backend)


STOP_GRADIENT = Op('stop_gradient', ELEMENTWISE, _dense_stop_gradient)


def stop_gradient(x):
    """`x` (a tensor, native or tree) with its values unchanged but no gradient flowing back through it."""
    if isinstance(x, Tensor):
        return dispatch(STOP_GRADIENT, (x,))
    if isinstance(x, (tuple, list, dict)) or hasattr(type(x), '__dataclass_fields__'):
        return tree_map(stop_gradient, x)
    if isinstance(x, NUMBER_TYPES):
        return x
    return choose_backend(x).stop_gradient(x)



def print_gradient(value: Tensor, name: str = '', detailed: bool = False) -> Tensor:
    """`value` unchanged, marked so that the gradient reaching it in a backward pass is printed.

    Built on `custom_gradient` with the identity as function, so it prints on the backends that
    differentiate (torch, jax, tensorflow) whenever `gradient` computes through it; on NumPy, which has no
    backward pass, `value` itself is returned. Inside `jit_compile`, the gradient is printed once the compiled
    function has run, with the values of that call.

    Args:
        value: the tensor whose gradient to print.
        name: printed before the gradient.
        detailed: print every value (`print_`) instead of the one-line summary.
    """
    if not isinstance(value, Tensor):
        raise TypeError(f'print_gradient() takes a Tensor, got {type(value).__name__}')
    if not value.backend.supports('custom_gradient'):
        return value

    def show(gradient_value: Tensor) -> None:
        if detailed:
            print_(gradient_value, name)
        else:
            builtins.print(f'{name}: {gradient_value}' if name else str(gradient_value))

    def backward(inputs: dict, _output, d_output) -> dict:
        when_available(show, d_output)
        return {'x': d_output}
    return custom_gradient(lambda x: x, backward)(value)
