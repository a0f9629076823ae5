#!/usr/bin/env bash
# Installs Debian's chromium, the browser tests/report/test_report_render.py renders the validation report in,
# when /usr/bin/chromium is missing. Idempotent: does nothing when it is there. Uses sudo only when not root.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium present: /usr/bin/chromium"
  exit 0
fi
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "chromium is missing, and without root or sudo it cannot be installed: install Debian's chromium package" >&2
    exit 1
  fi
}
echo "installing chromium (Debian package)"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
test -x /usr/bin/chromium
echo "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
