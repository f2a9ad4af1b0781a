"""`lazyphi.nn` on JAX: networks holding their parameters, optimizers, training steps, saving and loading.

Written in plain JAX (no stax, flax or optax); the architectures, and so the parameter counts, are those of
phiml's networks (the layers are in `lazyphi.nn._jax_layers`).

JAX specifics:

- **Networks** are `JaxNet`s: a layer configuration plus `parameters` (trainable) and `statistics` (batch-norm
  running means and variances), nested dicts of `jax.Array`s. A network is callable on `jax.Array`s laid out
  channels last, `(batch, *spatial, channel)`, so `math.native_call(net, x)` runs it on tensors; its forward pass
  is compiled once per input shape with `jax.jit`. Networks pickle (their arrays as NumPy arrays).
- **Training mode.** A new network is in training mode (as in torch): batch normalization normalizes by the
  batch's statistics and moves the running statistics towards them on each call. `net.eval()` switches to the
  running statistics, `net.train()` back. Inside a JAX transformation the user started (`jax.jit`, `jax.grad`)
  the running statistics are not updated, since the new values are tracers; in `update_weights` they are.
- **update_weights** differentiates `loss_function` with `math.gradient` with respect to the network's
  parameters, which the network uses in place of its own while the loss is computed, then applies the
  optimizer and stores the new parameters (and running statistics) in the network. If `loss_function` was made
  by `math.jit_compile`, the whole step (forward pass, gradient, optimizer update) is compiled instead, with
  the parameters, optimizer state and learning rate as inputs, once per shape of the loss arguments; the
  function's own compiled versions are cleared after each step. Calling such a function directly compiles the
  network's parameters of that moment into it as constants, so another `jit_compile`d function closing over
  the network sees the parameters it was traced with until it is traced again.
- **Optimizers** follow torch's update rules, all options included (weight decay, momentum, dampening,
  Nesterov, centered RMSprop, Adagrad's learning-rate decay). A learning rate set by `set_learning_rate`
  applies from the next step on without compiling again.
- **save_state / load_state** write and read a NumPy `.npz` file: for a network its parameters and running
  statistics by name, for an optimizer its step count, learning rate and state per parameter. Loading checks
  the names and shapes.
- **invertible_net** builds phiml's torch architecture (affine coupling blocks of four networks each);
  calling the network with `backward=True` inverts it. phiml offers it on torch and TensorFlow only.
"""

import functools
import itertools
import os
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import math
from ..backend import backend_by_name
from ..math import Tensor, channel
from . import _jax_layers as layer_lib
from ._jax_layers import Invertible, Layer


class JaxNet:
    """A JAX network: its layers, trainable `parameters` and batch-norm running `statistics`, callable on
    `jax.Array`s laid out `(batch, *spatial, channel)`.

    Args:
        layer: the architecture (see `lazyphi.nn._jax_layers`).
        parameters: the trainable arrays, a nested dict as `layer.init` makes it.
        statistics: the running statistics, a nested dict as `layer.init` makes it.
    """

    def __init__(self, layer: Layer, parameters: dict, statistics: dict):
        self.layer = layer
        self.parameters = parameters
        self.statistics = statistics
        self.training = True
        self._setup()

    def _setup(self) -> None:
        self._traced = None  # the parameters and statistics standing in for the own ones while update_weights runs
        self._forward = jax.jit(functools.partial(_forward, self.layer), static_argnums=(3, 4))

    def train(self, mode: bool = True) -> 'JaxNet':
        """Sets training mode (batch statistics, running statistics updated) or, with `mode=False`, evaluation."""
        self.training = bool(mode)
        return self

    def eval(self) -> 'JaxNet':
        """Sets evaluation mode: batch normalization uses the running statistics."""
        return self.train(False)

    def __call__(self, x: Any, backward: bool = False) -> jax.Array:
        """The network's output for `x`; `backward=True` runs an invertible network backwards."""
        if backward and not isinstance(self.layer, Invertible):
            raise ValueError(f'backward=True runs invertible networks backwards; this network is a '
                             f'{type(self.layer).__name__}')
        traced = self._traced
        parameters, statistics = traced if traced is not None else (self.parameters, self.statistics)
        y, new_statistics = self._forward(parameters, statistics, x, self.training, bool(backward))
        if self.training and new_statistics:
            if traced is not None:
                self._traced = (parameters, new_statistics)
            elif not layer_lib.is_traced(new_statistics):
                self.statistics = new_statistics
        return y

    @contextmanager
    def _standing_in(self, parameters: dict, statistics: dict):
        """Makes the network use `parameters` and `statistics` (a transformation's tracers) for the duration;
        yields a function returning the statistics as the calls left them."""
        self._traced = (parameters, statistics)
        try:
            yield lambda: self._traced[1]
        finally:
            self._traced = None

    def __getstate__(self) -> dict:
        return {'layer': self.layer, 'parameters': jax.tree.map(np.asarray, self.parameters),
                'statistics': jax.tree.map(np.asarray, self.statistics), 'training': self.training}

    def __setstate__(self, state: dict) -> None:
        self.layer, self.training = state['layer'], state['training']
        self.parameters = jax.tree.map(jnp.asarray, state['parameters'])
        self.statistics = jax.tree.map(jnp.asarray, state['statistics'])
        self._setup()

    def __repr__(self) -> str:
        count = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(self.parameters))
        return f'JaxNet({type(self.layer).__name__}, {count} parameters, {"training" if self.training else "eval"})'


def _forward(layer: Layer, parameters: dict, statistics: dict, x: Any, training: bool, backward: bool):
    if backward:
        return layer.apply(parameters, statistics, x, training, backward=True)
    return layer.apply(parameters, statistics, x, training)


def _network(layer: Layer) -> JaxNet:
    parameters, statistics = layer.init(layer_lib.Arrays(backend_by_name('jax').float_type))
    return JaxNet(layer, parameters, statistics)


# --- parameters, saving, loading ------------------------------------------------------------


def _named(tree: dict) -> dict[str, jax.Array]:
    """The arrays of a nested dict by their '.'-joined paths."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {'.'.join(str(key.key) for key in path): leaf for path, leaf in flat}


def _dims(rank: int) -> list[str]:
    if rank == 1:
        return ['output']
    return [*['x', 'y', 'z'][:rank - 2], 'input', 'output']


def get_parameters(net: JaxNet) -> dict[str, Tensor]:
    """The trainable parameters of `net` by path ('linear0.weight'), as tensors with channel dims: `output` for
    biases and batch-norm scales and offsets, `input, output` for dense weights, `x, (y, z,) input, output` for
    convolution kernels. Running statistics are not parameters (as in phiml)."""
    _check_net(net)
    return {name: math.wrap(array, channel(*_dims(array.ndim))) for name, array in _named(net.parameters).items()}


def _with_extension(path: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f'path must be a str or path-like, got {type(path).__name__} {path!r}')
    path = os.fspath(path)
    return path if path.endswith('.npz') else path + '.npz'


def save_state(obj: 'JaxNet | JaxOptimizer', path: str) -> str:
    """Writes the arrays of a network or optimizer to a NumPy `.npz` file (the extension added if missing)."""
    path = _with_extension(path)
    np.savez(path, **_state_arrays(obj))
    return path


def _state_arrays(obj) -> dict[str, np.ndarray]:
    if isinstance(obj, JaxNet):
        return {**{f'parameters/{n}': np.asarray(a) for n, a in _named(obj.parameters).items()},
                **{f'statistics/{n}': np.asarray(a) for n, a in _named(obj.statistics).items()}}
    if isinstance(obj, JaxOptimizer):
        names = obj.names
        return {'count': np.asarray(obj.count), 'learning_rate': np.asarray(obj.learning_rate),
                **{f'{key}/{n}': np.asarray(a) for key, values in obj.state.items()
                   for n, a in zip(names, values, strict=True)}}
    raise TypeError(f'save_state() and load_state() take a JAX network or optimizer of lazyphi.nn, '
                    f'got {type(obj).__name__}')


def load_state(obj: 'JaxNet | JaxOptimizer', path: str) -> None:
    """Reads into `obj` what `save_state()` wrote to `path`; the names and shapes must match `obj`'s."""
    expected = _state_arrays(obj)
    path = _with_extension(path)
    with np.load(path, allow_pickle=False) as stored:
        found = {name: stored[name] for name in stored.files}
    if set(found) != set(expected):
        raise ValueError(f'{path} holds the state of another {type(obj).__name__}: it lacks '
                         f'{sorted(set(expected) - set(found))} and has the unknown '
                         f'{sorted(set(found) - set(expected))}')
    wrong = [f'{n}: {found[n].shape} instead of {a.shape}' for n, a in expected.items() if found[n].shape != a.shape]
    if wrong:
        raise ValueError(f'{path} holds arrays of other shapes than {type(obj).__name__} has: {"; ".join(wrong)}')
    arrays = {n: jnp.asarray(found[n], a.dtype) for n, a in expected.items()}
    if isinstance(obj, JaxNet):
        obj.parameters = _replaced(obj.parameters, 'parameters', arrays)
        obj.statistics = _replaced(obj.statistics, 'statistics', arrays)
    else:
        obj.count, obj.learning_rate = int(found['count']), float(found['learning_rate'])
        obj.state = {key: [arrays[f'{key}/{n}'] for n in obj.names] for key in obj.state}


def _replaced(tree: dict, prefix: str, arrays: dict) -> dict:
    paths = list(_named(tree))
    return jax.tree.unflatten(jax.tree.structure(tree), [arrays[f'{prefix}/{n}'] for n in paths])


def _check_net(net) -> None:
    if not isinstance(net, JaxNet):
        raise TypeError(f'Expected a JAX network made by lazyphi.nn (nn.use("jax")), got {type(net).__name__}')


# --- optimizers -----------------------------------------------------------------------------


class JaxOptimizer:
    """An optimizer for the parameters of one network: an update rule of torch's, its options, its state per
    parameter (a list per kind of state, in the order of the network's parameters), step count and learning rate.
    """

    def __init__(self, net: JaxNet, rule: str, learning_rate: float, options: dict):
        _check_net(net)
        self.rule, self.options = rule, options
        self.learning_rate = _learning_rate(learning_rate)
        self.count = 0
        self.names = list(_named(net.parameters))
        self._structure = jax.tree.structure(net.parameters)
        leaves = jax.tree.leaves(net.parameters)
        initial = _STATE[rule](options)
        self.state = {key: [jnp.full_like(p, value) for p in leaves] for key, value in initial.items()}
        self._setup()

    def _setup(self) -> None:
        self._update = jax.jit(functools.partial(_apply_rule, _RULES[self.rule], self.options))
        self._steps: dict = {}  # compiled training steps by (network, loss function, training mode)

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ('_update', '_steps')}
        state['state'] = {key: [np.asarray(a) for a in values] for key, values in self.state.items()}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.state = {key: [jnp.asarray(a) for a in values] for key, values in self.state.items()}
        self._setup()

    def check(self, net: JaxNet) -> None:
        if jax.tree.structure(net.parameters) != self._structure:
            raise ValueError('This optimizer was made for a network of other parameters; make one for this network '
                             '(nn.adam(net), ...)')

    def __repr__(self) -> str:
        return f'JaxOptimizer({self.rule}, learning_rate={self.learning_rate}, step {self.count})'


def _learning_rate(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not np.isfinite(value) or value < 0:
        raise ValueError(f'The learning rate must be a finite number >= 0, got {value!r}')
    return float(value)


def _apply_rule(rule: Callable, options: dict, parameters: list, gradients: list, state: dict, learning_rate, count):
    """`rule` applied to each parameter: the new parameters and state (lists in the order of `parameters`)."""
    new_parameters, new_state = [], {key: [] for key in state}
    for i, (p, g) in enumerate(zip(parameters, gradients, strict=True)):
        p, s = rule(p, g, {key: values[i] for key, values in state.items()}, learning_rate, count + 1, **options)
        new_parameters.append(p)
        for key, value in s.items():
            new_state[key].append(value)
    return new_parameters, new_state


def _adam(p, g, s, lr, t, betas, epsilon):
    m = betas[0] * s['exp_avg'] + (1 - betas[0]) * g
    v = betas[1] * s['exp_avg_sq'] + (1 - betas[1]) * g * g
    m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
    return p - lr * m_hat / (jnp.sqrt(v_hat) + epsilon), {'exp_avg': m, 'exp_avg_sq': v}


def _sgd(p, g, s, lr, t, momentum, dampening, weight_decay, nesterov):
    g = g + weight_decay * p
    if not momentum:
        return p - lr * g, {}
    buffer = jnp.where(t == 1, g, momentum * s['momentum_buffer'] + (1 - dampening) * g)
    step = g + momentum * buffer if nesterov else buffer
    return p - lr * step, {'momentum_buffer': buffer}


def _adagrad(p, g, s, lr, t, lr_decay, weight_decay, initial_accumulator_value, eps):
    g = g + weight_decay * p
    total = s['sum'] + g * g
    return p - lr / (1 + (t - 1) * lr_decay) * g / (jnp.sqrt(total) + eps), {'sum': total}


def _rmsprop(p, g, s, lr, t, alpha, eps, weight_decay, momentum, centered):
    g = g + weight_decay * p
    square_avg = alpha * s['square_avg'] + (1 - alpha) * g * g
    new = {'square_avg': square_avg}
    if centered:
        new['grad_avg'] = alpha * s['grad_avg'] + (1 - alpha) * g
        avg = jnp.sqrt(square_avg - new['grad_avg'] ** 2) + eps
    else:
        avg = jnp.sqrt(square_avg) + eps
    if momentum:
        new['momentum_buffer'] = momentum * s['momentum_buffer'] + g / avg
        return p - lr * new['momentum_buffer'], new
    return p - lr * g / avg, new


_RULES = {'adam': _adam, 'sgd': _sgd, 'adagrad': _adagrad, 'rmsprop': _rmsprop}
_STATE: dict[str, Callable[[dict], dict]] = {  # the kinds of state of each rule, with their initial values
    'adam': lambda o: {'exp_avg': 0., 'exp_avg_sq': 0.},
    'sgd': lambda o: {'momentum_buffer': 0.} if o['momentum'] else {},
    'adagrad': lambda o: {'sum': o['initial_accumulator_value']},
    'rmsprop': lambda o: {'square_avg': 0., **({'grad_avg': 0.} if o['centered'] else {}),
                          **({'momentum_buffer': 0.} if o['momentum'] else {})},
}


def _number(name: str, value, low: float = 0., high: float = np.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not low <= value <= high:
        raise ValueError(f'{name} must be a number in [{low}, {high}], got {value!r}')
    return float(value)


def adam(net: JaxNet, learning_rate: float, betas: tuple, epsilon: float) -> JaxOptimizer:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f'betas must be a pair of numbers in [0, 1), got {betas!r}')
    betas = (_number('betas[0]', betas[0], high=1.), _number('betas[1]', betas[1], high=1.))
    return JaxOptimizer(net, 'adam', learning_rate, {'betas': betas, 'epsilon': _number('epsilon', epsilon)})


def sgd(net: JaxNet, learning_rate: float, momentum: float, dampening: float, weight_decay: float,
        nesterov: bool) -> JaxOptimizer:
    options = {'momentum': _number('momentum', momentum), 'dampening': _number('dampening', dampening),
               'weight_decay': _number('weight_decay', weight_decay), 'nesterov': bool(nesterov)}
    if nesterov and (not options['momentum'] or options['dampening']):
        raise ValueError(f'Nesterov momentum needs momentum > 0 and dampening 0, got momentum={momentum}, '
                         f'dampening={dampening}')
    return JaxOptimizer(net, 'sgd', learning_rate, options)


def adagrad(net: JaxNet, learning_rate: float, lr_decay: float, weight_decay: float,
            initial_accumulator_value: float, eps: float) -> JaxOptimizer:
    return JaxOptimizer(net, 'adagrad', learning_rate, {
        'lr_decay': _number('lr_decay', lr_decay), 'weight_decay': _number('weight_decay', weight_decay),
        'initial_accumulator_value': _number('initial_accumulator_value', initial_accumulator_value),
        'eps': _number('eps', eps)})


def rmsprop(net: JaxNet, learning_rate: float, alpha: float, eps: float, weight_decay: float, momentum: float,
            centered: bool) -> JaxOptimizer:
    return JaxOptimizer(net, 'rmsprop', learning_rate, {
        'alpha': _number('alpha', alpha, high=1.), 'eps': _number('eps', eps),
        'weight_decay': _number('weight_decay', weight_decay), 'momentum': _number('momentum', momentum),
        'centered': bool(centered)})


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, JaxOptimizer):
        raise TypeError(f'Expected a JAX optimizer made by lazyphi.nn (nn.adam(net), ...), got '
                        f'{type(optimizer).__name__}')


def set_learning_rate(optimizer: JaxOptimizer, learning_rate: float) -> None:
    _check_optimizer(optimizer)
    optimizer.learning_rate = _learning_rate(learning_rate)


def get_learning_rate(optimizer: JaxOptimizer) -> float:
    _check_optimizer(optimizer)
    return optimizer.learning_rate


# --- training -------------------------------------------------------------------------------


_SHAPES: dict[tuple, math.Shape] = {}


def _as_tensors(arrays: list) -> list[Tensor]:
    """`arrays` as tensors to carry through `math.gradient` and `jit_compile`; the dims' names do not matter."""
    tensors = []
    for a in arrays:
        shape = _SHAPES.get(a.shape)
        if shape is None:  # made once per array shape: wrapping with a ready shape is several times faster
            shape = _SHAPES[a.shape] = channel(**{f'axis{i}': n for i, n in enumerate(a.shape)})
        tensors.append(math.wrap(a, shape))
    return tensors


def _natives(tensors: list[Tensor]) -> list:
    return [t.native() for t in tensors]


def _gradient_step(net: JaxNet, loss_function: Callable) -> Callable:
    """A function of the network's parameters and statistics (lists of tensors) and the loss arguments returning
    the loss function's output, the gradients of the loss and the statistics after the call."""
    parameter_structure = jax.tree.structure(net.parameters)
    statistics_structure = jax.tree.structure(net.statistics)

    def loss(parameters: list, statistics: list, args: tuple, kwargs: dict) -> tuple:
        with net._standing_in(jax.tree.unflatten(parameter_structure, _natives(parameters)),
                              jax.tree.unflatten(statistics_structure, _natives(statistics))) as used:
            output = loss_function(*args, **kwargs)
            new_statistics = jax.tree.leaves(used())
        first = output[0] if isinstance(output, (tuple, list)) else output
        return first, output, _as_tensors(new_statistics)
    gradient = math.gradient(loss, wrt='parameters')

    def step(parameters: list, statistics: list, args: tuple, kwargs: dict) -> tuple:
        (_, output, new_statistics), gradients = gradient(parameters, statistics, args, kwargs)
        return output, gradients, new_statistics
    return step


def _compiled_step(net: JaxNet, optimizer: 'JaxOptimizer', loss_function: Callable) -> Callable:
    """The whole step of `update_weights` compiled by `jit_compile`: everything that changes between steps
    (parameters, optimizer state, statistics, learning rate, step count) is an input, so nothing is compiled in."""
    gradient_step = _gradient_step(net, loss_function)

    def step(parameters: list, state: dict, statistics: list, learning_rate: Tensor, count: Tensor, args: tuple,
             kwargs: dict) -> tuple:
        output, gradients, new_statistics = gradient_step(parameters, statistics, args, kwargs)
        new_parameters, new_state = optimizer._update(_natives(parameters), _natives(gradients),
                                                      {k: _natives(v) for k, v in state.items()},
                                                      learning_rate.native(), count.native())
        return (_as_tensors(new_parameters), {k: _as_tensors(v) for k, v in new_state.items()}, new_statistics,
                output)
    return math.jit_compile(step)


def update_weights(net: JaxNet, optimizer: JaxOptimizer, loss_function: Callable, *loss_args, **loss_kwargs):
    """One step of `optimizer` on the parameters of `net` along the gradient of `loss_function`'s loss; returns
    the loss function's output (computed with the parameters before the step)."""
    _check_net(net)
    _check_optimizer(optimizer)
    optimizer.check(net)
    if not callable(loss_function):
        raise TypeError(f'loss_function must be callable, got {type(loss_function).__name__}')
    parameters = _as_tensors(jax.tree.leaves(net.parameters))
    statistics = _as_tensors(jax.tree.leaves(net.statistics))
    if isinstance(loss_function, math.JitFunction):
        key = (net, loss_function, net.training)  # the mode is read while tracing: compiled in
        step = optimizer._steps.get(key)
        if step is None:
            step = optimizer._steps[key] = _compiled_step(net, optimizer, loss_function.f)
        dtype = parameters[0].native().dtype
        parameters, state, statistics, output = step(
            parameters, {k: _as_tensors(v) for k, v in optimizer.state.items()}, statistics,
            math.wrap(jnp.asarray(optimizer.learning_rate, dtype)), math.wrap(jnp.asarray(optimizer.count)),
            loss_args, loss_kwargs)
        new_parameters, new_state = _natives(parameters), {k: _natives(v) for k, v in state.items()}
        loss_function.traces.clear()  # called directly, it would still use the parameters it was traced with
    else:
        output, gradients, statistics = _gradient_step(net, loss_function)(parameters, statistics, loss_args,
                                                                           loss_kwargs)
        new_parameters, new_state = optimizer._update(_natives(parameters), _natives(gradients), optimizer.state,
                                                      optimizer.learning_rate, optimizer.count)
    net.parameters = jax.tree.unflatten(jax.tree.structure(net.parameters), new_parameters)
    if net.training:
        net.statistics = jax.tree.unflatten(jax.tree.structure(net.statistics), _natives(statistics))
    optimizer.state = new_state
    optimizer.count += 1
    return output


# --- networks -------------------------------------------------------------------------------


def _count(name: str, value, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f'{name} must be an int >= {low}, got {value!r}')
    return int(value)


def _widths(name: str, values) -> list[int]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f'{name} must be a sequence of ints >= 1, got {values!r}')
    return [_count(f'{name}[{i}]', v) for i, v in enumerate(values)]


def _spatial_rank(in_spatial) -> int:
    if isinstance(in_spatial, (int, np.integer)) and not isinstance(in_spatial, bool) and 1 <= in_spatial <= 3:
        return int(in_spatial)
    if isinstance(in_spatial, (tuple, list)) and 1 <= len(in_spatial) <= 3:
        return len(in_spatial)
    raise ValueError(f'in_spatial must be the number of spatial dims (1, 2 or 3) or a tuple of their sizes, '
                     f'got {in_spatial!r}')


def mlp(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
        activation: str | Callable = 'ReLU', softmax: bool = False) -> JaxNet:
    return _network(layer_lib.Sequential(layer_lib.dense_layers(
        _count('in_channels', in_channels), _count('out_channels', out_channels), _widths('layers', layers),
        batch_norm, activation, softmax)))


def u_net(in_channels: int, out_channels: int, levels: int = 4, filters: int | Sequence[int] = 16,
          batch_norm: bool = True, activation: str | Callable = 'ReLU', in_spatial: tuple | int = 2,
          periodic: bool = False, use_res_blocks: bool = False, down_kernel_size: int = 3,
          up_kernel_size: int = 3) -> JaxNet:
    levels = _count('levels', levels)
    if isinstance(filters, (int, np.integer)) and not isinstance(filters, bool):
        filters = [_count('filters', filters)] * levels
    else:
        filters = _widths('filters', filters)
        if len(filters) != levels:
            raise ValueError(f'filters must be one int or one per level ({levels}), got {len(filters)}: {filters}')
    return _network(layer_lib.UNet(_spatial_rank(in_spatial), _count('in_channels', in_channels),
                                 _count('out_channels', out_channels), filters, batch_norm, activation, periodic,
                                 use_res_blocks, _count('down_kernel_size', down_kernel_size),
                                 _count('up_kernel_size', up_kernel_size)))


def conv_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
             activation: str | Callable = 'ReLU', in_spatial: int | tuple = 2, periodic: bool = False) -> JaxNet:
    d, out_channels = _spatial_rank(in_spatial), _count('out_channels', out_channels)
    widths = [_count('in_channels', in_channels), *(_widths('layers', layers) or [out_channels])]
    units = [(f'conv{i}', layer_lib.Sequential(layer_lib.conv_unit(d, a, b, batch_norm, activation, periodic)))
             for i, (a, b) in enumerate(itertools.pairwise(widths))]
    out = layer_lib.Conv(d, widths[-1], out_channels, 1, periodic)
    return _network(layer_lib.Sequential([*units, ('conv_out', out)]))


def res_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
            activation: str | Callable = 'ReLU', in_spatial: int | tuple = 2, periodic: bool = False) -> JaxNet:
    d, out_channels = _spatial_rank(in_spatial), _count('out_channels', out_channels)
    widths = [_count('in_channels', in_channels), *(_widths('layers', layers) or [out_channels])]
    blocks = [(f'res{i}', layer_lib.ResBlock(d, a, b, batch_norm, activation, periodic))
              for i, (a, b) in enumerate(itertools.pairwise(widths))]
    out = layer_lib.Conv(d, widths[-1], out_channels, 1, periodic)
    return _network(layer_lib.Sequential([*blocks, ('res_out', out)]))


def conv_classifier(in_features: int, in_spatial: tuple | list, num_classes: int, blocks: Sequence[int],
                    block_sizes: Sequence[int], dense_layers: Sequence[int], batch_norm: bool,
                    activation: str | Callable, softmax: bool, periodic: bool) -> JaxNet:
    if not isinstance(in_spatial, (tuple, list)) or not 1 <= len(in_spatial) <= 3:
        raise ValueError(f'in_spatial must be a tuple of 1 to 3 spatial sizes, got {in_spatial!r}')
    sizes = _widths('in_spatial', in_spatial)
    d, width = len(sizes), _count('in_features', in_features)
    stages = []
    # as phiml's JAX classifier: a block per entry of both `blocks` and `block_sizes` (whose defaults differ in length)
    for i, (channels, size) in enumerate(zip(_widths('blocks', blocks), _widths('block_sizes', block_sizes),
                                             strict=False)):
        units = [(f'unit{j}', layer_lib.Sequential(layer_lib.conv_unit(
            d, width if j == 0 else channels, channels, batch_norm, activation, periodic))) for j in range(size)]
        stages += [(f'conv{i + 1}', layer_lib.Sequential(units)), (f'pool{i + 1}', layer_lib.MaxPool(d, ceil=False))]
        sizes, width = [s // 2 for s in sizes], channels
    if not all(sizes):
        raise ValueError(f'in_spatial {tuple(in_spatial)} is too small for {len(stages) // 2} halvings of the '
                         f'resolution')
    dense = layer_lib.Sequential(layer_lib.dense_layers(
        int(np.prod(sizes)) * width, _count('num_classes', num_classes), _widths('dense_layers', dense_layers),
        batch_norm, activation, softmax))
    return _network(layer_lib.Sequential([*stages, ('flatten', layer_lib.Flatten()), ('dense', dense)]))


def _dense_res_block(in_channels: int, layers: Sequence[int], batch_norm: bool = False,
                     activation: str | Callable = 'ReLU', softmax: bool = False, out_channels: int | None = None):
    """The network of invertible dense networks: dense units `in_channels -> *layers -> in_channels`, plus the
    input."""
    if softmax:
        raise ValueError('An invertible network cannot end in a softmax; pass softmax=False')
    if out_channels is not None and out_channels != in_channels:
        raise ValueError(f'The networks of an invertible network keep the channels: out_channels must be '
                         f'in_channels ({in_channels}) or None, got {out_channels}')
    widths = [_count('in_channels', in_channels), *_widths('layers', layers), in_channels]
    units = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        units += [(f'linear{i}', layer_lib.Dense(a, b)), (f'activation{i}', layer_lib.Activation(activation))]
        if batch_norm:
            units.append((f'norm{i}', layer_lib.BatchNorm(b)))
    return _network(layer_lib.Residual(layer_lib.Sequential(units)))


_INVERTIBLE_NETS = {'mlp': _dense_res_block, 'u_net': u_net, 'res_net': res_net, 'conv_net': conv_net}


def invertible_net(num_blocks: int, construct_net: str | Callable, **construct_kwargs) -> JaxNet:
    num_blocks = _count('num_blocks', num_blocks)
    if isinstance(construct_net, str):
        if construct_net not in _INVERTIBLE_NETS:
            raise ValueError(f'construct_net must be one of {", ".join(_INVERTIBLE_NETS)} or a function returning a '
                             f'network, got {construct_net!r}')
        if 'in_channels' in construct_kwargs:
            construct_kwargs.setdefault('out_channels', construct_kwargs['in_channels'])
        construct_net = _INVERTIBLE_NETS[construct_net]
    elif not callable(construct_net):
        raise TypeError(f'construct_net must be a name or a function returning a network, got {construct_net!r}')
    blocks, children = [], {}
    for i in range(num_blocks):
        nets = {name: construct_net(**construct_kwargs) for name in ('s1', 't1', 's2', 't2')}
        for net in nets.values():
            _check_net(net)
        blocks.append(layer_lib.Coupling({name: net.layer for name, net in nets.items()}, reverse_mask=i % 2 == 0))
        children[f'coupling_block{i + 1}'] = layer_lib.assemble({n: (net.parameters, net.statistics)
                                                              for n, net in nets.items()})
    return JaxNet(Invertible(blocks), *layer_lib.assemble(children))
