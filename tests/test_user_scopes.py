"""Airflow users limited to namespaces by user, role or team (``[lineage_provider] consumer_user_namespaces``).

The mapping is parsed and applied to real Airflow user objects (SimpleAuthManager's, with a role and teams); the
end-to-end path — a user's token in Airflow's API server answered as a namespace-limited key — is in
``tests/test_security_airflow.py``.
"""

from __future__ import annotations

import pytest

from airflow_lineage_provider.consumer.security.access import NamespaceScope, UserScopes
from airflow_lineage_provider.plugins.consumer import user_scopes

MAPPING = """
# finance analysts see their warehouse; viewers only public data
role:viewer = public*
user:alice = warehouse, s3://lake*
team:finance = fin*; user:bob = warehouse
"""


def test_a_user_sees_the_union_of_every_entry_naming_it_its_roles_or_its_teams() -> None:
    scopes = UserScopes.parse(MAPPING)
    assert scopes.scope_for("alice", ["viewer"], ["finance"]) == NamespaceScope(
        ("public*", "warehouse", "s3://lake*", "fin*")
    )
    assert scopes.scope_for("carol", ["viewer"]) == NamespaceScope(("public*",))
    assert scopes.scope_for("dave", ["op"], ["finance"]) == NamespaceScope(("fin*",))


def test_a_user_no_entry_names_sees_every_namespace() -> None:
    assert UserScopes.parse(MAPPING).scope_for("erin", ["admin"], []) is None
    assert UserScopes.parse("").scope_for("alice", ["viewer"]) is None


@pytest.mark.parametrize(
    "bad", ["viewer = public*", "group:x = a", "role: = a", "role:viewer = ", "role:viewer public*"]
)
def test_a_bad_entry_is_refused_naming_it_and_the_form(bad: str) -> None:
    with pytest.raises(
        ValueError, match=r"consumer_user_namespaces: .* is not a user scope: write 'user:NAME"
    ) as refused:
        user_scopes(bad)
    assert repr(bad.strip()) in str(refused.value)


@pytest.mark.airflow
def test_roles_and_teams_are_read_from_airflows_own_user_objects() -> None:
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    from airflow_lineage_provider.plugins.airflow_guard import user_roles, user_teams

    try:
        user = SimpleAuthManagerUser(username="dave", role="viewer", teams=["finance"])
    except TypeError:  # Airflow releases whose users have no teams
        user = SimpleAuthManagerUser(username="dave", role="viewer")
    scope = UserScopes.parse(MAPPING).scope_for(user.get_name(), user_roles(user), user_teams(user))
    assert scope is not None and "public*" in scope.patterns
    assert user_roles(user) == ["viewer"]
    assert user_teams(user) in ([], ["finance"])
