#!/usr/bin/python3
"""Lists the functions longer than a limit (default 80 lines) in src/, tools/ and capi/.

STYLE.md and DESIGN.md want short functions that each do one thing; this keeps them short. The
scan is textual, not a compiler's: comments, string and character literals (raw strings too) are
blanked first, then braces are matched. A `{` at namespace or class scope opens a function body
when the text before it (back to the previous `;`, `{` or `}`) has a parameter list and is no
class, enum, namespace, `extern "C"` block or `= {...}` initializer; everything inside a function
(lambdas, local classes) counts toward it. A function's length is its lines from the line of its
opening brace to the line of its closing brace. Brace initializers written against their name
(`x_{v}`, as clang-format writes them) are skipped inside constructor initializer lists.

usage: long-functions.py [--limit N] SOURCE_ROOT   exit 0: none too long; 1: some (printed as
       long-functions.py --self-test               file:line: NAME: N lines); 2: usage
"""
import os
import re
import sys

DIRS = ("src", "tools", "capi")
EXTS = (".c", ".cc", ".cpp", ".h", ".hpp")

# Functions allowed past the limit, each with the reason it reads better whole. Keep it tiny.
ALLOWED = {}


def blank(text):
    """Comments and literals replaced by spaces, newlines kept (line numbers stay right)."""
    out = []
    i, n = 0, len(text)
    keep_lines = lambda s: re.sub(r"[^\n]", " ", s)
    while i < n:
        c = text[i]
        at_line_start = text[text.rfind("\n", 0, i) + 1:i].strip() == ""
        if c == "#" and at_line_start:
            # A preprocessor directive, with its continuation lines.
            j = i
            while True:
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            j = n if j < 0 else j
            out.append(keep_lines(text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(keep_lines(text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + keep_lines(text[i + 2:end]))
            i = end
        elif c in "\"'":
            # A digit separator (1'000'000) is no character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def squash_parens(head):
    """The head with the inside of every (...) and <...> of a template header removed."""
    out, depth = [], 0
    for c in head:
        if c == "(":
            if depth == 0:
                out.append("(")
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
            if depth == 0:
                out.append(")")
        elif depth == 0:
            out.append(c)
    return re.sub(r"\btemplate\s*<[^{;]*?>\s*(?=[A-Za-z_\[])", " ", "".join(out))


def kind_of(head):
    """'func', 'scope' (namespace, class, extern block: look inside) or 'init' (skip it)."""
    h = squash_parens(head).strip()
    h = re.sub(r"\boperator\s*(\(\)|[^\s(]+)\s*\(", "operator(", h)  # operator=, operator()
    if re.match(r"^(inline\s+)?namespace\b", h) or re.match(r'^extern\s*"\s*"\s*$', h):
        return "scope"
    if re.search(r"\b(class|struct|union|enum)\b[^()=]*$", h):
        return "scope"
    if "(" in h and "=" not in h.split("(")[0] + h[h.rfind(")"):]:
        return "func"
    return "init"


def name_of(head):
    h = squash_parens(head)
    m = re.search(r"(operator\s*[^\s(]+|operator\s*\(\)|[~\w:]+)\s*\(\)", h)
    return m.group(1) if m else "?"


def long_functions(text, limit):
    """[(line, name, lines)] of the functions in `text` longer than `limit` lines."""
    t = blank(text)
    found = []
    line = 1
    stack = []  # 'scope' | 'init' | ('func', start_line, name)
    head_start = 0
    in_func = 0  # depth inside the outermost function
    i = 0
    while i < len(t):
        c = t[i]
        if c == "\n":
            line += 1
        elif in_func:
            if c == "{":
                in_func += 1
            elif c == "}":
                in_func -= 1
                if in_func == 0:
                    _, start, name = stack.pop()
                    if line - start + 1 > limit:
                        found.append((start, name, line - start + 1))
                    head_start = i + 1
        elif c == "{":
            head = t[head_start:i]
            glued = i > 0 and (t[i - 1].isalnum() or t[i - 1] in "_>")
            if glued and re.search(r"\)\s*:", squash_parens(head)):
                # x_{v} in a constructor's initializer list: part of the head.
                depth = 0
                while i < len(t):
                    if t[i] == "{":
                        depth += 1
                    elif t[i] == "}":
                        depth -= 1
                        if depth == 0:
                            break
                    elif t[i] == "\n":
                        line += 1
                    i += 1
            else:
                k = kind_of(head)
                if k == "func":
                    stack.append(("func", line, name_of(head)))
                    in_func = 1
                else:
                    stack.append(k)
                    head_start = i + 1
                    if k == "init":
                        depth = 1
                        i += 1
                        while i < len(t) and depth:
                            depth += {"{": 1, "}": -1}.get(t[i], 0)
                            line += t[i] == "\n"
                            i += 1
                        stack.pop()
                        continue
        elif c == "}":
            if stack:
                stack.pop()
            head_start = i + 1
        elif c == ";":
            head_start = i + 1
        elif c == ":" and re.search(r"\b(public|private|protected)\s*$", t[head_start:i]):
            head_start = i + 1
        i += 1
    return found


def scan(root, limit):
    bad = []
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if not f.endswith(EXTS):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for start, name, n in long_functions(fh.read(), limit):
                        if ALLOWED.get((rel, name)) is None:
                            bad.append(f"{rel}:{start}: {name}: {n} lines")
    return sorted(bad)


SELF_TESTS = [
    # (source, limit, expected [(name, lines)])
    ("int f() {\n  return 1;\n}\n", 2, [("f", 3)]),
    ("int f() {\n  return 1;\n}\n", 3, []),
    ("namespace a {\nnamespace {\nvoid g(int x) {\n\n\n}\n}  // namespace\n}\n", 3, [("g", 4)]),
    ("struct S {\n  S() : a_(1), b_{2} {\n\n\n  }\n  int a_, b_;\n};\n", 3, [("S", 4)]),
    ("class C : public B {\n public:\n  void m() const override {\n\n\n  }\n};\n", 3, [("m", 4)]),
    ("const int t[] = {\n1,\n2,\n3,\n};\nvoid h() {\n}\n", 3, []),
    ("enum class E : int {\n a,\n b,\n c,\n};\n", 1, []),
    ('extern "C" {\nint c_api(void) {\n\n\n}\n}\n', 3, [("c_api", 4)]),
    ("auto f() -> int {\n  auto l = [] {\n\n  };\n  return 0;\n}\n", 5, [("f", 6)]),
    ('void s() {\n  const char* x = "}";\n  char y = \'{\';\n\n}\n', 4, [("s", 5)]),
    ('void r() {\n  auto x = R"(\n}}}\n)";\n}\n', 4, [("r", 5)]),
    ("// void z() {\n/* void w() {\n*/\nint v = 1'000;\nvoid u() {\n}\n", 1, [("u", 2)]),
    ("template <typename T>\nT tmpl(T v) {\n\n\n}\n", 3, [("tmpl", 4)]),
    ("bool operator==(const A& a, const A& b) {\n\n\n}\n", 3, [("operator==", 4)]),
]


def self_test():
    failed = 0
    for src, limit, want in SELF_TESTS:
        got = [(name, n) for _, name, n in long_functions(src, limit)]
        if got != want:
            print(f"self-test: limit {limit}: expected {want}, got {got} for:\n{src}")
            failed += 1
    print(f"self-test: {len(SELF_TESTS) - failed} of {len(SELF_TESTS)} cases right")
    return 1 if failed else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    limit = 80
    args = argv[1:]
    if len(args) >= 2 and args[0] == "--limit" and args[1].isdigit():
        limit = int(args[1])
        args = args[2:]
    if len(args) != 1 or not all(os.path.isdir(os.path.join(args[0], d)) for d in ("src", "tools")):
        usage = __doc__.strip().splitlines()[-2:]
        print("\n".join(usage), file=sys.stderr)
        return 2
    bad = scan(args[0], limit)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} function(s) longer than {limit} lines: split them (docs/style.md)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
