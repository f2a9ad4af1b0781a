"""`tensor(xarray.DataArray)`: the DataArray's dims by name, typed by the caller or by a default rule.

Imported the first time a DataArray reaches `tensor()` (see `_foreign.py`); it never imports xarray
itself, it reads the DataArray's `dims`, `shape`, `coords` and `data`. The values are `data`
converted as `tensor()` converts it: a NumPy array is wrapped without a copy, a dask array stays lazy.
"""

from __future__ import annotations

from .._errors import DimNotFound, IncompatibleShapes
from ._creation import tensor
from ._shape import BATCH, CHANNEL, SPATIAL, Shape, concat_shapes
from ._tensor import Tensor

DEFAULT_TYPES = {'x': SPATIAL, 'y': SPATIAL, 'z': SPATIAL, 'vector': CHANNEL}
"""Types of DataArray dims the caller does not type: these names; every other dim is a batch dim."""


def from_xarray(data, dims: Shape) -> Tensor:
    """A Tensor of the DataArray `data` with its dims, in its axis order.

    Args:
        data: an `xarray.DataArray`.
        dims: types (and optionally sizes and labels) of some or all of its dims, matched by name, e.g.
            `batch('run') & spatial('x,y')`. Dims not named here follow `DEFAULT_TYPES`: x, y, z are
            spatial, vector is channel, any other dim is batch.

    Labels: a dim's index coordinate of strings becomes its labels (unless `dims` gives labels); numeric
    coordinates are not carried (make a tensor of them: `math.tensor(da.x)`).

    Raises:
        DimNotFound: `dims` names a dim the DataArray lacks.
        IncompatibleShapes: a size or labels given in `dims` disagree with the DataArray.
        TypeError: a dim name of the DataArray is not a str.
    """
    names = data.dims
    odd = [n for n in names if not isinstance(n, str)]
    if odd:
        raise TypeError(f'tensor(): DataArray dim names must be str to name tensor dims, got {odd!r}; rename them '
                        f'with da.rename(...)')
    unknown = [n for n in dims.names if n not in names]
    if unknown:
        raise DimNotFound(f'tensor(): the DataArray has dims {names}, not {unknown}. Dims are matched by name, '
                          f"e.g. tensor(da, batch('run') & spatial('x,y')); rename the DataArray's dims with "
                          f'da.rename(...)')
    parts = []
    for name, size in zip(names, data.shape, strict=True):
        if name in dims.names:
            given = dims[name]
            dim_type, labels = given.types[0], given.labels[0]
            if given.sizes[0] is not None and given.sizes[0] != size:
                raise IncompatibleShapes(f'tensor(): dim {name!r} was given size {given.sizes[0]} but the DataArray '
                                         f'has {size} entries along it')
        else:
            dim_type, labels = DEFAULT_TYPES.get(name, BATCH), None
        if labels is None:
            labels = _coordinate_labels(data, name)
        parts.append(Shape((size,), (name,), (dim_type,), (labels,)))
    return tensor(data.data, concat_shapes(*parts))


def _coordinate_labels(data, name: str) -> tuple[str, ...] | None:
    """The strings of the index coordinate of dim `name`, if it has one of unique strings."""
    coordinate = data.coords.get(name)
    if coordinate is None or coordinate.dims != (name,):
        return None
    values = coordinate.values
    if values.dtype.kind != 'U' and not (values.dtype.kind == 'O' and all(isinstance(v, str) for v in values)):
        return None
    labels = tuple(str(v) for v in values)
    return labels if len(set(labels)) == len(labels) else None
