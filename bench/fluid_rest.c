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
   [--quick]: SIMD on 1 thread only) */
#include "bench.h"
#include <math.h>

enum { NX = 10, NY = 30, NZ = 10, N = NX * NY * NZ, STEPS = 120 };

static pbd_world *make_tank(float d, int substeps, pbd_fluid *f) {
    pbd_world_desc wd = bench_desc();
    wd.substeps = substeps;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return NULL;
    const float sx = NX * d, sz = NZ * d, top = 4.0f * NY * d;
    float planes[6][6] = {{0, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0},   {sx, 0, 0, -1, 0, 0},
                          {0, 0, 0, 0, 0, 1}, {0, 0, sz, 0, 0, -1}, {0, top, 0, 0, -1, 0}};
    for (int k = 0; k < 6; ++k) pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.0f, NULL);
    static float pos[3 * N];
    for (int i = 0; i < N; ++i) {
        pos[3 * i + 0] = (0.5f + (float)(i % NX)) * d;
        pos[3 * i + 1] = (0.5f + (float)((i / NX) % NY)) * d;
        pos[3 * i + 2] = (0.5f + (float)(i / (NX * NY))) * d;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = pos;
    fd.count = N;
    fd.spacing = d;
    if (pbd_add_fluid(w, &fd, f, NULL) != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

static void run(float d, int substeps, int quick) {
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    for (int k = quick ? 1 : 0; k < (quick ? 2 : 3); ++k) {
        pbd_fluid f;
        pbd_world *w = make_tank(d, substeps, &f);
        if (!w) {
            fprintf(stderr, "fluid_rest: could not build the tank\n");
            exit(1);
        }
        pbd_world_set_simd(w, cfg[k].simd);
        pbd_world_set_threads(w, cfg[k].threads);
        const float H = NY * d;
        float rise = 0;
        double t0 = bench_now();
        for (int s = 0; s < STEPS; ++s) {
            pbd_world_step(w, 1.0f / 60.0f);
            const float *x = pbd_world_positions(w);
            for (int i = 0; i < N; ++i) rise = x[4 * i + 1] > rise ? x[4 * i + 1] : rise;
        }
        double ms = (bench_now() - t0) * 1e3 / STEPS;
        static float rho[N];
        int nrho = 0;
        pbd_fluid_densities(w, f, rho, N, &nrho);
        const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
        double mean = 0, worst = 0, my = 0, v2 = 0;
        for (int i = 0; i < N; ++i) {
            double e = rho[i] - 1.0, c = e > 0 ? e : 0;
            mean += c / N;
            worst = c > worst ? c : worst;
            my += x[4 * i + 1] / (double)N;
            v2 += ((double)v[4 * i] * v[4 * i] + (double)v[4 * i + 1] * v[4 * i + 1] +
                   (double)v[4 * i + 2] * v[4 * i + 2]) /
                  N;
        }
        int taken = pbd_world_step_substeps(w, 1.0f / 60.0f);
        printf("{\"bench\":\"fluid_rest\",\"scene\":\"rest%d_d%.4g_sub%d\",\"particles\":%d,\"constraints\":%d,"
               "\"colors\":0,"
               "\"iterations\":4,\"substeps\":%d,\"asked\":%d,\"mode\":\"jacobi\",\"path\":\"%s\",\"threads\":%d,"
               "\"ms_per_step\":%.3f,\"proj_per_s\":%.4g,\"spacing\":%g,\"rise\":%.3f,\"fill\":%.4f,\"loss\":%.4f,"
               "\"density_mean\":%.4f,\"density_max\":%.4f,\"rms_speed\":%.4f}\n",
               N, (double)d, substeps, N, N, taken, substeps, cfg[k].simd ? pbd_simd_path() : "scalar", cfg[k].threads,
               ms, (double)N * 4 * taken / (ms * 1e-3), (double)d, (double)(rise / H), 2.0 * my / H, 1.0 - 2.0 * my / H,
               mean, worst, sqrt(v2));
        fflush(stdout);
        pbd_world_destroy(w);
    }
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const float ds[6] = {0.005f, 0.0067f, 0.01f, 0.025f, 0.05f, 0.1f};
    for (int i = 0; i < 6; ++i) run(ds[i], 4, quick);
    run(0.01f, 2, quick);
    return 0;
}
