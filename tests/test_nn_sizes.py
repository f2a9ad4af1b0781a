"""phiml's parameter counts (phiml's own tests assert them) for the same arguments, on every library of lazyphi.nn."""

import pytest

from lazyphi import nn

SIZES = {
    'u_net2d': (lambda: nn.u_net(2, 3, levels=3, filters=8, batch_norm=False, activation='ReLU', in_spatial=(64, 32)),
                6587),
    'u_net2d_res': (lambda: nn.u_net(2, 3, batch_norm=False, activation='SiLU', in_spatial=2, use_res_blocks=True),
                    39059),
    'u_net3d_norm': (lambda: nn.u_net(2, 3, levels=3, filters=8, batch_norm=True, activation='Sigmoid', in_spatial=3),
                     19707),
    'u_net1d_norm': (lambda: nn.u_net(2, 3, levels=2, filters=16, batch_norm=True, activation='tanh', in_spatial=1),
                     5043),
    'u_net1d_res': (lambda: nn.u_net(2, 3, batch_norm=True, activation='SiLU', in_spatial=1, use_res_blocks=True),
                    14867),
    'mlp': (lambda: nn.mlp(2, 3, layers=[10, 12], batch_norm=False, activation='ReLU'), 201),
    'mlp_norm': (lambda: nn.mlp(2, 3, layers=[10], batch_norm=True, activation='ReLU'), 83),
    'classifier': (lambda: nn.conv_classifier(1, (2,), 1, blocks=[10], dense_layers=[], batch_norm=True,
                                              softmax=False), 401),
    'inv_res': (lambda: nn.invertible_net(3, 'res_net', in_channels=2, batch_norm=True, layers=[]), 1080),
    'inv_conv': (lambda: nn.invertible_net(3, 'conv_net', in_channels=2, batch_norm=True, layers=[]), 576),
    'inv_mlp': (lambda: nn.invertible_net(3, 'mlp', in_channels=2, batch_norm=True, layers=[2]), 240),
}
LARGE = {  # seconds to build on JAX and TensorFlow
    'u_net3d_res': (lambda: nn.u_net(2, 3, batch_norm=True, activation='SiLU', in_spatial=3, use_res_blocks=True),
                    113939),
    'inv_u_net_own': (lambda: nn.invertible_net(3, lambda: nn.u_net(2, 2, 4, 16, True, 'SiLU', 2)), 454296),
    'inv_u_net': (lambda: nn.invertible_net(3, 'u_net', in_channels=2), 454296),
}


@pytest.mark.parametrize('name', SIZES)
def test_parameter_counts_are_phimls(nn_backend, name):
    build, count = SIZES[name]
    assert nn.parameter_count(build()) == count


@pytest.mark.slow
@pytest.mark.parametrize('name', LARGE)
def test_parameter_counts_of_large_networks_are_phimls(nn_backend, name):
    build, count = LARGE[name]
    assert nn.parameter_count(build()) == count
