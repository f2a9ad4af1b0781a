"""cached_property, the dependency analysis, and which cached values `replace` keeps."""

import collections
import dataclasses
import functools
import gc
import pickle
import sys
import threading
import time
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazyphi import math
from lazyphi.dataclasses import (
    ALL,
    DirectDependencies,
    cached_properties,
    cached_property,
    cached_values,
    copy,
    direct_dependencies,
    explain_dependencies,
    property_dependencies,
    replace,
)
from lazyphi.math import Tensor, batch, spatial

CALLS = collections.Counter()
KINDS = {'lazyphi': cached_property, 'functools': functools.cached_property}


@pytest.fixture(autouse=True)
def reset_calls():
    CALLS.clear()


def outside(obj):
    return obj.a


def field(seed=0, n=3) -> Tensor:
    return math.tensor(np.random.default_rng(seed).normal(size=n), spatial('x'))


def make_class(kind, frozen: bool):
    """A dataclass whose properties read field `a` in every way the analysis follows, and `b` plainly."""

    @dataclasses.dataclass(frozen=frozen)
    class Base:
        a: Tensor
        b: Tensor
        scale: float = 2.0

        def base_helper(self):
            return self.a

    @dataclasses.dataclass(frozen=frozen)
    class Sim(Base):
        def helper(self, k):
            return self.a * k

        @property
        def plain(self):
            return self.a + 1

        @kind
        def via_lambda(self):
            CALLS['via_lambda'] += 1
            return (lambda: self.a * 2)()

        @kind
        def via_comprehension(self):
            CALLS['via_comprehension'] += 1
            return sum([self.a * i for i in range(3)])

        @kind
        def via_helper(self):
            CALLS['via_helper'] += 1
            return self.helper(3)

        @kind
        def via_nested(self):
            CALLS['via_nested'] += 1

            def inner():
                return self.a - 1
            return inner()

        @kind
        def inner_cached(self):
            CALLS['inner_cached'] += 1
            return self.a * self.scale

        @kind
        def via_cached(self):
            CALLS['via_cached'] += 1
            return self.inner_cached + 1

        @kind
        def via_property(self):
            CALLS['via_property'] += 1
            return self.plain

        @kind
        def via_super(self):
            CALLS['via_super'] += 1
            return super().base_helper()

        @kind
        def only_b(self):
            CALLS['only_b'] += 1
            return self.b * 2

        @kind
        def passes_self(self):
            CALLS['passes_self'] += 1
            return outside(self)

        @kind
        def computed_name(self):
            CALLS['computed_name'] += 1
            name = 'a'
            return getattr(self, name)

    return Sim


READS_A = ('via_lambda', 'via_comprehension', 'via_helper', 'via_nested', 'via_cached', 'via_property', 'via_super')
UNSURE = ('passes_self', 'computed_name')


@pytest.fixture(params=[(k, f) for k in KINDS for f in (True, False)], ids=lambda p: f'{p[0]}-frozen={p[1]}')
def sim_class(request):
    kind, frozen = request.param
    return make_class(KINDS[kind], frozen)


def compute_all(obj) -> dict:
    return {name: getattr(obj, name) for name in cached_properties(type(obj))}


def assert_same_values(actual: dict, expected: dict):
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        math.assert_close(actual[name], value, rel_tolerance=0, msg=name)


# --- cached_property -----------------------------------------------------------------------------


def test_cached_property_computes_once_and_stores_in_the_instance_dict():
    @dataclasses.dataclass(frozen=True)
    class C:
        x: float

        @cached_property
        def double(self):
            """Twice x."""
            CALLS['double'] += 1
            return self.x * 2

    c = C(3.)
    assert c.double == 6. and c.double == 6.
    assert CALLS['double'] == 1
    assert vars(c)['double'] == 6.
    assert C.double.__doc__ == 'Twice x.' and C.double.attrname == 'double'
    assert isinstance(C.double, cached_property)
    del c.__dict__['double']
    assert c.double == 6. and CALLS['double'] == 2


def test_cached_property_on_slots_class_raises_a_clear_type_error():
    class Slotted:
        __slots__ = ('x',)

        def __init__(self):
            self.x = 1

        @cached_property
        def y(self):
            return self.x

    with pytest.raises(TypeError, match=r"Slotted instances have no __dict__.*'y'.*__slots__"):
        Slotted().y  # noqa: B018


def test_cached_property_reused_under_two_names_raises():
    prop = cached_property(lambda self: 1)
    with pytest.raises((TypeError, RuntimeError)) as info:  # Python 3.11 wraps errors of __set_name__
        type('Twice', (), {'a': prop, 'b': prop})
    error = info.value if isinstance(info.value, TypeError) else info.value.__cause__
    assert isinstance(error, TypeError) and "'a' and 'b'" in str(error)


def test_cached_property_without_name_and_non_callable():
    prop = cached_property(lambda self: 1)
    with pytest.raises(TypeError, match='never given a name'):
        prop.__get__(object())
    with pytest.raises(TypeError, match='decorates a method'):
        cached_property(3)


def test_cached_properties_and_values_know_both_kinds_and_inheritance():
    class Base:
        @functools.cached_property
        def f(self):
            return 'f'

        @cached_property
        def g(self):
            return 'g'

        @cached_property
        def overridden(self):
            return 'base'

    class Derived(Base):
        overridden = 'a constant now'

        @cached_property
        def h(self):
            return 'h'

    assert set(cached_properties(Derived)) == {'f', 'g', 'h'}
    assert cached_properties(Derived()) == cached_properties(Derived)
    d = Derived()
    assert cached_values(d) == {}
    assert (d.f, d.h) == ('f', 'h')
    assert cached_values(d) == {'f': 'f', 'h': 'h'}
    assert cached_values(3) == {}


def _two_instances_meet(kind) -> bool:
    """Whether two instances compute a property at the same time (each waits for the other inside it)."""
    barrier = threading.Barrier(2, timeout=2)

    class Waiter:
        @kind
        def value(self):
            barrier.wait()  # returns only once the other instance's computation has also started
            return True

    results = []

    def run(obj):
        try:
            results.append(obj.value)
        except threading.BrokenBarrierError:
            results.append(False)

    threads = [threading.Thread(target=run, args=(Waiter(),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results == [True, True]


def test_no_lock_is_shared_between_instances():
    assert _two_instances_meet(cached_property)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason='functools.cached_property lost its lock in Python 3.12')
def test_functools_cached_property_serialises_instances_in_python_3_11():
    assert not _two_instances_meet(functools.cached_property)  # the check above would catch a shared lock


def test_same_instance_from_several_threads_computes_once():
    started = threading.Event()

    class Slow:
        @cached_property
        def value(self):
            CALLS['slow'] += 1
            started.set()
            time.sleep(0.05)  # the other threads ask while this computes
            return object()

    s = Slow()
    first = threading.Thread(target=lambda: s.value)
    first.start()
    started.wait(10)
    seen = []
    others = [threading.Thread(target=lambda: seen.append(s.value)) for _ in range(3)]
    for t in [*others]:
        t.start()
    for t in [first, *others]:
        t.join()
    assert CALLS['slow'] == 1 and all(v is vars(s)['value'] for v in seen) and len(seen) == 3


# --- dependency analysis -------------------------------------------------------------------------


def test_dependencies_through_every_construct(sim_class):
    for name in READS_A:
        deps = property_dependencies(sim_class, name)
        assert deps is not ALL and 'a' in deps and 'b' not in deps, (name, deps)
    assert property_dependencies(sim_class, 'via_cached') >= {'inner_cached', 'a', 'scale'}
    assert property_dependencies(sim_class, 'only_b') == {'b'}
    for name in UNSURE:
        assert property_dependencies(sim_class, name) is ALL


def test_direct_dependencies_stop_at_cached_properties(sim_class):
    direct = direct_dependencies(sim_class, 'via_cached')
    assert direct == DirectDependencies(frozenset(), frozenset({'inner_cached'}))
    assert direct_dependencies(sim_class, sim_class.__dict__['only_b']) == DirectDependencies(frozenset({'b'}),
                                                                                              frozenset())
    assert direct_dependencies(sim_class(field(), field()), 'passes_self') is ALL


def test_explanations_name_the_reason(sim_class):
    assert 'reads b' in explain_dependencies(sim_class, 'only_b')
    assert 'outside()' in explain_dependencies(sim_class, 'passes_self')
    assert 'computed attribute name' in explain_dependencies(sim_class, 'computed_name')


def test_analysis_caches_do_not_keep_classes_alive():
    def make():
        @dataclasses.dataclass(frozen=True)
        class Temporary:
            a: float

            @cached_property
            def uses_super(self):  # its function refers to the class through the __class__ cell
                return super().__hash__, self.a

        obj = Temporary(1.)
        obj.uses_super  # noqa: B018
        replace(obj, a=2.)
        explain_dependencies(Temporary, Temporary.uses_super)
        return weakref.ref(Temporary)

    ref = make()
    gc.collect()
    assert ref() is None


def test_unknown_property_name_raises():
    Sim = make_class(cached_property, True)
    with pytest.raises(ValueError, match="no cached property, property or method 'nope'"):
        property_dependencies(Sim, 'nope')
    with pytest.raises(ValueError, match='not an attribute'):
        property_dependencies(Sim, cached_property(lambda self: 0))


def test_all_is_a_singleton_with_a_name():
    assert repr(ALL) == 'ALL' and pickle.loads(pickle.dumps(ALL)) is ALL and type(ALL)() is ALL


@dataclasses.dataclass(frozen=True)
class Tricky:
    a: float
    b: float = 0.
    c: float = 0.

    def __private(self):
        return self.b

    @cached_property
    def mangled(self):
        return self.__private()

    @cached_property
    def type_checks(self):
        return type(self).__name__, isinstance(self, Tricky), self.__class__.__name__, self.c

    @cached_property
    def constant_getattr(self):
        return getattr(self, 'b', None), hasattr(self, 'c')

    @cached_property
    def explicit_super(self):
        return super(Tricky, self).__repr__()  # noqa: UP008  (the explicit form is what is tested)

    @cached_property
    def returns_self(self):
        return [self]

    @cached_property
    def rebinds_self(self):
        self = Tricky(1.)
        return self.a

    @cached_property
    def reads_dict(self):
        return self.__dict__.get('a')

    @cached_property
    def replaces_self(self):
        return dataclasses.replace(self, a=0.).a

    @cached_property
    def uses_vars(self):
        return vars(self)['a']

    @cached_property
    def fstring(self):
        return f'{self}'

    @cached_property
    def subscript(self):
        return self['a']

    @cached_property
    @functools.lru_cache  # noqa: B019
    def extra_decorator(self):
        return self.a

    @cached_property
    def instance_attribute(self):
        return self._derived

    def __post_init__(self):
        object.__setattr__(self, '_derived', self.a * 10)


@pytest.mark.parametrize('name, expected', [
    ('mangled', {'b', '_Tricky__private'}),
    ('type_checks', {'c'}),
    ('constant_getattr', {'b', 'c'}),
    ('instance_attribute', {'_derived'}),
    ('explicit_super', ALL),  # object.__repr__ reads everything
    ('returns_self', ALL),
    ('rebinds_self', ALL),
    ('reads_dict', ALL),
    ('replaces_self', ALL),
    ('uses_vars', ALL),
    ('fstring', ALL),
    ('subscript', ALL),
    ('extra_decorator', ALL),
])
def test_tricky_reads(name, expected):
    assert property_dependencies(Tricky, name) == expected, explain_dependencies(Tricky, name)


def test_a_property_reading_an_unsure_one_is_unsure_too():
    @dataclasses.dataclass(frozen=True)
    class C:
        a: float
        b: float

        @functools.cached_property
        def unsure(self):
            return outside(self)

        @cached_property
        def reader(self):
            return self.unsure + self.b

    assert direct_dependencies(C, 'reader') == DirectDependencies(frozenset({'b'}), frozenset({'unsure'}))
    assert property_dependencies(C, 'reader') is ALL
    assert "through the cached property 'unsure'" in explain_dependencies(C, 'reader')
    c = C(1., 2.)
    c.reader  # noqa: B018
    assert cached_values(replace(c, a=c.a)) == cached_values(c)  # nothing changed: all kept
    assert cached_values(replace(c, a=5.)) == {}


def test_wrapped_helper_unknown_descriptor_and_getattr_give_all():
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(self):
            return fn(self)
        return wrapper

    class Descriptor:
        def __get__(self, instance, owner=None):
            return 1

    @dataclasses.dataclass(frozen=True)
    class C:
        a: float

        @decorate
        def helper(self):
            return self.a

        custom = Descriptor()

        @cached_property
        def via_wrapped(self):
            return self.helper()

        @cached_property
        def via_descriptor(self):
            return self.custom

        @cached_property
        def via_partialmethod(self):
            return self.pm()

        pm = functools.partialmethod(helper)

    for name in ('via_wrapped', 'via_descriptor', 'via_partialmethod'):
        assert property_dependencies(C, name) is ALL, name

    @dataclasses.dataclass(frozen=True)
    class Dynamic:
        a: float

        def __getattr__(self, name):
            return self.a

        @cached_property
        def missing(self):
            return self.unknown

        @cached_property
        def known(self):
            return self.a

    assert property_dependencies(Dynamic, 'missing') is ALL
    assert property_dependencies(Dynamic, 'known') == {'a'}

    class Intercepting:
        def __getattribute__(self, name):
            return object.__getattribute__(self, name)

        @cached_property
        def anything(self):
            return 1

    assert property_dependencies(Intercepting, 'anything') is ALL


def test_shadowed_builtin_is_not_trusted():
    type = outside  # a variable named like the builtin: the property below calls outside(self)

    @dataclasses.dataclass(frozen=True)
    class C:
        a: float
        b: float

        @cached_property
        def p(self):
            return type(self)

    assert property_dependencies(C, 'p') is ALL


def test_subclass_overriding_a_helper_is_analysed_separately():
    @dataclasses.dataclass(frozen=True)
    class Base:
        a: float
        b: float

        def source(self):
            return self.a

        @cached_property
        def value(self):
            return self.source()

    @dataclasses.dataclass(frozen=True)
    class Derived(Base):
        def source(self):
            return self.b

    assert 'a' in property_dependencies(Base, 'value') and 'b' not in property_dependencies(Base, 'value')
    assert 'b' in property_dependencies(Derived, 'value') and 'a' not in property_dependencies(Derived, 'value')


def test_cycles_between_cached_properties_and_helpers_terminate():
    @dataclasses.dataclass(frozen=True)
    class C:
        a: float
        b: float

        def ping(self, n):
            return self.a if n == 0 else self.pong(n - 1)

        def pong(self, n):
            return self.b if n == 0 else self.ping(n - 1)

        @cached_property
        def first(self):
            return self.second if self.a > 0 else self.ping(3)

        @cached_property
        def second(self):
            return self.first if self.a < 0 else 0

    assert property_dependencies(C, 'first') == {'a', 'b', 'ping', 'pong', 'second'}
    assert property_dependencies(C, 'second') == {'a', 'b', 'ping', 'pong', 'first'}


SOURCELESS = '''
import dataclasses
from lazyphi.dataclasses import cached_property

def outside(x):
    return x

@dataclasses.dataclass(frozen=True)
class NoSource:
    a: float
    b: float

    def helper(self):
        return self.a

    @cached_property
    def via_lambda(self):
        return (lambda: self.a)()

    @cached_property
    def via_comprehension(self):
        return [self.a for _ in range(2)]

    @cached_property
    def via_helper(self):
        return self.helper()

    @cached_property
    def via_nested(self):
        def inner():
            return self.a
        return inner()

    @cached_property
    def only_b(self):
        return self.b

    @cached_property
    def passes_self(self):
        return outside(self)

    @cached_property
    def stores(self):
        x = self
        return x.a

    @cached_property
    def uses_super(self):
        return super().__repr__()
'''


def test_bytecode_analysis_where_source_is_missing():
    namespace = {'__name__': 'sourceless'}
    exec(compile(SOURCELESS, '<no file>', 'exec'), namespace)
    cls = namespace['NoSource']
    for name in ('via_lambda', 'via_comprehension', 'via_helper', 'via_nested'):
        assert 'a' in property_dependencies(cls, name) and 'b' not in property_dependencies(cls, name), name
    assert property_dependencies(cls, 'only_b') == {'b'}
    for name in ('passes_self', 'stores', 'uses_super'):
        assert property_dependencies(cls, name) is ALL, name
    assert 'bytecode' in explain_dependencies(cls, 'passes_self')


# --- replace and copy keep what is valid ---------------------------------------------------------


def test_replace_recomputes_exactly_what_reads_the_changed_field(sim_class):
    obj = sim_class(field(0), field(1))
    before = compute_all(obj)
    CALLS.clear()
    new = replace(obj, a=field(2))
    assert set(cached_values(new)) == {'only_b'}
    after = compute_all(new)
    for name in (*READS_A, 'inner_cached', *UNSURE):
        assert CALLS[name] == 1, name
    assert CALLS['only_b'] == 0 and after['only_b'] is before['only_b']
    assert_same_values(after, compute_all(sim_class(field(2), field(1))))


def test_replace_of_another_field_keeps_the_values_reading_a(sim_class):
    obj = sim_class(field(0), field(1))
    before = compute_all(obj)
    new = replace(obj, b=field(3))
    kept = set(cached_values(new))
    assert kept == {*READS_A, 'inner_cached'}
    assert all(getattr(new, name) is before[name] for name in kept)
    replace(obj, scale=3.0).via_cached  # noqa: B018
    assert CALLS['inner_cached'] == 2 and CALLS['via_cached'] == 2


def test_replace_with_the_same_object_changes_nothing(sim_class):
    obj = sim_class(field(0), field(1))
    before = compute_all(obj)
    new = replace(obj, a=obj.a)
    assert cached_values(new) == before


def test_copy_keeps_all_cached_values(sim_class):
    obj = sim_class(field(0), field(1))
    obj.via_lambda, obj.passes_self  # noqa: B018
    new = copy(obj)
    assert new is not obj and cached_values(new) == cached_values(obj)


def test_post_init_that_rebuilds_a_field_counts_as_a_change():
    @dataclasses.dataclass(frozen=True)
    class Normalising:
        a: Tensor
        b: float

        def __post_init__(self):
            object.__setattr__(self, 'a', math.wrap(self.a.numpy('x').copy(), spatial('x')))

        @cached_property
        def of_a(self):
            return self.a * 2

        @cached_property
        def of_b(self):
            return self.b * 2

    obj = Normalising(field(), 1.)
    obj.of_a, obj.of_b  # noqa: B018
    new = replace(obj, b=3.)
    assert set(cached_values(new)) == set()
    assert new.of_b == 6.


def test_instance_attributes_set_in_post_init_are_compared_too():
    @dataclasses.dataclass(frozen=True)
    class WithState:
        a: float

        def __post_init__(self):
            object.__setattr__(self, '_table', {'a': self.a})

        @cached_property
        def from_table(self):
            return self._table['a']

        @cached_property
        def constant(self):
            return 1

    obj = WithState(1.)
    obj.from_table, obj.constant  # noqa: B018
    new = replace(obj, a=obj.a)  # `a` is unchanged, but __post_init__ built a new `_table`
    assert set(cached_values(new)) == {'constant'}
    assert new.from_table == 1.


CLASSES = {(k, f): make_class(kind, f) for k, kind in KINDS.items() for f in (True, False)}


@settings(max_examples=40, deadline=None)
@given(changed=st.sets(st.sampled_from(['a', 'b', 'scale'])), accessed=st.sets(st.sampled_from(
    [*READS_A, 'inner_cached', 'only_b', *UNSURE])), kind=st.sampled_from(list(KINDS)), frozen=st.booleans(),
    seed=st.integers(0, 100))
def test_replace_never_returns_a_stale_value(changed, accessed, kind, frozen, seed):
    Sim = CLASSES[kind, frozen]
    obj = Sim(field(seed), field(seed + 1))
    for name in accessed:
        getattr(obj, name)
    new_values = {'a': field(seed + 2), 'b': field(seed + 3), 'scale': 5.0}
    changes = {name: new_values[name] for name in changed}
    new = replace(obj, **changes)
    for name, value in cached_values(new).items():
        deps = property_dependencies(Sim, name)
        assert deps is not ALL or not changed, name
        assert deps is ALL or deps.isdisjoint(changed), name
        assert value is getattr(obj, name)
    fresh = Sim(**{'a': obj.a, 'b': obj.b, 'scale': obj.scale, **changes})
    assert_same_values(compute_all(new), compute_all(fresh))


def test_tree_stack_carries_lazyphi_cached_tensors():
    Sim = CLASSES['lazyphi', True]
    objs = [Sim(field(i), field(i + 1)) for i in range(3)]
    for o in objs:
        o.only_b  # noqa: B018
    stacked = math.stack(objs, batch('b'))
    assert 'only_b' in cached_values(stacked)
    assert stacked.only_b.shape.names == ('b', 'x')
