/* tests/test_sc_simd.c - pbd.h section "self-collision": the SIMD twin of
   the closest point on a triangle (pbd__vclosest_on_triangle, private),
   which the projection and its lane tests use to decide which candidates
   may act, gives the same bits as the scalar pbd__closest_on_triangle,
   lane by lane: points in each of the seven regions, on the boundaries
   between them, degenerate (collinear, point) triangles and NaN. To reach
   the private functions this file compiles its own static copy of the
   implementation (tests/private.h). */
#include "private.h"

TEST(selfcollision_simd_closest_point_same_bits) {
#if PBD__W > 1
    unsigned st = 12345u;
    int regions[7] = {0}, lanes = 0, mismatches = 0;
    for (int round = 0; round < 400; ++round) {
        float P[3][PBD__W], A[3][PBD__W], B[3][PBD__W], C[3][PBD__W];
        for (int l = 0; l < PBD__W; ++l) {
            int kind = (round * PBD__W + l) % 8;
            for (int k = 0; k < 3; ++k) {
                A[k][l] = (float)pbdt_rand(&st) - 0.5f;
                B[k][l] = (float)pbdt_rand(&st) - 0.5f;
                C[k][l] = (float)pbdt_rand(&st) - 0.5f;
                P[k][l] = 2.0f * ((float)pbdt_rand(&st) - 0.5f);
            }
            if (kind == 1)
                for (int k = 0; k < 3; ++k) C[k][l] = 0.5f * (A[k][l] + B[k][l]); /* collinear */
            if (kind == 2)
                for (int k = 0; k < 3; ++k) B[k][l] = C[k][l] = A[k][l]; /* a point */
            if (kind == 3)
                for (int k = 0; k < 3; ++k) P[k][l] = A[k][l]; /* on a corner */
            if (kind == 4)
                for (int k = 0; k < 3; ++k) P[k][l] = 0.5f * (B[k][l] + C[k][l]); /* on an edge */
            if (kind == 5) P[1][l] = NAN;
            if (kind == 6)
                for (int k = 0; k < 3; ++k) P[k][l] = (A[k][l] + B[k][l] + C[k][l]) / 3.0f; /* inside */
        }
        pbd__vv p, a, b, c;
        p.x = pbd__vload(P[0]);
        p.y = pbd__vload(P[1]);
        p.z = pbd__vload(P[2]);
        a.x = pbd__vload(A[0]);
        a.y = pbd__vload(A[1]);
        a.z = pbd__vload(A[2]);
        b.x = pbd__vload(B[0]);
        b.y = pbd__vload(B[1]);
        b.z = pbd__vload(B[2]);
        c.x = pbd__vload(C[0]);
        c.y = pbd__vload(C[1]);
        c.z = pbd__vload(C[2]);
        pbd__vv q = pbd__vclosest_on_triangle(p, a, b, c);
        float Q[3][PBD__W];
        pbd__vstore(Q[0], q.x);
        pbd__vstore(Q[1], q.y);
        pbd__vstore(Q[2], q.z);
        for (int l = 0; l < PBD__W; ++l) {
            int f;
            pbd__v3 s =
                pbd__closest_on_triangle(pbd__v(P[0][l], P[1][l], P[2][l]), pbd__v(A[0][l], A[1][l], A[2][l]),
                                         pbd__v(B[0][l], B[1][l], B[2][l]), pbd__v(C[0][l], C[1][l], C[2][l]), &f);
            float S[3] = {s.x, s.y, s.z}, V[3] = {Q[0][l], Q[1][l], Q[2][l]};
            regions[f]++;
            lanes++;
            if (memcmp(S, V, sizeof S) != 0) mismatches++;
        }
    }
    CHECK_MSG(mismatches == 0, "%d of %d lanes differ from the scalar closest point", mismatches, lanes);
    for (int f = 0; f < 7; ++f) CHECK_MSG(regions[f] > 0, "region %d never tested", f);
#else
    SKIP("scalar build: no SIMD twin to compare");
#endif
}

void suite_sc_simd(void) { RUN(selfcollision_simd_closest_point_same_bits); }
