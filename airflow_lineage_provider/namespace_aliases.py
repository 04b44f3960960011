"""Namespace aliases: several spellings of one namespace, mapped to the one the consumer shows.

Producers name one database by different hosts (``postgres://db:5432`` from Airflow,
``postgresql://db.internal:5432`` from dbt). An operator lists the extra spellings as ``alias=canonical``
entries (``[lineage_provider] consumer_namespace_aliases``, ``airflow-lineage serve --namespace-alias``);
the store applies them when it reads, so stored events are never rewritten and a changed mapping takes
effect without migrating data. Namespaces are compared as exact strings: no URI is normalised.

Chains resolve to their end (``a=b`` and ``b=c`` map ``a`` and ``b`` to ``c``); a cycle, an alias mapped to
two canonicals, an alias mapped to itself or an empty name is a ValueError naming the entries.

Example::

    aliases = NamespaceAliases.parse("postgresql://db.internal:5432=postgres://db:5432, pg://db=postgres://db:5432")
    aliases.canonical("pg://db")  # 'postgres://db:5432'
    aliases.names_of("postgres://db:5432")  # ('pg://db', 'postgres://db:5432', 'postgresql://db.internal:5432')
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

#: What separates entries in :meth:`NamespaceAliases.parse`: newlines and commas.
_ENTRY_SEPARATORS = re.compile(r"[\n\r,]")
_FORM = "alias=canonical, e.g. postgresql://db.internal:5432=postgres://db:5432"


@dataclass(frozen=True)
class NamespaceAliases:
    """``(alias, canonical)`` pairs, validated and resolved; empty (the default) maps nothing.

    ``pairs`` keeps the entries as given (deduplicated and sorted, so two equal mappings compare equal);
    :meth:`canonical` applies the resolved mapping, chains followed to their end.
    """

    pairs: tuple[tuple[str, str], ...] = ()
    _resolved: Mapping[str, str] = field(init=False, repr=False, compare=False, hash=False)
    _names: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        pairs = tuple(sorted({(str(alias), str(canonical)) for alias, canonical in self.pairs}))
        direct: dict[str, str] = {}
        for alias, canonical in pairs:
            if not alias or not canonical:
                raise ValueError(f"namespace alias {alias!r}={canonical!r}: both names must be non-empty ({_FORM})")
            if alias == canonical:
                raise ValueError(f"namespace alias {alias!r} is mapped to itself: leave that entry out")
            if alias in direct:
                raise ValueError(
                    f"namespace alias {alias!r} is mapped to two canonical namespaces, {direct[alias]!r} and "
                    f"{canonical!r}: keep one"
                )
            direct[alias] = canonical
        resolved = {alias: _follow(alias, direct) for alias in direct}
        names: dict[str, list[str]] = {}
        for alias, canonical in resolved.items():
            names.setdefault(canonical, [canonical]).append(alias)
        object.__setattr__(self, "pairs", pairs)
        object.__setattr__(self, "_resolved", MappingProxyType(resolved))
        object.__setattr__(self, "_names", MappingProxyType({c: tuple(sorted(n)) for c, n in sorted(names.items())}))

    @classmethod
    def parse(cls, text: str | None) -> NamespaceAliases:
        """Aliases from ``alias=canonical`` entries separated by newlines or commas (whitespace trimmed, empty
        entries skipped). An alias ends at its first ``=``; the canonical namespace may hold more.

        Raises:
            ValueError: naming the entry that is not ``alias=canonical``, or the conflicting entries.
        """
        pairs = []
        for entry in _ENTRY_SEPARATORS.split(text or ""):
            entry = entry.strip()
            if not entry:
                continue
            alias, sep, canonical = entry.partition("=")
            alias, canonical = alias.strip(), canonical.strip()
            if not sep or not alias or not canonical:
                raise ValueError(f"namespace alias entry {entry!r} is not of the form {_FORM}")
            pairs.append((alias, canonical))
        return cls(tuple(pairs))

    def canonical(self, namespace: str) -> str:
        """The namespace ``namespace`` is shown as: its canonical namespace, or itself when it is no alias."""
        return self._resolved.get(namespace, namespace)

    def names_of(self, namespace: str) -> tuple[str, ...]:
        """Every namespace of ``namespace``'s group (its canonical and all aliases of it, itself included), sorted.

        A namespace in no group is alone in its own: ``(namespace,)``.
        """
        canonical = self.canonical(namespace)
        return self._names.get(canonical, (canonical,))

    def groups(self) -> dict[str, tuple[str, ...]]:
        """``canonical → every namespace of its group`` (sorted, the canonical included), for each canonical
        namespace that has aliases."""
        return dict(self._names)

    @property
    def mapping(self) -> Mapping[str, str]:
        """``alias → canonical``, chains resolved (read-only)."""
        return self._resolved

    @property
    def fingerprint(self) -> str:
        """A stable hash of the resolved mapping (SHA-256 hex): equal mappings, however written, share it,
        so a reader can tell whether results computed under another configuration still apply."""
        text = json.dumps(sorted(self._resolved.items()), separators=(",", ":"), ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def __bool__(self) -> bool:
        return bool(self._resolved)

    def __str__(self) -> str:
        """The pairs as :meth:`parse` reads them (``a=b, c=d``)."""
        return ", ".join(f"{alias}={canonical}" for alias, canonical in self.pairs)


def _follow(alias: str, direct: Mapping[str, str]) -> str:
    """Where ``alias``'s chain of entries ends; ValueError naming the namespaces of a cycle."""
    seen = [alias]
    current = direct[alias]
    while current in direct:
        if current in seen:
            cycle = " -> ".join(repr(name) for name in [*seen[seen.index(current) :], current])
            raise ValueError(f"namespace aliases form a cycle: {cycle}; one namespace of it must be the canonical one")
        seen.append(current)
        current = direct[current]
    return current


def aliases_from(value: NamespaceAliases | str | Iterable[tuple[str, str]] | None) -> NamespaceAliases:
    """``value`` as :class:`NamespaceAliases`: one already, text for :meth:`NamespaceAliases.parse`, pairs, or
    None (no aliases)."""
    if isinstance(value, NamespaceAliases):
        return value
    if value is None or isinstance(value, str):
        return NamespaceAliases.parse(value)
    return NamespaceAliases(tuple(value))
