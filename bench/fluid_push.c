/* bench/fluid_push.c - a box collider moved through resting water: a
   20 x 8 x 20 pool of position based fluid at 5 cm (defaults) in a tank
   of plane colliders, and a box 6 cm thick, 60 cm tall and 60 cm deep
   moved along x by pbd_collider_set_pose every step at 60 Hz. Scenes:
   `flush` (settled 3 s, then pushed at 1 m/s until flush with the tank's
   wall, 3 s in all after it started), `gap4cm` (the same, stopped 4 cm
   from the wall), `inside_0.3` and `inside_2` (moved from the first step,
   starting inside the water, at 0.3 and 2 m/s until flush). Prints JSON
   lines with the keys of bench/bench.h and `speed` (m/s: the largest
   particle speed after the box started moving, at the end of a step) and
   `end_speed` (at the last step). SIMD, 1 thread: the physics is the
   same bits for any path (pbd.h "// ==== fluids").
   Build and run: make bench BENCH=fluid_push */
#include "bench.h"
#include <math.h>

enum { NX = 20, NY = 8, NZ = 20, N = NX * NY * NZ };

static void run(const char *name, int wait, float speed, float gap) {
    const float d = 0.05f, W = NX * d, D = NZ * d;
    pbd_world_desc wd = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) exit(1);
    pbd_world_set_threads(w, 1);
    const float planes[5][6] = {
        {0, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0}, {W, 0, 0, -1, 0, 0}, {0, 0, 0, 0, 0, 1}, {0, 0, D, 0, 0, -1}};
    for (int k = 0; k < 5; ++k) pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.0f, NULL);
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
    pbd_range r;
    if (pbd_add_fluid(w, &fd, NULL, &r) != PBD_OK) exit(1);
    float c[3] = {0.1f, 0.3f, 0.5f * D}, he[3] = {0.03f, 0.3f, 0.3f};
    pbd_collider box;
    pbd_add_collider_box(w, c, he, NULL, 0.2f, &box);
    double vmax = 0, vend = 0, t0 = bench_now();
    int steps = wait + 180;
    for (int f = 1; f <= steps; ++f) {
        int moved = f > wait ? f - wait : 0;
        c[0] = fminf(0.1f + speed * (float)moved / 60.0f, W - he[0] - gap);
        pbd_collider_set_pose(w, box, c, NULL);
        pbd_world_step(w, 1.0f / 60.0f);
        const float *v = pbd_world_velocities(w);
        double vm = 0;
        for (int i = r.first; i < r.first + r.count; ++i) {
            double s = sqrt((double)v[4 * i] * v[4 * i] + (double)v[4 * i + 1] * v[4 * i + 1] +
                            (double)v[4 * i + 2] * v[4 * i + 2]);
            vm = s > vm ? s : vm;
        }
        if (f > wait) vmax = vm > vmax ? vm : vmax;
        vend = vm;
    }
    double ms = (bench_now() - t0) * 1e3 / steps;
    int S = pbd_world_step_substeps(w, 1.0f / 60.0f);
    printf("{\"bench\":\"fluid_push\",\"scene\":\"%s\",\"particles\":%d,\"constraints\":%d,\"colors\":0,"
           "\"iterations\":4,\"substeps\":%d,\"mode\":\"jacobi\",\"path\":\"%s\",\"threads\":1,\"ms_per_step\":%.3f,"
           "\"proj_per_s\":%.4g,\"speed\":%.4g,\"end_speed\":%.4g}\n",
           name, N, N, S, pbd_simd_path(), ms, (double)N * 4 * S / (ms * 1e-3), vmax, vend);
    fflush(stdout);
    pbd_world_destroy(w);
}

int main(void) {
    run("flush", 180, 1.0f, 0.0f);
    run("gap4cm", 180, 1.0f, 0.04f);
    run("inside_0.3", 0, 0.3f, 0.0f);
    run("inside_2", 0, 2.0f, 0.0f);
    return 0;
}
