# SPDX-License-Identifier: MIT
"""C++ source text for the tree's own checks (tests/scripts/file_io_audit_test.py, tests/scripts/house_test.py):
comments and literals blanked, line breaks kept, so that a match's line number is the source's."""
import re


def strip(text, strings=True):
    """The text with comments blanked and, where strings, string and character literals emptied (line breaks
    kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            j = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c if strings else text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)
