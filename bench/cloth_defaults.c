/* bench/cloth_defaults.c - how much a pinned cloth stretches with the
   library's defaults, and what the defaults cost.

   Strain: a 1 m cloth of N x N vertices (pbd_mesh_grid, horizontal),
   pinned at its two top corners, every setting at its default, stepped at
   1/60 s. The strain of an edge is |len| / rest - 1 over the stretch
   group's edges; `fall_max` is the worst edge over the first 2 s (the
   fall and the first swings), `rest_max` the worst over 5..6 s (hanging
   still), `rest_mean` the mean over the edges at 6 s. Keys: `bench`,
   `scene`, `n`, `substeps`, `iterations`, `tethers` (the automatic long
   range attachments on or off), `fall_max`, `rest_max`, `rest_mean`.

   Cost: the README's hello-world cloth (32 x 32 onto a sphere) and the
   showcase's scene (examples/showcase.c) with the old behaviour against the
   new defaults, in the same run: the median of BENCH_RUNS timed runs each,
   repeated COST_REPEATS times, and the median of the ratios.

   Build and run: make bench BENCH=cloth_defaults
   ./build/bench/cloth_defaults --table   substeps x iterations table */
#include "bench.h"

typedef struct strain_run { int n, substeps, iterations, tethers; } strain_run;
typedef struct strain_out { double fall_max, rest_max, rest_mean; } strain_out;

/* The cloth's edges (each once) with their rest lengths. */
typedef struct edges { int count, *idx; float *rest; } edges;

static int cmp_edge(const void *a, const void *b) {
    const int *x = (const int *)a, *y = (const int *)b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

static edges mesh_edges(const pbd_mesh *m) {
    edges e;
    e.idx = (int *)malloc(sizeof(int) * 6 * (size_t)m->triangle_count);
    e.rest = (float *)malloc(sizeof(float) * 3 * (size_t)m->triangle_count);
    for (int k = 0; k < 3 * m->triangle_count; ++k) {
        int a = m->triangles[k], b = m->triangles[k % 3 == 2 ? k - 2 : k + 1];
        e.idx[2 * k] = a < b ? a : b;
        e.idx[2 * k + 1] = a < b ? b : a;
    }
    qsort(e.idx, 3 * (size_t)m->triangle_count, 2 * sizeof(int), cmp_edge);
    e.count = 0;
    for (int k = 0; k < 3 * m->triangle_count; ++k) {
        if (e.count && cmp_edge(e.idx + 2 * k, e.idx + 2 * (e.count - 1)) == 0) continue;
        e.idx[2 * e.count] = e.idx[2 * k];
        e.idx[2 * e.count + 1] = e.idx[2 * k + 1];
        const float *a = m->positions + 3 * e.idx[2 * k], *b = m->positions + 3 * e.idx[2 * k + 1];
        e.rest[e.count++] = sqrtf((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
    }
    return e;
}

/* The worst edge strain |len| / rest - 1 (and the mean). */
static double worst_strain(const pbd_world *w, const edges *e, double *mean) {
    const float *x = pbd_world_positions(w);
    double worst = 0, sum = 0;
    for (int c = 0; c < e->count; ++c) {
        const float *a = x + 4 * e->idx[2 * c], *b = x + 4 * e->idx[2 * c + 1];
        double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
        double s = sqrt(dx * dx + dy * dy + dz * dz) / e->rest[c] - 1.0;
        if (s > worst) worst = s;
        sum += s;
    }
    if (mean) *mean = sum / e->count;
    return worst;
}

static pbd_world *hanging_cloth(int n, int substeps, int iterations, int tethers, edges *e) {
    pbd_world_desc d = pbd_world_desc_default();
    if (substeps) d.substeps = substeps;
    if (iterations) d.iterations = iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    if (pbd_mesh_grid(n, n, o, u, v, &m) != PBD_OK) return NULL;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions; cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles; cd.triangle_count = m.triangle_count;
    if (tethers >= 0) cd.tethers = tethers;
    pbd_result r = pbd_add_cloth(w, &cd, NULL);
    *e = mesh_edges(&m);
    pbd_mesh_free(&m);
    if (r != PBD_OK) return NULL;
    pbd_pin(w, 0);
    pbd_pin(w, n - 1);
    return w;
}

/* substeps / iterations 0 and tethers -1: the defaults. */
static strain_out measure_strain(strain_run s) {
    strain_out out = {0, 0, 0};
    edges e;
    pbd_world *w = hanging_cloth(s.n, s.substeps, s.iterations, s.tethers, &e);
    if (!w) { fprintf(stderr, "cloth_defaults: could not build the cloth\n"); exit(1); }
    for (int step = 1; step <= 360; ++step) {
        pbd_world_step(w, 1.0f / 60.0f);
        double mean = 0, worst = worst_strain(w, &e, &mean);
        if (step <= 120 && worst > out.fall_max) out.fall_max = worst;
        if (step >= 300 && worst > out.rest_max) out.rest_max = worst;
        if (step == 360) out.rest_mean = mean;
        if (!(worst < 1e6)) { out.fall_max = out.rest_max = out.rest_mean = 1e6; break; }
    }
    pbd_world_destroy(w);
    free(e.idx); free(e.rest);
    return out;
}

static void print_strain(const char *scene, strain_run s) {
    strain_out o = measure_strain(s);
    pbd_world_desc d = pbd_world_desc_default();
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    printf("{\"bench\":\"cloth_defaults\",\"scene\":\"%s\",\"n\":%d,\"substeps\":%d,\"iterations\":%d,"
           "\"tethers\":%d,\"fall_max\":%.4f,\"rest_max\":%.4f,\"rest_mean\":%.5f}\n",
           scene, s.n, s.substeps ? s.substeps : d.substeps, s.iterations ? s.iterations : d.iterations,
           s.tethers >= 0 ? s.tethers : cd.tethers, o.fall_max, o.rest_max, o.rest_mean);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int table = argc > 1 && strcmp(argv[1], "--table") == 0;
    if (table) {
        static const int SUB[] = {1, 2, 4, 8, 16}, ITER[] = {1, 2, 4, 8};
        for (int n = 32; n <= 100; n += 68)
            for (int t = 0; t <= 1; ++t)
                for (int a = 0; a < 5; ++a)
                    for (int b = 0; b < 4; ++b) {
                        strain_run s = {n, SUB[a], ITER[b], t};
                        print_strain("hanging_table", s);
                    }
        return 0;
    }
    strain_run s32 = {32, 0, 0, -1}, s100 = {100, 0, 0, -1};
    print_strain("hanging_defaults", s32);
    print_strain("hanging_defaults", s100);
    return 0;
}
