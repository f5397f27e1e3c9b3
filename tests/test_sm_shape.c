/* tests/test_sm_shape.c - pbd_sm.h section "shape matching": clusters and
   regions against a direct evaluation of the survey's equations (4.1, 4.2)
   and of Mueller et al. 2005's linear and quadratic modes, rigid
   invariance (180 degree turns included), flat and collinear clusters,
   momentum, the region-size stiffness of the survey's Figure 16,
   plasticity (4.5.2), omega rings, thread determinism and bad input. */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include <stdlib.h>

#define SMS_PI 3.14159265358979323846

/* --- helpers ----------------------------------------------------------------- */

static void sms_axis_angle(double ax, double ay, double az, double ang, double *R) {
    double n = sqrt(ax * ax + ay * ay + az * az), s = sin(ang / 2);
    double q[4] = {ax / n * s, ay / n * s, az / n * s, cos(ang / 2)};
    pbdt_quat_to_mat(q, R);
}
static int sms_add_points(pbd_world *w, int n, const float *pos, float mass) {
    pbd_particles_desc p = pbd_particles_desc_default();
    p.positions = pos;
    p.count = n;
    p.mass = mass;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &p, &r));
    return r.first;
}
static void sms_iota(int *idx, int n, int first) {
    for (int i = 0; i < n; ++i) idx[i] = first + i;
}
static int sms_finite(const float *v, int n) {
    for (int i = 0; i < n; ++i)
        if (!(v[i] == v[i]) || fabsf(v[i]) > 1e30f) return 0;
    return 1;
}
/* Moves world particles [first, first+n) to R rest + t. */
static void sms_place(pbd_world *w, int first, int n, const float *rest, const double *R, const double *t) {
    float *x = (float *)malloc(sizeof(float) * 3 * n);
    for (int i = 0; i < n; ++i)
        for (int a = 0; a < 3; ++a)
            x[3 * i + a] = (float)(R[3 * a] * rest[3 * i] + R[3 * a + 1] * rest[3 * i + 1] +
                                   R[3 * a + 2] * rest[3 * i + 2] + t[a]);
    pbd_range r = {first, n};
    CHECK_OK(pbd_particles_set_positions(w, r, x));
    free(x);
}
/* The body's region count and plan (pbd_sm_body_region_count, _plan). */
static int sms_regions(const pbd_world *w, pbd_sm_body b) {
    int n = -1;
    CHECK_OK(pbd_sm_body_region_count(w, b, &n));
    return n;
}
static pbd_sm_sum_plan *sms_plan(const pbd_world *w, pbd_sm_body b) {
    pbd_sm_sum_plan *p = NULL;
    CHECK_OK(pbd_sm_body_plan(w, b, &p));
    return p;
}
static double sms_goal_error(pbd_sm_body b, pbd_world *w, int first, int n) {
    float *g = (float *)malloc(sizeof(float) * 3 * n);
    CHECK_OK(pbd_sm_body_goals(w, b, g));
    const float *x = pbd_world_positions(w);
    double worst = 0;
    for (int i = 0; i < n; ++i)
        for (int a = 0; a < 3; ++a) {
            double d = fabs((double)g[3 * i + a] - x[4 * (first + i) + a]);
            if (!(d <= worst)) worst = d; /* NaN counts as worst */
        }
    free(g);
    return worst;
}

/* Gauss-Jordan inverse with partial pivoting (n <= 9), for the reference. */
static int sms_invert(int n, const double *A, double *Ai) {
    double M[9][18];
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < 2 * n; ++j) M[i][j] = j < n ? A[i * n + j] : (j - n == i);
    for (int c = 0; c < n; ++c) {
        int piv = c;
        for (int r = c + 1; r < n; ++r)
            if (fabs(M[r][c]) > fabs(M[piv][c])) piv = r;
        if (fabs(M[piv][c]) < 1e-300) return 0;
        for (int j = 0; j < 2 * n; ++j) {
            double t = M[c][j];
            M[c][j] = M[piv][j];
            M[piv][j] = t;
        }
        double d = M[c][c];
        for (int j = 0; j < 2 * n; ++j) M[c][j] /= d;
        for (int r = 0; r < n; ++r) {
            if (r == c) continue;
            double f = M[r][c];
            for (int j = 0; j < 2 * n; ++j) M[r][j] -= f * M[c][j];
        }
    }
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) Ai[i * n + j] = M[i][n + j];
    return 1;
}

/* Direct evaluation of the blended goals (survey eqs. 5-8 and 4.2;
   Mueller et al. 2005 4.2/4.3) over explicit region lists. */
static void sms_reference_goals(int n, const float *rest, const float *x, const float *mass, int nr, const int *start,
                                const int *list, pbd_sm_mode mode, double beta, double *goal) {
    int *cnt = (int *)calloc((size_t)n, sizeof(int));
    for (int e = 0; e < start[nr]; ++e) cnt[list[e]]++;
    for (int i = 0; i < 3 * n; ++i) goal[i] = 0;
    for (int r = 0; r < nr; ++r) {
        double M = 0, cb[3] = {0, 0, 0}, c[3] = {0, 0, 0};
        for (int e = start[r]; e < start[r + 1]; ++e) {
            int i = list[e];
            double m = mass[i] / cnt[i];
            M += m;
            for (int a = 0; a < 3; ++a) {
                cb[a] += m * rest[3 * i + a];
                c[a] += m * x[3 * i + a];
            }
        }
        for (int a = 0; a < 3; ++a) {
            cb[a] /= M;
            c[a] /= M;
        }
        double Apq[27] = {0}, Aqq[81] = {0}, mu[9] = {0};
        int dim = mode == PBD_SM_QUADRATIC ? 9 : 3;
        for (int e = start[r]; e < start[r + 1]; ++e) { /* mean of the quadratic terms (centred) */
            int i = list[e];
            double m = mass[i] / cnt[i], q[3];
            for (int a = 0; a < 3; ++a) q[a] = rest[3 * i + a] - cb[a];
            mu[3] += m * q[0] * q[0] / M;
            mu[4] += m * q[1] * q[1] / M;
            mu[5] += m * q[2] * q[2] / M;
            mu[6] += m * q[0] * q[1] / M;
            mu[7] += m * q[1] * q[2] / M;
            mu[8] += m * q[2] * q[0] / M;
        }
        for (int e = start[r]; e < start[r + 1]; ++e) {
            int i = list[e];
            double m = mass[i] / cnt[i], q[9], p[3];
            for (int a = 0; a < 3; ++a) {
                q[a] = rest[3 * i + a] - cb[a];
                p[a] = x[3 * i + a] - c[a];
            }
            q[3] = q[0] * q[0];
            q[4] = q[1] * q[1];
            q[5] = q[2] * q[2];
            q[6] = q[0] * q[1];
            q[7] = q[1] * q[2];
            q[8] = q[2] * q[0];
            for (int k = 3; k < 9; ++k) q[k] -= mu[k];
            for (int a = 0; a < 3; ++a)
                for (int j = 0; j < dim; ++j) Apq[a * dim + j] += m * p[a] * q[j];
            for (int a = 0; a < dim; ++a)
                for (int j = 0; j < dim; ++j) Aqq[a * dim + j] += m * q[a] * q[j];
        }
        double A3[9], qr[4] = {0, 0, 0, 1}, R[9];
        for (int a = 0; a < 3; ++a)
            for (int j = 0; j < 3; ++j) A3[3 * a + j] = Apq[a * dim + j];
        pbd_sm_extract_rotation_d(A3, qr, 100);
        pbdt_quat_to_mat(qr, R);
        double Bm[27] = {0}; /* 3 x dim */
        for (int a = 0; a < 3; ++a)
            for (int j = 0; j < 3; ++j) Bm[a * dim + j] = R[3 * a + j];
        if (mode != PBD_SM_RIGID) {
            double Ai[81], A[27];
            sms_invert(dim, Aqq, Ai);
            for (int a = 0; a < 3; ++a)
                for (int j = 0; j < dim; ++j) {
                    double s = 0;
                    for (int e = 0; e < dim; ++e) s += Apq[a * dim + e] * Ai[e * dim + j];
                    A[a * dim + j] = s;
                }
            double scale = 1;
            if (mode == PBD_SM_LINEAR) {
                double d = A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) +
                           A[2] * (A[3] * A[7] - A[4] * A[6]);
                scale = 1 / cbrt(d);
            }
            for (int k = 0; k < 3 * dim; ++k) Bm[k] = beta * scale * A[k] + (1 - beta) * Bm[k];
        }
        for (int e = start[r]; e < start[r + 1]; ++e) {
            int i = list[e];
            double q[9];
            for (int a = 0; a < 3; ++a) q[a] = rest[3 * i + a] - cb[a];
            q[3] = q[0] * q[0];
            q[4] = q[1] * q[1];
            q[5] = q[2] * q[2];
            q[6] = q[0] * q[1];
            q[7] = q[1] * q[2];
            q[8] = q[2] * q[0];
            for (int k = 3; k < 9; ++k) q[k] -= mu[k];
            for (int a = 0; a < 3; ++a) {
                double g = c[a];
                for (int j = 0; j < dim; ++j) g += Bm[a * dim + j] * q[j];
                goal[3 * i + a] += g / cnt[i];
            }
        }
    }
    free(cnt);
}

/* --- tests ------------------------------------------------------------------- */

/* The body's goals (region sums through the plan, goal functions gathered
   per particle) equal a direct evaluation of the equations, for
   overlapping non-symmetric user regions and symmetric ring regions, in
   every mode. */
TEST(sm_shape_goals_match_direct_evaluation) {
    enum { N = 40, NR = 6 };
    unsigned st = 11;
    float rest[3 * N], x[3 * N], mass[N];
    for (int i = 0; i < N; ++i) {
        for (int a = 0; a < 3; ++a) rest[3 * i + a] = 2.0f * pbdt_rand(&st) + 5.0f; /* away from the origin */
        mass[i] = 0.5f + pbdt_rand(&st);
    }
    /* a smooth nonlinear deformation, a turn and a shift */
    double R[9];
    sms_axis_angle(1, 2, 3, 2.5, R);
    for (int i = 0; i < N; ++i) {
        double u[3];
        for (int a = 0; a < 3; ++a) u[a] = rest[3 * i + a] + 0.1 * sin(2.0 * rest[3 * i + (a + 1) % 3]);
        for (int a = 0; a < 3; ++a)
            x[3 * i + a] = (float)(R[3 * a] * u[0] + R[3 * a + 1] * u[1] + R[3 * a + 2] * u[2] + 1 - a);
    }
    /* NR overlapping regions of 15 particles each (i*6 .. i*6+14 mod N) */
    int start[NR + 1], list[NR * 15];
    for (int r = 0; r <= NR; ++r) start[r] = 15 * r;
    for (int r = 0; r < NR; ++r)
        for (int k = 0; k < 15; ++k) list[15 * r + k] = (r * 6 + k) % N;
    for (int mode = 0; mode < 3; ++mode) {
        pbd_world *w = pbdt_world(0);
        int first = sms_add_points(w, N, x, 1);
        int idx[N];
        sms_iota(idx, N, first);
        pbd_sm_body_desc d = pbd_sm_body_desc_default();
        d.particles = idx;
        d.particle_count = N;
        d.rest_positions = rest;
        d.masses = mass;
        d.region_count = NR;
        d.region_start = start;
        d.region_particles = list;
        d.mode = (pbd_sm_mode)mode;
        d.beta = 0.7f;
        pbd_sm_body b = {0};
        CHECK_OK(pbd_sm_add_body(w, &d, &b));
        int np = -1;
        CHECK_OK(pbd_sm_body_particle_count(w, b, &np));
        CHECK(sms_regions(w, b) == NR && np == N);
        float g[3 * N];
        double ref[3 * N], worst = 0;
        CHECK_OK(pbd_sm_body_goals(w, b, g));
        sms_reference_goals(N, rest, x, mass, NR, start, list, (pbd_sm_mode)mode, 0.7, ref);
        int covered[N] = {0};
        for (int e = 0; e < NR * 15; ++e) covered[list[e]] = 1;
        for (int i = 0; i < N; ++i)
            for (int a = 0; a < 3; ++a) {
                double want = covered[i] ? ref[3 * i + a] : x[3 * i + a];
                double dd = fabs(g[3 * i + a] - want);
                if (!(dd <= worst)) worst = dd;
            }
        CHECK_MSG(worst < 2e-5, "mode %d: worst goal error %g", mode, worst);
        pbd_world_destroy(w);
    }
    /* symmetric regions (1-rings of a grid): the blend runs as a plan sum */
    pbd_mesh m;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0.2f}, v[3] = {0, 1, 0.3f};
    CHECK_OK(pbd_mesh_grid(5, 4, o, u, v, &m));
    int nv = m.vertex_count, total = 0;
    int *rs = (int *)malloc(sizeof(int) * (nv + 1));
    CHECK_OK(pbd_sm_mesh_rings(nv, m.triangles, m.triangle_count, 3, 1, rs, NULL, 0, &total));
    int *rl = (int *)malloc(sizeof(int) * total);
    CHECK_OK(pbd_sm_mesh_rings(nv, m.triangles, m.triangle_count, 3, 1, rs, rl, total, &total));
    float *xs = (float *)malloc(sizeof(float) * 3 * nv), *ms = (float *)malloc(sizeof(float) * nv);
    for (int i = 0; i < nv; ++i) {
        ms[i] = 1;
        for (int a = 0; a < 3; ++a) xs[3 * i + a] = m.positions[3 * i + a] + 0.05f * (pbdt_rand(&st) - 0.5f);
    }
    for (int mode = 0; mode < 2; ++mode) { /* flat regions: rigid and linear */
        pbd_world *w = pbdt_world(0);
        int first = sms_add_points(w, nv, xs, 1);
        int *idx = (int *)malloc(sizeof(int) * nv);
        sms_iota(idx, nv, first);
        pbd_sm_sum_plan *plan = NULL;
        CHECK_OK(pbd_sm_plan_rings(nv, m.triangles, m.triangle_count, 3, 1, &plan));
        pbd_sm_body_desc d = pbd_sm_body_desc_default();
        d.particles = idx;
        d.particle_count = nv;
        d.rest_positions = m.positions;
        d.plan = plan;
        d.owns_plan = 1;
        d.mode = (pbd_sm_mode)mode;
        d.beta = 0.0f; /* flat rest shapes: A_qq is singular; the reference inverts it */
        pbd_sm_body b = {0};
        CHECK_OK(pbd_sm_add_body(w, &d, &b));
        CHECK(sms_plan(w, b) == plan);
        float *g = (float *)malloc(sizeof(float) * 3 * nv);
        double *ref = (double *)malloc(sizeof(double) * 3 * nv), worst = 0;
        CHECK_OK(pbd_sm_body_goals(w, b, g));
        sms_reference_goals(nv, m.positions, xs, ms, nv, rs, rl, PBD_SM_RIGID, 0, ref);
        for (int i = 0; i < 3 * nv; ++i)
            if (!(fabs(g[i] - ref[i]) <= worst)) worst = fabs(g[i] - ref[i]);
        CHECK_MSG(worst < 2e-5, "rings mode %d: worst goal error %g", mode, worst);
        free(g);
        free(ref);
        free(idx);
        pbd_world_destroy(w); /* destroys the owned plan (ASan checks) */
    }
    free(xs);
    free(ms);
    free(rs);
    free(rl);
    pbd_mesh_free(&m);
}

/* A cluster moved by a rigid transform gets zero correction, for any
   rotation including exact 180 degree turns, in every mode, as a single
   cluster and as lattice regions; stepping the world leaves it in place. */
TEST(sm_shape_rigid_transform_zero_correction) {
    enum { N = 27 };
    unsigned st = 5;
    float rest[3 * N];
    for (int i = 0; i < N; ++i)
        for (int a = 0; a < 3; ++a) rest[3 * i + a] = pbdt_rand(&st) - 0.5f + (a == 0 ? 3.0f : 0.0f);
    double axes[][4] = {{1, 0, 0, SMS_PI},        {0, 1, 0, SMS_PI}, {0, 0, 1, SMS_PI}, {1, 1, 0, SMS_PI},
                        {0.3, -0.5, 0.8, SMS_PI}, {1, 2, 3, 0.7},    {-2, 1, 1, 2.9},   {0, 0, 1, 0},
                        {1, 0, 0, 3.1},           {0, 1, 1, -2.0}};
    double worst = 0;
    for (int mode = 0; mode < 3; ++mode) {
        pbd_world *w = pbdt_world(0);
        int first = sms_add_points(w, N, rest, 1);
        int idx[N];
        sms_iota(idx, N, first);
        pbd_sm_body_desc d = pbd_sm_body_desc_default();
        d.particles = idx;
        d.particle_count = N;
        d.mode = (pbd_sm_mode)mode;
        d.beta = 1.0f;
        pbd_sm_body b = {0};
        CHECK_OK(pbd_sm_add_body(w, &d, &b));
        for (size_t k = 0; k < sizeof axes / sizeof axes[0]; ++k) {
            double R[9], t[3] = {0.5 * k, -1.0, 2.0};
            sms_axis_angle(axes[k][0], axes[k][1], axes[k][2], axes[k][3], R);
            sms_place(w, first, N, rest, R, t);
            double e = sms_goal_error(b, w, first, N); /* cold start from the stored rotation */
            if (!(e <= worst)) worst = e;
            /* stepping: the projection (warm-started) moves nothing */
            float before[3 * N];
            pbd_range r = {first, N};
            CHECK_OK(pbd_particles_get_positions(w, r, before));
            CHECK_OK(pbd_world_step(w, 1.0f / 60));
            float after[3 * N];
            CHECK_OK(pbd_particles_get_positions(w, r, after));
            for (int i = 0; i < 3 * N; ++i)
                if (!(fabs(after[i] - before[i]) <= worst)) worst = fabs(after[i] - before[i]);
            float zero[3 * N] = {0};
            CHECK_OK(pbd_particles_set_velocities(w, r, zero));
        }
        pbd_world_destroy(w);
    }
    CHECK_MSG(worst < 5e-6, "worst correction under rigid transforms %g", worst);
    /* lattice regions (w = 1) of a 4x3x3 block, flipped end over end */
    pbd_world *w = pbdt_world(0);
    int cells[3 * 36];
    CHECK_OK(pbd_sm_lattice_box(4, 3, 3, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 36;
    ld.spacing = 0.25f;
    ld.body.mode = PBD_SM_LINEAR;
    pbd_sm_body b = {0};
    pbd_range range;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &range));
    CHECK(range.count == 36 && sms_regions(w, b) == 36);
    float lrest[3 * 36];
    CHECK_OK(pbd_particles_get_positions(w, range, lrest));
    double R[9], t[3] = {1, 2, 3};
    sms_axis_angle(0, 0, 1, SMS_PI, R);
    sms_place(w, range.first, 36, lrest, R, t);
    double e = sms_goal_error(b, w, range.first, 36);
    CHECK_MSG(e < 5e-6, "lattice: goal error after a half turn %g", e);
    pbd_world_destroy(w);
}

/* Flat and collinear clusters (singular A_qq) give finite goals in every
   mode, zero correction under rigid motion, and stay finite when deformed
   and simulated. */
TEST(sm_shape_flat_and_collinear_no_nan) {
    enum { N = 12 };
    float flat[3 * N], line[3 * N];
    for (int i = 0; i < N; ++i) {
        flat[3 * i] = (float)(i % 4) * 0.3f;
        flat[3 * i + 1] = 0.2f * (float)(i / 4);
        flat[3 * i + 2] = 1.0f;
        line[3 * i] = 0.1f * (float)i;
        line[3 * i + 1] = 0.05f * (float)i;
        line[3 * i + 2] = -0.2f * (float)i;
    }
    const float *shapes[2] = {flat, line};
    unsigned st = 9;
    for (int s = 0; s < 2; ++s)
        for (int mode = 0; mode < 3; ++mode) {
            pbd_world *w = pbdt_world(-9.81f);
            int first = sms_add_points(w, N, shapes[s], 1);
            int idx[N];
            sms_iota(idx, N, first);
            pbd_sm_body_desc d = pbd_sm_body_desc_default();
            d.particles = idx;
            d.particle_count = N;
            d.mode = (pbd_sm_mode)mode;
            d.beta = 0.5f;
            pbd_sm_body b = {0};
            CHECK_OK(pbd_sm_add_body(w, &d, &b));
            double R[9], t[3] = {0, 1, 0};
            sms_axis_angle(1, 1, 0, SMS_PI, R);
            sms_place(w, first, N, shapes[s], R, t);
            double e = sms_goal_error(b, w, first, N);
            CHECK_MSG(e < 5e-6, "shape %d mode %d: rigid correction %g", s, mode, e);
            /* random deformation, then fall for a while */
            float x[3 * N];
            pbd_range r = {first, N};
            for (int i = 0; i < 3 * N; ++i) x[i] = shapes[s][i] + 0.05f * (pbdt_rand(&st) - 0.5f);
            CHECK_OK(pbd_particles_set_positions(w, r, x));
            for (int f = 0; f < 30; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
            CHECK_OK(pbd_particles_get_positions(w, r, x));
            CHECK_MSG(sms_finite(x, 3 * N), "shape %d mode %d: NaN after stepping", s, mode);
            float q[4];
            CHECK_OK(pbd_sm_body_rotation(w, b, 0, q));
            CHECK(sms_finite(q, 4));
            pbd_world_destroy(w);
        }
}

/* Mueller et al. 2005: LINEAR with beta = 1 reproduces any volume-
   preserving affine deformation exactly (RIGID does not); QUADRATIC with
   beta = 1 reproduces a quadratic deformation exactly (LINEAR does not). */
TEST(sm_shape_linear_and_quadratic_modes) {
    enum { N = 64 };
    float rest[3 * N], affine[3 * N], quad[3 * N];
    int k = 0;
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 4; ++l, ++k) {
                rest[3 * k] = 0.2f * i;
                rest[3 * k + 1] = 0.2f * j;
                rest[3 * k + 2] = 0.2f * l;
            }
    for (int i = 0; i < N; ++i) {
        float X = rest[3 * i], Y = rest[3 * i + 1], Z = rest[3 * i + 2];
        affine[3 * i] = X + 0.4f * Y;
        affine[3 * i + 1] = Y;
        affine[3 * i + 2] = Z + 1; /* shear, det 1 */
        quad[3 * i] = X + 0.5f * Y * Y;
        quad[3 * i + 1] = Y + 0.3f * X * Z;
        quad[3 * i + 2] = Z;
    }
    struct {
        pbd_sm_mode mode;
        const float *shape;
        int exact;
    } cases[4] = {
        {PBD_SM_LINEAR, affine, 1}, {PBD_SM_RIGID, affine, 0}, {PBD_SM_QUADRATIC, quad, 1}, {PBD_SM_LINEAR, quad, 0}};
    for (int c = 0; c < 4; ++c) {
        pbd_world *w = pbdt_world(0);
        int first = sms_add_points(w, N, rest, 1);
        int idx[N];
        sms_iota(idx, N, first);
        pbd_sm_body_desc d = pbd_sm_body_desc_default();
        d.particles = idx;
        d.particle_count = N;
        d.mode = cases[c].mode;
        d.beta = 1.0f;
        pbd_sm_body b = {0};
        CHECK_OK(pbd_sm_add_body(w, &d, &b));
        pbd_range r = {first, N};
        CHECK_OK(pbd_particles_set_positions(w, r, cases[c].shape));
        double e = sms_goal_error(b, w, first, N);
        if (cases[c].exact) CHECK_MSG(e < 5e-6, "case %d: goals miss the deformation by %g", c, e);
        else CHECK_MSG(e > 1e-2, "case %d: a lower mode matched exactly (%g)", c, e);
        pbd_world_destroy(w);
    }
}

/* A region's corrections sum to zero: free flight of a deformed, spinning
   body keeps its linear momentum; with the core's distance constraints in
   the same world a shape-matched cube hangs from a rope at the rope's
   length and keeps its shape. */
TEST(sm_shape_momentum_and_core_constraints) {
    pbd_world *w = pbdt_world(0);
    int cells[3 * 27];
    CHECK_OK(pbd_sm_lattice_box(3, 3, 3, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 27;
    ld.spacing = 0.1f;
    ld.body.mode = PBD_SM_LINEAR;
    pbd_sm_body b = {0};
    pbd_range r;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
    float x[81], v[81];
    unsigned st = 4;
    CHECK_OK(pbd_particles_get_positions(w, r, x));
    for (int i = 0; i < 81; ++i) {
        x[i] += 0.03f * (pbdt_rand(&st) - 0.5f);
        v[i] = 2.0f * (pbdt_rand(&st) - 0.5f);
    }
    CHECK_OK(pbd_particles_set_positions(w, r, x));
    CHECK_OK(pbd_particles_set_velocities(w, r, v));
    double P0[3] = {0, 0, 0};
    for (int i = 0; i < 27; ++i)
        for (int a = 0; a < 3; ++a) P0[a] += v[3 * i + a];
    for (int f = 0; f < 30; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    CHECK_OK(pbd_particles_get_velocities(w, r, v));
    double P1[3] = {0, 0, 0};
    for (int i = 0; i < 27; ++i)
        for (int a = 0; a < 3; ++a) P1[a] += v[3 * i + a];
    for (int a = 0; a < 3; ++a) CHECK_NEAR(P1[a], P0[a], 1e-3);
    pbd_world_destroy(w);

    /* a cube hanging from a rope of 5 distance constraints */
    w = pbdt_world(-9.81f);
    ld.origin[0] = -0.1f;
    ld.origin[1] = -0.2f;
    ld.origin[2] = -0.1f; /* top face at y = 0 */
    ld.body.mode = PBD_SM_RIGID;
    ld.particle_mass = 0.05f;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
    float rope[18];
    for (int i = 0; i < 6; ++i) {
        rope[3 * i] = 0;
        rope[3 * i + 1] = 0.1f * (6 - i);
        rope[3 * i + 2] = 0;
    }
    int rf = sms_add_points(w, 6, rope, 1.0f);
    CHECK_OK(pbd_particle_pin(w, rf));
    int links[12];
    for (int i = 0; i < 5; ++i) {
        links[2 * i] = rf + i;
        links[2 * i + 1] = rf + i + 1;
    }
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 5;
    cd.indices = links;
    pbd_group g;
    CHECK_OK(pbd_add_constraints(w, &cd, &g));
    int hook[2] = {rf + 5, r.first + 16}; /* the centre of the cube's top face (cell 1,2,1) */
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    ad.count = 1;
    ad.particles = &hook[1];
    ad.target_particles = &hook[0];
    CHECK_OK(pbd_add_attachments(w, &ad, &g));
    CHECK_OK(pbd_world_set_point_damping(w, 2.0f));
    for (int f = 0; f < 240; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    const float *X = pbd_world_positions(w);
    /* hook ~0.5 m below the pin (rope stretch small: rigid XPBD constraints) */
    CHECK_NEAR(X[4 * (rf + 5) + 1], 0.1, 0.02);
    CHECK_NEAR(X[4 * hook[1] + 1], X[4 * (rf + 5) + 1], 0.02);
    float goals[81];
    CHECK_OK(pbd_sm_body_goals(w, b, goals));
    double dev = 0;
    for (int i = 0; i < 27; ++i)
        for (int a = 0; a < 3; ++a) dev = fmax(dev, fabs(goals[3 * i + a] - X[4 * (r.first + i) + a]));
    CHECK_MSG(dev < 0.01, "the hanging cube deviates %g from its shape", dev);
    CHECK(sms_finite(X, 4 * pbd_world_particle_count(w)));
    pbd_world_destroy(w);
}

/* Stiffness alpha is per substep: with the survey 3.3 correction a fixed
   goal is approached by the fraction alpha in one substep whatever the
   iteration count; without it alpha acts per projection, (1 - alpha)^n. */
TEST(sm_shape_stiffness_per_substep) {
    float pos[3 * 9];
    for (int i = 0; i < 8; ++i) {
        pos[3 * i] = (float)(i & 1);
        pos[3 * i + 1] = (float)((i >> 1) & 1);
        pos[3 * i + 2] = (float)(i >> 2);
    }
    pos[24] = pos[25] = pos[26] = 0.5f;
    float mass[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1e-6f}; /* the centre barely moves the match */
    for (int corr = 0; corr < 2; ++corr)
        for (int n = 1; n <= 9; n += 4) {
            pbd_world *w = pbdt_world(0);
            CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, n));
            int first = sms_add_points(w, 9, pos, 1), idx[9];
            sms_iota(idx, 9, first);
            for (int i = 0; i < 8; ++i) CHECK_OK(pbd_particle_pin(w, first + i));
            pbd_sm_body_desc d = pbd_sm_body_desc_default();
            d.particles = idx;
            d.particle_count = 9;
            d.masses = mass;
            d.stiffness = 0.5f;
            d.stiffness_correction = corr;
            CHECK_OK(pbd_sm_add_body(w, &d, NULL));
            float moved[3] = {0.7f, 0.5f, 0.5f};
            pbd_range one = {first + 8, 1};
            CHECK_OK(pbd_particles_set_positions(w, one, moved));
            CHECK_OK(pbd_world_step(w, 0.01f));
            const float *x = pbd_world_positions(w);
            double left = (x[4 * (first + 8)] - 0.5) / 0.2, want = corr ? 0.5 : pow(0.5, n);
            CHECK_MSG(fabs(left - want) < 1e-4, "correction %d, %d iterations: %g of the offset left, wanted %g", corr,
                      n, left, want);
            pbd_world_destroy(w);
        }
}

/* Survey Figure 16: larger regions are stiffer. A beam clamped at one end
   sags less under gravity as the region half-width w grows 1, 2, 3. */
static double sms_beam_sag(int half_width) {
    enum { NX = 16, NY = 2, NZ = 2, N = NX * NY * NZ };
    pbd_world_desc wd = pbd_world_desc_default();
    wd.point_damping = 3.0f;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return -1;
    int cells[3 * N];
    pbd_sm_lattice_box(NX, NY, NZ, cells);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = N;
    ld.spacing = 0.1f;
    ld.half_width = half_width;
    pbd_sm_body b = {0};
    pbd_range r;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
    for (int i = 0; i < N; ++i)
        if (cells[3 * i] < 2) CHECK_OK(pbd_particle_pin(w, r.first + i));
    for (int f = 0; f < 150; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60)); /* settled (damped) */
    const float *x = pbd_world_positions(w);
    double sag = 0;
    int tips = 0;
    for (int i = 0; i < N; ++i)
        if (cells[3 * i] == NX - 1) {
            sag += -(x[4 * (r.first + i) + 1] - 0.1f * cells[3 * i + 1]);
            tips++;
        }
    pbd_world_destroy(w);
    return sag / tips;
}

TEST(sm_shape_stiffness_rises_with_region_size) {
    double s1 = sms_beam_sag(1), s2 = sms_beam_sag(2), s3 = sms_beam_sag(3);
    CHECK_MSG(s1 > 0 && s1 < 1.6, "w=1 sag %g", s1);
    CHECK_MSG(s1 > s2 && s2 > s3 && s3 > 0, "sag must fall with w: %g %g %g", s1, s2, s3);
}

/* Plasticity (survey 4.5.2): a block squeezed beyond yield and held keeps
   a permanent deformation once released, with det(S_p) = 1; squeezed
   below yield it returns to its rest shape and S_p stays I. */
static double sms_squeeze(float squeeze, int hold_frames, double *det_err, double *sp_dist, double *volume) {
    enum { NS = 4, N = NS * NS * NS };
    pbd_world_desc wd = pbd_world_desc_default();
    wd.gravity[1] = 0;
    wd.point_damping = 4.0f;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return -1;
    int cells[3 * N];
    pbd_sm_lattice_box(NS, NS, NS, cells);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = N;
    ld.spacing = 0.1f;
    ld.half_width = 1;
    ld.body.yield = 0.05f;
    ld.body.creep = 20.0f;
    ld.body.max_plastic = 0.6f;
    pbd_sm_body b = {0};
    pbd_range r;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
    /* squeeze along y (volume-preserving stretch in x and z), held by pins */
    float x[3 * N], zero[3 * N] = {0};
    float sy = 1 - squeeze, sxz = 1 / sqrtf(sy);
    for (int i = 0; i < N; ++i) {
        x[3 * i] = 0.1f * cells[3 * i] * sxz;
        x[3 * i + 1] = 0.1f * cells[3 * i + 1] * sy;
        x[3 * i + 2] = 0.1f * cells[3 * i + 2] * sxz;
        CHECK_OK(pbd_particle_pin(w, r.first + i));
    }
    CHECK_OK(pbd_particles_set_positions(w, r, x));
    for (int f = 0; f < hold_frames; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    for (int i = 0; i < N; ++i) CHECK_OK(pbd_particle_unpin(w, r.first + i));
    CHECK_OK(pbd_particles_set_velocities(w, r, zero));
    for (int f = 0; f < 120; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    const float *X = pbd_world_positions(w);
    double lo = 1e9, hi = -1e9, ext[3][2] = {{1e9, -1e9}, {1e9, -1e9}, {1e9, -1e9}};
    for (int i = 0; i < N; ++i) {
        lo = fmin(lo, X[4 * (r.first + i) + 1]);
        hi = fmax(hi, X[4 * (r.first + i) + 1]);
        for (int a = 0; a < 3; ++a) {
            ext[a][0] = fmin(ext[a][0], X[4 * (r.first + i) + a]);
            ext[a][1] = fmax(ext[a][1], X[4 * (r.first + i) + a]);
        }
    }
    /* bounding-box volume relative to rest (the block stays a box, sheared little) */
    *volume = 1;
    for (int a = 0; a < 3; ++a) *volume *= (ext[a][1] - ext[a][0]) / (0.1 * (NS - 1));
    *det_err = 0;
    *sp_dist = 0;
    for (int reg = 0; reg < sms_regions(w, b); ++reg) {
        float S[9];
        CHECK_OK(pbd_sm_body_plastic_state(w, b, reg, S));
        double d = S[0] * (S[4] * S[8] - S[5] * S[7]) - S[1] * (S[3] * S[8] - S[5] * S[6]) +
                   S[2] * (S[3] * S[7] - S[4] * S[6]);
        *det_err = fmax(*det_err, fabs(d - 1));
        double dist = 0;
        for (int k = 0; k < 9; ++k) dist += (S[k] - (k % 4 == 0)) * (S[k] - (k % 4 == 0));
        *sp_dist = fmax(*sp_dist, sqrt(dist));
    }
    pbd_world_destroy(w);
    return (hi - lo) / (0.1 * (NS - 1)); /* height relative to rest */
}

TEST(sm_shape_plasticity) {
    double det_err, sp_dist, volume;
    double h_big = sms_squeeze(0.35f, 60, &det_err, &sp_dist, &volume);
    CHECK_MSG(h_big < 0.9, "beyond yield: height %g of rest, wanted a permanent squeeze", h_big);
    CHECK_MSG(det_err < 1e-4, "det(S_p) - 1 = %g", det_err);
    CHECK_MSG(sp_dist > 0.1 && sp_dist <= 0.6 + 1e-4, "||S_p - I|| = %g (max 0.6)", sp_dist);
    CHECK_MSG(fabs(volume - 1) < 0.01, "the permanently squeezed block's volume is %g of rest", volume);
    double h_small = sms_squeeze(0.02f, 60, &det_err, &sp_dist, &volume);
    CHECK_MSG(fabs(h_small - 1) < 2e-3, "below yield: height %g of rest", h_small);
    CHECK_MSG(sp_dist == 0, "below yield S_p moved by %g", sp_dist);
}

/* omega rings against graph distances computed by brute force. */
TEST(sm_shape_mesh_rings) {
    pbd_mesh m;
    float lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
    CHECK_OK(pbd_mesh_tet_box(3, 3, 2, lo, hi, &m));
    int nv = m.vertex_count;
    int *D = (int *)malloc(sizeof(int) * nv * nv);
    for (int i = 0; i < nv * nv; ++i) D[i] = (i / nv == i % nv) ? 0 : 1000;
    for (int t = 0; t < m.tet_count; ++t)
        for (int a = 0; a < 4; ++a)
            for (int c = 0; c < 4; ++c)
                if (a != c) D[m.tets[4 * t + a] * nv + m.tets[4 * t + c]] = 1;
    for (int k = 0; k < nv; ++k) /* Floyd-Warshall */
        for (int i = 0; i < nv; ++i)
            for (int j = 0; j < nv; ++j)
                if (D[i * nv + k] + D[k * nv + j] < D[i * nv + j]) D[i * nv + j] = D[i * nv + k] + D[k * nv + j];
    for (int omega = 1; omega <= 2; ++omega) {
        int total = 0, *start = (int *)malloc(sizeof(int) * (nv + 1));
        CHECK_OK(pbd_sm_mesh_rings(nv, m.tets, m.tet_count, 4, omega, start, NULL, 0, &total));
        int *list = (int *)malloc(sizeof(int) * total);
        CHECK_OK(pbd_sm_mesh_rings(nv, m.tets, m.tet_count, 4, omega, start, list, total, &total));
        for (int i = 0; i < nv; ++i) {
            int want = 0;
            for (int j = 0; j < nv; ++j) want += D[i * nv + j] <= omega;
            CHECK(start[i + 1] - start[i] == want);
            for (int e = start[i]; e < start[i + 1]; ++e) {
                CHECK(D[i * nv + list[e]] <= omega);
                if (e > start[i]) CHECK(list[e] > list[e - 1]);
            }
        }
        free(start);
        free(list);
    }
    int st2[3], tot;
    int bad_el[3] = {0, 1, 99};
    CHECK_ERROR(pbd_sm_mesh_rings(2, bad_el, 1, 3, 1, st2, NULL, 0, &tot), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "element 0 names vertex 99, outside 0..1");
    CHECK_ERROR(pbd_sm_mesh_rings(2, bad_el, 1, 5, 1, st2, NULL, 0, &tot), PBD_ERROR_INVALID_ARGUMENT, "arity 5");
    CHECK_ERROR(pbd_sm_mesh_rings(2, bad_el, 1, 3, 0, st2, NULL, 0, &tot), PBD_ERROR_INVALID_ARGUMENT, "omega 0");
    CHECK_ERROR(pbd_sm_mesh_rings(2, NULL, 1, 3, 1, st2, NULL, 0, &tot), PBD_ERROR_NULL_POINTER,
                "elements is NULL while element_count is 1");
    pbd_sm_sum_plan *p = NULL;
    CHECK_ERROR(pbd_sm_plan_rings(2, bad_el, 1, 3, 1, &p), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "element 0 names vertex 99, outside 0..1");
    CHECK(p == NULL);
    free(D);
    pbd_mesh_free(&m);
}

/* A mesh in which no cell centre lies inside at the spacing - open (one
   triangle encloses nothing), or closed but smaller than a cell - gave 0
   cells and PBD_OK, which pbd_sm_add_lattice then refuses as cell_count 0;
   it is refused with DEGENERATE (as pbd.h refuses a mesh that encloses no
   volume), saying so, and origin and count keep their values. */
TEST(sm_shape_voxelize_refuses_a_mesh_that_encloses_no_cell) {
    /* open: one triangle (it enclosed nothing: 0 cells and PBD_OK, once),
       and a sphere with a hole or a flipped triangle, whose rays need not
       pair up into insides */
    float tri_pos[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, origin[3] = {7, 7, 7};
    int one[3] = {0, 1, 2}, count = -1, cells[3 * 4];
    CHECK_ERROR(pbd_sm_voxelize(tri_pos, 3, one, 1, 0.1f, origin, cells, 4, &count), PBD_ERROR_NOT_CLOSED,
                "pbd_sm_voxelize: edge (0, 1) has no opposite edge");
    CHECK(count == -1 && origin[0] == 7 && origin[1] == 7 && origin[2] == 7);
    pbd_mesh m;
    float c[3] = {0.1f, 0.2f, 0.3f};
    CHECK_OK(pbd_mesh_sphere(1, c, 0.3f, &m));
    CHECK_ERROR(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count - 1, 0.05f, origin, NULL, 0, &count),
        PBD_ERROR_NOT_CLOSED, "has no opposite edge (the surface is not closed");
    int *flipped = (int *)malloc(sizeof(int) * 3 * (size_t)m.triangle_count);
    memcpy(flipped, m.triangles, sizeof(int) * 3 * (size_t)m.triangle_count);
    int t = flipped[3];
    flipped[3] = flipped[4];
    flipped[4] = t; /* triangle 1 the other way round */
    CHECK_ERROR(pbd_sm_voxelize(m.positions, m.vertex_count, flipped, m.triangle_count, 0.05f, origin, NULL, 0, &count),
                PBD_ERROR_NOT_CLOSED, "in two triangles in the same direction");
    CHECK(count == -1 && origin[0] == 7);
    free(flipped);
    pbd_mesh_free(&m);
    CHECK_OK(pbd_mesh_sphere(1, c, 0.01f, &m)); /* closed, 2 cm across */
    CHECK_ERROR(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 0.5f, origin, NULL, 0, &count),
        PBD_ERROR_DEGENERATE, "no cell centre lies inside the mesh at spacing 0.5");
    CHECK(count == -1 && origin[0] == 7);
    /* at a spacing finer than the sphere it has cells */
    CHECK_OK(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 0.002f, origin, NULL, 0, &count));
    CHECK(count > 0);
    pbd_mesh_free(&m);
}

/* Voxelising an icosphere: the cells fill the sphere's volume, every
   cell centre is inside, every point well inside has its cell; the
   result is a valid lattice body. */
TEST(sm_shape_voxelize_sphere) {
    pbd_mesh m;
    float c[3] = {0.1f, 0.2f, 0.3f}, origin[3];
    CHECK_OK(pbd_mesh_sphere(3, c, 0.5f, &m));
    int count = 0;
    CHECK_OK(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 0.05f, origin, NULL, 0, &count));
    int *cells = (int *)malloc(sizeof(int) * 3 * (size_t)count), again = 0;
    CHECK_OK(pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 0.05f, origin, cells, count,
                             &again));
    CHECK(again == count);
    double vol = 4.0 / 3.0 * 3.14159265 * 0.125, got = count * 0.05 * 0.05 * 0.05;
    CHECK_MSG(fabs(got / vol - 1) < 0.05, "voxel volume %g of the sphere's %g", got, vol);
    int inside = 0, outside = 0;
    for (int i = 0; i < count; ++i) {
        double r = 0;
        for (int a = 0; a < 3; ++a) {
            double d = origin[a] + 0.05 * cells[3 * i + a] - c[a];
            r += d * d;
        }
        if (sqrt(r) > 0.5) outside++;
        if (sqrt(r) < 0.45) inside++;
    }
    CHECK(outside == 0);
    int want = 0; /* cells whose centre is within 0.45 */
    for (int k = 0; k < 22; ++k)
        for (int j = 0; j < 22; ++j)
            for (int i = 0; i < 22; ++i) {
                double x = origin[0] + 0.05 * i - c[0], y = origin[1] + 0.05 * j - c[1],
                       z = origin[2] + 0.05 * k - c[2];
                want += sqrt(x * x + y * y + z * z) < 0.45;
            }
    CHECK(inside == want);
    pbd_world *w = pbdt_world(-9.81f);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = count;
    ld.spacing = 0.05f;
    memcpy(ld.origin, origin, sizeof origin);
    pbd_range r;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, &r));
    CHECK(r.count == count);
    int bad_tri[3] = {0, 1, 100000};
    CHECK_RESULT(pbd_sm_voxelize(m.positions, m.vertex_count, bad_tri, 1, 0.05f, origin, NULL, 0, &count),
                 PBD_ERROR_INDEX_OUT_OF_RANGE);
    CHECK_RESULT(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 0, origin, NULL, 0, &count),
        PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 1e-9f, origin, NULL, 0, &count),
        PBD_ERROR_OVERFLOW);
    pbd_world_destroy(w);
    free(cells);
    pbd_mesh_free(&m);
}

/* Any plan plugs in: a lattice body summed through a naive plan of the
   same regions (taken from the lattice plan's lists) gives the goals of
   the default lattice plan, up to the summation's rounding. */
TEST(sm_shape_lattice_with_any_plan) {
    enum { N = 60 };
    int cells[3 * N];
    CHECK_OK(pbd_sm_lattice_box(5, 4, 3, cells));
    pbd_sm_sum_plan *lat = NULL, *naive = NULL;
    CHECK_OK(pbd_sm_plan_lattice(N, cells, 2, &lat));
    int start[N + 1], *list = (int *)malloc(sizeof(int) * N * N), cnt = 0;
    start[0] = 0;
    for (int r = 0; r < N; ++r) {
        CHECK_OK(pbd_sm_plan_region(lat, r, list + start[r], N, &cnt));
        start[r + 1] = start[r] + cnt;
    }
    CHECK_OK(pbd_sm_plan_naive(N, N, start, list, &naive));
    float goals[2][3 * N];
    unsigned st = 21;
    float jitter[3 * N];
    for (int i = 0; i < 3 * N; ++i) jitter[i] = 0.02f * (pbdt_rand(&st) - 0.5f);
    for (int k = 0; k < 2; ++k) {
        pbd_world *w = pbdt_world(0);
        pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
        ld.cells = cells;
        ld.cell_count = N;
        ld.half_width = 2;
        ld.body.mode = PBD_SM_QUADRATIC;
        ld.body.plan = k ? naive : NULL; /* borrowed */
        pbd_sm_body b = {0};
        pbd_range r;
        CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
        CHECK(sms_plan(w, b) != NULL && (k == 0 || sms_plan(w, b) == naive));
        float x[3 * N];
        CHECK_OK(pbd_particles_get_positions(w, r, x));
        for (int i = 0; i < 3 * N; ++i) x[i] += jitter[i];
        CHECK_OK(pbd_particles_set_positions(w, r, x));
        CHECK_OK(pbd_sm_body_goals(w, b, goals[k]));
        pbd_world_destroy(w);
    }
    double worst = 0;
    for (int i = 0; i < 3 * N; ++i) worst = fmax(worst, fabs(goals[0][i] - goals[1][i]));
    CHECK_MSG(worst < 1e-5, "goals with the lattice and the naive plan differ by %g", worst);
    pbd_sm_plan_destroy(naive); /* borrowed: still ours */
    pbd_sm_plan_destroy(lat);
    free(list);
}

/* owns_plan is a switch (pbd.h CONVENTIONS): 2 or -1 was taken as 1,
   handing the caller's plan to the body. pbd_sm_add_body and
   pbd_sm_add_lattice's body refuse it, naming it and its value, with the
   world unchanged and the plan still the caller's. */
TEST(sm_shape_owns_plan_takes_0_or_1) {
    enum { N = 8 };
    int cells[3 * N];
    CHECK_OK(pbd_sm_lattice_box(2, 2, 2, cells));
    pbd_sm_sum_plan *plan = NULL;
    CHECK_OK(pbd_sm_plan_lattice(N, cells, 1, &plan));
    pbd_world *w = pbdt_world(-9.81f);
    float pos[3 * N];
    for (int i = 0; i < 3 * N; ++i) pos[i] = 0.1f * (float)cells[i];
    int idx[N];
    sms_iota(idx, N, sms_add_points(w, N, pos, 1));
    size_t size, size_after;
    unsigned char *before = pbdt_save(w, &size);
    pbd_sm_body b = {0};
    static const int bad[2] = {2, -1};
    for (int k = 0; k < 2; ++k) {
        char said[64];
        snprintf(said, sizeof said, "pbd_sm_add_body: owns_plan %d must be 0 or 1", bad[k]);
        pbd_sm_body_desc d = pbd_sm_body_desc_default();
        d.particles = idx;
        d.particle_count = N;
        d.owns_plan = bad[k];
        CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT, said);
        d.plan = plan;
        CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT, said);
        pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
        ld.cells = cells;
        ld.cell_count = N;
        ld.body.plan = plan;
        ld.body.owns_plan = bad[k];
        snprintf(said, sizeof said, "pbd_sm_add_lattice: owns_plan %d must be 0 or 1", bad[k]);
        CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT, said);
    }
    CHECK(b.id == 0 && pbd_world_plugin_count(w) == 0);
    unsigned char *after = pbdt_save(w, &size_after);
    CHECK(size > 0 && size_after == size && memcmp(before, after, size) == 0);
    free(before);
    free(after);
    pbd_world_destroy(w);
    CHECK(pbd_sm_plan_particle_count(plan) == N); /* still the caller's */
    pbd_sm_plan_destroy(plan);
}

/* Bad input returns its error and leaves the world byte-identical. */
TEST(sm_shape_bad_input) {
    enum { N = 8 };
    float pos[3 * N];
    for (int i = 0; i < N; ++i) {
        pos[3 * i] = (float)(i & 1);
        pos[3 * i + 1] = (float)((i >> 1) & 1);
        pos[3 * i + 2] = (float)(i >> 2);
    }
    pbd_world *w = pbdt_world(-9.81f);
    int first = sms_add_points(w, N, pos, 1);
    int idx[N];
    sms_iota(idx, N, first);
    size_t size = pbd_world_snapshot_size(w);
    void *before = malloc(size), *after = malloc(size);
    CHECK_OK(pbd_world_save(w, before, size));
    pbd_sm_body b = {0};
    pbd_sm_body_desc d = pbd_sm_body_desc_default();
    d.particles = idx;
    d.particle_count = N;
#define SMS_BAD(want)                                   \
    do {                                                \
        CHECK_RESULT(pbd_sm_add_body(w, &d, &b), want); \
        d = pbd_sm_body_desc_default();                 \
        d.particles = idx;                              \
        d.particle_count = N;                           \
    } while (0)
    CHECK_ERROR(pbd_sm_add_body(NULL, &d, &b), PBD_ERROR_NULL_POINTER, "w is NULL");
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, NULL, &b), PBD_ERROR_NULL_POINTER, "d is NULL");
    d.particles = NULL;
    SMS_BAD(PBD_ERROR_NULL_POINTER);
    d.stiffness_correction = 2; /* switches: 0 or 1 */
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT, "stiffness_correction 2");
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.mark_coupled = -1;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.particle_count = 0;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT); /* empty cluster */
    int start[3] = {0, 4, 4}, list[4] = {0, 1, 2, 3};
    d.region_count = 2;
    d.region_start = start;
    d.region_particles = list;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT); /* an empty region */
    /* regions without region_start: they were one cluster, silently */
    d.region_count = 2;
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_NULL_POINTER,
                      "region_start is NULL while region_count is 2");
    SMS_BAD(PBD_ERROR_NULL_POINTER);
    d.region_particles = list;
    SMS_BAD(PBD_ERROR_NULL_POINTER);
    /* lists that leave particles 4..7 in no region: they would never be matched */
    int start_part[2] = {0, 4};
    d.region_count = 1;
    d.region_start = start_part;
    d.region_particles = list;
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT,
                      "4 of the 8 particles are in no region (the first: local particle 4)");
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    int oob[N];
    sms_iota(oob, N, first);
    oob[3] = N + 5;
    d.particles = oob;
    /* the messages name the entry and the particle, in words (they were
       "rejected because d->particles[i] < 0 || ..." and "duplicate (seen[j]++)") */
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INDEX_OUT_OF_RANGE, "particles[3] =");
    SMS_BAD(PBD_ERROR_INDEX_OUT_OF_RANGE); /* out-of-range particle */
    oob[3] = -1;
    d.particles = oob;
    SMS_BAD(PBD_ERROR_INDEX_OUT_OF_RANGE);
    int list_oob[4] = {0, 1, 2, N};
    int start1[2] = {0, 4};
    d.region_count = 1;
    d.region_start = start1;
    d.region_particles = list_oob;
    SMS_BAD(PBD_ERROR_INDEX_OUT_OF_RANGE); /* out-of-range local index */
    int dup[N];
    sms_iota(dup, N, first);
    dup[5] = dup[2];
    d.particles = dup;
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT, "(particles[2] and particles[5])");
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT); /* duplicate particle */
    float zero_m[N] = {0};
    d.masses = zero_m;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT); /* zero total mass */
    float neg_m[N] = {1, 1, 1, -1, 1, 1, 1, 1};
    d.masses = neg_m;
    SMS_BAD(PBD_ERROR_NEGATIVE_MASS);
    float tiny_m[N] = {1, 1, 1, 1e-39f, 1, 1, 1, 1}; /* its inverse is not finite */
    d.masses = tiny_m;
    if (PBDT_SUBNORMALS) {
        CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT, "is 1e-39 kg, outside");
        SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    }
    float huge_m[N] = {1, 1, 1, 1e18f, 1, 1, 1, 1};
    d.masses = huge_m;
    CHECK_WORLD_ERROR(w, pbd_sm_add_body(w, &d, &b), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_MASS");
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    float same[3 * N];
    for (int i = 0; i < 3 * N; ++i) same[i] = 0.5f;
    d.rest_positions = same;
    SMS_BAD(PBD_ERROR_DEGENERATE); /* degenerate rest shape */
    float nan_rest[3 * N];
    memcpy(nan_rest, pos, sizeof pos);
    nan_rest[7] = NAN;
    d.rest_positions = nan_rest;
    SMS_BAD(PBD_ERROR_NOT_FINITE);
    d.beta = 1.5f;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.stiffness = -0.1f;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.stiffness = NAN;
    SMS_BAD(PBD_ERROR_NOT_FINITE);
    d.volume = 1.5f;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.volume = -0.1f;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.volume = NAN;
    SMS_BAD(PBD_ERROR_NOT_FINITE);
    d.creep = -1;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.max_plastic = 0;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    d.mode = (pbd_sm_mode)7;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    pbd_sm_sum_plan *plan = NULL;
    int start_all[2] = {0, N - 1}, all[N];
    sms_iota(all, N, 0);
    CHECK_OK(pbd_sm_plan_naive(N - 1, 1, start_all, all, &plan));
    d.plan = plan;
    d.owns_plan = 1;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT); /* plan of another size */
    d.plan = plan;
    d.region_start = start;
    SMS_BAD(PBD_ERROR_INVALID_ARGUMENT);
    pbd_sm_plan_destroy(plan); /* still ours after the failures */
    /* a region of one particle has no shape */
    int start_one[3] = {0, 1, N}, list_one[N];
    sms_iota(list_one, N, 0);
    d.region_count = 2;
    d.region_start = start_one;
    d.region_particles = list_one;
    SMS_BAD(PBD_ERROR_DEGENERATE);
    /* lattices */
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    int cells[6] = {0, 0, 0, 0, 0, 0};
    ld.cells = cells;
    ld.cell_count = 2;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "particles 0 and 1 are in one lattice cell"); /* one cell twice */
    cells[3] = 5;
    ld.half_width = 1; /* regions of half-width 1 (the default is one cluster): isolated cells */
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_DEGENERATE,
                      "region 0: all its rest positions coincide");
    cells[3] = 1;
    ld.spacing = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT, "spacing 0 must be > 0");
    ld.spacing = 0.1f;
    ld.half_width = -1; /* 0 is the default: the whole body in RIGID mode */
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "pbd_sm_add_lattice: half_width -1 < 0");
    ld.half_width = 1;
    ld.particle_mass = -1;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_NEGATIVE_MASS, "particle_mass -1 < 0");
    ld.particle_mass = 1e-39f; /* the messages name the lattice's fields, not the particles' "mass" and "radius" */
    if (PBDT_SUBNORMALS)
        CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                          "particle_mass 1e-39 kg must be in [PBD_MIN_MASS, PBD_MAX_MASS]");
    ld.particle_mass = nextafterf(PBD_MIN_MASS, 0.0f); /* %g printed "1e-12 kg must be in [1e-12, ...]" */
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "particle_mass 9.999999e-13 kg must be in [PBD_MIN_MASS, PBD_MAX_MASS] = [1e-12, 1e+12] kg");
    ld.particle_mass = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "particle_mass 0 kg must be in [PBD_MIN_MASS, PBD_MAX_MASS]");
    ld.particle_mass = 1;
    ld.spacing = 100;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "the particle radius 50 m (radius 0: spacing / 2) is above PBD_MAX_RADIUS");
    ld.radius = 20;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "the particle radius 20 m (radius) is above PBD_MAX_RADIUS");
    ld.radius = 0;
    ld.spacing = 0.1f;
    /* beyond PBD_MAX_COORDINATE, with regions and as one cluster: refused
       naming the cell, before the body is built (pbd_add_particles
       refused them once, after it, and that error path freed the plan
       twice; it still frees the plan once: see pbd_sm_add_lattice) */
    ld.origin[1] = 2e6f;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "cell 0 (0, 0, 0) lies at y = origin 2e+06 + spacing 0.1 x 0 = 2e+06 m, beyond "
                      "PBD_MAX_COORDINATE");
    ld.half_width = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_COORDINATE");
    ld.half_width = 1;
    ld.origin[1] = 0;
    ld.radius = 0.05f;
    ld.spacing = 2e6f; /* cell 1, (1, 0, 0), at x = 2e6 m */
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "cell 1 (1, 0, 0) lies at x = origin 0 + spacing 2e+06 x 1 = 2e+06 m");
    cells[3] = 1000000;
    ld.spacing = 1e33f; /* at infinity */
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_NOT_FINITE,
                      "cell 1 (1000000, 0, 0) lies at x");
    cells[3] = 1;
    ld.spacing = 0.1f;
    ld.origin[1] = NAN; /* the one value at fault (all six were listed) */
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_NOT_FINITE,
                      "pbd_sm_add_lattice: origin[1] nan is not finite");
    ld.origin[1] = 0;
    ld.radius = -1;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "pbd_sm_add_lattice: radius -1 must be >= 0");
    ld.radius = 0;
    ld.cells = NULL;
    CHECK_WORLD_ERROR(w, pbd_sm_add_lattice(w, &ld, &b, NULL), PBD_ERROR_NULL_POINTER,
                      "pbd_sm_lattice_desc.cells is NULL");
    CHECK_ERROR(pbd_sm_lattice_box(0, 1, 1, cells), PBD_ERROR_INVALID_ARGUMENT, "nx 0");
    CHECK(b.id == 0);
    CHECK(pbd_world_plugin_count(w) == 0);
    CHECK(pbd_world_snapshot_size(w) == size);
    CHECK_OK(pbd_world_save(w, after, size));
    CHECK(memcmp(before, after, size) == 0);
    /* a valid body; then bad parameter changes leave it as it was */
    CHECK_OK(pbd_sm_add_body(w, &d, &b));
    CHECK_WORLD_ERROR(w, pbd_sm_body_set_stiffness(w, b, 2), PBD_ERROR_INVALID_ARGUMENT, "stiffness 2");
    CHECK_WORLD_ERROR(w, pbd_sm_body_set_mode(w, b, PBD_SM_QUADRATIC, 0.5f), PBD_ERROR_INVALID_ARGUMENT,
                      "PBD_SM_QUADRATIC is chosen when the body is added");
    CHECK_WORLD_ERROR(w, pbd_sm_body_set_plasticity(w, b, -1, 1, 1), PBD_ERROR_INVALID_ARGUMENT, "yield -1");
    CHECK_WORLD_ERROR(w, pbd_sm_body_rotation(w, b, 1, NULL), PBD_ERROR_NULL_POINTER, "q is NULL");
    float q[4];
    CHECK_WORLD_ERROR(w, pbd_sm_body_rotation(w, b, 1, q), PBD_ERROR_INDEX_OUT_OF_RANGE, "region 1 outside 0..0");
    CHECK_WORLD_ERROR(w, pbd_sm_body_plastic_state(w, b, -1, q), PBD_ERROR_INDEX_OUT_OF_RANGE,
                      "region -1 outside 0..0");
    CHECK_WORLD_ERROR(w, pbd_sm_body_goals(w, b, NULL), PBD_ERROR_NULL_POINTER, "goals is NULL");
    pbd_world *other = pbdt_world(0);
    CHECK_WORLD_ERROR(other, pbd_sm_remove_body(other, b), PBD_ERROR_INVALID_HANDLE, "shape-matching body handle");
    pbd_world_destroy(other);
    pbd_sm_body none = {0};
    CHECK_WORLD_ERROR(w, pbd_sm_body_set_stiffness(w, none, 1), PBD_ERROR_INVALID_HANDLE,
                      "the shape-matching body handle is 0");
    CHECK_ERROR(pbd_sm_body_set_stiffness(NULL, b, 1), PBD_ERROR_NULL_POINTER, "w is NULL");
    CHECK_OK(pbd_sm_remove_body(w, b));
    CHECK(pbd_world_plugin_count(w) == 0); /* its plugin went with it */
    CHECK_OK(pbd_world_step(w, 0.01f));
    CHECK_WORLD_ERROR(w, pbd_sm_remove_body(w, b), PBD_ERROR_INVALID_HANDLE, "shape-matching body handle");
#undef SMS_BAD
    free(before);
    free(after);
    pbd_world_destroy(w);
}

/* Jelly blocks (linear mode, plasticity) dropped on a plane: 1 and 2
   threads give bit-identical positions, with the loops shared (parallel
   min 0) for symmetric lattice regions (blend as a plan sum) and for
   non-symmetric user lists (gather). Few substeps: a loaded machine makes
   every barrier slow. */
static void sms_jelly_run(int threads, float *out, int *n_out) {
    pbd_world *w = pbdt_world(-9.81f);
    float p0[3] = {0, 0, 0}, nrm[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p0, nrm, 0.5f, NULL));
    CHECK_OK(pbd_world_set_threads(w, threads));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 2, 2));
    int cells[3 * 125];
    CHECK_OK(pbd_sm_lattice_box(5, 5, 5, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 125;
    ld.origin[1] = 0.02f;
    ld.half_width = 2;
    ld.body.mode = PBD_SM_LINEAR;
    ld.body.creep = 10;
    ld.body.yield = 0.02f;
    pbd_sm_body b = {0};
    pbd_range r;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
    CHECK_OK(pbd_sm_body_set_parallel_min(w, b, 0)); /* share the loops even this small body's */
    /* a second body: quadratic clusters of 30 over a block, lists not symmetric */
    float pos[3 * 64];
    for (int i = 0; i < 64; ++i) {
        pos[3 * i] = 0.6f + 0.08f * (i & 3);
        pos[3 * i + 1] = 0.02f + 0.08f * ((i >> 2) & 3);
        pos[3 * i + 2] = 0.08f * (i >> 4);
    }
    int first = sms_add_points(w, 64, pos, 1), idx[64], start[4] = {0, 30, 60, 90}, list[90];
    sms_iota(idx, 64, first);
    for (int e = 0; e < 90; ++e) list[e] = (e * 7) % 64;
    pbd_sm_body_desc d = pbd_sm_body_desc_default();
    d.particles = idx;
    d.particle_count = 64;
    d.region_count = 3;
    d.region_start = start;
    d.region_particles = list;
    d.mode = PBD_SM_QUADRATIC;
    d.stiffness = 0.8f;
    d.creep = 5;
    pbd_sm_body b2 = {0};
    CHECK_OK(pbd_sm_add_body(w, &d, &b2));
    CHECK_OK(pbd_sm_body_set_parallel_min(w, b2, 0));
    float v[3 * 125];
    for (int i = 0; i < 125; ++i) {
        v[3 * i] = 0.3f;
        v[3 * i + 1] = -3.0f;
        v[3 * i + 2] = 0.1f * (i % 3);
    }
    CHECK_OK(pbd_particles_set_velocities(w, r, v));
    pbd_range r2 = {first, 64};
    CHECK_OK(pbd_particles_set_velocities(w, r2, v));
    for (int f = 0; f < 8; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    *n_out = pbd_world_particle_count(w);
    memcpy(out, pbd_world_positions(w), sizeof(float) * 4 * (size_t)*n_out);
    pbd_world_destroy(w);
}

TEST(sm_shape_threads_bit_identical) {
    pbdt_part(PBDT_THREADS, "2 threads == 1"); /* the landing is checked in every build */
    static float a[4 * 200], c[4 * 200];
    int na = 0, nc = 0;
    sms_jelly_run(1, a, &na);
    sms_jelly_run(2, c, &nc);
    CHECK(na == nc && na == 189);
    CHECK(sms_finite(a, 4 * na));
    CHECK_MSG(memcmp(a, c, sizeof(float) * 4 * (size_t)na) == 0, "1 and 2 threads differ");
    double ymin = 1e9;
    for (int i = 0; i < na; ++i) ymin = fmin(ymin, a[4 * i + 1]);
    CHECK_MSG(ymin > -0.05, "the jelly went through the ground (%g)", ymin);
}

/* The fast summation plans inside the world step (region sums and the
   blend shared by the team through pbd_sm_plan_sum_team): an adaptive
   octree block (level-0 shell, level-1 core) and a paths surface body,
   both with plasticity, give bit-identical positions for 1 and 2
   threads and with SIMD on or off (four regions' rotations at once), and
   the same as their naive twins up to rounding. The block spins (turns
   of more than 1e-3 rad per projection leave the SIMD batch) and lands. */
static void sms_fast_run(int threads, int naive, int simd, float *out, int *n_out) {
    pbd_world *w = pbdt_world(-9.81f);
    float p0[3] = {0, 0, 0}, nrm[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p0, nrm, 0.5f, NULL));
    CHECK_OK(pbd_world_set_threads(w, threads));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 2, 2));
    /* octree: an 8^3 block of level-0 cells with its 4^3 core as level-1 cells */
    int oc[4 * 512], n = 0;
    float pos[3 * 512];
    for (int z = 0; z < 8; ++z)
        for (int y = 0; y < 8; ++y)
            for (int x = 0; x < 8; ++x) {
                int core = x >= 2 && x < 6 && y >= 2 && y < 6 && z >= 2 && z < 6;
                if (core && ((x | y | z) & 1)) continue; /* one level-1 cell per 2^3 */
                oc[4 * n] = core ? x / 2 : x;
                oc[4 * n + 1] = core ? y / 2 : y;
                oc[4 * n + 2] = core ? z / 2 : z;
                oc[4 * n + 3] = core;
                float h = core ? 0.1f : 0.05f;
                pos[3 * n] = 0.1f * (float)oc[4 * n] * (core ? 2 : 1) + h;
                pos[3 * n + 1] = 0.1f * (float)oc[4 * n + 1] * (core ? 2 : 1) + h + 0.02f;
                pos[3 * n + 2] = 0.1f * (float)oc[4 * n + 2] * (core ? 2 : 1) + h;
                n++;
            }
    int first = sms_add_points(w, n, pos, 1), idx[512];
    sms_iota(idx, n, first);
    pbd_sm_sum_plan *plan = NULL;
    CHECK_OK(pbd_sm_plan_octree(n, oc, NULL, 2, &plan));
    if (naive && plan) {
        int R = pbd_sm_plan_region_count(plan), total = 0, cnt = 0;
        int *start = (int *)malloc(sizeof(int) * (size_t)(R + 1)), *list = (int *)malloc(sizeof(int) * (size_t)R * 512);
        for (int r = 0; r < R; ++r) {
            start[r] = total;
            pbd_sm_plan_region(plan, r, list + total, 512, &cnt);
            total += cnt;
        }
        start[R] = total;
        pbd_sm_plan_destroy(plan);
        plan = NULL;
        CHECK_OK(pbd_sm_plan_naive(n, R, start, list, &plan));
        free(start);
        free(list);
    }
    if (plan) CHECK_OK(pbd_sm_plan_set_simd(plan, simd));
    pbd_sm_body_desc d = pbd_sm_body_desc_default();
    d.particles = idx;
    d.particle_count = n;
    d.plan = plan;
    d.owns_plan = 1;
    d.mode = PBD_SM_LINEAR;
    d.creep = 10;
    d.yield = 0.02f;
    pbd_sm_body b = {0};
    CHECK_OK(pbd_sm_add_body(w, &d, &b));
    CHECK_OK(pbd_sm_body_set_parallel_min(w, b, 0));
    static float vel[3 * 512];
    for (int i = 0; i < n; ++i) { /* a spin of 20 rad/s about y through the block's centre */
        vel[3 * i] = 20.0f * (pos[3 * i + 2] - 0.4f);
        vel[3 * i + 1] = 0;
        vel[3 * i + 2] = -20.0f * (pos[3 * i] - 0.4f);
    }
    pbd_range rb = {first, n};
    CHECK_OK(pbd_particles_set_velocities(w, rb, vel));
    /* paths: a 10 x 10 grid surface with 2-rings */
    float o[3] = {1.0f, 0.3f, 0}, u[3] = {0.05f, 0, 0}, v[3] = {0, 0, 0.05f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(10, 10, o, u, v, &m));
    int f2 = sms_add_points(w, m.vertex_count, m.positions, 1), idx2[121];
    sms_iota(idx2, m.vertex_count, f2);
    pbd_sm_sum_plan *pp = NULL;
    if (naive) CHECK_OK(pbd_sm_plan_rings(m.vertex_count, m.triangles, m.triangle_count, 3, 2, &pp));
    else CHECK_OK(pbd_sm_plan_paths(m.vertex_count, m.positions, m.triangle_count, m.triangles, 2, 0, &pp));
    pbd_sm_body_desc d2 = pbd_sm_body_desc_default();
    d2.particles = idx2;
    d2.particle_count = m.vertex_count;
    d2.plan = pp;
    d2.owns_plan = 1;
    d2.creep = 5;
    if (pp) CHECK_OK(pbd_sm_plan_set_simd(pp, simd));
    pbd_sm_body b2 = {0};
    CHECK_OK(pbd_sm_add_body(w, &d2, &b2));
    CHECK_OK(pbd_sm_body_set_parallel_min(w, b2, 0));
    pbd_mesh_free(&m);
    for (int f = 0; f < 8; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    *n_out = pbd_world_particle_count(w);
    memcpy(out, pbd_world_positions(w), sizeof(float) * 4 * (size_t)*n_out);
    pbd_world_destroy(w);
}

TEST(sm_shape_fast_sums_threads_bit_identical) {
    /* fast against naive sums is checked in every build */
    pbdt_parity(PBDT_SIMD_F64, PBDT_THREADS);
    static float a[4 * 700], c[4 * 700], e[4 * 700], f[4 * 700];
    int na = 0, nc = 0, ne = 0, nf = 0;
    sms_fast_run(1, 0, 1, a, &na);
    sms_fast_run(2, 0, 1, c, &nc);
    sms_fast_run(1, 1, 1, e, &ne);
    sms_fast_run(2, 0, 0, f, &nf);
    CHECK(na == nc && na == ne && na == nf && na > 400);
    CHECK(sms_finite(a, 4 * na));
    CHECK_MSG(memcmp(a, c, sizeof(float) * 4 * (size_t)na) == 0, "1 and 2 threads differ");
    CHECK_MSG(memcmp(a, f, sizeof(float) * 4 * (size_t)na) == 0, "SIMD and scalar differ");
    double worst = 0, fell = 0;
    for (int i = 0; i < na; ++i) {
        for (int k = 0; k < 3; ++k) worst = fmax(worst, fabs(a[4 * i + k] - e[4 * i + k]));
        fell = fmax(fell, 0.3 - a[4 * i + 1]);
    }
    CHECK_MSG(worst < 1e-4, "fast and naive sums differ by %g m", worst);
    CHECK_MSG(fell > 0.01, "nothing moved (%g)", fell); /* the surface falls */
}

/* A body holds on to its particles: pbd_remove_object of a cloth whose
   particles a body uses is refused (the message names the body's plugin)
   until the body is removed; a cloth no body uses goes, even when a body
   was added after it (on particles of higher index: a body names the
   particles it uses, not all below its last). */
TEST(sm_shape_remove_object_refused_while_a_body_uses_it) {
    pbd_world *w = pbdt_world(-9.81f);
    pbd_mesh m;
    float o[3] = {-0.5f, 1.0f, -0.5f}, u[3] = {0.3f, 0, 0}, v[3] = {0, 0, 0.3f};
    CHECK_OK(pbd_mesh_grid(4, 4, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    pbd_object used, unused;
    CHECK_OK(pbd_add_cloth(w, &cd, &used));
    o[0] = 1.0f;
    pbd_mesh_free(&m);
    CHECK_OK(pbd_mesh_grid(4, 4, o, u, v, &m));
    cd = pbdt_cloth_desc(&m);
    CHECK_OK(pbd_add_cloth(w, &cd, &unused));
    pbd_range ur = pbdt_parts(w, used).particles;
    int idx[16];
    sms_iota(idx, 16, ur.first);
    pbd_sm_body_desc d = pbd_sm_body_desc_default();
    d.particles = idx;
    d.particle_count = 16;
    pbd_sm_body body = {0};
    CHECK_OK(pbd_sm_add_body(w, &d, &body)); /* a rigid plate of the first cloth */
    int cells[3 * 8];
    CHECK_OK(pbd_sm_lattice_box(2, 2, 2, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 8;
    ld.origin[0] = 3.0f;
    pbd_sm_body later = {0};
    pbd_range lr;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &later, &lr));
    CHECK(lr.first > pbdt_parts(w, unused).particles.first);
    for (int s = 0; s < 5; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    int n = pbd_world_particle_count(w);
    CHECK_WORLD_ERROR(w, pbd_remove_object(w, used), PBD_ERROR_INVALID_ARGUMENT, "shape-matching body");
    CHECK(pbd_world_particle_count(w) == n && pbdt_parts(w, used).particles.count == 16);
    CHECK_OK(pbd_remove_object(w, unused));
    CHECK_OK(pbd_sm_remove_body(w, body));
    CHECK_OK(pbd_remove_object(w, used));
    /* the lattice's own particles: refused while its body lives */
    CHECK_WORLD_ERROR(w, pbd_remove_particles(w, lr), PBD_ERROR_INVALID_ARGUMENT, "shape-matching body");
    for (int s = 0; s < 5; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK(pbd_world_plugin_count(w) == 1);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

void suite_sm_shape(void) {
    RUN(sm_shape_goals_match_direct_evaluation);
    RUN(sm_shape_fast_sums_threads_bit_identical);
    RUN(sm_shape_rigid_transform_zero_correction);
    RUN(sm_shape_flat_and_collinear_no_nan);
    RUN(sm_shape_linear_and_quadratic_modes);
    RUN(sm_shape_momentum_and_core_constraints);
    RUN(sm_shape_stiffness_per_substep);
    RUN(sm_shape_stiffness_rises_with_region_size);
    RUN(sm_shape_plasticity);
    RUN(sm_shape_mesh_rings);
    RUN(sm_shape_voxelize_sphere);
    RUN(sm_shape_voxelize_refuses_a_mesh_that_encloses_no_cell);
    RUN(sm_shape_lattice_with_any_plan);
    RUN(sm_shape_bad_input);
    RUN(sm_shape_owns_plan_takes_0_or_1);
    RUN(sm_shape_remove_object_refused_while_a_body_uses_it);
    RUN(sm_shape_threads_bit_identical);
}
