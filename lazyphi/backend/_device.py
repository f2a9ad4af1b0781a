"""Compute devices: the processors a backend can place tensors on."""

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._backend import Backend


@dataclass(frozen=True, eq=False)
class ComputeDevice:
    """A processor (CPU, GPU or TPU) a backend can run on.

    Attributes:
        backend: The backend this device belongs to.
        name: Name of the device, e.g. `'CPU'`.
        device_type: `'CPU'`, `'GPU'` or `'TPU'`.
        memory: Memory available to the device in bytes, -1 if unknown.
        processor_count: CPU cores or GPU multiprocessors, -1 if unknown.
        description: Further information such as a driver version.
        ref: The library's own handle of the device. Two devices are equal if their refs are.
    """

    backend: 'Backend'
    name: str
    device_type: str
    memory: int
    processor_count: int
    description: str
    ref: Any

    def __post_init__(self) -> None:
        if self.device_type not in ('CPU', 'GPU', 'TPU'):
            raise ValueError(f"device_type must be 'CPU', 'GPU' or 'TPU' but got {self.device_type!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComputeDevice) and other.ref == self.ref

    def __hash__(self) -> int:
        return hash(self.ref)

    def __repr__(self) -> str:
        """`<backend> device '<name>' (<type>[ '<ref>']) | <memory> MB | <n> processors | <description>`, as phiml's."""
        memory = f"{self.memory / 1024 ** 2:.0f} MB" if self.memory > 0 else "memory: n/a"
        processors = f"{self.processor_count} processors" if self.processor_count > 0 else "processors: n/a"
        ref = f" '{self.ref}'" if isinstance(self.ref, str) else ""
        description = self.description.replace('\n', '  ')
        if len(description) > _DESCRIPTION_SHOWN:
            description = description[:_DESCRIPTION_SHOWN - 2] + '...'
        kind = f"{self.device_type}{ref}"
        return f"{self.backend} device '{self.name}' ({kind}) | {memory} | {processors} | {description}"


_DESCRIPTION_SHOWN = 30  # characters of the description a repr shows


def cpu_memory() -> int:
    """Physical memory of this machine in bytes, -1 where the platform does not say."""
    try:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    except (AttributeError, ValueError, OSError):
        return -1
