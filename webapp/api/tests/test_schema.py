"""The OpenAPI schema committed at docs/api/openapi.yaml is the one the code generates (and
is valid OpenAPI); /api/schema/ serves it."""

import io
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "api" / "openapi.yaml"
REGENERATE = "make api-schema"


def _generated() -> str:
    out = io.StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    return out.getvalue()


def test_the_committed_schema_is_the_generated_one():
    committed = SCHEMA.read_text() if SCHEMA.exists() else ""
    assert _generated() == committed, (
        f"{SCHEMA.relative_to(SCHEMA.parents[2])} differs from the schema the code "
        f"generates: run `{REGENERATE}` and commit the result"
    )


@pytest.mark.django_db
def test_the_schema_is_served(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    served = yaml.safe_load(response.content)
    assert served == yaml.safe_load(SCHEMA.read_text())
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.json()["info"]["title"] == "rcubench API"
