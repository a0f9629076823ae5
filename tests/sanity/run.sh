#!/usr/bin/env bash
# ansible-test sanity for clusterforge.gpu, runnable on a machine that cannot reach ansible-test's download host.
# ansible-test must run inside ansible_collections/<namespace>/<name> (it reads the real path, so a symlink does
# not do), so the tracked files are copied to .cache/sanity/ansible_collections/clusterforge/gpu first.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/.venv/bin"
pyver=$("$bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pipver=$("$bin/python" - <<'PY'
import re, ansible_test, os
src = open(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py")).read()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
cache="$HOME/.ansible/test/cache"
mkdir -p "$cache"
cp "$root/tests/sanity/get_pip_standin.py" "$cache/get_pip_${pipver//./_}.py"

dest="$root/.cache/sanity/ansible_collections/clusterforge/gpu"
rm -rf "$dest"
mkdir -p "$dest"
cd "$root"
# Tracked and not-ignored files only: the venv, lab caches and test output never reach the sanity tree.
git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- ./ "$dest/"
# ansible-test lists files with git from the nearest repository; the copy sits inside this checkout's ignored
# .cache, so give it a repository (index only) of its own.
git -C "$dest" init -q
git -C "$dest" add -A
cd "$dest"
exec "$bin/ansible-test" sanity --local --python "$pyver" --color no "$@"
