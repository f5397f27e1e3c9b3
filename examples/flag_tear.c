/* flag_tear.c - a flag in gusty wind that tears. A 1.6 m x 1 m flag of
   48 x 30 vertices hangs from a pole (its left column pinned); wind drags
   it (an acceleration field pulling every particle towards the wind's
   velocity, with gusts that travel along the flag) and after 1.5 s a storm
   sets in. Edges stretched past 1.15 times their rest length split their
   vertices between steps (pbd_world_tear), the flag rips and the pieces
   blow away onto the ground. Writes 12 frames and a contact sheet.

   Build and run from the repository root (without libstb-dev drop the last
   two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/flag_tear.c -o flag_tear -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./flag_tear out    # out/flag_tear_000.png ... out/flag_tear_011.png, out/flag_tear.png

   The scene itself is built in examples/common/scenes.h (scene "flag_tear"),
   which the interactive viewer (examples/viewer.c) shows too: read its
   builder for the set-up.
*/
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_RENDER_IMPLEMENTATION
#include "common/render.h"
#define SCENES_IMPLEMENTATION
#include "common/scenes.h"

enum { STEPS = 180, FRAME_EVERY = 15 }; /* 3 s at 60 Hz, 12 frames (tests/soak/soak.c reads STEPS) */

int main(int argc, char **argv) { return scene_run_headless("flag_tear", argc, argv, STEPS, FRAME_EVERY); }
