"""Dataset names that are Jinja templates (``orders_{{ ds_nodash }}``): kept as written at design time, and
given the date macros they read at run time when the run has no logical date (:func:`fill_run_dates`).

At design time there is no run, so a templated name has no value. It is published as the pattern it is,
with the ``airflowLineageProvider_templatedName`` facet saying which parts are templates and giving a regular
expression every rendered name matches (see :mod:`airflow_lineage_provider.facets.design_time`).

Naming (connectors, the OpenLineage naming rules) must not cut a template apart — ``{{ ti.map_index }}``
holds a dot, which table naming reads as a schema separator — so templates are swapped for placeholder
words before naming (:func:`protect`) and put back afterwards (:class:`Protected.restore`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

#: Jinja's default delimiters: expressions, statements and comments.
_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_EXPRESSION = re.compile(r"\{\{.*?\}\}", re.DOTALL)
_STATEMENT = re.compile(r"\{%.*?%\}", re.DOTALL)
_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)
_PLACEHOLDER = "alptemplate{index}x"
_PLACEHOLDERS = re.compile(r"alptemplate(\d+)x")


def is_templated(text: str | None) -> bool:
    """Whether ``text`` holds a Jinja expression, statement or comment."""
    return bool(text) and _TEMPLATE.search(text) is not None  # type: ignore[arg-type]


def templates_in(text: str) -> list[str]:
    """The Jinja parts of ``text``, in order (``["{{ ds_nodash }}"]`` for ``"orders_{{ ds_nodash }}"``)."""
    return _TEMPLATE.findall(text)


def name_regex(text: str) -> str:
    """A regular expression (anchored; Python, Java and PCRE syntax) that every rendering of ``text`` matches.

    An expression (``{{ ... }}``) may render as any text; a comment as nothing; everything from the first
    statement (``{% ... %}``) to the end of the last one as any text, since a statement decides what the text
    between its tags becomes.
    """
    text = _COMMENT.sub("", text)
    statements = list(_STATEMENT.finditer(text))
    if statements:
        head, tail = text[: statements[0].start()], text[statements[-1].end() :]
        return "^" + _expressions_regex(head) + "(.*)" + _expressions_regex(tail) + "$"
    return "^" + _expressions_regex(text) + "$"


def _expressions_regex(text: str) -> str:
    return "(.*)".join(re.escape(part) for part in _EXPRESSION.split(text))


#: What Airflow's date macros render as, to match renderings of a templated name more tightly than
#: :func:`name_regex` (any text): ``orders_{{ ds_nodash }}`` matches ``orders_20260201``, not ``orders_summary``.
MACRO_FORMATS = {
    "ds": r"\d{4}-\d{2}-\d{2}",
    "ds_nodash": r"\d{8}",
    "ts_nodash": r"\d{8}T\d{6}",
    "ts_nodash_with_tz": r"\d{8}T\d{6}[+-]\d{4}",
    "ts": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?[+-]\d{2}:\d{2}",
    "ti.map_index": r"-?\d+",
}

#: The free parts (matching any text) a rendering regex may hold: each more one multiplies the time a failed
#: match can take by the name's length, and a consumer matches names from anyone.
MAX_FREE_PARTS = 2


@lru_cache(maxsize=4096)
def rendering_regex(text: str, max_free_parts: int | None = None) -> str | None:
    """The regular expression (anchored) the renderings of ``text`` are matched with: Airflow's date macros
    (:data:`MACRO_FORMATS`, filters and other expressions excepted) as what they render to, every other
    expression as any text, comments as nothing, and statements as :func:`name_regex` has them.

    ``None`` when the regex would hold more than ``max_free_parts`` parts that match any text.
    """
    text = _COMMENT.sub("", text)
    statements = list(_STATEMENT.finditer(text))
    if statements:
        head, tail = text[: statements[0].start()], text[statements[-1].end() :]
        parts = [*_rendering_parts(head), "(.*)", *_rendering_parts(tail)]
    else:
        parts = _rendering_parts(text)
    if max_free_parts is not None and parts.count("(.*)") > max_free_parts:
        return None
    return "^" + "".join(parts) + "$"


def _rendering_parts(text: str) -> list[str]:
    parts = []
    for index, part in enumerate(re.split(r"(\{\{.*?\}\})", text, flags=re.DOTALL)):
        if index % 2 == 0:
            parts.append(re.escape(part))
            continue
        macro = MACRO_FORMATS.get(part[2:-2].strip())
        parts.append(f"({macro})" if macro is not None else "(.*)")
    return parts


@lru_cache(maxsize=1024)
def template_variables(text: str) -> tuple[str, ...]:
    """The context variables the templates in ``text`` read (``("ds_nodash",)``, ``("ti",)``), sorted; empty
    when Jinja cannot parse them."""
    try:
        from jinja2 import Environment, meta

        return tuple(sorted(meta.find_undeclared_variables(Environment().parse(text))))
    except Exception:  # a template Jinja rejects is still published as written
        return ()


@dataclass
class Protected:
    """Texts whose templates were replaced by placeholder words; :meth:`restore` puts them back."""

    templates: list[str] = field(default_factory=list)

    def protect(self, text: str | None) -> str | None:
        """``text`` with each template replaced by a placeholder word that naming keeps as it is."""
        if not text or not is_templated(text):
            return text

        def placeholder(match: re.Match[str]) -> str:
            self.templates.append(match.group(0))
            return _PLACEHOLDER.format(index=len(self.templates) - 1)

        return _TEMPLATE.sub(placeholder, text)

    def restore(self, text: str) -> str:
        """``text`` with the placeholders of :meth:`protect` replaced by their templates again."""
        if not self.templates:
            return text
        return _PLACEHOLDERS.sub(lambda m: self.templates[int(m.group(1))], text)


#: The context keys Airflow derives from a run's logical date that :func:`fill_run_dates` supplies when the run
#: has none. ``logical_date`` and the data interval themselves are never invented.
RUN_DATE_MACROS = ("ds", "ds_nodash", "ts", "ts_nodash", "ts_nodash_with_tz")


def fill_run_dates(context: MutableMapping[str, Any]) -> str | None:
    """Supply the date macros (:data:`RUN_DATE_MACROS`) to the Airflow ``context`` of a run that has no logical
    date, so ``orders_{{ ds_nodash }}`` renders instead of failing with ``'ds_nodash' is undefined``.

    Airflow 3 leaves ``logical_date``, ``ds``, ``ts`` and the data interval out of the context of a run created
    without a logical date (the REST API's and the UI's default, ``"logical_date": null``, and asset-triggered
    runs). The macros are then computed the way Airflow computes them from a logical date, from the run's data
    interval start when it has one, else from its ``run_after`` (when the run was due; for a manual run, when it
    was triggered). One INFO line in the task log names the source and the value. Keys already in the context
    are never replaced; a context with a logical date is left as it is.

    Returns what the dates came from (``"run_after"`` or ``"data_interval_start"``), or ``None`` when nothing
    was supplied.
    """
    if context.get("logical_date") is not None or all(key in context for key in RUN_DATE_MACROS):
        return None
    dag_run = context.get("dag_run")
    source, moment = "data_interval_start", getattr(dag_run, "data_interval_start", None)
    if not isinstance(moment, datetime):
        source, moment = "run_after", getattr(dag_run, "run_after", None)
    if not isinstance(moment, datetime):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    ts = moment.isoformat()
    macros = {
        "ds": moment.strftime("%Y-%m-%d"),
        "ds_nodash": moment.strftime("%Y%m%d"),
        "ts": ts,
        "ts_nodash": moment.strftime("%Y%m%dT%H%M%S"),
        "ts_nodash_with_tz": ts.replace("-", "").replace(":", ""),
    }
    for key, value in macros.items():
        context.setdefault(key, value)
    log.info(
        "Lineage: run %r of DAG %r has no logical date; %s render from its %s (%s).",
        getattr(dag_run, "run_id", "?"),
        getattr(dag_run, "dag_id", "?"),
        ", ".join(RUN_DATE_MACROS),
        source,
        ts,
    )
    return source
