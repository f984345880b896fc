# The RabbitMQ versions syncbus is tested against, and how each one runs here.
#   3.10  Debian 12's rabbitmq-server (3.10.8, Erlang 25), installed on this machine.
#   4.0   Debian 13's rabbitmq-server (4.0.5, Erlang 27). It does not install on Debian 12 (newer
#         libc), so it lives in a Debian 13 root made once by debootstrap (scripts/install-deps)
#         and runs there under chroot, inside a private mount namespace that sees the root's /usr,
#         /etc and /var read-only, the host's /proc and /dev, and the directories a node needs at
#         their own paths (scripts/lib/rabbitmq-chroot). The network is the host's.
# Sourced by bash scripts after lib/common.sh; defines functions only.
# shellcheck shell=bash

readonly SYNCBUS_RABBITMQ_VERSIONS="3.10 4.0"

# rabbitmq_check_version V: exit 2 (usage) unless V is a version listed above.
rabbitmq_check_version() {
  [[ " $SYNCBUS_RABBITMQ_VERSIONS " == *" $1 "* ]] ||
    die_usage "--rabbitmq '$1': known versions are ${SYNCBUS_RABBITMQ_VERSIONS// /, }"
}

# rabbitmq_default_version: $SYNCBUS_RABBITMQ, else 3.10 (the version this machine has installed).
rabbitmq_default_version() {
  local version="${SYNCBUS_RABBITMQ:-3.10}"
  rabbitmq_check_version "$version"
  printf '%s\n' "$version"
}

# rabbitmq_root_dir V: the Debian root V runs in ("" for the host's own). Outside every build
# directory so that it is made once per machine: $SYNCBUS_RABBITMQ_ROOTS/<V>, default
# /var/lib/syncbus/rabbitmq-<V>.
rabbitmq_root_dir() {
  case "$1" in
    3.10) echo "" ;;
    4.0) echo "${SYNCBUS_RABBITMQ_ROOTS:-/var/lib/syncbus}/rabbitmq-4.0" ;;
  esac
}

# The Debian release and package version each root holds.
rabbitmq_root_suite() { case "$1" in 4.0) echo trixie ;; esac; }
rabbitmq_root_package_version() { case "$1" in 4.0) echo "4.0." ;; esac; }

# rabbitmq_root_ready V: 0 when V needs no root or its root is complete (the stamp the maker
# writes last exists).
rabbitmq_root_ready() {
  local root
  root="$(rabbitmq_root_dir "$1")"
  [[ -z "$root" || -f "$root/.syncbus-root" ]]
}

# rabbitmq_require V: dies with what to do when V cannot run here.
rabbitmq_require() {
  local root
  root="$(rabbitmq_root_dir "$1")"
  if [[ -z "$root" ]]; then
    [[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]] ||
      die "RabbitMQ $1 needs Debian's rabbitmq-server: run scripts/install-deps"
    return 0
  fi
  rabbitmq_root_ready "$1" ||
    die "RabbitMQ $1 runs from a Debian $(rabbitmq_root_suite "$1") root at $root, which is not" \
        "there yet: run scripts/install-deps (as root; it makes the root once with debootstrap" \
        "from the Debian archive, ~370 MB), or point SYNCBUS_RABBITMQ_ROOTS at a directory" \
        "holding rabbitmq-$1"
  [[ $EUID -eq 0 ]] ||
    die "RabbitMQ $1 runs under chroot in a private mount namespace, which needs root"
}

# rabbitmq_wrap V DIR...: sets RABBITMQ_WRAP to the command prefix that runs a program of version
# V: nothing for the host's own, else the chroot into V's root with each DIR visible at its own
# path. The environment passes through, and every step exec's the next, so a process started as
# `exec "${RABBITMQ_WRAP[@]}" /usr/lib/rabbitmq/bin/rabbitmq-server` keeps its process id.
rabbitmq_wrap() {
  local root
  root="$(rabbitmq_root_dir "$1")"
  shift
  RABBITMQ_WRAP=()
  [[ -n "$root" ]] || return 0
  # shellcheck disable=SC2034  # the caller's
  RABBITMQ_WRAP=(unshare --mount --propagation private --
                 "$SYNCBUS_ROOT/scripts/lib/rabbitmq-chroot" "$root" "$@" --)
}

# debian_mirror: the Debian archive this machine's apt uses for its own release (the first
# matching entry of its sources), else deb.debian.org; $SYNCBUS_DEBIAN_MIRROR overrides.
debian_mirror() {
  [[ -z "${SYNCBUS_DEBIAN_MIRROR:-}" ]] || { echo "$SYNCBUS_DEBIAN_MIRROR"; return 0; }
  local codename="" uri=""
  # shellcheck disable=SC1091  # the host's
  codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
  if [[ -n "$codename" ]]; then
    uri="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
           awk -v c="$codename" '$1 == "deb" && $3 == c { print $2; exit }' || true)"
    [[ -n "$uri" ]] ||
      uri="$(awk -v c="$codename" '
               /^[[:space:]]*$/ { u = "" }
               /^URIs:/ { u = $2 }
               /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c && u != "") { print u; exit } }
             ' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# rabbitmq_make_root V: makes V's root once (nothing to do when it is complete or V needs none):
# debootstrap --variant=minbase of the release, then rabbitmq-server installed into it with
# service starts forbidden (a node started by the package would take the host's 5672 and 4369).
# Built beside its final place and renamed when complete, under a lock, so an interrupted or
# concurrent run never leaves a half-made root in use. Needs root. Dies with what went wrong.
rabbitmq_make_root() {
  local version="$1" root suite mirror partial log installed
  root="$(rabbitmq_root_dir "$version")"
  [[ -n "$root" ]] || return 0
  rabbitmq_root_ready "$version" && return 0
  [[ $EUID -eq 0 ]] || die "making the RabbitMQ $version root at $root needs root"
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (scripts/install-deps installs it)"
  suite="$(rabbitmq_root_suite "$version")"
  mirror="$(debian_mirror)"
  mkdir -p "$(dirname "$root")"
  exec {lock_fd}>>"$(dirname "$root")/.rabbitmq-$version.lock"
  flock -w 1800 "$lock_fd" || die "another process has been making $root for 30 minutes"
  if rabbitmq_root_ready "$version"; then   # made meanwhile
    exec {lock_fd}>&-
    return 0
  fi
  partial="$root.partial"
  log="$(dirname "$root")/rabbitmq-$version.log"
  rm -rf "$partial"
  note "making the Debian $suite root for RabbitMQ $version at $root: debootstrap from $mirror" \
       "(~370 MB, a few minutes; log: $log)"
  local failed="could not make the Debian $suite root for RabbitMQ $version (log: $log). It comes"
  failed+=" from the Debian archive at $mirror: check that this machine reaches it (or set"
  failed+=" SYNCBUS_DEBIAN_MIRROR to a Debian mirror it reaches), then run scripts/install-deps again"
  if ! debootstrap --variant=minbase "$suite" "$partial" "$mirror" >"$log" 2>&1; then
    tail -n 15 "$log" >&2
    die "$failed"
  fi
  printf '#!/bin/sh\n# syncbus: never start services in this root.\nexit 101\n' >"$partial/usr/sbin/policy-rc.d"
  chmod 755 "$partial/usr/sbin/policy-rc.d"
  printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$partial/etc/hosts"
  # shellcheck disable=SC2016  # expanded by that sh
  if ! unshare --mount --propagation private -- sh -ec '
         mount -t proc proc "$1/proc"
         mount --rbind /dev "$1/dev"
         chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends rabbitmq-server
         chroot "$1" apt-get clean' sh "$partial" >>"$log" 2>&1; then
    tail -n 15 "$log" >&2
    die "$failed"
  fi
  # shellcheck disable=SC2016  # a dpkg-query format
  installed="$(chroot "$partial" dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || true)"
  [[ "$installed" == "$(rabbitmq_root_package_version "$version")"* ]] ||
    die "the Debian $suite root has rabbitmq-server '${installed:-none}', not RabbitMQ $version (log: $log)"
  printf 'rabbitmq-server %s from %s %s\n' "$installed" "$mirror" "$suite" >"$partial/.syncbus-root"
  mv "$partial" "$root"
  exec {lock_fd}>&-
  note "RabbitMQ $version ($installed) ready in $root"
}
