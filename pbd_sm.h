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

   ORIENTED PARTICLES (section "oriented"; survey 4.4)
   ---------------------------------------------------
   Give world particles an orientation, an angular velocity and an
   ellipsoid, and one shape-matching group per particle over the 1-ring of
   a mesh (edges); sparse structures (chains, one-particle-wide branches,
   single particles) then match stably, and the ellipsoids collide with
   the world's colliders:

       pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
       od.particles = range;                 // from pbd_add_particles
       od.edges = edges; od.edge_count = ne; // local indices into range
       od.radii = radii;                     // 3 per particle (or od.radius)
       od.orientations = rest_q;             // optional, 4 per particle
       pbd_sm_oriented *o;
       pbd_sm_add_oriented(w, &od, &o);      // owned by the world (a plugin)
       pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
       sd.rest_vertices = mesh; sd.vertex_count = nv;
       pbd_sm_skin *skin;
       pbd_sm_skin_create(o, &sd, &skin);    // particles as bones
       ... pbd_world_step(w, dt); pbd_sm_skin_apply(skin, w, out_vertices);

   Set a particle's own collision radius (pbd_particles_desc.radius) to
   about the ellipsoid's smallest radius: the world's contacts see that
   sphere, the plugin pushes the rest of the ellipsoid out (frictionless).

   SURFACE VOLUME (section "surface volume"; survey 4.5.1)
   -------------------------------------------------------
   Keep the volume of a closed triangle mesh over world particles (a
   cloth or shape-matched surface without interior particles):

       pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
       vd.triangles = tris; vd.triangle_count = nt;  // world indices
       vd.alpha = 1;      // 1 global weights, 0 local (pairs by ray casting)
       pbd_sm_volume *v;
       pbd_sm_add_surface_volume(w, &vd, &v);

   Both run serially inside the world's step (deterministic for any
   thread count), allocate nothing in it, and are not part of the world's
   snapshot.

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
/* Oriented particles (survey 4.4; Mueller and Chentanez 2011, "Solid
   simulation with oriented particles"). A set of world particles that also
   carry an orientation q (unit quaternion x y z w, body to world) and an
   angular velocity omega, and an ellipsoid (radii a b c along the body
   axes). One shape-matching group per particle over its 1-ring (the
   particle and its edge neighbours); each particle's ellipsoid moment
   matrix (eq. 20) is added to its group's moment matrix (eq. 25), so the
   optimal rotation is well defined even for a single particle or a
   collinear chain, where plain shape matching is rank deficient. The set
   runs as a plugin of the world (pbd.h section "plugins"):
     begin_substep  q_p = [w/|w| sin(|w|h/2), cos(|w|h/2)] q   (eq. 27)
     project        for each group in order (Gauss-Seidel): goals
                    g_j = c + R (rest_j - rest_c), p_j += stiffness (g_j - p_j),
                    and the centre's q_p = R rest_q (only the centre's);
                    then the ellipsoids against the world's colliders
     end_substep    omega = axis(q_p q^-1) angle(q_p q^-1) / h with the
                    shorter of r and -r (eq. 30), q = q_p.
   Groups are solved serially in particle order, so the result does not
   depend on the thread count. Particles with inverse mass 0 (pinned,
   kinematic) neither move nor turn (set their orientation by hand).
   The state belongs to the world: it is freed by pbd_world_destroy or by
   pbd_remove_plugin(w, pbd_sm_oriented_plugin(o)). It is not part of the
   world's snapshot. */
typedef struct pbd_sm_oriented pbd_sm_oriented;

typedef struct pbd_sm_oriented_desc {
    pbd_range particles;           /* world particles that get orientations, count >= 1 */
    const int *edges;              /* edge_count*2 indices local to `particles` (0..count-1):
                                      the mesh whose 1-rings are the groups; may be NULL
                                      when edge_count is 0 (single-particle groups) */
    int edge_count;
    const float *radii;            /* optional count*3 ellipsoid radii (> 0) along the body axes */
    float radius;                  /* sphere radius when radii is NULL, > 0; default 0.05 */
    const float *orientations;     /* optional count*4 rest orientations (unit quaternions);
                                      default identity */
    float stiffness;               /* shape-matching alpha in [0, 1] per iteration; default 1 */
    int collide;                   /* ellipsoids against the world's colliders; default 1 */
    int rotation_iterations;       /* warm-started rotation extraction, 1..100; default 8 */
} pbd_sm_oriented_desc;

PBD_SM_DEF pbd_sm_oriented_desc pbd_sm_oriented_desc_default(void);
/* Adds the set and its plugin; on error nothing changes. Errors: NULL
   pointers; INVALID_ARGUMENT for an empty range, a stiffness outside
   [0, 1], iterations outside 1..100; INDEX_OUT_OF_RANGE for particles or
   edge ends outside the range; DEGENERATE for a self edge, radii <= 0, a
   zero quaternion, or a zero total mass (every particle of mass 0;
   particles of mass 0 among others weigh as the mean one); NOT_FINITE
   for NaN/Inf. The particles are marked coupled (pbd_world_mark_coupled):
   orientations hold angular momentum the world does not see. */
PBD_SM_DEF pbd_result pbd_sm_add_oriented(pbd_world *w, const pbd_sm_oriented_desc *desc,
                                          pbd_sm_oriented **out);
PBD_SM_DEF pbd_plugin pbd_sm_oriented_plugin(const pbd_sm_oriented *o);
PBD_SM_DEF pbd_range pbd_sm_oriented_range(const pbd_sm_oriented *o);
/* Orientation q (4 floats) and angular velocity omega (3 floats, rad/s,
   world frame) of particle `index` (local, 0..count-1); either may be NULL. */
PBD_SM_DEF pbd_result pbd_sm_oriented_get(const pbd_sm_oriented *o, int index, float *q, float *omega);
/* Sets them (either may be NULL to keep it); q must be non-zero (it is
   normalised). */
PBD_SM_DEF pbd_result pbd_sm_oriented_set(pbd_sm_oriented *o, int index, const float *q, const float *omega);
/* The members (local indices, centre first) of particle index's group. */
PBD_SM_DEF pbd_result pbd_sm_oriented_group(const pbd_sm_oriented *o, int index, int *members, int max,
                                            int *count);
/* Rotational kinetic energy sum 1/2 omega^T I omega of the ellipsoids
   (I = m/5 diag(b^2+c^2, a^2+c^2, a^2+b^2) in the body frame). */
PBD_SM_DEF double pbd_sm_oriented_rotational_energy(const pbd_sm_oriented *o, const pbd_world *w);

/* Stateless pieces, usable with your own storage. */
/* Eq. 27: q_out = [omega/|omega| sin(|omega|h/2), cos(|omega|h/2)] q,
   normalised; q_out = q when |omega| h < 1e-9. q_out may alias q. */
PBD_SM_DEF void pbd_sm_quat_integrate(const float *q, const float *omega, float h, float *q_out);
/* Eq. 30: omega = axis(r) angle(r) / h with r = q_p q^-1, taking -r when
   r.w < 0 (the shorter rotation); zero when the angle is below 1e-9. */
PBD_SM_DEF void pbd_sm_quat_angular_velocity(const float *q, const float *q_p, float h, float *omega);
/* Eq. 20 for an ellipsoid of mass m with radii r (3) whose body frame is
   q now and rest_q at rest: A = m/5 R(q) diag(a^2, b^2, c^2) R(rest_q)^T,
   the moment matrix sum m x x_rest^T of its mass about its centre
   (row-major 3x3). The survey writes diag(..) R for rest_q = identity; with
   the current rotation on the left, as here, polar(A) = R(q) R(rest_q)^T. */
PBD_SM_DEF void pbd_sm_ellipsoid_moment(float m, const float *r, const float *q, const float *rest_q, float *A);

/* Linear blend skinning with the oriented particles as bones (survey 4.4):
   vertex v = sum_b w_b (x_b + R(q_b) R(rest_q_b)^T (v_rest - x_rest_b)).
   A skin refers to its oriented set and must not outlive it. */
typedef struct pbd_sm_skin pbd_sm_skin;
typedef struct pbd_sm_skin_desc {
    const float *rest_vertices; /* vertex_count*3, in the pose of the set's rest positions */
    int vertex_count;           /* >= 1 */
    int influences;             /* bones per vertex, 1..8; default 4 */
    const int *bones;           /* optional vertex_count*influences local particle indices
                                   (-1: unused slot) ... */
    const float *weights;       /* ... with their weights (>= 0, summing to > 0; normalised);
                                   when bones is NULL the `influences` nearest particles
                                   at rest are used with weights 1 / (d^2 + eps^2) */
} pbd_sm_skin_desc;

PBD_SM_DEF pbd_sm_skin_desc pbd_sm_skin_desc_default(void);
PBD_SM_DEF pbd_result pbd_sm_skin_create(const pbd_sm_oriented *o, const pbd_sm_skin_desc *desc,
                                         pbd_sm_skin **out);
/* Writes vertex_count*3 floats from the world's current positions and the
   set's orientations. */
PBD_SM_DEF pbd_result pbd_sm_skin_apply(const pbd_sm_skin *s, const pbd_world *w, float *out_vertices);
PBD_SM_DEF int pbd_sm_skin_vertex_count(const pbd_sm_skin *s);
PBD_SM_DEF void pbd_sm_skin_destroy(pbd_sm_skin *s);

// ==== surface volume ========================================================
/* Volume conservation of a closed surface mesh (survey 4.5.1; Diziol,
   Bender and Bayer 2011). The volume is the divergence-theorem sum over
   the triangles (eq. 12), the constraint C = V - V_rest is projected as
   dx_i = -s w_i C grad_i C / sum_j w_j |grad_j C|^2 (eq. 13) with
   grad_i C ~ n_i / 3, n_i the sum of the area-weighted normals of the
   triangles around particle i, and the weights
       w_i = (1 - alpha) w_local_i + alpha / n,
       w_local_i ~ beta s_pair dd_i + (1 - beta) |dx_i|   (normalised to sum 1),
   where dx_i is the particle's displacement by the solver in this substep
   (its prediction minus its current p: the shape-matching step of the
   paper, here whatever ran before) and dd_i the change of the distance to
   its opposing particle, found once by casting a ray from each particle
   along its inward normal. The weights are smoothed by `smoothing` passes
   of a Laplacian filter over the mesh edges; particles touching a collider
   (within contact_distance) and particles with inverse mass 0 then get
   weight 0, so the correction never pushes into a collider. After the
   velocity update the velocities are corrected likewise so that
   dC/dt = sum_i grad_i C . v_i = 0 (a divergence-free velocity field).
   Runs as a world plugin after the constraint groups of each iteration,
   serially (deterministic for any thread count). Owned by the world like
   the oriented set. */
typedef struct pbd_sm_volume pbd_sm_volume;

typedef struct pbd_sm_volume_desc {
    const int *triangles;      /* triangle_count*3 world particle indices: closed, consistently
                                  oriented, counter-clockwise seen from outside */
    int triangle_count;
    float alpha;               /* global (1) vs local (0) weights, [0, 1]; default 1 */
    float beta;                /* local weights: opposing-pair distance change (1) vs own
                                  displacement (0), [0, 1]; default 0.5 */
    float pair_stiffness;      /* s of the survey's local weight, >= 0; default 1 */
    int smoothing;             /* Laplacian passes over the weights, 0..64; default 2 */
    float stiffness;           /* fraction of C removed per projection, (0, 1]; default 1 */
    int velocity_correction;   /* make the velocity field divergence free; default 1 */
    float contact_distance;    /* a particle this close to a collider counts as colliding,
                                  >= 0; default 0.02 (the default particle radius plus a margin) */
} pbd_sm_volume_desc;

PBD_SM_DEF pbd_sm_volume_desc pbd_sm_volume_desc_default(void);
/* The rest volume is the current one. Errors: NULL pointers; INVALID_ARGUMENT
   for no triangles or parameters out of range; INDEX_OUT_OF_RANGE;
   DEGENERATE for a triangle with a repeated particle or zero area, or a
   volume <= 0 (inside out); NOT_CLOSED when an edge is not shared by
   exactly two triangles in opposite directions; NOT_FINITE. */
PBD_SM_DEF pbd_result pbd_sm_add_surface_volume(pbd_world *w, const pbd_sm_volume_desc *desc,
                                                pbd_sm_volume **out);
PBD_SM_DEF pbd_plugin pbd_sm_volume_plugin(const pbd_sm_volume *v);
/* Volume of the mesh at the world's current positions (eq. 12). */
PBD_SM_DEF pbd_result pbd_sm_volume_measure(const pbd_sm_volume *v, const pbd_world *w, double *volume);
PBD_SM_DEF double pbd_sm_volume_rest(const pbd_sm_volume *v);
/* Set the rest volume (> 0, finite) and the blend alpha ([0, 1]). */
PBD_SM_DEF pbd_result pbd_sm_volume_set_rest(pbd_sm_volume *v, double rest_volume);
PBD_SM_DEF pbd_result pbd_sm_volume_set_alpha(pbd_sm_volume *v, float alpha);
/* The opposing particle (world index, -1 if the ray found none) of world
   particle `particle` of the mesh. */
PBD_SM_DEF pbd_result pbd_sm_volume_opposite(const pbd_sm_volume *v, int particle, int *opposite);
/* The weights w_i of the last projection, for the mesh's particles in
   increasing world index; writes at most max, *count gets the number. */
PBD_SM_DEF pbd_result pbd_sm_volume_weights(const pbd_sm_volume *v, float *weights, int max, int *count);

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

struct pbd_sm_oriented {
    pbd_world *world;
    pbd_plugin plugin;
    int first, count;
    float stiffness;
    int collide, rotation_iterations;
    double *q, *qp;       /* count*4: orientation at the start of the substep, predicted */
    double *omega;        /* count*3 */
    double *rest_q;       /* count*4 */
    double *radii;        /* count*3 */
    double *rest;         /* count*3 rest positions */
    double *mass;         /* count: mass used for particles with inverse mass 0 */
    int *ring_start;      /* count+1 */
    int *ring;            /* group members, local, centre first */
};

struct pbd_sm_skin {
    const pbd_sm_oriented *o;
    int vertex_count, influences;
    int *bones;      /* vertex_count*influences, -1 unused */
    double *weights; /* normalised */
    double *local;   /* R(rest_q_b)^T (v_rest - x_rest_b), vertex_count*influences*3 */
};

static void pbd_sm__rotate(const double *R, const double *v, double *o) {
    for (int r = 0; r < 3; ++r) o[r] = R[3 * r] * v[0] + R[3 * r + 1] * v[1] + R[3 * r + 2] * v[2];
}
static void pbd_sm__rotate_back(const double *R, const double *v, double *o) {
    for (int c = 0; c < 3; ++c) o[c] = R[c] * v[0] + R[3 + c] * v[1] + R[6 + c] * v[2];
}

static void pbd_sm__quat_integrate_d(const double *q, const double *omega, double h, double *out) {
    double wl = sqrt(omega[0] * omega[0] + omega[1] * omega[1] + omega[2] * omega[2]);
    double r[4] = {q[0], q[1], q[2], q[3]};
    if (wl * h > 1e-9) { /* below that q_p = q (survey 4.4, for stability) */
        double s = sin(0.5 * wl * h) / wl;
        double dq[4] = {omega[0] * s, omega[1] * s, omega[2] * s, cos(0.5 * wl * h)};
        pbd_sm__quat_mul_into(r, dq, 1); /* r = dq q, eq. 27 */
    }
    for (int k = 0; k < 4; ++k) out[k] = r[k];
}

static void pbd_sm__quat_angular_velocity_d(const double *q, const double *qp, double h, double *omega) {
    double r[4] = {qp[0], qp[1], qp[2], qp[3]}, qc[4] = {-q[0], -q[1], -q[2], q[3]};
    pbd_sm__quat_mul_into(r, qc, 0); /* r = q_p q^-1 */
    if (r[3] < 0) for (int k = 0; k < 4; ++k) r[k] = -r[k]; /* the shorter of r and -r */
    double s = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    double angle = 2.0 * atan2(s, r[3]);
    omega[0] = omega[1] = omega[2] = 0;
    if (!(angle > 1e-9) || !(h > 0)) return;
    for (int k = 0; k < 3; ++k) omega[k] = r[k] / s * angle / h;
}

static void pbd_sm__ellipsoid_moment_d(double m, const double *r, const double *q, const double *rq, double *A) {
    double R1[9], R2[9];
    pbd_sm__quat_to_mat(q, R1);
    pbd_sm__quat_to_mat(rq, R2);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            double s = 0;
            for (int k = 0; k < 3; ++k) s += R1[3 * i + k] * r[k] * r[k] * R2[3 * j + k];
            A[3 * i + j] = 0.2 * m * s;
        }
}

PBD_SM_DEF void pbd_sm_quat_integrate(const float *q, const float *omega, float h, float *q_out) {
    double qd[4] = {q[0], q[1], q[2], q[3]}, wd[3] = {omega[0], omega[1], omega[2]}, o[4];
    pbd_sm__quat_integrate_d(qd, wd, h, o);
    for (int k = 0; k < 4; ++k) q_out[k] = (float)o[k];
}

PBD_SM_DEF void pbd_sm_quat_angular_velocity(const float *q, const float *q_p, float h, float *omega) {
    double a[4] = {q[0], q[1], q[2], q[3]}, b[4] = {q_p[0], q_p[1], q_p[2], q_p[3]}, o[3];
    pbd_sm__quat_angular_velocity_d(a, b, h, o);
    for (int k = 0; k < 3; ++k) omega[k] = (float)o[k];
}

PBD_SM_DEF void pbd_sm_ellipsoid_moment(float m, const float *r, const float *q, const float *rest_q, float *A) {
    double rd[3] = {r[0], r[1], r[2]}, qd[4] = {q[0], q[1], q[2], q[3]};
    double rq[4] = {rest_q[0], rest_q[1], rest_q[2], rest_q[3]}, Ad[9];
    pbd_sm__ellipsoid_moment_d(m, rd, qd, rq, Ad);
    for (int k = 0; k < 9; ++k) A[k] = (float)Ad[k];
}

PBD_SM_DEF pbd_sm_oriented_desc pbd_sm_oriented_desc_default(void) {
    pbd_sm_oriented_desc d;
    memset(&d, 0, sizeof d);
    d.radius = 0.05f;
    d.stiffness = 1.0f;
    d.collide = 1;
    d.rotation_iterations = 8;
    return d;
}

static void pbd_sm__oriented_free(pbd_sm_oriented *o) {
    if (!o) return;
    PBD_SM_FREE(o->q); PBD_SM_FREE(o->qp); PBD_SM_FREE(o->omega); PBD_SM_FREE(o->rest_q);
    PBD_SM_FREE(o->radii); PBD_SM_FREE(o->rest); PBD_SM_FREE(o->mass);
    PBD_SM_FREE(o->ring_start); PBD_SM_FREE(o->ring);
    PBD_SM_FREE(o);
}
static void pbd_sm__oriented_destroy_cb(void *user) { pbd_sm__oriented_free((pbd_sm_oriented *)user); }

/* The mass a group weighs particle j with: its dynamic mass, or for a
   pinned/kinematic particle its mass at creation. */
static double pbd_sm__oriented_mass(const pbd_sm_oriented *o, const float *p, int j) {
    float wi = p[4 * (o->first + j) + 3];
    return wi > 0 ? 1.0 / wi : o->mass[j];
}

/* One group (survey 4.4): centre of mass c and rest centre, the moment
   matrix of eq. 25 (particle terms plus every member's ellipsoid, eq. 20),
   its rotation (warm-started polar decomposition), goals pulling the
   members with `stiffness`, and the centre's orientation R rest_q. */
static void pbd_sm__oriented_match(pbd_sm_oriented *o, float *p, int g) {
    const int *mem = o->ring + o->ring_start[g];
    int n = o->ring_start[g + 1] - o->ring_start[g];
    double M = 0, c[3] = {0, 0, 0}, cr[3] = {0, 0, 0}, A[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < n; ++e) {
        int j = mem[e];
        const float *pj = p + 4 * (o->first + j);
        double m = pbd_sm__oriented_mass(o, p, j);
        M += m;
        for (int k = 0; k < 3; ++k) { c[k] += m * pj[k]; cr[k] += m * o->rest[3 * j + k]; }
    }
    for (int k = 0; k < 3; ++k) { c[k] /= M; cr[k] /= M; }
    for (int e = 0; e < n; ++e) {
        int j = mem[e];
        const float *pj = p + 4 * (o->first + j);
        double m = pbd_sm__oriented_mass(o, p, j), Ae[9];
        pbd_sm__ellipsoid_moment_d(m, o->radii + 3 * j, o->qp + 4 * j, o->rest_q + 4 * j, Ae);
        for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s)
                A[3 * r + s] += Ae[3 * r + s] + m * (pj[r] - c[r]) * (o->rest[3 * j + s] - cr[s]);
    }
    /* warm start: the rotation the centre's predicted orientation implies,
       q_p rest_q^-1 (last substep's group rotation turned by omega h) */
    double gq[4] = {-o->rest_q[4 * g], -o->rest_q[4 * g + 1], -o->rest_q[4 * g + 2], o->rest_q[4 * g + 3]}, R[9];
    pbd_sm__quat_mul_into(gq, o->qp + 4 * g, 1);
    pbd_sm_extract_rotation_d(A, gq, o->rotation_iterations);
    pbd_sm__quat_to_mat(gq, R);
    for (int e = 0; e < n; ++e) {
        int j = mem[e];
        float *pj = p + 4 * (o->first + j);
        if (!(pj[3] > 0)) continue;
        double d[3] = {o->rest[3 * j] - cr[0], o->rest[3 * j + 1] - cr[1], o->rest[3 * j + 2] - cr[2]}, gj[3];
        pbd_sm__rotate(R, d, gj);
        for (int k = 0; k < 3; ++k) pj[k] = (float)(pj[k] + o->stiffness * (c[k] + gj[k] - pj[k]));
    }
    if (p[4 * (o->first + g) + 3] > 0) {
        double *qc = o->qp + 4 * g;
        for (int k = 0; k < 4; ++k) qc[k] = o->rest_q[4 * g + k];
        pbd_sm__quat_mul_into(qc, gq, 1); /* only the centre: q_p = R rest_q */
    }
}

/* An ellipsoid against one collider: the ellipsoid's deepest point along
   the collider normal n at its centre is c - M M^T n / |M^T n| (M = R
   diag(a, b, c), the support point); when it is inside, the rigid
   ellipsoid (mass m, inertia m/5 diag(b^2+c^2, ...)) is pushed out along
   the normal there with the usual generalised inverse mass
   w = 1/m + (r x n) . I^-1 (r x n), which also turns it. Frictionless. */
static void pbd_sm__oriented_collide_one(pbd_sm_oriented *o, float *p, int i, pbd_collider col) {
    float *pi = p + 4 * (o->first + i);
    float dist, nf[3];
    if (pbd_collider_closest(o->world, col, pi, &dist, nf) != PBD_OK) return;
    const double *rad = o->radii + 3 * i;
    if (dist > rad[0] && dist > rad[1] && dist > rad[2]) return; /* beyond the largest radius */
    double R[9], n[3] = {nf[0], nf[1], nf[2]}, u[3], mu[3];
    pbd_sm__quat_to_mat(o->qp + 4 * i, R);
    pbd_sm__rotate_back(R, n, u);
    for (int k = 0; k < 3; ++k) u[k] *= rad[k];
    double ul = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    if (!(ul > 0)) return;
    for (int k = 0; k < 3; ++k) u[k] *= rad[k] / ul;
    pbd_sm__rotate(R, u, mu); /* M M^T n / |M^T n| */
    float s[3] = {(float)(pi[0] - mu[0]), (float)(pi[1] - mu[1]), (float)(pi[2] - mu[2])}, d2, n2f[3];
    if (pbd_collider_closest(o->world, col, s, &d2, n2f) != PBD_OK || !(d2 < 0)) return;
    double n2[3] = {n2f[0], n2f[1], n2f[2]}, r[3] = {-mu[0], -mu[1], -mu[2]};
    double rn[3] = {r[1] * n2[2] - r[2] * n2[1], r[2] * n2[0] - r[0] * n2[2], r[0] * n2[1] - r[1] * n2[0]};
    double wl = pi[3], m = 1.0 / wl, rb[3], ib[3], iw[3];
    double a2 = rad[0] * rad[0], b2 = rad[1] * rad[1], c2 = rad[2] * rad[2];
    double inv_i[3] = {5.0 / (m * (b2 + c2)), 5.0 / (m * (a2 + c2)), 5.0 / (m * (a2 + b2))};
    pbd_sm__rotate_back(R, rn, rb);
    for (int k = 0; k < 3; ++k) ib[k] = inv_i[k] * rb[k];
    pbd_sm__rotate(R, ib, iw); /* I^-1 (r x n) in the world frame */
    double wsum = wl + rn[0] * iw[0] + rn[1] * iw[1] + rn[2] * iw[2];
    double lambda = -(double)d2 / wsum;
    for (int k = 0; k < 3; ++k) pi[k] = (float)(pi[k] + wl * lambda * n2[k]);
    double dtheta[3] = {iw[0] * lambda, iw[1] * lambda, iw[2] * lambda};
    pbd_sm__quat_integrate_d(o->qp + 4 * i, dtheta, 1.0, o->qp + 4 * i);
}

static void pbd_sm__oriented_begin_substep(void *user, const pbd_solve_context *c) {
    pbd_sm_oriented *o = (pbd_sm_oriented *)user;
    for (int i = 0; i < o->count; ++i) {
        if (c->p[4 * (o->first + i) + 3] > 0) pbd_sm__quat_integrate_d(o->q + 4 * i, o->omega + 3 * i, c->h, o->qp + 4 * i);
        else for (int k = 0; k < 4; ++k) o->qp[4 * i + k] = o->q[4 * i + k];
    }
}

static void pbd_sm__oriented_project(void *user, const pbd_solve_context *c) {
    pbd_sm_oriented *o = (pbd_sm_oriented *)user;
    for (int g = 0; g < o->count; ++g) pbd_sm__oriented_match(o, c->p, g);
    if (!o->collide) return;
    int nc = pbd_world_collider_count(o->world);
    for (int i = 0; i < o->count; ++i) {
        if (!(c->p[4 * (o->first + i) + 3] > 0)) continue;
        for (int k = 0; k < nc; ++k) pbd_sm__oriented_collide_one(o, c->p, i, k);
    }
}

static void pbd_sm__oriented_end_substep(void *user, const pbd_solve_context *c) {
    pbd_sm_oriented *o = (pbd_sm_oriented *)user;
    for (int i = 0; i < o->count; ++i) {
        if (c->p[4 * (o->first + i) + 3] > 0) pbd_sm__quat_angular_velocity_d(o->q + 4 * i, o->qp + 4 * i, c->h, o->omega + 3 * i);
        else o->omega[3 * i] = o->omega[3 * i + 1] = o->omega[3 * i + 2] = 0;
        for (int k = 0; k < 4; ++k) o->q[4 * i + k] = o->qp[4 * i + k];
    }
}

static int pbd_sm__all_finite(const float *v, size_t n) {
    for (size_t k = 0; k < n; ++k)
        if (!(v[k] == v[k]) || fabsf(v[k]) > FLT_MAX) return 0;
    return 1;
}

static pbd_result pbd_sm__oriented_check(const pbd_world *w, const pbd_sm_oriented_desc *d) {
    if (d->particles.count < 1 || d->edge_count < 0) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->edge_count > 0 && !d->edges) return PBD_ERROR_NULL_POINTER;
    if (d->particles.first < 0 || d->particles.first > pbd_world_particle_count(w) - d->particles.count)
        return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (!pbd_sm__all_finite(&d->stiffness, 1) || !pbd_sm__all_finite(&d->radius, 1)) return PBD_ERROR_NOT_FINITE;
    if (!(d->stiffness >= 0 && d->stiffness <= 1)) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->rotation_iterations < 1 || d->rotation_iterations > 100) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->collide != 0 && d->collide != 1) return PBD_ERROR_INVALID_ARGUMENT;
    int n = d->particles.count;
    if (d->edge_count > INT_MAX / 2 - n) return PBD_ERROR_OVERFLOW;
    for (int e = 0; e < 2 * d->edge_count; ++e)
        if (d->edges[e] < 0 || d->edges[e] >= n) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    for (int e = 0; e < d->edge_count; ++e)
        if (d->edges[2 * e] == d->edges[2 * e + 1]) return PBD_ERROR_DEGENERATE;
    if (d->radii) {
        if (!pbd_sm__all_finite(d->radii, 3 * (size_t)n)) return PBD_ERROR_NOT_FINITE;
        for (int k = 0; k < 3 * n; ++k)
            if (!(d->radii[k] > 0)) return PBD_ERROR_DEGENERATE;
    } else if (!(d->radius > 0)) {
        return PBD_ERROR_DEGENERATE;
    }
    if (d->orientations) {
        if (!pbd_sm__all_finite(d->orientations, 4 * (size_t)n)) return PBD_ERROR_NOT_FINITE;
        for (int i = 0; i < n; ++i) {
            const float *q = d->orientations + 4 * i;
            if (!(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3] > 1e-12f)) return PBD_ERROR_DEGENERATE;
        }
    }
    return PBD_OK;
}

/* The 1-ring groups as CSR lists: centre first, then its neighbours in
   increasing order, each once (duplicate edges are merged). */
static pbd_result pbd_sm__oriented_rings(pbd_sm_oriented *o, const int *edges, int ne) {
    int n = o->count;
    o->ring_start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    o->ring = (int *)pbd_sm__alloc_n((size_t)n + 2 * (size_t)ne, sizeof(int));
    if (!o->ring_start || !o->ring) return PBD_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i <= n; ++i) o->ring_start[i] = 0;
    for (int e = 0; e < 2 * ne; ++e) o->ring_start[edges[e] + 1]++;
    for (int i = 0; i < n; ++i) o->ring_start[i + 1] += o->ring_start[i] + 1; /* + the centre */
    int *fill = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    if (!fill) return PBD_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < n; ++i) { o->ring[o->ring_start[i]] = i; fill[i] = o->ring_start[i] + 1; }
    for (int e = 0; e < ne; ++e) {
        int a = edges[2 * e], b = edges[2 * e + 1];
        o->ring[fill[a]++] = b;
        o->ring[fill[b]++] = a;
    }
    /* sort each ring's neighbours and drop duplicates in place (compacting) */
    int out = 0;
    for (int i = 0; i < n; ++i) {
        int b = o->ring_start[i], e = o->ring_start[i + 1];
        qsort(o->ring + b + 1, (size_t)(e - b - 1), sizeof(int), pbd_sm__cmp_int);
        o->ring_start[i] = out;
        o->ring[out++] = i;
        for (int k = b + 1; k < e; ++k)
            if (k == b + 1 || o->ring[k] != o->ring[k - 1]) o->ring[out++] = o->ring[k];
    }
    o->ring_start[n] = out;
    PBD_SM_FREE(fill);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_oriented(pbd_world *w, const pbd_sm_oriented_desc *d, pbd_sm_oriented **out) {
    if (!w || !d || !out) return PBD_ERROR_NULL_POINTER;
    pbd_result res = pbd_sm__oriented_check(w, d);
    if (res != PBD_OK) return res;
    int n = d->particles.count;
    pbd_sm_oriented *o = (pbd_sm_oriented *)pbd_sm__alloc_n(1, sizeof *o);
    if (!o) return PBD_ERROR_OUT_OF_MEMORY;
    memset(o, 0, sizeof *o);
    o->world = w;
    o->first = d->particles.first;
    o->count = n;
    o->stiffness = d->stiffness;
    o->collide = d->collide;
    o->rotation_iterations = d->rotation_iterations;
    o->q = (double *)pbd_sm__alloc_n(4 * (size_t)n, sizeof(double));
    o->qp = (double *)pbd_sm__alloc_n(4 * (size_t)n, sizeof(double));
    o->omega = (double *)pbd_sm__alloc_n(3 * (size_t)n, sizeof(double));
    o->rest_q = (double *)pbd_sm__alloc_n(4 * (size_t)n, sizeof(double));
    o->radii = (double *)pbd_sm__alloc_n(3 * (size_t)n, sizeof(double));
    o->rest = (double *)pbd_sm__alloc_n(3 * (size_t)n, sizeof(double));
    o->mass = (double *)pbd_sm__alloc_n((size_t)n, sizeof(double));
    if (!o->q || !o->qp || !o->omega || !o->rest_q || !o->radii || !o->rest || !o->mass ||
        pbd_sm__oriented_rings(o, d->edges, d->edge_count) != PBD_OK) {
        pbd_sm__oriented_free(o);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    const float *x = pbd_world_positions(w);
    double mean = 0;
    int dyn = 0;
    for (int i = 0; i < n; ++i) {
        float m = 0;
        pbd_get_mass(w, o->first + i, &m);
        o->mass[i] = m;
        if (m > 0) { mean += m; dyn++; }
        for (int k = 0; k < 3; ++k) {
            o->rest[3 * i + k] = x[4 * (o->first + i) + k];
            o->radii[3 * i + k] = d->radii ? d->radii[3 * i + k] : d->radius;
            o->omega[3 * i + k] = 0;
        }
        double qn = 0, *rq = o->rest_q + 4 * i;
        for (int k = 0; k < 4; ++k) { rq[k] = d->orientations ? d->orientations[4 * i + k] : (k == 3); qn += rq[k] * rq[k]; }
        for (int k = 0; k < 4; ++k) {
            rq[k] /= sqrt(qn);
            o->q[4 * i + k] = o->qp[4 * i + k] = rq[k];
        }
    }
    /* particles of mass 0 (pinned by mass) weigh as the mean particle */
    for (int i = 0; i < n; ++i)
        if (!(o->mass[i] > 0)) o->mass[i] = dyn ? mean / dyn : 0;
    if (!dyn) { pbd_sm__oriented_free(o); return PBD_ERROR_DEGENERATE; } /* zero total mass */
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "pbd_sm oriented";
    pd.user = o;
    pd.particle_end = o->first + n;
    pd.work = (long)o->ring_start[n];
    pd.begin_substep = pbd_sm__oriented_begin_substep;
    pd.project = pbd_sm__oriented_project;
    pd.end_substep = pbd_sm__oriented_end_substep;
    pd.destroy = pbd_sm__oriented_destroy_cb;
    int *ids = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    if (!ids) { pbd_sm__oriented_free(o); return PBD_ERROR_OUT_OF_MEMORY; }
    for (int i = 0; i < n; ++i) ids[i] = o->first + i;
    res = pbd_add_plugin(w, &pd, &o->plugin);
    if (res != PBD_OK) { PBD_SM_FREE(ids); pbd_sm__oriented_free(o); return res; }
    pbd_world_mark_coupled(w, ids, n); /* validated above: cannot fail */
    PBD_SM_FREE(ids);
    *out = o;
    return PBD_OK;
}

PBD_SM_DEF pbd_plugin pbd_sm_oriented_plugin(const pbd_sm_oriented *o) { return o ? o->plugin : -1; }
PBD_SM_DEF pbd_range pbd_sm_oriented_range(const pbd_sm_oriented *o) {
    pbd_range r = {0, 0};
    if (o) { r.first = o->first; r.count = o->count; }
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_get(const pbd_sm_oriented *o, int index, float *q, float *omega) {
    if (!o) return PBD_ERROR_NULL_POINTER;
    if (index < 0 || index >= o->count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (q) for (int k = 0; k < 4; ++k) q[k] = (float)o->q[4 * index + k];
    if (omega) for (int k = 0; k < 3; ++k) omega[k] = (float)o->omega[3 * index + k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_set(pbd_sm_oriented *o, int index, const float *q, const float *omega) {
    if (!o) return PBD_ERROR_NULL_POINTER;
    if (index < 0 || index >= o->count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if ((q && !pbd_sm__all_finite(q, 4)) || (omega && !pbd_sm__all_finite(omega, 3))) return PBD_ERROR_NOT_FINITE;
    double qn = q ? (double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2] + (double)q[3] * q[3] : 1;
    if (!(qn > 1e-12)) return PBD_ERROR_DEGENERATE;
    if (q) for (int k = 0; k < 4; ++k) o->q[4 * index + k] = o->qp[4 * index + k] = q[k] / sqrt(qn);
    if (omega) for (int k = 0; k < 3; ++k) o->omega[3 * index + k] = omega[k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_group(const pbd_sm_oriented *o, int index, int *members, int max, int *count) {
    if (!o || !count || (max > 0 && !members)) return PBD_ERROR_NULL_POINTER;
    if (index < 0 || index >= o->count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (max < 0) return PBD_ERROR_INVALID_ARGUMENT;
    int b = o->ring_start[index], n = o->ring_start[index + 1] - b;
    for (int e = 0; e < n && e < max; ++e) members[e] = o->ring[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF double pbd_sm_oriented_rotational_energy(const pbd_sm_oriented *o, const pbd_world *w) {
    if (!o || !w) return 0;
    const float *x = pbd_world_positions(w);
    double e = 0;
    for (int i = 0; i < o->count; ++i) {
        float wi = x[4 * (o->first + i) + 3];
        if (!(wi > 0)) continue;
        double R[9], wb[3], m = 1.0 / wi;
        const double *r = o->radii + 3 * i;
        pbd_sm__quat_to_mat(o->q + 4 * i, R);
        pbd_sm__rotate_back(R, o->omega + 3 * i, wb);
        double inertia[3] = {m / 5 * (r[1] * r[1] + r[2] * r[2]), m / 5 * (r[0] * r[0] + r[2] * r[2]),
                       m / 5 * (r[0] * r[0] + r[1] * r[1])};
        e += 0.5 * (inertia[0] * wb[0] * wb[0] + inertia[1] * wb[1] * wb[1] + inertia[2] * wb[2] * wb[2]);
    }
    return e;
}

PBD_SM_DEF pbd_sm_skin_desc pbd_sm_skin_desc_default(void) {
    pbd_sm_skin_desc d;
    memset(&d, 0, sizeof d);
    d.influences = 4;
    return d;
}

PBD_SM_DEF void pbd_sm_skin_destroy(pbd_sm_skin *s) {
    if (!s) return;
    PBD_SM_FREE(s->bones);
    PBD_SM_FREE(s->weights);
    PBD_SM_FREE(s->local);
    PBD_SM_FREE(s);
}

/* The `k` nearest particles (at rest) of a vertex with weights
   1 / (d^2 + eps^2), by a bounded insertion sort (ties: lower index). */
static void pbd_sm__skin_nearest(const pbd_sm_oriented *o, const float *v, int k, int *bones, double *wts) {
    for (int s = 0; s < k; ++s) { bones[s] = -1; wts[s] = 0; }
    double *d2 = wts; /* distances first, weights after */
    int have = 0;
    for (int b = 0; b < o->count; ++b) {
        double dx = v[0] - o->rest[3 * b], dy = v[1] - o->rest[3 * b + 1], dz = v[2] - o->rest[3 * b + 2];
        double dd = dx * dx + dy * dy + dz * dz;
        if (have == k && !(dd < d2[k - 1])) continue;
        int pos = have < k ? have : k - 1;
        while (pos > 0 && dd < d2[pos - 1]) { d2[pos] = d2[pos - 1]; bones[pos] = bones[pos - 1]; pos--; }
        d2[pos] = dd;
        bones[pos] = b;
        if (have < k) have++;
    }
    for (int s = 0; s < k; ++s) wts[s] = bones[s] >= 0 ? 1.0 / (d2[s] + 1e-12) : 0;
}

PBD_SM_DEF pbd_result pbd_sm_skin_create(const pbd_sm_oriented *o, const pbd_sm_skin_desc *d, pbd_sm_skin **out) {
    if (!o || !d || !out || !d->rest_vertices || (d->bones && !d->weights)) return PBD_ERROR_NULL_POINTER;
    if (d->vertex_count < 1 || d->influences < 1 || d->influences > 8) return PBD_ERROR_INVALID_ARGUMENT;
    size_t nk = (size_t)d->vertex_count * (size_t)d->influences;
    if (!pbd_sm__all_finite(d->rest_vertices, 3 * (size_t)d->vertex_count)) return PBD_ERROR_NOT_FINITE;
    if (d->bones) {
        if (!pbd_sm__all_finite(d->weights, nk)) return PBD_ERROR_NOT_FINITE;
        for (int v = 0; v < d->vertex_count; ++v) {
            double sum = 0;
            for (int s = 0; s < d->influences; ++s) {
                int b = d->bones[(size_t)v * d->influences + s];
                float wt = d->weights[(size_t)v * d->influences + s];
                if (b < -1 || b >= o->count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
                if (wt < 0) return PBD_ERROR_INVALID_ARGUMENT;
                if (b >= 0) sum += wt;
            }
            if (!(sum > 0)) return PBD_ERROR_INVALID_ARGUMENT;
        }
    }
    pbd_sm_skin *s = (pbd_sm_skin *)pbd_sm__alloc_n(1, sizeof *s);
    if (!s) return PBD_ERROR_OUT_OF_MEMORY;
    memset(s, 0, sizeof *s);
    s->o = o;
    s->vertex_count = d->vertex_count;
    s->influences = d->influences;
    s->bones = (int *)pbd_sm__alloc_n(nk, sizeof(int));
    s->weights = (double *)pbd_sm__alloc_n(nk, sizeof(double));
    s->local = (double *)pbd_sm__alloc_n(3 * nk, sizeof(double));
    if (!s->bones || !s->weights || !s->local) { pbd_sm_skin_destroy(s); return PBD_ERROR_OUT_OF_MEMORY; }
    for (int v = 0; v < d->vertex_count; ++v) {
        int *bv = s->bones + (size_t)v * d->influences;
        double *wv = s->weights + (size_t)v * d->influences, sum = 0;
        const float *rv = d->rest_vertices + 3 * (size_t)v;
        if (d->bones) {
            for (int k = 0; k < d->influences; ++k) {
                bv[k] = d->bones[(size_t)v * d->influences + k];
                wv[k] = bv[k] >= 0 ? d->weights[(size_t)v * d->influences + k] : 0;
            }
        } else {
            pbd_sm__skin_nearest(o, rv, d->influences, bv, wv);
        }
        for (int k = 0; k < d->influences; ++k) sum += wv[k];
        for (int k = 0; k < d->influences; ++k) {
            wv[k] /= sum;
            double R[9], off[3] = {0, 0, 0};
            if (bv[k] >= 0) {
                pbd_sm__quat_to_mat(o->rest_q + 4 * bv[k], R);
                double dv[3] = {rv[0] - o->rest[3 * bv[k]], rv[1] - o->rest[3 * bv[k] + 1], rv[2] - o->rest[3 * bv[k] + 2]};
                pbd_sm__rotate_back(R, dv, off);
            }
            for (int a = 0; a < 3; ++a) s->local[3 * ((size_t)v * d->influences + k) + a] = off[a];
        }
    }
    *out = s;
    return PBD_OK;
}

PBD_SM_DEF int pbd_sm_skin_vertex_count(const pbd_sm_skin *s) { return s ? s->vertex_count : 0; }

PBD_SM_DEF pbd_result pbd_sm_skin_apply(const pbd_sm_skin *s, const pbd_world *w, float *out) {
    if (!s || !w || !out) return PBD_ERROR_NULL_POINTER;
    const pbd_sm_oriented *o = s->o;
    if (o->first + o->count > pbd_world_particle_count(w)) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    const float *x = pbd_world_positions(w);
    for (int v = 0; v < s->vertex_count; ++v) {
        double acc[3] = {0, 0, 0};
        for (int k = 0; k < s->influences; ++k) {
            size_t e = (size_t)v * s->influences + k;
            int b = s->bones[e];
            if (b < 0) continue;
            double R[9], r[3];
            pbd_sm__quat_to_mat(o->q + 4 * b, R);
            pbd_sm__rotate(R, s->local + 3 * e, r);
            for (int a = 0; a < 3; ++a) acc[a] += s->weights[e] * (x[4 * (o->first + b) + a] + r[a]);
        }
        for (int a = 0; a < 3; ++a) out[3 * v + a] = (float)acc[a];
    }
    return PBD_OK;
}

// ==== surface volume ========================================================

struct pbd_sm_volume {
    pbd_world *world;
    pbd_plugin plugin;
    int nv, nt;
    int *verts;          /* nv world particles, increasing */
    int *tri;            /* nt*3 local indices */
    int *adj_start, *adj;/* mesh edges as CSR neighbour lists (local) */
    int *opposite;       /* nv: opposing particle (local) or -1 */
    double *pair_rest;   /* nv: rest distance to it */
    double rest_volume;
    float alpha, beta, pair_stiffness, stiffness, contact_distance;
    int smoothing, velocity_correction;
    double *grad;        /* nv*3 scratch: grad_i C */
    double *weight, *weight2; /* nv: w_i of the last projection, smoothing scratch */
    float *pred;         /* nv*3: predictions at the start of the substep */
};

static void pbd_sm__volume_free(pbd_sm_volume *v) {
    if (!v) return;
    PBD_SM_FREE(v->verts); PBD_SM_FREE(v->tri); PBD_SM_FREE(v->adj_start); PBD_SM_FREE(v->adj);
    PBD_SM_FREE(v->opposite); PBD_SM_FREE(v->pair_rest); PBD_SM_FREE(v->grad); PBD_SM_FREE(v->weight);
    PBD_SM_FREE(v->weight2); PBD_SM_FREE(v->pred);
    PBD_SM_FREE(v);
}
static void pbd_sm__volume_destroy_cb(void *user) { pbd_sm__volume_free((pbd_sm_volume *)user); }

PBD_SM_DEF pbd_sm_volume_desc pbd_sm_volume_desc_default(void) {
    pbd_sm_volume_desc d;
    memset(&d, 0, sizeof d);
    d.alpha = 1.0f;
    d.beta = 0.5f;
    d.pair_stiffness = 1.0f;
    d.smoothing = 2;
    d.stiffness = 1.0f;
    d.velocity_correction = 1;
    d.contact_distance = 0.02f;
    return d;
}

/* V (eq. 12: 1/9 sum A_i (x_i1 + x_i2 + x_i3) . n_i, which is
   1/6 sum x_i1 . (x_i2 x x_i3) for a flat triangle) and, when grad is not
   NULL, grad_i C = n_i / 3 with n_i the sum of the area-weighted normals
   around particle i (the survey's approximation; for a closed mesh it is
   the exact gradient, since the fan's edges sum to zero). P: 4 floats per
   world particle. */
static double pbd_sm__volume_eval(const pbd_sm_volume *v, const float *P, double *grad) {
    double V = 0;
    if (grad) for (int k = 0; k < 3 * v->nv; ++k) grad[k] = 0;
    for (int t = 0; t < v->nt; ++t) {
        const int *e = v->tri + 3 * t;
        const float *a = P + 4 * v->verts[e[0]], *b = P + 4 * v->verts[e[1]], *c = P + 4 * v->verts[e[2]];
        double ab[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
        double ac[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
        double an[3] = {0.5 * (ab[1] * ac[2] - ab[2] * ac[1]), 0.5 * (ab[2] * ac[0] - ab[0] * ac[2]),
                        0.5 * (ab[0] * ac[1] - ab[1] * ac[0])}; /* A_i n_i */
        V += (2.0 / 6.0) * ((double)a[0] * an[0] + (double)a[1] * an[1] + (double)a[2] * an[2]);
        if (grad)
            for (int k = 0; k < 3; ++k)
                for (int j = 0; j < 3; ++j) grad[3 * e[k] + j] += an[j] / 3.0;
    }
    return V;
}

static int pbd_sm__volume_colliding(const pbd_sm_volume *v, const float *p) {
    int nc = pbd_world_collider_count(v->world);
    for (int c = 0; c < nc; ++c) {
        float d;
        if (pbd_collider_closest(v->world, c, p, &d, NULL) == PBD_OK && d < v->contact_distance) return 1;
    }
    return 0;
}

/* The weights of eq. 13 (survey 4.5.1): global 1/n blended by alpha with
   the local ones, smoothed by a Laplacian filter (each pass moves a weight
   halfway to its neighbours' mean), then 0 for colliding and fixed
   particles (after smoothing, so that none leaks back to them). */
static void pbd_sm__volume_weights(pbd_sm_volume *v, const float *P) {
    int n = v->nv;
    double *w = v->weight, sum = 0;
    for (int i = 0; i < n; ++i) {
        const float *pi = P + 4 * v->verts[i], *pr = v->pred + 3 * i;
        double dx = pi[0] - pr[0], dy = pi[1] - pr[1], dz = pi[2] - pr[2], dd = 0;
        int k = v->opposite[i];
        if (k >= 0) {
            const float *pk = P + 4 * v->verts[k];
            double ex = pi[0] - pk[0], ey = pi[1] - pk[1], ez = pi[2] - pk[2];
            dd = fabs(sqrt(ex * ex + ey * ey + ez * ez) - v->pair_rest[i]);
        }
        w[i] = v->beta * v->pair_stiffness * dd + (1.0 - v->beta) * sqrt(dx * dx + dy * dy + dz * dz);
        sum += w[i];
    }
    for (int i = 0; i < n; ++i) {
        double local = sum > 0 ? w[i] / sum : 1.0 / n;
        w[i] = (1.0 - v->alpha) * local + v->alpha / n;
    }
    for (int pass = 0; pass < v->smoothing; ++pass) {
        for (int i = 0; i < n; ++i) {
            int b = v->adj_start[i], e = v->adj_start[i + 1];
            double m = 0;
            for (int k = b; k < e; ++k) m += w[v->adj[k]];
            v->weight2[i] = e > b ? 0.5 * w[i] + 0.5 * m / (e - b) : w[i];
        }
        for (int i = 0; i < n; ++i) w[i] = v->weight2[i];
    }
    for (int i = 0; i < n; ++i) {
        const float *pi = P + 4 * v->verts[i];
        if (!(pi[3] > 0) || pbd_sm__volume_colliding(v, pi)) w[i] = 0;
    }
}

static void pbd_sm__volume_begin_substep(void *user, const pbd_solve_context *c) {
    pbd_sm_volume *v = (pbd_sm_volume *)user;
    for (int i = 0; i < v->nv; ++i)
        for (int k = 0; k < 3; ++k) v->pred[3 * i + k] = c->p[4 * v->verts[i] + k];
}

/* Eq. 13: dx_i = -s w_i C grad_i / sum_j w_j |grad_j|^2. */
static void pbd_sm__volume_project(void *user, const pbd_solve_context *c) {
    pbd_sm_volume *v = (pbd_sm_volume *)user;
    double C = pbd_sm__volume_eval(v, c->p, v->grad) - v->rest_volume;
    pbd_sm__volume_weights(v, c->p);
    double den = 0;
    for (int i = 0; i < v->nv; ++i) {
        const double *g = v->grad + 3 * i;
        den += v->weight[i] * (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
    }
    if (!(den > 1e-30)) return;
    double s = -v->stiffness * C / den;
    for (int i = 0; i < v->nv; ++i) {
        float *pi = c->p + 4 * v->verts[i];
        for (int k = 0; k < 3; ++k) pi[k] = (float)(pi[k] + s * v->weight[i] * v->grad[3 * i + k]);
    }
}

/* The velocity counterpart: dC/dt = sum_i grad_i C . v_i = 0 with the same
   weights (survey 4.5.1: a divergence-free velocity field). */
static void pbd_sm__volume_end_substep(void *user, const pbd_solve_context *c) {
    pbd_sm_volume *v = (pbd_sm_volume *)user;
    if (!v->velocity_correction) return;
    pbd_sm__volume_eval(v, c->x, v->grad);
    double dcdt = 0, den = 0;
    for (int i = 0; i < v->nv; ++i) {
        const double *g = v->grad + 3 * i;
        const float *vi = c->v + 4 * v->verts[i];
        dcdt += g[0] * vi[0] + g[1] * vi[1] + g[2] * vi[2];
        den += v->weight[i] * (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
    }
    if (!(den > 1e-30)) return;
    double s = -dcdt / den;
    for (int i = 0; i < v->nv; ++i) {
        float *vi = c->v + 4 * v->verts[i];
        for (int k = 0; k < 3; ++k) vi[k] = (float)(vi[k] + s * v->weight[i] * v->grad[3 * i + k]);
    }
}

static int pbd_sm__volume_local_index(const int *a, int n, int x) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] < x) lo = mid + 1;
        else if (a[mid] > x) hi = mid - 1;
        else return mid;
    }
    return -1;
}
static int pbd_sm__cmp_edge_key(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Closed and consistently oriented: every directed edge once, and its
   reverse once. Builds the neighbour lists from the edges a < b. */
static pbd_result pbd_sm__volume_topology(pbd_sm_volume *v) {
    size_t ne = 3 * (size_t)v->nt;
    long long *e = (long long *)pbd_sm__alloc_n(ne, sizeof(long long));
    if (!e) return PBD_ERROR_OUT_OF_MEMORY;
    for (int t = 0; t < v->nt; ++t)
        for (int k = 0; k < 3; ++k)
            e[3 * t + k] = (long long)v->tri[3 * t + k] * v->nv + v->tri[3 * t + (k + 1) % 3];
    qsort(e, ne, sizeof(long long), pbd_sm__cmp_edge_key);
    pbd_result r = PBD_OK;
    for (size_t k = 0; k < ne && r == PBD_OK; ++k) {
        long long a = e[k] / v->nv, b = e[k] % v->nv, rev = b * v->nv + a;
        if (k > 0 && e[k] == e[k - 1]) r = PBD_ERROR_NOT_CLOSED;
        size_t lo = 0, hi = ne;
        while (lo < hi) { size_t mid = (lo + hi) / 2; if (e[mid] < rev) lo = mid + 1; else hi = mid; }
        if (lo == ne || e[lo] != rev) r = PBD_ERROR_NOT_CLOSED;
    }
    if (r == PBD_OK) {
        v->adj_start = (int *)pbd_sm__alloc_n((size_t)v->nv + 1, sizeof(int));
        v->adj = (int *)pbd_sm__alloc_n(ne, sizeof(int));
        if (!v->adj_start || !v->adj) r = PBD_ERROR_OUT_OF_MEMORY;
    }
    if (r == PBD_OK) { /* e is sorted by (a, b): directed edges grouped by a */
        int k = 0;
        for (int a = 0; a < v->nv; ++a) {
            v->adj_start[a] = k;
            while ((size_t)k < ne && e[k] / v->nv == a) { v->adj[k] = (int)(e[k] % v->nv); k++; }
        }
        v->adj_start[v->nv] = k;
    }
    PBD_SM_FREE(e);
    return r;
}

/* Opposing particles (Diziol et al. 2011): a ray from each particle along
   its inward area-weighted normal; the nearest triangle it hits (not one
   of the particle's own) gives the pair, its vertex nearest the hit point
   (Moeller-Trumbore intersection; O(n * triangles), done once). */
static void pbd_sm__volume_pairs(pbd_sm_volume *v, const float *P) {
    pbd_sm__volume_eval(v, P, v->grad);
    for (int i = 0; i < v->nv; ++i) {
        const float *o = P + 4 * v->verts[i];
        double *g = v->grad + 3 * i, gl = sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
        double d[3] = {-g[0] / gl, -g[1] / gl, -g[2] / gl}, best = DBL_MAX, hit[3] = {0, 0, 0};
        int bt = -1;
        for (int t = 0; t < v->nt && gl > 0; ++t) {
            const int *e = v->tri + 3 * t;
            if (e[0] == i || e[1] == i || e[2] == i) continue;
            const float *a = P + 4 * v->verts[e[0]], *b = P + 4 * v->verts[e[1]], *c = P + 4 * v->verts[e[2]];
            double e1[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
            double e2[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
            double pv[3] = {d[1] * e2[2] - d[2] * e2[1], d[2] * e2[0] - d[0] * e2[2], d[0] * e2[1] - d[1] * e2[0]};
            double det = e1[0] * pv[0] + e1[1] * pv[1] + e1[2] * pv[2];
            if (fabs(det) < 1e-30) continue;
            double tv[3] = {(double)o[0] - a[0], (double)o[1] - a[1], (double)o[2] - a[2]};
            double u = (tv[0] * pv[0] + tv[1] * pv[1] + tv[2] * pv[2]) / det;
            if (u < 0 || u > 1) continue;
            double qv[3] = {tv[1] * e1[2] - tv[2] * e1[1], tv[2] * e1[0] - tv[0] * e1[2], tv[0] * e1[1] - tv[1] * e1[0]};
            double w = (d[0] * qv[0] + d[1] * qv[1] + d[2] * qv[2]) / det;
            if (w < 0 || u + w > 1) continue;
            double tt = (e2[0] * qv[0] + e2[1] * qv[1] + e2[2] * qv[2]) / det;
            if (tt > 0 && tt < best) {
                best = tt;
                bt = t;
                for (int k = 0; k < 3; ++k) hit[k] = o[k] + tt * d[k];
            }
        }
        v->opposite[i] = -1;
        v->pair_rest[i] = 0;
        if (bt < 0) continue;
        double bd = DBL_MAX;
        for (int k = 0; k < 3; ++k) {
            const float *q = P + 4 * v->verts[v->tri[3 * bt + k]];
            double dx = q[0] - hit[0], dy = q[1] - hit[1], dz = q[2] - hit[2], dd = dx * dx + dy * dy + dz * dz;
            if (dd < bd) { bd = dd; v->opposite[i] = v->tri[3 * bt + k]; }
        }
        const float *q = P + 4 * v->verts[v->opposite[i]];
        double dx = q[0] - o[0], dy = q[1] - o[1], dz = q[2] - o[2];
        v->pair_rest[i] = sqrt(dx * dx + dy * dy + dz * dz);
    }
}

static pbd_result pbd_sm__volume_check(const pbd_world *w, const pbd_sm_volume_desc *d) {
    if (d->triangle_count > 0 && !d->triangles) return PBD_ERROR_NULL_POINTER;
    if (d->triangle_count < 1 || d->triangle_count > INT_MAX / 3) return PBD_ERROR_INVALID_ARGUMENT;
    const float params[5] = {d->alpha, d->beta, d->pair_stiffness, d->stiffness, d->contact_distance};
    if (!pbd_sm__all_finite(params, 5)) return PBD_ERROR_NOT_FINITE;
    if (!(d->alpha >= 0 && d->alpha <= 1) || !(d->beta >= 0 && d->beta <= 1) || !(d->pair_stiffness >= 0) ||
        !(d->stiffness > 0 && d->stiffness <= 1) || !(d->contact_distance >= 0) || d->smoothing < 0 ||
        d->smoothing > 64 || (d->velocity_correction != 0 && d->velocity_correction != 1))
        return PBD_ERROR_INVALID_ARGUMENT;
    int np = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w);
    for (int t = 0; t < d->triangle_count; ++t) {
        const int *e = d->triangles + 3 * t;
        for (int k = 0; k < 3; ++k)
            if (e[k] < 0 || e[k] >= np) return PBD_ERROR_INDEX_OUT_OF_RANGE;
        if (e[0] == e[1] || e[1] == e[2] || e[0] == e[2]) return PBD_ERROR_DEGENERATE;
        const float *a = x + 4 * e[0], *b = x + 4 * e[1], *c = x + 4 * e[2];
        double ab[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
        double ac[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
        double cx = ab[1] * ac[2] - ab[2] * ac[1], cy = ab[2] * ac[0] - ab[0] * ac[2], cz = ab[0] * ac[1] - ab[1] * ac[0];
        if (!(cx * cx + cy * cy + cz * cz > 0)) return PBD_ERROR_DEGENERATE;
    }
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_surface_volume(pbd_world *w, const pbd_sm_volume_desc *d, pbd_sm_volume **out) {
    if (!w || !d || !out) return PBD_ERROR_NULL_POINTER;
    pbd_result r = pbd_sm__volume_check(w, d);
    if (r != PBD_OK) return r;
    pbd_sm_volume *v = (pbd_sm_volume *)pbd_sm__alloc_n(1, sizeof *v);
    if (!v) return PBD_ERROR_OUT_OF_MEMORY;
    memset(v, 0, sizeof *v);
    v->world = w;
    v->nt = d->triangle_count;
    v->alpha = d->alpha; v->beta = d->beta; v->pair_stiffness = d->pair_stiffness;
    v->stiffness = d->stiffness; v->contact_distance = d->contact_distance;
    v->smoothing = d->smoothing; v->velocity_correction = d->velocity_correction;
    size_t n3 = 3 * (size_t)v->nt;
    v->verts = (int *)pbd_sm__alloc_n(n3, sizeof(int));
    v->tri = (int *)pbd_sm__alloc_n(n3, sizeof(int));
    if (!v->verts || !v->tri) { pbd_sm__volume_free(v); return PBD_ERROR_OUT_OF_MEMORY; }
    memcpy(v->verts, d->triangles, n3 * sizeof(int));
    qsort(v->verts, n3, sizeof(int), pbd_sm__cmp_int);
    int nv = 0;
    for (size_t k = 0; k < n3; ++k)
        if (k == 0 || v->verts[k] != v->verts[k - 1]) v->verts[nv++] = v->verts[k];
    v->nv = nv;
    for (size_t k = 0; k < n3; ++k) v->tri[k] = pbd_sm__volume_local_index(v->verts, nv, d->triangles[k]);
    v->opposite = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    v->pair_rest = (double *)pbd_sm__alloc_n((size_t)nv, sizeof(double));
    v->grad = (double *)pbd_sm__alloc_n(3 * (size_t)nv, sizeof(double));
    v->weight = (double *)pbd_sm__alloc_n((size_t)nv, sizeof(double));
    v->weight2 = (double *)pbd_sm__alloc_n((size_t)nv, sizeof(double));
    v->pred = (float *)pbd_sm__alloc_n(3 * (size_t)nv, sizeof(float));
    if (!v->opposite || !v->pair_rest || !v->grad || !v->weight || !v->weight2 || !v->pred) {
        pbd_sm__volume_free(v);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    r = pbd_sm__volume_topology(v);
    if (r != PBD_OK) { pbd_sm__volume_free(v); return r; }
    const float *x = pbd_world_positions(w);
    v->rest_volume = pbd_sm__volume_eval(v, x, NULL);
    if (!(v->rest_volume > 0)) { pbd_sm__volume_free(v); return PBD_ERROR_DEGENERATE; }
    pbd_sm__volume_pairs(v, x);
    for (int i = 0; i < nv; ++i) {
        v->weight[i] = 1.0 / nv;
        for (int k = 0; k < 3; ++k) v->pred[3 * i + k] = x[4 * v->verts[i] + k];
    }
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "pbd_sm surface volume";
    pd.user = v;
    pd.particle_end = v->verts[nv - 1] + 1;
    pd.work = (long)n3;
    pd.begin_substep = pbd_sm__volume_begin_substep;
    pd.project = pbd_sm__volume_project;
    pd.end_substep = pbd_sm__volume_end_substep;
    pd.destroy = pbd_sm__volume_destroy_cb;
    r = pbd_add_plugin(w, &pd, &v->plugin);
    if (r != PBD_OK) { pbd_sm__volume_free(v); return r; }
    *out = v;
    return PBD_OK;
}

PBD_SM_DEF pbd_plugin pbd_sm_volume_plugin(const pbd_sm_volume *v) { return v ? v->plugin : -1; }
PBD_SM_DEF double pbd_sm_volume_rest(const pbd_sm_volume *v) { return v ? v->rest_volume : 0; }

PBD_SM_DEF pbd_result pbd_sm_volume_measure(const pbd_sm_volume *v, const pbd_world *w, double *volume) {
    if (!v || !w || !volume) return PBD_ERROR_NULL_POINTER;
    if (v->verts[v->nv - 1] >= pbd_world_particle_count(w)) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    *volume = pbd_sm__volume_eval(v, pbd_world_positions(w), NULL);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_set_rest(pbd_sm_volume *v, double rest_volume) {
    if (!v) return PBD_ERROR_NULL_POINTER;
    if (!(rest_volume == rest_volume) || fabs(rest_volume) > DBL_MAX) return PBD_ERROR_NOT_FINITE;
    if (!(rest_volume > 0)) return PBD_ERROR_INVALID_ARGUMENT;
    v->rest_volume = rest_volume;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_set_alpha(pbd_sm_volume *v, float alpha) {
    if (!v) return PBD_ERROR_NULL_POINTER;
    if (!pbd_sm__all_finite(&alpha, 1)) return PBD_ERROR_NOT_FINITE;
    if (!(alpha >= 0 && alpha <= 1)) return PBD_ERROR_INVALID_ARGUMENT;
    v->alpha = alpha;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_opposite(const pbd_sm_volume *v, int particle, int *opposite) {
    if (!v || !opposite) return PBD_ERROR_NULL_POINTER;
    int i = pbd_sm__volume_local_index(v->verts, v->nv, particle);
    if (i < 0) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    *opposite = v->opposite[i] >= 0 ? v->verts[v->opposite[i]] : -1;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_weights(const pbd_sm_volume *v, float *weights, int max, int *count) {
    if (!v || !count || (max > 0 && !weights)) return PBD_ERROR_NULL_POINTER;
    if (max < 0) return PBD_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < v->nv && i < max; ++i) weights[i] = (float)v->weight[i];
    *count = v->nv;
    return PBD_OK;
}

#endif /* PBD_SM_IMPLEMENTATION_INCLUDED */
#endif /* PBD_SM_IMPLEMENTATION */
