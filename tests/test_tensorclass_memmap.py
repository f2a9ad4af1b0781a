"""TensorClass's memmap family on lazyphi's Zarr saves: written, preallocated, filled, reloaded, damaged."""

import dataclasses
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from lazyphi import math
from lazyphi.backend import default_backend
from lazyphi.dataclasses import TensorClass, cached_property
from lazyphi.math import Tensor, batch
from lazyphi.parallel import parallel_compute
from lazyphi.storage import ChunkDamaged, ChunkMissing, DiskTensor, ManifestDamaged, ReplacedOnDisk, clear_memory_cache


class Particles(TensorClass):
    position: Any
    velocity: Any
    label: str = 'particles'


def particles(n=6, offset=0.0) -> Particles:
    native = default_backend().as_tensor(np.arange(n * 2, dtype=np.float32).reshape(n, 2) + offset)
    return Particles(native, np.ones((n, 2), np.float32), batch_size=[n])


def values(t: Tensor) -> np.ndarray:
    return t.numpy(t.shape.names)


@pytest.mark.usefixtures('backend')
def test_memmap_writes_every_tensor_and_loads_back_lazily(tmp_path):
    p = particles()
    on_disk = p.memmap(tmp_path / 'p')
    assert isinstance(on_disk.position, DiskTensor) and not isinstance(p.position, DiskTensor)
    assert on_disk.saved_path == str(tmp_path / 'p') and on_disk.label == 'particles'
    assert on_disk.batch_size == p.batch_size and on_disk.position.source_backend == default_backend().name
    np.testing.assert_array_equal(values(on_disk.position), values(p.position))
    loaded = Particles.load_memmap(tmp_path / 'p')
    assert isinstance(loaded.velocity, DiskTensor) and loaded.batch_size == batch(b0=6)
    np.testing.assert_array_equal(values(loaded[2:4].position), values(p.position)[2:4])
    assert Particles.load is not None and Particles.load(tmp_path / 'p').label == 'particles'
    eager = Particles.load_memmap(tmp_path / 'p', device='cpu')
    assert not isinstance(eager.position, DiskTensor)
    np.testing.assert_array_equal(values(eager.position), values(p.position))


def test_memmap_in_place_save_dumps_and_futures(tmp_path):
    p = particles()
    assert p.memmap_(tmp_path / 'a') is p and isinstance(p.position, DiskTensor)
    assert isinstance(particles().save(tmp_path / 'b').position, DiskTensor)
    assert isinstance(particles().dumps(tmp_path / 'c').position, DiskTensor)
    future = particles().memmap(tmp_path / 'd', num_threads=1, return_early=True)
    assert isinstance(future, Future)
    np.testing.assert_array_equal(values(future.result().position), values(particles().position))
    assert not isinstance(particles().memmap(tmp_path / 'e', return_early=True), Future)  # needs num_threads > 0
    anywhere = particles().memmap()  # no prefix: a new temporary directory
    assert os.path.isdir(anywhere.saved_path) and float(anywhere.velocity.sum) == 12
    shutil.rmtree(os.path.dirname(anywhere.saved_path))
    q = particles() * 0
    assert q.load_(tmp_path / 'a') is q and q.saved_path == str(tmp_path / 'a')
    np.testing.assert_array_equal(values(q.position), values(particles().position))
    assert (q * 2).saved_path is None  # new values are not those on disk
    assert q[0:2].saved_path is None and q[0].saved_path is None  # parts are not the instance saved
    with pytest.raises(ValueError, match='has no saved path'):
        q[0:2].memmap_refresh_()


@pytest.mark.usefixtures('backend')
def test_an_instance_of_a_prefix_saved_again_refuses_the_new_values_until_refreshed(tmp_path):
    reader = particles().memmap(tmp_path / 'p')
    particles(offset=100.0).memmap_(tmp_path / 'p', existsok=True)
    with pytest.raises(ReplacedOnDisk, match='was saved again'):
        values(reader.position)
    np.testing.assert_array_equal(values(reader.memmap_refresh_().position), values(particles(offset=100.0).position))


def test_argument_errors_name_what_is_accepted(tmp_path):
    p = particles()
    with pytest.raises(ValueError, match='num_threads must be a non-negative int, but got -1'):
        p.memmap(tmp_path / 'x', num_threads=-1)
    with pytest.raises(TypeError, match="existsok takes True or False, but got 'no'"):
        p.memmap(tmp_path / 'x', existsok='no')
    p.memmap(tmp_path / 'x')
    with pytest.raises(FileExistsError, match='pass existsok=True'):
        p.memmap(tmp_path / 'x', existsok=False)
    (tmp_path / 'other').mkdir()
    (tmp_path / 'other' / 'data.txt').write_text('precious')
    with pytest.raises(FileExistsError, match='not a lazyphi save'):
        p.memmap(tmp_path / 'other')
    assert (tmp_path / 'other' / 'data.txt').read_text() == 'precious'
    on_disk = Particles.load_memmap(tmp_path / 'x')
    with pytest.raises(ValueError, match=r'lie on disk elsewhere .* pass copy_existing=True'):
        on_disk.memmap(tmp_path / 'y')
    copied = on_disk.memmap(tmp_path / 'y', copy_existing=True)
    np.testing.assert_array_equal(values(copied.position), values(p.position))
    with pytest.raises(ValueError, match='has no saved path: it was never memmapped'):
        p.memmap_refresh_()
    with pytest.raises(TypeError, match='takes an instance of Particles'):
        p[0] = 1


@pytest.mark.usefixtures('backend')
def test_memmap_like_buffer_is_missing_until_written_then_reads_exactly(tmp_path):
    p = particles()
    buffer = p.memmap_like(tmp_path / 'buf')
    assert isinstance(buffer.position, DiskTensor) and buffer.position.shape == p.position.shape
    assert buffer.position.dtype == p.position.dtype and not os.listdir(tmp_path / 'buf' / 'position.done')
    with pytest.raises(ChunkMissing, match=r"Chunk 0\.0 of array 'position'"):
        buffer.position.numpy('b0,_0')
    buffer[0:2] = p[0:2]
    buffer[2] = p[2]
    with pytest.raises(ChunkMissing):  # rows of one chunk are read once all are written
        buffer[0].position.numpy('_0')
    buffer[3:] = p[3:]
    np.testing.assert_array_equal(values(buffer.position), values(p.position))
    buffer[1] = p[4] * 10  # a complete chunk: read, changed, written again
    expected = values(p.position).copy()
    expected[1] = expected[4] * 10
    np.testing.assert_array_equal(values(buffer.position), expected)
    np.testing.assert_array_equal(values(Particles.load_memmap(tmp_path / 'buf').position), expected)


def test_memmap_like_of_an_expanded_tensor_is_full_size_and_in_place_writes_in_memory(tmp_path):
    wide = Particles(math.expand(math.ones(), batch(b0=4_000_000)), 1.0, batch_size=batch(b0=4_000_000))
    buffer = wide.memmap_like(tmp_path / 'wide')
    assert buffer.position.array_shape == batch(b0=4_000_000) and buffer.position.chunks[0] < 4_000_000
    first = buffer.position.chunks[0]
    block = Particles(np.full(first, 3.0, np.float32), np.zeros(first, np.float32), batch_size=[first])
    buffer[0:first] = block
    assert float(buffer.position.b0[first - 1]) == 3.0
    with pytest.raises(ChunkMissing):
        float(buffer.position.b0[first])
    p = particles()
    p[1] = particles(offset=100)[0]  # in memory: a new Tensor with that row replaced
    np.testing.assert_array_equal(values(p.position)[1], [100, 101])

    class Frozen(TensorClass, frozen=True):
        x: Any
    frozen = Frozen(np.zeros(3, np.float32), batch_size=[3])
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"fields \['x'\] lie in memory"):
        frozen[0] = Frozen(np.ones(1, np.float32), batch_size=[1])[0]
    writable = frozen.memmap_like(tmp_path / 'frozen')
    writable[0:3] = Frozen(np.ones(3, np.float32), batch_size=[3])
    np.testing.assert_array_equal(values(writable.x), 1)


def test_writing_part_of_the_rows_of_an_incomplete_chunk_is_refused(tmp_path):
    grid = Particles(np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32), batch_size=[4, 3])
    buffer = grid.memmap_like(tmp_path / 'grid')
    with pytest.raises(ValueError, match='not complete yet, and rows of a chunk not yet complete are written whole'):
        buffer[:, 1] = grid[:, 1]
    buffer[0:4] = grid
    buffer[:, 1] = grid[:, 1] + 5  # complete now: read-modify-write
    np.testing.assert_array_equal(values(buffer.position)[:, 1], 5)


@dataclasses.dataclass(frozen=True)
class Block:
    x: Tensor

    @cached_property
    def square(self) -> Tensor:
        return self.x ** 2


def test_a_buffer_filled_from_parallel_compute_block_by_block_reads_back_exactly(tmp_path):
    n = 10
    source = particles(n)
    buffer = source.memmap_like(tmp_path / 'squares')
    for start in range(0, n, 4):
        part = source[start:start + 4]
        block = Block(part.position)
        parallel_compute(block, [Block.square], max_workers=0)
        buffer[start:start + 4] = Particles(block.square, part.velocity, batch_size=part.batch_size)
    np.testing.assert_array_equal(values(buffer.position), values(source.position) ** 2)


def test_share_non_tensor_writes_into_the_manifest_and_refresh_sees_it(tmp_path):
    shared = particles().memmap(tmp_path / 's', share_non_tensor=True)
    other = Particles.load_memmap(tmp_path / 's')  # another reader of the same save
    shared.label = 'moved'
    assert other.label == 'particles' and other.memmap_refresh_() is other and other.label == 'moved'
    unshared = particles().memmap(tmp_path / 'u')
    unshared.label = 'local'
    assert Particles.load_memmap(tmp_path / 'u').label == 'particles'


def test_consolidate_gives_dense_tensors_of_their_own_in_memory(tmp_path):
    on_disk = particles().memmap(tmp_path / 'c')
    packed = on_disk.consolidate()
    assert not isinstance(packed.position, DiskTensor) and packed.saved_path is None
    np.testing.assert_array_equal(values(packed.position), values(particles().position))


def test_a_fresh_process_reloads_and_damage_is_detected(tmp_path):
    module = tmp_path / 'mm_module.py'
    module.write_text(textwrap.dedent('''
        from typing import Any
        from lazyphi.dataclasses import TensorClass

        class Stored(TensorClass):
            x: Any
            note: str = ''
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        from mm_module import Stored
        Stored(np.arange(6.0).reshape(3, 2), 'hello', batch_size=[3]).memmap(tmp_path / 'st')
    finally:
        sys.path.remove(str(tmp_path))
    code = (f'from mm_module import Stored; s = Stored.load_memmap({str(tmp_path / "st")!r}); '
            f'print(s.note, s.batch_size, s.x.numpy("b0,_0").sum())')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.split() == ['hello', '(b0ᵇ=3)', '15.0']
    loaded = Stored.load_memmap(tmp_path / 'st')
    shutil.move(tmp_path / 'st', tmp_path / 'moved')
    with pytest.raises(FileNotFoundError):
        loaded.memmap_refresh_()
    assert float(Stored.load_memmap(tmp_path / 'moved').x.sum) == 15.0  # a save moved whole is still one
    os.remove(tmp_path / 'moved' / 'x' / 'c.0.0')  # a chunk file lost after it was recorded
    clear_memory_cache()  # the values read above are still in memory
    with pytest.raises(ChunkDamaged, match=r"Chunk 0\.0 of array 'x'"):
        Stored.load_memmap(tmp_path / 'moved').x.numpy('b0,_0')
    Stored(np.zeros((3, 4)), batch_size=[3]).memmap(tmp_path / 'wider')
    clear_memory_cache()
    shutil.rmtree(tmp_path / 'moved' / 'x')
    shutil.copytree(tmp_path / 'wider' / 'x', tmp_path / 'moved' / 'x')  # another array moved in
    # a fresh process compares the Zarr metadata with the manifest first; this one has opened the array before and
    # finds the chunk file of the wrong size
    with pytest.raises((ManifestDamaged, ChunkDamaged), match=r'disagrees with the Zarr metadata|file holds 100 bytes'):
        Stored.load_memmap(tmp_path / 'moved').x.numpy('b0,_0')


def test_writers_of_disjoint_whole_chunks_run_at_once(tmp_path):
    rows, width = 256, 32768  # 128 KiB a row: 64 rows a chunk, 4 chunks
    layout = Particles(math.expand(math.zeros(), batch(b0=rows)), np.zeros((rows, width), np.float32),
                       batch_size=[rows])
    buffer = layout.memmap_like(tmp_path / 'wide')
    step = buffer.velocity.chunks[0]
    assert step < rows and rows % step == 0

    def fill(start: int) -> None:
        block = np.arange(start, start + step, dtype=np.float32)[:, None] * np.ones(width, np.float32)
        buffer[start:start + step] = Particles(block[:, 0], block, batch_size=[step])
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(fill, range(0, rows, step)))
    loaded = Particles.load_memmap(tmp_path / 'wide')
    np.testing.assert_array_equal(values(loaded.velocity), np.broadcast_to(np.arange(rows)[:, None], (rows, width)))
    np.testing.assert_array_equal(values(loaded.position), np.arange(rows))


class Swarm(TensorClass):
    leader: Any
    members: Particles
    name: str = 'swarm'


def test_nested_tensor_classes_keep_their_batch_dims_and_are_written_through(tmp_path):
    def swarm(offset: float) -> Swarm:
        runs = batch(runs=4)
        members = Particles(np.arange(8, dtype=np.float32).reshape(4, 2) + offset, np.ones((4, 2), np.float32),
                            batch_size=runs)
        return Swarm(np.arange(4, dtype=np.float32) + offset, members, batch_size=runs)
    buffer = swarm(0).memmap_like(tmp_path / 'swarm')
    assert isinstance(buffer.members, Particles) and isinstance(buffer.members.position, DiskTensor)
    assert buffer.members.batch_size == batch(runs=4) and buffer.batch_size == batch(runs=4)
    with pytest.raises(ChunkMissing):
        values(buffer.members.velocity)
    full = swarm(1)
    buffer[0:2] = full[0:2]
    buffer[2:] = full[2:]
    loaded = Swarm.load_memmap(tmp_path / 'swarm')
    assert loaded.name == 'swarm' and loaded.members.batch_size == batch(runs=4)
    assert loaded.members[1].batch_size == batch()
    np.testing.assert_array_equal(values(loaded.members.position), values(full.members.position))
    np.testing.assert_array_equal(values(loaded.leader), np.arange(4) + 1)


def test_strided_rows_are_staged_until_the_chunk_is_whole_also_from_another_process(tmp_path):
    p = particles()
    buffer = p.memmap_like(tmp_path / 'strided')
    buffer[0:6:2] = p[0:6:2]
    assert sorted(os.listdir(tmp_path / 'strided' / 'position.done' / '.rows.0.0')) == ['0-1', '2-3', '4-5']
    with pytest.raises(ChunkMissing):
        values(buffer.position)
    code = (f'import numpy as np, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); '
            f'from test_tensorclass_memmap import Particles, particles; '
            f'b = Particles.load_memmap({str(tmp_path / "strided")!r}); b[1:6:2] = particles()[1:6:2]')
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, '-c', code], env=env, check=True, capture_output=True)
    clear_memory_cache()
    np.testing.assert_array_equal(values(buffer.position), values(p.position))
    names = sorted(os.listdir(tmp_path / 'strided' / 'position.done'))  # staging removed, the chunk recorded
    assert names[0] == '.record' and len(names) == 2 and names[1].startswith('0.0.')  # with its tag
