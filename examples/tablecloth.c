/* tablecloth.c - a tablecloth (1.4 x 1.1 m, 36 x 28 vertices) lying on a
   table whose top is a box collider with rounded edges, pulled off by one
   edge (kinematic, 1 m/s sideways and down, stopping 1.6 m past the
   table): it slides over the table with friction, round its edges, and
   falls to the floor, self-collision (8 mm) keeping its layers apart where
   it folds. 3 s at 60 Hz (12 substeps), a frame every 15
   steps and a contact sheet.

   Build and run from the repository root (one line; without libstb-dev drop
   the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/tablecloth.c -o tablecloth -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./tablecloth out      # out/tablecloth_000.png ... and out/tablecloth.png

   The scene itself is built in examples/common/scenes.h (scene "tablecloth"),
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

int main(int argc, char **argv) { return scene_run_headless("tablecloth", argc, argv, STEPS, FRAME_EVERY); }
