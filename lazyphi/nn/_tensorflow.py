"""`lazyphi.nn` on TensorFlow with Keras 3: parameters, optimizers, training steps and saved states.

Networks are `keras.Model`s (built in `_tensorflow_layers`), optimizers Keras optimizers built for the network's
trainable variables when made, so that their state exists (and can be saved) before the first step.
"""

import os
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from ..math import Tensor, channel, sum_, wrap
from ._tensorflow_layers import conv_classifier, conv_net, invertible_net, mlp, res_net, u_net

__all__ = [
    'adagrad', 'adam', 'conv_classifier', 'conv_net', 'get_learning_rate', 'get_parameters', 'invertible_net',
    'load_state', 'mlp', 'res_net', 'rmsprop', 'save_state', 'set_learning_rate', 'sgd', 'u_net', 'update_weights',
]

_KERNEL_DIMS = ('x', 'y', 'z')
# Weight decay as torch applies it (added to the gradient); Keras' own `weight_decay` is decoupled (AdamW).
_L2_DECAY: 'weakref.WeakKeyDictionary[keras.optimizers.Optimizer, float]' = weakref.WeakKeyDictionary()


def _check_network(net: Any) -> None:
    if not isinstance(net, keras.Model):
        raise TypeError(f"Expected a Keras model (a network of lazyphi.nn on TensorFlow), got {type(net).__name__}")


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(f"Expected a Keras optimizer (made by adam(), sgd(), adagrad() or rmsprop() on TensorFlow), "
                        f"got {type(optimizer).__name__}")


def _leaf_layers(layer: keras.layers.Layer, prefix: str):
    """`(name prefix, layer)` for the layers in `layer` that hold variables themselves, models descended into."""
    if isinstance(layer, keras.Model):
        for child in layer.layers:
            yield from _leaf_layers(child, f'{prefix}{child.name}.')
    elif layer.weights:
        yield prefix, layer


def get_parameters(net: keras.Model) -> dict[str, Tensor]:
    """The trainable variables of `net` (as counted by phiml), each as a Tensor of its value when read.

    Names join the layer names from `net` down with the variable's path in its layer (`kernel` renamed
    `weight`): `conv0.weight`, `s1.norm0.gamma`, `coupling0.t2.dense_out.bias`. Kernels have the channel dims
    `x, y, z` (as many as the convolution has), `input` and `output`; vectors the channel dim `output`.
    """
    _check_network(net)
    trainable = {id(v) for v in net.trainable_weights}
    result = {}
    for prefix, layer in _leaf_layers(net, ''):
        for variable in layer.weights:
            if id(variable) not in trainable:
                continue
            # the path in the layer: what follows the layer's name in the variable's path (a layer holding layers
            # of its own adds theirs), or the variable's name
            parts = variable.path.split('/')
            inner = parts[len(parts) - parts[::-1].index(layer.name):] if layer.name in parts else [variable.name]
            name = prefix + '.'.join(inner)
            if name.endswith('.kernel'):
                name = name[:-len('kernel')] + 'weight'
            if name in result:  # layers a user named alike: numbered in order, so that none is left out
                name = next(f'{name}_{i}' for i in range(1, len(result) + 2) if f'{name}_{i}' not in result)
            result[name] = _named_value(variable)
    return result


def _named_value(variable: Any) -> Tensor:
    value = tf.convert_to_tensor(variable)
    rank = len(value.shape)
    if rank <= 1:
        return wrap(value, channel('output') if rank else ())
    if rank <= 2 + len(_KERNEL_DIMS):
        return wrap(value, channel(*_KERNEL_DIMS[:rank - 2], 'input', 'output'))
    return wrap(value, channel(*[f'axis{i}' for i in range(rank)]))


def save_state(obj: keras.Model | keras.optimizers.Optimizer, path: str) -> str:
    """Writes the weights of a network (`.weights.h5`, Keras' format) or the variables of an optimizer (`.npz`)."""
    if isinstance(obj, keras.Model):
        path = _with_extension(path, '.weights.h5')
        with warnings.catch_warnings():
            # Keras reads each variable with np.array(variable), whose __array__ (TensorFlow's) predates NumPy 2's
            # `copy` keyword: NumPy warns, and reads the values correctly.
            warnings.filterwarnings('ignore', "__array__ implementation doesn't accept a copy keyword",
                                    DeprecationWarning)
            obj.save_weights(path)
    elif isinstance(obj, keras.optimizers.Optimizer):
        path = _with_extension(path, '.npz')
        np.savez(path, *[v.numpy() for v in obj.variables])
    else:
        raise TypeError(f"save_state() takes a Keras model or optimizer, got {type(obj).__name__}")
    return path


def load_state(obj: keras.Model | keras.optimizers.Optimizer, path: str) -> None:
    """Reads into `obj` the state `save_state()` wrote to `path` (with or without its extension)."""
    if isinstance(obj, keras.Model):
        obj.load_weights(_existing(_with_extension(path, '.weights.h5')))
    elif isinstance(obj, keras.optimizers.Optimizer):
        with np.load(_existing(_with_extension(path, '.npz'))) as saved:
            values = [saved[f'arr_{i}'] for i in range(len(saved.files))]
        variables = obj.variables
        shapes = [tuple(v.shape) for v in variables]
        if [v.shape for v in values] != shapes:
            raise ValueError(f"{path} holds the state of an optimizer with variables of shapes "
                             f"{[v.shape for v in values]}, this optimizer's have the shapes {shapes}")
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)
    else:
        raise TypeError(f"load_state() takes a Keras model or optimizer, got {type(obj).__name__}")


def _with_extension(path: str, extension: str) -> str:
    path = os.fspath(path)
    return path if path.endswith(extension) else path + extension


def _existing(path: str) -> str:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No saved state at {path}")
    return path


def update_weights(net: keras.Model, optimizer: keras.optimizers.Optimizer, loss_function: Callable,
                   *loss_args: Any, **loss_kwargs: Any) -> Any:
    """One step of `optimizer` along the gradient of the loss (summed over all its dims) by `net`'s trainable
    variables, taken with a `tf.GradientTape` (also through a `jit_compile`d `loss_function`)."""
    _check_network(net)
    _check_optimizer(optimizer)
    variables = net.trainable_variables
    with tf.GradientTape() as tape:
        output = loss_function(*loss_args, **loss_kwargs)
        loss = output[0] if isinstance(output, tuple) else output
        total = sum_(loss, loss.shape).native() if isinstance(loss, Tensor) else tf.reduce_sum(loss)
    # as torch: variables the loss does not depend on (gradient None) are left alone, weight decay included
    pairs = [(g, v) for g, v in zip(tape.gradient(total, variables), variables, strict=True) if g is not None]
    if not pairs:
        raise ValueError(f"The loss of {getattr(loss_function, '__name__', loss_function)} does not depend on any "
                         f"trainable variable of the network; call the network inside loss_function")
    decay = _L2_DECAY.get(optimizer)
    if decay:
        pairs = [(g + decay * v, v) for g, v in pairs]
    optimizer.apply_gradients(pairs)
    return output


def _built(optimizer: keras.optimizers.Optimizer, net: keras.Model, l2_decay: float = 0.) -> keras.optimizers.Optimizer:
    """`optimizer` with its state made for the variables of `net`, remembering the weight decay to apply."""
    _check_network(net)
    optimizer.build(net.trainable_variables)
    if l2_decay:
        _L2_DECAY[optimizer] = float(l2_decay)
    return optimizer


def _unsupported(name: str, value: float, optimizer: str) -> None:
    if value:
        raise ValueError(f"{name}={value}: Keras' {optimizer} has no {name}; on TensorFlow only {name}=0 is accepted")


def adam(net: keras.Model, learning_rate: float, betas: tuple[float, float], epsilon: float) -> keras.optimizers.Adam:
    """Keras' Adam with phiml's arguments (`betas` are `beta_1, beta_2`)."""
    return _built(keras.optimizers.Adam(learning_rate, beta_1=betas[0], beta_2=betas[1], epsilon=epsilon), net)


def sgd(net: keras.Model, learning_rate: float, momentum: float, dampening: float, weight_decay: float,
        nesterov: bool) -> keras.optimizers.SGD:
    """Keras' SGD; `weight_decay` as torch applies it, `dampening` only 0."""
    _unsupported('dampening', dampening, 'SGD')
    return _built(keras.optimizers.SGD(learning_rate, momentum=momentum, nesterov=nesterov), net, weight_decay)


def adagrad(net: keras.Model, learning_rate: float, lr_decay: float, weight_decay: float,
            initial_accumulator_value: float, eps: float) -> keras.optimizers.Adagrad:
    """Keras' Adagrad; `weight_decay` as torch applies it, `lr_decay` only 0."""
    _unsupported('lr_decay', lr_decay, 'Adagrad')
    optimizer = keras.optimizers.Adagrad(learning_rate, initial_accumulator_value=initial_accumulator_value,
                                         epsilon=eps)
    return _built(optimizer, net, weight_decay)


def rmsprop(net: keras.Model, learning_rate: float, alpha: float, eps: float, weight_decay: float, momentum: float,
            centered: bool) -> keras.optimizers.RMSprop:
    """Keras' RMSprop (`alpha` is its `rho`); `weight_decay` as torch applies it."""
    optimizer = keras.optimizers.RMSprop(learning_rate, rho=alpha, momentum=momentum, epsilon=eps, centered=centered)
    return _built(optimizer, net, weight_decay)


def set_learning_rate(optimizer: keras.optimizers.Optimizer, learning_rate: float) -> None:
    """Assigns the optimizer's learning-rate variable."""
    _check_optimizer(optimizer)
    optimizer.learning_rate = learning_rate


def get_learning_rate(optimizer: keras.optimizers.Optimizer) -> float:
    """The value of the optimizer's learning-rate variable."""
    _check_optimizer(optimizer)
    return float(optimizer.learning_rate)
