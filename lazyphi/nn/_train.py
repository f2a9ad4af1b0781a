"""A training loop over mini-batches, written on the public functions of `lazyphi.nn`, so it runs on every library."""

import math as pymath
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count
from typing import Any

from ..backend import ComputeDevice
from ..math import Shape, Tensor, batch, channel, convert, expand, load, non_channel, pack_dims, to_device
from ..math import map as map_
from ..math import mean as mean_
from ..math import shape as shape_
from ..math import slice as slice_
from ..math import sum as sum_
from ..math.perm import random_permutation
from ._api import Network, Optimizer, get_learning_rate, save_state, set_learning_rate, update_weights

__all__ = ['StopTraining', 'TrainingState', 'train']

_EXAMPLES = 'dset_linear'
"""The batch dim of a mini-batch: the examples drawn, whatever dims listed them in the data."""


class StopTraining(Exception):
    """Raised by an `on_iter_end` or `on_epoch_end` callback of `train()` to end the training there."""

    def __init__(self, reason: str = 'stop'):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class TrainingState:
    """Where `train()` stands: handed to its callbacks after each iteration or epoch, and returned at the end.

    Attributes:
        name: the name given to `train()`.
        model: the network being trained.
        optimizer: its optimizer.
        learning_rate: the optimizer's learning rate when the state was made.
        epoch: the epoch, counted from 0.
        max_epochs: the epoch limit, None without one.
        iter: iterations done before this one (at an epoch's end: all iterations done).
        max_iter: the iteration limit, None without one.
        is_epoch_end: whether the state is that of an epoch's end rather than of an iteration.
        epoch_loss: the mean loss per example over the epoch so far (None in the returned state).
        batch_loss: the loss of the mini-batch, along the batch dim 'dset_linear' (iterations only).
        additional_batch_output: further outputs of the loss function (iterations only).
        indices: the examples of the mini-batch (iterations) or the epoch's order of all examples (epoch ends),
            along 'dset_linear', the positions along the dataset dims in the channel dim 'index'.
        termination_reason: why training ended: 'max_iter' (also when the epochs ran out, as in phiml),
            'max_hours', 'stop_on_loss' or the reason of a `StopTraining`; None while training runs.
    """

    name: str | None
    model: Network
    optimizer: Optimizer
    learning_rate: float
    epoch: int
    max_epochs: int | None
    iter: int
    max_iter: int | None
    is_epoch_end: bool
    epoch_loss: Tensor | None
    batch_loss: Tensor | None
    additional_batch_output: tuple | None
    indices: Tensor | None
    termination_reason: str | None

    @property
    def current(self) -> int:
        """The epoch at an epoch's end, else the iteration."""
        return self.epoch if self.is_epoch_end else self.iter

    @property
    def max(self) -> int | None:
        """The epoch limit at an epoch's end, else the iteration limit."""
        return self.max_epochs if self.is_epoch_end else self.max_iter

    @property
    def mean_loss(self) -> float:
        """The mean loss per example: of the epoch at its end, else of the mini-batch."""
        loss = self.epoch_loss if self.is_epoch_end else self.batch_loss
        return float(mean_(loss, shape_(loss)))


def _loaded(files_or_data: Any, loader: Callable) -> Tensor:
    """Data given as a file name or a tensor of file names, read with `loader` (stacked along the names' dims)."""
    if isinstance(files_or_data, str):
        return convert(loader(files_or_data))
    if isinstance(files_or_data, Tensor) and files_or_data.dtype.kind in (str, object):
        return convert(map_(loader, files_or_data))
    return files_or_data


def _epoch_order(dataset_dims: Shape) -> Tensor:
    """All examples in a random order along 'dset_linear', as positions along `dataset_dims` in channel 'index'."""
    order = random_permutation(dataset_dims, dims=dataset_dims)
    if dataset_dims.rank == 1:  # one dim gives plain positions; slicing takes them labelled by the dim
        order = expand(order, channel(index=dataset_dims.names))
    return pack_dims(order, non_channel, batch(_EXAMPLES))


def train(name: str | None, model: Network, optimizer: Optimizer, loss_fn: Callable, *files_or_data: str | Tensor,
          max_epochs: int | None = None, max_iter: int | None = None, max_hours: float | None = None,
          stop_on_loss: float | None = None, batch_size: int = 1, dataset_dims: Any = batch,
          device: ComputeDevice | None = None, drop_last: bool = False, loss_kwargs: dict | None = None,
          lr_schedule_iter: Callable[[int], float] | None = None, checkpoint_frequency: int | None = None,
          loader: Callable[[str], Tensor] = load, on_iter_end: Callable[[TrainingState], None] | None = None,
          on_epoch_end: Callable[[TrainingState], None] | None = None) -> TrainingState:
    """Trains `model` with `update_weights()` on mini-batches of the data, epoch after epoch, in a random order.

    Each epoch draws a new random order of the examples (`math.seed` repeats it) and cuts it into mini-batches
    of `batch_size` examples; `loss_fn` gets each mini-batch's slices of `files_or_data`, in that order, their
    dataset dims replaced by the batch dim 'dset_linear'.

    Unlike phiml's, `train` takes no `file_shape` (phiml does not use it) and measures no peak memory (the
    backends of lazyphi do not track it), so `TrainingState` has no `peak_memory`.

    Args:
        name: directory for the checkpoints (made if missing); None saves none.
        model: the network to train.
        optimizer: its optimizer, from `adam()`, `sgd()`, `adagrad()` or `rmsprop()`.
        loss_fn: called as `loss_fn(*data_batch, **loss_kwargs)`; returns the loss per example (along
            'dset_linear') or a tuple starting with it, whose other items reach `on_iter_end`.
        *files_or_data: the training data: tensors, file names, or tensors of file names (read with `loader`
            and stacked along their dims).
        max_epochs: epoch limit.
        max_iter: iteration limit (the epochs needed for it when `max_epochs` is not given).
        max_hours: time limit in hours.
        stop_on_loss: stop after an epoch whose mean loss per example lies below this value.
        batch_size: examples per mini-batch (at most all of them).
        dataset_dims: the dims of the data that list examples (a dim filter; all batch dims by default).
        device: where the mini-batches go before `loss_fn` sees them; None leaves them where they are.
        drop_last: leave out the last mini-batch of an epoch when it is smaller than `batch_size`.
        loss_kwargs: keyword arguments of `loss_fn`.
        lr_schedule_iter: `(iteration) -> learning rate`, set before each iteration; None keeps the optimizer's.
        checkpoint_frequency: save network and optimizer (`save_state`) under `name` every this many epochs.
        loader: reads one file into a tensor.
        on_iter_end: called with the `TrainingState` after each iteration; may raise `StopTraining`.
        on_epoch_end: called with the `TrainingState` after each epoch; may raise `StopTraining`.

    Returns:
        The `TrainingState` at the end, with `termination_reason`.

    Raises:
        ValueError: no limit is given (training would never end), `batch_size` is below 1, or the data has no
            dataset dims.
    """
    if all(v is None for v in (max_epochs, max_iter, max_hours, stop_on_loss, on_iter_end, on_epoch_end)):
        raise ValueError('train() needs a limit: max_epochs, max_iter, max_hours, stop_on_loss, or a callback '
                         'raising StopTraining')
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f'train(): batch_size must be an int of at least 1, got {batch_size!r}')
    data = [_loaded(d, loader) for d in files_or_data]
    examples = shape_(data).only(dataset_dims)
    if not examples:
        raise ValueError(f'train(): the data of shape {shape_(data)} has no dims among dataset_dims={dataset_dims!r}')
    loss_kwargs = loss_kwargs or {}
    batch_size = min(batch_size, examples.volume)
    batch_count = examples.volume // batch_size if drop_last else pymath.ceil(examples.volume / batch_size)
    if max_epochs is None and max_iter is not None:
        max_epochs = pymath.ceil(max_iter / batch_count)
    elif max_iter is None and max_epochs is not None:
        max_iter = max_epochs * batch_count
    if name is not None:
        os.makedirs(name, exist_ok=True)

    def state(epoch_end: bool, epoch_loss=None, batch_loss=None, extra=None, indices=None, reason=None):
        return TrainingState(name, model, optimizer, get_learning_rate(optimizer), epoch, max_epochs, iteration,
                             max_iter, epoch_end, epoch_loss, batch_loss, extra, indices, reason)
    reason, iteration, epoch, started = None, 0, 0, time.perf_counter()
    for epoch in range(max_epochs) if max_epochs is not None else count():
        order = _epoch_order(examples)
        epoch_loss, seen = 0, 0
        for i in range(batch_count):
            if lr_schedule_iter is not None:
                set_learning_rate(optimizer, lr_schedule_iter(iteration))
            indices = order[{_EXAMPLES: slice(i * batch_size, (i + 1) * batch_size)}]
            data_batch = slice_(data, indices)
            if device is not None:
                data_batch = to_device(data_batch, device)
            output = update_weights(model, optimizer, loss_fn, *data_batch, **loss_kwargs)
            loss, *extra = output if isinstance(output, (tuple, list)) else (output,)
            epoch_loss += sum_(loss, _EXAMPLES)
            seen += indices.shape.get_size(_EXAMPLES)
            if on_iter_end is not None:
                try:
                    on_iter_end(state(False, epoch_loss / seen, loss, tuple(extra), indices))
                except StopTraining as stop:
                    reason = stop.reason
            iteration += 1
            if reason is None and max_iter is not None and iteration >= max_iter:
                reason = 'max_iter'
            if reason is None and max_hours is not None and time.perf_counter() - started > max_hours * 3600:
                reason = 'max_hours'
            if reason is not None:
                break
        if reason is not None and i < batch_count - 1:
            break  # stopped within the epoch; one whose batches all ran still ends (phiml skips the last's end)
        if name is not None and checkpoint_frequency is not None and (epoch + 1) % checkpoint_frequency == 0:
            save_state(model, os.path.join(name, f'model_{epoch + 1}'))
            save_state(optimizer, os.path.join(name, f'optimizer_{epoch + 1}'))
        epoch_loss = epoch_loss / seen
        if on_epoch_end is not None:
            try:
                on_epoch_end(state(True, epoch_loss, indices=order))
            except StopTraining as stop:
                reason = stop.reason
        if reason is not None:
            break
        if stop_on_loss is not None and float(mean_(epoch_loss, shape_(epoch_loss))) < stop_on_loss:
            reason = 'stop_on_loss'
            break
    return state(True, reason=reason)
