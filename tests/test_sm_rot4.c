/* tests/test_sm_rot4.c - pbd_sm.h section "rotation": the four-region
   SIMD extraction that region-based shape matching runs on warm starts
   (pbd_sm__extract_rotation4, private) gives the same bits as the scalar
   routine, lane by lane, on full-rank, flat, collinear, inverted and bad
   matrices and on unit and non-unit warm starts. To reach the private
   function this file compiles its own static copy of the implementation
   (PBD_STATIC). */
#define _POSIX_C_SOURCE 199309L
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define PBD_STATIC
#define PBD_IMPLEMENTATION
#include "../pbd.h"
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"
#include "test.h"

/* A matrix R diag(e) (+ noise) of a random rotation, kind: 0 full rank,
   1 flat, 2 collinear, 3 inverted, 4 zero, 5 NaN; returns the rotation's
   quaternion. */
static void sr4_matrix(unsigned *st, int kind, double *A, double *q0) {
    double ax[3], n = 0, ang = 3.0 * pbdt_rand(st), R[9];
    for (int a = 0; a < 3; ++a) {
        ax[a] = pbdt_rand(st) - 0.5;
        n += ax[a] * ax[a];
    }
    n = sqrt(n);
    for (int a = 0; a < 3; ++a) q0[a] = ax[a] / n * sin(ang / 2);
    q0[3] = cos(ang / 2);
    pbd_sm__quat_to_mat(q0, R);
    double e[3] = {0.5 + pbdt_rand(st), 0.5 + pbdt_rand(st), 0.5 + pbdt_rand(st)};
    if (kind == 1 || kind == 2) e[2] = 0;
    if (kind == 2) e[1] = 0;
    if (kind == 3) e[0] = -e[0];
    for (int k = 0; k < 9; ++k) A[k] = kind == 4 ? 0 : R[k] * e[k % 3] + 1e-3 * (pbdt_rand(st) - 0.5);
    if (kind == 5) A[4] = NAN;
}

TEST(sm_rotation_simd_four_regions_same_bits) {
#if PBD_SM__SIMD
    unsigned st = 17;
    long lanes = 0, simd_done = 0, differ = 0;
    for (int t = 0; t < 8000; ++t) {
        double A[4][9], q[4][4], qs[4][4];
        const double *Ap[4];
        double *qp[4];
        for (int l = 0; l < 4; ++l) {
            int kind = (t + l) % 23 == 0 ? 4 : (t + l) % 29 == 0 ? 5 : (t / 4 + l) % 4;
            double q0[4], B[9];
            sr4_matrix(&st, kind, A[l], q0);
            /* the warm start: converged on a slightly different matrix (the
               previous projection), sometimes far off or not unit */
            double d = t % 3 == 0 ? 1e-2 : 1e-5;
            for (int k = 0; k < 9; ++k) B[k] = A[l][k] + d * (pbdt_rand(&st) - 0.5);
            for (int k = 0; k < 4; ++k) q[l][k] = q0[k];
            if (kind < 4) pbd_sm__extract_rotation(B, q[l], 100);
            if (t % 11 == 0) q[l][3] *= 1.5;
            if (t % 13 == 0) {
                q[l][0] = 0;
                q[l][1] = 0;
                q[l][2] = 1;
                q[l][3] = 0;
            } /* a half turn off */
            memcpy(qs[l], q[l], sizeof qs[l]);
            Ap[l] = A[l];
            qp[l] = q[l];
        }
        int done = pbd_sm__extract_rotation4(Ap, qp, 8);
        for (int l = 0; l < 4; ++l) {
            lanes++;
            if ((done >> l) & 1) simd_done++;
            else if (!pbd_sm__extract_rotation(A[l], q[l], 8)) pbd_sm__extract_rotation(A[l], q[l], 100);
            if (!pbd_sm__extract_rotation(A[l], qs[l], 8)) pbd_sm__extract_rotation(A[l], qs[l], 100);
            differ += memcmp(q[l], qs[l], sizeof qs[l]) != 0;
        }
    }
    CHECK_MSG(differ == 0, "%ld of %ld lanes differ from the scalar routine", differ, lanes);
    CHECK_MSG(simd_done > lanes / 4 && simd_done < lanes, "%ld of %ld lanes done by SIMD", simd_done, lanes);
#else
    SKIP("scalar build: no SIMD extraction to compare");
#endif
}

void suite_sm_rot4(void) { RUN(sm_rotation_simd_four_regions_same_bits); }
