/* tests/test_strain.c - strain limiting (survey section 3.5): long range
   attachments with Euclidean and geodesic rest lengths (Kim et al. 2012),
   triangle principal-strain limits (Wang et al. 2010) and the classic edge
   pass, their bad inputs, thread independence and snapshots. */
#include "test.h"
#include <stdlib.h>

/* A hanging n x n cloth, 1 m wide, in the x-y plane, top row (j = 0)
   pinned; one thread (a loaded machine makes spinning barriers slow).
   Without the automatic tethers (pbd_cloth_desc.tethers): these tests
   measure the user's LRA sets and strain limits against the bare solver. */
static pbd_world *hanging_cloth_tethers(int n, int iterations, float stretch_compliance, int tethers, pbd_object *obj,
                                        pbd_mesh *m) {
    pbd_world_desc d = pbd_world_desc_default();
    d.iterations = iterations;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK_OK(pbd_world_set_threads(w, 1));
    float o[3] = {-0.5f, 1.0f, 0.0f}, u[3] = {1, 0, 0}, v[3] = {0, -1, 0};
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, m));
    pbd_cloth_desc cd = pbdt_cloth_desc(m);
    cd.stretch_compliance = stretch_compliance;
    cd.tethers = tethers;
    CHECK_OK(pbd_add_cloth(w, &cd, obj));
    for (int i = 0; i < n; ++i) CHECK_OK(pbd_particle_pin(w, pbdt_parts(w, *obj).particles.first + i));
    return w;
}
static pbd_world *hanging_cloth(int n, int iterations, float stretch_compliance, pbd_object *obj, pbd_mesh *m) {
    return hanging_cloth_tethers(n, iterations, stretch_compliance, 0, obj, m);
}

/* Largest relative stretch |x_a - x_b| / rest - 1 over the mesh edges. */
static double max_edge_stretch(const pbd_world *w, const pbd_mesh *m, int first) {
    const float *x = pbd_world_positions(w);
    double mx = 0;
    for (int t = 0; t < m->triangle_count; ++t)
        for (int e = 0; e < 3; ++e) {
            int a = m->triangles[3 * t + e], b = m->triangles[3 * t + (e + 1) % 3];
            const float *ra = m->positions + 3 * a, *rb = m->positions + 3 * b;
            const float *xa = x + 4 * (first + a), *xb = x + 4 * (first + b);
            double r = sqrt((double)(ra[0] - rb[0]) * (ra[0] - rb[0]) + (double)(ra[1] - rb[1]) * (ra[1] - rb[1]) +
                            (double)(ra[2] - rb[2]) * (ra[2] - rb[2]));
            double l = sqrt((double)(xa[0] - xb[0]) * (xa[0] - xb[0]) + (double)(xa[1] - xb[1]) * (xa[1] - xb[1]) +
                            (double)(xa[2] - xb[2]) * (xa[2] - xb[2]));
            if (l / r - 1 > mx) mx = l / r - 1;
        }
    return mx;
}

static pbd_lra add_top_lra(pbd_world *w, const pbd_object *obj, int n, int geodesic) {
    int anchors[64];
    for (int i = 0; i < n; ++i) anchors[i] = pbdt_parts(w, *obj).particles.first + i;
    pbd_lra_desc ld = pbd_lra_desc_default();
    ld.object = *obj;
    ld.anchors = anchors;
    ld.anchor_count = n;
    ld.geodesic = geodesic;
    pbd_lra l = {0};
    CHECK_OK(pbd_add_long_range_attachments(w, &ld, &l));
    return l;
}

/* The test: 50 x 50, 2 iterations, LRA on keeps the maximum
   stretch under 1 %; off, the cloth stretches far more. The cloth's
   automatic tethers (on = 2: pinned one by one, no user set) do the same. */
TEST(strain_lra_keeps_hanging_cloth_inextensible) {
    LONG_SCENE();
    double worst[3] = {0, 0, 0};
    for (int on = 0; on < 3; ++on) {
        pbd_object obj;
        pbd_mesh m;
        pbd_world *w = hanging_cloth_tethers(50, 2, 0.0f, on == 2, &obj, &m);
        if (on == 1) add_top_lra(w, &obj, 50, 1);
        for (int s = 0; s < 90; ++s) {
            CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
            double st = max_edge_stretch(w, &m, pbdt_parts(w, obj).particles.first);
            if (st > worst[on]) worst[on] = st;
        }
        pbd_mesh_free(&m);
        pbd_world_destroy(w);
    }
    printf("    50x50 cloth, 2 iterations: max edge stretch %.4f %% with LRA, %.4f %% with the automatic tethers, %.3f "
           "%% without\n",
           100 * worst[1], 100 * worst[2], 100 * worst[0]);
    CHECK_MSG(worst[1] < 0.01, "max stretch with LRA %g", worst[1]);
    CHECK_MSG(worst[2] < 0.01, "max stretch with the automatic tethers %g", worst[2]);
    CHECK_MSG(worst[0] > 5 * worst[1] && worst[0] > 0.03, "max stretch without LRA %g (with %g)", worst[0], worst[1]);
}

/* A tether is unilateral: a particle inside its sphere moves freely, one
   outside is put back on it; it follows a kinematic anchor; it is off
   while its anchor is dynamic (unpinned). */
TEST(strain_lra_tether_is_unilateral_and_follows_its_anchor) {
    pbd_world *w = pbdt_world(-9.81f);
    float pos[6] = {0, 1, 0, 0.3f, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = 2;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_particle_set_kinematic(w, r.first, 1));
    int anchor = r.first, particle = r.first + 1;
    pbd_lra_desc ld = pbd_lra_desc_default();
    ld.particles = &particle;
    ld.count = 1;
    ld.anchors = &anchor;
    ld.anchor_count = 1;
    ld.slack = 0.5f;
    pbd_lra l;
    CHECK_OK(pbd_add_long_range_attachments(w, &ld, &l));
    float len = 0;
    int count = 0;
    CHECK_OK(pbd_lra_tethers(w, l, NULL, NULL, &len, 1, &count));
    CHECK(count == 1);
    CHECK_NEAR(len, 0.45, 1e-6); /* 0.3 * (1 + slack) */
    /* inside the sphere it falls freely for a while */
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    CHECK(x[4 * particle + 1] < 1.0f && x[4 * particle] == 0.3f);
    for (int s = 0; s < 60; ++s) {
        float t[3] = {0.01f * (float)s, 1, 0};
        CHECK_OK(pbd_particle_set_kinematic_target(w, anchor, t));
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        x = pbd_world_positions(w);
        double d = sqrt(pow(x[4 * particle] - x[4 * anchor], 2) + pow(x[4 * particle + 1] - x[4 * anchor + 1], 2) +
                        pow(x[4 * particle + 2] - x[4 * anchor + 2], 2));
        CHECK_MSG(d <= 0.45 * (1 + 1e-6), "step %d: %g from the anchor", s, d);
    }
    CHECK_NEAR(x[4 * particle + 1], 1.0f - 0.45f, 0.02); /* hangs below the anchor at the tether's length */
    /* an unpinned anchor does not hold: both fall, the tether is off */
    CHECK_OK(pbd_particle_set_kinematic(w, anchor, 0));
    CHECK_OK(pbd_lra_set_enabled(w, l, 1));
    float vel[3] = {0, 5, 0};
    pbd_range pr = {particle, 1};
    CHECK_OK(pbd_particles_set_velocities(w, pr, vel)); /* thrown up past the anchor */
    for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    x = pbd_world_positions(w);
    CHECK(x[4 * particle + 1] - x[4 * anchor + 1] > 0.45f + 0.5f);
    pbd_world_destroy(w);
}

/* The test's own all-pairs shortest paths (Floyd-Warshall) over a mesh's
   edges, against the library's Dijkstra. */
TEST(strain_lra_geodesic_rest_lengths_equal_shortest_paths) {
    pbd_world *w = pbdt_world(0.0f);
    CHECK_OK(pbd_world_set_threads(w, 1));
    enum { N = 6, V = N * N };
    pbd_mesh m;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(N, N, o, u, v, &m));
    unsigned seed = 11;
    for (int i = 0; i < 3 * V; ++i) m.positions[i] += 0.05f * (pbdt_rand(&seed) - 0.5f); /* not a regular grid */
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    pbd_object obj;
    CHECK_OK(pbd_add_cloth(w, &cd, &obj));
    static double D[V][V];
    for (int a = 0; a < V; ++a)
        for (int b = 0; b < V; ++b) D[a][b] = a == b ? 0 : 1e30;
    for (int t = 0; t < m.triangle_count; ++t)
        for (int e = 0; e < 3; ++e) {
            int a = m.triangles[3 * t + e], b = m.triangles[3 * t + (e + 1) % 3];
            const float *pa = m.positions + 3 * a, *pb = m.positions + 3 * b;
            double l = sqrt((double)(pa[0] - pb[0]) * (pa[0] - pb[0]) + (double)(pa[1] - pb[1]) * (pa[1] - pb[1]) +
                            (double)(pa[2] - pb[2]) * (pa[2] - pb[2]));
            D[a][b] = D[b][a] = l;
        }
    for (int k = 0; k < V; ++k)
        for (int a = 0; a < V; ++a)
            for (int b = 0; b < V; ++b)
                if (D[a][k] + D[k][b] < D[a][b]) D[a][b] = D[a][k] + D[k][b];
    int anchors[3] = {0, N - 1, V - 1};
    for (int k = 1; k <= 2; ++k)
        for (int geo = 0; geo < 2; ++geo) {
            pbd_lra_desc ld = pbd_lra_desc_default();
            ld.object = obj;
            ld.anchors = anchors;
            ld.anchor_count = 3;
            ld.geodesic = geo;
            ld.anchors_per_particle = k;
            pbd_lra l;
            CHECK_OK(pbd_add_long_range_attachments(w, &ld, &l));
            int count = 0, parts[2 * V], anc[2 * V];
            float len[2 * V];
            CHECK_OK(pbd_lra_tethers(w, l, parts, anc, len, 2 * V, &count));
            CHECK_MSG(count == k * (V - 3), "k=%d: %d tethers", k, count);
            for (int t = 0; t < count; ++t) {
                int first = pbdt_parts(w, obj).particles.first, p = parts[t] - first, a = anc[t] - first;
                double want;
                if (geo) want = D[p][a];
                else {
                    const float *pp = m.positions + 3 * p, *pa = m.positions + 3 * a;
                    want = sqrt((double)(pp[0] - pa[0]) * (pp[0] - pa[0]) + (double)(pp[1] - pa[1]) * (pp[1] - pa[1]) +
                                (double)(pp[2] - pa[2]) * (pp[2] - pa[2]));
                }
                CHECK_NEAR(len[t], want, 1e-5 * want);
                /* it is one of the k nearest anchors */
                int closer = 0;
                for (int b = 0; b < 3; ++b) {
                    double db = geo ? D[p][anchors[b]] : -1;
                    if (!geo) {
                        const float *pp = m.positions + 3 * p, *pb = m.positions + 3 * anchors[b];
                        db =
                            sqrt((double)(pp[0] - pb[0]) * (pp[0] - pb[0]) + (double)(pp[1] - pb[1]) * (pp[1] - pb[1]) +
                                 (double)(pp[2] - pb[2]) * (pp[2] - pb[2]));
                    }
                    closer += db < want - 1e-6;
                }
                CHECK_MSG(closer < k, "tether %d-%d is not among the %d nearest", p, a, k);
            }
        }
    /* geodesics are longer than straight lines on a bumpy grid */
    CHECK(D[0][V - 1] > sqrt(2.0) * 1.0001);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* Principal stretches of triangle p (3 points) against rest (3 points),
   computed independently of the library: singular values of F from the
   closed form of the 2x2 Gram matrix of F's columns in an orthonormal rest
   frame. */
static void principal_stretches(const float *p, const float *rest, double *s1, double *s2) {
    double e1[3], e2[3], f1[3], f2[3];
    for (int k = 0; k < 3; ++k) {
        e1[k] = rest[3 + k] - rest[k];
        e2[k] = rest[6 + k] - rest[k];
        f1[k] = p[3 + k] - p[k];
        f2[k] = p[6 + k] - p[k];
    }
    /* rest metric G = [e1 e2]^T [e1 e2], current metric H = [f1 f2]^T [f1 f2];
       the squared stretches are the eigenvalues of G^-1 H */
    double G[4] = {e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2], 0, 0, 0};
    G[1] = G[2] = e1[0] * e2[0] + e1[1] * e2[1] + e1[2] * e2[2];
    G[3] = e2[0] * e2[0] + e2[1] * e2[1] + e2[2] * e2[2];
    double H[4] = {f1[0] * f1[0] + f1[1] * f1[1] + f1[2] * f1[2], 0, 0, 0};
    H[1] = H[2] = f1[0] * f2[0] + f1[1] * f2[1] + f1[2] * f2[2];
    H[3] = f2[0] * f2[0] + f2[1] * f2[1] + f2[2] * f2[2];
    double det = G[0] * G[3] - G[1] * G[2];
    double Gi[4] = {G[3] / det, -G[1] / det, -G[2] / det, G[0] / det};
    double A[4] = {Gi[0] * H[0] + Gi[1] * H[2], Gi[0] * H[1] + Gi[1] * H[3], Gi[2] * H[0] + Gi[3] * H[2],
                   Gi[2] * H[1] + Gi[3] * H[3]};
    double tr = A[0] + A[3], dt = A[0] * A[3] - A[1] * A[2];
    double disc = sqrt(fmax(tr * tr / 4 - dt, 0));
    *s1 = sqrt(tr / 2 + disc);
    *s2 = sqrt(fmax(tr / 2 - disc, 0));
}

TEST(strain_limit_triangle_clamps_principal_stretches) {
    unsigned seed = 5;
    for (int trial = 0; trial < 200; ++trial) {
        float rest[9], p[9], w[3];
        for (int i = 0; i < 9; ++i) rest[i] = pbdt_rand(&seed);
        for (int i = 0; i < 9; ++i) p[i] = 3.0f * pbdt_rand(&seed) - 1.0f;
        for (int i = 0; i < 3; ++i) w[i] = trial % 4 == 3 && i == 0 ? 0.0f : 0.5f + pbdt_rand(&seed);
        double r1, r2;
        principal_stretches(p, rest, &r1, &r2);
        if (r2 < 1e-3 || (rest[0] == rest[3] && rest[1] == rest[4])) continue;
        float before[9], st[2];
        memcpy(before, p, sizeof p);
        pbd_result r = pbd_strain_limit_triangle(p, rest, w, 0.8f, 1.2f, st);
        if (r == PBD_ERROR_DEGENERATE) continue;
        CHECK_OK(r);
        CHECK_NEAR(st[0], r1, 1e-4 * r1);
        CHECK_NEAR(st[1], r2, 1e-4 * (r1 > 1 ? r1 : 1));
        double s1, s2;
        principal_stretches(p, rest, &s1, &s2);
        if (w[0] > 0) { /* free triangle: both stretches end in [0.8, 1.2], to float
                           precision of a problem of condition r1 / r2 */
            double tol = 1e-5 * (r1 / r2 > 10 ? r1 / r2 : 10);
            CHECK_MSG(s1 <= 1.2 + tol && s2 >= 0.8 - tol, "trial %d: %g %g -> %g %g", trial, r1, r2, s1, s2);
            /* the mass-weighted centroid stays */
            for (int k = 0; k < 3; ++k) {
                double c0 = 0, c1 = 0, M = 0;
                for (int i = 0; i < 3; ++i) {
                    c0 += before[3 * i + k] / w[i];
                    c1 += p[3 * i + k] / w[i];
                    M += 1 / w[i];
                }
                CHECK_NEAR(c0 / M, c1 / M, 1e-5);
            }
        } else { /* a pinned corner stays */
            CHECK(p[0] == before[0] && p[1] == before[1] && p[2] == before[2]);
        }
    }
    /* a triangle within the limits is not touched */
    float rest[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0}, p[9] = {0, 0, 0, 1.05f, 0, 0, 0, 0.97f, 0.1f}, q[9], w[3] = {1, 1, 1};
    memcpy(q, p, sizeof p);
    CHECK_OK(pbd_strain_limit_triangle(p, rest, w, 0.9f, 1.1f, NULL));
    CHECK(memcmp(p, q, sizeof p) == 0);
    /* bad input */
    CHECK_RESULT(pbd_strain_limit_triangle(NULL, rest, w, 0.9f, 1.1f, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_strain_limit_triangle(p, rest, w, 1.1f, 1.2f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_strain_limit_triangle(p, rest, w, 0.9f, 0.95f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    float flat[9] = {0, 0, 0, 1, 0, 0, 2, 0, 0}, nan_p[9] = {NAN, 0, 0, 1, 0, 0, 0, 1, 0}, neg[3] = {1, -1, 1};
    CHECK_RESULT(pbd_strain_limit_triangle(p, flat, w, 0.9f, 1.1f, NULL), PBD_ERROR_DEGENERATE);
    CHECK_RESULT(pbd_strain_limit_triangle(nan_p, rest, w, 0.9f, 1.1f, NULL), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_strain_limit_triangle(p, rest, neg, 0.9f, 1.1f, NULL), PBD_ERROR_NEGATIVE_MASS);
}

/* A soft cloth (compliant edges) hangs: with a strain limit every
   triangle's principal stretches (triangle mode) or edge ratios (edge
   mode) end within 1 % of the limits (what Gauss-Seidel leaves after 16
   iterations on 16 rows, survey 3.5); without, they do not. */
TEST(strain_limit_keeps_soft_cloth_within_limits) {
    for (int mode = -1; mode < 2; ++mode) {
        pbd_object obj;
        pbd_mesh m;
        pbd_world *w = hanging_cloth(16, 16, 0.5f, &obj, &m);
        pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
        sd.object = obj;
        sd.triangles = m.triangles;
        sd.triangle_count = m.triangle_count;
        sd.mode = mode == 1 ? PBD_STRAIN_EDGES : PBD_STRAIN_TRIANGLES;
        sd.min_stretch = 0.95f;
        sd.max_stretch = 1.05f;
        if (mode >= 0) CHECK_OK(pbd_add_strain_limit(w, &sd, NULL));
        for (int s = 0; s < 60; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w);
        const int first = pbdt_parts(w, obj).particles.first;
        double worst_tri = 0, worst_edge = 0;
        for (int t = 0; t < m.triangle_count; ++t) {
            float p[9], r[9];
            for (int i = 0; i < 3; ++i)
                for (int k = 0; k < 3; ++k) {
                    p[3 * i + k] = x[4 * (first + m.triangles[3 * t + i]) + k];
                    r[3 * i + k] = m.positions[3 * m.triangles[3 * t + i] + k];
                }
            double s1, s2;
            principal_stretches(p, r, &s1, &s2);
            if (s1 - 1.05 > worst_tri) worst_tri = s1 - 1.05;
        }
        worst_edge = max_edge_stretch(w, &m, first) - 0.05;
        printf("    soft cloth, %s: principal stretch %+.4f, edge stretch %+.4f over the limit 1.05\n",
               mode < 0 ? "no limit"
               : mode   ? "edge limit"
                        : "triangle limit",
               worst_tri, worst_edge);
        if (mode == -1)
            CHECK_MSG(worst_tri > 0.05, "unlimited soft cloth: principal stretch only %g over 1.05", worst_tri);
        if (mode == 0) CHECK_MSG(worst_tri < 0.01, "triangle limit: principal stretch %g over 1.05", worst_tri);
        if (mode == 1) CHECK_MSG(worst_edge < 0.01, "edge limit: edge stretch %g over 1.05", worst_edge);
        pbd_mesh_free(&m);
        pbd_world_destroy(w);
    }
}

TEST(strain_bad_input) {
    pbd_object obj;
    pbd_mesh m;
    pbd_world *w = hanging_cloth(4, 2, 0.0f, &obj, &m);
    size_t size = pbd_world_snapshot_size(w);
    unsigned char *before = (unsigned char *)malloc(size), *after = (unsigned char *)malloc(size);
    CHECK_OK(pbd_world_save(w, before, size));
    int anchors[2] = {0, 1}, bad_anchor[1] = {99}, parts[2] = {5, 5};
    pbd_lra_desc ld = pbd_lra_desc_default();
    CHECK_RESULT(pbd_add_long_range_attachments(NULL, &ld, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_add_long_range_attachments(w, NULL, NULL), PBD_ERROR_NULL_POINTER);
    ld.object = obj;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_NULL_POINTER); /* no anchors */
    ld.anchors = bad_anchor;
    ld.anchor_count = 1;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
    ld.anchors = anchors;
    ld.anchor_count = 0;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INVALID_ARGUMENT);
    ld.anchor_count = 2;
    pbd_object forged = {12345u}, none = {0};
    ld.object = forged;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INVALID_HANDLE);
    ld.object = none; /* no particles, no object */
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_NULL_POINTER);
    ld.particles = parts;
    ld.count = 2; /* listed twice */
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INVALID_ARGUMENT);
    ld.count = 1;
    ld.slack = NAN;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_NOT_FINITE);
    ld.slack = -0.1f;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INVALID_ARGUMENT);
    ld.slack = 0;
    ld.anchors_per_particle = 17;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INVALID_ARGUMENT);
    ld.anchors_per_particle = 1;
    ld.geodesic = 1; /* geodesic without a mesh */
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_NULL_POINTER);
    int bad_tri[3] = {0, 1, 99};
    ld.triangles = bad_tri;
    ld.triangle_count = 1;
    CHECK_RESULT(pbd_add_long_range_attachments(w, &ld, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
    pbd_lra first_lra = {1u}; /* the first set's slot: the world has no set */
    CHECK_RESULT(pbd_lra_set_enabled(w, first_lra, 1), PBD_ERROR_INVALID_HANDLE);
    CHECK_RESULT(pbd_lra_tethers(w, first_lra, NULL, NULL, NULL, 0, NULL), PBD_ERROR_INVALID_HANDLE);

    pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_NULL_POINTER); /* no triangles */
    sd.triangles = m.triangles;
    sd.triangle_count = m.triangle_count;
    sd.object = obj;
    sd.max_stretch = 0.9f;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    sd.max_stretch = INFINITY;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_NOT_FINITE);
    sd.max_stretch = 1.1f;
    sd.min_stretch = -0.1f;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    sd.min_stretch = 0.9f;
    sd.stiffness = 0;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    sd.stiffness = 1;
    sd.mode = (pbd_strain_mode)5;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    sd.mode = PBD_STRAIN_TRIANGLES;
    sd.triangle_count = 0;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    int degenerate[3] = {0, 1, 2}; /* three points of the pinned top row: collinear */
    sd.triangles = degenerate;
    sd.triangle_count = 1;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_DEGENERATE);
    sd.triangles = bad_tri;
    CHECK_RESULT(pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
    pbd_strain_limit first_limit = {1u}, no_limit = {0}; /* the world has no limit */
    CHECK_RESULT(pbd_strain_limit_set_range(w, first_limit, 0.9f, 1.1f), PBD_ERROR_INVALID_HANDLE);
    CHECK_RESULT(pbd_strain_limit_set_enabled(w, no_limit, 1), PBD_ERROR_INVALID_HANDLE);
    CHECK_OK(pbd_world_save(w, after, size));
    CHECK(pbd_world_snapshot_size(w) == size && memcmp(before, after, size) == 0);
    free(before);
    free(after);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* LRA and both limit modes: 1 thread == 2 threads, and a restored
   snapshot steps on bit-identically. */
static pbd_world *limited_cloth(int threads, pbd_mesh *m, pbd_object *obj) {
    pbd_world *w = hanging_cloth(14, 2, 1e-4f, obj, m);
    CHECK_OK(pbd_world_set_threads(w, threads));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 2, 2)); /* few barriers: a loaded machine makes each slow */
    add_top_lra(w, obj, 14, 0);
    pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
    sd.object = *obj;
    sd.triangles = m->triangles;
    sd.triangle_count = m->triangle_count;
    CHECK_OK(pbd_add_strain_limit(w, &sd, NULL));
    sd.mode = PBD_STRAIN_EDGES;
    CHECK_OK(pbd_add_strain_limit(w, &sd, NULL));
    float c[3] = {0.1f, 0.3f, 0.2f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.25f, 0.5f, NULL));
    return w;
}

TEST(strain_threads_and_snapshot_bit_identical) {
    pbdt_part(PBDT_THREADS, "2 threads == 1"); /* the snapshot part runs in every build */
    pbd_mesh m1, m2;
    pbd_object o1, o2;
    pbd_world *a = limited_cloth(1, &m1, &o1), *b = limited_cloth(2, &m2, &o2);
    for (int s = 0; s < 12; ++s) {
        CHECK_OK(pbd_world_step(a, 1.0f / 60.0f));
        CHECK_OK(pbd_world_step(b, 1.0f / 60.0f));
    }
    int n = pbd_world_particle_count(a);
    CHECK(memcmp(pbd_world_positions(a), pbd_world_positions(b), sizeof(float) * 4 * (size_t)n) == 0);
    size_t size = pbd_world_snapshot_size(a);
    void *buf = malloc(size);
    CHECK_OK(pbd_world_save(a, buf, size));
    CHECK_OK(pbd_world_restore(b, buf, size));
    for (int s = 0; s < 5; ++s) {
        CHECK_OK(pbd_world_step(a, 1.0f / 60.0f));
        CHECK_OK(pbd_world_step(b, 1.0f / 60.0f));
    }
    CHECK(memcmp(pbd_world_positions(a), pbd_world_positions(b), sizeof(float) * 4 * (size_t)n) == 0);
    free(buf);
    pbd_mesh_free(&m1);
    pbd_mesh_free(&m2);
    pbd_world_destroy(a);
    pbd_world_destroy(b);
}

void suite_strain(void) {
    RUN(strain_lra_keeps_hanging_cloth_inextensible);
    RUN(strain_lra_tether_is_unilateral_and_follows_its_anchor);
    RUN(strain_lra_geodesic_rest_lengths_equal_shortest_paths);
    RUN(strain_limit_triangle_clamps_principal_stretches);
    RUN(strain_limit_keeps_soft_cloth_within_limits);
    RUN(strain_bad_input);
    RUN(strain_threads_and_snapshot_bit_identical);
}
