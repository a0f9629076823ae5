#!/usr/bin/env bash
# ClusterForge lab: a cluster of systemd containers on this machine (test-only).
#   lab.sh image     build the Debian systemd image of CF_LAB_SUITE once (cached; rebuilt only when missing)
#   lab.sh up        create the lab network and the containers of inventories/lab (idempotent)
#   lab.sh down      remove the lab containers and network
#   lab.sh status    list the lab containers
# Every container has eth0 on the management network and eth1 on the fabric network (names pinned: podman
# does not keep the order of --network options).
# Hosts are read from LAB_HOSTS (default: the hosts of inventories/lab).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export CONTAINERS_CONF="$here/containers.conf"
# Debian 13 (trixie, Slurm 24.11) is the lab's platform; CF_LAB_SUITE=bookworm builds Debian 12 (Slurm 22.05), the
# second platform of the Slurm molecule scenarios.
SUITE=${CF_LAB_SUITE:-trixie}
IMAGE=${CF_LAB_IMAGE:-localhost/clusterforge-lab:$SUITE}
NETWORK=${CF_LAB_NETWORK:-cflab}
FABRIC_NETWORK=${CF_LAB_FABRIC_NETWORK:-cflab-fabric}
INVENTORY=${CF_LAB_INVENTORY:-$root/inventories/lab}
# A second inventory source on top (the end-to-end test adds a GPU node with one, as an administrator would).
EXTRA_INVENTORY=${CF_LAB_EXTRA_INVENTORY:-}
CACHE=${CF_LAB_CACHE:-$here/cache}
# The scale lab (tests/bench/scale.py): hosts whose names match CF_LAB_NODE_IMAGE_HOSTS (an extended regular
# expression) are created from CF_LAB_NODE_IMAGE, a committed image of one converged GPU node, instead of IMAGE.
NODE_IMAGE=${CF_LAB_NODE_IMAGE:-}
NODE_IMAGE_HOSTS=${CF_LAB_NODE_IMAGE_HOSTS:-}
MIRROR=${CF_LAB_MIRROR:-http://deb.debian.org/debian}

# "host mgmt_ip fabric_ip" lines, and the two networks, read from the lab inventory.
lab_plan() {
  "$root/.venv/bin/ansible-inventory" -i "$INVENTORY" ${EXTRA_INVENTORY:+-i "$EXTRA_INVENTORY"} --list 2>/dev/null | "$root/.venv/bin/python" -c '
import json, sys
inv = json.load(sys.stdin)
hv = inv.get("_meta", {}).get("hostvars", {})
allv = hv[next(iter(hv))] if hv else {}
print("NET", allv.get("cluster_mgmt_network_cidr", ""), allv.get("cluster_fabric_network_cidr", ""))
only = set(sys.argv[1].split()) if len(sys.argv) > 1 and sys.argv[1] else None
for h in sorted(hv):
    if only is None or h in only:
        print("HOST", h, hv[h].get("cluster_mgmt_ip", ""), hv[h].get("cluster_fabric_ip", ""))
' "${LAB_HOSTS:-}"
}

log() { printf '[lab %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

image() {
  if podman image exists "$IMAGE"; then log "image $IMAGE present (cached)"; return 0; fi
  local dir="$CACHE/rootfs"
  rm -rf "$dir"; mkdir -p "$dir"
  log "debootstrap $SUITE into $dir (about a minute)"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,python3,python3-apt,iproute2,sudo,procps,ca-certificates,gnupg,kmod,iputils-ping,less,e2fsprogs \
    "$SUITE" "$dir" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || { tail -20 "$CACHE/debootstrap.log"; exit 1; }
  # e2fsprogs is in every server install, but no longer Priority: required in Debian 13, so minbase leaves it out.
  # A container image, not a machine: no machine-id baked in, no getty, apt keeps lists small.
  : >"$dir/etc/machine-id"
  rm -f "$dir/var/lib/dbus/machine-id"
  cat >"$dir/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
SRC
  for unit in getty.target console-getty.service systemd-logind.service apt-daily.timer apt-daily-upgrade.timer \
              systemd-timesyncd.service e2scrub_reap.service; do
    ln -sf /dev/null "$dir/etc/systemd/system/$unit"
  done
  rm -rf "$dir/var/cache/apt/archives/"*.deb "$dir/var/lib/apt/lists/"*
  # No package lists are shipped: date the empty lists directory in the past so that apt's cache_valid_time
  # sees a stale index and the first converge refreshes it, as on a freshly installed server.
  touch -d '2000-01-01' "$dir/var/lib/apt/lists"
  rm -f "$dir/var/lib/apt/periodic/update-success-stamp"
  log "importing $IMAGE"
  tar -C "$dir" -c . | podman import -q --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' - "$IMAGE" >/dev/null
  rm -rf "$dir"
  log "image $IMAGE built"
}

# Each systemd container holds a few inotify instances (systemd, journald and services watching their files):
# with the kernel's default of 128 per user the scale lab's 33rd container cannot start systemd (exit 255, no log).
# Raised for the planned number of hosts, never lowered; needs root (the lab runs podman as root).
host_limits() {
  local hosts=$1 key want have
  for key in max_user_instances:$((hosts * 16 + 256)) max_user_watches:$((hosts * 16384 + 131072)); do
    want=${key#*:}; key=${key%%:*}
    have=$(cat "/proc/sys/fs/inotify/$key" 2>/dev/null || echo 0)
    if [ "$have" -lt "$want" ]; then
      if sysctl -qw "fs.inotify.$key=$want" 2>/dev/null; then
        log "raised fs.inotify.$key from $have to $want for $hosts containers"
      else
        log "WARNING: fs.inotify.$key is $have, under the $want that $hosts systemd containers need (run as root)"
      fi
    fi
  done
}

up() {
  image
  local plan hosts=() net_mgmt net_fabric
  plan=$(lab_plan)
  host_limits "$(grep -c '^HOST' <<<"$plan")"
  read -r _ net_mgmt net_fabric <<<"$(grep '^NET' <<<"$plan")"
  podman network exists "$NETWORK" || { log "creating network $NETWORK ($net_mgmt)"; podman network create --subnet "$net_mgmt" "$NETWORK" >/dev/null; }
  podman network exists "$FABRIC_NETWORK" || { log "creating network $FABRIC_NETWORK ($net_fabric)"; podman network create --subnet "$net_fabric" "$FABRIC_NETWORK" >/dev/null; }
  # podman's record can outlive the container's processes (a host restart without a clean stop): it then says
  # "running" while every exec fails. Such a container is removed and recreated, never reused.
  local c
  for c in $(podman ps -a --filter label=clusterforge.lab=1 --format '{{.Names}}'); do
    [ "$(podman inspect -f '{{.State.Running}}' "$c")" = true ] || { log "starting $c"; podman start "$c" >/dev/null 2>&1 || true; }
    if ! podman exec "$c" true >/dev/null 2>&1; then
      log "$c exists but does not answer (stale after a host restart?): recreating it"
      podman rm -f -t 0 "$c" >/dev/null 2>&1 || podman rm -f --depend "$c" >/dev/null
    fi
  done
  # A lab created from nothing starts with an empty shared Lustre volume (it outlives containers, and the emulated
  # MGS in it would remember the targets of the earlier lab).
  if [ -z "$(podman ps -a --filter label=clusterforge.lab=1 --format '{{.Names}}')" ] && podman volume exists cf-lustre-shared; then
    log "emptying the shared Lustre volume of an earlier lab"; podman volume rm -f cf-lustre-shared >/dev/null
  fi
  while read -r _ h ip fip; do
    hosts+=("$h")
    podman container exists "$h" && continue
    local img=$IMAGE
    if [ -n "$NODE_IMAGE" ] && [ -n "$NODE_IMAGE_HOSTS" ] && grep -Eqx "$NODE_IMAGE_HOSTS" <<<"$h"; then img=$NODE_IMAGE; fi
    log "creating container $h ($ip, fabric $fip) from $img"
    podman run -d --name "$h" --hostname "$h" \
      --network "$NETWORK:ip=$ip,interface_name=eth0" --network "$FABRIC_NETWORK:ip=$fip,interface_name=eth1" \
      --systemd=always --restart=always \
      --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_NICE \
      -v cf-lustre-shared:/srv/cf-lustre-shared \
      --label clusterforge.lab=1 "$img" /sbin/init >/dev/null
  done < <(grep '^HOST' <<<"$plan")
  for h in "${hosts[@]}"; do
    local i
    for i in $(seq 1 60); do
      state=$(podman exec "$h" systemctl is-system-running 2>/dev/null || true)
      case "$state" in running|degraded) break ;; esac
      sleep 1
    done
    log "$h: systemd $state"
  done
}

down() {
  for h in $(podman ps -a --filter label=clusterforge.lab=1 --format '{{.Names}}'); do
    log "removing $h"; podman rm -f -t 2 "$h" >/dev/null
  done
  # The emulated Lustre file system's shared data (test-only; see tests/lab/emulators_lustre.yml).
  if podman volume exists cf-lustre-shared; then podman volume rm -f cf-lustre-shared >/dev/null; log "removed volume cf-lustre-shared"; fi
  for n in "$NETWORK" "$FABRIC_NETWORK"; do
    if podman network exists "$n"; then podman network rm "$n" >/dev/null; log "removed network $n"; fi
  done
}

status() { podman ps -a --filter label=clusterforge.lab=1 --format '{{.Names}}\t{{.Status}}'; }

# One lab operation at a time on this machine: two runs (a developer's and a test's) must not create and remove
# the same containers under each other. podman leaves daemons behind (conmon, aardvark-dns) that must not inherit
# the lock, so every podman call runs with the lock's descriptor closed.
podman() { command podman "$@" 9>&-; }
exec 9>"${CF_LAB_LOCK:-/tmp/clusterforge-lab.lock}"
if ! flock -w 900 9; then echo "lab.sh: another lab operation holds ${CF_LAB_LOCK:-/tmp/clusterforge-lab.lock}" >&2; exit 1; fi

case "${1:-}" in
  image) image ;;
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 image|up|down|status" >&2; exit 2 ;;
esac
