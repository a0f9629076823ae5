#!/usr/bin/env bash
# Test-only: a "site-built Slurm" repository for the lab, so that a Slurm upgrade can run for real here.
#
# This machine's mirror offers one Slurm version per Debian release (trixie: 24.11.5-4+deb13u1), so no newer
# package exists to upgrade to. This script makes one, as a site does with its own builds: it downloads the Debian
# packages of source slurm-wlm that the lab hosts have installed, re-versions them (the same binaries, version
# <version><suffix>, with every exact-version dependency between them rewritten), and writes a flat, unsigned apt
# repository on the volume every lab container mounts. common_os_package_repositories then points the hosts at it
# (file:/ URI, trusted, pinned), and slurm_upgrade.yml upgrades to the new version in SchedMD's order with real
# package upgrades and daemon restarts. It is a patch-level upgrade of one major (nothing to convert in the database).
#
#   site_slurm_repo.sh <builder host> <suffix> <host>...   prints the repository's version of the packages
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CONTAINERS_CONF="$here/containers.conf"
builder=$1; suffix=$2; shift 2
REPO=${CF_SITE_SLURM_REPO:-/srv/cf-lustre-shared/cf-site-slurm}

pkgs=$(for h in "$@"; do
  podman exec "$h" dpkg-query -W -f='${db:Status-Abbrev} ${Package} ${source:Package}\n' | awk '$1 == "ii" && $3 == "slurm-wlm" {print $2}'
done | sort -u | tr '\n' ' ')
[ -n "$pkgs" ] || { echo "no slurm-wlm packages installed on $*" >&2; exit 1; }

podman exec -i "$builder" bash -s -- "$REPO" "$suffix" $pkgs <<'EOS'
set -euo pipefail
repo=$1; suffix=$2; shift 2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
chown _apt "$work"; cd "$work"
apt-get download "$@" >/dev/null
rm -rf "$repo"; mkdir -p "$repo"
for deb in *.deb; do
  d=${deb%.deb}; dpkg-deb -R "$deb" "$d"
  old=$(sed -n 's/^Version: //p' "$d/DEBIAN/control")
  new="$old$suffix"
  # The package's own version, and every "(= <old>)" dependency on its siblings.
  sed -i -e "s/^Version: .*/Version: $new/" -e "s/(= $old)/(= $new)/g" "$d/DEBIAN/control"
  dpkg-deb -Zxz -b "$d" "$repo/" >/dev/null
  echo "$new"
done | sort -u
cd "$repo"
# A flat repository: Packages lists every .deb with the fields apt needs (Filename relative to the repository).
for deb in *.deb; do
  dpkg-deb -f "$deb"
  echo "Filename: ./$deb"
  echo "Size: $(stat -c %s "$deb")"
  echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"
  echo
done > Packages
EOS
