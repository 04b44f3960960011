"""Dataset names that are Jinja templates (``orders_{{ ds_nodash }}``): kept as written, never rendered.

At design time there is no run, so a templated name has no value. It is published as the pattern it is,
with the ``airflowLineageProvider_templatedName`` facet saying which parts are templates and giving a regular
expression every rendered name matches (see :mod:`airflow_lineage_provider.facets.templated_name`).

Naming (connectors, the OpenLineage naming rules) must not cut a template apart — ``{{ ti.map_index }}``
holds a dot, which table naming reads as a schema separator — so templates are swapped for placeholder
words before naming (:func:`protect`) and put back afterwards (:class:`Protected.restore`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

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
