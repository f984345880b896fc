# Shared helpers for the scripts in scripts/: messages, repository paths, timing.
# Sourced by bash scripts that run with `set -euo pipefail`; defines functions and SYNCBUS_ROOT only.
# shellcheck shell=bash

# shellcheck disable=SC2034  # used by the scripts that source this file
SYNCBUS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Name of the calling script, used as the prefix of every message.
syncbus_script_name="$(basename "$0")"

note() { printf '%s: %s\n' "$syncbus_script_name" "$*" >&2; }

die() {
  printf '%s: error: %s\n' "$syncbus_script_name" "$*" >&2
  exit 1
}

# die_usage MESSAGE: a usage error (exit 2), as opposed to a runtime failure (exit 1).
die_usage() {
  printf '%s: %s\n' "$syncbus_script_name" "$*" >&2
  printf "Run '%s --help' for usage.\n" "$syncbus_script_name" >&2
  exit 2
}

# now_seconds: wall-clock time with microseconds (bash 5 EPOCHREALTIME).
now_seconds() { printf '%s\n' "${EPOCHREALTIME/,/.}"; }

# elapsed_since START: seconds since START (from now_seconds), one decimal.
elapsed_since() {
  local start="$1" now
  now="$(now_seconds)"
  awk -v a="$start" -v b="$now" 'BEGIN { printf "%.1f", b - a }'
}

# format_duration SECONDS: "12.3s" or "4m05s".
format_duration() {
  awk -v s="$1" 'BEGIN {
    if (s < 60) { printf "%.1fs", s } else { printf "%dm%02ds", int(s / 60), int(s) % 60 }
  }'
}

# python_tool MODULE ARGS...: runs `python3 -m syncbus_tools.MODULE ARGS...`, a module of
# syncbus's Python package (scripts/lib/syncbus_tools), with scripts/lib first on PYTHONPATH: the
# one place where the scripts find the package. exec_python_tool: the same in place of the shell.
python_tool() {
  local module="$1"
  shift
  PYTHONPATH="$SYNCBUS_ROOT/scripts/lib${PYTHONPATH:+:$PYTHONPATH}" python3 -m "syncbus_tools.$module" "$@"
}
exec_python_tool() {
  local module="$1"
  shift
  export PYTHONPATH="$SYNCBUS_ROOT/scripts/lib${PYTHONPATH:+:$PYTHONPATH}"
  exec python3 -m "syncbus_tools.$module" "$@"
}

# run_as_root CMD...: run CMD as root, through sudo when the caller is not root.
run_as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "'$*' needs root and sudo is not available; run this script as root"
  fi
}

# repository_files: the repository's files (tracked, and new ones not ignored; every file under
# the root, build trees and .git aside, outside a git checkout), one per line, relative to the
# root.
repository_files() {
  if git -C "$SYNCBUS_ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$SYNCBUS_ROOT" ls-files --cached --others --exclude-standard
  else
    (cd "$SYNCBUS_ROOT" && find . \( -name .git -o -path './build*' \) -prune -o -type f -print) |
      sed 's|^\./||'
  fi
}

# cxx_files: the repository's C++ sources and headers (.cc, .cpp, .h), one per line, relative to
# the root: what clang-format keeps in shape.
cxx_files() {
  local file
  while IFS= read -r file; do
    [[ -f $SYNCBUS_ROOT/$file ]] || continue   # deleted, not yet committed
    case "$file" in *.cc|*.cpp|*.h) printf '%s\n' "$file" ;; esac
  done < <(repository_files)
}
