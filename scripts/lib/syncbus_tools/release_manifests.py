"""The rendered manifests of a release (scripts/release): deploy/ alone and with each of its
components, built as `kubectl kustomize` builds them (syncbus_tools.kustomize), with the image
pinned by digest, one YAML file per build. The hpa component needs the monitoring component
(validate-manifests refuses it alone), so its file holds both.

usage: python3 -m syncbus_tools.release_manifests --version V --digest sha256:... [--image-name N]
                                                  --out DIR
Prints the files written, one per line.
"""

import argparse
import re
import sys
import tempfile
from pathlib import Path

import yaml

from syncbus_tools import ROOT, kustomize

REPO = Path(ROOT)
# (file suffix, components in the order an overlay lists them, what the file is)
BUILDS = [
    ("base", [], "deploy/ alone: fixed consumers, no monitoring"),
    ("keda", ["keda"], "deploy/ with components/keda"),
    ("monitoring", ["monitoring"], "deploy/ with components/monitoring"),
    ("hpa", ["monitoring", "hpa"], "deploy/ with components/monitoring and components/hpa"),
    ("openshift", ["openshift"], "deploy/ with components/openshift"),
    ("standby", ["standby"], "deploy/ with components/standby (publisher and consumers at 0)"),
]
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def render(components, image_name, digest):
    """The objects of deploy/ with `components`, the image `syncbus` pinned to image_name@digest."""
    with tempfile.TemporaryDirectory() as tmp:
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [str(REPO / "deploy")],
            "components": [str(REPO / "deploy" / "components" / c) for c in components],
            "images": [{"name": "syncbus", "newName": image_name, "digest": digest}],
        }
        (Path(tmp) / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        return [r.obj for r in kustomize.build(tmp)]


def images_of(objects):
    found = set()
    for obj in objects:
        template = (obj.get("spec") or {}).get("template") or {}
        for container in (template.get("spec") or {}).get("containers") or []:
            found.add(container.get("image"))
    return found


def main():
    parser = argparse.ArgumentParser(prog="release_manifests", description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--digest", required=True, help="the image's manifest digest, sha256:...")
    parser.add_argument("--image-name", default="syncbus",
                        help="the repository the image is pushed to (default: syncbus)")
    parser.add_argument("--out", required=True, type=Path, help="directory to write the files to")
    args = parser.parse_args()
    if not DIGEST.match(args.digest):
        print(f"release_manifests: {args.digest!r} is not a sha256 digest", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    pinned = f"{args.image_name}@{args.digest}"
    for suffix, components, what in BUILDS:
        try:
            objects = render(components, args.image_name, args.digest)
        except kustomize.KustomizeError as e:
            print(f"release_manifests: {what}: {e}", file=sys.stderr)
            return 1
        if images_of(objects) != {pinned}:
            print(f"release_manifests: {what}: images {sorted(images_of(objects))}, not {pinned}",
                  file=sys.stderr)
            return 1
        path = args.out / f"syncbus-{args.version}-{suffix}.yaml"
        header = (f"# syncbus {args.version}: {what}, rendered by scripts/release.\n"
                  f"# Image: {pinned}. Apply with kubectl apply --server-side -f (docs/quickstart.md).\n")
        path.write_text(header + yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True))
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
