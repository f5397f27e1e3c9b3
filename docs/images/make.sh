#!/bin/sh
# docs/images/make.sh - the README's pictures from the viewer, under Xvfb
# with Mesa's software GL: viewer_<scene>.png, a 320 x 180 picture of each
# scene at a frame that shows it at work, and showcase.gif, the showcase's
# first 2.5 s at 20 frames per second (ffmpeg, a palette of its own).
# (strain.png comes from strain.gp: gnuplot docs/images/strain.gp.)
# Run from the repository root after `make play` has built the viewer
# (Debian: xvfb xauth libgl1-mesa-dri ffmpeg):
#     sh docs/images/make.sh build/cc-simd1-omp1-san0-cxx0-O2/examples/viewer
set -eu
viewer=${1:-build/cc-simd1-omp1-san0-cxx0-O2/examples/viewer}
out=docs/images
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { LIBGL_ALWAYS_SOFTWARE=1 xvfb-run -a -s "-screen 0 1280x1024x24" "$viewer" --no-text "$@" > /dev/null; }
# scene and the frame to show
for shot in showcase:120 cloth_fold:150 tablecloth:80 flag_tear:110 dam_break:40 hair:60 multires_cloth:120 \
    sm_jelly:100 sm_plant:140; do
    name=${shot%%:*}
    run --scene "$name" --size 320x180 --frames "${shot##*:}" --screenshot "$out/viewer_$name.png"
done
# the upsampling scene while a hand pulls the coarse cape up (the PIU mesh folds with it)
run --scene upsample --size 320x180 --frames 60 --drag 88,130:60,80@5 --screenshot "$out/viewer_upsample.png"
mkdir -p "$tmp/frames"
run --scene showcase --size 400x225 --frames 150 --record "$tmp/frames"
ffmpeg -loglevel error -y -framerate 60 -i "$tmp/frames/frame_%04d.png" \
    -vf "fps=20,split[a][b];[a]palettegen=max_colors=96[p];[b][p]paletteuse=dither=bayer" "$out/showcase.gif"
ls -l "$out"
