"""The part of kustomize that syncbus's manifests use, so that they are built and checked where no
kustomize (kubectl 1.21 or later) is installed: Debian 12 ships kubectl 1.20, whose kustomize
predates components.

build(directory) renders a kustomization the way `kubectl kustomize` does for these fields only:
resources (files and kustomization directories), components, namespace, patches (JSON 6902
operations with a target), images, vars with configurations (varReference), and nothing else:
any other field is an error, never silently ignored. tests/deploy/kustomize-oracle compares its
output with the real kustomize's wherever one is installed.

Semantics followed (kustomize v4/v5):
- Components are accumulated after the resources and before the including kustomization's own
  transformers; a component's transformers run over everything accumulated so far.
- Transformer order at one level: patches, namespace, images.
- namespace sets metadata.namespace of every namespaced object and renames Namespace objects; a
  RoleBinding's or ClusterRoleBinding's ServiceAccount subject follows a ServiceAccount of the
  build that it named (same name and namespace before the change), and one named "default".
- vars resolve last, after the outermost namespace, from the objects as finally built; $(NAME)
  is replaced in the fields of the varReference configurations and in containers' command, args
  and env values.
"""

import copy
import re
from pathlib import Path

import yaml

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
FIELDS = {"apiVersion", "kind", "resources", "components", "namespace", "patches", "images", "vars",
          "configurations"}
# Kinds that are not namespaced (the built-in ones these builds could hold, and cert-manager's).
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "PriorityClass", "IngressClass", "APIService",
                  "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "CSIDriver",
                  "ClusterIssuer", "ClusterTriggerAuthentication", "Node", "RuntimeClass"}
POD_TEMPLATE_PATHS = {"Deployment": ("spec", "template", "spec"), "StatefulSet": ("spec", "template", "spec"),
                      "DaemonSet": ("spec", "template", "spec"), "Job": ("spec", "template", "spec"),
                      "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"), "Pod": ("spec",)}
VAR_PATTERN = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class KustomizeError(Exception):
    """A kustomization this subset cannot build (or kustomize itself would refuse)."""


class Resource:
    """One object of a build and where it came from (file and document index)."""

    def __init__(self, obj, path, index):
        self.obj = obj
        self.path = path
        self.index = index

    @property
    def kind(self):
        return self.obj.get("kind", "")

    @property
    def metadata(self):
        return self.obj.setdefault("metadata", {})

    def group(self):
        return str(self.obj.get("apiVersion", "")).rpartition("/")[0]


class Build:
    """What a (sub)kustomization accumulated: resources, vars and varReference field specs."""

    def __init__(self):
        self.resources = []
        self.vars = []
        self.var_references = []


def is_kustomization_dir(path):
    return any((Path(path) / name).is_file() for name in KUSTOMIZATION_FILES)


def load_kustomization(directory):
    for name in KUSTOMIZATION_FILES:
        path = Path(directory) / name
        if path.is_file():
            with open(path) as f:
                obj = yaml.load(f, Loader=YAML_LOADER)
            if not isinstance(obj, dict):
                raise KustomizeError(f"{path}: not a mapping")
            unknown = sorted(set(obj) - FIELDS)
            if unknown:
                raise KustomizeError(f"{path}: field(s) {', '.join(unknown)} not supported by "
                                     "syncbus_tools.kustomize (use kubectl kustomize)")
            return path, obj
    raise KustomizeError(f"{directory}: no kustomization file")


def load_documents(path):
    try:
        with open(path) as f:
            docs = list(yaml.load_all(f, Loader=YAML_LOADER))
    except (OSError, yaml.YAMLError) as err:
        raise KustomizeError(f"{path}: {err}") from err
    out = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise KustomizeError(f"{path}[{index}]: a resource must be a mapping")
        out.append(Resource(doc, Path(path), index))
    return out


def build(directory):
    """The objects `directory`'s kustomization renders, as Resources, in kustomize's order of
    accumulation (vars resolved)."""
    result = _accumulate(Path(directory).resolve(), expect_component=False, into=None)
    _resolve_vars(result)
    return result.resources


def _accumulate(directory, expect_component, into):
    path, kustomization = load_kustomization(directory)
    is_component = kustomization.get("kind") == "Component"
    if is_component != expect_component:
        want = "a Component" if expect_component else "a Kustomization"
        raise KustomizeError(f"{path}: expected {want}")
    acc = into if into is not None else Build()
    for entry in kustomization.get("resources") or []:
        target = (directory / entry).resolve()
        if target.is_dir():
            sub = _accumulate(target, expect_component=False, into=None)
            acc.resources += sub.resources
            acc.vars += sub.vars
            acc.var_references += sub.var_references
        elif target.is_file():
            acc.resources += load_documents(target)
        else:
            raise KustomizeError(f"{path}: resource {entry} does not exist")
    for entry in kustomization.get("configurations") or []:
        acc.var_references += _load_configuration(directory / entry)
    acc.vars += kustomization.get("vars") or []
    for entry in kustomization.get("components") or []:
        _accumulate((directory / entry).resolve(), expect_component=True, into=acc)
    _transform(directory, kustomization, acc.resources)
    return acc


def _load_configuration(path):
    with open(path) as f:
        config = yaml.load(f, Loader=YAML_LOADER) or {}
    unknown = sorted(set(config) - {"varReference"})
    if unknown:
        raise KustomizeError(f"{path}: configuration(s) {', '.join(unknown)} not supported")
    return config.get("varReference") or []


# ---------------------------------------------------------------------------------------------
# Transformers


def _transform(directory, kustomization, resources):
    for patch in kustomization.get("patches") or []:
        _apply_patch(directory, patch, resources)
    namespace = kustomization.get("namespace")
    if namespace:
        _set_namespace(namespace, resources)
    for image in kustomization.get("images") or []:
        _set_image(image, resources)


def _selected(target, resource):
    api = str(resource.obj.get("apiVersion", ""))
    group, _, version = api.rpartition("/")
    checks = (("group", group), ("version", version), ("kind", resource.kind),
              ("namespace", resource.metadata.get("namespace", "")))
    for key, value in checks:
        if key in target and target[key] != value:
            return False
    if "name" in target and not re.fullmatch(target["name"], resource.metadata.get("name", "")):
        return False
    unknown = set(target) - {"group", "version", "kind", "name", "namespace"}
    if unknown:
        raise KustomizeError(f"patch target field(s) {', '.join(sorted(unknown))} not supported")
    return True


def _apply_patch(directory, patch, resources):
    if "path" in patch:
        with open(directory / patch["path"]) as f:
            text = f.read()
    else:
        text = patch.get("patch", "")
    operations = yaml.load(text, Loader=YAML_LOADER)
    if not isinstance(operations, list) or "target" not in patch:
        raise KustomizeError(f"{directory}: only JSON 6902 patches with a target are supported")
    for resource in resources:
        if _selected(patch["target"], resource):
            for operation in operations:
                _json_patch(resource, operation)


def _pointer(path):
    if not path.startswith("/"):
        raise KustomizeError(f"JSON pointer {path!r} must start with /")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _json_patch(resource, operation):
    op, parts = operation.get("op"), _pointer(operation.get("path", ""))
    parent = resource.obj
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent.get(part)
        if parent is None:
            raise KustomizeError(f"{resource.kind} {resource.metadata.get('name')}: patch path "
                                 f"{operation.get('path')} does not exist")
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op == "add":
            parent.insert(index, copy.deepcopy(operation["value"]))
        elif op == "replace":
            parent[index] = copy.deepcopy(operation["value"])
        elif op == "remove":
            del parent[index]
        else:
            raise KustomizeError(f"patch op {op!r} not supported")
        return
    if op in ("replace", "remove") and last not in parent:
        raise KustomizeError(f"{resource.kind} {resource.metadata.get('name')}: patch path "
                             f"{operation.get('path')} does not exist")
    if op in ("add", "replace"):
        parent[last] = copy.deepcopy(operation["value"])
    elif op == "remove":
        del parent[last]
    else:
        raise KustomizeError(f"patch op {op!r} not supported")


def _set_namespace(namespace, resources):
    moved = {}
    for resource in resources:
        if resource.kind == "Namespace":
            resource.metadata["name"] = namespace
        elif resource.kind not in CLUSTER_SCOPED:
            if resource.kind == "ServiceAccount":
                moved[(resource.metadata.get("name"), resource.metadata.get("namespace", ""))] = namespace
            resource.metadata["namespace"] = namespace
    for resource in resources:
        if resource.group() != "rbac.authorization.k8s.io" or resource.kind not in (
                "RoleBinding", "ClusterRoleBinding"):
            continue
        for subject in resource.obj.get("subjects") or []:
            if subject.get("kind") != "ServiceAccount":
                continue
            key = (subject.get("name"), subject.get("namespace", ""))
            if key in moved:
                subject["namespace"] = moved[key]
            elif subject.get("name") == "default":
                subject["namespace"] = namespace


def _containers(resource):
    path = POD_TEMPLATE_PATHS.get(resource.kind)
    spec = resource.obj
    for part in path or ():
        spec = spec.get(part) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return []
    return (spec.get("initContainers") or []) + (spec.get("containers") or [])


def _set_image(image, resources):
    name = image["name"]
    for resource in resources:
        for container in _containers(resource):
            current = str(container.get("image", ""))
            base = re.split(r"[@]", current)[0]
            base = base.rsplit(":", 1)[0] if ":" in base.rsplit("/", 1)[-1] else base
            if base != name:
                continue
            new = image.get("newName", base)
            if "digest" in image:
                container["image"] = f"{new}@{image['digest']}"
            elif "newTag" in image:
                container["image"] = f"{new}:{image['newTag']}"
            else:
                container["image"] = new + current[len(base):]


# ---------------------------------------------------------------------------------------------
# Vars


def _field(obj, dotted):
    value = obj
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _resolve_vars(acc):
    values = {}
    for var in acc.vars:
        ref = var.get("objref") or {}
        fieldpath = (var.get("fieldref") or {}).get("fieldpath", "metadata.name")
        found = [r for r in acc.resources if r.kind == ref.get("kind")
                 and r.metadata.get("name") == ref.get("name")
                 and ("apiVersion" not in ref or r.obj.get("apiVersion") == ref["apiVersion"])]
        if len(found) != 1:
            raise KustomizeError(f"var {var.get('name')}: {len(found)} objects match {ref}")
        value = _field(found[0].obj, fieldpath)
        if not isinstance(value, (str, int, float, bool)):
            raise KustomizeError(f"var {var.get('name')}: {fieldpath} of {ref} is not a scalar")
        values[var["name"]] = str(value)
    if not values:
        return
    specs = list(acc.var_references)
    for kind, path in POD_TEMPLATE_PATHS.items():
        prefix = "/".join(path)
        for container_list in ("containers", "initContainers"):
            for field in ("command", "args", "env/value"):
                specs.append({"kind": kind, "path": f"{prefix}/{container_list}/{field}"})
    for resource in acc.resources:
        for spec in specs:
            if spec.get("kind") and spec["kind"] != resource.kind:
                continue
            if spec.get("group") and spec["group"] != resource.group():
                continue
            _substitute(resource.obj, spec["path"].split("/"), values)


def _substitute(node, parts, values):
    if isinstance(node, list):
        for index, item in enumerate(node):
            if parts:
                _substitute(item, parts, values)
            elif isinstance(item, str):
                node[index] = _replace_vars(item, values)
        return
    if not isinstance(node, dict) or not parts:
        return
    key, rest = parts[0], parts[1:]
    if key not in node:
        return
    if rest:
        _substitute(node[key], rest, values)
    elif isinstance(node[key], str):
        node[key] = _replace_vars(node[key], values)
    elif isinstance(node[key], list):
        _substitute(node[key], [], values)


def _replace_vars(text, values):
    return VAR_PATTERN.sub(lambda m: values.get(m.group(1), m.group(0)), text)
