"""The candidate under test as a private copy of its source: one file mutated, the reference untouched.

Theory of operation
-------------------
The candidate is ``rmqspec.impl:factory`` (the mmap broker) plus every ``rmqspec.model`` module it
imports for its rules (``lifecycle``, ``sendpath``, ``pullfilter``, ``subscriptions``, …);
``candidate_files`` finds that closure by reading the import statements, starting at
``impl/__init__.py``. ``build`` writes the closure under another package name,
``rmqspec_candidate`` (``DIR/site-packages/rmqspec_candidate/{impl,model}/…``), with the imports of
those modules rewritten to the copy, and exactly one file replaced by its mutated text. The
reference model (``rmqspec.model.broker.ModelBroker``, which the conformance machine builds) keeps
importing the pristine ``rmqspec`` package from the project's folders, so the two cannot share a
line of mutated code: the mutated text exists in one file of the copy, and no ``rmqspec`` module is
ever loaded from the copy.

What the two do share are the value types results are compared by — ``SHARED``: messages,
results, config, clock, events, protocol constants, ids. The copy imports those from the pristine
package (so lockstep's ``==`` compares like with like) and they are never mutated
(``find_modules`` refuses them).

``isolation_problems`` proves all of this at run time, after the candidate is loaded and before a
run counts: every ``rmqspec.*`` module was read from the project's folders, and none holds a
function whose code comes from the copy or any object of the copy; every ``rmqspec_candidate.*``
module was read from the copy; the copy's imports of ``rmqspec`` name ``SHARED`` modules only
(statically, every import statement; dynamically, every function, class and module its modules
hold); the mutated module is the copy's file with the mutated text, and its pristine twin still has
the pristine text. The worker refuses to run when the list is not empty.

Why ``site-packages`` in the copy's path: Hypothesis mixes literals of *local* modules into its
draws and treats a path containing ``/site-packages/`` as third-party. The copy is therefore not
mined, and the draws of a mutant's run are exactly those of ``rmqspec conform --broker
rmqspec.impl:factory`` (whose pool ``properties/constant_pool.pin`` fixes from the pristine modules).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = "rmqspec_candidate"
PROJECT = Path(__file__).resolve().parents[2]  # the pristine sources: PROJECT/impl, PROJECT/model, …
ENTRY = "impl/__init__.py"
SHARED = frozenset({"model/message.py", "model/results.py", "model/config.py", "model/clock.py",
                    "model/events.py", "model/protocol.py", "model/ids.py"})
FOLDERS = ("impl", "model")


class IsolationError(RuntimeError):
    """The candidate shares code with the reference, or the copy is not what was asked."""


def module_name(path: str, package: str = "rmqspec") -> str:
    """``impl/broker.py`` → ``rmqspec.impl.broker`` (``impl/__init__.py`` → ``rmqspec.impl``)."""
    dotted = path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
    return f"{package}.{dotted}"


def _path_of(module: str, root: Path) -> str | None:
    """``rmqspec.model.lifecycle`` → ``model/lifecycle.py`` when that file exists."""
    if not module.startswith("rmqspec."):
        return None
    rel = module.removeprefix("rmqspec.").replace(".", "/")
    for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
        if (root / candidate).is_file():
            return candidate
    return None


def _imports(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names) of every import statement (``import a.b`` gives ("a.b", ()))."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                raise IsolationError(f"relative import of {node.module!r}: the copy cannot rewrite it")
            out.append((node.module or "", tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out.extend((a.name, ()) for a in node.names)
    return out


def _targets(module: str, names: tuple[str, ...], root: Path) -> list[str]:
    """The files an import statement loads (a module, or submodules named in ``from pkg import``)."""
    found = [p for p in (_path_of(module, root),) if p is not None]
    for name in names:
        sub = _path_of(f"{module}.{name}", root)
        if sub is not None:
            found.append(sub)
    return found


def candidate_files(root: Path = PROJECT) -> dict[str, str]:
    """The candidate's closure (path → pristine text): ``impl/__init__.py`` and every ``impl`` or
    non-shared ``model`` module it imports, transitively. Package ``__init__`` files of ``model``
    are not part of it (the copy's ``model`` package is empty)."""
    files: dict[str, str] = {}
    todo = [ENTRY]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        files[path] = (root / path).read_text(encoding="utf-8")
        for module, names in _imports(files[path]):
            for target in _targets(module, names, root):
                if target not in SHARED and target != "model/__init__.py" and target.split("/")[0] in FOLDERS:
                    todo.append(target)
    return files


def _rewrite_pattern(files: dict[str, str]) -> re.Pattern[str]:
    dotted = sorted((module_name(p).removeprefix("rmqspec.") for p in files), key=len, reverse=True)
    return re.compile(r"\brmqspec\.(" + "|".join(re.escape(d) for d in dotted) + r")\b")


def rewrite(text: str, files: dict[str, str], package: str = PACKAGE) -> str:
    """Point the imports of copied modules at the copy (same lines, same line numbers)."""
    return _rewrite_pattern(files).sub(lambda m: f"{package}.{m.group(1)}", text)


def build(dest: Path, files: dict[str, str], mutated: tuple[str, str] | None = None,
          package: str = PACKAGE) -> Path:
    """Write the copy under ``dest/site-packages``; ``mutated``: (path, text) replacing one file.
    Returns the directory to put on ``sys.path``."""
    if mutated is not None and mutated[0] not in files:
        raise IsolationError(f"{mutated[0]} is not part of the candidate (shared, or not imported by it)")
    site = dest / "site-packages"
    pkg = site / package
    for folder in FOLDERS:
        (pkg / folder).mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""A private copy of the candidate broker (bench/power)."""\n')
    if "model/__init__.py" not in files:
        (pkg / "model" / "__init__.py").write_text("")
    for path, text in files.items():
        if mutated is not None and path == mutated[0]:
            text = mutated[1]
        (pkg / path).write_text(rewrite(text, files, package), encoding="utf-8")
    return site


def load(site: Path, package: str = PACKAGE) -> Callable[..., Any]:
    """Import the copy and return its broker factory (``impl.factory``)."""
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    impl = importlib.import_module(f"{package}.impl")
    return impl.factory


def unload(site: Path, package: str = PACKAGE) -> None:
    """Forget the copy (tests load several in one process)."""
    for name in [n for n in sys.modules if n == package or n.startswith(f"{package}.")]:
        del sys.modules[name]
    with_path = str(site)
    if with_path in sys.path:
        sys.path.remove(with_path)


# ---------------------------------------------------------------------------
# the isolation proof


def _under(path: str | None, root: Path) -> bool:
    if path is None:
        return False
    try:
        Path(path).resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def _functions_and_classes(mod: types.ModuleType) -> list[Any]:
    """Functions and classes a module holds (its own and imported ones), and their methods."""
    out: list[Any] = []
    for value in list(vars(mod).values()):
        if isinstance(value, (types.FunctionType, type)):
            out.append(value)
        if isinstance(value, type):
            for member in vars(value).values():
                member = getattr(member, "__func__", member)  # staticmethod / classmethod
                if isinstance(member, types.FunctionType):
                    out.append(member)
    return out


def _shared_module(name: str) -> bool:
    path = _path_of(name, PROJECT)
    return path in SHARED or name in ("rmqspec", "rmqspec.model")


def isolation_problems(site: Path, files: dict[str, str], mutated: tuple[str, str] | None = None,
                       package: str = PACKAGE, root: Path = PROJECT) -> list[str]:
    """Everything that breaks the isolation of the loaded copy at ``site`` from the reference
    (empty: isolated). ``files``: the candidate's pristine closure; ``mutated``: (path, text)."""
    problems: list[str] = []
    copy_root = site / package
    prefix = f"{package}."
    for name, mod in sorted(sys.modules.items()):
        file = getattr(mod, "__file__", None)
        if name == "rmqspec" or name.startswith("rmqspec."):
            if file is not None and (_under(file, copy_root) or not _under(file, root)):
                problems.append(f"pristine module {name} was loaded from {file}")
            for obj in _functions_and_classes(mod):
                owner = getattr(obj, "__module__", "") or ""
                if owner == package or owner.startswith(prefix):
                    problems.append(f"pristine module {name} holds {obj.__qualname__} of the copy ({owner})")
                code = getattr(inspect.unwrap(obj), "__code__", None)  # a decorator's wrapper: its target
                if code is not None and _under(code.co_filename, site):
                    problems.append(f"{name}.{obj.__qualname__} runs code of the copy ({code.co_filename})")
        elif name == package or name.startswith(prefix):
            if file is None or not _under(file, copy_root):
                problems.append(f"candidate module {name} was loaded from {file}, not the copy")
            for obj in _functions_and_classes(mod):
                owner = getattr(obj, "__module__", "") or ""
                if owner.startswith("rmqspec.") and not _shared_module(owner):
                    problems.append(f"candidate module {name} uses {owner}.{obj.__qualname__} of the reference")
            for value in vars(mod).values():
                if isinstance(value, types.ModuleType) and value.__name__.startswith("rmqspec.") \
                        and not _shared_module(value.__name__):
                    problems.append(f"candidate module {name} holds the reference's module {value.__name__}")
    for path in sorted(files):
        written = copy_root / path
        if not written.is_file():
            problems.append(f"{path} is missing from the copy")
            continue
        for module, _ in _imports(written.read_text(encoding="utf-8")):
            if (module == "rmqspec" or module.startswith("rmqspec.")) and not _shared_module(module):
                problems.append(f"{path} of the copy imports {module} of the reference")
    if f"{package}.impl" not in sys.modules:
        problems.append("the candidate (impl) is not loaded")
    if mutated is not None:
        path, text = mutated
        if (root / path).read_text(encoding="utf-8") == text:
            problems.append(f"the pristine {path} holds the mutated text")
        if (copy_root / path).read_text(encoding="utf-8") != rewrite(text, files, package):
            problems.append(f"the copy's {path} is not the mutated text")
        loaded = sys.modules.get(module_name(path, package))
        if loaded is None or not _under(getattr(loaded, "__file__", None), copy_root):
            problems.append(f"the mutated module {module_name(path, package)} is not loaded from the copy")
    return problems


# ---------------------------------------------------------------------------
# which definitions of a model module the candidate uses


def candidate_scope(files: dict[str, str]) -> dict[str, list[tuple[int, int]]]:
    """For each copied ``model`` module, the line ranges of the top-level definitions the candidate
    reaches (imported by name from an ``impl`` module, or used by one that is, transitively).
    Mutating the rest of such a module (the model's own tables, say) is not mutating the candidate."""
    trees = {p: ast.parse(t) for p, t in files.items()}
    top: dict[str, dict[str, ast.stmt]] = {}
    for path, tree in trees.items():
        names: dict[str, ast.stmt] = {}
        for stmt in tree.body:
            for n in _bound_names(stmt):
                names[n] = stmt
        top[path] = names
    wanted: set[tuple[str, str]] = set()
    todo: list[tuple[str, str]] = []

    def want(path: str, name: str) -> None:
        if path.startswith("model/") and (path, name) not in wanted and name in top.get(path, {}):
            wanted.add((path, name))
            todo.append((path, name))

    def imports_of(path: str, node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and sub.module:
                target = _path_of(sub.module, PROJECT)
                if target in files:
                    for alias in sub.names:
                        want(target, alias.name)

    for path, tree in trees.items():
        if path.startswith("impl/"):
            imports_of(path, tree)
    while todo:
        path, name = todo.pop()
        stmt = top[path][name]
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Name):
                want(path, sub.id)
        imports_of(path, trees[path])  # what the module needs from its siblings, conservatively
    ranges: dict[str, list[tuple[int, int]]] = {p: [] for p in files if p.startswith("model/")}
    for path, name in wanted:
        stmt = top[path][name]
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
        ranges[path].append((first, stmt.end_lineno or stmt.lineno))
    return {p: sorted(set(r)) for p, r in ranges.items()}


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []
