"""lazyphi.nn on PyTorch: networks as `torch.nn.Module`s, optimizers from `torch.optim`.

The architectures have the layers and parameter counts of phiml's torch networks. Convolutional networks
take inputs laid out as (batch, channel, *spatial), the layout `math.native_call` gives torch; dense
networks take (batch, channel), and with more axes (batch, channel, *spatial) they act on every spatial
point alike. Every bias starts at zero; weights start as torch initializes them, so `torch.manual_seed`
(or `math.seed`) before building a network fixes its initial weights.

Deliberate differences from phiml's torch networks, none of which changes a parameter count: the
activation given is used after every convolution (phiml ends each double convolution with a ReLU), a
U-Net with `use_res_blocks` uses residual blocks on the way down too and wraps around the edges only when
`periodic` (phiml swaps the two arguments there), convolutions pad to keep the size for every kernel size
(phiml pads by 1 whatever the kernel), the way up resizes to the size of the skip connection (so odd sizes
work) and invertible networks take 1, 2 or 3 spatial dims (phiml: 2).
"""

import functools
import inspect
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn, optim

from ..backend.torch import TORCH
from ..math import Tensor, channel, wrap
from . import _api

# Names are compared case-insensitively and without underscores: 'ReLU', 'relu', 'leaky_relu', 'LeakyReLU'.
ACTIVATIONS: dict[str, type[nn.Module]] = {
    'relu': nn.ReLU, 'silu': nn.SiLU, 'swish': nn.SiLU, 'sigmoid': nn.Sigmoid, 'tanh': nn.Tanh, 'gelu': nn.GELU,
    'leakyrelu': nn.LeakyReLU, 'softplus': nn.Softplus, 'elu': nn.ELU, 'selu': nn.SELU, 'mish': nn.Mish,
}
_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_TRANSPOSED_CONV = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_NORM = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_POOL = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)
_INTERPOLATION = ('linear', 'bilinear', 'trilinear')
_KERNEL_DIMS = 'xyz'


# --- building blocks ------------------------------------------------------------------------------


class _Function(nn.Module):
    """A module calling a plain function of torch tensors, for activations given as functions."""

    def __init__(self, function: Callable):
        super().__init__()
        self.function = function

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.function(x)


def _activation(activation: str | type | Callable) -> Callable[[], nn.Module]:
    """A factory of activation modules: from a name, a module class, a module, or a function of tensors."""
    if isinstance(activation, str):
        found = ACTIVATIONS.get(activation.lower().replace('_', ''))
        if found is None:
            raise ValueError(f"Unknown activation {activation!r}; accepted names (any case, '_' optional): "
                             f"{', '.join(ACTIVATIONS)}, or a torch.nn.Module class, module or function")
        return found
    if isinstance(activation, type) and issubclass(activation, nn.Module):
        return activation
    if isinstance(activation, nn.Module):
        return lambda: activation
    if callable(activation):
        return lambda: _Function(activation)
    raise TypeError(f"activation must be a name, a torch.nn.Module class, a module or a function, got {activation!r}")


def _spatial_rank(in_spatial: int | Sequence[int]) -> int:
    """The number of spatial dims, 1 to 3, from a count or a tuple of sizes."""
    rank = in_spatial if isinstance(in_spatial, int) else len(in_spatial) \
        if isinstance(in_spatial, (tuple, list)) else None
    if rank not in (1, 2, 3):
        raise ValueError(f"in_spatial must be 1, 2 or 3, or a tuple of 1 to 3 sizes, got {in_spatial!r}")
    return rank


def _conv(d: int, in_channels: int, out_channels: int, kernel_size: int, periodic: bool) -> nn.Module:
    """A size-keeping convolution over `d` spatial dims, padded with zeros or wrapping around; bias zero."""
    conv = _CONV[d - 1](in_channels, out_channels, kernel_size, padding='same',
                        padding_mode='circular' if periodic else 'zeros')
    nn.init.zeros_(conv.bias)
    return conv


def _dense(in_features: int, out_features: int) -> nn.Linear:
    linear = nn.Linear(in_features, out_features)
    nn.init.zeros_(linear.bias)
    return linear


def _norm(d: int, channels: int, batch_norm: bool) -> nn.Module:
    return _NORM[d - 1](channels) if batch_norm else nn.Identity()


def _conv_layer(d: int, in_channels: int, out_channels: int, batch_norm: bool, activation: Callable,
                periodic: bool, kernel_size: int = 3) -> list[nn.Module]:
    """Convolution, optional batch normalization, activation."""
    return [_conv(d, in_channels, out_channels, kernel_size, periodic), _norm(d, out_channels, batch_norm),
            activation()]


def _double_conv(d: int, in_channels: int, mid_channels: int, out_channels: int, batch_norm: bool,
                 activation: Callable, periodic: bool, kernel_size: int) -> nn.Sequential:
    return nn.Sequential(*_conv_layer(d, in_channels, mid_channels, batch_norm, activation, periodic, kernel_size),
                         *_conv_layer(d, mid_channels, out_channels, batch_norm, activation, periodic, kernel_size))


class ResidualBlock(nn.Module):
    """Two convolution layers plus the input, projected by a 1-wide convolution where the widths differ."""

    def __init__(self, d: int, in_channels: int, out_channels: int, batch_norm: bool, activation: Callable,
                 periodic: bool, kernel_size: int = 3):
        super().__init__()
        self.body = _double_conv(d, in_channels, out_channels, out_channels, batch_norm, activation, periodic,
                                 kernel_size)
        self.skip = nn.Identity() if in_channels == out_channels else \
            nn.Sequential(_conv(d, in_channels, out_channels, 1, False), _norm(d, out_channels, batch_norm))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.skip(x)


class _FeaturesOnAxis1(nn.Module):
    """Runs `layers` (dense layers and 1D batch norms) on axis 1 of (batch, features, *spatial) inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() <= 2:
            return self.layers(x)
        points = x.movedim(1, -1)
        y = self.layers(points.reshape(-1, points.shape[-1]))
        return y.reshape(*points.shape[:-1], y.shape[-1]).movedim(-1, 1)


class DenseNet(_FeaturesOnAxis1):
    """Dense layers, each followed by the activation and optionally batch normalization, then a dense output."""

    def __init__(self, widths: Sequence[int], batch_norm: bool, activation: Callable, softmax: bool):
        super().__init__()
        layers = []
        for width_in, width_out in itertools.pairwise(widths[:-1]):
            layers += [_dense(width_in, width_out), activation()]
            layers += [nn.BatchNorm1d(width_out)] if batch_norm else []
        layers.append(_dense(widths[-2], widths[-1]))
        layers += [nn.Softmax(dim=-1)] if softmax else []
        self.layers = nn.Sequential(*layers)


class DenseResidualBlock(_FeaturesOnAxis1):
    """Dense layers, each followed by the activation and optionally batch normalization, plus the input."""

    def __init__(self, widths: Sequence[int], batch_norm: bool, activation: Callable):
        super().__init__()
        layers = []
        for width_in, width_out in itertools.pairwise(widths):
            layers += [_dense(width_in, width_out), activation()]
            layers += [nn.BatchNorm1d(width_out)] if batch_norm else []
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + x


class UNet(nn.Module):
    """Blocks at `len(filters)` resolutions, halved by max pooling on the way down and restored by linear
    interpolation on the way up, where each block also reads the output of its level on the way down."""

    def __init__(self, d: int, in_channels: int, out_channels: int, filters: Sequence[int], batch_norm: bool,
                 activation: Callable, periodic: bool, use_res_blocks: bool, down_kernel_size: int,
                 up_kernel_size: int):
        super().__init__()

        def block(width_in: int, mid: int, width_out: int, kernel_size: int) -> nn.Module:
            if use_res_blocks:
                return ResidualBlock(d, width_in, width_out, batch_norm, activation, periodic, kernel_size)
            return _double_conv(d, width_in, mid, width_out, batch_norm, activation, periodic, kernel_size)
        self.down = nn.ModuleList([block(w_in, w_out, w_out, down_kernel_size)
                                   for w_in, w_out in zip([in_channels, *filters[:-1]], filters, strict=True)])
        # as in phiml, a double convolution on the way up narrows to half its input width in between
        self.up = nn.ModuleList([block(w_in, w_in // 2, filters[i - 1], up_kernel_size)
                                 for i in reversed(range(1, len(filters)))
                                 for w_in in [filters[i] + filters[i - 1]]])
        self.pool = _POOL[d - 1](2)
        self.interpolation = _INTERPOLATION[d - 1]
        self.out = _conv(d, filters[0], out_channels, 1, False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        levels = []
        for i, block in enumerate(self.down):
            x = block(self.pool(x) if i else x)
            levels.append(x)
        for block, skip in zip(self.up, reversed(levels[:-1]), strict=True):
            x = nn.functional.interpolate(x, size=skip.shape[2:], mode=self.interpolation)
            x = block(torch.cat([skip, x], dim=1))
        return self.out(x)


class ConvClassifier(nn.Module):
    """Convolution blocks each followed by max pooling, flattened (channel first) into a `DenseNet`."""

    def __init__(self, in_features: int, in_spatial: Sequence[int], num_classes: int, blocks: Sequence[int],
                 block_sizes: Sequence[int], dense_layers: Sequence[int], batch_norm: bool, activation: Callable,
                 softmax: bool, periodic: bool):
        super().__init__()
        d = len(in_spatial)
        layers, width = [], in_features
        sizes = list(in_spatial)
        # as phiml's TF and JAX networks: blocks without a block size are left out (its torch one fails there)
        for width_out, block_size in zip(blocks, block_sizes, strict=False):
            for _ in range(block_size):
                layers += _conv_layer(d, width, width_out, batch_norm, activation, periodic)
                width = width_out
            layers.append(_POOL[d - 1](2))
            sizes = [s // 2 for s in sizes]
        if min(sizes) < 1:
            raise ValueError(f"conv_classifier: {len(sizes)} poolings leave nothing of the input size {in_spatial}; "
                             f"use fewer blocks or a larger input")
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.dense = DenseNet([width * functools.reduce(int.__mul__, sizes), *dense_layers, num_classes],
                              batch_norm, activation, softmax)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense(self.features(x))


def _checkerboard(x: torch.Tensor, reverse: bool) -> torch.Tensor:
    """1 and 0 alternating over the channels of (batch, channel) inputs, else over the spatial points of
    (batch, channel, *spatial) inputs; swapped if `reverse`."""
    sizes = x.shape[1:2] if x.dim() == 2 else x.shape[2:]
    parity = sum(torch.arange(n, device=x.device).reshape([n] + [1] * (len(sizes) - 1 - i))
                 for i, n in enumerate(sizes)) % 2
    parity = parity if x.dim() == 2 else parity[None]
    return (1 - parity if reverse else parity).to(x.dtype)


class CouplingBlock(nn.Module):
    """An affine coupling block of Real NVP: the masked part of the input scales and shifts the other part."""

    def __init__(self, construct: Callable[[], nn.Module], reverse_mask: bool):
        super().__init__()
        self.reverse_mask = reverse_mask
        self.s1, self.t1, self.s2, self.t2 = construct(), construct(), construct(), construct()

    def forward(self, x: torch.Tensor, invert: bool = False) -> torch.Tensor:
        mask = _checkerboard(x, self.reverse_mask)
        a, b = x * mask, x * (1 - mask)
        if invert:
            b = (1 - mask) * (b - self.t1(a)) * torch.exp(-self.s1(a))
            a = mask * (a - self.t2(b)) * torch.exp(-self.s2(b))
        else:
            a = mask * (a * torch.exp(self.s2(b)) + self.t2(b))
            b = (1 - mask) * (b * torch.exp(self.s1(a)) + self.t1(a))
        return a + b


class InvertibleNet(nn.Module):
    """Coupling blocks with alternating masks; `net(x, backward=True)` inverts `net(x)`."""

    def __init__(self, num_blocks: int, construct: Callable[[], nn.Module]):
        super().__init__()
        self.blocks = nn.ModuleList([CouplingBlock(construct, i % 2 == 0) for i in range(num_blocks)])

    def forward(self, x: torch.Tensor, backward: bool = False) -> torch.Tensor:
        for block in reversed(self.blocks) if backward else self.blocks:
            x = block(x, backward)
        return x


def _on_default_device(net: nn.Module) -> nn.Module:
    return net.to(TORCH.get_default_device().ref)


# --- networks -------------------------------------------------------------------------------------


def mlp(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool, activation: Any,
        softmax: bool) -> nn.Module:
    return _on_default_device(DenseNet([in_channels, *layers, out_channels], batch_norm, _activation(activation),
                                       softmax))


def u_net(in_channels: int, out_channels: int, levels: int, filters: int | Sequence[int], batch_norm: bool,
          activation: Any, in_spatial: int | Sequence[int], periodic: bool, use_res_blocks: bool,
          down_kernel_size: int, up_kernel_size: int) -> nn.Module:
    if not isinstance(levels, int) or levels < 1:
        raise ValueError(f"u_net: levels must be a positive int, got {levels!r}")
    filters = tuple(filters) if isinstance(filters, (tuple, list)) else (filters,) * levels
    if len(filters) != levels:
        raise ValueError(f"u_net: filters {filters} has {len(filters)} entries for {levels} levels; give one per "
                         f"level or a single int")
    return _on_default_device(UNet(_spatial_rank(in_spatial), in_channels, out_channels, filters, batch_norm,
                                   _activation(activation), periodic, use_res_blocks, down_kernel_size,
                                   up_kernel_size))


def _widths(layers: Sequence[int], out_channels: int) -> list[int]:
    """Hidden widths of conv_net/res_net: without any, one layer as wide as the output (as in phiml)."""
    return list(layers) or [out_channels]


def conv_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool, activation: Any,
             in_spatial: int | Sequence[int], periodic: bool) -> nn.Module:
    d, activation = _spatial_rank(in_spatial), _activation(activation)
    widths = _widths(layers, out_channels)
    hidden = [module for w_in, w_out in zip([in_channels, *widths[:-1]], widths, strict=True)
              for module in _conv_layer(d, w_in, w_out, batch_norm, activation, periodic)]
    return _on_default_device(nn.Sequential(*hidden, _conv(d, widths[-1], out_channels, 1, False)))


def res_net(in_channels: int, out_channels: int, layers: Sequence[int], batch_norm: bool, activation: Any,
            in_spatial: int | Sequence[int], periodic: bool) -> nn.Module:
    d, activation = _spatial_rank(in_spatial), _activation(activation)
    widths = _widths(layers, out_channels)
    blocks = [ResidualBlock(d, w_in, w_out, batch_norm, activation, periodic)
              for w_in, w_out in zip([in_channels, *widths[:-1]], widths, strict=True)]
    return _on_default_device(nn.Sequential(*blocks, _conv(d, widths[-1], out_channels, 1, False)))


def conv_classifier(in_features: int, in_spatial: Sequence[int], num_classes: int, blocks: Sequence[int],
                    block_sizes: Sequence[int], dense_layers: Sequence[int], batch_norm: bool, activation: Any,
                    softmax: bool, periodic: bool) -> nn.Module:
    if not isinstance(in_spatial, (tuple, list)):
        raise TypeError(f"conv_classifier: in_spatial must be the tuple of spatial sizes, got {in_spatial!r}")
    _spatial_rank(in_spatial)
    return _on_default_device(ConvClassifier(in_features, in_spatial, num_classes, blocks, block_sizes,
                                             dense_layers, batch_norm, _activation(activation), softmax, periodic))


def _dense_residual(in_channels: int, layers: Sequence[int], batch_norm: bool = False, activation: Any = 'ReLU',
                    softmax: bool = False, out_channels: int | None = None) -> nn.Module:
    """The 'mlp' of invertible networks: a dense residual block, whose output must be as wide as its input."""
    if softmax:
        raise ValueError("invertible_net: softmax=True is not possible inside an invertible network")
    if out_channels not in (None, in_channels):
        raise ValueError(f"invertible_net: out_channels={out_channels} must equal in_channels={in_channels}")
    return DenseResidualBlock([in_channels, *layers, in_channels], batch_norm, _activation(activation))


def _by_name(name: str) -> Callable[..., nn.Module]:
    """A network function of this module taking keyword arguments, with the defaults of the public one."""
    public, build = getattr(_api, name), globals()[name]

    def construct(**kwargs: Any) -> nn.Module:
        try:
            bound = inspect.signature(public).bind(**kwargs)
        except TypeError as err:
            raise TypeError(f"invertible_net: the arguments {kwargs} do not fit {name}(): {err}") from err
        bound.apply_defaults()
        return build(*bound.args)
    return construct


_CONSTRUCTORS = {'u_net': lambda: _by_name('u_net'), 'conv_net': lambda: _by_name('conv_net'),
                 'res_net': lambda: _by_name('res_net'), 'mlp': lambda: _dense_residual}


def invertible_net(num_blocks: int, construct_net: str | Callable, **construct_kwargs: Any) -> nn.Module:
    if isinstance(construct_net, str):
        if construct_net not in _CONSTRUCTORS:
            raise ValueError(f"invertible_net: unknown construct_net {construct_net!r}; accepted: "
                             f"{', '.join(_CONSTRUCTORS)} or a function returning a torch.nn.Module")
        construct_net = _CONSTRUCTORS[construct_net]()
        if 'in_channels' in construct_kwargs:
            construct_kwargs.setdefault('out_channels', construct_kwargs['in_channels'])
    elif not callable(construct_net):
        raise TypeError(f"invertible_net: construct_net must be a name or a function, got {construct_net!r}")
    return _on_default_device(InvertibleNet(num_blocks, lambda: construct_net(**construct_kwargs)))


# --- parameters, state ------------------------------------------------------------------------------


def _dim_names(module: nn.Module, name: str, param: torch.Tensor) -> str:
    """Names of the axes of a parameter: output and input channels, kernel axes x, y, z."""
    if name == 'weight' and isinstance(module, nn.Linear):
        return 'output,input'
    if name == 'weight' and isinstance(module, _CONV + _TRANSPOSED_CONV):
        channels = 'input,output' if module.transposed else 'output,input'
        return ','.join([channels, *_KERNEL_DIMS[:param.dim() - 2]])
    if param.dim() == 1:
        return 'output'
    return ','.join(f'd{i}' for i in range(param.dim()))


def get_parameters(net: nn.Module) -> dict[str, Tensor]:
    _check_network(net)
    return {f'{prefix}.{name}' if prefix else name: wrap(param, channel(_dim_names(module, name, param)))
            for prefix, module in net.named_modules() for name, param in module.named_parameters(recurse=False)}


def _check_network(net: Any) -> None:
    if not isinstance(net, nn.Module):
        raise TypeError(f"Expected a torch.nn.Module (a network of lazyphi.nn on torch), got {type(net).__name__}")


def _state_path(path: str) -> str:
    return path if str(path).endswith('.pth') else f'{path}.pth'


def _check_state_holder(obj: Any) -> None:
    if not isinstance(obj, (nn.Module, optim.Optimizer)):
        raise TypeError(f"Expected a torch.nn.Module or torch.optim.Optimizer, got {type(obj).__name__}")


def save_state(obj: nn.Module | optim.Optimizer, path: str) -> str:
    _check_state_holder(obj)
    path = _state_path(path)
    torch.save(obj.state_dict(), path)
    return path


def load_state(obj: nn.Module | optim.Optimizer, path: str) -> None:
    _check_state_holder(obj)
    obj.load_state_dict(torch.load(_state_path(path), weights_only=True))


# --- optimizers and training ------------------------------------------------------------------------


def _loss_native(output: Any) -> torch.Tensor:
    """The scalar to differentiate: the loss (first item of a tuple), summed over all its entries."""
    loss = output[0] if isinstance(output, (tuple, list)) else output
    if isinstance(loss, Tensor):
        loss = loss.sum.native()
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"update_weights: loss_function must return a Tensor (or a tuple starting with one) of "
                        f"torch values, got {type(loss).__name__}")
    return loss if loss.dim() == 0 else loss.sum()


def update_weights(net: nn.Module | Sequence[nn.Module], optimizer: optim.Optimizer, loss_function: Callable,
                   *loss_args: Any, **loss_kwargs: Any) -> Any:
    if not isinstance(optimizer, optim.Optimizer):
        raise TypeError(f"update_weights: optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    optimizer.zero_grad()
    output = loss_function(*loss_args, **loss_kwargs)
    _loss_native(output).backward()
    if isinstance(optimizer, optim.LBFGS):
        def closure() -> torch.Tensor:  # L-BFGS evaluates the loss again during its line search
            optimizer.zero_grad()
            loss = _loss_native(loss_function(*loss_args, **loss_kwargs))
            loss.backward()
            return loss
        optimizer.step(closure)
    else:
        optimizer.step()
    return output


def _parameters(net: nn.Module | Iterable[nn.Module]) -> list[torch.nn.Parameter]:
    """The parameters of a network or of several, each once."""
    nets = [net] if isinstance(net, nn.Module) else list(net) if isinstance(net, (tuple, list)) else [net]
    for n in nets:
        _check_network(n)
    return list(dict.fromkeys(itertools.chain.from_iterable(n.parameters() for n in nets)))


def adam(net: nn.Module, learning_rate: float, betas: tuple[float, float], epsilon: float) -> optim.Adam:
    return optim.Adam(_parameters(net), learning_rate, betas, epsilon)


def sgd(net: nn.Module, learning_rate: float, momentum: float, dampening: float, weight_decay: float,
        nesterov: bool) -> optim.SGD:
    return optim.SGD(_parameters(net), learning_rate, momentum, dampening, weight_decay, nesterov)


def adagrad(net: nn.Module, learning_rate: float, lr_decay: float, weight_decay: float,
            initial_accumulator_value: float, eps: float) -> optim.Adagrad:
    return optim.Adagrad(_parameters(net), learning_rate, lr_decay, weight_decay, initial_accumulator_value, eps)


def rmsprop(net: nn.Module, learning_rate: float, alpha: float, eps: float, weight_decay: float, momentum: float,
            centered: bool) -> optim.RMSprop:
    return optim.RMSprop(_parameters(net), learning_rate, alpha, eps, weight_decay, momentum, centered)


def set_learning_rate(optimizer: optim.Optimizer, learning_rate: float) -> None:
    if not isinstance(optimizer, optim.Optimizer):
        raise TypeError(f"set_learning_rate: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    for group in optimizer.param_groups:
        group['lr'] = learning_rate


def get_learning_rate(optimizer: optim.Optimizer) -> float:
    if not isinstance(optimizer, optim.Optimizer):
        raise TypeError(f"get_learning_rate: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
    return float(optimizer.param_groups[0]['lr'])
