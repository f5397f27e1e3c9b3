/* pbd_sm.h - v0.1 - shape matching for pbd.h: clusters, regions with fast
   summation, plasticity, oriented particles, surface volume conservation,
   multi-resolution shape-matching cloth.

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
       ==== multires cloth  multi-resolution shape-matching cloth (Bender,
                            Weber and Diziol 2013)

   MULTI-RESOLUTION CLOTH (Bender, Weber and Diziol 2013)
   ----------------------
       pbd_world_desc wd = pbd_world_desc_default();
       wd.substeps = 1; wd.iterations = 1;         // one V-cycle per step, as in the paper
       pbd_world *w; pbd_world_create(&wd, &w);
       pbd_sm_cloth_desc d = pbd_sm_cloth_desc_default();
       d.positions = verts; d.vertex_count = nv;    // any manifold triangle mesh
       d.triangles = tris;  d.triangle_count = nt;
       d.levels = 5;                                // hierarchy by half-edge collapses
       int corners[2] = {0, 99};
       d.keep_vertices = corners; d.keep_count = 2; // vertices you will pin stay on every level
       pbd_sm_cloth *cloth; pbd_range r;
       pbd_sm_add_cloth(w, &d, &cloth, &r);
       pbd_pin(w, r.first + 0); pbd_pin(w, r.first + 99);
       for (...) pbd_world_step(w, 0.005f);     // colliders and friction: the world's
   The cloth's stiffness grows with the levels and as the step shrinks
   (the paper's figure 7 and table 3; bench/multires.c --repro reproduces
   them). Build with -fno-math-errno (no result changes) so that the
   compiler can vectorise the shape-matching kernels.

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

// ==== multires cloth ========================================================
/* Multi-resolution shape-matching cloth: Bender, Weber and Diziol 2013,
   "Fast and stable cloth simulation based on multi-resolution shape
   matching" (the paper's section numbers below).

   The cloth's finest mesh is a set of world particles (masses from the
   triangle areas, eq. 1); the world integrates them (symplectic Euler,
   eq. 2) and handles their contacts with its colliders and friction. The
   cloth plugs in as a plugin: every solver iteration runs one V-cycle
   (section 4.3, Algorithm 2) over a hierarchy of meshes built by
   half-edge-collapse decimation, with 2D shape matching per triangle
   (section 4.1) and 1D shape matching per edge (section 4.2) on every
   level, position differences passed between levels by barycentric
   prolongation and its row-normalised transpose (restriction). Coarse
   levels conserve fine wrinkles (eqs. 16-18). The quadratic bending model
   of Bergou et al. 2006 is an explicit force and damping acts per
   triangle (section 4.4). The paper runs one V-cycle per time step:
   use substeps = 1 and iterations = 1 in the world to reproduce it.

   Stiffness: as in every shape-matching method, it depends on alpha and
   beta, on the time step and on the number of levels (paper section 6);
   more levels and smaller steps give a stiffer cloth. */

typedef enum pbd_sm_cloth_scheme {
    /* per-element goals, then a per-vertex gather in a fixed order (the
       paper's GPU scheme, section 5); Jacobi-like within a pass */
    PBD_SM_CLOTH_TWO_PASS = 0,
    /* elements coloured into independent sets, applied set after set (the
       paper's OpenMP scheme, section 5); Gauss-Seidel-like */
    PBD_SM_CLOTH_INDEPENDENT_SETS = 1
} pbd_sm_cloth_scheme;

typedef struct pbd_sm_cloth_desc {
    const float *positions;   /* vertex_count*3 rest (and initial) positions */
    int vertex_count;
    const int *triangles;     /* triangle_count*3, a manifold mesh, no zero-area triangle */
    int triangle_count;
    const float *initial_positions; /* optional vertex_count*3: start here instead (e.g. a
                                       random or collapsed state); rest shape stays `positions` */
    float density;            /* kg/m^2, eq. 1; default 0.1 */
    int levels;               /* hierarchy levels including the finest, 1..10; default 5 */
    float reduction;          /* fraction of triangles removed per level, 0.05..0.9;
                                 default 0.5 (the paper: about 50%, 25% for its large cloth) */
    int nested;               /* 1 (default): coarse vertices are fine vertices (figure 3a);
                                 0: coarse vertices sit at the centroids of the fine
                                 vertices they replace, so no vertex is shared (figure 3b) */
    float alpha;              /* 2D stiffness, eq. 12, in [0, 1]; default 1 */
    float beta;               /* 1D stiffness, eq. 15, in [0, 1]; 0 turns 1D matching off; default 1 */
    int conserve_wrinkles;    /* eqs. 16-18 on the coarse levels; default 1 */
    float damping;            /* per-triangle damping k_d, eq. 20, in [0, 1]; default 0.05 */
    float bending_stiffness;  /* Bergou et al. bending, N m (energy k/2 x^T Q x); default 1e-4 */
    pbd_sm_cloth_scheme scheme; /* default PBD_SM_CLOTH_TWO_PASS (the faster here, see README) */
    float thickness;          /* particle radius for collisions; default 0.005 */
    const int *keep_vertices; /* optional: vertices every level keeps (e.g. those you pin);
                                 boundary corners are always kept */
    int keep_count;
} pbd_sm_cloth_desc;

typedef struct pbd_sm_cloth pbd_sm_cloth;

PBD_SM_DEF pbd_sm_cloth_desc pbd_sm_cloth_desc_default(void);
/* Adds the particles (one per vertex, in vertex order) and the plugin. The
   cloth belongs to the world: it is freed with it (or pbd_sm_remove_cloth).
   `particles` (optional) receives the particle range. */
PBD_SM_DEF pbd_result pbd_sm_add_cloth(pbd_world *w, const pbd_sm_cloth_desc *desc, pbd_sm_cloth **out,
                                       pbd_range *particles);
PBD_SM_DEF pbd_result pbd_sm_remove_cloth(pbd_world *w, pbd_sm_cloth *cloth);
PBD_SM_DEF pbd_range pbd_sm_cloth_particles(const pbd_sm_cloth *cloth);
/* Hierarchy levels: 0 is the coarsest, level_count - 1 the finest (the
   world's particles). Positions are 4 floats per vertex (x y z inverse-mass)
   as of the last V-cycle; the finest level's are the world's. */
PBD_SM_DEF int pbd_sm_cloth_level_count(const pbd_sm_cloth *cloth);
PBD_SM_DEF pbd_result pbd_sm_cloth_level(const pbd_sm_cloth *cloth, int level, int *vertex_count,
                                         int *triangle_count, const int **triangles,
                                         const float **positions);
/* Parameters that can change between steps (same ranges as the desc). */
PBD_SM_DEF pbd_result pbd_sm_cloth_set_stiffness(pbd_sm_cloth *cloth, float alpha, float beta);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_wrinkle_conservation(pbd_sm_cloth *cloth, int on);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_damping(pbd_sm_cloth *cloth, float damping);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_bending(pbd_sm_cloth *cloth, float bending_stiffness);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_scheme(pbd_sm_cloth *cloth, pbd_sm_cloth_scheme scheme);
/* Strain of the finest mesh at the world's current positions: the mean
   over the edges of the elongation max(l - l0, 0) / l0 (the paper's
   average local strain: a shorter edge is a buckled, not a strained, one)
   and the largest (l - l0) / l0 of an edge. */
PBD_SM_DEF pbd_result pbd_sm_cloth_strain(const pbd_sm_cloth *cloth, const pbd_world *w, float *average,
                                          float *maximum);

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

// ==== multires cloth ========================================================

/* --- mesh helpers (rest geometry) --------------------------------------------- */

static void pbd_sm__sub3(const float *a, const float *b, float *o) { o[0] = a[0] - b[0]; o[1] = a[1] - b[1]; o[2] = a[2] - b[2]; }
static void pbd_sm__cross3(const float *a, const float *b, float *o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}
static float pbd_sm__dot3(const float *a, const float *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static float pbd_sm__len3(const float *a) { return sqrtf(pbd_sm__dot3(a, a)); }

/* Twice the area vector of triangle (a, b, c) of 3-float points. */
static void pbd_sm__tri_normal(const float *a, const float *b, const float *c, float *n) {
    float e1[3], e2[3];
    pbd_sm__sub3(b, a, e1);
    pbd_sm__sub3(c, a, e2);
    pbd_sm__cross3(e1, e2, n);
}

static int pbd_sm__cmp_long(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Undirected edges of a triangle list as sorted keys lo*n + hi; *count
   edges written to *keys (allocated), with the number of triangles of each
   edge in *uses (allocated). */
static pbd_result pbd_sm__edges(int nv, const int *tri, int nt, long long **keys_out, int **uses_out, int *count) {
    long long *k = (long long *)pbd_sm__alloc_n((size_t)nt * 3, sizeof(long long));
    if (!k) return PBD_ERROR_OUT_OF_MEMORY;
    for (int t = 0; t < nt; ++t)
        for (int j = 0; j < 3; ++j) {
            int a = tri[3 * t + j], b = tri[3 * t + (j + 1) % 3];
            int lo = a < b ? a : b, hi = a < b ? b : a;
            k[3 * t + j] = (long long)lo * nv + hi;
        }
    qsort(k, (size_t)nt * 3, sizeof(long long), pbd_sm__cmp_long);
    int *uses = (int *)pbd_sm__alloc_n((size_t)nt * 3, sizeof(int));
    if (!uses) { PBD_SM_FREE(k); return PBD_ERROR_OUT_OF_MEMORY; }
    int n = 0;
    for (int i = 0; i < 3 * nt; ++i) {
        if (n > 0 && k[n - 1] == k[i]) { uses[n - 1]++; continue; }
        k[n] = k[i];
        uses[n] = 1;
        n++;
    }
    *keys_out = k;
    *uses_out = uses;
    *count = n;
    return PBD_OK;
}

/* CSR vertex -> triangles of a triangle list (alive[t] == 0 skipped when
   alive is given). */
static pbd_result pbd_sm__vertex_tris(int nv, const int *tri, int nt, const unsigned char *alive, int **start_out,
                                      int **list_out) {
    int *start = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
    int *list = (int *)pbd_sm__alloc_n((size_t)nt * 3, sizeof(int));
    if (!start || !list) { PBD_SM_FREE(start); PBD_SM_FREE(list); return PBD_ERROR_OUT_OF_MEMORY; }
    memset(start, 0, sizeof(int) * ((size_t)nv + 1));
    for (int t = 0; t < nt; ++t)
        if (!alive || alive[t])
            for (int j = 0; j < 3; ++j) start[tri[3 * t + j] + 1]++;
    for (int v = 0; v < nv; ++v) start[v + 1] += start[v];
    int *fill = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    if (!fill) { PBD_SM_FREE(start); PBD_SM_FREE(list); return PBD_ERROR_OUT_OF_MEMORY; }
    memcpy(fill, start, sizeof(int) * (size_t)nv);
    for (int t = 0; t < nt; ++t)
        if (!alive || alive[t])
            for (int j = 0; j < 3; ++j) list[fill[tri[3 * t + j]]++] = t;
    PBD_SM_FREE(fill);
    *start_out = start;
    *list_out = list;
    return PBD_OK;
}

/* --- decimation by half-edge collapses (paper section 4.3, Kobbelt et al.) --
   Rounds of greedy collapses, shortest edges first; a vertex touched by a
   collapse waits for the next round, so every decision sees exact
   adjacency. A collapse u -> v is taken only when it keeps the mesh a
   manifold (link condition), keeps the boundary a boundary (u on it only
   along a boundary edge), keeps locked vertices, and turns no triangle by
   more than about 70 degrees or to a sliver. rep[u] receives v. */

typedef struct pbd_sm__decimator {
    int nv, nt;
    int *tri;                /* nt*3, rewritten in place */
    unsigned char *alive;    /* per triangle */
    const float *x;          /* rest positions nv*3 */
    const unsigned char *locked;
    unsigned char *boundary; /* per vertex, this round */
    unsigned char *touched;  /* per vertex, this round */
    int *vt_start, *vt_list; /* vertex -> alive triangles, this round */
    long long *bkeys;        /* boundary edges, sorted keys */
    int nbkeys;
    int *rep;
} pbd_sm__decimator;

static int pbd_sm__is_boundary_edge(const pbd_sm__decimator *d, int a, int b) {
    int lo = a < b ? a : b, hi = a < b ? b : a;
    long long key = (long long)lo * d->nv + hi;
    int l = 0, h = d->nbkeys - 1;
    while (l <= h) {
        int m = l + (h - l) / 2;
        if (d->bkeys[m] < key) l = m + 1;
        else if (d->bkeys[m] > key) h = m - 1;
        else return 1;
    }
    return 0;
}

/* Neighbour vertices of u (from its alive triangles), at most max. */
static int pbd_sm__neighbours(const pbd_sm__decimator *d, int u, int *out, int max) {
    int n = 0;
    for (int e = d->vt_start[u]; e < d->vt_start[u + 1]; ++e) {
        int t = d->vt_list[e];
        if (!d->alive[t]) continue;
        for (int j = 0; j < 3; ++j) {
            int v = d->tri[3 * t + j], seen = 0;
            if (v == u) continue;
            for (int k = 0; k < n; ++k) seen |= out[k] == v;
            if (!seen) {
                if (n == max) return -1;
                out[n++] = v;
            }
        }
    }
    return n;
}

static int pbd_sm__can_collapse(const pbd_sm__decimator *d, int u, int v) {
    if (d->locked[u]) return 0;
    int bedge = pbd_sm__is_boundary_edge(d, u, v);
    if (d->boundary[u] && !bedge) return 0;
    enum { MAXN = 48 };
    int nu[MAXN], nv_[MAXN];
    int cu = pbd_sm__neighbours(d, u, nu, MAXN), cv = pbd_sm__neighbours(d, v, nv_, MAXN);
    if (cu < 0 || cv < 0) return 0;
    /* link condition: common neighbours = apexes of the triangles on uv */
    int common = 0, shared = 0;
    for (int i = 0; i < cu; ++i)
        for (int k = 0; k < cv; ++k) common += nu[i] == nv_[k];
    for (int e = d->vt_start[u]; e < d->vt_start[u + 1]; ++e) {
        int t = d->vt_list[e];
        if (!d->alive[t]) continue;
        const int *T = d->tri + 3 * t;
        if (T[0] == v || T[1] == v || T[2] == v) shared++;
    }
    if (shared != (bedge ? 1 : 2) || common != shared) return 0;
    /* geometry: the triangles of u that survive keep their orientation */
    for (int e = d->vt_start[u]; e < d->vt_start[u + 1]; ++e) {
        int t = d->vt_list[e];
        if (!d->alive[t]) continue;
        const int *T = d->tri + 3 * t;
        if (T[0] == v || T[1] == v || T[2] == v) continue;
        float p[3][3], n0[3], n1[3];
        for (int j = 0; j < 3; ++j) memcpy(p[j], d->x + 3 * T[j], sizeof p[j]);
        pbd_sm__tri_normal(p[0], p[1], p[2], n0);
        for (int j = 0; j < 3; ++j)
            if (T[j] == u) memcpy(p[j], d->x + 3 * v, sizeof p[j]);
        pbd_sm__tri_normal(p[0], p[1], p[2], n1);
        float l0 = pbd_sm__len3(n0), l1 = pbd_sm__len3(n1);
        if (!(pbd_sm__dot3(n0, n1) > 0.35f * l0 * l1)) return 0;
        /* no slivers: area against the longest edge squared */
        float e0[3], e1[3], e2[3];
        pbd_sm__sub3(p[1], p[0], e0);
        pbd_sm__sub3(p[2], p[1], e1);
        pbd_sm__sub3(p[0], p[2], e2);
        float lmax = fmaxf(pbd_sm__dot3(e0, e0), fmaxf(pbd_sm__dot3(e1, e1), pbd_sm__dot3(e2, e2)));
        if (!(l1 > 0.1f * lmax)) return 0;
    }
    return 1;
}

static void pbd_sm__collapse(pbd_sm__decimator *d, int u, int v, int *alive_count) {
    for (int e = d->vt_start[u]; e < d->vt_start[u + 1]; ++e) {
        int t = d->vt_list[e];
        if (!d->alive[t]) continue;
        int *T = d->tri + 3 * t;
        if (T[0] == v || T[1] == v || T[2] == v) {
            d->alive[t] = 0;
            (*alive_count)--;
            continue;
        }
        for (int j = 0; j < 3; ++j)
            if (T[j] == u) T[j] = v;
    }
    /* u, v and their 1-rings wait for the next round */
    int ends[2] = {u, v};
    for (int k = 0; k < 2; ++k)
        for (int e = d->vt_start[ends[k]]; e < d->vt_start[ends[k] + 1]; ++e) {
            const int *T = d->tri + 3 * d->vt_list[e];
            d->touched[T[0]] = d->touched[T[1]] = d->touched[T[2]] = 1;
        }
    d->touched[u] = d->touched[v] = 1;
    d->rep[u] = v;
}

typedef struct pbd_sm__edge_len { float len; int a, b; } pbd_sm__edge_len;
static int pbd_sm__cmp_edge_len(const void *pa, const void *pb) {
    const pbd_sm__edge_len *a = (const pbd_sm__edge_len *)pa, *b = (const pbd_sm__edge_len *)pb;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* One round: returns the number of collapses. */
static pbd_result pbd_sm__decimate_round(pbd_sm__decimator *d, int target, int *alive_count, int *collapses) {
    *collapses = 0;
    PBD_SM_FREE(d->vt_start);
    PBD_SM_FREE(d->vt_list);
    d->vt_start = d->vt_list = NULL;
    pbd_result r = pbd_sm__vertex_tris(d->nv, d->tri, d->nt, d->alive, &d->vt_start, &d->vt_list);
    if (r != PBD_OK) return r;
    /* the alive triangles, compacted, for the edge list */
    int na = 0;
    int *tl = (int *)pbd_sm__alloc_n((size_t)*alive_count * 3, sizeof(int));
    if (!tl) return PBD_ERROR_OUT_OF_MEMORY;
    for (int t = 0; t < d->nt; ++t)
        if (d->alive[t]) { memcpy(tl + 3 * na, d->tri + 3 * t, 3 * sizeof(int)); na++; }
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    r = pbd_sm__edges(d->nv, tl, na, &keys, &uses, &ne);
    PBD_SM_FREE(tl);
    if (r != PBD_OK) return r;
    PBD_SM_FREE(d->bkeys);
    d->bkeys = (long long *)pbd_sm__alloc_n((size_t)ne, sizeof(long long));
    pbd_sm__edge_len *el = (pbd_sm__edge_len *)pbd_sm__alloc_n((size_t)ne, sizeof *el);
    if (!d->bkeys || !el) { PBD_SM_FREE(keys); PBD_SM_FREE(uses); PBD_SM_FREE(el); return PBD_ERROR_OUT_OF_MEMORY; }
    d->nbkeys = 0;
    memset(d->boundary, 0, (size_t)d->nv);
    memset(d->touched, 0, (size_t)d->nv);
    for (int e = 0; e < ne; ++e) {
        int a = (int)(keys[e] / d->nv), b = (int)(keys[e] % d->nv);
        if (uses[e] == 1) {
            d->bkeys[d->nbkeys++] = keys[e];
            d->boundary[a] = d->boundary[b] = 1;
        }
        float dv[3];
        pbd_sm__sub3(d->x + 3 * a, d->x + 3 * b, dv);
        el[e].len = pbd_sm__len3(dv);
        el[e].a = a;
        el[e].b = b;
    }
    PBD_SM_FREE(keys);
    PBD_SM_FREE(uses);
    qsort(el, (size_t)ne, sizeof *el, pbd_sm__cmp_edge_len);
    for (int e = 0; e < ne && *alive_count > target; ++e) {
        int a = el[e].a, b = el[e].b;
        if (d->touched[a] || d->touched[b]) continue;
        /* remove the endpoint that may go; prefer keeping boundary vertices */
        if (pbd_sm__can_collapse(d, a, b)) pbd_sm__collapse(d, a, b, alive_count);
        else if (pbd_sm__can_collapse(d, b, a)) pbd_sm__collapse(d, b, a, alive_count);
        else continue;
        (*collapses)++;
    }
    PBD_SM_FREE(el);
    return PBD_OK;
}

/* Boundary corners (turning angle over 30 degrees) are locked so that the
   shape of the outline survives every level. */
static void pbd_sm__lock_corners(int nv, const int *tri, int nt, const float *x, unsigned char *locked) {
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    if (pbd_sm__edges(nv, tri, nt, &keys, &uses, &ne) != PBD_OK) return;
    int *nb = (int *)pbd_sm__alloc_n((size_t)nv * 2, sizeof(int));
    int *cnt = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    if (nb && cnt) {
        memset(cnt, 0, sizeof(int) * (size_t)nv);
        for (int e = 0; e < ne; ++e) {
            if (uses[e] != 1) continue;
            int a = (int)(keys[e] / nv), b = (int)(keys[e] % nv);
            if (cnt[a] < 2) nb[2 * a + cnt[a]] = b;
            if (cnt[b] < 2) nb[2 * b + cnt[b]] = a;
            cnt[a]++;
            cnt[b]++;
        }
        for (int v = 0; v < nv; ++v) {
            if (cnt[v] == 0) continue;
            if (cnt[v] != 2) { locked[v] = 1; continue; } /* a pinch: keep */
            float d0[3], d1[3];
            pbd_sm__sub3(x + 3 * v, x + 3 * nb[2 * v], d0);
            pbd_sm__sub3(x + 3 * nb[2 * v + 1], x + 3 * v, d1);
            float c = pbd_sm__dot3(d0, d1) / (pbd_sm__len3(d0) * pbd_sm__len3(d1) + 1e-30f);
            if (c < 0.866f) locked[v] = 1;
        }
    }
    PBD_SM_FREE(nb);
    PBD_SM_FREE(cnt);
    PBD_SM_FREE(keys);
    PBD_SM_FREE(uses);
}

/* Decimates (nv, tri, nt) until at most `target` triangles remain or no
   collapse is possible; locked vertices stay. Out: the surviving triangles (renumbered over the
   surviving vertices), the surviving vertices' old indices, and for every
   old vertex the new vertex it collapsed into (following the chain). */
static pbd_result pbd_sm__decimate(int nv, const int *tri, int nt, const float *x, const unsigned char *locked_in,
                                   int target, int **tri_out, int *nt_out, int **kept_out, int *nv_out,
                                   int **map_out) {
    pbd_sm__decimator d;
    memset(&d, 0, sizeof d);
    d.nv = nv;
    d.nt = nt;
    d.x = x;
    d.tri = (int *)pbd_sm__alloc_n((size_t)nt * 3, sizeof(int));
    d.alive = (unsigned char *)pbd_sm__alloc_n((size_t)nt, 1);
    unsigned char *locked = (unsigned char *)pbd_sm__alloc_n((size_t)nv, 1);
    d.boundary = (unsigned char *)pbd_sm__alloc_n((size_t)nv, 1);
    d.touched = (unsigned char *)pbd_sm__alloc_n((size_t)nv, 1);
    d.rep = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    int *newid = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    pbd_result r = PBD_OK;
    if (!d.tri || !d.alive || !locked || !d.boundary || !d.touched || !d.rep || !newid) r = PBD_ERROR_OUT_OF_MEMORY;
    int alive = nt;
    if (r == PBD_OK) {
        memcpy(d.tri, tri, sizeof(int) * 3 * (size_t)nt);
        memset(d.alive, 1, (size_t)nt);
        memcpy(locked, locked_in, (size_t)nv);
        d.locked = locked;
        for (int v = 0; v < nv; ++v) d.rep[v] = v;
        for (int round = 0; round < 64 && alive > target; ++round) {
            int c = 0;
            r = pbd_sm__decimate_round(&d, target, &alive, &c);
            if (r != PBD_OK || c == 0) break;
        }
    }
    if (r == PBD_OK) {
        /* renumber the vertices still used by a triangle */
        for (int v = 0; v < nv; ++v) newid[v] = -1;
        int *otri = (int *)pbd_sm__alloc_n((size_t)alive * 3, sizeof(int));
        int *kept = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
        int *map = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
        if (!otri || !kept || !map) {
            PBD_SM_FREE(otri); PBD_SM_FREE(kept); PBD_SM_FREE(map);
            r = PBD_ERROR_OUT_OF_MEMORY;
        } else {
            int nk = 0, k = 0;
            for (int t = 0; t < nt; ++t) {
                if (!d.alive[t]) continue;
                for (int j = 0; j < 3; ++j) {
                    int v = d.tri[3 * t + j];
                    if (newid[v] < 0) { newid[v] = nk; kept[nk++] = v; }
                    otri[3 * k + j] = newid[v];
                }
                k++;
            }
            for (int v = 0; v < nv; ++v) {
                int u = v, guard = 0;
                while (d.rep[u] != u && guard++ < nv) u = d.rep[u];
                map[v] = newid[u];
            }
            *tri_out = otri;
            *nt_out = alive;
            *kept_out = kept;
            *nv_out = nk;
            *map_out = map;
        }
    }
    PBD_SM_FREE(d.tri); PBD_SM_FREE(d.alive); PBD_SM_FREE(locked); PBD_SM_FREE(d.boundary);
    PBD_SM_FREE(d.touched); PBD_SM_FREE(d.rep); PBD_SM_FREE(newid); PBD_SM_FREE(d.vt_start);
    PBD_SM_FREE(d.vt_list); PBD_SM_FREE(d.bkeys);
    return r;
}

/* --- the hierarchy ------------------------------------------------------------ */

/* One level. Positions are 4 floats per vertex (x y z inverse-mass); the
   finest level's `x` points into the world's predicted positions. Element
   arrays are stored sorted by colour (independent sets, section 5); the
   two-pass scheme walks them in the same order. */
typedef struct pbd_sm__level {
    int nv, nt, ne;
    int *tri, *edge;        /* nt*3, ne*2 */
    float *x;               /* nv*4 (coarse levels own it) */
    float *xhat;            /* nv*4: positions before this level's matching (Algorithm 2) */
    float *rest;            /* nv*3 rest positions */
    float *mass;            /* eq. 1 */
    float *mt, *me;         /* modified masses m/|R_i| of the 2D and 1D regions */
    float *inv_rt, *inv_re; /* 1/|R_i| */
    float *tq;              /* nt*6: rest 2D corners qbar (eq. 8) */
    float *tP;              /* nt*6: the last valid projection P (eq. 7) */
    float *eq;              /* ne*3: q1^0, q2^0 (eq. 14), rest length */
    int ntc, nec;           /* colour counts */
    int overflow[2];        /* the last colour of triangles / edges is the serial overflow set */
    int *tc, *ec;           /* colour offsets, ntc+1 / nec+1 */
    int *vt_start, *vt_list; /* vertex -> triangle corners 3t+k (two-pass gather) */
    int *ve_start, *ve_list; /* vertex -> edge ends 2e+k */
    float *tdx, *edx;       /* per corner / end corrections, nt*9 / ne*6 */
    /* transfer to the next finer level: finer vertex f reads pro_idx[3f..] with pro_w */
    int *pro_idx;
    float *pro_w;
    /* restriction from the next finer level: rows per vertex of this level */
    int *res_start, *res_idx;
    float *res_w;
    int *fine_of;           /* nested: the finer level's vertex at this vertex */
} pbd_sm__level;

struct pbd_sm_cloth {
    pbd_world *world;
    pbd_plugin plugin;
    pbd_range particles;
    int nlevels;
    pbd_sm__level *lv;      /* 0 coarsest .. nlevels-1 finest */
    int nested;
    float alpha, beta, damping, bending;
    int conserve, scheme;
    /* bending: Q as CSR rows over the finest vertices (Bergou et al. 2006) */
    int *q_start, *q_idx;
    float *q_val;
    float *force;           /* nv*3 scratch */
};

static void pbd_sm__level_free(pbd_sm__level *L, int owns_x) {
    void *a[] = {L->tri, L->edge, L->xhat, L->rest, L->mass, L->mt, L->me, L->inv_rt, L->inv_re, L->tq,
                 L->tP, L->eq, L->tc, L->ec, L->vt_start, L->vt_list, L->ve_start, L->ve_list, L->tdx, L->edx,
                 L->pro_idx, L->pro_w, L->res_start, L->res_idx, L->res_w, L->fine_of};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; ++i) PBD_SM_FREE(a[i]);
    if (owns_x) PBD_SM_FREE(L->x);
    memset(L, 0, sizeof *L);
}

static void pbd_sm__cloth_free(pbd_sm_cloth *c) {
    if (!c) return;
    for (int l = 0; l < c->nlevels; ++l) pbd_sm__level_free(&c->lv[l], l < c->nlevels - 1);
    PBD_SM_FREE(c->lv);
    PBD_SM_FREE(c->q_start);
    PBD_SM_FREE(c->q_idx);
    PBD_SM_FREE(c->q_val);
    PBD_SM_FREE(c->force);
    PBD_SM_FREE(c);
}

/* Greedy colouring of elements of `arity` vertices (at most 64 colours;
   the rest share a last colour whose elements are applied one by one),
   then a stable sort of the elements by colour. */
static pbd_result pbd_sm__color_elements(int nv, int *el, int n, int arity, float *data, int stride, int **offsets,
                                         int *ncolors, int *overflow) {
    unsigned long long *used = (unsigned long long *)pbd_sm__alloc_n((size_t)nv, sizeof(unsigned long long));
    int *col = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    int *order = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    int *tmp = (int *)pbd_sm__alloc_n((size_t)n * arity, sizeof(int));
    float *ftmp = (float *)pbd_sm__alloc_n((size_t)n * (stride ? stride : 1), sizeof(float));
    int *off = (int *)pbd_sm__alloc_n(66, sizeof(int));
    pbd_result r = PBD_OK;
    if (!used || !col || !order || !tmp || !ftmp || !off) r = PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) {
        memset(used, 0, sizeof(unsigned long long) * (size_t)nv);
        memset(off, 0, sizeof(int) * 66);
        int maxc = 0;
        for (int e = 0; e < n; ++e) {
            unsigned long long u = 0;
            for (int k = 0; k < arity; ++k) u |= used[el[arity * e + k]];
            int c = 0;
            while (c < 64 && (u >> c) & 1ull) c++;
            if (c < 64)
                for (int k = 0; k < arity; ++k) used[el[arity * e + k]] |= 1ull << c;
            col[e] = c; /* 64: the serial overflow set */
            off[c + 1]++;
            if (c + 1 > maxc) maxc = c + 1;
        }
        for (int c = 0; c < 65; ++c) off[c + 1] += off[c];
        int fill[65];
        memcpy(fill, off, sizeof fill);
        for (int e = 0; e < n; ++e) order[fill[col[e]]++] = e;
        for (int i = 0; i < n; ++i) memcpy(tmp + (size_t)arity * i, el + (size_t)arity * order[i], sizeof(int) * arity);
        memcpy(el, tmp, sizeof(int) * (size_t)n * arity);
        if (stride) {
            for (int i = 0; i < n; ++i) memcpy(ftmp + (size_t)stride * i, data + (size_t)stride * order[i], sizeof(float) * stride);
            memcpy(data, ftmp, sizeof(float) * (size_t)n * stride);
        }
        /* compact: colours 0..maxc-1 (with 64 as the last if used) */
        int k = 0, *o = off;
        int comp[66];
        comp[0] = 0;
        for (int c = 0; c < 65; ++c)
            if (o[c + 1] > o[c]) comp[++k] = o[c + 1];
        *overflow = o[65] > o[64];
        memcpy(off, comp, sizeof(int) * (size_t)(k + 1));
        *ncolors = k;
        *offsets = off;
        off = NULL;
    }
    PBD_SM_FREE(used); PBD_SM_FREE(col); PBD_SM_FREE(order); PBD_SM_FREE(tmp); PBD_SM_FREE(ftmp); PBD_SM_FREE(off);
    return r;
}

/* CSR vertex -> element ends (arity*e + k). */
static pbd_result pbd_sm__vertex_ends(int nv, const int *el, int n, int arity, int **start_out, int **list_out) {
    int *start = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
    int *list = (int *)pbd_sm__alloc_n((size_t)n * arity, sizeof(int));
    int *fill = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    if (!start || !list || !fill) { PBD_SM_FREE(start); PBD_SM_FREE(list); PBD_SM_FREE(fill); return PBD_ERROR_OUT_OF_MEMORY; }
    memset(start, 0, sizeof(int) * ((size_t)nv + 1));
    for (int i = 0; i < n * arity; ++i) start[el[i] + 1]++;
    for (int v = 0; v < nv; ++v) start[v + 1] += start[v];
    memcpy(fill, start, sizeof(int) * (size_t)nv);
    for (int i = 0; i < n * arity; ++i) list[fill[el[i]]++] = i;
    PBD_SM_FREE(fill);
    *start_out = start;
    *list_out = list;
    return PBD_OK;
}

/* Rest data of one level from its mesh and rest positions: masses (eq. 1),
   region counts, 2D rest corners (eq. 8), 1D rest
   distances (eq. 14). Fails on zero-area triangles. */
static pbd_result pbd_sm__level_rest(pbd_sm__level *L, float density) {
    int nv = L->nv, nt = L->nt;
    L->mass = (float *)pbd_sm__alloc_n((size_t)nv, sizeof(float));
    L->mt = (float *)pbd_sm__alloc_n((size_t)nv, sizeof(float));
    L->me = (float *)pbd_sm__alloc_n((size_t)nv, sizeof(float));
    L->inv_rt = (float *)pbd_sm__alloc_n((size_t)nv, sizeof(float));
    L->inv_re = (float *)pbd_sm__alloc_n((size_t)nv, sizeof(float));
    L->tq = (float *)pbd_sm__alloc_n((size_t)nt * 6, sizeof(float));
    L->tP = (float *)pbd_sm__alloc_n((size_t)nt * 6, sizeof(float));
    L->tdx = (float *)pbd_sm__alloc_n((size_t)nt * 9, sizeof(float));
    L->xhat = (float *)pbd_sm__alloc_n((size_t)nv * 4, sizeof(float));
    if (!L->mass || !L->mt || !L->me || !L->inv_rt || !L->inv_re || !L->tq || !L->tP || !L->tdx || !L->xhat)
        return PBD_ERROR_OUT_OF_MEMORY;
    int *rt = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int)), *re = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    if (!rt || !re) { PBD_SM_FREE(rt); PBD_SM_FREE(re); return PBD_ERROR_OUT_OF_MEMORY; }
    memset(rt, 0, sizeof(int) * (size_t)nv);
    memset(re, 0, sizeof(int) * (size_t)nv);
    memset(L->mass, 0, sizeof(float) * (size_t)nv);
    pbd_result r = PBD_OK;
    for (int t = 0; t < nt && r == PBD_OK; ++t) {
        const int *T = L->tri + 3 * t;
        float n[3];
        pbd_sm__tri_normal(L->rest + 3 * T[0], L->rest + 3 * T[1], L->rest + 3 * T[2], n);
        float area = 0.5f * pbd_sm__len3(n);
        float e01[3];
        pbd_sm__sub3(L->rest + 3 * T[1], L->rest + 3 * T[0], e01);
        if (!(area > 1e-12f * (pbd_sm__dot3(e01, e01) + 1e-30f)) || !(area > 0)) { r = PBD_ERROR_DEGENERATE; break; }
        for (int k = 0; k < 3; ++k) {
            L->mass[T[k]] += density * area / 3.0f; /* eq. 1 */
            rt[T[k]]++;
        }
    }
    for (int e = 0; e < L->ne; ++e) { re[L->edge[2 * e]]++; re[L->edge[2 * e + 1]]++; }
    for (int v = 0; v < nv && r == PBD_OK; ++v) {
        L->inv_rt[v] = rt[v] ? 1.0f / (float)rt[v] : 0.0f;
        L->inv_re[v] = re[v] ? 1.0f / (float)re[v] : 0.0f;
        L->mt[v] = rt[v] ? L->mass[v] / (float)rt[v] : 0.0f;
        L->me[v] = re[v] ? L->mass[v] / (float)re[v] : 0.0f;
    }
    PBD_SM_FREE(rt);
    PBD_SM_FREE(re);
    if (r != PBD_OK) return r;
    for (int t = 0; t < nt; ++t) {
        const int *T = L->tri + 3 * t;
        const float *x0 = L->rest + 3 * T[0], *x1 = L->rest + 3 * T[1], *x2 = L->rest + 3 * T[2];
        float w[3] = {L->mt[T[0]], L->mt[T[1]], L->mt[T[2]]}, W = w[0] + w[1] + w[2];
        float c[3], ax[3], ay[3], n[3];
        for (int k = 0; k < 3; ++k) c[k] = (w[0] * x0[k] + w[1] * x1[k] + w[2] * x2[k]) / W; /* t^0, eq. 4 */
        pbd_sm__tri_normal(x0, x1, x2, n);
        pbd_sm__sub3(x1, x0, ax);
        float la = pbd_sm__len3(ax);
        for (int k = 0; k < 3; ++k) ax[k] /= la;
        pbd_sm__cross3(n, ax, ay);
        float ly = pbd_sm__len3(ay);
        for (int k = 0; k < 3; ++k) ay[k] /= ly;
        for (int j = 0; j < 3; ++j) {
            float dd[3];
            pbd_sm__sub3(L->rest + 3 * T[j], c, dd);
            L->tq[6 * t + 2 * j] = pbd_sm__dot3(ax, dd); /* qbar, eq. 8 */
            L->tq[6 * t + 2 * j + 1] = pbd_sm__dot3(ay, dd);
        }
        for (int k = 0; k < 3; ++k) { L->tP[6 * t + k] = ax[k]; L->tP[6 * t + 3 + k] = ay[k]; }
    }
    if (L->ne) {
        L->eq = (float *)pbd_sm__alloc_n((size_t)L->ne * 3, sizeof(float));
        L->edx = (float *)pbd_sm__alloc_n((size_t)L->ne * 6, sizeof(float));
        if (!L->eq || !L->edx) return PBD_ERROR_OUT_OF_MEMORY;
    }
    for (int e = 0; e < L->ne; ++e) {
        int a = L->edge[2 * e], b = L->edge[2 * e + 1];
        float wa = L->me[a], wb = L->me[b], d[3];
        pbd_sm__sub3(L->rest + 3 * b, L->rest + 3 * a, d);
        float len = pbd_sm__len3(d);
        L->eq[3 * e] = len * wb / (wa + wb);     /* |x1^0 - t^0| */
        L->eq[3 * e + 1] = len * wa / (wa + wb); /* |x2^0 - t^0| */
        L->eq[3 * e + 2] = len;
    }
    return PBD_OK;
}

/* Closest point of triangle (a, b, c) to p as barycentric weights (Ericson,
   Real-Time Collision Detection 5.1.5); returns the squared distance. */
static float pbd_sm__closest_bary(const float *p, const float *a, const float *b, const float *c, float *w) {
    float ab[3], ac[3], ap[3];
    pbd_sm__sub3(b, a, ab);
    pbd_sm__sub3(c, a, ac);
    pbd_sm__sub3(p, a, ap);
    float d1 = pbd_sm__dot3(ab, ap), d2 = pbd_sm__dot3(ac, ap);
    if (d1 <= 0 && d2 <= 0) { w[0] = 1; w[1] = w[2] = 0; }
    else {
        float bp[3];
        pbd_sm__sub3(p, b, bp);
        float d3 = pbd_sm__dot3(ab, bp), d4 = pbd_sm__dot3(ac, bp);
        float cp[3];
        pbd_sm__sub3(p, c, cp);
        float d5 = pbd_sm__dot3(ab, cp), d6 = pbd_sm__dot3(ac, cp);
        float vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
        if (d3 >= 0 && d4 <= d3) { w[1] = 1; w[0] = w[2] = 0; }
        else if (vc <= 0 && d1 >= 0 && d3 <= 0) { float v = d1 / (d1 - d3); w[0] = 1 - v; w[1] = v; w[2] = 0; }
        else if (d6 >= 0 && d5 <= d6) { w[2] = 1; w[0] = w[1] = 0; }
        else if (vb <= 0 && d2 >= 0 && d6 <= 0) { float v = d2 / (d2 - d6); w[0] = 1 - v; w[2] = v; w[1] = 0; }
        else if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
            float v = (d4 - d3) / ((d4 - d3) + (d5 - d6));
            w[1] = 1 - v; w[2] = v; w[0] = 0;
        } else {
            float den = 1.0f / (va + vb + vc);
            w[1] = vb * den; w[2] = vc * den; w[0] = 1 - w[1] - w[2];
        }
    }
    float q[3];
    for (int k = 0; k < 3; ++k) q[k] = w[0] * a[k] + w[1] * b[k] + w[2] * c[k] - p[k];
    return pbd_sm__dot3(q, q);
}

/* Prolongation from coarse level C to fine level F (section 4.3): every
   fine vertex takes the barycentric weights of its closest point on the
   closest coarse triangle, searched among the triangles around the coarse
   vertex it collapsed into and around that vertex's neighbours (the
   decimation's own locality, so folded or touching sheets do not mix).
   Restriction: the transpose with rows normalised to sum 1. */
static pbd_result pbd_sm__transfer(pbd_sm__level *C, const pbd_sm__level *F, const int *map) {
    int *vt_start = NULL, *vt_list = NULL;
    pbd_result r = pbd_sm__vertex_tris(C->nv, C->tri, C->nt, NULL, &vt_start, &vt_list);
    if (r != PBD_OK) return r;
    C->pro_idx = (int *)pbd_sm__alloc_n((size_t)F->nv * 3, sizeof(int));
    C->pro_w = (float *)pbd_sm__alloc_n((size_t)F->nv * 3, sizeof(float));
    if (!C->pro_idx || !C->pro_w) r = PBD_ERROR_OUT_OF_MEMORY;
    for (int f = 0; f < F->nv && r == PBD_OK; ++f) {
        int c = map[f];
        float best = FLT_MAX;
        int bt = -1;
        float bw[3] = {1, 0, 0};
        if (c < 0) c = 0;
        for (int e = vt_start[c]; e < vt_start[c + 1]; ++e) {
            const int *T0 = C->tri + 3 * vt_list[e];
            for (int j = 0; j < 3; ++j) { /* triangles around c's neighbours */
                int u = T0[j];
                for (int g = vt_start[u]; g < vt_start[u + 1]; ++g) {
                    int t = vt_list[g];
                    const int *T = C->tri + 3 * t;
                    float w[3];
                    float d = pbd_sm__closest_bary(F->rest + 3 * f, C->rest + 3 * T[0], C->rest + 3 * T[1],
                                                   C->rest + 3 * T[2], w);
                    if (d < best || (d == best && t < bt)) { best = d; bt = t; memcpy(bw, w, sizeof bw); }
                }
            }
        }
        if (bt < 0) { C->pro_idx[3 * f] = C->pro_idx[3 * f + 1] = C->pro_idx[3 * f + 2] = c; bw[0] = 1; bw[1] = bw[2] = 0; }
        else for (int k = 0; k < 3; ++k) C->pro_idx[3 * f + k] = C->tri[3 * bt + k];
        memcpy(C->pro_w + 3 * f, bw, sizeof bw);
    }
    PBD_SM_FREE(vt_start);
    PBD_SM_FREE(vt_list);
    if (r != PBD_OK) return r;
    /* restriction rows: transpose, normalised; a row left empty takes the
       fine vertices that collapsed into it (weight 1 each, normalised) */
    C->res_start = (int *)pbd_sm__alloc_n((size_t)C->nv + 1, sizeof(int));
    double *rowsum = (double *)pbd_sm__alloc_n((size_t)C->nv, sizeof(double));
    if (!C->res_start || !rowsum) { PBD_SM_FREE(rowsum); return PBD_ERROR_OUT_OF_MEMORY; }
    memset(C->res_start, 0, sizeof(int) * ((size_t)C->nv + 1));
    memset(rowsum, 0, sizeof(double) * (size_t)C->nv);
    for (int f = 0; f < F->nv; ++f)
        for (int k = 0; k < 3; ++k)
            if (C->pro_w[3 * f + k] > 0) { C->res_start[C->pro_idx[3 * f + k] + 1]++; rowsum[C->pro_idx[3 * f + k]] += C->pro_w[3 * f + k]; }
    for (int f = 0; f < F->nv; ++f)
        if (map[f] >= 0 && rowsum[map[f]] == 0) C->res_start[map[f] + 1]++;
    for (int c = 0; c < C->nv; ++c) C->res_start[c + 1] += C->res_start[c];
    int total = C->res_start[C->nv];
    C->res_idx = (int *)pbd_sm__alloc_n((size_t)total, sizeof(int));
    C->res_w = (float *)pbd_sm__alloc_n((size_t)total, sizeof(float));
    int *fill = (int *)pbd_sm__alloc_n((size_t)C->nv, sizeof(int));
    if (!C->res_idx || !C->res_w || !fill) { PBD_SM_FREE(rowsum); PBD_SM_FREE(fill); return PBD_ERROR_OUT_OF_MEMORY; }
    memcpy(fill, C->res_start, sizeof(int) * (size_t)C->nv);
    for (int f = 0; f < F->nv; ++f) {
        for (int k = 0; k < 3; ++k) {
            int c = C->pro_idx[3 * f + k];
            float wv = C->pro_w[3 * f + k];
            if (wv > 0) { C->res_idx[fill[c]] = f; C->res_w[fill[c]++] = (float)(wv / rowsum[c]); }
        }
        if (map[f] >= 0 && rowsum[map[f]] == 0) { C->res_idx[fill[map[f]]] = f; C->res_w[fill[map[f]]++] = 1; }
    }
    for (int c = 0; c < C->nv; ++c) /* the fallback rows: normalise */
        if (rowsum[c] == 0 && C->res_start[c + 1] > C->res_start[c]) {
            float inv = 1.0f / (float)(C->res_start[c + 1] - C->res_start[c]);
            for (int e = C->res_start[c]; e < C->res_start[c + 1]; ++e) C->res_w[e] = inv;
        }
    PBD_SM_FREE(rowsum);
    PBD_SM_FREE(fill);
    return PBD_OK;
}

/* Edges of a level's mesh from its triangles. */
static pbd_result pbd_sm__level_edges(pbd_sm__level *L) {
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    pbd_result r = pbd_sm__edges(L->nv, L->tri, L->nt, &keys, &uses, &ne);
    if (r != PBD_OK) return r;
    for (int e = 0; e < ne; ++e)
        if (uses[e] > 2) { PBD_SM_FREE(keys); PBD_SM_FREE(uses); return PBD_ERROR_INVALID_ARGUMENT; } /* non-manifold */
    L->edge = (int *)pbd_sm__alloc_n((size_t)ne * 2, sizeof(int));
    if (!L->edge) { PBD_SM_FREE(keys); PBD_SM_FREE(uses); return PBD_ERROR_OUT_OF_MEMORY; }
    for (int e = 0; e < ne; ++e) {
        L->edge[2 * e] = (int)(keys[e] / L->nv);
        L->edge[2 * e + 1] = (int)(keys[e] % L->nv);
    }
    L->ne = ne;
    PBD_SM_FREE(keys);
    PBD_SM_FREE(uses);
    return PBD_OK;
}

/* Colours, gather lists and rest data of a level whose tri, rest and nv/nt
   are set. The rest data is computed after the colour sort, so that the
   per-element arrays follow the element order. */
static pbd_result pbd_sm__level_finish(pbd_sm__level *L, float density) {
    pbd_result r = pbd_sm__level_edges(L);
    if (r == PBD_OK) r = pbd_sm__color_elements(L->nv, L->tri, L->nt, 3, NULL, 0, &L->tc, &L->ntc, &L->overflow[0]);
    if (r == PBD_OK) r = pbd_sm__color_elements(L->nv, L->edge, L->ne, 2, NULL, 0, &L->ec, &L->nec, &L->overflow[1]);
    if (r == PBD_OK) r = pbd_sm__vertex_ends(L->nv, L->tri, L->nt, 3, &L->vt_start, &L->vt_list);
    if (r == PBD_OK) r = pbd_sm__vertex_ends(L->nv, L->edge, L->ne, 2, &L->ve_start, &L->ve_list);
    if (r == PBD_OK) r = pbd_sm__level_rest(L, density);
    return r;
}

/* Bergou et al. 2006 quadratic bending (paper section 4.4): per interior
   edge with the cotangent weights K and s^2 = 3 / (A0 + A1) (from
   pbd_isometric_bending_rest), Q += s^2 K K^T; assembled as CSR rows. */
static pbd_result pbd_sm__bending_matrix(pbd_sm_cloth *c) {
    const pbd_sm__level *L = &c->lv[c->nlevels - 1];
    int nv = L->nv;
    /* interior edges: the two triangles of each edge */
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    pbd_result r = pbd_sm__edges(nv, L->tri, L->nt, &keys, &uses, &ne);
    if (r != PBD_OK) return r;
    int *wing = (int *)pbd_sm__alloc_n((size_t)ne * 2, sizeof(int));
    int *stencil = (int *)pbd_sm__alloc_n((size_t)ne * 4, sizeof(int));
    float *kw = (float *)pbd_sm__alloc_n((size_t)ne * 4, sizeof(float));
    if (!wing || !stencil || !kw) r = PBD_ERROR_OUT_OF_MEMORY;
    int ns = 0;
    if (r == PBD_OK) {
        for (int e = 0; e < 2 * ne; ++e) wing[e] = -1;
        for (int t = 0; t < L->nt; ++t)
            for (int j = 0; j < 3; ++j) {
                int a = L->tri[3 * t + j], b = L->tri[3 * t + (j + 1) % 3], o = L->tri[3 * t + (j + 2) % 3];
                int lo = a < b ? a : b, hi = a < b ? b : a;
                long long key = (long long)lo * nv + hi;
                int l = 0, h = ne - 1, e = -1;
                while (l <= h) {
                    int m = l + (h - l) / 2;
                    if (keys[m] < key) l = m + 1;
                    else if (keys[m] > key) h = m - 1;
                    else { e = m; break; }
                }
                if (e < 0) continue;
                if (a == lo) wing[2 * e] = o; /* triangle lo hi o */
                else wing[2 * e + 1] = o;     /* triangle hi lo o */
            }
        for (int e = 0; e < ne; ++e) {
            if (wing[2 * e] < 0 || wing[2 * e + 1] < 0) continue;
            int p0 = (int)(keys[e] / nv), p1 = (int)(keys[e] % nv);
            /* pbd.h's order: edge p0 p1, wings p2 (triangle p0 p2 p1) and p3 (p0 p1 p3) */
            int ids[4] = {p0, p1, wing[2 * e + 1], wing[2 * e]};
            float pos[12], rest6[6];
            for (int k = 0; k < 4; ++k) memcpy(pos + 3 * k, L->rest + 3 * ids[k], 3 * sizeof(float));
            if (pbd_isometric_bending_rest(pos, rest6) != PBD_OK) continue;
            for (int k = 0; k < 4; ++k) {
                stencil[4 * ns + k] = ids[k];
                kw[4 * ns + k] = rest6[k] * rest6[4]; /* s K_k */
            }
            ns++;
        }
    }
    /* CSR of Q: row i holds sum over stencils of (s K_i)(s K_j) */
    if (r == PBD_OK) {
        c->q_start = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
        c->q_idx = (int *)pbd_sm__alloc_n((size_t)ns * 16 + 1, sizeof(int));
        c->q_val = (float *)pbd_sm__alloc_n((size_t)ns * 16 + 1, sizeof(float));
        c->force = (float *)pbd_sm__alloc_n((size_t)nv * 3, sizeof(float));
        if (!c->q_start || !c->q_idx || !c->q_val || !c->force) r = PBD_ERROR_OUT_OF_MEMORY;
    }
    if (r == PBD_OK) {
        /* rows via per-vertex stencil lists, merged with a scatter array */
        int *vs = NULL, *vl = NULL;
        r = pbd_sm__vertex_ends(nv, stencil, ns, 4, &vs, &vl);
        float *acc = (float *)pbd_sm__alloc_n((size_t)nv, sizeof(float));
        int *mark = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
        int *cols = (int *)pbd_sm__alloc_n(1024, sizeof(int));
        if (r == PBD_OK && (!acc || !mark || !cols)) r = PBD_ERROR_OUT_OF_MEMORY;
        if (r == PBD_OK) {
            for (int v = 0; v < nv; ++v) { mark[v] = -1; acc[v] = 0; }
            int nnz = 0;
            c->q_start[0] = 0;
            for (int i = 0; i < nv; ++i) {
                int nc = 0;
                for (int e = vs[i]; e < vs[i + 1]; ++e) {
                    int s = vl[e] / 4, k = vl[e] % 4;
                    for (int j = 0; j < 4; ++j) {
                        int col = stencil[4 * s + j];
                        if (mark[col] != i) { mark[col] = i; acc[col] = 0; if (nc < 1024) cols[nc++] = col; }
                        acc[col] += kw[4 * s + k] * kw[4 * s + j];
                    }
                }
                qsort(cols, (size_t)nc, sizeof(int), pbd_sm__cmp_int);
                for (int q = 0; q < nc; ++q) { c->q_idx[nnz] = cols[q]; c->q_val[nnz++] = acc[cols[q]]; }
                c->q_start[i + 1] = nnz;
            }
        }
        PBD_SM_FREE(vs); PBD_SM_FREE(vl); PBD_SM_FREE(acc); PBD_SM_FREE(mark); PBD_SM_FREE(cols);
    }
    PBD_SM_FREE(keys); PBD_SM_FREE(uses); PBD_SM_FREE(wing); PBD_SM_FREE(stencil); PBD_SM_FREE(kw);
    return r;
}

/* Non-nested coarse positions (figure 3b): each coarse vertex moves to the
   centroid of the fine vertices that collapsed into it, so that the levels
   share no vertex. Locked vertices (corners, kept ones) stay; a boundary
   vertex averages only the boundary vertices of its cluster, so the
   outline does not shrink. */
static pbd_result pbd_sm__centroids(const pbd_sm__level *F, pbd_sm__level *C, const int *kept, const int *map,
                                    const unsigned char *locked) {
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    pbd_result r = pbd_sm__edges(F->nv, F->tri, F->nt, &keys, &uses, &ne);
    if (r != PBD_OK) return r;
    unsigned char *bnd = (unsigned char *)pbd_sm__alloc_n((size_t)F->nv, 1);
    double *acc = (double *)pbd_sm__alloc_n((size_t)C->nv * 4, sizeof(double));
    if (!bnd || !acc) r = PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) {
        memset(bnd, 0, (size_t)F->nv);
        for (int e = 0; e < ne; ++e)
            if (uses[e] == 1) bnd[keys[e] / F->nv] = bnd[keys[e] % F->nv] = 1;
        memset(acc, 0, sizeof(double) * 4 * (size_t)C->nv);
        for (int f = 0; f < F->nv; ++f) {
            int v = map[f];
            if (v < 0 || (bnd[kept[v]] && !bnd[f])) continue;
            for (int k = 0; k < 3; ++k) acc[4 * v + k] += F->rest[3 * f + k];
            acc[4 * v + 3] += 1;
        }
        for (int v = 0; v < C->nv; ++v)
            for (int k = 0; k < 3; ++k)
                C->rest[3 * v + k] = locked[kept[v]] || acc[4 * v + 3] == 0 ? F->rest[3 * kept[v] + k]
                                                                               : (float)(acc[4 * v + k] / acc[4 * v + 3]);
    }
    PBD_SM_FREE(keys);
    PBD_SM_FREE(uses);
    PBD_SM_FREE(bnd);
    PBD_SM_FREE(acc);
    return r;
}

/* Builds every level below the finest: decimation, positions (nested: the
   surviving vertices; non-nested: the centroid of the vertices each coarse
   vertex replaces), transfers, rest data. Kept vertices stay locked on
   every level. */
static pbd_result pbd_sm__build_hierarchy(pbd_sm_cloth *c, const pbd_sm_cloth_desc *d, int levels) {
    pbd_result r = PBD_OK;
    pbd_sm__level *top = &c->lv[levels - 1];
    unsigned char *lock_f = (unsigned char *)pbd_sm__alloc_n((size_t)top->nv, 1);
    if (!lock_f) return PBD_ERROR_OUT_OF_MEMORY;
    memset(lock_f, 0, (size_t)top->nv);
    for (int k = 0; k < d->keep_count; ++k) lock_f[d->keep_vertices[k]] = 1;
    for (int l = levels - 1; l > 0 && r == PBD_OK; --l) {
        pbd_sm__level *F = &c->lv[l], *C = &c->lv[l - 1];
        int target = (int)((double)F->nt * (1.0 - (double)d->reduction) + 0.5);
        int *kept = NULL, *map = NULL;
        pbd_sm__lock_corners(F->nv, F->tri, F->nt, F->rest, lock_f);
        r = pbd_sm__decimate(F->nv, F->tri, F->nt, F->rest, lock_f, target, &C->tri, &C->nt, &kept, &C->nv, &map);
        if (r != PBD_OK) break;
        if ((long)C->nt * 20 > (long)F->nt * 19) r = PBD_ERROR_INVALID_ARGUMENT; /* too small to decimate further */
        C->rest = (float *)pbd_sm__alloc_n((size_t)C->nv * 3, sizeof(float));
        C->x = (float *)pbd_sm__alloc_n((size_t)C->nv * 4, sizeof(float));
        unsigned char *lock_c = r == PBD_OK ? (unsigned char *)pbd_sm__alloc_n((size_t)C->nv, 1) : NULL;
        if (r == PBD_OK && (!lock_c || !C->rest || !C->x)) r = PBD_ERROR_OUT_OF_MEMORY;
        if (r == PBD_OK && c->nested) {
            for (int v = 0; v < C->nv; ++v) memcpy(C->rest + 3 * v, F->rest + 3 * kept[v], 3 * sizeof(float));
        } else if (r == PBD_OK) {
            r = pbd_sm__centroids(F, C, kept, map, lock_f);
        }
        if (r == PBD_OK) {
            for (int v = 0; v < C->nv; ++v) lock_c[v] = lock_f[kept[v]];
            PBD_SM_FREE(lock_f);
            lock_f = lock_c;
            lock_c = NULL;
            if (c->nested) {
                C->fine_of = kept;
                kept = NULL;
            }
        }
        PBD_SM_FREE(lock_c);
        if (r == PBD_OK) r = pbd_sm__level_finish(C, d->density);
        if (r == PBD_OK) r = pbd_sm__transfer(C, F, map);
        PBD_SM_FREE(kept);
        PBD_SM_FREE(map);
    }
    PBD_SM_FREE(lock_f);
    return r;
}

/* --- shape matching kernels ---------------------------------------------------- */

/* The kernels work on blocks of elements: a scalar loop gathers the
   corners into SoA arrays, then one branch-free loop does the maths, which
   the compiler vectorises (gcc -O3; every lane does exactly the scalar
   operations, so SIMD and scalar builds agree bit for bit).
   A pinned vertex has an infinite mass: it is its region's centre of mass
   and the others are matched around it. We weigh pinned corners 1000 times
   their mass (exact to 0.1% of an edge) and re-centre the rest shape on
   these weights: q' = q - sum w' q / W' (eqs. 4, 8, 10; P0 is linear, so
   the shift is taken in 2D), with Aqq^-1 from q'. */
enum { PBD_SM__BLOCK = 64 };
/* sqrtf may set errno, which keeps compilers from vectorising a loop that
   calls it: build with -fno-math-errno (it changes no result) for the SIMD
   kernels; without it they run scalar. */

/* 2D shape matching of triangles t0 .. t0+n-1 (section 4.1, eqs. 4-13) on
   positions x (4 floats per vertex): 9 floats of corner corrections per
   triangle into out. conserve: the wrinkle-conserving transformation of
   eqs. 16-18. The last valid projection P is kept for degenerate ones. */
static void pbd_sm__tri_block(const pbd_sm__level *L, int t0, int n, const float *x, int conserve, float alpha,
                              float *out) {
    enum { B = PBD_SM__BLOCK };
    /* inputs and outputs in local SoA arrays: the maths loop touches no
       memory the compiler could think aliased */
    float px[3][B], py[3][B], pz[3][B], w[3][B], s[3][B], q[6][B], P[6][B], o[15][B];
    for (int i = 0; i < n; ++i) {
        int t = t0 + i;
        const int *T = L->tri + 3 * t;
        for (int j = 0; j < 3; ++j) {
            const float *p = x + 4 * T[j];
            int pinned = !(p[3] > 0);
            px[j][i] = p[0];
            py[j][i] = p[1];
            pz[j][i] = p[2];
            w[j][i] = pinned ? 1000.0f * L->mt[T[j]] : L->mt[T[j]];
            s[j][i] = pinned ? 0.0f : alpha * L->inv_rt[T[j]];
        }
        for (int k = 0; k < 6; ++k) {
            q[k][i] = L->tq[6 * t + k];
            P[k][i] = L->tP[6 * t + k];
        }
    }
    for (int i = 0; i < n; ++i) {
        float w0 = w[0][i], w1 = w[1][i], w2 = w[2][i], W = w0 + w1 + w2;
        float cx = (w0 * px[0][i] + w1 * px[1][i] + w2 * px[2][i]) / W; /* t, eq. 4 */
        float cy = (w0 * py[0][i] + w1 * py[1][i] + w2 * py[2][i]) / W;
        float cz = (w0 * pz[0][i] + w1 * pz[1][i] + w2 * pz[2][i]) / W;
        /* the projection P (eqs. 6-7); the last valid one when degenerate */
        float e1x = px[1][i] - px[0][i], e1y = py[1][i] - py[0][i], e1z = pz[1][i] - pz[0][i];
        float e2x = px[2][i] - px[0][i], e2y = py[2][i] - py[0][i], e2z = pz[2][i] - pz[0][i];
        float nx = e1y * e2z - e1z * e2y, ny = e1z * e2x - e1x * e2z, nz = e1x * e2y - e1y * e2x;
        float yx = ny * e1z - nz * e1y, yy = nz * e1x - nx * e1z, yz = nx * e1y - ny * e1x;
        float le = sqrtf(e1x * e1x + e1y * e1y + e1z * e1z), ly = sqrtf(yx * yx + yy * yy + yz * yz);
        int ok = le > 1e-20f && ly > 1e-30f && ly > 1e-6f * le * le * le;
        float ile = 1.0f / (ok ? le : 1.0f), ily = 1.0f / (ok ? ly : 1.0f);
        /* every value is computed, then selected: no branch */
        float nx0 = e1x * ile, nx1 = e1y * ile, nx2 = e1z * ile, ny0 = yx * ily, ny1 = yy * ily, ny2 = yz * ily;
        float ax0 = ok ? nx0 : P[0][i], ax1 = ok ? nx1 : P[1][i], ax2 = ok ? nx2 : P[2][i];
        float ay0 = ok ? ny0 : P[3][i], ay1 = ok ? ny1 : P[4][i], ay2 = ok ? ny2 : P[5][i];
        o[9][i] = ax0; o[10][i] = ax1; o[11][i] = ax2; o[12][i] = ay0; o[13][i] = ay1; o[14][i] = ay2;
        /* the rest corners around the weighted centre, and Aqq^-1 (eq. 10) */
        float qcx = (w0 * q[0][i] + w1 * q[2][i] + w2 * q[4][i]) / W;
        float qcy = (w0 * q[1][i] + w1 * q[3][i] + w2 * q[5][i]) / W;
        float q0x = q[0][i] - qcx, q0y = q[1][i] - qcy, q1x = q[2][i] - qcx, q1y = q[3][i] - qcy;
        float q2x = q[4][i] - qcx, q2y = q[5][i] - qcy;
        float qa = w0 * q0x * q0x + w1 * q1x * q1x + w2 * q2x * q2x;
        float qb = w0 * q0x * q0y + w1 * q1x * q1y + w2 * q2x * q2y;
        float qd = w0 * q0y * q0y + w1 * q1y * q1y + w2 * q2y * q2y;
        float idet = 1.0f / (qa * qd - qb * qb);
        float i0 = qd * idet, i1 = -qb * idet, i2 = qa * idet;
        /* pbar (eq. 8) and Apq */
        float rx0 = px[0][i] - cx, ry0 = py[0][i] - cy, rz0 = pz[0][i] - cz;
        float rx1 = px[1][i] - cx, ry1 = py[1][i] - cy, rz1 = pz[1][i] - cz;
        float rx2 = px[2][i] - cx, ry2 = py[2][i] - cy, rz2 = pz[2][i] - cz;
        float p0x = ax0 * rx0 + ax1 * ry0 + ax2 * rz0, p0y = ay0 * rx0 + ay1 * ry0 + ay2 * rz0;
        float p1x = ax0 * rx1 + ax1 * ry1 + ax2 * rz1, p1y = ay0 * rx1 + ay1 * ry1 + ay2 * rz1;
        float p2x = ax0 * rx2 + ax1 * ry2 + ax2 * rz2, p2y = ay0 * rx2 + ay1 * ry2 + ay2 * rz2;
        float a = w0 * p0x * q0x + w1 * p1x * q1x + w2 * p2x * q2x;
        float b = w0 * p0x * q0y + w1 * p1x * q1y + w2 * p2x * q2y;
        float c = w0 * p0y * q0x + w1 * p1y * q1x + w2 * p2y * q2x;
        float d = w0 * p0y * q0y + w1 * p1y * q1y + w2 * p2y * q2y;
        float A00 = a * i0 + b * i1, A01 = a * i1 + b * i2, A10 = c * i0 + d * i1, A11 = c * i1 + d * i2;
        /* closed-form 2D polar decomposition (eq. 11, Shoemake and Duff) */
        float det = A00 * A11 - A01 * A10, sg = det < 0 ? -1.0f : 1.0f;
        float u0 = A00 + sg * A11, u1 = A10 - sg * A01;
        float lu = sqrtf(u0 * u0 + u1 * u1);
        int rot_ok = lu > 1e-30f;
        float ilu = 1.0f / (rot_ok ? lu : 1.0f);
        float ucs = u0 * ilu, usn = u1 * ilu;
        float cs = rot_ok ? ucs : 1.0f, sn = rot_ok ? usn : 0.0f;
        /* wrinkles (eqs. 16-18): V = R^T A; keep compression, clamp stretch to 1 */
        float v00 = cs * A00 + sn * A10, v01 = cs * A01 + sn * A11;
        float v10 = -sn * A00 + cs * A10, v11 = -sn * A01 + cs * A11;
        float off = 0.5f * (v01 + v10), mean = 0.5f * (v00 + v11), half = 0.5f * (v00 - v11);
        float rad = sqrtf(half * half + off * off);
        float l1 = mean + rad, l2 = mean - rad;
        /* the eigenvector of l1, the longer of two equivalent forms; with
           only l1 > 1, V' = V - (l1 - 1) e e^T and A' = R V' */
        float eax = off, eay = l1 - v00, ebx = l1 - v11, eby = off;
        int use_a = eax * eax + eay * eay >= ebx * ebx + eby * eby;
        float ex = use_a ? eax : ebx, ey = use_a ? eay : eby;
        float lenE = sqrtf(ex * ex + ey * ey);
        float ilenE = 1.0f / (lenE > 0 ? lenE : 1.0f);
        float nex = ex * ilenE, ney = ey * ilenE;
        ex = lenE > 0 ? nex : 1.0f;
        ey = lenE > 0 ? ney : 0.0f;
        float sc = l1 - 1;
        float m00 = v00 - sc * ex * ex, m01 = off - sc * ex * ey, m11 = v11 - sc * ey * ey;
        float h00 = cs * m00 - sn * m01, h01 = cs * m01 - sn * m11, h10 = sn * m00 + cs * m01, h11 = sn * m01 + cs * m11;
        int both = conserve && l1 <= 1, one = conserve && l1 > 1 && l2 < 1;
        float G00 = both ? A00 : (one ? h00 : cs), G01 = both ? A01 : (one ? h01 : -sn);
        float G10 = both ? A10 : (one ? h10 : sn), G11 = both ? A11 : (one ? h11 : cs);
        /* goals g = G q' (eq. 12), dxbar = s (g - pbar), dx = P^T dxbar */
        float g0x = G00 * q0x + G01 * q0y - p0x, g0y = G10 * q0x + G11 * q0y - p0y;
        float g1x = G00 * q1x + G01 * q1y - p1x, g1y = G10 * q1x + G11 * q1y - p1y;
        float g2x = G00 * q2x + G01 * q2y - p2x, g2y = G10 * q2x + G11 * q2y - p2y;
        float s0 = s[0][i], s1 = s[1][i], s2 = s[2][i];
        o[0][i] = s0 * (ax0 * g0x + ay0 * g0y); o[1][i] = s0 * (ax1 * g0x + ay1 * g0y); o[2][i] = s0 * (ax2 * g0x + ay2 * g0y);
        o[3][i] = s1 * (ax0 * g1x + ay0 * g1y); o[4][i] = s1 * (ax1 * g1x + ay1 * g1y); o[5][i] = s1 * (ax2 * g1x + ay2 * g1y);
        o[6][i] = s2 * (ax0 * g2x + ay0 * g2y); o[7][i] = s2 * (ax1 * g2x + ay1 * g2y); o[8][i] = s2 * (ax2 * g2x + ay2 * g2y);
    }
    for (int i = 0; i < n; ++i) {
        for (int k = 0; k < 9; ++k) out[9 * i + k] = o[k][i];
        for (int k = 0; k < 6; ++k) L->tP[6 * (t0 + i) + k] = o[9 + k][i];
    }
}

/* 1D shape matching of edges e0 .. e0+n-1 (section 4.2, eqs. 14-15): 6
   floats per edge into out. On coarse levels (conserve) a compressed edge
   is skipped, keeping the fine wrinkle. */
static void pbd_sm__edge_block(const pbd_sm__level *L, int e0, int n, const float *x, int conserve, float beta,
                               float *out) {
    enum { B = PBD_SM__BLOCK };
    float ax[B], ay[B], az[B], bx[B], by[B], bz[B], wa[B], wb[B], sa[B], sb[B], l0s[B], o[6][B];
    for (int i = 0; i < n; ++i) {
        int ia = L->edge[2 * (e0 + i)], ib = L->edge[2 * (e0 + i) + 1];
        const float *pa = x + 4 * ia, *pb = x + 4 * ib;
        int fa = !(pa[3] > 0), fb = !(pb[3] > 0);
        ax[i] = pa[0]; ay[i] = pa[1]; az[i] = pa[2];
        bx[i] = pb[0]; by[i] = pb[1]; bz[i] = pb[2];
        wa[i] = fa ? 1000.0f * L->me[ia] : L->me[ia];
        wb[i] = fb ? 1000.0f * L->me[ib] : L->me[ib];
        sa[i] = fa ? 0.0f : beta * L->inv_re[ia];
        sb[i] = fb ? 0.0f : beta * L->inv_re[ib];
        l0s[i] = L->eq[3 * (e0 + i) + 2];
    }
    for (int i = 0; i < n; ++i) {
        float l0 = l0s[i];
        float dxx = bx[i] - ax[i], dyy = by[i] - ay[i], dzz = bz[i] - az[i];
        float len = sqrtf(dxx * dxx + dyy * dyy + dzz * dzz);
        int active = len > 1e-20f && !(conserve && len < l0);
        float il = 1.0f / (active ? len : 1.0f);
        float ux = dxx * il, uy = dyy * il, uz = dzz * il;
        float W = wa[i] + wb[i];
        float q1 = l0 * wb[i] / W, q2 = l0 * wa[i] / W; /* |x^0 - t^0| for these weights */
        float tx = (wa[i] * ax[i] + wb[i] * bx[i]) / W, ty = (wa[i] * ay[i] + wb[i] * by[i]) / W,
              tz = (wa[i] * az[i] + wb[i] * bz[i]) / W;
        float sai = sa[i], sbi = sb[i];
        float ka = active ? sai : 0.0f, kb = active ? sbi : 0.0f;
        o[0][i] = ka * (tx - q1 * ux - ax[i]);
        o[1][i] = ka * (ty - q1 * uy - ay[i]);
        o[2][i] = ka * (tz - q1 * uz - az[i]);
        o[3][i] = kb * (tx + q2 * ux - bx[i]);
        o[4][i] = kb * (ty + q2 * uy - by[i]);
        o[5][i] = kb * (tz + q2 * uz - bz[i]);
    }
    for (int i = 0; i < n; ++i)
        for (int k = 0; k < 6; ++k) out[6 * i + k] = o[k][i];
}

/* --- passes ------------------------------------------------------------------- */

static void pbd_sm__add3(float *x, const float *d) { x[0] += d[0]; x[1] += d[1]; x[2] += d[2]; }

/* Gathers the corrections of every element end of each vertex (in element
   order: deterministic for any thread count) and applies them. */
static void pbd_sm__gather(int nv, float *x, const int *start, const int *list, const float *dx) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int v = 0; v < nv; ++v) {
        float s[3] = {0, 0, 0};
        for (int e = start[v]; e < start[v + 1]; ++e) pbd_sm__add3(s, dx + 3 * list[e]);
        pbd_sm__add3(x + 4 * v, s);
    }
}

/* One element type of one level: two-pass (blocks of goals into the
   per-element scratch, then the per-vertex gather) or independent sets
   (per colour, blocks computed and applied at once; no two elements of a
   colour share a vertex, the overflow colour 64 excepted, which is walked
   in order). arity 3: triangles, 2: edges. */
static void pbd_sm__match(const pbd_sm_cloth *c, pbd_sm__level *L, float *x, int conserve, int arity) {
    int n = arity == 3 ? L->nt : L->ne, ncol = arity == 3 ? L->ntc : L->nec;
    const int *col = arity == 3 ? L->tc : L->ec, *el = arity == 3 ? L->tri : L->edge;
    float *scratch = arity == 3 ? L->tdx : L->edx;
    int stride = 3 * arity;
    if (c->scheme == PBD_SM_CLOTH_TWO_PASS) {
        int nb = (n + PBD_SM__BLOCK - 1) / PBD_SM__BLOCK;
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int b = 0; b < nb; ++b) {
            int e0 = b * PBD_SM__BLOCK, m = n - e0 < PBD_SM__BLOCK ? n - e0 : PBD_SM__BLOCK;
            if (arity == 3) pbd_sm__tri_block(L, e0, m, x, conserve, c->alpha, scratch + (size_t)stride * e0);
            else pbd_sm__edge_block(L, e0, m, x, conserve, c->beta, scratch + (size_t)stride * e0);
        }
        if (arity == 3) pbd_sm__gather(L->nv, x, L->vt_start, L->vt_list, scratch);
        else pbd_sm__gather(L->nv, x, L->ve_start, L->ve_list, scratch);
        return;
    }
    for (int k = 0; k < ncol; ++k) {
        int lo = col[k], hi = col[k + 1];
        int overflow = k == ncol - 1 && hi - lo > 0 && L->overflow[arity == 3 ? 0 : 1];
        int nb = (hi - lo + PBD_SM__BLOCK - 1) / PBD_SM__BLOCK;
        if (overflow) { /* serial, one element at a time */
            PBD_SM__PRAGMA(omp single)
            for (int e = lo; e < hi; ++e) {
                float d[9];
                if (arity == 3) pbd_sm__tri_block(L, e, 1, x, conserve, c->alpha, d);
                else pbd_sm__edge_block(L, e, 1, x, conserve, c->beta, d);
                for (int j = 0; j < arity; ++j) pbd_sm__add3(x + 4 * el[arity * e + j], d + 3 * j);
            }
            continue;
        }
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int b = 0; b < nb; ++b) {
            float d[9 * PBD_SM__BLOCK];
            int e0 = lo + b * PBD_SM__BLOCK, m = hi - e0 < PBD_SM__BLOCK ? hi - e0 : PBD_SM__BLOCK;
            if (arity == 3) pbd_sm__tri_block(L, e0, m, x, conserve, c->alpha, d);
            else pbd_sm__edge_block(L, e0, m, x, conserve, c->beta, d);
            for (int e = 0; e < m; ++e)
                for (int j = 0; j < arity; ++j) pbd_sm__add3(x + 4 * el[arity * (e0 + e) + j], d + stride * e + 3 * j);
        }
    }
}

static void pbd_sm__level_match(const pbd_sm_cloth *c, pbd_sm__level *L, float *x, int conserve) {
    if (c->beta > 0) pbd_sm__match(c, L, x, conserve, 2);
    if (c->alpha > 0) pbd_sm__match(c, L, x, conserve, 3);
}

static void pbd_sm__store(pbd_sm__level *L, const float *x) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int v = 0; v < L->nv; ++v) memcpy(L->xhat + 4 * v, x + 4 * v, 4 * sizeof(float));
}

/* x_c += R (x_f - xhat_f): restriction of the position differences. */
static void pbd_sm__restrict(pbd_sm__level *C, const pbd_sm__level *F, const float *xf) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int v = 0; v < C->nv; ++v) {
        if (!(C->x[4 * v + 3] > 0)) continue;
        float s[3] = {0, 0, 0};
        for (int e = C->res_start[v]; e < C->res_start[v + 1]; ++e) {
            int f = C->res_idx[e];
            float wv = C->res_w[e];
            for (int k = 0; k < 3; ++k) s[k] += wv * (xf[4 * f + k] - F->xhat[4 * f + k]);
        }
        pbd_sm__add3(C->x + 4 * v, s);
    }
}

/* x_f += P (x_c - xhat_c): prolongation of the position differences. */
static void pbd_sm__prolong(const pbd_sm__level *C, const pbd_sm__level *F, float *xf) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int f = 0; f < F->nv; ++f) {
        if (!(xf[4 * f + 3] > 0)) continue;
        float s[3] = {0, 0, 0};
        for (int k = 0; k < 3; ++k) {
            int v = C->pro_idx[3 * f + k];
            float wv = C->pro_w[3 * f + k];
            for (int j = 0; j < 3; ++j) s[j] += wv * (C->x[4 * v + j] - C->xhat[4 * v + j]);
        }
        pbd_sm__add3(xf + 4 * f, s);
    }
}

/* Coarse positions from the finest at the start of a V-cycle (section 4.3):
   nested levels copy their vertices (with the inverse mass, so pins hold),
   non-nested ones take the restriction of the positions. */
static void pbd_sm__sync_coarse(pbd_sm_cloth *c, float *xfine) {
    for (int l = c->nlevels - 1; l > 0; --l) {
        pbd_sm__level *F = &c->lv[l], *C = &c->lv[l - 1];
        const float *xf = l == c->nlevels - 1 ? xfine : F->x;
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int v = 0; v < C->nv; ++v) {
            float *xc = C->x + 4 * v;
            if (C->fine_of) {
                memcpy(xc, xf + 4 * C->fine_of[v], 4 * sizeof(float));
                continue;
            }
            float s[3] = {0, 0, 0};
            for (int e = C->res_start[v]; e < C->res_start[v + 1]; ++e)
                for (int k = 0; k < 3; ++k) s[k] += C->res_w[e] * xf[4 * C->res_idx[e] + k];
            xc[0] = s[0]; xc[1] = s[1]; xc[2] = s[2];
            xc[3] = 1.0f / C->mass[v];
        }
    }
}

/* One V-cycle (section 4.3, Algorithm 2) on the finest positions x. Only
   position differences travel between levels. We store x^ of a level
   before it receives the difference of its neighbour level rather than
   after (Algorithm 2, lines 2 and 6), so that what a level passes on is its
   whole change: a coarse level's correction then reaches the finest level
   through every level in between, as it does through the shared particles
   of a nested model, instead of stopping at the next finer level. */
static void pbd_sm__vcycle(pbd_sm_cloth *c, float *x) {
    int top = c->nlevels - 1;
#define PBD_SM__X(l) ((l) == top ? x : c->lv[l].x)
    pbd_sm__sync_coarse(c, x);
    pbd_sm__store(&c->lv[top], x);
    for (int l = top; l >= 1; --l) {
        pbd_sm__level_match(c, &c->lv[l], PBD_SM__X(l), c->conserve && l < top);
        pbd_sm__store(&c->lv[l - 1], PBD_SM__X(l - 1));
        pbd_sm__restrict(&c->lv[l - 1], &c->lv[l], PBD_SM__X(l));
    }
    pbd_sm__store(&c->lv[0], PBD_SM__X(0)); /* level 0's own match only (line 6) */
    for (int l = 0; l <= top; ++l) {
        pbd_sm__level_match(c, &c->lv[l], PBD_SM__X(l), c->conserve && l < top);
        if (l == top) break;
        pbd_sm__store(&c->lv[l + 1], PBD_SM__X(l + 1));
        pbd_sm__prolong(&c->lv[l], &c->lv[l + 1], PBD_SM__X(l + 1));
    }
#undef PBD_SM__X
}

/* --- forces: bending and damping (section 4.4) ---------------------------------- */

/* Explicit bending force f = -k Q x over the substep: v += h w f and, the
   prediction being made already, p += h^2 w f. */
static void pbd_sm__bend(pbd_sm_cloth *c, const pbd_solve_context *s) {
    const pbd_sm__level *L = &c->lv[c->nlevels - 1];
    const float *x = s->x + 4 * c->particles.first;
    float *v = s->v + 4 * c->particles.first, *p = s->p + 4 * c->particles.first;
    float k = c->bending, h = s->h;
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int i = 0; i < L->nv; ++i) {
        float wi = x[4 * i + 3];
        if (!(wi > 0)) continue;
        float f[3] = {0, 0, 0};
        for (int e = c->q_start[i]; e < c->q_start[i + 1]; ++e) {
            const float *xj = x + 4 * c->q_idx[e];
            float q = c->q_val[e];
            f[0] += q * xj[0]; f[1] += q * xj[1]; f[2] += q * xj[2];
        }
        for (int j = 0; j < 3; ++j) {
            float dv = -k * h * wi * f[j];
            v[4 * i + j] += dv;
            p[4 * i + j] += h * dv;
        }
    }
}

/* Per-triangle damping (eqs. 19-20) of the finest level's velocities. We
   use the unit r_i (k_d becomes a dimensionless fraction in [0, 1] of the
   radial relative velocity removed) and, as for the shape-matching
   corrections, average over the triangles of a vertex. */
static void pbd_sm__damp(pbd_sm_cloth *c, const pbd_solve_context *s) {
    pbd_sm__level *L = &c->lv[c->nlevels - 1];
    const float *x = s->x + 4 * c->particles.first;
    float *v = s->v + 4 * c->particles.first;
    float kd = c->damping;
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int t = 0; t < L->nt; ++t) {
        const int *T = L->tri + 3 * t;
        float m[3] = {L->mass[T[0]], L->mass[T[1]], L->mass[T[2]]}, M = m[0] + m[1] + m[2];
        float xc[3], vc[3];
        for (int k = 0; k < 3; ++k) {
            xc[k] = (m[0] * x[4 * T[0] + k] + m[1] * x[4 * T[1] + k] + m[2] * x[4 * T[2] + k]) / M;
            vc[k] = (m[0] * v[4 * T[0] + k] + m[1] * v[4 * T[1] + k] + m[2] * v[4 * T[2] + k]) / M;
        }
        for (int j = 0; j < 3; ++j) {
            float r[3], dv[3], *o = L->tdx + 9 * t + 3 * j;
            pbd_sm__sub3(x + 4 * T[j], xc, r);
            pbd_sm__sub3(v + 4 * T[j], vc, dv);
            float rr = pbd_sm__dot3(r, r);
            float s2 = rr > 0 && x[4 * T[j] + 3] > 0 ? -kd * L->inv_rt[T[j]] * pbd_sm__dot3(r, dv) / rr : 0.0f;
            for (int k = 0; k < 3; ++k) o[k] = s2 * r[k];
        }
    }
    pbd_sm__gather(L->nv, v, L->vt_start, L->vt_list, L->tdx);
}

/* --- plugin -------------------------------------------------------------------- */

static void pbd_sm__cloth_begin_substep(void *user, const pbd_solve_context *s) {
    pbd_sm_cloth *c = (pbd_sm_cloth *)user;
    if (c->bending > 0) pbd_sm__bend(c, s);
}
static void pbd_sm__cloth_project(void *user, const pbd_solve_context *s) {
    pbd_sm_cloth *c = (pbd_sm_cloth *)user;
    pbd_sm__vcycle(c, s->p + 4 * c->particles.first);
}
static void pbd_sm__cloth_end_substep(void *user, const pbd_solve_context *s) {
    pbd_sm_cloth *c = (pbd_sm_cloth *)user;
    if (c->damping > 0) pbd_sm__damp(c, s);
}
static void pbd_sm__cloth_destroy(void *user) { pbd_sm__cloth_free((pbd_sm_cloth *)user); }

/* --- public API ------------------------------------------------------------------ */

PBD_SM_DEF pbd_sm_cloth_desc pbd_sm_cloth_desc_default(void) {
    pbd_sm_cloth_desc d;
    memset(&d, 0, sizeof d);
    d.density = 0.1f;
    d.levels = 5;
    d.reduction = 0.5f;
    d.nested = 1;
    d.alpha = 1;
    d.beta = 1;
    d.conserve_wrinkles = 1;
    d.damping = 0.05f;
    d.bending_stiffness = 1e-4f;
    d.scheme = PBD_SM_CLOTH_TWO_PASS;
    d.thickness = 0.005f;
    return d;
}

static int pbd_sm__finite_n(const float *x, long n) {
    for (long i = 0; i < n; ++i)
        if (!(x[i] == x[i]) || x[i] > FLT_MAX || x[i] < -FLT_MAX) return 0;
    return 1;
}
static int pbd_sm__in01(float x) { return x >= 0 && x <= 1; }

static pbd_result pbd_sm__check_cloth_desc(const pbd_sm_cloth_desc *d) {
    if (!d->positions || !d->triangles || (d->keep_count > 0 && !d->keep_vertices)) return PBD_ERROR_NULL_POINTER;
    if (d->vertex_count < 3 || d->triangle_count < 1 || d->keep_count < 0) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->vertex_count > INT_MAX / 4 || d->triangle_count > INT_MAX / 9) return PBD_ERROR_OVERFLOW;
    if (!pbd_sm__finite_n(d->positions, 3L * d->vertex_count)) return PBD_ERROR_NOT_FINITE;
    if (d->initial_positions && !pbd_sm__finite_n(d->initial_positions, 3L * d->vertex_count)) return PBD_ERROR_NOT_FINITE;
    if (!pbd_sm__finite_n(&d->density, 1) || !pbd_sm__finite_n(&d->bending_stiffness, 1) ||
        !pbd_sm__finite_n(&d->thickness, 1) || !pbd_sm__finite_n(&d->reduction, 1))
        return PBD_ERROR_NOT_FINITE;
    if (!(d->density > 0)) return PBD_ERROR_NEGATIVE_MASS;
    if (d->levels < 1 || d->levels > 10 || !(d->reduction >= 0.05f && d->reduction <= 0.9f) ||
        (d->nested != 0 && d->nested != 1) || !pbd_sm__in01(d->alpha) || !pbd_sm__in01(d->beta) ||
        !pbd_sm__in01(d->damping) || !(d->bending_stiffness >= 0) || !(d->thickness >= 0) ||
        (d->scheme != PBD_SM_CLOTH_TWO_PASS && d->scheme != PBD_SM_CLOTH_INDEPENDENT_SETS) ||
        (d->conserve_wrinkles != 0 && d->conserve_wrinkles != 1))
        return PBD_ERROR_INVALID_ARGUMENT;
    for (long i = 0; i < 3L * d->triangle_count; ++i)
        if (d->triangles[i] < 0 || d->triangles[i] >= d->vertex_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    for (int t = 0; t < d->triangle_count; ++t) {
        const int *T = d->triangles + 3 * t;
        if (T[0] == T[1] || T[1] == T[2] || T[0] == T[2]) return PBD_ERROR_DEGENERATE;
    }
    for (int k = 0; k < d->keep_count; ++k)
        if (d->keep_vertices[k] < 0 || d->keep_vertices[k] >= d->vertex_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    return PBD_OK;
}

/* Builds the whole cloth (no world involved). */
static pbd_result pbd_sm__cloth_build(const pbd_sm_cloth_desc *d, pbd_sm_cloth **out) {
    pbd_sm_cloth *c = (pbd_sm_cloth *)pbd_sm__alloc_n(1, sizeof *c);
    if (!c) return PBD_ERROR_OUT_OF_MEMORY;
    memset(c, 0, sizeof *c);
    c->lv = (pbd_sm__level *)pbd_sm__alloc_n((size_t)d->levels, sizeof(pbd_sm__level));
    if (!c->lv) { PBD_SM_FREE(c); return PBD_ERROR_OUT_OF_MEMORY; }
    memset(c->lv, 0, sizeof(pbd_sm__level) * (size_t)d->levels);
    c->nlevels = d->levels;
    c->nested = d->nested;
    c->alpha = d->alpha;
    c->beta = d->beta;
    c->damping = d->damping;
    c->bending = d->bending_stiffness;
    c->conserve = d->conserve_wrinkles;
    c->scheme = d->scheme;
    pbd_sm__level *F = &c->lv[d->levels - 1];
    F->nv = d->vertex_count;
    F->nt = d->triangle_count;
    F->tri = (int *)pbd_sm__alloc_n((size_t)F->nt * 3, sizeof(int));
    F->rest = (float *)pbd_sm__alloc_n((size_t)F->nv * 3, sizeof(float));
    pbd_result r = F->tri && F->rest ? PBD_OK : PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) {
        memcpy(F->tri, d->triangles, sizeof(int) * 3 * (size_t)F->nt);
        memcpy(F->rest, d->positions, sizeof(float) * 3 * (size_t)F->nv);
        r = pbd_sm__level_finish(F, d->density);
    }
    if (r == PBD_OK)
        for (int v = 0; v < F->nv; ++v)
            if (F->vt_start[v + 1] == F->vt_start[v]) r = PBD_ERROR_INVALID_ARGUMENT; /* a vertex without triangle */
    if (r == PBD_OK) r = pbd_sm__build_hierarchy(c, d, d->levels);
    if (r == PBD_OK) r = pbd_sm__bending_matrix(c);
    if (r != PBD_OK) { c->nlevels = d->levels; pbd_sm__cloth_free(c); return r; }
    for (int l = 0; l < d->levels - 1; ++l) /* coarse positions until the first V-cycle: the rest shape */
        for (int v = 0; v < c->lv[l].nv; ++v) {
            memcpy(c->lv[l].x + 4 * v, c->lv[l].rest + 3 * v, 3 * sizeof(float));
            c->lv[l].x[4 * v + 3] = 1.0f / c->lv[l].mass[v];
        }
    *out = c;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_cloth(pbd_world *w, const pbd_sm_cloth_desc *d, pbd_sm_cloth **out,
                                       pbd_range *particles) {
    if (!w || !d || !out) return PBD_ERROR_NULL_POINTER;
    pbd_result r = pbd_sm__check_cloth_desc(d);
    if (r != PBD_OK) return r;
    pbd_sm_cloth *c = NULL;
    r = pbd_sm__cloth_build(d, &c);
    if (r != PBD_OK) return r;
    const pbd_sm__level *F = &c->lv[c->nlevels - 1];
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = d->initial_positions ? d->initial_positions : d->positions;
    pd.masses = F->mass;
    pd.radius = d->thickness;
    pd.count = F->nv;
    r = pbd_add_particles(w, &pd, &c->particles);
    if (r != PBD_OK) { pbd_sm__cloth_free(c); return r; }
    long work = 0;
    for (int l = 0; l < c->nlevels; ++l) work += 2L * (c->lv[l].nt + c->lv[l].ne + c->lv[l].nv);
    pbd_plugin_desc pl = pbd_plugin_desc_default();
    pl.name = "pbd_sm cloth";
    pl.user = c;
    pl.parallel = PBD_SM__OPENMP;
    pl.particle_end = c->particles.first + c->particles.count;
    pl.work = work;
    pl.begin_substep = pbd_sm__cloth_begin_substep;
    pl.project = pbd_sm__cloth_project;
    pl.end_substep = pbd_sm__cloth_end_substep;
    pl.destroy = pbd_sm__cloth_destroy;
    r = pbd_add_plugin(w, &pl, &c->plugin);
    if (r != PBD_OK) { pbd_sm__cloth_free(c); return r; } /* only out of memory: the particles stay */
    c->world = w;
    *out = c;
    if (particles) *particles = c->particles;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_remove_cloth(pbd_world *w, pbd_sm_cloth *c) {
    if (!w || !c) return PBD_ERROR_NULL_POINTER;
    if (c->world != w) return PBD_ERROR_INVALID_ARGUMENT;
    return pbd_remove_plugin(w, c->plugin); /* frees c */
}

PBD_SM_DEF pbd_range pbd_sm_cloth_particles(const pbd_sm_cloth *c) {
    pbd_range r = {0, 0};
    return c ? c->particles : r;
}
PBD_SM_DEF int pbd_sm_cloth_level_count(const pbd_sm_cloth *c) { return c ? c->nlevels : 0; }

PBD_SM_DEF pbd_result pbd_sm_cloth_level(const pbd_sm_cloth *c, int level, int *vertex_count, int *triangle_count,
                                         const int **triangles, const float **positions) {
    if (!c) return PBD_ERROR_NULL_POINTER;
    if (level < 0 || level >= c->nlevels) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    const pbd_sm__level *L = &c->lv[level];
    if (vertex_count) *vertex_count = L->nv;
    if (triangle_count) *triangle_count = L->nt;
    if (triangles) *triangles = L->tri;
    if (positions) *positions = level == c->nlevels - 1 ? pbd_world_positions(c->world) + 4 * c->particles.first : L->x;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_set_stiffness(pbd_sm_cloth *c, float alpha, float beta) {
    if (!c) return PBD_ERROR_NULL_POINTER;
    if (!pbd_sm__in01(alpha) || !pbd_sm__in01(beta)) return PBD_ERROR_INVALID_ARGUMENT;
    c->alpha = alpha;
    c->beta = beta;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_wrinkle_conservation(pbd_sm_cloth *c, int on) {
    if (!c) return PBD_ERROR_NULL_POINTER;
    if (on != 0 && on != 1) return PBD_ERROR_INVALID_ARGUMENT;
    c->conserve = on;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_damping(pbd_sm_cloth *c, float damping) {
    if (!c) return PBD_ERROR_NULL_POINTER;
    if (!pbd_sm__in01(damping)) return PBD_ERROR_INVALID_ARGUMENT;
    c->damping = damping;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_bending(pbd_sm_cloth *c, float k) {
    if (!c) return PBD_ERROR_NULL_POINTER;
    if (!pbd_sm__finite_n(&k, 1)) return PBD_ERROR_NOT_FINITE;
    if (!(k >= 0)) return PBD_ERROR_INVALID_ARGUMENT;
    c->bending = k;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_scheme(pbd_sm_cloth *c, pbd_sm_cloth_scheme scheme) {
    if (!c) return PBD_ERROR_NULL_POINTER;
    if (scheme != PBD_SM_CLOTH_TWO_PASS && scheme != PBD_SM_CLOTH_INDEPENDENT_SETS) return PBD_ERROR_INVALID_ARGUMENT;
    c->scheme = scheme;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_strain(const pbd_sm_cloth *c, const pbd_world *w, float *average, float *maximum) {
    if (!c || !w || !average || !maximum) return PBD_ERROR_NULL_POINTER;
    if (c->world != w) return PBD_ERROR_INVALID_ARGUMENT;
    const pbd_sm__level *L = &c->lv[c->nlevels - 1];
    const float *x = pbd_world_positions(w) + 4 * c->particles.first;
    double sum = 0;
    float mx = -FLT_MAX;
    for (int e = 0; e < L->ne; ++e) {
        float d[3];
        pbd_sm__sub3(x + 4 * L->edge[2 * e + 1], x + 4 * L->edge[2 * e], d);
        float l0 = L->eq[3 * e + 2], s = (pbd_sm__len3(d) - l0) / l0;
        sum += s > 0 ? s : 0;
        if (s > mx) mx = s;
    }
    *average = (float)(sum / (L->ne ? L->ne : 1));
    *maximum = mx;
    return PBD_OK;
}

#endif /* PBD_SM_IMPLEMENTATION_INCLUDED */
#endif /* PBD_SM_IMPLEMENTATION */
