#!/usr/bin/env python3
"""Extracts, from slurmrestd's OpenAPI specifications, the shape of every field of a job
(`vX_job_info`) and of a node (`vX_node`) — what gpol's Slurm readers need to be checked
against each data-parser version — into fields.json beside this script, each version
with where its specification came from.

    extract.py SOURCE SPEC.json...

SOURCE names where the files are, e.g. `SchedMD/slurm@COMMIT
testsuite/python/data/openapi_specs` (v0.0.41 on); run again with another SOURCE to add
versions (v0.0.40, which SchedMD does not publish there: `jontk/slurm-client@COMMIT
openapi-specs`, the specification slurmrestd 25.05.0 generates for that data parser).

A shape is `string`, `integer`, `boolean`, `number`, `no_val` (Slurm's
{set, infinite, number} struct), `string_list` (a list of strings, or a csv_string),
or `other`.
"""
import json
import os
import sys


def shape(spec, schemas):
    if "$ref" in spec:
        return shape(schemas[spec["$ref"].split("/")[-1]], schemas)
    # Named vX_uint32_no_val_struct from v0.0.41, vX_uint32_no_val in v0.0.40: the shape
    # tells.
    if {"set", "infinite", "number"} <= set(spec.get("properties", {})):
        return "no_val"
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items", {})
        return "string_list" if shape(items, schemas) == "string" else "other"
    if kind in ("string", "integer", "boolean", "number"):
        return kind
    return "other"


def main():
    source, paths = sys.argv[1], sys.argv[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "fields.json")) as f:
            out = json.load(f)
    except FileNotFoundError:
        out = {"sources": {}, "versions": {}}
    for path in sorted(paths):
        with open(path) as f:
            spec = json.load(f)
        schemas = spec["components"]["schemas"]
        prefix = next(k for k in schemas if k.endswith("_job_info")).removesuffix("_job_info")
        version = {}
        for record, name in (("job", "_job_info"), ("node", "_node")):
            props = schemas[prefix + name]["properties"]
            version[record] = {k: shape(v, schemas) for k, v in sorted(props.items())}
        out["versions"][prefix] = version
        out["sources"][prefix] = f"{source} {os.path.basename(path)}"
    with open(os.path.join(here, "fields.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
