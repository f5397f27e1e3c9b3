/* cloth_fold.c - a 1.2 m cloth (40 x 40 vertices) dropped off-centre onto a
   sphere: it drapes, slides off and folds onto itself on the ground. Cloth
   self-collision (point-triangle and edge-edge constraints, 6 mm thick)
   keeps the layers apart. 3 s at 60 Hz (8 substeps), a frame every 15
   steps and a contact sheet; prints ms per step and the self-contact
   candidates.

   Build and run from the repository root (one line; without libstb-dev drop
   the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/cloth_fold.c -o cloth_fold -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./cloth_fold out      # out/cloth_fold_000.png ... and out/cloth_fold.png

   The scene itself is built in examples/common/scenes.h (scene "cloth_fold"),
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

int main(int argc, char **argv) { return scene_run_headless("cloth_fold", argc, argv, STEPS, FRAME_EVERY); }
