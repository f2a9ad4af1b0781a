"""lazyphi.nn on JAX: networks on tensors, training, jit-compiled losses, batch-norm
statistics, optimizers against torch's, saving, loading, pickling, errors."""

import pickle

import numpy as np
import pytest

from lazyphi import math, nn
from lazyphi.math import batch, channel, spatial

jax = pytest.importorskip('jax')
from backends import get_backend  # noqa: E402


@pytest.fixture(autouse=True)
def _jax_default():
    with get_backend('jax'):
        math.seed(0)
        yield


def _mlp_problem():
    """A fixed regression problem: inputs and targets of a smooth function."""
    x = math.wrap(np.linspace(-1, 1, 64 * 2, dtype=np.float32).reshape(64, 2), batch('b'), channel(vector='a,b'))
    target = math.stack({'u': math.sin(3 * x['a']) * x['b'], 'v': x['a'] + x['b'], 'w': x['a'] ** 2},
                        channel('vector'))
    return x, target


def test_get_parameters_names_and_dims():
    params = nn.get_parameters(nn.mlp(2, 3, layers=[10, 12], batch_norm=True))
    assert set(params) == {'linear0.weight', 'linear0.bias', 'norm0.scale', 'norm0.offset', 'linear1.weight',
                           'linear1.bias', 'norm1.scale', 'norm1.offset', 'linear_out.weight', 'linear_out.bias'}
    assert params['linear0.weight'].shape == channel(input=2, output=10)
    assert params['linear_out.bias'].shape == channel(output=3)
    conv = nn.get_parameters(nn.conv_net(2, 1, [4], in_spatial=2))
    assert conv['conv0.conv.weight'].shape == channel(x=3, y=3, input=2, output=4)
    assert all(t.backend.name == 'jax' for t in conv.values())


@pytest.mark.parametrize('make, x, c_in, c_out', [
    (lambda: nn.u_net(2, 3, levels=3, filters=4, in_spatial=1), spatial(x=12), 2, 3),
    (lambda: nn.u_net(1, 2, levels=3, filters=4, in_spatial=2, use_res_blocks=True), spatial(x=8, y=6), 1, 2),
    (lambda: nn.u_net(1, 1, levels=2, filters=[2, 4], in_spatial=3, periodic=True), spatial(x=4, y=4, z=6), 1, 1),
    (lambda: nn.u_net(1, 1, levels=3, filters=4, in_spatial=2), spatial(x=7, y=5), 1, 1),  # odd sizes
    (lambda: nn.conv_net(1, 2, [4, 4], batch_norm=True, periodic=True), spatial(x=6, y=6), 1, 2),
    (lambda: nn.res_net(3, 2, [4, 5], activation='LeakyReLU'), spatial(x=6, y=6), 3, 2),
    (lambda: nn.invertible_net(2, 'conv_net', in_channels=2, layers=[]), spatial(x=4, y=4), 2, 2),
])
def test_native_call_keeps_batch_and_spatial_dims(make, x, c_in, c_out):
    y = math.native_call(make(), math.random_normal(batch(b=3), x, channel(c=c_in)))
    assert y.shape.batch == batch(b=3) and y.shape.spatial == x
    assert y.shape.channel.volume == c_out


def test_mlp_and_classifier_on_tensors():
    y = math.native_call(nn.mlp(2, 3, [8], softmax=True), math.random_normal(batch(b=5), channel(vector=2)))
    assert y.shape == batch(b=5) & channel(vector=3)
    np.testing.assert_allclose(math.sum(y, 'vector').numpy(), 1, rtol=1e-5)
    classifier = nn.conv_classifier(1, (8, 8), 4, blocks=[4, 8], block_sizes=[1, 2], dense_layers=[16])
    y = math.native_call(classifier, math.random_normal(batch(b=2), spatial(x=8, y=8)))
    assert y.shape == batch(b=2) & channel(vector=4)


@pytest.mark.parametrize('construct, kwargs, x', [
    ('conv_net', dict(in_channels=2, layers=[4]), spatial(x=4, y=6) & channel(c=2)),
    ('res_net', dict(in_channels=2, layers=[], in_spatial=1), spatial(x=6) & channel(c=2)),
    ('mlp', dict(in_channels=4, layers=[8], batch_norm=True), channel(c=4)),
])
def test_invertible_net_runs_backwards(construct, kwargs, x):
    net = nn.invertible_net(3, construct, **kwargs).eval()
    value = math.random_normal(batch(b=4), x)
    y = math.native_call(net, value)
    assert y.shape.non_channel == value.shape.non_channel
    assert np.abs(y.numpy() - value.numpy()).max() > 1e-3  # both ordered batch, spatial, channel
    back = math.native_call(lambda v: net(v, backward=True), y)
    np.testing.assert_allclose(back.numpy(), value.numpy(), atol=1e-4)


def _train(net, optimizer, loss_function, steps: int, *args) -> list[float]:
    losses = []
    for _ in range(steps):
        loss = nn.update_weights(net, optimizer, loss_function, *args)
        losses.append(float(math.mean(loss, loss.shape)))
    return losses


@pytest.mark.slow
@pytest.mark.parametrize('make_optimizer', [
    lambda net: nn.adam(net, 1e-2),
    lambda net: nn.sgd(net, 1e-2, momentum=0.9, nesterov=True),
    lambda net: nn.adagrad(net, 1e-1, lr_decay=1e-3),
    lambda net: nn.rmsprop(net, 1e-3, momentum=0.5, centered=True),
])
def test_training_lowers_the_loss(make_optimizer):
    x, target = _mlp_problem()
    net = nn.mlp(2, 3, [32, 32], batch_norm=True, activation='tanh')
    optimizer = make_optimizer(net)

    def loss_function(x, target):
        return math.mean(math.l2_loss(math.native_call(net, x) - target), 'b')
    losses = _train(net, optimizer, loss_function, 30, x, target)
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.slow
def test_jit_compiled_loss_updates_the_parameters_as_the_eager_one():
    x, target = _mlp_problem()
    net = nn.mlp(2, 3, [16], batch_norm=True)
    twin = pickle.loads(pickle.dumps(net))
    traced = []

    def loss(net):
        def loss_function(x, target):
            traced.append(net)
            return math.l2_loss(math.native_call(net, x) - target), x
        return loss_function
    eager_optimizer, jit_optimizer = nn.rmsprop(net, 1e-2), nn.rmsprop(twin, 1e-2)
    compiled = math.jit_compile(loss(twin))
    for _ in range(3):
        eager = nn.update_weights(net, eager_optimizer, loss(net), x, target)
        jitted = nn.update_weights(twin, jit_optimizer, compiled, x, target)
        np.testing.assert_allclose(jitted[0].numpy(), eager[0].numpy(), rtol=1e-4)
        assert isinstance(jitted, tuple) and jitted[1].shape == x.shape
        for name, p in nn.get_parameters(net).items():
            np.testing.assert_allclose(nn.get_parameters(twin)[name].numpy(), p.numpy(), rtol=2e-4, atol=1e-6)
        np.testing.assert_allclose(twin.statistics['norm0']['mean'], net.statistics['norm0']['mean'], rtol=1e-5)
    assert traced.count(twin) == 1  # compiled once, run three times
    nn.set_learning_rate(jit_optimizer, 0.)
    before = nn.get_parameters(twin)['linear0.weight'].numpy()
    nn.update_weights(twin, jit_optimizer, compiled, x, target)
    np.testing.assert_array_equal(nn.get_parameters(twin)['linear0.weight'].numpy(), before)
    assert traced.count(twin) == 1  # a new learning rate is an input, not compiled in
    # called directly after the steps, the function sees the new parameters
    np.testing.assert_allclose(compiled(x, target)[0].numpy(), loss(twin)(x, target)[0].numpy(), rtol=1e-5)


def test_batch_norm_statistics_move_in_training_mode_only():
    net = nn.mlp(2, 1, [4], batch_norm=True)
    x = math.random_normal(batch(b=32), channel(vector=2)) * 3 + 1
    initial = np.asarray(net.statistics['norm0']['mean'])
    math.native_call(net, x)
    trained = np.asarray(net.statistics['norm0']['mean'])
    assert not np.allclose(trained, initial)
    net.eval()
    y1 = math.native_call(net, x)
    np.testing.assert_array_equal(np.asarray(net.statistics['norm0']['mean']), trained)
    y2 = math.native_call(net.train(), x)
    assert np.abs(y1.numpy(y2.shape) - y2.numpy()).max() > 1e-4  # running vs batch statistics
    optimizer = nn.sgd(net, 1e-3)
    nn.update_weights(net, optimizer, lambda x: math.l2_loss(math.native_call(net, x)), x)
    assert not np.allclose(np.asarray(net.statistics['norm0']['mean']), trained)
    assert not jax.tree.leaves(net.statistics)[0].__class__.__name__.endswith('Tracer')


def test_jit_compiled_step_follows_the_training_mode():
    net = nn.mlp(2, 1, [4], batch_norm=True)
    x = math.random_normal(batch(b=16), channel(vector=2)) + 2
    optimizer = nn.adam(net)
    loss_function = math.jit_compile(lambda x: math.l2_loss(math.native_call(net, x)))
    nn.update_weights(net, optimizer, loss_function, x)
    trained = np.asarray(net.statistics['norm0']['mean'])
    assert not np.allclose(trained, 0)
    nn.update_weights(net.eval(), optimizer, loss_function, x)
    np.testing.assert_array_equal(np.asarray(net.statistics['norm0']['mean']), trained)
    nn.update_weights(net.train(), optimizer, loss_function, x)
    assert not np.allclose(np.asarray(net.statistics['norm0']['mean']), trained)


@pytest.mark.slow
def test_optimizer_rules_match_torch():
    torch = pytest.importorskip('torch')
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2)
    cases = [('adam', dict(betas=(0.8, 0.99), eps=1e-7), dict(betas=(0.8, 0.99), epsilon=1e-7)),
             ('sgd', dict(momentum=0.9, dampening=0.1, weight_decay=0.01), None),
             ('sgd', dict(momentum=0.9, nesterov=True), None),
             ('adagrad', dict(lr_decay=0.1, weight_decay=0.01, initial_accumulator_value=0.1), None),
             ('rmsprop', dict(alpha=0.9, weight_decay=0.01, momentum=0.5, centered=True), None)]
    for rule, torch_options, options in cases:
        net = nn.mlp(2, 1, [])
        weight, bias = nn.get_parameters(net)['linear_out.weight'], nn.get_parameters(net)['linear_out.bias']
        linear = torch.nn.Linear(2, 1)
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(weight.numpy().T))
            linear.bias.copy_(torch.tensor(bias.numpy()))
        torch_optimizer = getattr(torch.optim, {'adam': 'Adam', 'sgd': 'SGD', 'adagrad': 'Adagrad',
                                                'rmsprop': 'RMSprop'}[rule])(linear.parameters(), lr=0.05,
                                                                             **torch_options)
        optimizer = getattr(nn, rule)(net, 0.05, **(options or torch_options))
        xt = math.wrap(x, batch('b'), channel(vector='a,b'))
        for _ in range(4):
            torch_optimizer.zero_grad()
            (0.5 * (linear(torch.tensor(x)) ** 2).sum()).backward()
            torch_optimizer.step()
            nn.update_weights(net, optimizer, lambda v, net=net: math.l2_loss(math.native_call(net, v)), xt)
        np.testing.assert_allclose(nn.get_parameters(net)['linear_out.weight'].numpy().T,
                                   linear.weight.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=rule)


def test_save_and_load_network_and_optimizer(tmp_path):
    x, target = _mlp_problem()
    net = nn.mlp(2, 3, [8], batch_norm=True)
    optimizer = nn.adam(net, 1e-2)

    def loss_function(x, target):
        return math.l2_loss(math.native_call(net, x) - target)
    _train(net, optimizer, loss_function, 2, x, target)
    assert nn.save_state(net, str(tmp_path / 'net')) == str(tmp_path / 'net.npz')
    assert nn.save_state(optimizer, str(tmp_path / 'opt.npz')) == str(tmp_path / 'opt.npz')
    expected = _train(net, optimizer, loss_function, 2, x, target)
    nn.load_state(net, str(tmp_path / 'net'))
    nn.load_state(optimizer, str(tmp_path / 'opt'))
    assert optimizer.count == 2
    np.testing.assert_allclose(_train(net, optimizer, loss_function, 2, x, target), expected, rtol=1e-5)
    with pytest.raises(ValueError, match='another JaxNet'):
        nn.load_state(nn.mlp(2, 3, [8]), str(tmp_path / 'net'))
    with pytest.raises(ValueError, match='other shapes'):
        nn.load_state(nn.mlp(2, 3, [9], batch_norm=True), str(tmp_path / 'net'))
    with pytest.raises(TypeError, match='JAX network or optimizer'):
        nn.save_state('net', str(tmp_path / 'x'))


def test_learning_rate_get_set():
    optimizer = nn.sgd(nn.mlp(2, 1, [4]), 0.1)
    assert nn.get_learning_rate(optimizer) == 0.1
    nn.set_learning_rate(optimizer, 0.01)
    assert nn.get_learning_rate(optimizer) == 0.01
    with pytest.raises(ValueError, match='learning rate'):
        nn.set_learning_rate(optimizer, -1)


@pytest.mark.slow
def test_network_and_optimizer_pickle():
    net = nn.u_net(1, 1, levels=2, filters=4, activation='SiLU', in_spatial=1)
    x = math.random_normal(batch(b=2), spatial(x=8))
    optimizer = nn.adam(net)
    nn.update_weights(net, optimizer, lambda x: math.l2_loss(math.native_call(net, x)), x)
    copy, optimizer_copy = pickle.loads(pickle.dumps((net, optimizer)))
    net.eval(), copy.eval()
    np.testing.assert_allclose(math.native_call(copy, x).numpy(), math.native_call(net, x).numpy(), rtol=1e-6)
    assert optimizer_copy.count == 1
    nn.update_weights(copy, optimizer_copy, lambda x: math.l2_loss(math.native_call(copy, x)), x)


def test_errors_name_the_bad_value():
    with pytest.raises(ValueError, match=r"'Swoosh'.*relu"):
        nn.mlp(2, 1, [4], activation='Swoosh')
    with pytest.raises(ValueError, match='filters'):
        nn.u_net(1, 1, levels=3, filters=[4, 8])
    with pytest.raises(ValueError, match='in_spatial'):
        nn.u_net(1, 1, in_spatial=4)
    with pytest.raises(ValueError, match='too small'):
        nn.conv_classifier(1, (4,), 2, blocks=[4, 4, 4], block_sizes=[1, 1, 1], dense_layers=[])
    with pytest.raises(ValueError, match='construct_net'):
        nn.invertible_net(2, 'fno')
    with pytest.raises(ValueError, match='Nesterov'):
        nn.sgd(nn.mlp(2, 1, []), nesterov=True)
    net = nn.mlp(2, 1, [4])
    with pytest.raises(ValueError, match='backward=True'):
        net(np.zeros((1, 2), np.float32), backward=True)
    with pytest.raises(ValueError, match='other parameters'):
        nn.update_weights(net, nn.adam(nn.mlp(2, 1, [5, 5])), lambda: None)
    with pytest.raises(TypeError, match='JAX optimizer'):
        nn.update_weights(net, 'adam', lambda: None)
