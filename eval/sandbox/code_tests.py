"""Split a task's tests into units whose outcomes the code judge records (runs on our side).

Each top-level assertion or test statement (of the module, or of a `check(candidate)` driver such as
HumanEval's) becomes one unit, `try: <test>; __lw_unit_pass__() except BaseException as e:
__lw_unit_fail__(e)`; each iteration of a top-level test loop (HumanEval+/MBPP+ style
`for inp, exp in zip(inputs, results): assertion(candidate(*inp), exp)`) is a unit of its own.
Assignments, imports and definitions are set-up and run as they are.
"""

from __future__ import annotations

import ast

__all__ = ["candidate_names", "instrument"]


def candidate_names(source: str) -> set[str]:
    """Top-level function and class names a candidate defines (empty if it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {
        st.name for st in tree.body if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


_TESTISH_STMTS = (ast.Assert, ast.Expr, ast.For, ast.While, ast.If, ast.With, ast.Try, ast.Match)


def _is_testish(node, call_names):
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert | ast.Raise):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in call_names:
            return True
    return False


def _try_unit(body, with_pass=True):
    handler_call = ast.Expr(
        ast.Call(ast.Name("__lw_unit_fail__", ast.Load()), [ast.Name("__lw_exc__", ast.Load())], [])
    )
    handler = ast.ExceptHandler(ast.Name("BaseException", ast.Load()), "__lw_exc__", [handler_call])
    ok = [ast.Expr(ast.Call(ast.Name("__lw_unit_pass__", ast.Load()), [], []))] if with_pass else []
    return ast.Try(body=body + ok, handlers=[handler], orelse=[], finalbody=[])


def _wrap(stmts, call_names):
    out = []
    for st in stmts:
        if not isinstance(st, _TESTISH_STMTS) or not _is_testish(st, call_names):
            out.append(st)  # context: assignments, imports, definitions, set-up calls
        elif isinstance(st, ast.For | ast.AsyncFor):
            st.body = [_try_unit(st.body)]  # each iteration is one test
            out.append(st)
        else:
            out.append(_try_unit([st]))
    return out


def instrument(tests: str, candidate_names: set[str]) -> str:
    """The test module's source with each test wrapped so that its outcome is recorded, not raised."""
    tree = ast.parse(tests)
    funcs = {st.name: st for st in tree.body if isinstance(st, ast.FunctionDef)}
    drivers = set()
    for st in tree.body:  # `check(candidate)` at the top level: check's own statements are the tests
        if (
            isinstance(st, ast.Expr)
            and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Name)
        ):
            if st.value.func.id in funcs:
                drivers.add(st.value.func.id)
    helpers = set(funcs) - drivers
    for name in drivers:
        fn = funcs[name]
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        fn.body = _wrap(fn.body, set(candidate_names) | params | helpers)
    body = []
    for st in tree.body:
        is_driver_call = (
            isinstance(st, ast.Expr)
            and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Name)
            and st.value.func.id in drivers
        )
        if is_driver_call:
            body.append(_try_unit([st], with_pass=False))  # an escape from check's set-up fails once
        else:
            body.extend(_wrap([st], set(candidate_names) | helpers))
    tree.body = body
    return ast.unparse(ast.fix_missing_locations(tree))
