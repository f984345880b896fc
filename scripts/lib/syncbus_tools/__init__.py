"""syncbus's own tools in Python: the chaos run, the whole-system benchmarks, manifest validation,
the documentation's pictures, and what they share.

Modules:
  testbed               what the chaos run and the benchmarks share: child processes and their
                        /proc readings, free ports, env files, the Kubernetes REST client,
                        Prometheus text, a private RabbitMQ node, RunError
  chaos, chaos_system, chaos_faults, chaos_checks, secret_scan
                        scripts/chaos: the run, its system, its faults, its checks, its secret scan
  bench_fleet           scripts/bench-fleet
  bench_publisher_real  scripts/bench-publisher --real-apiserver
  validate_manifests, kustomize
                        scripts/validate-manifests and its kustomize subset
  release_manifests     scripts/release: the rendered manifests, the image pinned by digest
  docs_pictures         scripts/docs-pictures --screenshots

Modules import each other as `syncbus_tools.X` and never change sys.path. The package is found
on PYTHONPATH: the scripts in scripts/ run a module with exec_python_tool (scripts/lib/common.sh,
`PYTHONPATH=scripts/lib python3 -m syncbus_tools.MODULE`), and ctest gives its Python tests the
same PYTHONPATH (tests/CMakeLists.txt). By hand, from the repository root:
  PYTHONPATH=scripts/lib python3 -m syncbus_tools.secret_scan --help
"""

from pathlib import Path

# The repository this package belongs to (scripts/lib/syncbus_tools/__init__.py, three up).
ROOT = str(Path(__file__).resolve().parents[3])
