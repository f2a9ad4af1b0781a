"""Matrix decompositions and fits over named dims: `svd` and `fit_hyperplane`.

Both lay their tensors out as a batch of matrices, one axis each for the batch, the rows and the columns
(`reshaped_native`, each axis packing the dims of one group), hand them to the backend (`svd`,
`matrix_solve_least_squares`), and name the axes of the results again (`reshaped_tensor`). `svd` takes rows
of non-uniform length too: the rows of all slices form one matrix, whose latent vectors are split again.
"""

from __future__ import annotations

import itertools
import warnings

from ..backend import convert
from ._conversion import reshaped_native
from ._creation import reshaped_tensor
from ._dims import channel, instance, merge_shapes, non_batch, parse_dim_spec
from ._magic_ops import expand, stack
from ._ops import sqrt
from ._shape import Shape
from ._tensor import Tensor, as_tensor, dims_in

SINGULAR = channel('singular')  # the latent dim of `svd` by default


def svd(x, feature_dim=channel, list_dim=None, latent_dim=SINGULAR, full_matrices: bool = False):
    """Singular value decomposition of `x`, read as a list of feature vectors.

    `features @ (latents * singular)` gives `x` back (up to rounding; truncated, its best approximation of that
    rank): `@` sums the dual latent dim of `features` with the latent dim of the others.

    Args:
        x: tensor holding `feature_dim` and `list_dim`; its other dims list independent matrices.
        feature_dim: the dims listing the features (the matrix columns).
        list_dim: the dims listing the items (the rows). Default: the non-batch dims that are not features, or
            else all dims that are not features. Rows of non-uniform length are concatenated into one matrix.
        latent_dim: the dim of the latent vectors (a Shape, or a spec such as `'singular'`, channel by default).
            With a size, only that many leading singular values are kept.
        full_matrices: whether the backend computes full square factors (only `min(rows, columns)` of their
            vectors pair with singular values).

    Returns:
        latents: the latent vector of each item: `list_dim` and `latent_dim` (plus the matrices' dims).
        singular: the singular values in descending order: `latent_dim`.
        features: the feature vector of each latent dim: the dual of `latent_dim` and `feature_dim`.

    Raises:
        ValueError: `feature_dim` or `list_dim` selects no dim of `x`, or sizes vary along dims other than rows.
    """
    x = as_tensor(x)
    features = x.shape.only(dims_in(x.shape, feature_dim), reorder=True)
    if not features:
        raise ValueError(f'svd(): feature_dim={feature_dim!r} selects none of the dims of {x.shape}; pass the dims '
                         f'listing the features (the matrix columns)')
    if list_dim is None:
        listed = non_batch(x).without(features.names) or x.shape.without(features.names)
    else:
        listed = x.shape.only(dims_in(x.shape, list_dim), reorder=True)
    if not listed:
        raise ValueError(f'svd(): list_dim={list_dim!r} selects none of the dims of {x.shape} but {features}; pass '
                         f'the dims listing the items (the matrix rows)')
    matrices = x.shape.without(features.names).without(listed.names)
    latent = parse_dim_spec(latent_dim, 'channel') if isinstance(latent_dim, str) else latent_dim
    backend = x.backend
    along = x.shape.non_uniform_shape
    if not set(along.names) <= set(listed.names) or not set(x.shape.non_uniform.names) <= set(listed.names):
        raise ValueError(f'svd(): the sizes of {x.shape.non_uniform} vary along {along}; only the rows '
                         f'(list_dim={listed}) may have non-uniform length')
    parts = [x[dict(zip(along.names, index, strict=True))] for index in itertools.product(*map(range, along.sizes))]
    rows = [part.shape.only(listed.names) for part in parts]
    natives = [reshaped_native(part, [matrices, row, features]) for part, row in zip(parts, rows, strict=True)]
    u, s, vh = backend.svd(backend.concat(natives, 1) if len(natives) > 1 else natives[0], full_matrices=full_matrices)
    if latent.size is not None:
        available = backend.staticshape(s)[-1]
        if available < latent.size:
            warnings.warn(f'svd(): {latent} asks for {latent.size} singular values but there are {available}',
                          stacklevel=2)
        u, s, vh = u[..., :latent.size], s[..., :latent.size], vh[..., :latent.size, :]
    latents, start = [], 0
    for row in rows:
        latents.append(reshaped_tensor(u[:, start:start + row.volume], [matrices, row, latent], convert=False))
        start += row.volume
    return (_stacked(latents, along), reshaped_tensor(s, [matrices, latent], convert=False),
            reshaped_tensor(vh, [matrices, latent.as_dual(), features], convert=False))


def _stacked(parts: list, along: Shape) -> Tensor:
    """The tensors `parts`, listed row-major over the dims `along`, stacked along them."""
    for dim in reversed(along.names):
        size = along.get_size(dim)
        parts = [stack(parts[i:i + size], along[dim]) for i in range(0, len(parts), size)]
    return parts[0]


def fit_hyperplane(x, y, point_dim=instance, weights=1.):
    """The plane `y = slope · x + offset` that fits the points `(x, y)` best (least squares).

    Args:
        x: the points' coordinates: `point_dim` and one channel dim listing the components.
        y: the value at each point: `point_dim`, without the components' dim. Its other dims, and those of
            `x`, list independent fits.
        point_dim: the dim listing the points (one dim; default: the instance dim).
        weights: each point's weight: the fit minimises the weighted sum of squared errors. A single weight
            changes nothing.

    Returns:
        slope: the plane's slope along each component of `x`: the components' dim and the fits' dims.
        offset: its value at `x = 0`, per fit.

    Raises:
        ValueError: `point_dim` is not one dim of `x`, `x` has not exactly one channel dim besides it, or `y`
            has that dim too.
    """
    x, y, weights = as_tensor(x), as_tensor(y), as_tensor(weights)
    point = x.shape.only(dims_in(x.shape, point_dim))
    if point.rank != 1:
        raise ValueError(f'fit_hyperplane(): point_dim={point_dim!r} selects {point} of {x.shape}; it must select '
                         f'the one dim listing the points')
    components = channel(x).without(point.names)
    if components.rank != 1:
        raise ValueError(f'fit_hyperplane(): x must have one channel dim listing the components of each point, '
                         f'besides {point}, but has {components or "none"} ({x.shape})')
    if components.name in y.shape:
        raise ValueError(f'fit_hyperplane(): y must hold one value per point but has the components\' dim '
                         f'{components} of x ({y.shape})')
    fits = merge_shapes(x.shape.without(components.name), y.shape, weights.shape).without(point.name)
    root = sqrt(weights * 1.)  # minimising the sum of w * error² scales each row by √w
    rows = expand(root, x.shape.without(components.name))
    backend = (x * root).backend
    columns = [reshaped_native(x * root, [fits, point, components]),
               convert(reshaped_native(rows, [fits, point, ()]), backend)]
    matrix = backend.concat(columns, -1)
    rhs = convert(reshaped_native(y * root, [fits, point, ()]), backend)
    solution = backend.matrix_solve_least_squares(matrix, rhs)[0]
    return (reshaped_tensor(solution[:, :-1, 0], [fits, components], convert=False),
            reshaped_tensor(solution[:, -1, 0], [fits], convert=False))
