/* sm_jelly.c - jelly with plasticity (pbd_sm.h): three jelly blocks of
   lattice shape matching (Rivers and James 2007; survey 4.2, linear mode,
   region half-width 2) are dropped on the ground; then a heavy weight (a
   rigid shape-matched block, 20x denser) falls on each of them, rests there
   and is lifted off again. The blocks differ only in their plasticity
   (survey 4.5.2): the left one is elastic and springs back, the middle one
   creeps a little, the right one yields easily and keeps a deep dent. The
   weights touch the jellies through a small contact plugin written here,
   an example of a contact model of your own: each jelly particle inside a
   weight's box is pushed out along the nearest face, and the weight is
   pushed back by the opposite impulse (mass-weighted, so momentum is
   kept). pbd.h's particle contacts (pbd_particles_set_particle_contact) would
   work too, but they see spheres: the weight would be a lumpy box of
   balls, and a lattice's particles belong to no object, so a jelly's own
   touching neighbours would push each other apart as it is squeezed.

   Frames every 0.25 s and a contact sheet go to out/ (PNG with libstb-dev,
   else PPM); each frame prints the dent depth of every block (how far the
   centre of its top face sits below the undeformed height) and its largest
   plastic strain ||S_p - I||. Build and run from the repository root:

       cc -O2 -fopenmp -ffp-contract=off -I. examples/sm_jelly.c -o sm_jelly -lm -DPBD_HAVE_STB -I/usr/include/stb && ./sm_jelly out

   Exit status 0 when every step succeeded, the positions stayed finite,
   every image was written and the dents came out as described (the
   elastic one under 1 cm, the soft one the deepest).

   The scene itself is built in examples/common/scenes.h (scene
   "sm_jelly"), which the interactive viewer (examples/viewer.c) shows too:
   read its builder and its plugin for the set-up.
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

enum { STEPS = 240, FRAME_EVERY = 15 }; /* 4 s at 60 Hz, 16 frames (tests/soak/soak.c reads STEPS) */

int main(int argc, char **argv) { return scene_run_headless("sm_jelly", argc, argv, STEPS, FRAME_EVERY); }
