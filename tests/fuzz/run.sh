#!/bin/sh
# tests/fuzz/run.sh SECONDS JOBS HARNESS... - runs each libFuzzer harness of
# $FUZZ_BUILD for SECONDS, JOBS at once (each harness is one thread, so one
# per core), from its seed corpus tests/fuzz/corpus/<name> plus what earlier
# runs found in $FUZZ_BUILD/corpus/<name>. Prints a line per harness, then
# "N passed, N failed, 0 skipped" like the test runner; exits 1 when a
# harness crashed, leaked or broke a contract (its log is shown).
secs=$1; jobs=$2; shift 2
b=${FUZZ_BUILD:-build/fuzz}

one() {  # runs harness $1; its result line goes to $b/$1.result
    h=$1; t0=$(date +%s)
    mkdir -p "$b/corpus/$h"
    if ASAN_OPTIONS=detect_leaks=1 "./$b/fuzz_$h" $FUZZ_RUN_FLAGS -max_total_time="$secs" \
         -artifact_prefix="$b/crash-$h-" "$b/corpus/$h" "tests/fuzz/corpus/$h" > "$b/$h.log" 2>&1; then
        n=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$b/$h.log" | cut -d' ' -f2)
        echo "ok   fuzz_$h ($(( $(date +%s) - t0 ))s, $n inputs)" > "$b/$h.result"
    else
        echo "FAIL fuzz_$h: see $b/$h.log" > "$b/$h.result"
    fi
}

running=0
for h in "$@"; do
    rm -f "$b/$h.result"
    one "$h" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then wait; running=0; fi
done
wait

pass=0; fail=0
for h in "$@"; do
    cat "$b/$h.result"
    if grep -q '^ok' "$b/$h.result"; then pass=$((pass + 1)); else
        fail=$((fail + 1))
        grep -E -A12 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz check failed' "$b/$h.log" | head -30
    fi
done
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
