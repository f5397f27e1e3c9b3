/* pbd_sm.h - v0.1 - shape matching for pbd.h: clusters, regions with fast
   summation, plasticity, oriented particles, surface volume conservation.

   MANUAL
   ======
   Include pbd.h's implementation somewhere, and in *one* C or C++ file:

       #define PBD_SM_IMPLEMENTATION
       #include "pbd_sm.h"

   Every other file includes "pbd_sm.h" alone. pbd_sm.h plugs into a
   pbd_world through pbd.h's plugin table (pbd.h section "plugins"), so
   pbd.h does not depend on it. Compile it with the same OpenMP setting as
   pbd.h.

   The method reference is section 4 of Bender et al. 2017, "A survey on
   position based dynamics" (equations in LaTeX in Bender et al. 2013,
   "Position-based methods for the simulation of solid objects in computer
   graphics").

   CONTENTS (declarations and implementation in this order; search for
   "// ==== <name>")
       ==== config          macros, OpenMP
       ==== rotation        robust rotation extraction (Mueller et al. 2016)
       ==== summation       region sums: naive, lattice, octree, paths
                            (survey 4.3)
       ==== shape matching  clusters and regions, linear/quadratic modes,
                            plasticity (survey 4.1, 4.2, 4.5.2)
       ==== oriented        oriented particles (survey 4.4)
       ==== surface volume  volume conservation of surface meshes (4.5.1)

   LICENSE: MIT or public domain (your choice), see pbd.h.
*/
#ifndef PBD_SM_H_INCLUDED
#define PBD_SM_H_INCLUDED

#include "pbd.h"

#ifdef PBD_STATIC
#define PBD_SM_DEF static
#else
#define PBD_SM_DEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ==== config ================================================================

// ==== rotation ==============================================================
/* The rotation R of the polar decomposition A = R S of a 3x3 matrix
   (row-major, A[3*row + col]), found by the iterative method of Mueller,
   Bender, Chentanez and Macklin 2016 ("A robust method to extract the
   rotational part of deformations"): q is the warm start on input (use the
   previous step's rotation, or identity) and the result on output, a unit
   quaternion x y z w. It never fails: flat, collinear, zero and inverted
   matrices give a valid rotation (for those, the one nearest the warm
   start). iterations (1..100) is a maximum, the loop stops when the update
   vanishes: from the previous step's rotation a few suffice; from a cold
   start 60 reach double precision for any rotation, 180 degree turns
   included. */
PBD_SM_DEF void pbd_sm_extract_rotation(const float *A, float *q, int iterations);
/* The same in double precision. */
PBD_SM_DEF void pbd_sm_extract_rotation_d(const double *A, double *q, int iterations);

// ==== summation =============================================================
/* A summation plan computes, for every region r, the sums over the
   region's particles of k values per particle (survey 4.3). Every method
   gives the same sums as naive summation up to rounding; the fast ones in
   a time per region that does not depend on the region size. */
typedef struct pbd_sm_sum_plan pbd_sm_sum_plan;

typedef enum pbd_sm_summation {
    PBD_SM_SUM_NAIVE = 0,   /* explicit member lists */
    PBD_SM_SUM_LATTICE = 1, /* bars, plates, cubes (Rivers and James 2007, FastLSM) */
    PBD_SM_SUM_OCTREE = 2,  /* adaptive octree lattice (Steinemann et al. 2008) */
    PBD_SM_SUM_PATHS = 3    /* prefix sums along mesh paths (Diziol et al. 2011) */
} pbd_sm_summation;

/* Regions as index lists (CSR): region r holds the particles
   region_particles[region_start[r] .. region_start[r + 1]), each in
   [0, particle_count), no duplicates within a region. */
PBD_SM_DEF pbd_result pbd_sm_plan_naive(int particle_count, int region_count, const int *region_start,
                                        const int *region_particles, pbd_sm_sum_plan **out);
/* A lattice: particle i occupies the integer cell cells[3i .. 3i+2] (at
   most one particle per cell). One region per particle: the particles in
   the cells within Chebyshev distance w (>= 1) of its own cell. */
PBD_SM_DEF pbd_result pbd_sm_plan_lattice(int particle_count, const int *cells, int w,
                                          pbd_sm_sum_plan **out);
PBD_SM_DEF void pbd_sm_plan_destroy(pbd_sm_sum_plan *plan);
PBD_SM_DEF pbd_sm_summation pbd_sm_plan_method(const pbd_sm_sum_plan *plan);
PBD_SM_DEF int pbd_sm_plan_particle_count(const pbd_sm_sum_plan *plan);
PBD_SM_DEF int pbd_sm_plan_region_count(const pbd_sm_sum_plan *plan);
/* The members of region r (the same for every method): writes at most max
   indices, *count receives the region size. */
PBD_SM_DEF pbd_result pbd_sm_plan_region(const pbd_sm_sum_plan *plan, int r, int *particles, int max,
                                         int *count);
/* sums[r*k + j] = sum over the particles i of region r of values[i*k + j].
   k in 1..64. Thread-safe for one plan from one thread at a time. */
PBD_SM_DEF pbd_result pbd_sm_plan_sum(pbd_sm_sum_plan *plan, const double *values, int k, double *sums);

// ==== shape matching ========================================================

// ==== oriented ==============================================================

// ==== surface volume ========================================================

#ifdef __cplusplus
}
#endif
#endif /* PBD_SM_H_INCLUDED */

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#ifdef PBD_SM_IMPLEMENTATION
#ifndef PBD_SM_IMPLEMENTATION_INCLUDED
#define PBD_SM_IMPLEMENTATION_INCLUDED

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ==== config ================================================================

#if defined(_OPENMP) && !defined(PBD_NO_OPENMP)
#include <omp.h>
#define PBD_SM__OPENMP 1
#else
#define PBD_SM__OPENMP 0
#endif
#if PBD_SM__OPENMP
#define PBD_SM__STR(x) #x
#define PBD_SM__PRAGMA(x) _Pragma(PBD_SM__STR(x))
#else
#define PBD_SM__PRAGMA(x)
#endif
#ifndef PBD_SM_MALLOC
#define PBD_SM_MALLOC(sz) malloc(sz)
#define PBD_SM_FREE(p) free(p)
#endif

// ==== rotation ==============================================================

static void pbd_sm__quat_to_mat(const double *q, double *R) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - z * w);     R[2] = 2 * (x * z + y * w);
    R[3] = 2 * (x * y + z * w);     R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - x * w);
    R[6] = 2 * (x * z - y * w);     R[7] = 2 * (y * z + x * w);     R[8] = 1 - 2 * (x * x + y * y);
}

/* a = a * b (Hamilton product, x y z w), normalised. */
static void pbd_sm__quat_mul_into(double *a, const double *b, int b_on_left) {
    const double *l = b_on_left ? b : a, *r = b_on_left ? a : b;
    double o[4] = {l[3] * r[0] + l[0] * r[3] + l[1] * r[2] - l[2] * r[1],
                   l[3] * r[1] - l[0] * r[2] + l[1] * r[3] + l[2] * r[0],
                   l[3] * r[2] + l[0] * r[1] - l[1] * r[0] + l[2] * r[3],
                   l[3] * r[3] - l[0] * r[0] - l[1] * r[1] - l[2] * r[2]};
    double n = sqrt(o[0] * o[0] + o[1] * o[1] + o[2] * o[2] + o[3] * o[3]);
    for (int k = 0; k < 4; ++k) a[k] = o[k] / n;
}

/* Mueller et al. 2016: each iteration turns q by
   omega = sum_i r_i x a_i / (|sum_i r_i . a_i| + eps) (r_i, a_i the
   columns of R(q) and A), which climbs tr(R^T A); it converges to the polar
   rotation where A has full rank and stays put where A does not constrain
   it. Its fixed points also include saddles (A a 180 degree turn of the
   start, whose gradient vanishes); there S = R^T A has two diagonal
   entries with a negative sum, and a half turn about the third axis
   raises tr(R^T A) by -2 (S_ii + S_jj), so we take it and iterate on.
   Checking this before iterating too picks the best of the start and its
   three half turns, which is within 120 degrees of the answer. */
PBD_SM_DEF void pbd_sm_extract_rotation_d(const double *A, double *q, int iterations) {
    double n0 = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (!(n0 > 1e-12) || !(n0 < 1e30)) { q[0] = q[1] = q[2] = 0; q[3] = 1; n0 = 1; }
    for (int k = 0; k < 4; ++k) q[k] /= n0;
    double scale = 0;
    for (int k = 0; k < 9; ++k) {
        if (!(A[k] == A[k]) || fabs(A[k]) > 1e30) return; /* NaN or huge: keep the warm start */
        if (fabs(A[k]) > scale) scale = fabs(A[k]);
    }
    if (!(scale > 0)) return;
    if (iterations < 1) iterations = 1;
    if (iterations > 100) iterations = 100;
    for (int round = 0; round < 4; ++round) {
        double R[9], d[3];
        pbd_sm__quat_to_mat(q, R);
        for (int c = 0; c < 3; ++c) d[c] = (R[c] * A[c] + R[3 + c] * A[3 + c] + R[6 + c] * A[6 + c]) / scale;
        int axis = -1;
        double worst = -1e-6;
        for (int k = 0; k < 3; ++k) {
            double pair = d[(k + 1) % 3] + d[(k + 2) % 3];
            if (pair < worst) { worst = pair; axis = k; }
        }
        if (axis >= 0) {
            double flip[4] = {0, 0, 0, 0};
            flip[axis] = 1; /* a half turn about the local axis */
            pbd_sm__quat_mul_into(q, flip, 0);
        } else if (round > 0) {
            return; /* converged and no half turn gains: the maximum */
        }
        for (int it = 0; it < iterations; ++it) {
            pbd_sm__quat_to_mat(q, R);
            double om[3] = {0, 0, 0}, dot = 0;
            for (int c = 0; c < 3; ++c) {
                double r0 = R[c], r1 = R[3 + c], r2 = R[6 + c];
                double a0 = A[c] / scale, a1 = A[3 + c] / scale, a2 = A[6 + c] / scale;
                om[0] += r1 * a2 - r2 * a1;
                om[1] += r2 * a0 - r0 * a2;
                om[2] += r0 * a1 - r1 * a0;
                dot += r0 * a0 + r1 * a1 + r2 * a2;
            }
            double s = 1.0 / (fabs(dot) + 1e-9);
            om[0] *= s; om[1] *= s; om[2] *= s;
            double ang = sqrt(om[0] * om[0] + om[1] * om[1] + om[2] * om[2]);
            if (!(ang > 1e-12)) break;
            double sh = sin(ang * 0.5) / ang;
            double dq[4] = {om[0] * sh, om[1] * sh, om[2] * sh, cos(ang * 0.5)};
            pbd_sm__quat_mul_into(q, dq, 1);
        }
    }
}

PBD_SM_DEF void pbd_sm_extract_rotation(const float *A, float *q, int iterations) {
    double Ad[9], qd[4];
    for (int k = 0; k < 9; ++k) Ad[k] = A[k];
    for (int k = 0; k < 4; ++k) qd[k] = q[k];
    pbd_sm_extract_rotation_d(Ad, qd, iterations);
    for (int k = 0; k < 4; ++k) q[k] = (float)qd[k];
}

// ==== summation =============================================================

/* Every plan keeps the region membership as CSR lists (the definition of
   the regions, used by naive summation and to answer pbd_sm_plan_region);
   a fast method adds its own data in `impl` and its own `sum`. */
struct pbd_sm_sum_plan {
    pbd_sm_summation method;
    int particle_count, region_count;
    int *region_start;     /* region_count + 1 */
    int *region_particles; /* region_start[region_count] */
    void *impl;
    void (*impl_destroy)(void *impl);
    pbd_result (*sum)(pbd_sm_sum_plan *plan, const double *values, int k, double *sums);
};

static void *pbd_sm__alloc_n(size_t n, size_t elem) {
    if (elem && n > SIZE_MAX / elem) return NULL;
    return PBD_SM_MALLOC(n * elem > 0 ? n * elem : 1);
}

/* Validates CSR region lists: sizes, ranges, no duplicate within a region
   (checked with a per-particle stamp, O(total)). */
static pbd_result pbd_sm__check_regions(int particle_count, int region_count, const int *start,
                                        const int *members) {
    if (!start || (region_count > 0 && !members)) return PBD_ERROR_NULL_POINTER;
    if (particle_count < 0 || region_count < 0) return PBD_ERROR_INVALID_ARGUMENT;
    if (start[0] != 0) return PBD_ERROR_INVALID_ARGUMENT;
    for (int r = 0; r < region_count; ++r)
        if (start[r + 1] < start[r]) return PBD_ERROR_INVALID_ARGUMENT;
    int *stamp = (int *)pbd_sm__alloc_n((size_t)particle_count, sizeof(int));
    if (!stamp) return PBD_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < particle_count; ++i) stamp[i] = -1;
    pbd_result res = PBD_OK;
    for (int r = 0; r < region_count && res == PBD_OK; ++r)
        for (int e = start[r]; e < start[r + 1]; ++e) {
            int i = members[e];
            if (i < 0 || i >= particle_count) { res = PBD_ERROR_INDEX_OUT_OF_RANGE; break; }
            if (stamp[i] == r) { res = PBD_ERROR_INVALID_ARGUMENT; break; }
            stamp[i] = r;
        }
    PBD_SM_FREE(stamp);
    return res;
}

static pbd_result pbd_sm__sum_naive(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    int R = p->region_count;
    PBD_SM__PRAGMA(omp parallel for schedule(static) if (R > 4096))
    for (int r = 0; r < R; ++r) {
        double *s = sums + (size_t)r * k;
        for (int j = 0; j < k; ++j) s[j] = 0;
        for (int e = p->region_start[r]; e < p->region_start[r + 1]; ++e) {
            const double *v = values + (size_t)p->region_particles[e] * k;
            for (int j = 0; j < k; ++j) s[j] += v[j];
        }
    }
    return PBD_OK;
}

/* A plan holding a copy of the CSR lists, summed naively until a method
   replaces `sum`. */
static pbd_result pbd_sm__plan_from_lists(int particle_count, int region_count, const int *start,
                                          const int *members, pbd_sm_sum_plan **out) {
    pbd_sm_sum_plan *p = (pbd_sm_sum_plan *)pbd_sm__alloc_n(1, sizeof *p);
    if (!p) return PBD_ERROR_OUT_OF_MEMORY;
    memset(p, 0, sizeof *p);
    int total = start[region_count];
    p->region_start = (int *)pbd_sm__alloc_n((size_t)region_count + 1, sizeof(int));
    p->region_particles = (int *)pbd_sm__alloc_n((size_t)total, sizeof(int));
    if (!p->region_start || !p->region_particles) {
        pbd_sm_plan_destroy(p);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    memcpy(p->region_start, start, sizeof(int) * ((size_t)region_count + 1));
    if (total) memcpy(p->region_particles, members, sizeof(int) * (size_t)total);
    p->method = PBD_SM_SUM_NAIVE;
    p->particle_count = particle_count;
    p->region_count = region_count;
    p->sum = pbd_sm__sum_naive;
    *out = p;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_naive(int particle_count, int region_count, const int *region_start,
                                        const int *region_particles, pbd_sm_sum_plan **out) {
    if (!out) return PBD_ERROR_NULL_POINTER;
    pbd_result r = pbd_sm__check_regions(particle_count, region_count, region_start, region_particles);
    if (r != PBD_OK) return r;
    return pbd_sm__plan_from_lists(particle_count, region_count, region_start, region_particles, out);
}

/* Lattice regions (survey 4.2, Rivers and James 2007): particle i in cell
   c_i; its region holds the particles whose cells are within Chebyshev
   distance w of c_i, listed in increasing particle index. Cells are looked
   up in a sorted key array (no hash collisions, deterministic). */
typedef struct pbd_sm__cell_key { long long key; int particle; } pbd_sm__cell_key;

static long long pbd_sm__cell_code(int x, int y, int z) {
    /* 21 bits per axis, offset so that negative cells sort too */
    return ((long long)(x + (1 << 20)) << 42) | ((long long)(y + (1 << 20)) << 21) | (long long)(z + (1 << 20));
}
static int pbd_sm__cmp_cell_key(const void *a, const void *b) {
    long long ka = ((const pbd_sm__cell_key *)a)->key, kb = ((const pbd_sm__cell_key *)b)->key;
    return ka < kb ? -1 : ka > kb;
}
static int pbd_sm__cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}
static int pbd_sm__find_cell(const pbd_sm__cell_key *keys, int n, long long key) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (keys[mid].key < key) lo = mid + 1;
        else if (keys[mid].key > key) hi = mid - 1;
        else return keys[mid].particle;
    }
    return -1;
}

/* Builds the CSR lists of the lattice regions; *start and *members are
   allocated with PBD_SM_MALLOC. */
static pbd_result pbd_sm__lattice_lists(int n, const int *cells, int w, int **start_out, int **members_out) {
    if (!cells && n > 0) return PBD_ERROR_NULL_POINTER;
    if (n < 0 || w < 1 || w > 64) return PBD_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < 3 * n; ++i)
        if (cells[i] < -(1 << 20) + 64 || cells[i] > (1 << 20) - 64) return PBD_ERROR_INVALID_ARGUMENT;
    pbd_sm__cell_key *keys = (pbd_sm__cell_key *)pbd_sm__alloc_n((size_t)n, sizeof *keys);
    int *start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    if (!keys || !start) { PBD_SM_FREE(keys); PBD_SM_FREE(start); return PBD_ERROR_OUT_OF_MEMORY; }
    for (int i = 0; i < n; ++i) {
        keys[i].key = pbd_sm__cell_code(cells[3 * i], cells[3 * i + 1], cells[3 * i + 2]);
        keys[i].particle = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, pbd_sm__cmp_cell_key);
    for (int i = 1; i < n; ++i)
        if (keys[i].key == keys[i - 1].key) { PBD_SM_FREE(keys); PBD_SM_FREE(start); return PBD_ERROR_INVALID_ARGUMENT; }
    /* two passes: count, then fill */
    int *members = NULL;
    for (int pass = 0; pass < 2; ++pass) {
        long total = 0;
        for (int i = 0; i < n; ++i) {
            if (pass == 0) start[i] = (int)total;
            int cnt = 0;
            for (int dx = -w; dx <= w; ++dx)
                for (int dy = -w; dy <= w; ++dy)
                    for (int dz = -w; dz <= w; ++dz) {
                        int j = pbd_sm__find_cell(keys, n, pbd_sm__cell_code(cells[3 * i] + dx, cells[3 * i + 1] + dy,
                                                                               cells[3 * i + 2] + dz));
                        if (j < 0) continue;
                        if (pass == 1) members[start[i] + cnt] = j;
                        cnt++;
                    }
            if (pass == 1) qsort(members + start[i], (size_t)cnt, sizeof(int), pbd_sm__cmp_int);
            total += cnt;
            if (total > INT_MAX) { PBD_SM_FREE(keys); PBD_SM_FREE(start); PBD_SM_FREE(members); return PBD_ERROR_OVERFLOW; }
        }
        if (pass == 0) {
            start[n] = (int)total;
            members = (int *)pbd_sm__alloc_n((size_t)total, sizeof(int));
            if (!members) { PBD_SM_FREE(keys); PBD_SM_FREE(start); return PBD_ERROR_OUT_OF_MEMORY; }
        }
    }
    PBD_SM_FREE(keys);
    *start_out = start;
    *members_out = members;
    return PBD_OK;
}

/* TODO(fast summation): the membership is final; the sums are still naive
   here until the bars/plates/cubes of FastLSM replace plan->sum. */
PBD_SM_DEF pbd_result pbd_sm_plan_lattice(int particle_count, const int *cells, int w, pbd_sm_sum_plan **out) {
    if (!out) return PBD_ERROR_NULL_POINTER;
    int *start = NULL, *members = NULL;
    pbd_result r = pbd_sm__lattice_lists(particle_count, cells, w, &start, &members);
    if (r != PBD_OK) return r;
    r = pbd_sm__plan_from_lists(particle_count, particle_count, start, members, out);
    PBD_SM_FREE(start);
    PBD_SM_FREE(members);
    if (r == PBD_OK) (*out)->method = PBD_SM_SUM_LATTICE;
    return r;
}

PBD_SM_DEF void pbd_sm_plan_destroy(pbd_sm_sum_plan *p) {
    if (!p) return;
    if (p->impl_destroy) p->impl_destroy(p->impl);
    PBD_SM_FREE(p->region_start);
    PBD_SM_FREE(p->region_particles);
    PBD_SM_FREE(p);
}

PBD_SM_DEF pbd_sm_summation pbd_sm_plan_method(const pbd_sm_sum_plan *p) { return p ? p->method : PBD_SM_SUM_NAIVE; }
PBD_SM_DEF int pbd_sm_plan_particle_count(const pbd_sm_sum_plan *p) { return p ? p->particle_count : 0; }
PBD_SM_DEF int pbd_sm_plan_region_count(const pbd_sm_sum_plan *p) { return p ? p->region_count : 0; }

PBD_SM_DEF pbd_result pbd_sm_plan_region(const pbd_sm_sum_plan *p, int r, int *particles, int max, int *count) {
    if (!p || !count || (max > 0 && !particles)) return PBD_ERROR_NULL_POINTER;
    if (r < 0 || r >= p->region_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (max < 0) return PBD_ERROR_INVALID_ARGUMENT;
    int b = p->region_start[r], n = p->region_start[r + 1] - b;
    for (int e = 0; e < n && e < max; ++e) particles[e] = p->region_particles[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_sum(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    if (!p || !sums || (p->particle_count > 0 && !values)) return PBD_ERROR_NULL_POINTER;
    if (k < 1 || k > 64) return PBD_ERROR_INVALID_ARGUMENT;
    return p->sum(p, values, k, sums);
}

// ==== shape matching ========================================================

// ==== oriented ==============================================================

// ==== surface volume ========================================================

#endif /* PBD_SM_IMPLEMENTATION_INCLUDED */
#endif /* PBD_SM_IMPLEMENTATION */
