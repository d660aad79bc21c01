"""Validates JSON documents against a published schema with jsonschema.

Usage: validate.py SCHEMA POINTER < documents
SCHEMA is a JSON Schema or an OpenAPI document; POINTER is the JSON pointer
of the schema to apply inside it ("" for the whole document), so that an
OpenAPI request body's `$ref`s to `#/components/...` resolve in their own
document. The documents are read one JSON value per line; for each, one
line is printed: "ok" or every error, "; "-separated. The draft is the one
the schema's `$schema` names (Draft 2020-12 when it names none, as OpenAPI
3.0 documents do not).
"""

import json
import sys

from jsonschema import validators
from jsonschema.validators import Draft202012Validator


def main():
    path, pointer = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    schema = dict(document)
    if pointer:
        schema["$ref"] = "#" + pointer
    cls = validators.validator_for(document, default=Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema)
    for line in sys.stdin:
        if not line.strip():
            continue
        errors = sorted(validator.iter_errors(json.loads(line)), key=lambda e: list(e.path))
        if errors:
            print("; ".join(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors))
        else:
            print("ok")
        sys.stdout.flush()


main()
