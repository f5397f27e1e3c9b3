/* bench/fluid.c - position based fluids (Macklin and Mueller 2013): a dam
   break of 128 000 particles (80 x 40 x 40, spacing 2.5 cm, kernel radius
   5 cm) in a plane-collider tank, 4 iterations, 1/60 s steps, 1 and 2
   substeps. Prints JSON lines with the keys of bench/cloth.c (see
   bench/bench.h); `constraints` counts the density constraints (one per
   particle) and `proj_per_s` density projections per second; the solve is
   Jacobi (no colours). The scene is stepped `warm` times (0.5 s, or
   10 steps for the big scene) before timing, so that the timed steps see
   a moving fluid, not the initial lattice.
   The world is asked for 1 or 2 substeps; the fluid's gravity_cfl bound
   (default 0.06) makes a step at 2.5 cm take 6 (`substeps` is what a step
   takes, `asked` what the world was given); --cfl0 turns the bound off
   (the cost per substep as before it).
   Build and run: make bench BENCH=fluid (or build/.../bench/fluid [--quick]
   [--big] [--cfl0] [--config 0|1|2]: only the 16 000 scene, only the
   128 000 one with 1 substep, no substep bound, only scalar / SIMD 1
   thread / SIMD 2 threads) */
#include "bench.h"

typedef struct fluid_ctx {
    int nx, ny, nz, substeps, iterations;
} fluid_ctx;
static int cfl0 = 0; /* --cfl0: gravity_cfl = 0 */

static pbd_world *make_fluid(void *vctx) {
    const fluid_ctx *c = (const fluid_ctx *)vctx;
    pbd_world_desc d = bench_desc();
    d.substeps = c->substeps;
    d.iterations = c->iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    const float s = 0.025f, sx = 2.0f * c->nx * s, sz = c->nz * s;
    float planes[5][6] = {
        {0, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0}, {sx, 0, 0, -1, 0, 0}, {0, 0, 0, 0, 0, 1}, {0, 0, sz, 0, 0, -1}};
    for (int k = 0; k < 5; ++k) pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.1f, NULL);
    int n = c->nx * c->ny * c->nz;
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)n);
    if (!pos) return NULL;
    for (int i = 0; i < n; ++i) {
        pos[3 * i + 0] = (0.5f + (float)(i % c->nx)) * s;
        pos[3 * i + 1] = (0.5f + (float)((i / c->nx) % c->ny)) * s;
        pos[3 * i + 2] = (0.5f + (float)(i / (c->nx * c->ny))) * s;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = pos;
    fd.count = n;
    fd.spacing = s;
    if (cfl0) fd.gravity_cfl = 0;
    pbd_result r = pbd_add_fluid(w, &fd, NULL, NULL);
    free(pos);
    if (r != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

/* The density constraints (one per particle) count as the constraints,
   for the GPU line too. */
static long density_constraints(const pbd_world *w) { return pbd_world_particle_count(w); }

/* --config K runs only configuration K (0 scalar, 1 SIMD 1 thread, 2 SIMD
   2 threads), e.g. under a profiler. */
static int only_config = -1;

static void run(int nx, int ny, int nz, int substeps, int iterations, int warm, int steps) {
    fluid_ctx c = {nx, ny, nz, substeps, iterations};
    char scene[64];
    snprintf(scene, sizeof scene, "dam%d_sub%d", nx * ny * nz, substeps);
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    for (int k = 0; k < 3; ++k) {
        if ((only_config >= 0 && k != only_config) || bench_skip(scene, 0)) continue;
        pbd_world *w = make_fluid(&c);
        if (!w) {
            fprintf(stderr, "fluid: could not build %s\n", scene);
            exit(1);
        }
        pbd_world_set_simd(w, cfg[k].simd);
        pbd_world_set_threads(w, cfg[k].threads);
        for (int s = 0; s < warm; ++s) pbd_world_step(w, 1.0f / 60.0f); /* the dam breaks */
        double ms = bench_ms_per_step(w, steps);
        long constraints = pbd_world_particle_count(w);
        int taken = pbd_world_step_substeps(w, 1.0f / 60.0f);
        printf("{\"bench\":\"fluid\",\"scene\":\"%s\",\"particles\":%d,\"constraints\":%ld,\"colors\":0,"
               "\"iterations\":%d,\"substeps\":%d,\"asked\":%d,\"mode\":\"jacobi\",\"path\":\"%s\",\"threads\":%d,"
               "\"ms_per_step\":%.3f,\"proj_per_s\":%.4g}\n",
               scene, pbd_world_particle_count(w), constraints, iterations, taken, substeps,
               cfg[k].simd ? pbd_simd_path() : "scalar", cfg[k].threads, ms,
               (double)constraints * iterations * taken / (ms * 1e-3));
        fflush(stdout);
        pbd_world_destroy(w);
    }
    bench_cuda_scene("fluid", scene, make_fluid, &c, warm, steps);
}

int main(int argc, char **argv) {
    int quick = 0, big = 0;
    bench_extra_constraints = density_constraints;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--big") == 0) big = 1; /* only dam128000_sub1 */
        else if (strcmp(argv[i], "--cfl0") == 0) cfl0 = 1;
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) only_config = atoi(argv[++i]);
    }
    if (big) {
        run(80, 40, 40, 1, 4, 10, 2);
        return 0;
    }
    run(40, 20, 20, 1, 4, 30, 5); /* 16 000 particles */
    if (!quick) {
        run(80, 40, 40, 1, 4, 10, 2); /* the target: 128 000 particles, 4 iterations */
        run(80, 40, 40, 2, 4, 10, 2);
    }
    return 0;
}
