/* bench/sm_cloth_window.c - the multi-resolution cloth's edge strain
   (pbd_sm.h manual, MULTI-RESOLUTION CLOTH: the numbers it quotes are this
   program's), at one instant and as the worst over a window of time.

   Scene: a 1 m cloth of 40 x 40 vertices (pbd_mesh_grid, horizontal),
   pinned at its two corners of one edge (vertices 0 and 39, kept on every
   level), 5 levels, every other setting of pbd_sm_cloth_desc and of the
   world at its default, one V-cycle per step (world substeps 1,
   iterations 1) at steps of 5 ms, 1/240 s, 1/60 s and 1/30 s, 4 s. It
   falls, swings and hangs. Strain from pbd_sm_cloth_strain (mean and
   maximum over the finest level's edges of |len| / rest - 1, shorter
   edges counting 0), after every step. Keys: `dt`, `mean_4s`, `max_4s`
   (at t = 4 s), `max_mean_2_4`, `max_max_2_4` (the largest over the steps
   in 2..4 s: swinging, settling), `max_max_0_4` (over the whole run, the
   fall included). Then the same at 1/60 s with 4 substeps (the manual's
   advice) against the world's iterations per substep, wrinkle
   conservation on and off, and the number of levels (keys `substeps`,
   `iterations`, `levels`, `conserve_wrinkles`).

   Build and run: make bench BENCH=sm_cloth_window (or cc -std=c99 -O2
   -I. bench/sm_cloth_window.c -lm). */
#include "bench.h"
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"

static void run(float dt, const char *name, int substeps, int iterations, int levels, int conserve) {
    enum { N = 40 };
    pbd_world_desc wd = bench_desc();
    wd.substeps = substeps;
    wd.reference_dt = 0; /* substeps V-cycles per step at any dt */
    wd.iterations = iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return;
    pbd_mesh mesh;
    float o[3] = {-0.5f, 1.5f, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    if (pbd_mesh_grid(N, N, o, u, v, &mesh) != PBD_OK) return;
    pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
    cd.positions = mesh.positions;
    cd.vertex_count = mesh.vertex_count;
    cd.triangles = mesh.triangles;
    cd.triangle_count = mesh.triangle_count;
    cd.levels = levels;
    cd.conserve_wrinkles = conserve;
    int keep[2] = {0, N - 1};
    cd.keep_vertices = keep;
    cd.keep_count = 2;
    pbd_sm_cloth c;
    pbd_range r;
    if (pbd_sm_add_cloth(w, &cd, &c, &r) != PBD_OK) {
        fprintf(stderr, "sm_cloth_window: %s\n", pbd_world_last_error(w));
        return;
    }
    pbd_mesh_free(&mesh);
    pbd_particle_pin(w, r.first);
    pbd_particle_pin(w, r.first + N - 1);
    int steps = (int)(4.0 / dt + 0.5);
    float mean = 0, mx = 0, mm24 = 0, mx24 = 0, mx04 = 0;
    for (int s = 1; s <= steps; ++s) {
        pbd_world_step(w, dt);
        pbd_sm_cloth_strain(w, c, &mean, &mx);
        if (mx > mx04) mx04 = mx;
        if (s * (double)dt >= 2.0 - 1e-9) {
            if (mx > mx24) mx24 = mx;
            if (mean > mm24) mm24 = mean;
        }
    }
    printf("{\"bench\": \"sm_cloth_window\", \"dt\": \"%s\", \"substeps\": %d, \"iterations\": %d, \"levels\": %d, "
           "\"conserve_wrinkles\": %d, \"mean_4s\": %.4f, \"max_4s\": %.4f, \"max_mean_2_4\": %.4f, \"max_max_2_4\": "
           "%.4f, "
           "\"max_max_0_4\": %.4f}\n",
           name, substeps, iterations, levels, conserve, mean, mx, mm24, mx24, mx04);
    fflush(stdout);
    pbd_world_destroy(w);
}

int main(void) {
    run(0.005f, "5 ms", 1, 1, 5, 1);
    run(1.0f / 240, "1/240 s", 1, 1, 5, 1);
    run(1.0f / 60, "1/60 s", 1, 1, 5, 1);
    run(1.0f / 30, "1/30 s", 1, 1, 5, 1);
    /* 4 substeps at 60 Hz: iterations per substep, wrinkle conservation, levels */
    for (int conserve = 1; conserve >= 0; --conserve)
        for (int it = 1; it <= 4; it *= 2) run(1.0f / 60, "1/60 s", 4, it, 5, conserve);
    for (int levels = 1; levels <= 3; ++levels) run(1.0f / 60, "1/60 s", 4, 1, levels, 1);
    return 0;
}
