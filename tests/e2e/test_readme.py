"""The README's "Use it" section, run as written: every ``bash`` block in order, in one shell,
from the repository root, against a freshly started `engram serve` and its first agent."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO
from tests.e2e.conftest import TOKEN, Served

SECTION = re.compile(r"^## Use it\n(.*?)^## ", re.MULTILINE | re.DOTALL)
BASH = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)


def use_it_script() -> str:
    """The bash blocks of the README's "Use it" section, joined in order."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = SECTION.search(readme)
    assert section is not None, "README.md has no '## Use it' section"
    blocks = BASH.findall(section.group(1))
    assert len(blocks) >= 4, "expected the agent, REST, MCP and admin blocks"
    return "set -euo pipefail\n" + "\n".join(blocks)


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("bash")), reason="needs curl, bash")
def test_the_readme_use_it_section_runs_as_written(first_serve: Served) -> None:
    """The bash blocks of the README's "Use it" section run as written against a served engram and
    show the expected results.
    """
    found = TOKEN.search(first_serve.output())
    assert found is not None, first_serve.output()
    env = {**first_serve.env, "ENGRAM_TOKEN": found.group(0), "ENGRAM_URL": first_serve.base}
    ran = subprocess.run(  # noqa: S603 - the README's own commands against a test server
        ["bash", "-c", use_it_script()],  # noqa: S607
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert 0 == ran.returncode, f"stdout:\n{ran.stdout}\nstderr:\n{ran.stderr}"
    out = ran.stdout
    assert re.search(r'(?im)^etag: "1"', out), out
    assert "stale If-Match: 409" in out
    lines = out.splitlines()
    assert "2" in lines  # the version the update wrote
    assert "The billing service stores invoices in PostgreSQL 17." in lines  # found by search
    assert "The billing service stores invoices in PostgreSQL 16." in lines  # first in history
    assert "forgotten" in lines
    assert "approved" in lines  # remembered over MCP
    assert "The on-call rotation hands over every Monday at nine." in lines  # recalled over MCP
    assert "Traceback" not in ran.stderr
    assert "Traceback" not in first_serve.output()
