#!/usr/bin/env bash
# Runs make targets side by side and fails when any of them failed, after all of them ended, naming which.
# Each line of a target's output is prefixed with the target's name ("test-lab: ..."), so the interleaved log still
# reads per target. `make test` runs the molecule scenarios and the lab's end-to-end tests this way: both spend
# about half their time waiting on containers (package installs, systemd, Slurm, retries), so on a 2-core machine
# they take little more side by side than the longer of the two alone. SIDE_BY_SIDE=0 runs them one after another.
set -uo pipefail
make_cmd=${MAKE:-make}
if [ "${SIDE_BY_SIDE:-1}" = 0 ]; then
  for target in "$@"; do "$make_cmd" --no-print-directory "$target" || { echo "side_by_side: $target failed" >&2; exit 1; }; done
  exit 0
fi
# Each target's output is also kept in .cache/side_by_side/<target>.log: when a target fails, its lines that name a
# failure are printed again at the end, where a log that keeps only its tail (CI's) still shows them.
logdir=.cache/side_by_side
mkdir -p "$logdir"
pids=()
for target in "$@"; do
  ( "$make_cmd" --no-print-directory "$target" 2>&1 | sed -u "s/^/$target: /" | tee "$logdir/$target.log" ) &
  pids+=("$!")
done
failed=()
i=0
for target in "$@"; do
  wait "${pids[$i]}" || failed+=("$target")
  i=$((i + 1))
done
if [ ${#failed[@]} -gt 0 ]; then
  for target in "${failed[@]}"; do
    echo "side_by_side: what failed in $target (its failed targets, then the lines of its log that name a failure: pytest, make, ansible-test, yamllint, ansible-lint, molecule; the last 40):" >&2
    grep -a -E "^$target: $target: \S+ failed$" "$logdir/$target.log" >&2
    grep -a -E "(FAILED|ERROR) tests/|[0-9]+ (failed|error)(,| in )|\*\*\* \[|ERROR: |[0-9]+:[0-9]+ +error|Failed: [0-9]+ failure|failed=[1-9]|unreachable=[1-9]" \
      "$logdir/$target.log" | grep -v -E "^$target: $target: " | tail -40 >&2
  done
  echo "side_by_side: failed: ${failed[*]}" >&2
  exit 1
fi
echo "side_by_side: passed: $*"
