"""The package's folders stay small enough to show what they hold: no package folder has more than 16 modules.

A package folder is one with an ``__init__.py``; its modules are the ``.py`` files directly in it (``__init__.py``
included). Alembic's ``versions/`` folders are no packages: a sequence of revisions, not a room of the code.
"""

from __future__ import annotations

from pathlib import Path

import airflow_lineage_provider

#: Most modules one package folder may hold.
MOST_MODULES = 16
PACKAGE = Path(airflow_lineage_provider.__file__).parent


def crowded(root: Path, most: int = MOST_MODULES) -> dict[str, int]:
    """``folder → module count`` of each package folder under ``root`` (itself included) past ``most`` modules."""
    found = {}
    for init in sorted(root.rglob("__init__.py")):
        folder = init.parent
        count = sum(1 for path in folder.glob("*.py"))
        if count > most:
            found[folder.relative_to(root.parent).as_posix()] = count
    return found


def test_no_package_folder_holds_more_than_16_modules() -> None:
    assert not crowded(PACKAGE), f"package folders past {MOST_MODULES} modules: group them by job ({crowded(PACKAGE)})"


def test_a_crowded_folder_is_reported(tmp_path: Path) -> None:
    """The check can fail: a package folder of 17 modules (``__init__.py`` counted) is reported; one of 16 and a
    plain folder of 30 are not."""
    package = tmp_path / "pkg"
    for folder, modules in (("pkg", 15), ("pkg/big", 16), ("pkg/versions", 30)):
        (tmp_path / folder).mkdir(exist_ok=True)
        for index in range(modules):
            (tmp_path / folder / f"m{index}.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "big" / "__init__.py").write_text("")
    assert crowded(package) == {"pkg/big": 17}
