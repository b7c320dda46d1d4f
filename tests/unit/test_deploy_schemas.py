"""The deploy files checked offline against their formats' own schemas, as `kubectl apply --dry-run`
and `docker compose config` would check them, without a cluster or a Docker engine.

Kubernetes: every manifest under deploy/k8s against the API schemas kubernetes-validate ships
(strict: an unknown field, a typo'd key, is an error, as the API server's strict field validation
makes it). Compose: docker-compose.yml against the Compose Specification's JSON Schema
(tests/data/compose-spec.json, from github.com/compose-spec/compose-spec, schema/compose-spec.json,
Apache-2.0; the spec repository publishes no package). The commands inside these files are run by
tests/e2e/test_deploy_compose.py and tests/unit/test_deploy_k8s.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import deploy_helpers as dh
import jsonschema
import kubernetes_validate
import pytest
from kubernetes_validate.utils import ValidationError

REPO = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.30"  # a long-supported release; the manifests use only stable APIs (apps/v1, batch/v1, v1)
COMPOSE_SCHEMA = json.loads((REPO / "tests" / "data" / "compose-spec.json").read_text())
DOCS = dh.load_k8s(REPO / "deploy" / "k8s")


def _k8s_errors(doc: dict) -> str | None:
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except ValidationError as exc:
        return str(exc)
    return None


def _compose_errors(doc: dict) -> list[str]:
    # the schema says draft-07 without the "#" jsonschema looks for: name the draft explicitly
    return [e.message for e in jsonschema.Draft7Validator(COMPOSE_SCHEMA).iter_errors(doc)]


@pytest.mark.parametrize("doc", DOCS, ids=[f"{d['kind']}/{d['metadata']['name']}" for d in DOCS])
def test_every_kubernetes_manifest_is_valid_for_the_api(doc):
    assert _k8s_errors(doc) is None


def test_the_kubernetes_check_catches_a_typo_and_a_wrong_type():
    deployment = next(d for d in DOCS if d["kind"] == "Deployment")
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["containers"][0]["comand"] = ["loadline"]
    wrong = copy.deepcopy(deployment)
    wrong["spec"]["replicas"] = "two"
    assert _k8s_errors(typo) and _k8s_errors(wrong)


def test_the_compose_file_follows_the_compose_specification():
    assert _compose_errors(dh.load_compose()) == []
    assert {"services"} <= set(COMPOSE_SCHEMA["properties"])  # the schema is the spec's, not an empty one


def test_the_compose_check_catches_a_typo_and_a_wrong_type():
    typo, wrong = dh.load_compose(), dh.load_compose()
    name = next(iter(typo["services"]))
    typo["services"][name]["restart_policy"] = "always"  # compose calls it `restart`
    wrong["services"][name]["ports"] = {"8089": "8089"}
    assert _compose_errors(typo) and _compose_errors(wrong)
