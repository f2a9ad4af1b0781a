"""Random test inputs for the backend tests: float32, positive, in (-1, 1), integers and booleans."""

import numpy as np

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def pos(*shape):
    return RNG.uniform(0.1, 2.0, shape).astype(np.float32)


def unit(*shape):
    return RNG.uniform(-0.9, 0.9, shape).astype(np.float32)


def ints(*shape, high=10):
    return RNG.integers(0, high, shape)


def bools(*shape):
    return RNG.random(shape) > 0.5
