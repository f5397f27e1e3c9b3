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
       ==== shape matching  bodies of clusters and regions (lists, lattices,
                            omega-rings, any plan), rigid/linear/quadratic
                            modes, plasticity (survey 4.1, 4.2, 4.5.2)
       ==== oriented        oriented particles (survey 4.4)
       ==== surface volume  volume conservation of surface meshes (4.5.1)

   SHAPE MATCHING IN SHORT (section "shape matching" has the details)
   ----------------------
       // a jelly: one particle per lattice cell, regions of half-width 2,
       // linear deformations (beta 0.3), plastic above 5% strain
       int cells[3 * 8 * 8 * 8];
       pbd_sm_lattice_box(8, 8, 8, cells);
       pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
       ld.cells = cells; ld.cell_count = 8 * 8 * 8;
       ld.spacing = 0.05f; ld.origin[1] = 0.5f; ld.half_width = 2;
       ld.body.mode = PBD_SM_LINEAR; ld.body.beta = 0.3f;
       ld.body.yield = 0.05f; ld.body.creep = 5.0f;   // creep 0: elastic
       pbd_sm_body *jelly; pbd_range particles;
       pbd_sm_add_lattice(world, &ld, &jelly, &particles);
       // ... pbd_world_step(world, dt) as usual: the body is a plugin

       // or any particles of the world as one rigid cluster (survey 4.1)
       pbd_sm_body_desc d = pbd_sm_body_desc_default();
       d.particles = indices; d.particle_count = n;    // rest shape: now
       pbd_sm_add_body(world, &d, NULL);
   Regions can also be the omega-rings of a mesh (pbd_sm_plan_rings), your
   own index lists (desc.region_start/region_particles) or any summation
   plan (desc.plan). The world owns its bodies. Config macro:
   PBD_SM_PARALLEL_MIN, the work (region memberships) from which a body
   shares its loops among the world's threads (default 32768).

   REGION SUMS (section "summation", survey 4.3)
   -----------
   Region-based shape matching needs, per region, sums over its particles
   (eq. 7 and 8). A pbd_sm_sum_plan holds the regions and a method to sum
   k doubles per particle over each of them:

       pbd_sm_sum_plan *plan = NULL;
       pbd_sm_plan_lattice(n, cells, w, &plan);    // or _octree, _paths, _naive
       pbd_sm_plan_sum(plan, values, k, sums);     // sums[r*k + j], no allocation
       pbd_sm_plan_destroy(plan);

       method                  regions                       work per region
       pbd_sm_plan_naive       your index lists              region size
       pbd_sm_plan_lattice     cubes of half-width w         O(1) (3 window sums)
       pbd_sm_plan_octree      adaptive cubes, w own cells   O(surface) octree nodes
       pbd_sm_plan_paths       w-rings of a triangle mesh    O(w) path runs

   Every plan lists its regions (pbd_sm_plan_region), so a fast plan can be
   checked against pbd_sm_plan_naive over the same lists; the tests do.
   Sums are bit-identical for any thread count and with SIMD on or off.

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
   region's particles of k values per particle (survey 4.3): the sums of
   eq. (7) and (8) of region-based shape matching (m~ x, m~ x xbar^T, ...).
   Every method gives the same sums as naive summation up to rounding; the
   fast ones with work per region far below the region size: lattice O(1)
   whatever w; octree O(summation nodes), which grows like the region's
   surface measured in the cells it cuts (w^2 on a uniform lattice), not
   with its volume (a coarse cell's region may hold 3000 fine particles
   in 300 nodes); paths O(runs of the
   paths through the region), which grows like its width w (survey 4.3.3:
   O(w n) for a mesh). pbd_sm_plan_cost counts that work. Each plan keeps
   its regions as member lists (pbd_sm_plan_region), so any plan can be
   checked against pbd_sm_plan_naive over the same lists.

   Rounding: the lattice and path methods take differences of prefix sums
   along a line or path, so a sum carries an error of about 1e-16 times
   the sum of |values| along that line up to the region: for values of
   similar size about 1e-16 L / (2w + 1) relative on a line of L
   particles, 1e-10 at a million (the survey's limit of 512 per path is
   for float on the GPU). Octree sums only add, as naive sums do.

   The sums are in double. They are deterministic: the same plan and
   values give bit-identical sums for any thread count and with SIMD on or
   off (each sum is one fixed sequence of additions and subtractions). The
   scratch is sized when the plan is made (for k up to 64), so
   pbd_sm_plan_sum never allocates. */
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
/* A lattice (Rivers and James 2007, FastLSM): particle i occupies the
   integer cell cells[3i .. 3i+2] (at most one particle per cell, each
   coordinate in [-1000000, 1000000]). One region per particle: the
   particles in the cells within Chebyshev distance w (1..64) of its own
   cell. Summed in three passes of sliding-window sums, bars along x, plates
   along y, cubes along z, each window sum a difference of two prefix sums
   of its line: O(1) per region whatever w on a solid lattice. The lattice
   may have holes and any boundary; only the bars and plates some region
   needs and that hold particles exist, so the extra work grows with the
   surface (w n^(2/3) on a block), and only for very sparse lattices
   (isolated particles) up to (2w+1)^2 bars each. PBD_ERROR_OVERFLOW when
   particle_count * (2w+1)^2 (the candidate bars) or the member lists
   exceed INT_MAX. */
PBD_SM_DEF pbd_result pbd_sm_plan_lattice(int particle_count, const int *cells, int w,
                                          pbd_sm_sum_plan **out);
/* An adaptive octree lattice (Steinemann, Otaduy and Gross 2008): particle
   i is the simulation node of the leaf cell cells[4i .. 4i+3] = (x, y, z,
   level), which covers [x 2^level, (x+1) 2^level) on each axis in units of
   the finest cells; level in 0..PBD_SM_OCTREE_MAX_LEVEL, the finest
   coordinates within [-1000000, 1000000] (else PBD_ERROR_OVERFLOW), and
   leaves may not overlap (PBD_ERROR_INVALID_ARGUMENT). Every ancestor cell
   of a leaf is a virtual node holding the sum of its descendants. The
   region of particle i holds the particles whose cell centres lie within
   Chebyshev distance widths[i] * 2^level_i of its own centre (region width
   in units of its own cell, so a region spans about the same number of
   cells at any resolution); widths may be NULL for w everywhere; widths
   in 1..64. Each region is a list of summation nodes found by the
   interval test of the paper (a node whose descendants all lie inside is
   taken whole, one partly inside is refined); the sum is a bottom-up pass
   over the virtual nodes and then one gather per region. */
#define PBD_SM_OCTREE_MAX_LEVEL 16
PBD_SM_DEF pbd_result pbd_sm_plan_octree(int particle_count, const int *cells, const int *widths, int w,
                                         pbd_sm_sum_plan **out);
/* Paths on a triangle mesh (Diziol, Bender and Bayer 2011): one region per
   vertex, its w-ring (vertices within w edges, w in 1..64). The vertices
   are split into disjoint paths along mesh edges by the paper's greedy
   heuristic (a path grows from its end to a free neighbour near the
   plane through the path's start normal to the longest axis of the
   bounding box, so paths run parallel, and among those to the one with
   the most neighbours already on paths, to avoid gaps; at most
   max_path_length vertices, 0 for the paper's 512). Region sums are then differences of prefix sums
   along the paths, one per run of consecutive path vertices in the region.
   Errors: NULL; indices out of range; NaN/Inf positions; a triangle with a
   repeated vertex or zero area (PBD_ERROR_DEGENERATE); an edge shared by
   more than two triangles or a repeated triangle (non-manifold,
   PBD_ERROR_INVALID_ARGUMENT). Vertices in no triangle are paths and
   regions of their own. */
PBD_SM_DEF pbd_result pbd_sm_plan_paths(int vertex_count, const float *positions, int triangle_count,
                                        const int *triangles, int w, int max_path_length,
                                        pbd_sm_sum_plan **out);
PBD_SM_DEF void pbd_sm_plan_destroy(pbd_sm_sum_plan *plan);
PBD_SM_DEF pbd_sm_summation pbd_sm_plan_method(const pbd_sm_sum_plan *plan);
PBD_SM_DEF int pbd_sm_plan_particle_count(const pbd_sm_sum_plan *plan);
PBD_SM_DEF int pbd_sm_plan_region_count(const pbd_sm_sum_plan *plan);
/* The members of region r (the same for every method), in increasing
   particle index: writes at most max indices, *count receives the region
   size. */
PBD_SM_DEF pbd_result pbd_sm_plan_region(const pbd_sm_sum_plan *plan, int r, int *particles, int max,
                                         int *count);
/* The work of one pbd_sm_plan_sum per value (k = 1), in row operations
   (additions or subtractions of one value): for naive summation the total
   region size, for the fast methods the prefix sums, window differences
   and node sums. Shows that the fast methods' cost does not grow with w. */
PBD_SM_DEF long long pbd_sm_plan_cost(const pbd_sm_sum_plan *plan);
/* For a paths plan: the number of paths, and the vertices of path p in
   order (at most max written, *count receives its length). */
PBD_SM_DEF int pbd_sm_plan_path_count(const pbd_sm_sum_plan *plan);
PBD_SM_DEF pbd_result pbd_sm_plan_path(const pbd_sm_sum_plan *plan, int p, int *vertices, int max,
                                       int *count);
/* Execution choices that never change the result bits: threads (0: the
   OpenMP default; 1: serial; plans with fewer than 512 regions always run
   serially) and SIMD (on by default where the SIMD path is compiled). */
PBD_SM_DEF pbd_result pbd_sm_plan_set_threads(pbd_sm_sum_plan *plan, int threads);
PBD_SM_DEF pbd_result pbd_sm_plan_set_simd(pbd_sm_sum_plan *plan, int on);
/* The SIMD path of the summation kernels: "avx-f64" (4 doubles through
   SIMDe) or "scalar" (PBD_NO_SIMD or no SIMDe). */
PBD_SM_DEF const char *pbd_sm_sum_simd_path(void);
/* sums[r*k + j] = sum over the particles i of region r of values[i*k + j].
   k in 1..64. Thread-safe for one plan from one thread at a time. */
PBD_SM_DEF pbd_result pbd_sm_plan_sum(pbd_sm_sum_plan *plan, const double *values, int k, double *sums);
/* The same, called by every thread of an enclosing OpenMP parallel region
   with the same arguments (a plugin with parallel = 1): the passes share
   their loops with the team through orphaned `omp for` (each ending in a
   barrier), so every thread returns with all sums done. Outside a parallel
   region it runs serially. The plan's thread setting does not apply. */
PBD_SM_DEF pbd_result pbd_sm_plan_sum_team(pbd_sm_sum_plan *plan, const double *values, int k, double *sums);

// ==== shape matching ========================================================
/* Shape matching (survey 4.1, Mueller et al. 2005 "Meshless deformations
   based on shape matching"), region-based shape matching (survey 4.2) and
   plasticity (survey 4.5.2), as a plugin of a pbd_world.

   A body is a set of world particles with a rest shape and a set of
   regions (clusters) over them. Every solver iteration (the plugin's
   `project`, after the constraint groups), each region r finds the
   transform that best matches its rest shape to the predicted positions
   (survey eqs. 5-8, with the modified masses m~_i = m_i / |R_i| where
   |R_i| is the number of regions that hold particle i), every particle's
   goal is the average of its regions' goals (survey 4.2), and each dynamic
   particle moves by alpha' (g_i - p_i). Pinned and kinematic particles take
   part in the match with their mass but are not moved. One region holding
   every particle is the classic single cluster of section 4.1.

   Regions come from a summation plan (pbd_sm_sum_plan, section
   "summation"): user index lists (pbd_sm_plan_naive), a regular lattice of
   half-width w (pbd_sm_plan_lattice, or pbd_sm_add_lattice which also
   creates the particles), the omega-ring neighbourhoods of a mesh
   (pbd_sm_plan_rings), or any other method; every region sum the solver
   needs goes through pbd_sm_plan_sum, so a fast summation method speeds up
   shape matching without changing it. When the regions are symmetric (one
   region per particle and j in region(i) <=> i in region(j), as for
   lattices and rings), the per-particle blend of the goals is a plan sum
   too; otherwise it is gathered over each particle's regions in increasing
   region order. Either way the result does not depend on the thread count.

   Modes (Mueller et al. 2005, sections 4.1-4.3): with q_i = x~_i - c~ the
   rest offsets and p_i = x_i - c the current ones,
     RIGID      g_i = R q_i + c, R the rotation of A_pq = sum m~ p q^T
                (pbd_sm_extract_rotation, warm-started from the region's
                previous rotation, so flat, collinear and inverted regions
                and 180 degree turns are handled);
     LINEAR     g_i = (beta A / cbrt(det A) + (1 - beta) R) q_i + c with
                A = A_pq A_qq^-1 (the volume-preserving best linear map);
     QUADRATIC  g_i = (beta A~ + (1 - beta) [R 0 0]) q~_i + c with
                q~ = (q, q_x^2, q_y^2, q_z^2, q_x q_y, q_y q_z, q_z q_x) and
                A~ = A~_pq A~_qq^-1 (3x9), so regions can bend and twist.
                Unlike the paper we centre the quadratic terms of q~ (subtract
                their mass-weighted mean over the region): the goals then keep
                the region's centre of mass, so momentum is conserved, and a
                quadratic deformation is reproduced exactly (uncentred, the
                mean of the quadratic terms shifts every goal).
   Flat and collinear regions (singular A_qq) use the pseudo-inverse; in
   LINEAR mode the directions the rest shape does not span are completed
   by R, so det A stays meaningful.

   Stiffness: the survey's alpha in [0, 1] is per projection. Here
   `stiffness` is alpha per substep: with stiffness_correction = 1 (the
   default) each of the n iterations uses alpha' = 1 - (1 - alpha)^(1/n)
   (survey 3.3), so for a fixed goal the iterations of a substep together
   move a particle the fraction alpha of the way, whatever the iteration
   count; with stiffness_correction = 0 alpha is used per projection, as in
   the survey. alpha = 1 (the default) moves every particle onto its
   blended goal: the region size then sets the stiffness (survey 4.2,
   Figure 16: larger regions are stiffer). As for every PBD stiffness, an
   alpha < 1 acts harder with more substeps per second.

   Plasticity (survey 4.5.2, Mueller et al. 2005 section 4.4): each region
   has a plastic state S_p (identity at rest) that deforms its rest shape,
   q_i = S_p (x~_i - c~). After every substep S = R^T A S_p^-1 (the elastic
   deformation, symmetrised) is measured; where ||S - I||_F > yield,
   S_p <- [I + h creep (S - I)] S_p (h the substep, so creep is a rate in
   1/s); then ||S_p - I||_F is clamped to max_plastic and S_p is divided by
   cbrt(det S_p), so det S_p = 1 (volume is preserved; we normalise last so
   that this holds exactly). creep = 0 (default) turns plasticity off.

   Rotations: each projection runs at most rotation_iterations steps of
   the rotation extraction, warm-started from the region's rotation of the
   previous projection, so the convergence carries over the iterations and
   substeps (Mueller et al. 2016); when that leaves a step of more than
   1e-7 rad (a sudden large turn), it iterates on to convergence. Measured
   on a deforming 20 000-particle lattice, 8 steps leave the goals within
   1e-8 m of the converged ones, 4 within 1e-7 m, at half the cost of
   converging to 1e-12 (most of a region's cost is this extraction).
   pbd_sm_body_goals always converges fully.

   Momentum: the corrections of a region sum to zero momentum and torque
   (mass-weighted centre, optimal rotation), so a body conserves linear and
   angular momentum. When its regions join particles of several objects,
   leave mark_coupled = 1 (default): the body calls
   pbd_world_mark_coupled on its particles, as pbd_add_constraints does. */

typedef struct pbd_sm_body pbd_sm_body;

typedef enum pbd_sm_mode {
    PBD_SM_RIGID = 0,
    PBD_SM_LINEAR = 1,
    PBD_SM_QUADRATIC = 2
} pbd_sm_mode;

typedef struct pbd_sm_body_desc {
    const int *particles;   /* particle_count world particle indices, distinct; local
                               particle i of the regions is world particle particles[i] */
    int particle_count;
    /* The regions over local indices 0..particle_count-1, one of:
       - plan: any summation plan with particle_count particles. Borrowed: it
         must outlive the body, unless owns_plan = 1: then the body destroys
         it with itself (on failure the caller keeps it);
       - region_count CSR lists region_start / region_particles (copied into a
         naive plan; the rules of pbd_sm_plan_naive);
       - neither: a single cluster of all particles (survey 4.1). */
    pbd_sm_sum_plan *plan;
    int owns_plan;
    int region_count;
    const int *region_start;
    const int *region_particles;
    const float *rest_positions; /* optional particle_count*3; default: the world positions now */
    const float *masses;         /* optional particle_count, >= 0; default: the world masses
                                    (a pinned particle keeps its mass, pbd_pin). Taken when
                                    the body is added; particles with inverse mass 0 at a
                                    step (pinned, kinematic) are matched but not moved */
    pbd_sm_mode mode;            /* default PBD_SM_RIGID */
    float beta;                  /* LINEAR / QUADRATIC blend in [0, 1]; default 0.5 */
    float stiffness;             /* alpha in [0, 1] per substep; default 1 */
    int stiffness_correction;    /* 1 (default): alpha' = 1-(1-alpha)^(1/iterations) */
    float yield;                 /* plasticity: ||S - I||_F threshold, >= 0; default 0.05 */
    float creep;                 /* 1/s, >= 0; 0 (default) = no plasticity */
    float max_plastic;           /* bound on ||S_p - I||_F, > 0; default 1 */
    int mark_coupled;            /* default 1, see above */
    int rotation_iterations;     /* per projection, 1..100; default 8 (see below) */
} pbd_sm_body_desc;

PBD_SM_DEF pbd_sm_body_desc pbd_sm_body_desc_default(void);
/* Adds a shape-matching body to the world (a plugin; the world owns the
   body and frees it in pbd_world_destroy or pbd_sm_remove_body; out may be
   NULL). Errors, with nothing changed: NULL pointers; particle_count < 1,
   a duplicate particle, beta/stiffness outside [0, 1], negative
   yield/creep, max_plastic <= 0, both a plan and lists, a plan whose
   particle count differs, an empty region (PBD_ERROR_INVALID_ARGUMENT); a
   particle index outside the world (PBD_ERROR_INDEX_OUT_OF_RANGE); NaN or
   Inf (PBD_ERROR_NOT_FINITE); a negative mass (PBD_ERROR_NEGATIVE_MASS); a
   region whose total mass is zero (PBD_ERROR_INVALID_ARGUMENT) or whose
   rest positions all coincide (PBD_ERROR_DEGENERATE). */
PBD_SM_DEF pbd_result pbd_sm_add_body(pbd_world *w, const pbd_sm_body_desc *desc, pbd_sm_body **out);
PBD_SM_DEF pbd_result pbd_sm_remove_body(pbd_world *w, pbd_sm_body *body);

/* A lattice body (Rivers and James 2007): one particle per cell at
   origin + spacing * cell, regions of half-width w (pbd_sm_plan_lattice,
   owned by the body). body.plan, when set, replaces that plan (any plan
   over the cells, cell i = local particle i: e.g. naive lists of the same
   regions, to compare summation methods; owned as in pbd_sm_body_desc).
   The body desc's particles, lists, rest positions and masses are
   ignored; its other parameters are used. */
typedef struct pbd_sm_lattice_desc {
    const int *cells;     /* cell_count*3 integer cells, distinct */
    int cell_count;
    float origin[3];
    float spacing;        /* > 0; default 0.1 */
    float particle_mass;  /* > 0; default 1 */
    float radius;         /* particle radius; 0 (default): spacing / 2 */
    int half_width;       /* region half-width w >= 1; default 1 */
    pbd_sm_body_desc body;
} pbd_sm_lattice_desc;

PBD_SM_DEF pbd_sm_lattice_desc pbd_sm_lattice_desc_default(void);
/* Adds the particles and the body; *particles (optional) receives their
   range: local particle i (cell i) is world particle particles->first + i. */
PBD_SM_DEF pbd_result pbd_sm_add_lattice(pbd_world *w, const pbd_sm_lattice_desc *desc,
                                         pbd_sm_body **out, pbd_range *particles);
/* The cells of a solid box nx x ny x nz (x fastest): writes 3*nx*ny*nz ints. */
PBD_SM_DEF pbd_result pbd_sm_lattice_box(int nx, int ny, int nz, int *cells);
/* Voxelises a closed, consistently oriented triangle mesh: the cells
   (i, j, k) >= 0 whose centres origin + spacing * (i, j, k) lie inside it
   (parity of the crossings of a ray along +x, slightly offset so that it
   misses edges and vertices). origin (out, 3 floats) is the mesh's lower
   bounding-box corner + spacing / 2, so pass it on as the lattice origin.
   *count receives the number of cells; cells (3 ints each, x fastest) is
   filled when it is not NULL and max_cells >= *count. Costs O(rows x
   triangles). At most 2^20 cells per axis. */
PBD_SM_DEF pbd_result pbd_sm_voxelize(const float *positions, int vertex_count, const int *triangles,
                                      int triangle_count, float spacing, float *origin, int *cells,
                                      int max_cells, int *count);

/* omega-ring regions of a mesh (survey 4.2, Diziol et al. 2011): region i
   holds the vertices within omega edges of vertex i (itself included), in
   increasing order; the edges are those of the elements (arity 2: edges,
   3: triangles, 4: tetrahedra). region_start gets vertex_count + 1
   entries and *total the number of members; region_particles is filled
   when it is not NULL and max >= *total (call once with NULL to size it).
   omega in 1..64. */
PBD_SM_DEF pbd_result pbd_sm_mesh_rings(int vertex_count, const int *elements, int element_count,
                                        int arity, int omega, int *region_start,
                                        int *region_particles, int max, int *total);
/* The same regions as a (naive) summation plan. */
PBD_SM_DEF pbd_result pbd_sm_plan_rings(int vertex_count, const int *elements, int element_count,
                                        int arity, int omega, pbd_sm_sum_plan **out);

PBD_SM_DEF int pbd_sm_body_particle_count(const pbd_sm_body *b);
PBD_SM_DEF int pbd_sm_body_region_count(const pbd_sm_body *b);
/* The plan the body sums with (owned as described in pbd_sm_body_desc). */
PBD_SM_DEF pbd_sm_sum_plan *pbd_sm_body_plan(const pbd_sm_body *b);
/* Goals of the body's particles (3 floats per local particle) for the
   world's current positions, computed as in a projection (the rotations
   warm-start from the stored ones, which stay unchanged). */
PBD_SM_DEF pbd_result pbd_sm_body_goals(pbd_sm_body *b, float *goals);
/* A region's last rotation (quaternion x y z w) and plastic state S_p
   (row-major 3x3). */
PBD_SM_DEF pbd_result pbd_sm_body_rotation(const pbd_sm_body *b, int region, float *q);
PBD_SM_DEF pbd_result pbd_sm_body_plastic_state(const pbd_sm_body *b, int region, float *Sp);
/* Parameters that may change between steps (same ranges as the desc). */
PBD_SM_DEF pbd_result pbd_sm_body_set_stiffness(pbd_sm_body *b, float stiffness);
/* RIGID and LINEAR can be swapped; QUADRATIC (its rest data) is chosen when
   the body is added. */
PBD_SM_DEF pbd_result pbd_sm_body_set_mode(pbd_sm_body *b, pbd_sm_mode mode, float beta);
PBD_SM_DEF pbd_result pbd_sm_body_set_plasticity(pbd_sm_body *b, float yield, float creep,
                                                 float max_plastic);
/* Back to the rest shape: every S_p = I. */
PBD_SM_DEF pbd_result pbd_sm_body_reset_plasticity(pbd_sm_body *b);
/* The body shares its loops among the world's threads when its work (the
   number of region memberships plus particles) is at least min_work
   (default PBD_SM_PARALLEL_MIN, 32768); below, one thread runs it (a
   barrier per stage would cost more). 0: always share. Results are the
   same bits either way. */
PBD_SM_DEF pbd_result pbd_sm_body_set_parallel_min(pbd_sm_body *b, long min_work);

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

/* Row kernels on k doubles; the SIMD twins do the same operation per lane
   in the same order, so they give the same bits. */
#if !defined(PBD_NO_SIMD) && defined(__has_include)
#if __has_include(<simde/x86/avx.h>)
#include <simde/x86/avx.h>
#define PBD_SM__SIMD 1
#endif
#endif
#ifndef PBD_SM__SIMD
#define PBD_SM__SIMD 0
#endif

/* d = a + b */
static void pbd_sm__row_add(double *d, const double *a, const double *b, int k, int simd) {
    int j = 0;
#if PBD_SM__SIMD
    if (simd)
        for (; j + 4 <= k; j += 4)
            simde_mm256_storeu_pd(d + j, simde_mm256_add_pd(simde_mm256_loadu_pd(a + j), simde_mm256_loadu_pd(b + j)));
#else
    (void)simd;
#endif
    for (; j < k; ++j) d[j] = a[j] + b[j];
}
/* d = a - b */
static void pbd_sm__row_sub(double *d, const double *a, const double *b, int k, int simd) {
    int j = 0;
#if PBD_SM__SIMD
    if (simd)
        for (; j + 4 <= k; j += 4)
            simde_mm256_storeu_pd(d + j, simde_mm256_sub_pd(simde_mm256_loadu_pd(a + j), simde_mm256_loadu_pd(b + j)));
#else
    (void)simd;
#endif
    for (; j < k; ++j) d[j] = a[j] - b[j];
}
/* d += a - b */
static void pbd_sm__row_acc_diff(double *d, const double *a, const double *b, int k, int simd) {
    int j = 0;
#if PBD_SM__SIMD
    if (simd)
        for (; j + 4 <= k; j += 4) {
            simde__m256d t = simde_mm256_sub_pd(simde_mm256_loadu_pd(a + j), simde_mm256_loadu_pd(b + j));
            simde_mm256_storeu_pd(d + j, simde_mm256_add_pd(simde_mm256_loadu_pd(d + j), t));
        }
#else
    (void)simd;
#endif
    for (; j < k; ++j) d[j] += a[j] - b[j];
}

/* Every plan keeps the region membership as CSR lists (the definition of
   the regions, used by naive summation and to answer pbd_sm_plan_region);
   a fast method adds its own data in `impl` and its own `sum`, which runs
   inside one parallel region (orphaned `omp for` loops). */
struct pbd_sm_sum_plan {
    pbd_sm_summation method;
    int particle_count, region_count;
    int *region_start;     /* region_count + 1 */
    int *region_particles; /* region_start[region_count] */
    void *impl;
    void (*impl_destroy)(void *impl);
    void (*sum)(pbd_sm_sum_plan *plan, const double *values, int k, double *sums);
    long long cost;        /* row operations per sum, see pbd_sm_plan_cost */
    int threads, simd;
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

/* out[o] = sum of the rows idx[start[o] .. start[o+1]) in list order, where
   a row index below `split` reads lo_rows and the others hi_rows[idx -
   split] (octree: particles, then virtual nodes). An orphaned `omp for`. */
static void pbd_sm__gather_sum(int count, const int *start, const int *idx, const double *lo_rows, int split,
                               const double *hi_rows, int k, double *out, int simd) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int o = 0; o < count; ++o) {
        double *s = out + (size_t)o * k;
        int b = start[o], e = start[o + 1];
        if (b == e) { for (int j = 0; j < k; ++j) s[j] = 0; continue; }
        int i0 = idx[b];
        const double *r0 = i0 < split ? lo_rows + (size_t)i0 * k : hi_rows + (size_t)(i0 - split) * k;
        memcpy(s, r0, sizeof(double) * (size_t)k);
        for (int t = b + 1; t < e; ++t) {
            int i = idx[t];
            const double *r = i < split ? lo_rows + (size_t)i * k : hi_rows + (size_t)(i - split) * k;
            pbd_sm__row_add(s, s, r, k, simd);
        }
    }
}

static void pbd_sm__sum_naive(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__gather_sum(p->region_count, p->region_start, p->region_particles, values, p->particle_count, NULL, k,
                       sums, p->simd);
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
    p->cost = total;
    p->simd = 1;
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

/* ---- scans: segmented prefix sums and window differences -----------------
   The engine of the lattice and path methods. The inputs (rows gathered
   from a source) are split into segments (lattice lines, mesh paths); the
   prefix sums of segment g, which holds inputs [a, b), fill the prefix rows
   a+g .. b+g (row a+g is zero). An output is a sum of intervals, each the
   difference of two prefix rows: the sum of a run of consecutive inputs of
   one segment in O(1), whatever its length (survey 4.3.1: neighbouring
   windows differ by one element; 4.3.3: eq. (9)). */
typedef struct pbd_sm__scan {
    int in_count, seg_count, out_count;
    int *gather;    /* in_count: the source row of each input (NULL: row e) */
    int *seg_start; /* seg_count + 1 */
    int *out_start; /* out_count + 1 over the intervals (NULL: one each) */
    int *iv;        /* 2 per interval: prefix rows lo, hi; the sum is P[hi] - P[lo] */
} pbd_sm__scan;

static void pbd_sm__scan_free(pbd_sm__scan *s) {
    PBD_SM_FREE(s->gather);
    PBD_SM_FREE(s->seg_start);
    PBD_SM_FREE(s->out_start);
    PBD_SM_FREE(s->iv);
    memset(s, 0, sizeof *s);
}

static long long pbd_sm__scan_cost(const pbd_sm__scan *s) {
    long long ivs = s->out_start ? s->out_start[s->out_count] : s->out_count;
    return (long long)s->in_count + ivs;
}

/* Runs inside a parallel region: prefix sums per segment, then outputs. */
static void pbd_sm__scan_run(const pbd_sm__scan *s, const double *src, double *P, double *dst, int k, int simd) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int g = 0; g < s->seg_count; ++g) {
        int a = s->seg_start[g], b = s->seg_start[g + 1];
        double *row = P + ((size_t)a + (size_t)g) * k;
        for (int j = 0; j < k; ++j) row[j] = 0;
        for (int e = a; e < b; ++e, row += k)
            pbd_sm__row_add(row + k, row, src + (size_t)(s->gather ? s->gather[e] : e) * k, k, simd);
    }
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int o = 0; o < s->out_count; ++o) {
        double *d = dst + (size_t)o * k;
        int f = s->out_start ? s->out_start[o] : o, l = s->out_start ? s->out_start[o + 1] : o + 1;
        if (f == l) { for (int j = 0; j < k; ++j) d[j] = 0; continue; }
        const int *iv = s->iv + 2 * (size_t)f;
        pbd_sm__row_sub(d, P + (size_t)iv[1] * k, P + (size_t)iv[0] * k, k, simd);
        for (int t = f + 1; t < l; ++t) {
            iv += 2;
            pbd_sm__row_acc_diff(d, P + (size_t)iv[1] * k, P + (size_t)iv[0] * k, k, simd);
        }
    }
}

/* Segments of sorted keys: a segment is a run of equal key >> 21 (a line
   of the lattice: the two slower coordinates). seg_of[e] is the segment
   of input e. */
static pbd_result pbd_sm__line_segments(const long long *keys, int n, pbd_sm__scan *s, int **seg_of_out) {
    int count = 0;
    for (int e = 0; e < n; ++e)
        if (e == 0 || (keys[e] >> 21) != (keys[e - 1] >> 21)) count++;
    s->seg_start = (int *)pbd_sm__alloc_n((size_t)count + 1, sizeof(int));
    int *seg_of = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    if (!s->seg_start || !seg_of) { PBD_SM_FREE(seg_of); return PBD_ERROR_OUT_OF_MEMORY; }
    int g = -1;
    for (int e = 0; e < n; ++e) {
        if (e == 0 || (keys[e] >> 21) != (keys[e - 1] >> 21)) s->seg_start[++g] = e;
        seg_of[e] = g;
    }
    s->seg_start[count] = n;
    s->seg_count = count;
    s->in_count = n;
    *seg_of_out = seg_of;
    return PBD_OK;
}

static int pbd_sm__lower_bound(const long long *keys, int n, long long key) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
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

/* ---- lattice: bars, plates, cubes (survey 4.3.1, Rivers and James 2007) --
   A cube region around a cell is a z-window of plates, a plate a y-window
   of bars, a bar an x-window of particles. Three scans: pass 0 sums the
   bars (x-lines of particles), pass 1 the plates (y-lines of bars), pass 2
   the cubes (z-lines of plates), each window O(1) from prefix sums. Only
   the bars and plates that some cube needs and that are not empty exist,
   so an irregular lattice costs about its own size. */
typedef struct pbd_sm__lattice {
    pbd_sm__scan pass[3];
    double *P, *B; /* scratch for k = 64: prefix rows; bars, then plates */
} pbd_sm__lattice;

static void pbd_sm__lattice_destroy(void *impl) {
    pbd_sm__lattice *L = (pbd_sm__lattice *)impl;
    if (!L) return;
    for (int s = 0; s < 3; ++s) pbd_sm__scan_free(&L->pass[s]);
    PBD_SM_FREE(L->P);
    PBD_SM_FREE(L->B);
    PBD_SM_FREE(L);
}

static void pbd_sm__sum_lattice(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__lattice *L = (pbd_sm__lattice *)p->impl;
    pbd_sm__scan_run(&L->pass[0], values, L->P, L->B, k, p->simd); /* bars */
    /* the prefix loop reads all bars before its barrier; then plates overwrite them */
    pbd_sm__scan_run(&L->pass[1], L->B, L->P, L->B, k, p->simd);
    pbd_sm__scan_run(&L->pass[2], L->B, L->P, sums, k, p->simd); /* cubes */
}

static void pbd_sm__cell_decode(long long key, int *f) {
    f[0] = (int)(key >> 42) - (1 << 20);
    f[1] = (int)((key >> 21) & ((1 << 21) - 1)) - (1 << 20);
    f[2] = (int)(key & ((1 << 21) - 1)) - (1 << 20);
}
static int pbd_sm__cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}
/* pairs of long long, lexicographic */
static int pbd_sm__cmp_ll2(const void *a, const void *b) {
    int c = pbd_sm__cmp_ll(a, b);
    return c ? c : pbd_sm__cmp_ll((const long long *)a + 1, (const long long *)b + 1);
}
static int pbd_sm__sort_unique_ll(long long *keys, int n) {
    qsort(keys, (size_t)n, sizeof *keys, pbd_sm__cmp_ll);
    int m = 0;
    for (int e = 0; e < n; ++e)
        if (m == 0 || keys[e] != keys[m - 1]) keys[m++] = keys[e];
    return m;
}

/* One pass: inputs are the sorted keys `in` (lines along their fastest
   field); output o is the window of half-width w around candidate cand[o]
   along that line, found at the input key (f[perm[0]], f[perm[1]],
   f[perm[2]] + d), f the candidate's fields, |d| <= w. Empty windows are
   dropped when `kept` is given (it receives the surviving candidates). */
static pbd_result pbd_sm__window_pass(pbd_sm__scan *s, const long long *in, int n_in, const long long *cand,
                                      int n_cand, const int *perm, int w, long long *kept, int *n_out) {
    int *seg_of = NULL;
    pbd_result r = pbd_sm__line_segments(in, n_in, s, &seg_of);
    if (r != PBD_OK) return r;
    if ((long long)n_in + s->seg_count > INT_MAX) { PBD_SM_FREE(seg_of); return PBD_ERROR_OVERFLOW; } /* prefix rows */
    s->iv = (int *)pbd_sm__alloc_n(2 * (size_t)n_cand, sizeof(int));
    if (!s->iv) { PBD_SM_FREE(seg_of); return PBD_ERROR_OUT_OF_MEMORY; }
    int o = 0;
    for (int c = 0; c < n_cand; ++c) {
        int f[3];
        pbd_sm__cell_decode(cand[c], f);
        int lo = pbd_sm__lower_bound(in, n_in, pbd_sm__cell_code(f[perm[0]], f[perm[1]], f[perm[2]] - w));
        int hi = pbd_sm__lower_bound(in, n_in, pbd_sm__cell_code(f[perm[0]], f[perm[1]], f[perm[2]] + w + 1));
        if (lo == hi && kept) continue;
        int g = lo < hi ? seg_of[lo] : 0;
        s->iv[2 * (size_t)o] = lo < hi ? lo + g : 0;
        s->iv[2 * (size_t)o + 1] = lo < hi ? hi + g : 0;
        if (kept) kept[o] = cand[c];
        o++;
    }
    PBD_SM_FREE(seg_of);
    s->out_count = o;
    *n_out = o;
    return PBD_OK;
}

/* Candidate keys c + d * axis_a (+ e * axis_b) over all particles, in the
   field order `order`, sorted and unique. */
static pbd_result pbd_sm__window_candidates(int n, const int *cells, int w, const int *order, int two_axes,
                                            long long **out, int *count) {
    size_t side = 2 * (size_t)w + 1, total = (size_t)n * side * (two_axes ? side : 1);
    if (total > (size_t)INT_MAX) return PBD_ERROR_OVERFLOW;
    long long *keys = (long long *)pbd_sm__alloc_n(total, sizeof(long long));
    if (!keys) return PBD_ERROR_OUT_OF_MEMORY;
    size_t t = 0;
    for (int i = 0; i < n; ++i)
        for (int a = -w; a <= w; ++a)
            for (int b = two_axes ? -w : 0; b <= (two_axes ? w : 0); ++b) {
                /* axis z gets a (plates and bars), axis y gets b (bars only) */
                int f[3] = {cells[3 * i], cells[3 * i + 1] + b, cells[3 * i + 2] + a};
                keys[t++] = pbd_sm__cell_code(f[order[0]], f[order[1]], f[order[2]]);
            }
    *count = pbd_sm__sort_unique_ll(keys, (int)total);
    *out = keys;
    return PBD_OK;
}

static pbd_result pbd_sm__lattice_build(pbd_sm_sum_plan *p, const int *cells, int w) {
    int n = p->particle_count;
    pbd_sm__lattice *L = (pbd_sm__lattice *)pbd_sm__alloc_n(1, sizeof *L);
    if (!L) return PBD_ERROR_OUT_OF_MEMORY;
    memset(L, 0, sizeof *L);
    p->impl = L;
    p->impl_destroy = pbd_sm__lattice_destroy;
    /* pass 0 inputs: particles sorted by (z, y, x), x-lines */
    pbd_sm__cell_key *ck = (pbd_sm__cell_key *)pbd_sm__alloc_n((size_t)n, sizeof *ck);
    long long *k0 = (long long *)pbd_sm__alloc_n((size_t)n, sizeof(long long));
    long long *bars = NULL, *plates = NULL, *cubes = NULL;
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    int nb = 0, np = 0, nc = 0;
    L->pass[0].gather = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    if (!ck || !k0 || !L->pass[0].gather) goto done;
    for (int i = 0; i < n; ++i) {
        ck[i].key = pbd_sm__cell_code(cells[3 * i + 2], cells[3 * i + 1], cells[3 * i]);
        ck[i].particle = i;
    }
    qsort(ck, (size_t)n, sizeof *ck, pbd_sm__cmp_cell_key);
    for (int e = 0; e < n; ++e) { k0[e] = ck[e].key; L->pass[0].gather[e] = ck[e].particle; }
    {
        /* bars at c + (0, b, a), keyed (z, x, y): pass 1 sums them along y */
        static const int bar_order[3] = {2, 0, 1}, bar_perm[3] = {0, 2, 1};
        r = pbd_sm__window_candidates(n, cells, w, bar_order, 1, &bars, &nb);
        if (r != PBD_OK) goto done;
        r = pbd_sm__window_pass(&L->pass[0], k0, n, bars, nb, bar_perm, w, bars, &nb);
        if (r != PBD_OK) goto done;
        /* plates at c + (0, 0, a), keyed (x, y, z): pass 2 sums them along z */
        static const int plate_order[3] = {0, 1, 2}, plate_perm[3] = {2, 0, 1};
        r = pbd_sm__window_candidates(n, cells, w, plate_order, 0, &plates, &np);
        if (r != PBD_OK) goto done;
        r = pbd_sm__window_pass(&L->pass[1], bars, nb, plates, np, plate_perm, w, plates, &np);
        if (r != PBD_OK) goto done;
        /* cubes at the particles, in particle order (never empty) */
        static const int cube_perm[3] = {0, 1, 2};
        r = PBD_ERROR_OUT_OF_MEMORY;
        cubes = (long long *)pbd_sm__alloc_n((size_t)n, sizeof(long long));
        if (!cubes) goto done;
        for (int i = 0; i < n; ++i) cubes[i] = pbd_sm__cell_code(cells[3 * i], cells[3 * i + 1], cells[3 * i + 2]);
        r = pbd_sm__window_pass(&L->pass[2], plates, np, cubes, n, cube_perm, w, NULL, &nc);
        if (r != PBD_OK) goto done;
    }
    {
        size_t prow = 0, brow = (size_t)(nb > np ? nb : np);
        for (int s = 0; s < 3; ++s) {
            size_t rows = (size_t)L->pass[s].in_count + (size_t)L->pass[s].seg_count;
            if (rows > prow) prow = rows;
            p->cost += pbd_sm__scan_cost(&L->pass[s]);
        }
        L->P = (double *)pbd_sm__alloc_n(prow * 64, sizeof(double));
        L->B = (double *)pbd_sm__alloc_n(brow * 64, sizeof(double));
        r = L->P && L->B ? PBD_OK : PBD_ERROR_OUT_OF_MEMORY;
    }
done:
    PBD_SM_FREE(ck);
    PBD_SM_FREE(k0);
    PBD_SM_FREE(bars);
    PBD_SM_FREE(plates);
    PBD_SM_FREE(cubes);
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_plan_lattice(int particle_count, const int *cells, int w, pbd_sm_sum_plan **out) {
    if (!out) return PBD_ERROR_NULL_POINTER;
    if (!cells && particle_count > 0) return PBD_ERROR_NULL_POINTER;
    if (particle_count < 0 || w < 1 || w > 64) return PBD_ERROR_INVALID_ARGUMENT;
    for (long i = 0; i < 3 * (long)particle_count; ++i)
        if (cells[i] < -1000000 || cells[i] > 1000000) return PBD_ERROR_INVALID_ARGUMENT;
    if ((size_t)particle_count * (2 * (size_t)w + 1) * (2 * (size_t)w + 1) > (size_t)INT_MAX)
        return PBD_ERROR_OVERFLOW; /* the candidate bars; checked before the lists are built */
    int *start = NULL, *members = NULL;
    pbd_result r = pbd_sm__lattice_lists(particle_count, cells, w, &start, &members);
    if (r != PBD_OK) return r;
    pbd_sm_sum_plan *p = NULL;
    r = pbd_sm__plan_from_lists(particle_count, particle_count, start, members, &p);
    PBD_SM_FREE(start);
    PBD_SM_FREE(members);
    if (r != PBD_OK) return r;
    p->cost = 0;
    r = pbd_sm__lattice_build(p, cells, w);
    if (r != PBD_OK) { pbd_sm_plan_destroy(p); return r; }
    p->method = PBD_SM_SUM_LATTICE;
    p->sum = pbd_sm__sum_lattice;
    *out = p;
    return PBD_OK;
}

/* ---- octree: adaptive lattice (survey 4.3.2, Steinemann et al. 2008) ------
   Nodes 0..n-1 are the particles (leaves), nodes n.. the virtual nodes
   (every ancestor cell of a leaf, up to a level with at most 8 cells),
   sorted by level so that a bottom-up pass is one loop per level. */
typedef struct pbd_sm__octree {
    int n, m, levels;
    int *level_start; /* levels + 1, over the virtual nodes */
    int *child_start; /* m + 1 */
    int *child;       /* node indices */
    int *reg_start;   /* n + 1 */
    int *reg_node;    /* summation nodes of each region */
    double *node_sums; /* scratch, m * 64 */
} pbd_sm__octree;

static void pbd_sm__octree_destroy(void *impl) {
    pbd_sm__octree *T = (pbd_sm__octree *)impl;
    if (!T) return;
    PBD_SM_FREE(T->level_start);
    PBD_SM_FREE(T->child_start);
    PBD_SM_FREE(T->child);
    PBD_SM_FREE(T->reg_start);
    PBD_SM_FREE(T->reg_node);
    PBD_SM_FREE(T->node_sums);
    PBD_SM_FREE(T);
}

static void pbd_sm__sum_octree(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__octree *T = (pbd_sm__octree *)p->impl;
    /* virtual nodes bottom-up: each level's children are finer, done before */
    for (int l = 0; l < T->levels; ++l) {
        int b = T->level_start[l], e = T->level_start[l + 1];
        pbd_sm__gather_sum(e - b, T->child_start + b, T->child, values, T->n, T->node_sums, k,
                           T->node_sums + (size_t)b * k, p->simd);
    }
    pbd_sm__gather_sum(T->n, T->reg_start, T->reg_node, values, T->n, T->node_sums, k, sums, p->simd);
}

/* An octree cell: level, then integer coordinates at that level. */
typedef struct pbd_sm__ocell { int l, x, y, z, id; } pbd_sm__ocell;

static int pbd_sm__cmp_ocell(const void *a, const void *b) {
    const pbd_sm__ocell *p = (const pbd_sm__ocell *)a, *q = (const pbd_sm__ocell *)b;
    if (p->l != q->l) return p->l < q->l ? -1 : 1;
    if (p->x != q->x) return p->x < q->x ? -1 : 1;
    if (p->y != q->y) return p->y < q->y ? -1 : 1;
    if (p->z != q->z) return p->z < q->z ? -1 : 1;
    return 0;
}
/* floor(v / 2^s) without relying on >> of negative numbers */
static int pbd_sm__floor_shift(int v, int s) { return v >= 0 ? v >> s : -((-(v + 1)) >> s) - 1; }

static pbd_sm__ocell pbd_sm__ancestor(pbd_sm__ocell c, int level) {
    int s = level - c.l;
    pbd_sm__ocell a = {level, pbd_sm__floor_shift(c.x, s), pbd_sm__floor_shift(c.y, s), pbd_sm__floor_shift(c.z, s), -1};
    return a;
}
static int pbd_sm__find_ocell(const pbd_sm__ocell *cells, int n, pbd_sm__ocell key) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = pbd_sm__cmp_ocell(&cells[mid], &key);
        if (c < 0) lo = mid + 1;
        else if (c > 0) hi = mid - 1;
        else return mid;
    }
    return -1;
}

/* A growable int list for the construction. */
typedef struct pbd_sm__ivec { int *a; size_t n, cap; int failed; } pbd_sm__ivec;
static void pbd_sm__ivec_push(pbd_sm__ivec *v, int x) {
    if (v->failed) return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        int *a = (int *)pbd_sm__alloc_n(cap, sizeof(int));
        if (!a || v->n >= (size_t)INT_MAX) { PBD_SM_FREE(a); v->failed = 1; return; }
        if (v->n) memcpy(a, v->a, v->n * sizeof(int));
        PBD_SM_FREE(v->a);
        v->a = a;
        v->cap = cap;
    }
    v->a[v->n++] = x;
}

/* Builds the tree, the summation nodes of every region and the member
   lists (into *start, *members). */
static pbd_result pbd_sm__octree_build(int n, const int *cells, const int *widths, int w, pbd_sm__octree *T,
                                       int **start_out, int **members_out) {
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    pbd_sm__ocell *leaf = (pbd_sm__ocell *)pbd_sm__alloc_n((size_t)n, sizeof *leaf);
    pbd_sm__ocell *virt = NULL;
    long long *box = NULL; /* 6 per node: min xyz, max xyz of the leaf centres, in half finest cells */
    int *parent = NULL, *stack = NULL, *stamp = NULL, *start = NULL;
    pbd_sm__ivec nodes = {NULL, 0, 0, 0}, members = {NULL, 0, 0, 0};
    int m = 0, top = 0, roots[8], nroots = 0;
    if (!leaf) goto done;
    for (int i = 0; i < n; ++i) {
        pbd_sm__ocell c = {cells[4 * i + 3], cells[4 * i], cells[4 * i + 1], cells[4 * i + 2], i};
        leaf[i] = c;
        if (c.l > top) top = c.l;
    }
    qsort(leaf, (size_t)n, sizeof *leaf, pbd_sm__cmp_ocell);
    for (int i = 1; i < n; ++i)
        if (pbd_sm__cmp_ocell(&leaf[i], &leaf[i - 1]) == 0) { r = PBD_ERROR_INVALID_ARGUMENT; goto done; }
    /* the top level: the first (from the coarsest leaf up) with <= 8 cells */
    virt = (pbd_sm__ocell *)pbd_sm__alloc_n((size_t)n * (PBD_SM_OCTREE_MAX_LEVEL + 8), sizeof *virt);
    if (!virt) goto done;
    for (;; ++top) {
        int c = 0;
        for (int i = 0; i < n; ++i) virt[c++] = pbd_sm__ancestor(leaf[i], top);
        qsort(virt, (size_t)c, sizeof *virt, pbd_sm__cmp_ocell);
        int u = 0;
        for (int i = 0; i < c; ++i)
            if (u == 0 || pbd_sm__cmp_ocell(&virt[i], &virt[u - 1]) != 0) u++;
        if (u <= 8 || top >= PBD_SM_OCTREE_MAX_LEVEL + 6) break;
    }
    /* virtual nodes: every proper ancestor of a leaf up to `top` */
    for (int i = 0; i < n; ++i)
        for (int l = leaf[i].l + 1; l <= top; ++l) virt[m++] = pbd_sm__ancestor(leaf[i], l);
    qsort(virt, (size_t)m, sizeof *virt, pbd_sm__cmp_ocell);
    {
        int u = 0;
        for (int i = 0; i < m; ++i)
            if (u == 0 || pbd_sm__cmp_ocell(&virt[i], &virt[u - 1]) != 0) virt[u++] = virt[i];
        m = u;
    }
    /* a leaf that is also an ancestor of another leaf overlaps it */
    for (int i = 0; i < n; ++i)
        if (pbd_sm__find_ocell(virt, m, leaf[i]) >= 0) { r = PBD_ERROR_INVALID_ARGUMENT; goto done; }
    T->n = n;
    T->m = m;
    T->levels = m ? virt[m - 1].l - virt[0].l + 1 : 0;
    T->level_start = (int *)pbd_sm__alloc_n((size_t)T->levels + 1, sizeof(int));
    T->child_start = (int *)pbd_sm__alloc_n((size_t)m + 1, sizeof(int));
    T->child = (int *)pbd_sm__alloc_n((size_t)n + (size_t)m, sizeof(int));
    T->node_sums = (double *)pbd_sm__alloc_n((size_t)m * 64, sizeof(double));
    parent = (int *)pbd_sm__alloc_n((size_t)n + (size_t)m, sizeof(int));
    box = (long long *)pbd_sm__alloc_n(6 * ((size_t)n + (size_t)m), sizeof(long long));
    if (!T->level_start || !T->child_start || !T->child || !T->node_sums || !parent || !box) goto done;
    for (int l = 0, v = 0; l <= T->levels; ++l) {
        while (v < m && virt[v].l < virt[0].l + l) v++;
        T->level_start[l] = v;
    }
    /* parents, then children lists in node order (leaves by particle index) */
    for (int j = 0; j < m + 1; ++j) T->child_start[j] = 0;
    for (int j = 0; j < n + m; ++j) {
        pbd_sm__ocell c;
        if (j < n) { pbd_sm__ocell t = {cells[4 * j + 3], cells[4 * j], cells[4 * j + 1], cells[4 * j + 2], j}; c = t; }
        else c = virt[j - n];
        parent[j] = c.l < top ? pbd_sm__find_ocell(virt, m, pbd_sm__ancestor(c, c.l + 1)) : -1;
        if (parent[j] >= 0) T->child_start[parent[j] + 1]++;
        /* the box of a leaf is its centre, (2x + 1) 2^l half finest cells */
        if (j < n) {
            long long s = 1LL << c.l, cx = (2LL * c.x + 1) * s, cy = (2LL * c.y + 1) * s, cz = (2LL * c.z + 1) * s;
            long long *bx = box + 6 * (size_t)j;
            bx[0] = bx[3] = cx; bx[1] = bx[4] = cy; bx[2] = bx[5] = cz;
        } else {
            long long *bx = box + 6 * (size_t)j;
            bx[0] = bx[1] = bx[2] = LLONG_MAX;
            bx[3] = bx[4] = bx[5] = LLONG_MIN;
        }
    }
    for (int j = 0; j < m; ++j) T->child_start[j + 1] += T->child_start[j];
    {
        int *fill = stamp = (int *)pbd_sm__alloc_n((size_t)m + 1, sizeof(int));
        if (!fill) goto done;
        memcpy(fill, T->child_start, sizeof(int) * (size_t)m);
        for (int j = 0; j < n + m; ++j)
            if (parent[j] >= 0) T->child[fill[parent[j]]++] = j;
        PBD_SM_FREE(stamp);
        stamp = NULL;
    }
    /* boxes bottom-up: virtual nodes are sorted by level */
    for (int v = 0; v < m; ++v) {
        long long *bx = box + 6 * ((size_t)n + v);
        for (int t = T->child_start[v]; t < T->child_start[v + 1]; ++t) {
            const long long *cb = box + 6 * (size_t)T->child[t];
            for (int a = 0; a < 3; ++a) {
                if (cb[a] < bx[a]) bx[a] = cb[a];
                if (cb[3 + a] > bx[3 + a]) bx[3 + a] = cb[3 + a];
            }
        }
    }
    /* regions: top-down from the roots (at most 8) with the interval test */
    for (int j = 0; j < n + m; ++j)
        if (parent[j] < 0 && nroots < 8) roots[nroots++] = j;
    stack = (int *)pbd_sm__alloc_n((size_t)n + (size_t)m, sizeof(int));
    stamp = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    T->reg_start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    if (!stack || !stamp || !T->reg_start || !start) goto done;
    for (int i = 0; i < n; ++i) {
        const long long *ci = box + 6 * (size_t)i;
        int li = cells[4 * i + 3];
        long long W = 2LL * (widths ? widths[i] : w) << li; /* in half finest cells */
        T->reg_start[i] = (int)nodes.n;
        start[i] = (int)members.n;
        int sp = 0;
        for (int t = nroots - 1; t >= 0; --t) stack[sp++] = roots[t]; /* the first pops first */
        while (sp > 0) {
            int j = stack[--sp];
            const long long *bj = box + 6 * (size_t)j;
            long long dmin = 0, dmax = 0;
            for (int a = 0; a < 3; ++a) {
                long long lo = bj[a] - ci[a], hi = bj[3 + a] - ci[a];
                long long nearest = lo > 0 ? lo : (hi < 0 ? -hi : 0);
                long long farthest = -lo > hi ? -lo : hi;
                if (nearest > dmin) dmin = nearest;
                if (farthest > dmax) dmax = farthest;
            }
            if (dmin > W) continue;                 /* all descendants outside */
            if (dmax <= W) {                        /* all inside: one summation node */
                pbd_sm__ivec_push(&nodes, j);
                continue;
            }
            int v = j - n; /* partly inside: refine (never a leaf: its box is a point) */
            for (int t = T->child_start[v + 1] - 1; t >= T->child_start[v]; --t) stack[sp++] = T->child[t];
        }
        /* members: the leaves below the summation nodes, sorted */
        for (size_t e = (size_t)T->reg_start[i]; e < nodes.n; ++e) {
            int q = 0;
            stack[q++] = nodes.a[e];
            while (q > 0) {
                int j = stack[--q];
                if (j < n) { pbd_sm__ivec_push(&members, j); continue; }
                for (int t = T->child_start[j - n]; t < T->child_start[j - n + 1]; ++t) stack[q++] = T->child[t];
            }
        }
        if (nodes.failed || members.failed) { r = members.n >= (size_t)INT_MAX ? PBD_ERROR_OVERFLOW : PBD_ERROR_OUT_OF_MEMORY; goto done; }
        qsort(members.a + start[i], members.n - (size_t)start[i], sizeof(int), pbd_sm__cmp_int);
    }
    T->reg_start[n] = (int)nodes.n;
    start[n] = (int)members.n;
    T->reg_node = nodes.a;
    nodes.a = NULL;
    *start_out = start;
    *members_out = members.a;
    start = NULL;
    members.a = NULL;
    r = PBD_OK;
done:
    PBD_SM_FREE(leaf);
    PBD_SM_FREE(virt);
    PBD_SM_FREE(box);
    PBD_SM_FREE(parent);
    PBD_SM_FREE(stack);
    PBD_SM_FREE(stamp);
    PBD_SM_FREE(start);
    PBD_SM_FREE(nodes.a);
    PBD_SM_FREE(members.a);
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_plan_octree(int particle_count, const int *cells, const int *widths, int w,
                                         pbd_sm_sum_plan **out) {
    if (!out || (particle_count > 0 && !cells)) return PBD_ERROR_NULL_POINTER;
    if (particle_count < 0) return PBD_ERROR_INVALID_ARGUMENT;
    if (!widths && (w < 1 || w > 64)) return PBD_ERROR_INVALID_ARGUMENT;
    if (particle_count > INT_MAX / 32) return PBD_ERROR_OVERFLOW; /* leaves + up to 22 ancestors each */
    for (int i = 0; i < particle_count; ++i) {
        int l = cells[4 * i + 3];
        if (l < 0 || l > PBD_SM_OCTREE_MAX_LEVEL) return PBD_ERROR_INVALID_ARGUMENT;
        if (widths && (widths[i] < 1 || widths[i] > 64)) return PBD_ERROR_INVALID_ARGUMENT;
        for (int a = 0; a < 3; ++a) {
            long long lo = (long long)cells[4 * i + a] * (1LL << l), hi = lo + (1LL << l) - 1;
            if (lo < -1000000 || hi > 1000000) return PBD_ERROR_OVERFLOW;
        }
    }
    pbd_sm__octree *T = (pbd_sm__octree *)pbd_sm__alloc_n(1, sizeof *T);
    if (!T) return PBD_ERROR_OUT_OF_MEMORY;
    memset(T, 0, sizeof *T);
    int *start = NULL, *members = NULL;
    pbd_result r = pbd_sm__octree_build(particle_count, cells, widths, w, T, &start, &members);
    pbd_sm_sum_plan *p = NULL;
    if (r == PBD_OK) r = pbd_sm__plan_from_lists(particle_count, particle_count, start, members, &p);
    PBD_SM_FREE(start);
    PBD_SM_FREE(members);
    if (r != PBD_OK) { pbd_sm__octree_destroy(T); return r; }
    p->impl = T;
    p->impl_destroy = pbd_sm__octree_destroy;
    p->method = PBD_SM_SUM_OCTREE;
    p->sum = pbd_sm__sum_octree;
    p->cost = (long long)T->reg_start[particle_count] + (T->m ? T->child_start[T->m] : 0);
    *out = p;
    return PBD_OK;
}

/* ---- paths: prefix sums on triangle meshes (survey 4.3.3, Diziol et al.) --
   One scan: the vertices in path order, one segment per path; a region is
   a sum of runs of consecutive path vertices. */
typedef struct pbd_sm__paths {
    pbd_sm__scan scan;
    double *P; /* scratch, (n + paths) * 64 */
} pbd_sm__paths;

static void pbd_sm__paths_destroy(void *impl) {
    pbd_sm__paths *Q = (pbd_sm__paths *)impl;
    if (!Q) return;
    pbd_sm__scan_free(&Q->scan);
    PBD_SM_FREE(Q->P);
    PBD_SM_FREE(Q);
}

static void pbd_sm__sum_paths(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__paths *Q = (pbd_sm__paths *)p->impl;
    pbd_sm__scan_run(&Q->scan, values, Q->P, sums, k, p->simd);
}

/* Checks the mesh and builds the vertex adjacency (CSR, neighbours in
   increasing order). */
static pbd_result pbd_sm__mesh_adjacency(int nv, const float *x, int nt, const int *tri, int **adj_start,
                                         int **adj) {
    for (long i = 0; i < 3 * (long)nv; ++i)
        if (!(x[i] == x[i]) || fabs((double)x[i]) > 1e30) return PBD_ERROR_NOT_FINITE;
    for (long t = 0; t < 3 * (long)nt; ++t)
        if (tri[t] < 0 || tri[t] >= nv) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    for (int t = 0; t < nt; ++t) {
        const int *v = tri + 3 * t;
        if (v[0] == v[1] || v[1] == v[2] || v[0] == v[2]) return PBD_ERROR_DEGENERATE;
        double e1[3], e2[3], c[3];
        for (int a = 0; a < 3; ++a) {
            e1[a] = (double)x[3 * v[1] + a] - x[3 * v[0] + a];
            e2[a] = (double)x[3 * v[2] + a] - x[3 * v[0] + a];
        }
        c[0] = e1[1] * e2[2] - e1[2] * e2[1];
        c[1] = e1[2] * e2[0] - e1[0] * e2[2];
        c[2] = e1[0] * e2[1] - e1[1] * e2[0];
        double cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2];
        double ee = (e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2]) * (e2[0] * e2[0] + e2[1] * e2[1] + e2[2] * e2[2]);
        if (!(cc > 1e-24 * ee) || !(ee > 0)) return PBD_ERROR_DEGENERATE; /* sin^2 of the angle ~ 0 */
    }
    if ((size_t)nt * 3 > (size_t)INT_MAX / 2) return PBD_ERROR_OVERFLOW;
    /* undirected edges as keys a * nv + b (a < b); sorted, an edge may be in at
       most two triangles; triangles as sorted triples may not repeat */
    long long *e = (long long *)pbd_sm__alloc_n(3 * (size_t)nt, sizeof(long long));
    long long *tk = (long long *)pbd_sm__alloc_n((size_t)nt, sizeof(long long) * 2);
    int *count = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    int *as = NULL, *aa = NULL;
    if (!e || !tk || !count) goto done;
    for (int t = 0; t < nt; ++t) {
        int v[3] = {tri[3 * t], tri[3 * t + 1], tri[3 * t + 2]};
        for (int a = 0; a < 3; ++a) {
            int p = v[a], q = v[(a + 1) % 3];
            e[3 * t + a] = p < q ? (long long)p * nv + q : (long long)q * nv + p;
        }
        /* sort the triple */
        if (v[0] > v[1]) { int s = v[0]; v[0] = v[1]; v[1] = s; }
        if (v[1] > v[2]) { int s = v[1]; v[1] = v[2]; v[2] = s; }
        if (v[0] > v[1]) { int s = v[0]; v[0] = v[1]; v[1] = s; }
        tk[2 * t] = (long long)v[0] * nv + v[1];
        tk[2 * t + 1] = v[2];
    }
    qsort(e, 3 * (size_t)nt, sizeof *e, pbd_sm__cmp_ll);
    qsort(tk, (size_t)nt, 2 * sizeof(long long), pbd_sm__cmp_ll2);
    r = PBD_ERROR_INVALID_ARGUMENT;
    for (int t = 1; t < nt; ++t)
        if (tk[2 * t] == tk[2 * t - 2] && tk[2 * t + 1] == tk[2 * t - 1]) goto done; /* repeated triangle */
    for (size_t i = 2; i < 3 * (size_t)nt; ++i)
        if (e[i] == e[i - 2]) goto done; /* three triangles on one edge */
    {
        int ne = pbd_sm__sort_unique_ll(e, 3 * nt);
        memset(count, 0, sizeof(int) * ((size_t)nv + 1));
        for (int i = 0; i < ne; ++i) {
            count[e[i] / nv + 1]++;
            count[e[i] % nv + 1]++;
        }
        for (int v = 0; v < nv; ++v) count[v + 1] += count[v];
        r = PBD_ERROR_OUT_OF_MEMORY;
        as = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
        aa = (int *)pbd_sm__alloc_n(2 * (size_t)ne, sizeof(int));
        if (!as || !aa) goto done;
        memcpy(as, count, sizeof(int) * ((size_t)nv + 1));
        for (int i = 0; i < ne; ++i) {
            int a = (int)(e[i] / nv), b = (int)(e[i] % nv);
            aa[count[a]++] = b;
            aa[count[b]++] = a;
        }
        for (int v = 0; v < nv; ++v) qsort(aa + as[v], (size_t)(as[v + 1] - as[v]), sizeof(int), pbd_sm__cmp_int);
    }
    *adj_start = as;
    *adj = aa;
    as = aa = NULL;
    r = PBD_OK;
done:
    PBD_SM_FREE(e);
    PBD_SM_FREE(tk);
    PBD_SM_FREE(count);
    PBD_SM_FREE(as);
    PBD_SM_FREE(aa);
    return r;
}

/* The w-ring of every vertex by breadth-first search, members sorted. */
static pbd_result pbd_sm__mesh_rings(int nv, const int *as, const int *aa, int w, int **start_out, int **members_out) {
    int *start = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
    int *dist = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    int *stamp = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    int *queue = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    pbd_sm__ivec members = {NULL, 0, 0, 0};
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    if (!start || !dist || !stamp || !queue) goto done;
    for (int v = 0; v < nv; ++v) stamp[v] = -1;
    for (int v = 0; v < nv; ++v) {
        int head = 0, tail = 0;
        queue[tail++] = v;
        stamp[v] = v;
        dist[v] = 0;
        while (head < tail) {
            int u = queue[head++];
            if (dist[u] == w) continue;
            for (int t = as[u]; t < as[u + 1]; ++t) {
                int q = aa[t];
                if (stamp[q] == v) continue;
                stamp[q] = v;
                dist[q] = dist[u] + 1;
                queue[tail++] = q;
            }
        }
        start[v] = (int)members.n;
        for (int t = 0; t < tail; ++t) pbd_sm__ivec_push(&members, queue[t]);
        if (members.failed) { r = members.n >= (size_t)INT_MAX ? PBD_ERROR_OVERFLOW : PBD_ERROR_OUT_OF_MEMORY; goto done; }
        qsort(members.a + start[v], (size_t)tail, sizeof(int), pbd_sm__cmp_int);
    }
    start[nv] = (int)members.n;
    *start_out = start;
    *members_out = members.a;
    start = NULL;
    members.a = NULL;
    r = PBD_OK;
done:
    PBD_SM_FREE(start);
    PBD_SM_FREE(dist);
    PBD_SM_FREE(stamp);
    PBD_SM_FREE(queue);
    PBD_SM_FREE(members.a);
    return r;
}

/* The path heuristic of Diziol et al. (survey 4.3.3): a path starts at the
   first free vertex (index order) and grows from its end to a free
   neighbour near the plane through the path's start normal to the
   bounding box's longest axis (parallel paths: within half a mean edge
   of the nearest one), among those the one with the most neighbours
   already on paths (no gaps left behind), then the nearest, then the
   lowest index. order[] receives the vertices path by
   path, path_start[] the paths (CSR). */
static void pbd_sm__mesh_paths(int nv, const float *x, const int *as, const int *aa, int max_len, int *order,
                               int *path_start, int *path_count, int *on_path, int *taken_nbrs) {
    float lo[3] = {0, 0, 0}, hi[3] = {0, 0, 0};
    for (int v = 0; v < nv; ++v)
        for (int a = 0; a < 3; ++a) {
            if (v == 0 || x[3 * v + a] < lo[a]) lo[a] = x[3 * v + a];
            if (v == 0 || x[3 * v + a] > hi[a]) hi[a] = x[3 * v + a];
        }
    int axis = 0;
    for (int a = 1; a < 3; ++a)
        if (hi[a] - lo[a] > hi[axis] - lo[axis]) axis = a;
    /* half the mean edge extent along the axis: what counts as equally near */
    double ext = 0;
    for (int v = 0; v < nv; ++v)
        for (int t = as[v]; t < as[v + 1]; ++t) ext += fabs((double)x[3 * aa[t] + axis] - x[3 * v + axis]);
    float band = as[nv] > 0 ? (float)(0.5 * ext / as[nv]) : 0.0f;
    for (int v = 0; v < nv; ++v) { on_path[v] = 0; taken_nbrs[v] = 0; }
    int n_out = 0, paths = 0;
    for (int s = 0; s < nv; ++s) {
        if (on_path[s]) continue;
        path_start[paths++] = n_out;
        float plane = x[3 * s + axis];
        int cur = s, len = 0;
        while (cur >= 0) {
            on_path[cur] = 1;
            order[n_out++] = cur;
            len++;
            for (int t = as[cur]; t < as[cur + 1]; ++t) taken_nbrs[aa[t]]++;
            if (len >= max_len) break;
            /* the free neighbours within half an edge of the nearest to the
               plane; among them the most neighbours on paths, then the nearest */
            float dmin = FLT_MAX;
            for (int t = as[cur]; t < as[cur + 1]; ++t)
                if (!on_path[aa[t]]) {
                    float d = fabsf(x[3 * aa[t] + axis] - plane);
                    if (d < dmin) dmin = d;
                }
            int best = -1;
            float best_d = 0;
            for (int t = as[cur]; t < as[cur + 1]; ++t) {
                int u = aa[t];
                float d = fabsf(x[3 * u + axis] - plane);
                if (on_path[u] || d > dmin + band) continue;
                if (best < 0 || taken_nbrs[u] > taken_nbrs[best] || (taken_nbrs[u] == taken_nbrs[best] && d < best_d)) {
                    best = u;
                    best_d = d;
                }
            }
            cur = best;
        }
    }
    path_start[paths] = n_out;
    *path_count = paths;
}

static pbd_result pbd_sm__paths_build(pbd_sm_sum_plan *p, const float *x, const int *as, const int *aa, int max_len) {
    int n = p->particle_count;
    pbd_sm__paths *Q = (pbd_sm__paths *)pbd_sm__alloc_n(1, sizeof *Q);
    if (!Q) return PBD_ERROR_OUT_OF_MEMORY;
    memset(Q, 0, sizeof *Q);
    p->impl = Q;
    p->impl_destroy = pbd_sm__paths_destroy;
    pbd_sm__scan *s = &Q->scan;
    int *pos = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));  /* position in path order */
    int *seg = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));  /* path of each vertex */
    int *tmp = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    pbd_sm__ivec iv = {NULL, 0, 0, 0};
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    s->gather = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    s->seg_start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    s->out_start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    if (!pos || !seg || !tmp || !s->gather || !s->seg_start || !s->out_start) goto done;
    pbd_sm__mesh_paths(n, x, as, aa, max_len, s->gather, s->seg_start, &s->seg_count, pos, seg);
    for (int g = 0; g < s->seg_count; ++g)
        for (int e = s->seg_start[g]; e < s->seg_start[g + 1]; ++e) { pos[s->gather[e]] = e; seg[s->gather[e]] = g; }
    s->in_count = n;
    s->out_count = n;
    /* each region: its members' path positions, sorted, cut into runs */
    for (int r0 = 0; r0 < n; ++r0) {
        int b = p->region_start[r0], cnt = p->region_start[r0 + 1] - b;
        for (int t = 0; t < cnt; ++t) tmp[t] = pos[p->region_particles[b + t]];
        qsort(tmp, (size_t)cnt, sizeof(int), pbd_sm__cmp_int);
        s->out_start[r0] = (int)(iv.n / 2);
        for (int t = 0; t < cnt;) {
            int u = t + 1, g = seg[s->gather[tmp[t]]];
            while (u < cnt && tmp[u] == tmp[u - 1] + 1 && seg[s->gather[tmp[u]]] == g) u++;
            pbd_sm__ivec_push(&iv, tmp[t] + g);    /* prefix row before the run */
            pbd_sm__ivec_push(&iv, tmp[u - 1] + 1 + g); /* prefix row after it */
            t = u;
        }
        if (iv.failed) goto done;
    }
    s->out_start[n] = (int)(iv.n / 2);
    s->iv = iv.a;
    iv.a = NULL;
    Q->P = (double *)pbd_sm__alloc_n(((size_t)n + (size_t)s->seg_count) * 64, sizeof(double));
    if (!Q->P) goto done;
    p->cost = pbd_sm__scan_cost(s);
    r = PBD_OK;
done:
    PBD_SM_FREE(pos);
    PBD_SM_FREE(seg);
    PBD_SM_FREE(tmp);
    PBD_SM_FREE(iv.a);
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_plan_paths(int vertex_count, const float *positions, int triangle_count,
                                        const int *triangles, int w, int max_path_length, pbd_sm_sum_plan **out) {
    if (!out || (vertex_count > 0 && !positions) || (triangle_count > 0 && !triangles)) return PBD_ERROR_NULL_POINTER;
    if (vertex_count < 0 || triangle_count < 0 || w < 1 || w > 64 || max_path_length < 0)
        return PBD_ERROR_INVALID_ARGUMENT;
    if (vertex_count > INT_MAX / 2) return PBD_ERROR_OVERFLOW; /* prefix rows: vertices + paths */
    if (max_path_length == 0) max_path_length = 512; /* survey 4.7: paths of at most 512 */
    int *as = NULL, *aa = NULL, *start = NULL, *members = NULL;
    pbd_sm_sum_plan *p = NULL;
    pbd_result r = pbd_sm__mesh_adjacency(vertex_count, positions, triangle_count, triangles, &as, &aa);
    if (r == PBD_OK) r = pbd_sm__mesh_rings(vertex_count, as, aa, w, &start, &members);
    if (r == PBD_OK) r = pbd_sm__plan_from_lists(vertex_count, vertex_count, start, members, &p);
    if (r == PBD_OK) {
        r = pbd_sm__paths_build(p, positions, as, aa, max_path_length);
        if (r != PBD_OK) { pbd_sm_plan_destroy(p); p = NULL; }
    }
    PBD_SM_FREE(as);
    PBD_SM_FREE(aa);
    PBD_SM_FREE(start);
    PBD_SM_FREE(members);
    if (r != PBD_OK) return r;
    p->method = PBD_SM_SUM_PATHS;
    p->sum = pbd_sm__sum_paths;
    *out = p;
    return PBD_OK;
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
PBD_SM_DEF long long pbd_sm_plan_cost(const pbd_sm_sum_plan *p) { return p ? p->cost : 0; }

PBD_SM_DEF pbd_result pbd_sm_plan_region(const pbd_sm_sum_plan *p, int r, int *particles, int max, int *count) {
    if (!p || !count || (max > 0 && !particles)) return PBD_ERROR_NULL_POINTER;
    if (r < 0 || r >= p->region_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (max < 0) return PBD_ERROR_INVALID_ARGUMENT;
    int b = p->region_start[r], n = p->region_start[r + 1] - b;
    for (int e = 0; e < n && e < max; ++e) particles[e] = p->region_particles[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF int pbd_sm_plan_path_count(const pbd_sm_sum_plan *p) {
    return p && p->method == PBD_SM_SUM_PATHS ? ((const pbd_sm__paths *)p->impl)->scan.seg_count : 0;
}

PBD_SM_DEF pbd_result pbd_sm_plan_path(const pbd_sm_sum_plan *p, int path, int *vertices, int max, int *count) {
    if (!p || !count || (max > 0 && !vertices)) return PBD_ERROR_NULL_POINTER;
    if (p->method != PBD_SM_SUM_PATHS || max < 0) return PBD_ERROR_INVALID_ARGUMENT;
    const pbd_sm__scan *s = &((const pbd_sm__paths *)p->impl)->scan;
    if (path < 0 || path >= s->seg_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    int b = s->seg_start[path], n = s->seg_start[path + 1] - b;
    for (int e = 0; e < n && e < max; ++e) vertices[e] = s->gather[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_set_threads(pbd_sm_sum_plan *p, int threads) {
    if (!p) return PBD_ERROR_NULL_POINTER;
    if (threads < 0) return PBD_ERROR_INVALID_ARGUMENT;
    p->threads = threads;
    return PBD_OK;
}

PBD_SM_DEF const char *pbd_sm_sum_simd_path(void) { return PBD_SM__SIMD ? "avx-f64" : "scalar"; }

PBD_SM_DEF pbd_result pbd_sm_plan_set_simd(pbd_sm_sum_plan *p, int on) {
    if (!p) return PBD_ERROR_NULL_POINTER;
    p->simd = on ? 1 : 0;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_sum(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    if (!p || !sums || (p->particle_count > 0 && !values)) return PBD_ERROR_NULL_POINTER;
    if (k < 1 || k > 64) return PBD_ERROR_INVALID_ARGUMENT;
#if PBD_SM__OPENMP
    /* one parallel region; below 512 regions a barrier costs more than it
       saves; called from inside a parallel region, no nested team */
    int nt = p->threads > 0 ? p->threads : omp_get_max_threads();
    if (p->region_count < 512 || omp_get_level() > 0) nt = 1; /* even an inactive (1-thread) enclosing region */
    if (nt > 1) {
        PBD_SM__PRAGMA(omp parallel num_threads(nt))
        p->sum(p, values, k, sums);
        return PBD_OK;
    }
#endif
    /* serially: the orphaned `omp for` loops bind to a team of one */
    PBD_SM__PRAGMA(omp parallel num_threads(1))
    p->sum(p, values, k, sums);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_sum_team(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    if (!p || !sums || (p->particle_count > 0 && !values)) return PBD_ERROR_NULL_POINTER;
    if (k < 1 || k > 64) return PBD_ERROR_INVALID_ARGUMENT;
    p->sum(p, values, k, sums);
    return PBD_OK;
}

// ==== shape matching ========================================================

#ifndef PBD_SM_PARALLEL_MIN
#define PBD_SM_PARALLEL_MIN 32768
#endif

/* --- small dense matrices (row-major, double) ------------------------------- */

static void pbd_sm__mx_mul3(const double *A, const double *B, double *C) { /* C = A B */
    double T[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) T[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
    memcpy(C, T, sizeof T);
}
static void pbd_sm__mx_mul3_bt(const double *A, const double *B, double *C) { /* C = A B^T */
    double T[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            T[3 * i + j] = A[3 * i] * B[3 * j] + A[3 * i + 1] * B[3 * j + 1] + A[3 * i + 2] * B[3 * j + 2];
    memcpy(C, T, sizeof T);
}
static void pbd_sm__mx_mul3_at(const double *A, const double *B, double *C) { /* C = A^T B */
    double T[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) T[3 * i + j] = A[i] * B[j] + A[3 + i] * B[3 + j] + A[6 + i] * B[6 + j];
    memcpy(C, T, sizeof T);
}
static double pbd_sm__mx_det3(const double *A) {
    return A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) + A[2] * (A[3] * A[7] - A[4] * A[6]);
}
/* Inverse of a 3x3 with det(A) = d != 0 (adjugate / d). */
static void pbd_sm__mx_inv3(const double *A, double d, double *Ai) {
    double T[9] = {A[4] * A[8] - A[5] * A[7], A[2] * A[7] - A[1] * A[8], A[1] * A[5] - A[2] * A[4],
                   A[5] * A[6] - A[3] * A[8], A[0] * A[8] - A[2] * A[6], A[2] * A[3] - A[0] * A[5],
                   A[3] * A[7] - A[4] * A[6], A[1] * A[6] - A[0] * A[7], A[0] * A[4] - A[1] * A[3]};
    for (int k = 0; k < 9; ++k) Ai[k] = T[k] / d;
}
static double pbd_sm__mx_dist_identity(const double *S) { /* ||S - I||_F */
    double s = 0;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            double d = S[3 * i + j] - (i == j ? 1.0 : 0.0);
            s += d * d;
        }
    return sqrt(s);
}

/* Cyclic Jacobi eigen-decomposition of a symmetric n x n matrix (n <= 9):
   A is overwritten (its diagonal ends up holding the eigenvalues), V gets
   the eigenvectors as columns. Only used when bodies are added. */
static void pbd_sm__mx_sym_eigen(int n, double *A, double *V) {
    for (int i = 0; i < n * n; ++i) V[i] = 0;
    for (int i = 0; i < n; ++i) V[i * n + i] = 1;
    for (int sweep = 0; sweep < 60; ++sweep) {
        double off = 0, diag = 0;
        for (int p = 0; p < n; ++p) {
            diag += A[p * n + p] * A[p * n + p];
            for (int q = p + 1; q < n; ++q) off += A[p * n + q] * A[p * n + q];
        }
        if (!(off > 1e-32 * diag)) break;
        for (int p = 0; p < n; ++p)
            for (int q = p + 1; q < n; ++q) {
                double apq = A[p * n + q];
                if (apq == 0) continue;
                double theta = (A[q * n + q] - A[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; ++k) { /* A J */
                    double akp = A[k * n + p], akq = A[k * n + q];
                    A[k * n + p] = c * akp - s * akq;
                    A[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; ++k) { /* J^T A */
                    double apk = A[p * n + k], aqk = A[q * n + k];
                    A[p * n + k] = c * apk - s * aqk;
                    A[q * n + k] = s * apk + c * aqk;
                }
                A[p * n + q] = A[q * n + p] = 0;
                for (int k = 0; k < n; ++k) {
                    double vkp = V[k * n + p], vkq = V[k * n + q];
                    V[k * n + p] = c * vkp - s * vkq;
                    V[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
}

/* Pseudo-inverse of a symmetric positive semi-definite n x n matrix, with
   eigenvalues below 1e-10 of the largest treated as zero (a flat or
   collinear rest shape has exactly such directions); null (optional) gets
   the projector onto those directions. A is scaled by D (diagonal) first
   so that entries of different units compare: pinv(A) = D pinv(D A D) D. */
static void pbd_sm__mx_pinv(int n, const double *A, const double *D, double *Ai, double *null) {
    double B[81], V[81], lam[9], lmax = 0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) B[i * n + j] = D[i] * A[i * n + j] * D[j];
    pbd_sm__mx_sym_eigen(n, B, V);
    for (int i = 0; i < n; ++i) {
        lam[i] = B[i * n + i];
        if (lam[i] > lmax) lmax = lam[i];
    }
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
            double s = 0, z = 0;
            for (int e = 0; e < n; ++e) {
                int keep = lam[e] > 1e-10 * lmax;
                double vv = V[i * n + e] * V[j * n + e];
                if (keep) s += vv / lam[e];
                else z += vv;
            }
            Ai[i * n + j] = D[i] * s * D[j];
            if (null) null[i * n + j] = z;
        }
    }
}

/* --- the body ---------------------------------------------------------------- */

/* The basis phi(x) = (1, x, y, z, x^2, y^2, z^2, xy, yz, zx): a region's
   goal function is G phi(x~) with G 3 x 4 (rigid, linear) or 3 x 10
   (quadratic), so a particle's blended goal is (sum of its regions' G)
   phi(x~_i) / |R_i|, and region sums of m~ x phi(x~)^T give every moment
   the match needs (Mueller et al. 2005, eqs. 7 and 8 of the survey). */
#define PBD_SM__NB_MAX 10
static const int pbd_sm__quad_a[6] = {0, 1, 2, 0, 1, 2};
static const int pbd_sm__quad_b[6] = {0, 1, 2, 1, 2, 0};

static void pbd_sm__phi(const double *x, int nb, double *phi) {
    phi[0] = 1;
    phi[1] = x[0]; phi[2] = x[1]; phi[3] = x[2];
    if (nb > 4)
        for (int k = 0; k < 6; ++k) phi[4 + k] = x[pbd_sm__quad_a[k]] * x[pbd_sm__quad_b[k]];
}

struct pbd_sm_body {
    pbd_world *world;
    pbd_plugin plugin;
    int n, nr;
    int *idx;                   /* n world particles */
    pbd_sm_sum_plan *plan;
    int owns_plan;
    int symmetric;              /* blend = plan sum of the region goal functions */
    int *p2r_start, *p2r;       /* each particle's regions (when not symmetric) */
    double *xbar;               /* n*3 rest positions relative to the rest centroid */
    double *mt;                 /* n: m~ = m / |R_i| */
    double *inv_nreg;           /* n: 1 / |R_i|, 0 for a particle in no region */
    double *M, *cbar;           /* nr, nr*3: region mass and rest centre */
    double *Aqq_pinv, *Aqq_null;/* nr*9 each: pinv(A_qq) and the projector onto its null space */
    double *A9_pinv, *Qbar;     /* quadratic only: nr*81 pinv(A~_qq), nr*6 sum m~ quad(q) */
    double *rot;                /* nr*4: rotations (warm starts) */
    double *Sp;                 /* nr*9: plastic states */
    double *values, *sums;      /* n*30, nr*30 scratch */
    double *T, *G;              /* nr*30 region goal functions, n*30 blended */
    double *rot_tmp;            /* nr*4: warm starts for pbd_sm_body_goals */
    double extent;              /* largest |xbar| */
    long work, parallel_min;    /* region memberships; share the loops from this many */
    pbd_sm_mode mode;
    double beta, alpha;
    int correction;
    double yield, creep, maxp;
    int rot_iters;              /* rotation extraction steps per projection */
    int converge;               /* 1 in pbd_sm_body_goals: extract to convergence */
};

PBD_SM_DEF pbd_sm_body_desc pbd_sm_body_desc_default(void) {
    pbd_sm_body_desc d;
    memset(&d, 0, sizeof d);
    d.mode = PBD_SM_RIGID;
    d.beta = 0.5f;
    d.stiffness = 1.0f;
    d.stiffness_correction = 1;
    d.yield = 0.05f;
    d.creep = 0.0f;
    d.max_plastic = 1.0f;
    d.mark_coupled = 1;
    d.rotation_iterations = 8;
    return d;
}

static int pbd_sm__finitef(float v) { return v == v && v <= FLT_MAX && v >= -FLT_MAX; }

static pbd_result pbd_sm__check_params(pbd_sm_mode mode, float beta, float stiffness, float yield, float creep,
                                       float maxp, int rotation_iterations) {
    if (rotation_iterations < 1 || rotation_iterations > 100) return PBD_ERROR_INVALID_ARGUMENT;
    if (!pbd_sm__finitef(beta) || !pbd_sm__finitef(stiffness) || !pbd_sm__finitef(yield) || !pbd_sm__finitef(creep) ||
        !pbd_sm__finitef(maxp))
        return PBD_ERROR_NOT_FINITE;
    if (mode != PBD_SM_RIGID && mode != PBD_SM_LINEAR && mode != PBD_SM_QUADRATIC) return PBD_ERROR_INVALID_ARGUMENT;
    if (beta < 0 || beta > 1 || stiffness < 0 || stiffness > 1 || yield < 0 || creep < 0 || !(maxp > 0))
        return PBD_ERROR_INVALID_ARGUMENT;
    return PBD_OK;
}

static int pbd_sm__body_nb(const pbd_sm_body *b) { return b->mode == PBD_SM_QUADRATIC ? 10 : 4; }

static void pbd_sm__body_free(pbd_sm_body *b) {
    if (!b) return;
    if (b->owns_plan) pbd_sm_plan_destroy(b->plan);
    double *d[] = {b->xbar, b->mt, b->inv_nreg, b->M, b->cbar, b->Aqq_pinv, b->Aqq_null, b->A9_pinv, b->Qbar,
                   b->rot, b->Sp, b->values, b->sums, b->T, b->G, b->rot_tmp};
    for (size_t k = 0; k < sizeof d / sizeof d[0]; ++k) PBD_SM_FREE(d[k]);
    PBD_SM_FREE(b->idx);
    PBD_SM_FREE(b->p2r_start);
    PBD_SM_FREE(b->p2r);
    PBD_SM_FREE(b);
}

/* Per-particle region counts and, unless the regions are symmetric, each
   particle's region list (increasing region order: the fixed gather order). */
static pbd_result pbd_sm__body_transpose(pbd_sm_body *b) {
    const pbd_sm_sum_plan *P = b->plan;
    int n = b->n, nr = b->nr, total = P->region_start[nr];
    b->p2r_start = (int *)pbd_sm__alloc_n((size_t)n + 1, sizeof(int));
    b->p2r = (int *)pbd_sm__alloc_n((size_t)total, sizeof(int));
    int *fill = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    if (!b->p2r_start || !b->p2r || !fill) { PBD_SM_FREE(fill); return PBD_ERROR_OUT_OF_MEMORY; }
    memset(b->p2r_start, 0, sizeof(int) * ((size_t)n + 1));
    for (int e = 0; e < total; ++e) b->p2r_start[P->region_particles[e] + 1]++;
    for (int i = 0; i < n; ++i) b->p2r_start[i + 1] += b->p2r_start[i];
    memcpy(fill, b->p2r_start, sizeof(int) * (size_t)n);
    for (int r = 0; r < nr; ++r)
        for (int e = P->region_start[r]; e < P->region_start[r + 1]; ++e) b->p2r[fill[P->region_particles[e]]++] = r;
    /* symmetric: particle i's regions are exactly the members of region i */
    int sym = nr == n;
    for (int i = 0; i < n; ++i) fill[i] = -1;
    for (int i = 0; i < n && sym; ++i) {
        if (P->region_start[i + 1] - P->region_start[i] != b->p2r_start[i + 1] - b->p2r_start[i]) { sym = 0; break; }
        for (int e = P->region_start[i]; e < P->region_start[i + 1]; ++e) fill[P->region_particles[e]] = i;
        for (int e = b->p2r_start[i]; e < b->p2r_start[i + 1]; ++e)
            if (fill[b->p2r[e]] != i) { sym = 0; break; }
    }
    PBD_SM_FREE(fill);
    for (int i = 0; i < n; ++i) {
        int c = b->p2r_start[i + 1] - b->p2r_start[i];
        b->inv_nreg[i] = c > 0 ? 1.0 / c : 0.0;
    }
    b->symmetric = sym;
    if (sym) {
        PBD_SM_FREE(b->p2r_start);
        PBD_SM_FREE(b->p2r);
        b->p2r_start = b->p2r = NULL;
    }
    return PBD_OK;
}

/* Rest data of every region from its member list (once, when the body is
   added): M~, c~ (survey eq. 7), pinv(A_qq) with A_qq = sum m~ q q^T, and
   for quadratic mode pinv(A~_qq) (9x9) and sum m~ quad(q). */
static pbd_result pbd_sm__body_rest(pbd_sm_body *b) {
    const pbd_sm_sum_plan *P = b->plan;
    int quad = b->mode == PBD_SM_QUADRATIC;
    for (int r = 0; r < b->nr; ++r) {
        double M = 0, c[3] = {0, 0, 0}, A[9] = {0}, A9[81] = {0}, Q[6] = {0};
        for (int e = P->region_start[r]; e < P->region_start[r + 1]; ++e) {
            int i = P->region_particles[e];
            M += b->mt[i];
            for (int a = 0; a < 3; ++a) c[a] += b->mt[i] * b->xbar[3 * i + a];
        }
        if (!(M > 0)) return PBD_ERROR_INVALID_ARGUMENT; /* zero total mass */
        for (int a = 0; a < 3; ++a) c[a] /= M;
        for (int e = P->region_start[r]; e < P->region_start[r + 1]; ++e) {
            int i = P->region_particles[e];
            double q[3], ph[10], m = b->mt[i];
            for (int a = 0; a < 3; ++a) q[a] = b->xbar[3 * i + a] - c[a];
            for (int a = 0; a < 3; ++a)
                for (int d = 0; d < 3; ++d) A[3 * a + d] += m * q[a] * q[d];
            pbd_sm__phi(q, 10, ph);
            for (int k = 0; k < 6; ++k) Q[k] += m * ph[4 + k];
        }
        /* quadratic: q~ = (q, quad(q) - mean), the quadratic terms centred */
        for (int e = P->region_start[r]; quad && e < P->region_start[r + 1]; ++e) {
            int i = P->region_particles[e];
            double q[3], ph[10], qt[9], m = b->mt[i];
            for (int a = 0; a < 3; ++a) q[a] = b->xbar[3 * i + a] - c[a];
            pbd_sm__phi(q, 10, ph);
            for (int k = 0; k < 9; ++k) qt[k] = ph[1 + k] - (k >= 3 ? Q[k - 3] / M : 0.0);
            for (int a = 0; a < 9; ++a)
                for (int d = 0; d < 9; ++d) A9[9 * a + d] += m * qt[a] * qt[d];
        }
        double size2 = (A[0] + A[4] + A[8]) / M; /* mean squared distance from the centre */
        double tiny = 1e-6 * (b->extent > 0 ? b->extent : 1.0);
        if (!(size2 > tiny * tiny)) return PBD_ERROR_DEGENERATE; /* all rest positions coincide */
        double L = sqrt(size2), D[9];
        for (int k = 0; k < 9; ++k) D[k] = k < 3 ? 1 / L : 1 / (L * L);
        memcpy(b->cbar + 3 * (size_t)r, c, sizeof c);
        b->M[r] = M;
        pbd_sm__mx_pinv(3, A, D, b->Aqq_pinv + 9 * (size_t)r, b->Aqq_null + 9 * (size_t)r);
        if (quad) {
            pbd_sm__mx_pinv(9, A9, D, b->A9_pinv + 81 * (size_t)r, NULL);
            memcpy(b->Qbar + 6 * (size_t)r, Q, sizeof Q);
        }
    }
    return PBD_OK;
}

static pbd_result pbd_sm__body_alloc(pbd_sm_body *b) {
    size_t n = (size_t)b->n, nr = (size_t)b->nr;
    int quad = b->mode == PBD_SM_QUADRATIC;
    size_t k = 3 * (size_t)pbd_sm__body_nb(b);
    b->xbar = (double *)pbd_sm__alloc_n(n * 3, sizeof(double));
    b->mt = (double *)pbd_sm__alloc_n(n, sizeof(double));
    b->inv_nreg = (double *)pbd_sm__alloc_n(n, sizeof(double));
    b->M = (double *)pbd_sm__alloc_n(nr, sizeof(double));
    b->cbar = (double *)pbd_sm__alloc_n(nr * 3, sizeof(double));
    b->Aqq_pinv = (double *)pbd_sm__alloc_n(nr * 9, sizeof(double));
    b->Aqq_null = (double *)pbd_sm__alloc_n(nr * 9, sizeof(double));
    b->A9_pinv = quad ? (double *)pbd_sm__alloc_n(nr * 81, sizeof(double)) : NULL;
    b->Qbar = quad ? (double *)pbd_sm__alloc_n(nr * 6, sizeof(double)) : NULL;
    b->rot = (double *)pbd_sm__alloc_n(nr * 4, sizeof(double));
    b->rot_tmp = (double *)pbd_sm__alloc_n(nr * 4, sizeof(double));
    b->Sp = (double *)pbd_sm__alloc_n(nr * 9, sizeof(double));
    b->values = (double *)pbd_sm__alloc_n(n * k, sizeof(double));
    b->sums = (double *)pbd_sm__alloc_n(nr * k, sizeof(double));
    b->T = (double *)pbd_sm__alloc_n(nr * k, sizeof(double));
    b->G = (double *)pbd_sm__alloc_n(n * k, sizeof(double));
    if (!b->xbar || !b->mt || !b->inv_nreg || !b->M || !b->cbar || !b->Aqq_pinv || !b->Aqq_null ||
        (quad && (!b->A9_pinv || !b->Qbar)) || !b->rot || !b->rot_tmp || !b->Sp || !b->values || !b->sums || !b->T ||
        !b->G)
        return PBD_ERROR_OUT_OF_MEMORY;
    for (size_t r = 0; r < nr; ++r) {
        double *q = b->rot + 4 * r, *S = b->Sp + 9 * r;
        q[0] = q[1] = q[2] = 0; q[3] = 1;
        for (int e = 0; e < 9; ++e) S[e] = (e % 4 == 0) ? 1.0 : 0.0;
    }
    return PBD_OK;
}

/* Builds a body (not yet in a world) from validated input. The plan is
   taken over only on success when owns_plan. */
static pbd_result pbd_sm__body_build(int n, pbd_sm_sum_plan *plan, int owns_plan, const float *rest,
                                     const float *masses, const pbd_sm_body_desc *d, pbd_sm_body **out) {
    pbd_sm_body *b = (pbd_sm_body *)pbd_sm__alloc_n(1, sizeof *b);
    if (!b) return PBD_ERROR_OUT_OF_MEMORY;
    memset(b, 0, sizeof *b);
    b->n = n;
    b->nr = plan->region_count;
    b->plan = plan;
    b->mode = d->mode;
    b->beta = d->beta;
    b->alpha = d->stiffness;
    b->correction = d->stiffness_correction != 0;
    b->yield = d->yield;
    b->creep = d->creep;
    b->maxp = d->max_plastic;
    b->rot_iters = d->rotation_iterations;
    b->work = (long)plan->region_start[b->nr] + n;
    b->parallel_min = PBD_SM_PARALLEL_MIN;
    b->idx = (int *)pbd_sm__alloc_n((size_t)n, sizeof(int));
    pbd_result res = b->idx ? pbd_sm__body_alloc(b) : PBD_ERROR_OUT_OF_MEMORY;
    if (res == PBD_OK) {
        /* rest positions relative to their centroid, for precision */
        double o[3] = {0, 0, 0};
        for (int i = 0; i < n; ++i)
            for (int a = 0; a < 3; ++a) o[a] += rest[3 * i + a];
        for (int a = 0; a < 3; ++a) o[a] /= n;
        for (int i = 0; i < n; ++i)
            for (int a = 0; a < 3; ++a) {
                b->xbar[3 * i + a] = rest[3 * i + a] - o[a];
                if (fabs(b->xbar[3 * i + a]) > b->extent) b->extent = fabs(b->xbar[3 * i + a]);
            }
        res = pbd_sm__body_transpose(b);
    }
    if (res == PBD_OK) {
        for (int i = 0; i < n; ++i) b->mt[i] = masses[i] * b->inv_nreg[i]; /* survey 4.2: m~ = m / |R_i| */
        res = pbd_sm__body_rest(b);
    }
    if (res != PBD_OK) {
        b->owns_plan = 0;
        pbd_sm__body_free(b);
        return res;
    }
    b->owns_plan = owns_plan;
    *out = b;
    return PBD_OK;
}

/* --- the solver stages --------------------------------------------------------
   The plugin is parallel (every thread of the substep's team calls it).
   A small body runs on thread 0 alone, with one barrier after it (a
   barrier costs microseconds, much more on a loaded machine); a large one
   (work >= parallel_min) shares each stage's loop in static chunks with a
   barrier between stages. Region sums go through the plan from one thread:
   a plan's sum may run its own passes. Every element is computed the same
   way whatever the chunking, so results are bit-identical for any thread
   count. */

typedef struct pbd_sm__team { int t, T; } pbd_sm__team;

static void pbd_sm__chunk(pbd_sm__team tm, int n, int *lo, int *hi) {
    *lo = (int)((long long)n * tm.t / tm.T);
    *hi = (int)((long long)n * (tm.t + 1) / tm.T);
}
static void pbd_sm__barrier(pbd_sm__team tm) {
    if (tm.T > 1) {
        PBD_SM__PRAGMA(omp barrier)
    }
}

/* values[i] = m~_i y_i phi(x~_i)^T with y_i = pos_i - o (survey eqs. 7, 8) */
static void pbd_sm__stage_values(pbd_sm_body *b, const float *pos, const double *o, int lo, int hi) {
    int nb = pbd_sm__body_nb(b), k = 3 * nb;
    for (int i = lo; i < hi; ++i) {
        const float *x = pos + 4 * (size_t)b->idx[i];
        double y[3] = {x[0] - o[0], x[1] - o[1], x[2] - o[2]}, ph[PBD_SM__NB_MAX];
        double *v = b->values + (size_t)i * k, m = b->mt[i];
        pbd_sm__phi(b->xbar + 3 * (size_t)i, nb, ph);
        for (int a = 0; a < 3; ++a) {
            double my = m * y[a];
            for (int c = 0; c < nb; ++c) v[a * nb + c] = my * ph[c];
        }
    }
}

static void pbd_sm__stage_sums(pbd_sm_body *b) {
    pbd_sm_plan_sum(b->plan, b->values, 3 * pbd_sm__body_nb(b), b->sums);
}

/* The region's centre c (relative to o) and A_pq = sum m~ p q^T from its
   sums: sum m~ y x~^T - M c c~^T (survey eq. 8). */
static void pbd_sm__region_moments(const pbd_sm_body *b, int r, double *c, double *Apq) {
    int nb = pbd_sm__body_nb(b);
    const double *S = b->sums + (size_t)r * 3 * nb, *cb = b->cbar + 3 * (size_t)r;
    double M = b->M[r];
    for (int a = 0; a < 3; ++a) c[a] = S[a * nb] / M;
    for (int a = 0; a < 3; ++a)
        for (int j = 0; j < 3; ++j) Apq[3 * a + j] = S[a * nb + 1 + j] - M * c[a] * cb[j];
}

/* The best linear map A = A_pq pinv(A_qq), completed by R where the rest
   shape spans no direction (flat and collinear regions). */
static void pbd_sm__region_linear(const pbd_sm_body *b, int r, const double *Apq, const double *R, double *A) {
    double RN[9];
    pbd_sm__mx_mul3(Apq, b->Aqq_pinv + 9 * (size_t)r, A);
    pbd_sm__mx_mul3(R, b->Aqq_null + 9 * (size_t)r, RN);
    for (int k = 0; k < 9; ++k) A[k] += RN[k];
}

/* The angle of the next step of the rotation extraction from q: near
   the answer, about the remaining error. */
static double pbd_sm__rotation_residual(const double *A, const double *q) {
    double R[9], om[3] = {0, 0, 0}, dot = 0;
    pbd_sm__quat_to_mat(q, R);
    for (int c = 0; c < 3; ++c) {
        double r0 = R[c], r1 = R[3 + c], r2 = R[6 + c], a0 = A[c], a1 = A[3 + c], a2 = A[6 + c];
        om[0] += r1 * a2 - r2 * a1;
        om[1] += r2 * a0 - r0 * a2;
        om[2] += r0 * a1 - r1 * a0;
        dot += r0 * a0 + r1 * a1 + r2 * a2;
    }
    return sqrt(om[0] * om[0] + om[1] * om[1] + om[2] * om[2]) / (fabs(dot) + 1e-300);
}

/* Rotation of the match with the plastically deformed rest shape:
   polar(A_pq S_p^T) (survey 4.5.2: q = S_p (x~ - c~)), warm-started, at
   most rot_iters steps unless that leaves more than 1e-7 rad (a sudden
   large turn): then to convergence. */
static void pbd_sm__region_rotation(const pbd_sm_body *b, int r, const double *Apq, double *q, double *R) {
    double Ap[9];
    pbd_sm__mx_mul3_bt(Apq, b->Sp + 9 * (size_t)r, Ap);
    pbd_sm_extract_rotation_d(Ap, q, b->converge ? 100 : b->rot_iters);
    if (!b->converge && pbd_sm__rotation_residual(Ap, q) > 1e-7) pbd_sm_extract_rotation_d(Ap, q, 100);
    pbd_sm__quat_to_mat(q, R);
}

/* The goal function of region r as T = G (3 x nb) over phi(x~):
   g(x~) = B (x~ - c~) + Qm quad(x~ - c~) + c, expanded in x~. */
static void pbd_sm__region_goal(pbd_sm_body *b, int r, double *quat) {
    int nb = pbd_sm__body_nb(b);
    double c[3], Apq[9], R[9], B[9], Qm[18] = {0};
    const double *cb = b->cbar + 3 * (size_t)r;
    pbd_sm__region_moments(b, r, c, Apq);
    pbd_sm__region_rotation(b, r, Apq, quat, R);
    pbd_sm__mx_mul3(R, b->Sp + 9 * (size_t)r, B); /* rigid: R S_p */
    if (b->mode == PBD_SM_LINEAR && b->beta > 0) {
        /* Mueller et al. 2005 section 4.2: beta A / cbrt(det A) + (1 - beta) R;
           with S_p, (A S_p^-1) S_p = A. An inverted or collapsed region
           (det A <= 0) keeps the rigid goal. */
        double A[9];
        pbd_sm__region_linear(b, r, Apq, R, A);
        double det = pbd_sm__mx_det3(A);
        if (det > 1e-9) {
            double s = b->beta / cbrt(det);
            for (int k = 0; k < 9; ++k) B[k] = s * A[k] + (1 - b->beta) * B[k];
        }
    } else if (b->mode == PBD_SM_QUADRATIC && b->beta > 0) {
        /* Mueller et al. 2005 section 4.3: A~ = A~_pq pinv(A~_qq), the
           quadratic columns of A~_pq expanded from the sums about c~. */
        const double *S = b->sums + (size_t)r * 30, *Qb = b->Qbar + 6 * (size_t)r, *Ai = b->A9_pinv + 81 * (size_t)r;
        double Apq9[27], At[27];
        for (int a = 0; a < 3; ++a) {
            for (int j = 0; j < 3; ++j) Apq9[9 * a + j] = Apq[3 * a + j];
            for (int k = 0; k < 6; ++k) {
                int u = pbd_sm__quad_a[k], v = pbd_sm__quad_b[k];
                Apq9[9 * a + 3 + k] = S[a * 10 + 4 + k] - cb[u] * S[a * 10 + 1 + v] - cb[v] * S[a * 10 + 1 + u] +
                                      cb[u] * cb[v] * S[a * 10] - c[a] * Qb[k];
            }
        }
        for (int a = 0; a < 3; ++a)
            for (int j = 0; j < 9; ++j) {
                double s = 0;
                for (int e = 0; e < 9; ++e) s += Apq9[9 * a + e] * Ai[9 * e + j];
                At[9 * a + j] = s;
            }
        for (int a = 0; a < 3; ++a) {
            for (int j = 0; j < 3; ++j) B[3 * a + j] = b->beta * At[9 * a + j] + (1 - b->beta) * B[3 * a + j];
            for (int k = 0; k < 6; ++k) Qm[6 * a + k] = b->beta * At[9 * a + 3 + k];
        }
    }
    double *T = b->T + (size_t)r * 3 * nb;
    for (int a = 0; a < 3; ++a) {
        double *t = T + a * nb;
        t[0] = c[a];
        for (int j = 0; j < 3; ++j) {
            t[0] -= B[3 * a + j] * cb[j];
            t[1 + j] = B[3 * a + j];
        }
        if (nb == 10)
            for (int k = 0; k < 6; ++k) {
                int u = pbd_sm__quad_a[k], v = pbd_sm__quad_b[k];
                double qm = Qm[6 * a + k];
                t[4 + k] = qm;
                t[0] += qm * (cb[u] * cb[v] - b->Qbar[6 * (size_t)r + k] / b->M[r]); /* centred */
                t[1 + v] -= qm * cb[u];
                t[1 + u] -= qm * cb[v];
            }
    }
}

static void pbd_sm__stage_goals(pbd_sm_body *b, double *quats, int lo, int hi) {
    for (int r = lo; r < hi; ++r) pbd_sm__region_goal(b, r, quats + 4 * (size_t)r);
}

/* G_i = sum of the goal functions of particle i's regions, in a fixed
   order (survey 4.2, blended goals; survey 4.7: per-element goals, then a
   per-vertex gather). Symmetric regions: one plan sum (from one thread). */
static void pbd_sm__stage_gather_plan(pbd_sm_body *b) {
    pbd_sm_plan_sum(b->plan, b->T, 3 * pbd_sm__body_nb(b), b->G);
}
static void pbd_sm__stage_gather_lists(pbd_sm_body *b, int lo, int hi) {
    int k = 3 * pbd_sm__body_nb(b);
    for (int i = lo; i < hi; ++i) {
        double *g = b->G + (size_t)i * k;
        for (int j = 0; j < k; ++j) g[j] = 0;
        for (int e = b->p2r_start[i]; e < b->p2r_start[i + 1]; ++e) {
            const double *t = b->T + (size_t)b->p2r[e] * k;
            for (int j = 0; j < k; ++j) g[j] += t[j];
        }
    }
}

static void pbd_sm__particle_goal(const pbd_sm_body *b, int i, const double *o, double *g) {
    int nb = pbd_sm__body_nb(b);
    double ph[PBD_SM__NB_MAX];
    const double *G = b->G + (size_t)i * 3 * nb;
    pbd_sm__phi(b->xbar + 3 * (size_t)i, nb, ph);
    for (int a = 0; a < 3; ++a) {
        double s = 0;
        for (int c = 0; c < nb; ++c) s += G[a * nb + c] * ph[c];
        g[a] = o[a] + s * b->inv_nreg[i];
    }
}

/* p_i += alpha' (g_i - p_i) for dynamic particles in a region (survey 4.1). */
static void pbd_sm__stage_apply(pbd_sm_body *b, float *p, const double *o, double alpha, int lo, int hi) {
    for (int i = lo; i < hi; ++i) {
        float *x = p + 4 * (size_t)b->idx[i];
        if (x[3] == 0 || b->inv_nreg[i] == 0) continue;
        double g[3];
        pbd_sm__particle_goal(b, i, o, g);
        for (int a = 0; a < 3; ++a) x[a] = (float)(x[a] + alpha * (g[a] - x[a]));
    }
}

/* Plastic flow of one region (survey 4.5.2) from the shape at the end of a
   substep; updates S_p and the warm start. */
static void pbd_sm__region_plastic(pbd_sm_body *b, int r, double h) {
    double c[3], Apq[9], R[9], A[9], S[9], Spi[9], *Sp = b->Sp + 9 * (size_t)r;
    pbd_sm__region_moments(b, r, c, Apq);
    pbd_sm__region_rotation(b, r, Apq, b->rot + 4 * (size_t)r, R);
    pbd_sm__region_linear(b, r, Apq, R, A);
    double dp = pbd_sm__mx_det3(Sp);
    if (!(dp > 0)) return;
    pbd_sm__mx_inv3(Sp, dp, Spi);
    pbd_sm__mx_mul3_at(R, A, S); /* S = R^T A S_p^-1: the elastic deformation */
    pbd_sm__mx_mul3(S, Spi, S);
    for (int i = 0; i < 3; ++i)
        for (int j = i + 1; j < 3; ++j) S[3 * i + j] = S[3 * j + i] = 0.5 * (S[3 * i + j] + S[3 * j + i]);
    if (!(pbd_sm__mx_dist_identity(S) > b->yield)) return;
    double f = h * b->creep, U[9], N[9];
    if (f > 1) f = 1;
    for (int k = 0; k < 9; ++k) U[k] = f * (S[k] - (k % 4 == 0 ? 1.0 : 0.0)) + (k % 4 == 0 ? 1.0 : 0.0);
    pbd_sm__mx_mul3(U, Sp, N); /* S_p <- [I + h c_creep (S - I)] S_p */
    double dist = pbd_sm__mx_dist_identity(N);
    if (dist > b->maxp) /* bounded: S_p <- I + c_max (S_p - I) / ||S_p - I|| */
        for (int k = 0; k < 9; ++k) N[k] = (k % 4 == 0 ? 1.0 : 0.0) + b->maxp * (N[k] - (k % 4 == 0 ? 1.0 : 0.0)) / dist;
    double dn = pbd_sm__mx_det3(N);
    if (!(dn > 1e-6)) return; /* would invert the rest shape: keep S_p */
    double s = 1 / cbrt(dn);  /* volume conservation, last so that det S_p = 1 */
    for (int k = 0; k < 9; ++k) Sp[k] = N[k] * s;
}

static double pbd_sm__alpha(const pbd_sm_body *b, int iterations) {
    if (!b->correction || iterations <= 1 || b->alpha >= 1) return b->alpha;
    return 1 - pow(1 - b->alpha, 1.0 / iterations); /* survey 3.3 */
}

static void pbd_sm__origin(const pbd_sm_body *b, const float *pos, double *o) {
    const float *x = pos + 4 * (size_t)b->idx[0];
    o[0] = x[0]; o[1] = x[1]; o[2] = x[2];
}

/* One projection (or, plastic = 1, the plastic flow after a substep) by
   this thread of the team. pos: the positions matched (p, or x after the
   substep); quats: the rotations' warm starts (updated). */
static void pbd_sm__solve(pbd_sm_body *b, pbd_sm__team tm, float *pos, double *quats, double alpha, int plastic,
                          double h) {
    double o[3];
    int lo, hi;
    if (tm.T == 1 || b->work < b->parallel_min) {
        if (tm.t == 0) {
            pbd_sm__origin(b, pos, o);
            pbd_sm__stage_values(b, pos, o, 0, b->n);
            pbd_sm__stage_sums(b);
            if (plastic) {
                for (int r = 0; r < b->nr; ++r) pbd_sm__region_plastic(b, r, h);
            } else {
                pbd_sm__stage_goals(b, quats, 0, b->nr);
                if (b->symmetric) pbd_sm__stage_gather_plan(b);
                else pbd_sm__stage_gather_lists(b, 0, b->n);
                pbd_sm__stage_apply(b, pos, o, alpha, 0, b->n);
            }
        }
        pbd_sm__barrier(tm);
        return;
    }
    pbd_sm__origin(b, pos, o); /* every thread reads it before the first barrier; p moves after the third */
    pbd_sm__chunk(tm, b->n, &lo, &hi);
    pbd_sm__stage_values(b, pos, o, lo, hi);
    pbd_sm__barrier(tm);
    if (tm.t == 0) pbd_sm__stage_sums(b);
    pbd_sm__barrier(tm);
    pbd_sm__chunk(tm, b->nr, &lo, &hi);
    if (plastic) {
        for (int r = lo; r < hi; ++r) pbd_sm__region_plastic(b, r, h);
        pbd_sm__barrier(tm);
        return;
    }
    pbd_sm__stage_goals(b, quats, lo, hi);
    pbd_sm__barrier(tm);
    pbd_sm__chunk(tm, b->n, &lo, &hi);
    if (b->symmetric) {
        if (tm.t == 0) pbd_sm__stage_gather_plan(b);
        pbd_sm__barrier(tm);
    } else {
        pbd_sm__stage_gather_lists(b, lo, hi);
    }
    pbd_sm__stage_apply(b, pos, o, alpha, lo, hi);
    pbd_sm__barrier(tm);
}

static pbd_sm__team pbd_sm__context_team(const pbd_solve_context *c) {
    pbd_sm__team tm;
    tm.t = c->thread;
    tm.T = c->thread_count > 0 ? c->thread_count : 1;
    return tm;
}

static void pbd_sm__plugin_project(void *user, const pbd_solve_context *c) {
    pbd_sm_body *b = (pbd_sm_body *)user;
    if (!(b->alpha > 0)) return;
    pbd_sm__solve(b, pbd_sm__context_team(c), c->p, b->rot, pbd_sm__alpha(b, c->iterations), 0, 0);
}

static void pbd_sm__plugin_end_substep(void *user, const pbd_solve_context *c) {
    pbd_sm_body *b = (pbd_sm_body *)user;
    if (!(b->creep > 0)) return;
    pbd_sm__solve(b, pbd_sm__context_team(c), c->x, b->rot, 0, 1, c->h);
}

static void pbd_sm__plugin_destroy(void *user) { pbd_sm__body_free((pbd_sm_body *)user); }

static pbd_result pbd_sm__body_attach(pbd_world *w, pbd_sm_body *b, int mark_coupled) {
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    int end = 0;
    for (int i = 0; i < b->n; ++i)
        if (b->idx[i] + 1 > end) end = b->idx[i] + 1;
    pd.name = "shape matching";
    pd.user = b;
    pd.parallel = 1;
    pd.particle_end = end;
    pd.work = b->work;
    pd.project = pbd_sm__plugin_project;
    pd.end_substep = pbd_sm__plugin_end_substep;
    pd.destroy = pbd_sm__plugin_destroy;
    b->world = w;
    pbd_result r = pbd_add_plugin(w, &pd, &b->plugin);
    if (r != PBD_OK) return r;
    if (mark_coupled) pbd_world_mark_coupled(w, b->idx, b->n);
    return PBD_OK;
}

/* Every region non-empty; the plan's own checks made the rest valid. */
static pbd_result pbd_sm__check_plan(const pbd_sm_sum_plan *p, int n) {
    if (p->particle_count != n || p->region_count < 1) return PBD_ERROR_INVALID_ARGUMENT;
    for (int r = 0; r < p->region_count; ++r)
        if (p->region_start[r + 1] <= p->region_start[r]) return PBD_ERROR_INVALID_ARGUMENT;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_body(pbd_world *w, const pbd_sm_body_desc *d, pbd_sm_body **out) {
    if (!w || !d || !d->particles) return PBD_ERROR_NULL_POINTER;
    int n = d->particle_count, wn = pbd_world_particle_count(w);
    if (n < 1) return PBD_ERROR_INVALID_ARGUMENT;
    pbd_result res = pbd_sm__check_params(d->mode, d->beta, d->stiffness, d->yield, d->creep, d->max_plastic,
                                          d->rotation_iterations);
    if (res != PBD_OK) return res;
    for (int i = 0; i < n; ++i)
        if (d->particles[i] < 0 || d->particles[i] >= wn) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (d->plan && d->region_start) return PBD_ERROR_INVALID_ARGUMENT; /* one region source */
    float *rest = (float *)pbd_sm__alloc_n((size_t)n * 3, sizeof(float));
    float *mass = (float *)pbd_sm__alloc_n((size_t)n, sizeof(float));
    int *seen = (int *)pbd_sm__alloc_n((size_t)wn, sizeof(int));
    if (!rest || !mass || !seen) res = PBD_ERROR_OUT_OF_MEMORY;
    if (res == PBD_OK) {
        memset(seen, 0, sizeof(int) * (size_t)wn);
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < n && res == PBD_OK; ++i) {
            int j = d->particles[i];
            if (seen[j]++) { res = PBD_ERROR_INVALID_ARGUMENT; break; } /* duplicate */
            for (int a = 0; a < 3; ++a) rest[3 * i + a] = d->rest_positions ? d->rest_positions[3 * i + a] : x[4 * j + a];
            if (d->masses) mass[i] = d->masses[i];
            else pbd_get_mass(w, j, &mass[i]);
            for (int a = 0; a < 3; ++a)
                if (!pbd_sm__finitef(rest[3 * i + a])) res = PBD_ERROR_NOT_FINITE;
            if (!pbd_sm__finitef(mass[i])) res = PBD_ERROR_NOT_FINITE;
            else if (mass[i] < 0 && res == PBD_OK) res = PBD_ERROR_NEGATIVE_MASS;
        }
    }
    pbd_sm_sum_plan *plan = d->plan, *made = NULL;
    if (res == PBD_OK && !plan) {
        if (d->region_start) {
            res = pbd_sm_plan_naive(n, d->region_count, d->region_start, d->region_particles, &made);
        } else { /* one cluster of every particle (survey 4.1) */
            int start[2] = {0, n};
            for (int i = 0; i < n; ++i) seen[i] = i;
            res = pbd_sm_plan_naive(n, 1, start, seen, &made);
        }
        plan = made;
    }
    if (res == PBD_OK) res = pbd_sm__check_plan(plan, n);
    pbd_sm_body *b = NULL;
    if (res == PBD_OK) res = pbd_sm__body_build(n, plan, made ? 1 : d->owns_plan != 0, rest, mass, d, &b);
    PBD_SM_FREE(rest);
    PBD_SM_FREE(mass);
    PBD_SM_FREE(seen);
    if (res != PBD_OK) {
        pbd_sm_plan_destroy(made);
        return res;
    }
    memcpy(b->idx, d->particles, sizeof(int) * (size_t)n);
    res = pbd_sm__body_attach(w, b, d->mark_coupled != 0);
    if (res != PBD_OK) {
        if (!made) b->owns_plan = 0; /* the caller keeps a plan it passed */
        pbd_sm__body_free(b);
        return res;
    }
    if (out) *out = b;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_remove_body(pbd_world *w, pbd_sm_body *b) {
    if (!w || !b) return PBD_ERROR_NULL_POINTER;
    if (b->world != w) return PBD_ERROR_INVALID_ARGUMENT;
    return pbd_remove_plugin(w, b->plugin); /* frees the body */
}

PBD_SM_DEF pbd_sm_lattice_desc pbd_sm_lattice_desc_default(void) {
    pbd_sm_lattice_desc d;
    memset(&d, 0, sizeof d);
    d.spacing = 0.1f;
    d.particle_mass = 1.0f;
    d.half_width = 1;
    d.body = pbd_sm_body_desc_default();
    return d;
}

PBD_SM_DEF pbd_result pbd_sm_lattice_box(int nx, int ny, int nz, int *cells) {
    if (!cells) return PBD_ERROR_NULL_POINTER;
    if (nx < 1 || ny < 1 || nz < 1) return PBD_ERROR_INVALID_ARGUMENT;
    if ((double)nx * ny * nz > (double)(INT_MAX / 3)) return PBD_ERROR_OVERFLOW;
    int k = 0;
    for (int z = 0; z < nz; ++z)
        for (int y = 0; y < ny; ++y)
            for (int x = 0; x < nx; ++x) {
                cells[k++] = x; cells[k++] = y; cells[k++] = z;
            }
    return PBD_OK;
}

/* x coordinates where the line (y, z) along x crosses the triangles, sorted. */
static int pbd_sm__voxel_row(const float *P, const int *T, int nt, double y, double z, double *xs) {
    int n = 0;
    for (int t = 0; t < nt; ++t) {
        const float *a = P + 3 * T[3 * t], *b = P + 3 * T[3 * t + 1], *c = P + 3 * T[3 * t + 2];
        /* barycentric coordinates of (y, z) in the triangle projected on yz */
        double d = (double)(b[1] - a[1]) * (c[2] - a[2]) - (double)(c[1] - a[1]) * (b[2] - a[2]);
        if (d == 0) continue; /* edge-on: the offset ray meets its neighbours instead */
        double u = ((y - a[1]) * (c[2] - a[2]) - (c[1] - a[1]) * (z - a[2])) / d;
        double v = ((b[1] - a[1]) * (z - a[2]) - (y - a[1]) * (b[2] - a[2])) / d;
        if (u < 0 || v < 0 || u + v > 1) continue;
        xs[n++] = a[0] + u * (b[0] - a[0]) + v * (c[0] - a[0]);
    }
    for (int i = 1; i < n; ++i) /* insertion sort: rows cross few triangles */
        for (int j = i; j > 0 && xs[j] < xs[j - 1]; --j) {
            double t = xs[j]; xs[j] = xs[j - 1]; xs[j - 1] = t;
        }
    return n;
}

PBD_SM_DEF pbd_result pbd_sm_voxelize(const float *P, int nv, const int *T, int nt, float spacing, float *origin,
                                      int *cells, int max_cells, int *count) {
    if (!P || !T || !origin || !count) return PBD_ERROR_NULL_POINTER;
    if (nv < 3 || nt < 1 || max_cells < 0) return PBD_ERROR_INVALID_ARGUMENT;
    if (!pbd_sm__finitef(spacing)) return PBD_ERROR_NOT_FINITE;
    if (!(spacing > 0)) return PBD_ERROR_INVALID_ARGUMENT;
    for (long k = 0; k < 3L * nt; ++k)
        if (T[k] < 0 || T[k] >= nv) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    double lo[3] = {DBL_MAX, DBL_MAX, DBL_MAX}, hi[3] = {-DBL_MAX, -DBL_MAX, -DBL_MAX};
    for (long k = 0; k < 3L * nv; ++k) {
        if (!pbd_sm__finitef(P[k])) return PBD_ERROR_NOT_FINITE;
        if (P[k] < lo[k % 3]) lo[k % 3] = P[k];
        if (P[k] > hi[k % 3]) hi[k % 3] = P[k];
    }
    int dim[3];
    for (int a = 0; a < 3; ++a) {
        double cnt = floor((hi[a] - lo[a]) / spacing) + 1;
        if (cnt > (1 << 20)) return PBD_ERROR_OVERFLOW;
        dim[a] = (int)cnt;
    }
    double *xs = (double *)pbd_sm__alloc_n((size_t)nt, sizeof(double));
    if (!xs) return PBD_ERROR_OUT_OF_MEMORY;
    long n = 0;
    /* the ray is offset by irrational fractions of a cell, so it does not
       pass through a mesh vertex or edge of a mesh built on a grid */
    double oy = 1e-4 * spacing * 0.7548776662, oz = 1e-4 * spacing * 0.5698402910;
    for (int k = 0; k < dim[2]; ++k)
        for (int j = 0; j < dim[1]; ++j) {
            double y = lo[1] + spacing * (j + 0.5) + oy, z = lo[2] + spacing * (k + 0.5) + oz;
            int m = pbd_sm__voxel_row(P, T, nt, y, z, xs);
            for (int e = 0; e + 1 < m; e += 2) /* inside between crossings 2e and 2e+1 */
                for (int i = 0; i < dim[0]; ++i) {
                    double x = lo[0] + spacing * (i + 0.5);
                    if (x < xs[e] || x >= xs[e + 1]) continue;
                    if (cells && n < max_cells) {
                        cells[3 * n] = i; cells[3 * n + 1] = j; cells[3 * n + 2] = k;
                    }
                    if (++n > INT_MAX) { PBD_SM_FREE(xs); return PBD_ERROR_OVERFLOW; }
                }
        }
    PBD_SM_FREE(xs);
    for (int a = 0; a < 3; ++a) origin[a] = (float)(lo[a] + 0.5 * spacing);
    *count = (int)n;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_lattice(pbd_world *w, const pbd_sm_lattice_desc *d, pbd_sm_body **out,
                                         pbd_range *range) {
    if (!w || !d || !d->cells) return PBD_ERROR_NULL_POINTER;
    int n = d->cell_count;
    if (n < 1 || d->half_width < 1) return PBD_ERROR_INVALID_ARGUMENT;
    if (!pbd_sm__finitef(d->spacing) || !pbd_sm__finitef(d->particle_mass) || !pbd_sm__finitef(d->radius) ||
        !pbd_sm__finitef(d->origin[0]) || !pbd_sm__finitef(d->origin[1]) || !pbd_sm__finitef(d->origin[2]))
        return PBD_ERROR_NOT_FINITE;
    if (!(d->spacing > 0) || d->radius < 0) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->particle_mass < 0) return PBD_ERROR_NEGATIVE_MASS;
    if (!(d->particle_mass > 0)) return PBD_ERROR_INVALID_ARGUMENT;
    const pbd_sm_body_desc *bd = &d->body;
    pbd_result res = pbd_sm__check_params(bd->mode, bd->beta, bd->stiffness, bd->yield, bd->creep, bd->max_plastic,
                                          bd->rotation_iterations);
    if (res != PBD_OK) return res;
    pbd_sm_sum_plan *plan = NULL, *user_plan = bd->plan;
    res = pbd_sm_plan_lattice(n, d->cells, d->half_width, &plan); /* also validates the cells */
    if (res == PBD_OK && user_plan) {
        pbd_sm_plan_destroy(plan);
        plan = NULL;
        res = pbd_sm__check_plan(user_plan, n);
    }
    if (res != PBD_OK) {
        pbd_sm_plan_destroy(plan);
        return res;
    }
    float *pos = (float *)pbd_sm__alloc_n((size_t)n * 3, sizeof(float));
    float *mass = (float *)pbd_sm__alloc_n((size_t)n, sizeof(float));
    if (!pos || !mass) res = PBD_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < n && res == PBD_OK; ++i) {
        for (int a = 0; a < 3; ++a) pos[3 * i + a] = d->origin[a] + d->spacing * (float)d->cells[3 * i + a];
        mass[i] = d->particle_mass;
    }
    pbd_sm_body *b = NULL;
    if (res == PBD_OK)
        res = pbd_sm__body_build(n, user_plan ? user_plan : plan, user_plan ? bd->owns_plan != 0 : 1, pos, mass, bd, &b);
    pbd_range r = {0, 0};
    if (res == PBD_OK) {
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = pos;
        pd.count = n;
        pd.mass = d->particle_mass;
        pd.radius = d->radius > 0 ? d->radius : 0.5f * d->spacing;
        res = pbd_add_particles(w, &pd, &r);
        if (res != PBD_OK) {
            if (user_plan) b->owns_plan = 0; /* the caller keeps it on failure */
            pbd_sm__body_free(b);
            b = NULL;
        }
    }
    PBD_SM_FREE(pos);
    PBD_SM_FREE(mass);
    if (res != PBD_OK) {
        if (!b) pbd_sm_plan_destroy(plan); /* ours; NULL when the user's */
        return res;
    }
    for (int i = 0; i < n; ++i) b->idx[i] = r.first + i;
    res = pbd_sm__body_attach(w, b, bd->mark_coupled != 0);
    if (res != PBD_OK) {
        if (user_plan) b->owns_plan = 0;
        pbd_sm__body_free(b);
        return res;
    }
    if (out) *out = b;
    if (range) *range = r;
    return PBD_OK;
}

/* --- omega rings ---------------------------------------------------------------- */

/* Vertex adjacency (CSR, sorted, without duplicates) of a mesh's elements. */
static pbd_result pbd_sm__rings_adjacency(int nv, const int *el, int ne, int arity, int **start_out, int **adj_out) {
    long pairs = (long)ne * arity * (arity - 1);
    if (pairs > INT_MAX) return PBD_ERROR_OVERFLOW;
    int *start = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int));
    int *adj = (int *)pbd_sm__alloc_n((size_t)pairs, sizeof(int));
    int *fill = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    if (!start || !adj || !fill) {
        PBD_SM_FREE(start); PBD_SM_FREE(adj); PBD_SM_FREE(fill);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    memset(start, 0, sizeof(int) * ((size_t)nv + 1));
    for (int e = 0; e < ne; ++e)
        for (int a = 0; a < arity; ++a) start[el[arity * e + a] + 1] += arity - 1;
    for (int i = 0; i < nv; ++i) start[i + 1] += start[i];
    memcpy(fill, start, sizeof(int) * (size_t)nv);
    for (int e = 0; e < ne; ++e)
        for (int a = 0; a < arity; ++a)
            for (int c = 0; c < arity; ++c)
                if (c != a) adj[fill[el[arity * e + a]]++] = el[arity * e + c];
    /* sort and compact each list */
    int out = 0;
    for (int i = 0; i < nv; ++i) {
        int b = start[i], e = start[i + 1];
        qsort(adj + b, (size_t)(e - b), sizeof(int), pbd_sm__cmp_int);
        start[i] = out;
        for (int k = b; k < e; ++k)
            if (adj[k] != i && (k == b || adj[k] != adj[k - 1])) adj[out++] = adj[k];
    }
    start[nv] = out;
    PBD_SM_FREE(fill);
    *start_out = start;
    *adj_out = adj;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_mesh_rings(int nv, const int *el, int ne, int arity, int omega, int *region_start,
                                        int *region_particles, int max, int *total) {
    if (!region_start || !total || (ne > 0 && !el)) return PBD_ERROR_NULL_POINTER;
    if (nv < 1 || ne < 0 || arity < 2 || arity > 4 || omega < 1 || omega > 64 || max < 0)
        return PBD_ERROR_INVALID_ARGUMENT;
    for (long k = 0; k < (long)ne * arity; ++k)
        if (el[k] < 0 || el[k] >= nv) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    int *start = NULL, *adj = NULL;
    pbd_result res = pbd_sm__rings_adjacency(nv, el, ne, arity, &start, &adj);
    if (res != PBD_OK) return res;
    int *dist = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    int *queue = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    int *stamp = (int *)pbd_sm__alloc_n((size_t)nv, sizeof(int));
    if (!dist || !queue || !stamp) res = PBD_ERROR_OUT_OF_MEMORY;
    long count = 0;
    int fill = region_particles && max >= 0;
    if (res == PBD_OK)
        for (int i = 0; i < nv; ++i) stamp[i] = -1;
    for (int v = 0; v < nv && res == PBD_OK; ++v) {
        /* breadth-first search to depth omega */
        int head = 0, tail = 0;
        queue[tail++] = v;
        stamp[v] = v;
        dist[v] = 0;
        while (head < tail) {
            int u = queue[head++];
            if (dist[u] == omega) continue;
            for (int e = start[u]; e < start[u + 1]; ++e) {
                int x = adj[e];
                if (stamp[x] == v) continue;
                stamp[x] = v;
                dist[x] = dist[u] + 1;
                queue[tail++] = x;
            }
        }
        region_start[v] = (int)count;
        if (fill && count + tail <= max) {
            qsort(queue, (size_t)tail, sizeof(int), pbd_sm__cmp_int);
            memcpy(region_particles + count, queue, sizeof(int) * (size_t)tail);
        }
        count += tail;
        if (count > INT_MAX) res = PBD_ERROR_OVERFLOW;
    }
    if (res == PBD_OK) {
        region_start[nv] = (int)count;
        *total = (int)count;
    }
    PBD_SM_FREE(start); PBD_SM_FREE(adj); PBD_SM_FREE(dist); PBD_SM_FREE(queue); PBD_SM_FREE(stamp);
    return res;
}

PBD_SM_DEF pbd_result pbd_sm_plan_rings(int nv, const int *el, int ne, int arity, int omega, pbd_sm_sum_plan **out) {
    if (!out) return PBD_ERROR_NULL_POINTER;
    if (nv < 1) return PBD_ERROR_INVALID_ARGUMENT;
    int *start = (int *)pbd_sm__alloc_n((size_t)nv + 1, sizeof(int)), total = 0;
    if (!start) return PBD_ERROR_OUT_OF_MEMORY;
    pbd_result res = pbd_sm_mesh_rings(nv, el, ne, arity, omega, start, NULL, 0, &total);
    int *list = res == PBD_OK ? (int *)pbd_sm__alloc_n((size_t)total, sizeof(int)) : NULL;
    if (res == PBD_OK && !list) res = PBD_ERROR_OUT_OF_MEMORY;
    if (res == PBD_OK) res = pbd_sm_mesh_rings(nv, el, ne, arity, omega, start, list, total, &total);
    if (res == PBD_OK) res = pbd_sm__plan_from_lists(nv, nv, start, list, out);
    PBD_SM_FREE(start);
    PBD_SM_FREE(list);
    return res;
}

/* --- queries and parameters ------------------------------------------------------ */

PBD_SM_DEF int pbd_sm_body_particle_count(const pbd_sm_body *b) { return b ? b->n : 0; }
PBD_SM_DEF int pbd_sm_body_region_count(const pbd_sm_body *b) { return b ? b->nr : 0; }
PBD_SM_DEF pbd_sm_sum_plan *pbd_sm_body_plan(const pbd_sm_body *b) { return b ? b->plan : NULL; }

PBD_SM_DEF pbd_result pbd_sm_body_goals(pbd_sm_body *b, float *goals) {
    if (!b || !goals) return PBD_ERROR_NULL_POINTER;
    const float *x = pbd_world_positions(b->world);
    double o[3];
    memcpy(b->rot_tmp, b->rot, sizeof(double) * 4 * (size_t)b->nr);
    b->converge = 1;
    pbd_sm__origin(b, x, o);
    pbd_sm__stage_values(b, x, o, 0, b->n);
    pbd_sm__stage_sums(b);
    pbd_sm__stage_goals(b, b->rot_tmp, 0, b->nr);
    if (b->symmetric) pbd_sm__stage_gather_plan(b);
    else pbd_sm__stage_gather_lists(b, 0, b->n);
    b->converge = 0;
    for (int i = 0; i < b->n; ++i) {
        double g[3];
        if (b->inv_nreg[i] == 0) { /* in no region: its own position */
            for (int a = 0; a < 3; ++a) goals[3 * i + a] = x[4 * (size_t)b->idx[i] + a];
            continue;
        }
        pbd_sm__particle_goal(b, i, o, g);
        for (int a = 0; a < 3; ++a) goals[3 * i + a] = (float)g[a];
    }
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_rotation(const pbd_sm_body *b, int r, float *q) {
    if (!b || !q) return PBD_ERROR_NULL_POINTER;
    if (r < 0 || r >= b->nr) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    for (int k = 0; k < 4; ++k) q[k] = (float)b->rot[4 * (size_t)r + k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_plastic_state(const pbd_sm_body *b, int r, float *Sp) {
    if (!b || !Sp) return PBD_ERROR_NULL_POINTER;
    if (r < 0 || r >= b->nr) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    for (int k = 0; k < 9; ++k) Sp[k] = (float)b->Sp[9 * (size_t)r + k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_stiffness(pbd_sm_body *b, float stiffness) {
    if (!b) return PBD_ERROR_NULL_POINTER;
    pbd_result r = pbd_sm__check_params(b->mode, (float)b->beta, stiffness, (float)b->yield, (float)b->creep,
                                        (float)b->maxp, b->rot_iters);
    if (r != PBD_OK) return r;
    b->alpha = stiffness;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_mode(pbd_sm_body *b, pbd_sm_mode mode, float beta) {
    if (!b) return PBD_ERROR_NULL_POINTER;
    pbd_result r = pbd_sm__check_params(mode, beta, (float)b->alpha, (float)b->yield, (float)b->creep, (float)b->maxp,
                                        b->rot_iters);
    if (r != PBD_OK) return r;
    if ((mode == PBD_SM_QUADRATIC) != (b->mode == PBD_SM_QUADRATIC)) return PBD_ERROR_INVALID_ARGUMENT;
    b->mode = mode;
    b->beta = beta;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_plasticity(pbd_sm_body *b, float yield, float creep, float max_plastic) {
    if (!b) return PBD_ERROR_NULL_POINTER;
    pbd_result r = pbd_sm__check_params(b->mode, (float)b->beta, (float)b->alpha, yield, creep, max_plastic,
                                        b->rot_iters);
    if (r != PBD_OK) return r;
    b->yield = yield;
    b->creep = creep;
    b->maxp = max_plastic;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_parallel_min(pbd_sm_body *b, long min_work) {
    if (!b) return PBD_ERROR_NULL_POINTER;
    if (min_work < 0) return PBD_ERROR_INVALID_ARGUMENT;
    b->parallel_min = min_work;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_reset_plasticity(pbd_sm_body *b) {
    if (!b) return PBD_ERROR_NULL_POINTER;
    for (int r = 0; r < b->nr; ++r)
        for (int e = 0; e < 9; ++e) b->Sp[9 * (size_t)r + e] = (e % 4 == 0) ? 1.0 : 0.0;
    return PBD_OK;
}

// ==== oriented ==============================================================

// ==== surface volume ========================================================

#endif /* PBD_SM_IMPLEMENTATION_INCLUDED */
#endif /* PBD_SM_IMPLEMENTATION */
