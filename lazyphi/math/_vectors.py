"""Vectors and losses: dot products, norms, normalising, cross products, softmax and the l1/l2 losses."""

from __future__ import annotations

import functools
import operator
import warnings
from collections.abc import Sequence

import numpy as np

from .._errors import IncompatibleShapes
from ..backend import NUMPY, combine_types, convert
from ._creation import wrap
from ._dims import channel, dual, non_batch, spatial
from ._elementwise import FLOAT_FUNCTIONS, IS_FINITE, MAXIMUM, SIGN, where
from ._ops import abs_square
from ._reductions import REDUCTIONS
from ._shape import Shape, ShapeDtype, merge_shapes, resolve_dims
from ._structure import pack_tensor_dims, rename_tensor_dims, stack_tensors
from ._tensor import ALONG, NUMBER_TYPES, Dense, Op, Tensor, as_tensor, auto_cast, common_backend, dims_in, dispatch
from ._tree import tree_map

_LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'


def _dot_result(inputs: Sequence[Tensor], dims: tuple, y_dims: tuple) -> ShapeDtype:
    x, y = inputs
    shape = merge_shapes(x.shape.without(dims), y.shape.without(y_dims))
    return ShapeDtype(shape, _combined_dtype(x, y))


def _combined_dtype(x: Tensor, y: Tensor):
    return combine_types(x.dtype, y.dtype)


def _dense_dot(ts: Sequence[Dense], dims: tuple, result, y_dims: tuple) -> Dense:
    x, y = ts
    out = result(ts, dims, y_dims).shape
    backend = common_backend(ts)
    letters = {}

    def letter(name: str) -> str:
        return letters.setdefault(name, _LETTERS[len(letters)])
    contracted = {yd: xd for xd, yd in zip(dims, y_dims, strict=True)}
    x_subscripts = ''.join(letter(n) for n in x.shape.names)
    y_subscripts = ''.join(letter(contracted.get(n, n)) for n in y.shape.names)
    out_subscripts = ''.join(letter(n) for n in out.names)
    natives = auto_cast(backend, [backend.as_tensor(x._native) if x.backend is backend else _moved(x, backend),
                                  backend.as_tensor(y._native) if y.backend is backend else _moved(y, backend)])
    native = backend.einsum(f'{x_subscripts},{y_subscripts}->{out_subscripts}', *natives)
    return Dense(native, out, backend)


def _moved(t: Dense, backend):
    return convert(t._native, backend)


DOT = Op('dot', ALONG, _dense_dot)


def dot(x: Tensor, x_dims, y: Tensor, y_dims) -> Tensor:
    """The sum of products of `x` and `y` over `x_dims` of `x` paired with `y_dims` of `y`, in their order.

    Other dims of `x` and `y` stay; dims both have are batch dims (matched by name). Where one of them lacks
    its dim of a pair, it is constant along it: the other is summed along its dim.
    """
    x, y = as_tensor(x), as_tensor(y)
    x_names, y_names = resolve_dims(x_dims, x.shape), resolve_dims(y_dims, y.shape)
    if len(x_names) != len(y_names):
        raise IncompatibleShapes(f'dot(): {len(x_names)} dims {x_names} of x cannot pair with {len(y_names)} dims '
                                 f'{y_names} of y')
    pairs = []
    for xd, yd in zip(x_names, y_names, strict=True):
        if xd not in x.shape.names or yd not in y.shape.names:  # constant along the missing one: sum the other
            if xd in x.shape.names:
                x = REDUCTIONS['sum'](x, (xd,))
            if yd in y.shape.names:
                y = REDUCTIONS['sum'](y, (yd,))
            continue
        if x.shape.get_size(xd) != y.shape.get_size(yd):
            raise IncompatibleShapes(f'dot(): dim {xd!r} of x has size {x.shape.get_size(xd)} but dim {yd!r} of y '
                                     f'{y.shape.get_size(yd)}')
        pairs.append((xd, yd))
    x_names, y_names = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    clash = [n for n in y.shape.names if n in x_names and n not in y_names]
    if clash:
        raise IncompatibleShapes(f'dot(): y has dims {clash} that x contracts; rename them first')
    return dispatch(DOT, (x, y), (x_names, _dot_result, y_names))


def matmul(x: Tensor, y) -> Tensor:
    """`x @ y` (`Tensor.__matmul__`): the matrix product, summing each dual dim `~d` of `x` with `d` of `y`.
    Dual dims of `y` named like those (a product of square matrices, `(d, ~d) @ (d, ~d)`) are its columns
    and stay in the result.

    Where `y` has none of those dims but exactly one non-batch, non-dual dim, all dual dims of `x`
    (packed in their order) pair with that one. Without dual dims, `x` pairs the channel dims it shares with
    `y` (a dot product) where it has some, and else multiplies element-wise when it shares no dims but
    batch ones.

    Raises:
        TypeError: `y` is not a Tensor.
        IncompatibleShapes: nothing of `y` pairs with the dual dims of `x`, or paired sizes differ.
    """
    if not isinstance(y, Tensor):
        raise TypeError(f'`@` needs two tensors but got {type(y).__name__} on the right of a tensor '
                        f'{x.shape}')
    duals = x.shape.dual
    if not duals:
        shared = x.shape.channel.only(y.shape.channel.names)
        if shared:
            return dot(x, shared.names, y, shared.names)
        if x.shape.primal.only(y.shape.names):
            raise IncompatibleShapes(f'{x.shape} @ {y.shape}: the left tensor has no dual dims to pair '
                                     f'and shares dims that are not channel dims with the right one')
        return x * y
    primal = y.shape.only(duals.as_batch().names, reorder=True)
    if primal:
        # columns of y named like those x sums over (a product of square matrices): kept aside while x sums
        kept = y.shape.dual.only(primal.as_dual().names)
        aside = dual(**{f'_matmul_{name[1:]}': size for name, size in zip(kept.names, kept.sizes, strict=True)})
        product = dot(x, primal.as_dual().names, rename_tensor_dims(y, kept, aside) if kept else y, primal.names)
        return rename_tensor_dims(product, aside, kept) if kept else product
    candidates = y.shape.non_batch.non_dual
    if candidates.rank != 1 or candidates.size != duals.volume:
        raise IncompatibleShapes(f'{x.shape} @ {y.shape}: the right tensor has none of the dims '
                                 f'{duals.as_batch().names} that pair with the dual dims of the left one, nor '
                                 f'one non-batch, non-dual dim of size {duals.volume} to pair with them all')
    packed = x if duals.rank == 1 else pack_tensor_dims(x, duals.names, dual('_matmul'))
    return dot(packed, packed.shape.dual.names, y, candidates.names)


def _tree_sum(values: list) -> Tensor:
    return functools.reduce(operator.add, values)


def l1_loss(x, reduce=non_batch) -> Tensor:
    """The sum of the absolute values of `x` (a tensor or tree: summed over all its tensors) along `reduce`."""
    leaves = _loss_leaves(x)
    return _tree_sum([REDUCTIONS['sum'](abs(t), dims_in(t.shape, reduce)) for t in leaves])


def l2_loss(x, reduce=non_batch) -> Tensor:
    """Half the sum of the squared magnitudes of `x` (a tensor or tree) along `reduce`: sum(|x|**2) / 2."""
    leaves = _loss_leaves(x)
    return _tree_sum([REDUCTIONS['sum'](abs_square(t), dims_in(t.shape, reduce)) for t in leaves]) / 2


def _loss_leaves(x) -> list:
    if isinstance(x, (Tensor, *NUMBER_TYPES)):
        return [as_tensor(x)]
    leaves = []
    tree_map(lambda t: leaves.append(t) or t, x)
    if not leaves:
        raise ValueError(f'The loss of {x!r} needs at least one tensor')
    return leaves


def squared_norm(vec: Tensor, vec_dim=channel) -> Tensor:
    """The squared length of the vectors along `vec_dim` (by default the channel dims): sum(|v|**2)."""
    vec = as_tensor(vec)
    return REDUCTIONS['sum'](abs_square(vec), dims_in(vec.shape, vec_dim))


def norm(vec: Tensor, vec_dim=channel, eps=None) -> Tensor:
    """The length (L2 norm) of the vectors along `vec_dim`.

    With `eps`, the squared length is raised to at least `eps` before the root, as phiml does: a zero vector has
    length sqrt(eps) and a finite gradient (infinite at 0 otherwise). Where that raised square is still below
    `eps ** 2` (only possible for `eps` > 1), the length is 0.
    """
    squared = squared_norm(vec, vec_dim)
    if eps is None:
        return dispatch(FLOAT_FUNCTIONS['sqrt'], (squared,))
    squared = dispatch(MAXIMUM, (squared, as_tensor(eps)))
    return where(squared < eps ** 2, 0, dispatch(FLOAT_FUNCTIONS['sqrt'], (squared,)))


def vec_length(vec: Tensor, vec_dim=channel, eps=None) -> Tensor:
    """The length of the vectors along `vec_dim`: the same as `norm` (phiml's older name)."""
    return norm(vec, vec_dim, eps)


def vec_squared(vec: Tensor, vec_dim=channel) -> Tensor:
    """The squared length of the vectors along `vec_dim`: the same as `squared_norm` (phiml's older name)."""
    return squared_norm(vec, vec_dim)


def normalize(vec: Tensor, vec_dim=channel, epsilon=None, allow_infinite: bool = False, allow_zero: bool = False):
    """The vectors along `vec_dim` scaled to length 1.

    Args:
        vec: the vectors.
        vec_dim: the dims holding the components (by default the channel dims).
        epsilon: vectors shorter than this give the unit vector (1, 0, ...), or zero with `allow_zero`;
            without it a zero vector gives NaN.
        allow_infinite: a vector with infinite components points along those components (each +-1 before
            normalising) instead of giving NaN.
        allow_zero: with `epsilon`, short vectors give zero vectors.
    """
    vec = as_tensor(vec)
    dims = dims_in(vec.shape, vec_dim)
    if allow_infinite:
        infinite = ~dispatch(IS_FINITE, (vec,))
        any_infinite = REDUCTIONS['any'](infinite, dims)
        vec = where(any_infinite, where(infinite, dispatch(SIGN, (vec,)), 0), vec)
    length = norm(vec, dims)
    if epsilon is None:
        return vec / length
    short = length < epsilon
    unit = 0 if allow_zero else _unit_vector(vec, dims)
    return where(short, unit, vec / where(short, 1, length))


def _unit_vector(vec: Tensor, dims: tuple) -> Tensor:
    """(1, 0, 0, ...) along the flattened `dims` of `vec`."""
    components = vec.shape.only(dims, reorder=True)
    one_hot = np.zeros(components.sizes, np.int32)
    one_hot.reshape(-1)[0] = 1
    return Dense(one_hot, components, NUMPY)


def vec_normalize(vec: Tensor, vec_dim=channel, epsilon=None, allow_infinite: bool = False, allow_zero: bool = False):
    """The same as `normalize` (phiml's older name)."""
    return normalize(vec, vec_dim, epsilon, allow_infinite, allow_zero)


def clip_length(vec: Tensor, min_len=0, max_len=1, vec_dim=channel, eps=None) -> Tensor:
    """The vectors along `vec_dim` with their lengths limited to [min_len, max_len], directions kept;
    zero vectors stay zero."""
    vec = as_tensor(vec)
    length = norm(vec, vec_dim, eps)
    clipped = dispatch(MAXIMUM, (as_tensor(min_len), length))
    clipped = where(clipped > max_len, max_len, clipped)
    return where(length == 0, vec, vec * (clipped / where(length == 0, 1, length)))


def softmax(x, reduce) -> Tensor:
    """exp(x) / sum(exp(x)) along `reduce`, computed without overflow."""
    x = as_tensor(x)
    dims = dims_in(x.shape, reduce)
    exponentials = dispatch(FLOAT_FUNCTIONS['exp'], (x - REDUCTIONS['max'](x, dims),))
    return exponentials / REDUCTIONS['sum'](exponentials, dims)


def cross_product(vec1: Tensor, vec2: Tensor) -> Tensor:
    """The cross product of vectors along their channel dim 'vector': a scalar for 2 components, a vector
    for 3."""
    vec1, vec2 = as_tensor(vec1), as_tensor(vec2)
    size = merge_shapes(vec1.shape.only('vector'), vec2.shape.only('vector')).get_size('vector')
    a = [vec1[{'vector': i}] for i in range(size)]
    b = [vec2[{'vector': i}] for i in range(size)]
    if size == 2:
        return a[0] * b[1] - a[1] * b[0]
    if size == 3:
        components = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
        return stack_tensors(components, merge_shapes(vec1.shape.only('vector'), vec2.shape.only('vector')))
    raise ValueError(f'cross_product() needs vectors of 2 or 3 components along "vector", got {size}')


cross = cross_product


_ROWS = channel('vector')  # the default dim of a rotation matrix's rows


def rotation_matrix(x, matrix_dim=_ROWS) -> Tensor | None:
    """The 2D or 3D rotation matrix of `x` (deprecated in phiml, which leaves geometry to PhiFlow; warns so).

    Args:
        x: a rotation: in 2D an angle (a number or a tensor of angles); in 3D either a vector along `vector`
            (3 components) pointing along the rotation axis, its length the angle, or Euler angles along a
            channel dim `angle` labelled by the axes (rotating about the first axis, then the second, then the
            third); a matrix (dims `vector` and `~vector` of one size) is returned as it is; None gives None.
        matrix_dim: the dim of the rows of a 2D matrix, whose dual form holds its columns; in 3D the rows are
            labelled like the components of `x`.

    Returns:
        The matrix: rows along `matrix_dim`, columns along its dual, and the other dims of `x`.
    """
    warnings.warn('rotation_matrix() is deprecated in phiml (geometry belongs to PhiFlow); lazyphi offers it for '
                  'code written against phiml', DeprecationWarning, stacklevel=2)
    return _rotation(x, matrix_dim)


def _rotation(x, matrix_dim: Shape) -> Tensor | None:
    if x is None:
        return None
    x = as_tensor(x)
    shape = x.shape
    if '~vector' in shape and 'vector' in shape.channel and shape.get_size('~vector') == shape.get_size('vector'):
        return x
    sin, cos = FLOAT_FUNCTIONS['sin'], FLOAT_FUNCTIONS['cos']
    if 'angle' in shape.names and shape.get_size('angle') == 3:  # Euler angles: Rz @ Ry @ Rx
        if shape.channel.rank != 1:
            raise ValueError(f'rotation_matrix(): Euler angles take one channel dim, "angle"; got {shape}')
        s1, s2, s3 = (dispatch(sin, (x[{'angle': i}],)) for i in range(3))
        c1, c2, c3 = (dispatch(cos, (x[{'angle': i}],)) for i in range(3))
        rows = [[c3 * c2, c3 * s2 * s1 - s3 * c1, c3 * s2 * c1 + s3 * s1],
                [s3 * c2, s3 * s2 * s1 + c3 * c1, s3 * s2 * c1 - c3 * s1],
                [-s2, c2 * s1, c2 * c1]]
        return _matrix(rows, matrix_dim.with_size(shape.get_labels('angle') or 3))
    if 'vector' in shape.names and shape.get_size('vector') == 3:  # axis and angle (Rodrigues' formula)
        angle = norm(x, 'vector')
        s, c = dispatch(sin, (angle,)), dispatch(cos, (angle,))
        t = 1 - c
        k1, k2, k3 = (x[{'vector': i}] / where(angle == 0, 1, angle) for i in range(3))
        rows = [[c + k1 ** 2 * t, k1 * k2 * t - k3 * s, k1 * k3 * t + k2 * s],
                [k2 * k1 * t + k3 * s, c + k2 ** 2 * t, k2 * k3 * t - k1 * s],
                [k3 * k1 * t - k2 * s, k3 * k2 * t + k1 * s, c + k3 ** 2 * t]]
        return _matrix(rows, matrix_dim.with_size(shape.get_labels('vector') or 3))
    s, c = dispatch(sin, (x,)), dispatch(cos, (x,))
    return _matrix([[c, -s], [s, c]], matrix_dim if matrix_dim.get_size(matrix_dim.name) is not None
                   else matrix_dim.with_size(2))


def _matrix(rows: list, dim: Shape) -> Tensor:
    """The matrix of `rows` (lists of tensors): rows along `dim`, columns along its dual."""
    return stack_tensors([stack_tensors(row, dim.as_dual()) for row in rows], dim)


def rotate_vector(vector: Tensor, angle, invert: bool = False, dim='vector') -> Tensor:
    """`vector` rotated about the origin by `angle` (see `rotation_matrix`; None: not rotated); `invert` rotates
    back. Deprecated in phiml, which leaves geometry to PhiFlow; warns so.

    Raises:
        ValueError: `vector` has no channel dim `vector`, or the rotation is of another dimensionality.
    """
    warnings.warn('rotate_vector() is deprecated in phiml (geometry belongs to PhiFlow); lazyphi offers it for '
                  'code written against phiml', DeprecationWarning, stacklevel=2)
    vector = as_tensor(vector)
    if 'vector' not in vector.shape.channel:
        raise ValueError(f'rotate_vector() needs a channel dim "vector", got {vector.shape}')
    if angle is None:
        return vector
    matrix = _rotation(angle, vector.shape.channel.only('vector'))
    if invert:
        swapped = matrix.shape.only(('vector', '~vector'), reorder=True)
        matrix = rename_tensor_dims(matrix, ('~vector', 'vector'), swapped)
    dims = vector.shape.only(dim)
    if matrix.shape.get_size('~vector') != dims.size:
        raise ValueError(f'rotate_vector(): the rotation of {as_tensor(angle).shape} is '
                         f'{matrix.shape.get_size("~vector")}D but the vector {vector.shape} is {dims.size}D')
    return dot(matrix, dims.as_dual(), vector, dims)


MASK_DIM = channel('vector')  # the default dim of `dim_mask`'s vector


def dim_mask(all_dims, dims, mask_dim=MASK_DIM) -> Tensor:
    """A vector along `mask_dim` with an entry per dim of `all_dims` (labelled by their names): True for those `dims`
    selects, False for the others.

    Args:
        all_dims: a Shape, or a tuple or list of names (spatial dims).
        dims: a dim filter selecting among `all_dims`.
        mask_dim: a single-dim Shape naming the vector's dim.
    """
    if not isinstance(all_dims, (Shape, tuple, list)):
        raise TypeError(f'dim_mask(): all_dims must be a Shape, tuple or list of names, got {all_dims!r}')
    if not isinstance(mask_dim, Shape) or mask_dim.rank != 1:
        raise TypeError(f'dim_mask(): mask_dim must be a Shape of one dim, got {mask_dim!r}')
    if not isinstance(all_dims, Shape):
        all_dims = spatial(*all_dims)
    selected = set(dims_in(all_dims, dims))
    return wrap([name in selected for name in all_dims.names], mask_dim.with_size(all_dims.names))


def normalize_to(target: Tensor, source, epsilon=1e-5) -> Tensor:
    """`target` scaled so that its sum over its non-batch dims equals that of `source` (a tensor or a number);
    `epsilon` bounds the divisor from below (None: no bound)."""
    target_total = REDUCTIONS['sum'](as_tensor(target), as_tensor(target).shape.non_batch.names)
    source = as_tensor(source)
    source_total = REDUCTIONS['sum'](source, source.shape.non_batch.names)
    divisor = target_total if epsilon is None else where(target_total > epsilon, target_total, epsilon)
    return target * (source_total / divisor)
