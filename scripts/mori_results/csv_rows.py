# SPDX-License-Identifier: MIT
"""CSV of a report's rows (docs/json.md "CSV"), the rule lib/src/base/report.cpp csv_of_rows writes by: a header
line, then one line per row (RFC 4180: CRLF, fields quoted where they hold a comma, a quote or a line break); a
nested object's fields are columns of their own named by the path ("time_us.p50"); an array is one field holding
its JSON; null is an empty field; a number is written as the report's own text of it (render-results reads the report with
keep_text: two texts can round-trip to one double, and the C++ writer does not always choose Python's shortest
one); a boolean as JSON writes it; a string as it is. The columns: every field of every row, in the order of first
appearance. CTest a2a.csv holds both sides to each other on one run, and on a number whose writers' texts differ."""
import json


def _flatten(value, prefix, out):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else k, out)
    else:
        out.append((prefix, value))


def _field(text):
    if any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _json_text(v):
    """JSON text with no spaces, as the C++ side writes it; a number parsed with keep_text as its own text
    (json.dumps would write repr() of the double instead)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return getattr(v, "text", None) or json.dumps(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return "{" + ",".join(f"{_json_text(k)}:{_json_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def _value(v):
    if v is None:
        return ""
    if isinstance(v, str):
        return _field(v)
    # JSON's own text of a number, a boolean, an array or an empty object
    return _field(_json_text(v))


def csv_of_rows(rows):
    """The CSV text of a list of JSON objects."""
    columns, flat = [], []
    seen = set()
    for row in rows:
        fields = []
        _flatten(row, "", fields)
        flat.append(dict(fields))
        for name, _ in fields:
            if name not in seen:
                seen.add(name)
                columns.append(name)
    lines = [",".join(_field(c) for c in columns)]
    for m in flat:
        lines.append(",".join(_value(m.get(c)) for c in columns))
    return "".join(line + "\r\n" for line in lines)
