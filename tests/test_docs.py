"""The documentation site's tutorial runs: every Python block of a tutorial page (and of the concepts
page) is executed in order, its assertions included; the concepts page's Mermaid picture is the one its
code draws. (`mkdocs build --strict` builds the site in CI.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"
PAGES = [
    "tutorial/sql.md",
    "tutorial/datalog.md",
    "tutorial/circuits.md",
    "tutorial/streams.md",
    "tutorial/sdp.md",
    "concepts.md",
]
# (tutorial/cluster.md: its blocks connect to a Spark master)


def blocks(page: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", (DOCS / page).read_text(), re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs(page: str) -> None:
    ns: dict = {}
    code = blocks(page, "python")
    assert code, page
    for block in code:
        exec(compile(block, str(DOCS / page), "exec"), ns)
    if page == "concepts.md":
        assert ns["drawn"] == blocks(page, "mermaid")[0], "the picture is not what its code draws"


def test_every_page_is_in_the_site() -> None:
    site = (DOCS.parent / "mkdocs.yml").read_text()
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages <= set(re.findall(r":\s*(\S+\.md)", site)), pages - set(re.findall(r":\s*(\S+\.md)", site))
