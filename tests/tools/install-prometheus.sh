#!/usr/bin/env bash
# Installs Debian's Prometheus, Alertmanager and node-exporter on the test machine, when missing, for the monitoring
# role's unit tests (promtool and amtool check the rendered rules and configuration; a loopback stack of the three
# daemons fires the alerts). Idempotent: does nothing when they are there. No daemon is started: a policy-rc.d that
# refuses service starts is in place during the install (on a host with systemd the packages would start them).
# Uses sudo only when not root.
set -euo pipefail
need=()
for pair in promtool:prometheus amtool:prometheus-alertmanager prometheus-node-exporter:prometheus-node-exporter; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if [ ${#need[@]} -eq 0 ]; then echo "prometheus tools present"; exit 0; fi
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "missing ${need[*]}, and without root or sudo they cannot be installed: the monitoring tests that need them skip" >&2
    exit 0
  fi
}
echo "installing: ${need[*]} (Debian packages; no daemon is started)"
policy=/usr/sbin/policy-rc.d
added=0
if [ ! -e "$policy" ]; then
  as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 0755 $policy"
  added=1
fi
trap '[ "$added" = 1 ] && as_root rm -f "$policy"' EXIT
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "installed: $(promtool --version 2>&1 | head -1)"
