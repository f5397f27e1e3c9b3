#!/bin/sh
# tests/run.sh T BINARY... - runs the test binaries of one build (make test,
# make test-gpu), each with the filter T (may be empty), and ends with the
# sum of their closing lines, "N passed, N failed, N skipped" (.ci/run adds
# these up). pbd_cuda_tests holds the suite "cuda" only: with a filter that
# does not name it, it is not run (its runner counts "no match" as a failure).
# Every binary runs as PBDT_SHARDS processes side by side (default: the
# machine's cores, at most 4), process i running the tests whose place is
# i modulo PBDT_SHARDS (tests/main.c, PBDT_SHARD): most tests use one core,
# and CI's 15 minutes on 2 cores went half idle otherwise. Each process
# writes its own log; the logs are printed in order when all are done.
t=$1
shift
# (nproc without OMP_NUM_THREADS, which GNU nproc obeys: a run with a
# default team of one thread still has the machine's cores)
shards=${PBDT_SHARDS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 1)}
[ "$shards" -ge 1 ] 2>/dev/null || shards=1
[ "$shards" -le 4 ] || shards=4
passed=0 failed=0 skipped=0 status=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
i=0
for bin in "$@"; do
    i=$((i + 1))
    case "${bin##*/}:$t" in pbd_cuda_tests*:?*) echo "$t" | grep -q cuda || continue ;; esac
    s=0
    while [ $s -lt "$shards" ]; do
        { PBDT_SHARD=$s/$shards "$bin" $t; echo "exit $?"; } > "$dir/$i.$s" 2>&1 &
        s=$((s + 1))
    done
done
wait
i=0
for bin in "$@"; do
    i=$((i + 1))
    s=0
    while [ $s -lt "$shards" ]; do
        log="$dir/$i.$s"
        s=$((s + 1))
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
done
echo "all test binaries:"
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
