"""The engine's layer contract, checked from the source (ast), so CI fails on a violation.

Rules (docs/ARCHITECTURE.md explains them):
- Every module belongs to one layer; a module may import only from its own layer or lower
  ones. Every import statement counts, including those inside functions, so a dependency
  cannot hide from the check the way it can hide from a reader.
- Nothing outside engine/gl imports moderngl, moderngl_window or glcontext (the lab may
  import moderngl_window, a peer it measures in the context `Device.lend_context` lends),
  reaches into a device's private GL parts (`_ctx`, `_raw`, `_alloc`, `_thread`, or
  `.ctx` / `.raw` of a device), or calls a raw GL entry point (`glSomething(...)`); the lab's
  raw-GL probes (LAB_RAW_GL_PROBES, driver measurements by design) excepted.
- The two streaming executors are wings that never import each other: whole levels
  (engine.streaming.levels) and virtual textures (engine.streaming.virtual); what both use
  lives in engine.streaming itself.
- No `importlib.import_module("a.literal.name")`: a name known when the code is written is a
  plain import, which this check (and a reader) can see.
- The repository's lab (lab/: benchmarks, baselines, peers, the soak harness) sits above the
  product: nothing in engine imports it, and it imports only the engine's public names (no
  `from engine.x import _private`), so it can live outside the wheel.
- The import graph of the engine's modules has no cycle inside a layer either (layer order
  rules out the cycles between layers). Every import counts, those inside functions
  included; only imports under `if TYPE_CHECKING:` (never run) are left out.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

#: Lowest first. Module name prefixes; the longest matching prefix decides a module's layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("engine.errors", "engine.formats", "engine.statedir"),
    ("engine.memory", "engine.inputs"),
    ("engine.textures",),
    ("engine.gl",),
    ("engine.streaming",),
    ("engine.science",),
    ("engine.resolution",),
    ("engine.render",),
    ("engine.diagnostics",),
    ("engine.app",),
    ("engine.hosts",),
    ("engine.testing", "engine.pytest_plugin", "engine.demos", "engine.cli",
     "engine.commands",
     "engine.view", "engine.cli_args", "engine.cli_process",
     "engine.__main__", "engine.shaders", "engine.assets"),
)
GL_ONLY_MODULES = ("moderngl", "moderngl_window", "glcontext")
#: GL libraries the lab measures against the engine (in a context the device lends it).
LAB_PEER_MODULES = ("moderngl_window",)
#: Lab modules that measure the driver's raw entry points themselves (sparse page commits,
#: which the engine's own code does not make page by page): they reach the raw table on purpose.
LAB_RAW_GL_PROBES = ("lab.vt_sparse_probe", "lab.peer_gl")
#: Packages of one layer that must not import each other.
WINGS: tuple[tuple[str, str], ...] = (("engine.streaming.levels", "engine.streaming.virtual"),)
PRIVATE_GL_ATTRS = ("_ctx", "_raw", "_alloc", "_thread")
DEVICE_NAMES = ("device", "dev", "_device")


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line}: {self.message}"


def layer_of(module: str) -> int | None:
    """Index of the module's layer; None for the package root (`engine`), which only re-exports
    names lazily and so imports nothing at import time."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    return None if best is None else best[0]


def module_name(root: Path, path: Path, mapped: dict[str, str]) -> str:
    """Dotted module name of `path`; `mapped` maps folders outside engine/ (demos/, shaders/,
    assets/) to the package names the build gives them."""
    rel = path.relative_to(root)
    top = rel.parts[0]
    parts = list(rel.with_suffix("").parts)
    if top in mapped:
        parts = mapped[top].split(".") + parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, is_package: bool, tree: ast.AST) -> list[tuple[str, int]]:
    """Every module this one imports, anywhere in the file, with the line."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node)
            out.append((target, node.lineno))
            # `from engine import render` imports a subpackage: count it as that module.
            for alias in node.names:
                out.append((f"{target}.{alias.name}", node.lineno))
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (typing-only: never executed)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt)
                           if isinstance(n, (ast.Import, ast.ImportFrom)))
    return out


def literal_import_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """`importlib.import_module("name")` (or a bare `import_module("name")`) calls whose
    name is a string literal, with the line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            f = node.func
            named = (isinstance(f, ast.Attribute) and f.attr == "import_module") or \
                (isinstance(f, ast.Name) and f.id == "import_module")
            arg = node.args[0]
            if named and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((node.lineno, arg.value))
    return found


def import_graph(modules: dict[str, ast.AST], packages: set[str]) -> dict[str, set[str]]:
    """module -> the engine modules it imports (run-time imports only: see the rules). An
    import of a higher layer is left out: it is a violation of its own, and without such
    edges a cycle can only lie inside one layer."""
    graph: dict[str, set[str]] = {}
    for module, tree in modules.items():
        skip = _type_checking_only(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, module in packages, node)
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in modules:
                        edges.add(sub)
                    elif target in modules:
                        edges.add(target)
        edges.discard(module)
        own = layer_of(module)
        graph[module] = {e for e in edges if own is None or (layer_of(e) or 0) <= own}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _is_device(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in DEVICE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in DEVICE_NAMES


def gl_access(tree: ast.AST) -> list[tuple[int, str]]:
    """Raw GL reached from outside engine/gl: private device parts, `.ctx`/`.raw` of a device,
    or a call to a gl* entry point."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in PRIVATE_GL_ATTRS:
                found.append((node.lineno, f"reaches into the device's private '{node.attr}'"))
            elif node.attr in ("ctx", "raw") and _is_device(node.value):
                found.append((node.lineno, f"uses the device's '{node.attr}'"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            if len(name) > 2 and name.startswith("gl") and name[2].isupper():
                found.append((node.lineno, f"calls raw GL entry point {name}"))
    return found


def check_tree(root: Path, mapped: dict[str, str] | None = None) -> list[Violation]:
    """All violations under `root` (a checkout: engine/ plus the mapped folders)."""
    mapped = mapped if mapped is not None else {"demos": "engine.demos",
                                                "shaders": "engine.shaders",
                                                "assets": "engine.assets"}
    files = sorted((root / "engine").rglob("*.py")) + sorted((root / "lab").rglob("*.py"))
    for folder in mapped:
        if (root / folder).is_dir():
            files += sorted((root / folder).rglob("*.py"))
    violations: list[Violation] = []
    parsed: dict[str, ast.AST] = {}
    packages: set[str] = set()
    for path in files:
        module = module_name(root, path, mapped)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parsed[module] = tree
        if path.name == "__init__.py":
            packages.add(module)
        violations += [Violation(module, line, f"imports {name!r} through "
                                 "importlib.import_module with a literal name (use an import)")
                       for line, name in literal_import_modules(tree)]
        own = layer_of(module)
        in_gl = module == "engine.gl" or module.startswith("engine.gl.")
        for target, line in imports_of(module, path.name == "__init__.py", tree):
            top = target.split(".")[0]
            if top == "lab" and own is not None:
                violations.append(Violation(module, line, f"imports {target}: the engine never "
                                            "imports the lab"))
            if top == "engine" and module.split(".")[0] == "lab" and \
                    target.rsplit(".", 1)[-1].startswith("_"):
                violations.append(Violation(module, line, f"imports {target}: the lab uses "
                                            "the engine's public names only"))
            lab_peer = top in LAB_PEER_MODULES and module.split(".")[0] == "lab"
            if top in GL_ONLY_MODULES and not in_gl and not lab_peer:
                violations.append(Violation(module, line, f"imports {target} outside engine/gl"))
            if top != "engine" or own is None:
                continue
            for wing in WINGS:
                for mine, other in (wing, wing[::-1]):
                    if _within(module, mine) and _within(target, other):
                        violations.append(Violation(module, line, f"imports {target}: {mine} "
                                                    f"and {other} do not import each other"))
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                violations.append(Violation(
                    module, line, f"imports {target} from a higher layer "
                    f"({' / '.join(LAYERS[theirs])} above {' / '.join(LAYERS[own])})"))
        if not in_gl and module not in LAB_RAW_GL_PROBES:
            violations += [Violation(module, line, msg) for line, msg in gl_access(tree)]
    for comp in cycles(import_graph(parsed, packages)):
        violations.append(Violation(comp[0], 0, "import cycle: " + " <-> ".join(comp)))
    return violations
