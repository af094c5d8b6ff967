#!/usr/bin/env python3
"""Extracts, from SchedMD's published OpenAPI specifications of slurmrestd
(SchedMD/slurm, testsuite/python/data/openapi_specs/openapi_spec_vNN.json), the shape of
every field of a job (`vX_job_info`) and of a node (`vX_node`) — what gpol's Slurm readers
need to be checked against each data-parser version — into fields.json beside this script.

    extract.py COMMIT SPEC.json...

A shape is `string`, `integer`, `boolean`, `number`, `no_val` (Slurm's
{set, infinite, number} struct), `string_list` (a list of strings, or a csv_string),
or `other`.
"""
import json
import os
import sys


def shape(spec, schemas):
    if "$ref" in spec:
        name = spec["$ref"].split("/")[-1]
        if "_no_val_struct" in name:
            return "no_val"
        return shape(schemas[name], schemas)
    kind = spec.get("type")
    if kind == "array":
        items = spec.get("items", {})
        return "string_list" if shape(items, schemas) == "string" else "other"
    if kind in ("string", "integer", "boolean", "number"):
        return kind
    return "other"


def main():
    commit, paths = sys.argv[1], sys.argv[2:]
    out = {"source": f"SchedMD/slurm@{commit} testsuite/python/data/openapi_specs", "versions": {}}
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
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "fields.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
