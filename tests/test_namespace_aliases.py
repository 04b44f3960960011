"""Namespace aliases: parsing ``alias=canonical`` entries, validation, chains, groups and the fingerprint, and
the option reaching the consumer's settings and app from code, ``airflow-lineage serve`` and Airflow."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from airflow_lineage_provider.namespace_aliases import NamespaceAliases, aliases_from

PG, PG_INTERNAL, PG_SHORT = "postgres://db:5432", "postgresql://db.internal:5432", "pg://db"


def test_entries_are_read_from_newlines_and_commas_with_whitespace_trimmed() -> None:
    aliases = NamespaceAliases.parse(
        f"  {PG_INTERNAL} = {PG} ,\n\n{PG_SHORT}={PG}\r\n  hive://old = hive://metastore:9083 "
    )
    assert aliases.canonical(PG_INTERNAL) == PG
    assert aliases.canonical(PG_SHORT) == PG
    assert aliases.canonical("hive://old") == "hive://metastore:9083"
    assert aliases.canonical(PG) == PG and aliases.canonical("warehouse") == "warehouse"
    assert aliases.names_of(PG) == (PG_SHORT, PG, PG_INTERNAL)
    assert aliases.names_of(PG_SHORT) == (PG_SHORT, PG, PG_INTERNAL)  # any name of the group
    assert aliases.names_of("warehouse") == ("warehouse",)
    assert aliases.groups() == {
        "hive://metastore:9083": ("hive://metastore:9083", "hive://old"),
        PG: (PG_SHORT, PG, PG_INTERNAL),
    }
    assert aliases and not NamespaceAliases() and not NamespaceAliases.parse("  ,\n ")


def test_an_alias_ends_at_its_first_equals_sign_and_names_are_exact_strings() -> None:
    aliases = NamespaceAliases.parse("jdbc:db=jdbc:db?ssl=true")
    assert aliases.mapping == {"jdbc:db": "jdbc:db?ssl=true"}
    assert aliases.canonical("JDBC:DB") == "JDBC:DB"  # no case folding, no URI normalisation
    assert aliases.canonical("jdbc:db/") == "jdbc:db/"


@pytest.mark.parametrize("entry", ["just-a-namespace", "=postgres://db:5432", "pg://db=", " = "])
def test_an_entry_that_is_not_alias_equals_canonical_is_named_with_the_expected_form(entry: str) -> None:
    with pytest.raises(ValueError, match=r"entry .* is not of the form alias=canonical, e\.g\. "):
        NamespaceAliases.parse(f"a=b, {entry}")


def test_chains_resolve_to_their_end_in_any_order() -> None:
    for text in ("a=b, b=c, c=d", "c=d\nb=c\na=b"):
        aliases = NamespaceAliases.parse(text)
        assert aliases.mapping == {"a": "d", "b": "d", "c": "d"}
        assert aliases.names_of("b") == ("a", "b", "c", "d")
        assert aliases.groups() == {"d": ("a", "b", "c", "d")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=b, b=a", r"cycle: 'a' -> 'b' -> 'a'"),
        ("x=a, a=b, b=c, c=a", r"cycle: 'a' -> 'b' -> 'c' -> 'a'"),
        ("a=a", r"'a' is mapped to itself"),
        ("pg://db=postgres://db:5432, pg://db=postgres://other:5432", r"'pg://db' is mapped to two canonical "
         r"namespaces, 'postgres://db:5432' and 'postgres://other:5432'"),
    ],
)  # fmt: skip
def test_cycles_and_an_alias_with_two_canonicals_are_refused_naming_them(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NamespaceAliases.parse(text)


def test_pairs_are_checked_when_built_in_code_too() -> None:
    with pytest.raises(ValueError, match="both names must be non-empty"):
        NamespaceAliases((("", "b"),))
    with pytest.raises(ValueError, match="cycle"):
        NamespaceAliases((("a", "b"), ("b", "a")))
    assert NamespaceAliases((("a", "b"), ("a", "b"))).pairs == (("a", "b"),)  # a repeated entry is one


def test_equal_mappings_compare_equal_and_share_a_stable_fingerprint() -> None:
    one = NamespaceAliases.parse("a=b, b=c")
    same = NamespaceAliases((("b", "c"), ("a", "b")))
    resolved_alike = NamespaceAliases.parse("a=c, b=c")
    assert one == same and hash(one) == hash(same)
    assert one.fingerprint == same.fingerprint == resolved_alike.fingerprint  # the mapping, not its spelling
    assert len(one.fingerprint) == 64 and one.fingerprint != NamespaceAliases().fingerprint
    assert NamespaceAliases().fingerprint == NamespaceAliases.parse("").fingerprint
    # Stable across processes and releases: a hash of the sorted resolved pairs, never of Python's hash().
    assert (
        NamespaceAliases.parse("a=b").fingerprint == "db8992cf941b185a1c5bbcfbdc3f43204fe09d42b1a57ff584f6ad2e5e6dfdbd"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.pairs = ()  # type: ignore[misc]


def test_text_round_trips_and_other_forms_are_accepted() -> None:
    aliases = NamespaceAliases.parse("pg://db=postgres://db:5432\nx=y")
    assert NamespaceAliases.parse(str(aliases)) == aliases
    assert aliases_from(None) == NamespaceAliases() == aliases_from("")
    assert aliases_from([("x", "y"), ("pg://db", "postgres://db:5432")]) == aliases
    assert aliases_from(aliases) is aliases


def test_the_settings_and_the_app_carry_the_aliases_from_text_pairs_or_an_object(tmp_path: Path) -> None:
    from airflow_lineage_provider.consumer import create_app
    from airflow_lineage_provider.consumer.security.access import Access
    from airflow_lineage_provider.consumer.settings import ConsumerSettings

    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    assert ConsumerSettings(url).namespace_aliases == NamespaceAliases()
    expected = NamespaceAliases.parse(f"{PG_SHORT}={PG}")
    for given in (f"{PG_SHORT}={PG}", [(PG_SHORT, PG)], expected):
        app = create_app(url, anonymous=Access.READ, namespace_aliases=given)
        assert app.state.namespace_aliases == app.state.settings.namespace_aliases == expected
    with pytest.raises(ValueError, match="cycle"):
        create_app(url, anonymous=Access.READ, namespace_aliases="a=b, b=a")


def test_serve_takes_repeated_namespace_alias_options_each_one_entry() -> None:
    from airflow_lineage_provider.cli.serve_command import namespace_aliases, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["serve", "--store", "sqlite://", "--namespace-alias", f"{PG_SHORT}={PG}", "--namespace-alias", "a,b=c"]
    )
    assert args.retention_check_interval_hours == 24.0
    assert namespace_aliases(args.namespace_alias).mapping == {PG_SHORT: PG, "a,b": "c"}  # a comma is a name's
    with pytest.raises(ValueError, match=r"--namespace-alias takes ALIAS=CANONICAL, .* got 'pg://db'"):
        namespace_aliases([PG_SHORT])


def test_airflow_options_reach_the_plugins_consumer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_lineage_provider import conf
    from airflow_lineage_provider.plugins.consumer import consumer_apps

    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_STORE_URL", f"sqlite:///{tmp_path / 'lineage.db'}")
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_API_KEY", "k3y-plugged")
    assert conf.consumer_namespace_aliases() == NamespaceAliases()
    assert conf.consumer_retention_check_interval_hours() == 24.0
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_NAMESPACE_ALIASES", f"{PG_SHORT}={PG}\n{PG_INTERNAL}={PG}")
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_RETENTION_CHECK_INTERVAL_HOURS", "0.5")
    [mounted] = consumer_apps()
    app = mounted["app"]
    assert app.state.namespace_aliases.names_of(PG) == (PG_SHORT, PG, PG_INTERNAL)
    assert app.state.settings.retention_check_interval_hours == 0.5
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_NAMESPACE_ALIASES", "a=b, b=a")
    with pytest.raises(ValueError, match="consumer_namespace_aliases: namespace aliases form a cycle"):
        conf.consumer_namespace_aliases()
    assert consumer_apps() == []  # a bad option keeps the consumer unmounted, with one error line
    monkeypatch.setenv("AIRFLOW__LINEAGE_PROVIDER__CONSUMER_RETENTION_CHECK_INTERVAL_HOURS", "soon")
    with pytest.raises(ValueError, match="consumer_retention_check_interval_hours must be a number of hours"):
        conf.consumer_retention_check_interval_hours()
