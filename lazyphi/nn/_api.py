"""The public functions of `lazyphi.nn`, each handing its work to the network module of the library in use."""

import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..backend import BACKENDS, backend_by_name, default_backend
from ..math import Tensor

Network = Any
"""A network of the library in use: a `torch.nn.Module`, a Keras model or a JAX network."""
Optimizer = Any
"""An optimizer of the library in use, made by `adam()`, `sgd()`, `adagrad()` or `rmsprop()`."""

_LIBRARIES = ('torch', 'jax', 'tensorflow')


def _library():
    """The network module of the library in use (see the docstring of `lazyphi.nn`)."""
    backend = default_backend()
    if backend.name in _LIBRARIES:
        return backend.nn_library()
    # a library the program imported counts as loaded even before any of its values passed through lazyphi
    loaded = [name for name in _LIBRARIES if any(b.name == name for b in BACKENDS) or name in sys.modules]
    if not loaded:
        raise RuntimeError(f"lazyphi.nn needs one of {', '.join(_LIBRARIES)}; none is loaded and the default "
                           f"backend is {backend.name}. Choose one with nn.use('torch'), nn.use('jax') or "
                           f"nn.use('tensorflow').")
    if len(loaded) > 1:
        raise RuntimeError(f"lazyphi.nn cannot tell which library to use: {', '.join(loaded)} are loaded and the "
                           f"default backend is {backend.name}. Choose one with nn.use(name).")
    return backend_by_name(loaded[0]).nn_library()


def parameter_count(net: Network) -> int:
    """The number of trainable values of `net`, as phiml counts (batch norms' running statistics are not)."""
    return sum(value.shape.volume for value in get_parameters(net).values())


def get_parameters(net: Network) -> dict[str, Tensor]:
    """The parameters of `net` by name, each as a `Tensor` wrapping the library's own array.

    The names are those the library gives (`'0.weight'` for torch, layer paths for the others); weights of
    dense layers have an input channel dim and an output channel dim, biases one channel dim.
    """
    return _library().get_parameters(net)


def save_state(obj: Network | Optimizer, path: str) -> str:
    """Writes the state of a network or optimizer to `path` in the library's own format.

    Returns:
        The path written, with the extension the library uses added where `path` has none.
    """
    return _library().save_state(obj, path)


def load_state(obj: Network | Optimizer, path: str) -> None:
    """Reads into `obj` (a network or optimizer) the state `save_state()` wrote to `path`, in place."""
    _library().load_state(obj, path)


def update_weights(net: Network, optimizer: Optimizer, loss_function: Callable, *loss_args: Any,
                   **loss_kwargs: Any) -> Any:
    """One optimization step: differentiates `loss_function` with respect to the parameters of `net` and lets
    `optimizer` change them.

    Args:
        net: the network whose parameters change.
        optimizer: made for `net` by `adam()`, `sgd()`, `adagrad()` or `rmsprop()`.
        loss_function: called as `loss_function(*loss_args, **loss_kwargs)`; returns the loss as a `Tensor`
            (summed over its batch dims before differentiating), or a tuple whose first item is the loss.
        *loss_args: positional arguments of `loss_function`.
        **loss_kwargs: keyword arguments of `loss_function`.

    Returns:
        What `loss_function` returned, computed with the parameters before the step.
    """
    return _library().update_weights(net, optimizer, loss_function, *loss_args, **loss_kwargs)


def adam(net: Network, learning_rate: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
         epsilon: float = 1e-07) -> Optimizer:
    """An Adam optimizer of the library in use for the parameters of `net`."""
    return _library().adam(net, learning_rate, betas, epsilon)


def sgd(net: Network, learning_rate: float = 1e-3, momentum: float = 0., dampening: float = 0.,
        weight_decay: float = 0., nesterov: bool = False) -> Optimizer:
    """A stochastic-gradient-descent optimizer (with optional momentum) for the parameters of `net`."""
    return _library().sgd(net, learning_rate, momentum, dampening, weight_decay, nesterov)


def adagrad(net: Network, learning_rate: float = 1e-3, lr_decay: float = 0., weight_decay: float = 0.,
            initial_accumulator_value: float = 0., eps: float = 1e-10) -> Optimizer:
    """An Adagrad optimizer for the parameters of `net`."""
    return _library().adagrad(net, learning_rate, lr_decay, weight_decay, initial_accumulator_value, eps)


def rmsprop(net: Network, learning_rate: float = 1e-3, alpha: float = 0.99, eps: float = 1e-08,
            weight_decay: float = 0., momentum: float = 0., centered: bool = False) -> Optimizer:
    """An RMSprop optimizer for the parameters of `net`."""
    return _library().rmsprop(net, learning_rate, alpha, eps, weight_decay, momentum, centered)


def set_learning_rate(optimizer: Optimizer, learning_rate: float | Tensor) -> None:
    """Sets the learning rate `optimizer` uses from its next step on."""
    _library().set_learning_rate(optimizer, float(learning_rate))


def get_learning_rate(optimizer: Optimizer) -> float:
    """The learning rate `optimizer` uses in its next step."""
    return _library().get_learning_rate(optimizer)


def mlp(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
        activation: str | Callable = 'ReLU', softmax: bool = False) -> Network:
    """A fully connected network.

    Args:
        in_channels: number of input features.
        out_channels: number of output features.
        layers: the widths of the hidden layers, in order.
        batch_norm: whether each hidden layer normalizes its outputs over the batch.
        activation: the non-linearity after each hidden layer: a name ('ReLU', 'SiLU', 'Sigmoid', 'tanh', ...)
            or a function of the library.
        softmax: whether the output goes through a softmax.
    """
    return _library().mlp(in_channels, out_channels, layers, batch_norm, activation, softmax)


def u_net(in_channels: int, out_channels: int, levels: int = 4, filters: int | Sequence[int] = 16,
          batch_norm: bool = True, activation: str | type = 'ReLU', in_spatial: tuple | int = 2,
          periodic: bool = False, use_res_blocks: bool = False, down_kernel_size: int = 3,
          up_kernel_size: int = 3) -> Network:
    """A U-Net: convolution blocks that halve the resolution `levels - 1` times, then double it back, each
    level on the way up also reading the features of its level on the way down.

    Args:
        in_channels: channels of the input.
        out_channels: channels of the output.
        levels: number of resolutions, the input's included.
        filters: channels of each level's blocks: one number for all, or one per level.
        batch_norm: whether each convolution is followed by batch normalization.
        activation: the non-linearity after each convolution, by name or as a function.
        in_spatial: number of spatial dims (1, 2 or 3), or the spatial sizes as a tuple.
        periodic: whether the convolutions wrap around the domain's edges instead of padding with zeros.
        use_res_blocks: whether each block adds its input to its output (residual blocks).
        down_kernel_size: kernel size of the convolutions on the way down.
        up_kernel_size: kernel size of the convolutions on the way up.
    """
    return _library().u_net(in_channels, out_channels, levels, filters, batch_norm, activation, in_spatial,
                            periodic, use_res_blocks, down_kernel_size, up_kernel_size)


def conv_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
             activation: str | type = 'ReLU', in_spatial: int | tuple = 2, periodic: bool = False) -> Network:
    """A stack of 3-wide convolution blocks at the input's resolution, `layers` giving each block's channels."""
    return _library().conv_net(in_channels, out_channels, layers, batch_norm, activation, in_spatial, periodic)


def res_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool = False,
            activation: str | type = 'ReLU', in_spatial: int | tuple = 2, periodic: bool = False) -> Network:
    """Like `conv_net()`, with residual blocks: each adds its input (projected to its width) to its output."""
    return _library().res_net(in_channels, out_channels, layers, batch_norm, activation, in_spatial, periodic)


def conv_classifier(in_features: int, in_spatial: tuple | list, num_classes: int,
                    blocks: Sequence[int] = (64, 128, 256, 256, 512, 512), block_sizes: Sequence[int] = (2, 2, 3, 3, 3),
                    dense_layers: Sequence[int] = (4096, 4096, 100), batch_norm: bool = True,
                    activation: str | type = 'ReLU', softmax: bool = True, periodic: bool = False) -> Network:
    """A VGG-style classifier: convolution blocks each followed by a halving of the resolution, then dense layers.

    Args:
        in_features: channels of the input.
        in_spatial: the input's spatial sizes.
        num_classes: number of outputs.
        blocks: channels of each convolution block.
        block_sizes: number of convolutions in each block.
        dense_layers: widths of the dense layers after the flattening.
        batch_norm: whether convolutions and dense layers are followed by batch normalization.
        activation: the non-linearity, by name or as a function.
        softmax: whether the output goes through a softmax.
        periodic: whether the convolutions wrap around the domain's edges.
    """
    return _library().conv_classifier(in_features, in_spatial, num_classes, blocks, block_sizes, dense_layers,
                                      batch_norm, activation, softmax, periodic)


def invertible_net(num_blocks: int = 3, construct_net: str | Callable = 'u_net', **construct_kwargs: Any) -> Network:
    """A network that can be run backwards: `num_blocks` affine coupling blocks (as in Real NVP), each made of
    networks built by `construct_net`.

    Args:
        num_blocks: number of coupling blocks.
        construct_net: 'u_net', 'conv_net', 'res_net' or 'mlp', or a function returning a network whose
            output has as many channels as its input.
        **construct_kwargs: arguments of `construct_net`.
    """
    return _library().invertible_net(num_blocks, construct_net, **construct_kwargs)
