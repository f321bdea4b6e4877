# SPDX-License-Identifier: MIT
"""The environment variables the suite reads or sets, declared once: environment.json beside this file (the library
builds the same table in: lib/include/mori/symm/base/env.hpp; docs/environment.md lists it). The scripts read and
set variables by name only through read() and put(), which refuse a name the table lacks; CTest house.env fails on
a read that goes around them.
"""
import json
import os

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "environment.json")
with open(TABLE_PATH, encoding="utf-8") as _f:
    VARIABLES = {v["name"]: v for v in json.load(_f)["variables"]}


def _declared(name):
    if name not in VARIABLES:
        raise KeyError(f"{name} is not declared in scripts/mori_results/environment.json")
    return name


def read(name, default=None):
    """The value of a declared variable, default where it is unset."""
    return os.environ.get(_declared(name), default)


def is_set(name):
    return _declared(name) in os.environ


def put(name, value):
    """Sets a declared variable in this process's environment (and so in every job it starts)."""
    os.environ[_declared(name)] = value


def with_prefixes(prefixes):
    """Every variable of this process whose name starts with one of prefixes (a record of a run's settings, such as
    NCCL_*: names no table can list)."""
    return {k: v for k, v in os.environ.items() if k.startswith(tuple(prefixes))}
