"""Who may do what on the consumer: access levels, API keys with scopes and namespace limits, principals.

Every route of the consumer needs one of four access levels (:class:`Access`). A request's credential
resolves to a :class:`Principal` — an API key, an Airflow user, or anonymous where an operator opted in —
that holds a level and, for a key limited to namespace patterns, the :class:`NamespaceScope` it may see.
How a credential is resolved is the job of a guard (:mod:`.guards`); this module holds the data.

Example::

    keys = KeyRing([ApiKey("producers", Access.WRITE, "s3cret"), ApiKey.parse("ui:read:r3ad")])
    keys.match("r3ad").name  # 'ui'
"""

from __future__ import annotations

import enum
import fnmatch
import hmac
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


class Access(enum.IntEnum):
    """What a route does, in increasing order of trust: each level includes the ones below it."""

    PAGE = 0
    """The lineage page's static files and the API description: no lineage data."""
    READ = 1
    """Graph walks, column lineage, listings, runs, events, search."""
    WRITE = 2
    """Ingest (``POST /api/v1/lineage``, ``/batch``)."""
    ADMIN = 3
    """Destructive calls: retention (pruning) and any reset."""

    @classmethod
    def parse(cls, value: str) -> Access:
        """``read``, ``write`` or ``admin`` (any case) as an :class:`Access`; ValueError naming the value."""
        try:
            level = cls[value.strip().upper()]
        except KeyError:
            level = cls.PAGE
        if level is cls.PAGE:
            raise ValueError(f"unknown access scope {value!r}: use read, write or admin")
        return level

    @property
    def label(self) -> str:
        """The scope's name as written in keys and options: ``read``, ``write``, ``admin``."""
        return self.name.lower()


_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")
_MIN_SECRET = 8


@dataclass(frozen=True)
class NamespaceScope:
    """Namespace patterns (``fnmatch`` globs, case-sensitive: ``warehouse``, ``postgres://db:5432*``)."""

    patterns: tuple[str, ...]

    def allows(self, namespace: str) -> bool:
        """Whether a node in ``namespace`` may be shown."""
        return any(fnmatch.fnmatchcase(namespace, pattern) for pattern in self.patterns)

    def visible(self, namespaces: Iterable[str]) -> list[str]:
        """The namespaces among ``namespaces`` this scope shows."""
        return [namespace for namespace in namespaces if self.allows(namespace)]


@dataclass(frozen=True, repr=False)
class ApiKey:
    """A named credential with a scope, optionally limited to namespace patterns. The secret never prints."""

    name: str
    scope: Access
    secret: str
    namespaces: NamespaceScope | None = None
    """None: every namespace."""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"key name {self.name!r} is not valid: use 1-64 letters, digits, '_', '.', '@' or '-' "
                "(the name is what the audit log shows, never the secret)"
            )
        if self.scope is Access.PAGE:
            raise ValueError(f"key {self.name!r}: scope must be read, write or admin")
        if len(self.secret) < _MIN_SECRET or self.secret != self.secret.strip():
            raise ValueError(
                f"key {self.name!r}: the secret must be at least {_MIN_SECRET} characters with no surrounding "
                "spaces (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
        if self.namespaces is not None and not self.namespaces.patterns:
            raise ValueError(f"key {self.name!r}: namespaces must list at least one pattern (omit it for all)")

    def __repr__(self) -> str:
        limit = f", namespaces={list(self.namespaces.patterns)}" if self.namespaces else ""
        return f"ApiKey(name={self.name!r}, scope={self.scope.label!r}{limit})"

    @classmethod
    def parse(cls, spec: str) -> ApiKey:
        """A key from ``NAME:SCOPE:SECRET`` (the ``--key`` option); the secret may contain ``:``."""
        name, _, rest = spec.partition(":")
        scope, _, secret = rest.partition(":")
        if not secret:
            raise ValueError(f"a key is written NAME:SCOPE:SECRET (scope read, write or admin), got {_masked(spec)!r}")
        try:
            return cls(name, Access.parse(scope), secret)
        except ValueError as error:
            raise ValueError(f"{error} (in key {_masked(spec)!r})") from None

    @classmethod
    def from_dict(cls, data: object, where: str = "the keys file") -> ApiKey:
        """A key from ``{"name", "scope", "secret", "namespaces"?}`` (one entry of a keys file)."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: each key is an object with name, scope and secret, got {type(data).__name__}")
        unknown = set(data) - {"name", "scope", "secret", "namespaces"}
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {sorted(unknown)} (name, scope, secret, namespaces)")
        name, scope, secret = data.get("name"), data.get("scope"), data.get("secret")
        if not all(isinstance(value, str) for value in (name, scope, secret)):
            raise ValueError(f"{where}: key {name!r} needs string name, scope and secret")
        patterns = data.get("namespaces")
        namespaces = None
        if patterns is not None:
            if not isinstance(patterns, list) or not all(isinstance(p, str) and p for p in patterns):
                raise ValueError(f"{where}: key {name!r}: namespaces is a list of patterns, got {patterns!r}")
            namespaces = NamespaceScope(tuple(patterns))
        return cls(str(name), Access.parse(str(scope)), str(secret), namespaces)


def _masked(spec: str) -> str:
    """A key spec with its secret replaced, for error messages."""
    name, _, rest = spec.partition(":")
    scope, sep, _secret = rest.partition(":")
    return f"{name}:{scope}{sep}***" if sep else (f"{name}:***" if rest else name)


def load_keys_file(path: str | Path) -> list[ApiKey]:
    """Keys from a JSON file ``{"keys": [{"name", "scope", "secret", "namespaces"?}, ...]}``.

    Example file::

        {"keys": [
            {"name": "producers", "scope": "write", "secret": "..."},
            {"name": "finance-ui", "scope": "read", "secret": "...", "namespaces": ["postgres://fin-db:5432"]}
        ]}
    """
    where = f"keys file {str(path)!r}"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"cannot read the {where}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"the {where} is not JSON: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError(f'the {where} must be an object {{"keys": [...]}}')
    return [ApiKey.from_dict(entry, where) for entry in data["keys"]]


class KeyRing:
    """The configured keys, matched in constant time: every key is compared, whichever matches."""

    def __init__(self, keys: Sequence[ApiKey] = ()) -> None:
        names = [key.name for key in keys]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"key names must be unique, repeated: {repeated}")
        secrets = [key.secret for key in keys]
        if len(set(secrets)) != len(secrets):
            raise ValueError("two keys share one secret: give every key its own secret")
        self.keys: tuple[ApiKey, ...] = tuple(keys)
        self._encoded = [(key, key.secret.encode()) for key in self.keys]

    def __bool__(self) -> bool:
        return bool(self.keys)

    def __len__(self) -> int:
        return len(self.keys)

    def match(self, presented: str) -> ApiKey | None:
        """The key whose secret is ``presented``, or None; the time taken does not depend on which matched."""
        given = presented.encode("utf-8", "surrogateescape")
        found = None
        for key, secret in self._encoded:
            if hmac.compare_digest(given, secret):
                found = key
        return found


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: a key, an Airflow user or anonymous, with what it may see."""

    name: str
    """The key's name, the Airflow user's name, or ``anonymous``: what the audit log shows."""
    kind: str
    """``key``, ``user`` or ``anonymous``."""
    namespaces: NamespaceScope | None = None
    """None: every namespace; else only nodes in namespaces these patterns match."""

    @property
    def log_name(self) -> str:
        """``key:producers``, ``user:admin`` or ``anonymous:anonymous``: whose events the ingest log records, so
        that a read waits for its own principal's (read-your-writes, :mod:`..store.write.deferred_apply`)."""
        return f"{self.kind}:{self.name}"

    @property
    def who(self) -> str:
        """``key 'producers'``, ``user 'admin'`` or ``anonymous``, for log lines."""
        return "anonymous" if self.kind == "anonymous" else f"{self.kind} {self.name!r}"


ANONYMOUS = Principal("anonymous", "anonymous")
#: The key of a request's ASGI state under which the auth dependency keeps the request's :class:`Principal`.
PRINCIPAL_STATE = "lineage_principal"


#: The kinds of Airflow identity a user scope names: the user, one of its roles, one of its teams.
USER_SCOPE_KINDS = ("user", "role", "team")


@dataclass(frozen=True)
class UserScopes:
    """Namespace patterns for Airflow users, by user name, role or team (``[lineage_provider]
    consumer_user_namespaces``): a user is limited to the union of the patterns of every entry naming it, its
    roles or its teams, exactly as a namespace-limited key; a user no entry names sees every namespace.

    Example: ``role:Viewer = public*`` and ``user:alice = warehouse, lake*`` limit every Viewer to ``public*``
    and alice to ``warehouse`` and ``lake*`` (and ``public*`` too, if she is a Viewer).
    """

    entries: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """``(kind, name, patterns)``."""

    @classmethod
    def parse(cls, text: str) -> UserScopes:
        """Entries ``kind:name = pattern, pattern`` by line (or ``;``), ``#`` lines ignored; raises ``ValueError``
        naming a bad one."""
        entries = []
        kept = "\n".join(line for line in text.splitlines() if not line.strip().startswith("#"))
        for raw in re.split(r"[\n;]", kept):
            line = raw.strip()
            if not line:
                continue
            who, equals, patterns = line.partition("=")
            kind, colon, name = who.strip().partition(":")
            names = tuple(p.strip() for p in patterns.split(",") if p.strip())
            if not equals or not colon or kind.strip() not in USER_SCOPE_KINDS or not name.strip() or not names:
                raise ValueError(
                    f"{line!r} is not a user scope: write 'user:NAME = PATTERN, ...', 'role:NAME = ...' or "
                    "'team:NAME = ...' (namespace patterns as for keys, e.g. 'role:Viewer = public*')"
                )
            entries.append((kind.strip(), name.strip(), names))
        return cls(tuple(entries))

    def scope_for(self, user: str, roles: Iterable[str] = (), teams: Iterable[str] = ()) -> NamespaceScope | None:
        """The namespaces a user with these roles and teams may see: None (every one) when no entry names it."""
        held = {("user", user), *(("role", role) for role in roles), *(("team", team) for team in teams)}
        patterns = [p for kind, name, names in self.entries if (kind, name) in held for p in names]
        return NamespaceScope(tuple(dict.fromkeys(patterns))) if patterns else None
