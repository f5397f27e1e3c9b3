/* tests/test_sm.c - pbd_sm.h sections "rotation" and "summation": the
   rotation extraction against known polar decompositions (any rotation,
   180 degree turns, flat, collinear and degenerate matrices), and naive
   region sums against a direct loop. And what all of pbd_sm.h's world
   things share (its manual, HANDLES AND NAMES, MEMORY): handles (stale,
   of another kind, of another world), the particles they use (pbd.h
   refuses to remove them), and memory through the world's allocator. */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include <stdlib.h>

/* A = R0 S with S diagonal positive (full rank), flat (one zero) or
   collinear (two zeros): from a cold start the extracted R reproduces A
   as R S for full rank; for the degenerate cases R stays a rotation (no
   NaN) that maps the constrained directions right. */
TEST(sm_rotation_extraction_polar) {
    unsigned st = 7;
    double worst_full = 0, worst_flat = 0;
    for (int t = 0; t < 4000; ++t) {
        double q0[4], n = 0;
        for (int k = 0; k < 4; ++k) {
            q0[k] = pbdt_rand(&st) - 0.5;
            n += q0[k] * q0[k];
        }
        n = sqrt(n);
        for (int k = 0; k < 4; ++k) q0[k] /= n;
        if (t % 10 == 0) {
            q0[0] = 0;
            q0[1] = 0;
            q0[2] = 1;
            q0[3] = 0;
        } /* exact half turn about z */
        if (t % 10 == 1) {
            q0[0] = 0.6;
            q0[1] = 0.8;
            q0[2] = 0;
            q0[3] = 0;
        } /* half turn, oblique axis */
        double R0[9], A[9], e[3] = {0.5 + pbdt_rand(&st), 0.5 + pbdt_rand(&st), 0.5 + pbdt_rand(&st)};
        int mode = (t / 2) % 3; /* 0 full rank, 1 flat, 2 collinear */
        if (mode >= 1) e[2] = 0;
        if (mode == 2) e[1] = 0;
        pbdt_quat_to_mat(q0, R0);
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) A[3 * i + j] = R0[3 * i + j] * e[j];
        double q[4] = {0, 0, 0, 1};
        pbd_sm_extract_rotation_d(A, q, 100);
        double R[9];
        pbdt_quat_to_mat(q, R);
        for (int k = 0; k < 4; ++k) CHECK(q[k] == q[k]);
        /* columns with e_j > 0 must match */
        for (int j = 0; j < 3; ++j) {
            if (e[j] == 0) continue;
            for (int i = 0; i < 3; ++i) {
                double d = fabs(R[3 * i + j] - R0[3 * i + j]);
                if (mode == 0 && d > worst_full) worst_full = d;
                if (mode == 1 && d > worst_flat) worst_flat = d;
            }
        }
    }
    CHECK_MSG(worst_full < 1e-9, "full rank: worst entry error %g", worst_full);
    CHECK_MSG(worst_flat < 1e-9, "flat: worst entry error %g", worst_flat);
}

/* Warm starts: following a rotating frame step by step, a few iterations
   suffice; zero, NaN and huge matrices keep the warm start. */
TEST(sm_rotation_extraction_warm_and_degenerate) {
    float q[4] = {0, 0, 0, 1};
    for (int s = 1; s <= 100; ++s) {
        double ang = 0.05 * s, c = cos(ang), sn = sin(ang);
        float A[9] = {(float)(2 * c), (float)-sn, 0, (float)(2 * sn), (float)c, 0, 0, 0, 0.5f};
        pbd_sm_extract_rotation(A, q, 8);
        double hs = sin(ang / 2), hc = cos(ang / 2), sgn = q[2] * hs + q[3] * hc < 0 ? -1 : 1; /* q ~ -q */
        CHECK_NEAR(q[2], sgn * hs, 1e-6);
        CHECK_NEAR(q[3], sgn * hc, 1e-6);
    }
    float keep[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    float zero[9] = {0}, nan9[9] = {0, 0, 0, 0, NAN, 0, 0, 0, 0};
    pbd_sm_extract_rotation(zero, keep, 20);
    CHECK(keep[0] == 0.5f && keep[3] == 0.5f);
    pbd_sm_extract_rotation(nan9, keep, 20);
    CHECK(keep[0] == 0.5f && keep[3] == 0.5f);
    float bad[4] = {0, 0, 0, 0}, I9[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    pbd_sm_extract_rotation(I9, bad, 20); /* a zero warm start becomes identity */
    CHECK(bad[3] == 1.0f && bad[0] == 0.0f);
}

/* Naive and lattice plans against a direct loop over their own member
   lists, and the lattice membership against its definition. */
TEST(sm_plan_naive_and_lattice_membership) {
    enum { N = 300, K = 5 };
    int cells[3 * N];
    unsigned st = 3;
    int n = 0;
    for (int x = 0; x < 10 && n < N; ++x)
        for (int y = 0; y < 10 && n < N; ++y)
            for (int z = 0; z < 10 && n < N; ++z)
                if (pbdt_rand(&st) < 0.35f) {
                    cells[3 * n] = x;
                    cells[3 * n + 1] = y;
                    cells[3 * n + 2] = z;
                    n++;
                }
    pbd_sm_sum_plan *lat = NULL;
    CHECK_OK(pbd_sm_plan_lattice(n, cells, 2, &lat));
    if (!lat) return;
    CHECK(pbd_sm_plan_region_count(lat) == n && pbd_sm_plan_particle_count(lat) == n);
    CHECK(pbd_sm_plan_method(lat) == PBD_SM_SUM_LATTICE);
    double *vals = (double *)malloc(sizeof(double) * n * K), *sums = (double *)malloc(sizeof(double) * n * K);
    for (int i = 0; i < n * K; ++i) vals[i] = pbdt_rand(&st) - 0.3;
    CHECK_OK(pbd_sm_plan_sum(lat, vals, K, sums));
    int members[N], cnt;
    for (int r = 0; r < n; ++r) {
        CHECK_OK(pbd_sm_plan_region(lat, r, members, N, &cnt));
        int want = 0;
        for (int j = 0; j < n; ++j) {
            int in = abs(cells[3 * j] - cells[3 * r]) <= 2 && abs(cells[3 * j + 1] - cells[3 * r + 1]) <= 2 &&
                     abs(cells[3 * j + 2] - cells[3 * r + 2]) <= 2;
            want += in;
        }
        CHECK(cnt == want);
        for (int j = 0; j < K; ++j) {
            double s = 0;
            for (int e = 0; e < cnt; ++e) s += vals[members[e] * K + j];
            CHECK_NEAR(sums[r * K + j], s, 1e-9);
        }
    }
    pbd_sm_plan_destroy(lat);
    /* a naive plan from explicit lists */
    int start[3] = {0, 2, 5}, list[5] = {0, 4, 1, 2, 3};
    pbd_sm_sum_plan *nv = NULL;
    CHECK_OK(pbd_sm_plan_naive(5, 2, start, list, &nv));
    double v5[5] = {1, 2, 4, 8, 16}, s2[2];
    CHECK_OK(pbd_sm_plan_sum(nv, v5, 1, s2));
    CHECK(s2[0] == 17 && s2[1] == 14);
    pbd_sm_plan_destroy(nv);
    free(vals);
    free(sums);
}

TEST(sm_plan_bad_input) {
    int start[3] = {0, 2, 4}, list[4] = {0, 1, 1, 5};
    pbd_sm_sum_plan *p = NULL;
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, start, list, &p), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "region_particles[3] = 5 is not a particle (0..4)");
    int dup[4] = {0, 0, 1, 2};
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, start, dup, &p), PBD_ERROR_INVALID_ARGUMENT, "region 0 lists particle 0 twice");
    int back[3] = {0, 3, 2};
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, back, list, &p), PBD_ERROR_INVALID_ARGUMENT,
                "region_start decreases: region_start[2] = 2 after region_start[1] = 3");
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, NULL, list, &p), PBD_ERROR_NULL_POINTER, "start is NULL");
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, start, list, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK(p == NULL);
    int cells[6] = {0, 0, 0, 0, 0, 0}; /* two particles in one cell */
    CHECK_ERROR(pbd_sm_plan_lattice(2, cells, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                "particles 0 and 1 are in one lattice cell");
    cells[5] = 1;
    CHECK_ERROR(pbd_sm_plan_lattice(2, cells, 0, &p), PBD_ERROR_INVALID_ARGUMENT, "w 0 must be in 1..64");
    CHECK_OK(pbd_sm_plan_lattice(2, cells, 1, &p));
    double v[2] = {1, 2}, s[2];
    CHECK_ERROR(pbd_sm_plan_sum(p, v, 0, s), PBD_ERROR_INVALID_ARGUMENT, "k 0");
    CHECK_ERROR(pbd_sm_plan_sum(p, NULL, 1, s), PBD_ERROR_NULL_POINTER, "values is NULL");
    int m[2], c;
    CHECK_ERROR(pbd_sm_plan_region(p, 2, m, 2, &c), PBD_ERROR_INDEX_OUT_OF_RANGE, "region 2 outside 0..1");
    pbd_sm_plan_destroy(p);
    pbd_sm_plan_destroy(NULL);
}

/* Error messages are part of the interface: every kind of bad input to
   pbd_sm.h, on a plan, a mesh helper or a world thing, gets its result and
   a message in words that names the public parameter or desc field, says
   what is wrong with it and keeps the offending values - never the C of
   the check or an internal name (these read "pbd_sm__check_params:
   rejected because !pbd_sm__finite(beta) (beta nan)" once). */
TEST(sm_messages_read_as_words) {
    pbd_sm_sum_plan *p = NULL;
    /* summation plans and the helpers without a world */
    int two[6] = {0, 0, 0, 1, 0, 0}, far[3] = {0, 2000000, 0};
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_lattice(2, two, 65, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "region half-width w 65 must be in 1..64");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_lattice(1, far, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "cells[1] = 2000000 is outside [-1000000, 1000000]");
    int deep[8] = {0, 0, 0, 17, 1, 0, 0, 0}, big[4] = {70000, 0, 0, 4}, same[8] = {3, 4, 5, 1, 3, 4, 5, 1};
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_octree(2, deep, NULL, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "particle 0 has level 17, outside 0..16");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_octree(1, big, NULL, 1, &p), PBD_ERROR_OVERFLOW,
                         "particle 0's cell spans finest cells 1120000..1120015, outside [-1000000, 1000000]");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_octree(2, same, NULL, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "particles 0 and 1 are in one octree cell (level 1 at 3, 4, 5)");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_lattice_box(0, 2, 2, two), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_sm_lattice_box: nx 0 must be >= 1");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_lattice_box(2, 2, -1, two), PBD_ERROR_INVALID_ARGUMENT, "nz -1 must be >= 1");
    float quad[12] = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0};
    int bad_tri[6] = {0, 1, 2, 0, 2, 7}, rep_tri[3] = {0, 1, 1};
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_paths(4, quad, 2, bad_tri, 1, 0, &p), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "pbd_sm_plan_paths: triangle 1 names vertex 7, outside 0..3");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_paths(4, quad, 1, rep_tri, 1, 0, &p), PBD_ERROR_DEGENERATE,
                         "triangle 0 repeats vertex 1");
    int st[5];
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_mesh_rings(4, bad_tri, 1, 5, 1, st, NULL, 0, st), PBD_ERROR_INVALID_ARGUMENT,
                         "arity 5 outside 2..4");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_mesh_rings(4, bad_tri, 2, 3, 1, st, NULL, 0, st), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "element 1 names vertex 7, outside 0..3");
    float org[3];
    int count;
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_voxelize(quad, 4, bad_tri, 1, 0.0f, org, NULL, 0, &count),
                         PBD_ERROR_INVALID_ARGUMENT, "spacing 0 must be > 0");
    /* one count at fault is named alone, with its value (the messages
       listed every count, or blamed a valid one) */
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_voxelize(quad, 4, bad_tri, 1, 0.1f, org, NULL, -1, &count),
                         PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_voxelize: max_cells -1 must be >= 0");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_paths(4, quad, 1, bad_tri, 1, -2, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_sm_plan_paths: max_path_length -2 must be >= 0");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_lattice(1570, two, 65, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_sm_plan_lattice: region half-width w 65 must be in 1..64");
    int list[2] = {0, 1}, start[2] = {0, 2};
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_naive(2, -1, start, list, &p), PBD_ERROR_INVALID_ARGUMENT,
                         "region_count -1 must be >= 0");
    CHECK_OK(pbd_sm_plan_naive(2, 1, start, list, &p));
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_path(p, 0, list, 2, &count), PBD_ERROR_INVALID_ARGUMENT,
                         "the plan is not a paths plan");
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_sum(p, NULL, 65, NULL), PBD_ERROR_NULL_POINTER, "sums is NULL");
    double v2[2] = {1, 2}, s1[1];
    CHECK_ERROR_IN_WORDS(NULL, pbd_sm_plan_sum(p, v2, 65, s1), PBD_ERROR_INVALID_ARGUMENT, "k 65 outside 1..64");
    pbd_sm_plan_destroy(p);

    /* the world things: bodies, oriented particles, surface volumes, cloths */
    pbd_world *w = pbdt_world(0.0f);
    float pos[3 * 6] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = 6;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    int ps[3] = {0, 1, 99};
    pbd_sm_body_desc bd = pbd_sm_body_desc_default();
    pbd_sm_body body = {0};
    bd.particles = ps;
    bd.particle_count = 3;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_body(w, &bd, &body), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "particles[2] = 99 is not a particle of the world (0..5)");
    ps[2] = 2;
    bd.beta = 1.5f;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_body(w, &bd, &body), PBD_ERROR_INVALID_ARGUMENT, "beta 1.5 outside [0, 1]");
    bd.beta = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_body(w, &bd, &body), PBD_ERROR_NOT_FINITE, "beta is not finite");
    bd.beta = 0.5f;
    bd.max_plastic = 0.0f;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_body(w, &bd, &body), PBD_ERROR_INVALID_ARGUMENT, "max_plastic 0 must be > 0");
    bd.max_plastic = 1.0f;
    bd.rotation_iterations = 0;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_body(w, &bd, &body), PBD_ERROR_INVALID_ARGUMENT,
                         "rotation_iterations 0 outside 1..100");
    bd.rotation_iterations = 8;
    float distant[9] = {0, 0, 0, 1, 0, 0, 0, 1e7f, 0}; /* rest positions are bounded as pbd.h's builders' */
    bd.rest_positions = distant;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_body(w, &bd, &body), PBD_ERROR_INVALID_ARGUMENT,
                         "the rest position of local particle 2 (world particle 2) is 1e+07 m on axis 1, beyond "
                         "PBD_MAX_COORDINATE = 1e+06 m");
    bd.rest_positions = NULL;
    CHECK_OK(pbd_sm_add_body(w, &bd, &body));
    CHECK_ERROR_IN_WORDS(w, pbd_sm_body_set_stiffness(w, body, -0.5f), PBD_ERROR_INVALID_ARGUMENT,
                         "stiffness -0.5 outside [0, 1]");
    float q[4];
    CHECK_ERROR_IN_WORDS(w, pbd_sm_body_rotation(w, body, 3, q), PBD_ERROR_INDEX_OUT_OF_RANGE, "region 3 outside 0..0");
    CHECK_OK(pbd_sm_remove_body(w, body));
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    pbd_sm_oriented set = {0};
    od.particles = r;
    od.stiffness = 2.0f;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_oriented(w, &od, &set), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_sm_add_oriented: stiffness 2 outside [0, 1]");
    od.stiffness = 1.0f;
    int self_edge[2] = {3, 3};
    od.edges = self_edge;
    od.edge_count = 1;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_oriented(w, &od, &set), PBD_ERROR_DEGENERATE,
                         "edge 0 joins particle 3 to itself");
    int vt[3] = {0, 1, 9};
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    pbd_sm_volume vol = {0};
    vd.triangles = vt;
    vd.triangle_count = 1;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_surface_volume(w, &vd, &vol), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "triangle 0 names particle 9, not a particle of the world (0..5)");
    vt[2] = 2;
    vd.alpha = 2.0f;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_surface_volume(w, &vd, &vol), PBD_ERROR_INVALID_ARGUMENT,
                         "alpha 2 outside [0, 1]");
    pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
    pbd_sm_cloth cloth = {0};
    cd.positions = quad;
    cd.vertex_count = 4;
    cd.triangles = rep_tri;
    cd.triangle_count = 1;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_cloth(w, &cd, &cloth, NULL), PBD_ERROR_DEGENERATE,
                         "pbd_sm_add_cloth: triangle 0 repeats vertex 1");
    cd.triangles = bad_tri;
    cd.triangle_count = 2;
    CHECK_ERROR_IN_WORDS(w, pbd_sm_add_cloth(w, &cd, &cloth, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE,
                         "triangle 1 names vertex 7, outside 0..3");
    CHECK(pbd_world_plugin_count(w) == 0);
    pbd_world_destroy(w);
}

/* ---- the things a world owns ------------------------------------------------ */

extern long pbdt_sm_mallocs; /* PBD_SM_MALLOC calls (tests/impl_sm.c) */

/* One of each of pbd_sm.h's world things, over particles of their own: a
   lattice body (its particles), an oriented chain (over `chain`), a
   surface volume (over the cloth sphere `skin`) and a multi-resolution
   cloth (its particles). */
typedef struct sm_things {
    pbd_sm_body body;
    pbd_range lattice;
    pbd_sm_oriented oriented;
    pbd_range chain;
    pbd_sm_volume volume;
    pbd_object skin;
    pbd_sm_cloth cloth;
    pbd_range cloth_particles;
} sm_things;

/* The particles and pbd.h objects the things use (chain, skin). */
static void sm_things_base(pbd_world *w, sm_things *t) {
    float pos[3 * 6];
    for (int i = 0; i < 6; ++i) {
        pos[3 * i] = 2.0f + 0.1f * (float)i;
        pos[3 * i + 1] = 1.0f;
        pos[3 * i + 2] = 0.0f;
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = 6;
    CHECK_OK(pbd_add_particles(w, &pd, &t->chain));
    CHECK_OK(pbd_particle_pin(w, t->chain.first));
    pbd_mesh m;
    float c[3] = {-2.0f, 1.0f, 0.0f};
    CHECK_OK(pbd_mesh_sphere(1, c, 0.3f, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    CHECK_OK(pbd_add_cloth(w, &cd, &t->skin));
    pbd_mesh_free(&m);
}
static void sm_add_lattice(pbd_world *w, sm_things *t) {
    int cells[3 * 3 * 3 * 3];
    CHECK_OK(pbd_sm_lattice_box(3, 3, 3, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 27;
    ld.origin[1] = 0.5f;
    ld.body.mode = PBD_SM_LINEAR;
    ld.body.creep = 1.0f; /* plastic states too */
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &t->body, &t->lattice));
}
static void sm_add_oriented(pbd_world *w, sm_things *t) {
    int edges[2 * 5];
    for (int i = 0; i < 5; ++i) edges[2 * i] = i, edges[2 * i + 1] = i + 1;
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = t->chain;
    od.edges = edges;
    od.edge_count = 5;
    CHECK_OK(pbd_sm_add_oriented(w, &od, &t->oriented));
}
static void sm_add_volume(pbd_world *w, sm_things *t) {
    pbd_mesh m;
    float c[3] = {-2.0f, 1.0f, 0.0f};
    CHECK_OK(pbd_mesh_sphere(1, c, 0.3f, &m));
    int first = pbdt_parts(w, t->skin).particles.first;
    for (int i = 0; i < 3 * m.triangle_count; ++i) m.triangles[i] += first;
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    vd.alpha = 0.5f; /* the local weights too: opposing pairs, smoothing */
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &t->volume));
    pbd_mesh_free(&m);
}
static void sm_add_cloth(pbd_world *w, sm_things *t) {
    pbd_mesh m;
    float o[3] = {-0.5f, 2.0f, 1.0f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(8, 8, o, u, v, &m));
    pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
    cd.positions = m.positions;
    cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    cd.levels = 3;
    CHECK_OK(pbd_sm_add_cloth(w, &cd, &t->cloth, &t->cloth_particles));
    pbd_mesh_free(&m);
}
static void sm_steps(pbd_world *w, int n) {
    for (int s = 0; s < n; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
}

typedef struct sm_count {
    long live, calls;
} sm_count;
static void *sm_count_alloc(void *user, size_t size) {
    sm_count *c = (sm_count *)user;
    c->live++;
    c->calls++;
    return malloc(size);
}
static void sm_count_free(void *user, void *p) {
    if (p) ((sm_count *)user)->live--;
    free(p);
}

/* pbd_world_desc.allocator holds everything pbd_sm.h makes for a world:
   adding each thing raises the allocator's live blocks, removing it (and
   the particles a lattice or cloth added) brings them back exactly to
   where they were (the second round: the first sized pbd.h's own tables),
   destroying the world frees every block, and pbd_sm.h never called
   PBD_SM_MALLOC meanwhile (a lattice's plan included). */
TEST(sm_world_things_use_the_world_allocator) {
    sm_count C = {0, 0};
    pbd_world_desc d = pbd_world_desc_default();
    d.allocator.alloc = sm_count_alloc;
    d.allocator.free = sm_count_free;
    d.allocator.user = &C;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    if (!w) return;
    sm_things t;
    memset(&t, 0, sizeof t);
    sm_things_base(w, &t);
    long sm0 = pbdt_sm_mallocs;
    static const char *const kinds[4] = {"lattice body", "oriented set", "surface volume", "multires cloth"};
    long blocks[4] = {0, 0, 0, 0};
    for (int round = 0; round < 2; ++round)
        for (int k = 0; k < 4; ++k) {
            long before = C.live, calls = C.calls;
            pbd_range added = {0, 0};
            if (k == 0) sm_add_lattice(w, &t), added = t.lattice;
            if (k == 1) sm_add_oriented(w, &t);
            if (k == 2) sm_add_volume(w, &t);
            if (k == 3) sm_add_cloth(w, &t), added = t.cloth_particles;
            blocks[k] = C.live - before;
            CHECK_MSG(C.live > before && C.calls > calls, "%s: the allocator holds nothing of it", kinds[k]);
            sm_steps(w, 3);
            if (k == 0) CHECK_OK(pbd_sm_remove_body(w, t.body));
            if (k == 1) CHECK_OK(pbd_sm_remove_oriented(w, t.oriented));
            if (k == 2) CHECK_OK(pbd_sm_remove_surface_volume(w, t.volume));
            if (k == 3) CHECK_OK(pbd_sm_remove_cloth(w, t.cloth));
            if (added.count) CHECK_OK(pbd_remove_particles(w, added));
            if (round == 1)
                CHECK_MSG(C.live == before, "%s: %ld blocks live after its removal, %ld before", kinds[k], C.live,
                          before);
        }
    printf("    live blocks added: lattice body %ld, oriented set %ld, surface volume %ld, multires cloth %ld\n",
           blocks[0], blocks[1], blocks[2], blocks[3]);
    /* all four at once, stepped, then the world destroyed with them */
    sm_add_lattice(w, &t);
    sm_add_oriented(w, &t);
    sm_add_volume(w, &t);
    sm_add_cloth(w, &t);
    CHECK(pbd_world_plugin_count(w) == 4);
    sm_steps(w, 5);
    pbd_world_destroy(w);
    CHECK_MSG(C.live == 0, "%ld blocks live after pbd_world_destroy", C.live);
    CHECK_MSG(pbdt_sm_mallocs == sm0, "%ld PBD_SM_MALLOC calls for a world's things", pbdt_sm_mallocs - sm0);
    /* what has no world still uses PBD_SM_MALLOC */
    pbd_sm_sum_plan *plan = NULL;
    int start[2] = {0, 2}, list[2] = {0, 1};
    CHECK_OK(pbd_sm_plan_naive(2, 1, start, list, &plan));
    CHECK(pbdt_sm_mallocs > sm0);
    pbd_sm_plan_destroy(plan);
}

/* Every call on a thing checks its handle: id 0, a removed thing's handle
   (stale; also once a new thing took its plugin's slot), a handle of
   another kind or of a plugin that is not pbd_sm.h's, and a handle of
   another world all fail with PBD_ERROR_INVALID_HANDLE, the message
   naming the kind, and change nothing. */
TEST(sm_handles_stale_other_kind_other_world) {
    pbd_world *w = pbdt_world(-9.81f);
    sm_things t;
    memset(&t, 0, sizeof t);
    sm_things_base(w, &t);
    sm_add_lattice(w, &t);
    sm_add_oriented(w, &t);
    sm_add_volume(w, &t);
    sm_add_cloth(w, &t);
    sm_steps(w, 2);
    float q[4];
    double v = 0;
    int n = 0;
    pbd_range r;
    /* of another kind: the ids are plugin ids, so any kind's handle can
       carry another's id */
    pbd_sm_body as_body = {t.oriented.id};
    pbd_sm_oriented as_oriented = {t.volume.id};
    pbd_sm_volume as_volume = {t.cloth.id};
    pbd_sm_cloth as_cloth = {t.body.id};
    CHECK_WORLD_ERROR(w, pbd_sm_body_rotation(w, as_body, 0, q), PBD_ERROR_INVALID_HANDLE,
                      "names an oriented particle set, not a shape-matching body");
    CHECK_WORLD_ERROR(w, pbd_sm_oriented_get_state(w, as_oriented, 0, q, NULL), PBD_ERROR_INVALID_HANDLE,
                      "names a surface volume, not an oriented particle set");
    CHECK_WORLD_ERROR(w, pbd_sm_volume_measure(w, as_volume, &v), PBD_ERROR_INVALID_HANDLE,
                      "names a multi-resolution cloth, not a surface volume");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_level_count(w, as_cloth, &n), PBD_ERROR_INVALID_HANDLE,
                      "names a shape-matching body, not a multi-resolution cloth");
    CHECK_WORLD_ERROR(w, pbd_sm_remove_body(w, as_body), PBD_ERROR_INVALID_HANDLE, "not a shape-matching body");
    CHECK(pbd_world_plugin_count(w) == 4);
    /* a plugin that is not pbd_sm.h's */
    int mine = 42;
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.user = &mine;
    pbd_plugin other_plugin;
    CHECK_OK(pbd_add_plugin(w, &pd, &other_plugin));
    pbd_sm_cloth foreign = {other_plugin.id};
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_particles(w, foreign, &r), PBD_ERROR_INVALID_HANDLE,
                      "names a plugin that is not pbd_sm.h's, not a multi-resolution cloth");
    pd.user = NULL;
    CHECK_OK(pbd_add_plugin(w, &pd, &other_plugin));
    foreign.id = other_plugin.id;
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_particles(w, foreign, &r), PBD_ERROR_INVALID_HANDLE, "multi-resolution cloth");
    /* of another world: there the id names nothing */
    pbd_world *w2 = pbdt_world(-9.81f);
    CHECK_WORLD_ERROR(w2, pbd_sm_body_rotation(w2, t.body, 0, q), PBD_ERROR_INVALID_HANDLE,
                      "shape-matching body handle");
    CHECK_WORLD_ERROR(w2, pbd_sm_remove_cloth(w2, t.cloth), PBD_ERROR_INVALID_HANDLE, "multi-resolution cloth handle");
    pbd_world_destroy(w2);
    /* stale: removed, each kind's message names it */
    CHECK_OK(pbd_sm_remove_body(w, t.body));
    CHECK_OK(pbd_sm_remove_oriented(w, t.oriented));
    CHECK_OK(pbd_sm_remove_surface_volume(w, t.volume));
    CHECK_OK(pbd_sm_remove_cloth(w, t.cloth));
    CHECK(pbd_world_plugin_count(w) == 2);
    CHECK_WORLD_ERROR(w, pbd_sm_body_set_stiffness(w, t.body, 0.5f), PBD_ERROR_INVALID_HANDLE,
                      "shape-matching body handle");
    CHECK_WORLD_ERROR(w, pbd_sm_oriented_particles(w, t.oriented, &r), PBD_ERROR_INVALID_HANDLE,
                      "oriented particle set handle");
    CHECK_WORLD_ERROR(w, pbd_sm_volume_get_rest(w, t.volume, &v), PBD_ERROR_INVALID_HANDLE, "surface volume handle");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_damping(w, t.cloth, 0.1f), PBD_ERROR_INVALID_HANDLE,
                      "multi-resolution cloth handle");
    CHECK_WORLD_ERROR(w, pbd_sm_remove_surface_volume(w, t.volume), PBD_ERROR_INVALID_HANDLE, "is stale");
    CHECK_WORLD_ERROR(w, pbd_sm_remove_oriented(w, t.oriented), PBD_ERROR_INVALID_HANDLE, "is stale");
    /* a new thing in the freed slot is not named by the old handle */
    sm_things u = t;
    sm_add_oriented(w, &u);
    CHECK(u.oriented.id != t.oriented.id);
    CHECK_WORLD_ERROR(w, pbd_sm_oriented_get_state(w, t.oriented, 0, q, NULL), PBD_ERROR_INVALID_HANDLE, "is stale");
    CHECK_OK(pbd_sm_oriented_get_state(w, u.oriented, 0, q, NULL));
    /* id 0 */
    pbd_sm_body none = {0};
    CHECK_WORLD_ERROR(w, pbd_sm_body_reset_plasticity(w, none), PBD_ERROR_INVALID_HANDLE,
                      "the shape-matching body handle is 0");
    sm_steps(w, 2);
    pbd_world_destroy(w);
}

/* pbd.h refuses to remove particles that a thing of pbd_sm.h uses, naming
   it, and removes the others: the things tell which particles they use
   (pbd_plugin_desc.uses_particles), not all below their last one. */
TEST(sm_used_particles_are_not_removed) {
    pbd_world *w = pbdt_world(-9.81f);
    sm_things t;
    memset(&t, 0, sizeof t);
    float spare_pos[3 * 4] = {5, 1, 0, 5.1f, 1, 0, 5.2f, 1, 0, 5.3f, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = spare_pos;
    pd.count = 4;
    pbd_range spare; /* below every thing's particles, used by none */
    CHECK_OK(pbd_add_particles(w, &pd, &spare));
    sm_things_base(w, &t);
    sm_add_lattice(w, &t);
    sm_add_oriented(w, &t);
    sm_add_volume(w, &t);
    sm_add_cloth(w, &t);
    sm_steps(w, 2);
    pbd_range one;
    one.count = 1;
    one.first = t.lattice.first + 13;
    CHECK_WORLD_ERROR(w, pbd_remove_particles(w, one), PBD_ERROR_INVALID_ARGUMENT, "shape-matching body");
    one.first = t.chain.first + 3;
    CHECK_WORLD_ERROR(w, pbd_remove_particles(w, one), PBD_ERROR_INVALID_ARGUMENT, "oriented particle set");
    CHECK_WORLD_ERROR(w, pbd_remove_object(w, t.skin), PBD_ERROR_INVALID_ARGUMENT, "surface volume");
    one.first = t.cloth_particles.first + t.cloth_particles.count - 1;
    CHECK_WORLD_ERROR(w, pbd_remove_particles(w, one), PBD_ERROR_INVALID_ARGUMENT, "multi-resolution cloth");
    CHECK(pbd_world_particle_count(w) == t.cloth_particles.first + t.cloth_particles.count);
    /* what no thing uses goes */
    CHECK_OK(pbd_remove_particles(w, spare));
    /* and what a removed thing used */
    CHECK_OK(pbd_sm_remove_body(w, t.body));
    CHECK_OK(pbd_remove_particles(w, t.lattice));
    CHECK_OK(pbd_sm_remove_oriented(w, t.oriented));
    CHECK_OK(pbd_remove_particles(w, t.chain));
    CHECK_OK(pbd_sm_remove_surface_volume(w, t.volume));
    CHECK_OK(pbd_remove_object(w, t.skin));
    CHECK_OK(pbd_sm_remove_cloth(w, t.cloth));
    CHECK_OK(pbd_remove_particles(w, t.cloth_particles));
    sm_steps(w, 2);
    pbd_world_destroy(w);
}

void suite_sm(void) {
    RUN(sm_rotation_extraction_polar);
    RUN(sm_rotation_extraction_warm_and_degenerate);
    RUN(sm_plan_naive_and_lattice_membership);
    RUN(sm_plan_bad_input);
    RUN(sm_messages_read_as_words);
    RUN(sm_world_things_use_the_world_allocator);
    RUN(sm_handles_stale_other_kind_other_world);
    RUN(sm_used_particles_are_not_removed);
}
