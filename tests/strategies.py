"""Hypothesis strategies for dims and shapes, shared by the test modules.

Import them as ``from strategies import shapes`` (pytest puts ``tests/`` on ``sys.path``).
"""
from hypothesis import strategies as st

from lazyphi.math._shape import CHANNEL, DIM_TYPES, DUAL, Shape

# A small pool, so that independently drawn shapes often share dims.
DIM_NAMES = ('b', 'x', 'y', 'z', 't', 'points', 'vector', 'k')
LABEL_POOL = ('x', 'y', 'z', 'u', 'v', 'w', 'p', 'q')


def labels(size: int) -> st.SearchStrategy[tuple[str, ...]]:
    """Distinct item labels, `size` of them."""
    return st.lists(st.sampled_from(LABEL_POOL), min_size=size, max_size=size, unique=True).map(tuple)


@st.composite
def shapes(draw, min_rank: int = 0, max_rank: int = 4, types=DIM_TYPES, names=DIM_NAMES,
           min_size: int = 1, max_size: int = 5, with_labels: bool = True) -> Shape:
    """Shapes with distinct names in random order, random types, int sizes and, on channel dims, optional labels.

    Dual dims get the '~' prefix, so a drawn shape never holds both 'x' and '~x'.
    """
    rank = draw(st.integers(min_rank, min(max_rank, len(names))))
    base_names = draw(st.lists(st.sampled_from(names), min_size=rank, max_size=rank, unique=True))
    sizes, dim_names, dim_types, dim_labels = [], [], [], []
    for name in base_names:
        dim_type = draw(st.sampled_from(types))
        size = draw(st.integers(min_size, max_size))
        item_labels = None
        if dim_type == CHANNEL and with_labels and size <= len(LABEL_POOL) and draw(st.booleans()):
            item_labels = draw(labels(size))
        sizes.append(size)
        dim_names.append('~' + name if dim_type == DUAL else name)
        dim_types.append(dim_type)
        dim_labels.append(item_labels)
    return Shape(tuple(sizes), tuple(dim_names), tuple(dim_types), tuple(dim_labels))


def dims(**kwargs) -> st.SearchStrategy[Shape]:
    """Rank-1 shapes; takes the keyword arguments of `shapes` other than the ranks."""
    return shapes(min_rank=1, max_rank=1, **kwargs)


@st.composite
def sub_shapes(draw, shape: Shape, hide: bool = False) -> Shape:
    """A selection of the dims of `shape`, in random order.

    Args:
        hide: randomly forget the labels, or the size and labels, of some selected dims.
    """
    idx = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape))) if shape else []
    selected = shape[idx]
    if hide:
        for name in selected.names:
            forget = draw(st.sampled_from(['nothing', 'labels', 'size']))
            if forget != 'nothing':
                selected = selected.with_dim_size(name, None if forget == 'size' else selected.get_size(name))
    return selected


@st.composite
def compatible_shapes(draw, count: int = 2, hide: bool = False, **kwargs) -> tuple[Shape, ...]:
    """`count` shapes that can be merged: each holds some dims of one common shape drawn with `shapes(**kwargs)`."""
    universe = draw(shapes(**kwargs))
    return tuple(draw(sub_shapes(universe, hide)) for _ in range(count))


def dims_of(shape: Shape) -> dict:
    """The dims of `shape` as {name: (size, type, labels)}, for comparisons that ignore order."""
    return {n: (s, t, lab) for n, s, t, lab in zip(shape.names, shape.sizes, shape.types, shape.labels, strict=True)}
