/* tests/test_sm_sum.c - pbd_sm.h section "summation": the fast summation
   methods of survey 4.3 (lattice bars/plates/cubes, adaptive octree,
   mesh paths) against naive summation over the same regions, their
   regions against brute-force definitions, their cost against the region
   size, determinism over threads and SIMD, and bad input. */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include <stdlib.h>

/* A naive plan over the regions of `p` (its member lists). */
static pbd_sm_sum_plan *naive_twin(const pbd_sm_sum_plan *p) {
    int R = pbd_sm_plan_region_count(p), n = pbd_sm_plan_particle_count(p);
    int *start = (int *)malloc(sizeof(int) * (size_t)(R + 1));
    int total = 0, cnt = 0;
    for (int r = 0; r < R; ++r) {
        pbd_sm_plan_region(p, r, NULL, 0, &cnt);
        start[r] = total;
        total += cnt;
    }
    start[R] = total;
    int *list = (int *)malloc(sizeof(int) * (size_t)(total + 1));
    for (int r = 0; r < R; ++r) pbd_sm_plan_region(p, r, list + start[r], total - start[r], &cnt);
    pbd_sm_sum_plan *q = NULL;
    pbd_result res = pbd_sm_plan_naive(n, R, start, list, &q);
    free(start);
    free(list);
    return res == PBD_OK ? q : NULL;
}

/* The largest error of plan `p` against naive summation, relative to the
   sum of the absolute values summed (the scale of any summation's rounding;
   for the positive values it is the plain relative error). */
static double error_vs_naive(pbd_sm_sum_plan *p, int k, unsigned seed, int positive) {
    pbd_sm_sum_plan *q = naive_twin(p);
    if (!q) return 1e30;
    int n = pbd_sm_plan_particle_count(p), R = pbd_sm_plan_region_count(p);
    double *v = (double *)malloc(sizeof(double) * (size_t)(n * k + 1));
    double *va = (double *)malloc(sizeof(double) * (size_t)(n * k + 1));
    double *a = (double *)malloc(sizeof(double) * (size_t)(R * k + 1));
    double *b = (double *)malloc(sizeof(double) * (size_t)(R * k + 1));
    double *s = (double *)malloc(sizeof(double) * (size_t)(R * k + 1));
    for (int i = 0; i < n * k; ++i) {
        double x = pbdt_rand(&seed);
        v[i] = positive ? 0.5 + x : 100.0 * (x - 0.5);
        va[i] = fabs(v[i]);
    }
    double worst = 0;
    pbd_sm_plan_set_threads(p, 1); /* threads are the business of sm_sum_deterministic */
    pbd_sm_plan_set_threads(q, 1);
    if (pbd_sm_plan_sum(p, v, k, a) != PBD_OK || pbd_sm_plan_sum(q, v, k, b) != PBD_OK ||
        pbd_sm_plan_sum(q, va, k, s) != PBD_OK)
        worst = 1e30;
    for (int i = 0; i < R * k && worst < 1e30; ++i) {
        double e = fabs(a[i] - b[i]) / (s[i] > 0 ? s[i] : 1);
        if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
    free(v);
    free(va);
    free(a);
    free(b);
    free(s);
    pbd_sm_plan_destroy(q);
    return worst;
}

/* Random cells: a box with holes, a few far islands, negative coordinates. */
static int random_lattice(unsigned *st, int *cells, int nx, int ny, int nz, float fill) {
    int n = 0;
    for (int z = 0; z < nz; ++z)
        for (int y = 0; y < ny; ++y)
            for (int x = 0; x < nx; ++x)
                if (pbdt_rand(st) < fill) {
                    cells[3 * n] = x - 5;
                    cells[3 * n + 1] = y - 3;
                    cells[3 * n + 2] = z;
                    n++;
                }
    int islands[4][3] = {{40, 40, 40}, {41, 40, 40}, {-30, 7, 2}, {-30, 9, 2}};
    for (int t = 0; t < 4; ++t, ++n)
        for (int a = 0; a < 3; ++a) cells[3 * n + a] = islands[t][a];
    /* shuffle the particle order */
    for (int i = n - 1; i > 0; --i) {
        int j = (int)(pbdt_rand(st) * (float)(i + 1)) % (i + 1);
        for (int a = 0; a < 3; ++a) {
            int t = cells[3 * i + a];
            cells[3 * i + a] = cells[3 * j + a];
            cells[3 * j + a] = t;
        }
    }
    return n;
}

static int chebyshev(const int *a, const int *b) {
    int d = 0;
    for (int k = 0; k < 3; ++k) {
        int e = abs(a[k] - b[k]);
        if (e > d) d = e;
    }
    return d;
}

/* FastLSM sums equal naive sums on random lattices for several w and k,
   and the regions are the cells within Chebyshev distance w. */
TEST(sm_sum_lattice_equals_naive) {
    unsigned st = 11;
    int *cells = (int *)malloc(sizeof(int) * 3 * 2000);
    int *mem = (int *)malloc(sizeof(int) * 2000);
    const int ws[4] = {1, 2, 3, 5}, ks[3] = {1, 5, 12};
    for (int t = 0; t < 4; ++t) {
        int n = random_lattice(&st, cells, 13, 11, 9, t == 3 ? 0.35f : 0.75f);
        pbd_sm_sum_plan *p = NULL;
        CHECK_OK(pbd_sm_plan_lattice(n, cells, ws[t], &p));
        if (!p) continue;
        CHECK(pbd_sm_plan_method(p) == PBD_SM_SUM_LATTICE);
        int bad = 0;
        for (int i = 0; i < n; ++i) {
            int cnt = 0, want = 0;
            pbd_sm_plan_region(p, i, mem, 2000, &cnt);
            for (int j = 0; j < n; ++j) want += chebyshev(cells + 3 * i, cells + 3 * j) <= ws[t];
            for (int e = 0; e < cnt; ++e) bad += chebyshev(cells + 3 * i, cells + 3 * mem[e]) > ws[t];
            bad += cnt != want;
        }
        CHECK_MSG(bad == 0, "w=%d: %d wrong regions", ws[t], bad);
        for (int q = 0; q < 3; ++q) {
            double e = error_vs_naive(p, ks[q], 100u + (unsigned)q, 1);
            CHECK_MSG(e <= 1e-5, "w=%d k=%d: relative error %g", ws[t], ks[q], e);
            e = error_vs_naive(p, ks[q], 200u + (unsigned)q, 0);
            CHECK_MSG(e <= 1e-5, "w=%d k=%d signed: error %g", ws[t], ks[q], e);
        }
        pbd_sm_plan_destroy(p);
    }
    /* the largest k, and a single particle */
    int n = random_lattice(&st, cells, 6, 6, 6, 0.8f);
    pbd_sm_sum_plan *p = NULL;
    CHECK_OK(pbd_sm_plan_lattice(n, cells, 2, &p));
    if (p) CHECK(error_vs_naive(p, 64, 5, 1) <= 1e-5);
    pbd_sm_plan_destroy(p);
    int one[3] = {0, 0, 0};
    double v = 3.5, s = 0;
    p = NULL;
    CHECK_OK(pbd_sm_plan_lattice(1, one, 4, &p));
    if (p) {
        CHECK_OK(pbd_sm_plan_sum(p, &v, 1, &s));
        CHECK(s == 3.5);
    }
    pbd_sm_plan_destroy(p);
    free(cells);
    free(mem);
}

/* A random octree: roots at level `top` subdivided at random, deeper near
   the first root; the leaves in random order. Returns the leaf count. */
static int random_octree(unsigned *st, int *cells, int top, int max_leaves) {
    int stack[512][4], sp = 0, n = 0;
    int roots[3][3] = {{-1, 0, 0}, {0, 0, 0}, {0, -1, 0}};
    for (int r = 0; r < 3; ++r) {
        stack[sp][0] = roots[r][0];
        stack[sp][1] = roots[r][1];
        stack[sp][2] = roots[r][2];
        stack[sp][3] = top;
        sp++;
    }
    while (sp > 0) {
        sp--;
        int x = stack[sp][0], y = stack[sp][1], z = stack[sp][2], l = stack[sp][3];
        float split = l == top ? 1.0f : (x < 0 ? 0.8f : 0.45f);
        if (l > 0 && sp + 8 < 512 && n + sp + 8 < max_leaves && pbdt_rand(st) < split) {
            for (int c = 0; c < 8; ++c) {
                stack[sp][0] = 2 * x + (c & 1);
                stack[sp][1] = 2 * y + ((c >> 1) & 1);
                stack[sp][2] = 2 * z + (c >> 2);
                stack[sp][3] = l - 1;
                sp++;
            }
        } else {
            cells[4 * n] = x;
            cells[4 * n + 1] = y;
            cells[4 * n + 2] = z;
            cells[4 * n + 3] = l;
            n++;
        }
    }
    for (int i = n - 1; i > 0; --i) {
        int j = (int)(pbdt_rand(st) * (float)(i + 1)) % (i + 1);
        for (int a = 0; a < 4; ++a) {
            int t = cells[4 * i + a];
            cells[4 * i + a] = cells[4 * j + a];
            cells[4 * j + a] = t;
        }
    }
    return n;
}

/* Octree regions: the leaves whose centres are within Chebyshev distance
   width_i 2^level_i of leaf i's centre (checked by brute force), and the
   sums through virtual nodes equal naive sums. */
TEST(sm_sum_octree_equals_naive) {
    unsigned st = 5;
    int *cells = (int *)malloc(sizeof(int) * 4 * 1200);
    int *widths = (int *)malloc(sizeof(int) * 1200);
    int *mem = (int *)malloc(sizeof(int) * 1200);
    for (int t = 0; t < 4; ++t) {
        int n = random_octree(&st, cells, 4, 1100);
        for (int i = 0; i < n; ++i) widths[i] = 1 + (int)(pbdt_rand(&st) * 3.0f) % 3;
        int w = t + 1;
        pbd_sm_sum_plan *p = NULL;
        CHECK_OK(pbd_sm_plan_octree(n, cells, t == 3 ? widths : NULL, w, &p));
        if (!p) continue;
        CHECK(pbd_sm_plan_method(p) == PBD_SM_SUM_OCTREE && pbd_sm_plan_region_count(p) == n);
        int bad = 0;
        for (int i = 0; i < n; ++i) {
            long long ci[3], cj[3], W = 2LL * (t == 3 ? widths[i] : w) << cells[4 * i + 3];
            int cnt = 0, want = 0;
            for (int a = 0; a < 3; ++a) ci[a] = (2LL * cells[4 * i + a] + 1) * (1LL << cells[4 * i + 3]);
            for (int j = 0; j < n; ++j) {
                long long d = 0;
                for (int a = 0; a < 3; ++a) {
                    cj[a] = (2LL * cells[4 * j + a] + 1) * (1LL << cells[4 * j + 3]);
                    long long e = cj[a] > ci[a] ? cj[a] - ci[a] : ci[a] - cj[a];
                    if (e > d) d = e;
                }
                want += d <= W;
            }
            pbd_sm_plan_region(p, i, mem, 1200, &cnt);
            bad += cnt != want;
        }
        CHECK_MSG(bad == 0, "t=%d: %d regions differ from the definition", t, bad);
        double e = error_vs_naive(p, 12, 30u + (unsigned)t, 1);
        CHECK_MSG(e <= 1e-5, "t=%d: relative error %g", t, e);
        e = error_vs_naive(p, 3, 40u + (unsigned)t, 0);
        CHECK_MSG(e <= 1e-5, "t=%d signed: error %g", t, e);
        pbd_sm_plan_destroy(p);
    }
    /* a uniform level-0 octree has the lattice's regions */
    int *lc = (int *)malloc(sizeof(int) * 3 * 1200);
    int n = random_lattice(&st, lc, 9, 8, 7, 0.7f);
    for (int i = 0; i < n; ++i) {
        for (int a = 0; a < 3; ++a) cells[4 * i + a] = lc[3 * i + a];
        cells[4 * i + 3] = 0;
    }
    pbd_sm_sum_plan *o = NULL, *l = NULL;
    CHECK_OK(pbd_sm_plan_octree(n, cells, NULL, 2, &o));
    CHECK_OK(pbd_sm_plan_lattice(n, lc, 2, &l));
    if (o && l) {
        int same = 1, *m2 = (int *)malloc(sizeof(int) * 1200);
        for (int i = 0; i < n && same; ++i) {
            int c1 = 0, c2 = 0;
            pbd_sm_plan_region(o, i, mem, 1200, &c1);
            pbd_sm_plan_region(l, i, m2, 1200, &c2);
            same = c1 == c2 && memcmp(mem, m2, sizeof(int) * (size_t)c1) == 0;
        }
        CHECK(same);
        CHECK(error_vs_naive(o, 9, 3, 1) <= 1e-5);
        free(m2);
    }
    pbd_sm_plan_destroy(o);
    pbd_sm_plan_destroy(l);
    free(lc);
    free(cells);
    free(widths);
    free(mem);
}

/* The octree's summed-volume tables: on a random adaptive octree the work
   per region does not grow from w = 1 to w = 5 (8 lookups per leaf level),
   and a sparse octree (one leaf a million cells away: dense tables would
   be huge) falls back to the summation nodes; both equal naive sums over
   their member lists, and the far leaf is a region of its own. */
TEST(sm_sum_octree_tables_and_sparse) {
    unsigned st = 11;
    int *cells = (int *)malloc(sizeof(int) * 4 * 1200), *mem = (int *)malloc(sizeof(int) * 1200);
    int n = random_octree(&st, cells, 4, 1100);
    double cost[2];
    for (int t = 0; t < 2; ++t) {
        pbd_sm_sum_plan *p = NULL;
        CHECK_OK(pbd_sm_plan_octree(n, cells, NULL, t == 0 ? 1 : 5, &p));
        if (!p) continue;
        cost[t] = (double)pbd_sm_plan_cost(p) / n;
        CHECK_MSG(error_vs_naive(p, 12, 7u + (unsigned)t, 1) <= 1e-5, "w=%d", t == 0 ? 1 : 5);
        CHECK(error_vs_naive(p, 5, 9u + (unsigned)t, 0) <= 1e-5);
        pbd_sm_plan_destroy(p);
    }
    CHECK_MSG(cost[1] <= 1.5 * cost[0], "octree cost per region %g (w=1) -> %g (w=5)", cost[0], cost[1]);
    /* sparse */
    cells[4 * n] = 999999;
    cells[4 * n + 1] = 0;
    cells[4 * n + 2] = 0;
    cells[4 * n + 3] = 0;
    pbd_sm_sum_plan *p = NULL;
    CHECK_OK(pbd_sm_plan_octree(n + 1, cells, NULL, 2, &p));
    if (p) {
        int cnt = 0;
        CHECK_OK(pbd_sm_plan_region(p, n, mem, 1200, &cnt));
        CHECK(cnt == 1 && mem[0] == n);
        CHECK(error_vs_naive(p, 12, 13u, 1) <= 1e-5);
        CHECK(error_vs_naive(p, 3, 14u, 0) <= 1e-5);
        pbd_sm_plan_destroy(p);
    }
    free(cells);
    free(mem);
}

/* A grid with a bumpy height, optionally with triangles removed. */
static pbd_mesh bumpy_grid(int nx, int ny, unsigned *st, int holes) {
    float o[3] = {0, 0, 0}, u[3] = {2, 0, 0}, v[3] = {0, 1.5f, 0};
    pbd_mesh m;
    memset(&m, 0, sizeof m);
    if (pbd_mesh_grid(nx, ny, o, u, v, &m) != PBD_OK) return m;
    for (int i = 0; i < m.vertex_count; ++i) m.positions[3 * i + 2] = 0.3f * pbdt_rand(st);
    if (holes) {
        int t2 = 0;
        for (int t = 0; t < m.triangle_count; ++t)
            if (pbdt_rand(st) > 0.15f) {
                for (int a = 0; a < 3; ++a) m.triangles[3 * t2 + a] = m.triangles[3 * t + a];
                t2++;
            }
        m.triangle_count = t2;
    }
    return m;
}

/* Graph distances from vertex s, by a plain edge-list relaxation. */
static void ring_distances(const pbd_mesh *m, int s, int *d) {
    for (int i = 0; i < m->vertex_count; ++i) d[i] = 1 << 20;
    d[s] = 0;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int t = 0; t < m->triangle_count; ++t)
            for (int a = 0; a < 3; ++a) {
                int p = m->triangles[3 * t + a], q = m->triangles[3 * t + (a + 1) % 3];
                if (d[p] + 1 < d[q]) {
                    d[q] = d[p] + 1;
                    changed = 1;
                }
                if (d[q] + 1 < d[p]) {
                    d[p] = d[q] + 1;
                    changed = 1;
                }
            }
    }
}

static int mesh_has_edge(const pbd_mesh *m, int p, int q) {
    for (int t = 0; t < m->triangle_count; ++t)
        for (int a = 0; a < 3; ++a) {
            int x = m->triangles[3 * t + a], y = m->triangles[3 * t + (a + 1) % 3];
            if ((x == p && y == q) || (x == q && y == p)) return 1;
        }
    return 0;
}

/* Paths cover every vertex once along mesh edges, regions are w-rings, and
   prefix-sum region sums equal naive sums. */
TEST(sm_sum_paths_equals_naive) {
    unsigned st = 3;
    for (int t = 0; t < 5; ++t) {
        pbd_mesh m;
        if (t < 3) {
            m = bumpy_grid(t == 2 ? 9 : 16, 12, &st, t == 1);
        } else {
            float c[3] = {0, 0, 0};
            pbd_mesh_sphere(2, c, 1.0f, &m);
        }
        int n = m.vertex_count, w = 1 + t % 4, maxlen = t == 2 ? 5 : 0;
        pbd_sm_sum_plan *p = NULL;
        CHECK_OK(pbd_sm_plan_paths(n, m.positions, m.triangle_count, m.triangles, w, maxlen, &p));
        if (!p) {
            pbd_mesh_free(&m);
            continue;
        }
        CHECK(pbd_sm_plan_method(p) == PBD_SM_SUM_PATHS);
        /* paths: a partition into edge-connected runs */
        int *seen = (int *)calloc((size_t)n, sizeof(int)), *path = (int *)malloc(sizeof(int) * (size_t)n);
        int covered = 0, broken = 0, too_long = 0;
        for (int q = 0; q < pbd_sm_plan_path_count(p); ++q) {
            int cnt = 0;
            pbd_sm_plan_path(p, q, path, n, &cnt);
            too_long += cnt > (maxlen ? maxlen : 512) || cnt < 1;
            for (int e = 0; e < cnt; ++e) {
                covered += seen[path[e]]++ == 0;
                if (e > 0 && !mesh_has_edge(&m, path[e - 1], path[e])) broken++;
            }
        }
        CHECK(covered == n && broken == 0 && too_long == 0);
        for (int i = 0; i < n; ++i) CHECK(seen[i] == 1);
        CHECK(pbd_sm_plan_path_count(p) < n / 2); /* paths, not single vertices */
        /* regions: the w-rings */
        int *d = (int *)malloc(sizeof(int) * (size_t)n), bad = 0;
        for (int i = 0; i < n; i += 3) {
            ring_distances(&m, i, d);
            int cnt = 0, want = 0;
            pbd_sm_plan_region(p, i, path, n, &cnt);
            for (int j = 0; j < n; ++j) want += d[j] <= w;
            for (int e = 0; e < cnt; ++e) bad += d[path[e]] > w;
            bad += cnt != want;
        }
        CHECK_MSG(bad == 0, "mesh %d w=%d: %d wrong regions", t, w, bad);
        double e = error_vs_naive(p, 12, 50u + (unsigned)t, 1);
        CHECK_MSG(e <= 1e-5, "mesh %d w=%d: relative error %g", t, w, e);
        e = error_vs_naive(p, 7, 60u + (unsigned)t, 0);
        CHECK_MSG(e <= 1e-5, "mesh %d w=%d signed: error %g", t, w, e);
        free(seen);
        free(path);
        free(d);
        pbd_sm_plan_destroy(p);
        pbd_mesh_free(&m);
    }
    /* isolated vertices are paths and regions of their own */
    float x[15] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 5, 5, 5, 7, 7, 7};
    int tri[3] = {0, 1, 2};
    double v[5] = {1, 2, 4, 8, 16}, s[5];
    pbd_sm_sum_plan *p = NULL;
    CHECK_OK(pbd_sm_plan_paths(5, x, 1, tri, 1, 0, &p));
    if (p) {
        CHECK_OK(pbd_sm_plan_sum(p, v, 1, s));
        CHECK(s[0] == 7 && s[1] == 7 && s[2] == 7 && s[3] == 8 && s[4] == 16);
    }
    pbd_sm_plan_destroy(p);
}

/* The work per region (pbd_sm_plan_cost) of FastLSM and of the octree's
   summed-volume tables does not grow with w (w = 3 within 1.5x of w = 1
   on a solid block, where naive summation grows like (2w+1)^3); the
   paths' grows like the region's width (w, survey 4.3.3: O(w n)), slower
   than the region size. */
TEST(sm_sum_cost_independent_of_region_size) {
    int N = 16, n = N * N * N;
    int *cells = (int *)malloc(sizeof(int) * 3 * (size_t)n), *oc = (int *)malloc(sizeof(int) * 4 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        cells[3 * i] = oc[4 * i] = i % N;
        cells[3 * i + 1] = oc[4 * i + 1] = (i / N) % N;
        cells[3 * i + 2] = oc[4 * i + 2] = i / (N * N);
        oc[4 * i + 3] = 0;
    }
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 1, 0};
    pbd_mesh m;
    pbd_mesh_grid(64, 64, o, u, v, &m);
    double cost[3][2], naive[3][2];
    for (int t = 0; t < 2; ++t) {
        int w = t == 0 ? 1 : 3;
        pbd_sm_sum_plan *p[3] = {NULL, NULL, NULL};
        CHECK_OK(pbd_sm_plan_lattice(n, cells, w, &p[0]));
        CHECK_OK(pbd_sm_plan_octree(n, oc, NULL, w, &p[1]));
        CHECK_OK(pbd_sm_plan_paths(m.vertex_count, m.positions, m.triangle_count, m.triangles, w, 0, &p[2]));
        for (int q = 0; q < 3; ++q) {
            if (!p[q]) {
                cost[q][t] = naive[q][t] = 1;
                continue;
            }
            int R = pbd_sm_plan_region_count(p[q]), total = 0, cnt = 0;
            for (int r = 0; r < R; ++r) {
                pbd_sm_plan_region(p[q], r, NULL, 0, &cnt);
                total += cnt;
            }
            cost[q][t] = (double)pbd_sm_plan_cost(p[q]) / R;
            naive[q][t] = (double)total / R;
            pbd_sm_plan_destroy(p[q]);
        }
    }
    CHECK_MSG(cost[0][1] <= 1.5 * cost[0][0], "lattice cost per region %g (w=1) %g (w=3)", cost[0][0], cost[0][1]);
    CHECK(cost[0][0] < naive[0][0]); /* cheaper than naive already at w = 1 */
    /* octree: constant; paths: like its width, 7/3 */
    const double grow[3] = {0, 1.5, 1.5 * 7.0 / 3.0};
    for (int q = 1; q < 3; ++q)
        CHECK_MSG(cost[q][1] / cost[q][0] <= grow[q] && cost[q][1] / cost[q][0] < naive[q][1] / naive[q][0],
                  "method %d: cost %g -> %g, naive %g -> %g", q, cost[q][0], cost[q][1], naive[q][0], naive[q][1]);
    pbd_mesh_free(&m);
    free(cells);
    free(oc);
}

/* The same bits for 1 and 2 threads and with SIMD on or off. */
TEST(sm_sum_deterministic) {
    if (!pbdt_parity(PBDT_SIMD_F64, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    unsigned st = 9;
    int *cells = (int *)malloc(sizeof(int) * 3 * 1200), *oc = (int *)malloc(sizeof(int) * 4 * 1200);
    int n = random_lattice(&st, cells, 12, 10, 9, 0.8f);
    int no = random_octree(&st, oc, 4, 1100);
    pbd_mesh m = bumpy_grid(30, 25, &st, 0);
    pbd_sm_sum_plan *p[4] = {NULL, NULL, NULL, NULL};
    CHECK_OK(pbd_sm_plan_lattice(n, cells, 2, &p[0]));
    CHECK_OK(pbd_sm_plan_octree(no, oc, NULL, 2, &p[1]));
    CHECK_OK(pbd_sm_plan_paths(m.vertex_count, m.positions, m.triangle_count, m.triangles, 3, 0, &p[2]));
    if (p[0]) p[3] = naive_twin(p[0]);
    const int K = 13;
    for (int q = 0; q < 4; ++q) {
        if (!p[q]) {
            CHECK(0);
            continue;
        }
        int np = pbd_sm_plan_particle_count(p[q]), R = pbd_sm_plan_region_count(p[q]);
        CHECK(R >= 512); /* big enough for the parallel path */
        double *v = (double *)malloc(sizeof(double) * (size_t)(np * K));
        double *ref = (double *)malloc(sizeof(double) * (size_t)(R * K)),
               *s = (double *)malloc(sizeof(double) * (size_t)(R * K));
        for (int i = 0; i < np * K; ++i) v[i] = 10.0 * pbdt_rand(&st) - 3.0;
        pbd_sm_plan_set_threads(p[q], 1);
        pbd_sm_plan_set_simd(p[q], 0);
        CHECK_OK(pbd_sm_plan_sum(p[q], v, K, ref));
        int cfg[2][2] = {{1, 1}, {2, 1}}; /* SIMD on, then 2 threads too; the team runs below are scalar */
        for (int c = 0; c < 2; ++c) {
            pbd_sm_plan_set_threads(p[q], cfg[c][0]);
            pbd_sm_plan_set_simd(p[q], cfg[c][1]);
            CHECK_OK(pbd_sm_plan_sum(p[q], v, K, s));
            CHECK_MSG(memcmp(ref, s, sizeof(double) * (size_t)(R * K)) == 0, "plan %d threads %d simd %d", q, cfg[c][0],
                      cfg[c][1]);
        }
        /* shared by the threads of an enclosing team (a parallel plugin), and
           called from one thread inside a team (no nested team) */
        pbd_sm_plan_set_simd(p[q], 0);
        memset(s, 0, sizeof(double) * (size_t)(R * K));
        pbd_result team_res[2] = {PBD_OK, PBD_OK};
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
#endif
        {
            pbd_result res = pbd_sm_plan_sum_team(p[q], v, K, s);
            if (res != PBD_OK) team_res[0] = res;
        }
        CHECK(team_res[0] == PBD_OK && memcmp(ref, s, sizeof(double) * (size_t)(R * K)) == 0);
        memset(s, 0, sizeof(double) * (size_t)(R * K));
        pbd_sm_plan_set_threads(p[q], 2);
#ifdef _OPENMP
#pragma omp parallel num_threads(2)
#endif
        {
#ifdef _OPENMP
#pragma omp master
#endif
            team_res[1] = pbd_sm_plan_sum(p[q], v, K, s);
        }
        CHECK(team_res[1] == PBD_OK && memcmp(ref, s, sizeof(double) * (size_t)(R * K)) == 0);
        free(v);
        free(ref);
        free(s);
        pbd_sm_plan_destroy(p[q]);
    }
    pbd_mesh_free(&m);
    free(cells);
    free(oc);
}

/* Every bad input gets its error, leaves *out and the sums as they were. */
TEST(sm_sum_bad_input) {
    pbd_sm_sum_plan *sentinel = (pbd_sm_sum_plan *)(void *)&sentinel, *p = sentinel;
    int cells[9] = {0, 0, 0, 1, 0, 0, 0, 1, 0};
    int dup[6] = {2, 3, 4, 2, 3, 4};
    int far[3] = {0, 1000001, 0};
    /* lattice */
    CHECK_ERROR(pbd_sm_plan_lattice(3, cells, 1, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK_ERROR(pbd_sm_plan_lattice(3, NULL, 1, &p), PBD_ERROR_NULL_POINTER, "cells is NULL while particle_count is 3");
    CHECK_ERROR(pbd_sm_plan_lattice(3, cells, 0, &p), PBD_ERROR_INVALID_ARGUMENT,
                "pbd_sm_plan_lattice: region half-width w 0 must be in 1..64");
    CHECK_ERROR(pbd_sm_plan_lattice(3, cells, 65, &p), PBD_ERROR_INVALID_ARGUMENT, "w 65 must be in 1..64");
    CHECK_ERROR(pbd_sm_plan_lattice(-1, cells, 1, &p), PBD_ERROR_INVALID_ARGUMENT, "particle_count -1 must be >= 0");
    CHECK_ERROR(pbd_sm_plan_lattice(2, dup, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                "particles 0 and 1 are in one lattice cell");
    CHECK_ERROR(pbd_sm_plan_lattice(1, far, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                "cells[1] = 1000001 is outside [-1000000, 1000000]");
    {
        int n = 130000; /* n (2w+1)^2 candidate bars > INT_MAX */
        int *big = (int *)calloc((size_t)n * 3, sizeof(int));
        for (int i = 0; i < n; ++i) big[3 * i] = i;
        CHECK_ERROR(pbd_sm_plan_lattice(n, big, 64, &p), PBD_ERROR_OVERFLOW,
                    "need more than 2147483647 candidate bars");
        free(big);
    }
    CHECK(p == sentinel);
    /* octree */
    int oc[8] = {0, 0, 0, 1, 2, 0, 0, 1};
    int overlap[8] = {0, 0, 0, 2, 1, 1, 1, 0}; /* the level-0 cell lies inside the level-2 cell */
    int odup[8] = {0, 0, 0, 1, 0, 0, 0, 1};
    int olev[4] = {0, 0, 0, PBD_SM_OCTREE_MAX_LEVEL + 1}, oneg[4] = {0, 0, 0, -1};
    int obig[4] = {70000, 0, 0, 4}; /* 70000 * 16 > 1e6 finest cells */
    int wbad[2] = {1, 0};
    CHECK_ERROR(pbd_sm_plan_octree(2, oc, NULL, 1, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK_ERROR(pbd_sm_plan_octree(2, NULL, NULL, 1, &p), PBD_ERROR_NULL_POINTER, "cells is NULL");
    CHECK_ERROR(pbd_sm_plan_octree(2, oc, NULL, 0, &p), PBD_ERROR_INVALID_ARGUMENT, "w 0");
    CHECK_ERROR(pbd_sm_plan_octree(2, oc, NULL, 65, &p), PBD_ERROR_INVALID_ARGUMENT, "w 65");
    CHECK_ERROR(pbd_sm_plan_octree(2, oc, wbad, 1, &p), PBD_ERROR_INVALID_ARGUMENT, "widths[1] = 0 outside 1..64");
    CHECK_ERROR(pbd_sm_plan_octree(2, overlap, NULL, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                "the cell of particle 0 (level 2 at 0, 0, 0) holds the cell of another particle");
    CHECK_ERROR(pbd_sm_plan_octree(2, odup, NULL, 1, &p), PBD_ERROR_INVALID_ARGUMENT,
                "particles 0 and 1 are in one octree cell");
    CHECK_ERROR(pbd_sm_plan_octree(1, olev, NULL, 1, &p), PBD_ERROR_INVALID_ARGUMENT, "l 17");
    CHECK_ERROR(pbd_sm_plan_octree(1, oneg, NULL, 1, &p), PBD_ERROR_INVALID_ARGUMENT, "l -1");
    CHECK_ERROR(pbd_sm_plan_octree(1, obig, NULL, 1, &p), PBD_ERROR_OVERFLOW,
                "spans finest cells 1120000..1120015, outside [-1000000, 1000000]");
    CHECK(p == sentinel);
    /* paths */
    float x[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0};
    int tri[6] = {0, 1, 2, 1, 3, 2};
    int oob[3] = {0, 1, 4}, rep[3] = {0, 1, 1};
    float line[9] = {0, 0, 0, 1, 0, 0, 2, 0, 0};
    int nm[9] = {0, 1, 2, 0, 1, 3, 1, 0, 4}; /* edge 0-1 in three triangles */
    float x5[15] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, -1, 0.5f};
    int twice[6] = {0, 1, 2, 2, 1, 0};
    float xnan[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0};
    xnan[4] = NAN;
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 2, tri, 1, 0, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    CHECK_ERROR(pbd_sm_plan_paths(4, NULL, 2, tri, 1, 0, &p), PBD_ERROR_NULL_POINTER, "positions is NULL");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 2, NULL, 1, 0, &p), PBD_ERROR_NULL_POINTER, "triangles is NULL");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 2, tri, 0, 0, &p), PBD_ERROR_INVALID_ARGUMENT,
                "pbd_sm_plan_paths: region half-width w 0 must be in 1..64");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 2, tri, 65, 0, &p), PBD_ERROR_INVALID_ARGUMENT, "w 65 must be in 1..64");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 2, tri, 1, -1, &p), PBD_ERROR_INVALID_ARGUMENT,
                "max_path_length -1 must be >= 0");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, -1, tri, 1, 0, &p), PBD_ERROR_INVALID_ARGUMENT,
                "triangle_count -1 must be >= 0");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 1, oob, 1, 0, &p), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "triangle 0 names vertex 4, outside 0..3");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 1, rep, 1, 0, &p), PBD_ERROR_DEGENERATE, "triangle 0 repeats vertex 1");
    CHECK_ERROR(pbd_sm_plan_paths(3, line, 1, tri, 1, 0, &p), PBD_ERROR_DEGENERATE,
                "is degenerate: zero area or a zero angle");
    CHECK_ERROR(pbd_sm_plan_paths(5, x5, 3, nm, 1, 0, &p), PBD_ERROR_INVALID_ARGUMENT,
                "three triangles share edge (0, 1)");
    CHECK_ERROR(pbd_sm_plan_paths(4, x, 2, twice, 1, 0, &p), PBD_ERROR_INVALID_ARGUMENT,
                "a triangle appears twice (vertices 0,");
    CHECK_ERROR(pbd_sm_plan_paths(4, xnan, 2, tri, 1, 0, &p), PBD_ERROR_NOT_FINITE, "positions[4] = nan is not finite");
    CHECK(p == sentinel);
    /* sums, regions, paths, settings */
    p = NULL;
    CHECK_OK(pbd_sm_plan_paths(4, x, 2, tri, 1, 0, &p));
    if (p) {
        double v[4] = {1, 2, 3, 4}, s[4] = {-7, -7, -7, -7};
        int cnt = -5, buf[4];
        CHECK_ERROR(pbd_sm_plan_sum(p, NULL, 1, s), PBD_ERROR_NULL_POINTER, "values is NULL");
        CHECK_ERROR(pbd_sm_plan_sum(p, v, 1, NULL), PBD_ERROR_NULL_POINTER, "sums is NULL");
        CHECK_ERROR(pbd_sm_plan_sum(p, v, 0, s), PBD_ERROR_INVALID_ARGUMENT, "k 0");
        CHECK_ERROR(pbd_sm_plan_sum(p, v, 65, s), PBD_ERROR_INVALID_ARGUMENT, "k 65");
        CHECK(s[0] == -7 && s[3] == -7);
        CHECK_ERROR(pbd_sm_plan_region(p, 4, buf, 4, &cnt), PBD_ERROR_INDEX_OUT_OF_RANGE, "region 4 outside 0..3");
        CHECK_ERROR(pbd_sm_plan_region(p, -1, buf, 4, &cnt), PBD_ERROR_INDEX_OUT_OF_RANGE, "region -1 outside 0..3");
        CHECK_ERROR(pbd_sm_plan_path(p, pbd_sm_plan_path_count(p), buf, 4, &cnt), PBD_ERROR_INDEX_OUT_OF_RANGE,
                    "path 1");
        CHECK_ERROR(pbd_sm_plan_path(p, 0, NULL, 4, &cnt), PBD_ERROR_NULL_POINTER, "vertices is NULL");
        CHECK(cnt == -5);
        CHECK_ERROR(pbd_sm_plan_set_threads(p, -1), PBD_ERROR_INVALID_ARGUMENT, "threads -1");
        CHECK_ERROR(pbd_sm_plan_set_threads(NULL, 1), PBD_ERROR_NULL_POINTER, "p is NULL");
        CHECK_ERROR(pbd_sm_plan_set_simd(NULL, 1), PBD_ERROR_NULL_POINTER, "p is NULL");
        /* a switch (pbd.h CONVENTIONS): 2 and -1 were taken as on */
        CHECK_ERROR(pbd_sm_plan_set_simd(p, 2), PBD_ERROR_INVALID_ARGUMENT,
                    "pbd_sm_plan_set_simd: on 2 must be 0 or 1");
        CHECK_ERROR(pbd_sm_plan_set_simd(p, -1), PBD_ERROR_INVALID_ARGUMENT, "on -1 must be 0 or 1");
        CHECK_OK(pbd_sm_plan_set_simd(p, 0));
        CHECK_OK(pbd_sm_plan_set_simd(p, 1));
        /* every vertex of two triangles sharing an edge: 1-rings */
        CHECK_OK(pbd_sm_plan_sum(p, v, 1, s));
        CHECK(s[0] == 6 && s[1] == 10 && s[2] == 10 && s[3] == 9);
        pbd_sm_sum_plan *l = NULL;
        CHECK_OK(pbd_sm_plan_lattice(3, cells, 1, &l));
        CHECK_ERROR(pbd_sm_plan_path(l, 0, buf, 4, &cnt), PBD_ERROR_INVALID_ARGUMENT, "the plan is not a paths plan");
        CHECK(pbd_sm_plan_path_count(l) == 0);
        pbd_sm_plan_destroy(l);
    }
    pbd_sm_plan_destroy(p);
    pbd_sm_plan_destroy(NULL);
}

void suite_sm_sum(void) {
    RUN(sm_sum_lattice_equals_naive);
    RUN(sm_sum_octree_equals_naive);
    RUN(sm_sum_octree_tables_and_sparse);
    RUN(sm_sum_paths_equals_naive);
    RUN(sm_sum_cost_independent_of_region_size);
    RUN(sm_sum_deterministic);
    RUN(sm_sum_bad_input);
}
