/* tests/test_constraints.c - the stateless constraint functions and the
   XPBD / PBD projection (pbd.h section "constraints").

   Every constraint's analytic gradient is compared with finite differences
   of its own C at many random non-degenerate configurations; the values of
   C are compared with double-precision references; the XPBD projection is
   checked against its formula, for momentum conservation, and for solving
   one distance constraint exactly. */
#include "test.h"
#include <stdlib.h>

#define PBDT_PI 3.14159265358979323846
#define NCONFIG 50

/* ---- small double helpers ------------------------------------------------ */
static void d_sub(const float *a, const float *b, double *o) {
    o[0] = (double)a[0] - b[0];
    o[1] = (double)a[1] - b[1];
    o[2] = (double)a[2] - b[2];
}
static void d_cross(const double *a, const double *b, double *o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}
static double d_dot(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static double d_len(const double *a) { return sqrt(d_dot(a, a)); }
static double d_dist(const float *a, const float *b) {
    double d[3];
    d_sub(a, b, d);
    return d_len(d);
}

/* Coordinates are quantised to multiples of 2^-20 so that p +- 2h with
   h = 2^-7 is exact in float: finite differences then see the exact step. */
static float quant(float x) { return (float)(floor((double)x * 1048576.0 + 0.5) / 1048576.0); }
static float rnd(unsigned *s, float lo, float hi) { return quant(lo + (hi - lo) * pbdt_rand(s)); }
static void rnd3(unsigned *s, float *p, float r) {
    for (int k = 0; k < 3; ++k) p[k] = rnd(s, -r, r);
}
/* distance of point c from the line through a and b */
static double d_line_dist(const float *a, const float *b, const float *c) {
    double e[3], f[3], x[3];
    d_sub(b, a, e);
    d_sub(c, a, f);
    d_cross(e, f, x);
    double l = d_len(e);
    return l > 0 ? d_len(x) / l : 0;
}
/* smallest height of triangle abc */
static double d_min_height(const float *a, const float *b, const float *c) {
    double h0 = d_line_dist(a, b, c), h1 = d_line_dist(b, c, a), h2 = d_line_dist(c, a, b);
    double m = h0 < h1 ? h0 : h1;
    return m < h2 ? m : h2;
}
static int all_finite(const float *x, int n) {
    for (int i = 0; i < n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}
static int all_zero(const float *x, int n) {
    for (int i = 0; i < n; ++i)
        if (x[i] != 0.0f) return 0;
    return 1;
}

/* ---- the constraint under test as one function --------------------------- */
typedef struct ccfg {
    int n;      /* particles */
    float rest; /* rest value / thickness / max_distance / rest volume */
    const float *rest6;
    const float *target;
    const int *tris;
    int tri_count;
    float pressure;
} ccfg;
typedef float (*eval_fn)(const float *p, const ccfg *c, float *grad);

static float ev_distance(const float *p, const ccfg *c, float *g) { return pbd_constraint_distance(p, c->rest, g); }
static float ev_dihedral(const float *p, const ccfg *c, float *g) { return pbd_constraint_dihedral(p, c->rest, g); }
static float ev_isometric(const float *p, const ccfg *c, float *g) {
    return pbd_constraint_isometric_bending(p, c->rest6, g);
}
static float ev_area(const float *p, const ccfg *c, float *g) { return pbd_constraint_area(p, c->rest, g); }
static float ev_tet(const float *p, const ccfg *c, float *g) { return pbd_constraint_tet_volume(p, c->rest, g); }
static float ev_point_triangle(const float *p, const ccfg *c, float *g) {
    return pbd_constraint_point_triangle(p, c->rest, g);
}
static float ev_mesh_volume(const float *p, const ccfg *c, float *g) {
    return pbd_constraint_mesh_volume(p, c->n, c->tris, c->tri_count, c->pressure, c->rest, g);
}
static float ev_attachment(const float *p, const ccfg *c, float *g) {
    return pbd_constraint_attachment(p, c->target, c->rest, g);
}

/* Relative error |g - g_fd| / |g_fd| of the analytic gradient against the
   fourth-order central difference (f(-2h) - 8f(-h) + 8f(h) - f(2h)) / 12h. */
static double gradient_error(eval_fn f, const ccfg *c, const float *p0, float h) {
    int m = c->n * 3;
    float *p = (float *)malloc(sizeof(float) * m);
    float *g = (float *)malloc(sizeof(float) * m);
    memcpy(p, p0, sizeof(float) * m);
    for (int k = 0; k < m; ++k) g[k] = NAN;
    f(p, c, g);
    double num = 0, den = 0;
    for (int k = 0; k < m; ++k) {
        double v[4];
        const float s[4] = {-2, -1, 1, 2};
        for (int j = 0; j < 4; ++j) {
            p[k] = p0[k] + s[j] * h;
            v[j] = f(p, c, NULL);
        }
        p[k] = p0[k];
        double fd = (v[0] - 8 * v[1] + 8 * v[2] - v[3]) / (12.0 * h);
        double e = (double)g[k] - fd;
        num += e * e;
        den += fd * fd;
    }
    free(p);
    free(g);
    if (den == 0) return num == 0 ? 0 : INFINITY;
    double r = sqrt(num / den);
    return isnan(r) ? INFINITY : r;
}

/* ---- random configurations ----------------------------------------------- */
/* four points: edge p0-p1, wings p2, p3 well away from the edge line */
static void rand_hinge(unsigned *s, float *p) {
    for (;;) {
        for (int i = 0; i < 4; ++i) rnd3(s, p + 3 * i, 1.0f);
        if (d_dist(p, p + 3) < 0.6) continue;
        if (d_min_height(p, p + 6, p + 3) < 0.3) continue;
        if (d_min_height(p, p + 3, p + 9) < 0.3) continue;
        return;
    }
}
static void rand_triangle(unsigned *s, float *p) {
    for (;;) {
        for (int i = 0; i < 3; ++i) rnd3(s, p + 3 * i, 1.0f);
        if (d_min_height(p, p + 3, p + 6) >= 0.3) return;
    }
}

/* double references */
static double ref_area(const float *p) {
    double a[3], b[3], x[3];
    d_sub(p + 3, p, a);
    d_sub(p + 6, p, b);
    d_cross(a, b, x);
    return 0.5 * d_len(x);
}
static double ref_tet(const float *p) {
    double a[3], b[3], c[3], x[3];
    d_sub(p + 3, p, a);
    d_sub(p + 6, p, b);
    d_sub(p + 9, p, c);
    d_cross(a, b, x);
    return d_dot(x, c) / 6.0;
}
static double ref_point_triangle(const float *p, double h) {
    double a[3], b[3], x[3], q[3];
    d_sub(p + 6, p + 3, a);
    d_sub(p + 9, p + 3, b);
    d_cross(a, b, x);
    d_sub(p, p + 3, q);
    return d_dot(q, x) / d_len(x) - h;
}
/* unsigned dihedral angle: angle between the normals of (p0 p2 p1) and (p0 p1 p3) */
static double ref_abs_dihedral(const float *p) {
    double a[3], b[3], n1[3], n2[3];
    d_sub(p + 6, p, a);
    d_sub(p + 3, p, b);
    d_cross(a, b, n1);
    d_sub(p + 3, p, a);
    d_sub(p + 9, p, b);
    d_cross(a, b, n2);
    double c = d_dot(n1, n2) / (d_len(n1) * d_len(n2));
    if (c > 1) c = 1;
    if (c < -1) c = -1;
    return acos(c);
}
static double ref_mesh_volume(const float *p, const int *t, int nt) {
    double v = 0;
    for (int i = 0; i < nt; ++i) {
        const float *a = p + 3 * t[3 * i], *b = p + 3 * t[3 * i + 1], *c = p + 3 * t[3 * i + 2];
        double x[3], da[3] = {a[0], a[1], a[2]}, db[3] = {b[0], b[1], b[2]}, dc[3] = {c[0], c[1], c[2]};
        d_cross(da, db, x);
        v += d_dot(x, dc);
    }
    return v / 6.0;
}
static double wrap_pi(double a) {
    while (a > PBDT_PI) a -= 2 * PBDT_PI;
    while (a <= -PBDT_PI) a += 2 * PBDT_PI;
    return a;
}
/* The cotangent weights of Bergou et al. 2006 for edge p0-p1 and wings p2,
   p3 (up to an overall sign), and s = sqrt(3 / (A0 + A1)). */
static void ref_isometric(const float *p, double *K, double *s) {
    double e0[3], e1[3], e2[3], e3[3], e4[3], x[3];
    d_sub(p + 3, p, e0);     /* edge */
    d_sub(p + 6, p, e1);     /* p0 -> wing 2 */
    d_sub(p + 9, p, e2);     /* p0 -> wing 3 */
    d_sub(p + 6, p + 3, e3); /* p1 -> wing 2 */
    d_sub(p + 9, p + 3, e4); /* p1 -> wing 3 */
    double me0[3] = {-e0[0], -e0[1], -e0[2]};
#define COT(a, b) (d_dot(a, b) / (d_cross(a, b, x), d_len(x)))
    double c01 = COT(e0, e1), c02 = COT(e0, e2), c03 = COT(me0, e3), c04 = COT(me0, e4);
#undef COT
    K[0] = c03 + c04;
    K[1] = c01 + c02;
    K[2] = -c01 - c03;
    K[3] = -c02 - c04;
    d_cross(e0, e1, x);
    double A0 = 0.5 * d_len(x);
    d_cross(e0, e2, x);
    double A1 = 0.5 * d_len(x);
    *s = sqrt(3.0 / (A0 + A1));
}
static double iso_L(const float *p, const float *rest6) {
    double L[3] = {0, 0, 0};
    for (int i = 0; i < 4; ++i)
        for (int k = 0; k < 3; ++k) L[k] += (double)rest6[i] * p[3 * i + k];
    return d_len(L);
}

/* ---- gradients against finite differences -------------------------------- */
#define CHECK_GRADIENT(f, cfgp, p, h, label, i)                                           \
    do {                                                                                  \
        double e_ = gradient_error(f, cfgp, p, h);                                        \
        CHECK_MSG(e_ < 1e-3, "%s config %d: gradient relative error %.3g", label, i, e_); \
    } while (0)

TEST(distance_gradient_and_value) {
    unsigned s = 1234u;
    for (int i = 0; i < NCONFIG; ++i) {
        float p[6];
        do {
            rnd3(&s, p, 1);
            rnd3(&s, p + 3, 1);
        } while (d_dist(p, p + 3) < 0.3);
        ccfg c = {2, rnd(&s, 0.1f, 2.0f), 0, 0, 0, 0, 0};
        float g[6];
        float C = pbd_constraint_distance(p, c.rest, g);
        CHECK_NEAR(C, d_dist(p, p + 3) - c.rest, 1e-6);
        CHECK(pbd_constraint_distance(p, c.rest, NULL) == C);
        CHECK_GRADIENT(ev_distance, &c, p, 1.0f / 128, "distance", i);
    }
}

TEST(dihedral_gradient_and_value) {
    unsigned s = 99u;
    int tested = 0;
    for (int i = 0; tested < NCONFIG && i < 10 * NCONFIG; ++i) {
        float p[12];
        rand_hinge(&s, p);
        ccfg c = {4, rnd(&s, -3.0f, 3.0f), 0, 0, 0, 0, 0};
        float a = pbd_dihedral_angle(p);
        CHECK_NEAR(fabs(a), ref_abs_dihedral(p), 1e-5);
        float C = pbd_constraint_dihedral(p, c.rest, NULL);
        CHECK_NEAR(C, wrap_pi((double)a - c.rest), 2e-6);
        CHECK(C > -PBDT_PI - 1e-6 && C <= PBDT_PI + 1e-6);
        if (fabs(C) > PBDT_PI - 0.3) continue; /* keep the FD stencil off the wrap */
        ++tested;
        CHECK_GRADIENT(ev_dihedral, &c, p, 1.0f / 256, "dihedral", i);
    }
    CHECK(tested == NCONFIG);
}

TEST(dihedral_angle_flat_and_folded) {
    /* edge p0-p1 along x; p2 on -y, p3 at (0.5, cos t, sin t): the fold angle is t */
    float p[12] = {0, 0, 0, 1, 0, 0, 0.5f, -1, 0, 0.5f, 1, 0};
    CHECK_NEAR(pbd_dihedral_angle(p), 0, 1e-6);
    CHECK_NEAR(pbd_constraint_dihedral(p, 0, NULL), 0, 1e-6);
    float sign = 0;
    for (int k = 1; k < 36; ++k) {
        double t = PBDT_PI * k / 36.0;
        p[10] = (float)cos(t);
        p[11] = (float)sin(t);
        float a = pbd_dihedral_angle(p);
        p[11] = -p[11];
        float b = pbd_dihedral_angle(p);
        CHECK_NEAR(fabs(a), t, 1e-5);
        CHECK_NEAR(a, -b, 1e-5); /* folding the other way flips the sign */
        if (k == 1) sign = a > 0 ? 1.0f : -1.0f;
        CHECK_MSG(a * sign > 0, "sign of the dihedral angle changed at %g rad", t);
    }
    /* right-angle fold */
    p[10] = 0;
    p[11] = 1;
    CHECK_NEAR(fabs(pbd_dihedral_angle(p)), PBDT_PI / 2, 1e-6);
    p[11] = -1;
    CHECK_NEAR(fabs(pbd_dihedral_angle(p)), PBDT_PI / 2, 1e-6);
    /* nearly closed hinge: robust near pi (atan2) */
    p[10] = -0.999999f;
    p[11] = 0.00141421f;
    CHECK_NEAR(fabs(pbd_dihedral_angle(p)), PBDT_PI - atan2(0.00141421, 0.999999), 1e-5);
    /* the difference is wrapped to (-pi, pi] */
    p[10] = (float)cos(3.0);
    p[11] = (float)sin(3.0);
    float a = pbd_dihedral_angle(p);
    float C = pbd_constraint_dihedral(p, -a, NULL);
    CHECK_NEAR(C, wrap_pi(2.0 * a), 1e-5);
    CHECK(fabs(C) < 0.3);
}

TEST(isometric_bending_rest_matches_bergou) {
    unsigned s = 4242u;
    for (int i = 0; i < NCONFIG; ++i) {
        float r[12], rest6[6];
        rand_hinge(&s, r);
        CHECK_OK(pbd_isometric_bending_rest(r, rest6));
        double K[4], sc;
        ref_isometric(r, K, &sc);
        double dot = 0;
        for (int k = 0; k < 4; ++k) dot += K[k] * rest6[k];
        double sg = dot < 0 ? -1 : 1; /* K is defined up to an overall sign */
        double kmax = 0;
        for (int k = 0; k < 4; ++k) kmax = fmax(kmax, fabs(K[k]));
        for (int k = 0; k < 4; ++k) CHECK_NEAR(rest6[k], sg * K[k], 1e-5 * kmax);
        CHECK_NEAR(rest6[0] + rest6[1] + rest6[2] + rest6[3], 0, 1e-5 * kmax);
        CHECK_NEAR(rest6[4], sc, 1e-5 * sc);
        CHECK_NEAR(rest6[5], iso_L(r, rest6), 1e-5 * kmax);
        /* C = 0 at rest */
        CHECK_NEAR(pbd_constraint_isometric_bending(r, rest6, NULL), 0, 1e-5);
    }
    /* flat rest states: the curvature vector vanishes */
    float flat[12] = {0, 0, 0, 1, 0, 0, 0.3f, -1, 0, 0.6f, 1.2f, 0};
    float rest6[6];
    CHECK_OK(pbd_isometric_bending_rest(flat, rest6));
    double kmax = fmax(fmax(fabs(rest6[0]), fabs(rest6[1])), fmax(fabs(rest6[2]), fabs(rest6[3])));
    CHECK_NEAR(rest6[5], 0, 1e-5 * kmax);
    float sym[12] = {0, 0, 0, 2, 0, 0, 1, -1, 0, 1, 1, 0}; /* all cotangents 1: K = +-(2, 2, -2, -2) */
    CHECK_OK(pbd_isometric_bending_rest(sym, rest6));
    CHECK_NEAR(fabs(rest6[0]), 2, 1e-6);
    CHECK_NEAR(rest6[5], 0, 1e-6);
    CHECK_NEAR(rest6[4], sqrt(3.0 / 2.0), 1e-6);
}

TEST(isometric_bending_gradient_and_value) {
    unsigned s = 777u;
    int tested = 0;
    for (int i = 0; tested < NCONFIG && i < 20 * NCONFIG; ++i) {
        float r[12], p[12], rest6[6];
        rand_hinge(&s, r);
        if (pbd_isometric_bending_rest(r, rest6) != PBD_OK) {
            CHECK(0);
            continue;
        }
        for (int k = 0; k < 12; ++k) p[k] = quant(r[k] + rnd(&s, -0.4f, 0.4f));
        double L = iso_L(p, rest6), ksum = 0;
        for (int k = 0; k < 4; ++k) ksum += fabs(rest6[k]);
        const float h = 1.0f / 512;
        if (L < 0.05 || h * ksum / L > 0.05) continue; /* |L| smooth over the stencil */
        ++tested;
        ccfg c = {4, 0, rest6, 0, 0, 0, 0};
        float C = pbd_constraint_isometric_bending(p, rest6, NULL);
        CHECK_NEAR(C, rest6[4] * (L - rest6[5]), 1e-5 * (1 + fabs(C)));
        CHECK_GRADIENT(ev_isometric, &c, p, h, "isometric", i);
    }
    CHECK(tested == NCONFIG);
}

TEST(area_gradient_and_value) {
    unsigned s = 31337u;
    for (int i = 0; i < NCONFIG; ++i) {
        float p[9];
        rand_triangle(&s, p);
        double A = ref_area(p);
        ccfg c = {3, rnd(&s, 0.0f, 1.0f), 0, 0, 0, 0, 0};
        CHECK_NEAR(pbd_constraint_area(p, c.rest, NULL), A - c.rest, 1e-6);
        /* zero at rest */
        CHECK_NEAR(pbd_constraint_area(p, (float)A, NULL), 0, 1e-6 * A);
        CHECK_GRADIENT(ev_area, &c, p, 1.0f / 256, "area", i);
    }
}

TEST(tet_volume_gradient_and_value) {
    unsigned s = 2718u;
    for (int i = 0; i < NCONFIG; ++i) {
        float p[12];
        for (int k = 0; k < 4; ++k) rnd3(&s, p + 3 * k, 1);
        double V = ref_tet(p); /* signed: half of the random tets are inverted */
        ccfg c = {4, rnd(&s, -0.2f, 0.2f), 0, 0, 0, 0, 0};
        CHECK_NEAR(pbd_constraint_tet_volume(p, c.rest, NULL), V - c.rest, 1e-6);
        CHECK_NEAR(pbd_constraint_tet_volume(p, (float)V, NULL), 0, 1e-6);
        /* the volume is linear in each coordinate: any step is exact */
        CHECK_GRADIENT(ev_tet, &c, p, 1.0f / 16, "tet volume", i);
    }
    /* sign convention: the unit right tet is +1/6, swapping two points flips it */
    float t[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    CHECK_NEAR(pbd_constraint_tet_volume(t, 0, NULL), 1.0 / 6.0, 1e-7);
    float u[12] = {0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1};
    CHECK_NEAR(pbd_constraint_tet_volume(u, 0, NULL), -1.0 / 6.0, 1e-7);
}

TEST(point_triangle_gradient_and_value) {
    unsigned s = 5150u;
    for (int i = 0; i < NCONFIG; ++i) {
        float p[12];
        rnd3(&s, p, 1);
        rand_triangle(&s, p + 3);
        ccfg c = {4, rnd(&s, 0.0f, 0.1f), 0, 0, 0, 0, 0};
        CHECK_NEAR(pbd_constraint_point_triangle(p, c.rest, NULL), ref_point_triangle(p, c.rest), 1e-6);
        CHECK_GRADIENT(ev_point_triangle, &c, p, 1.0f / 256, "point-triangle", i);
    }
    /* above the counter-clockwise triangle is positive; p1 p3 p2 flips it */
    float q[12] = {0.2f, 0.2f, 0.5f, 0, 0, 0, 1, 0, 0, 0, 1, 0};
    CHECK_NEAR(pbd_constraint_point_triangle(q, 0.1f, NULL), 0.4, 1e-6);
    float r[12] = {0.2f, 0.2f, 0.5f, 0, 0, 0, 0, 1, 0, 1, 0, 0};
    CHECK_NEAR(pbd_constraint_point_triangle(r, 0.1f, NULL), -0.6, 1e-6);
}

TEST(mesh_volume_gradient_and_value) {
    float centre[3] = {0.1f, -0.2f, 0.3f};
    pbd_mesh m;
    memset(&m, 0, sizeof m);
    CHECK_OK(pbd_mesh_sphere(1, centre, 1.0f, &m));
    if (!m.positions) return;
    int n = m.vertex_count;
    float *p = (float *)malloc(sizeof(float) * 3 * n);
    unsigned s = 8080u;
    for (int i = 0; i < NCONFIG / 5; ++i) {
        for (int k = 0; k < 3 * n; ++k) p[k] = quant(m.positions[k] + rnd(&s, -0.1f, 0.1f));
        double V = ref_mesh_volume(p, m.triangles, m.triangle_count);
        ccfg c = {n, rnd(&s, 2.0f, 5.0f), 0, 0, m.triangles, m.triangle_count, rnd(&s, 0.5f, 2.0f)};
        float C = pbd_constraint_mesh_volume(p, n, m.triangles, m.triangle_count, c.pressure, c.rest, NULL);
        CHECK_NEAR(C, V - (double)c.pressure * c.rest, 1e-5 * V);
        /* linear in each coordinate (a vertex appears once per triangle) */
        CHECK_GRADIENT(ev_mesh_volume, &c, p, 1.0f / 16, "mesh volume", i);
    }
    free(p);
    pbd_mesh_free(&m);
}

TEST(attachment_gradient_and_value) {
    unsigned s = 60606u;
    for (int i = 0; i < NCONFIG; ++i) {
        float p[3], t[3];
        do {
            rnd3(&s, p, 1);
            rnd3(&s, t, 1);
        } while (d_dist(p, t) < 0.3);
        double d = d_dist(p, t);
        /* bilateral */
        ccfg c = {1, 0.0f, 0, t, 0, 0, 0};
        CHECK_NEAR(pbd_constraint_attachment(p, t, 0.0f, NULL), d, 1e-6);
        CHECK_GRADIENT(ev_attachment, &c, p, 1.0f / 128, "attachment bilateral", i);
        /* unilateral, inside (C > 0) and outside (C < 0) the radius */
        c.rest = (float)(d * (i % 2 ? 1.5 : 0.5));
        CHECK_NEAR(pbd_constraint_attachment(p, t, c.rest, NULL), c.rest - d, 1e-6);
        CHECK_GRADIENT(ev_attachment, &c, p, 1.0f / 128, "attachment unilateral", i);
    }
}

TEST(constraint_arity) {
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_DISTANCE) == 2);
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_BENDING_DIHEDRAL) == 4);
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_BENDING_ISOMETRIC) == 4);
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_AREA) == 3);
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_TET_VOLUME) == 4);
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_POINT_TRIANGLE) == 4);
    CHECK(pbd_constraint_arity(PBD_CONSTRAINT_MESH_VOLUME) == 0);
    CHECK(pbd_constraint_arity((pbd_constraint_type)-1) == 0);
    CHECK(pbd_constraint_arity((pbd_constraint_type)99) == 0);
}

/* ---- the XPBD projection ----------------------------------------------------- */

/* One random configuration of every internal constraint type: positions,
   its gradient and C. Returns the particle count. */
enum {
    KIND_DISTANCE,
    KIND_DIHEDRAL,
    KIND_ISOMETRIC,
    KIND_AREA,
    KIND_TET,
    KIND_POINT_TRIANGLE,
    KIND_MESH_VOLUME,
    KIND_COUNT
};
static const char *kind_name[KIND_COUNT] = {"distance", "dihedral",       "isometric",  "area",
                                            "tet",      "point-triangle", "mesh volume"};
static int random_constraint(int kind, unsigned *s, const pbd_mesh *sphere, float *p, float *g, float *C) {
    switch (kind) {
        case KIND_DISTANCE:
            do {
                rnd3(s, p, 1);
                rnd3(s, p + 3, 1);
            } while (d_dist(p, p + 3) < 0.3);
            *C = pbd_constraint_distance(p, rnd(s, 0.1f, 2.0f), g);
            return 2;
        case KIND_DIHEDRAL:
            rand_hinge(s, p);
            *C = pbd_constraint_dihedral(p, rnd(s, -1.0f, 1.0f), g);
            return 4;
        case KIND_ISOMETRIC: {
            float r[12], rest6[6];
            rand_hinge(s, r);
            pbd_isometric_bending_rest(r, rest6);
            for (int k = 0; k < 12; ++k) p[k] = r[k] + rnd(s, -0.4f, 0.4f);
            *C = pbd_constraint_isometric_bending(p, rest6, g);
            return 4;
        }
        case KIND_AREA:
            rand_triangle(s, p);
            *C = pbd_constraint_area(p, rnd(s, 0.0f, 1.0f), g);
            return 3;
        case KIND_TET:
            for (int k = 0; k < 4; ++k) rnd3(s, p + 3 * k, 1);
            *C = pbd_constraint_tet_volume(p, rnd(s, -0.2f, 0.2f), g);
            return 4;
        case KIND_POINT_TRIANGLE:
            rnd3(s, p, 1);
            rand_triangle(s, p + 3);
            *C = pbd_constraint_point_triangle(p, rnd(s, 0.0f, 0.1f), g);
            return 4;
        default: {
            int n = sphere->vertex_count;
            for (int k = 0; k < 3 * n; ++k) p[k] = sphere->positions[k] + rnd(s, -0.1f, 0.1f);
            *C = pbd_constraint_mesh_volume(p, n, sphere->triangles, sphere->triangle_count, rnd(s, 0.5f, 2.0f),
                                            rnd(s, 2.0f, 5.0f), g);
            return n;
        }
    }
}

TEST(xpbd_projection_conserves_momentum) {
    float centre[3] = {0, 0, 0};
    pbd_mesh sphere;
    memset(&sphere, 0, sizeof sphere);
    CHECK_OK(pbd_mesh_sphere(1, centre, 1.0f, &sphere));
    if (!sphere.positions) return;
    int maxn = sphere.vertex_count > 4 ? sphere.vertex_count : 4;
    float *p = (float *)malloc(sizeof(float) * 3 * maxn), *g = (float *)malloc(sizeof(float) * 3 * maxn);
    float *dp = (float *)malloc(sizeof(float) * 3 * maxn), *w = (float *)malloc(sizeof(float) * maxn);
    unsigned s = 123457u;
    for (int kind = 0; kind < KIND_COUNT; ++kind) {
        int moved = 0;
        for (int i = 0; i < NCONFIG; ++i) {
            float C;
            int n = random_constraint(kind, &s, &sphere, p, g, &C);
            for (int j = 0; j < n; ++j) w[j] = 1.0f / rnd(&s, 0.2f, 5.0f);
            float lambda = 0, compliance = i % 2 ? 0.0f : rnd(&s, 0.0f, 1e-3f);
            float dl = pbd_xpbd_project(n, C, g, w, compliance, 1.0f / 240, &lambda, dp);
            CHECK(isfinite(dl) && all_finite(dp, 3 * n));
            if (dl == 0) continue;
            ++moved;
            double c[3] = {0, 0, 0};
            for (int j = 0; j < n; ++j)
                for (int k = 0; k < 3; ++k) c[k] += p[3 * j + k] / (double)n;
            double lin[3] = {0, 0, 0}, ang[3] = {0, 0, 0}, lin_scale = 0, ang_scale = 0;
            for (int j = 0; j < n; ++j) {
                double m = 1.0 / w[j], x[3], d[3], t[3];
                for (int k = 0; k < 3; ++k) {
                    x[k] = p[3 * j + k] - c[k];
                    d[k] = dp[3 * j + k];
                    lin[k] += m * d[k];
                }
                d_cross(x, d, t);
                for (int k = 0; k < 3; ++k) ang[k] += m * t[k];
                lin_scale += m * d_len(d);
                ang_scale += m * d_len(x) * d_len(d);
            }
            CHECK_MSG(d_len(lin) <= 1e-5 * lin_scale, "%s config %d: linear momentum %.3g of %.3g", kind_name[kind], i,
                      d_len(lin), lin_scale);
            CHECK_MSG(d_len(ang) <= 1e-4 * ang_scale, "%s config %d: angular momentum %.3g of %.3g", kind_name[kind], i,
                      d_len(ang), ang_scale);
        }
        CHECK_MSG(moved > NCONFIG / 2, "%s: only %d of %d projections moved anything", kind_name[kind], moved, NCONFIG);
    }
    free(p);
    free(g);
    free(dp);
    free(w);
    pbd_mesh_free(&sphere);
}

TEST(xpbd_distance_solved_in_one_projection) {
    unsigned s = 1111u;
    for (int i = 0; i < NCONFIG; ++i) {
        float p[6], g[6], dp[6], w[2];
        double L;
        do {
            rnd3(&s, p, 1);
            rnd3(&s, p + 3, 1);
            L = d_dist(p, p + 3);
        } while (L < 0.7);
        float rest = (float)(L * (0.7 + 0.6 * pbdt_rand(&s)));
        w[0] = 1.0f / rnd(&s, 0.2f, 5.0f);
        w[1] = i % 5 == 0 ? 0.0f : 1.0f / rnd(&s, 0.2f, 5.0f); /* sometimes one end is fixed */
        float C = pbd_constraint_distance(p, rest, g), lambda = 0;
        float dl = pbd_xpbd_project(2, C, g, w, 0.0f, 1.0f / 60, &lambda, dp);
        CHECK(dl != 0);
        for (int k = 0; k < 6; ++k) p[k] += dp[k];
        CHECK_MSG(fabs(d_dist(p, p + 3) - rest) < 1e-6 * rest, "config %d: |p0-p1| = %.9g, rest %.9g", i,
                  d_dist(p, p + 3), rest);
        if (w[1] == 0) CHECK(dp[3] == 0 && dp[4] == 0 && dp[5] == 0);
    }
}

TEST(xpbd_multiplier_matches_formula) {
    unsigned s = 2024u;
    for (int i = 0; i < NCONFIG; ++i) {
        int n = 1 + i % 6;
        float g[18], w[6], dp[18];
        for (int k = 0; k < 3 * n; ++k) g[k] = rnd(&s, -2, 2);
        for (int j = 0; j < n; ++j) w[j] = j == 0 ? rnd(&s, 0.1f, 3.0f) : (i % 3 == 0 ? 0.0f : rnd(&s, 0.0f, 3.0f));
        float C = rnd(&s, -0.5f, 0.5f), alpha = i % 4 == 0 ? 0.0f : rnd(&s, 0.0f, 1e-2f);
        float h = 1.0f / (30 + 30 * (i % 8));
        float lambda0 = rnd(&s, -1.0f, 1.0f), lambda = lambda0;
        double at = (double)alpha / ((double)h * h), den = at;
        for (int j = 0; j < n; ++j)
            for (int k = 0; k < 3; ++k) den += (double)w[j] * g[3 * j + k] * g[3 * j + k];
        double want = (-(double)C - at * lambda0) / den;
        float dl = pbd_xpbd_project(n, C, g, w, alpha, h, &lambda, dp);
        CHECK_NEAR(dl, want, 1e-5 * fabs(want) + 1e-12);
        CHECK_NEAR(lambda, lambda0 + want, 1e-5 * (fabs(want) + fabs(lambda0)));
        for (int j = 0; j < n; ++j)
            for (int k = 0; k < 3; ++k)
                CHECK_NEAR(dp[3 * j + k], w[j] * g[3 * j + k] * want, 1e-5 * fabs(w[j] * g[3 * j + k] * want) + 1e-12);
    }
    /* compliance 0 reduces to the PBD projection s = -C / sum w |grad|^2 */
    float g[6] = {1, 0, 0, -1, 0, 0}, w[2] = {1, 3}, dp[6], lambda = 0;
    CHECK_NEAR(pbd_xpbd_project(2, 0.4f, g, w, 0, 0.01f, &lambda, dp), -0.1, 1e-7);
    CHECK_NEAR(dp[0], -0.1, 1e-7);
    CHECK_NEAR(dp[3], 0.3, 1e-7);
    /* XPBD: a soft constraint moves less, and the multiplier accumulates */
    lambda = 0;
    float dl1 = pbd_xpbd_project(2, 0.4f, g, w, 1e-4f, 0.01f, &lambda, dp);
    CHECK_NEAR(dl1, -0.4 / (4 + 1.0), 1e-7);
    float dl2 = pbd_xpbd_project(2, 0.4f + 4 * dl1, g, w, 1e-4f, 0.01f, &lambda, dp);
    CHECK_NEAR(dl2, (-(0.4 + 4 * dl1) - 1.0 * dl1) / 5.0, 1e-6);
    CHECK_NEAR(lambda, dl1 + dl2, 1e-7);
}

TEST(xpbd_projection_skips_zero_gradient_and_fixed) {
    float g0[6] = {0, 0, 0, 0, 0, 0}, w[2] = {1, 1}, dp[6] = {7, 7, 7, 7, 7, 7};
    float lambda = 0.25f;
    CHECK(pbd_xpbd_project(2, 0.5f, g0, w, 0, 0.01f, &lambda, dp) == 0);
    CHECK(lambda == 0.25f);
    CHECK(all_zero(dp, 6));
    lambda = 0.25f;
    for (int k = 0; k < 6; ++k) dp[k] = 7;
    CHECK(pbd_xpbd_project(2, 0.5f, g0, w, 1e-3f, 0.01f, &lambda, dp) == 0);
    CHECK(lambda == 0.25f);
    CHECK(all_zero(dp, 6));
    float g[6] = {1, 0, 0, -1, 0, 0}, wz[2] = {0, 0};
    for (int k = 0; k < 6; ++k) dp[k] = 7;
    lambda = 0.25f;
    CHECK(pbd_xpbd_project(2, 0.5f, g, wz, 0, 0.01f, &lambda, dp) == 0);
    CHECK(lambda == 0.25f);
    CHECK(all_zero(dp, 6));
    for (int k = 0; k < 6; ++k) dp[k] = 7;
    CHECK(pbd_xpbd_project(2, 0.5f, g, wz, 1e-3f, 0.01f, &lambda, dp) == 0);
    CHECK(lambda == 0.25f);
    CHECK(all_zero(dp, 6));
}

TEST(pbd_stiffness_correction) {
    const float ks[] = {0.0f, 0.01f, 0.1f, 0.3f, 0.5f, 0.9f, 0.99f, 1.0f};
    const int ns[] = {1, 2, 3, 4, 10, 20, 50};
    for (unsigned a = 0; a < sizeof ks / sizeof ks[0]; ++a)
        for (unsigned b = 0; b < sizeof ns / sizeof ns[0]; ++b) {
            float k = ks[a];
            int n = ns[b];
            float kp = pbd_pbd_stiffness(k, n);
            CHECK(kp >= 0 && kp <= 1);
            CHECK(kp <= k + 1e-7f);
            CHECK_NEAR(pow(1.0 - kp, n), 1.0 - k, 1e-5);
            if (n == 1) CHECK_NEAR(kp, k, 1e-7);
        }
    CHECK(pbd_pbd_stiffness(1.0f, 7) == 1.0f);
    CHECK(pbd_pbd_stiffness(0.0f, 7) == 0.0f);
}

TEST(area_and_tet_zero_at_rest_shapes) {
    /* right triangle of legs 2 and 3: area 3 */
    float t[9] = {1, 1, 1, 3, 1, 1, 1, 4, 1};
    CHECK_NEAR(pbd_constraint_area(t, 3.0f, NULL), 0, 1e-6);
    CHECK_NEAR(pbd_constraint_area(t, 0.0f, NULL), 3.0, 1e-6);
    /* box corner tet 2 x 3 x 4: volume 4 */
    float v[12] = {1, 1, 1, 3, 1, 1, 1, 4, 1, 1, 1, 5};
    CHECK_NEAR(pbd_constraint_tet_volume(v, 4.0f, NULL), 0, 1e-6);
    /* rigid motions keep them at rest */
    unsigned s = 99991u;
    for (int i = 0; i < NCONFIG; ++i) {
        float q[4], R[9], tt[9], vv[12], off[3];
        double qn = 0;
        for (int k = 0; k < 4; ++k) {
            q[k] = pbdt_rand(&s) * 2 - 1;
            qn += q[k] * q[k];
        }
        qn = sqrt(qn);
        for (int k = 0; k < 4; ++k) q[k] = (float)(q[k] / qn);
        float x = q[0], y = q[1], z = q[2], ww = q[3];
        R[0] = 1 - 2 * (y * y + z * z);
        R[1] = 2 * (x * y - z * ww);
        R[2] = 2 * (x * z + y * ww);
        R[3] = 2 * (x * y + z * ww);
        R[4] = 1 - 2 * (x * x + z * z);
        R[5] = 2 * (y * z - x * ww);
        R[6] = 2 * (x * z - y * ww);
        R[7] = 2 * (y * z + x * ww);
        R[8] = 1 - 2 * (x * x + y * y);
        rnd3(&s, off, 1);
        for (int j = 0; j < 4; ++j)
            for (int r = 0; r < 3; ++r) {
                float acc = off[r];
                for (int c = 0; c < 3; ++c) acc += R[3 * r + c] * v[3 * j + c];
                vv[3 * j + r] = acc;
                if (j < 3) tt[3 * j + r] = acc;
            }
        CHECK_NEAR(pbd_constraint_area(tt, 3.0f, NULL), 0, 1e-5);
        CHECK_NEAR(pbd_constraint_tet_volume(vv, 4.0f, NULL), 0, 4e-5);
    }
}

TEST(degenerate_inputs_give_zero_gradient) {
    float g[12];
    /* zero-length edge */
    float d[6] = {0.3f, 0.2f, 0.1f, 0.3f, 0.2f, 0.1f};
    for (int k = 0; k < 6; ++k) g[k] = NAN;
    float C = pbd_constraint_distance(d, 0.5f, g);
    CHECK(isfinite(C));
    CHECK_NEAR(C, -0.5, 1e-7);
    CHECK(all_zero(g, 6));
    /* dihedral: zero-length hinge edge, and a wing on the edge line */
    float h1[12] = {0, 0, 0, 0, 0, 0, 0.5f, -1, 0, 0.5f, 1, 0.2f};
    for (int k = 0; k < 12; ++k) g[k] = NAN;
    C = pbd_constraint_dihedral(h1, 0.3f, g);
    CHECK(isfinite(C) && all_finite(g, 12) && all_zero(g, 12));
    CHECK(isfinite(pbd_dihedral_angle(h1)));
    float h2[12] = {0, 0, 0, 1, 0, 0, 2, 0, 0, 0.5f, 1, 0.2f};
    for (int k = 0; k < 12; ++k) g[k] = NAN;
    C = pbd_constraint_dihedral(h2, 0.3f, g);
    CHECK(isfinite(C) && all_zero(g, 12));
    CHECK(isfinite(pbd_dihedral_angle(h2)));
    /* isometric: flat state with flat rest, |L| = 0 */
    float f[12] = {0, 0, 0, 2, 0, 0, 1, -1, 0, 1, 1, 0}, rest6[6];
    CHECK_OK(pbd_isometric_bending_rest(f, rest6));
    for (int k = 0; k < 12; ++k) g[k] = NAN;
    C = pbd_constraint_isometric_bending(f, rest6, g);
    CHECK(isfinite(C) && fabs(C) < 1e-5 && all_zero(g, 12));
    /* collinear triangle */
    float t[9] = {0, 0, 0, 1, 1, 1, 2, 2, 2};
    for (int k = 0; k < 9; ++k) g[k] = NAN;
    C = pbd_constraint_area(t, 0.25f, g);
    CHECK(isfinite(C));
    CHECK_NEAR(C, -0.25, 1e-6);
    CHECK(all_zero(g, 9));
    /* tet with all points at one place */
    float v[12] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
    for (int k = 0; k < 12; ++k) g[k] = NAN;
    C = pbd_constraint_tet_volume(v, 0.1f, g);
    CHECK(isfinite(C) && all_zero(g, 12));
    /* point above a collinear triangle */
    float pt[12] = {0.5f, 1, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0};
    for (int k = 0; k < 12; ++k) g[k] = NAN;
    C = pbd_constraint_point_triangle(pt, 0.01f, g);
    CHECK(isfinite(C) && all_zero(g, 12));
    /* attachment exactly at its target */
    float a[3] = {1, 2, 3};
    for (int k = 0; k < 3; ++k) g[k] = NAN;
    C = pbd_constraint_attachment(a, a, 0.0f, g);
    CHECK(C == 0 && all_zero(g, 3));
    for (int k = 0; k < 3; ++k) g[k] = NAN;
    C = pbd_constraint_attachment(a, a, 0.5f, g);
    CHECK_NEAR(C, 0.5, 1e-7);
    CHECK(all_finite(g, 3) && all_zero(g, 3));
    /* a zero gradient makes the projection a no-op */
    float w[4] = {1, 1, 1, 1}, dp[12], lambda = 0;
    for (int k = 0; k < 12; ++k) g[k] = 0;
    CHECK(pbd_xpbd_project(4, 0.3f, g, w, 0, 0.01f, &lambda, dp) == 0);
    CHECK(all_zero(dp, 12) && lambda == 0);
}

void suite_constraints(void) {
    RUN(distance_gradient_and_value);
    RUN(dihedral_gradient_and_value);
    RUN(dihedral_angle_flat_and_folded);
    RUN(isometric_bending_rest_matches_bergou);
    RUN(isometric_bending_gradient_and_value);
    RUN(area_gradient_and_value);
    RUN(tet_volume_gradient_and_value);
    RUN(point_triangle_gradient_and_value);
    RUN(mesh_volume_gradient_and_value);
    RUN(attachment_gradient_and_value);
    RUN(constraint_arity);
    RUN(xpbd_projection_conserves_momentum);
    RUN(xpbd_distance_solved_in_one_projection);
    RUN(xpbd_multiplier_matches_formula);
    RUN(xpbd_projection_skips_zero_gradient_and_fixed);
    RUN(pbd_stiffness_correction);
    RUN(area_and_tet_zero_at_rest_shapes);
    RUN(degenerate_inputs_give_zero_gradient);
}
