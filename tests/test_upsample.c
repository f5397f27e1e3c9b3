/* tests/test_upsample.c - pbd_upsample.h sections "model", "subdivision",
   "wrinkle" and "training": Loop subdivision against its formulas (counts,
   planarity, closedness, the stencil weights of Loop's rules), two-scale
   detail, wrinkle meshes (attachment radius, one-sided attachment),
   training data, save/load, bad input, SIMD == scalar and 1 == 2 threads. */
#include "../pbd_upsample.h" /* (first: test.h's helpers for it) */
#include "test.h"
#include "check_error.h"
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

/* Edges of a triangle list, counted independently of the library. */
static int upt_edge_count(const int *tris, int nt, int *boundary) {
    int n = 0, b = 0;
    int *e = (int *)malloc(sizeof(int) * 6 * (size_t)nt);
    int *uses = (int *)calloc((size_t)nt * 3, sizeof(int));
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k) {
            int u = tris[3 * t + k], v = tris[3 * t + (k + 1) % 3];
            int a = u < v ? u : v, c = u < v ? v : u, f = -1;
            for (int q = 0; q < n; ++q)
                if (e[2 * q] == a && e[2 * q + 1] == c) {
                    f = q;
                    break;
                }
            if (f < 0) {
                e[2 * n] = a;
                e[2 * n + 1] = c;
                f = n++;
            }
            uses[f]++;
        }
    for (int q = 0; q < n; ++q) b += uses[q] == 1;
    free(e);
    free(uses);
    if (boundary) *boundary = b;
    return n;
}

/* Every directed edge of a closed, consistently oriented mesh appears once
   and its reverse once. */
static int upt_closed_oriented(const int *tris, int nt) {
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k) {
            int u = tris[3 * t + k], v = tris[3 * t + (k + 1) % 3], same = 0, rev = 0;
            for (int s = 0; s < nt; ++s)
                for (int j = 0; j < 3; ++j) {
                    int a = tris[3 * s + j], b = tris[3 * s + (j + 1) % 3];
                    same += a == u && b == v;
                    rev += a == v && b == u;
                }
            if (same != 1 || rev != 1) return 0;
        }
    return 1;
}

static double upt_volume(const float *x, const int *tris, int nt) {
    double v = 0;
    for (int t = 0; t < nt; ++t) {
        const float *a = x + 3 * tris[3 * t], *b = x + 3 * tris[3 * t + 1], *c = x + 3 * tris[3 * t + 2];
        v += (a[0] * ((double)b[1] * c[2] - (double)b[2] * c[1]) - a[1] * ((double)b[0] * c[2] - (double)b[2] * c[0]) +
              a[2] * ((double)b[0] * c[1] - (double)b[1] * c[0])) /
             6.0;
    }
    return v;
}

static pbd_mesh upt_grid(int nx, int ny) {
    pbd_mesh m;
    float o[3] = {-0.5f, 0.2f, -0.4f}, u[3] = {1.0f, 0.3f, 0.1f}, v[3] = {-0.2f, 0.4f, 0.9f};
    pbd_mesh_grid(nx, ny, o, u, v, &m);
    return m;
}

/* V' = V + E and F' = 4F per level, E counted independently; for a closed
   mesh E = 3F/2. */
TEST(up_loop_counts) {
    pbd_mesh g = upt_grid(5, 4), s;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(1, c, 1.0f, &s);
    const pbd_mesh *ms[2] = {&g, &s};
    for (int which = 0; which < 2; ++which) {
        int V = ms[which]->vertex_count, F = ms[which]->triangle_count;
        for (int levels = 1; levels <= 2; ++levels) {
            pbd_mesh out;
            CHECK_OK(pbd_up_mesh_subdivide(ms[which], levels, 1, &out));
            int v = V, f = F;
            pbd_mesh cur = *ms[which], prev;
            memset(&prev, 0, sizeof prev);
            for (int l = 0; l < levels; ++l) { /* apply the formula level by level */
                int E = upt_edge_count(cur.triangles, cur.triangle_count, NULL);
                if (which == 1) CHECK(2 * E == 3 * cur.triangle_count);
                v += E;
                f *= 4;
                pbd_mesh next;
                CHECK_OK(pbd_up_mesh_subdivide(&cur, 1, 1, &next));
                if (l > 0) pbd_up_mesh_free(&prev);
                prev = next;
                cur = next;
            }
            if (levels > 0) pbd_up_mesh_free(&prev);
            CHECK(out.vertex_count == v);
            CHECK(out.triangle_count == f);
            pbd_up_mesh_free(&out);
        }
    }
    pbd_mesh_free(&g);
    pbd_mesh_free(&s);
}

/* Loop's rules are affine combinations: a planar mesh (here a tilted plane
   with in-plane jitter) stays planar, boundary included. */
TEST(up_loop_planar_stays_planar) {
    pbd_mesh g = upt_grid(6, 5);
    float u[3] = {1.0f, 0.3f, 0.1f}, v[3] = {-0.2f, 0.4f, 0.9f}, n[3];
    n[0] = u[1] * v[2] - u[2] * v[1];
    n[1] = u[2] * v[0] - u[0] * v[2];
    n[2] = u[0] * v[1] - u[1] * v[0];
    float nl = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    for (int k = 0; k < 3; ++k) n[k] /= nl;
    unsigned st = 3;
    for (int i = 0; i < g.vertex_count; ++i) {
        float a = 0.03f * (pbdt_rand(&st) - 0.5f), b = 0.03f * (pbdt_rand(&st) - 0.5f);
        for (int k = 0; k < 3; ++k) g.positions[3 * i + k] += a * u[k] + b * v[k];
    }
    double d0 = g.positions[0] * n[0] + g.positions[1] * n[1] + g.positions[2] * n[2];
    pbd_mesh out;
    CHECK_OK(pbd_up_mesh_subdivide(&g, 3, 1, &out));
    double worst = 0;
    for (int i = 0; i < out.vertex_count; ++i) {
        const float *p = out.positions + 3 * i;
        double d = fabs(p[0] * n[0] + p[1] * n[1] + p[2] * n[2] - d0);
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst < 2e-6, "off the plane by %g", worst);
    pbd_up_mesh_free(&out);
    pbd_mesh_free(&g);
}

/* A closed, oriented mesh stays closed and oriented; Loop shrinks a convex
   polyhedron (its limit surface lies inside), so the volume drops but
   stays positive. */
TEST(up_loop_closed_stays_closed) {
    pbd_mesh s, out;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(0, c, 1.0f, &s);
    CHECK_OK(pbd_up_mesh_subdivide(&s, 2, 1, &out));
    CHECK(upt_closed_oriented(out.triangles, out.triangle_count));
    int b = -1;
    upt_edge_count(out.triangles, out.triangle_count, &b);
    CHECK(b == 0);
    double v0 = upt_volume(s.positions, s.triangles, s.triangle_count);
    double v1 = upt_volume(out.positions, out.triangles, out.triangle_count);
    CHECK(v1 > 0.5 * v0 && v1 < v0);
    pbd_up_mesh_free(&out);
    pbd_mesh_free(&s);
}

/* Every stencil row sums to 1 with non-negative weights; one level of an
   icosahedron reproduces Loop's weights: a valence-5 vertex keeps
   1 - 5 beta, beta = (5/8 - (3/8 + cos(72 deg)/4)^2)/5, an edge vertex has
   3/8, 3/8, 1/8, 1/8; on a grid's straight boundary 3/4, 1/8, 1/8. */
TEST(up_stencil_rows_and_loop_weights) {
    pbd_mesh s;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(0, c, 1.0f, &s);
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_subdivision_create(s.triangles, s.triangle_count, s.vertex_count, 1, &m));
    CHECK(pbd_up_model_method(m) == PBD_UP_SUBDIVISION && pbd_up_subdivision_levels(m) == 1);
    CHECK(pbd_up_model_coarse_count(m) == 12 && pbd_up_model_detail_count(m) == 42);
    int cols[64], n = 0;
    float w[64];
    double beta = (0.625 - pow(0.375 + 0.25 * cos(2 * 3.14159265358979 / 5), 2)) / 5;
    CHECK_OK(pbd_up_subdivision_stencil(m, 0, cols, w, 64, &n));
    CHECK(n == 6);
    for (int k = 0; k < n; ++k) CHECK_NEAR(w[k], cols[k] == 0 ? 1 - 5 * beta : beta, 1e-7);
    CHECK_OK(pbd_up_subdivision_stencil(m, 12, cols, w, 64, &n));
    CHECK(n == 4);
    float sorted[4] = {w[0], w[1], w[2], w[3]};
    int n38 = 0, n18 = 0;
    for (int k = 0; k < 4; ++k) {
        n38 += sorted[k] == 0.375f;
        n18 += sorted[k] == 0.125f;
    }
    CHECK(n38 == 2 && n18 == 2);
    pbd_up_model_destroy(m);
    pbd_mesh_free(&s);

    pbd_mesh g = upt_grid(5, 5);
    CHECK_OK(pbd_up_subdivision_create(g.triangles, g.triangle_count, g.vertex_count, 2, &m));
    for (int r = 0; r < pbd_up_model_detail_count(m); ++r) {
        CHECK_OK(pbd_up_subdivision_stencil(m, r, cols, w, 64, &n));
        double sum = 0;
        for (int k = 0; k < n && k < 64; ++k) {
            sum += w[k];
            CHECK(w[k] > 0);
        }
        CHECK(n <= 64);
        CHECK_NEAR(sum, 1.0, 1e-6);
    }
    pbd_up_model_destroy(m);
    CHECK_OK(pbd_up_subdivision_create(g.triangles, g.triangle_count, g.vertex_count, 1, &m));
    CHECK_OK(pbd_up_subdivision_stencil(m, 2, cols, w, 64, &n)); /* boundary vertex (2, 0) */
    CHECK(n == 3 && cols[0] == 1 && cols[1] == 2 && cols[2] == 3);
    CHECK(w[0] == 0.125f && w[1] == 0.75f && w[2] == 0.125f);
    CHECK_OK(pbd_up_subdivision_stencil(m, 0, cols, w, 64, &n)); /* a grid corner has 2 boundary edges */
    CHECK(n == 3 && cols[0] == 0 && cols[1] == 1 && cols[2] == 5);
    CHECK(w[0] == 0.75f && w[1] == 0.125f && w[2] == 0.125f);
    pbd_up_model_destroy(m);
    pbd_mesh_free(&g);
}

/* pbd_up_model_eval of a subdivision model is the subdivided mesh. */
TEST(up_subdivision_eval_matches_mesh) {
    pbd_mesh s, out;
    float c[3] = {0.1f, 0.2f, 0.3f};
    pbd_mesh_sphere(1, c, 0.7f, &s);
    CHECK_OK(pbd_up_mesh_subdivide(&s, 2, 1, &out));
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_subdivision_create(s.triangles, s.triangle_count, s.vertex_count, 2, &m));
    CHECK(pbd_up_model_detail_count(m) == out.vertex_count);
    float *x = (float *)malloc(sizeof(float) * 3 * out.vertex_count);
    CHECK_OK(pbd_up_model_eval(m, s.positions, x));
    double worst = 0;
    for (int i = 0; i < 3 * out.vertex_count; ++i) worst = fmax(worst, fabs(x[i] - out.positions[i]));
    CHECK_MSG(worst < 1e-6, "eval vs subdivided mesh %g", worst);
    const int *tris = NULL;
    int nt = 0;
    CHECK_OK(pbd_up_subdivision_triangles(m, &tris, &nt));
    CHECK(nt == out.triangle_count && memcmp(tris, out.triangles, sizeof(int) * 3 * nt) == 0);
    free(x);
    pbd_up_model_destroy(m);
    pbd_up_mesh_free(&out);
    pbd_mesh_free(&s);
}

static void upt_rotate(const float *R, const float *t, const float *in, float *out, int n) {
    for (int i = 0; i < n; ++i)
        for (int r = 0; r < 3; ++r)
            out[3 * i + r] = R[3 * r] * in[3 * i] + R[3 * r + 1] * in[3 * i + 1] + R[3 * r + 2] * in[3 * i + 2] + t[r];
}

/* Two-scale detail (survey 5.1): fitted at u0 it reproduces the detail
   mesh there, frames are orthonormal, and it moves rigidly with the coarse
   mesh: eval(R u0 + t) = R X + t. */
TEST(up_two_scale_detail) {
    pbd_mesh s;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(1, c, 1.0f, &s);
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_subdivision_create(s.triangles, s.triangle_count, s.vertex_count, 1, &m));
    int n = pbd_up_model_detail_count(m);
    float *x0 = (float *)malloc(sizeof(float) * 3 * n), *X = (float *)malloc(sizeof(float) * 3 * n);
    float *fr = (float *)malloc(sizeof(float) * 9 * n), *y = (float *)malloc(sizeof(float) * 3 * n);
    float *Xr = (float *)malloc(sizeof(float) * 3 * n);
    CHECK_OK(pbd_up_subdivision_smooth(m, s.positions, x0, fr));
    for (int v = 0; v < n; ++v) {
        const float *f = fr + 9 * v;
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 3; ++b) {
                double d = f[3 * a] * f[3 * b] + f[3 * a + 1] * f[3 * b + 1] + f[3 * a + 2] * f[3 * b + 2];
                CHECK_NEAR(d, a == b ? 1.0 : 0.0, 1e-5);
            }
        /* normal points outwards on the sphere */
        CHECK(f[6] * x0[3 * v] + f[7] * x0[3 * v + 1] + f[8] * x0[3 * v + 2] > 0);
    }
    unsigned st = 9;
    for (int i = 0; i < 3 * n; ++i) X[i] = x0[i] + 0.05f * (pbdt_rand(&st) - 0.5f);
    CHECK_OK(pbd_up_subdivision_fit_detail(m, s.positions, X));
    CHECK_OK(pbd_up_model_eval(m, s.positions, y));
    double worst = 0;
    for (int i = 0; i < 3 * n; ++i) worst = fmax(worst, fabs(y[i] - X[i]));
    CHECK_MSG(worst < 1e-6, "detail at the fit pose %g", worst);
    float R[9] = {0.36f, 0.48f, -0.8f, -0.8f, 0.6f, 0.0f, 0.48f, 0.64f, 0.6f}, t[3] = {1, -2, 0.5f};
    float *u = (float *)malloc(sizeof(float) * 3 * s.vertex_count);
    upt_rotate(R, t, s.positions, u, s.vertex_count);
    upt_rotate(R, t, X, Xr, n);
    CHECK_OK(pbd_up_model_eval(m, u, y));
    worst = 0;
    for (int i = 0; i < 3 * n; ++i) worst = fmax(worst, fabs(y[i] - Xr[i]));
    CHECK_MSG(worst < 1e-5, "rigid motion of the detail %g", worst);
    CHECK_OK(pbd_up_subdivision_fit_detail(m, NULL, NULL)); /* back to the smooth mesh */
    CHECK_OK(pbd_up_model_eval(m, s.positions, y));
    CHECK(memcmp(y, x0, sizeof(float) * 3 * n) == 0);
    free(x0);
    free(X);
    free(fr);
    free(y);
    free(Xr);
    free(u);
    pbd_up_model_destroy(m);
    pbd_mesh_free(&s);
}

/* A subdivision model of a jittered sphere, with detail. */
static pbd_up_model *upt_detail_model(int sphere_level, int levels, float **coarse) {
    pbd_mesh s;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(sphere_level, c, 1.0f, &s);
    pbd_up_model *m = NULL;
    if (pbd_up_subdivision_create(s.triangles, s.triangle_count, s.vertex_count, levels, &m) != PBD_OK) return NULL;
    int n = pbd_up_model_detail_count(m);
    float *X = (float *)malloc(sizeof(float) * 3 * n);
    pbd_up_model_eval(m, s.positions, X);
    unsigned st = 5;
    for (int i = 0; i < 3 * n; ++i) X[i] += 0.02f * (pbdt_rand(&st) - 0.5f);
    pbd_up_subdivision_fit_detail(m, s.positions, X);
    for (int i = 0; i < 3 * s.vertex_count; ++i) s.positions[i] += 0.1f * (pbdt_rand(&st) - 0.5f);
    *coarse = (float *)malloc(sizeof(float) * 3 * s.vertex_count);
    memcpy(*coarse, s.positions, sizeof(float) * 3 * s.vertex_count);
    free(X);
    pbd_mesh_free(&s);
    return m;
}

/* The SIMD kernel equals its scalar twin and 2 threads equal 1, bit for
   bit, with and without detail. */
TEST(up_eval_simd_threads_bit_identical) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    float *u = NULL;
    pbd_up_model *m = upt_detail_model(2, 2, &u);
    CHECK(m != NULL);
    if (!m) return;
    int n = pbd_up_model_detail_count(m);
    float *ref = (float *)malloc(sizeof(float) * 3 * n), *y = (float *)malloc(sizeof(float) * 3 * n);
    for (int detail = 1; detail >= 0; --detail) {
        if (!detail) CHECK_OK(pbd_up_subdivision_fit_detail(m, NULL, NULL));
        CHECK_OK(pbd_up_model_set_simd(m, 0));
        CHECK_OK(pbd_up_model_set_threads(m, 1));
        CHECK_OK(pbd_up_model_eval(m, u, ref));
        for (int simd = 0; simd <= 1; ++simd)
            for (int threads = 1; threads <= 2; ++threads) {
                CHECK_OK(pbd_up_model_set_simd(m, simd));
                CHECK_OK(pbd_up_model_set_threads(m, threads));
                memset(y, 0xff, sizeof(float) * 3 * n);
                CHECK_OK(pbd_up_model_eval(m, u, y));
                CHECK_MSG(memcmp(y, ref, sizeof(float) * 3 * n) == 0, "simd %d threads %d detail %d differ", simd,
                          threads, detail);
            }
    }
    free(ref);
    free(y);
    free(u);
    pbd_up_model_destroy(m);
}

static uint64_t upt_fnv(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* Save -> load -> save gives the same bytes and the loaded model evaluates
   bit-identically. */
TEST(up_model_save_load_roundtrip) {
    float *u = NULL;
    pbd_up_model *m = upt_detail_model(1, 2, &u), *m2 = NULL;
    int n = pbd_up_model_detail_count(m);
    size_t size = pbd_up_model_save_size(m);
    CHECK(size > 0);
    unsigned char *buf = (unsigned char *)malloc(size), *buf2 = (unsigned char *)malloc(size);
    CHECK_OK(pbd_up_model_save(m, buf, size));
    CHECK_OK(pbd_up_model_load(buf, size, &m2));
    CHECK(pbd_up_model_save_size(m2) == size);
    CHECK_OK(pbd_up_model_save(m2, buf2, size));
    CHECK(memcmp(buf, buf2, size) == 0);
    float *a = (float *)malloc(sizeof(float) * 3 * n), *b = (float *)malloc(sizeof(float) * 3 * n);
    CHECK_OK(pbd_up_model_eval(m, u, a));
    CHECK_OK(pbd_up_model_eval(m2, u, b));
    CHECK(memcmp(a, b, sizeof(float) * 3 * n) == 0);
    CHECK(pbd_up_model_method(m2) == PBD_UP_SUBDIVISION && pbd_up_subdivision_levels(m2) == 2);
    free(a);
    free(b);
    free(buf);
    free(buf2);
    free(u);
    pbd_up_model_destroy(m);
    pbd_up_model_destroy(m2);
}

/* Every bad input gets its error and changes nothing. */
/* pbd_up_model_eval_world on a CPU world: the model's xyz of the world's
   particles [first, first + coarse count) give pbd_up_model_eval's bits
   (the pointer stays the model's); a range outside the world is refused
   with the range in words, first = INT_MAX included (its end overflowed
   int in the message: UBSan), and *detail keeps what it held. */
TEST(up_eval_world_equals_eval_and_checks_the_range) {
    float *u = NULL;
    pbd_up_model *m = upt_detail_model(1, 1, &u);
    int nc = pbd_up_model_coarse_count(m), n = pbd_up_model_detail_count(m);
    pbd_world *w = pbdt_world(-9.81f);
    pbd_particles_desc pd = pbd_particles_desc_default();
    float other[3] = {5, 5, 5};
    pd.positions = other;
    pd.count = 1;
    CHECK_OK(pbd_add_particles(w, &pd, NULL)); /* particle 0: not the model's */
    pd.positions = u;
    pd.count = nc;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK(r.first == 1);
    for (int k = 0; k < 3; ++k) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f)); /* fallen a little */
    float *x = (float *)malloc(sizeof(float) * 3 * nc), *y = (float *)malloc(sizeof(float) * 3 * n);
    const float *X = pbd_world_positions(w);
    for (int i = 0; i < nc; ++i)
        for (int k = 0; k < 3; ++k) x[3 * i + k] = X[4 * (r.first + i) + k];
    CHECK(x[1] != u[1]);
    CHECK_OK(pbd_up_model_eval(m, x, y));
    const float *d = NULL, *d2 = NULL;
    CHECK_OK(pbd_up_model_eval_world(m, w, r.first, &d));
    CHECK(d != NULL && memcmp(d, y, sizeof(float) * 3 * n) == 0);
    CHECK_OK(pbd_up_model_eval_world(m, w, r.first, &d2));
    CHECK(d2 == d);
    const float *keep = d;
    CHECK_ERROR(pbd_up_model_eval_world(m, w, r.first + 1, &d), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "particles [2, 44) are not in the world (43 particles)");
    CHECK_ERROR(pbd_up_model_eval_world(m, w, -1, &d), PBD_ERROR_INDEX_OUT_OF_RANGE, "particles [-1, 41)");
    CHECK_ERROR(pbd_up_model_eval_world(m, w, INT_MAX, &d), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "particles [2147483647, 2147483689)");
    CHECK_ERROR(pbd_up_model_eval_world(NULL, w, r.first, &d), PBD_ERROR_NULL_POINTER, "m is NULL");
    CHECK_ERROR(pbd_up_model_eval_world(m, NULL, r.first, &d), PBD_ERROR_NULL_POINTER, "w is NULL");
    CHECK_ERROR(pbd_up_model_eval_world(m, w, r.first, NULL), PBD_ERROR_NULL_POINTER, "detail is NULL");
    CHECK(d == keep);
    free(x);
    free(y);
    free(u);
    pbd_world_destroy(w);
    pbd_up_model_destroy(m);
}

TEST(up_model_bad_input) {
    float *u = NULL;
    pbd_up_model *m = upt_detail_model(1, 1, &u), *out = NULL;
    int nc = pbd_up_model_coarse_count(m), n = pbd_up_model_detail_count(m);
    float *y = (float *)malloc(sizeof(float) * 3 * n);
    memset(y, 0x5a, sizeof(float) * 3 * n);
    CHECK_ERROR(pbd_up_model_eval(NULL, u, y), PBD_ERROR_NULL_POINTER, "m is NULL");
    CHECK_ERROR(pbd_up_model_eval(m, NULL, y), PBD_ERROR_NULL_POINTER, "coarse_positions is NULL");
    CHECK_ERROR(pbd_up_model_eval(m, u, NULL), PBD_ERROR_NULL_POINTER, "detail_positions_out is NULL");
    float keep = u[7];
    u[7] = NAN;
    CHECK_ERROR(pbd_up_model_eval(m, u, y), PBD_ERROR_NOT_FINITE,
                "coarse_positions contain NaN or infinity (42 vertices)");
    u[7] = INFINITY;
    CHECK_ERROR(pbd_up_model_eval(m, u, y), PBD_ERROR_NOT_FINITE,
                "coarse_positions contain NaN or infinity (42 vertices)");
    u[7] = keep;
    for (int i = 0; i < 3 * n; ++i) {
        uint32_t bits;
        memcpy(&bits, &y[i], 4);
        CHECK(bits == 0x5a5a5a5au);
        if (bits != 0x5a5a5a5au) break;
    }
    CHECK_ERROR(pbd_up_model_eval_checked(m, u, nc - 1, y, n), PBD_ERROR_INVALID_ARGUMENT, "coarse_count 41");
    CHECK_ERROR(pbd_up_model_eval_checked(m, u, nc, y, n + 1), PBD_ERROR_INVALID_ARGUMENT, "coarse_count 42");
    CHECK_OK(pbd_up_model_eval_checked(m, u, nc, y, n));
    CHECK_ERROR(pbd_up_model_set_threads(m, -1), PBD_ERROR_INVALID_ARGUMENT, "threads -1");
    CHECK_ERROR(pbd_up_model_set_simd(m, 2), PBD_ERROR_INVALID_ARGUMENT, "on 2");
    CHECK_ERROR(pbd_up_model_set_simd(NULL, 1), PBD_ERROR_NULL_POINTER, "m is NULL");
    CHECK(pbd_up_model_save_size(NULL) == 0 && pbd_up_model_coarse_count(NULL) == 0);
    CHECK(pbd_up_method_name(PBD_UP_SUBDIVISION) && !pbd_up_method_name(PBD_UP_METHOD_COUNT));
    CHECK(pbd_up_method_available(PBD_UP_SUBDIVISION) && !pbd_up_method_available(PBD_UP_METHOD_COUNT));

    /* save/load */
    size_t size = pbd_up_model_save_size(m);
    unsigned char *buf = (unsigned char *)malloc(size);
    CHECK_ERROR(pbd_up_model_save(m, buf, size - 1), PBD_ERROR_INVALID_ARGUMENT,
                "buffer of 12599 bytes, the model needs 12600");
    CHECK_ERROR(pbd_up_model_save(m, NULL, size), PBD_ERROR_NULL_POINTER, "buffer is NULL");
    CHECK_OK(pbd_up_model_save(m, buf, size));
    CHECK_ERROR(pbd_up_model_load(NULL, size, &out), PBD_ERROR_NULL_POINTER, "buffer is NULL");
    CHECK_ERROR(pbd_up_model_load(buf, size, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK_ERROR(pbd_up_model_load(buf, size - 1, &out), PBD_ERROR_BAD_SNAPSHOT,
                "the buffer of 12599 bytes holds 12551 (truncated: the size passed must be the file's exactly)");
    /* bytes past the end: named as such (an audit: "truncated?" on a longer buffer) */
    unsigned char *longer = (unsigned char *)calloc(size + 16, 1);
    memcpy(longer, buf, size);
    CHECK_ERROR(pbd_up_model_load(longer, size + 16, &out), PBD_ERROR_BAD_SNAPSHOT,
                "holds 12568 (bytes past its end: the size passed must be the file's exactly)");
    free(longer);
    CHECK_ERROR(pbd_up_model_load(buf, 10, &out), PBD_ERROR_BAD_SNAPSHOT, "10 bytes are too few for a model file");
    for (size_t at = 0; at < size; at += 1 + size / 97) { /* any flipped byte */
        buf[at] ^= 0x10;
        CHECK_ERROR(pbd_up_model_load(buf, size, &out), PBD_ERROR_BAD_SNAPSHOT, NULL);
        buf[at] ^= 0x10;
    }
    /* forged with a valid checksum: an unknown method, a column out of
       range, a NaN weight, an older format version */
    unsigned char *f = (unsigned char *)malloc(size);
    const size_t header = 40, payload_levels = header, payload_rows = header + 4;
    uint64_t sum;
    struct {
        size_t at;
        uint32_t value;
    } forge[4] = {{16, 7}, {0, 0}, {0, 0}, {8, 0}};
    /* first column index of S: after levels, rows, cols, start[rows + 1] */
    int rows;
    memcpy(&rows, buf + payload_rows, 4);
    forge[1].at = payload_levels + 12 + 4 * ((size_t)rows + 1);
    forge[1].value = (uint32_t)nc;
    int nnz;
    memcpy(&nnz, buf + payload_levels + 12 + 4 * (size_t)rows, 4);
    forge[2].at = forge[1].at + 4 * (size_t)nnz;
    float nanv = NAN;
    memcpy(&forge[2].value, &nanv, 4);
    for (int k = 0; k < 4; ++k) {
        memcpy(f, buf, size);
        memcpy(f + forge[k].at, &forge[k].value, 4);
        sum = upt_fnv(f, size - 8);
        memcpy(f + size - 8, &sum, 8);
        CHECK_MSG(pbd_up_model_load(f, size, &out) == PBD_ERROR_BAD_SNAPSHOT, "forgery %d accepted", k);
    }
    CHECK(out == NULL);
    free(f);
    free(buf);

    /* subdivision create */
    int tris[9] = {0, 1, 2, 0, 2, 3, 0, 3, 1};
    CHECK_ERROR(pbd_up_subdivision_create(NULL, 3, 4, 1, &out), PBD_ERROR_NULL_POINTER, "triangles is NULL");
    CHECK_ERROR(pbd_up_subdivision_create(tris, 3, 4, 1, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK_ERROR(pbd_up_subdivision_create(tris, 0, 4, 1, &out), PBD_ERROR_INVALID_ARGUMENT,
                "triangle_count 0 must be >= 1");
    CHECK_ERROR(pbd_up_subdivision_create(tris, 3, 4, 9, &out), PBD_ERROR_INVALID_ARGUMENT, "levels 9 must be in 0..8");
    CHECK_ERROR(pbd_up_subdivision_create(tris, 3, 4, -1, &out), PBD_ERROR_INVALID_ARGUMENT,
                "levels -1 must be in 0..8");
    CHECK_ERROR(pbd_up_subdivision_create(tris, 3, 0, 1, &out), PBD_ERROR_INVALID_ARGUMENT,
                "vertex_count 0 must be >= 1");
    CHECK_ERROR(pbd_up_subdivision_create(tris, 3, 3, 1, &out), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "triangle 1 names vertex 3, outside 0..2");
    int *strip = (int *)malloc(sizeof(int) * 3 * 3000);
    for (int t = 0; t < 3000; ++t) {
        strip[3 * t] = t;
        strip[3 * t + 1] = t + 1;
        strip[3 * t + 2] = t + 2;
    }
    CHECK_ERROR(pbd_up_subdivision_create(strip, 3000, 3002, 8, &out), PBD_ERROR_OVERFLOW,
                "3000 triangles at 8 levels make 196608000 triangles, too many"); /* 4^8 * 3000 triangles */
    free(strip);
    int degenerate[3] = {0, 1, 1}, fan[9] = {0, 1, 2, 1, 0, 3, 0, 1, 4}; /* edge 0-1 in three triangles */
    CHECK_ERROR(pbd_up_subdivision_create(degenerate, 1, 3, 1, &out), PBD_ERROR_DEGENERATE,
                "triangle 0 repeats vertex 1");
    CHECK_ERROR(pbd_up_subdivision_create(fan, 3, 5, 1, &out), PBD_ERROR_INVALID_ARGUMENT,
                "edge (0, 1) is in 3 triangles: the mesh must be edge-manifold");
    int twice[6] = {0, 1, 2, 2, 0, 1}; /* one triangle listed twice: each edge in two triangles */
    CHECK_ERROR(pbd_up_subdivision_create(twice, 2, 3, 1, &out), PBD_ERROR_INVALID_ARGUMENT,
                "triangles: triangles 0 and 1 are the same triangle (vertices 0, 1, 2)");
    CHECK(out == NULL);
    CHECK_OK(pbd_up_subdivision_create(tris, 3, 4, 0, &out)); /* 0 levels: the identity */
    pbd_up_model_destroy(out);
    int cols[4];
    float w[4];
    int cnt;
    CHECK_ERROR(pbd_up_subdivision_stencil(m, n, cols, w, 4, &cnt), PBD_ERROR_INDEX_OUT_OF_RANGE, "row 162");
    CHECK_ERROR(pbd_up_subdivision_stencil(m, 0, NULL, w, 4, &cnt), PBD_ERROR_INVALID_ARGUMENT, "max 4");
    CHECK_RESULT(pbd_up_subdivision_fit_detail(m, u, NULL), PBD_OK);
    y[0] = NAN;
    CHECK_ERROR(pbd_up_subdivision_fit_detail(m, u, y), PBD_ERROR_NOT_FINITE,
                "detail_positions contain NaN or infinity (42 coarse, 162 detail vertices)");
    pbd_mesh bad;
    memset(&bad, 0, sizeof bad);
    CHECK_ERROR(pbd_up_mesh_subdivide(&bad, 1, 1, &bad), PBD_ERROR_NULL_POINTER, "in.positions is NULL");
    free(y);
    free(u);
    pbd_up_model_destroy(m);
}

/* A wrinkle mesh on a coarse grid: the fine mesh is the grid subdivided
   twice (midpoints). The coarse grid is compressed and bent over several
   frames; every fine vertex ends within its attachment radius of its
   target, and the fine mesh keeps its edge lengths better than the coarse
   mesh does (it buckles within the slack instead). */
TEST(up_wrinkle_radius) {
    pbd_mesh g, f;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh_grid(5, 5, o, u, v, &g);
    CHECK_OK(pbd_up_mesh_subdivide(&g, 2, 0, &f));
    unsigned st = 11; /* a small out-of-plane jitter breaks the symmetry */
    for (int i = 0; i < f.vertex_count; ++i) f.positions[3 * i + 1] += 0.002f * (pbdt_rand(&st) - 0.5f);
    pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&g, &f);
    d.radius = 0.03f;
    d.iterations = 8;
    pbd_up_wrinkle *wr = NULL;
    CHECK_OK(pbd_up_wrinkle_create(&d, &wr));
    if (!wr) return;
    int n = f.vertex_count;
    float *x = (float *)malloc(sizeof(float) * 3 * n), *t = (float *)malloc(sizeof(float) * 3 * n);
    float *cx = (float *)malloc(sizeof(float) * 3 * g.vertex_count);
    for (int frame = 1; frame <= 10; ++frame) {
        float s = 1.0f - 0.03f * frame; /* compress x by up to 30%, bend a little */
        for (int i = 0; i < g.vertex_count; ++i) {
            float px = g.positions[3 * i], pz = g.positions[3 * i + 2];
            cx[3 * i] = s * px;
            cx[3 * i + 1] = 0.1f * frame / 10.0f * sinf(3.0f * pz);
            cx[3 * i + 2] = pz;
        }
        CHECK_OK(pbd_up_wrinkle_update(wr, cx, x));
    }
    CHECK_OK(pbd_up_wrinkle_targets(wr, t, NULL, NULL));
    double worst = 0, lift = 0;
    for (int i = 0; i < n; ++i) {
        double dd = sqrt(pow(x[3 * i] - t[3 * i], 2) + pow(x[3 * i + 1] - t[3 * i + 1], 2) +
                         pow(x[3 * i + 2] - t[3 * i + 2], 2));
        if (dd > worst) worst = dd;
        if (fabs(x[3 * i + 1] - t[3 * i + 1]) > lift) lift = fabs(x[3 * i + 1] - t[3 * i + 1]);
    }
    CHECK_MSG(worst <= d.radius * (1 + 1e-5), "a fine vertex is %g from its target (radius %g)", worst, d.radius);
    CHECK_MSG(lift > 0.3 * d.radius, "no wrinkles: largest normal offset %g", lift);
    /* edge strain along x: coarse 30%, fine much less */
    double fine_strain = 0;
    int cnt = 0;
    for (int tr = 0; tr < f.triangle_count; ++tr)
        for (int k = 0; k < 3; ++k) {
            int a = f.triangles[3 * tr + k], b = f.triangles[3 * tr + (k + 1) % 3];
            double l0 = 0, l = 0;
            for (int c = 0; c < 3; ++c) {
                l0 += pow(f.positions[3 * a + c] - f.positions[3 * b + c], 2);
                l += pow(x[3 * a + c] - x[3 * b + c], 2);
            }
            fine_strain += fabs(sqrt(l) / sqrt(l0) - 1);
            cnt++;
        }
    fine_strain /= cnt;
    CHECK_MSG(fine_strain < 0.2, "fine mean strain %g (coarse compressed by 30%%)", fine_strain);
    CHECK_ERROR(pbd_up_wrinkle_update(wr, NULL, x), PBD_ERROR_NULL_POINTER, "coarse_positions is NULL");
    cx[4] = NAN;
    CHECK_ERROR(pbd_up_wrinkle_update(wr, cx, x), PBD_ERROR_NOT_FINITE,
                "coarse_positions contain NaN or infinity (25 vertices)");
    cx[4] = 1e20f;
    CHECK_ERROR(pbd_up_wrinkle_update(wr, cx, x), PBD_ERROR_INVALID_ARGUMENT,
                "coarse vertex 1 is 1e+20 m from the origin on axis 1, beyond PBD_MAX_COORDINATE = 1e+06 m");
    float t2[3 * 1000];
    if (n <= 1000) {
        CHECK_OK(pbd_up_wrinkle_targets(wr, t2, NULL, NULL));
        CHECK(memcmp(t2, t, sizeof(float) * 3 * n) == 0); /* nothing changed */
    }
    int tri;
    CHECK_ERROR(pbd_up_wrinkle_binding(wr, n, &tri, NULL, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "fine vertex 289 outside 0..288");
    free(x);
    free(t);
    free(cx);
    pbd_up_wrinkle_destroy(wr);
    pbd_up_mesh_free(&f);
    pbd_mesh_free(&g);
}

/* Is p strictly inside the convex closed mesh (all face planes)? */
static double upt_depth_inside(const float *x, const int *tris, int nt, const float *p) {
    double worst = -1e300; /* max over faces of the signed distance */
    for (int t = 0; t < nt; ++t) {
        const float *a = x + 3 * tris[3 * t], *b = x + 3 * tris[3 * t + 1], *c = x + 3 * tris[3 * t + 2];
        double e1[3], e2[3], n[3], l;
        for (int k = 0; k < 3; ++k) {
            e1[k] = b[k] - a[k];
            e2[k] = c[k] - a[k];
        }
        n[0] = e1[1] * e2[2] - e1[2] * e2[1];
        n[1] = e1[2] * e2[0] - e1[0] * e2[2];
        n[2] = e1[0] * e2[1] - e1[1] * e2[0];
        l = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        double s = ((p[0] - a[0]) * n[0] + (p[1] - a[1]) * n[1] + (p[2] - a[2]) * n[2]) / l;
        if (s > worst) worst = s;
    }
    return worst; /* < 0: inside */
}

/* One-sided attachment keeps the fine mesh outside a closed coarse mesh:
   the Loop-smoothed sphere lies inside its coarse icosahedron, and a
   squeezed coarse mesh pushes further in; with one_sided no fine vertex
   ends inside, without it many do. An open coarse mesh is refused. */
TEST(up_wrinkle_one_sided) {
    pbd_mesh s, f;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(0, c, 1.0f, &s);
    CHECK_OK(pbd_up_mesh_subdivide(&s, 2, 1, &f));
    float *cx = (float *)malloc(sizeof(float) * 3 * s.vertex_count);
    for (int i = 0; i < s.vertex_count; ++i) {
        cx[3 * i] = 1.1f * s.positions[3 * i];
        cx[3 * i + 1] = 0.8f * s.positions[3 * i + 1];
        cx[3 * i + 2] = s.positions[3 * i + 2];
    }
    float *x = (float *)malloc(sizeof(float) * 3 * f.vertex_count);
    for (int one_sided = 1; one_sided >= 0; --one_sided) {
        pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&s, &f);
        d.radius = 0.2f;
        d.one_sided = one_sided;
        pbd_up_wrinkle *wr = NULL;
        CHECK_OK(pbd_up_wrinkle_create(&d, &wr));
        if (!wr) continue;
        if (one_sided) { /* the binding is the closest coarse point (brute force here) */
            double worst = 0;
            for (int i = 0; i < f.vertex_count; ++i) {
                const float *q = f.positions + 3 * i;
                double best = 1e30;
                for (int t = 0; t < s.triangle_count; ++t) /* sample each triangle densely */
                    for (int a = 0; a <= 40; ++a)
                        for (int b = 0; a + b <= 40; ++b) {
                            double w0 = 1 - (a + b) / 40.0, w1 = a / 40.0, w2 = b / 40.0, d2 = 0;
                            for (int k = 0; k < 3; ++k) {
                                double x = w0 * s.positions[3 * s.triangles[3 * t] + k] +
                                           w1 * s.positions[3 * s.triangles[3 * t + 1] + k] +
                                           w2 * s.positions[3 * s.triangles[3 * t + 2] + k];
                                d2 += (x - q[k]) * (x - q[k]);
                            }
                            if (d2 < best) best = d2;
                        }
                int tri;
                float bc[3], off;
                CHECK_OK(pbd_up_wrinkle_binding(wr, i, &tri, bc, &off));
                CHECK(bc[0] >= -1e-6f && bc[1] >= -1e-6f && bc[2] >= -1e-6f &&
                      fabsf(bc[0] + bc[1] + bc[2] - 1) < 1e-5f);
                double d2 = 0;
                for (int k = 0; k < 3; ++k) {
                    double x = bc[0] * s.positions[3 * s.triangles[3 * tri] + k] +
                               bc[1] * s.positions[3 * s.triangles[3 * tri + 1] + k] +
                               bc[2] * s.positions[3 * s.triangles[3 * tri + 2] + k];
                    d2 += (x - q[k]) * (x - q[k]);
                }
                worst = fmax(worst, sqrt(d2) - sqrt(best)); /* never farther than any sample */
            }
            CHECK_MSG(worst < 1e-6, "a binding is %g farther than the closest sampled point", worst);
        }
        int inside = 0;
        double deepest = 0;
        for (int frame = 0; frame < 3; ++frame) CHECK_OK(pbd_up_wrinkle_update(wr, cx, x));
        for (int i = 0; i < f.vertex_count; ++i) {
            double dd = upt_depth_inside(cx, s.triangles, s.triangle_count, x + 3 * i);
            if (dd < -1e-5) inside++;
            if (dd < deepest) deepest = dd;
        }
        if (one_sided) CHECK_MSG(inside == 0, "%d fine vertices inside (deepest %g)", inside, deepest);
        else CHECK_MSG(inside > f.vertex_count / 4, "only %d inside without one-sided attachment", inside);
        pbd_up_wrinkle_destroy(wr);
    }
    /* errors */
    pbd_mesh g;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh_grid(3, 3, o, u, v, &g);
    pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&g, &g);
    pbd_up_wrinkle *wr = NULL;
    d.one_sided = 1;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_NOT_CLOSED,
                "one_sided needs a closed, consistently oriented coarse mesh");
    d.one_sided = 0;
    d.radius = -1;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_INVALID_ARGUMENT, "radius -1 < 0");
    d.radius = NAN;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_NOT_FINITE, "radius nan");
    d.radius = 0.01f;
    d.iterations = 0;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_INVALID_ARGUMENT, "iterations 0 outside 1..1000");
    d.iterations = 4;
    d.fine_count = 3;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "fine_triangles: triangle 0 names vertex 3, outside 0..2"); /* the message says which mesh */
    d.fine_count = g.vertex_count;
    d.coarse_count = 3;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "coarse_triangles: triangle 0 names vertex 3, outside 0..2");
    d.coarse_count = g.vertex_count;
    float flat[27];
    memcpy(flat, g.positions, sizeof flat);
    for (int i = 0; i < 9; ++i) flat[3 * i + 2] = 0; /* every coarse triangle collapses */
    d.coarse_positions = flat;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_DEGENERATE,
                "coarse triangle 0 (vertices 0, 1, 3) has zero area");
    d.coarse_positions = NULL;
    CHECK_ERROR(pbd_up_wrinkle_create(&d, &wr), PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_desc.coarse_positions is NULL");
    CHECK_ERROR(pbd_up_wrinkle_create(NULL, &wr), PBD_ERROR_NULL_POINTER, "d is NULL");
    CHECK(wr == NULL);
    pbd_mesh_free(&g);
    free(cx);
    free(x);
    pbd_up_mesh_free(&f);
    pbd_mesh_free(&s);
}

/* The wrinkle solve gives the same bits with 1 and 2 threads and with the
   SIMD kernels on or off (one-sided attachment on, so the plugin runs). */
TEST(up_wrinkle_threads_simd_bit_identical) {
    /* the wrinkle mesh's world: pbd.h's SIMD switch */
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    pbd_mesh s, f;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(1, c, 1.0f, &s);
    CHECK_OK(pbd_up_mesh_subdivide(&s, 1, 1, &f));
    pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&s, &f);
    d.radius = 0.1f;
    d.one_sided = 1;
    pbd_up_wrinkle *w[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; ++k) CHECK_OK(pbd_up_wrinkle_create(&d, &w[k]));
    if (!w[0] || !w[1] || !w[2]) return;
    CHECK_OK(pbd_up_wrinkle_set_threads(w[0], 1));
    CHECK_OK(pbd_up_wrinkle_set_simd(w[0], 0));
    CHECK_OK(pbd_up_wrinkle_set_threads(w[1], 2));
    CHECK_OK(pbd_up_wrinkle_set_threads(w[2], 2));
    CHECK_OK(pbd_up_wrinkle_set_simd(w[2], 0));
    int n = f.vertex_count;
    float *x[3], *u = (float *)malloc(sizeof(float) * 3 * s.vertex_count);
    for (int k = 0; k < 3; ++k) x[k] = (float *)malloc(sizeof(float) * 3 * n);
    for (int frame = 1; frame <= 4; ++frame) {
        for (int i = 0; i < s.vertex_count; ++i) {
            u[3 * i] = s.positions[3 * i] * (1 + 0.05f * frame);
            u[3 * i + 1] = s.positions[3 * i + 1] * (1 - 0.05f * frame);
            u[3 * i + 2] = s.positions[3 * i + 2] + 0.1f * frame;
        }
        for (int k = 0; k < 3; ++k) CHECK_OK(pbd_up_wrinkle_update(w[k], u, x[k]));
        CHECK(memcmp(x[0], x[1], sizeof(float) * 3 * n) == 0);
        CHECK(memcmp(x[0], x[2], sizeof(float) * 3 * n) == 0);
    }
    for (int k = 0; k < 3; ++k) {
        free(x[k]);
        pbd_up_wrinkle_destroy(w[k]);
    }
    free(u);
    pbd_up_mesh_free(&f);
    pbd_mesh_free(&s);
}

static pbd_up_training_desc upt_training_desc(pbd_up_scene scene) {
    pbd_up_training_desc d = pbd_up_training_desc_default();
    d.scene = scene;
    d.coarse_resolution = 6;
    d.levels = 1;
    d.frames = 12;
    d.steps_per_frame = 3;
    return d;
}

/* The generator: counts follow the subdivision, fine vertices at coarse
   vertices follow them, the cape swings (the top row follows the script),
   the fine mesh carries detail of its own, a second run is bit-identical,
   and save -> load -> save round-trips. */
TEST(up_training_cape_roundtrip) {
    pbd_up_training_desc d = upt_training_desc(PBD_UP_SCENE_CAPE);
    pbd_up_training t, t2, l;
    CHECK_OK(pbd_up_training_generate(&d, &t));
    CHECK(t.coarse_count == 36 && t.detail_count == 121 && t.frame_count == 12 && t.levels == 1);
    CHECK(t.coarse_triangle_count == 50 && t.detail_triangle_count == 200);
    int cc = t.coarse_count, dc = t.detail_count;
    double follow = 0, moved = 0, detail = 0;
    for (int f = 0; f < t.frame_count; ++f) {
        const float *u = t.coarse + (size_t)f * 3 * cc, *X = t.detail + (size_t)f * 3 * dc;
        for (int i = 0; i < 3 * cc; ++i) follow = fmax(follow, fabs(u[i] - X[i]));
        for (int i = 0; i < 3 * cc; ++i) moved = fmax(moved, fabs(u[i] - t.coarse_rest[i]));
    }
    /* the top row at the last frame: x = rest + A sin(2 pi f t) */
    double time = t.frame_count * d.steps_per_frame * (double)d.time_step;
    CHECK_NEAR(t.coarse[(size_t)(t.frame_count - 1) * 3 * cc + 3 * 2] - t.coarse_rest[3 * 2],
               d.amplitude * sin(2 * 3.14159265358979 * d.frequency * time), 1e-5);
    /* fine detail: the distance of the fine mesh from the midpoint
       subdivision of the coarse frame */
    pbd_mesh cm, lin;
    cm.positions = t.coarse + (size_t)(t.frame_count - 1) * 3 * cc;
    cm.vertex_count = cc;
    cm.triangles = t.coarse_triangles;
    cm.triangle_count = t.coarse_triangle_count;
    cm.tets = NULL;
    cm.tet_count = 0;
    CHECK_OK(pbd_up_mesh_subdivide(&cm, 1, 0, &lin));
    CHECK(memcmp(lin.triangles, t.detail_triangles, sizeof(int) * 3 * t.detail_triangle_count) == 0);
    for (int i = 0; i < 3 * dc; ++i)
        detail = fmax(detail, fabs(lin.positions[i] - t.detail[(size_t)(t.frame_count - 1) * 3 * dc + i]));
    pbd_up_mesh_free(&lin);
    CHECK_MSG(follow < 1e-5, "fine vertices at coarse vertices are %g off", follow);
    CHECK_MSG(moved > 0.1, "the cape barely moved (%g)", moved);
    CHECK_MSG(detail > 1e-4 && detail < 0.2, "fine detail %g", detail);
    CHECK_OK(pbd_up_training_generate(&d, &t2));
    CHECK(memcmp(t.detail, t2.detail, sizeof(float) * 3 * dc * t.frame_count) == 0);
    size_t size = pbd_up_training_save_size(&t);
    CHECK(size == 40 + 4 * (3 * (50 + 200) + 3 * (36 + 121) * (1 + 12)) + 8);
    unsigned char *buf = (unsigned char *)malloc(size), *buf2 = (unsigned char *)malloc(size);
    CHECK_OK(pbd_up_training_save(&t, buf, size));
    CHECK_OK(pbd_up_training_load(buf, size, &l));
    CHECK_OK(pbd_up_training_save(&l, buf2, size));
    CHECK(memcmp(buf, buf2, size) == 0);
    CHECK(l.frame_count == 12 && memcmp(l.detail, t.detail, sizeof(float) * 3 * dc * 12) == 0);
    pbd_up_training_free(&l);
    /* bad buffers */
    pbd_up_training bad;
    memset(&bad, 0, sizeof bad);
    CHECK_ERROR(pbd_up_training_load(buf, size - 1, &bad), PBD_ERROR_BAD_SNAPSHOT,
                "checksum mismatch: the training set file is damaged (27539 bytes)");
    for (size_t at = 0; at < size; at += 1 + size / 50) {
        buf[at] ^= 1;
        CHECK_ERROR(pbd_up_training_load(buf, size, &bad), PBD_ERROR_BAD_SNAPSHOT,
                    "checksum mismatch: the training set file is damaged (27540 bytes)");
        buf[at] ^= 1;
    }
    int big = 1 << 30; /* a frame count the buffer cannot hold, checksum forged */
    memcpy(buf + 24, &big, 4);
    uint64_t sum = upt_fnv(buf, size - 8);
    memcpy(buf + size - 8, &sum, 8);
    CHECK_ERROR(pbd_up_training_load(buf, size, &bad), PBD_ERROR_BAD_SNAPSHOT,
                "not a training set of this version and byte order");
    CHECK(bad.coarse == NULL);
    CHECK_ERROR(pbd_up_training_save(&t, buf, size - 1), PBD_ERROR_INVALID_ARGUMENT,
                "buffer of 27539 bytes, the training set needs 27540");
    CHECK_ERROR(pbd_up_training_load(NULL, size, &bad), PBD_ERROR_NULL_POINTER, "buffer is NULL");
    /* concat */
    pbd_up_training c;
    CHECK_OK(pbd_up_training_concat(&t, &t2, &c));
    CHECK(c.frame_count == 24 && memcmp(c.detail + (size_t)12 * 3 * dc, t2.detail, sizeof(float) * 3 * dc * 12) == 0);
    pbd_up_training_free(&c);
    free(buf);
    free(buf2);
    pbd_up_training_free(&t);
    pbd_up_training_free(&t2);
}

/* The drop scene: the cloth falls onto the sphere and drapes over it
   without entering it (coarse and fine). Bad descs get their errors. */
TEST(up_training_drop_and_bad_desc) {
    pbd_up_training_desc d = upt_training_desc(PBD_UP_SCENE_DROP);
    d.frames = 20;
    pbd_up_training t;
    CHECK_OK(pbd_up_training_generate(&d, &t));
    float R = 0.3f * d.size;
    double lowest = 1e9, deepest = 1e9;
    const float *X = t.detail + (size_t)(t.frame_count - 1) * 3 * t.detail_count;
    for (int i = 0; i < t.detail_count; ++i) {
        double r = sqrt(X[3 * i] * X[3 * i] + X[3 * i + 1] * X[3 * i + 1] + X[3 * i + 2] * X[3 * i + 2]);
        deepest = fmin(deepest, r);
        lowest = fmin(lowest, X[3 * i + 1]);
    }
    CHECK_MSG(deepest > R - 0.01, "a fine vertex is %g inside the sphere", R - deepest);
    CHECK_MSG(lowest < 0.0, "the cloth did not drape (lowest y %g)", lowest);
    pbd_up_training c;
    pbd_up_training_desc d2 = upt_training_desc(PBD_UP_SCENE_CAPE);
    d2.coarse_resolution = 5;
    pbd_up_training t2;
    CHECK_OK(pbd_up_training_generate(&d2, &t2));
    CHECK_ERROR(pbd_up_training_concat(&t, &t2, &c), PBD_ERROR_INVALID_ARGUMENT,
                "vertex counts differ (coarse 36 and 25,");
    pbd_up_training_free(&t2);
    pbd_up_training_free(&t);
    d = upt_training_desc(PBD_UP_SCENE_CAPE);
    d.coarse_resolution = 2;
    CHECK_ERROR(pbd_up_training_generate(&d, &t), PBD_ERROR_INVALID_ARGUMENT,
                "coarse_resolution outside 3..256 (scene");
    d = upt_training_desc(PBD_UP_SCENE_CAPE);
    d.levels = 0;
    CHECK_ERROR(pbd_up_training_generate(&d, &t), PBD_ERROR_INVALID_ARGUMENT, "levels outside 1..4 (scene 0,");
    d = upt_training_desc(PBD_UP_SCENE_CAPE);
    d.size = NAN;
    CHECK_ERROR(pbd_up_training_generate(&d, &t), PBD_ERROR_NOT_FINITE, "size nan");
    d = upt_training_desc(PBD_UP_SCENE_CAPE);
    d.jitter = INFINITY; /* named alone (every value was listed) */
    CHECK_ERROR(pbd_up_training_generate(&d, &t), PBD_ERROR_NOT_FINITE,
                "pbd_up_training_desc: jitter inf is not finite");
    d = upt_training_desc(PBD_UP_SCENE_CAPE);
    d.time_step = 0;
    CHECK_ERROR(pbd_up_training_generate(&d, &t), PBD_ERROR_INVALID_ARGUMENT,
                "time_step outside [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] = [1e-6, 1] s (scene 0,");
    d = upt_training_desc((pbd_up_scene)7);
    CHECK_ERROR(pbd_up_training_generate(&d, &t), PBD_ERROR_INVALID_ARGUMENT, "scene is not a pbd_up_scene (scene 7,");
    CHECK_ERROR(pbd_up_training_generate(NULL, &t), PBD_ERROR_NULL_POINTER, "d is NULL");
    CHECK(pbd_up_training_save_size(NULL) == 0);
}

/* The scene's coarse simulation live (pbd_up_training_world, stepped with
   pbd_up_training_drive) replays the training's coarse frames bit for bit,
   in both scenes; bad input is refused and leaves the world as it was. */
TEST(up_training_world_replays_the_training) {
    for (int sc = 0; sc < 2; ++sc) {
        pbd_up_training_desc d = upt_training_desc((pbd_up_scene)sc);
        pbd_up_training t;
        CHECK_OK(pbd_up_training_generate(&d, &t));
        pbd_world *w = NULL;
        pbd_range cloth;
        CHECK_OK(pbd_up_training_world(&d, &w, &cloth));
        CHECK(cloth.count == t.coarse_count);
        float *u = (float *)malloc(sizeof(float) * 3 * (size_t)t.coarse_count);
        CHECK_OK(pbd_particles_get_positions(w, cloth, u));
        CHECK(memcmp(u, t.coarse_rest, sizeof(float) * 3 * (size_t)t.coarse_count) == 0);
        int differ = 0;
        for (int k = 0; k < d.frames * d.steps_per_frame; ++k) {
            CHECK_OK(pbd_up_training_drive(&d, w, cloth, (k + 1) * (double)d.time_step));
            CHECK_OK(pbd_world_step(w, d.time_step));
            if ((k + 1) % d.steps_per_frame) continue;
            CHECK_OK(pbd_particles_get_positions(w, cloth, u));
            const float *frame = t.coarse + (size_t)((k + 1) / d.steps_per_frame - 1) * 3 * t.coarse_count;
            differ += memcmp(u, frame, sizeof(float) * 3 * (size_t)t.coarse_count) != 0;
        }
        CHECK_MSG(differ == 0, "scene %d: %d of %d frames differ from the training's", sc, differ, t.frame_count);
        if (sc == PBD_UP_SCENE_CAPE) { /* bad input: refused, the world unchanged */
            size_t n0, n1;
            unsigned char *before = pbdt_save(w, &n0);
            CHECK(n0 > 0);
            pbd_range wrong = {cloth.first, cloth.count - 1};
            CHECK_WORLD_ERROR(w, pbd_up_training_drive(&d, w, wrong, 1.0), PBD_ERROR_INVALID_ARGUMENT,
                              "is not the scene's 6 x 6 vertices");
            CHECK_WORLD_ERROR(w, pbd_up_training_drive(&d, w, cloth, NAN), PBD_ERROR_NOT_FINITE, "time is nan");
            CHECK_WORLD_ERROR(w, pbd_up_training_drive(NULL, w, cloth, 1.0), PBD_ERROR_NULL_POINTER, "desc is NULL");
            CHECK_ERROR(pbd_up_training_drive(&d, NULL, cloth, 1.0), PBD_ERROR_NULL_POINTER, "w is NULL");
            pbd_up_training_desc bad = d;
            bad.coarse_resolution = 5;
            CHECK_WORLD_ERROR(w, pbd_up_training_drive(&bad, w, cloth, 1.0), PBD_ERROR_INVALID_ARGUMENT,
                              "is not the scene's 5 x 5 vertices");
            bad.size = INFINITY;
            CHECK_WORLD_ERROR(w, pbd_up_training_drive(&bad, w, cloth, 1.0), PBD_ERROR_NOT_FINITE,
                              "pbd_up_training_desc: size inf");
            unsigned char *after = pbdt_save(w, &n1);
            CHECK(n0 == n1 && memcmp(before, after, n0) == 0);
            free(before);
            free(after);
            CHECK_OK(pbd_particle_set_kinematic(w, cloth.first + 3, 0)); /* a hand let go of the row */
            CHECK_WORLD_ERROR(w, pbd_up_training_drive(&d, w, cloth, 1.0), PBD_ERROR_INVALID_ARGUMENT,
                              "top-row particle 3 is not kinematic");
            pbd_world *none = NULL;
            CHECK_ERROR(pbd_up_training_world(&bad, &none, &wrong), PBD_ERROR_NOT_FINITE,
                        "pbd_up_training_desc: size inf");
            CHECK(none == NULL);
            CHECK_ERROR(pbd_up_training_world(&d, NULL, &wrong), PBD_ERROR_NULL_POINTER, "w is NULL");
            CHECK_ERROR(pbd_up_training_world(&d, &none, NULL), PBD_ERROR_NULL_POINTER, "cloth is NULL");
            bad = d;
            bad.device = (pbd_device)9;
            CHECK_ERROR(pbd_up_training_world(&bad, &none, &wrong), PBD_ERROR_INVALID_ARGUMENT, "device");
            CHECK(none == NULL);
        }
        free(u);
        pbd_world_destroy(w);
        pbd_up_training_free(&t);
    }
}

/* Error messages are part of the interface: every kind of bad input to
   pbd_upsample.h - a damaged, foreign or truncated model file, NaN input,
   bad triangles, a wrinkle mesh's or an upsampler's desc - gets its result
   and a message in words that names the public parameter or desc field
   and keeps the offending values, never the C of the check or an internal
   name (a damaged file read "pbd_up_model_load: rejected because sum !=
   pbd_up__fnv1a(in, size - sizeof sum)" once). */
TEST(up_messages_read_as_words) {
    float *u = NULL;
    pbd_up_model *m = upt_detail_model(1, 1, &u), *out = NULL;
    CHECK(m != NULL);
    if (!m) return;
    int nc = pbd_up_model_coarse_count(m), nd = pbd_up_model_detail_count(m);
    float *y = (float *)malloc(sizeof(float) * 3 * (size_t)nd);
    /* model files */
    size_t size = pbd_up_model_save_size(m);
    unsigned char *buf = (unsigned char *)malloc(size);
    CHECK_OK(pbd_up_model_save(m, buf, size));
    buf[0] ^= 1;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_load(buf, size, &out), PBD_ERROR_BAD_SNAPSHOT,
                         "not a pbd_upsample model file (wrong magic)");
    buf[0] ^= 1;
    uint32_t format, two = 2;
    memcpy(&format, buf + 8, 4);
    memcpy(buf + 8, &two, 4);
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_load(buf, size, &out), PBD_ERROR_BAD_SNAPSHOT,
                         "model file is from format 2, this build reads 1");
    memcpy(buf + 8, &format, 4);
    buf[size / 2] ^= 0x40;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_load(buf, size, &out), PBD_ERROR_BAD_SNAPSHOT,
                         "checksum mismatch: the model file is damaged");
    buf[size / 2] ^= 0x40;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_load(buf, size - 8, &out), PBD_ERROR_BAD_SNAPSHOT, "(truncated:");
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_load(buf, 16, &out), PBD_ERROR_BAD_SNAPSHOT,
                         "16 bytes are too few for a model file");
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_save(m, buf, 100), PBD_ERROR_INVALID_ARGUMENT,
                         "buffer of 100 bytes, the model needs");
    CHECK(out == NULL);
    /* evaluation */
    u[4] = NAN;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_eval(m, u, y), PBD_ERROR_NOT_FINITE,
                         "pbd_up_model_eval: coarse_positions contain NaN or infinity");
    u[4] = 0.0f;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_eval_checked(m, u, nc + 1, y, nd), PBD_ERROR_INVALID_ARGUMENT,
                         "are not the model's");
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_model_set_threads(m, 2000), PBD_ERROR_INVALID_ARGUMENT,
                         "threads 2000 outside 0..1024");
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_subdivision_stencil(m, nd, NULL, NULL, 0, &nc), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "row 162 outside 0..161");
    float c6[6];
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_pdm_coefficients(m, 0, c6), PBD_ERROR_INVALID_ARGUMENT, "m is not a PDM model");
    /* subdivision of a bad mesh */
    int oob[3] = {0, 1, 5}, fan[9] = {0, 1, 2, 0, 1, 3, 0, 1, 4};
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_subdivision_create(oob, 1, 3, 1, &out), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "triangle 0 names vertex 5, outside 0..2");
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_subdivision_create(fan, 3, 5, 9, &out), PBD_ERROR_INVALID_ARGUMENT,
                         "levels 9 must be in 0..8");
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_subdivision_create(fan, 3, 5, 1, &out), PBD_ERROR_INVALID_ARGUMENT,
                         "edge (0, 1) is in 3 triangles: the mesh must be edge-manifold");
    /* a wrinkle mesh's desc */
    pbd_mesh g;
    float o[3] = {0, 0, 0}, ax[3] = {1, 0, 0}, az[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(3, 3, o, ax, az, &g));
    pbd_up_wrinkle_desc wd = pbdt_wrinkle_desc(&g, &g);
    pbd_up_wrinkle *wr = NULL;
    wd.iterations = 0;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wrinkle_create(&wd, &wr), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_up_wrinkle_create: iterations 0 outside 1..1000");
    wd.iterations = 4;
    wd.bending_compliance = -1.0f;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wrinkle_create(&wd, &wr), PBD_ERROR_INVALID_ARGUMENT,
                         "bending_compliance -1 < 0");
    wd.bending_compliance = 1e-3f;
    wd.one_sided = 1;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wrinkle_create(&wd, &wr), PBD_ERROR_NOT_CLOSED,
                         "one_sided needs a closed, consistently oriented coarse mesh");
    wd.one_sided = 0;
    wd.fine_positions = NULL;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wrinkle_create(&wd, &wr), PBD_ERROR_NULL_POINTER,
                         "pbd_up_wrinkle_desc.fine_positions is NULL");
    CHECK(wr == NULL);
    pbd_mesh_free(&g);
    /* the upsamplers' descs */
    float frames[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
    pbd_up_piu_desc pd = pbd_up_piu_desc_default();
    pd.coarse_count = pd.detail_count = 3;
    pd.frame_count = 1;
    pd.coarse_frames = pd.detail_frames = frames;
    pd.support = 1;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_piu_fit(&pd, &out), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_up_piu_fit: support 1 outside 2..64");
    pd.support = 2;
    frames[4] = INFINITY;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_piu_fit(&pd, &out), PBD_ERROR_NOT_FINITE,
                         "coarse_frames contain NaN or infinity (1 frames)");
    /* the one count at fault, alone (all three were listed) */
    pd.frame_count = 0;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_piu_fit(&pd, &out), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_up_piu_fit: frame_count 0 must be >= 1");
    pd.frame_count = 1;
    pbd_up_training empty; /* arrays there, no frame */
    memset(&empty, 0, sizeof empty);
    empty.coarse_count = empty.detail_count = 3;
    int no_tris[3] = {0, 1, 2};
    empty.coarse_triangles = empty.detail_triangles = no_tris;
    empty.coarse_rest = empty.detail_rest = empty.coarse = empty.detail = frames;
    unsigned char tbuf[4096];
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_training_save(&empty, tbuf, sizeof tbuf), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_up_training_save: frame_count 0 must be >= 1");
    pbd_up_wpsd_desc wpd = pbd_up_wpsd_desc_default();
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wpsd_fit(&wpd, &out), PBD_ERROR_NULL_POINTER, "subdivision is NULL");
    int far_tri[3] = {0, 1, 99};
    wpd.subdivision = m;
    wpd.coarse_triangles = far_tri;
    wpd.coarse_triangle_count = 1;
    wpd.frame_count = 1;
    wpd.coarse_frames = wpd.detail_frames = frames; /* not read: the sizes, then the triangles are refused first */
    /* frames of other sizes than the model's (a model of another level
       or mesh): refused, not read past their end (an audit's ASan report) */
    wpd.coarse_count = pbd_up_model_coarse_count(m);
    wpd.detail_count = 3;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wpsd_fit(&wpd, &out), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_up_wpsd_fit: coarse_count 42 and detail_count 3 (the frames' vertices) are not the "
                         "subdivision model's 42 and 162");
    pbd_up_pdm_desc pmd = pbd_up_pdm_desc_default();
    pmd.subdivision = m;
    pmd.coarse_triangles = far_tri;
    pmd.coarse_triangle_count = 1;
    pmd.frame_count = 6;
    pmd.coarse_frames = pmd.detail_frames = frames;
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_pdm_fit(&pmd, &out), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_up_pdm_fit: coarse_count 0 and detail_count 0 (the frames' vertices) are not the "
                         "subdivision model's 42 and 162");
    wpd.detail_count = pbd_up_model_detail_count(m);
    CHECK_ERROR_IN_WORDS(NULL, pbd_up_wpsd_fit(&wpd, &out), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "triangle 0 names vertex 99, outside 0..41");
    CHECK(out == NULL);
    free(buf);
    free(y);
    free(u);
    pbd_up_model_destroy(m);
}

void suite_upsample(void) {
    RUN(up_loop_counts);
    RUN(up_loop_planar_stays_planar);
    RUN(up_loop_closed_stays_closed);
    RUN(up_stencil_rows_and_loop_weights);
    RUN(up_subdivision_eval_matches_mesh);
    RUN(up_two_scale_detail);
    RUN(up_eval_simd_threads_bit_identical);
    RUN(up_model_save_load_roundtrip);
    RUN(up_eval_world_equals_eval_and_checks_the_range);
    RUN(up_model_bad_input);
    RUN(up_messages_read_as_words);
    RUN(up_wrinkle_radius);
    RUN(up_wrinkle_one_sided);
    RUN(up_wrinkle_threads_simd_bit_identical);
    RUN(up_training_cape_roundtrip);
    RUN(up_training_drop_and_bad_desc);
    RUN(up_training_world_replays_the_training);
}
