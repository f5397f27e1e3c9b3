/* tests/test_sm.c - pbd_sm.h sections "rotation" and "summation": the
   rotation extraction against known polar decompositions (any rotation,
   180 degree turns, flat, collinear and degenerate matrices), and naive
   region sums against a direct loop. */
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
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, start, list, &p), PBD_ERROR_INDEX_OUT_OF_RANGE, "i 5");
    int dup[4] = {0, 0, 1, 2};
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, start, dup, &p), PBD_ERROR_INVALID_ARGUMENT, "i 0");
    int back[3] = {0, 3, 2};
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, back, list, &p), PBD_ERROR_INVALID_ARGUMENT,
                "start[r + 1] < start[r] (start[r + 1]");
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, NULL, list, &p), PBD_ERROR_NULL_POINTER, "start is NULL");
    CHECK_ERROR(pbd_sm_plan_naive(5, 2, start, list, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK(p == NULL);
    int cells[6] = {0, 0, 0, 0, 0, 0}; /* two particles in one cell */
    CHECK_ERROR(pbd_sm_plan_lattice(2, cells, 1, &p), PBD_ERROR_INVALID_ARGUMENT, "particles 0 and 1 are in one cell");
    cells[5] = 1;
    CHECK_ERROR(pbd_sm_plan_lattice(2, cells, 0, &p), PBD_ERROR_INVALID_ARGUMENT, "particle_count 2");
    CHECK_OK(pbd_sm_plan_lattice(2, cells, 1, &p));
    double v[2] = {1, 2}, s[2];
    CHECK_ERROR(pbd_sm_plan_sum(p, v, 0, s), PBD_ERROR_INVALID_ARGUMENT, "k 0");
    CHECK_ERROR(pbd_sm_plan_sum(p, NULL, 1, s), PBD_ERROR_NULL_POINTER, "values is NULL");
    int m[2], c;
    CHECK_ERROR(pbd_sm_plan_region(p, 2, m, 2, &c), PBD_ERROR_INDEX_OUT_OF_RANGE, "r 2");
    pbd_sm_plan_destroy(p);
    pbd_sm_plan_destroy(NULL);
}

void suite_sm(void) {
    RUN(sm_rotation_extraction_polar);
    RUN(sm_rotation_extraction_warm_and_degenerate);
    RUN(sm_plan_naive_and_lattice_membership);
    RUN(sm_plan_bad_input);
}
