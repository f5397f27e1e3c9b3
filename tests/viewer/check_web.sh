#!/bin/sh
# tests/viewer/check_web.sh DIR - make check-web: the viewer's web build
# (DIR: index.html, viewer.js, viewer.wasm from make web) as a person opens
# it: served on localhost, loaded in headless Chromium (WebGL 2 through
# SwiftShader), each scene below scripted through the address
# (index.html?scene=...&frames=...&drag=..., the options of
# examples/viewer.c): the page must load without a console error, the
# simulation must step and report its closing line through the console
# (ok: the dragged particle drawn under the cursor), and the page's
# screenshot (DIR/<scene>.png) must show the scene. Ends with "N passed,
# N failed, N skipped"; where Chromium, Node or the build cannot be had the
# scenes are skipped, saying why.
dir=$1
here=$(dirname "$0")
# the showcase (meshes), the dam break (points) and the upsampling scene
# (its PIU fitted in the browser), with their drags
scenes=$(grep -E '^(showcase|dam_break|upsample) ' "$here/drags")
count=$(echo "$scenes" | wc -l)
why=""
if [ ! -f "$dir/viewer.js" ]; then
    if command -v emcc >/dev/null 2>&1; then
        echo "FAIL web: $dir/viewer.js did not build (emcc is installed)"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
    why="no emscripten to build the page with (Debian: emscripten node-acorn)"
elif ! command -v node >/dev/null 2>&1; then
    why="node missing (Debian: nodejs)"
elif ! command -v chromium >/dev/null 2>&1; then
    why="chromium missing (Debian: chromium)"
elif ! command -v python3 >/dev/null 2>&1; then
    why="python3 missing to serve the page (Debian: python3)"
fi
if [ -n "$why" ]; then
    echo "check-web: skipped: $why"
    echo "0 passed, 0 failed, $count skipped"
    exit 0
fi
port=$((20000 + $$ % 20000))
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$dir" > "$dir/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
sleep 1
passed=0 failed=0
echo "$scenes" | {
    while read -r name drag; do
        log="$dir/$name.log"
        url="http://127.0.0.1:$port/index.html?scene=$name&size=640x360&frames=100&drag=$drag"
        if node "$here/web.js" "$url" "$dir/$name.png" 180 > "$log" 2>&1; then
            passed=$((passed + 1))
            echo "ok   web $name: $(grep 'frames of' "$log" | sed 's/^console: //')"
        else
            failed=$((failed + 1))
            echo "FAIL web $name ($url):"
            sed 's/^/    /' "$log"
        fi
    done
    echo "$passed passed, $failed failed, 0 skipped"
    [ "$failed" -eq 0 ]
}
