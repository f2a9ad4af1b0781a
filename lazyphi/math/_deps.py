"""Which attributes of an instance a cached property reads, found from its code.

`replace`, `copy_and_mutate` and the parallel planner keep a cached value only while nothing it
was computed from has changed, so the answer must never miss a dependency: a missed one returns
a stale value. The analysis reads the property's source with `ast` (its bytecode with `dis`
where there is no source) and collects every `self.<name>` it finds, including inside nested
functions, lambdas and comprehensions. A name that resolves to a method or a plain `property`
of the class is followed into that function, a `super().<name>` into the base class's version,
a name that resolves to another cached property is recorded as such (and followed later, for
the transitive answer).

Wherever the code could reach the instance in a way the analysis cannot follow, the answer is
`ALL`: `self` passed to any function other than `type`, `isinstance`, `getattr` / `hasattr`
with a constant name; `self` stored, returned, rebound or used in an expression (`self[i]`,
`f'{self}'`, `self == x`); `self.__dict__`; assignments to `self.<name>`; `getattr` with a
computed name; decorators other than the one creating the property; wrapped functions;
descriptors of unknown kinds; attributes missing from the class when it defines `__getattr__`;
a class that overrides `__getattribute__`.

Results are cached per class and property. Classes are analysed as they are at the first
question; changing a class's methods afterwards is not seen.
"""

import abc
import ast
import builtins
import dataclasses
import dis
import inspect
import textwrap
import types
import typing
import weakref
from typing import Any, NamedTuple

from ._properties import CACHED_PROPERTY_TYPES, cached_property_names, class_attribute, is_cached_property


class _AllType:
    """Type of `ALL`: the answer when a property may read any attribute of the instance."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return 'ALL'

    def __reduce__(self):
        return _AllType, ()


ALL = _AllType()


class DirectDependencies(NamedTuple):
    """What one cached property reads itself, through helper methods and plain properties.

    Attributes:
        attributes: names of fields, instance attributes, methods, properties and class constants read.
        cached: names of other cached properties read; what those read is not included.
    """
    attributes: frozenset
    cached: frozenset


class _Unsure(Exception):
    """Raised inside the analysis when the code may read attributes that cannot be listed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# cls -> {property name -> DirectDependencies or _Unsure}; and -> {name -> frozenset or ALL}
_DIRECT: 'weakref.WeakKeyDictionary[type, dict]' = weakref.WeakKeyDictionary()
_TRANSITIVE: 'weakref.WeakKeyDictionary[type, dict]' = weakref.WeakKeyDictionary()
_SOURCE_NODES: 'weakref.WeakKeyDictionary[types.FunctionType, Any]' = weakref.WeakKeyDictionary()
_SAFE_BUILTINS = frozenset({'type', 'isinstance'})  # receive self without reading its attributes
_NAMED_READS = frozenset({'getattr', 'hasattr'})  # read one attribute, given by name
_CELL_OPS = frozenset({'LOAD_CLOSURE', 'MAKE_CELL'})  # hand self to a nested function, which is analysed too
_VARIABLE_LOADS = frozenset({'LOAD_FAST', 'LOAD_FAST_CHECK', 'LOAD_DEREF', 'LOAD_CLASSDEREF'})
_ATTRIBUTE_LOADS = frozenset({'LOAD_ATTR', 'LOAD_METHOD'})
# decorators that return the function they decorate unchanged
_PASS_THROUGH_DECORATORS = tuple(d for d in (abc.abstractmethod, typing.final, typing.no_type_check,
                                             getattr(typing, 'override', None)) if d is not None)


# --- public functions ----------------------------------------------------------------------------


def direct_dependencies(cls: type, prop) -> DirectDependencies | _AllType:
    """The attributes and cached properties a property reads, not following other cached properties.

    Args:
        cls: the class (or an instance of it) whose version of the property to analyse.
        prop: the attribute name, or the descriptor itself (e.g. `MyClass.my_property`): a cached
            property, a plain `property` or a method.

    Returns:
        `DirectDependencies`, or `ALL` when the code may read attributes the analysis cannot list.

    Raises:
        ValueError: `cls` has no cached property, property or method `prop`.
    """
    cls = cls if isinstance(cls, type) else type(cls)
    name = _attribute_name(cls, prop)
    results = _DIRECT.setdefault(cls, {})
    result = results.get(name)
    if result is None:
        result = results[name] = _analyse(cls, name)
    return ALL if isinstance(result, _Unsure) else result


def property_dependencies(cls: type, prop) -> frozenset | _AllType:
    """Every attribute a cached property reads, directly or through other cached properties.

    Args:
        cls: the class (or an instance of it) whose version of the property to analyse.
        prop: the attribute name or the descriptor, as in `direct_dependencies`.

    Returns:
        The names of the fields, instance attributes, methods, properties and cached properties
        read, as a frozenset; or `ALL` when any of them may read something the analysis cannot list.
    """
    cls = cls if isinstance(cls, type) else type(cls)
    results = _TRANSITIVE.get(cls)
    if results is None:
        results = _TRANSITIVE.setdefault(cls, {})
    result = results.get(prop) if isinstance(prop, str) else None  # keyed by name: a descriptor may refer to cls
    if result is None:
        name = _attribute_name(cls, prop)
        result = results.get(name)
        if result is None:
            result = results[name] = _closure(cls, name)
    return result


def explain_dependencies(cls: type, prop) -> str:
    """A sentence saying what a property depends on, or why the analysis gave up and answered `ALL`."""
    cls = cls if isinstance(cls, type) else type(cls)
    name = _attribute_name(cls, prop)
    for dependency in _dependency_order(cls, name):
        direct_dependencies(cls, dependency)
        reason = _DIRECT[cls][dependency]
        if isinstance(reason, _Unsure):
            via = '' if dependency == name else f' (through the cached property {dependency!r})'
            return f"{cls.__qualname__}.{name} depends on all attributes{via}: {reason.reason}"
    reads = sorted(property_dependencies(cls, name))
    return f"{cls.__qualname__}.{name} reads {', '.join(reads) if reads else 'no attribute'}"


# --- resolution of names and the transitive closure ----------------------------------------------


def _attribute_name(cls: type, prop) -> str:
    if isinstance(prop, str):
        name = prop
    else:
        name = next((n for klass in cls.__mro__ for n, v in vars(klass).items() if v is prop), None)
        if name is None:
            raise ValueError(f"{prop!r} is not an attribute of {cls.__qualname__}")
    _, value = class_attribute(cls, name)
    if not (is_cached_property(value) or isinstance(value, (property, types.FunctionType))):
        raise ValueError(f"{cls.__qualname__} has no cached property, property or method {name!r}; its cached "
                         f"properties are {sorted(cached_property_names(cls))}")
    return name


def _dependency_order(cls: type, name: str) -> list:
    """`name` followed by the cached properties it reaches, breadth first, each once."""
    order, seen = [name], {name}
    for current in order:
        result = direct_dependencies(cls, current)
        if result is ALL:
            continue
        for dependency in sorted(result.cached - seen):
            seen.add(dependency)
            order.append(dependency)
    return order


def _closure(cls: type, name: str) -> frozenset | _AllType:
    names = set()
    for current in _dependency_order(cls, name):
        result = direct_dependencies(cls, current)
        if result is ALL:
            return ALL
        names |= result.attributes | result.cached
    names.discard(name)
    return frozenset(names)


def _analyse(cls: type, name: str) -> DirectDependencies | _Unsure:
    try:
        analysis = _Analysis(cls)
        owner, value = class_attribute(cls, name)
        if is_cached_property(value):
            analysis.function(value.func, owner, entry=True)
        elif isinstance(value, property):
            analysis.property(value, owner, name, entry=True)
        else:
            analysis.function(value, owner, entry=True)
    except _Unsure as unsure:
        return _Unsure(unsure.reason)  # a fresh one, without the traceback that holds the frames (and cls)
    except RecursionError:
        return _Unsure('the code is nested too deeply to analyse')
    analysis.cached.discard(name)
    return DirectDependencies(frozenset(analysis.attributes - analysis.cached), frozenset(analysis.cached))


# --- the analysis --------------------------------------------------------------------------------


class _Analysis:
    """Collects what functions called with an instance of `cls` as first argument read from it."""

    def __init__(self, cls: type):
        self.cls = cls
        self.fields = frozenset(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else ()
        self.attributes: set = set()
        self.cached: set = set()
        self.visited: set = set()  # code objects already analysed
        custom = [k for k in cls.__mro__[:-1] if '__getattribute__' in vars(k)]
        if custom:
            raise _Unsure(f"{custom[0].__qualname__} overrides __getattribute__, so any attribute read may run code")
        self.dynamic = next((k for k in cls.__mro__[:-1] if '__getattr__' in vars(k)), None)

    # --- attributes ---

    def read(self, name: str, after: type | None = None) -> None:
        """Record a read of `self.<name>` (or of `super().<name>` when `after` is the class super() starts past)."""
        if name == '__class__':
            return
        if name == '__dict__':
            raise _Unsure('it reads self.__dict__')
        if after is None and name in self.fields:
            self.attributes.add(name)
            return
        owner, value = class_attribute(self.cls, name, after)
        if owner is None:
            if self.dynamic is not None:
                raise _Unsure(f"self.{name} is not a class attribute, and {self.dynamic.__qualname__} defines "
                              f"__getattr__, which may compute it from anything")
            self.attributes.add(name)  # an instance attribute, set in __init__ or __post_init__
            return
        if is_cached_property(value):
            if after is None:
                self.cached.add(name)
            else:  # super().name runs the base class's function directly, bypassing this class's cache slot
                self.attributes.add(name)
                self.function(value.func, owner)
            return
        self.attributes.add(name)
        if isinstance(value, property):
            self.property(value, owner, name)
        elif isinstance(value, types.FunctionType):
            self.function(value, owner)
        elif isinstance(value, (staticmethod, classmethod, types.MemberDescriptorType)):
            pass  # no access to the instance, or a slot holding an instance attribute
        elif owner is object:
            raise _Unsure(f"it uses self.{name}, inherited from object, which may read every attribute")
        elif hasattr(type(value), '__get__'):
            raise _Unsure(f"self.{name} is a {type(value).__qualname__} descriptor, whose reads are unknown")

    def property(self, prop: property, owner: type, name: str, entry: bool = False) -> None:
        if prop.fget is None:
            raise _Unsure(f"property {name!r} has no getter")
        self.function(prop.fget, owner, entry)

    # --- functions ---

    def function(self, func, owner: type, entry: bool = False) -> None:
        """Analyse `func`, called with the instance as its first argument; `owner` is the class holding it.

        `entry` marks the function of the cached property being analysed, whose one decorator made it.
        """
        if not isinstance(func, types.FunctionType):
            raise _Unsure(f"{func!r} is not a Python function, so its reads cannot be analysed")
        if hasattr(func, '__wrapped__'):
            raise _Unsure(f"{func.__qualname__} is wrapped by a decorator, which may do anything with self")
        code = func.__code__
        if code in self.visited:
            return
        self.visited.add(code)
        node = _source_node(func)
        if node is None:
            if code.co_argcount < 1:
                raise _Unsure(f"{func.__qualname__} takes no positional argument to receive self")
            self.bytecode(code, code.co_varnames[0], func)
        else:
            _SourceVisitor(self, func, node, owner, entry).run()

    def bytecode(self, code: types.CodeType, self_name: str, func) -> None:
        """Analyse compiled code in which the variable `self_name` holds the instance."""
        if 'super' in code.co_names:
            raise _Unsure(f"{func.__qualname__} has no source and calls super(), which the bytecode analysis "
                          f"does not follow")
        instructions = list(dis.get_instructions(code))
        for i, ins in enumerate(instructions):
            if ins.opcode not in dis.haslocal and ins.opcode not in dis.hasfree:
                continue
            if ins.argval != self_name and not (isinstance(ins.argval, tuple) and self_name in ins.argval):
                continue
            if ins.opname in _CELL_OPS:
                continue
            following = instructions[i + 1] if i + 1 < len(instructions) else None
            if ins.opname in _VARIABLE_LOADS and following is not None and following.opname in _ATTRIBUTE_LOADS:
                self.read(following.argval)
                continue
            raise _Unsure(f"{func.__qualname__} (no source, bytecode analysed) uses self in {ins.opname} followed by "
                          f"{following.opname if following else 'nothing'}, not only to read attributes")
        for const in code.co_consts:
            if isinstance(const, types.CodeType) and self_name in const.co_freevars:
                self.bytecode(const, self_name, func)


class _SourceVisitor:
    """Checks every use of `self` in one function's syntax tree (nested functions included)."""

    def __init__(self, analysis: _Analysis, func: types.FunctionType, node, owner: type, entry: bool):
        self.analysis = analysis
        self.entry = entry
        self.func = func
        self.node = node
        self.owner = _lexical_class(func) or owner
        self.class_name = _lexical_class_name(func)
        self.where = f"{func.__qualname__} ({func.__code__.co_filename}, line {func.__code__.co_firstlineno})"

    def unsure(self, why: str, node=None) -> _Unsure:
        line = f" at line {self.func.__code__.co_firstlineno + node.lineno - 1}" if hasattr(node, 'lineno') else ''
        return _Unsure(f"{self.where}{line}: {why}")

    def run(self) -> None:
        node = self.node
        self.check_decorators(node)
        positional = [*node.args.posonlyargs, *node.args.args]
        if not positional:
            raise self.unsure('it takes no positional argument to receive self')
        self_name = positional[0].arg
        parents = {}
        for parent in ast.walk(node):
            for child in ast.iter_child_nodes(parent):
                parents[child] = parent
        local_names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        local_names |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        self.local_names = local_names | set(self.func.__code__.co_freevars)
        for statement in node.body:
            for child in ast.walk(statement):
                if isinstance(child, ast.Name) and child.id == self_name:
                    self.use_of_self(child, parents, self_name)
                elif isinstance(child, ast.Call) and self.is_builtin(child.func, 'super'):
                    self.super_call(child, parents, self_name)

    def check_decorators(self, node) -> None:
        """Allow decorators of known kinds; the property's own function may also carry the one that made it."""
        decorators = node.decorator_list
        if self.entry and len(decorators) == 1:
            return  # it created the descriptor being analysed, e.g. @parallel_property(requires=...)
        for decorator in decorators:
            target = _resolve_expression(decorator.func if isinstance(decorator, ast.Call) else decorator,
                                         self.func.__globals__)
            if not _is_known_decorator(target):
                raise self.unsure(f"it is decorated with {ast.unparse(decorator)!r}, which may change what it "
                                  f"reads", decorator)

    def is_builtin(self, node, name: str) -> bool:
        """Whether `node` names the builtin `name`, not shadowed by a local, closure or global variable."""
        return (isinstance(node, ast.Name) and node.id == name and name not in self.local_names
                and name not in self.func.__globals__)

    def variable(self, name: str):
        """The value of a closure or global variable of the function, or None."""
        code = self.func.__code__
        if name in code.co_freevars and self.func.__closure__:
            try:
                return self.func.__closure__[code.co_freevars.index(name)].cell_contents
            except ValueError:  # an empty cell
                return None
        return None if name in self.local_names else self.func.__globals__.get(name)

    def use_of_self(self, node: ast.Name, parents: dict, self_name: str) -> None:
        if not isinstance(node.ctx, ast.Load):
            raise self.unsure('it assigns to the name self', node)
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            if not isinstance(parent.ctx, ast.Load):
                raise self.unsure(f'it assigns to or deletes self.{parent.attr}', parent)
            self.analysis.read(_mangle(parent.attr, self.class_name))
            return
        if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node and not parent.keywords:
            func = parent.func
            if any(self.is_builtin(func, n) for n in _SAFE_BUILTINS):
                return
            if any(self.is_builtin(func, n) for n in _NAMED_READS) and len(parent.args) in (2, 3):
                attribute = parent.args[1]
                if not (isinstance(attribute, ast.Constant) and isinstance(attribute.value, str)):
                    raise self.unsure(f'it calls {func.id}(self, ...) with a computed attribute name', parent)
                self.analysis.read(attribute.value)
                return
        if isinstance(parent, ast.Call) and self.is_builtin(parent.func, 'super') and len(parent.args) == 2 and \
                parent.args[1] is node:
            return  # checked in super_call
        raise self.unsure(f'self is used in {_describe(parent)}, which may read any attribute', node)

    def super_call(self, call: ast.Call, parents: dict, self_name: str) -> None:
        if call.keywords or len(call.args) not in (0, 2):
            raise self.unsure('it calls super() with unusual arguments', call)
        if call.args:
            first, second = call.args
            if not (isinstance(second, ast.Name) and second.id == self_name and isinstance(first, ast.Name)
                    and (first.id == '__class__' or self.variable(first.id) is self.owner)):
                raise self.unsure('it calls super() with arguments other than (its own class, self)', call)
        parent = parents.get(call)
        if not (isinstance(parent, ast.Attribute) and parent.value is call and isinstance(parent.ctx, ast.Load)):
            raise self.unsure('it uses super() other than to read one attribute', call)
        self.analysis.read(_mangle(parent.attr, self.class_name), after=self.owner)


def _is_known_decorator(target) -> bool:
    if isinstance(target, type):
        return issubclass(target, (property, staticmethod, classmethod, *CACHED_PROPERTY_TYPES))
    return any(target is known for known in _PASS_THROUGH_DECORATORS)


def _resolve_expression(node, namespace: dict):
    """The object a decorator expression made of names and attributes refers to, or None."""
    if isinstance(node, ast.Name):
        return namespace.get(node.id, getattr(builtins, node.id, None))
    if isinstance(node, ast.Attribute):
        base = _resolve_expression(node.value, namespace)
        return None if base is None else getattr(base, node.attr, None)
    return None


def _source_node(func: types.FunctionType):
    """The syntax tree of `func`'s definition, or None if its source is missing or does not match its code."""
    try:
        return _SOURCE_NODES[func]
    except KeyError:
        pass
    node = None
    code = func.__code__
    try:
        lines, _ = inspect.getsourcelines(func)
        tree = ast.parse(textwrap.dedent(''.join(lines)))
    except (OSError, TypeError, SyntaxError, ValueError):
        tree = None
    if tree is not None and tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        candidate = tree.body[0]
        arguments = candidate.args
        names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        expected = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if candidate.name == code.co_name and tuple(names) == expected:
            node = candidate  # otherwise the file changed since the function was compiled: use the bytecode
    _SOURCE_NODES[func] = node
    return node


def _lexical_class(func: types.FunctionType) -> type | None:
    """The class whose body defined `func`, from its `__class__` cell (present when it uses super())."""
    if '__class__' in func.__code__.co_freevars and func.__closure__:
        try:
            value = func.__closure__[func.__code__.co_freevars.index('__class__')].cell_contents
        except ValueError:  # the cell is still empty
            return None
        return value if isinstance(value, type) else None
    return None


def _lexical_class_name(func: types.FunctionType) -> str | None:
    """Name of the class whose body defined `func`, used by Python to mangle `__private` names."""
    parts = func.__qualname__.split('.')
    return parts[-2] if len(parts) >= 2 and parts[-2] != '<locals>' else None


def _mangle(name: str, class_name: str | None) -> str:
    if class_name and name.startswith('__') and not name.endswith('__'):
        stripped = class_name.lstrip('_')
        if stripped:
            return f'_{stripped}{name}'
    return name


def _describe(node) -> str:
    if isinstance(node, ast.Call):
        return f'a call of {ast.unparse(node.func)}()'
    text = ast.unparse(node) if node is not None else 'self'
    return f'the {type(node).__name__} expression {text[:80]!r}'
