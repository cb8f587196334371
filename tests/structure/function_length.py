#!/usr/bin/env python3
"""No function in exporter/ is longer than the limit: a long function becomes named steps.

    function_length.py SOURCE_DIR [MAX_LINES]

A function is a brace block opened at namespace or class level after a parameter list; its length
runs from the line its signature starts on to its closing brace. Comments, strings and character
literals are blanked first so that their braces do not count. Lambdas and local classes count
towards the function they are in, as a reader sees them.
"""
import os
import re
import sys

LIMIT = 100


def blank(text):
    """The text with comments, string and character literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            # A digit separator (1'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and text[i + 1:i + 2].isalnum():
                out.append(c)
                i += 1
                continue
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, last line) of each function defined in the file."""
    text = blank(open(path, encoding="utf-8").read())
    # Preprocessor lines (with their continuations) hold no braces of the code's blocks.
    text = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    stack, found, head_start = [], [], 0
    for i, c in enumerate(text):
        if c in ";{}":
            if c == "{":
                head = text[head_start:i]
                kind = "block"
                if not stack or stack[-1][0] in ("namespace", "type"):
                    stripped = head.strip()
                    if re.match(r"(extern\s+\"C\"\s*)?namespace\b|extern\b", stripped):
                        kind = "namespace"
                    elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", stripped):
                        kind = "type"
                    elif ")" in stripped and not re.search(r"=\s*$", stripped):
                        kind = "function"
                # The signature starts at the head's first non-blank character.
                lead = len(head) - len(head.lstrip())
                stack.append((kind, head_start + lead, head.strip()))
            elif c == "}" and stack:
                kind, start, head = stack.pop()
                if kind == "function":
                    name = re.findall(r"([\w:~<>]+)\s*\(", head)
                    found.append((name[0] if name else head[:40], text.count("\n", 0, start) + 1,
                                  text.count("\n", 0, i) + 1))
            head_start = i + 1
        elif c == ":" and stack and stack[-1][0] == "type" and re.search(r"\b(public|private|protected)\s*$",
                                                                         text[head_start:i]):
            head_start = i + 1
    return found


def main():
    source = sys.argv[1]
    limit = int(sys.argv[2]) if len(sys.argv) > 2 else LIMIT
    long_ones, count = [], 0
    for folder, _, files in os.walk(os.path.join(source, "exporter")):
        for f in sorted(files):
            if not f.endswith((".cc", ".h")):
                continue
            path = os.path.join(folder, f)
            for name, first, last in functions(path):
                count += 1
                if last - first + 1 > limit:
                    long_ones.append(f"{os.path.relpath(path, source)}:{first}: {name} is {last - first + 1} lines")
    print(f"{count} functions in exporter/, limit {limit} lines")
    if count < 100:
        sys.exit(f"FAIL: found only {count} functions: the scan is broken")
    for line in long_ones:
        print("FAIL", line)
    if long_ones:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
