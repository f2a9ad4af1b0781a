"""Printing tensors: `repr(t)`, `f'{t:.2f}'` and the layouts and options of format specs.

A format spec is a `:`-separated list of options, in any order:

- a layout: `auto` (default: the values in one row when there are at most `threshold` of them, else a
  summary), `row`, `full` (several lines), `numpy` (NumPy's own printing) or `summary` (mean ± std and range);
- `shape` / `no-shape`, `dtype` / `no-dtype`: show or hide the shape and the data type (by default the shape
  is shown where the values alone do not say it, the dtype where it is not the float type of the current
  precision or bool);
- `color` / `no-color`: ANSI colours for the shape;
- `threshold=N`: the largest number of values `auto` prints in full;
- a number format with a `.`, such as `.2f` or `.3e`, applied to every value.

Tensors are read through their public methods only, so this module needs no tensor class.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from ..backend import DType, get_precision

# The broadcast formatter (`-f-f'...'`) collecting the tensors of an f-string while it is evaluated, else None
BROADCAST_FORMATTER: ContextVar = ContextVar('lazyphi_broadcast_formatter', default=None)
LAYOUTS = ('auto', 'row', 'full', 'numpy', 'summary')
_SHAPE_COLOR = '\033[94m'
_RESET = '\033[0m'


@dataclass(frozen=True)
class PrintOptions:
    """How to print a tensor; see the module docstring for the meaning of each option."""

    layout: str = 'auto'
    float_format: str | None = None
    threshold: int = 8
    color: bool = False
    include_shape: bool | None = None
    include_dtype: bool | None = None


def parse_format_spec(spec: str) -> PrintOptions:
    """The options of a format spec like `'row:no-dtype:.2f'`; a ValueError names an unknown option."""
    layout, float_format, threshold = 'auto', None, 8
    flags = {}
    for option in (s for s in spec.split(':') if s):
        if option in LAYOUTS:
            if layout != 'auto' and option != layout:
                raise ValueError(f'Format spec {spec!r} names two layouts, {layout!r} and {option!r}')
            layout = option
        elif option.startswith('threshold='):
            threshold = int(option[len('threshold='):])
        elif option.removeprefix('no-') in ('shape', 'dtype', 'color'):
            flags[option.removeprefix('no-')] = not option.startswith('no-')
        elif '.' in option:
            float_format = option
        else:
            raise ValueError(f'Unknown option {option!r} in the tensor format spec {spec!r}. Options: a layout '
                             f'{LAYOUTS}, shape/no-shape, dtype/no-dtype, color/no-color, threshold=N, or a '
                             f"number format such as '.2f'")
    return PrintOptions(layout, float_format, threshold, flags.get('color', False), flags.get('shape'),
                        flags.get('dtype'))


def format_tensor(t, options: PrintOptions) -> str:
    """`t` printed as `options` say."""
    shape, dtype = t.shape, t.dtype
    if not t.available or not shape.is_uniform:
        what = 'placeholder' if not t.available else 'non-uniform'
        return f'{_shape_text(shape, options)} {dtype} ({what}, {type(t).__name__})'
    layout = options.layout
    if shape.rank and not t._names and layout in ('auto', 'summary'):  # one value repeated: no need to expand it
        value = _number(t[{n: 0 for n in shape.names}].numpy().reshape(())[()], options)
        return f'{_shape_text(shape, options)} {dtype} const {value}'
    values = t.numpy(shape.names)
    if layout == 'auto':
        layout = 'row' if values.size <= options.threshold or shape.rank == 0 else 'summary'
    text = {'row': _row, 'full': _full, 'numpy': _numpy, 'summary': _summary}[layout](values, shape, options)
    return _with_dtype(text, dtype, options, layout, shape.rank)


def _with_dtype(text: str, dtype: DType, options: PrintOptions, layout: str, rank: int) -> str:
    show = options.include_dtype
    if show is None:
        show = layout in ('row', 'summary') and not _expected_dtype(dtype) and rank > 0
    if not show or layout == 'summary':  # the summary places the dtype after the shape itself
        return text
    return f'{text} {dtype}'


def _expected_dtype(dtype: DType) -> bool:
    """Whether the dtype goes without saying: bool, or floats (complex numbers) of the current precision."""
    return dtype.kind is bool or (dtype.kind in (float, complex) and dtype.precision == get_precision())


def _shape_text(shape, options: PrintOptions) -> str:
    return f'{_SHAPE_COLOR}{shape}{_RESET}' if options.color else str(shape)


def _number(value, options: PrintOptions, default_float: str = '.3f') -> str:
    if isinstance(value, (np.bool_, bool)):
        return str(bool(value))
    if options.float_format is not None and isinstance(value, (np.number, int, float, complex)):
        return format(value.item() if isinstance(value, np.generic) else value, options.float_format)
    if isinstance(value, (np.floating, float)):
        return format(float(value), default_float)
    if isinstance(value, (np.complexfloating, complex)):
        return format(complex(value), default_float)
    return str(value.item() if isinstance(value, np.generic) else value)


def _row(values: np.ndarray, shape, options: PrintOptions) -> str:
    """All values in one line: vectors along a labelled channel dim as `(x=1, y=2)`, others separated by `;`."""
    if shape.rank == 0:  # a single number prints as NumPy prints it, unless a number format is given
        value = values.reshape(())[()]
        return _number(value, options) if options.float_format else str(value)
    channel = shape.channel
    show_shape = options.include_shape
    if channel.rank == 1 and channel.labels[0] is not None:
        axis = shape.index(channel.names[0])
        vectors = np.moveaxis(values, axis, -1).reshape(-1, channel.size)
        labels = channel.labels[0]
        text = '; '.join('(' + ', '.join(f'{n}={_number(v, options)}' for n, v in zip(labels, vec, strict=True))
                         + ')' for vec in vectors)
        if show_shape is None:
            show_shape = shape.rank > 1
    elif shape.rank == 1:
        text = '(' + ', '.join(_number(v, options) for v in values) + ')'
        if show_shape is None and shape.types[0] == 'channel' and shape.names[0] == 'vector':  # as phiml
            show_shape = False
        if show_shape is None:  # the dim's name and type say enough: its size is the number of values
            name = str(shape)[1:-1].split('=')[0]
            return f'{text} along {_SHAPE_COLOR}{name}{_RESET}' if options.color else f'{text} along {name}'
    else:
        text = '; '.join(_number(v, options) for v in values.reshape(-1))
        if show_shape is None:
            show_shape = True
    return f'{text} {_shape_text(shape, options)}' if show_shape else text


def _full(values: np.ndarray, shape, options: PrintOptions) -> str:
    """The values on several lines, one row per entry of the first dim (NumPy's nesting, comma-separated)."""
    text = np.array2string(values, separator=', ', threshold=np.inf, formatter=_formatter(values, options))
    if options.include_shape is False or shape.rank == 0:
        return text
    return f'{text}  along {_shape_text(shape, options)}'


def _numpy(values: np.ndarray, shape, options: PrintOptions) -> str:
    text = np.array2string(values, formatter=_formatter(values, options))
    return f'{text} {_shape_text(shape, options)}' if options.include_shape else text


def _formatter(values: np.ndarray, options: PrintOptions) -> dict | None:
    if options.float_format is None or values.dtype.kind not in 'iufc':
        return None
    return {'all': lambda v: format(v, options.float_format)}


def _summary(values: np.ndarray, shape, options: PrintOptions) -> str:
    """Shape, dtype and statistics: `(x=100) float64 0.0812 ± 1.11 (-2.65...2.37)`; 3 significant digits unless a
    number format is given."""
    head = f'{_shape_text(shape, options)} {values.dtype}' if options.include_shape is not False else \
        f'{values.dtype}'
    if options.include_dtype is False:
        head = _shape_text(shape, options) if options.include_shape is not False else ''
    if values.dtype.kind == 'b':
        return f'{head} {int(values.sum())} / {values.size} True'.strip()
    if values.dtype.kind not in 'iufc' or values.size == 0:
        return head
    if values.size > 1 and np.all(values.reshape(-1) == values.reshape(-1)[0]):
        return f'{head} const {_number(values.reshape(-1)[0], options)}'.strip()
    finite = values[np.isfinite(values)] if values.dtype.kind in 'fc' else values
    if not finite.size:
        return f'{head} no finite values'.strip()
    mean, std, low, high = (_number(v, options, '.3g') for v in (finite.mean(), finite.std(), finite.min(),
                                                                  finite.max()))
    return f'{head} {mean} ± {std} ({low}...{high})'.strip()
