"""Property-based fuzzing of the REST API from its own OpenAPI document (schemathesis).

The app runs in-process on a real kernel and database; schemathesis drives it on its own event
loop, so the app opens its kernel there (its lifespan), and the first-agent bootstrap hands us
an admin token. Every /v1 operation gets valid and invalid requests; no answer may be a 5xx,
and answers must match what the document promises (status, content type, headers, schema).
Invalid requests need not be refused outright: unknown query parameters are ignored, as HTTP
servers usually do, so schemathesis's negative-data check is not applied.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from engram.config import EngramSettings
from engram.protocols.http.app import create_app
from tests.conftest import ScratchDatabase

TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")
POSITIVE_EXAMPLES = 15
NEGATIVE_EXAMPLES = 10
CONFORMANCE = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _run(operation: Any, mode: schemathesis.GenerationMode, headers: dict[str, str]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=POSITIVE_EXAMPLES
        if mode is schemathesis.GenerationMode.POSITIVE
        else NEGATIVE_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case: schemathesis.Case) -> None:
        response = case.call(headers=headers)
        case.validate_response(response, checks=CONFORMANCE, headers=headers)

    exercise()


@pytest.mark.slow
def test_no_operation_answers_a_5xx_or_breaks_its_documented_contract(
    database: ScratchDatabase, model_dir: Path, tmp_path: Path
) -> None:
    announced: list[str] = []
    app = create_app(
        EngramSettings(
            database_url=database.runtime_url,
            migrate_on_start=False,
            data_dir=tmp_path,
            embedding_model_path=model_dir,
            retry_initial_wait_seconds=0.01,
        ),
        announce=announced.append,
    )
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)  # starts the lifespan
        found = TOKEN.search(" ".join(announced))
        assert found is not None, announced
        headers = {"Authorization": f"Bearer {found.group(0)}"}
        operations = [
            result.ok() for result in schema.include(path_regex=r"^/v1/").get_all_operations()
        ]
        assert len(operations) >= 11
        for operation in operations:
            for mode in (
                schemathesis.GenerationMode.POSITIVE,
                schemathesis.GenerationMode.NEGATIVE,
            ):
                _run(operation, mode, headers)
    finally:
        asgi.shutdown_lifespans()  # closes the kernel before the database is dropped
