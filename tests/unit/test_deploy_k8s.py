"""deploy/k8s without a cluster: the manifests parse, their names and ports wire together, and every
container command (with the ConfigMap's conf file) is accepted by the real Locust/Loadline parsers."""

from __future__ import annotations

import deploy_helpers as dh
import pytest
from spine_helpers import REPO

K8S = REPO / "deploy" / "k8s"


@pytest.fixture(scope="module")
def manifests() -> dict[tuple[str, str], dict]:
    docs = dh.load_k8s(K8S)
    by_name = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    assert len(by_name) == len(docs), "two manifests share a kind and name"
    return by_name


def pod_spec(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"] if doc["kind"] != "Pod" else doc["spec"]


def container(doc: dict) -> dict:
    (only,) = pod_spec(doc)["containers"]
    return only


def conf_text(manifests) -> str:
    return manifests[("ConfigMap", "loadline-conf")]["data"]["loadline.conf"]


def test_expected_objects_and_no_namespace(manifests):
    assert {
        ("ConfigMap", "loadline-conf"),
        ("PersistentVolumeClaim", "loadline-runs"),
        ("Job", "loadline-master"),
        ("Service", "loadline-master"),
        ("Deployment", "loadline-worker"),
        ("Deployment", "loadline-sim"),
        ("Service", "loadline-sim"),
        ("Pod", "loadline-fetch-runs"),
    } <= set(manifests)
    for doc in manifests.values():
        assert "namespace" not in doc["metadata"], doc["metadata"]["name"]


@pytest.mark.parametrize(
    "service, workload",
    [
        (("Service", "loadline-master"), ("Job", "loadline-master")),
        (("Service", "loadline-sim"), ("Deployment", "loadline-sim")),
    ],
)
def test_services_select_their_pods_and_named_ports(manifests, service, workload):
    svc, pods = manifests[service], manifests[workload]
    labels = pods["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    container_ports = {p["name"]: p["containerPort"] for p in container(pods)["ports"]}
    for port in svc["spec"]["ports"]:
        assert container_ports[port["targetPort"]] == port["port"]


def test_master_service_exposes_workers_and_web_ui(manifests):
    ports = {p["port"] for p in manifests[("Service", "loadline-master")]["spec"]["ports"]}
    assert {5557, 8089} <= ports


def test_volumes_reference_existing_configmap_and_claim(manifests):
    for key in [("Job", "loadline-master"), ("Deployment", "loadline-worker"), ("Pod", "loadline-fetch-runs")]:
        for volume in pod_spec(manifests[key]).get("volumes", []):
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in manifests
            if "persistentVolumeClaim" in volume:
                assert ("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"]) in manifests


def test_master_command_and_conf_parse_with_locust(manifests, tmp_path):
    conf = tmp_path / "loadline.conf"
    conf.write_text(conf_text(manifests))
    master = container(manifests[("Job", "loadline-master")])
    args = master["command"]
    assert args[0] == "locust"
    mounts = {m["mountPath"] for m in master["volumeMounts"]}
    assert "/etc/loadline" in mounts and "/runs" in mounts
    assert args[args.index("--config") + 1] == "/etc/loadline/loadline.conf"
    args = [str(conf) if a == "/etc/loadline/loadline.conf" else a for a in args[1:]]
    options = dh.parse_locust(args)
    workers = manifests[("Deployment", "loadline-worker")]["spec"]["replicas"]
    assert options["master"] and options["expect_workers"] == workers
    assert options["out"] == "/runs" and options["metrics_port"] == 9646
    assert options["enable_rebalancing"]  # a lost worker's users move at once: the phase keeps its user count
    # the conf's values arrive, typed
    assert options["locustfile"] == "locustfiles/chat.py" and (REPO / options["locustfile"]).is_file()
    assert options["host"] == "http://loadline-sim:8000" and options["num_users"] == 50
    assert options["max_tokens"] == 256 and options["run_time"] == 600
    env = {e["name"]: e for e in master["env"]}
    assert env["LOCUST_HEADLESS"]["value"] == "true"
    assert env["LOADLINE_API_KEY"]["valueFrom"]["secretKeyRef"]["optional"] is True


def test_worker_command_reaches_the_master_service(manifests, tmp_path):
    conf = tmp_path / "loadline.conf"
    conf.write_text(conf_text(manifests))
    args = container(manifests[("Deployment", "loadline-worker")])["command"]
    options = dh.parse_locust([str(conf) if a == "/etc/loadline/loadline.conf" else a for a in args[1:]])
    assert options["worker"] is True
    assert ("Service", options["master_host"]) in manifests
    assert options["master_port"] in {
        p["port"] for p in manifests[("Service", options["master_host"])]["spec"]["ports"]
    }


def test_simulator_command_uses_real_options_and_profile(manifests):
    args = container(manifests[("Deployment", "loadline-sim")])["command"]
    assert args[:2] == ["loadline", "sim"]
    known = dh.loadline_option_names("sim")
    assert {a for a in args if a.startswith("--")} <= known
    assert (REPO / "configs" / "sim" / f"{args[args.index('--profile') + 1]}.toml").is_file()
    # the conf's default target is this simulator's Service
    assert "http://loadline-sim:8000" in conf_text(manifests)
