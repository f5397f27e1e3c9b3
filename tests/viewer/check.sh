#!/bin/sh
# tests/viewer/check.sh VIEWER OUT [VIEWER_EMU] - make check-viewer: the native viewer
# (examples/viewer.c) as a person uses it, in a real window under Xvfb with
# Mesa's software OpenGL. Every scene is scripted (viewer.c's options) to
# grab a particle at frame 10, drag it across the window and hold it, and to
# save its last frame: the viewer fails a scene when nothing was grabbed,
# when the held particle is drawn 3 pixels or more from the cursor, or when
# the screenshot is blank or uniform. Screenshots: OUT/<scene>.png. Ends
# with "N passed, N failed, N skipped" (.ci/run adds these up); where Xvfb
# or a display cannot be had the scenes are skipped, saying why.
# VIEWER_EMU (the viewer built with PBD_CUDA and the GPU companion's CPU
# emulation): the G key's move of a scene to the (emulated) GPU and its
# state with it, at frame 20 of 40: the run must end on the GPU with the
# positions' bits of a run that stays on the CPU (the emulation gives the
# CPU's bits) - for scenes of pbd.h and of pbd_sm.h (whose state, a jelly's
# plastic deformation, a plant's spin, goes along in the snapshot).
# a job of the check below (run by xargs under its X server): one scene, or
# one emulated-GPU switch; its verdict goes to OUT/<job>.result
if [ "${1:-}" = --job ]; then
    shift
    kind=$1 name=$2 drag=${3:-}
    # LIBGL_ALWAYS_SOFTWARE: Mesa's llvmpipe whatever the machine has
    if [ "$kind" = scene ]; then
        log="$out_dir/$name.log"
        if LIBGL_ALWAYS_SOFTWARE=1 timeout 120 "$viewer_bin" --scene "$name" --size 640x360 --frames 100 \
            --drag "$drag" --screenshot "$out_dir/$name.png" > "$log" 2>&1; then
            echo "ok   viewer $name: $(grep 'drawn at' "$log")" > "$out_dir/$name.result"
        else
            { echo "FAIL viewer $name:"; sed 's/^/    /' "$log"; } > "$out_dir/$name.result"
        fi
    else
        run() { LIBGL_ALWAYS_SOFTWARE=1 timeout 120 "$emu_bin" --scene "$name" --size 320x180 --frames 40 "$@" 2>&1; }
        stay=$(run | grep 'positions hash')
        moved=$(run --switch 20 | grep 'positions hash')
        if echo "$moved" | grep -q 'ends on the GPU' && [ "${stay##* }" = "${moved##* }" ]; then
            echo "ok   viewer $name moved to the emulated GPU at frame 20: the same bits ($moved)"
        else
            echo "FAIL viewer $name moved to the emulated GPU: '$moved' against '$stay'"
        fi > "$out_dir/emu-$name.result"
    fi
    exit 0
fi
viewer=$1
out=$2
emu=${3:-}
mkdir -p "$out"
# tests/viewer/drags: a scene per line, where its first frames show an object
# (640 x 360 window), where to drag it, and from which frame (viewer.c's
# --drag; the tablecloth's after its pulled edge has stopped)
scenes=$(cat "$(dirname "$0")/drags")
count=$(echo "$scenes" | wc -l)
why=""
if [ ! -x "$viewer" ]; then
    if [ -f /usr/include/GLFW/glfw3.h ] && [ -f /usr/include/epoxy/gl.h ]; then
        echo "FAIL viewer: $viewer did not build (GLFW and libepoxy are installed)"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
    why="no GLFW / libepoxy to build the viewer with (Debian: libglfw3-dev libepoxy-dev)"
elif ! command -v xvfb-run >/dev/null 2>&1 || ! command -v Xvfb >/dev/null 2>&1; then
    why="xvfb-run / Xvfb missing (Debian: xvfb xauth)"
fi
if [ -n "$why" ]; then
    echo "check-viewer: skipped: $why"
    echo "0 passed, 0 failed, $count skipped"
    exit 0
fi
jobs=""
if [ -n "$emu" ] && [ -x "$emu" ]; then
    for name in showcase flag_tear hair upsample sm_jelly sm_plant multires_cloth; do
        jobs="$jobs
emu $name"
    done
fi
jobs="$jobs
$(echo "$scenes" | sed 's/^/scene /')"
rm -f "$out"/*.result
# One X server for the whole check (the viewers' windows share it), two
# viewers at a time (CI's 2 cores), the longest jobs (the emulated-GPU
# switches) first; the verdicts are printed in the jobs' order.
echo "$jobs" | grep . | viewer_bin=$viewer emu_bin=$emu out_dir=$out \
    xvfb-run -a -s "-screen 0 1280x1024x24" xargs -P 2 -L 1 sh "$0" --job
passed=0 failed=0
for job in $(echo "$jobs" | grep . | awk '{ print ($1 == "emu" ? "emu-" : "") $2 }'); do
    r="$out/$job.result"
    if [ -f "$r" ] && head -n 1 "$r" | grep -q '^ok '; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        [ -f "$r" ] || echo "FAIL viewer $job: no verdict (the X server or the job did not run)" > "$r"
    fi
    cat "$r"
done
echo "$passed passed, $failed failed, 0 skipped"
[ "$failed" -eq 0 ]
