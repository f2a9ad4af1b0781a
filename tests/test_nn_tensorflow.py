"""lazyphi.nn on TensorFlow (Keras 3): training steps, saved states, learning rates,
parameters, networks called on named tensors, invertible networks and errors."""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip('tensorflow')

from lazyphi import math, nn  # noqa: E402  (after the skip: these tests need TensorFlow)
from lazyphi.backend.tensorflow import TENSORFLOW  # noqa: E402
from lazyphi.math import batch, channel, spatial  # noqa: E402


@pytest.fixture(autouse=True)
def _tensorflow():
    with TENSORFLOW:
        yield


def _values(params: dict) -> dict:
    return {name: np.array(value.native()) for name, value in params.items()}


def test_get_parameters_names_and_dims():
    params = nn.get_parameters(nn.mlp(2, 3, [4], batch_norm=True))
    assert {n: v.shape.names for n, v in params.items()} == {
        'dense0.weight': ('input', 'output'), 'dense0.bias': ('output',), 'norm0.gamma': ('output',),
        'norm0.beta': ('output',), 'dense_out.weight': ('input', 'output'), 'dense_out.bias': ('output',)}
    kernel = nn.get_parameters(nn.conv_net(2, 1, [5], in_spatial=2))['conv0.weight']
    assert kernel.shape == channel(x=3, y=3, input=2, output=5)
    names = list(nn.get_parameters(nn.invertible_net(2, 'mlp', in_channels=2, layers=[])))
    assert names[:2] == ['coupling0.s1.dense0.weight', 'coupling0.s1.dense0.bias'] and len(names) == 16


class _AlikeNamed(tf.keras.Model):
    """Two sub-networks of the same name, as a user may make them."""

    def __init__(self):
        super().__init__()
        self.a = tf.keras.Sequential([tf.keras.Input((2,)), tf.keras.layers.Dense(3, name='d')], name='same')
        self.b = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2, name='d')], name='same')

    def call(self, x):
        return self.b(self.a(x))


def test_get_parameters_of_alike_named_layers_numbers_them():
    params = nn.get_parameters(_AlikeNamed())
    assert {n: v.shape.sizes for n, v in params.items()} == {
        'same.d.weight': (2, 3), 'same.d.bias': (3,), 'same.d.weight_1': (3, 2), 'same.d.bias_1': (2,)}


def test_native_call_shapes():
    x = math.random_uniform(batch(b=3), spatial(x=8, y=4), channel(c=2))
    assert math.native_call(nn.u_net(2, 5, levels=2, filters=4), x).shape == batch(b=3) & spatial(x=8, y=4) & \
        channel(vector=5)
    assert math.native_call(nn.res_net(2, 1, [3], periodic=True), x).shape == batch(b=3) & spatial(x=8, y=4)
    line = math.random_uniform(batch(b=2), spatial(x=6))
    assert math.native_call(nn.conv_net(1, 2, [3], in_spatial=1), line).shape == batch(b=2) & spatial(x=6) & \
        channel(vector=2)
    features = math.random_uniform(batch(b=7), channel(vector=2))
    assert math.native_call(nn.mlp(2, 3, [4], softmax=True), features).shape == batch(b=7) & channel(vector=3)
    images = math.random_uniform(batch(b=2), spatial(x=4, y=4))
    classes = math.native_call(nn.conv_classifier(1, (4, 4), 3, blocks=[2], dense_layers=[5]), images)
    assert classes.shape == batch(b=2) & channel(vector=3)
    np.testing.assert_allclose(math.sum(classes, 'vector').numpy('b'), 1, rtol=1e-5)


def test_activation_by_name_layer_class_or_function():
    x = np.array([[-1., 2.], [3., -4.]], np.float32)
    for activation in ('relu', 'ReLU', tf.keras.layers.ReLU, tf.nn.relu):
        net = nn.mlp(2, 2, [6], activation=activation)
        before, after = tf.keras.Model(net.input, [net.get_layer('dense0').output, net.get_layer('act0').output])(x)
        np.testing.assert_allclose(np.array(after), np.maximum(np.array(before), 0), err_msg=str(activation))


def test_periodic_convolutions_commute_with_shifts():
    net = nn.u_net(1, 1, levels=2, filters=3, batch_norm=False, in_spatial=1, periodic=True)
    x = np.random.default_rng(0).random((1, 8, 1), np.float32)
    shifted = net(np.roll(x, 2, axis=1))
    np.testing.assert_allclose(np.array(shifted), np.roll(np.array(net(x)), 2, axis=1), atol=1e-5)


@pytest.mark.parametrize('construct, shape', [
    ('conv_net', batch(b=2) & spatial(x=4, y=6) & channel(vector=2)),
    ('mlp', batch(b=5) & channel(vector=4)),
])
def test_invertible_net_inverts(construct, shape):
    net = nn.invertible_net(3, construct, in_channels=shape.get_size('vector'), layers=[3])
    x = math.random_normal(shape)
    y = math.native_call(net, x)
    assert y.shape == x.shape
    assert float(math.max(abs(y - x), y.shape)) > 1e-3  # the blocks change their input
    back = math.native_call(net, y, backward=True)
    np.testing.assert_allclose(back.numpy(x.shape), x.numpy(x.shape), atol=1e-4)


# Keras pickles through np.array(variable): TensorFlow's __array__ predates NumPy 2's copy keyword
@pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword:DeprecationWarning")
def test_networks_pickle_with_their_weights():
    x = np.random.default_rng(0).random((2, 4, 4, 2), np.float32)
    for net in (nn.u_net(2, 1, levels=2, filters=2, periodic=True),
                nn.invertible_net(2, 'conv_net', in_channels=2, layers=[3], batch_norm=True)):
        np.testing.assert_array_equal(np.array(pickle.loads(pickle.dumps(net))(x)), np.array(net(x)))


def _fit(net, optimizer, loss_function, x, steps=6) -> list[float]:
    return [float(nn.update_weights(net, optimizer, loss_function, x)) for _ in range(steps)]


@pytest.mark.parametrize('make_optimizer', [nn.adam, nn.sgd, nn.adagrad, nn.rmsprop])
def test_training_lowers_the_loss(make_optimizer):
    net = nn.mlp(2, 1, [8])
    optimizer = make_optimizer(net, 0.05)
    x = math.random_uniform(batch(b=16), channel(vector=2))

    def loss_function(x):
        return math.l2_loss(math.native_call(net, x) - 1), 'aux'
    output = nn.update_weights(net, optimizer, loss_function, x)
    assert isinstance(output, tuple) and output[1] == 'aux'
    losses = [float(math.sum(nn.update_weights(net, optimizer, loss_function, x)[0], 'b')) for _ in range(6)]
    assert losses[-1] < losses[0]


def test_jit_compiled_loss_trains_u_net():
    net = nn.u_net(1, 1, levels=2, filters=4, use_res_blocks=True, activation='SiLU')
    optimizer = nn.adam(net, 1e-2)
    x = math.random_uniform(batch(b=2), spatial(x=8, y=8))

    @math.jit_compile
    def loss_function(x):
        return math.sum(math.l2_loss(math.native_call(net, x) - 1), 'b')
    losses = _fit(net, optimizer, loss_function, x)
    assert losses[-1] < losses[0]
    assert len(loss_function.traces) == 1


def test_weight_decay_shrinks_weights_as_torch_does():
    net = nn.mlp(2, 2, [3])
    before = _values(nn.get_parameters(net))
    optimizer = nn.sgd(net, 0.1, weight_decay=0.5)
    nn.update_weights(net, optimizer, lambda x: 0 * math.sum(math.native_call(net, x), 'b,vector'),
                       math.zeros(batch(b=1), channel(vector=2)))
    after = _values(nn.get_parameters(net))
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value * (1 - 0.1 * 0.5), rtol=1e-6)


def test_batch_norm_trains_when_called_with_training():
    net = nn.mlp(2, 1, [3], batch_norm=True, activation='sigmoid')
    moving_mean = next(v for v in net.weights if v.path.endswith('moving_mean'))
    x = math.random_uniform(batch(b=8), channel(vector=2)) + 5
    math.native_call(net, x)
    assert not np.any(moving_mean.numpy())
    math.native_call(net, x, training=True)
    assert np.any(moving_mean.numpy())


def test_learning_rate():
    optimizer = nn.adam(nn.mlp(1, 1, []), 0.25)
    assert nn.get_learning_rate(optimizer) == 0.25
    nn.set_learning_rate(optimizer, 0.125)
    assert nn.get_learning_rate(optimizer) == 0.125


def test_save_and_load_state(tmp_path):
    net = nn.u_net(1, 1, levels=2, filters=2)
    optimizer = nn.adam(net, 0.1)
    x = math.random_uniform(batch(b=2), spatial(x=4, y=4))

    def loss_function(x):
        return math.l2_loss(math.native_call(net, x) - 1)
    nn.update_weights(net, optimizer, loss_function, x)
    net_path = nn.save_state(net, str(tmp_path / 'net'))
    optimizer_path = nn.save_state(optimizer, str(tmp_path / 'optimizer'))
    assert net_path.endswith('.weights.h5') and optimizer_path.endswith('.npz')
    saved_params = _values(nn.get_parameters(net))
    saved_slots = [v.numpy() for v in optimizer.variables]
    nn.update_weights(net, optimizer, loss_function, x)
    nn.load_state(net, str(tmp_path / 'net'))
    nn.load_state(optimizer, optimizer_path)
    for name, value in _values(nn.get_parameters(net)).items():
        np.testing.assert_array_equal(value, saved_params[name])
    for variable, value in zip(optimizer.variables, saved_slots, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)
    with pytest.raises(ValueError, match='shapes'):
        nn.load_state(nn.adam(nn.mlp(1, 1, [])), optimizer_path)
    with pytest.raises(FileNotFoundError, match='missing'):
        nn.load_state(net, str(tmp_path / 'missing'))


def test_bad_input_raises():
    with pytest.raises(ValueError, match=r"'Swoosh'.*relu"):
        nn.mlp(1, 1, [2], activation='Swoosh')
    with pytest.raises(ValueError, match='in_spatial'):
        nn.u_net(1, 1, in_spatial=4)
    with pytest.raises(ValueError, match=r'3 entries.*4 levels'):
        nn.u_net(1, 1, filters=[4, 4, 4])
    with pytest.raises(ValueError, match="construct_net='fno'"):
        nn.invertible_net(2, 'fno', in_channels=2)
    with pytest.raises(ValueError, match=r'dampening=0.5'):
        nn.sgd(nn.mlp(1, 1, []), dampening=0.5)
    with pytest.raises(TypeError, match='Keras model or optimizer'):
        nn.save_state([1, 2], 'x')
    with pytest.raises(TypeError, match='Keras model'):
        nn.get_parameters(lambda x: x)
    with pytest.raises(TypeError, match='Keras optimizer'):
        nn.get_learning_rate('adam')
    with pytest.raises(TypeError, match='mlp layers must be a list'):
        nn.mlp(1, 1, 4)
    net = nn.mlp(1, 1, [])
    with pytest.raises(ValueError, match='does not depend on any trainable variable'):
        nn.update_weights(net, nn.adam(net), lambda x: math.sum(x, 'b'), math.ones(batch(b=2)))


def test_seeded_weights_do_not_depend_on_when_tensorflow_was_imported():
    """Keras seeds unseeded initializers from Python's `random`, which importing TensorFlow advances: a process that
    seeded before TensorFlow loaded (a cluster's worker) built other weights than one that had it loaded."""
    script = textwrap.dedent('''
        import numpy as np
        from lazyphi import math, nn
        from lazyphi.backend import backend_by_name
        math.seed(7)
        with backend_by_name('tensorflow'):
            net = nn.mlp(2, 1, [4])
            print([np.asarray(p.native()).ravel().tolist() for p in nn.get_parameters(net).values()])
    ''')
    out = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True,
                         env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}).stdout
    math.seed(7)
    net = nn.mlp(2, 1, [4])
    assert out.strip().splitlines()[-1] == str([np.asarray(p.native()).ravel().tolist()
                                                for p in nn.get_parameters(net).values()])
