/* tests/test_sm_cloth.c - pbd_sm.h section "multires cloth": the
   multi-resolution shape-matching cloth of Bender, Weber and Diziol 2013.
   The hierarchy (decimation, nested and non-nested, transfers), rigid
   invariance, the paper's trends at a reduced size (strain against the
   number of levels, figure 7, and against the time step, table 3; 2D+1D
   below 2D alone), recovery from random and collapsed states (figure 8),
   wrinkle conservation (figures 9-10), bending and damping, determinism
   for both parallel schemes, and bad input. The full-size reproductions
   (20 648 triangles) are in bench/multires.c (`make bench BENCH=multires`). */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include <limits.h>
#include <stdlib.h>

/* A size x size m cloth of n x n vertices in the plane y = height. */
static pbd_mesh cloth_grid(int n, float size, float height) {
    pbd_mesh m;
    float o[3] = {-0.5f * size, height, -0.5f * size}, u[3] = {size, 0, 0}, v[3] = {0, 0, size};
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, &m));
    return m;
}

static pbd_sm_cloth_desc cloth_desc(const pbd_mesh *m, int levels) {
    pbd_sm_cloth_desc d = pbd_sm_cloth_desc_default();
    d.positions = m->positions;
    d.vertex_count = m->vertex_count;
    d.triangles = m->triangles;
    d.triangle_count = m->triangle_count;
    d.levels = levels;
    return d;
}

/* One V-cycle per step, as in the paper; one thread (the determinism test
   sets its own), because these small scenes do not pay for barriers. */
static pbd_world *one_pass_world(float gy) {
    pbd_world *w = pbdt_world(gy);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1));
    CHECK_OK(pbd_world_set_reference_dt(w, 0)); /* one V-cycle per step at any dt, as the paper */
    CHECK_OK(pbd_world_set_threads(w, 1));
    return w;
}

static float dist3(const float *a, const float *b) {
    float d[3] = {a[0] - b[0], a[1] - b[1], a[2] - b[2]};
    return sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
}

/* ---- hierarchy ------------------------------------------------------------------- */

/* About half the triangles go per level; every level keeps the
   orientation of the flat sheet and covers it; a coarse level's positions
   are the mass-weighted restriction of the finer ones (R = M_C^-1 P^T M_F),
   so every level has the finest level's centre of mass (with no kept
   vertex: a kept one weighs 1000 times its mass in R); a kept vertex that
   is pinned stays pinned on every nested level (not on the coarse levels
   of a non-nested hierarchy, whose vertices are no fine vertices). */
TEST(sm_cloth_hierarchy_nested_and_not) {
    pbd_mesh m = cloth_grid(30, 2.0f, 0.0f);
    for (int k = 0; k < 4; ++k) {
        int nested = k >> 1 ? 0 : 1, pin = k & 1; /* pin: keep a vertex and pin it */
        pbd_world *w = one_pass_world(0);
        pbd_sm_cloth_desc d = cloth_desc(&m, 4);
        int keep[1] = {15 * 30 + 7};
        d.keep_vertices = keep;
        d.keep_count = pin;
        d.nested = nested;
        pbd_sm_cloth c = {0};
        pbd_range r;
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
        if (!c.id) {
            pbd_world_destroy(w);
            continue;
        }
        {
            if (pin) CHECK_OK(pbd_particle_pin(w, r.first + keep[0]));
            CHECK_OK(pbd_world_step(w, 0.01f)); /* at rest: one V-cycle restricts the positions */
            int levels = 0;
            CHECK_OK(pbd_sm_cloth_level_count(w, c, &levels));
            CHECK(r.count == m.vertex_count && levels == 4);
            int prev_nt = 0;
            double fine_c[3] = {0, 0, 0};
            for (int l = 3; l >= 0; --l) {
                int nv, nt;
                const int *tri;
                const float *x;
                CHECK_OK(pbd_sm_cloth_level(w, c, l, &nv, &nt, &tri, &x));
                if (l < 3)
                    CHECK_MSG(nt >= 0.42 * prev_nt && nt <= 0.55 * prev_nt, "level %d: %d of %d", l, nt, prev_nt);
                prev_nt = nt;
                int flipped = 0, pinned = 0;
                for (int t = 0; t < nt; ++t) {
                    const float *a = x + 4 * tri[3 * t], *b = x + 4 * tri[3 * t + 1], *cc = x + 4 * tri[3 * t + 2];
                    float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]},
                          e2[3] = {cc[0] - a[0], cc[1] - a[1], cc[2] - a[2]};
                    float ny = e1[2] * e2[0] - e1[0] * e2[2];
                    flipped += !(ny < 0); /* the grid's normal is -y */
                }
                double M = 0, cm[3] = {0, 0, 0}, lo = 1e9, hi = -1e9;
                for (int v = 0; v < nv; ++v) {
                    const float *p = x + 4 * v;
                    pinned += !(p[3] > 0);
                    double mv = l == 3 ? 0.0 : 1.0 / p[3]; /* a coarse level's x[3] is 1 / its mass */
                    if (l == 3) {
                        float mf = 0;
                        CHECK_OK(pbd_particle_get_mass(w, r.first + v, &mf));
                        mv = mf;
                    }
                    if (p[3] > 0 || l == 3) {
                        M += mv;
                        for (int k = 0; k < 3; ++k) cm[k] += mv * p[k];
                    }
                    for (int k = 0; k < 3; k += 2) {
                        lo = p[k] < lo ? p[k] : lo;
                        hi = p[k] > hi ? p[k] : hi;
                    }
                }
                for (int k = 0; k < 3; ++k) cm[k] /= M;
                if (l == 3)
                    for (int k = 0; k < 3; ++k) fine_c[k] = cm[k];
                CHECK_MSG(flipped == 0, "level %d: %d flipped triangles", l, flipped);
                CHECK_MSG(lo >= -1.0 - 1e-5 && hi <= 1.0 + 1e-5 && lo < -0.8 && hi > 0.8, "level %d spans %g .. %g", l,
                          lo, hi);
                if (!pin) /* (a pinned vertex's mass is not in x[3]; a kept one weighs more in R) */
                    CHECK_MSG(fabs(cm[0] - fine_c[0]) < 1e-5 && fabs(cm[2] - fine_c[2]) < 1e-5,
                              "level %d: centre of mass %g %g, the finest's %g %g", l, cm[0], cm[2], fine_c[0],
                              fine_c[2]);
                CHECK_MSG(pinned == (!pin               ? 0
                                     : nested || l == 3 ? 1
                                                        : 0),
                          "%s level %d: %d pinned vertices", nested ? "nested" : "non-nested", l, pinned);
            }
        }
        pbd_world_destroy(w);
    }
    pbd_mesh_free(&m);
}

/* A cloth in its rest shape, turned by half a turn and moved, stays put:
   every region's goal is where it is (rigid invariance of shape matching,
   on every level and through the transfers). */
TEST(sm_cloth_rigid_motion_is_kept) {
    pbd_mesh m = cloth_grid(16, 1.0f, 0.0f);
    float *moved = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    for (int i = 0; i < m.vertex_count; ++i) { /* half a turn about (1, 1, 0)/sqrt2, then shifted */
        float x = m.positions[3 * i], y = m.positions[3 * i + 1], z = m.positions[3 * i + 2];
        moved[3 * i] = y + 3.0f;
        moved[3 * i + 1] = x - 1.0f;
        moved[3 * i + 2] = -z + 0.5f;
    }
    for (int scheme = 0; scheme < 2; ++scheme) {
        pbd_world *w = one_pass_world(0);
        pbd_sm_cloth_desc d = cloth_desc(&m, 3);
        d.initial_positions = moved;
        d.scheme = (pbd_sm_cloth_scheme)scheme;
        pbd_sm_cloth c = {0};
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, NULL));
        for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(w, 0.01f));
        const float *x = pbd_world_positions(w);
        float worst = 0;
        for (int i = 0; i < m.vertex_count; ++i) {
            float e = dist3(x + 4 * i, moved + 3 * i);
            if (e > worst) worst = e;
        }
        CHECK_MSG(worst < 1e-5f, "scheme %d: moved by %g", scheme, worst);
        pbd_world_destroy(w);
    }
    free(moved);
    pbd_mesh_free(&m);
}

/* Internal forces keep the momentum: a free 20 x 20 cloth of the desc's
   defaults (5 levels), started flat with +-5 mm of noise, zero gravity,
   the world's 4 substeps x 1 iteration at 60 Hz, 5 s, both schemes,
   nested or not, with and without wrinkle conservation: its centre of
   mass stays within 5 mm. It moved 6 to 9 cm nested and 2.2 to 323 m not
   nested (an audit: 3.5 m away at 0.69 m/s after 10 s with the
   defaults): the coarse levels' area masses did not match the
   prolongation (their matching kept a momentum the finest level does
   not see), the bending's stabilising mass differed per vertex, and
   eq. 20's damping and the kernels' rounding did not sum to zero. */
TEST(sm_cloth_internal_forces_keep_the_momentum) {
    pbd_mesh m = cloth_grid(20, 1.0f, 0.0f);
    float *start = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    unsigned seed = 5;
    for (int i = 0; i < 3 * m.vertex_count; ++i) start[i] = m.positions[i] + 0.01f * (pbdt_rand(&seed) - 0.5f);
    for (int k = 0; k < 8; ++k) {
        int scheme = k & 1, nested = (k >> 1) & 1, conserve = (k >> 2) & 1;
        pbd_world *w = pbdt_world(0);
        CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 4, 1));
        pbd_sm_cloth_desc d = cloth_desc(&m, 5);
        d.initial_positions = start;
        d.scheme = (pbd_sm_cloth_scheme)scheme;
        d.nested = nested;
        d.conserve_wrinkles = conserve;
        pbd_sm_cloth c = {0};
        pbd_range r;
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
        for (int st = 0; st < 300; ++st) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w);
        double M = 0, moved[3] = {0, 0, 0}; /* the mass-weighted mean displacement */
        for (int i = 0; i < m.vertex_count; ++i) {
            double mi = 1.0 / x[4 * (r.first + i) + 3];
            M += mi;
            for (int a = 0; a < 3; ++a) moved[a] += mi * (x[4 * (r.first + i) + a] - start[3 * i + a]);
        }
        double drift = sqrt(moved[0] * moved[0] + moved[1] * moved[1] + moved[2] * moved[2]) / M;
        CHECK_MSG(drift < 0.005, "scheme %d, nested %d, conserve_wrinkles %d: the centre of mass moved %.4f m in 5 s",
                  scheme, nested, conserve, drift);
        pbd_world_destroy(w);
    }
    free(start);
    pbd_mesh_free(&m);
}

/* A free cloth started still does not gain energy: the defaults' 20 x 20
   cloth of 1 m (5 levels, wrinkle conservation on), started at its rest
   shape with +-5 mm of noise, zero gravity, 60 Hz, at the world's default
   4 substeps x 4 iterations and at 4 x 1. Its kinetic energy falls as the
   noise relaxes (about 0.1 to 0.3 mJ at 1 s, under 0.1 mJ at 5 s) and its
   centre of mass stays within millimetres. The coarse levels' positions
   were the fine vertices they stand for (nested) while their corrections
   went back through the prolongation P: a projection along directions that
   are no gradient of the constraints it enforces, which fed energy in, the
   more the more V-cycles per second (wrinkle conservation's compressed
   regions worst): 494 mJ after 1 s at 4 x 4 (vertices at 7-11 m/s), and at
   4 x 1 calm for 2 s, then 191 mJ at 5 s. */
TEST(sm_cloth_free_cloth_stays_calm) {
    pbd_mesh m = cloth_grid(20, 1.0f, 0.0f);
    float *start = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    unsigned seed = 7;
    for (int i = 0; i < 3 * m.vertex_count; ++i) start[i] = m.positions[i] + 0.01f * (pbdt_rand(&seed) - 0.5f);
    static const int iterations[2] = {4, 1};
    for (int k = 0; k < 2; ++k) {
        pbd_world *w = pbdt_world(0);
        CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 4, iterations[k]));
        CHECK_OK(pbd_world_set_threads(w, 1));
        pbd_sm_cloth_desc d = cloth_desc(&m, 5);
        d.initial_positions = start;
        pbd_range r;
        CHECK_OK(pbd_sm_add_cloth(w, &d, NULL, &r));
        double ke[6] = {0}, vmax = 0;
        for (int st = 1; st <= 300; ++st) {
            CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
            if (st % 60) continue;
            const float *v = pbd_world_velocities(w);
            double e = 0;
            for (int i = 0; i < m.vertex_count; ++i) {
                const float *vi = v + 4 * (r.first + i);
                float mi = 0;
                CHECK_OK(pbd_particle_get_mass(w, r.first + i, &mi));
                double s2 = (double)vi[0] * vi[0] + (double)vi[1] * vi[1] + (double)vi[2] * vi[2];
                e += 0.5 * mi * s2;
                vmax = s2 > vmax * vmax ? sqrt(s2) : vmax;
            }
            ke[st / 60] = e;
        }
        const float *x = pbd_world_positions(w);
        double M = 0, moved[3] = {0, 0, 0};
        for (int i = 0; i < m.vertex_count; ++i) {
            double mi = 1.0 / x[4 * (r.first + i) + 3];
            M += mi;
            for (int a = 0; a < 3; ++a) moved[a] += mi * (x[4 * (r.first + i) + a] - start[3 * i + a]);
        }
        double drift = sqrt(moved[0] * moved[0] + moved[1] * moved[1] + moved[2] * moved[2]) / M;
        for (int s = 1; s <= 5; ++s)
            CHECK_MSG(ke[s] < 5e-4, "4 x %d: kinetic energy %.3g mJ at %d s", iterations[k], 1e3 * ke[s], s);
        CHECK_MSG(ke[5] < ke[1] && ke[5] < 1.5e-4, "4 x %d: kinetic energy %.3g mJ at 1 s, %.3g mJ at 5 s",
                  iterations[k], 1e3 * ke[1], 1e3 * ke[5]);
        CHECK_MSG(vmax < 0.5, "4 x %d: a vertex at %.3g m/s", iterations[k], vmax);
        CHECK_MSG(drift < 0.01, "4 x %d: the centre of mass moved %.4f m in 5 s", iterations[k], drift);
        pbd_world_destroy(w);
    }
    free(start);
    pbd_mesh_free(&m);
}

/* ---- the paper's trends --------------------------------------------------------- */

/* Longest grid row or column polyline against its rest length: the
   stretch of the whole cloth (the paper's "global" strain). */
static float global_strain(const float *x, int first, int n, float rest_len) {
    float worst = 0;
    for (int dir = 0; dir < 2; ++dir)
        for (int i = 0; i < n; ++i) {
            double len = 0;
            for (int j = 0; j + 1 < n; ++j) {
                int a = dir ? i * n + j : j * n + i, b = dir ? i * n + j + 1 : (j + 1) * n + i;
                len += dist3(x + 4 * (first + a), x + 4 * (first + b));
            }
            float s = (float)(len / rest_len - 1);
            if (s > worst) worst = s;
        }
    return worst;
}

/* A size x size m cloth of n x n vertices hanging in the plane z = 0 from
   the top corners 0 and n - 1. */
static pbd_mesh curtain_grid(int n, float size) {
    pbd_mesh m;
    float o[3] = {-0.5f * size, 0, 0}, u[3] = {size, 0, 0}, v[3] = {0, -size, 0};
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, &m));
    return m;
}

/* The paper's stiffness experiment (section 6) at a reduced size: a 5 m x
   5 m cloth fixed at two corners "stretched under its own weight": it
   hangs from its top corners (curtain_grid), starting at rest, with a light
   air drag (2/s) that leaves the equilibrium alone but calms the global
   stretch modes, which the local damping of eq. 20 cannot reach; the
   strains are averaged over the second half of the run. (A flat cloth
   dropped from horizontal keeps the energy of its fall in those modes,
   and their strain only falls linearly with dt: bench/multires.c.) */
static void hanging_strain(const pbd_mesh *m, int n, int levels, float beta, float dt, float seconds, float *avg_local,
                           float *max_global) {
    pbd_world *w = one_pass_world(-9.81f);
    CHECK_OK(pbd_world_set_point_damping(w, 2.0f));
    pbd_sm_cloth_desc d = cloth_desc(m, levels);
    int keep[2] = {0, n - 1};
    d.keep_vertices = keep;
    d.keep_count = 2;
    d.beta = beta;
    d.damping = 0.1f;
    pbd_sm_cloth c = {0};
    pbd_range r = {0, 0};
    CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
    *avg_local = *max_global = 1e9f;
    if (!c.id) {
        pbd_world_destroy(w);
        return;
    }
    CHECK_OK(pbd_particle_pin(w, r.first));
    CHECK_OK(pbd_particle_pin(w, r.first + n - 1));
    int steps = (int)(seconds / dt + 0.5f), count = 0;
    double sa = 0, sg = 0;
    for (int s = 0; s < steps; ++s) {
        CHECK_OK(pbd_world_step(w, dt));
        if (s < steps / 2) continue;
        float av, mx;
        CHECK_OK(pbd_sm_cloth_strain(w, c, &av, &mx));
        sa += av;
        sg += global_strain(pbd_world_positions(w), r.first, n, 5.0f);
        count++;
    }
    *avg_local = (float)(sa / count);
    *max_global = (float)(sg / count);
    pbd_world_destroy(w);
}

/* Figure 7: the average local strain and the maximum global strain fall
   with every added level, and 2D+1D matching is stiffer than 2D alone. */
TEST(sm_cloth_strain_falls_with_levels) {
    LONG_SCENE();
    enum { N = 26, LEVELS = 4 };
    pbd_mesh m = curtain_grid(N, 5.0f);
    float avg[2][LEVELS], glob[2][LEVELS];
    for (int b = 0; b < 2; ++b)
        for (int l = 0; l < LEVELS; ++l) hanging_strain(&m, N, l + 1, (float)b, 0.005f, 1.5f, &avg[b][l], &glob[b][l]);
    for (int b = 0; b < 2; ++b)
        for (int l = 1; l < LEVELS; ++l) {
            CHECK_MSG(avg[b][l] < avg[b][l - 1], "%s: average strain %g at %d levels, %g at %d", b ? "2D+1D" : "2D",
                      avg[b][l], l + 1, avg[b][l - 1], l);
            CHECK_MSG(glob[b][l] < glob[b][l - 1], "%s: global strain %g at %d levels, %g at %d", b ? "2D+1D" : "2D",
                      glob[b][l], l + 1, glob[b][l - 1], l);
        }
    for (int l = 0; l < LEVELS; ++l)
        CHECK_MSG(avg[1][l] < avg[0][l], "%d levels: 2D+1D %g, 2D %g", l + 1, avg[1][l], avg[0][l]);
    pbd_mesh_free(&m);
}

/* Table 3: with a fixed number of levels the strain falls about
   quadratically with the time step: each halving from 20 ms to 1.25 ms
   cuts it by at least 2.5x; 2D+1D stays below 2D. */
TEST(sm_cloth_strain_falls_with_time_step) {
    LONG_SCENE();
    enum { N = 21, DTS = 5 };
    const float dts[DTS] = {0.02f, 0.01f, 0.005f, 0.0025f, 0.00125f};
    pbd_mesh m = curtain_grid(N, 5.0f);
    float avg[2][DTS], glob[2][DTS];
    for (int b = 0; b < 2; ++b)
        for (int k = 0; k < DTS; ++k) hanging_strain(&m, N, 3, (float)b, dts[k], 1.5f, &avg[b][k], &glob[b][k]);
    for (int b = 0; b < 2; ++b)
        for (int k = 1; k < DTS; ++k)
            CHECK_MSG(avg[b][k] * 2.5f < avg[b][k - 1], "%s: average strain %g at dt %g, %g at dt %g",
                      b ? "2D+1D" : "2D", avg[b][k], dts[k], avg[b][k - 1], dts[k - 1]);
    for (int k = 0; k < DTS; ++k)
        CHECK_MSG(avg[1][k] < avg[0][k], "dt %g: 2D+1D %g, 2D %g", dts[k], avg[1][k], avg[0][k]);
    pbd_mesh_free(&m);
}

/* ---- stability ----------------------------------------------------------------- */

/* Figure 8 and its text: vertices at random positions recover the rest
   shape's edge lengths (mean error below 5% within 2 s) without NaN; a
   non-nested hierarchy, as in the paper. The collapsed start is
   sm_cloth_collapsed_recovers_with_both_schemes below (a start collapsed
   into exactly one point is a fixed point of the method's plane at this
   size, with either scheme); the full-size figure 8, random and exactly
   collapsed, both schemes, is `bench/multires --repro`, which CI runs
   (make check-repro). */
TEST(sm_cloth_recovers_random_and_collapsed) {
    pbd_mesh m = cloth_grid(20, 1.0f, 0.0f);
    float *start = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    for (int scheme = 0; scheme < 2; ++scheme) {
        unsigned seed = 99;
        for (int i = 0; i < 3 * m.vertex_count; ++i) start[i] = pbdt_rand(&seed) - 0.5f;
        pbd_world *w = one_pass_world(0);
        pbd_sm_cloth_desc d = cloth_desc(&m, 3);
        d.nested = 0;
        d.initial_positions = start;
        d.scheme = (pbd_sm_cloth_scheme)scheme;
        pbd_sm_cloth c = {0};
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, NULL));
        if (!c.id) {
            pbd_world_destroy(w);
            continue;
        }
        float av = 1, mx = 1;
        for (int s = 0; s < 400; ++s) CHECK_OK(pbd_world_step(w, 0.005f));
        CHECK_OK(pbd_sm_cloth_strain(w, c, &av, &mx));
        CHECK_MSG(av < 0.05f, "scheme %d: random start: mean edge-length error %g after 2 s", scheme, av);
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < 4 * m.vertex_count; ++i) CHECK(x[i] == x[i]);
        pbd_world_destroy(w);
    }
    free(start);
    pbd_mesh_free(&m);
}

/* Why a start collapsed into exactly one point is a 2D problem: every
   correction of the method lies in its triangle's plane (eqs. 6-7, 12-13,
   and eq. 14 along the edge), and the degenerate triangles of the first
   step are projected into the rest plane, as the paper does (section 6).
   So a cloth collapsed exactly into one point unfolds in that plane and
   stays in it, bit for bit (nested levels; without the bending force,
   whose rounding alone could leave it). In the plane a triangle mirrored
   by the collapse (about half of them) matches its rest shape turned over
   (eq. 6 takes the normal from the triangle itself), so it never
   unmirrors, and where folds between mirrored and unmirrored triangles
   end, edges stay stretched: staying in the plane, both schemes end at
   3.8-8.8% mean elongation after 2 s, edges up to 46-57% (20 x 20 cloth,
   1 to 4 levels, nested or not, bending on). Collapsed into a ball of
   1 um instead, the cloth leaves the plane and both schemes recover
   (0.4-1.0% in 2 s; 15 starts from 1 um to 1 mm tried).
   An exact collapse with non-nested levels escaped the plane with the
   two-pass scheme only by rounding (the restriction moves the collapsed
   point by an ulp, and the first V-cycle leaves fine triangles so small
   that this noise tilts their normals: 0.7%); independent sets unfold
   the finest level before the noise arrives and stay in the plane
   (5.1%). At full size (20 402 triangles) both leave it and recover
   (bench/multires --repro: 2.9%). */
TEST(sm_cloth_collapsed_recovers_with_both_schemes) {
    pbd_mesh m = cloth_grid(20, 1.0f, 0.0f);
    float *start = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    for (int scheme = 0; scheme < 2; ++scheme) {
        /* into a ball of 1 um: the existing test's cloth, levels and steps */
        unsigned seed = 5;
        for (int i = 0; i < 3 * m.vertex_count; ++i) start[i] = 0.25f + 1e-6f * (pbdt_rand(&seed) - 0.5f);
        pbd_world *w = one_pass_world(0);
        pbd_sm_cloth_desc d = cloth_desc(&m, 3);
        d.nested = 0;
        d.initial_positions = start;
        d.scheme = (pbd_sm_cloth_scheme)scheme;
        pbd_sm_cloth c = {0};
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, NULL));
        if (!c.id) {
            pbd_world_destroy(w);
            continue;
        }
        float av = 1, mx = 1;
        for (int s = 0; s < 400; ++s) CHECK_OK(pbd_world_step(w, 0.005f));
        CHECK_OK(pbd_sm_cloth_strain(w, c, &av, &mx));
        CHECK_MSG(av < 0.05f, "scheme %d: mean edge-length error %g after 2 s", scheme, av);
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < 4 * m.vertex_count; ++i) CHECK(x[i] == x[i]);
        pbd_world_destroy(w);
        /* into exactly one point: the cloth unfolds in its rest plane y = 0.25 */
        for (int i = 0; i < 3 * m.vertex_count; ++i) start[i] = 0.25f;
        w = one_pass_world(0);
        d.nested = 1;
        d.bending_stiffness = 0;
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, NULL));
        for (int s = 0; s < 100; ++s) CHECK_OK(pbd_world_step(w, 0.005f));
        x = pbd_world_positions(w);
        int off_plane = 0, mirrored = 0, flat = 0;
        for (int v = 0; v < m.vertex_count; ++v) off_plane += x[4 * v + 1] != 0.25f;
        for (int t = 0; t < m.triangle_count; ++t) { /* the sign of the normal's y against the rest's */
            const int *T = m.triangles + 3 * t;
            float ny[2];
            for (int k = 0; k < 2; ++k) {
                const float *a = k ? m.positions + 3 * T[0] : x + 4 * T[0],
                            *b = k ? m.positions + 3 * T[1] : x + 4 * T[1],
                            *e = k ? m.positions + 3 * T[2] : x + 4 * T[2];
                ny[k] = (b[2] - a[2]) * (e[0] - a[0]) - (b[0] - a[0]) * (e[2] - a[2]);
            }
            mirrored += ny[0] * ny[1] < 0;
            flat += ny[0] == 0;
        }
        CHECK_MSG(off_plane == 0, "scheme %d: %d vertices left the plane", scheme, off_plane);
        CHECK_MSG(flat == 0 && mirrored > m.triangle_count / 4 && mirrored < 3 * m.triangle_count / 4,
                  "scheme %d: %d of %d triangles mirrored, %d degenerate", scheme, mirrored, m.triangle_count, flat);
        pbd_world_destroy(w);
    }
    free(start);
    pbd_mesh_free(&m);
}

/* ---- wrinkles (section 4.3, figures 9 and 10) ------------------------------------ */

/* Mean |dihedral angle| over the interior edges of the finest grid. */
static float wrinkliness(const float *x, int first, const pbd_mesh *m) {
    double sum = 0;
    int count = 0;
    for (int t = 0; t < m->triangle_count; ++t)
        for (int u = t + 1; u < m->triangle_count && u < t + 3; ++u) {
            const int *A = m->triangles + 3 * t, *B = m->triangles + 3 * u;
            int shared[2], ns = 0, a_only = -1, b_only = -1;
            for (int i = 0; i < 3; ++i) {
                int in = 0;
                for (int j = 0; j < 3; ++j) in |= A[i] == B[j];
                if (in && ns < 2) shared[ns++] = A[i];
                else if (!in) a_only = A[i];
            }
            if (ns != 2) continue;
            for (int j = 0; j < 3; ++j)
                if (B[j] != shared[0] && B[j] != shared[1]) b_only = B[j];
            float p[12];
            int ids[4] = {shared[0], shared[1], a_only, b_only};
            for (int k = 0; k < 4; ++k) memcpy(p + 3 * k, x + 4 * (first + ids[k]), 3 * sizeof(float));
            sum += fabs(pbd_dihedral_angle(p));
            count++;
        }
    return (float)(sum / (count ? count : 1));
}

/* A cloth dropped over a sphere keeps more fine folds with the coarse
   levels' wrinkle conservation than without it: without it the coarse
   levels undo the compression that fine wrinkles need. */
TEST(sm_cloth_wrinkle_conservation_keeps_folds) {
    pbd_mesh m = cloth_grid(36, 2.0f, 0.8f);
    float detail[2];
    for (int on = 0; on < 2; ++on) {
        pbd_world *w = pbdt_world(-9.81f);
        CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 2, 1));
        CHECK_OK(pbd_world_set_threads(w, 1));
        pbd_sm_cloth_desc d = cloth_desc(&m, 4);
        d.conserve_wrinkles = on;
        d.thickness = 0.01f;
        pbd_sm_cloth c = {0};
        pbd_range r = {0, 0};
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
        float centre[3] = {0, 0.3f, 0}, ground[3] = {0, -0.2f, 0}, up[3] = {0, 1, 0};
        CHECK_OK(pbd_add_collider_sphere(w, centre, 0.4f, 0.5f, NULL));
        CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
        for (int s = 0; s < 120; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        detail[on] = wrinkliness(pbd_world_positions(w), r.first, &m);
        pbd_world_destroy(w);
    }
    CHECK_MSG(detail[1] > 1.2f * detail[0], "mean |dihedral| with conservation %g, without %g", detail[1], detail[0]);
    pbd_mesh_free(&m);
}

/* ---- forces ---------------------------------------------------------------------- */

/* Bergou bending: a sheet folded along its middle opens up (the energy
   k/2 x^T Q x pulls it flat), and sooner with a stiffer k. At this step
   the force is as explicit as in the paper (section 4.4): h^2 k w G is
   below 0.01 here. */
TEST(sm_cloth_bending_unfolds) {
    pbd_mesh m = cloth_grid(11, 1.0f, 0.0f);
    float *folded = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    for (int i = 0; i < m.vertex_count; ++i) { /* fold the x > 0 half up by 60 degrees */
        float x = m.positions[3 * i], z = m.positions[3 * i + 2];
        folded[3 * i] = x > 0 ? x * 0.5f : x;
        folded[3 * i + 1] = x > 0 ? x * 0.8660254f : 0.0f;
        folded[3 * i + 2] = z;
    }
    int opened_at[2] = {-1, -1};
    for (int k = 0; k < 2; ++k) {
        pbd_world *w = one_pass_world(0);
        pbd_sm_cloth_desc d = cloth_desc(&m, 1);
        d.initial_positions = folded;
        d.bending_stiffness = k ? 3e-3f : 1e-3f;
        d.damping = 0;
        pbd_sm_cloth c = {0};
        pbd_range r = {0, 0};
        CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
        for (int s = 0; s < 200 && opened_at[k] < 0; ++s) {
            CHECK_OK(pbd_world_step(w, 0.005f));
            const float *x = pbd_world_positions(w);
            float top = -1e9f; /* height of the folded edge over the flat half (y = 0) */
            for (int i = 0; i < m.vertex_count; ++i)
                if (m.positions[3 * i] > 0.49f && x[4 * (r.first + i) + 1] > top) top = x[4 * (r.first + i) + 1];
            if (top < 0.3f) opened_at[k] = s;
        }
        pbd_world_destroy(w);
    }
    CHECK_MSG(opened_at[0] > 0 && opened_at[1] > 0 && opened_at[1] < opened_at[0],
              "the fold opened below 0.3 m after %d steps (k = 1e-3) and %d steps (k = 3e-3)", opened_at[0],
              opened_at[1]);
    free(folded);
    pbd_mesh_free(&m);
}

/* Regression: with 2D matching alone, 20 ms steps and edges of 5 cm (the
   paper's 5 m cloth of 102 x 102 vertices, here 1.25 m and 26 x 26), the
   explicit bending force's zig-zag mode grew about 2x per step to NaN
   (h^2 k w lambda_max(Q) > 4): with the independent sets at 1 to 5 levels
   and with the two-pass scheme at 1 level. With the Gershgorin-bounded
   mass of the bending step both schemes stay finite and hold the cloth
   about equally well. (One level at 20 ms is too soft to hold the cloth's
   weight at all: it stretches on without bound, without bending too, so
   only finiteness is asked there.) */
TEST(sm_cloth_bending_stable_at_large_steps) {
    enum { N = 26 };
    pbd_mesh m = cloth_grid(N, 1.25f, 0.0f);
    float avg[2][2];
    for (int scheme = 0; scheme < 2; ++scheme)
        for (int k = 0; k < 2; ++k) {
            pbd_world *w = one_pass_world(-9.81f);
            pbd_sm_cloth_desc d = cloth_desc(&m, k ? 3 : 1);
            int keep[2] = {0, N - 1};
            d.keep_vertices = keep;
            d.keep_count = 2;
            d.beta = 0;
            d.damping = 0.1f;
            d.bending_stiffness = 1e-4f;
            d.scheme = (pbd_sm_cloth_scheme)scheme;
            pbd_sm_cloth c = {0};
            pbd_range r = {0, 0};
            CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
            avg[scheme][k] = 1e9f;
            if (!c.id) {
                pbd_world_destroy(w);
                continue;
            }
            CHECK_OK(pbd_particle_pin(w, r.first));
            CHECK_OK(pbd_particle_pin(w, r.first + N - 1));
            for (int s = 0; s < 60; ++s) CHECK_OK(pbd_world_step(w, 0.02f));
            const float *x = pbd_world_positions(w);
            int finite = 1;
            for (int i = 0; i < 4 * r.count; ++i) finite &= isfinite(x[4 * r.first + i]);
            float mx = 0;
            CHECK_OK(pbd_sm_cloth_strain(w, c, &avg[scheme][k], &mx));
            CHECK_MSG(finite, "scheme %d, %d levels: NaN or Inf", scheme, k ? 3 : 1);
            pbd_world_destroy(w);
        }
    CHECK_MSG(avg[0][1] < 1 && avg[1][1] < 2 * avg[0][1] && avg[0][1] < 2 * avg[1][1],
              "3 levels: strain two-pass %g, independent sets %g", avg[0][1], avg[1][1]);
    pbd_mesh_free(&m);
}

/* Per-triangle damping (eqs. 19-20) removes stretching motion and leaves
   rigid rotation alone: a spinning (shape-matched) sheet keeps its spin, a
   breathing sheet of free particles calms down. */
TEST(sm_cloth_damping_spares_rotation) {
    pbd_mesh m = cloth_grid(12, 1.0f, 0.0f);
    float *vel = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    float spin[2], breath[2];
    for (int k = 0; k < 2; ++k) {
        for (int mode = 0; mode < 2; ++mode) {
            pbd_world *w = one_pass_world(0);
            pbd_sm_cloth_desc d = cloth_desc(&m, 2);
            d.damping = k ? 0.5f : 0.0f;
            d.bending_stiffness = 0;
            if (mode) d.alpha = d.beta = 0; /* free particles: only damping acts on the breathing */
            pbd_sm_cloth c = {0};
            pbd_range r = {0, 0};
            CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
            for (int i = 0; i < m.vertex_count; ++i) {
                float x = m.positions[3 * i], z = m.positions[3 * i + 2];
                vel[3 * i] = mode ? 0.5f * x : -2.0f * z; /* breathing or spinning about y */
                vel[3 * i + 1] = 0;
                vel[3 * i + 2] = mode ? 0.5f * z : 2.0f * x;
            }
            CHECK_OK(pbd_particles_set_velocities(w, r, vel));
            for (int s = 0; s < 40; ++s) CHECK_OK(pbd_world_step(w, 0.005f));
            const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
            double L = 0, E = 0;
            for (int i = 0; i < m.vertex_count; ++i) {
                const float *xi = x + 4 * (r.first + i), *vi = v + 4 * (r.first + i);
                L += xi[2] * vi[0] - xi[0] * vi[2];
                E += vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2];
            }
            if (mode) breath[k] = (float)E;
            else spin[k] = (float)fabs(L);
            pbd_world_destroy(w);
        }
    }
    CHECK_MSG(fabsf(spin[1] - spin[0]) < 0.01f * spin[0], "spin with damping %g, without %g", spin[1], spin[0]);
    CHECK_MSG(breath[1] < 0.5f * breath[0], "breathing energy with damping %g, without %g", breath[1], breath[0]);
    free(vel);
    pbd_mesh_free(&m);
}

/* ---- parallel schemes --------------------------------------------------------------- */

/* Both schemes of section 5 give bit-identical results on 1 and 2 threads,
   and hold the hanging cloth about equally well. */
TEST(sm_cloth_schemes_deterministic) {
    enum { N = 20 };
    pbdt_part(PBDT_THREADS, "2 threads == 1"); /* the schemes' strains are compared in every build */
    pbd_mesh m = cloth_grid(N, 2.0f, 0.0f);
    float strain[2];
    for (int scheme = 0; scheme < 2; ++scheme) {
        float *result[2];
        for (int threads = 1; threads <= 2; ++threads) {
            pbd_world *w = one_pass_world(-9.81f);
            CHECK_OK(pbd_world_set_threads(w, threads));
            pbd_sm_cloth_desc d = cloth_desc(&m, 3);
            int keep[2] = {0, N - 1};
            d.keep_vertices = keep;
            d.keep_count = 2;
            d.scheme = (pbd_sm_cloth_scheme)scheme;
            pbd_sm_cloth c = {0};
            pbd_range r = {0, 0};
            CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
            CHECK_OK(pbd_particle_pin(w, r.first));
            CHECK_OK(pbd_particle_pin(w, r.first + N - 1));
            for (int s = 0; s < 60; ++s) CHECK_OK(pbd_world_step(w, 0.005f));
            result[threads - 1] = (float *)malloc(sizeof(float) * 4 * m.vertex_count);
            memcpy(result[threads - 1], pbd_world_positions(w), sizeof(float) * 4 * m.vertex_count);
            float mx;
            CHECK_OK(pbd_sm_cloth_strain(w, c, &strain[scheme], &mx));
            pbd_world_destroy(w);
        }
        CHECK_MSG(memcmp(result[0], result[1], sizeof(float) * 4 * m.vertex_count) == 0,
                  "scheme %d: 1 and 2 threads differ", scheme);
        free(result[0]);
        free(result[1]);
    }
    CHECK_MSG(strain[1] < 2 * strain[0] && strain[0] < 2 * strain[1], "strain two-pass %g, independent sets %g",
              strain[0], strain[1]);
    pbd_mesh_free(&m);
}

/* The SIMD triangle kernel gives the scalar reference's bits: from a
   random start (inverted triangles, det < 0 in eq. 11), a collapsed one
   (every triangle degenerate: the last valid projection and the
   rotation fallback), and a hanging cloth with pinned corners (1000x
   weights), with wrinkle conservation on and off, for both schemes.
   Without SIMD (PBD_NO_SIMD or no SIMDe) both runs would be scalar: skipped. */
TEST(sm_cloth_simd_matches_scalar) {
    enum { N = 17 };
    if (pbd_simd_width() == 1) SKIP("scalar build: no SIMD triangle kernel to compare");
    pbd_mesh m = cloth_grid(N, 1.0f, 0.0f);
    float *start = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    CHECK(pbd_simd_width() >= 1);
    for (int scene = 0; scene < 3; ++scene)
        for (int conserve = 0; conserve < 2; ++conserve)
            for (int scheme = 0; scheme < 2; ++scheme) {
                unsigned seed = 7u;
                for (int i = 0; i < 3 * m.vertex_count; ++i)
                    start[i] = scene == 0 ? pbdt_rand(&seed) - 0.5f : scene == 1 ? 0.25f : m.positions[i];
                float *result[2];
                for (int simd = 0; simd < 2; ++simd) {
                    pbd_world *w = one_pass_world(scene == 2 ? -9.81f : 0.0f);
                    pbd_sm_cloth_desc d = cloth_desc(&m, 3);
                    int keep[2] = {0, N - 1};
                    d.keep_vertices = keep;
                    d.keep_count = 2;
                    d.initial_positions = start;
                    d.conserve_wrinkles = conserve;
                    d.scheme = (pbd_sm_cloth_scheme)scheme;
                    pbd_sm_cloth c = {0};
                    pbd_range r = {0, 0};
                    CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
                    CHECK_OK(pbd_sm_cloth_set_simd(w, c, simd));
                    if (scene == 2) {
                        CHECK_OK(pbd_particle_pin(w, r.first));
                        CHECK_OK(pbd_particle_pin(w, r.first + N - 1));
                    }
                    for (int s = 0; s < 40; ++s) CHECK_OK(pbd_world_step(w, 0.01f));
                    result[simd] = (float *)malloc(sizeof(float) * 4 * m.vertex_count);
                    memcpy(result[simd], pbd_world_positions(w) + 4 * r.first, sizeof(float) * 4 * m.vertex_count);
                    pbd_world_destroy(w);
                }
                CHECK_MSG(memcmp(result[0], result[1], sizeof(float) * 4 * m.vertex_count) == 0,
                          "scene %d, conserve %d, scheme %d: SIMD (width %d) and scalar differ", scene, conserve,
                          scheme, pbd_simd_width());
                free(result[0]);
                free(result[1]);
            }
    free(start);
    pbd_mesh_free(&m);
}

/* ---- bad input ------------------------------------------------------------------------ */

TEST(sm_cloth_bad_input) {
    pbd_mesh m = cloth_grid(8, 1.0f, 0.0f);
    pbd_world *w = one_pass_world(-9.81f);
    pbd_sm_cloth c = {0};
    pbd_sm_cloth_desc ok = cloth_desc(&m, 2);
    pbd_sm_cloth_desc d = ok;
    CHECK_ERROR(pbd_sm_add_cloth(NULL, &d, &c, NULL), PBD_ERROR_NULL_POINTER, "w is NULL");
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, NULL, &c, NULL), PBD_ERROR_NULL_POINTER, "d is NULL");
    d.positions = NULL;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_NULL_POINTER,
                      "pbd_sm_cloth_desc.positions is NULL");
    d = ok;
    d.vertex_count = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT, "vertex_count 0 must be >= 3");
    d = ok;
    d.vertex_count = INT_MAX;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_OVERFLOW,
                      "vertex_count 2147483647 or triangle_count 98 is too large");
    d = ok;
    d.density = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_NEGATIVE_MASS, "density 0 must be > 0");
    d = ok;
    d.density = NAN;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_NOT_FINITE,
                      "pbd_sm_add_cloth: density nan is not finite");
    d = ok;
    d.thickness = 20; /* its particles' radius: named as the desc's thickness */
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "thickness above PBD_MAX_RADIUS (levels 2,");
    d = ok;
    d.density = 1e-30f; /* the vertex masses it makes are below PBD_MIN_MASS: named by the density, no "masses" */
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "density 1e-30 kg/m^2 makes vertex 0 a mass of");
    d = ok;
    d.levels = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "levels outside 1..10 (levels 0,");
    d = ok;
    d.levels = 11;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "levels outside 1..10 (levels 11,");
    d = ok;
    d.levels = 9; /* 98 triangles cannot halve eight times */
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "the mesh is too small for 9 levels");
    d = ok;
    d.reduction = 0.95f;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "reduction outside [0.05, 0.9] (levels");
    d = ok;
    d.alpha = 1.5f;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "alpha outside [0, 1] (levels 2,");
    d = ok;
    d.scheme = (pbd_sm_cloth_scheme)7;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "scheme is not a pbd_sm_cloth_scheme");
    int keep = 1000;
    d = ok;
    d.keep_vertices = &keep;
    d.keep_count = 1;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE,
                      "keep_vertices[0] = 1000 is not a vertex (0..63)");
    int *tri = (int *)malloc(sizeof(int) * 3 * (m.triangle_count + 1));
    memcpy(tri, m.triangles, sizeof(int) * 3 * m.triangle_count);
    d = ok;
    d.triangles = tri;
    tri[4] = m.vertex_count;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE,
                      "triangle 1 names vertex 64, outside 0..63");
    tri[4] = tri[3]; /* a repeated vertex */
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_DEGENERATE, "triangle 1 repeats vertex 1");
    memcpy(tri, m.triangles, sizeof(int) * 3 * m.triangle_count);
    /* a third triangle on the diagonal of the first cell (the grid's two
       triangles of that cell share vertices 1 and nx) */
    tri[3 * m.triangle_count] = 1;
    tri[3 * m.triangle_count + 1] = 8;
    tri[3 * m.triangle_count + 2] = m.vertex_count - 1;
    d.triangle_count = m.triangle_count + 1;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "is in 3 triangles (non-manifold)");
    float *pos = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    memcpy(pos, m.positions, sizeof(float) * 3 * m.vertex_count);
    d = ok;
    d.positions = pos;
    pos[7] = INFINITY;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_NOT_FINITE,
                      "positions contain NaN or infinity (64 vertices)");
    memcpy(pos, m.positions, sizeof(float) * 3 * m.vertex_count);
    for (int k = 0; k < 3; ++k) pos[3 * m.triangles[1] + k] = pos[3 * m.triangles[0] + k]; /* a zero-area triangle */
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_DEGENERATE, "area 0");
    d = ok;
    d.vertex_count = m.vertex_count + 1; /* the extra vertex has no triangle */
    float *pos2 = (float *)calloc(3 * (size_t)(m.vertex_count + 1), sizeof(float));
    memcpy(pos2, m.positions, sizeof(float) * 3 * m.vertex_count);
    d.positions = pos2;
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, NULL), PBD_ERROR_INVALID_ARGUMENT, "vertex 64 is in no triangle");
    /* nothing was added */
    CHECK(pbd_world_particle_count(w) == 0 && pbd_world_plugin_count(w) == 0);
    /* setters */
    d = ok;
    CHECK_OK(pbd_sm_add_cloth(w, &d, &c, NULL));
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_stiffness(w, c, -0.1f, 1), PBD_ERROR_INVALID_ARGUMENT, "alpha -0.1");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_damping(w, c, 2), PBD_ERROR_INVALID_ARGUMENT, "damping 2");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_bending(w, c, NAN), PBD_ERROR_NOT_FINITE,
                      "bending_stiffness is not finite (nan)");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_wrinkle_conservation(w, c, 3), PBD_ERROR_INVALID_ARGUMENT, "on 3");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_scheme(w, c, (pbd_sm_cloth_scheme)-1), PBD_ERROR_INVALID_ARGUMENT,
                      "scheme -1 is not PBD_SM_CLOTH_TWO_PASS or PBD_SM_CLOTH_INDEPENDENT_SETS");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_simd(w, c, 2), PBD_ERROR_INVALID_ARGUMENT, "on 2");
    pbd_sm_cloth none = {0};
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_simd(w, none, 1), PBD_ERROR_INVALID_HANDLE,
                      "multi-resolution cloth handle is 0");
    CHECK_ERROR(pbd_sm_cloth_set_simd(NULL, c, 1), PBD_ERROR_NULL_POINTER, "w is NULL");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_level(w, c, 2, NULL, NULL, NULL, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE, "level 2");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_stiffness(w, none, 1, 1), PBD_ERROR_INVALID_HANDLE, "cloth");
    CHECK_OK(pbd_sm_cloth_set_stiffness(w, c, 0.5f, 0.5f));
    CHECK_OK(pbd_world_step(w, 0.01f));
    pbd_range cr = {0, 0};
    CHECK_OK(pbd_sm_cloth_particles(w, c, &cr));
    CHECK(cr.count == m.vertex_count);
    CHECK_OK(pbd_sm_remove_cloth(w, c));
    CHECK(pbd_world_plugin_count(w) == 0);                /* its plugin went with it */
    CHECK(pbd_world_particle_count(w) == m.vertex_count); /* its particles stay */
    CHECK_OK(pbd_world_step(w, 0.01f));
    /* a removed cloth's handle is stale: every call refuses it, naming the kind */
    CHECK_WORLD_ERROR(w, pbd_sm_remove_cloth(w, c), PBD_ERROR_INVALID_HANDLE, "multi-resolution cloth handle");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_set_stiffness(w, c, 0.5f, 0.5f), PBD_ERROR_INVALID_HANDLE, "is stale");
    CHECK_WORLD_ERROR(w, pbd_sm_cloth_particles(w, c, &cr), PBD_ERROR_INVALID_HANDLE, "cloth");
    /* out may be NULL (the world owns the cloth) */
    CHECK_OK(pbd_sm_add_cloth(w, &d, NULL, NULL));
    CHECK(pbd_world_plugin_count(w) == 1);
    free(tri);
    free(pos);
    free(pos2);
    pbd_world_destroy(w);
    pbd_mesh_free(&m);
}

/* A triangle listed twice (the same three vertices, rotated or reversed)
   was accepted silently where no edge of it is shared with the rest of the
   mesh (each of its edges is then in two triangles: manifold to the edge
   count), and inside the mesh it was refused as a non-manifold edge; it is
   refused as a repeated triangle, named by both indices, before anything
   is added. */
TEST(sm_cloth_refuses_a_repeated_triangle) {
    pbd_mesh m = cloth_grid(4, 1.0f, 0.0f);
    pbd_world *w = one_pass_world(-9.81f);
    size_t size = pbd_world_snapshot_size(w);
    unsigned char *before = (unsigned char *)malloc(size), *after = (unsigned char *)malloc(size);
    CHECK_OK(pbd_world_save(w, before, size));
    int nv = m.vertex_count, nt = m.triangle_count; /* 16 vertices, 18 triangles */
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)(nv + 3));
    int *tri = (int *)malloc(sizeof(int) * 3 * (size_t)(nt + 2));
    memcpy(pos, m.positions, sizeof(float) * 3 * (size_t)nv);
    memcpy(tri, m.triangles, sizeof(int) * 3 * (size_t)nt);
    const float apart[9] = {3, 0, 0, 3.5f, 0, 0, 3, 0, 0.5f}; /* a triangle of its own, away from the grid */
    memcpy(pos + 3 * nv, apart, sizeof apart);
    pbd_sm_cloth_desc d = cloth_desc(&m, 1);
    d.positions = pos;
    d.vertex_count = nv + 3;
    d.triangles = tri;
    d.triangle_count = nt + 2;
    pbd_sm_cloth c = {0};
    pbd_range r = {-1, -1};
    const int rotated[2][3] = {{nv, nv + 1, nv + 2}, {nv + 1, nv + 2, nv}};
    const int reversed[2][3] = {{nv, nv + 1, nv + 2}, {nv + 2, nv + 1, nv}};
    memcpy(tri + 3 * nt, rotated, sizeof rotated);
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, &r), PBD_ERROR_INVALID_ARGUMENT,
                      "pbd_sm_add_cloth: triangles 18 and 19 are the same triangle (vertices 16, 17, 18)");
    memcpy(tri + 3 * nt, reversed, sizeof reversed);
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, &r), PBD_ERROR_INVALID_ARGUMENT,
                      "triangles 18 and 19 are the same triangle");
    /* inside the grid: triangle 4 again, as the last one (its edges are
       then in three triangles: named as the repeat, not the edge) */
    d.vertex_count = nv;
    d.triangle_count = nt + 1;
    tri[3 * nt] = m.triangles[3 * 4 + 2];
    tri[3 * nt + 1] = m.triangles[3 * 4];
    tri[3 * nt + 2] = m.triangles[3 * 4 + 1];
    CHECK_WORLD_ERROR(w, pbd_sm_add_cloth(w, &d, &c, &r), PBD_ERROR_INVALID_ARGUMENT,
                      "triangles 4 and 18 are the same triangle");
    /* nothing was added */
    CHECK(c.id == 0 && r.first == -1 && r.count == -1);
    CHECK(pbd_world_particle_count(w) == 0 && pbd_world_plugin_count(w) == 0);
    CHECK(pbd_world_snapshot_size(w) == size);
    CHECK_OK(pbd_world_save(w, after, size));
    CHECK(memcmp(before, after, size) == 0);
    /* the same mesh with the triangle once is a cloth */
    d.vertex_count = nv + 3;
    d.triangle_count = nt + 1;
    memcpy(tri + 3 * nt, rotated[0], sizeof rotated[0]);
    CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
    CHECK(r.count == nv + 3);
    free(before);
    free(after);
    free(pos);
    free(tri);
    pbd_world_destroy(w);
    pbd_mesh_free(&m);
}

/* A step that a NaN makes fail rolls the cloth back with the world: its
   kept projections and coarse positions (in snapshots) are the step's
   start's again, so the world saves the bytes it saved before, and the
   snapshot loads (a NaN coarse position would not). */
static void mr_nan_project(void *user, const pbd_solve_context *c) {
    (void)user;
    if (c->substep == 1 && c->iteration == 0) c->p[4 * 7 + 1] = NAN;
}
TEST(sm_cloth_rollback_restores_the_snapshot) {
    pbd_mesh m = cloth_grid(12, 1.0f, 1.0f);
    pbd_world *w = pbdt_world(-9.81f);
    pbd_sm_cloth_desc d = cloth_desc(&m, 3);
    int corners[2] = {0, 11};
    d.keep_vertices = corners;
    d.keep_count = 2;
    pbd_range r;
    CHECK_OK(pbd_sm_add_cloth(w, &d, NULL, &r));
    CHECK_OK(pbd_particle_pin(w, r.first));
    CHECK_OK(pbd_particle_pin(w, r.first + 11));
    for (int s = 0; s < 10; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f)); /* swinging */
    pbd_plugin_desc nd = pbd_plugin_desc_default();
    nd.particle_end = r.first + r.count;
    nd.project = mr_nan_project;
    pbd_plugin nan_plugin;
    CHECK_OK(pbd_add_plugin(w, &nd, &nan_plugin));
    size_t n0, n1;
    unsigned char *before = pbdt_save(w, &n0);
    CHECK_RESULT(pbd_world_step(w, 1.0f / 60.0f), PBD_ERROR_NOT_FINITE);
    unsigned char *after = pbdt_save(w, &n1);
    CHECK(n0 == n1 && n0 > 0 && memcmp(before, after, n0) == 0);
    CHECK_OK(pbd_world_restore(w, after, n1));
    free(before);
    free(after);
    pbd_world_destroy(w);
    pbd_mesh_free(&m);
}

void suite_sm_cloth(void) {
    RUN(sm_cloth_rollback_restores_the_snapshot);
    RUN(sm_cloth_hierarchy_nested_and_not);
    RUN(sm_cloth_rigid_motion_is_kept);
    RUN(sm_cloth_internal_forces_keep_the_momentum);
    RUN(sm_cloth_free_cloth_stays_calm);
    RUN(sm_cloth_strain_falls_with_levels);
    RUN(sm_cloth_strain_falls_with_time_step);
    RUN(sm_cloth_recovers_random_and_collapsed);
    RUN(sm_cloth_collapsed_recovers_with_both_schemes);
    RUN(sm_cloth_wrinkle_conservation_keeps_folds);
    RUN(sm_cloth_bending_unfolds);
    RUN(sm_cloth_bending_stable_at_large_steps);
    RUN(sm_cloth_damping_spares_rotation);
    RUN(sm_cloth_schemes_deterministic);
    RUN(sm_cloth_simd_matches_scalar);
    RUN(sm_cloth_bad_input);
    RUN(sm_cloth_refuses_a_repeated_triangle);
}
