"""lazyphi.nn on PyTorch: architectures (sizes: test_nn_sizes.py), running them on Tensors, training, state, errors."""

import pytest

torch = pytest.importorskip('torch')

from test_nn_sizes import SIZES  # noqa: E402

from lazyphi import math, nn  # noqa: E402  (after the skip: the networks are torch modules)
from lazyphi.backend.torch import TORCH  # noqa: E402
from lazyphi.math import batch, channel, spatial  # noqa: E402


def dims(shape) -> set:
    """The dims of a shape with their types and sizes, in no order (layouts may differ in order)."""
    return set(shape)


@pytest.fixture(autouse=True)
def _torch_default():
    """torch as the default backend, so that lazyphi.nn builds torch networks and tensors are torch's."""
    with TORCH:
        yield


@pytest.mark.parametrize('name', SIZES)
def test_parameter_counts_are_those_of_the_torch_modules(name):
    """lazyphi's count (phiml's, `tests/test_nn_sizes.py`) is what torch itself counts: no parameter is left out."""
    net = SIZES[name][0]()
    assert isinstance(net, torch.nn.Module)
    assert nn.parameter_count(net) == sum(p.numel() for p in net.parameters())


def test_unequal_filters_give_phimls_up_path_widths():
    """phiml narrows the double convolution on the way up to half its input width; filters per level."""
    net = nn.u_net(1, 2, levels=3, filters=[4, 8, 16], batch_norm=False)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [
        (1, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16),  # down
        (24, 12), (12, 8), (12, 6), (6, 4),  # up: 16+8 -> 12 -> 8, 8+4 -> 6 -> 4
        (4, 2)]


@pytest.mark.parametrize('d, use_res_blocks, periodic', [(1, False, False), (2, True, False), (2, False, True),
                                                         (3, True, True)])
def test_u_net_keeps_batch_and_spatial_dims(d, use_res_blocks, periodic):
    net = nn.u_net(2, 3, levels=3, filters=4, in_spatial=d, use_res_blocks=use_res_blocks, periodic=periodic)
    space = spatial(**dict(zip('xyz', (8, 12, 4)[:d], strict=False)))
    x = math.random_normal(batch(b=2), space, channel(c='u,v'))
    y = math.native_call(net, x)
    assert dims(y.shape) == dims(batch(b=2) & space & channel(vector=3))
    assert y.backend.name == 'torch'


def test_u_net_takes_sizes_that_do_not_halve_evenly():
    net = nn.u_net(1, 1, levels=3, filters=4, batch_norm=False)
    y = math.native_call(net, math.random_normal(batch(b=1), spatial(x=9, y=6)))
    assert dims(y.shape) == dims(batch(b=1) & spatial(x=9, y=6))


@pytest.mark.parametrize('build', [
    lambda: nn.conv_net(2, 2, [4, 5], periodic=True, activation='tanh'),
    lambda: nn.res_net(2, 2, [4, 5], periodic=True, activation='SiLU', batch_norm=True),
], ids=['conv_net', 'res_net'])
def test_periodic_networks_commute_with_shifts(build):
    """Wrapping around the edges makes every convolution commute with a circular shift of the input (a U-Net's
    interpolation does not wrap around)."""
    net = build().eval()
    x = math.random_normal(batch(b=2), spatial(x=8, y=6), channel(c=2))
    rolled = math.tensor(torch.roll(x.native('b,c,x,y'), 2, 2), x.shape.only('b,c,x,y', reorder=True))
    shifted_input = math.native_call(net, rolled)
    shifted_output = torch.roll(math.native_call(net, x).native('b,vector,x,y'), 2, 2)
    torch.testing.assert_close(shifted_input.native('b,vector,x,y'), shifted_output, rtol=1e-4, atol=1e-5)


def test_zero_padding_does_not_commute_with_shifts():
    """The converse of the test above, so that it proves something about `periodic`."""
    net = nn.conv_net(1, 1, [4], periodic=False).eval()
    x = math.random_normal(batch(b=1), spatial(x=8))
    rolled = math.tensor(torch.roll(x.native('b,x'), 3, 1), x.shape.only('b,x', reorder=True))
    shifted_input = math.native_call(net, rolled).native('b,x')
    assert not torch.allclose(shifted_input, torch.roll(math.native_call(net, x).native('b,x'), 3, 1), atol=1e-5)


def test_mlp_acts_on_channels_of_every_point():
    net = nn.mlp(3, 2, [8], activation='leaky_relu')
    x = math.random_normal(batch(b=4), spatial(x=5), channel(c=3))
    y = math.native_call(net, x)
    assert dims(y.shape) == dims(batch(b=4) & spatial(x=5) & channel(vector=2))
    one_point = math.native_call(net, x.x[2])
    math.assert_close(y.x[2], one_point, rel_tolerance=1e-5, abs_tolerance=1e-6)


def test_mlp_softmax_sums_to_one():
    net = nn.mlp(4, 3, [6], softmax=True)
    y = math.native_call(net, math.random_normal(batch(b=5), channel(c=4)))
    math.assert_close(math.sum(y, 'vector'), 1, rel_tolerance=1e-5)


def test_conv_classifier_gives_one_value_per_class():
    net = nn.conv_classifier(2, (8, 8), 5, blocks=[4, 6], block_sizes=[1, 2], dense_layers=[16])
    y = math.native_call(net, math.random_normal(batch(b=3), spatial(x=8, y=8), channel(c=2)))
    assert dims(y.shape) == dims(batch(b=3) & channel(vector=5))
    math.assert_close(math.sum(y, 'vector'), 1, rel_tolerance=1e-5)


@pytest.mark.parametrize('construct, kwargs, shape', [
    ('mlp', dict(in_channels=6, layers=[8]), batch(b=4) & channel(c=6)),
    ('conv_net', dict(in_channels=2, layers=[4], in_spatial=1), batch(b=2) & spatial(x=8) & channel(c=2)),
    ('res_net', dict(in_channels=2, layers=[4]), batch(b=2) & spatial(x=6, y=4) & channel(c=2)),
    ('u_net', dict(in_channels=2, levels=2, filters=4, batch_norm=False),
     batch(b=2) & spatial(x=8, y=8) & channel(c=2)),
    ('conv_net', dict(in_channels=2, layers=[3], in_spatial=3), batch(b=1) & spatial(x=4, y=4, z=2) & channel(c=2)),
])
def test_invertible_net_runs_backwards(construct, kwargs, shape):
    math.seed(1)
    net = nn.invertible_net(2, construct, **kwargs).eval()
    x = math.random_normal(shape)
    y = math.native_call(net, x, channel_dim='c')
    assert dims(y.shape) == dims(shape)
    assert not math.close(y, x)
    math.assert_close(math.native_call(net, y, backward=True, channel_dim='c'), x, abs_tolerance=1e-4)


def test_seed_fixes_the_initial_weights():
    math.seed(3)
    a = nn.get_parameters(nn.u_net(1, 1, levels=2))
    math.seed(3)
    b = nn.get_parameters(nn.u_net(1, 1, levels=2))
    assert a.keys() == b.keys()
    for name in a:
        math.assert_close(a[name], b[name], rel_tolerance=0, abs_tolerance=0)


def test_biases_start_at_zero():
    for name, value in nn.get_parameters(nn.res_net(1, 1, [3], batch_norm=True)).items():
        if name.endswith('bias'):
            assert math.close(value, 0), name


def test_get_parameters_names_and_dims():
    params = nn.get_parameters(nn.mlp(2, 3, [10], batch_norm=True))
    assert params['layers.0.weight'].shape == channel(output=10, input=2)
    assert params['layers.0.bias'].shape == channel(output=10)
    assert params['layers.2.weight'].shape == channel(output=10)  # batch norm scale
    assert params['layers.3.weight'].shape == channel(output=3, input=10)
    assert all(isinstance(p.native(), torch.nn.Parameter) for p in params.values())
    conv = nn.get_parameters(nn.conv_net(2, 1, [4], in_spatial=3))
    assert conv['0.weight'].shape == channel(output=4, input=2, x=3, y=3, z=3)


def _regression(net_fn=lambda: nn.mlp(2, 1, [16], activation='tanh')):
    """A network, data x and a loss function fitting y = x0 - 2 x1."""
    math.seed(0)
    net = net_fn()
    x = math.random_normal(batch(b=64), channel(vector='a,b'))
    target = x.vector['a'] - 2 * x.vector['b']

    def loss_function(data):
        return math.l2_loss(math.native_call(net, data) - target)
    return net, x, loss_function


@pytest.mark.parametrize('make_optimizer', [
    lambda net: nn.adam(net, 1e-2),
    lambda net: nn.sgd(net, 1e-3, momentum=0.9),
    lambda net: nn.adagrad(net, 1e-1),
    lambda net: nn.rmsprop(net, 1e-2),
], ids=['adam', 'sgd', 'adagrad', 'rmsprop'])
def test_training_lowers_the_loss(make_optimizer):
    net, x, loss_function = _regression()
    optimizer = make_optimizer(net)
    first = nn.update_weights(net, optimizer, loss_function, x)
    for _ in range(30):
        last = nn.update_weights(net, optimizer, loss_function, x)
    assert float(last.sum) < 0.5 * float(first.sum)


def test_update_weights_returns_the_loss_before_the_step():
    net, x, loss_function = _regression()
    before = loss_function(x)
    returned = nn.update_weights(net, nn.sgd(net, 0.1), loss_function, x)
    math.assert_close(returned, before)
    assert not math.close(loss_function(x), before)


def test_update_weights_with_jit_compiled_loss_and_extra_outputs():
    net, x, loss_function = _regression()

    @math.jit_compile
    def with_prediction(data):
        return loss_function(data), math.native_call(net, data)
    optimizer = nn.adam(net, 1e-2)
    losses = [float(nn.update_weights(net, optimizer, with_prediction, x)[0].sum) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0]
    _, prediction = nn.update_weights(net, optimizer, with_prediction, data=x)
    assert dims(prediction.shape) == dims(batch(b=64))


def test_one_optimizer_for_two_networks():
    math.seed(0)
    encoder, decoder = nn.mlp(2, 3, [8]), nn.mlp(3, 2, [8])
    optimizer = nn.adam([encoder, decoder], 1e-2)
    x = math.random_normal(batch(b=32), channel(vector='a,b'))
    before = [p.detach().clone() for p in decoder.parameters()]
    nn.update_weights([encoder, decoder], optimizer,
                      lambda d: math.l2_loss(math.native_call(decoder, math.native_call(encoder, d)) - d), x)
    assert all(not torch.equal(b, p) for b, p in zip(before, decoder.parameters(), strict=True))


def test_learning_rate_get_and_set():
    net = nn.mlp(2, 1, [4])
    optimizer = nn.adam(net, 0.01)
    assert nn.get_learning_rate(optimizer) == 0.01
    nn.set_learning_rate(optimizer, math.tensor(0.5))
    assert nn.get_learning_rate(optimizer) == 0.5
    assert all(group['lr'] == 0.5 for group in optimizer.param_groups)


def test_save_and_load_network_and_optimizer(tmp_path):
    net, x, loss_function = _regression()
    optimizer = nn.adam(net, 1e-2)
    for _ in range(3):
        nn.update_weights(net, optimizer, loss_function, x)
    net_path = nn.save_state(net, str(tmp_path / 'net'))
    optimizer_path = nn.save_state(optimizer, str(tmp_path / 'optimizer.pth'))
    assert net_path == str(tmp_path / 'net.pth') and optimizer_path == str(tmp_path / 'optimizer.pth')

    copy = nn.mlp(2, 1, [16], activation='tanh')
    copy_optimizer = nn.adam(copy, 1e-2)
    nn.load_state(copy, str(tmp_path / 'net'))
    nn.load_state(copy_optimizer, optimizer_path)
    for a, b in zip(net.parameters(), copy.parameters(), strict=True):
        assert torch.equal(a, b)
    # the optimizer's moments came along: the next step is the same for both
    nn.update_weights(net, optimizer, loss_function, x)
    nn.update_weights(copy, copy_optimizer, lambda d: math.l2_loss(math.native_call(copy, d) -
                                                                   (d.vector['a'] - 2 * d.vector['b'])), x)
    for a, b in zip(net.parameters(), copy.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_activation_as_class_function_or_module():
    for activation in (torch.nn.Tanh, torch.tanh, torch.nn.Tanh()):
        net = nn.mlp(2, 2, [3], activation=activation)
        assert nn.parameter_count(net) == 17
        y = math.native_call(net, math.random_normal(batch(b=2), channel(c=2)))
        assert dims(y.shape) == dims(batch(b=2) & channel(vector=2))


def test_activation_names_are_case_insensitive():
    for name in ('relu', 'RELU', 'LeakyReLU', 'leaky_relu', 'softplus', 'Softplus', 'ELU', 'GeLU', 'tanh', 'Tanh'):
        nn.mlp(1, 1, [2], activation=name)


@pytest.mark.parametrize('build, error, words', [
    (lambda: nn.mlp(2, 1, [4], activation='swoosh'), ValueError, ["'swoosh'", 'relu', 'sigmoid']),
    (lambda: nn.mlp(2, 1, [4], activation=3), TypeError, ['activation', '3']),
    (lambda: nn.u_net(1, 1, in_spatial=4), ValueError, ['in_spatial', '4']),
    (lambda: nn.u_net(1, 1, levels=3, filters=[4, 8]), ValueError, ['filters', '3 levels']),
    (lambda: nn.u_net(1, 1, levels=0), ValueError, ['levels', '0']),
    (lambda: nn.conv_classifier(1, 8, 2), TypeError, ['in_spatial', '8']),
    (lambda: nn.conv_classifier(1, (4,), 2, blocks=[2, 2, 2], block_sizes=[1, 1, 1]), ValueError, ['(4,)']),
    (lambda: nn.invertible_net(2, 'transformer', in_channels=2), ValueError, ["'transformer'", 'u_net']),
    (lambda: nn.invertible_net(2, 'mlp', in_channels=2, layers=[2], softmax=True), ValueError, ['softmax']),
    (lambda: nn.invertible_net(2, 'conv_net', in_channels=2, filters=3), TypeError, ['conv_net', 'filters']),
    (lambda: nn.get_parameters('net'), TypeError, ['torch.nn.Module', 'str']),
    (lambda: nn.adam(object()), TypeError, ['torch.nn.Module', 'object']),
    (lambda: nn.update_weights(nn.mlp(1, 1, []), 'adam', lambda: 0), TypeError, ['optimizer', 'str']),
    (lambda: nn.update_weights(nn.mlp(1, 1, []), nn.sgd(nn.mlp(1, 1, [])), lambda: 1.5), TypeError,
     ['Tensor', 'float']),
    (lambda: nn.save_state([], 'x'), TypeError, ['Optimizer', 'list']),
    (lambda: nn.get_learning_rate(None), TypeError, ['NoneType']),
])
def test_bad_input_raises_and_says_why(build, error, words):
    with pytest.raises(error) as info:
        build()
    for word in words:
        assert word in str(info.value)


def test_loading_a_missing_file_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        nn.load_state(nn.mlp(1, 1, []), str(tmp_path / 'absent'))


def test_nn_library_of_the_torch_backend():
    from lazyphi.nn import _torch
    assert TORCH.nn_library() is _torch
