"""The vector selectors of a PromQL expression, from a small lexer (no Prometheus library in
Python here; promtool does the real parse, this only finds the selectors for the label checks).

Only what the mixin's expressions can contain needs to be right, but the lexer is written to the
PromQL grammar rather than to them, so a new expression shape does not slip through: strings in
all three quotings, comments, `{...}` matcher blocks, `[...]` ranges and subqueries, label lists
of by/without/on/ignoring/group_left/group_right, aggregation operators (with the grouping before
or after their arguments), function calls, binary-operator keywords, offset/@ modifiers, numbers,
durations, Inf and NaN.

    selectors(expr) -> [Selector(name, matchers, text, pos)]
    parse_matchers('job="a", cluster=~"b"') -> [("job", "=", "a"), ("cluster", "=~", "b")]
"""
import re
from typing import NamedTuple

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Words that are never a metric name where they stand (binary set operators, atan2, modifiers,
# number literals). `start`/`end` only follow `@` and are followed by `()`, i.e. calls.
KEYWORDS = {"and", "or", "unless", "atan2", "offset", "bool", "inf", "nan"}


class Selector(NamedTuple):
    name: str            # metric name, "" when only matchers are given
    matchers: tuple      # ((label, op, value), ...), value unquoted
    text: str            # as written in the expression
    pos: int


class LexError(ValueError):
    pass


_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', re.S)
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NUMBER = re.compile(r"[0-9.][0-9a-zA-Z_.]*")  # 0.05, 1e3, 0x1f, 5m, 1h30m
_MATCH_OP = re.compile(r"=~|!~|!=|=")


def _unquote(s):
    if s[0] == "`":
        return s[1:-1]
    body = s[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def parse_matchers(text):
    """Matchers of a `{...}` block's inside. Raises LexError on anything else."""
    out, i = [], 0
    while True:
        while i < len(text) and text[i] in " \t\n,":
            i += 1
        if i >= len(text):
            return out
        m = _IDENT.match(text, i)
        if not m:
            raise LexError(f"label name expected at {text[i:]!r}")
        name, i = m.group(0), m.end()
        while i < len(text) and text[i] in " \t\n":
            i += 1
        op = _MATCH_OP.match(text, i)
        if not op:
            raise LexError(f"matcher operator expected after {name!r} in {text!r}")
        i = op.end()
        while i < len(text) and text[i] in " \t\n":
            i += 1
        s = _STRING.match(text, i)
        if not s:
            raise LexError(f"quoted value expected after {name}{op.group(0)} in {text!r}")
        out.append((name, op.group(0), _unquote(s.group(0))))
        i = s.end()


def _close(expr, i, open_ch, close_ch):
    """Index just past the bracket that closes the one at expr[i], skipping strings."""
    depth = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            s = _STRING.match(expr, i)
            if not s:
                raise LexError(f"unterminated string at {expr[i:i + 30]!r}")
            i = s.end()
            continue
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise LexError(f"unclosed {open_ch!r} in {expr!r}")


def _skip_space(expr, i):
    while i < len(expr):
        if expr[i] in " \t\r\n":
            i += 1
        elif expr[i] == "#":
            while i < len(expr) and expr[i] != "\n":
                i += 1
        else:
            break
    return i


def selectors(expr):
    out, i = [], 0
    while True:
        i = _skip_space(expr, i)
        if i >= len(expr):
            return out
        c = expr[i]
        if c in "\"'`":                       # a string argument (label_replace, count_values...)
            s = _STRING.match(expr, i)
            if not s:
                raise LexError(f"unterminated string at {expr[i:i + 30]!r}")
            i = s.end()
        elif c == "[":                        # range or subquery: durations only
            i = _close(expr, i, "[", "]")
        elif c == "{":                        # a selector with no metric name
            end = _close(expr, i, "{", "}")
            out.append(Selector("", tuple(parse_matchers(expr[i + 1:end - 1])), expr[i:end], i))
            i = end
        elif _IDENT.match(expr, i):
            m = _IDENT.match(expr, i)
            word, start, i = m.group(0), i, m.end()
            j = _skip_space(expr, i)
            nxt = expr[j] if j < len(expr) else ""
            low = word.lower()
            if low in LABEL_LISTS:
                if nxt == "(":                # label names, not selectors
                    i = _close(expr, j, "(", ")")
                elif low not in ("group_left", "group_right"):
                    raise LexError(f"{word} without a label list in {expr!r}")
            elif low in AGGREGATIONS or low in KEYWORDS or nxt == "(":
                pass                          # operator, literal or function: its arguments are lexed on
            else:
                matchers, end = (), i
                if nxt == "{":
                    end = _close(expr, j, "{", "}")
                    matchers = tuple(parse_matchers(expr[j + 1:end - 1]))
                out.append(Selector(word, matchers, expr[start:end], start))
                i = end
        elif _NUMBER.match(expr, i):
            i = _NUMBER.match(expr, i).end()
        else:                                 # operators, parens, commas, @
            i += 1


class Aggregation(NamedTuple):
    op: str              # sum, max, count...
    grouping: str        # "by", "without" or "" (none: every label goes)
    labels: tuple
    argument: str        # the text inside its parentheses


def aggregations(expr):
    """Every aggregation of the expression, nested ones included."""
    # Strings blanked (same length, so positions hold): a "sum (" inside one is not an operator.
    masked = _STRING.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], expr)
    masked = re.sub(r"#[^\n]*", lambda m: " " * len(m.group(0)), masked)
    out = []
    for m in re.finditer(r"(?<![\w:])(" + "|".join(sorted(AGGREGATIONS, key=len, reverse=True)) + r")(?![\w:])",
                         masked, re.I):
        i = _skip_space(masked, m.end())
        grouping, labels = "", ()

        def label_list(i):
            g = re.match(r"(by|without)\b", masked[i:], re.I)
            if not g:
                return i, "", ()
            j = _skip_space(masked, i + g.end())
            end = _close(masked, j, "(", ")")
            return end, g.group(1).lower(), tuple(x.strip() for x in masked[j + 1:end - 1].split(",") if x.strip())

        i, grouping, labels = label_list(i)
        i = _skip_space(masked, i)
        if i >= len(masked) or masked[i] != "(":
            continue                          # a label or metric called like an operator
        end = _close(masked, i, "(", ")")
        argument = expr[i + 1:end - 1]
        if not grouping:
            _, grouping, labels = label_list(_skip_space(masked, end))
        out.append(Aggregation(m.group(1).lower(), grouping, labels, argument))
    return out


def _selftest():
    """The lexer on the shapes it must get right, so a lexer bug cannot make a check vacuous."""
    e = ('sum by (job, instance) (rate(a_total{x="}{,\\"", y=~`a|b`}[5m:1m] offset 1h)) '
         '/ on (instance) group_left (foo) max without (cpu) (b) > bool 0.5e3 '
         'or label_replace(c{z!~"q"}, "dst", "$1", "src", "(.*)") # d{not="me"}\n'
         'unless {__name__="e"} @ start() and topk(3, f) < +Inf or vector(NaN) and count_values("v", g)')
    got = [(s.name, s.matchers) for s in selectors(e)]
    want = [("a_total", (("x", "=", '}{,"'), ("y", "=~", "a|b"))), ("b", ()), ("c", (("z", "!~", "q"),)),
            ("", (("__name__", "=", "e"),)), ("f", ()), ("g", ())]
    assert got == want, f"promql_selectors self-test: {got} != {want}"
    assert parse_matchers('job="a",cluster="c9"') == [("job", "=", "a"), ("cluster", "=", "c9")]
    got = [(a.op, a.grouping, a.labels, a.argument) for a in aggregations(
        'max by (a, b) (x * on (a) group_left (w) max by (a, w) (y)) / sum(z{q="sum (r)"}) without (c)'
        ' + count(v) + topk(2, u)')]
    want = [("max", "by", ("a", "b"), "x * on (a) group_left (w) max by (a, w) (y)"),
            ("max", "by", ("a", "w"), "y"), ("sum", "without", ("c",), 'z{q="sum (r)"}'),
            ("count", "", (), "v"), ("topk", "", (), "2, u")]
    assert got == want, f"promql_selectors self-test: {got} != {want}"


_selftest()
