/* dam_break.c - a dam break with a floating soft box (position based
   fluids, Macklin and Mueller 2013; survey 3.4.6). A block of water
   (0.5 x 0.6 x 0.4 m, spacing 4 cm: 1800 particles) stands at the left end
   of a 1.6 x 0.4 m tank whose floor and walls are plane colliders; a soft
   tetrahedral box (0.2 m, 500 kg/m^3, particle collision on) waits at the
   right end. The dam breaks, the wave runs down the tank, hits the box
   and floats it. 4 s at 60 Hz, a frame every 20 steps (12 frames), a
   contact sheet of them, and the simulation time per step.

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files instead of PNG):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/dam_break.c -o dam_break -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./dam_break out       # out/dam_break_000.png ... out/dam_break.png

   Exit status 0 when every step succeeded, every particle stayed inside
   the tank, the box floats at the end and the images were written.

   The scene itself is built in examples/common/scenes.h (scene "dam_break"),
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

enum { STEPS = 240, FRAME_EVERY = 20 }; /* 12 frames (tests/soak/soak.c reads STEPS) */

int main(int argc, char **argv) { return scene_run_headless("dam_break", argc, argv, STEPS, FRAME_EVERY); }
