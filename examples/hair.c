/* hair.c - a head of hair shaken: 4000 follow-the-leader strands of 16
   particles (dynamic FTL, Mueller et al. 2012) rooted on a head that
   shakes side to side and nods, with the head as a sphere collider. Roots
   follow the head's pose (pbd_strands_set_transform); the first segment of
   every strand is clamped along the scalp normal. Writes 12 frames and a
   contact sheet; strands are drawn as thin camera-facing ribbons.

   Build and run from the repository root (without libstb-dev drop the last
   two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/hair.c -o hair -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./hair out        # out/hair_000.png ... out/hair_011.png, out/hair.png

   The scene itself is built in examples/common/scenes.h (scene "hair"),
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

enum { STEPS = 180, FRAME_EVERY = 15 }; /* 12 frames (tests/soak/soak.c reads STEPS) */

int main(int argc, char **argv) { return scene_run_headless("hair", argc, argv, STEPS, FRAME_EVERY); }
