/* multires_cloth.c - a stiff tablecloth of pbd_sm.h's multi-resolution
   shape-matching cloth (Bender, Weber and Diziol 2013) drapes over a
   sphere and the ground. A 1.6 m square of 70 x 70 vertices (9 522
   triangles) falls from 0.9 m; the world's colliders and friction handle
   the contacts; one V-cycle per 1/240 s substep. Writes 12 frames and a
   contact sheet, and prints the cloth's strain and the time per step.

   Switches (any order): levels=N (1..8, default 4), wrinkles=0|1 (the
   coarse levels' wrinkle conservation, default 1), scheme=0|1 (two-pass or
   independent sets, default 1), and the output folder (default "out"); each
   frame's line gives the cloth's strain. Compare
       ./multires_cloth out wrinkles=1   and   ./multires_cloth out wrinkles=0
   to see the coarse levels smooth the folds away without conservation
   (out/multires_cloth_w1.png and out/multires_cloth_w0.png).

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -fno-math-errno -I. examples/multires_cloth.c -o multires_cloth -lm -DPBD_HAVE_STB -I/usr/include/stb

   The scene itself is built in examples/common/scenes.h (scene
   "multires_cloth", its switches the scene's options), which the
   interactive viewer (examples/viewer.c) shows too.
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

int main(int argc, char **argv) { return scene_run_headless("multires_cloth", argc, argv, STEPS, FRAME_EVERY); }
