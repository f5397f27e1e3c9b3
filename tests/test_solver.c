/* tests/test_solver.c - the solver: XPBD compliance (analytic hanging mass,
   multipliers kept across iterations, iteration independence), the PBD
   stiffness correction of survey 3.3, recovery from random and collapsed
   states, momentum conservation of internal constraints and of global
   damping, point damping. */
#include "test.h"
#include <stdlib.h>

/* ---- helpers -------------------------------------------------------------- */

static pbd_world *solver_world(float gy, pbd_solver_mode mode, int substeps, int iterations) {
    pbd_world_desc d = pbd_world_desc_default();
    d.gravity[0] = 0.0f;
    d.gravity[1] = gy;
    d.gravity[2] = 0.0f;
    d.mode = mode;
    d.substeps = substeps;
    d.iterations = iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    return w;
}

static int all_finite(const pbd_world *w) {
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w);
    const float *v = pbd_world_velocities(w);
    for (int i = 0; i < 4 * n; ++i)
        if (!isfinite(x[i]) || !isfinite(v[i])) return 0;
    return 1;
}

/* Unique edges of a triangle mesh (a < b), sorted. Returns the count. */
static int solver_cmp_edge(const void *pa, const void *pb) {
    const int *a = (const int *)pa, *b = (const int *)pb;
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    if (a[1] != b[1]) return a[1] < b[1] ? -1 : 1;
    return 0;
}
static int mesh_edges(const pbd_mesh *m, int **out) {
    int *e = (int *)malloc(sizeof(int) * 6 * (size_t)m->triangle_count);
    for (int t = 0; t < m->triangle_count; ++t)
        for (int k = 0; k < 3; ++k) {
            int a = m->triangles[3 * t + k], b = m->triangles[3 * t + (k + 1) % 3];
            e[6 * t + 2 * k] = a < b ? a : b;
            e[6 * t + 2 * k + 1] = a < b ? b : a;
        }
    qsort(e, (size_t)3 * m->triangle_count, 2 * sizeof(int), solver_cmp_edge);
    int n = 0;
    for (int i = 0; i < 3 * m->triangle_count; ++i)
        if (n == 0 || e[2 * i] != e[2 * (n - 1)] || e[2 * i + 1] != e[2 * (n - 1) + 1]) {
            e[2 * n] = e[2 * i];
            e[2 * n + 1] = e[2 * i + 1];
            n++;
        }
    *out = e;
    return n;
}

static double dist3(const float *a, const float *b) {
    double dx = (double)a[0] - b[0], dy = (double)a[1] - b[1], dz = (double)a[2] - b[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* Mean |len - rest| / rest over the mesh edges; rest from mesh positions,
   current lengths from the world (vertex i is particle first + perm[i]). */
static double mean_edge_strain(const pbd_world *w, int first, const int *perm, const pbd_mesh *m, const int *edges,
                               int edge_count) {
    const float *x = pbd_world_positions(w);
    double s = 0;
    for (int e = 0; e < edge_count; ++e) {
        int a = edges[2 * e], b = edges[2 * e + 1];
        double rest = dist3(m->positions + 3 * a, m->positions + 3 * b);
        double len = dist3(x + 4 * (first + perm[a]), x + 4 * (first + perm[b]));
        s += fabs(len - rest) / rest;
    }
    return s / edge_count;
}

/* ---- XPBD: the hanging mass ----------------------------------------------- */

/* A particle of mass m hanging 1 m below a pinned one by a distance
   constraint of compliance alpha settles at extension m g alpha (XPBD's
   compliance is the inverse stiffness, Macklin et al. 2016). Returns the
   extension after 6 s with point damping, or -1 on a setup failure. */
static double hanging_extension(float mass, float alpha, int substeps, int iterations, double *speed_out) {
    pbd_world *w = solver_world(-9.81f, PBD_SOLVER_XPBD, substeps, iterations);
    if (!w) return -1;
    float pos[6] = {0, 0, 0, 0, -1, 0};
    float masses[2] = {0, 0};
    masses[1] = mass;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.masses = masses;
    pd.count = 2;
    pbd_range r;
    int ok = pbd_add_particles(w, &pd, &r) == PBD_OK;
    int idx[2];
    idx[0] = r.first;
    idx[1] = r.first + 1;
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = idx;
    cd.compliance = alpha;
    pbd_group g;
    ok = ok && pbd_add_constraints(w, &cd, &g) == PBD_OK;
    ok = ok && pbd_world_set_point_damping(w, 4.0f) == PBD_OK;
    for (int s = 0; ok && s < 360; ++s) ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK;
    double ext = -1;
    if (ok && all_finite(w)) {
        const float *x = pbd_world_positions(w);
        const float *v = pbd_world_velocities(w);
        ext = dist3(x + 4 * idx[0], x + 4 * idx[1]) - 1.0;
        *speed_out = sqrt((double)v[4 * idx[1]] * v[4 * idx[1]] + (double)v[4 * idx[1] + 1] * v[4 * idx[1] + 1] +
                          (double)v[4 * idx[1] + 2] * v[4 * idx[1] + 2]);
    }
    pbd_world_destroy(w);
    return ext;
}

TEST(solver_xpbd_hanging_mass_extension) {
    /* m = 1 kg, alpha = 1e-3 m/N: 9.81 mm; m = 2 kg, alpha = 5e-4: the same. */
    double speed = 0;
    double e1 = hanging_extension(1.0f, 1e-3f, 4, 4, &speed);
    CHECK_NEAR(e1, 9.81e-3, 0.01 * 9.81e-3);
    CHECK_MSG(speed < 1e-3, "not settled: speed %g", speed);
    double e2 = hanging_extension(2.0f, 5e-4f, 4, 4, &speed);
    CHECK_NEAR(e2, 9.81e-3, 0.01 * 9.81e-3);
    double e3 = hanging_extension(0.5f, 4e-3f, 4, 4, &speed);
    printf("    hanging mass extension: %.6g, %.6g m (want 9.81e-3), %.6g m (want 1.962e-2)\n", e1, e2, e3);
    CHECK_NEAR(e3, 0.5 * 9.81 * 4e-3, 0.01 * 0.5 * 9.81 * 4e-3);
}

/* The multipliers must be kept across the iterations of a substep: with a
   reset per iteration, 10 iterations would make the constraint far stiffer
   than 1 (the remaining error shrinks by alpha~/(w + alpha~) per extra
   iteration, and the equilibrium moves from g*alpha to about 1/5 of it here).
   XPBD's stiffness also does not depend on the substep count. */
TEST(solver_xpbd_iteration_and_substep_independent_equilibrium) {
    double speed = 0;
    double want = 9.81e-3;
    double e_it1 = hanging_extension(1.0f, 1e-3f, 4, 1, &speed);
    double e_it10 = hanging_extension(1.0f, 1e-3f, 4, 10, &speed);
    double e_sub1 = hanging_extension(1.0f, 1e-3f, 1, 4, &speed);
    double e_sub16 = hanging_extension(1.0f, 1e-3f, 16, 4, &speed);
    printf("    extension: 1 iteration %.6g, 10 iterations %.6g, 1 substep %.6g, 16 substeps %.6g "
           "(want 9.81e-3)\n",
           e_it1, e_it10, e_sub1, e_sub16);
    CHECK_NEAR(e_it1, want, 0.01 * want);
    CHECK_NEAR(e_it10, want, 0.01 * want);
    CHECK_NEAR(e_it10, e_it1, 0.002 * want);
    CHECK_NEAR(e_sub1, want, 0.01 * want);
    CHECK_NEAR(e_sub16, want, 0.01 * want);
}

/* ---- iteration (in)dependence of a hanging cloth --------------------------- */

/* A 1 m x 1 m cloth (12x12 vertices) hanging in the x-y plane from its pinned
   top row for 2 s with point damping (so that no oscillation phase enters
   the comparison). Returns the mean strain of its edges, -1 on failure. */
static double hanging_cloth_strain(pbd_solver_mode mode, int iterations, int correction, float compliance,
                                   float stiffness) {
    const int n = 12;
    pbd_world *w = solver_world(-9.81f, mode, 4, iterations);
    if (!w) return -1;
    pbd_mesh m;
    float o[3] = {-0.5f, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, -1, 0};
    int ok = pbd_mesh_grid(n, n, o, u, v, &m) == PBD_OK;
    if (!ok) {
        pbd_world_destroy(w);
        return -1;
    }
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    c.stretch_compliance = compliance;
    c.stretch_stiffness = stiffness;
    c.bending = PBD_BENDING_NONE;
    c.tethers = 0; /* the solver's own convergence, which tethers would hide */
    int *perm = (int *)malloc(sizeof(int) * m.vertex_count);
    c.permutation = perm;
    pbd_object cloth;
    ok = pbd_add_cloth(w, &c, &cloth) == PBD_OK;
    const int first = pbdt_parts(w, cloth).particles.first;
    for (int i = 0; ok && i < n; ++i) ok = pbd_particle_pin(w, first + perm[i]) == PBD_OK;
    ok = ok && pbd_world_set_stiffness_correction(w, correction) == PBD_OK;
    ok = ok && pbd_world_set_point_damping(w, 2.0f) == PBD_OK;
    for (int s = 0; ok && s < 120; ++s) ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK;
    double strain = -1;
    if (ok && all_finite(w)) {
        int *edges = NULL;
        int ne = mesh_edges(&m, &edges);
        strain = mean_edge_strain(w, first, perm, &m, edges, ne);
        free(edges);
    }
    free(perm);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return strain;
}

TEST(solver_xpbd_cloth_strain_independent_of_iterations) {
    /* alpha = 1e-2 m/N gives a strain of about a percent: clearly
       measurable, and alpha / h^2 comparable to the particles' inverse
       masses, so convergence matters. */
    double s20 = hanging_cloth_strain(PBD_SOLVER_XPBD, 20, 1, 1e-2f, 1.0f);
    double s80 = hanging_cloth_strain(PBD_SOLVER_XPBD, 80, 1, 1e-2f, 1.0f);
    printf("    xpbd cloth mean strain: 20 it %.6g, 80 it %.6g (ratio %.4f)\n", s20, s80, s20 / s80);
    CHECK_MSG(s20 > 1e-3 && s80 > 1e-3, "strain too small to measure: %g %g", s20, s80);
    CHECK_MSG(fabs(s20 - s80) < 0.05 * s80, "XPBD strain depends on iterations: %g vs %g", s20, s80);
}

TEST(solver_pbd_stiffness_correction) {
    /* Survey 3.3: with a raw stiffness k the effective stiffness depends on
       the iteration count; k' = 1 - (1 - k)^(1/n) makes it (nearly)
       independent of it. */
    double raw2 = hanging_cloth_strain(PBD_SOLVER_PBD, 2, 0, 0.0f, 0.5f);
    double raw20 = hanging_cloth_strain(PBD_SOLVER_PBD, 20, 0, 0.0f, 0.5f);
    double cor2 = hanging_cloth_strain(PBD_SOLVER_PBD, 2, 1, 0.0f, 0.5f);
    double cor20 = hanging_cloth_strain(PBD_SOLVER_PBD, 20, 1, 0.0f, 0.5f);
    printf("    pbd k=0.5 mean strain: raw 2 it %.6g, 20 it %.6g (ratio %.3f); corrected 2 it %.6g, "
           "20 it %.6g (ratio %.3f)\n",
           raw2, raw20, raw2 / raw20, cor2, cor20, cor2 / cor20);
    CHECK(raw2 > 0 && raw20 > 0 && cor2 > 0 && cor20 > 0);
    CHECK_MSG(raw2 > 2.0 * raw20, "without correction: %g vs %g, wanted > 2x", raw2, raw20);
    double rel = fabs(cor2 - cor20) / (cor2 < cor20 ? cor2 : cor20);
    /* measured: 1.4% (1.8% with reordered particles) */
    CHECK_MSG(rel < 0.10, "with correction: %g vs %g differ by %.1f%%, wanted < 10%%", cor2, cor20, 100 * rel);
}

/* ---- recovery from random and collapsed states ----------------------------- */

/* A 20x20 cloth (1 m) without gravity whose particles start at random
   positions (collapsed = 0) or all at one point (collapsed = 1) must find
   its rest edge lengths within 3 s, with no NaN at any step. The random
   positions fill the cloth's bounding box thickened to a cube of its width:
   a flat random state could never leave its plane (every correction lies
   in it) and a folded plane cannot in general satisfy all edge lengths. */
static void recovery(int collapsed) {
    const int n = 20;
    pbd_world *w = solver_world(0.0f, PBD_SOLVER_XPBD, 4, 4);
    CHECK(w != NULL);
    if (!w) return;
    pbd_mesh m;
    float o[3] = {-0.5f, 0, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, &m));
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    int *perm = (int *)malloc(sizeof(int) * m.vertex_count);
    c.permutation = perm;
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &c, &cloth));
    const pbd_range cp = pbdt_parts(w, cloth).particles;
    /* in world order (all random or all equal, so the order does not matter) */
    float *p = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    unsigned seed = 12345u;
    for (int i = 0; i < m.vertex_count; ++i) {
        if (collapsed) {
            p[3 * i] = 0.1f;
            p[3 * i + 1] = 0.2f;
            p[3 * i + 2] = 0.3f;
        } else {
            p[3 * i] = -0.5f + pbdt_rand(&seed);
            p[3 * i + 1] = -0.5f + pbdt_rand(&seed);
            p[3 * i + 2] = -0.5f + pbdt_rand(&seed);
        }
    }
    CHECK_OK(pbd_particles_set_positions(w, cp, p));
    int *edges = NULL;
    int ne = mesh_edges(&m, &edges);
    double start = mean_edge_strain(w, cp.first, perm, &m, edges, ne);
    int nan_step = -1;
    for (int s = 0; s < 180; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        if (!all_finite(w)) {
            nan_step = s;
            break;
        }
    }
    CHECK_MSG(nan_step < 0, "NaN/Inf after step %d", nan_step);
    if (nan_step < 0) {
        double err = mean_edge_strain(w, cp.first, perm, &m, edges, ne);
        printf("    recovery (%s): mean relative edge error %.4g at start, %.4g after 3 s\n",
               collapsed ? "collapsed" : "random", start, err);
        CHECK_MSG(err < 0.05, "mean relative edge error %g after 3 s, wanted < 0.05", err);
    }
    free(edges);
    free(p);
    free(perm);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(solver_recovery_from_random_positions) { recovery(0); }
TEST(solver_recovery_from_collapsed_state) { recovery(1); }

/* ---- momentum ------------------------------------------------------------- */

typedef struct rigid_motion {
    double P[3], L[3]; /* linear momentum; angular momentum about the origin */
    double c[3], M;    /* centre of mass, total mass */
    double Lc[3];      /* angular momentum about the centre of mass */
    double I[9];       /* inertia tensor about the centre of mass */
    double scale_p;    /* sum m |v| */
    double scale_l;    /* sum m |x - c| |v| */
    double kinetic;    /* sum m v^2 / 2 */
} rigid_motion;

static void solve3(const double *A, const double *b, double *x) {
    double det =
        A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) + A[2] * (A[3] * A[7] - A[4] * A[6]);
    for (int k = 0; k < 3; ++k) {
        double B[9];
        memcpy(B, A, sizeof B);
        B[k] = b[0];
        B[3 + k] = b[1];
        B[6 + k] = b[2];
        x[k] = (B[0] * (B[4] * B[8] - B[5] * B[7]) - B[1] * (B[3] * B[8] - B[5] * B[6]) +
                B[2] * (B[3] * B[7] - B[4] * B[6])) /
               det;
    }
}

/* Momenta of particles (x, v, mass m) in double. */
static void rigid_measure(int n, const float *x, int xs, const float *v, int vs, const double *m, rigid_motion *r) {
    memset(r, 0, sizeof *r);
    for (int i = 0; i < n; ++i) {
        for (int k = 0; k < 3; ++k) r->c[k] += m[i] * x[xs * i + k];
        r->M += m[i];
    }
    for (int k = 0; k < 3; ++k) r->c[k] /= r->M;
    for (int i = 0; i < n; ++i) {
        const float *xi = x + xs * i, *vi = v + vs * i;
        double d[3] = {xi[0] - r->c[0], xi[1] - r->c[1], xi[2] - r->c[2]};
        double vv = sqrt((double)vi[0] * vi[0] + (double)vi[1] * vi[1] + (double)vi[2] * vi[2]);
        double dd = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        for (int k = 0; k < 3; ++k) r->P[k] += m[i] * vi[k];
        r->L[0] += m[i] * ((double)xi[1] * vi[2] - (double)xi[2] * vi[1]);
        r->L[1] += m[i] * ((double)xi[2] * vi[0] - (double)xi[0] * vi[2]);
        r->L[2] += m[i] * ((double)xi[0] * vi[1] - (double)xi[1] * vi[0]);
        r->Lc[0] += m[i] * (d[1] * vi[2] - d[2] * vi[1]);
        r->Lc[1] += m[i] * (d[2] * vi[0] - d[0] * vi[2]);
        r->Lc[2] += m[i] * (d[0] * vi[1] - d[1] * vi[0]);
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) r->I[3 * a + b] += m[i] * ((a == b ? dd : 0) - d[a] * d[b]);
        r->scale_p += m[i] * vv;
        r->scale_l += m[i] * sqrt(dd) * vv;
        r->kinetic += 0.5 * m[i] * vv * vv;
    }
}

/* Kinetic energy of the motion that is not rigid (deformation). */
static double deformation_energy(const rigid_motion *r) {
    double w[3];
    solve3(r->I, r->Lc, w);
    double rigid = (r->P[0] * r->P[0] + r->P[1] * r->P[1] + r->P[2] * r->P[2]) / (2 * r->M) +
                   0.5 * (w[0] * r->Lc[0] + w[1] * r->Lc[1] + w[2] * r->Lc[2]);
    return r->kinetic - rigid;
}

static void world_measure(const pbd_world *w, pbd_range rg, rigid_motion *r) {
    const float *x = pbd_world_positions(w) + 4 * rg.first;
    double *m = (double *)malloc(sizeof(double) * rg.count);
    for (int i = 0; i < rg.count; ++i) m[i] = 1.0 / x[4 * i + 3];
    rigid_measure(rg.count, x, 4, pbd_world_velocities(w) + 4 * rg.first, 4, m, r);
    free(m);
}

/* A free soft box (4x4x4 nodes, 0.4 m, non-uniform masses from the density,
   compliant edges, rigid tet volumes), no gravity, random velocities of up
   to 1 m/s per component, stepped 100 times; drifts of linear and angular
   momentum relative to sum m|v| and sum m|x - c||v| at the start.
   The rigid part of the random velocities is replaced by a slow drift and
   spin (0.1 m/s, 0.25 rad/s) so that the body stays near the origin, where
   float positions are finest.
   What can be asked of it, measured on a correct solver:
   - every projection conserves both momenta exactly (sum m dp = 0 and
     sum m p x dp = 0, survey 3.2); linear momentum survives the velocity
     update v = (p - x)/h too, up to float round-off, which grows like
     ulp(|x|)/h per update (a rigidly translating box already drifts 1e-4
     with 4 substeps, 4e-6 with 1);
   - angular momentum does not survive the velocity update exactly: the
     correction of a substep is torque-free about the predicted positions,
     not about x, so L changes by sum m dp x v per substep (a spinning
     dumbbell keeps L / sqrt(1 + (omega h)^2) per substep; random velocities
     absorbed by stiff constraints lose ~0.5% here). That leak is first
     order in h, a projection that was not torque-free is not. */
typedef struct momentum_result {
    double dp, dl;        /* relative drifts */
    double def0, def_end; /* deformation kinetic energy (J) */
} momentum_result;

static momentum_result momentum_run(int substeps, int iterations, float damping, int constraints,
                                    float edge_compliance) {
    momentum_result res;
    res.dp = res.dl = 1e9;
    res.def0 = res.def_end = -1;
    pbd_world *w = solver_world(0.0f, PBD_SOLVER_XPBD, substeps, iterations);
    if (!w) return res;
    pbd_mesh m;
    float lo[3] = {-0.2f, -0.2f, -0.2f}, hi[3] = {0.2f, 0.2f, 0.2f};
    if (pbd_mesh_tet_box(4, 4, 4, lo, hi, &m) != PBD_OK) {
        pbd_world_destroy(w);
        return res;
    }
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = m.positions;
    sd.vertex_count = m.vertex_count;
    sd.tets = m.tets;
    sd.tet_count = m.tet_count;
    sd.edge_compliance = edge_compliance;
    sd.volume_compliance = 0.0f;
    sd.damping = damping;
    pbd_object body;
    int ok = pbd_add_softbody(w, &sd, &body) == PBD_OK;
    const pbd_object_parts bp = pbdt_parts(w, body);
    ok = ok && bp.stretch.id != 0 && bp.volume.id != 0;
    if (ok && !constraints)
        ok = pbd_group_set_enabled(w, bp.stretch, 0) == PBD_OK && pbd_group_set_enabled(w, bp.volume, 0) == PBD_OK;
    rigid_motion r0, r1;
    if (ok) {
        int n = m.vertex_count;
        float *vel = (float *)malloc(sizeof(float) * 3 * n);
        double *mass = (double *)calloc((size_t)n, sizeof(double));
        const float *x = pbd_world_positions(w) + 4 * bp.particles.first;
        unsigned seed = 777u;
        for (int i = 0; i < 3 * n; ++i) vel[i] = 2.0f * (pbdt_rand(&seed) - 0.5f);
        for (int i = 0; i < n; ++i) mass[i] = 1.0 / x[4 * i + 3];
        rigid_motion rr;
        rigid_measure(n, x, 4, vel, 3, mass, &rr);
        double om[3], vc[3] = {0.1, -0.05, 0.08}, om0[3] = {0.1, 0.2, -0.1};
        solve3(rr.I, rr.Lc, om);
        for (int i = 0; i < n; ++i) {
            double d[3] = {x[4 * i] - rr.c[0], x[4 * i + 1] - rr.c[1], x[4 * i + 2] - rr.c[2]};
            double wx[3] = {(om0[1] - om[1]) * d[2] - (om0[2] - om[2]) * d[1],
                            (om0[2] - om[2]) * d[0] - (om0[0] - om[0]) * d[2],
                            (om0[0] - om[0]) * d[1] - (om0[1] - om[1]) * d[0]};
            for (int k = 0; k < 3; ++k) vel[3 * i + k] = (float)(vel[3 * i + k] - rr.P[k] / rr.M + vc[k] + wx[k]);
        }
        ok = pbd_particles_set_velocities(w, bp.particles, vel) == PBD_OK;
        free(vel);
        free(mass);
    }
    if (ok) {
        world_measure(w, bp.particles, &r0);
        for (int s = 0; ok && s < 100; ++s) ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK;
        if (ok && all_finite(w)) {
            world_measure(w, bp.particles, &r1);
            double a = 0, b = 0;
            for (int k = 0; k < 3; ++k) {
                a += (r1.P[k] - r0.P[k]) * (r1.P[k] - r0.P[k]);
                b += (r1.L[k] - r0.L[k]) * (r1.L[k] - r0.L[k]);
            }
            res.dp = sqrt(a) / r0.scale_p;
            res.dl = sqrt(b) / r0.scale_l;
            res.def0 = deformation_energy(&r0);
            res.def_end = deformation_energy(&r1);
        }
    }
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return res;
}

TEST(solver_momentum_linear_conserved_by_constraints) {
    /* one substep of 1/60 and 10 iterations: 4000 sweeps of every
       constraint at the lowest round-off */
    momentum_result r = momentum_run(1, 10, 0.0f, 1, 1e-3f);
    momentum_result r4 = momentum_run(4, 4, 0.0f, 1, 1e-3f);
    printf("    soft box: linear momentum drift %.3g (1 substep), %.3g (4 substeps); deformation "
           "energy %.4g -> %.4g J\n",
           r.dp, r4.dp, r.def0, r.def_end);
    CHECK_MSG(r.dp < 1e-4, "linear momentum drift %g", r.dp);
    CHECK_MSG(r4.dp < 1e-3, "linear momentum drift %g with 4 substeps", r4.dp);
    /* the random velocities were violent: the constraints did work */
    CHECK(r.def_end < 0.1 * r.def0);
}

TEST(solver_momentum_angular_conserved_isolated) {
    /* Each projection conserves angular momentum exactly, but the velocity
       update v = (p - x) / h only to first order in h; for an isolated
       object the solver restores it (pbd__momentum_restore), so the
       issue's 1e-4 holds at the world level too, for rigid and compliant
       edges, large and small steps. */
    momentum_result r1 = momentum_run(1, 4, 0.0f, 1, 0.0f);
    momentum_result r4 = momentum_run(4, 4, 0.0f, 1, 0.0f);
    momentum_result c4 = momentum_run(4, 4, 0.0f, 1, 1e-3f);
    printf("    box: angular momentum drift %.3g (rigid, h = 1/60), %.3g (rigid, h = 1/240), %.3g (compliant)\n", r1.dl,
           r4.dl, c4.dl);
    CHECK_MSG(r1.dl < 1e-4, "angular momentum drift %g (h = 1/60)", r1.dl);
    CHECK_MSG(r4.dl < 1e-4, "angular momentum drift %g (h = 1/240)", r4.dl);
    CHECK_MSG(c4.dl < 1e-4, "angular momentum drift %g (compliant edges)", c4.dl);
}

TEST(solver_inflated_balloon_does_not_spin_up) {
    /* a free balloon whose pressure fights its skin every substep: without
       the angular momentum restore it spun up to ~12 rad/s within 4 s */
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = 8;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    pbd_mesh m;
    float c[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_sphere(3, c, 0.3f, &m));
    pbd_balloon_desc b = pbd_balloon_desc_default();
    b.cloth.positions = m.positions;
    b.cloth.vertex_count = m.vertex_count;
    b.cloth.triangles = m.triangles;
    b.cloth.triangle_count = m.triangle_count;
    b.cloth.bending = PBD_BENDING_NONE;
    b.cloth.stretch_compliance = 1e-3f;
    b.pressure = 1.0f;
    pbd_object o;
    CHECK_OK(pbd_add_balloon(w, &b, &o));
    const pbd_object_parts op = pbdt_parts(w, o);
    double ke = 0;
    for (int s = 1; s <= 240; ++s) {
        if (s <= 120) CHECK_OK(pbd_group_set_pressure(w, op.volume, 1.0f + 0.3f * s / 120.0f));
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    }
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    double M = 0, P[3] = {0, 0, 0};
    for (int i = 0; i < op.particles.count; ++i) {
        double mi = 1.0 / x[4 * i + 3];
        M += mi;
        for (int k = 0; k < 3; ++k) {
            P[k] += mi * v[4 * i + k];
            ke += 0.5 * mi * v[4 * i + k] * v[4 * i + k];
        }
    }
    double internal = (ke - (P[0] * P[0] + P[1] * P[1] + P[2] * P[2]) / (2 * M)) / M;
    printf("    inflated balloon after 4 s: internal kinetic energy %.3g J/kg\n", internal);
    CHECK_MSG(internal < 0.01, "internal kinetic energy %g J/kg (spin-up)", internal);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(solver_contacts_turn_an_object_as_its_particles) {
    /* An object whose constraints are all disabled is a set of free
       particles: the angular momentum restore (pbd__momentum_restore) must
       then have nothing to restore, contacts and friction included, and
       the object must move exactly as the same particles outside any
       object. Random velocities, a tilted plane with friction 0.5, 2 s.
       With the contacts' turn taken about the wrong lever arm the object's
       particles ended up to 40 cm off the free particles' paths; left are
       rounding differences, which the contacts' thresholds grow to about
       a millimetre. */
    pbd_world *a = solver_world(-9.81f, PBD_SOLVER_XPBD, 4, 4), *b = solver_world(-9.81f, PBD_SOLVER_XPBD, 4, 4);
    CHECK(a != NULL && b != NULL);
    if (!a || !b) return;
    pbd_mesh m;
    float lo[3] = {-0.2f, 0.05f, -0.2f}, hi[3] = {0.2f, 0.45f, 0.2f}, n[3] = {0.3f, 1, 0}, o[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_tet_box(4, 4, 4, lo, hi, &m));
    CHECK_OK(pbd_add_collider_plane(a, o, n, 0.5f, NULL));
    CHECK_OK(pbd_add_collider_plane(b, o, n, 0.5f, NULL));
    pbd_softbody_desc sd = pbdt_softbody_desc(&m);
    pbd_object body;
    CHECK_OK(pbd_add_softbody(a, &sd, &body));
    const pbd_object_parts bp = pbdt_parts(a, body);
    CHECK_OK(pbd_group_set_enabled(a, bp.stretch, 0));
    CHECK_OK(pbd_group_set_enabled(a, bp.volume, 0));
    int np = m.vertex_count;
    float *mass = (float *)malloc(sizeof(float) * (size_t)np), *vel = (float *)malloc(sizeof(float) * 3 * (size_t)np);
    const float *xa = pbd_world_positions(a) + 4 * bp.particles.first;
    unsigned seed = 7u;
    for (int i = 0; i < np; ++i) mass[i] = 1.0f / xa[4 * i + 3];
    for (int i = 0; i < 3 * np; ++i) vel[i] = 2.0f * (pbdt_rand(&seed) - 0.5f);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = m.positions;
    pd.masses = mass;
    pd.radius = sd.radius;
    pd.count = np;
    pbd_range free_;
    CHECK_OK(pbd_add_particles(b, &pd, &free_));
    CHECK_OK(pbd_particles_set_velocities(a, bp.particles, vel));
    CHECK_OK(pbd_particles_set_velocities(b, free_, vel));
    for (int s = 0; s < 120; ++s) {
        CHECK_OK(pbd_world_step(a, 1.0f / 60.0f));
        CHECK_OK(pbd_world_step(b, 1.0f / 60.0f));
    }
    const float *x1 = pbd_world_positions(a) + 4 * bp.particles.first, *x2 = pbd_world_positions(b) + 4 * free_.first;
    double worst = 0;
    for (int i = 0; i < np; ++i)
        for (int k = 0; k < 3; ++k) worst = fmax(worst, fabs((double)x1[4 * i + k] - x2[4 * i + k]));
    printf("    free particles as an object against outside any: %.3g m apart at most after 2 s\n", worst);
    CHECK_MSG(worst < 0.01, "the object's particles are %g m off the free particles' paths", worst);
    free(mass);
    free(vel);
    pbd_mesh_free(&m);
    pbd_world_destroy(a);
    pbd_world_destroy(b);
}

/* A default balloon (subdivision 2, radius 0.2 m) of the given pressure
   set on a plane of normal n through the origin with friction 0.5; 12 s
   at 60 Hz.
   Its centre's travel along the plane and its spin about its centre at the
   end, and the largest kinetic energy of the last 4 s. */
typedef struct balloon_run {
    double travel, spin, ke_late, along; /* along: travel down the slope */
} balloon_run;
static balloon_run balloon_on_plane(float slope, int substeps, float pressure) {
    balloon_run r = {0, 0, 0, 0};
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = substeps;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    float n[3] = {sinf(slope), cosf(slope), 0}, o[3] = {0, 0, 0}, c[3] = {0.201f * n[0], 0.201f * n[1], 0};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_sphere(2, c, 0.2f, &m));
    pbd_balloon_desc b = pbd_balloon_desc_default();
    b.cloth.positions = m.positions;
    b.cloth.vertex_count = m.vertex_count;
    b.cloth.triangles = m.triangles;
    b.cloth.triangle_count = m.triangle_count;
    b.pressure = pressure;
    CHECK_OK(pbd_add_balloon(w, &b, NULL));
    CHECK_OK(pbd_add_collider_plane(w, o, n, 0.5f, NULL));
    int np = m.vertex_count;
    for (int s = 1; s <= 720; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
        double M = 0, X[3] = {0, 0, 0}, V[3] = {0, 0, 0}, ke = 0, L[3] = {0, 0, 0}, I = 0;
        for (int i = 0; i < np; ++i) {
            double mi = 1.0 / x[4 * i + 3];
            M += mi;
            for (int k = 0; k < 3; ++k) {
                X[k] += mi * x[4 * i + k];
                V[k] += mi * v[4 * i + k];
                ke += 0.5 * mi * v[4 * i + k] * v[4 * i + k];
            }
        }
        for (int k = 0; k < 3; ++k) X[k] /= M, V[k] /= M;
        for (int i = 0; i < np; ++i) {
            double mi = 1.0 / x[4 * i + 3], q[3], u[3];
            for (int k = 0; k < 3; ++k) q[k] = x[4 * i + k] - X[k], u[k] = v[4 * i + k] - V[k];
            L[0] += mi * (q[1] * u[2] - q[2] * u[1]);
            L[1] += mi * (q[2] * u[0] - q[0] * u[2]);
            L[2] += mi * (q[0] * u[1] - q[1] * u[0]);
            I += mi * (q[0] * q[0] + q[1] * q[1] + q[2] * q[2]) * 2.0 / 3.0; /* a thin shell's axis inertia */
        }
        if (s > 480 && ke > r.ke_late) r.ke_late = ke;
        if (s == 720) {
            double t[3] = {X[0] - c[0], X[1] - c[1], X[2] - c[2]}, tn = t[0] * n[0] + t[1] * n[1];
            for (int k = 0; k < 3; ++k) t[k] -= tn * (k == 0 ? n[0] : k == 1 ? n[1] : 0);
            r.travel = sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
            r.along = t[0] * cosf(slope) - t[1] * sinf(slope); /* down the slope: +x side */
            r.spin = sqrt(L[0] * L[0] + L[1] * L[1] + L[2] * L[2]) / I;
        }
    }
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return r;
}

TEST(solver_balloon_rests_on_the_ground) {
    LONG_SCENE();
    /* The angular momentum the velocity update leaks (see the test above)
       used to be restored only for objects no collider touched: a balloon
       resting on the ground turned its leak into rolling, through
       friction, and rolled 26 m in 12 s, faster and faster (3.2 m/s,
       0.87 J, an independent audit). Now a touched object is restored to
       its angular momentum after the prediction plus what its contacts
       gave it. That alone left it rocking and rolling about for half a
       minute (without drag, at 12 s: 0.2-0.27 rad/s, up to 1.3 mJ): what
       stops a ball on the ground is the air and the rolling resistance of
       its skin, which the solver has not. A balloon's default drag (1/s)
       brings it to rest within seconds. */
    balloon_run a = balloon_on_plane(0.0f, 4, 1.0f), b = balloon_on_plane(0.0f, 16, 1.0f);
    printf("    balloon on the ground after 12 s: travel %.3f m (4 substeps), %.3f m (16); spin %.3f / %.3f "
           "rad/s; kinetic energy of the last 4 s at most %.2g / %.2g J\n",
           a.travel, b.travel, a.spin, b.spin, a.ke_late, b.ke_late);
    CHECK_MSG(a.travel < 0.2 && b.travel < 0.2, "the balloon rolled %g m / %g m", a.travel, b.travel);
    CHECK_MSG(a.spin < 0.02 && b.spin < 0.02, "the balloon spins at %g / %g rad/s", a.spin, b.spin);
    CHECK_MSG(a.ke_late < 1e-5 && b.ke_late < 1e-5, "kinetic energy %g / %g J at rest", a.ke_late, b.ke_late);
}

TEST(solver_balloon_still_rolls_down_a_slope) {
    LONG_SCENE();
    /* what the contacts give is kept: on a 15 degree slope with friction
       0.5 the balloon rolls down (a thin rigid shell rolling without
       slipping: a = g sin a / (1 + 2/3) = 1.5 m/s^2, 110 m in 12 s; the
       soft skin loses some: about 72 m without drag; with the default
       drag of 1/s it rolls at about 1.5 m/s, about 15 m), and spins as it
       rolls */
    balloon_run r = balloon_on_plane(0.2618f, 4, 1.5f);
    printf("    balloon on a 15 degree slope after 12 s: %.2f m down the slope, spin %.2f rad/s\n", r.along, r.spin);
    CHECK_MSG(r.along > 3.0, "it went %g m down the slope", r.along);
    CHECK_MSG(r.spin > 1.0, "it rolled at %g rad/s", r.spin);
}

TEST(solver_momentum_conserved_by_global_damping) {
    /* The damping alone (the body's groups disabled, so the particles fly
       freely and only the damping couples them): exact in both momenta. */
    momentum_result free_ = momentum_run(4, 4, 0.0f, 0, 1e-3f);
    momentum_result damped = momentum_run(4, 4, 5.0f, 0, 1e-3f);
    printf("    free particles + damping 5/s: drift P %.3g, L %.3g; deformation energy %.4g J -> "
           "%.4g J (undamped %.4g J)\n",
           damped.dp, damped.dl, damped.def0, damped.def_end, free_.def_end);
    CHECK_MSG(damped.dp < 1e-4, "linear momentum drift %g", damped.dp);
    CHECK_MSG(damped.dl < 1e-4, "angular momentum drift %g", damped.dl);
    /* and it damps: the exact rate leaves e^(-2 * 5 * 1.67) = 6e-8 of the
       deformation energy (the rigid fit of a dispersing cloud changes, so
       allow more) */
    CHECK_MSG(damped.def_end < 1e-5 * free_.def_end, "damping left %g J of deformation energy (undamped %g J)",
              damped.def_end, free_.def_end);
    /* together with the constraints: linear momentum as without damping */
    momentum_result both = momentum_run(1, 10, 5.0f, 1, 1e-3f);
    printf("    soft box + damping 5/s: drift P %.3g, L %.3g\n", both.dp, both.dl);
    CHECK_MSG(both.dp < 1e-4, "linear momentum drift %g", both.dp);
}

/* ---- point damping -------------------------------------------------------- */

TEST(solver_point_damping_exponential) {
    const float c = 2.0f;
    pbd_world *w = solver_world(0.0f, PBD_SOLVER_XPBD, 4, 4);
    CHECK(w != NULL);
    if (!w) return;
    float pos[3] = {0, 0, 0}, vel[3] = {3.0f, -1.0f, 0.5f};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.velocities = vel;
    pd.count = 1;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_world_set_point_damping(w, c));
    double s0 = sqrt(9.0 + 1.0 + 0.25);
    for (int s = 1; s <= 90; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        if (s % 30 == 0) {
            float v[3];
            CHECK_OK(pbd_particles_get_velocities(w, r, v));
            double sp = sqrt((double)v[0] * v[0] + (double)v[1] * v[1] + (double)v[2] * v[2]);
            double want = s0 * exp(-c * s / 60.0);
            /* v = (p - x) / h carries a float round-off of ulp(|x|) / h
               (3e-5 m/s at 1 m, i.e. 2e-4 of the 0.16 m/s left at 1.5 s);
               1e-3 still tells exp(-c h) from a linear 1 - c h per substep,
               which is 0.4%, 0.8% and 1.3% off at 0.5, 1 and 1.5 s. */
            CHECK_NEAR(sp / want, 1.0, 1e-3);
            /* the direction is kept */
            CHECK_NEAR(v[0] / sp, 3.0 / s0, 1e-3);
            CHECK_NEAR(v[1] / sp, -1.0 / s0, 1e-3);
        }
    }
    /* the position is the integral of that velocity: x = v0 (1 - e^-ct) / c
       up to the O(h) of the discrete sum */
    float x[3];
    CHECK_OK(pbd_particles_get_positions(w, r, x));
    double t = 1.5, want_x = 3.0 * (1 - exp(-c * t)) / c;
    CHECK_NEAR(x[0], want_x, 0.01 * want_x);
    pbd_world_destroy(w);
}

void suite_solver(void) {
    RUN(solver_xpbd_hanging_mass_extension);
    RUN(solver_xpbd_iteration_and_substep_independent_equilibrium);
    RUN(solver_xpbd_cloth_strain_independent_of_iterations);
    RUN(solver_pbd_stiffness_correction);
    RUN(solver_recovery_from_random_positions);
    RUN(solver_recovery_from_collapsed_state);
    RUN(solver_momentum_linear_conserved_by_constraints);
    RUN(solver_momentum_angular_conserved_isolated);
    RUN(solver_inflated_balloon_does_not_spin_up);
    RUN(solver_contacts_turn_an_object_as_its_particles);
    RUN(solver_balloon_rests_on_the_ground);
    RUN(solver_balloon_still_rolls_down_a_slope);
    RUN(solver_momentum_conserved_by_global_damping);
    RUN(solver_point_damping_exponential);
}
