/* bench/cloth_defaults.c - how much a pinned cloth stretches with the
   library's defaults, and what the defaults cost.

   Strain: a 1 m cloth of N x N vertices (pbd_mesh_grid, horizontal),
   pinned at its two top corners, every setting at its default, stepped at
   1/60 s. The strain of an edge is |len| / rest - 1 over the stretch
   group's edges; `fall_max` is the worst edge over the first 2 s (the
   fall and the first swings), `rest_max` the worst over 5..6 s (hanging
   still, or still swinging when undamped), `rest_mean` the mean over the
   edges at 6 s. Scenes: `hanging_no_tethers` (the behaviour before issue
   16: no tethers, undamped), `hanging_defaults`, `hanging_undamped` (the
   defaults but the cloth's damping 0), `hanging_table` (--table: the
   defaults but substeps x iterations, with the cloth's own substep rule
   off: pbd_cloth_desc.gravity_cfl = 0). Keys: `bench`, `scene`, `n`,
   `substeps` (what a step takes: pbd_world_step_substeps, which the
   cloth's gravity_cfl may raise above the world's 4), `iterations`,
   `tethers` (the automatic long range
   attachments on or off), `damping` (the cloth's), `fall_max`,
   `rest_max`, `rest_mean`.

   Cost: the README's hello-world cloth (32 x 32 onto a sphere) and the
   showcase's scene (examples/showcase.c) with the old behaviour against the
   new defaults, in the same run: the median of BENCH_RUNS timed runs each,
   repeated COST_REPEATS times, and the median of the ratios.

   Build and run: make bench BENCH=cloth_defaults
   ./build/<config>/bench/cloth_defaults --table        the strain for 1..16 substeps x 1..8
                                                         iterations (32 x 32 with and without
                                                         tethers, 100 x 100 with; minutes)
   ./build/<config>/bench/cloth_defaults --candidates   the hello-world cost of other world
                                                         defaults (8 x 2, 16 x 1, 8 x 4)
   ./build/<config>/bench/cloth_defaults --balloon      a default balloon at rest on the ground:
                                                         skin strain and speed over 8..10 s at
                                                         60 and 30 Hz, more substeps, other drags,
                                                         an overpressure
   ./build/<config>/bench/cloth_defaults --wind         the 32 x 32 defaults under a wind
                                                         (0, 10, 20, 40 m/s^2 across the cloth,
                                                         an acceleration field), and with the
                                                         world's substeps raised for it */
#include "bench.h"

typedef struct strain_run {
    int n, substeps, iterations, tethers;
    float damping;
} strain_run;
typedef struct strain_out {
    double fall_max, rest_max, rest_mean;
    int substeps;
} strain_out;

/* The cloth's edges (each once) with their rest lengths. */
typedef struct edges {
    int count, *idx;
    float *rest;
} edges;

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
        e.rest[e.count++] =
            sqrtf((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]));
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

static pbd_world *hanging_cloth(int n, int substeps, int iterations, int tethers, float damping, edges *e) {
    pbd_world_desc d = bench_desc();
    if (substeps) d.substeps = substeps;
    if (iterations) d.iterations = iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    if (pbd_mesh_grid(n, n, o, u, v, &m) != PBD_OK) return NULL;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions;
    cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    if (tethers >= 0) cd.tethers = tethers;
    if (damping >= 0) cd.damping = damping;
    if (substeps) cd.gravity_cfl = 0; /* the table: exactly these substeps, not the cloth's own rule */
    pbd_result r = pbd_add_cloth(w, &cd, NULL);
    *e = mesh_edges(&m);
    pbd_mesh_free(&m);
    if (r != PBD_OK) return NULL;
    pbd_particle_pin(w, 0);
    pbd_particle_pin(w, n - 1);
    return w;
}

/* --wind: a uniform acceleration along +z (across the hanging cloth), m/s^2,
   through pbd_world_set_acceleration_field (what a user's wind is). */
static float wind_accel = 0;
static void wind_field(void *user, int particle, const float *x, const float *v, double time, float *out) {
    (void)user, (void)particle, (void)x, (void)v, (void)time;
    out[0] = out[1] = 0;
    out[2] = wind_accel;
}

/* substeps / iterations 0, tethers and damping -1: the defaults. */
static strain_out measure_strain(strain_run s) {
    strain_out out = {0, 0, 0, 0};
    edges e;
    pbd_world *w = hanging_cloth(s.n, s.substeps, s.iterations, s.tethers, s.damping, &e);
    if (!w) {
        fprintf(stderr, "cloth_defaults: could not build the cloth\n");
        exit(1);
    }
    if (wind_accel != 0) pbd_world_set_acceleration_field(w, wind_field, NULL);
    out.substeps = pbd_world_step_substeps(w, 1.0f / 60.0f);
    for (int step = 1; step <= 360; ++step) {
        pbd_world_step(w, 1.0f / 60.0f);
        double mean = 0, worst = worst_strain(w, &e, &mean);
        if (step <= 120 && worst > out.fall_max) out.fall_max = worst;
        if (step >= 300 && worst > out.rest_max) out.rest_max = worst;
        if (step == 360) out.rest_mean = mean;
        if (!(worst < 1e6)) {
            out.fall_max = out.rest_max = out.rest_mean = 1e6;
            break;
        }
    }
    pbd_world_destroy(w);
    free(e.idx);
    free(e.rest);
    return out;
}

static void print_strain(const char *scene, strain_run s) {
    strain_out o = measure_strain(s);
    pbd_world_desc d = bench_desc();
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    (void)d;
    printf("{\"bench\":\"cloth_defaults\",\"scene\":\"%s\",\"n\":%d,\"substeps\":%d,\"iterations\":%d,"
           "\"tethers\":%d,\"damping\":%g,\"fall_max\":%.4f,\"rest_max\":%.4f,\"rest_mean\":%.5f}\n",
           scene, s.n, o.substeps, s.iterations ? s.iterations : d.iterations, s.tethers >= 0 ? s.tethers : cd.tethers,
           (double)(s.damping >= 0 ? s.damping : cd.damping), o.fall_max, o.rest_max, o.rest_mean);
    fflush(stdout);
}

/* ---- cost ----------------------------------------------------------------- */

/* The behaviour before issue 16: 4 substeps x 4 iterations, no automatic
   tethers, the cloth undamped. old = 0: the current defaults. */
typedef struct cost_cfg {
    int old, substeps, iterations;
} cost_cfg;

static pbd_world *cost_world(const cost_cfg *c, int substeps, int iterations) {
    pbd_world_desc d = bench_desc();
    if (c->old) {
        d.substeps = 4;
        d.iterations = 4;
    }
    if (c->substeps) d.substeps = c->substeps;
    if (c->iterations) d.iterations = c->iterations;
    if (substeps) {
        d.substeps = substeps;
        d.iterations = iterations;
    } /* set by the scene itself */
    pbd_world *w = NULL;
    return pbd_world_create(&d, &w) == PBD_OK ? w : NULL;
}

static int add_grid_cloth(pbd_world *w, int n, const float *o, const float *u, const float *v, pbd_cloth_desc *cd,
                          int old) {
    pbd_mesh m;
    if (pbd_mesh_grid(n, n, o, u, v, &m) != PBD_OK) return 0;
    cd->positions = m.positions;
    cd->vertex_count = m.vertex_count;
    cd->triangles = m.triangles;
    cd->triangle_count = m.triangle_count;
    if (old) cd->tethers = 0;
    int ok = pbd_add_cloth(w, cd, NULL) == PBD_OK;
    pbd_mesh_free(&m);
    return ok;
}

/* README "Usage": a 1 m cloth of 32 x 32 vertices dropped on a sphere. */
static pbd_world *make_hello(void *ctx) {
    const cost_cfg *c = (const cost_cfg *)ctx;
    pbd_world *w = cost_world(c, 0, 0);
    if (!w) return NULL;
    float origin[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1}, centre[3] = {0, 0.5f, 0};
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    if (c->old) cd.damping = 0.0f; /* the default before issue 16 */
    if (!add_grid_cloth(w, 32, origin, u, v, &cd, c->old)) return NULL;
    pbd_add_collider_sphere(w, centre, 0.3f, 0.5f, NULL);
    return w;
}

/* examples/showcase.c's scene (8 substeps x 4 iterations set by the
   example): a 60 x 60 cloth over a sphere, a soft box, a balloon. */
static pbd_world *make_showcase(void *ctx) {
    const cost_cfg *c = (const cost_cfg *)ctx;
    pbd_world *w = cost_world(c, 8, 4);
    if (!w) return NULL;
    float point[3] = {0, 0, 0}, normal[3] = {0, 1, 0}, sc[3] = {-1.6f, 0.45f, 0.0f};
    pbd_add_collider_plane(w, point, normal, 0.6f, NULL);
    pbd_add_collider_sphere(w, sc, 0.45f, 0.3f, NULL);
    float o[3] = {-2.6f, 1.2f, -1.0f}, u[3] = {2, 0, 0}, v[3] = {0, 0, 2};
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.bending = PBD_BENDING_ISOMETRIC;
    cd.bending_compliance = 1.0f;
    cd.thickness = 0.012f;
    cd.damping = 0.5f;
    if (!add_grid_cloth(w, 60, o, u, v, &cd, c->old)) return NULL;
    float lo[3] = {0.05f, 1.0f, -0.25f}, hi[3] = {0.55f, 1.5f, 0.25f};
    pbd_mesh box;
    if (pbd_mesh_tet_box(5, 5, 5, lo, hi, &box) != PBD_OK) return NULL;
    pbd_softbody_desc s = pbd_softbody_desc_default();
    s.positions = box.positions;
    s.vertex_count = box.vertex_count;
    s.tets = box.tets;
    s.tet_count = box.tet_count;
    s.density = 200.0f;
    s.edge_compliance = 1e-4f;
    s.volume_compliance = 0.0f;
    s.damping = 1.0f;
    int ok = pbd_add_softbody(w, &s, NULL) == PBD_OK;
    pbd_mesh_free(&box);
    float bc[3] = {1.75f, 0.9f, 0.0f};
    pbd_mesh ball;
    if (!ok || pbd_mesh_sphere(3, bc, 0.3f, &ball) != PBD_OK) return NULL;
    pbd_balloon_desc b = pbd_balloon_desc_default();
    b.cloth.positions = ball.positions;
    b.cloth.vertex_count = ball.vertex_count;
    b.cloth.triangles = ball.triangles;
    b.cloth.triangle_count = ball.triangle_count;
    b.cloth.stretch_compliance = 1e-2f;
    b.cloth.bending_compliance = 1.0f;
    b.cloth.damping = 0.5f;
    b.pressure = 1.3f;
    ok = pbd_add_balloon(w, &b, NULL) == PBD_OK;
    pbd_mesh_free(&ball);
    return ok ? w : NULL;
}

enum { COST_REPEATS = 5 };

/* ms per step of a fresh world over `steps` steps (its first second). */
static double cost_once(bench_make_fn make, cost_cfg *c, int steps) {
    pbd_world *w = make(c);
    if (!w) {
        fprintf(stderr, "cloth_defaults: could not build a cost scene\n");
        exit(1);
    }
    pbd_world_set_threads(w, 1);
    double t0 = bench_now();
    for (int s = 0; s < steps; ++s) pbd_world_step(w, 1.0f / 60.0f);
    double ms = (bench_now() - t0) * 1e3 / steps;
    pbd_world_destroy(w);
    return ms;
}

/* Old against new (or against a candidate substeps x iterations),
   alternating, COST_REPEATS times; medians and the median ratio. */
static void print_cost(const char *scene, bench_make_fn make, int substeps, int iterations, int steps) {
    double old_ms[COST_REPEATS], new_ms[COST_REPEATS], ratio[COST_REPEATS];
    cost_cfg o = {1, 0, 0}, n = {0, substeps, iterations};
    for (int r = 0; r < COST_REPEATS; ++r) {
        old_ms[r] = cost_once(make, &o, steps);
        new_ms[r] = cost_once(make, &n, steps);
        ratio[r] = new_ms[r] / old_ms[r];
    }
    qsort(old_ms, COST_REPEATS, sizeof(double), bench_cmp_double);
    qsort(new_ms, COST_REPEATS, sizeof(double), bench_cmp_double);
    qsort(ratio, COST_REPEATS, sizeof(double), bench_cmp_double);
    pbd_world *w = make(&n);
    int subs = 0, iters = 0;
    pbd_world_get_solver(w, NULL, &subs, &iters);
    pbd_world_destroy(w);
    printf("{\"bench\":\"cloth_defaults\",\"scene\":\"%s\",\"substeps\":%d,\"iterations\":%d,\"path\":\"%s\","
           "\"threads\":1,"
           "\"old_ms_per_step\":%.3f,\"ms_per_step\":%.3f,\"ratio\":%.3f}\n",
           scene, subs, iters, pbd_simd_path(), old_ms[COST_REPEATS / 2], new_ms[COST_REPEATS / 2],
           ratio[COST_REPEATS / 2]);
    fflush(stdout);
}

/* A default balloon at rest (--balloon): an icosphere of radius 0.3 m
   (pbd_mesh_sphere, 2 subdivisions), pbd_balloon_desc_default but for
   drag (< 0: the default), pressure and stretch compliance, let down
   from 5 cm onto a plane (friction 0.5), hz steps a second for 10 s: over
   8..10 s the worst skin edge's strain and the largest root mean square
   of the vertices' speeds (rolling and rocking included, which the mean
   velocity misses), the height at 10 s, and the time after which that
   speed stays under 1 cm/s ("settled_s"; 10: not by then). */
static void balloon_rest(int hz, int substeps, float drag, float pressure, float stretch_compliance) {
    pbd_world_desc wd = bench_desc();
    if (substeps > 0) wd.substeps = substeps;
    pbd_world *w = NULL;
    pbd_mesh m;
    float p0[3] = {0, 0, 0}, n0[3] = {0, 1, 0}, c[3] = {0, 0.35f, 0};
    if (pbd_world_create(&wd, &w) != PBD_OK || pbd_mesh_sphere(2, c, 0.3f, &m) != PBD_OK) return;
    pbd_add_collider_plane(w, p0, n0, 0.5f, NULL);
    pbd_balloon_desc b = pbd_balloon_desc_default();
    b.cloth.positions = m.positions;
    b.cloth.vertex_count = m.vertex_count;
    b.cloth.triangles = m.triangles;
    b.cloth.triangle_count = m.triangle_count;
    b.cloth.stretch_compliance = stretch_compliance;
    b.pressure = pressure;
    if (drag >= 0) b.drag = drag;
    pbd_object ob;
    pbd_object_parts parts;
    if (pbd_add_balloon(w, &b, &ob) != PBD_OK || pbd_object_get_parts(w, ob, &parts) != PBD_OK) return;
    edges e = mesh_edges(&m);
    double worst = 0, speed = 0, height = 0, settled = 0;
    for (int k = 1; k <= 10 * hz; ++k) {
        pbd_world_step(w, 1.0f / (float)hz);
        const float *x = pbd_world_positions(w) + 4 * parts.particles.first;
        const float *v = pbd_world_velocities(w) + 4 * parts.particles.first;
        double v2 = 0, lo = 1e30, hi = -1e30;
        for (int i = 0; i < m.vertex_count; ++i) {
            for (int a = 0; a < 3; ++a) v2 += (double)v[4 * i + a] * v[4 * i + a] / m.vertex_count;
            lo = x[4 * i + 1] < lo ? x[4 * i + 1] : lo;
            hi = x[4 * i + 1] > hi ? x[4 * i + 1] : hi;
        }
        double sp = sqrt(v2);
        if (sp > 0.01) settled = (double)k / hz;
        if (k < 8 * hz) continue;
        speed = sp > speed ? sp : speed;
        height = hi - lo;
        double strain = worst_strain(w, &e, NULL); /* the balloon is the world's only object: particle = vertex */
        worst = strain > worst ? strain : worst;
    }
    printf("{\"bench\":\"cloth_defaults\",\"scene\":\"balloon_rest\",\"hz\":%d,\"substeps\":%d,"
           "\"drag\":%g,\"pressure\":%g,\"stretch_compliance\":%g,\"worst_edge_8_10\":%.4f,"
           "\"rms_speed_8_10\":%.4f,\"height_10s\":%.3f,\"settled_s\":%.2f}\n",
           hz, pbd_world_step_substeps(w, 1.0f / (float)hz), (double)b.drag, (double)pressure,
           (double)stretch_compliance, worst, speed, height, settled);
    fflush(stdout);
    free(e.idx);
    free(e.rest);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--balloon") == 0) {
        balloon_rest(60, 0, -1, 1, 0); /* the defaults */
        balloon_rest(30, 0, -1, 1, 0);
        balloon_rest(30, 8, -1, 1, 0);
        balloon_rest(60, 16, -1, 1, 0);
        balloon_rest(60, 0, 0, 1, 0); /* without drag */
        balloon_rest(60, 16, 0, 1, 0);
        balloon_rest(60, 0, 0.3f, 1, 0);
        balloon_rest(60, 0, -1, 1.5f, 0); /* an overpressure: inextensible skin, then a stretchy one */
        balloon_rest(60, 16, -1, 1.5f, 0);
        balloon_rest(60, 0, -1, 1.5f, 1e-2f);
        balloon_rest(60, 16, -1, 1.5f, 1e-2f);
        return 0;
    }
    int table = argc > 1 && strcmp(argv[1], "--table") == 0;
    if (table) {
        static const int SUB[] = {1, 2, 4, 8, 16}, ITER[] = {1, 2, 4, 8};
        for (int n = 32; n <= 100; n += 68)
            for (int t = n == 32 ? 0 : 1; t <= 1; ++t) /* 100 x 100 without tethers: see hanging_defaults */
                for (int a = 0; a < 5; ++a)
                    for (int b = 0; b < 4; ++b) {
                        strain_run s = {n, SUB[a], ITER[b], t, -1.0f};
                        print_strain("hanging_table", s);
                    }
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--wind") == 0) {
        /* the cloth's substep rule sees gravity, not the user's field: the
           defaults under wind, then the world's substeps raised to the
           rule's count for |g + wind| (ceil(S sqrt(|g + wind| / |g|))) */
        static const float WIND[] = {0, 10, 20, 40};
        for (int k = 0; k < 4; ++k) {
            wind_accel = WIND[k];
            strain_run now = {32, 0, 0, -1, -1.0f};
            strain_out o = measure_strain(now);
            double ratio = sqrt(sqrt(9.81 * 9.81 + (double)wind_accel * wind_accel) / 9.81);
            strain_run more = {32, (int)ceil(o.substeps * ratio - 1e-9), 0, -1, -1.0f};
            strain_out m = measure_strain(more);
            printf("{\"bench\":\"cloth_defaults\",\"scene\":\"hanging_wind\",\"n\":32,\"wind\":%g,"
                   "\"substeps\":%d,\"fall_max\":%.4f,\"rest_max\":%.4f,\"raised_substeps\":%d,"
                   "\"raised_fall_max\":%.4f,\"raised_rest_max\":%.4f}\n",
                   (double)wind_accel, o.substeps, o.fall_max, o.rest_max, more.substeps, m.fall_max, m.rest_max);
            fflush(stdout);
        }
        return 0;
    }
    int candidates = argc > 1 && strcmp(argv[1], "--candidates") == 0;
    if (!candidates) {
        for (int n = 32; n <= 100; n += 68) {
            strain_run before = {n, 0, 0, 0, 0.0f}, now = {n, 0, 0, -1, -1.0f}, undamped = {n, 0, 0, -1, 0.0f};
            print_strain("hanging_no_tethers", before); /* the behaviour before issue 16 */
            print_strain("hanging_defaults", now);
            print_strain("hanging_undamped", undamped); /* the tethers without the cloth's default damping */
        }
    }
    print_cost("cost_hello", make_hello, 0, 0, 60);
    print_cost("cost_showcase", make_showcase, 0, 0, 30);
    if (candidates) { /* world defaults that were not chosen */
        print_cost("cost_hello", make_hello, 8, 2, 60);
        print_cost("cost_hello", make_hello, 16, 1, 60);
        print_cost("cost_hello", make_hello, 8, 4, 60);
    }
    return 0;
}
