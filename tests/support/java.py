"""Stand-ins for the Java objects py4j hands Python code, for unit tests of pure adapters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class JavaIterable(Generic[T]):
    """A java.lang.Iterable as py4j shows it: iterator(), then hasNext()/next()."""

    def __init__(self, items: Sequence[T]) -> None:
        self._items = list(items)
        self._pos = 0

    def iterator(self) -> JavaIterable[T]:
        self._pos = 0
        return self

    def hasNext(self) -> bool:  # noqa: N802
        return self._pos < len(self._items)

    def next(self) -> T:
        self._pos += 1
        return self._items[self._pos - 1]
