/* bench/fluid_rest.c - water at rest: a 10 x 30 x 10 block of position
   based fluid (3000 particles) in a closed tank of plane colliders, with
   the fluid defaults except the spacing (5 mm, 6.7 mm, 1 cm, 2.5 cm, 5 cm,
   10 cm; the world asked for 4 substeps, and 1 cm also for 2), stepped
   2 s at 60 Hz. Prints JSON lines with the keys of bench/bench.h and
   `asked` (the substeps the world was given; `substeps` is what a step
   takes, pbd_world_step_substeps), `rise` (the highest particle over the
   run, over the column height H: the "thrown to 16x"), `fill`
   (twice the mean particle height over H, at the end), `loss` (1 - fill),
   `density_mean` / `density_max` (the compression rho/rho_0 - 1 > 0 of
   pbd_fluid_densities, mean over all particles and worst, at the end) and
   `rms_speed` (m/s, at the end). The physics is bit-identical for the
   three configurations; each is timed.
   Build and run: make bench BENCH=fluid_rest (or build/.../bench/fluid_rest
   [--quick]: SIMD on 1 thread only; --kernels, --iterations: see
   run_kernels) */
#include "bench.h"
#include <math.h>

enum { NX = 10, NY = 30, NZ = 10, N = NX * NY * NZ, STEPS = 120, MAXN = 20 * 30 * 20 };

/* The scene: a block of nx x ny x nz particles at spacing d, kernel radius
   kr spacings (0: the default), the world at `substeps` and `iterations`. */
typedef struct scene {
    float d, kr;
    int nx, ny, nz, substeps, iterations;
} scene;

static pbd_world *make_tank(const scene *c, pbd_fluid *f) {
    pbd_world_desc wd = bench_desc();
    wd.substeps = c->substeps;
    wd.iterations = c->iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return NULL;
    const float d = c->d, sx = c->nx * d, sz = c->nz * d, top = 4.0f * c->ny * d;
    float planes[6][6] = {{0, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0},   {sx, 0, 0, -1, 0, 0},
                          {0, 0, 0, 0, 0, 1}, {0, 0, sz, 0, 0, -1}, {0, top, 0, 0, -1, 0}};
    for (int k = 0; k < 6; ++k) pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.0f, NULL);
    static float pos[3 * MAXN];
    int n = c->nx * c->ny * c->nz;
    for (int i = 0; i < n; ++i) {
        pos[3 * i + 0] = (0.5f + (float)(i % c->nx)) * d;
        pos[3 * i + 1] = (0.5f + (float)((i / c->nx) % c->ny)) * d;
        pos[3 * i + 2] = (0.5f + (float)(i / (c->nx * c->ny))) * d;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = pos;
    fd.count = n;
    fd.spacing = d;
    fd.kernel_radius = c->kr * d;
    if (pbd_add_fluid(w, &fd, f, NULL) != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

/* Steps scene c `steps` times in configuration (simd, threads) and prints
   its JSON line. */
static void run_scene(const scene *c, int steps, int simd, int threads) {
    pbd_fluid f;
    pbd_world *w = make_tank(c, &f);
    if (!w) {
        fprintf(stderr, "fluid_rest: could not build the tank\n");
        exit(1);
    }
    pbd_world_set_simd(w, simd);
    pbd_world_set_threads(w, threads);
    const int n = c->nx * c->ny * c->nz;
    const float H = c->ny * c->d;
    float rise = 0;
    double t0 = bench_now();
    for (int s = 0; s < steps; ++s) {
        pbd_world_step(w, 1.0f / 60.0f);
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < n; ++i) rise = x[4 * i + 1] > rise ? x[4 * i + 1] : rise;
    }
    double ms = (bench_now() - t0) * 1e3 / steps;
    static float rho[MAXN];
    int nrho = 0;
    pbd_fluid_densities(w, f, rho, n, &nrho);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    double mean = 0, worst = 0, my = 0, v2 = 0;
    for (int i = 0; i < n; ++i) {
        double e = rho[i] - 1.0, cc = e > 0 ? e : 0;
        mean += cc / n;
        worst = cc > worst ? cc : worst;
        my += x[4 * i + 1] / (double)n;
        v2 +=
            ((double)v[4 * i] * v[4 * i] + (double)v[4 * i + 1] * v[4 * i + 1] + (double)v[4 * i + 2] * v[4 * i + 2]) /
            n;
    }
    int taken = pbd_world_step_substeps(w, 1.0f / 60.0f);
    /* the fluid's projections per substep (the scene's name has the world's) */
    int its = c->iterations > PBD_FLUID_MIN_ITERATIONS ? c->iterations : PBD_FLUID_MIN_ITERATIONS;
    printf("{\"bench\":\"fluid_rest\",\"scene\":\"rest%dx%dx%d_d%.4g_sub%d_it%d_kr%g\",\"particles\":%d,"
           "\"constraints\":%d,\"colors\":0,"
           "\"iterations\":%d,\"substeps\":%d,\"asked\":%d,\"mode\":\"jacobi\",\"path\":\"%s\",\"threads\":%d,"
           "\"ms_per_step\":%.3f,\"proj_per_s\":%.4g,\"spacing\":%g,\"kernel\":%g,\"rise\":%.3f,\"fill\":%.4f,"
           "\"loss\":%.4f,\"density_mean\":%.4f,\"density_max\":%.4f,\"rms_speed\":%.4f}\n",
           c->nx, c->ny, c->nz, (double)c->d, c->substeps, c->iterations, (double)c->kr, n, n, its, taken, c->substeps,
           simd ? pbd_simd_path() : "scalar", threads, ms, (double)n * its * taken / (ms * 1e-3), (double)c->d,
           (double)c->kr, (double)(rise / H), 2.0 * my / H, 1.0 - 2.0 * my / H, mean, worst, sqrt(v2));
    fflush(stdout);
    pbd_world_destroy(w);
}

static void run(float d, int substeps, int quick) {
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    scene c = {d, 0.0f, NX, NY, NZ, substeps, 4};
    for (int k = quick ? 1 : 0; k < (quick ? 2 : 3); ++k) run_scene(&c, STEPS, cfg[k].simd, cfg[k].threads);
}

/* --kernels: the kernel radius range of pbd_fluid_desc (its ends and
   the default), blocks of 10 x 10 x 10, 10 x 30 x 10 and
   20 x 8 x 20 at 1 cm, 5 cm and 10 cm, 3 s. --iterations: the 10 x 30 x 10
   tank at 5 cm with the world at 1, 2 and 4 iterations, and a
   10 x 60 x 10 column at 2 (a fluid takes at least
   PBD_FLUID_MIN_ITERATIONS). SIMD, 1 thread. */
static void run_kernels(void) {
    const float krs[3] = {PBD_FLUID_KERNEL_MIN, 2.0f, PBD_FLUID_KERNEL_MAX}, ds[3] = {0.01f, 0.05f, 0.1f};
    const int blocks[3][3] = {{10, 10, 10}, {10, 30, 10}, {20, 8, 20}};
    for (int k = 0; k < 3; ++k)
        for (int i = 0; i < 3; ++i)
            for (int b = 0; b < 3; ++b) {
                scene c = {ds[i], krs[k], blocks[b][0], blocks[b][1], blocks[b][2], 4, 4};
                run_scene(&c, 180, 1, 1);
            }
}
static void run_iterations(void) {
    const int its[3] = {1, 2, 4};
    for (int k = 0; k < 3; ++k) {
        scene c = {0.05f, 0.0f, 10, 30, 10, 4, its[k]};
        run_scene(&c, 180, 1, 1);
    }
    scene c = {0.05f, 0.0f, 10, 60, 10, 4, 2};
    run_scene(&c, 180, 1, 1);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc > 1 && strcmp(argv[1], "--kernels") == 0) {
        run_kernels();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--iterations") == 0) {
        run_iterations();
        return 0;
    }
    const float ds[6] = {0.005f, 0.0067f, 0.01f, 0.025f, 0.05f, 0.1f};
    for (int i = 0; i < 6; ++i) run(ds[i], 4, quick);
    run(0.01f, 2, quick);
    return 0;
}
