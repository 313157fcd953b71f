"""The OpenAPI schema's shared parts: the error bodies every operation may answer."""

from typing import Any

_DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
# {field: [message, ...]}: the submission service's SubmissionError.as_dict(), a
# serializer's or a filter's field errors ({index: [message]} for an item of a list
# field), or {"detail": "..."}.
_FIELD_ERRORS = {
    "type": "object",
    "additionalProperties": {
        "anyOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "string"},
            {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        ]
    },
}
_ERRORS = {
    "400": ("FieldErrors", "Invalid input: each field at fault with its messages."),
    "401": ("Error", "Not authenticated, or a bad, expired or revoked token."),
    "403": ("Error", "Authenticated, but not allowed."),
    "404": ("Error", "No such object, or one you may not see."),
    "413": ("FieldErrors", "The request body or the uploaded mbox is too large."),
    "429": ("Error", "Too many requests: see the Retry-After header."),
}


def add_error_responses(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """Add the error responses DRF may give to each operation (where the view did not
    document them itself): 400 where the operation takes a body or query parameters, 413
    where it takes a body, 401/403/404/429 everywhere."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = _DETAIL
    schemas["FieldErrors"] = _FIELD_ERRORS
    for path_item in result.get("paths", {}).values():
        for method, op in path_item.items():
            codes = ["401", "403", "404", "429"]
            has_query = any(p.get("in") == "query" for p in op.get("parameters", []))
            if "requestBody" in op or has_query:
                codes.append("400")
            if "requestBody" in op and method in ("post", "put", "patch"):
                codes.append("413")
            responses = op.setdefault("responses", {})
            for code in codes:
                name, description = _ERRORS[code]
                responses.setdefault(
                    code,
                    {
                        "description": description,
                        "content": {
                            "application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}
                        },
                    },
                )
            op["responses"] = dict(sorted(responses.items()))
    return result
