/* tests/test_sm_rot4.c - pbd_sm.h's private numerics. Section "rotation": the four-region
   SIMD extraction that region-based shape matching runs on warm starts
   (pbd_sm__extract_rotation4, private) gives the same bits as the scalar
   routine, lane by lane, on full-rank, flat, collinear, inverted and bad
   matrices and on unit and non-unit warm starts; and the cube root
   against libm's. To reach the private
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

/* pbd_sm__cbrt (section "sin and cos ... cube roots": + - * / only, so that
   a GPU gives the CPU's bits) keeps within 5 units in the last place of
   libm's cbrt over the whole double range: random magnitudes from 1e-320
   (subnormal) to 1e308 of both signs, the exact cubes, the range's ends;
   and gives back NaN, infinities and signed zeros. */
static double sr4_ulps(double a, double b) {
    long long ia, ib;
    memcpy(&ia, &a, sizeof ia);
    memcpy(&ib, &b, sizeof ib);
    return (double)(ia > ib ? ia - ib : ib - ia);
}
TEST(sm_cbrt_within_five_ulps_of_libm) {
    unsigned st = 7u;
    double worst = 0, wx = 0;
    for (int i = 0; i < 200000; ++i) {
        double x = exp((pbdt_rand(&st) - 0.5) * 1447.0); /* e^-723 (subnormal) to e^723 (1e308) */
        if (i & 1) x = -x;
        double u = sr4_ulps(pbd_sm__cbrt(x), cbrt(x));
        if (u > worst) worst = u, wx = x;
    }
    const double ends[] = {4.9406564584124654e-324,
                           2.2250738585072009e-308,
                           2.2250738585072014e-308,
                           1.7976931348623157e308,
                           0.125,
                           1,
                           8,
                           27,
                           1e-300,
                           1e300};
    for (int k = 0; k < (int)(sizeof ends / sizeof ends[0]); ++k) {
        double u = sr4_ulps(pbd_sm__cbrt(ends[k]), cbrt(ends[k]));
        if (u > worst) worst = u, wx = ends[k];
    }
    for (int c = 1; c <= 1000; ++c)
        CHECK(pbd_sm__cbrt((double)c * c * c) == (double)c || sr4_ulps(pbd_sm__cbrt((double)c * c * c), c) <= 5);
    if (worst > 5) fprintf(stderr, "  cbrt(%.17g): %g units from libm\n", wx, worst);
    CHECK(worst <= 5);
    double z = pbd_sm__cbrt(-0.0);
    CHECK(z == 0 && signbit(z));
    CHECK(pbd_sm__cbrt(0.0) == 0 && !signbit(pbd_sm__cbrt(0.0)));
    CHECK(isnan(pbd_sm__cbrt(NAN)));
    CHECK(pbd_sm__cbrt(INFINITY) == INFINITY && pbd_sm__cbrt(-INFINITY) == -INFINITY);
    CHECK(fabs(pbd_sm__cbrt(-27.0) + 3.0) <= 1e-15);
}

void suite_sm_rot4(void) {
    RUN(sm_rotation_simd_four_regions_same_bits);
    RUN(sm_cbrt_within_five_ulps_of_libm);
}
