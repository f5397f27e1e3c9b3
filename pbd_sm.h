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
   pbd.h. When pbd_world_step rolls back a step that made NaN or infinity
   (pbd.h CONVENTIONS), shape-matching bodies put back their rotations and
   plastic states, oriented particles their orientations and angular
   velocities, and multi-resolution cloths their coarse levels' positions
   and kept projections, as they were before the step (copies taken at
   its start).

   HANDLES AND NAMES follow pbd.h's CONVENTIONS. What a world owns here -
   shape-matching bodies, oriented particle sets, surface volumes and
   multi-resolution cloths - is named by a typed handle (pbd_sm_body,
   pbd_sm_oriented, pbd_sm_volume, pbd_sm_cloth: a struct of one uint32_t
   id, the id of the pbd_plugin each registers), handed out by its
   pbd_sm_add_<thing> and taken by pbd_sm_remove_<thing>; every other call
   takes (world, handle, ...) and is named pbd_sm_<noun>_<verb>. Id 0, the
   handle of a removed thing (stale) and a handle of another kind fail
   with PBD_ERROR_INVALID_HANDLE, whose message names the kind. What no
   world owns keeps a pointer: summation plans (pbd_sm_plan_*) and skins
   (pbd_sm_skin_create / _destroy). While a thing lives, pbd.h refuses to
   remove the particles it uses (pbd_remove_particles, pbd_remove_object,
   pbd_remove_fluid: pbd_plugin_desc.uses_particles); its removal leaves
   them in the world.

   SNAPSHOTS. pbd_world_save holds this header's state too (pbd.h,
   PLUGIN STATE IN SNAPSHOTS): a body's region rotations (warm starts),
   plastic states S_p and what its setters changed (stiffness, mode and
   beta, plasticity); an oriented set's orientations (and predicted ones)
   and angular velocities; a surface volume's rest volume, alpha and last
   weights; a cloth's stiffness, wrinkle conservation, damping, bending
   and scheme, every level's last valid triangle projections and the
   coarse levels' positions (not pbd_sm_body_set_parallel_min or
   pbd_sm_cloth_set_simd, which change no bit). pbd_world_restore gives
   it back, into the same world or into one rebuilt the same way (a saved
   game: the same things added in the same order, then the restore), and
   the world goes on bit for bit as the saved one would have, on the CPU
   or a GPU (a GPU world's state is fetched for a save and sent back on a
   restore). A restore fails with PBD_ERROR_BAD_SNAPSHOT, changing
   nothing, when the target's things differ from the snapshot's (one
   missing, one more, another order, one built otherwise: other particle
   or region counts, levels, triangles; a body or surface volume on other
   particles or from another rest shape: "the world was built in another
   order"; an oriented set or cloth of the same counts on the same first
   particle passes) or a state is corrupt (NaN, a
   plastic state with det <= 1e-6, a zero quaternion, a parameter out of
   range); the message names the plugin and what was wrong. A snapshot of
   version 7 (pbd.h's, before plugin states) restores the particles and
   leaves every thing here with the state it has.

   ERRORS follow pbd.h's CONVENTIONS: every call that fails returns its
   pbd_result with a message naming what was wrong and the offending value
   or index. On a GPU world (pbd_cuda.cu; define PBD_CUDA where
   PBD_SM_IMPLEMENTATION is, too) everything here runs on the GPU with
   the CPU's bits: shape-matching bodies and lattices (every mode and
   summation plan, plasticity, rigid bodies), oriented particles (with
   their collisions; pbd_sm_skin_apply reads their state back, and
   pbd_sm_skin_apply_world evaluates a skin on the device into a device
   array for a renderer), surface volumes and the multi-resolution cloth
   (both schemes). The sin, cos, atan2 and cube
   roots of double are this header's own, which a GPU computes alike (see
   "==== rotation"). Without PBD_CUDA there, a GPU world refuses every
   pbd_sm_add_<thing> with PBD_ERROR_UNSUPPORTED. A call on a world writes the message to
   pbd_world_last_error() and calls the world's log callback; a call with no world (summation
   plans, pbd_sm_lattice_box, pbd_sm_voxelize, pbd_sm_mesh_rings,
   pbd_sm_plan_rings, a NULL world) leaves it in
   pbd_last_error() (per thread). A failing call changes nothing.
   MEMORY: what a world owns - bodies (with the plans they make: a
   lattice's, the naive plan of region lists or of one cluster), oriented
   sets, surface volumes, cloths, all their arrays and the scratch of the
   calls that add them - is allocated through the world (pbd_world_alloc /
   pbd_world_free), so it honours pbd_world_desc.allocator and goes with
   pbd_world_destroy or the thing's removal. What has no world - summation
   plans you make (also when a body takes one over with owns_plan), skins,
   pbd_sm_voxelize, pbd_sm_mesh_rings, pbd_sm_plan_rings - uses the config
   macros PBD_SM_MALLOC(sz) / PBD_SM_FREE(p) (default malloc/free; define
   both or neither). Nothing allocates inside pbd_world_step.
   SIMD: pbd.h decides it for every header (PBD_NO_SIMD, PBD_SIMD_WIDTH;
   PBD_SIMD_LANES in pbd.h's "==== config"), and pbd_simd_path() and
   pbd_simd_width() report it. The cloth's triangle kernel runs
   pbd_simd_width() lanes; the rotation extraction and the summation's row
   kernels run 4 doubles in a 256-bit vector where pbd.h chose AVX2 or
   wider (pbd_simd_width() >= 8), else their scalar twins (the same bits).

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
       ==== multires cloth  multi-resolution shape-matching cloth (Bender,
                            Weber and Diziol 2013)

   SHAPE MATCHING IN SHORT (section "shape matching" has the details)
   ----------------------
       // a jelly: one particle per lattice cell, regions of half-width 2,
       // linear deformations (beta 0.3), plastic above 5% strain; its
       // regions keep their volume (ld.body.volume, default 1)
       int cells[3 * 8 * 8 * 8];
       pbd_sm_lattice_box(8, 8, 8, cells);
       pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
       ld.cells = cells; ld.cell_count = 8 * 8 * 8;
       ld.spacing = 0.05f; ld.origin[1] = 0.5f; ld.half_width = 2;
       ld.body.mode = PBD_SM_LINEAR; ld.body.beta = 0.3f;
       ld.body.yield = 0.05f; ld.body.creep = 5.0f;   // creep 0: elastic
       pbd_sm_body jelly; pbd_range particles;
       pbd_sm_add_lattice(world, &ld, &jelly, &particles);
       // ... pbd_world_step(world, dt) as usual: the body is a plugin
       pbd_sm_body_set_stiffness(world, jelly, 0.5f);  // (world, handle, ...)

       // or any particles of the world as one rigid cluster (survey 4.1)
       pbd_sm_body_desc d = pbd_sm_body_desc_default();
       d.particles = indices; d.particle_count = n;    // rest shape: now
       pbd_sm_add_body(world, &d, NULL);
   Regions can also be the omega-rings of a mesh (pbd_sm_plan_rings), your
   own index lists (desc.region_start/region_particles) or any summation
   plan (desc.plan).

   RIGID BODIES (the defaults: RIGID mode, stiffness 1, one cluster, or
   regions that all hold every particle; a lattice with the defaults,
   half_width 0, is one cluster of all its cells) stay rigid under
   contact: they
   are matched again after the world's contacts in every iteration, so a
   body leaves every substep in its rest shape (to float rounding: 1e-6 of
   its size in the tests, which bound it by 0.5% for 1 m drops on a plane,
   a box edge and another body). Colliders act on it as on a rigid body:
   a particle a collider holds is immovable in that match, so the body
   rests without creeping, static friction holds it on a slope, and
   friction and restitution change its velocity as a whole (the bounce of
   restitution e reaches e^2 of the drop height). Particle contacts
   between bodies exchange linear momentum exactly, angular momentum only
   roughly (two rigid lattices in zero gravity, one hitting the other at
   2 m/s off centre: the pair's angular momentum about its centre of mass
   changes by +16% to -11% without friction and by -83% to +14% with the
   default particle friction, offsets 3 to 9 cm; an audit): the spheres'
   friction acts at their centres, and the matches and the velocity update
   are not torque-free. Linear and quadratic bodies,
   and rigid regions that do not span the body (a lattice with half_width
   >= 1 that does not cover it: regions of half-width 1 on a 5 x 4 x 3
   block let pair distances change by 2% in a flat 1 m drop and by 32%
   landing on a corner, an audit's drops), stay deformable: the
   contacts come after their match and deform them by their stiffness
   (section "shape matching", "Contacts"). Linear and quadratic bodies
   keep their regions' volume (section "shape matching", "Volume"): the
   README's elastic jelly pressed to 70% of its height by a box keeps
   97.3% of its volume and bulges sideways by 27% (without: 70%, 4%).
   The world owns its bodies. Config macro:
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
       pbd_sm_plan_octree      adaptive cubes, w own cells   O(1) (8 lookups per level)
       pbd_sm_plan_paths       w-rings of a triangle mesh    O(w) path runs

   Every plan lists its regions (pbd_sm_plan_region), so a fast plan can be
   checked against pbd_sm_plan_naive over the same lists; the tests do.
   Sums are bit-identical for any thread count and with SIMD on or off.
   Inside the world step a body's region sums, goals and blend are shared
   by the world's threads (pbd_sm_plan_sum_team), bit-identically.

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
       pbd_sm_oriented o;
       pbd_sm_add_oriented(w, &od, &o);      // owned by the world (a plugin)
       pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
       sd.rest_vertices = mesh; sd.vertex_count = nv;
       pbd_sm_skin *skin;                    // yours: pbd_sm_skin_destroy
       pbd_sm_skin_create(w, o, &sd, &skin); // particles as bones
       ... pbd_world_step(w, dt); pbd_sm_skin_apply(skin, w, out_vertices);
       // or, on a GPU world, the vertices in device memory (CUDA interop):
       const float *dv; pbd_sm_skin_apply_world(skin, w, &dv);
       pbd_sm_remove_oriented(w, o);         // or pbd_world_destroy

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
       pbd_sm_volume v;
       pbd_sm_add_surface_volume(w, &vd, &v);   // pbd_sm_remove_surface_volume

   Both run serially inside the world's step (deterministic for any
   thread count), allocate nothing in it, and their state is part of the
   world's snapshot (SNAPSHOTS above).

   MULTI-RESOLUTION CLOTH (Bender, Weber and Diziol 2013)
   ----------------------
       pbd_world_desc wd = pbd_world_desc_default();
       wd.substeps = 1; wd.iterations = 1;         // one V-cycle per step, as in the paper
       wd.reference_dt = 0;                        //   at any dt (else one per 1/60 s)
       pbd_world *w; pbd_world_create(&wd, &w);
       pbd_sm_cloth_desc d = pbd_sm_cloth_desc_default();
       d.positions = verts; d.vertex_count = nv;    // any manifold triangle mesh
       d.triangles = tris;  d.triangle_count = nt;
       d.levels = 5;                                // hierarchy by half-edge collapses
       int corners[2] = {0, 99};
       d.keep_vertices = corners; d.keep_count = 2; // vertices you will pin stay on every level
       pbd_sm_cloth cloth; pbd_range r;
       pbd_sm_add_cloth(w, &d, &cloth, &r);
       pbd_particle_pin(w, r.first + 0); pbd_particle_pin(w, r.first + 99);
       for (...) pbd_world_step(w, 0.005f);     // colliders and friction: the world's
   Its internal forces keep its momentum (test
   sm_cloth_internal_forces_keep_the_momentum: its centre of mass within
   1 mm; float rounding, mostly the edge kernel's, moves a free cloth of
   the defaults 1 m up by up to 5 cm in 10 s at the world's 4 x 4): a
   coarse level's masses are P^T m, the finer masses seen through the
   prolongation P (the paper gives coarse levels no masses; their area
   masses made the prolongation add momentum), the bending force takes one
   stabilising factor for every vertex, and the per-triangle damping
   gives back its net impulse. A coarse level's positions and rest shape
   are the finer level's through the mass-weighted restriction R = M_C^-1
   P^T M_F (the paper's restriction, section 4.3, the transposed
   prolongation with its rows normalised, weighted by the finer masses;
   for nested levels too, where the paper shares the vertices): a coarse
   correction, prolongated by P, then moves the fine vertices along the
   coarse constraints' own gradient in the mass metric. Nested levels
   copied their fine vertices and prolongated by P, a mismatch that fed
   energy in with every V-cycle: the same free 20 x 20 cloth of the
   defaults in zero gravity, started still with +-5 mm of noise, had 494
   mJ of kinetic energy after 1 s at the world's 4 x 4 (vertices at 7-11
   m/s) and blew up between 2 and 5 s at 4 x 1; now 0.14 and 0.34 mJ,
   falling (test sm_cloth_free_cloth_stays_calm). It still does not come
   to rest where a collider holds it: a 20 x 20 cloth of the defaults
   dropped centred on the README's sphere, no floor, stays on it at 60
   Hz (vertices still at 0.8 m/s after 20 s) but, slowly gaining height
   and speed, slides off within 3-10 s at 50, 75, 100 or 144 Hz, under
   frame times drawn from 8-33 or 5-50 ms, or put 1 mm off centre (an
   audit); bending_stiffness 0 lets it rest at 50 Hz but not under
   varying frame times, and nested = 0 keeps it on at every rate tried
   (50 to 144 Hz, random frame times, 1 mm off centre) but moving, its
   vertices at up to 5-6 m/s after 20 s. On a floor too (examples/multires_cloth.c) it
   stays but keeps moving (a 32 x 32 cloth: vertices up to 2.3 m/s at 60
   Hz, 7.7 at 144). pbd.h's cloth stays on that sphere at every rate and
   5 cm off centre, and rests: prefer it where a cloth lies on things
   and must settle. A vertex in
   keep_vertices weighs 1000 times its mass in R, so a pinned corner stays
   at its pin on every level. Its angular momentum is kept only roughly:
   the 2D matching takes its rotation from polar(A_pq A_qq^-1), not the
   torque-free polar(A_pq), and the prolongation is not torque-free; that
   free cloth has 0.0007 kg m^2/s after 10 s at 4 x 4 and 0.0002 at 4 x 1
   (a rigid spin of 2 rad/s about its normal has 0.034). Not settled:
   with wrinkle conservation on and bending_stiffness 0 the free cloth
   still gains energy (84 mJ after 1 s at 4 x 4, 20 at 4 x 1; under 0.06
   without wrinkle conservation), and with the default bending its
   energy creeps up from 0.04 mJ at 10 s to 2.4 mJ at 40 s at 4 x 4;
   draped on the sphere, under 1 mJ, it still has vertices at 0.8 m/s
   after 20 s.
   The cloth's stiffness grows with the levels and as the step shrinks
   (the paper's figure 7 and table 3; bench/multires.c --repro reproduces
   them), so it is stiff at small steps only: a 1 m cloth of 40 x 40
   vertices dropped from the horizontal, hanging from two corners, 5
   levels, all defaults (bench/sm_cloth_window.c: the grid from (-0.5,
   1.5, -0.5), 1 m along x and z; reference_dt = 0, so one V-cycle per
   step whatever its length): the worst edge strain
   over the window 2..4 s (swinging and settling; the mean strain's worst
   in that window in brackets), and at the instant t = 4 s: one V-cycle
   per 5 ms step 30% (2.5%), 8.4% at 4 s; per 1/240 s 16% (1.8%), 5.6%
   at 4 s; per 1/60 s 99% (16%), 84% at 4 s; per 1/30 s 348% (64%),
   283% at 4 s. Over 0..4 s, the fall included: 30%, 18%, 137%, 420%.
   The mean strain at 4 s: 1.1%, 0.9%, 13%, 50%. The worst edge is the
   fragile figure, one edge at a pinned corner, and float rounding moves
   it (before the mass-weighted restriction an audit found 11.5% to 41%
   over 0..4 s at 1/240 s for the same cloth only moved in space). At 60
   Hz take 4 substeps (a V-cycle per 1/240 s, the world's default), not
   one; the world's default reference_dt keeps that substep at longer
   steps. More iterations (V-cycles) per substep stiffen it: 4 substeps
   at 60 Hz give over 2..4 s 15% with 1 iteration, 6.6% with 2 and 3.4%
   with 4, the world's default (the mean strain's worst 1.8%, 0.9%,
   0.45%; with conserve_wrinkles = 0: 11.5%, 5.7%, 2.9%), at 1, 2 and 4
   times the cost (examples/multires_cloth.c takes 1).
   Fewer levels are far softer: at 4 x 1, 1, 2 and 3 levels give a mean
   strain at 4 s of 5.0%, 7.7% and 2.0% and a worst edge over 2..4 s of
   1778%, 210% and 49% (at the pinned corners). bench/sm_cloth_window.c
   prints every row. The triangle kernel has an explicit SIMD path (16, 8 or 4 lanes,
   bit-identical to its scalar reference); build with -fno-math-errno (no
   result changes) so that the compiler can vectorise the edge kernel too.
   Both parallel schemes of the paper's section 5 are there (d.scheme):
   independent sets (the default: the faster one on a CPU) and two-pass
   (the paper's GPU scheme); see pbd_sm_cloth_desc.scheme for the one
   start that neither recovers from by itself (a flat cloth collapsed
   into exactly one point), and why.

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
   vanishes. Close to the answer (where the Hessian of tr(R^T A) is
   positive definite) each iteration takes the Newton step, which
   converges quadratically, instead of the paper's gradient step, which
   removes a fixed fraction of the error: from the previous step's
   rotation one to three iterations reach double precision; from a cold
   start 60 suffice for any rotation, 180 degree turns included. */
PBD_SM_DEF void pbd_sm_extract_rotation(const float *A, float *q, int iterations);
/* The same in double precision. */
PBD_SM_DEF void pbd_sm_extract_rotation_d(const double *A, double *q, int iterations);

// ==== summation =============================================================
/* A summation plan computes, for every region r, the sums over the
   region's particles of k values per particle (survey 4.3): the sums of
   eq. (7) and (8) of region-based shape matching (m~ x, m~ x xbar^T, ...).
   Every method gives the same sums as naive summation up to rounding; the
   fast ones with work per region far below the region size: lattice O(1)
   whatever w; octree O(1) whatever w (8 table lookups per leaf level;
   O(summation nodes), which grows like the region's surface, for sparse
   octrees); paths O(runs of the paths through the region), which grows
   like its width w (survey 4.3.3: O(w n) for a mesh). pbd_sm_plan_cost
   counts that work. Each plan keeps
   its regions as member lists (pbd_sm_plan_region), so any plan can be
   checked against pbd_sm_plan_naive over the same lists.

   Rounding: the lattice and path methods take differences of prefix sums
   along a line or path, so a sum carries an error of about 1e-16 times
   the sum of |values| along that line up to the region: for values of
   similar size about 1e-16 L / (2w + 1) relative on a line of L
   particles, 1e-10 at a million (the survey's limit of 512 per path is
   for float on the GPU). The octree's tables are prefix sums over a
   level's whole box: about 1e-16 N / (2w + 1)^3 relative for N leaves
   (1e-13 at 20 000 with w = 1); sparse octrees' node sums only add.

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
PBD_SM_DEF pbd_result pbd_sm_plan_lattice(int particle_count, const int *cells, int w, pbd_sm_sum_plan **out);
/* The finest octree level pbd_sm_plan_octree accepts. */
#define PBD_SM_OCTREE_MAX_LEVEL 16
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
   in 1..64. The regions' members are found by the interval test of the
   paper (a node whose descendants all lie inside is taken whole, one
   partly inside is refined). The sums use one summed-volume table per
   level that holds leaves (the running sums of its leaves' values over
   that level's lattice, three passes, in double): a region is a box of
   cells at each level, so 8 lookups per level whatever w (O(1) per region
   where the paper's summation nodes grow with the region's boundary; see
   pbd_sm__octree_tables). The tables are dense over each level's bounding
   box, so they are used when together they hold at most 2n + 32768
   entries (solid and mildly adaptive lattices); a sparser octree sums the
   paper's way, a bottom-up pass over the virtual nodes and one gather of
   the summation nodes per region. */
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
                                        const int *triangles, int w, int max_path_length, pbd_sm_sum_plan **out);
PBD_SM_DEF void pbd_sm_plan_destroy(pbd_sm_sum_plan *plan);
PBD_SM_DEF pbd_sm_summation pbd_sm_plan_method(const pbd_sm_sum_plan *plan);
PBD_SM_DEF int pbd_sm_plan_particle_count(const pbd_sm_sum_plan *plan);
PBD_SM_DEF int pbd_sm_plan_region_count(const pbd_sm_sum_plan *plan);
/* The members of region r (the same for every method), in increasing
   particle index: writes at most max indices, *count receives the region
   size. */
PBD_SM_DEF pbd_result pbd_sm_plan_region(const pbd_sm_sum_plan *plan, int r, int *particles, int max, int *count);
/* The work of one pbd_sm_plan_sum per value (k = 1), in row operations
   (additions or subtractions of one value): for naive summation the total
   region size, for the fast methods the prefix sums, window differences
   and node sums. Shows that the fast methods' cost does not grow with w. */
PBD_SM_DEF long long pbd_sm_plan_cost(const pbd_sm_sum_plan *plan);
/* For a paths plan: the number of paths, and the vertices of path p in
   order (at most max written, *count receives its length). */
PBD_SM_DEF int pbd_sm_plan_path_count(const pbd_sm_sum_plan *plan);
PBD_SM_DEF pbd_result pbd_sm_plan_path(const pbd_sm_sum_plan *plan, int p, int *vertices, int max, int *count);
/* Execution choices that never change the result bits: threads (0: the
   OpenMP default; 1: serial; plans with fewer than 512 regions always run
   serially) and SIMD (on by default where the SIMD path is compiled: its
   row kernels run 4 doubles where pbd_simd_width() >= 8, AVX2 or wider). */
PBD_SM_DEF pbd_result pbd_sm_plan_set_threads(pbd_sm_sum_plan *plan, int threads);
PBD_SM_DEF pbd_result pbd_sm_plan_set_simd(pbd_sm_sum_plan *plan, int on);
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

   Volume (LINEAR and QUADRATIC; desc.volume, default 1, 0 off): the
   volume-preserving goal of Mueller et al. 2005 section 4.2 keeps the
   goal's volume, not the body's. Blended with R it pulls a squeezed
   region back towards its rest shape in every direction, and the
   contacts, which come after the match, take the squeezed direction
   away: the README's elastic jelly (8 x 8 x 8 cells of 5 cm, half-width
   2, beta 0.3, stiffness 1) pressed to 70% of its height by a box on the
   ground kept 70% of its volume (QUADRATIC 66%) and bulged by 4%. So
   each region also keeps its volume, a constraint det F_r = 1 on its best
   linear map, projected after the contacts with the particles a collider
   holds immovable (see "--- volume" in the implementation): pressed to
   70% the jelly keeps 97.3% (QUADRATIC too) and bulges by 27%, with
   stiffness 0.5 or 0.2 100%; pressed to 50%, 89.5% (without: 50%;
   85.6% in an audit's variant that took 50% of the height before the
   jelly settled, under a box 2 m wide). Bodies only 3 or 4 cells tall,
   whose regions span their height, hold it less well: pressed to 70%
   with half-width 2, 10 x 4 x 6 cells keep 111%, 8 x 4 x 8 108%, 12 x 3
   x 8 107% (an overshoot: their free middle layers bulge further than
   the volume needs); with half-width 1 86%, 86% and 91%; 6 cells tall
   (10 x 6 x 4) 100.5% and 92%. Costs:
   three Jacobi sweeps per iteration, each about a projection without its
   rotations, so a LINEAR or QUADRATIC body's step takes about three times
   as long (bench/shape_matching.c, a 20 000-particle lattice body: 3.4x
   with SIMD, 2.8x scalar; set volume 0 where speed matters more than
   volume). Limitations: the term moves the particles no collider
   held in that substep, so at 50% the highest reach up to 1.8 cm into
   the box at the end of a step (0 at 70%), pushed out by the next
   substep's contacts; and a body it squeezes against a collider, released
   at once, gives its stored compression back within a step, as any PBD
   constraint of stiffness 1 does: the jelly at 70%, its box lifted by
   0.27 m in one step, is thrown at up to 7.0 m/s (6.8 m/s without the
   term; stiffness 0.5: 6.1, 0.2: 4.3), while lifted over 0.5 s it
   follows the box at its 0.54 m/s (tests/test_sm_press.c); from 50%
   one corner particle pops out at 11.3 m/s in the first frames of a lift
   even over 0.5 s or 2 s (the body then follows at the box's speed).
   Release a pressed body over a few frames, or give it stiffness < 1.

   Rotations: each projection runs at most rotation_iterations steps of
   the rotation extraction, warm-started from the region's rotation of the
   previous projection, so the convergence carries over the iterations and
   substeps (Mueller et al. 2016), and stopping when it has converged;
   close to the answer the steps are Newton steps (quadratic
   convergence), so from the previous projection's rotation one step
   (rarely two) reaches double precision. When the steps run out before
   convergence (a sudden large turn), it iterates on, up to 100.
   pbd_sm_body_goals always converges fully. With SIMD (the plan's
   setting, pbd_sm_plan_set_simd) four regions' warm-started extractions
   run at once in the lanes of one AVX vector, with the same bits as one
   at a time.

   Parallel (survey 4.7): in the world step a large body
   (pbd_sm_body_set_parallel_min) shares every stage among the world's
   threads: the per-particle values, the region sums (the plan's passes),
   the region goals, the blend (a plan sum or a per-particle gather in
   increasing region order) and the moves; bit-identical for any thread
   count.

   Contacts (pbd.h SOLVER step 3): every iteration runs this projection
   (the plugin's `project`) before the world's particle, self- and
   collider contacts, which therefore have the last word (but for the
   volume term, after them, which moves only what no collider holds): a
   deformable body (LINEAR, QUADRATIC, stiffness < 1, or RIGID regions
   that do not all hold every particle) does not penetrate and is
   deformed by the contacts as much as its stiffness lets it
   (tests/test_sm_rigid.c: a 4 x 4 x 4 lattice of stiffness 0.3 on the
   ground sags by the same amount with 2 and 4 iterations; at stiffness 1
   more iterations do stiffen it, the contacts then meeting a body that
   is already at its goal: an 8 x 5 x 4 block sags 1.08 mm with 2 and
   0.50 mm with 4 (an audit; stiffness 0.5: 3.55 and 3.20 mm)). A rigid
   body (RIGID, stiffness 1, every region holding every particle: one
   cluster by default) is matched once more after the contacts
   (`project_after_contacts`), with the weights w_i of survey 4.1 equal
   to the masses except for the particles a collider holds
   (pbd_world_particle_contact_push > 0) or that are pinned or
   kinematic, which weigh 1e6 times their mass (immovable, as the
   collider is): the body then takes the pose their contacts and static
   friction ask for and turns about them as its inertia decides. A
   collider only pushes: a held particle that the match would pull into
   its collider harder than its own weight presses on it lets go and
   weighs its mass again (an active set; which way a collider holds a
   particle: pbd_world_particle_contact_push_vector), so a body tips over
   an edge as its centre of mass decides (a 1 m plank on a box, its centre of mass
   0.1 to 0.3 m past the edge, tips over it: frictionless it falls off,
   and with friction 0.5 it hangs on the edge tilted 55-62 degrees, its
   spheres' friction, which acts at their centres, holding it where a
   flat plank would slide off; 0.1 m
   inside it stays, level to 0.02 degrees; tests/test_sm_rigid.c). For
   the same reason a body whose friction holds it on a slope tips over
   later than a solid box would: it tips where tan(slope) = w / (h - r)
   (w half its support's width, h its centre of mass's height, r its
   spheres' radius), not w / h: rigid lattices of 0.1 m cells with 5 cm
   spheres tip at 18.4 degrees (2 x 4 x 2 cells; a box 14.0), 11.3 (2 x
   6 x 2; 9.5) and 45 (3 x 3 x 2; 33.7; an audit). After
   the contacts' velocity pass of a substep in which a collider held one
   of its particles, its velocities are fitted by a rigid motion in the
   same weights and the same active set, so friction and restitution act
   on the whole body. So a rigid
   body leaves every iteration in its rest shape (to float rounding), and
   rests without creeping. The held particles weigh more than their mass
   because, matched with the masses alone, one particle's contact would
   move the body by that particle's share of its mass: the contacts would
   converge slowly and a box would creep down a slope that its static
   friction holds; and the body is matched after the contacts because,
   matched only before them, it would be distorted by every impact.
   Limitation: particle contacts between two bodies reach each through its
   mass-weighted match, one particle's share of the body per iteration,
   and a body that a collider holds does not yield at all; so a body
   striking, corner first at 4.4 m/s, a body resting on the ground sinks
   into its lattice of particle spheres (the spheres, 5 cm across, overlap
   by 3.55 cm at rest in tests/test_sm_rigid.c's
   sm_rigid_drop_on_body_stays_rigid). Stacks of rigid lattices (bench/sm_stack.c: 3 x 3 x 3
   lattices with the defaults, spacing 0.1 m, particle radius 0.05 m,
   0.1 kg particles, stacked face on face at rest on a plane, particle
   contact on, world defaults at 60 Hz, 10 s; the particles are grains to
   pbd.h, so a step takes the 8 substeps that pbd_world_desc.granular_cfl
   asks for 5 cm spheres) stand, a body sunk into the one below by at
   most 0.7 mm (two bodies), 1.4 mm (three), 2.2 mm (four), 3.3 mm
   (five), measured at 1 s, 2 s and 10 s. With every other body shifted
   5 cm sideways, they stand too, 9.7 mm (two) to 1.2 cm (five) into
   each other, their centres where they were put. It is the substep that
   counts: at the world's 4 substeps (granular_cfl = 0, as before 0.2)
   straight stacks sank 2.8 mm to 1.3 cm, three shifted ones crept from
   1.4 to 2.5 cm and four or five toppled within 10 s; at 30 Hz with a
   fixed 4 substeps (--hz 30 with PBD_BENCH_FIXED=1, reference_dt = 0,
   granular_cfl = 0) straight stacks sank 1.1, 2.3 and 3.4 cm (two to
   four bodies) and five collapsed within 0.4 s. Masses count too, as
   for grains (pbd.h, PARTICLES): two such lattices, the upper 10 times
   the lower's mass, rest 3.9 mm into each other; 100 times, 3-4 cm,
   rocking at up to 0.13 m/s (an audit): keep bodies that rest on each
   other within a factor of about 10. A rigid-body
   contact with effective masses on both sides would need the contact
   solver of pbd.h to know the bodies.

   Momentum: the corrections of a region sum to zero momentum and torque
   (mass-weighted centre, optimal rotation), so a body conserves linear and
   angular momentum, up to float rounding of the corrections (a strongly
   deforming LINEAR or QUADRATIC body drifts by 1-6% of its momentum a
   second at the origin and far more 100 m from it, an audit; a rigid one
   by little), and up to the first-order velocity update v = (p - x) / h
   of pbd.h, which takes about (omega h)^2 of a spinning body's angular
   velocity per substep (4% in 1 s at 3 rad/s and 240 substeps/s; pbd.h
   restores it only for its own isolated objects, SOLVER step 5): a
   rigid box spinning freely at 3 rad/s keeps 76% of its angular momentum
   after 10 s (57% of its kinetic energy), one spinning at (1, 2, 3)
   rad/s is 31% off after 10 s (an audit); more substeps keep more. Without a held particle the rigid match after
   the contacts is the mass-weighted one, so particle contacts between
   bodies keep linear momentum too (angular momentum roughly, see RIGID
   BODIES). When its regions join particles of several objects,
   leave mark_coupled = 1 (default): the body calls
   pbd_world_mark_coupled on its particles, as pbd_add_constraints does. */

/* A body is named by a handle (pbd.h CONVENTIONS, Handles) whose id is
   that of the plugin it registers: (pbd_plugin){body.id}. */
typedef struct pbd_sm_body {
    uint32_t id;
} pbd_sm_body;

typedef enum pbd_sm_mode { PBD_SM_RIGID = 0, PBD_SM_LINEAR = 1, PBD_SM_QUADRATIC = 2 } pbd_sm_mode;

typedef struct pbd_sm_body_desc {
    const int *particles; /* particle_count world particle indices, distinct; local
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
    const float *masses; /* optional particle_count, 0 or in [PBD_MIN_MASS, PBD_MAX_MASS]; default: the world masses
                                    (a pinned particle keeps its mass, pbd_particle_pin). Taken when
                                    the body is added; particles with inverse mass 0 at a
                                    step (pinned, kinematic) are matched but not moved */
    pbd_sm_mode mode;    /* default PBD_SM_RIGID */
    float beta;          /* LINEAR / QUADRATIC blend in [0, 1]; default 0.5 */
    float stiffness;     /* alpha in [0, 1] per substep; default 1 */
    float volume;        /* LINEAR / QUADRATIC: regions keep their volume, stiffness in [0, 1]
                            per substep ("volume" in section "shape matching"); default 1, 0 off;
                            chosen when the body is added (no setter: not in its snapshot state) */
    int stiffness_correction; /* 1 (default): alpha' = 1-(1-alpha)^(1/iterations) */
    float yield;              /* plasticity: ||S - I||_F threshold, >= 0; default 0.05 */
    float creep;              /* 1/s, >= 0; 0 (default) = no plasticity */
    float max_plastic;        /* bound on ||S_p - I||_F, > 0; default 1 */
    int mark_coupled;         /* default 1, see above */
    int rotation_iterations;  /* per projection, 1..100; default 8 (see below) */
} pbd_sm_body_desc;

PBD_SM_DEF pbd_sm_body_desc pbd_sm_body_desc_default(void);
/* Adds a shape-matching body to the world (a plugin; the world owns the
   body and frees it in pbd_world_destroy or pbd_sm_remove_body; out, its
   handle, may be NULL). While it lives, pbd.h refuses to remove its
   particles (pbd_remove_particles, pbd_remove_object, ...). Errors, with
   nothing changed: NULL pointers; particle_count < 1,
   a duplicate particle, beta/stiffness outside [0, 1], negative
   yield/creep, max_plastic <= 0, both a plan and lists, a plan whose
   particle count differs, an empty region, lists that leave a particle
   in no region, a rest coordinate beyond PBD_MAX_COORDINATE
   (PBD_ERROR_INVALID_ARGUMENT); region_count or
   region_particles without region_start (PBD_ERROR_NULL_POINTER); a
   particle index outside the world (PBD_ERROR_INDEX_OUT_OF_RANGE); NaN or
   Inf (PBD_ERROR_NOT_FINITE); a negative mass (PBD_ERROR_NEGATIVE_MASS); a
   region whose total mass is zero (PBD_ERROR_INVALID_ARGUMENT) or whose
   rest positions all coincide (PBD_ERROR_DEGENERATE). */
PBD_SM_DEF pbd_result pbd_sm_add_body(pbd_world *w, const pbd_sm_body_desc *desc, pbd_sm_body *out);
/* Removes the body (of pbd_sm_add_body or pbd_sm_add_lattice) and frees
   it; the particles stay (a lattice's: remove them with
   pbd_remove_particles). Every call on a body checks its handle: 0, a
   removed body's handle (stale) and a handle of another kind fail with
   PBD_ERROR_INVALID_HANDLE. */
PBD_SM_DEF pbd_result pbd_sm_remove_body(pbd_world *w, pbd_sm_body body);

/* A lattice body (Rivers and James 2007): one particle per cell at
   origin + spacing * cell, regions of half-width w (pbd_sm_plan_lattice,
   owned by the body). The default, half_width 0, makes a rigid body in
   RIGID mode (the default mode): one cluster of every cell (survey 4.1),
   matched again after the contacts (RIGID BODIES above); in LINEAR and
   QUADRATIC mode 0 means regions of half-width 1. A body added with one
   cluster keeps it when pbd_sm_body_set_mode turns it LINEAR (one linear
   cluster). A half_width w >= 1 gives every cell the region of the cells
   within w of it, also in RIGID mode: such a body is rigid only where w
   spans the whole lattice, and otherwise bends (survey 4.2, Figure 16:
   larger regions are stiffer). body.plan, when set, replaces that plan (any plan
   over the cells, cell i = local particle i: e.g. naive lists of the same
   regions, to compare summation methods; owned as in pbd_sm_body_desc).
   The body desc's particles, lists, rest positions and masses are
   ignored; its other parameters are used. */
typedef struct pbd_sm_lattice_desc {
    const int *cells; /* cell_count*3 integer cells, distinct; one cell alone is refused
                         (PBD_ERROR_DEGENERATE: its region's rest positions coincide) */
    int cell_count;
    float origin[3];
    float spacing;       /* > 0; default 0.1 */
    float particle_mass; /* in [PBD_MIN_MASS, PBD_MAX_MASS]; default 1 */
    float radius;        /* particle radius; 0 (default): spacing / 2 */
    int half_width;      /* region half-width w >= 0; 0 (default): the whole
                            body as one cluster in RIGID mode (a rigid body),
                            1 in LINEAR and QUADRATIC mode */
    pbd_sm_body_desc body;
} pbd_sm_lattice_desc;

PBD_SM_DEF pbd_sm_lattice_desc pbd_sm_lattice_desc_default(void);
/* Adds the particles and the body (out, its handle, may be NULL);
   *particles (optional) receives their range: local particle i (cell i)
   is world particle particles->first + i. */
PBD_SM_DEF pbd_result pbd_sm_add_lattice(pbd_world *w, const pbd_sm_lattice_desc *desc, pbd_sm_body *out,
                                         pbd_range *particles);
/* The cells of a solid box nx x ny x nz (x fastest): writes 3*nx*ny*nz ints. */
PBD_SM_DEF pbd_result pbd_sm_lattice_box(int nx, int ny, int nz, int *cells);
/* Voxelises a closed, consistently oriented triangle mesh: the cells
   (i, j, k) >= 0 whose centres origin + spacing * (i, j, k) lie inside it
   (parity of the crossings of a ray along +x, slightly offset so that it
   misses edges and vertices). origin (out, 3 floats) is the mesh's lower
   bounding-box corner + spacing / 2, so pass it on as the lattice origin.
   *count receives the number of cells; cells (3 ints each, x fastest) is
   filled when it is not NULL and max_cells >= *count. Costs O(rows x
   triangles). At most 2^20 cells per axis and INT_MAX in the bounding
   box (PBD_ERROR_OVERFLOW). A mesh that is not closed and consistently
   oriented is PBD_ERROR_NOT_CLOSED, naming an edge (an open mesh's rays
   do not pair up into insides). No cell at all is PBD_ERROR_DEGENERATE
   (a lattice needs one): the mesh is thinner than the spacing. */
PBD_SM_DEF pbd_result pbd_sm_voxelize(const float *positions, int vertex_count, const int *triangles,
                                      int triangle_count, float spacing, float *origin, int *cells, int max_cells,
                                      int *count);

/* omega-ring regions of a mesh (survey 4.2, Diziol et al. 2011): region i
   holds the vertices within omega edges of vertex i (itself included), in
   increasing order; the edges are those of the elements (arity 2: edges,
   3: triangles, 4: tetrahedra). region_start gets vertex_count + 1
   entries and *total the number of members; region_particles is filled
   when it is not NULL and max >= *total (call once with NULL to size it).
   omega in 1..64. An element listed twice counts once: its edges are the
   same. */
PBD_SM_DEF pbd_result pbd_sm_mesh_rings(int vertex_count, const int *elements, int element_count, int arity, int omega,
                                        int *region_start, int *region_particles, int max, int *total);
/* The same regions as a (naive) summation plan. */
PBD_SM_DEF pbd_result pbd_sm_plan_rings(int vertex_count, const int *elements, int element_count, int arity, int omega,
                                        pbd_sm_sum_plan **out);

/* The number of the body's particles and of its regions. */
PBD_SM_DEF pbd_result pbd_sm_body_particle_count(const pbd_world *w, pbd_sm_body b, int *count);
PBD_SM_DEF pbd_result pbd_sm_body_region_count(const pbd_world *w, pbd_sm_body b, int *count);
/* The plan the body sums with (owned as described in pbd_sm_body_desc). */
PBD_SM_DEF pbd_result pbd_sm_body_plan(const pbd_world *w, pbd_sm_body b, pbd_sm_sum_plan **plan);
/* Goals of the body's particles (3 floats per local particle) for the
   world's current positions, computed as in a projection (the rotations
   warm-start from the stored ones, which stay unchanged; the body's
   scratch is used, hence the non-const world). */
PBD_SM_DEF pbd_result pbd_sm_body_goals(pbd_world *w, pbd_sm_body b, float *goals);
/* A region's last rotation (quaternion x y z w) and plastic state S_p
   (row-major 3x3). */
PBD_SM_DEF pbd_result pbd_sm_body_rotation(const pbd_world *w, pbd_sm_body b, int region, float *q);
PBD_SM_DEF pbd_result pbd_sm_body_plastic_state(const pbd_world *w, pbd_sm_body b, int region, float *Sp);
/* Parameters that may change between steps (same ranges as the desc). */
PBD_SM_DEF pbd_result pbd_sm_body_set_stiffness(pbd_world *w, pbd_sm_body b, float stiffness);
/* RIGID and LINEAR can be swapped; QUADRATIC (its rest data) is chosen when
   the body is added. */
PBD_SM_DEF pbd_result pbd_sm_body_set_mode(pbd_world *w, pbd_sm_body b, pbd_sm_mode mode, float beta);
PBD_SM_DEF pbd_result pbd_sm_body_set_plasticity(pbd_world *w, pbd_sm_body b, float yield, float creep,
                                                 float max_plastic);
/* Back to the rest shape: every S_p = I. */
PBD_SM_DEF pbd_result pbd_sm_body_reset_plasticity(pbd_world *w, pbd_sm_body b);
/* The body shares its loops among the world's threads when its work (the
   number of region memberships plus particles) is at least min_work
   (default PBD_SM_PARALLEL_MIN, 32768); below, one thread runs it (a
   barrier per stage would cost more). 0: always share. Results are the
   same bits either way. */
PBD_SM_DEF pbd_result pbd_sm_body_set_parallel_min(pbd_world *w, pbd_sm_body b, long min_work);

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
   depend on the thread count. Pinned and massless particles neither
   move nor turn (set their orientation by hand: a clamped root). A
   kinematic particle moves where it is led but turns with its group, as
   a point held by a hand does.
   The state belongs to the world: it is freed by pbd_world_destroy or by
   pbd_sm_remove_oriented. It is part of the world's snapshot (SNAPSHOTS
   in the manual). A set is named by a handle whose id is that of its
   plugin. */
typedef struct pbd_sm_oriented {
    uint32_t id;
} pbd_sm_oriented;

typedef struct pbd_sm_oriented_desc {
    pbd_range particles; /* world particles that get orientations, count >= 1 */
    const int *edges;    /* edge_count*2 indices local to `particles` (0..count-1):
                                      the mesh whose 1-rings are the groups; may be NULL
                                      when edge_count is 0 (single-particle groups) */
    int edge_count;
    const float *radii;        /* optional count*3 ellipsoid radii (> 0, <= PBD_MAX_RADIUS)
                                      along the body axes */
    float radius;              /* sphere radius when radii is NULL, in (0, PBD_MAX_RADIUS];
                                      default 0.05 */
    const float *orientations; /* optional count*4 rest orientations (unit quaternions);
                                      default identity */
    float stiffness;           /* shape-matching alpha in [0, 1] per iteration; default 1 */
    int collide;               /* ellipsoids against the world's colliders; default 1 */
    int rotation_iterations;   /* warm-started rotation extraction, 1..100; default 8 */
} pbd_sm_oriented_desc;

PBD_SM_DEF pbd_sm_oriented_desc pbd_sm_oriented_desc_default(void);
/* Adds the set and its plugin; on error nothing changes. Errors: NULL
   pointers; INVALID_ARGUMENT for an empty range, a stiffness outside
   [0, 1], iterations outside 1..100, a radius above PBD_MAX_RADIUS
   (pbd.h's bound on particles), an edge listed twice (the same two
   particles either way round; the message names both edges), a
   particle that another set holds (a particle belongs to one set: in
   two it would be matched twice, twice as stiff);
   INDEX_OUT_OF_RANGE for particles or edge ends outside the range;
   DEGENERATE for a self edge, radii <= 0, a zero quaternion, or a zero
   total mass (every particle of mass 0; particles of mass 0 among others
   weigh as the mean one); NOT_FINITE for NaN/Inf. The particles are
   marked coupled (pbd_world_mark_coupled): orientations hold angular
   momentum the world does not see. out (the handle) may be NULL. While
   the set lives, pbd.h refuses to remove its particles. */
PBD_SM_DEF pbd_result pbd_sm_add_oriented(pbd_world *w, const pbd_sm_oriented_desc *desc, pbd_sm_oriented *out);
/* Removes the set and frees it (its particles stay, without orientations).
   Every call on a set checks its handle: 0, a removed set's handle (stale)
   and a handle of another kind fail with PBD_ERROR_INVALID_HANDLE. */
PBD_SM_DEF pbd_result pbd_sm_remove_oriented(pbd_world *w, pbd_sm_oriented set);
/* The world particles of the set (desc.particles). */
PBD_SM_DEF pbd_result pbd_sm_oriented_particles(const pbd_world *w, pbd_sm_oriented set, pbd_range *particles);
/* The state of particle `index` (local, 0..count-1): its orientation q (4
   floats) and angular velocity omega (3 floats, rad/s, world frame);
   either may be NULL. */
PBD_SM_DEF pbd_result pbd_sm_oriented_get_state(const pbd_world *w, pbd_sm_oriented set, int index, float *q,
                                                float *omega);
/* Sets them (either may be NULL to keep it); q is normalised, and must
   have a length above 1e-6 (PBD_ERROR_DEGENERATE: a shorter one has no
   reliable direction in float). */
PBD_SM_DEF pbd_result pbd_sm_oriented_set_state(pbd_world *w, pbd_sm_oriented set, int index, const float *q,
                                                const float *omega);
/* The members (local indices, centre first) of particle index's group. */
PBD_SM_DEF pbd_result pbd_sm_oriented_group(const pbd_world *w, pbd_sm_oriented set, int index, int *members, int max,
                                            int *count);
/* Rotational kinetic energy sum 1/2 omega^T I omega of the ellipsoids
   (I = m/5 diag(b^2+c^2, a^2+c^2, a^2+b^2) in the body frame). */
PBD_SM_DEF pbd_result pbd_sm_oriented_rotational_energy(const pbd_world *w, pbd_sm_oriented set, double *energy);

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
   A skin is yours, not the world's (pbd_sm_skin_create / _destroy,
   allocated with PBD_SM_MALLOC); it names its oriented set by its handle,
   so pbd_sm_skin_apply fails with PBD_ERROR_INVALID_HANDLE once the set
   is removed. */
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
PBD_SM_DEF pbd_result pbd_sm_skin_create(const pbd_world *w, pbd_sm_oriented set, const pbd_sm_skin_desc *desc,
                                         pbd_sm_skin **out);
/* Writes vertex_count*3 floats from the world's current positions and the
   set's orientations; w must be the set's world. */
PBD_SM_DEF pbd_result pbd_sm_skin_apply(const pbd_sm_skin *s, const pbd_world *w, float *out_vertices);
/* The same vertices in the skin's own array (vertex_count*3 floats, valid
   until the next call on the skin or its destruction). On a GPU world
   (pbd_cuda.cu, PBD_CUDA where PBD_SM_IMPLEMENTATION is) a kernel, one
   thread per vertex, evaluates them from the device's particles and
   orientations, and *out is a device pointer, for a renderer's CUDA
   interop with no copy (the skin's bones, weights and offsets go to the
   device once, at its first call); on a CPU world *out is a host array
   (allocated by the first call). The bits are pbd_sm_skin_apply's on the
   same state. Errors: NULL pointers; PBD_ERROR_INVALID_ARGUMENT when w
   is not the skin's world; PBD_ERROR_INVALID_HANDLE once the set is
   removed; PBD_ERROR_OUT_OF_MEMORY (host or device); on a GPU world
   PBD_ERROR_UNSUPPORTED with the reason (a build without PBD_CUDA here, a
   pbd_cuda.cu built against another pbd_sm.h). */
PBD_SM_DEF pbd_result pbd_sm_skin_apply_world(pbd_sm_skin *s, pbd_world *w, const float **out);
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
   weight 0, so the correction never pushes into a collider. The default
   contact_distance is 0 (only a particle inside a collider counts): with
   0.02 (the default before 0.2) a closed cloth of radius 0.2 m with a
   volume, resting on the ground, never came to rest at 60 Hz (particles
   at 6 m/s after 9 s) and gained energy without bound at 30 Hz (25 m/s,
   a fixed 4 substeps);
   the set of weight-0 particles changes as the bottom rocks, and the
   correction of the others then does work. With 0 it rests (under
   0.01 m/s after 7 s) at both rates; other closed cloths may rock and
   roll on longer, with or without the volume (an audit: radius 0.2 m of
   162 vertices at 60 Hz, 0.06 m/s at 7 s and 0.13 m/s at 9 s; 0.25 m of
   162, 0.12 m/s at 60 Hz and 0.1 m/s at 30 Hz (a fixed 4 substeps,
   reference_dt = 0, as the rest of this paragraph) after 7 s): the world's
   cloth damping keeps a rolling motion (the ball's rigid motion), air
   drag (pbd_object_set_drag, pbd.h) is what slows it.
   Pressed to 60% of its height it
   keeps 98.5% (30 Hz) to 99.4% (60 Hz) of its volume (the world's
   contacts push back what the correction pushed into the ground). The
   survey's Figure 20 (a sphere of radius 0.3 m squeezed by a plate)
   loses under 1% with 0.02 and 2.7% with 0 (tests/test_sm_volume.c):
   set 0.02 for a body squeezed between colliders that never rests on
   one. After the
   velocity update the velocities are corrected likewise so that
   dC/dt = sum_i grad_i C . v_i = 0 (a divergence-free velocity field).
   Runs as a world plugin after the constraint groups of each iteration,
   serially (deterministic for any thread count); on a GPU world as a
   device plugin whose kernels are in pbd_cuda.cu (per particle in
   parallel, the sums in one thread each: the same bits). Owned by the world like
   the oriented set, and named likewise by a handle whose id is that of
   its plugin. */
typedef struct pbd_sm_volume {
    uint32_t id;
} pbd_sm_volume;

typedef struct pbd_sm_volume_desc {
    const int *triangles; /* triangle_count*3 world particle indices: closed, consistently
                                  oriented, counter-clockwise seen from outside */
    int triangle_count;
    float alpha;             /* global (1) vs local (0) weights, [0, 1]; default 1 */
    float beta;              /* local weights: opposing-pair distance change (1) vs own
                                  displacement (0), [0, 1]; default 0.5 */
    float pair_stiffness;    /* s of the survey's local weight, >= 0; default 1 */
    int smoothing;           /* Laplacian passes over the weights, 0..64; default 2 */
    float stiffness;         /* fraction of C removed per projection, (0, 1]; default 1 */
    int velocity_correction; /* make the velocity field divergence free; default 1 */
    float contact_distance;  /* a particle this close to a collider counts as colliding,
                                  >= 0; default 0 (see "surface volume": a positive
                                  distance makes a ball resting on the ground gain energy) */
} pbd_sm_volume_desc;

PBD_SM_DEF pbd_sm_volume_desc pbd_sm_volume_desc_default(void);
/* The rest volume is the current one. Errors: NULL pointers; INVALID_ARGUMENT
   for no triangles or parameters out of range; INDEX_OUT_OF_RANGE;
   DEGENERATE for a triangle with a repeated particle or zero area, or a
   volume <= 0 (inside out); NOT_CLOSED when an edge is not shared by
   exactly two triangles in opposite directions; NOT_FINITE. out (the
   handle) may be NULL. While the volume lives, pbd.h refuses to remove
   its particles. */
PBD_SM_DEF pbd_result pbd_sm_add_surface_volume(pbd_world *w, const pbd_sm_volume_desc *desc, pbd_sm_volume *out);
/* Removes the volume constraint and frees it (the particles stay). Every
   call on a volume checks its handle: 0, a removed volume's handle
   (stale) and a handle of another kind fail with PBD_ERROR_INVALID_HANDLE. */
PBD_SM_DEF pbd_result pbd_sm_remove_surface_volume(pbd_world *w, pbd_sm_volume volume);
/* Volume of the mesh at the world's current positions (eq. 12). */
PBD_SM_DEF pbd_result pbd_sm_volume_measure(const pbd_world *w, pbd_sm_volume v, double *volume);
/* The rest volume, and its setter (> 0, at most 8 PBD_MAX_COORDINATE^3:
   the box positions may fill); the blend alpha ([0, 1]). */
PBD_SM_DEF pbd_result pbd_sm_volume_get_rest(const pbd_world *w, pbd_sm_volume v, double *rest_volume);
PBD_SM_DEF pbd_result pbd_sm_volume_set_rest(pbd_world *w, pbd_sm_volume v, double rest_volume);
PBD_SM_DEF pbd_result pbd_sm_volume_set_alpha(pbd_world *w, pbd_sm_volume v, float alpha);
/* The opposing particle (world index, -1 if the ray found none) of world
   particle `particle` of the mesh. */
PBD_SM_DEF pbd_result pbd_sm_volume_opposite(const pbd_world *w, pbd_sm_volume v, int particle, int *opposite);
/* The weights w_i of the last projection, for the mesh's particles in
   increasing world index; writes at most max, *count gets the number. */
PBD_SM_DEF pbd_result pbd_sm_volume_weights(const pbd_world *w, pbd_sm_volume v, float *weights, int max, int *count);

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
   prolongation P and the mass-weighted restriction R = M_C^-1 P^T M_F
   (the coarse masses M_C = P^T M_F), which also gives the coarse levels
   their positions at the start of a V-cycle (x_C = R x_F, nested levels
   too) and their rest shapes (R rest_F): then P dx_C is the mass-weighted
   projection direction of the coarse constraints, and the transfers feed
   no energy in (copying nested coarse vertices from the fine ones did:
   a free cloth at rest gained up to 0.5 J, see pbd_sm__galerkin). Coarse
   levels conserve fine wrinkles (eqs. 16-18). The quadratic bending model
   of Bergou et al. 2006 is a force and damping acts per triangle (section
   4.4). The paper integrates the bending force explicitly, which is stable
   only while h^2 k w lambda_max(Q) < 4 (about 13 ms for a 5 m cloth of
   102 x 102 vertices and k = 1e-4; beyond it the step diverges), so
   we scale the force by 1 / (1 + h^2 k max_i sum_j |Q_ij| / m_i), the
   same for every vertex (a per-vertex mass would create momentum), which
   is stable at any step and changes nothing where the explicit step is
   accurate. The paper runs one V-cycle per time step: use substeps = 1
   and iterations = 1 in the world to reproduce it.

   Stiffness: as in every shape-matching method, it depends on alpha and
   beta, on the time step and on the number of levels (paper section 6);
   more levels and smaller steps give a stiffer cloth: the equilibrium
   strain falls with dt^2. The per-triangle damping (eq. 20) is local: it
   cannot calm the cloth's global stretch modes (for a uniform stretch
   rate the corrections of a vertex's triangles cancel), so a cloth
   dropped from a height keeps bouncing on its own stretch, with a strain
   amplitude that falls only linearly with dt; the world's point damping
   (air drag) calms those. */

typedef enum pbd_sm_cloth_scheme {
    /* per-element goals, then a per-vertex gather in a fixed order (the
       paper's GPU scheme, section 5); Jacobi-like within a pass */
    PBD_SM_CLOTH_TWO_PASS = 0,
    /* elements coloured into independent sets, applied set after set (the
       paper's OpenMP scheme, section 5); Gauss-Seidel-like */
    PBD_SM_CLOTH_INDEPENDENT_SETS = 1
} pbd_sm_cloth_scheme;

typedef struct pbd_sm_cloth_desc {
    const float *positions; /* vertex_count*3 rest (and initial) positions */
    int vertex_count;
    const int *triangles; /* triangle_count*3, a manifold mesh, no zero-area triangle, every vertex in one */
    int triangle_count;
    const float *initial_positions; /* optional vertex_count*3: start here instead (e.g. a
                                       random or collapsed state); rest shape stays `positions` */
    float density;                  /* kg/m^2, eq. 1; default 0.1 */
    int levels;                     /* hierarchy levels including the finest, 1..10; default 5 */
    float reduction;                /* fraction of triangles removed per level, 0.05..0.9;
                                 default 0.5 (the paper: about 50%, 25% for its large cloth) */
    int nested;                     /* 1 (default): coarse vertices are fine vertices (figure 3a);
                                 0: coarse vertices sit at the centroids of the fine
                                 vertices they replace, so no vertex is shared (figure 3b).
                                 Either way a coarse level's positions (and rest shape) are
                                 the mass-weighted restriction of the finer level's, not
                                 copies of its vertices (see MULTI-RESOLUTION CLOTH) */
    float alpha;                    /* 2D stiffness, eq. 12, in [0, 1]; default 1 */
    float beta;                     /* 1D stiffness, eq. 15, in [0, 1]; 0 turns 1D matching off; default 1 */
    int conserve_wrinkles;          /* eqs. 16-18 on the coarse levels; default 1 (see the manual,
                                       MULTI-RESOLUTION CLOTH) */
    float damping;                  /* per-triangle damping k_d, eq. 20, in [0, 1]; default 0.05 */
    float bending_stiffness;        /* Bergou et al. bending, N m (energy k/2 x^T Q x); default 1e-4 */
    pbd_sm_cloth_scheme scheme;     /* default PBD_SM_CLOTH_INDEPENDENT_SETS: the faster one on a
                                   CPU (bench/multires.c times both, on 1 and 2 threads);
                                   two-pass is the GPU's scheme. Both recover the edge lengths
                                   from random and collapsed starts (mean error under 5% in 2 s,
                                   tests/test_sm_cloth.c), but a free cloth of 3 to 5 levels
                                   started at random in zero gravity does not come to rest:
                                   after 12 s half its triangles still lie mirrored and it
                                   flaps at over 1 m/s (its centre of mass stays put), even with
                                   point damping 2/s (an audit; 1 level comes to rest). A
                                   cloth of 40 x 40 vertices and 5 levels hanging from two
                                   corners does not quite either: at 2/s its vertices still
                                   move at 0.04 m/s on average after 30 s, the fastest at
                                   0.25 m/s, where without wrinkle conservation they rest
                                   (0.002 m/s). It is the wrinkle
                                   conservation (eqs. 16-18 keep the coarse levels' compression,
                                   which a crumpled start is all over): with conserve_wrinkles
                                   = 0 the same 20 x 20 cloth of 4 levels (point damping 2/s) is
                                   at its rest lengths and at rest (0.00% mean, 0.003 m/s) by 8
                                   s. A flat cloth collapsed into exactly one
                                   point is a special case for both: all corrections lie in
                                   the triangles' planes, so it unfolds in one plane, where
                                   the triangles mirrored by the collapse never unmirror
                                   (4-9% mean elongation on a 20 x 20 cloth); only rounding
                                   lifts it out, as it does at full size with either scheme */
    float thickness;                /* particle radius for collisions, <= PBD_MAX_RADIUS; default 0.005 */
    const int *keep_vertices;       /* optional: vertices every level keeps (e.g. those you pin);
                                 boundary corners are always kept. Nested levels only: with
                                 nested = 0 no coarse vertex is a fine one, so a pin holds on
                                 the finest level alone and the coarse levels pull against
                                 it (a 30 x 30 cloth of 5 levels pinned at two corners and a
                                 middle vertex: worst edge 235% at 1 s, 22% nested): pin
                                 nested cloths */
    int keep_count;
} pbd_sm_cloth_desc;

/* A cloth is named by a handle whose id is that of its plugin. */
typedef struct pbd_sm_cloth {
    uint32_t id;
} pbd_sm_cloth;

PBD_SM_DEF pbd_sm_cloth_desc pbd_sm_cloth_desc_default(void);
/* Adds the particles (one per vertex, in vertex order) and the plugin. The
   cloth belongs to the world: it is freed with it (or pbd_sm_remove_cloth).
   out (the handle) and `particles` (the particle range) may be NULL.
   While the cloth lives, pbd.h refuses to remove its particles. Errors
   (nothing is added): NULL pointers; NOT_FINITE; NEGATIVE_MASS for a
   density <= 0; OVERFLOW for counts too large; INDEX_OUT_OF_RANGE for a
   triangle or kept vertex that names no vertex; DEGENERATE for a
   triangle with a repeated vertex or zero area; INVALID_ARGUMENT for
   parameters out of range, vertex masses (from the density) outside
   [PBD_MIN_MASS, PBD_MAX_MASS], and a mesh that is not one: a triangle
   listed twice (the same vertices in any order; the message names both
   triangles), an edge in more than two triangles, a vertex in no
   triangle, or too few triangles for the levels. */
PBD_SM_DEF pbd_result pbd_sm_add_cloth(pbd_world *w, const pbd_sm_cloth_desc *desc, pbd_sm_cloth *out,
                                       pbd_range *particles);
/* Removes the cloth's solver and frees it; its particles stay (remove them
   with pbd_remove_particles). Every call on a cloth checks its handle: 0,
   a removed cloth's handle (stale) and a handle of another kind fail with
   PBD_ERROR_INVALID_HANDLE. */
PBD_SM_DEF pbd_result pbd_sm_remove_cloth(pbd_world *w, pbd_sm_cloth cloth);
PBD_SM_DEF pbd_result pbd_sm_cloth_particles(const pbd_world *w, pbd_sm_cloth cloth, pbd_range *particles);
/* Hierarchy levels: 0 is the coarsest, level_count - 1 the finest (the
   world's particles). Positions are 4 floats per vertex (x y z inverse-mass)
   as of the last V-cycle; the finest level's are the world's. */
PBD_SM_DEF pbd_result pbd_sm_cloth_level_count(const pbd_world *w, pbd_sm_cloth cloth, int *count);
PBD_SM_DEF pbd_result pbd_sm_cloth_level(const pbd_world *w, pbd_sm_cloth cloth, int level, int *vertex_count,
                                         int *triangle_count, const int **triangles, const float **positions);
/* Parameters that can change between steps (same ranges as the desc). */
PBD_SM_DEF pbd_result pbd_sm_cloth_set_stiffness(pbd_world *w, pbd_sm_cloth cloth, float alpha, float beta);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_wrinkle_conservation(pbd_world *w, pbd_sm_cloth cloth, int on);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_damping(pbd_world *w, pbd_sm_cloth cloth, float damping);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_bending(pbd_world *w, pbd_sm_cloth cloth, float bending_stiffness);
PBD_SM_DEF pbd_result pbd_sm_cloth_set_scheme(pbd_world *w, pbd_sm_cloth cloth, pbd_sm_cloth_scheme scheme);
/* The triangle kernel (2D matching, eqs. 4-18) runs pbd_simd_width()
   triangles per SIMD instruction (pbd.h's choice: 16 with AVX-512, 8 with
   AVX2, 4 with SSE2 or NEON; 1 under PBD_NO_SIMD or without SIMDe). on = 0
   selects the scalar reference, which gives the same bits; on (default)
   where compiled. */
PBD_SM_DEF pbd_result pbd_sm_cloth_set_simd(pbd_world *w, pbd_sm_cloth cloth, int on);
/* Strain of the finest mesh at the world's current positions: the mean
   over the edges of the elongation max(l - l0, 0) / l0 (the paper's
   average local strain: a shorter edge is a buckled, not a strained, one)
   and the largest (l - l0) / l0 of an edge. */
PBD_SM_DEF pbd_result pbd_sm_cloth_strain(const pbd_world *w, pbd_sm_cloth cloth, float *average, float *maximum);

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
#if PBD__FAST_MATH_WARN && !defined(PBD__FAST_MATH_WARNED)
#define PBD__FAST_MATH_WARNED
#warning \
    "pbd: -ffast-math changes the solver's results (inputs are still checked): compile this file with -fno-fast-math, or define PBD_ALLOW_FAST_MATH"
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
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
#if defined(PBD_SM_MALLOC) != defined(PBD_SM_FREE)
#error "pbd_sm.h: define both PBD_SM_MALLOC and PBD_SM_FREE, or neither"
#endif
#ifndef PBD_SM_MALLOC
#define PBD_SM_MALLOC(sz) malloc(sz)
#define PBD_SM_FREE(p) free(p)
#endif

/* Memory (MEMORY in the manual): `mem` is the world a thing belongs to,
   whose allocator it uses (pbd_world_alloc: pbd_world_desc.allocator, else
   PBD_MALLOC); NULL for things without a world (PBD_SM_MALLOC). A thing
   frees its memory with the same `mem` it was allocated with. */
static void *pbd_sm__alloc_n(pbd_world *mem, size_t n, size_t elem) {
    if (elem && n > SIZE_MAX / elem) return NULL;
    size_t size = n * elem > 0 ? n * elem : 1;
    return mem ? pbd_world_alloc(mem, size) : PBD_SM_MALLOC(size);
}
static void pbd_sm__free(pbd_world *mem, void *p) {
    if (!p) return;
    if (mem) pbd_world_free(mem, p);
    else PBD_SM_FREE(p);
}

/* The things a world owns, named by handles whose id is that of the
   plugin each registers; the plugin's user pointer is the struct, whose
   first member is its kind's tag (pbd_sm__resolve). */
typedef struct pbd_sm__body pbd_sm__body;
typedef struct pbd_sm__oriented pbd_sm__oriented;
typedef struct pbd_sm__volume pbd_sm__volume;
typedef struct pbd_sm__cloth pbd_sm__cloth;
#define PBD_SM__TAG_BODY 0x42736d70u     /* "pmsB" */
#define PBD_SM__TAG_ORIENTED 0x4f736d70u /* "pmsO" */
#define PBD_SM__TAG_VOLUME 0x56736d70u   /* "pmsV" */
#define PBD_SM__TAG_CLOTH 0x43736d70u    /* "pmsC" */

/* The kind a tag names, for messages (NULL: not one of pbd_sm.h's). */
static const char *pbd_sm__kind(uint32_t tag) {
    switch (tag) {
        case PBD_SM__TAG_BODY: return "shape-matching body";
        case PBD_SM__TAG_ORIENTED: return "oriented particle set";
        case PBD_SM__TAG_VOLUME: return "surface volume";
        case PBD_SM__TAG_CLOTH: return "multi-resolution cloth";
        default: return NULL;
    }
}
static const char *pbd_sm__article(const char *noun) { return strchr("aeiou", noun[0]) ? "an" : "a"; }

/* The plugin kind (pbd_plugin_desc.kind) of each of pbd_sm.h's kinds: the
   address of its tag here, which no other code can hand out. */
static const uint32_t pbd_sm__kind_tags[4] = {PBD_SM__TAG_BODY, PBD_SM__TAG_ORIENTED, PBD_SM__TAG_VOLUME,
                                              PBD_SM__TAG_CLOTH};
static const void *pbd_sm__plugin_kind(uint32_t tag) {
    for (int k = 0; k < 4; ++k)
        if (pbd_sm__kind_tags[k] == tag) return &pbd_sm__kind_tags[k];
    return NULL;
}

/* The struct of kind `tag` that handle `id` names in w: the user pointer of
   the live plugin with that id, whose plugin kind is that tag's. Else
   nothing is touched and the error is reported on w, naming the kind:
   PBD_ERROR_NULL_POINTER for no world, PBD_ERROR_INVALID_HANDLE for id 0,
   for an id that names no live plugin (the thing was removed, or the
   handle is of another world and its slot is not live here: an id holds
   no world, so one of another world whose slot and generation this world
   also holds names this world's plugin) and for a plugin of another kind
   (another of pbd_sm.h's kinds, or someone else's plugin). */
static pbd_result pbd_sm__resolve(const pbd_world *w, uint32_t id, uint32_t tag, const char *fn, void **out) {
    const char *kind = pbd_sm__kind(tag);
    *out = NULL;
    if (!w) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "%s: w is NULL", fn);
    if (id == 0) return pbd_world_fail(w, PBD_ERROR_INVALID_HANDLE, "%s: the %s handle is 0 (no %s)", fn, kind, kind);
    pbd_plugin p;
    p.id = id;
    const void *pk;
    void *user;
    if (pbd_plugin_get(w, p, &pk, &user) != PBD_OK)
        return pbd_world_fail(w, PBD_ERROR_INVALID_HANDLE,
                              "%s: %s handle 0x%x is stale: that %s was removed (or the handle is of another world)",
                              fn, kind, (unsigned)id, kind);
    if (pk != pbd_sm__plugin_kind(tag)) {
        const char *other = NULL;
        for (int k = 0; k < 4; ++k)
            if (pk == &pbd_sm__kind_tags[k]) other = pbd_sm__kind(pbd_sm__kind_tags[k]);
        return pbd_world_fail(w, PBD_ERROR_INVALID_HANDLE, "%s: handle 0x%x names %s %s, not %s %s", fn, (unsigned)id,
                              other ? pbd_sm__article(other) : "a", other ? other : "plugin that is not pbd_sm.h's",
                              pbd_sm__article(kind), kind);
    }
    *out = user;
    return PBD_OK;
}

/* The colliders a callback tests against: the first
   PBD_SM__COLLIDERS_AT_ONCE fetched once per callback (pbd_world_colliders),
   any beyond them one by one (pbd_world_collider walks the slots). */
#define PBD_SM__COLLIDERS_AT_ONCE 64
static pbd_collider pbd_sm__collider(const pbd_world *w, const pbd_collider *first, int k) {
    return k < PBD_SM__COLLIDERS_AT_ONCE ? first[k] : pbd_world_collider(w, k);
}

/* pbd_plugin_desc.uses_particles: the first marked particle of a list of
   world particles / of a range, or -1. */
static int pbd_sm__marked_list(const unsigned char *marked, int n, const int *idx, int count) {
    for (int i = 0; i < count; ++i)
        if (idx[i] >= 0 && idx[i] < n && marked[idx[i]]) return idx[i];
    return -1;
}
static int pbd_sm__marked_range(const unsigned char *marked, int n, pbd_range r) {
    for (int i = r.first; i < r.first + r.count && i < n; ++i)
        if (i >= 0 && marked[i]) return i;
    return -1;
}

// ---- tolerances ----
/* Every tolerance of the implementation, named by its role. A literal's
   type is part of its value: an f suffix means a float comparison; a
   double literal in a float expression promotes it. _F names are float
   literals. */

/* rotation extraction (scalar pbd_sm__extract_rotation and its SIMD twin pbd_sm__extract_rotation4) */
// Newton Hessian pivots above this times tr(B): smaller steps wildly on a near-singular H, larger falls back to Mueller
#define PBD_SM__NEWTON_PD_MARGIN 1e-6
// Newton step longest squared (half a radian): longer, the quadratic model is not trusted; shorter, fewer warm starts
#define PBD_SM__NEWTON_STEP_MAX2 0.25
// Mueller et al.'s eps in w = g / (|tr| + eps): only keeps tr = 0 from dividing by zero; larger slows convergence
#define PBD_SM__MUELLER_EPS 1e-9
// below this turn angle the half-angle series (terms below 1e-16 omitted); larger loses accuracy, smaller is sin/cos
#define PBD_SM__TURN_SERIES_MAX 1e-3
// a warm-start quaternion shorter than this is replaced by identity: dividing by it would amplify noise to garbage
#define PBD_SM__QUAT_NORM_MIN 1e-12
// a warm-start norm or an entry of A above this counts as overflowed, like NaN: smaller would reject real inputs
#define PBD_SM__ROT_HUGE 1e30
// a turn below this (A scaled to max entry 1) is converged: near double precision; smaller may never be met
#define PBD_SM__TURN_DONE 1e-12
// after a Newton turn below this, what is left is ~ its square (below TURN_DONE); larger would stop early
#define PBD_SM__NEWTON_DONE 1e-7
// a half turn is taken when a pair sum of diag(R^T A) is below minus this: zero would flip on rounding noise
#define PBD_SM__HALF_TURN_GAIN 1e-6

/* meshes, eigen solves, bodies */
// a mesh coordinate above this is rejected like inf: larger lets near-FLT_MAX values through to overflow later
#define PBD_SM__COORD_MAX 1e30
// sin^2 of a mesh triangle's corner below this is degenerate: smaller lets zero-area triangles through
#define PBD_SM__MESH_SIN2_MIN 1e-24
// pseudo-inverse drops eigenvalues below this times the largest: larger discards real modes, smaller amplifies noise
#define PBD_SM__PINV_EIG_REL 1e-10
// rest rms distance from the centre below this times the extent: coincident, A_qq singular; larger rejects thin bodies
#define PBD_SM__REST_SIZE_REL 1e-6
// linear mode's volume term needs det A above this: cbrt of a near-zero or negative det would explode or invert
#define PBD_SM__LINEAR_DET_MIN 1e-9
// a plastic update with det S_p below this would invert or collapse the rest shape: it is skipped
#define PBD_SM__PLASTIC_DET_MIN 1e-6
// voxelize's ray offset in cells (times irrational fractions): larger misplaces the surface, smaller hits vertices
#define PBD_SM__RAY_OFFSET 1e-4
// a rotation by less than this angle (rad) is none: q_p = q, omega = 0; dividing by it would amplify rounding
#define PBD_SM__ANGLE_NONE 1e-9
// an orientation's squared norm (desc, in float) must exceed this to normalise: smaller gives garbage directions
#define PBD_SM__QUAT_NORM2_MIN_F 1e-12f
// the same for pbd_sm_oriented_set_state's squared norm, in double
#define PBD_SM__QUAT_NORM2_MIN 1e-12
// skinning weight 1 / (d^2 + eps): keeps a vertex on a bone (d = 0) finite; larger blurs near weights
#define PBD_SM__SKIN_DIST2_EPS 1e-12
/* a region's volume correction: the mean of a particle's regions'
   corrections times this (averaged Jacobi over-relaxed, as pbd.h's
   pbd_world_set_jacobi and Macklin et al. 2014 "Unified particle
   physics"; the plain sum, |R_i| = 125 times the mean, diverged), in
   this many sweeps per iteration. The README's jelly pressed to 70% of
   its height lost (sweeps x omega) 1 x 1: 18.4%, 1 x 1.75: 12.3%,
   2 x 1.75: 5.9%, 3 x 1.75: 2.7%. Beyond 2 it overshoots: 1 x 4 kept
   the jelly's volume (+0.5%) but gave one of half-width 3 12% more, and
   one of stiffness 0.2 pressed to 50% sprang back at 18 m/s; 1 x 8: +26%. */
#define PBD_SM__VOLUME_OMEGA 1.75
#define PBD_SM__VOLUME_SWEEPS 3
// volume constraint's sum w |grad C|^2 below this: no direction to correct along, the projection is skipped
#define PBD_SM__VOLUME_DEN_MIN 1e-30
// ray-triangle |det| below this: ray parallel to the triangle, no hit (1 / det would overflow)
#define PBD_SM__RAY_PARALLEL 1e-30

/* cloth levels (float) */
// added to |d0| |d1| before dividing for a cosine: keeps a zero-length edge from dividing by zero
#define PBD_SM__COS_DEN_EPS_F 1e-30f
// rest triangle area below this times an edge squared is a sliver: rejected (its inverse rest shape would blow up)
#define PBD_SM__SLIVER_REL_F 1e-12f
// added to that edge squared so a zero edge still gives a positive bound
#define PBD_SM__EDGE2_FLOOR_F 1e-30f
// an edge shorter than this has no direction (1/len overflows): the projection keeps its frame, the edge rests
#define PBD_SM__DIR_LEN_MIN_F 1e-20f
// |n x e1| (a length cubed) below this has no direction: smaller would divide by denormals
#define PBD_SM__CROSS_LEN_MIN_F 1e-30f
// |n x e1| below this times |e1|^3 is a flat triangle: its projection frame is kept from the last valid step
#define PBD_SM__FLAT_REL_F 1e-6f
// 2D polar decomposition: |u| below this has no rotation, identity is used (1/|u| would overflow)
#define PBD_SM__POLAR_LEN_MIN_F 1e-30f

// ==== rotation ==============================================================

/* SIMD through SIMDe's 256-bit doubles (4 lanes), used by the rotation
   extraction of four regions at once and the summation's row kernels:
   where pbd.h chose AVX2 or wider (PBD_SIMD_LANES >= 8, pbd.h "==== config";
   PBD_SIMD_SIMDE_H then includes SIMDe's AVX), else their scalar twins. */
#if PBD_SIMD_LANES >= 8
#if !defined(I) && !defined(complex)
#define PBD__NO_COMPLEX_MACROS
#endif
#include PBD_SIMD_SIMDE_H
#ifdef PBD__NO_COMPLEX_MACROS /* SIMDe's SVML includes <complex.h> in strict C (AVX-512): I and complex are the user's */
#undef I
#undef complex
#undef PBD__NO_COMPLEX_MACROS
#endif
#define PBD_SM__SIMD 1
#else
#define PBD_SM__SIMD 0
#endif

/* sin and cos of a double, and cube roots, in IEEE additions,
   multiplications and divisions only (and exact reads and writes of the
   exponent bits),
   so that pbd_cuda.cu's kernels give the CPU's bits: libm's and CUDA's
   sin, cos and cbrt may differ in the last bit. sin/cos: x reduced by
   pi/2 (Cody and Waite: pi/2 in a 33-bit head, whose multiples by the
   quadrant are exact, and a tail), then Taylor polynomials on [-pi/4,
   pi/4] to x^17 and x^16, whose first omitted terms are below 1e-17;
   within a few units in the last place of libm's for |x| up to 1e6, and
   above 1e15 (a turn no rotation extraction makes) 0 and 1. */
static PBD_HD void pbd_sm__sincos(double x, double *s, double *c) {
    if (!(fabs(x) < 1e15)) {
        *s = x == x ? 0 : x;
        *c = x == x ? 1 : x;
        return;
    }
    double k = floor(x * 0.6366197723675814 + 0.5); /* the quadrant: x / (pi/2), rounded */
    double r = (x - k * 1.57079632673412561417) - k * 6.07710050650619224932e-11, z = r * r;
    double sn = r + r * z *
                        (-0.16666666666666666 +
                         z * (0.008333333333333333 +
                              z * (-0.0001984126984126984 +
                                   z * (2.7557319223985893e-06 +
                                        z * (-2.505210838544172e-08 +
                                             z * (1.6059043836821613e-10 +
                                                  z * (-7.647163731819816e-13 + z * 2.8114572543455206e-15)))))));
    double cs = 1 + z * (-0.5 + z * (0.041666666666666664 +
                                     z * (-0.001388888888888889 +
                                          z * (2.48015873015873e-05 +
                                               z * (-2.755731922398589e-07 +
                                                    z * (2.08767569878681e-09 + z * (-1.1470745597729725e-11 +
                                                                                     z * 4.779477332387385e-14)))))));
    double q = k - 4 * floor(k * 0.25); /* the quadrant mod 4: 0..3 */
    if (q == 0) {
        *s = sn;
        *c = cs;
    } else if (q == 1) {
        *s = cs;
        *c = -sn;
    } else if (q == 2) {
        *s = -sn;
        *c = -cs;
    } else {
        *s = -cs;
        *c = sn;
    }
}
/* The cube root, from + - * / alone so that a GPU gives the host's bits:
   |x| = m 2^(3e + r), m in [1, 2), r in {0, 1, 2}, read from the bits
   (a subnormal scaled by 2^54 first); cbrt(m 2^r) for m 2^r in [1, 8)
   from a cubic guess within 1.4% (a least-squares fit of the relative
   error) and two steps of Halley's iteration y (y^3 + 2a) / (2y^3 + a),
   each about cubing the error; then 2^e, exact. Within 5 units in the
   last place of libm's cbrt (tests/test_sm_rot4.c), 3x as fast as the
   Newton iteration with frexp and ldexp it replaced (a LINEAR region's
   goal takes one per projection). */
static PBD_HD double pbd_sm__pow2(int e) { /* 2^e, e a normal exponent */
    uint64_t bits = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}
static PBD_HD double pbd_sm__cbrt(double x) {
    if (!(fabs(x) <= 1.7976931348623157e308) || x == 0) return x; /* NaN, infinities, zeros */
    double ax = fabs(x), scale = 1, m, y;
    if (ax < 2.2250738585072014e-308) { /* subnormal: cbrt(x 2^54) 2^-18 */
        ax *= 18014398509481984.0;
        scale = 3.814697265625e-06;
    }
    uint64_t bits;
    memcpy(&bits, &ax, sizeof bits);
    int e = (int)(bits >> 52) - 1023, e3 = e >= 0 ? e / 3 : -((-e + 2) / 3), rest = e - 3 * e3;
    bits = (bits & 0x000fffffffffffffULL) | ((uint64_t)(1023 + rest) << 52);
    memcpy(&m, &bits, sizeof m); /* m 2^rest in [1, 8) */
    y = 0.709057 + m * (0.340075 + m * (-0.037508 + m * 0.001917));
    for (int it = 0; it < 2; ++it) {
        double y3 = y * y * y;
        y = y * (y3 + 2 * m) / (2 * y3 + m);
    }
    y = y * pbd_sm__pow2(e3) * scale;
    return x < 0 ? -y : y;
}

/* atan2(y, x) likewise: t = min / max of |x|, |y| in [0, 1], halved twice
   in angle (atan t = 2 atan(t / (1 + sqrt(1 + t^2))), to t <= 0.2), its
   Taylor series to t^25 (the first omitted term below 1e-17 t), then the
   octant; within a few units in the last place of libm's. */
static PBD_HD double pbd_sm__atan2(double y, double x) {
    if (!(x == x) || !(y == y)) return x + y;
    double ax = fabs(x), ay = fabs(y), hi = ax > ay ? ax : ay, lo = ax > ay ? ay : ax;
    double t = hi > 0 ? (hi <= 1.7976931348623157e308 ? lo / hi : (lo == hi ? 1 : 0)) : 0;
    for (int half = 0; half < 2; ++half) t = t / (1 + sqrt(1 + t * t));
    double z = t * t, sum = 0;
    for (int k = 12; k >= 1; --k) sum = z * ((k & 1 ? -1.0 : 1.0) / (2 * k + 1) + sum);
    double a = 4 * (t + t * sum);
    if (ay > ax) a = 1.5707963267948966 - a;
    if (x < 0 || (x == 0 && 1 / x < 0)) a = 3.141592653589793 - a;
    return y < 0 || (y == 0 && 1 / y < 0) ? -a : a;
}

static PBD_HD void pbd_sm__quat_to_mat(const double *q, double *R) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    R[0] = 1 - 2 * (y * y + z * z);
    R[1] = 2 * (x * y - z * w);
    R[2] = 2 * (x * z + y * w);
    R[3] = 2 * (x * y + z * w);
    R[4] = 1 - 2 * (x * x + z * z);
    R[5] = 2 * (y * z - x * w);
    R[6] = 2 * (x * z - y * w);
    R[7] = 2 * (y * z + x * w);
    R[8] = 1 - 2 * (x * x + y * y);
}

/* a = a * b (Hamilton product, x y z w), normalised. With SIMD the four
   components are one vector, x - y as x + (-y) (the same bits): GCC's SLP
   vectoriser turns the scalar form's alternating signs into a fused
   vfmsubadd even under -ffp-contract=off, so the scalar form could differ
   from the four-region extraction (pbd_sm__extract_rotation4) in the
   last bit. */
static PBD_HD void pbd_sm__quat_mul_into(double *a, const double *b, int b_on_left) {
    const double *l = b_on_left ? b : a, *r = b_on_left ? a : b;
#if PBD_SM__SIMD
    const simde__m256d m0 = simde_mm256_set_pd(-0.0, 0.0, -0.0, 0.0), m1 = simde_mm256_set_pd(-0.0, -0.0, 0.0, 0.0);
    const simde__m256d m2 = simde_mm256_set_pd(-0.0, 0.0, 0.0, -0.0);
    simde__m256d t = simde_mm256_mul_pd(simde_mm256_set1_pd(l[3]), simde_mm256_set_pd(r[3], r[2], r[1], r[0]));
    simde__m256d u = simde_mm256_mul_pd(simde_mm256_set1_pd(l[0]), simde_mm256_set_pd(r[0], r[1], r[2], r[3]));
    t = simde_mm256_add_pd(t, simde_mm256_xor_pd(u, m0));
    u = simde_mm256_mul_pd(simde_mm256_set1_pd(l[1]), simde_mm256_set_pd(r[1], r[0], r[3], r[2]));
    t = simde_mm256_add_pd(t, simde_mm256_xor_pd(u, m1));
    u = simde_mm256_mul_pd(simde_mm256_set1_pd(l[2]), simde_mm256_set_pd(r[2], r[3], r[0], r[1]));
    t = simde_mm256_add_pd(t, simde_mm256_xor_pd(u, m2));
    double o[4];
    simde_mm256_storeu_pd(o, t);
#else
    double o[4] = {
        l[3] * r[0] + l[0] * r[3] + l[1] * r[2] - l[2] * r[1], l[3] * r[1] - l[0] * r[2] + l[1] * r[3] + l[2] * r[0],
        l[3] * r[2] + l[0] * r[1] - l[1] * r[0] + l[2] * r[3], l[3] * r[3] - l[0] * r[0] - l[1] * r[1] - l[2] * r[2]};
#endif
    double n = 1.0 / sqrt(o[0] * o[0] + o[1] * o[1] + o[2] * o[2] + o[3] * o[3]);
    for (int k = 0; k < 4; ++k) a[k] = o[k] * n;
}

/* The Newton step of maximising tr(R^T A) over left turns exp([w]) R:
   with B = A R^T (the part of A still to be turned), the gradient is
   g = axial(B - B^T) = sum_i r_i x a_i and the Hessian H = tr(B) I - sym(B),
   whose eigenvalues are the pair sums s_j + s_k of sym(B)'s. Near the
   polar rotation of a rank >= 2 matrix H is positive definite, and
   w = H^-1 g removes the error to first order (quadratic convergence),
   where Mueller et al.'s w = g / tr(B) removes a fraction of it (a third
   per step for S = I; less for anisotropic or nearly flat S). Returns 0 (and leaves g) where H is not clearly positive
   definite (rank < 2, a saddle, far from the maximum) or the step exceeds
   half a radian: there Mueller et al.'s step is taken. */
static PBD_HD int pbd_sm__rotation_newton(const double *B, double tr, double *g) {
    if (!(tr > 0)) return 0;
    double h00 = tr - B[0], h11 = tr - B[4], h22 = tr - B[8];
    double h01 = -0.5 * (B[1] + B[3]), h02 = -0.5 * (B[2] + B[6]), h12 = -0.5 * (B[5] + B[7]);
    /* Sylvester's criterion with margins, then Cramer's rule (one
       division: the solve is on the critical path of every region) */
    double c00 = h11 * h22 - h12 * h12, c01 = h02 * h12 - h01 * h22, c02 = h01 * h12 - h02 * h11;
    double m2 = h00 * h11 - h01 * h01, det = h00 * c00 + h01 * c01 + h02 * c02, tiny = PBD_SM__NEWTON_PD_MARGIN * tr;
    if (!(h00 > tiny) || !(m2 > tiny * tiny) || !(det > tiny * tiny * tiny)) return 0;
    double c11 = h00 * h22 - h02 * h02, c12 = h01 * h02 - h00 * h12, c22 = m2, inv = 1.0 / det;
    double w0 = (c00 * g[0] + c01 * g[1] + c02 * g[2]) * inv;
    double w1 = (c01 * g[0] + c11 * g[1] + c12 * g[2]) * inv;
    double w2 = (c02 * g[0] + c12 * g[1] + c22 * g[2]) * inv;
    if (!(w0 * w0 + w1 * w1 + w2 * w2 < PBD_SM__NEWTON_STEP_MAX2)) return 0;
    g[0] = w0;
    g[1] = w1;
    g[2] = w2;
    return 1;
}

/* One iteration's turn from q (the world-frame rotation vector w, left
   multiplied): the Newton step where it applies (returns 1), else
   Mueller et al.'s (returns 0). A is scaled by inv_scale. */
static PBD_HD int pbd_sm__rotation_step(const double *A, double inv_scale, const double *q, double *w) {
    double R[9], B[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    pbd_sm__quat_to_mat(q, R);
    w[0] = w[1] = w[2] = 0;
    for (int c = 0; c < 3; ++c) {
        double r[3] = {R[c], R[3 + c], R[6 + c]};
        double a[3] = {A[c] * inv_scale, A[3 + c] * inv_scale, A[6 + c] * inv_scale};
        w[0] += r[1] * a[2] - r[2] * a[1];
        w[1] += r[2] * a[0] - r[0] * a[2];
        w[2] += r[0] * a[1] - r[1] * a[0];
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 3; ++j) B[3 * i + j] += a[i] * r[j]; /* A R^T */
    }
    double tr = B[0] + B[4] + B[8];
    if (pbd_sm__rotation_newton(B, tr, w)) return 1;
    double s = 1.0 / (fabs(tr) + PBD_SM__MUELLER_EPS);
    w[0] *= s;
    w[1] *= s;
    w[2] *= s;
    return 0;
}

/* q = exp(w / 2) q, |w| = ang > 0 (the small-angle series below 1e-3:
   its first omitted terms are below 1e-16). */
static PBD_HD void pbd_sm__rotation_turn(double *q, const double *w, double ang) {
    double sh, ch;
    if (ang < PBD_SM__TURN_SERIES_MAX) {
        double a2 = ang * ang;
        sh = 0.5 - a2 / 48;
        ch = 1 - a2 / 8 + a2 * a2 / 384;
    } else {
        pbd_sm__sincos(ang * 0.5, &sh, &ch);
        sh /= ang;
    }
    double dq[4] = {w[0] * sh, w[1] * sh, w[2] * sh, ch};
    pbd_sm__quat_mul_into(q, dq, 1);
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
   three half turns, which is within 120 degrees of the answer. Close to
   the answer each iteration takes the Newton step instead (above), so a
   warm start converges in one to three iterations to double precision
   where Mueller et al.'s step needs about 30; and where the Newton step
   applies at the start, its positive definite Hessian (pair sums of the
   eigenvalues of sym(R^T A) positive, so every pair of its diagonal
   entries too) says that no half turn gains, and the search is skipped.
   Returns 1 when converged (the last turn below 1e-7 after a Newton step,
   or below 1e-12), 0 when the iterations ran out. */
static PBD_HD int pbd_sm__extract_rotation(const double *A, double *q, int iterations) {
    double n0 = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    if (!(n0 > PBD_SM__QUAT_NORM_MIN) || !(n0 < PBD_SM__ROT_HUGE)) {
        q[0] = q[1] = q[2] = 0;
        q[3] = 1;
        n0 = 1;
    }
    if (n0 != 1) /* the warm start is usually unit already */
        for (int k = 0; k < 4; ++k) q[k] /= n0;
    double scale = 0;
    for (int k = 0; k < 9; ++k) {
        if (!(A[k] == A[k]) || fabs(A[k]) > PBD_SM__ROT_HUGE) return 1; /* NaN or huge: keep the warm start */
        if (fabs(A[k]) > scale) scale = fabs(A[k]);
    }
    if (!(scale > 0)) return 1;
    double inv = 1.0 / scale;
    if (iterations < 1) iterations = 1;
    if (iterations > 100) iterations = 100;
    /* warm start: Newton steps while they apply */
    int it = 0;
    for (; it < iterations; ++it) {
        double w[3];
        if (!pbd_sm__rotation_step(A, inv, q, w)) break;
        double ang = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
        if (!(ang > PBD_SM__TURN_DONE)) return 1;
        pbd_sm__rotation_turn(q, w, ang);
        if (ang < PBD_SM__NEWTON_DONE) return 1; /* quadratic convergence: what is left is of order ang^2 */
    }
    if (it == iterations) return 0;
    int converged = 0;
    for (int round = 0; round < 4; ++round) {
        double R[9], d[3];
        pbd_sm__quat_to_mat(q, R);
        for (int c = 0; c < 3; ++c) d[c] = (R[c] * A[c] + R[3 + c] * A[3 + c] + R[6 + c] * A[6 + c]) * inv;
        int axis = -1;
        double worst = -PBD_SM__HALF_TURN_GAIN;
        for (int k = 0; k < 3; ++k) {
            double pair = d[(k + 1) % 3] + d[(k + 2) % 3];
            if (pair < worst) {
                worst = pair;
                axis = k;
            }
        }
        if (axis >= 0) {
            double flip[4] = {0, 0, 0, 0};
            flip[axis] = 1; /* a half turn about the local axis */
            pbd_sm__quat_mul_into(q, flip, 0);
        } else if (round > 0) {
            return converged; /* no half turn gains: the maximum */
        }
        converged = 0;
        for (it = 0; it < iterations; ++it) {
            double w[3];
            int newton = pbd_sm__rotation_step(A, inv, q, w);
            double ang = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
            if (!(ang > PBD_SM__TURN_DONE)) {
                converged = 1;
                break;
            }
            pbd_sm__rotation_turn(q, w, ang);
            if (newton && ang < PBD_SM__NEWTON_DONE) {
                converged = 1;
                break;
            }
        }
    }
    return converged;
}

PBD_SM_DEF void pbd_sm_extract_rotation_d(const double *A, double *q, int iterations) {
    (void)pbd_sm__extract_rotation(A, q, iterations);
}

#if PBD_SM__SIMD
/* Four warm-started extractions at once: the Newton loop at the start of
   pbd_sm__extract_rotation, lane by lane the same operations in the same
   order (no FMA contraction), so each lane gets the same bits as the
   scalar routine. A lane leaves the batch, untouched, where the scalar
   routine would leave that loop other than converged (a warm start that is
   not unit, NaN/huge/zero A, no Newton step, a turn of 1e-3 rad or more
   that needs sin/cos, the iterations run out); the caller then runs the
   scalar routine on it, which repeats the same steps. Returns the mask of
   the lanes done (bit l: lane l converged, q[l] updated). */
static int pbd_sm__extract_rotation4(const double *const *A, double *const *q, int iterations) {
    typedef simde__m256d v4;
#define PBD_SM__V(e) simde_mm256_set1_pd(e)
#define PBD_SM__ADD simde_mm256_add_pd
#define PBD_SM__SUB simde_mm256_sub_pd
#define PBD_SM__MUL simde_mm256_mul_pd
    v4 qx = simde_mm256_set_pd(q[3][0], q[2][0], q[1][0], q[0][0]);
    v4 qy = simde_mm256_set_pd(q[3][1], q[2][1], q[1][1], q[0][1]);
    v4 qz = simde_mm256_set_pd(q[3][2], q[2][2], q[1][2], q[0][2]);
    v4 qw = simde_mm256_set_pd(q[3][3], q[2][3], q[1][3], q[0][3]);
    v4 a[9], one = PBD_SM__V(1.0), two = PBD_SM__V(2.0), zero = simde_mm256_setzero_pd();
    v4 absmask = simde_mm256_castsi256_pd(simde_mm256_set1_epi64x(0x7fffffffffffffffLL));
    v4 n2 = PBD_SM__ADD(PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(qx, qx), PBD_SM__MUL(qy, qy)), PBD_SM__MUL(qz, qz)),
                        PBD_SM__MUL(qw, qw));
    int live = simde_mm256_movemask_pd(simde_mm256_cmp_pd(simde_mm256_sqrt_pd(n2), one, SIMDE_CMP_EQ_OQ));
    v4 scale = zero;
    for (int k = 0; k < 9; ++k) {
        a[k] = simde_mm256_set_pd(A[3][k], A[2][k], A[1][k], A[0][k]);
        v4 m = simde_mm256_and_pd(a[k], absmask); /* NaN fails the test */
        live &= simde_mm256_movemask_pd(simde_mm256_cmp_pd(m, PBD_SM__V(PBD_SM__ROT_HUGE), SIMDE_CMP_LE_OQ));
        scale = simde_mm256_max_pd(m, scale);
    }
    live &= simde_mm256_movemask_pd(simde_mm256_cmp_pd(scale, zero, SIMDE_CMP_GT_OQ));
    v4 inv = simde_mm256_div_pd(one, scale);
    for (int k = 0; k < 9; ++k) a[k] = PBD_SM__MUL(a[k], inv);
    if (iterations < 1) iterations = 1;
    if (iterations > 100) iterations = 100;
    int done = 0;
    for (int it = 0; it < iterations && live; ++it) {
        /* R = R(q) (pbd_sm__quat_to_mat) */
        v4 xx = PBD_SM__MUL(qx, qx), yy = PBD_SM__MUL(qy, qy), zz = PBD_SM__MUL(qz, qz);
        v4 xy = PBD_SM__MUL(qx, qy), zw = PBD_SM__MUL(qz, qw), xz = PBD_SM__MUL(qx, qz), yw = PBD_SM__MUL(qy, qw);
        v4 yz = PBD_SM__MUL(qy, qz), xw = PBD_SM__MUL(qx, qw);
        v4 R[9] = {PBD_SM__SUB(one, PBD_SM__MUL(two, PBD_SM__ADD(yy, zz))),
                   PBD_SM__MUL(two, PBD_SM__SUB(xy, zw)),
                   PBD_SM__MUL(two, PBD_SM__ADD(xz, yw)),
                   PBD_SM__MUL(two, PBD_SM__ADD(xy, zw)),
                   PBD_SM__SUB(one, PBD_SM__MUL(two, PBD_SM__ADD(xx, zz))),
                   PBD_SM__MUL(two, PBD_SM__SUB(yz, xw)),
                   PBD_SM__MUL(two, PBD_SM__SUB(xz, yw)),
                   PBD_SM__MUL(two, PBD_SM__ADD(yz, xw)),
                   PBD_SM__SUB(one, PBD_SM__MUL(two, PBD_SM__ADD(xx, yy)))};
        /* g = sum r_c x a_c, B = A R^T (pbd_sm__rotation_step) */
        v4 g0 = zero, g1 = zero, g2 = zero, B[9];
        for (int e = 0; e < 9; ++e) B[e] = zero;
        for (int c = 0; c < 3; ++c) {
            v4 r0 = R[c], r1 = R[3 + c], r2 = R[6 + c], a0 = a[c], a1 = a[3 + c], a2 = a[6 + c];
            g0 = PBD_SM__ADD(g0, PBD_SM__SUB(PBD_SM__MUL(r1, a2), PBD_SM__MUL(r2, a1)));
            g1 = PBD_SM__ADD(g1, PBD_SM__SUB(PBD_SM__MUL(r2, a0), PBD_SM__MUL(r0, a2)));
            g2 = PBD_SM__ADD(g2, PBD_SM__SUB(PBD_SM__MUL(r0, a1), PBD_SM__MUL(r1, a0)));
            v4 av[3] = {a0, a1, a2}, rv[3] = {r0, r1, r2};
            for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) B[3 * i + j] = PBD_SM__ADD(B[3 * i + j], PBD_SM__MUL(av[i], rv[j]));
        }
        v4 tr = PBD_SM__ADD(PBD_SM__ADD(B[0], B[4]), B[8]);
        /* the Newton step (pbd_sm__rotation_newton) */
        v4 h00 = PBD_SM__SUB(tr, B[0]), h11 = PBD_SM__SUB(tr, B[4]), h22 = PBD_SM__SUB(tr, B[8]), mh = PBD_SM__V(-0.5);
        v4 h01 = PBD_SM__MUL(mh, PBD_SM__ADD(B[1], B[3])), h02 = PBD_SM__MUL(mh, PBD_SM__ADD(B[2], B[6]));
        v4 h12 = PBD_SM__MUL(mh, PBD_SM__ADD(B[5], B[7]));
        v4 c00 = PBD_SM__SUB(PBD_SM__MUL(h11, h22), PBD_SM__MUL(h12, h12));
        v4 c01 = PBD_SM__SUB(PBD_SM__MUL(h02, h12), PBD_SM__MUL(h01, h22));
        v4 c02 = PBD_SM__SUB(PBD_SM__MUL(h01, h12), PBD_SM__MUL(h02, h11));
        v4 m2 = PBD_SM__SUB(PBD_SM__MUL(h00, h11), PBD_SM__MUL(h01, h01));
        v4 det = PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(h00, c00), PBD_SM__MUL(h01, c01)), PBD_SM__MUL(h02, c02));
        v4 tiny = PBD_SM__MUL(PBD_SM__V(PBD_SM__NEWTON_PD_MARGIN), tr), tiny2 = PBD_SM__MUL(tiny, tiny);
        int ok = simde_mm256_movemask_pd(simde_mm256_cmp_pd(tr, zero, SIMDE_CMP_GT_OQ)) &
                 simde_mm256_movemask_pd(simde_mm256_cmp_pd(h00, tiny, SIMDE_CMP_GT_OQ)) &
                 simde_mm256_movemask_pd(simde_mm256_cmp_pd(m2, tiny2, SIMDE_CMP_GT_OQ)) &
                 simde_mm256_movemask_pd(simde_mm256_cmp_pd(det, PBD_SM__MUL(tiny2, tiny), SIMDE_CMP_GT_OQ));
        v4 c11 = PBD_SM__SUB(PBD_SM__MUL(h00, h22), PBD_SM__MUL(h02, h02));
        v4 c12 = PBD_SM__SUB(PBD_SM__MUL(h01, h02), PBD_SM__MUL(h00, h12));
        v4 id = simde_mm256_div_pd(one, det);
        v4 w0 =
            PBD_SM__MUL(PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(c00, g0), PBD_SM__MUL(c01, g1)), PBD_SM__MUL(c02, g2)), id);
        v4 w1 =
            PBD_SM__MUL(PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(c01, g0), PBD_SM__MUL(c11, g1)), PBD_SM__MUL(c12, g2)), id);
        v4 w2 =
            PBD_SM__MUL(PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(c02, g0), PBD_SM__MUL(c12, g1)), PBD_SM__MUL(m2, g2)), id);
        v4 ww = PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(w0, w0), PBD_SM__MUL(w1, w1)), PBD_SM__MUL(w2, w2));
        ok &= simde_mm256_movemask_pd(simde_mm256_cmp_pd(ww, PBD_SM__V(PBD_SM__NEWTON_STEP_MAX2), SIMDE_CMP_LT_OQ));
        live &= ok; /* no Newton step: the scalar routine goes on */
        v4 ang = simde_mm256_sqrt_pd(ww);
        int still = simde_mm256_movemask_pd(simde_mm256_cmp_pd(ang, PBD_SM__V(PBD_SM__TURN_DONE), SIMDE_CMP_GT_OQ));
        done |= live & ~still; /* converged without a turn */
        live &= still;
        live &= simde_mm256_movemask_pd(
            simde_mm256_cmp_pd(ang, PBD_SM__V(PBD_SM__TURN_SERIES_MAX), SIMDE_CMP_LT_OQ)); /* else sin/cos */
        if (!live) break;
        /* the turn (pbd_sm__rotation_turn, the small-angle series) */
        v4 a2 = PBD_SM__MUL(ang, ang);
        v4 sh = PBD_SM__SUB(PBD_SM__V(0.5), simde_mm256_div_pd(a2, PBD_SM__V(48.0)));
        v4 ch = PBD_SM__ADD(PBD_SM__SUB(one, simde_mm256_div_pd(a2, PBD_SM__V(8.0))),
                            simde_mm256_div_pd(PBD_SM__MUL(a2, a2), PBD_SM__V(384.0)));
        v4 l0 = PBD_SM__MUL(w0, sh), l1 = PBD_SM__MUL(w1, sh), l2 = PBD_SM__MUL(w2, sh), l3 = ch;
        v4 o0 = PBD_SM__SUB(PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(l3, qx), PBD_SM__MUL(l0, qw)), PBD_SM__MUL(l1, qz)),
                            PBD_SM__MUL(l2, qy));
        v4 o1 = PBD_SM__ADD(PBD_SM__ADD(PBD_SM__SUB(PBD_SM__MUL(l3, qy), PBD_SM__MUL(l0, qz)), PBD_SM__MUL(l1, qw)),
                            PBD_SM__MUL(l2, qx));
        v4 o2 = PBD_SM__ADD(PBD_SM__SUB(PBD_SM__ADD(PBD_SM__MUL(l3, qz), PBD_SM__MUL(l0, qy)), PBD_SM__MUL(l1, qx)),
                            PBD_SM__MUL(l2, qw));
        v4 o3 = PBD_SM__SUB(PBD_SM__SUB(PBD_SM__SUB(PBD_SM__MUL(l3, qw), PBD_SM__MUL(l0, qx)), PBD_SM__MUL(l1, qy)),
                            PBD_SM__MUL(l2, qz));
        v4 on = PBD_SM__ADD(PBD_SM__ADD(PBD_SM__ADD(PBD_SM__MUL(o0, o0), PBD_SM__MUL(o1, o1)), PBD_SM__MUL(o2, o2)),
                            PBD_SM__MUL(o3, o3));
        v4 n = simde_mm256_div_pd(one, simde_mm256_sqrt_pd(on));
        /* only the live lanes turn */
        v4 keep = simde_mm256_castsi256_pd(
            simde_mm256_set_epi64x((live & 8) ? -1 : 0, (live & 4) ? -1 : 0, (live & 2) ? -1 : 0, (live & 1) ? -1 : 0));
        qx = simde_mm256_blendv_pd(qx, PBD_SM__MUL(o0, n), keep);
        qy = simde_mm256_blendv_pd(qy, PBD_SM__MUL(o1, n), keep);
        qz = simde_mm256_blendv_pd(qz, PBD_SM__MUL(o2, n), keep);
        qw = simde_mm256_blendv_pd(qw, PBD_SM__MUL(o3, n), keep);
        int small = simde_mm256_movemask_pd(simde_mm256_cmp_pd(ang, PBD_SM__V(PBD_SM__NEWTON_DONE), SIMDE_CMP_LT_OQ));
        done |= live & small;
        live &= ~small;
    }
    double out[4][4];
    simde_mm256_storeu_pd(out[0], qx);
    simde_mm256_storeu_pd(out[1], qy);
    simde_mm256_storeu_pd(out[2], qz);
    simde_mm256_storeu_pd(out[3], qw);
    for (int l = 0; l < 4; ++l)
        if (done & (1 << l))
            for (int e = 0; e < 4; ++e) q[l][e] = out[e][l];
#undef PBD_SM__V
#undef PBD_SM__ADD
#undef PBD_SM__SUB
#undef PBD_SM__MUL
    return done;
}
#endif

PBD_SM_DEF void pbd_sm_extract_rotation(const float *A, float *q, int iterations) {
    double Ad[9], qd[4];
    for (int k = 0; k < 9; ++k) Ad[k] = A[k];
    for (int k = 0; k < 4; ++k) qd[k] = q[k];
    pbd_sm_extract_rotation_d(Ad, qd, iterations);
    for (int k = 0; k < 4; ++k) q[k] = (float)qd[k];
}

// ==== summation =============================================================

/* Row kernels on k doubles; the SIMD twins do the same operation per lane
   in the same order, so they give the same bits (PBD_SM__SIMD: see the
   rotation section). */

/* d = a + b */
static PBD_HD void pbd_sm__row_add(double *d, const double *a, const double *b, int k, int simd) {
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
static PBD_HD void pbd_sm__row_sub(double *d, const double *a, const double *b, int k, int simd) {
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
static PBD_HD void pbd_sm__row_acc_diff(double *d, const double *a, const double *b, int k, int simd) {
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
    void (*impl_destroy)(pbd_world *mem, void *impl);
    void (*sum)(pbd_sm_sum_plan *plan, const double *values, int k, double *sums);
    long long cost; /* row operations per sum, see pbd_sm_plan_cost */
    int threads, simd;
    pbd_world *mem; /* the allocator: the world of the body that made it, or NULL (PBD_SM_MALLOC) */
};

/* Validates CSR region lists: sizes, ranges, no duplicate within a region
   (checked with a per-particle stamp, O(total)). */
static pbd_result pbd_sm__check_regions(pbd_world *mem, int particle_count, int region_count, const int *start,
                                        const int *members) {
    if (!start) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "region_start is NULL");
    if (region_count > 0 && !members)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "region_particles is NULL while region_count is %d",
                              region_count);
    if (particle_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "particle_count %d must be >= 0", particle_count);
    if (region_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "region_count %d must be >= 0", region_count);
    if (start[0] != 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "region_start[0] is %d, must be 0", start[0]);
    for (int r = 0; r < region_count; ++r)
        if (start[r + 1] < start[r])
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                                  "region_start decreases: region_start[%d] = %d after region_start[%d] = %d", r + 1,
                                  start[r + 1], r, start[r]);
    int *stamp = (int *)pbd_sm__alloc_n(mem, (size_t)particle_count, sizeof(int));
    if (!stamp) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory checking the regions");
    for (int i = 0; i < particle_count; ++i) stamp[i] = -1;
    pbd_result res = PBD_OK;
    for (int r = 0; r < region_count && res == PBD_OK; ++r)
        for (int e = start[r]; e < start[r + 1]; ++e) {
            int i = members[e];
            if (i < 0 || i >= particle_count) {
                res = pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                     "region_particles[%d] = %d is not a particle (0..%d)", e, i, particle_count - 1);
                break;
            }
            if (stamp[i] == r) {
                res = pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "region %d lists particle %d twice", r, i);
                break;
            }
            stamp[i] = r;
        }
    pbd_sm__free(mem, stamp);
    return res;
}

/* out[o] = sum of the rows idx[start[o] .. start[o+1]) in list order, where
   a row index below `split` reads lo_rows and the others hi_rows[idx -
   split] (octree: particles, then virtual nodes). An orphaned `omp for`. */
static PBD_HD void pbd_sm__gather_one(int o, const int *start, const int *idx, const double *lo_rows, int split,
                                      const double *hi_rows, int k, double *out, int simd) {
    double *s = out + (size_t)o * k;
    int b = start[o], e = start[o + 1];
    if (b == e) {
        for (int j = 0; j < k; ++j) s[j] = 0;
        return;
    }
    int i0 = idx[b];
    const double *r0 = i0 < split ? lo_rows + (size_t)i0 * k : hi_rows + (size_t)(i0 - split) * k;
    memcpy(s, r0, sizeof(double) * (size_t)k);
    for (int t = b + 1; t < e; ++t) {
        int i = idx[t];
        const double *r = i < split ? lo_rows + (size_t)i * k : hi_rows + (size_t)(i - split) * k;
        pbd_sm__row_add(s, s, r, k, simd);
    }
}
static void pbd_sm__gather_sum(int count, const int *start, const int *idx, const double *lo_rows, int split,
                               const double *hi_rows, int k, double *out, int simd) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int o = 0; o < count; ++o) pbd_sm__gather_one(o, start, idx, lo_rows, split, hi_rows, k, out, simd);
}

static void pbd_sm__sum_naive(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__gather_sum(p->region_count, p->region_start, p->region_particles, values, p->particle_count, NULL, k, sums,
                       p->simd);
}

/* A plan holding a copy of the CSR lists, summed naively until a method
   replaces `sum`. */
static pbd_result pbd_sm__plan_from_lists(pbd_world *mem, int particle_count, int region_count, const int *start,
                                          const int *members, pbd_sm_sum_plan **out) {
    pbd_sm_sum_plan *p = (pbd_sm_sum_plan *)pbd_sm__alloc_n(mem, 1, sizeof *p);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory for a summation plan");
    memset(p, 0, sizeof *p);
    p->mem = mem;
    int total = start[region_count];
    p->region_start = (int *)pbd_sm__alloc_n(mem, (size_t)region_count + 1, sizeof(int));
    p->region_particles = (int *)pbd_sm__alloc_n(mem, (size_t)total, sizeof(int));
    if (!p->region_start || !p->region_particles) {
        pbd_sm_plan_destroy(p);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory for a summation plan");
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

/* pbd_sm_plan_naive with the memory of world mem (NULL: PBD_SM_MALLOC). */
static pbd_result pbd_sm__plan_naive(pbd_world *mem, int particle_count, int region_count, const int *region_start,
                                     const int *region_particles, pbd_sm_sum_plan **out) {
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_naive: out is NULL");
    pbd_result r = pbd_sm__check_regions(mem, particle_count, region_count, region_start, region_particles);
    if (r != PBD_OK) return r;
    return pbd_sm__plan_from_lists(mem, particle_count, region_count, region_start, region_particles, out);
}

PBD_SM_DEF pbd_result pbd_sm_plan_naive(int particle_count, int region_count, const int *region_start,
                                        const int *region_particles, pbd_sm_sum_plan **out) {
    return pbd_sm__plan_naive(NULL, particle_count, region_count, region_start, region_particles, out);
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

static void pbd_sm__scan_free(pbd_world *mem, pbd_sm__scan *s) {
    pbd_sm__free(mem, s->gather);
    pbd_sm__free(mem, s->seg_start);
    pbd_sm__free(mem, s->out_start);
    pbd_sm__free(mem, s->iv);
    memset(s, 0, sizeof *s);
}

static long long pbd_sm__scan_cost(const pbd_sm__scan *s) {
    long long ivs = s->out_start ? s->out_start[s->out_count] : s->out_count;
    return (long long)s->in_count + ivs;
}

/* The prefix rows P[0] = 0, P[e - a + 1] = P[e - a] + src row of input e
   (inputs a..b; the row gather[e], none where that is negative), column
   block by column block, so that the running sum stays in a register
   instead of being stored and reloaded for every row (row by row, the
   store-to-load latency would bound the loop). Each column is the same
   chain of additions either way, so the same bits. */
static PBD_HD void pbd_sm__prefix_line(double *P, const double *src, const int *gather, int a, int b, int k, int simd) {
    int j = 0;
    for (int c = 0; c < k; ++c) P[c] = 0;
#if PBD_SM__SIMD
    if (simd)
        for (; j + 4 <= k; j += 4) {
            simde__m256d acc = simde_mm256_setzero_pd();
            double *row = P + k + j;
            for (int e = a; e < b; ++e, row += k) {
                int i = gather ? gather[e] : e;
                if (i >= 0) acc = simde_mm256_add_pd(acc, simde_mm256_loadu_pd(src + (size_t)i * k + j));
                simde_mm256_storeu_pd(row, acc);
            }
        }
#else
    (void)simd;
#endif
    for (; j < k; ++j) {
        double acc = 0, *row = P + k + j;
        for (int e = a; e < b; ++e, row += k) {
            int i = gather ? gather[e] : e;
            if (i >= 0) acc += src[(size_t)i * k + j];
            *row = acc;
        }
    }
}

/* Segment g's prefix rows; output o from the prefix rows. */
static PBD_HD void pbd_sm__scan_segment(const pbd_sm__scan *s, const double *src, double *P, int k, int g, int simd) {
    int a = s->seg_start[g], b = s->seg_start[g + 1];
    pbd_sm__prefix_line(P + ((size_t)a + (size_t)g) * k, src, s->gather, a, b, k, simd);
}
static PBD_HD void pbd_sm__scan_output(const pbd_sm__scan *s, const double *P, double *dst, int k, int o, int simd) {
    double *d = dst + (size_t)o * k;
    int f = s->out_start ? s->out_start[o] : o, l = s->out_start ? s->out_start[o + 1] : o + 1;
    if (f == l) {
        for (int j = 0; j < k; ++j) d[j] = 0;
        return;
    }
    const int *iv = s->iv + 2 * (size_t)f;
    pbd_sm__row_sub(d, P + (size_t)iv[1] * k, P + (size_t)iv[0] * k, k, simd);
    for (int t = f + 1; t < l; ++t) {
        iv += 2;
        pbd_sm__row_acc_diff(d, P + (size_t)iv[1] * k, P + (size_t)iv[0] * k, k, simd);
    }
}
/* Runs inside a parallel region: prefix sums per segment, then outputs. */
static void pbd_sm__scan_run(const pbd_sm__scan *s, const double *src, double *P, double *dst, int k, int simd) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int g = 0; g < s->seg_count; ++g) pbd_sm__scan_segment(s, src, P, k, g, simd);
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int o = 0; o < s->out_count; ++o) pbd_sm__scan_output(s, P, dst, k, o, simd);
}

/* Segments of sorted keys: a segment is a run of equal key >> 21 (a line
   of the lattice: the two slower coordinates). seg_of[e] is the segment
   of input e. */
static pbd_result pbd_sm__line_segments(pbd_world *mem, const long long *keys, int n, pbd_sm__scan *s,
                                        int **seg_of_out) {
    int count = 0;
    for (int e = 0; e < n; ++e)
        if (e == 0 || (keys[e] >> 21) != (keys[e - 1] >> 21)) count++;
    s->seg_start = (int *)pbd_sm__alloc_n(mem, (size_t)count + 1, sizeof(int));
    int *seg_of = (int *)pbd_sm__alloc_n(mem, (size_t)n, sizeof(int));
    if (!s->seg_start || !seg_of) {
        pbd_sm__free(mem, seg_of);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice plan");
    }
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
typedef struct pbd_sm__cell_key {
    long long key;
    int particle;
} pbd_sm__cell_key;

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
   allocated with mem's allocator (pbd_sm__alloc_n). */
static pbd_result pbd_sm__lattice_lists(pbd_world *mem, int n, const int *cells, int w, int **start_out,
                                        int **members_out) {
    if (!cells && n > 0)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "cells is NULL while there are %d particles", n);
    if (n < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "particle count %d must be >= 0", n);
    if (w < 1 || w > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "region half-width %d must be in 1..64", w);
    for (int i = 0; i < 3 * n; ++i)
        if (cells[i] < -(1 << 20) + 64 || cells[i] > (1 << 20) - 64)
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                                  "cell coordinate cells[%d] = %d is outside the lattice's range [-1048512, 1048512]",
                                  i, cells[i]);
    pbd_sm__cell_key *keys = (pbd_sm__cell_key *)pbd_sm__alloc_n(mem, (size_t)n, sizeof *keys);
    int *start = (int *)pbd_sm__alloc_n(mem, (size_t)n + 1, sizeof(int));
    if (!keys || !start) {
        pbd_sm__free(mem, keys);
        pbd_sm__free(mem, start);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice regions");
    }
    for (int i = 0; i < n; ++i) {
        keys[i].key = pbd_sm__cell_code(cells[3 * i], cells[3 * i + 1], cells[3 * i + 2]);
        keys[i].particle = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, pbd_sm__cmp_cell_key);
    for (int i = 1; i < n; ++i)
        if (keys[i].key == keys[i - 1].key) {
            int a = keys[i - 1].particle, b = keys[i].particle;
            pbd_sm__free(mem, keys);
            pbd_sm__free(mem, start);
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                                  "particles %d and %d are in one lattice cell (%d, %d, %d)", a, b, cells[3 * b],
                                  cells[3 * b + 1], cells[3 * b + 2]);
        }
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
                        int j = pbd_sm__find_cell(
                            keys, n,
                            pbd_sm__cell_code(cells[3 * i] + dx, cells[3 * i + 1] + dy, cells[3 * i + 2] + dz));
                        if (j < 0) continue;
                        if (pass == 1) members[start[i] + cnt] = j;
                        cnt++;
                    }
            if (pass == 1) qsort(members + start[i], (size_t)cnt, sizeof(int), pbd_sm__cmp_int);
            total += cnt;
            if (total > INT_MAX) {
                pbd_sm__free(mem, keys);
                pbd_sm__free(mem, start);
                pbd_sm__free(mem, members);
                return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                                      "the lattice regions hold %ld particles in all, more than %d", total, INT_MAX);
            }
        }
        if (pass == 0) {
            start[n] = (int)total;
            members = (int *)pbd_sm__alloc_n(mem, (size_t)total, sizeof(int));
            if (!members) {
                pbd_sm__free(mem, keys);
                pbd_sm__free(mem, start);
                return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice regions");
            }
        }
    }
    pbd_sm__free(mem, keys);
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

static void pbd_sm__lattice_destroy(pbd_world *mem, void *impl) {
    pbd_sm__lattice *L = (pbd_sm__lattice *)impl;
    if (!L) return;
    for (int s = 0; s < 3; ++s) pbd_sm__scan_free(mem, &L->pass[s]);
    pbd_sm__free(mem, L->P);
    pbd_sm__free(mem, L->B);
    pbd_sm__free(mem, L);
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
static pbd_result pbd_sm__window_pass(pbd_world *mem, pbd_sm__scan *s, const long long *in, int n_in,
                                      const long long *cand, int n_cand, const int *perm, int w, long long *kept,
                                      int *n_out) {
    int *seg_of = NULL;
    pbd_result r = pbd_sm__line_segments(mem, in, n_in, s, &seg_of);
    if (r != PBD_OK) return r;
    if ((long long)n_in + s->seg_count > INT_MAX) {
        pbd_sm__free(mem, seg_of);
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW, "the lattice plan needs more than %d prefix rows", INT_MAX);
    } /* prefix rows */
    s->iv = (int *)pbd_sm__alloc_n(mem, 2 * (size_t)n_cand, sizeof(int));
    if (!s->iv) {
        pbd_sm__free(mem, seg_of);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice plan");
    }
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
    pbd_sm__free(mem, seg_of);
    s->out_count = o;
    *n_out = o;
    return PBD_OK;
}

/* Candidate keys c + d * axis_a (+ e * axis_b) over all particles, in the
   field order `order`, sorted and unique. */
static pbd_result pbd_sm__window_candidates(pbd_world *mem, int n, const int *cells, int w, const int *order,
                                            int two_axes, long long **out, int *count) {
    size_t side = 2 * (size_t)w + 1, total = (size_t)n * side * (two_axes ? side : 1);
    if (total > (size_t)INT_MAX)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW, "the lattice plan needs %zu candidate cells, more than %d",
                              total, INT_MAX);
    long long *keys = (long long *)pbd_sm__alloc_n(mem, total, sizeof(long long));
    if (!keys) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice plan");
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
    pbd_sm__lattice *L = (pbd_sm__lattice *)pbd_sm__alloc_n(p->mem, 1, sizeof *L);
    if (!L) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice plan");
    memset(L, 0, sizeof *L);
    p->impl = L;
    p->impl_destroy = pbd_sm__lattice_destroy;
    /* pass 0 inputs: particles sorted by (z, y, x), x-lines */
    pbd_sm__cell_key *ck = (pbd_sm__cell_key *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof *ck);
    long long *k0 = (long long *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof(long long));
    long long *bars = NULL, *plates = NULL, *cubes = NULL;
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    int nb = 0, np = 0, nc = 0;
    L->pass[0].gather = (int *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof(int));
    if (!ck || !k0 || !L->pass[0].gather) goto done;
    for (int i = 0; i < n; ++i) {
        ck[i].key = pbd_sm__cell_code(cells[3 * i + 2], cells[3 * i + 1], cells[3 * i]);
        ck[i].particle = i;
    }
    qsort(ck, (size_t)n, sizeof *ck, pbd_sm__cmp_cell_key);
    for (int e = 0; e < n; ++e) {
        k0[e] = ck[e].key;
        L->pass[0].gather[e] = ck[e].particle;
    }
    {
        /* bars at c + (0, b, a), keyed (z, x, y): pass 1 sums them along y */
        static const int bar_order[3] = {2, 0, 1}, bar_perm[3] = {0, 2, 1};
        r = pbd_sm__window_candidates(p->mem, n, cells, w, bar_order, 1, &bars, &nb);
        if (r != PBD_OK) goto done;
        r = pbd_sm__window_pass(p->mem, &L->pass[0], k0, n, bars, nb, bar_perm, w, bars, &nb);
        if (r != PBD_OK) goto done;
        /* plates at c + (0, 0, a), keyed (x, y, z): pass 2 sums them along z */
        static const int plate_order[3] = {0, 1, 2}, plate_perm[3] = {2, 0, 1};
        r = pbd_sm__window_candidates(p->mem, n, cells, w, plate_order, 0, &plates, &np);
        if (r != PBD_OK) goto done;
        r = pbd_sm__window_pass(p->mem, &L->pass[1], bars, nb, plates, np, plate_perm, w, plates, &np);
        if (r != PBD_OK) goto done;
        /* cubes at the particles, in particle order (never empty) */
        static const int cube_perm[3] = {0, 1, 2};
        r = PBD_ERROR_OUT_OF_MEMORY;
        cubes = (long long *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof(long long));
        if (!cubes) goto done;
        for (int i = 0; i < n; ++i) cubes[i] = pbd_sm__cell_code(cells[3 * i], cells[3 * i + 1], cells[3 * i + 2]);
        r = pbd_sm__window_pass(p->mem, &L->pass[2], plates, np, cubes, n, cube_perm, w, NULL, &nc);
        if (r != PBD_OK) goto done;
    }
    {
        size_t prow = 0, brow = (size_t)(nb > np ? nb : np);
        for (int s = 0; s < 3; ++s) {
            size_t rows = (size_t)L->pass[s].in_count + (size_t)L->pass[s].seg_count;
            if (rows > prow) prow = rows;
            p->cost += pbd_sm__scan_cost(&L->pass[s]);
        }
        L->P = (double *)pbd_sm__alloc_n(p->mem, prow * 64, sizeof(double));
        L->B = (double *)pbd_sm__alloc_n(p->mem, brow * 64, sizeof(double));
        r = L->P && L->B ? PBD_OK
                         : pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the lattice plan");
    }
done:
    pbd_sm__free(p->mem, ck);
    pbd_sm__free(p->mem, k0);
    pbd_sm__free(p->mem, bars);
    pbd_sm__free(p->mem, plates);
    pbd_sm__free(p->mem, cubes);
    return r == PBD_ERROR_OUT_OF_MEMORY ? pbd_world_fail(NULL, r, "out of memory building the lattice plan") : r;
}

/* pbd_sm_plan_lattice with the memory of world mem (NULL: PBD_SM_MALLOC). */
static pbd_result pbd_sm__plan_lattice(pbd_world *mem, int particle_count, const int *cells, int w,
                                       pbd_sm_sum_plan **out) {
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_lattice: out is NULL");
    if (!cells && particle_count > 0)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "cells is NULL while particle_count is %d", particle_count);
    if (particle_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_lattice: particle_count %d must be >= 0",
                              particle_count);
    if (w < 1 || w > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_plan_lattice: region half-width w %d must be in 1..64", w);
    for (long i = 0; i < 3 * (long)particle_count; ++i)
        if (cells[i] < -1000000 || cells[i] > 1000000)
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "cells[%ld] = %d is outside [-1000000, 1000000]", i,
                                  cells[i]);
    if ((size_t)particle_count * (2 * (size_t)w + 1) * (2 * (size_t)w + 1) > (size_t)INT_MAX)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "%d particles with regions of half-width %d need more than %d candidate bars",
                              particle_count, w, INT_MAX);
    int *start = NULL, *members = NULL;
    pbd_result r = pbd_sm__lattice_lists(mem, particle_count, cells, w, &start, &members);
    if (r != PBD_OK) return r;
    pbd_sm_sum_plan *p = NULL;
    r = pbd_sm__plan_from_lists(mem, particle_count, particle_count, start, members, &p);
    pbd_sm__free(mem, start);
    pbd_sm__free(mem, members);
    if (r != PBD_OK) return r;
    p->cost = 0;
    r = pbd_sm__lattice_build(p, cells, w);
    if (r != PBD_OK) {
        pbd_sm_plan_destroy(p);
        return r;
    }
    p->method = PBD_SM_SUM_LATTICE;
    p->sum = pbd_sm__sum_lattice;
    *out = p;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_lattice(int particle_count, const int *cells, int w, pbd_sm_sum_plan **out) {
    return pbd_sm__plan_lattice(NULL, particle_count, cells, w, out);
}

/* ---- octree: adaptive lattice (survey 4.3.2, Steinemann et al. 2008) ------
   Nodes 0..n-1 are the particles (leaves), nodes n.. the virtual nodes
   (every ancestor cell of a leaf, up to a level with at most 8 cells),
   sorted by level so that a bottom-up pass is one loop per level. */
typedef struct pbd_sm__octree {
    int n, m, levels;
    int *level_start;  /* levels + 1, over the virtual nodes */
    int *child_start;  /* m + 1 */
    int *child;        /* node indices */
    int *reg_start;    /* n + 1 */
    int *reg_node;     /* summation nodes of each region */
    double *node_sums; /* scratch, m * 64 */
    /* summed-volume tables, one per leaf level (tab_count 0: none, the
       node lists are summed); see pbd_sm__octree_tables */
    int tab_count;
    int *tab_dim;        /* 3 per table: cells along x y z */
    long long *tab_row;  /* tab_count + 1: first prefix row of each table */
    int *tab_leaf;       /* per cell of each table (x fastest): its leaf, or -1 */
    long long *tab_cell; /* tab_count + 1: first cell of each table in tab_leaf */
    int *corner_start;   /* n + 1, over groups of 8 prefix rows */
    int *corner;         /* per (region, table) 8 prefix rows: + - + - + - + - */
    double *tab;         /* scratch: tab_row[tab_count] rows of up to 64 */
} pbd_sm__octree;

static void pbd_sm__octree_destroy(pbd_world *mem, void *impl) {
    pbd_sm__octree *T = (pbd_sm__octree *)impl;
    if (!T) return;
    pbd_sm__free(mem, T->level_start);
    pbd_sm__free(mem, T->child_start);
    pbd_sm__free(mem, T->child);
    pbd_sm__free(mem, T->reg_start);
    pbd_sm__free(mem, T->reg_node);
    pbd_sm__free(mem, T->node_sums);
    pbd_sm__free(mem, T->tab_dim);
    pbd_sm__free(mem, T->tab_row);
    pbd_sm__free(mem, T->tab_leaf);
    pbd_sm__free(mem, T->tab_cell);
    pbd_sm__free(mem, T->corner_start);
    pbd_sm__free(mem, T->corner);
    pbd_sm__free(mem, T->tab);
    pbd_sm__free(mem, T);
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

/* The summed-volume tables: per table (leaf level) the exclusive prefix
   sums P[i][j][k] = sum of the level's leaves in cells [0,i) x [0,j) x
   [0,k) of its box, built by three passes of running sums (along x from
   the leaves' values, then along y, then along z; each element one fixed
   chain of additions, so any thread split gives the same bits); then every
   region adds, per table, the 8 corners of its box with alternating signs
   (Crow 1984 in 3D). Runs inside a parallel region. */
/* Table t's dimensions, row strides of j and k, and prefix rows. */
static PBD_HD double *pbd_sm__table(const pbd_sm__octree *T, int t, int k, int *n, long long *sx, long long *sy) {
    n[0] = T->tab_dim[3 * t];
    n[1] = T->tab_dim[3 * t + 1];
    n[2] = T->tab_dim[3 * t + 2];
    *sx = n[0] + 1;
    *sy = (long long)(n[1] + 1) * *sx;
    return T->tab + (size_t)T->tab_row[t] * k;
}
/* x: line L = (j, k) of table t; the faces j = 0 and k = 0 are zero */
static PBD_HD void pbd_sm__table_x(const pbd_sm__octree *T, int t, const double *values, int k, int L, int simd) {
    int n[3];
    long long sx, sy;
    double *P = pbd_sm__table(T, t, k, n, &sx, &sy);
    int j = L % (n[1] + 1), kk = L / (n[1] + 1);
    double *row = P + (size_t)((long long)kk * sy + (long long)j * sx) * k;
    if (j == 0 || kk == 0) {
        memset(row, 0, sizeof(double) * (size_t)k * (size_t)sx);
        return;
    }
    const int *leaf = T->tab_leaf + T->tab_cell[t];
    pbd_sm__prefix_line(row, values, leaf + ((long long)(kk - 1) * n[1] + (j - 1)) * n[0], 0, n[0], k, simd);
}
/* y: within k-plane kk (1..nz), row j += row j - 1; z (axis 2): within
   j-slab kk (1..ny), plane k += plane k - 1 */
static PBD_HD void pbd_sm__table_yz(const pbd_sm__octree *T, int t, int k, int axis, int slab, int simd) {
    int n[3];
    long long sx, sy;
    double *P = pbd_sm__table(T, t, k, n, &sx, &sy);
    long long step = axis == 1 ? sx : sy;
    for (int u = 1; u <= (axis == 1 ? n[1] : n[2]); ++u) {
        long long j = axis == 1 ? u : slab, kk = axis == 1 ? slab : u;
        double *row = P + (size_t)(kk * sy + j * sx + 1) * k;
        for (int i = 1; i <= n[0]; ++i, row += k) pbd_sm__row_add(row, row, row - (size_t)step * k, k, simd);
    }
}
/* Region r from its boxes' corners. */
static PBD_HD void pbd_sm__table_region(const pbd_sm__octree *T, double *sums, int k, int r, int simd) {
    double *d = sums + (size_t)r * k;
    int f = T->corner_start[r], l = T->corner_start[r + 1];
    if (f == l) {
        for (int e = 0; e < k; ++e) d[e] = 0;
        return;
    }
    for (int g = f; g < l; ++g) {
        const int *c = T->corner + 8 * (size_t)g;
        for (int q = 0; q < 4; ++q) {
            const double *a = T->tab + (size_t)c[2 * q] * k, *b = T->tab + (size_t)c[2 * q + 1] * k;
            if (g == f && q == 0) pbd_sm__row_sub(d, a, b, k, simd);
            else pbd_sm__row_acc_diff(d, a, b, k, simd);
        }
    }
}
static void pbd_sm__sum_octree_tables(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__octree *T = (pbd_sm__octree *)p->impl;
    int simd = p->simd;
    for (int t = 0; t < T->tab_count; ++t) {
        int ny = T->tab_dim[3 * t + 1], nz = T->tab_dim[3 * t + 2];
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int L = 0; L < (ny + 1) * (nz + 1); ++L) pbd_sm__table_x(T, t, values, k, L, simd);
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int kk = 1; kk <= nz; ++kk) pbd_sm__table_yz(T, t, k, 1, kk, simd);
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int j = 1; j <= ny; ++j) pbd_sm__table_yz(T, t, k, 2, j, simd);
    }
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int r = 0; r < T->n; ++r) pbd_sm__table_region(T, sums, k, r, simd);
}

/* An octree cell: level, then integer coordinates at that level. */
typedef struct pbd_sm__ocell {
    int l, x, y, z, id;
} pbd_sm__ocell;

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
    pbd_sm__ocell a = {level, pbd_sm__floor_shift(c.x, s), pbd_sm__floor_shift(c.y, s), pbd_sm__floor_shift(c.z, s),
                       -1};
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
typedef struct pbd_sm__ivec {
    int *a;
    size_t n, cap;
    int failed;
} pbd_sm__ivec;
static void pbd_sm__ivec_push(pbd_sm__ivec *v, int x) {
    if (v->failed) return;
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        int *a = (int *)pbd_sm__alloc_n(NULL, cap, sizeof(int));
        if (!a || v->n >= (size_t)INT_MAX) {
            pbd_sm__free(NULL, a);
            v->failed = 1;
            return;
        }
        if (v->n) memcpy(a, v->a, v->n * sizeof(int));
        pbd_sm__free(NULL, v->a);
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
    pbd_sm__ocell *leaf = (pbd_sm__ocell *)pbd_sm__alloc_n(NULL, (size_t)n, sizeof *leaf);
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
        if (pbd_sm__cmp_ocell(&leaf[i], &leaf[i - 1]) == 0) {
            r = pbd_world_fail(
                NULL, PBD_ERROR_INVALID_ARGUMENT, "particles %d and %d are in one octree cell (level %d at %d, %d, %d)",
                leaf[i - 1].id < leaf[i].id ? leaf[i - 1].id : leaf[i].id,
                leaf[i - 1].id < leaf[i].id ? leaf[i].id : leaf[i - 1].id, leaf[i].l, leaf[i].x, leaf[i].y, leaf[i].z);
            goto done;
        }
    /* the top level: the first (from the coarsest leaf up) with <= 8 cells */
    virt = (pbd_sm__ocell *)pbd_sm__alloc_n(NULL, (size_t)n * (PBD_SM_OCTREE_MAX_LEVEL + 8), sizeof *virt);
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
        if (pbd_sm__find_ocell(virt, m, leaf[i]) >= 0) {
            r = pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                               "the cell of particle %d (level %d at %d, %d, %d) holds the cell of another particle",
                               leaf[i].id, leaf[i].l, leaf[i].x, leaf[i].y, leaf[i].z);
            goto done;
        }
    T->n = n;
    T->m = m;
    T->levels = m ? virt[m - 1].l - virt[0].l + 1 : 0;
    T->level_start = (int *)pbd_sm__alloc_n(NULL, (size_t)T->levels + 1, sizeof(int));
    T->child_start = (int *)pbd_sm__alloc_n(NULL, (size_t)m + 1, sizeof(int));
    T->child = (int *)pbd_sm__alloc_n(NULL, (size_t)n + (size_t)m, sizeof(int));
    T->node_sums = (double *)pbd_sm__alloc_n(NULL, (size_t)m * 64, sizeof(double));
    parent = (int *)pbd_sm__alloc_n(NULL, (size_t)n + (size_t)m, sizeof(int));
    box = (long long *)pbd_sm__alloc_n(NULL, 6 * ((size_t)n + (size_t)m), sizeof(long long));
    if (!T->level_start || !T->child_start || !T->child || !T->node_sums || !parent || !box) goto done;
    for (int l = 0, v = 0; l <= T->levels; ++l) {
        while (v < m && virt[v].l < virt[0].l + l) v++;
        T->level_start[l] = v;
    }
    /* parents, then children lists in node order (leaves by particle index) */
    for (int j = 0; j < m + 1; ++j) T->child_start[j] = 0;
    for (int j = 0; j < n + m; ++j) {
        pbd_sm__ocell c;
        if (j < n) {
            pbd_sm__ocell t = {cells[4 * j + 3], cells[4 * j], cells[4 * j + 1], cells[4 * j + 2], j};
            c = t;
        } else c = virt[j - n];
        parent[j] = c.l < top ? pbd_sm__find_ocell(virt, m, pbd_sm__ancestor(c, c.l + 1)) : -1;
        if (parent[j] >= 0) T->child_start[parent[j] + 1]++;
        /* the box of a leaf is its centre, (2x + 1) 2^l half finest cells */
        if (j < n) {
            long long s = 1LL << c.l, cx = (2LL * c.x + 1) * s, cy = (2LL * c.y + 1) * s, cz = (2LL * c.z + 1) * s;
            long long *bx = box + 6 * (size_t)j;
            bx[0] = bx[3] = cx;
            bx[1] = bx[4] = cy;
            bx[2] = bx[5] = cz;
        } else {
            long long *bx = box + 6 * (size_t)j;
            bx[0] = bx[1] = bx[2] = LLONG_MAX;
            bx[3] = bx[4] = bx[5] = LLONG_MIN;
        }
    }
    for (int j = 0; j < m; ++j) T->child_start[j + 1] += T->child_start[j];
    {
        int *fill = stamp = (int *)pbd_sm__alloc_n(NULL, (size_t)m + 1, sizeof(int));
        if (!fill) goto done;
        memcpy(fill, T->child_start, sizeof(int) * (size_t)m);
        for (int j = 0; j < n + m; ++j)
            if (parent[j] >= 0) T->child[fill[parent[j]]++] = j;
        pbd_sm__free(NULL, stamp);
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
    stack = (int *)pbd_sm__alloc_n(NULL, (size_t)n + (size_t)m, sizeof(int));
    stamp = (int *)pbd_sm__alloc_n(NULL, (size_t)n + 1, sizeof(int));
    T->reg_start = (int *)pbd_sm__alloc_n(NULL, (size_t)n + 1, sizeof(int));
    start = (int *)pbd_sm__alloc_n(NULL, (size_t)n + 1, sizeof(int));
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
            if (dmin > W) continue; /* all descendants outside */
            if (dmax <= W) {        /* all inside: one summation node */
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
                if (j < n) {
                    pbd_sm__ivec_push(&members, j);
                    continue;
                }
                for (int t = T->child_start[j - n]; t < T->child_start[j - n + 1]; ++t) stack[q++] = T->child[t];
            }
        }
        if (nodes.failed || members.failed) {
            r = members.n >= (size_t)INT_MAX
                    ? pbd_world_fail(NULL, PBD_ERROR_OVERFLOW, "the octree's region lists hold more than %d entries",
                                     INT_MAX)
                    : pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the octree");
            goto done;
        }
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
    pbd_sm__free(NULL, leaf);
    pbd_sm__free(NULL, virt);
    pbd_sm__free(NULL, box);
    pbd_sm__free(NULL, parent);
    pbd_sm__free(NULL, stack);
    pbd_sm__free(NULL, stamp);
    pbd_sm__free(NULL, start);
    pbd_sm__free(NULL, nodes.a);
    pbd_sm__free(NULL, members.a);
    return r == PBD_ERROR_OUT_OF_MEMORY ? pbd_world_fail(NULL, r, "out of memory building the octree") : r;
}

/* floor(a / b) and ceil(a / b) for b > 0 */
static long long pbd_sm__floor_div(long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static long long pbd_sm__ceil_div(long long a, long long b) { return -pbd_sm__floor_div(-a, b); }

/* The corner groups of every region (fill = 0: only counted into
   corner_start): per table with a non-empty box, its 8 prefix rows. lo:
   the tables' lowest cells (3 per level), tl: the level of each table. */
static void pbd_sm__octree_corners(pbd_sm__octree *T, const int *cells, const int *widths, int w, const long long *lo,
                                   const int *tl, int nt, int fill) {
    int g = 0, n = T->n;
    for (int i = 0; i < n; ++i) {
        int li = cells[4 * i + 3];
        long long W = 2LL * (widths ? widths[i] : w) << li, c[3];
        for (int a = 0; a < 3; ++a) c[a] = (2LL * cells[4 * i + a] + 1) * (1LL << li);
        T->corner_start[i] = g;
        for (int t = 0; t < nt; ++t) {
            long long sL = 1LL << tl[t], A[3], B[3];
            const int *d = T->tab_dim + 3 * t;
            int empty = 0;
            for (int a = 0; a < 3; ++a) {
                /* cells x with c - W <= (2x + 1) 2^L <= c + W, as [A, B) of the table */
                long long xmin = pbd_sm__ceil_div(pbd_sm__ceil_div(c[a] - W, sL) - 1, 2);
                long long xmax = pbd_sm__floor_div(pbd_sm__floor_div(c[a] + W, sL) - 1, 2);
                long long b0 = lo[3 * tl[t] + a];
                A[a] = xmin - b0 < 0 ? 0 : (xmin - b0 > d[a] ? d[a] : xmin - b0);
                B[a] = xmax + 1 - b0 < 0 ? 0 : (xmax + 1 - b0 > d[a] ? d[a] : xmax + 1 - b0);
                if (A[a] >= B[a]) empty = 1;
            }
            if (empty) continue;
            if (!fill) {
                g++;
                continue;
            }
            long long sx = d[0] + 1, sy = (long long)(d[1] + 1) * sx, base = T->tab_row[t];
#define PBD_SM__ROW(X, Y, Z) (int)(base + (Z)*sy + (Y)*sx + (X))
            int *o = T->corner + 8 * (size_t)g++;
            o[0] = PBD_SM__ROW(B[0], B[1], B[2]);
            o[1] = PBD_SM__ROW(A[0], B[1], B[2]);
            o[2] = PBD_SM__ROW(A[0], A[1], B[2]);
            o[3] = PBD_SM__ROW(B[0], A[1], B[2]);
            o[4] = PBD_SM__ROW(A[0], B[1], A[2]);
            o[5] = PBD_SM__ROW(B[0], B[1], A[2]);
            o[6] = PBD_SM__ROW(B[0], A[1], A[2]);
            o[7] = PBD_SM__ROW(A[0], A[1], A[2]);
#undef PBD_SM__ROW
        }
    }
    T->corner_start[n] = g;
}

/* O(1) region sums for the octree: a summed-volume table (Crow 1984; the
   summed-area tables that survey 4.3.1 names as the idea of FastLSM) over
   the lattice of each level that holds leaves. A region is the box of
   half-width W = 2 w 2^l (half finest cells) around its leaf's centre, and
   its members at level L are the level-L leaves whose centres (2x+1) 2^L
   lie in the box: a box of level-L cells, summed from 8 table entries. So
   a region costs 8 lookups per leaf level whatever its width, where the
   summation nodes of Steinemann et al. (survey 4.3.2: the nodes wholly
   inside, refined along the region's boundary) grow with the boundary
   (w^2 on a uniform lattice). The tables play the part of the virtual
   nodes: an entry is the sum of a box of cells, a "virtual node" for every
   corner box, and the same membership (leaf centres in the box) is summed.
   Dense tables cost the volume of each level's bounding box, so they are
   used when all of them together hold at most 2 n + 32768 entries (a
   solid or mildly adaptive lattice); a sparse octree (leaves far apart)
   keeps the summation nodes. Returns OK with or without tables. */
static pbd_result pbd_sm__octree_tables(pbd_sm__octree *T, const int *cells, const int *widths, int w) {
    int n = T->n, lev[PBD_SM_OCTREE_MAX_LEVEL + 1], nt = 0;
    long long lo[3 * (PBD_SM_OCTREE_MAX_LEVEL + 1)], hi[3 * (PBD_SM_OCTREE_MAX_LEVEL + 1)];
    for (int l = 0; l <= PBD_SM_OCTREE_MAX_LEVEL; ++l) lev[l] = -1;
    for (int i = 0; i < n; ++i) {
        int l = cells[4 * i + 3];
        if (lev[l] < 0) {
            lev[l] = 0; /* present */
            for (int a = 0; a < 3; ++a) {
                lo[3 * l + a] = cells[4 * i + a];
                hi[3 * l + a] = cells[4 * i + a];
            }
        }
        for (int a = 0; a < 3; ++a) {
            if (cells[4 * i + a] < lo[3 * l + a]) lo[3 * l + a] = cells[4 * i + a];
            if (cells[4 * i + a] > hi[3 * l + a]) hi[3 * l + a] = cells[4 * i + a];
        }
    }
    long long rows = 0, ncell = 0;
    for (int l = 0; l <= PBD_SM_OCTREE_MAX_LEVEL; ++l) {
        if (lev[l] < 0) continue;
        lev[l] = nt++;
        long long d[3];
        for (int a = 0; a < 3; ++a) d[a] = hi[3 * l + a] - lo[3 * l + a] + 1;
        if ((double)(d[0] + 1) * (double)(d[1] + 1) * (double)(d[2] + 1) > 1e12) return PBD_OK;
        rows += (d[0] + 1) * (d[1] + 1) * (d[2] + 1);
        ncell += d[0] * d[1] * d[2];
        if (rows > 2LL * n + 32768) return PBD_OK; /* sparse: summation nodes */
    }
    if (nt == 0) return PBD_OK;
    T->tab_dim = (int *)pbd_sm__alloc_n(NULL, 3 * (size_t)nt, sizeof(int));
    T->tab_row = (long long *)pbd_sm__alloc_n(NULL, (size_t)nt + 1, sizeof(long long));
    T->tab_cell = (long long *)pbd_sm__alloc_n(NULL, (size_t)nt + 1, sizeof(long long));
    T->tab_leaf = (int *)pbd_sm__alloc_n(NULL, (size_t)ncell, sizeof(int));
    T->tab = (double *)pbd_sm__alloc_n(NULL, (size_t)rows * 64, sizeof(double));
    T->corner_start = (int *)pbd_sm__alloc_n(NULL, (size_t)n + 1, sizeof(int));
    if (!T->tab_dim || !T->tab_row || !T->tab_cell || !T->tab_leaf || !T->tab || !T->corner_start)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the octree");
    int tl[PBD_SM_OCTREE_MAX_LEVEL + 1]; /* the level of each table */
    T->tab_row[0] = T->tab_cell[0] = 0;
    for (int l = 0; l <= PBD_SM_OCTREE_MAX_LEVEL; ++l) {
        int t = lev[l];
        if (t < 0) continue;
        tl[t] = l;
        for (int a = 0; a < 3; ++a) T->tab_dim[3 * t + a] = (int)(hi[3 * l + a] - lo[3 * l + a] + 1);
        const int *d = T->tab_dim + 3 * t;
        T->tab_row[t + 1] = T->tab_row[t] + (long long)(d[0] + 1) * (d[1] + 1) * (d[2] + 1);
        T->tab_cell[t + 1] = T->tab_cell[t] + (long long)d[0] * d[1] * d[2];
    }
    for (long long c = 0; c < ncell; ++c) T->tab_leaf[c] = -1;
    for (int i = 0; i < n; ++i) {
        int l = cells[4 * i + 3], t = lev[l];
        const int *d = T->tab_dim + 3 * t;
        long long u[3];
        for (int a = 0; a < 3; ++a) u[a] = cells[4 * i + a] - lo[3 * l + a];
        T->tab_leaf[T->tab_cell[t] + (u[2] * d[1] + u[1]) * d[0] + u[0]] = i;
    }
    /* two passes over the regions: count the corner groups, then fill them */
    pbd_sm__octree_corners(T, cells, widths, w, lo, tl, nt, 0);
    T->corner = (int *)pbd_sm__alloc_n(NULL, 8 * (size_t)T->corner_start[n], sizeof(int));
    if (!T->corner) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the octree");
    pbd_sm__octree_corners(T, cells, widths, w, lo, tl, nt, 1);
    T->tab_count = nt;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_octree(int particle_count, const int *cells, const int *widths, int w,
                                         pbd_sm_sum_plan **out) {
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_octree: out is NULL");
    if (particle_count > 0 && !cells)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_plan_octree: cells is NULL while particle_count is %d", particle_count);
    if (particle_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_octree: particle_count %d < 0",
                              particle_count);
    if (!widths && (w < 1 || w > 64))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_plan_octree: region half-width w %d outside 1..64 (and no widths)", w);
    if (particle_count > INT_MAX / 32)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_sm_plan_octree: particle_count %d is too large (at most %d)", particle_count,
                              INT_MAX / 32);
    for (int i = 0; i < particle_count; ++i) {
        int l = cells[4 * i + 3];
        if (l < 0 || l > PBD_SM_OCTREE_MAX_LEVEL)
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                                  "pbd_sm_plan_octree: particle %d has level %d, outside 0..%d", i, l,
                                  PBD_SM_OCTREE_MAX_LEVEL);
        if (widths && (widths[i] < 1 || widths[i] > 64))
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_octree: widths[%d] = %d outside 1..64",
                                  i, widths[i]);
        for (int a = 0; a < 3; ++a) {
            long long lo = (long long)cells[4 * i + a] * (1LL << l), hi = lo + (1LL << l) - 1;
            if (lo < -1000000 || hi > 1000000)
                return pbd_world_fail(
                    NULL, PBD_ERROR_OVERFLOW,
                    "pbd_sm_plan_octree: particle %d's cell spans finest cells %lld..%lld, outside [-1000000, 1000000]",
                    i, lo, hi);
        }
    }
    pbd_sm__octree *T = (pbd_sm__octree *)pbd_sm__alloc_n(NULL, 1, sizeof *T);
    if (!T) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_plan_octree: out of memory");
    memset(T, 0, sizeof *T);
    int *start = NULL, *members = NULL;
    pbd_result r = pbd_sm__octree_build(particle_count, cells, widths, w, T, &start, &members);
    if (r == PBD_OK) r = pbd_sm__octree_tables(T, cells, widths, w);
    pbd_sm_sum_plan *p = NULL;
    if (r == PBD_OK) r = pbd_sm__plan_from_lists(NULL, particle_count, particle_count, start, members, &p);
    pbd_sm__free(NULL, start);
    pbd_sm__free(NULL, members);
    if (r != PBD_OK) {
        pbd_sm__octree_destroy(NULL, T);
        return r;
    }
    p->impl = T;
    p->impl_destroy = pbd_sm__octree_destroy;
    p->method = PBD_SM_SUM_OCTREE;
    p->sum = pbd_sm__sum_octree;
    p->cost = (long long)T->reg_start[particle_count] + (T->m ? T->child_start[T->m] : 0);
    if (T->tab_count > 0) { /* three running sums per table row, 7 additions per corner group */
        p->sum = pbd_sm__sum_octree_tables;
        p->cost = 3 * T->tab_row[T->tab_count] + 7LL * T->corner_start[particle_count];
    }
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

static void pbd_sm__paths_destroy(pbd_world *mem, void *impl) {
    pbd_sm__paths *Q = (pbd_sm__paths *)impl;
    if (!Q) return;
    pbd_sm__scan_free(mem, &Q->scan);
    pbd_sm__free(mem, Q->P);
    pbd_sm__free(mem, Q);
}

static void pbd_sm__sum_paths(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    pbd_sm__paths *Q = (pbd_sm__paths *)p->impl;
    pbd_sm__scan_run(&Q->scan, values, Q->P, sums, k, p->simd);
}

/* Checks the mesh and builds the vertex adjacency (CSR, neighbours in
   increasing order). */
static pbd_result pbd_sm__mesh_adjacency(int nv, const float *x, int nt, const int *tri, int **adj_start, int **adj) {
    for (long i = 0; i < 3 * (long)nv; ++i)
        if (!pbd__finite_bits(x[i]) || fabs((double)x[i]) > PBD_SM__COORD_MAX)
            return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                                  "pbd_sm_plan_paths: positions[%ld] = %g is not finite or beyond 1e30", i,
                                  (double)x[i]);
    for (long t = 0; t < 3 * (long)nt; ++t)
        if (tri[t] < 0 || tri[t] >= nv)
            return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_plan_paths: triangle %ld names vertex %d, outside 0..%d", t / 3, tri[t],
                                  nv - 1);
    for (int t = 0; t < nt; ++t) {
        const int *v = tri + 3 * t;
        if (v[0] == v[1])
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_sm_plan_paths: triangle %d repeats vertex %d", t,
                                  v[0]);
        if (v[1] == v[2])
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_sm_plan_paths: triangle %d repeats vertex %d", t,
                                  v[1]);
        if (v[0] == v[2])
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_sm_plan_paths: triangle %d repeats vertex %d", t,
                                  v[0]);
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
        if (!(cc > PBD_SM__MESH_SIN2_MIN * ee) || !(ee > 0))
            return pbd_world_fail(
                NULL, PBD_ERROR_DEGENERATE,
                "pbd_sm_plan_paths: triangle %d (vertices %d, %d, %d) is degenerate: zero area or a zero angle", t,
                v[0], v[1], v[2]);
    }
    if ((size_t)nt * 3 > (size_t)INT_MAX / 2)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_sm_plan_paths: triangle_count %d is too large (at most %d)", nt, INT_MAX / 6);
    /* a triangle may not repeat (pbd_find_repeated_element); undirected
       edges as keys a * nv + b (a < b): sorted, an edge may be in at most two
       triangles */
    long long *e = (long long *)pbd_sm__alloc_n(NULL, 3 * (size_t)nt, sizeof(long long));
    int *count = (int *)pbd_sm__alloc_n(NULL, (size_t)nv + 1, sizeof(int));
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    int *as = NULL, *aa = NULL;
    if (!e || !count) goto done;
    {
        int t0 = 0, t1 = 0, twice = pbd_find_repeated_element(NULL, tri, nt, 3, &t0, &t1);
        if (twice < 0) goto done;
        if (twice) {
            r = pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                               "mesh: a triangle appears twice (vertices %d, %d, %d in triangles %d and %d)",
                               tri[3 * t0], tri[3 * t0 + 1], tri[3 * t0 + 2], t0, t1);
            goto done;
        }
    }
    for (int t = 0; t < nt; ++t)
        for (int a = 0; a < 3; ++a) {
            int p = tri[3 * t + a], q = tri[3 * t + (a + 1) % 3];
            e[3 * t + a] = p < q ? (long long)p * nv + q : (long long)q * nv + p;
        }
    qsort(e, 3 * (size_t)nt, sizeof *e, pbd_sm__cmp_ll);
    r = PBD_ERROR_INVALID_ARGUMENT;
    for (size_t i = 2; i < 3 * (size_t)nt; ++i)
        if (e[i] == e[i - 2]) {
            pbd_world_fail(NULL, r, "mesh: three triangles share edge (%lld, %lld)", e[i] / nv, e[i] % nv);
            goto done;
        }
    {
        int ne = pbd_sm__sort_unique_ll(e, 3 * nt);
        memset(count, 0, sizeof(int) * ((size_t)nv + 1));
        for (int i = 0; i < ne; ++i) {
            count[e[i] / nv + 1]++;
            count[e[i] % nv + 1]++;
        }
        for (int v = 0; v < nv; ++v) count[v + 1] += count[v];
        r = PBD_ERROR_OUT_OF_MEMORY;
        as = (int *)pbd_sm__alloc_n(NULL, (size_t)nv + 1, sizeof(int));
        aa = (int *)pbd_sm__alloc_n(NULL, 2 * (size_t)ne, sizeof(int));
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
    pbd_sm__free(NULL, e);
    pbd_sm__free(NULL, count);
    pbd_sm__free(NULL, as);
    pbd_sm__free(NULL, aa);
    return r == PBD_ERROR_OUT_OF_MEMORY ? pbd_world_fail(NULL, r, "pbd_sm_plan_paths: out of memory") : r;
}

/* Breadth-first search from v to graph distance `depth` over CSR
   adjacency (start, adj): the ring's vertices land in queue[0 .. return).
   stamp[] (initially -1, kept between calls) marks visits per source. */
static int pbd_sm__ring(int v, int depth, const int *start, const int *adj, int *queue, int *stamp, int *dist) {
    int head = 0, tail = 0;
    queue[tail++] = v;
    stamp[v] = v;
    dist[v] = 0;
    while (head < tail) {
        int u = queue[head++];
        if (dist[u] == depth) continue;
        for (int e = start[u]; e < start[u + 1]; ++e) {
            int x = adj[e];
            if (stamp[x] == v) continue;
            stamp[x] = v;
            dist[x] = dist[u] + 1;
            queue[tail++] = x;
        }
    }
    return tail;
}

/* The w-ring of every vertex by breadth-first search, members sorted. */
static pbd_result pbd_sm__mesh_rings(int nv, const int *as, const int *aa, int w, int **start_out, int **members_out) {
    int *start = (int *)pbd_sm__alloc_n(NULL, (size_t)nv + 1, sizeof(int));
    int *dist = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    int *stamp = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    int *queue = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    pbd_sm__ivec members = {NULL, 0, 0, 0};
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    if (!start || !dist || !stamp || !queue) goto done;
    for (int v = 0; v < nv; ++v) stamp[v] = -1;
    for (int v = 0; v < nv; ++v) {
        int tail = pbd_sm__ring(v, w, as, aa, queue, stamp, dist);
        start[v] = (int)members.n;
        for (int t = 0; t < tail; ++t) pbd_sm__ivec_push(&members, queue[t]);
        if (members.failed) {
            r = members.n >= (size_t)INT_MAX
                    ? pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                                     "pbd_sm_plan_paths: the regions hold more than %d entries", INT_MAX)
                    : pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_plan_paths: out of memory");
            goto done;
        }
        qsort(members.a + start[v], (size_t)tail, sizeof(int), pbd_sm__cmp_int);
    }
    start[nv] = (int)members.n;
    *start_out = start;
    *members_out = members.a;
    start = NULL;
    members.a = NULL;
    r = PBD_OK;
done:
    pbd_sm__free(NULL, start);
    pbd_sm__free(NULL, dist);
    pbd_sm__free(NULL, stamp);
    pbd_sm__free(NULL, queue);
    pbd_sm__free(NULL, members.a);
    return r == PBD_ERROR_OUT_OF_MEMORY ? pbd_world_fail(NULL, r, "pbd_sm_plan_paths: out of memory") : r;
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
    for (int v = 0; v < nv; ++v) {
        on_path[v] = 0;
        taken_nbrs[v] = 0;
    }
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
    pbd_sm__paths *Q = (pbd_sm__paths *)pbd_sm__alloc_n(p->mem, 1, sizeof *Q);
    if (!Q) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_plan_paths: out of memory");
    memset(Q, 0, sizeof *Q);
    p->impl = Q;
    p->impl_destroy = pbd_sm__paths_destroy;
    pbd_sm__scan *s = &Q->scan;
    int *pos = (int *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof(int)); /* position in path order */
    int *seg = (int *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof(int)); /* path of each vertex */
    int *tmp = (int *)pbd_sm__alloc_n(p->mem, (size_t)n + 1, sizeof(int));
    pbd_sm__ivec iv = {NULL, 0, 0, 0};
    pbd_result r = PBD_ERROR_OUT_OF_MEMORY;
    s->gather = (int *)pbd_sm__alloc_n(p->mem, (size_t)n, sizeof(int));
    s->seg_start = (int *)pbd_sm__alloc_n(p->mem, (size_t)n + 1, sizeof(int));
    s->out_start = (int *)pbd_sm__alloc_n(p->mem, (size_t)n + 1, sizeof(int));
    if (!pos || !seg || !tmp || !s->gather || !s->seg_start || !s->out_start) goto done;
    pbd_sm__mesh_paths(n, x, as, aa, max_len, s->gather, s->seg_start, &s->seg_count, pos, seg);
    for (int g = 0; g < s->seg_count; ++g)
        for (int e = s->seg_start[g]; e < s->seg_start[g + 1]; ++e) {
            pos[s->gather[e]] = e;
            seg[s->gather[e]] = g;
        }
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
            pbd_sm__ivec_push(&iv, tmp[t] + g);         /* prefix row before the run */
            pbd_sm__ivec_push(&iv, tmp[u - 1] + 1 + g); /* prefix row after it */
            t = u;
        }
        if (iv.failed) goto done;
    }
    s->out_start[n] = (int)(iv.n / 2);
    s->iv = iv.a;
    iv.a = NULL;
    Q->P = (double *)pbd_sm__alloc_n(p->mem, ((size_t)n + (size_t)s->seg_count) * 64, sizeof(double));
    if (!Q->P) goto done;
    p->cost = pbd_sm__scan_cost(s);
    r = PBD_OK;
done:
    pbd_sm__free(p->mem, pos);
    pbd_sm__free(p->mem, seg);
    pbd_sm__free(p->mem, tmp);
    pbd_sm__free(p->mem, iv.a);
    return r == PBD_ERROR_OUT_OF_MEMORY ? pbd_world_fail(NULL, r, "pbd_sm_plan_paths: out of memory") : r;
}

PBD_SM_DEF pbd_result pbd_sm_plan_paths(int vertex_count, const float *positions, int triangle_count,
                                        const int *triangles, int w, int max_path_length, pbd_sm_sum_plan **out) {
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_paths: out is NULL");
    if (vertex_count > 0 && !positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_plan_paths: positions is NULL while vertex_count is %d", vertex_count);
    if (triangle_count > 0 && !triangles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_plan_paths: triangles is NULL while triangle_count is %d", triangle_count);
    if (vertex_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_paths: vertex_count %d must be >= 0",
                              vertex_count);
    if (triangle_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_paths: triangle_count %d must be >= 0",
                              triangle_count);
    if (w < 1 || w > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_plan_paths: region half-width w %d must be in 1..64", w);
    if (max_path_length < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_paths: max_path_length %d must be >= 0",
                              max_path_length);
    if (vertex_count > INT_MAX / 2)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW, "pbd_sm_plan_paths: vertex_count %d is too large (at most %d)",
                              vertex_count, INT_MAX / 2);
    if (max_path_length == 0) max_path_length = 512; /* survey 4.7: paths of at most 512 */
    int *as = NULL, *aa = NULL, *start = NULL, *members = NULL;
    pbd_sm_sum_plan *p = NULL;
    pbd_result r = pbd_sm__mesh_adjacency(vertex_count, positions, triangle_count, triangles, &as, &aa);
    if (r == PBD_OK) r = pbd_sm__mesh_rings(vertex_count, as, aa, w, &start, &members);
    if (r == PBD_OK) r = pbd_sm__plan_from_lists(NULL, vertex_count, vertex_count, start, members, &p);
    if (r == PBD_OK) {
        r = pbd_sm__paths_build(p, positions, as, aa, max_path_length);
        if (r != PBD_OK) {
            pbd_sm_plan_destroy(p);
            p = NULL;
        }
    }
    pbd_sm__free(NULL, as);
    pbd_sm__free(NULL, aa);
    pbd_sm__free(NULL, start);
    pbd_sm__free(NULL, members);
    if (r != PBD_OK) return r;
    p->method = PBD_SM_SUM_PATHS;
    p->sum = pbd_sm__sum_paths;
    *out = p;
    return PBD_OK;
}

PBD_SM_DEF void pbd_sm_plan_destroy(pbd_sm_sum_plan *p) {
    if (!p) return;
    if (p->impl_destroy) p->impl_destroy(p->mem, p->impl);
    pbd_sm__free(p->mem, p->region_start);
    pbd_sm__free(p->mem, p->region_particles);
    pbd_sm__free(p->mem, p);
}

PBD_SM_DEF pbd_sm_summation pbd_sm_plan_method(const pbd_sm_sum_plan *p) { return p ? p->method : PBD_SM_SUM_NAIVE; }
PBD_SM_DEF int pbd_sm_plan_particle_count(const pbd_sm_sum_plan *p) { return p ? p->particle_count : 0; }
PBD_SM_DEF int pbd_sm_plan_region_count(const pbd_sm_sum_plan *p) { return p ? p->region_count : 0; }
PBD_SM_DEF long long pbd_sm_plan_cost(const pbd_sm_sum_plan *p) { return p ? p->cost : 0; }

PBD_SM_DEF pbd_result pbd_sm_plan_region(const pbd_sm_sum_plan *p, int r, int *particles, int max, int *count) {
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_region: p is NULL");
    if (!count) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_region: count is NULL");
    if (max > 0 && !particles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_region: particles is NULL while max > 0");
    if (r < 0 || r >= p->region_count)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_plan_region: region %d outside 0..%d", r,
                              p->region_count - 1);
    if (max < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_region: max %d < 0", max);
    int b = p->region_start[r], n = p->region_start[r + 1] - b;
    for (int e = 0; e < n && e < max; ++e) particles[e] = p->region_particles[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF int pbd_sm_plan_path_count(const pbd_sm_sum_plan *p) {
    return p && p->method == PBD_SM_SUM_PATHS ? ((const pbd_sm__paths *)p->impl)->scan.seg_count : 0;
}

PBD_SM_DEF pbd_result pbd_sm_plan_path(const pbd_sm_sum_plan *p, int path, int *vertices, int max, int *count) {
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_path: p is NULL");
    if (!count) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_path: count is NULL");
    if (max > 0 && !vertices)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_path: vertices is NULL while max > 0");
    if (p->method != PBD_SM_SUM_PATHS)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_plan_path: the plan is not a paths plan (pbd_sm_plan_paths)");
    if (max < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_path: max %d < 0", max);
    const pbd_sm__scan *s = &((const pbd_sm__paths *)p->impl)->scan;
    if (path < 0 || path >= s->seg_count)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_plan_path: path %d outside 0..%d", path,
                              s->seg_count - 1);
    int b = s->seg_start[path], n = s->seg_start[path + 1] - b;
    for (int e = 0; e < n && e < max; ++e) vertices[e] = s->gather[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_set_threads(pbd_sm_sum_plan *p, int threads) {
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_set_threads: p is NULL");
    if (threads < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_set_threads: threads %d < 0", threads);
    p->threads = threads;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_set_simd(pbd_sm_sum_plan *p, int on) {
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_set_simd: p is NULL");
    if (on != 0 && on != 1) /* a switch (pbd.h CONVENTIONS): 2 is no "on" */
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_set_simd: on %d must be 0 or 1", on);
    p->simd = on;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_plan_sum(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_sum: p is NULL");
    if (!sums) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_sum: sums is NULL");
    if (p->particle_count > 0 && !values)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_plan_sum: values is NULL while the plan has %d particles", p->particle_count);
    if (k < 1 || k > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_sum: k %d outside 1..64", k);
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
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_sum_team: p is NULL");
    if (!sums) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_sum_team: sums is NULL");
    if (p->particle_count > 0 && !values)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_plan_sum_team: values is NULL while the plan has %d particles",
                              p->particle_count);
    if (k < 1 || k > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_sum_team: k %d outside 1..64", k);
    p->sum(p, values, k, sums);
    return PBD_OK;
}

// ==== shape matching ========================================================

#ifndef PBD_SM_PARALLEL_MIN
#define PBD_SM_PARALLEL_MIN 32768
#endif

/* --- small dense matrices (row-major, double) ------------------------------- */

static PBD_HD void pbd_sm__mx_mul3(const double *A, const double *B, double *C) { /* C = A B */
    double T[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) T[3 * i + j] = A[3 * i] * B[j] + A[3 * i + 1] * B[3 + j] + A[3 * i + 2] * B[6 + j];
    memcpy(C, T, sizeof T);
}
static PBD_HD void pbd_sm__mx_mul3_bt(const double *A, const double *B, double *C) { /* C = A B^T */
    double T[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            T[3 * i + j] = A[3 * i] * B[3 * j] + A[3 * i + 1] * B[3 * j + 1] + A[3 * i + 2] * B[3 * j + 2];
    memcpy(C, T, sizeof T);
}
static PBD_HD void pbd_sm__mx_mul3_at(const double *A, const double *B, double *C) { /* C = A^T B */
    double T[9];
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) T[3 * i + j] = A[i] * B[j] + A[3 + i] * B[3 + j] + A[6 + i] * B[6 + j];
    memcpy(C, T, sizeof T);
}
static PBD_HD double pbd_sm__mx_det3(const double *A) {
    return A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) + A[2] * (A[3] * A[7] - A[4] * A[6]);
}
/* Inverse of a 3x3 with det(A) = d != 0 (adjugate / d). */
static PBD_HD void pbd_sm__mx_inv3(const double *A, double d, double *Ai) {
    double T[9] = {A[4] * A[8] - A[5] * A[7], A[2] * A[7] - A[1] * A[8], A[1] * A[5] - A[2] * A[4],
                   A[5] * A[6] - A[3] * A[8], A[0] * A[8] - A[2] * A[6], A[2] * A[3] - A[0] * A[5],
                   A[3] * A[7] - A[4] * A[6], A[1] * A[6] - A[0] * A[7], A[0] * A[4] - A[1] * A[3]};
    for (int k = 0; k < 9; ++k) Ai[k] = T[k] / d;
}
static PBD_HD double pbd_sm__mx_dist_identity(const double *S) { /* ||S - I||_F */
    double s = 0;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
            double d = S[3 * i + j] - (i == j ? 1.0 : 0.0);
            s += d * d;
        }
    return sqrt(s);
}

/* Pseudo-inverse of a symmetric positive semi-definite n x n matrix (its
   eigen-decomposition by pbd.h's pbd_sym_eigen), with
   eigenvalues below 1e-10 of the largest treated as zero (a flat or
   collinear rest shape has exactly such directions); null (optional) gets
   the projector onto those directions. A is scaled by D (diagonal) first
   so that entries of different units compare: pinv(A) = D pinv(D A D) D. */
static PBD_HD void pbd_sm__mx_pinv(int n, const double *A, const double *D, double *Ai, double *null) {
    double B[81], V[81], lam[9], lmax = 0;
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) B[i * n + j] = D[i] * A[i * n + j] * D[j];
    pbd__sym_eigen_hd(n, B, V); /* pbd_sym_eigen, callable on a GPU */
    for (int i = 0; i < n; ++i) {
        lam[i] = B[i * n + i];
        if (lam[i] > lmax) lmax = lam[i];
    }
    for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
            double s = 0, z = 0;
            for (int e = 0; e < n; ++e) {
                int keep = lam[e] > PBD_SM__PINV_EIG_REL * lmax;
                double vv = V[i * n + e] * V[j * n + e];
                if (keep) s += vv / lam[e];
                else z += vv;
            }
            Ai[i * n + j] = D[i] * s * D[j];
            if (null) null[i * n + j] = z;
        }
    }
}

/* --- on a GPU world ------------------------------------------------------------
   pbd_cuda.cu (built with PBD_CUDA where PBD_SM_IMPLEMENTATION is) holds
   the device side of bodies and surface volumes: their arrays on the
   device from the moment they are added (UPLOAD; 0: out of device
   memory), each plugin callback as kernels on the context's device
   arrays, the state the getters and snapshots read back to the host
   (FETCH), the same state up after a setter or a restore changed it on
   the host (PUSH), FREE. */
enum {
    PBD_SM__CUDA_UPLOAD,
    PBD_SM__CUDA_BEGIN,
    PBD_SM__CUDA_PROJECT,
    PBD_SM__CUDA_AFTER_CONTACTS,
    PBD_SM__CUDA_END,
    PBD_SM__CUDA_KEEP,     /* the step's start: the state a rollback puts back */
    PBD_SM__CUDA_ROLLBACK, /* back to it */
    PBD_SM__CUDA_FETCH,
    PBD_SM__CUDA_PUSH,
    PBD_SM__CUDA_FREE,
    PBD_SM__CUDA_EVAL /* a skin's vertices (pbd_sm__cuda_skin) */
};

/* --- the body ---------------------------------------------------------------- */

#define PBD_SM__NB_MAX 10
/* the volume term's weight sums per particle: u, u x~ (3), u x~ x~^T (6)
   over the particles it moves, u', u' x~ (3) over all */
#define PBD_SM__VOLUME_K 14
/* the quadratic terms' factors: x^2 y^2 z^2 xy yz zx (functions, not
   tables, which a GPU could not read) */
static PBD_HD int pbd_sm__quad_a(int k) { return k < 3 ? k : k - 3; }
static PBD_HD int pbd_sm__quad_b(int k) { return k < 3 ? k : (k - 2) % 3; }

/* The basis phi(x) = (1, x, y, z, x^2, y^2, z^2, xy, yz, zx): a region's
   goal function is G phi(x~) with G 3 x 4 (rigid, linear) or 3 x 10
   (quadratic), so a particle's blended goal is (sum of its regions' G)
   phi(x~_i) / |R_i|, and region sums of m~ x phi(x~)^T give every moment
   the match needs (Mueller et al. 2005, eqs. 7 and 8 of the survey). */
static PBD_HD void pbd_sm__phi(const double *x, int nb, double *phi) {
    phi[0] = 1;
    phi[1] = x[0];
    phi[2] = x[1];
    phi[3] = x[2];
    if (nb > 4)
        for (int k = 0; k < 6; ++k) phi[4 + k] = x[pbd_sm__quad_a(k)] * x[pbd_sm__quad_b(k)];
}

struct pbd_sm__body {
    uint32_t tag;     /* PBD_SM__TAG_BODY */
    pbd_world *world; /* the owner: its allocator holds every array */
    pbd_plugin plugin;
    int n, nr;
    int *idx; /* n world particles */
    pbd_sm_sum_plan *plan;
    int owns_plan;
    int symmetric;               /* blend = plan sum of the region goal functions */
    int *p2r_start, *p2r;        /* each particle's regions (when not symmetric) */
    double *xbar;                /* n*3 rest positions relative to the rest centroid */
    double *mt;                  /* n: m~ = m / |R_i| */
    double *inv_nreg;            /* n: 1 / |R_i|, 0 for a particle in no region */
    double *M, *cbar;            /* nr, nr*3: region mass and rest centre */
    double *Aqq_pinv, *Aqq_null; /* nr*9 each: pinv(A_qq) and the projector onto its null space */
    double *A9_pinv, *Qbar;      /* quadratic only: nr*81 pinv(A~_qq), nr*6 sum m~ quad(q) */
    double *rot;                 /* nr*4: rotations (warm starts) */
    double *Sp;                  /* nr*9: plastic states */
    double *rot_step, *Sp_step;  /* both at the start of the step: a non-finite step's rollback */
    double *values, *sums;       /* n*30 (at least n*PBD_SM__VOLUME_K), nr*30 scratch */
    double *T, *G;               /* nr*30 region goal functions, n*30 blended */
    double *vsums;               /* nr*10: the volume term's weight sums (see "volume") */
    double *rot_tmp;             /* nr*4: warm starts for pbd_sm_body_goals */
    int whole;                   /* every region holds every particle (a rigid body in RIGID mode) */
    double extent;               /* largest |xbar| */
    long work, parallel_min;     /* region memberships; share the loops from this many */
    pbd_sm_mode mode;
    double beta, alpha;
    int correction;
    double volume; /* the volume term's stiffness per substep (LINEAR, QUADRATIC) */
    double yield, creep, maxp;
    int rot_iters;   /* rotation extraction steps per projection */
    int sp_identity; /* every S_p is I (no creep since the last reset): skip it */
    int converge;    /* 1 in pbd_sm_body_goals: extract to convergence */
    void *gpu;       /* on a GPU world: pbd_cuda.cu's copy (pbd_sm__cuda_body) */
};

#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
/* The body's stages on a GPU world (see "on a GPU world"); size: sizeof *b. */
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_sm__cuda_body(pbd_sm__body *b, size_t size, const pbd_solve_context *c, int what);
#endif
/* A GPU world's body: the host's rotations and plastic states, current
   (FETCH) before a getter reads them, or after a setter wrote them (PUSH). */
static void pbd_sm__body_gpu(pbd_sm__body *b, int what) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (b->gpu) pbd_sm__cuda_body(b, sizeof *b, NULL, what);
#else
    (void)b;
    (void)what;
#endif
}

PBD_SM_DEF pbd_sm_body_desc pbd_sm_body_desc_default(void) {
    pbd_sm_body_desc d;
    memset(&d, 0, sizeof d);
    d.mode = PBD_SM_RIGID;
    d.beta = 0.5f;
    d.stiffness = 1.0f;
    d.volume = 1.0f;
    d.stiffness_correction = 1;
    d.yield = 0.05f;
    d.creep = 0.0f;
    d.max_plastic = 1.0f;
    d.mark_coupled = 1;
    d.rotation_iterations = 8;
    return d;
}

/* The finite-value check of every pbd_sm.h input: 1 when v is neither NaN
   nor infinite (a float converts to double exactly, so it serves both), by
   its bits, which -ffast-math cannot assume away (pbd.h, pbd__finite_bits). */
static int pbd_sm__finite(double v) { return pbd__finite_bits_d(v); }
static int pbd_sm__finite_n(const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!pbd_sm__finite(x[i])) return 0;
    return 1;
}
/* The refusal of the first of n desc values of fn that is not finite, by
   its name and value (one message per field, not "a, b or c is not
   finite"); PBD_OK when all are. */
static pbd_result pbd_sm__check_finite_named(const pbd_world *w, const char *fn, const float *x,
                                             const char *const *names, int n) {
    for (int i = 0; i < n; ++i)
        if (!pbd_sm__finite(x[i]))
            return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "%s: %s %g is not finite", fn, names[i], (double)x[i]);
    return PBD_OK;
}

/* --- states in snapshots -------------------------------------------------------
   Each kind's pbd_plugin_desc.save_state / load_state (SNAPSHOTS in the
   manual) is one walk over its state (pbd_sm__<kind>_state) that
   measures, writes, checks or loads, as pbd.h's snapshot walk does, so
   the four cannot disagree. A state starts with its kind's tag, a format
   version and the counts that fix its layout (which the target must
   share: it was built the same way), then what the setters change, then
   the arrays, each value in memory's byte order. Reading only checks
   (commit 0: nothing changes; the first reason is kept) or, checked
   already, loads (commit 1). */
#define PBD_SM__STATE_VERSION 2 /* 2: a body's and a volume's particles and rest (pbd_sm__io_built) */
typedef struct pbd_sm__io {
    unsigned char *out;      /* writing (NULL and in NULL: measuring) */
    const unsigned char *in; /* reading */
    size_t size, off;
    uint32_t version; /* the state's format (reading; set by pbd_sm__io_head) */
    int commit;       /* reading: 1 loads what it reads into the thing, 0 only checks it */
    char why[160];    /* reading: why the state is refused ("" while it is not) */
} pbd_sm__io;

static void pbd_sm__io_refuse(pbd_sm__io *io, const char *fmt, ...) {
    if (io->why[0]) return; /* the first reason */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(io->why, sizeof io->why, fmt, ap);
    va_end(ap);
}
/* n bytes: written from data, or read into data (which is the thing's own
   memory only when committing, else a local copy). Returns where they lie
   in the state being read, NULL when they are not all there. */
static const unsigned char *pbd_sm__io_bytes(pbd_sm__io *io, void *data, size_t n) {
    const unsigned char *at = NULL;
    if (io->in) {
        if (io->why[0]) return NULL;
        if (n > io->size - io->off) {
            pbd_sm__io_refuse(io, "the state is cut short: %zu bytes, %zu are needed", io->size, io->off + n);
            return NULL;
        }
        at = io->in + io->off;
        if (data) memcpy(data, at, n);
    } else if (io->out && n) {
        memcpy(io->out + io->off, data, n);
    }
    io->off += n;
    return at;
}
static void pbd_sm__io_int(pbd_sm__io *io, int *v) { pbd_sm__io_bytes(io, v, sizeof *v); }
static void pbd_sm__io_float(pbd_sm__io *io, float *v) { pbd_sm__io_bytes(io, v, sizeof *v); }
static void pbd_sm__io_double(pbd_sm__io *io, double *v) { pbd_sm__io_bytes(io, v, sizeof *v); }
/* The kind's tag, the format version and `count` ints that fix the
   layout; reading refuses another kind, version or layout (format 1, a
   snapshot from before pbd_sm__io_built, is read too). */
static void pbd_sm__io_head(pbd_sm__io *io, uint32_t tag, const int *counts, int count, const char *const *names) {
    uint32_t t = tag, version = PBD_SM__STATE_VERSION;
    pbd_sm__io_bytes(io, &t, sizeof t);
    pbd_sm__io_bytes(io, &version, sizeof version);
    io->version = io->in ? version : PBD_SM__STATE_VERSION;
    if (io->in && !io->why[0] && (t != tag || version < 1 || version > PBD_SM__STATE_VERSION)) {
        const char *kind = pbd_sm__kind(t);
        pbd_sm__io_refuse(io, "the state is %s%s%s (format %u), not %s %s's (format %d)",
                          kind ? pbd_sm__article(kind) : "", kind ? " " : "", kind ? kind : "of no kind of pbd_sm.h",
                          version, pbd_sm__article(pbd_sm__kind(tag)), pbd_sm__kind(tag), PBD_SM__STATE_VERSION);
        return;
    }
    for (int k = 0; k < count; ++k) {
        int v = counts[k];
        pbd_sm__io_int(io, &v);
        if (io->in && !io->why[0] && v != counts[k]) {
            pbd_sm__io_refuse(io, "the state's %s is %d, this %s's %d (not built the same way)", names[k], v,
                              pbd_sm__kind(tag), counts[k]);
            return;
        }
    }
}
/* FNV-1a over n bytes, going on from h. */
static uint32_t pbd_sm__fnv(uint32_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
    return h;
}
#define PBD_SM__FNV_START 2166136261u
/* Where the thing lies and what it was built from (format 2 on): its
   first particle and a hash of its particle list and rest shape. Its
   counts alone let a state load into another thing of the same counts,
   as in a world rebuilt in another order, whose bodies then matched
   other particles to their rest shapes and flung them (an audit: a cloth
   at 46 m after 2 s); so reading refuses a state whose thing lies
   elsewhere or was built otherwise. */
static void pbd_sm__io_built(pbd_sm__io *io, uint32_t tag, int first, uint32_t hash) {
    if (io->in && io->version < 2) return;
    int f = first;
    uint32_t h = hash;
    pbd_sm__io_int(io, &f);
    pbd_sm__io_bytes(io, &h, sizeof h);
    if (!io->in || io->why[0]) return;
    if (f != first)
        pbd_sm__io_refuse(io,
                          "the state's %s starts at particle %d, this one at %d: the world was built in another order",
                          pbd_sm__kind(tag), f, first);
    else if (h != hash)
        pbd_sm__io_refuse(io, "the state's %s has other particles or another rest shape: the world was built otherwise",
                          pbd_sm__kind(tag));
}
/* n doubles or floats of the thing's array a: written, checked (finite) or loaded. */
static const unsigned char *pbd_sm__io_doubles(pbd_sm__io *io, double *a, size_t n, const char *what) {
    const unsigned char *at = pbd_sm__io_bytes(io, io->in && !io->commit ? NULL : a, sizeof(double) * n);
    for (size_t i = 0; at && !io->commit && i < n; ++i) {
        double v;
        memcpy(&v, at + sizeof v * i, sizeof v);
        if (!pbd_sm__finite(v)) {
            pbd_sm__io_refuse(io, "%s[%zu] is %g", what, i, v);
            return NULL;
        }
    }
    return at;
}
static void pbd_sm__io_floats(pbd_sm__io *io, float *a, size_t n, const char *what) {
    const unsigned char *at = pbd_sm__io_bytes(io, io->in && !io->commit ? NULL : a, sizeof(float) * n);
    for (size_t i = 0; at && !io->commit && i < n; ++i) {
        float v;
        memcpy(&v, at + sizeof v * i, sizeof v);
        if (!pbd_sm__finite(v)) {
            pbd_sm__io_refuse(io, "%s[%zu] is %g", what, i, (double)v);
            return;
        }
    }
}
/* The double at index i of what pbd_sm__io_doubles returned. */
static double pbd_sm__io_at(const unsigned char *at, size_t i) {
    double v;
    memcpy(&v, at + sizeof v * i, sizeof v);
    return v;
}
/* The kinds' walks (in their sections) and pbd_plugin_desc.save_state /
   load_state of every kind (after the last section): the walk of the
   thing's tag (the first member of each kind's struct) around an io that
   measures or writes the thing, or reads a state; a walk fetches a GPU
   world's state before it writes, and pushes what it loaded. A state
   longer than the walk reads is refused too. */
typedef void (*pbd_sm__state_fn)(pbd_sm__io *io, void *thing);
static size_t pbd_sm__state_save(void *user, const pbd_world *w, void *out);
static pbd_result pbd_sm__state_load(void *user, pbd_world *w, const void *in, size_t size, int commit);
static size_t pbd_sm__save(pbd_sm__state_fn walk, void *thing, void *out) {
    pbd_sm__io io;
    memset(&io, 0, sizeof io);
    io.out = (unsigned char *)out;
    walk(&io, thing);
    return io.off;
}
static pbd_result pbd_sm__load(pbd_sm__state_fn walk, void *thing, const void *in, size_t size, int commit) {
    pbd_sm__io io;
    memset(&io, 0, sizeof io);
    io.in = (const unsigned char *)in;
    io.size = size;
    io.commit = commit;
    walk(&io, thing);
    if (!io.why[0] && io.off != size) pbd_sm__io_refuse(&io, "the state has %zu bytes, %zu are expected", size, io.off);
    if (io.why[0]) return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "%s", io.why);
    return PBD_OK;
}

static pbd_result pbd_sm__check_params(pbd_sm_mode mode, float beta, float stiffness, float yield, float creep,
                                       float maxp, int rotation_iterations) {
    if (rotation_iterations < 1 || rotation_iterations > 100)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "rotation_iterations %d outside 1..100",
                              rotation_iterations);
    if (!pbd_sm__finite(beta))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "beta is not finite (%g)", (double)beta);
    if (!pbd_sm__finite(stiffness))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "stiffness is not finite (%g)", (double)stiffness);
    if (!pbd_sm__finite(yield))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "yield is not finite (%g)", (double)yield);
    if (!pbd_sm__finite(creep))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "creep is not finite (%g)", (double)creep);
    if (!pbd_sm__finite(maxp))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "max_plastic is not finite (%g)", (double)maxp);
    if (mode != PBD_SM_RIGID && mode != PBD_SM_LINEAR && mode != PBD_SM_QUADRATIC)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "mode %d is not PBD_SM_RIGID, PBD_SM_LINEAR or PBD_SM_QUADRATIC", (int)mode);
    if (beta < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "beta %g outside [0, 1]", (double)beta);
    if (beta > 1) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "beta %g outside [0, 1]", (double)beta);
    if (stiffness < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "stiffness %g outside [0, 1]", (double)stiffness);
    if (stiffness > 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "stiffness %g outside [0, 1]", (double)stiffness);
    if (yield < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "yield %g < 0", (double)yield);
    if (creep < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "creep %g < 0", (double)creep);
    if (!(maxp > 0))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "max_plastic %g must be > 0", (double)maxp);
    return PBD_OK;
}

/* The desc's switches: 0 or 1 (a flag out of its range is refused, as
   pbd.h's are, not taken as on). */
static pbd_result pbd_sm__check_switches(const pbd_sm_body_desc *d) {
    if (d->stiffness_correction != 0 && d->stiffness_correction != 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "stiffness_correction %d must be 0 or 1",
                              d->stiffness_correction);
    if (d->mark_coupled != 0 && d->mark_coupled != 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "mark_coupled %d must be 0 or 1", d->mark_coupled);
    if (d->owns_plan != 0 && d->owns_plan != 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "owns_plan %d must be 0 or 1", d->owns_plan);
    return PBD_OK;
}

/* The desc's volume stiffness: finite, in [0, 1]. */
static pbd_result pbd_sm__check_volume(float volume) {
    if (!pbd_sm__finite(volume))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "volume is not finite (%g)", (double)volume);
    if (volume < 0 || volume > 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "volume %g outside [0, 1]", (double)volume);
    return PBD_OK;
}

static PBD_HD int pbd_sm__body_nb(const pbd_sm__body *b) { return b->mode == PBD_SM_QUADRATIC ? 10 : 4; }

static void pbd_sm__body_free(pbd_sm__body *b) {
    if (!b) return;
    pbd_sm__body_gpu(b, PBD_SM__CUDA_FREE);
    if (b->owns_plan) pbd_sm_plan_destroy(b->plan);
    double *d[] = {b->xbar,    b->mt,      b->inv_nreg, b->M,       b->cbar,   b->Aqq_pinv, b->Aqq_null,
                   b->A9_pinv, b->Qbar,    b->rot,      b->Sp,      b->values, b->sums,     b->T,
                   b->G,       b->rot_tmp, b->rot_step, b->Sp_step, b->vsums};
    for (size_t k = 0; k < sizeof d / sizeof d[0]; ++k) pbd_sm__free(b->world, d[k]);
    pbd_sm__free(b->world, b->idx);
    pbd_sm__free(b->world, b->p2r_start);
    pbd_sm__free(b->world, b->p2r);
    pbd_sm__free(b->world, b);
}

/* Per-particle region counts and, unless the regions are symmetric, each
   particle's region list (increasing region order: the fixed gather order). */
static pbd_result pbd_sm__body_transpose(pbd_sm__body *b) {
    const pbd_sm_sum_plan *P = b->plan;
    int n = b->n, nr = b->nr, total = P->region_start[nr];
    b->p2r_start = (int *)pbd_sm__alloc_n(b->world, (size_t)n + 1, sizeof(int));
    b->p2r = (int *)pbd_sm__alloc_n(b->world, (size_t)total, sizeof(int));
    int *fill = (int *)pbd_sm__alloc_n(b->world, (size_t)n, sizeof(int));
    if (!b->p2r_start || !b->p2r || !fill) {
        pbd_sm__free(b->world, fill);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the body");
    }
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
        if (P->region_start[i + 1] - P->region_start[i] != b->p2r_start[i + 1] - b->p2r_start[i]) {
            sym = 0;
            break;
        }
        for (int e = P->region_start[i]; e < P->region_start[i + 1]; ++e) fill[P->region_particles[e]] = i;
        for (int e = b->p2r_start[i]; e < b->p2r_start[i + 1]; ++e)
            if (fill[b->p2r[e]] != i) {
                sym = 0;
                break;
            }
    }
    pbd_sm__free(b->world, fill);
    for (int i = 0; i < n; ++i) {
        int c = b->p2r_start[i + 1] - b->p2r_start[i];
        b->inv_nreg[i] = c > 0 ? 1.0 / c : 0.0;
    }
    b->symmetric = sym;
    if (sym) {
        pbd_sm__free(b->world, b->p2r_start);
        pbd_sm__free(b->world, b->p2r);
        b->p2r_start = b->p2r = NULL;
    }
    return PBD_OK;
}

/* Rest data of every region from its member list (once, when the body is
   added): M~, c~ (survey eq. 7), pinv(A_qq) with A_qq = sum m~ q q^T, and
   for quadratic mode pinv(A~_qq) (9x9) and sum m~ quad(q). */
static pbd_result pbd_sm__body_rest(pbd_sm__body *b) {
    const pbd_sm_sum_plan *P = b->plan;
    int quad = b->mode == PBD_SM_QUADRATIC;
    for (int r = 0; r < b->nr; ++r) {
        double M = 0, c[3] = {0, 0, 0}, A[9] = {0}, A9[81] = {0}, Q[6] = {0};
        for (int e = P->region_start[r]; e < P->region_start[r + 1]; ++e) {
            int i = P->region_particles[e];
            M += b->mt[i];
            for (int a = 0; a < 3; ++a) c[a] += b->mt[i] * b->xbar[3 * i + a];
        }
        if (!(M > 0)) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "region %d has zero total mass", r);
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
        double tiny = PBD_SM__REST_SIZE_REL * (b->extent > 0 ? b->extent : 1.0);
        if (!(size2 > tiny * tiny))
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "region %d: all its rest positions coincide", r);
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

static pbd_result pbd_sm__body_alloc(pbd_sm__body *b) {
    size_t n = (size_t)b->n, nr = (size_t)b->nr;
    int quad = b->mode == PBD_SM_QUADRATIC;
    size_t k = 3 * (size_t)pbd_sm__body_nb(b);
    b->xbar = (double *)pbd_sm__alloc_n(b->world, n * 3, sizeof(double));
    b->mt = (double *)pbd_sm__alloc_n(b->world, n, sizeof(double));
    b->inv_nreg = (double *)pbd_sm__alloc_n(b->world, n, sizeof(double));
    b->M = (double *)pbd_sm__alloc_n(b->world, nr, sizeof(double));
    b->cbar = (double *)pbd_sm__alloc_n(b->world, nr * 3, sizeof(double));
    b->Aqq_pinv = (double *)pbd_sm__alloc_n(b->world, nr * 9, sizeof(double));
    b->Aqq_null = (double *)pbd_sm__alloc_n(b->world, nr * 9, sizeof(double));
    b->A9_pinv = quad ? (double *)pbd_sm__alloc_n(b->world, nr * 81, sizeof(double)) : NULL;
    b->Qbar = quad ? (double *)pbd_sm__alloc_n(b->world, nr * 6, sizeof(double)) : NULL;
    b->rot = (double *)pbd_sm__alloc_n(b->world, nr * 4, sizeof(double));
    b->rot_tmp = (double *)pbd_sm__alloc_n(b->world, nr * 4, sizeof(double));
    b->Sp = (double *)pbd_sm__alloc_n(b->world, nr * 9, sizeof(double));
    b->rot_step = (double *)pbd_sm__alloc_n(b->world, nr * 4, sizeof(double));
    b->Sp_step = (double *)pbd_sm__alloc_n(b->world, nr * 9, sizeof(double));
    b->values = (double *)pbd_sm__alloc_n(b->world, n * (k > PBD_SM__VOLUME_K ? k : PBD_SM__VOLUME_K), sizeof(double));
    b->sums = (double *)pbd_sm__alloc_n(b->world, nr * k, sizeof(double));
    b->T = (double *)pbd_sm__alloc_n(b->world, nr * k, sizeof(double));
    b->G = (double *)pbd_sm__alloc_n(b->world, n * k, sizeof(double));
    b->vsums = (double *)pbd_sm__alloc_n(b->world, nr * PBD_SM__VOLUME_K, sizeof(double));
    if (!b->xbar || !b->mt || !b->inv_nreg || !b->M || !b->cbar || !b->Aqq_pinv || !b->Aqq_null ||
        (quad && (!b->A9_pinv || !b->Qbar)) || !b->rot || !b->rot_tmp || !b->Sp || !b->values || !b->sums || !b->T ||
        !b->G || !b->rot_step || !b->Sp_step || !b->vsums)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the body");
    for (size_t r = 0; r < nr; ++r) {
        double *q = b->rot + 4 * r, *S = b->Sp + 9 * r;
        q[0] = q[1] = q[2] = 0;
        q[3] = 1;
        for (int e = 0; e < 9; ++e) S[e] = (e % 4 == 0) ? 1.0 : 0.0;
    }
    return PBD_OK;
}

/* Builds a body of world w (not yet attached: no plugin) from validated
   input. The plan is taken over only on success when owns_plan. */
static pbd_result pbd_sm__body_build(pbd_world *w, int n, pbd_sm_sum_plan *plan, int owns_plan, const float *rest,
                                     const float *masses, const pbd_sm_body_desc *d, pbd_sm__body **out) {
    pbd_sm__body *b = (pbd_sm__body *)pbd_sm__alloc_n(w, 1, sizeof *b);
    if (!b) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the body");
    memset(b, 0, sizeof *b);
    b->tag = PBD_SM__TAG_BODY;
    b->world = w;
    b->n = n;
    b->nr = plan->region_count;
    b->plan = plan;
    b->mode = d->mode;
    b->beta = d->beta;
    b->alpha = d->stiffness;
    b->volume = d->volume;
    b->correction = d->stiffness_correction;
    b->yield = d->yield;
    b->creep = d->creep;
    b->sp_identity = !(d->creep > 0);
    b->maxp = d->max_plastic;
    b->rot_iters = d->rotation_iterations;
    b->work = (long)plan->region_start[b->nr] + n;
    b->parallel_min = PBD_SM_PARALLEL_MIN;
    b->idx = (int *)pbd_sm__alloc_n(b->world, (size_t)n, sizeof(int));
    pbd_result res = b->idx ? pbd_sm__body_alloc(b)
                            : pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory building the body");
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
        b->whole = 1;
        for (int r = 0; r < b->nr; ++r) b->whole &= plan->region_start[r + 1] - plan->region_start[r] == n;
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
   barrier between stages, the region sums and the gather through the
   plan's orphaned `omp for` passes (pbd_sm_plan_sum_team). Every element
   is computed the same way whatever the chunking, so results are
   bit-identical for any thread count (survey 4.7: per-region goals in
   parallel, then a per-particle gather in a fixed order). */

typedef struct pbd_sm__team {
    int t, T;
} pbd_sm__team;

static void pbd_sm__chunk(pbd_sm__team tm, int n, int *lo, int *hi) {
    *lo = (int)((long long)n * tm.t / tm.T);
    *hi = (int)((long long)n * (tm.t + 1) / tm.T);
}
static void pbd_sm__barrier(pbd_sm__team tm) {
    if (tm.T > 1) { PBD_SM__PRAGMA(omp barrier) }
}

/* values[i] = m~_i y_i phi(x~_i)^T with y_i = pos_i - o (survey eqs. 7, 8) */
static PBD_HD void pbd_sm__value(pbd_sm__body *b, const float *pos, const double *o, int i) {
    int nb = pbd_sm__body_nb(b), k = 3 * nb;
    const float *x = pos + 4 * (size_t)b->idx[i];
    double y[3] = {x[0] - o[0], x[1] - o[1], x[2] - o[2]}, ph[PBD_SM__NB_MAX];
    double *v = b->values + (size_t)i * k, m = b->mt[i];
    pbd_sm__phi(b->xbar + 3 * (size_t)i, nb, ph);
    for (int a = 0; a < 3; ++a) {
        double my = m * y[a];
        for (int c = 0; c < nb; ++c) v[a * nb + c] = my * ph[c];
    }
}
static void pbd_sm__stage_values(pbd_sm__body *b, const float *pos, const double *o, int lo, int hi) {
    for (int i = lo; i < hi; ++i) pbd_sm__value(b, pos, o, i);
}

/* The sums of a body that one thread runs (a small body, or any body of a
   1-thread step), on that thread alone. Not pbd_sm_plan_sum: called where
   no parallel region is open - a world stepping on one thread opens none
   (pbd_world_set_threads(w, 1), or the default policy's choice on a busy
   machine) - it would open a team of omp_get_max_threads() for a plan of
   512 regions or more, so an 8 x 8 x 8 lattice "on 1 thread" ran its sums
   on 2 and kept a second thread spinning (3x the CPU time of 1 thread
   when idle, 100x the time of a step when another process held the other
   core). The world's team decides the threads of a step. */
static void pbd_sm__plan_sum_serial(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    PBD_SM__PRAGMA(omp parallel num_threads(1))
    p->sum(p, values, k, sums);
}
static void pbd_sm__stage_sums(pbd_sm__body *b) {
    pbd_sm__plan_sum_serial(b->plan, b->values, 3 * pbd_sm__body_nb(b), b->sums);
}
/* The same by every thread of the team (orphaned `omp for` in the plan). */
static void pbd_sm__stage_sums_team(pbd_sm__body *b) {
    pbd_sm_plan_sum_team(b->plan, b->values, 3 * pbd_sm__body_nb(b), b->sums);
}

/* The region's centre c (relative to o) and A_pq = sum m~ p q^T from its
   sums: sum m~ y x~^T - M c c~^T (survey eq. 8). */
static PBD_HD void pbd_sm__region_moments(const pbd_sm__body *b, int r, double *c, double *Apq) {
    int nb = pbd_sm__body_nb(b);
    const double *S = b->sums + (size_t)r * 3 * nb, *cb = b->cbar + 3 * (size_t)r;
    double M = b->M[r];
    for (int a = 0; a < 3; ++a) c[a] = S[a * nb] / M;
    for (int a = 0; a < 3; ++a)
        for (int j = 0; j < 3; ++j) Apq[3 * a + j] = S[a * nb + 1 + j] - M * c[a] * cb[j];
}

/* The best linear map A = A_pq pinv(A_qq), completed by R where the rest
   shape spans no direction (flat and collinear regions). */
static PBD_HD void pbd_sm__region_linear(const pbd_sm__body *b, int r, const double *Apq, const double *R, double *A) {
    double RN[9];
    pbd_sm__mx_mul3(Apq, b->Aqq_pinv + 9 * (size_t)r, A);
    pbd_sm__mx_mul3(R, b->Aqq_null + 9 * (size_t)r, RN);
    for (int k = 0; k < 9; ++k) A[k] += RN[k];
}

static PBD_HD void pbd_sm__region_match(const pbd_sm__body *b, int r, const double *Apq, double *Ap) {
    if (b->sp_identity) memcpy(Ap, Apq, 9 * sizeof(double)); /* A_pq I */
    else pbd_sm__mx_mul3_bt(Apq, b->Sp + 9 * (size_t)r, Ap);
}
static PBD_HD void pbd_sm__region_extract(const pbd_sm__body *b, const double *Ap, double *q) {
    if (!pbd_sm__extract_rotation(Ap, q, b->converge ? 100 : b->rot_iters) && !b->converge)
        pbd_sm__extract_rotation(Ap, q, 100);
}
/* Rotation of the match with the plastically deformed rest shape:
   polar(A_pq S_p^T) (survey 4.5.2: q = S_p (x~ - c~)), warm-started, at
   most rot_iters steps unless those do not converge (a sudden large
   turn): then up to 100. From the previous projection's rotation one
   Newton step usually converges (see pbd_sm__extract_rotation). */
static PBD_HD void pbd_sm__region_rotation(const pbd_sm__body *b, int r, const double *Apq, double *q, double *R) {
    double Ap[9];
    pbd_sm__region_match(b, r, Apq, Ap);
    pbd_sm__region_extract(b, Ap, q);
    pbd_sm__quat_to_mat(q, R);
}

/* The goal function of region r as T = G (3 x nb) over phi(x~):
   g(x~) = B (x~ - c~) + Qm quad(x~ - c~) + c, expanded in x~, from its
   centre c, A_pq and rotation R. */
static PBD_HD void pbd_sm__region_goal_from(pbd_sm__body *b, int r, const double *c, const double *Apq,
                                            const double *R) {
    int nb = pbd_sm__body_nb(b);
    double B[9], Qm[18] = {0};
    const double *cb = b->cbar + 3 * (size_t)r;
    if (b->sp_identity) memcpy(B, R, sizeof B);
    else pbd_sm__mx_mul3(R, b->Sp + 9 * (size_t)r, B); /* rigid: R S_p */
    if (b->mode == PBD_SM_LINEAR && b->beta > 0) {
        /* Mueller et al. 2005 section 4.2: beta A / cbrt(det A) + (1 - beta) R;
           with S_p, (A S_p^-1) S_p = A. An inverted or collapsed region
           (det A <= 0) keeps the rigid goal. */
        double A[9];
        pbd_sm__region_linear(b, r, Apq, R, A);
        double det = pbd_sm__mx_det3(A);
        if (det > PBD_SM__LINEAR_DET_MIN) {
            double s = b->beta / pbd_sm__cbrt(det);
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
                int u = pbd_sm__quad_a(k), v = pbd_sm__quad_b(k);
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
                int u = pbd_sm__quad_a(k), v = pbd_sm__quad_b(k);
                double qm = Qm[6 * a + k];
                t[4 + k] = qm;
                t[0] += qm * (cb[u] * cb[v] - b->Qbar[6 * (size_t)r + k] / b->M[r]); /* centred */
                t[1 + v] -= qm * cb[u];
                t[1 + u] -= qm * cb[v];
            }
    }
}

static PBD_HD void pbd_sm__region_goal(pbd_sm__body *b, int r, double *quat) {
    double c[3], Apq[9], R[9];
    pbd_sm__region_moments(b, r, c, Apq);
    pbd_sm__region_rotation(b, r, Apq, quat, R);
    pbd_sm__region_goal_from(b, r, c, Apq, R);
}

/* Region goals lo..hi. With SIMD (the plan's setting), four regions' warm
   started rotations are extracted at once (pbd_sm__extract_rotation4: the
   rotation is most of a region's cost, a chain of dependent operations
   that one region cannot overlap); lanes it leaves are extracted alone.
   Either way each region gets the same bits. */
static void pbd_sm__stage_goals(pbd_sm__body *b, double *quats, int lo, int hi) {
    int r = lo;
#if PBD_SM__SIMD
    if (b->plan->simd && !b->converge)
        for (; r + 4 <= hi; r += 4) {
            double c[4][3], Apq[4][9], Ap[4][9], R[9];
            const double *A4[4];
            double *q4[4];
            for (int l = 0; l < 4; ++l) {
                pbd_sm__region_moments(b, r + l, c[l], Apq[l]);
                pbd_sm__region_match(b, r + l, Apq[l], Ap[l]);
                A4[l] = Ap[l];
                q4[l] = quats + 4 * (size_t)(r + l);
            }
            int done = pbd_sm__extract_rotation4(A4, q4, b->rot_iters);
            for (int l = 0; l < 4; ++l) {
                if (!((done >> l) & 1)) pbd_sm__region_extract(b, Ap[l], q4[l]);
                pbd_sm__quat_to_mat(q4[l], R);
                pbd_sm__region_goal_from(b, r + l, c[l], Apq[l], R);
            }
        }
#endif
    for (; r < hi; ++r) pbd_sm__region_goal(b, r, quats + 4 * (size_t)r);
}

/* G_i = sum of the goal functions of particle i's regions, in a fixed
   order (survey 4.2, blended goals; survey 4.7: per-element goals, then a
   per-vertex gather). Symmetric regions: one plan sum (from one thread). */
static void pbd_sm__stage_gather_plan(pbd_sm__body *b) {
    pbd_sm__plan_sum_serial(b->plan, b->T, 3 * pbd_sm__body_nb(b), b->G);
}
static PBD_HD void pbd_sm__gather_list(pbd_sm__body *b, int i) {
    int k = 3 * pbd_sm__body_nb(b);
    double *g = b->G + (size_t)i * k;
    for (int j = 0; j < k; ++j) g[j] = 0;
    for (int e = b->p2r_start[i]; e < b->p2r_start[i + 1]; ++e)
        pbd_sm__row_add(g, g, b->T + (size_t)b->p2r[e] * k, k, 1); /* the same bits as scalar */
}
static void pbd_sm__stage_gather_lists(pbd_sm__body *b, int lo, int hi) {
    for (int i = lo; i < hi; ++i) pbd_sm__gather_list(b, i);
}

static PBD_HD void pbd_sm__particle_goal(const pbd_sm__body *b, int i, const double *o, double *g) {
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
static PBD_HD void pbd_sm__apply(const pbd_sm__body *b, float *p, const double *o, double alpha, int i) {
    float *x = p + 4 * (size_t)b->idx[i];
    if (x[3] == 0 || b->inv_nreg[i] == 0) return;
    double g[3];
    pbd_sm__particle_goal(b, i, o, g);
    for (int a = 0; a < 3; ++a) x[a] = (float)(x[a] + alpha * (g[a] - x[a]));
}
static void pbd_sm__stage_apply(pbd_sm__body *b, float *p, const double *o, double alpha, int lo, int hi) {
    for (int i = lo; i < hi; ++i) pbd_sm__apply(b, p, o, alpha, i);
}

/* Plastic flow of one region (survey 4.5.2) from the shape at the end of a
   substep; updates S_p and the warm start. */
static PBD_HD void pbd_sm__region_plastic(pbd_sm__body *b, int r, double h) {
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
        for (int k = 0; k < 9; ++k)
            N[k] = (k % 4 == 0 ? 1.0 : 0.0) + b->maxp * (N[k] - (k % 4 == 0 ? 1.0 : 0.0)) / dist;
    double dn = pbd_sm__mx_det3(N);
    if (!(dn > PBD_SM__PLASTIC_DET_MIN)) return; /* would invert the rest shape: keep S_p */
    double s = 1 / pbd_sm__cbrt(dn);             /* volume conservation, last so that det S_p = 1 */
    for (int k = 0; k < 9; ++k) Sp[k] = N[k] * s;
}

/* A stiffness a per substep as the alpha' of each of the iterations. */
static double pbd_sm__per_iteration(const pbd_sm__body *b, double a, int iterations) {
    if (!b->correction || iterations <= 1 || a >= 1) return a;
    return 1 - pow(1 - a, 1.0 / iterations); /* survey 3.3 */
}
static double pbd_sm__alpha(const pbd_sm__body *b, int iterations) {
    return pbd_sm__per_iteration(b, b->alpha, iterations);
}

static PBD_HD void pbd_sm__origin(const pbd_sm__body *b, const float *pos, double *o) {
    const float *x = pos + 4 * (size_t)b->idx[0];
    o[0] = x[0];
    o[1] = x[1];
    o[2] = x[2];
}

/* One projection (or, plastic = 1, the plastic flow after a substep) by
   this thread of the team. pos: the positions matched (p, or x after the
   substep); quats: the rotations' warm starts (updated). */
static void pbd_sm__solve(pbd_sm__body *b, pbd_sm__team tm, float *pos, double *quats, double alpha, int plastic,
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
    pbd_sm__stage_sums_team(b); /* the plan's passes share their loops; each ends in a barrier */
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
        pbd_sm_plan_sum_team(b->plan, b->T, 3 * pbd_sm__body_nb(b), b->G);
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

/* --- rigid bodies under contact ----------------------------------------------
   A rigid body (pbd_sm__is_rigid: RIGID mode, stiffness 1, every region
   holding every particle) must leave every iteration in its rest shape,
   but the contacts run after the plugins' `project`, each moving its own
   particle: matched only before them, the body would end every substep
   bent by them. So it is matched once more after the contacts
   (`project_after_contacts`), and then the contacts act on it as a rigid
   correction. In that match the weights
   w_i of survey 4.1 (the sum of w_i |R (x~_i - c~) + c - x_i|^2 that
   the match minimises) are the masses, except that a particle a collider
   holds (pbd_world_particle_contact_push > 0) or that is pinned or
   kinematic weighs PBD_SM__HELD_WEIGHT times its mass: it is immovable
   for the match, as the collider is, and the body takes the position the
   held particles' contacts and static friction ask for, turning about
   them as the other particles' (mass-weighted) inertia decides. With the
   masses alone, a contact moving one particle would move the body by
   that particle's share of its mass: contacts would converge slowly, and
   a box would creep down a slope its static friction should hold. But the
   weight makes a contact two-sided in the match, and a plank resting on
   a box with its centre of mass beyond the edge was held level by the
   row far from the edge; so the held particles that the match pulls
   into their colliders let go (pbd_sm__rigid_release), for the velocities
   too. Without held particles the match is the mass-weighted one, which keeps linear and
   angular momentum (particle contacts between bodies exchange linear
   momentum exactly). After the contacts' velocity pass (friction, restitution,
   per particle) the body's velocities are fitted the same way by a rigid
   motion (linear and angular velocity), so that friction and restitution
   act on the body as a whole. Both run on one thread (O(n) each). */
#define PBD_SM__HELD_WEIGHT 1e6

static PBD_HD int pbd_sm__is_rigid(const pbd_sm__body *b) {
    return b->mode == PBD_SM_RIGID && b->alpha >= 1 && b->whole;
}

/* Particle i's match weight into b->values[i], whether it is held
   (pinned or kinematic: inverse mass 0 in pos; or push, the colliders'
   push on it, > 0) into b->values[n + i], and the direction a collider
   holds it in (dir: pbd_world_particle_contact_push_vector; 0 for a
   pinned or kinematic one, held whatever the body does) into
   b->values[2n + 3i ..] (its scratch, n * 30). */
static PBD_HD void pbd_sm__rigid_weight(pbd_sm__body *b, const float *pos, int i, float push, const float *dir) {
    int pinned = pos[4 * (size_t)b->idx[i] + 3] == 0, h = pinned || push > 0;
    double *d = b->values + 2 * (size_t)b->n + 3 * (size_t)i;
    b->values[i] = b->mt[i] * (h ? PBD_SM__HELD_WEIGHT : 1.0);
    b->values[b->n + i] = h;
    for (int a = 0; a < 3; ++a) d[a] = pinned ? 0.0 : dir[a];
}
static void pbd_sm__rigid_weights(pbd_sm__body *b, const pbd_world *w, const float *pos) {
    for (int i = 0; i < b->n; ++i) {
        float dir[3];
        pbd_world_particle_contact_push_vector(w, b->idx[i], dir);
        pbd_sm__rigid_weight(b, pos, i, pbd_world_particle_contact_push(w, b->idx[i]), dir);
    }
}
/* The weights' sum into *W and the weighted centre of `pos` into c;
   returns whether any particle is held. */
static PBD_HD int pbd_sm__rigid_centre(const pbd_sm__body *b, const float *pos, double *W, double *c) {
    const double *om = b->values;
    int held = 0;
    *W = c[0] = c[1] = c[2] = 0;
    for (int i = 0; i < b->n; ++i) {
        const float *x = pos + 4 * (size_t)b->idx[i];
        held |= om[b->n + i] != 0;
        *W += om[i];
        for (int a = 0; a < 3; ++a) c[a] += om[i] * x[a];
    }
    if (*W > 0)
        for (int a = 0; a < 3; ++a) c[a] /= *W;
    return held;
}

/* Rest offset of particle i from the weighted rest centre cb, through the
   plastic state (a whole body's regions share it: region 0's). */
static PBD_HD void pbd_sm__rigid_rest(const pbd_sm__body *b, int i, const double *cb, double *q) {
    const double *Sp = b->Sp;
    double q0[3];
    for (int a = 0; a < 3; ++a) q0[a] = b->xbar[3 * i + a] - cb[a];
    for (int a = 0; a < 3; ++a) q[a] = Sp[3 * a] * q0[0] + Sp[3 * a + 1] * q0[1] + Sp[3 * a + 2] * q0[2];
}

/* The weighted rigid match of positions p (survey 4.1 with weights
   b->values): its centre c, rest centre cb and rotation R (b->rot, warm
   started); 0 when the weights sum to 0. */
static PBD_HD int pbd_sm__rigid_pose(pbd_sm__body *b, const float *p, double *c, double *cb, double *R) {
    double W, A[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, q[3];
    const double *om = b->values;
    pbd_sm__rigid_centre(b, p, &W, c);
    if (!(W > 0)) return 0;
    cb[0] = cb[1] = cb[2] = 0;
    for (int i = 0; i < b->n; ++i)
        for (int a = 0; a < 3; ++a) cb[a] += om[i] * b->xbar[3 * i + a] / W;
    for (int i = 0; i < b->n; ++i) { /* A_pq = sum w_i (x_i - c) q_i^T */
        const float *x = p + 4 * (size_t)b->idx[i];
        pbd_sm__rigid_rest(b, i, cb, q);
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) A[3 * a + d] += om[i] * (x[a] - c[a]) * q[d];
    }
    pbd_sm__extract_rotation(A, b->rot, 100); /* warm: region 0's rotation of this iteration */
    pbd_sm__quat_to_mat(b->rot, R);
    return 1;
}

/* Particle i's goal c + R S_p (xbar_i - cb) into g. */
static PBD_HD void pbd_sm__rigid_goal(const pbd_sm__body *b, int i, const double *c, const double *cb, const double *R,
                                      double *g) {
    double q[3];
    pbd_sm__rigid_rest(b, i, cb, q);
    for (int a = 0; a < 3; ++a) g[a] = c[a] + R[3 * a] * q[0] + R[3 * a + 1] * q[1] + R[3 * a + 2] * q[2];
}

/* The direction a collider holds particle i in (pbd_sm__rigid_weight),
   NULL when it is not held by a collider (free, pinned or kinematic). */
static PBD_HD const double *pbd_sm__held_dir(const pbd_sm__body *b, int i) {
    const double *dir = b->values + 2 * (size_t)b->n + 3 * (size_t)i;
    return b->values[b->n + i] != 0 && (dir[0] != 0 || dir[1] != 0 || dir[2] != 0) ? dir : NULL;
}
/* Held particle i lets go when the fit pulls it into its collider harder
   than the collider pushes it out: `off`, the fit's goal less the
   contact-corrected position (velocities: h times the fit's velocity less
   the particle's), along its push dir = lambda n. The fit holds the
   particle by its weight H = PBD_SM__HELD_WEIGHT times its mass, so it
   pulls it back with H off (per unit mass) against the push lambda, which
   carries the particle's own weight (g h^2 along n, at rest): a contact
   whose sum H off . n - lambda is positive is in tension, which no
   collider gives, and lets go, weighing its mass again. A plank whose
   centre of mass lies beyond a box's edge: its far row is pulled up by
   more than its own weight and lets go, and the plank turns about the
   edge; 0.1 m inside the edge, its own weight keeps it down. Returns
   whether it let go. */
static PBD_HD int pbd_sm__rigid_release(pbd_sm__body *b, int i, const double *off, const double *dir) {
    double pull = off[0] * dir[0] + off[1] * dir[1] + off[2] * dir[2],
           push2 = dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2];
    if (!(PBD_SM__HELD_WEIGHT * pull > push2)) return 0;
    b->values[i] = b->mt[i];
    b->values[b->n + i] = 0;
    return 1;
}
/* The held particles that the pose (c, cb, R) lifts off their colliders
   let go (pbd_sm__rigid_release). Returns how many. */
static PBD_HD int pbd_sm__rigid_let_go(pbd_sm__body *b, const float *p, const double *c, const double *cb,
                                       const double *R) {
    int released = 0;
    for (int i = 0; i < b->n; ++i) {
        const double *dir = pbd_sm__held_dir(b, i);
        if (!dir) continue;
        const float *x = p + 4 * (size_t)b->idx[i];
        double g[3];
        pbd_sm__rigid_goal(b, i, c, cb, R, g);
        for (int a = 0; a < 3; ++a) g[a] -= x[a];
        released += pbd_sm__rigid_release(b, i, g, dir);
    }
    return released;
}

/* The weighted rigid match of the contact-corrected positions p (survey
   4.1 with weights: pbd_sm__rigid_weight's), every movable particle onto
   its goal. A held particle weighs PBD_SM__HELD_WEIGHT times its mass,
   which makes its contact two-sided in the match: a plank resting on a
   box with its centre of mass beyond the edge would be held level by the
   particles far from the edge, which the body should lift off. So the
   match is an active set: the held particles that the pose lifts off
   their colliders (the match pulls them into the collider: a pull a
   contact cannot give) let go and the body is matched again, up to
   PBD_SM__RIGID_ROUNDS times; the rest keep the weight that makes the
   contacts converge at once. */
#define PBD_SM__RIGID_ROUNDS 4
static PBD_HD void pbd_sm__rigid_match(pbd_sm__body *b, float *p) {
    double c[3], cb[3], R[9], g[3];
    if (!pbd_sm__rigid_pose(b, p, c, cb, R)) return;
    for (int round = 0; round < PBD_SM__RIGID_ROUNDS && pbd_sm__rigid_let_go(b, p, c, cb, R) > 0; ++round)
        if (!pbd_sm__rigid_pose(b, p, c, cb, R)) return;
    for (int i = 0; i < b->n; ++i) {
        float *x = p + 4 * (size_t)b->idx[i];
        if (x[3] == 0) continue;
        pbd_sm__rigid_goal(b, i, c, cb, R, g);
        for (int a = 0; a < 3; ++a) x[a] = (float)g[a];
    }
}

/* The rigid velocity field V + Om x (x - c) closest to v in the weights
   b->values; 0 when none is held or the weights sum to 0. */
static PBD_HD int pbd_sm__rigid_motion(pbd_sm__body *b, const float *x, const float *v, double *c, double *V,
                                       double *Om) {
    double W, In[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, L[3] = {0, 0, 0}, D[3], Ii[9];
    const double *om = b->values;
    if (!pbd_sm__rigid_centre(b, x, &W, c) || !(W > 0)) return 0;
    V[0] = V[1] = V[2] = 0;
    for (int i = 0; i < b->n; ++i)
        for (int a = 0; a < 3; ++a) V[a] += om[i] * v[4 * (size_t)b->idx[i] + a] / W;
    for (int i = 0; i < b->n; ++i) { /* weighted inertia and angular momentum about c */
        const float *xi = x + 4 * (size_t)b->idx[i], *vi = v + 4 * (size_t)b->idx[i];
        double r[3] = {xi[0] - c[0], xi[1] - c[1], xi[2] - c[2]}, u[3] = {vi[0] - V[0], vi[1] - V[1], vi[2] - V[2]};
        double rr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) In[3 * a + d] += om[i] * ((a == d ? rr : 0) - r[a] * r[d]);
        L[0] += om[i] * (r[1] * u[2] - r[2] * u[1]);
        L[1] += om[i] * (r[2] * u[0] - r[0] * u[2]);
        L[2] += om[i] * (r[0] * u[1] - r[1] * u[0]);
    }
    double size2 = (In[0] + In[4] + In[8]) / W;
    if (!(size2 > 0)) return 0;
    D[0] = D[1] = D[2] = 1 / sqrt(size2);
    pbd_sm__mx_pinv(3, In, D, Ii, NULL); /* a rod's axis: no spin about it */
    for (int a = 0; a < 3; ++a) Om[a] = Ii[3 * a] * L[0] + Ii[3 * a + 1] * L[1] + Ii[3 * a + 2] * L[2];
    return 1;
}

/* The motion's velocity at particle i into u. */
static PBD_HD void pbd_sm__rigid_velocity(const pbd_sm__body *b, const float *x, int i, const double *c,
                                          const double *V, const double *Om, double *u) {
    const float *xi = x + 4 * (size_t)b->idx[i];
    double r[3] = {xi[0] - c[0], xi[1] - c[1], xi[2] - c[2]};
    u[0] = V[0] + Om[1] * r[2] - Om[2] * r[1];
    u[1] = V[1] + Om[2] * r[0] - Om[0] * r[2];
    u[2] = V[2] + Om[0] * r[1] - Om[1] * r[0];
}

/* After the contacts' velocity pass, when a particle is held: the rigid
   velocity field V + Omega x r closest to v in the same weights
   (pbd_sm__rigid_weight's, at x), with the same active set as the match
   (pbd_sm__rigid_match): a held particle that the motion carries off its
   collider faster than its contact lets it (a body tipping off an edge:
   the row behind the edge rises) lets go, and the motion is fitted
   again. Glued, two rows on the edge would stop the body's turn at every
   substep, and it would creep off the edge at a constant crawl. */
static PBD_HD void pbd_sm__rigid_fit_velocities(pbd_sm__body *b, const float *x, float *v, double h) {
    double c[3], V[3], Om[3], u[3];
    if (!pbd_sm__rigid_motion(b, x, v, c, V, Om)) return;
    for (int round = 0; round < PBD_SM__RIGID_ROUNDS; ++round) {
        int released = 0;
        for (int i = 0; i < b->n; ++i) {
            const double *dir = pbd_sm__held_dir(b, i);
            if (!dir) continue;
            const float *vi = v + 4 * (size_t)b->idx[i];
            pbd_sm__rigid_velocity(b, x, i, c, V, Om, u);
            for (int a = 0; a < 3; ++a) u[a] = h * (u[a] - vi[a]);
            released += pbd_sm__rigid_release(b, i, u, dir);
        }
        if (released == 0) break;
        if (!pbd_sm__rigid_motion(b, x, v, c, V, Om)) return; /* none held now: v as the contacts left it */
    }
    for (int i = 0; i < b->n; ++i) {
        float *vi = v + 4 * (size_t)b->idx[i];
        if (x[4 * (size_t)b->idx[i] + 3] == 0) continue;
        pbd_sm__rigid_velocity(b, x, i, c, V, Om, u);
        for (int a = 0; a < 3; ++a) vi[a] = (float)u[a];
    }
}

/* --- volume ---------------------------------------------------------------------
   Shape matching alone does not keep a deformable body's volume under
   compression (Mueller et al. 2005 section 4.2 keeps the volume of the
   linear goal, det(A / cbrt(det A)) = 1, but the blend with R pulls the
   goal towards the rest shape in every direction, and the contacts, which
   come after it, take the compressed direction away from it: the
   README's jelly pressed to 70% of its height kept 70% of its volume and
   bulged by 4%). So LINEAR and QUADRATIC bodies keep each region's
   volume with a constraint C_r = det F_r - 1 (the tetrahedron's volume
   constraint of survey 3.4.4, on the region's best linear map
   F_r = A_pq A_qq^-1, whose determinant is the ratio of the region's
   volume to its rest volume), projected after the contacts
   (`project_after_contacts`) in PBD_SM__VOLUME_SWEEPS sweeps per
   iteration. With q_i = x~_i - c~ and G = cof(F) A_qq^-1 the gradient is
   grad_i C = m~_i G q_i (F changes by m~_i dx q_i^T A_qq^-1 when p_i
   moves by dx), so the projection (survey 3.3, eqs. 2-3, w_i = 1 / m_i)
   moves particle i by -lambda_r (1 / |R_i|) G q_i. A particle a collider
   holds (pbd_world_particle_contact_push > 0), pinned or kinematic has
   w_i = 0, as for rigid bodies: the region keeps its volume with its
   other particles, so a jelly pressed by a plate bulges sideways instead
   of pushing into the plate. Each particle moves by the mean of its
   regions' corrections, over-relaxed (PBD_SM__VOLUME_OMEGA; averaged
   Jacobi, survey 4.7's per-region then per-particle gather: the same
   plan sums and gather as the goals). The region's correction is taken
   about a centre c^ that keeps momentum (pbd_sm__region_volume).
   det S_p = 1, so plasticity does not change the rest volume. The stages
   are shared by the team as the projection's are (bit-identical for any
   thread count). */

/* Whether the body keeps its regions' volumes after the contacts. */
static PBD_HD int pbd_sm__keeps_volume(const pbd_sm__body *b) { return b->mode != PBD_SM_RIGID && b->volume > 0; }
/* Particle i's weight u' = m~_i / |R_i| and u = u' (0 when held, see
   above) times (1, x~, x~ x~^T) and u' (1, x~) into
   values[i * PBD_SM__VOLUME_K]. */
static PBD_HD void pbd_sm__volume_weight(pbd_sm__body *b, const float *pos, int i, float push) {
    int held = pos[4 * (size_t)b->idx[i] + 3] == 0 || push > 0;
    double ua = b->mt[i] * b->inv_nreg[i], u = held ? 0 : ua, *v = b->values + (size_t)i * PBD_SM__VOLUME_K;
    const double *x = b->xbar + 3 * (size_t)i;
    v[0] = u;
    v[10] = ua;
    for (int a = 0; a < 3; ++a) {
        v[1 + a] = u * x[a];
        v[11 + a] = ua * x[a];
    }
    for (int k = 0; k < 6; ++k) v[4 + k] = u * x[pbd_sm__quad_a(k)] * x[pbd_sm__quad_b(k)];
}
/* Region r's centre c^ = sum u' x~ / sum u' (over all its particles)
   and Q = sum u (x~ - c^)(x~ - c~)^T (over those it moves) from its
   weight sums; 0 when every particle is held. */
static PBD_HD int pbd_sm__volume_spread(const pbd_sm__body *b, int r, double *ch, double *Q) {
    const double *S = b->vsums + (size_t)r * PBD_SM__VOLUME_K, *cb = b->cbar + 3 * (size_t)r;
    double xx[9];
    if (!(S[0] > 0) || !(S[10] > 0)) return 0;
    for (int a = 0; a < 3; ++a) ch[a] = S[11 + a] / S[10];
    for (int k = 0; k < 6; ++k) {
        int u = pbd_sm__quad_a(k), v = pbd_sm__quad_b(k);
        xx[3 * u + v] = xx[3 * v + u] = S[4 + k];
    }
    for (int a = 0; a < 3; ++a)
        for (int d = 0; d < 3; ++d)
            Q[3 * a + d] = xx[3 * a + d] - S[1 + a] * cb[d] - ch[a] * S[1 + d] + S[0] * ch[a] * cb[d];
    return 1;
}
/* Region r's correction as a function over phi(x~) into T (3 x nb):
   -lambda G (x~ - c^), zero where the region is inverted or collapsed
   (det F <= PBD_SM__LINEAR_DET_MIN, as in the goals) or all held. About
   c^, the u'-weighted rest centre, not c~: with no particle held, the
   corrections u_i G (x~_i - c^) of a region sum to zero, and so do m_i
   times particle i's (the mean of its regions', u_i = m_i / |R_i|^2 per
   region): the term keeps momentum (what the colliders hold takes it
   otherwise). lambda = C / sum u (G (x~ - c~)) . (G (x~ - c^)), the
   change of C along that direction (grad_i C holds x~_i - c~). */
static PBD_HD void pbd_sm__region_volume(pbd_sm__body *b, int r) {
    int nb = pbd_sm__body_nb(b);
    double c[3], Apq[9], R[9], F[9], adj[9], G[9], Q[9], cb[3], *T = b->T + (size_t)r * 3 * nb;
    for (int k = 0; k < 3 * nb; ++k) T[k] = 0;
    if (!pbd_sm__volume_spread(b, r, cb, Q)) return;
    pbd_sm__region_moments(b, r, c, Apq);
    pbd_sm__quat_to_mat(b->rot + 4 * (size_t)r, R); /* completes flat regions, as in the goals */
    pbd_sm__region_linear(b, r, Apq, R, F);
    double det = pbd_sm__mx_det3(F);
    if (!(det > PBD_SM__LINEAR_DET_MIN)) return;
    pbd_sm__mx_inv3(F, 1, adj);                              /* adj(F) = cof(F)^T */
    pbd_sm__mx_mul3_at(adj, b->Aqq_pinv + 9 * (size_t)r, G); /* cof(F) A_qq^-1 */
    double GtG[9], den = 0;
    pbd_sm__mx_mul3_at(G, G, GtG);
    for (int k = 0; k < 9; ++k) den += GtG[k] * Q[k];
    if (!(den > PBD_SM__VOLUME_DEN_MIN)) return;
    double lambda = (det - 1) / den;
    for (int a = 0; a < 3; ++a) {
        double *t = T + a * nb;
        for (int j = 0; j < 3; ++j) {
            t[0] += lambda * G[3 * a + j] * cb[j];
            t[1 + j] = -lambda * G[3 * a + j];
        }
    }
}
/* p_i += alpha (gathered correction) for a dynamic particle no collider
   holds (pbd_sm__particle_goal about the origin 0: the sum of its
   regions' corrections times 1 / |R_i|). */
static PBD_HD void pbd_sm__volume_apply(const pbd_sm__body *b, float *p, double alpha, int i, float push) {
    float *x = p + 4 * (size_t)b->idx[i];
    if (x[3] == 0 || push > 0 || b->inv_nreg[i] == 0) return;
    double d[3];
    const double zero[3] = {0, 0, 0};
    pbd_sm__particle_goal(b, i, zero, d);
    double s = alpha * PBD_SM__VOLUME_OMEGA * b->inv_nreg[i]; /* over-relaxed mean of its regions' */
    for (int a = 0; a < 3; ++a) x[a] = (float)(x[a] + s * d[a]);
}
/* alpha per iteration for the volume stiffness, as pbd_sm__alpha. */
static double pbd_sm__volume_alpha(const pbd_sm__body *b, int iterations) {
    return pbd_sm__per_iteration(b, b->volume, iterations);
}
static void pbd_sm__stage_volume_weights(pbd_sm__body *b, const pbd_world *w, const float *p, int lo, int hi) {
    for (int i = lo; i < hi; ++i) pbd_sm__volume_weight(b, p, i, pbd_world_particle_contact_push(w, b->idx[i]));
}
static void pbd_sm__stage_volume_apply(pbd_sm__body *b, const pbd_world *w, float *p, double alpha, int lo, int hi) {
    for (int i = lo; i < hi; ++i) pbd_sm__volume_apply(b, p, alpha, i, pbd_world_particle_contact_push(w, b->idx[i]));
}
/* One sweep of the volume term on positions p, the weight sums done:
   the region sums of p, the regions' corrections, their gather, the
   moves (serial). */
static void pbd_sm__volume_sweep(pbd_sm__body *b, const pbd_world *w, float *p, double alpha) {
    double o[3];
    pbd_sm__origin(b, p, o);
    pbd_sm__stage_values(b, p, o, 0, b->n);
    pbd_sm__stage_sums(b);
    for (int r = 0; r < b->nr; ++r) pbd_sm__region_volume(b, r);
    if (b->symmetric) pbd_sm__stage_gather_plan(b);
    else pbd_sm__stage_gather_lists(b, 0, b->n);
    pbd_sm__stage_volume_apply(b, w, p, alpha, 0, b->n);
}
/* The same by this thread of the team (pbd_sm__solve's sharing). */
static void pbd_sm__volume_sweep_team(pbd_sm__body *b, pbd_sm__team tm, const pbd_world *w, float *p, double alpha) {
    double o[3];
    int lo, hi;
    pbd_sm__origin(b, p, o); /* every thread reads it before p moves (after the last barrier but one) */
    pbd_sm__chunk(tm, b->n, &lo, &hi);
    pbd_sm__stage_values(b, p, o, lo, hi);
    pbd_sm__barrier(tm);
    pbd_sm__stage_sums_team(b);
    pbd_sm__chunk(tm, b->nr, &lo, &hi);
    for (int r = lo; r < hi; ++r) pbd_sm__region_volume(b, r);
    pbd_sm__barrier(tm);
    pbd_sm__chunk(tm, b->n, &lo, &hi);
    if (b->symmetric) pbd_sm_plan_sum_team(b->plan, b->T, 3 * pbd_sm__body_nb(b), b->G);
    else pbd_sm__stage_gather_lists(b, lo, hi);
    pbd_sm__stage_volume_apply(b, w, p, alpha, lo, hi);
    pbd_sm__barrier(tm);
}
/* The volume term after the contacts (see above) by this thread of the
   team: the weight sums (which particles the colliders hold does not
   change in it), then PBD_SM__VOLUME_SWEEPS sweeps; a small body on
   thread 0 alone, a large one shared as in pbd_sm__solve. */
static void pbd_sm__keep_volumes(pbd_sm__body *b, pbd_sm__team tm, const pbd_world *w, float *p, double alpha) {
    if (tm.T == 1 || b->work < b->parallel_min) {
        if (tm.t == 0) {
            pbd_sm__stage_volume_weights(b, w, p, 0, b->n);
            pbd_sm__plan_sum_serial(b->plan, b->values, PBD_SM__VOLUME_K, b->vsums);
            for (int s = 0; s < PBD_SM__VOLUME_SWEEPS; ++s) pbd_sm__volume_sweep(b, w, p, alpha);
        }
        pbd_sm__barrier(tm);
        return;
    }
    int lo, hi;
    pbd_sm__chunk(tm, b->n, &lo, &hi);
    pbd_sm__stage_volume_weights(b, w, p, lo, hi);
    pbd_sm__barrier(tm);
    pbd_sm_plan_sum_team(b->plan, b->values, PBD_SM__VOLUME_K, b->vsums); /* ends in a barrier: values free */
    for (int s = 0; s < PBD_SM__VOLUME_SWEEPS; ++s) pbd_sm__volume_sweep_team(b, tm, w, p, alpha);
}

/* On a GPU world (b->gpu) the callbacks launch the same stages' kernels. */
static int pbd_sm__on_gpu(pbd_sm__body *b, const pbd_solve_context *c, int what) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (b->gpu) return pbd_sm__cuda_body(b, sizeof *b, c, what), 1;
#else
    (void)b;
    (void)c;
    (void)what;
#endif
    return 0;
}

static void pbd_sm__plugin_project(void *user, const pbd_solve_context *c) {
    pbd_sm__body *b = (pbd_sm__body *)user;
    if (!(b->alpha > 0) || pbd_sm__on_gpu(b, c, PBD_SM__CUDA_PROJECT)) return;
    pbd_sm__solve(b, pbd_sm__context_team(c), c->p, b->rot, pbd_sm__alpha(b, c->iterations), 0, 0);
}

static void pbd_sm__plugin_project_after_contacts(void *user, const pbd_solve_context *c) {
    pbd_sm__body *b = (pbd_sm__body *)user;
    int rigid = pbd_sm__is_rigid(b);
    if (!rigid && !pbd_sm__keeps_volume(b)) return;
    if (pbd_sm__on_gpu(b, c, PBD_SM__CUDA_AFTER_CONTACTS)) return;
    pbd_sm__team tm = pbd_sm__context_team(c);
    if (!rigid) {
        pbd_sm__keep_volumes(b, tm, c->world, c->p, pbd_sm__volume_alpha(b, c->iterations));
        return;
    }
    if (tm.t == 0) {
        pbd_sm__rigid_weights(b, c->world, c->p);
        pbd_sm__rigid_match(b, c->p);
    }
    pbd_sm__barrier(tm);
}

static void pbd_sm__plugin_end_substep(void *user, const pbd_solve_context *c) {
    pbd_sm__body *b = (pbd_sm__body *)user;
    if (pbd_sm__on_gpu(b, c, PBD_SM__CUDA_END)) return;
    if (pbd_sm__is_rigid(b)) {
        pbd_sm__team tm = pbd_sm__context_team(c);
        if (tm.t == 0) {
            pbd_sm__rigid_weights(b, c->world, c->x);
            pbd_sm__rigid_fit_velocities(b, c->x, c->v, c->h);
        }
        pbd_sm__barrier(tm);
    }
    if (!(b->creep > 0)) return;
    pbd_sm__solve(b, pbd_sm__context_team(c), c->x, b->rot, 0, 1, c->h);
}

/* What a step changes of a body (its rotations and plastic states) is
   kept at the start of the step and put back when pbd_world_step rolls a
   non-finite step back (pbd.h, pbd_plugin_desc.rollback). */
static void pbd_sm__plugin_begin_step(void *user, pbd_world *w, float dt) {
    pbd_sm__body *b = (pbd_sm__body *)user;
    (void)w;
    (void)dt;
    if (b->gpu) {
        pbd_sm__body_gpu(b, PBD_SM__CUDA_KEEP);
        return;
    }
    memcpy(b->rot_step, b->rot, sizeof(double) * 4 * (size_t)b->nr);
    memcpy(b->Sp_step, b->Sp, sizeof(double) * 9 * (size_t)b->nr);
}
static void pbd_sm__plugin_rollback(void *user, pbd_world *w) {
    pbd_sm__body *b = (pbd_sm__body *)user;
    (void)w;
    if (b->gpu) {
        pbd_sm__body_gpu(b, PBD_SM__CUDA_ROLLBACK);
        return;
    }
    memcpy(b->rot, b->rot_step, sizeof(double) * 4 * (size_t)b->nr);
    memcpy(b->Sp, b->Sp_step, sizeof(double) * 9 * (size_t)b->nr);
}

/* The body's state in snapshots (pbd_sm__io): its rotations (the warm
   starts) and plastic states, and what its setters change (stiffness,
   mode and beta, plasticity). */
static void pbd_sm__body_state(pbd_sm__io *io, void *thing) {
    pbd_sm__body *b = (pbd_sm__body *)thing;
    if (io->out) pbd_sm__body_gpu(b, PBD_SM__CUDA_FETCH); /* a GPU world's state, current */
    static const char *const names[] = {"particle count", "region count", "quadratic mode"};
    int counts[3] = {b->n, b->nr, b->mode == PBD_SM_QUADRATIC};
    pbd_sm__io_head(io, PBD_SM__TAG_BODY, counts, 3, names);
    uint32_t h = pbd_sm__fnv(PBD_SM__FNV_START, b->idx, sizeof(int) * (size_t)b->n);
    for (int i = 0; i < 3 * b->n; ++i) { /* the rest shape, to float: alike on every build */
        float x = (float)b->xbar[i];
        h = pbd_sm__fnv(h, &x, sizeof x);
    }
    pbd_sm__io_built(io, PBD_SM__TAG_BODY, b->n > 0 ? b->idx[0] : -1, h);
    /* the parameters, floats the body keeps as doubles */
    double par[5] = {b->alpha, b->beta, b->yield, b->creep, b->maxp};
    int mode = (int)b->mode, sp_identity = b->sp_identity;
    for (int k = 0; k < 5; ++k) pbd_sm__io_double(io, &par[k]);
    pbd_sm__io_int(io, &mode);
    pbd_sm__io_int(io, &sp_identity);
    size_t nr = (size_t)b->nr;
    pbd_sm__io_doubles(io, b->rot, 4 * nr, "rotation");
    const unsigned char *Sp = pbd_sm__io_doubles(io, b->Sp, 9 * nr, "plastic state");
    if (!io->in || io->why[0]) return;
    if (!io->commit) {
        for (int k = 0; k < 5; ++k)
            if ((double)(float)par[k] != par[k] && par[k] == par[k]) {
                pbd_sm__io_refuse(io, "parameter %d is %.17g, not a float", k, par[k]);
                return;
            }
        if (pbd_sm__check_params((pbd_sm_mode)mode, (float)par[1], (float)par[0], (float)par[2], (float)par[3],
                                 (float)par[4], b->rot_iters) != PBD_OK) {
            const char *m = pbd_last_error(), *c = strstr(m, ": ");
            pbd_sm__io_refuse(io, "%s", c ? c + 2 : m);
            return;
        }
        if ((mode == PBD_SM_QUADRATIC) != (b->mode == PBD_SM_QUADRATIC) || (sp_identity != 0 && sp_identity != 1)) {
            pbd_sm__io_refuse(io, "mode %d and identity flag %d do not fit a body built in mode %d", mode, sp_identity,
                              (int)b->mode);
            return;
        }
        for (size_t r = 0; Sp && r < nr; ++r) {
            double S[9];
            for (int e = 0; e < 9; ++e) {
                S[e] = pbd_sm__io_at(Sp, 9 * r + (size_t)e);
                if (sp_identity && S[e] != (e % 4 == 0 ? 1.0 : 0.0)) {
                    pbd_sm__io_refuse(io, "region %zu: the plastic state is not I, the flag says it is", r);
                    return;
                }
            }
            if (!(pbd_sm__mx_det3(S) > PBD_SM__PLASTIC_DET_MIN)) {
                pbd_sm__io_refuse(io, "region %zu: the plastic state's determinant is %g", r, pbd_sm__mx_det3(S));
                return;
            }
        }
        return;
    }
    b->alpha = par[0];
    b->beta = par[1];
    b->yield = par[2];
    b->creep = par[3];
    b->maxp = par[4];
    b->mode = (pbd_sm_mode)mode;
    b->sp_identity = sp_identity;
    pbd_sm__body_gpu(b, PBD_SM__CUDA_PUSH); /* the rotations and plastic states to the device */
}

static void pbd_sm__plugin_destroy(void *user) { pbd_sm__body_free((pbd_sm__body *)user); }
static int pbd_sm__plugin_uses(void *user, const unsigned char *marked, int n) {
    const pbd_sm__body *b = (const pbd_sm__body *)user;
    return pbd_sm__marked_list(marked, n, b->idx, b->n);
}

static pbd_result pbd_sm__body_attach(pbd_world *w, pbd_sm__body *b, int mark_coupled) {
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    int end = 0;
    for (int i = 0; i < b->n; ++i)
        if (b->idx[i] + 1 > end) end = b->idx[i] + 1;
    pd.name = "pbd_sm shape-matching body";
    pd.user = b;
    pd.kind = pbd_sm__plugin_kind(PBD_SM__TAG_BODY);
    pd.parallel = 1;
    pd.particle_end = end;
    pd.work = b->work;
    pd.project = pbd_sm__plugin_project;
    pd.project_after_contacts = pbd_sm__plugin_project_after_contacts;
    pd.end_substep = pbd_sm__plugin_end_substep;
    pd.begin_step = pbd_sm__plugin_begin_step;
    pd.rollback = pbd_sm__plugin_rollback;
    pd.save_state = pbd_sm__state_save;
    pd.load_state = pbd_sm__state_load;
    pd.destroy = pbd_sm__plugin_destroy;
    pd.uses_particles = pbd_sm__plugin_uses;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU) { /* its arrays on the device, its callbacks launch kernels */
        pd.device = 1;
        if (!pbd_sm__cuda_body(b, sizeof *b, NULL, PBD_SM__CUDA_UPLOAD))
            return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "%s: out of device memory for a body of %d particles",
                                  pd.name, b->n);
    }
#endif
    pbd_result r = pbd_add_plugin(w, &pd, &b->plugin);
    if (r != PBD_OK) return r;
    if (mark_coupled) pbd_world_mark_coupled(w, b->idx, b->n);
    return PBD_OK;
}

/* Every region non-empty; the plan's own checks made the rest valid. */
static pbd_result pbd_sm__check_plan(const pbd_sm_sum_plan *p, int n) {
    if (p->particle_count != n || p->region_count < 1)
        return pbd_world_fail(
            NULL, PBD_ERROR_INVALID_ARGUMENT,
            "plan: %d particles and %d regions, the body has %d particles (the plan needs as many and >= 1 region)",
            p->particle_count, p->region_count, n);
    for (int r = 0; r < p->region_count; ++r)
        if (p->region_start[r + 1] <= p->region_start[r])
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "the plan's region %d is empty", r);
    return PBD_OK;
}

/* Every local particle of a body's region lists is in a region: one in
   none would never be matched (it would fall on its own, unnoticed).
   seen: n ints of scratch. */
static pbd_result pbd_sm__check_covered(pbd_world *w, int n, int region_count, const int *start, const int *members,
                                        int *seen) {
    memset(seen, 0, sizeof(int) * (size_t)n);
    for (int e = 0; e < start[region_count]; ++e) seen[members[e]] = 1;
    int missing = 0, first = -1;
    for (int i = 0; i < n; ++i)
        if (!seen[i]) {
            if (first < 0) first = i;
            ++missing;
        }
    if (!missing) return PBD_OK;
    return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                          "pbd_sm_add_body: %d of the %d particles are in no region (the first: local particle %d); "
                          "a particle in no region would never be matched",
                          missing, n, first);
}

PBD_SM_DEF pbd_result pbd_sm_add_body(pbd_world *w, const pbd_sm_body_desc *d, pbd_sm_body *out) {
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_body: w is NULL");
#if !defined(PBD_CUDA) && !defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU)
        return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED,
                              "pbd_sm_add_body: a GPU world needs PBD_CUDA where PBD_SM_IMPLEMENTATION is");
#endif
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_body: d is NULL");
    if (!d->particles)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_body: pbd_sm_body_desc.particles is NULL");
    int n = d->particle_count, wn = pbd_world_particle_count(w);
    if (n < 1) return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_body: particle_count %d < 1", n);
    pbd_result res = pbd_world_fail_in(w, "pbd_sm_add_body",
                                       pbd_sm__check_params(d->mode, d->beta, d->stiffness, d->yield, d->creep,
                                                            d->max_plastic, d->rotation_iterations));
    if (res == PBD_OK) res = pbd_world_fail_in(w, "pbd_sm_add_body", pbd_sm__check_volume(d->volume));
    if (res == PBD_OK) res = pbd_world_fail_in(w, "pbd_sm_add_body", pbd_sm__check_switches(d));
    if (res != PBD_OK) return res;
    for (int i = 0; i < n; ++i)
        if (d->particles[i] < 0 || d->particles[i] >= wn)
            return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_add_body: particles[%d] = %d is not a particle of the world (0..%d)", i,
                                  d->particles[i], wn - 1);
    if (d->plan && d->region_start)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_body: give pbd_sm_body_desc.plan or region_start, not both");
    if (!d->plan && !d->region_start && (d->region_count != 0 || d->region_particles))
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_add_body: region_start is NULL while region_count is %d%s (leave all three "
                              "unset for one cluster of every particle)",
                              d->region_count, d->region_particles ? " and region_particles is set" : "");
    float *rest = (float *)pbd_sm__alloc_n(w, (size_t)n * 3, sizeof(float));
    float *mass = (float *)pbd_sm__alloc_n(w, (size_t)n, sizeof(float));
    int *seen = (int *)pbd_sm__alloc_n(w, (size_t)wn, sizeof(int));
    if (!rest || !mass || !seen) res = pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_body: out of memory");
    if (res == PBD_OK) {
        memset(seen, 0, sizeof(int) * (size_t)wn);
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < n && res == PBD_OK; ++i) {
            int j = d->particles[i];
            if (seen[j]) { /* seen[j]: 1 + the entry that listed it first (the message names both) */
                res = pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                     "pbd_sm_add_body: particle %d is listed twice (particles[%d] and particles[%d])",
                                     j, seen[j] - 1, i);
                break;
            }
            seen[j] = i + 1;
            for (int a = 0; a < 3; ++a)
                rest[3 * i + a] = d->rest_positions ? d->rest_positions[3 * i + a] : x[4 * j + a];
            if (d->masses) mass[i] = d->masses[i];
            else pbd_particle_get_mass(w, j, &mass[i]);
            for (int a = 0; a < 3 && res == PBD_OK; ++a)
                if (!pbd_sm__finite(rest[3 * i + a]))
                    res = pbd_world_fail(w, PBD_ERROR_NOT_FINITE,
                                         "pbd_sm_add_body: the rest position of local particle %d (world particle %d) "
                                         "is not finite (axis %d: %g)",
                                         i, j, a, (double)rest[3 * i + a]);
                else if (!(fabsf(rest[3 * i + a]) <= PBD_MAX_COORDINATE)) /* as pbd.h's builders */
                    res = pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                         "pbd_sm_add_body: the rest position of local particle %d (world particle %d) "
                                         "is %g m on axis %d, beyond PBD_MAX_COORDINATE = %g m",
                                         i, j, (double)rest[3 * i + a], a, (double)PBD_MAX_COORDINATE);
            if (!pbd_sm__finite(mass[i]))
                res = pbd_world_fail(
                    w, PBD_ERROR_NOT_FINITE,
                    "pbd_sm_add_body: the mass of local particle %d (world particle %d) is not finite (%g)", i, j,
                    (double)mass[i]);
            else if (mass[i] < 0 && res == PBD_OK)
                res = pbd_world_fail(w, PBD_ERROR_NEGATIVE_MASS,
                                     "pbd_sm_add_body: the mass of local particle %d (world particle %d) is %g < 0", i,
                                     j, (double)mass[i]);
            else if (mass[i] != 0 && !(mass[i] >= PBD_MIN_MASS && mass[i] <= PBD_MAX_MASS) && res == PBD_OK) {
                char value[32];
                res = pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                     "pbd_sm_add_body: the mass of local particle %d (world particle %d) is %s kg, "
                                     "outside [PBD_MIN_MASS, PBD_MAX_MASS] = [%g, %g] kg (or 0)",
                                     i, j, pbd_format_float(mass[i], value, sizeof value), (double)PBD_MIN_MASS,
                                     (double)PBD_MAX_MASS);
            }
        }
    }
    pbd_sm_sum_plan *plan = d->plan, *made = NULL;
    if (res == PBD_OK && !plan) {
        if (d->region_start) {
            res = pbd_world_fail_in(
                w, "pbd_sm_add_body",
                pbd_sm__plan_naive(w, n, d->region_count, d->region_start, d->region_particles, &made));
            if (res == PBD_OK)
                res = pbd_sm__check_covered(w, n, d->region_count, d->region_start, d->region_particles, seen);
        } else { /* one cluster of every particle (survey 4.1) */
            int start[2] = {0, n};
            for (int i = 0; i < n; ++i) seen[i] = i;
            res = pbd_world_fail_in(w, "pbd_sm_add_body", pbd_sm__plan_naive(w, n, 1, start, seen, &made));
        }
        plan = made;
    }
    if (res == PBD_OK) res = pbd_world_fail_in(w, "pbd_sm_add_body", pbd_sm__check_plan(plan, n));
    pbd_sm__body *b = NULL;
    if (res == PBD_OK)
        res = pbd_world_fail_in(w, "pbd_sm_add_body",
                                pbd_sm__body_build(w, n, plan, made ? 1 : d->owns_plan != 0, rest, mass, d, &b));
    pbd_sm__free(w, rest);
    pbd_sm__free(w, mass);
    pbd_sm__free(w, seen);
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
    if (out) out->id = b->plugin.id;
    return PBD_OK;
}

/* The body a handle names (pbd_sm__resolve), or the error. */
static pbd_result pbd_sm__body_of(const pbd_world *w, pbd_sm_body h, const char *fn, pbd_sm__body **b) {
    void *u = NULL;
    pbd_result r = pbd_sm__resolve(w, h.id, PBD_SM__TAG_BODY, fn, &u);
    *b = (pbd_sm__body *)u;
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_remove_body(pbd_world *w, pbd_sm_body body) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_remove_body", &b);
    if (r != PBD_OK) return r;
    return pbd_remove_plugin(w, b->plugin); /* frees the body */
}

PBD_SM_DEF pbd_sm_lattice_desc pbd_sm_lattice_desc_default(void) {
    pbd_sm_lattice_desc d;
    memset(&d, 0, sizeof d);
    d.spacing = 0.1f;
    d.particle_mass = 1.0f;
    d.half_width = 0;
    d.body = pbd_sm_body_desc_default();
    return d;
}

PBD_SM_DEF pbd_result pbd_sm_lattice_box(int nx, int ny, int nz, int *cells) {
    if (!cells) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_lattice_box: cells is NULL");
    if (nx < 1 || ny < 1 || nz < 1) /* the first at fault */
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_lattice_box: %s %d must be >= 1",
                              nx < 1   ? "nx"
                              : ny < 1 ? "ny"
                                       : "nz",
                              nx < 1   ? nx
                              : ny < 1 ? ny
                                       : nz);
    if ((double)nx * ny * nz > (double)(INT_MAX / 3))
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_sm_lattice_box: %d x %d x %d cells are too many (at most %d)", nx, ny, nz,
                              INT_MAX / 3);
    int k = 0;
    for (int z = 0; z < nz; ++z)
        for (int y = 0; y < ny; ++y)
            for (int x = 0; x < nx; ++x) {
                cells[k++] = x;
                cells[k++] = y;
                cells[k++] = z;
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
            double t = xs[j];
            xs[j] = xs[j - 1];
            xs[j - 1] = t;
        }
    return n;
}

/* No cell centre inside: the mesh encloses nothing (open: a ray crosses
   it an odd number of times or not at all) or nothing a cell centre of this
   spacing falls in. A lattice needs one cell (pbd_sm_add_lattice), so this
   is an error, DEGENERATE as pbd.h's mesh that encloses no volume. */
static pbd_result pbd_sm__voxelize_refuse_no_cell(float spacing) {
    return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                          "pbd_sm_voxelize: no cell centre lies inside the mesh at spacing %g: it is thinner than a "
                          "cell",
                          (double)spacing);
}

/* A closed, consistently oriented mesh (pbd_find_open_edge), else why not,
   naming the edge by its vertices' names (names NULL: their indices), with
   `who`'s name. */
static pbd_result pbd_sm__check_closed(pbd_world *w, const int *tri, int nt, const int *names, const char *who) {
    int a = 0, b = 0, open = pbd_find_open_edge(w, tri, nt, &a, &b);
    if (open < 0) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "%s: out of memory", who);
    if (names) {
        a = names[a];
        b = names[b];
    }
    if (open == 1)
        return pbd_world_fail(NULL, PBD_ERROR_NOT_CLOSED,
                              "%s: edge (%d, %d) is in two triangles in the same direction (the surface is not "
                              "consistently oriented or not a manifold)",
                              who, a, b);
    if (open == 2)
        return pbd_world_fail(NULL, PBD_ERROR_NOT_CLOSED,
                              "%s: edge (%d, %d) has no opposite edge (the surface is not closed or not consistently "
                              "oriented)",
                              who, a, b);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_voxelize(const float *P, int nv, const int *T, int nt, float spacing, float *origin,
                                      int *cells, int max_cells, int *count) {
    if (!P) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_voxelize: positions is NULL");
    if (!T) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_voxelize: triangles is NULL");
    if (!origin) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_voxelize: origin is NULL");
    if (!count) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_voxelize: count is NULL");
    if (nv < 3)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_voxelize: vertex_count %d must be >= 3", nv);
    if (nt < 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_voxelize: triangle_count %d must be >= 1", nt);
    if (max_cells < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_voxelize: max_cells %d must be >= 0",
                              max_cells);
    if (!pbd_sm__finite(spacing))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_sm_voxelize: spacing is not finite (%g)",
                              (double)spacing);
    if (!(spacing > 0))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_voxelize: spacing %g must be > 0",
                              (double)spacing);
    for (long k = 0; k < 3L * nt; ++k)
        if (T[k] < 0 || T[k] >= nv)
            return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_voxelize: triangle %ld names vertex %d, outside 0..%d", k / 3, T[k], nv - 1);
    /* the parity of a ray's crossings means inside only for a closed mesh */
    pbd_result closed = pbd_sm__check_closed(NULL, T, nt, NULL, "pbd_sm_voxelize");
    if (closed != PBD_OK) return closed;
    double lo[3] = {DBL_MAX, DBL_MAX, DBL_MAX}, hi[3] = {-DBL_MAX, -DBL_MAX, -DBL_MAX};
    for (long k = 0; k < 3L * nv; ++k) {
        if (!pbd_sm__finite(P[k]))
            return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_sm_voxelize: positions[%ld] = %g is not finite", k,
                                  (double)P[k]);
        if (P[k] < lo[k % 3]) lo[k % 3] = P[k];
        if (P[k] > hi[k % 3]) hi[k % 3] = P[k];
    }
    int dim[3];
    for (int a = 0; a < 3; ++a) {
        double cnt = floor((hi[a] - lo[a]) / spacing) + 1;
        if (cnt > (1 << 20))
            return pbd_world_fail(
                NULL, PBD_ERROR_OVERFLOW,
                "pbd_sm_voxelize: the mesh is %g cells long along axis %d, over 1048576: spacing %g is too fine", cnt,
                a, (double)spacing);
        dim[a] = (int)cnt;
    }
    /* the cells of the box are counted in an int: a spacing so fine that
       they cannot be is refused, so that it is not scanned for hours */
    if ((double)dim[0] * dim[1] * dim[2] > (double)INT_MAX)
        return pbd_world_fail(
            NULL, PBD_ERROR_OVERFLOW,
            "pbd_sm_voxelize: the bounding box has %d x %d x %d cells, too many: spacing %g is too fine", dim[0],
            dim[1], dim[2], (double)spacing);
    double *xs = (double *)pbd_sm__alloc_n(NULL, (size_t)nt, sizeof(double));
    if (!xs) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_voxelize: out of memory");
    long n = 0;
    /* the ray is offset by irrational fractions of a cell, so it does not
       pass through a mesh vertex or edge of a mesh built on a grid */
    double oy = PBD_SM__RAY_OFFSET * spacing * 0.7548776662, oz = PBD_SM__RAY_OFFSET * spacing * 0.5698402910;
    for (int k = 0; k < dim[2]; ++k)
        for (int j = 0; j < dim[1]; ++j) {
            double y = lo[1] + spacing * (j + 0.5) + oy, z = lo[2] + spacing * (k + 0.5) + oz;
            int m = pbd_sm__voxel_row(P, T, nt, y, z, xs);
            for (int e = 0; e + 1 < m; e += 2) /* inside between crossings 2e and 2e+1 */
                for (int i = 0; i < dim[0]; ++i) {
                    double x = lo[0] + spacing * (i + 0.5);
                    if (x < xs[e] || x >= xs[e + 1]) continue;
                    if (cells && n < max_cells) {
                        cells[3 * n] = i;
                        cells[3 * n + 1] = j;
                        cells[3 * n + 2] = k;
                    }
                    if (++n > INT_MAX) {
                        pbd_sm__free(NULL, xs);
                        return pbd_world_fail(
                            NULL, PBD_ERROR_OVERFLOW,
                            "pbd_sm_voxelize: more than %d cells inside the mesh: spacing %g is too fine", INT_MAX,
                            (double)spacing);
                    }
                }
        }
    pbd_sm__free(NULL, xs);
    if (n == 0) return pbd_sm__voxelize_refuse_no_cell(spacing);
    for (int a = 0; a < 3; ++a) origin[a] = (float)(lo[a] + 0.5 * spacing);
    *count = (int)n;
    return PBD_OK;
}

/* Cell i's particle at p (origin + spacing * cell) within the world's
   bounds (pbd.h refuses coordinates beyond PBD_MAX_COORDINATE), checked
   here so that the message names the lattice's cell, origin and spacing
   rather than a point of pbd_add_particles' list. */
static pbd_result pbd_sm__check_lattice_point(pbd_world *w, const pbd_sm_lattice_desc *d, int i, const float *p) {
    for (int a = 0; a < 3; ++a) {
        if (pbd_sm__finite(p[a]) && fabsf(p[a]) <= PBD_MAX_COORDINATE) continue;
        const int *c = d->cells + 3 * (size_t)i;
        return pbd_world_fail(w, pbd_sm__finite(p[a]) ? PBD_ERROR_INVALID_ARGUMENT : PBD_ERROR_NOT_FINITE,
                              "pbd_sm_add_lattice: cell %d (%d, %d, %d) lies at %c = origin %g + spacing %g x %d = "
                              "%g m, beyond PBD_MAX_COORDINATE = %g m",
                              i, c[0], c[1], c[2], "xyz"[a], (double)d -> origin[a], (double)d -> spacing, c[a],
                              (double)p[a], (double)PBD_MAX_COORDINATE);
    }
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_lattice(pbd_world *w, const pbd_sm_lattice_desc *d, pbd_sm_body *out,
                                         pbd_range *range) {
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_lattice: w is NULL");
#if !defined(PBD_CUDA) && !defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU)
        return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED,
                              "pbd_sm_add_lattice: a GPU world needs PBD_CUDA where PBD_SM_IMPLEMENTATION is");
#endif
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_lattice: d is NULL");
    if (!d->cells)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_lattice: pbd_sm_lattice_desc.cells is NULL");
    int n = d->cell_count;
    if (n < 1) return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_lattice: cell_count %d < 1", n);
    if (d->half_width < 0)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_lattice: half_width %d < 0", d->half_width);
    static const char *const names[6] = {"spacing", "particle_mass", "radius", "origin[0]", "origin[1]", "origin[2]"};
    const float values[6] = {d->spacing, d->particle_mass, d->radius, d->origin[0], d->origin[1], d->origin[2]};
    pbd_result nonfinite = pbd_sm__check_finite_named(w, "pbd_sm_add_lattice", values, names, 6);
    if (nonfinite != PBD_OK) return nonfinite;
    if (!(d->spacing > 0))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_lattice: spacing %g must be > 0",
                              (double)d->spacing);
    if (d->radius < 0)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_lattice: radius %g must be >= 0",
                              (double)d->radius);
    /* checked here, not by pbd_add_particles, so that the messages name
       this desc's fields (its "mass" and "radius" are not the user's) */
    if (d->particle_mass < 0)
        return pbd_world_fail(w, PBD_ERROR_NEGATIVE_MASS, "pbd_sm_add_lattice: particle_mass %g < 0",
                              (double)d->particle_mass);
    if (!(d->particle_mass >= PBD_MIN_MASS && d->particle_mass <= PBD_MAX_MASS)) {
        char value[32];
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_lattice: particle_mass %s kg must be in [PBD_MIN_MASS, PBD_MAX_MASS] = "
                              "[%g, %g] kg",
                              pbd_format_float(d->particle_mass, value, sizeof value), (double)PBD_MIN_MASS,
                              (double)PBD_MAX_MASS);
    }
    const float radius = d->radius > 0 ? d->radius : 0.5f * d->spacing;
    if (radius > PBD_MAX_RADIUS)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_lattice: the particle radius %g m (%s) is above PBD_MAX_RADIUS = %g m",
                              (double)radius, d->radius > 0 ? "radius" : "radius 0: spacing / 2",
                              (double)PBD_MAX_RADIUS);
    const pbd_sm_body_desc *bd = &d->body;
    pbd_result res = pbd_world_fail_in(w, "pbd_sm_add_lattice",
                                       pbd_sm__check_params(bd->mode, bd->beta, bd->stiffness, bd->yield, bd->creep,
                                                            bd->max_plastic, bd->rotation_iterations));
    if (res == PBD_OK) res = pbd_world_fail_in(w, "pbd_sm_add_lattice", pbd_sm__check_volume(bd->volume));
    if (res == PBD_OK) res = pbd_world_fail_in(w, "pbd_sm_add_lattice", pbd_sm__check_switches(bd));
    if (res != PBD_OK) return res;
    pbd_sm_sum_plan *plan = NULL, *user_plan = bd->plan;
    /* half_width 0: one cluster of every cell in RIGID mode (a rigid body),
       else 1 */
    int whole = d->half_width == 0 && bd->mode == PBD_SM_RIGID;
    res = pbd_world_fail_in(
        w, "pbd_sm_add_lattice",
        pbd_sm__plan_lattice(w, n, d->cells, d->half_width > 0 ? d->half_width : 1, &plan)); /* validates the cells */
    if (res == PBD_OK && whole && !user_plan) {
        pbd_sm_plan_destroy(plan);
        plan = NULL;
        int *all = (int *)pbd_sm__alloc_n(w, (size_t)n, sizeof(int)), start[2] = {0, n};
        if (!all) res = pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_lattice: out of memory");
        for (int i = 0; i < n && all; ++i) all[i] = i;
        if (res == PBD_OK)
            res = pbd_world_fail_in(w, "pbd_sm_add_lattice", pbd_sm__plan_naive(w, n, 1, start, all, &plan));
        pbd_sm__free(w, all);
    }
    if (res == PBD_OK && user_plan) {
        pbd_sm_plan_destroy(plan);
        plan = NULL;
        res = pbd_world_fail_in(w, "pbd_sm_add_lattice", pbd_sm__check_plan(user_plan, n));
    }
    if (res != PBD_OK) {
        pbd_sm_plan_destroy(plan);
        return res;
    }
    float *pos = (float *)pbd_sm__alloc_n(w, (size_t)n * 3, sizeof(float));
    float *mass = (float *)pbd_sm__alloc_n(w, (size_t)n, sizeof(float));
    if (!pos || !mass) res = pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_lattice: out of memory");
    for (int i = 0; i < n && res == PBD_OK; ++i) {
        for (int a = 0; a < 3; ++a) pos[3 * i + a] = d->origin[a] + d->spacing * (float)d->cells[3 * i + a];
        mass[i] = d->particle_mass;
        res = pbd_sm__check_lattice_point(w, d, i, pos + 3 * i);
    }
    pbd_sm__body *b = NULL;
    if (res == PBD_OK)
        res = pbd_world_fail_in(w, "pbd_sm_add_lattice",
                                pbd_sm__body_build(w, n, user_plan ? user_plan : plan,
                                                   user_plan ? bd->owns_plan != 0 : 1, pos, mass, bd, &b));
    pbd_range r = {0, 0};
    if (res == PBD_OK) {
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = pos;
        pd.count = n;
        pd.mass = d->particle_mass;
        pd.radius = radius;
        res = pbd_add_particles(w, &pd, &r);
        if (res != PBD_OK) {
            if (user_plan) b->owns_plan = 0; /* the caller keeps it on failure */
            pbd_sm__body_free(b);            /* with our plan, which the body owned */
            b = NULL;
            plan = NULL;
        }
    }
    pbd_sm__free(w, pos);
    pbd_sm__free(w, mass);
    if (res != PBD_OK) {
        if (!b) pbd_sm_plan_destroy(plan); /* ours; NULL when the user's */
        return res;
    }
    for (int i = 0; i < n; ++i) b->idx[i] = r.first + i;
    res = pbd_sm__body_attach(w, b, bd->mark_coupled != 0);
    if (res != PBD_OK) {
        if (user_plan) b->owns_plan = 0;
        pbd_sm__body_free(b);
        pbd_remove_particles(w, r); /* nothing else uses them yet */
        return res;
    }
    if (out) out->id = b->plugin.id;
    if (range) *range = r;
    return PBD_OK;
}

/* --- omega rings ---------------------------------------------------------------- */

/* Vertex adjacency (CSR, sorted, without duplicates) of a mesh's elements. */
static pbd_result pbd_sm__rings_adjacency(int nv, const int *el, int ne, int arity, int **start_out, int **adj_out) {
    long pairs = (long)ne * arity * (arity - 1);
    if (pairs > INT_MAX)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_sm_mesh_rings: %d elements of arity %d make %ld vertex pairs, more than %d", ne,
                              arity, pairs, INT_MAX);
    int *start = (int *)pbd_sm__alloc_n(NULL, (size_t)nv + 1, sizeof(int));
    int *adj = (int *)pbd_sm__alloc_n(NULL, (size_t)pairs, sizeof(int));
    int *fill = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    if (!start || !adj || !fill) {
        pbd_sm__free(NULL, start);
        pbd_sm__free(NULL, adj);
        pbd_sm__free(NULL, fill);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_mesh_rings: out of memory");
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
    pbd_sm__free(NULL, fill);
    *start_out = start;
    *adj_out = adj;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_mesh_rings(int nv, const int *el, int ne, int arity, int omega, int *region_start,
                                        int *region_particles, int max, int *total) {
    if (!region_start) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_mesh_rings: region_start is NULL");
    if (!total) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_mesh_rings: total is NULL");
    if (ne > 0 && !el)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_mesh_rings: elements is NULL while element_count is %d", ne);
    if (nv < 1) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: vertex_count %d < 1", nv);
    if (ne < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: element_count %d < 0", ne);
    if (arity < 2)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: arity %d outside 2..4", arity);
    if (arity > 4)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: arity %d outside 2..4", arity);
    if (omega < 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: omega %d outside 1..64", omega);
    if (omega > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: omega %d outside 1..64", omega);
    if (max < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_mesh_rings: max %d < 0", max);
    for (long k = 0; k < (long)ne * arity; ++k)
        if (el[k] < 0 || el[k] >= nv)
            return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_mesh_rings: element %ld names vertex %d, outside 0..%d", k / arity, el[k],
                                  nv - 1);
    int *start = NULL, *adj = NULL;
    pbd_result res = pbd_sm__rings_adjacency(nv, el, ne, arity, &start, &adj);
    if (res != PBD_OK) return res;
    int *dist = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    int *queue = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    int *stamp = (int *)pbd_sm__alloc_n(NULL, (size_t)nv, sizeof(int));
    if (!dist || !queue || !stamp)
        res = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_mesh_rings: out of memory");
    long count = 0;
    int fill = region_particles && max >= 0;
    if (res == PBD_OK)
        for (int i = 0; i < nv; ++i) stamp[i] = -1;
    for (int v = 0; v < nv && res == PBD_OK; ++v) {
        int tail = pbd_sm__ring(v, omega, start, adj, queue, stamp, dist);
        region_start[v] = (int)count;
        if (fill && count + tail <= max) {
            qsort(queue, (size_t)tail, sizeof(int), pbd_sm__cmp_int);
            memcpy(region_particles + count, queue, sizeof(int) * (size_t)tail);
        }
        count += tail;
        if (count > INT_MAX)
            res =
                pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                               "pbd_sm_mesh_rings: the regions hold %ld vertices in all, more than %d", count, INT_MAX);
    }
    if (res == PBD_OK) {
        region_start[nv] = (int)count;
        *total = (int)count;
    }
    pbd_sm__free(NULL, start);
    pbd_sm__free(NULL, adj);
    pbd_sm__free(NULL, dist);
    pbd_sm__free(NULL, queue);
    pbd_sm__free(NULL, stamp);
    return res;
}

PBD_SM_DEF pbd_result pbd_sm_plan_rings(int nv, const int *el, int ne, int arity, int omega, pbd_sm_sum_plan **out) {
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_plan_rings: out is NULL");
    if (nv < 1) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_plan_rings: vertex_count %d < 1", nv);
    int *start = (int *)pbd_sm__alloc_n(NULL, (size_t)nv + 1, sizeof(int)), total = 0;
    if (!start) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_plan_rings: out of memory");
    pbd_result res = pbd_sm_mesh_rings(nv, el, ne, arity, omega, start, NULL, 0, &total);
    int *list = res == PBD_OK ? (int *)pbd_sm__alloc_n(NULL, (size_t)total, sizeof(int)) : NULL;
    if (res == PBD_OK && !list) res = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_plan_rings: out of memory");
    if (res == PBD_OK) res = pbd_sm_mesh_rings(nv, el, ne, arity, omega, start, list, total, &total);
    if (res == PBD_OK) res = pbd_sm__plan_from_lists(NULL, nv, nv, start, list, out);
    pbd_sm__free(NULL, start);
    pbd_sm__free(NULL, list);
    return res;
}

/* --- queries and parameters ------------------------------------------------------ */

PBD_SM_DEF pbd_result pbd_sm_body_particle_count(const pbd_world *w, pbd_sm_body body, int *count) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_particle_count", &b);
    if (r != PBD_OK) return r;
    if (!count) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_body_particle_count: count is NULL");
    *count = b->n;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_body_region_count(const pbd_world *w, pbd_sm_body body, int *count) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_region_count", &b);
    if (r != PBD_OK) return r;
    if (!count) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_body_region_count: count is NULL");
    *count = b->nr;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_body_plan(const pbd_world *w, pbd_sm_body body, pbd_sm_sum_plan **plan) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_plan", &b);
    if (r != PBD_OK) return r;
    if (!plan) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_body_plan: plan is NULL");
    *plan = b->plan;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_goals(pbd_world *w, pbd_sm_body body, float *goals) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_goals", &b);
    if (r != PBD_OK) return r;
    if (!goals) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_body_goals: goals is NULL");
    const float *x = pbd_world_positions(b->world);
    double o[3];
    pbd_sm__body_gpu(b, PBD_SM__CUDA_FETCH);
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

PBD_SM_DEF pbd_result pbd_sm_body_rotation(const pbd_world *w, pbd_sm_body body, int r, float *q) {
    pbd_sm__body *b;
    pbd_result res = pbd_sm__body_of(w, body, "pbd_sm_body_rotation", &b);
    if (res != PBD_OK) return res;
    if (!q) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_body_rotation: q is NULL");
    if (r < 0 || r >= b->nr)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_body_rotation: region %d outside 0..%d", r,
                              b->nr - 1);
    pbd_sm__body_gpu(b, PBD_SM__CUDA_FETCH);
    for (int k = 0; k < 4; ++k) q[k] = (float)b->rot[4 * (size_t)r + k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_plastic_state(const pbd_world *w, pbd_sm_body body, int r, float *Sp) {
    pbd_sm__body *b;
    pbd_result res = pbd_sm__body_of(w, body, "pbd_sm_body_plastic_state", &b);
    if (res != PBD_OK) return res;
    if (!Sp) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_body_plastic_state: Sp is NULL");
    if (r < 0 || r >= b->nr)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_body_plastic_state: region %d outside 0..%d", r,
                              b->nr - 1);
    pbd_sm__body_gpu(b, PBD_SM__CUDA_FETCH);
    for (int k = 0; k < 9; ++k) Sp[k] = (float)b->Sp[9 * (size_t)r + k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_stiffness(pbd_world *w, pbd_sm_body body, float stiffness) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_set_stiffness", &b);
    if (r != PBD_OK) return r;
    r = pbd_world_fail_in(w, "pbd_sm_body_set_stiffness",
                          pbd_sm__check_params(b->mode, (float)b->beta, stiffness, (float)b->yield, (float)b->creep,
                                               (float)b->maxp, b->rot_iters));
    if (r != PBD_OK) return r;
    b->alpha = stiffness;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_mode(pbd_world *w, pbd_sm_body body, pbd_sm_mode mode, float beta) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_set_mode", &b);
    if (r != PBD_OK) return r;
    r = pbd_world_fail_in(w, "pbd_sm_body_set_mode",
                          pbd_sm__check_params(mode, beta, (float)b->alpha, (float)b->yield, (float)b->creep,
                                               (float)b->maxp, b->rot_iters));
    if (r != PBD_OK) return r;
    if ((mode == PBD_SM_QUADRATIC) != (b->mode == PBD_SM_QUADRATIC))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_body_set_mode: the body's mode %d cannot become %d: PBD_SM_QUADRATIC is chosen "
                              "when the body is added (only RIGID and LINEAR swap)",
                              (int)b->mode, (int)mode);
    b->mode = mode;
    b->beta = beta;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_plasticity(pbd_world *w, pbd_sm_body body, float yield, float creep,
                                                 float max_plastic) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_set_plasticity", &b);
    if (r != PBD_OK) return r;
    r = pbd_world_fail_in(
        w, "pbd_sm_body_set_plasticity",
        pbd_sm__check_params(b->mode, (float)b->beta, (float)b->alpha, yield, creep, max_plastic, b->rot_iters));
    if (r != PBD_OK) return r;
    b->yield = yield;
    b->creep = creep;
    b->maxp = max_plastic;
    if (creep > 0) b->sp_identity = 0;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_set_parallel_min(pbd_world *w, pbd_sm_body body, long min_work) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_set_parallel_min", &b);
    if (r != PBD_OK) return r;
    if (min_work < 0)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_body_set_parallel_min: min_work %ld < 0",
                              min_work);
    b->parallel_min = min_work;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_body_reset_plasticity(pbd_world *w, pbd_sm_body body) {
    pbd_sm__body *b;
    pbd_result r = pbd_sm__body_of(w, body, "pbd_sm_body_reset_plasticity", &b);
    if (r != PBD_OK) return r;
    pbd_sm__body_gpu(b, PBD_SM__CUDA_FETCH); /* the rotations stay the device's (PUSH sends both) */
    for (int k = 0; k < b->nr; ++k)
        for (int e = 0; e < 9; ++e) b->Sp[9 * (size_t)k + e] = (e % 4 == 0) ? 1.0 : 0.0;
    b->sp_identity = !(b->creep > 0);
    pbd_sm__body_gpu(b, PBD_SM__CUDA_PUSH);
    return PBD_OK;
}

// ==== oriented ==============================================================

struct pbd_sm__oriented {
    uint32_t tag;     /* PBD_SM__TAG_ORIENTED */
    pbd_world *world; /* the owner: its allocator holds every array */
    pbd_plugin plugin;
    int first, count;
    float stiffness;
    int collide, rotation_iterations;
    double *q, *qp;              /* count*4: orientation at the start of the substep, predicted */
    double *omega;               /* count*3 */
    double *q_step, *omega_step; /* both at the start of the step: a non-finite step's rollback */
    double *rest_q;              /* count*4 */
    double *radii;               /* count*3 */
    double *rest;                /* count*3 rest positions */
    double *mass;                /* count: mass used for particles with inverse mass 0 */
    int *ring_start;             /* count+1 */
    int *ring;                   /* group members, local, centre first */
    void *gpu;                   /* on a GPU world: pbd_cuda.cu's copy (pbd_sm__cuda_oriented) */
};

#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
/* The set's stages on a GPU world (see "shape matching", "on a GPU
   world"); size: sizeof *o. */
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_sm__cuda_oriented(pbd_sm__oriented *o, size_t size, const pbd_solve_context *c, int what);
#endif
/* A GPU world's set: FETCH the orientations and angular velocities before
   a getter reads them, PUSH them after a setter wrote them; or a stage
   (c). Returns whether the set is on a GPU. */
static int pbd_sm__oriented_gpu(pbd_sm__oriented *o, const pbd_solve_context *c, int what) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (o->gpu) return pbd_sm__cuda_oriented(o, sizeof *o, c, what), 1;
#else
    (void)o;
    (void)c;
    (void)what;
#endif
    return 0;
}

struct pbd_sm_skin {
    const pbd_world *world; /* of the set; the skin itself is allocated with PBD_SM_MALLOC */
    pbd_sm_oriented set;    /* resolved again by every pbd_sm_skin_apply */
    int vertex_count, influences;
    int *bones;      /* vertex_count*influences, -1 unused */
    double *weights; /* normalised */
    double *local;   /* R(rest_q_b)^T (v_rest - x_rest_b), vertex_count*influences*3 */
    float *out;      /* pbd_sm_skin_apply_world's host array on a CPU world (its first call) */
    void *gpu;       /* on a GPU world: pbd_cuda.cu's copy (pbd_sm__cuda_skin, at the first
                        pbd_sm_skin_apply_world) */
};

#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
/* pbd_cuda.cu's side of a skin on a GPU world: its arrays on the device
   (PBD_SM__CUDA_UPLOAD: 1, or 0 for no device memory), an evaluation
   (PBD_SM__CUDA_EVAL: x the device's float4 particles of the set, o's
   device orientations; *out the device's vertices), PBD_SM__CUDA_FREE.
   sizes: sizeof *s and *o, checked against pbd_cuda.cu's copy of this
   header (-2: another pbd_sm.h). */
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_sm__cuda_skin(pbd_sm_skin *s, size_t size, const pbd_sm__oriented *o, size_t oriented_size, pbd_world *w,
                      const float *x, int what, const float **out);
#endif

static PBD_HD void pbd_sm__rotate(const double *R, const double *v, double *o) {
    for (int r = 0; r < 3; ++r) o[r] = R[3 * r] * v[0] + R[3 * r + 1] * v[1] + R[3 * r + 2] * v[2];
}
static PBD_HD void pbd_sm__rotate_back(const double *R, const double *v, double *o) {
    for (int c = 0; c < 3; ++c) o[c] = R[c] * v[0] + R[3 + c] * v[1] + R[6 + c] * v[2];
}

/* Skinned vertex v (pbd_sm_skin_apply's math, one vertex; a kernel's
   thread on a GPU world): x the float4 positions of the set's particles,
   q their orientations (4 doubles each). */
static PBD_HD void pbd_sm__skin_vertex(const pbd_sm_skin *s, const float *x, const double *q, int v, float *out) {
    double acc[3] = {0, 0, 0};
    for (int k = 0; k < s->influences; ++k) {
        size_t e = (size_t)v * s->influences + k;
        int b = s->bones[e];
        if (b < 0) continue;
        double R[9], rv[3];
        pbd_sm__quat_to_mat(q + 4 * b, R);
        pbd_sm__rotate(R, s->local + 3 * e, rv);
        for (int a = 0; a < 3; ++a) acc[a] += s->weights[e] * (x[4 * (size_t)b + a] + rv[a]);
    }
    for (int a = 0; a < 3; ++a) out[3 * (size_t)v + a] = (float)acc[a];
}

static PBD_HD void pbd_sm__quat_integrate_d(const double *q, const double *omega, double h, double *out) {
    double wl = sqrt(omega[0] * omega[0] + omega[1] * omega[1] + omega[2] * omega[2]);
    double r[4] = {q[0], q[1], q[2], q[3]};
    if (wl * h > PBD_SM__ANGLE_NONE) { /* below that q_p = q (survey 4.4, for stability) */
        double sn, cs;
        pbd_sm__sincos(0.5 * wl * h, &sn, &cs);
        double s = sn / wl;
        double dq[4] = {omega[0] * s, omega[1] * s, omega[2] * s, cs};
        pbd_sm__quat_mul_into(r, dq, 1); /* r = dq q, eq. 27 */
    }
    for (int k = 0; k < 4; ++k) out[k] = r[k];
}

static PBD_HD void pbd_sm__quat_angular_velocity_d(const double *q, const double *qp, double h, double *omega) {
    double r[4] = {qp[0], qp[1], qp[2], qp[3]}, qc[4] = {-q[0], -q[1], -q[2], q[3]};
    pbd_sm__quat_mul_into(r, qc, 0); /* r = q_p q^-1 */
    if (r[3] < 0)
        for (int k = 0; k < 4; ++k) r[k] = -r[k]; /* the shorter of r and -r */
    double s = sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    double angle = 2.0 * pbd_sm__atan2(s, r[3]);
    omega[0] = omega[1] = omega[2] = 0;
    if (!(angle > PBD_SM__ANGLE_NONE) || !(h > 0)) return;
    for (int k = 0; k < 3; ++k) omega[k] = r[k] / s * angle / h;
}

static PBD_HD void pbd_sm__ellipsoid_moment_d(double m, const double *r, const double *q, const double *rq, double *A) {
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

static void pbd_sm__oriented_free(pbd_sm__oriented *o) {
    if (!o) return;
    pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_FREE);
    pbd_sm__free(o->world, o->q);
    pbd_sm__free(o->world, o->qp);
    pbd_sm__free(o->world, o->omega);
    pbd_sm__free(o->world, o->rest_q);
    pbd_sm__free(o->world, o->q_step);
    pbd_sm__free(o->world, o->omega_step);
    pbd_sm__free(o->world, o->radii);
    pbd_sm__free(o->world, o->rest);
    pbd_sm__free(o->world, o->mass);
    pbd_sm__free(o->world, o->ring_start);
    pbd_sm__free(o->world, o->ring);
    pbd_sm__free(o->world, o);
}
static void pbd_sm__oriented_destroy_cb(void *user) { pbd_sm__oriented_free((pbd_sm__oriented *)user); }

/* The set's state in snapshots (pbd_sm__io): the orientations (at the
   start of the substep and predicted) and the angular velocities. */
static void pbd_sm__oriented_state(pbd_sm__io *io, void *thing) {
    pbd_sm__oriented *o = (pbd_sm__oriented *)thing;
    if (io->out) pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_FETCH); /* a GPU world's state, current */
    static const char *const names[] = {"first particle", "particle count", "group size total"};
    int counts[3] = {o->first, o->count, o->ring_start[o->count]};
    size_t n = (size_t)o->count;
    pbd_sm__io_head(io, PBD_SM__TAG_ORIENTED, counts, 3, names);
    const unsigned char *q[2];
    q[0] = pbd_sm__io_doubles(io, o->q, 4 * n, "orientation");
    q[1] = pbd_sm__io_doubles(io, o->qp, 4 * n, "predicted orientation");
    pbd_sm__io_doubles(io, o->omega, 3 * n, "angular velocity");
    if (!io->in || io->why[0]) return;
    if (io->commit) {
        pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_PUSH);
        return;
    }
    for (int a = 0; a < 2; ++a)
        for (size_t i = 0; i < n; ++i) {
            double qn = 0;
            for (int k = 0; k < 4; ++k)
                qn += pbd_sm__io_at(q[a], 4 * i + (size_t)k) * pbd_sm__io_at(q[a], 4 * i + (size_t)k);
            if (!(qn > PBD_SM__QUAT_NORM2_MIN)) {
                pbd_sm__io_refuse(io, "particle %zu: the %s has squared norm %g", i,
                                  a ? "predicted orientation" : "orientation", qn);
                return;
            }
        }
}
static int pbd_sm__oriented_uses(void *user, const unsigned char *marked, int n) {
    const pbd_sm__oriented *o = (const pbd_sm__oriented *)user;
    pbd_range r;
    r.first = o->first;
    r.count = o->count;
    return pbd_sm__marked_range(marked, n, r);
}
/* Orientations and angular velocities kept at the start of the step, put
   back when pbd_world_step rolls a non-finite step back. */
static void pbd_sm__oriented_begin_step(void *user, pbd_world *w, float dt) {
    pbd_sm__oriented *o = (pbd_sm__oriented *)user;
    (void)w;
    (void)dt;
    if (pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_KEEP)) return;
    memcpy(o->q_step, o->q, sizeof(double) * 4 * (size_t)o->count);
    memcpy(o->omega_step, o->omega, sizeof(double) * 3 * (size_t)o->count);
}
/* The predicted orientations too: between steps they equal q (each
   substep ends with q = qp), and snapshots hold them, so a rolled-back
   world saves the bytes it saved before the step. */
static void pbd_sm__oriented_rollback(void *user, pbd_world *w) {
    pbd_sm__oriented *o = (pbd_sm__oriented *)user;
    (void)w;
    if (pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_ROLLBACK)) return;
    memcpy(o->q, o->q_step, sizeof(double) * 4 * (size_t)o->count);
    memcpy(o->qp, o->q_step, sizeof(double) * 4 * (size_t)o->count);
    memcpy(o->omega, o->omega_step, sizeof(double) * 3 * (size_t)o->count);
}

/* The mass a group weighs particle j with: its dynamic mass, or for a
   pinned/kinematic particle its mass at creation. */
static PBD_HD double pbd_sm__oriented_mass(const pbd_sm__oriented *o, const float *p, int j) {
    float wi = p[4 * (o->first + j) + 3];
    return wi > 0 ? 1.0 / wi : o->mass[j];
}

/* Whether the orientation of particle g, of inverse mass 0, follows its
   group's rotation (the match's `turns`): yes when it is kinematic (a hand holds a point, not
   a rotation), no when it is pinned or massless (a root clamps the
   stem). It follows because a kinematic particle whose orientation
   stayed as it was grabbed would keep turning its neighbours back through
   its ellipsoid's moment while the hand bends the branch, so they would
   fight it and jitter (tests/test_sm_oriented.c: a chain bent by a
   hand). */
static int pbd_sm__oriented_turns(const pbd_sm__oriented *o, int g) {
    int kinematic = 0;
    return pbd_particle_get_kinematic(o->world, o->first + g, &kinematic) == PBD_OK && kinematic;
}

/* One group (survey 4.4): centre of mass c and rest centre, the moment
   matrix of eq. 25 (particle terms plus every member's ellipsoid, eq. 20),
   its rotation (warm-started polar decomposition), goals pulling the
   members with `stiffness`, and the centre's orientation R rest_q. */
static PBD_HD void pbd_sm__oriented_match(pbd_sm__oriented *o, float *p, int g, int turns) {
    const int *mem = o->ring + o->ring_start[g];
    int n = o->ring_start[g + 1] - o->ring_start[g];
    double M = 0, c[3] = {0, 0, 0}, cr[3] = {0, 0, 0}, A[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < n; ++e) {
        int j = mem[e];
        const float *pj = p + 4 * (o->first + j);
        double m = pbd_sm__oriented_mass(o, p, j);
        M += m;
        for (int k = 0; k < 3; ++k) {
            c[k] += m * pj[k];
            cr[k] += m * o->rest[3 * j + k];
        }
    }
    for (int k = 0; k < 3; ++k) {
        c[k] /= M;
        cr[k] /= M;
    }
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
    pbd_sm__extract_rotation(A, gq, o->rotation_iterations);
    pbd_sm__quat_to_mat(gq, R);
    for (int e = 0; e < n; ++e) {
        int j = mem[e];
        float *pj = p + 4 * (o->first + j);
        if (!(pj[3] > 0)) continue;
        double d[3] = {o->rest[3 * j] - cr[0], o->rest[3 * j + 1] - cr[1], o->rest[3 * j + 2] - cr[2]}, gj[3];
        pbd_sm__rotate(R, d, gj);
        for (int k = 0; k < 3; ++k) pj[k] = (float)(pj[k] + o->stiffness * (c[k] + gj[k] - pj[k]));
    }
    if (p[4 * (o->first + g) + 3] > 0 || turns) {
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
/* The support point s of particle i's ellipsoid against a collider at
   distance dist and normal nf from its centre (pbd_collider_closest's),
   and its offset mu from the centre; 0: the ellipsoid cannot touch. */
static PBD_HD int pbd_sm__ellipsoid_support(const pbd_sm__oriented *o, const float *p, int i, float dist,
                                            const float *nf, float *s, double *mu) {
    const float *pi = p + 4 * (o->first + i);
    const double *rad = o->radii + 3 * i;
    if (dist > rad[0] && dist > rad[1] && dist > rad[2]) return 0; /* beyond the largest radius */
    double R[9], n[3] = {nf[0], nf[1], nf[2]}, u[3];
    pbd_sm__quat_to_mat(o->qp + 4 * i, R);
    pbd_sm__rotate_back(R, n, u);
    for (int k = 0; k < 3; ++k) u[k] *= rad[k];
    double ul = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    if (!(ul > 0)) return 0;
    for (int k = 0; k < 3; ++k) u[k] *= rad[k] / ul;
    pbd_sm__rotate(R, u, mu); /* M M^T n / |M^T n| */
    for (int k = 0; k < 3; ++k) s[k] = (float)(pi[k] - mu[k]);
    return 1;
}
/* The push out of the collider when the support point is inside (its
   distance d2 < 0, normal n2f there). */
static PBD_HD void pbd_sm__ellipsoid_push(pbd_sm__oriented *o, float *p, int i, const double *mu, float d2,
                                          const float *n2f) {
    if (!(d2 < 0)) return;
    float *pi = p + 4 * (o->first + i);
    const double *rad = o->radii + 3 * i;
    double R[9], n2[3] = {n2f[0], n2f[1], n2f[2]}, r[3] = {-mu[0], -mu[1], -mu[2]};
    pbd_sm__quat_to_mat(o->qp + 4 * i, R);
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
static void pbd_sm__oriented_collide_one(pbd_sm__oriented *o, float *p, int i, pbd_collider col) {
    float dist, nf[3], s[3], d2, n2[3];
    double mu[3];
    if (!col.id || pbd_collider_closest(o->world, col, p + 4 * (o->first + i), &dist, nf) != PBD_OK)
        return; /* id 0: a free slot */
    if (pbd_sm__ellipsoid_support(o, p, i, dist, nf, s, mu) &&
        pbd_collider_closest(o->world, col, s, &d2, n2) == PBD_OK)
        pbd_sm__ellipsoid_push(o, p, i, mu, d2, n2);
}

/* Particle i's predicted orientation (begin_substep), its angular
   velocity and orientation after the substep (end_substep). */
static PBD_HD void pbd_sm__oriented_predict(pbd_sm__oriented *o, const float *p, double h, int i) {
    if (p[4 * (o->first + i) + 3] > 0) pbd_sm__quat_integrate_d(o->q + 4 * i, o->omega + 3 * i, h, o->qp + 4 * i);
    else
        for (int k = 0; k < 4; ++k) o->qp[4 * i + k] = o->q[4 * i + k];
}
static PBD_HD void pbd_sm__oriented_advance(pbd_sm__oriented *o, const float *p, double h, int i) {
    if (p[4 * (o->first + i) + 3] > 0)
        pbd_sm__quat_angular_velocity_d(o->q + 4 * i, o->qp + 4 * i, h, o->omega + 3 * i);
    else o->omega[3 * i] = o->omega[3 * i + 1] = o->omega[3 * i + 2] = 0;
    for (int k = 0; k < 4; ++k) o->q[4 * i + k] = o->qp[4 * i + k];
}

static void pbd_sm__oriented_begin_substep(void *user, const pbd_solve_context *c) {
    pbd_sm__oriented *o = (pbd_sm__oriented *)user;
    if (pbd_sm__oriented_gpu(o, c, PBD_SM__CUDA_BEGIN)) return;
    for (int i = 0; i < o->count; ++i) pbd_sm__oriented_predict(o, c->p, c->h, i);
}

static void pbd_sm__oriented_project(void *user, const pbd_solve_context *c) {
    pbd_sm__oriented *o = (pbd_sm__oriented *)user;
    if (pbd_sm__oriented_gpu(o, c, PBD_SM__CUDA_PROJECT)) return;
    for (int g = 0; g < o->count; ++g) pbd_sm__oriented_match(o, c->p, g, pbd_sm__oriented_turns(o, g));
    if (!o->collide) return;
    pbd_collider cols[PBD_SM__COLLIDERS_AT_ONCE];
    int nc = 0;
    pbd_world_colliders(o->world, cols, PBD_SM__COLLIDERS_AT_ONCE, &nc);
    for (int i = 0; i < o->count; ++i) {
        if (!(c->p[4 * (o->first + i) + 3] > 0)) continue;
        for (int k = 0; k < nc; ++k) pbd_sm__oriented_collide_one(o, c->p, i, pbd_sm__collider(o->world, cols, k));
    }
}

static void pbd_sm__oriented_end_substep(void *user, const pbd_solve_context *c) {
    pbd_sm__oriented *o = (pbd_sm__oriented *)user;
    if (pbd_sm__oriented_gpu(o, c, PBD_SM__CUDA_END)) return;
    for (int i = 0; i < o->count; ++i) pbd_sm__oriented_advance(o, c->p, c->h, i);
}

/* An ellipsoid radius is a particle's radius, so pbd.h's bound holds
   (PBD_MAX_RADIUS): its collisions and inertia come from it, and a radius
   of 1e30 m threw its particles to 4e30 m in one step. The refusal of r,
   the value of name[index] (index < 0: name alone). */
static pbd_result pbd_sm__oriented_radius_above(const pbd_world *w, float r, const char *name, int index) {
    char field[64], value[32];
    if (index >= 0) snprintf(field, sizeof field, "%s[%d] (particle %d)", name, index, index / 3);
    else snprintf(field, sizeof field, "%s", name);
    return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                          "pbd_sm_add_oriented: %s = %s m is above PBD_MAX_RADIUS = %g m", field,
                          pbd_format_float(r, value, sizeof value), (double)PBD_MAX_RADIUS);
}

static pbd_result pbd_sm__oriented_check(const pbd_world *w, const pbd_sm_oriented_desc *d) {
    if (d->particles.count < 1)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_oriented: particles.count %d < 1",
                              d->particles.count);
    if (d->edge_count < 0)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_oriented: edge_count %d < 0", d->edge_count);
    if (d->edge_count > 0 && !d->edges)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_oriented: edges is NULL while edge_count is %d",
                              d->edge_count);
    if (d->particles.first < 0 || d->particles.first > pbd_world_particle_count(w) - d->particles.count)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "pbd_sm_add_oriented: particles [%ld, %ld) are not in the world (%d particles)",
                              (long)d->particles.first, (long)d->particles.first + d->particles.count,
                              pbd_world_particle_count(w));
    if (!pbd_sm__finite(d->stiffness))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_sm_add_oriented: stiffness %g is not finite",
                              (double)d->stiffness);
    if (!pbd_sm__finite(d->radius))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_sm_add_oriented: radius %g is not finite",
                              (double)d->radius);
    if (!(d->stiffness >= 0 && d->stiffness <= 1))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_oriented: stiffness %g outside [0, 1]",
                              (double)d->stiffness);
    if (d->rotation_iterations < 1 || d->rotation_iterations > 100)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_oriented: rotation_iterations %d outside 1..100", d->rotation_iterations);
    if (d->collide != 0 && d->collide != 1)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_oriented: collide %d must be 0 or 1",
                              d->collide);
    int n = d->particles.count;
    if (d->edge_count > INT_MAX / 2 - n)
        return pbd_world_fail(w, PBD_ERROR_OVERFLOW,
                              "pbd_sm_add_oriented: edge_count %d is too large for %d particles (at most %d)",
                              d->edge_count, n, INT_MAX / 2 - n);
    for (int e = 0; e < 2 * d->edge_count; ++e)
        if (d->edges[e] < 0 || d->edges[e] >= n)
            return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_add_oriented: edge %d names particle %d, outside 0..%d (local to particles)",
                                  e / 2, d->edges[e], n - 1);
    for (int e = 0; e < d->edge_count; ++e)
        if (d->edges[2 * e] == d->edges[2 * e + 1])
            return pbd_world_fail(w, PBD_ERROR_DEGENERATE, "pbd_sm_add_oriented: edge %d joins particle %d to itself",
                                  e, d->edges[2 * e]);
    if (d->radii) {
        if (!pbd_sm__finite_n(d->radii, 3 * (size_t)n))
            return pbd_world_fail(w, PBD_ERROR_NOT_FINITE,
                                  "pbd_sm_add_oriented: radii contain NaN or infinity (%d particles)", n);
        for (int k = 0; k < 3 * n; ++k) {
            if (!(d->radii[k] > 0))
                return pbd_world_fail(w, PBD_ERROR_DEGENERATE,
                                      "pbd_sm_add_oriented: radii[%d] = %g must be > 0 (particle %d)", k,
                                      (double)d->radii[k], k / 3);
            if (d->radii[k] > PBD_MAX_RADIUS) return pbd_sm__oriented_radius_above(w, d->radii[k], "radii", k);
        }
    } else {
        if (!(d->radius > 0))
            return pbd_world_fail(w, PBD_ERROR_DEGENERATE, "pbd_sm_add_oriented: radius %g must be > 0 (radii is NULL)",
                                  (double)d->radius);
        if (d->radius > PBD_MAX_RADIUS) return pbd_sm__oriented_radius_above(w, d->radius, "radius", -1);
    }
    if (d->orientations) {
        if (!pbd_sm__finite_n(d->orientations, 4 * (size_t)n))
            return pbd_world_fail(w, PBD_ERROR_NOT_FINITE,
                                  "pbd_sm_add_oriented: orientations contain NaN or infinity (%d particles)", n);
        for (int i = 0; i < n; ++i) {
            const float *q = d->orientations + 4 * i;
            if (!(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3] > PBD_SM__QUAT_NORM2_MIN_F))
                return pbd_world_fail(w, PBD_ERROR_DEGENERATE,
                                      "pbd_sm_add_oriented: orientation %d is a zero quaternion (%g, %g, %g, %g)", i,
                                      (double)q[0], (double)q[1], (double)q[2], (double)q[3]);
        }
    }
    return PBD_OK;
}

/* An edge listed twice (the same two particles, either way round):
   refused, as it would be one neighbour in the 1-ring groups, merged
   silently. The edges are in range and no self edges (pbd_sm__oriented_check). */
static pbd_result pbd_sm__oriented_refuse_duplicate_edge(pbd_world *w, const pbd_sm_oriented_desc *d) {
    int e0 = 0, e1 = 0, twice = pbd_find_repeated_element(w, d->edges, d->edge_count, 2, &e0, &e1);
    if (twice < 0) return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_oriented: out of memory");
    if (twice)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_oriented: edges %d and %d join the same particles (%d and %d)", e0, e1,
                              d->edges[2 * e0], d->edges[2 * e0 + 1]);
    return PBD_OK;
}

/* A particle in two oriented sets would be matched by both, twice as
   stiff (an audit: a branch sagged half as far), as strands refuse a
   particle of another strand: refused, naming the other set's range. */
static pbd_result pbd_sm__oriented_refuse_shared(pbd_world *w, const pbd_sm_oriented_desc *d) {
    const void *own = pbd_sm__plugin_kind(PBD_SM__TAG_ORIENTED);
    for (int k = 0; k < pbd_world_plugin_count(w); ++k) {
        const void *kind;
        void *user;
        if (pbd_plugin_get(w, pbd_world_plugin(w, k), &kind, &user) != PBD_OK || kind != own) continue;
        const pbd_sm__oriented *o = (const pbd_sm__oriented *)user;
        int lo = d->particles.first > o->first ? d->particles.first : o->first;
        int hi = d->particles.first + d->particles.count < o->first + o->count ? d->particles.first + d->particles.count
                                                                               : o->first + o->count;
        if (lo < hi)
            return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                  "pbd_sm_add_oriented: particle %d is in another oriented set (particles %d..%d): "
                                  "a particle belongs to one set only",
                                  lo, o->first, o->first + o->count - 1);
    }
    return PBD_OK;
}

/* The 1-ring groups as CSR lists: centre first, then its neighbours in
   increasing order (each once: a particle's edges name distinct
   neighbours, pbd_sm__oriented_refuse_duplicate_edge). */
static pbd_result pbd_sm__oriented_rings(pbd_sm__oriented *o, const int *edges, int ne) {
    int n = o->count;
    o->ring_start = (int *)pbd_sm__alloc_n(o->world, (size_t)n + 1, sizeof(int));
    o->ring = (int *)pbd_sm__alloc_n(o->world, (size_t)n + 2 * (size_t)ne, sizeof(int));
    if (!o->ring_start || !o->ring)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_oriented: out of memory");
    for (int i = 0; i <= n; ++i) o->ring_start[i] = 0;
    for (int e = 0; e < 2 * ne; ++e) o->ring_start[edges[e] + 1]++;
    for (int i = 0; i < n; ++i) o->ring_start[i + 1] += o->ring_start[i] + 1; /* + the centre */
    int *fill = (int *)pbd_sm__alloc_n(o->world, (size_t)n, sizeof(int));
    if (!fill) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_oriented: out of memory");
    for (int i = 0; i < n; ++i) {
        o->ring[o->ring_start[i]] = i;
        fill[i] = o->ring_start[i] + 1;
    }
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
    pbd_sm__free(o->world, fill);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_oriented(pbd_world *w, const pbd_sm_oriented_desc *d, pbd_sm_oriented *out) {
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_oriented: w is NULL");
#if !defined(PBD_CUDA) && !defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU)
        return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED,
                              "pbd_sm_add_oriented: a GPU world needs PBD_CUDA where PBD_SM_IMPLEMENTATION is");
#endif
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_oriented: d is NULL");
    pbd_result res = pbd_sm__oriented_check(w, d);
    if (res == PBD_OK) res = pbd_sm__oriented_refuse_duplicate_edge(w, d);
    if (res == PBD_OK) res = pbd_sm__oriented_refuse_shared(w, d);
    if (res != PBD_OK) return res;
    int n = d->particles.count;
    pbd_sm__oriented *o = (pbd_sm__oriented *)pbd_sm__alloc_n(w, 1, sizeof *o);
    if (!o) return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_oriented: out of memory");
    memset(o, 0, sizeof *o);
    o->tag = PBD_SM__TAG_ORIENTED;
    o->world = w;
    o->first = d->particles.first;
    o->count = n;
    o->stiffness = d->stiffness;
    o->collide = d->collide;
    o->rotation_iterations = d->rotation_iterations;
    o->q = (double *)pbd_sm__alloc_n(w, 4 * (size_t)n, sizeof(double));
    o->qp = (double *)pbd_sm__alloc_n(w, 4 * (size_t)n, sizeof(double));
    o->omega = (double *)pbd_sm__alloc_n(w, 3 * (size_t)n, sizeof(double));
    o->q_step = (double *)pbd_sm__alloc_n(w, 4 * (size_t)n, sizeof(double));
    o->omega_step = (double *)pbd_sm__alloc_n(w, 3 * (size_t)n, sizeof(double));
    o->rest_q = (double *)pbd_sm__alloc_n(w, 4 * (size_t)n, sizeof(double));
    o->radii = (double *)pbd_sm__alloc_n(w, 3 * (size_t)n, sizeof(double));
    o->rest = (double *)pbd_sm__alloc_n(w, 3 * (size_t)n, sizeof(double));
    o->mass = (double *)pbd_sm__alloc_n(w, (size_t)n, sizeof(double));
    if (!o->q || !o->qp || !o->omega || !o->q_step || !o->omega_step || !o->rest_q || !o->radii || !o->rest ||
        !o->mass ||
        pbd_world_fail_in(w, "pbd_sm_add_oriented", pbd_sm__oriented_rings(o, d->edges, d->edge_count)) != PBD_OK) {
        pbd_sm__oriented_free(o);
        return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_oriented: out of memory");
    }
    const float *x = pbd_world_positions(w);
    double mean = 0;
    int dyn = 0;
    for (int i = 0; i < n; ++i) {
        float m = 0;
        pbd_particle_get_mass(w, o->first + i, &m);
        o->mass[i] = m;
        if (m > 0) {
            mean += m;
            dyn++;
        }
        for (int k = 0; k < 3; ++k) {
            o->rest[3 * i + k] = x[4 * (o->first + i) + k];
            o->radii[3 * i + k] = d->radii ? d->radii[3 * i + k] : d->radius;
            o->omega[3 * i + k] = 0;
        }
        double qn = 0, *rq = o->rest_q + 4 * i;
        for (int k = 0; k < 4; ++k) {
            rq[k] = d->orientations ? d->orientations[4 * i + k] : (k == 3);
            qn += rq[k] * rq[k];
        }
        for (int k = 0; k < 4; ++k) {
            rq[k] /= sqrt(qn);
            o->q[4 * i + k] = o->qp[4 * i + k] = rq[k];
        }
    }
    /* particles of mass 0 (pinned by mass) weigh as the mean particle */
    for (int i = 0; i < n; ++i)
        if (!(o->mass[i] > 0)) o->mass[i] = dyn ? mean / dyn : 0;
    if (!dyn) {
        pbd_sm__oriented_free(o);
        return pbd_world_fail(w, PBD_ERROR_DEGENERATE,
                              "pbd_sm_add_oriented: every one of the %d particles has mass 0 (zero total mass)", n);
    } /* zero total mass */
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "pbd_sm oriented particle set";
    pd.user = o;
    pd.kind = pbd_sm__plugin_kind(PBD_SM__TAG_ORIENTED);
    pd.particle_end = o->first + n;
    pd.work = (long)o->ring_start[n];
    pd.begin_substep = pbd_sm__oriented_begin_substep;
    pd.project = pbd_sm__oriented_project;
    pd.end_substep = pbd_sm__oriented_end_substep;
    pd.begin_step = pbd_sm__oriented_begin_step;
    pd.rollback = pbd_sm__oriented_rollback;
    pd.save_state = pbd_sm__state_save;
    pd.load_state = pbd_sm__state_load;
    pd.destroy = pbd_sm__oriented_destroy_cb;
    pd.uses_particles = pbd_sm__oriented_uses;
    int *ids = (int *)pbd_sm__alloc_n(w, (size_t)n, sizeof(int));
    if (!ids) {
        pbd_sm__oriented_free(o);
        return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_oriented: out of memory");
    }
    for (int i = 0; i < n; ++i) ids[i] = o->first + i;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU) { /* its arrays on the device, its callbacks launch kernels */
        pd.device = 1;
        if (!pbd_sm__cuda_oriented(o, sizeof *o, NULL, PBD_SM__CUDA_UPLOAD)) {
            pbd_sm__free(w, ids);
            pbd_sm__oriented_free(o);
            return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY,
                                  "pbd_sm_add_oriented: out of device memory for %d particles", n);
        }
    }
#endif
    res = pbd_add_plugin(w, &pd, &o->plugin);
    if (res != PBD_OK) {
        pbd_sm__free(w, ids);
        pbd_sm__oriented_free(o);
        return res;
    }
    pbd_world_mark_coupled(w, ids, n); /* validated above: cannot fail */
    pbd_sm__free(w, ids);
    if (out) out->id = o->plugin.id;
    return PBD_OK;
}

/* The oriented particle set a handle names (pbd_sm__resolve), or the error. */
static pbd_result pbd_sm__oriented_of(const pbd_world *w, pbd_sm_oriented h, const char *fn, pbd_sm__oriented **o) {
    void *u = NULL;
    pbd_result r = pbd_sm__resolve(w, h.id, PBD_SM__TAG_ORIENTED, fn, &u);
    *o = (pbd_sm__oriented *)u;
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_remove_oriented(pbd_world *w, pbd_sm_oriented set) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_remove_oriented", &o);
    if (r != PBD_OK) return r;
    return pbd_remove_plugin(w, o->plugin); /* frees the set */
}

PBD_SM_DEF pbd_result pbd_sm_oriented_particles(const pbd_world *w, pbd_sm_oriented set, pbd_range *particles) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_oriented_particles", &o);
    if (r != PBD_OK) return r;
    if (!particles) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_oriented_particles: particles is NULL");
    particles->first = o->first;
    particles->count = o->count;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_get_state(const pbd_world *w, pbd_sm_oriented set, int index, float *q,
                                                float *omega) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_oriented_get_state", &o);
    if (r != PBD_OK) return r;
    if (index < 0 || index >= o->count)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_oriented_get_state: index %d outside 0..%d",
                              index, o->count - 1);
    pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_FETCH);
    if (q)
        for (int k = 0; k < 4; ++k) q[k] = (float)o->q[4 * index + k];
    if (omega)
        for (int k = 0; k < 3; ++k) omega[k] = (float)o->omega[3 * index + k];
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_set_state(pbd_world *w, pbd_sm_oriented set, int index, const float *q,
                                                const float *omega) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_oriented_set_state", &o);
    if (r != PBD_OK) return r;
    if (index < 0 || index >= o->count)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_oriented_set_state: index %d outside 0..%d",
                              index, o->count - 1);
    if ((q && !pbd_sm__finite_n(q, 4)) || (omega && !pbd_sm__finite_n(omega, 3)))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_sm_oriented_set_state: %s contains NaN or infinity",
                              q && !pbd_sm__finite_n(q, 4) ? "q" : "omega");
    double qn = q ? (double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2] + (double)q[3] * q[3] : 1;
    if (!(qn > PBD_SM__QUAT_NORM2_MIN))
        return pbd_world_fail(w, PBD_ERROR_DEGENERATE,
                              "pbd_sm_oriented_set_state: q is a zero quaternion (squared norm %g)", qn);
    pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_FETCH); /* the others' state stays the device's */
    if (q)
        for (int k = 0; k < 4; ++k) o->q[4 * index + k] = o->qp[4 * index + k] = q[k] / sqrt(qn);
    if (omega)
        for (int k = 0; k < 3; ++k) o->omega[3 * index + k] = omega[k];
    pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_PUSH);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_group(const pbd_world *w, pbd_sm_oriented set, int index, int *members, int max,
                                            int *count) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_oriented_group", &o);
    if (r != PBD_OK) return r;
    if (!count) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_oriented_group: count is NULL");
    if (max > 0 && !members)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_oriented_group: members is NULL while max > 0");
    if (index < 0 || index >= o->count)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_oriented_group: index %d outside 0..%d", index,
                              o->count - 1);
    if (max < 0) return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_oriented_group: max %d < 0", max);
    int b = o->ring_start[index], n = o->ring_start[index + 1] - b;
    for (int e = 0; e < n && e < max; ++e) members[e] = o->ring[b + e];
    *count = n;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_oriented_rotational_energy(const pbd_world *w, pbd_sm_oriented set, double *energy) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_oriented_rotational_energy", &o);
    if (r != PBD_OK) return r;
    if (!energy) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_oriented_rotational_energy: energy is NULL");
    const float *x = pbd_world_positions(w);
    double e = 0;
    pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_FETCH);
    for (int i = 0; i < o->count; ++i) {
        float wi = x[4 * (o->first + i) + 3];
        if (!(wi > 0)) continue;
        double R[9], wb[3], m = 1.0 / wi;
        const double *rad = o->radii + 3 * i;
        pbd_sm__quat_to_mat(o->q + 4 * i, R);
        pbd_sm__rotate_back(R, o->omega + 3 * i, wb);
        double inertia[3] = {m / 5 * (rad[1] * rad[1] + rad[2] * rad[2]), m / 5 * (rad[0] * rad[0] + rad[2] * rad[2]),
                             m / 5 * (rad[0] * rad[0] + rad[1] * rad[1])};
        e += 0.5 * (inertia[0] * wb[0] * wb[0] + inertia[1] * wb[1] * wb[1] + inertia[2] * wb[2] * wb[2]);
    }
    *energy = e;
    return PBD_OK;
}

PBD_SM_DEF pbd_sm_skin_desc pbd_sm_skin_desc_default(void) {
    pbd_sm_skin_desc d;
    memset(&d, 0, sizeof d);
    d.influences = 4;
    return d;
}

PBD_SM_DEF void pbd_sm_skin_destroy(pbd_sm_skin *s) {
    if (!s) return;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (s->gpu) pbd_sm__cuda_skin(s, sizeof *s, NULL, 0, NULL, NULL, PBD_SM__CUDA_FREE, NULL);
#endif
    pbd_sm__free(NULL, s->out);
    pbd_sm__free(NULL, s->bones);
    pbd_sm__free(NULL, s->weights);
    pbd_sm__free(NULL, s->local);
    pbd_sm__free(NULL, s);
}

/* The `k` nearest particles (at rest) of a vertex with weights
   1 / (d^2 + eps^2), by a bounded insertion sort (ties: lower index). */
static void pbd_sm__skin_nearest(const pbd_sm__oriented *o, const float *v, int k, int *bones, double *wts) {
    for (int s = 0; s < k; ++s) {
        bones[s] = -1;
        wts[s] = 0;
    }
    double *d2 = wts; /* distances first, weights after */
    int have = 0;
    for (int b = 0; b < o->count; ++b) {
        double dx = v[0] - o->rest[3 * b], dy = v[1] - o->rest[3 * b + 1], dz = v[2] - o->rest[3 * b + 2];
        double dd = dx * dx + dy * dy + dz * dz;
        if (have == k && !(dd < d2[k - 1])) continue;
        int pos = have < k ? have : k - 1;
        while (pos > 0 && dd < d2[pos - 1]) {
            d2[pos] = d2[pos - 1];
            bones[pos] = bones[pos - 1];
            pos--;
        }
        d2[pos] = dd;
        bones[pos] = b;
        if (have < k) have++;
    }
    for (int s = 0; s < k; ++s) wts[s] = bones[s] >= 0 ? 1.0 / (d2[s] + PBD_SM__SKIN_DIST2_EPS) : 0;
}

PBD_SM_DEF pbd_result pbd_sm_skin_create(const pbd_world *w, pbd_sm_oriented set, const pbd_sm_skin_desc *d,
                                         pbd_sm_skin **out) {
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, set, "pbd_sm_skin_create", &o);
    if (r != PBD_OK) return r;
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_create: d is NULL");
    if (!out) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_create: out is NULL");
    if (!d->rest_vertices)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_create: pbd_sm_skin_desc.rest_vertices is NULL");
    if (d->bones && !d->weights)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_create: weights is NULL while bones is given");
    if (d->vertex_count < 1)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_skin_create: vertex_count %d < 1",
                              d->vertex_count);
    if (d->influences < 1 || d->influences > 8)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_skin_create: influences %d outside 1..8",
                              d->influences);
    size_t nk = (size_t)d->vertex_count * (size_t)d->influences;
    if (!pbd_sm__finite_n(d->rest_vertices, 3 * (size_t)d->vertex_count))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE,
                              "pbd_sm_skin_create: rest_vertices contain NaN or infinity (%d vertices)",
                              d->vertex_count);
    if (d->bones) {
        if (!pbd_sm__finite_n(d->weights, nk))
            return pbd_world_fail(w, PBD_ERROR_NOT_FINITE,
                                  "pbd_sm_skin_create: weights contain NaN or infinity (%zu weights)", nk);
        for (int v = 0; v < d->vertex_count; ++v) {
            double sum = 0;
            for (int s = 0; s < d->influences; ++s) {
                int b = d->bones[(size_t)v * d->influences + s];
                float wt = d->weights[(size_t)v * d->influences + s];
                if (b < -1 || b >= o->count)
                    return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                          "pbd_sm_skin_create: vertex %d names bone %d, outside -1..%d", v, b,
                                          o->count - 1);
                if (wt < 0)
                    return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                          "pbd_sm_skin_create: vertex %d has weight %g < 0", v, (double)wt);
                if (b >= 0) sum += wt;
            }
            if (!(sum > 0))
                return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                      "pbd_sm_skin_create: the weights of vertex %d sum to %g, must be > 0", v, sum);
        }
    }
    pbd_sm_skin *s = (pbd_sm_skin *)pbd_sm__alloc_n(NULL, 1, sizeof *s);
    if (!s) return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_skin_create: out of memory");
    memset(s, 0, sizeof *s);
    s->world = w;
    s->set = set;
    s->vertex_count = d->vertex_count;
    s->influences = d->influences;
    s->bones = (int *)pbd_sm__alloc_n(NULL, nk, sizeof(int));
    s->weights = (double *)pbd_sm__alloc_n(NULL, nk, sizeof(double));
    s->local = (double *)pbd_sm__alloc_n(NULL, 3 * nk, sizeof(double));
    if (!s->bones || !s->weights || !s->local) {
        pbd_sm_skin_destroy(s);
        return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_skin_create: out of memory");
    }
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
                double dv[3] = {rv[0] - o->rest[3 * bv[k]], rv[1] - o->rest[3 * bv[k] + 1],
                                rv[2] - o->rest[3 * bv[k] + 2]};
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
    if (!s) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_apply: s is NULL");
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_apply: w is NULL");
    if (!out) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_skin_apply: out is NULL");
    if (w != s->world)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_skin_apply: the skin's oriented particle set is of another world");
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, s->set, "pbd_sm_skin_apply (the skin's set)", &o);
    if (r != PBD_OK) return r;
    const float *x = pbd_world_positions(w);
    pbd_sm__oriented_gpu(o, NULL, PBD_SM__CUDA_FETCH);
    for (int v = 0; v < s->vertex_count; ++v) pbd_sm__skin_vertex(s, x + 4 * (size_t)o->first, o->q, v, out);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_skin_apply_world(pbd_sm_skin *s, pbd_world *w, const float **out) {
    const char *f = "pbd_sm_skin_apply_world";
    if (!s) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "%s: s is NULL", f);
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "%s: w is NULL", f);
    if (!out) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "%s: out is NULL", f);
    if (w != s->world)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: the skin's oriented particle set is of another world",
                              f);
    pbd_sm__oriented *o;
    pbd_result r = pbd_sm__oriented_of(w, s->set, "pbd_sm_skin_apply_world (the skin's set)", &o);
    if (r != PBD_OK) return r;
    if (pbd_world_device(w) == PBD_DEVICE_GPU) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
        const float *x = pbd_world_device_positions(w);
        if (!x) return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED, "%s: %s", f, pbd_world_last_error(w));
        int up = s->gpu ? 1 : pbd_sm__cuda_skin(s, sizeof *s, o, sizeof *o, w, NULL, PBD_SM__CUDA_UPLOAD, NULL);
        if (up == -2)
            return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED, "%s: pbd_cuda.cu was built against another pbd_sm.h", f);
        if (up != 1)
            return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "%s: out of device memory for %d vertices", f,
                                  s->vertex_count);
        pbd_sm__cuda_skin(s, sizeof *s, o, sizeof *o, w, x + 4 * (size_t)o->first, PBD_SM__CUDA_EVAL, out);
        return PBD_OK;
#else
        return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED,
                              "%s: a GPU world's skin needs pbd_cuda.cu's kernels: built without PBD_CUDA where "
                              "PBD_SM_IMPLEMENTATION is",
                              f);
#endif
    }
    if (!s->out) {
        s->out = (float *)pbd_sm__alloc_n(NULL, 3 * (size_t)s->vertex_count, sizeof(float));
        if (!s->out)
            return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "%s: out of memory for %d vertices", f, s->vertex_count);
    }
    r = pbd_sm_skin_apply(s, w, s->out);
    if (r == PBD_OK) *out = s->out;
    return r;
}

// ==== surface volume ========================================================

struct pbd_sm__volume {
    uint32_t tag;     /* PBD_SM__TAG_VOLUME */
    pbd_world *world; /* the owner: its allocator holds every array */
    pbd_plugin plugin;
    int nv, nt;
    int *verts;           /* nv world particles, increasing */
    int *tri;             /* nt*3 local indices */
    int *adj_start, *adj; /* mesh edges as CSR neighbour lists (local) */
    int *opposite;        /* nv: opposing particle (local) or -1 */
    double *pair_rest;    /* nv: rest distance to it */
    double rest_volume;
    float alpha, beta, pair_stiffness, stiffness, contact_distance;
    int smoothing, velocity_correction;
    double *grad;             /* nv*3 scratch: grad_i C */
    double *weight, *weight2; /* nv: w_i of the last projection, smoothing scratch */
    float *pred;              /* nv*3: predictions at the start of the substep */
    void *gpu;                /* on a GPU world: pbd_cuda.cu's copy (pbd_sm__cuda_volume) */
};

/* pbd_cuda.cu's side of a surface volume on a GPU world: its arrays on the
   device (UPLOAD, when it is added; 0 when out of device memory), a
   substep stage on the context's device arrays, the weights back to the
   host (FETCH), FREE (the stages: "shape matching", PBD_SM__CUDA_*). size:
   sizeof *v, checked against pbd_cuda.cu's copy of this header. */
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_sm__cuda_volume(pbd_sm__volume *v, size_t size, const pbd_solve_context *c, int what);
#endif

static void pbd_sm__volume_free(pbd_sm__volume *v) {
    if (!v) return;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (v->gpu) pbd_sm__cuda_volume(v, sizeof *v, NULL, PBD_SM__CUDA_FREE);
#endif
    pbd_sm__free(v->world, v->verts);
    pbd_sm__free(v->world, v->tri);
    pbd_sm__free(v->world, v->adj_start);
    pbd_sm__free(v->world, v->adj);
    pbd_sm__free(v->world, v->opposite);
    pbd_sm__free(v->world, v->pair_rest);
    pbd_sm__free(v->world, v->grad);
    pbd_sm__free(v->world, v->weight);
    pbd_sm__free(v->world, v->weight2);
    pbd_sm__free(v->world, v->pred);
    pbd_sm__free(v->world, v);
}
static void pbd_sm__volume_destroy_cb(void *user) { pbd_sm__volume_free((pbd_sm__volume *)user); }

/* A GPU world's volume: FETCH or PUSH its weights (what the getter reads). */
static void pbd_sm__volume_gpu(pbd_sm__volume *v, int what) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (v->gpu) pbd_sm__cuda_volume(v, sizeof *v, NULL, what);
#else
    (void)v;
    (void)what;
#endif
}
/* The volume's state in snapshots (pbd_sm__io): what its setters change
   (the rest volume, alpha) and the weights of its last projection (what
   pbd_sm_volume_weights reads; each projection makes them anew). */
static void pbd_sm__volume_state(pbd_sm__io *io, void *thing) {
    pbd_sm__volume *v = (pbd_sm__volume *)thing;
    if (io->out) pbd_sm__volume_gpu(v, PBD_SM__CUDA_FETCH); /* a GPU world's state, current */
    static const char *const names[] = {"particle count", "triangle count"};
    int counts[2] = {v->nv, v->nt};
    pbd_sm__io_head(io, PBD_SM__TAG_VOLUME, counts, 2, names);
    uint32_t h = pbd_sm__fnv(PBD_SM__FNV_START, v->verts, sizeof(int) * (size_t)v->nv);
    pbd_sm__io_built(io, PBD_SM__TAG_VOLUME, v->nv > 0 ? v->verts[0] : -1,
                     pbd_sm__fnv(h, v->tri, sizeof(int) * 3 * (size_t)v->nt));
    double rest = v->rest_volume;
    float alpha = v->alpha;
    pbd_sm__io_double(io, &rest);
    pbd_sm__io_float(io, &alpha);
    pbd_sm__io_doubles(io, v->weight, (size_t)v->nv, "weight");
    if (!io->in || io->why[0]) return;
    if (!io->commit) {
        if (!pbd_sm__finite(rest) || !(rest > 0) || !(alpha >= 0 && alpha <= 1))
            pbd_sm__io_refuse(io, "rest volume %g and alpha %g: a rest volume > 0 and alpha in [0, 1] expected", rest,
                              (double)alpha);
        return;
    }
    v->rest_volume = rest;
    v->alpha = alpha;
    pbd_sm__volume_gpu(v, PBD_SM__CUDA_PUSH);
}
static int pbd_sm__volume_uses(void *user, const unsigned char *marked, int n) {
    const pbd_sm__volume *v = (const pbd_sm__volume *)user;
    return pbd_sm__marked_list(marked, n, v->verts, v->nv);
}

PBD_SM_DEF pbd_sm_volume_desc pbd_sm_volume_desc_default(void) {
    pbd_sm_volume_desc d;
    memset(&d, 0, sizeof d);
    d.alpha = 1.0f;
    d.beta = 0.5f;
    d.pair_stiffness = 1.0f;
    d.smoothing = 2;
    d.stiffness = 1.0f;
    d.velocity_correction = 1;
    d.contact_distance = 0.0f;
    return d;
}

/* V (eq. 12: 1/9 sum A_i (x_i1 + x_i2 + x_i3) . n_i, which is
   1/6 sum x_i1 . (x_i2 x x_i3) for a flat triangle) and, when grad is not
   NULL, grad_i C = n_i / 3 with n_i the sum of the area-weighted normals
   around particle i (the survey's approximation; for a closed mesh it is
   the exact gradient, since the fan's edges sum to zero). P: 4 floats per
   world particle. */
static PBD_HD double pbd_sm__volume_eval(const pbd_sm__volume *v, const float *P, double *grad) {
    double V = 0;
    if (grad)
        for (int k = 0; k < 3 * v->nv; ++k) grad[k] = 0;
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

static int pbd_sm__volume_colliding(const pbd_sm__volume *v, const float *p) {
    pbd_collider cols[PBD_SM__COLLIDERS_AT_ONCE];
    int nc = 0;
    pbd_world_colliders(v->world, cols, PBD_SM__COLLIDERS_AT_ONCE, &nc);
    for (int c = 0; c < nc; ++c) {
        float d;
        if (pbd_collider_closest(v->world, pbd_sm__collider(v->world, cols, c), p, &d, NULL) == PBD_OK &&
            d < v->contact_distance)
            return 1;
    }
    return 0;
}

/* The weights of eq. 13 (survey 4.5.1): global 1/n blended by alpha with
   the local ones, smoothed by a Laplacian filter (each pass moves a weight
   halfway to its neighbours' mean), then 0 for colliding and fixed
   particles (after smoothing, so that none leaks back to them). One
   function per loop, each element on its own (the sums in one thread): a
   GPU world's kernels run them too (pbd_cuda.cu). */
static PBD_HD double pbd_sm__volume_local(const pbd_sm__volume *v, const float *P, int i) {
    const float *pi = P + 4 * v->verts[i], *pr = v->pred + 3 * i;
    double dx = pi[0] - pr[0], dy = pi[1] - pr[1], dz = pi[2] - pr[2], dd = 0;
    int k = v->opposite[i];
    if (k >= 0) {
        const float *pk = P + 4 * v->verts[k];
        double ex = pi[0] - pk[0], ey = pi[1] - pk[1], ez = pi[2] - pk[2];
        dd = fabs(sqrt(ex * ex + ey * ey + ez * ez) - v->pair_rest[i]);
    }
    return v->beta * v->pair_stiffness * dd + (1.0 - v->beta) * sqrt(dx * dx + dy * dy + dz * dz);
}
static PBD_HD double pbd_sm__volume_sum(const double *a, int n) {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += a[i];
    return sum;
}
static PBD_HD void pbd_sm__volume_blend(pbd_sm__volume *v, int i, double sum) {
    int n = v->nv;
    double local = sum > 0 ? v->weight[i] / sum : 1.0 / n;
    v->weight[i] = (1.0 - v->alpha) * local + v->alpha / n;
}
static PBD_HD void pbd_sm__volume_smooth(pbd_sm__volume *v, int i) {
    const double *w = v->weight;
    int b = v->adj_start[i], e = v->adj_start[i + 1];
    double m = 0;
    for (int k = b; k < e; ++k) m += w[v->adj[k]];
    v->weight2[i] = e > b ? 0.5 * w[i] + 0.5 * m / (e - b) : w[i];
}
static void pbd_sm__volume_weights(pbd_sm__volume *v, const float *P) {
    int n = v->nv;
    for (int i = 0; i < n; ++i) v->weight[i] = pbd_sm__volume_local(v, P, i);
    double sum = pbd_sm__volume_sum(v->weight, n);
    for (int i = 0; i < n; ++i) pbd_sm__volume_blend(v, i, sum);
    for (int pass = 0; pass < v->smoothing; ++pass) {
        for (int i = 0; i < n; ++i) pbd_sm__volume_smooth(v, i);
        for (int i = 0; i < n; ++i) v->weight[i] = v->weight2[i];
    }
    for (int i = 0; i < n; ++i) {
        const float *pi = P + 4 * v->verts[i];
        if (!(pi[3] > 0) || pbd_sm__volume_colliding(v, pi)) v->weight[i] = 0;
    }
}

/* sum_i w_i |grad_i C|^2, the denominator of eq. 13 */
static PBD_HD double pbd_sm__volume_den(const pbd_sm__volume *v) {
    double den = 0;
    for (int i = 0; i < v->nv; ++i) {
        const double *g = v->grad + 3 * i;
        den += v->weight[i] * (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
    }
    return den;
}
/* dC/dt = sum_i grad_i C . v_i */
static PBD_HD double pbd_sm__volume_dcdt(const pbd_sm__volume *v, const float *V) {
    double dcdt = 0;
    for (int i = 0; i < v->nv; ++i) {
        const double *g = v->grad + 3 * i;
        const float *vi = V + 4 * v->verts[i];
        dcdt += g[0] * vi[0] + g[1] * vi[1] + g[2] * vi[2];
    }
    return dcdt;
}
/* A[i] += s w_i grad_i C (positions or velocities of particle i) */
static PBD_HD void pbd_sm__volume_move(const pbd_sm__volume *v, float *A, int i, double s) {
    float *a = A + 4 * v->verts[i];
    for (int k = 0; k < 3; ++k) a[k] = (float)(a[k] + s * v->weight[i] * v->grad[3 * i + k]);
}
static PBD_HD void pbd_sm__volume_predicted(pbd_sm__volume *v, const float *P, int i) {
    for (int k = 0; k < 3; ++k) v->pred[3 * i + k] = P[4 * v->verts[i] + k];
}

static void pbd_sm__volume_begin_substep(void *user, const pbd_solve_context *c) {
    pbd_sm__volume *v = (pbd_sm__volume *)user;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (v->gpu) {
        pbd_sm__cuda_volume(v, sizeof *v, c, PBD_SM__CUDA_BEGIN);
        return;
    }
#endif
    for (int i = 0; i < v->nv; ++i) pbd_sm__volume_predicted(v, c->p, i);
}

/* Eq. 13: dx_i = -s w_i C grad_i / sum_j w_j |grad_j|^2. */
static void pbd_sm__volume_project(void *user, const pbd_solve_context *c) {
    pbd_sm__volume *v = (pbd_sm__volume *)user;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (v->gpu) {
        pbd_sm__cuda_volume(v, sizeof *v, c, PBD_SM__CUDA_PROJECT);
        return;
    }
#endif
    double C = pbd_sm__volume_eval(v, c->p, v->grad) - v->rest_volume;
    pbd_sm__volume_weights(v, c->p);
    double den = pbd_sm__volume_den(v);
    if (!(den > PBD_SM__VOLUME_DEN_MIN)) return;
    for (int i = 0; i < v->nv; ++i) pbd_sm__volume_move(v, c->p, i, -v->stiffness * C / den);
}

/* The velocity counterpart: dC/dt = sum_i grad_i C . v_i = 0 with the same
   weights (survey 4.5.1: a divergence-free velocity field). */
static void pbd_sm__volume_end_substep(void *user, const pbd_solve_context *c) {
    pbd_sm__volume *v = (pbd_sm__volume *)user;
    if (!v->velocity_correction) return;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (v->gpu) {
        pbd_sm__cuda_volume(v, sizeof *v, c, PBD_SM__CUDA_END);
        return;
    }
#endif
    pbd_sm__volume_eval(v, c->x, v->grad);
    double dcdt = pbd_sm__volume_dcdt(v, c->v), den = pbd_sm__volume_den(v);
    if (!(den > PBD_SM__VOLUME_DEN_MIN)) return;
    for (int i = 0; i < v->nv; ++i) pbd_sm__volume_move(v, c->v, i, -dcdt / den);
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
static pbd_result pbd_sm__volume_topology(pbd_sm__volume *v) {
    size_t ne = 3 * (size_t)v->nt;
    long long *e = (long long *)pbd_sm__alloc_n(v->world, ne, sizeof(long long));
    if (!e) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_surface_volume: out of memory");
    for (int t = 0; t < v->nt; ++t)
        for (int k = 0; k < 3; ++k) e[3 * t + k] = (long long)v->tri[3 * t + k] * v->nv + v->tri[3 * t + (k + 1) % 3];
    qsort(e, ne, sizeof(long long), pbd_sm__cmp_edge_key);
    pbd_result r = pbd_sm__check_closed(v->world, v->tri, v->nt, v->verts, "pbd_sm_add_surface_volume");
    if (r == PBD_OK) {
        v->adj_start = (int *)pbd_sm__alloc_n(v->world, (size_t)v->nv + 1, sizeof(int));
        v->adj = (int *)pbd_sm__alloc_n(v->world, ne, sizeof(int));
        if (!v->adj_start || !v->adj)
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_surface_volume: out of memory");
    }
    if (r == PBD_OK) { /* e is sorted by (a, b): directed edges grouped by a */
        int k = 0;
        for (int a = 0; a < v->nv; ++a) {
            v->adj_start[a] = k;
            while ((size_t)k < ne && e[k] / v->nv == a) {
                v->adj[k] = (int)(e[k] % v->nv);
                k++;
            }
        }
        v->adj_start[v->nv] = k;
    }
    pbd_sm__free(v->world, e);
    return r;
}

/* Opposing particles (Diziol et al. 2011): a ray from each particle along
   its inward area-weighted normal; the nearest triangle it hits (not one
   of the particle's own) gives the pair, its vertex nearest the hit point
   (Moeller-Trumbore intersection; O(n * triangles), done once). */
static void pbd_sm__volume_pairs(pbd_sm__volume *v, const float *P) {
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
            if (fabs(det) < PBD_SM__RAY_PARALLEL) continue;
            double tv[3] = {(double)o[0] - a[0], (double)o[1] - a[1], (double)o[2] - a[2]};
            double u = (tv[0] * pv[0] + tv[1] * pv[1] + tv[2] * pv[2]) / det;
            if (u < 0 || u > 1) continue;
            double qv[3] = {tv[1] * e1[2] - tv[2] * e1[1], tv[2] * e1[0] - tv[0] * e1[2],
                            tv[0] * e1[1] - tv[1] * e1[0]};
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
            if (dd < bd) {
                bd = dd;
                v->opposite[i] = v->tri[3 * bt + k];
            }
        }
        const float *q = P + 4 * v->verts[v->opposite[i]];
        double dx = q[0] - o[0], dy = q[1] - o[1], dz = q[2] - o[2];
        v->pair_rest[i] = sqrt(dx * dx + dy * dy + dz * dz);
    }
}

static pbd_result pbd_sm__volume_check(const pbd_world *w, const pbd_sm_volume_desc *d) {
    if (d->triangle_count > 0 && !d->triangles)
        return pbd_world_fail(
            w, PBD_ERROR_NULL_POINTER,
            "pbd_sm_add_surface_volume: pbd_sm_volume_desc.triangles is NULL while triangle_count is %d",
            d->triangle_count);
    if (d->triangle_count < 1 || d->triangle_count > INT_MAX / 3)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_surface_volume: triangle_count %d outside 1..%d", d->triangle_count,
                              INT_MAX / 3);
    static const char *const names[5] = {"alpha", "beta", "pair_stiffness", "stiffness", "contact_distance"};
    const float params[5] = {d->alpha, d->beta, d->pair_stiffness, d->stiffness, d->contact_distance};
    pbd_result nonfinite = pbd_sm__check_finite_named(w, "pbd_sm_add_surface_volume", params, names, 5);
    if (nonfinite != PBD_OK) return nonfinite;
    if (!(d->alpha >= 0 && d->alpha <= 1))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: alpha %g outside [0, 1]",
                              (double)d->alpha);
    if (!(d->beta >= 0 && d->beta <= 1))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: beta %g outside [0, 1]",
                              (double)d->beta);
    if (!(d->pair_stiffness >= 0))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: pair_stiffness %g < 0",
                              (double)d->pair_stiffness);
    if (!(d->stiffness > 0 && d->stiffness <= 1))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: stiffness %g outside (0, 1]",
                              (double)d->stiffness);
    if (!(d->contact_distance >= 0))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: contact_distance %g < 0",
                              (double)d->contact_distance);
    if (d->smoothing < 0)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: smoothing %d outside 0..64",
                              d->smoothing);
    if (d->smoothing > 64)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_surface_volume: smoothing %d outside 0..64",
                              d->smoothing);
    if (d->velocity_correction != 0 && d->velocity_correction != 1)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_surface_volume: velocity_correction %d must be 0 or 1",
                              d->velocity_correction);
    int np = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w);
    for (int t = 0; t < d->triangle_count; ++t) {
        const int *e = d->triangles + 3 * t;
        for (int k = 0; k < 3; ++k)
            if (e[k] < 0 || e[k] >= np)
                return pbd_world_fail(
                    w, PBD_ERROR_INDEX_OUT_OF_RANGE,
                    "pbd_sm_add_surface_volume: triangle %d names particle %d, not a particle of the world (0..%d)", t,
                    e[k], np - 1);
        if (e[0] == e[1])
            return pbd_world_fail(w, PBD_ERROR_DEGENERATE, "pbd_sm_add_surface_volume: triangle %d repeats particle %d",
                                  t, e[0]);
        if (e[1] == e[2])
            return pbd_world_fail(w, PBD_ERROR_DEGENERATE, "pbd_sm_add_surface_volume: triangle %d repeats particle %d",
                                  t, e[1]);
        if (e[0] == e[2])
            return pbd_world_fail(w, PBD_ERROR_DEGENERATE, "pbd_sm_add_surface_volume: triangle %d repeats particle %d",
                                  t, e[0]);
        const float *a = x + 4 * e[0], *b = x + 4 * e[1], *c = x + 4 * e[2];
        double ab[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
        double ac[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
        double cx = ab[1] * ac[2] - ab[2] * ac[1], cy = ab[2] * ac[0] - ab[0] * ac[2],
               cz = ab[0] * ac[1] - ab[1] * ac[0];
        if (!(cx * cx + cy * cy + cz * cz > 0))
            return pbd_world_fail(w, PBD_ERROR_DEGENERATE,
                                  "pbd_sm_add_surface_volume: triangle %d (particles %d, %d, %d) has zero area", t,
                                  e[0], e[1], e[2]);
    }
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_surface_volume(pbd_world *w, const pbd_sm_volume_desc *d, pbd_sm_volume *out) {
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_surface_volume: w is NULL");
#if !defined(PBD_CUDA) && !defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU) /* pbd_cuda.cu's kernels are not in this file */
        return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED,
                              "pbd_sm_add_surface_volume: a GPU world needs PBD_CUDA where PBD_SM_IMPLEMENTATION is");
#endif
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_surface_volume: d is NULL");
    pbd_result r = pbd_sm__volume_check(w, d);
    if (r != PBD_OK) return r;
    pbd_sm__volume *v = (pbd_sm__volume *)pbd_sm__alloc_n(w, 1, sizeof *v);
    if (!v) return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_surface_volume: out of memory");
    memset(v, 0, sizeof *v);
    v->tag = PBD_SM__TAG_VOLUME;
    v->world = w;
    v->nt = d->triangle_count;
    v->alpha = d->alpha;
    v->beta = d->beta;
    v->pair_stiffness = d->pair_stiffness;
    v->stiffness = d->stiffness;
    v->contact_distance = d->contact_distance;
    v->smoothing = d->smoothing;
    v->velocity_correction = d->velocity_correction;
    size_t n3 = 3 * (size_t)v->nt;
    v->verts = (int *)pbd_sm__alloc_n(w, n3, sizeof(int));
    v->tri = (int *)pbd_sm__alloc_n(w, n3, sizeof(int));
    if (!v->verts || !v->tri) {
        pbd_sm__volume_free(v);
        return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_surface_volume: out of memory");
    }
    memcpy(v->verts, d->triangles, n3 * sizeof(int));
    qsort(v->verts, n3, sizeof(int), pbd_sm__cmp_int);
    int nv = 0;
    for (size_t k = 0; k < n3; ++k)
        if (k == 0 || v->verts[k] != v->verts[k - 1]) v->verts[nv++] = v->verts[k];
    v->nv = nv;
    for (size_t k = 0; k < n3; ++k) v->tri[k] = pbd_sm__volume_local_index(v->verts, nv, d->triangles[k]);
    v->opposite = (int *)pbd_sm__alloc_n(w, (size_t)nv, sizeof(int));
    v->pair_rest = (double *)pbd_sm__alloc_n(w, (size_t)nv, sizeof(double));
    v->grad = (double *)pbd_sm__alloc_n(w, 3 * (size_t)nv, sizeof(double));
    v->weight = (double *)pbd_sm__alloc_n(w, (size_t)nv, sizeof(double));
    v->weight2 = (double *)pbd_sm__alloc_n(w, (size_t)nv, sizeof(double));
    v->pred = (float *)pbd_sm__alloc_n(w, 3 * (size_t)nv, sizeof(float));
    if (!v->opposite || !v->pair_rest || !v->grad || !v->weight || !v->weight2 || !v->pred) {
        pbd_sm__volume_free(v);
        return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_surface_volume: out of memory");
    }
    r = pbd_world_fail_in(w, "pbd_sm_add_surface_volume", pbd_sm__volume_topology(v));
    if (r != PBD_OK) {
        pbd_sm__volume_free(v);
        return r;
    }
    const float *x = pbd_world_positions(w);
    v->rest_volume = pbd_sm__volume_eval(v, x, NULL);
    if (!(v->rest_volume > 0)) {
        double volume = v->rest_volume;
        pbd_sm__volume_free(v);
        return pbd_world_fail(w, PBD_ERROR_DEGENERATE,
                              "pbd_sm_add_surface_volume: the mesh encloses volume %g, not > 0 (inside out?)", volume);
    }
    pbd_sm__volume_pairs(v, x);
    for (int i = 0; i < nv; ++i) {
        v->weight[i] = 1.0 / nv;
        for (int k = 0; k < 3; ++k) v->pred[3 * i + k] = x[4 * v->verts[i] + k];
    }
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "pbd_sm surface volume";
    pd.user = v;
    pd.kind = pbd_sm__plugin_kind(PBD_SM__TAG_VOLUME);
    pd.particle_end = v->verts[nv - 1] + 1;
    pd.work = (long)n3;
    pd.begin_substep = pbd_sm__volume_begin_substep;
    pd.project = pbd_sm__volume_project;
    pd.end_substep = pbd_sm__volume_end_substep;
    pd.save_state = pbd_sm__state_save;
    pd.load_state = pbd_sm__state_load;
    pd.destroy = pbd_sm__volume_destroy_cb;
    pd.uses_particles = pbd_sm__volume_uses;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU) { /* its arrays on the device, its callbacks launch kernels */
        pd.device = 1;
        if (!pbd_sm__cuda_volume(v, sizeof *v, NULL, PBD_SM__CUDA_UPLOAD)) {
            pbd_sm__volume_free(v);
            return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY,
                                  "pbd_sm_add_surface_volume: out of device memory for %d particles", nv);
        }
    }
#endif
    r = pbd_add_plugin(w, &pd, &v->plugin);
    if (r != PBD_OK) {
        pbd_sm__volume_free(v);
        return r;
    }
    if (out) out->id = v->plugin.id;
    return PBD_OK;
}

/* The surface volume a handle names (pbd_sm__resolve), or the error. */
static pbd_result pbd_sm__volume_of(const pbd_world *w, pbd_sm_volume h, const char *fn, pbd_sm__volume **v) {
    void *u = NULL;
    pbd_result r = pbd_sm__resolve(w, h.id, PBD_SM__TAG_VOLUME, fn, &u);
    *v = (pbd_sm__volume *)u;
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_remove_surface_volume(pbd_world *w, pbd_sm_volume volume) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_remove_surface_volume", &v);
    if (r != PBD_OK) return r;
    return pbd_remove_plugin(w, v->plugin); /* frees the volume */
}

PBD_SM_DEF pbd_result pbd_sm_volume_get_rest(const pbd_world *w, pbd_sm_volume volume, double *rest_volume) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_volume_get_rest", &v);
    if (r != PBD_OK) return r;
    if (!rest_volume) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_volume_get_rest: rest_volume is NULL");
    *rest_volume = v->rest_volume;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_measure(const pbd_world *w, pbd_sm_volume volume, double *out) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_volume_measure", &v);
    if (r != PBD_OK) return r;
    if (!out) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_volume_measure: out is NULL");
    if (v->verts[v->nv - 1] >= pbd_world_particle_count(w))
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "pbd_sm_volume_measure: particle %d of the mesh is not in the world (%d particles)",
                              v->verts[v->nv - 1], pbd_world_particle_count(w));
    *out = pbd_sm__volume_eval(v, pbd_world_positions(w), NULL);
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_set_rest(pbd_world *w, pbd_sm_volume volume, double rest_volume) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_volume_set_rest", &v);
    if (r != PBD_OK) return r;
    if (!pbd_sm__finite(rest_volume))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_sm_volume_set_rest: rest_volume is not finite (%g)",
                              rest_volume);
    if (!(rest_volume > 0))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_volume_set_rest: rest_volume %g must be > 0",
                              rest_volume);
    /* no surface inside the coordinates' bound holds more: 1e300 made
       every later step fail with PBD_ERROR_NOT_FINITE (an audit) */
    double most = 8.0 * (double)PBD_MAX_COORDINATE * PBD_MAX_COORDINATE * PBD_MAX_COORDINATE;
    if (rest_volume > most)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_volume_set_rest: rest_volume %g m^3 is more than the %g m^3 of the box "
                              "that positions may fill (PBD_MAX_COORDINATE)",
                              rest_volume, most);
    v->rest_volume = rest_volume;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_set_alpha(pbd_world *w, pbd_sm_volume volume, float alpha) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_volume_set_alpha", &v);
    if (r != PBD_OK) return r;
    if (!pbd_sm__finite(alpha))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_sm_volume_set_alpha: alpha is not finite (%g)",
                              (double)alpha);
    if (!(alpha >= 0 && alpha <= 1))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_volume_set_alpha: alpha %g outside [0, 1]",
                              (double)alpha);
    v->alpha = alpha;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_opposite(const pbd_world *w, pbd_sm_volume volume, int particle, int *opposite) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_volume_opposite", &v);
    if (r != PBD_OK) return r;
    if (!opposite) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_volume_opposite: opposite is NULL");
    int i = pbd_sm__volume_local_index(v->verts, v->nv, particle);
    if (i < 0)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_volume_opposite: particle %d is not on the mesh",
                              particle);
    *opposite = v->opposite[i] >= 0 ? v->verts[v->opposite[i]] : -1;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_volume_weights(const pbd_world *w, pbd_sm_volume volume, float *weights, int max,
                                            int *count) {
    pbd_sm__volume *v;
    pbd_result r = pbd_sm__volume_of(w, volume, "pbd_sm_volume_weights", &v);
    if (r != PBD_OK) return r;
    if (!count) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_volume_weights: count is NULL");
    if (max > 0 && !weights)
        return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_volume_weights: weights is NULL while max > 0");
    if (max < 0) return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_volume_weights: max %d < 0", max);
    pbd_sm__volume_gpu(v, PBD_SM__CUDA_FETCH);
    for (int i = 0; i < v->nv && i < max; ++i) weights[i] = (float)v->weight[i];
    *count = v->nv;
    return PBD_OK;
}

// ==== multires cloth ========================================================

/* --- mesh helpers (rest geometry) --------------------------------------------- */

static PBD_HD void pbd_sm__sub3(const float *a, const float *b, float *o) {
    o[0] = a[0] - b[0];
    o[1] = a[1] - b[1];
    o[2] = a[2] - b[2];
}
static PBD_HD void pbd_sm__cross3(const float *a, const float *b, float *o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}
static PBD_HD float pbd_sm__dot3(const float *a, const float *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static PBD_HD float pbd_sm__len3(const float *a) { return sqrtf(pbd_sm__dot3(a, a)); }

/* Twice the area vector of triangle (a, b, c) of 3-float points. */
static PBD_HD void pbd_sm__tri_normal(const float *a, const float *b, const float *c, float *n) {
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
static pbd_result pbd_sm__edges(pbd_world *mem, int nv, const int *tri, int nt, long long **keys_out, int **uses_out,
                                int *count) {
    long long *k = (long long *)pbd_sm__alloc_n(mem, (size_t)nt * 3, sizeof(long long));
    if (!k) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    for (int t = 0; t < nt; ++t)
        for (int j = 0; j < 3; ++j) {
            int a = tri[3 * t + j], b = tri[3 * t + (j + 1) % 3];
            int lo = a < b ? a : b, hi = a < b ? b : a;
            k[3 * t + j] = (long long)lo * nv + hi;
        }
    qsort(k, (size_t)nt * 3, sizeof(long long), pbd_sm__cmp_long);
    int *uses = (int *)pbd_sm__alloc_n(mem, (size_t)nt * 3, sizeof(int));
    if (!uses) {
        pbd_sm__free(mem, k);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    int n = 0;
    for (int i = 0; i < 3 * nt; ++i) {
        if (n > 0 && k[n - 1] == k[i]) {
            uses[n - 1]++;
            continue;
        }
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
static pbd_result pbd_sm__vertex_tris(pbd_world *mem, int nv, const int *tri, int nt, const unsigned char *alive,
                                      int **start_out, int **list_out) {
    int *start = (int *)pbd_sm__alloc_n(mem, (size_t)nv + 1, sizeof(int));
    int *list = (int *)pbd_sm__alloc_n(mem, (size_t)nt * 3, sizeof(int));
    if (!start || !list) {
        pbd_sm__free(mem, start);
        pbd_sm__free(mem, list);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    memset(start, 0, sizeof(int) * ((size_t)nv + 1));
    for (int t = 0; t < nt; ++t)
        if (!alive || alive[t])
            for (int j = 0; j < 3; ++j) start[tri[3 * t + j] + 1]++;
    for (int v = 0; v < nv; ++v) start[v + 1] += start[v];
    int *fill = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
    if (!fill) {
        pbd_sm__free(mem, start);
        pbd_sm__free(mem, list);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    memcpy(fill, start, sizeof(int) * (size_t)nv);
    for (int t = 0; t < nt; ++t)
        if (!alive || alive[t])
            for (int j = 0; j < 3; ++j) list[fill[tri[3 * t + j]]++] = t;
    pbd_sm__free(mem, fill);
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
    int *tri;             /* nt*3, rewritten in place */
    unsigned char *alive; /* per triangle */
    const float *x;       /* rest positions nv*3 */
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

typedef struct pbd_sm__edge_len {
    float len;
    int a, b;
} pbd_sm__edge_len;
static int pbd_sm__cmp_edge_len(const void *pa, const void *pb) {
    const pbd_sm__edge_len *a = (const pbd_sm__edge_len *)pa, *b = (const pbd_sm__edge_len *)pb;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* One round: returns the number of collapses. */
static pbd_result pbd_sm__decimate_round(pbd_world *mem, pbd_sm__decimator *d, int target, int *alive_count,
                                         int *collapses) {
    *collapses = 0;
    pbd_sm__free(mem, d->vt_start);
    pbd_sm__free(mem, d->vt_list);
    d->vt_start = d->vt_list = NULL;
    pbd_result r = pbd_sm__vertex_tris(mem, d->nv, d->tri, d->nt, d->alive, &d->vt_start, &d->vt_list);
    if (r != PBD_OK) return r;
    /* the alive triangles, compacted, for the edge list */
    int na = 0;
    int *tl = (int *)pbd_sm__alloc_n(mem, (size_t)*alive_count * 3, sizeof(int));
    if (!tl) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    for (int t = 0; t < d->nt; ++t)
        if (d->alive[t]) {
            memcpy(tl + 3 * na, d->tri + 3 * t, 3 * sizeof(int));
            na++;
        }
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    r = pbd_sm__edges(mem, d->nv, tl, na, &keys, &uses, &ne);
    pbd_sm__free(mem, tl);
    if (r != PBD_OK) return r;
    pbd_sm__free(mem, d->bkeys);
    d->bkeys = (long long *)pbd_sm__alloc_n(mem, (size_t)ne, sizeof(long long));
    pbd_sm__edge_len *el = (pbd_sm__edge_len *)pbd_sm__alloc_n(mem, (size_t)ne, sizeof *el);
    if (!d->bkeys || !el) {
        pbd_sm__free(mem, keys);
        pbd_sm__free(mem, uses);
        pbd_sm__free(mem, el);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
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
    pbd_sm__free(mem, keys);
    pbd_sm__free(mem, uses);
    qsort(el, (size_t)ne, sizeof *el, pbd_sm__cmp_edge_len);
    for (int e = 0; e<ne && * alive_count> target; ++e) {
        int a = el[e].a, b = el[e].b;
        if (d->touched[a] || d->touched[b]) continue;
        /* remove the endpoint that may go; prefer keeping boundary vertices */
        if (pbd_sm__can_collapse(d, a, b)) pbd_sm__collapse(d, a, b, alive_count);
        else if (pbd_sm__can_collapse(d, b, a)) pbd_sm__collapse(d, b, a, alive_count);
        else continue;
        (*collapses)++;
    }
    pbd_sm__free(mem, el);
    return PBD_OK;
}

/* Boundary corners (turning angle over 30 degrees) are locked so that the
   shape of the outline survives every level. */
static void pbd_sm__lock_corners(pbd_world *mem, int nv, const int *tri, int nt, const float *x,
                                 unsigned char *locked) {
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    if (pbd_sm__edges(mem, nv, tri, nt, &keys, &uses, &ne) != PBD_OK) return;
    int *nb = (int *)pbd_sm__alloc_n(mem, (size_t)nv * 2, sizeof(int));
    int *cnt = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
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
            if (cnt[v] != 2) {
                locked[v] = 1;
                continue;
            } /* a pinch: keep */
            float d0[3], d1[3];
            pbd_sm__sub3(x + 3 * v, x + 3 * nb[2 * v], d0);
            pbd_sm__sub3(x + 3 * nb[2 * v + 1], x + 3 * v, d1);
            float c = pbd_sm__dot3(d0, d1) / (pbd_sm__len3(d0) * pbd_sm__len3(d1) + PBD_SM__COS_DEN_EPS_F);
            if (c < 0.866f) locked[v] = 1;
        }
    }
    pbd_sm__free(mem, nb);
    pbd_sm__free(mem, cnt);
    pbd_sm__free(mem, keys);
    pbd_sm__free(mem, uses);
}

/* Decimates (nv, tri, nt) until at most `target` triangles remain or no
   collapse is possible; locked vertices stay. Out: the surviving triangles (renumbered over the
   surviving vertices), the surviving vertices' old indices, and for every
   old vertex the new vertex it collapsed into (following the chain). */
static pbd_result pbd_sm__decimate(pbd_world *mem, int nv, const int *tri, int nt, const float *x,
                                   const unsigned char *locked_in, int target, int **tri_out, int *nt_out,
                                   int **kept_out, int *nv_out, int **map_out) {
    pbd_sm__decimator d;
    memset(&d, 0, sizeof d);
    d.nv = nv;
    d.nt = nt;
    d.x = x;
    d.tri = (int *)pbd_sm__alloc_n(mem, (size_t)nt * 3, sizeof(int));
    d.alive = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)nt, 1);
    unsigned char *locked = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)nv, 1);
    d.boundary = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)nv, 1);
    d.touched = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)nv, 1);
    d.rep = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
    int *newid = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
    pbd_result r = PBD_OK;
    if (!d.tri || !d.alive || !locked || !d.boundary || !d.touched || !d.rep || !newid)
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    int alive = nt;
    if (r == PBD_OK) {
        memcpy(d.tri, tri, sizeof(int) * 3 * (size_t)nt);
        memset(d.alive, 1, (size_t)nt);
        memcpy(locked, locked_in, (size_t)nv);
        d.locked = locked;
        for (int v = 0; v < nv; ++v) d.rep[v] = v;
        for (int round = 0; round < 64 && alive > target; ++round) {
            int c = 0;
            r = pbd_sm__decimate_round(mem, &d, target, &alive, &c);
            if (r != PBD_OK || c == 0) break;
        }
    }
    if (r == PBD_OK) {
        /* renumber the vertices still used by a triangle */
        for (int v = 0; v < nv; ++v) newid[v] = -1;
        int *otri = (int *)pbd_sm__alloc_n(mem, (size_t)alive * 3, sizeof(int));
        int *kept = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
        int *map = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
        if (!otri || !kept || !map) {
            pbd_sm__free(mem, otri);
            pbd_sm__free(mem, kept);
            pbd_sm__free(mem, map);
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
        } else {
            int nk = 0, k = 0;
            for (int t = 0; t < nt; ++t) {
                if (!d.alive[t]) continue;
                for (int j = 0; j < 3; ++j) {
                    int v = d.tri[3 * t + j];
                    if (newid[v] < 0) {
                        newid[v] = nk;
                        kept[nk++] = v;
                    }
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
    pbd_sm__free(mem, d.tri);
    pbd_sm__free(mem, d.alive);
    pbd_sm__free(mem, locked);
    pbd_sm__free(mem, d.boundary);
    pbd_sm__free(mem, d.touched);
    pbd_sm__free(mem, d.rep);
    pbd_sm__free(mem, newid);
    pbd_sm__free(mem, d.vt_start);
    pbd_sm__free(mem, d.vt_list);
    pbd_sm__free(mem, d.bkeys);
    return r;
}

/* --- the hierarchy ------------------------------------------------------------ */

/* One level. Positions are 4 floats per vertex (x y z inverse-mass); the
   finest level's `x` points into the world's predicted positions. Element
   arrays are stored sorted by colour (independent sets, section 5); the
   two-pass scheme walks them in the same order. */
typedef struct pbd_sm__level {
    int nv, nt, ne;
    int *tri, *edge;         /* nt*3, ne*2 */
    float *x;                /* nv*4 (coarse levels own it) */
    float *xhat;             /* nv*4: positions before this level's matching (Algorithm 2) */
    float *rest;             /* nv*3 rest positions */
    float *mass;             /* eq. 1 */
    float *mt, *me;          /* modified masses m/|R_i| of the 2D and 1D regions */
    float *inv_rt, *inv_re;  /* 1/|R_i| */
    float *tq;               /* nt*6: rest 2D corners qbar (eq. 8) */
    float *tP;               /* nt*6: the last valid projection P (eq. 7) */
    float *eq;               /* ne*3: q1^0, q2^0 (eq. 14), rest length */
    int ntc, nec;            /* colour counts */
    int overflow[2];         /* the last colour of triangles / edges is the serial overflow set */
    int *tc, *ec;            /* colour offsets, ntc+1 / nec+1 */
    int *vt_start, *vt_list; /* vertex -> triangle corners 3t+k (two-pass gather) */
    int *ve_start, *ve_list; /* vertex -> edge ends 2e+k */
    float *tdx, *edx;        /* per corner / end corrections, nt*9 / ne*6 */
    /* transfer to the next finer level: finer vertex f reads pro_idx[3f..] with pro_w */
    int *pro_idx;
    float *pro_w;
    /* restriction from the next finer level: rows per vertex of this level */
    int *res_start, *res_idx;
    float *res_w;
    int *fine_of; /* nested: the finer level's vertex at this vertex */
} pbd_sm__level;

struct pbd_sm__cloth {
    uint32_t tag;     /* PBD_SM__TAG_CLOTH */
    pbd_world *world; /* the owner: its allocator holds every array */
    pbd_plugin plugin;
    pbd_range particles;
    int nlevels;
    pbd_sm__level *lv; /* 0 coarsest .. nlevels-1 finest */
    int nested;
    float alpha, beta, damping, bending;
    int conserve, scheme;
    int simd; /* the SIMD triangle kernel (where compiled); 0: the scalar reference */
    /* bending: Q as CSR rows over the finest vertices (Bergou et al. 2006) */
    int *q_start, *q_idx;
    float *q_val;
    float *q_row;  /* sum_j |Q_ij| per finest vertex (Gershgorin), for the stable step */
    float q_row_w; /* max_i q_row[i] / m_i over the finest vertices (their masses of eq. 1) */
    float *force;  /* nv*3 scratch */
    float *kept;   /* every level's tP, then the coarse levels' x, at the step's
                      start: what a rolled-back step puts back (pbd_sm__cloth_keep) */
    size_t nkept;  /* its floats */
    void *gpu;     /* on a GPU world: pbd_cuda.cu's copy (pbd_sm__cuda_cloth) */
};

#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
/* The cloth's stages on a GPU world (see "shape matching", "on a GPU
   world"); size: sizeof *c. */
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_sm__cuda_cloth(pbd_sm__cloth *c, size_t size, const pbd_solve_context *s, int what);
#endif
/* A GPU world's cloth: FETCH the coarse levels' positions before a getter
   hands them out, FREE; or a stage (s). Returns whether it is on a GPU. */
static int pbd_sm__cloth_gpu(pbd_sm__cloth *c, const pbd_solve_context *s, int what) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (c->gpu) return pbd_sm__cuda_cloth(c, sizeof *c, s, what), 1;
#else
    (void)c;
    (void)s;
    (void)what;
#endif
    return 0;
}

static void pbd_sm__level_free(pbd_world *mem, pbd_sm__level *L, int owns_x) {
    void *a[] = {L->tri, L->edge, L->xhat,    L->rest,  L->mass,      L->mt,       L->me,      L->inv_rt,   L->inv_re,
                 L->tq,  L->tP,   L->eq,      L->tc,    L->ec,        L->vt_start, L->vt_list, L->ve_start, L->ve_list,
                 L->tdx, L->edx,  L->pro_idx, L->pro_w, L->res_start, L->res_idx,  L->res_w,   L->fine_of};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; ++i) pbd_sm__free(mem, a[i]);
    if (owns_x) pbd_sm__free(mem, L->x);
    memset(L, 0, sizeof *L);
}

static void pbd_sm__cloth_free(pbd_sm__cloth *c) {
    if (!c) return;
    pbd_sm__cloth_gpu(c, NULL, PBD_SM__CUDA_FREE);
    pbd_world *mem = c->world;
    for (int l = 0; l < c->nlevels; ++l) pbd_sm__level_free(mem, &c->lv[l], l < c->nlevels - 1);
    pbd_sm__free(mem, c->lv);
    pbd_sm__free(mem, c->q_start);
    pbd_sm__free(mem, c->q_idx);
    pbd_sm__free(mem, c->q_val);
    pbd_sm__free(mem, c->q_row);
    pbd_sm__free(mem, c->force);
    pbd_sm__free(mem, c->kept);
    pbd_sm__free(mem, c);
}

/* Colours elements of `arity` vertices with pbd.h's greedy colouring
   (pbd_color_elements, first fit: no two elements of a colour share a
   vertex, except in the overflow colour, the last when *overflow, whose
   elements are applied one by one), then sorts them stably by colour;
   *offsets receives the *ncolors + 1 starts of the colours. */
static pbd_result pbd_sm__color_elements(pbd_world *mem, int nv, int *el, int n, int arity, int **offsets, int *ncolors,
                                         int *overflow) {
    int *col = (int *)pbd_sm__alloc_n(mem, (size_t)n, sizeof(int));
    int *tmp = (int *)pbd_sm__alloc_n(mem, (size_t)n * arity, sizeof(int));
    int *off = (int *)pbd_sm__alloc_n(mem, PBD_MAX_COLORS + 1, sizeof(int));
    pbd_result r = PBD_OK;
    if (!col || !tmp || !off) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    if (r == PBD_OK) r = pbd_color_elements(mem, el, n, arity, nv, 0, col, off, PBD_MAX_COLORS + 1, ncolors, overflow);
    if (r == PBD_OK) {
        int fill[PBD_MAX_COLORS + 1];
        memcpy(fill, off, sizeof(int) * (size_t)(*ncolors + 1));
        for (int e = 0; e < n; ++e)
            memcpy(tmp + (size_t)arity * fill[col[e]]++, el + (size_t)arity * e, sizeof(int) * arity);
        memcpy(el, tmp, sizeof(int) * (size_t)n * arity);
        *offsets = off;
        off = NULL;
    }
    pbd_sm__free(mem, col);
    pbd_sm__free(mem, tmp);
    pbd_sm__free(mem, off);
    return r;
}

/* CSR vertex -> element ends (arity*e + k). */
static pbd_result pbd_sm__vertex_ends(pbd_world *mem, int nv, const int *el, int n, int arity, int **start_out,
                                      int **list_out) {
    int *start = (int *)pbd_sm__alloc_n(mem, (size_t)nv + 1, sizeof(int));
    int *list = (int *)pbd_sm__alloc_n(mem, (size_t)n * arity, sizeof(int));
    int *fill = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
    if (!start || !list || !fill) {
        pbd_sm__free(mem, start);
        pbd_sm__free(mem, list);
        pbd_sm__free(mem, fill);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    memset(start, 0, sizeof(int) * ((size_t)nv + 1));
    for (int i = 0; i < n * arity; ++i) start[el[i] + 1]++;
    for (int v = 0; v < nv; ++v) start[v + 1] += start[v];
    memcpy(fill, start, sizeof(int) * (size_t)nv);
    for (int i = 0; i < n * arity; ++i) list[fill[el[i]]++] = i;
    pbd_sm__free(mem, fill);
    *start_out = start;
    *list_out = list;
    return PBD_OK;
}

static void pbd_sm__level_weights(pbd_sm__level *L);
/* Rest data of one level from its mesh and rest positions: masses (eq. 1),
   region counts, 2D rest corners (eq. 8), 1D rest
   distances (eq. 14). Fails on zero-area triangles. */
static pbd_result pbd_sm__level_rest(pbd_world *mem, pbd_sm__level *L, float density) {
    int nv = L->nv, nt = L->nt;
    L->mass = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
    L->mt = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
    L->me = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
    L->inv_rt = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
    L->inv_re = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
    L->tq = (float *)pbd_sm__alloc_n(mem, (size_t)nt * 6, sizeof(float));
    L->tP = (float *)pbd_sm__alloc_n(mem, (size_t)nt * 6, sizeof(float));
    L->tdx = (float *)pbd_sm__alloc_n(mem, (size_t)nt * 9, sizeof(float));
    L->xhat = (float *)pbd_sm__alloc_n(mem, (size_t)nv * 4, sizeof(float));
    if (!L->mass || !L->mt || !L->me || !L->inv_rt || !L->inv_re || !L->tq || !L->tP || !L->tdx || !L->xhat)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    int *rt = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int)),
        *re = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
    if (!rt || !re) {
        pbd_sm__free(mem, rt);
        pbd_sm__free(mem, re);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
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
        if (!(area > PBD_SM__SLIVER_REL_F * (pbd_sm__dot3(e01, e01) + PBD_SM__EDGE2_FLOOR_F)) || !(area > 0)) {
            r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                               "pbd_sm_add_cloth: triangle %d (vertices %d, %d, %d) of the level of %d vertices is "
                               "degenerate (area %g)",
                               t, T[0], T[1], T[2], nv, (double)area);
            break;
        }
        for (int k = 0; k < 3; ++k) {
            L->mass[T[k]] += density * area / 3.0f; /* eq. 1 */
            rt[T[k]]++;
        }
    }
    for (int e = 0; e < L->ne; ++e) {
        re[L->edge[2 * e]]++;
        re[L->edge[2 * e + 1]]++;
    }
    for (int v = 0; v < nv && r == PBD_OK; ++v) {
        L->inv_rt[v] = rt[v] ? 1.0f / (float)rt[v] : 0.0f;
        L->inv_re[v] = re[v] ? 1.0f / (float)re[v] : 0.0f;
    }
    pbd_sm__free(mem, rt);
    pbd_sm__free(mem, re);
    if (r != PBD_OK) return r;
    if (L->ne) {
        L->eq = (float *)pbd_sm__alloc_n(mem, (size_t)L->ne * 3, sizeof(float));
        L->edx = (float *)pbd_sm__alloc_n(mem, (size_t)L->ne * 6, sizeof(float));
        if (!L->eq || !L->edx) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    pbd_sm__level_weights(L);
    return PBD_OK;
}

/* The weights that follow from a level's masses L->mass: the masses per
   region m~ = m / |R| (section 3) and the rest data centred on them (t^0,
   qbar: eqs. 4, 8; q1^0, q2^0: eq. 14). Region counts from the gather
   lists. */
static void pbd_sm__level_weights(pbd_sm__level *L) {
    int nv = L->nv, nt = L->nt;
    for (int v = 0; v < nv; ++v) {
        int rt = L->vt_start[v + 1] - L->vt_start[v], re = L->ve_start[v + 1] - L->ve_start[v];
        L->mt[v] = rt ? L->mass[v] / (float)rt : 0.0f;
        L->me[v] = re ? L->mass[v] / (float)re : 0.0f;
    }
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
        for (int k = 0; k < 3; ++k) {
            L->tP[6 * t + k] = ax[k];
            L->tP[6 * t + 3 + k] = ay[k];
        }
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
}

/* Closest point of triangle (a, b, c) to p as barycentric weights (Ericson,
   Real-Time Collision Detection 5.1.5); returns the squared distance. */
static float pbd_sm__closest_bary(const float *p, const float *a, const float *b, const float *c, float *w) {
    float ab[3], ac[3], ap[3];
    pbd_sm__sub3(b, a, ab);
    pbd_sm__sub3(c, a, ac);
    pbd_sm__sub3(p, a, ap);
    float d1 = pbd_sm__dot3(ab, ap), d2 = pbd_sm__dot3(ac, ap);
    if (d1 <= 0 && d2 <= 0) {
        w[0] = 1;
        w[1] = w[2] = 0;
    } else {
        float bp[3];
        pbd_sm__sub3(p, b, bp);
        float d3 = pbd_sm__dot3(ab, bp), d4 = pbd_sm__dot3(ac, bp);
        float cp[3];
        pbd_sm__sub3(p, c, cp);
        float d5 = pbd_sm__dot3(ab, cp), d6 = pbd_sm__dot3(ac, cp);
        float vc = d1 * d4 - d3 * d2, vb = d5 * d2 - d1 * d6, va = d3 * d6 - d5 * d4;
        if (d3 >= 0 && d4 <= d3) {
            w[1] = 1;
            w[0] = w[2] = 0;
        } else if (vc <= 0 && d1 >= 0 && d3 <= 0) {
            float v = d1 / (d1 - d3);
            w[0] = 1 - v;
            w[1] = v;
            w[2] = 0;
        } else if (d6 >= 0 && d5 <= d6) {
            w[2] = 1;
            w[0] = w[1] = 0;
        } else if (vb <= 0 && d2 >= 0 && d6 <= 0) {
            float v = d2 / (d2 - d6);
            w[0] = 1 - v;
            w[2] = v;
            w[1] = 0;
        } else if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
            float v = (d4 - d3) / ((d4 - d3) + (d5 - d6));
            w[1] = 1 - v;
            w[2] = v;
            w[0] = 0;
        } else {
            float den = 1.0f / (va + vb + vc);
            w[1] = vb * den;
            w[2] = vc * den;
            w[0] = 1 - w[1] - w[2];
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
static pbd_result pbd_sm__transfer(pbd_world *mem, pbd_sm__level *C, const pbd_sm__level *F, const int *map) {
    int *vt_start = NULL, *vt_list = NULL;
    pbd_result r = pbd_sm__vertex_tris(mem, C->nv, C->tri, C->nt, NULL, &vt_start, &vt_list);
    if (r != PBD_OK) return r;
    C->pro_idx = (int *)pbd_sm__alloc_n(mem, (size_t)F->nv * 3, sizeof(int));
    C->pro_w = (float *)pbd_sm__alloc_n(mem, (size_t)F->nv * 3, sizeof(float));
    if (!C->pro_idx || !C->pro_w) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
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
                    if (d < best || (d == best && t < bt)) {
                        best = d;
                        bt = t;
                        memcpy(bw, w, sizeof bw);
                    }
                }
            }
        }
        if (bt < 0) {
            C->pro_idx[3 * f] = C->pro_idx[3 * f + 1] = C->pro_idx[3 * f + 2] = c;
            bw[0] = 1;
            bw[1] = bw[2] = 0;
        } else
            for (int k = 0; k < 3; ++k) C->pro_idx[3 * f + k] = C->tri[3 * bt + k];
        memcpy(C->pro_w + 3 * f, bw, sizeof bw);
    }
    pbd_sm__free(mem, vt_start);
    pbd_sm__free(mem, vt_list);
    if (r != PBD_OK) return r;
    /* restriction rows: transpose, normalised; a row left empty takes the
       fine vertices that collapsed into it (weight 1 each, normalised) */
    C->res_start = (int *)pbd_sm__alloc_n(mem, (size_t)C->nv + 1, sizeof(int));
    double *rowsum = (double *)pbd_sm__alloc_n(mem, (size_t)C->nv, sizeof(double));
    if (!C->res_start || !rowsum) {
        pbd_sm__free(mem, rowsum);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    memset(C->res_start, 0, sizeof(int) * ((size_t)C->nv + 1));
    memset(rowsum, 0, sizeof(double) * (size_t)C->nv);
    for (int f = 0; f < F->nv; ++f)
        for (int k = 0; k < 3; ++k)
            if (C->pro_w[3 * f + k] > 0) {
                C->res_start[C->pro_idx[3 * f + k] + 1]++;
                rowsum[C->pro_idx[3 * f + k]] += C->pro_w[3 * f + k];
            }
    for (int f = 0; f < F->nv; ++f)
        if (map[f] >= 0 && rowsum[map[f]] == 0) C->res_start[map[f] + 1]++;
    for (int c = 0; c < C->nv; ++c) C->res_start[c + 1] += C->res_start[c];
    int total = C->res_start[C->nv];
    C->res_idx = (int *)pbd_sm__alloc_n(mem, (size_t)total, sizeof(int));
    C->res_w = (float *)pbd_sm__alloc_n(mem, (size_t)total, sizeof(float));
    int *fill = (int *)pbd_sm__alloc_n(mem, (size_t)C->nv, sizeof(int));
    if (!C->res_idx || !C->res_w || !fill) {
        pbd_sm__free(mem, rowsum);
        pbd_sm__free(mem, fill);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    memcpy(fill, C->res_start, sizeof(int) * (size_t)C->nv);
    for (int f = 0; f < F->nv; ++f) {
        for (int k = 0; k < 3; ++k) {
            int c = C->pro_idx[3 * f + k];
            float wv = C->pro_w[3 * f + k];
            if (wv > 0) {
                C->res_idx[fill[c]] = f;
                C->res_w[fill[c]++] = (float)(wv / rowsum[c]);
            }
        }
        if (map[f] >= 0 && rowsum[map[f]] == 0) {
            C->res_idx[fill[map[f]]] = f;
            C->res_w[fill[map[f]]++] = 1;
        }
    }
    for (int c = 0; c < C->nv; ++c) /* the fallback rows: normalise */
        if (rowsum[c] == 0 && C->res_start[c + 1] > C->res_start[c]) {
            float inv = 1.0f / (float)(C->res_start[c + 1] - C->res_start[c]);
            for (int e = C->res_start[c]; e < C->res_start[c + 1]; ++e) C->res_w[e] = inv;
        }
    pbd_sm__free(mem, rowsum);
    pbd_sm__free(mem, fill);
    return PBD_OK;
}

/* Edges of a level's mesh from its triangles. */
static pbd_result pbd_sm__level_edges(pbd_world *mem, pbd_sm__level *L) {
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    pbd_result r = pbd_sm__edges(mem, L->nv, L->tri, L->nt, &keys, &uses, &ne);
    if (r != PBD_OK) return r;
    for (int e = 0; e < ne; ++e)
        if (uses[e] > 2) { /* non-manifold */
            long long a = keys[e] / L->nv, b = keys[e] % L->nv;
            int u = uses[e];
            pbd_sm__free(mem, keys);
            pbd_sm__free(mem, uses);
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                                  "pbd_sm_add_cloth: edge (%lld, %lld) of the level of %d vertices is in %d triangles "
                                  "(non-manifold)",
                                  a, b, L->nv, u);
        }
    L->edge = (int *)pbd_sm__alloc_n(mem, (size_t)ne * 2, sizeof(int));
    if (!L->edge) {
        pbd_sm__free(mem, keys);
        pbd_sm__free(mem, uses);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    for (int e = 0; e < ne; ++e) {
        L->edge[2 * e] = (int)(keys[e] / L->nv);
        L->edge[2 * e + 1] = (int)(keys[e] % L->nv);
    }
    L->ne = ne;
    pbd_sm__free(mem, keys);
    pbd_sm__free(mem, uses);
    return PBD_OK;
}

/* Colours, gather lists and rest data of a level whose tri, rest and nv/nt
   are set. The rest data is computed after the colour sort, so that the
   per-element arrays follow the element order. */
static pbd_result pbd_sm__level_finish(pbd_world *mem, pbd_sm__level *L, float density) {
    pbd_result r = pbd_sm__level_edges(mem, L);
    if (r == PBD_OK) r = pbd_sm__color_elements(mem, L->nv, L->tri, L->nt, 3, &L->tc, &L->ntc, &L->overflow[0]);
    if (r == PBD_OK) r = pbd_sm__color_elements(mem, L->nv, L->edge, L->ne, 2, &L->ec, &L->nec, &L->overflow[1]);
    if (r == PBD_OK) r = pbd_sm__vertex_ends(mem, L->nv, L->tri, L->nt, 3, &L->vt_start, &L->vt_list);
    if (r == PBD_OK) r = pbd_sm__vertex_ends(mem, L->nv, L->edge, L->ne, 2, &L->ve_start, &L->ve_list);
    if (r == PBD_OK) r = pbd_sm__level_rest(mem, L, density);
    return r;
}

/* Bergou et al. 2006 quadratic bending (paper section 4.4): per interior
   edge with the cotangent weights K and s^2 = 3 / (A0 + A1) (from
   pbd_isometric_bending_rest), Q += s^2 K K^T; assembled as CSR rows. */
static pbd_result pbd_sm__bending_matrix(pbd_sm__cloth *c) {
    pbd_world *mem = c->world;
    const pbd_sm__level *L = &c->lv[c->nlevels - 1];
    int nv = L->nv;
    /* interior edges: the two triangles of each edge */
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    pbd_result r = pbd_sm__edges(mem, nv, L->tri, L->nt, &keys, &uses, &ne);
    if (r != PBD_OK) return r;
    int *wing = (int *)pbd_sm__alloc_n(mem, (size_t)ne * 2, sizeof(int));
    int *stencil = (int *)pbd_sm__alloc_n(mem, (size_t)ne * 4, sizeof(int));
    float *kw = (float *)pbd_sm__alloc_n(mem, (size_t)ne * 4, sizeof(float));
    if (!wing || !stencil || !kw) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
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
                    else {
                        e = m;
                        break;
                    }
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
        c->q_start = (int *)pbd_sm__alloc_n(mem, (size_t)nv + 1, sizeof(int));
        c->q_idx = (int *)pbd_sm__alloc_n(mem, (size_t)ns * 16 + 1, sizeof(int));
        c->q_val = (float *)pbd_sm__alloc_n(mem, (size_t)ns * 16 + 1, sizeof(float));
        c->force = (float *)pbd_sm__alloc_n(mem, (size_t)nv * 3, sizeof(float));
        c->q_row = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
        if (!c->q_start || !c->q_idx || !c->q_val || !c->force || !c->q_row)
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    if (r == PBD_OK) {
        /* rows via per-vertex stencil lists, merged with a scatter array */
        int *vs = NULL, *vl = NULL;
        r = pbd_sm__vertex_ends(mem, nv, stencil, ns, 4, &vs, &vl);
        float *acc = (float *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(float));
        int *mark = (int *)pbd_sm__alloc_n(mem, (size_t)nv, sizeof(int));
        int *cols = (int *)pbd_sm__alloc_n(mem, 1024, sizeof(int));
        if (r == PBD_OK && (!acc || !mark || !cols))
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
        if (r == PBD_OK) {
            for (int v = 0; v < nv; ++v) {
                mark[v] = -1;
                acc[v] = 0;
            }
            int nnz = 0;
            c->q_start[0] = 0;
            for (int i = 0; i < nv; ++i) {
                int nc = 0;
                for (int e = vs[i]; e < vs[i + 1]; ++e) {
                    int s = vl[e] / 4, k = vl[e] % 4;
                    for (int j = 0; j < 4; ++j) {
                        int col = stencil[4 * s + j];
                        if (mark[col] != i) {
                            mark[col] = i;
                            acc[col] = 0;
                            if (nc < 1024) cols[nc++] = col;
                        }
                        acc[col] += kw[4 * s + k] * kw[4 * s + j];
                    }
                }
                qsort(cols, (size_t)nc, sizeof(int), pbd_sm__cmp_int);
                double row = 0;
                for (int q = 0; q < nc; ++q) {
                    c->q_idx[nnz] = cols[q];
                    c->q_val[nnz++] = acc[cols[q]];
                    row += fabs((double)acc[cols[q]]);
                }
                c->q_start[i + 1] = nnz;
                c->q_row[i] = (float)row;
                if (row / L->mass[i] > c->q_row_w) c->q_row_w = (float)(row / L->mass[i]);
            }
        }
        pbd_sm__free(mem, vs);
        pbd_sm__free(mem, vl);
        pbd_sm__free(mem, acc);
        pbd_sm__free(mem, mark);
        pbd_sm__free(mem, cols);
    }
    pbd_sm__free(mem, keys);
    pbd_sm__free(mem, uses);
    pbd_sm__free(mem, wing);
    pbd_sm__free(mem, stencil);
    pbd_sm__free(mem, kw);
    return r;
}

/* Non-nested coarse positions (figure 3b): each coarse vertex moves to the
   centroid of the fine vertices that collapsed into it, so that the levels
   share no vertex. Locked vertices (corners, kept ones) stay; a boundary
   vertex averages only the boundary vertices of its cluster, so the
   outline does not shrink; the corners of a triangle the move would fold
   or squash stay on their fine vertices. */
static pbd_result pbd_sm__centroids(pbd_world *mem, const pbd_sm__level *F, pbd_sm__level *C, const int *kept,
                                    const int *map, const unsigned char *locked) {
    long long *keys = NULL;
    int *uses = NULL, ne = 0;
    pbd_result r = pbd_sm__edges(mem, F->nv, F->tri, F->nt, &keys, &uses, &ne);
    if (r != PBD_OK) return r;
    unsigned char *bnd = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)F->nv, 1);
    double *acc = (double *)pbd_sm__alloc_n(mem, (size_t)C->nv * 4, sizeof(double));
    if (!bnd || !acc) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
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
        /* a triangle that the move turned by over 70 degrees or shrank to
           a tenth puts its corners back on their fine vertices */
        for (int pass = 0, moved = 1; pass < 8 && moved; ++pass) {
            moved = 0;
            for (int t = 0; t < C->nt; ++t) {
                const int *T = C->tri + 3 * t;
                float n0[3], n1[3];
                pbd_sm__tri_normal(F->rest + 3 * kept[T[0]], F->rest + 3 * kept[T[1]], F->rest + 3 * kept[T[2]], n0);
                pbd_sm__tri_normal(C->rest + 3 * T[0], C->rest + 3 * T[1], C->rest + 3 * T[2], n1);
                float l0 = pbd_sm__len3(n0), l1 = pbd_sm__len3(n1);
                if (pbd_sm__dot3(n0, n1) > 0.35f * l0 * l1 && l1 > 0.1f * l0) continue;
                for (int j = 0; j < 3; ++j)
                    for (int k = 0; k < 3; ++k) {
                        float f = F->rest[3 * kept[T[j]] + k];
                        if (C->rest[3 * T[j] + k] != f) {
                            C->rest[3 * T[j] + k] = f;
                            moved = 1;
                        }
                    }
            }
        }
    }
    pbd_sm__free(mem, keys);
    pbd_sm__free(mem, uses);
    pbd_sm__free(mem, bnd);
    pbd_sm__free(mem, acc);
    return r;
}

/* The masses of coarse level C from those of the finer level F through the
   prolongation P (its barycentric weights): M_C = P^T M_F, the lumped
   Galerkin mass (the row sums of P^T M_F P, P's rows summing to 1). A
   coarse correction dx_C then moves the finer level by P dx_C, whose
   momentum sum_f m_f (P dx_C)_f = sum_c (P^T m)_c dx_C,c is the coarse
   level's own, which its shape matching conserves (eq. 4: the goals keep
   the centre of mass of m~ = m / |R|): so prolongation, level after level,
   adds no momentum to the cloth (with eq. 1's area masses on the coarse
   levels it did: a free cloth drifted off). Total mass is kept; the area
   masses of eq. 1 are what P^T m approximates. A coarse vertex that no
   finer vertex reads (possible when not nested) moves no particle: it
   keeps its area mass. */
static pbd_result pbd_sm__coarse_masses(pbd_world *mem, pbd_sm__level *C, const pbd_sm__level *F) {
    double *m = (double *)pbd_sm__alloc_n(mem, (size_t)C->nv, sizeof(double));
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    memset(m, 0, sizeof(double) * (size_t)C->nv);
    for (int f = 0; f < F->nv; ++f)
        for (int k = 0; k < 3; ++k) m[C->pro_idx[3 * f + k]] += (double)C->pro_w[3 * f + k] * F->mass[f];
    for (int v = 0; v < C->nv; ++v)
        if (m[v] > 0) C->mass[v] = (float)m[v];
    pbd_sm__free(mem, m);
    pbd_sm__level_weights(C);
    return PBD_OK;
}

/* The restriction of coarse level C, R = M_C^-1 P^T M_F (row v: the
   weights P_fv m_f / M_v, M_C = P^T M_F), and C's rest shape R rest_F: a
   coarse level's positions are always R x_F (pbd_sm__sync_vertex), for
   nested levels too, and its corrections reach the finer level as P dx_C.
   P dx_C is then the mass-weighted projection direction of the coarse
   constraints as functions of the finer positions (their gradient through
   R is M_F^-1 R^T = P M_C^-1), as the world's inertia measures it, so the
   transfers do no work of their own. Coarse positions copied from the
   fine vertices they stand for (nested, R' = injection) with corrections
   going back through P made a projection along directions that are no
   gradient of what it enforced: a free 20 x 20 cloth at rest with +-5 mm
   of noise in zero gravity gained 0.5 J in 1 s at 4 substeps x 4
   iterations, and blew up after 2 s at 4 x 1, wrinkle conservation
   (eqs. 16-18) worst (tests/test_sm_cloth.c,
   sm_cloth_free_cloth_stays_calm: now 0.14 and 0.34 mJ at 1 s, falling);
   without bending even 2 levels without wrinkle conservation gained
   energy. What is left: with wrinkle conservation and without bending
   (bending_stiffness 0) that cloth still gains 84 mJ in 1 s at 4 x 4 (20
   mJ at 4 x 1, 1.3 mJ at 1 x 1; with conserve_wrinkles = 0 it stays under
   0.06 mJ); not verified, but eq. 18's goal (the scale of A = A_pq
   A_qq^-1 clamped) is not the mass-weighted closest one, so it too is
   no projection in the mass metric. The rest R rest_F keeps
   a rigid motion matched exactly. Nested, a kept vertex (keep_vertices:
   those you pin) weighs 1000 times its mass in R, as a pinned corner does
   in the matching (an infinite mass makes R inject it): a pinned one then
   stays at its pin on every level, and its coarse triangles at their
   rest; weighed as the others, the coarse vertex sat at the mean of its
   neighbourhood and the worst edge at a pinned corner of a hanging cloth
   doubled (bench/sm_cloth_window). Rows of the fallback (a coarse vertex
   no finer vertex reads) stay as built. */
/* Restriction entry e of coarse vertex v before its row is normalised:
   P_fv times finer vertex f's mass (a kept vertex's 1000 times). */
static double pbd_sm__restrict_weight(const pbd_sm__level *C, const pbd_sm__level *F, const unsigned char *kept, int v,
                                      int e) {
    int f = C->res_idx[e];
    double pw = 0;
    for (int k = 0; k < 3; ++k)
        if (C->pro_idx[3 * f + k] == v) pw += C->pro_w[3 * f + k];
    return pw * (kept && kept[f] ? 1000.0 : 1.0) * F->mass[f];
}
static void pbd_sm__galerkin(pbd_sm__level *C, const pbd_sm__level *F, const unsigned char *kept) {
    for (int v = 0; v < C->nv; ++v) {
        double sw = 0, rr[3] = {0, 0, 0};
        for (int e = C->res_start[v]; e < C->res_start[v + 1]; ++e) sw += pbd_sm__restrict_weight(C, F, kept, v, e);
        if (!(sw > 0)) continue; /* a fallback row: as it was */
        for (int e = C->res_start[v]; e < C->res_start[v + 1]; ++e)
            C->res_w[e] = (float)(pbd_sm__restrict_weight(C, F, kept, v, e) / sw);
        const float *o = F->rest + 3 * C->res_idx[C->res_start[v]];
        for (int e = C->res_start[v]; e < C->res_start[v + 1]; ++e)
            for (int k = 0; k < 3; ++k) rr[k] += (double)C->res_w[e] * ((double)F->rest[3 * C->res_idx[e] + k] - o[k]);
        for (int k = 0; k < 3; ++k) C->rest[3 * v + k] = (float)(o[k] + rr[k]);
    }
    pbd_sm__level_weights(C);
}

/* Builds every level below the finest: decimation, positions (nested: the
   surviving vertices; non-nested: the centroid of the vertices each coarse
   vertex replaces; both only to build the transfers), transfers, rest
   data (at last the mass-weighted restriction and the rest shapes it
   gives, pbd_sm__galerkin). Kept vertices stay locked on every level. */
static pbd_result pbd_sm__build_hierarchy(pbd_sm__cloth *c, const pbd_sm_cloth_desc *d, int levels) {
    pbd_world *mem = c->world;
    pbd_result r = PBD_OK;
    pbd_sm__level *top = &c->lv[levels - 1];
    unsigned char *lock_f = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)top->nv, 1);
    if (!lock_f) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    memset(lock_f, 0, (size_t)top->nv);
    for (int k = 0; k < d->keep_count; ++k) lock_f[d->keep_vertices[k]] = 1;
    for (int l = levels - 1; l > 0 && r == PBD_OK; --l) {
        pbd_sm__level *F = &c->lv[l], *C = &c->lv[l - 1];
        int target = (int)((double)F->nt * (1.0 - (double)d->reduction) + 0.5);
        int *kept = NULL, *map = NULL;
        pbd_sm__lock_corners(mem, F->nv, F->tri, F->nt, F->rest, lock_f);
        r = pbd_sm__decimate(mem, F->nv, F->tri, F->nt, F->rest, lock_f, target, &C->tri, &C->nt, &kept, &C->nv, &map);
        if (r != PBD_OK) break;
        if ((long)C->nt * 20 > (long)F->nt * 19)
            r = pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                               "pbd_sm_add_cloth: the mesh is too small for %d levels: decimating %d triangles left %d",
                               levels, F->nt, C->nt);
        C->rest = (float *)pbd_sm__alloc_n(mem, (size_t)C->nv * 3, sizeof(float));
        C->x = (float *)pbd_sm__alloc_n(mem, (size_t)C->nv * 4, sizeof(float));
        unsigned char *lock_c = r == PBD_OK ? (unsigned char *)pbd_sm__alloc_n(mem, (size_t)C->nv, 1) : NULL;
        if (r == PBD_OK && (!lock_c || !C->rest || !C->x))
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
        if (r == PBD_OK && c->nested) {
            for (int v = 0; v < C->nv; ++v) memcpy(C->rest + 3 * v, F->rest + 3 * kept[v], 3 * sizeof(float));
        } else if (r == PBD_OK) {
            r = pbd_sm__centroids(mem, F, C, kept, map, lock_f);
        }
        if (r == PBD_OK) {
            for (int v = 0; v < C->nv; ++v) lock_c[v] = lock_f[kept[v]];
            pbd_sm__free(mem, lock_f);
            lock_f = lock_c;
            lock_c = NULL;
            if (c->nested) {
                C->fine_of = kept;
                kept = NULL;
            }
        }
        pbd_sm__free(mem, lock_c);
        if (r == PBD_OK) r = pbd_sm__level_finish(mem, C, d->density);
        if (r == PBD_OK) r = pbd_sm__transfer(mem, C, F, map);
        if (r == PBD_OK) r = pbd_sm__coarse_masses(mem, C, F);
        pbd_sm__free(mem, kept);
        pbd_sm__free(mem, map);
    }
    pbd_sm__free(mem, lock_f);
    /* nested: a kept vertex weighs 1000 times its mass in R (as a pinned
       corner does in the matching), so a pinned one is at its pin on every
       level, and its rest where it is */
    unsigned char *kf = NULL;
    if (r == PBD_OK && c->nested && d->keep_count > 0) {
        kf = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)top->nv, 1);
        if (!kf) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
        else {
            memset(kf, 0, (size_t)top->nv);
            for (int k = 0; k < d->keep_count; ++k) kf[d->keep_vertices[k]] = 1;
        }
    }
    for (int l = levels - 1; l > 0 && r == PBD_OK; --l) {
        pbd_sm__level *C = &c->lv[l - 1];
        pbd_sm__galerkin(C, &c->lv[l], kf);
        if (kf) {
            unsigned char *kc = (unsigned char *)pbd_sm__alloc_n(mem, (size_t)C->nv, 1);
            if (!kc) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
            else
                for (int v = 0; v < C->nv; ++v) kc[v] = kf[C->fine_of[v]];
            pbd_sm__free(mem, kf);
            kf = kc;
        }
    }
    pbd_sm__free(mem, kf);
    return r;
}

/* --- shape matching kernels ---------------------------------------------------- */

/* The kernels work on blocks of elements: a scalar loop gathers the
   corners into local SoA arrays, one branch-free loop does the maths, a
   scalar loop scatters the results. The maths loops are written for the
   compiler's vectoriser (every lane does exactly the scalar operations, so
   vectorised and scalar builds agree bit for bit): gcc 12 vectorises the
   edge kernel at -O3 (and both kernels' maths at -O3 -march=native), but
   neither at -O2, so the triangle maths also has an explicit SIMD twin
   (pbd_sm__tri_lanes_simd below), which is vectorised at any -O level.
   A pinned vertex has an infinite mass: it is its region's centre of mass
   and the others are matched around it. We weigh pinned corners 1000 times
   their mass (exact to 0.1% of an edge) and re-centre the rest shape on
   these weights: q' = q - sum w' q / W' (eqs. 4, 8, 10; P0 is linear, so
   the shift is taken in 2D), with Aqq^-1 from q'. */
enum { PBD_SM__BLOCK = 64 };
/* sqrtf may set errno, which keeps compilers from vectorising a loop that
   calls it: build with -fno-math-errno (it changes no result). */

/* The triangle kernel's block in SoA form: corners, weights, rest corners
   and last projections in; 9 corrections and the 6 floats of the new
   projection out. */
typedef struct pbd_sm__tri_soa {
    float px[3][PBD_SM__BLOCK], py[3][PBD_SM__BLOCK], pz[3][PBD_SM__BLOCK];
    float w[3][PBD_SM__BLOCK], s[3][PBD_SM__BLOCK], q[6][PBD_SM__BLOCK], P[6][PBD_SM__BLOCK];
    float o[15][PBD_SM__BLOCK];
} pbd_sm__tri_soa;

/* The scalar reference, one triangle: its inputs packed as corner j's
   px py pz w s at in[5j ..], the rest corners q at in[15 ..] and the last
   valid projection P at in[21 ..] (pbd_sm__tri_load); 15 outputs (9
   corrections, then the projection to keep). Every value is computed,
   then selected (no branch), and the SIMD twin below does the same
   operations in the same order, so the two agree bit for bit. */
enum { PBD_SM__TRI_IN = 27, PBD_SM__TRI_OUT = 15 };
static PBD_HD void pbd_sm__tri_lane(const float *in, int conserve, float *o) {
    float w0 = in[3], w1 = in[8], w2 = in[13], W = w0 + w1 + w2;
    float cx = (w0 * in[0] + w1 * in[5] + w2 * in[10]) / W; /* t, eq. 4 */
    float cy = (w0 * in[1] + w1 * in[6] + w2 * in[11]) / W;
    float cz = (w0 * in[2] + w1 * in[7] + w2 * in[12]) / W;
    /* the projection P (eqs. 6-7); the last valid one when degenerate */
    float e1x = in[5] - in[0], e1y = in[6] - in[1], e1z = in[7] - in[2];
    float e2x = in[10] - in[0], e2y = in[11] - in[1], e2z = in[12] - in[2];
    float nx = e1y * e2z - e1z * e2y, ny = e1z * e2x - e1x * e2z, nz = e1x * e2y - e1y * e2x;
    float yx = ny * e1z - nz * e1y, yy = nz * e1x - nx * e1z, yz = nx * e1y - ny * e1x;
    float le = sqrtf(e1x * e1x + e1y * e1y + e1z * e1z), ly = sqrtf(yx * yx + yy * yy + yz * yz);
    int ok = le > PBD_SM__DIR_LEN_MIN_F && ly > PBD_SM__CROSS_LEN_MIN_F && ly > PBD_SM__FLAT_REL_F * le * le * le;
    float ile = 1.0f / (ok ? le : 1.0f), ily = 1.0f / (ok ? ly : 1.0f);
    /* every value is computed, then selected: no branch */
    float nx0 = e1x * ile, nx1 = e1y * ile, nx2 = e1z * ile, ny0 = yx * ily, ny1 = yy * ily, ny2 = yz * ily;
    float ax0 = ok ? nx0 : in[21], ax1 = ok ? nx1 : in[22], ax2 = ok ? nx2 : in[23];
    float ay0 = ok ? ny0 : in[24], ay1 = ok ? ny1 : in[25], ay2 = ok ? ny2 : in[26];
    o[9] = ax0;
    o[10] = ax1;
    o[11] = ax2;
    o[12] = ay0;
    o[13] = ay1;
    o[14] = ay2;
    /* the rest corners around the weighted centre, and Aqq^-1 (eq. 10) */
    float qcx = (w0 * in[15] + w1 * in[17] + w2 * in[19]) / W;
    float qcy = (w0 * in[16] + w1 * in[18] + w2 * in[20]) / W;
    float q0x = in[15] - qcx, q0y = in[16] - qcy, q1x = in[17] - qcx, q1y = in[18] - qcy;
    float q2x = in[19] - qcx, q2y = in[20] - qcy;
    float qa = w0 * q0x * q0x + w1 * q1x * q1x + w2 * q2x * q2x;
    float qb = w0 * q0x * q0y + w1 * q1x * q1y + w2 * q2x * q2y;
    float qd = w0 * q0y * q0y + w1 * q1y * q1y + w2 * q2y * q2y;
    float idet = 1.0f / (qa * qd - qb * qb);
    float i0 = qd * idet, i1 = -qb * idet, i2 = qa * idet;
    /* pbar (eq. 8) and Apq */
    float rx0 = in[0] - cx, ry0 = in[1] - cy, rz0 = in[2] - cz;
    float rx1 = in[5] - cx, ry1 = in[6] - cy, rz1 = in[7] - cz;
    float rx2 = in[10] - cx, ry2 = in[11] - cy, rz2 = in[12] - cz;
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
    int rot_ok = lu > PBD_SM__POLAR_LEN_MIN_F;
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
    int both = l1 <= 1, one = l2 < 1; /* compressed both ways; only l1 stretched */
    float c00 = both ? A00 : (one ? h00 : cs), c01 = both ? A01 : (one ? h01 : -sn);
    float c10 = both ? A10 : (one ? h10 : sn), c11 = both ? A11 : (one ? h11 : cs);
    float G00 = conserve ? c00 : cs, G01 = conserve ? c01 : -sn, G10 = conserve ? c10 : sn, G11 = conserve ? c11 : cs;
    /* goals g = G q' (eq. 12), dxbar = s (g - pbar), dx = P^T dxbar */
    float g0x = G00 * q0x + G01 * q0y - p0x, g0y = G10 * q0x + G11 * q0y - p0y;
    float g1x = G00 * q1x + G01 * q1y - p1x, g1y = G10 * q1x + G11 * q1y - p1y;
    float g2x = G00 * q2x + G01 * q2y - p2x, g2y = G10 * q2x + G11 * q2y - p2y;
    /* sum_j w_j (g_j - pbar_j) = 0 (eq. 4: the goals keep the centre of
       mass, so the corrections the momentum); in floats it is the rounding
       of q' and pbar, of the size of the positions, which a cloth at rest
       makes the same every step: taken back, only the corrections' own
       rounding is left */
    float mgx = (w0 * g0x + w1 * g1x + w2 * g2x) / W, mgy = (w0 * g0y + w1 * g1y + w2 * g2y) / W;
    g0x -= mgx;
    g0y -= mgy;
    g1x -= mgx;
    g1y -= mgy;
    g2x -= mgx;
    g2y -= mgy;
    float s0 = in[4], s1 = in[9], s2 = in[14];
    o[0] = s0 * (ax0 * g0x + ay0 * g0y);
    o[1] = s0 * (ax1 * g0x + ay1 * g0y);
    o[2] = s0 * (ax2 * g0x + ay2 * g0y);
    o[3] = s1 * (ax0 * g1x + ay0 * g1y);
    o[4] = s1 * (ax1 * g1x + ay1 * g1y);
    o[5] = s1 * (ax2 * g1x + ay2 * g1y);
    o[6] = s2 * (ax0 * g2x + ay0 * g2y);
    o[7] = s2 * (ax1 * g2x + ay1 * g2y);
    o[8] = s2 * (ax2 * g2x + ay2 * g2y);
}
/* Lanes first .. n-1 of S, one after the other. */
static void pbd_sm__tri_lanes(pbd_sm__tri_soa *S, int first, int n, int conserve) {
    for (int i = first; i < n; ++i) {
        float in[PBD_SM__TRI_IN], o[PBD_SM__TRI_OUT];
        for (int j = 0; j < 3; ++j) {
            in[5 * j] = S->px[j][i];
            in[5 * j + 1] = S->py[j][i];
            in[5 * j + 2] = S->pz[j][i];
            in[5 * j + 3] = S->w[j][i];
            in[5 * j + 4] = S->s[j][i];
        }
        for (int k = 0; k < 6; ++k) {
            in[15 + k] = S->q[k][i];
            in[21 + k] = S->P[k][i];
        }
        pbd_sm__tri_lane(in, conserve, o);
        for (int k = 0; k < PBD_SM__TRI_OUT; ++k) S->o[k][i] = o[k];
    }
}

/* --- SIMD twin of the triangle kernel ------------------------------------------
   gcc does not vectorise the triangle maths (its many selects), so it has
   an explicit SIMDe version: PBD_SM__CW = PBD_SIMD_LANES lanes (pbd.h's
   choice: 16 with AVX-512, 8 with AVX2, 4 with SSE2 or NEON), the
   scalar's operations in the scalar's order (no FMA: -ffp-contract=off,
   no approximate reciprocal or square root), every ?: a mask select. So it
   is bit-identical to pbd_sm__tri_lanes, which stays the reference
   (PBD_NO_SIMD, no SIMDe, or pbd_sm_cloth_set_simd(c, 0)). */
#define PBD_SM__CW PBD_SIMD_LANES
#if PBD_SM__CW > 1
#include PBD_SIMD_SIMDE_H /* AVX-512's (with <complex.h>) was included above, I and complex taken back */
#endif
#if PBD_SIMD_AVX512 && defined(__GNUC__) && !defined(__clang__) && defined(__cplusplus)
/* g++ 12 reports its own _mm512_undefined_ps() as "used uninitialized"
   where AVX-512 intrinsics are inlined (as pbd.h notes): a false positive
   in the compiler's header, silenced to the end of this implementation. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define PBD_SM__POP_DIAGNOSTICS 1
#endif

#if PBD_SM__CW == 16
typedef simde__m512 pbd_sm__vf;
typedef simde__mmask16 pbd_sm__vm;
static inline pbd_sm__vf pbd_sm__vld(const float *p) { return simde_mm512_loadu_ps(p); }
static inline void pbd_sm__vst(float *p, pbd_sm__vf a) { simde_mm512_storeu_ps(p, a); }
static inline pbd_sm__vf pbd_sm__vset(float a) { return simde_mm512_set1_ps(a); }
static inline pbd_sm__vf pbd_sm__vadd(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm512_add_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsub(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm512_sub_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vmul(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm512_mul_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vdiv(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm512_div_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsqrt(pbd_sm__vf a) { return simde_mm512_sqrt_ps(a); }
static inline pbd_sm__vm pbd_sm__vgt(pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm512_cmp_ps_mask(a, b, SIMDE_CMP_GT_OQ);
}
static inline pbd_sm__vm pbd_sm__vge(pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm512_cmp_ps_mask(a, b, SIMDE_CMP_GE_OQ);
}
static inline pbd_sm__vm pbd_sm__vlt(pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm512_cmp_ps_mask(a, b, SIMDE_CMP_LT_OQ);
}
static inline pbd_sm__vm pbd_sm__vle(pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm512_cmp_ps_mask(a, b, SIMDE_CMP_LE_OQ);
}
static inline pbd_sm__vm pbd_sm__vand(pbd_sm__vm a, pbd_sm__vm b) { return (pbd_sm__vm)(a & b); }
/* m ? a : b per lane */
static inline pbd_sm__vf pbd_sm__vsel(pbd_sm__vm m, pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm512_mask_blend_ps(m, b, a);
}
#elif PBD_SM__CW == 8
typedef simde__m256 pbd_sm__vf;
typedef simde__m256 pbd_sm__vm;
static inline pbd_sm__vf pbd_sm__vld(const float *p) { return simde_mm256_loadu_ps(p); }
static inline void pbd_sm__vst(float *p, pbd_sm__vf a) { simde_mm256_storeu_ps(p, a); }
static inline pbd_sm__vf pbd_sm__vset(float a) { return simde_mm256_set1_ps(a); }
static inline pbd_sm__vf pbd_sm__vadd(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_add_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsub(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_sub_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vmul(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_mul_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vdiv(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_div_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsqrt(pbd_sm__vf a) { return simde_mm256_sqrt_ps(a); }
static inline pbd_sm__vm pbd_sm__vgt(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_cmp_ps(a, b, SIMDE_CMP_GT_OQ); }
static inline pbd_sm__vm pbd_sm__vge(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_cmp_ps(a, b, SIMDE_CMP_GE_OQ); }
static inline pbd_sm__vm pbd_sm__vlt(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_cmp_ps(a, b, SIMDE_CMP_LT_OQ); }
static inline pbd_sm__vm pbd_sm__vle(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm256_cmp_ps(a, b, SIMDE_CMP_LE_OQ); }
static inline pbd_sm__vm pbd_sm__vand(pbd_sm__vm a, pbd_sm__vm b) { return simde_mm256_and_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsel(pbd_sm__vm m, pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm256_blendv_ps(b, a, m);
}
#elif PBD_SM__CW == 4
typedef simde__m128 pbd_sm__vf;
typedef simde__m128 pbd_sm__vm;
static inline pbd_sm__vf pbd_sm__vld(const float *p) { return simde_mm_loadu_ps(p); }
static inline void pbd_sm__vst(float *p, pbd_sm__vf a) { simde_mm_storeu_ps(p, a); }
static inline pbd_sm__vf pbd_sm__vset(float a) { return simde_mm_set1_ps(a); }
static inline pbd_sm__vf pbd_sm__vadd(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_add_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsub(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_sub_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vmul(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_mul_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vdiv(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_div_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsqrt(pbd_sm__vf a) { return simde_mm_sqrt_ps(a); }
/* SSE2's compares are false for NaN, as the scalar's */
static inline pbd_sm__vm pbd_sm__vgt(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_cmpgt_ps(a, b); }
static inline pbd_sm__vm pbd_sm__vge(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_cmpge_ps(a, b); }
static inline pbd_sm__vm pbd_sm__vlt(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_cmplt_ps(a, b); }
static inline pbd_sm__vm pbd_sm__vle(pbd_sm__vf a, pbd_sm__vf b) { return simde_mm_cmple_ps(a, b); }
static inline pbd_sm__vm pbd_sm__vand(pbd_sm__vm a, pbd_sm__vm b) { return simde_mm_and_ps(a, b); }
static inline pbd_sm__vf pbd_sm__vsel(pbd_sm__vm m, pbd_sm__vf a, pbd_sm__vf b) {
    return simde_mm_or_ps(simde_mm_and_ps(m, a), simde_mm_andnot_ps(m, b));
}
#endif

#if PBD_SM__CW > 1
/* a*b + c*d + e*f, left to right as the scalar writes it */
static inline pbd_sm__vf pbd_sm__vdot3(pbd_sm__vf a, pbd_sm__vf b, pbd_sm__vf c, pbd_sm__vf d, pbd_sm__vf e,
                                       pbd_sm__vf f) {
    return pbd_sm__vadd(pbd_sm__vadd(pbd_sm__vmul(a, b), pbd_sm__vmul(c, d)), pbd_sm__vmul(e, f));
}
/* w0*a*b + w1*c*d + w2*e*f, each product left to right */
static inline pbd_sm__vf pbd_sm__vwdot3(pbd_sm__vf w0, pbd_sm__vf w1, pbd_sm__vf w2, pbd_sm__vf a, pbd_sm__vf b,
                                        pbd_sm__vf c, pbd_sm__vf d, pbd_sm__vf e, pbd_sm__vf f) {
    return pbd_sm__vadd(pbd_sm__vadd(pbd_sm__vmul(pbd_sm__vmul(w0, a), b), pbd_sm__vmul(pbd_sm__vmul(w1, c), d)),
                        pbd_sm__vmul(pbd_sm__vmul(w2, e), f));
}
/* a*b - c*d */
static inline pbd_sm__vf pbd_sm__vdiff2(pbd_sm__vf a, pbd_sm__vf b, pbd_sm__vf c, pbd_sm__vf d) {
    return pbd_sm__vsub(pbd_sm__vmul(a, b), pbd_sm__vmul(c, d));
}
/* a*b + c*d */
static inline pbd_sm__vf pbd_sm__vsum2(pbd_sm__vf a, pbd_sm__vf b, pbd_sm__vf c, pbd_sm__vf d) {
    return pbd_sm__vadd(pbd_sm__vmul(a, b), pbd_sm__vmul(c, d));
}

/* Lanes i .. i + PBD_SM__CW - 1 of pbd_sm__tri_lanes, line by line. */
static void pbd_sm__tri_lanes_simd(pbd_sm__tri_soa *S, int i, int conserve) {
    typedef pbd_sm__vf V;
    const V zero = pbd_sm__vset(0.0f), one_ = pbd_sm__vset(1.0f), minus1 = pbd_sm__vset(-1.0f),
            half_ = pbd_sm__vset(0.5f);
    V w0 = pbd_sm__vld(S->w[0] + i), w1 = pbd_sm__vld(S->w[1] + i), w2 = pbd_sm__vld(S->w[2] + i);
    V W = pbd_sm__vadd(pbd_sm__vadd(w0, w1), w2);
    V px0 = pbd_sm__vld(S->px[0] + i), px1 = pbd_sm__vld(S->px[1] + i), px2 = pbd_sm__vld(S->px[2] + i);
    V py0 = pbd_sm__vld(S->py[0] + i), py1 = pbd_sm__vld(S->py[1] + i), py2 = pbd_sm__vld(S->py[2] + i);
    V pz0 = pbd_sm__vld(S->pz[0] + i), pz1 = pbd_sm__vld(S->pz[1] + i), pz2 = pbd_sm__vld(S->pz[2] + i);
    V cx = pbd_sm__vdiv(pbd_sm__vdot3(w0, px0, w1, px1, w2, px2), W); /* t, eq. 4 */
    V cy = pbd_sm__vdiv(pbd_sm__vdot3(w0, py0, w1, py1, w2, py2), W);
    V cz = pbd_sm__vdiv(pbd_sm__vdot3(w0, pz0, w1, pz1, w2, pz2), W);
    /* the projection P (eqs. 6-7); the last valid one when degenerate */
    V e1x = pbd_sm__vsub(px1, px0), e1y = pbd_sm__vsub(py1, py0), e1z = pbd_sm__vsub(pz1, pz0);
    V e2x = pbd_sm__vsub(px2, px0), e2y = pbd_sm__vsub(py2, py0), e2z = pbd_sm__vsub(pz2, pz0);
    V nx = pbd_sm__vdiff2(e1y, e2z, e1z, e2y), ny = pbd_sm__vdiff2(e1z, e2x, e1x, e2z),
      nz = pbd_sm__vdiff2(e1x, e2y, e1y, e2x);
    V yx = pbd_sm__vdiff2(ny, e1z, nz, e1y), yy = pbd_sm__vdiff2(nz, e1x, nx, e1z),
      yz = pbd_sm__vdiff2(nx, e1y, ny, e1x);
    V le = pbd_sm__vsqrt(pbd_sm__vdot3(e1x, e1x, e1y, e1y, e1z, e1z));
    V ly = pbd_sm__vsqrt(pbd_sm__vdot3(yx, yx, yy, yy, yz, yz));
    pbd_sm__vm ok = pbd_sm__vand(
        pbd_sm__vand(pbd_sm__vgt(le, pbd_sm__vset(PBD_SM__DIR_LEN_MIN_F)),
                     pbd_sm__vgt(ly, pbd_sm__vset(PBD_SM__CROSS_LEN_MIN_F))),
        pbd_sm__vgt(ly, pbd_sm__vmul(pbd_sm__vmul(pbd_sm__vmul(pbd_sm__vset(PBD_SM__FLAT_REL_F), le), le), le)));
    V ile = pbd_sm__vdiv(one_, pbd_sm__vsel(ok, le, one_)), ily = pbd_sm__vdiv(one_, pbd_sm__vsel(ok, ly, one_));
    V ax0 = pbd_sm__vsel(ok, pbd_sm__vmul(e1x, ile), pbd_sm__vld(S->P[0] + i));
    V ax1 = pbd_sm__vsel(ok, pbd_sm__vmul(e1y, ile), pbd_sm__vld(S->P[1] + i));
    V ax2 = pbd_sm__vsel(ok, pbd_sm__vmul(e1z, ile), pbd_sm__vld(S->P[2] + i));
    V ay0 = pbd_sm__vsel(ok, pbd_sm__vmul(yx, ily), pbd_sm__vld(S->P[3] + i));
    V ay1 = pbd_sm__vsel(ok, pbd_sm__vmul(yy, ily), pbd_sm__vld(S->P[4] + i));
    V ay2 = pbd_sm__vsel(ok, pbd_sm__vmul(yz, ily), pbd_sm__vld(S->P[5] + i));
    pbd_sm__vst(S->o[9] + i, ax0);
    pbd_sm__vst(S->o[10] + i, ax1);
    pbd_sm__vst(S->o[11] + i, ax2);
    pbd_sm__vst(S->o[12] + i, ay0);
    pbd_sm__vst(S->o[13] + i, ay1);
    pbd_sm__vst(S->o[14] + i, ay2);
    /* the rest corners around the weighted centre, and Aqq^-1 (eq. 10) */
    V qr0 = pbd_sm__vld(S->q[0] + i), qr1 = pbd_sm__vld(S->q[1] + i), qr2 = pbd_sm__vld(S->q[2] + i);
    V qr3 = pbd_sm__vld(S->q[3] + i), qr4 = pbd_sm__vld(S->q[4] + i), qr5 = pbd_sm__vld(S->q[5] + i);
    V qcx = pbd_sm__vdiv(pbd_sm__vdot3(w0, qr0, w1, qr2, w2, qr4), W);
    V qcy = pbd_sm__vdiv(pbd_sm__vdot3(w0, qr1, w1, qr3, w2, qr5), W);
    V q0x = pbd_sm__vsub(qr0, qcx), q0y = pbd_sm__vsub(qr1, qcy), q1x = pbd_sm__vsub(qr2, qcx),
      q1y = pbd_sm__vsub(qr3, qcy);
    V q2x = pbd_sm__vsub(qr4, qcx), q2y = pbd_sm__vsub(qr5, qcy);
    V qa = pbd_sm__vwdot3(w0, w1, w2, q0x, q0x, q1x, q1x, q2x, q2x);
    V qb = pbd_sm__vwdot3(w0, w1, w2, q0x, q0y, q1x, q1y, q2x, q2y);
    V qd = pbd_sm__vwdot3(w0, w1, w2, q0y, q0y, q1y, q1y, q2y, q2y);
    V idet = pbd_sm__vdiv(one_, pbd_sm__vdiff2(qa, qd, qb, qb));
    V i0 = pbd_sm__vmul(qd, idet), i1 = pbd_sm__vmul(pbd_sm__vmul(minus1, qb), idet), i2 = pbd_sm__vmul(qa, idet);
    /* pbar (eq. 8) and Apq */
    V rx0 = pbd_sm__vsub(px0, cx), ry0 = pbd_sm__vsub(py0, cy), rz0 = pbd_sm__vsub(pz0, cz);
    V rx1 = pbd_sm__vsub(px1, cx), ry1 = pbd_sm__vsub(py1, cy), rz1 = pbd_sm__vsub(pz1, cz);
    V rx2 = pbd_sm__vsub(px2, cx), ry2 = pbd_sm__vsub(py2, cy), rz2 = pbd_sm__vsub(pz2, cz);
    V p0x = pbd_sm__vdot3(ax0, rx0, ax1, ry0, ax2, rz0), p0y = pbd_sm__vdot3(ay0, rx0, ay1, ry0, ay2, rz0);
    V p1x = pbd_sm__vdot3(ax0, rx1, ax1, ry1, ax2, rz1), p1y = pbd_sm__vdot3(ay0, rx1, ay1, ry1, ay2, rz1);
    V p2x = pbd_sm__vdot3(ax0, rx2, ax1, ry2, ax2, rz2), p2y = pbd_sm__vdot3(ay0, rx2, ay1, ry2, ay2, rz2);
    V a = pbd_sm__vwdot3(w0, w1, w2, p0x, q0x, p1x, q1x, p2x, q2x);
    V b = pbd_sm__vwdot3(w0, w1, w2, p0x, q0y, p1x, q1y, p2x, q2y);
    V c = pbd_sm__vwdot3(w0, w1, w2, p0y, q0x, p1y, q1x, p2y, q2x);
    V d = pbd_sm__vwdot3(w0, w1, w2, p0y, q0y, p1y, q1y, p2y, q2y);
    V A00 = pbd_sm__vsum2(a, i0, b, i1), A01 = pbd_sm__vsum2(a, i1, b, i2);
    V A10 = pbd_sm__vsum2(c, i0, d, i1), A11 = pbd_sm__vsum2(c, i1, d, i2);
    /* closed-form 2D polar decomposition (eq. 11, Shoemake and Duff) */
    V det = pbd_sm__vdiff2(A00, A11, A01, A10);
    V sg = pbd_sm__vsel(pbd_sm__vlt(det, zero), minus1, one_);
    V u0 = pbd_sm__vadd(A00, pbd_sm__vmul(sg, A11)), u1 = pbd_sm__vsub(A10, pbd_sm__vmul(sg, A01));
    V lu = pbd_sm__vsqrt(pbd_sm__vsum2(u0, u0, u1, u1));
    pbd_sm__vm rot_ok = pbd_sm__vgt(lu, pbd_sm__vset(PBD_SM__POLAR_LEN_MIN_F));
    V ilu = pbd_sm__vdiv(one_, pbd_sm__vsel(rot_ok, lu, one_));
    V cs = pbd_sm__vsel(rot_ok, pbd_sm__vmul(u0, ilu), one_), sn = pbd_sm__vsel(rot_ok, pbd_sm__vmul(u1, ilu), zero);
    V nsn = pbd_sm__vmul(minus1, sn);
    V G00 = cs, G01 = nsn, G10 = sn, G11 = cs;
    if (conserve) { /* uniform over the lanes: skipping the unselected maths changes no bit */
        /* wrinkles (eqs. 16-18): V = R^T A; keep compression, clamp stretch to 1 */
        V v00 = pbd_sm__vsum2(cs, A00, sn, A10), v01 = pbd_sm__vsum2(cs, A01, sn, A11);
        V v10 = pbd_sm__vsum2(nsn, A00, cs, A10), v11 = pbd_sm__vsum2(nsn, A01, cs, A11);
        V off = pbd_sm__vmul(half_, pbd_sm__vadd(v01, v10)), mean = pbd_sm__vmul(half_, pbd_sm__vadd(v00, v11));
        V hlf = pbd_sm__vmul(half_, pbd_sm__vsub(v00, v11));
        V rad = pbd_sm__vsqrt(pbd_sm__vsum2(hlf, hlf, off, off));
        V l1 = pbd_sm__vadd(mean, rad), l2 = pbd_sm__vsub(mean, rad);
        V eax = off, eay = pbd_sm__vsub(l1, v00), ebx = pbd_sm__vsub(l1, v11), eby = off;
        pbd_sm__vm use_a = pbd_sm__vge(pbd_sm__vsum2(eax, eax, eay, eay), pbd_sm__vsum2(ebx, ebx, eby, eby));
        V ex = pbd_sm__vsel(use_a, eax, ebx), ey = pbd_sm__vsel(use_a, eay, eby);
        V lenE = pbd_sm__vsqrt(pbd_sm__vsum2(ex, ex, ey, ey));
        pbd_sm__vm pos = pbd_sm__vgt(lenE, zero);
        V ilenE = pbd_sm__vdiv(one_, pbd_sm__vsel(pos, lenE, one_));
        V nex = pbd_sm__vmul(ex, ilenE), ney = pbd_sm__vmul(ey, ilenE);
        ex = pbd_sm__vsel(pos, nex, one_);
        ey = pbd_sm__vsel(pos, ney, zero);
        V sc = pbd_sm__vsub(l1, one_);
        V m00 = pbd_sm__vsub(v00, pbd_sm__vmul(pbd_sm__vmul(sc, ex), ex));
        V m01 = pbd_sm__vsub(off, pbd_sm__vmul(pbd_sm__vmul(sc, ex), ey));
        V m11 = pbd_sm__vsub(v11, pbd_sm__vmul(pbd_sm__vmul(sc, ey), ey));
        V h00 = pbd_sm__vdiff2(cs, m00, sn, m01), h01 = pbd_sm__vdiff2(cs, m01, sn, m11);
        V h10 = pbd_sm__vsum2(sn, m00, cs, m01), h11 = pbd_sm__vsum2(sn, m01, cs, m11);
        pbd_sm__vm both = pbd_sm__vle(l1, one_),
                   one = pbd_sm__vlt(l2, one_); /* compressed both ways; only l1 stretched */
        G00 = pbd_sm__vsel(both, A00, pbd_sm__vsel(one, h00, cs));
        G01 = pbd_sm__vsel(both, A01, pbd_sm__vsel(one, h01, nsn));
        G10 = pbd_sm__vsel(both, A10, pbd_sm__vsel(one, h10, sn));
        G11 = pbd_sm__vsel(both, A11, pbd_sm__vsel(one, h11, cs));
    }
    /* goals g = G q' (eq. 12), dxbar = s (g - pbar), dx = P^T dxbar */
    V g0x = pbd_sm__vsub(pbd_sm__vsum2(G00, q0x, G01, q0y), p0x),
      g0y = pbd_sm__vsub(pbd_sm__vsum2(G10, q0x, G11, q0y), p0y);
    V g1x = pbd_sm__vsub(pbd_sm__vsum2(G00, q1x, G01, q1y), p1x),
      g1y = pbd_sm__vsub(pbd_sm__vsum2(G10, q1x, G11, q1y), p1y);
    V g2x = pbd_sm__vsub(pbd_sm__vsum2(G00, q2x, G01, q2y), p2x),
      g2y = pbd_sm__vsub(pbd_sm__vsum2(G10, q2x, G11, q2y), p2y);
    V mgx = pbd_sm__vdiv(pbd_sm__vdot3(w0, g0x, w1, g1x, w2, g2x), W),
      mgy = pbd_sm__vdiv(pbd_sm__vdot3(w0, g0y, w1, g1y, w2, g2y), W);
    g0x = pbd_sm__vsub(g0x, mgx);
    g0y = pbd_sm__vsub(g0y, mgy);
    g1x = pbd_sm__vsub(g1x, mgx);
    g1y = pbd_sm__vsub(g1y, mgy);
    g2x = pbd_sm__vsub(g2x, mgx);
    g2y = pbd_sm__vsub(g2y, mgy);
    V s0 = pbd_sm__vld(S->s[0] + i), s1 = pbd_sm__vld(S->s[1] + i), s2 = pbd_sm__vld(S->s[2] + i);
    pbd_sm__vst(S->o[0] + i, pbd_sm__vmul(s0, pbd_sm__vsum2(ax0, g0x, ay0, g0y)));
    pbd_sm__vst(S->o[1] + i, pbd_sm__vmul(s0, pbd_sm__vsum2(ax1, g0x, ay1, g0y)));
    pbd_sm__vst(S->o[2] + i, pbd_sm__vmul(s0, pbd_sm__vsum2(ax2, g0x, ay2, g0y)));
    pbd_sm__vst(S->o[3] + i, pbd_sm__vmul(s1, pbd_sm__vsum2(ax0, g1x, ay0, g1y)));
    pbd_sm__vst(S->o[4] + i, pbd_sm__vmul(s1, pbd_sm__vsum2(ax1, g1x, ay1, g1y)));
    pbd_sm__vst(S->o[5] + i, pbd_sm__vmul(s1, pbd_sm__vsum2(ax2, g1x, ay2, g1y)));
    pbd_sm__vst(S->o[6] + i, pbd_sm__vmul(s2, pbd_sm__vsum2(ax0, g2x, ay0, g2y)));
    pbd_sm__vst(S->o[7] + i, pbd_sm__vmul(s2, pbd_sm__vsum2(ax1, g2x, ay1, g2y)));
    pbd_sm__vst(S->o[8] + i, pbd_sm__vmul(s2, pbd_sm__vsum2(ax2, g2x, ay2, g2y)));
}
#endif

/* 2D shape matching of triangles t0 .. t0+n-1 (section 4.1, eqs. 4-13) on
   positions x (4 floats per vertex): 9 floats of corner corrections per
   triangle into out. conserve: the wrinkle-conserving transformation of
   eqs. 16-18. The last valid projection P is kept for degenerate ones. */
/* Triangle t's inputs (pbd_sm__tri_lane's packing): a pinned corner
   weighs 1000 times its mass and takes no correction. */
static PBD_HD void pbd_sm__tri_load(const pbd_sm__level *L, int t, const float *x, float alpha, float *in) {
    const int *T = L->tri + 3 * t;
    for (int j = 0; j < 3; ++j) {
        const float *p = x + 4 * T[j];
        int pinned = !(p[3] > 0);
        in[5 * j] = p[0];
        in[5 * j + 1] = p[1];
        in[5 * j + 2] = p[2];
        in[5 * j + 3] = pinned ? 1000.0f * L->mt[T[j]] : L->mt[T[j]];
        in[5 * j + 4] = pinned ? 0.0f : alpha * L->inv_rt[T[j]];
    }
    for (int k = 0; k < 6; ++k) {
        in[15 + k] = L->tq[6 * t + k];
        in[21 + k] = L->tP[6 * t + k];
    }
}
/* One triangle alone (a GPU thread's): its 9 corrections into out, its
   projection kept. */
static inline PBD_HD void pbd_sm__tri_one(pbd_sm__level *L, int t, const float *x, int conserve, float alpha,
                                          float *out) {
    float in[PBD_SM__TRI_IN], o[PBD_SM__TRI_OUT];
    pbd_sm__tri_load(L, t, x, alpha, in);
    pbd_sm__tri_lane(in, conserve, o);
    for (int k = 0; k < 9; ++k) out[k] = o[k];
    for (int k = 0; k < 6; ++k) L->tP[6 * t + k] = o[9 + k];
}

static void pbd_sm__tri_block(const pbd_sm__level *L, int t0, int n, const float *x, int conserve, float alpha,
                              int simd, float *out) {
    /* inputs and outputs in local SoA arrays: the maths touches no memory
       the compiler could think aliased */
    pbd_sm__tri_soa S;
    for (int i = 0; i < n; ++i) {
        float in[PBD_SM__TRI_IN];
        pbd_sm__tri_load(L, t0 + i, x, alpha, in);
        for (int j = 0; j < 3; ++j) {
            S.px[j][i] = in[5 * j];
            S.py[j][i] = in[5 * j + 1];
            S.pz[j][i] = in[5 * j + 2];
            S.w[j][i] = in[5 * j + 3];
            S.s[j][i] = in[5 * j + 4];
        }
        for (int k = 0; k < 6; ++k) {
            S.q[k][i] = in[15 + k];
            S.P[k][i] = in[21 + k];
        }
    }
    int i = 0;
#if PBD_SM__CW > 1
    if (simd)
        for (; i + PBD_SM__CW <= n; i += PBD_SM__CW) pbd_sm__tri_lanes_simd(&S, i, conserve);
#else
    (void)simd;
#endif
    pbd_sm__tri_lanes(&S, i, n, conserve); /* the lanes left over */
    for (i = 0; i < n; ++i) {
        for (int k = 0; k < 9; ++k) out[9 * i + k] = S.o[k][i];
        for (int k = 0; k < 6; ++k) L->tP[6 * (t0 + i) + k] = S.o[9 + k][i];
    }
}

/* 1D shape matching of edge e (section 4.2, eqs. 14-15): 6 floats into
   out. On coarse levels (conserve) a compressed edge
   is skipped, keeping the fine wrinkle. */
static PBD_HD void pbd_sm__edge_one(const pbd_sm__level *L, int e, const float *x, int conserve, float beta,
                                    float *out) {
    int ia = L->edge[2 * e], ib = L->edge[2 * e + 1];
    const float *pa = x + 4 * ia, *pb = x + 4 * ib;
    int fa = !(pa[3] > 0), fb = !(pb[3] > 0);
    float ax = pa[0], ay = pa[1], az = pa[2], bx = pb[0], by = pb[1], bz = pb[2];
    float wa = fa ? 1000.0f * L->me[ia] : L->me[ia], wb = fb ? 1000.0f * L->me[ib] : L->me[ib];
    float sa = fa ? 0.0f : beta * L->inv_re[ia], sb = fb ? 0.0f : beta * L->inv_re[ib];
    float l0 = L->eq[3 * e + 2];
    float dxx = bx - ax, dyy = by - ay, dzz = bz - az;
    float len = sqrtf(dxx * dxx + dyy * dyy + dzz * dzz);
    int active = len > PBD_SM__DIR_LEN_MIN_F && !(conserve && len < l0);
    float il = 1.0f / (active ? len : 1.0f);
    float ux = dxx * il, uy = dyy * il, uz = dzz * il;
    float W = wa + wb;
    float q1 = l0 * wb / W, q2 = l0 * wa / W; /* |x^0 - t^0| for these weights */
    float tx = (wa * ax + wb * bx) / W, ty = (wa * ay + wb * by) / W, tz = (wa * az + wb * bz) / W;
    float ka = active ? sa : 0.0f, kb = active ? sb : 0.0f;
    /* (not re-centred as the triangle kernel is: its rounding is what
       lets a cloth collapsed to a point leave it out of the plane with
       the independent sets, figure 8 of the paper; re-centred, that
       start stayed flat and 10% stretched after 2 s) */
    out[0] = ka * (tx - q1 * ux - ax);
    out[1] = ka * (ty - q1 * uy - ay);
    out[2] = ka * (tz - q1 * uz - az);
    out[3] = kb * (tx + q2 * ux - bx);
    out[4] = kb * (ty + q2 * uy - by);
    out[5] = kb * (tz + q2 * uz - bz);
}
static void pbd_sm__edge_block(const pbd_sm__level *L, int e0, int n, const float *x, int conserve, float beta,
                               float *out) {
    for (int i = 0; i < n; ++i) pbd_sm__edge_one(L, e0 + i, x, conserve, beta, out + 6 * i);
}

/* --- passes ------------------------------------------------------------------- */

static PBD_HD void pbd_sm__add3(float *x, const float *d) {
    x[0] += d[0];
    x[1] += d[1];
    x[2] += d[2];
}

/* Gathers the corrections of every element end of each vertex (in element
   order: deterministic for any thread count) and applies them. */
static PBD_HD void pbd_sm__gather_vertex(int v, float *x, const int *start, const int *list, const float *dx) {
    float s[3] = {0, 0, 0};
    for (int e = start[v]; e < start[v + 1]; ++e) pbd_sm__add3(s, dx + 3 * list[e]);
    pbd_sm__add3(x + 4 * v, s);
}
static void pbd_sm__gather(int nv, float *x, const int *start, const int *list, const float *dx) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int v = 0; v < nv; ++v) pbd_sm__gather_vertex(v, x, start, list, dx);
}

/* One element type of one level: two-pass (blocks of goals into the
   per-element scratch, then the per-vertex gather) or independent sets
   (per colour, blocks computed and applied at once; no two elements of a
   colour share a vertex, the overflow colour excepted, the last when
   L->overflow says so, which is walked in order). arity 3: triangles, 2: edges. */
static void pbd_sm__match(const pbd_sm__cloth *c, pbd_sm__level *L, float *x, int conserve, int arity) {
    int n = arity == 3 ? L->nt : L->ne, ncol = arity == 3 ? L->ntc : L->nec;
    const int *col = arity == 3 ? L->tc : L->ec, *el = arity == 3 ? L->tri : L->edge;
    float *scratch = arity == 3 ? L->tdx : L->edx;
    int stride = 3 * arity;
    if (c->scheme == PBD_SM_CLOTH_TWO_PASS) {
        int nb = (n + PBD_SM__BLOCK - 1) / PBD_SM__BLOCK;
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int b = 0; b < nb; ++b) {
            int e0 = b * PBD_SM__BLOCK, m = n - e0 < PBD_SM__BLOCK ? n - e0 : PBD_SM__BLOCK;
            if (arity == 3) pbd_sm__tri_block(L, e0, m, x, conserve, c->alpha, c->simd, scratch + (size_t)stride * e0);
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
                if (arity == 3) pbd_sm__tri_block(L, e, 1, x, conserve, c->alpha, c->simd, d);
                else pbd_sm__edge_block(L, e, 1, x, conserve, c->beta, d);
                for (int j = 0; j < arity; ++j) pbd_sm__add3(x + 4 * el[arity * e + j], d + 3 * j);
            }
            continue;
        }
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int b = 0; b < nb; ++b) {
            float d[9 * PBD_SM__BLOCK];
            int e0 = lo + b * PBD_SM__BLOCK, m = hi - e0 < PBD_SM__BLOCK ? hi - e0 : PBD_SM__BLOCK;
            if (arity == 3) pbd_sm__tri_block(L, e0, m, x, conserve, c->alpha, c->simd, d);
            else pbd_sm__edge_block(L, e0, m, x, conserve, c->beta, d);
            for (int e = 0; e < m; ++e)
                for (int j = 0; j < arity; ++j) pbd_sm__add3(x + 4 * el[arity * (e0 + e) + j], d + stride * e + 3 * j);
        }
    }
}

static void pbd_sm__level_match(const pbd_sm__cloth *c, pbd_sm__level *L, float *x, int conserve) {
    if (c->beta > 0) pbd_sm__match(c, L, x, conserve, 2);
    if (c->alpha > 0) pbd_sm__match(c, L, x, conserve, 3);
}

static PBD_HD void pbd_sm__store_vertex(pbd_sm__level *L, const float *x, int v) {
    memcpy(L->xhat + 4 * v, x + 4 * v, 4 * sizeof(float));
}
static void pbd_sm__store(pbd_sm__level *L, const float *x) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int v = 0; v < L->nv; ++v) pbd_sm__store_vertex(L, x, v);
}

/* x_c += R (x_f - xhat_f): restriction of the position differences. */
static PBD_HD void pbd_sm__restrict_vertex(pbd_sm__level *C, const pbd_sm__level *F, const float *xf, int v) {
    if (!(C->x[4 * v + 3] > 0)) return;
    float s[3] = {0, 0, 0};
    for (int e = C->res_start[v]; e < C->res_start[v + 1]; ++e) {
        int f = C->res_idx[e];
        float wv = C->res_w[e];
        for (int k = 0; k < 3; ++k) s[k] += wv * (xf[4 * f + k] - F->xhat[4 * f + k]);
    }
    pbd_sm__add3(C->x + 4 * v, s);
}
static void pbd_sm__restrict(pbd_sm__level *C, const pbd_sm__level *F, const float *xf) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int v = 0; v < C->nv; ++v) pbd_sm__restrict_vertex(C, F, xf, v);
}

/* x_f += P (x_c - xhat_c): prolongation of the position differences. */
static PBD_HD void pbd_sm__prolong_vertex(const pbd_sm__level *C, float *xf, int f) {
    if (!(xf[4 * f + 3] > 0)) return;
    float s[3] = {0, 0, 0};
    for (int k = 0; k < 3; ++k) {
        int v = C->pro_idx[3 * f + k];
        float wv = C->pro_w[3 * f + k];
        for (int j = 0; j < 3; ++j) s[j] += wv * (C->x[4 * v + j] - C->xhat[4 * v + j]);
    }
    pbd_sm__add3(xf + 4 * f, s);
}
static void pbd_sm__prolong(const pbd_sm__level *C, const pbd_sm__level *F, float *xf) {
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int f = 0; f < F->nv; ++f) pbd_sm__prolong_vertex(C, xf, f);
}

/* Coarse positions from the finest at the start of a V-cycle (section 4.3):
   the restriction of the positions, x_C = R x_F (the paper's step for
   non-nested levels; nested ones share their vertices with the finer level
   in the paper, but copying them here while the corrections go back
   through P fed energy in, see pbd_sm__galerkin). A nested vertex whose
   finer vertex is pinned is pinned (so pins hold on every level). */
static PBD_HD void pbd_sm__sync_vertex(pbd_sm__level *C, const float *xf, int v) {
    float *xc = C->x + 4 * v;
    float s[3] = {0, 0, 0}, o[3] = {0, 0, 0};
    int lo = C->res_start[v], hi = C->res_start[v + 1];
    if (C->fine_of && hi > lo) /* nested: a sum of differences, rounded to the local size */
        for (int k = 0; k < 3; ++k) o[k] = xf[4 * C->res_idx[lo] + k];
    for (int e = lo; e < hi; ++e)
        for (int k = 0; k < 3; ++k) s[k] += C->res_w[e] * (xf[4 * C->res_idx[e] + k] - o[k]);
    xc[0] = o[0] + s[0];
    xc[1] = o[1] + s[1];
    xc[2] = o[2] + s[2];
    xc[3] = C->fine_of && !(xf[4 * C->fine_of[v] + 3] > 0) ? 0.0f : 1.0f / C->mass[v];
}
static void pbd_sm__sync_coarse(pbd_sm__cloth *c, float *xfine) {
    for (int l = c->nlevels - 1; l > 0; --l) {
        pbd_sm__level *F = &c->lv[l], *C = &c->lv[l - 1];
        const float *xf = l == c->nlevels - 1 ? xfine : F->x;
        PBD_SM__PRAGMA(omp for schedule(static))
        for (int v = 0; v < C->nv; ++v) pbd_sm__sync_vertex(C, xf, v);
    }
}

/* One V-cycle (section 4.3, Algorithm 2) on the finest positions x. Only
   position differences travel between levels. We store x^ of a level
   before it receives the difference of its neighbour level rather than
   after (Algorithm 2, lines 2 and 6), so that what a level passes on is its
   whole change: a coarse level's correction then reaches the finest level
   through every level in between, as it does through the shared particles
   of a nested model, instead of stopping at the next finer level. */
static void pbd_sm__vcycle(pbd_sm__cloth *c, float *x) {
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

/* Bending force f = -k Q x over the substep: v += h w' f and, the
   prediction being made already, p += h^2 w' f. Explicit (symplectic
   Euler, w' = w) as in the paper, it is stable only for
   h^2 k w lambda_max(Q) < 4, and Q grows as 1 / edge^2: for a 5 m cloth
   of 102 x 102 vertices and k = 1e-4 the limit is about 13 ms; beyond
   it the zig-zag mode grows without bound (with either parallel scheme;
   2D matching does not hold it back). So the force is scaled by
   1 / (1 + h^2 k g), g = max_i G_i / m_i (G_i = sum_j |Q_ij|, Gershgorin;
   q_row_w, from the masses of eq. 1; a vertex made lighter since takes
   its own w_i G_i where that is larger): then
   h^2 lambda_max(M^-1 k Q) / (1 + h^2 k g) <= h^2 k g / (1 + h^2 k g) < 1
   and the step is stable for any h, while modes that explicit Euler
   resolves (h^2 k g << 1) are left as they were. One factor for all: the
   forces of Q sum to zero, and so do their impulses only if every vertex
   takes its force with its own mass times one factor (a factor per
   vertex, 1 + h^2 k w_i G_i, made a free cloth drift: the boundary's
   factors differ from the interior's). And (Q x)_i is summed as
   sum_j Q_ij (x_j - x_i) (Q's rows sum to zero), which is exact for a
   translation whatever the position. */
/* Vertex i of the finest level (x, v, p: the cloth's particles). */
static PBD_HD void pbd_sm__bend_vertex(const pbd_sm__cloth *c, const float *x, float *v, float *p, float h, int i) {
    float k = c->bending, w0 = x[4 * i + 3];
    if (!(w0 > 0)) return;
    float g = w0 * c->q_row[i] > c->q_row_w ? w0 * c->q_row[i] : c->q_row_w;
    float wi = w0 / (1.0f + h * h * k * g);
    float f[3] = {0, 0, 0};
    for (int e = c->q_start[i]; e < c->q_start[i + 1]; ++e) { /* Q's rows sum to 0: (Q x)_i = sum_j Q_ij (x_j - x_i) */
        const float *xj = x + 4 * c->q_idx[e];
        float q = c->q_val[e];
        f[0] += q * (xj[0] - x[4 * i]);
        f[1] += q * (xj[1] - x[4 * i + 1]);
        f[2] += q * (xj[2] - x[4 * i + 2]);
    }
    for (int j = 0; j < 3; ++j) {
        float dv = -k * h * wi * f[j];
        v[4 * i + j] += dv;
        p[4 * i + j] += h * dv;
    }
}
static void pbd_sm__bend(pbd_sm__cloth *c, const pbd_solve_context *s) {
    const pbd_sm__level *L = &c->lv[c->nlevels - 1];
    const float *x = s->x + 4 * c->particles.first;
    float *v = s->v + 4 * c->particles.first, *p = s->p + 4 * c->particles.first;
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int i = 0; i < L->nv; ++i) pbd_sm__bend_vertex(c, x, v, p, s->h, i);
}

/* Per-triangle damping (eqs. 19-20) of the finest level's velocities. We
   use the unit r_i (k_d becomes a dimensionless fraction in [0, 1] of the
   radial relative velocity removed) and, as for the shape-matching
   corrections, average over the triangles of a vertex. Eq. 20 does not
   sum to zero momentum (sum_i m_i (r_i . v_i) r_i need not vanish), so
   the triangle's net impulse is taken back from its corners in
   proportion to m~ (a triangle with a pinned corner leaves it to the
   pin); a rigid motion is still not damped (r_i . (v_i - v_cm) = 0). */
/* Triangle t's corrections of its corners' velocities into L->tdx. */
static PBD_HD void pbd_sm__damp_triangle(pbd_sm__level *L, const float *x, const float *v, float kd, int t) {
    const int *T = L->tri + 3 * t;
    float m[3] = {L->mass[T[0]], L->mass[T[1]], L->mass[T[2]]}, M = m[0] + m[1] + m[2];
    float xc[3], vc[3];
    for (int k = 0; k < 3; ++k) {
        xc[k] = (m[0] * x[4 * T[0] + k] + m[1] * x[4 * T[1] + k] + m[2] * x[4 * T[2] + k]) / M;
        vc[k] = (m[0] * v[4 * T[0] + k] + m[1] * v[4 * T[1] + k] + m[2] * v[4 * T[2] + k]) / M;
    }
    float d[9], mean[3] = {0, 0, 0}, W = 0;
    int free3 = 1;
    for (int j = 0; j < 3; ++j) {
        float r[3], dv[3];
        pbd_sm__sub3(x + 4 * T[j], xc, r);
        pbd_sm__sub3(v + 4 * T[j], vc, dv);
        float rr = pbd_sm__dot3(r, r);
        int fr = x[4 * T[j] + 3] > 0;
        float s2 = rr > 0 && fr ? -kd * pbd_sm__dot3(r, dv) / rr : 0.0f;
        for (int k = 0; k < 3; ++k) {
            d[3 * j + k] = s2 * r[k];
            mean[k] += L->mt[T[j]] * d[3 * j + k];
        }
        W += L->mt[T[j]];
        free3 = free3 && fr;
    }
    /* the triangle's net impulse sum_j m~_j d_j (m~ = m / |R|, what the
       averaging below gives each corner) taken back, so that damping keeps
       the momentum, as shape matching does (eq. 4); a pinned corner takes it */
    for (int k = 0; k < 3; ++k) mean[k] = free3 && W > 0 ? mean[k] / W : 0.0f;
    for (int j = 0; j < 3; ++j) {
        float *o = L->tdx + 9 * t + 3 * j, it = x[4 * T[j] + 3] > 0 ? L->inv_rt[T[j]] : 0.0f;
        for (int k = 0; k < 3; ++k) o[k] = it * (d[3 * j + k] - mean[k]);
    }
}
static void pbd_sm__damp(pbd_sm__cloth *c, const pbd_solve_context *s) {
    pbd_sm__level *L = &c->lv[c->nlevels - 1];
    const float *x = s->x + 4 * c->particles.first;
    float *v = s->v + 4 * c->particles.first;
    PBD_SM__PRAGMA(omp for schedule(static))
    for (int t = 0; t < L->nt; ++t) pbd_sm__damp_triangle(L, x, v, c->damping, t);
    pbd_sm__gather(L->nv, v, L->vt_start, L->vt_list, L->tdx);
}

/* --- plugin -------------------------------------------------------------------- */

static void pbd_sm__cloth_begin_substep(void *user, const pbd_solve_context *s) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)user;
    if (c->bending > 0 && !pbd_sm__cloth_gpu(c, s, PBD_SM__CUDA_BEGIN)) pbd_sm__bend(c, s);
}
static void pbd_sm__cloth_project(void *user, const pbd_solve_context *s) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)user;
    if (!pbd_sm__cloth_gpu(c, s, PBD_SM__CUDA_PROJECT)) pbd_sm__vcycle(c, s->p + 4 * c->particles.first);
}
static void pbd_sm__cloth_end_substep(void *user, const pbd_solve_context *s) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)user;
    if (c->damping > 0 && !pbd_sm__cloth_gpu(c, s, PBD_SM__CUDA_END)) pbd_sm__damp(c, s);
}
/* What a step changes of the cloth besides the particles: every level's
   last valid projections and the coarse levels' positions (both in
   snapshots), kept at the step's start and put back when pbd_world_step
   rolls a non-finite step back (pbd.h, pbd_plugin_desc.rollback): else a
   NaN step left NaN coarse positions, and the world's snapshot no longer
   loaded. */
static void pbd_sm__cloth_keep(pbd_sm__cloth *c, int back) {
    float *k = c->kept;
    for (int l = 0; l < c->nlevels; ++l) {
        pbd_sm__level *L = &c->lv[l];
        size_t np = 6 * (size_t)L->nt, nx = l < c->nlevels - 1 ? 4 * (size_t)L->nv : 0;
        memcpy(back ? L->tP : k, back ? k : L->tP, sizeof(float) * np);
        if (nx) memcpy(back ? L->x : k + np, back ? k + np : L->x, sizeof(float) * nx);
        k += np + nx;
    }
}
static void pbd_sm__cloth_begin_step(void *user, pbd_world *w, float dt) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)user;
    (void)w;
    (void)dt;
    if (!pbd_sm__cloth_gpu(c, NULL, PBD_SM__CUDA_KEEP)) pbd_sm__cloth_keep(c, 0);
}
static void pbd_sm__cloth_rollback(void *user, pbd_world *w) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)user;
    (void)w;
    if (!pbd_sm__cloth_gpu(c, NULL, PBD_SM__CUDA_ROLLBACK)) pbd_sm__cloth_keep(c, 1);
}
static int pbd_sm__in01(float x) { return x >= 0 && x <= 1; }
static void pbd_sm__cloth_destroy(void *user) { pbd_sm__cloth_free((pbd_sm__cloth *)user); }

/* The cloth's state in snapshots (pbd_sm__io): what its setters change
   (stiffness, wrinkle conservation, damping, bending, scheme; not the
   SIMD switch, which changes no bit), every level's last valid
   projections (kept for triangles that turn degenerate) and the coarse
   levels' positions of the last V-cycle (what pbd_sm_cloth_level reads;
   each V-cycle starts them anew). */
static void pbd_sm__cloth_state(pbd_sm__io *io, void *thing) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)thing;
    if (io->out) pbd_sm__cloth_gpu(c, NULL, PBD_SM__CUDA_FETCH); /* a GPU world's state, current */
    static const char *const names[] = {"first particle", "level count", "nested flag", "vertex total",
                                        "triangle total"};
    int counts[5] = {c->particles.first, c->nlevels, c->nested, 0, 0};
    for (int l = 0; l < c->nlevels; ++l) counts[3] += c->lv[l].nv, counts[4] += c->lv[l].nt;
    pbd_sm__io_head(io, PBD_SM__TAG_CLOTH, counts, 5, names);
    float par[4] = {c->alpha, c->beta, c->damping, c->bending};
    int flags[2] = {c->conserve, c->scheme};
    for (int k = 0; k < 4; ++k) pbd_sm__io_float(io, &par[k]);
    for (int k = 0; k < 2; ++k) pbd_sm__io_int(io, &flags[k]);
    for (int l = 0; l < c->nlevels; ++l) {
        pbd_sm__level *L = &c->lv[l];
        pbd_sm__io_floats(io, L->tP, 6 * (size_t)L->nt, "projection");
        if (l < c->nlevels - 1) pbd_sm__io_floats(io, L->x, 4 * (size_t)L->nv, "coarse position");
    }
    if (!io->in || io->why[0]) return;
    if (!io->commit) {
        if (!pbd_sm__in01(par[0]) || !pbd_sm__in01(par[1]) || !pbd_sm__in01(par[2]) || !pbd_sm__finite(par[3]) ||
            !(par[3] >= 0) || (flags[0] != 0 && flags[0] != 1) ||
            (flags[1] != PBD_SM_CLOTH_TWO_PASS && flags[1] != PBD_SM_CLOTH_INDEPENDENT_SETS))
            pbd_sm__io_refuse(
                io, "parameters out of range: alpha %g, beta %g, damping %g, bending %g, conserve %d, scheme %d",
                (double)par[0], (double)par[1], (double)par[2], (double)par[3], flags[0], flags[1]);
        return;
    }
    c->alpha = par[0];
    c->beta = par[1];
    c->damping = par[2];
    c->bending = par[3];
    c->conserve = flags[0];
    c->scheme = flags[1];
    pbd_sm__cloth_gpu(c, NULL, PBD_SM__CUDA_PUSH);
}

/* pbd_plugin_desc.save_state / load_state of every kind ("states in
   snapshots"): the walk of the thing's tag. */
static pbd_sm__state_fn pbd_sm__walk_of(const void *thing) {
    switch (*(const uint32_t *)thing) {
        case PBD_SM__TAG_BODY: return pbd_sm__body_state;
        case PBD_SM__TAG_ORIENTED: return pbd_sm__oriented_state;
        case PBD_SM__TAG_VOLUME: return pbd_sm__volume_state;
        default: return pbd_sm__cloth_state;
    }
}
static size_t pbd_sm__state_save(void *user, const pbd_world *w, void *out) {
    (void)w;
    return pbd_sm__save(pbd_sm__walk_of(user), user, out);
}
static pbd_result pbd_sm__state_load(void *user, pbd_world *w, const void *in, size_t size, int commit) {
    (void)w;
    return pbd_sm__load(pbd_sm__walk_of(user), user, in, size, commit);
}
static int pbd_sm__cloth_uses(void *user, const unsigned char *marked, int n) {
    return pbd_sm__marked_range(marked, n, ((const pbd_sm__cloth *)user)->particles);
}

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
    d.scheme = PBD_SM_CLOTH_INDEPENDENT_SETS;
    d.thickness = 0.005f;
    return d;
}

/* A triangle listed twice (the same vertices in any order): refused, as
   its area (the masses) and its shape matching would count twice, and
   where its edges border nothing else it passes the manifold check (each
   edge in two triangles). mem: the world whose memory the scratch uses. */
static pbd_result pbd_sm__cloth_refuse_repeated_triangle(pbd_world *mem, const pbd_sm_cloth_desc *d) {
    int t0 = 0, t1 = 0, twice = pbd_find_repeated_element(mem, d->triangles, d->triangle_count, 3, &t0, &t1);
    if (twice < 0) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    if (twice)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_add_cloth: triangles %d and %d are the same triangle (vertices %d, %d, %d)", t0,
                              t1, d->triangles[3 * t0], d->triangles[3 * t0 + 1], d->triangles[3 * t0 + 2]);
    return PBD_OK;
}

static pbd_result pbd_sm__check_cloth_desc(pbd_world *mem, const pbd_sm_cloth_desc *d) {
    if (!d->positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_add_cloth: pbd_sm_cloth_desc.positions is NULL");
    if (!d->triangles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_sm_add_cloth: pbd_sm_cloth_desc.triangles is NULL");
    if (d->keep_count > 0 && !d->keep_vertices)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_sm_add_cloth: keep_vertices is NULL while keep_count is %d", d->keep_count);
    if (d->vertex_count < 3)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_cloth: vertex_count %d must be >= 3",
                              d->vertex_count);
    if (d->triangle_count < 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_cloth: triangle_count %d must be >= 1",
                              d->triangle_count);
    if (d->keep_count < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_cloth: keep_count %d must be >= 0",
                              d->keep_count);
    if (d->vertex_count > INT_MAX / 4 || d->triangle_count > INT_MAX / 9)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_sm_add_cloth: vertex_count %d or triangle_count %d is too large (at most %d and %d)",
                              d->vertex_count, d->triangle_count, INT_MAX / 4, INT_MAX / 9);
    if (!pbd_sm__finite_n(d->positions, 3L * d->vertex_count))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_sm_add_cloth: positions contain NaN or infinity (%d vertices)", d->vertex_count);
    if (d->initial_positions && !pbd_sm__finite_n(d->initial_positions, 3L * d->vertex_count))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_sm_add_cloth: initial_positions contain NaN or infinity (%d vertices)",
                              d->vertex_count);
    static const char *const names[4] = {"density", "bending_stiffness", "thickness", "reduction"};
    const float values[4] = {d->density, d->bending_stiffness, d->thickness, d->reduction};
    pbd_result nonfinite = pbd_sm__check_finite_named(NULL, "pbd_sm_add_cloth", values, names, 4);
    if (nonfinite != PBD_OK) return nonfinite;
    if (!(d->density > 0))
        return pbd_world_fail(NULL, PBD_ERROR_NEGATIVE_MASS, "pbd_sm_add_cloth: density %g must be > 0",
                              (double)d->density);
    const char *bad = d->levels < 1 || d->levels > 10                    ? "levels outside 1..10"
                      : !(d->reduction >= 0.05f && d->reduction <= 0.9f) ? "reduction outside [0.05, 0.9]"
                      : d->nested != 0 && d->nested != 1                 ? "nested is neither 0 nor 1"
                      : !pbd_sm__in01(d->alpha)                          ? "alpha outside [0, 1]"
                      : !pbd_sm__in01(d->beta)                           ? "beta outside [0, 1]"
                      : !pbd_sm__in01(d->damping)                        ? "damping outside [0, 1]"
                      : !(d->bending_stiffness >= 0)                     ? "bending_stiffness < 0"
                      : !(d->thickness >= 0)                             ? "thickness < 0"
                      : d->thickness > PBD_MAX_RADIUS                    ? "thickness above PBD_MAX_RADIUS"
                      : d->scheme != PBD_SM_CLOTH_TWO_PASS && d->scheme != PBD_SM_CLOTH_INDEPENDENT_SETS
                          ? "scheme is not a pbd_sm_cloth_scheme"
                      : d->conserve_wrinkles != 0 && d->conserve_wrinkles != 1 ? "conserve_wrinkles is neither 0 nor 1"
                                                                               : NULL;
    if (bad)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_cloth_desc: %s (levels %d, reduction %g, "
                              "alpha %g, beta %g, damping %g, bending_stiffness %g, thickness %g)",
                              bad, d->levels, (double)d->reduction, (double)d->alpha, (double)d->beta,
                              (double)d->damping, (double)d->bending_stiffness, (double)d->thickness);
    for (long i = 0; i < 3L * d->triangle_count; ++i)
        if (d->triangles[i] < 0 || d->triangles[i] >= d->vertex_count)
            return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_add_cloth: triangle %ld names vertex %d, outside 0..%d", i / 3,
                                  d->triangles[i], d->vertex_count - 1);
    for (int t = 0; t < d->triangle_count; ++t) {
        const int *T = d->triangles + 3 * t;
        if (T[0] == T[1])
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_sm_add_cloth: triangle %d repeats vertex %d", t,
                                  T[0]);
        if (T[1] == T[2])
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_sm_add_cloth: triangle %d repeats vertex %d", t,
                                  T[1]);
        if (T[0] == T[2])
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_sm_add_cloth: triangle %d repeats vertex %d", t,
                                  T[0]);
    }
    pbd_result r = pbd_sm__cloth_refuse_repeated_triangle(mem, d);
    if (r != PBD_OK) return r;
    for (int k = 0; k < d->keep_count; ++k)
        if (d->keep_vertices[k] < 0 || d->keep_vertices[k] >= d->vertex_count)
            return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                  "pbd_sm_add_cloth: keep_vertices[%d] = %d is not a vertex (0..%d)", k,
                                  d->keep_vertices[k], d->vertex_count - 1);
    return PBD_OK;
}

/* Builds the whole cloth of world mem (its memory; nothing else of the
   world is touched). */
static pbd_result pbd_sm__cloth_build(pbd_world *mem, const pbd_sm_cloth_desc *d, pbd_sm__cloth **out) {
    pbd_sm__cloth *c = (pbd_sm__cloth *)pbd_sm__alloc_n(mem, 1, sizeof *c);
    if (!c) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    memset(c, 0, sizeof *c);
    c->tag = PBD_SM__TAG_CLOTH;
    c->world = mem;
    c->lv = (pbd_sm__level *)pbd_sm__alloc_n(mem, (size_t)d->levels, sizeof(pbd_sm__level));
    if (!c->lv) {
        pbd_sm__free(mem, c);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    memset(c->lv, 0, sizeof(pbd_sm__level) * (size_t)d->levels);
    c->nlevels = d->levels;
    c->nested = d->nested;
    c->alpha = d->alpha;
    c->beta = d->beta;
    c->damping = d->damping;
    c->bending = d->bending_stiffness;
    c->conserve = d->conserve_wrinkles;
    c->scheme = d->scheme;
    c->simd = PBD_SM__CW > 1;
    pbd_sm__level *F = &c->lv[d->levels - 1];
    F->nv = d->vertex_count;
    F->nt = d->triangle_count;
    F->tri = (int *)pbd_sm__alloc_n(mem, (size_t)F->nt * 3, sizeof(int));
    F->rest = (float *)pbd_sm__alloc_n(mem, (size_t)F->nv * 3, sizeof(float));
    pbd_result r =
        F->tri && F->rest ? PBD_OK : pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    if (r == PBD_OK) {
        memcpy(F->tri, d->triangles, sizeof(int) * 3 * (size_t)F->nt);
        memcpy(F->rest, d->positions, sizeof(float) * 3 * (size_t)F->nv);
        r = pbd_sm__level_finish(mem, F, d->density);
    }
    if (r == PBD_OK)
        for (int v = 0; v < F->nv && r == PBD_OK; ++v) /* the first such vertex */
            if (F->vt_start[v + 1] == F->vt_start[v])
                r = pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_add_cloth: vertex %d is in no triangle",
                                   v);
    if (r == PBD_OK) r = pbd_sm__build_hierarchy(c, d, d->levels);
    if (r == PBD_OK) r = pbd_sm__bending_matrix(c);
    if (r != PBD_OK) {
        c->nlevels = d->levels;
        pbd_sm__cloth_free(c);
        return r;
    }
    for (int l = 0; l < d->levels - 1; ++l) /* coarse positions until the first V-cycle: the rest shape */
        for (int v = 0; v < c->lv[l].nv; ++v) {
            memcpy(c->lv[l].x + 4 * v, c->lv[l].rest + 3 * v, 3 * sizeof(float));
            c->lv[l].x[4 * v + 3] = 1.0f / c->lv[l].mass[v];
        }
    for (int l = 0; l < d->levels; ++l)
        c->nkept += 6 * (size_t)c->lv[l].nt + (l < d->levels - 1 ? 4 * (size_t)c->lv[l].nv : 0);
    c->kept = (float *)pbd_sm__alloc_n(mem, c->nkept, sizeof(float));
    if (!c->kept) {
        pbd_sm__cloth_free(c);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_sm_add_cloth: out of memory");
    }
    *out = c;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_add_cloth(pbd_world *w, const pbd_sm_cloth_desc *d, pbd_sm_cloth *out,
                                       pbd_range *particles) {
    if (!w) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_cloth: w is NULL");
#if !defined(PBD_CUDA) && !defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU)
        return pbd_world_fail(w, PBD_ERROR_UNSUPPORTED,
                              "pbd_sm_add_cloth: a GPU world needs PBD_CUDA where PBD_SM_IMPLEMENTATION is");
#endif
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_add_cloth: d is NULL");
    pbd_result r = pbd_world_fail_in(w, "pbd_sm_add_cloth", pbd_sm__check_cloth_desc(w, d));
    if (r != PBD_OK) return r;
    pbd_sm__cloth *c = NULL;
    r = pbd_world_fail_in(w, "pbd_sm_add_cloth", pbd_sm__cloth_build(w, d, &c));
    if (r != PBD_OK) return r;
    const pbd_sm__level *F = &c->lv[c->nlevels - 1];
    for (int v = 0; v < F->nv; ++v) /* named here: the desc has a density, no masses */
        if (!(F->mass[v] >= PBD_MIN_MASS && F->mass[v] <= PBD_MAX_MASS)) {
            char value[32];
            r = pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                               "pbd_sm_add_cloth: density %g kg/m^2 makes vertex %d a mass of %s kg, outside "
                               "[PBD_MIN_MASS, PBD_MAX_MASS] = [%g, %g] kg",
                               (double)d->density, v, pbd_format_float(F->mass[v], value, sizeof value),
                               (double)PBD_MIN_MASS, (double)PBD_MAX_MASS);
            pbd_sm__cloth_free(c);
            return r;
        }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = d->initial_positions ? d->initial_positions : d->positions;
    pd.masses = F->mass;
    pd.radius = d->thickness;
    pd.count = F->nv;
    r = pbd_add_particles(w, &pd, &c->particles);
    if (r != PBD_OK) {
        pbd_sm__cloth_free(c);
        return r;
    }
    long work = 0;
    for (int l = 0; l < c->nlevels; ++l) work += 2L * (c->lv[l].nt + c->lv[l].ne + c->lv[l].nv);
    pbd_plugin_desc pl = pbd_plugin_desc_default();
    pl.name = "pbd_sm multi-resolution cloth";
    pl.user = c;
    pl.kind = pbd_sm__plugin_kind(PBD_SM__TAG_CLOTH);
    pl.parallel = PBD_SM__OPENMP;
    pl.particle_end = c->particles.first + c->particles.count;
    pl.work = work;
    pl.begin_step = pbd_sm__cloth_begin_step;
    pl.rollback = pbd_sm__cloth_rollback;
    pl.begin_substep = pbd_sm__cloth_begin_substep;
    pl.project = pbd_sm__cloth_project;
    pl.end_substep = pbd_sm__cloth_end_substep;
    pl.save_state = pbd_sm__state_save;
    pl.load_state = pbd_sm__state_load;
    pl.destroy = pbd_sm__cloth_destroy;
    pl.uses_particles = pbd_sm__cloth_uses;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (pbd_world_device(w) == PBD_DEVICE_GPU) { /* its arrays on the device, its callbacks launch kernels */
        pl.device = 1;
        if (!pbd_sm__cuda_cloth(c, sizeof *c, NULL, PBD_SM__CUDA_UPLOAD)) {
            pbd_remove_particles(w, c->particles);
            pbd_sm__cloth_free(c);
            return pbd_world_fail(w, PBD_ERROR_OUT_OF_MEMORY,
                                  "pbd_sm_add_cloth: out of device memory for a cloth of %d vertices", F->nv);
        }
    }
#endif
    r = pbd_add_plugin(w, &pl, &c->plugin);
    if (r != PBD_OK) {
        pbd_remove_particles(w, c->particles); /* nothing else uses them yet */
        pbd_sm__cloth_free(c);
        return r;
    }
    if (out) out->id = c->plugin.id;
    if (particles) *particles = c->particles;
    return PBD_OK;
}

/* The cloth a handle names (pbd_sm__resolve), or the error. */
static pbd_result pbd_sm__cloth_of(const pbd_world *w, pbd_sm_cloth h, const char *fn, pbd_sm__cloth **c) {
    void *u = NULL;
    pbd_result r = pbd_sm__resolve(w, h.id, PBD_SM__TAG_CLOTH, fn, &u);
    *c = (pbd_sm__cloth *)u;
    return r;
}

PBD_SM_DEF pbd_result pbd_sm_remove_cloth(pbd_world *w, pbd_sm_cloth cloth) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_remove_cloth", &c);
    if (r != PBD_OK) return r;
    return pbd_remove_plugin(w, c->plugin); /* frees c */
}

PBD_SM_DEF pbd_result pbd_sm_cloth_particles(const pbd_world *w, pbd_sm_cloth cloth, pbd_range *particles) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_particles", &c);
    if (r != PBD_OK) return r;
    if (!particles) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_cloth_particles: particles is NULL");
    *particles = c->particles;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_level_count(const pbd_world *w, pbd_sm_cloth cloth, int *count) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_level_count", &c);
    if (r != PBD_OK) return r;
    if (!count) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_cloth_level_count: count is NULL");
    *count = c->nlevels;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_level(const pbd_world *w, pbd_sm_cloth cloth, int level, int *vertex_count,
                                         int *triangle_count, const int **triangles, const float **positions) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_level", &c);
    if (r != PBD_OK) return r;
    if (level < 0 || level >= c->nlevels)
        return pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_sm_cloth_level: level %d outside 0..%d", level,
                              c->nlevels - 1);
    const pbd_sm__level *L = &c->lv[level];
    if (positions && level < c->nlevels - 1) pbd_sm__cloth_gpu(c, NULL, PBD_SM__CUDA_FETCH);
    if (vertex_count) *vertex_count = L->nv;
    if (triangle_count) *triangle_count = L->nt;
    if (triangles) *triangles = L->tri;
    if (positions) *positions = level == c->nlevels - 1 ? pbd_world_positions(w) + 4 * c->particles.first : L->x;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_set_stiffness(pbd_world *w, pbd_sm_cloth cloth, float alpha, float beta) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_set_stiffness", &c);
    if (r != PBD_OK) return r;
    if (!pbd_sm__in01(alpha) || !pbd_sm__in01(beta)) /* the first at fault */
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_cloth_set_stiffness: %s %g must be in [0, 1]",
                              pbd_sm__in01(alpha) ? "beta" : "alpha", (double)(pbd_sm__in01(alpha) ? beta : alpha));
    c->alpha = alpha;
    c->beta = beta;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_wrinkle_conservation(pbd_world *w, pbd_sm_cloth cloth, int on) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_set_wrinkle_conservation", &c);
    if (r != PBD_OK) return r;
    if (on != 0 && on != 1)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_sm_cloth_set_wrinkle_conservation: on %d must be 0 or 1", on);
    c->conserve = on;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_damping(pbd_world *w, pbd_sm_cloth cloth, float damping) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_set_damping", &c);
    if (r != PBD_OK) return r;
    if (!pbd_sm__in01(damping))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_cloth_set_damping: damping %g outside [0, 1]",
                              (double)damping);
    c->damping = damping;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_bending(pbd_world *w, pbd_sm_cloth cloth, float k) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_set_bending", &c);
    if (r != PBD_OK) return r;
    if (!pbd_sm__finite(k))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_sm_cloth_set_bending: bending_stiffness is not finite (%g)",
                              (double)k);
    if (!(k >= 0))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_cloth_set_bending: bending_stiffness %g < 0",
                              (double)k);
    c->bending = k;
    return PBD_OK;
}
PBD_SM_DEF pbd_result pbd_sm_cloth_set_scheme(pbd_world *w, pbd_sm_cloth cloth, pbd_sm_cloth_scheme scheme) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_set_scheme", &c);
    if (r != PBD_OK) return r;
    if (scheme != PBD_SM_CLOTH_TWO_PASS && scheme != PBD_SM_CLOTH_INDEPENDENT_SETS)
        return pbd_world_fail(
            w, PBD_ERROR_INVALID_ARGUMENT,
            "pbd_sm_cloth_set_scheme: scheme %d is not PBD_SM_CLOTH_TWO_PASS or PBD_SM_CLOTH_INDEPENDENT_SETS",
            (int)scheme);
    c->scheme = scheme;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_set_simd(pbd_world *w, pbd_sm_cloth cloth, int on) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_set_simd", &c);
    if (r != PBD_OK) return r;
    if (on != 0 && on != 1)
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT, "pbd_sm_cloth_set_simd: on %d must be 0 or 1", on);
    c->simd = on && PBD_SM__CW > 1;
    return PBD_OK;
}

PBD_SM_DEF pbd_result pbd_sm_cloth_strain(const pbd_world *w, pbd_sm_cloth cloth, float *average, float *maximum) {
    pbd_sm__cloth *c;
    pbd_result r = pbd_sm__cloth_of(w, cloth, "pbd_sm_cloth_strain", &c);
    if (r != PBD_OK) return r;
    if (!average) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_cloth_strain: average is NULL");
    if (!maximum) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_sm_cloth_strain: maximum is NULL");
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

#ifdef PBD_SM__POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#endif
#endif /* PBD_SM_IMPLEMENTATION_INCLUDED */
#endif /* PBD_SM_IMPLEMENTATION */
