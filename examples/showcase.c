/* showcase.c - pbd's headless showcase. One world, side by side on a
   ground plane: a 2 m cloth (60x60 vertices, isometric bending) draping
   over a sphere collider, a soft tetrahedral 0.5 m box (5x5x5 nodes, 320
   tets) falling on the ground, and a balloon (an icosphere of 642
   vertices) inflated by an overpressure of 1.3. It runs 3 s of simulated
   time at 60 Hz, writes a frame every 15 steps (12 frames) and a contact
   sheet of all of them, and prints the simulation time per step for every
   frame plus a summary. Needs no window and no GPU: the images come from
   the small software rasterizer in examples/common/render.h.

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files instead of PNG; add
   -march=native for the wider SIMD path):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/showcase.c -o showcase -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./showcase out        # out/showcase_000.png ... out/showcase_011.png, out/showcase.png

   or simply `make demo`. The output folder (argument 1, default "out") is
   created when missing; its parent must exist. Exit status 0 when every
   step succeeded, the positions stayed finite and every image was written.

   The scene itself is built in examples/common/scenes.h (scene "showcase"),
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

int main(int argc, char **argv) { return scene_run_headless("showcase", argc, argv, STEPS, FRAME_EVERY); }
