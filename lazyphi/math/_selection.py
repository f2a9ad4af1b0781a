"""What selecting items does to a Shape: `after_gather`, `after_pad` and the normalisation of selections.

`Shape` inherits these from `ShapeSelection`; they use only the shape's own tuples, so this module
needs nothing of `_shape.py`.
"""
import operator
from typing import TYPE_CHECKING

from .._errors import LabelNotFound
from ._sizes import NonUniform, gather_non_uniform, map_size_leaves, size_from_nested

if TYPE_CHECKING:
    from ._shape import Shape


class ShapeSelection:
    """The selection methods of `Shape` (see `lazyphi.math.Shape`)."""

    __slots__ = ()

    def after_gather(self, selection: dict) -> 'Shape':
        """Shape of the result of indexing with `selection`, which maps dim names to selections.

        An int or a single label removes the dim; a slice, a list or tuple of ints or labels, or a
        str 'a,b' of several labels keeps it with the selected items. Non-uniform sizes follow
        the selection along the dims they vary along. Names not in this shape are ignored.
        """
        norm = {}
        for name, sel in selection.items():
            if sel is not None and name in self.names:
                norm[name] = self._normalize_selection(name, sel)
        if not norm:
            return self
        sizes, names, types, labels = [], [], [], []
        for i, n in enumerate(self.names):
            sel = norm.get(n)
            if type(sel) is int:
                continue
            s, lab = self.sizes[i], self.labels[i]
            if type(s) is NonUniform and any(a in norm for a in s.along):
                s = gather_non_uniform(s, norm)
            if type(sel) is slice:
                if isinstance(s, NonUniform):
                    s = size_from_nested(map_size_leaves(s.sizes, lambda k, sl=sel: len(range(k)[sl])), s.along)
                elif s is not None:
                    s = len(range(s)[sel])
                elif sel != slice(None):
                    s = None
                # as phiml: [::-1] reverses the items but leaves the labels in place; other slices take theirs
                lab = lab if lab is None or sel == slice(None, None, -1) else lab[sel]
            elif sel is not None:
                s = len(sel)
                lab = None if lab is None else tuple(lab[i] for i in sel)
            sizes.append(s)
            names.append(n)
            types.append(self.types[i])
            labels.append(lab)
        return type(self)(tuple(sizes), tuple(names), tuple(types), tuple(labels))

    def _normalize_selection(self, name: str, sel) -> int | slice | tuple[int, ...]:
        """Turn a selection along `name` into an int, a slice or a tuple of ints."""
        if isinstance(sel, slice):
            return sel
        if isinstance(sel, str):
            if ',' in sel:
                return tuple(self._label_index(name, label.strip()) for label in sel.split(',') if label.strip())
            return self._label_index(name, sel.strip())
        if isinstance(sel, (list, tuple)):
            return tuple(self._label_index(name, e) if isinstance(e, str) else self._int_index(name, e) for e in sel)
        return self._int_index(name, sel)

    def _int_index(self, name: str, index) -> int:
        if isinstance(index, bool) or not hasattr(type(index), '__index__'):
            raise TypeError(f"Cannot select {index!r} along dim {name!r}: expected an int, a slice, "
                            f"an item label str, or a list or tuple of ints or labels")
        index = operator.index(index)
        size = self.sizes[self.names.index(name)]
        if isinstance(size, int) and not -size <= index < size:
            raise IndexError(f"Index {index} is out of range for dim {name!r} of size {size} in {self}")
        return index

    def _label_index(self, name: str, label: str) -> int:
        labels = self.labels[self.names.index(name)]
        if labels is None:
            raise LabelNotFound(f"Cannot select label {label!r} along dim {name!r} of {self}: the dim has no labels")
        try:
            return labels.index(label)
        except ValueError:
            raise LabelNotFound(f"Label {label!r} is not among the labels {labels} of dim {name!r}") from None

    def after_pad(self, widths: dict) -> 'Shape':
        """The shape after padding: `widths` maps dim names to (lower, upper) counts added; labels are dropped there."""
        sizes, labels = list(self.sizes), list(self.labels)
        for name, (lower, upper) in widths.items():
            if name not in self.names:
                continue
            i = self.names.index(name)
            if not isinstance(sizes[i], int):
                raise ValueError(f"Cannot pad dim {name!r} of {self}: its size is not known")
            sizes[i] += lower + upper
            labels[i] = None
        return type(self)(tuple(sizes), self.names, self.types, tuple(labels))

    def prepare_gather(self, dim: str, selection) -> 'int | slice | list[int]':
        """`selection` along `dim` with item labels resolved, as phiml gives it: an int, a slice, or a list of ints
        for several items (`slice(0, 0)` for none). A Shape selects the items its dim names are labels of."""
        if isinstance(selection, ShapeSelection):
            selection = selection.names[0] if len(selection.names) == 1 else selection.names
        resolved = self._normalize_selection(dim if isinstance(dim, str) else dim.name, selection)
        if isinstance(resolved, tuple):
            return list(resolved) if resolved else slice(0, 0)
        return resolved


def resolve_index(shape: 'Shape', index: dict) -> dict:
    """`index` (dim name -> selection) with item labels resolved by `shape.prepare_gather`."""
    return {dim: shape.prepare_gather(dim, selection) for dim, selection in index.items()}
