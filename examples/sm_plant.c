/* sm_plant.c - oriented particles (pbd_sm.h, survey 4.4; Mueller and
   Chentanez 2011) on a sparse structure: a plant whose stem and branches
   are chains one particle wide, so every shape-matching group (a particle
   and its 1-ring) is collinear - plain shape matching cannot find its
   rotation there, the particles' ellipsoids make it well defined. The
   plant is pinned at the root, swayed by a gust of wind, then hit by a
   ball that sweeps through it (the ball meets the particles' ellipsoids,
   elongated along the branches, not just their small spheres). A visual
   mesh (tubes around the branches and a leaf at each tip) follows the
   particles by linear blend skinning with the particles as bones.

   3 s at 60 Hz, a frame every 15 steps (12 frames) and a contact sheet.
   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files instead of PNG):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/sm_plant.c -o sm_plant -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./sm_plant out        # out/sm_plant_000.png ... out/sm_plant_011.png, out/sm_plant.png

   Exit status 0 when every step succeeded, everything stayed finite and
   every image was written. The scene itself is built in
   examples/common/scenes.h (scene "sm_plant"), which the interactive
   viewer (examples/viewer.c) shows too: read its builder for the set-up.
*/
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_SM_IMPLEMENTATION
#include "pbd_sm.h"
#define PBD_RENDER_IMPLEMENTATION
#include "common/render.h"
#define SCENES_IMPLEMENTATION
#include "common/scenes.h"

enum { STEPS = 180, FRAME_EVERY = 15 }; /* 3 s at 60 Hz, 12 frames (tests/soak/soak.c reads STEPS) */

int main(int argc, char **argv) { return scene_run_headless("sm_plant", argc, argv, STEPS, FRAME_EVERY); }
