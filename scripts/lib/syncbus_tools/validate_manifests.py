"""scripts/validate-manifests: validates the Kubernetes manifests under deploy/ offline.

Without paths it builds deploy/ (the base), deploy/liveness (the consumers' liveness namespace)
and every overlay of tests/deploy/overlays (the base with each component, and an installation in
another namespace) with the kustomize subset of syncbus_tools.kustomize, and validates each build
on its own: the checks below, plus that every namespace reference of a build names the namespace
it installs into (--namespace checks which).
Named paths are validated as they are (files, or directories of YAML files), unbuilt, unless
--build is given.

Every YAML document is checked against its schema: built-in kinds against the Kubernetes 1.26
OpenAPI v2 definitions, custom resources against the openAPIV3Schema of their CRD, both closed so
that unknown fields are rejected the way strict server-side field validation rejects them. Then
the documents are checked against each other (selectors, names they refer to, ports, autoscalers
and the External metrics they use, one autoscaler per Deployment in what a kustomization builds)
and against the repository: rabbitmq/rabbitmq.conf (RabbitmqCluster additionalConfig),
rabbitmq/definitions.json (topology operator objects), the topology section of syncbus.yaml, and
the runbook_url of every alert (a heading of a Markdown file of the repository). Files named
dashboard*.json are Grafana dashboards (not Kubernetes objects): they, and the dashboards that
ConfigMaps labelled grafana_dashboard carry, must be well-formed and have the fields Grafana
needs.

The schemas come from the repository: tests/deploy/schemas (the OpenAPI v2 document without its
descriptions, and the operator CRDs; see its README.md) and tests/kubesim/crds (the Hive CRDs).
--reference DIR or $SYNCBUS_REFERENCE_DIR selects a full reference dir instead (k8s-openapi/,
crds/ and hive-crds/, such as ../shared/reference); tests/deploy/schemas/refresh derives the
repository's copies from one.

Exit status: 0 all valid, 1 invalid manifests, 2 usage error or missing reference data.
"""

import argparse
import json
import os
import re
import sys
from pathlib import Path

try:
    import jsonschema
    import yaml
except ImportError as missing:
    print(f"validate-manifests: {missing}; install python3-yaml and python3-jsonschema "
          "(scripts/install-deps)", file=sys.stderr)
    sys.exit(2)

from syncbus_tools import ROOT, kustomize

# libyaml's loader when python3-yaml has it: the CRDs are large (RabbitmqCluster's is 350 kB).
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
REPO = Path(ROOT)

OVERLAYS = REPO / "tests" / "deploy" / "overlays"
SCHEMAS = REPO / "tests" / "deploy" / "schemas"
HIVE_CRDS = REPO / "tests" / "kubesim" / "crds"
OPENAPI_V2 = "k8s-openapi/openapi-v2-k8s-1.26.json"
CRD_DIRS = ("crds", "hive-crds")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# Kinds whose metadata.name must be a DNS-1035 / DNS-1123 label rather than a subdomain.
LABEL_NAMED_KINDS = {("", "Service"): DNS_1035_LABEL, ("", "Namespace"): DNS_LABEL}


class UsageError(Exception):
    """Bad arguments or missing reference data (exit status 2)."""


class Document:
    """One YAML document of a manifest file."""

    def __init__(self, path, index, obj):
        self.path = path
        self.index = index
        self.obj = obj
        api_version = obj.get("apiVersion", "") if isinstance(obj, dict) else ""
        group, _, version = api_version.rpartition("/")
        self.group = group
        self.version = version
        self.kind = obj.get("kind", "") if isinstance(obj, dict) else ""
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        metadata = metadata if isinstance(metadata, dict) else {}
        self.name = metadata.get("name", "")
        self.namespace = metadata.get("namespace", "")
        self.labels = metadata.get("labels") or {}

    @property
    def spec(self):
        spec = self.obj.get("spec")
        return spec if isinstance(spec, dict) else {}

    def is_a(self, group, kind):
        return self.group == group and self.kind == kind

    def where(self):
        ident = f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"
        return f"{rel(self.path)}[{self.index}] {ident.strip()}"


class Report:
    def __init__(self):
        self.errors = []

    def error(self, where, message):
        self.errors.append(f"{where}: {message}")


def rel(path):
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def close_schema(schema):
    """Rejects unknown fields: additionalProperties=false wherever properties are listed."""
    if isinstance(schema, dict):
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        for value in schema.values():
            close_schema(value)
    elif isinstance(schema, list):
        for value in schema:
            close_schema(value)
    return schema


def json_path(parts):
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def schema_messages(validator, instance, prefix=()):
    messages = []
    # By path, then by message: the order must not depend on the key order of the schema document.
    errors = sorted(validator.iter_errors(instance),
                    key=lambda e: (list(map(str, e.path)), e.message))
    for err in errors:
        where = json_path(list(prefix) + list(err.absolute_path))
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = err.schema.get("properties", {})
            unknown = sorted(k for k in err.instance if k not in known)
            messages.append(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
        else:
            messages.append(f"{where}: {err.message}")
    return messages


class Schemas:
    """Schemas of the built-in kinds (OpenAPI v2) and of the custom resources (CRDs)."""

    def __init__(self, v2_path, crd_dirs):
        if not v2_path.is_file():
            raise UsageError(f"reference file {v2_path} not found")
        with open(v2_path) as f:
            document = json.load(f)
        defs = document["definitions"]
        # v2 declares these as strings; the API server also accepts numbers.
        defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = {"type": ["string", "integer"]}
        defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = {"type": ["string", "number"]}
        close_schema(defs)
        self.defs = defs
        self.builtin = {}
        for name, definition in defs.items():
            for gvk in definition.get("x-kubernetes-group-version-kind", []):
                self.builtin[(gvk["group"], gvk["version"], gvk["kind"])] = name
        self.namespaced_builtin = set()
        for path, operations in document["paths"].items():
            if "{namespace}" not in path:
                continue
            for operation in operations.values():
                gvk = operation.get("x-kubernetes-group-version-kind") if isinstance(
                    operation, dict) else None
                if gvk:
                    self.namespaced_builtin.add((gvk["group"], gvk["version"], gvk["kind"]))
        self.object_meta = self._ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")

        self.crds = {}
        for crd_dir in crd_dirs:
            for crd_file in sorted(crd_dir.rglob("*.yaml")):
                with open(crd_file) as f:
                    for crd in yaml.load_all(f, Loader=YAML_LOADER):
                        self._add_crd(crd)
        if not self.crds:
            raise UsageError(f"no CustomResourceDefinitions under {', '.join(map(str, crd_dirs))}")

    def _ref(self, name):
        return jsonschema.Draft4Validator({"$ref": f"#/definitions/{name}", "definitions": self.defs})

    def _add_crd(self, crd):
        if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
            return
        spec = crd["spec"]
        for version in spec["versions"]:
            schema = close_schema(version["schema"]["openAPIV3Schema"])
            # The CRD only says `type: object`; metadata is validated against ObjectMeta separately.
            schema.setdefault("properties", {})["metadata"] = {"type": "object"}
            key = (spec["group"], version["name"], spec["names"]["kind"])
            self.crds[key] = (jsonschema.Draft4Validator(schema), spec["scope"] == "Namespaced")

    def check(self, doc):
        """Schema errors of doc, and whether its kind is namespaced (None if unknown)."""
        key = (doc.group, doc.version, doc.kind)
        if key in self.builtin:
            validator = self._ref(self.builtin[key])
            return schema_messages(validator, doc.obj), key in self.namespaced_builtin
        if key in self.crds:
            validator, namespaced = self.crds[key]
            messages = schema_messages(validator, doc.obj)
            messages += schema_messages(self.object_meta, doc.obj.get("metadata", {}), ["metadata"])
            return messages, namespaced
        return [f"no schema for apiVersion {doc.obj.get('apiVersion')!r} kind {doc.kind!r} "
                "(neither a Kubernetes 1.26 kind nor one of the CRDs)"], None


# ---------------------------------------------------------------------------------------------
# Loading


def is_dashboard(path):
    return path.suffix == ".json" and path.name.startswith("dashboard")


def manifest_files(paths):
    """The YAML files (manifests) and the Grafana dashboards (dashboard*.json) under `paths`;
    named files are taken as they are."""
    files = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*")
                            if p.suffix in (".yaml", ".yml") or is_dashboard(p))
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"{path} does not exist")
    return ([f for f in files if f.suffix != ".json"], [f for f in files if f.suffix == ".json"])


def is_kustomization(obj):
    return isinstance(obj, dict) and obj.get("kind") in ("Kustomization", "Component") and \
        str(obj.get("apiVersion", "")).startswith("kustomize.config.k8s.io/")


def load(files, report):
    documents, kustomizations = [], []
    for path in files:
        try:
            with open(path) as f:
                objs = list(yaml.load_all(f, Loader=YAML_LOADER))
        except yaml.YAMLError as err:
            report.error(rel(path), f"not valid YAML: {err}")
            continue
        for index, obj in enumerate(objs):
            if obj is None:
                continue
            if is_kustomization(obj):
                kustomizations.append((path, obj))
            elif not isinstance(obj, dict):
                report.error(f"{rel(path)}[{index}]", "a manifest must be a mapping")
            else:
                documents.append(Document(path, index, obj))
    return documents, kustomizations


# ---------------------------------------------------------------------------------------------
# Per-document checks


def check_document(doc, schemas, report):
    if not doc.kind or not doc.version:
        report.error(doc.where(), "apiVersion and kind are required")
        return
    messages, namespaced = schemas.check(doc)
    for message in messages:
        report.error(doc.where(), message)
    if not doc.name:
        report.error(doc.where(), "metadata.name is required")
    else:
        pattern = LABEL_NAMED_KINDS.get((doc.group, doc.kind), DNS_SUBDOMAIN)
        if len(doc.name) > 253 or not pattern.match(doc.name):
            report.error(doc.where(), f"metadata.name {doc.name!r} is not a valid name for a {doc.kind}")
    if namespaced is True and not doc.namespace:
        report.error(doc.where(), "namespaced object without metadata.namespace")
    if namespaced is False and doc.namespace:
        report.error(doc.where(), "cluster-scoped object with metadata.namespace")
    for key, value in (doc.labels.items() if isinstance(doc.labels, dict) else []):
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            report.error(doc.where(), f"label {key}: {value!r} is not a valid label value")


# ---------------------------------------------------------------------------------------------
# Cross-document checks


def index_by(documents, group, kind):
    return {(d.namespace, d.name): d for d in documents if d.is_a(group, kind)}


def matches(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def selector_matches(selector, labels):
    """A LabelSelector (matchLabels and matchExpressions: In, NotIn, Exists, DoesNotExist)
    against a pod's labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) or \
                (op == "NotIn" and key in labels and labels[key] in values) or \
                (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def pod_template(doc):
    template = doc.spec.get("template")
    return template if isinstance(template, dict) else {}


def template_labels(doc):
    return (pod_template(doc).get("metadata") or {}).get("labels") or {}


def operator_ports(cluster):
    """The ports of the client Service the RabbitMQ Cluster Operator creates for a
    RabbitmqCluster: with spec.tls the TLS ones (prometheus-tls instead of prometheus), and the
    plain ones unless disableNonTLSListeners."""
    tls = cluster.spec.get("tls") or {}
    if not tls.get("secretName"):
        return {"amqp", "management", "prometheus"}
    ports = {"amqps", "management-tls", "prometheus-tls"}
    if not tls.get("disableNonTLSListeners"):
        ports |= {"amqp", "management"}
    return ports


def operator_pod_labels(cluster):
    return {"app.kubernetes.io/name": cluster.name, "app.kubernetes.io/component": "rabbitmq"}


def operator_services(documents):
    """The client Service the RabbitMQ Cluster Operator creates for each RabbitmqCluster."""
    return [(cluster.namespace, cluster.name, operator_pod_labels(cluster), operator_ports(cluster))
            for cluster in documents if cluster.is_a("rabbitmq.com", "RabbitmqCluster")]


def container_ports(deployment):
    pod = pod_template(deployment).get("spec") or {}
    return {p.get("name") for c in pod.get("containers") or [] for p in c.get("ports") or []}


def check_workloads(documents, report):
    deployments = index_by(documents, "apps", "Deployment")
    service_accounts = index_by(documents, "", "ServiceAccount")
    config_maps = index_by(documents, "", "ConfigMap")
    for (namespace, _), deployment in deployments.items():
        at = deployment.where()
        selector = (deployment.spec.get("selector") or {}).get("matchLabels") or {}
        if not matches(selector, template_labels(deployment)):
            report.error(at, "spec.selector.matchLabels does not match the pod template labels")
        pod = pod_template(deployment).get("spec") or {}
        account = pod.get("serviceAccountName")
        if account and (namespace, account) not in service_accounts:
            report.error(at, f"serviceAccountName {account!r}: no such ServiceAccount in the manifests")
        volumes = {v.get("name"): v for v in pod.get("volumes") or []}
        for volume in volumes.values():
            config_map = (volume.get("configMap") or {}).get("name")
            if config_map and (namespace, config_map) not in config_maps:
                report.error(at, f"volume {volume.get('name')!r}: no ConfigMap {config_map!r} "
                                 "in the manifests")
        for container in pod.get("containers") or []:
            name = container.get("name")
            ports = {p.get("name") for p in container.get("ports") or [] if p.get("name")}
            for mount in container.get("volumeMounts") or []:
                if mount.get("name") not in volumes:
                    report.error(at, f"container {name!r} mounts unknown volume {mount.get('name')!r}")
            for probe_name in ("startupProbe", "livenessProbe", "readinessProbe"):
                port = ((container.get(probe_name) or {}).get("httpGet") or {}).get("port")
                if isinstance(port, str) and port not in ports:
                    report.error(at, f"{probe_name} of {name!r} uses unknown port {port!r}")

    def pods_matching(namespace, selector):
        return [d for (ns, _), d in deployments.items()
                if ns == namespace and matches(selector, template_labels(d))]

    for service in documents:
        if not service.is_a("", "Service"):
            continue
        selected = pods_matching(service.namespace, service.spec.get("selector") or {})
        if not selected:
            report.error(service.where(), "spec.selector matches no Deployment's pods in the manifests")
        for port in service.spec.get("ports") or []:
            target = port.get("targetPort")
            if isinstance(target, str) and not any(target in container_ports(d) for d in selected):
                report.error(service.where(), f"targetPort {target!r} is not a container port "
                                              "of the selected pods")
    for budget in documents:
        if budget.is_a("policy", "PodDisruptionBudget"):
            selector = (budget.spec.get("selector") or {}).get("matchLabels") or {}
            if not any(ns == budget.namespace and matches(selector, labels)
                       for ns, labels, _ in pods_of(documents)):
                report.error(budget.where(), "spec.selector matches no pods of the manifests "
                                             "(a Deployment's, or a RabbitmqCluster's nodes)")


def check_broker_disruption_budgets(documents, report):
    """Every RabbitmqCluster of more than one node has a PodDisruptionBudget over its nodes that
    lets at most one be evicted at a time: the operator creates none, and a drain that evicts two
    of three nodes takes the quorum queues' majority."""
    budgets = [d for d in documents if d.is_a("policy", "PodDisruptionBudget")]
    for cluster in documents:
        if not cluster.is_a("rabbitmq.com", "RabbitmqCluster"):
            continue
        replicas = cluster.spec.get("replicas", 1)
        if not isinstance(replicas, int) or replicas < 2:
            continue
        pods = operator_pod_labels(cluster)
        covering = [b for b in budgets if b.namespace == cluster.namespace and
                    matches((b.spec.get("selector") or {}).get("matchLabels") or {}, pods)]
        if not any(b.spec.get("maxUnavailable") == 1 or b.spec.get("minAvailable") == replicas - 1
                   for b in covering):
            report.error(cluster.where(), f"no PodDisruptionBudget lets at most one of its {replicas} "
                                          "nodes be evicted at a time (maxUnavailable: 1): a node "
                                          "drain could take the quorum queues' majority")


def check_rbac(documents, report, outside=()):
    """Bindings name roles of the build and ServiceAccounts of the build or of `outside` (the
    documents of the build whose accounts it binds, for deploy/liveness: deploy/)."""
    rbac = "rbac.authorization.k8s.io"
    roles = {("ClusterRole", "", d.name) for d in documents if d.is_a(rbac, "ClusterRole")}
    roles |= {("Role", d.namespace, d.name) for d in documents if d.is_a(rbac, "Role")}
    service_accounts = index_by(list(documents) + list(outside), "", "ServiceAccount")
    for binding in documents:
        if binding.group != rbac or binding.kind not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = binding.obj.get("roleRef") or {}
        scope = binding.namespace if ref.get("kind") == "Role" else ""
        if (ref.get("kind"), scope, ref.get("name")) not in roles:
            report.error(binding.where(), f"roleRef {ref.get('kind')} {ref.get('name')!r} "
                                          "is not in the manifests")
        for subject in binding.obj.get("subjects") or []:
            key = (subject.get("namespace", binding.namespace), subject.get("name"))
            if subject.get("kind") == "ServiceAccount" and key not in service_accounts:
                report.error(binding.where(), f"subject ServiceAccount {subject.get('name')!r} "
                                              "is not in the manifests")


def held_at_zero(deployment, scaler):
    """A Deployment held at 0 replicas on purpose (components/standby): an HPA does not scale a
    Deployment at 0, and KEDA leaves one alone while its ScaledObject is paused at 0."""
    if deployment.spec.get("replicas") != 0:
        return False
    if scaler.is_a("autoscaling", "HorizontalPodAutoscaler"):
        return True
    annotations = (scaler.obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get("autoscaling.keda.sh/paused-replicas")) == "0"


def check_monitoring_and_scaling(documents, report):
    services = [(d.namespace, d.name, d.labels, {p.get("name") for p in d.spec.get("ports") or []})
                for d in documents if d.is_a("", "Service")] + operator_services(documents)
    for monitor in documents:
        if not monitor.is_a("monitoring.coreos.com", "ServiceMonitor"):
            continue
        selector = (monitor.spec.get("selector") or {}).get("matchLabels") or {}
        selected = [s for s in services if s[0] == monitor.namespace and matches(selector, s[2])]
        if not selected:
            report.error(monitor.where(), "spec.selector matches no Service in the manifests "
                                          "(nor one the RabbitMQ operator creates)")
        for endpoint in monitor.spec.get("endpoints") or []:
            if endpoint.get("port") and not any(endpoint["port"] in s[3] for s in selected):
                report.error(monitor.where(), f"endpoint port {endpoint['port']!r} is not a port "
                                              "of the selected Services")
    deployments = index_by(documents, "apps", "Deployment")
    authentications = index_by(documents, "keda.sh", "TriggerAuthentication")
    served = adapter_external_metrics(documents)
    for scaler in documents:
        if scaler.is_a("keda.sh", "ScaledObject"):
            low = scaler.spec.get("minReplicaCount", 0)
            high = scaler.spec.get("maxReplicaCount", 100)
            names = ("minReplicaCount", "maxReplicaCount")
        elif scaler.is_a("autoscaling", "HorizontalPodAutoscaler"):
            low, high = scaler.spec.get("minReplicas", 1), scaler.spec.get("maxReplicas")
            names = ("minReplicas", "maxReplicas")
        else:
            continue
        target = scaler.spec.get("scaleTargetRef") or {}
        deployment = deployments.get((scaler.namespace, target.get("name")))
        if target.get("kind", "Deployment") != "Deployment" or deployment is None:
            report.error(scaler.where(), f"scaleTargetRef {target.get('name')!r}: no such Deployment "
                                         "in the manifests")
        elif "replicas" in deployment.spec and not held_at_zero(deployment, scaler):
            report.error(deployment.where(), f"spec.replicas is set but {scaler.kind} "
                                             f"{scaler.name} owns this Deployment's replica count")
        if isinstance(low, int) and isinstance(high, int) and low > high:
            report.error(scaler.where(), f"{names[0]} is greater than {names[1]}")
        for trigger in scaler.spec.get("triggers") or []:
            ref = (trigger.get("authenticationRef") or {}).get("name")
            if ref and (scaler.namespace, ref) not in authentications:
                report.error(scaler.where(), f"authenticationRef {ref!r}: no such "
                                             "TriggerAuthentication in the manifests")
        for metric in scaler.spec.get("metrics") or []:
            name = ((metric.get("external") or {}).get("metric") or {}).get("name")
            if metric.get("type") == "External" and name not in served:
                report.error(scaler.where(), f"External metric {name!r} is served by no "
                                             "prometheus-adapter externalRules entry in the "
                                             "manifests")


def adapter_rules(documents):
    """(ConfigMap, rule) for each externalRules entry of the prometheus-adapter configurations
    the ConfigMaps carry (a config.yaml with externalRules)."""
    for doc in documents:
        if not doc.is_a("", "ConfigMap"):
            continue
        try:
            config = yaml.load((doc.obj.get("data") or {}).get("config.yaml", ""), Loader=YAML_LOADER)
        except yaml.YAMLError:
            continue
        if not isinstance(config, dict):
            continue
        for rule in config.get("externalRules") or []:
            if isinstance(rule, dict):
                yield doc, rule


def adapter_external_metrics(documents):
    """Names of the External metrics the prometheus-adapter configurations serve."""
    return {name for _, rule in adapter_rules(documents) if (name := (rule.get("name") or {}).get("as"))}


# The queues a consumer declares for itself, one per lane (common/bus/topology.h,
# ConsumerQueueName): forwarded requests wait there, so the backlog an autoscaler reads must count
# them.
OWN_QUEUE_SAMPLES = ("syncbus.consumer.syncbus-consumer-7d9f-x2k4p-1.change",
                     "syncbus.consumer.syncbus-consumer-7d9f-x2k4p-1.resync")
PROMQL_QUEUE = re.compile(r'queue=~"([^"]*)"')


def check_backlog_queues(documents, report):
    """What an autoscaler reads as the backlog counts exactly the queues consumers take requests
    from: the work lanes of the build's Queue objects (syncbus.work.*) and the consumers' own
    queues, and none of the others (delay tiers, dead letters). A KEDA rabbitmq trigger's
    queueName (useRegex: Go's unanchored match) and the queue matcher of a prometheus-adapter
    rule (PromQL: anchored) are each tried on those names."""
    names = {q.spec.get("name", q.name) for q in documents if q.is_a("rabbitmq.com", "Queue")}
    names.update(OWN_QUEUE_SAMPLES)
    wanted = {n for n in names if n.startswith(("syncbus.work.", "syncbus.consumer."))}
    patterns = []
    for scaler in documents:
        for trigger in scaler.spec.get("triggers") or [] if scaler.is_a("keda.sh", "ScaledObject") else []:
            metadata = trigger.get("metadata") or {}
            if trigger.get("type") == "rabbitmq" and str(metadata.get("useRegex")) == "true":
                patterns.append((scaler.where(), f"queueName {metadata.get('queueName')!r}",
                                 lambda n, p=str(metadata.get("queueName", "")): re.search(p, n)))
    for doc, rule in adapter_rules(documents):
        for field in ("seriesQuery", "metricsQuery"):
            for matcher in PROMQL_QUEUE.findall(str(rule.get(field, ""))):
                patterns.append((doc.where(), f"{field} queue=~{matcher!r}",
                                 lambda n, p=matcher: re.fullmatch(p, n)))
    for where, what, match in patterns:
        counted = {n for n in names if match(n)}
        for name in sorted(wanted - counted):
            report.error(where, f"{what} leaves out {name!r}, a queue consumers take requests from")
        for name in sorted(counted - wanted):
            report.error(where, f"{what} counts {name!r}, which no consumer takes requests from")


def check_autoscaler_choice(documents, kustomizations, report):
    """What one kustomization builds may scale a Deployment with one autoscaler only (KEDA's
    ScaledObject creates an HPA of its own: two would fight over the replica count)."""
    by_file = {}
    for doc in documents:
        by_file.setdefault(Path(doc.path).resolve(), []).append(doc)
    roots = {Path(path).resolve().parent: obj for path, obj in kustomizations}

    def built(directory, seen):
        files = []
        for resource in roots[directory].get("resources") or []:
            target = (directory / resource).resolve()
            if target in roots and target not in seen:
                files += built(target, seen | {target})
            elif target.is_file():
                files.append(target)
        return files

    for path, _ in kustomizations:
        directory = Path(path).resolve().parent
        scalers = {}
        for file in built(directory, {directory}):
            for doc in by_file.get(file, []):
                if doc.is_a("keda.sh", "ScaledObject") or doc.is_a("autoscaling", "HorizontalPodAutoscaler"):
                    target = (doc.spec.get("scaleTargetRef") or {}).get("name")
                    scalers.setdefault((doc.namespace, target), []).append(doc)
        for (namespace, target), docs in sorted(scalers.items()):
            if len(docs) > 1:
                report.error(rel(path), f"Deployment {namespace}/{target} is scaled by "
                                        f"{' and '.join(d.where() for d in docs)}: include one "
                                        "autoscaler only")


def check_topology_references(documents, report):
    def names(kind):
        return {(d.spec.get("vhost", "/"), d.spec.get("name"))
                for d in documents if d.is_a("rabbitmq.com", kind)}

    clusters = index_by(documents, "rabbitmq.com", "RabbitmqCluster")
    users = index_by(documents, "rabbitmq.com", "User")
    exchanges, queues = names("Exchange"), names("Queue")
    for doc in documents:
        if doc.group != "rabbitmq.com" or doc.kind == "RabbitmqCluster":
            continue
        at = doc.where()
        ref = doc.spec.get("rabbitmqClusterReference") or {}
        if ref.get("name") and (ref.get("namespace", doc.namespace), ref["name"]) not in clusters:
            report.error(at, f"rabbitmqClusterReference {ref['name']!r}: no such RabbitmqCluster "
                             "in the manifests")
        if doc.kind == "Queue" and doc.spec.get("deletionPolicy") != "retain":
            # The operator's default (delete) deletes the queue, and what it holds, with the object.
            report.error(at, "deletionPolicy is not retain: deleting the object would delete the queue and "
                             "every message in it (docs/operations.md, \"Changing the topology\")")
        if doc.kind == "Binding":
            vhost = doc.spec.get("vhost", "/")
            if (vhost, doc.spec.get("source")) not in exchanges:
                report.error(at, f"source exchange {doc.spec.get('source')!r} is not in the manifests")
            kind = doc.spec.get("destinationType")
            if (vhost, doc.spec.get("destination")) not in (queues if kind == "queue" else exchanges):
                report.error(at, f"destination {kind} {doc.spec.get('destination')!r} "
                                 "is not in the manifests")
        if doc.kind == "Permission":
            user = (doc.spec.get("userReference") or {}).get("name")
            if user and (doc.namespace, user) not in users:
                report.error(at, f"userReference {user!r}: no such User in the manifests")


# ---------------------------------------------------------------------------------------------
# Checks against the repository


def conf_settings(text):
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            settings[key.strip()] = value.strip() if sep else None
    return settings


def erlang_terms(text):
    """Erlang terms without their %-comments and whitespace, for comparing two spellings."""
    return "".join(line.split("%", 1)[0] for line in text.splitlines()).replace(" ", "")


def check_rabbitmq_conf(documents, conf_path, report):
    if not conf_path.is_file():
        return
    expected = conf_settings(conf_path.read_text())
    advanced_path = conf_path.with_name("advanced.config")
    for cluster in documents:
        if not cluster.is_a("rabbitmq.com", "RabbitmqCluster"):
            continue
        rabbitmq = cluster.spec.get("rabbitmq") or {}
        actual = conf_settings(rabbitmq.get("additionalConfig", ""))
        for key in sorted(set(expected) | set(actual)):
            if expected.get(key) != actual.get(key):
                report.error(cluster.where(), f"additionalConfig {key} = {actual.get(key)} but "
                                              f"{rel(conf_path)} has {expected.get(key)}")
        if advanced_path.is_file() and \
                erlang_terms(rabbitmq.get("advancedConfig", "")) != erlang_terms(advanced_path.read_text()):
            report.error(cluster.where(), f"advancedConfig differs from {rel(advanced_path)}")


def topology_of_documents(documents):
    exchanges, queues, bindings = {}, {}, set()
    for doc in documents:
        spec = doc.spec
        vhost = spec.get("vhost", "/")
        if doc.is_a("rabbitmq.com", "Exchange"):
            exchanges[(vhost, spec.get("name"))] = {
                "type": spec.get("type", "direct"), "durable": spec.get("durable", False),
                "auto_delete": spec.get("autoDelete", False), "arguments": spec.get("arguments") or {}}
        elif doc.is_a("rabbitmq.com", "Queue"):
            arguments = dict(spec.get("arguments") or {})
            if spec.get("type"):
                arguments["x-queue-type"] = spec["type"]
            queues[(vhost, spec.get("name"))] = {
                "durable": spec.get("durable", False), "auto_delete": spec.get("autoDelete", False),
                "arguments": arguments}
        elif doc.is_a("rabbitmq.com", "Binding"):
            arguments = json.dumps(spec.get("arguments") or {}, sort_keys=True)
            bindings.add((vhost, spec.get("source"), spec.get("destination"),
                          spec.get("destinationType"), spec.get("routingKey", ""), arguments))
    return exchanges, queues, bindings


def policies_of_documents(documents):
    return {(d.spec.get("vhost", "/"), d.spec.get("name")): {
        "pattern": d.spec.get("pattern"), "apply-to": d.spec.get("applyTo", "all"),
        "priority": d.spec.get("priority", 0), "definition": d.spec.get("definition") or {}}
        for d in documents if d.is_a("rabbitmq.com", "Policy")}


def policies_of_definitions(definitions):
    return {(p.get("vhost", "/"), p["name"]): {
        "pattern": p.get("pattern"), "apply-to": p.get("apply-to", "all"),
        "priority": p.get("priority", 0), "definition": p.get("definition") or {}}
        for p in definitions.get("policies", [])}


def topology_of_definitions(definitions):
    exchanges = {(e.get("vhost", "/"), e["name"]): {
        "type": e.get("type"), "durable": e.get("durable", False), "auto_delete": e.get("auto_delete", False),
        "arguments": e.get("arguments") or {}} for e in definitions.get("exchanges", [])}
    queues = {(q.get("vhost", "/"), q["name"]): {
        "durable": q.get("durable", False), "auto_delete": q.get("auto_delete", False),
        "arguments": q.get("arguments") or {}} for q in definitions.get("queues", [])}
    bindings = {(b.get("vhost", "/"), b["source"], b["destination"], b.get("destination_type"),
                 b.get("routing_key", ""), json.dumps(b.get("arguments") or {}, sort_keys=True))
                for b in definitions.get("bindings", [])}
    internal = [e["name"] for e in definitions.get("exchanges", []) if e.get("internal")]
    return exchanges, queues, bindings, internal, policies_of_definitions(definitions)


def check_definitions(documents, definitions_path, report):
    ours = topology_of_documents(documents) + (policies_of_documents(documents),)
    if not any(ours):
        return
    if not definitions_path.is_file():
        print(f"validate-manifests: {rel(definitions_path)} not found; topology comparison skipped")
        return
    where = rel(definitions_path)
    try:
        with open(definitions_path) as f:
            theirs = topology_of_definitions(json.load(f))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        report.error(where, f"cannot read definitions: {err}")
        return
    for name in theirs[3]:
        report.error(where, f"exchange {name!r} is internal; Exchange objects cannot express that")
    for what, mine, other in (("exchange", ours[0], theirs[0]), ("queue", ours[1], theirs[1]),
                              ("policy", ours[3], theirs[4])):
        for key in sorted(set(mine) | set(other)):
            vhost, name = key
            subject = f"{what} {name!r} (vhost {vhost})"
            if key not in other:
                report.error(where, f"{subject} is in the manifests but not in the definitions")
            elif key not in mine:
                report.error(where, f"{subject} is in the definitions but not in the manifests")
            elif mine[key] != other[key]:
                report.error(where, f"{what} {name!r} differs: manifests "
                                    f"{json.dumps(mine[key], sort_keys=True)} vs definitions "
                                    f"{json.dumps(other[key], sort_keys=True)}")
    for binding in sorted(ours[2] ^ theirs[2]):
        side = "the manifests but not in the definitions" if binding in ours[2] else \
            "the definitions but not in the manifests"
        report.error(where, f"binding {binding[1]} -> {binding[2]} key {binding[4]!r} "
                            f"arguments {binding[5]} (vhost {binding[0]}) is in {side}")


def duration_seconds(text):
    match = re.fullmatch(r"(\d+)([smh])", str(text))
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)] if match else None


def check_syncbus_config(documents, report):
    _, queues, _ = topology_of_documents(documents)
    policies = policies_of_documents(documents)
    clusters = {d.name for d in documents if d.is_a("rabbitmq.com", "RabbitmqCluster")}
    for doc in documents:
        if not doc.is_a("", "ConfigMap") or "syncbus.yaml" not in (doc.obj.get("data") or {}):
            continue
        at = doc.where()
        try:
            config = yaml.load(doc.obj["data"]["syncbus.yaml"], Loader=YAML_LOADER)
        except yaml.YAMLError as err:
            report.error(at, f"syncbus.yaml is not valid YAML: {err}")
            continue
        if not isinstance(config, dict):
            report.error(at, "syncbus.yaml is not a mapping")
            continue
        for section in ("log", "admin", "amqp", "hub", "topology", "publisher", "consumer"):
            if not isinstance(config.get(section), dict):
                report.error(at, f"syncbus.yaml has no {section} section")
        amqp = config.get("amqp") or {}
        if clusters and str(amqp.get("host", "")).split(".")[0] not in clusters:
            report.error(at, f"amqp.host {amqp.get('host')!r} is not the Service of a "
                             f"RabbitmqCluster in the manifests ({', '.join(sorted(clusters))})")
        if not queues:
            continue
        vhost = amqp.get("vhost", "/")
        topology = config.get("topology") or {}
        tiers = topology.get("retryTiers") or []
        expected = {f"syncbus.retry.{t}": duration_seconds(t) for t in tiers}
        actual = {name: q["arguments"].get("x-message-ttl") for (v, name), q in queues.items()
                  if v == vhost and name.startswith("syncbus.retry.")}
        for name in sorted(set(expected) | set(actual)):
            if name not in actual:
                tier = name.rsplit(".", 1)[1]
                report.error(at, f"topology.retryTiers has {tier} but no Queue {name}")
            elif name not in expected:
                report.error(at, f"Queue {name} has no tier in topology.retryTiers")
            elif expected[name] is None or actual[name] != expected[name] * 1000:
                report.error(at, f"Queue {name} has x-message-ttl {actual[name]}, "
                                 "not its tier's duration")
        for lane in ("change", "resync"):
            if (vhost, f"syncbus.work.{lane}") not in queues:
                report.error(at, f"no Queue syncbus.work.{lane} in the manifests")
        # The work queues' limits are the Policy syncbus-work's (a queue argument could not
        # change later); the daemons' config must agree with it.
        policy = policies.get((vhost, "syncbus-work"))
        if policy is None:
            report.error(at, "no Policy syncbus-work (the work queues' limits) in the manifests")
            continue
        for setting, key in (("deliveryLimit", "delivery-limit"), ("maxLength", "max-length")):
            value = policy["definition"].get(key)
            if topology.get(setting) != value:
                report.error(at, f"topology.{setting} is {topology.get(setting)} but Policy "
                                 f"syncbus-work has {key} {value}")


def check_kustomizations(kustomizations, report):
    for path, kustomization in kustomizations:
        base = path.parent
        listed = {(base / c).resolve() for c in kustomization.get("configurations") or []}
        for resource in kustomization.get("resources") or []:
            target = base / resource
            if "://" in resource:
                continue
            if target.is_dir():
                if not any((target / name).is_file() for name in KUSTOMIZATION_FILES):
                    report.error(rel(path), f"resource {resource}/ has no kustomization file")
                continue
            listed.add(target.resolve())
            if not target.is_file():
                report.error(rel(path), f"resource {resource} does not exist")
        for candidate in sorted(base.glob("*.y*ml")):
            if candidate.resolve() != path.resolve() and candidate.resolve() not in listed:
                report.error(rel(path), f"{candidate.name} is not listed in resources")


def heading_anchors(markdown):
    """The anchors GitHub gives the headings of a Markdown text: lower case, punctuation dropped,
    spaces as hyphens, -1, -2, ... appended to repeats."""
    anchors, seen = set(), {}
    fence = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def check_alert_rules(documents, report):
    """Every alerting rule names a runbook: annotation runbook_url, the anchor of a heading of a
    Markdown file of this repository. In a build with the settings (ConfigMap
    syncbus-settings) it is absolute: runbookBaseURL (standing for docs/) + path#anchor;
    without them, a path in the repository (docs/operations.md#...)."""
    base = None
    for doc in documents:
        if doc.is_a("", "ConfigMap") and doc.name == "syncbus-settings":
            base = str((doc.obj.get("data") or {}).get("runbookBaseURL", "")).rstrip("/")
            if "://" not in base:
                report.error(doc.where(), f"runbookBaseURL {base!r} is not an absolute URL")
    for doc in documents:
        if not doc.is_a("monitoring.coreos.com", "PrometheusRule"):
            continue
        for group in doc.spec.get("groups") or []:
            for rule in group.get("rules") or []:
                if "alert" not in rule:
                    continue
                at = f"{doc.where()} alert {rule['alert']}"
                url = (rule.get("annotations") or {}).get("runbook_url")
                if not url:
                    report.error(at, "no runbook_url annotation")
                    continue
                path, _, anchor = str(url).partition("#")
                if base is not None:
                    if not path.startswith(base + "/"):
                        report.error(at, f"runbook_url {url!r} does not start with the "
                                         f"runbookBaseURL {base!r}")
                        continue
                    path = "docs/" + path[len(base) + 1:]
                target = REPO / path
                if "://" in path or not target.is_file() or REPO not in target.resolve().parents:
                    report.error(at, f"runbook_url {url!r}: {path!r} is not a file of the "
                                     "repository")
                elif not anchor or anchor not in heading_anchors(target.read_text()):
                    report.error(at, f"runbook_url {url!r}: {path} has no heading with the "
                                     f"anchor {anchor!r}")


MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def check_alert_table(documents, report):
    """docs/operations.md's table of alerts ("Dashboard and alerts") lists exactly the alerts of
    syncbus's own PrometheusRules (syncbus, syncbus-rabbitmq)."""
    shipped = {rule["alert"] for doc in documents if doc.is_a("monitoring.coreos.com", "PrometheusRule")
               and doc.name in ("syncbus", "syncbus-rabbitmq")
               for group in doc.spec.get("groups") or [] for rule in group.get("rules") or []
               if "alert" in rule}
    if not shipped:
        return
    text = (REPO / "docs" / "operations.md").read_text()
    listed = set(re.findall(r"^\| `(Syncbus\w+)` \|", text, re.M))
    for alert in sorted(shipped - listed):
        report.error("docs/operations.md", f"the table of alerts lacks {alert}, which alerts.yaml has")
    for alert in sorted(listed - shipped):
        report.error("docs/operations.md", f"the table of alerts lists {alert}, which alerts.yaml "
                                           "does not have")


def check_doc_links(report):
    """Links between the repository's Markdown files (README.md, SECURITY.md, docs/, deploy/)
    reach a file, and the heading their #anchor names."""
    pages = [REPO / "README.md", REPO / "SECURITY.md", REPO / "deploy" / "README.md"]
    pages += sorted((REPO / "docs").glob("*.md"))
    for page in pages:
        if not page.is_file():
            continue
        text = page.read_text()
        for match in MARKDOWN_LINK.finditer(text):
            link = match.group(1)
            if "://" in link or link.startswith("mailto:"):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            where = f"{rel(page)}: link {link!r}"
            if not target.exists():
                report.error(where, f"{rel(target)} does not exist")
            elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target.read_text()):
                report.error(where, f"{rel(target)} has no heading with the anchor {anchor!r}")


def dashboard_problems(dashboard):
    """What a Grafana dashboard JSON model lacks: title, uid, schemaVersion, panels with unique
    ids, a type, a title and a position on the 24-column grid; Prometheus queries with an expr
    and a refId unique within their panel."""
    if not isinstance(dashboard, dict):
        return ["a dashboard must be a JSON object"]
    problems = []
    for field, kind in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list)):
        if not isinstance(dashboard.get(field), kind) or dashboard.get(field) in ("", []):
            problems.append(f"{field}: missing or not a non-empty {kind.__name__}")
    panels = []
    top = dashboard.get("panels") if isinstance(dashboard.get("panels"), list) else []
    for panel in top:   # and the panels of collapsed rows
        panels.append(panel)
        if isinstance(panel, dict) and isinstance(panel.get("panels"), list):
            panels += panel["panels"]
    ids = {}
    for index, panel in enumerate(panels):
        if not isinstance(panel, dict):
            problems.append(f"panels[{index}]: not an object")
            continue
        at = f"panel {panel.get('id')} {panel.get('title')!r}"
        if not isinstance(panel.get("id"), int):
            problems.append(f"{at}: id is not an integer")
        elif panel["id"] in ids:
            problems.append(f"{at}: id {panel['id']} is also the id of panel {ids[panel['id']]!r}")
        else:
            ids[panel["id"]] = panel.get("title")
        for field in ("type", "title"):
            if not isinstance(panel.get(field), str) or not panel.get(field):
                problems.append(f"{at}: {field} missing")
        grid = panel.get("gridPos")
        if not isinstance(grid, dict) or not all(isinstance(grid.get(k), int) for k in "xywh") \
                or grid["x"] < 0 or grid["w"] < 1 or grid["h"] < 1 or grid["x"] + grid["w"] > 24:
            problems.append(f"{at}: gridPos must have integer x, y, w, h within 24 columns")
        refs = set()
        for target in panel.get("targets") or []:
            if not isinstance(target, dict) or not str(target.get("expr") or "").strip():
                problems.append(f"{at}: a target without expr")
                continue
            if not target.get("refId") or target["refId"] in refs:
                problems.append(f"{at}: target refId {target.get('refId')!r} missing or repeated")
            refs.add(target.get("refId"))
    return problems


def check_dashboards(json_paths, documents, report):
    """Grafana dashboards: the *.json files, and every data entry of the ConfigMaps labelled
    grafana_dashboard (the sidecar's convention)."""
    for path in json_paths:
        try:
            dashboard = json.loads(Path(path).read_text())
        except ValueError as err:
            report.error(rel(path), f"not valid JSON: {err}")
            continue
        for problem in dashboard_problems(dashboard):
            report.error(rel(path), problem)
    for doc in documents:
        if not doc.is_a("", "ConfigMap") or "grafana_dashboard" not in (doc.labels or {}):
            continue
        for key, text in (doc.obj.get("data") or {}).items():
            try:
                dashboard = json.loads(text)
            except (TypeError, ValueError) as err:
                report.error(f"{doc.where()} data {key}", f"not valid JSON: {err}")
                continue
            for problem in dashboard_problems(dashboard):
                report.error(f"{doc.where()} data {key}", problem)


def dns_name_matches(pattern, host):
    """Whether a certificate's DNS name (one leading * label allowed) covers `host`."""
    if pattern.startswith("*."):
        head, _, rest = host.partition(".")
        return bool(head) and rest == pattern[2:]
    return pattern == host


def check_tls(documents, report):
    """The broker is reached over TLS only, with a certificate that names what clients dial: a
    RabbitmqCluster's spec.tls.secretName is a cert-manager Certificate of the manifests (whose
    issuer is too), the syncbus config connects with amqp.tls enabled, peer verification on, to a
    name the certificate lists and a TLS port, and reads its CA from a mounted ca.crt."""
    certificates = {(d.namespace, d.spec.get("secretName")): d
                    for d in documents if d.is_a("cert-manager.io", "Certificate")}
    issuers = {(d.namespace, d.name) for d in documents if d.is_a("cert-manager.io", "Issuer")}
    for certificate in certificates.values():
        ref = certificate.spec.get("issuerRef") or {}
        if ref.get("kind", "Issuer") == "Issuer" and (certificate.namespace, ref.get("name")) not in issuers:
            report.error(certificate.where(), f"issuerRef Issuer {ref.get('name')!r} is not in the manifests")
    for issuer in documents:
        if issuer.is_a("cert-manager.io", "Issuer") and (issuer.spec.get("ca") or {}).get("secretName"):
            secret = issuer.spec["ca"]["secretName"]
            ca = certificates.get((issuer.namespace, secret))
            if ca is None or not ca.spec.get("isCA"):
                report.error(issuer.where(), f"spec.ca.secretName {secret!r} is no CA Certificate's "
                                             "secret in the manifests")
    clusters = {}
    for cluster in documents:
        if not cluster.is_a("rabbitmq.com", "RabbitmqCluster"):
            continue
        tls = cluster.spec.get("tls") or {}
        if not tls.get("secretName") or not tls.get("disableNonTLSListeners"):
            report.error(cluster.where(), "spec.tls must name the server certificate's Secret and "
                                          "set disableNonTLSListeners: the broker speaks TLS only")
            continue
        certificate = certificates.get((cluster.namespace, tls["secretName"]))
        if certificate is None:
            report.error(cluster.where(), f"spec.tls.secretName {tls['secretName']!r} is written by "
                                          "no cert-manager Certificate in the manifests")
            continue
        clusters[cluster.name] = (cluster, certificate)
    for doc in documents:
        if not doc.is_a("", "ConfigMap") or "syncbus.yaml" not in (doc.obj.get("data") or {}):
            continue
        try:
            amqp = (yaml.load(doc.obj["data"]["syncbus.yaml"], Loader=YAML_LOADER) or {}).get("amqp") or {}
        except (yaml.YAMLError, AttributeError):
            continue   # reported by check_syncbus_config
        host = str(amqp.get("host", ""))
        tls = amqp.get("tls") or {}
        if not tls.get("enabled") or tls.get("verifyPeer") is False or not tls.get("caFile"):
            report.error(doc.where(), "syncbus.yaml: amqp.tls must be enabled, with a caFile and "
                                      "verifyPeer on")
        if amqp.get("port") not in (None, 5671):
            report.error(doc.where(), f"syncbus.yaml: amqp.port {amqp.get('port')} is not the AMQPS port 5671")
        found = clusters.get(host.split(".")[0])
        if found is not None:
            names = found[1].spec.get("dnsNames") or []
            if not any(dns_name_matches(name, host) for name in names):
                report.error(doc.where(), f"syncbus.yaml: amqp.host {host!r} is not a DNS name of "
                                          f"Certificate {found[1].name} (rabbitmq-c checks the name)")
    for scaler in documents:
        if not scaler.is_a("keda.sh", "ScaledObject"):
            continue
        for trigger in scaler.spec.get("triggers") or []:
            url = (trigger.get("metadata") or {}).get("host", "")
            if trigger.get("type") == "rabbitmq" and url and not url.startswith(("https://", "amqps://")):
                report.error(scaler.where(), f"rabbitmq trigger host {url!r}: not TLS")


def pods_of(documents):
    """(namespace, labels, what) of the pods the manifests make: Deployments' templates and the
    RabbitmqClusters' nodes."""
    pods = [(d.namespace, template_labels(d), d.where()) for d in documents if d.is_a("apps", "Deployment")]
    pods += [(d.namespace, operator_pod_labels(d), d.where()) for d in documents
             if d.is_a("rabbitmq.com", "RabbitmqCluster")]
    return pods


def check_network_policies(documents, report):
    """Every namespace the manifests create has a default-deny policy (every pod, both
    directions, no rule), and every pod selector of a policy (the policy's own, and those of its
    peers within the namespace) selects pods of the manifests."""
    pods = pods_of(documents)
    policies = [d for d in documents if d.is_a("networking.k8s.io", "NetworkPolicy")]
    for namespace in sorted(d.name for d in documents if d.is_a("", "Namespace")):
        if not any(p.namespace == namespace and not (p.spec.get("podSelector") or {})
                   and set(p.spec.get("policyTypes") or []) == {"Ingress", "Egress"}
                   and not p.spec.get("ingress") and not p.spec.get("egress") for p in policies):
            report.error(f"namespace {namespace}", "no default-deny NetworkPolicy (podSelector {}, "
                                                   "policyTypes Ingress and Egress, no rules)")

    def selects_pods(namespace, selector):
        selector = selector or {}
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            return True
        return any(ns == namespace and selector_matches(selector, pod) for ns, pod, _ in pods)

    for policy in policies:
        if not selects_pods(policy.namespace, policy.spec.get("podSelector")):
            report.error(policy.where(), "spec.podSelector selects no pod of the manifests")
        for direction, peers in (("ingress", "from"), ("egress", "to")):
            for rule in policy.spec.get(direction) or []:
                for peer in rule.get(peers) or []:
                    if "podSelector" in peer and "namespaceSelector" not in peer and \
                            not selects_pods(policy.namespace, peer["podSelector"]):
                        report.error(policy.where(), f"{direction} peer podSelector "
                                                     f"{peer['podSelector']} selects no pod of the manifests")


RESTRICTED = ("restricted", "latest")


def restricted_problems(template):
    """What of a pod template Pod Security's restricted profile refuses (the checks that apply to
    pod templates without host namespaces, host paths or extra capabilities)."""
    spec = template.get("spec") or {}
    pod = spec.get("securityContext") or {}
    problems = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            problems.append(f"{field} is set")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            problems.append(f"volume {volume.get('name')!r} is a hostPath")
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        name = container.get("name")
        sc = container.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"container {name!r}: securityContext.allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.append(f"container {name!r}: securityContext.capabilities.drop lacks ALL")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            problems.append(f"container {name!r}: adds capabilities")
        if sc.get("privileged"):
            problems.append(f"container {name!r}: privileged")
        if not (sc.get("runAsNonRoot") or (pod.get("runAsNonRoot") and sc.get("runAsNonRoot") is not False)):
            problems.append(f"container {name!r}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0 or pod.get("runAsUser") == 0:
            problems.append(f"container {name!r}: runs as UID 0")
        profile = ((sc.get("seccompProfile") or pod.get("seccompProfile")) or {}).get("type")
        if profile not in ("RuntimeDefault", "Localhost"):
            problems.append(f"container {name!r}: no RuntimeDefault or Localhost seccompProfile")
    return problems


def platform_assigned(template):
    """A RabbitmqCluster override whose securityContexts are all empty: the RabbitMQ Cluster
    Operator then sets none of its own and the platform assigns them (OpenShift's SCCs, which
    satisfy the restricted profile; components/openshift)."""
    spec = template.get("spec") or {}
    contexts = [spec.get("securityContext", None)]
    contexts += [c.get("securityContext", None) for c in (spec.get("initContainers") or []) +
                 (spec.get("containers") or [])]
    return bool(spec) and all(c == {} for c in contexts)


def check_namespaces(documents, report, expected):
    """Every namespace reference of a build names the namespace it installs into (the one of its
    Namespace object; `expected` when given): metadata.namespace, the ServiceAccount subjects of
    RBAC bindings, Service host names (NAME.NAMESPACE.svc) in any string, and the Lease
    namespaces of the embedded syncbus.yaml, which should be left out (the pods' own)."""
    namespaces = [d.name for d in documents if d.is_a("", "Namespace")]
    if len(namespaces) != 1:
        report.error("build", f"{len(namespaces)} Namespace objects; a build installs into one")
        return
    own = namespaces[0]
    if expected and own != expected:
        report.error("build", f"installs into namespace {own!r}, not {expected!r}")
    accounts = {d.name for d in documents if d.is_a("", "ServiceAccount")}
    service_host = re.compile(r"\b[a-z0-9]([-a-z0-9]*[a-z0-9])?\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc\b")

    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for value in node.values():
                yield from strings(value)
        elif isinstance(node, list):
            for value in node:
                yield from strings(value)

    for doc in documents:
        if doc.namespace and doc.namespace != own:
            report.error(doc.where(), f"metadata.namespace {doc.namespace!r} is not {own!r}")
        for subject in doc.obj.get("subjects") or [] if doc.group == "rbac.authorization.k8s.io" else []:
            if subject.get("kind") == "ServiceAccount" and subject.get("name") in accounts and \
                    subject.get("namespace") != own:
                report.error(doc.where(), f"subject ServiceAccount {subject.get('name')} in namespace "
                                          f"{subject.get('namespace')!r}, not {own!r}")
        for text in strings(doc.obj):
            for match in service_host.finditer(text):
                if match.group(2) != own:
                    report.error(doc.where(), f"{match.group(0)!r} names namespace "
                                              f"{match.group(2)!r}, not {own!r}")
        if doc.is_a("", "ConfigMap") and "syncbus.yaml" in (doc.obj.get("data") or {}):
            try:
                config = yaml.load(doc.obj["data"]["syncbus.yaml"], Loader=YAML_LOADER) or {}
            except yaml.YAMLError:
                continue   # reported by check_syncbus_config
            for section, key in (("publisher", "leaderElection"), ("consumer", "clusterLease")):
                ns = ((config.get(section) or {}).get(key) or {}).get("namespace")
                if ns and ns != own:
                    report.error(doc.where(), f"syncbus.yaml {section}.{key}.namespace {ns!r} is "
                                              f"not {own!r} (leave it out: the pods' own)")


# What a hub has before syncbus: Kubernetes' own kinds, the RabbitMQ operators' and cert-manager's.
BASE_GROUPS = {"rabbitmq.com", "cert-manager.io"}


def check_base_kinds(documents, report):
    """The base applies on a hub with only the RabbitMQ operators and cert-manager: its kinds
    are built in or theirs (KEDA's, the Prometheus Operator's and OpenShift's belong in
    components)."""
    for doc in documents:
        if "." in doc.group and doc.group not in BASE_GROUPS and not doc.group.endswith(".k8s.io"):
            report.error(doc.where(), f"kind {doc.kind} of {doc.group} needs more than the RabbitMQ "
                                      "operators and cert-manager: put it in a component")


def check_hpa_metrics_scraped(documents, report):
    """An HPA on prometheus-adapter's syncbus_work_backlog needs the RabbitMQ per-queue series:
    a ServiceMonitor in the build that scrapes /metrics/detailed (components/monitoring)."""
    scraped = any(endpoint.get("path") == "/metrics/detailed"
                  for d in documents if d.is_a("monitoring.coreos.com", "ServiceMonitor")
                  for endpoint in d.spec.get("endpoints") or [])
    for scaler in documents:
        if scaler.is_a("autoscaling", "HorizontalPodAutoscaler") and not scraped and any(
                m.get("type") == "External" for m in scaler.spec.get("metrics") or []):
            report.error(scaler.where(), "its External metric comes from RabbitMQ series no "
                                         "ServiceMonitor of the build scrapes (add components/monitoring)")


def check_pod_security(documents, report):
    """Every namespace the manifests create enforces Pod Security "restricted" (and audits and
    warns with it), and every pod template in it satisfies that profile."""
    enforced = {}
    for namespace in documents:
        if not namespace.is_a("", "Namespace"):
            continue
        labels = namespace.labels
        for mode in ("enforce", "audit", "warn"):
            level = labels.get(f"pod-security.kubernetes.io/{mode}")
            version = labels.get(f"pod-security.kubernetes.io/{mode}-version", "latest")
            if (level, version) != RESTRICTED:
                report.error(namespace.where(), f"label pod-security.kubernetes.io/{mode} must be "
                                                f"restricted (version latest), not {level!r} ({version!r})")
        enforced[namespace.name] = True
    for doc in documents:
        if doc.is_a("apps", "Deployment"):
            template = pod_template(doc)
        elif doc.is_a("rabbitmq.com", "RabbitmqCluster"):
            # What the override adds to the operator's StatefulSet; older operators set nothing.
            template = ((((doc.spec.get("override") or {}).get("statefulSet") or {}).get("spec") or {})
                        .get("template") or {})
        else:
            continue
        if doc.is_a("rabbitmq.com", "RabbitmqCluster") and platform_assigned(template):
            continue
        if doc.namespace in enforced:
            for problem in restricted_problems(template):
                report.error(doc.where(), f"Pod Security restricted: {problem}")


def check_duplicates(documents, report):
    seen = {}
    for doc in documents:
        key = (doc.group, doc.kind, doc.namespace, doc.name)
        if key in seen:
            report.error(doc.where(), f"duplicate of {seen[key].where()}")
        seen.setdefault(key, doc)


# ---------------------------------------------------------------------------------------------


def schema_sources(option):
    """Where the schemas come from (for the summary line), the OpenAPI v2 document and the CRD dirs:
    the reference dir of --reference or $SYNCBUS_REFERENCE_DIR, else the repository's copies."""
    reference = option or os.environ.get("SYNCBUS_REFERENCE_DIR")
    if not reference:
        return (f"{rel(SCHEMAS)} + {rel(HIVE_CRDS)}", SCHEMAS / OPENAPI_V2,
                [SCHEMAS / "crds", HIVE_CRDS])
    reference = Path(reference)
    if not reference.is_dir():
        raise UsageError(f"reference dir {reference} not found (give --reference DIR or set "
                         "SYNCBUS_REFERENCE_DIR, or neither to use the repository's schemas)")
    return str(reference), reference / OPENAPI_V2, [reference / sub for sub in CRD_DIRS]


def main():
    parser = argparse.ArgumentParser(
        prog="validate-manifests",
        description="Validate Kubernetes manifests (default: deploy/) against the Kubernetes 1.26 "
                    "OpenAPI schemas and the operator CRDs, and against the repository's broker "
                    "configuration and topology.")
    parser.add_argument("paths", nargs="*", type=Path, help="files or directories (default: deploy/)")
    parser.add_argument("--reference", help="reference dir with k8s-openapi/, crds/ and "
                        "hive-crds/, e.g. ../shared/reference (default: $SYNCBUS_REFERENCE_DIR, "
                        "else the repository's tests/deploy/schemas and tests/kubesim/crds)")
    parser.add_argument("--definitions", type=Path, default=REPO / "rabbitmq" / "definitions.json",
                        help="broker definitions the topology objects must match "
                             "(default: rabbitmq/definitions.json; skipped while it does not exist)")
    parser.add_argument("--rabbitmq-conf", type=Path, default=REPO / "rabbitmq" / "rabbitmq.conf",
                        help="settings RabbitmqCluster additionalConfig must carry "
                             "(default: rabbitmq/rabbitmq.conf)")
    parser.add_argument("--no-repository-checks", action="store_true",
                        help="skip the comparisons with --definitions and --rabbitmq-conf")
    parser.add_argument("--build", action="store_true",
                        help="build the named kustomization directories (as without paths)")
    parser.add_argument("--namespace", help="the namespace every build must install into "
                                            "(default: that of its Namespace object)")
    args = parser.parse_args()
    if not args.paths or args.build:
        targets = args.paths or [REPO / "deploy", REPO / "deploy" / "liveness"] + sorted(
            p for p in OVERLAYS.iterdir() if p.is_dir())
        return validate_builds(args, targets)

    try:
        source, v2_path, crd_dirs = schema_sources(args.reference)
        files, dashboards = manifest_files(args.paths or [REPO / "deploy"])
        if not files:
            raise UsageError("no YAML files to validate")
        schemas = Schemas(v2_path, crd_dirs)
    except UsageError as err:
        print(f"validate-manifests: {err}", file=sys.stderr)
        return 2

    report = Report()
    documents, kustomizations = load(files, report)
    check_all(args, schemas, documents, kustomizations, dashboards, report)

    for error in report.errors:
        print(error)
    if report.errors:
        print(f"validate-manifests: {len(report.errors)} error(s) in {len(documents)} documents")
        return 1
    print(f"validate-manifests: {len(documents)} documents in {len(files)} files and "
          f"{len(dashboards)} Grafana dashboard(s) valid (Kubernetes 1.26 + CRDs from {source})")
    return 0


def validate_builds(args, targets):
    """Each kustomization of `targets` built and validated on its own; the kustomization files
    and Grafana dashboards under them checked once."""
    try:
        source, v2_path, crd_dirs = schema_sources(args.reference)
        schemas = Schemas(v2_path, crd_dirs)
        files, dashboards = manifest_files(targets)
    except UsageError as err:
        print(f"validate-manifests: {err}", file=sys.stderr)
        return 2
    shared = Report()
    _, kustomizations = load([f for f in files if f.name in KUSTOMIZATION_FILES], shared)
    check_kustomizations(kustomizations, shared)
    check_dashboards(dashboards, [], shared)
    check_doc_links(shared)
    failed = len(shared.errors)
    for error in shared.errors:
        print(error)
    for target in targets:
        report = Report()
        try:
            resources = kustomize.build(target)
        except (kustomize.KustomizeError, OSError) as err:
            print(f"{rel(target)}: cannot build: {err}")
            failed += 1
            continue
        documents = [Document(r.path, r.index, r.obj) for r in resources]
        outside = []
        if Path(target).resolve() == (REPO / "deploy" / "liveness").resolve():
            outside = [Document(r.path, r.index, r.obj) for r in kustomize.build(REPO / "deploy")]
        check_all(args, schemas, documents, [], [], report, outside)
        check_namespaces(documents, report, args.namespace)
        if Path(target).resolve() == (REPO / "deploy").resolve():
            check_base_kinds(documents, report)
        for error in report.errors:
            print(f"{rel(target)}: {error}")
        failed += len(report.errors)
        state = f"{len(report.errors)} error(s)" if report.errors else "valid"
        print(f"validate-manifests: build {rel(target)}: {len(documents)} documents {state}")
    if failed:
        print(f"validate-manifests: {failed} error(s) in {len(targets)} builds")
        return 1
    print(f"validate-manifests: {len(targets)} builds and {len(dashboards)} Grafana dashboard(s) "
          f"valid (Kubernetes 1.26 + CRDs from {source})")
    return 0


def check_all(args, schemas, documents, kustomizations, dashboards, report, outside=()):
    for doc in documents:
        check_document(doc, schemas, report)
    check_duplicates(documents, report)
    check_kustomizations(kustomizations, report)
    check_workloads(documents, report)
    check_broker_disruption_budgets(documents, report)
    check_rbac(documents, report, outside)
    check_monitoring_and_scaling(documents, report)
    check_autoscaler_choice(documents, kustomizations, report)
    check_backlog_queues(documents, report)
    check_alert_rules(documents, report)
    check_alert_table(documents, report)
    check_dashboards(dashboards, documents, report)
    check_topology_references(documents, report)
    if not args.no_repository_checks:
        check_rabbitmq_conf(documents, args.rabbitmq_conf, report)
        check_definitions(documents, args.definitions, report)
    check_syncbus_config(documents, report)
    check_tls(documents, report)
    check_network_policies(documents, report)
    check_pod_security(documents, report)
    check_hpa_metrics_scraped(documents, report)


if __name__ == "__main__":
    sys.exit(main())
