#!/bin/sh
# tests/run.sh T BINARY... - runs the test binaries of one build (make test,
# make test-gpu), each with the filter T (may be empty), and ends with the
# sum of their closing lines, "N passed, N failed, N skipped" (.ci/run adds
# these up). pbd_cuda_tests holds the suite "cuda" only: with a filter that
# does not name it, it is not run (its runner counts "no match" as a failure).
# The binaries run side by side (the GPU companion's emulated tests beside
# the rest: a quarter of CI's time on 2 cores otherwise), each into its own
# log, printed in order when all are done.
t=$1
shift
passed=0 failed=0 skipped=0 status=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
i=0
for bin in "$@"; do
    i=$((i + 1))
    case "${bin##*/}:$t" in pbd_cuda_tests*:?*) echo "$t" | grep -q cuda || continue ;; esac
    { "$bin" $t; echo "exit $?"; } > "$dir/$i" 2>&1 &
done
wait
i=0
for bin in "$@"; do
    i=$((i + 1))
    log="$dir/$i"
    [ -f "$log" ] || continue
    grep -v '^exit [0-9]*$' "$log"
    [ "$(tail -n 1 "$log")" = "exit 0" ] || status=1
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)
    if [ -n "$line" ]; then
        passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
        failed=$((failed + $(echo "$line" | cut -d' ' -f3)))
        skipped=$((skipped + $(echo "$line" | cut -d' ' -f5)))
    else
        failed=$((failed + 1)) # it stopped before its closing line
    fi
done
echo "all test binaries:"
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
