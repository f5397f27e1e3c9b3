/* bench/sm_stack.c - how rigid shape-matched bodies stack (pbd_sm.h
   manual, RIGID BODIES and "Contacts", Limitation): the numbers the
   manual and the README quote are this program's.

   Scene: `bodies` rigid lattices of 3 x 3 x 3 particles (the defaults of
   pbd_sm_lattice_desc: RIGID mode, stiffness 1, one cluster; spacing
   0.1 m, particle radius 0.05 m, 0.1 kg particles: 0.3 m cubes of 2.7 kg)
   stacked at rest, face on face, centres 0.3 m apart, the lowest resting
   on a ground plane (friction 0.5), particle contact on for all of them,
   world defaults (4 substeps x 4 iterations; the lattices' particles are
   grains to pbd.h, so a step takes the 8 substeps that
   pbd_world_desc.granular_cfl asks for their 5 cm), stepped at 1/60 s for
   `seconds`; then the same with every other body shifted 5 cm sideways
   (`offset` 0.05: a sloppy stack, each body's centre still over the one
   below). Keys: `bodies`, `sink_1s`, `sink_2s`, `sink_end` (the
   largest sinking of a body into the one below: 0.3 m minus the distance
   of their centres, in m, at 1 s, 2 s and the end), `merged_at` (the
   first time in s at which two neighbours' centres came within 0.15 m of
   each other, half a body; -1: never), `bottom_sink` (the lowest body's
   centre below its resting 0.15 m at the end), `tilt_end` (the largest
   horizontal distance of a body's centre from the lowest one's, m).

   Build and run: make bench BENCH=sm_stack (or cc -std=c99 -O2 -I.
   bench/sm_stack.c -lm); --seconds S (default 10); --hz F: steps of
   1/F s (default 60; key `hz`); --substeps S: the world's substeps
   (default 4; key `substeps`: what a step takes, 8 at 60 Hz and 16 at
   --hz 30 by granular_cfl, 4 with PBD_BENCH_FIXED=1); --half-width W: the
   lattices' regions of half-width W instead of one cluster (W = 1:
   regions that do not span a body, which is then not rigid). */
#include "bench.h"
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"

enum { STACK_MAX = 5, STACK_N = 27 };

static void centre(const pbd_world *w, pbd_range r, double *c) {
    const float *x = pbd_world_positions(w);
    c[0] = c[1] = c[2] = 0;
    for (int i = 0; i < r.count; ++i)
        for (int a = 0; a < 3; ++a) c[a] += x[4 * (r.first + i) + a] / (double)r.count;
}

static int half_width = 0; /* --half-width W: the lattice's regions (0: the default, one cluster) */
static int hz = 60;        /* --hz F: steps of 1/F s */
static int substeps = 0;   /* --substeps S: the world's (0: its default, 4) */

static void stack_run(int bodies, double offset, double seconds) {
    pbd_world_desc wd = bench_desc();
    if (substeps > 0) wd.substeps = substeps;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    pbd_add_collider_plane(w, ground, up, 0.5f, NULL);
    int cells[3 * STACK_N];
    pbd_sm_lattice_box(3, 3, 3, cells);
    pbd_range r[STACK_MAX];
    for (int k = 0; k < bodies; ++k) {
        pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
        ld.cells = cells;
        ld.cell_count = STACK_N;
        ld.spacing = 0.1f;
        ld.particle_mass = 0.1f;
        ld.half_width = half_width;
        ld.origin[0] = -0.1f + (float)(offset * (k & 1));
        ld.origin[1] = 0.05f + 0.3f * (float)k;
        ld.origin[2] = -0.1f;
        if (pbd_sm_add_lattice(w, &ld, NULL, &r[k]) != PBD_OK) {
            fprintf(stderr, "sm_stack: %s\n", pbd_world_last_error(w));
            return;
        }
    }
    pbd_range all = {0, pbd_world_particle_count(w)};
    pbd_particles_set_particle_contact(w, all, 1);
    double sink_1s = 0, sink_2s = 0, sink = 0, merged_at = -1, tilt = 0, c[STACK_MAX][3];
    int frames = (int)(seconds * hz + 0.5);
    for (int f = 1; f <= frames; ++f) {
        pbd_world_step(w, 1.0f / (float)hz);
        sink = 0;
        for (int k = 0; k < bodies; ++k) centre(w, r[k], c[k]);
        for (int k = 1; k < bodies; ++k) {
            double d = 0;
            for (int a = 0; a < 3; ++a) d += (c[k][a] - c[k - 1][a]) * (c[k][a] - c[k - 1][a]);
            d = sqrt(d);
            if (0.3 - d > sink) sink = 0.3 - d;
            if (d < 0.15 && merged_at < 0) merged_at = f / (double)hz;
        }
        if (f == hz) sink_1s = sink;
        if (f == 2 * hz) sink_2s = sink;
    }
    for (int k = 1; k < bodies; ++k) {
        double h = sqrt((c[k][0] - c[0][0]) * (c[k][0] - c[0][0]) + (c[k][2] - c[0][2]) * (c[k][2] - c[0][2]));
        if (h > tilt) tilt = h;
    }
    printf("{\"bench\": \"sm_stack\", \"hz\": %d, \"substeps\": %d, \"half_width\": %d, \"bodies\": %d, \"offset\": "
           "%g, \"seconds\": %g, "
           "\"sink_1s\": %.4f, \"sink_2s\": %.4f, "
           "\"sink_end\": %.4f, \"merged_at\": %.3f, \"bottom_sink\": %.4f, \"tilt_end\": %.4f}\n",
           hz, pbd_world_step_substeps(w, 1.0f / (float)hz), half_width, bodies, offset, seconds, sink_1s, sink_2s,
           sink, merged_at, 0.15 - c[0][1], tilt);
    fflush(stdout);
    pbd_world_destroy(w);
}

int main(int argc, char **argv) {
    double seconds = 10;
    for (int i = 1; i < argc; ++i)
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--half-width") == 0 && i + 1 < argc) half_width = atoi(argv[++i]);
        else if (strcmp(argv[i], "--hz") == 0 && i + 1 < argc) hz = atoi(argv[++i]);
        else if (strcmp(argv[i], "--substeps") == 0 && i + 1 < argc) substeps = atoi(argv[++i]);
    if (hz < 1) hz = 60;
    for (int o = 0; o < 2; ++o)
        for (int bodies = 2; bodies <= STACK_MAX; ++bodies) stack_run(bodies, 0.05 * o, seconds);
    return 0;
}
