"""JSON written a piece at a time, in the bytes ``json.dumps`` gives for the whole.

``LazyList`` and ``LazyMap`` stand for a list or a dict whose items are made as they are written
(a 2,000-row rollout's ledger entries and task scores), so only one item's dicts are alive at a
time; ``json_chunks`` yields the text. Pure: the caller writes the chunks.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Iterator


class LazyList:
    """A JSON list whose items ``items()`` makes when it is written."""

    __slots__ = ("items",)

    def __init__(self, items: Callable[[], Iterable[Any]]):
        self.items = items


class LazyMap:
    """A JSON object with string ``keys`` whose values ``value(key)`` makes when it is written."""

    __slots__ = ("keys", "value")

    def __init__(self, keys: Iterable[str], value: Callable[[str], Any]):
        self.keys = list(keys)
        self.value = value


def json_chunks(value: Any, *, indent: int | None = None, sort_keys: bool = False,
                default: Callable[[Any], Any] | None = None) -> Iterator[str]:
    """The text of ``json.dumps(value, indent=indent, sort_keys=sort_keys, default=default)``,
    with every LazyList and LazyMap as the list and dict they stand for, in pieces. A subtree
    without one is encoded whole by ``json.dumps`` (its C encoder), so only the lazy parts and
    the dicts holding them are walked here."""
    # what json.dumps makes for each call, made once; check_circular=False: as the CLI's own
    # output, a tree built for this output is never cyclic
    encode = json.JSONEncoder(indent=indent, sort_keys=sort_keys, default=default, check_circular=False).encode
    return _chunks(value, 0, encode, indent, sort_keys)


def _is_lazy(value: Any) -> bool:
    return isinstance(value, (LazyList, LazyMap)) or (isinstance(value, dict) and any(map(_is_lazy, value.values())))


def _chunks(value: Any, level: int, encode: Callable[[Any], str], indent: int | None,
            sort_keys: bool) -> Iterator[str]:
    items: Iterable[tuple[str | None, Any]]
    if isinstance(value, LazyList):
        opening, closing = "[", "]"
        items = ((None, item) for item in value.items())
    elif isinstance(value, LazyMap):
        opening, closing = "{", "}"
        keys = sorted(value.keys) if sort_keys else value.keys
        items = ((key, value.value(key)) for key in keys)
    elif isinstance(value, dict) and _is_lazy(value):
        opening, closing = "{", "}"
        names = list(value)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"a dict holding lazy values needs string keys, not {name!r}")
        items = [(name, value[name]) for name in (sorted(names) if sort_keys else names)]
    else:
        text = encode(value)
        # json.dumps escapes newlines inside strings: each one here is the layout's
        yield text.replace("\n", "\n" + " " * (indent * level)) if indent is not None and level else text
        return
    if indent is None:
        first, between, last = opening, ", ", closing
    else:
        inner = "\n" + " " * (indent * (level + 1))
        first, between, last = opening + inner, "," + inner, "\n" + " " * (indent * level) + closing
    empty = True
    for key, item in items:
        yield first if empty else between
        empty = False
        if key is not None:
            yield encode(key) + ": "
        yield from _chunks(item, level + 1, encode, indent, sort_keys)
    yield opening + closing if empty else last
