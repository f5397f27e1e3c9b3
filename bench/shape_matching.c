/* bench/shape_matching.c - region sums of region-based shape matching
   (pbd_sm.h section "summation", survey 4.3).

   Scenes: a 25 x 25 x 32 lattice block (20 000 particles) with naive,
   FastLSM lattice and octree summation over the same cubic regions of
   half-width w = 1, 2, 3; a 142 x 141 grid surface (20 022 vertices) with
   naive and path summation over w-rings; the same block as an adaptive
   octree (fine cells within 2 of the surface, coarser inside) with naive
   and octree summation. One "step" is the sums of eq. (7)
   and (8) for every region: k = 12 values per particle (m x and m x
   xbar^T). Each is measured scalar on 1 thread, SIMD on 1 thread and SIMD
   on 2 threads in the same run; ms_per_step is the median of BENCH_RUNS
   timed runs. Then the full simulation step (scene lattice20000_world):
   the block as a region-based shape-matching body (pbd_sm_add_body, rigid
   regions, world defaults: 4 substeps x 4 iterations) resting on a ground
   plane, with naive, lattice and octree plans over the same regions;
   then the block as an elastic LINEAR body (lattice sums, w = 1) with
   its volume term on (the default) and off, keys "mode" and "volume".
   Last the scaling lines: work (pbd_sm_plan_cost) and time per region
   for w = 1..6, summation alone.

   Build: make benches (or cc -std=c99 -O3 -march=native -fopenmp
   -ffp-contract=off -I. bench/shape_matching.c -lm). --quick: fewer runs;
   --no-world: summation only; --only WORD: only the parts whose scene
   names contain WORD (sums of lattice20000 / grid_surface20022,
   block_adaptive_octree, lattice20000_world, _scaling); --width W: only
   region width W; --summation NAME: only that method in the world scene. */
#include "bench.h"
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"

/* xorshift32 in [0, 1) */
static double rand01(unsigned *st) {
    unsigned x = *st;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *st = x;
    return (double)(x >> 8) / 16777216.0;
}

static const char *only = NULL;     /* --only WORD */
static int only_w = 0;              /* --width W: that region width alone */
static const char *only_sum = NULL; /* --summation NAME: that method alone (world scenes) */
static int want(const char *scene) { return !only || strstr(scene, only) != NULL; }

enum { NX = 25, NY = 25, NZ = 32, K = 12, GX = 142, GY = 141 };

/* A naive plan over the regions of p (its member lists). */
static pbd_sm_sum_plan *naive_twin(const pbd_sm_sum_plan *p) {
    int R = pbd_sm_plan_region_count(p), total = 0, cnt = 0;
    int *start = (int *)malloc(sizeof(int) * (size_t)(R + 1));
    for (int r = 0; r < R; ++r) {
        pbd_sm_plan_region(p, r, NULL, 0, &cnt);
        start[r] = total;
        total += cnt;
    }
    start[R] = total;
    int *list = (int *)malloc(sizeof(int) * (size_t)total);
    for (int r = 0; r < R; ++r) pbd_sm_plan_region(p, r, list + start[r], total - start[r], &cnt);
    pbd_sm_sum_plan *q = NULL;
    if (pbd_sm_plan_naive(pbd_sm_plan_particle_count(p), R, start, list, &q) != PBD_OK) q = NULL;
    free(start);
    free(list);
    return q;
}

/* Median ms of one pbd_sm_plan_sum (reps sums per timed run). */
static double time_sum(pbd_sm_sum_plan *p, const double *v, double *s, int reps) {
    double t[BENCH_RUNS];
    pbd_sm_plan_sum(p, v, K, s); /* warm-up */
    for (int r = 0; r < BENCH_RUNS; ++r) {
        double t0 = bench_now();
        for (int i = 0; i < reps; ++i) pbd_sm_plan_sum(p, v, K, s);
        t[r] = (bench_now() - t0) * 1e3 / reps;
    }
    qsort(t, BENCH_RUNS, sizeof t[0], bench_cmp_double);
    return t[BENCH_RUNS / 2];
}

static const char *method_name(pbd_sm_summation m) {
    return m == PBD_SM_SUM_LATTICE  ? "lattice"
           : m == PBD_SM_SUM_OCTREE ? "octree"
           : m == PBD_SM_SUM_PATHS  ? "paths"
                                    : "naive";
}

/* The three configurations of one plan, one JSON line each. */
static void measure(const char *scene, pbd_sm_sum_plan *p, int w, const double *v, double *s, int reps) {
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    int n = pbd_sm_plan_particle_count(p);
    if (!want(scene)) return;
    for (int c = 0; c < 3; ++c) {
        if (cfg[c].threads > 1 && pbd_max_threads() == 1) continue;
        pbd_sm_plan_set_simd(p, cfg[c].simd);
        pbd_sm_plan_set_threads(p, cfg[c].threads);
        double ms = time_sum(p, v, s, reps);
        printf("{\"bench\":\"shape_matching\",\"scene\":\"%s\",\"particles\":%d,\"region_width\":%d,"
               "\"summation\":\"%s\",\"path\":\"%s\",\"threads\":%d,\"values\":%d,\"ms_per_step\":%.3f,"
               "\"particles_per_s\":%.4g}\n",
               scene, n, w, method_name(pbd_sm_plan_method(p)), cfg[c].simd ? pbd_simd_path() : "scalar",
               cfg[c].threads, K, ms, n / (ms * 1e-3));
        fflush(stdout);
    }
}

/* Work and time per region, summation alone (SIMD, 1 thread). */
static void scaling_line(const char *scene, pbd_sm_sum_plan *p, int w, const double *v, double *s, int reps) {
    int R = pbd_sm_plan_region_count(p), cnt = 0;
    long long members = 0;
    char name[64];
    snprintf(name, sizeof name, "%s_scaling", scene);
    if (!want(name)) return;
    for (int r = 0; r < R; ++r) {
        pbd_sm_plan_region(p, r, NULL, 0, &cnt);
        members += cnt;
    }
    pbd_sm_plan_set_simd(p, 1);
    pbd_sm_plan_set_threads(p, 1);
    double ms = time_sum(p, v, s, reps);
    printf("{\"bench\":\"shape_matching\",\"scene\":\"%s_scaling\",\"particles\":%d,\"region_width\":%d,"
           "\"summation\":\"%s\",\"path\":\"%s\",\"threads\":1,\"values\":%d,\"ms_per_step\":%.3f,"
           "\"region_size\":%.1f,\"ops_per_region\":%.2f,\"ns_per_region\":%.1f}\n",
           scene, pbd_sm_plan_particle_count(p), w, method_name(pbd_sm_plan_method(p)), pbd_simd_path(), K, ms,
           (double)members / R, (double)pbd_sm_plan_cost(p) / R, ms * 1e6 / R);
    fflush(stdout);
}

/* The same block as an adaptive octree (survey 4.3.2): level-0 cells
   within 2 cells of the surface, level 1 and 2 cells inside. Returns the
   leaf count. */
static int adaptive_block(int *oc, int x, int y, int z, int l, int n) {
    int s = 1 << l, lo[3] = {x * s, y * s, z * s}, hi[3] = {(x + 1) * s, (y + 1) * s, (z + 1) * s};
    int dims[3] = {NX, NY, NZ}, inside = 1;
    for (int a = 0; a < 3; ++a) {
        if (lo[a] >= dims[a]) return n; /* outside the block */
        if (hi[a] > dims[a] - 2 || lo[a] < 2) inside = 0;
    }
    if (l == 0 || inside) {
        oc[4 * n] = x;
        oc[4 * n + 1] = y;
        oc[4 * n + 2] = z;
        oc[4 * n + 3] = l;
        return n + 1;
    }
    for (int c = 0; c < 8; ++c)
        n = adaptive_block(oc, 2 * x + (c & 1), 2 * y + ((c >> 1) & 1), 2 * z + (c >> 2), l - 1, n);
    return n;
}

/* ---- the full step: a lattice body in a world (pbd_sm.h "shape matching") */
typedef struct world_ctx {
    const int *cells;
    int n, w;
    pbd_sm_summation method;
    pbd_sm_mode mode; /* RIGID, or LINEAR with its volume term on or off */
    float volume;
} world_ctx;

static pbd_sm_sum_plan *make_plan(const world_ctx *c) {
    pbd_sm_sum_plan *p = NULL, *q = NULL;
    if (c->method == PBD_SM_SUM_OCTREE) {
        int *oc = (int *)malloc(sizeof(int) * 4 * (size_t)c->n);
        for (int i = 0; i < c->n; ++i) {
            for (int a = 0; a < 3; ++a) oc[4 * i + a] = c->cells[3 * i + a];
            oc[4 * i + 3] = 0;
        }
        if (pbd_sm_plan_octree(c->n, oc, NULL, c->w, &p) != PBD_OK) p = NULL;
        free(oc);
        return p;
    }
    if (pbd_sm_plan_lattice(c->n, c->cells, c->w, &p) != PBD_OK) return NULL;
    if (c->method == PBD_SM_SUM_LATTICE) return p;
    q = naive_twin(p);
    pbd_sm_plan_destroy(p);
    return q;
}

/* A 0.1 m lattice block resting on a ground plane, regions of half-width w. */
static pbd_world *make_world(const world_ctx *c, int simd, int threads) {
    pbd_world_desc d = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float *x = (float *)malloc(sizeof(float) * 3 * (size_t)c->n);
    for (int i = 0; i < c->n; ++i)
        for (int a = 0; a < 3; ++a) x[3 * i + a] = 0.1f * (float)c->cells[3 * i + a] + (a == 1 ? 0.05f : 0.0f);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = c->n;
    pd.radius = 0.05f;
    pbd_range r;
    pbd_result res = pbd_add_particles(w, &pd, &r);
    free(x);
    int *idx = (int *)malloc(sizeof(int) * (size_t)c->n);
    for (int i = 0; i < c->n; ++i) idx[i] = r.first + i;
    pbd_sm_body_desc bd = pbd_sm_body_desc_default();
    bd.particles = idx;
    bd.particle_count = c->n;
    bd.plan = make_plan(c);
    bd.owns_plan = 1;
    bd.mode = c->mode;
    bd.volume = c->volume;
    if (bd.plan) {
        /* the body sums from one thread of the world's team: the plan's own
           team (outside a world's parallel region) gets the world's count */
        pbd_sm_plan_set_simd(bd.plan, simd);
        pbd_sm_plan_set_threads(bd.plan, threads);
    }
    if (res == PBD_OK && bd.plan) res = pbd_sm_add_body(w, &bd, NULL);
    else res = PBD_ERROR_INVALID_ARGUMENT;
    if (res != PBD_OK) pbd_sm_plan_destroy(bd.plan);
    free(idx);
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (res == PBD_OK) res = pbd_add_collider_plane(w, o, up, 0.5f, NULL);
    if (res != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

static pbd_world *make_gpu_world(void *ctx) { return make_world((const world_ctx *)ctx, 1, 1); }

static const char *mode_name(pbd_sm_mode m) {
    return m == PBD_SM_RIGID ? "rigid" : m == PBD_SM_LINEAR ? "linear" : "quadratic";
}

static void world_scene(const world_ctx *c, int steps) {
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    for (int k = 0; k < 3; ++k) {
        if (cfg[k].threads > 1 && pbd_max_threads() == 1) continue;
        pbd_world *w = make_world(c, cfg[k].simd, cfg[k].threads);
        if (!w) {
            fprintf(stderr, "shape_matching: could not build the world\n");
            exit(1);
        }
        pbd_world_set_simd(w, cfg[k].simd);
        pbd_world_set_threads(w, cfg[k].threads);
        double ms = bench_ms_per_step(w, steps);
        int substeps = 0, iterations = 0;
        pbd_world_get_solver(w, NULL, &substeps, &iterations);
        printf("{\"bench\":\"shape_matching\",\"scene\":\"lattice%d_world\",\"particles\":%d,\"region_width\":%d,"
               "\"summation\":\"%s\",\"mode\":\"%s\",\"volume\":%g,\"path\":\"%s\",\"threads\":%d,"
               "\"substeps\":%d,\"iterations\":%d,\"ms_per_step\":%.3f,\"particles_per_s\":%.4g}\n",
               c->n, pbd_world_particle_count(w), c->w, method_name(c->method), mode_name(c->mode), c->volume,
               cfg[k].simd ? pbd_simd_path() : "scalar", cfg[k].threads, substeps, iterations, ms,
               pbd_world_particle_count(w) / (ms * 1e-3));
        fflush(stdout);
        pbd_world_destroy(w);
    }
    /* the same body on the GPU (pbd_cuda.cu), where there is one */
    char scene[64], keys[128];
    snprintf(scene, sizeof scene, "lattice%d_world", c->n);
    snprintf(keys, sizeof keys, ",\"region_width\":%d,\"summation\":\"%s\",\"mode\":\"%s\",\"volume\":%g", c->w,
             method_name(c->method), mode_name(c->mode), c->volume);
    bench_cuda_keys = keys;
    bench_cuda_scene("shape_matching", scene, make_gpu_world, (void *)c, 1, steps);
    bench_cuda_keys = "";
}

int main(int argc, char **argv) {
    int quick = 0, world = 1;
    for (int a = 1; a < argc; ++a) {
        if (strcmp(argv[a], "--quick") == 0) quick = 1;
        if (strcmp(argv[a], "--no-world") == 0) world = 0;
        if (strcmp(argv[a], "--only") == 0 && a + 1 < argc) only = argv[++a];
        if (strcmp(argv[a], "--width") == 0 && a + 1 < argc) only_w = atoi(argv[++a]);
        if (strcmp(argv[a], "--summation") == 0 && a + 1 < argc) only_sum = argv[++a];
    }
    int n = NX * NY * NZ;
    int *cells = (int *)malloc(sizeof(int) * 3 * (size_t)n), *oc = (int *)malloc(sizeof(int) * 4 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        cells[3 * i] = oc[4 * i] = i % NX;
        cells[3 * i + 1] = oc[4 * i + 1] = (i / NX) % NY;
        cells[3 * i + 2] = oc[4 * i + 2] = i / (NX * NY);
        oc[4 * i + 3] = 0;
    }
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, vv[3] = {0, 1, 0};
    pbd_mesh m;
    if (pbd_mesh_grid(GX, GY, o, u, vv, &m) != PBD_OK) return 1;
    int nmax = n > m.vertex_count ? n : m.vertex_count;
    /* m x and m x xbar^T of a slightly deformed configuration */
    double *v = (double *)malloc(sizeof(double) * (size_t)nmax * K),
           *s = (double *)malloc(sizeof(double) * (size_t)nmax * K);
    unsigned st = 1;
    for (int i = 0; i < nmax; ++i) {
        double xb[3] = {(double)(i % NX), (double)((i / NX) % NY), (double)(i / (NX * NY))}, x[3];
        for (int a = 0; a < 3; ++a) x[a] = xb[a] + 0.1 * (rand01(&st) - 0.5);
        for (int a = 0; a < 3; ++a) v[(size_t)i * K + a] = x[a];
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) v[(size_t)i * K + 3 + 3 * a + b] = x[a] * xb[b];
    }
    int reps = quick ? 1 : 3;
    for (int w = 1; w <= 3 && (want("lattice20000") || want("grid_surface20022")); ++w) {
        pbd_sm_sum_plan *lat = NULL, *oct = NULL, *pth = NULL;
        if (pbd_sm_plan_lattice(n, cells, w, &lat) != PBD_OK || pbd_sm_plan_octree(n, oc, NULL, w, &oct) != PBD_OK ||
            pbd_sm_plan_paths(m.vertex_count, m.positions, m.triangle_count, m.triangles, w, 0, &pth) != PBD_OK) {
            fprintf(stderr, "shape_matching: could not build the plans for w = %d\n", w);
            return 1;
        }
        pbd_sm_sum_plan *nl = naive_twin(lat), *np = naive_twin(pth);
        if (!nl || !np) return 1;
        measure("lattice20000", nl, w, v, s, reps);
        measure("lattice20000", lat, w, v, s, reps);
        measure("lattice20000", oct, w, v, s, reps);
        measure("grid_surface20022", np, w, v, s, reps);
        measure("grid_surface20022", pth, w, v, s, reps);
        pbd_sm_plan_destroy(nl);
        pbd_sm_plan_destroy(np);
        pbd_sm_plan_destroy(lat);
        pbd_sm_plan_destroy(oct);
        pbd_sm_plan_destroy(pth);
    }
    /* the adaptive octree of the same block: fewer particles, regions of w
       own cells (a coarse particle's region spans more of the block) */
    if (want("block_adaptive_octree")) {
        int *ad = (int *)malloc(sizeof(int) * 4 * (size_t)n), na = 0;
        for (int z = 0; z < (NZ + 3) / 4; ++z)
            for (int y = 0; y < (NY + 3) / 4; ++y)
                for (int x = 0; x < (NX + 3) / 4; ++x) na = adaptive_block(ad, x, y, z, 2, na);
        for (int w = 1; w <= 3; ++w) {
            pbd_sm_sum_plan *p = NULL;
            if (pbd_sm_plan_octree(na, ad, NULL, w, &p) != PBD_OK) return 1;
            pbd_sm_sum_plan *q = naive_twin(p);
            if (!q) return 1;
            measure("block_adaptive_octree", q, w, v, s, reps);
            measure("block_adaptive_octree", p, w, v, s, reps);
            pbd_sm_plan_destroy(p);
            pbd_sm_plan_destroy(q);
        }
        free(ad);
    }
    /* the full step: world + shape-matching body, each summation */
    for (int w = 1; w <= 3 && world && want("lattice20000_world"); ++w) {
        const pbd_sm_summation ms[3] = {PBD_SM_SUM_NAIVE, PBD_SM_SUM_LATTICE, PBD_SM_SUM_OCTREE};
        for (int q = 0; q < 3; ++q) {
            if (only_w && w != only_w) continue;
            if (only_sum && strcmp(only_sum, method_name(ms[q])) != 0) continue;
            world_ctx c = {cells, n, w, ms[q], PBD_SM_RIGID, 0.0f};
            world_scene(&c, 1);
        }
    }
    /* the same block as an elastic (LINEAR) body, lattice sums of w = 1,
       with the volume term (its default) and without: what keeping the
       regions' volume costs a step */
    for (int vol = 1; vol >= 0 && world && want("lattice20000_world") && (!only_w || only_w == 1); --vol) {
        if (only_sum && strcmp(only_sum, "lattice") != 0) continue;
        world_ctx c = {cells, n, 1, PBD_SM_SUM_LATTICE, PBD_SM_LINEAR, (float)vol};
        world_scene(&c, 1);
    }
    /* does the cost per region grow with the region size? */
    for (int w = 1; w <= (quick ? 3 : 6) && (want("lattice20000_scaling") || want("grid_surface20022_scaling")); ++w) {
        pbd_sm_sum_plan *p[3] = {NULL, NULL, NULL};
        pbd_sm_plan_lattice(n, cells, w, &p[0]);
        pbd_sm_plan_octree(n, oc, NULL, w, &p[1]);
        pbd_sm_plan_paths(m.vertex_count, m.positions, m.triangle_count, m.triangles, w, 0, &p[2]);
        for (int q = 0; q < 3; ++q)
            if (p[q]) scaling_line(q < 2 ? "lattice20000" : "grid_surface20022", p[q], w, v, s, reps);
        for (int q = 0; q < 3; ++q) pbd_sm_plan_destroy(p[q]);
    }
    pbd_mesh_free(&m);
    free(cells);
    free(oc);
    free(v);
    free(s);
    return 0;
}
