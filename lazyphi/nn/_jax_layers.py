"""The layers of lazyphi's JAX networks: plain classes holding only their configuration, so that networks pickle.

A layer makes its arrays with `init(arrays)` (an `Arrays`), returning `(parameters, statistics)`: nested dicts
of `jax.Array`s, the trainable parameters and the batch-norm running statistics.
`apply(parameters, statistics, x, training)` is a pure function of them returning `(y, statistics)`, the
statistics updated where `training` is set. Inputs and outputs are channels last: `(batch, *spatial, channel)`.
The architectures (and so the parameter counts) are those of phiml's networks.
"""

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..backend import DType, backend_by_name, to_numpy_dtype

_EPSILON = 1e-5  # of batch normalization, torch's default
_MOMENTUM = 0.1  # weight of the newest batch in the running statistics, torch's default

ACTIVATIONS: dict[str, Callable] = {
    'relu': jax.nn.relu,
    'silu': jax.nn.silu,
    'swish': jax.nn.silu,
    'sigmoid': jax.nn.sigmoid,
    'tanh': jnp.tanh,
    'leaky_relu': jax.nn.leaky_relu,
    'leakyrelu': jax.nn.leaky_relu,
    'softplus': jax.nn.softplus,
    'elu': jax.nn.elu,
    'selu': jax.nn.selu,
    'gelu': jax.nn.gelu,
}
"""Activations by lower-case name (phiml's names 'ReLU', 'SiLU', 'tanh', ... match case-insensitively)."""


def activation_function(activation: str | Callable) -> Callable:
    """The function of an activation given by name or as a function of `jax.Array`s."""
    if callable(activation):
        return activation
    if isinstance(activation, str) and activation.lower() in ACTIVATIONS:
        return ACTIVATIONS[activation.lower()]
    raise ValueError(f"Unknown activation {activation!r}; accepted are a function of jax arrays or one of the names "
                     f"{', '.join(sorted(ACTIVATIONS))} (any case, e.g. 'ReLU', 'SiLU', 'LeakyReLU')")


class Arrays:
    """Makes the initial arrays of a network, of one floating-point type.

    The random values come from NumPy, seeded by a value the JAX backend draws (so that `math.seed()` makes
    networks reproducible): drawing them with JAX would compile a function per array shape.
    """

    def __init__(self, dtype: DType):
        self.dtype = to_numpy_dtype(dtype)
        seed = backend_by_name('jax').random_uniform((), 0, 2 ** 31 - 1, DType(int, 64))
        self.random = np.random.default_rng(int(seed))

    def uniform(self, shape: tuple, bound: float) -> jax.Array:
        return jnp.asarray(self.random.uniform(-bound, bound, shape).astype(self.dtype))

    def full(self, size: int, value: float) -> jax.Array:
        return jnp.full((size,), value, self.dtype)


class Layer:
    """A piece of a network (see the module docstring); the base class has neither parameters nor statistics."""

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        return {}, {}

    def apply(self, parameters: dict, statistics: dict, x: jax.Array, training: bool) -> tuple[jax.Array, dict]:
        raise NotImplementedError(type(self).__name__)


class Dense(Layer):
    """`x @ weight + bias`, weights drawn as torch draws them, biases zero (as phiml sets them)."""

    def __init__(self, in_features: int, out_features: int):
        self.in_features, self.out_features = in_features, out_features

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        weight = arrays.uniform((self.in_features, self.out_features), self.in_features ** -0.5)
        return {'weight': weight, 'bias': arrays.full(self.out_features, 0)}, {}

    def apply(self, parameters, statistics, x, training):
        return x @ parameters['weight'] + parameters['bias'], statistics


_SPATIAL_LETTERS = {1: 'H', 2: 'HW', 3: 'DHW'}


class Conv(Layer):
    """A convolution of odd or even `kernel_size` keeping the spatial size: the input is padded by zeros or,
    if `periodic`, by wrapping around."""

    def __init__(self, d: int, in_channels: int, out_channels: int, kernel_size: int, periodic: bool):
        self.d, self.in_channels, self.out_channels = d, in_channels, out_channels
        self.kernel_size, self.periodic = kernel_size, periodic

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        fan_in = self.in_channels * self.kernel_size ** self.d
        weight = arrays.uniform((self.kernel_size,) * self.d + (self.in_channels, self.out_channels), fan_in ** -0.5)
        return {'weight': weight, 'bias': arrays.full(self.out_channels, 0)}, {}

    def apply(self, parameters, statistics, x, training):
        k = self.kernel_size
        if k > 1:
            widths = [(0, 0)] + [((k - 1) // 2, k // 2)] * self.d + [(0, 0)]
            x = jnp.pad(x, widths, mode='wrap' if self.periodic else 'constant')
        letters = _SPATIAL_LETTERS[self.d]
        y = lax.conv_general_dilated(x, parameters['weight'], (1,) * self.d, 'VALID',
                                     dimension_numbers=(f'N{letters}C', f'{letters}IO', f'N{letters}C'))
        return y + parameters['bias'], statistics


class BatchNorm(Layer):
    """Normalization over all axes but the channel axis, with a trained scale and offset.

    Training uses the batch's mean and variance and moves the running statistics towards them (the variance
    unbiased, as torch does); otherwise the running statistics normalize.
    """

    def __init__(self, channels: int):
        self.channels = channels

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        ones, zeros = arrays.full(self.channels, 1), arrays.full(self.channels, 0)
        return {'scale': ones, 'offset': zeros}, {'mean': zeros, 'var': ones}

    def apply(self, parameters, statistics, x, training):
        if training:
            axes = tuple(range(x.ndim - 1))
            mean, var = jnp.mean(x, axes), jnp.var(x, axes)
            count = x.size // x.shape[-1]
            unbiased = lax.stop_gradient(var) * (count / max(count - 1, 1))
            statistics = {'mean': (1 - _MOMENTUM) * statistics['mean'] + _MOMENTUM * lax.stop_gradient(mean),
                          'var': (1 - _MOMENTUM) * statistics['var'] + _MOMENTUM * unbiased}
        else:
            mean, var = statistics['mean'], statistics['var']
        y = (x - mean) * lax.rsqrt(var + _EPSILON)
        return y * parameters['scale'] + parameters['offset'], statistics


class Activation(Layer):
    """An element-wise non-linearity, kept by name where it has one (so that the layer pickles)."""

    def __init__(self, activation: str | Callable):
        activation_function(activation)  # checks the name now
        self.activation = activation

    def apply(self, parameters, statistics, x, training):
        return activation_function(self.activation)(x), statistics


class Softmax(Layer):
    """Softmax over the channel axis."""

    def apply(self, parameters, statistics, x, training):
        return jax.nn.softmax(x, axis=-1), statistics


class MaxPool(Layer):
    """Maximum over windows of 2 along each spatial axis; an odd size rounds up if `ceil`, else down."""

    def __init__(self, d: int, ceil: bool):
        self.d, self.ceil = d, ceil

    def apply(self, parameters, statistics, x, training):
        window = (1,) + (2,) * self.d + (1,)
        return lax.reduce_window(x, -jnp.inf, lax.max, window, window, 'SAME' if self.ceil else 'VALID'), statistics


def upsample2x(x: jax.Array, like: jax.Array) -> jax.Array:
    """`x` at twice the resolution along each spatial axis by linear interpolation (the outermost values
    repeated beyond the edges), cut to the spatial size of `like`."""
    for axis in range(1, x.ndim - 1):
        size = x.shape[axis]
        first, last = lax.slice_in_dim(x, 0, 1, axis=axis), lax.slice_in_dim(x, size - 1, size, axis=axis)
        lower = jnp.concatenate([first, lax.slice_in_dim(x, 0, size - 1, axis=axis)], axis)
        upper = jnp.concatenate([lax.slice_in_dim(x, 1, size, axis=axis), last], axis)
        even, odd = 0.75 * x + 0.25 * lower, 0.75 * x + 0.25 * upper
        x = jnp.stack([even, odd], axis + 1).reshape((*x.shape[:axis], 2 * size, *x.shape[axis + 1:]))
        x = lax.slice_in_dim(x, 0, like.shape[axis], axis=axis)
    return x


class Sequential(Layer):
    """Named layers applied one after the other; the parameters and statistics are dicts by layer name."""

    def __init__(self, layers: Sequence[tuple[str, Layer]]):
        self.layers = tuple(layers)

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        parameters, statistics = {}, {}
        for name, layer in self.layers:
            p, s = layer.init(arrays)
            if p:
                parameters[name] = p
            if s:
                statistics[name] = s
        return parameters, statistics

    def apply(self, parameters, statistics, x, training):
        statistics = dict(statistics)
        for name, layer in self.layers:
            x = run(layer, name, parameters, statistics, x, training)
        return x, statistics


def run(layer: Layer, name: str, parameters: dict, statistics: dict, x: jax.Array, training: bool) -> jax.Array:
    """Applies the child `name` of a composite layer, storing its new statistics in the dict `statistics`."""
    y, new = layer.apply(parameters.get(name, {}), statistics.get(name, {}), x, training)
    if new:
        statistics[name] = new
    return y


def conv_unit(d: int, in_channels: int, out_channels: int, batch_norm: bool, activation, periodic: bool,
              kernel_size: int = 3) -> list[tuple[str, Layer]]:
    """Convolution, batch normalization if asked, activation."""
    layers = [('conv', Conv(d, in_channels, out_channels, kernel_size, periodic))]
    if batch_norm:
        layers.append(('norm', BatchNorm(out_channels)))
    return [*layers, ('activation', Activation(activation))]


def double_conv(d: int, in_channels: int, out_channels: int, mid_channels: int, batch_norm: bool, activation,
                periodic: bool, kernel_size: int) -> Sequential:
    """Two convolution units, `in_channels -> mid_channels -> out_channels`."""
    return Sequential([('conv1', Sequential(conv_unit(d, in_channels, mid_channels, batch_norm, activation, periodic,
                                                      kernel_size))),
                       ('conv2', Sequential(conv_unit(d, mid_channels, out_channels, batch_norm, activation, periodic,
                                                      kernel_size)))])


class ResBlock(Layer):
    """Two convolution units plus the input, brought to `out_channels` by a 1-wide convolution (and batch
    normalization) where the channel counts differ."""

    def __init__(self, d: int, in_channels: int, out_channels: int, batch_norm: bool, activation, periodic: bool,
                 kernel_size: int = 3):
        self.body = double_conv(d, in_channels, out_channels, out_channels, batch_norm, activation, periodic,
                                kernel_size)
        skip = []
        if in_channels != out_channels:
            skip.append(('conv', Conv(d, in_channels, out_channels, 1, periodic)))
            if batch_norm:
                skip.append(('norm', BatchNorm(out_channels)))
        self.skip = Sequential(skip)

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        return _init_children({'body': self.body, 'skip': self.skip}, arrays)

    def apply(self, parameters, statistics, x, training):
        statistics = dict(statistics)
        y = run(self.body, 'body', parameters, statistics, x, training)
        return y + run(self.skip, 'skip', parameters, statistics, x, training), statistics


def _init_children(children: dict[str, Layer], arrays: Arrays) -> tuple[dict, dict]:
    return Sequential(list(children.items())).init(arrays)


class UNet(Layer):
    """phiml's U-Net: a block per level on the way down (after a max-pool halving the resolution) and on the way
    up (after linear upsampling, reading the block's input concatenated with the features of its level)."""

    def __init__(self, d: int, in_channels: int, out_channels: int, filters: Sequence[int], batch_norm: bool,
                 activation, periodic: bool, use_res_blocks: bool, down_kernel_size: int, up_kernel_size: int):
        def block(c_in: int, c_out: int, c_mid: int, kernel_size: int) -> Layer:
            if use_res_blocks:
                return ResBlock(d, c_in, c_out, batch_norm, activation, periodic, kernel_size)
            return double_conv(d, c_in, c_out, c_mid, batch_norm, activation, periodic, kernel_size)
        self.levels = len(filters)
        self.children = {'inc': block(in_channels, filters[0], filters[0], down_kernel_size)}
        for i in range(1, self.levels):
            self.children[f'down{i}'] = block(filters[i - 1], filters[i], filters[i], down_kernel_size)
            c_in = filters[-i] + filters[-i - 1]
            self.children[f'up{i}'] = block(c_in, filters[-i - 1], c_in // 2, up_kernel_size)
        self.children['outc'] = Conv(d, filters[0], out_channels, 1, periodic)
        self.pool = MaxPool(d, ceil=True)

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        return _init_children(self.children, arrays)

    def apply(self, parameters, statistics, x, training):
        statistics = dict(statistics)
        x = run(self.children['inc'], 'inc', parameters, statistics, x, training)
        skips = [x]
        for i in range(1, self.levels):
            x, _ = self.pool.apply({}, {}, x, training)
            x = run(self.children[f'down{i}'], f'down{i}', parameters, statistics, x, training)
            skips.insert(0, x)
        for i in range(1, self.levels):
            x = jnp.concatenate([skips[i], upsample2x(x, skips[i])], -1)
            x = run(self.children[f'up{i}'], f'up{i}', parameters, statistics, x, training)
        return run(self.children['outc'], 'outc', parameters, statistics, x, training), statistics


class Flatten(Layer):
    """All axes but the batch axis as one."""

    def apply(self, parameters, statistics, x, training):
        return x.reshape(x.shape[0], -1), statistics


def dense_layers(in_features: int, out_features: int, hidden: Sequence[int], batch_norm: bool, activation,
                 softmax: bool) -> list[tuple[str, Layer]]:
    """phiml's multi-layer perceptron: per hidden layer dense, activation, batch normalization if asked."""
    layers, width = [], in_features
    for i, features in enumerate(hidden):
        layers += [(f'linear{i}', Dense(width, features)), (f'activation{i}', Activation(activation))]
        if batch_norm:
            layers.append((f'norm{i}', BatchNorm(features)))
        width = features
    layers.append(('linear_out', Dense(width, out_features)))
    return layers + ([('softmax', Softmax())] if softmax else [])


class Residual(Layer):
    """A layer whose input is added to its output (the dense block of invertible networks)."""

    def __init__(self, body: Layer):
        self.body = body

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        return self.body.init(arrays)

    def apply(self, parameters, statistics, x, training):
        y, statistics = self.body.apply(parameters, statistics, x, training)
        return y + x, statistics


def coupling_mask(x: jax.Array, reverse: bool) -> jax.Array:
    """1 on every other feature (for `(batch, features)`) or on a checkerboard of the spatial axes, else 0."""
    if x.ndim == 2:
        parity = jnp.arange(x.shape[1]) % 2
    else:
        grids = jnp.meshgrid(*[jnp.arange(n) for n in x.shape[1:-1]], indexing='ij')
        parity = (sum(grids) % 2)[None, ..., None]
    mask = parity.astype(x.dtype)
    return 1 - mask if reverse else mask


class Coupling(Layer):
    """An affine coupling block of Real NVP: the masked half of the input scales and shifts the other half,
    then the other way round, by four networks `s1, t1, s2, t2` (the block of phiml's torch invertible nets)."""

    def __init__(self, nets: dict[str, Layer], reverse_mask: bool):
        self.nets, self.reverse_mask = nets, reverse_mask

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        return _init_children(self.nets, arrays)

    def apply(self, parameters, statistics, x, training, backward: bool = False):
        statistics = dict(statistics)

        def net(name: str, value: jax.Array) -> jax.Array:
            return run(self.nets[name], name, parameters, statistics, value, training)
        mask = coupling_mask(x, self.reverse_mask)
        if backward:
            v1, v2 = x * mask, x * (1 - mask)
            u2 = (1 - mask) * (v2 - net('t1', v1)) * jnp.exp(-net('s1', v1))
            u1 = mask * (v1 - net('t2', u2)) * jnp.exp(-net('s2', u2))
            return u1 + u2, statistics
        u1, u2 = x * mask, x * (1 - mask)
        v1 = mask * (u1 * jnp.exp(net('s2', u2)) + net('t2', u2))
        v2 = (1 - mask) * (u2 * jnp.exp(net('s1', v1)) + net('t1', v1))
        return v1 + v2, statistics


class Invertible(Layer):
    """Coupling blocks in a row; run backwards they invert the forward pass (given the same statistics)."""

    def __init__(self, blocks: Sequence[Coupling]):
        self.blocks = tuple(blocks)

    def init(self, arrays: Arrays) -> tuple[dict, dict]:
        return _init_children({f'coupling_block{i + 1}': block for i, block in enumerate(self.blocks)}, arrays)

    def apply(self, parameters, statistics, x, training, backward: bool = False):
        statistics = dict(statistics)
        order = range(len(self.blocks), 0, -1) if backward else range(1, len(self.blocks) + 1)
        for i in order:
            name = f'coupling_block{i}'
            x, new = self.blocks[i - 1].apply(parameters.get(name, {}), statistics.get(name, {}), x, training, backward)
            if new:
                statistics[name] = new
        return x, statistics


def assemble(children: dict[str, tuple[dict, dict]]) -> tuple[dict, dict]:
    """The parameters and statistics of a composite layer from those of its named children."""
    return ({name: p for name, (p, _) in children.items() if p},
            {name: s for name, (_, s) in children.items() if s})


def is_traced(tree: Any) -> bool:
    """Whether `tree` holds a tracer of a JAX transformation (values that must not outlive it)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))
