"""The mutation operators: where a source file can be broken, and how (``ast`` positions, text edits).

Theory of operation
-------------------
``find_mutants(module, text)`` parses one file and lists every site of every kind in ``KINDS``
as a ``Mutant``: a span of the file's text ``[start, end)`` (character offsets) and its
replacement. Applying a mutant is one splice of the pristine text, so its diff is the line it
changed and nothing else (the file is never re-printed by ``ast.unparse``). ``verify`` re-parses
the spliced text and checks that its syntax tree is exactly the tree the mutation meant (the
operator or node replaced, nothing else moved); a site whose splice cannot be proved that way is
dropped, never run.

What is not mutated: docstrings, type annotations, ``assert`` statements, ``raise`` statements
(their arguments are messages), f-strings, subscript indices and slices, and module-level or
``__init__`` field definitions (removing one is a crash, not a skipped write). Identical edits
reached twice (``if not x`` inverted and ``not x`` removed) count once. ``timing`` and ``unit``
apply to reads of names that look like times (``now``, ``*_ts``: ``TIME_POINT``) or durations
(``*_ms``: ``DURATION``) where they are compared, computed with, passed, stored or returned; a
``while`` condition is never replaced by ``True`` (an endless loop by construction).

Stable ids: ``Mutant.id`` is ``module:function:kind:digest``, the digest a hash of the module,
the enclosing function, the kind, the enclosing statement's text (whitespace collapsed), the
original and replacement snippets and the occurrence number among identical ones — no line
number, so an id survives edits elsewhere in the file (``equivalent.toml`` is keyed by it).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from collections import Counter

import attrs

# kind -> what it breaks (the report's legend)
KINDS: dict[str, str] = {
    "boundary": "comparison boundary moved (< <-> <=, > <-> >=)",
    "negate": "comparison negated (== <-> !=, < -> >=, in <-> not in, is <-> is not)",
    "invert_cond": "condition inverted (if c -> if not (c), not c -> c)",
    "drop_cond": "condition dropped (if c -> if True/False, a and b -> a)",
    "logic": "and <-> or",
    "constant": "integer constant off by one (k -> k+1, k-1)",
    "timing": "a time or duration off by 1 ms, halved or doubled (now -> now + 1, d -> d // 2)",
    "unit": "a duration read in the wrong unit (d -> d // 1000; 3_000 -> 3)",
    "arith": "arithmetic operator replaced (+ <-> -, * <-> //)",
    "skip_call": "a call statement skipped (a side effect: a write, a put, a persist)",
    "skip_assign": "a state write skipped (attribute/subscript/augmented assignment, del)",
    "bool_flip": "True <-> False",
}

_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_NEGATE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE,
           ast.GtE: ast.Lt, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_CMP_TEXT = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
             ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult}
_BIN_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}
# names of times (points) and durations; a duration table (delay_levels_ms) is not a scalar
TIME_POINT = re.compile(r"^(now|.*_ts|.*timestamp|due|deliver_due|last_update|last_persist)$")
DURATION = re.compile(r"^(?!.*levels).*(_ms|_hours|_seconds)$|^(delay|timeout|interval)$")


@attrs.frozen
class Mutant:
    """One edit of one file: ``text[start:end]`` (``original``) becomes ``replacement``."""

    module: str  # path relative to the project root, e.g. "impl/broker.py"
    function: str  # qualified name of the enclosing function or class, "<module>" at top level
    kind: str
    line: int  # first and last line of the replaced span (1-based)
    end_line: int
    start: int
    end: int
    original: str
    replacement: str
    stmt_lines: tuple[int, int]  # the enclosing statement (its header for a compound one)
    context: str  # that statement's text, whitespace collapsed (for the id)
    ordinal: int = 0

    @property
    def id(self) -> str:
        key = "|".join((self.module, self.function, self.kind, self.context, self.original,
                        self.replacement, str(self.ordinal)))
        digest = hashlib.sha1(key.encode()).hexdigest()[:10]
        return f"{self.module.removesuffix('.py')}:{self.function}:{self.kind}:{digest}"

    def apply(self, text: str) -> str:
        if text[self.start:self.end] != self.original:
            raise ValueError(f"{self.id}: the file changed since the mutant was found")
        return text[:self.start] + self.replacement + text[self.end:]

    def diff(self, text: str) -> str:
        """The unified diff of the changed lines (no context)."""
        before = text.splitlines(keepends=True)
        after = self.apply(text).splitlines(keepends=True)
        lines = difflib.unified_diff(before, after, f"a/{self.module}", f"b/{self.module}", n=0)
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "module": self.module, "function": self.function, "kind": self.kind,
                "line": self.line, "original": self.original, "replacement": self.replacement}


# ---------------------------------------------------------------------------
# finding sites


@attrs.frozen
class _Where:
    scope: str
    stmt_lines: tuple[int, int]
    context: str


class _Finder:
    def __init__(self, module: str, text: str) -> None:
        self.module = module
        self.text = text
        self.raw_lines = text.splitlines(keepends=True)
        self.line_start = [0]
        for line in self.raw_lines:
            self.line_start.append(self.line_start[-1] + len(line))
        self.found: list[Mutant] = []
        self.seen: set[tuple[int, int, str]] = set()

    # positions ------------------------------------------------------------

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of (line, UTF-8 byte column), as ``ast`` reports positions."""
        line = self.raw_lines[lineno - 1]
        return self.line_start[lineno - 1] + len(line.encode()[:col].decode(errors="replace"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.line_start) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_start[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def add(self, where: _Where, kind: str, start: int, end: int, replacement: str) -> None:
        key = (start, end, replacement)
        original = self.text[start:end]
        if key in self.seen or original == replacement:
            return
        self.seen.add(key)
        self.found.append(Mutant(self.module, where.scope, kind, self.line_of(start),
                                 self.line_of(max(start, end - 1)), start, end, original, replacement,
                                 where.stmt_lines, where.context))

    def add_node(self, where: _Where, kind: str, node: ast.AST, replacement: str) -> None:
        start, end = self.span(node)
        self.add(where, kind, start, end, replacement)

    def operator_between(self, left: ast.AST, right: ast.AST, token: str) -> tuple[int, int] | None:
        """The span of the operator ``token`` between two operands (brackets, spaces around)."""
        a = self.span(left)[1]
        b = self.span(right)[0]
        gap = self.text[a:b]
        words = token.split()
        pattern = r"\s+".join(re.escape(w) for w in words)
        if token[0].isalpha():
            pattern = rf"(?<![\w.]){pattern}(?!\w)"
        hits = list(re.finditer(pattern, gap))
        rest = re.sub(pattern, "", gap)
        if len(hits) != 1 or re.sub(r"[\s()\\]", "", rest):
            return None
        return a + hits[0].start(), a + hits[0].end()

    # statements -------------------------------------------------------------

    def where(self, stmt: ast.stmt, scope: str) -> _Where:
        body = getattr(stmt, "body", None)
        if isinstance(body, list) and body and not isinstance(stmt, ast.Lambda):
            first = min(getattr(b, "lineno", stmt.lineno) for b in body)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.decorator_list:
                first = max(first, stmt.lineno + 1)
            last = max(stmt.lineno, first - 1)
        else:
            last = stmt.end_lineno or stmt.lineno
        header = "".join(self.raw_lines[stmt.lineno - 1:last])
        return _Where(scope, (stmt.lineno, last), " ".join(header.split()))

    def body(self, stmts: list[ast.stmt], scope: str, in_function: bool, in_init: bool) -> None:
        for i, s in enumerate(stmts):
            if i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) \
                    and isinstance(s.value.value, str):
                continue  # docstring
            self.stmt(s, scope, in_function, in_init)

    def stmt(self, s: ast.stmt, scope: str, in_function: bool, in_init: bool) -> None:
        w = self.where(s, scope)
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in [*s.args.defaults, *(k for k in s.args.kw_defaults if k is not None)]:
                self.expr(d, w, s)
            inner = s.name if scope == "<module>" else f"{scope}.{s.name}"
            self.body(s.body, inner, True, s.name == "__init__")
        elif isinstance(s, ast.ClassDef):
            inner = s.name if scope == "<module>" else f"{scope}.{s.name}"
            self.body(s.body, inner, False, False)
        elif isinstance(s, ast.If):
            self.condition(s.test, w, allow_true=True)
            self.expr(s.test, w, s)
            self.body(s.body, scope, in_function, in_init)
            self.body(s.orelse, scope, in_function, in_init)
        elif isinstance(s, ast.While):
            self.condition(s.test, w, allow_true=False)
            self.expr(s.test, w, s)
            self.body(s.body, scope, in_function, in_init)
            self.body(s.orelse, scope, in_function, in_init)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter, w, s)
            self.body(s.body, scope, in_function, in_init)
            self.body(s.orelse, scope, in_function, in_init)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.expr(item.context_expr, w, s)
            self.body(s.body, scope, in_function, in_init)
        elif isinstance(s, ast.Try):
            self.body(s.body, scope, in_function, in_init)
            for h in s.handlers:
                self.body(h.body, scope, in_function, in_init)
            self.body(s.orelse, scope, in_function, in_init)
            self.body(s.finalbody, scope, in_function, in_init)
        elif isinstance(s, ast.Expr):
            if in_function and isinstance(s.value, ast.Call):
                self.add_node(w, "skip_call", s, "pass")
            self.expr(s.value, w, s)
        elif isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.assignment(s, w, in_function, in_init)
        elif isinstance(s, ast.Delete):
            if in_function:
                self.add_node(w, "skip_assign", s, "pass")
        elif isinstance(s, ast.Return) and s.value is not None:
            self.expr(s.value, w, s)
        # Raise, Assert, Import, Pass, Break, Continue, Global: nothing to mutate

    def assignment(self, s: ast.Assign | ast.AnnAssign | ast.AugAssign, w: _Where, in_function: bool,
                   in_init: bool) -> None:
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        value = s.value
        if value is None:
            return
        writes_state = all(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets)
        first_definition = in_init and all(isinstance(t, ast.Attribute) for t in targets)
        if in_function and (isinstance(s, ast.AugAssign) or (writes_state and not first_definition)):
            self.add_node(w, "skip_assign", s, "pass")
        if isinstance(s, ast.AugAssign) and type(s.op) in _ARITH:
            # the operator sits between the target and the value: "x += 1" -> "x -= 1"
            a, b = self.span(s.target)[1], self.span(value)[0]
            gap = self.text[a:b]
            token = _BIN_TEXT[type(s.op)] + "="
            if gap.count(token) == 1:
                i = a + gap.index(token)
                self.add(w, "arith", i, i + len(token), _BIN_TEXT[_ARITH[type(s.op)]] + "=")
        self.expr(value, w, s)

    # conditions -------------------------------------------------------------

    def condition(self, test: ast.expr, w: _Where, *, allow_true: bool) -> None:
        """A branch's test: inverted, and replaced by a constant (the guard dropped)."""
        single_compare = isinstance(test, ast.Compare) and len(test.ops) == 1  # 'negate' covers it
        if not single_compare and not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
            start, end = self.span(test)
            self.add(w, "invert_cond", start, end, f"not ({self.text[start:end]})")
        if allow_true:
            self.add_node(w, "drop_cond", test, "True")
        self.add_node(w, "drop_cond", test, "False")

    # expressions ------------------------------------------------------------

    def expr(self, node: ast.expr, w: _Where, parent: ast.AST) -> None:
        if isinstance(node, (ast.JoinedStr, ast.Lambda)):
            return
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                text = _CMP_TEXT[type(op)]
                where = self.operator_between(operands[i], operands[i + 1], text)
                if where is None:
                    continue
                if type(op) in _BOUNDARY:
                    self.add(w, "boundary", *where, _CMP_TEXT[_BOUNDARY[type(op)]])
                self.add(w, "negate", *where, _CMP_TEXT[_NEGATE[type(op)]])
        elif isinstance(node, ast.BoolOp):
            self.boolop(node, w)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            start, end = self.span(node)
            self.add(w, "invert_cond", start, end, self.text[slice(*self.span(node.operand))]
                     if not _needs_parens(node.operand) else f"({self.text[slice(*self.span(node.operand))]})")
        elif isinstance(node, ast.IfExp):
            self.condition(node.test, w, allow_true=True)
        elif isinstance(node, ast.BinOp):
            self.binop(node, w)
        elif isinstance(node, ast.Constant):
            self.constant(node, w, parent)
            return
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if isinstance(node.ctx, ast.Load) and _uses_time(parent, node):
                self.timing(node, name, w)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            for gen in node.generators:
                for cond in gen.ifs:
                    self.add_node(w, "drop_cond", cond, "True")
        elif isinstance(node, ast.Subscript):
            self.expr(node.value, w, node)
            return  # indices and slices are not mutated
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, w, node)
            elif isinstance(child, ast.keyword):
                self.expr(child.value, w, node)
            elif isinstance(child, ast.comprehension):
                self.expr(child.iter, w, node)
                for cond in child.ifs:
                    self.expr(cond, w, node)

    def bracketed(self, node: ast.AST, within: tuple[int, int]) -> tuple[int, int]:
        """``node``'s span with the brackets that enclose it alone (``(a)`` of ``(a) or b``)."""
        start, end = self.span(node)
        while True:
            a = start - 1
            while a > within[0] and self.text[a].isspace():
                a -= 1
            b = end
            while b < within[1] - 1 and self.text[b].isspace():
                b += 1
            if a < within[0] or b >= within[1] or self.text[a] != "(" or self.text[b] != ")":
                return start, end
            start, end = a, b + 1

    def boolop(self, node: ast.BoolOp, w: _Where) -> None:
        start, end = self.span(node)
        spans = [self.bracketed(v, (start, end)) for v in node.values]
        for i in range(len(spans)):
            if i == 0:
                cut = (spans[0][0], spans[1][0])
            else:
                cut = (spans[i - 1][1], spans[i][1])
            text = self.text[start:cut[0]] + self.text[cut[1]:end]
            self.add(w, "drop_cond", start, end, text)
        word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        pieces = [self.text[start:spans[0][1]]]
        for i in range(1, len(spans)):
            gap = self.text[spans[i - 1][1]:spans[i][0]]
            if len(re.findall(rf"\b{word}\b", gap)) != 1:
                return
            pieces.append(re.sub(rf"\b{word}\b", other, gap))
            pieces.append(self.text[spans[i][0]:spans[i][1]])
        pieces.append(self.text[spans[-1][1]:end])
        self.add(w, "logic", start, end, "".join(pieces))

    def binop(self, node: ast.BinOp, w: _Where) -> None:
        if type(node.op) not in _ARITH or _non_numeric(node.left) or _non_numeric(node.right):
            return
        where = self.operator_between(node.left, node.right, _BIN_TEXT[type(node.op)])
        if where is not None:
            self.add(w, "arith", *where, _BIN_TEXT[_ARITH[type(node.op)]])

    def constant(self, node: ast.Constant, w: _Where, parent: ast.AST) -> None:
        value = node.value
        if isinstance(value, bool):
            self.add_node(w, "bool_flip", node, str(not value))
        elif isinstance(value, int):
            text = self.text[slice(*self.span(node))]  # -1: the literal changes, the sign stays
            for k in (value + 1, value - 1) if value > 0 else (value + 1,):
                self.add_node(w, "constant", node, _int_text(k, text))
            if value >= 1000 and value % 1000 == 0:
                self.add_node(w, "unit", node, _int_text(value // 1000, text))

    def timing(self, node: ast.Name | ast.Attribute, name: str, w: _Where) -> None:
        text = self.text[slice(*self.span(node))]
        if TIME_POINT.match(name):
            self.add_node(w, "timing", node, f"({text} + 1)")
            self.add_node(w, "timing", node, f"({text} - 1)")
        elif DURATION.match(name):
            self.add_node(w, "timing", node, f"({text} // 2)")
            self.add_node(w, "timing", node, f"({text} + 1)")
            self.add_node(w, "unit", node, f"({text} // 1000)")


def node_span(module: str, text: str, node: ast.AST) -> tuple[int, int]:
    """The character span of a node of ``ast.parse(text)``."""
    return _Finder(module, text).span(node)


def _needs_parens(node: ast.expr) -> bool:
    return isinstance(node, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr))


def _non_numeric(node: ast.expr) -> bool:
    """Operands that make ``+`` a concatenation or ``*`` a repetition."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    return isinstance(node, (ast.JoinedStr, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp))


def _int_text(value: int, like: str) -> str:
    if like.lower().startswith("0x"):
        return hex(value)
    if like.lower().startswith("0o"):
        return oct(value)
    if "_" in like:
        return f"{value:_}"
    return str(value)


def _uses_time(parent: ast.AST, node: ast.expr) -> bool:
    """A time read where it is used: compared, in arithmetic, passed, stored or returned."""
    if isinstance(parent, ast.Call):
        return node is not parent.func
    return isinstance(parent, (ast.Compare, ast.BinOp, ast.Assign, ast.AnnAssign, ast.Return,
                               ast.keyword))


def find_mutants(module: str, text: str) -> list[Mutant]:
    """Every site of every kind in one file, in file order, with occurrence numbers."""
    finder = _Finder(module, text)
    finder.body(ast.parse(text).body, "<module>", False, False)
    found = sorted(finder.found, key=lambda m: (m.start, m.end, m.kind, m.replacement))
    counts: Counter[tuple[str, ...]] = Counter()
    out = []
    for m in found:
        key = (m.function, m.kind, m.context, m.original, m.replacement)
        out.append(attrs.evolve(m, ordinal=counts[key]))
        counts[key] += 1
    return out


# ---------------------------------------------------------------------------
# verification: the splice is exactly the mutation meant


def _strip(tree: ast.AST) -> str:
    return ast.dump(tree, annotate_fields=True, include_attributes=False)


def verify(mutant: Mutant, text: str) -> bool:
    """The mutated text parses, and differs from the pristine tree in the mutated span only:
    the pristine tree with the span's subtree replaced by the parsed replacement is the mutant's
    tree."""
    try:
        mutated = ast.parse(mutant.apply(text))
    except (SyntaxError, ValueError):
        return False
    expected = _expected_tree(mutant, text)
    return expected is not None and _strip(mutated) == _strip(expected)


def _expected_tree(mutant: Mutant, text: str) -> ast.AST | None:
    """The pristine tree with the mutation applied at the node level."""
    tree = ast.parse(text)
    finder = _Finder(mutant.module, text)
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            items = value if isinstance(value, list) else [value]
            for i, child in enumerate(items):
                if not isinstance(child, (ast.expr, ast.stmt)) or not hasattr(child, "end_lineno"):
                    continue
                if finder.span(child) == (mutant.start, mutant.end):
                    replaced = _replacement_node(mutant, child, isinstance(child, ast.stmt))
                    if replaced is None:
                        continue
                    if isinstance(value, list):
                        value[i] = replaced
                    else:
                        setattr(parent, field, replaced)
                    return tree
    # an operator token (comparison, arithmetic, and/or): swap it in the node that spans it
    return _operator_tree(mutant, tree, finder)


def _replacement_node(mutant: Mutant, child: ast.AST, is_stmt: bool) -> ast.AST | None:
    try:
        if is_stmt:
            return ast.parse(mutant.replacement).body[0]
        return ast.parse(f"({mutant.replacement})", mode="eval").body
    except SyntaxError:
        return None


_TOKEN_OP = {v: k for k, v in _CMP_TEXT.items()}
_TOKEN_BIN = {v: k for k, v in _BIN_TEXT.items()}


def _operator_tree(mutant: Mutant, tree: ast.AST, finder: _Finder) -> ast.AST | None:
    new = " ".join(mutant.replacement.split())
    old = " ".join(mutant.original.split())
    for node in ast.walk(tree):
        if not hasattr(node, "end_lineno"):
            continue
        start, end = finder.span(node)
        if not start <= mutant.start < mutant.end <= end:
            continue
        if isinstance(node, ast.Compare) and new in _TOKEN_OP and old in _TOKEN_OP:
            operands = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                a, b = finder.span(operands[i])[1], finder.span(operands[i + 1])[0]
                if a <= mutant.start and mutant.end <= b and type(op) is _TOKEN_OP[old]:
                    node.ops[i] = _TOKEN_OP[new]()
                    return tree
        if isinstance(node, ast.BinOp) and new in _TOKEN_BIN and old in _TOKEN_BIN:
            a, b = finder.span(node.left)[1], finder.span(node.right)[0]
            if a <= mutant.start and mutant.end <= b and type(node.op) is _TOKEN_BIN[old]:
                node.op = _TOKEN_BIN[new]()
                return tree
        if isinstance(node, ast.AugAssign) and new.endswith("=") and new[:-1] in _TOKEN_BIN:
            a, b = finder.span(node.target)[1], finder.span(node.value)[0]
            if a <= mutant.start and mutant.end <= b:
                node.op = _TOKEN_BIN[new[:-1]]()
                return tree
    return None
