"""Marquez-compatible node ids: ``dataset:<namespace>:<name>``, ``job:<namespace>:<name>`` and
``datasetField:<namespace>:<name>:<field>``.

Namespaces (``postgres://host:5432``) and names may themselves contain ``:`` and ``/``, so an id is
parsed from its known prefix and the store is asked which split names an existing node (see
:func:`splits`).
"""

from __future__ import annotations

from collections.abc import Iterator

KINDS = ("dataset", "job", "datasetField")


#: ``:`` separators a node id may hold after its kind. Real ids hold a few (``postgres://db:5432:s.t:col``
#: has 3); the bound keeps the store look-ups of one id (every split of it is a candidate) small.
MAX_SEPARATORS = 64


class NodeIdError(ValueError):
    """A node id that does not start with a known kind."""


def node_id(kind: str, namespace: str, name: str) -> str:
    """The id of a job or dataset node."""
    return f"{kind}:{namespace}:{name}"


def field_node_id(namespace: str, name: str, field: str) -> str:
    """The id of a dataset field node."""
    return f"datasetField:{namespace}:{name}:{field}"


def parse(value: str) -> tuple[str, str]:
    """``(kind, rest)`` of a node id; ``rest`` is everything after ``<kind>:``.

    Raises:
        NodeIdError: naming the accepted forms.
    """
    kind, sep, rest = value.partition(":")
    if kind not in KINDS or not sep or not rest:
        raise NodeIdError(
            f"nodeId must look like dataset:<namespace>:<name>, job:<namespace>:<name> or "
            f"datasetField:<namespace>:<name>:<field>, got {value[:200]!r}"
        )
    if rest.count(":") > MAX_SEPARATORS:
        raise NodeIdError(
            f"nodeId has {rest.count(':')} ':' separators after {kind}:; at most {MAX_SEPARATORS} are accepted "
            f"(namespace, name and field hold a few each): {value[:100]!r}..."
        )
    return kind, rest


def splits(rest: str, parts: int) -> Iterator[tuple[str, ...]]:
    """Every way to cut ``rest`` at ``:`` into ``parts`` non-empty pieces, longest first piece first.

    >>> list(splits("postgres://db:5432:public.t", 2))
    [('postgres://db:5432', 'public.t'), ('postgres://db', '5432:public.t'), ('postgres', '//db:5432:public.t')]
    """
    if parts == 1:
        if rest:
            yield (rest,)
        return
    positions = [i for i, char in enumerate(rest) if char == ":"]
    for cut in reversed(positions):
        head, tail = rest[:cut], rest[cut + 1 :]
        if head:
            for more in splits(tail, parts - 1):
                yield (head, *more)
