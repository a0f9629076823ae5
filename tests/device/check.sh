#!/usr/bin/env bash
# ClusterForge device check: READ-ONLY recordings and module runs on a lent GPU machine (the `device` tool's
# `run`, from the repository root). Nothing here changes the GPU: every nvidia-smi and dcgmi call, ours and the
# modules', goes through tests/device/guard.py, which refuses any setter (exit 99) and logs every call.
#
#   bash tests/device/check.sh            # writes $OUT/device-check.tgz and $OUT/check.log
#
# Needs: python3 with jinja2 and PyYAML (the device image has them), and ansible-core's and resolvelib's wheels in
# .devkit/whl (carried; see tests/device/README.md). Takes about a minute without DCGM.
set -u
ROOT=$(pwd)
OUT=${OUT:-/tmp/cf-device-out}
REC=/tmp/cf-device-rec
GUARD=/tmp/cf-guard
mkdir -p "$OUT" "$REC" "$GUARD"
rm -f /tmp/cf-guard.log
exec > >(tee "$OUT/check.log") 2>&1

REAL_SMI=$(command -v nvidia-smi || true)
REAL_DCGMI=$(command -v dcgmi || true)
echo "real nvidia-smi: ${REAL_SMI:-none}; real dcgmi: ${REAL_DCGMI:-none}"
[ -n "$REAL_SMI" ] || { echo "no nvidia-smi on this machine"; exit 1; }
for pair in "nvidia-smi:$REAL_SMI" "dcgmi:$REAL_DCGMI"; do
    tool=${pair%%:*}; real=${pair#*:}
    [ -n "$real" ] || continue
    printf '#!/bin/sh\nexec python3 %s/tests/device/guard.py %s %s "$@"\n' "$ROOT" "$tool" "$real" > "$GUARD/$tool"
    chmod +x "$GUARD/$tool"
done
export PATH="$GUARD:$PATH"
[ "$(command -v nvidia-smi)" = "$GUARD/nvidia-smi" ] || { echo "guard not first on PATH"; exit 1; }
# The guard must refuse a setter before anything else runs.
if nvidia-smi -i 0 -pl 700 >/dev/null 2>&1; then echo "GUARD FAILED: a setter ran"; exit 1; fi

rec() {  # rec NAME CMD...: stdout, stderr and rc of one read-only command
    local name=$1; shift
    timeout 300 "$@" > "$REC/$name.out" 2> "$REC/$name.err"
    echo $? > "$REC/$name.rc"
    echo "rec $name: rc $(cat "$REC/$name.rc"), $(wc -c < "$REC/$name.out") bytes: $*"
}

# --- the machine ---
{ uname -a; cat /etc/os-release 2>/dev/null; nproc; cat /proc/driver/nvidia/version 2>/dev/null
  grep -E '^nvidia' /proc/modules 2>/dev/null; ls -l /dev/nvidia* 2>/dev/null
  ls /sys/bus/pci/devices 2>/dev/null | head -50; python3 --version; } > "$REC/machine.txt" 2>&1

# --- nvidia-smi's own outputs, as our modules and scripts ask for them ---
STATE_FIELDS=index,uuid,pci.bus_id,name,persistence_mode,power.limit,power.default_limit,power.min_limit,power.max_limit,enforced.power.limit,clocks.max.sm,clocks.max.graphics,clocks.max.memory,clocks.applications.graphics,clocks.applications.memory,clocks.default_applications.graphics,clocks.default_applications.memory
HC_FIELDS=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.pending,temperature.gpu
HC_EXTRA=index,pcie.link.width.current,pcie.link.width.max,mig.mode.current,clocks_event_reasons.hw_slowdown,clocks_event_reasons.hw_thermal_slowdown,clocks_event_reasons.sw_thermal_slowdown
HC_EXTRA_OLD=index,pcie.link.width.current,pcie.link.width.max,mig.mode.current,clocks_throttle_reasons.hw_slowdown,clocks_throttle_reasons.hw_thermal_slowdown,clocks_throttle_reasons.sw_thermal_slowdown
rec version nvidia-smi --version
rec table nvidia-smi
rec list nvidia-smi -L
rec q_x nvidia-smi -q -x
rec q nvidia-smi -q
rec q_supported_clocks nvidia-smi -q -d SUPPORTED_CLOCKS
rec q_x_supported_clocks nvidia-smi -q -x -d SUPPORTED_CLOCKS
rec topo nvidia-smi topo -m
rec nvlink_s nvidia-smi nvlink -s
rec nvlink_e nvidia-smi nvlink -e
rec help_query_gpu nvidia-smi --help-query-gpu
rec state_query nvidia-smi --query-gpu=$STATE_FIELDS --format=csv,noheader,nounits
rec state_query_header nvidia-smi --query-gpu=$STATE_FIELDS --format=csv
rec hc_query nvidia-smi --query-gpu=$HC_FIELDS --format=csv,noheader,nounits
rec hc_extra nvidia-smi --query-gpu=$HC_EXTRA --format=csv,noheader,nounits
rec hc_extra_old nvidia-smi --query-gpu=$HC_EXTRA_OLD --format=csv,noheader,nounits
rec driver_version nvidia-smi --query-gpu=driver_version --format=csv,noheader
rec uuid nvidia-smi --query-gpu=uuid --format=csv,noheader
rec compute_apps nvidia-smi --query-compute-apps=pid --format=csv,noheader
rec compute_apps_full nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid,used_memory --format=csv
if [ -n "$REAL_DCGMI" ]; then
    rec dcgmi_version dcgmi -v
    rec dcgmi_discovery dcgmi discovery -l
    rec dcgmi_health dcgmi health -c -j
fi

# --- the modules, through ansible-playbook (check mode where they could change anything) ---
SITE=/tmp/cf-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .devkit/whl/*.whl
COLL=/tmp/cf-collections/ansible_collections/clusterforge/gpu
mkdir -p "$COLL" /tmp/cf-scratch
cp -r plugins meta galaxy.yml "$COLL/"
CF_DEVICE_REC=$REC PYTHONPATH=$SITE ANSIBLE_COLLECTIONS_PATH=/tmp/cf-collections ANSIBLE_LOCALHOST_WARNING=false \
    ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_PYTHON_INTERPRETER=$(command -v python3) \
    timeout 900 python3 "$SITE/bin/ansible-playbook" -i localhost, tests/device/modules.yml -v > "$REC/modules_play.log" 2>&1
echo "modules playbook: rc $?"
tail -25 "$REC/modules_play.log"

# --- the Slurm health check, dry run (no scontrol here: it reports its checks, acts on nothing, exits 2) ---
NGPU=$(grep -c '^GPU ' "$REC/list.out"); NGPU=${NGPU:-0}
cp roles/slurm_compute/files/slurm_healthcheck.py /tmp/cf-healthcheck
rm -rf /tmp/clusterforge_health && cp -r roles/slurm_compute/files/clusterforge_health /tmp/  # its package, beside it
for m in slurm infiniband nvidia_smi healthcheck dcgm; do cp plugins/module_utils/$m.py /tmp/clusterforge_$m.py; done  # the role installs them beside it
cat > /tmp/cf-healthcheck.json <<JSON
{"node_name": "device01", "gpu_count": $NGPU, "dcgm": "auto", "ib": false, "textfile_dir": "",
 "state_dir": "/tmp/cf-hc-state", "syslog": false, "breaker_jitter_seconds": 0, "breaker_settle_seconds": 0,
 "nvidia_smi_path": "$GUARD/nvidia-smi"}
JSON
rec healthcheck python3 /tmp/cf-healthcheck --config /tmp/cf-healthcheck.json --dry-run --timing
cp /tmp/cf-healthcheck.json "$REC/healthcheck_config.json"
cp -r /tmp/cf-hc-state "$REC/" 2>/dev/null

cp /tmp/cf-guard.log "$REC/guard.log"
echo "guard: $(grep -c '^RUN' /tmp/cf-guard.log) calls run, $(grep -c '^REFUSED' /tmp/cf-guard.log) refused:"
grep '^REFUSED' /tmp/cf-guard.log
tar -C "$(dirname "$REC")" -czf "$OUT/device-check.tgz" "$(basename "$REC")"
ls -la "$OUT"
