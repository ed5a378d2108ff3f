"""The Kubernetes manifests (``deploy/kubernetes``): every kustomization renders (``kubectl
kustomize``), every object it renders is valid against the Kubernetes API's schemas
(kubernetes-validate, strict: an unknown field is an error) or, for KEDA's ScaledObject and the
Prometheus operator's ServiceMonitor, against the schemas in ``tests/deploy/schemas``, and the
rules the service depends on hold: unprivileged read-only containers, grace periods that cover the
shutdown timeouts, one reaper, migrations in a Job of their own, probes on the probe port, secrets
by reference, only settings of the image's contract, and a ci overlay that podman kube play runs.
"""

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy/kubernetes"
SCHEMAS = Path(__file__).resolve().parent / "schemas"

APPS = ("base", "overlays/production", "overlays/ci")
MIGRATIONS = {
    "migrate": "base",
    "overlays/production/migrate": "overlays/production",
    "overlays/ci/migrate": "overlays/ci",
}
KUSTOMIZATIONS = APPS + tuple(MIGRATIONS)
CLUSTERS = ("base", "overlays/production")  # what runs on a cluster (ci runs under podman)
KUBERNETES_VERSIONS = ("1.30", "1.37")  # the oldest we support, the newest kubernetes-validate knows
CRD_SCHEMAS = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh-v1alpha1-scaledobject.json",
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com-v1-servicemonitor.json",
}
WORKLOADS = {"Deployment", "StatefulSet", "Job"}
SECRET = "pipeline-control-secrets"
UID = 10001
MARGIN_SEC = 10  # beyond a shutdown timeout, before SIGKILL
PROBE_PORT, PROBE_PATHS = 9000, {"/health", "/status"}
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")

# The image's contract: the settings a manifest may name, each read by the image's code (a
# NAME_FILE by settings.env_secret: NAME's value from the file NAME_FILE names).
CONTRACT = {
    "DATABASE_URL_FILE", "PIPELINE_DATABASE_URL_FILE", "SECRET_KEY_FILE", "ALLOWED_HOSTS", "HTTPS",
    "WORKERS_JSON", "WEB_WORKERS", "WEB_GRACEFUL_TIMEOUT", "DL_SHUTDOWN_TIMEOUT_SEC", "WEB_BIND", "WEB_PROBE_BIND",
    "PIPELINE_ROLE",
}  # fmt: skip
CONTRACT_FILES = (
    "docker-entrypoint.sh",
    "Dockerfile",
    "pipeline_project/settings.py",
    "pipeline_project/environment.py",
    "pipeline_project/gunicorn_conf.py",
)


def kubectl() -> str:
    beside = Path(sys.executable).parent / "kubectl"  # a kubectl installed into the venv, if any
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("kubectl (its kustomize renders the manifests) is on CI's machine image, but not on PATH")
    pytest.skip("kubectl not on PATH: its kustomize renders the manifests")


@functools.cache
def _rendered(path: str) -> str:
    result = subprocess.run(
        [kubectl(), "kustomize", str(KUBE / path)], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(path: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(_rendered(path)) if doc]


def pods(docs: list[dict]):
    """(object, pod spec) of every object that makes pods."""
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            yield doc, doc["spec"]["template"]["spec"]
        elif doc["kind"] == "Pod":
            yield doc, doc["spec"]


def containers(spec: dict) -> list[dict]:
    return spec.get("initContainers", []) + spec["containers"]


def every_container(docs: list[dict]):
    for doc, spec in pods(docs):
        for container in containers(spec):
            yield doc, spec, container


def role(container: dict) -> str | None:
    """The image's role: the entrypoint's first argument."""
    return (container.get("args") or [None])[0]


def environment(container: dict, docs: list[dict]) -> dict[str, str]:
    maps = {doc["metadata"]["name"]: doc.get("data", {}) for doc in docs if doc["kind"] == "ConfigMap"}
    env = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    env.update({item["name"]: item.get("value") for item in container.get("env", [])})
    return env


def flag(container: dict, name: str) -> str | None:
    args = container.get("args", [])
    return args[args.index(name) + 1] if name in args else None


def pre_stop_sec(container: dict) -> int:
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    if "sleep" in pre_stop:
        return int(pre_stop["sleep"]["seconds"])
    command = pre_stop.get("exec", {}).get("command", [])
    return int(command[1]) if command[:1] == ["sleep"] else 0


def named(docs: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and selector.items() <= labels.items()


def pod_labels(doc: dict) -> dict:
    return (doc["spec"]["template"]["metadata"] if doc["kind"] in WORKLOADS else doc["metadata"]).get("labels", {})


def test_the_suite_renders_every_kustomization():
    found = {path.parent.relative_to(KUBE).as_posix() for path in KUBE.rglob("kustomization.yaml")}

    assert found == set(KUSTOMIZATIONS)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_object_is_valid_against_its_schema(path, version):
    errors = []
    for doc in render(path):
        where = f"{doc['kind']}/{doc['metadata']['name']}"
        crd = CRD_SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        if crd:
            schema = json.loads((SCHEMAS / crd).read_text())
            errors += [f"{where}: {error.json_path}: {error.message}" for error in validator(schema).iter_errors(doc)]
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{where}: {'.'.join(map(str, error.path))}: {error.message}")
        except kubernetes_validate.SchemaNotFoundError as error:
            errors.append(f"{where}: {error.message}")

    assert errors == []


def validator(schema: dict) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_the_validators_reject_unknown_fields_and_missing_ones():
    deployment = next(doc for doc in render("base") if doc["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolice"] = "Never"  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)

    scaled = named(render("overlays/production"), "ScaledObject")["pipeline-control-worker"]
    scaled_schema = json.loads((SCHEMAS / CRD_SCHEMAS["keda.sh/v1alpha1", "ScaledObject"]).read_text())
    assert validator(scaled_schema).is_valid(scaled)
    typo = {**scaled, "spec": {**scaled["spec"], "minReplicas": 1}}
    no_query = json.loads(json.dumps(scaled))
    del no_query["spec"]["triggers"][0]["metadata"]["query"]
    assert not validator(scaled_schema).is_valid(typo) and not validator(scaled_schema).is_valid(no_query)

    monitor = named(render("overlays/production"), "ServiceMonitor")["pipeline-control"]
    monitor_schema = json.loads((SCHEMAS / CRD_SCHEMAS["monitoring.coreos.com/v1", "ServiceMonitor"]).read_text())
    assert validator(monitor_schema).is_valid(monitor)
    monitor["spec"]["endpoints"][0]["interval"] = "30 seconds"
    assert not validator(monitor_schema).is_valid(monitor)


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_container_runs_unprivileged_on_a_read_only_root(path):
    for doc, spec, container in every_container(render(path)):
        effective = {**spec["securityContext"], **container.get("securityContext", {})}
        where = f"{doc['metadata']['name']}/{container['name']}"
        assert effective["runAsNonRoot"] is True and effective["runAsUser"] == UID, where
        assert effective["runAsGroup"] == UID, where
        assert effective["allowPrivilegeEscalation"] is False and effective["readOnlyRootFilesystem"] is True, where
        assert effective["capabilities"] == {"drop": ["ALL"]}, where
        assert effective["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert not effective.get("privileged"), where
        assert not spec.get("hostPID") and not spec.get("hostIPC"), where
        assert spec["automountServiceAccountToken"] is False, where


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_containers_write_only_to_tmp_var_and_the_engines_store(path):
    for doc, spec, container in every_container(render(path)):
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        claims = {claim["metadata"]["name"] for claim in doc["spec"].get("volumeClaimTemplates", [])}
        mounts = {mount["mountPath"]: mount for mount in container.get("volumeMounts", [])}
        where = f"{doc['metadata']['name']}/{container['name']}"
        tmp = volumes[mounts["/tmp"]["name"]]["emptyDir"]
        # Not shared within a pod: the entrypoint keeps the container's role there (for `health`).
        sharing = [other for other in containers(spec) if mounts["/tmp"] in other.get("volumeMounts", [])]
        assert sharing == [container], where
        assert tmp["medium"] == "Memory" and tmp["sizeLimit"], where
        assert "sizeLimit" in volumes[mounts["/app/var"]["name"]]["emptyDir"], where
        for mount_path, mount in mounts.items():
            if mount_path == "/app/var/state-store":  # the engine's, on its claim
                assert container["name"] in {"engine", "engine-web"}, where
                assert mount["name"] in claims or "persistentVolumeClaim" in volumes[mount["name"]], where
            elif mount_path not in {"/tmp", "/app/var", "/dev/shm"}:
                assert mount.get("readOnly") is True, f"{where}: {mount_path}"


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_the_grace_period_covers_the_shutdown_timeouts_and_a_margin(path):
    docs = render(path)
    for doc, spec, container in every_container(docs):
        grace = spec.get("terminationGracePeriodSeconds", 30)
        env = environment(container, docs)
        if role(container) == "web":
            assert pre_stop_sec(container) >= 3, "endpoints drain before SIGTERM"
            needed = pre_stop_sec(container) + int(env.get("WEB_GRACEFUL_TIMEOUT", 10)) + MARGIN_SEC
        elif role(container) == "worker":
            needed = int(env.get("DL_SHUTDOWN_TIMEOUT_SEC", 30)) + MARGIN_SEC
        else:
            needed = 0
        assert grace >= needed, f"{doc['metadata']['name']}/{container['name']}: {grace} s < {needed} s"


@pytest.mark.parametrize("path", APPS)
def test_exactly_one_reaper_and_every_worker_leaves_it_the_housekeeping(path):
    docs = render(path)
    reapers = [doc for doc, _spec, container in every_container(docs) if role(container) == "reaper"]
    scaled = {doc["spec"]["scaleTargetRef"]["name"] for doc in docs if doc["kind"] == "ScaledObject"}

    assert len(reapers) == 1
    (reaper,) = reapers
    assert reaper["kind"] == "Deployment" and reaper["spec"]["replicas"] == 1
    assert reaper["spec"]["strategy"] == {"type": "Recreate"}  # the old one stops before the new one starts
    assert reaper["metadata"]["name"] not in scaled
    for _doc, _spec, container in every_container(docs):
        if role(container) == "worker":
            assert "--no-reaper" in container["args"], container["name"]


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_migrations_run_in_a_job_of_their_own_never_in_init_containers(path):
    docs = render(path)
    for doc, spec, container in every_container(docs):
        assert not spec.get("initContainers"), doc["metadata"]["name"]
        assert "migrate" not in container.get("command", []) + container.get("args", [])[1:], container["name"]
    runs_migrate = [doc for doc, _spec, container in every_container(docs) if role(container) == "migrate"]
    if path not in MIGRATIONS:
        assert runs_migrate == [] and [doc for doc in docs if doc["kind"] in {"Job", "Pod"}] == []
        return
    assert len(docs) == len(runs_migrate) == 1
    (job,) = docs
    assert job["kind"] == ("Pod" if path.startswith("overlays/ci") else "Job")
    assert (job["spec"].get("template", job)["spec"])["restartPolicy"] == "Never"
    app = render(MIGRATIONS[path])
    (migrate,) = containers(next(pods([job]))[1])
    web = next(
        container
        for doc, _spec, container in every_container(app)
        if role(container) == "web" and doc["metadata"]["name"] == "pipeline-control-web"
    )
    assert migrate["image"] == web["image"]  # the release it migrates for
    files = {name: value for name, value in environment(web, app).items() if name.endswith("_FILE")}
    assert environment(migrate, docs) == files


@pytest.mark.parametrize("path", CLUSTERS)
def test_web_servers_are_probed_on_the_probe_port_and_drain_before_they_stop(path):
    web_servers = [container for _doc, _spec, container in every_container(render(path)) if role(container) == "web"]

    assert {container["name"] for container in web_servers} == {"web", "engine-web"}
    for container in web_servers:
        probes = {kind: container[kind]["httpGet"] for kind in PROBES}
        assert probes["startupProbe"] == probes["livenessProbe"] == {"path": "/health", "port": PROBE_PORT}
        assert probes["readinessProbe"] == {"path": "/status", "port": PROBE_PORT}  # 503 until migrated
        ports = {port["containerPort"]: port["name"] for port in container["ports"]}
        assert ports == {8000: "http", PROBE_PORT: "probe"}
        assert pre_stop_sec(container) >= 3


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_probe_asks_what_the_image_answers(path):
    for _doc, _spec, container in every_container(render(path)):
        for kind in PROBES:
            probe = container.get(kind)
            if not probe:
                continue
            if "httpGet" in probe:
                assert probe["httpGet"]["port"] == PROBE_PORT and probe["httpGet"]["path"] in PROBE_PATHS
                continue
            command = probe["exec"]["command"]
            if "manage.py" in command:
                assert command[:3] == ["python", "manage.py", "workerhealth"]
                assert (ROOT / "jobs/queue/management/commands/workerhealth.py").exists()
                assert probe["timeoutSeconds"] >= 5  # the command takes about a second
            else:  # ci: the image's own check, a GET of /health on the probe port (podman would run curl)
                assert command == ["/app/docker-entrypoint.sh", "health"] and role(container) == "web"
                assert re.search(r"^\s*web\) exec python", (ROOT / "docker-entrypoint.sh").read_text(), re.M)
        if role(container) == "worker":
            assert container["livenessProbe"]["exec"]["command"] == ["python", "manage.py", "workerhealth"]
        if role(container) == "reaper":
            assert container["livenessProbe"]["exec"]["command"][-1] == "--reaper"


@pytest.mark.parametrize("path", CLUSTERS)
def test_services_select_pods_and_the_users_service_exposes_only_port_8000(path):
    docs = render(path)
    services = named(docs, "Service")
    for name, service in services.items():
        selected = [
            doc for doc in docs if doc["kind"] in WORKLOADS and matches(service["spec"]["selector"], pod_labels(doc))
        ]
        port_names = {
            port["name"] for _doc, _spec, container in every_container(selected) for port in container.get("ports", [])
        }
        assert selected, name
        assert {port["targetPort"] for port in service["spec"]["ports"]} <= port_names, name
    users = services["pipeline-control-web"]["spec"]["ports"]
    assert [(port["port"], port["targetPort"]) for port in users] == [(8000, "http")]


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_secrets_are_mounted_by_reference_never_written_in_a_manifest(path):
    docs = render(path)
    text = _rendered(path)

    assert not [doc for doc in docs if doc["kind"] == "Secret"]
    assert not re.search(r"postgres(ql)?://", text) and "secretKeyRef" not in text
    for _doc, spec, container in every_container(docs):
        volumes = {volume["name"]: volume for volume in spec["volumes"]}
        secret_dirs = {
            mount["mountPath"]
            for mount in container["volumeMounts"]
            if volumes.get(mount["name"], {}).get("secret", {}).get("secretName") == SECRET
            or volumes.get(mount["name"], {}).get("hostPath", {}).get("path", "").endswith("/secrets")  # ci
        }
        env = environment(container, docs)
        assert not {"DATABASE_URL", "PIPELINE_DATABASE_URL", "SECRET_KEY"} & env.keys(), container["name"]
        for name in ("DATABASE_URL_FILE", "PIPELINE_DATABASE_URL_FILE", "SECRET_KEY_FILE"):
            assert str(Path(env[name]).parent) in secret_dirs, f"{container['name']}: {name}"
        for volume in volumes.values():
            assert volume.get("secret", {}).get("secretName", SECRET) == SECRET


def test_the_example_secret_is_in_no_kustomization_and_holds_only_placeholders():
    for path in KUSTOMIZATIONS:
        kustomization = yaml.safe_load((KUBE / path / "kustomization.yaml").read_text())
        assert not [item for item in kustomization.get("resources", []) if "secret" in item], path
    example = yaml.safe_load((KUBE / "base/secret.example.yaml").read_text())
    assert example["metadata"]["name"] == SECRET
    assert all("PASSWORD" in value or "REPLACE" in value for value in example["stringData"].values())


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_setting_named_is_in_the_images_contract(path):
    docs = render(path)
    code = "\n".join((ROOT / name).read_text() for name in CONTRACT_FILES)
    for _doc, _spec, container in every_container(docs):
        names = set(environment(container, docs))
        assert names <= CONTRACT, f"{container['name']}: {names - CONTRACT}"
        quoted = set(re.findall(r'"[A-Z_]+"', code)) | set(re.findall(r"\$\{[A-Z_]+", code))  # Python's, the shell's
        unread = sorted(name for name in names if not {f'"{name.removesuffix("_FILE")}"', f"${{{name}"} & quoted)
        assert unread == [], f"{container['name']}: {unread}"
        assert '"{name}_FILE"' in code  # env_secret's


@pytest.mark.parametrize("path", CLUSTERS)
def test_the_engine_is_one_stateful_pod_with_its_store_and_its_web_server(path):
    docs = render(path)
    (engine,) = named(docs, "StatefulSet").values()
    spec = engine["spec"]
    worker, web = spec["template"]["spec"]["containers"]

    assert spec["replicas"] == 1
    assert named(docs, "Service")[spec["serviceName"]]["spec"]["clusterIP"] == "None"  # its stable name
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert role(worker) == "worker" and flag(worker, "--queue") == "sqlrs:2" and "--no-reaper" in worker["args"]
    assert role(web) == "web" and web["name"] == "engine-web"  # /sqlrs, from the engine's pod
    for container in (worker, web):
        assert container["image"].split("/")[-1].split(":")[0] == "pipeline-control-engine"
        assert {"name": claim["metadata"]["name"], "mountPath": "/app/var/state-store"} in container["volumeMounts"]
    for doc, _spec, container in every_container(docs):
        if role(container) == "worker" and doc is not engine:  # the engine alone serves sqlrs
            queues = [entry["queue"] for entry in json.loads(environment(container, docs)["WORKERS_JSON"])]
            assert "sqlrs" not in queues and flag(container, "--queue") is None


@pytest.mark.parametrize("path", CLUSTERS)
def test_prometheus_scrapes_each_pods_metrics_port(path):
    for doc, spec in pods(render(path)):
        annotations = doc["spec"]["template"]["metadata"].get("annotations", {})
        ports = {port["containerPort"] for container in spec["containers"] for port in container.get("ports", [])}
        if not ports:  # the reaper
            continue
        assert annotations["prometheus.io/scrape"] == "true", doc["metadata"]["name"]
        assert int(annotations["prometheus.io/port"]) in ports and annotations["prometheus.io/path"] == "/metrics"


def test_production_has_a_service_monitor_on_the_metrics_service():
    docs = render("overlays/production")
    (monitor,) = named(docs, "ServiceMonitor").values()
    (service,) = [
        doc
        for doc in named(docs, "Service").values()
        if matches(monitor["spec"]["selector"]["matchLabels"], doc["metadata"]["labels"])
    ]

    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} == {
        port["name"] for port in service["spec"]["ports"]
    }
    assert all(endpoint["path"] == "/metrics" for endpoint in monitor["spec"]["endpoints"])


def test_production_scales_the_workers_with_keda_on_the_claimable_backlog():
    docs = render("overlays/production")
    (scaled,) = named(docs, "ScaledObject").values()
    target = named(docs, "Deployment")[scaled["spec"]["scaleTargetRef"]["name"]]
    (worker,) = target["spec"]["template"]["spec"]["containers"]
    queues = [entry["queue"] for entry in json.loads(environment(worker, docs)["WORKERS_JSON"])]
    (trigger,) = scaled["spec"]["triggers"]
    query = trigger["metadata"]["query"]

    assert role(worker) == "worker" and "replicas" not in target["spec"]  # the autoscaler's to set
    assert trigger["type"] == "prometheus" and float(trigger["metadata"]["threshold"]) > 0
    assert any(f'dl_queue_claimable_jobs{{queue="{queue}"}}' in query for queue in queues)
    # Every web pod exports the same figure (read from the database): a sum would count it once per pod.
    assert re.match(r"^(max|min|avg)\(", query), query
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_every_container_has_requests_and_limits(path):
    for _doc, _spec, container in every_container(render(path)):
        resources = container["resources"]
        assert {"cpu", "memory"} <= resources["requests"].keys() and {"cpu", "memory"} <= resources["limits"].keys()


@pytest.mark.parametrize("path", KUSTOMIZATIONS)
def test_references_inside_a_rendering_resolve(path):
    docs = render(path)
    config_maps = named(docs, "ConfigMap")
    for doc, spec in pods(docs):
        if doc["kind"] in {"Deployment", "StatefulSet"}:
            assert matches(doc["spec"]["selector"]["matchLabels"], pod_labels(doc))
        volumes = {volume["name"] for volume in spec.get("volumes", [])}
        volumes |= {claim["metadata"]["name"] for claim in doc["spec"].get("volumeClaimTemplates", [])}
        assert len({container["name"] for container in containers(spec)}) == len(containers(spec))
        for container in containers(spec):
            assert {mount["name"] for mount in container.get("volumeMounts", [])} <= volumes, container["name"]
            assert all(source["configMapRef"]["name"] in config_maps for source in container.get("envFrom", []))
    for budget in named(docs, "PodDisruptionBudget").values():
        assert [doc for doc, _spec in pods(docs) if matches(budget["spec"]["selector"]["matchLabels"], pod_labels(doc))]


def test_the_ci_overlay_is_what_podman_kube_play_runs():
    docs = render("overlays/ci") + render("overlays/ci/migrate")
    claims = set(named(docs, "PersistentVolumeClaim"))
    volume_names, listeners = [], []

    assert {doc["kind"] for doc in docs} <= {"Pod", "Deployment", "PersistentVolumeClaim", "ConfigMap"}
    for doc, spec in pods(docs):
        assert spec.get("hostNetwork") is True, doc["metadata"]["name"]  # the database is on the host's loopback
        assert doc["kind"] == "Pod" or doc["spec"]["replicas"] == 1
        for volume in spec["volumes"]:
            (source,) = volume.keys() - {"name"}
            assert source in {"emptyDir", "hostPath", "persistentVolumeClaim"}, volume
            assert source != "persistentVolumeClaim" or volume[source]["claimName"] in claims
            volume_names += [volume["name"]] if source == "emptyDir" else []  # podman names a volume after it
        for container in containers(spec):
            assert container["image"] in {"localhost/pipeline-control:ci", "localhost/pipeline-control-engine:ci"}
            assert container["imagePullPolicy"] in {"Never", "IfNotPresent"}
            assert "ports" not in container  # podman refuses port mappings on the host network
            probes = [container[kind] for kind in PROBES if kind in container]
            assert not [probe for probe in probes if "httpGet" in probe]  # podman would run curl
            # podman runs an exec probe as a shell command, its arguments joined with spaces
            assert not [
                arg for probe in probes for arg in probe["exec"]["command"] if re.search(r"[\s'\"();&|<>$]", arg)
            ]
            listeners += host_ports(container, environment(container, docs))
    assert len(volume_names) == len(set(volume_names))
    assert len(listeners) == len(set(listeners)), listeners  # one host network: no port twice


def host_ports(container: dict, env: dict) -> list[int]:
    if role(container) == "web":
        return [
            int(env.get("WEB_BIND", ":8000").rsplit(":", 1)[1]),
            int(env.get("WEB_PROBE_BIND", ":9000").rsplit(":", 1)[1]),
        ]
    return [int(flag(container, "--metrics-port"))] if flag(container, "--metrics-port") else []
