#!/bin/sh
# bench/web.sh [SCENE] [STEPS] [RUNS] - make bench-web: the viewer's web
# build in headless Chromium, WASM SIMD128 (viewer.js) against the scalar
# path (viewer-scalar.js, PBD_NO_SIMD) in the same sitting, runs
# alternating, the viewer's closing line (mean ms per step of the
# simulation, one thread: no OpenMP in the browser) through
# tests/viewer/web.js. Prints one JSON line per run and one per build
# (median), then the ratio, like the other benches (bench/README.md).
# Default: the showcase, 150 steps, 3 runs of each build. Needs what make
# check-web needs (emscripten, node, chromium, python3); says why and exits
# 0 where one is missing.
scene=${1:-showcase}
steps=${2:-150}
runs=${3:-3}
dir=out/web
here=$(dirname "$0")
for tool in node chromium python3; do
    if ! command -v $tool >/dev/null 2>&1; then
        echo "{\"bench\":\"web\",\"skipped\":\"$tool missing\"}"
        exit 0
    fi
done
if [ ! -f $dir/viewer.js ] || [ ! -f $dir/viewer-scalar.js ] || [ ! -f $dir/index.html ]; then
    echo "{\"bench\":\"web\",\"skipped\":\"the web builds are missing (make out/web/viewer.js out/web/viewer-scalar.js)\"}"
    exit 0
fi
port=$((20000 + ($$ + 7) % 20000))
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$dir" > "$dir/bench-server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
sleep 1
tmp=$(mktemp)
for r in $(seq 1 "$runs"); do
    for build in simd scalar; do
        url="http://127.0.0.1:$port/index.html?scene=$scene&size=640x360&frames=$steps&build=$build"
        ms=$(node "$here/../tests/viewer/web.js" "$url" "$dir/bench-$build.png" 300 2>&1 |
            sed -n 's/.* steps, sim \([0-9.]*\) ms\/step (mean).*/\1/p' | tail -n 1)
        [ -n "$ms" ] || ms=null
        path=$([ $build = simd ] && echo wasm-simd128 || echo scalar)
        echo "{\"bench\":\"web\",\"scene\":\"$scene\",\"path\":\"$path\",\"threads\":1,\"steps\":$steps,\"run\":$r,\"ms_per_step\":$ms}"
        echo "$build $ms" >> "$tmp"
    done
done
median() { grep "^$1 " "$tmp" | cut -d' ' -f2 | grep -v null | sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "null"}'; }
simd=$(median simd)
scalar=$(median scalar)
rm -f "$tmp"
echo "{\"bench\":\"web\",\"scene\":\"$scene\",\"path\":\"wasm-simd128\",\"threads\":1,\"median_ms_per_step\":$simd,\"runs\":$runs}"
echo "{\"bench\":\"web\",\"scene\":\"$scene\",\"path\":\"scalar\",\"threads\":1,\"median_ms_per_step\":$scalar,\"runs\":$runs}"
if [ "$simd" != null ] && [ "$scalar" != null ]; then
    echo "{\"bench\":\"web\",\"scene\":\"$scene\",\"simd_speedup\":$(awk "BEGIN {printf \"%.2f\", $scalar / $simd}")}"
fi
