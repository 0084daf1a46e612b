"""Options users name by a string: one way to parse them and to say what is valid.

Users and fixtures give options such as ``input_clipping="left"`` or
``cti_policy="drop"`` as strings; each option is a :class:`Choice`, so
every one of them refuses an unknown name with the same message listing
the valid names, in declaration order.

>>> class Fruit(Choice, label="fruit"):
...     APPLE = "apple"
...     PEAR = "pear"
>>> Fruit.parse("pear")
<Fruit.PEAR: 'pear'>
>>> Fruit.parse("plum")
Traceback (most recent call last):
    ...
ValueError: unknown fruit 'plum'; use one of: apple, pear
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Self

__all__ = ["Choice"]


class Choice(StrEnum):
    """A string enumeration whose :meth:`parse` names the valid values.

    A subclass gives its label as a class keyword (``class
    CtiPolicy(Choice, label="CTI policy")``); the label names the option
    in the error message.
    """

    label: ClassVar[str]

    def __init_subclass__(cls, label: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.label = label or cls.__name__

    @classmethod
    def parse(cls, value: Self | str) -> Self:
        """The member named by ``value``, or a ValueError listing the valid
        names (options arrive as strings from users and fixtures)."""
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(member.value for member in cls)
            raise ValueError(f"unknown {cls.label} {value!r}; use one of: {names}") from None
