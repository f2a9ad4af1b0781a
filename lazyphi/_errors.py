"""Exception types of lazyphi.

Every error a user can trigger subclasses the built-in exception that fits, so
``except ValueError`` keeps working in code written against the reference library.
"""


class IncompatibleShapes(ValueError):
    """Two shapes disagree on the size, type or labels of a dim they share."""


class NoBackendFound(TypeError):
    """No registered backend accepts the given values."""


class _ReadableKeyError(KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0]) if self.args else ''


class DimNotFound(_ReadableKeyError):
    """A dim named by the caller is not part of the shape at hand."""


class LabelNotFound(_ReadableKeyError):
    """An item label named by the caller is not among a dim's labels."""


class UnsupportedDType(_ReadableKeyError, ValueError):
    """A `DType` that no backend holds, such as a floating-point format of 8 bits.

    Also a `ValueError`: the data type is a bad value; a `KeyError` as in the reference library.
    """


class ManifestDamaged(OSError):
    """The manifest (`lazyphi.json`) of a disk-cache group is missing, unreadable or invalid."""


class CacheDirNotShared(OSError):
    """Some Dask workers cannot see the `cache_dir` the host writes to."""


class ResultNotFound(_ReadableKeyError):
    """No result with the given key exists in a cache directory."""


class ChunkMissing(OSError):
    """A chunk of a disk-cached result has no completion record: the computation writing it did not finish."""


class ChunkDamaged(OSError):
    """A chunk of a disk-cached result is recorded as complete but its data cannot be decoded."""


class ReplacedOnDisk(OSError):
    """The save or disk-cache result a lazy tensor was loaded from has been replaced in its place since (saved, or
    computed and written, again there): the values the tensor refers to are gone."""


class UnknownClassWarning(UserWarning):
    """`lazyphi.load` met a class it may not import; that part of the tree comes back as plain data."""


class NotConvertible(TypeError, AssertionError):
    """Data that no array library can hold as numbers (strings, arbitrary objects) was to become a numeric tensor.

    Also an `AssertionError`, which is what the reference library raises in this case.
    """
