#!/usr/bin/env bash
# Installs the host packages the lab and the tests need (podman with runc, debootstrap, rsync), when missing.
# Needs root for apt-get; without root it only says what is missing.
set -euo pipefail
need=()
for cmd in podman:podman runc:runc debootstrap:debootstrap rsync:rsync git:git; do
  command -v "${cmd%%:*}" >/dev/null 2>&1 || need+=("${cmd##*:}")
done
# netavark/aardvark give container name resolution on podman networks.
for pkg in netavark aardvark-dns containernetworking-plugins; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -eq 0 ]; then echo "host packages present"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing host packages: ${need[*]} (run as root, or install them)" >&2; exit 1
fi
echo "installing: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
