"""The network architectures of `lazyphi.nn` as Keras 3 models on TensorFlow.

Each builder returns a `keras.Model` whose parameter count equals phiml's network of the same arguments. The
convolutional networks take channels-last arrays `(batch, *spatial, channels)`, as `math.native_call` lays
them out for TensorFlow. Layers are named by kind and position within their model (`conv0`, `norm0`, `dense1`,
...), so that `get_parameters()` gives the same names to every network of the same arguments.

Batch normalization follows Keras: it normalizes with the batch's statistics (and updates its moving averages)
only when the model is called with `training=True` (`math.native_call(net, x, training=True)`), otherwise with
its moving averages.
"""

from collections.abc import Callable, Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf
from keras import layers as kl

from ..backend import DType, backend_by_name

_ACTIVATIONS = {
    'relu': keras.activations.relu,
    'silu': keras.activations.silu,
    'swish': keras.activations.silu,
    'sigmoid': keras.activations.sigmoid,
    'tanh': keras.activations.tanh,
    'leaky_relu': keras.activations.leaky_relu,
    'leakyrelu': keras.activations.leaky_relu,
    'softplus': keras.activations.softplus,
    'elu': keras.activations.elu,
    'selu': keras.activations.selu,
    'gelu': keras.activations.gelu,
}
_CONV = {1: kl.Conv1D, 2: kl.Conv2D, 3: kl.Conv3D}
_MAX_POOL = {1: kl.MaxPool1D, 2: kl.MaxPool2D, 3: kl.MaxPool3D}
_UPSAMPLE = {1: kl.UpSampling1D, 2: kl.UpSampling2D, 3: kl.UpSampling3D}


def activation_layer(activation: str | Callable) -> Callable[[str], kl.Layer]:
    """Makes activation layers of a given name from an activation given by name (case-insensitive), as a Keras
    layer class (a new instance per use), or as a function of tensors."""
    if isinstance(activation, str):
        function = _ACTIVATIONS.get(activation.lower())
        if function is None:
            raise ValueError(f"Unknown activation {activation!r}; accepted (any case): {', '.join(_ACTIVATIONS)}, "
                             f"a Keras layer class or a function of TensorFlow tensors")
        return lambda name: kl.Activation(function, name=name)
    if isinstance(activation, type) and issubclass(activation, kl.Layer):
        return lambda name: activation(name=name)
    if callable(activation) and not isinstance(activation, type):
        return lambda name: kl.Activation(activation, name=name)
    raise TypeError(f"activation must be a name, a Keras layer class or a function, got {activation!r}")


def spatial_input_shape(in_spatial: int | Sequence[int]) -> tuple:
    """The input sizes before the channel axis: `None` per dim for a number of spatial dims, else the sizes."""
    if isinstance(in_spatial, int) and not isinstance(in_spatial, bool):
        if in_spatial not in _CONV:
            raise ValueError(f"in_spatial={in_spatial}: TensorFlow networks have 1, 2 or 3 spatial dims")
        return (None,) * in_spatial
    if isinstance(in_spatial, (tuple, list)) and len(in_spatial) in _CONV \
            and all(isinstance(s, int) and s > 0 for s in in_spatial):
        return tuple(in_spatial)
    raise ValueError(f"in_spatial must be 1, 2 or 3 or a tuple of 1 to 3 positive sizes, got {in_spatial!r}")


@keras.saving.register_keras_serializable(package='lazyphi')
class PeriodicPad(kl.Layer):
    """Pads each spatial axis by wrapping around, as much as a convolution of `kernel_size` needs to keep sizes."""

    def __init__(self, kernel_size: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kernel_size = kernel_size

    def call(self, x: Any) -> Any:
        before, after = (self.kernel_size - 1) // 2, self.kernel_size // 2  # the split of Keras' 'same'
        for axis in range(1, len(x.shape) - 1):
            size = x.shape[axis] if x.shape[axis] is not None else keras.ops.shape(x)[axis]
            pieces = [x]
            if before:
                pieces.insert(0, keras.ops.take(x, keras.ops.arange(size - before, size), axis=axis))
            if after:
                pieces.append(keras.ops.take(x, keras.ops.arange(0, after), axis=axis))
            x = keras.ops.concatenate(pieces, axis=axis)
        return x

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        grown = [None if s is None else s + self.kernel_size - 1 for s in input_shape[1:-1]]
        return (input_shape[0], *grown, input_shape[-1])

    def get_config(self) -> dict:
        return {**super().get_config(), 'kernel_size': self.kernel_size}


class _Builder:
    """Adds named layers to a functional graph: convolutions, normalization and activation as configured."""

    def __init__(self, dims: int, batch_norm: bool, activation: str | Callable, periodic: bool) -> None:
        self.dims = dims
        self.batch_norm = batch_norm
        self.activation = activation_layer(activation)
        self.periodic = periodic
        self.counts: dict[str, int] = {}
        # Keras draws the seeds of unseeded initializers from Python's `random`, which importing TensorFlow after
        # `math.seed()` advances: the kernels' seeds come from lazyphi's TensorFlow generator, which `math.seed()`
        # seeds also when TensorFlow loads later (a cluster's worker built other weights than the client before)
        seed = backend_by_name('tensorflow').random_uniform((), 0, 2 ** 31 - 1, DType(int, 64))
        self.random = np.random.default_rng(int(seed))

    def kernel(self) -> keras.initializers.Initializer:
        """Keras' default kernel initializer, seeded from this network's generator."""
        return keras.initializers.GlorotUniform(seed=int(self.random.integers(2 ** 31 - 1)))

    def dense(self, width: int, name: str | None = None) -> kl.Dense:
        return kl.Dense(width, kernel_initializer=self.kernel(), name=name or self.name('dense'))

    def dense_head(self, x: Any, widths: Sequence[int], out: int, softmax: bool) -> Any:
        """Dense layers of `widths`, each followed by the activation and normalization, then a linear layer to
        `out` (and a softmax)."""
        for width in widths:
            x = self.norm(self.act(self.dense(width)(x)))
        x = self.dense(out, 'dense_out')(x)
        return kl.Softmax(name='softmax')(x) if softmax else x

    def conv_layer(self, filters: int, kernel_size: int, name: str | None = None, padding: str = 'same') -> kl.Layer:
        return _CONV[self.dims](filters, kernel_size, padding=padding, kernel_initializer=self.kernel(),
                                name=name or self.name('conv'))

    def name(self, kind: str) -> str:
        """The next name of `kind` in this model: `conv0`, `conv1`, ..."""
        index = self.counts.get(kind, 0)
        self.counts[kind] = index + 1
        return f'{kind}{index}'

    def conv(self, x: Any, filters: int, kernel_size: int) -> Any:
        if self.periodic and kernel_size > 1:
            x = PeriodicPad(kernel_size, name=self.name('pad'))(x)
            return self.conv_layer(filters, kernel_size, padding='valid')(x)
        return self.conv_layer(filters, kernel_size)(x)

    def norm(self, x: Any) -> Any:
        return kl.BatchNormalization(name=self.name('norm'))(x) if self.batch_norm else x

    def act(self, x: Any) -> Any:
        return self.activation(self.name('act'))(x)

    def conv_norm_act(self, x: Any, filters: int, kernel_size: int) -> Any:
        return self.act(self.norm(self.conv(x, filters, kernel_size)))

    def double_conv(self, x: Any, filters: int, kernel_size: int) -> Any:
        return self.conv_norm_act(self.conv_norm_act(x, filters, kernel_size), filters, kernel_size)

    def res_block(self, x: Any, filters: int, kernel_size: int) -> Any:
        """Two convolutions plus the input, projected by a 1-wide convolution where the channels differ."""
        shortcut = x
        if x.shape[-1] != filters:
            shortcut = self.norm(self.conv(x, filters, 1))
        return kl.Add(name=self.name('add'))([self.double_conv(x, filters, kernel_size), shortcut])

    def block(self, x: Any, filters: int, kernel_size: int, residual: bool) -> Any:
        return self.res_block(x, filters, kernel_size) if residual else self.double_conv(x, filters, kernel_size)


def _positive_ints(values: Sequence[int], what: str) -> list[int]:
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{what} must be a list or tuple of positive ints, got {values!r}")
    values = list(values)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise ValueError(f"{what} must be positive ints, got {values!r}")
    return values


def mlp(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
        activation: str | Callable = 'ReLU', softmax: bool = False) -> keras.Model:
    """Dense layers of the widths `layers`, each followed by the activation and batch normalization, then a
    linear output layer (and a softmax)."""
    builder = _Builder(1, batch_norm, activation, False)
    x = inputs = keras.Input((in_channels,), name='input')
    x = builder.dense_head(x, _positive_ints(layers, 'mlp layers'), out_channels, softmax)
    return keras.Model(inputs, x, name='mlp')


def u_net(in_channels: int, out_channels: int, levels: int = 4, filters: int | Sequence[int] = 16,
          batch_norm: bool = True, activation: str | Callable = 'ReLU', in_spatial: int | tuple = 2,
          periodic: bool = False, use_res_blocks: bool = False, down_kernel_size: int = 3,
          up_kernel_size: int = 3) -> keras.Model:
    """A U-Net: a block per level, max-pooling between levels on the way down, nearest upsampling and the
    concatenated features of the same level on the way up, and a 1-wide convolution to `out_channels`."""
    spatial = spatial_input_shape(in_spatial)
    if not isinstance(levels, int) or levels < 1:
        raise ValueError(f"levels must be a positive int, got {levels!r}")
    filters = [filters] * levels if isinstance(filters, int) else _positive_ints(filters, 'u_net filters')
    if len(filters) != levels:
        raise ValueError(f"filters has {len(filters)} entries but the u_net has {levels} levels; give one per level")
    builder = _Builder(len(spatial), batch_norm, activation, periodic)
    x = inputs = keras.Input((*spatial, in_channels), name='input')
    x = builder.block(x, filters[0], down_kernel_size, use_res_blocks)
    skips = [x]
    for level in range(1, levels):
        x = _MAX_POOL[builder.dims](2, padding='same', name=builder.name('pool'))(x)
        x = builder.block(x, filters[level], down_kernel_size, use_res_blocks)
        skips.append(x)
    for level in range(levels - 2, -1, -1):
        x = _UPSAMPLE[builder.dims](2, name=builder.name('upsample'))(x)
        x = kl.Concatenate(name=builder.name('concat'))([x, skips[level]])
        x = builder.block(x, filters[level], up_kernel_size, use_res_blocks)
    x = builder.conv_layer(out_channels, 1, 'conv_out')(x)
    return keras.Model(inputs, x, name='u_net')


def conv_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
             activation: str | Callable = 'ReLU', in_spatial: int | tuple = 2, periodic: bool = False) -> keras.Model:
    """3-wide convolutions of the widths `layers` (`[out_channels]` if empty), then a 1-wide one to `out_channels`."""
    return _stack('conv_net', in_channels, out_channels, layers, batch_norm, activation, in_spatial, periodic)


def res_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
            activation: str | Callable = 'ReLU', in_spatial: int | tuple = 2, periodic: bool = False) -> keras.Model:
    """Residual blocks of the widths `layers` (`[out_channels]` if empty), then a 1-wide convolution."""
    return _stack('res_net', in_channels, out_channels, layers, batch_norm, activation, in_spatial, periodic)


def _stack(kind: str, in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool,
           activation: str | Callable, in_spatial: int | tuple, periodic: bool) -> keras.Model:
    """`conv_net` or `res_net` (`kind`): a block per width in `layers` at the input's resolution, then a 1-wide
    convolution to `out_channels`."""
    spatial = spatial_input_shape(in_spatial)
    builder = _Builder(len(spatial), batch_norm, activation, periodic)
    block = builder.conv_norm_act if kind == 'conv_net' else builder.res_block
    x = inputs = keras.Input((*spatial, in_channels), name='input')
    for width in _positive_ints(layers, f'{kind} layers') or [out_channels]:
        x = block(x, width, 3)
    x = builder.conv_layer(out_channels, 1, 'conv_out')(x)
    return keras.Model(inputs, x, name=kind)


def conv_classifier(in_features: int, in_spatial: tuple | list, num_classes: int,
                    blocks: Sequence[int] = (64, 128, 256, 256, 512, 512), block_sizes: Sequence[int] = (2, 2, 3, 3, 3),
                    dense_layers: Sequence[int] = (4096, 4096, 100), batch_norm: bool = True,
                    activation: str | Callable = 'ReLU', softmax: bool = True, periodic: bool = False) -> keras.Model:
    """Blocks of 3-wide convolutions each followed by a 2-wide max-pooling, then the layers of `mlp()` on the
    flattened features."""
    if not isinstance(in_spatial, (tuple, list)):
        raise ValueError(f"conv_classifier needs the spatial sizes of its input as a tuple, got {in_spatial!r}")
    spatial = spatial_input_shape(in_spatial)
    builder = _Builder(len(spatial), batch_norm, activation, periodic)
    x = inputs = keras.Input((*spatial, in_features), name='input')
    # as phiml: the shorter of `blocks` and `block_sizes` sets the number of blocks
    for width, size in zip(_positive_ints(blocks, 'blocks'), _positive_ints(block_sizes, 'block_sizes'), strict=False):
        for _ in range(size):
            x = builder.conv_norm_act(x, width, 3)
        x = _MAX_POOL[builder.dims](2, name=builder.name('pool'))(x)
    x = kl.Flatten(name='flatten')(x)
    x = builder.dense_head(x, _positive_ints(dense_layers, 'dense_layers'), num_classes, softmax)
    return keras.Model(inputs, x, name='conv_classifier')


def dense_res_block(in_channels: int, out_channels: int | None = None, layers: Sequence[int] = (),
                    batch_norm: bool = False, activation: str | Callable = 'ReLU',
                    softmax: bool = False) -> keras.Model:
    """The network `invertible_net(construct_net='mlp')` uses: dense layers (`layers`, then `in_channels`), each
    followed by the activation and batch normalization, plus the input."""
    if softmax:
        raise ValueError("softmax=True: the dense blocks of an invertible net have no softmax")
    if out_channels not in (None, in_channels):
        raise ValueError(f"out_channels={out_channels}: the dense blocks of an invertible net keep the "
                         f"{in_channels} input channels")
    builder = _Builder(1, batch_norm, activation, False)
    x = inputs = keras.Input((in_channels,), name='input')
    for width in [*_positive_ints(layers, 'mlp layers'), in_channels]:
        x = builder.norm(builder.act(builder.dense(width)(x)))
    x = kl.Add(name='add')([x, inputs])
    return keras.Model(inputs, x, name='dense_res_block')


def _coupling_mask(x: Any, reverse: bool) -> Any:
    """1 where a coupling block transforms `x` first: alternating features of a `(batch, features)` array,
    a checkerboard over the spatial axes of a channels-last array; `reverse` swaps ones and zeros."""
    shape = tf.shape(x)
    rank = len(x.shape)
    axes = [rank - 1] if rank == 2 else list(range(1, rank - 1))
    parity = tf.zeros([1] * rank, tf.int32)
    for axis in axes:
        parity += tf.reshape(tf.range(shape[axis]), [-1 if a == axis else 1 for a in range(rank)])
    odd = tf.cast(parity % 2, x.dtype)
    return 1 - odd if reverse else odd


class CouplingBlock(keras.Model):
    """An affine coupling block of Real NVP: the masked part of the input scales and shifts the rest, in turn.

    Forward: `v1 = m * (u1 * exp(tanh(s2(u2))) + t2(u2))`, `v2 = (1 - m) * (u2 * exp(tanh(s1(v1))) + t1(v1))`
    with `u1 = m * x`, `u2 = (1 - m) * x`; `backward=True` undoes it.
    """

    def __init__(self, construct_net: Callable, construct_kwargs: dict, reverse_mask: bool, name: str) -> None:
        super().__init__(name=name)
        self.reverse_mask = reverse_mask
        self.s1, self.t1, self.s2, self.t2 = nets = [construct_net(**construct_kwargs) for _ in range(4)]
        for net, net_name in zip(nets, ('s1', 't1', 's2', 't2'), strict=True):
            if not isinstance(net, kl.Layer):
                raise TypeError(f"construct_net must return Keras models; it returned {type(net).__name__}")
            net.name = net_name  # the networks' own names are all alike; get_parameters() names by layer name

    def call(self, x: Any, backward: bool = False) -> Any:
        mask = _coupling_mask(x, self.reverse_mask)
        if backward:
            v1, v2 = x * mask, x * (1 - mask)
            u2 = (1 - mask) * (v2 - self.t1(v1)) * tf.exp(-tf.tanh(self.s1(v1)))
            u1 = mask * (v1 - self.t2(u2)) * tf.exp(-tf.tanh(self.s2(u2)))
            return u1 + u2
        u1, u2 = x * mask, x * (1 - mask)
        v1 = mask * (u1 * tf.exp(tf.tanh(self.s2(u2))) + self.t2(u2))
        v2 = (1 - mask) * (u2 * tf.exp(tf.tanh(self.s1(v1))) + self.t1(v1))
        return v1 + v2


_CONSTRUCTORS = {'u_net': u_net, 'conv_net': conv_net, 'res_net': res_net, 'mlp': dense_res_block}


@keras.saving.register_keras_serializable(package='lazyphi')
class InvertibleNet(keras.Model):
    """Coupling blocks in a row, alternating which half of the input each transforms first.

    Called as `net(x)` or, to invert, `net(y, backward=True)` (`math.native_call(net, y, backward=True)`).
    Networks made by a named constructor pickle (Keras rebuilds them from `get_config()`); others do not.
    """

    def __init__(self, num_blocks: int, construct_net: str | Callable, construct_kwargs: dict, **kwargs: Any) -> None:
        super().__init__(**{'name': 'invertible_net', **kwargs})
        self.num_blocks = num_blocks
        self.construct_net = construct_net
        self.construct_kwargs = dict(construct_kwargs)
        construct = _CONSTRUCTORS[construct_net] if isinstance(construct_net, str) else construct_net
        self.blocks = [CouplingBlock(construct, construct_kwargs, i % 2 == 0, f'coupling{i}')
                       for i in range(num_blocks)]

    def call(self, x: Any, backward: bool = False) -> Any:
        for block in reversed(self.blocks) if backward else self.blocks:
            x = block(x, backward=backward)
        return x

    def get_config(self) -> dict:
        if not isinstance(self.construct_net, str):
            raise NotImplementedError(f"An invertible net made by the function {self.construct_net!r} cannot be "
                                      f"rebuilt from a config; make it with a named construct_net to pickle it")
        return {'name': self.name, 'num_blocks': self.num_blocks, 'construct_net': self.construct_net,
                'construct_kwargs': self.construct_kwargs}


def invertible_net(num_blocks: int = 3, construct_net: str | Callable = 'u_net',
                   **construct_kwargs: Any) -> InvertibleNet:
    """An `InvertibleNet` of `num_blocks` coupling blocks, each with four networks made by `construct_net`
    (a name of `_CONSTRUCTORS` or a function returning a Keras model) from `construct_kwargs`, whose
    `out_channels` default to their `in_channels`."""
    if not isinstance(num_blocks, int) or num_blocks < 1:
        raise ValueError(f"num_blocks must be a positive int, got {num_blocks!r}")
    if isinstance(construct_net, str) and construct_net not in _CONSTRUCTORS:
        raise ValueError(f"construct_net={construct_net!r}; accepted: {', '.join(_CONSTRUCTORS)} or a function "
                         f"returning a Keras model")
    if not isinstance(construct_net, str) and not callable(construct_net):
        raise TypeError(f"construct_net must be a name or a function returning a Keras model, got {construct_net!r}")
    if 'in_channels' in construct_kwargs:
        construct_kwargs.setdefault('out_channels', construct_kwargs['in_channels'])
    return InvertibleNet(num_blocks, construct_net, construct_kwargs)
