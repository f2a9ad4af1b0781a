"""`nn.train`: mini-batches in a random order, limits, callbacks, learning-rate schedules, checkpoints, files."""

import os

import numpy as np
import pytest

from lazyphi import math, nn
from lazyphi.math import Tensor, batch, channel


def _problem(examples: int = 40):
    """A network, its optimizer, data x and targets y = x_a - 2 x_b along batch 'examples', and a loss."""
    math.seed(0)
    net = nn.mlp(2, 1, [16], activation='tanh')
    x = math.random_normal(batch(examples=examples), channel(vector='a,b'))
    y = x.vector['a'] - 2 * x.vector['b']

    def loss_fn(x_batch: Tensor, y_batch: Tensor):
        prediction = math.native_call(net, x_batch)
        return math.l2_loss(prediction - y_batch), prediction
    return net, nn.adam(net, 1e-2), x, y, loss_fn


def test_training_visits_every_example_once_per_epoch(nn_backend):
    net, optimizer, x, y, loss_fn = _problem(examples=10)
    states = []
    result = nn.train(None, net, optimizer, loss_fn, x, y, max_epochs=2, batch_size=4, on_iter_end=states.append)
    assert len(states) == 2 * 3  # 4 + 4 + 2 examples per epoch
    assert [s.indices.shape.get_size('dset_linear') for s in states[:3]] == [4, 4, 2]
    for epoch in range(2):
        seen = np.concatenate([s.indices.numpy('dset_linear,index')[:, 0] for s in states[3 * epoch:3 * epoch + 3]])
        assert sorted(seen) == list(range(10))
    first, last = states[0], states[-1]
    assert first.batch_loss.shape == batch(dset_linear=4) and len(first.additional_batch_output) == 1
    assert (first.iter, first.epoch, last.iter, last.epoch, first.max_iter) == (0, 0, 5, 1, 6)
    assert result.termination_reason == 'max_iter' and result.iter == 6 and result.is_epoch_end


def test_training_lowers_the_loss_and_reports_epochs(nn_backend):
    net, optimizer, x, y, loss_fn = _problem()
    epochs = []
    nn.train(None, net, optimizer, loss_fn, x, y, max_epochs=15, batch_size=8, on_epoch_end=epochs.append)
    assert [e.epoch for e in epochs] == list(range(15)) and all(e.is_epoch_end for e in epochs)
    assert epochs[-1].mean_loss < 0.5 * epochs[0].mean_loss
    assert epochs[0].current == 0 and epochs[0].max == 15


def test_drop_last_leaves_out_the_short_batch(nn_backend):
    net, optimizer, x, y, loss_fn = _problem(examples=10)
    states = []
    nn.train(None, net, optimizer, loss_fn, x, y, max_epochs=1, batch_size=4, drop_last=True,
             on_iter_end=states.append)
    assert [s.indices.shape.get_size('dset_linear') for s in states] == [4, 4]


def test_max_iter_alone_runs_as_many_epochs_as_needed(nn_backend):
    net, optimizer, x, y, loss_fn = _problem(examples=10)
    result = nn.train(None, net, optimizer, loss_fn, x, y, max_iter=7, batch_size=5)
    assert (result.iter, result.epoch, result.max_epochs, result.termination_reason) == (7, 3, 4, 'max_iter')


def test_stop_training_from_a_callback_and_stop_on_loss(nn_backend):
    net, optimizer, x, y, loss_fn = _problem()

    def stop_at_third(state):
        if state.iter == 2:
            raise nn.StopTraining('enough')
    result = nn.train(None, net, optimizer, loss_fn, x, y, max_epochs=5, batch_size=8, on_iter_end=stop_at_third)
    assert result.termination_reason == 'enough' and result.iter == 3
    ends = []

    def stop_after_second_epoch(state):
        ends.append(state.epoch)
        if state.epoch == 1:
            raise nn.StopTraining()
    result = nn.train(None, net, optimizer, loss_fn, x, y, max_epochs=5, batch_size=8,
                      on_epoch_end=stop_after_second_epoch)
    assert result.termination_reason == 'stop' and ends == [0, 1] and result.iter == 10
    result = nn.train(None, net, optimizer, loss_fn, x, y, stop_on_loss=1e9, batch_size=8)
    assert result.termination_reason == 'stop_on_loss' and result.epoch == 0


def test_learning_rate_schedule(nn_backend):
    net, optimizer, x, y, loss_fn = _problem(examples=8)
    rates = []
    nn.train(None, net, optimizer, loss_fn, x, y, max_iter=4, batch_size=2, lr_schedule_iter=lambda i: 0.1 / (i + 1),
             on_iter_end=lambda s: rates.append(s.learning_rate))
    np.testing.assert_allclose(rates, [0.1, 0.05, 0.1 / 3, 0.025])
    assert nn.get_learning_rate(optimizer) == pytest.approx(0.025)


def test_checkpoints_are_saved_and_load_back(nn_backend, tmp_path):
    net, optimizer, x, y, loss_fn = _problem(examples=8)
    name = str(tmp_path / 'run')
    nn.train(name, net, optimizer, loss_fn, x, y, max_epochs=4, batch_size=4, checkpoint_frequency=2)
    written = sorted(os.listdir(name))
    assert [f.split('.')[0] for f in written] == ['model_2', 'model_4', 'optimizer_2', 'optimizer_4']
    copy = nn.mlp(2, 1, [16], activation='tanh')
    nn.load_state(copy, os.path.join(name, 'model_4'))
    for (k, a), (_, b) in zip(nn.get_parameters(net).items(), nn.get_parameters(copy).items(), strict=True):
        math.assert_close(a, b, rel_tolerance=0, abs_tolerance=0, msg=k)


def test_data_from_files(nn_backend, tmp_path):
    net, optimizer, x, _, loss_fn = _problem(examples=12)
    files = math.layout([str(tmp_path / f'part{i}.npz') for i in range(3)], batch('file'))
    for i in range(3):
        math.save(files.file[i].native(), x.examples[4 * i:4 * i + 4])
    states = []

    def loss_of_inputs(x_batch: Tensor):
        return loss_fn(x_batch, x_batch.vector['a'] - 2 * x_batch.vector['b'])
    nn.train(None, net, optimizer, loss_of_inputs, files, max_epochs=1, batch_size=5, on_iter_end=states.append)
    assert states[0].indices.shape.get_item_names('index') == ('file', 'examples')
    seen = np.concatenate([s.indices.numpy('dset_linear,index') for s in states])
    assert sorted(map(tuple, seen)) == [(f, e) for f in range(3) for e in range(4)]


@pytest.mark.parametrize('kwargs, words', [
    (dict(), ['limit']),
    (dict(max_epochs=1, batch_size=0), ['batch_size', '0']),
    (dict(max_epochs=1, dataset_dims='samples'), ['samples', 'examples']),
])
def test_bad_arguments(nn_backend, kwargs, words):
    net, optimizer, x, y, loss_fn = _problem(examples=4)
    with pytest.raises(ValueError) as info:
        nn.train(None, net, optimizer, loss_fn, x, y, **kwargs)
    for word in words:
        assert word in str(info.value)
