/* pbd.h - v0.1 - position-based dynamics (PBD / XPBD) in one C header.

   MANUAL
   ======
   Do this in *one* C or C++ file to create the implementation:

       #define PBD_IMPLEMENTATION
       #include "pbd.h"

   Every other file includes "pbd.h" alone. Compile with OpenMP (-fopenmp)
   for threads and with SIMDe installed (Debian: libsimde-dev) for the SIMD
   path; without either the same code runs serially / scalar.

       cc -O2 -fopenmp -ffp-contract=off my_app.c -o my_app -lm

   QUICK START
   -----------
       pbd_world_desc d = pbd_world_desc_default();   // gravity, substeps, iterations
       pbd_world *w = NULL;
       if (pbd_world_create(&d, &w) != PBD_OK) return 1;
       pbd_mesh m;                                     // a 32x32 cloth, 1 m wide
       float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
       pbd_mesh_grid(32, 32, o, u, v, &m);
       pbd_cloth_desc c = pbd_cloth_desc_default();
       c.positions = m.positions; c.vertex_count = m.vertex_count;
       c.triangles = m.triangles; c.triangle_count = m.triangle_count;
       pbd_object cloth;
       pbd_add_cloth(w, &c, &cloth);
       float centre[3] = {0, 0.5f, 0};
       pbd_add_collider_sphere(w, centre, 0.3f, 0.5f, NULL);
       for (int frame = 0; frame < 600; ++frame) pbd_world_step(w, 1.0f / 60.0f);
       const float *x = pbd_world_positions(w);        // x y z inv_mass per particle
       pbd_mesh_free(&m);
       pbd_world_destroy(w);

   CONTENTS (sections appear in this order in the declarations and in the
   implementation; search for "// ==== <name>")
       ==== config          macros, SIMD and OpenMP detection
       ==== results         pbd_result, messages, log callback
       ==== math            small vector helpers (implementation only)
       ==== simd            W-wide SIMDe vectors, gather/scatter (impl. only)
       ==== meshes          grid, tetrahedral box, sphere generators
       ==== world           create/destroy, parameters, snapshot/restore
       ==== particles       add, read/write, pin, kinematic, acceleration field
       ==== constraints     stateless constraint functions C(x) and gradients,
                            the XPBD / PBD projection (public); in the
                            implementation beside them the projection the
                            world runs: a group constraint's C(x) at the
                            positions, the scalar and SIMD kernels
       ==== groups          constraint groups (one type, one compliance),
                            graph colouring
       ==== objects         cloth, soft body and balloon builders, locality
       ==== colliders       plane, sphere, capsule, box (rounded edges); continuous contacts,
                            friction, restitution
       ==== mesh colliders  triangle meshes (BVH) and signed-distance grids
                            as colliders
       ==== contacts        (implementation) collider contacts: generated
                            per particle from x -> p, projected, friction
                            and restitution in the velocity pass
       ==== hash grid       counting-sort spatial hash, neighbour queries
                            (shared by contacts, fluids, self-collision)
       ==== particle contact
                            particle-particle contact with radii and
                            friction, across objects (granular piles)
       ==== fluids          position based fluids (Macklin and Mueller 2013):
                            density constraints, s_corr, XSPH, vorticity
       ==== strain limiting long range attachments (Euclidean / geodesic),
                            triangle principal-strain and edge limits
       ==== strands         follow-the-leader and dynamic FTL, hair builder
       ==== tearing         vertex splits of overstretched cloth edges
       ==== damping clusters momentum-conserving damping of particle lists
       ==== self-collision  cloth self- and cloth-cloth collision: point-
                            triangle and edge-edge constraints
       ==== plugins         callbacks in the substep loop (pbd_sm.h and
                            pbd_upsample.h plug in here)
       ==== removal         removing particles, objects and fluids: what is
                            checked, what goes with them (implementation)
       ==== threads         the default thread policy: timed substeps,
                            fewer threads when a core is lost
       ==== gpu             (implementation) the hooks of pbd_cuda.cu:
                            device choice, upload and fetch, the step of
                            a GPU world
       ==== solver          pbd_world_step, top-down as the substep runs:
                            prediction and velocities, damping, angular
                            momentum, the step and its rollback
       ==== validation      (implementation) the checks of a snapshot
                            before pbd_world_restore takes it

   CONFIG MACROS (define before including the implementation)
       PBD_IMPLEMENTATION   emit the implementation in this translation unit
       PBD_STATIC           make every function static (private copy)
       PBD_NO_SIMD          force the scalar reference path
       PBD_SIMD_WIDTH       4, 8 or 16: cap the SIMD width (default: the
                            widest the compiler targets: AVX-512 16, AVX2 8,
                            else SSE2/NEON 4)
                            These two decide SIMD for pbd.h, pbd_sm.h and
                            pbd_upsample.h alike (define them before the
                            first #include of any): the declarations'
                            "==== config" turns them into PBD_SIMD_LANES
                            and PBD_SIMD_AVX512/_AVX2/_SSE/_NEON, which the
                            extensions use; pbd_simd_path() and
                            pbd_simd_width() report the choice.
       PBD_NO_OPENMP        never use OpenMP even when compiled with -fopenmp
       PBD_ALLOW_FAST_MATH  no warning under -ffast-math / -Ofast: inputs are
                            still checked and failed steps rolled back (the
                            checks read the floats' bits), but the results
                            are not the tested ones (SIMD, threads and
                            machines differ), and the link flushes subnormal
                            floats to 0 in the whole program
       PBD_ASSERT(x)        our internal invariants (default: assert.h);
                            never used to check user input
       PBD_MALLOC(sz) / PBD_FREE(p)
                            replace malloc/free (define both or neither);
                            a per-world allocator can also be given in
                            pbd_world_desc.allocator
       PBD_CUDA             with pbd_cuda.cu in the program: worlds can
                            run on a CUDA GPU (see THE GPU); define it
                            where PBD_IMPLEMENTATION is

   CONVENTIONS
     * Handles. Everything a world owns (groups, objects, colliders,
       fluids, tether sets, strain limits, strand sets, tearing, damping
       clusters, collision surfaces, plugins) is named by a typed handle,
       a struct of one uint32_t (pbd_group, pbd_object, ...), which its add
       hands out. id 0 is no handle; a handle whose thing was removed, or
       that names nothing, gets PBD_ERROR_INVALID_HANDLE (the slot's
       generation in the handle's high bits changes with each removal, so
       an old handle never reaches the thing that took its slot; a slot
       whose 1022 generations are used up is retired, never used again).
       pbd_world_restore brings back the generations it saved: a handle
       handed out after the save is stale after the restore, and may name
       again a thing added after it (an audit); drop such handles. A handle
       carries no world: each world checks it against its own slots, so
       one of another world is refused only when this world has no live
       thing of that kind in its slot and generation; otherwise it names
       this world's thing (two worlds built alike hand out equal handles).
       Keep each handle with its world. Particles are named by their
       index (an int), ranges by pbd_range. Error messages name a thing
       by its slot ("object 0", "group 4", "fluid 1"): the slot of a
       handle h is (h.id & ((1u << PBD_HANDLE_SLOT_BITS) - 1)) - 1, so the
       first object added is object 0 while its handle's id is 1.
     * Names. Lifecycle calls put the verb first: pbd_add_<thing> and
       pbd_remove_<thing> (every add has its remove), pbd_world_create /
       pbd_world_destroy, pbd_<thing>_desc_default. Everything else puts
       the noun first, the noun being the handle or thing it acts on:
       pbd_<noun>_<verb>[_<property>], e.g. pbd_particle_set_mass (one
       particle), pbd_particles_set_positions (a range),
       pbd_object_set_damping, pbd_group_set_compliance, pbd_world_step. A
       getter with a setter is pbd_<noun>_get_<property>; a read-only query
       is pbd_<noun>_<property> (pbd_world_time, pbd_group_colors).
       Functions that act on no world and no handle are named for what
       they compute (pbd_constraint_distance, pbd_mesh_grid,
       pbd_color_elements, pbd_sym_eigen; pbd_sm_extract_rotation).
       _destroy releases an opaque thing that _create (or a load or fit)
       made; _free releases the arrays of a value struct the library filled
       (pbd_mesh_free).
     * Removal. A removed thing's memory is freed at once. Particles keep
       their indices: a removed particle stays in its slot (inverse mass 0,
       at the origin) until an add reuses it (pbd_remove_particles). A
       removal is refused, with nothing changed, while something else
       still uses what it would take away; the message names the user.
     * Every function that can fail returns pbd_result (PBD_OK == 0, errors
       are negative). On error nothing observable changes: the world's
       snapshot is byte-identical to the one before the call (one
       exception: pbd_world_tear out of memory keeps what it tore). The message of
       the last error is in pbd_world_last_error() and is sent to the log
       callback of pbd_world_desc when one is set; pbd_last_error() holds
       the message of the last failing call on this thread, with or without
       a world (the only place for calls that have none: pbd_world_create,
       the extensions' plans and models). pbd_sm.h and pbd_upsample.h follow the
       same rules through pbd_world_fail (section "plugins"). Nothing
       aborts on input.
     * Units are SI (m, kg, s). Particles are stored as 4 floats
       (x, y, z, inverse mass); pbd_world_positions() returns that array.
       Floats hold a scene near the origin: a float's step is 7.6 um at
       100 m and 61 um at 1 km, where what a substep moves a particle
       (0.17 mm in the first substep of a fall, 60 Hz, 4 substeps) is a
       few steps only. A particle let fall from (x, x, 0) had after 1 s a
       speed of 9.67 m/s at x = 100 m, 10.5 at 500 m and 1 km, 7.0 at
       2 km, 14.1 at 4 km and 0 (it never moved) at 10 km, instead of
       9.81 (60 Hz; 30 Hz at a fixed 4 substeps, reference_dt = 0: 9.78 at
       100 m, 14.1 at 10 km). Keep what
       moves within about 100 m of the origin; for a larger world, move
       the origin with the scene (shift every position, collider pose
       and target by the same amount between steps). The positions a
       world is given for its particles (pbd_particles_desc, setters,
       kinematic and attachment targets, the builders' meshes and roots) must lie within
       PBD_MAX_COORDINATE = 1e6 m of the origin on every axis (see "====
       world").
     * Masses and radii: a particle's mass is 0 (pinned) or in
       [PBD_MIN_MASS, PBD_MAX_MASS] = [1e-12, 1e12] kg, its radius (a
       cloth's thickness, a fluid's spacing) at most PBD_MAX_RADIUS = 10 m,
       wherever one is given or made from a density; anything else is
       refused (see the constants in "==== world").
     * Zero is a real value for many parameters, so every desc has a
       *_default() function: start from it and change what you need.
     * Switches (a setter's `on`, a desc's 0/1 fields) take 0 or 1, in all
       three headers: 2 or -1 is PBD_ERROR_INVALID_ARGUMENT, not "on".
     * Lists: a call that hands out a list takes (out, max, *count) in that
       order and returns pbd_result: it writes at most max items to out
       (an item may be several numbers: a triangle is 3 ints), *count
       (required) receives the full length, and out may be NULL when max
       is 0, so a first call with (NULL, 0, &n) sizes the buffer (NULL
       with max > 0, or max < 0, is PBD_ERROR_INVALID_ARGUMENT; a NULL
       count PBD_ERROR_NULL_POINTER). A short buffer is no error. All
       three headers follow this.
     * No allocation inside pbd_world_step(): scratch is sized when objects
       are added. (A GPU world's first step after a change uploads the
       world, which allocates device memory when a buffer must grow.)
     * Time steps: pbd_world_step takes dt in [PBD_MIN_TIME_STEP,
       PBD_MAX_TIME_STEP] = [1e-6, 1] s and refuses anything else (NaN
       included) with PBD_ERROR_INVALID_TIME_STEP. Why: with up to 1000
       substeps, h = dt / substeps >= 1e-9 s keeps 1 / h, 1 / h^2 and the
       velocities (p - x) / h of rounding-size motions in float range (and
       alpha~ = compliance / h^2 is capped at 1e30, so any valid compliance
       works); a step longer than 1 s is no simulation step - a game that
       lost time clamps its frame. Every step keeps about the substep of a
       1/60 s one: substeps counts per pbd_world_desc.reference_dt
       (default 1/60 s), so a 1/30 s step takes 8 substeps, a 0.25 s hitch
       60, at that multiple of the cost, and a shorter step fewer (2 at 120
       or 144 Hz, 1 from 1/240 s down: the world's count, which fluids,
       grains and pinned cloths may raise; pbd_world_step_substeps). The
       reason: at a limited number of iterations the constraints are not
       converged, and the error a step leaves depends on its substep (a
       long one leaves more; gravity moves a resting cloth by g h^2 a
       substep, and its stretch follows); the next step, of another
       substep, removes or adds the difference and turns it into velocity,
       error / h. Measured on README.md's hello-world cloth, with the
       default / with reference_dt = 0 (a fixed 4 substeps): at rest on its
       sphere after 5 s of 1/30 s steps its worst edge is 16% / 43% long
       (1/60 s: 16%); at steady 0.25 s steps it reaches 22% / 20 to 41
       times its rest length within 4 steps; one 0.25 s frame after it
       rests throws it off at up to 0.01 / 13 m/s in the next 2 s (0.1 s:
       0.01 / 3.2 m/s); 1 s then 1/60 s: 0.01 / 199 m/s; one step of 10, 5
       or 1 ms among 1/60 s ones jolts it to 0.09, 0.09 or 0.27 m/s and it
       swings up to 0.13, 0.19 or 0.34 m/s in the second after (a fixed 4
       substeps: 0.18, 0.52, 2.8 and 0.36, 1.1, 7.3 m/s); stepped at 144 Hz
       after 60 Hz it jolts to 0.6 m/s and moves at 0.06 m/s 2 s later
       (when short steps kept 4 substeps, as 0.2 did at first: 5.3 and 1
       m/s); frame times drawn at random from 8 to 33 ms keep it moving at
       up to 0.5 m/s (was 1.3), and keep most deformable things from
       resting (an audit, fastest over 5-10 s, 60 Hz against 8-33 ms: a
       tablecloth 0.04 / 0.39 m/s, a self-colliding cloth 0.02 / 0.37, a
       balloon 0.02 / 0.17, a water tank 0.04 / 0.31; soft bodies and
       jellies rest by 10 s instead of 1-2 s; rigid bodies, pinned cloths
       and grains are unaffected). Water jolts more, the compression it rests
       on let go within one short substep: 10 x 10 x 10 particles at 5 cm
       resting in a tank, one step of 1, 0.3 or 0.1 ms: 0.2, 0.6 or 1.9 m/s
       (4 substeps: 1.4, 4.8, 14.5 m/s; test
       fluid_one_short_step_is_not_amplified). Shorter steps are not
       simulated: a step under an eighth of the reference substep (0.52
       ms at the defaults) is carried over to the next one, which
       simulates both (pbd_world_step), since its one substep, thousands
       of times shorter than the reference's at a few microseconds, turned
       the error of the steps before into a huge velocity (one 1e-6 s step
       threw the resting cloth up at 1600 m/s; a 10 us one a curtain at
       11 m/s; 0.1 ms steps, 1 to 10 m/s; test
       world_short_steps_are_carried_over). A fixed substep count
       (reference_dt 0) steps what it is given: there one 1e-6 s step
       throws the cloth at over 2e6 m/s. Keep dt steady all the same: a
       fixed step and an accumulator. The step does not settle that error
       without velocity when the substep drops (pre-stabilization, as for
       contacts): tried, 1 or 4 such solver passes before the short step
       cut the fixed-count 1/60 s case's speed by 11% or 40% only and the
       1e-6 s case's by 12% or 35%.
     * Non-finite steps: a step that produces NaN or infinity anyway (an
       acceleration field or plugin that returns huge values, velocities
       that overflow) is caught at its end (every position and velocity is
       tested: about 1% of a small cloth's step, see bench/README.md) and
       returns PBD_ERROR_NOT_FINITE, naming the first bad particle and its
       object (a free one first: a pinned particle only catches a NaN from
       its neighbours). The world is then back at its state before the step: the
       snapshot is byte-identical, and plugins put their own state back
       through their rollback callback (pbd_sm.h's bodies and oriented
       particles do). XPBD multipliers are zero between steps for this
       reason (they are reset every substep anyway). So the state is never
       corrupted silently: fix the cause (or drop the offending input) and
       step again.
     * No state reads or writes out of bounds: every float-to-index
       conversion (hash grid cells, signed-distance grid lookups, Morton
       codes, grid sizes; pbd_upsample.h's triangle grid) clamps in float
       before converting, NaN included, and neighbour searches never return
       their padding, even to a NaN query.
     * Constraint functions follow the sign convention of the survey
       (Bender et al. 2017, section 3.1): a bilateral constraint wants
       C = 0, a unilateral one wants C >= 0 and is skipped when satisfied.

   SOLVER (Bender et al. 2017 "A survey on position based dynamics",
   section 3; XPBD: Macklin, Mueller, Chentanez 2016; small steps: Macklin
   et al. 2019). One pbd_world_step(dt) runs `substeps` substeps of
   h = dt / substeps, each:
     1. v += h (gravity + acceleration field), point damping and the
        objects' drag (pbd_object_set_drag); p = x + h v
        (kinematic particles follow their targets, pinned ones stay);
     2. contacts from x -> p against the colliders (continuous: the segment
        is swept, so fast particles cannot tunnel through thin shapes;
        analytic shapes, triangle meshes and signed-distance grids); for
        cloth self-collision surfaces, the motion limited to one thickness
        per substep and the point-triangle / edge-edge candidates found
        within the reach of that motion (see "==== self-collision");
     3. XPBD multipliers reset, the hash grid and the neighbour lists of
        the particles with particle collision or fluid built from p (at a
        step's first substep, at every substep while there is a fluid, and
        at a later one where a particle has moved a quarter of its radius
        since: see "// ==== particle contact"), then
        `iterations` times: Gauss-Seidel sweeps over the groups in the
        order they were added, the strain limits (long range attachments,
        triangle/edge limits) and the strands' follow-the-leader pass, the
        plugins' `project` callbacks (shape matching, ...), one Jacobi pass
        of particle contacts and fluid density constraints, the
        self-collision constraints, the collider contacts (with
        position-level static/dynamic friction), and last the plugins'
        `project_after_contacts` callbacks (a rigid shape-matching body
        takes its rest shape again there: see pbd_sm.h);
     4. v = (p - x) / h, x = p; dynamic FTL's velocity correction (its
        leaders pay for what they give their followers); fluids:
        XSPH viscosity and vorticity confinement;
     5. velocity pass: friction and restitution of contacts, separating
        velocity of self-contacts removed; the plugins' `end_substep`
        callbacks; for isolated
        objects (nothing pinned, no other object's contact; colliders
        are fine) the angular momentum the velocity update v = (p - x)/h
        leaks at O(h) is restored (what the colliders gave is kept, taken
        about each particle's x of the substep's start: a balloon rests
        on the ground, and rolls down a slope); global damping per object and per
        damping cluster (Mueller et al. 2007, survey 3.7): momentum-
        conserving for a free object, towards the motion of its pinned or
        kinematic particles for a held one; an object torn in pieces is
        damped piece by piece.
   Tearing (pbd_world_tear) runs between steps, never inside one.

   STRAIN LIMITING, STRANDS, TEARING (survey 3.5)
       // tethers from every vertex of a pinned cloth to its nearest pinned
       // vertex along the mesh: no global stretch even with 2 iterations
       // (a cloth does this by itself: pbd_cloth_desc.tethers, below)
       pbd_lra_desc l = pbd_lra_desc_default();
       l.object = cloth; l.anchors = pinned; l.anchor_count = npinned;
       l.geodesic = 1;
       pbd_add_long_range_attachments(w, &l, NULL);
       // principal stretches of every triangle kept in [0.95, 1.05]
       pbd_strain_limit_desc s = pbd_strain_limit_desc_default();
       s.object = cloth; s.triangles = m.triangles; s.triangle_count = m.triangle_count;
       s.min_stretch = 0.95f; s.max_stretch = 1.05f;
       pbd_add_strain_limit(w, &s, NULL);
       // hair: strands grown along the normals of roots on a moving head
       pbd_hair_desc h = pbd_hair_desc_default();
       h.root_positions = roots; h.root_normals = normals; h.strand_count = n;
       pbd_strands hair; pbd_add_hair(w, &h, &hair, NULL);
       pbd_strands_set_transform(w, hair, head_pos, head_rot);   // every frame
       // tearing: edges longer than 1.5 x rest split their vertex
       pbd_tearing_desc t = pbd_tearing_desc_default();
       t.object = cloth; t.triangles = m.triangles; t.triangle_count = m.triangle_count;
       pbd_add_tearing(w, &t, NULL);
       pbd_world_step(w, dt); pbd_world_tear(w, NULL);          // may allocate
       pbd_object_triangles(w, cloth, tris, max, &count);      // the torn mesh

   CLOTH DEFAULTS AND STRETCH. pbd_world_desc_default(): 4 substeps x 4
   iterations; pbd_cloth_desc_default(): stretch compliance 0
   (inextensible), dihedral bending of compliance 1e-3, damping 2/s, and
   `tethers` on: as soon as a cloth has pinned vertices (masses of 0 at
   add time, pbd_particle_pin, pbd_particle_set_mass), every other vertex gets long range
   attachments to its two nearest such anchors (Kim et al. 2012; NvCloth
   and FleX tether the same way), rebuilt at each call that changes the
   anchors (never inside a step; pbd_object_tethers names the set; a row
   of pins is one call, pbd_particles_pin or pbd_particles_set_kinematic
   over its range, and one rebuild).
   Kinematic vertices (pbd_particle_set_kinematic) anchor only a cloth that has no
   pinned vertex (a cape on animated shoulders): a hand dragging a pinned
   cloth is no anchor, else the tethers to the hand and to the pins ask for
   the impossible once it pulls the cloth beyond its reach. Tethers that
   cannot all hold give way instead of fighting ("==== strain limiting").
   A tether's length is the geodesic
   rest distance to its anchor where the library can compute it exactly -
   the cloth's rest shape is one flat, unfolded, convex piece (a
   pbd_mesh_grid, a disc) and the cloth still lies in it when the tethers
   are built (flat, every edge at its rest length to 1e-5: pin before
   stepping), where the geodesic is the straight distance - and otherwise
   the shortest path along the mesh edges, which is never shorter (a
   tether shorter than the geodesic would hold the cloth up) but longer by
   a factor that depends on the direction (up to sqrt 2 along the diagonal
   of a grid): a concave, holed, curved or torn cloth, or one pinned after
   it has moved, stretches more where its tethers are slack (path lengths
   on the 32 x 32 below: 38/13 at 4 x 4, undamped). The damping (towards
   the motion of the anchors, see pbd_object_set_damping) brings a hanging
   cloth to rest as air does, and calms the waves that the fall sends
   through it (undamped, 32 x 32 at 4 x 4: 15/7.6). Rest takes a few
   seconds, not one damping time: the fastest vertex of the 32 x 32 below
   (defaults, 1/60 s steps), dropped from the horizontal, moves at 0.5 m/s
   after 2 s, 0.1 m/s after 4 s, 4 cm/s after 5 s and under 2 cm/s from
   6 s on (a swing is a pendulum's, whose amplitude damping 2/s takes
   down e-fold per second, from the metres per second of the fall;
   tests/test_damping.c). The worst
   edge strain (|x_a - x_b| / rest - 1) of a 1 m cloth hanging from its
   two top corners, all defaults but substeps x iterations (and the
   cloth's substep rule below off), 1/60 s steps, in % during the fall
   (0..2 s) / at rest (5..6 s), bench/cloth_defaults --table:

       32 x 32              iterations: 1           2           4           8
           1 substep    68/8.9      68/2.0      55/1.4      40/0.95
           2 substeps   43/1.4      43/0.69     29/0.41     16/0.24
           4 substeps   17/0.34     17/0.20     8.6/0.10    5.7/0.06
           8 substeps   6.0/0.08    6.1/0.05    4.0/0.03    2.2/0.02
          16 substeps   2.4/0.02    2.3/0.01    1.2/0.01    0.65/0.00
       100 x 100
           1 substep    109/140     136/16      138/11      128/5.6
           2 substeps   133/10      144/5.9     117/2.4     92/1.4
           4 substeps   97/1.3      99/1.4      70/0.77     46/0.41
           8 substeps   47/0.48     48/0.41     26/0.21     13/0.11
          16 substeps   13/0.12     13/0.10     8.3/0.05    4.8/0.04
       32 x 32, tethers = 0
           1 substep    3460/2875   3055/2348   1715/1209   944/640
           2 substeps   1129/748    971/643     522/350     277/190
           4 substeps   319/208     283/190     159/98      98/57
           8 substeps   96/62       100/57      63/37       38/21
          16 substeps   34/20       39/21       23/11       12/5.9

   At rest the tethers keep every edge within 1% at both sizes. The fall
   from the horizontal is the hard part: the free edge whips round, and
   the finer the cloth the more the unconverged edges stretch at a fixed
   substep (100 x 100, 1 cm edges, at 4 x 4: 70%). As Macklin et al. 2019
   found, substeps beat iterations at equal cost (16 x 1 against 4 x 4).
   So a cloth with tethers chooses its own substeps: a step of dt takes
   max(world substeps, ceil(dt sqrt(|g| L) / (gravity_cfl dx))), L how
   far the cloth hangs from its anchors (the largest distance from a
   vertex to its nearest anchor, not the longest of its two tethers),
   dx its mean edge, pbd_cloth_desc.gravity_cfl 0.35 by default, 0 off
   (pbd_world_step_substeps tells the count; the rule is capped at 1000
   substeps, silently: a 1 s step of a 1 m cloth of 129 x 129 vertices
   pinned by a row reaches it, a 1/60 s step takes 17). With the defaults, worst
   edge during the fall / at rest: 20 x 20 5.4/0.04% (4 substeps),
   32 x 32 6.7/0.07% (5), 48 x 48 7.3/0.08% (7), 100 x 100 9.5/0.07% (14);
   the cost grows with the substeps (a 100 x 100 hanging cloth: 3.5x a
   4-substep step). The rule knows gravity only, not a wind or other
   user acceleration (pbd_world_set_acceleration_field), which it cannot
   see: the 32 x 32 above under a steady wind across it of 10, 20, 40
   m/s^2 keeps 5 substeps and hangs blown out with its worst edge at rest
   at 0.10, 0.15, 0.28% (0.07% without wind; during the fall 7.3, 5.9,
   4.8%: a steady wind does not worsen the fall). Raising the world's
   substeps to what the rule would give for the total acceleration,
   ceil(S sqrt(|g + a| / |g|)) with S the rule's count (6, 8, 11), brings
   the rest back to 0.07, 0.06, 0.06% (and the fall to 5.5, 3.7, 1.8%);
   bench/cloth_defaults --wind. For gusts, take the strongest. An unpinned cloth (the hello-world cloth, the
   showcase) keeps the world's substeps, and has no tethers, so it
   stretches like the "tethers = 0" rows while it lands, and static
   friction then holds much of that stretch where it lies: the QUICK
   START cloth dropped on its sphere, at rest after 5 s, has 9% of its
   edges more than 5% long and its worst 16% at 1/60 s steps (1/30 s: the
   same, at 8 substeps, see pbd_world_step_substeps; with a fixed 4,
   reference_dt = 0: 25% and 43%; on a 0.4 m box instead: 31% worst). Give such a world more
   substeps (wd.substeps = 12 at 60 Hz: no edge over 5%, and it takes
   longer to settle: 1 cm/s after 20 s, 2 mm/s after 30 s) where it
   matters (tests/test_collisions.c,
   collisions_unpinned_cloth_stretch_on_sphere). Friction holding a
   stretch can also keep a cloth from resting: the same cloth dropped on
   a 0.4 m box (friction 0.5 / 0.4) standing on a ground plane (0.5),
   its corners on the ground, still swings by millimetres after 20 s
   (half its vertices above 1 cm/s, the fastest at 0.08 m/s): the few
   vertices on the ground stick and slip in turn under the skirt's pull,
   and each slip turns the stretch that sticking held into velocity. Any
   of these rests it: self-collision on the cloth, cloth damping 5/s,
   6 substeps or more, a frictionless ground (what keeps it going is
   that sticking; a cloth on a box with no ground under its corners
   rests). A cloth that must
   stretch (a flag that tears) sets tethers = 0 (examples/flag_tear.c).

   SOFT BODIES (pbd_add_softbody; survey 3.4.4). A tet mesh becomes a
   distance constraint on every tet edge (edge_compliance) and, with
   volume_constraints 1 (the default), a signed-volume constraint
   C = V - V0 on every tet (volume_compliance). Compliance is XPBD's
   inverse stiffness: m/N for the edges (C is a length), m^5/N for the
   tets (C is a volume; its multiplier is a pressure). Both default to 0:
   rigid, up to what the iterations converge. A 0.2 m box of 4 x 4 x 4
   nodes (8 kg at the default 1000 kg/m^3) standing on the ground, world
   defaults, 60 Hz, volume compliance 0, is shortened (the mean height of
   its top face's 16 nodes over its bottom face's, averaged over 2-4 s)
   by 0.14% with edge compliance 0, 0.16% at 1e-5 m/N, 0.28% at 1e-4,
   1.3% at 1e-3 and 12.4% at 1e-2 (undamped, it still sways: 12.5% at
   its lowest within 2-4 s; 12.7% once damped to rest, an audit);
   volume compliance 1e-9 m^5/N on top of 1e-4 gives 0.32%
   (tests/test_bodies.c, bodies_softbody_compliance_sag). Measured as its
   extent instead (highest node less lowest), the soft end shortens less:
   0.85% at 1e-3, 8.4% at 1e-2 (an audit). stiffness and
   volume_stiffness are for PBD_SOLVER_PBD only. pbd_add_softbody refuses
   a tet that is inverted or flat (PBD_ERROR_DEGENERATE: swap two of its
   vertices) and a tet listed twice, in any vertex order (as every
   builder of a triangle mesh refuses a triangle listed twice:
   PBD_ERROR_INVALID_ARGUMENT naming both). Once simulated, a tet may invert: the volume constraint's
   gradient points towards positive volume on both sides, so it pushes an
   inverted tet back through instead of holding it inverted. The default
   box above in zero gravity, flattened to 1% of its height, folded
   through itself (90 of its 135 tets inverted) or mirrored whole (all
   inverted, every edge at its rest length), is back to its rest volume
   within 1% with no tet inverted after one step, and stays finite
   (bodies_softbody_recovers_from_crush_and_inversion); as with any
   position correction, the jump becomes velocity (v = (p - x) / h).
   With volume_constraints 0 nothing tells a mirrored body from its rest
   shape (every edge has its rest length): nothing pushes it back.

   PARALLELISM (survey 3.8; docs/DESIGN.md section 5). Every group is graph
   coloured when it is added (no two constraints of a colour share a
   particle; what does not fit in 63 colours goes to a serial overflow
   colour) and stored sorted by colour. A colour is cut into batches of W
   constraints (W = pbd_simd_width()), projected by SIMD kernels that
   gather W particles into SoA registers with 4x4 transposes; OpenMP shares
   the batches of a colour between threads, one parallel region per
   substep (cloth self-collision colours its candidates the same way
   every substep: see "==== self-collision"). The scalar path solves the
   same colours in the same order, so SIMD and scalar, and any thread
   count, give bit-identical results (build with -ffp-contract=off, never
   -ffast-math: see PBD_ALLOW_FAST_MATH above).

   THREADS ON A BUSY MACHINE ("==== threads"). A team is as fast as its
   slowest thread, since every colour ends in a barrier: when another
   process (a renderer, a compiler) holds a core, the thread that shares
   it waits for the scheduler at every barrier, and OpenMP's default
   spinning waits burn the cores the late thread needs, so a step on 2
   threads can take many times as long as on 1; OMP_WAIT_POLICY=passive
   makes every barrier a system call, which slows small scenes on 2
   threads even on an idle machine. A library cannot change those waits (the
   OpenMP runtime reads OMP_WAIT_POLICY once, at start-up), but it can
   choose the team, since the bits do not depend on it. So the default
   (pbd_world_set_threads(w, 0)) measures: each substep runs on the team
   (OpenMP's count) or a halving of it, down to 1 thread, whichever its
   timings say is faster; more threads must save at least 10%. It starts
   on 1 thread, probes a neighbouring team size for one substep now and
   then, with exponential backoff (the wait before the next probe grows to
   128 times what a probe cost), so that probing costs about 1% of the
   run; before probing more threads it times a few bare barriers on them
   and gives up at once when they take a quarter of a substep. A core lost
   while the team runs is noticed after one slow substep; where the team
   is faster it is kept from the second substep on. With a busy-loop
   process on 2 shared cores a step costs 1.0-1.1x the time of 1 thread,
   where 2 threads cost 5-57x (bench/busy.c).
   pbd_world_thread_team says what the last substep used.
   An explicit count (pbd_world_set_threads(w, n), n >= 1) is obeyed
   as given, whatever the load. Several worlds may step at once, one per
   thread of yours, also from inside your own OpenMP parallel region
   (there each step runs in a team of its own: 1 thread unless you enable
   nested parallelism), with the bits they get one after the other.

   XPBD is the default (pbd_world_desc.mode = PBD_SOLVER_XPBD): a group's
   `compliance` (inverse stiffness; 0 = rigid) gives a stiffness that does
   not depend on the iteration count or the substep count once the solve
   has converged (XPBD's claim): one constraint under a load stretches by
   m g compliance at any count, but a chain of them converges with
   substeps x iterations, and unconverged it is softer: 10 links of 1 m
   and 1 kg hanging from a pin, compliance 1e-4 m/N, stretch in total at
   rest by the analytic 0.054 m at the default 4 x 4 (16 x 16: -1%), by
   16% more at 4 x 1, 83% at 1 x 4 and 247% at 1 x 1. A soft body is
   such a structure: the 0.2 m box of SOFT BODIES at edge compliance 1e-4
   shortens (its faces, as there) by 0.28% at 4 x 4, 0.12% at 16 x 16 and
   11.3% at 1 x 1 (an audit; at 4 x 4 the rigid box's 0.14% is the
   solve's, not a compliance's). Tune compliance at the counts you ship. In
   PBD_SOLVER_PBD mode the group's `stiffness` k in [0,1] is used with the
   k' = 1 - (1 - k)^(1/n) correction of survey 3.3 (n = iterations), unless
   pbd_world_desc.stiffness_correction is 0.

   ENERGY. The projection and the first-order velocity update v = (p -
   x) / h take energy from motion that a constraint turns, about g h / 2L
   a second for a pendulum of length L (h the substep): a 1 m pendulum (a
   distance constraint to a pinned particle) let go at 5 degrees keeps 44%
   of its swing's energy after 20 s at the defaults (4 substeps at 60 Hz),
   66% at 8 substeps, 81% at 16 and 90% at 32 (pbd_world_set_reference_dt
   1/480 s), its period right to 0.05% throughout. A compliant
   constraint's oscillation is damped likewise (1 kg on 1e-3 m/N: 9.8 mm
   to 0.16 mm in 2 s at the defaults) and runs 0.5% slow at 4 substeps,
   7% at 1. Restitution e returns e of the approach speed: dropped from 1
   m a particle rebounds to e^2 of the height within 2-4%, from 5 cm 7%
   lower and from 1 cm 14% lower (gravity acts through the impact's
   substep). Measured by an audit.

   PARTICLES, GRANULAR MATTER AND FLUIDS. pbd_particles_set_particle_contact /
   pbd_object_set_particle_contact switch particle-particle contact on
   (radii, friction: a sand pile, a cloth landing on it); pbd_add_fluid adds
   a block of position based fluid (Macklin and Mueller 2013) that pushes
   and is pushed by those particles and is held by the colliders. Both use
   one spatial hash grid (built from the predictions at a step's first
   substep, and again at a later one once a particle has moved a quarter of
   its radius, or every substep while there is a fluid), and Jacobi iterations that
   keep momentum and give the same bits for any thread count and with or
   without SIMD (pbd_world_set_simd) in one build: a particle sums its
   neighbours in the build's W lanes (pbd_simd_width), and so does the
   scalar path; builds of other widths (PBD_NO_SIMD: 1, SSE 4, AVX2 8,
   AVX-512 16) sum in other lanes, so their fluids and particle contacts
   differ in the last bits, which a fluid's chaotic motion grows (an
   audit: SSE against PBD_NO_SIMD, 132 of 1372 floats after one step, up
   to 0.25 m apart after 60). A fluid sets its own substep from its spacing d: a step
   of dt takes max(substeps, ceil(dt sqrt(|g| / d) / gravity_cfl))
   substeps (pbd_world_step_substeps; gravity_cfl 0.06 by default: at
   60 Hz 13 substeps for 5 mm, 9 for 1 cm, 6 for 2.5 cm, the world's 4
   from 5 cm), so any spacing from 5 mm to 10 cm holds its height and
   density at rest with the defaults, though it is never quite still: a
   10 x 30 x 10 tank's particles keep drifting at rms speeds of about
   0.02, 0.05 and 0.15 m/s at 1, 5 and 10 cm, from 3 s on without
   decaying (the fastest 0.08, 0.2 and 0.7 m/s; the most mobile move by a
   spacing or so in a second, the mean by a fifth of one); each substep
   starts from half the pressure of the one before
   (a warm start), and a resting column of N layers is compressed at its
   bottom by about N (h sqrt(g/d))^2 / (2 iterations) (30 layers: 1.3%;
   a 10 x 30 x 10 tank loses under 1% of its height). The colliders add
   the density of the volume they fill (density maps), so water packs
   against walls and floor only a little (see "// ==== fluids").
   A fluid particle's neighbour list is built once per substep (one candidate
   gather per grid cell, 16 distance tests at a time) and read by every
   iteration and by XSPH / vorticity; the passes work on copies of the
   particles laid out in the Morton order of their cells, so neighbours
   are near in memory (bench/fluid: 128 000 particles).
   Contacts converge slowly in deep piles (Jacobi, each pair's correction
   divided by the larger contact load of its two particles, and no warm
   start): gravity moves every grain by g h^2 a substep, and the overlaps
   that hold a pile up grow from its top down by about that over the
   share an iteration gives back. So grains, as fluids, choose their
   substep: a world with grains (dynamic particles with particle contact
   in no object and no fluid: pbd_add_particles' loose particles and
   pbd_sm.h's bodies, when their particle contact is on) takes at least
   ceil(dt sqrt(|g| / r) /
   granular_cfl) substeps for its smallest grain radius r
   (pbd_world_desc.granular_cfl, default 0.033, 0 off; at 60 Hz 16
   substeps for 1 cm grains, 12 for 2 cm, 8 for 5 cm, 6 for 10 cm;
   pbd_world_step_substeps). Measured, 2000 grains of 1 cm poured into a
   heap: 5 s later it is about 9 cm high at friction 0.5 (its highest
   grain's centre 9.0 cm with the block jittered two ways), worst overlap
   7-8% of a radius, and still settling (900 grains above 1 mm/s, the
   fastest at 3-7 cm/s); without particle friction 5.5 cm, at rest by
   then; at the world's 4 substeps
   (granular_cfl 0, as before 0.2) the heap slumps to a 4.3 cm pancake
   with overlaps of 120% whatever its friction. That is about three times
   the cost: 8.2 against 3.3 ms per 60 Hz step at rest on one thread
   (AVX-512; 4.6 against 2.0 on two; bench/granular.c): contacts between
   solids run W at a time (pbd__vcontact_block), and a step builds their
   neighbour lists once while its grains stay within a quarter of their
   radius (see "// ==== particle contact"); before both it was 45 ms on
   one thread. A heap settles grain by grain: one at its foot may tumble now and then for 15 s
   (432 grains: at rest, all under 1 mm/s, from 17 s). A 10 x 20 x 10
   column of them, touching, stood on a plane: it stands, worst overlap
   19%, but never quite rests (from 10 to 40 s its fastest grain at 3-8
   cm/s, 1000-1300 grains above 1 mm/s; an audit), and only as a lattice
   of exact stacks (each grain moved 0.2 mm sideways at random, it slumps
   into a 9 cm heap within 10 s); at 8 substeps it
   stands but never rests (overlaps up to 116%, hundreds of grains at up
   to 0.24 m/s); at 4 it slumps into a heap 4.3 cm high (112%). The
   overlaps grow with a pile's height: give piles taller than these a
   smaller granular_cfl.
   Give piles substeps rather than iterations (a 5 x 10 x 5 block of
   stacked particles, worst overlap: 16 x 4 8%, 4 x 16 35%). An overlap
   is undone within a substep and, as in every position-based contact, the
   correction becomes velocity (v = (p - x) / h): two particles added 2 cm
   into each other fly apart at about 4.8 m/s at 60 Hz in 4 substeps (each
   moves half the overlap in 1/240 s). Add particles apart, or set their
   velocities after the first step.

       pbd_fluid_desc f = pbd_fluid_desc_default();  // water, 5 cm spacing
       f.positions = xyz; f.count = n;               // e.g. a block on a lattice
       pbd_add_fluid(w, &f, NULL, NULL);
       pbd_object_set_particle_contact(w, box, 1); // floats if its particles are lighter than the fluid's

   THE GPU (pbd_cuda.cu)
       pbd_cuda.cu, next to your program, runs a world's step on a CUDA
       device. Define PBD_CUDA in the file with PBD_IMPLEMENTATION:
           nvcc -O3 --fmad=false -DPBD_CUDA app.c pbd_cuda.cu -o app
       (or compile app.c with cc -DPBD_CUDA, pbd_cuda.cu with nvcc -O3
       --fmad=false -c, and link with -lcudart -lstdc++). Without PBD_CUDA nothing
       changes: no CUDA header, no GPU code. pbd_world_desc.device chooses
       per world: PBD_DEVICE_AUTO (default) the GPU if a CUDA device is
       found, else the CPU, the choice logged with PBD_OK; PBD_DEVICE_GPU
       the GPU, or pbd_world_create fails with PBD_ERROR_UNSUPPORTED and
       why (no device, driver too old, no PBD_CUDA) or with
       PBD_ERROR_OUT_OF_MEMORY; PBD_DEVICE_CPU the CPU. pbd_world_device(w)
       says which. Everything pbd_world_step does runs on the GPU:
       prediction, every constraint group type (Gauss-Seidel by colour,
       averaged Jacobi), long range attachments, strain limits, strands
       and hair, every collider shape with continuous contacts, friction
       and restitution, particle contact and granular matter, fluids (and
       their queries), cloth self-collision, the velocity pass, the
       angular momentum restore, damping, the non-finite rollback;
       snapshots work as on the CPU. Tearing runs on the host between
       steps. Host code stays on the host: an acceleration field's
       callback (once per substep: x and v come down, the accelerations
       go up) and your plugins' callbacks (the particles come down
       before each stage that has one and go back up after), unless the
       plugin is device code (pbd_plugin_desc.device: its callbacks get
       the device's arrays and launch their own kernels; pbd_sm.h's
       bodies, oriented particles, surface volumes and multi-resolution
       cloths are such plugins when pbd_sm.h's implementation is built
       with PBD_CUDA too, and refuse a GPU world with
       PBD_ERROR_UNSUPPORTED otherwise; see pbd_sm.h). The
       host keeps the whole world
       and every call validates it there; the first step after a change
       uploads it. After a step the host's particles are stale until a
       call reads or changes the world, which fetches x and v once: call
       pbd_world_positions after each step, do not keep its pointer.
       pbd_world_device_positions gives the device's float4 positions
       (CUDA-OpenGL interop). A GPU world gives a CPU world's bits: the
       kernels run this header's scalar functions (marked PBD_HD) in the
       CPU's order. Details: the top comment of pbd_cuda.cu.

   LICENSE: MIT or public domain (your choice), see the end of this file.
*/
#ifndef PBD_H_INCLUDED
#define PBD_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include <math.h>   /* pbd__sym_eigen_hd */
#include <string.h> /* pbd__finite_bits */

#ifdef PBD_STATIC
#define PBDDEF static
#else
#define PBDDEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ==== config ================================================================
/* PBD_HD marks the functions that the CPU solver and pbd_cuda.cu's kernels
   share (the constraint math, written once): __host__ __device__ under
   nvcc, nothing elsewhere. */
#if defined(__CUDACC__)
#define PBD_HD __host__ __device__
#else
#define PBD_HD
#endif

/* SIMD, chosen here once for pbd.h and its extensions (part of the
   extension API: pbd_sm.h and pbd_upsample.h derive their kernels from
   these macros and test no target of their own). From PBD_NO_SIMD,
   PBD_SIMD_WIDTH (a cap), what the compiler targets natively (so that a
   build without -march flags does not emulate 8-wide AVX2 with SSE2) and
   whether SIMDe is installed (__has_include(<simde/x86/sse2.h>)):
       PBD_SIMD_LANES    float lanes of the kernels: 16 (__AVX512F__), 8
                         (__AVX2__), 4 (SSE2, or NEON or WASM SIMD128
                         through SIMDe), 1 (scalar: PBD_NO_SIMD, or no SIMDe)
       PBD_SIMD_AVX512, PBD_SIMD_AVX2, PBD_SIMD_SSE, PBD_SIMD_NEON, PBD_SIMD_WASM
                         the instruction set: the one chosen is 1, the
                         others 0 (all 0 for scalar)
       PBD_SIMD_SIMDE_H  the SIMDe header the implementations include
                         (#include PBD_SIMD_SIMDE_H, only where
                         PBD_SIMD_LANES > 1): <simde/x86/avx512.h>,
                         <simde/x86/avx2.h> or <simde/x86/sse2.h>
   The declarations include no SIMDe header. Define PBD_NO_SIMD and
   PBD_SIMD_WIDTH before the first #include of any of the headers, alike
   in every file of a program. In strict C (-std=c99, c11) SIMDe's AVX-512
   header includes <complex.h> (for its SVML part); the implementations
   then take back its macros I and complex, so that a variable of yours
   named I still compiles (make check-headers), unless they were defined
   before: include <complex.h> before an implementation to use them. */
#if defined(PBD_SIMD_WIDTH) && PBD_SIMD_WIDTH != 4 && PBD_SIMD_WIDTH != 8 && PBD_SIMD_WIDTH != 16
#error "pbd.h: PBD_SIMD_WIDTH must be 4, 8 or 16"
#endif
#if !defined(PBD_NO_SIMD) && defined(__has_include)
#if __has_include(<simde/x86/sse2.h>)
#define PBD__HAVE_SIMDE 1
#endif
#endif
#if defined(PBD__HAVE_SIMDE) && defined(__AVX512F__) && (!defined(PBD_SIMD_WIDTH) || PBD_SIMD_WIDTH >= 16)
#define PBD_SIMD_LANES 16
#define PBD_SIMD_AVX512 1
#define PBD_SIMD_SIMDE_H <simde/x86/avx512.h>
#elif defined(PBD__HAVE_SIMDE) && defined(__AVX2__) && (!defined(PBD_SIMD_WIDTH) || PBD_SIMD_WIDTH >= 8)
#define PBD_SIMD_LANES 8
#define PBD_SIMD_AVX2 1
#define PBD_SIMD_SIMDE_H <simde/x86/avx2.h>
#elif defined(PBD__HAVE_SIMDE)
#define PBD_SIMD_LANES 4
#if defined(__ARM_NEON) || defined(__ARM_NEON__)
#define PBD_SIMD_NEON 1
#elif defined(__wasm_simd128__) /* emscripten with -msimd128: SIMDe maps SSE onto WASM SIMD128 */
#define PBD_SIMD_WASM 1
#else
#define PBD_SIMD_SSE 1
#endif
#define PBD_SIMD_SIMDE_H <simde/x86/sse2.h>
#else
#define PBD_SIMD_LANES 1
#endif
#ifndef PBD_SIMD_AVX512
#define PBD_SIMD_AVX512 0
#endif
#ifndef PBD_SIMD_AVX2
#define PBD_SIMD_AVX2 0
#endif
#ifndef PBD_SIMD_SSE
#define PBD_SIMD_SSE 0
#endif
#ifndef PBD_SIMD_NEON
#define PBD_SIMD_NEON 0
#endif
#ifndef PBD_SIMD_WASM
#define PBD_SIMD_WASM 0
#endif
/* The same at run time, for every header's kernels: the instruction set,
   "scalar", "sse", "avx2", "avx512", "neon" or "wasm", and the width in floats,
   PBD_SIMD_LANES (1 for scalar). */
PBDDEF const char *pbd_simd_path(void);
PBDDEF int pbd_simd_width(void);
/* Threads OpenMP would use (1 without OpenMP). */
PBDDEF int pbd_max_threads(void);

// ==== results ===============================================================

typedef enum pbd_result {
    PBD_OK = 0,
    PBD_ERROR_NULL_POINTER = -1,       /* a required pointer is NULL */
    PBD_ERROR_INVALID_ARGUMENT = -2,   /* a count, flag or parameter is out of its range */
    PBD_ERROR_INDEX_OUT_OF_RANGE = -3, /* a particle, group, object or collider index does not exist */
    PBD_ERROR_NOT_FINITE = -4,         /* NaN or Inf in the input, or made by a step (which is undone) */
    PBD_ERROR_NEGATIVE_MASS = -5,      /* masses and densities must be >= 0 (and see PBD_MIN_MASS) */
    PBD_ERROR_DEGENERATE = -6,         /* zero-length edge, zero-area triangle, flat tet, ... */
    PBD_ERROR_INVALID_TIME_STEP = -7,  /* dt outside [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] = [1e-6, 1] s, or NaN */
    PBD_ERROR_OVERFLOW = -8,           /* sizes whose product overflows */
    PBD_ERROR_OUT_OF_MEMORY = -9,
    PBD_ERROR_BAD_SNAPSHOT = -10,   /* a buffer that is not a snapshot of this version */
    PBD_ERROR_NOT_CLOSED = -11,     /* a mesh that must be closed and consistently oriented is not */
    PBD_ERROR_INVALID_HANDLE = -12, /* a handle that names nothing here: 0, removed, or a slot this world lacks */
    PBD_ERROR_UNSUPPORTED = -13     /* not on this machine or in this build (a GPU world): see THE GPU */
} pbd_result;

/* A short constant string for a result code ("PBD_ERROR_DEGENERATE: ..."). */
PBDDEF const char *pbd_result_string(pbd_result r);

typedef void (*pbd_log_fn)(void *user, pbd_result r, const char *message);

/* The message of the last failing call on this thread ("" if none), with
   a world or without one: the only message of the calls that have no world
   (pbd_world_create, pbd_sm.h's summation plans and mesh tools,
   pbd_upsample.h's models, training sets and subdivision; see their
   manuals). Thread-local, so threads do not overwrite each other's
   message; pbd_world_last_error keeps a world's own last message. */
PBDDEF const char *pbd_last_error(void);

// ==== meshes ================================================================
/* Generated meshes for examples and tests; free with pbd_mesh_free. Counts
   are in vertices / triangles / tetrahedra; index arrays are 3 or 4 ints per
   element; positions 3 floats per vertex. Triangles are counter-clockwise
   seen from outside (closed meshes) or from +(u x v) (grids). */
typedef struct pbd_mesh {
    float *positions;
    int vertex_count;
    int *triangles; /* surface triangles (the boundary of a tet mesh) */
    int triangle_count;
    int *tets; /* tetrahedra (pbd_mesh_tet_box only), positive volume */
    int tet_count;
} pbd_mesh;

/* nx * ny vertices at origin + u*i/(nx-1) + v*j/(ny-1), index j*nx + i,
   2 (nx-1)(ny-1) triangles with alternating diagonals. nx, ny >= 2. */
PBDDEF pbd_result pbd_mesh_grid(int nx, int ny, const float *origin, const float *u, const float *v, pbd_mesh *out);
/* A box [lo, hi] of nx*ny*nz nodes (each >= 2), 5 tets per cell in
   alternating orientation (conforming), plus its surface triangles. */
PBDDEF pbd_result pbd_mesh_tet_box(int nx, int ny, int nz, const float *lo, const float *hi, pbd_mesh *out);
/* An icosphere: 20 * 4^subdivisions triangles, closed, outward. 0..7. */
PBDDEF pbd_result pbd_mesh_sphere(int subdivisions, const float *centre, float radius, pbd_mesh *out);
PBDDEF void pbd_mesh_free(pbd_mesh *m);

// ==== world =================================================================

typedef struct pbd_world pbd_world;

/* Handles (see HANDLES in the manual): everything a world owns is named by
   a typed struct of one uint32_t, id. id 0 is no handle; otherwise its low
   PBD_HANDLE_SLOT_BITS bits are the slot + 1 and the high bits the slot's
   generation, which a removal advances, so a handle kept after its thing
   was removed is refused with PBD_ERROR_INVALID_HANDLE instead of naming
   the thing that takes the slot next. No world is in the id: another
   world's handle is checked against this world's slots (refused unless
   the same slot holds a live thing of the same generation here, which it
   then names). */
#define PBD_HANDLE_SLOT_BITS 22
typedef struct pbd_group {
    uint32_t id;
} pbd_group; /* a constraint group */
typedef struct pbd_object {
    uint32_t id;
} pbd_object; /* a cloth, soft body or balloon */
typedef struct pbd_collider {
    uint32_t id;
} pbd_collider; /* analytic, mesh or grid */
typedef struct pbd_fluid {
    uint32_t id;
} pbd_fluid; /* a block of fluid */
typedef struct pbd_lra {
    uint32_t id;
} pbd_lra; /* long range attachments */
typedef struct pbd_strain_limit {
    uint32_t id;
} pbd_strain_limit; /* triangle / edge limits */
typedef struct pbd_strands {
    uint32_t id;
} pbd_strands; /* strands, hair */
typedef struct pbd_tearing {
    uint32_t id;
} pbd_tearing; /* a tearable cloth */
typedef struct pbd_damping_cluster {
    uint32_t id;
} pbd_damping_cluster; /* damped particle list */
typedef struct pbd_surface {
    uint32_t id;
} pbd_surface; /* self-collision surface */
typedef struct pbd_plugin {
    uint32_t id;
} pbd_plugin; /* an extension's callbacks */

typedef struct pbd_allocator {
    void *(*alloc)(void *user, size_t size);
    void (*free)(void *user, void *ptr);
    void *user;
} pbd_allocator;

typedef enum pbd_solver_mode {
    PBD_SOLVER_XPBD = 0, /* compliance form (default) */
    PBD_SOLVER_PBD = 1   /* stiffness form, survey 3.3 */
} pbd_solver_mode;

/* Where a world runs (see THE GPU in the manual and pbd_cuda.cu). */
typedef enum pbd_device {
    PBD_DEVICE_AUTO = 0, /* the GPU when the program has pbd_cuda.cu (PBD_CUDA) and the
                            machine a CUDA device, else the CPU; the choice is logged */
    PBD_DEVICE_GPU = 1,  /* the GPU, or pbd_world_create fails with PBD_ERROR_UNSUPPORTED
                            (or PBD_ERROR_OUT_OF_MEMORY) and a message naming why */
    PBD_DEVICE_CPU = 2   /* the CPU */
} pbd_device;

typedef struct pbd_world_desc {
    float gravity[3];              /* m/s^2, default (0, -9.81, 0) */
    int substeps;                  /* default 4, 1..1000 */
    float reference_dt;            /* s: substeps is the count for a step this long; a
                                      longer step takes proportionally more, a shorter
                                      one fewer (at least 1; see pbd_world_step_substeps);
                                      default 1/60, 0: a fixed count */
    int iterations;                /* per substep, default 4, 1..1000 */
    pbd_solver_mode mode;          /* default PBD_SOLVER_XPBD */
    int stiffness_correction;      /* PBD mode: use k' (survey 3.3); default 1 */
    float point_damping;           /* 1/s: v *= exp(-point_damping h); default 0 (per object: pbd_object_set_drag) */
    int max_contacts_per_particle; /* default 4, 1..64; a particle near more colliders keeps
                                      those its predicted position is deepest behind */
    float granular_cfl;            /* grains (particles with particle contact in no object
                                      or fluid) of radius r make a step take at least the
                                      substeps that keep h sqrt(|g| / r) <= granular_cfl
                                      (see pbd_world_step_substeps); default 0.033; 0: off;
                                      grains of radius 0 (they touch nothing) do not count */
    pbd_allocator allocator;       /* optional: both functions or neither */
    pbd_log_fn log;                /* optional: called with every error (and with
                                      PBD_OK for the device an auto world got) */
    void *log_user;
    pbd_device device; /* default PBD_DEVICE_AUTO */
} pbd_world_desc;

PBDDEF pbd_world_desc pbd_world_desc_default(void);
PBDDEF pbd_result pbd_world_create(const pbd_world_desc *desc, pbd_world **out);
PBDDEF void pbd_world_destroy(pbd_world *w);
/* The message of the last error in this world ("" if none). */
PBDDEF const char *pbd_world_last_error(const pbd_world *w);

PBDDEF pbd_result pbd_world_set_gravity(pbd_world *w, const float *gravity);
PBDDEF pbd_result pbd_world_set_solver(pbd_world *w, pbd_solver_mode mode, int substeps, int iterations);
/* pbd_world_desc.reference_dt: 0 or in [PBD_MIN_TIME_STEP,
   PBD_MAX_TIME_STEP] s (see pbd_world_step_substeps). */
PBDDEF pbd_result pbd_world_set_reference_dt(pbd_world *w, float reference_dt);
PBDDEF pbd_result pbd_world_set_stiffness_correction(pbd_world *w, int on);
PBDDEF pbd_result pbd_world_set_point_damping(pbd_world *w, float point_damping);
PBDDEF pbd_result pbd_world_get_solver(const pbd_world *w, pbd_solver_mode *mode, int *substeps, int *iterations);
PBDDEF pbd_result pbd_world_get_jacobi(const pbd_world *w, int *on, float *relaxation);
/* The time the world has simulated: the sum of its steps' dt but for a
   short step carried over to the next (pbd_world_step), at most an
   eighth of the reference substep behind. */
PBDDEF double pbd_world_time(const pbd_world *w);

/* Averaged Jacobi iterations instead of Gauss-Seidel (what GPUs use, and a
   reference for GS's convergence): each particle moves by `relaxation`
   times the average of its corrections. relaxation in (0, 2]; default off.
   It converges far more slowly than Gauss-Seidel: a 32 x 32 1 m cloth
   hanging from two corners, 4 x 4, 1/60 s, worst edge at rest (6 s):
   with its tethers (the default) GS 0.07%, Jacobi 0.15% at relaxation
   1, 0.11% at 2; with tethers = 0 GS 99%, Jacobi 876% / 597% / 455% at
   relaxation 1 / 1.5 / 2 (20 iterations at 1: 197%). So keep the tethers,
   and a relaxation near 2. */
PBDDEF pbd_result pbd_world_set_jacobi(pbd_world *w, int on, float relaxation);
/* Execution choices that never change the result bits: the SIMD kernels
   (on by default where compiled in; off runs the scalar reference path)
   and the number of OpenMP threads. threads 0 (default): serial for small
   worlds (a barrier costs microseconds); otherwise each substep runs on
   OpenMP's count or fewer threads, whichever the substeps' timings show
   to be faster on this machine under its current load (see THREADS ON A
   BUSY MACHINE); threads 1..1024: exactly that many, whatever the size
   and the load. */
PBDDEF pbd_result pbd_world_set_simd(pbd_world *w, int on);
PBDDEF pbd_result pbd_world_set_threads(pbd_world *w, int threads);
/* The number of threads the last substep ran on (0 before the first step):
   under the default policy, what it chose for this machine and load;
   stepped from inside a parallel region of yours, the team OpenMP nested
   (1 unless nesting is on). */
PBDDEF int pbd_world_thread_team(const pbd_world *w);
/* The device the world runs on: PBD_DEVICE_GPU or PBD_DEVICE_CPU (also for
   w NULL). */
PBDDEF pbd_device pbd_world_device(const pbd_world *w);
/* A GPU world's positions in device memory, 4 floats per particle (x y z,
   w the inverse mass), for a renderer that draws them without a copy
   (CUDA-OpenGL interop): valid until the next call that changes the
   world; current after every step. NULL for a CPU world. */
PBDDEF const float *pbd_world_device_positions(pbd_world *w);

/* The valid time steps of pbd_world_step (s). Below 1 us the substep
   h = dt / substeps (substeps up to 1000) would go below 1e-9 s, where
   compliance / h^2, 1 / h and the velocities (p - x) / h of rounding-size
   motions leave float range; above 1 s a step is no longer a simulation
   step (a game that lost a second should clamp its frame time). A long
   step takes more substeps (pbd_world_desc.reference_dt: a 0.25 s step
   60 at the defaults, 15x the cost of a 1/60 s one), and a long step
   followed by one of microseconds still throws cloth off (CONVENTIONS,
   "Time steps"). */
#define PBD_MIN_TIME_STEP 1e-6f
#define PBD_MAX_TIME_STEP 1.0f

/* The valid particle masses (kg): 0 (a pinned particle) or a mass in
   [PBD_MIN_MASS, PBD_MAX_MASS] = [1e-12, 1e12] kg, wherever a mass is given
   or made (pbd_particles_desc, pbd_particle_set_mass, a cloth's, soft
   body's or hair's masses and the vertex masses its density makes, a
   fluid's rest_density * spacing^3); anything else is refused: negative
   with PBD_ERROR_NEGATIVE_MASS, NaN or infinite with PBD_ERROR_NOT_FINITE,
   outside the range with PBD_ERROR_INVALID_ARGUMENT (a fluid's particle
   mass with PBD_ERROR_DEGENERATE, as before the bound). A cloth's or soft
   body's density must be > 0 when it has no masses: pin vertices with
   pbd_particle_pin or masses of 0; and every vertex must then be in a
   triangle (a soft body's: in a tetrahedron), else the mesh is refused
   with PBD_ERROR_INVALID_ARGUMENT naming the vertex (a density would give
   it mass 0, a pin nobody asked for). Why: below about
   3e-39 kg the inverse mass 1 / m the solver runs on is infinite, and
   products of inverse masses and squared gradients leave float range long
   before; above 1e12 kg a particle is no particle (measured: a 1 kg cloth
   vertex set to 1e13 kg still steps, 1e14 kg makes its bending constraints
   blow up within a second). What float cannot hold either is a ratio:
   masses that differ by more than about 1e11 in one object (a 1e12 kg
   vertex among 1 kg ones, or 1e10 kg among 1e-2 kg) make its constraints
   unconverged: an 8 x 8 cloth without tethers whose one vertex weighs
   1e12 kg steps without error while that vertex falls away and stretches
   its edges to 75 times their length (its tethers, the default, hold
   it). Where the blow-up reaches infinity or NaN the step fails with
   PBD_ERROR_NOT_FINITE, whose message then names the object's lightest
   and heaviest particles. */
#define PBD_MIN_MASS 1e-12f
#define PBD_MAX_MASS 1e12f
/* The largest particle radius (m): pbd_particles_desc.radius,
   pbd_particle_set_radius, a cloth's thickness, a soft body's and hair's
   radius, a fluid's spacing and radius (its kernel radius is at most 4
   spacings). The hash grid's cells are as wide as the largest particle
   (or fluid kernel); a 20 m particle is no particle, and a fluid of 1e6 m
   spacing is a unit error (mm for m): refused with
   PBD_ERROR_INVALID_ARGUMENT. Colliders are shapes, not particles, and
   have no such bound; but a mesh collider's triangles are measured in
   float: keep them under about 50 km across (a ground of two triangles
   60 km wide holds a particle, 200 km wide lets it through) and make a
   bigger ground of more triangles, or a plane or box collider. */
#define PBD_MAX_RADIUS 10.0f
/* The largest coordinate (m) of a particle position given to the world:
   |x|, |y| and |z| of pbd_particles_desc.positions,
   pbd_particles_set_positions, pbd_particle_set_kinematic_target, the
   target points of attachments, a
   cloth's, soft body's or balloon's vertices, hair's and strands' roots
   and hair's pose (pbd_hair_desc.position, pbd_strands_set_transform: the
   pose and the roots it places; a hair's grown particles too) (a fluid's
   positions go through pbd_particles_desc) at most 1e6 m, else
   PBD_ERROR_INVALID_ARGUMENT. Why: at 1e6 m a float's step is 6 cm, and
   from 1e7 m on a particle cannot move at all (CONVENTIONS, Units); the
   squared distances and grid cells computed from such positions leave
   float and int range long before 1e38 m, a position the world took
   before this bound (its particle never moved). Colliders are shapes, not
   particles: their poses have no such bound, their sizes (an analytic
   collider's radius, half_height, half_extents and rounding) are at most
   PBD_MAX_COORDINATE (a sphere of radius 3e38 was taken, and then every
   step failed: its distances left float's range). Gravity's components
   are at most PBD_MAX_GRAVITY = 1e6 m/s^2 in size (a gravity of 1e30 was
   taken, and every step failed). Velocities have no bound but being
   finite: a huge one fails its step when it carries a particle out of
   float's range (PBD_ERROR_NOT_FINITE, rolled back), or carries it far
   beyond PBD_MAX_COORDINATE; keep them physical. */
#define PBD_MAX_COORDINATE 1e6f
#define PBD_MAX_GRAVITY 1e6f

/* Advance by dt seconds (substeps x iterations as in the desc; a step
   longer than reference_dt, a world with fluids, grains or a pinned cloth
   takes more substeps: see pbd_world_step_substeps).
   dt outside [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] (or NaN) is refused
   with PBD_ERROR_INVALID_TIME_STEP and changes nothing. A step shorter
   than an eighth of the reference substep (reference_dt / substeps / 8:
   0.52 ms at the defaults), with what earlier such steps carried, is
   carried over: it returns PBD_OK and changes nothing but the carry
   (snapshots keep it), and the next step simulates dt plus the carry (a
   frame-time remainder or a burst of tiny steps: one 10 us step jolted a
   resting cloth at 11 m/s; see "Time steps"). A fixed substep count
   (reference_dt 0) never carries. */
PBDDEF pbd_result pbd_world_step(pbd_world *w, float dt);
/* The substeps pbd_world_step(w, dt) takes: the largest of
   - ceil(substeps dt / reference_dt) (pbd_world_desc, default 1/60 s;
     0.1% slack: a dt of 0.016667 is 1/60), at least 1: every step keeps
     about the substep of a reference step, at most reference_dt /
     substeps, so a long frame (a hitch, 30 Hz) is simulated as well as a
     60 Hz one at its cost, and a short one (120 Hz, a jittery frame time)
     takes the same substep as far as whole substeps allow, which keeps a
     resting cloth or tank from jolting when the frame time changes
     (CONVENTIONS, "Time steps"): 1 substep up to 1/240 s, 2 at 1/120 s, 3
     at 10 ms, 4 at 1/60 s, 8 at 1/30, 60 at 0.25, 240 at 1 s.
     reference_dt = 0 makes substeps a fixed count at any dt.
   - what the fluids, grains and pinned cloths need:
     pbd_fluid_desc.gravity_cfl, pbd_world_desc.granular_cfl,
     pbd_cloth_desc.gravity_cfl;
   0 when w is NULL or dt is not finite and > 0.
   Every rule is capped at 1000 substeps, silently:
   a step that would need more takes 1000, and its substep is longer than
   the bound wants. Measured at dt = 1 s: a fluid of 2.7 mm spacing (3 mm:
   954), a 129 x 129 grid cloth of 1 m pinned by its top row (126 x 126:
   984); at 1/60 s they take 17. Compare the count with 1000 to tell.
   A step that pbd_world_step carries over takes none, and the step after
   it the count of its dt plus the carry. */
PBDDEF int pbd_world_step_substeps(const pbd_world *w, float dt);

/* Save / restore the complete simulation state (particles with their
   particle-collision and fluid switches, constraint groups with their
   multipliers, objects, colliders with the meshes of mesh colliders (their
   BVHs and grids are rebuilt on restore), collision surfaces with their
   current candidates, fluids and particle friction, strain limits,
   strands, tearing and damping clusters, parameters, time; the hash grid
   and neighbour lists are scratch, built anew at every step's first substep), and the own
   state of every plugin that saves one (pbd_sm.h's bodies, oriented
   particles, surface volumes and cloths: section "plugins", PLUGIN STATE
   IN SNAPSHOTS), so a world rebuilt with the same plugins and restored
   goes on exactly as the saved one would have.
   Callbacks (log, acceleration field) and the allocator are not part of
   it. A restored world stepped again gives bit-identical results. The
   multipliers are zero between steps (see CONVENTIONS, non-finite steps).
   A corrupt or unfitting snapshot fails with PBD_ERROR_BAD_SNAPSHOT and
   changes nothing; snapshots of version 7 (before plugin states), 8
   (before objects' drags: they restore with drag 0) and 9 (before the
   world's reference_dt: they restore with 0, a fixed substep count)
   restore too, and 10 (before the world's granular_cfl: they restore
   with 0, no grain bound). Positions are restored as saved, also beyond
   PBD_MAX_COORDINATE (where a step may have carried a particle; the
   bound is on what you give the world), so a forged snapshot with a
   valid checksum may hold such positions too. */
PBDDEF size_t pbd_world_snapshot_size(const pbd_world *w);
PBDDEF pbd_result pbd_world_save(const pbd_world *w, void *buffer, size_t size);
PBDDEF pbd_result pbd_world_restore(pbd_world *w, const void *buffer, size_t size);

// ==== particles =============================================================

typedef struct pbd_range {
    int first, count;
} pbd_range;

typedef struct pbd_particles_desc {
    const float *positions;  /* count*3, required */
    const float *velocities; /* count*3, optional (zero) */
    const float *masses;     /* count, optional; 0 means pinned */
    float mass;              /* used when masses == NULL; default 1 */
    float radius;            /* collision radius, default 0.01 */
    int count;
} pbd_particles_desc;

PBDDEF pbd_particles_desc pbd_particles_desc_default(void);
PBDDEF pbd_result pbd_add_particles(pbd_world *w, const pbd_particles_desc *desc, pbd_range *out);
/* Removes particles that pbd_add_particles added (an object's go with
   pbd_remove_object, a fluid's with pbd_remove_fluid). Refused, with
   nothing changed, while a group, tether set, strain limit, strand set,
   tearing, damping cluster, collision surface or plugin uses one of them:
   the message names it. A removed particle keeps its slot (indices do not
   move) with inverse mass 0 at the origin until an add reuses it; adds
   take the first run of free slots that holds them, and free slots at the
   end leave the world (pbd_world_particle_count shrinks), except below a
   live plugin's particle_end: those leave with the plugin. */
PBDDEF pbd_result pbd_remove_particles(pbd_world *w, pbd_range particles);
PBDDEF int pbd_world_particle_count(const pbd_world *w);
/* 4 floats per particle: x, y, z, inverse mass (0: pinned or kinematic).
   Valid until particles are added or removed or the world is
   restored/destroyed. On a GPU world this call fetches the device's
   particles (once per step): call it again after each step. */
PBDDEF const float *pbd_world_positions(const pbd_world *w);
/* 4 floats per particle: vx, vy, vz, 0. */
PBDDEF const float *pbd_world_velocities(const pbd_world *w);
/* Copy 3 floats per particle out of / into the world. */
PBDDEF pbd_result pbd_particles_get_positions(const pbd_world *w, pbd_range r, float *out);
PBDDEF pbd_result pbd_particles_set_positions(pbd_world *w, pbd_range r, const float *in);
PBDDEF pbd_result pbd_particles_get_velocities(const pbd_world *w, pbd_range r, float *out);
PBDDEF pbd_result pbd_particles_set_velocities(pbd_world *w, pbd_range r, const float *in);
/* Mass 0 pins the particle and a mass > 0 frees it again; a particle held
   by pbd_particle_pin or as kinematic stays held whatever its mass (the
   mass is kept for when pbd_particle_unpin or pbd_particle_set_kinematic
   frees it). */
PBDDEF pbd_result pbd_particle_set_mass(pbd_world *w, int particle, float mass);
PBDDEF pbd_result pbd_particle_get_mass(const pbd_world *w, int particle, float *mass);
PBDDEF pbd_result pbd_particle_set_radius(pbd_world *w, int particle, float radius);
/* Pin keeps the mass so that unpin restores it; unpinning a particle of
   mass 0 is an error. */
PBDDEF pbd_result pbd_particle_pin(pbd_world *w, int particle);
PBDDEF pbd_result pbd_particle_unpin(pbd_world *w, int particle);
/* A kinematic particle is moved by the user: pbd_particle_set_kinematic_target gives
   the position it reaches at the end of the next step (linearly over the
   substeps; its velocity follows). It pushes others but is not pushed. */
PBDDEF pbd_result pbd_particle_set_kinematic(pbd_world *w, int particle, int kinematic);
PBDDEF pbd_result pbd_particle_set_kinematic_target(pbd_world *w, int particle, const float *target);
/* *kinematic: 1 while the particle is kinematic, else 0. */
PBDDEF pbd_result pbd_particle_get_kinematic(const pbd_world *w, int particle, int *kinematic);
/* pbd_particle_pin and pbd_particle_set_kinematic for every particle of a
   range at once, with one rebuild of a cloth's tethers (pbd_object_tethers)
   instead of one per particle: a cloth's top row, a cape's shoulders. The
   same state as the calls one by one; on error nothing changed. */
PBDDEF pbd_result pbd_particles_pin(pbd_world *w, pbd_range r);
PBDDEF pbd_result pbd_particles_set_kinematic(pbd_world *w, pbd_range r, int kinematic);

/* A user acceleration (wind, fields) added to gravity for every dynamic
   particle once per substep. It may be called from several threads at once
   (for different particles) when built with OpenMP. NULL removes it. On a
   GPU world it runs on the host, one particle after the other: each
   substep the positions and velocities come down and the accelerations go
   up (48 bytes a particle; see THE GPU). A NaN or infinite component of
   out_acceleration counts as 0 (that particle gets gravity alone in that
   direction, with no error), so a field cannot make a step non-finite by
   NaN alone; huge finite values can (PBD_ERROR_NOT_FINITE, rolled back),
   or, while they stay finite, carry particles far beyond
   PBD_MAX_COORDINATE (1e38 m/s^2 for one step: 6e32 m, every step
   PBD_OK, an audit): only what you give the world is bounded, not where
   a step takes it. Keep accelerations physical. */
typedef void (*pbd_acceleration_fn)(void *user, int particle, const float *x, const float *v, double time,
                                    float *out_acceleration);
PBDDEF pbd_result pbd_world_set_acceleration_field(pbd_world *w, pbd_acceleration_fn fn, void *user);

// ==== constraints (stateless) ===============================================
/* Constraint functions C(x) with analytic gradients. Positions are packed
   as n*3 floats (p0.x p0.y p0.z p1.x ...); `grad` (n*3 floats) may be NULL.
   They can be used with your own particle storage; the world uses the same
   code. Degenerate configurations (zero-length edge, zero-area triangle)
   return a zero gradient, which the projection treats as "skip". */

/* |p0 - p1| - rest (survey 3.4.1). */
PBDDEF float pbd_constraint_distance(const float *p, float rest, float *grad);
/* Signed dihedral angle minus rest angle (survey 3.4.2). Shared edge p0-p1,
   wings p2 (triangle p0 p2 p1) and p3 (triangle p0 p1 p3). The angle is
   measured with atan2 (robust at 0 and pi, unlike acos), gradients as in
   Bridson et al. 2003; the difference is wrapped to (-pi, pi]. */
PBDDEF float pbd_constraint_dihedral(const float *p, float rest_angle, float *grad);
/* The signed dihedral angle of four points in the order above. */
PBDDEF float pbd_dihedral_angle(const float *p);
/* Isometric bending (Bergou et al. 2006, "A quadratic bending model for
   inextensible surfaces"), same vertex order as the dihedral constraint.
   `rest` holds 6 floats made by pbd_isometric_bending_rest() from the rest
   positions: the cotangent weights K (4), s = sqrt(3 / (A0 + A1)) and the
   rest curvature |L0|. C = s (|L| - |L0|) with L = sum_i K_i p_i, so that
   C^2 / 2 is the quadratic bending energy (exact for flat rest states,
   the model's assumption; for curved rest states the magnitude of the rest
   curvature is kept). */
PBDDEF float pbd_constraint_isometric_bending(const float *p, const float *rest, float *grad);
PBDDEF pbd_result pbd_isometric_bending_rest(const float *rest_positions, float *rest_out6);
/* Triangle area minus rest area (survey 3.4.4). */
PBDDEF float pbd_constraint_area(const float *p, float rest_area, float *grad);
/* Signed tetrahedron volume (p1-p0)x(p2-p0).(p3-p0)/6 minus rest (survey 3.4.4). */
PBDDEF float pbd_constraint_tet_volume(const float *p, float rest_volume, float *grad);
/* Point q = p0 above triangle p1 p2 p3 by thickness h (survey 3.4.3):
   C = (q - p1) . n - h, n the unit normal of (p2-p1)x(p3-p1). Unilateral.
   For a point that must stay below, pass the triangle as p1 p3 p2. A
   group of them (pbd_add_constraints) keeps each point on the side it
   is on when the group is added (survey 3.4.3): a point below its
   triangle then gets the triangle reversed, so its C and
   pbd_group_error are those of the reversed triangle, and it is kept
   below (a point exactly in the plane counts as above). For a one-sided
   barrier, add the group while every point is on the side you want. */
PBDDEF float pbd_constraint_point_triangle(const float *p, float thickness, float *grad);
/* Closed triangle mesh (survey 3.4.5): C = V(p) - pressure * rest_volume,
   V = sum over triangles (a x b) . c / 6. `triangles` index into p
   (vertex_count points); grad has vertex_count*3 floats. */
PBDDEF float pbd_constraint_mesh_volume(const float *p, int vertex_count, const int *triangles, int triangle_count,
                                        float pressure, float rest_volume, float *grad);
/* Particle p0 attached to `target`: C = |p0 - target| when max_distance is
   0 (bilateral), else C = max_distance - |p0 - target| (unilateral). */
PBDDEF float pbd_constraint_attachment(const float *p, const float *target, float max_distance, float *grad);

/* One XPBD projection (Macklin et al. 2016, eq. 18 with survey eqs. 2-3):
     dlambda = (-C - alpha~ lambda) / (sum_i w_i |grad_i|^2 + alpha~),
     alpha~ = compliance / h^2,  dp_i = w_i grad_i dlambda,  lambda += dlambda.
   n particles, grad and dp n*3 floats, inv_mass n floats. Returns dlambda
   (0 when the gradient vanishes or all particles are fixed). With
   compliance 0 this is the classic PBD projection with k = 1. */
PBDDEF float pbd_xpbd_project(int n, float C, const float *grad, const float *inv_mass, float compliance, float h,
                              float *lambda, float *dp);
/* The PBD stiffness correction of survey 3.3: 1 - (1 - k)^(1/iterations). */
PBDDEF float pbd_pbd_stiffness(float k, int iterations);

// ==== groups ================================================================
/* A constraint group: constraints of one type with one compliance, solved
   in the order of their slots (see pbd_remove_group). */

typedef enum pbd_constraint_type {
    PBD_CONSTRAINT_DISTANCE = 0,          /* 2 particles; rest = length */
    PBD_CONSTRAINT_BENDING_DIHEDRAL = 1,  /* 4 (edge p0 p1, wings p2 p3); rest = angle */
    PBD_CONSTRAINT_BENDING_ISOMETRIC = 2, /* 4, same order; rest from positions only */
    PBD_CONSTRAINT_AREA = 3,              /* 3; rest = area */
    PBD_CONSTRAINT_TET_VOLUME = 4,        /* 4; rest = signed volume */
    PBD_CONSTRAINT_POINT_TRIANGLE = 5,    /* 4 (q, p1, p2, p3); rest = thickness; unilateral, on
                                             the side q is on when the group is added */
    PBD_CONSTRAINT_TYPE_SIMPLE_COUNT = 6,
    PBD_CONSTRAINT_ATTACHMENT = 6,  /* see pbd_add_attachments */
    PBD_CONSTRAINT_MESH_VOLUME = 7, /* see pbd_add_mesh_volume */
    PBD_CONSTRAINT_TYPE_COUNT = 8
} pbd_constraint_type;

typedef struct pbd_constraints_desc {
    pbd_constraint_type type; /* one of the first six types */
    int count;                /* number of constraints, > 0 */
    const int *indices;       /* count * arity particle indices (distinct per constraint) */
    const float *rest;        /* optional: count rest values; NULL measures them from
                                 the current positions (point-triangle: `thickness`) */
    float thickness;          /* point-triangle rest when rest == NULL */
    float compliance;         /* XPBD, >= 0; default 0 (rigid) */
    float stiffness;          /* PBD mode, in [0, 1]; default 1 */
    int unilateral;           /* distance only: a tether, C = rest - |p0 - p1| >= 0 */
} pbd_constraints_desc;

PBDDEF pbd_constraints_desc pbd_constraints_desc_default(void);
PBDDEF int pbd_constraint_arity(pbd_constraint_type type); /* 0 for variable/invalid */
PBDDEF pbd_result pbd_add_constraints(pbd_world *w, const pbd_constraints_desc *desc, pbd_group *out);

typedef struct pbd_attachments_desc {
    int count;
    const int *particles;        /* count particles to attach */
    const int *target_particles; /* either count target particles (usually kinematic) */
    const float *target_points;  /* or count*3 world points (exactly one of the two) */
    float max_distance;          /* 0: held at the target; > 0: free within this radius */
    float compliance;            /* default 0 */
    float stiffness;             /* default 1 */
} pbd_attachments_desc;

PBDDEF pbd_attachments_desc pbd_attachments_desc_default(void);
PBDDEF pbd_result pbd_add_attachments(pbd_world *w, const pbd_attachments_desc *desc, pbd_group *out);
/* Move the world point of attachment `index` of a point-attachment group. */
PBDDEF pbd_result pbd_group_set_attachment_target(pbd_world *w, pbd_group g, int index, const float *point);

typedef struct pbd_mesh_volume_desc {
    const int *triangles; /* closed, consistently oriented mesh over world particles */
    int triangle_count;
    float pressure;   /* overpressure factor k_pressure, > 0; default 1 */
    float compliance; /* default 0 */
    float stiffness;  /* default 1 */
} pbd_mesh_volume_desc;

PBDDEF pbd_mesh_volume_desc pbd_mesh_volume_desc_default(void);
PBDDEF pbd_result pbd_add_mesh_volume(pbd_world *w, const pbd_mesh_volume_desc *desc, pbd_group *out);
/* A group of pbd_add_constraints, _attachments or _mesh_volume (an
   object's groups go with pbd_remove_object). Its slot goes to the next
   group added, which is solved in its place: groups are solved in the
   order of their slots. */
PBDDEF pbd_result pbd_remove_group(pbd_world *w, pbd_group group);

PBDDEF int pbd_world_group_count(const pbd_world *w);
/* The index-th group (0 <= index < pbd_world_group_count, in slot order),
   id 0 out of range: for walking every group (pbd_world_object and
   pbd_world_collider walk objects and colliders the same way). */
PBDDEF pbd_group pbd_world_group(const pbd_world *w, int index);
PBDDEF pbd_result pbd_group_info(const pbd_world *w, pbd_group g, pbd_constraint_type *type, int *count);
/* The group's graph colouring (survey 3.8): no two constraints of a colour
   share a particle, so a colour is solved in parallel; when *overflow
   (optional) is 1 the last colour holds what did not fit in 63 colours and
   is solved serially. sizes receives up to max colour sizes, *count the
   number of colours. */
PBDDEF pbd_result pbd_group_colors(const pbd_world *w, pbd_group g, int *sizes, int max, int *count, int *overflow);
/* The particles of the constraints of one colour, `arity` per constraint
   (attachments: 2, the second -1 for a world point; mesh volumes have no
   colours). Writes at most max constraints (arity ints each); *count
   receives the colour's constraint count. */
PBDDEF pbd_result pbd_group_color_particles(const pbd_world *w, pbd_group g, int color, int *out, int max, int *count);
PBDDEF pbd_result pbd_group_set_compliance(pbd_world *w, pbd_group g, float compliance);
PBDDEF pbd_result pbd_group_set_stiffness(pbd_world *w, pbd_group g, float stiffness);
PBDDEF pbd_result pbd_group_set_enabled(pbd_world *w, pbd_group g, int enabled);
/* Mesh-volume groups: the overpressure factor. */
PBDDEF pbd_result pbd_group_set_pressure(pbd_world *w, pbd_group g, float pressure);
/* Current constraint values: mean and max of |C| over the group
   (unilateral constraints count only when violated). */
PBDDEF pbd_result pbd_group_error(const pbd_world *w, pbd_group g, float *mean_abs, float *max_abs);
/* Volume of a mesh-volume group's mesh at the current positions. */
PBDDEF pbd_result pbd_group_mesh_volume(const pbd_world *w, pbd_group g, float *volume);

// ==== objects ===============================================================
/* Builders add particles and the groups of a whole object and hand back
   its handle; pbd_object_get_parts tells what it is made of. */

typedef enum pbd_bending_model {
    PBD_BENDING_NONE = 0,
    PBD_BENDING_DIHEDRAL = 1,
    PBD_BENDING_ISOMETRIC = 2
} pbd_bending_model;

/* An object's particles and groups; a group it does not have is id 0. */
typedef struct pbd_object_parts {
    pbd_range particles;
    pbd_group stretch; /* distance constraints over the edges */
    pbd_group bending; /* dihedral or isometric over interior edges */
    pbd_group area;    /* triangle areas (cloth) */
    pbd_group volume;  /* tetrahedra (soft body) or the closed mesh (balloon) */
} pbd_object_parts;

typedef struct pbd_cloth_desc {
    const float *positions; /* vertex_count*3 */
    int vertex_count;
    const int *triangles; /* triangle_count*3, a manifold mesh (edges shared by <= 2) */
    int triangle_count;
    const float *masses; /* optional per vertex; else from density (every vertex must then be in a triangle) */
    float density;       /* kg/m^2: vertex mass = density * (adjacent area) / 3; default 0.2 */
    float stretch_compliance, bending_compliance, area_compliance; /* defaults 0, 1e-3, 0 */
    float stretch_stiffness, bending_stiffness, area_stiffness;    /* PBD mode, defaults 1, 0.1, 1 */
    pbd_bending_model bending;                                     /* default PBD_BENDING_DIHEDRAL */
    int area_constraints;                                          /* default 0 */
    float thickness;                                               /* particle radius for collisions, default 0.01 */
    float damping;     /* 1/s, global damping (pbd_object_set_damping); default 2: a
                                   hanging cloth's swing dies out as air damps it (a 1 m cloth
                                   dropped from the horizontal: under 2 cm/s after about 6 s;
                                   see "CLOTH DEFAULTS AND STRETCH") */
    int reorder;       /* store the particles in space-filling-curve order for
                                   cache locality (real meshes are not laid out like grids) */
    int *permutation;  /* optional out, vertex_count ints: world particle of vertex i
                                   is particles.first + permutation[i] (pbd_object_vertices
                                   tells the same later; every call that takes the cloth's
                                   triangles takes them in your vertex numbers) */
    int tethers;       /* 1 (default): long range attachments from every vertex to its
                                   two nearest pinned vertices (or of mass 0; kinematic ones when
                                   the cloth has no such vertex: a hand dragging a pinned cloth is
                                   no anchor), straight rest distances on a flat convex cloth, else
                                   along the mesh; built and rebuilt automatically whenever those
                                   vertices change; tethers that cannot all hold give way (see
                                   "==== strain limiting"); 0: none. Ignored by balloons. */
    float gravity_cfl; /* a pinned cloth with tethers makes a step take at least the
                                   substeps that keep h sqrt(|g| L) / dx <= gravity_cfl (L the
                                   largest distance from a vertex to its nearest anchor, dx its
                                   mean edge), at most 1000 (silently:
                                   see pbd_world_step_substeps); default 0.35; 0: off.
                                   See "CLOTH DEFAULTS AND STRETCH". */
} pbd_cloth_desc;

typedef struct pbd_softbody_desc {
    const float *positions;
    int vertex_count;
    const int *tets; /* tet_count*4, positive volume */
    int tet_count;
    const float *masses;                      /* optional; else from density (every vertex in a tetrahedron) */
    float density;                            /* kg/m^3: vertex mass = density * (adjacent volume) / 4; default 1000 */
    float edge_compliance, volume_compliance; /* m/N and m^5/N, defaults 0 (rigid); see "SOFT BODIES" */
    float edge_stiffness, volume_stiffness;   /* PBD mode, defaults 1, 1 */
    int volume_constraints;                   /* default 1: signed tet volumes, which undo inversions */
    float radius;                             /* default 0.01 */
    float damping;                            /* 1/s, default 0 */
    int reorder;                              /* as in pbd_cloth_desc */
    int *permutation;                         /* as in pbd_cloth_desc */
} pbd_softbody_desc;

typedef struct pbd_balloon_desc {
    pbd_cloth_desc cloth;    /* a closed, consistently oriented triangle mesh; damping default 0 */
    float pressure;          /* overpressure factor, default 1 */
    float volume_compliance; /* default 0 */
    float volume_stiffness;  /* default 1 */
    float drag;              /* air drag, 1/s (pbd_object_set_drag), >= 0; default 1 */
} pbd_balloon_desc;
/* A balloon at rest. Nothing in the solver stops a ball rolling or
   rocking on the ground (the restore of "angular momentum" keeps what the
   contacts give it, and the object's damping keeps its rigid motion): a
   real one stops by the air and its skin's rolling resistance. So a
   balloon has an air drag (`drag`, pbd_object_set_drag) of 1/s by
   default. A default balloon of radius 0.3 m (icosphere of 2
   subdivisions) let down from 5 cm onto the ground (friction 0.5), 60 Hz,
   world defaults: its vertices' rms speed stays under 1 cm/s after 5.5 s
   (30 Hz at a fixed 4 substeps, reference_dt = 0: 4.3 s; 16 substeps:
   6.4 s), its skin's worst edge 1.9% long (30 Hz at a fixed 4: 8.1%;
   16 substeps: 0.13%; at 30 Hz the default takes 8: 5.4 s, 1.9%). Without drag it rocks and rolls at
   0.12 m/s rms after 8 s (16 substeps: 0.21 m/s); drag 0.3: 5.6 cm/s. An
   overpressure (pressure > 1) fights an inextensible skin (the default
   stretch compliance 0): at 1.5 the skin gives 44% at its worst edge and
   the balloon never comes to rest (1.9 cm/s rms, 16 substeps 6.6 cm/s);
   give it a stretch compliance, such as 1e-2 (at rest after 6.5 s; 16
   substeps 8.4 s). bench/cloth_defaults.c --balloon prints these. An
   underpressure (pressure < 1) crumples the skin, and where its folds
   meet the skin is stretched: at 0.9 the volume settles at 0.91 V0 with
   the worst edge 4.7% long, at 0.7 at 0.72 V0 with 37% and still moving
   (1 cm/s rms after 10 s), at 0.5 at 0.52 V0 with 40% (2.4 cm/s); a
   volume compliance trades the volume for the skin (1e-4 m^5/N at 0.7:
   0.85 V0, 8.4%; an audit). For a limp bag, a cloth without the volume
   is the better model. */

PBDDEF pbd_cloth_desc pbd_cloth_desc_default(void);
PBDDEF pbd_softbody_desc pbd_softbody_desc_default(void);
PBDDEF pbd_balloon_desc pbd_balloon_desc_default(void);
PBDDEF pbd_result pbd_add_cloth(pbd_world *w, const pbd_cloth_desc *desc, pbd_object *out);
PBDDEF pbd_result pbd_add_softbody(pbd_world *w, const pbd_softbody_desc *desc, pbd_object *out);
PBDDEF pbd_result pbd_add_balloon(pbd_world *w, const pbd_balloon_desc *desc, pbd_object *out);
/* Removes the object with its particles (and the copies its tearing
   made), its groups, its automatic tethers and its tearing; refused while
   anything else uses its particles (see pbd_remove_particles). */
PBDDEF pbd_result pbd_remove_object(pbd_world *w, pbd_object object);
PBDDEF int pbd_world_object_count(const pbd_world *w);
PBDDEF pbd_object pbd_world_object(const pbd_world *w, int index);
PBDDEF pbd_result pbd_object_get_parts(const pbd_world *w, pbd_object object, pbd_object_parts *out);
/* The world particle of each vertex of the object's builder mesh, in the
   mesh's order (with reorder they are not first, first + 1, ...): a list
   (out, max, *count) of vertex_count ints, e.g. to draw the mesh from
   pbd_world_positions with your own triangles; after tearing the copies
   follow, in the order they were made (*count grows with them). */
PBDDEF pbd_result pbd_object_vertices(const pbd_world *w, pbd_object object, int *particles, int max, int *count);
/* Global damping (1/s): every substep the velocities of the object's free
   particles move by 1 - exp(-damping h) towards a rigid motion. A free
   object: its own (v_cm + omega x r), so linear and angular momentum are
   kept and only deformation is damped. An object held by pinned or
   kinematic particles (its anchors): their rigid motion (zero for pins),
   so a hanging cloth's swing dies out and a carried one comes to rest in
   its carrier's frame. The rule holds for each connected piece of the
   object (over its stretch edges) on its own: a piece torn off its pins
   (pbd_world_tear), or a part of a mesh built in several parts, with no
   anchor of its own is damped towards its own rigid motion and falls
   freely, while the piece on the pins is damped towards them. The same
   rule holds for damping clusters (over the whole list). */
PBDDEF pbd_result pbd_object_set_damping(pbd_world *w, pbd_object object, float damping);
/* Air drag (1/s, >= 0; default 0, a balloon's 1): still air takes
   1 - exp(-drag h) of the velocity of every free particle of the object
   (its torn-off copies too) in each substep's prediction, with the
   world's point damping (pbd_world_set_point_damping), which does the
   same to every particle of the world. Unlike the damping above it slows
   the whole object, its momentum too: what stops a ball rolling or
   rocking on the ground, which the damping keeps (its rigid motion), and
   what a light object such as a balloon needs. A free object under
   gravity g falls at about g / drag (9.8 m/s at drag 1): in substeps of
   h up to g h / (1 - exp(-drag h)), which is 0.8% more at drag 2 and 30
   Hz (4 substeps) and 2% more at drag 5. */
PBDDEF pbd_result pbd_object_set_drag(pbd_world *w, pbd_object object, float drag);
PBDDEF pbd_result pbd_object_get_drag(const pbd_world *w, pbd_object object, float *drag);

// ==== colliders =============================================================

typedef enum pbd_collider_shape {
    PBD_COLLIDER_PLANE = 0,   /* half space below the plane through position with normal R*(0,1,0) */
    PBD_COLLIDER_SPHERE = 1,  /* radius */
    PBD_COLLIDER_CAPSULE = 2, /* segment along R*(0,1,0) of half length half_height, radius */
    PBD_COLLIDER_BOX = 3,     /* half_extents along the axes of R, its edges rounded by `rounding` */
    PBD_COLLIDER_MESH = 4,    /* triangle mesh through a BVH: pbd_add_collider_mesh */
    PBD_COLLIDER_SDF_GRID = 5 /* signed-distance grid of a closed mesh: pbd_add_collider_mesh */
} pbd_collider_shape;

typedef struct pbd_collider_desc {
    pbd_collider_shape shape;
    float position[3];
    float rotation[4]; /* quaternion x y z w, normalised (a zero one is refused); default identity */
    float radius;      /* sphere, capsule */
    float half_height;
    float half_extents[3];
    float rounding;         /* box: the radius of its edges and corners, within half_extents (capped at the
                       smallest), >= 0, 0 sharp; default 0.01 (1 cm) */
    float static_friction;  /* default 0.5 */
    float dynamic_friction; /* default 0.4, <= static */
    float restitution;      /* default 0, in [0, 1] */
} pbd_collider_desc;

/* Friction is Coulomb's, per particle, at position level: a particle on
   a slope sticks while tan(slope) <= static_friction and otherwise
   slides at g (sin - dynamic_friction cos), to 0.1% at any time step. An
   object of several particles grips a little harder (a 0.1 m soft box of
   3 x 3 x 3 nodes, rigid edges, friction 0.5 / 0.4, holds still at 28
   degrees, tan 0.53, and slides from 29 degrees 4% slower than Coulomb;
   an audit), and friction acts at the particles' centres, a radius
   above the surface, which changes when a gripping body tips (pbd_sm.h,
   RIGID BODIES). */
PBDDEF pbd_collider_desc pbd_collider_desc_default(void);
PBDDEF pbd_result pbd_add_collider(pbd_world *w, const pbd_collider_desc *desc, pbd_collider *out);
/* A box's edges are rounded (rounding, 1 cm by default, within its half
   extents: the box still fills them), as a real table's edge is; set 0
   for a sharp box. Why: at a sharp edge the particle beside it is pressed
   into the side face by the cloth's pull, almost along the face's normal,
   and static friction holds it however hard the pull (Coulomb's law, for
   the discrete cloth), so a tablecloth pulled off a sharp table stretches
   instead of sliding (a mesh collider's sharp edges, too). On a rounded
   edge the normal turns with the particle and the pull slides it round.
   Where the cloth is pulled hard round a box, round it by about three of
   the cloth's edges: a box (friction 0.5) driven 1 m into a curtain
   pinned by its top row (3.4 cm edges) and stopped there locks the
   curtain stretched round its 1 cm edges, where it never comes to rest
   (about 40 m/s, for good); rounded by 10 cm, or frictionless, the
   curtain slides up over it and rests (0.12 and 0.09 m/s after 3.5 s;
   tests/test_collisions.c). A collider driven beyond the reach of a
   pinned cloth wrapped round it (that box driven 2.5 m) has no solution
   at all: the cloth fights it (90 m/s) until it comes back, or tears if
   it may (pbd_add_tearing). */
/* Shortcuts; `friction` sets static and dynamic friction; out may be NULL.
   A capsule from a to b (a == b: a sphere of its radius). */
PBDDEF pbd_result pbd_add_collider_plane(pbd_world *w, const float *point, const float *normal, float friction,
                                         pbd_collider *out);
PBDDEF pbd_result pbd_add_collider_sphere(pbd_world *w, const float *centre, float radius, float friction,
                                          pbd_collider *out);
PBDDEF pbd_result pbd_add_collider_capsule(pbd_world *w, const float *a, const float *b, float radius, float friction,
                                           pbd_collider *out);
PBDDEF pbd_result pbd_add_collider_box(pbd_world *w, const float *centre, const float *half_extents,
                                       const float *rotation, float friction, pbd_collider *out);
/* Move a collider: it reaches this pose at the end of the next step,
   linearly over the substeps, and carries particles with friction.
   rotation (a quaternion x y z w, normalised; zero is refused) NULL keeps
   the collider's rotation. */
PBDDEF pbd_result pbd_collider_set_pose(pbd_world *w, pbd_collider c, const float *position, const float *rotation);
PBDDEF pbd_result pbd_collider_set_friction(pbd_world *w, pbd_collider c, float static_friction, float dynamic_friction,
                                            float restitution);
PBDDEF int pbd_world_collider_count(const pbd_world *w);
/* The index-th collider (0 <= index < pbd_world_collider_count, in the
   order of their slots), id 0 for an index out of range: for walking
   every collider, as pbd_sm.h's oriented particles and volumes do. */
PBDDEF pbd_collider pbd_world_collider(const pbd_world *w, int index);
/* Every collider at once (a list: out, max, *count), in the same order,
   one pass: what a plugin that tests particles against every collider
   fetches once per callback. */
PBDDEF pbd_result pbd_world_colliders(const pbd_world *w, pbd_collider *out, int max, int *count);
/* Contacts of the last substep (for tests and debugging). */
PBDDEF int pbd_world_contact_count(const pbd_world *w);
/* How far the colliders have pushed a particle along their normals so far
   in the current substep (between steps: in the last one), the sum of its
   contacts' multipliers; 0 without a contact, or for a NULL world or an
   index out of range. Greater than 0: a collider holds the particle, and
   its static friction acts. For plugins (pbd_sm.h's rigid bodies weigh
   the particles a collider holds as immovable). */
PBDDEF float pbd_world_particle_contact_push(const pbd_world *w, int particle);
/* The same push as a vector (out: 3 floats): its contacts' multipliers
   times their normals, pointing out of the colliders; zero where the push
   is 0 (out NULL: nothing). Tells a plugin which way a collider holds the
   particle (pbd_sm.h's rigid bodies let go of a held particle that the
   body lifts off its collider). */
PBDDEF void pbd_world_particle_contact_push_vector(const pbd_world *w, int particle, float *out);
/* Signed distance from a point to a collider's surface at its current pose. */
PBDDEF pbd_result pbd_collider_distance(const pbd_world *w, pbd_collider c, const float *point, float *distance);

// ==== mesh colliders ========================================================
/* Static triangle meshes as colliders, for characters and props. They join
   the contact pipeline of the analytic shapes (swept continuous contacts,
   per-particle contact slots, static and dynamic friction, restitution) and
   move kinematically with pbd_collider_set_pose like them.
     * sdf_resolution == 0: PBD_COLLIDER_MESH, the exact distance to the
       triangles through a bounding volume hierarchy (median splits, leaves
       of <= 4 triangles). A closed, consistently oriented mesh is solid: its
       distance is signed with angle-weighted pseudo-normals (Baerentzen and
       Aanaes 2005), so a particle found inside is pushed out. An open mesh
       (a terrain, a wall) is a two-sided shell: particles stay on the side
       they come from. A particle has one contact per collider (the
       nearest point), so in a crease or a pit of the mesh it meets one
       face at a time: a particle resting at the apex of a
       4-triangle funnel stays put but reports 0.02-0.06 m/s, and a pile
       in an 8-triangle funnel cycles by 0.4 mm (an audit; the same pit of
       plane colliders settles to rest).
     * sdf_resolution > 0: PBD_COLLIDER_SDF_GRID, a signed-distance grid
       sampled from the closed mesh (cubic cells, sdf_resolution cells along
       the longest side of the mesh bounds plus a margin of 4 cells), read by
       trilinear interpolation with its analytic gradient. Cheaper per query
       than the BVH for big meshes; accurate to about one cell, so a part
       thinner than about two cells can vanish between the samples (an
       audit: a 0.1 m wall at 0.19 m cells read +4 cm at its mid-plane, a
       particle at 2 m/s passed through it, and water drained out of a tank
       of such walls; at 0.1 m cells it held): choose sdf_resolution so that
       the thinnest part spans two cells, or use the BVH. Building it costs
       about sdf_resolution^3, and pbd_world_restore builds it again: an
       80-triangle sphere took 1.3 s at 128 and 77-86 s and 1.1 GB at 512.
       Outside the
       grid (a particle or fluid kernel reaching farther than the margin)
       the BVH gives the exact distance, as for the mesh collider.
   Bad input (NULL, NaN, an index out of range, a repeated vertex in a
   triangle, a zero-area triangle, an edge shared by more than two
   triangles; an open mesh for a grid; a closed mesh with a triangle
   flipped, PBD_ERROR_NOT_CLOSED naming an edge, for both kinds: it would
   be a hollow shell; sdf_resolution outside 0..512; a
   closed mesh wound inward, PBD_ERROR_DEGENERATE: its triangles must be
   counter-clockwise seen from outside, their normals out) returns an
   error and adds nothing. The collider keeps its own copy of
   the mesh, which is part of the snapshot (BVH and grid are rebuilt by
   pbd_world_restore). */
typedef struct pbd_mesh_collider_desc {
    const float *positions; /* vertex_count*3, in the collider's frame */
    int vertex_count;
    const int *triangles; /* triangle_count*3 */
    int triangle_count;
    int sdf_resolution;     /* 0 (default): BVH; 2..512: signed-distance grid */
    float position[3];      /* pose of the collider frame */
    float rotation[4];      /* quaternion x y z w, normalised (zero: refused); default identity */
    float static_friction;  /* default 0.5 */
    float dynamic_friction; /* default 0.4 */
    float restitution;      /* default 0 */
} pbd_mesh_collider_desc;

PBDDEF pbd_mesh_collider_desc pbd_mesh_collider_desc_default(void);
PBDDEF pbd_result pbd_add_collider_mesh(pbd_world *w, const pbd_mesh_collider_desc *desc, pbd_collider *out);
/* Any collider, analytic or mesh (declared with pbd_collider_set_pose). */
PBDDEF pbd_result pbd_remove_collider(pbd_world *w, pbd_collider collider);

// ==== hash grid =============================================================
/* A spatial hash grid over the particles that take part in particle
   contact or fluids (survey 3.8; Macklin and Mueller 2013, section 5),
   built from the predicted positions by a counting sort at a step's first
   substep, at every substep while the world has a fluid, and at a later
   substep once a particle has moved a quarter of its radius since the
   last build (its neighbour lists, which hold every particle within 1.75
   times the sum of two radii, serve until then; each substep takes the
   pairs within 1.5 times, which its contacts' loads count).
   It is sized when such particles are added, so stepping never allocates,
   and its neighbour order is deterministic (cells in a fixed order, then
   particle index), the same for any thread count.
   pbd_world_query_particles rebuilds it from the current positions (O(n))
   and returns the particles (with particle collision or fluid) within
   `radius` of `point`, at most max of them into out (*count receives how
   many there are). pbd_world_particle_neighbors returns the neighbour list
   one particle had in the last substep (or the last pbd_fluid_densities
   call): the candidates of its contacts and of its fluid kernel, within
   the search radius max(largest kernel radius, 3 x largest particle
   radius), in the solver's order; none for particles not taking part. */
PBDDEF pbd_result pbd_world_query_particles(pbd_world *w, const float *point, float radius, int *out, int max,
                                            int *count);
PBDDEF pbd_result pbd_world_particle_neighbors(const pbd_world *w, int particle, int *out, int max, int *count);

// ==== particle contact ======================================================
/* Particle-particle contact (survey 3.4.3 style unilateral distance
   constraints |p_i - p_j| >= r_i + r_j, with position-level static and
   dynamic friction as in Macklin et al. 2014 "Unified particle physics").
   A particle takes part when its switch is on; two particles collide when
   both are on, they are not both fluid (fluids interact by density), and
   they are not in the same object (a cloth's own neighbours touch all the
   time; cloth self-collision is a separate feature). Loose particles
   (pbd_add_particles) belong to no object, so a granular pile collides
   with itself and a cloth can land on it. Contacts are solved by Jacobi
   iterations: every particle sums the corrections of its pairs, each pair
   scaled by 1 / the larger contact load of its two particles (a
   particle's load: over its contact candidates, twice its share w_i /
   (w_i + w_j) of each pair's correction, at most 1 a pair; its number of
   contacts for equal masses), which keeps linear momentum exactly and any
   thread count bit-identical, never moves a particle farther than its
   deepest contact asks, and lets a heavy particle's light partners take
   their share: a 15.6 g grain of 2.5 cm stays on a 0.2 kg hammock of 48 x
   48 vertices pinned at its corners (scaled by 1 / max(contact counts) it
   fell through). The light partner of a pair takes nearly all of its
   correction, though, so one pressed between a heavy particle and a
   collider is pushed into the collider as often as out of it: two grains
   of 1 cm stacked on a plane, the upper 100 times the lower's mass, rest
   1.3% of their radii's sum into each other, at 300 times 4%, at 1000
   times 13% (15% at the deepest), and at 1e4 times the heavy one goes through to the floor
   and throws the light one out (an audit). Keep the masses of grains that
   rest on each other within a factor of about 100. Three more limits:
   particle contacts are not swept, as collider contacts are: a particle
   that moves more than about the two radii's sum in a substep can pass
   through another (two 1 cm grains, 16 substeps at 60 Hz: at 20 m/s they
   collide, at 40 m/s one passes through and throws the other 15 m up).
   A cloth meets particles at its vertices only,
   so a particle whose radius plus the cloth's thickness is under half a
   cell's diagonal passes between them (a 1.25 cm grain through a 1 m
   cloth of 32 x 32 vertices, 1 cm thick); and a cloth holds only loads
   under its own weight: on the hammock above, 16 of the 2.5 cm grains
   (1.25 times its weight) push 1 through it in 3 s at the defaults (the
   grains give the step 11 substeps) and 72 (5.6 times) 10; grains of 1
   cm and 2 g (16 substeps): 30 (0.3 times its weight) none, 100 (once)
   14 and 300 (3 times) 185, and at 32 substeps the 100 stay (an audit).
   At granular_cfl 0 (6 substeps) 16 of the 16 and 67 of the 72 went
   through. Give a cloth that catches things substeps. Objects touched by
   another object's particles are marked coupled (see
   pbd_world_mark_coupled). Candidates come from the hash grid; at most
   PBD_MAX_NEIGHBORS per particle (more are ignored, in a fixed order). */
#define PBD_MAX_NEIGHBORS 96
PBDDEF pbd_result pbd_particles_set_particle_contact(pbd_world *w, pbd_range r, int on);
PBDDEF pbd_result pbd_object_set_particle_contact(pbd_world *w, pbd_object object, int on);
/* Friction between particles (default 0.5 and 0.4; dynamic <= static). */
PBDDEF pbd_result pbd_world_set_particle_contact_friction(pbd_world *w, float static_friction, float dynamic_friction);

// ==== fluids ================================================================
/* Position based fluids (survey 3.4.6; Macklin and Mueller 2013 "Position
   Based Fluids"): one density constraint per particle,
   C_i = max(rho_i / rho_0 - 1, 0), rho_i = sum_j m_j W_poly6(p_i - p_j, h),
   gradients with the spiky kernel, solved by Jacobi iterations with
   constraint-force-mixing relaxation eps in lambda_i = -C_i / (sum_k
   w_k |grad_k C_i|^2 + eps), the tensile-instability term s_corr =
   -k (W(r) / W(dq))^n, XSPH viscosity and vorticity confinement after the
   velocity update. The constraint is unilateral (a free surface is not
   pulled together, so no clumping); s_corr only pushes apart, so with
   nothing pulling the surface in it carries a free surface's particles
   away: under gravity it lifts the surface a little (see "Kernel
   radius"), but a drop of water in zero gravity evaporates with the
   defaults (a 10 x 10 x 10 block at 5 cm: 0.45 m wide, 1.26 m after 1
   s, 2.9 m after 3 s); with scorr_k = 0 it stays as it is. Particle
   mass m = rest_density * spacing^3. Other particles with particle collision on are coupled both
   ways: they count in a fluid particle's density as one fluid particle of
   that fluid, receive the density corrections weighted by their inverse
   mass, and collide with the fluid particles by radius. So a body floats
   or sinks by its particles' mass against a fluid particle's (rho_0
   spacing^3), not by its density: each of its particles displaces one
   fluid particle, whatever volume it stands for. Sampled at the fluid's
   spacing (one particle per spacing^3 of its volume) the two agree. The
   bottom of a 0.2 m soft box (radius 2.5 cm) after 5 s, dropped from 2
   cm above the surface into the middle of a 1 m x 1 m tank of water 0.3
   m deep at 5 cm (20 x 6 x 20 particles): of 2 x 2 x 2 nodes 0.20 m at
   100 kg/m^3, 0.06 at 500; of 3 x 3 x 3 0.18 at 300, 0.06 at 900; of 4 x
   4 x 4 0.23 at 500, 0.15 at 800, 0.10 at 1200; of 5 x 5 x 5 0.13 at
   1000, 0.08 at 1500, 0.04 at 2500 (boxes of 4 and 5 nodes a side come
   to float tilted, on an edge or a corner: 0.28 to 0.35 m from their
   lowest point to their highest). A body up to a few times as dense as
   water settles on a layer of water about a particle thick, not on the
   floor (tests/test_fluids.c); at 5000 kg/m^3 and more it reaches the
   floor (an audit).
   Boundaries: the world's colliders hold the fluid by contact and add
   their density: every collider within the kernel radius of a particle
   adds rho_0 Phi(s) to rho_i, s the particle's signed distance to it and
   Phi the kernel integrated over the half space beyond its tangent plane
   (Koschier and Bender 2017 density maps, analytic for W_poly6; exact for
   planes and box faces, first order for curved shapes; every collider
   kind, meshes and SDF grids included; the 4 nearest per particle, several
   combined as 1 - prod (1 - Phi_k)), and Phi'(s) n to its constraint
   gradient. Their friction acts on fluid particles as on any: at the
   default 0.5 a layer of water stops on a slope of 15 to 20 degrees
   (and runs off from about 25); give surfaces that water should run
   down a low friction. The contacts are swept along each particle's
   predicted motion, not along what the density solve then adds: water
   squeezed hard against a thin collider (2 mm walls; a second block
   added overlapping the first, which erupts at over 100 m/s; a box
   lowered to within a particle diameter of a thin floor) can be pushed
   through it and stays outside; make walls thicker than a spacing, or
   use planes. Fluids of different spacings in contact do not settle
   (water at 2.5 cm beside or on water at 5 cm throws particles 11 to 17
   m up); give the fluids of one scene one spacing. Rest: the constraint's rho_0 is the SPH density of a cubic
   lattice at `spacing` (1.0098 rho_0 at h = 2 spacing), so a block placed
   on that lattice starts at rest; pbd_fluid_densities reports rho_i over
   it. Warm start: the first iteration of a substep adds half the
   multipliers the substep before summed over its iterations (its XPBD
   multiplier, scaled by (h / h_before)^2 when the substep shrinks, as it
   is when it grows: the multipliers of a short substep hold the
   compression the water rested on, not a force times h^2) to its own;
   the pressure is state, in snapshots and rolled back with the step. A
   much shorter substep than the one before jolts resting water as a
   short step does (see "Time steps"), whether it comes from dt or from
   pbd_world_set_solver: 200 or 1000 substeps for one step of a resting 5
   cm tank, 3.3 or 14.9 m/s.
   Sub-stepping: pbd_world_step takes enough substeps that
   h sqrt(|g| / spacing) <= gravity_cfl: the iterations supply the other
   half of the pressure from the compression they find, so a resting
   column of N layers holds itself up by a compression of about
   N (h sqrt(g/d))^2 / (2 iterations) at its bottom (iterations at least
   4, see below), and past 20-30% the
   Jacobi corrections overshoot and it explodes (as 1 cm with 2 substeps
   of 1/60 s would without the bound). s_corr's k holds at the
   substep h_ref = 0.07 sqrt(spacing / 9.81) and is scaled by (h/h_ref)^2
   at smaller substeps (as a position correction per iteration it would
   otherwise grow like 1/h^2 and boil a resting tank at many substeps).
   A resting 10 x 30 x 10 tank at 60 Hz with the defaults, 5 mm to 10 cm:
   mean / max density error at most 0.22% / 1.22% (another placement of
   the tank and its walls: max 1.31%, 1.41% in an open box mesh), height lost
   0.69-0.88%; the loss is mostly particles packing within a spacing of
   the side walls (3-4% more of them there, at the SPH rest density), so
   a narrower 8 x 30 x 8 tank loses up to 1.2% (tests/test_fluids.c,
   bench/fluid_rest.c). gravity_cfl is 0.06 rather than 0.07 so that the
   height lost stays under 1% in every build, at the price of one more
   substep at 5 mm, 6.7 mm, 1 cm and 2.5 cm (13, 11, 9, 6). The warm
   start costs 0.6% more instructions per substep (callgrind).
   Cost (bench/fluid.c, a dam break of 128 000 particles at 2.5 cm, 4
   iterations, AVX-512): two cores take about half the time of one per
   substep (the colliders' density adds about 7%), and a 1/60 s step
   takes 6 substeps at that spacing; two thirds of it the density and
   correction passes (about 30 neighbours per particle, 16 at a time), a
   sixth the neighbour lists.
   Colliders moving through water: a particle inside a collider counts
   the wall density of the collider's surface, no more (pbd__wall_density:
   a box pushed flush against a tank's wall through resting water, or
   started overlapping it, made the particles caught inside or in the
   closing gap ask for room nothing could give, and threw the water at
   1.1e4 and 0.9-1.4e4 m/s for good). The contacts still eject those
   particles by a position jump, up to about a particle diameter per
   substep: in a 20 x 8 x 20 pool at 5 cm, a 6 cm box pushed at 1 m/s
   until flush throws a particle at up to 12 m/s, and one started inside
   the water and moved at 0.3 or 2 m/s at 26 and 29 m/s in its first
   step; the water then settles (0.3-2.7 m/s at the end of 3 s), and the
   box stopped 4 cm from the wall throws nothing faster than 4.9 m/s
   (bench/fluid_push.c), and a box held flush against the wall keeps a
   few particles beyond the wall's plane, outside the tank (2 to 18 of
   2560, one radius beyond; stopped 4 cm short, none). So move colliders
   into water from outside it and stop them short of the walls.
   Kernel radius: pbd_add_fluid takes h in [1.5, 2.2] spacings
   (PBD_FLUID_KERNEL_MIN, _MAX). Below sqrt(2) spacings a particle of the
   lattice has only its 6 face neighbours in the kernel, too coarse an
   estimate to hold the lattice (at 1.0 they sit on the kernel's edge,
   every gradient is 0 and so is the relaxation scale; from 1.01 to 1.1 a
   resting 5 cm block explodes within 1 s, at 1.2 it loses 11% of its
   height, at 1.4 4.5-6.1%); at 1.5 the 12 edge neighbours at 1.41 count,
   with margin. Above, s_corr's repulsion, summed over more neighbours,
   lifts the free surface, which the unilateral constraint does not hold
   down: a shallow block gains 2.4-3.8% of its mean height at 2.35
   spacings and 7-12% at 2.5 (8.8% at 2.5 for 10 x 10 x 10 at 5 cm, 0.8%
   lost with s_corr off). From 2.83 the lattice has 92 neighbours in the
   kernel, near PBD_MAX_NEIGHBORS = 96, and any compression truncates the
   sums: at 2.8 a 1% compression brings those 12 in and a 10 x 30 x 10
   block explodes, at 3 a block swells by 59%, at 4 its density is 29% off
   at rest. Over [1.5, 2.2], resting blocks of 10 x 10 x 10, 10 x 30 x 10
   and 20 x 8 x 20 particles at 1 cm, 5 cm and 10 cm spacing change their
   mean height by -1.6% to +0.25% in 3 s at 60 Hz (2.0: -0.9% to +0.05%;
   at 2.2 a surface particle of the 8-layer block rises up to 2.5
   spacings, at 2.0 0.5; bench/fluid_rest.c --kernels).
   Iterations: while the world has a fluid, every substep projects the
   particle phase (the density constraints, particle contact) and the
   collider contacts at least PBD_FLUID_MIN_ITERATIONS times, whatever
   pbd_world_set_solver's iterations: after the world's iterations, the
   missing ones run these two alone, so the groups, strands, plugins and
   self-collision keep the world's count (a multi-resolution cloth at
   iterations = 1 beside water stays at one V-cycle per substep). Below 4
   the Jacobi corrections overshoot long before the 20-30% above: at 60 Hz
   a 5 cm 10 x 20 x 10 column explodes at 1 iteration and a 10 x 60 x 10
   one at 2, with 3.4% and 5.1% predicted, and at 3 the 60-layer column
   throws particles 2.3 m over its 3 m surface (measured before this
   minimum); with it the 10 x 30 x 10 tank at 1, 2 and 4 iterations loses
   the same 0.86% of its height in 3 s and the 60-layer column at 2 loses
   1.36% (bench/fluid_rest.c --iterations). */
#define PBD_FLUID_MIN_ITERATIONS 4
#define PBD_FLUID_KERNEL_MIN 1.5f
#define PBD_FLUID_KERNEL_MAX 2.2f
/* Bounds of the fluid's parameters that feed energy in (an audit: values
   inside the ranges below made a resting tank of 10 x 10 x 10 particles
   at 5 cm swell or explode, every step PBD_OK).
   s_corr pushes neighbours apart and nothing holds the free surface down
   (the constraint is unilateral): its sum over a particle's neighbours in
   the cubic lattice at the rest spacing, sum_j k (W(r_j) / W(dq h))^n,
   at most PBD_FLUID_SCORR_MAX, three times the defaults' 0.016 (h = 2
   spacings; 0.032 at 2.2). Measured at 60 Hz for 3 s, a resting tank's
   mean height and a dam break's largest energy against its start: the
   defaults 0.0% and 1.002; scorr_dq 0.3 (sum 0.030) +0.3% and 1.022,
   scorr_k 0.1 (0.032) 1.026, scorr_k 0.15 (0.047) 1.063; beyond, scorr_k
   0.2 (0.063) +1.6% and 1.10, scorr_dq 0.4 (0.078) +2.4%, scorr_n 2
   (0.080) +5.3%, scorr_k 0.3 (0.094) +4.0% and 1.18, scorr_k 0.5 (0.16)
   +9%, scorr_n 1 (0.23) +34%, scorr_dq 0.5 (0.30) +18%, and scorr_k 2
   (0.63) and scorr_dq 0.6 (2.0) explode (particles km away, through
   plane walls).
   Vorticity confinement adds eps (N x omega) as an acceleration; its
   vortices' speeds scale with sqrt(g d) at spacing d, and so does what
   it may add: eps at most PBD_FLUID_VORTICITY_MAX sqrt(9.81 m/s^2 d)
   (2.1 m/s at 5 cm, 0.94 at 1 cm). Measured (resting tank, rms speed
   after 3 s; 0.03 m/s without): 5 cm, eps 1: 0.06, 2: 0.14, 3: 0.39,
   5: a dam break gains 15% of its energy, 10: the tank climbs to 12 m;
   1 cm, eps 0.5: 0.02, 1: 0.08, 2: 0.44 and +6% of its height.
   A fluid's collision radius is at most half its spacing (the default):
   the colliders hold its particles a radius from their surfaces while
   the walls' density counts from the surface, and solids keep it apart;
   at a radius of one spacing a resting tank lost 26% of its height and
   boiled at 0.5 m/s, from 1.5 spacings it exploded. */
#define PBD_FLUID_SCORR_MAX 0.05f
#define PBD_FLUID_VORTICITY_MAX 3.0f
typedef struct pbd_fluid_desc {
    const float *positions;  /* count*3, required */
    const float *velocities; /* count*3, optional */
    int count;               /* > 0 */
    float rest_density;      /* rho_0, kg/m^3, default 1000 */
    float spacing;           /* particle spacing d (m), default 0.05; mass rho_0 d^3 */
    float kernel_radius;     /* h (m), default 0: 2 * spacing; in [PBD_FLUID_KERNEL_MIN,
                                PBD_FLUID_KERNEL_MAX] * spacing = [1.5, 2.2] spacing (why:
                                "Kernel radius" above) */
    float radius;            /* collision radius, default 0: spacing / 2; at most spacing / 2
                                (PBD_FLUID_SCORR_MAX's comment says why) */
    float relaxation;        /* CFM eps as a fraction of sum_k w_k |grad_k C|^2 of a
                                particle of a cubic lattice at `spacing`; default 0.01 */
    float viscosity;         /* XSPH c, dimensionless, in [0, 1], default 0.01 */
    float vorticity;         /* vorticity confinement eps (m/s), >= 0, default 0; at most
                                PBD_FLUID_VORTICITY_MAX sqrt(9.81 m/s^2 spacing) */
    float scorr_k;           /* s_corr: k, >= 0, default 0.05 (0 turns it off); in units of
                                a density error (see pbd__kscorr), not the paper's */
    float scorr_n;           /* s_corr: n, in [1, 16], default 4 */
    float scorr_dq;          /* s_corr: |dq| as a fraction of h, in (0, 1), default 0.2;
                                k, n and dq together at most PBD_FLUID_SCORR_MAX (above) */
    float gravity_cfl;       /* the substep h at most gravity_cfl * sqrt(spacing / |g|):
                                pbd_world_step takes more substeps when the fluid needs
                                them, at most 1000 (silently: see pbd_world_step_substeps);
                                default 0.06, 0 turns the bound off */
} pbd_fluid_desc;

PBDDEF pbd_fluid_desc pbd_fluid_desc_default(void);
/* Adds the particles (out_particles may be NULL) and their fluid. */
PBDDEF pbd_result pbd_add_fluid(pbd_world *w, const pbd_fluid_desc *desc, pbd_fluid *out, pbd_range *out_particles);
/* Removes the fluid with its particles (see pbd_remove_particles). */
PBDDEF pbd_result pbd_remove_fluid(pbd_world *w, pbd_fluid fluid);
PBDDEF int pbd_world_fluid_count(const pbd_world *w);
/* Viscosity and vorticity of a fluid can change between steps. */
PBDDEF pbd_result pbd_fluid_set_viscosity(pbd_world *w, pbd_fluid f, float viscosity, float vorticity);
/* The SPH density of each particle of the fluid at the current positions,
   the colliders' share included, over the rest density (the lattice's, see
   above), in the fluid's particle order: out holds max floats, *count
   receives the fluid's particle count. */
PBDDEF pbd_result pbd_fluid_densities(pbd_world *w, pbd_fluid f, float *out, int max, int *count);
// ==== strain limiting =======================================================
/* Strain limiting (survey 3.5): passes that run every iteration after the
   constraint groups (before the plugins and the contacts), always as
   coloured Gauss-Seidel (also in Jacobi mode).

   Long range attachments (LRA; Kim, Chentanez, Mueller 2012): every
   attached particle gets unilateral tethers to its nearest anchors (never
   to itself: a particle that is also an anchor, as an object's pinned
   vertices are, takes the nearest others),
   C = L - |p - a| >= 0 with L the rest distance, so a hanging cloth cannot
   stretch globally even with very few iterations. Rest distances are
   straight lines or shortest paths along the mesh edges (Dijkstra: never
   shorter than the true geodesic, but longer by a factor that depends on
   the direction, up to sqrt 2 on pbd_mesh_grid's alternating diagonals).
   A tether pulls only its particle: the anchors are attachment points
   (pinned or kinematic, inverse mass 0) and are never moved; a
   tether whose anchor is dynamic (unpinned) is inactive. Each particle's
   tethers are therefore solved by one thread, in order, and the particles
   in parallel: no colouring is needed although tethers share anchors, and
   the result does not depend on the thread count. Where a particle's
   anchors have moved apart farther than its tethers reach together
   (kinematic anchors pulled apart), its tethers give way rather than fight:
   the particle is left to its edges and the tethers' limits grow to its
   distance, then tighten at the end of every step as it comes back, never
   below their length (no tether then pulls a particle in faster than the
   cloth brings it). */

typedef struct pbd_lra_desc {
    pbd_object object;    /* id 0 (default): none; else the object whose particles are attached */
    const int *particles; /* count world particles to attach; NULL with an object:
                               every particle of the object that is not an anchor */
    int count;
    const int *anchors; /* anchor_count world particles (attachment points), required */
    int anchor_count;
    int geodesic;         /* 1: rest lengths along the mesh edges; 0 (default): straight */
    const int *triangles; /* geodesic without an object: triangle_count*3 world particle
                               indices (edge weights: current lengths). With an object its
                               stretch group's edges and rest lengths are used. */
    int triangle_count;
    int anchors_per_particle; /* tethers to the k nearest anchors; default 1, 1..16 */
    float slack;              /* tether length = rest * (1 + slack); default 0, >= 0 */
} pbd_lra_desc;

PBDDEF pbd_lra_desc pbd_lra_desc_default(void);
/* Rest lengths come from the current positions. A particle that no anchor
   reaches along the mesh gets no tether. */
PBDDEF pbd_result pbd_add_long_range_attachments(pbd_world *w, const pbd_lra_desc *desc, pbd_lra *out);
/* A set of pbd_add_long_range_attachments (a cloth's automatic tethers go
   with the cloth). */
PBDDEF pbd_result pbd_remove_long_range_attachments(pbd_world *w, pbd_lra set);
PBDDEF pbd_result pbd_lra_set_enabled(pbd_world *w, pbd_lra l, int enabled);
/* The LRA set of a cloth's automatic tethers (pbd_cloth_desc.tethers): id
   0 until the cloth first has an anchor, or when they are off. The set is
   rebuilt in place (the same handle) by every pbd_particle_pin, pbd_particle_unpin,
   pbd_particle_set_mass or pbd_particle_set_kinematic that changes which of the cloth's
   vertices have inverse mass 0 (one search along the mesh, or one k-d
   tree query per vertex, for all anchors at once: a rebuild costs about
   the cloth's size, so pinning hundreds of vertices of a large cloth one
   call at a time is slow - a 200 x 200 cloth's two edges, 400 calls, 2.8 s
   flat and 15 s curved, bench/pins.c; give them mass 0 at add time, or pin
   or make them kinematic with one call, pbd_particles_pin or
   pbd_particles_set_kinematic: 13 and 78 ms); it is empty while the cloth has no anchor, and a set
   disabled with pbd_lra_set_enabled stays disabled. */
PBDDEF pbd_result pbd_object_tethers(const pbd_world *w, pbd_object object, pbd_lra *out);
/* The tethers (particle, anchor, tether length) of a set: *count receives
   their number, at most max are written (any of the three outputs may
   be NULL). */
PBDDEF pbd_result pbd_lra_tethers(const pbd_world *w, pbd_lra l, int *particles, int *anchors, float *lengths, int max,
                                  int *count);

/* Strain limits over triangles: the principal stretches of each triangle
   (singular values of its 2D deformation gradient) are clamped to
   [min_stretch, max_stretch] (Wang, O'Brien, Ramamoorthi 2010), or, in
   edge mode, each edge length to [min, max] * rest (Provot 1995, the
   classic pass). Triangles are graph coloured and solved in parallel.
   Each projection clamps; what the other constraints, gravity and the
   contacts do after it in the substep is not clamped again, so a cloth
   that leans on its limits ends its steps only near them: a 24 x 24
   cloth hanging from two corners without tethers, limited to [0.95,
   1.05] at the default 4 substeps x 4 iterations, rests with a corner
   triangle at 1.226 (16 iterations: 1.072; 16 substeps: 1.048; with its
   tethers, the default, within [0.997, 1.001]: an audit's program). Use
   the tethers for a hanging cloth's global stretch, the limits for the
   rest. */
typedef enum pbd_strain_mode {
    PBD_STRAIN_TRIANGLES = 0, /* principal strains (default) */
    PBD_STRAIN_EDGES = 1      /* the triangles' edges */
} pbd_strain_mode;

typedef struct pbd_strain_limit_desc {
    pbd_strain_mode mode;
    pbd_object object;    /* id 0 (default): triangles index world particles; else they are
                                 the object's local vertex indices (as given to its builder) */
    const int *triangles; /* triangle_count*3; rest shapes from the current positions */
    int triangle_count;
    float min_stretch; /* default 0.9, in [0, 1] */
    float max_stretch; /* default 1.1, >= 1 */
    float stiffness;   /* fraction of the correction per iteration, (0, 1]; default 1 */
} pbd_strain_limit_desc;

PBDDEF pbd_strain_limit_desc pbd_strain_limit_desc_default(void);
PBDDEF pbd_result pbd_add_strain_limit(pbd_world *w, const pbd_strain_limit_desc *desc, pbd_strain_limit *out);
PBDDEF pbd_result pbd_remove_strain_limit(pbd_world *w, pbd_strain_limit limit);
PBDDEF pbd_result pbd_strain_limit_set_enabled(pbd_world *w, pbd_strain_limit s, int enabled);
PBDDEF pbd_result pbd_strain_limit_set_range(pbd_world *w, pbd_strain_limit s, float min_stretch, float max_stretch);
/* The stateless triangle projection: p and rest 3 points (9 floats),
   inv_mass 3 floats; p is moved so that both principal stretches lie in
   [min_stretch, max_stretch], keeping the mass-weighted centroid (pinned
   corners, inverse mass 0, stay). *stretch (2 floats, optional) receives
   the principal stretches before the projection. */
PBDDEF pbd_result pbd_strain_limit_triangle(float *p, const float *rest, const float *inv_mass, float min_stretch,
                                            float max_stretch, float *stretch);

// ==== strands ===============================================================
/* Follow-the-leader strands (Mueller, Kim, Chentanez 2012, "Fast
   simulation of inextensible hair and fur"; survey 3.5). Every iteration
   each strand is walked from its root: particle i is moved onto the sphere
   of radius l_i about particle i-1, so after one pass every segment has its
   rest length exactly. The collider contacts come after that pass in each
   iteration (SOLVER step 3) and have the last word, so a strand lying on
   or swept over a collider ends the step a little stretched: the hair of
   the manual (162 roots on a Fibonacci spiral over the whole of a head
   of radius 0.1 m, 16 particles of 0.2 m, defaults) on a sphere collider
   of the head's radius (friction 0.3), the head still for 1 s, shaken 5
   cm along x at 2 Hz for 2 s, still for
   2 s: at 60 Hz the worst segment is 8.2% while the hair falls onto the
   head, 6.3% while it shakes, 4.4% as it settles and 0.3% at the end; at
   30 Hz at a fixed 4 substeps (reference_dt = 0) 8.7%, 12%, 5.3% and
   1.2% (the mean stays under 0.02%; 5e-6 without the collider;
   bench/hair_head.c; the numbers depend on the layout: the 162 vertices
   of pbd_mesh_sphere(2) as roots give 7.9%, 3.2%, 3.9% and 0.3% at 60
   Hz). Dynamic FTL
   replaces the velocity update by v_i = (p_i - x_i) / h - t d_{i+1} / h,
   d_{i+1} the correction FTL gave the next particle this substep: it
   hides FTL's unphysical infinite-mass leaders at the price of some
   damping. In the paper t = s_damping. Here s_damping is what t is
   wherever that adds no energy, and t moves within [0, 1] only as far
   as needed where it would: the paper's scheme gains energy (a strand of
   30 particles let go horizontal: +31 J of 294 J at 0.9, +12494 J at 0;
   hanging with random velocities, +254 J at 0.9 and +285 J at 1) and
   leaves a strand hanging at rest with velocities up to 1.1 m/s while
   nothing moves; with the guard no strand of the tests gains energy, at
   any s_damping, and a resting strand has none. Not covered: a long
   strand swinging slowly about its root. Hanging from a pinned root,
   segments of 0.1 m and particles of 0.5 kg, turned about the root at
   0.5 rad/s, 60 Hz, it gains 0.15 J with 8 particles, 2.6 J with 16 and
   24 J with 30, at any s_damping; at 2 rad/s 0.043 J with 16, none with
   8 or 30 (test strands_slow_swing_about_the_root_as_documented). There
   FTL lifts the lower segments each substep and no leader can pay: the
   debt reaches the tip, which pays what its own speed can and no more
   (paying it from the whole strand's kinetic energy instead stops the
   strand in mid-swing). For ropes that swing, use distance constraints
   (pbd_add_constraints: such a chain in the same swings never gains).
   The hair builder's light, short strands gain little and come to rest
   where something takes their energy: 400 strands of the defaults over
   the upper part of a still head (no collider), the world's point
   damping 2/s (pbd_world_set_point_damping), are still (no particle
   above 5 cm/s) after 18 s, at 5/s after 12 s (test
   strands_hair_comes_to_rest_under_point_damping); with no damping at
   all (the default) the energy still falls, slowly: after 20 s 778 of
   6400 particles move above 5 cm/s, the fastest at 0.25 m/s, all of
   them among the three particles before a tip, which swing freely with
   little energy (a chain has no bending stiffness; the tip itself pays
   its share of FTL's lift from its speed. That share used to be dropped,
   which kept 5380 of them moving, the fastest at 1.4 m/s, and held them
   moving against the 2/s damping). What s_damping changes is small and
   not in order, since the guard sets t where it matters: a strand of 30
   particles (0.1 m, 0.5 kg) let go horizontal loses 66, 58, 64, 42 and
   36 J of the 213 J it can lose (horizontal to hanging straight) in the
   first second at 0, 0.3, 0.6, 0.9 and 1, and by 10 s 208 J at 0 to 0.6
   (5 J left, nearly all height: it hangs a few cm short of straight), 206
   J at 0.9 and 201 J at 1 (13 J left, 2.5 J of it motion); pure FTL at 0.
   Strands are
   independent: they are solved in parallel, each sequentially, so the
   result does not depend on the thread count. The root is not moved by
   FTL (pin it, make it kinematic or use the hair builder). A pinned or
   kinematic particle inside a strand leads the particles after it, and
   the segment into it is left at whatever length the hand makes; when it
   is released (pbd_particle_set_kinematic 0, pbd_particle_unpin, pbd_particle_set_mass from 0) its
   strand is put back at rest length at once, in positions only, keeping
   every velocity: the gap was not motion and adds no energy. */

typedef struct pbd_strands_desc {
    const int *particles;     /* world particles, root first, strand after strand */
    const int *strand_starts; /* strand_count + 1 offsets into particles; a strand has >= 2
                                  particles; a particle belongs to one strand only */
    int strand_count;
    float damping; /* s_damping in [0, 1]; default 0.9 (see above) */
} pbd_strands_desc;

/* Hair: strand_count straight strands grown from roots on a surface along
   its normals, roots kinematic. The surface moves rigidly
   (pbd_strands_set_transform) or deforms (pbd_strands_set_roots). */
typedef struct pbd_hair_desc {
    const float *root_positions; /* strand_count*3, in the surface's frame */
    const float *root_normals;   /* strand_count*3, growth directions (normalised here) */
    int strand_count;
    int particles_per_strand; /* >= 2, root included; default 16 */
    float length;             /* m, default 0.2 */
    float mass;               /* kg per particle, > 0; default 1e-4 */
    float radius;             /* collision radius, default 0.002 */
    float damping;            /* s_damping, default 0.9 */
    int clamped;              /* 1 (default): the first segment is kinematic too, so a
                                    strand leaves the surface along its normal */
    float position[3];        /* the surface's initial pose; default origin, */
    float rotation[4];        /* identity (x y z w) */
} pbd_hair_desc;

PBDDEF pbd_strands_desc pbd_strands_desc_default(void);
PBDDEF pbd_hair_desc pbd_hair_desc_default(void);
PBDDEF pbd_result pbd_add_strands(pbd_world *w, const pbd_strands_desc *desc, pbd_strands *out);
/* particles (optional) receives the hair's particles: strand s particle i
   is particles.first + s * particles_per_strand + i. */
PBDDEF pbd_result pbd_add_hair(pbd_world *w, const pbd_hair_desc *desc, pbd_strands *out, pbd_range *particles);
/* The strands' constraints (and a hair's root frame) go; their particles
   stay in the world until pbd_remove_particles removes them (a hair's
   too): the free ones fall, the kinematic ones stay where they are (a
   hair's roots, and its first particles when clamped) until
   pbd_particles_set_kinematic(w, range, 0) frees them. */
PBDDEF pbd_result pbd_remove_strands(pbd_world *w, pbd_strands strands);
/* The roots reach this pose at the end of the next step (linearly over its
   substeps, like kinematic targets). rotation NULL keeps the rotation. A
   position, or a root it places, beyond PBD_MAX_COORDINATE is refused. */
PBDDEF pbd_result pbd_strands_set_transform(pbd_world *w, pbd_strands s, const float *position, const float *rotation);
/* Per-root world positions and normals (strand_count*3 each) for the end
   of the next step: roots on a deforming mesh. normals may be NULL (keep
   the current root directions). */
PBDDEF pbd_result pbd_strands_set_roots(pbd_world *w, pbd_strands s, const float *positions, const float *normals);
PBDDEF pbd_result pbd_strands_set_damping(pbd_world *w, pbd_strands s, float damping);
PBDDEF pbd_result pbd_strands_info(const pbd_world *w, pbd_strands s, int *strand_count, int *particle_count);
/* One FTL pass over a chain of n >= 2 points (3 floats each): point i moves
   onto the sphere of radius rest[i-1] about point i-1, for i = 1..n-1 in
   order. corrections (optional, n*3 floats) receive the moves d_i. */
PBDDEF pbd_result pbd_ftl_project(float *points, int n, const float *rest, float *corrections);

// ==== tearing ===============================================================
/* A cloth tears where an edge (a distance constraint of its stretch group)
   is longer than threshold * rest, or where a triangle's largest principal
   stretch (its rest shape taken when tearing is enabled) exceeds
   threshold: one of its vertices is split by the plane through it normal
   to the edge or to the principal direction. The triangles on the far side get a
   new particle (a copy: position, velocity, pin; a kinematic vertex's copy
   is not kinematic, so a hand holds the particle it grabbed and the side
   torn off it falls free; the vertex's mass is shared in proportion to
   the triangles' areas, so the total is kept; a split that would leave
   either side a mass below PBD_MIN_MASS does not happen: the cloth stays
   whole at that vertex, the other end of the edge is tried instead, and
   the skipped split is not counted in *splits), the
   object's groups are rewritten (edges on the crack are duplicated,
   bending across it removed, strain-limit triangles renamed) and coloured
   again. Tearing runs between steps in pbd_world_tear, which ALLOCATES
   (new particles and constraint arrays), unlike pbd_world_step. On error
   nothing changes (per object). Other groups (attachments, user
   constraints) and damping clusters keep the original particle; a group
   the crack empties is disabled. Collision surfaces (self-collision)
   follow the faces like the object's own triangles do, so a torn-off
   piece collides with its own vertices. Long range attachments follow
   the crack: a tether grows in the ratio the crack lengthened the path
   along the mesh from its anchor, a piece the crack cut off from an
   anchor loses its tethers to it, and a split vertex's copy gets the
   tethers that still reach their anchors from its side. The new particles are appended to the world; they
   belong to the object (pbd_remove_object removes them with it) and join
   its range when it holds the world's last particles, else the object
   stops being treated as isolated (SOLVER step 5: no angular momentum
   restore). Either way its damping (pbd_object_set_damping) takes each
   piece the cracks leave, copies included, on its own: a piece torn off
   every pin falls freely, damped towards its own rigid motion (at most at
   a self-collision surface's speed limit, when the cloth has one); a
   piece still on a pin is damped towards the pins. */

typedef struct pbd_tearing_desc {
    pbd_object object;    /* a cloth object (not a balloon: its volume needs a closed skin) */
    const int *triangles; /* the triangles given to its builder (local vertex indices) */
    int triangle_count;
    float threshold; /* > 1; default 1.5 (edge length ratio and principal stretch) */
    int max_splits;  /* per pbd_world_tear call and object, in [1, INT_MAX / 16]; default 64 */
} pbd_tearing_desc;

PBDDEF pbd_tearing_desc pbd_tearing_desc_default(void);
PBDDEF pbd_result pbd_add_tearing(pbd_world *w, const pbd_tearing_desc *desc, pbd_tearing *out);
/* The cloth stops tearing; what has torn stays torn, and
   pbd_object_triangles still gives its current triangles (to draw it).
   pbd_add_tearing may start it again. */
PBDDEF pbd_result pbd_remove_tearing(pbd_world *w, pbd_tearing tearing);
/* Splits the vertices of overstretched edges of every tearable object;
   *splits (optional) receives how many (= new particles). Call between steps.
   The one exception to "on error nothing observable changes": the
   objects tear one after the other, each whole or not at all, and the
   tables of the new particles (damping pieces, particle contact,
   self-collision) are rebuilt after the cracks; when memory runs out
   after a crack is in (a later object's tear, or those tables), the call
   returns PBD_ERROR_OUT_OF_MEMORY with the tears made so far kept
   (*splits counts them), and the next pbd_world_step builds the tables
   first (or fails, changing nothing, while memory is short): it then
   steps as if the tear had had its memory (tests/test_tearing.c). */
PBDDEF pbd_result pbd_world_tear(pbd_world *w, int *splits);
/* The current triangles (world particle indices, 3 per triangle) of an
   object that tears or tore (pbd_remove_tearing keeps them): *count
   receives their number, at most max are written. */
PBDDEF pbd_result pbd_object_triangles(const pbd_world *w, pbd_object object, int *triangles, int max, int *count);

// ==== damping clusters ======================================================
/* Global symmetric damping (survey 3.7; Mueller et al. 2007, in the spirit
   of Schmitt et al. 2009) over a user list of particles: every substep the
   velocities move towards the cluster's rigid motion v_cm + omega x r by
   1 - exp(-damping h). Linear and angular momentum of the cluster are kept;
   only relative motion is damped. A cluster that holds pinned or kinematic
   particles is damped towards their rigid motion instead (as objects are:
   pbd_object_set_damping). */

PBDDEF pbd_result pbd_add_damping_cluster(pbd_world *w, const int *particles, int count, float damping,
                                          pbd_damping_cluster *out);
PBDDEF pbd_result pbd_remove_damping_cluster(pbd_world *w, pbd_damping_cluster cluster);
PBDDEF pbd_result pbd_damping_cluster_set_damping(pbd_world *w, pbd_damping_cluster c, float damping);

// ==== self-collision ========================================================
/* Cloth self-collision and cloth-cloth collision (survey 3.4.3). A
   collision surface is a triangle mesh over world particles with a
   thickness. Every substep:
     1. the predicted motion of every surface vertex is limited to
        `thickness` per substep (a maximum speed of thickness / h), for the
        prediction and again for the solved positions: with it, and with
        candidates searched within the reach of that motion, a crossing
        cannot happen between two discrete checks. The limit is a speed:
        a 2 mm cloth stepped at 1/60 s in 4 substeps falls at most
        0.002 * 4 * 60 = 0.48 m/s; raise the substeps (or the thickness)
        for faster motion;
     2. candidates are the vertex-triangle pairs closer than sqrt(2)
        thicknesses plus the reach of both (the projection acts within a
        thickness of the plane and a thickness sideways) and the edge pairs
        with inner closest points closer than a thickness plus the reach,
        at most 8 per vertex and 4 per edge (the nearest). Vertices that
        start the step at one point (a vertex torn in two, a seam the mesh
        did not weld) are neighbours, as a vertex and its own triangles
        are: no pair of theirs is a candidate until they part (a torn-off
        piece was held in mid-air by such pairs). The search groups
        vertices, triangles and edges into spatial clusters of 32 (built
        when the surfaces change), finds overlapping cluster boxes through
        the shared hash grid, rebuilt each substep by counting sort, and
        tests a member against a cluster's 32 boxes at once; the kept
        candidates do not depend on the threads or the search order;
     3. point-triangle constraints C = (q - p1) . n - thickness >= 0 with
        the triangle's winding chosen so that the vertex stays on the side it
        was on at the start of the step (survey 3.4.3, both forms), active
        while the vertex is over the triangle; edge-edge constraints keep
        the closest points of two crossing-capable edges `thickness` apart
        along their separation at the start of the step;
     4. the candidates are coloured as the groups are (greedily, in a
        fixed order: no two of a colour share a vertex; what does not fit
        in 63 colours goes to a serial overflow colour) and projected every
        iteration after the constraint groups and plugins, before the
        collider contacts, as coloured Gauss-Seidel: the threads share
        each colour (fewer than 512 candidates: one thread runs the
        colours in turn), so any thread count gives the same bits. The
        point-triangle candidates of a colour are tested W at a time (a
        SIMD twin of the scalar tests), and only those that may act are
        projected. The velocity pass removes the separating velocities in
        the same colours;
     5. after the last iteration, a fail-safe (serial): a vertex that still
        passed through a candidate triangle during the substep (a
        continuous test of the straight paths, skipped for pairs whose
        distance at the start exceeds their motion; the threads search
        for a crossing, the serial pass runs only when there is one) goes
        back to where the substep began, with the triangle's free particles
        (they end it at rest there). The speed limit acts from outside, like
        a collider: the angular momentum an isolated object keeps through
        the substep (SOLVER step 5) is taken after it.
   Cost (bench/selfcollision.c, a 100 x 100 cloth): draped near itself,
   a step costs about 3.3-3.6x one without self-collision; folded in two
   layers pressed together, with about 90 000 candidates per substep
   (every vertex has several in the other layer within the padding),
   12-14x.
   What the guarantee (no vertex passes through a triangle) rests on, and
   where it ends (tests/test_selfcollision.c): the fail-safe sees only the
   kept candidates, so a vertex with more than 8 triangles within the reach
   (a cloth wound into a tight rope: a 0.2 m strip twisted three turns, or
   two with its ends brought close) can pass through a ninth; and pinned
   and kinematic particles move as told, so a pinned or kinematic row
   driven into a jammed pile of cloth passes through it. Two turns of that
   strip, a cloth thrown onto itself faster than the limit, a sleeve
   collapsing onto itself and two cloths dragged across each other do not
   cross.
   Surfaces collide with each other (two cloths) and, with self_collision
   set, with themselves. The thickness must be smaller than about half the
   rest distance between features of the mesh that share no vertex (about
   half an edge length), or the rest state itself would be in contact; a
   self-colliding surface as thick as its rest gap (the median of its
   triangles' smallest heights: a grid's edge / sqrt(2)) or thicker is
   refused with PBD_ERROR_INVALID_ARGUMENT (a 24 x 24 cloth of 4.3 cm
   edges, gap 3.07 cm, rests at 3 cm; at 3.2 cm, before this check, it
   flew apart). A
   particle belongs to at most one surface. Surfaces are part of the
   snapshot; candidates are rebuilt every substep. */
typedef struct pbd_collision_surface_desc {
    const int *triangles; /* triangle_count*3 world particle indices */
    int triangle_count;
    float thickness;    /* > 0, default 0.01 m */
    int self_collision; /* default 1: also against its own triangles */
} pbd_collision_surface_desc;

PBDDEF pbd_collision_surface_desc pbd_collision_surface_desc_default(void);
PBDDEF pbd_result pbd_add_collision_surface(pbd_world *w, const pbd_collision_surface_desc *desc, pbd_surface *out);
/* The surface of a cloth made by pbd_add_cloth(w, desc, cloth): its
   triangles (the builder's vertex numbers, reordered or not) mapped to
   world particles. */
PBDDEF pbd_result pbd_add_cloth_self_collision(pbd_world *w, pbd_object cloth, const pbd_cloth_desc *desc,
                                               float thickness, pbd_surface *out);
/* A surface of either add; the self-collision tables are rebuilt without
   it (refused, with nothing changed, when that needs memory it cannot
   get). */
PBDDEF pbd_result pbd_remove_collision_surface(pbd_world *w, pbd_surface surface);
PBDDEF int pbd_world_surface_count(const pbd_world *w);
/* A surface's current triangles (world particle indices, 3 per triangle;
   tearing moves them onto the split vertices): *count receives their
   number, at most max are written. */
PBDDEF pbd_result pbd_surface_triangles(const pbd_world *w, pbd_surface surface, int *triangles, int max, int *count);
/* Point-triangle and edge-edge candidates of the last substep. */
PBDDEF int pbd_world_self_contact_count(const pbd_world *w);
/* The candidates of the last substep as world particle quadruples (4 ints
   each): first the point-triangle ones {vertex, a, b, c}, then the
   edge-edge ones {a0, a1, b0, b1}. Writes at most max quadruples; *count
   receives how many there are (pbd_world_self_contact_count),
   *point_triangle (optional) how many of them are point-triangle. */
PBDDEF pbd_result pbd_world_self_contacts(const pbd_world *w, int *quads, int max, int *count, int *point_triangle);
// ==== plugins ===============================================================
/* Extensions (pbd_sm.h, pbd_upsample.h, your own solvers) hook into the
   substep loop through a small table of callbacks, so that pbd.h never
   depends on them (docs/DESIGN.md section 4.6). A plugin works on the world's
   particles: it reads and moves the predicted positions p in `project`,
   like a constraint group, and may change velocities after the velocity
   update. A restore keeps the plugins (and fails when the snapshot lacks
   particles a plugin uses). A plugin that keeps state of its own between
   steps (pbd_sm.h's bodies: rotations, plastic states) puts it in the
   world's snapshot through save_state / load_state:

   PLUGIN STATE IN SNAPSHOTS. pbd_world_save appends the state of every
   live plugin that has save_state, in the order the plugins were added,
   each tagged with the plugin's name and its place in that order.
   pbd_world_restore gives each back to the plugin of the target world at
   the same place: the world the snapshot came from, or one rebuilt the
   same way (a saved game: the same plugins added in the same order, then
   the restore). The target's plugins with save_state must match the
   snapshot's, one for one, name for name; a missing, extra or other
   plugin, and state its plugin refuses (load_state), fail with
   PBD_ERROR_BAD_SNAPSHOT and a message naming the plugin, and change
   nothing. Plugins without save_state are not matched (they keep what
   they have, as before). A snapshot of version 7 (before plugin state,
   which has none) still restores: every plugin keeps its current state. */

typedef struct pbd_solve_context {
    pbd_world *world;
    float *x; /* particle_count*4: positions at the start of the substep
                             (x y z inverse-mass); in end_substep already x = p */
    float *p; /* particle_count*4: predicted positions, moved by project */
    float *v; /* particle_count*4: velocities */
    int particle_count;
    float h; /* substep length (s) */
    int substep, substeps;
    int iteration, iterations; /* iteration is -1 outside the iteration loop */
    double time;               /* world time at the start of the substep */
    int thread, thread_count;  /* this thread and the team of the parallel region */
} pbd_solve_context;

/* Every callback is optional. With parallel = 0 (default) each is called by
   one thread. With parallel = 1 every thread of the substep's OpenMP
   region calls it, and it shares its loops with orphaned
   `#pragma omp for` (all threads must meet the same worksharing
   constructs); compile the plugin with the same OpenMP setting as pbd.h. */
typedef struct pbd_plugin_desc {
    const char *name; /* for messages; copied (up to 31 chars) */
    void *user;
    const void *kind; /* optional: an address only the extension knows (a static), which
                         pbd_plugin_get hands back, so that it can tell its own plugins apart */
    int parallel;
    int particle_end; /* 1 + the largest particle index the plugin touches */
    long work;        /* elements per iteration, for the serial/parallel threshold */
    /* 1: on a GPU world (pbd_cuda.cu) the substep callbacks get a context
       whose x, p and v are the device's arrays, and run kernels of their
       own on CUDA's default stream: no copy between host and device
       (pbd_sm.h's plugins on a GPU world; a program with CUDA code can do
       the same). 0 (default): host callbacks, on a GPU world bracketed by
       copies of x, p and v. Ignored on a CPU world. */
    int device;
    /* after the prediction p = x + h v, before contacts (oriented particles predict q) */
    void (*begin_substep)(void *user, const pbd_solve_context *c);
    /* every iteration, after the constraint groups, before the contacts */
    void (*project)(void *user, const pbd_solve_context *c);
    /* every iteration, after the particle, self- and collider contacts: the
       last projection of the iteration, for a plugin whose constraint must
       hold exactly at the end of it (pbd_sm.h's rigid bodies: the
       contacts move single particles, so a body matched only before them
       would end every substep bent); pbd_world_particle_contact_push tells
       which particles a collider holds */
    void (*project_after_contacts)(void *user, const pbd_solve_context *c);
    /* after v = (p - x) / h, x = p and the contacts' velocity pass */
    void (*end_substep)(void *user, const pbd_solve_context *c);
    /* serial, once per pbd_world_step before / after the substeps */
    void (*begin_step)(void *user, pbd_world *w, float dt);
    void (*end_step)(void *user, pbd_world *w, float dt);
    /* serial, after end_step of a step that produced NaN or infinity: the
       world went back to its state before the step (see pbd_world_step),
       and the plugin puts its own state back too (a copy taken in
       begin_step, into memory sized when the plugin was made) */
    void (*rollback)(void *user, pbd_world *w);
    /* called by pbd_remove_plugin and pbd_world_destroy */
    void (*destroy)(void *user);
    /* called by the removals of particles (pbd_remove_object, _fluid,
       _particles) before they change anything: marked[i] != 0 for the n
       particles about to go; returns one of them that the plugin uses,
       or -1, and a used one refuses the removal. NULL: the plugin may use
       any particle below particle_end. */
    int (*uses_particles)(void *user, const unsigned char *marked, int n);
    /* The plugin's own state in the world's snapshot (optional: both or
       neither; docs/DESIGN.md section 3.7). save_state(user, w, NULL)
       returns the size of the state in bytes; save_state(user, w, out)
       writes exactly that many bytes to out (not aligned) and returns the
       size. A GPU plugin fetches its device state first. load_state is
       called by pbd_world_restore for the state this plugin (or its twin in
       a rebuilt world) saved, twice: first with commit = 0 to check it,
       changing nothing: on bad data (a size, count or value this plugin
       could not have saved) it returns an error (any pbd_result but
       PBD_OK) after reporting why with pbd_world_fail(NULL, r, ...), and
       the restore then fails with PBD_ERROR_BAD_SNAPSHOT quoting that
       message and changes nothing; then, once every check of the restore
       passed and the world took the snapshot, with commit = 1 to take the
       state, which must not fail (a GPU plugin sends it to the device). w
       is the world being restored. */
    size_t (*save_state)(void *user, const pbd_world *w, void *out);
    pbd_result (*load_state)(void *user, pbd_world *w, const void *in, size_t size, int commit);
} pbd_plugin_desc;

PBDDEF pbd_plugin_desc pbd_plugin_desc_default(void);
PBDDEF pbd_result pbd_add_plugin(pbd_world *w, const pbd_plugin_desc *desc, pbd_plugin *out);
/* Calls its destroy callback. */
PBDDEF pbd_result pbd_remove_plugin(pbd_world *w, pbd_plugin p);
PBDDEF pbd_result pbd_plugin_set_work(pbd_world *w, pbd_plugin p, long work);
/* A live plugin's desc.kind and desc.user (either output may be NULL);
   PBD_ERROR_INVALID_HANDLE when the handle names no live plugin, with no
   message: an extension that names its own things by their plugin's
   handle reports its own, as pbd_sm.h does. */
PBDDEF pbd_result pbd_plugin_get(const pbd_world *w, pbd_plugin p, const void **kind, void **user);
PBDDEF int pbd_world_plugin_count(const pbd_world *w);
/* The index-th plugin (0 <= index < pbd_world_plugin_count, in the order
   of their slots), id 0 for an index out of range: for an extension that
   looks at its other things in a world (pbd_sm.h refuses an oriented set
   on particles that another set already holds). */
PBDDEF pbd_plugin pbd_world_plugin(const pbd_world *w, int index);
/* Errors and memory of extensions, so that they follow pbd.h's conventions
   (CONVENTIONS; docs/DESIGN.md sections 2.3 and 2.4).
   pbd_world_fail reports an error as pbd.h's own calls do: it writes
   "PBD_ERROR_NAME: <printf-formatted message>" into the world's message
   (pbd_world_last_error), calls the world's log callback, and returns r,
   so an extension writes `return pbd_world_fail(w, PBD_ERROR_..., "...")`.
   The message also goes to this thread's pbd_last_error(), which is all
   it writes when w is NULL (a call that has no world). It changes nothing
   else in the world.
   pbd_world_fail_last(w, r) reports this thread's pbd_last_error() again
   on w (the message without its "PBD_ERROR_NAME: "), for a call on a world
   whose helper without one failed; it returns r, and does nothing when r
   is PBD_OK. pbd_world_fail_in(w, fn, r) reports it again (on w, or on
   this thread only when w is NULL) with "fn: " in front, unless it names
   fn already: a public call whose shared helper failed says which call
   it was.
   pbd_world_alloc / pbd_world_free allocate the way the world does: with
   pbd_world_desc.allocator when one was given, else PBD_MALLOC / PBD_FREE
   (of the translation unit with pbd.h's implementation); the memory of
   everything an extension adds to a world should come from them.
   pbd_world_free(w, NULL) does nothing. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
PBDDEF pbd_result
pbd_world_fail(const pbd_world *w, pbd_result r, const char *fmt, ...);
PBDDEF pbd_result pbd_world_fail_last(const pbd_world *w, pbd_result r);
PBDDEF pbd_result pbd_world_fail_in(const pbd_world *w, const char *fn, pbd_result r);
PBDDEF void *pbd_world_alloc(pbd_world *w, size_t size);
PBDDEF void pbd_world_free(pbd_world *w, void *ptr);
/* v in the fewest digits, 6 to 9, that read back as v, into buf (size
   bytes; 16 hold any float), for messages that compare a value with a
   bound: %g prints the float just below PBD_MIN_MASS as 1e-12 too ("1e-12
   kg is outside [1e-12, 1e+12] kg"); this prints 9.999999e-13. Returns
   buf; "" (and writes nothing) when buf is NULL or size 0. */
PBDDEF const char *pbd_format_float(float v, char *buf, size_t size);
/* Graph colouring for an extension's parallel solver: the greedy
   colouring of pbd.h's own constraint groups and self-collision candidates
   (docs/DESIGN.md section 5.1), one code for all. The count elements of
   `arity` vertex indices each (elements[arity*e + i]; an index < 0 is no
   vertex, as an attachment's world point) are coloured in their order so
   that no two elements of a colour share a vertex, except in the overflow
   colour: what does not fit in PBD_MAX_COLORS - 1 colours goes to a last
   colour whose elements share vertices and must be solved one by one.
   balanced = 0: first fit (each element takes the smallest colour free at
   its vertices); 1: balanced (the free colour with the fewest elements, a
   new colour only when every open one is blocked: even colour sizes, to
   fill SIMD batches; pbd.h's groups). colors receives each element's
   colour, 0 .. *color_count - 1 with the overflow (if any) the last;
   starts the starts of the colours in the elements sorted stably by colour
   (colour c is [starts[c], starts[c + 1]), *color_count + 1 ints; its room
   max_starts must be at least min(count, PBD_MAX_COLORS) + 1), from which
   the caller reorders its elements; *overflow (may be NULL) whether the
   last colour is the overflow. Indices must be below vertex_count. w (may
   be NULL) gives the allocator of the scratch (8 bytes per vertex) and
   receives the message of an error (pbd_world_fail's rules); on an error
   nothing is written. */
#define PBD_MAX_COLORS 64
PBDDEF pbd_result pbd_color_elements(pbd_world *w, const int *elements, int count, int arity, int vertex_count,
                                     int balanced, int *colors, int *starts, int max_starts, int *color_count,
                                     int *overflow);
/* A repeated element, for the builders' checks (a triangle or
   tetrahedron listed twice, an edge twice either way round): of the count
   elements of `arity` (2..4) vertex indices each, the first one that
   repeats an earlier one (the same vertices in any order) into *second
   and that earlier one into *first. Returns 1 when there is one, 0 when
   there is none, -1 when out of memory or arity is not 2..4. Sorts a copy
   of the elements' sorted vertices: O(count log count), 20 bytes an
   element through w's allocator (w may be NULL); writes no message. */
PBDDEF int pbd_find_repeated_element(pbd_world *w, const int *elements, int count, int arity, int *first, int *second);
/* Whether count triangles (3 vertex indices each) are closed and
   consistently oriented, every directed edge in exactly one triangle and
   its reverse in exactly one: 0 when they are (*from and *to untouched);
   else the smallest directed
   edge (by from, then to) that is not so into *from and *to, and 1 when
   two triangles take it in the same direction (not consistently oriented,
   or not a manifold), 2 when no triangle takes its reverse (an open mesh,
   or not consistently oriented); -1 when out of memory. O(count log
   count), 24 bytes a triangle through w's allocator (w may be NULL);
   writes no message. For the builders' checks, like the finder above. */
PBDDEF int pbd_find_open_edge(pbd_world *w, const int *triangles, int count, int *from, int *to);
/* -ffast-math (or -ffinite-math-only) in a file that holds an
   implementation: each header's implementation section warns once, since
   the solver's results then differ from what the tests check (SIMD and
   scalar, thread counts and machines disagree, and make test's
   multi-resolution cloth and smooth shape-matching weights fail); inputs are
   still checked and failed steps still roll back (pbd__finite_bits).
   PBD_ALLOW_FAST_MATH silences it. */
#if (defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__ > 0)) && \
    !defined(PBD_ALLOW_FAST_MATH)
#define PBD__FAST_MATH_WARN 1
#else
#define PBD__FAST_MATH_WARN 0
#endif
/* Whether x is neither NaN nor infinite, read from its exponent's bits:
   the finiteness check of every input and every step, in all three
   headers. Not isfinite() or x == x: -ffast-math (and -ffinite-math-only,
   common in game builds) lets the compiler take those as always true, and
   every NaN check, every refused input and every rolled-back step would
   vanish with them; the bits cannot be assumed away. */
static inline PBD_HD int pbd__finite_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7f800000u) != 0x7f800000u;
}
static inline PBD_HD int pbd__finite_bits_d(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}
/* The symmetric eigen solver of the extensions (shape matching's
   moment matrices, the upsamplers' fits), one code for all: cyclic Jacobi
   rotations on the n x n row-major symmetric A (overwritten: its diagonal
   ends up holding the eigenvalues, in no particular order), eigenvector k
   into column k of V (n x n). It sweeps until the off-diagonal's squared
   sum is at most 1e-32 times the diagonal's (double rounding squared), at
   most 100 times; returns the sweeps made. Deterministic: the same bits
   on every machine that rounds doubles by IEEE 754. */
PBDDEF int pbd_sym_eigen(int n, double *A, double *V);
/* pbd_sym_eigen's code, which the extensions' GPU kernels call too
   (pbd_cuda.cu): Jacobi stops when the off-diagonal^2 is at most
   PBD__JACOBI_OFF_REL times the diagonal^2, double precision squared
   (larger leaves inexact eigenvectors, smaller never stops on rounding),
   and after PBD__JACOBI_SWEEPS sweeps at most (converged matrices take
   under 10; a NaN input stops at once). */
#define PBD__JACOBI_OFF_REL 1e-32
#define PBD__JACOBI_SWEEPS 100
static inline PBD_HD int pbd__sym_eigen_hd(int n, double *A, double *V) {
    for (int i = 0; i < n * n; ++i) V[i] = 0;
    for (int i = 0; i < n; ++i) V[i * n + i] = 1;
    int sweep = 0;
    for (; sweep < PBD__JACOBI_SWEEPS; ++sweep) {
        double off = 0, diag = 0;
        for (int p = 0; p < n; ++p) {
            diag += A[p * n + p] * A[p * n + p];
            for (int q = p + 1; q < n; ++q) off += A[p * n + q] * A[p * n + q];
        }
        if (!(off > PBD__JACOBI_OFF_REL * diag)) break; /* converged (or NaN) */
        for (int p = 0; p < n; ++p)
            for (int q = p + 1; q < n; ++q) {
                double apq = A[p * n + q];
                if (apq == 0) continue;
                /* the rotation that zeroes A[p][q] (Golub and Van Loan, section 8.5.2), the smaller angle */
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
    return sweep;
}
/* Particles a plugin's internal forces connect: the objects they belong to
   may exchange angular momentum, so the solver stops restoring theirs
   (see SOLVER step 5). Call it for forces between objects or with the
   outside world; forces within one object need not. */
PBDDEF pbd_result pbd_world_mark_coupled(pbd_world *w, const int *particles, int count);
/* Signed distance and outward unit normal of the closest surface point of
   a collider at its current pose (normal may be NULL). */
PBDDEF pbd_result pbd_collider_closest(const pbd_world *w, pbd_collider c, const float *point, float *distance,
                                       float *normal);

#ifdef __cplusplus
}
#endif
#endif /* PBD_H_INCLUDED */

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#ifdef PBD_IMPLEMENTATION
#ifndef PBD_IMPLEMENTATION_INCLUDED
#define PBD_IMPLEMENTATION_INCLUDED
#if PBD__FAST_MATH_WARN && !defined(PBD__FAST_MATH_WARNED)
#define PBD__FAST_MATH_WARNED
#warning \
    "pbd: -ffast-math changes the solver's results (inputs are still checked): compile this file with -fno-fast-math, or define PBD_ALLOW_FAST_MATH"
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ==== config ================================================================

#if defined(PBD_MALLOC) != defined(PBD_FREE)
#error "pbd.h: define both PBD_MALLOC and PBD_FREE, or neither"
#endif
#ifndef PBD_MALLOC
#define PBD_MALLOC(sz) malloc(sz)
#define PBD_FREE(p) free(p)
#endif
#ifndef PBD_ASSERT
#include <assert.h>
#define PBD_ASSERT(x) assert(x)
#endif

#if defined(_OPENMP) && !defined(PBD_NO_OPENMP)
#include <omp.h>
#define PBD__OPENMP 1
#else
#define PBD__OPENMP 0
#endif

/* SIMD through SIMDe's prefixed API (never native aliases), as chosen in
   the declarations (PBD_SIMD_LANES, "==== config"); otherwise the scalar
   reference path. Particles are 4 floats, so the per-particle passes use
   one 128-bit register per particle on every instruction set; the
   constraint kernels keep their scalar twins. */
#define PBD__W PBD_SIMD_LANES
#define PBD__SIMD (PBD_SIMD_LANES > 1)
#if PBD_SIMD_LANES > 1
#if !defined(I) && !defined(complex)
#define PBD__NO_COMPLEX_MACROS
#endif
#include PBD_SIMD_SIMDE_H
#ifdef PBD__NO_COMPLEX_MACROS /* SIMDe's SVML includes <complex.h> in strict C (AVX-512): I and complex are the user's */
#undef I
#undef complex
#undef PBD__NO_COMPLEX_MACROS
#endif
#endif
#if PBD_SIMD_AVX512 && defined(__GNUC__) && !defined(__clang__) && defined(__cplusplus)
/* g++ 12 reports its own _mm512_undefined_ps() as "used uninitialized"
   where AVX-512 unpack intrinsics are inlined: a false positive in the
   compiler's header, silenced for the implementation only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define PBD__POP_DIAGNOSTICS 1
#endif

#if PBD__OPENMP
#define PBD__PRAGMA(x) _Pragma(#x)
#else
#define PBD__PRAGMA(x)
#endif
/* A hint to fetch the cache line at p for reading (no effect on results;
   prefetches never fault, so p may lie past the end of an array; none in
   GPU code). */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__)
#define PBD__PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 0)
#define PBD__PREFETCH_W(p) __builtin_prefetch((const void *)(p), 1, 3) /* for writing */
#else
#define PBD__PREFETCH(p) ((void)(p))
#define PBD__PREFETCH_W(p) ((void)(p))
#endif
/* Below this much work (particles + constraints) a step runs serially,
   because a barrier costs microseconds: on cloth grids at 4 substeps x 4
   iterations, 2 threads start to pay at about 1000 particles and 6000
   constraints. */
#define PBD__PARALLEL_MIN 8192

PBDDEF const char *pbd_simd_path(void) {
#if PBD_SIMD_AVX512
    return "avx512";
#elif PBD_SIMD_AVX2
    return "avx2";
#elif PBD_SIMD_NEON
    return "neon";
#elif PBD_SIMD_WASM
    return "wasm";
#elif PBD_SIMD_SSE
    return "sse";
#else
    return "scalar";
#endif
}

PBDDEF int pbd_simd_width(void) { return PBD__W; }

PBDDEF int pbd_max_threads(void) {
#if PBD__OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// ==== results ===============================================================

static const char *const pbd__result_text[][2] = {
    {"PBD_OK", "PBD_OK"},
    {"PBD_ERROR_NULL_POINTER", "PBD_ERROR_NULL_POINTER: a required pointer is NULL"},
    {"PBD_ERROR_INVALID_ARGUMENT", "PBD_ERROR_INVALID_ARGUMENT: a parameter is out of its range"},
    {"PBD_ERROR_INDEX_OUT_OF_RANGE", "PBD_ERROR_INDEX_OUT_OF_RANGE: no such particle, group, object or collider"},
    {"PBD_ERROR_NOT_FINITE", "PBD_ERROR_NOT_FINITE: NaN or infinity in the input, or made by a step (the world is back "
                             "at its state before it)"},
    {"PBD_ERROR_NEGATIVE_MASS", "PBD_ERROR_NEGATIVE_MASS: masses and densities must be >= 0"},
    {"PBD_ERROR_DEGENERATE", "PBD_ERROR_DEGENERATE: degenerate rest geometry"},
    {"PBD_ERROR_INVALID_TIME_STEP",
     "PBD_ERROR_INVALID_TIME_STEP: dt must be in [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] = [1e-6, 1] s"},
    {"PBD_ERROR_OVERFLOW", "PBD_ERROR_OVERFLOW: sizes overflow"},
    {"PBD_ERROR_OUT_OF_MEMORY", "PBD_ERROR_OUT_OF_MEMORY: allocation failed"},
    {"PBD_ERROR_BAD_SNAPSHOT", "PBD_ERROR_BAD_SNAPSHOT: not a snapshot of this version"},
    {"PBD_ERROR_NOT_CLOSED", "PBD_ERROR_NOT_CLOSED: mesh is not closed and consistently oriented"},
    {"PBD_ERROR_INVALID_HANDLE", "PBD_ERROR_INVALID_HANDLE: the handle names nothing (0, or removed)"},
    {"PBD_ERROR_UNSUPPORTED", "PBD_ERROR_UNSUPPORTED: not on this world's device, or not in this build"}};

/* 0: the code's name, 1: name and description. */
static const char *pbd__result_str(pbd_result r, int full) {
    int i = -(int)r;
    if (i < 0 || i >= (int)(sizeof pbd__result_text / sizeof pbd__result_text[0])) return "unknown pbd_result";
    return pbd__result_text[i][full];
}

PBDDEF const char *pbd_result_string(pbd_result r) { return pbd__result_str(r, 1); }

/* Thread-local storage where the language or the compiler has it. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define PBD__THREAD_LOCAL thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define PBD__THREAD_LOCAL _Thread_local
#elif defined(__GNUC__) || defined(__clang__)
#define PBD__THREAD_LOCAL __thread
#elif defined(_MSC_VER)
#define PBD__THREAD_LOCAL __declspec(thread)
#else
#define PBD__THREAD_LOCAL /* no thread-local storage: one buffer for all threads */
#endif
/* The message buffer of calls that have no world (pbd_last_error). */
static PBD__THREAD_LOCAL char pbd__last_error[256]; /* as large as pbd_world.error */

PBDDEF const char *pbd_last_error(void) { return pbd__last_error; }

// ==== math ==================================================================

// ---- tolerances ----
/* Every epsilon of the implementation, named by its role. A define keeps
   its literal's exact text and type (1e-9 is a double and promotes a float
   expression to double, 1e-9f is not), so a name changes no result.
   Two roles that share a value have two names. Lengths are in metres;
   float has 24 bits (7 digits), its smallest normal number is 1.2e-38. */

/* Directions and degenerate shapes. */
/* a distance under 1 nm has no direction (d / l is rounding noise): the constraint's gradient is zero, skipped */
#define PBD__LEN_MIN 1e-9f
/* a vector under 1e-12 whose direction a query needs gets its fallback (or, given, is refused): 1 / l stays finite */
#define PBD__DIR_MIN 1e-12f
/* |(b - a) x (c - a)| (m^2, twice the area) under which a triangle has no normal: a 1 nm by 1 nm triangle */
#define PBD__NORMAL_LEN_MIN 1e-18f
/* a dihedral wing's squared normal (m^4): the product of two stays a normal float (1e-36 > 1.2e-38) in 1 / sqrt */
#define PBD__NORMAL_LEN2_MIN 1e-18f
/* SPH: a neighbour nearer than 1e-9 h is coincident: the spiky gradient's d / r has no direction */
#define PBD__KERNEL_R_MIN 1e-9f
/* |a x b| under which a cotangent weight is 0 (angle 0 or pi): its division by |a x b| would overflow */
#define PBD__COT_SIN_MIN 1e-20f
/* a segment's squared length (m^2) under which it is a point: no edge contact (a 1e-10 m edge) */
#define PBD__EDGE_LEN2_MIN 1e-20f
/* den / (|d1|^2 |d2|^2) = sin^2 of two segments' angle under which they are parallel: no division by a den of ~0 */
#define PBD__PARALLEL_SIN2 1e-12f
/* |q|^2 of a given rotation under which it is zero: normalising it would amplify rounding past float's digits */
#define PBD__QUAT_NORM2_MIN 1e-12f
/* dot(+Y, n) under minus this: n is -Y, whose shortest rotation from +Y has no axis (1 + d loses every digit) */
#define PBD__ANTIPARALLEL 0.999999f
/* a hashed vector (components in [-1, 1]) shorter than this is replaced by +X: a unit direction needs some length */
#define PBD__HASH_LEN_MIN 1e-3f
/* |U1.x| under this: +X is at least 53 degrees from U1, so U1 x X is well conditioned (else +Y, at least 37) */
#define PBD__AXIS_X_MAX 0.6f
/* the 2x2 eigenvector candidate shorter than this: F^T F is isotropic, any direction is an eigenvector */
#define PBD__EIGVEC_LEN_MIN 1e-20f
/* the largest principal stretch under which a triangle has collapsed to a point: no direction to restore */
#define PBD__SV_MIN 1e-12f
/* the smaller principal stretch under 1e-6 of the larger: flattened onto a line, U2 from U1 instead of 1 / s2 */
#define PBD__SV_RATIO_MIN 1e-6f

/* Rest shapes: below these a constraint or a body is refused as degenerate. */
/* a rest length under 0.1 um is zero (an edge, a strand segment): about one float step of a coordinate near 1 m */
#define PBD__REST_LEN_MIN 1e-7f
/* a rest triangle under 1e-12 m^2 (a micrometre square): zero area, below any mesh feature */
#define PBD__REST_AREA_MIN 1e-12f
/* a rest tet under 1e-15 m^3 (a 10 um cube): zero volume */
#define PBD__TET_VOLUME_MIN 1e-15f
/* a closed mesh enclosing under 1e-12 m^3 (a 0.1 mm cube): no volume to keep */
#define PBD__MESH_VOLUME_MIN 1e-12f
/* a triangle's height under 1e-6 of its edge (a tet's volume under 1e-6 edge^3): a sliver, as bad as zero area */
#define PBD__SLIVER_MIN 1e-6f

/* Divisions. */
/* a generalized inverse mass sum w |grad C|^2 under this: nothing can move, the projection is skipped */
#define PBD__WG2_MIN 1e-30f
/* a denominator under 1e-30 is zero: 1e8 above float's smallest normal, so a quotient does not overflow */
#define PBD__DENOM_MIN 1e-30f
/* alpha~ = compliance / h^2 at most 1e30: inf * lambda (NaN at lambda = 0) stays out of the projection */
#define PBD__ALPHA_TILDE_MAX 1e30f
/* a double ratio that is an integer up to rounding is not rounded up to one more substep by ceil */
#define PBD__CEIL_SLACK 1e-9
/* a 3x3 (double) singular when |det| is under 1e-12 tr^3: the inverse would be mostly rounding */
#define PBD__SOLVE3_DET_MIN 1e-12

/* Rounding guards: a conservative test widened by more than the rounding of what it bounds. */
/* of the coordinates' size in the far tests of colliders: world-to-frame rounding is ~1e-6 relative */
#define PBD__FAR_GUARD 1e-5f
/* added to |R_b - R_a| (rounded up): sqrtf of 1 - c^2 near 0 loses digits */
#define PBD__SPIN_GUARD 1e-6f
/* a contact's rounding guard, relative to the particle's radius (at least PBD__CONTACT_TOL_R_MIN) */
#define PBD__CONTACT_TOL 1e-5f
/* a radius under 1 mm counts as 1 mm in PBD__CONTACT_TOL: the guard stays 10 nm or more for the thinnest hair */
#define PBD__CONTACT_TOL_R_MIN 1e-3f
/* flat and congruent tests of a cloth's rest shape, relative: 100x float's rounding, far below a visible fold */
#define PBD__FLAT_TOL 1e-5f
/* a convex disc's boundary turns by 2 pi to this (double): rounded angles sum to far less, a wrong loop to 2 pi */
#define PBD__TURNING_TOL 1e-3

/* Self-collision. */
/* the barycentric slack of "over the triangle" when a new pair takes its side: a quarter of an altitude beyond */
#define PBD__SC_OVER_SLACK 0.25f
/* closest points within 1e-3 (of the edge's parameter) of an end: a vertex contact, for the point-triangle pairs */
#define PBD__SC_EE_END 1e-3f
/* the division-free inner test (pbd__sc_lanes_inner) is this much wider than pbd__segment_closest's */
#define PBD__SC_INNER_SLACK 1e-4f
/* ... and nt's bounds by this of the size of its terms (t cancels on a short edge), more than its rounding */
#define PBD__SC_INNER_REL 1e-5f
/* an edge pair's separating vector under 0.1 um has no direction: the pair is dropped */
#define PBD__SC_EE_DIR_MIN 1e-7f
/* the cluster grid's cell is 1% larger than the largest box, and 1 um more (flat boxes), so rounding loses no pair */
#define PBD__SC_CELL_GROW 1.01f
#define PBD__SC_CELL_PAD 1e-6f
/* pbd__sc_crossed's slack in barycentric coordinates (1e-4 of an altitude): a touch on an edge still counts */
#define PBD__SC_BARY_SLACK 1e-4f
/* pbd__sc_apart's margin: 0.1% of the reach plus 1e-3 of the triangle's size, more than PBD__SC_BARY_SLACK */
#define PBD__SC_APART_GROW 1.001f
#define PBD__SC_APART_SIZE 1e-3f

typedef struct pbd__v3 {
    float x, y, z;
} pbd__v3;
typedef struct pbd__p4 {
    float x, y, z, w;
} pbd__p4; /* particle: position + inverse mass */

static inline PBD_HD pbd__v3 pbd__v(float x, float y, float z) {
    pbd__v3 r;
    r.x = x;
    r.y = y;
    r.z = z;
    return r;
}
static inline PBD_HD pbd__v3 pbd__ld(const float *p) { return pbd__v(p[0], p[1], p[2]); }
static inline PBD_HD void pbd__st(float *p, pbd__v3 a) {
    p[0] = a.x;
    p[1] = a.y;
    p[2] = a.z;
}
static inline PBD_HD pbd__v3 pbd__p3(pbd__p4 p) { return pbd__v(p.x, p.y, p.z); }
static inline PBD_HD pbd__v3 pbd__add(pbd__v3 a, pbd__v3 b) { return pbd__v(a.x + b.x, a.y + b.y, a.z + b.z); }
static inline PBD_HD pbd__v3 pbd__sub(pbd__v3 a, pbd__v3 b) { return pbd__v(a.x - b.x, a.y - b.y, a.z - b.z); }
static inline PBD_HD pbd__v3 pbd__mul(pbd__v3 a, float s) { return pbd__v(a.x * s, a.y * s, a.z * s); }
static inline PBD_HD pbd__v3 pbd__neg(pbd__v3 a) { return pbd__v(-a.x, -a.y, -a.z); }
static inline PBD_HD float pbd__dot(pbd__v3 a, pbd__v3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static inline PBD_HD pbd__v3 pbd__cross(pbd__v3 a, pbd__v3 b) {
    return pbd__v(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
static inline PBD_HD float pbd__len(pbd__v3 a) { return sqrtf(pbd__dot(a, a)); }
static inline PBD_HD pbd__v3 pbd__lerp(pbd__v3 a, pbd__v3 b, float t) {
    return pbd__add(a, pbd__mul(pbd__sub(b, a), t));
}
static inline PBD_HD int pbd__finite(float x) { return pbd__finite_bits(x); }
static inline PBD_HD int pbd__finite_n(const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!pbd__finite_bits(x[i])) return 0;
    return 1;
}
static inline PBD_HD float pbd__clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* The index of a cell from a float coordinate u (in cells): floor(u)
   clamped to [lo, hi], decided in float before the conversion, because
   converting NaN or a float outside int's range is undefined behaviour in
   C. NaN goes to lo. Every float-to-index conversion of the library goes
   through it (grids, lattices, lookups), so no state, however broken, can
   index outside an array (under -ffast-math too, where NaN's comparisons
   may be taken as ordered: hence the bits). lo and hi are small (|.| < 2^24). */
static inline PBD_HD int pbd__cell_index(float u, int lo, int hi) {
    if (!pbd__finite_bits(u)) return u > 0 ? hi : lo; /* NaN: lo (either, under -ffast-math) */
    if (!(u >= (float)lo)) return lo;
    if (u >= (float)hi) return hi;
    return (int)floorf(u);
}

/* Quaternions (x y z w). */
static inline PBD_HD pbd__v3 pbd__qrot(const float *q, pbd__v3 v) {
    /* v' = v + 2 w (u x v) + 2 u x (u x v) */
    pbd__v3 u = pbd__v(q[0], q[1], q[2]);
    pbd__v3 t = pbd__mul(pbd__cross(u, v), 2.0f);
    return pbd__add(pbd__add(v, pbd__mul(t, q[3])), pbd__cross(u, t));
}
static inline PBD_HD pbd__v3 pbd__qrot_inv(const float *q, pbd__v3 v) {
    float c[4] = {-q[0], -q[1], -q[2], q[3]};
    return pbd__qrot(c, v);
}
static inline PBD_HD void pbd__qnlerp(const float *a, const float *b, float t, float *out) {
    float d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
    float s = d < 0 ? -1.0f : 1.0f, n = 0;
    for (int i = 0; i < 4; ++i) {
        out[i] = a[i] + (s * b[i] - a[i]) * t;
        n += out[i] * out[i];
    }
    n = n > 0 ? 1.0f / sqrtf(n) : 0;
    for (int i = 0; i < 4; ++i) out[i] *= n;
    if (n == 0) {
        out[0] = out[1] = out[2] = 0;
        out[3] = 1;
    }
}
/* Shortest rotation taking +Y to the unit vector n. */
static PBD_HD void pbd__quat_from_up(pbd__v3 n, float *q) {
    pbd__v3 up = pbd__v(0, 1, 0);
    float d = pbd__dot(up, n);
    if (d < -PBD__ANTIPARALLEL) {
        q[0] = 1;
        q[1] = 0;
        q[2] = 0;
        q[3] = 0;
        return;
    }
    pbd__v3 c = pbd__cross(up, n);
    q[0] = c.x;
    q[1] = c.y;
    q[2] = c.z;
    q[3] = 1.0f + d;
    float l = sqrtf(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    for (int i = 0; i < 4; ++i) q[i] /= l;
}

/* A deterministic unit direction from two indices: breaks the symmetry of
   coincident particles (a collapsed mesh) without randomness. */
static PBD_HD pbd__v3 pbd__hash_dir(unsigned a, unsigned b) {
    unsigned h = a * 73856093u ^ b * 19349663u;
    float v[3];
    for (int k = 0; k < 3; ++k) {
        h ^= h << 13;
        h ^= h >> 17;
        h ^= h << 5;
        v[k] = (float)(h & 0xffff) / 32767.5f - 1.0f;
    }
    pbd__v3 d = pbd__v(v[0], v[1], v[2]);
    float l = pbd__len(d);
    return l > PBD__HASH_LEN_MIN ? pbd__mul(d, 1.0f / l) : pbd__v(1, 0, 0);
}

// ==== simd ==================================================================
/* A W-wide float vector (pbd__vf) over SIMDe's prefixed API, W = PBD__W.
   Constraint kernels gather W particles (4 floats each) into SoA registers
   with 4x4 transposes inside each 128-bit block (Box2D v3's gather/scatter,
   much faster than gather instructions here: docs/DESIGN.md section 5.2), compute
   W projections with exactly the operations of the scalar code, and
   scatter back. Register j of a gather holds particles j, j+4, j+8, j+12
   in its 128-bit blocks, so after the in-block transpose lane k of x is
   particle k. */
#if PBD__W > 1
#if PBD__W == 16
typedef simde__m512 pbd__vf;
typedef simde__mmask16 pbd__vm;
#define pbd__vadd simde_mm512_add_ps
#define pbd__vsub simde_mm512_sub_ps
#define pbd__vmul simde_mm512_mul_ps
#define pbd__vdiv simde_mm512_div_ps
#define pbd__vsqrt simde_mm512_sqrt_ps
#define pbd__vmin simde_mm512_min_ps /* (a < b ? a : b, as the scalar code writes it) */
#define pbd__vmax simde_mm512_max_ps /* (a > b ? a : b) */
#define pbd__vset1 simde_mm512_set1_ps
#define pbd__vload simde_mm512_loadu_ps
#define pbd__vstore simde_mm512_storeu_ps
#define pbd__vlt(a, b) simde_mm512_cmp_ps_mask((a), (b), SIMDE_CMP_LT_OQ)
#define pbd__vle(a, b) simde_mm512_cmp_ps_mask((a), (b), SIMDE_CMP_LE_OQ)
#define pbd__veq(a, b) simde_mm512_cmp_ps_mask((a), (b), SIMDE_CMP_EQ_OQ)
#define pbd__vany(m) ((m) != 0)
#define pbd__vor_m(a, b) ((pbd__vm)((a) | (b)))
#define pbd__vand_m(a, b) ((pbd__vm)((a) & (b)))
#define pbd__vandnot_m(a, b) ((pbd__vm)((a) & ~(b))) /* a and not b */
/* where m: b, else a */
#define pbd__vsel(m, a, b) simde_mm512_mask_blend_ps((m), (a), (b))
#define pbd__vabs simde_mm512_abs_ps
#define pbd__vnonfinite(a) /* NaN and Inf lanes, by their exponent bits (integer: -ffast-math keeps it) */ \
    simde_mm512_cmpeq_epi32_mask(                                                                          \
        simde_mm512_and_si512(simde_mm512_castps_si512(a), simde_mm512_set1_epi32(0x7f800000)),            \
        simde_mm512_set1_epi32(0x7f800000))
#define pbd__vunpacklo simde_mm512_unpacklo_ps
#define pbd__vunpackhi simde_mm512_unpackhi_ps
#define pbd__vunpacklo_pd(a, b) \
    simde_mm512_castpd_ps(simde_mm512_unpacklo_pd(simde_mm512_castps_pd(a), simde_mm512_castps_pd(b)))
#define pbd__vunpackhi_pd(a, b) \
    simde_mm512_castpd_ps(simde_mm512_unpackhi_pd(simde_mm512_castps_pd(a), simde_mm512_castps_pd(b)))
static inline pbd__vf pbd__vfrom4(const pbd__p4 *P, const int *ids, int j) {
    pbd__vf r = simde_mm512_castps128_ps512(simde_mm_loadu_ps((const float *)(const void *)&P[ids[j]]));
    r = simde_mm512_insertf32x4(r, simde_mm_loadu_ps((const float *)(const void *)&P[ids[j + 4]]), 1);
    r = simde_mm512_insertf32x4(r, simde_mm_loadu_ps((const float *)(const void *)&P[ids[j + 8]]), 2);
    return simde_mm512_insertf32x4(r, simde_mm_loadu_ps((const float *)(const void *)&P[ids[j + 12]]), 3);
}
static inline void pbd__vto4(pbd__p4 *P, const int *ids, int j, pbd__vf r) {
    simde_mm_storeu_ps((float *)(void *)&P[ids[j]], simde_mm512_extractf32x4_ps(r, 0));
    simde_mm_storeu_ps((float *)(void *)&P[ids[j + 4]], simde_mm512_extractf32x4_ps(r, 1));
    simde_mm_storeu_ps((float *)(void *)&P[ids[j + 8]], simde_mm512_extractf32x4_ps(r, 2));
    simde_mm_storeu_ps((float *)(void *)&P[ids[j + 12]], simde_mm512_extractf32x4_ps(r, 3));
}
#elif PBD__W == 8
typedef simde__m256 pbd__vf;
typedef simde__m256 pbd__vm;
#define pbd__vadd simde_mm256_add_ps
#define pbd__vsub simde_mm256_sub_ps
#define pbd__vmul simde_mm256_mul_ps
#define pbd__vdiv simde_mm256_div_ps
#define pbd__vsqrt simde_mm256_sqrt_ps
#define pbd__vmin simde_mm256_min_ps
#define pbd__vmax simde_mm256_max_ps
#define pbd__vset1 simde_mm256_set1_ps
#define pbd__vload simde_mm256_loadu_ps
#define pbd__vstore simde_mm256_storeu_ps
#define pbd__vlt(a, b) simde_mm256_cmp_ps((a), (b), SIMDE_CMP_LT_OQ)
#define pbd__vle(a, b) simde_mm256_cmp_ps((a), (b), SIMDE_CMP_LE_OQ)
#define pbd__veq(a, b) simde_mm256_cmp_ps((a), (b), SIMDE_CMP_EQ_OQ)
#define pbd__vany(m) (simde_mm256_movemask_ps(m) != 0)
#define pbd__vor_m(a, b) simde_mm256_or_ps((a), (b))
#define pbd__vand_m(a, b) simde_mm256_and_ps((a), (b))
#define pbd__vandnot_m(a, b) simde_mm256_andnot_ps((b), (a))
#define pbd__vsel(m, a, b) simde_mm256_blendv_ps((a), (b), (m))
#define pbd__vabs(a) simde_mm256_and_ps((a), simde_mm256_castsi256_ps(simde_mm256_set1_epi32(0x7fffffff)))
#define pbd__vnonfinite(a)                                                                      \
    simde_mm256_castsi256_ps(simde_mm256_cmpeq_epi32(                                           \
        simde_mm256_and_si256(simde_mm256_castps_si256(a), simde_mm256_set1_epi32(0x7f800000)), \
        simde_mm256_set1_epi32(0x7f800000)))
#define pbd__vunpacklo simde_mm256_unpacklo_ps
#define pbd__vunpackhi simde_mm256_unpackhi_ps
#define pbd__vunpacklo_pd(a, b) \
    simde_mm256_castpd_ps(simde_mm256_unpacklo_pd(simde_mm256_castps_pd(a), simde_mm256_castps_pd(b)))
#define pbd__vunpackhi_pd(a, b) \
    simde_mm256_castpd_ps(simde_mm256_unpackhi_pd(simde_mm256_castps_pd(a), simde_mm256_castps_pd(b)))
static inline pbd__vf pbd__vfrom4(const pbd__p4 *P, const int *ids, int j) {
    return simde_mm256_set_m128(simde_mm_loadu_ps((const float *)(const void *)&P[ids[j + 4]]),
                                simde_mm_loadu_ps((const float *)(const void *)&P[ids[j]]));
}
static inline void pbd__vto4(pbd__p4 *P, const int *ids, int j, pbd__vf r) {
    simde_mm_storeu_ps((float *)(void *)&P[ids[j]], simde_mm256_castps256_ps128(r));
    simde_mm_storeu_ps((float *)(void *)&P[ids[j + 4]], simde_mm256_extractf128_ps(r, 1));
}
#else
typedef simde__m128 pbd__vf;
typedef simde__m128 pbd__vm;
#define pbd__vadd simde_mm_add_ps
#define pbd__vsub simde_mm_sub_ps
#define pbd__vmul simde_mm_mul_ps
#define pbd__vdiv simde_mm_div_ps
#define pbd__vsqrt simde_mm_sqrt_ps
#define pbd__vmin simde_mm_min_ps
#define pbd__vmax simde_mm_max_ps
#define pbd__vset1 simde_mm_set1_ps
#define pbd__vload simde_mm_loadu_ps
#define pbd__vstore simde_mm_storeu_ps
#define pbd__vlt(a, b) simde_mm_cmplt_ps((a), (b))
#define pbd__vle(a, b) simde_mm_cmple_ps((a), (b))
#define pbd__veq(a, b) simde_mm_cmpeq_ps((a), (b))
#define pbd__vany(m) (simde_mm_movemask_ps(m) != 0)
#define pbd__vor_m(a, b) simde_mm_or_ps((a), (b))
#define pbd__vand_m(a, b) simde_mm_and_ps((a), (b))
#define pbd__vandnot_m(a, b) simde_mm_andnot_ps((b), (a))
#define pbd__vsel(m, a, b) simde_mm_or_ps(simde_mm_and_ps((m), (b)), simde_mm_andnot_ps((m), (a)))
#define pbd__vabs(a) simde_mm_and_ps((a), simde_mm_castsi128_ps(simde_mm_set1_epi32(0x7fffffff)))
#define pbd__vnonfinite(a)                                                                                  \
    simde_mm_castsi128_ps(                                                                                  \
        simde_mm_cmpeq_epi32(simde_mm_and_si128(simde_mm_castps_si128(a), simde_mm_set1_epi32(0x7f800000)), \
                             simde_mm_set1_epi32(0x7f800000)))
#define pbd__vunpacklo simde_mm_unpacklo_ps
#define pbd__vunpackhi simde_mm_unpackhi_ps
#define pbd__vunpacklo_pd(a, b) simde_mm_castpd_ps(simde_mm_unpacklo_pd(simde_mm_castps_pd(a), simde_mm_castps_pd(b)))
#define pbd__vunpackhi_pd(a, b) simde_mm_castpd_ps(simde_mm_unpackhi_pd(simde_mm_castps_pd(a), simde_mm_castps_pd(b)))
static inline pbd__vf pbd__vfrom4(const pbd__p4 *P, const int *ids, int j) {
    return simde_mm_loadu_ps((const float *)(const void *)&P[ids[j]]);
}
static inline void pbd__vto4(pbd__p4 *P, const int *ids, int j, pbd__vf r) {
    simde_mm_storeu_ps((float *)(void *)&P[ids[j]], r);
}
#endif

/* W particles in SoA: x y z and w (inverse mass). */
typedef struct pbd__vp {
    pbd__vf x, y, z, w;
} pbd__vp;

/* The lanes of mask m as bits (lane k: bit k). */
static inline unsigned pbd__vbits(pbd__vm m) {
#if PBD__W == 16
    return (unsigned)m;
#elif PBD__W == 8
    return (unsigned)simde_mm256_movemask_ps(m);
#else
    return (unsigned)simde_mm_movemask_ps(m);
#endif
}

/* In-block 4x4 transpose; it is its own inverse. */
static inline void pbd__vtranspose(pbd__vf *r0, pbd__vf *r1, pbd__vf *r2, pbd__vf *r3) {
    pbd__vf t0 = pbd__vunpacklo(*r0, *r1), t1 = pbd__vunpacklo(*r2, *r3);
    pbd__vf t2 = pbd__vunpackhi(*r0, *r1), t3 = pbd__vunpackhi(*r2, *r3);
    *r0 = pbd__vunpacklo_pd(t0, t1);
    *r1 = pbd__vunpackhi_pd(t0, t1);
    *r2 = pbd__vunpacklo_pd(t2, t3);
    *r3 = pbd__vunpackhi_pd(t2, t3);
}

/* The gather and scatter inline everywhere: at -O2 (the README's compile
   line) GCC kept them as calls in the particle phase's large functions,
   returning four vectors through memory (11% of a heap of grains' step;
   inline, the step took 14% less). */
#if defined(__GNUC__) || defined(__clang__)
#define PBD__HOT static inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define PBD__HOT static __forceinline
#else
#define PBD__HOT static inline
#endif
/* ids: W particle indices (one per lane). */
PBD__HOT pbd__vp pbd__vgather(const pbd__p4 *P, const int *ids) {
    pbd__vp v;
    v.x = pbd__vfrom4(P, ids, 0);
    v.y = pbd__vfrom4(P, ids, 1);
    v.z = pbd__vfrom4(P, ids, 2);
    v.w = pbd__vfrom4(P, ids, 3);
    pbd__vtranspose(&v.x, &v.y, &v.z, &v.w);
    return v;
}
PBD__HOT void pbd__vscatter(pbd__p4 *P, const int *ids, pbd__vp v) {
    pbd__vtranspose(&v.x, &v.y, &v.z, &v.w);
    pbd__vto4(P, ids, 0, v.x);
    pbd__vto4(P, ids, 1, v.y);
    pbd__vto4(P, ids, 2, v.z);
    pbd__vto4(P, ids, 3, v.w);
}

/* SoA 3-vectors of W lanes and the ops the kernels use, each the exact
   lane-wise twin of the pbd__v3 op (same order of operations). */
typedef struct pbd__vv {
    pbd__vf x, y, z;
} pbd__vv;
static inline pbd__vv pbd__vvsub(pbd__vv a, pbd__vv b) {
    pbd__vv r;
    r.x = pbd__vsub(a.x, b.x);
    r.y = pbd__vsub(a.y, b.y);
    r.z = pbd__vsub(a.z, b.z);
    return r;
}
static inline pbd__vv pbd__vvadd(pbd__vv a, pbd__vv b) {
    pbd__vv r;
    r.x = pbd__vadd(a.x, b.x);
    r.y = pbd__vadd(a.y, b.y);
    r.z = pbd__vadd(a.z, b.z);
    return r;
}
static inline pbd__vv pbd__vvmul(pbd__vv a, pbd__vf s) {
    pbd__vv r;
    r.x = pbd__vmul(a.x, s);
    r.y = pbd__vmul(a.y, s);
    r.z = pbd__vmul(a.z, s);
    return r;
}
static inline pbd__vf pbd__vvdot(pbd__vv a, pbd__vv b) {
    return pbd__vadd(pbd__vadd(pbd__vmul(a.x, b.x), pbd__vmul(a.y, b.y)), pbd__vmul(a.z, b.z));
}
static inline pbd__vv pbd__vvcross(pbd__vv a, pbd__vv b) {
    pbd__vv r;
    r.x = pbd__vsub(pbd__vmul(a.y, b.z), pbd__vmul(a.z, b.y));
    r.y = pbd__vsub(pbd__vmul(a.z, b.x), pbd__vmul(a.x, b.z));
    r.z = pbd__vsub(pbd__vmul(a.x, b.y), pbd__vmul(a.y, b.x));
    return r;
}
/* a * -1 flips the sign bit exactly as the scalar unary minus does (0 - a
   would not: it turns +0 into +0 instead of -0). */
static inline pbd__vf pbd__vneg(pbd__vf a) { return pbd__vmul(a, pbd__vset1(-1.0f)); }
static inline pbd__vv pbd__vvneg(pbd__vv a) { return pbd__vvmul(a, pbd__vset1(-1.0f)); }
static inline pbd__vv pbd__vvpos(pbd__vp p) {
    pbd__vv r;
    r.x = p.x;
    r.y = p.y;
    r.z = p.z;
    return r;
}
/* p += g * (w * dl), the scalar update of one particle */
static inline void pbd__vapply(pbd__vp *p, pbd__vv g, pbd__vf dl) {
    pbd__vf s = pbd__vmul(p->w, dl);
    p->x = pbd__vadd(p->x, pbd__vmul(g.x, s));
    p->y = pbd__vadd(p->y, pbd__vmul(g.y, s));
    p->z = pbd__vadd(p->z, pbd__vmul(g.z, s));
}
/* The lane-wise twin of pbd__atan2. */
static inline pbd__vf pbd__vatan2(pbd__vf y, pbd__vf x) {
    pbd__vf zero = pbd__vset1(0.0f), one = pbd__vset1(1.0f);
    pbd__vf t = pbd__vdiv(pbd__vabs(y), pbd__vabs(x));
    pbd__vm big = pbd__vlt(pbd__vset1(2.414213562373095f), t);
    pbd__vm mid = pbd__vandnot_m(pbd__vlt(pbd__vset1(0.4142135623730950f), t), big);
    pbd__vf base =
        pbd__vsel(big, pbd__vsel(mid, zero, pbd__vset1(0.7853981633974483f)), pbd__vset1(1.5707963267948966f));
    t = pbd__vsel(big, pbd__vsel(mid, t, pbd__vdiv(pbd__vsub(t, one), pbd__vadd(t, one))),
                  pbd__vdiv(pbd__vset1(-1.0f), t));
    pbd__vf z = pbd__vmul(t, t);
    pbd__vf p = pbd__vsub(pbd__vmul(pbd__vset1(8.05374449538e-2f), z), pbd__vset1(1.38776856032e-1f));
    p = pbd__vadd(pbd__vmul(p, z), pbd__vset1(1.99777106478e-1f));
    p = pbd__vsub(pbd__vmul(p, z), pbd__vset1(3.33329491539e-1f));
    pbd__vf a = pbd__vadd(base, pbd__vadd(pbd__vmul(pbd__vmul(p, z), t), t));
    a = pbd__vsel(pbd__vlt(x, zero), a, pbd__vsub(pbd__vset1(3.14159265358979f), a));
    return pbd__vsel(pbd__vlt(y, zero), a, pbd__vneg(a));
}
#endif /* PBD__W > 1 */

// ==== meshes ================================================================

static int pbd__mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 0;
    *out = a * b;
    return 1;
}

static void *pbd__malloc_n(size_t n, size_t elem) {
    size_t sz;
    if (!pbd__mul_ok(n, elem, &sz) || sz == 0) return NULL;
    return PBD_MALLOC(sz);
}

static pbd_result pbd__fail(const pbd_world *w, pbd_result r, const char *fmt, ...);
static pbd_result pbd__mesh_alloc(pbd_mesh *m, long nv, long nt, long ntet) {
    memset(m, 0, sizeof *m);
    if (nv > INT_MAX / 3 || nt > INT_MAX / 3 || ntet > INT_MAX / 4)
        return pbd__fail(NULL, PBD_ERROR_OVERFLOW, "a mesh of %ld vertices, %ld triangles and %ld tets is too large",
                         nv, nt, ntet);
    m->positions = (float *)pbd__malloc_n((size_t)nv * 3, sizeof(float));
    m->triangles = nt ? (int *)pbd__malloc_n((size_t)nt * 3, sizeof(int)) : NULL;
    m->tets = ntet ? (int *)pbd__malloc_n((size_t)ntet * 4, sizeof(int)) : NULL;
    if (!m->positions || (nt && !m->triangles) || (ntet && !m->tets)) {
        pbd_mesh_free(m);
        return pbd__fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "no memory for a mesh of %ld vertices", nv);
    }
    m->vertex_count = (int)nv;
    m->triangle_count = (int)nt;
    m->tet_count = (int)ntet;
    return PBD_OK;
}

PBDDEF void pbd_mesh_free(pbd_mesh *m) {
    if (!m) return;
    if (m->positions) PBD_FREE(m->positions);
    if (m->triangles) PBD_FREE(m->triangles);
    if (m->tets) PBD_FREE(m->tets);
    memset(m, 0, sizeof *m);
}

/* The first NULL of the n pointers given to fn, by its name (one message
   per argument, not "a, b or c is NULL"). */
static pbd_result pbd__check_pointers(const char *fn, const void *const *given, const char *const *names, int n) {
    for (int i = 0; i < n; ++i)
        if (!given[i]) return pbd__fail(NULL, PBD_ERROR_NULL_POINTER, "%s: %s is NULL", fn, names[i]);
    return PBD_OK;
}
/* The same for n vectors of 3 floats that must be finite, with the value. */
static pbd_result pbd__check_vectors(const char *fn, const float *const *x, const char *const *names, int n) {
    for (int i = 0; i < n; ++i)
        if (!pbd__finite_n(x[i], 3))
            return pbd__fail(NULL, PBD_ERROR_NOT_FINITE, "%s: %s (%g, %g, %g) is not finite", fn, names[i],
                             (double)x[i][0], (double)x[i][1], (double)x[i][2]);
    return PBD_OK;
}

PBDDEF pbd_result pbd_mesh_grid(int nx, int ny, const float *origin, const float *u, const float *v, pbd_mesh *out) {
    static const char *const names[4] = {"origin", "u", "v", "out"};
    const void *given[4] = {origin, u, v, out};
    if (pbd__check_pointers("pbd_mesh_grid", given, names, 4) != PBD_OK) return PBD_ERROR_NULL_POINTER;
    if (nx < 2 || ny < 2)
        return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_mesh_grid: %d x %d vertices, at least 2 x 2", nx, ny);
    if ((long)nx * (long)ny > INT_MAX / 8)
        return pbd__fail(NULL, PBD_ERROR_OVERFLOW, "pbd_mesh_grid: %d x %d vertices are too many", nx, ny);
    const float *vectors[3] = {origin, u, v};
    if (pbd__check_vectors("pbd_mesh_grid", vectors, names, 3) != PBD_OK) return PBD_ERROR_NOT_FINITE;
    pbd__v3 o = pbd__ld(origin), U = pbd__ld(u), V = pbd__ld(v);
    if (!(pbd__len(pbd__cross(U, V)) > 0))
        return pbd__fail(NULL, PBD_ERROR_DEGENERATE, "pbd_mesh_grid: u and v are parallel or zero");
    pbd_mesh m;
    pbd_result r = pbd__mesh_alloc(&m, (long)nx * ny, 2L * (nx - 1) * (ny - 1), 0);
    if (r != PBD_OK) return r;
    for (int j = 0; j < ny; ++j)
        for (int i = 0; i < nx; ++i) {
            float s = (float)i / (float)(nx - 1), t = (float)j / (float)(ny - 1);
            pbd__st(m.positions + 3 * (j * nx + i), pbd__add(o, pbd__add(pbd__mul(U, s), pbd__mul(V, t))));
        }
    int *tri = m.triangles;
    for (int j = 0; j < ny - 1; ++j)
        for (int i = 0; i < nx - 1; ++i) {
            int a = j * nx + i, b = a + 1, c = a + nx, d = c + 1;
            if ((i + j) & 1) { /* alternate diagonals: no preferred shear direction */
                tri[0] = a;
                tri[1] = b;
                tri[2] = d;
                tri[3] = a;
                tri[4] = d;
                tri[5] = c;
            } else {
                tri[0] = a;
                tri[1] = b;
                tri[2] = c;
                tri[3] = b;
                tri[4] = d;
                tri[5] = c;
            }
            tri += 6;
        }
    *out = m;
    return PBD_OK;
}

static int pbd__cmp_int3(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}
/* faces compare by their sorted key (the first 3 ints) */
static int pbd__cmp_face(const void *a, const void *b) {
    const int *x = (const int *)a, *y = (const int *)b;
    for (int i = 0; i < 3; ++i)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

PBDDEF pbd_result pbd_mesh_tet_box(int nx, int ny, int nz, const float *lo, const float *hi, pbd_mesh *out) {
    static const char *const names[3] = {"lo", "hi", "out"};
    const void *given[3] = {lo, hi, out};
    if (pbd__check_pointers("pbd_mesh_tet_box", given, names, 3) != PBD_OK) return PBD_ERROR_NULL_POINTER;
    if (nx < 2 || ny < 2 || nz < 2)
        return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_mesh_tet_box: %d x %d x %d nodes, at least 2 x 2 x 2",
                         nx, ny, nz);
    if ((double)nx * ny * nz > (double)(INT_MAX / 32))
        return pbd__fail(NULL, PBD_ERROR_OVERFLOW, "pbd_mesh_tet_box: %d x %d x %d nodes are too many", nx, ny, nz);
    const float *vectors[2] = {lo, hi};
    if (pbd__check_vectors("pbd_mesh_tet_box", vectors, names, 2) != PBD_OK) return PBD_ERROR_NOT_FINITE;
    if (!(hi[0] > lo[0] && hi[1] > lo[1] && hi[2] > lo[2]))
        return pbd__fail(NULL, PBD_ERROR_DEGENERATE, "pbd_mesh_tet_box: hi must exceed lo on every axis");
    long cx = nx - 1, cy = ny - 1, cz = nz - 1;
    long nsurf = 4 * (cx * cy + cy * cz + cx * cz);
    pbd_mesh m;
    pbd_result r = pbd__mesh_alloc(&m, (long)nx * ny * nz, nsurf, 5 * cx * cy * cz);
    if (r != PBD_OK) return r;
#define PBD__ID(i, j, k) ((int)(((long)(k)*ny + (j)) * nx + (i)))
    for (int k = 0; k < nz; ++k)
        for (int j = 0; j < ny; ++j)
            for (int i = 0; i < nx; ++i) {
                float *p = m.positions + 3 * PBD__ID(i, j, k);
                p[0] = lo[0] + (hi[0] - lo[0]) * (float)i / (float)cx;
                p[1] = lo[1] + (hi[1] - lo[1]) * (float)j / (float)cy;
                p[2] = lo[2] + (hi[2] - lo[2]) * (float)k / (float)cz;
            }
    /* 5 tets per cube; the mirrored split in every other cell keeps the
       face diagonals of neighbouring cells identical (conforming mesh). */
    static const int split[2][5][4] = {{{0, 1, 3, 5}, {0, 3, 2, 6}, {0, 5, 4, 6}, {3, 5, 6, 7}, {0, 3, 6, 5}},
                                       {{1, 3, 2, 7}, {1, 2, 0, 4}, {1, 4, 5, 7}, {2, 4, 7, 6}, {1, 2, 7, 4}}};
    int *t = m.tets;
    for (int k = 0; k < cz; ++k)
        for (int j = 0; j < cy; ++j)
            for (int i = 0; i < cx; ++i) {
                int c[8];
                for (int q = 0; q < 8; ++q) c[q] = PBD__ID(i + (q & 1), j + ((q >> 1) & 1), k + ((q >> 2) & 1));
                int par = (i + j + k) & 1;
                for (int e = 0; e < 5; ++e) {
                    for (int q = 0; q < 4; ++q) t[q] = c[split[par][e][q]];
                    /* orient positively */
                    pbd__v3 x0 = pbd__ld(m.positions + 3 * t[0]);
                    pbd__v3 a = pbd__sub(pbd__ld(m.positions + 3 * t[1]), x0);
                    pbd__v3 b = pbd__sub(pbd__ld(m.positions + 3 * t[2]), x0);
                    pbd__v3 d = pbd__sub(pbd__ld(m.positions + 3 * t[3]), x0);
                    if (pbd__dot(pbd__cross(a, b), d) < 0) {
                        int s = t[1];
                        t[1] = t[2];
                        t[2] = s;
                    }
                    t += 4;
                }
            }
    /* Surface: the tet faces that belong to one tet only, oriented away
       from the tet's fourth vertex, so that they are exactly the boundary
       of the tet mesh (a surface cut into triangles on its own would not
       share the tets' face diagonals). Found by sorting the faces by their
       sorted vertex triple; emitted in that order. */
    {
        typedef struct {
            int key[3], tri[3];
        } face_t;
        long nf = 4L * m.tet_count;
        face_t *f = (face_t *)pbd__malloc_n((size_t)nf, sizeof(face_t));
        if (!f) {
            pbd_mesh_free(&m);
            return pbd__fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_mesh_tet_box: no memory for the surface");
        }
        static const int opp[4][3] = {
            {1, 2, 3}, {0, 3, 2}, {0, 1, 3}, {0, 2, 1}}; /* the face opposite vertex k, outward for a positive tet */
        for (long t = 0; t < m.tet_count; ++t)
            for (int k = 0; k < 4; ++k) {
                face_t *q = &f[4 * t + k];
                for (int j = 0; j < 3; ++j) q->tri[j] = q->key[j] = m.tets[4 * t + opp[k][j]];
                qsort(q->key, 3, sizeof(int), pbd__cmp_int3);
            }
        qsort(f, (size_t)nf, sizeof(face_t), pbd__cmp_face);
        int ns = 0;
        for (long i = 0; i < nf; ++i) {
            int same_prev = i > 0 && memcmp(f[i].key, f[i - 1].key, sizeof f[i].key) == 0;
            int same_next = i + 1 < nf && memcmp(f[i].key, f[i + 1].key, sizeof f[i].key) == 0;
            if (same_prev || same_next) continue;
            PBD_ASSERT(ns < nsurf);
            memcpy(m.triangles + 3 * ns++, f[i].tri, sizeof f[i].tri);
        }
        PBD_ASSERT(ns == nsurf);
        PBD_FREE(f);
    }
#undef PBD__ID
    *out = m;
    return PBD_OK;
}

static int pbd__cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

/* Index of key in a sorted array, or -1. */
static long pbd__find_u64(const uint64_t *keys, long n, uint64_t key) {
    long lo = 0, hi = n - 1;
    while (lo <= hi) {
        long m = lo + (hi - lo) / 2;
        if (keys[m] == key) return m;
        if (keys[m] < key) lo = m + 1;
        else hi = m - 1;
    }
    return -1;
}

static inline uint64_t pbd__edge_key(int a, int b) {
    if (a > b) {
        int t = a;
        a = b;
        b = t;
    }
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}

PBDDEF pbd_result pbd_mesh_sphere(int subdivisions, const float *centre, float radius, pbd_mesh *out) {
    static const char *const names[2] = {"centre", "out"};
    const void *given[2] = {centre, out};
    if (pbd__check_pointers("pbd_mesh_sphere", given, names, 2) != PBD_OK) return PBD_ERROR_NULL_POINTER;
    if (subdivisions < 0 || subdivisions > 7)
        return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_mesh_sphere: subdivisions %d outside 0..7",
                         subdivisions);
    if (pbd__check_vectors("pbd_mesh_sphere", &centre, names, 1) != PBD_OK) return PBD_ERROR_NOT_FINITE;
    if (!pbd__finite(radius))
        return pbd__fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_mesh_sphere: radius %g is not finite", (double)radius);
    if (!(radius > 0)) return pbd__fail(NULL, PBD_ERROR_DEGENERATE, "pbd_mesh_sphere: radius %g <= 0", (double)radius);
    long nt = 20L << (2 * subdivisions), nv = 10L * (1L << (2 * subdivisions)) + 2;
    pbd_mesh m;
    pbd_result r = pbd__mesh_alloc(&m, nv, nt, 0);
    if (r != PBD_OK) return r;
    uint64_t *keys = (uint64_t *)pbd__malloc_n((size_t)nt * 3 / 2 + 1, sizeof(uint64_t));
    int *next = (int *)pbd__malloc_n((size_t)nt * 3, sizeof(int));
    if (!keys || !next) {
        if (keys) PBD_FREE(keys);
        if (next) PBD_FREE(next);
        pbd_mesh_free(&m);
        return pbd__fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_mesh_sphere: no memory for the edges");
    }
    const float t = 1.6180339887f;
    const float iv[12][3] = {{-1, t, 0},  {1, t, 0},  {-1, -t, 0}, {1, -t, 0}, {0, -1, t},  {0, 1, t},
                             {0, -1, -t}, {0, 1, -t}, {t, 0, -1},  {t, 0, 1},  {-t, 0, -1}, {-t, 0, 1}};
    static const int it[20][3] = {{0, 11, 5},  {0, 5, 1},  {0, 1, 7},  {0, 7, 10}, {0, 10, 11}, {1, 5, 9}, {5, 11, 4},
                                  {11, 10, 2}, {10, 7, 6}, {7, 1, 8},  {3, 9, 4},  {3, 4, 2},   {3, 2, 6}, {3, 6, 8},
                                  {3, 8, 9},   {4, 9, 5},  {2, 4, 11}, {6, 2, 10}, {8, 6, 7},   {9, 8, 1}};
    int vc = 12, tc = 20;
    for (int i = 0; i < 12; ++i) {
        pbd__v3 p = pbd__ld(iv[i]);
        pbd__st(m.positions + 3 * i, pbd__mul(p, 1.0f / pbd__len(p)));
    }
    memcpy(m.triangles, it, sizeof it);
    for (int s = 0; s < subdivisions; ++s) {
        /* Each undirected edge once (a < b; the mesh is closed and oriented),
           sorted, so that the midpoint of sorted edge k is vertex vc0 + k. */
        long ne = 0;
        for (int f = 0; f < tc; ++f)
            for (int e = 0; e < 3; ++e) {
                int a = m.triangles[3 * f + e], b = m.triangles[3 * f + (e + 1) % 3];
                if (a < b) keys[ne++] = pbd__edge_key(a, b);
            }
        qsort(keys, (size_t)ne, sizeof *keys, pbd__cmp_u64);
        int vc0 = vc;
        for (long e = 0; e < ne; ++e) {
            int a = (int)(keys[e] >> 32), b = (int)(keys[e] & 0xffffffffu);
            pbd__v3 p = pbd__add(pbd__ld(m.positions + 3 * a), pbd__ld(m.positions + 3 * b));
            pbd__st(m.positions + 3 * vc++, pbd__mul(p, 1.0f / pbd__len(p)));
        }
        for (int f = 0; f < tc; ++f) {
            const int *v = m.triangles + 3 * f;
            int mm[3];
            for (int e = 0; e < 3; ++e) mm[e] = vc0 + (int)pbd__find_u64(keys, ne, pbd__edge_key(v[e], v[(e + 1) % 3]));
            int *o = next + 12 * f;
            o[0] = v[0];
            o[1] = mm[0];
            o[2] = mm[2];
            o[3] = v[1];
            o[4] = mm[1];
            o[5] = mm[0];
            o[6] = v[2];
            o[7] = mm[2];
            o[8] = mm[1];
            o[9] = mm[0];
            o[10] = mm[1];
            o[11] = mm[2];
        }
        tc *= 4;
        memcpy(m.triangles, next, sizeof(int) * 3 * (size_t)tc);
    }
    PBD_FREE(keys);
    PBD_FREE(next);
    for (int i = 0; i < vc; ++i)
        pbd__st(m.positions + 3 * i, pbd__add(pbd__ld(centre), pbd__mul(pbd__ld(m.positions + 3 * i), radius)));
    PBD_ASSERT(vc == nv && tc == nt);
    *out = m;
    return PBD_OK;
}

// ==== world =================================================================

enum { PBD__PINNED = 1, PBD__KINEMATIC = 2 };
/* A removed particle (PBD__FREE | PBD__PINNED, all its state zero: see
   pbd__free_particles), waiting in its slot for the next add. */
enum { PBD__FREE = 16 };

/* --- handles ----------------------------------------------------------------- */
/* Every record a public handle names (a group, object, collider, fluid,
   ...) starts with a pbd__slot. Its array is a pool of slots: an add takes
   the first free slot (one a removal left) or a new one at the end, and a
   removal frees the record's memory, zeroes it and advances the slot's
   generation, so an old handle no longer matches (the HANDLES convention
   of the manual). A zeroed record is an empty one (no constraints, no
   particles), which every loop over the records passes over. */
typedef struct pbd__slot {
    uint32_t gen; /* the generation, advanced by each removal */
    int live;     /* 1 while the slot holds a record */
    int seq;      /* pbd_world.seq when it was added: pbd__rollback drops the newer */
} pbd__slot;

typedef struct pbd__group {
    pbd__slot s;
    int type, count, arity, rest_stride;
    int *idx;      /* count * arity particle indices (mesh volume: local triangles) */
    float *rest;   /* count * rest_stride */
    float *lambda; /* count XPBD multipliers, reset every substep */
    float compliance, stiffness, pressure;
    int unilateral, enabled;
    /* mesh volume only: the mesh's particles and gradient scratch */
    int nverts, ntris;
    int *verts;
    float *scratch; /* 6 floats per vertex: positions, gradients */
    /* colouring (survey 3.8): constraints are stored sorted by colour;
       colour c is [color_start[c], color_start[c+1]); no two constraints of
       a colour share a particle, except in the last colour when `overflow`
       is set, which is solved serially. */
    int ncolors, overflow;
    int *color_start;
    int *slot; /* attachments: user index -> storage position */
} pbd__group;

typedef struct pbd__object {
    pbd__slot s;
    int first, count;
    int *perm; /* built with reorder: vertex v of the builder's mesh is particle first + perm[v]; else NULL */
    float damping;
    int groups[4];     /* stretch, bending, area, volume */
    int coupled;       /* a group outside the builder's touches it: not isolated */
    int tethers;       /* automatic long range attachments (cloth): PBD__TETHERS_* */
    int lra;           /* their set in w->lras, -1 before the first pin */
    float gravity_cfl; /* cloth substep bound (pbd__cloth_substeps); 0: none */
    float hang;        /* its longest tether (the largest distance to the nearest anchor), 0: none */
    float edge;        /* its stretch edges' mean rest length, 0: none */
} pbd__object;

typedef struct pbd__collider {
    pbd__slot s;
    int shape;
    float radius, half_height, half[3];
    float mu_s, mu_d, restitution;
    float pos[3], rot[4];       /* pose at the start of the step */
    float to_pos[3], to_rot[4]; /* pose at its end */
    int mesh;                   /* mesh and SDF-grid shapes: index into pbd_world.meshcols */
} pbd__collider;

/* A collider's pose at the start and the end of the current substep. */
typedef struct pbd__pose {
    float pos[3], rot[4], up[3];
} pbd__pose; /* up: the frame's y axis in the world */

typedef struct pbd__contact {
    int particle, collider;
    pbd__v3 n;      /* world normal */
    pbd__v3 q;      /* a point of the contact plane (particle radius included) */
    pbd__v3 anchor; /* x carried along by the collider: friction reference */
    pbd__v3 vcol;   /* collider velocity at the particle */
    float vn;       /* normal velocity before the substep (restitution) */
    float lambda;   /* accumulated normal correction this substep */
} pbd__contact;

/* The hash grid (see "// ==== hash grid" for its functions). Point k of a
   build is base[stride * (ids ? ids[k] : k)]; `sorted` holds the point
   numbers k bucket by bucket, each bucket in increasing k. */
typedef struct pbd__grid {
    float cell, inv_cell; /* cell edge (m) */
    int mask;             /* buckets - 1 (a power of two minus one) */
    int axis_bits;        /* log2(buckets) / 3, at most 10 (see pbd__grid_hash) */
    int count;            /* points of the last build */
    int cap, bucket_cap;  /* capacities (points, buckets + 1) */
    int *start;           /* bucket b: sorted[start[b] .. start[b + 1]) */
    int *sorted;
    int *key;   /* bucket of point k */
    float *pos; /* 4 floats per slot: the point of sorted[s] (x y z, k as w
                             is not stored: use sorted), for cache-friendly scans */
} pbd__grid;

/* A fluid's kernel constants (derived from its parameters when it is
   added or restored): W_poly6(r) = c6 (h^2 - r^2)^3,
   grad W_spiky(d) = cs (h - r)^2 d / r. */
typedef struct pbd__kern {
    float h, h2, c6, cs, scorr; /* scorr: -k / (W(dq)^n * denominator) */
    float rest, inv_rho0;       /* the SPH rest density (pbd__lattice_sums) and its inverse */
    int n;                      /* s_corr exponent when integral, else 0 */
    float nf;
    float wall_shift; /* added to a wall's distance (pbd__wall_lattice_shift) */
    float scorr_full; /* scorr before pbd__fluid_begin_step's substep scale */
} pbd__kern;

/* A fluid: a contiguous particle range (see "// ==== fluids"). */
typedef struct pbd__fluid {
    pbd__slot s;
    int first, count;
    float rest_density, spacing, kernel_radius, mass;
    float relaxation, viscosity, vorticity;
    float scorr_k, scorr_n, scorr_dq;
    float denominator; /* sum_k w_k |grad_k C|^2 of a lattice particle */
    float eps;         /* relaxation * denominator */
    float gravity_cfl; /* substep bound (pbd__fluid_substeps) */
    pbd__kern kern;    /* derived, recomputed on restore */
} pbd__fluid;

/* Colliders a fluid particle's density sees at once (the first in collider
   order within its kernel radius): a box tank's corner is three. */
#define PBD__FLUID_WALLS 4

/* Particle contact and fluids: state (fluids, friction; the per-particle
   switches are bits of pbd_world.flags) and per-substep scratch over the
   np particles that take part, sized when they are switched on. */
typedef struct pbd__particle_phase {
    int nfluids, fluid_cap;
    pbd__fluid *fluids;
    float mu_s, mu_d;
    float pressure_h; /* the substep of pbd_world.pressure (0: none yet) */
    /* scratch */
    int np, cap; /* taking part / capacity */
    int *ids;    /* world particle of each, increasing */
    int *fluid;  /* its fluid or -1 */
    int *object; /* its object or -1 */
    /* per slot of the grid (bucket order, so that neighbours are near in
       memory): the slot's particle, fluid and object, and the work arrays */
    int *slot; /* slot of ids[k] */
    int *sid, *sfluid, *sobject;
    int *nbr, *nbr_count; /* PBD_MAX_NEIGHBORS slots each; the count of the pairs
                             within reach (pbd__pp_activate: those first) */
    int *nbr_listed;      /* all of the list, the pairs kept lists may need too */
    float *cload;         /* contact load: pbd__pp_load over the contact candidates */
    int *nbr_off;         /* a's list: nbr[nbr_off[a] ..], packed in slot order within
                           each thread's run of slots (see pbd__pp_build) */
    unsigned char *cross; /* touches another object this substep */
    unsigned char *pure;  /* a fluid particle whose neighbours are all of its fluid
                             (the fluid passes' SIMD fast path) */
    float *lambda, *density, *omega_len;
    pbd__p4 *spos;       /* positions gathered in slot order (w: inverse mass) */
    pbd__p4 *sxr;        /* the substep's start positions (x) in slot order, w: the
                            radius (the SIMD contacts, pbd__vcontact_block) */
    pbd__p4 *dp, *omega; /* omega: the SPH curl after the velocity update; during the
                            iterations the positions with the multipliers as w */
    pbd__p4 *svel;       /* velocities gathered in slot order (fluid velocity pass) */
    int *gslot;          /* the slot of each grid slot (the slots are the grid's in
                           pbd__grid_spatial_order, so that neighbours are near) */
    int *order, *order_tmp;
    unsigned *order_key;
    pbd__p4 *wall;        /* PBD__FLUID_WALLS per slot: the colliders within a fluid
                           particle's kernel radius as planes (n, w: s = n . p + w
                           its distance), linearised once per substep */
    unsigned char *nwall; /* how many of them */
    float reach;          /* search radius of the last build */
    pbd__p4 *built;       /* per particle taking part (k): its position when the
                             lists were built (pbd__pp_lists_stale) */
    int stale;            /* this substep builds the lists (pbd__pp_lists_stale) */
    pbd__grid grid;
} pbd__particle_phase;

/* The default thread policy's state (see "// ==== threads"). */
#define PBD__TEAM_LEVELS 12      /* 1024 threads halve to 1 in 11 steps */
#define PBD__TEAM_GAIN 0.9       /* more threads must take at most 0.9x the time of fewer */
#define PBD__PROBE_FIRST 4.0     /* the first wait after a switch: 4x a probe's cost */
#define PBD__PROBE_BACKOFF 128.0 /* the longest wait: 128x a probe's cost */
#define PBD__GATE_BARRIERS 4
#define PBD__GATE_SHARE 0.25 /* the gate passes below a quarter of the current substep */

typedef struct pbd__team {
    int max;                      /* T (0: not initialised) */
    int levels;                   /* level k runs pbd__team_size(a, k) threads; the last runs 1 */
    int level;                    /* the current choice */
    int up;                       /* the next probe tries more threads (1) or fewer (0) */
    double sec[PBD__TEAM_LEVELS]; /* latest seconds per substep at each level; 0: never run */
    double wait;                  /* substep seconds left before the next probe */
    double factor;                /* backoff: the next wait in units of a probe's cost */
    long probes, switches;        /* counts, for tests and curious users of the debugger */
} pbd__team;

struct pbd_world {
    pbd_allocator alloc;
    pbd_log_fn log;
    void *log_user;
    char error[256];
    /* parameters */
    float gravity[3];
    int substeps, iterations, mode, correction, max_contacts;
    float reference_dt; /* pbd_world_desc.reference_dt */
    float granular_cfl; /* pbd_world_desc.granular_cfl (pbd__grain_substeps) */
    int tear_stale;     /* pbd_world_tear ran out of memory for its tables (pbd__tear_tables) */
    float point_damping;
    int jacobi;                 /* averaged Jacobi instead of Gauss-Seidel */
    float jacobi_relax;         /* relaxation factor of the Jacobi average */
    int simd, threads;          /* execution: SIMD kernels on/off, thread count (0: default) */
    int lanes;                  /* the fluid sums' lanes: PBD__W of the build that made the world
                                   (a GPU world's kernels sum in the host's lanes: "==== fluids") */
    pbd__team team;             /* the default policy's measurements (threads 0) */
    int last_team;              /* threads of the last substep */
    double (*team_clock)(void); /* the policy's clock in seconds; NULL: omp_get_wtime (tests script it) */
    double time;
    float carry; /* s: short steps carried over, not simulated yet (pbd__step_carried) */
    int seq;     /* adds so far: each record's pbd__slot.seq (pbd__rollback) */
    /* particles */
    int n, cap;
    pbd__p4 *x, *p, *v; /* positions (w: inverse mass), predictions, velocities */
    float *mass, *radius;
    unsigned char *flags;
    int *owner;           /* per particle: its object's slot (>= 0), -2 - its fluid's slot, or -1: none (derived) */
    pbd_range last_alloc; /* the last range pbd__append_particles handed out, and */
    int last_alloc_seq, last_alloc_reused; /* its add count and whether it was free particles (pbd__rollback) */
    pbd__v3 *kin_target, *kin_from;
    pbd__p4 *x_step, *v_step;        /* x and v at the start of the step: what a non-finite step rolls back to */
    float *pressure, *pressure_step; /* a fluid particle's density multipliers of the last substep,
                                        summed (the warm start of pbd__fluid_lambda; 0 for the
                                        others), and at the start of the step (rollback) */
    float pressure_h_step;           /* pp.pressure_h at the start of the step (rollback) */
    pbd_acceleration_fn accel;
    void *accel_user;
    /* constraint groups, objects, colliders */
    int ngroups, group_cap;
    pbd__group *groups;
    int nobjects, object_cap;
    pbd__object *objects;
    int ncolliders, collider_cap;
    pbd__collider *colliders;
    /* contact scratch, sized when particles or colliders are added */
    int contact_cap, contact_stride; /* slot k of particle i: contacts[k * contact_stride + i] */
    pbd__contact *contacts;          /* per-particle slots, see pbd__generate_contacts */
    unsigned char *ncontact;         /* contacts of each particle this substep */
    int *contact_ids, ncontact_ids;  /* this substep: the particles with contacts, in order */
    double *contact_turn;            /* per particle, this substep: the angular momentum its contacts gave it */
    pbd__pose *pose_from, *pose_to;  /* per collider, this substep */
    pbd__pose *pose_step;            /* per collider, its pose at the start of the step (rollback) */
    int pose_cap;
    pbd__p4 *delta;      /* Jacobi: summed corrections (w: count) per particle */
    double *object_l;    /* per object, this substep: angular momentum after the prediction, isolated flag */
    int *object_coupled; /* per object, its coupled flag at the start of the step (rollback) */
    float *object_drag;  /* per object: its air drag, 1/s (pbd_object_set_drag); object_drag_n of them */
    int object_drag_n;
    float *object_keep;         /* per object, this step: exp(-drag h), what its velocities keep in a prediction */
    int drag_on;                /* this step: some object has a drag (pbd__predict reads object_keep) */
    struct pbd__pieces *pieces; /* per object slot (pieces_cap): its connected pieces, which damping
                                   takes one by one; derived, so rebuilt on restore, never saved */
    int pieces_cap;
    /* mesh colliders (see "==== mesh colliders") and self-collision
       surfaces (see "==== self-collision") */
    int nmeshcols, meshcol_cap;
    struct pbd__meshcol *meshcols;
    int nsurfaces, surface_cap;
    struct pbd__surface *surfaces;
    struct pbd__selfcol *selfcol; /* derived scratch, rebuilt when surfaces change */
    pbd__particle_phase pp;       /* particle contact and fluids */
    /* strain limiting, strands, tearing, damping clusters (their sections) */
    int nlras, lra_cap;
    struct pbd__lra *lras;
    int nlimits, limit_cap;
    struct pbd__limit *limits;
    int nstrands, strands_cap;
    struct pbd__strands *strands;
    int ntears, tear_cap;
    struct pbd__tear *tears;
    int nclusters, cluster_cap;
    struct pbd__cluster *clusters;
    /* plugins: not simulation state, they stay with the world on restore */
    int nplugins, plugin_cap;
    struct pbd__plugin *plugins;
    /* the GPU (see "==== gpu"): pbd_cuda.cu's state, NULL on the CPU; the
       host's copy of what the device changed is stale (after a step); what
       the host changed since the last upload (PBD__GPU_DIRTY_* bits) */
    struct pbd__gpu *gpu;
    int gpu_host_stale, gpu_dirty;
};

/* --- the GPU's hooks (see "==== gpu") ------------------------------------- */
/* What changed on the host since the last upload: anything (the next step
   uploads the whole world); the particles' positions, velocities and
   kinematic targets (the next step sends those arrays); settings (the
   world's and its things' numbers: gravity, compliances, damping, ...;
   the next step sends the records, a few hundred bytes, not their
   arrays); attachment targets (the records and the attachment groups'
   targets). The setters a game calls every frame mark one of the last
   three, and do not fetch the particles first. The colliders go with
   every step. */
enum { PBD__GPU_DIRTY_ALL = 1, PBD__GPU_DIRTY_PARTICLES = 2, PBD__GPU_DIRTY_SETTINGS = 4, PBD__GPU_DIRTY_TARGETS = 8 };
/* What the device changed that the host has not fetched (pbd_world.gpu_host_stale). */
enum {
    PBD__GPU_STALE_PARTICLES = 1,
    PBD__GPU_STALE_CONTACTS = 2,
    PBD__GPU_STALE_NEIGHBORS = 4,
    PBD__GPU_STALE_SELFCOL = 8, /* the self-collision candidates */
    PBD__GPU_STALE_TARGETS = 16 /* the attachment groups' targets (a kernel moved them:
                                   pbd_upsample.h's pbd_up_wrinkle_update_world) */
};

/* pbd_cuda.cu's entry points (PBD_CUDA_COMPANION: pbd_cuda.cu's own
   private copy of this header). C linkage, so that a C program links the
   CUDA file. */
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
#ifdef __cplusplus
extern "C" {
#endif
/* Opens a device for w and allocates its state (w->gpu), or fails with a
   code and the reason in msg. world_size: sizeof(pbd_world) in the
   caller, so that a pbd_cuda.cu built against another pbd.h is refused;
   automatic: PBD_DEVICE_AUTO asks (the emulation declines). On success msg
   names the device. */
pbd_result pbd__cuda_open(pbd_world *w, size_t world_size, int automatic, char *msg, size_t msg_size);
void pbd__cuda_close(pbd_world *w);
/* One step of dt in `substeps` substeps on the device (uploading first
   what w->gpu_dirty marks, and clearing it; substeps 0: only that); an
   error leaves the world as before the step. The plugins' callbacks run
   on the host, with the host's arrays brought up to date around them;
   what they mark dirty stays marked for the next step. */
pbd_result pbd__cuda_step(pbd_world *w, float dt, int substeps, char *msg, size_t msg_size);
/* The device's state into the host's arrays: what & PBD__GPU_STALE_PARTICLES
   the particles (x, v), their contact counts, the fluids' pressures, the
   objects' coupled flags and the tethers' reach; what &
   PBD__GPU_STALE_CONTACTS the contacts; what & PBD__GPU_STALE_NEIGHBORS the
   particle phase's neighbour lists; what & PBD__GPU_STALE_SELFCOL the
   self-collision candidates; what & PBD__GPU_STALE_TARGETS the attachment
   groups' targets. */
void pbd__cuda_pull(pbd_world *w, int what);
const float *pbd__cuda_positions(pbd_world *w);
/* The emulation's launch order seed (PBD_CUDA_EMULATE; tests compare two). */
void pbd__cuda_emulate_seed(unsigned seed);
/* n bytes of device memory into host memory (tests read what a device
   pointer of the public API holds). */
void pbd__cuda_read(void *host, const void *device, size_t n);
/* Bytes w's steps and uploads have sent to the device so far (tests). */
size_t pbd__cuda_bytes_sent(const pbd_world *w);
#ifdef __cplusplus
}
#endif
#endif

/* Brings a GPU world's host copy up to date (after a step the device's
   particles are newer) and marks what the caller may change. */
static void pbd__gpu_sync(const pbd_world *cw, int dirty) {
#ifdef PBD_CUDA
    pbd_world *w = (pbd_world *)cw; /* the host's copy of device state: not simulation state */
    if (!w->gpu) return;
    /* a change is uploaded whole, the self-collision candidates too */
    int what =
        PBD__GPU_STALE_PARTICLES | PBD__GPU_STALE_TARGETS | (dirty & PBD__GPU_DIRTY_ALL ? PBD__GPU_STALE_SELFCOL : 0);
    if (w->gpu_host_stale & what) {
        pbd__cuda_pull(w, w->gpu_host_stale & what);
        w->gpu_host_stale &= ~what;
    }
    w->gpu_dirty |= dirty;
#else
    (void)cw;
    (void)dirty;
#endif
}
/* Marks what a setter of numbers changes, fetching nothing (the host's
   particles may stay stale: the setter reads none). */
static void pbd__gpu_mark(pbd_world *w, int dirty) {
#ifdef PBD_CUDA
    if (w->gpu) w->gpu_dirty |= dirty;
#else
    (void)w;
    (void)dirty;
#endif
}
/* Fetches what of `what` is stale, and nothing else. */
static void pbd__gpu_pull(const pbd_world *w, int what) {
#ifdef PBD_CUDA
    if (w->gpu && (w->gpu_host_stale & what)) {
        pbd__cuda_pull((pbd_world *)w, w->gpu_host_stale & what);
        ((pbd_world *)w)->gpu_host_stale &= ~what;
    }
#else
    (void)w;
    (void)what;
#endif
}
/* pbd__gpu_sync, and `what` (PBD__GPU_STALE_CONTACTS, _NEIGHBORS: what
   only their getters read). */
static void pbd__gpu_sync_also(const pbd_world *w, int what) {
    pbd__gpu_pull(w, what);
    pbd__gpu_sync(w, 0);
}

/* --- allocation ------------------------------------------------------------ */

static void *pbd__alloc(pbd_world *w, size_t size) {
    if (size == 0) size = 1;
    if (w && w->alloc.alloc) return w->alloc.alloc(w->alloc.user, size);
    return PBD_MALLOC(size);
}
static void pbd__free(pbd_world *w, void *ptr) {
    if (!ptr) return;
    if (w && w->alloc.free) w->alloc.free(w->alloc.user, ptr);
    else PBD_FREE(ptr);
}
static void *pbd__alloc_n(pbd_world *w, size_t n, size_t elem) {
    size_t sz;
    if (!pbd__mul_ok(n, elem, &sz)) return NULL;
    return pbd__alloc(w, sz);
}
/* Grow *ptr (n used of *cap) to hold at least `need`; copies, never loses
   data: on failure *ptr is untouched. */
static int pbd__grow(pbd_world *w, void **ptr, int n, int *cap, int need, size_t elem) {
    if (need <= *cap) return 1;
    long nc = *cap ? (long)*cap * 2 : 16;
    if (nc < need) nc = need;
    if (nc > INT_MAX) nc = INT_MAX;
    void *np = pbd__alloc_n(w, (size_t)nc, elem);
    if (!np) return 0;
    if (*ptr && n) memcpy(np, *ptr, (size_t)n * elem);
    pbd__free(w, *ptr);
    *ptr = np;
    *cap = (int)nc;
    return 1;
}

#define PBD__SLOT_MASK ((1u << PBD_HANDLE_SLOT_BITS) - 1u)
#define PBD__GEN_MASK ((1u << (32 - PBD_HANDLE_SLOT_BITS)) - 1u)
#define PBD__MAX_SLOTS ((int)PBD__SLOT_MASK)

static const pbd__slot *pbd__slot_of(const void *records, size_t stride, int i) {
    return (const pbd__slot *)(const void *)((const char *)records + stride * (size_t)i);
}
/* The handle id of record i. */
static uint32_t pbd__handle_id(const void *records, size_t stride, int i) {
    return (pbd__slot_of(records, stride, i)->gen << PBD_HANDLE_SLOT_BITS) | (uint32_t)(i + 1);
}
#define PBD__HANDLE(array, i) pbd__handle_id((array), sizeof *(array), (i))
/* A record in a pool of n: its handle, or 0 for index < 0 (none). */
#define PBD__HANDLE_OR_NONE(array, i) ((i) >= 0 ? PBD__HANDLE(array, i) : 0u)
/* The live records of a pool (a count for the user: free slots are none
   of their business). */
static int pbd__live_count(const void *records, size_t stride, int n) {
    int live = 0;
    for (int i = 0; i < n; ++i) live += pbd__slot_of(records, stride, i)->live;
    return live;
}
#define PBD__LIVE(array, n) ((array) ? pbd__live_count((array), sizeof *(array), (n)) : 0)
/* The handle id of the index-th live record (in slot order), 0 if none. */
static uint32_t pbd__nth_live(const void *records, size_t stride, int n, int index) {
    for (int k = 0; index >= 0 && k < n; ++k)
        if (pbd__slot_of(records, stride, k)->live && index-- == 0) return pbd__handle_id(records, stride, k);
    return 0u;
}
/* The first record with seq > since, or -1 (pbd__rollback). */
static int pbd__newer_slot(const void *records, size_t stride, int n, int since) {
    for (int i = 0; i < n; ++i) {
        const pbd__slot *s = pbd__slot_of(records, stride, i);
        if (s->live && s->seq > since) return i;
    }
    return -1;
}
/* A free slot in a pool of *n records of `stride` bytes (the first a
   removal left, else a new one at the end, grown): zeroed but for its
   generation, live, stamped with the world's add count. */
static pbd_result pbd__acquire_slot(pbd_world *w, void **records, int *n, int *cap, size_t stride, const char *kind,
                                    int *index);
/* A removal (the caller has freed the record's memory): the record is
   zeroed, its slot free, and its generation advanced, never to 0, which
   marks a slot no add has used yet. A slot whose generations are used up
   (PBD__GEN_MASK - 1 adds) is retired, free for good (generation
   PBD__GEN_MASK): wrapping round, its 1024th add answered the first one's
   handle (an audit), and "an old handle never reaches the thing that
   took its slot". A retired slot costs its record's bytes. */
static void pbd__release_slot(void *records, size_t stride, int i) {
    pbd__slot *s = (pbd__slot *)(void *)((char *)records + stride * (size_t)i);
    uint32_t gen = s->gen + 1u;
    memset(s, 0, stride);
    s->gen = gen < PBD__GEN_MASK ? gen : PBD__GEN_MASK;
}
/* Whether slot s can take an add: free, and not retired. */
static int pbd__slot_open(const pbd__slot *s) { return !s->live && s->gen != PBD__GEN_MASK; }
/* Undoes an add that failed (the caller has freed the record's memory):
   the slot is as before the add, free with its old generation, and slots
   the add appended are dropped again, so that the world (and its
   snapshot) is byte-identical to before. */
static void pbd__undo_slot(pbd_world *w, void *records, size_t stride, int *n, int i) {
    pbd__slot *s = (pbd__slot *)(void *)((char *)records + stride * (size_t)i);
    uint32_t gen = s->gen;
    if (s->seq == w->seq) w->seq--; /* the add count, as before the add */
    memset(s, 0, stride);
    s->gen = gen;
    while (*n > 0 && !pbd__slot_of(records, stride, *n - 1)->live && pbd__slot_of(records, stride, *n - 1)->gen == 0)
        --*n;
}
/* Puts `rec` (a record built outside the pool; its slot header is not
   read) into a free slot, as pbd__acquire_slot would choose it. Call
   PBD__ROOM first: then it cannot fail. */
static int pbd__place_slot(pbd_world *w, void *records, int *n, size_t stride, const void *rec) {
    int i = 0;
    while (i < *n && !pbd__slot_open(pbd__slot_of(records, stride, i))) ++i;
    if (i == *n) {
        memset((char *)records + stride * (size_t)i, 0, sizeof(pbd__slot));
        ++*n;
    }
    pbd__slot *s = (pbd__slot *)(void *)((char *)records + stride * (size_t)i);
    memcpy((char *)s + sizeof *s, (const char *)rec + sizeof *s, stride - sizeof *s);
    s->live = 1;
    s->seq = ++w->seq;
    return i;
}
#define PBD__PLACE(w, array, n, rec) pbd__place_slot((w), (array), &(n), sizeof *(array), (rec))
#define PBD__ROOM(w, array, n, cap, kind) pbd__slot_room((w), (void **)&(array), (n), &(cap), sizeof *(array), (kind))
#define PBD__ACQUIRE(w, array, n, cap, kind, index) \
    pbd__acquire_slot((w), (void **)&(array), &(n), &(cap), sizeof *(array), (kind), (index))
#define PBD__RELEASE(array, i) pbd__release_slot((array), sizeof *(array), (i))
#define PBD__UNDO(array, n, i) pbd__undo_slot(w, (array), sizeof *(array), &(n), (i))

/* --- errors ------------------------------------------------------------------ */

/* "PBD_ERROR_NAME: message" into buf (size bytes). */
static void pbd__format_error(char *buf, size_t size, pbd_result r, const char *fmt, va_list ap) {
    int k = snprintf(buf, size, "%s: ", pbd__result_str(r, 0));
    if (k < 0 || k >= (int)size) k = 0;
    vsnprintf(buf + k, size - (size_t)k, fmt, ap);
}
/* Every error: this thread's pbd_last_error(), and with a world its
   message and log callback. */
static pbd_result pbd__vfail(const pbd_world *cw, pbd_result r, const char *fmt, va_list ap) {
    pbd_world *w = (pbd_world *)cw; /* the message buffer is not simulation state */
    pbd__format_error(pbd__last_error, sizeof pbd__last_error, r, fmt ? fmt : "", ap);
    if (!w) return r;
    memcpy(w->error, pbd__last_error, sizeof w->error);
    if (w->log) w->log(w->log_user, r, w->error);
    return r;
}
static pbd_result pbd__fail(const pbd_world *w, pbd_result r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pbd__vfail(w, r, fmt, ap);
    va_end(ap);
    return r;
}

PBDDEF const char *pbd_world_last_error(const pbd_world *w) { return w ? w->error : "world is NULL"; }
/* A call given no world: PBD_ERROR_NULL_POINTER, said in pbd_last_error().
   The constant is returned here, not pbd__fail's result, so that a
   compiler inlining a getter sees that its outputs are set whenever it
   returns PBD_OK (else gcc warns "may be used uninitialized" in code
   that checks the result, as the viewer's does). */
static pbd_result pbd__null_world(void) {
    pbd__fail(NULL, PBD_ERROR_NULL_POINTER, "world is NULL");
    return PBD_ERROR_NULL_POINTER;
}

/* Every call that reads or changes a world starts here. On a GPU world it
   first brings the host's copy up to date (after a step the device has the
   newer particles), and a call that may change the world marks it for
   upload before the next step ("==== gpu"). */
#define PBD__CHECK_WORLD_MARK(w, dirty)     \
    do {                                    \
        if (!(w)) return pbd__null_world(); \
        pbd__gpu_sync((w), (dirty));        \
    } while (0)
#define PBD__CHECK_WORLD(w) PBD__CHECK_WORLD_MARK(w, PBD__GPU_DIRTY_ALL)
#define PBD__CHECK_WORLD_READ(w) PBD__CHECK_WORLD_MARK(w, 0)
/* the setters of particle state only (positions, velocities, kinematic targets) */
#define PBD__CHECK_WORLD_PARTICLES(w) PBD__CHECK_WORLD_MARK(w, PBD__GPU_DIRTY_PARTICLES)
/* the setters of numbers and poses, which read no particle: a GPU world
   marks what they change (PBD__GPU_DIRTY_SETTINGS, _TARGETS, or 0 for the
   colliders, which go with every step) without fetching the particles */
#define PBD__CHECK_WORLD_SETTING(w, dirty)  \
    do {                                    \
        if (!(w)) return pbd__null_world(); \
        pbd__gpu_mark((w), (dirty));        \
    } while (0)
#define PBD__CHECK_PTR(w, ptr, name)                                                   \
    do {                                                                               \
        if (!(ptr)) return pbd__fail((w), PBD_ERROR_NULL_POINTER, "%s is NULL", name); \
    } while (0)

static pbd_result pbd__check_particle(const pbd_world *w, int i, const char *what) {
    if (i < 0 || i >= w->n)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "%s %d is not a particle (0..%d)", what, i, w->n - 1);
    if (w->flags[i] & PBD__FREE) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s %d was removed", what, i);
    return PBD_OK;
}
/* A switch (a setter's `on`, a desc's 0/1 field): 0 or 1, anything else
   is refused as a flag out of its range (CONVENTIONS), not taken as on. */
static pbd_result pbd__check_switch(const pbd_world *w, int v, const char *what) {
    if (v == 0 || v == 1) return PBD_OK;
    return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s %d must be 0 or 1", what, v);
}
/* A compliance and its stiffness; kind names the pair in the desc
   ("stretch_" for stretch_compliance and stretch_stiffness, "" alone). */
static pbd_result pbd__check_compliance(const pbd_world *w, float c, float k, const char *kind) {
    if (!pbd__finite(c)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%scompliance %g is not finite", kind, (double)c);
    if (!pbd__finite(k)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%sstiffness %g is not finite", kind, (double)k);
    if (c < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%scompliance %g < 0", kind, (double)c);
    if (k < 0 || k > 1)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%sstiffness %g outside [0, 1]", kind, (double)k);
    return PBD_OK;
}
static pbd_result pbd__check_finite(const pbd_world *w, const float *x, size_t n, const char *what) {
    if (!pbd__finite_n(x, n)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%s contains NaN or infinity", what);
    return PBD_OK;
}

/* n / 3 particle positions (what: their name): finite, and every
   coordinate within PBD_MAX_COORDINATE. */
static pbd_result pbd__check_positions(const pbd_world *w, const float *x, size_t n, const char *what) {
    pbd_result r = pbd__check_finite(w, x, n, what);
    if (r != PBD_OK) return r;
    for (size_t i = 0; i < n; ++i)
        if (!(fabsf(x[i]) <= PBD_MAX_COORDINATE)) {
            char value[32];
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                             "%s: coordinate %c of point %zu is %s m, beyond PBD_MAX_COORDINATE = %g m of the origin",
                             what, "xyz"[i % 3], i / 3, pbd_format_float(x[i], value, sizeof value),
                             (double)PBD_MAX_COORDINATE);
        }
    return PBD_OK;
}

/* (declared with the extensions' errors: their messages use it too) */
PBDDEF const char *pbd_format_float(float v, char *buf, size_t size) {
    if (!buf || size == 0) return "";
    for (int digits = 6; digits < 9; ++digits) {
        snprintf(buf, size, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) return buf;
    }
    snprintf(buf, size, "%.9g", (double)v);
    return buf;
}

/* A particle mass (PBD_MIN_MASS): `what` names it, with index >= 0 as
   what[index]; 0 (pinned) is valid where zero_ok. */
static pbd_result pbd__check_mass(const pbd_world *w, float m, const char *what, int index, int zero_ok) {
    char name[64], value[32];
    if (index >= 0) snprintf(name, sizeof name, "%s[%d]", what, index);
    else snprintf(name, sizeof name, "%s", what);
    if (!pbd__finite(m)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%s = %g is not finite", name, (double)m);
    if (m < 0) return pbd__fail(w, PBD_ERROR_NEGATIVE_MASS, "%s = %g kg < 0", name, (double)m);
    if (m == 0 && zero_ok) return PBD_OK;
    if (!(m >= PBD_MIN_MASS && m <= PBD_MAX_MASS))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "%s = %s kg is outside [PBD_MIN_MASS, PBD_MAX_MASS] = [%g, %g] kg%s", name,
                         pbd_format_float(m, value, sizeof value), (double)PBD_MIN_MASS, (double)PBD_MAX_MASS,
                         zero_ok ? " (0 pins the particle)" : "");
    return PBD_OK;
}
/* A particle radius, a cloth's thickness, a fluid's spacing
   (PBD_MAX_RADIUS); 0 is valid where zero_ok. */
static pbd_result pbd__check_radius(const pbd_world *w, float r, const char *what, int zero_ok) {
    if (!pbd__finite(r)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%s = %g is not finite", what, (double)r);
    if (r < 0 || (r == 0 && !zero_ok))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s = %g must be %s", what, (double)r,
                         zero_ok ? ">= 0" : "> 0");
    if (r > PBD_MAX_RADIUS)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s = %g m is above PBD_MAX_RADIUS = %g m", what, (double)r,
                         (double)PBD_MAX_RADIUS);
    return PBD_OK;
}

/* A list output (the API's one convention, see "Lists" in the manual):
   out holds max items, may be NULL when max is 0 (a size query); *count
   receives the full length, required. */
static pbd_result pbd__check_list(const pbd_world *w, const void *out, int max, const int *count) {
    PBD__CHECK_PTR(w, count, "count");
    if (max < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "max %d < 0", max);
    if (max > 0 && !out)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "out is NULL with max %d > 0 (pass max 0 to ask the count)",
                         max);
    return PBD_OK;
}
/* The index of the live record a handle names in a pool of n records, or
   PBD_ERROR_INVALID_HANDLE with a message: 0, a slot out of range, a free
   slot or another generation (removed since). */
static pbd_result pbd__resolve(const pbd_world *w, uint32_t id, const void *records, size_t stride, int n,
                               const char *kind, int *index) {
    int i = (int)(id & PBD__SLOT_MASK) - 1;
    *index = -1;
    if (id == 0) return pbd__fail(w, PBD_ERROR_INVALID_HANDLE, "the %s handle is 0 (no %s)", kind, kind);
    if (i < 0 || i >= n) return pbd__fail(w, PBD_ERROR_INVALID_HANDLE, "%s handle 0x%x: slot %d of %d", kind, id, i, n);
    const pbd__slot *s = pbd__slot_of(records, stride, i);
    if (!s->live || s->gen != id >> PBD_HANDLE_SLOT_BITS)
        return pbd__fail(w, PBD_ERROR_INVALID_HANDLE, "%s handle 0x%x is stale: that %s was removed", kind, id, kind);
    *index = i;
    return PBD_OK;
}
#define PBD__RESOLVE(w, handle, array, n, kind, index) \
    pbd__resolve((w), (handle).id, (array), sizeof *(array), (n), (kind), (index))
/* The index of the group a handle names. */
static pbd_result pbd__group_index(const pbd_world *w, pbd_group g, int *index) {
    return PBD__RESOLVE(w, g, w->groups, w->ngroups, "group", index);
}
static pbd_result pbd__object_index(const pbd_world *w, pbd_object o, int *index);
static pbd_result pbd__surface_index(const pbd_world *w, pbd_surface handle, int *index);

/* Room for one more record in a pool: afterwards PBD__PLACE cannot fail. */
static pbd_result pbd__slot_room(pbd_world *w, void **records, int n, int *cap, size_t stride, const char *kind) {
    for (int i = 0; i < n; ++i)
        if (pbd__slot_open(pbd__slot_of(*records, stride, i))) return PBD_OK;
    if (n >= PBD__MAX_SLOTS)
        return pbd__fail(w, PBD_ERROR_OVERFLOW, "a world holds at most %d of each kind (%s)", PBD__MAX_SLOTS, kind);
    if (!pbd__grow(w, records, n, cap, n + 1, stride))
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for a %s", kind);
    return PBD_OK;
}

static pbd_result pbd__acquire_slot(pbd_world *w, void **records, int *n, int *cap, size_t stride, const char *kind,
                                    int *index) {
    int i = 0;
    *index = -1;
    while (i < *n && !pbd__slot_open(pbd__slot_of(*records, stride, i))) ++i;
    if (i == *n) {
        if (*n >= PBD__MAX_SLOTS)
            return pbd__fail(w, PBD_ERROR_OVERFLOW, "a world holds at most %d of each kind (%s)", PBD__MAX_SLOTS, kind);
        if (!pbd__grow(w, records, *n, cap, *n + 1, stride))
            return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for a %s", kind);
        memset((char *)*records + stride * (size_t)i, 0, stride);
        ++*n;
    }
    pbd__slot *s = (pbd__slot *)(void *)((char *)*records + stride * (size_t)i);
    uint32_t gen = s->gen;
    memset(s, 0, stride);
    s->gen = gen;
    s->live = 1;
    s->seq = ++w->seq;
    *index = i;
    return PBD_OK;
}

#define PBD__TRY(expr)                       \
    do {                                     \
        pbd_result pbd__r = (expr);          \
        if (pbd__r != PBD_OK) return pbd__r; \
    } while (0)

/* --- create / destroy --------------------------------------------------------- */

PBDDEF pbd_world_desc pbd_world_desc_default(void) {
    pbd_world_desc d;
    memset(&d, 0, sizeof d);
    d.gravity[1] = -9.81f;
    d.substeps = 4;
    d.reference_dt = 1.0f / 60.0f;
    d.iterations = 4;
    d.mode = PBD_SOLVER_XPBD;
    d.stiffness_correction = 1;
    d.point_damping = 0;
    d.max_contacts_per_particle = 4;
    d.granular_cfl = 0.033f;
    return d;
}

static pbd_result pbd__check_solver(const pbd_world *w, int mode, int substeps, int iterations) {
    if (mode != PBD_SOLVER_XPBD && mode != PBD_SOLVER_PBD)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "solver mode %d is neither PBD_SOLVER_XPBD (0) nor PBD_SOLVER_PBD (1)", mode);
    if (substeps < 1 || substeps > 1000)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "substeps %d must be in 1..1000", substeps);
    if (iterations < 1 || iterations > 1000)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "iterations %d must be in 1..1000", iterations);
    return PBD_OK;
}

/* 0 (a fixed substep count) or a valid time step (pbd_world_step_substeps). */
static int pbd__reference_dt_valid(float t) {
    return pbd__finite(t) && (t == 0 || (t >= PBD_MIN_TIME_STEP && t <= PBD_MAX_TIME_STEP));
}

/* An error of pbd_world_create: there is no world yet, so the message
   goes to pbd_last_error() and the desc's log callback. pbd__create_logged
   passes on the error a check without a world (pbd__fail(NULL, ...)) left
   in pbd_last_error(). */
static pbd_result pbd__create_logged(const pbd_world_desc *d, pbd_result r) {
    if (d && d->log) d->log(d->log_user, r, pbd__last_error);
    return r;
}
static pbd_result pbd__create_fail(const pbd_world_desc *d, pbd_result r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pbd__vfail(NULL, r, fmt, ap);
    va_end(ap);
    return pbd__create_logged(d, r);
}
static pbd_result pbd__gpu_open(pbd_world *w, const pbd_world_desc *d);
static void pbd__gpu_close(pbd_world *w);

PBDDEF pbd_result pbd_world_create(const pbd_world_desc *desc, pbd_world **out) {
    const pbd_world_desc *d = desc;
    if (!desc) return pbd__create_fail(d, PBD_ERROR_NULL_POINTER, "desc is NULL");
    if (!out) return pbd__create_fail(d, PBD_ERROR_NULL_POINTER, "out is NULL");
    if ((d->allocator.alloc == NULL) != (d->allocator.free == NULL))
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "give both allocator functions or neither");
    if (!pbd__finite_n(d->gravity, 3))
        return pbd__create_fail(d, PBD_ERROR_NOT_FINITE, "gravity (%g, %g, %g) is not finite", (double)d->gravity[0],
                                (double)d->gravity[1], (double)d->gravity[2]);
    for (int k = 0; k < 3; ++k)
        if (fabsf(d->gravity[k]) > PBD_MAX_GRAVITY)
            return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT,
                                    "gravity[%d] = %g m/s^2 is above PBD_MAX_GRAVITY = %g", k, (double)d->gravity[k],
                                    (double)PBD_MAX_GRAVITY);
    if (!pbd__finite(d->point_damping))
        return pbd__create_fail(d, PBD_ERROR_NOT_FINITE, "point_damping %g is not finite", (double)d->point_damping);
    if (d->point_damping < 0)
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "point_damping %g < 0", (double)d->point_damping);
    if (d->max_contacts_per_particle < 1 || d->max_contacts_per_particle > 64)
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "max_contacts_per_particle %d must be in 1..64",
                                d->max_contacts_per_particle);
    pbd_result solver = pbd__check_solver(NULL, (int)d->mode, d->substeps, d->iterations);
    if (solver != PBD_OK) return pbd__create_logged(d, solver); /* its message names the one at fault */
    if (d->stiffness_correction != 0 && d->stiffness_correction != 1)
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "stiffness_correction %d must be 0 or 1",
                                d->stiffness_correction);
    if (!pbd__finite(d->reference_dt))
        return pbd__create_fail(d, PBD_ERROR_NOT_FINITE, "reference_dt %g is not finite", (double)d->reference_dt);
    if (!pbd__finite(d->granular_cfl))
        return pbd__create_fail(d, PBD_ERROR_NOT_FINITE, "granular_cfl %g is not finite", (double)d->granular_cfl);
    if (d->granular_cfl < 0)
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "granular_cfl %g must be >= 0", (double)d->granular_cfl);
    if (!pbd__reference_dt_valid(d->reference_dt))
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "reference_dt %g s must be 0 or in [1e-6, 1] s",
                                (double)d->reference_dt);
    if (d->device != PBD_DEVICE_AUTO && d->device != PBD_DEVICE_GPU && d->device != PBD_DEVICE_CPU)
        return pbd__create_fail(d, PBD_ERROR_INVALID_ARGUMENT, "device %d must be PBD_DEVICE_AUTO, _GPU or _CPU",
                                (int)d->device);
    pbd_world tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.alloc = desc->allocator;
    pbd_world *w = (pbd_world *)pbd__alloc(&tmp, sizeof *w);
    if (!w) return pbd__create_fail(d, PBD_ERROR_OUT_OF_MEMORY, "no memory for the world");
    memset(w, 0, sizeof *w);
    w->alloc = desc->allocator;
    w->log = desc->log;
    w->log_user = desc->log_user;
    memcpy(w->gravity, desc->gravity, sizeof w->gravity);
    w->substeps = desc->substeps;
    w->reference_dt = desc->reference_dt;
    w->iterations = desc->iterations;
    w->mode = (int)desc->mode;
    w->correction = desc->stiffness_correction;
    w->point_damping = desc->point_damping;
    w->max_contacts = desc->max_contacts_per_particle;
    w->granular_cfl = desc->granular_cfl;
    w->jacobi_relax = 1.0f;
    w->simd = 1;
    w->lanes = PBD__W;
    w->pp.mu_s = 0.5f; /* particle contact friction */
    w->pp.mu_d = 0.4f;
    pbd_result r = pbd__gpu_open(w, d);
    if (r != PBD_OK) {
        pbd__free(w, w);
        return r;
    }
    *out = w;
    return PBD_OK;
}

static void pbd__group_free(pbd_world *w, pbd__group *g) {
    pbd__free(w, g->idx);
    pbd__free(w, g->rest);
    pbd__free(w, g->lambda);
    pbd__free(w, g->verts);
    pbd__free(w, g->scratch);
    pbd__free(w, g->color_start);
    pbd__free(w, g->slot);
    pbd__slot keep = g->s;
    memset(g, 0, sizeof *g);
    g->s = keep;
}

static void pbd__meshcols_free(pbd_world *w);
static void pbd__surfaces_free(pbd_world *w);
static int **pbd__surface_tris(pbd_world *w, int s, int *nt); /* its triangle array, for tearing */
static void pbd__pp_free(pbd_world *w);
static void pbd__extras_free(pbd_world *w);
static void pbd__pieces_free_all(pbd_world *w);
/* Frees everything the world owns except the world struct itself. */
static void pbd__world_free_contents(pbd_world *w) {
    pbd__pp_free(w);
    pbd__extras_free(w);
    pbd__meshcols_free(w);
    pbd__surfaces_free(w);
    for (int i = 0; w->groups && i < w->ngroups; ++i) pbd__group_free(w, &w->groups[i]);
    for (int i = 0; w->objects && i < w->nobjects; ++i) pbd__free(w, w->objects[i].perm);
    pbd__pieces_free_all(w);
    void *arrays[] = {w->x,           w->p,
                      w->v,           w->mass,
                      w->radius,      w->flags,
                      w->kin_target,  w->kin_from,
                      w->groups,      w->objects,
                      w->colliders,   w->contacts,
                      w->pose_from,   w->pose_to,
                      w->delta,       w->ncontact,
                      w->contact_ids, w->object_l,
                      w->x_step,      w->v_step,
                      w->pressure,    w->pressure_step,
                      w->pose_step,   w->object_coupled,
                      w->owner,       w->contact_turn,
                      w->object_drag, w->object_keep};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__free(w, arrays[i]);
}

static void pbd__plugins_destroy(pbd_world *w);
PBDDEF void pbd_world_destroy(pbd_world *w) {
    if (!w) return;
    pbd__gpu_close(w);
    pbd__plugins_destroy(w);
    pbd__world_free_contents(w);
    pbd__free(w, w);
}

PBDDEF pbd_result pbd_world_set_gravity(pbd_world *w, const float *gravity) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    PBD__CHECK_PTR(w, gravity, "gravity");
    PBD__TRY(pbd__check_finite(w, gravity, 3, "gravity"));
    for (int k = 0; k < 3; ++k)
        if (fabsf(gravity[k]) > PBD_MAX_GRAVITY)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "gravity[%d] = %g m/s^2 is above PBD_MAX_GRAVITY = %g", k,
                             (double)gravity[k], (double)PBD_MAX_GRAVITY);
    memcpy(w->gravity, gravity, sizeof w->gravity);
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_solver(pbd_world *w, pbd_solver_mode mode, int substeps, int iterations) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    PBD__TRY(pbd__check_solver(w, (int)mode, substeps, iterations));
    w->mode = (int)mode;
    w->substeps = substeps;
    w->iterations = iterations;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_reference_dt(pbd_world *w, float reference_dt) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    if (!pbd__finite(reference_dt)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "reference_dt is not finite");
    if (!pbd__reference_dt_valid(reference_dt))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "reference_dt = %g s must be 0 or in [%g, %g] s",
                         (double)reference_dt, (double)PBD_MIN_TIME_STEP, (double)PBD_MAX_TIME_STEP);
    w->reference_dt = reference_dt;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_stiffness_correction(pbd_world *w, int on) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    PBD__TRY(pbd__check_switch(w, on, "on"));
    w->correction = on;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_point_damping(pbd_world *w, float point_damping) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    if (!pbd__finite(point_damping)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "point damping is not finite");
    if (point_damping < 0)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "point damping %g < 0", (double)point_damping);
    w->point_damping = point_damping;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_jacobi(pbd_world *w, int on, float relaxation) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    if (!pbd__finite(relaxation)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "relaxation is not finite");
    if (!(relaxation > 0 && relaxation <= 2))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "relaxation %g outside (0, 2]", (double)relaxation);
    PBD__TRY(pbd__check_switch(w, on, "on"));
    w->jacobi = on;
    w->jacobi_relax = relaxation;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_simd(pbd_world *w, int on) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    PBD__TRY(pbd__check_switch(w, on, "on"));
    w->simd = on;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_threads(pbd_world *w, int threads) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    if (threads < 0 || threads > 1024)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "threads %d outside 0..1024", threads);
    w->threads = threads;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_get_solver(const pbd_world *w, pbd_solver_mode *mode, int *substeps, int *iterations) {
    PBD__CHECK_WORLD_READ(w);
    if (mode) *mode = (pbd_solver_mode)w->mode;
    if (substeps) *substeps = w->substeps;
    if (iterations) *iterations = w->iterations;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_get_jacobi(const pbd_world *w, int *on, float *relaxation) {
    PBD__CHECK_WORLD_READ(w);
    if (on) *on = w->jacobi;
    if (relaxation) *relaxation = w->jacobi_relax;
    return PBD_OK;
}

PBDDEF double pbd_world_time(const pbd_world *w) { return w ? w->time : 0.0; }

/* --- snapshot ---------------------------------------------------------------
   Layout: "PBDS", version, then every field in a fixed order, little-endian
   as in memory. The same walk measures, writes and reads (pbd__io), so the
   three can never disagree. */

#define PBD__SNAPSHOT_MAGIC 0x53444250u /* "PBDS" */
#define PBD__SNAPSHOT_VERSION \
    12u /* 12: the time carried over; 11: the world's granular_cfl; 10: the world's reference_dt; 9: objects' drags; 8: plugins' state at the end (7: a box
           collider's radius is its rounding) */
#define PBD__SNAPSHOT_VERSION_OLDEST 7u /* 7 restores too: no plugin state, the plugins keep theirs */

typedef struct pbd__io {
    unsigned char *out;      /* writing (NULL: measuring or reading) */
    const unsigned char *in; /* reading */
    size_t size, off;
    int bad;
    unsigned version;  /* the snapshot's (reading) or PBD__SNAPSHOT_VERSION */
    size_t plugins_at; /* reading: where the plugins' states begin (pbd__io_plugins) */
    int plugin_states; /* reading: how many the snapshot holds */
} pbd__io;

static void pbd__io_bytes(pbd__io *io, void *data, size_t n) {
    if (io->bad || n == 0) return;
    if (io->in) {
        if (n > io->size - io->off) {
            io->bad = 1;
            return;
        }
        memcpy(data, io->in + io->off, n);
    } else if (io->out) {
        memcpy(io->out + io->off, data, n);
    }
    io->off += n;
}
static void pbd__io_int(pbd__io *io, int *v) { pbd__io_bytes(io, v, sizeof *v); }
static void pbd__io_float(pbd__io *io, float *v) { pbd__io_bytes(io, v, sizeof *v); }
/* A record's slot header; returns 1 when the record is live (a free
   slot's record is all zero and has no more to read or write). */
static int pbd__io_slot(pbd__io *io, pbd__slot *s) {
    pbd__io_bytes(io, &s->gen, sizeof s->gen);
    pbd__io_int(io, &s->live);
    pbd__io_int(io, &s->seq);
    if (io->in && !io->bad && (s->gen > PBD__GEN_MASK || (s->live != 0 && s->live != 1) || s->seq < 0)) io->bad = 1;
    return !io->bad && s->live;
}

/* An array of n elements; when reading, it is allocated in world w. */
static void pbd__io_array(pbd__io *io, pbd_world *w, void **arr, long n, size_t elem) {
    if (io->bad) return;
    if (n < 0 || (io->in && (size_t)n > (io->size - io->off) / (elem ? elem : 1))) {
        io->bad = 1;
        return;
    }
    if (n == 0) return;
    if (io->in) {
        *arr = pbd__alloc_n(w, (size_t)n, elem);
        if (!*arr) {
            io->bad = 2;
            return;
        }
    }
    pbd__io_bytes(io, *arr, (size_t)n * elem);
}

/* An array of n structs counted by *count; allocated (zeroed) when reading. */
static void pbd__io_table(pbd__io *io, pbd_world *w, void **arr, int *count, int *cap, size_t elem) {
    pbd__io_int(io, count);
    if (io->bad) return;
    if (io->in) {
        if (*count < 0 || (size_t)*count > io->size - io->off) {
            io->bad = 1;
            *count = 0;
            return;
        }
        *cap = *count;
        if (*count > 0) {
            *arr = pbd__alloc_n(w, (size_t)*count, elem);
            if (!*arr) {
                io->bad = 2;
                *count = 0;
                return;
            }
            memset(*arr, 0, (size_t)*count * elem);
        }
    }
}

static void pbd__io_group(pbd__io *io, pbd_world *w, pbd__group *g) {
    int *ints[] = {&g->type, &g->count, &g->arity, &g->rest_stride, &g->unilateral, &g->enabled, &g->nverts, &g->ntris};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; ++i) pbd__io_int(io, ints[i]);
    pbd__io_float(io, &g->compliance);
    pbd__io_float(io, &g->stiffness);
    pbd__io_float(io, &g->pressure);
    if (io->bad) return;
    if (io->in && (g->type < 0 || g->type >= PBD_CONSTRAINT_TYPE_COUNT || g->count < 0 || g->arity < 0 ||
                   g->rest_stride < 0 || g->nverts < 0 || g->ntris < 0 || g->arity > 8 || g->rest_stride > 8)) {
        io->bad = 1;
        return;
    }
    long nidx = g->type == PBD_CONSTRAINT_MESH_VOLUME ? 3L * g->ntris : (long)g->count * g->arity;
    pbd__io_array(io, w, (void **)&g->idx, nidx, sizeof(int));
    pbd__io_array(io, w, (void **)&g->rest, (long)g->count * g->rest_stride, sizeof(float));
    pbd__io_array(io, w, (void **)&g->lambda, g->count, sizeof(float));
    pbd__io_array(io, w, (void **)&g->verts, g->nverts, sizeof(int));
    pbd__io_int(io, &g->ncolors);
    pbd__io_int(io, &g->overflow);
    if (io->in && !io->bad && (g->ncolors < 0 || g->ncolors > g->count)) {
        io->bad = 1;
        return;
    }
    pbd__io_array(io, w, (void **)&g->color_start, g->ncolors ? g->ncolors + 1 : 0, sizeof(int));
    int has_slot = g->slot != NULL;
    pbd__io_int(io, &has_slot);
    pbd__io_array(io, w, (void **)&g->slot, has_slot ? g->count : 0, sizeof(int));
    if (io->in && g->nverts > 0 && !io->bad) {
        g->scratch = (float *)pbd__alloc_n(w, (size_t)g->nverts * 6, sizeof(float));
        if (!g->scratch) io->bad = 2;
    }
}

/* Objects: the records (their permutation pointer written as 0), then
   each live object's permutation. */
static void pbd__io_objects(pbd__io *io, pbd_world *w) {
    if (io->in) pbd__io_array(io, w, (void **)&w->objects, w->nobjects, sizeof(pbd__object));
    for (int o = 0; io->in && w->objects && o < w->nobjects; ++o) w->objects[o].perm = NULL; /* not a pointer yet */
    for (int o = 0; !io->in && o < w->nobjects; ++o) {
        pbd__object rec;
        memcpy(&rec, &w->objects[o], sizeof rec);
        rec.perm = NULL;
        pbd__io_bytes(io, &rec, sizeof rec);
    }
    for (int o = 0; o < w->nobjects && !io->bad; ++o) {
        pbd__object *ob = &w->objects[o];
        int has = ob->perm != NULL;
        if (!ob->s.live) continue;
        pbd__io_int(io, &has);
        if (io->in && !io->bad && (has != 0 && has != 1)) io->bad = 1;
        if (has) pbd__io_array(io, w, (void **)&ob->perm, ob->count, sizeof(int));
    }
}
/* The objects' drags (version 9 on; before, they are 0: see
   pbd__reserve_object_scratch), after the plugins' states. */
static void pbd__io_drags(pbd__io *io, pbd_world *w) {
    if (io->version < 9) return;
    pbd__io_array(io, w, (void **)&w->object_drag, w->nobjects, sizeof(float));
    if (io->in) w->object_drag_n = w->object_drag ? w->nobjects : 0;
}
/* The world's reference_dt (version 10 on; before, 0: a snapshot of a
   fixed substep count steps as it did). */
static void pbd__io_reference_dt(pbd__io *io, pbd_world *w) {
    if (io->version < 10) return;
    pbd__io_float(io, &w->reference_dt);
    if (io->in && !pbd__reference_dt_valid(w->reference_dt)) io->bad = 1;
}
/* The world's granular_cfl (version 11 on; before, 0: a snapshot's
   grains step with the substeps they were saved with). */
static void pbd__io_granular_cfl(pbd__io *io, pbd_world *w) {
    if (io->version < 11) return;
    pbd__io_float(io, &w->granular_cfl);
    if (io->in && !(pbd__finite(w->granular_cfl) && w->granular_cfl >= 0)) io->bad = 1;
}
/* The time carried over (version 12 on; before, none). */
static void pbd__io_carry(pbd__io *io, pbd_world *w) {
    if (io->version < 12) return;
    pbd__io_float(io, &w->carry);
    if (io->in && !(pbd__finite(w->carry) && w->carry >= 0 && w->carry <= PBD_MAX_TIME_STEP)) io->bad = 1;
}
static void pbd__io_meshcols(pbd__io *io, pbd_world *w);
static void pbd__io_surfaces(pbd__io *io, pbd_world *w);
static void pbd__io_particle_phase(pbd__io *io, pbd_world *w);
static void pbd__io_extras(pbd__io *io, pbd_world *w);
static void pbd__io_plugins(pbd__io *io, pbd_world *w);
/* Walks the whole state. When reading, w is a fresh zeroed world whose
   arrays are allocated exactly to size. */
static void pbd__io_world(pbd__io *io, pbd_world *w) {
    unsigned magic = PBD__SNAPSHOT_MAGIC, version = PBD__SNAPSHOT_VERSION;
    pbd__io_bytes(io, &magic, sizeof magic);
    pbd__io_bytes(io, &version, sizeof version);
    if (io->in &&
        (magic != PBD__SNAPSHOT_MAGIC || version < PBD__SNAPSHOT_VERSION_OLDEST || version > PBD__SNAPSHOT_VERSION))
        io->bad = 1;
    io->version = version;
    for (int i = 0; i < 3; ++i) pbd__io_float(io, &w->gravity[i]);
    pbd__io_int(io, &w->substeps);
    pbd__io_int(io, &w->iterations);
    pbd__io_int(io, &w->mode);
    pbd__io_int(io, &w->correction);
    pbd__io_int(io, &w->max_contacts);
    pbd__io_float(io, &w->point_damping);
    pbd__io_int(io, &w->jacobi);
    pbd__io_float(io, &w->jacobi_relax);
    pbd__io_bytes(io, &w->time, sizeof w->time);
    pbd__io_int(io, &w->seq);
    pbd__io_int(io, &w->n);
    pbd__io_int(io, &w->ngroups);
    pbd__io_int(io, &w->nobjects);
    pbd__io_int(io, &w->ncolliders);
    if (io->bad) return;
    if (io->in) {
        if (w->n < 0 || w->ngroups < 0 || w->nobjects < 0 || w->ncolliders < 0 ||
            pbd__check_solver(NULL, w->mode, w->substeps, w->iterations) != PBD_OK || w->max_contacts < 1 ||
            w->max_contacts > 64) {
            io->bad = 1;
            return;
        }
        w->cap = w->n;
        w->group_cap = w->ngroups;
        w->object_cap = w->nobjects;
        w->collider_cap = w->ncolliders;
    }
    pbd__io_array(io, w, (void **)&w->x, w->n, sizeof(pbd__p4));
    pbd__io_array(io, w, (void **)&w->v, w->n, sizeof(pbd__p4));
    pbd__io_array(io, w, (void **)&w->mass, w->n, sizeof(float));
    pbd__io_array(io, w, (void **)&w->radius, w->n, sizeof(float));
    pbd__io_array(io, w, (void **)&w->flags, w->n, 1);
    pbd__io_array(io, w, (void **)&w->kin_target, w->n, sizeof(pbd__v3));
    pbd__io_array(io, w, (void **)&w->pressure, w->n, sizeof(float));
    pbd__io_array(io, w, (void **)&w->owner, w->n, sizeof(int));
    if (io->in && !io->bad && w->n > 0) {
        /* predictions, kinematic start points and Jacobi sums are scratch */
        w->p = (pbd__p4 *)pbd__alloc_n(w, (size_t)w->n, sizeof(pbd__p4));
        w->kin_from = (pbd__v3 *)pbd__alloc_n(w, (size_t)w->n, sizeof(pbd__v3));
        w->delta = (pbd__p4 *)pbd__alloc_n(w, (size_t)w->n, sizeof(pbd__p4));
        w->ncontact = (unsigned char *)pbd__alloc_n(w, (size_t)w->n, 1);
        w->contact_ids = (int *)pbd__alloc_n(w, (size_t)w->n, sizeof(int));
        w->contact_turn = (double *)pbd__alloc_n(w, (size_t)w->n, 3 * sizeof(double));
        w->x_step = (pbd__p4 *)pbd__alloc_n(w, (size_t)w->n, sizeof(pbd__p4));
        w->v_step = (pbd__p4 *)pbd__alloc_n(w, (size_t)w->n, sizeof(pbd__p4));
        w->pressure_step = (float *)pbd__alloc_n(w, (size_t)w->n, sizeof(float));
        if (!w->p || !w->kin_from || !w->delta || !w->ncontact || !w->contact_ids || !w->contact_turn || !w->x_step ||
            !w->v_step || !w->pressure_step)
            io->bad = 2;
        else {
            memset(w->ncontact, 0, (size_t)w->n);
            memcpy(w->p, w->x, sizeof(pbd__p4) * (size_t)w->n);
        }
    }
    /* every group takes at least its 14 fixed ints and floats in the
       buffer: a count the bytes left cannot hold is refused before the
       table is allocated (else a 1 KB forgery can ask for 150 GB:
       tests/fuzz/fuzz_restore.c) */
    if (io->in && !io->bad && (size_t)w->ngroups > (io->size - io->off) / (14 * sizeof(int))) io->bad = 1;
    if (io->in && !io->bad && w->ngroups > 0) {
        w->groups = (pbd__group *)pbd__alloc_n(w, (size_t)w->ngroups, sizeof(pbd__group));
        if (!w->groups) io->bad = 2;
        else memset(w->groups, 0, sizeof(pbd__group) * (size_t)w->ngroups);
    }
    for (int g = 0; g < w->ngroups && !io->bad; ++g)
        if (pbd__io_slot(io, &w->groups[g].s)) pbd__io_group(io, w, &w->groups[g]);
    pbd__io_objects(io, w);
    pbd__io_array(io, w, (void **)&w->colliders, w->ncolliders, sizeof(pbd__collider));
    pbd__io_meshcols(io, w);
    pbd__io_surfaces(io, w);
    pbd__io_particle_phase(io, w);
    pbd__io_extras(io, w);
    if (io->version >= 8) pbd__io_plugins(io, w); /* the plugins' own states */
    pbd__io_drags(io, w);
    pbd__io_reference_dt(io, w);
    pbd__io_granular_cfl(io, w);
    pbd__io_carry(io, w);
}

/* FNV-1a over the body: a corrupted snapshot (a flipped byte in a position
   is as valid-looking as any other float) is refused, not restored. The
   64-bit offset basis is 14695981039346656037; before 0.2 the snapshots
   (and pbd_upsample.h's files) started from 1469598103934665603, the
   basis less its last digit, which a reader of the documented format
   could not reproduce: such buffers are still read. */
#define PBD__FNV_BASIS 14695981039346656037ull
#define PBD__FNV_BASIS_BEFORE_0_2 1469598103934665603ull
static uint64_t pbd__fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = PBD__FNV_BASIS;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
/* Whether sum is the checksum of p[0..n) from either basis (one pass). */
static int pbd__fnv1a_matches(const unsigned char *p, size_t n, uint64_t sum) {
    uint64_t h = PBD__FNV_BASIS, old = PBD__FNV_BASIS_BEFORE_0_2;
    for (size_t i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
        old = (old ^ p[i]) * 1099511628211ull;
    }
    return sum == h || sum == old;
}

PBDDEF size_t pbd_world_snapshot_size(const pbd_world *w) {
    if (!w) return 0;
    pbd__io io;
    memset(&io, 0, sizeof io);
    pbd__io_world(&io, (pbd_world *)w); /* measuring does not write */
    return io.off + sizeof(uint64_t);
}

PBDDEF pbd_result pbd_world_save(const pbd_world *w, void *buffer, size_t size) {
    if (!w) return pbd__null_world();
    pbd__gpu_sync_also(w, PBD__GPU_STALE_SELFCOL);
    PBD__CHECK_PTR(w, buffer, "buffer");
    size_t need = pbd_world_snapshot_size(w);
    if (size < need)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "buffer of %zu bytes, the snapshot needs %zu", size, need);
    pbd__io io;
    memset(&io, 0, sizeof io);
    io.out = (unsigned char *)buffer;
    io.size = size;
    pbd__io_world(&io, (pbd_world *)w);
    uint64_t sum = pbd__fnv1a(io.out, io.off);
    memcpy(io.out + io.off, &sum, sizeof sum);
    return PBD_OK;
}

static pbd_result pbd__validate_restored(const pbd_world *t);
static pbd_result pbd__reserve_contacts(pbd_world *w, int nparticles, int ncolliders);
static pbd_result pbd__reserve_poses(pbd_world *w, int n);
static pbd_result pbd__reserve_object_scratch(pbd_world *w, int n);
static pbd_result pbd__pieces_find(pbd_world *w, int oi, const int *outside, int nout);
static pbd_result pbd__pieces_find_objects(pbd_world *w, const unsigned char *which);
static void pbd__pieces_drop(pbd_world *w, int oi);
static pbd_result pbd__meshcols_rebuild(pbd_world *w);
static pbd_result pbd__selfcol_rebuild(pbd_world *w);
static pbd_result pbd__selfcol_build(pbd_world *w, int keep);

static pbd_result pbd__validate_particle_phase(const pbd_world *t);
static pbd_result pbd__owners_build(pbd_world *t);
static pbd_result pbd__pp_refresh(pbd_world *w);
static int pbd__plugins_particle_end(const pbd_world *w);
static pbd_result pbd__plugins_check_states(pbd_world *w, const unsigned char *snap, const pbd__io *io, char *why,
                                            size_t why_size);
static void pbd__plugins_load_states(pbd_world *w, const unsigned char *snap, const pbd__io *io);
PBDDEF pbd_result pbd_world_restore(pbd_world *w, const void *buffer, size_t size) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, buffer, "buffer");
    pbd_world t;
    memset(&t, 0, sizeof t);
    t.alloc = w->alloc;
    pbd_result r = PBD_OK;
    uint64_t sum = 0;
    char why[200] = "";
    if (size < 2 * sizeof sum) return pbd__fail(w, PBD_ERROR_BAD_SNAPSHOT, "snapshot of %zu bytes is too short", size);
    size_t body = size - sizeof sum;
    memcpy(&sum, (const unsigned char *)buffer + body, sizeof sum);
    if (!pbd__fnv1a_matches((const unsigned char *)buffer, body, sum))
        return pbd__fail(w, PBD_ERROR_BAD_SNAPSHOT, "snapshot checksum does not match (corrupted or truncated)");
    pbd__io io;
    memset(&io, 0, sizeof io);
    io.in = (const unsigned char *)buffer;
    io.size = body;
    pbd__io_world(&io, &t);
    if (io.bad == 2) r = PBD_ERROR_OUT_OF_MEMORY;
    else if (io.bad || io.off != body) r = PBD_ERROR_BAD_SNAPSHOT;
    else r = pbd__validate_restored(&t);
    if (r == PBD_OK) r = pbd__owners_build(&t);
    if (r == PBD_OK) r = pbd__validate_particle_phase(&t);
    if (r == PBD_ERROR_BAD_SNAPSHOT) /* the checksum held: another version's layout or a forgery */
        snprintf(why, sizeof why, "a field is out of range or the layout is not version %u's (snapshot version %u)",
                 PBD__SNAPSHOT_VERSION, io.version);
    if (r == PBD_OK && t.n < pbd__plugins_particle_end(w)) { /* a plugin would index past it */
        r = PBD_ERROR_BAD_SNAPSHOT;
        snprintf(why, sizeof why, "it holds %d particles, and this world's plugins use particles up to %d", t.n,
                 pbd__plugins_particle_end(w) - 1);
    }
    if (r == PBD_OK && io.version >= 8)
        r = pbd__plugins_check_states(w, (const unsigned char *)buffer, &io, why, sizeof why);
    if (r == PBD_OK &&
        (pbd__reserve_contacts(&t, t.n, t.ncolliders) != PBD_OK || pbd__reserve_poses(&t, t.ncolliders) != PBD_OK ||
         pbd__reserve_object_scratch(&t, t.nobjects) != PBD_OK || pbd__pp_refresh(&t) != PBD_OK))
        r = PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) r = pbd__meshcols_rebuild(&t); /* BVHs and grids are derived */
    if (r == PBD_OK) r = pbd__selfcol_rebuild(&t);
    if (r == PBD_OK) r = pbd__pieces_find_objects(&t, NULL); /* derived too */
    if (r != PBD_OK) {
        pbd__world_free_contents(&t);
        return pbd__fail(w, r, "snapshot of %zu bytes could not be restored%s%s", size, why[0] ? ": " : "", why);
    }
    /* swap: the callbacks, allocator and message stay with the world */
    pbd__world_free_contents(w);
    t.log = w->log;
    t.log_user = w->log_user;
    t.accel = w->accel;
    t.accel_user = w->accel_user;
    t.simd = w->simd;
    t.lanes = w->lanes;
    t.threads = w->threads;
    t.team = w->team;
    t.last_team = w->last_team;
    t.team_clock = w->team_clock;
    t.nplugins = w->nplugins;
    t.plugin_cap = w->plugin_cap;
    t.plugins = w->plugins;
    t.gpu = w->gpu;
    t.gpu_dirty = PBD__GPU_DIRTY_ALL;
    memcpy(t.error, w->error, sizeof t.error);
    *w = t;
    if (io.version >= 8) pbd__plugins_load_states(w, (const unsigned char *)buffer, &io);
    return PBD_OK;
}

// ==== particles =============================================================

PBDDEF pbd_particles_desc pbd_particles_desc_default(void) {
    pbd_particles_desc d;
    memset(&d, 0, sizeof d);
    d.mass = 1.0f;
    d.radius = 0.01f;
    return d;
}

static inline float pbd__inv_mass(float mass, unsigned char flags) {
    return (mass > 0 && !(flags & (PBD__PINNED | PBD__KINEMATIC))) ? 1.0f / mass : 0.0f;
}
static void pbd__refresh_inv_mass(pbd_world *w, int i) {
    w->x[i].w = w->p[i].w = pbd__inv_mass(w->mass[i], w->flags[i]);
}

/* Contact slots for nparticles with ncolliders colliders: `per` slots a
   particle (see pbd__contacts_per_particle), slot-major, so that the first
   contacts of neighbouring particles lie side by side (a fluid tank's wall
   particles: one slot every 64 bytes instead of every per * 64). The
   contents are scratch of a substep: growing drops them. */
static pbd_result pbd__reserve_contacts(pbd_world *w, int nparticles, int ncolliders) {
    long per = ncolliders < w->max_contacts ? ncolliders : w->max_contacts;
    long need = (long)nparticles * per;
    if (need > INT_MAX) return PBD_ERROR_OVERFLOW;
    if (!pbd__grow(w, (void **)&w->contacts, 0, &w->contact_cap, (int)need, sizeof(pbd__contact)))
        return PBD_ERROR_OUT_OF_MEMORY;
    w->contact_stride = per > 0 ? (int)(w->contact_cap / per) : 0;
    return PBD_OK;
}

/* Capacity for `need` particles in every per-particle array. On failure the
   arrays that grew keep their (larger) capacity and all their data. */
static pbd_result pbd__reserve_particles(pbd_world *w, int need) {
    if (need <= w->cap) return pbd__reserve_contacts(w, need, w->ncolliders);
    int cap = w->cap, c;
#define PBD__GROW(arr, elem) (c = cap, pbd__grow(w, (void **)&w->arr, w->n, &c, need, elem))
    int ok = PBD__GROW(x, sizeof(pbd__p4)) && PBD__GROW(p, sizeof(pbd__p4)) && PBD__GROW(v, sizeof(pbd__p4)) &&
             PBD__GROW(mass, sizeof(float)) && PBD__GROW(radius, sizeof(float)) && PBD__GROW(flags, 1) &&
             PBD__GROW(kin_target, sizeof(pbd__v3)) && PBD__GROW(kin_from, sizeof(pbd__v3)) &&
             PBD__GROW(delta, sizeof(pbd__p4)) && PBD__GROW(ncontact, 1) && PBD__GROW(contact_ids, sizeof(int)) &&
             PBD__GROW(contact_turn, 3 * sizeof(double)) && PBD__GROW(x_step, sizeof(pbd__p4)) &&
             PBD__GROW(v_step, sizeof(pbd__p4)) && PBD__GROW(pressure, sizeof(float)) &&
             PBD__GROW(pressure_step, sizeof(float)) && PBD__GROW(owner, sizeof(int));
#undef PBD__GROW
    if (!ok) return PBD_ERROR_OUT_OF_MEMORY;
    w->cap = c;
    return pbd__reserve_contacts(w, need, w->ncolliders);
}

static pbd_result pbd__validate_particles(const pbd_world *w, const pbd_particles_desc *d) {
    PBD__CHECK_PTR(w, d, "desc");
    PBD__CHECK_PTR(w, d->positions, "desc.positions");
    if (d->count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle count %d <= 0", d->count);
    if (d->count > INT_MAX / 8 - w->n) return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d more particles overflow", d->count);
    PBD__TRY(pbd__check_positions(w, d->positions, 3 * (size_t)d->count, "positions"));
    if (d->velocities) PBD__TRY(pbd__check_finite(w, d->velocities, 3 * (size_t)d->count, "velocities"));
    if (d->masses) PBD__TRY(pbd__check_finite(w, d->masses, (size_t)d->count, "masses"));
    if (!pbd__finite(d->mass)) /* refused even beside masses, as it always was */
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "mass = %g is not finite", (double)d->mass);
    if (d->masses) {
        for (int i = 0; i < d->count; ++i) PBD__TRY(pbd__check_mass(w, d->masses[i], "masses", i, 1));
    } else {
        PBD__TRY(pbd__check_mass(w, d->mass, "mass", -1, 1));
    }
    return pbd__check_radius(w, d->radius, "radius", 1);
}

/* The first run of count free particles (removed ones), or -1. */
static int pbd__free_run(const pbd_world *w, int count) {
    int run = 0;
    for (int i = 0; i < w->n; ++i) {
        run = w->flags[i] & PBD__FREE ? run + 1 : 0;
        if (run == count) return i + 1 - count;
    }
    return -1;
}

/* Adds validated particles in the first run of free particles that holds
   them, else at the end; fails only for memory, changing nothing. */
static pbd_result pbd__append_particles(pbd_world *w, const pbd_particles_desc *d, pbd_range *out) {
    int first = pbd__free_run(w, d->count), reused = first >= 0;
    if (!reused) {
        pbd_result r = pbd__reserve_particles(w, w->n + d->count);
        if (r != PBD_OK) return pbd__fail(w, r, "no memory for %d particles", d->count);
        first = w->n;
    }
    for (int k = 0; k < d->count; ++k) {
        int i = first + k;
        pbd__v3 x = pbd__ld(d->positions + 3 * k);
        w->mass[i] = d->masses ? d->masses[k] : d->mass;
        w->radius[i] = d->radius;
        w->flags[i] = 0;
        w->x[i].x = x.x;
        w->x[i].y = x.y;
        w->x[i].z = x.z;
        w->x[i].w = pbd__inv_mass(w->mass[i], 0);
        w->p[i] = w->x[i];
        pbd__v3 v = d->velocities ? pbd__ld(d->velocities + 3 * k) : pbd__v(0, 0, 0);
        w->v[i].x = v.x;
        w->v[i].y = v.y;
        w->v[i].z = v.z;
        w->v[i].w = 0;
        w->kin_target[i] = x;
        w->kin_from[i] = x;
        w->ncontact[i] = 0;
        w->pressure[i] = 0;
        w->owner[i] = -1;
    }
    if (!reused) w->n += d->count;
    w->last_alloc.first = first;
    w->last_alloc.count = d->count;
    w->last_alloc_seq = ++w->seq;
    w->last_alloc_reused = reused;
    if (out) {
        out->first = first;
        out->count = d->count;
    }
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_particles(pbd_world *w, const pbd_particles_desc *desc, pbd_range *out) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__validate_particles(w, desc));
    return pbd__append_particles(w, desc, out);
}

PBDDEF int pbd_world_particle_count(const pbd_world *w) { return w ? w->n : 0; }
PBDDEF const float *pbd_world_positions(const pbd_world *w) {
    if (!w || !w->n) return NULL;
    pbd__gpu_sync(w, 0);
    return &w->x[0].x;
}
PBDDEF const float *pbd_world_velocities(const pbd_world *w) {
    if (!w || !w->n) return NULL;
    pbd__gpu_sync(w, 0);
    return &w->v[0].x;
}

static pbd_result pbd__check_range(const pbd_world *w, pbd_range r, const void *data) {
    PBD__CHECK_PTR(w, data, "data");
    if (r.first < 0 || r.count <= 0 || r.first > w->n - r.count)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "range [%d, +%d) is not within the %d particles", r.first,
                         r.count, w->n);
    return PBD_OK;
}
/* A range a setter writes: no removed particle in it (their state stays
   zero until an add takes them). */
static pbd_result pbd__check_live_range(const pbd_world *w, pbd_range r, const void *data) {
    PBD__TRY(pbd__check_range(w, r, data));
    for (int i = r.first; i < r.first + r.count; ++i)
        if (w->flags[i] & PBD__FREE) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d was removed", i);
    return PBD_OK;
}

/* Copies 3 floats per particle between user memory and a 4-float array. */
static void pbd__copy_out(const pbd__p4 *src, pbd_range r, float *out) {
    for (int k = 0; k < r.count; ++k) {
        const pbd__p4 *s = &src[r.first + k];
        out[3 * k] = s->x;
        out[3 * k + 1] = s->y;
        out[3 * k + 2] = s->z;
    }
}
static void pbd__copy_in(pbd__p4 *dst, pbd_range r, const float *in) {
    for (int k = 0; k < r.count; ++k) {
        pbd__p4 *d = &dst[r.first + k];
        d->x = in[3 * k];
        d->y = in[3 * k + 1];
        d->z = in[3 * k + 2];
    }
}

PBDDEF pbd_result pbd_particles_get_positions(const pbd_world *w, pbd_range r, float *out) {
    PBD__CHECK_WORLD_READ(w);
    PBD__TRY(pbd__check_range(w, r, out));
    pbd__copy_out(w->x, r, out);
    return PBD_OK;
}

PBDDEF pbd_result pbd_particles_set_positions(pbd_world *w, pbd_range r, const float *in) {
    PBD__CHECK_WORLD_PARTICLES(w);
    PBD__TRY(pbd__check_live_range(w, r, in));
    PBD__TRY(pbd__check_positions(w, in, 3 * (size_t)r.count, "positions"));
    pbd__copy_in(w->x, r, in);
    pbd__copy_in(w->p, r, in);
    for (int k = 0; k < r.count; ++k) /* a teleported kinematic particle stays there */
        w->kin_target[r.first + k] = pbd__ld(in + 3 * k);
    return PBD_OK;
}

PBDDEF pbd_result pbd_particles_get_velocities(const pbd_world *w, pbd_range r, float *out) {
    PBD__CHECK_WORLD_READ(w);
    PBD__TRY(pbd__check_range(w, r, out));
    pbd__copy_out(w->v, r, out);
    return PBD_OK;
}

PBDDEF pbd_result pbd_particles_set_velocities(pbd_world *w, pbd_range r, const float *in) {
    PBD__CHECK_WORLD_PARTICLES(w);
    PBD__TRY(pbd__check_live_range(w, r, in));
    PBD__TRY(pbd__check_finite(w, in, 3 * (size_t)r.count, "velocities"));
    pbd__copy_in(w->v, r, in);
    return PBD_OK;
}

/* What a pin / mass / kinematic call may change, to undo it when the
   cloth's automatic tethers cannot follow (no memory). */
typedef struct pbd__particle_state {
    float mass;
    unsigned char flags;
    pbd__p4 v;
    pbd__v3 kin_target;
} pbd__particle_state;
static pbd_result pbd__tethers_follow(pbd_world *w, int i, int was_anchor);
static pbd__particle_state pbd__particle_save(const pbd_world *w, int i) {
    pbd__particle_state s;
    s.mass = w->mass[i];
    s.flags = w->flags[i];
    s.v = w->v[i];
    s.kin_target = w->kin_target[i];
    return s;
}
static void pbd__strands_release(pbd_world *w, int i);
static pbd_result pbd__particle_changed(pbd_world *w, int i, const pbd__particle_state *before) {
    pbd_result r = pbd__tethers_follow(w, i, pbd__inv_mass(before->mass, before->flags) == 0);
    if (r != PBD_OK) {
        w->mass[i] = before->mass;
        w->flags[i] = before->flags;
        w->v[i] = before->v;
        w->kin_target[i] = before->kin_target;
        pbd__refresh_inv_mass(w, i);
    }
    if (r == PBD_OK && w->x[i].w > 0 && pbd__inv_mass(before->mass, before->flags) == 0) pbd__strands_release(w, i);
    return r;
}

PBDDEF pbd_result pbd_particle_set_mass(pbd_world *w, int particle, float mass) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    PBD__TRY(pbd__check_mass(w, mass, "mass", -1, 1));
    pbd__particle_state before = pbd__particle_save(w, particle);
    w->mass[particle] = mass;
    pbd__refresh_inv_mass(w, particle);
    return pbd__particle_changed(w, particle, &before);
}

PBDDEF pbd_result pbd_particle_get_mass(const pbd_world *w, int particle, float *mass) {
    PBD__CHECK_WORLD_READ(w);
    PBD__CHECK_PTR(w, mass, "mass");
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    *mass = w->mass[particle];
    return PBD_OK;
}

PBDDEF pbd_result pbd_particle_set_radius(pbd_world *w, int particle, float radius) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    PBD__TRY(pbd__check_radius(w, radius, "radius", 1));
    w->radius[particle] = radius;
    return PBD_OK;
}

PBDDEF pbd_result pbd_particle_pin(pbd_world *w, int particle) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    pbd__particle_state before = pbd__particle_save(w, particle);
    w->flags[particle] |= PBD__PINNED;
    w->v[particle].x = w->v[particle].y = w->v[particle].z = 0;
    pbd__refresh_inv_mass(w, particle);
    return pbd__particle_changed(w, particle, &before);
}

PBDDEF pbd_result pbd_particle_unpin(pbd_world *w, int particle) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    if (!(w->mass[particle] > 0))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "particle %d has mass 0: give it a mass with pbd_particle_set_mass", particle);
    pbd__particle_state before = pbd__particle_save(w, particle);
    w->flags[particle] &= (unsigned char)~PBD__PINNED;
    pbd__refresh_inv_mass(w, particle);
    return pbd__particle_changed(w, particle, &before);
}

PBDDEF pbd_result pbd_particle_set_kinematic(pbd_world *w, int particle, int kinematic) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    PBD__TRY(pbd__check_switch(w, kinematic, "kinematic"));
    pbd__particle_state before = pbd__particle_save(w, particle);
    if (kinematic) {
        w->flags[particle] |= PBD__KINEMATIC;
        w->kin_target[particle] = pbd__p3(w->x[particle]);
        w->v[particle].x = w->v[particle].y = w->v[particle].z = 0;
    } else {
        w->flags[particle] &= (unsigned char)~PBD__KINEMATIC;
    }
    pbd__refresh_inv_mass(w, particle);
    return pbd__particle_changed(w, particle, &before);
}

static pbd_result pbd__auto_tethers(pbd_world *w, int object);
/* Sets and clears flags over a range as the one-particle setters do (pin
   or kinematic: at rest; kinematic: its target where it is), then the
   tethers of every cloth whose anchors changed follow once. On error every
   particle and the cloths rebuilt so far go back. */
static pbd_result pbd__particles_flag(pbd_world *w, pbd_range r, unsigned char set, unsigned char clear) {
    PBD__TRY(pbd__check_live_range(w, r, w));
    pbd__particle_state *before = (pbd__particle_state *)pbd__alloc_n(w, (size_t)r.count, sizeof *before);
    if (!before) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for %d particles' states", r.count);
    for (int k = 0; k < r.count; ++k) {
        int i = r.first + k;
        before[k] = pbd__particle_save(w, i);
        w->flags[i] = (unsigned char)((w->flags[i] | set) & ~clear);
        if (set) w->v[i].x = w->v[i].y = w->v[i].z = 0;
        if (set & PBD__KINEMATIC) w->kin_target[i] = pbd__p3(w->x[i]);
        pbd__refresh_inv_mass(w, i);
    }
    pbd_result res = PBD_OK;
    int oi = 0;
    for (; oi < w->nobjects && res == PBD_OK; ++oi) {
        const pbd__object *o = &w->objects[oi];
        int changed = 0;
        for (int i = o->first > r.first ? o->first : r.first;
             o->tethers && i < o->first + o->count && i < r.first + r.count && !changed; ++i)
            changed = (w->x[i].w == 0) != (pbd__inv_mass(before[i - r.first].mass, before[i - r.first].flags) == 0);
        if (changed) res = pbd__auto_tethers(w, oi);
    }
    for (int k = 0; k < r.count; ++k) {
        int i = r.first + k;
        if (res != PBD_OK) {
            w->mass[i] = before[k].mass;
            w->flags[i] = before[k].flags;
            w->v[i] = before[k].v;
            w->kin_target[i] = before[k].kin_target;
            pbd__refresh_inv_mass(w, i);
        } else if (w->x[i].w > 0 && pbd__inv_mass(before[k].mass, before[k].flags) == 0) {
            pbd__strands_release(w, i);
        }
    }
    /* the cloths rebuilt before the one that failed follow the particles back */
    for (int j = 0; res != PBD_OK && j < oi - 1; ++j)
        if (w->objects[j].tethers) pbd__auto_tethers(w, j);
    pbd__free(w, before);
    return res;
}

PBDDEF pbd_result pbd_particles_pin(pbd_world *w, pbd_range r) {
    PBD__CHECK_WORLD(w);
    return pbd__particles_flag(w, r, PBD__PINNED, 0);
}

PBDDEF pbd_result pbd_particles_set_kinematic(pbd_world *w, pbd_range r, int kinematic) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_switch(w, kinematic, "kinematic"));
    return kinematic ? pbd__particles_flag(w, r, PBD__KINEMATIC, 0) : pbd__particles_flag(w, r, 0, PBD__KINEMATIC);
}

PBDDEF pbd_result pbd_particle_get_kinematic(const pbd_world *w, int particle, int *kinematic) {
    PBD__CHECK_WORLD_READ(w);
    PBD__CHECK_PTR(w, kinematic, "kinematic");
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    *kinematic = (w->flags[particle] & PBD__KINEMATIC) != 0;
    return PBD_OK;
}

PBDDEF pbd_result pbd_particle_set_kinematic_target(pbd_world *w, int particle, const float *target) {
    PBD__CHECK_WORLD_PARTICLES(w);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    PBD__CHECK_PTR(w, target, "target");
    PBD__TRY(pbd__check_positions(w, target, 3, "target"));
    if (!(w->flags[particle] & PBD__KINEMATIC))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d is not kinematic (pbd_particle_set_kinematic)",
                         particle);
    w->kin_target[particle] = pbd__ld(target);
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_set_acceleration_field(pbd_world *w, pbd_acceleration_fn fn, void *user) {
    PBD__CHECK_WORLD(w);
    w->accel = fn;
    w->accel_user = user;
    return PBD_OK;
}

// ==== constraints ===========================================================
/* Each pbd__eval_* takes the constraint's points, returns C and writes the
   gradients g[i] = dC/dp_i. A degenerate configuration writes zero
   gradients, which the projection skips. These are the single source of the
   math: the public pbd_constraint_* functions and the world solver both
   call them. */

/* Survey 3.4.1: C = |p0 - p1| - d, grad p0 = n, grad p1 = -n. */
static inline PBD_HD float pbd__eval_distance(const pbd__v3 *p, float rest, pbd__v3 *g) {
    pbd__v3 d = pbd__sub(p[0], p[1]);
    float l = pbd__len(d);
    if (l < PBD__LEN_MIN) {
        g[0] = g[1] = pbd__v(0, 0, 0);
        return -rest;
    }
    g[0] = pbd__mul(d, 1.0f / l);
    g[1] = pbd__neg(g[0]);
    return l - rest;
}

/* atan2 from basic operations only (Cephes' atanf: range reduction to
   |x| <= tan(pi/8), then a degree-9 odd polynomial; about 1e-7 relative
   error). Ours rather than libm's, so that the SIMD twin below can do
   exactly the same operations in every lane, and because calling libm's
   SSE code from AVX code costs transition stalls. */
static inline PBD_HD float pbd__atan2(float y, float x) {
    float ax = fabsf(x), ay = fabsf(y);
    float t = ay / ax, base = 0.0f;
    if (t > 2.414213562373095f) {
        base = 1.5707963267948966f;
        t = -1.0f / t;
    } else if (t > 0.4142135623730950f) {
        base = 0.7853981633974483f;
        t = (t - 1.0f) / (t + 1.0f);
    }
    float z = t * t;
    float a =
        base +
        (((((8.05374449538e-2f * z - 1.38776856032e-1f) * z + 1.99777106478e-1f) * z - 3.33329491539e-1f) * z) * t + t);
    if (x < 0) a = 3.14159265358979f - a;
    return y < 0 ? -a : a;
}

/* Signed dihedral angle of the triangles (p0 p2 p1) and (p0 p1 p3) about
   the edge p0-p1, and its gradient (Bridson, Marino, Fedkiw 2003, whose
   x1..x4 are our p2, p3, p0, p1). atan2 instead of the survey's acos
   (section 3.4.2) keeps the gradient finite at 0 and pi and gives a sign. */
static inline PBD_HD float pbd__dihedral(const pbd__v3 *p, pbd__v3 *g) {
    pbd__v3 e = pbd__sub(p[1], p[0]);
    pbd__v3 n1 = pbd__cross(pbd__sub(p[2], p[0]), pbd__sub(p[2], p[1]));
    pbd__v3 n2 = pbd__cross(pbd__sub(p[3], p[1]), pbd__sub(p[3], p[0]));
    float el = pbd__len(e), n1l2 = pbd__dot(n1, n1), n2l2 = pbd__dot(n2, n2);
    if (el < PBD__LEN_MIN || n1l2 < PBD__NORMAL_LEN2_MIN || n2l2 < PBD__NORMAL_LEN2_MIN) {
        if (g) g[0] = g[1] = g[2] = g[3] = pbd__v(0, 0, 0);
        return 0.0f;
    }
    pbd__v3 m1 = pbd__mul(n1, 1.0f / n1l2), m2 = pbd__mul(n2, 1.0f / n2l2);
    float s = 1.0f / sqrtf(n1l2 * n2l2);
    float cosv = pbd__dot(n1, n2) * s;
    float sinv = pbd__dot(pbd__cross(n1, n2), e) * s / el;
    float angle = pbd__atan2(sinv, cosv);
    if (g) {
        float inv_el = 1.0f / el;
        /* Bridson's u_i with the sign of our atan2 angle. */
        g[2] = pbd__mul(m1, -el);
        g[3] = pbd__mul(m2, -el);
        g[0] = pbd__neg(pbd__add(pbd__mul(m1, pbd__dot(pbd__sub(p[2], p[1]), e) * inv_el),
                                 pbd__mul(m2, pbd__dot(pbd__sub(p[3], p[1]), e) * inv_el)));
        g[1] = pbd__add(pbd__mul(m1, pbd__dot(pbd__sub(p[2], p[0]), e) * inv_el),
                        pbd__mul(m2, pbd__dot(pbd__sub(p[3], p[0]), e) * inv_el));
    }
    return angle;
}

static inline PBD_HD float pbd__wrap_angle(float a) {
    const float pi = 3.14159265358979f;
    if (!(fabsf(a) < 8.0f * pi)) a = fmodf(a, 2.0f * pi); /* bounded loops below, even for huge or NaN input */
    while (a > pi) a -= 2.0f * pi;
    while (a <= -pi) a += 2.0f * pi;
    return a;
}

static inline PBD_HD float pbd__eval_dihedral(const pbd__v3 *p, float rest, pbd__v3 *g) {
    float a = pbd__dihedral(p, g);
    if (g[0].x == 0 && g[0].y == 0 && g[0].z == 0 && g[2].x == 0 && g[2].y == 0 && g[2].z == 0) return 0.0f;
    return pbd__wrap_angle(a - rest);
}

/* Cotangent of the angle between a and b. */
static inline float pbd__cot(pbd__v3 a, pbd__v3 b) {
    float s = pbd__len(pbd__cross(a, b));
    return s > PBD__COT_SIN_MIN ? pbd__dot(a, b) / s : 0.0f;
}

/* Bergou et al. 2006: the discrete mean-curvature vector of the edge
   stencil is L = sum K_i p_i with cotangent weights K, and the bending energy
   is 3/(A0+A1) |L|^2 / 2 times the stiffness. rest = {K0..K3, s, |L0|}. */
static int pbd__isometric_rest(const pbd__v3 *x, float *rest) {
    pbd__v3 e0 = pbd__sub(x[1], x[0]), e1 = pbd__sub(x[3], x[0]), e2 = pbd__sub(x[2], x[0]);
    pbd__v3 e3 = pbd__sub(x[3], x[1]), e4 = pbd__sub(x[2], x[1]);
    float a0 = 0.5f * pbd__len(pbd__cross(e0, e1)), a1 = 0.5f * pbd__len(pbd__cross(e0, e2));
    if (!(a0 > PBD__REST_AREA_MIN) || !(a1 > PBD__REST_AREA_MIN)) return 0;
    float c01 = pbd__cot(e0, e1), c02 = pbd__cot(e0, e2);
    float c03 = pbd__cot(pbd__neg(e0), e3), c04 = pbd__cot(pbd__neg(e0), e4);
    rest[0] = c03 + c04;
    rest[1] = c01 + c02;
    rest[2] = -c02 - c04;
    rest[3] = -c01 - c03;
    rest[4] = sqrtf(3.0f / (a0 + a1));
    pbd__v3 L = pbd__v(0, 0, 0);
    for (int i = 0; i < 4; ++i) L = pbd__add(L, pbd__mul(x[i], rest[i]));
    rest[5] = pbd__len(L);
    return 1;
}

static inline PBD_HD float pbd__eval_isometric(const pbd__v3 *p, const float *rest, pbd__v3 *g) {
    pbd__v3 L = pbd__v(0, 0, 0);
    for (int i = 0; i < 4; ++i) L = pbd__add(L, pbd__mul(p[i], rest[i]));
    float l = pbd__len(L);
    if (l < PBD__LEN_MIN) {
        g[0] = g[1] = g[2] = g[3] = pbd__v(0, 0, 0);
        return -rest[4] * rest[5];
    }
    pbd__v3 n = pbd__mul(L, rest[4] / l);
    for (int i = 0; i < 4; ++i) g[i] = pbd__mul(n, rest[i]);
    return rest[4] * (l - rest[5]);
}

/* Survey 3.4.4: C = |(p1-p0) x (p2-p0)| / 2 - A0. */
static inline PBD_HD float pbd__eval_area(const pbd__v3 *p, float rest, pbd__v3 *g) {
    pbd__v3 a = pbd__sub(p[1], p[0]), b = pbd__sub(p[2], p[0]);
    pbd__v3 n = pbd__cross(a, b);
    float l = pbd__len(n);
    if (l < PBD__NORMAL_LEN_MIN) {
        g[0] = g[1] = g[2] = pbd__v(0, 0, 0);
        return -rest;
    }
    pbd__v3 nh = pbd__mul(n, 1.0f / l);
    g[1] = pbd__mul(pbd__cross(b, nh), 0.5f);
    g[2] = pbd__mul(pbd__cross(nh, a), 0.5f);
    g[0] = pbd__neg(pbd__add(g[1], g[2]));
    return 0.5f * l - rest;
}

/* Survey 3.4.4: C = (p1-p0) x (p2-p0) . (p3-p0) / 6 - V0. */
static inline PBD_HD float pbd__eval_tet(const pbd__v3 *p, float rest, pbd__v3 *g) {
    pbd__v3 a = pbd__sub(p[1], p[0]), b = pbd__sub(p[2], p[0]), c = pbd__sub(p[3], p[0]);
    const float s = 1.0f / 6.0f;
    g[1] = pbd__mul(pbd__cross(b, c), s);
    g[2] = pbd__mul(pbd__cross(c, a), s);
    g[3] = pbd__mul(pbd__cross(a, b), s);
    g[0] = pbd__neg(pbd__add(pbd__add(g[1], g[2]), g[3]));
    return pbd__dot(g[3], c) - rest;
}

/* The two halves of pbd__eval_point_triangle (below), so that a caller
   can test the height before it pays for the gradients (the
   self-collision projection): the height of p[0] above the triangle
   p[1..3], its unit normal nh and the length l of the unnormalised one
   (below 1e-18: degenerate, nh unset, height 0). */
static inline PBD_HD float pbd__pt_height(const pbd__v3 *p, pbd__v3 *nh, float *l) {
    pbd__v3 n = pbd__cross(pbd__sub(p[2], p[1]), pbd__sub(p[3], p[1]));
    *l = pbd__len(n);
    if (*l < PBD__NORMAL_LEN_MIN) return 0.0f;
    *nh = pbd__mul(n, 1.0f / *l);
    return pbd__dot(pbd__sub(p[0], p[1]), *nh);
}
static inline PBD_HD void pbd__pt_gradients(const pbd__v3 *p, pbd__v3 nh, float l, float rn, pbd__v3 *g) {
    pbd__v3 a = pbd__sub(p[2], p[1]), b = pbd__sub(p[3], p[1]), r = pbd__sub(p[0], p[1]);
    pbd__v3 t = pbd__mul(pbd__sub(r, pbd__mul(nh, rn)), 1.0f / l);
    g[0] = nh;
    g[2] = pbd__cross(b, t);
    g[3] = pbd__cross(t, a);
    g[1] = pbd__neg(pbd__add(pbd__add(nh, g[2]), g[3]));
}
/* Survey 3.4.3: C = (q - p1) . n - h with n the unit normal of p1 p2 p3.
   dn/dp follows from d(n/|n|) = (I - n n^T)/|n| d(a x b). */
static inline PBD_HD float pbd__eval_point_triangle(const pbd__v3 *p, float h, pbd__v3 *g) {
    pbd__v3 nh;
    float l, rn = pbd__pt_height(p, &nh, &l);
    if (l < PBD__NORMAL_LEN_MIN) {
        g[0] = g[1] = g[2] = g[3] = pbd__v(0, 0, 0);
        return 0.0f;
    }
    pbd__pt_gradients(p, nh, l, rn, g);
    return rn - h;
}

/* Attachment to a point: C = |p - t| (max_distance 0) or
   C = max_distance - |p - t| (unilateral). */
static inline PBD_HD float pbd__eval_attachment(pbd__v3 p, pbd__v3 t, float maxd, pbd__v3 *g) {
    pbd__v3 d = pbd__sub(p, t);
    float l = pbd__len(d);
    if (l < PBD__LEN_MIN) {
        g[0] = pbd__v(0, 0, 0);
        return maxd > 0 ? maxd : 0.0f;
    }
    g[0] = pbd__mul(d, 1.0f / l);
    if (maxd > 0) {
        g[0] = pbd__neg(g[0]);
        return maxd - l;
    }
    return l;
}

/* Survey 3.4.5: V = sum (a x b) . c / 6 over the triangles; the gradient of
   a vertex sums the cross products of the other two corners. p and g hold
   3 floats per vertex; triangles index them. */
static PBD_HD float pbd__eval_mesh_volume(const float *p, int nv, const int *tri, int nt, float target, float *g) {
    const float s = 1.0f / 6.0f;
    double vol = 0; /* double: thousands of terms of mixed sign */
    if (g) memset(g, 0, sizeof(float) * 3 * (size_t)nv);
    /* Relative to the first vertex: the sums are translation invariant for a
       closed mesh, and absolute coordinates far from the origin would make
       the cross products cancel catastrophically in float. */
    pbd__v3 o = pbd__ld(p + 3 * tri[0]);
    for (int t = 0; t < nt; ++t) {
        const int *tr = tri + 3 * t;
        pbd__v3 a = pbd__sub(pbd__ld(p + 3 * tr[0]), o), b = pbd__sub(pbd__ld(p + 3 * tr[1]), o),
                c = pbd__sub(pbd__ld(p + 3 * tr[2]), o);
        vol += (double)pbd__dot(pbd__cross(a, b), c);
        if (g) {
            pbd__st(g + 3 * tr[0], pbd__add(pbd__ld(g + 3 * tr[0]), pbd__mul(pbd__cross(b, c), s)));
            pbd__st(g + 3 * tr[1], pbd__add(pbd__ld(g + 3 * tr[1]), pbd__mul(pbd__cross(c, a), s)));
            pbd__st(g + 3 * tr[2], pbd__add(pbd__ld(g + 3 * tr[2]), pbd__mul(pbd__cross(a, b), s)));
        }
    }
    return (float)(vol / 6.0) - target;
}

/* alpha~ = compliance / h^2 (Macklin et al. 2016, eq. 18), at most 1e30.
   With a valid time step (h >= PBD_MIN_TIME_STEP / 1000) it overflows only
   for compliances above 1e20, springs so soft that they do nothing either
   way (dlambda ~ -C / alpha~); the cap keeps inf * lambda (= NaN at
   lambda = 0) out of the projection. */
static inline PBD_HD float pbd__alpha_tilde(float compliance, float h) {
    float at = compliance / (h * h);
    return at <= PBD__ALPHA_TILDE_MAX ? at : PBD__ALPHA_TILDE_MAX;
}

/* dlambda of one XPBD projection (Macklin et al. 2016, eq. 18). In PBD mode
   alpha_tilde is 0 and `scale` is the corrected stiffness k'. Returns 0
   (skip) when nothing can move. */
static inline PBD_HD float pbd__delta_lambda(float C, float wg2, float alpha_tilde, float lambda, float scale) {
    float denom = wg2 + alpha_tilde;
    if (!(wg2 > PBD__WG2_MIN)) return 0.0f;
    return scale * (-C - alpha_tilde * lambda) / denom;
}

/* --- public stateless functions ---------------------------------------- */

static void pbd__load_n(const float *p, int n, pbd__v3 *out) {
    for (int i = 0; i < n; ++i) out[i] = pbd__ld(p + 3 * i);
}
static void pbd__store_grad(float *grad, const pbd__v3 *g, int n) {
    if (!grad) return;
    for (int i = 0; i < n; ++i) pbd__st(grad + 3 * i, g[i]);
}

/* A public constraint function: n packed points in, C out, gradients into
   grad when it is not NULL. */
typedef float (*pbd__eval_fn)(const pbd__v3 *p, float rest, pbd__v3 *g);
static float pbd__eval_public(pbd__eval_fn eval, int n, const float *p, float rest, float *grad) {
    pbd__v3 x[4], g[4];
    pbd__load_n(p, n, x);
    float C = eval(x, rest, g);
    pbd__store_grad(grad, g, n);
    return C;
}

PBDDEF float pbd_constraint_distance(const float *p, float rest, float *grad) {
    return pbd__eval_public(pbd__eval_distance, 2, p, rest, grad);
}

PBDDEF float pbd_dihedral_angle(const float *p) {
    pbd__v3 x[4];
    pbd__load_n(p, 4, x);
    return pbd__dihedral(x, NULL);
}

PBDDEF float pbd_constraint_dihedral(const float *p, float rest_angle, float *grad) {
    return pbd__eval_public(pbd__eval_dihedral, 4, p, rest_angle, grad);
}

PBDDEF pbd_result pbd_isometric_bending_rest(const float *rest_positions, float *rest_out6) {
    if (!rest_positions || !rest_out6)
        return pbd__fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_isometric_bending_rest: a pointer is NULL");
    if (!pbd__finite_n(rest_positions, 12))
        return pbd__fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_isometric_bending_rest: a rest position is not finite");
    pbd__v3 x[4];
    pbd__load_n(rest_positions, 4, x);
    if (pbd__isometric_rest(x, rest_out6)) return PBD_OK;
    return pbd__fail(NULL, PBD_ERROR_DEGENERATE, "pbd_isometric_bending_rest: a triangle of the pair has no area");
}

PBDDEF float pbd_constraint_isometric_bending(const float *p, const float *rest, float *grad) {
    pbd__v3 x[4], g[4];
    pbd__load_n(p, 4, x);
    float C = pbd__eval_isometric(x, rest, g);
    pbd__store_grad(grad, g, 4);
    return C;
}

PBDDEF float pbd_constraint_area(const float *p, float rest_area, float *grad) {
    return pbd__eval_public(pbd__eval_area, 3, p, rest_area, grad);
}

PBDDEF float pbd_constraint_tet_volume(const float *p, float rest_volume, float *grad) {
    return pbd__eval_public(pbd__eval_tet, 4, p, rest_volume, grad);
}

PBDDEF float pbd_constraint_point_triangle(const float *p, float thickness, float *grad) {
    return pbd__eval_public(pbd__eval_point_triangle, 4, p, thickness, grad);
}

PBDDEF float pbd_constraint_mesh_volume(const float *p, int vertex_count, const int *triangles, int triangle_count,
                                        float pressure, float rest_volume, float *grad) {
    if (!p || !triangles || vertex_count <= 0 || triangle_count <= 0) return 0.0f;
    for (int i = 0; i < 3 * triangle_count; ++i)
        if (triangles[i] < 0 || triangles[i] >= vertex_count) return 0.0f;
    return pbd__eval_mesh_volume(p, vertex_count, triangles, triangle_count, pressure * rest_volume, grad);
}

PBDDEF float pbd_constraint_attachment(const float *p, const float *target, float max_distance, float *grad) {
    pbd__v3 g[1];
    float C = pbd__eval_attachment(pbd__ld(p), pbd__ld(target), max_distance, g);
    pbd__store_grad(grad, g, 1);
    return C;
}

PBDDEF float pbd_xpbd_project(int n, float C, const float *grad, const float *inv_mass, float compliance, float h,
                              float *lambda, float *dp) {
    if (n <= 0 || !grad || !inv_mass || !(h > 0)) return 0.0f;
    float wg2 = 0;
    for (int i = 0; i < n; ++i) {
        pbd__v3 g = pbd__ld(grad + 3 * i);
        wg2 += inv_mass[i] * pbd__dot(g, g);
    }
    float lam = lambda ? *lambda : 0.0f;
    float dl = pbd__delta_lambda(C, wg2, pbd__alpha_tilde(compliance, h), lam, 1.0f);
    if (lambda) *lambda = lam + dl;
    if (dp)
        for (int i = 0; i < n; ++i) pbd__st(dp + 3 * i, pbd__mul(pbd__ld(grad + 3 * i), inv_mass[i] * dl));
    return dl;
}

PBDDEF float pbd_pbd_stiffness(float k, int iterations) {
    if (iterations < 1) iterations = 1;
    k = pbd__clampf(k, 0.0f, 1.0f);
    return 1.0f - powf(1.0f - k, 1.0f / (float)iterations);
}

/* --- projection: each constraint's C(x) and gradients at the positions, the
   scalar and SIMD kernels that project a batch of a colour, a group's sweep
   (survey 3.1 and 3.3; XPBD: Macklin et al. 2016, eq. 18) ------------------ */

/* One constraint of a group at positions P: its particles, gradients and
   C, oriented so that a unilateral constraint wants C >= 0. */
static inline PBD_HD float pbd__eval_one(const pbd__group *g, int c, const pbd__p4 *P, int *ids, pbd__v3 *gr, int *n) {
    const int *e = g->idx + (size_t)c * g->arity;
    const float *rest = g->rest + (size_t)c * g->rest_stride;
    pbd__v3 x[4];
    int k = g->arity;
    if (g->type == PBD_CONSTRAINT_ATTACHMENT) {
        ids[0] = e[0];
        pbd__v3 t = e[1] >= 0 ? pbd__p3(P[e[1]]) : pbd__ld(rest);
        float C = pbd__eval_attachment(pbd__p3(P[e[0]]), t, rest[3], gr);
        *n = 1;
        if (e[1] >= 0) {
            ids[1] = e[1];
            gr[1] = pbd__neg(gr[0]);
            *n = 2;
        }
        return C;
    }
    for (int i = 0; i < k; ++i) {
        ids[i] = e[i];
        x[i] = pbd__p3(P[e[i]]);
    }
    *n = k;
    switch (g->type) {
        case PBD_CONSTRAINT_DISTANCE: {
            float C = pbd__eval_distance(x, rest[0], gr);
            if (gr[0].x == 0 && gr[0].y == 0 && gr[0].z == 0) {
                /* coincident particles: push apart along a fixed per-edge direction */
                gr[0] = pbd__hash_dir((unsigned)e[0], (unsigned)e[1]);
                gr[1] = pbd__neg(gr[0]);
            }
            if (g->unilateral) {
                C = -C;
                gr[0] = pbd__neg(gr[0]);
                gr[1] = pbd__neg(gr[1]);
            }
            return C;
        }
        case PBD_CONSTRAINT_BENDING_DIHEDRAL: return pbd__eval_dihedral(x, rest[0], gr);
        case PBD_CONSTRAINT_BENDING_ISOMETRIC: return pbd__eval_isometric(x, rest, gr);
        case PBD_CONSTRAINT_AREA: return pbd__eval_area(x, rest[0], gr);
        case PBD_CONSTRAINT_TET_VOLUME: return pbd__eval_tet(x, rest[0], gr);
        case PBD_CONSTRAINT_POINT_TRIANGLE: return pbd__eval_point_triangle(x, rest[0], gr);
    }
    return 0.0f;
}

static inline PBD_HD int pbd__is_unilateral(const pbd__group *g) {
    return g->type == PBD_CONSTRAINT_POINT_TRIANGLE || g->unilateral;
}

/* PBD mode: k' of survey 3.3 (or k itself without the correction). */
static float pbd__group_scale(const pbd_world *w, const pbd__group *g) {
    if (w->mode != PBD_SOLVER_PBD) return 1.0f;
    return w->correction ? pbd_pbd_stiffness(g->stiffness, w->iterations) : g->stiffness;
}

/* Mesh volume of the group at positions P into the scratch (and gradients). */
static PBD_HD float pbd__mesh_volume_at(const pbd__group *g, const pbd__p4 *P, float target, int with_grad) {
    for (int i = 0; i < g->nverts; ++i) pbd__st(g->scratch + 3 * i, pbd__p3(P[g->verts[i]]));
    return pbd__eval_mesh_volume(g->scratch, g->nverts, g->idx, g->ntris, target,
                                 with_grad ? g->scratch + 3 * g->nverts : NULL);
}

/* Jacobi mode writes corrections into D (w counts them) instead of P. */
static inline PBD_HD void pbd__apply(pbd__p4 *P, pbd__p4 *D, int id, pbd__v3 g, float dl) {
    pbd__p4 *q = D ? &D[id] : &P[id];
    float s = P[id].w * dl;
    q->x += g.x * s;
    q->y += g.y * s;
    q->z += g.z * s;
    if (D) q->w += 1.0f;
}

static PBD_HD void pbd__project_mesh_volume(pbd__p4 *P, pbd__p4 *D, pbd__group *g, float alpha_tilde, float scale) {
    float C = pbd__mesh_volume_at(g, P, g->pressure * g->rest[0], 1);
    const float *gr = g->scratch + 3 * g->nverts;
    float wg2 = 0;
    for (int i = 0; i < g->nverts; ++i) {
        pbd__v3 gi = pbd__ld(gr + 3 * i);
        wg2 += P[g->verts[i]].w * pbd__dot(gi, gi);
    }
    float dl = pbd__delta_lambda(C, wg2, alpha_tilde, g->lambda[0], scale);
    g->lambda[0] += dl;
    for (int i = 0; i < g->nverts; ++i) pbd__apply(P, D, g->verts[i], pbd__ld(gr + 3 * i), dl);
}

/* Distance constraints, the hottest kernel, with one division instead of
   three: the gradient is n = d / l with |n| = 1, so sum w |grad|^2 is
   w0 + w1, and with q = dlambda / l the corrections are +-w_i q d
   (survey 3.4.1 with XPBD eq. 18). Returns 0 for coincident particles,
   which take the generic path (a fixed per-edge direction). */
static inline PBD_HD int pbd__project_distance_one(pbd__p4 *P, pbd__p4 *D, pbd__group *g, int c, float alpha_tilde,
                                                   float scale) {
    const int *e = g->idx + 2 * (size_t)c;
    pbd__p4 *a = &P[e[0]], *b = &P[e[1]];
    pbd__v3 d = pbd__sub(pbd__p3(*a), pbd__p3(*b));
    float l = sqrtf(pbd__dot(d, d));
    if (l < PBD__LEN_MIN) return 0;
    float s = g->unilateral ? -1.0f : 1.0f;
    float C = (l - g->rest[c]) * s;
    float wsum = a->w + b->w;
    if ((g->unilateral && C >= 0) || !(wsum > PBD__WG2_MIN)) return 1;
    float q = scale * (-C - alpha_tilde * g->lambda[c]) / ((wsum + alpha_tilde) * l);
    if (q == 0) return 1;
    g->lambda[c] += q * l;
    float qa = a->w * s * q, qb = -(b->w * s * q);
    pbd__p4 *oa = D ? &D[e[0]] : a, *ob = D ? &D[e[1]] : b;
    oa->x += d.x * qa;
    oa->y += d.y * qa;
    oa->z += d.z * qa;
    ob->x += d.x * qb;
    ob->y += d.y * qb;
    ob->z += d.z * qb;
    if (D) {
        oa->w += 1.0f;
        ob->w += 1.0f;
    }
    return 1;
}

/* The scalar reference kernel: constraints [b, e) of a group, one at a time
   (survey 3.3 with XPBD eq. 18). D: NULL for Gauss-Seidel, else the Jacobi
   sums. */
static inline PBD_HD void pbd__project_one(pbd__p4 *P, pbd__p4 *D, pbd__group *g, int c, float alpha_tilde,
                                           float scale) {
    if (g->type == PBD_CONSTRAINT_DISTANCE && pbd__project_distance_one(P, D, g, c, alpha_tilde, scale)) return;
    int ids[4], n;
    pbd__v3 gr[4];
    float C = pbd__eval_one(g, c, P, ids, gr, &n);
    if (pbd__is_unilateral(g) && C >= 0) return;
    float wg2 = 0;
    for (int i = 0; i < n; ++i) wg2 += P[ids[i]].w * pbd__dot(gr[i], gr[i]);
    float dl = pbd__delta_lambda(C, wg2, alpha_tilde, g->lambda[c], scale);
    if (dl == 0) return;
    g->lambda[c] += dl;
    for (int i = 0; i < n; ++i) pbd__apply(P, D, ids[i], gr[i], dl);
}
static void pbd__project_range(pbd__p4 *P, pbd__p4 *D, pbd__group *g, int b, int e, float alpha_tilde, float scale) {
    for (int c = b; c < e; ++c) pbd__project_one(P, D, g, c, alpha_tilde, scale);
}

#if PBD__W > 1
/* --- SIMD kernels -----------------------------------------------------------
   Each projects the W constraints [b, b + W) of one colour with the exact
   lane-wise operations of pbd__eval_* and pbd__project_range, so that the
   results equal the scalar path bit for bit. A lane that the scalar code
   skips keeps its old values (selected, not added as zero, so even the sign
   of a zero is kept). Returns 0, having written nothing, when a lane needs
   a special case that only the scalar code has. */

typedef struct pbd__vbatch {
    int ids[4][PBD__W]; /* particle of role r in lane k */
    pbd__vp p[4];
    int n;
} pbd__vbatch;

static inline void pbd__vbatch_load(pbd__vbatch *B, const pbd__p4 *P, const pbd__group *g, int b, int n) {
    B->n = n;
    for (int k = 0; k < PBD__W; ++k)
        for (int r = 0; r < n; ++r) B->ids[r][k] = g->idx[(size_t)(b + k) * g->arity + r];
    for (int r = 0; r < n; ++r) B->p[r] = pbd__vgather(P, B->ids[r]);
}

/* Rest value j of each lane (stride rest_stride). */
static inline pbd__vf pbd__vrest(const pbd__group *g, int b, int j) {
    if (g->rest_stride == 1) return pbd__vload(g->rest + b);
    float t[PBD__W];
    for (int k = 0; k < PBD__W; ++k) t[k] = g->rest[(size_t)(b + k) * g->rest_stride + j];
    return pbd__vload(t);
}

/* The common tail: dlambda, multipliers and positions of active lanes. */
static inline void pbd__vfinish(pbd__p4 *P, pbd__group *g, int b, pbd__vbatch *B, pbd__vf C, const pbd__vv *gr,
                                pbd__vm active, float alpha_tilde, float scale) {
    pbd__vf zero = pbd__vset1(0.0f), at = pbd__vset1(alpha_tilde);
    pbd__vf wg2 = zero;
    for (int r = 0; r < B->n; ++r) wg2 = pbd__vadd(wg2, pbd__vmul(B->p[r].w, pbd__vvdot(gr[r], gr[r])));
    active = pbd__vand_m(active, pbd__vlt(pbd__vset1(PBD__WG2_MIN), wg2));
    pbd__vf lam = pbd__vload(g->lambda + b);
    pbd__vf dl =
        pbd__vdiv(pbd__vmul(pbd__vset1(scale), pbd__vsub(pbd__vneg(C), pbd__vmul(at, lam))), pbd__vadd(wg2, at));
    active = pbd__vandnot_m(active, pbd__veq(dl, zero));
    if (!pbd__vany(active)) return;
    pbd__vstore(g->lambda + b, pbd__vsel(active, lam, pbd__vadd(lam, dl)));
    for (int r = 0; r < B->n; ++r) {
        pbd__vp q = B->p[r];
        pbd__vapply(&q, gr[r], dl);
        q.x = pbd__vsel(active, B->p[r].x, q.x);
        q.y = pbd__vsel(active, B->p[r].y, q.y);
        q.z = pbd__vsel(active, B->p[r].z, q.z);
        pbd__vscatter(P, B->ids[r], q);
    }
}

static inline pbd__vm pbd__vall(void) { return pbd__vle(pbd__vset1(0.0f), pbd__vset1(1.0f)); }

/* Lanes where `active` is off get zero gradients, as the scalar code's
   degenerate cases do (and no NaN from a division by zero). */
static inline void pbd__vzero_inactive(pbd__vv *gr, int n, pbd__vm active) {
    pbd__vf zero = pbd__vset1(0.0f);
    for (int r = 0; r < n; ++r) {
        gr[r].x = pbd__vsel(active, zero, gr[r].x);
        gr[r].y = pbd__vsel(active, zero, gr[r].y);
        gr[r].z = pbd__vsel(active, zero, gr[r].z);
    }
}

/* The lane-wise twin of pbd__project_distance_one. */
static int pbd__vproject_distance(pbd__p4 *P, pbd__group *g, int b, float at, float scale) {
    pbd__vbatch B;
    pbd__vbatch_load(&B, P, g, b, 2);
    pbd__vv d = pbd__vvsub(pbd__vvpos(B.p[0]), pbd__vvpos(B.p[1]));
    pbd__vf l = pbd__vsqrt(pbd__vvdot(d, d)), zero = pbd__vset1(0.0f);
    if (pbd__vany(pbd__vlt(l, pbd__vset1(PBD__LEN_MIN)))) return 0; /* coincident: the hash direction */
    float sgn = g->unilateral ? -1.0f : 1.0f;
    pbd__vf s = pbd__vset1(sgn);
    pbd__vf C = pbd__vmul(pbd__vsub(l, pbd__vload(g->rest + b)), s);
    pbd__vf wsum = pbd__vadd(B.p[0].w, B.p[1].w);
    pbd__vm active = pbd__vlt(pbd__vset1(PBD__WG2_MIN), wsum);
    if (g->unilateral) active = pbd__vand_m(active, pbd__vlt(C, zero));
    pbd__vf lam = pbd__vload(g->lambda + b), vat = pbd__vset1(at);
    pbd__vf q = pbd__vdiv(pbd__vmul(pbd__vset1(scale), pbd__vsub(pbd__vneg(C), pbd__vmul(vat, lam))),
                          pbd__vmul(pbd__vadd(wsum, vat), l));
    active = pbd__vandnot_m(active, pbd__veq(q, zero));
    if (!pbd__vany(active)) return 1;
    pbd__vstore(g->lambda + b, pbd__vsel(active, lam, pbd__vadd(lam, pbd__vmul(q, l))));
    pbd__vf qa = pbd__vmul(pbd__vmul(B.p[0].w, s), q), qb = pbd__vneg(pbd__vmul(pbd__vmul(B.p[1].w, s), q));
    pbd__vp pa = B.p[0], pb = B.p[1];
    pa.x = pbd__vsel(active, pa.x, pbd__vadd(pa.x, pbd__vmul(d.x, qa)));
    pa.y = pbd__vsel(active, pa.y, pbd__vadd(pa.y, pbd__vmul(d.y, qa)));
    pa.z = pbd__vsel(active, pa.z, pbd__vadd(pa.z, pbd__vmul(d.z, qa)));
    pb.x = pbd__vsel(active, pb.x, pbd__vadd(pb.x, pbd__vmul(d.x, qb)));
    pb.y = pbd__vsel(active, pb.y, pbd__vadd(pb.y, pbd__vmul(d.y, qb)));
    pb.z = pbd__vsel(active, pb.z, pbd__vadd(pb.z, pbd__vmul(d.z, qb)));
    pbd__vscatter(P, B.ids[0], pa);
    pbd__vscatter(P, B.ids[1], pb);
    return 1;
}

static int pbd__vproject_area(pbd__p4 *P, pbd__group *g, int b, float at, float scale) {
    pbd__vbatch B;
    pbd__vbatch_load(&B, P, g, b, 3);
    pbd__vv a = pbd__vvsub(pbd__vvpos(B.p[1]), pbd__vvpos(B.p[0])),
            c = pbd__vvsub(pbd__vvpos(B.p[2]), pbd__vvpos(B.p[0]));
    pbd__vv n = pbd__vvcross(a, c);
    pbd__vf l = pbd__vsqrt(pbd__vvdot(n, n));
    pbd__vm active = pbd__vle(pbd__vset1(PBD__NORMAL_LEN_MIN), l); /* the scalar code skips l < PBD__NORMAL_LEN_MIN */
    pbd__vv nh = pbd__vvmul(n, pbd__vdiv(pbd__vset1(1.0f), l));
    pbd__vv gr[3];
    gr[1] = pbd__vvmul(pbd__vvcross(c, nh), pbd__vset1(0.5f));
    gr[2] = pbd__vvmul(pbd__vvcross(nh, a), pbd__vset1(0.5f));
    gr[0] = pbd__vvneg(pbd__vvadd(gr[1], gr[2]));
    pbd__vzero_inactive(gr, 3, active);
    pbd__vf C = pbd__vsub(pbd__vmul(pbd__vset1(0.5f), l), pbd__vload(g->rest + b));
    pbd__vfinish(P, g, b, &B, C, gr, active, at, scale);
    return 1;
}

static int pbd__vproject_tet(pbd__p4 *P, pbd__group *g, int b, float at, float scale) {
    pbd__vbatch B;
    pbd__vbatch_load(&B, P, g, b, 4);
    pbd__vv x0 = pbd__vvpos(B.p[0]);
    pbd__vv a = pbd__vvsub(pbd__vvpos(B.p[1]), x0), c = pbd__vvsub(pbd__vvpos(B.p[2]), x0),
            d = pbd__vvsub(pbd__vvpos(B.p[3]), x0);
    pbd__vf s = pbd__vset1(1.0f / 6.0f);
    pbd__vv gr[4];
    gr[1] = pbd__vvmul(pbd__vvcross(c, d), s);
    gr[2] = pbd__vvmul(pbd__vvcross(d, a), s);
    gr[3] = pbd__vvmul(pbd__vvcross(a, c), s);
    gr[0] = pbd__vvneg(pbd__vvadd(pbd__vvadd(gr[1], gr[2]), gr[3]));
    pbd__vf C = pbd__vsub(pbd__vvdot(gr[3], d), pbd__vload(g->rest + b));
    pbd__vfinish(P, g, b, &B, C, gr, pbd__vall(), at, scale);
    return 1;
}

static int pbd__vproject_isometric(pbd__p4 *P, pbd__group *g, int b, float at, float scale) {
    pbd__vbatch B;
    pbd__vbatch_load(&B, P, g, b, 4);
    pbd__vf K[4], zero = pbd__vset1(0.0f);
    for (int r = 0; r < 4; ++r) K[r] = pbd__vrest(g, b, r);
    pbd__vf s = pbd__vrest(g, b, 4), L0 = pbd__vrest(g, b, 5);
    pbd__vv L;
    L.x = L.y = L.z = zero;
    for (int r = 0; r < 4; ++r) L = pbd__vvadd(L, pbd__vvmul(pbd__vvpos(B.p[r]), K[r]));
    pbd__vf l = pbd__vsqrt(pbd__vvdot(L, L));
    pbd__vm active = pbd__vle(pbd__vset1(PBD__LEN_MIN), l);
    pbd__vv n = pbd__vvmul(L, pbd__vdiv(s, l));
    pbd__vv gr[4];
    for (int r = 0; r < 4; ++r) gr[r] = pbd__vvmul(n, K[r]);
    pbd__vzero_inactive(gr, 4, active);
    pbd__vf C = pbd__vmul(s, pbd__vsub(l, L0));
    pbd__vfinish(P, g, b, &B, C, gr, active, at, scale);
    return 1;
}

static int pbd__vproject_attachment(pbd__p4 *P, pbd__group *g, int b, float at, float scale) {
    pbd__vbatch B;
    int to_particle = g->idx[(size_t)b * 2 + 1] >= 0; /* a group has one kind of target */
    pbd__vbatch_load(&B, P, g, b, to_particle ? 2 : 1);
    pbd__vv t;
    if (to_particle) {
        t = pbd__vvpos(B.p[1]);
    } else {
        int lanes[PBD__W];
        for (int k = 0; k < PBD__W; ++k) lanes[k] = b + k;
        pbd__vp r = pbd__vgather((const pbd__p4 *)(const void *)g->rest, lanes);
        t.x = r.x;
        t.y = r.y;
        t.z = r.z;
    }
    float maxd = g->rest[(size_t)b * 4 + 3]; /* one max distance per group */
    pbd__vv d = pbd__vvsub(pbd__vvpos(B.p[0]), t);
    pbd__vf l = pbd__vsqrt(pbd__vvdot(d, d));
    pbd__vm active = pbd__vle(pbd__vset1(PBD__LEN_MIN), l);
    pbd__vv gr[2];
    gr[0] = pbd__vvmul(d, pbd__vdiv(pbd__vset1(1.0f), l));
    pbd__vf C = l;
    if (maxd > 0) {
        gr[0] = pbd__vvneg(gr[0]);
        C = pbd__vsub(pbd__vset1(maxd), l);
        active = pbd__vand_m(active, pbd__vlt(C, pbd__vset1(0.0f)));
    }
    gr[1] = pbd__vvneg(gr[0]);
    pbd__vzero_inactive(gr, 2, active);
    pbd__vfinish(P, g, b, &B, C, gr, active, at, scale);
    return 1;
}

/* The lane-wise twin of pbd__dihedral + pbd__eval_dihedral. */
static int pbd__vproject_dihedral(pbd__p4 *P, pbd__group *g, int b, float at, float scale) {
    pbd__vbatch B;
    pbd__vbatch_load(&B, P, g, b, 4);
    pbd__vv p0 = pbd__vvpos(B.p[0]), p1 = pbd__vvpos(B.p[1]), p2 = pbd__vvpos(B.p[2]), p3 = pbd__vvpos(B.p[3]);
    pbd__vv e = pbd__vvsub(p1, p0);
    pbd__vv n1 = pbd__vvcross(pbd__vvsub(p2, p0), pbd__vvsub(p2, p1));
    pbd__vv n2 = pbd__vvcross(pbd__vvsub(p3, p1), pbd__vvsub(p3, p0));
    pbd__vf el = pbd__vsqrt(pbd__vvdot(e, e)), n1l2 = pbd__vvdot(n1, n1), n2l2 = pbd__vvdot(n2, n2);
    pbd__vm active = pbd__vand_m(
        pbd__vand_m(pbd__vle(pbd__vset1(PBD__LEN_MIN), el), pbd__vle(pbd__vset1(PBD__NORMAL_LEN2_MIN), n1l2)),
        pbd__vle(pbd__vset1(PBD__NORMAL_LEN2_MIN), n2l2));
    pbd__vf one = pbd__vset1(1.0f);
    pbd__vv m1 = pbd__vvmul(n1, pbd__vdiv(one, n1l2)), m2 = pbd__vvmul(n2, pbd__vdiv(one, n2l2));
    pbd__vf s = pbd__vdiv(one, pbd__vsqrt(pbd__vmul(n1l2, n2l2)));
    pbd__vf cosv = pbd__vmul(pbd__vvdot(n1, n2), s);
    pbd__vf sinv = pbd__vdiv(pbd__vmul(pbd__vvdot(pbd__vvcross(n1, n2), e), s), el);
    pbd__vf angle = pbd__vatan2(sinv, cosv);
    pbd__vf inv_el = pbd__vdiv(one, el);
    pbd__vv gr[4];
    gr[2] = pbd__vvmul(m1, pbd__vneg(el));
    gr[3] = pbd__vvmul(m2, pbd__vneg(el));
    gr[0] = pbd__vvneg(pbd__vvadd(pbd__vvmul(m1, pbd__vmul(pbd__vvdot(pbd__vvsub(p2, p1), e), inv_el)),
                                  pbd__vvmul(m2, pbd__vmul(pbd__vvdot(pbd__vvsub(p3, p1), e), inv_el))));
    gr[1] = pbd__vvadd(pbd__vvmul(m1, pbd__vmul(pbd__vvdot(pbd__vvsub(p2, p0), e), inv_el)),
                       pbd__vvmul(m2, pbd__vmul(pbd__vvdot(pbd__vvsub(p3, p0), e), inv_el)));
    pbd__vzero_inactive(gr, 4, active);
    /* pbd__wrap_angle, once each way; a lane that needs more goes scalar */
    const float pi = 3.14159265358979f;
    pbd__vf C = pbd__vsub(angle, pbd__vrest(g, b, 0));
    pbd__vf vpi = pbd__vset1(pi), vmpi = pbd__vset1(-pi), twopi = pbd__vset1(2.0f * pi);
    C = pbd__vsel(pbd__vlt(vpi, C), C, pbd__vsub(C, twopi));
    C = pbd__vsel(pbd__vle(C, vmpi), C, pbd__vadd(C, twopi));
    if (pbd__vany(pbd__vand_m(active, pbd__vor_m(pbd__vlt(vpi, C), pbd__vle(C, vmpi))))) return 0;
    C = pbd__vsel(active, pbd__vset1(0.0f), C);
    pbd__vfinish(P, g, b, &B, C, gr, active, at, scale);
    return 1;
}

typedef int (*pbd__vkernel)(pbd__p4 *, pbd__group *, int, float, float);
static pbd__vkernel pbd__vkernel_of(int type) {
    switch (type) {
        case PBD_CONSTRAINT_DISTANCE: return pbd__vproject_distance;
        case PBD_CONSTRAINT_BENDING_DIHEDRAL: return pbd__vproject_dihedral;
        case PBD_CONSTRAINT_BENDING_ISOMETRIC: return pbd__vproject_isometric;
        case PBD_CONSTRAINT_AREA: return pbd__vproject_area;
        case PBD_CONSTRAINT_TET_VOLUME: return pbd__vproject_tet;
        case PBD_CONSTRAINT_ATTACHMENT: return pbd__vproject_attachment;
    }
    return NULL;
}
#endif /* PBD__W > 1 */

/* Constraints [b, e) of one colour: SIMD when a whole batch is there. */
static void pbd__project_batch(pbd_world *w, pbd__group *g, int b, int e, float at, float scale) {
    pbd__p4 *D = w->jacobi ? w->delta : NULL;
#if PBD__W > 1
    if (w->simd && !D && e - b == PBD__W) {
        pbd__vkernel k = pbd__vkernel_of(g->type);
        if (k && k(w->p, g, b, at, scale)) return;
    }
#endif
    pbd__project_range(w->p, D, g, b, e, at, scale);
}

/* One sweep over a group, run by every thread of the substep's team: the
   batches of a colour are shared out by `omp for`, whose barrier separates
   the colours (docs/DESIGN.md section 5.4). Odd iterations walk the colours
   backwards (symmetric Gauss-Seidel): a fixed order lets the corrections of
   constraints that fight each other (a balloon's pressure against its skin)
   add up to a spurious torque every substep, and alternating the order
   cancels most of it. */
static void pbd__sweep_group(pbd_world *w, pbd__group *g, float h, int backwards) {
    float at = w->mode == PBD_SOLVER_XPBD ? pbd__alpha_tilde(g->compliance, h) : 0.0f;
    float scale = pbd__group_scale(w, g);
    pbd__p4 *D = w->jacobi ? w->delta : NULL;
    if (g->ncolors == 0) {
        PBD__PRAGMA(omp single)
        pbd__project_mesh_volume(w->p, D, g, at, scale);
        return;
    }
    for (int k = 0; k < g->ncolors; ++k) {
        int col = backwards ? g->ncolors - 1 - k : k;
        int b0 = g->color_start[col], e0 = g->color_start[col + 1];
        if (g->overflow && col == g->ncolors - 1) {
            PBD__PRAGMA(omp single)
            pbd__project_range(w->p, D, g, b0, e0, at, scale);
            continue;
        }
        int nb = (e0 - b0 + PBD__W - 1) / PBD__W;
        PBD__PRAGMA(omp for schedule(static))
        for (int k = 0; k < nb; ++k) {
            int b = b0 + k * PBD__W, e = b + PBD__W < e0 ? b + PBD__W : e0;
            pbd__project_batch(w, g, b, e, at, scale);
        }
    }
}

// ==== groups ================================================================

static const int pbd__arity_table[PBD_CONSTRAINT_TYPE_COUNT] = {2, 4, 4, 3, 4, 4, 2, 0};
static const int pbd__rest_stride_table[PBD_CONSTRAINT_TYPE_COUNT] = {1, 1, 6, 1, 1, 1, 4, 1};
static const char *const pbd__type_name[PBD_CONSTRAINT_TYPE_COUNT] = {
    "distance",   "dihedral bending", "isometric bending", "area",
    "tet volume", "point-triangle",   "attachment",        "mesh volume"};

PBDDEF int pbd_constraint_arity(pbd_constraint_type type) {
    if ((int)type < 0 || (int)type >= PBD_CONSTRAINT_TYPE_SIMPLE_COUNT) return 0;
    return pbd__arity_table[type];
}

PBDDEF pbd_constraints_desc pbd_constraints_desc_default(void) {
    pbd_constraints_desc d;
    memset(&d, 0, sizeof d);
    d.stiffness = 1.0f;
    return d;
}
PBDDEF pbd_attachments_desc pbd_attachments_desc_default(void) {
    pbd_attachments_desc d;
    memset(&d, 0, sizeof d);
    d.stiffness = 1.0f;
    return d;
}
PBDDEF pbd_mesh_volume_desc pbd_mesh_volume_desc_default(void) {
    pbd_mesh_volume_desc d;
    memset(&d, 0, sizeof d);
    d.pressure = 1.0f;
    d.stiffness = 1.0f;
    return d;
}

/* A mark of what exists, so that a builder that fails half-way can drop
   exactly what it added (capacity may stay larger; no state changes). */
typedef struct pbd__mark {
    int n, seq;
} pbd__mark;
static pbd__mark pbd__mark_now(const pbd_world *w) {
    pbd__mark m;
    m.n = w->n;
    m.seq = w->seq;
    return m;
}
/* The object whose range holds particle i, or -1 (a torn cloth's copies
   lie outside its range: pbd_world.owner still names it, for its removal,
   but they are not in its range for anything else). */
static int pbd__object_of(const pbd_world *w, int i) {
    int o = w->owner[i];
    return o >= 0 && i >= w->objects[o].first && i < w->objects[o].first + w->objects[o].count ? o : -1;
}

/* Puts particles back as free ones (PBD__FREE | PBD__PINNED, every state
   zero, no owner: exactly what they were before an add that took them);
   free particles at the end leave the world. */
/* Trailing free particles leave the world, but not below a plugin's
   particle_end: a plugin whose uses_particles let its particles go would
   otherwise index past the world, whose snapshot then loaded no more (an
   audit); they leave with the plugin (pbd_remove_plugin). */
static void pbd__trim_free_tail(pbd_world *w) {
    int keep = pbd__plugins_particle_end(w);
    while (w->n > keep && (w->flags[w->n - 1] & PBD__FREE)) w->n--;
}
static void pbd__free_particles(pbd_world *w, int first, int count) {
    for (int i = first; i < first + count; ++i) {
        pbd__p4 *p4[] = {&w->x[i], &w->p[i], &w->v[i], &w->x_step[i], &w->v_step[i], &w->delta[i]};
        for (size_t k = 0; k < sizeof p4 / sizeof p4[0]; ++k) memset(p4[k], 0, sizeof *p4[k]);
        memset(&w->kin_target[i], 0, sizeof w->kin_target[i]);
        memset(&w->kin_from[i], 0, sizeof w->kin_from[i]);
        w->mass[i] = w->radius[i] = w->pressure[i] = w->pressure_step[i] = 0;
        w->flags[i] = PBD__FREE | PBD__PINNED;
        w->ncontact[i] = 0;
        w->owner[i] = -1;
    }
    pbd__trim_free_tail(w);
}

static void pbd__rollback(pbd_world *w, pbd__mark m) {
    int i;
    while ((i = pbd__newer_slot(w->groups, sizeof *w->groups, w->ngroups, m.seq)) >= 0) {
        pbd__group_free(w, &w->groups[i]);
        PBD__UNDO(w->groups, w->ngroups, i);
    }
    while ((i = pbd__newer_slot(w->objects, sizeof *w->objects, w->nobjects, m.seq)) >= 0) {
        pbd__pieces_drop(w, i);
        PBD__UNDO(w->objects, w->nobjects, i);
    }
    if (w->last_alloc_seq > m.seq && w->last_alloc_reused)
        pbd__free_particles(w, w->last_alloc.first, w->last_alloc.count);
    w->n = m.n;
    w->seq = m.seq;
}

/* Gathers the constraint's positions. */
static inline void pbd__gather(const pbd_world *w, const int *idx, int n, pbd__v3 *out) {
    for (int i = 0; i < n; ++i) out[i] = pbd__p3(w->x[idx[i]]);
}

/* Measures the rest value of one constraint at the current positions;
   0 when the rest geometry is degenerate. */
static int pbd__measure_rest(const pbd_world *w, int type, const int *idx, float thickness, float *rest) {
    pbd__v3 x[4], g[4];
    pbd__gather(w, idx, pbd__arity_table[type], x);
    switch (type) {
        case PBD_CONSTRAINT_DISTANCE: rest[0] = pbd__eval_distance(x, 0, g); return rest[0] > PBD__REST_LEN_MIN;
        case PBD_CONSTRAINT_BENDING_DIHEDRAL:
            rest[0] = pbd__dihedral(x, g);
            return pbd__dot(g[2], g[2]) > 0 && pbd__dot(g[3], g[3]) > 0;
        case PBD_CONSTRAINT_BENDING_ISOMETRIC: return pbd__isometric_rest(x, rest);
        case PBD_CONSTRAINT_AREA: rest[0] = pbd__eval_area(x, 0, g); return rest[0] > PBD__REST_AREA_MIN;
        case PBD_CONSTRAINT_TET_VOLUME: rest[0] = pbd__eval_tet(x, 0, g); return fabsf(rest[0]) > PBD__TET_VOLUME_MIN;
        case PBD_CONSTRAINT_POINT_TRIANGLE:
            rest[0] = thickness;
            return pbd__eval_area(x + 1, 0, g) > PBD__REST_AREA_MIN;
    }
    return 0;
}

static pbd_result pbd__check_indices(const pbd_world *w, const int *idx, long count, int arity) {
    for (long c = 0; c < count; ++c) {
        const int *e = idx + c * arity;
        for (int i = 0; i < arity; ++i) {
            if (e[i] < 0 || e[i] >= w->n)
                return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "constraint %ld: particle %d does not exist (0..%d)",
                                 c, e[i], w->n - 1);
            if (w->flags[e[i]] & PBD__FREE)
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "constraint %ld: particle %d was removed", c, e[i]);
            for (int j = 0; j < i; ++j)
                if (e[j] == e[i])
                    return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "constraint %ld uses particle %d twice", c, e[i]);
        }
    }
    return PBD_OK;
}

static pbd_result pbd__validate_constraints(const pbd_world *w, const pbd_constraints_desc *d) {
    PBD__CHECK_PTR(w, d, "desc");
    if ((int)d->type < 0 || (int)d->type >= PBD_CONSTRAINT_TYPE_SIMPLE_COUNT)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "type %d: use pbd_add_attachments / pbd_add_mesh_volume for those", (int)d->type);
    PBD__CHECK_PTR(w, d->indices, "desc.indices");
    int arity = pbd__arity_table[d->type];
    if (d->count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "constraint count %d <= 0", d->count);
    if (d->count > INT_MAX / 8)
        return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d constraints overflow the index arrays", d->count);
    PBD__TRY(pbd__check_compliance(w, d->compliance, d->stiffness, ""));
    if (!pbd__finite(d->thickness)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "thickness is not finite");
    if (d->thickness < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "thickness %g < 0", (double)d->thickness);
    PBD__TRY(pbd__check_switch(w, d->unilateral, "unilateral"));
    if (d->unilateral && d->type != PBD_CONSTRAINT_DISTANCE)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "only distance constraints take the unilateral flag");
    PBD__TRY(pbd__check_indices(w, d->indices, d->count, arity));
    if (d->rest) {
        if (d->type == PBD_CONSTRAINT_BENDING_ISOMETRIC)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                             "isometric bending measures its rest state from the positions; rest must be NULL");
        PBD__TRY(pbd__check_finite(w, d->rest, (size_t)d->count, "rest"));
        for (int c = 0; c < d->count; ++c) {
            int neg_ok = d->type == PBD_CONSTRAINT_BENDING_DIHEDRAL || d->type == PBD_CONSTRAINT_TET_VOLUME;
            if (!neg_ok && d->rest[c] < 0)
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "rest[%d] = %g < 0", c, (double)d->rest[c]);
            if (d->type == PBD_CONSTRAINT_TET_VOLUME && d->rest[c] == 0)
                return pbd__fail(w, PBD_ERROR_DEGENERATE, "rest volume %d is 0", c);
            if (d->type == PBD_CONSTRAINT_BENDING_DIHEDRAL && !(fabsf(d->rest[c]) <= 3.14159265358979f))
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "rest angle %d = %g outside [-pi, pi]", c,
                                 (double)d->rest[c]);
        }
    } else {
        float tmp[6];
        for (int c = 0; c < d->count; ++c)
            if (!pbd__measure_rest(w, d->type, d->indices + (size_t)c * arity, d->thickness, tmp))
                return pbd__fail(w, PBD_ERROR_DEGENERATE, "%s constraint %d is degenerate at the current positions",
                                 pbd__type_name[d->type], c);
    }
    return PBD_OK;
}

/* A new zeroed group in a free slot, with its arrays allocated. */
static pbd_result pbd__new_group(pbd_world *w, int type, int count, long nidx, pbd__group **out) {
    int gi;
    PBD__TRY(PBD__ACQUIRE(w, w->groups, w->ngroups, w->group_cap, "group", &gi));
    pbd__group *g = &w->groups[gi];
    g->type = type;
    g->count = count;
    g->arity = pbd__arity_table[type];
    g->rest_stride = pbd__rest_stride_table[type];
    g->enabled = 1;
    g->stiffness = 1.0f;
    g->pressure = 1.0f;
    g->idx = (int *)pbd__alloc_n(w, (size_t)nidx, sizeof(int));
    g->rest = (float *)pbd__alloc_n(w, (size_t)count * (size_t)g->rest_stride, sizeof(float));
    g->lambda = (float *)pbd__alloc_n(w, (size_t)count, sizeof(float));
    if (!g->idx || !g->rest || !g->lambda) {
        pbd__group_free(w, g);
        PBD__UNDO(w->groups, w->ngroups, gi);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for %d constraints", count);
    }
    memset(g->lambda, 0, sizeof(float) * (size_t)count);
    *out = g;
    return PBD_OK;
}

#define PBD__MAX_COLORS PBD_MAX_COLORS

static inline PBD_HD int pbd__lowest_bit(uint64_t m);

/* The greedy colouring's choice for one element (survey 3.8), shared by
   the groups, pbd_color_elements and the self-collision candidates. used:
   the colours its vertices already have; counts: the elements per colour
   so far; *opened: colours 0..*opened-1 are in use. First fit takes the
   smallest free colour (a bit scan); balanced takes the free one with the
   fewest elements (as Box2D v3 does) and opens a new colour only when every
   open one is blocked, as first fit would. Past PBD__MAX_COLORS - 1 colours
   the element gets the overflow colour PBD__MAX_COLORS - 1, which marks no
   vertex and is solved serially. */
static inline PBD_HD int pbd__color_pick(uint64_t used, const int *counts, int *opened, int balanced) {
    const int last = PBD__MAX_COLORS - 1;
    int col = -1;
    if (balanced) {
        for (int k = 0; k < *opened; ++k)
            if (!((used >> k) & 1u) && (col < 0 || counts[k] < counts[col])) col = k;
        if (col < 0) col = *opened < last ? (*opened)++ : last;
    } else {
        uint64_t open = ~used & (((uint64_t)1 << last) - 1);
        col = open ? pbd__lowest_bit(open) : last;
        if (col < last && col >= *opened) *opened = col + 1;
    }
    return col;
}

/* The starts of the colours in the order sorted by colour, from their
   sizes: colours 0..opened-1 are used without gaps and the overflow (if
   any constraint got it) comes last, at index opened. Returns the number
   of colours; *overflow: whether the last one is the overflow. */
static PBD_HD int pbd__color_starts(int *counts, int opened, int *start, int *overflow) {
    const int last = PBD__MAX_COLORS - 1;
    *overflow = counts[last] > 0;
    if (*overflow) counts[opened] = counts[last];
    int ncolors = opened + *overflow;
    start[0] = 0;
    for (int c = 0; c < ncolors; ++c) start[c + 1] = start[c] + counts[c];
    return ncolors;
}

/* Greedy colouring of n elements of k vertex indices (< 0: none), in
   their order (pbd__color_pick): color[e] receives each one's colour, the
   overflow colour renumbered to the last, start[0..ncolors] the starts of
   the colours in the order sorted by colour, *overflow whether the last
   colour is the overflow. mask: one zeroed word per vertex (scratch).
   Returns the number of colours. The core of the groups' colouring and of
   pbd_color_elements. */
static int pbd__color_greedy(const int *el, int n, int k, int balanced, uint64_t *mask, int *color, int *start,
                             int *overflow) {
    const int last = PBD__MAX_COLORS - 1;
    int counts[PBD__MAX_COLORS];
    memset(counts, 0, sizeof counts);
    int opened = 0;
    for (int c = 0; c < n; ++c) {
        const int *e = el + (size_t)c * k;
        uint64_t used = 0;
        for (int i = 0; i < k; ++i)
            if (e[i] >= 0) used |= mask[e[i]];
        int col = pbd__color_pick(used, counts, &opened, balanced);
        if (col < last)
            for (int i = 0; i < k; ++i)
                if (e[i] >= 0) mask[e[i]] |= (uint64_t)1 << col;
        color[c] = col;
        counts[col]++;
    }
    int ncolors = pbd__color_starts(counts, opened, start, overflow);
    if (*overflow)
        for (int c = 0; c < n; ++c)
            if (color[c] == last) color[c] = opened;
    return ncolors;
}

/* Colouring of a group by shared particles (pbd__color_greedy, balanced).
   The constraints are then stored sorted by colour (stably), so that the
   scalar reference path solves them in the same order as the parallel
   SIMD path and both give the same bits. */
static pbd_result pbd__color_group(pbd_world *w, pbd__group *g) {
    int n = g->count, k = g->arity, stride = g->rest_stride;
    uint64_t *mask = (uint64_t *)pbd__alloc_n(w, (size_t)(w->n > 0 ? w->n : 1), sizeof(uint64_t));
    int *color = (int *)pbd__alloc_n(w, (size_t)n, sizeof(int));
    int *idx = (int *)pbd__alloc_n(w, (size_t)n * (size_t)k, sizeof(int));
    float *rest = (float *)pbd__alloc_n(w, (size_t)n * (size_t)stride, sizeof(float));
    int *start = (int *)pbd__alloc_n(w, PBD__MAX_COLORS + 1, sizeof(int));
    int *slot = g->type == PBD_CONSTRAINT_ATTACHMENT ? (int *)pbd__alloc_n(w, (size_t)n, sizeof(int)) : NULL;
    if (!mask || !color || !idx || !rest || !start || (g->type == PBD_CONSTRAINT_ATTACHMENT && !slot)) {
        pbd__free(w, mask);
        pbd__free(w, color);
        pbd__free(w, idx);
        pbd__free(w, rest);
        pbd__free(w, start);
        pbd__free(w, slot);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to colour %d constraints", n);
    }
    memset(mask, 0, sizeof(uint64_t) * (size_t)(w->n > 0 ? w->n : 1));
    g->ncolors = pbd__color_greedy(g->idx, n, k, 1, mask, color, start, &g->overflow);
    int fill[PBD__MAX_COLORS + 1];
    memcpy(fill, start, sizeof(int) * (size_t)(g->ncolors + 1));
    for (int c = 0; c < n; ++c) {
        int to = fill[color[c]]++;
        memcpy(idx + (size_t)to * k, g->idx + (size_t)c * k, sizeof(int) * (size_t)k);
        memcpy(rest + (size_t)to * stride, g->rest + (size_t)c * stride, sizeof(float) * (size_t)stride);
        if (slot) slot[c] = to;
    }
    pbd__free(w, g->idx);
    pbd__free(w, g->rest);
    pbd__free(w, mask);
    pbd__free(w, color);
    g->idx = idx;
    g->rest = rest;
    g->color_start = start;
    g->slot = slot;
    memset(g->lambda, 0, sizeof(float) * (size_t)n);
    return PBD_OK;
}

/* Colours the group just added (g), or removes it. */
static pbd_result pbd__finish_group(pbd_world *w, pbd__group *g, pbd_group *out) {
    int gi = (int)(g - w->groups);
    pbd_result r = pbd__color_group(w, g);
    if (r != PBD_OK) {
        pbd__group_free(w, g);
        PBD__UNDO(w->groups, w->ngroups, gi);
        return r;
    }
    if (out) out->id = PBD__HANDLE(w->groups, gi);
    return PBD_OK;
}

/* Adds validated constraints. */
static pbd_result pbd__append_constraints(pbd_world *w, const pbd_constraints_desc *d, pbd_group *out) {
    pbd__group *g = NULL; /* set by pbd__new_group (g++ -O2 cannot see it in some units) */
    int arity = pbd__arity_table[d->type];
    PBD__TRY(pbd__new_group(w, (int)d->type, d->count, (long)d->count * arity, &g));
    memcpy(g->idx, d->indices, sizeof(int) * (size_t)d->count * (size_t)arity);
    for (int c = 0; c < d->count; ++c) {
        float *rest = g->rest + (size_t)c * g->rest_stride;
        if (d->rest) rest[0] = d->rest[c];
        else pbd__measure_rest(w, d->type, g->idx + (size_t)c * arity, d->thickness, rest);
    }
    if (d->type == PBD_CONSTRAINT_POINT_TRIANGLE) {
        /* survey 3.4.3: the side is the one the point is on now; a point
           below the triangle gets the triangle reversed */
        for (int c = 0; c < d->count; ++c) {
            int *e = g->idx + 4 * c;
            pbd__v3 x[4], gr[4];
            pbd__gather(w, e, 4, x);
            if (pbd__eval_point_triangle(x, 0, gr) < 0) {
                int t = e[2];
                e[2] = e[3];
                e[3] = t;
            }
        }
    }
    g->compliance = d->compliance;
    g->stiffness = d->stiffness;
    g->unilateral = d->unilateral;
    return pbd__finish_group(w, g, out);
}

/* A user's group (not a builder's) makes every object it touches
   "coupled": its angular momentum may change by these constraints, so
   pbd__momentum_restore leaves it alone. */
static void pbd__mark_coupled(pbd_world *w, const int *idx, long n) {
    for (long k = 0; k < n; ++k) {
        int o = idx[k] >= 0 ? pbd__object_of(w, idx[k]) : -1;
        if (o >= 0) w->objects[o].coupled = 1;
    }
}

PBDDEF pbd_result pbd_add_constraints(pbd_world *w, const pbd_constraints_desc *desc, pbd_group *out) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__validate_constraints(w, desc));
    PBD__TRY(pbd__append_constraints(w, desc, out));
    pbd__mark_coupled(w, desc->indices, (long)desc->count * pbd__arity_table[desc->type]);
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_attachments(pbd_world *w, const pbd_attachments_desc *d, pbd_group *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__CHECK_PTR(w, d->particles, "desc.particles");
    if ((d->target_particles == NULL) == (d->target_points == NULL))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "give exactly one of target_particles and target_points");
    if (d->count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "attachment count %d <= 0", d->count);
    if (d->count > INT_MAX / 8) return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d attachments overflow", d->count);
    PBD__TRY(pbd__check_compliance(w, d->compliance, d->stiffness, ""));
    if (!pbd__finite(d->max_distance)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "max_distance is not finite");
    if (d->max_distance < 0)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "max_distance %g < 0", (double)d->max_distance);
    for (int c = 0; c < d->count; ++c) {
        PBD__TRY(pbd__check_particle(w, d->particles[c], "attached particle"));
        if (d->target_particles) {
            PBD__TRY(pbd__check_particle(w, d->target_particles[c], "target particle"));
            if (d->target_particles[c] == d->particles[c])
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "attachment %d attaches particle %d to itself", c,
                                 d->particles[c]);
        }
    }
    if (d->target_points) PBD__TRY(pbd__check_positions(w, d->target_points, 3 * (size_t)d->count, "target_points"));
    pbd__group *g;
    PBD__TRY(pbd__new_group(w, PBD_CONSTRAINT_ATTACHMENT, d->count, 2L * d->count, &g));
    for (int c = 0; c < d->count; ++c) {
        g->idx[2 * c] = d->particles[c];
        g->idx[2 * c + 1] = d->target_particles ? d->target_particles[c] : -1;
        float *rest = g->rest + 4 * c;
        if (d->target_points) memcpy(rest, d->target_points + 3 * c, 3 * sizeof(float));
        else rest[0] = rest[1] = rest[2] = 0;
        rest[3] = d->max_distance;
    }
    g->compliance = d->compliance;
    g->stiffness = d->stiffness;
    g->unilateral = d->max_distance > 0;
    PBD__TRY(pbd__finish_group(w, g, out));
    pbd__mark_coupled(w, d->particles, d->count);
    if (d->target_particles) pbd__mark_coupled(w, d->target_particles, d->count);
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_set_attachment_target(pbd_world *w, pbd_group handle, int index, const float *point) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_TARGETS);
    pbd__gpu_pull(w, PBD__GPU_STALE_TARGETS); /* the upload sends them all: the device's first */
    int gi;
    PBD__TRY(pbd__group_index(w, handle, &gi));
    PBD__CHECK_PTR(w, point, "point");
    pbd__group *g = &w->groups[gi];
    if (g->type != PBD_CONSTRAINT_ATTACHMENT)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "group %d is not an attachment group", gi);
    if (index < 0 || index >= g->count)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "attachment %d of %d", index, g->count);
    if (g->idx[2 * g->slot[index] + 1] >= 0)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "attachment %d follows a particle, not a point", index);
    PBD__TRY(pbd__check_positions(w, point, 3, "point"));
    memcpy(g->rest + 4 * g->slot[index], point, 3 * sizeof(float));
    return PBD_OK;
}

static int pbd__cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

/* PBD_OK, PBD_ERROR_NOT_CLOSED (see pbd_find_open_edge) or
   PBD_ERROR_OUT_OF_MEMORY, without a message. */
static pbd_result pbd__closed_status(const pbd_world *w, const int *tri, int nt) {
    int a = 0, b = 0, open = pbd_find_open_edge((pbd_world *)w, tri, nt, &a, &b);
    return open < 0 ? PBD_ERROR_OUT_OF_MEMORY : open ? PBD_ERROR_NOT_CLOSED : PBD_OK;
}
static pbd_result pbd__check_closed(const pbd_world *w, const int *tri, int nt) {
    int a = 0, b = 0, open = pbd_find_open_edge((pbd_world *)w, tri, nt, &a, &b);
    if (open < 0) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to check the mesh");
    if (open == 1)
        return pbd__fail(w, PBD_ERROR_NOT_CLOSED,
                         "edge (%d, %d) is in two triangles in the same direction (the mesh is not consistently "
                         "oriented or not a manifold); every edge must be shared by exactly two triangles of opposite "
                         "orientation",
                         a, b);
    if (open == 2)
        return pbd__fail(w, PBD_ERROR_NOT_CLOSED,
                         "edge (%d, %d) has no opposite edge (the mesh is not closed or not consistently oriented); "
                         "every edge must be shared by exactly two triangles of opposite orientation",
                         a, b);
    return PBD_OK;
}

/* Triangles over world particles: validated, and none removed. */
static pbd_result pbd__validate_world_triangles(const pbd_world *w, const int *tri, int nt, const char *what);
/* n elements of k vertices (what: "triangle", "tet"), none listed
   twice: where its edges border nothing else a triangle listed twice
   passes as manifold, and its mass and constraints would count twice. */
static pbd_result pbd__check_no_repeated_element(const pbd_world *w, const int *el, int n, int k, const char *what) {
    int a = 0, b = 0, twice = pbd_find_repeated_element((pbd_world *)w, el, n, k, &a, &b);
    if (twice < 0) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to check the mesh");
    if (twice && k == 4)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%ss %d and %d are the same %s (vertices %d, %d, %d, %d)", what,
                         a, b, what, el[4 * a], el[4 * a + 1], el[4 * a + 2], el[4 * a + 3]);
    if (twice)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%ss %d and %d are the same %s (vertices %d, %d, %d)", what, a,
                         b, what, el[k * a], el[k * a + 1], el[k * a + 2]);
    return PBD_OK;
}

static pbd_result pbd__validate_triangles(const pbd_world *w, const int *tri, int nt, int nv, const char *what) {
    PBD__CHECK_PTR(w, tri, what);
    if (nt <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "triangle count %d <= 0", nt);
    if (nt > INT_MAX / 8) return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d triangles overflow", nt);
    for (long k = 0; k < 3L * nt; ++k)
        if (tri[k] < 0 || tri[k] >= nv)
            return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "triangle %ld uses vertex %d (0..%d)", k / 3, tri[k],
                             nv - 1);
    for (int t = 0; t < nt; ++t)
        if (tri[3 * t] == tri[3 * t + 1] || tri[3 * t] == tri[3 * t + 2] || tri[3 * t + 1] == tri[3 * t + 2])
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "triangle %d repeats a vertex", t);
    return pbd__check_no_repeated_element(w, tri, nt, 3, "triangle");
}
static pbd_result pbd__validate_world_triangles(const pbd_world *w, const int *tri, int nt, const char *what) {
    PBD__TRY(pbd__validate_triangles(w, tri, nt, w->n, what));
    for (long k = 0; k < 3L * nt; ++k)
        if (w->flags[tri[k]] & PBD__FREE)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "triangle %ld uses particle %d, which was removed", k / 3,
                             tri[k]);
    return PBD_OK;
}

/* Adds a mesh-volume group over world particles (validated here). */
PBDDEF pbd_result pbd_add_mesh_volume(pbd_world *w, const pbd_mesh_volume_desc *d, pbd_group *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(pbd__validate_world_triangles(w, d->triangles, d->triangle_count, "desc.triangles"));
    PBD__TRY(pbd__check_compliance(w, d->compliance, d->stiffness, ""));
    if (!pbd__finite(d->pressure)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "pressure is not finite");
    if (!(d->pressure > 0))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "pressure %g must be > 0", (double)d->pressure);
    PBD__TRY(pbd__check_closed(w, d->triangles, d->triangle_count));
    long nt3 = 3L * d->triangle_count;
    /* local vertex list: sorted unique particle indices */
    int *verts = (int *)pbd__alloc_n(w, (size_t)nt3, sizeof(int));
    if (!verts) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the mesh");
    memcpy(verts, d->triangles, sizeof(int) * (size_t)nt3);
    qsort(verts, (size_t)nt3, sizeof(int), pbd__cmp_int);
    int nv = 0;
    for (long k = 0; k < nt3; ++k)
        if (k == 0 || verts[k] != verts[k - 1]) verts[nv++] = verts[k];
    pbd__group *g;
    pbd_result r = pbd__new_group(w, PBD_CONSTRAINT_MESH_VOLUME, 1, nt3, &g);
    if (r == PBD_OK) {
        g->verts = (int *)pbd__alloc_n(w, (size_t)nv, sizeof(int));
        g->scratch = (float *)pbd__alloc_n(w, (size_t)nv * 6, sizeof(float));
        if (!g->verts || !g->scratch) {
            pbd__group_free(w, g);
            PBD__UNDO(w->groups, w->ngroups, (int)(g - w->groups));
            r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the mesh");
        }
    }
    if (r != PBD_OK) {
        pbd__free(w, verts);
        return r;
    }
    memcpy(g->verts, verts, sizeof(int) * (size_t)nv);
    pbd__free(w, verts);
    g->nverts = nv;
    g->ntris = d->triangle_count;
    for (long k = 0; k < nt3; ++k) {
        int *hit = (int *)bsearch(&d->triangles[k], g->verts, (size_t)nv, sizeof(int), pbd__cmp_int);
        g->idx[k] = (int)(hit - g->verts);
    }
    for (int i = 0; i < nv; ++i) pbd__st(g->scratch + 3 * i, pbd__p3(w->x[g->verts[i]]));
    float V0 = pbd__eval_mesh_volume(g->scratch, nv, g->idx, g->ntris, 0, NULL);
    if (!(fabsf(V0) > PBD__MESH_VOLUME_MIN)) {
        pbd__group_free(w, g);
        PBD__UNDO(w->groups, w->ngroups, (int)(g - w->groups));
        return pbd__fail(w, PBD_ERROR_DEGENERATE, "the mesh encloses no volume");
    }
    g->rest[0] = V0;
    g->pressure = d->pressure;
    g->compliance = d->compliance;
    g->stiffness = d->stiffness;
    if (out) out->id = PBD__HANDLE(w->groups, (int)(g - w->groups));
    pbd__mark_coupled(w, d->triangles, 3L * d->triangle_count);
    return PBD_OK;
}

PBDDEF int pbd_world_group_count(const pbd_world *w) { return w ? PBD__LIVE(w->groups, w->ngroups) : 0; }
PBDDEF pbd_group pbd_world_group(const pbd_world *w, int index) {
    pbd_group g;
    g.id = w ? pbd__nth_live(w->groups, sizeof *w->groups, w->ngroups, index) : 0u;
    return g;
}

PBDDEF pbd_result pbd_remove_group(pbd_world *w, pbd_group handle) {
    PBD__CHECK_WORLD(w);
    int g;
    PBD__TRY(pbd__group_index(w, handle, &g));
    for (int o = 0; o < w->nobjects; ++o)
        for (int k = 0; k < 4; ++k)
            if (w->objects[o].s.live && w->objects[o].groups[k] == g)
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                 "group %d is part of object %d: pbd_remove_object removes it with the object", g, o);
    pbd__group_free(w, &w->groups[g]);
    PBD__RELEASE(w->groups, g);
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_info(const pbd_world *w, pbd_group handle, pbd_constraint_type *type, int *count) {
    PBD__CHECK_WORLD_READ(w);
    int g;
    PBD__TRY(pbd__group_index(w, handle, &g));
    if (type) *type = (pbd_constraint_type)w->groups[g].type;
    if (count) *count = w->groups[g].count;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_colors(const pbd_world *w, pbd_group handle, int *sizes, int max, int *count,
                                   int *overflow) {
    PBD__CHECK_WORLD_READ(w);
    int gi;
    PBD__TRY(pbd__group_index(w, handle, &gi));
    PBD__TRY(pbd__check_list(w, sizes, max, count));
    const pbd__group *g = &w->groups[gi];
    *count = g->ncolors;
    if (overflow) *overflow = g->overflow;
    for (int c = 0; c < g->ncolors && c < max; ++c) sizes[c] = g->color_start[c + 1] - g->color_start[c];
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_color_particles(const pbd_world *w, pbd_group handle, int color, int *out, int max,
                                            int *count) {
    PBD__CHECK_WORLD_READ(w);
    int gi;
    PBD__TRY(pbd__group_index(w, handle, &gi));
    const pbd__group *g = &w->groups[gi];
    if (color < 0 || color >= g->ncolors)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "colour %d of %d", color, g->ncolors);
    PBD__TRY(pbd__check_list(w, out, max, count));
    int b = g->color_start[color], e = g->color_start[color + 1];
    for (long k = 0; k < (long)(e - b < max ? e - b : max) * g->arity; ++k) out[k] = g->idx[(size_t)b * g->arity + k];
    *count = e - b;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_set_compliance(pbd_world *w, pbd_group handle, float compliance) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int g;
    PBD__TRY(pbd__group_index(w, handle, &g));
    PBD__TRY(pbd__check_compliance(w, compliance, 1.0f, ""));
    w->groups[g].compliance = compliance;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_set_stiffness(pbd_world *w, pbd_group handle, float stiffness) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int g;
    PBD__TRY(pbd__group_index(w, handle, &g));
    PBD__TRY(pbd__check_compliance(w, 0.0f, stiffness, ""));
    w->groups[g].stiffness = stiffness;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_set_enabled(pbd_world *w, pbd_group handle, int enabled) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int g;
    PBD__TRY(pbd__group_index(w, handle, &g));
    PBD__TRY(pbd__check_switch(w, enabled, "enabled"));
    w->groups[g].enabled = enabled;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_set_pressure(pbd_world *w, pbd_group handle, float pressure) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int g;
    PBD__TRY(pbd__group_index(w, handle, &g));
    if (w->groups[g].type != PBD_CONSTRAINT_MESH_VOLUME)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "group %d is not a mesh volume", g);
    if (!pbd__finite(pressure)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "pressure is not finite");
    if (!(pressure > 0)) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "pressure %g must be > 0", (double)pressure);
    w->groups[g].pressure = pressure;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_error(const pbd_world *w, pbd_group handle, float *mean_abs, float *max_abs) {
    PBD__CHECK_WORLD_READ(w);
    int gi;
    PBD__TRY(pbd__group_index(w, handle, &gi));
    const pbd__group *g = &w->groups[gi];
    double sum = 0;
    float mx = 0;
    if (g->type == PBD_CONSTRAINT_MESH_VOLUME) {
        sum = mx = fabsf(pbd__mesh_volume_at(g, w->x, g->pressure * g->rest[0], 0));
    } else {
        int unilateral = pbd__is_unilateral(g);
        for (int c = 0; c < g->count; ++c) {
            int ids[4], n;
            pbd__v3 gr[4];
            float C = pbd__eval_one(g, c, w->x, ids, gr, &n);
            float a = unilateral ? (C < 0 ? -C : 0.0f) : fabsf(C);
            sum += a;
            if (a > mx) mx = a;
        }
    }
    if (mean_abs) *mean_abs = (float)(sum / (g->count > 0 ? g->count : 1));
    if (max_abs) *max_abs = mx;
    return PBD_OK;
}

PBDDEF pbd_result pbd_group_mesh_volume(const pbd_world *w, pbd_group handle, float *volume) {
    PBD__CHECK_WORLD_READ(w);
    int gi;
    PBD__TRY(pbd__group_index(w, handle, &gi));
    PBD__CHECK_PTR(w, volume, "volume");
    const pbd__group *g = &w->groups[gi];
    if (g->type != PBD_CONSTRAINT_MESH_VOLUME)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "group %d is not a mesh volume", gi);
    *volume = pbd__mesh_volume_at(g, w->x, 0, 0);
    return PBD_OK;
}

// ==== objects ===============================================================

PBDDEF pbd_cloth_desc pbd_cloth_desc_default(void) {
    pbd_cloth_desc d;
    memset(&d, 0, sizeof d);
    d.density = 0.2f;
    d.stretch_compliance = 0.0f;
    d.bending_compliance = 1e-3f;
    d.area_compliance = 0.0f;
    d.stretch_stiffness = 1.0f;
    d.bending_stiffness = 0.1f;
    d.area_stiffness = 1.0f;
    d.bending = PBD_BENDING_DIHEDRAL;
    d.thickness = 0.01f;
    d.damping = 2.0f;
    d.tethers = 1;
    d.gravity_cfl = 0.35f;
    return d;
}

PBDDEF pbd_softbody_desc pbd_softbody_desc_default(void) {
    pbd_softbody_desc d;
    memset(&d, 0, sizeof d);
    d.density = 1000.0f;
    d.edge_stiffness = 1.0f;
    d.volume_stiffness = 1.0f;
    d.volume_constraints = 1;
    d.radius = 0.01f;
    return d;
}

PBDDEF pbd_balloon_desc pbd_balloon_desc_default(void) {
    pbd_balloon_desc d;
    memset(&d, 0, sizeof d);
    d.cloth = pbd_cloth_desc_default();
    d.cloth.damping = 0.0f; /* a balloon is not held: the cloth's 2/s is for hanging cloth */
    d.pressure = 1.0f;
    d.volume_stiffness = 1.0f;
    d.drag = 1.0f; /* see the note under pbd_balloon_desc */
    return d;
}

PBDDEF int pbd_world_object_count(const pbd_world *w) { return w ? PBD__LIVE(w->objects, w->nobjects) : 0; }
PBDDEF pbd_object pbd_world_object(const pbd_world *w, int index) {
    pbd_object o;
    o.id = w ? pbd__nth_live(w->objects, sizeof *w->objects, w->nobjects, index) : 0u;
    return o;
}

/* An object's rate (1/s: damping, drag): finite and >= 0. */
static pbd_result pbd__check_rate(const pbd_world *w, float rate, const char *what) {
    if (!pbd__finite(rate)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%s is not finite", what);
    if (rate < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s %g < 0", what, (double)rate);
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_set_damping(pbd_world *w, pbd_object object, float damping) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    PBD__TRY(pbd__check_rate(w, damping, "damping"));
    w->objects[oi].damping = damping;
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_set_drag(pbd_world *w, pbd_object object, float drag) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    PBD__TRY(pbd__check_rate(w, drag, "drag"));
    w->object_drag[oi] = drag;
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_get_drag(const pbd_world *w, pbd_object object, float *drag) {
    PBD__CHECK_WORLD_READ(w);
    PBD__CHECK_PTR(w, drag, "drag");
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    *drag = w->object_drag[oi];
    return PBD_OK;
}

/* Sorted unique edges of a triangle or tet mesh, with for each edge of a
   triangle mesh the opposite vertices of its (at most two) triangles. */
typedef struct pbd__edge {
    int a, b, opp[2], nopp;
} pbd__edge;

typedef struct pbd__edge_sort {
    uint64_t key;
    int opp;
} pbd__edge_sort;
static int pbd__cmp_edge_key(const void *x, const void *y) {
    const pbd__edge_sort *a = (const pbd__edge_sort *)x, *b = (const pbd__edge_sort *)y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->opp < b->opp ? -1 : (a->opp > b->opp ? 1 : 0);
}

/* elems: n elements of `k` vertices (3: triangles, 4: tets). For triangles,
   each edge (a, b) keeps its direction of the first triangle seen in sorted
   order, whose opposite vertex is opp[0]. Returns the edge count or -1. */
static long pbd__build_edges(pbd_world *w, const int *elems, int n, int k, pbd__edge **out) {
    static const int tri_e[3][3] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}};
    static const int tet_e[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
    int per = k == 3 ? 3 : 6;
    long m = (long)n * per;
    pbd__edge_sort *keys = (pbd__edge_sort *)pbd__alloc_n(w, (size_t)m, sizeof *keys);
    pbd__edge *edges = (pbd__edge *)pbd__alloc_n(w, (size_t)m, sizeof *edges);
    if (!keys || !edges) {
        pbd__free(w, keys);
        pbd__free(w, edges);
        return -1;
    }
    for (int e = 0; e < n; ++e)
        for (int j = 0; j < per; ++j) {
            const int *el = elems + (size_t)e * k;
            int a = k == 3 ? el[tri_e[j][0]] : el[tet_e[j][0]];
            int b = k == 3 ? el[tri_e[j][1]] : el[tet_e[j][1]];
            pbd__edge_sort *q = &keys[(long)e * per + j];
            q->key = pbd__edge_key(a, b);
            /* opp encodes the opposite vertex and whether (a,b) is stored
               reversed, so that the sort is deterministic */
            q->opp = k == 3 ? el[tri_e[j][2]] : -1;
            if (k == 3 && a > b) q->opp = -2 - q->opp;
        }
    qsort(keys, (size_t)m, sizeof *keys, pbd__cmp_edge_key);
    long ne = 0;
    for (long i = 0; i < m; ++i) {
        int a = (int)(keys[i].key >> 32), b = (int)(keys[i].key & 0xffffffffu);
        if (i == 0 || keys[i].key != keys[i - 1].key) {
            pbd__edge *E = &edges[ne++];
            E->a = a;
            E->b = b;
            E->nopp = 0;
        }
        pbd__edge *E = &edges[ne - 1];
        if (k == 3) {
            int opp = keys[i].opp, rev = opp <= -2;
            if (rev) opp = -2 - opp;
            if (E->nopp == 0 && rev) {
                E->a = b;
                E->b = a;
            } /* direction of its first triangle */
            if (E->nopp < 2) E->opp[E->nopp] = opp;
            E->nopp++;
        }
    }
    pbd__free(w, keys);
    *out = edges;
    return ne;
}

/* The per-object arrays for n objects: the scratch of 4 doubles (see
   pbd__momentum_before), the coupled flags, the drag factors, and the
   drags, which are state: kept for the objects there were, 0 for new ones. */
static pbd_result pbd__reserve_object_scratch(pbd_world *w, int n) {
    size_t m = (size_t)(n > 0 ? n : 1);
    double *l = (double *)pbd__alloc_n(w, m * 4, sizeof(double));
    int *c = (int *)pbd__alloc_n(w, m, sizeof(int));
    float *drag = (float *)pbd__alloc_n(w, m, sizeof(float)), *keep = (float *)pbd__alloc_n(w, m, sizeof(float));
    if (!l || !c || !drag || !keep) {
        pbd__free(w, l);
        pbd__free(w, c);
        pbd__free(w, drag);
        pbd__free(w, keep);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    for (int o = 0; o < n; ++o) drag[o] = o < w->object_drag_n ? w->object_drag[o] : 0.0f;
    pbd__free(w, w->object_l);
    pbd__free(w, w->object_coupled);
    pbd__free(w, w->object_drag);
    pbd__free(w, w->object_keep);
    w->object_l = l;
    w->object_coupled = c;
    w->object_drag = drag;
    w->object_drag_n = n;
    w->object_keep = keep;
    return PBD_OK;
}

/* The slot a handle names, unchecked (-1 for id 0): for handles the
   library has just made itself. */
static int pbd__slot_index(uint32_t id) { return (int)(id & PBD__SLOT_MASK) - 1; }

/* Object bookkeeping for builders: the object over particle range r with
   the builder's groups (parts) and damping; *index receives its slot. */
static pbd_result pbd__new_object(pbd_world *w, pbd_range r, float damping, const pbd_object_parts *parts, int *index) {
    int oi;
    PBD__TRY(PBD__ACQUIRE(w, w->objects, w->nobjects, w->object_cap, "object", &oi));
    pbd__object *o = &w->objects[oi];
    o->lra = -1;
    o->first = r.first;
    o->count = r.count;
    o->damping = damping;
    o->groups[0] = pbd__slot_index(parts->stretch.id);
    o->groups[1] = pbd__slot_index(parts->bending.id);
    o->groups[2] = pbd__slot_index(parts->area.id);
    o->groups[3] = pbd__slot_index(parts->volume.id);
    /* its pieces: a mesh of several parts is damped part by part */
    if (pbd__reserve_object_scratch(w, w->nobjects) != PBD_OK || pbd__pieces_find(w, oi, NULL, 0) != PBD_OK) {
        PBD__UNDO(w->objects, w->nobjects, oi);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for an object");
    }
    w->object_drag[oi] = 0.0f;
    for (int i = r.first; i < r.first + r.count; ++i) w->owner[i] = oi;
    *index = oi;
    return PBD_OK;
}

/* The index of the object a handle names. */
static pbd_result pbd__object_index(const pbd_world *w, pbd_object o, int *index) {
    return PBD__RESOLVE(w, o, w->objects, w->nobjects, "object", index);
}

PBDDEF pbd_result pbd_object_vertices(const pbd_world *w, pbd_object object, int *particles, int max, int *count) {
    PBD__CHECK_WORLD_READ(w);
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    PBD__TRY(pbd__check_list(w, particles, max, count));
    const pbd__object *o = &w->objects[oi];
    for (int v = 0; v < o->count && v < max; ++v) particles[v] = o->first + (o->perm ? o->perm[v] : v);
    *count = o->count;
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_get_parts(const pbd_world *w, pbd_object object, pbd_object_parts *out) {
    PBD__CHECK_WORLD_READ(w);
    PBD__CHECK_PTR(w, out, "out");
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    const pbd__object *o = &w->objects[oi];
    out->particles.first = o->first;
    out->particles.count = o->count;
    pbd_group *g[4] = {&out->stretch, &out->bending, &out->area, &out->volume};
    for (int k = 0; k < 4; ++k) g[k]->id = PBD__HANDLE_OR_NONE(w->groups, o->groups[k]);
    return PBD_OK;
}

/* Without masses a vertex's mass is its share of the elements (k = 3:
   triangles, 4: tetrahedra, validated) it is in: a vertex in none would get
   mass 0, which pins it without anyone having asked for a pin. */
static pbd_result pbd__check_density_covers(const pbd_world *w, const float *masses, const int *elems, int n, int k,
                                            int nv) {
    if (masses) return PBD_OK;
    unsigned char *used = (unsigned char *)pbd__alloc_n((pbd_world *)w, (size_t)nv, 1);
    if (!used) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to check the mesh");
    memset(used, 0, (size_t)nv);
    for (long i = 0; i < (long)k * n; ++i) used[elems[i]] = 1;
    int lone = -1;
    for (int i = 0; i < nv && lone < 0; ++i)
        if (!used[i]) lone = i;
    pbd__free((pbd_world *)w, used);
    if (lone < 0) return PBD_OK;
    return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                     "vertex %d is in no %s: a density gives it no mass (remove it, or give per-vertex masses)", lone,
                     k == 3 ? "triangle" : "tetrahedron");
}

static pbd_result pbd__check_common(const pbd_world *w, const float *positions, int nv, const float *masses,
                                    float density, float thickness, const char *thickness_name, float damping) {
    PBD__CHECK_PTR(w, positions, "desc.positions");
    if (nv <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "vertex count %d <= 0", nv);
    if (nv > INT_MAX / 8 - w->n) return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d vertices overflow", nv);
    PBD__TRY(pbd__check_positions(w, positions, 3 * (size_t)nv, "positions"));
    if (masses) {
        PBD__TRY(pbd__check_finite(w, masses, (size_t)nv, "masses"));
        for (int i = 0; i < nv; ++i) PBD__TRY(pbd__check_mass(w, masses[i], "masses", i, 1));
    }
    if (!pbd__finite(density)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "density %g is not finite", (double)density);
    if (!pbd__finite(thickness))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "%s %g is not finite", thickness_name, (double)thickness);
    if (!pbd__finite(damping)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "damping %g is not finite", (double)damping);
    /* without masses the density makes them: 0 would pin every vertex
       (pin with pbd_particle_pin, or masses of 0, instead) */
    if (!masses && density < 0) return pbd__fail(w, PBD_ERROR_NEGATIVE_MASS, "density %g < 0", (double)density);
    if (!masses && !(density > 0))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "density 0 would pin every vertex: give a density > 0 (pin vertices with pbd_particle_pin "
                         "or masses of 0)");
    PBD__TRY(pbd__check_radius(w, thickness, thickness_name, 1));
    if (damping < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "damping %g must be >= 0", (double)damping);
    return PBD_OK;
}

static pbd_result pbd__validate_cloth(const pbd_world *w, const pbd_cloth_desc *d) {
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(pbd__check_common(w, d->positions, d->vertex_count, d->masses, d->density, d->thickness, "thickness",
                               d->damping));
    PBD__TRY(pbd__validate_triangles(w, d->triangles, d->triangle_count, d->vertex_count, "desc.triangles"));
    PBD__TRY(pbd__check_density_covers(w, d->masses, d->triangles, d->triangle_count, 3, d->vertex_count));
    PBD__TRY(pbd__check_compliance(w, d->stretch_compliance, d->stretch_stiffness, "stretch_"));
    PBD__TRY(pbd__check_compliance(w, d->bending_compliance, d->bending_stiffness, "bending_"));
    PBD__TRY(pbd__check_compliance(w, d->area_compliance, d->area_stiffness, "area_"));
    if ((int)d->bending < PBD_BENDING_NONE || (int)d->bending > PBD_BENDING_ISOMETRIC)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "bending model %d is not PBD_BENDING_NONE, _DIHEDRAL or _ISOMETRIC (0..2)", (int)d->bending);
    PBD__TRY(pbd__check_switch(w, d->tethers, "tethers"));
    PBD__TRY(pbd__check_switch(w, d->area_constraints, "area_constraints"));
    PBD__TRY(pbd__check_switch(w, d->reorder, "reorder"));
    if (!pbd__finite(d->gravity_cfl) || d->gravity_cfl < 0)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "gravity_cfl = %g must be finite and >= 0",
                         (double)d->gravity_cfl);
    for (int t = 0; t < d->triangle_count; ++t) {
        pbd__v3 x[3], g[3];
        for (int i = 0; i < 3; ++i) x[i] = pbd__ld(d->positions + 3 * d->triangles[3 * t + i]);
        if (!(pbd__eval_area(x, 0, g) > PBD__REST_AREA_MIN))
            return pbd__fail(w, PBD_ERROR_DEGENERATE, "triangle %d has zero area", t);
    }
    return PBD_OK;
}

/* Particles of a mesh object; masses from density * area (or volume) / k
   (each element gives an equal share to its k corners). */
static pbd_result pbd__add_mesh_particles(pbd_world *w, const float *pos, int nv, const float *masses, float density,
                                          const int *elems, int n, int k, float radius, pbd_range *r) {
    float *m = NULL;
    if (!masses) {
        m = (float *)pbd__alloc_n(w, (size_t)nv, sizeof(float));
        if (!m) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for masses");
        memset(m, 0, sizeof(float) * (size_t)nv);
        for (int e = 0; e < n; ++e) {
            const int *el = elems + (size_t)e * k;
            pbd__v3 x[4], g[4];
            for (int i = 0; i < k; ++i) x[i] = pbd__ld(pos + 3 * el[i]);
            float size = k == 3 ? pbd__eval_area(x, 0, g) : fabsf(pbd__eval_tet(x, 0, g));
            for (int i = 0; i < k; ++i) m[el[i]] += density * size / (float)k;
        }
        for (int i = 0; i < nv; ++i)
            if (!(m[i] >= PBD_MIN_MASS && m[i] <= PBD_MAX_MASS)) { /* every vertex is in an element (checked) */
                char value[32];
                pbd_format_float(m[i], value, sizeof value);
                pbd__free(w, m);
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                 "density %g kg/m^%d makes a vertex mass of %s kg, outside [PBD_MIN_MASS, "
                                 "PBD_MAX_MASS] = [%g, %g] kg",
                                 (double)density, k == 3 ? 2 : 3, value, (double)PBD_MIN_MASS, (double)PBD_MAX_MASS);
            }
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = nv;
    pd.masses = masses ? masses : m;
    pd.radius = radius;
    pbd_result res = pbd__append_particles(w, &pd, r);
    pbd__free(w, m);
    return res;
}

/* Distance constraints over the edges, offset to world particle indices. */
static pbd_result pbd__add_edge_group(pbd_world *w, const pbd__edge *edges, long ne, int first, float compliance,
                                      float stiffness, pbd_group *out) {
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    int *idx = (int *)pbd__alloc_n(w, (size_t)ne * 2, sizeof(int));
    if (!idx) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for edges");
    for (long e = 0; e < ne; ++e) {
        idx[2 * e] = first + edges[e].a;
        idx[2 * e + 1] = first + edges[e].b;
    }
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = (int)ne;
    cd.indices = idx;
    cd.compliance = compliance;
    cd.stiffness = stiffness;
    pbd_result r = pbd__validate_constraints(w, &cd); /* zero-length edges */
    if (r == PBD_OK) r = pbd__append_constraints(w, &cd, out);
    pbd__free(w, idx);
    return r;
}

/* Cloth groups: bending over interior edges, optional areas, edges. */
static pbd_result pbd__add_cloth_groups(pbd_world *w, const pbd_cloth_desc *d, int first, pbd_object_parts *o) {
    pbd__edge *edges = NULL;
    long ne = pbd__build_edges(w, d->triangles, d->triangle_count, 3, &edges);
    if (ne < 0) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for edges");
    pbd_result r = PBD_OK;
    long ninterior = 0;
    for (long e = 0; e < ne && r == PBD_OK; ++e) {
        if (edges[e].nopp > 2)
            r = pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "edge %d-%d is shared by %d triangles (non-manifold)",
                          edges[e].a, edges[e].b, edges[e].nopp);
        ninterior += edges[e].nopp == 2;
    }
    /* Bending and area first, stretch last: the stiffest constraints get the
       last word of every iteration, so a cloth that is folded or tangled
       (bending far from rest) still keeps its edge lengths. */
    if (r == PBD_OK && d->bending != PBD_BENDING_NONE && ninterior > 0) {
        int *idx = (int *)pbd__alloc_n(w, (size_t)ninterior * 4, sizeof(int));
        if (!idx) r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for bending");
        long c = 0;
        for (long e = 0; e < ne && idx; ++e) {
            if (edges[e].nopp != 2) continue;
            /* (a, b, opp0) is a triangle, so opp0 is the wing p3 of (p0 p1 p3) */
            int *q = idx + 4 * c++;
            q[0] = first + edges[e].a;
            q[1] = first + edges[e].b;
            q[2] = first + edges[e].opp[1];
            q[3] = first + edges[e].opp[0];
        }
        if (idx) {
            pbd_constraints_desc cd = pbd_constraints_desc_default();
            cd.type =
                d->bending == PBD_BENDING_DIHEDRAL ? PBD_CONSTRAINT_BENDING_DIHEDRAL : PBD_CONSTRAINT_BENDING_ISOMETRIC;
            cd.count = (int)ninterior;
            cd.indices = idx;
            cd.compliance = d->bending_compliance;
            cd.stiffness = d->bending_stiffness;
            r = pbd__validate_constraints(w, &cd);
            if (r == PBD_OK) r = pbd__append_constraints(w, &cd, &o->bending);
            pbd__free(w, idx);
        }
    }
    if (r == PBD_OK && d->area_constraints) {
        int *idx = (int *)pbd__alloc_n(w, (size_t)d->triangle_count * 3, sizeof(int));
        if (!idx) r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for areas");
        else {
            for (long k = 0; k < 3L * d->triangle_count; ++k) idx[k] = first + d->triangles[k];
            pbd_constraints_desc cd = pbd_constraints_desc_default();
            cd.type = PBD_CONSTRAINT_AREA;
            cd.count = d->triangle_count;
            cd.indices = idx;
            cd.compliance = d->area_compliance;
            cd.stiffness = d->area_stiffness;
            r = pbd__append_constraints(w, &cd, &o->area);
            pbd__free(w, idx);
        }
    }
    if (r == PBD_OK)
        r = pbd__add_edge_group(w, edges, ne, first, d->stretch_compliance, d->stretch_stiffness, &o->stretch);
    pbd__free(w, edges);
    return r;
}

static void pbd__object_init(pbd_object_parts *o) { memset(o, 0, sizeof *o); }

/* --- locality ---------------------------------------------------------------
   Particles sorted along a Morton (Z-order) curve of their rest positions:
   neighbours in space become neighbours in memory, so a constraint's
   particles share cache lines (bench/shuffled measures it). perm[old] = new. */

typedef struct pbd__morton {
    uint64_t code;
    int index;
} pbd__morton;
static int pbd__cmp_morton(const void *a, const void *b) {
    const pbd__morton *x = (const pbd__morton *)a, *y = (const pbd__morton *)b;
    if (x->code != y->code) return x->code < y->code ? -1 : 1;
    return x->index - y->index;
}
static uint64_t pbd__spread21(uint64_t v) { /* 21 bits -> every third bit */
    v &= 0x1fffff;
    v = (v | v << 32) & 0x1f00000000ffffull;
    v = (v | v << 16) & 0x1f0000ff0000ffull;
    v = (v | v << 8) & 0x100f00f00f00f00full;
    v = (v | v << 4) & 0x10c30c30c30c30c3ull;
    v = (v | v << 2) & 0x1249249249249249ull;
    return v;
}

static int pbd__morton_order(pbd_world *w, const float *pos, int nv, int *perm) {
    pbd__morton *m = (pbd__morton *)pbd__alloc_n(w, (size_t)nv, sizeof *m);
    if (!m) return 0;
    pbd__v3 lo = pbd__ld(pos), hi = lo;
    for (int i = 1; i < nv; ++i) {
        pbd__v3 p = pbd__ld(pos + 3 * i);
        lo = pbd__v(fminf(lo.x, p.x), fminf(lo.y, p.y), fminf(lo.z, p.z));
        hi = pbd__v(fmaxf(hi.x, p.x), fmaxf(hi.y, p.y), fmaxf(hi.z, p.z));
    }
    pbd__v3 ext = pbd__sub(hi, lo);
    float e = fmaxf(ext.x, fmaxf(ext.y, ext.z));
    float s = e > 0 ? 2097151.0f / e : 0.0f;
    for (int i = 0; i < nv; ++i) {
        pbd__v3 p = pbd__mul(pbd__sub(pbd__ld(pos + 3 * i), lo), s);
        /* an extent that overflows makes s 0 and p NaN: cell 0 */
        m[i].code = (uint64_t)pbd__spread21((uint64_t)pbd__cell_index(p.x, 0, 2097151)) |
                    pbd__spread21((uint64_t)pbd__cell_index(p.y, 0, 2097151)) << 1 |
                    pbd__spread21((uint64_t)pbd__cell_index(p.z, 0, 2097151)) << 2;
        m[i].index = i;
    }
    qsort(m, (size_t)nv, sizeof *m, pbd__cmp_morton);
    for (int i = 0; i < nv; ++i) perm[m[i].index] = i;
    pbd__free(w, m);
    return 1;
}

/* Permuted copies of a mesh object's arrays (positions, masses, elements
   of k vertices). *perm receives the permutation. Free with pbd__free. */
typedef struct pbd__reordered {
    float *pos, *mass;
    int *elems, *perm;
} pbd__reordered;
static void pbd__reordered_free(pbd_world *w, pbd__reordered *r) {
    pbd__free(w, r->pos);
    pbd__free(w, r->mass);
    pbd__free(w, r->elems);
    pbd__free(w, r->perm);
}
static pbd_result pbd__reorder_mesh(pbd_world *w, const float *pos, const float *mass, int nv, const int *elems, int ne,
                                    int k, pbd__reordered *r) {
    memset(r, 0, sizeof *r);
    r->pos = (float *)pbd__alloc_n(w, (size_t)nv * 3, sizeof(float));
    r->mass = mass ? (float *)pbd__alloc_n(w, (size_t)nv, sizeof(float)) : NULL;
    r->elems = (int *)pbd__alloc_n(w, (size_t)ne * (size_t)k, sizeof(int));
    r->perm = (int *)pbd__alloc_n(w, (size_t)nv, sizeof(int));
    if (!r->pos || (mass && !r->mass) || !r->elems || !r->perm || !pbd__morton_order(w, pos, nv, r->perm)) {
        pbd__reordered_free(w, r);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to reorder %d vertices", nv);
    }
    for (int i = 0; i < nv; ++i) {
        memcpy(r->pos + 3 * r->perm[i], pos + 3 * i, 3 * sizeof(float));
        if (mass) r->mass[r->perm[i]] = mass[i];
    }
    for (long j = 0; j < (long)ne * k; ++j) r->elems[j] = r->perm[elems[j]];
    return PBD_OK;
}

/* Builds an object from `copy` (a desc the caller copied), or, with
   reorder, from the copy with its mesh arrays (found through `ref`)
   replaced by Morton-ordered ones; the object keeps the permutation
   (pbd__object.perm), which is also handed back. */
typedef pbd_result (*pbd__build_fn)(pbd_world *w, const void *desc, pbd_object *out);
typedef struct pbd__mesh_ref {
    const float **positions, **masses;
    const int **elems;
    int nv, ne, k;
} pbd__mesh_ref;

static pbd_result pbd__build_in_order(pbd_world *w, int reorder, int *perm_out, pbd__mesh_ref ref, pbd__build_fn build,
                                      const void *copy, pbd_object *out) {
    if (!reorder) {
        for (int i = 0; perm_out && i < ref.nv; ++i) perm_out[i] = i;
        return build(w, copy, out);
    }
    pbd__reordered r;
    PBD__TRY(pbd__reorder_mesh(w, *ref.positions, *ref.masses, ref.nv, *ref.elems, ref.ne, ref.k, &r));
    *ref.positions = r.pos;
    *ref.masses = r.mass;
    *ref.elems = r.elems;
    pbd_object made;
    pbd_result res = build(w, copy, &made);
    if (res == PBD_OK) {
        if (perm_out) memcpy(perm_out, r.perm, sizeof(int) * (size_t)ref.nv);
        w->objects[pbd__slot_index(made.id)].perm = r.perm; /* the object keeps it: calls take vertex numbers */
        r.perm = NULL;
        if (out) *out = made;
    }
    pbd__reordered_free(w, &r);
    return res;
}

static pbd_result pbd__add_cloth_validated(pbd_world *w, const void *desc, pbd_object *out);
static pbd_result pbd__auto_tethers(pbd_world *w, int object);
struct pbd__lra;
static void pbd__lra_reach(pbd_world *w, struct pbd__lra *l);
static int pbd__flat_convex_disc(pbd_world *w, int oi, const int *tris, int nt);
/* pbd__object.tethers: off; on, lengths along the mesh edges (Dijkstra);
   on, and the rest shape is a flat convex disc, whose geodesics are
   straight lines (see pbd__auto_tethers_build). */
enum { PBD__TETHERS_OFF = 0, PBD__TETHERS_GEODESIC = 1, PBD__TETHERS_STRAIGHT = 2 };

PBDDEF pbd_result pbd_add_cloth(pbd_world *w, const pbd_cloth_desc *d, pbd_object *out) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__validate_cloth(w, d));
    pbd_cloth_desc c = *d;
    pbd__mesh_ref ref = {&c.positions, &c.masses, &c.triangles, c.vertex_count, c.triangle_count, 3};
    return pbd__build_in_order(w, d->reorder, d->permutation, ref, pbd__add_cloth_validated, &c, out);
}

static pbd_result pbd__add_cloth_validated(pbd_world *w, const void *desc, pbd_object *out) {
    const pbd_cloth_desc *d = (const pbd_cloth_desc *)desc;
    pbd__mark mark = pbd__mark_now(w);
    pbd_object_parts o;
    pbd__object_init(&o);
    int oi = -1;
    pbd_range r;
    pbd_result res = pbd__add_mesh_particles(w, d->positions, d->vertex_count, d->masses, d->density, d->triangles,
                                             d->triangle_count, 3, d->thickness, &r);
    if (res == PBD_OK) res = pbd__add_cloth_groups(w, d, r.first, &o);
    if (res == PBD_OK) res = pbd__new_object(w, r, d->damping, &o, &oi);
    if (res == PBD_OK && d->tethers) {
        int flat = pbd__flat_convex_disc(w, oi, d->triangles, d->triangle_count);
        if (flat < 0) res = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the mesh edges");
        w->objects[oi].tethers = flat > 0 ? PBD__TETHERS_STRAIGHT : PBD__TETHERS_GEODESIC;
        w->objects[oi].gravity_cfl = d->gravity_cfl;
        if (res == PBD_OK) res = pbd__auto_tethers(w, oi); /* vertices of mass 0 are pinned from the start */
    }
    if (res != PBD_OK) {
        pbd__rollback(w, mark);
        return res;
    }
    if (out) out->id = PBD__HANDLE(w->objects, oi);
    return PBD_OK;
}

static pbd_result pbd__add_softbody_validated(pbd_world *w, const void *desc, pbd_object *out);

PBDDEF pbd_result pbd_add_softbody(pbd_world *w, const pbd_softbody_desc *d, pbd_object *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(
        pbd__check_common(w, d->positions, d->vertex_count, d->masses, d->density, d->radius, "radius", d->damping));
    PBD__CHECK_PTR(w, d->tets, "desc.tets");
    if (d->tet_count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "tet count %d <= 0", d->tet_count);
    if (d->tet_count > INT_MAX / 8) return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d tets overflow", d->tet_count);
    PBD__TRY(pbd__check_compliance(w, d->edge_compliance, d->edge_stiffness, "edge_"));
    PBD__TRY(pbd__check_compliance(w, d->volume_compliance, d->volume_stiffness, "volume_"));
    PBD__TRY(pbd__check_switch(w, d->volume_constraints, "volume_constraints"));
    PBD__TRY(pbd__check_switch(w, d->reorder, "reorder"));
    for (int t = 0; t < d->tet_count; ++t) {
        const int *e = d->tets + 4 * t;
        for (int i = 0; i < 4; ++i) {
            if (e[i] < 0 || e[i] >= d->vertex_count)
                return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "tet %d uses vertex %d (0..%d)", t, e[i],
                                 d->vertex_count - 1);
            for (int j = 0; j < i; ++j)
                if (e[i] == e[j]) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "tet %d repeats vertex %d", t, e[i]);
        }
        pbd__v3 x[4], g[4];
        for (int i = 0; i < 4; ++i) x[i] = pbd__ld(d->positions + 3 * e[i]);
        /* relative to the tet's size: a sliver is as degenerate as a flat tet */
        float edge = 0;
        for (int i = 1; i < 4; ++i) edge = fmaxf(edge, pbd__len(pbd__sub(x[i], x[0])));
        float vol = pbd__eval_tet(x, 0, g);
        if (vol < 0)
            return pbd__fail(w, PBD_ERROR_DEGENERATE, "tet %d is inverted (negative volume): swap two of its vertices",
                             t);
        if (!(vol > PBD__SLIVER_MIN * edge * edge * edge))
            return pbd__fail(w, PBD_ERROR_DEGENERATE, "tet %d is flat", t);
    }
    PBD__TRY(pbd__check_no_repeated_element(w, d->tets, d->tet_count, 4, "tet"));
    PBD__TRY(pbd__check_density_covers(w, d->masses, d->tets, d->tet_count, 4, d->vertex_count));
    pbd_softbody_desc c = *d;
    pbd__mesh_ref ref = {&c.positions, &c.masses, &c.tets, c.vertex_count, c.tet_count, 4};
    return pbd__build_in_order(w, d->reorder, d->permutation, ref, pbd__add_softbody_validated, &c, out);
}

static pbd_result pbd__add_softbody_validated(pbd_world *w, const void *desc, pbd_object *out) {
    const pbd_softbody_desc *d = (const pbd_softbody_desc *)desc;
    pbd__mark mark = pbd__mark_now(w);
    pbd_object_parts o;
    pbd__object_init(&o);
    int oi = -1;
    pbd_range r;
    pbd_result res = pbd__add_mesh_particles(w, d->positions, d->vertex_count, d->masses, d->density, d->tets,
                                             d->tet_count, 4, d->radius, &r);
    pbd__edge *edges = NULL;
    long ne = 0;
    if (res == PBD_OK) {
        ne = pbd__build_edges(w, d->tets, d->tet_count, 4, &edges);
        if (ne < 0) res = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for edges");
    }
    if (res == PBD_OK)
        res = pbd__add_edge_group(w, edges, ne, r.first, d->edge_compliance, d->edge_stiffness, &o.stretch);
    pbd__free(w, edges);
    if (res == PBD_OK && d->volume_constraints) {
        int *idx = (int *)pbd__alloc_n(w, (size_t)d->tet_count * 4, sizeof(int));
        if (!idx) res = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for tets");
        else {
            for (long k = 0; k < 4L * d->tet_count; ++k) idx[k] = r.first + d->tets[k];
            pbd_constraints_desc cd = pbd_constraints_desc_default();
            cd.type = PBD_CONSTRAINT_TET_VOLUME;
            cd.count = d->tet_count;
            cd.indices = idx;
            cd.compliance = d->volume_compliance;
            cd.stiffness = d->volume_stiffness;
            res = pbd__append_constraints(w, &cd, &o.volume);
            pbd__free(w, idx);
        }
    }
    if (res == PBD_OK) res = pbd__new_object(w, r, d->damping, &o, &oi);
    if (res != PBD_OK) {
        pbd__rollback(w, mark);
        return res;
    }
    if (out) out->id = PBD__HANDLE(w->objects, oi);
    return PBD_OK;
}

static pbd_result pbd__add_balloon_validated(pbd_world *w, const void *desc, pbd_object *out);

PBDDEF pbd_result pbd_add_balloon(pbd_world *w, const pbd_balloon_desc *d, pbd_object *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(pbd__validate_cloth(w, &d->cloth));
    PBD__TRY(pbd__check_compliance(w, d->volume_compliance, d->volume_stiffness, "volume_"));
    if (!pbd__finite(d->pressure)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "pressure is not finite");
    if (!(d->pressure > 0))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "pressure %g must be > 0", (double)d->pressure);
    PBD__TRY(pbd__check_rate(w, d->drag, "drag"));
    PBD__TRY(pbd__check_closed(w, d->cloth.triangles, d->cloth.triangle_count));
    pbd_balloon_desc b = *d;
    pbd__mesh_ref ref = {&b.cloth.positions,   &b.cloth.masses,        &b.cloth.triangles,
                         b.cloth.vertex_count, b.cloth.triangle_count, 3};
    return pbd__build_in_order(w, d->cloth.reorder, d->cloth.permutation, ref, pbd__add_balloon_validated, &b, out);
}

static pbd_result pbd__add_balloon_validated(pbd_world *w, const void *desc, pbd_object *out) {
    const pbd_balloon_desc *d = (const pbd_balloon_desc *)desc;
    pbd__mark mark = pbd__mark_now(w);
    pbd_object_parts o;
    pbd__object_init(&o);
    int oi = -1;
    pbd_range r;
    const pbd_cloth_desc *c = &d->cloth;
    pbd_result res = pbd__add_mesh_particles(w, c->positions, c->vertex_count, c->masses, c->density, c->triangles,
                                             c->triangle_count, 3, c->thickness, &r);
    /* The volume group comes first so that the skin's constraints are the
       last word of every iteration: an inextensible skin (stretch
       compliance 0) then really bounds the volume, and a compliant one
       converges to the pressure equilibrium either way. */
    int *tri = NULL;
    if (res == PBD_OK) {
        tri = (int *)pbd__alloc_n(w, (size_t)c->triangle_count * 3, sizeof(int));
        if (!tri) res = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the balloon");
    }
    if (res == PBD_OK) {
        for (long k = 0; k < 3L * c->triangle_count; ++k) tri[k] = r.first + c->triangles[k];
        pbd_mesh_volume_desc vd = pbd_mesh_volume_desc_default();
        vd.triangles = tri;
        vd.triangle_count = c->triangle_count;
        vd.pressure = d->pressure;
        vd.compliance = d->volume_compliance;
        vd.stiffness = d->volume_stiffness;
        res = pbd_add_mesh_volume(w, &vd, &o.volume);
    }
    pbd__free(w, tri);
    if (res == PBD_OK) res = pbd__add_cloth_groups(w, c, r.first, &o);
    if (res == PBD_OK) res = pbd__new_object(w, r, c->damping, &o, &oi);
    if (res != PBD_OK) {
        pbd__rollback(w, mark);
        return res;
    }
    w->object_drag[oi] = d->drag;
    if (out) out->id = PBD__HANDLE(w->objects, oi);
    return PBD_OK;
}

// ==== colliders =============================================================

/* The default rounding of a box's edges (pbd_collider_desc.rounding): at a
   sharp edge a cloth pulled over it sticks (see the manual's note above
   pbd_add_collider_box's siblings), and real tables, shelves and crates
   are rounded by about this much. */
#define PBD__BOX_ROUNDING 0.01f

PBDDEF pbd_collider_desc pbd_collider_desc_default(void) {
    pbd_collider_desc d;
    memset(&d, 0, sizeof d);
    d.shape = PBD_COLLIDER_PLANE;
    d.rotation[3] = 1.0f;
    d.radius = 0.5f;
    d.half_height = 0.5f;
    d.half_extents[0] = d.half_extents[1] = d.half_extents[2] = 0.5f;
    d.rounding = PBD__BOX_ROUNDING;
    d.static_friction = 0.5f;
    d.dynamic_friction = 0.4f;
    return d;
}

/* Scratch for the per-substep poses of n colliders. */
static pbd_result pbd__reserve_poses(pbd_world *w, int n) {
    int pc = w->pose_cap, pc2 = w->pose_cap;
    if (!pbd__grow(w, (void **)&w->pose_from, 0, &pc, n, sizeof(pbd__pose)) ||
        !pbd__grow(w, (void **)&w->pose_step, 0, &pc2, n, sizeof(pbd__pose)) ||
        !pbd__grow(w, (void **)&w->pose_to, 0, &w->pose_cap, n, sizeof(pbd__pose)))
        return PBD_ERROR_OUT_OF_MEMORY;
    return PBD_OK;
}

static pbd_result pbd__check_pose(const pbd_world *w, const float *pos, const float *rot) {
    PBD__TRY(pbd__check_finite(w, pos, 3, "position"));
    PBD__TRY(pbd__check_finite(w, rot, 4, "rotation"));
    float n = rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2] + rot[3] * rot[3];
    if (!(n > PBD__QUAT_NORM2_MIN)) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "rotation quaternion is zero");
    return PBD_OK;
}

static pbd_result pbd__check_friction(const pbd_world *w, float mus, float mud, float e) {
    PBD__TRY(pbd__check_rate(w, mus, "static friction"));
    PBD__TRY(pbd__check_rate(w, mud, "dynamic friction"));
    if (!pbd__finite(e)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "restitution is not finite");
    if (e < 0 || e > 1) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "restitution %g outside [0, 1]", (double)e);
    if (mud > mus)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "dynamic friction %g exceeds static friction %g", (double)mud,
                         (double)mus);
    return PBD_OK;
}

static void pbd__normalize_quat(const float *q, float *out) {
    float n = sqrtf(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    for (int i = 0; i < 4; ++i) out[i] = q[i] / n;
}

static pbd_result pbd__append_collider(pbd_world *w, const pbd_collider_desc *d, int mesh, pbd_collider *out);
PBDDEF pbd_result pbd_add_collider(pbd_world *w, const pbd_collider_desc *d, pbd_collider *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    if ((int)d->shape < PBD_COLLIDER_PLANE || (int)d->shape > PBD_COLLIDER_BOX)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "collider shape %d is not PBD_COLLIDER_PLANE, _SPHERE, _CAPSULE or _BOX (0..3); triangle "
                         "meshes and signed-distance grids are added with pbd_add_collider_mesh",
                         (int)d->shape);
    PBD__TRY(pbd__check_pose(w, d->position, d->rotation));
    PBD__TRY(pbd__check_friction(w, d->static_friction, d->dynamic_friction, d->restitution));
    if (!pbd__finite(d->radius))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "radius %g is not finite", (double)d->radius);
    if (!pbd__finite(d->half_height))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "half_height %g is not finite", (double)d->half_height);
    PBD__TRY(pbd__check_finite(w, d->half_extents, 3, "half_extents"));
    if (!pbd__finite(d->rounding))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "rounding %g is not finite", (double)d->rounding);
    const float sizes[6] = {d->radius,          d->half_height,     d->half_extents[0],
                            d->half_extents[1], d->half_extents[2], d->rounding};
    static const char *const size_names[6] = {"radius",          "half_height",     "half_extents[0]",
                                              "half_extents[1]", "half_extents[2]", "rounding"};
    for (int k = 0; k < 6; ++k)
        if (sizes[k] > PBD_MAX_COORDINATE)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s %g m is above PBD_MAX_COORDINATE = %g m", size_names[k],
                             (double)sizes[k], (double)PBD_MAX_COORDINATE);
    if ((d->shape == PBD_COLLIDER_SPHERE || d->shape == PBD_COLLIDER_CAPSULE) && !(d->radius > 0))
        return pbd__fail(w, PBD_ERROR_DEGENERATE, "radius %g must be > 0", (double)d->radius);
    if (d->shape == PBD_COLLIDER_CAPSULE && d->half_height < 0)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "half_height %g < 0", (double)d->half_height);
    if (d->shape == PBD_COLLIDER_BOX && !(d->half_extents[0] > 0 && d->half_extents[1] > 0 && d->half_extents[2] > 0))
        return pbd__fail(w, PBD_ERROR_DEGENERATE, "box half extents must be > 0");
    if (d->shape == PBD_COLLIDER_BOX && d->rounding < 0)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "box rounding %g < 0", (double)d->rounding);
    return pbd__append_collider(w, d, 0, out);
}

/* A rounded box is the box of half extents inner = half - r grown by r: its
   distance is the inner box's less r (pbd__sdf; the collider keeps inner
   and r), so it fills half_extents exactly and only its edges and corners
   are rounded. r is capped at the smallest half extent (a thin plate gets
   a round rim). */
static void pbd__box_round(pbd__collider *c, float rounding) {
    float r = rounding;
    for (int a = 0; a < 3; ++a) r = c->half[a] < r ? c->half[a] : r;
    for (int a = 0; a < 3; ++a) c->half[a] -= r;
    c->radius = r;
}

/* Appends a validated collider (mesh: its pbd_world.meshcols index). */
static pbd_result pbd__append_collider(pbd_world *w, const pbd_collider_desc *d, int mesh, pbd_collider *out) {
    int old_n = w->ncolliders, ci;
    PBD__TRY(PBD__ACQUIRE(w, w->colliders, w->ncolliders, w->collider_cap, "collider", &ci));
    pbd_result r = pbd__reserve_contacts(w, w->n, w->ncolliders);
    if (r == PBD_OK && w->ncolliders > old_n && w->ncolliders <= w->max_contacts && w->n > 0)
        memset(w->ncontact, 0, (size_t)w->n); /* the slot layout changes */
    if (r == PBD_OK && pbd__reserve_poses(w, w->ncolliders) != PBD_OK) r = PBD_ERROR_OUT_OF_MEMORY;
    if (r != PBD_OK) {
        PBD__UNDO(w->colliders, w->ncolliders, ci);
        return pbd__fail(w, r, "no memory for a collider");
    }
    pbd__collider *c = &w->colliders[ci];
    c->shape = (int)d->shape;
    c->radius = d->radius;
    c->half_height = d->half_height;
    memcpy(c->half, d->half_extents, sizeof c->half);
    if (d->shape == PBD_COLLIDER_BOX) pbd__box_round(c, d->rounding);
    c->mu_s = d->static_friction;
    c->mu_d = d->dynamic_friction;
    c->restitution = d->restitution;
    memcpy(c->pos, d->position, sizeof c->pos);
    pbd__normalize_quat(d->rotation, c->rot);
    memcpy(c->to_pos, c->pos, sizeof c->pos);
    memcpy(c->to_rot, c->rot, sizeof c->rot);
    c->mesh = mesh;
    if (out) out->id = PBD__HANDLE(w->colliders, ci);
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_collider_plane(pbd_world *w, const float *point, const float *normal, float friction,
                                         pbd_collider *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, point, "point");
    PBD__CHECK_PTR(w, normal, "normal");
    PBD__TRY(pbd__check_finite(w, normal, 3, "normal"));
    pbd__v3 n = pbd__ld(normal);
    float l = pbd__len(n);
    if (!(l > PBD__DIR_MIN)) return pbd__fail(w, PBD_ERROR_DEGENERATE, "plane normal is zero");
    pbd_collider_desc d = pbd_collider_desc_default();
    d.shape = PBD_COLLIDER_PLANE;
    memcpy(d.position, point, sizeof d.position);
    pbd__quat_from_up(pbd__mul(n, 1.0f / l), d.rotation);
    d.static_friction = d.dynamic_friction = friction;
    return pbd_add_collider(w, &d, out);
}

PBDDEF pbd_result pbd_add_collider_sphere(pbd_world *w, const float *centre, float radius, float friction,
                                          pbd_collider *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, centre, "centre");
    pbd_collider_desc d = pbd_collider_desc_default();
    d.shape = PBD_COLLIDER_SPHERE;
    memcpy(d.position, centre, sizeof d.position);
    d.radius = radius;
    d.static_friction = d.dynamic_friction = friction;
    return pbd_add_collider(w, &d, out);
}

PBDDEF pbd_result pbd_add_collider_capsule(pbd_world *w, const float *a, const float *b, float radius, float friction,
                                           pbd_collider *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, a, "a");
    PBD__CHECK_PTR(w, b, "b");
    PBD__TRY(pbd__check_finite(w, a, 3, "a"));
    PBD__TRY(pbd__check_finite(w, b, 3, "b"));
    pbd__v3 A = pbd__ld(a), B = pbd__ld(b), axis = pbd__sub(B, A);
    float l = pbd__len(axis);
    pbd_collider_desc d = pbd_collider_desc_default();
    d.shape = PBD_COLLIDER_CAPSULE;
    pbd__st(d.position, pbd__mul(pbd__add(A, B), 0.5f));
    if (l > PBD__DIR_MIN) pbd__quat_from_up(pbd__mul(axis, 1.0f / l), d.rotation);
    d.half_height = 0.5f * l;
    d.radius = radius;
    d.static_friction = d.dynamic_friction = friction;
    return pbd_add_collider(w, &d, out);
}

PBDDEF pbd_result pbd_add_collider_box(pbd_world *w, const float *centre, const float *half_extents,
                                       const float *rotation, float friction, pbd_collider *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, centre, "centre");
    PBD__CHECK_PTR(w, half_extents, "half_extents");
    pbd_collider_desc d = pbd_collider_desc_default();
    d.shape = PBD_COLLIDER_BOX;
    memcpy(d.position, centre, sizeof d.position);
    memcpy(d.half_extents, half_extents, sizeof d.half_extents);
    if (rotation) memcpy(d.rotation, rotation, sizeof d.rotation);
    d.static_friction = d.dynamic_friction = friction;
    return pbd_add_collider(w, &d, out);
}

/* The index of the collider a handle names. */
static pbd_result pbd__collider_index(const pbd_world *w, pbd_collider handle, int *index) {
    return PBD__RESOLVE(w, handle, w->colliders, w->ncolliders, "collider", index);
}

PBDDEF pbd_result pbd_collider_set_pose(pbd_world *w, pbd_collider handle, const float *position,
                                        const float *rotation) {
    PBD__CHECK_WORLD_SETTING(w, 0); /* the colliders go with every step of a GPU world */
    int c;
    PBD__TRY(pbd__collider_index(w, handle, &c));
    PBD__CHECK_PTR(w, position, "position");
    pbd__collider *col = &w->colliders[c];
    PBD__TRY(pbd__check_pose(w, position, rotation ? rotation : col->to_rot));
    memcpy(col->to_pos, position, 3 * sizeof(float));
    if (rotation) pbd__normalize_quat(rotation, col->to_rot);
    return PBD_OK;
}

PBDDEF pbd_result pbd_collider_set_friction(pbd_world *w, pbd_collider handle, float static_friction,
                                            float dynamic_friction, float restitution) {
    PBD__CHECK_WORLD_SETTING(w, 0);
    int c;
    PBD__TRY(pbd__collider_index(w, handle, &c));
    PBD__TRY(pbd__check_friction(w, static_friction, dynamic_friction, restitution));
    w->colliders[c].mu_s = static_friction;
    w->colliders[c].mu_d = dynamic_friction;
    w->colliders[c].restitution = restitution;
    return PBD_OK;
}

PBDDEF int pbd_world_collider_count(const pbd_world *w) { return w ? PBD__LIVE(w->colliders, w->ncolliders) : 0; }
PBDDEF pbd_result pbd_world_colliders(const pbd_world *w, pbd_collider *out, int max, int *count) {
    PBD__CHECK_WORLD_READ(w);
    PBD__TRY(pbd__check_list(w, out, max, count));
    int n = 0;
    for (int k = 0; k < w->ncolliders; ++k)
        if (w->colliders[k].s.live) {
            if (n < max) out[n].id = PBD__HANDLE(w->colliders, k);
            ++n;
        }
    *count = n;
    return PBD_OK;
}

PBDDEF pbd_collider pbd_world_collider(const pbd_world *w, int index) {
    pbd_collider c;
    c.id = w ? pbd__nth_live(w->colliders, sizeof *w->colliders, w->ncolliders, index) : 0u;
    return c;
}
PBDDEF int pbd_world_contact_count(const pbd_world *w) {
    int total = 0;
    if (w) pbd__gpu_sync(w, 0);
    for (int i = 0; w && i < w->n; ++i) total += w->ncontact[i];
    return total;
}

static PBD_HD float pbd__meshcol_sdf(const pbd_world *w, const pbd__collider *c, pbd__v3 y, pbd__v3 *n);
static PBD_HD int pbd__meshcol_near(const pbd_world *w, const pbd__collider *c, pbd__v3 a, pbd__v3 b, float reach);
/* Signed distance of a point y (collider frame) to the shape, and its unit
   gradient (the outward normal of the closest surface point). Every shape
   is convex, so its SDF is convex along any segment: sphere tracing a
   segment cannot step over the surface (the continuous test below). */
static PBD_HD float pbd__sdf(const pbd_world *w, const pbd__collider *c, pbd__v3 y, pbd__v3 *n) {
    switch (c->shape) {
        case PBD_COLLIDER_MESH:
        case PBD_COLLIDER_SDF_GRID: return pbd__meshcol_sdf(w, c, y, n);
        case PBD_COLLIDER_PLANE: *n = pbd__v(0, 1, 0); return y.y;
        case PBD_COLLIDER_SPHERE: {
            float l = pbd__len(y);
            *n = l > PBD__DIR_MIN ? pbd__mul(y, 1.0f / l) : pbd__v(0, 1, 0);
            return l - c->radius;
        }
        case PBD_COLLIDER_CAPSULE: {
            pbd__v3 d = pbd__v(y.x, y.y - pbd__clampf(y.y, -c->half_height, c->half_height), y.z);
            float l = pbd__len(d);
            *n = l > PBD__DIR_MIN ? pbd__mul(d, 1.0f / l) : pbd__v(1, 0, 0);
            return l - c->radius;
        }
        default: { /* box */
            float q[3] = {fabsf(y.x) - c->half[0], fabsf(y.y) - c->half[1], fabsf(y.z) - c->half[2]};
            float s[3] = {y.x < 0 ? -1.0f : 1.0f, y.y < 0 ? -1.0f : 1.0f, y.z < 0 ? -1.0f : 1.0f};
            if (q[0] > 0 || q[1] > 0 || q[2] > 0) {
                pbd__v3 o = pbd__v(q[0] > 0 ? q[0] * s[0] : 0, q[1] > 0 ? q[1] * s[1] : 0, q[2] > 0 ? q[2] * s[2] : 0);
                float l = pbd__len(o);
                *n = pbd__mul(o, 1.0f / l);
                return l - c->radius; /* a rounded box: the inner box's distance less the rounding */
            }
            int a = q[0] > q[1] ? (q[0] > q[2] ? 0 : 2) : (q[1] > q[2] ? 1 : 2);
            float nn[3] = {0, 0, 0};
            nn[a] = s[a];
            *n = pbd__ld(nn);
            return q[a] - c->radius;
        }
    }
}

static inline PBD_HD pbd__v3 pbd__to_local(const float *pos, const float *rot, pbd__v3 x) {
    return pbd__qrot_inv(rot, pbd__sub(x, pbd__ld(pos)));
}
static inline PBD_HD pbd__v3 pbd__to_world(const float *pos, const float *rot, pbd__v3 y) {
    return pbd__add(pbd__qrot(rot, y), pbd__ld(pos));
}

/* Signed distance from p to collider col at its pose at the end of the
   step (its current pose between steps), and the outward normal there (in
   the world): pbd_collider_closest's, and device code's (pbd_cuda.cu) that
   tests particles against the colliders. */
static PBD_HD float pbd__collider_closest_at(const pbd_world *w, const pbd__collider *col, pbd__v3 p, pbd__v3 *normal) {
    pbd__v3 n;
    float d = pbd__sdf(w, col, pbd__to_local(col->to_pos, col->to_rot, p), &n);
    *normal = pbd__qrot(col->to_rot, n);
    return d;
}

PBDDEF pbd_result pbd_collider_closest(const pbd_world *w, pbd_collider handle, const float *point, float *distance,
                                       float *normal) {
    PBD__CHECK_WORLD_READ(w);
    int c;
    PBD__TRY(pbd__collider_index(w, handle, &c));
    PBD__CHECK_PTR(w, point, "point");
    PBD__CHECK_PTR(w, distance, "distance");
    PBD__TRY(pbd__check_finite(w, point, 3, "point"));
    pbd__v3 n;
    *distance = pbd__collider_closest_at(w, &w->colliders[c], pbd__ld(point), &n);
    if (normal) pbd__st(normal, n);
    return PBD_OK;
}

PBDDEF pbd_result pbd_collider_distance(const pbd_world *w, pbd_collider c, const float *point, float *distance) {
    return pbd_collider_closest(w, c, point, distance, NULL);
}

/* The collider's pose at fraction t of the current step. */
static PBD_HD pbd__pose pbd__collider_pose(const pbd__collider *c, float t) {
    pbd__pose p;
    pbd__st(p.pos, pbd__lerp(pbd__ld(c->pos), pbd__ld(c->to_pos), t));
    pbd__qnlerp(c->rot, c->to_rot, t, p.rot);
    pbd__st(p.up, pbd__qrot(p.rot, pbd__v(0, 1, 0)));
    return p;
}

/* A plane's signed distance is linear along the segment, so when both
   ends (x in pose a, p in pose b) are farther than reach + tol, with a
   guard for the rounding of the world-space evaluation (~1e-6 relative;
   1e-5 of the coordinates' size is ample), pbd__collide's trace would
   find nothing: this skips it (most particles of a fluid tank, for each
   wall) and changes no result. The callers test it before pbd__collide
   (pbd__generate_contacts, W particles at a time). */
static inline PBD_HD int pbd__plane_far(const pbd__pose *a, const pbd__pose *b, pbd__v3 x, pbd__v3 p, float limit) {
    pbd__v3 ra = pbd__sub(x, pbd__ld(a->pos)), rb = pbd__sub(p, pbd__ld(b->pos));
    float ga = PBD__FAR_GUARD * (fabsf(ra.x) + fabsf(ra.y) + fabsf(ra.z)),
          gb = PBD__FAR_GUARD * (fabsf(rb.x) + fabsf(rb.y) + fabsf(rb.z));
    return pbd__dot(pbd__ld(a->up), ra) > limit + ga && pbd__dot(pbd__ld(b->up), rb) > limit + gb;
}

/* |R_b - R_a| for the rotations of poses a and b (2 sin(theta / 2)), rounded up. */
static inline PBD_HD float pbd__ball_spin(const pbd__pose *a, const pbd__pose *b) {
    float c = a->rot[0] * b->rot[0] + a->rot[1] * b->rot[1] + a->rot[2] * b->rot[2] + a->rot[3] * b->rot[3];
    return 2.0f * sqrtf(1.0f - c * c > 0 ? 1.0f - c * c : 0.0f) + PBD__SPIN_GUARD;
}

/* Whether the segment x (in pose a) -> p (in pose b), which pbd__collide
   traces in the collider's frame, stays farther than limit + R from the
   frame's origin, so that a shape inside the ball of radius R about it
   (whose distance is at least |y| - R) is never within limit: the local
   ends lie |x - pos_a| and |p - pos_b| from the origin (rotations keep
   lengths), the local segment is at most |(p - pos_b) - (x - pos_a)| +
   |R_b - R_a| |x - pos_a| long (|R_b - R_a| = 2 sin(theta / 2) for the
   rotation theta from pose a to pose b), and every point of a segment is
   within half its length of an end. A guard of 1e-5 of the lengths
   covers the rounding of the frames, as in pbd__plane_far. */
static inline PBD_HD int pbd__ball_far(const pbd__pose *a, const pbd__pose *b, float R, pbd__v3 x, pbd__v3 p,
                                       float limit) {
    pbd__v3 ra = pbd__sub(x, pbd__ld(a->pos)), rb = pbd__sub(p, pbd__ld(b->pos));
    float spin = pbd__ball_spin(a, b);
    float A = pbd__len(ra), B = pbd__len(rb), L = pbd__len(pbd__sub(rb, ra)) + spin * A;
    return (A < B ? A : B) - 0.5f * L > R + limit + PBD__FAR_GUARD * (A + B + L + R);
}

/* Contact of the segment x -> p (radius r) with collider c, which moves
   from pose a to pose b over the substep. The segment is taken in the
   collider's frame (x in pose a, p in pose b), so relative motion counts.
   Detection is speculative: within reach = r + margin (a particle near
   the surface may be pulled into it by its constraints during the
   iterations), tol the rounding guard; the contact plane itself is at
   distance r. Returns 1 with the plane (through q, normal n, world
   space). */
static PBD_HD int pbd__collide(const pbd_world *w, const pbd__collider *c, const pbd__pose *a, const pbd__pose *b,
                               pbd__v3 x, pbd__v3 p, float r, float reach, float tol, pbd__v3 *q, pbd__v3 *n) {
    pbd__v3 xl = pbd__to_local(a->pos, a->rot, x), pl = pbd__to_local(b->pos, b->rot, p);
    pbd__v3 nl, hit;
    if (c->shape >= PBD_COLLIDER_MESH && !pbd__meshcol_near(w, c, xl, pl, reach)) return 0; /* bounds first */
    float dx = pbd__sdf(w, c, xl, &nl);
    int found = 0;
    if (dx - reach <= tol) {
        /* starting near, on or inside the surface: the plane through the
           surface point nearest x, so that even a fast p beyond the shape
           is pulled back to this side */
        hit = xl;
        found = 1;
    } else {
        /* continuous: sphere-trace the segment from x towards p; the SDF of
           a convex shape is a distance bound, so no step jumps over the
           surface, and a thin shape crossed in one substep is caught at its
           entry */
        pbd__v3 dir = pbd__sub(pl, xl);
        float len = pbd__len(dir), t = 0;
        for (int it = 0; it < 64 && len > PBD__DIR_MIN; ++it) {
            pbd__v3 y = pbd__add(xl, pbd__mul(dir, t));
            float d = (it == 0 ? dx : pbd__sdf(w, c, y, &nl)) - reach; /* the first point is x: dx */
            if (d <= tol) {
                hit = y;
                found = 1;
                break;
            }
            t += d / len;
            if (t > 1.0f) break;
        }
        if (!found && pbd__sdf(w, c, pl, &nl) - reach < 0) { /* a grazing hit the tracer missed */
            hit = pl;
            found = 1;
        }
    }
    if (found) { /* onto the surface inflated by r, along the normal there */
        float d = pbd__sdf(w, c, hit, &nl);
        hit = pbd__sub(hit, pbd__mul(nl, d - r));
    }
    if (!found) return 0;
    *n = pbd__qrot(b->rot, nl);
    *q = pbd__to_world(b->pos, b->rot, hit);
    return 1;
}

// ==== mesh colliders ========================================================

/* A BVH node: a leaf (count > 0) holds order[first .. first + count); an
   inner node (count == 0) has its children at first and first + 1. */
typedef struct pbd__bvh_node {
    float lo[3], hi[3];
    int first, count;
} pbd__bvh_node;

typedef struct pbd__meshcol {
    /* the source (snapshot state) */
    int nv, nt, resolution;
    float *verts; /* nv*3, collider frame */
    int *tris;    /* nt*3 */
    /* derived by pbd__meshcol_build */
    int closed;
    float lo[3], hi[3]; /* mesh bounds */
    float *pn;          /* per triangle 7 pseudo-normals: vertices a b c, edges ab bc ca, face */
    int *order;         /* triangles in BVH leaf order */
    pbd__bvh_node *nodes;
    int nnodes;
    int dims[3]; /* grid: cells per axis (nodes: dims + 1) */
    float glo[3], cell;
    float *grid;
} pbd__meshcol;

static void pbd__meshcol_free_derived(pbd_world *w, pbd__meshcol *m) {
    pbd__free(w, m->pn);
    pbd__free(w, m->order);
    pbd__free(w, m->nodes);
    pbd__free(w, m->grid);
    m->pn = NULL;
    m->order = NULL;
    m->nodes = NULL;
    m->grid = NULL;
}
static void pbd__meshcol_free(pbd_world *w, pbd__meshcol *m) {
    pbd__meshcol_free_derived(w, m);
    pbd__free(w, m->verts);
    pbd__free(w, m->tris);
    memset(m, 0, sizeof *m);
}
static void pbd__meshcols_free(pbd_world *w) {
    for (int i = 0; w->meshcols && i < w->nmeshcols; ++i) pbd__meshcol_free(w, &w->meshcols[i]);
    pbd__free(w, w->meshcols);
    w->meshcols = NULL;
    w->nmeshcols = w->meshcol_cap = 0;
}

static inline PBD_HD pbd__v3 pbd__mc_vert(const pbd__meshcol *m, int t, int k) {
    return pbd__ld(m->verts + 3 * m->tris[3 * t + k]);
}

/* Closest point to p on triangle abc (Ericson, Real-Time Collision
   Detection, 5.1.5) and the feature it lies on: 0..2 vertex a b c, 3 edge
   ab, 4 edge bc, 5 edge ca, 6 the face. */
static PBD_HD pbd__v3 pbd__closest_on_triangle(pbd__v3 p, pbd__v3 a, pbd__v3 b, pbd__v3 c, int *feature) {
    pbd__v3 ab = pbd__sub(b, a), ac = pbd__sub(c, a), ap = pbd__sub(p, a);
    float d1 = pbd__dot(ab, ap), d2 = pbd__dot(ac, ap);
    if (d1 <= 0 && d2 <= 0) {
        *feature = 0;
        return a;
    }
    pbd__v3 bp = pbd__sub(p, b);
    float d3 = pbd__dot(ab, bp), d4 = pbd__dot(ac, bp);
    if (d3 >= 0 && d4 <= d3) {
        *feature = 1;
        return b;
    }
    float vc = d1 * d4 - d3 * d2;
    if (vc <= 0 && d1 >= 0 && d3 <= 0) {
        *feature = 3;
        return pbd__add(a, pbd__mul(ab, d1 / (d1 - d3)));
    }
    pbd__v3 cp = pbd__sub(p, c);
    float d5 = pbd__dot(ab, cp), d6 = pbd__dot(ac, cp);
    if (d6 >= 0 && d5 <= d6) {
        *feature = 2;
        return c;
    }
    float vb = d5 * d2 - d1 * d6;
    if (vb <= 0 && d2 >= 0 && d6 <= 0) {
        *feature = 5;
        return pbd__add(a, pbd__mul(ac, d2 / (d2 - d6)));
    }
    float va = d3 * d6 - d5 * d4;
    if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
        *feature = 4;
        return pbd__add(b, pbd__mul(pbd__sub(c, b), (d4 - d3) / ((d4 - d3) + (d5 - d6))));
    }
    float den = 1.0f / (va + vb + vc);
    *feature = 6;
    return pbd__add(a, pbd__add(pbd__mul(ab, vb * den), pbd__mul(ac, vc * den)));
}

#if PBD__W > 1
/* pbd__closest_on_triangle for W lanes in the same operations: every
   region's point is computed and masks pick, last branch first, the one
   the scalar branches would return. */
static inline pbd__vv pbd__vclosest_on_triangle(pbd__vv p, pbd__vv a, pbd__vv b, pbd__vv c) {
    pbd__vf zero = pbd__vset1(0.0f);
    pbd__vv ab = pbd__vvsub(b, a), ac = pbd__vvsub(c, a), ap = pbd__vvsub(p, a), bp = pbd__vvsub(p, b),
            cp = pbd__vvsub(p, c);
    pbd__vf d1 = pbd__vvdot(ab, ap), d2 = pbd__vvdot(ac, ap), d3 = pbd__vvdot(ab, bp), d4 = pbd__vvdot(ac, bp);
    pbd__vf d5 = pbd__vvdot(ab, cp), d6 = pbd__vvdot(ac, cp);
    pbd__vf vc = pbd__vsub(pbd__vmul(d1, d4), pbd__vmul(d3, d2)), vb = pbd__vsub(pbd__vmul(d5, d2), pbd__vmul(d1, d6));
    pbd__vf va = pbd__vsub(pbd__vmul(d3, d6), pbd__vmul(d5, d4)), e43 = pbd__vsub(d4, d3), e56 = pbd__vsub(d5, d6);
    pbd__vf den = pbd__vdiv(pbd__vset1(1.0f), pbd__vadd(pbd__vadd(va, vb), vc));
    pbd__vv r = pbd__vvadd(a, pbd__vvadd(pbd__vvmul(ab, pbd__vmul(vb, den)), pbd__vvmul(ac, pbd__vmul(vc, den))));
    pbd__vm m;
#define PBD__VPICK(mask, q) \
    (m = (mask), r.x = pbd__vsel(m, r.x, (q).x), r.y = pbd__vsel(m, r.y, (q).y), r.z = pbd__vsel(m, r.z, (q).z))
    PBD__VPICK(pbd__vand_m(pbd__vle(va, zero), pbd__vand_m(pbd__vle(zero, e43), pbd__vle(zero, e56))),
               pbd__vvadd(b, pbd__vvmul(pbd__vvsub(c, b), pbd__vdiv(e43, pbd__vadd(e43, e56)))));
    PBD__VPICK(pbd__vand_m(pbd__vle(vb, zero), pbd__vand_m(pbd__vle(zero, d2), pbd__vle(d6, zero))),
               pbd__vvadd(a, pbd__vvmul(ac, pbd__vdiv(d2, pbd__vsub(d2, d6)))));
    PBD__VPICK(pbd__vand_m(pbd__vle(zero, d6), pbd__vle(d5, d6)), c);
    PBD__VPICK(pbd__vand_m(pbd__vle(vc, zero), pbd__vand_m(pbd__vle(zero, d1), pbd__vle(d3, zero))),
               pbd__vvadd(a, pbd__vvmul(ab, pbd__vdiv(d1, pbd__vsub(d1, d3)))));
    PBD__VPICK(pbd__vand_m(pbd__vle(zero, d3), pbd__vle(d4, d3)), b);
    PBD__VPICK(pbd__vand_m(pbd__vle(d1, zero), pbd__vle(d2, zero)), a);
#undef PBD__VPICK
    return r;
}
#endif

static PBD_HD float pbd__box_dist2(const float *lo, const float *hi, pbd__v3 y) {
    float q[3] = {y.x, y.y, y.z}, d2 = 0;
    for (int k = 0; k < 3; ++k) {
        float e = q[k] < lo[k] ? lo[k] - q[k] : (q[k] > hi[k] ? q[k] - hi[k] : 0.0f);
        d2 += e * e;
    }
    return d2;
}

/* The closest point of the mesh to y: squared distance, point, triangle,
   feature. Nearest child first, pruned by box distance. */
static PBD_HD float pbd__bvh_closest(const pbd__meshcol *m, pbd__v3 y, pbd__v3 *cp, int *tri, int *feat) {
    int stack[96], top = 0;
    float best = FLT_MAX;
    stack[top++] = 0;
    *tri = 0;
    *feat = 6;
    *cp = y;
    while (top > 0) {
        const pbd__bvh_node *nd = &m->nodes[stack[--top]];
        if (pbd__box_dist2(nd->lo, nd->hi, y) >= best) continue;
        if (nd->count > 0) {
            for (int k = nd->first; k < nd->first + nd->count; ++k) {
                int t = m->order[k], f;
                pbd__v3 c = pbd__closest_on_triangle(y, pbd__mc_vert(m, t, 0), pbd__mc_vert(m, t, 1),
                                                     pbd__mc_vert(m, t, 2), &f);
                pbd__v3 d = pbd__sub(y, c);
                float d2 = pbd__dot(d, d);
                if (d2 < best) {
                    best = d2;
                    *cp = c;
                    *tri = t;
                    *feat = f;
                }
            }
            continue;
        }
        int l = nd->first, r = nd->first + 1;
        float dl = pbd__box_dist2(m->nodes[l].lo, m->nodes[l].hi, y),
              dr = pbd__box_dist2(m->nodes[r].lo, m->nodes[r].hi, y);
        if (top + 2 > (int)(sizeof stack / sizeof stack[0])) continue; /* cannot happen: depth <= 64 */
        if (dl <= dr) {
            stack[top++] = r;
            stack[top++] = l;
        } else {
            stack[top++] = l;
            stack[top++] = r;
        }
    }
    return best;
}

/* Signed (closed mesh) or unsigned (open shell) distance through the BVH,
   with the outward normal of the closest point. */
static PBD_HD float pbd__bvh_sdf(const pbd__meshcol *m, pbd__v3 y, pbd__v3 *n) {
    pbd__v3 cp;
    int t, f;
    float d = sqrtf(pbd__bvh_closest(m, y, &cp, &t, &f));
    pbd__v3 diff = pbd__sub(y, cp), face = pbd__ld(m->pn + 21 * t + 18);
    if (!m->closed) {
        *n = d > PBD__DIR_MIN ? pbd__mul(diff, 1.0f / d) : face;
        return d;
    }
    float s = pbd__dot(diff, pbd__ld(m->pn + 21 * t + 3 * f)) < 0 ? -1.0f : 1.0f;
    *n = d > PBD__DIR_MIN ? pbd__mul(diff, s / d) : face;
    return s * d;
}

/* Trilinear interpolation of the grid and its gradient; outside the grid
   the BVH's exact distance. The grid's margin is 4 cells whatever reaches
   into it: a particle of radius 5 cm on a 0.6 m sphere gridded at 128
   cells (margin 2.6 cm) meets the surface beyond it, and the distance to
   the mesh bounds used there before (a lower bound) held it 22 cm off the
   sphere, on the corner of the box (an audit). Contacts ask only within
   reach of the bounds (pbd__meshcol_near). */
static PBD_HD float pbd__grid_sdf(const pbd__meshcol *m, pbd__v3 y, pbd__v3 *n) {
    float q[3] = {y.x, y.y, y.z}, f[3];
    int i[3], outside = 0;
    for (int k = 0; k < 3; ++k) {
        float u = (q[k] - m->glo[k]) / m->cell;
        if (!(u >= 0 && u <= (float)m->dims[k])) outside = 1;
        u = pbd__clampf(u, 0.0f, (float)m->dims[k]);
        int c = pbd__cell_index(u, 0, m->dims[k] - 1); /* NaN: outside, cell 0 */
        i[k] = c;
        f[k] = u - (float)c;
    }
    if (outside) return pbd__bvh_sdf(m, y, n);
    int sx = m->dims[0] + 1, sy = m->dims[1] + 1;
    float v[8];
    for (int c = 0; c < 8; ++c)
        v[c] =
            m->grid[((size_t)(i[2] + (c >> 2)) * sy + (size_t)(i[1] + ((c >> 1) & 1))) * sx + (size_t)(i[0] + (c & 1))];
    /* along x, then y, then z */
    float x00 = v[0] + (v[1] - v[0]) * f[0], x10 = v[2] + (v[3] - v[2]) * f[0];
    float x01 = v[4] + (v[5] - v[4]) * f[0], x11 = v[6] + (v[7] - v[6]) * f[0];
    float y0 = x00 + (x10 - x00) * f[1], y1 = x01 + (x11 - x01) * f[1];
    float d = y0 + (y1 - y0) * f[2];
    float gx0 = (v[1] - v[0]) + ((v[3] - v[2]) - (v[1] - v[0])) * f[1];
    float gx1 = (v[5] - v[4]) + ((v[7] - v[6]) - (v[5] - v[4])) * f[1];
    pbd__v3 g = pbd__v(gx0 + (gx1 - gx0) * f[2], (x10 - x00) + ((x11 - x01) - (x10 - x00)) * f[2], y1 - y0);
    float gl = pbd__len(g);
    *n = gl > PBD__DIR_MIN ? pbd__mul(g, 1.0f / gl) : pbd__v(0, 1, 0);
    return d;
}

static PBD_HD float pbd__meshcol_sdf(const pbd_world *w, const pbd__collider *c, pbd__v3 y, pbd__v3 *n) {
    const pbd__meshcol *m = &w->meshcols[c->mesh];
    return c->shape == PBD_COLLIDER_SDF_GRID ? pbd__grid_sdf(m, y, n) : pbd__bvh_sdf(m, y, n);
}

/* Whether the segment a -> b (collider frame) comes within reach of the
   mesh bounds: the broad phase before any tracing. */
static PBD_HD int pbd__meshcol_near(const pbd_world *w, const pbd__collider *c, pbd__v3 a, pbd__v3 b, float reach) {
    const pbd__meshcol *m = &w->meshcols[c->mesh];
    float A[3] = {a.x, a.y, a.z}, B[3] = {b.x, b.y, b.z};
    for (int k = 0; k < 3; ++k) {
        float lo = A[k] < B[k] ? A[k] : B[k], hi = A[k] < B[k] ? B[k] : A[k];
        if (hi + reach < m->lo[k] || lo - reach > m->hi[k]) return 0;
    }
    return 1;
}

static int pbd__meshcol_index_ok(const pbd_world *w, const pbd__collider *c) {
    if (c->mesh < 0 || c->mesh >= w->nmeshcols || w->meshcols[c->mesh].nv == 0) return 0;
    return (w->meshcols[c->mesh].resolution > 0) == (c->shape == PBD_COLLIDER_SDF_GRID);
}

/* --- building ----------------------------------------------------------------- */

/* Orders order[lo, hi) so that the element at k has the k-th centroid along
   axis (ties by triangle index): a deterministic quickselect. */
static void pbd__bvh_select(int *order, const float *cent, int axis, int lo, int hi, int k) {
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        float pv = cent[3 * order[mid] + axis];
        int pt = order[mid];
        int i = lo, j = hi - 1;
        while (i <= j) {
            while (cent[3 * order[i] + axis] < pv || (cent[3 * order[i] + axis] == pv && order[i] < pt)) ++i;
            while (cent[3 * order[j] + axis] > pv || (cent[3 * order[j] + axis] == pv && order[j] > pt)) --j;
            if (i <= j) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
                ++i;
                --j;
            }
        }
        if (k <= j) hi = j + 1;
        else if (k >= i) lo = i;
        else return;
    }
}

static void pbd__bvh_build(pbd__meshcol *m, const float *cent, int node, int first, int count, int depth) {
    pbd__bvh_node *nd = &m->nodes[node];
    float clo[3] = {FLT_MAX, FLT_MAX, FLT_MAX}, chi[3] = {-FLT_MAX, -FLT_MAX, -FLT_MAX};
    for (int k = 0; k < 3; ++k) {
        nd->lo[k] = FLT_MAX;
        nd->hi[k] = -FLT_MAX;
    }
    for (int i = first; i < first + count; ++i) {
        int t = m->order[i];
        for (int v = 0; v < 3; ++v) {
            const float *p = m->verts + 3 * m->tris[3 * t + v];
            for (int k = 0; k < 3; ++k) {
                nd->lo[k] = p[k] < nd->lo[k] ? p[k] : nd->lo[k];
                nd->hi[k] = p[k] > nd->hi[k] ? p[k] : nd->hi[k];
            }
        }
        for (int k = 0; k < 3; ++k) {
            clo[k] = cent[3 * t + k] < clo[k] ? cent[3 * t + k] : clo[k];
            chi[k] = cent[3 * t + k] > chi[k] ? cent[3 * t + k] : chi[k];
        }
    }
    if (count <= 4 || depth >= 60) {
        nd->first = first;
        nd->count = count;
        return;
    }
    int axis = 0;
    for (int k = 1; k < 3; ++k)
        if (chi[k] - clo[k] > chi[axis] - clo[axis]) axis = k;
    int half = count / 2;
    pbd__bvh_select(m->order, cent, axis, first, first + count, first + half);
    int child = m->nnodes;
    m->nnodes += 2;
    nd->first = child;
    nd->count = 0;
    pbd__bvh_build(m, cent, child, first, half, depth + 1);
    pbd__bvh_build(m, cent, child + 1, first + half, count - half, depth + 1);
}

/* Pseudo-normals (Baerentzen and Aanaes 2005): the face normal, the sum of
   the two face normals at an edge, the angle-weighted sum at a vertex. The
   sign of (y - closest) . pseudo-normal is the inside/outside test of a
   closed mesh, whatever feature the closest point lies on. */
static void pbd__meshcol_normals(pbd__meshcol *m, float *vn, const pbd__edge_sort *keys) {
    memset(vn, 0, sizeof(float) * 3 * (size_t)m->nv);
    for (int t = 0; t < m->nt; ++t) {
        pbd__v3 p[3] = {pbd__mc_vert(m, t, 0), pbd__mc_vert(m, t, 1), pbd__mc_vert(m, t, 2)};
        pbd__v3 fn = pbd__cross(pbd__sub(p[1], p[0]), pbd__sub(p[2], p[0]));
        fn = pbd__mul(fn, 1.0f / pbd__len(fn));
        pbd__st(m->pn + 21 * t + 18, fn);
        for (int k = 0; k < 3; ++k) {
            pbd__v3 e1 = pbd__sub(p[(k + 1) % 3], p[k]), e2 = pbd__sub(p[(k + 2) % 3], p[k]);
            float c = pbd__dot(e1, e2) / (pbd__len(e1) * pbd__len(e2));
            float ang = acosf(pbd__clampf(c, -1.0f, 1.0f));
            float *o = vn + 3 * m->tris[3 * t + k];
            o[0] += ang * fn.x;
            o[1] += ang * fn.y;
            o[2] += ang * fn.z;
        }
    }
    for (int t = 0; t < m->nt; ++t)
        for (int k = 0; k < 3; ++k) {
            memcpy(m->pn + 21 * t + 3 * k, vn + 3 * m->tris[3 * t + k], 3 * sizeof(float));
            pbd__v3 e = pbd__ld(m->pn + 21 * t + 18);
            if (keys) { /* closed: the twin triangle of directed edge (b, a) */
                uint32_t a = (uint32_t)m->tris[3 * t + k], b = (uint32_t)m->tris[3 * t + (k + 1) % 3];
                uint64_t rev = ((uint64_t)b << 32) | a;
                long lo = 0, hi = 3L * m->nt - 1;
                while (lo <= hi) {
                    long mid = lo + (hi - lo) / 2;
                    if (keys[mid].key == rev) {
                        e = pbd__add(e, pbd__ld(m->pn + 21 * (keys[mid].opp / 3) + 18));
                        break;
                    }
                    if (keys[mid].key < rev) lo = mid + 1;
                    else hi = mid - 1;
                }
            }
            pbd__st(m->pn + 21 * t + 9 + 3 * k, e);
        }
}

/* Everything derived from the source mesh: bounds, pseudo-normals, BVH and
   the grid. The source was validated. */
static pbd_result pbd__meshcol_build(pbd_world *w, pbd__meshcol *m) {
    pbd_result cr = pbd__closed_status(w, m->tris, m->nt);
    if (cr == PBD_ERROR_OUT_OF_MEMORY) return cr;
    m->closed = cr == PBD_OK;
    size_t nt = (size_t)m->nt;
    m->pn = (float *)pbd__alloc_n(w, nt * 21, sizeof(float));
    m->order = (int *)pbd__alloc_n(w, nt, sizeof(int));
    m->nodes = (pbd__bvh_node *)pbd__alloc_n(w, 2 * nt, sizeof(pbd__bvh_node));
    float *cent = (float *)pbd__alloc_n(w, nt * 3, sizeof(float));
    float *vn = (float *)pbd__alloc_n(w, (size_t)m->nv * 3, sizeof(float));
    pbd__edge_sort *keys = m->closed ? (pbd__edge_sort *)pbd__alloc_n(w, nt * 3, sizeof(pbd__edge_sort)) : NULL;
    pbd_result r = PBD_OK;
    if (!m->pn || !m->order || !m->nodes || !cent || !vn || (m->closed && !keys)) r = PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) {
        for (int t = 0; t < m->nt; ++t) {
            m->order[t] = t;
            pbd__v3 c = pbd__mul(
                pbd__add(pbd__add(pbd__mc_vert(m, t, 0), pbd__mc_vert(m, t, 1)), pbd__mc_vert(m, t, 2)), 1.0f / 3.0f);
            pbd__st(cent + 3 * t, c);
            for (int k = 0; keys && k < 3; ++k) {
                uint32_t a = (uint32_t)m->tris[3 * t + k], b = (uint32_t)m->tris[3 * t + (k + 1) % 3];
                keys[3 * t + k].key = ((uint64_t)a << 32) | b;
                keys[3 * t + k].opp = 3 * t + k;
            }
        }
        if (keys) qsort(keys, nt * 3, sizeof *keys, pbd__cmp_edge_key);
        pbd__meshcol_normals(m, vn, keys);
        m->nnodes = 1;
        pbd__bvh_build(m, cent, 0, 0, m->nt, 0);
        memcpy(m->lo, m->nodes[0].lo, sizeof m->lo);
        memcpy(m->hi, m->nodes[0].hi, sizeof m->hi);
    }
    if (r == PBD_OK && m->resolution > 0) {
        /* the grid: cubic cells, a margin of 4 cells around the bounds */
        float ext = 0;
        for (int k = 0; k < 3; ++k) ext = m->hi[k] - m->lo[k] > ext ? m->hi[k] - m->lo[k] : ext;
        m->cell = ext / (float)m->resolution;
        size_t count = 1;
        for (int k = 0; k < 3; ++k) {
            /* ceil, at most resolution + 9 cells (also when an overflowing extent makes NaN) */
            m->dims[k] = -pbd__cell_index(-((m->hi[k] - m->lo[k]) / m->cell), -m->resolution - 1, 0) + 8;
            m->glo[k] = 0.5f * (m->lo[k] + m->hi[k]) - 0.5f * m->cell * (float)m->dims[k];
            count *= (size_t)(m->dims[k] + 1);
        }
        m->grid = (float *)pbd__alloc_n(w, count, sizeof(float));
        if (!m->grid) r = PBD_ERROR_OUT_OF_MEMORY;
        for (int k = 0; r == PBD_OK && k <= m->dims[2]; ++k)
            for (int j = 0; j <= m->dims[1]; ++j)
                for (int i = 0; i <= m->dims[0]; ++i) {
                    pbd__v3 y = pbd__v(m->glo[0] + m->cell * (float)i, m->glo[1] + m->cell * (float)j,
                                       m->glo[2] + m->cell * (float)k),
                            n;
                    m->grid[((size_t)k * (size_t)(m->dims[1] + 1) + (size_t)j) * (size_t)(m->dims[0] + 1) + (size_t)i] =
                        pbd__bvh_sdf(m, y, &n);
                }
    }
    pbd__free(w, cent);
    pbd__free(w, vn);
    pbd__free(w, keys);
    if (r != PBD_OK) pbd__meshcol_free_derived(w, m);
    return r;
}

PBDDEF pbd_mesh_collider_desc pbd_mesh_collider_desc_default(void) {
    pbd_mesh_collider_desc d;
    memset(&d, 0, sizeof d);
    d.rotation[3] = 1.0f;
    d.static_friction = 0.5f;
    d.dynamic_friction = 0.4f;
    return d;
}

/* The checks of the source mesh, shared by pbd_add_collider_mesh and the
   snapshot. */
static pbd_result pbd__meshcol_validate(const pbd_world *w, const float *verts, int nv, const int *tris, int nt,
                                        int resolution) {
    PBD__CHECK_PTR(w, verts, "positions");
    if (nv < 3) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "vertex count %d < 3", nv);
    if (nv > INT_MAX / 8) return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d vertices overflow", nv);
    if (resolution < 0 || resolution == 1 || resolution > 512)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "sdf_resolution %d is neither 0 nor in 2..512", resolution);
    PBD__TRY(pbd__check_finite(w, verts, 3 * (size_t)nv, "positions"));
    PBD__TRY(pbd__validate_triangles(w, tris, nt, nv, "triangles"));
    for (int t = 0; t < nt; ++t) {
        pbd__v3 a = pbd__ld(verts + 3 * tris[3 * t]), b = pbd__ld(verts + 3 * tris[3 * t + 1]),
                c = pbd__ld(verts + 3 * tris[3 * t + 2]);
        pbd__v3 e0 = pbd__sub(b, a), e1 = pbd__sub(c, a);
        float l2 = pbd__dot(e0, e0) > pbd__dot(e1, e1) ? pbd__dot(e0, e0) : pbd__dot(e1, e1);
        if (!(pbd__len(pbd__cross(e0, e1)) > PBD__SLIVER_MIN * l2) || !(l2 > 0))
            return pbd__fail(
                w, PBD_ERROR_DEGENERATE,
                "triangle %d has zero area (or is a sliver: its area under %g of its longest edge squared)", t,
                (double)(0.5f * PBD__SLIVER_MIN));
    }
    pbd__edge *edges = NULL;
    long ne = pbd__build_edges((pbd_world *)w, tris, nt, 3, &edges);
    if (ne < 0) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for edges");
    pbd_result r = PBD_OK;
    int all_two = 1; /* every edge in two triangles: closed, whatever the orientation */
    for (long e = 0; e < ne && r == PBD_OK; ++e) {
        if (edges[e].nopp > 2)
            r = pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "edge %d-%d is shared by %d triangles (non-manifold)",
                          edges[e].a, edges[e].b, edges[e].nopp);
        all_two &= edges[e].nopp == 2;
    }
    pbd__free((pbd_world *)w, edges);
    if (r != PBD_OK) return r;
    pbd_result c = pbd__closed_status(w, tris, nt);
    if (c == PBD_ERROR_OUT_OF_MEMORY) return pbd__fail(w, c, "no memory to check the mesh");
    if (c != PBD_OK && resolution > 0)
        return pbd__fail(w, c, "a signed-distance grid needs a closed, consistently oriented mesh");
    /* closed with a triangle flipped: it would be an open shell, hollow (an
       audit: a particle inside a box with one flipped face stayed inside) */
    if (c != PBD_OK && all_two) return pbd__check_closed(w, tris, nt);
    /* a closed mesh wound inward would be solid outside (the pseudo-normals'
       sign): a particle dropped on it fell in and rested inside */
    float vol = c == PBD_OK ? pbd__eval_mesh_volume(verts, nv, tris, nt, 0.0f, NULL) : 0.0f;
    if (vol < 0)
        return pbd__fail(w, PBD_ERROR_DEGENERATE,
                         "the closed mesh is wound inward (its volume is %g m^3): reverse every triangle (swap two "
                         "of its vertices) so that their normals point out",
                         (double)vol);
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_collider_mesh(pbd_world *w, const pbd_mesh_collider_desc *d, pbd_collider *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(
        pbd__meshcol_validate(w, d->positions, d->vertex_count, d->triangles, d->triangle_count, d->sdf_resolution));
    pbd_collider_desc cd = pbd_collider_desc_default();
    cd.shape = d->sdf_resolution > 0 ? PBD_COLLIDER_SDF_GRID : PBD_COLLIDER_MESH;
    memcpy(cd.position, d->position, sizeof cd.position);
    memcpy(cd.rotation, d->rotation, sizeof cd.rotation);
    cd.static_friction = d->static_friction;
    cd.dynamic_friction = d->dynamic_friction;
    cd.restitution = d->restitution;
    PBD__TRY(pbd__check_pose(w, cd.position, cd.rotation));
    PBD__TRY(pbd__check_friction(w, cd.static_friction, cd.dynamic_friction, cd.restitution));
    int mi = 0; /* the first entry a removed mesh collider left empty, else a new one */
    while (mi < w->nmeshcols && w->meshcols[mi].nv > 0) ++mi;
    if (mi == w->nmeshcols && w->nmeshcols >= INT_MAX / 2)
        return pbd__fail(w, PBD_ERROR_OVERFLOW, "too many mesh colliders");
    if (!pbd__grow(w, (void **)&w->meshcols, w->nmeshcols, &w->meshcol_cap, w->nmeshcols + 1, sizeof(pbd__meshcol)))
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for a mesh collider");
    pbd__meshcol m;
    memset(&m, 0, sizeof m);
    m.nv = d->vertex_count;
    m.nt = d->triangle_count;
    m.resolution = d->sdf_resolution;
    m.verts = (float *)pbd__alloc_n(w, (size_t)m.nv * 3, sizeof(float));
    m.tris = (int *)pbd__alloc_n(w, (size_t)m.nt * 3, sizeof(int));
    pbd_result r = m.verts && m.tris ? PBD_OK : PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) {
        memcpy(m.verts, d->positions, sizeof(float) * 3 * (size_t)m.nv);
        memcpy(m.tris, d->triangles, sizeof(int) * 3 * (size_t)m.nt);
        r = pbd__meshcol_build(w, &m);
    }
    if (r != PBD_OK) {
        pbd__meshcol_free(w, &m);
        return pbd__fail(w, r, "no memory for a mesh collider");
    }
    w->meshcols[mi] = m;
    r = pbd__append_collider(w, &cd, mi, out);
    if (r != PBD_OK) {
        pbd__meshcol_free(w, &w->meshcols[mi]);
        return r;
    }
    if (mi == w->nmeshcols) w->nmeshcols++;
    return PBD_OK;
}

/* Analytic or mesh: the mesh collider's meshes are freed with it. */
PBDDEF pbd_result pbd_remove_collider(pbd_world *w, pbd_collider handle) {
    PBD__CHECK_WORLD(w);
    int c;
    PBD__TRY(pbd__collider_index(w, handle, &c));
    pbd__collider *col = &w->colliders[c];
    if (col->shape >= PBD_COLLIDER_MESH) pbd__meshcol_free(w, &w->meshcols[col->mesh]);
    PBD__RELEASE(w->colliders, c);
    /* the contacts of the last substep may name it: they are scratch,
       made again by the next substep, but the velocity pass and
       pbd_world_particle_contact_push read them until then */
    if (w->n > 0) memset(w->ncontact, 0, (size_t)w->n);
    w->ncontact_ids = 0;
    return PBD_OK;
}

/* Snapshot: the source meshes; pbd__meshcols_rebuild derives the rest. */
static void pbd__io_meshcols(pbd__io *io, pbd_world *w) {
    int n = w->nmeshcols;
    pbd__io_table(io, w, (void **)&w->meshcols, &n, &w->meshcol_cap, sizeof(pbd__meshcol));
    w->nmeshcols = n;
    if (io->bad) return;
    for (int i = 0; i < w->nmeshcols && !io->bad; ++i) {
        pbd__meshcol *m = &w->meshcols[i];
        pbd__io_int(io, &m->nv);
        pbd__io_int(io, &m->nt);
        pbd__io_int(io, &m->resolution);
        if (m->nv == 0 && m->nt == 0 && m->resolution == 0) continue; /* left by a removed mesh collider */
        if (io->in && !io->bad && (m->nv < 3 || m->nt < 1 || m->nv > INT_MAX / 8 || m->nt > INT_MAX / 8)) {
            io->bad = 1;
            return;
        }
        pbd__io_array(io, w, (void **)&m->verts, 3L * m->nv, sizeof(float));
        pbd__io_array(io, w, (void **)&m->tris, 3L * m->nt, sizeof(int));
    }
}

static pbd_result pbd__meshcols_rebuild(pbd_world *w) {
    for (int i = 0; i < w->nmeshcols; ++i) {
        pbd__meshcol *m = &w->meshcols[i];
        if (m->nv == 0) continue; /* left by a removed mesh collider */
        if (pbd__meshcol_validate(w, m->verts, m->nv, m->tris, m->nt, m->resolution) != PBD_OK)
            return PBD_ERROR_BAD_SNAPSHOT;
        pbd_result r = pbd__meshcol_build(w, m);
        if (r != PBD_OK) return r;
    }
    for (int c = 0; c < w->ncolliders; ++c)
        if (w->colliders[c].s.live && w->colliders[c].shape >= PBD_COLLIDER_MESH &&
            !pbd__meshcol_index_ok(w, &w->colliders[c]))
            return PBD_ERROR_BAD_SNAPSHOT;
    return PBD_OK;
}

// ==== contacts ==============================================================

/* How far ahead the walks over scattered slots prefetch (the contacts' and
   the particle phase's): 16 slots hide most of each cache miss. */
enum { PBD__SLOT_AHEAD = 16 };

/* --- contacts --------------------------------------------------------------- */

/* Contacts live in per-particle slots (slot k < ncontact[i] of particle
   i: pbd__contact_slot), so that generation, projection and the velocity
   pass run in parallel over particles with a fixed order per particle. The
   projection and the velocity pass walk only the particles that have
   contacts (contact_ids: a fluid tank touches its walls with a tenth of
   its particles, scattered along the rows). */
static inline PBD_HD int pbd__contacts_per_particle(const pbd_world *w) {
    return w->ncolliders < w->max_contacts ? w->ncolliders : w->max_contacts;
}
static inline PBD_HD pbd__contact *pbd__contact_slot(const pbd_world *w, int i, int k) {
    return &w->contacts[(size_t)k * (size_t)w->contact_stride + (size_t)i];
}

/* The colliders' push on a particle this substep: its contacts' multipliers
   in slot order (also on the device: pbd_cuda.cu's rigid bodies). */
static inline PBD_HD float pbd__contact_push(const pbd_world *w, int particle) {
    float push = 0.0f;
    for (int k = 0; k < w->ncontact[particle]; ++k) push += pbd__contact_slot(w, particle, k)->lambda;
    return push;
}
PBDDEF float pbd_world_particle_contact_push(const pbd_world *w, int particle) {
    if (!w || particle < 0 || particle >= w->n) return 0.0f;
    pbd__gpu_sync_also(w, PBD__GPU_STALE_CONTACTS);
    return pbd__contact_push(w, particle);
}
/* The push as a vector, in slot order (also on the device). */
static inline PBD_HD pbd__v3 pbd__contact_push_vector(const pbd_world *w, int particle) {
    pbd__v3 push = pbd__v(0, 0, 0);
    for (int k = 0; k < w->ncontact[particle]; ++k) {
        const pbd__contact *ct = pbd__contact_slot(w, particle, k);
        push = pbd__add(push, pbd__mul(ct->n, ct->lambda));
    }
    return push;
}
PBDDEF void pbd_world_particle_contact_push_vector(const pbd_world *w, int particle, float *out) {
    if (!out) return;
    out[0] = out[1] = out[2] = 0.0f;
    if (!w || particle < 0 || particle >= w->n) return;
    pbd__gpu_sync_also(w, PBD__GPU_STALE_CONTACTS);
    pbd__v3 v = pbd__contact_push_vector(w, particle);
    out[0] = v.x, out[1] = v.y, out[2] = v.z;
}

/* Collider c's poses at the start and the end of substep s of S. */
static inline PBD_HD void pbd__collider_poses_one(pbd_world *w, int c, int s, int S) {
    if (!w->colliders[c].s.live) return;
    w->pose_from[c] = pbd__collider_pose(&w->colliders[c], (float)s / (float)S);
    w->pose_to[c] = pbd__collider_pose(&w->colliders[c], (float)(s + 1) / (float)S);
}
static void pbd__collider_poses(pbd_world *w, int s, int S) {
    for (int c = 0; c < w->ncolliders; ++c) pbd__collider_poses_one(w, c, s, S);
}

/* How far particle i's contact test reaches (pbd__collide: its radius
   plus a margin of its radius and its motion) and the rounding guard. */
static inline PBD_HD void pbd__contact_reach(const pbd_world *w, int i, float *reach, float *tol) {
    float r = w->radius[i], margin = r + pbd__len(pbd__sub(pbd__p3(w->p[i]), pbd__p3(w->x[i])));
    *reach = r + margin;
    *tol = PBD__CONTACT_TOL * (r > PBD__CONTACT_TOL_R_MIN ? r : PBD__CONTACT_TOL_R_MIN);
}

/* The radius of the ball about its frame's origin that holds a sphere,
   capsule or box collider (pbd__ball_far); 0 for the other shapes. */
static PBD_HD float pbd__collider_ball(const pbd__collider *col) {
    return col->shape == PBD_COLLIDER_SPHERE    ? col->radius
           : col->shape == PBD_COLLIDER_CAPSULE ? col->half_height + col->radius
           : col->shape == PBD_COLLIDER_BOX
               ? sqrtf(col->half[0] * col->half[0] + col->half[1] * col->half[1] + col->half[2] * col->half[2]) +
                     col->radius
               : 0.0f;
}

/* Whether collider c cannot touch particle i this substep, so that
   pbd__collide, which would find nothing, is skipped: a plane by its
   distance (pbd__plane_far), a sphere, capsule or box by a ball about its
   centre (pbd__ball_far); a mesh has its own bounds in pbd__collide. */
static PBD_HD int pbd__collider_far(const pbd_world *w, int c, int i, float reach, float tol) {
    const pbd__collider *col = &w->colliders[c];
    if (!col->s.live) return 1; /* a removed collider's free slot */
    float R = pbd__collider_ball(col);
    if (col->shape != PBD_COLLIDER_PLANE && !(R > 0)) return 0;
    pbd__v3 x = pbd__p3(w->x[i]), p = pbd__p3(w->p[i]);
    if (col->shape == PBD_COLLIDER_PLANE) return pbd__plane_far(&w->pose_from[c], &w->pose_to[c], x, p, reach + tol);
    return pbd__ball_far(&w->pose_from[c], &w->pose_to[c], R, x, p, reach + tol);
}

/* Particle i's contact with collider c, if it has one (pbd__collide; the
   caller has tried pbd__collider_far; reach and tol from
   pbd__contact_reach), into its next slot. */
/* Which slot a new contact of particle i (plane through q, normal n) takes
   when its `per` slots are full: the slot whose plane the predicted
   position p violates least, if the new one's p violates more; else -1.
   Filling the slots in collider order and dropping the rest let a
   particle at a fifth collider pass through it: a tank's wall added after
   a floor of three planes and a box (an audit: water and grains through
   10 cm walls); the most violated constraints are the ones to keep. */
static inline PBD_HD int pbd__contact_evict(const pbd_world *w, int i, int per, pbd__v3 p, pbd__v3 q, pbd__v3 n) {
    int worst = -1;
    float most = pbd__dot(pbd__sub(p, q), n);
    for (int k = 0; k < per; ++k) {
        const pbd__contact *o = pbd__contact_slot(w, i, k);
        float d = pbd__dot(pbd__sub(p, o->q), o->n);
        if (d > most) {
            most = d;
            worst = k;
        }
    }
    return worst;
}

static PBD_HD void pbd__contact_with(pbd_world *w, int i, int c, float h, float reach, float tol, int per, int *found) {
    pbd__v3 x = pbd__p3(w->x[i]), p = pbd__p3(w->p[i]), q, n;
    if (!pbd__collide(w, &w->colliders[c], &w->pose_from[c], &w->pose_to[c], x, p, w->radius[i], reach, tol, &q, &n))
        return;
    int k = *found < per ? (*found)++ : pbd__contact_evict(w, i, per, p, q, n);
    if (k < 0) return;
    pbd__contact *ct = pbd__contact_slot(w, i, k);
    ct->particle = i;
    ct->collider = c;
    ct->n = n;
    ct->q = q;
    ct->anchor =
        pbd__to_world(w->pose_to[c].pos, w->pose_to[c].rot, pbd__to_local(w->pose_from[c].pos, w->pose_from[c].rot, x));
    ct->vcol = pbd__mul(pbd__sub(ct->anchor, x), 1.0f / h);
    ct->vn = pbd__dot(pbd__sub(pbd__p3(w->v[i]), ct->vcol), n);
    ct->lambda = 0;
}

#if PBD__W > 1
/* W points x relative to the origin of pose a. */
static inline pbd__vv pbd__voffset(const pbd__pose *a, pbd__vv x) {
    pbd__vv d;
    d.x = pbd__vsub(x.x, pbd__vset1(a->pos[0]));
    d.y = pbd__vsub(x.y, pbd__vset1(a->pos[1]));
    d.z = pbd__vsub(x.z, pbd__vset1(a->pos[2]));
    return d;
}
/* The ends of the W segments X -> P relative to the origins of poses a and b. */
static inline void pbd__vpose_offsets(const pbd__pose *a, const pbd__pose *b, const pbd__vp *X, const pbd__vp *P,
                                      pbd__vv *ra, pbd__vv *rb) {
    *ra = pbd__voffset(a, pbd__vvpos(*X));
    *rb = pbd__voffset(b, pbd__vvpos(*P));
}

/* pbd__plane_far of plane collider c for the W particles from i0 (the same
   operations lane by lane, so the same decisions): bit l for i0 + l. Most
   particles of a fluid tank are far from each wall, and this test is
   most of what they cost. */
static unsigned pbd__vplane_far(const pbd_world *w, int c, const pbd__vp *X, const pbd__vp *P, pbd__vf limit) {
    const pbd__pose *a = &w->pose_from[c], *b = &w->pose_to[c];
    pbd__vf e = pbd__vset1(PBD__FAR_GUARD), ga, gb, da, db;
    pbd__vv ra, rb;
    pbd__vpose_offsets(a, b, X, P, &ra, &rb);
    ga = pbd__vmul(e, pbd__vadd(pbd__vadd(pbd__vabs(ra.x), pbd__vabs(ra.y)), pbd__vabs(ra.z)));
    gb = pbd__vmul(e, pbd__vadd(pbd__vadd(pbd__vabs(rb.x), pbd__vabs(rb.y)), pbd__vabs(rb.z)));
    pbd__vv ua, ub;
    ua.x = pbd__vset1(a->up[0]);
    ua.y = pbd__vset1(a->up[1]);
    ua.z = pbd__vset1(a->up[2]);
    ub.x = pbd__vset1(b->up[0]);
    ub.y = pbd__vset1(b->up[1]);
    ub.z = pbd__vset1(b->up[2]);
    da = pbd__vvdot(ua, ra);
    db = pbd__vvdot(ub, rb);
    return pbd__vbits(pbd__vand_m(pbd__vlt(pbd__vadd(limit, ga), da), pbd__vlt(pbd__vadd(limit, gb), db)));
}

/* pbd__ball_far of collider c (ball radius R > 0) for the W particles
   from i0, the same operations lane by lane: bit l for i0 + l. Hair on a
   head tests every particle against the head's ball each substep. */
static unsigned pbd__vball_far(const pbd_world *w, int c, float R, const pbd__vp *X, const pbd__vp *P, pbd__vf limit) {
    const pbd__pose *a = &w->pose_from[c], *b = &w->pose_to[c];
    pbd__vv ra, rb;
    pbd__vpose_offsets(a, b, X, P, &ra, &rb);
    pbd__vv d = pbd__vvsub(rb, ra);
    pbd__vf A = pbd__vsqrt(pbd__vvdot(ra, ra)), B = pbd__vsqrt(pbd__vvdot(rb, rb)), vR = pbd__vset1(R);
    pbd__vf L = pbd__vadd(pbd__vsqrt(pbd__vvdot(d, d)), pbd__vmul(pbd__vset1(pbd__ball_spin(a, b)), A));
    pbd__vf lhs =
        pbd__vsub(pbd__vsel(pbd__vlt(A, B), B, A), pbd__vmul(pbd__vset1(0.5f), L)); /* (A < B ? A : B) - L / 2 */
    pbd__vf rhs = pbd__vadd(pbd__vadd(vR, limit),
                            pbd__vmul(pbd__vset1(PBD__FAR_GUARD), pbd__vadd(pbd__vadd(pbd__vadd(A, B), L), vR)));
    return pbd__vbits(pbd__vlt(rhs, lhs));
}

/* pbd__qrot of W vectors (the same operations in the same order). */
static inline pbd__vv pbd__vqrot(const float *q, pbd__vv v) {
    pbd__vv u;
    u.x = pbd__vset1(q[0]);
    u.y = pbd__vset1(q[1]);
    u.z = pbd__vset1(q[2]);
    pbd__vv t = pbd__vvmul(pbd__vvcross(u, v), pbd__vset1(2.0f));
    return pbd__vvadd(pbd__vvadd(v, pbd__vvmul(t, pbd__vset1(q[3]))), pbd__vvcross(u, t));
}
/* pbd__to_local of W points: the inverse rotation of x - pos. */
static inline pbd__vv pbd__vto_local(const pbd__pose *a, pbd__vv x) {
    float c[4] = {-a->rot[0], -a->rot[1], -a->rot[2], a->rot[3]};
    return pbd__vqrot(c, pbd__voffset(a, x));
}
static inline pbd__vv pbd__vto_world(const pbd__pose *b, pbd__vv y) {
    pbd__vv r = pbd__vqrot(b->rot, y);
    r.x = pbd__vadd(r.x, pbd__vset1(b->pos[0]));
    r.y = pbd__vadd(r.y, pbd__vset1(b->pos[1]));
    r.z = pbd__vadd(r.z, pbd__vset1(b->pos[2]));
    return r;
}

/* The lanes of W segments xl -> pl (in a sphere's frame, radius rad)
   that stay farther than limit from the sphere: their closest point to
   the centre is, by more than a guard of 1e-5 of the lengths (far above
   the rounding of either computation), so pbd__collide's trace, whose
   every point is on the segment, finds nothing. Exact for a sphere where
   pbd__ball_far allows for the bend of the segment in a turning frame;
   the particles that sweep past a turning head (many steps of the trace
   each) are most of what it skips. */
static inline unsigned pbd__vsphere_far(pbd__vv xl, pbd__vv pl, pbd__vf rad, pbd__vf limit) {
    pbd__vv dir = pbd__vvsub(pl, xl);
    pbd__vf zero = pbd__vset1(0.0f), one = pbd__vset1(1.0f), dd = pbd__vvdot(dir, dir);
    pbd__vm moves = pbd__vlt(pbd__vset1(PBD__DENOM_MIN), dd);
    pbd__vf t = pbd__vdiv(pbd__vmul(pbd__vvdot(xl, dir), pbd__vset1(-1.0f)), pbd__vsel(moves, one, dd));
    t = pbd__vsel(moves, zero, pbd__vmin(pbd__vmax(t, zero), one));
    pbd__vv c = pbd__vvadd(xl, pbd__vvmul(dir, t));
    pbd__vf A = pbd__vsqrt(pbd__vvdot(xl, xl)), B = pbd__vsqrt(pbd__vvdot(pl, pl)), D = pbd__vsqrt(pbd__vvdot(c, c));
    pbd__vf guard = pbd__vmul(pbd__vset1(PBD__FAR_GUARD), pbd__vadd(pbd__vadd(A, B), rad));
    return pbd__vbits(pbd__vlt(pbd__vadd(pbd__vadd(rad, limit), guard), D));
}

/* pbd__sdf of a plane, sphere, capsule or box for W points y (collider
   frame): the same operations and choices lane by lane. */
static pbd__vf pbd__vsdf(const pbd__collider *col, pbd__vv y, pbd__vv *n) {
    pbd__vf zero = pbd__vset1(0.0f), one = pbd__vset1(1.0f);
    if (col->shape == PBD_COLLIDER_PLANE) {
        n->x = zero;
        n->y = one;
        n->z = zero;
        return y.y;
    }
    if (col->shape == PBD_COLLIDER_BOX) {
        pbd__vf q[3], sg[3], yk[3] = {y.x, y.y, y.z};
        pbd__vm pos[3];
        for (int k = 0; k < 3; ++k) {
            q[k] = pbd__vsub(pbd__vabs(yk[k]), pbd__vset1(col->half[k]));
            sg[k] = pbd__vsel(pbd__vlt(yk[k], zero), one, pbd__vset1(-1.0f));
            pos[k] = pbd__vlt(zero, q[k]);
        }
        /* outside: from the nearest point of the surface */
        pbd__vv o;
        o.x = pbd__vsel(pos[0], zero, pbd__vmul(q[0], sg[0]));
        o.y = pbd__vsel(pos[1], zero, pbd__vmul(q[1], sg[1]));
        o.z = pbd__vsel(pos[2], zero, pbd__vmul(q[2], sg[2]));
        pbd__vm out = pbd__vor_m(pbd__vor_m(pos[0], pos[1]), pos[2]);
        pbd__vf l = pbd__vsqrt(pbd__vvdot(o, o));
        pbd__vv no = pbd__vvmul(o, pbd__vdiv(one, pbd__vsel(out, one, l)));
        /* inside: the face of the largest q, ties broken as pbd__sdf does */
        pbd__vm g01 = pbd__vlt(q[1], q[0]), g02 = pbd__vlt(q[2], q[0]), g12 = pbd__vlt(q[2], q[1]);
        pbd__vm m0 = pbd__vand_m(g01, g02), m1 = pbd__vandnot_m(g12, g01); /* face 0, face 1, else face 2 */
        n->x = pbd__vsel(out, pbd__vsel(m0, zero, sg[0]), no.x);
        n->y = pbd__vsel(out, pbd__vsel(m1, zero, sg[1]), no.y);
        n->z = pbd__vsel(out, pbd__vsel(pbd__vor_m(m0, m1), sg[2], zero), no.z);
        return pbd__vsub(pbd__vsel(out, pbd__vsel(m0, pbd__vsel(m1, q[2], q[1]), q[0]), l), pbd__vset1(col->radius));
    }
    pbd__vv dl = y;
    int capsule = col->shape == PBD_COLLIDER_CAPSULE;
    if (capsule) { /* from the nearest point of the axis, pbd__clampf's comparisons */
        pbd__vf lo = pbd__vset1(-col->half_height), hi = pbd__vset1(col->half_height);
        pbd__vf cy = pbd__vsel(pbd__vlt(y.y, lo), pbd__vsel(pbd__vlt(hi, y.y), y.y, hi), lo);
        dl.y = pbd__vsub(y.y, cy);
    }
    pbd__vf l = pbd__vsqrt(pbd__vvdot(dl, dl));
    pbd__vm big = pbd__vlt(pbd__vset1(PBD__DIR_MIN), l); /* the normal on the centre (axis): (0, 1, 0), (1, 0, 0) */
    pbd__vf il = pbd__vdiv(one, pbd__vsel(big, one, l));
    n->x = pbd__vsel(big, capsule ? one : zero, pbd__vmul(dl.x, il));
    n->y = pbd__vsel(big, capsule ? zero : one, pbd__vmul(dl.y, il));
    n->z = pbd__vsel(big, zero, pbd__vmul(dl.z, il));
    return pbd__vsub(l, pbd__vset1(col->radius));
}

/* The contacts with plane, sphere, capsule or box collider c of the lanes `want`
   of the W particles from i0 (positions X, radii r, reach and tol as
   from pbd__contact_reach) that start within reach of the surface: the
   first branch of pbd__collide (the plane through the surface point
   nearest x) and the slot that pbd__contact_with fills, W at a time in
   the same operations, and for a sphere the lanes that cannot touch it
   (pbd__vsphere_far). Returns the lanes it handled; the others (a
   particle that starts farther and may sweep into the shape) take the
   scalar path. Hair lying on a head is most of its particles in contact
   every substep. */
static unsigned pbd__vshape_contacts(pbd_world *w, int c, int i0, const pbd__vp *X, const pbd__vp *P, pbd__vf r,
                                     pbd__vf reach, pbd__vf tol, float h, unsigned want, int *found) {
    if (!want) return 0; /* every lane far (most of a tank, for each wall) or full */
    const pbd__pose *a = &w->pose_from[c], *b = &w->pose_to[c];
    const pbd__collider *col = &w->colliders[c];
    pbd__vv x = pbd__vvpos(*X), xl = pbd__vto_local(a, x), nl;
    pbd__vf dx = pbd__vsdf(col, xl, &nl), d0 = pbd__vsub(dx, reach);
    unsigned near = want & pbd__vbits(pbd__vle(d0, tol)), miss = 0;
    if (col->shape == PBD_COLLIDER_SPHERE)
        miss = want & ~near &
               pbd__vsphere_far(xl, pbd__vto_local(b, pbd__vvpos(*P)), pbd__vset1(col->radius), pbd__vadd(reach, tol));
    if (!near) return miss;
    pbd__vv hit = pbd__vvsub(xl, pbd__vvmul(nl, pbd__vsub(dx, r))); /* onto the surface inflated by r */
    pbd__vv n = pbd__vqrot(b->rot, nl), q = pbd__vto_world(b, hit), anchor = pbd__vto_world(b, xl);
    pbd__vv vcol = pbd__vvmul(pbd__vvsub(anchor, x), pbd__vset1(1.0f / h));
    int ids[PBD__W];
    for (int k = 0; k < PBD__W; ++k) ids[k] = i0 + k;
    pbd__vp V = pbd__vgather(w->v, ids);
    pbd__vf vn = pbd__vvdot(pbd__vvsub(pbd__vvpos(V), vcol), n);
    float f[13][PBD__W];
    pbd__vv out[4] = {n, q, anchor, vcol};
    for (int k = 0; k < 4; ++k) {
        pbd__vstore(f[3 * k], out[k].x);
        pbd__vstore(f[3 * k + 1], out[k].y);
        pbd__vstore(f[3 * k + 2], out[k].z);
    }
    pbd__vstore(f[12], vn);
    for (unsigned m = near; m; m &= m - 1) {
        int k = pbd__lowest_bit(m);
        pbd__contact *ct = pbd__contact_slot(w, i0 + k, found[k]++);
        ct->particle = i0 + k;
        ct->collider = c;
        ct->n = pbd__v(f[0][k], f[1][k], f[2][k]);
        ct->q = pbd__v(f[3][k], f[4][k], f[5][k]);
        ct->anchor = pbd__v(f[6][k], f[7][k], f[8][k]);
        ct->vcol = pbd__v(f[9][k], f[10][k], f[11][k]);
        ct->vn = f[12][k];
        ct->lambda = 0;
    }
    return near | miss;
}

/* The contacts of the W particles from i0: the plane and ball tests, and
   the contacts of the analytic shapes that start near, W at a time, the rest per
   particle; each particle's slots in collider order, as in the scalar
   pass. */
static void pbd__vgenerate_contacts(pbd_world *w, int i0, int per, float h) {
    int ids[PBD__W], found[PBD__W];
    for (int l = 0; l < PBD__W; ++l) {
        ids[l] = i0 + l;
        found[l] = 0;
    }
    pbd__vp X = pbd__vgather(w->x, ids), P = pbd__vgather(w->p, ids);
    pbd__vf r = pbd__vload(w->radius + i0),
            d2 = pbd__vvdot(pbd__vvsub(pbd__vvpos(P), pbd__vvpos(X)), pbd__vvsub(pbd__vvpos(P), pbd__vvpos(X)));
    pbd__vf margin = pbd__vadd(r, pbd__vsqrt(d2)), rmin = pbd__vset1(PBD__CONTACT_TOL_R_MIN);
    pbd__vf tol =
        pbd__vmul(pbd__vset1(PBD__CONTACT_TOL), pbd__vsel(pbd__vlt(rmin, r), rmin, r)); /* r > rmin ? r : rmin */
    pbd__vf limit = pbd__vadd(pbd__vadd(r, margin), tol);
    unsigned pinned = pbd__vbits(pbd__vle(X.w, pbd__vset1(0.0f))); /* inverse mass 0: not pushed */
    for (int c = 0; c < w->ncolliders; ++c) {
        if (!w->colliders[c].s.live) continue;
        float R = pbd__collider_ball(&w->colliders[c]);
        int plane = w->colliders[c].shape == PBD_COLLIDER_PLANE, tested = plane || R > 0; /* as pbd__collider_far */
        unsigned skip = pinned | (plane   ? pbd__vplane_far(w, c, &X, &P, limit)
                                  : R > 0 ? pbd__vball_far(w, c, R, &X, &P, limit)
                                          : 0u);
        if (tested) { /* a plane, sphere, capsule or box */
            unsigned room = 0;
            for (int l = 0; l < PBD__W; ++l) room |= (unsigned)(found[l] < per) << l;
            skip |= pbd__vshape_contacts(w, c, i0, &X, &P, r, pbd__vadd(r, margin), tol, h, ~skip & room, found);
        }
        for (int l = 0; l < PBD__W; ++l) { /* the rest, and the full lanes (pbd__contact_evict) */
            if (skip >> l & 1u) continue;
            float reach, tol;
            pbd__contact_reach(w, i0 + l, &reach, &tol);
            if (tested || !pbd__collider_far(w, c, i0 + l, reach, tol))
                pbd__contact_with(w, i0 + l, c, h, reach, tol, per, &found[l]);
        }
    }
    for (int l = 0; l < PBD__W; ++l) w->ncontact[i0 + l] = (unsigned char)found[l];
}
#endif

/* Particle i's contacts of this substep, at most `per`: in collider order,
   then the most violated ones (pbd__contact_evict). */
static inline PBD_HD void pbd__contacts_of(pbd_world *w, int i, int per, float h) {
    int found = 0;
    w->ncontact[i] = 0;
    if (w->x[i].w == 0 || per == 0) return; /* pinned and kinematic particles are not pushed */
    float reach, tol;
    pbd__contact_reach(w, i, &reach, &tol);
    for (int c = 0; c < w->ncolliders; ++c)
        if (!pbd__collider_far(w, c, i, reach, tol)) pbd__contact_with(w, i, c, h, reach, tol, per, &found);
    w->ncontact[i] = (unsigned char)found;
}

static PBD_HD void pbd__project_contact(pbd_world *w, pbd__contact *ct);
static PBD_HD void pbd__contact_velocity(pbd_world *w, const pbd__contact *ct, float h, float threshold);

/* --- what contacts turn ------------------------------------------------------
   An object that only colliders touch has its angular momentum restored
   too (see "angular momentum" in "// ==== step"): to what it had after
   the prediction plus what its contacts gave it, so that the internal
   constraints' O(h) leak is removed there as well. Without that, a balloon
   resting on the ground turned the leak of its pressure fighting its skin
   into rolling, and rolled away faster and faster. The lever arm is the
   particle's position at the start of the substep, x: the angular
   momentum the restore measures, sum m x' x v' with x' = x + h v', is
   sum m x x v', linear in the velocity with that arm. So a contact that
   moves particle i from a to b gives it m x x (b - a) / h about the
   origin, and the velocity pass's change dv (made at x') m x' x dv: an
   object of unconstrained particles then moves exactly as the same
   particles outside any object do. (Taking a as the arm added
   m (a - x) x (b - a) / h, about m v x (b - a): a torque from nowhere,
   which turned such particles bouncing on a plane up to 40 cm off their
   paths in 2 s; test solver_contacts_turn_an_object_as_its_particles.)
   Particle i's sum is kept in position units (times h / m), in double. */
static inline PBD_HD void pbd__contact_turn_clear(pbd_world *w, int i) {
    double *t = w->contact_turn + 3 * (size_t)i;
    t[0] = t[1] = t[2] = 0;
}
static inline PBD_HD void pbd__contact_turn_add(pbd_world *w, int i, const double *a, const double *b) {
    double *t = w->contact_turn + 3 * (size_t)i;
    t[0] += a[1] * b[2] - a[2] * b[1];
    t[1] += a[2] * b[0] - a[0] * b[2];
    t[2] += a[0] * b[1] - a[1] * b[0];
}
/* particle i moved by its contacts from `before` to w->p[i] */
static inline PBD_HD void pbd__contact_turn_move(pbd_world *w, int i, pbd__v3 before) {
    double x[3] = {w->x[i].x, w->x[i].y, w->x[i].z};
    double d[3] = {(double)w->p[i].x - before.x, (double)w->p[i].y - before.y, (double)w->p[i].z - before.z};
    pbd__contact_turn_add(w, i, x, d);
}
/* particle i's velocity changed from v0 to w->v[i] at w->x[i] in the velocity pass */
static inline PBD_HD void pbd__contact_turn_push(pbd_world *w, int i, pbd__v3 v0, float h) {
    double a[3] = {w->x[i].x, w->x[i].y, w->x[i].z};
    double b[3] = {(double)h * ((double)w->v[i].x - v0.x), (double)h * ((double)w->v[i].y - v0.y),
                   (double)h * ((double)w->v[i].z - v0.z)};
    pbd__contact_turn_add(w, i, a, b);
}
/* Particle i's contacts projected, in slot order, and what they turned. */
static inline PBD_HD void pbd__project_contacts_of(pbd_world *w, int i) {
    pbd__v3 before = pbd__p3(w->p[i]);
    for (int k = 0; k < w->ncontact[i]; ++k) pbd__project_contact(w, pbd__contact_slot(w, i, k));
    pbd__contact_turn_move(w, i, before);
}

static void pbd__generate_contacts(pbd_world *w, float h) {
    int per = pbd__contacts_per_particle(w);
    int nb = (w->n + PBD__W - 1) / PBD__W;
    PBD__PRAGMA(omp for schedule(static))
    for (int b = 0; b < nb; ++b) {
        int i0 = b * PBD__W, i1 = i0 + PBD__W < w->n ? i0 + PBD__W : w->n;
#if PBD__W > 1
        if (w->simd && per > 0 && i1 - i0 == PBD__W) {
            pbd__vgenerate_contacts(w, i0, per, h);
            continue;
        }
#endif
        for (int i = i0; i < i1; ++i) pbd__contacts_of(w, i, per, h);
    }
    PBD__PRAGMA(omp single) {
        int m = 0;
        for (int i = 0; i < w->n; ++i)
            if (w->ncontact[i]) {
                w->contact_ids[m++] = i;
                pbd__contact_turn_clear(w, i);
            }
        w->ncontact_ids = m;
    }
}

/* Contact planes C = (p - q) . n >= 0, with static friction at the position
   level: a particle whose tangential motion relative to the collider is
   within the friction cone of the accumulated normal correction sticks
   (no drift, unlike a velocity-only static friction). Dynamic friction and
   restitution act in the velocity pass. */
static PBD_HD void pbd__project_contact(pbd_world *w, pbd__contact *ct) {
    pbd__p4 *P = &w->p[ct->particle];
    pbd__v3 pos = pbd__p3(*P);
    float C = pbd__dot(pbd__sub(pos, ct->q), ct->n);
    if (C < 0) {
        pos = pbd__sub(pos, pbd__mul(ct->n, C));
        ct->lambda -= C;
    }
    if (ct->lambda > 0) {
        const pbd__collider *col = &w->colliders[ct->collider];
        pbd__v3 rel = pbd__sub(pos, ct->anchor);
        pbd__v3 rt = pbd__sub(rel, pbd__mul(ct->n, pbd__dot(rel, ct->n)));
        if (pbd__len(rt) < col->mu_s * ct->lambda) pos = pbd__sub(pos, rt);
    }
    P->x = pos.x;
    P->y = pos.y;
    P->z = pos.z;
}

#if PBD__W > 1
/* The lane-wise twin of pbd__project_contact for the k-th contact of the
   W particles ids[0 .. W) (lanes without a k-th contact keep their bits). */
static void pbd__vproject_contacts(pbd_world *w, const int *ids, int k) {
    float f[10][PBD__W];
    int any = 0;
    for (int l = 0; l < PBD__W; ++l) {
        int i = ids[l];
        const pbd__contact *ct = pbd__contact_slot(w, i, k);
        int on = k < w->ncontact[i];
        any |= on;
        f[0][l] = on ? ct->n.x : 0;
        f[1][l] = on ? ct->n.y : 0;
        f[2][l] = on ? ct->n.z : 0;
        f[3][l] = on ? ct->q.x : 0;
        f[4][l] = on ? ct->q.y : 0;
        f[5][l] = on ? ct->q.z : 0;
        f[6][l] = on ? ct->anchor.x : 0;
        f[7][l] = on ? ct->anchor.y : 0;
        f[8][l] = on ? ct->anchor.z : 0;
        f[9][l] = on ? ct->lambda : 0;
    }
    if (!any) return;
    float onf[PBD__W], mus[PBD__W];
    for (int l = 0; l < PBD__W; ++l) {
        int on = k < w->ncontact[ids[l]];
        onf[l] = on ? 1.0f : 0.0f;
        mus[l] = on ? w->colliders[pbd__contact_slot(w, ids[l], k)->collider].mu_s : 0.0f;
    }
    pbd__vf zero = pbd__vset1(0.0f);
    pbd__vm on = pbd__vlt(zero, pbd__vload(onf));
    pbd__vp P = pbd__vgather(w->p, ids);
    pbd__vv n, q, anchor, pos = pbd__vvpos(P);
    n.x = pbd__vload(f[0]);
    n.y = pbd__vload(f[1]);
    n.z = pbd__vload(f[2]);
    q.x = pbd__vload(f[3]);
    q.y = pbd__vload(f[4]);
    q.z = pbd__vload(f[5]);
    anchor.x = pbd__vload(f[6]);
    anchor.y = pbd__vload(f[7]);
    anchor.z = pbd__vload(f[8]);
    pbd__vf lam = pbd__vload(f[9]);
    pbd__vf C = pbd__vvdot(pbd__vvsub(pos, q), n);
    pbd__vm push = pbd__vand_m(on, pbd__vlt(C, zero));
    pbd__vv pushed = pbd__vvsub(pos, pbd__vvmul(n, C));
    pos.x = pbd__vsel(push, pos.x, pushed.x);
    pos.y = pbd__vsel(push, pos.y, pushed.y);
    pos.z = pbd__vsel(push, pos.z, pushed.z);
    lam = pbd__vsel(push, lam, pbd__vsub(lam, C));
    pbd__vv rel = pbd__vvsub(pos, anchor);
    pbd__vv rt = pbd__vvsub(rel, pbd__vvmul(n, pbd__vvdot(rel, n)));
    pbd__vm stick = pbd__vand_m(pbd__vand_m(on, pbd__vlt(zero, lam)),
                                pbd__vlt(pbd__vsqrt(pbd__vvdot(rt, rt)), pbd__vmul(pbd__vload(mus), lam)));
    pbd__vv stuck = pbd__vvsub(pos, rt);
    /* lanes without this contact: push and stick are off, pos is unchanged */
    P.x = pbd__vsel(stick, pos.x, stuck.x);
    P.y = pbd__vsel(stick, pos.y, stuck.y);
    P.z = pbd__vsel(stick, pos.z, stuck.z);
    pbd__vscatter(w->p, ids, P);
    pbd__vstore(f[9], lam);
    for (int l = 0; l < PBD__W; ++l)
        if (k < w->ncontact[ids[l]]) pbd__contact_slot(w, ids[l], k)->lambda = f[9][l];
}
#endif

/* The first contact slot of the particles contact_ids[j0 .. j1) and the
   particles, ahead of their use (a slot is 64 bytes, two lines unless
   aligned; a fluid tank's lie in tens of megabytes). */
static void pbd__prefetch_contacts(const pbd_world *w, int j0, int j1) {
    for (int j = j0; j < j1 && j < w->ncontact_ids; ++j) {
        int i = w->contact_ids[j];
        const char *c = (const char *)pbd__contact_slot(w, i, 0);
        PBD__PREFETCH(c);
        PBD__PREFETCH(c + sizeof(pbd__contact) - 1);
        PBD__PREFETCH(&w->p[i]);
    }
}

static void pbd__project_contacts(pbd_world *w) {
    int per = pbd__contacts_per_particle(w);
    if (per == 0) return;
    const int *ids = w->contact_ids;
    int n = w->ncontact_ids, nb = (n + PBD__W - 1) / PBD__W;
    PBD__PRAGMA(omp for schedule(static))
    for (int b = 0; b < nb; ++b) {
        int j0 = b * PBD__W, j1 = j0 + PBD__W < n ? j0 + PBD__W : n;
        pbd__prefetch_contacts(w, j1, j1 + PBD__W);
#if PBD__W > 1
        if (w->simd && j1 - j0 == PBD__W) {
            int most = 0;
            pbd__v3 before[PBD__W];
            for (int j = j0; j < j1; ++j) {
                most = w->ncontact[ids[j]] > most ? w->ncontact[ids[j]] : most;
                before[j - j0] = pbd__p3(w->p[ids[j]]);
            }
            for (int k = 0; k < most; ++k) pbd__vproject_contacts(w, ids + j0, k);
            for (int j = j0; j < j1; ++j) pbd__contact_turn_move(w, ids[j], before[j - j0]);
            continue;
        }
#endif
        for (int j = j0; j < j1; ++j) pbd__project_contacts_of(w, ids[j]);
    }
}

/* Velocity pass for contacts: dynamic friction removes up to mu_d times the
   normal velocity change lambda / h from the sliding velocity (Macklin et
   al. 2019 / Mueller et al. 2020 style); restitution reflects the normal
   velocity the particle had before the substep, above a small threshold so
   that resting contacts do not jitter. */
static PBD_HD void pbd__contact_velocity(pbd_world *w, const pbd__contact *ct, float h, float threshold) {
    if (!(ct->lambda > 0)) return;
    const pbd__collider *col = &w->colliders[ct->collider];
    pbd__p4 *V = &w->v[ct->particle];
    pbd__v3 v = pbd__p3(*V);
    pbd__v3 vr = pbd__sub(v, ct->vcol);
    float vn = pbd__dot(vr, ct->n);
    pbd__v3 vt = pbd__sub(vr, pbd__mul(ct->n, vn));
    float lt = pbd__len(vt);
    if (lt > 0 && col->mu_d > 0) {
        float dv = col->mu_d * ct->lambda / h;
        v = pbd__sub(v, pbd__mul(vt, (dv < lt ? dv : lt) / lt));
    }
    /* The contact pushed this particle in this substep, so its normal
       velocity becomes -e times the approach velocity of an impact, and 0
       for a resting or slow contact. PBD's v = (p - x) / h would otherwise
       keep the push-out itself as a separating velocity: a cloth whose
       inextensible edges fight a curved collider every substep would be
       thrown off a sphere by it. */
    float target = ct->vn < -threshold ? -col->restitution * ct->vn : 0.0f;
    v = pbd__add(v, pbd__mul(ct->n, target - vn));
    V->x = v.x;
    V->y = v.y;
    V->z = v.z;
}

/* The normal speed below which a contact does not bounce (a resting one). */
static float pbd__restitution_threshold(const pbd_world *w, float h) {
    float g = sqrtf(w->gravity[0] * w->gravity[0] + w->gravity[1] * w->gravity[1] + w->gravity[2] * w->gravity[2]);
    return 2.0f * g * h;
}

/* Particle i's contacts' velocity pass, in slot order, and what it turned. */
static inline PBD_HD void pbd__contact_velocities_of(pbd_world *w, int i, float h, float threshold) {
    pbd__v3 v0 = pbd__p3(w->v[i]);
    for (int k = 0; k < w->ncontact[i]; ++k) pbd__contact_velocity(w, pbd__contact_slot(w, i, k), h, threshold);
    pbd__contact_turn_push(w, i, v0, h);
}

static void pbd__contact_velocities(pbd_world *w, float h) {
    int per = pbd__contacts_per_particle(w);
    if (per == 0) return;
    float threshold = pbd__restitution_threshold(w, h);
    PBD__PRAGMA(omp for schedule(static))
    for (int j = 0; j < w->ncontact_ids; ++j) {
        int i = w->contact_ids[j];
        if (j % PBD__SLOT_AHEAD == 0) pbd__prefetch_contacts(w, j + PBD__SLOT_AHEAD, j + 2 * PBD__SLOT_AHEAD);
        pbd__contact_velocities_of(w, i, h, threshold);
    }
}

// ==== hash grid =============================================================
/* Internal API, shared by particle contact, fluids and cloth self-collision
   (survey 3.8; Macklin and Mueller 2013, section 5):
     pbd__grid_reserve(w, g, points)  capacity for `points` points; call it
                                      where things are added (never in a step)
     pbd__grid_free(w, g)
     pbd__grid_build(g, base, stride, ids, n, cell)
         buckets the n points (point k at base + stride * (ids ? ids[k] : k),
         3 floats used) in cells of edge `cell` by a counting sort: the keys
         in parallel (orphaned `omp for`), the sort in `omp single`. Call it
         from every thread of a parallel region (not inside `omp single`:
         worksharing cannot nest), or serially. Stable: each bucket holds
         its points in increasing k, whatever the threads. The world's
         particle phase builds it from the predictions every substep
         (pbd__pp_build: base &w->p[0].x, stride 4, ids pp.ids); another
         user (self-collision) keeps its own pbd__grid.
     pbd__grid_buckets(g, lo, hi, out, max)
         the distinct buckets of the cells that overlap the box [lo, hi]
         (z, then y, then x order; e.g. a swept bound), or -1 when there are
         more than max: then walk every bucket 0..mask.
     pbd__grid_query(g, q, r, out, max)
         the points k within r of q (|p - q| <= r, positions of the build),
         bucket by bucket then by k; returns how many, writes at most max.
   Walk a bucket b as: for (s = start[b]; s < start[b + 1]; ++s) the point
   sorted[s], whose position (as built) is pos[4 s .. 4 s + 2].
   A bucket can also hold points of far cells that hash to it, so callers
   test each candidate's distance (or their own exact test). */

static inline PBD_HD int pbd__grid_coord(const pbd__grid *g, float x) {
    /* far or huge points share the edge cells, NaN the lowest one */
    return pbd__cell_index(x * g->inv_cell, -1000000000, 1000000000);
}
static inline PBD_HD unsigned pbd__spread_bits10(unsigned v) { /* bit i of v to bit 3 i */
    v &= 0x3ffu;
    v = (v | (v << 16)) & 0x030000ffu;
    v = (v | (v << 8)) & 0x0300f00fu;
    v = (v | (v << 4)) & 0x030c30c3u;
    v = (v | (v << 2)) & 0x09249249u;
    return v;
}
/* The bucket of cell (ix, iy, iz): the Morton code of the cell within its
   block of 2^axis_bits cells a side (axis_bits = log2(buckets) / 3, so a
   block fills the table), plus a hash of the block. Neighbouring cells
   get nearby buckets, so the buckets a query walks, and the points the
   counting sort lays out bucket by bucket, lie together in memory (with a
   plain hash every bucket of a query would be a cache miss); cells of
   different blocks meet in a bucket at random, as with a hash. */
static inline PBD_HD int pbd__grid_hash(const pbd__grid *g, int ix, int iy, int iz) {
    int b = g->axis_bits;
    unsigned m = pbd__spread_bits10((unsigned)ix) | (pbd__spread_bits10((unsigned)iy) << 1) |
                 (pbd__spread_bits10((unsigned)iz) << 2);
    unsigned h =
        ((unsigned)(ix >> b) * 73856093u) ^ ((unsigned)(iy >> b) * 19349663u) ^ ((unsigned)(iz >> b) * 83492791u);
    return (int)((m + h) & (unsigned)g->mask);
}
static inline PBD_HD const float *pbd__grid_point(const float *base, int stride, const int *ids, int k) {
    return base + (size_t)stride * (size_t)(ids ? ids[k] : k);
}

static void pbd__grid_free(pbd_world *w, pbd__grid *g) {
    pbd__free(w, g->start);
    pbd__free(w, g->sorted);
    pbd__free(w, g->key);
    pbd__free(w, g->pos);
    memset(g, 0, sizeof *g);
}

/* Buckets: a power of two >= 2 * points (few collisions). On failure the
   grid is unchanged. */
static pbd_result pbd__grid_reserve(pbd_world *w, pbd__grid *g, int points) {
    if (points <= g->cap) return PBD_OK;
    long nb = 64;
    while (nb < 2L * points) nb *= 2;
    if (nb > INT_MAX / 2) return PBD_ERROR_OVERFLOW;
    int *start = (int *)pbd__alloc_n(w, (size_t)nb + 1, sizeof(int));
    int *sorted = (int *)pbd__alloc_n(w, (size_t)points, sizeof(int));
    int *key = (int *)pbd__alloc_n(w, (size_t)points, sizeof(int));
    float *pos = (float *)pbd__alloc_n(w, (size_t)points * 4, sizeof(float));
    if (!start || !sorted || !key || !pos) {
        pbd__free(w, start);
        pbd__free(w, sorted);
        pbd__free(w, key);
        pbd__free(w, pos);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    pbd__grid_free(w, g);
    g->start = start;
    g->sorted = sorted;
    g->key = key;
    g->pos = pos;
    g->cap = points;
    g->bucket_cap = (int)nb + 1;
    g->mask = (int)nb - 1;
    for (g->axis_bits = 0; (8L << (3 * g->axis_bits)) <= nb && g->axis_bits < 10;) g->axis_bits++;
    memset(start, 0, sizeof(int) * ((size_t)nb + 1));
    return PBD_OK;
}

/* The cell and point count of a build (the GPU's build too). */
static PBD_HD void pbd__grid_set_cell(pbd__grid *g, float cell, int n) {
    if (cell < PBD__DENOM_MIN) cell = PBD__DENOM_MIN; /* 1 / cell stays finite */
    g->cell = cell;
    g->inv_cell = 1.0f / cell;
    g->count = n;
}

static void pbd__grid_build(pbd__grid *g, const float *base, int stride, const int *ids, int n, float cell) {
    PBD_ASSERT(n <= g->cap && cell > 0);
    PBD__PRAGMA(omp single)
    pbd__grid_set_cell(g, cell, n);
    PBD__PRAGMA(omp for schedule(static))
    for (int k = 0; k < n; ++k) {
        const float *p = pbd__grid_point(base, stride, ids, k);
        g->key[k] = pbd__grid_hash(g, pbd__grid_coord(g, p[0]), pbd__grid_coord(g, p[1]), pbd__grid_coord(g, p[2]));
    }
    PBD__PRAGMA(omp single) {
        int nb = g->mask + 1;
        memset(g->start, 0, sizeof(int) * ((size_t)nb + 1));
        for (int k = 0; k < n; ++k) g->start[g->key[k]]++;
        int sum = 0; /* exclusive prefix: start[b] = first slot of b */
        for (int b = 0; b < nb; ++b) {
            int c = g->start[b];
            g->start[b] = sum;
            sum += c;
        }
        for (int k = 0; k < n; ++k) g->sorted[g->start[g->key[k]]++] = k; /* start[b] ends at b's end */
        for (int b = nb; b > 0; --b) g->start[b] = g->start[b - 1];
        g->start[0] = 0;
    }
    PBD__PRAGMA(omp for schedule(static))
    for (int s = 0; s < n; ++s) {
        const float *p = pbd__grid_point(base, stride, ids, g->sorted[s]);
        g->pos[4 * s] = p[0];
        g->pos[4 * s + 1] = p[1];
        g->pos[4 * s + 2] = p[2];
        g->pos[4 * s + 3] = 0;
    }
}

/* Sorts a[0 .. n) in increasing order (n <= 64: pbd__grid_buckets). */
static PBD_HD void pbd__sort_small(int *a, int n) {
    for (int i = 1; i < n; ++i) {
        int v = a[i], j = i;
        for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];
        a[j] = v;
    }
}

static PBD_HD int pbd__grid_buckets(const pbd__grid *g, pbd__v3 lo, pbd__v3 hi, int *out, int max) {
    int x0 = pbd__grid_coord(g, lo.x), y0 = pbd__grid_coord(g, lo.y), z0 = pbd__grid_coord(g, lo.z);
    int x1 = pbd__grid_coord(g, hi.x), y1 = pbd__grid_coord(g, hi.y), z1 = pbd__grid_coord(g, hi.z);
    double cells = ((double)x1 - x0 + 1) * ((double)y1 - y0 + 1) * ((double)z1 - z0 + 1);
    if (!(cells <= (double)max) || cells > (double)g->mask + 1) return -1;
    int m = 0;
    for (int z = z0; z <= z1; ++z)
        for (int y = y0; y <= y1; ++y)
            for (int x = x0; x <= x1; ++x) out[m++] = pbd__grid_hash(g, x, y, z);
    if (m <= 32) { /* drop repeats (cells that share a bucket), keeping the order: a small open-addressing set */
        int set[64], u = 0;
        for (int i = 0; i < 64; ++i) set[i] = -1;
        for (int i = 0; i < m; ++i) {
            int b = out[i], slot = b & 63;
            while (set[slot] >= 0 && set[slot] != b) slot = (slot + 1) & 63;
            if (set[slot] == b) continue;
            set[slot] = b;
            out[u++] = b;
        }
        return u;
    }
    pbd__sort_small(out, m);
    int u = 0;
    for (int i = 0; i < m; ++i)
        if (u == 0 || out[u - 1] != out[i]) out[u++] = out[i];
    return u;
}

static int pbd__grid_query(const pbd__grid *g, pbd__v3 q, float r, int *out, int max) {
    int buckets[64], nb = pbd__grid_buckets(g, pbd__sub(q, pbd__v(r, r, r)), pbd__add(q, pbd__v(r, r, r)), buckets, 64);
    int all = nb < 0, found = 0;
    if (all) nb = g->mask + 1;
    float r2 = r * r;
    for (int i = 0; i < nb; ++i) {
        int b = all ? i : buckets[i];
        for (int s = g->start[b]; s < g->start[b + 1]; ++s) {
            int k = g->sorted[s];
            pbd__v3 d = pbd__sub(pbd__ld(g->pos + 4 * (size_t)s), q);
            if (pbd__dot(d, d) > r2) continue;
            if (found < max) out[found] = k;
            found++;
        }
    }
    return found;
}

/* Helpers for scans of many nearby points in slot order (the particle
   phase's neighbour lists):
     pbd__grid_buckets_cached(g, lo, hi, cache)
         pbd__grid_buckets(g, lo, hi, cache->b, 27), remembered by the cell
         range: consecutive queries from points of the same cell (a walk in
         slot order visits a cell's points together) reuse the answer.
     pbd__grid_near16(g, s, end, q, r2)
         bit l (l < 16, s + l < end) set when slot s + l is near q:
         !(|pos - q|^2 >= r2), with exactly the scalar arithmetic
         (d = pos - q, d.x d.x + d.y d.y + d.z d.z), W lanes at a time, so
         the answer is the same bits with and without SIMD.
     pbd__grid_gather(g, buckets, nb, remap, cands)
         the points of those buckets (in order, each bucket by slot) copied
         into cands as SoA (with the slot s, or remap[s] if remap is given), padded to a multiple of 16 with far points
         (FLT_MAX); cands->n = -1 when there are more than fit (or nb < 0).
     pbd__grid_cands_near16(cands, j, q, r2)
         the near bits of candidates j .. j + 15 (j a multiple of 16; the
         padding never), with
         the arithmetic of pbd__grid_near16: one gather serves every point
         of a cell, with whole vectors. */
typedef struct pbd__grid_bcache {
    int valid, fresh, x0, y0, z0, x1, y1, z1, n;
    int b[27];
} pbd__grid_bcache;

static int pbd__grid_buckets_cached(const pbd__grid *g, pbd__v3 lo, pbd__v3 hi, pbd__grid_bcache *c) {
    int x0 = pbd__grid_coord(g, lo.x), y0 = pbd__grid_coord(g, lo.y), z0 = pbd__grid_coord(g, lo.z);
    int x1 = pbd__grid_coord(g, hi.x), y1 = pbd__grid_coord(g, hi.y), z1 = pbd__grid_coord(g, hi.z);
    c->fresh = !(c->valid && c->x0 == x0 && c->y0 == y0 && c->z0 == z0 && c->x1 == x1 && c->y1 == y1 && c->z1 == z1);
    if (!c->fresh) return c->n;
    c->n = pbd__grid_buckets(g, lo, hi, c->b, 27);
    c->valid = 1;
    c->x0 = x0;
    c->y0 = y0;
    c->z0 = z0;
    c->x1 = x1;
    c->y1 = y1;
    c->z1 = z1;
    return c->n;
}

enum { PBD__GRID_CANDS = 1024 };
typedef struct pbd__grid_cands {
    int n;    /* candidates, padded to a multiple of 16 (-1 when they did not fit) */
    int real; /* the candidates before the padding */
    float x[PBD__GRID_CANDS], y[PBD__GRID_CANDS], z[PBD__GRID_CANDS];
    int s[PBD__GRID_CANDS];
} pbd__grid_cands;

static void pbd__grid_gather(const pbd__grid *g, const int *buckets, int nb, const int *remap, pbd__grid_cands *c) {
    int n = 0;
    c->n = -1;
    if (nb < 0) return;
    for (int bi = 0; bi < nb; ++bi) {
        int b = buckets[bi], s0 = g->start[b], s1 = g->start[b + 1];
        if (s1 - s0 > PBD__GRID_CANDS - 16 - n) return;
#if PBD__W == 16
        /* 16 points at a time while they exist (the lanes past the bucket
           are overwritten by the next one, or by the padding) */
        for (; s0 + 16 <= g->count && s0 < s1; s0 += 16, n += 16) {
            const float *p = g->pos + 4 * (size_t)s0;
            pbd__vf r0 = pbd__vload(p), r1 = pbd__vload(p + 16), r2 = pbd__vload(p + 32), r3 = pbd__vload(p + 48);
            /* 128-bit blocks transposed: register j holds points j, j + 4,
               j + 8, j + 12, the layout of pbd__vgather */
            pbd__vf t0 = simde_mm512_shuffle_f32x4(r0, r1, 0x44), t1 = simde_mm512_shuffle_f32x4(r0, r1, 0xEE);
            pbd__vf t2 = simde_mm512_shuffle_f32x4(r2, r3, 0x44), t3 = simde_mm512_shuffle_f32x4(r2, r3, 0xEE);
            r0 = simde_mm512_shuffle_f32x4(t0, t2, 0x88);
            r1 = simde_mm512_shuffle_f32x4(t0, t2, 0xDD);
            r2 = simde_mm512_shuffle_f32x4(t1, t3, 0x88);
            r3 = simde_mm512_shuffle_f32x4(t1, t3, 0xDD);
            pbd__vtranspose(&r0, &r1, &r2, &r3);
            pbd__vstore(c->x + n, r0);
            pbd__vstore(c->y + n, r1);
            pbd__vstore(c->z + n, r2);
            simde__m512i ids = remap ? simde_mm512_loadu_si512((const void *)(remap + s0))
                                     : simde_mm512_add_epi32(
                                           simde_mm512_set1_epi32(s0),
                                           simde_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0));
            simde_mm512_storeu_si512((void *)(c->s + n), ids);
        }
        if (s0 > s1) {
            n -= s0 - s1;
            continue;
        }
#endif
        for (int s = s0; s < s1; ++s, ++n) {
            c->x[n] = g->pos[4 * (size_t)s];
            c->y[n] = g->pos[4 * (size_t)s + 1];
            c->z[n] = g->pos[4 * (size_t)s + 2];
            c->s[n] = remap ? remap[s] : s;
        }
    }
    c->real = n;
    for (; n & 15; ++n) {
        c->x[n] = c->y[n] = c->z[n] = FLT_MAX;
        c->s[n] = -1;
    }
    c->n = n;
}

static inline unsigned pbd__grid_cands_near16(const pbd__grid_cands *c, int j, pbd__v3 q, float r2) {
    unsigned m = 0;
#if PBD__W > 1
    pbd__vf qx = pbd__vset1(q.x), qy = pbd__vset1(q.y), qz = pbd__vset1(q.z), vr2 = pbd__vset1(r2);
    for (int k = 0; k < 16; k += PBD__W) {
        pbd__vf dx = pbd__vsub(pbd__vload(c->x + j + k), qx), dy = pbd__vsub(pbd__vload(c->y + j + k), qy);
        pbd__vf dz = pbd__vsub(pbd__vload(c->z + j + k), qz);
        pbd__vf d2 = pbd__vadd(pbd__vadd(pbd__vmul(dx, dx), pbd__vmul(dy, dy)), pbd__vmul(dz, dz));
        m |= (pbd__vbits(pbd__vle(vr2, d2)) ^ ((1u << PBD__W) - 1u)) << k; /* not far (NaN: near) */
    }
#else
    for (int l = 0; l < 16; ++l) {
        pbd__v3 d = pbd__sub(pbd__v(c->x[j + l], c->y[j + l], c->z[j + l]), q);
        if (!(pbd__dot(d, d) >= r2)) m |= 1u << l;
    }
#endif
    /* the padding is never near, not even to a NaN query (for which every
       distance test fails, so "not far" holds): its slot -1 would index
       before the arrays */
    int left = c->real - j;
    if (left < 16) m &= left > 0 ? (1u << left) - 1u : 0u;
    return m;
}

/* pbd__grid_spatial_order(g, key, order, tmp)
     the slots of the last build in the Morton order of their cells (cell
     coordinates wrapped to 8 bits each), ties by slot: order[0 .. count)
     (key, tmp: count scratch each). Neighbouring cells lie near each
     other in this order and every cell's slots together, which the
     bucket order gives only within a block (cells of two blocks may share
     a bucket, their points mixed). Call it
     from every thread of a parallel region, or serially (like
     pbd__grid_build). */
static void pbd__grid_spatial_order(const pbd__grid *g, unsigned *key, int *order, int *tmp) {
    int n = g->count;
    PBD__PRAGMA(omp for schedule(static))
    for (int s = 0; s < n; ++s) {
        const float *p = g->pos + 4 * (size_t)s;
        unsigned x = (unsigned)pbd__grid_coord(g, p[0]), y = (unsigned)pbd__grid_coord(g, p[1]),
                 z = (unsigned)pbd__grid_coord(g, p[2]);
        key[s] =
            pbd__spread_bits10(x & 0xffu) | (pbd__spread_bits10(y & 0xffu) << 1) | (pbd__spread_bits10(z & 0xffu) << 2);
    }
    PBD__PRAGMA(omp single) { /* a stable LSD radix sort of the 24-bit keys, two passes of 12 bits */
        int count[4097];
        for (int s = 0; s < n; ++s) tmp[s] = s;
        for (int pass = 0; pass < 2; ++pass) {
            const int *in = pass == 0 ? tmp : order;
            int *out = pass == 0 ? order : tmp;
            int shift = 12 * pass;
            memset(count, 0, sizeof count);
            for (int i = 0; i < n; ++i) count[((key[in[i]] >> shift) & 4095u) + 1]++;
            for (int b = 0; b < 4096; ++b) count[b + 1] += count[b];
            for (int i = 0; i < n; ++i) out[count[(key[in[i]] >> shift) & 4095u]++] = in[i];
        }
        memcpy(order, tmp, sizeof(int) * (size_t)n);
    }
}

/* The number of set bits of m (m < 2^16). */
static inline PBD_HD int pbd__popcount16(unsigned m) {
#if defined(__CUDA_ARCH__)
    return __popc(m);
#elif defined(__GNUC__) || defined(__clang__)
    return __builtin_popcount(m);
#else
    int c = 0;
    for (; m; m &= m - 1u) ++c;
    return c;
#endif
}

/* The lowest set bit of m != 0 (32- or 64-bit masks). */
static inline PBD_HD int pbd__lowest_bit(uint64_t m) {
#if defined(__CUDA_ARCH__)
    return __ffsll((long long)m) - 1;
#elif defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(m);
#else
    int l = 0;
    while (!(m & 1u)) {
        m >>= 1;
        ++l;
    }
    return l;
#endif
}

static inline PBD_HD unsigned pbd__grid_near16(const pbd__grid *g, int s, int end, pbd__v3 q, float r2) {
    int n = end - s < 16 ? end - s : 16;
    unsigned m = 0;
#if PBD__W > 1
    const pbd__p4 *P = (const pbd__p4 *)(const void *)g->pos;
    pbd__vf qx = pbd__vset1(q.x), qy = pbd__vset1(q.y), qz = pbd__vset1(q.z), vr2 = pbd__vset1(r2);
    for (int j = 0; j < n; j += PBD__W) {
        int ids[PBD__W];
        for (int l = 0; l < PBD__W; ++l) ids[l] = s + (j + l < n ? j + l : n - 1);
        pbd__vp v = pbd__vgather(P, ids);
        pbd__vf dx = pbd__vsub(v.x, qx), dy = pbd__vsub(v.y, qy), dz = pbd__vsub(v.z, qz);
        pbd__vf d2 = pbd__vadd(pbd__vadd(pbd__vmul(dx, dx), pbd__vmul(dy, dy)), pbd__vmul(dz, dz));
        pbd__vm far = pbd__vle(vr2, d2); /* d2 >= r2, false for NaN like the scalar test */
#if PBD__W == 16
        unsigned bits = (unsigned)(pbd__vm)~far & 0xffffu;
#elif PBD__W == 8
        unsigned bits = (unsigned)simde_mm256_movemask_ps(far) ^ 0xffu;
#else
        unsigned bits = (unsigned)simde_mm_movemask_ps(far) ^ 0xfu;
#endif
        m |= bits << j;
    }
    if (n < 16) m &= (1u << n) - 1u;
#else
    for (int l = 0; l < n; ++l) {
        pbd__v3 d = pbd__sub(pbd__ld(g->pos + 4 * (size_t)(s + l)), q);
        if (!(pbd__dot(d, d) >= r2)) m |= 1u << l;
    }
#endif
    return m;
}

// ==== particle contact ======================================================

enum { PBD__COLLIDE = 4, PBD__FLUID = 8 }; /* bits of pbd_world.flags next to PINNED, KINEMATIC */

static void pbd__pp_free(pbd_world *w) {
    pbd__particle_phase *pp = &w->pp;
    void *arrays[] = {pp->fluids,    pp->ids,   pp->fluid,   pp->object,  pp->nbr,       pp->nbr_count,
                      pp->cload,     pp->cross, pp->lambda,  pp->density, pp->omega_len, pp->dp,
                      pp->omega,     pp->slot,  pp->sid,     pp->sfluid,  pp->sobject,   pp->spos,
                      pp->pure,      pp->svel,  pp->nbr_off, pp->gslot,   pp->order,     pp->order_tmp,
                      pp->order_key, pp->wall,  pp->nwall,   pp->built,   pp->sxr,       pp->nbr_listed};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__free(w, arrays[i]);
    pbd__grid_free(w, &pp->grid);
    memset(pp, 0, sizeof *pp);
}

/* Scratch for `need` particles taking part (contents are rebuilt every
   substep, so nothing is copied). On failure nothing changes. */
static pbd_result pbd__pp_reserve(pbd_world *w, int need) {
    pbd__particle_phase *pp = &w->pp;
    if (need <= pp->cap) return PBD_OK;
    if (need > INT_MAX / PBD_MAX_NEIGHBORS) return PBD_ERROR_OVERFLOW;
    PBD__TRY(pbd__grid_reserve(w, &pp->grid, need));
    size_t n = (size_t)need;
    enum { K = 29 };
    void *a[K];
    size_t sizes[K] = {sizeof(int),
                       sizeof(int),
                       sizeof(int),
                       sizeof(int) * PBD_MAX_NEIGHBORS,
                       sizeof(int),
                       sizeof(float),
                       1,
                       sizeof(float),
                       sizeof(float),
                       sizeof(float),
                       sizeof(pbd__p4),
                       sizeof(pbd__p4),
                       sizeof(int),
                       sizeof(int),
                       sizeof(int),
                       sizeof(int),
                       sizeof(pbd__p4),
                       1,
                       sizeof(pbd__p4),
                       sizeof(int),
                       sizeof(int),
                       sizeof(int),
                       sizeof(int),
                       sizeof(unsigned),
                       sizeof(pbd__p4) * PBD__FLUID_WALLS,
                       1,
                       sizeof(pbd__p4),
                       sizeof(pbd__p4),
                       sizeof(int)};
    int ok = 1;
    /* nbr (i == 3) has a spare row: the fluid passes load whole vectors
       of indices past the end of a list (pbd__vblock_ids) */
    for (int i = 0; i < K; ++i) ok &= (a[i] = pbd__alloc_n(w, n + (i == 3), sizes[i])) != NULL;
    if (!ok) {
        for (int i = 0; i < K; ++i) pbd__free(w, a[i]);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    /* nbr holds slots (< cap) only, from the start: the SIMD passes gather
       whole blocks past the end of a list (pbd__vblock_ids) */
    memset(a[3], 0, sizes[3] * (n + 1));
    void **dst[K] = {(void **)&pp->ids,       (void **)&pp->fluid,     (void **)&pp->object,    (void **)&pp->nbr,
                     (void **)&pp->nbr_count, (void **)&pp->cload,     (void **)&pp->cross,     (void **)&pp->lambda,
                     (void **)&pp->density,   (void **)&pp->omega_len, (void **)&pp->dp,        (void **)&pp->omega,
                     (void **)&pp->slot,      (void **)&pp->sid,       (void **)&pp->sfluid,    (void **)&pp->sobject,
                     (void **)&pp->spos,      (void **)&pp->pure,      (void **)&pp->svel,      (void **)&pp->nbr_off,
                     (void **)&pp->gslot,     (void **)&pp->order,     (void **)&pp->order_tmp, (void **)&pp->order_key,
                     (void **)&pp->wall,      (void **)&pp->nwall,     (void **)&pp->built,     (void **)&pp->sxr,
                     (void **)&pp->nbr_listed};
    for (int i = 0; i < K; ++i) {
        pbd__free(w, *dst[i]);
        *dst[i] = a[i];
    }
    pp->cap = need;
    return PBD_OK;
}

static pbd__kern pbd__fluid_kern(const pbd__fluid *f);
/* The particles taking part, with their fluid and object (pbd_world.owner).
   Needs the capacity. */
static void pbd__pp_index(pbd_world *w) {
    pbd__particle_phase *pp = &w->pp;
    int np = 0;
    for (int i = 0; i < pp->nfluids; ++i)
        if (pp->fluids[i].s.live) pp->fluids[i].kern = pbd__fluid_kern(&pp->fluids[i]);
    for (int i = 0; i < w->n; ++i) {
        if (!(w->flags[i] & (PBD__COLLIDE | PBD__FLUID))) continue;
        PBD_ASSERT(np < pp->cap);
        pp->ids[np] = i;
        pp->object[np] = pbd__object_of(w, i);
        pp->fluid[np] = w->owner[i] <= -2 ? -2 - w->owner[i] : -1;
        /* no lists until the next substep builds them */
        pp->slot[np] = np;
        pp->sid[np] = i;
        pp->sfluid[np] = pp->fluid[np];
        pp->sobject[np] = pp->object[np];
        pp->nbr_count[np] = pp->nbr_listed[np] = pp->nbr_off[np] = 0;
        pp->cload[np] = 0;
        pp->pure[np] = 0;
        np++;
    }
    pp->np = np;
}

static int pbd__pp_count(const pbd_world *w) {
    int np = 0;
    for (int i = 0; i < w->n; ++i) np += (w->flags[i] & (PBD__COLLIDE | PBD__FLUID)) != 0;
    return np;
}

/* Reserve for the current flags and index (restore, switches). */
static pbd_result pbd__pp_refresh(pbd_world *w) {
    PBD__TRY(pbd__pp_reserve(w, pbd__pp_count(w)));
    pbd__pp_index(w);
    return PBD_OK;
}

PBDDEF pbd_result pbd_particles_set_particle_contact(pbd_world *w, pbd_range r, int on) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__check_live_range(w, r, w));
    PBD__TRY(pbd__check_switch(w, on, "on"));
    if (on) {
        int more = 0;
        for (int i = r.first; i < r.first + r.count; ++i) more += !(w->flags[i] & (PBD__COLLIDE | PBD__FLUID));
        pbd_result res = pbd__pp_reserve(w, w->pp.np + more);
        if (res != PBD_OK) return pbd__fail(w, res, "no memory for the contacts of %d particles", w->pp.np + more);
    }
    for (int i = r.first; i < r.first + r.count; ++i) {
        if (on) w->flags[i] |= PBD__COLLIDE;
        else w->flags[i] &= (unsigned char)~PBD__COLLIDE;
    }
    pbd__pp_index(w);
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_set_particle_contact(pbd_world *w, pbd_object object, int on) {
    PBD__CHECK_WORLD(w);
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    PBD__TRY(pbd__check_switch(w, on, "on"));
    pbd_range r;
    r.first = w->objects[oi].first;
    r.count = w->objects[oi].count;
    return pbd_particles_set_particle_contact(w, r, on);
}

PBDDEF pbd_result pbd_world_set_particle_contact_friction(pbd_world *w, float static_friction, float dynamic_friction) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    PBD__TRY(pbd__check_friction(w, static_friction, dynamic_friction, 0.0f));
    w->pp.mu_s = static_friction;
    w->pp.mu_d = dynamic_friction;
    return PBD_OK;
}

/* --- SPH kernels (Mueller et al. 2003, as used by Macklin and Mueller
   2013): poly6 for densities, the spiky gradient for the constraints. */
static inline PBD_HD float pbd__poly6(float r2, float h) {
    float h2 = h * h, d = h2 - r2;
    if (!(d > 0)) return 0.0f;
    float h3 = h2 * h;
    return 315.0f / (64.0f * 3.14159265358979f * h3 * h3 * h3) * d * d * d;
}
/* grad W_spiky(d), d = p_i - p_j, r = |d| > 0: -45 / (pi h^6) (h - r)^2 d / r */
static inline PBD_HD pbd__v3 pbd__spiky_grad(pbd__v3 d, float r, float h) {
    if (!(r > PBD__KERNEL_R_MIN * h) || r >= h) return pbd__v(0, 0, 0);
    float h3 = h * h * h, s = h - r;
    return pbd__mul(d, -45.0f / (3.14159265358979f * h3 * h3) * s * s / r);
}

/* The search radius and cell: the largest fluid kernel, and 1.5 times the
   largest contact distance (the margin covers the motion of the
   iterations). */
/* Lists kept over substeps. A solid's list holds the particles within
   1.75 (r_a + r_b) of it (pbd__pp_list_factor), its loads count those
   within 1.5 (pbd__pp_pair) and its contacts those that touch. So a step
   builds the lists at its first substep, and its later substeps keep them
   while every particle stays within a quarter of its radius of where they
   were built: no pair can then have come within 1.5 (r_a + r_b) unlisted,
   nor within touching (the rest of the margin covers the iterations'
   motion, as it did with lists built every substep), and each kept
   substep counts its loads again (pbd__pp_refresh_load). At rest they
   serve a whole step: 2000 grains of 1 cm, 16 substeps, spent a third of
   a step building lists. Fluids' lists (the kernel radius, no margin) are
   built every substep; every step builds anew, so a restored snapshot
   replays the same bits. */
#define PBD__PP_SKIN 0.25f
/* A solid pair is listed within this factor times its radii's sum: the
   load's reach, 1.5 (pbd__pp_pair), plus the skin that kept lists allow
   each particle (PBD__PP_SKIN), so that a kept list holds every pair its
   loads count at any substep that keeps it (pbd__pp_refresh_load); just
   the load's reach where fluids build the lists every substep. */
static inline PBD_HD float pbd__pp_list_factor(const pbd__particle_phase *pp) {
    return pp->nfluids > 0 ? 1.5f : 1.5f + PBD__PP_SKIN;
}
static float pbd__pp_reach(const pbd_world *w) {
    const pbd__particle_phase *pp = &w->pp;
    float rmax = 0, hmax = 0;
    for (int k = 0; k < pp->np; ++k)
        if (w->flags[pp->ids[k]] & PBD__COLLIDE) rmax = w->radius[pp->ids[k]] > rmax ? w->radius[pp->ids[k]] : rmax;
    for (int f = 0; f < pp->nfluids; ++f)
        hmax = pp->fluids[f].kernel_radius > hmax ? pp->fluids[f].kernel_radius : hmax;
    float contact = 2.0f * pbd__pp_list_factor(pp) * rmax;
    return hmax > contact ? hmax : contact;
}

/* Whether particles a and b (slots) have anything to do with
   each other at squared distance d2: fluid kernels, or contact. */
static inline PBD_HD int pbd__pp_pair(const pbd_world *w, int a, int b, float d2, int *contact) {
    const pbd__particle_phase *pp = &w->pp;
    int fa = pp->sfluid[a], fb = pp->sfluid[b];
    *contact = 0;
    if (fa >= 0 && fb >= 0) return 1; /* density */
    int ia = pp->sid[a], ib = pp->sid[b];
    int both_collide = (w->flags[ia] & w->flags[ib] & PBD__COLLIDE) != 0;
    if (!both_collide) return 0;
    if (fa < 0 && fb < 0 && pp->sobject[a] >= 0 && pp->sobject[a] == pp->sobject[b]) return 0;
    float sum = w->radius[ia] + w->radius[ib], reach = 1.5f * sum, listed = pbd__pp_list_factor(pp) * sum;
    *contact = d2 < reach * reach;
    return d2 < listed * listed || fa >= 0 || fb >= 0;
}

/* The one fluid of all particles taking part (k < np), or -2 (a solid,
   or two fluids). */
static int pbd__pp_one_fluid(const pbd__particle_phase *pp) {
    int f = pp->np > 0 ? pp->fluid[0] : -2;
    for (int k = 1; k < pp->np && f >= 0; ++k)
        if (pp->fluid[k] != f) f = -2;
    return f >= 0 ? f : -2;
}

/* Particle k in slot k with no neighbours (a phase with no reach). */
static inline PBD_HD void pbd__pp_unlisted(pbd__particle_phase *pp, int k) {
    pp->nbr_count[k] = pp->nbr_listed[k] = pp->cross[k] = pp->pure[k] = pp->nbr_off[k] = 0;
    pp->cload[k] = 0;
    pp->slot[k] = k;
    pp->sid[k] = pp->ids[k];
    pp->sfluid[k] = pp->fluid[k];
    pp->sobject[k] = pp->object[k];
}

/* What one contact candidate b adds to particle a's contact load: a's
   share of the pair's correction, w_a / (w_a + w_b), doubled and at most
   1 (so 1 for equal masses, and for a particle against a pinned one). A
   pair's corrections are scaled by 1 / (the larger load of its two
   particles), which keeps linear momentum and, since a's share is at most
   its term, never moves a particle by more than its deepest contact asks
   (Jacobi: the sum of its pairs' corrections). For equal masses this is
   1 / max(contact counts); a heavy particle takes a small share of each
   pair, so its many light partners are not held back by its count: a
   15.6 g grain on a cloth of 0.09 g vertices (tens of candidates) moved
   them by a few percent of their share per iteration, and fell straight
   through a 0.2 kg hammock pinned at its corners
   (tests/test_particle_contact.c). */
static inline PBD_HD float pbd__pp_load(const pbd_world *w, int ia, int ib) {
    float wa = w->p[ia].w, wb = w->p[ib].w, ws = wa + wb;
    float share = ws > 0 ? 2.0f * (wa / ws) : 0.0f;
    return share < 1.0f ? share : 1.0f;
}

/* Slot a's pairs within reach (pbd__pp_pair's contact flag: 1.5 (r_a +
   r_b)) at the substep's predictions P moved to the front of its list, in
   their order, the others after them: nbr_count[a] counts the first,
   nbr_listed[a] all; and its contact load over them (what pbd__pp_scan
   sums). The contacts and the loads then see what lists built at P would
   hold, in the build's order, and the kept list still holds every pair a
   later substep may need (PBD__PP_SKIN). Solids only (fluids build every
   substep): loads left at the build's positions for a whole step (a lag
   of up to 15 substeps in each contact's scale) kept a resting 10 x 20 x
   10 column of grains shaking at 0.22 m/s; counted again at each substep
   it rests (under 4 cm/s), as with lists built every substep. */
static inline PBD_HD void pbd__pp_activate(pbd_world *w, const pbd__p4 *P, int a) {
    pbd__particle_phase *pp = &w->pp;
    int *list = pp->nbr + pp->nbr_off[a], n = pp->nbr_listed[a], active = 0, rest = 0;
    int later[PBD_MAX_NEIGHBORS];
    pbd__v3 q = pbd__p3(P[pp->sid[a]]);
    float load = 0;
    for (int j = 0; j < n; ++j) {
        int b = list[j], contact;
        pbd__v3 d = pbd__sub(pbd__p3(P[pp->sid[b]]), q);
        pbd__pp_pair(w, a, b, pbd__dot(d, d), &contact);
        if (!contact) {
            later[rest++] = b;
            continue;
        }
        load += pbd__pp_load(w, pp->sid[a], pp->sid[b]);
        list[active++] = b;
    }
    for (int j = 0; j < rest; ++j) list[active + j] = later[j];
    pp->nbr_count[a] = active;
    pp->cload[a] = load;
}

/* The list of slot a, at q (its position in the grid), into list: the
   slots within the reach of the grid's buckets (nb < 0: every bucket) that
   it has to do with (pbd__pp_pair), in the grid's order (bucket by bucket,
   then by grid slot), at most PBD_MAX_NEIGHBORS; and its count, contacts,
   cross and pure flags. Any slot's scan (the GPU's for all of them);
   pbd__pp_build has a faster twin for a fluid particle with only its own
   fluid around, which gives the same list. */
static PBD_HD void pbd__pp_scan(pbd_world *w, int a, pbd__v3 q, const int *buckets, int nb, int *list) {
    pbd__particle_phase *pp = &w->pp;
    const pbd__grid *g = &pp->grid;
    float R = pp->reach;
    int all = nb < 0, count = 0, cross = 0, fa = pp->sfluid[a], pure = fa >= 0;
    float load = 0;
    if (all) nb = g->mask + 1;
    for (int bi = 0; bi < nb && count < PBD_MAX_NEIGHBORS; ++bi) {
        int bucket = all ? bi : buckets[bi], end = g->start[bucket + 1];
        for (int s = g->start[bucket]; s < end && count < PBD_MAX_NEIGHBORS; s += 16) {
            unsigned near = pbd__grid_near16(g, s, end, q, R * R);
            while (near && count < PBD_MAX_NEIGHBORS) {
                int gs = s + pbd__lowest_bit(near), b = pp->gslot[gs], contact;
                near &= near - 1u;
                if (b == a) continue;
                int fb = pp->sfluid[b];
                if (fa < 0 || fb < 0) { /* fluid pairs always interact (pbd__pp_pair) */
                    pbd__v3 d = pbd__sub(pbd__ld(g->pos + 4 * (size_t)gs), q);
                    if (!pbd__pp_pair(w, a, b, pbd__dot(d, d), &contact)) continue;
                    if (contact) load += pbd__pp_load(w, pp->sid[a], pp->sid[b]);
                    if (contact || fa >= 0 || fb >= 0) cross |= pp->sobject[a] != pp->sobject[b];
                }
                list[count++] = b;
                pure &= fb == fa;
            }
        }
    }
    pp->nbr_count[a] = count;
    pp->cload[a] = load;
    pp->cross[a] = (unsigned char)cross;
    pp->pure[a] = (unsigned char)pure;
}

/* Whether particle k (ids[k]) has moved too far from its place in the
   lists (NaN: too far). */
static inline PBD_HD int pbd__pp_moved(const pbd_world *w, const pbd__p4 *P, int k) {
    const pbd__particle_phase *pp = &w->pp;
    int i = pp->ids[k];
    pbd__v3 d = pbd__sub(pbd__p3(P[i]), pbd__p3(pp->built[k]));
    float skin = PBD__PP_SKIN * w->radius[i];
    return !(pbd__dot(d, d) <= skin * skin);
}

/* Neighbour lists of the particles taking part, at positions P (the
   predictions at the start of a substep, or x for queries). Inside the
   substep's parallel region, or serially. With `mark`, objects touched
   by other objects' particles become coupled (serial, after the lists). */
static void pbd__pp_build(pbd_world *w, const pbd__p4 *P, int mark) {
    pbd__particle_phase *pp = &w->pp;
    int np = pp->np;
    PBD__PRAGMA(omp single)
    pp->reach = pbd__pp_reach(w);
    float R = pp->reach;
    if (np == 0 || !(R > 0)) {
        PBD__PRAGMA(omp for schedule(static))
        for (int k = 0; k < np; ++k) pbd__pp_unlisted(pp, k);
        return;
    }
    pbd__grid_build(&pp->grid, &P[0].x, 4, pp->ids, np, R);
    const pbd__grid *g = &pp->grid;
    /* Work in slots: the grid's slots in the spatial order of their cells,
       so that neighbours are near in memory (the hash order scatters
       neighbouring cells). The lists keep the grid's order (buckets, then
       slot), so the sums do not depend on this layout. */
    pbd__grid_spatial_order(g, pp->order_key, pp->order, pp->order_tmp);
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) {
        int s = pp->order[a], k = g->sorted[s];
        pp->gslot[s] = a;
        pp->slot[k] = a;
        pp->built[k] = P[pp->ids[k]];
        pp->sid[a] = pp->ids[k];
        pp->sfluid[a] = pp->fluid[k];
        pp->sobject[a] = pp->object[k];
    }
    /* Slots of one cell are consecutive and share their buckets (cached);
       the distance test runs 16 candidates at a time (pbd__grid_near16).
       The lists are packed: a run of slots a0 .. a1 - 1 that one thread
       builds in order writes its lists one after the other from
       nbr[a0 * PBD_MAX_NEIGHBORS], which stays inside the run's share of
       nbr, so every thread count gives the same lists (only where they lie
       differs) and the passes read them as one stream. */
    pbd__grid_bcache cache;
    int prev = -2, next = 0;
    pbd__grid_cands cands;                 /* this thread's, 16 KiB */
    int cands_fluid = -2;                  /* the one fluid of all candidates, or -2 */
    int one_fluid = pbd__pp_one_fluid(pp); /* then every candidate's (each thread finds it) */
    cache.valid = 0;
    cands.n = -1;
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) {
        pbd__v3 q = pbd__ld(g->pos + 4 * (size_t)pp->order[a]);
        int nb = pbd__grid_buckets_cached(g, pbd__sub(q, pbd__v(R, R, R)), pbd__add(q, pbd__v(R, R, R)), &cache);
        const int *buckets = cache.b;
        int count = 0, fa = pp->sfluid[a];
        if (a != prev + 1) next = a * PBD_MAX_NEIGHBORS;
        prev = a;
        int *list = pp->nbr + next;
        if (cache.fresh) {
            pbd__grid_gather(g, buckets, nb, pp->gslot, &cands);
            cands_fluid = one_fluid >= 0 ? one_fluid : cands.n > 0 && cands.s[0] >= 0 ? pp->sfluid[cands.s[0]] : -2;
            for (int j = 0; one_fluid < 0 && j < cands.n && cands.s[j] >= 0; ++j)
                if (pp->sfluid[cands.s[j]] != cands_fluid) cands_fluid = -2;
        }
        if (cands.n >= 0 && fa >= 0 && cands_fluid == fa) { /* the common case: only a's fluid around */
            for (int j = 0; j < cands.n && count < PBD_MAX_NEIGHBORS; j += 16) {
                unsigned near = pbd__grid_cands_near16(&cands, j, q, R * R);
#if PBD__W == 16
                /* all 16 at once: compress in a register, store 16 (the
                   spare ones are overwritten later, and list[0 .. 96) is
                   this run's share of nbr whatever the packing) */
                if (count + 16 <= PBD_MAX_NEIGHBORS) {
                    simde__m512i ids = simde_mm512_loadu_si512((const void *)(cands.s + j));
                    near &= ~(unsigned)simde_mm512_cmpeq_epi32_mask(ids, simde_mm512_set1_epi32(a));
                    simde_mm512_storeu_si512((void *)(list + count),
                                             simde_mm512_maskz_compress_epi32((simde__mmask16)near, ids));
                    count += pbd__popcount16(near);
                    continue;
                }
#endif
                while (near && count < PBD_MAX_NEIGHBORS) {
                    int b = cands.s[j + pbd__lowest_bit(near)];
                    near &= near - 1u;
                    if (b != a) list[count++] = b;
                }
            }
            pp->nbr_count[a] = count;
            pp->nbr_off[a] = next;
            next += count;
            pp->cload[a] = 0;
            pp->cross[a] = 0;
            pp->pure[a] = 1;
            continue;
        }
        pbd__pp_scan(w, a, q, buckets, nb, list);
        pp->nbr_off[a] = next;
        next += pp->nbr_count[a];
    }
    if (pp->nfluids == 0) { /* solids' lists hold the skin: those within reach first */
        PBD__PRAGMA(omp for schedule(static))
        for (int a = 0; a < np; ++a) {
            pp->nbr_listed[a] = pp->nbr_count[a];
            pbd__pp_activate(w, P, a);
        }
    }
    if (mark && w->nobjects > 0) {
        PBD__PRAGMA(omp single)
        for (int a = 0; a < np; ++a) {
            if (!pp->cross[a]) continue;
            /* this particle's object and every other object it touches */
            const int *list = pp->nbr + pp->nbr_off[a];
            if (pp->sobject[a] >= 0) pbd__mark_coupled(w, &pp->sid[a], 1);
            for (int s = 0; s < pp->nbr_count[a]; ++s)
                if (pp->sobject[list[s]] >= 0) pbd__mark_coupled(w, &pp->sid[list[s]], 1);
        }
    }
}

/* Gathers the positions (and inverse masses) of the slots from P. The
   slots' particles lie scattered in the world's arrays (the slots follow
   space, the particles the order they were added in): a hint
   PBD__SLOT_AHEAD slots ahead hides most of each miss. */
static void pbd__pp_gather(pbd_world *w, const pbd__p4 *P) {
    pbd__particle_phase *pp = &w->pp;
    int np = pp->np;
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) {
        if (a + PBD__SLOT_AHEAD < np) PBD__PREFETCH(&P[pp->sid[a + PBD__SLOT_AHEAD]]);
        pp->spos[a] = P[pp->sid[a]];
    }
}

/* The contact correction of particle a from its pair with b (slot
   positions P: the world's w->p gathered at the start of the iteration,
   which the correction pass changes as it goes; starts x):
   |p_a - p_b| >= r_a + r_b, split by inverse mass and scaled by
   1 / max(contact loads) (pbd__pp_load) so that the pair's corrections
   cancel in the momentum sum; then position-level friction on the relative tangential
   motion of the substep (Macklin et al. 2014, section 6.1). */
static inline PBD_HD pbd__v3 pbd__pp_contact(const pbd_world *w, const pbd__p4 *P, int a, int b) {
    const pbd__particle_phase *pp = &w->pp;
    int ia = pp->sid[a], ib = pp->sid[b];
    float wa = P[a].w, wb = P[b].w, ws = wa + wb;
    pbd__v3 d = pbd__sub(pbd__p3(P[a]), pbd__p3(P[b]));
    float dist = pbd__len(d), C = dist - (w->radius[ia] + w->radius[ib]);
    if (!(C < 0) || !(ws > 0) || !(dist >= 0)) return pbd__v(0, 0, 0);
    float most = pp->cload[a] > pp->cload[b] ? pp->cload[a] : pp->cload[b];
    float s = wa / ws / (most > 1.0f ? most : 1.0f);
    /* Coincident particles (two added at one point, or a pile crushed
       until two centres meet) have no direction; skipped, they would stay
       merged for ever. They part along a direction hashed from the pair,
       opposite for its two particles (the same for any order or thread),
       so the corrections still cancel. */
    pbd__v3 n;
    if (dist > PBD__LEN_MIN) n = pbd__mul(d, 1.0f / dist);
    else {
        pbd__v3 hd = pbd__hash_dir((unsigned)(ia < ib ? ia : ib), (unsigned)(ia < ib ? ib : ia));
        n = ia < ib ? hd : pbd__neg(hd);
    }
    pbd__v3 corr = pbd__mul(n, -C * s);
    /* friction: relative motion since the start of the substep */
    pbd__v3 rel = pbd__sub(pbd__sub(pbd__p3(P[a]), pbd__p3(w->x[ia])), pbd__sub(pbd__p3(P[b]), pbd__p3(w->x[ib])));
    pbd__v3 rt = pbd__sub(rel, pbd__mul(n, pbd__dot(rel, n)));
    float lt = pbd__len(rt), pen = -C;
    if (lt > 0) {
        float f = lt < pp->mu_s * pen ? 1.0f : (pp->mu_d * pen / lt < 1.0f ? pp->mu_d * pen / lt : 1.0f);
        corr = pbd__sub(corr, pbd__mul(rt, f * s));
    }
    return corr;
}

// ==== fluids ================================================================

PBDDEF pbd_fluid_desc pbd_fluid_desc_default(void) {
    pbd_fluid_desc d;
    memset(&d, 0, sizeof d);
    d.rest_density = 1000.0f;
    d.spacing = 0.05f;
    d.relaxation = 0.01f;
    d.viscosity = 0.01f;
    d.scorr_k = 0.05f;
    d.scorr_n = 4.0f;
    d.scorr_dq = 0.2f;
    d.gravity_cfl = 0.06f;
    return d;
}

PBDDEF int pbd_world_fluid_count(const pbd_world *w) { return w ? PBD__LIVE(w->pp.fluids, w->pp.nfluids) : 0; }

/* sum_k w_k |grad_k C|^2 of a particle inside a cubic lattice of spacing d
   (unit inverse mass times m: the scale of the CFM relaxation). */
static float pbd__fluid_lattice_denominator(const pbd__fluid *f) {
    float d = f->spacing, h = f->kernel_radius, wm = 1.0f / f->mass;
    int r = (int)ceilf(h / d);
    float sum2 = 0;
    pbd__v3 gi = pbd__v(0, 0, 0);
    for (int z = -r; z <= r; ++z)
        for (int y = -r; y <= r; ++y)
            for (int x = -r; x <= r; ++x) {
                pbd__v3 o = pbd__v((float)x * d, (float)y * d, (float)z * d);
                float l = pbd__len(o);
                if (!(l > 0) || l >= h) continue;
                pbd__v3 g = pbd__mul(pbd__spiky_grad(o, l, h), f->mass / f->rest_density);
                gi = pbd__add(gi, g);
                sum2 += wm * pbd__dot(g, g);
            }
    return sum2 + wm * pbd__dot(gi, gi);
}

/* s_corr's sum over the neighbours of a particle in the cubic lattice of
   spacing d, kernel radius h (see PBD_FLUID_SCORR_MAX):
   sum_j k (W(r_j) / W(dq h))^n. */
static double pbd__fluid_scorr_sum(float k, float n, float dq, float h, float d) {
    if (!(k > 0)) return 0.0;
    double h2 = (double)h * h, w0 = h2 - (double)dq * dq * h2, sum = 0;
    int r = (int)ceil((double)h / d);
    for (int z = -r; z <= r; ++z)
        for (int y = -r; y <= r; ++y)
            for (int x = -r; x <= r; ++x) {
                double r2 = ((double)x * x + (double)y * y + (double)z * z) * d * d;
                if (r2 > 0 && r2 < h2) sum += k * pow(pow((h2 - r2) / w0, 3.0), n);
            }
    return sum;
}
/* Vorticity confinement eps of a fluid of spacing d: at most
   PBD_FLUID_VORTICITY_MAX sqrt(9.81 d). */
static pbd_result pbd__check_vorticity(const pbd_world *w, float eps, float d) {
    double most = PBD_FLUID_VORTICITY_MAX * sqrt(9.81 * d);
    if (eps > most)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "vorticity %g m/s is above PBD_FLUID_VORTICITY_MAX sqrt(9.81 m/s^2 spacing) = %.3g m/s at "
                         "spacing %g m: stronger confinement pumps energy into the water",
                         (double)eps, most, (double)d);
    return PBD_OK;
}

/* Whether kernel radius h suits spacing d: h in [PBD_FLUID_KERNEL_MIN d,
   PBD_FLUID_KERNEL_MAX d] (why: see pbd_fluid_desc.kernel_radius). */
static int pbd__fluid_kernel_ok(float h, float d) {
    return h >= PBD_FLUID_KERNEL_MIN * d && h <= PBD_FLUID_KERNEL_MAX * d;
}

static pbd_result pbd__validate_fluid(const pbd_world *w, const pbd_fluid_desc *d, pbd__fluid *f) {
    PBD__CHECK_PTR(w, d, "desc");
    const float vals[11] = {d->rest_density, d->spacing, d->kernel_radius, d->radius,   d->relaxation, d->viscosity,
                            d->vorticity,    d->scorr_k, d->scorr_n,       d->scorr_dq, d->gravity_cfl};
    static const char *const names[11] = {"rest_density", "spacing",   "kernel_radius", "radius",
                                          "relaxation",   "viscosity", "vorticity",     "scorr_k",
                                          "scorr_n",      "scorr_dq",  "gravity_cfl"};
    for (int k = 0; k < 11; ++k)
        if (!pbd__finite(vals[k])) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "fluid %s is not finite", names[k]);
    if (d->rest_density < 0)
        return pbd__fail(w, PBD_ERROR_NEGATIVE_MASS, "rest density %g < 0", (double)d->rest_density);
    if (!(d->rest_density > 0)) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "rest density must be > 0");
    PBD__TRY(pbd__check_radius(w, d->spacing, "spacing", 0));
    PBD__TRY(pbd__check_radius(w, d->radius, "radius", 1));
    float h = d->kernel_radius > 0 ? d->kernel_radius : 2.0f * d->spacing;
    if (d->kernel_radius < 0 || !pbd__fluid_kernel_ok(h, d->spacing))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "kernel_radius %g m is outside [%g spacing, %g spacing] = [%g, %g] m (spacing %g m)",
                         (double)d->kernel_radius, (double)PBD_FLUID_KERNEL_MIN, (double)PBD_FLUID_KERNEL_MAX,
                         (double)(PBD_FLUID_KERNEL_MIN * d->spacing), (double)(PBD_FLUID_KERNEL_MAX * d->spacing),
                         (double)d->spacing);
    static const int at_least_0[4] = {4, 6, 7, 10}; /* relaxation, vorticity, scorr_k, gravity_cfl */
    for (int k = 0; k < 4; ++k) PBD__TRY(pbd__check_rate(w, vals[at_least_0[k]], names[at_least_0[k]]));
    if (d->viscosity < 0 || d->viscosity > 1)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "viscosity %g outside [0, 1]", (double)d->viscosity);
    if (d->scorr_n < 1 || d->scorr_n > 16)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "scorr_n %g outside [1, 16]", (double)d->scorr_n);
    if (!(d->scorr_dq > 0 && d->scorr_dq < 1))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "scorr_dq %g outside (0, 1)", (double)d->scorr_dq);
    if (d->radius > 0.5f * d->spacing)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "radius %g m is above spacing / 2 = %g m", (double)d->radius,
                         (double)(0.5f * d->spacing));
    PBD__TRY(pbd__check_vorticity(w, d->vorticity, d->spacing));
    double scorr = pbd__fluid_scorr_sum(d->scorr_k, d->scorr_n, d->scorr_dq, h, d->spacing);
    if (!(scorr <= PBD_FLUID_SCORR_MAX))
        return pbd__fail(
            w, PBD_ERROR_INVALID_ARGUMENT,
            "s_corr (scorr_k %g, scorr_n %g, scorr_dq %g) sums to %.3g over a particle's neighbours at the "
            "rest spacing, above PBD_FLUID_SCORR_MAX = %g: the water would swell or explode; lower "
            "scorr_k or scorr_dq, or raise scorr_n",
            (double)d->scorr_k, (double)d->scorr_n, (double)d->scorr_dq, scorr, (double)PBD_FLUID_SCORR_MAX);
    float mass = d->rest_density * d->spacing * d->spacing * d->spacing;
    if (!(mass >= PBD_MIN_MASS && mass <= PBD_MAX_MASS)) { /* (DEGENERATE as before the bounds) */
        char value[24];
        return pbd__fail(w, PBD_ERROR_DEGENERATE,
                         "the particle mass rest_density * spacing^3 = %g * %g^3 = %s kg is outside [PBD_MIN_MASS, "
                         "PBD_MAX_MASS] = [%g, %g] kg",
                         (double)d->rest_density, (double)d->spacing, pbd_format_float(mass, value, sizeof value),
                         (double)PBD_MIN_MASS, (double)PBD_MAX_MASS);
    }
    if (!pbd__finite(pbd__poly6(0, h)))
        return pbd__fail(w, PBD_ERROR_DEGENERATE, "kernel radius %g makes a kernel that is not finite", (double)h);
    memset(f, 0, sizeof *f);
    f->rest_density = d->rest_density;
    f->spacing = d->spacing;
    f->kernel_radius = h;
    f->mass = mass;
    f->relaxation = d->relaxation;
    f->viscosity = d->viscosity;
    f->vorticity = d->vorticity;
    f->scorr_k = d->scorr_k;
    f->scorr_n = d->scorr_n;
    f->scorr_dq = d->scorr_dq;
    f->gravity_cfl = d->gravity_cfl;
    f->denominator = pbd__fluid_lattice_denominator(f);
    f->eps = d->relaxation * f->denominator;
    if (!pbd__finite(f->eps) || !(f->denominator > 0) || !pbd__finite(1.0f / f->denominator))
        return pbd__fail(w, PBD_ERROR_DEGENERATE, "relaxation scale is not finite");
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_fluid(pbd_world *w, const pbd_fluid_desc *desc, pbd_fluid *out, pbd_range *out_particles) {
    PBD__CHECK_WORLD(w);
    pbd__fluid f;
    PBD__TRY(pbd__validate_fluid(w, desc, &f));
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = desc->positions;
    pd.velocities = desc->velocities;
    pd.count = desc->count;
    pd.mass = f.mass;
    pd.radius = desc->radius > 0 ? desc->radius : 0.5f * desc->spacing;
    PBD__TRY(pbd__validate_particles(w, &pd));
    pbd__particle_phase *pp = &w->pp;
    /* every allocation first, so that nothing can fail after the particles are in */
    pbd_result r = PBD_OK;
    r = PBD__ROOM(w, pp->fluids, pp->nfluids, pp->fluid_cap, "fluid");
    if (r != PBD_OK) return r;
    if (r == PBD_OK) r = pbd__pp_reserve(w, pp->np + desc->count);
    if (r == PBD_OK) r = pbd__reserve_particles(w, w->n + desc->count);
    if (r != PBD_OK) return pbd__fail(w, r, "could not reserve memory for a fluid of %d particles", desc->count);
    pbd_range range = {0, 0};
    PBD__TRY(pbd__append_particles(w, &pd, &range));
    for (int i = range.first; i < range.first + range.count; ++i) w->flags[i] |= PBD__COLLIDE | PBD__FLUID;
    f.first = range.first;
    f.count = range.count;
    int fi = PBD__PLACE(w, pp->fluids, pp->nfluids, &f); /* PBD__ROOM made room */
    for (int i = range.first; i < range.first + range.count; ++i) w->owner[i] = -2 - fi;
    if (out) out->id = PBD__HANDLE(pp->fluids, fi);
    pbd__pp_index(w);
    if (out_particles) *out_particles = range;
    return PBD_OK;
}

/* The index of the fluid a handle names. */
static pbd_result pbd__fluid_index(const pbd_world *w, pbd_fluid handle, int *index) {
    return PBD__RESOLVE(w, handle, w->pp.fluids, w->pp.nfluids, "fluid", index);
}

PBDDEF pbd_result pbd_fluid_set_viscosity(pbd_world *w, pbd_fluid handle, float viscosity, float vorticity) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int f;
    PBD__TRY(pbd__fluid_index(w, handle, &f));
    if (!pbd__finite(viscosity))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "viscosity %g is not finite", (double)viscosity);
    if (!pbd__finite(vorticity))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "vorticity %g is not finite", (double)vorticity);
    if (viscosity < 0 || viscosity > 1)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "viscosity %g must be in [0, 1]", (double)viscosity);
    if (vorticity < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "vorticity %g must be >= 0", (double)vorticity);
    PBD__TRY(pbd__check_vorticity(w, vorticity, w->pp.fluids[f].spacing));
    w->pp.fluids[f].viscosity = viscosity;
    w->pp.fluids[f].vorticity = vorticity;
    return PBD_OK;
}

static float pbd__wall_lattice_shift(const pbd__fluid *f);

/* sum_j d^3 W(p_i - p_j) over a cubic lattice of spacing d: *full for a
   particle inside, *half for one in the layer next to a wall (the lattice
   on one side, its own layer included). A block of fluid is placed on
   such a lattice, m / d^3 = rho_0, but its SPH density is full * rho_0,
   not rho_0 (1.0098 at h = 2d): the constraint takes that as its rest
   (the fluid's rest density "as sampled"), so a block placed at
   `spacing` starts at rest instead of bursting by 1% in its first
   substep, which throws the top layer of a resting tank up. */
static void pbd__lattice_sums(const pbd__fluid *f, double *full, double *half) {
    float d = f->spacing, h = f->kernel_radius;
    int r = (int)ceilf(h / d);
    *full = *half = 0;
    for (int z = -r; z <= r; ++z)
        for (int y = -r; y <= r; ++y)
            for (int x = -r; x <= r; ++x) {
                float l2 = ((float)(x * x + y * y + z * z)) * d * d;
                double wv = (double)pbd__poly6(l2, h) * d * d * d;
                *full += wv;
                if (z >= 0) *half += wv;
            }
}

static pbd__kern pbd__fluid_kern(const pbd__fluid *f) {
    pbd__kern k;
    float h = f->kernel_radius, h3 = h * h * h, dq = f->scorr_dq * h;
    k.h = h;
    k.h2 = h * h;
    k.c6 = 315.0f / (64.0f * 3.14159265358979f * h3 * h3 * h3);
    k.cs = -45.0f / (3.14159265358979f * h3 * h3);
    double full, half;
    pbd__lattice_sums(f, &full, &half);
    k.rest = (float)(full * f->rest_density);
    k.inv_rho0 = 1.0f / k.rest;
    k.nf = f->scorr_n;
    k.n = floorf(f->scorr_n) == f->scorr_n ? (int)f->scorr_n : 0;
    k.scorr = f->scorr_k > 0 ? -f->scorr_k / (powf(pbd__poly6(dq * dq, h), f->scorr_n) * f->denominator) : 0.0f;
    k.scorr_full = k.scorr;
    k.wall_shift = pbd__wall_lattice_shift(f);
    return k;
}
static inline PBD_HD float pbd__kpoly6(const pbd__kern *k, float r2) {
    float d = k->h2 - r2;
    return d > 0 ? k->c6 * d * d * d : 0.0f;
}
static inline PBD_HD pbd__v3 pbd__kspiky(const pbd__kern *k, pbd__v3 d, float r) {
    if (!(r > PBD__KERNEL_R_MIN * k->h) || r >= k->h) return pbd__v(0, 0, 0);
    float s = k->h - r;
    return pbd__mul(d, k->cs * s * s / r);
}
/* s_corr = -k (W(r) / W(dq))^n (Macklin and Mueller 2013, eq. 13), in the
   units of lambda: divided by the lattice denominator, so that k is the
   artificial pressure of a density error of k whatever the units and
   masses (the paper's k = 0.1 assumes its own normalised units). */
static inline PBD_HD float pbd__kscorr(const pbd__kern *k, float r2) {
    if (k->scorr == 0) return 0.0f;
    float w = pbd__kpoly6(k, r2), p = 1.0f;
    if (k->n > 0)
        for (int i = 0; i < k->n; ++i) p *= w;
    else p = powf(w, k->nf);
    return k->scorr * p;
}

/* The mass a neighbour b has in the density of fluid particle a: its own
   fluid's, or, for a solid, one particle of a's fluid (the fluid it
   displaces). */
static inline PBD_HD float pbd__pp_mass_in(const pbd__particle_phase *pp, int a, int b) {
    return pp->fluids[pp->sfluid[b] >= 0 ? pp->sfluid[b] : pp->sfluid[a]].mass;
}

/* The sum of the W lanes of a per-lane accumulator (the fluid passes sum
   a particle's neighbours in W lanes, neighbour j into lane j mod W) in one
   fixed tree order: the upper half added lane by lane onto the lower
   (W/2 lanes, then W/4, ... 1). The scalar passes and pbd__vlane_sum4 both
   use it, so they agree bit for bit; the tree costs log2 W vector adds
   where a lane-by-lane sum is W dependent scalar ones (a third of the
   density pass's time at W = 16). The scalar passes take the lane count
   from pbd_world.lanes (PBD__W on the CPU): a GPU world's kernels, built
   without SIMD, sum in the lanes of the host that made the world, and so
   give its bits. */
#define PBD__LANES_MAX 16
static inline PBD_HD float pbd__lane_sum_n(const float *acc, int lanes) {
    float t[PBD__LANES_MAX];
    t[0] = acc[0]; /* lanes >= 1 */
    for (int l = 1; l < lanes; ++l) t[l] = acc[l];
    for (int half = lanes / 2; half > 0; half /= 2)
        for (int l = 0; l < half; ++l) t[l] += t[l + half];
    return t[0];
}
static inline float pbd__lane_sum(const float *acc) { return pbd__lane_sum_n(acc, PBD__W); }

/* The same sums lane by lane (lane l's terms l, l + L, l + 2L, ... in
   order), each lane's total combined into pbd__lane_sum_n's tree as it
   comes: the tree pairs lane l with l + L/2, then with l + L/4, ..., so
   taking the lanes in bit-reversed order (0, L/2, L/4, 3L/4, ...) makes
   every pair adjacent, and a stack of log2 L + 1 levels (a binary
   counter) adds each pair as soon as both halves are known. The same
   additions in the same association, so the same bits, with one lane's n
   running sums in registers and the stack touched once per lane, where
   the n x L running sums of pbd__lane_sum_n's arrays are updated in
   memory for every neighbour: a GPU thread's arrays live in slow local
   memory. pbd_cuda.cu's kernels, built with PBD__W == 1, sum this way in
   the lanes of the host that made the world (on an H200 the 128 000
   particle fluid's density and correction passes took a fifth less time
   than with the arrays; bench/README.md). */
#define PBD__LANE_LEVELS 5 /* log2 PBD__LANES_MAX + 1 */
#define PBD__LANE_SUMS 6   /* the most sums taken at once */
typedef struct pbd__lane_tree {
    float st[PBD__LANE_LEVELS][PBD__LANE_SUMS];
    int lanes, root;
} pbd__lane_tree;
/* the tree's first lane: for (int i = pbd__lane_first(&t, L); i < L; ++i) */
static inline PBD_HD int pbd__lane_first(pbd__lane_tree *t, int lanes) {
    t->lanes = lanes;
    for (t->root = 0; (1 << t->root) < lanes;) t->root++;
    return 0;
}
/* the lane taken i-th: i's log2 L bits reversed */
static inline PBD_HD int pbd__lane_at(const pbd__lane_tree *t, int i) {
    int l = 0;
    for (int b = t->lanes >> 1; b > 0; b >>= 1, i >>= 1)
        if (i & 1) l |= b;
    return l;
}
/* the i-th lane's n totals v (consumed) into the tree */
static inline PBD_HD void pbd__lane_push(pbd__lane_tree *t, int i, float *v, int n) {
    int k = 0;
    for (; (i >> k) & 1; ++k)
        for (int c = 0; c < n; ++c) v[c] = t->st[k][c] + v[c];
    for (int c = 0; c < n; ++c) t->st[k][c] = v[c];
}
/* a lane's two running vector sums v[0 .. 6) += a, b */
static inline PBD_HD void pbd__lane_add2(float *v, pbd__v3 a, pbd__v3 b) {
    v[0] += a.x;
    v[1] += a.y;
    v[2] += a.z;
    v[3] += b.x;
    v[4] += b.y;
    v[5] += b.z;
}
/* sum c of the whole tree, once every lane is in */
static inline PBD_HD float pbd__lane_total(const pbd__lane_tree *t, int c) { return t->st[t->root][c]; }

#if PBD__W > 1
/* pbd__lane_sum of four vectors at once: out[i] for the i-th. */
static inline void pbd__vlane_sum4(pbd__vf a, pbd__vf b, pbd__vf c, pbd__vf d, float out[4]) {
#if PBD__W == 16
    /* halves of a and b side by side (lanes l + 8 onto l), then quarters of
       all four (one 128-bit block each), then lanes 2, 3 onto 0, 1, then 1
       onto 0: the additions of pbd__lane_sum, in registers */
    pbd__vf ab = pbd__vadd(simde_mm512_shuffle_f32x4(a, b, 0x44), simde_mm512_shuffle_f32x4(a, b, 0xEE));
    pbd__vf cd = pbd__vadd(simde_mm512_shuffle_f32x4(c, d, 0x44), simde_mm512_shuffle_f32x4(c, d, 0xEE));
    pbd__vf u = pbd__vadd(simde_mm512_shuffle_f32x4(ab, cd, 0x88), simde_mm512_shuffle_f32x4(ab, cd, 0xDD));
    u = pbd__vadd(u, simde_mm512_shuffle_ps(u, u, 0x4E));
    u = pbd__vadd(u, simde_mm512_shuffle_ps(u, u, 0xB1));
    out[0] = simde_mm_cvtss_f32(simde_mm512_castps512_ps128(u));
    out[1] = simde_mm_cvtss_f32(simde_mm512_extractf32x4_ps(u, 1));
    out[2] = simde_mm_cvtss_f32(simde_mm512_extractf32x4_ps(u, 2));
    out[3] = simde_mm_cvtss_f32(simde_mm512_extractf32x4_ps(u, 3));
#else
    float t[4][PBD__W];
    pbd__vstore(t[0], a);
    pbd__vstore(t[1], b);
    pbd__vstore(t[2], c);
    pbd__vstore(t[3], d);
    for (int i = 0; i < 4; ++i) out[i] = pbd__lane_sum(t[i]);
#endif
}
#endif

/* One neighbour's share of a's density sum and constraint gradient (a lane
   of a block; the SIMD twin below does the same operations in the same
   order, so both agree bit for bit). */
static inline PBD_HD void pbd__lambda_pair(const pbd__kern *k, float mb, pbd__v3 pa, const pbd__p4 *pb, float *rho,
                                           pbd__v3 *g, float *s2) {
    pbd__v3 d = pbd__sub(pa, pbd__p3(*pb));
    float r2 = pbd__dot(d, d);
    *rho = 0;
    *s2 = 0;
    *g = pbd__v(0, 0, 0);
    if (!(r2 < k->h2)) return;
    *rho = mb * pbd__kpoly6(k, r2);
    *g = pbd__mul(pbd__kspiky(k, d, sqrtf(r2)), mb * k->inv_rho0);
    *s2 = pb->w * pbd__dot(*g, *g);
}

#if PBD__W > 1
/* The W neighbour slots of block j of a list of `count` (list + j when the
   block is full, else `pad`, the last lanes repeating list[j]) and the
   lanes that exist (1 or 0). */
static inline const int *pbd__vblock_ids(const int *list, int j, int count, int pad[PBD__W], pbd__vf *on) {
    if (j + PBD__W <= count) {
        *on = pbd__vset1(1.0f);
        return list + j;
    }
#if PBD__W == 16
    /* the slots as they lie: list + j + 16 stays inside nbr, which has a
       spare row, and every entry of nbr is a slot < cap (zeroed when
       reserved, then only slots are written: pbd__pp_reserve), so the
       lanes past count gather harmless positions, and are off (no copy
       into pad, which costs a store-to-load stall) */
    (void)pad;
    *on = simde_mm512_maskz_mov_ps((simde__mmask16)((1u << (count - j)) - 1u), pbd__vset1(1.0f));
    return list + j;
#else
    float o[PBD__W];
    for (int l = 0; l < PBD__W; ++l) {
        pad[l] = j + l < count ? list[j + l] : list[j];
        o[l] = j + l < count ? 1.0f : 0.0f;
    }
    *on = pbd__vload(o);
#endif
    return pad;
}

/* W neighbours list[j..j+W) of one fluid: lanes past `count` are off. */
static inline void pbd__vlambda_terms(const pbd__kern *k, float mb, pbd__v3 pa, const pbd__p4 *P, const int *list,
                                      int j, int count, pbd__vf add[5]) {
    int pad[PBD__W];
    pbd__vf on;
    const int *ids = pbd__vblock_ids(list, j, count, pad, &on);
    pbd__vf zero = pbd__vset1(0.0f), h = pbd__vset1(k->h);
    pbd__vp q = pbd__vgather(P, ids);
    pbd__vf dx = pbd__vsub(pbd__vset1(pa.x), q.x), dy = pbd__vsub(pbd__vset1(pa.y), q.y),
            dz = pbd__vsub(pbd__vset1(pa.z), q.z);
    pbd__vf r2 = pbd__vadd(pbd__vadd(pbd__vmul(dx, dx), pbd__vmul(dy, dy)), pbd__vmul(dz, dz));
    pbd__vm in = pbd__vand_m(pbd__vlt(r2, pbd__vset1(k->h2)), pbd__vlt(zero, on));
    pbd__vf dd = pbd__vsub(pbd__vset1(k->h2), r2);
    pbd__vf wp = pbd__vmul(pbd__vmul(pbd__vmul(pbd__vset1(k->c6), dd), dd), dd);
    pbd__vf rho = pbd__vsel(in, zero, pbd__vmul(pbd__vset1(mb), wp));
    pbd__vf r = pbd__vsqrt(r2), s = pbd__vsub(h, r);
    pbd__vm ok = pbd__vand_m(in, pbd__vand_m(pbd__vlt(pbd__vset1(PBD__KERNEL_R_MIN * k->h), r), pbd__vlt(r, h)));
    pbd__vf coef = pbd__vdiv(pbd__vmul(pbd__vmul(pbd__vset1(k->cs), s), s), r), scale = pbd__vset1(mb * k->inv_rho0);
    pbd__vf gx = pbd__vsel(ok, zero, pbd__vmul(pbd__vmul(dx, coef), scale));
    pbd__vf gy = pbd__vsel(ok, zero, pbd__vmul(pbd__vmul(dy, coef), scale));
    pbd__vf gz = pbd__vsel(ok, zero, pbd__vmul(pbd__vmul(dz, coef), scale));
    pbd__vf s2 = pbd__vsel(
        in, zero, pbd__vmul(q.w, pbd__vadd(pbd__vadd(pbd__vmul(gx, gx), pbd__vmul(gy, gy)), pbd__vmul(gz, gz))));
    add[0] = rho;
    add[1] = gx;
    add[2] = gy;
    add[3] = gz;
    add[4] = s2;
}
static inline void pbd__vlambda_block(const pbd__kern *k, float mb, pbd__v3 pa, const pbd__p4 *P, const int *list,
                                      int j, int count, float acc[5][PBD__LANES_MAX]) {
    pbd__vf add[5];
    pbd__vlambda_terms(k, mb, pa, P, list, j, count, add);
    for (int c = 0; c < 5; ++c) pbd__vstore(acc[c], pbd__vadd(pbd__vload(acc[c]), add[c]));
}
/* A whole list of a's own fluid: the same lane sums, kept in registers,
   and their pbd__lane_sum into out[5]. */
static inline void pbd__vlambda_list(const pbd__kern *k, float mb, pbd__v3 pa, const pbd__p4 *P, const int *list,
                                     int count, float out[5]) {
    pbd__vf sum[5], add[5];
    float o4[4];
    for (int c = 0; c < 5; ++c) sum[c] = pbd__vset1(0.0f);
    for (int j = 0; j < count; j += PBD__W) {
        pbd__vlambda_terms(k, mb, pa, P, list, j, count, add);
        for (int c = 0; c < 5; ++c) sum[c] = pbd__vadd(sum[c], add[c]);
    }
    pbd__vlane_sum4(sum[0], sum[1], sum[2], sum[3], out);
    pbd__vlane_sum4(sum[4], sum[4], sum[4], sum[4], o4);
    out[4] = o4[0];
}
#endif

/* Whether the neighbours list[j..j+W) that exist are all of fluid f. */
static inline int pbd__block_of_fluid(const pbd__particle_phase *pp, const int *list, int j, int count, int f) {
    for (int l = j; l < j + PBD__W && l < count; ++l)
        if (pp->sfluid[list[l]] != f) return 0;
    return 1;
}

/* The passes over the neighbour lists read them as one stream (a run of
   slots, whose lists lie one after the other), in pieces too short for
   the hardware prefetcher to run ahead of: without this hint a pass
   waits on memory for about a third of its time (the lists of 128 000
   particles are 18 MB). A kilobyte ahead is about seven particles. */
static inline PBD_HD void pbd__prefetch_list(const int *list) {
    PBD__PREFETCH(list + 256);
    PBD__PREFETCH(list + 272);
    PBD__PREFETCH(list + 288);
}

/* --- boundary: the colliders' density ---------------------------------------
   Without it a particle next to a wall misses the neighbours the wall
   takes the place of: its density stays below rest at any distance, so
   the pressure below it cannot hold it and the fluid packs against walls
   and floor: a resting tank loses height. The
   colliders add the density of the volume they fill, as the density maps
   of Koschier and Bender 2017 (section 4) do: rho_i += rho_0 Phi(s_i),
   Phi the integral of the kernel over the solid, here over the half space
   beyond the tangent plane of the collider at the particle (exact for
   planes and box faces, the first-order map of a curved surface), so
   Phi depends only on the signed distance s of the particle to the
   surface and is analytic for W_poly6 (below). Every collider kind
   contributes (planes, spheres, capsules, boxes, meshes, SDF grids),
   through pbd__sdf. The constraint gradient gains grad_i C_i += Phi'(s) n,
   and the correction its share dp_i += w_i lambda_i Phi'(s) n (the wall
   does not move, so only i's own constraint acts). i's pressure is not
   mirrored onto the wall as well (Akinci et al. 2012): that doubles the
   push, which the Jacobi denominator does not see, and keeps a resting
   tank sloshing.
   The tangent planes are found once per substep from the predicted
   positions (pbd__fluid_walls) and evaluated every iteration. */

/* Phi(s) = int_{y . n < 0} W_poly6(|x - y|, h) dy for x at distance s from
   the plane: with t = s / h the integral over each slice is
   c6 pi (h^2 - z^2)^4 / 4, so Phi = 1/2 - 315/256 (t - 4/3 t^3 + 6/5 t^5 -
   4/7 t^7 + 1/9 t^9) on [-1, 1] (1 deep inside, 0 beyond h) and
   Phi'(s) = -315/256 (1 - t^2)^4 / h into *dphi. */
static inline PBD_HD float pbd__wall_phi(float s, float h, float *dphi) {
    float t = s / h;
    if (!(t < 1.0f)) {
        *dphi = 0;
        return 0.0f;
    }
    if (!(t > -1.0f)) {
        *dphi = 0;
        return 1.0f;
    }
    float t2 = t * t, u = 1.0f - t2;
    *dphi = -(315.0f / 256.0f) * (u * u) * (u * u) / h;
    float g = t * (1.0f + t2 * (-4.0f / 3.0f + t2 * (6.0f / 5.0f + t2 * (-4.0f / 7.0f + t2 * (1.0f / 9.0f)))));
    return 0.5f - (315.0f / 256.0f) * g;
}

/* Phi is the continuous integral, but the fluid is particles: a cubic
   lattice of spacing d whose first layer lies d/2 from a wall is denser
   at that layer than inside with the plain Phi (3.4% at h = 2d; its own
   layer counts more than the slab it stands for), so a block placed that
   way, as blocks of fluid are, would burst off the walls. The walls'
   distances are shifted by the delta that makes this layer's density,
   lattice sum over the half space plus Phi(d/2 + delta), equal the
   interior lattice sum (found by bisection; about 0.05 d at h = 2d). */
static float pbd__wall_lattice_shift(const pbd__fluid *f) {
    float d = f->spacing, h = f->kernel_radius, dphi;
    double full, half;
    pbd__lattice_sums(f, &full, &half);
    float target = (float)(full - half), lo = -h, hi = h; /* Phi falls from 1 at -h to 0 at h */
    for (int it = 0; it < 40; ++it) {
        float mid = 0.5f * (lo + hi);
        if (pbd__wall_phi(mid, h, &dphi) > target) lo = mid;
        else hi = mid;
    }
    return 0.5f * (lo + hi) - 0.5f * d;
}

static PBD_HD float pbd__collider_ball(const pbd__collider *col);
/* Of fluid slot a's PBD__FLUID_WALLS planes, the one farthest from x if it
   is farther than s (a new plane's distance), else -1. */
static inline PBD_HD int pbd__farthest_wall(const pbd__particle_phase *pp, int a, pbd__v3 x, float s) {
    int far = -1;
    for (int j = 0; j < PBD__FLUID_WALLS; ++j) {
        const pbd__p4 *o = &pp->wall[(size_t)a * PBD__FLUID_WALLS + (size_t)j];
        float d = o->w + o->x * x.x + o->y * x.y + o->z * x.z; /* the plane's signed distance at x */
        if (d > s) {
            far = j;
            s = d;
        }
    }
    return far;
}
/* The tangent planes of the colliders within the kernel radius of fluid
   slot a at positions X (world order), the colliders at the poses
   pbd_world.pose_to (in a substep the poses at its end, the contacts'
   plane pose; queries set them to the colliders' current poses). Each
   slot writes only its own planes (the same for any thread count). Past
   PBD__FLUID_WALLS of them the nearest are kept, as the contacts keep
   their most violated (pbd__contact_evict): the first ones in collider
   order dropped a floor added after four other colliders in reach. */
static PBD_HD void pbd__fluid_walls_one(pbd_world *w, const pbd__p4 *X, int a) {
    pbd__particle_phase *pp = &w->pp;
    int m = 0;
    if (pp->sfluid[a] >= 0) {
        float kh = pp->fluids[pp->sfluid[a]].kernel_radius;
        pbd__v3 x = pbd__p3(X[pp->sid[a]]);
        for (int c = 0; c < w->ncolliders; ++c) {
            const pbd__collider *col = &w->colliders[c];
            if (!col->s.live) continue;
            const pbd__pose *pose = &w->pose_to[c];
            pbd__v3 r = pbd__sub(x, pbd__ld(pose->pos)), nl;
            if (col->shape == PBD_COLLIDER_PLANE && !(pbd__dot(pbd__ld(pose->up), r) < kh)) continue;
            float R = pbd__collider_ball(col);
            if (R > 0 && !(pbd__len(r) - R < kh)) continue;
            pbd__v3 y = pbd__to_local(pose->pos, pose->rot, x);
            if (col->shape >= PBD_COLLIDER_MESH && !pbd__meshcol_near(w, col, y, y, kh)) continue;
            float s = pbd__sdf(w, col, y, &nl);
            if (!(s < kh)) continue;
            pbd__v3 n = pbd__qrot(pose->rot, nl);
            int k = m < PBD__FLUID_WALLS ? m++ : pbd__farthest_wall(pp, a, x, s);
            if (k < 0) continue;
            pbd__p4 *q = &pp->wall[(size_t)a * PBD__FLUID_WALLS + (size_t)k];
            q->x = n.x;
            q->y = n.y;
            q->z = n.z;
            q->w = s - pbd__dot(n, x);
        }
    }
    pp->nwall[a] = (unsigned char)m;
}
static void pbd__fluid_walls(pbd_world *w, const pbd__p4 *X) {
    int np = w->pp.np;
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) pbd__fluid_walls_one(w, X, a);
}

/* The boundary density Phi (a fraction of rho_0) of fluid slot a at p,
   and its gradient into *grad. Several walls (a tank's edges and corners)
   combine as 1 - prod (1 - Phi_k), the fraction of the kernel that none of
   them leaves to the fluid: exact for a kernel that factors along
   orthogonal walls and close for W_poly6, where their plain sum counts the
   overlap twice (an edge 9% and a corner 17% too dense: they burst).
   Inside a collider a particle gets the wall density of the surface
   (s clamped at 0; its gradient stays the surface's): deeper, Phi would
   rise towards 1 while its gradient Phi' falls to 0, and the constraint
   would ask the neighbours for room that moving them cannot make (the
   wall alone at rest density or over), with a denominator of the
   neighbours' gradients alone: lambda = -C / den grew until a box pushed
   flush against a tank's wall through resting water threw it at 1e4 m/s
   (see "// ==== fluids"). Outside, where the contacts keep the
   particles, nothing changes. */
static PBD_HD float pbd__wall_density(const pbd__particle_phase *pp, int a, pbd__v3 p, const pbd__kern *k,
                                      pbd__v3 *grad) {
    float keep = 1.0f;
    *grad = pbd__v(0, 0, 0);
    for (int j = 0; j < pp->nwall[a]; ++j) {
        const pbd__p4 *q = &pp->wall[(size_t)a * PBD__FLUID_WALLS + (size_t)j];
        pbd__v3 n = pbd__p3(*q);
        float s = pbd__dot(n, p) + q->w;
        float dphi, phi = pbd__wall_phi((s > 0.0f ? s : 0.0f) + k->wall_shift, k->h, &dphi);
        *grad = pbd__add(pbd__mul(*grad, 1.0f - phi), pbd__mul(n, keep * dphi));
        keep *= 1.0f - phi;
    }
    return 1.0f - keep;
}

/* Density, and the Lagrange multiplier of the density constraint of
   fluid particle a (Macklin and Mueller 2013, eqs. 1-11, with masses:
   grad_a C_a = 1/rho_0 sum_b m_b grad W_ab, grad_b C_a = -m_b/rho_0 grad W_ab),
   lambda = -C / (sum_k w_k |grad_k C|^2 + eps), C = max(rho/rho_0 - 1, 0).
   The sums run in W lanes (blocks of W neighbours), then the lanes are
   added by pbd__lane_sum: the SIMD blocks and the scalar ones give the
   same bits. */
static PBD_HD void pbd__lambda_sums(const pbd_world *w, const pbd__p4 *P, int a, const pbd__kern *k, float mass,
                                    float sums[5]) {
    const pbd__particle_phase *pp = &w->pp;
    pbd__v3 pa = pbd__p3(P[a]);
    const int *list = pp->nbr + pp->nbr_off[a];
    int count = pp->nbr_count[a];
    pbd__prefetch_list(list);
#if PBD__W > 1
    if (w->simd && pp->pure[a]) {
        pbd__vlambda_list(k, mass, pa, P, list, count, sums);
        return;
    }
#else
    (void)mass; /* the SIMD blocks' (a's fluid's); the scalar pairs take pbd__pp_mass_in */
#endif
#if PBD__W == 1 /* lane by lane (see pbd__lane_tree) */
    pbd__lane_tree t;
    for (int i = pbd__lane_first(&t, w->lanes); i < t.lanes; ++i) {
        float v[5] = {0, 0, 0, 0, 0};
        for (int j = pbd__lane_at(&t, i); j < count; j += t.lanes) {
            int b = list[j];
            float rho, s2;
            pbd__v3 g;
            pbd__lambda_pair(k, pbd__pp_mass_in(pp, a, b), pa, &P[b], &rho, &g, &s2);
            v[0] += rho;
            v[1] += g.x;
            v[2] += g.y;
            v[3] += g.z;
            v[4] += s2;
        }
        pbd__lane_push(&t, i, v, 5);
    }
    for (int c = 0; c < 5; ++c) sums[c] = pbd__lane_total(&t, c);
#else
    float acc[5][PBD__LANES_MAX];
    int L = w->lanes;
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < count; j += L) {
        if (w->simd && pbd__block_of_fluid(pp, list, j, count, pp->sfluid[a])) {
            pbd__vlambda_block(k, mass, pa, P, list, j, count, acc);
            continue;
        }
        for (int l = 0; l < L && j + l < count; ++l) {
            int b = list[j + l];
            float rho, s2;
            pbd__v3 g;
            pbd__lambda_pair(k, pbd__pp_mass_in(pp, a, b), pa, &P[b], &rho, &g, &s2);
            acc[0][l] += rho;
            acc[1][l] += g.x;
            acc[2][l] += g.y;
            acc[3][l] += g.z;
            acc[4][l] += s2;
        }
    }
    for (int c = 0; c < 5; ++c) sums[c] = pbd__lane_sum_n(acc[c], L);
#endif
}
/* The warm start of the density constraints (iteration `it` of the
   substep; it < 0: pbd_fluid_densities, no state). PBF's multipliers
   restart from zero pressure every iteration (lambda from the current C
   alone), so a resting column holds itself up only by the compression
   that makes 4 Jacobi iterations lift each particle by the g h^2 the
   prediction took: about N (h sqrt(g/d))^2 / iterations at the bottom of
   N layers. Summed over the iterations of a substep, the multipliers are
   the XPBD multiplier of the substep (Macklin et al. 2016, eq. 18 with
   alpha = 0: each PBF lambda is a delta lambda), and the first iteration
   of the next substep adds PBD__FLUID_WARM times that sum (scaled by
   (h / h_before)^2 when the substep shrinks: lambda is a force times h^2;
   never up, since the sum over a short substep after long ones is the
   compression the water rested on, which does not shrink with h: scaled
   up by 2.8e4 after one 0.1 ms step it threw resting water at 2000 m/s)
   to its own, which applies it where the positions are then (a linearised
   initial guess lambda_0, x_0 = x~ + M^-1 grad C^T lambda_0 folded into
   the first correction pass: no extra pass). In the steady state the
   iterations then supply only (1 - PBD__FLUID_WARM) of the pressure, and
   the compression falls by that factor: 0.5 halves it (bench/fluid_rest.c,
   30 layers), while from about 0.65 on the carried pressure lags the
   motion and the tank sloshes. The iterations keep PBF's per-iteration
   max(C, 0), not the XPBD form with an accumulated, clamped lambda and
   signed C (delta lambda = (-C - eps lambda) / den), which sloshes even
   from a cold start: max(C, 0) is what keeps the Jacobi overshoot in
   check. */
#define PBD__FLUID_WARM 0.5f
static PBD_HD void pbd__fluid_lambda(pbd_world *w, const pbd__p4 *P, int a, int it) {
    pbd__particle_phase *pp = &w->pp;
    const pbd__fluid *f = &pp->fluids[pp->sfluid[a]];
    pbd__kern k = f->kern;
    float sums[5]; /* density, grad_a C (x, y, z), sum_b w_b |grad_b C|^2 */
    pbd__lambda_sums(w, P, a, &k, f->mass, sums);
    pbd__v3 gw = pbd__v(0, 0, 0);
    float phi = pp->nwall[a] ? pbd__wall_density(pp, a, pbd__p3(P[a]), &k, &gw) : 0.0f;
    float rho = f->mass * pbd__kpoly6(&k, 0) + sums[0] + f->rest_density * phi, sum2 = sums[4];
    pbd__v3 ga = pbd__add(pbd__v(sums[1], sums[2], sums[3]), pbd__mul(gw, f->rest_density * k.inv_rho0));
    float C = rho * k.inv_rho0 - 1.0f, den = P[a].w * pbd__dot(ga, ga) + sum2 + f->eps;
    pp->density[a] = rho;
    float lambda = C > 0 && den > 0 ? -C / den : 0.0f;
    if (it >= 0) { /* a projection (pbd_fluid_densities passes -1: no state changes) */
        float *p = &w->pressure[pp->sid[a]];
        if (it == 0) lambda += PBD__FLUID_WARM * *p;
        *p = it == 0 ? lambda : *p + lambda;
    }
    pp->lambda[a] = lambda;
    pp->omega[a] = P[a]; /* positions and multipliers for pbd__vcorrection_block */
    pp->omega[a].w = pp->lambda[a];
}

/* One neighbour b's share of the correction of a (a lane; see below):
   density terms into *sum, contact into *contact. */
static inline PBD_HD void pbd__correction_pair(const pbd_world *w, const pbd__p4 *P, int a, int b, const pbd__kern *ka,
                                               pbd__v3 pa, pbd__v3 *sum, pbd__v3 *contact) {
    const pbd__particle_phase *pp = &w->pp;
    int fa = pp->sfluid[a], fb = pp->sfluid[b];
    pbd__v3 d = pbd__sub(pa, pbd__p3(P[b]));
    float r2 = pbd__dot(d, d);
    *sum = pbd__v(0, 0, 0);
    *contact = pbd__v(0, 0, 0);
    if (fa >= 0 && fb == fa) { /* the common case: one fluid, one kernel, one mass */
        if (r2 < ka->h2) {
            float c = (pp->lambda[a] + pp->lambda[b] + pbd__kscorr(ka, r2)) * pp->fluids[fa].mass * ka->inv_rho0;
            *sum = pbd__mul(pbd__kspiky(ka, d, sqrtf(r2)), c);
        }
        return;
    }
    if (fa >= 0 && r2 < ka->h2) { /* a's own constraint, and s_corr between fluid particles */
        float c = pp->lambda[a] * pbd__pp_mass_in(pp, a, b);
        if (fb >= 0) c += pbd__kscorr(ka, r2) * pp->fluids[fb].mass;
        *sum = pbd__mul(pbd__kspiky(ka, d, sqrtf(r2)), c * ka->inv_rho0);
    }
    if (fb >= 0) { /* b's constraint: grad_a C_b = m_a / rho_0 grad W(p_a - p_b) */
        const pbd__kern kb = pp->fluids[fb].kern;
        if (r2 < kb.h2) {
            float ma = fa >= 0 ? pp->fluids[fa].mass : pp->fluids[fb].mass;
            *sum = pbd__add(*sum, pbd__mul(pbd__kspiky(&kb, d, sqrtf(r2)), pp->lambda[b] * ma * kb.inv_rho0));
        }
    }
    if (fa < 0 || fb < 0) *contact = pbd__pp_contact(w, P, a, b);
}

#if PBD__W > 1
/* The SIMD twin of the common case for W neighbours of a's own fluid
   (integral s_corr exponent). PL: the positions with the multipliers as w
   (pp->omega after the lambda pass), so one gather brings both. */
static inline void pbd__vcorrection_terms(const pbd__particle_phase *pp, const pbd__p4 *PL, int a, const pbd__kern *k,
                                          pbd__v3 pa, const int *list, int j, int count, pbd__vf add[3]) {
    int pad[PBD__W];
    pbd__vf on;
    const int *ids = pbd__vblock_ids(list, j, count, pad, &on);
    pbd__vf zero = pbd__vset1(0.0f), h = pbd__vset1(k->h);
    pbd__vp q = pbd__vgather(PL, ids);
    pbd__vf dx = pbd__vsub(pbd__vset1(pa.x), q.x), dy = pbd__vsub(pbd__vset1(pa.y), q.y),
            dz = pbd__vsub(pbd__vset1(pa.z), q.z);
    pbd__vf r2 = pbd__vadd(pbd__vadd(pbd__vmul(dx, dx), pbd__vmul(dy, dy)), pbd__vmul(dz, dz));
    pbd__vm in = pbd__vand_m(pbd__vlt(r2, pbd__vset1(k->h2)), pbd__vlt(zero, on));
    pbd__vf sc = zero;
    if (k->scorr != 0) {
        pbd__vf dd = pbd__vsub(pbd__vset1(k->h2), r2);
        pbd__vf wp = pbd__vmul(pbd__vmul(pbd__vmul(pbd__vset1(k->c6), dd), dd), dd), p;
        wp = pbd__vsel(pbd__vlt(zero, dd), zero, wp); /* kpoly6's d > 0 */
        /* kscorr's 1 * w * w ... in order (1 * w is w exactly); the
           default n = 4 unrolled */
        if (k->n == 4) p = pbd__vmul(pbd__vmul(pbd__vmul(wp, wp), wp), wp);
        else {
            p = wp;
            for (int i = 1; i < k->n; ++i) p = pbd__vmul(p, wp);
        }
        sc = pbd__vmul(pbd__vset1(k->scorr), p);
    }
    pbd__vf c = pbd__vadd(pbd__vadd(pbd__vset1(pp->lambda[a]), q.w), sc);
    c = pbd__vmul(pbd__vmul(c, pbd__vset1(pp->fluids[pp->sfluid[a]].mass)), pbd__vset1(k->inv_rho0));
    pbd__vf r = pbd__vsqrt(r2), s = pbd__vsub(h, r);
    pbd__vm ok = pbd__vand_m(in, pbd__vand_m(pbd__vlt(pbd__vset1(PBD__KERNEL_R_MIN * k->h), r), pbd__vlt(r, h)));
    pbd__vf coef = pbd__vdiv(pbd__vmul(pbd__vmul(pbd__vset1(k->cs), s), s), r);
    pbd__vf gx = pbd__vsel(ok, zero, pbd__vmul(pbd__vmul(dx, coef), c));
    pbd__vf gy = pbd__vsel(ok, zero, pbd__vmul(pbd__vmul(dy, coef), c));
    pbd__vf gz = pbd__vsel(ok, zero, pbd__vmul(pbd__vmul(dz, coef), c));
    add[0] = gx;
    add[1] = gy;
    add[2] = gz;
}
static inline void pbd__vcorrection_block(const pbd__particle_phase *pp, const pbd__p4 *PL, int a, const pbd__kern *k,
                                          pbd__v3 pa, const int *list, int j, int count, float acc[3][PBD__LANES_MAX]) {
    pbd__vf add[3];
    pbd__vcorrection_terms(pp, PL, a, k, pa, list, j, count, add);
    for (int i = 0; i < 3; ++i) pbd__vstore(acc[i], pbd__vadd(pbd__vload(acc[i]), add[i]));
}
/* The SIMD twin of pbd__pp_contact for W solid neighbours list[j ..] of
   solid slot a (lanes past `count` off), added into lanes cacc; the
   positions at the substep's start and the radii come gathered in slot
   order (pp->sxr). Returns 0, adding nothing, when a lane needs the
   scalar code: a fluid neighbour (the density terms), or a pair in
   contact too close for a direction (pbd__hash_dir). */
static inline int pbd__vcontact_block(const pbd_world *w, int a, const int *list, int j, int count,
                                      float cacc[3][PBD__LANES_MAX]) {
    const pbd__particle_phase *pp = &w->pp;
    int pad[PBD__W];
    pbd__vf on;
    const int *ids = pbd__vblock_ids(list, j, count, pad, &on);
    float cl[PBD__W];
    for (int l = 0; l < PBD__W; ++l) {
        if (j + l < count && pp->sfluid[ids[l]] >= 0) return 0;
        cl[l] = pp->cload[ids[l]];
    }
    pbd__p4 pa = pp->spos[a], xa = pp->sxr[a];
    pbd__vp pb = pbd__vgather(pp->spos, ids), xb = pbd__vgather(pp->sxr, ids);
    pbd__vf zero = pbd__vset1(0.0f), one = pbd__vset1(1.0f), wa = pbd__vset1(pa.w);
    pbd__vf ws = pbd__vadd(wa, pb.w);
    pbd__vv d = {pbd__vsub(pbd__vset1(pa.x), pb.x), pbd__vsub(pbd__vset1(pa.y), pb.y),
                 pbd__vsub(pbd__vset1(pa.z), pb.z)};
    pbd__vf dist = pbd__vsqrt(pbd__vvdot(d, d)), C = pbd__vsub(dist, pbd__vadd(pbd__vset1(xa.w), xb.w));
    pbd__vm in = pbd__vand_m(pbd__vand_m(pbd__vlt(zero, on), pbd__vlt(C, zero)),
                             pbd__vand_m(pbd__vlt(zero, ws), pbd__vle(zero, dist)));
    if (pbd__vany(pbd__vand_m(in, pbd__vle(dist, pbd__vset1(PBD__LEN_MIN))))) return 0;
    pbd__vf most = pbd__vmax(pbd__vset1(pp->cload[a]), pbd__vload(cl));
    pbd__vf s = pbd__vdiv(pbd__vdiv(wa, ws), pbd__vmax(most, one));
    pbd__vv n = pbd__vvmul(d, pbd__vdiv(one, dist));
    pbd__vv corr = pbd__vvmul(n, pbd__vmul(pbd__vneg(C), s));
    /* friction: relative motion since the start of the substep */
    pbd__vv ra = {pbd__vset1(pa.x - xa.x), pbd__vset1(pa.y - xa.y), pbd__vset1(pa.z - xa.z)};
    pbd__vv rb = {pbd__vsub(pb.x, xb.x), pbd__vsub(pb.y, xb.y), pbd__vsub(pb.z, xb.z)};
    pbd__vv rel = pbd__vvsub(ra, rb);
    pbd__vv rt = pbd__vvsub(rel, pbd__vvmul(n, pbd__vvdot(rel, n)));
    pbd__vf lt = pbd__vsqrt(pbd__vvdot(rt, rt)), pen = pbd__vneg(C);
    pbd__vf q = pbd__vmin(pbd__vdiv(pbd__vmul(pbd__vset1(pp->mu_d), pen), lt), one);
    pbd__vf f = pbd__vsel(pbd__vlt(lt, pbd__vmul(pbd__vset1(pp->mu_s), pen)), q, one);
    pbd__vv slid = pbd__vvsub(corr, pbd__vvmul(rt, pbd__vmul(f, s)));
    pbd__vm moving = pbd__vlt(zero, lt);
    pbd__vf c[3] = {pbd__vsel(moving, corr.x, slid.x), pbd__vsel(moving, corr.y, slid.y),
                    pbd__vsel(moving, corr.z, slid.z)};
    for (int k = 0; k < 3; ++k) pbd__vstore(cacc[k], pbd__vadd(pbd__vload(cacc[k]), pbd__vsel(in, zero, c[k])));
    return 1;
}
/* A whole list of a's own fluid, the lane sums in registers, and their
   pbd__lane_sum into out[3]. */
static inline void pbd__vcorrection_list(const pbd__particle_phase *pp, const pbd__p4 *PL, int a, const pbd__kern *k,
                                         pbd__v3 pa, const int *list, int count, float out[3]) {
    pbd__vf sum[3], add[3];
    float o4[4];
    for (int c = 0; c < 3; ++c) sum[c] = pbd__vset1(0.0f);
    for (int j = 0; j < count; j += PBD__W) {
        pbd__vcorrection_terms(pp, PL, a, k, pa, list, j, count, add);
        for (int c = 0; c < 3; ++c) sum[c] = pbd__vadd(sum[c], add[c]);
    }
    pbd__vlane_sum4(sum[0], sum[1], sum[2], sum[2], o4);
    out[0] = o4[0];
    out[1] = o4[1];
    out[2] = o4[2];
}
#endif

/* The correction of particle a (fluid or solid) from the density
   constraints it is part of (eq. 12 generalised to masses), plus its
   contacts; Jacobi: reads P and lambda only. Summed in W
   lanes like pbd__fluid_lambda: the density terms into *sum, the contacts
   into *contact. */
static PBD_HD void pbd__correction_sums(const pbd_world *w, const pbd__p4 *P, int a, const pbd__kern *ka, pbd__v3 *sum,
                                        pbd__v3 *contact) {
    const pbd__particle_phase *pp = &w->pp;
    pbd__v3 pa = pbd__p3(P[a]);
    const int *list = pp->nbr + pp->nbr_off[a];
    int count = pp->nbr_count[a];
    pbd__prefetch_list(list);
    *contact = pbd__v(0, 0, 0);
#if PBD__W > 1
    int fa = pp->sfluid[a];
    if (w->simd && pp->pure[a] && (ka->scorr == 0 || ka->n > 0)) { /* no contacts */
        float s[3];
        pbd__vcorrection_list(pp, pp->omega, a, ka, pa, list, count, s);
        *sum = pbd__v(s[0], s[1], s[2]);
        return;
    }
#endif
#if PBD__W == 1 /* lane by lane (see pbd__lane_tree) */
    pbd__lane_tree t;
    for (int i = pbd__lane_first(&t, w->lanes); i < t.lanes; ++i) {
        float v[6] = {0, 0, 0, 0, 0, 0};
        for (int j = pbd__lane_at(&t, i); j < count; j += t.lanes) {
            pbd__v3 s, c;
            pbd__correction_pair(w, P, a, list[j], ka, pa, &s, &c);
            pbd__lane_add2(v, s, c);
        }
        pbd__lane_push(&t, i, v, 6);
    }
    *sum = pbd__v(pbd__lane_total(&t, 0), pbd__lane_total(&t, 1), pbd__lane_total(&t, 2));
    if (!pp->pure[a]) *contact = pbd__v(pbd__lane_total(&t, 3), pbd__lane_total(&t, 4), pbd__lane_total(&t, 5));
#else
    float acc[3][PBD__LANES_MAX], cacc[3][PBD__LANES_MAX];
    int L = w->lanes;
    memset(acc, 0, sizeof acc);
    memset(cacc, 0, sizeof cacc);
    for (int j = 0; j < count; j += L) {
        if (w->simd && fa >= 0 && (ka->scorr == 0 || ka->n > 0) && pbd__block_of_fluid(pp, list, j, count, fa)) {
            pbd__vcorrection_block(pp, pp->omega, a, ka, pa, list, j, count, acc);
            continue;
        }
        if (w->simd && fa < 0 && L == PBD__W && pbd__vcontact_block(w, a, list, j, count, cacc)) continue;
        for (int l = 0; l < L && j + l < count; ++l) {
            pbd__v3 s, c;
            pbd__correction_pair(w, P, a, list[j + l], ka, pa, &s, &c);
            acc[0][l] += s.x;
            acc[1][l] += s.y;
            acc[2][l] += s.z;
            cacc[0][l] += c.x;
            cacc[1][l] += c.y;
            cacc[2][l] += c.z;
        }
    }
    if (L == PBD__W) { /* the same tree in registers */
        float o[4];
        pbd__vlane_sum4(pbd__vload(acc[0]), pbd__vload(acc[1]), pbd__vload(acc[2]), pbd__vload(acc[2]), o);
        *sum = pbd__v(o[0], o[1], o[2]);
        if (!pp->pure[a]) {
            pbd__vlane_sum4(pbd__vload(cacc[0]), pbd__vload(cacc[1]), pbd__vload(cacc[2]), pbd__vload(cacc[2]), o);
            *contact = pbd__v(o[0], o[1], o[2]);
        }
        return;
    }
    *sum = pbd__v(pbd__lane_sum_n(acc[0], L), pbd__lane_sum_n(acc[1], L), pbd__lane_sum_n(acc[2], L));
    if (!pp->pure[a]) /* else the contact lanes are all +0 and so is their sum */
        *contact = pbd__v(pbd__lane_sum_n(cacc[0], L), pbd__lane_sum_n(cacc[1], L), pbd__lane_sum_n(cacc[2], L));
#endif
}
static PBD_HD void pbd__pp_correction(pbd_world *w, const pbd__p4 *P, int a) {
    pbd__particle_phase *pp = &w->pp;
    pbd__kern ka;
    if (pp->sfluid[a] >= 0) ka = pp->fluids[pp->sfluid[a]].kern;
    else memset(&ka, 0, sizeof ka); /* a solid: no kernel of its own */
    pbd__v3 sum, contact;
    pbd__correction_sums(w, P, a, &ka, &sum, &contact);
    if (pp->sfluid[a] >= 0 && pp->nwall[a]) { /* the walls' share (see pbd__fluid_walls) */
        pbd__v3 gw;
        pbd__wall_density(pp, a, pbd__p3(P[a]), &ka, &gw);
        sum = pbd__add(sum, pbd__mul(gw, pp->lambda[a] * pp->fluids[pp->sfluid[a]].rest_density * ka.inv_rho0));
    }
    pbd__v3 dp = pbd__add(pbd__mul(sum, P[a].w), contact);
    pbd__p4 *p = &w->p[pp->sid[a]];
    p->x += dp.x;
    p->y += dp.y;
    p->z += dp.z;
}

/* The multiplier of slot a in iteration it (a solid's is 0), from the
   gathered positions. */
static PBD_HD void pbd__pp_lambda(pbd_world *w, int a, int it) {
    pbd__particle_phase *pp = &w->pp;
    if (pp->sfluid[a] >= 0) {
        pbd__fluid_lambda(w, pp->spos, a, it);
        return;
    }
    pp->lambda[a] = 0;
    pp->omega[a] = pp->spos[a];
    pp->omega[a].w = 0;
}

#if PBD__W > 1
/* Whether the phase has a particle in no fluid (the SIMD contacts' only
   users of pp->sxr): a fluid's particles are all in the phase. */
static int pbd__pp_has_solids(const pbd__particle_phase *pp) {
    int fluid = 0;
    for (int f = 0; f < pp->nfluids; ++f)
        if (pp->fluids[f].s.live) fluid += pp->fluids[f].count;
    return pp->np > fluid;
}
/* The substep's start positions and the radii in slot order (pp->sxr). */
static void pbd__pp_gather_start(pbd_world *w) {
    pbd__particle_phase *pp = &w->pp;
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < pp->np; ++a) {
        int i = pp->sid[a];
        pp->sxr[a] = w->x[i];
        pp->sxr[a].w = w->radius[i];
    }
}
#endif

/* One Jacobi iteration of contacts and density constraints: the
   positions gathered in slot order (the groups and colliders moved them
   since), multipliers, then the corrections, each added to its particle
   as soon as it is known (every pass reads the gathered copy, never
   w->p, so the order does not matter; each pass an `omp for`, whose
   barrier separates them). */
static void pbd__pp_project(pbd_world *w, int it) {
    pbd__particle_phase *pp = &w->pp;
    int np = pp->np;
    if (np == 0 || !(pp->reach > 0)) return;
    pbd__pp_gather(w, w->p);
#if PBD__W > 1
    if (it == 0 && w->simd && pbd__pp_has_solids(pp)) pbd__pp_gather_start(w); /* not for water alone */
#endif
    /* static halves, like the build, so that a thread reads the lists it
       wrote: that pays more than chunks dealt round the threads, which
       would balance the ~5% difference in work between the halves */
    if (pp->nfluids > 0) {
        PBD__PRAGMA(omp for schedule(static))
        for (int a = 0; a < np; ++a) pbd__pp_lambda(w, a, it);
    }
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) {
        if (a + PBD__SLOT_AHEAD < np) PBD__PREFETCH_W(&w->p[pp->sid[a + PBD__SLOT_AHEAD]]);
        pbd__pp_correction(w, pp->spos, a);
    }
}

/* One fluid neighbour's XSPH and curl terms for particle a (the SIMD twin
   below computes W of them with the same operations in the same order):
   dv = (v_b - v_a) vol W(r), om = (v_a - v_b) x grad W(p_a - p_b) vol. */
static inline PBD_HD void pbd__xsph_pair(const pbd__kern *k, float vol, pbd__v3 pa, pbd__v3 va, const pbd__p4 *xb,
                                         const pbd__p4 *vb, int vort, pbd__v3 *dv, pbd__v3 *om) {
    pbd__v3 d = pbd__sub(pa, pbd__p3(*xb));
    float r2 = pbd__dot(d, d);
    *dv = *om = pbd__v(0, 0, 0);
    if (!(r2 < k->h2)) return;
    pbd__v3 vab = pbd__sub(pbd__p3(*vb), va);
    *dv = pbd__mul(vab, vol * pbd__kpoly6(k, r2));
    if (vort) *om = pbd__mul(pbd__cross(pbd__neg(vab), pbd__kspiky(k, d, sqrtf(r2))), vol);
}

#if PBD__W > 1
/* The terms of W neighbours list[j..j+W) of a's own fluid (vol the same
   for all) into add (lanes past count: zero). */
static inline void pbd__vxsph_block(const pbd__kern *k, float vol, pbd__v3 pa, pbd__v3 va, const pbd__p4 *X,
                                    const pbd__p4 *V, const int *list, int j, int count, int vort, pbd__vf add[6]) {
    int pad[PBD__W];
    pbd__vf on;
    const int *ids = pbd__vblock_ids(list, j, count, pad, &on);
    pbd__vf zero = pbd__vset1(0.0f), h = pbd__vset1(k->h), vvol = pbd__vset1(vol);
    pbd__vp q = pbd__vgather(X, ids), vb = pbd__vgather(V, ids);
    pbd__vv d;
    d.x = pbd__vsub(pbd__vset1(pa.x), q.x);
    d.y = pbd__vsub(pbd__vset1(pa.y), q.y);
    d.z = pbd__vsub(pbd__vset1(pa.z), q.z);
    pbd__vf r2 = pbd__vvdot(d, d);
    pbd__vm in = pbd__vand_m(pbd__vlt(r2, pbd__vset1(k->h2)), pbd__vlt(zero, on));
    pbd__vv vab;
    vab.x = pbd__vsub(vb.x, pbd__vset1(va.x));
    vab.y = pbd__vsub(vb.y, pbd__vset1(va.y));
    vab.z = pbd__vsub(vb.z, pbd__vset1(va.z));
    pbd__vf dd = pbd__vsub(pbd__vset1(k->h2), r2);
    pbd__vf wp = pbd__vmul(pbd__vmul(pbd__vmul(pbd__vset1(k->c6), dd), dd), dd);
    pbd__vv dv = pbd__vvmul(vab, pbd__vmul(vvol, wp));
    add[0] = pbd__vsel(in, zero, dv.x);
    add[1] = pbd__vsel(in, zero, dv.y);
    add[2] = pbd__vsel(in, zero, dv.z);
    add[3] = add[4] = add[5] = zero;
    if (vort) {
        pbd__vf r = pbd__vsqrt(r2), s = pbd__vsub(h, r);
        pbd__vm ok = pbd__vand_m(in, pbd__vand_m(pbd__vlt(pbd__vset1(PBD__KERNEL_R_MIN * k->h), r), pbd__vlt(r, h)));
        pbd__vf coef = pbd__vdiv(pbd__vmul(pbd__vmul(pbd__vset1(k->cs), s), s), r);
        pbd__vv g;
        g.x = pbd__vsel(ok, zero, pbd__vmul(d.x, coef));
        g.y = pbd__vsel(ok, zero, pbd__vmul(d.y, coef));
        g.z = pbd__vsel(ok, zero, pbd__vmul(d.z, coef));
        pbd__vv om = pbd__vvmul(pbd__vvcross(pbd__vvneg(vab), g), vvol);
        add[3] = pbd__vsel(in, zero, om.x);
        add[4] = pbd__vsel(in, zero, om.y);
        add[5] = pbd__vsel(in, zero, om.z);
    }
}
#endif

/* XSPH velocity change (before the factor c) and SPH curl of fluid
   particle a from positions X and velocities V in slot order, summed in W
   lanes and added by pbd__lane_sum like the density pass. The terms of a
   particle with only its own fluid around come W at a time from SIMD
   blocks, the others one by one (the same bits: a neighbour that is not
   fluid adds nothing to its lane, and the lanes, which start at +0, are
   never -0, so the +0 of a SIMD lane out of range changes nothing). */
static PBD_HD void pbd__fluid_xsph(const pbd_world *w, const pbd__p4 *X, const pbd__p4 *V, int a, int vort, pbd__v3 *dv,
                                   pbd__v3 *om) {
    const pbd__particle_phase *pp = &w->pp;
    const pbd__fluid *f = &pp->fluids[pp->sfluid[a]];
    pbd__kern k = f->kern;
    pbd__v3 pa = pbd__p3(X[a]), va = pbd__p3(V[a]);
    const int *list = pp->nbr + pp->nbr_off[a];
    int count = pp->nbr_count[a];
    pbd__prefetch_list(list);
#if PBD__W > 1
    if (w->simd && pp->pure[a]) {
        pbd__vf sum[6];
        float s[8];
        for (int c = 0; c < 6; ++c) sum[c] = pbd__vset1(0.0f);
        for (int j = 0; j < count; j += PBD__W) {
            pbd__vf add[6];
            pbd__vxsph_block(&k, f->mass / f->rest_density, pa, va, X, V, list, j, count, vort, add);
            for (int c = 0; c < 6; ++c) sum[c] = pbd__vadd(sum[c], add[c]);
        }
        pbd__vlane_sum4(sum[0], sum[1], sum[2], sum[3], s);
        pbd__vlane_sum4(sum[4], sum[5], sum[5], sum[5], s + 4);
        *dv = pbd__v(s[0], s[1], s[2]);
        *om = pbd__v(s[3], s[4], s[5]);
        return;
    }
#endif
#if PBD__W == 1 /* lane by lane (see pbd__lane_tree) */
    pbd__lane_tree t;
    for (int i = pbd__lane_first(&t, w->lanes); i < t.lanes; ++i) {
        float v[6] = {0, 0, 0, 0, 0, 0};
        for (int j = pbd__lane_at(&t, i); j < count; j += t.lanes) {
            int b = list[j];
            if (pp->sfluid[b] < 0) continue;
            pbd__v3 d, o;
            pbd__xsph_pair(&k, pp->fluids[pp->sfluid[b]].mass / f->rest_density, pa, va, &X[b], &V[b], vort, &d, &o);
            pbd__lane_add2(v, d, o);
        }
        pbd__lane_push(&t, i, v, 6);
    }
    *dv = pbd__v(pbd__lane_total(&t, 0), pbd__lane_total(&t, 1), pbd__lane_total(&t, 2));
    *om = pbd__v(pbd__lane_total(&t, 3), pbd__lane_total(&t, 4), pbd__lane_total(&t, 5));
#else
    float acc[6][PBD__LANES_MAX];
    int L = w->lanes;
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < count; ++j) {
        int b = list[j], l = j % L;
        if (pp->sfluid[b] < 0) continue;
        pbd__v3 d, o;
        pbd__xsph_pair(&k, pp->fluids[pp->sfluid[b]].mass / f->rest_density, pa, va, &X[b], &V[b], vort, &d, &o);
        acc[0][l] += d.x;
        acc[1][l] += d.y;
        acc[2][l] += d.z;
        acc[3][l] += o.x;
        acc[4][l] += o.y;
        acc[5][l] += o.z;
    }
    *dv = pbd__v(pbd__lane_sum_n(acc[0], L), pbd__lane_sum_n(acc[1], L), pbd__lane_sum_n(acc[2], L));
    *om = pbd__v(pbd__lane_sum_n(acc[3], L), pbd__lane_sum_n(acc[4], L), pbd__lane_sum_n(acc[5], L));
#endif
}

/* The passes of pbd__fluid_velocities for slot a (each reads what the
   pass before wrote for every slot). */
static inline PBD_HD void pbd__fluid_gather_xv(pbd_world *w, int a) {
    pbd__particle_phase *pp = &w->pp;
    pp->spos[a] = w->x[pp->sid[a]];
    pp->svel[a] = w->v[pp->sid[a]];
}
/* the viscosity's velocity change (dp) and the curl (omega, omega_len) */
static PBD_HD void pbd__fluid_curl(pbd_world *w, int a, int vort) {
    pbd__particle_phase *pp = &w->pp;
    pbd__v3 dv = pbd__v(0, 0, 0), om = pbd__v(0, 0, 0);
    if (pp->sfluid[a] >= 0) {
        pbd__fluid_xsph(w, pp->spos, pp->svel, a, vort, &dv, &om);
        dv = pbd__mul(dv, pp->fluids[pp->sfluid[a]].viscosity);
    }
    pp->dp[a].x = dv.x;
    pp->dp[a].y = dv.y;
    pp->dp[a].z = dv.z;
    pp->dp[a].w = 0;
    pp->omega[a].x = om.x;
    pp->omega[a].y = om.y;
    pp->omega[a].z = om.z;
    pp->omega[a].w = 0;
    pp->omega_len[a] = pbd__len(om);
}
/* vorticity confinement, added to dp */
static PBD_HD void pbd__fluid_vorticity(pbd_world *w, int a, float h) {
    pbd__particle_phase *pp = &w->pp;
    if (pp->sfluid[a] < 0 || !(pp->fluids[pp->sfluid[a]].vorticity > 0)) return;
    const pbd__fluid *f = &pp->fluids[pp->sfluid[a]];
    const pbd__p4 *X = pp->spos;
    float kh = f->kernel_radius;
    pbd__v3 pa = pbd__p3(X[a]), eta = pbd__v(0, 0, 0);
    const int *list = pp->nbr + pp->nbr_off[a];
    pbd__prefetch_list(list);
    for (int s = 0; s < pp->nbr_count[a]; ++s) {
        int b = list[s];
        if (pp->sfluid[b] < 0) continue;
        pbd__v3 d = pbd__sub(pa, pbd__p3(X[b]));
        float r2 = pbd__dot(d, d);
        if (r2 >= kh * kh) continue;
        float vol = pp->fluids[pp->sfluid[b]].mass / f->rest_density;
        eta = pbd__add(eta, pbd__mul(pbd__spiky_grad(d, sqrtf(r2), kh), vol * (pp->omega_len[b] - pp->omega_len[a])));
    }
    float le = pbd__len(eta);
    if (!(le > PBD__DIR_MIN)) return;
    pbd__v3 N = pbd__mul(eta, 1.0f / le), om = pbd__v(pp->omega[a].x, pp->omega[a].y, pp->omega[a].z);
    pbd__v3 acc = pbd__mul(pbd__cross(N, om), f->vorticity);
    pp->dp[a].x += h * acc.x;
    pp->dp[a].y += h * acc.y;
    pp->dp[a].z += h * acc.z;
}
/* dp onto the particle's velocity (not a pinned one's) */
static inline PBD_HD void pbd__fluid_velocity_apply(pbd_world *w, int a) {
    pbd__particle_phase *pp = &w->pp;
    pbd__p4 *v = &w->v[pp->sid[a]];
    if (pp->spos[a].w == 0) return;
    v->x += pp->dp[a].x;
    v->y += pp->dp[a].y;
    v->z += pp->dp[a].z;
}

/* After v = (p - x) / h: XSPH viscosity v_a += c sum_b m_b/rho_0 (v_b - v_a) W_ab
   and vorticity confinement (Macklin and Mueller 2013, eqs. 15-17):
   omega_a = sum_b m_b/rho_0 (v_a - v_b) x grad W(p_a - p_b) (the SPH curl),
   eta = grad |omega|, N = eta / |eta|, v_a += h eps (N x omega_a).
   Fluid neighbours only; Jacobi (old velocities in, dp as the new), on
   positions and velocities gathered in slot order. */
/* Whether a fluid has viscosity or vorticity; *vort: vorticity. */
static int pbd__fluid_velocity_work(const pbd_world *w, int *vort) {
    const pbd__particle_phase *pp = &w->pp;
    int any = 0;
    *vort = 0;
    for (int f = 0; f < pp->nfluids; ++f) {
        any |= pp->fluids[f].viscosity > 0 || pp->fluids[f].vorticity > 0;
        *vort |= pp->fluids[f].vorticity > 0;
    }
    return any;
}
static void pbd__fluid_velocities(pbd_world *w, float h) {
    pbd__particle_phase *pp = &w->pp;
    int np = pp->np, vort;
    if (np == 0 || !(pp->reach > 0) || !pbd__fluid_velocity_work(w, &vort)) return;
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) {
        if (a + PBD__SLOT_AHEAD < np) {
            PBD__PREFETCH(&w->x[pp->sid[a + PBD__SLOT_AHEAD]]);
            PBD__PREFETCH(&w->v[pp->sid[a + PBD__SLOT_AHEAD]]);
        }
        pbd__fluid_gather_xv(w, a);
    }
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) pbd__fluid_curl(w, a, vort);
    if (vort) {
        PBD__PRAGMA(omp for schedule(static))
        for (int a = 0; a < np; ++a) pbd__fluid_vorticity(w, a, h);
    }
    PBD__PRAGMA(omp for schedule(static))
    for (int a = 0; a < np; ++a) {
        if (a + PBD__SLOT_AHEAD < np) PBD__PREFETCH_W(&w->v[pp->sid[a + PBD__SLOT_AHEAD]]);
        pbd__fluid_velocity_apply(w, a);
    }
}

/* --- hooks of the substep (pbd__substep_body) and queries ------------------ */

/* s_corr is an artificial pressure, but it acts as a position correction
   in every iteration, so its push per unit time grows like 1 / h^2 with the
   substep h while gravity's does not: unscaled, it boils a resting 5 cm
   tank at 16 substeps of 1/60 s and throws the surface layer of a 10 cm
   tank up at 4. Its k is therefore the value at the substep
   h_ref = 0.07 sqrt(d / 9.81 m/s^2) (the gravity_cfl bound k is tuned
   for, under standard gravity; at the default 0.06 it is scaled by 0.73)
   and is scaled by (h / h_ref)^2 below it, never up (serial, before the
   substeps). */
static float pbd__fluid_begin_params(pbd_world *w, float h) {
    for (int i = 0; i < w->pp.nfluids; ++i) {
        pbd__fluid *f = &w->pp.fluids[i];
        float q = h / (0.07f * sqrtf(f->spacing / 9.81f));
        f->kern.scorr = f->kern.scorr_full * (q < 1.0f ? q * q : 1.0f);
    }
    pbd__particle_phase *pp = &w->pp;
    float r = pp->nfluids > 0 && pp->pressure_h > 0 && h < pp->pressure_h ? h / pp->pressure_h : 0.0f;
    pp->pressure_h = h;
    return r; /* the pressures' scale, only down (0: none; see pbd__fluid_lambda), squared by pbd__fluid_rescale */
}
static inline PBD_HD void pbd__fluid_rescale(pbd_world *w, int i, float r) {
    if (w->flags[i] & PBD__FLUID) w->pressure[i] *= r * r;
}
static void pbd__fluid_begin_step(pbd_world *w, float h) {
    float r = pbd__fluid_begin_params(w, h);
    if (r > 0)
        for (int i = 0; i < w->n; ++i) pbd__fluid_rescale(w, i, r);
}

/* The most substeps a step takes (fluids' and cloths' bounds included):
   the largest pbd_world_desc.substeps. */
#define PBD__MAX_SUBSTEPS 1000
/* The substeps a step of dt needs for the fluids' gravity_cfl bound
   h sqrt(|g| / d) <= gravity_cfl (at least 1; at most PBD__MAX_SUBSTEPS).
   Why: the density constraints' iterations supply the pressure from the
   current compression (only half of the last substep's is carried over,
   see pbd__fluid_lambda), so a resting column of N layers holds itself
   up only by a density error that grows from the surface down by about
   g h^2 / (d iterations) per layer, halved by the warm start: its bottom
   is compressed by about N (h sqrt(g / d))^2 / (2 iterations) (30
   layers, 4 iterations, 5 mm at the default 0.06, h sqrt(g/d) = 0.057:
   1.0%; the default keeps the height lost under 1%, see "// ==== fluids"),
   and once that passes 20-30% the Jacobi corrections of the close, steep
   spiky gradients overshoot and the column explodes (as at
   h sqrt(g/d) = 0.26: 1 cm with 2 substeps of 1/60 s). sqrt(g d) is the
   speed a particle gains falling one spacing, so this is a CFL number for
   it. */
static int pbd__fluid_substeps(const pbd_world *w, float dt) {
    const pbd__particle_phase *pp = &w->pp;
    float g = sqrtf(w->gravity[0] * w->gravity[0] + w->gravity[1] * w->gravity[1] + w->gravity[2] * w->gravity[2]);
    double need = 1;
    for (int i = 0; i < pp->nfluids; ++i) {
        const pbd__fluid *f = &pp->fluids[i];
        if (!(f->gravity_cfl > 0) || !(g > 0)) continue;
        double n = ceil((double)dt * sqrt((double)g / f->spacing) / f->gravity_cfl - PBD__CEIL_SLACK);
        need = n > need ? n : need;
    }
    return need < PBD__MAX_SUBSTEPS ? (int)need : PBD__MAX_SUBSTEPS;
}

/* The substeps a step of dt needs for the grains' granular_cfl bound
   h sqrt(|g| / r) <= granular_cfl, r the smallest radius of a grain: a
   dynamic particle with particle contact in no object and no fluid (an
   object's own constraints hold its shape; a fluid has its bound); at
   least 1, at most PBD__MAX_SUBSTEPS. Why: a resting pile holds itself up
   only by the overlaps its Jacobi iterations find. Gravity moves every
   grain by g h^2 a substep and each iteration gives a pair back a share
   1 / (contact load) of its overlap (pbd__pp_contact), so the overlaps
   grow from the top of a pile down by about 2 g h^2 / (iterations share)
   per layer; for a heap of 1 cm grains at 60 Hz and 4 iterations
   (h sqrt(g/r) = 0.13 at the world's 4 substeps) they pass a radius and
   the heap slumps into a 4 cm pancake whatever its friction; at 8
   substeps (0.065) its worst overlap is 13-22%, at 16 (0.033) 7%, and
   its slope follows the friction (tests/test_particle_contact.c). The
   overlaps grow with the pile's height: a 20-grain column at 16 stands
   with its worst overlap 19%. */
static int pbd__grain_substeps(const pbd_world *w, float dt) {
    const pbd__particle_phase *pp = &w->pp;
    float g = sqrtf(w->gravity[0] * w->gravity[0] + w->gravity[1] * w->gravity[1] + w->gravity[2] * w->gravity[2]);
    if (!(w->granular_cfl > 0) || !(g > 0)) return 1;
    float r = 0;
    for (int k = 0; k < pp->np; ++k) {
        int i = pp->ids[k];
        if (pp->fluid[k] >= 0 || pp->object[k] >= 0 || !(w->x[i].w > 0) || !(w->flags[i] & PBD__COLLIDE)) continue;
        if (w->radius[i] > 0 && (r == 0 || w->radius[i] < r)) r = w->radius[i];
    }
    if (!(r > 0)) return 1;
    double need = ceil((double)dt * sqrt((double)g / r) / w->granular_cfl - PBD__CEIL_SLACK);
    return need < 1 ? 1 : need < PBD__MAX_SUBSTEPS ? (int)need : PBD__MAX_SUBSTEPS;
}

/* The iterations of a substep's particle phase (fluid density, particle
   contact) and collider contacts: the world's, and at least
   PBD_FLUID_MIN_ITERATIONS while the world has a fluid. Why: a resting
   column is held up by the compression its iterations find (see
   pbd__fluid_substeps), and below 4 the Jacobi corrections overshoot
   long before the 20-30% that explodes a column at 4: at 1 iteration a
   20-layer 5 cm column explodes at 60 Hz (compression predicted 3.4%), at
   2 a 60-layer one (5.1%), at 3 the 60-layer one throws particles 2.3 m
   over its surface (see "// ==== fluids"). The groups, strands, plugins and
   self-collision keep the world's count (a multi-resolution cloth's
   one V-cycle per substep stays one); only the fluid's projection and the
   contacts, which must have the last word after it, run the extra
   iterations (pbd__substep_body). */
static int pbd__fluid_iterations(const pbd_world *w) {
    int n = w->iterations;
    return n < PBD_FLUID_MIN_ITERATIONS && pbd_world_fluid_count(w) > 0 ? PBD_FLUID_MIN_ITERATIONS : n;
}

/* Whether substep s builds the lists (see PBD__PP_SKIN); every thread
   of the substep's team gets the same answer. */
static int pbd__pp_lists_stale(pbd_world *w, int s) {
    pbd__particle_phase *pp = &w->pp;
    if (s == 0 || pp->nfluids > 0 || !(pp->reach > 0)) return 1;
    PBD__PRAGMA(omp single)
    pp->stale = 0;
    int moved = 0;
    PBD__PRAGMA(omp for schedule(static) nowait)
    for (int k = 0; k < pp->np; ++k) moved |= pbd__pp_moved(w, w->p, k);
    if (moved) {
        PBD__PRAGMA(omp atomic write)
        pp->stale = 1;
    }
    PBD__PRAGMA(omp barrier)
    return pp->stale;
}
static void pbd__pp_begin_substep(pbd_world *w, int s) {
    if (w->pp.np > 0 && pbd__pp_lists_stale(w, s)) pbd__pp_build(w, w->p, 1);
    else if (w->pp.np > 0 && w->pp.reach > 0) {
        PBD__PRAGMA(omp for schedule(static))
        for (int a = 0; a < w->pp.np; ++a) pbd__pp_activate(w, w->p, a);
    }
    if (w->pp.nfluids > 0) pbd__fluid_walls(w, w->p);
}
static void pbd__pp_end_substep(pbd_world *w, float h) {
    if (w->pp.nfluids > 0) pbd__fluid_velocities(w, h);
}

PBDDEF pbd_result pbd_fluid_densities(pbd_world *w, pbd_fluid handle, float *out, int max, int *count) {
    PBD__CHECK_WORLD_READ(w); /* it changes scratch only: a GPU world needs no upload after it */
    int fi;
    PBD__TRY(pbd__fluid_index(w, handle, &fi));
    PBD__TRY(pbd__check_list(w, out, max, count));
    const pbd__fluid *f = &w->pp.fluids[fi];
    *count = f->count;
    if (max == 0) return PBD_OK;
    pbd__pp_build(w, w->x, 0);                      /* serial: the orphaned pragmas run on this thread alone */
    w->gpu_host_stale &= ~PBD__GPU_STALE_NEIGHBORS; /* the host's lists are now the newer */
    for (int c = 0; c < w->ncolliders; ++c)         /* the planes at the colliders' current poses */
        if (w->colliders[c].s.live) w->pose_to[c] = pbd__collider_pose(&w->colliders[c], 1.0f);
    pbd__fluid_walls(w, w->x);
    pbd__pp_gather(w, w->x);
    pbd__particle_phase *pp = &w->pp;
    for (int a = 0; a < pp->np; ++a) {
        if (pp->sfluid[a] != fi) continue;
        int k = pp->sid[a] - f->first;
        if (k >= max) continue;
        pbd__fluid_lambda(w, pp->spos, a, -1);
        out[k] = pp->density[a] * f->kern.inv_rho0;
    }
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_query_particles(pbd_world *w, const float *point, float radius, int *out, int max,
                                            int *count) {
    PBD__CHECK_WORLD_READ(w); /* the grid is scratch */
    PBD__CHECK_PTR(w, point, "point");
    PBD__TRY(pbd__check_finite(w, point, 3, "point"));
    if (!pbd__finite(radius) || !(radius >= 0))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "radius must be finite and >= 0");
    PBD__TRY(pbd__check_list(w, out, max, count));
    pbd__particle_phase *pp = &w->pp;
    *count = 0;
    if (pp->np == 0) return PBD_OK;
    float cell = radius > 0 ? radius : 1.0f;
    pbd__grid_build(&pp->grid, &w->x[0].x, 4, pp->ids, pp->np, cell);
    int found = pbd__grid_query(&pp->grid, pbd__ld(point), radius, out, max);
    for (int i = 0; i < found && i < max; ++i) out[i] = pp->ids[out[i]];
    *count = found;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_particle_neighbors(const pbd_world *w, int particle, int *out, int max, int *count) {
    if (!w) return pbd__null_world();
    pbd__gpu_sync_also(w, PBD__GPU_STALE_NEIGHBORS);
    PBD__TRY(pbd__check_particle(w, particle, "particle"));
    PBD__TRY(pbd__check_list(w, out, max, count));
    const pbd__particle_phase *pp = &w->pp;
    int lo = 0, hi = pp->np - 1, a = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (pp->ids[mid] == particle) {
            a = mid;
            break;
        }
        if (pp->ids[mid] < particle) lo = mid + 1;
        else hi = mid - 1;
    }
    *count = 0;
    if (a < 0) return PBD_OK;
    a = pp->slot[a];
    const int *list = pp->nbr + pp->nbr_off[a];
    for (int s = 0; s < pp->nbr_count[a]; ++s)
        if (s < max) out[s] = pp->sid[list[s]];
    *count = pp->nbr_count[a];
    return PBD_OK;
}

/* --- snapshot ----------------------------------------------------------------- */

static void pbd__io_particle_phase(pbd__io *io, pbd_world *w) {
    pbd__particle_phase *pp = &w->pp;
    pbd__io_float(io, &pp->mu_s);
    pbd__io_float(io, &pp->mu_d);
    pbd__io_float(io, &pp->pressure_h);
    pbd__io_int(io, &pp->nfluids);
    if (io->bad) return;
    if (io->in) {
        if (pp->nfluids < 0) {
            io->bad = 1;
            return;
        }
        pp->fluid_cap = pp->nfluids;
    }
    if (io->in) {
        pbd__io_array(io, w, (void **)&pp->fluids, pp->nfluids, sizeof(pbd__fluid));
        return;
    }
    for (int f = 0; f < pp->nfluids; ++f) { /* the derived kernel constants as zeros: save(restore(s)) == s */
        pbd__fluid rec;
        memcpy(&rec, &pp->fluids[f], sizeof rec);
        memset(&rec.kern, 0, sizeof rec.kern);
        pbd__io_bytes(io, &rec, sizeof rec);
    }
}

/* Fluids: sorted disjoint ranges with valid parameters, their particles
   (and only theirs) flagged fluid; friction in range. */
static pbd_result pbd__validate_particle_phase(const pbd_world *t) {
    const pbd__particle_phase *pp = &t->pp;
    if (!pbd__finite(pp->mu_s) || !pbd__finite(pp->mu_d) || pp->mu_s < 0 || pp->mu_d < 0 || pp->mu_d > pp->mu_s ||
        !pbd__finite(pp->pressure_h) || pp->pressure_h < 0)
        return PBD_ERROR_BAD_SNAPSHOT;
    for (int i = 0; i < t->n; ++i) /* a multiplier only pushes (pbd__fluid_lambda), and only in a fluid */
        if (!pbd__finite(t->pressure[i]) || t->pressure[i] > 0 || (t->pressure[i] != 0 && !(t->flags[i] & PBD__FLUID)))
            return PBD_ERROR_BAD_SNAPSHOT;
    for (int fi = 0; fi < pp->nfluids; ++fi) {
        const pbd__fluid *f = &pp->fluids[fi];
        if (!f->s.live) continue;
        if (f->count <= 0 || f->first < 0 || f->first > t->n - f->count || !pbd__finite_n(&f->rest_density, 13) ||
            !(f->denominator > 0) || !(f->rest_density > 0) || !(f->spacing > 0) ||
            !pbd__fluid_kernel_ok(f->kernel_radius, f->spacing) || !(f->mass > 0) || f->relaxation < 0 ||
            f->viscosity < 0 || f->viscosity > 1 || f->vorticity < 0 || f->scorr_k < 0 ||
            !(f->scorr_n >= 1 && f->scorr_n <= 16) || !(f->scorr_dq > 0 && f->scorr_dq < 1) || !pbd__finite(f->eps) ||
            f->eps < 0 || f->gravity_cfl < 0 || f->vorticity > PBD_FLUID_VORTICITY_MAX * sqrt(9.81 * f->spacing) ||
            !(pbd__fluid_scorr_sum(f->scorr_k, f->scorr_n, f->scorr_dq, f->kernel_radius, f->spacing) <=
              PBD_FLUID_SCORR_MAX))
            return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int i = 0; i < t->n; ++i) /* pbd__owners_build has checked the ranges */
        if ((t->owner[i] <= -2) != ((t->flags[i] & PBD__FLUID) != 0)) return PBD_ERROR_BAD_SNAPSHOT;
    return PBD_OK;
}

// ==== strain limiting =======================================================

static void pbd__damp_particles(pbd_world *w, const int *list, int first, int count, float k);
static float pbd__damp_fraction(float damping, float h);

/* A set of long range attachments: particle particles[k] has the tethers
   [start[k], start[k+1]) to anchor[t] of length[t]. reach (NULL when
   no memory) holds the limits the projection uses, >= length, and their
   copy for a rollback: see "tethers that give way". */
typedef struct pbd__lra {
    pbd__slot s;
    int count, enabled;
    int *particles, *start, *anchor;
    float *length, *reach;
} pbd__lra;

/* A strain-limit set: a private group (never in w->groups) that reuses the
   colouring of the constraint groups. Triangles: arity 3, rest (a, b, c),
   the rest shape in 2D, X0 = (0, 0), X1 = (a, 0), X2 = (b, c). Edges:
   arity 2, rest length. */
typedef struct pbd__limit {
    pbd__slot s;
    int mode, enabled;
    float lo, hi, stiffness;
    pbd__group g;
} pbd__limit;

PBDDEF pbd_lra_desc pbd_lra_desc_default(void) {
    pbd_lra_desc d;
    memset(&d, 0, sizeof d);
    d.anchors_per_particle = 1;
    return d;
}

PBDDEF pbd_strain_limit_desc pbd_strain_limit_desc_default(void) {
    pbd_strain_limit_desc d;
    memset(&d, 0, sizeof d);
    d.mode = PBD_STRAIN_TRIANGLES;
    d.min_stretch = 0.9f;
    d.max_stretch = 1.1f;
    d.stiffness = 1.0f;
    return d;
}

/* The slot of an object handle the caller has checked (-1: none). */
static int pbd__oi(pbd_object o) { return pbd__slot_index(o.id); }
static pbd_result pbd__check_object_handle(const pbd_world *w, pbd_object o) {
    int oi;
    return pbd__object_index(w, o, &oi);
}

static pbd_result pbd__check_object(const pbd_world *w, int o) {
    if (o < 0 || o >= w->nobjects)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "object %d does not exist (0..%d)", o, w->nobjects - 1);
    return PBD_OK;
}

/* Triangles of an object's vertices (numbered as its builder's mesh; or
   of world particles when object < 0) as world particle indices,
   validated; free with pbd__free. */
static pbd_result pbd__world_triangles(pbd_world *w, int object, const int *tri, int nt, int **out) {
    *out = NULL;
    int first = 0, nv = w->n;
    const int *perm = NULL; /* a reordered object's: triangles use the builder's vertex numbers */
    if (object >= 0) {
        PBD__TRY(pbd__check_object(w, object));
        first = w->objects[object].first;
        nv = w->objects[object].count;
        perm = w->objects[object].perm;
    }
    if (object >= 0) PBD__TRY(pbd__validate_triangles(w, tri, nt, nv, "desc.triangles"));
    else PBD__TRY(pbd__validate_world_triangles(w, tri, nt, "desc.triangles"));
    int *t = (int *)pbd__alloc_n(w, (size_t)nt * 3, sizeof(int));
    if (!t) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for %d triangles", nt);
    for (long k = 0; k < 3L * nt; ++k) t[k] = first + (perm ? perm[tri[k]] : tri[k]);
    *out = t;
    return PBD_OK;
}

/* --- long range attachments ------------------------------------------------ */

/* Adjacency (CSR over n vertices: the world's particles, and during a
   tear the particles it is about to add) of an edge list with weights. */
typedef struct pbd__graph {
    int n, *start, *to;
    double *len;
} pbd__graph;
static void pbd__graph_free(pbd_world *w, pbd__graph *g) {
    pbd__free(w, g->start);
    pbd__free(w, g->to);
    pbd__free(w, g->len);
    memset(g, 0, sizeof *g);
}
static int pbd__graph_build(pbd_world *w, int n, const int *edges, const double *len, long ne, pbd__graph *g) {
    g->n = n;
    g->start = (int *)pbd__alloc_n(w, (size_t)n + 1, sizeof(int));
    g->to = (int *)pbd__alloc_n(w, (size_t)(2 * ne), sizeof(int));
    g->len = (double *)pbd__alloc_n(w, (size_t)(2 * ne), sizeof(double));
    if (!g->start || !g->to || !g->len) {
        pbd__graph_free(w, g);
        return 0;
    }
    memset(g->start, 0, sizeof(int) * ((size_t)n + 1));
    for (long e = 0; e < ne; ++e) {
        g->start[edges[2 * e] + 1]++;
        g->start[edges[2 * e + 1] + 1]++;
    }
    for (int i = 0; i < n; ++i) g->start[i + 1] += g->start[i];
    int *fill = (int *)pbd__alloc_n(w, (size_t)n + 1, sizeof(int));
    if (!fill) {
        pbd__graph_free(w, g);
        return 0;
    }
    memcpy(fill, g->start, sizeof(int) * ((size_t)n + 1));
    for (long e = 0; e < ne; ++e)
        for (int s = 0; s < 2; ++s) {
            int a = edges[2 * e + s], b = edges[2 * e + 1 - s];
            g->to[fill[a]] = b;
            g->len[fill[a]++] = len[e];
        }
    pbd__free(w, fill);
    return 1;
}

/* A binary heap of (distance, label rank, vertex) with lazy deletion; ties
   by rank, then by vertex index, so every search is deterministic. */
typedef struct pbd__heap_item {
    double d;
    int r, v; /* the rank of the source a path starts from (0 where unlabelled), its vertex */
} pbd__heap_item;
static int pbd__heap_less(pbd__heap_item a, pbd__heap_item b) {
    return a.d < b.d || (a.d == b.d && (a.r < b.r || (a.r == b.r && a.v < b.v)));
}
static void pbd__heap_push(pbd__heap_item *h, long *n, pbd__heap_item it) {
    long k = (*n)++;
    for (; k > 0 && pbd__heap_less(it, h[(k - 1) / 2]); k = (k - 1) / 2) h[k] = h[(k - 1) / 2];
    h[k] = it;
}
static pbd__heap_item pbd__heap_pop(pbd__heap_item *h, long *n) {
    pbd__heap_item top = h[0], last = h[--*n];
    long k = 0;
    for (;;) { /* sift the last item down from the root */
        long c = 2 * k + 1;
        if (c >= *n) break;
        if (c + 1 < *n && pbd__heap_less(h[c + 1], h[c])) c++;
        if (!pbd__heap_less(h[c], last)) break;
        h[k] = h[c];
        k = c;
    }
    if (*n > 0) h[k] = last;
    return top;
}

/* Dijkstra from the sources (distance 0) over the graph: dist (g->n, INF
   where unreachable) and, when label is not NULL, the source each shortest
   path starts from. */
static int pbd__dijkstra(pbd_world *w, const pbd__graph *g, const int *src, int nsrc, double *dist, int *label) {
    long cap = (long)g->start[g->n] + nsrc + 1;
    pbd__heap_item *h = (pbd__heap_item *)pbd__alloc_n(w, (size_t)cap, sizeof *h);
    if (!h) return 0;
    long n = 0;
    for (int i = 0; i < g->n; ++i) dist[i] = HUGE_VAL;
    for (int s = 0; s < nsrc; ++s) {
        if (dist[src[s]] == 0) continue;
        dist[src[s]] = 0;
        if (label) label[src[s]] = src[s];
        pbd__heap_item it = {0.0, 0, src[s]};
        pbd__heap_push(h, &n, it);
    }
    while (n > 0) {
        pbd__heap_item top = pbd__heap_pop(h, &n);
        if (top.d > dist[top.v]) continue; /* stale */
        for (int e = g->start[top.v]; e < g->start[top.v + 1]; ++e) {
            double nd = top.d + g->len[e];
            int u = g->to[e];
            if (!(nd < dist[u])) continue;
            dist[u] = nd;
            if (label) label[u] = label[top.v];
            pbd__heap_item it = {nd, 0, u};
            pbd__heap_push(h, &n, it);
        }
    }
    pbd__free(w, h);
    return 1;
}

static int pbd__has_rank(const int *ranks, int count, int r) {
    for (int j = 0; j < count; ++j)
        if (ranks[j] == r) return 1;
    return 0;
}

/* The k nearest sources of every vertex in one search: near_d and near_r
   (g->n * k) hold vertex v's distances and source ranks (indices into src)
   at v * k.., by distance, ties by rank (what one search per source kept
   by pbd__keep_nearest gives), HUGE_VAL and -1 past those that reach it.
   Each vertex is settled once per source, at most k times: a source among
   the k nearest of v is among the k nearest of the vertex before v on its
   shortest path (k sources nearer that vertex would be nearer v too), so
   the other labels need not travel. Why not one search per source: a
   cloth's tethers are rebuilt at every pin, and a user pinning hundreds of
   vertices one call at a time then paid hundreds of searches for each
   (quadratic: pbd_upsample.h's training cape pinned 400 of 5929 vertices
   in 50 s). */
static int pbd__dijkstra_nearest(pbd_world *w, const pbd__graph *g, const int *src, int nsrc, int k, double *near_d,
                                 int *near_r) {
    long cap = (long)k * g->start[g->n] + nsrc + 1;
    pbd__heap_item *h = (pbd__heap_item *)pbd__alloc_n(w, (size_t)cap, sizeof *h);
    int *settled = (int *)pbd__alloc_n(w, (size_t)g->n, sizeof(int));
    if (!h || !settled) {
        pbd__free(w, h);
        pbd__free(w, settled);
        return 0;
    }
    long n = 0;
    memset(settled, 0, sizeof(int) * (size_t)g->n);
    for (long j = 0; j < (long)g->n * k; ++j) {
        near_d[j] = HUGE_VAL;
        near_r[j] = -1;
    }
    for (int s = 0; s < nsrc; ++s) {
        pbd__heap_item it = {0.0, s, src[s]};
        pbd__heap_push(h, &n, it);
    }
    while (n > 0) {
        pbd__heap_item top = pbd__heap_pop(h, &n);
        int v = top.v, *rv = near_r + (size_t)v * k;
        if (settled[v] >= k || pbd__has_rank(rv, settled[v], top.r)) continue; /* full, or stale */
        near_d[(size_t)v * k + settled[v]] = top.d;
        rv[settled[v]++] = top.r;
        for (int e = g->start[v]; e < g->start[v + 1]; ++e) {
            int u = g->to[e];
            if (settled[u] >= k || pbd__has_rank(near_r + (size_t)u * k, settled[u], top.r)) continue;
            pbd__heap_item it = {top.d + g->len[e], top.r, u};
            pbd__heap_push(h, &n, it);
        }
    }
    pbd__free(w, h);
    pbd__free(w, settled);
    return 1;
}

/* Keeps the k smallest (distance, anchor) per particle, sorted, ties by
   anchor order (strictly smaller replaces). */
static void pbd__keep_nearest(double *bd, int *ba, int k, double d, int anchor) {
    if (!(d < bd[k - 1])) return;
    int j = k - 1;
    while (j > 0 && d < bd[j - 1]) {
        bd[j] = bd[j - 1];
        ba[j] = ba[j - 1];
        --j;
    }
    bd[j] = d;
    ba[j] = anchor;
}

/* The mesh edges for geodesics: the object's stretch group (rest lengths)
   or the triangles' edges (current lengths). */
static pbd_result pbd__lra_edges(pbd_world *w, const pbd_lra_desc *d, int **edges, double **len, long *ne) {
    *edges = NULL;
    *len = NULL;
    *ne = 0;
    if (d->object.id != 0) {
        int gs = w->objects[pbd__oi(d->object)].groups[0];
        if (gs < 0 || w->groups[gs].type != PBD_CONSTRAINT_DISTANCE)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "object %d has no stretch group for geodesics",
                             pbd__oi(d->object));
        const pbd__group *g = &w->groups[gs];
        *edges = (int *)pbd__alloc_n(w, (size_t)g->count * 2, sizeof(int));
        *len = (double *)pbd__alloc_n(w, (size_t)g->count, sizeof(double));
        if (!*edges || !*len) goto oom;
        memcpy(*edges, g->idx, sizeof(int) * 2 * (size_t)g->count);
        for (int c = 0; c < g->count; ++c) (*len)[c] = g->rest[c];
        *ne = g->count;
        return PBD_OK;
    }
    PBD__TRY(pbd__validate_world_triangles(w, d->triangles, d->triangle_count, "desc.triangles"));
    *edges = (int *)pbd__alloc_n(w, (size_t)d->triangle_count * 6, sizeof(int));
    *len = (double *)pbd__alloc_n(w, (size_t)d->triangle_count * 3, sizeof(double));
    if (!*edges || !*len) goto oom;
    for (long k = 0; k < 3L * d->triangle_count; ++k) {
        int a = d->triangles[k], b = d->triangles[k % 3 == 2 ? k - 2 : k + 1];
        (*edges)[2 * k] = a;
        (*edges)[2 * k + 1] = b;
        (*len)[k] = pbd__len(pbd__sub(pbd__p3(w->x[a]), pbd__p3(w->x[b])));
    }
    *ne = 3L * d->triangle_count;
    return PBD_OK;
oom:
    pbd__free(w, *edges);
    pbd__free(w, *len);
    *edges = NULL;
    *len = NULL;
    return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the mesh edges");
}

static pbd_result pbd__validate_lra(pbd_world *w, const pbd_lra_desc *d, unsigned char *mark) {
    if (d->object.id) PBD__TRY(pbd__check_object_handle(w, d->object));
    PBD__CHECK_PTR(w, d->anchors, "desc.anchors");
    if (d->anchor_count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "anchor count %d <= 0", d->anchor_count);
    for (int k = 0; k < d->anchor_count; ++k) PBD__TRY(pbd__check_particle(w, d->anchors[k], "anchor"));
    if (d->object.id == 0 && !d->particles)
        return pbd__fail(w, PBD_ERROR_NULL_POINTER, "desc.particles is NULL and there is no object");
    if (d->particles) {
        if (d->count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle count %d <= 0", d->count);
        for (int k = 0; k < d->count; ++k) {
            PBD__TRY(pbd__check_particle(w, d->particles[k], "particle"));
            if (mark[d->particles[k]])
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d is listed twice", d->particles[k]);
            mark[d->particles[k]] = 1;
        }
    }
    PBD__TRY(pbd__check_switch(w, d->geodesic, "geodesic"));
    if (d->anchors_per_particle < 1 || d->anchors_per_particle > 16)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "anchors_per_particle %d outside 1..16",
                         d->anchors_per_particle);
    if (!pbd__finite(d->slack)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "slack is not finite");
    if (d->slack < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "slack %g < 0", (double)d->slack);
    return PBD_OK;
}

static void pbd__lra_free(pbd_world *w, pbd__lra *l) {
    pbd__free(w, l->particles);
    pbd__free(w, l->start);
    pbd__free(w, l->anchor);
    pbd__free(w, l->length);
    pbd__free(w, l->reach);
    pbd__slot keep = l->s;
    memset(l, 0, sizeof *l);
    l->s = keep;
}

/* Fills a set from the k nearest anchors (bd/ba: k per particle). */
static pbd_result pbd__lra_fill(pbd_world *w, pbd__lra *l, const int *parts, int np, const double *bd, const int *ba,
                                int k, float slack) {
    long nt = 0;
    for (long j = 0; j < (long)np * k; ++j) nt += bd[j] < HUGE_VAL;
    l->count = np;
    l->enabled = 1;
    l->particles = (int *)pbd__alloc_n(w, (size_t)np, sizeof(int));
    l->start = (int *)pbd__alloc_n(w, (size_t)np + 1, sizeof(int));
    l->anchor = (int *)pbd__alloc_n(w, (size_t)(nt > 0 ? nt : 1), sizeof(int));
    l->length = (float *)pbd__alloc_n(w, (size_t)(nt > 0 ? nt : 1), sizeof(float));
    if (!l->particles || !l->start || !l->anchor || !l->length) {
        pbd__lra_free(w, l);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for %ld tethers", nt);
    }
    long t = 0;
    for (int p = 0; p < np; ++p) {
        l->particles[p] = parts[p];
        l->start[p] = (int)t;
        for (int j = 0; j < k; ++j)
            if (bd[(size_t)p * k + j] < HUGE_VAL) {
                l->anchor[t] = ba[(size_t)p * k + j];
                l->length[t++] = (float)bd[(size_t)p * k + j] * (1.0f + slack);
            }
    }
    l->start[np] = (int)t;
    return PBD_OK;
}

/* The k nearest anchors of each listed particle along the mesh (bd, ba: np * k),
   itself excluded (an anchor in the list is tethered to k others): its
   k + 1 nearest sources from one labelled search. */
static pbd_result pbd__lra_nearest_along(pbd_world *w, const pbd__graph *g, const pbd_lra_desc *d, const int *list,
                                         int np, double *bd, int *ba) {
    int k = d->anchors_per_particle, kk = k + 1;
    double *near_d = (double *)pbd__alloc_n(w, (size_t)g->n * (size_t)kk, sizeof(double));
    int *near_r = (int *)pbd__alloc_n(w, (size_t)g->n * (size_t)kk, sizeof(int));
    int ok = near_d && near_r && pbd__dijkstra_nearest(w, g, d->anchors, d->anchor_count, kk, near_d, near_r);
    for (int p = 0; ok && p < np; ++p) {
        size_t v = (size_t)list[p] * (size_t)kk;
        for (int j = 0; j < kk && near_r[v + j] >= 0; ++j) {
            int a = d->anchors[near_r[v + j]];
            if (a != list[p]) pbd__keep_nearest(bd + (size_t)p * k, ba + (size_t)p * k, k, near_d[v + j], a);
        }
    }
    pbd__free(w, near_d);
    pbd__free(w, near_r);
    return ok ? PBD_OK : pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for Dijkstra");
}

/* --- the k nearest anchors in straight distance --------------------------------
   What one pass over every anchor per particle gives (by distance, ties by
   the anchors' order, a particle's own anchor left out), through a k-d
   tree of the anchors (Friedman, Bentley, Finkel 1977): a particle visits
   the nearer half first and skips every box farther than its k-th. Why:
   the pass over every anchor costs particles x anchors at every rebuild,
   and a cloth's tethers are rebuilt at every pin: a 200 x 200 cloth pinned
   along two edges one call at a time took 13 s. */
enum { PBD__KD_LEAF = 8 };
typedef struct pbd__kd {
    int *rank;        /* the anchors' ranks (their order in the list), leaf by leaf */
    int *begin, *end; /* node n holds rank[begin[n] .. end[n]); its halves are 2n + 1 and 2n + 2 */
    pbd__v3 *lo, *hi; /* node n's box */
} pbd__kd;

static float pbd__axis(pbd__v3 v, int a) { return a == 0 ? v.x : a == 1 ? v.y : v.z; }

/* Orders rank[b .. e) so that rank[m] has the m-th coordinate along axis
   a, none before it larger, none after it smaller (Hoare's selection). */
static void pbd__kd_select(const pbd__p4 *x, const int *anchors, int *rank, int b, int e, int m, int a) {
    while (e - b > 1) {
        float pivot = pbd__axis(pbd__p3(x[anchors[rank[(b + e) / 2]]]), a);
        int i = b, j = e - 1;
        while (i <= j) {
            while (pbd__axis(pbd__p3(x[anchors[rank[i]]]), a) < pivot) ++i;
            while (pbd__axis(pbd__p3(x[anchors[rank[j]]]), a) > pivot) --j;
            if (i <= j) {
                int t = rank[i];
                rank[i++] = rank[j];
                rank[j--] = t;
            }
        }
        if (m <= j) e = j + 1;
        else if (m >= i) b = i;
        else return;
    }
}

static void pbd__kd_node(pbd__kd *t, const pbd__p4 *x, const int *anchors, int n, int b, int e) {
    t->begin[n] = b;
    t->end[n] = e;
    t->lo[n] = t->hi[n] = pbd__p3(x[anchors[t->rank[b]]]);
    for (int i = b + 1; i < e; ++i) {
        pbd__v3 p = pbd__p3(x[anchors[t->rank[i]]]);
        t->lo[n] = pbd__v(fminf(t->lo[n].x, p.x), fminf(t->lo[n].y, p.y), fminf(t->lo[n].z, p.z));
        t->hi[n] = pbd__v(fmaxf(t->hi[n].x, p.x), fmaxf(t->hi[n].y, p.y), fmaxf(t->hi[n].z, p.z));
    }
    if (e - b <= PBD__KD_LEAF) return;
    pbd__v3 ext = pbd__sub(t->hi[n], t->lo[n]);
    int a = ext.x >= ext.y && ext.x >= ext.z ? 0 : ext.y >= ext.z ? 1 : 2, m = (b + e) / 2;
    pbd__kd_select(x, anchors, t->rank, b, e, m, a);
    pbd__kd_node(t, x, anchors, 2 * n + 1, b, m);
    pbd__kd_node(t, x, anchors, 2 * n + 2, m, e);
}

/* Nodes: halving from na down to PBD__KD_LEAF, a level more for the odd splits. */
static int pbd__kd_build(pbd_world *w, const int *anchors, int na, pbd__kd *t) {
    long nodes = 2;
    for (long size = na; size > PBD__KD_LEAF; size = (size + 1) / 2) nodes *= 2;
    nodes *= 2;
    t->rank = (int *)pbd__alloc_n(w, (size_t)na, sizeof(int));
    t->begin = (int *)pbd__alloc_n(w, (size_t)nodes, sizeof(int));
    t->end = (int *)pbd__alloc_n(w, (size_t)nodes, sizeof(int));
    t->lo = (pbd__v3 *)pbd__alloc_n(w, (size_t)nodes, sizeof(pbd__v3));
    t->hi = (pbd__v3 *)pbd__alloc_n(w, (size_t)nodes, sizeof(pbd__v3));
    if (!t->rank || !t->begin || !t->end || !t->lo || !t->hi) return 0;
    for (int i = 0; i < na; ++i) t->rank[i] = i;
    pbd__kd_node(t, w->x, anchors, 0, 0, na);
    return 1;
}

static void pbd__kd_free(pbd_world *w, pbd__kd *t) {
    pbd__free(w, t->rank);
    pbd__free(w, t->begin);
    pbd__free(w, t->end);
    pbd__free(w, t->lo);
    pbd__free(w, t->hi);
}

/* Keeps the k smallest (distance, rank), sorted: rank decides ties, as the
   order of a pass over the anchors does in pbd__keep_nearest. */
static void pbd__keep_nearest_ranked(double *bd, int *ba, int *br, int k, double d, int anchor, int rank) {
    if (!(d < bd[k - 1] || (d == bd[k - 1] && rank < br[k - 1]))) return;
    int j = k - 1;
    while (j > 0 && (d < bd[j - 1] || (d == bd[j - 1] && rank < br[j - 1]))) {
        bd[j] = bd[j - 1];
        ba[j] = ba[j - 1];
        br[j] = br[j - 1];
        --j;
    }
    bd[j] = d;
    ba[j] = anchor;
    br[j] = rank;
}

static double pbd__kd_box_distance(const pbd__kd *t, int n, pbd__v3 p) {
    double s = 0;
    for (int a = 0; a < 3; ++a) {
        double x = pbd__axis(p, a), l = pbd__axis(t->lo[n], a), h = pbd__axis(t->hi[n], a);
        double g = x < l ? l - x : x > h ? x - h : 0;
        s += g * g;
    }
    return sqrt(s);
}

/* The query of particle i at p into node n's anchors (bd, ba, br: its k
   nearest so far). A box is skipped only when it is farther than the k-th
   by more than the float distances' rounding, so no anchor as near (a tie
   of a lower rank) is missed. */
static void pbd__kd_query(const pbd__kd *t, const pbd__p4 *x, const int *anchors, int n, int i, pbd__v3 p, double *bd,
                          int *ba, int *br, int k) {
    if (pbd__kd_box_distance(t, n, p) * (1 - 1e-5) > bd[k - 1]) return;
    if (t->end[n] - t->begin[n] <= PBD__KD_LEAF) {
        for (int e = t->begin[n]; e < t->end[n]; ++e) {
            int rank = t->rank[e], anchor = anchors[rank];
            if (anchor == i) continue;
            double dd = pbd__len(pbd__sub(p, pbd__p3(x[anchor])));
            pbd__keep_nearest_ranked(bd, ba, br, k, dd, anchor, rank);
        }
        return;
    }
    int near = 2 * n + 1, far = 2 * n + 2;
    if (pbd__kd_box_distance(t, far, p) < pbd__kd_box_distance(t, near, p)) {
        near = far;
        far = 2 * n + 1;
    }
    pbd__kd_query(t, x, anchors, near, i, p, bd, ba, br, k);
    pbd__kd_query(t, x, anchors, far, i, p, bd, ba, br, k);
}

static pbd_result pbd__lra_nearest_straight(pbd_world *w, const pbd_lra_desc *d, const int *list, int np, double *bd,
                                            int *ba) {
    int k = d->anchors_per_particle, *br = (int *)pbd__alloc_n(w, (size_t)k, sizeof(int));
    pbd__kd t;
    memset(&t, 0, sizeof t);
    int ok = br && pbd__kd_build(w, d->anchors, d->anchor_count, &t);
    for (int p = 0; ok && p < np; ++p) {
        for (int j = 0; j < k; ++j) br[j] = INT_MAX;
        pbd__kd_query(&t, w->x, d->anchors, 0, list[p], pbd__p3(w->x[list[p]]), bd + (size_t)p * k, ba + (size_t)p * k,
                      br, k);
    }
    pbd__free(w, br);
    pbd__kd_free(w, &t);
    return ok ? PBD_OK : pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the anchors' tree");
}

/* Kim et al. 2012: rest distances to every anchor (straight or along the
   mesh), the k nearest kept per particle. */
static pbd_result pbd__lra_build(pbd_world *w, const pbd_lra_desc *d, unsigned char *mark, pbd__lra *l) {
    int k = d->anchors_per_particle;
    /* the attached particles: the list, or the object's non-anchors */
    int np = d->count;
    int *parts = NULL;
    if (!d->particles) {
        const pbd__object *o = &w->objects[pbd__oi(d->object)];
        for (int a = 0; a < d->anchor_count; ++a) mark[d->anchors[a]] = 2;
        np = 0;
        parts = (int *)pbd__alloc_n(w, (size_t)o->count, sizeof(int));
        if (!parts) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the particles");
        for (int i = o->first; i < o->first + o->count; ++i)
            if (mark[i] != 2) parts[np++] = i;
        if (np == 0) {
            pbd__free(w, parts);
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "every particle of object %d is an anchor",
                             pbd__oi(d->object));
        }
    }
    const int *list = d->particles ? d->particles : parts;
    double *bd = (double *)pbd__alloc_n(w, (size_t)np * (size_t)k, sizeof(double));
    int *ba = (int *)pbd__alloc_n(w, (size_t)np * (size_t)k, sizeof(int));
    double *dist = d->geodesic ? (double *)pbd__alloc_n(w, (size_t)w->n, sizeof(double)) : NULL;
    pbd_result r = PBD_OK;
    if (!bd || !ba || (d->geodesic && !dist)) r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the tethers");
    for (long j = 0; r == PBD_OK && j < (long)np * k; ++j) {
        bd[j] = HUGE_VAL;
        ba[j] = -1;
    }
    if (r == PBD_OK && !d->geodesic) {
        r = pbd__lra_nearest_straight(w, d, list, np, bd, ba);
    } else if (r == PBD_OK) {
        int *edges = NULL;
        double *len = NULL;
        long ne = 0;
        pbd__graph g;
        memset(&g, 0, sizeof g);
        r = pbd__lra_edges(w, d, &edges, &len, &ne);
        if (r == PBD_OK && !pbd__graph_build(w, w->n, edges, len, ne, &g))
            r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the mesh graph");
        /* one multi-source search gives the nearest anchor; k > 1 needs one search per anchor */
        int *label = NULL;
        if (r == PBD_OK && k == 1) {
            label = (int *)pbd__alloc_n(w, (size_t)w->n, sizeof(int));
            if (!label || !pbd__dijkstra(w, &g, d->anchors, d->anchor_count, dist, label))
                r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for Dijkstra");
            for (int p = 0; r == PBD_OK && p < np; ++p)
                if (dist[list[p]] < HUGE_VAL) {
                    bd[p] = dist[list[p]];
                    ba[p] = label[list[p]];
                }
        }
        if (r == PBD_OK && k > 1) r = pbd__lra_nearest_along(w, &g, d, list, np, bd, ba);
        pbd__free(w, label);
        pbd__graph_free(w, &g);
        pbd__free(w, edges);
        pbd__free(w, len);
    }
    /* an anchor attached to itself has distance 0: no tether */
    for (int p = 0; r == PBD_OK && p < np; ++p)
        for (int j = 0; j < k; ++j)
            if (ba[(size_t)p * k + j] == list[p]) bd[(size_t)p * k + j] = HUGE_VAL;
    if (r == PBD_OK) r = pbd__lra_fill(w, l, list, np, bd, ba, k, d->slack);
    pbd__free(w, bd);
    pbd__free(w, ba);
    pbd__free(w, dist);
    pbd__free(w, parts);
    return r;
}

PBDDEF pbd_result pbd_add_long_range_attachments(pbd_world *w, const pbd_lra_desc *d, pbd_lra *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    unsigned char *mark = (unsigned char *)pbd__alloc_n(w, (size_t)(w->n > 0 ? w->n : 1), 1);
    if (!mark) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory");
    memset(mark, 0, (size_t)(w->n > 0 ? w->n : 1));
    pbd_result r = pbd__validate_lra(w, d, mark);
    if (r == PBD_OK) r = PBD__ROOM(w, w->lras, w->nlras, w->lra_cap, "long range attachment set");
    pbd__lra l;
    memset(&l, 0, sizeof l);
    if (r == PBD_OK) r = pbd__lra_build(w, d, mark, &l);
    pbd__free(w, mark);
    if (r != PBD_OK) return r;
    pbd__lra_reach(w, &l);
    int li = PBD__PLACE(w, w->lras, w->nlras, &l);
    if (out) out->id = PBD__HANDLE(w->lras, li);
    /* the anchors hold the particles from outside */
    pbd__mark_coupled(w, l.particles, l.count);
    pbd__mark_coupled(w, l.anchor, l.start[l.count]);
    return PBD_OK;
}

/* --- automatic tethers ------------------------------------------------------
   A cloth hanging from a few pinned vertices stretches near them with few
   iterations: Gauss-Seidel carries the weight of the whole cloth to the
   pins one edge per sweep. NvCloth and FleX therefore tether every vertex
   to its attachments (Kim, Chentanez, Mueller 2012). A cloth built with
   pbd_cloth_desc.tethers keeps one LRA set (object->lra) with tethers
   (straight or along the edges: see below) to its PBD__AUTO_ANCHORS
   nearest anchors (the vertices of
   inverse mass 0: pinned or mass 0; kinematic ones only in a cloth that
   has neither, see pbd__tether_anchor), rebuilt whenever that set
   changes - at the pin / mass / kinematic call, never inside a step. Two
   anchors: a vertex between two pins is held from both sides, so the edge
   that joins them cannot sag (with one, each half pulls towards its own
   pin and the stretch gathers in the middle). */
#define PBD__AUTO_ANCHORS 2

/* Straight tethers. Dijkstra over the edges of a triangulated grid
   overestimates the distance along the surface, by how much depends on
   the direction: on pbd_mesh_grid (alternating diagonals) from a corner
   from 0 along the sides to 41% along the diagonal, where no cell's
   diagonal points the right way. The tethers of neighbouring vertices
   then have different slack, so the cloth hangs at different radii from a
   pin at neighbouring vertices and the edges between them stretch by tens
   of percent (bench/cloth_defaults: 38%/13% at 4 x 4 on 32 x 32 with
   Dijkstra lengths). A tether must never be shorter than the geodesic (it
   would hold the cloth up), so the straight rest distance is used only
   where it is the geodesic: the rest shape is one flat, unfolded,
   convex disc (checked when the cloth is added: pbd__flat_convex_disc),
   and the cloth is still in that shape when the tethers are built (flat
   and every edge at its rest length to PBD__FLAT_TOL, pbd__object_congruent; a
   cloth pinned after it has moved gets Dijkstra lengths, which are only
   ever too long). A tear makes the disc non-convex: its tethers are
   geodesic from then on. */

/* Whether the object's particles lie in one plane (to PBD__FLAT_TOL of
   its size); *normal receives the plane's unit normal. */
static int pbd__object_plane(const pbd_world *w, const pbd__object *o, pbd__v3 *normal) {
    if (o->count < 3) return 0;
    pbd__v3 x0 = pbd__p3(w->x[o->first]), far = x0;
    float best = 0;
    for (int i = o->first; i < o->first + o->count; ++i) {
        pbd__v3 d = pbd__sub(pbd__p3(w->x[i]), x0);
        if (pbd__dot(d, d) > best) {
            best = pbd__dot(d, d);
            far = pbd__p3(w->x[i]);
        }
    }
    pbd__v3 axis = pbd__sub(far, x0), n = axis;
    best = 0;
    for (int i = o->first; i < o->first + o->count; ++i) {
        pbd__v3 c = pbd__cross(axis, pbd__sub(pbd__p3(w->x[i]), x0));
        if (pbd__dot(c, c) > best) {
            best = pbd__dot(c, c);
            n = c;
        }
    }
    float size = pbd__len(axis), nl = pbd__len(n);
    if (!(size > 0) || !(nl > 0) || best == 0) return 0;
    n = pbd__mul(n, 1.0f / nl);
    for (int i = o->first; i < o->first + o->count; ++i)
        if (!(fabsf(pbd__dot(pbd__sub(pbd__p3(w->x[i]), x0), n)) <= PBD__FLAT_TOL * size)) return 0;
    *normal = n;
    return 1;
}

/* Whether every edge of the object's stretch group is at its rest length
   (to PBD__FLAT_TOL): with a flat unfolded rest shape and the particles in
   one plane, the cloth is its rest shape moved rigidly. */
static int pbd__object_congruent(const pbd_world *w, const pbd__object *o) {
    int gs = o->groups[0];
    if (gs < 0 || w->groups[gs].type != PBD_CONSTRAINT_DISTANCE) return 0;
    const pbd__group *g = &w->groups[gs];
    for (int c = 0; c < g->count; ++c) {
        float l = pbd__len(pbd__sub(pbd__p3(w->x[g->idx[2 * c]]), pbd__p3(w->x[g->idx[2 * c + 1]])));
        if (!(fabsf(l - g->rest[c]) <= PBD__FLAT_TOL * g->rest[c])) return 0;
    }
    return 1;
}

/* Whether the cloth just added (its particles at their rest positions;
   tris: nt local triangles) is one flat, unfolded, convex disc: planar,
   every triangle turning the same way about the plane's normal, Euler
   characteristic V - E + F = 1, and one boundary loop that turns left
   only, once around (2 pi). Then the map from the mesh to the plane is an
   embedding onto a convex polygon, and the geodesic between two vertices
   is the straight segment. 1: yes, 0: no, -1: out of memory. */
static int pbd__flat_convex_disc(pbd_world *w, int oi, const int *tris, int nt) {
    const pbd__object *o = &w->objects[oi];
    pbd__v3 n;
    if (!pbd__object_plane(w, o, &n)) return 0;
    pbd__edge *edges = NULL;
    long ne = pbd__build_edges(w, tris, nt, 3, &edges);
    int *next = ne < 0 ? NULL : (int *)pbd__alloc_n(w, (size_t)o->count, sizeof(int));
    if (!next) {
        pbd__free(w, edges);
        return -1;
    }
    const pbd__p4 *X = w->x + o->first;
    int ok = (long)o->count - ne + nt == 1, sign = 0, start = -1;
    long nb = 0;
    for (int t = 0; ok && t < nt; ++t) {
        pbd__v3 a = pbd__p3(X[tris[3 * t]]), b = pbd__p3(X[tris[3 * t + 1]]), c = pbd__p3(X[tris[3 * t + 2]]);
        float turn = pbd__dot(pbd__cross(pbd__sub(b, a), pbd__sub(c, a)), n);
        int st = turn > 0 ? 1 : (turn < 0 ? -1 : 0);
        if (st == 0 || (sign != 0 && st != sign)) ok = 0;
        sign = st;
    }
    if (sign < 0) n = pbd__neg(n); /* the triangles turn left about n: the cloth is left of its boundary */
    for (int i = 0; i < o->count; ++i) next[i] = -1;
    for (long e = 0; ok && e < ne; ++e) {
        if (edges[e].nopp != 1) continue;
        if (next[edges[e].a] >= 0) ok = 0; /* two boundary loops meet at a vertex */
        next[edges[e].a] = edges[e].b;
        start = edges[e].a;
        nb++;
    }
    double turning = 0;
    long steps = 0;
    for (int v = start; ok && v >= 0;) {
        int u = next[v], u2 = u >= 0 ? next[u] : -1;
        if (u2 < 0) {
            ok = 0;
            break;
        }
        pbd__v3 in = pbd__sub(pbd__p3(X[u]), pbd__p3(X[v])), out = pbd__sub(pbd__p3(X[u2]), pbd__p3(X[u]));
        float c = pbd__dot(pbd__cross(in, out), n);
        if (c < -PBD__FLAT_TOL * pbd__len(in) * pbd__len(out)) ok = 0; /* a concave corner */
        turning += atan2((double)c, (double)pbd__dot(in, out));
        v = u;
        if (++steps > nb || v == start) break;
    }
    ok = ok && start >= 0 && steps == nb && fabs(turning - 2 * 3.14159265358979323846) < PBD__TURNING_TOL;
    pbd__free(w, edges);
    pbd__free(w, next);
    return ok;
}

/* Whether vertex i anchors tethers: inverse mass 0, and not kinematic
   when the cloth has fixed vertices (pinned or of mass 0). A kinematic
   vertex is usually a hand: it drags the cloth away from its pins, and
   tethers to both ends then ask for the impossible and fling the cloth
   (tests/test_tethers.c: a 32 x 32 cloth hanging from two corners, its
   bottom vertex dragged 2 m away, stays under 10 m/s during the drag and
   20 m/s when let go with the pins as the only anchors). A cloth that has
   only kinematic vertices (a cape on animated shoulders) is tethered to
   them. */
static int pbd__tether_anchor(const pbd_world *w, int i, int fixed_only) {
    return w->x[i].w == 0 && (!fixed_only || (w->flags[i] & PBD__PINNED) || !(w->mass[i] > 0));
}

/* The set as it should be now (out; count 0 without anchors or without
   free vertices), built from the rest lengths of the stretch group, or
   from straight rest distances (see above). */
static pbd_result pbd__auto_tethers_build(pbd_world *w, int oi, pbd__lra *out) {
    const pbd__object *o = &w->objects[oi];
    memset(out, 0, sizeof *out);
    out->enabled = 1;
    int na = 0, fixed = 0, gs = o->groups[0];
    for (int i = o->first; i < o->first + o->count; ++i) fixed += pbd__tether_anchor(w, i, 1);
    for (int i = o->first; i < o->first + o->count; ++i) na += pbd__tether_anchor(w, i, fixed > 0);
    if (na == 0 || na == o->count || gs < 0 || w->groups[gs].type != PBD_CONSTRAINT_DISTANCE) {
        out->start = (int *)pbd__alloc_n(w, 1, sizeof(int));
        if (!out->start) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the tethers");
        out->start[0] = 0;
        return PBD_OK;
    }
    int *anchors = (int *)pbd__alloc_n(w, (size_t)na, sizeof(int));
    unsigned char *mark = (unsigned char *)pbd__alloc_n(w, (size_t)w->n, 1);
    pbd_result r = PBD_OK;
    if (!anchors || !mark) r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the tethers");
    if (r == PBD_OK) {
        memset(mark, 0, (size_t)w->n);
        na = 0;
        for (int i = o->first; i < o->first + o->count; ++i)
            if (pbd__tether_anchor(w, i, fixed > 0)) anchors[na++] = i;
        pbd_lra_desc d = pbd_lra_desc_default();
        d.object.id = PBD__HANDLE(w->objects, oi);
        d.anchors = anchors;
        d.anchor_count = na;
        pbd__v3 normal;
        d.geodesic =
            !(o->tethers == PBD__TETHERS_STRAIGHT && pbd__object_plane(w, o, &normal) && pbd__object_congruent(w, o));
        d.anchors_per_particle = na < PBD__AUTO_ANCHORS ? na : PBD__AUTO_ANCHORS;
        r = pbd__lra_build(w, &d, mark, out);
    }
    pbd__free(w, anchors);
    pbd__free(w, mark);
    return r;
}

/* The lengths the cloth substep rule (pbd__cloth_substeps) reads: the
   longest of the particles' shortest tethers (how far the cloth hangs from
   its anchors) and the stretch edges' mean rest length. */
static void pbd__cloth_hang(pbd_world *w, pbd__object *o, const pbd__lra *l) {
    float hang = 0;
    for (int k = 0; k < l->count; ++k) {
        float shortest = INFINITY;
        for (int t = l->start[k]; t < l->start[k + 1]; ++t)
            shortest = l->length[t] < shortest ? l->length[t] : shortest;
        if (shortest < INFINITY && shortest > hang) hang = shortest;
    }
    double sum = 0;
    const pbd__group *g = &w->groups[o->groups[0]];
    for (int c = 0; c < g->count; ++c) sum += g->rest[c];
    o->hang = hang;
    o->edge = g->count > 0 ? (float)(sum / g->count) : 0;
}

/* (Re)builds the object's automatic tethers; on error nothing changed. */
static pbd_result pbd__auto_tethers(pbd_world *w, int oi) {
    pbd__object *o = &w->objects[oi];
    if (!o->tethers) return PBD_OK;
    if (o->lra < 0) PBD__TRY(PBD__ROOM(w, w->lras, w->nlras, w->lra_cap, "long range attachment set"));
    pbd__lra l;
    PBD__TRY(pbd__auto_tethers_build(w, oi, &l));
    if (o->lra < 0 && l.count == 0) {
        pbd__lra_free(w, &l);
        return PBD_OK;
    } /* no anchor yet */
    pbd__lra_reach(w, &l);
    if (o->lra < 0) o->lra = PBD__PLACE(w, w->lras, w->nlras, &l);
    else { /* rebuilt in place: the handle stays valid */ l.enabled = w->lras[o->lra].enabled;
        l.s = w->lras[o->lra].s;
        pbd__lra_free(w, &w->lras[o->lra]);
        w->lras[o->lra] = l;
    }
    if (l.count > 0) pbd__cloth_hang(w, o, &l);
    else o->hang = o->edge = 0;
    return PBD_OK;
}

/* The substeps a step of dt needs for the pinned cloths' gravity_cfl bound
   h sqrt(|g| L) / dx <= gravity_cfl (L the largest distance from a vertex
   to its nearest anchor, dx its mean edge; at least 1, at most PBD__MAX_SUBSTEPS). Why: a cloth that
   falls or swings from its pins is a fan of chains of L / dx edges. The
   tethers keep every particle within reach of its anchor, but gravity
   moves all of them by g h^2 per substep at once, and only the edges can
   tell a particle near the pin to move less than one far from it: with
   Gauss-Seidel that news travels a few edges per sweep, so the edges next
   to the pins stretch by about g h^2 L / dx^2 (bench/cloth_defaults,
   100 x 100 hanging from two corners at 4 x 4: 70% during the fall).
   At 4 iterations (32, 48, 64 and 100 vertices a side, 1 m) the
   worst edge of the fall stays under 10% while this number is below about
   0.36 (it grows slowly with the resolution); the default 0.35 gives the
   32 x 32 cloth 5 substeps (6.7%) and the 100 x 100 one 14 (9.5%). */
static int pbd__cloth_substeps(const pbd_world *w, float dt) {
    float g = sqrtf(w->gravity[0] * w->gravity[0] + w->gravity[1] * w->gravity[1] + w->gravity[2] * w->gravity[2]);
    double need = 1;
    for (int i = 0; i < w->nobjects; ++i) {
        const pbd__object *o = &w->objects[i];
        if (!(o->gravity_cfl > 0) || !(o->hang > 0) || !(o->edge > 0) || !(g > 0)) continue;
        double n = ceil((double)dt * sqrt((double)g * o->hang) / ((double)o->gravity_cfl * o->edge) - PBD__CEIL_SLACK);
        need = n > need ? n : need;
    }
    return need < PBD__MAX_SUBSTEPS ? (int)need : PBD__MAX_SUBSTEPS;
}

/* After particle i's inverse mass changed from was_anchor (0 or 1): the
   tethers of its cloth follow. On error the caller restores the particle. */
static pbd_result pbd__tethers_follow(pbd_world *w, int i, int was_anchor) {
    if ((w->x[i].w == 0) == was_anchor) return PBD_OK;
    for (int oi = 0; oi < w->nobjects; ++oi) {
        const pbd__object *o = &w->objects[oi];
        if (o->tethers && i >= o->first && i < o->first + o->count) return pbd__auto_tethers(w, oi);
    }
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_tethers(const pbd_world *w, pbd_object object, pbd_lra *out) {
    PBD__CHECK_WORLD_READ(w);
    PBD__CHECK_PTR(w, out, "out");
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    out->id = PBD__HANDLE_OR_NONE(w->lras, w->objects[oi].lra);
    return PBD_OK;
}

/* The index of the long range attachment set a handle names. */
static pbd_result pbd__lra_index(const pbd_world *w, pbd_lra handle, int *index) {
    return PBD__RESOLVE(w, handle, w->lras, w->nlras, "long range attachment set", index);
}

/* A cloth's automatic tethers go with the cloth (pbd_cloth_desc.tethers
   = 0 goes without them); any other set can be removed. */
PBDDEF pbd_result pbd_remove_long_range_attachments(pbd_world *w, pbd_lra handle) {
    PBD__CHECK_WORLD(w);
    int l;
    PBD__TRY(pbd__lra_index(w, handle, &l));
    for (int o = 0; o < w->nobjects; ++o)
        if (w->objects[o].s.live && w->objects[o].lra == l)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                             "long range attachment set %d is object %d's automatic tethers: they go with the object "
                             "(pbd_lra_set_enabled switches them off)",
                             l, o);
    pbd__lra_free(w, &w->lras[l]);
    PBD__RELEASE(w->lras, l);
    return PBD_OK;
}

PBDDEF pbd_result pbd_lra_set_enabled(pbd_world *w, pbd_lra handle, int enabled) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int l;
    PBD__TRY(pbd__lra_index(w, handle, &l));
    PBD__TRY(pbd__check_switch(w, enabled, "enabled"));
    w->lras[l].enabled = enabled;
    return PBD_OK;
}

PBDDEF pbd_result pbd_lra_tethers(const pbd_world *w, pbd_lra handle, int *particles, int *anchors, float *lengths,
                                  int max, int *count) {
    PBD__CHECK_WORLD_READ(w);
    int li;
    PBD__TRY(pbd__lra_index(w, handle, &li));
    PBD__TRY(pbd__check_list(w,
                             particles ? (const void *)particles
                             : anchors ? (const void *)anchors
                                       : (const void *)lengths,
                             max, count));
    const pbd__lra *l = &w->lras[li];
    for (int p = 0; p < l->count; ++p)
        for (int t = l->start[p]; t < l->start[p + 1] && t < max; ++t) {
            if (particles) particles[t] = l->particles[p];
            if (anchors) anchors[t] = l->anchor[t];
            if (lengths) lengths[t] = l->length[t];
        }
    *count = l->start[l->count];
    return PBD_OK;
}

/* --- tethers that give way -------------------------------------------------
   A tether is a hard limit, solved in one projection. Where a particle's
   tethers cannot all hold (pbd__lra_conflict: anchors moved apart beyond
   their tethers' reach, as kinematic shoulders of a cape pulled apart),
   each projection would undo the other and they would fight the edges.
   They give way instead: the particle stays where its edges put it and
   each of its tethers' reach (the limit the projection uses) grows to its
   distance.
   At the end of every step a loose tether tightens to where its particle
   has come back to, never below its length, so it never pulls a particle
   in faster than the cloth itself brings it. Without memory for reach
   (pbd__lra_reach) the set never gives way. A 32 x 32 cloth on two
   kinematic corners moved 1 m apart each and back stays under 20 m/s
   parting and 16 m/s coming back (tests/test_tethers.c). */
static inline PBD_HD float pbd__lra_limit(const pbd__lra *l, int t) { return l->reach ? l->reach[t] : l->length[t]; }

/* Particle k's distance to the anchor of tether t, in positions x. */
static PBD_HD float pbd__lra_distance(const pbd__p4 *x, const pbd__lra *l, int k, int t) {
    return pbd__len(pbd__sub(pbd__p3(x[l->particles[k]]), pbd__p3(x[l->anchor[t]])));
}

/* After a set was made: its reach, taut (reach = length). reach holds
   2 nt floats: the reach, then its copy from the start of the step, which
   a rolled-back step puts back (pbd__lras_keep). from (may be NULL): the
   reach to start with instead, nt floats (a snapshot's). */
static void pbd__lra_reach_from(pbd_world *w, pbd__lra *l, const float *from) {
    long nt = l->count > 0 ? l->start[l->count] : 0;
    float *r = (float *)pbd__alloc_n(w, (size_t)(nt > 0 ? 2 * nt : 1), sizeof(float));
    for (long t = 0; r && t < nt; ++t) r[t] = r[nt + t] = from ? from[t] : l->length[t];
    pbd__free(w, l->reach);
    l->reach = r;
}
static void pbd__lra_reach(pbd_world *w, pbd__lra *l) { pbd__lra_reach_from(w, l, NULL); }

/* Start of a step (restore 0): the reach is copied; a rolled-back step
   (restore 1) gets it back, with the positions it came from. */
static void pbd__lras_keep(pbd_world *w, int restore) {
    for (int i = 0; i < w->nlras; ++i) {
        pbd__lra *l = &w->lras[i];
        long nt = l->count > 0 ? l->start[l->count] : 0;
        if (!l->reach || nt == 0) continue;
        if (restore) memcpy(l->reach, l->reach + nt, sizeof(float) * (size_t)nt);
        else memcpy(l->reach + nt, l->reach, sizeof(float) * (size_t)nt);
    }
}

/* End of a step: every loose tether tightens to its particle's distance. */
static inline PBD_HD void pbd__lra_tighten_one(const pbd__p4 *x, const pbd__lra *l, int k) {
    for (int t = l->start[k]; t < l->start[k + 1]; ++t) {
        if (!(l->reach[t] > l->length[t])) continue;
        float d = pbd__lra_distance(x, l, k, t), r = l->reach[t] < d ? l->reach[t] : d;
        l->reach[t] = r > l->length[t] ? r : l->length[t];
    }
}
static void pbd__lras_tighten(pbd_world *w) {
    for (int i = 0; i < w->nlras; ++i) {
        pbd__lra *l = &w->lras[i];
        if (!l->reach) continue;
        for (int k = 0; k < l->count; ++k) pbd__lra_tighten_one(w->x, l, k);
    }
}

/* Whether particle k's tethers cannot all hold: two of its anchors are
   farther apart than their tethers reach together (a hand dragging a
   cloth vertex away from the pins), so that each projection undoes the
   other. */
static PBD_HD int pbd__lra_conflict(const pbd__p4 *P, const pbd__lra *l, int k) {
    for (int t = l->start[k]; t < l->start[k + 1]; ++t) {
        const pbd__p4 *a = &P[l->anchor[t]];
        if (a->w != 0) continue;
        for (int u = t + 1; u < l->start[k + 1]; ++u) {
            const pbd__p4 *b = &P[l->anchor[u]];
            if (b->w != 0) continue;
            pbd__v3 d = pbd__sub(pbd__p3(*a), pbd__p3(*b));
            float reach = pbd__lra_limit(l, t) + pbd__lra_limit(l, u);
            if (pbd__dot(d, d) > reach * reach) return 1;
        }
    }
    return 0;
}

/* Particle k's tethers give way (see above): reach grows to its distance. */
static PBD_HD void pbd__lra_give_way(const pbd__p4 *P, const pbd__lra *l, int k, pbd__v3 x0) {
    if (!l->reach) return;
    for (int t = l->start[k]; t < l->start[k + 1]; ++t) {
        const pbd__p4 *a = &P[l->anchor[t]];
        if (a->w != 0) continue;
        float d = pbd__len(pbd__sub(x0, pbd__p3(*a)));
        if (d > l->reach[t]) l->reach[t] = d;
    }
}

/* Kim et al. 2012 (survey 3.5, Long Range Attachments): a particle
   farther from an attached anchor than its tether is put back on the
   tether's sphere. Only the particle moves (the anchor is attached), so a
   particle's tethers are one thread's work. Two tethers are solved one
   after the other, not by projecting onto the intersection of both balls
   at once: that closed form is no better (bench/cloth_defaults) and,
   moving a particle farther in one go, lets a cloth twisted between a
   pinned and a kinematic row pass through itself (the test
   selfcollision_twisted_cloth_never_crosses). */
static inline PBD_HD void pbd__lra_project_one(pbd__p4 *P, const pbd__lra *l, int k) {
    pbd__p4 *q = &P[l->particles[k]];
    if (q->w == 0) return;
    pbd__v3 x0 = pbd__p3(*q), x = x0;
    if (pbd__lra_conflict(P, l, k)) {
        pbd__lra_give_way(P, l, k, x0);
        return;
    }
    for (int t = l->start[k]; t < l->start[k + 1]; ++t) {
        const pbd__p4 *a = &P[l->anchor[t]];
        if (a->w != 0) continue; /* the anchor is not attached (anymore) */
        pbd__v3 d = pbd__sub(x, pbd__p3(*a));
        float d2 = pbd__dot(d, d), L = pbd__lra_limit(l, t);
        if (d2 > L * L) x = pbd__add(pbd__p3(*a), pbd__mul(d, L / sqrtf(d2)));
    }
    q->x = x.x;
    q->y = x.y;
    q->z = x.z;
}
static void pbd__lra_project(pbd_world *w, const pbd__lra *l) {
    PBD__PRAGMA(omp for schedule(static))
    for (int k = 0; k < l->count; ++k) pbd__lra_project_one(w->p, l, k);
}

/* --- triangle and edge limits ----------------------------------------------- */

/* The 2D rest shape of a triangle: X1 = (a, 0), X2 = (b, c); 0 if degenerate. */
static int pbd__triangle_rest2d(const pbd__v3 *x, float *abc) {
    pbd__v3 e1 = pbd__sub(x[1], x[0]), e2 = pbd__sub(x[2], x[0]);
    float a = pbd__len(e1);
    if (!(a > PBD__LEN_MIN)) return 0;
    pbd__v3 u = pbd__mul(e1, 1.0f / a);
    float b = pbd__dot(e2, u);
    float c = pbd__len(pbd__sub(e2, pbd__mul(u, b)));
    if (!(c > PBD__SLIVER_MIN * a)) return 0;
    abc[0] = a;
    abc[1] = b;
    abc[2] = c;
    return 1;
}

static inline PBD_HD pbd__v3 pbd__mat32_mul(pbd__v3 c0, pbd__v3 c1, float x, float y) {
    return pbd__add(pbd__mul(c0, x), pbd__mul(c1, y));
}

/* The triangle's deformation gradient F = Ds Dm^-1 (columns F0, F1), its
   singular values s1 >= s2 (from the eigen-decomposition of the 2x2
   F^T F) and the unit eigenvector v1 of s1 (rest frame). */
typedef struct pbd__tri_svd {
    pbd__v3 F0, F1;
    float s1, s2, v1x, v1y;
} pbd__tri_svd;
static PBD_HD pbd__tri_svd pbd__triangle_svd(const pbd__v3 *x, const float *abc) {
    pbd__tri_svd o;
    float b = abc[1];
    o.F0 = pbd__mul(pbd__sub(x[1], x[0]), 1.0f / abc[0]);
    o.F1 = pbd__mul(pbd__sub(pbd__sub(x[2], x[0]), pbd__mul(o.F0, b)), 1.0f / abc[2]);
    float p = pbd__dot(o.F0, o.F0), q = pbd__dot(o.F0, o.F1), r = pbd__dot(o.F1, o.F1);
    float half = 0.5f * (p + r), dif = 0.5f * (p - r);
    float disc = sqrtf(dif * dif + q * q);
    float l1 = half + disc, l2 = half - disc;
    o.s1 = sqrtf(l1);
    o.s2 = l2 > 0 ? sqrtf(l2) : 0.0f;
    /* eigenvector of l1: the larger of the two candidate forms */
    float ax = l1 - r, ay = q, bx = q, by = l1 - p;
    if (ax * ax + ay * ay >= bx * bx + by * by) {
        o.v1x = ax;
        o.v1y = ay;
    } else {
        o.v1x = bx;
        o.v1y = by;
    }
    float vn = sqrtf(o.v1x * o.v1x + o.v1y * o.v1y);
    if (vn > PBD__EIGVEC_LEN_MIN) {
        o.v1x /= vn;
        o.v1y /= vn;
    } else {
        o.v1x = 1;
        o.v1y = 0;
    } /* isotropic */
    return o;
}

/* Wang, O'Brien, Ramamoorthi 2010 (survey 3.5): F = Ds Dm^-1 maps the 2D
   rest triangle onto the current one; its singular values (from the
   eigen-decomposition of the 2x2 F^T F) are the principal stretches. They
   are clamped to [lo, hi], F' = U S' V^T, and the corners go to
   y_i = c + F' (X_i - X_c) about the mass-weighted centroids (so linear
   momentum is kept; corners of inverse mass 0 hold the centroid and stay).
   k scales the move. Returns 1 when the triangle was moved. */
static PBD_HD int pbd__limit_triangle(pbd__v3 *x, const float *w, const float *abc, float lo, float hi, float k,
                                      float *stretch) {
    float a = abc[0], b = abc[1], c = abc[2];
    pbd__tri_svd sv = pbd__triangle_svd(x, abc);
    pbd__v3 F0 = sv.F0, F1 = sv.F1;
    float s1 = sv.s1, s2 = sv.s2, v1x = sv.v1x, v1y = sv.v1y;
    if (stretch) {
        stretch[0] = s1;
        stretch[1] = s2;
    }
    if (s1 <= hi && s2 >= lo) return 0;
    if (!(s1 > PBD__SV_MIN)) return 0; /* collapsed to a point: no direction to restore */
    float v2x = -v1y, v2y = v1x;
    pbd__v3 U1 = pbd__mul(pbd__mat32_mul(F0, F1, v1x, v1y), 1.0f / s1);
    pbd__v3 u2 = pbd__mat32_mul(F0, F1, v2x, v2y), U2;
    if (s2 > PBD__SV_RATIO_MIN * s1) {
        U2 = pbd__mul(u2, 1.0f / s2);
    } else { /* flattened onto a line: any unit vector normal to U1 */
        pbd__v3 t = pbd__sub(u2, pbd__mul(U1, pbd__dot(U1, u2)));
        float tl = pbd__len(t);
        if (tl > PBD__DIR_MIN) U2 = pbd__mul(t, 1.0f / tl);
        else {
            pbd__v3 axis = fabsf(U1.x) < PBD__AXIS_X_MAX ? pbd__v(1, 0, 0) : pbd__v(0, 1, 0);
            t = pbd__cross(U1, axis);
            U2 = pbd__mul(t, 1.0f / pbd__len(t));
        }
    }
    float t1 = pbd__clampf(s1, lo, hi), t2 = pbd__clampf(s2, lo, hi);
    /* F' = t1 U1 v1^T + t2 U2 v2^T, column by column */
    pbd__v3 G0 = pbd__add(pbd__mul(U1, t1 * v1x), pbd__mul(U2, t2 * v2x));
    pbd__v3 G1 = pbd__add(pbd__mul(U1, t1 * v1y), pbd__mul(U2, t2 * v2y));
    float X[3][2] = {{0, 0}, {a, 0}, {b, c}};
    float m[3], M = 0;
    int fixed = (w[0] == 0) + (w[1] == 0) + (w[2] == 0);
    if (fixed == 3) return 0;
    for (int i = 0; i < 3; ++i) {
        m[i] = fixed ? (w[i] == 0 ? 1.0f : 0.0f) : 1.0f / w[i];
        M += m[i];
    }
    float Xc[2] = {0, 0};
    pbd__v3 cen = pbd__v(0, 0, 0);
    for (int i = 0; i < 3; ++i) {
        Xc[0] += m[i] * X[i][0];
        Xc[1] += m[i] * X[i][1];
        cen = pbd__add(cen, pbd__mul(x[i], m[i]));
    }
    Xc[0] /= M;
    Xc[1] /= M;
    cen = pbd__mul(cen, 1.0f / M);
    for (int i = 0; i < 3; ++i) {
        if (w[i] == 0) continue;
        pbd__v3 y = pbd__add(cen, pbd__mat32_mul(G0, G1, X[i][0] - Xc[0], X[i][1] - Xc[1]));
        x[i] = pbd__add(x[i], pbd__mul(pbd__sub(y, x[i]), k));
    }
    return 1;
}

PBDDEF pbd_result pbd_strain_limit_triangle(float *p, const float *rest, const float *inv_mass, float min_stretch,
                                            float max_stretch, float *stretch) {
    static const char *const names[3] = {"p", "rest", "inv_mass"};
    const void *given[3] = {p, rest, inv_mass};
    if (pbd__check_pointers("pbd_strain_limit_triangle", given, names, 3) != PBD_OK) return PBD_ERROR_NULL_POINTER;
    if (!pbd__finite_n(p, 9) || !pbd__finite_n(rest, 9) || !pbd__finite_n(inv_mass, 3) || !pbd__finite(min_stretch) ||
        !pbd__finite(max_stretch))
        return pbd__fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_strain_limit_triangle: an argument is not finite");
    if (!(min_stretch >= 0 && min_stretch <= 1))
        return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_strain_limit_triangle: min_stretch %g must be in [0, 1]", (double)min_stretch);
    if (!(max_stretch >= 1))
        return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_strain_limit_triangle: max_stretch %g must be >= 1",
                         (double)max_stretch);
    for (int i = 0; i < 3; ++i)
        if (inv_mass[i] < 0)
            return pbd__fail(NULL, PBD_ERROR_NEGATIVE_MASS, "pbd_strain_limit_triangle: inv_mass[%d] < 0", i);
    pbd__v3 x[3], X[3];
    float abc[3];
    pbd__load_n(rest, 3, X);
    if (!pbd__triangle_rest2d(X, abc))
        return pbd__fail(NULL, PBD_ERROR_DEGENERATE, "pbd_strain_limit_triangle: the rest triangle has no area");
    pbd__load_n(p, 3, x);
    if (pbd__limit_triangle(x, inv_mass, abc, min_stretch, max_stretch, 1.0f, stretch))
        for (int i = 0; i < 3; ++i) pbd__st(p + 3 * i, x[i]);
    return PBD_OK;
}

/* Provot 1995's edge pass: an edge outside [lo, hi] * rest is brought to
   the nearest limit, the move shared by inverse masses (survey 3.5). */
static PBD_HD void pbd__limit_edge(pbd__p4 *P, const int *e, float rest, float lo, float hi, float k) {
    pbd__p4 *a = &P[e[0]], *b = &P[e[1]];
    float ws = a->w + b->w;
    if (!(ws > 0)) return;
    pbd__v3 d = pbd__sub(pbd__p3(*a), pbd__p3(*b));
    float l = pbd__len(d), target;
    if (l > hi * rest) target = hi * rest;
    else if (l < lo * rest && l > PBD__LEN_MIN) target = lo * rest;
    else return;
    pbd__v3 corr = pbd__mul(d, k * (l - target) / (l * ws));
    a->x -= corr.x * a->w;
    a->y -= corr.y * a->w;
    a->z -= corr.z * a->w;
    b->x += corr.x * b->w;
    b->y += corr.y * b->w;
    b->z += corr.z * b->w;
}

static PBD_HD void pbd__limit_one(pbd_world *w, const pbd__limit *L, int c) {
    const pbd__group *g = &L->g;
    const int *e = g->idx + (size_t)c * g->arity;
    if (L->mode == PBD_STRAIN_EDGES) {
        pbd__limit_edge(w->p, e, g->rest[c], L->lo, L->hi, L->stiffness);
        return;
    }
    pbd__v3 x[3];
    float iw[3];
    for (int i = 0; i < 3; ++i) {
        x[i] = pbd__p3(w->p[e[i]]);
        iw[i] = w->p[e[i]].w;
    }
    if (!pbd__limit_triangle(x, iw, g->rest + 3 * (size_t)c, L->lo, L->hi, L->stiffness, NULL)) return;
    for (int i = 0; i < 3; ++i) {
        pbd__p4 *q = &w->p[e[i]];
        q->x = x[i].x;
        q->y = x[i].y;
        q->z = x[i].z;
    }
}

/* One coloured Gauss-Seidel sweep over a limit set; a colour's
   constraints share no particle, so they run in parallel. */
static void pbd__limit_sweep(pbd_world *w, const pbd__limit *L) {
    const pbd__group *g = &L->g;
    for (int col = 0; col < g->ncolors; ++col) {
        int b0 = g->color_start[col], e0 = g->color_start[col + 1];
        if (g->overflow && col == g->ncolors - 1) {
            PBD__PRAGMA(omp single)
            for (int c = b0; c < e0; ++c) pbd__limit_one(w, L, c);
            continue;
        }
        PBD__PRAGMA(omp for schedule(static))
        for (int c = b0; c < e0; ++c) pbd__limit_one(w, L, c);
    }
}

/* Every iteration, after the groups: long range attachments, then the
   strain limits (both are passes after the regular solver, survey 3.5). */
static void pbd__strain_limits_project(pbd_world *w) {
    for (int i = 0; i < w->nlras; ++i)
        if (w->lras[i].enabled) pbd__lra_project(w, &w->lras[i]);
    for (int i = 0; i < w->nlimits; ++i)
        if (w->limits[i].enabled) pbd__limit_sweep(w, &w->limits[i]);
}

static void pbd__limit_free(pbd_world *w, pbd__limit *L) { pbd__group_free(w, &L->g); }

static pbd_result pbd__check_stretch_range(const pbd_world *w, float lo, float hi) {
    if (!pbd__finite(lo) || !pbd__finite(hi))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "stretch limits are not finite");
    if (!(lo >= 0 && lo <= 1 && hi >= 1))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "stretch limits [%g, %g]: need 0 <= min <= 1 <= max",
                         (double)lo, (double)hi);
    return PBD_OK;
}

/* A private group of arity k over world indices idx (count constraints). */
static pbd_result pbd__private_group(pbd_world *w, pbd__group *g, int type, int count, int stride) {
    memset(g, 0, sizeof *g);
    g->type = type;
    g->count = count;
    g->arity = pbd__arity_table[type];
    g->rest_stride = stride;
    g->enabled = 1;
    g->stiffness = 1.0f;
    g->pressure = 1.0f;
    g->idx = (int *)pbd__alloc_n(w, (size_t)count * (size_t)g->arity, sizeof(int));
    g->rest = (float *)pbd__alloc_n(w, (size_t)count * (size_t)stride, sizeof(float));
    g->lambda = (float *)pbd__alloc_n(w, (size_t)count, sizeof(float));
    if (!g->idx || !g->rest || !g->lambda) {
        pbd__group_free(w, g);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for %d constraints", count);
    }
    return PBD_OK;
}

/* The unique edges of triangles (world indices) with their current lengths. */
static pbd_result pbd__limit_edges(pbd_world *w, const int *tri, int nt, pbd__group *g) {
    pbd__edge *edges = NULL;
    long ne = pbd__build_edges(w, tri, nt, 3, &edges);
    if (ne < 0) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for edges");
    pbd_result r = pbd__private_group(w, g, PBD_CONSTRAINT_DISTANCE, (int)ne, 1);
    for (long e = 0; r == PBD_OK && e < ne; ++e) {
        g->idx[2 * e] = edges[e].a;
        g->idx[2 * e + 1] = edges[e].b;
        g->rest[e] = pbd__len(pbd__sub(pbd__p3(w->x[edges[e].a]), pbd__p3(w->x[edges[e].b])));
        if (!(g->rest[e] > PBD__REST_LEN_MIN))
            r = pbd__fail(w, PBD_ERROR_DEGENERATE, "edge %d-%d has zero length", edges[e].a, edges[e].b);
    }
    if (r != PBD_OK) pbd__group_free(w, g);
    pbd__free(w, edges);
    return r;
}

PBDDEF pbd_result pbd_add_strain_limit(pbd_world *w, const pbd_strain_limit_desc *d, pbd_strain_limit *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    if (d->mode != PBD_STRAIN_TRIANGLES && d->mode != PBD_STRAIN_EDGES)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "strain mode %d is not PBD_STRAIN_TRIANGLES or PBD_STRAIN_EDGES (0 or 1)", (int)d->mode);
    if (d->object.id) PBD__TRY(pbd__check_object_handle(w, d->object));
    PBD__TRY(pbd__check_stretch_range(w, d->min_stretch, d->max_stretch));
    if (!pbd__finite(d->stiffness)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "stiffness is not finite");
    if (!(d->stiffness > 0 && d->stiffness <= 1))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "stiffness %g outside (0, 1]", (double)d->stiffness);
    int *tri = NULL;
    PBD__TRY(pbd__world_triangles(w, pbd__oi(d->object), d->triangles, d->triangle_count, &tri));
    pbd__limit L;
    memset(&L, 0, sizeof L);
    L.mode = (int)d->mode;
    L.enabled = 1;
    L.lo = d->min_stretch;
    L.hi = d->max_stretch;
    L.stiffness = d->stiffness;
    pbd_result r = PBD_OK;
    if (d->mode == PBD_STRAIN_EDGES) {
        r = pbd__limit_edges(w, tri, d->triangle_count, &L.g);
    } else {
        r = pbd__private_group(w, &L.g, PBD_CONSTRAINT_AREA, d->triangle_count, 3);
        for (int t = 0; r == PBD_OK && t < d->triangle_count; ++t) {
            pbd__v3 x[3];
            memcpy(L.g.idx + 3 * t, tri + 3 * t, 3 * sizeof(int));
            pbd__gather(w, tri + 3 * t, 3, x);
            if (!pbd__triangle_rest2d(x, L.g.rest + 3 * t))
                r = pbd__fail(w, PBD_ERROR_DEGENERATE, "triangle %d is degenerate", t);
        }
        if (r != PBD_OK && L.g.idx) pbd__group_free(w, &L.g);
    }
    pbd__free(w, tri);
    if (r == PBD_OK) {
        r = pbd__color_group(w, &L.g);
        if (r != PBD_OK) pbd__group_free(w, &L.g);
    }
    if (r == PBD_OK && (r = PBD__ROOM(w, w->limits, w->nlimits, w->limit_cap, "strain limit")) != PBD_OK)
        pbd__group_free(w, &L.g);
    if (r != PBD_OK) return r;
    int li = PBD__PLACE(w, w->limits, w->nlimits, &L);
    if (out) out->id = PBD__HANDLE(w->limits, li);
    return PBD_OK;
}

/* The index of the strain limit a handle names. */
static pbd_result pbd__limit_index(const pbd_world *w, pbd_strain_limit handle, int *index) {
    return PBD__RESOLVE(w, handle, w->limits, w->nlimits, "strain limit", index);
}

PBDDEF pbd_result pbd_remove_strain_limit(pbd_world *w, pbd_strain_limit handle) {
    PBD__CHECK_WORLD(w);
    int i;
    PBD__TRY(pbd__limit_index(w, handle, &i));
    pbd__limit_free(w, &w->limits[i]);
    PBD__RELEASE(w->limits, i);
    return PBD_OK;
}

PBDDEF pbd_result pbd_strain_limit_set_enabled(pbd_world *w, pbd_strain_limit handle, int enabled) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int s;
    PBD__TRY(pbd__limit_index(w, handle, &s));
    PBD__TRY(pbd__check_switch(w, enabled, "enabled"));
    w->limits[s].enabled = enabled;
    return PBD_OK;
}

PBDDEF pbd_result pbd_strain_limit_set_range(pbd_world *w, pbd_strain_limit handle, float min_stretch,
                                             float max_stretch) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int s;
    PBD__TRY(pbd__limit_index(w, handle, &s));
    PBD__TRY(pbd__check_stretch_range(w, min_stretch, max_stretch));
    w->limits[s].lo = min_stretch;
    w->limits[s].hi = max_stretch;
    return PBD_OK;
}

// ==== strands ===============================================================

typedef struct pbd__strands {
    pbd__slot s;
    int nstrands, nparticles;
    int *start;    /* nstrands + 1 offsets into idx */
    int *idx;      /* the particles, root first */
    float *rest;   /* per entry of idx: length of the segment ending there (0 at roots) */
    float damping; /* DFTL s_damping */
    /* hair: roots in the surface frame and the surface pose */
    int hair, clamped;
    float *root; /* nstrands * 6: position and unit normal, surface frame (hair only) */
    float pos[3], rot[4];
    float *d; /* scratch, nparticles * 3: FTL corrections this substep */
} pbd__strands;

PBDDEF pbd_strands_desc pbd_strands_desc_default(void) {
    pbd_strands_desc d;
    memset(&d, 0, sizeof d);
    d.damping = 0.9f;
    return d;
}

PBDDEF pbd_hair_desc pbd_hair_desc_default(void) {
    pbd_hair_desc d;
    memset(&d, 0, sizeof d);
    d.particles_per_strand = 16;
    d.length = 0.2f;
    d.mass = 1e-4f;
    d.radius = 0.002f;
    d.damping = 0.9f;
    d.clamped = 1;
    d.rotation[3] = 1.0f;
    return d;
}

/* Mueller et al. 2012 (survey 3.5, Figure 9): the follower goes onto the
   sphere of radius `rest` about its leader, along the line through both;
   coincident points use a fixed per-pair direction. A NaN or infinite
   point stays NaN (l is NaN, not <= PBD__DIR_MIN): given a direction, a
   NaN that a plugin or a field wrote would be put back on the sphere,
   and the step would end PBD_OK with the particle jumped, instead of
   failing with PBD_ERROR_NOT_FINITE and rolling back (CONVENTIONS). */
static inline PBD_HD pbd__v3 pbd__ftl_target(pbd__v3 leader, pbd__v3 p, float rest, unsigned a, unsigned b) {
    pbd__v3 d = pbd__sub(p, leader);
    float l = pbd__len(d);
    if (l <= PBD__DIR_MIN) return pbd__add(leader, pbd__mul(pbd__hash_dir(a, b), rest));
    return pbd__add(leader, pbd__mul(d, rest / l));
}

PBDDEF pbd_result pbd_ftl_project(float *points, int n, const float *rest, float *corrections) {
    static const char *const names[2] = {"points", "rest"};
    const void *given[2] = {points, rest};
    if (pbd__check_pointers("pbd_ftl_project", given, names, 2) != PBD_OK) return PBD_ERROR_NULL_POINTER;
    if (n < 2) return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_ftl_project: n = %d, at least 2 points", n);
    for (int i = 0; i < 3 * n; ++i)
        if (!pbd__finite(points[i]))
            return pbd__fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_ftl_project: points[%d] = %g is not finite (point %d)", i,
                             (double)points[i], i / 3);
    for (int i = 0; i < n - 1; ++i)
        if (!pbd__finite(rest[i]))
            return pbd__fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_ftl_project: rest[%d] = %g is not finite", i,
                             (double)rest[i]);
    for (int i = 0; i < n - 1; ++i)
        if (rest[i] < 0)
            return pbd__fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_ftl_project: rest[%d] = %g < 0", i,
                             (double)rest[i]);
    if (corrections) memset(corrections, 0, sizeof(float) * 3 * (size_t)n);
    for (int i = 1; i < n; ++i) {
        pbd__v3 p = pbd__ld(points + 3 * i);
        pbd__v3 t = pbd__ftl_target(pbd__ld(points + 3 * (i - 1)), p, rest[i - 1], (unsigned)(i - 1), (unsigned)i);
        if (corrections) pbd__st(corrections + 3 * i, pbd__sub(t, p));
        pbd__st(points + 3 * i, t);
    }
    return PBD_OK;
}

/* FTL over strand s: particles of inverse mass 0 stay and lead the rest;
   d collects the corrections of the substep (cleared in its first
   iteration). The scalar reference of pbd__vftl_batch. */
static PBD_HD void pbd__ftl_strand(pbd__p4 *P, pbd__strands *S, int s, int first_iteration) {
    int b = S->start[s], e = S->start[s + 1];
    if (first_iteration) memset(S->d + 3 * (size_t)b, 0, sizeof(float) * 3 * (size_t)(e - b));
    pbd__v3 lead = pbd__p3(P[S->idx[b]]);
    for (int k = b + 1; k < e; ++k) {
        pbd__p4 *q = &P[S->idx[k]];
        pbd__v3 p = pbd__p3(*q);
        if (q->w != 0) {
            pbd__v3 t = pbd__ftl_target(lead, p, S->rest[k], (unsigned)S->idx[k - 1], (unsigned)S->idx[k]);
            float *dk = S->d + 3 * (size_t)k;
            dk[0] += t.x - p.x;
            dk[1] += t.y - p.y;
            dk[2] += t.z - p.z;
            q->x = t.x;
            q->y = t.y;
            q->z = t.z;
            p = t;
        }
        lead = p;
    }
}

#if PBD__W > 1
/* W strands of `per` particles side by side, one per lane: FTL is a chain
   of dependent square roots and divisions along a strand, so lanes over
   strands hide that latency. The same operations as pbd__ftl_strand in
   every lane (bit-identical); a lane with coincident points takes the
   scalar formula. */
static void pbd__vftl_batch(pbd__p4 *P, pbd__strands *S, int s0, int per, int first_iteration) {
    int ids[PBD__W];
    float rest[PBD__W], tx[PBD__W], ty[PBD__W], tz[PBD__W], px[PBD__W], py[PBD__W], pz[PBD__W], lv[PBD__W], wv[PBD__W];
    if (first_iteration) memset(S->d + 3 * (size_t)S->start[s0], 0, sizeof(float) * 3 * (size_t)per * PBD__W);
    for (int l = 0; l < PBD__W; ++l) ids[l] = S->idx[S->start[s0 + l]];
    pbd__vp q = pbd__vgather(P, ids);
    pbd__vv lead = pbd__vvpos(q);
    pbd__vf zero = pbd__vset1(0.0f);
    for (int k = 1; k < per; ++k) {
        for (int l = 0; l < PBD__W; ++l) {
            int e = S->start[s0 + l] + k;
            ids[l] = S->idx[e];
            rest[l] = S->rest[e];
        }
        q = pbd__vgather(P, ids);
        pbd__vv p = pbd__vvpos(q), d = pbd__vvsub(p, lead);
        pbd__vf len = pbd__vsqrt(pbd__vvdot(d, d));
        pbd__vv t = pbd__vvadd(lead, pbd__vvmul(d, pbd__vdiv(pbd__vload(rest), len)));
        pbd__vm active = pbd__vandnot_m(pbd__vle(zero, pbd__vset1(1.0f)), pbd__veq(q.w, zero));
        t.x = pbd__vsel(active, p.x, t.x);
        t.y = pbd__vsel(active, p.y, t.y);
        t.z = pbd__vsel(active, p.z, t.z);
        pbd__vstore(tx, t.x);
        pbd__vstore(ty, t.y);
        pbd__vstore(tz, t.z);
        pbd__vstore(px, p.x);
        pbd__vstore(py, p.y);
        pbd__vstore(pz, p.z);
        pbd__vstore(lv, len);
        pbd__vstore(wv, q.w);
        for (int l = 0; l < PBD__W; ++l) {
            if (wv[l] == 0) continue;
            int e = S->start[s0 + l] + k;
            if (lv[l] <= PBD__DIR_MIN) { /* NaN stays NaN, as in pbd__ftl_target */
                pbd__v3 lp = pbd__p3(P[S->idx[e - 1]]);
                pbd__v3 tt = pbd__ftl_target(lp, pbd__v(px[l], py[l], pz[l]), rest[l], (unsigned)S->idx[e - 1],
                                             (unsigned)ids[l]);
                tx[l] = tt.x;
                ty[l] = tt.y;
                tz[l] = tt.z;
            }
            float *dk = S->d + 3 * (size_t)e;
            dk[0] += tx[l] - px[l];
            dk[1] += ty[l] - py[l];
            dk[2] += tz[l] - pz[l];
            pbd__p4 *o = &P[ids[l]];
            o->x = tx[l];
            o->y = ty[l];
            o->z = tz[l];
        }
        lead.x = pbd__vload(tx);
        lead.y = pbd__vload(ty);
        lead.z = pbd__vload(tz);
    }
}
#endif

/* One FTL pass over every strand of a set: strands in parallel, each in
   order; batches of W equal strands in SIMD lanes. */
static void pbd__ftl_set(pbd_world *w, pbd__strands *S, int first_iteration) {
    pbd__p4 *P = w->p;
    int per = S->start[1] - S->start[0], uniform = 1, nb = S->nstrands, W = 1;
    for (int s = 1; s < S->nstrands && uniform; ++s) uniform = S->start[s + 1] - S->start[s] == per;
#if PBD__W > 1
    if (w->simd && uniform) {
        W = PBD__W;
        nb = (S->nstrands + W - 1) / W;
    }
#endif
    PBD__PRAGMA(omp for schedule(static))
    for (int bi = 0; bi < nb; ++bi) {
        int s0 = bi * W, s1 = s0 + W < S->nstrands ? s0 + W : S->nstrands;
#if PBD__W > 1
        if (W > 1 && s1 - s0 == PBD__W) {
            pbd__vftl_batch(P, S, s0, per, first_iteration);
            continue;
        }
#endif
        for (int s = s0; s < s1; ++s) pbd__ftl_strand(P, S, s, first_iteration);
    }
    (void)uniform;
    (void)per;
}

static void pbd__strands_project(pbd_world *w, int iteration) {
    for (int i = 0; i < w->nstrands; ++i)
        if (w->strands[i].s.live) pbd__ftl_set(w, &w->strands[i], iteration == 0);
}

/* Dynamic FTL's velocity (Mueller et al. 2012, "Fast simulation of
   inextensible hair and fur", section 4.2; survey 3.5): after the update
   u_i = (p_i - x_i)/h, v_i = u_i - t d_{i+1}/h, d_{i+1} the correction
   FTL gave the next particle this substep (summed over the iterations),
   t = s_damping in the paper. FTL moves only the follower, as if every
   leader had infinite mass; -d_{i+1}/h is the reaction the leader would
   have felt. A leader that pays only part of it drags its follower on
   while keeping its own speed, a motor: a strand of 30 particles let go
   horizontal (test strands_swinging_strand_gains_no_energy, 294 J) gained
   +31 J at the default 0.9, +2076 J at 0.5, +12494 J at 0; one paying
   more than its share at rest takes a velocity that the next FTL pass
   takes back and hands to its own leader, growing towards the root (test
   strands_hanging_strand_has_no_phantom_velocity).
   A departure from the paper: the correction may do no work. Per segment,
   the pair's energy change against the motion without FTL's correction
   (the follower's kinetic energy m_f (u_f.D - |D|^2/2) and potential
   energy -m_f g.d gained by the correction d = d_{i+1}, D = d/h, and the
   leader's m_l (t^2 |D|^2/2 - t u_l.D) from its reaction) is a quadratic
   f(t), times w_l w_f here (inverse masses). t = s_damping where f <= 0,
   else the nearest t in [0, 1] where it is; where none is, the follower
   also gives up part of its correction's velocity (its position keeps
   the correction, as pre-stabilisation does), and what still is not
   paid is owed by the next segment, whose leader that follower is. The
   tip pays what is owed at the end from its own kinetic energy, as far
   as that goes (pbd__strand_tip_pays). The changes of a strand's
   segments add up (each particle's velocity is the follower's in one and
   the leader's in the next), so a strand gains no energy from FTL and
   its correction, up to what the tip could not pay: nothing for hair at
   rest, some for a long strand swinging slowly about its root, whose
   lower segments FTL lifts (see the manual, "strands"). The rule does
   not give back the m_f h^2 |g|^2 / 2 that the prediction's explicit
   step loses (v += h g, x += h v): it once did (f within that budget),
   and the tips of hair on a still head then swung on against the
   world's damping (test strands_hair_comes_to_rest_under_point_damping).
   Contacts, wind and the root's motion are what they are. */
/* The root of a t^2 - b t + c (a > 0) nearest `from`, which lies outside
   the roots, if it is in [0, 1]; else, or where there is none, the t in
   [0, 1] of least value. */
static inline PBD_HD float pbd__root_toward(float a, float b, float c, float from) {
    float inv = 1.0f / (2.0f * a), least = b * inv, disc = b * b - 4.0f * a * c;
    least = least < 0 ? 0.0f : least > 1 ? 1.0f : least;
    if (!(disc >= 0)) return least;
    float r = sqrtf(disc), t = from < least ? (b - r) * inv : (b + r) * inv;
    return t >= 0 && t <= 1 ? t : least;
}
/* What the tip still owes when the walk ends (joules): it pays from its
   own kinetic energy |v|^2 / (2 w) as far as that goes; the rest, owed at
   rest, is dropped. */
static inline PBD_HD void pbd__strand_tip_pays(pbd__p4 *v, float w, float debt) {
    if (!(debt > 0) || w == 0) return;
    float v2 = v->x * v->x + v->y * v->y + v->z * v->z, left = v2 - 2.0f * debt * w,
          keep = left > 0 ? sqrtf(left / v2) : 0.0f;
    v->x *= keep;
    v->y *= keep;
    v->z *= keep;
}

/* The scalar reference; pbd__vstrand_velocity_batch does the same
   operations in W lanes. */
static inline PBD_HD void pbd__strand_velocity(pbd_world *w, const pbd__strands *S, int s, float h) {
    const float *g = w->gravity;
    float inv_h = 1.0f / h, sd = S->damping, debt = 0;
    for (int k = S->start[s]; k < S->start[s + 1] - 1; ++k) {
        pbd__p4 *v = &w->v[S->idx[k]], *vf = &w->v[S->idx[k + 1]];
        float wl = w->x[S->idx[k]].w, wf = w->x[S->idx[k + 1]].w;
        if (wl == 0) { /* a held leader pays nothing and owes nothing */
            debt = 0;
            continue;
        }
        const float *dn = S->d + 3 * (size_t)(k + 1);
        float dx = dn[0] * inv_h, dy = dn[1] * inv_h, dz = dn[2] * inv_h, dd = dx * dx + dy * dy + dz * dz;
        if (!(dd > 0) || wf == 0) continue; /* FTL moved no follower (a held one stays) */
        /* f(t) = A t^2 - B t + C, times w_l w_f: the follower's gain from d,
           the leader's from -t d/h, plus the debt its leader brings */
        float uf = vf->x * dx + vf->y * dy + vf->z * dz, A = 0.5f * dd * wf,
              B = (v->x * dx + v->y * dy + v->z * dz) * wf,
              C = (uf - 0.5f * dd - (g[0] * dn[0] + g[1] * dn[1] + g[2] * dn[2]) + debt * wf) * wl,
              t = (A * sd - B) * sd + C > 0 ? pbd__root_toward(A, B, C, sd) : sd, excess = (A * t - B) * t + C,
              c = t * inv_h;
        v->x = v->x - c * dn[0];
        v->y = v->y - c * dn[1];
        v->z = v->z - c * dn[2];
        debt = 0;
        if (excess > 0) {
            /* the follower gives up part b of its correction's velocity: its
               energy changes by w_l (dd b^2 / 2 - uf b), which is -excess */
            float b = pbd__root_toward(0.5f * dd * wl, uf * wl, excess, 0.0f),
                  left = excess + wl * (0.5f * dd * b * b - uf * b);
            c = b * inv_h;
            vf->x = vf->x - c * dn[0];
            vf->y = vf->y - c * dn[1];
            vf->z = vf->z - c * dn[2];
            debt = left > 0 ? left / (wl * wf) : 0.0f; /* joules unpaid: the next segment's leader owes them */
        }
    }
    int tip = S->idx[S->start[s + 1] - 1];
    pbd__strand_tip_pays(&w->v[tip], w->x[tip].w, debt);
}

#if PBD__W > 1
/* pbd__root_toward in W lanes (the same operations). */
static inline pbd__vf pbd__vroot_toward(pbd__vf a, pbd__vf b, pbd__vf c, pbd__vf from) {
    pbd__vf zero = pbd__vset1(0.0f), one = pbd__vset1(1.0f), inv = pbd__vdiv(one, pbd__vmul(pbd__vset1(2.0f), a)),
            least = pbd__vmul(b, inv), disc = pbd__vsub(pbd__vmul(b, b), pbd__vmul(pbd__vmul(pbd__vset1(4.0f), a), c));
    least = pbd__vsel(pbd__vlt(least, zero), pbd__vsel(pbd__vlt(one, least), least, one), zero);
    pbd__vf r = pbd__vsqrt(disc),
            t = pbd__vsel(pbd__vlt(from, least), pbd__vmul(pbd__vadd(b, r), inv), pbd__vmul(pbd__vsub(b, r), inv));
    /* disc < 0: r and t are NaN, and NaN is not in [0, 1] */
    pbd__vm in = pbd__vand_m(pbd__vle(zero, t), pbd__vle(t, one));
    return pbd__vsel(pbd__vand_m(in, pbd__vle(zero, disc)), least, t);
}

/* The velocity pass of one batch of W equal strands, one per lane: the
   leader's velocity and inverse mass and the debt it brings (registers
   from one segment to the next, where the follower becomes the leader). */
typedef struct pbd__vstrands {
    int s0, lid[PBD__W], fid[PBD__W];
    pbd__vp vl;
    pbd__vf wl, debt;
} pbd__vstrands;

/* Segment k of every lane's strand: pbd__strand_velocity's operations. */
static inline void pbd__vstrand_segment(pbd_world *w, const pbd__strands *S, pbd__vstrands *B, int k, float h) {
    const float *g = w->gravity;
    float inv_h = 1.0f / h, d3[3][PBD__W], wfl[PBD__W];
    pbd__vf zero = pbd__vset1(0.0f), half = pbd__vset1(0.5f), ih = pbd__vset1(inv_h), sd = pbd__vset1(S->damping);
    for (int l = 0; l < PBD__W; ++l) {
        int e = S->start[B->s0 + l] + k;
        B->fid[l] = S->idx[e];
        wfl[l] = w->x[B->fid[l]].w;
        for (int a = 0; a < 3; ++a) d3[a][l] = S->d[3 * (size_t)e + a];
    }
    pbd__vp vf = pbd__vgather(w->v, B->fid), vl = B->vl;
    pbd__vf wl = B->wl, wf = pbd__vload(wfl), d0 = pbd__vload(d3[0]), d1 = pbd__vload(d3[1]), d2 = pbd__vload(d3[2]),
            dx = pbd__vmul(d0, ih), dy = pbd__vmul(d1, ih), dz = pbd__vmul(d2, ih),
            dd = pbd__vadd(pbd__vadd(pbd__vmul(dx, dx), pbd__vmul(dy, dy)), pbd__vmul(dz, dz)),
            uf = pbd__vadd(pbd__vadd(pbd__vmul(vf.x, dx), pbd__vmul(vf.y, dy)), pbd__vmul(vf.z, dz)),
            A = pbd__vmul(pbd__vmul(half, dd), wf),
            Bq = pbd__vmul(pbd__vadd(pbd__vadd(pbd__vmul(vl.x, dx), pbd__vmul(vl.y, dy)), pbd__vmul(vl.z, dz)), wf),
            gd = pbd__vadd(pbd__vadd(pbd__vmul(pbd__vset1(g[0]), d0), pbd__vmul(pbd__vset1(g[1]), d1)),
                           pbd__vmul(pbd__vset1(g[2]), d2)),
            C = pbd__vmul(pbd__vadd(pbd__vsub(pbd__vsub(uf, pbd__vmul(half, dd)), gd), pbd__vmul(B->debt, wf)), wl),
            fs = pbd__vadd(pbd__vmul(pbd__vsub(pbd__vmul(A, sd), Bq), sd), C),
            t = pbd__vsel(pbd__vlt(zero, fs), sd, pbd__vroot_toward(A, Bq, C, sd)),
            ex = pbd__vadd(pbd__vmul(pbd__vsub(pbd__vmul(A, t), Bq), t), C), c = pbd__vmul(t, ih);
    pbd__vm held = pbd__veq(wl, zero),
            skip = pbd__vor_m(held,
                              pbd__vor_m(pbd__vandnot_m(pbd__vle(zero, zero), pbd__vlt(zero, dd)), pbd__veq(wf, zero))),
            pay = pbd__vandnot_m(pbd__vlt(zero, ex), skip);
    vl.x = pbd__vsel(skip, pbd__vsub(vl.x, pbd__vmul(c, d0)), vl.x);
    vl.y = pbd__vsel(skip, pbd__vsub(vl.y, pbd__vmul(c, d1)), vl.y);
    vl.z = pbd__vsel(skip, pbd__vsub(vl.z, pbd__vmul(c, d2)), vl.z);
    pbd__vf b = pbd__vroot_toward(pbd__vmul(pbd__vmul(half, dd), wl), pbd__vmul(uf, wl), ex, zero),
            left = pbd__vadd(
                ex, pbd__vmul(wl, pbd__vsub(pbd__vmul(pbd__vmul(pbd__vmul(half, dd), b), b), pbd__vmul(uf, b))));
    c = pbd__vmul(b, ih);
    vf.x = pbd__vsel(pay, vf.x, pbd__vsub(vf.x, pbd__vmul(c, d0)));
    vf.y = pbd__vsel(pay, vf.y, pbd__vsub(vf.y, pbd__vmul(c, d1)));
    vf.z = pbd__vsel(pay, vf.z, pbd__vsub(vf.z, pbd__vmul(c, d2)));
    pbd__vf owed = pbd__vsel(pbd__vlt(zero, left), zero, pbd__vdiv(left, pbd__vmul(wl, wf)));
    /* held: 0; skipped: unchanged; else what is left unpaid */
    B->debt = pbd__vsel(held, pbd__vsel(skip, pbd__vsel(pay, zero, owed), B->debt), zero);
    pbd__vscatter(w->v, B->lid, vl);
    B->vl = vf;
    B->wl = wf;
    memcpy(B->lid, B->fid, sizeof B->lid);
}

/* n (1 or 2) batches of W strands of `per` particles from strand s0: the
   velocity pass is a chain of dependent divisions and square roots along
   a strand, so lanes over strands, and two batches side by side, hide
   that latency (as pbd__vftl_batch does for FTL). The same operations as
   pbd__strand_velocity in every lane: the same bits. */
static void pbd__vstrand_velocity_batches(pbd_world *w, const pbd__strands *S, int s0, int n, int per, float h) {
    pbd__vstrands B[2];
    for (int q = 0; q < n; ++q) {
        B[q].s0 = s0 + q * PBD__W;
        for (int l = 0; l < PBD__W; ++l) B[q].lid[l] = S->idx[S->start[B[q].s0 + l]];
        B[q].vl = pbd__vgather(w->v, B[q].lid);
        float wl[PBD__W];
        for (int l = 0; l < PBD__W; ++l) wl[l] = w->x[B[q].lid[l]].w;
        B[q].wl = pbd__vload(wl);
        B[q].debt = pbd__vset1(0.0f);
    }
    for (int k = 1; k < per; ++k) {
        pbd__vstrand_segment(w, S, &B[0], k, h);
        if (n > 1) pbd__vstrand_segment(w, S, &B[1], k, h);
    }
    for (int q = 0; q < n; ++q) {
        pbd__vscatter(w->v, B[q].lid, B[q].vl);
        float debt[PBD__W], wt[PBD__W];
        pbd__vstore(debt, B[q].debt);
        pbd__vstore(wt, B[q].wl);
        for (int l = 0; l < PBD__W; ++l) pbd__strand_tip_pays(&w->v[B[q].lid[l]], wt[l], debt[l]);
    }
}
#endif

/* Every strand, also at s_damping 0: the guard may still correct.
   Strands in parallel; pairs of batches of W equal strands in SIMD lanes. */
static void pbd__strands_velocities(pbd_world *w, float h) {
    for (int i = 0; i < w->nstrands; ++i) {
        const pbd__strands *S = &w->strands[i];
        if (!S->s.live) continue;
        int per = S->start[1] - S->start[0], uniform = 1, nb = S->nstrands, W = 1;
        for (int s = 1; s < S->nstrands && uniform; ++s) uniform = S->start[s + 1] - S->start[s] == per;
#if PBD__W > 1
        if (w->simd && uniform) {
            W = 2 * PBD__W; /* two batches side by side */
            nb = (S->nstrands + W - 1) / W;
        }
#endif
        PBD__PRAGMA(omp for schedule(static))
        for (int bi = 0; bi < nb; ++bi) {
            int s0 = bi * W, s1 = s0 + W < S->nstrands ? s0 + W : S->nstrands;
#if PBD__W > 1
            if (W > 1 && s1 - s0 >= PBD__W) {
                int n = (s1 - s0) / PBD__W;
                pbd__vstrand_velocity_batches(w, S, s0, n, per, h);
                s0 += n * PBD__W;
            }
#endif
            for (int s = s0; s < s1; ++s) pbd__strand_velocity(w, S, s, h);
        }
        (void)per;
    }
}

/* A strand particle set free (unpinned, no longer kinematic, given a
   mass). While it was held it led its followers and FTL could not reach
   it: the segment from its leader has whatever length the hand made (1 m
   for a strand dragged 1 m from its root). The next FTL pass would close
   that gap in one substep, and v = (p - x)/h would turn the jump into a
   velocity of gap/h (a hair grabbed by the middle and let go would fly
   off). The gap is a state error from before the step, not motion:
   it is settled now, in x and p alike, leaving the velocities as they
   are, as pre-stabilization does for contacts (Macklin et al. 2014,
   "Unified particle physics"). One scalar FTL pass over the particle's
   strand; particles still held stay. */
static void pbd__strands_release(pbd_world *w, int i) {
    for (int k = 0; k < w->nstrands; ++k) {
        pbd__strands *S = &w->strands[k];
        for (int s = 0; s < S->nstrands; ++s)
            for (int e = S->start[s]; e < S->start[s + 1]; ++e) {
                if (S->idx[e] != i) continue;
                pbd__ftl_strand(w->x, S, s, 1);
                for (int j = S->start[s]; j < S->start[s + 1]; ++j) w->p[S->idx[j]] = w->x[S->idx[j]];
                return; /* a particle belongs to one strand */
            }
    }
}

static void pbd__strands_free_one(pbd_world *w, pbd__strands *S) {
    pbd__free(w, S->start);
    pbd__free(w, S->idx);
    pbd__free(w, S->rest);
    pbd__free(w, S->root);
    pbd__free(w, S->d);
    pbd__slot keep = S->s;
    memset(S, 0, sizeof *S);
    S->s = keep;
}

static pbd_result pbd__check_damping01(const pbd_world *w, float s) {
    if (!pbd__finite(s)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "damping is not finite");
    if (!(s >= 0 && s <= 1))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "strand damping %g outside [0, 1]", (double)s);
    return PBD_OK;
}

/* Allocates a set of ns strands over np particles (arrays uninitialised). */
static pbd_result pbd__strands_alloc(pbd_world *w, pbd__strands *S, int ns, int np, int hair) {
    memset(S, 0, sizeof *S);
    S->nstrands = ns;
    S->nparticles = np;
    S->start = (int *)pbd__alloc_n(w, (size_t)ns + 1, sizeof(int));
    S->idx = (int *)pbd__alloc_n(w, (size_t)np, sizeof(int));
    S->rest = (float *)pbd__alloc_n(w, (size_t)np, sizeof(float));
    S->d = (float *)pbd__alloc_n(w, (size_t)np * 3, sizeof(float));
    S->root = hair ? (float *)pbd__alloc_n(w, (size_t)ns * 6, sizeof(float)) : NULL;
    S->hair = hair;
    S->rot[3] = 1.0f;
    if (!S->start || !S->idx || !S->rest || !S->d || (hair && !S->root)) {
        pbd__strands_free_one(w, S);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for %d strands", ns);
    }
    memset(S->d, 0, sizeof(float) * 3 * (size_t)np);
    return PBD_OK;
}

static pbd_result pbd__strands_push(pbd_world *w, pbd__strands *S, pbd_strands *out) {
    pbd_result r = PBD__ROOM(w, w->strands, w->nstrands, w->strands_cap, "strand set");
    if (r != PBD_OK) {
        pbd__strands_free_one(w, S);
        return r;
    }
    int si = PBD__PLACE(w, w->strands, w->nstrands, S);
    if (out) out->id = PBD__HANDLE(w->strands, si);
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_strands(pbd_world *w, const pbd_strands_desc *d, pbd_strands *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__CHECK_PTR(w, d->particles, "desc.particles");
    PBD__CHECK_PTR(w, d->strand_starts, "desc.strand_starts");
    if (d->strand_count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "strand count %d <= 0", d->strand_count);
    PBD__TRY(pbd__check_damping01(w, d->damping));
    if (d->strand_starts[0] != 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "strand_starts[0] must be 0");
    for (int s = 0; s < d->strand_count; ++s)
        if (d->strand_starts[s + 1] - d->strand_starts[s] < 2 || d->strand_starts[s + 1] > INT_MAX / 8)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "strand %d has fewer than 2 particles", s);
    int np = d->strand_starts[d->strand_count];
    unsigned char *mark = (unsigned char *)pbd__alloc_n(w, (size_t)(w->n > 0 ? w->n : 1), 1);
    if (!mark) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory");
    memset(mark, 0, (size_t)(w->n > 0 ? w->n : 1));
    /* a particle in two strands (or twice in one) would be written by two threads */
    for (int k = 0; k < w->nstrands; ++k)
        for (int j = 0; j < w->strands[k].nparticles; ++j) mark[w->strands[k].idx[j]] = 1;
    pbd_result r = PBD_OK;
    for (int k = 0; k < np && r == PBD_OK; ++k) {
        char what[32]; /* the entry at fault, where particles lists thousands */
        snprintf(what, sizeof what, "particles[%d] =", k);
        r = pbd__check_particle(w, d->particles[k], what);
        if (r == PBD_OK && mark[d->particles[k]])
            r = pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                          "particles[%d] = %d is listed twice or is in another strand set (a particle belongs to "
                          "one strand, once)",
                          k, d->particles[k]);
        if (r == PBD_OK) mark[d->particles[k]] = 1;
    }
    pbd__free(w, mark);
    PBD__TRY(r);
    pbd__strands S;
    PBD__TRY(pbd__strands_alloc(w, &S, d->strand_count, np, 0));
    memcpy(S.start, d->strand_starts, sizeof(int) * ((size_t)d->strand_count + 1));
    memcpy(S.idx, d->particles, sizeof(int) * (size_t)np);
    S.damping = d->damping;
    for (int s = 0; s < d->strand_count && r == PBD_OK; ++s) {
        S.rest[S.start[s]] = 0;
        for (int k = S.start[s] + 1; k < S.start[s + 1]; ++k) {
            S.rest[k] = pbd__len(pbd__sub(pbd__p3(w->x[S.idx[k]]), pbd__p3(w->x[S.idx[k - 1]])));
            if (!(S.rest[k] > PBD__REST_LEN_MIN)) {
                r = pbd__fail(w, PBD_ERROR_DEGENERATE, "strand %d has a zero-length segment", s);
                break;
            }
        }
    }
    if (r != PBD_OK) {
        pbd__strands_free_one(w, &S);
        return r;
    }
    PBD__TRY(pbd__strands_push(w, &S, out));
    pbd__mark_coupled(w, d->particles, np); /* FTL does not conserve momentum */
    return PBD_OK;
}

/* Kinematic targets of a hair strand's root (and first segment when
   clamped) from a world root position and unit direction; the setters
   check them first (pbd__check_hair_root): a pose near the bound can put
   a root beyond it. */
static void pbd__hair_root_targets(pbd_world *w, const pbd__strands *S, int s, pbd__v3 root, pbd__v3 n) {
    int b = S->start[s];
    w->kin_target[S->idx[b]] = root;
    if (S->clamped) w->kin_target[S->idx[b + 1]] = pbd__add(root, pbd__mul(n, S->rest[b + 1]));
}
/* The targets pbd__hair_root_targets would set are positions given to the
   world, so within PBD_MAX_COORDINATE like any other (what names the
   input that placed them). */
static pbd_result pbd__check_hair_root(const pbd_world *w, const pbd__strands *S, int s, pbd__v3 root, pbd__v3 n,
                                       const char *what) {
    pbd__v3 first = pbd__add(root, pbd__mul(n, S->rest[S->start[s] + 1]));
    float t[6] = {root.x, root.y, root.z, first.x, first.y, first.z};
    char name[96];
    snprintf(name, sizeof name, "%s put strand %d's root%s", what, s, S->clamped ? " (point 0) or first segment" : "");
    return pbd__check_positions(w, t, S->clamped ? 6 : 3, name);
}

static pbd_result pbd__validate_hair(const pbd_world *w, const pbd_hair_desc *d) {
    PBD__CHECK_PTR(w, d, "desc");
    PBD__CHECK_PTR(w, d->root_positions, "desc.root_positions");
    PBD__CHECK_PTR(w, d->root_normals, "desc.root_normals");
    if (d->strand_count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "strand count %d <= 0", d->strand_count);
    if (d->particles_per_strand < 2)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particles_per_strand %d < 2", d->particles_per_strand);
    if ((long)d->strand_count * d->particles_per_strand > INT_MAX / 8 - w->n)
        return pbd__fail(w, PBD_ERROR_OVERFLOW, "%d strands of %d particles overflow", d->strand_count,
                         d->particles_per_strand);
    PBD__TRY(pbd__check_positions(w, d->root_positions, 3 * (size_t)d->strand_count, "root_positions"));
    PBD__TRY(pbd__check_finite(w, d->root_normals, 3 * (size_t)d->strand_count, "root_normals"));
    for (int s = 0; s < d->strand_count; ++s)
        if (!(pbd__len(pbd__ld(d->root_normals + 3 * s)) > PBD__DIR_MIN))
            return pbd__fail(w, PBD_ERROR_DEGENERATE, "root normal %d is zero", s);
    if (!pbd__finite(d->length))
        return pbd__fail(w, PBD_ERROR_NOT_FINITE, "length %g is not finite", (double)d->length);
    if (!(d->length > 0)) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "length %g must be > 0", (double)d->length);
    PBD__TRY(pbd__check_mass(w, d->mass, "mass", -1, 0));
    PBD__TRY(pbd__check_radius(w, d->radius, "radius", 1));
    PBD__TRY(pbd__check_switch(w, d->clamped, "clamped"));
    if (d->clamped && d->particles_per_strand < 3)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "a clamped strand needs >= 3 particles");
    PBD__TRY(pbd__check_damping01(w, d->damping));
    PBD__TRY(pbd__check_pose(w, d->position, d->rotation));
    /* the surface's pose places the roots: a position beyond the bound is
       one too (its hair never moved), however near the origin the roots */
    PBD__TRY(pbd__check_positions(w, d->position, 3, "position"));
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_hair(pbd_world *w, const pbd_hair_desc *d, pbd_strands *out, pbd_range *particles) {
    PBD__CHECK_WORLD(w);
    PBD__TRY(pbd__validate_hair(w, d));
    int ns = d->strand_count, per = d->particles_per_strand, np = ns * per;
    pbd__strands S;
    PBD__TRY(pbd__strands_alloc(w, &S, ns, np, 1));
    float *pos = (float *)pbd__alloc_n(w, (size_t)np * 3, sizeof(float));
    if (!pos) {
        pbd__strands_free_one(w, &S);
        return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for the hair");
    }
    pbd__normalize_quat(d->rotation, S.rot);
    memcpy(S.pos, d->position, sizeof S.pos);
    S.damping = d->damping;
    S.clamped = d->clamped;
    float seg = d->length / (float)(per - 1);
    for (int s = 0; s < ns; ++s) {
        pbd__v3 r = pbd__ld(d->root_positions + 3 * s), n = pbd__ld(d->root_normals + 3 * s);
        n = pbd__mul(n, 1.0f / pbd__len(n));
        pbd__st(S.root + 6 * s, r);
        pbd__st(S.root + 6 * s + 3, n);
        pbd__v3 rw = pbd__add(pbd__ld(S.pos), pbd__qrot(S.rot, r)), nw = pbd__qrot(S.rot, n);
        S.start[s] = s * per;
        for (int i = 0; i < per; ++i) {
            pbd__st(pos + 3 * ((size_t)s * per + i), pbd__add(rw, pbd__mul(nw, seg * (float)i)));
            S.rest[s * per + i] = i ? seg : 0.0f;
        }
    }
    S.start[ns] = np;
    /* roots each within the bound can still be placed, or grown, beyond it */
    pbd_result r = pbd__check_positions(w, pos, (size_t)np * 3,
                                        "the hair's particles (root_positions at position and rotation, grown "
                                        "by length)");
    if (r != PBD_OK) {
        pbd__free(w, pos);
        pbd__strands_free_one(w, &S);
        return r;
    }
    pbd__mark mark = pbd__mark_now(w);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = np;
    pd.mass = d->mass;
    pd.radius = d->radius;
    pbd_range range;
    r = pbd__append_particles(w, &pd, &range);
    pbd__free(w, pos);
    if (r != PBD_OK) {
        pbd__strands_free_one(w, &S);
        return r;
    }
    for (int k = 0; k < np; ++k) S.idx[k] = range.first + k;
    r = pbd__strands_push(w, &S, out);
    if (r != PBD_OK) {
        pbd__rollback(w, mark);
        return r;
    }
    for (int s = 0; s < ns; ++s)
        for (int i = 0; i < 1 + d->clamped; ++i) {
            int p = range.first + s * per + i;
            w->flags[p] |= PBD__KINEMATIC;
            pbd__refresh_inv_mass(w, p);
            w->kin_target[p] = pbd__p3(w->x[p]);
        }
    if (particles) *particles = range;
    return PBD_OK;
}

/* The index of the strand set a handle names. */
static pbd_result pbd__strands_index(const pbd_world *w, pbd_strands handle, int *index) {
    return PBD__RESOLVE(w, handle, w->strands, w->nstrands, "strand set", index);
}

/* The index of a hair strand set whose roots are still kinematic. */
static pbd_result pbd__hair_index(const pbd_world *w, pbd_strands handle, int *index) {
    PBD__TRY(pbd__strands_index(w, handle, index));
    int s = *index;
    if (!w->strands[s].hair)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "strand set %d is not hair (pbd_add_hair)", s);
    for (int k = 0; k < 1 + w->strands[s].clamped; ++k)
        for (int t = 0; t < w->strands[s].nstrands; ++t)
            if (!(w->flags[w->strands[s].idx[w->strands[s].start[t] + k]] & PBD__KINEMATIC))
                return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "the root of strand %d is no longer kinematic", t);
    return PBD_OK;
}

PBDDEF pbd_result pbd_strands_set_transform(pbd_world *w, pbd_strands handle, const float *position,
                                            const float *rotation) {
    PBD__CHECK_WORLD_PARTICLES(w);
    int si;
    PBD__TRY(pbd__hair_index(w, handle, &si));
    PBD__CHECK_PTR(w, position, "position");
    pbd__strands *S = &w->strands[si];
    PBD__TRY(pbd__check_pose(w, position, rotation ? rotation : S->rot));
    PBD__TRY(pbd__check_positions(w, position, 3, "position"));
    float rot[4];
    if (rotation) pbd__normalize_quat(rotation, rot);
    else memcpy(rot, S->rot, sizeof rot);
    /* pass 0 checks every root at the new pose, pass 1 moves them: a
       refused pose changes nothing */
    for (int pass = 0; pass < 2; ++pass)
        for (int s = 0; s < S->nstrands; ++s) {
            pbd__v3 r = pbd__add(pbd__ld(position), pbd__qrot(rot, pbd__ld(S->root + 6 * s)));
            pbd__v3 n = pbd__qrot(rot, pbd__ld(S->root + 6 * s + 3));
            if (pass == 0) PBD__TRY(pbd__check_hair_root(w, S, s, r, n, "position and rotation"));
            else pbd__hair_root_targets(w, S, s, r, n);
        }
    memcpy(S->rot, rot, sizeof S->rot);
    memcpy(S->pos, position, sizeof S->pos);
    return PBD_OK;
}

PBDDEF pbd_result pbd_strands_set_roots(pbd_world *w, pbd_strands handle, const float *positions,
                                        const float *normals) {
    PBD__CHECK_WORLD_PARTICLES(w);
    int si;
    PBD__TRY(pbd__hair_index(w, handle, &si));
    PBD__CHECK_PTR(w, positions, "positions");
    pbd__strands *S = &w->strands[si];
    PBD__TRY(pbd__check_positions(w, positions, 3 * (size_t)S->nstrands, "positions"));
    if (normals) {
        PBD__TRY(pbd__check_finite(w, normals, 3 * (size_t)S->nstrands, "normals"));
        for (int s = 0; s < S->nstrands; ++s)
            if (!(pbd__len(pbd__ld(normals + 3 * s)) > PBD__DIR_MIN))
                return pbd__fail(w, PBD_ERROR_DEGENERATE, "normal %d is zero", s);
    }
    /* pass 0 checks the first segments' targets (a root near the bound
       can put its segment beyond it), pass 1 sets them */
    for (int pass = 0; pass < 2; ++pass)
        for (int s = 0; s < S->nstrands; ++s) {
            int b = S->start[s];
            pbd__v3 n;
            if (normals) n = pbd__ld(normals + 3 * s);
            else if (S->clamped) n = pbd__sub(w->kin_target[S->idx[b + 1]], w->kin_target[S->idx[b]]);
            else n = pbd__v(0, 1, 0);
            float l = pbd__len(n);
            n = l > PBD__DIR_MIN ? pbd__mul(n, 1.0f / l) : pbd__v(0, 1, 0);
            if (pass == 0) PBD__TRY(pbd__check_hair_root(w, S, s, pbd__ld(positions + 3 * s), n, "positions"));
            else pbd__hair_root_targets(w, S, s, pbd__ld(positions + 3 * s), n);
        }
    return PBD_OK;
}

/* The strands' constraints go; their particles stay in the world (hair's
   too: pbd_remove_particles removes those). */
PBDDEF pbd_result pbd_remove_strands(pbd_world *w, pbd_strands handle) {
    PBD__CHECK_WORLD(w);
    int i;
    PBD__TRY(pbd__strands_index(w, handle, &i));
    pbd__strands_free_one(w, &w->strands[i]);
    PBD__RELEASE(w->strands, i);
    return PBD_OK;
}

PBDDEF pbd_result pbd_strands_set_damping(pbd_world *w, pbd_strands handle, float damping) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int s;
    PBD__TRY(pbd__strands_index(w, handle, &s));
    PBD__TRY(pbd__check_damping01(w, damping));
    w->strands[s].damping = damping;
    return PBD_OK;
}

PBDDEF pbd_result pbd_strands_info(const pbd_world *w, pbd_strands handle, int *strand_count, int *particle_count) {
    PBD__CHECK_WORLD_READ(w);
    int s;
    PBD__TRY(pbd__strands_index(w, handle, &s));
    if (strand_count) *strand_count = w->strands[s].nstrands;
    if (particle_count) *particle_count = w->strands[s].nparticles;
    return PBD_OK;
}

// ==== pieces of an object ===================================================
/* Damping (pbd__damp_object) takes each connected piece of an object on
   its own: a piece torn off its pins falls freely, damped towards its own
   rigid motion, while the piece still on them is damped towards theirs
   (damped together, the free piece was pulled towards the pins' rest and
   fell at g / damping at most: 4.9 m/s at the default 2/s).
   A piece is a connected component of the object's particles - its range
   and the copies its tearing appended elsewhere (pbd_world.owner) - over
   its stretch edges (every builder makes them from its triangles or tets;
   tearing keeps them on the mesh, duplicating the ones on a crack; its
   other groups join nothing more, and a bending group a crack emptied
   keeps its old stencils, disabled, which would join across the crack).
   They are found when the object is built, when it tears and on restore
   (derived, never saved), so a step allocates nothing. An object that is
   one piece over its range keeps no list and is damped over its range as
   before, the same bits. */

typedef struct pbd__pieces {
    int count;  /* 0: one piece, the object's range */
    int *start; /* count + 1 offsets into list */
    int *list;  /* the object's particles, piece by piece (ordered by their
                   first particle), each piece in ascending order */
} pbd__pieces;

/* Object oi's pieces; NULL when it is one piece over its range. */
static const pbd__pieces *pbd__object_pieces(const pbd_world *w, int oi) {
    return oi < w->pieces_cap && w->pieces[oi].count > 0 && w->objects[oi].s.live ? &w->pieces[oi] : NULL;
}

static void pbd__pieces_drop(pbd_world *w, int oi) {
    if (oi >= w->pieces_cap) return;
    pbd__free(w, w->pieces[oi].start);
    pbd__free(w, w->pieces[oi].list);
    memset(&w->pieces[oi], 0, sizeof w->pieces[oi]);
}

static void pbd__pieces_free_all(pbd_world *w) {
    for (int i = 0; i < w->pieces_cap; ++i) pbd__pieces_drop(w, i);
    pbd__free(w, w->pieces);
    w->pieces = NULL;
    w->pieces_cap = 0;
}

/* Room for object slot oi's entry (new entries empty); 0: memory. */
static int pbd__pieces_room(pbd_world *w, int oi) {
    int old = w->pieces_cap;
    if (!pbd__grow(w, (void **)&w->pieces, old, &w->pieces_cap, oi + 1, sizeof(pbd__pieces))) return 0;
    memset(w->pieces + old, 0, sizeof(pbd__pieces) * (size_t)(w->pieces_cap - old));
    return 1;
}

static int pbd__piece_root(int *parent, int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

/* An object's particles in ascending order, numbered 0..count + nout:
   its outside particles below its range (below of them), its range, the
   outside ones above it. */
typedef struct pbd__members {
    int first, count, below, nout;
    const int *outside; /* ascending */
} pbd__members;

/* Member k's particle. */
static int pbd__member_particle(const pbd__members *m, int k) {
    if (k < m->below) return m->outside[k];
    if (k < m->below + m->count) return m->first + (k - m->below);
    return m->outside[k - m->count];
}
/* Particle p's member number, -1 if it is none. */
static int pbd__member_at(const pbd__members *m, int p) {
    if (p >= m->first && p < m->first + m->count) return m->below + (p - m->first);
    const int *hit = (const int *)bsearch(&p, m->outside, (size_t)m->nout, sizeof(int), pbd__cmp_int);
    if (!hit) return -1;
    int k = (int)(hit - m->outside);
    return k < m->below ? k : k + m->count;
}

/* The object's stretch group, NULL if none (checked: a restored
   snapshot's object records are not). */
static const pbd__group *pbd__object_stretch(const pbd_world *w, const pbd__object *o) {
    int gi = o->groups[0];
    if (gi < 0 || gi >= w->ngroups || !w->groups[gi].s.live) return NULL;
    const pbd__group *g = &w->groups[gi];
    return g->type == PBD_CONSTRAINT_DISTANCE && g->arity == 2 ? g : NULL;
}

/* Joins the members that an edge of the stretch group g holds together. */
static void pbd__pieces_join(const pbd__group *g, const pbd__members *m, int *parent) {
    for (int c = 0; c < g->count; ++c) {
        int a = pbd__member_at(m, g->idx[2 * c]), b = pbd__member_at(m, g->idx[2 * c + 1]);
        if (a >= 0 && b >= 0) parent[pbd__piece_root(parent, b)] = pbd__piece_root(parent, a);
    }
}

/* The pieces of the members (ascending) after the joins: member k's piece
   in piece[k], numbered in the order of their first members; their count. */
static int pbd__pieces_number(int *parent, int nm, int *piece) {
    int count = 0;
    for (int k = 0; k < nm; ++k) piece[k] = -1;
    for (int k = 0; k < nm; ++k) {
        int r = pbd__piece_root(parent, k);
        if (piece[r] < 0) piece[r] = count++;
        piece[k] = piece[r];
    }
    return count;
}

/* Finds object oi's pieces; outside[0..nout): its particles outside its
   range (ascending). On failure (memory) its old pieces stay. */
static pbd_result pbd__pieces_find(pbd_world *w, int oi, const int *outside, int nout) {
    const pbd__object *o = &w->objects[oi];
    pbd__members m = {o->first, o->count, 0, nout, outside};
    while (m.below < nout && outside[m.below] < o->first) m.below++;
    int nm = o->count + nout;
    int *parent = (int *)pbd__alloc_n(w, (size_t)nm + 1, sizeof(int));
    int *piece = (int *)pbd__alloc_n(w, (size_t)nm + 1, sizeof(int));
    pbd__pieces P = {0, NULL, NULL};
    int ok = parent && piece && pbd__pieces_room(w, oi);
    if (ok) {
        const pbd__group *g = pbd__object_stretch(w, o);
        for (int k = 0; k < nm; ++k) parent[k] = g ? k : 0; /* no edges to follow: one piece */
        if (g) pbd__pieces_join(g, &m, parent);
        P.count = pbd__pieces_number(parent, nm, piece);
        if (P.count == 1 && nout == 0) P.count = 0; /* its range: no list */
    }
    if (ok && P.count > 0) {
        P.start = (int *)pbd__alloc_n(w, (size_t)P.count + 1, sizeof(int));
        P.list = (int *)pbd__alloc_n(w, (size_t)nm, sizeof(int));
        ok = P.start && P.list;
    }
    if (ok && P.count > 0) { /* a counting sort by piece, stable: each piece ascending */
        memset(P.start, 0, sizeof(int) * ((size_t)P.count + 1));
        for (int k = 0; k < nm; ++k) P.start[piece[k] + 1]++;
        for (int p = 0; p < P.count; ++p) P.start[p + 1] += P.start[p];
        for (int k = 0; k < nm; ++k) P.list[P.start[piece[k]]++] = pbd__member_particle(&m, k);
        for (int p = P.count; p > 0; --p) P.start[p] = P.start[p - 1];
        P.start[0] = 0;
    }
    pbd__free(w, parent);
    pbd__free(w, piece);
    if (!ok) {
        pbd__free(w, P.start);
        pbd__free(w, P.list);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    pbd__pieces_drop(w, oi);
    w->pieces[oi] = P;
    return PBD_OK;
}

/* Every live object's particles outside its range (the copies tearing
   appended after other things' particles), ascending: object o's are
   list[start[o] .. start[o + 1]). 0: memory. */
static int pbd__outside_particles(pbd_world *w, int **start, int **list) {
    int no = w->nobjects, total = 0;
    *start = (int *)pbd__alloc_n(w, (size_t)no + 2, sizeof(int));
    if (!*start) return 0;
    memset(*start, 0, sizeof(int) * ((size_t)no + 2));
    for (int pass = 0; pass < 2; ++pass) {
        for (int i = 0; i < w->n; ++i) {
            int oi = w->owner[i];
            if (oi < 0 || oi >= no || (i >= w->objects[oi].first && i < w->objects[oi].first + w->objects[oi].count))
                continue;
            if (pass == 0) (*start)[oi + 2]++;
            else (*list)[(*start)[oi + 1]++] = i;
        }
        if (pass == 1) break;
        for (int o = 0; o < no; ++o) (*start)[o + 2] += (*start)[o + 1];
        total = (*start)[no + 1];
        *list = (int *)pbd__alloc_n(w, (size_t)total + 1, sizeof(int));
        if (!*list) {
            pbd__free(w, *start);
            return 0;
        }
    }
    return 1;
}

/* The pieces of the objects marked in which (NULL: every live object). */
static pbd_result pbd__pieces_find_objects(pbd_world *w, const unsigned char *which) {
    int *start = NULL, *list = NULL;
    if (!pbd__outside_particles(w, &start, &list)) return PBD_ERROR_OUT_OF_MEMORY;
    pbd_result r = PBD_OK;
    for (int o = 0; o < w->nobjects && r == PBD_OK; ++o)
        if (w->objects[o].s.live && (!which || which[o]))
            r = pbd__pieces_find(w, o, list + start[o], start[o + 1] - start[o]);
    pbd__free(w, start);
    pbd__free(w, list);
    return r;
}

// ==== tearing ===============================================================

typedef struct pbd__tear {
    pbd__slot s;
    int object, max_splits, ntris;
    float threshold;
    int *tris;     /* ntris * 3 world particles: the current (torn) mesh */
    float *rest2d; /* ntris * 3: each triangle's 2D rest shape (a, b, c) */
} pbd__tear;

PBDDEF pbd_tearing_desc pbd_tearing_desc_default(void) {
    pbd_tearing_desc d;
    memset(&d, 0, sizeof d);
    d.threshold = 1.5f;
    d.max_splits = 64;
    return d;
}

/* A tearing pbd_remove_tearing stopped: its record stays, with its
   triangles for pbd_object_triangles, under a new generation (the handle
   is stale), and max_splits 0 (a live one has at least 1), which
   snapshots keep. */
static int pbd__tear_stopped(const pbd__tear *T) { return T->max_splits == 0; }
/* The largest max_splits (pbd_add_tearing, snapshots). */
#define PBD__TEAR_SPLITS_MAX (INT_MAX / 16)

/* The object's tearing record, live or stopped, or -1. */
static int pbd__find_tear(const pbd_world *w, int object) {
    for (int i = 0; i < w->ntears; ++i)
        if (w->tears[i].s.live && w->tears[i].object == object) return i;
    return -1;
}

/* Frees tearing record i (its object goes, or a new tearing replaces a stopped one). */
static void pbd__tear_release(pbd_world *w, int i) {
    pbd__free(w, w->tears[i].tris);
    pbd__free(w, w->tears[i].rest2d);
    PBD__RELEASE(w->tears, i);
}

/* The triangles' edges must be exactly the stretch group's edges: then the
   triangles are the ones the cloth was built from. */
static pbd_result pbd__check_tear_mesh(pbd_world *w, const pbd__group *g, const int *tri, int nt) {
    uint64_t *keys = (uint64_t *)pbd__alloc_n(w, (size_t)g->count, sizeof(uint64_t));
    uint64_t *tk = (uint64_t *)pbd__alloc_n(w, (size_t)nt * 3, sizeof(uint64_t));
    pbd_result r = PBD_OK;
    if (!keys || !tk) r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to check the mesh");
    if (r == PBD_OK) {
        for (int c = 0; c < g->count; ++c) keys[c] = pbd__edge_key(g->idx[2 * c], g->idx[2 * c + 1]);
        qsort(keys, (size_t)g->count, sizeof *keys, pbd__cmp_u64);
        for (long k = 0; k < 3L * nt; ++k) tk[k] = pbd__edge_key(tri[k], tri[k % 3 == 2 ? k - 2 : k + 1]);
        qsort(tk, (size_t)nt * 3, sizeof *tk, pbd__cmp_u64);
        long unique = 0;
        for (long k = 0; k < 3L * nt && r == PBD_OK; ++k) {
            if (k > 0 && tk[k] == tk[k - 1]) continue;
            unique++;
            if (pbd__find_u64(keys, g->count, tk[k]) < 0)
                r = pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "the triangles are not the object's mesh (an edge is missing from its stretch group)");
        }
        if (r == PBD_OK && unique != g->count)
            r = pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "the triangles have %ld edges, the object's stretch group %d",
                          unique, g->count);
    }
    pbd__free(w, keys);
    pbd__free(w, tk);
    return r;
}

PBDDEF pbd_result pbd_add_tearing(pbd_world *w, const pbd_tearing_desc *d, pbd_tearing *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(pbd__check_object_handle(w, d->object));
    const pbd__object *o = &w->objects[pbd__oi(d->object)];
    if (o->groups[0] < 0 || o->groups[3] >= 0 || w->groups[o->groups[0]].type != PBD_CONSTRAINT_DISTANCE)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "object %d is not a cloth", pbd__oi(d->object));
    int stopped = pbd__find_tear(w, pbd__oi(d->object));
    if (stopped >= 0 && !pbd__tear_stopped(&w->tears[stopped]))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "object %d already tears", pbd__oi(d->object));
    if (!pbd__finite(d->threshold)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "threshold is not finite");
    if (!(d->threshold > 1))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "threshold %g must be > 1", (double)d->threshold);
    if (d->max_splits < 1) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "max_splits %d < 1", d->max_splits);
    if (d->max_splits > PBD__TEAR_SPLITS_MAX) /* what a snapshot holds (pbd__validate_tears) */
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "max_splits %d is above %d", d->max_splits,
                         PBD__TEAR_SPLITS_MAX);
    int *tri = NULL;
    PBD__TRY(pbd__world_triangles(w, pbd__oi(d->object), d->triangles, d->triangle_count, &tri));
    pbd_result r = pbd__check_tear_mesh(w, &w->groups[o->groups[0]], tri, d->triangle_count);
    float *rest2d = r == PBD_OK ? (float *)pbd__alloc_n(w, (size_t)d->triangle_count * 3, sizeof(float)) : NULL;
    if (r == PBD_OK && !rest2d) r = pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for tearing");
    for (int t = 0; r == PBD_OK && t < d->triangle_count; ++t) {
        pbd__v3 x[3];
        pbd__gather(w, tri + 3 * t, 3, x);
        if (!pbd__triangle_rest2d(x, rest2d + 3 * t))
            r = pbd__fail(w, PBD_ERROR_DEGENERATE, "triangle %d is degenerate now", t);
    }
    if (r == PBD_OK) r = PBD__ROOM(w, w->tears, w->ntears, w->tear_cap, "tearing");
    if (r != PBD_OK) {
        pbd__free(w, tri);
        pbd__free(w, rest2d);
        return r;
    }
    if (stopped >= 0) pbd__tear_release(w, stopped); /* its triangles are the stretch group's, checked above */
    pbd__tear t;
    memset(&t, 0, sizeof t);
    t.object = pbd__oi(d->object);
    t.max_splits = d->max_splits;
    t.threshold = d->threshold;
    t.ntris = d->triangle_count;
    t.tris = tri;
    t.rest2d = rest2d;
    int ti = PBD__PLACE(w, w->tears, w->ntears, &t);
    if (out) out->id = PBD__HANDLE(w->tears, ti);
    return PBD_OK;
}

/* Copies up to max of nt triangles out (the two triangle accessors). */
static void pbd__copy_triangles(const int *tris, int nt, int *out, int max, int *count) {
    if (nt > 0 && max > 0) memcpy(out, tris, sizeof(int) * 3 * (size_t)(nt < max ? nt : max));
    *count = nt;
}

/* The cloth stops tearing; what has torn stays torn (pbd__tear_stopped). */
PBDDEF pbd_result pbd_remove_tearing(pbd_world *w, pbd_tearing handle) {
    PBD__CHECK_WORLD(w);
    int i;
    PBD__TRY(PBD__RESOLVE(w, handle, w->tears, w->ntears, "tearing", &i));
    /* its own handle is stale; one of another world may still name it */
    if (pbd__tear_stopped(&w->tears[i])) return pbd__fail(w, PBD_ERROR_INVALID_HANDLE, "tearing %d was removed", i);
    pbd__slot *s = &w->tears[i].s;
    uint32_t gen = (s->gen + 1u) & PBD__GEN_MASK;
    s->gen = gen ? gen : 1u;
    w->tears[i].max_splits = 0;
    return PBD_OK;
}

PBDDEF pbd_result pbd_object_triangles(const pbd_world *w, pbd_object object, int *triangles, int max, int *count) {
    PBD__CHECK_WORLD_READ(w);
    int oi;
    PBD__TRY(pbd__object_index(w, object, &oi));
    PBD__TRY(pbd__check_list(w, triangles, max, count));
    int t = pbd__find_tear(w, oi);
    if (t < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "object %d does not tear (pbd_add_tearing)", oi);
    pbd__copy_triangles(w->tears[t].tris, w->tears[t].ntris, triangles, max, count);
    return PBD_OK;
}

PBDDEF pbd_result pbd_surface_triangles(const pbd_world *w, pbd_surface handle, int *triangles, int max, int *count) {
    PBD__CHECK_WORLD_READ(w);
    int surface;
    PBD__TRY(pbd__surface_index(w, handle, &surface));
    PBD__TRY(pbd__check_list(w, triangles, max, count));
    int nt, **tris = pbd__surface_tris((pbd_world *)w, surface, &nt);
    pbd__copy_triangles(*tris, nt, triangles, max, count);
    return PBD_OK;
}

/* --- working copies of the groups a split rewrites ----------------------- */

enum { PBD__WG_EDGE, PBD__WG_TRI, PBD__WG_BEND };

typedef struct pbd__wgroup {
    pbd__group *g; /* the group it will replace */
    int kind, count, icap, rcap, arity, stride, changed;
    int *idx;
    float *rest;
} pbd__wgroup;

static void pbd__wg_free(pbd_world *w, pbd__wgroup *G) {
    pbd__free(w, G->idx);
    pbd__free(w, G->rest);
    G->idx = NULL;
    G->rest = NULL;
}

static int pbd__wg_init(pbd_world *w, pbd__wgroup *G, pbd__group *g, int kind) {
    memset(G, 0, sizeof *G);
    G->g = g;
    G->kind = kind;
    G->count = g->count;
    G->arity = g->arity;
    G->stride = g->rest_stride;
    G->icap = (g->count + 16) * G->arity;
    G->rcap = (g->count + 16) * G->stride;
    G->idx = (int *)pbd__alloc_n(w, (size_t)G->icap, sizeof(int));
    G->rest = (float *)pbd__alloc_n(w, (size_t)G->rcap, sizeof(float));
    if (!G->idx || !G->rest) {
        pbd__wg_free(w, G);
        return 0;
    }
    memcpy(G->idx, g->idx, sizeof(int) * (size_t)g->count * (size_t)G->arity);
    memcpy(G->rest, g->rest, sizeof(float) * (size_t)g->count * (size_t)G->stride);
    return 1;
}

/* Appends a copy of constraint c with particle v replaced by nv. */
static int pbd__wg_duplicate(pbd_world *w, pbd__wgroup *G, int c, int v, int nv) {
    if (!pbd__grow(w, (void **)&G->idx, G->count * G->arity, &G->icap, (G->count + 1) * G->arity, sizeof(int)) ||
        !pbd__grow(w, (void **)&G->rest, G->count * G->stride, &G->rcap, (G->count + 1) * G->stride, sizeof(float)))
        return 0;
    int *e = G->idx + (size_t)G->count * G->arity;
    memcpy(e, G->idx + (size_t)c * G->arity, sizeof(int) * (size_t)G->arity);
    memcpy(G->rest + (size_t)G->count * G->stride, G->rest + (size_t)c * G->stride, sizeof(float) * (size_t)G->stride);
    for (int i = 0; i < G->arity; ++i)
        if (e[i] == v) e[i] = nv;
    G->count++;
    return 1;
}

/* The faces around the split vertex, as the pairs of their other two
   vertices: does one contain x, is one {y, z}? */
static int pbd__faces_have(const int *f, int nf, int x) {
    for (int k = 0; k < 2 * nf; ++k)
        if (f[k] == x) return 1;
    return 0;
}
static int pbd__faces_match(const int *f, int nf, int y, int z) {
    for (int k = 0; k < nf; ++k)
        if ((f[2 * k] == y && f[2 * k + 1] == z) || (f[2 * k] == z && f[2 * k + 1] == y)) return 1;
    return 0;
}

/* Rewrites the constraints on v after v was split into v (faces fa) and
   nv (faces fb): an edge inside the far side moves to nv, an edge on the
   crack (one face each side) is duplicated, a triangle follows its face,
   a bending stencil moves with its two faces or is removed when the crack
   separates them. Removed constraints are marked idx[0] = -1. */
static int pbd__wg_split(pbd_world *w, pbd__wgroup *G, int v, int nv, const int *fa, int na, const int *fb, int nb) {
    int n0 = G->count;
    for (int c = 0; c < n0; ++c) {
        int *e = G->idx + (size_t)c * G->arity, j = -1;
        for (int i = 0; i < G->arity; ++i)
            if (e[i] == v) j = i;
        if (j < 0 || e[0] < 0) continue;
        if (G->kind == PBD__WG_EDGE) {
            int x = e[1 - j], inA = pbd__faces_have(fa, na, x), inB = pbd__faces_have(fb, nb, x);
            if (inB && !inA) e[j] = nv;
            else if (inA && inB) {
                if (!pbd__wg_duplicate(w, G, c, v, nv)) return 0;
            } else continue;
        } else if (G->kind == PBD__WG_TRI) {
            if (!pbd__faces_match(fb, nb, e[(j + 1) % 3], e[(j + 2) % 3])) continue;
            e[j] = nv;
        } else if (j >= 2) { /* a wing: its one face decides */
            if (!pbd__faces_match(fb, nb, e[0], e[1])) continue;
            e[j] = nv;
        } else {
            int other = e[1 - j];
            int b1 = pbd__faces_match(fb, nb, other, e[2]), b2 = pbd__faces_match(fb, nb, other, e[3]);
            int a1 = pbd__faces_match(fa, na, other, e[2]), a2 = pbd__faces_match(fa, na, other, e[3]);
            if (b1 && b2) e[j] = nv;
            else if ((a1 && b2) || (b1 && a2)) e[0] = -1; /* the crack runs along its edge */
            else continue;
        }
        G->changed = 1;
    }
    return 1;
}

/* Drops the removed constraints, keeping the order of the rest. */
static void pbd__wg_compact(pbd__wgroup *G) {
    int m = 0;
    for (int c = 0; c < G->count; ++c) {
        if (G->idx[(size_t)c * G->arity] < 0) continue;
        if (m != c) {
            memmove(G->idx + (size_t)m * G->arity, G->idx + (size_t)c * G->arity, sizeof(int) * (size_t)G->arity);
            memmove(G->rest + (size_t)m * G->stride, G->rest + (size_t)c * G->stride,
                    sizeof(float) * (size_t)G->stride);
        }
        m++;
    }
    G->count = m;
}

/* A new group from a working copy (count > 0), coloured; the old one is
   untouched. */
static pbd_result pbd__wg_to_group(pbd_world *w, pbd__wgroup *G, pbd__group *out) {
    *out = *G->g;
    out->count = G->count;
    out->idx = G->idx;
    out->rest = G->rest;
    out->color_start = NULL;
    out->slot = NULL;
    out->lambda = (float *)pbd__alloc_n(w, (size_t)G->count, sizeof(float));
    if (!out->lambda) return PBD_ERROR_OUT_OF_MEMORY;
    pbd_result r = pbd__color_group(w, out);
    if (r != PBD_OK) {
        pbd__free(w, out->lambda);
        return r;
    }
    G->idx = NULL; /* the colouring freed them and made its own */
    G->rest = NULL;
    return PBD_OK;
}

/* One planned split: particle v gives the far faces to a new particle. */
typedef struct pbd__split {
    int v;
    float mass_v, mass_new;
} pbd__split;

typedef struct pbd__tear_work {
    int ng;
    pbd__wgroup *G;    /* the object's groups, then every strain limit */
    int *tris;         /* working triangles */
    int *fa, *fb, *tb; /* faces of the split vertex: pairs (A, B), B's triangles */
    pbd__split *splits;
    int nsplits;
    unsigned char *touched; /* per particle (n + max_splits) */
    int **surf;             /* working copies of the collision surfaces' triangles */
    int nsurf, surf_changed;
    pbd__lra *lra; /* w->nlras rewritten LRA sets; particles == NULL: unchanged */
} pbd__tear_work;

static void pbd__tear_work_free(pbd_world *w, pbd__tear_work *k) {
    for (int i = 0; i < k->ng; ++i) pbd__wg_free(w, &k->G[i]);
    pbd__free(w, k->G);
    pbd__free(w, k->tris);
    pbd__free(w, k->fa);
    pbd__free(w, k->fb);
    pbd__free(w, k->tb);
    pbd__free(w, k->splits);
    pbd__free(w, k->touched);
    for (int s = 0; k->surf && s < k->nsurf; ++s) pbd__free(w, k->surf[s]);
    pbd__free(w, k->surf);
    for (int i = 0; k->lra && i < w->nlras; ++i) pbd__lra_free(w, &k->lra[i]);
    pbd__free(w, k->lra);
}

/* Working copies of every collision surface's triangles (0: memory). */
static int pbd__tear_surfaces_init(pbd_world *w, pbd__tear_work *k) {
    if (w->nsurfaces == 0) return 1;
    k->surf = (int **)pbd__alloc_n(w, (size_t)w->nsurfaces, sizeof(int *));
    if (!k->surf) return 0;
    memset(k->surf, 0, sizeof(int *) * (size_t)w->nsurfaces);
    k->nsurf = w->nsurfaces;
    for (int s = 0; s < k->nsurf; ++s) {
        int nt, *tris = *pbd__surface_tris(w, s, &nt);
        if (!tris) continue; /* a free slot: no copy */
        k->surf[s] = (int *)pbd__alloc_n(w, (size_t)nt * 3, sizeof(int));
        if (!k->surf[s]) return 0;
        memcpy(k->surf[s], tris, sizeof(int) * 3 * (size_t)nt);
    }
    return 1;
}

/* A surface triangle on v whose other two vertices form one of the far
   faces fb moves to nv, like the object's triangles and strain limits. */
static void pbd__tear_surfaces_split(pbd_world *w, pbd__tear_work *k, int v, int nv, const int *fb, int nb) {
    for (int s = 0; s < k->nsurf; ++s) {
        int nt;
        pbd__surface_tris(w, s, &nt);
        for (int t = 0; t < nt; ++t) {
            int *tr = k->surf[s] + 3 * t;
            for (int j = 0; j < 3; ++j)
                if (tr[j] == v && pbd__faces_match(fb, nb, tr[(j + 1) % 3], tr[(j + 2) % 3])) {
                    tr[j] = nv;
                    k->surf_changed = 1;
                }
        }
    }
}

/* After a commit: the surfaces take their working copies. */
static void pbd__tear_surfaces_commit(pbd_world *w, pbd__tear_work *k) {
    if (!k->surf_changed) return;
    for (int s = 0; s < k->nsurf; ++s) {
        if (!k->surf[s]) continue; /* a free slot */
        int nt, **tris = pbd__surface_tris(w, s, &nt);
        pbd__free(w, *tris);
        *tris = k->surf[s];
        k->surf[s] = NULL;
    }
}

/* A particle's position during planning: a planned new particle (index
   n and up) sits where the vertex it was split from is. */
static pbd__v3 pbd__tear_pos(const pbd_world *w, const pbd__tear_work *k, int i) {
    return pbd__p3(w->x[i < w->n ? i : k->splits[i - w->n].v]);
}

/* Tries to split v by the plane through it normal to nrm (along an
   overstretched edge or a triangle's principal stretch): faces whose
   centroid lies on the nrm side go to the new particle n0 + nsplits.
   mark (count ints) are the constraint's particles, touched after a split.
   1: split, 0: not possible, -1: memory. */
static int pbd__try_split(pbd_world *w, const pbd__tear *T, pbd__tear_work *k, int v, pbd__v3 nrm, const int *mark,
                          int count, int n0) {
    pbd__v3 xv = pbd__tear_pos(w, k, v);
    int na = 0, nb = 0;
    float area_a = 0, area_b = 0;
    for (int t = 0; t < T->ntris; ++t) {
        int *tr = k->tris + 3 * t, j = -1;
        for (int i = 0; i < 3; ++i)
            if (tr[i] == v) j = i;
        if (j < 0) continue;
        int y = tr[(j + 1) % 3], z = tr[(j + 2) % 3];
        pbd__v3 xy = pbd__tear_pos(w, k, y), xz = pbd__tear_pos(w, k, z);
        pbd__v3 cen = pbd__mul(pbd__add(pbd__add(xv, xy), xz), 1.0f / 3.0f);
        float area = 0.5f * pbd__len(pbd__cross(pbd__sub(xy, xv), pbd__sub(xz, xv)));
        if (pbd__dot(pbd__sub(cen, xv), nrm) > 0) {
            k->fb[2 * nb] = y;
            k->fb[2 * nb + 1] = z;
            k->tb[nb++] = t;
            area_b += area;
        } else {
            k->fa[2 * na] = y;
            k->fa[2 * na + 1] = z;
            na++;
            area_a += area;
        }
    }
    if (na == 0 || nb == 0) return 0;
    /* the vertex's mass is shared like the builder shares it: by area; a
       share below PBD_MIN_MASS would be no valid mass, so the vertex stays
       whole (a pinned vertex, mass 0, splits into two pinned ones) */
    float m = w->mass[v], s = area_a + area_b > 0 ? area_a / (area_a + area_b) : 0.5f;
    float mass_v = m * s, mass_new = m - mass_v;
    if (m > 0 && !(mass_v >= PBD_MIN_MASS && mass_new >= PBD_MIN_MASS)) return 0;
    int nv = n0 + k->nsplits;
    for (int i = 0; i < k->ng; ++i)
        if (!pbd__wg_split(w, &k->G[i], v, nv, k->fa, na, k->fb, nb)) return -1;
    for (int i = 0; i < nb; ++i)
        for (int j = 0; j < 3; ++j)
            if (k->tris[3 * k->tb[i] + j] == v) k->tris[3 * k->tb[i] + j] = nv;
    pbd__tear_surfaces_split(w, k, v, nv, k->fb, nb);
    pbd__split *sp = &k->splits[k->nsplits++];
    sp->v = v;
    sp->mass_v = mass_v;
    sp->mass_new = mass_new;
    for (int i = 0; i < count; ++i) k->touched[mark[i]] = 1;
    k->touched[v] = k->touched[nv] = 1;
    return 1;
}

/* An overstretched edge (c < edge count) or triangle (c - edge count). */
typedef struct pbd__tear_cand {
    float ratio;
    int c;
    pbd__v3 dir;
} pbd__tear_cand;
static int pbd__cmp_tear_cand(const void *a, const void *b) {
    const pbd__tear_cand *x = (const pbd__tear_cand *)a, *y = (const pbd__tear_cand *)b;
    if (x->ratio != y->ratio) return x->ratio > y->ratio ? -1 : 1;
    return x->c - y->c;
}

static int pbd__vertex_valence(const pbd__tear_work *k, int ntris, int v) {
    int n = 0;
    for (long i = 0; i < 3L * ntris; ++i) n += k->tris[i] == v;
    return n;
}

/* Plans the splits of one object on working copies (nothing in the world
   changes); returns the planned count or -1 for memory. */
static int pbd__tear_plan(pbd_world *w, const pbd__tear *T, pbd__tear_work *k) {
    const pbd__object *o = &w->objects[T->object];
    const pbd__group *gs = &w->groups[o->groups[0]];
    pbd__tear_cand *cand = (pbd__tear_cand *)pbd__alloc_n(w, (size_t)gs->count + (size_t)T->ntris, sizeof *cand);
    if (!cand) return -1;
    int nc = 0;
    for (int c = 0; c < gs->count; ++c) {
        const int *e = gs->idx + 2 * c;
        pbd__v3 d = pbd__sub(pbd__p3(w->x[e[1]]), pbd__p3(w->x[e[0]]));
        float l = pbd__len(d);
        if (l > T->threshold * gs->rest[c]) {
            cand[nc].ratio = l / gs->rest[c];
            cand[nc].c = c;
            cand[nc].dir = d;
            nc++;
        }
    }
    /* a triangle whose largest principal stretch (Wang et al. 2010) passes
       the threshold, though no edge does (stretch across its edges) */
    for (int t = 0; t < T->ntris; ++t) {
        pbd__v3 x[3];
        pbd__gather(w, T->tris + 3 * t, 3, x);
        pbd__tri_svd sv = pbd__triangle_svd(x, T->rest2d + 3 * t);
        if (!(sv.s1 > T->threshold)) continue;
        cand[nc].ratio = sv.s1;
        cand[nc].c = gs->count + t;
        cand[nc].dir = pbd__mat32_mul(sv.F0, sv.F1, sv.v1x, sv.v1y); /* the principal direction U1 s1 */
        nc++;
    }
    int result = 0;
    /* a call splits a vertex at most once (touched), so no more splits than
       the object's triangles have corners: max_splits of INT_MAX asked for
       12 x INT_MAX bytes here, and every tear failed out of memory (an audit) */
    int cap = T->max_splits < 3 * T->ntris ? T->max_splits : 3 * T->ntris;
    if (nc > 0) {
        qsort(cand, (size_t)nc, sizeof *cand, pbd__cmp_tear_cand);
        k->tris = (int *)pbd__alloc_n(w, (size_t)T->ntris * 3, sizeof(int));
        k->fa = (int *)pbd__alloc_n(w, (size_t)T->ntris * 2, sizeof(int));
        k->fb = (int *)pbd__alloc_n(w, (size_t)T->ntris * 2, sizeof(int));
        k->tb = (int *)pbd__alloc_n(w, (size_t)T->ntris, sizeof(int));
        k->splits = (pbd__split *)pbd__alloc_n(w, (size_t)cap, sizeof(pbd__split));
        k->touched = (unsigned char *)pbd__alloc_n(w, (size_t)w->n + (size_t)cap, 1);
        k->G = (pbd__wgroup *)pbd__alloc_n(w, 3 + (size_t)w->nlimits, sizeof(pbd__wgroup));
        int ok = k->tris && k->fa && k->fb && k->tb && k->splits && k->touched && k->G && pbd__tear_surfaces_init(w, k);
        if (ok) {
            memcpy(k->tris, T->tris, sizeof(int) * 3 * (size_t)T->ntris);
            memset(k->touched, 0, (size_t)w->n + (size_t)cap);
            /* the object's edges, bending, areas, and the strain limits (whichever hold its particles) */
            int kinds[3] = {PBD__WG_EDGE, PBD__WG_BEND, PBD__WG_TRI};
            for (int i = 0; i < 3 && ok; ++i) {
                int gi = o->groups[i];
                if (gi < 0) continue;
                ok = pbd__wg_init(w, &k->G[k->ng], &w->groups[gi], kinds[i]);
                k->ng += ok;
            }
            for (int i = 0; i < w->nlimits && ok; ++i) {
                if (!w->limits[i].s.live) continue;
                ok = pbd__wg_init(w, &k->G[k->ng], &w->limits[i].g,
                                  w->limits[i].mode == PBD_STRAIN_EDGES ? PBD__WG_EDGE : PBD__WG_TRI);
                k->ng += ok;
            }
        }
        for (int q = 0; ok && q < nc && k->nsplits < cap; ++q) {
            int tri = cand[q].c >= gs->count, nv = tri ? 3 : 2;
            const int *e = tri ? T->tris + 3 * (cand[q].c - gs->count) : gs->idx + 2 * cand[q].c;
            int order[3] = {0, 1, 2}, val[3], skip = 0;
            for (int i = 0; i < nv; ++i) {
                skip |= k->touched[e[i]];
                val[i] = pbd__vertex_valence(k, T->ntris, e[i]);
            }
            if (skip) continue;
            for (int i = 1; i < nv; ++i) /* the vertex with the most faces first (stable) */
                for (int j = i; j > 0 && val[order[j]] > val[order[j - 1]]; --j) {
                    int t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
            int s = 0;
            for (int i = 0; i < nv && s == 0; ++i) {
                /* an edge's far endpoint lies on the side of dir seen from the near one */
                pbd__v3 dir = !tri && order[i] == 1 ? pbd__neg(cand[q].dir) : cand[q].dir;
                s = pbd__try_split(w, T, k, e[order[i]], dir, e, nv, w->n);
            }
            if (s < 0) ok = 0;
        }
        result = ok ? k->nsplits : -1;
    }
    pbd__free(w, cand);
    return result;
}

/* --- long range attachments follow the tear -------------------------------- */
/* A tether bounds its particle's distance from the anchor by the length of
   the material between them (Kim et al. 2012). A crack lengthens that
   material path or cuts it, so after a tear: each tether grows in the
   ratio the crack lengthened the shortest path along the object's stretch
   edges (rest lengths) from its anchor to its particle (a geodesic tether
   is that path times 1 + slack, again); a tether whose particle
   the crack cut off from its anchor goes; and a split vertex's copy gets
   the tethers of the original that still reach their anchor from its
   side, scaled the same way. A tether whose anchor the mesh did not
   reach before the tear (an anchor outside the object) stays as it was. */

/* The stretch edges as a graph over n vertices: idx/rest of count edges,
   an edge with idx < 0 (removed) skipped. */
static int pbd__tear_graph(pbd_world *w, int n, const int *idx, const float *rest, int count, pbd__graph *g) {
    int *e = (int *)pbd__alloc_n(w, (size_t)count * 2 + 2, sizeof(int));
    double *len = (double *)pbd__alloc_n(w, (size_t)count + 1, sizeof(double));
    long ne = 0;
    int ok = e && len;
    for (int c = 0; ok && c < count; ++c)
        if (idx[2 * c] >= 0) {
            e[2 * ne] = idx[2 * c];
            e[2 * ne + 1] = idx[2 * c + 1];
            len[ne++] = rest[c];
        }
    ok = ok && pbd__graph_build(w, n, e, len, ne, g);
    pbd__free(w, e);
    pbd__free(w, len);
    return ok;
}

typedef struct pbd__tether_ref {
    int anchor, t;
} pbd__tether_ref;
static int pbd__cmp_tether_ref(const void *a, const void *b) {
    const pbd__tether_ref *x = (const pbd__tether_ref *)a, *y = (const pbd__tether_ref *)b;
    return x->anchor != y->anchor ? (x->anchor < y->anchor ? -1 : 1) : x->t - y->t;
}

/* Path lengths from every tether's anchor, before (gb) and after (ga) the
   tear: to its particle (before[t], after[t]) and, for a split particle,
   to its copy (copy[t]; HUGE_VAL when not split). One Dijkstra per
   distinct anchor and graph. */
static int pbd__tether_paths(pbd_world *w, const pbd__lra *l, const int *owner, const int *split, int n0,
                             const pbd__graph *gb, const pbd__graph *ga, double *before, double *after, double *copy) {
    int nt = l->start[l->count];
    pbd__tether_ref *ref = (pbd__tether_ref *)pbd__alloc_n(w, (size_t)nt + 1, sizeof *ref);
    double *db = (double *)pbd__alloc_n(w, (size_t)gb->n, sizeof(double));
    double *da = (double *)pbd__alloc_n(w, (size_t)ga->n, sizeof(double));
    int ok = ref && db && da;
    for (int t = 0; ok && t < nt; ++t) {
        ref[t].anchor = l->anchor[t];
        ref[t].t = t;
    }
    if (ok) qsort(ref, (size_t)nt, sizeof *ref, pbd__cmp_tether_ref);
    for (int i = 0; ok && i < nt;) {
        int a = ref[i].anchor, j = i;
        ok = pbd__dijkstra(w, gb, &a, 1, db, NULL) && pbd__dijkstra(w, ga, &a, 1, da, NULL);
        for (; ok && j < nt && ref[j].anchor == a; ++j) {
            int t = ref[j].t, p = l->particles[owner[t]];
            before[t] = db[p];
            after[t] = da[p];
            copy[t] = p < n0 && split[p] >= 0 ? da[n0 + split[p]] : HUGE_VAL;
        }
        i = j;
    }
    pbd__free(w, ref);
    pbd__free(w, db);
    pbd__free(w, da);
    return ok;
}

/* The rewritten set (out) from the path lengths; 0: memory. */
static int pbd__tether_rewrite(pbd_world *w, const pbd__lra *l, const int *split, int n0, const double *before,
                               const double *after, const double *copy, pbd__lra *out) {
    int nt = l->start[l->count], np = l->count;
    for (int k = 0; k < l->count; ++k) np += l->particles[k] < n0 && split[l->particles[k]] >= 0;
    out->enabled = l->enabled;
    out->particles = (int *)pbd__alloc_n(w, (size_t)np, sizeof(int));
    out->start = (int *)pbd__alloc_n(w, (size_t)np + 1, sizeof(int));
    out->anchor = (int *)pbd__alloc_n(w, (size_t)nt * 2 + 1, sizeof(int));
    out->length = (float *)pbd__alloc_n(w, (size_t)nt * 2 + 1, sizeof(float));
    if (!out->particles || !out->start || !out->anchor || !out->length) {
        pbd__lra_free(w, out);
        return 0;
    }
    int m = 0, e = 0;
    for (int pass = 0; pass < 2; ++pass) /* the original particles, then the copies */
        for (int k = 0; k < l->count; ++k) {
            int p = l->particles[k];
            if (pass == 1 && !(p < n0 && split[p] >= 0)) continue;
            out->particles[e] = pass == 0 ? p : n0 + split[p];
            out->start[e++] = m;
            for (int t = l->start[k]; t < l->start[k + 1]; ++t) {
                double b = before[t], a = pass == 0 ? after[t] : copy[t];
                if (pass == 1 && !(b < HUGE_VAL)) continue;    /* an outside anchor stays with the original */
                if (b < HUGE_VAL && !(a < HUGE_VAL)) continue; /* cut off by the crack */
                out->anchor[m] = l->anchor[t];
                out->length[m++] = b < HUGE_VAL && b > 0 ? (float)(l->length[t] * (a / b)) : l->length[t];
            }
        }
    out->start[e] = m;
    out->count = e;
    return 1;
}

/* Plans the rewrite of every LRA set holding a torn particle (k->lra),
   before anything changes; 0: memory. */
static int pbd__tear_plan_lras(pbd_world *w, const pbd__tear *T, pbd__tear_work *k) {
    if (w->nlras == 0 || k->nsplits == 0) return 1;
    const pbd__object *o = &w->objects[T->object];
    const pbd__group *gs = &w->groups[o->groups[0]];
    int n0 = w->n, n1 = n0 + k->nsplits, ok = 1;
    pbd__graph gb, ga;
    memset(&gb, 0, sizeof gb);
    memset(&ga, 0, sizeof ga);
    int *split = (int *)pbd__alloc_n(w, (size_t)n0, sizeof(int));
    k->lra = (pbd__lra *)pbd__alloc_n(w, (size_t)w->nlras, sizeof(pbd__lra));
    if (!split || !k->lra) ok = 0;
    if (k->lra) memset(k->lra, 0, sizeof(pbd__lra) * (size_t)w->nlras);
    for (int i = 0; ok && i < n0; ++i) split[i] = -1;
    for (int s = 0; ok && s < k->nsplits; ++s) split[k->splits[s].v] = s;
    ok = ok && pbd__tear_graph(w, n0, gs->idx, gs->rest, gs->count, &gb) &&
         pbd__tear_graph(w, n1, k->G[0].idx, k->G[0].rest, k->G[0].count, &ga);
    for (int i = 0; ok && i < w->nlras; ++i) {
        const pbd__lra *l = &w->lras[i];
        if (!l->s.live) continue;
        int nt = l->start[l->count], touched = 0;
        for (int q = 0; q < l->count && !touched; ++q) {
            int p = l->particles[q];
            touched = p >= o->first && p < o->first + o->count;
        }
        if (!touched || nt == 0) continue;
        int *owner = (int *)pbd__alloc_n(w, (size_t)nt, sizeof(int));
        double *path = (double *)pbd__alloc_n(w, (size_t)nt * 3, sizeof(double));
        ok = owner && path;
        for (int q = 0; ok && q < l->count; ++q)
            for (int t = l->start[q]; t < l->start[q + 1]; ++t) owner[t] = q;
        ok = ok && pbd__tether_paths(w, l, owner, split, n0, &gb, &ga, path, path + nt, path + 2 * (size_t)nt) &&
             pbd__tether_rewrite(w, l, split, n0, path, path + nt, path + 2 * (size_t)nt, &k->lra[i]);
        pbd__free(w, owner);
        pbd__free(w, path);
    }
    pbd__graph_free(w, &gb);
    pbd__graph_free(w, &ga);
    pbd__free(w, split);
    return ok;
}

/* After a commit: the rewritten sets replace the old ones. */
static void pbd__tear_commit_lras(pbd_world *w, pbd__tear_work *k) {
    for (int i = 0; k->lra && i < w->nlras; ++i) {
        if (!k->lra[i].particles) continue;
        pbd__lra_free(w, &w->lras[i]);
        k->lra[i].s = w->lras[i].s;
        w->lras[i] = k->lra[i];
        memset(&k->lra[i], 0, sizeof k->lra[i]);
        pbd__lra_reach(w, &w->lras[i]);
        pbd__mark_coupled(w, w->lras[i].particles, w->lras[i].count);
    }
}

/* Applies a plan: new particles, groups, triangles. Everything that can
   fail is done before the first change. A group the crack emptied (a
   bending group of a tiny mesh) keeps its old constraints, disabled. */
/* A reordered object's permutation for its range grown by ns copies: the
   copies are its own particles first + count .. (pbd_object_vertices and
   a snapshot take count entries; the old array had only the builder's
   vertices and they read past its end). NULL: out of memory. */
static int *pbd__torn_permutation(pbd_world *w, const pbd__object *o, int ns) {
    int *perm = (int *)pbd__alloc_n(w, (size_t)o->count + (size_t)ns, sizeof(int));
    if (!perm) return NULL;
    memcpy(perm, o->perm, sizeof(int) * (size_t)o->count);
    for (int v = o->count; v < o->count + ns; ++v) perm[v] = v;
    return perm;
}

static pbd_result pbd__tear_commit(pbd_world *w, pbd__tear *T, pbd__tear_work *k) {
    int n0 = w->n, ns = k->nsplits;
    if (ns > INT_MAX / 8 - n0) return pbd__fail(w, PBD_ERROR_OVERFLOW, "too many particles");
    pbd__group *fresh = (pbd__group *)pbd__alloc_n(w, (size_t)k->ng + 1, sizeof(pbd__group));
    pbd_result r = fresh ? pbd__reserve_particles(w, n0 + ns) : PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) w->n = n0 + ns; /* the colouring sizes its marks by w->n; undone on failure */
    for (int i = n0; r == PBD_OK && i < n0 + ns; ++i)
        w->owner[i] = T->object; /* outside its range, but its own: they go with it (pbd_remove_object) */
    for (int i = 0; r == PBD_OK && i < k->ng; ++i) {
        pbd__wgroup *G = &k->G[i];
        pbd__wg_compact(G);
        if (!G->changed || G->count == 0) continue;
        r = pbd__wg_to_group(w, G, &fresh[i]);
        if (r == PBD_OK) G->changed = 2; /* fresh[i] holds its new arrays */
    }
    pbd__object *o = &w->objects[T->object];
    int *perm = NULL; /* a reordered object's permutation, when the copies join its range */
    if (r == PBD_OK && o->perm && ns > 0 && o->first + o->count == n0) {
        perm = pbd__torn_permutation(w, o, ns);
        if (!perm) r = PBD_ERROR_OUT_OF_MEMORY;
    }
    if (r != PBD_OK) {
        w->n = n0;
        pbd__free(w, perm);
        for (int i = 0; i < k->ng; ++i)
            if (k->G[i].changed == 2) {
                pbd__free(w, fresh[i].idx);
                pbd__free(w, fresh[i].rest);
                pbd__free(w, fresh[i].lambda);
                pbd__free(w, fresh[i].color_start);
            }
        pbd__free(w, fresh);
        return pbd__fail(w, r, "no memory to tear object %d", T->object);
    }
    /* from here on nothing fails */
    for (int i = 0; i < k->ng; ++i) {
        pbd__group *g = k->G[i].g;
        if (k->G[i].changed && k->G[i].count == 0) g->enabled = 0;
        if (k->G[i].changed != 2) continue;
        pbd__free(w, g->idx);
        pbd__free(w, g->rest);
        pbd__free(w, g->lambda);
        pbd__free(w, g->color_start);
        *g = fresh[i];
    }
    pbd__free(w, fresh);
    for (int s = 0; s < ns; ++s) {
        int v = k->splits[s].v, nv = n0 + s;
        w->x[nv] = w->x[v];
        w->p[nv] = w->p[v];
        w->v[nv] = w->v[v];
        w->radius[nv] = w->radius[v];
        /* a hand (kinematic) holds the particle it grabbed, not its copy:
           the torn-off side falls free; a pin nails both */
        w->flags[nv] = w->flags[v] & (unsigned char)~PBD__KINEMATIC;
        w->kin_target[nv] = w->kin_target[v];
        w->kin_from[nv] = w->kin_from[v];
        w->ncontact[nv] = 0;
        w->pressure[nv] = 0; /* a cloth vertex: no fluid pressure */
        w->mass[v] = k->splits[s].mass_v;
        w->mass[nv] = k->splits[s].mass_new;
    }
    w->n = n0 + ns;
    for (int s = 0; s < ns; ++s) {
        pbd__refresh_inv_mass(w, k->splits[s].v);
        pbd__refresh_inv_mass(w, n0 + s);
    }
    pbd__free(w, T->tris);
    T->tris = k->tris;
    k->tris = NULL;
    pbd__tear_surfaces_commit(w, k);
    pbd__tear_commit_lras(w, k);
    if (ns > 0 && o->tethers == PBD__TETHERS_STRAIGHT) o->tethers = PBD__TETHERS_GEODESIC; /* no longer convex */
    if (perm) {
        pbd__free(w, o->perm);
        o->perm = perm;
    }
    if (o->first + o->count == n0) o->count += ns;
    else o->coupled = 1; /* its constraints now reach particles outside its range */
    return PBD_OK;
}

/* The tables a tear leaves to rebuild: the torn objects' pieces (which,
   NULL: every object; damping), the particle phase's index (split
   vertices copy their flags: particle contact and fluids must index the
   new particles too) and, when surfaces changed, the self-collision
   tables (they number the surfaces' vertices). pbd_world_tear builds
   them after its cracks; when memory ran out there (w->tear_stale), the
   next step builds them first, or fails with nothing changed. */
static pbd_result pbd__tear_tables(pbd_world *w, const unsigned char *which, int surfaces) {
    pbd_result r = pbd__pieces_find_objects(w, which);
    if (r == PBD_OK) r = pbd__pp_refresh(w);
    if (r == PBD_OK && surfaces) r = pbd__selfcol_build(w, 0);
    return r;
}

PBDDEF pbd_result pbd_world_tear(pbd_world *w, int *splits) {
    PBD__CHECK_WORLD(w);
    int total = 0, surfaces = 0;
    if (splits) *splits = 0;
    unsigned char *torn = (unsigned char *)pbd__alloc_n(w, (size_t)w->nobjects + 1, 1);
    if (!torn) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to tear");
    memset(torn, 0, (size_t)w->nobjects + 1);
    pbd_result r = PBD_OK;
    for (int i = 0; i < w->ntears && r == PBD_OK; ++i) {
        if (!w->tears[i].s.live || pbd__tear_stopped(&w->tears[i])) continue;
        pbd__tear_work k;
        memset(&k, 0, sizeof k);
        int planned = pbd__tear_plan(w, &w->tears[i], &k);
        if (planned > 0 && !pbd__tear_plan_lras(w, &w->tears[i], &k)) planned = -1;
        r = planned < 0 ? pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to tear object %d", w->tears[i].object)
                        : PBD_OK;
        if (r == PBD_OK && planned > 0) r = pbd__tear_commit(w, &w->tears[i], &k);
        surfaces |= r == PBD_OK && k.surf_changed;
        pbd__tear_work_free(w, &k);
        if (r != PBD_OK) break;
        torn[w->tears[i].object] |= planned > 0;
        total += planned;
        if (splits) *splits = total;
    }
    /* the torn objects' tables, also when a later one failed */
    pbd_result rt = total > 0 ? pbd__tear_tables(w, torn, surfaces) : PBD_OK;
    pbd__free(w, torn);
    if (r != PBD_OK) {
        w->tear_stale |= total > 0 && rt != PBD_OK;
        return r;
    }
    w->tear_stale = rt != PBD_OK;
    if (rt != PBD_OK)
        return pbd__fail(w, rt, "torn, but no memory for the tables of the new particles (see pbd_world_tear)");
    return PBD_OK;
}

// ==== damping clusters ======================================================

typedef struct pbd__cluster {
    pbd__slot s;
    int count;
    int *particles;
    float damping;
} pbd__cluster;

PBDDEF pbd_result pbd_add_damping_cluster(pbd_world *w, const int *particles, int count, float damping,
                                          pbd_damping_cluster *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, particles, "particles");
    if (count <= 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "cluster of %d particles", count);
    for (int k = 0; k < count; ++k) PBD__TRY(pbd__check_particle(w, particles[k], "cluster particle"));
    if (!pbd__finite(damping)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "damping is not finite");
    if (damping < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "damping %g < 0", (double)damping);
    /* a particle listed twice would weigh twice in the sums */
    int *sorted = (int *)pbd__alloc_n(w, (size_t)count, sizeof(int));
    if (!sorted) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for a cluster");
    memcpy(sorted, particles, sizeof(int) * (size_t)count);
    qsort(sorted, (size_t)count, sizeof(int), pbd__cmp_int);
    for (int k = 1; k < count; ++k)
        if (sorted[k] == sorted[k - 1]) {
            int twice = sorted[k];
            pbd__free(w, sorted);
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d is listed twice", twice);
        }
    memcpy(sorted, particles, sizeof(int) * (size_t)count); /* keep the user's order (it fixes the sums' order) */
    pbd_result r = PBD__ROOM(w, w->clusters, w->nclusters, w->cluster_cap, "damping cluster");
    if (r != PBD_OK) {
        pbd__free(w, sorted);
        return r;
    }
    pbd__cluster c;
    memset(&c, 0, sizeof c);
    c.count = count;
    c.particles = sorted;
    c.damping = damping;
    int ci = PBD__PLACE(w, w->clusters, w->nclusters, &c);
    if (out) out->id = PBD__HANDLE(w->clusters, ci);
    return PBD_OK;
}

PBDDEF pbd_result pbd_remove_damping_cluster(pbd_world *w, pbd_damping_cluster handle) {
    PBD__CHECK_WORLD(w);
    int c;
    PBD__TRY(PBD__RESOLVE(w, handle, w->clusters, w->nclusters, "damping cluster", &c));
    pbd__free(w, w->clusters[c].particles);
    PBD__RELEASE(w->clusters, c);
    return PBD_OK;
}

PBDDEF pbd_result pbd_damping_cluster_set_damping(pbd_world *w, pbd_damping_cluster handle, float damping) {
    PBD__CHECK_WORLD_SETTING(w, PBD__GPU_DIRTY_SETTINGS);
    int c;
    PBD__TRY(PBD__RESOLVE(w, handle, w->clusters, w->nclusters, "damping cluster", &c));
    if (!pbd__finite(damping)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "damping is not finite");
    if (damping < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "damping %g < 0", (double)damping);
    w->clusters[c].damping = damping;
    return PBD_OK;
}

/* After the velocity pass of every substep, serially (a particle may be in
   several clusters; they are applied in order). */
static void pbd__clusters_damp(pbd_world *w, float h) {
    for (int i = 0; i < w->nclusters; ++i)
        if (w->clusters[i].damping > 0)
            pbd__damp_particles(w, w->clusters[i].particles, 0, w->clusters[i].count,
                                pbd__damp_fraction(w->clusters[i].damping, h));
}

/* --- the state of these four sections: work, snapshot, validation, free --- */

static long pbd__extras_work(const pbd_world *w) {
    long work = 0;
    for (int i = 0; i < w->nlras; ++i) work += w->lras[i].start ? w->lras[i].start[w->lras[i].count] : 0;
    for (int i = 0; i < w->nlimits; ++i) work += w->limits[i].g.count;
    return work;
}

static void pbd__extras_free(pbd_world *w) {
    for (int i = 0; w->lras && i < w->nlras; ++i) pbd__lra_free(w, &w->lras[i]);
    for (int i = 0; w->limits && i < w->nlimits; ++i) pbd__limit_free(w, &w->limits[i]);
    for (int i = 0; w->strands && i < w->nstrands; ++i) pbd__strands_free_one(w, &w->strands[i]);
    for (int i = 0; w->tears && i < w->ntears; ++i) {
        pbd__free(w, w->tears[i].tris);
        pbd__free(w, w->tears[i].rest2d);
    }
    for (int i = 0; w->clusters && i < w->nclusters; ++i) pbd__free(w, w->clusters[i].particles);
    pbd__free(w, w->lras);
    pbd__free(w, w->limits);
    pbd__free(w, w->strands);
    pbd__free(w, w->tears);
    pbd__free(w, w->clusters);
    w->lras = NULL;
    w->limits = NULL;
    w->strands = NULL;
    w->tears = NULL;
    w->clusters = NULL;
    w->nlras = w->nlimits = w->nstrands = w->ntears = w->nclusters = 0;
}

/* Reading sets a count only after its array exists, so a failed read
   leaves a world that pbd__extras_free can free. */
static void pbd__io_extras(pbd__io *io, pbd_world *w) {
    int n = w->nlras;
    pbd__io_table(io, w, (void **)&w->lras, &n, &w->lra_cap, sizeof(pbd__lra));
    w->nlras = n;
    for (int i = 0; i < w->nlras && !io->bad; ++i) {
        pbd__lra *l = &w->lras[i];
        if (!pbd__io_slot(io, &l->s)) continue;
        pbd__io_int(io, &l->count);
        pbd__io_int(io, &l->enabled);
        if (io->in && (l->count < 0 || l->count > INT_MAX / 2)) {
            io->bad = 1;
            l->count = 0;
            break;
        }
        pbd__io_array(io, w, (void **)&l->particles, l->count, sizeof(int));
        pbd__io_array(io, w, (void **)&l->start, (long)l->count + 1, sizeof(int));
        if (io->bad) {
            l->count = 0;
            break;
        }
        long nt = l->start[l->count];
        if (nt < 0) {
            io->bad = 1;
            break;
        }
        pbd__io_array(io, w, (void **)&l->anchor, nt, sizeof(int));
        pbd__io_array(io, w, (void **)&l->length, nt, sizeof(float));
        int loose = l->reach != NULL; /* written as is, read as 0 or 1 */
        pbd__io_int(io, &loose);
        if (io->in && loose != 0 && loose != 1) {
            io->bad = 1;
            break;
        }
        if (loose && !io->in) pbd__io_array(io, w, (void **)&l->reach, nt, sizeof(float));
        if (loose && io->in) { /* nt floats in the snapshot, 2 nt in memory (pbd__lra_reach_from) */
            float *read = NULL;
            pbd__io_array(io, w, (void **)&read, nt, sizeof(float));
            if (!io->bad) {
                pbd__lra_reach_from(w, l, read);
                if (!l->reach) io->bad = 2;
            }
            pbd__free(w, read);
        }
    }
    n = w->nlimits;
    pbd__io_table(io, w, (void **)&w->limits, &n, &w->limit_cap, sizeof(pbd__limit));
    w->nlimits = n;
    for (int i = 0; i < w->nlimits && !io->bad; ++i) {
        pbd__limit *L = &w->limits[i];
        if (!pbd__io_slot(io, &L->s)) continue;
        pbd__io_int(io, &L->mode);
        pbd__io_int(io, &L->enabled);
        pbd__io_float(io, &L->lo);
        pbd__io_float(io, &L->hi);
        pbd__io_float(io, &L->stiffness);
        pbd__io_group(io, w, &L->g);
    }
    n = w->nstrands;
    pbd__io_table(io, w, (void **)&w->strands, &n, &w->strands_cap, sizeof(pbd__strands));
    w->nstrands = n;
    for (int i = 0; i < w->nstrands && !io->bad; ++i) {
        pbd__strands *S = &w->strands[i];
        if (!pbd__io_slot(io, &S->s)) continue;
        int *ints[] = {&S->nstrands, &S->nparticles, &S->hair, &S->clamped};
        for (size_t k = 0; k < sizeof ints / sizeof ints[0]; ++k) pbd__io_int(io, ints[k]);
        pbd__io_float(io, &S->damping);
        for (int k = 0; k < 3; ++k) pbd__io_float(io, &S->pos[k]);
        for (int k = 0; k < 4; ++k) pbd__io_float(io, &S->rot[k]);
        if (io->in &&
            (S->nstrands < 1 || S->nparticles < 2 || S->nparticles > INT_MAX / 8 || S->nstrands > INT_MAX / 8)) {
            io->bad = 1;
            break;
        }
        pbd__io_array(io, w, (void **)&S->start, (long)S->nstrands + 1, sizeof(int));
        pbd__io_array(io, w, (void **)&S->idx, S->nparticles, sizeof(int));
        pbd__io_array(io, w, (void **)&S->rest, S->nparticles, sizeof(float));
        pbd__io_array(io, w, (void **)&S->root, S->hair ? 6L * S->nstrands : 0, sizeof(float));
        if (io->in && !io->bad) { /* FTL corrections are scratch */
            S->d = (float *)pbd__alloc_n(w, (size_t)S->nparticles * 3, sizeof(float));
            if (!S->d) io->bad = 2;
            else memset(S->d, 0, sizeof(float) * 3 * (size_t)S->nparticles);
        }
    }
    n = w->ntears;
    pbd__io_table(io, w, (void **)&w->tears, &n, &w->tear_cap, sizeof(pbd__tear));
    w->ntears = n;
    for (int i = 0; i < w->ntears && !io->bad; ++i) {
        pbd__tear *T = &w->tears[i];
        if (!pbd__io_slot(io, &T->s)) continue;
        pbd__io_int(io, &T->object);
        pbd__io_int(io, &T->max_splits);
        pbd__io_int(io, &T->ntris);
        pbd__io_float(io, &T->threshold);
        if (io->in && (T->ntris < 1 || T->ntris > INT_MAX / 8)) {
            io->bad = 1;
            break;
        }
        pbd__io_array(io, w, (void **)&T->tris, 3L * T->ntris, sizeof(int));
        pbd__io_array(io, w, (void **)&T->rest2d, 3L * T->ntris, sizeof(float));
    }
    n = w->nclusters;
    pbd__io_table(io, w, (void **)&w->clusters, &n, &w->cluster_cap, sizeof(pbd__cluster));
    w->nclusters = n;
    for (int i = 0; i < w->nclusters && !io->bad; ++i) {
        pbd__cluster *c = &w->clusters[i];
        if (!pbd__io_slot(io, &c->s)) continue;
        pbd__io_int(io, &c->count);
        pbd__io_float(io, &c->damping);
        if (io->in && c->count < 1) {
            io->bad = 1;
            break;
        }
        pbd__io_array(io, w, (void **)&c->particles, c->count, sizeof(int));
    }
}

static int pbd__ids_ok(const int *ids, long n, int np) {
    for (long k = 0; k < n; ++k)
        if (ids[k] < 0 || ids[k] >= np) return 0;
    return 1;
}

/* A private group (strain limits) as the solver indexes it. */
static int pbd__private_group_ok(const pbd__group *g, int np, int arity, int stride) {
    if (g->count <= 0 || g->arity != arity || g->rest_stride != stride || g->ncolors < 1 ||
        g->ncolors > PBD__MAX_COLORS || (g->overflow != 0 && g->overflow != 1) || g->slot || g->nverts || g->ntris ||
        !pbd__finite_n(g->rest, (size_t)g->count * stride))
        return 0;
    if (g->color_start[0] != 0 || g->color_start[g->ncolors] != g->count) return 0;
    for (int c = 0; c < g->ncolors; ++c)
        if (g->color_start[c] > g->color_start[c + 1]) return 0;
    return pbd__ids_ok(g->idx, (long)g->count * arity, np);
}

static pbd_result pbd__validate_extras(const pbd_world *t) {
    for (int i = 0; i < t->nlras; ++i) {
        const pbd__lra *l = &t->lras[i];
        if (!l->s.live) continue;
        if (l->count < 0 || (l->enabled != 0 && l->enabled != 1) || l->start[0] != 0 ||
            !pbd__ids_ok(l->particles, l->count, t->n))
            return PBD_ERROR_BAD_SNAPSHOT;
        for (int k = 0; k < l->count; ++k)
            if (l->start[k] > l->start[k + 1]) return PBD_ERROR_BAD_SNAPSHOT;
        if (!pbd__ids_ok(l->anchor, l->start[l->count], t->n) || !pbd__finite_n(l->length, (size_t)l->start[l->count]))
            return PBD_ERROR_BAD_SNAPSHOT;
        for (int k = 0; l->reach && k < l->start[l->count]; ++k)
            if (!(l->reach[k] >= l->length[k]) || !pbd__finite(l->reach[k])) return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int i = 0; i < t->nlimits; ++i) {
        const pbd__limit *L = &t->limits[i];
        if (!L->s.live) continue;
        int edges = L->mode == PBD_STRAIN_EDGES;
        if ((L->mode != PBD_STRAIN_TRIANGLES && !edges) || (L->enabled != 0 && L->enabled != 1) ||
            !(L->lo >= 0 && L->lo <= 1 && L->hi >= 1 && pbd__finite(L->hi)) ||
            !(L->stiffness > 0 && L->stiffness <= 1) ||
            !pbd__private_group_ok(&L->g, t->n, edges ? 2 : 3, edges ? 1 : 3))
            return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int i = 0; i < t->nstrands; ++i) {
        const pbd__strands *S = &t->strands[i];
        if (!S->s.live) continue;
        if (!(S->damping >= 0 && S->damping <= 1) || (S->hair != 0 && S->hair != 1) ||
            (S->clamped != 0 && S->clamped != 1) || S->start[0] != 0 || S->start[S->nstrands] != S->nparticles ||
            !pbd__ids_ok(S->idx, S->nparticles, t->n) || !pbd__finite_n(S->rest, (size_t)S->nparticles) ||
            !pbd__finite_n(S->pos, 7) || (S->hair && !pbd__finite_n(S->root, 6 * (size_t)S->nstrands)))
            return PBD_ERROR_BAD_SNAPSHOT;
        for (int s = 0; s < S->nstrands; ++s)
            if (S->start[s + 1] - S->start[s] < 2 + S->clamped) return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int i = 0; i < t->ntears; ++i) {
        const pbd__tear *T = &t->tears[i];
        if (!T->s.live) continue;
        if (T->object < 0 || T->object >= t->nobjects || T->max_splits < 0 || !(T->threshold > 1) ||
            !pbd__finite(T->threshold) || !pbd__ids_ok(T->tris, 3L * T->ntris, t->n) ||
            !pbd__finite_n(T->rest2d, 3 * (size_t)T->ntris))
            return PBD_ERROR_BAD_SNAPSHOT;
        for (int k = 0; k < T->ntris; ++k)
            if (!(T->rest2d[3 * k] > 0 && T->rest2d[3 * k + 2] > 0)) return PBD_ERROR_BAD_SNAPSHOT;
        const pbd__object *o = &t->objects[T->object];
        if (o->groups[0] < 0 || o->groups[0] >= t->ngroups || t->groups[o->groups[0]].type != PBD_CONSTRAINT_DISTANCE)
            return PBD_ERROR_BAD_SNAPSHOT;
        for (int g = 1; g < 3; ++g)
            if (o->groups[g] < -1 || o->groups[g] >= t->ngroups) return PBD_ERROR_BAD_SNAPSHOT;
        int bend = o->groups[1] >= 0 ? t->groups[o->groups[1]].type : -1,
            area = o->groups[2] >= 0 ? t->groups[o->groups[2]].type : -1;
        if ((bend >= 0 && bend != PBD_CONSTRAINT_BENDING_DIHEDRAL && bend != PBD_CONSTRAINT_BENDING_ISOMETRIC) ||
            (area >= 0 && area != PBD_CONSTRAINT_AREA) || T->max_splits > PBD__TEAR_SPLITS_MAX)
            return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int i = 0; i < t->nclusters; ++i) {
        const pbd__cluster *c = &t->clusters[i];
        if (!c->s.live) continue;
        if (!pbd__finite(c->damping) || c->damping < 0 || !pbd__ids_ok(c->particles, c->count, t->n))
            return PBD_ERROR_BAD_SNAPSHOT;
    }
    return PBD_OK;
}

// ==== self-collision ========================================================

/* PBD__SC_PT / PBD__SC_EE: candidate slots per vertex / per edge;
   PBD__SC_K: items per cluster of the broad phase (see pbd__selfcol_detect) */
enum { PBD__SC_PT = 8, PBD__SC_EE = 4, PBD__SC_K = 32 }; /* K <= 32: lane masks are unsigned */
#ifndef PBD__SC_SPEED
#define PBD__SC_SPEED 1.0f /* the maximum motion per substep, in thicknesses */
#endif
/* A point-triangle pair can become active this substep only if the vertex
   gets within sqrt(2) thicknesses of the triangle: the projection acts
   while the vertex is less than a thickness above the plane and within a
   thickness of the triangle sideways. An edge-edge pair acts below one
   thickness. The candidates are the pairs within these gaps plus the
   reach of their particles. */
#define PBD__SC_PT_GAP 1.41422f
#define PBD__SC_EE_GAP 1.0f

typedef struct pbd__surface {
    pbd__slot s;
    int nt, self;
    float thickness;
    int *tris; /* nt*3 world particles */
} pbd__surface;

/* lambda: the normal correction accumulated this substep (0: never active) */
typedef struct pbd__sc_pt {
    int tri;
    float side, dist, lambda;
} pbd__sc_pt;
typedef struct pbd__sc_ee {
    int edge;
    float s, t, dist, lambda;
    pbd__v3 n;
} pbd__sc_ee;
/* A candidate's four world particles (a point-triangle's in the winding
   of its side) and thickness, written with it each substep for the
   projection's SIMD tests (not in snapshots: rebuilt with the candidates) */
typedef struct pbd__sc_q {
    int p[4];
    float th;
} pbd__sc_q;

/* Derived from the surfaces (rebuilt when they change); vertices, triangles
   and edges of all surfaces numbered together. The broad phase groups
   each kind into clusters of PBD__SC_K items close in space (a Morton
   order of the positions when the tables were built; cloth keeps its
   neighbourhoods, so the clusters stay compact as it moves). */
typedef struct pbd__selfcol {
    int nv, nt, ne;
    int vc, tc, ec; /* clusters of vertices, triangles, edges */
    float maxth;
    int *vp, *vs; /* per vertex: world particle (sorted), surface */
    int *tv, *ts; /* per triangle: 3 vertices, surface */
    int *ev, *es; /* per edge: 2 vertices, surface */
    float *x0;    /* nv*3: positions at the start of the step */
    float *reach; /* nv: how far each vertex may get this substep */
    pbd__p4 *xv;  /* nv: each vertex's position at the start of the substep, its reach as w (the bounds gather it) */
    int *vord, *tord, *eord; /* (clusters * PBD__SC_K) the members of each cluster, -1 past the end */
    int *tlv, *elv; /* per cluster 3 (2) rows of PBD__SC_K: the vertices of its triangles (edges), -1 past the end */
    int *epos;      /* ne: the place of each edge in eord. An edge-edge pair belongs to the edge of the smaller place */
    /* this substep's bounds: per cluster its box (6: lo, hi) and the boxes
       of its members as lanes (6 rows of PBD__SC_K: lo x y z, hi x y z;
       edges have 10 more: the positions of their two vertices, the
       vector between them and its squared length) */
    float *vbox, *tbox, *ebox, *tlane, *elane;
    float *tcent, *ecent; /* cluster box centres: the points of the grids */
    pbd__grid gt, ge;     /* the shared hash grid (see "==== hash grid") over triangle, edge clusters */
    float cellt, celle;
    int iter;              /* projections so far this substep */
    int crossings;         /* the fail-safe found one this substep */
    unsigned char *frozen; /* nv: sent back to the start of the substep (pbd__sc_failsafe) */
    pbd__sc_pt *pt;
    unsigned char *npt;
    pbd__sc_ee *ee;
    unsigned char *nee;
    pbd__sc_q *ptq, *eeq; /* the particles of each slot of pt and ee */
    /* the candidates (what snapshots hold) at the start of the step, for
       the rollback of a non-finite step */
    pbd__sc_pt *pt_step;
    unsigned char *npt_step;
    pbd__sc_ee *ee_step;
    unsigned char *nee_step;
    int *eord_step;
    /* this substep's candidates coloured for the projection (see
       pbd__selfcol_color). A candidate is named by its slot: i*PBD__SC_PT+k
       for slot k of vertex i, nv*PBD__SC_PT + e*PBD__SC_EE+k for slot k of
       edge e (capacity: nv*PBD__SC_PT + ne*PBD__SC_EE) */
    uint64_t *cmask;                 /* nv: the colours each vertex has so far */
    int *cand;                       /* the candidates in the order they are coloured */
    unsigned char *ccol;             /* the colour of each of cand */
    int *corder;                     /* the candidates sorted by colour */
    int ncolors, overflow;           /* overflow: the last colour shares particles (serial) */
    int cstart[PBD__MAX_COLORS + 1]; /* colour c: corder[cstart[c] .. cstart[c+1]) */
} pbd__selfcol;

static void pbd__selfcol_free(pbd_world *w, pbd__selfcol *S) {
    if (!S) return;
    void *arrays[] = {S->vp,     S->vs,      S->tv,       S->ts,      S->ev,       S->es,       S->x0,     S->reach,
                      S->xv,     S->vord,    S->tord,     S->eord,    S->tlv,      S->elv,      S->epos,   S->vbox,
                      S->tbox,   S->ebox,    S->tlane,    S->elane,   S->tcent,    S->ecent,    S->frozen, S->pt,
                      S->npt,    S->ee,      S->nee,      S->ptq,     S->eeq,      S->cmask,    S->cand,   S->ccol,
                      S->corder, S->pt_step, S->npt_step, S->ee_step, S->nee_step, S->eord_step};
    pbd__grid_free(w, &S->gt);
    pbd__grid_free(w, &S->ge);
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__free(w, arrays[i]);
    pbd__free(w, S);
}

static void pbd__surfaces_free(pbd_world *w) {
    for (int i = 0; w->surfaces && i < w->nsurfaces; ++i) pbd__free(w, w->surfaces[i].tris);
    pbd__free(w, w->surfaces);
    pbd__selfcol_free(w, w->selfcol);
    w->surfaces = NULL;
    w->selfcol = NULL;
    w->nsurfaces = w->surface_cap = 0;
}

static int pbd__sc_vertex(const pbd__selfcol *S, int particle) {
    int lo = 0, hi = S->nv - 1;
    while (lo <= hi) {
        int m = lo + (hi - lo) / 2;
        if (S->vp[m] == particle) return m;
        if (S->vp[m] < particle) lo = m + 1;
        else hi = m - 1;
    }
    return -1;
}

/* The clusters of the broad phase: the leaves of a kd-tree over the
   vertices, triangle centroids or edge midpoints at the positions now,
   split at the median of the longest side into parts of whole clusters of
   PBD__SC_K (only the last cluster is partial). The order only groups the
   work: the candidates do not depend on it (ties are broken by index), so
   a restored snapshot whose positions give other clusters still continues
   bit for bit. */
typedef struct pbd__sc_key {
    float key;
    int index;
} pbd__sc_key;
static int pbd__sc_cmp_key(const void *a, const void *b) {
    const pbd__sc_key *x = (const pbd__sc_key *)a, *y = (const pbd__sc_key *)b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->index - y->index;
}
static void pbd__sc_split(const float *pos, pbd__sc_key *keys, int *ord, int a, int b) {
    while (b - a > PBD__SC_K) {
        float lo[3] = {FLT_MAX, FLT_MAX, FLT_MAX}, hi[3] = {-FLT_MAX, -FLT_MAX, -FLT_MAX};
        for (int k = a; k < b; ++k)
            for (int j = 0; j < 3; ++j) {
                float v = pos[3 * (size_t)ord[k] + j];
                lo[j] = v < lo[j] ? v : lo[j];
                hi[j] = v > hi[j] ? v : hi[j];
            }
        int ax = hi[1] - lo[1] > hi[0] - lo[0] ? 1 : 0;
        ax = hi[2] - lo[2] > hi[ax] - lo[ax] ? 2 : ax;
        for (int k = a; k < b; ++k) {
            keys[k].key = pos[3 * (size_t)ord[k] + ax];
            keys[k].index = ord[k];
        }
        qsort(keys + a, (size_t)(b - a), sizeof *keys, pbd__sc_cmp_key);
        for (int k = a; k < b; ++k) ord[k] = keys[k].index;
        int m = a + PBD__SC_K * (((b - a) / PBD__SC_K + 1) / 2); /* whole clusters on the left */
        pbd__sc_split(pos, keys, ord, a, m);
        a = m;
    }
}
static pbd_result pbd__sc_order(pbd_world *w, const pbd__selfcol *S, int count, int per, const int *items, int *ord) {
    float *pos = (float *)pbd__alloc_n(w, (size_t)count * 3 + 1, sizeof(float));
    pbd__sc_key *keys = (pbd__sc_key *)pbd__alloc_n(w, (size_t)count + 1, sizeof(pbd__sc_key));
    int ok = pos && keys;
    for (int k = 0; ok && k < count; ++k) {
        pbd__v3 c = pbd__v(0, 0, 0);
        for (int j = 0; j < per; ++j) c = pbd__add(c, pbd__ld(S->x0 + 3 * (items ? items[per * k + j] : k)));
        pbd__st(pos + 3 * k, pbd__mul(c, 1.0f / (float)per));
    }
    int clusters = (count + PBD__SC_K - 1) / PBD__SC_K;
    for (int k = 0; ok && k < clusters * PBD__SC_K; ++k) ord[k] = k < count ? k : -1;
    if (ok) pbd__sc_split(pos, keys, ord, 0, count);
    pbd__free(w, pos);
    pbd__free(w, keys);
    return ok ? PBD_OK : PBD_ERROR_OUT_OF_MEMORY;
}
/* The vertices of the members of each cluster as lanes (see tlv, elv). */
static void pbd__sc_lane_vertices(const int *ord, const int *items, int per, int clusters, int *out) {
    for (int c = 0; c < clusters; ++c)
        for (int j = 0; j < per; ++j)
            for (int l = 0; l < PBD__SC_K; ++l) {
                int it = ord[c * PBD__SC_K + l];
                out[((size_t)c * per + j) * PBD__SC_K + l] = it < 0 ? -1 : items[per * it + j];
            }
}
/* The edge lanes and places from eord. */
static void pbd__sc_edge_places(pbd__selfcol *S) {
    pbd__sc_lane_vertices(S->eord, S->ev, 2, S->ec, S->elv);
    for (int k = 0; k < S->ne; ++k) S->epos[S->eord[k]] = k;
}
static pbd_result pbd__sc_clusters(pbd_world *w, pbd__selfcol *S) {
    pbd_result r = pbd__sc_order(w, S, S->nv, 1, NULL, S->vord);
    if (r == PBD_OK) r = pbd__sc_order(w, S, S->nt, 3, S->tv, S->tord);
    if (r == PBD_OK) r = pbd__sc_order(w, S, S->ne, 2, S->ev, S->eord);
    if (r == PBD_OK) {
        pbd__sc_lane_vertices(S->tord, S->tv, 3, S->tc, S->tlv);
        pbd__sc_edge_places(S);
    }
    return r;
}

/* The candidates of a snapshot (in old) into the fresh tables S: they carry
   the sides that pairs keep. */
static int pbd__selfcol_keep(pbd__selfcol *S, const pbd__selfcol *old) {
    if (old->nv != S->nv || old->nt != S->nt || old->ne != S->ne || !old->npt || !old->pt ||
        (S->ne && (!old->nee || !old->ee || !old->eord)))
        return 0;
    /* the edge clusters of the snapshot: they say which edge of a pair holds it */
    for (int k = 0; k < S->ne; ++k) S->epos[k] = -1;
    for (int k = 0; k < S->ec * PBD__SC_K; ++k) {
        int e = old->eord[k];
        if (k >= S->ne ? e != -1 : (e < 0 || e >= S->ne || S->epos[e] >= 0)) return 0;
        if (k < S->ne) S->epos[e] = k;
    }
    if (S->ne) memcpy(S->eord, old->eord, sizeof(int) * (size_t)S->ec * PBD__SC_K);
    if (S->ne) pbd__sc_edge_places(S);
    for (int i = 0; i < S->nv; ++i) {
        if (old->npt[i] > PBD__SC_PT) return 0;
        for (int k = 0; k < old->npt[i]; ++k) {
            const pbd__sc_pt *c = &old->pt[(size_t)i * PBD__SC_PT + k];
            if (c->tri < 0 || c->tri >= S->nt || (c->side != 1.0f && c->side != -1.0f) || !pbd__finite(c->dist) ||
                !pbd__finite(c->lambda))
                return 0;
        }
    }
    for (int e = 0; e < S->ne; ++e) {
        if (old->nee[e] > PBD__SC_EE) return 0;
        for (int k = 0; k < old->nee[e]; ++k) {
            const pbd__sc_ee *c = &old->ee[(size_t)e * PBD__SC_EE + k];
            if (c->edge < 0 || c->edge >= S->ne || S->epos[c->edge] <= S->epos[e] || !(c->s >= 0 && c->s <= 1) ||
                !(c->t >= 0 && c->t <= 1) || !pbd__finite(c->dist) || !pbd__finite(c->lambda) ||
                !pbd__finite_n(&c->n.x, 3))
                return 0;
        }
    }
    memcpy(S->npt, old->npt, (size_t)S->nv);
    memcpy(S->pt, old->pt, sizeof(pbd__sc_pt) * PBD__SC_PT * (size_t)S->nv);
    if (S->ne) {
        memcpy(S->nee, old->nee, (size_t)S->ne);
        memcpy(S->ee, old->ee, sizeof(pbd__sc_ee) * PBD__SC_EE * (size_t)S->ne);
    }
    return 1;
}

/* Builds the derived tables of w's surfaces into a fresh pbd__selfcol and
   swaps it in; on failure nothing changes. keep: the old tables came from
   a snapshot and hold its candidates. */
/* The surfaces in use (removed ones leave free slots). */
static int pbd__live_surfaces(const pbd_world *w) {
    int n = 0;
    for (int s = 0; s < w->nsurfaces; ++s) n += w->surfaces[s].s.live;
    return n;
}

static pbd_result pbd__selfcol_build(pbd_world *w, int keep) {
    if (pbd__live_surfaces(w) == 0) {
        pbd__selfcol_free(w, w->selfcol);
        w->selfcol = NULL;
        return PBD_OK;
    }
    pbd__selfcol *S = (pbd__selfcol *)pbd__alloc(w, sizeof *S);
    if (!S) return PBD_ERROR_OUT_OF_MEMORY;
    memset(S, 0, sizeof *S);
    long nt = 0, ne = 0, nidx = 0;
    pbd_result r = PBD_OK;
    for (int s = 0; s < w->nsurfaces; ++s) {
        const pbd__surface *sf = &w->surfaces[s];
        if (!sf->s.live) continue;
        if (sf->nt <= 0 || !pbd__finite(sf->thickness) || !(sf->thickness > 0) || (sf->self != 0 && sf->self != 1))
            r = PBD_ERROR_INVALID_ARGUMENT;
        for (long k = 0; k < 3L * sf->nt && r == PBD_OK; ++k)
            if (sf->tris[k] < 0 || sf->tris[k] >= w->n) r = PBD_ERROR_INDEX_OUT_OF_RANGE;
        nt += sf->nt;
        S->maxth = sf->thickness > S->maxth ? sf->thickness : S->maxth;
    }
    if (r == PBD_OK && nt > INT_MAX / 64) r = PBD_ERROR_OVERFLOW; /* slots: up to 3 nt (PBD__SC_PT + PBD__SC_EE) */
    /* vertices: the sorted particles of all surfaces, each in one surface */
    int *all = r == PBD_OK ? (int *)pbd__alloc_n(w, (size_t)nt * 3, sizeof(int)) : NULL;
    if (r == PBD_OK && !all) r = PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) {
        for (int s = 0; s < w->nsurfaces; ++s)
            for (long k = 0; w->surfaces[s].s.live && k < 3L * w->surfaces[s].nt; ++k)
                all[nidx++] = w->surfaces[s].tris[k];
        qsort(all, (size_t)nidx, sizeof(int), pbd__cmp_int);
        long u = 0;
        for (long k = 0; k < nidx; ++k)
            if (k == 0 || all[k] != all[k - 1]) all[u++] = all[k];
        S->nv = (int)u;
        S->nt = (int)nt;
        S->vp = (int *)pbd__alloc_n(w, (size_t)u, sizeof(int));
        S->vs = (int *)pbd__alloc_n(w, (size_t)u, sizeof(int));
        S->tv = (int *)pbd__alloc_n(w, (size_t)nt * 3, sizeof(int));
        S->ts = (int *)pbd__alloc_n(w, (size_t)nt, sizeof(int));
        if (!S->vp || !S->vs || !S->tv || !S->ts) r = PBD_ERROR_OUT_OF_MEMORY;
        else {
            memcpy(S->vp, all, sizeof(int) * (size_t)u);
            for (long k = 0; k < u; ++k) S->vs[k] = -1;
        }
    }
    pbd__free(w, all);
    /* triangles and edges in surface vertex numbers */
    long t = 0;
    pbd__edge **edges = r == PBD_OK ? (pbd__edge **)pbd__alloc_n(w, (size_t)w->nsurfaces, sizeof(pbd__edge *)) : NULL;
    long *nes = r == PBD_OK ? (long *)pbd__alloc_n(w, (size_t)w->nsurfaces, sizeof(long)) : NULL;
    if (r == PBD_OK && (!edges || !nes)) r = PBD_ERROR_OUT_OF_MEMORY;
    for (int s = 0; edges && s < w->nsurfaces; ++s) edges[s] = NULL;
    for (int s = 0; r == PBD_OK && s < w->nsurfaces; ++s) {
        const pbd__surface *sf = &w->surfaces[s];
        nes[s] = 0;
        if (!sf->s.live) continue;
        for (int k = 0; k < sf->nt; ++k, ++t) {
            S->ts[t] = s;
            for (int j = 0; j < 3; ++j) {
                int v = pbd__sc_vertex(S, sf->tris[3 * k + j]);
                if (S->vs[v] >= 0 && S->vs[v] != s) r = PBD_ERROR_INVALID_ARGUMENT; /* shared by two surfaces */
                S->vs[v] = s;
                S->tv[3 * t + j] = v;
            }
        }
        nes[s] = pbd__build_edges(w, sf->tris, sf->nt, 3, &edges[s]);
        if (nes[s] < 0) r = PBD_ERROR_OUT_OF_MEMORY;
        else ne += nes[s];
    }
    if (r == PBD_OK) {
        S->ne = (int)ne;
        S->ev = (int *)pbd__alloc_n(w, (size_t)ne * 2, sizeof(int));
        S->es = (int *)pbd__alloc_n(w, (size_t)ne, sizeof(int));
        if (!S->ev || !S->es) r = PBD_ERROR_OUT_OF_MEMORY;
        long e = 0;
        for (int s = 0; r == PBD_OK && s < w->nsurfaces; ++s)
            for (long k = 0; k < nes[s]; ++k, ++e) {
                S->ev[2 * e] = pbd__sc_vertex(S, edges[s][k].a);
                S->ev[2 * e + 1] = pbd__sc_vertex(S, edges[s][k].b);
                S->es[e] = s;
            }
    }
    for (int s = 0; edges && s < w->nsurfaces; ++s) pbd__free(w, edges[s]);
    pbd__free(w, edges);
    pbd__free(w, nes);
    if (r == PBD_OK) {
        size_t nv = (size_t)S->nv, K = PBD__SC_K;
        S->vc = (S->nv + PBD__SC_K - 1) / PBD__SC_K;
        S->tc = (S->nt + PBD__SC_K - 1) / PBD__SC_K;
        S->ec = (S->ne + PBD__SC_K - 1) / PBD__SC_K;
        size_t vc = (size_t)S->vc, tc = (size_t)S->tc, ec = (size_t)S->ec;
        S->x0 = (float *)pbd__alloc_n(w, nv * 3, sizeof(float));
        S->reach = (float *)pbd__alloc_n(w, nv, sizeof(float));
        S->xv = (pbd__p4 *)pbd__alloc_n(w, nv, sizeof(pbd__p4));
        S->frozen = (unsigned char *)pbd__alloc_n(w, nv, 1);
        S->vord = (int *)pbd__alloc_n(w, vc * K, sizeof(int));
        S->tord = (int *)pbd__alloc_n(w, tc * K, sizeof(int));
        S->eord = (int *)pbd__alloc_n(w, ec * K + 1, sizeof(int));
        S->tlv = (int *)pbd__alloc_n(w, tc * 3 * K, sizeof(int));
        S->elv = (int *)pbd__alloc_n(w, ec * 2 * K + 1, sizeof(int));
        S->epos = (int *)pbd__alloc_n(w, (size_t)S->ne + 1, sizeof(int));
        S->vbox = (float *)pbd__alloc_n(w, vc * 6, sizeof(float));
        S->tbox = (float *)pbd__alloc_n(w, tc * 6, sizeof(float));
        S->ebox = (float *)pbd__alloc_n(w, ec * 6 + 1, sizeof(float));
        S->tlane = (float *)pbd__alloc_n(w, tc * 6 * K, sizeof(float));
        S->elane = (float *)pbd__alloc_n(w, ec * 16 * K + 1, sizeof(float));
        S->tcent = (float *)pbd__alloc_n(w, tc * 3, sizeof(float));
        S->ecent = (float *)pbd__alloc_n(w, ec * 3 + 1, sizeof(float));
        S->pt = (pbd__sc_pt *)pbd__alloc_n(w, nv * PBD__SC_PT, sizeof(pbd__sc_pt));
        S->ptq = (pbd__sc_q *)pbd__alloc_n(w, nv * PBD__SC_PT, sizeof(pbd__sc_q));
        S->eeq = (pbd__sc_q *)pbd__alloc_n(w, (size_t)S->ne * PBD__SC_EE + 1, sizeof(pbd__sc_q));
        S->npt = (unsigned char *)pbd__alloc_n(w, nv, 1);
        S->ee = (pbd__sc_ee *)pbd__alloc_n(w, (size_t)S->ne * PBD__SC_EE, sizeof(pbd__sc_ee));
        S->nee = (unsigned char *)pbd__alloc_n(w, (size_t)S->ne, 1);
        S->pt_step = (pbd__sc_pt *)pbd__alloc_n(w, nv * PBD__SC_PT, sizeof(pbd__sc_pt));
        S->npt_step = (unsigned char *)pbd__alloc_n(w, nv, 1);
        S->ee_step = (pbd__sc_ee *)pbd__alloc_n(w, (size_t)S->ne * PBD__SC_EE, sizeof(pbd__sc_ee));
        S->nee_step = (unsigned char *)pbd__alloc_n(w, (size_t)S->ne, 1);
        S->eord_step = (int *)pbd__alloc_n(w, ec * K + 1, sizeof(int));
        size_t slots = nv * PBD__SC_PT + (size_t)S->ne * PBD__SC_EE;
        S->cmask = (uint64_t *)pbd__alloc_n(w, nv, sizeof(uint64_t));
        S->cand = (int *)pbd__alloc_n(w, slots, sizeof(int));
        S->ccol = (unsigned char *)pbd__alloc_n(w, slots, 1);
        S->corder = (int *)pbd__alloc_n(w, slots, sizeof(int));
        if (!S->cmask || !S->cand || !S->ccol || !S->corder || !S->pt_step || !S->npt_step || !S->ee_step ||
            !S->nee_step || !S->eord_step)
            r = PBD_ERROR_OUT_OF_MEMORY;
        else if (!S->x0 || !S->reach || !S->xv || !S->frozen || !S->vord || !S->tord || !S->eord || !S->tlv ||
                 !S->elv || !S->epos || !S->vbox || !S->tbox || !S->ebox || !S->tlane || !S->elane || !S->tcent ||
                 !S->ecent || !S->pt || !S->npt || !S->ee || !S->nee || !S->ptq || !S->eeq)
            r = PBD_ERROR_OUT_OF_MEMORY;
        else if (pbd__grid_reserve(w, &S->gt, S->tc) != PBD_OK ||
                 pbd__grid_reserve(w, &S->ge, S->ec > 0 ? S->ec : 1) != PBD_OK)
            r = PBD_ERROR_OUT_OF_MEMORY;
        else {
            memset(S->npt, 0, nv);
            memset(S->nee, 0, (size_t)S->ne);
            memset(S->pt, 0, sizeof(pbd__sc_pt) * PBD__SC_PT * nv); /* snapshots hold every slot */
            memset(S->ee, 0, sizeof(pbd__sc_ee) * PBD__SC_EE * (size_t)S->ne);
            for (size_t i = 0; i < nv; ++i) pbd__st(S->x0 + 3 * i, pbd__p3(w->x[S->vp[i]]));
            r = pbd__sc_clusters(w, S);
        }
    }
    if (r == PBD_OK && keep && (!w->selfcol || !pbd__selfcol_keep(S, w->selfcol))) r = PBD_ERROR_BAD_SNAPSHOT;
    if (r != PBD_OK) {
        pbd__selfcol_free(w, S);
        return r;
    }
    pbd__selfcol_free(w, w->selfcol);
    w->selfcol = S;
    return PBD_OK;
}
static pbd_result pbd__selfcol_rebuild(pbd_world *w) {
    pbd_result r = pbd__selfcol_build(w, 1);
    return r == PBD_ERROR_INVALID_ARGUMENT || r == PBD_ERROR_INDEX_OUT_OF_RANGE || r == PBD_ERROR_OVERFLOW
               ? PBD_ERROR_BAD_SNAPSHOT
               : r;
}

PBDDEF pbd_collision_surface_desc pbd_collision_surface_desc_default(void) {
    pbd_collision_surface_desc d;
    memset(&d, 0, sizeof d);
    d.thickness = 0.01f;
    d.self_collision = 1;
    return d;
}

/* Index of the object holding particle i, or -1. */

static pbd_result pbd__surface_index(const pbd_world *w, pbd_surface handle, int *index) {
    return PBD__RESOLVE(w, handle, w->surfaces, w->nsurfaces, "surface", index);
}

static int pbd__cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
/* The typical gap at rest between a vertex of the surface and the
   features of its own that share no vertex with it: the median over its
   triangles of their smallest height (a vertex to the opposite edge,
   which the next triangle across that edge holds without the vertex; a
   grid's e / sqrt(2)). A self-colliding surface thicker than this starts
   in contact with itself and blows up (an audit: a 24 x 24 cloth of
   4.3 cm edges, whose gap is 3.07 cm, rests at a thickness of 3 cm and
   flies apart at 3.2 cm, at 38 m/s at 0.1 m). -1: no memory. */
static float pbd__surface_rest_gap(pbd_world *w, const int *tris, int nt) {
    float *h = (float *)pbd__alloc_n(w, (size_t)nt, sizeof(float));
    if (!h) return -1;
    for (int t = 0; t < nt; ++t) {
        pbd__v3 a = pbd__p3(w->x[tris[3 * t]]), b = pbd__p3(w->x[tris[3 * t + 1]]), c = pbd__p3(w->x[tris[3 * t + 2]]);
        float la = pbd__len(pbd__sub(c, b)), lb = pbd__len(pbd__sub(a, c)), lc = pbd__len(pbd__sub(b, a));
        float longest = la > lb ? (la > lc ? la : lc) : (lb > lc ? lb : lc);
        float twice_area = pbd__len(pbd__cross(pbd__sub(b, a), pbd__sub(c, a)));
        h[t] = longest > 0 ? twice_area / longest : 0;
    }
    qsort(h, (size_t)nt, sizeof(float), pbd__cmp_float);
    float gap = h[nt / 2];
    pbd__free(w, h);
    return gap;
}

PBDDEF pbd_result pbd_add_collision_surface(pbd_world *w, const pbd_collision_surface_desc *d, pbd_surface *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, d, "desc");
    PBD__TRY(pbd__validate_world_triangles(w, d->triangles, d->triangle_count, "desc.triangles"));
    if (!pbd__finite(d->thickness)) return pbd__fail(w, PBD_ERROR_NOT_FINITE, "thickness is not finite");
    if (!(d->thickness > 0))
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "thickness %g must be > 0", (double)d->thickness);
    PBD__TRY(pbd__check_switch(w, d->self_collision, "self_collision"));
    if (d->self_collision) {
        float gap = pbd__surface_rest_gap(w, d->triangles, d->triangle_count);
        if (gap < 0) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory for a surface");
        if (d->thickness >= gap)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                             "thickness %g m is not under the surface's rest gap %g m (the median of its triangles' "
                             "smallest heights): it would start in contact with itself; take about half of it",
                             (double)d->thickness, (double)gap);
    }
    int si;
    PBD__TRY(PBD__ACQUIRE(w, w->surfaces, w->nsurfaces, w->surface_cap, "surface", &si));
    pbd__surface *sf = &w->surfaces[si];
    sf->nt = d->triangle_count;
    sf->thickness = d->thickness;
    sf->self = d->self_collision;
    sf->tris = (int *)pbd__alloc_n(w, (size_t)sf->nt * 3, sizeof(int));
    pbd_result r = sf->tris ? PBD_OK : PBD_ERROR_OUT_OF_MEMORY;
    if (r == PBD_OK) memcpy(sf->tris, d->triangles, sizeof(int) * 3 * (size_t)sf->nt);
    if (r == PBD_OK) r = pbd__selfcol_build(w, 0);
    if (r != PBD_OK) {
        pbd__free(w, sf->tris);
        PBD__UNDO(w->surfaces, w->nsurfaces, si);
        if (r == PBD_ERROR_INVALID_ARGUMENT)
            return pbd__fail(w, r, "a particle of this surface belongs to another surface");
        return pbd__fail(w, r, "no memory for a surface");
    }
    /* contacts between objects exchange angular momentum (see SOLVER 5) */
    int o0 = pbd__object_of(w, sf->tris[0]), spans = w->nsurfaces > 1;
    for (long k = 0; k < 3L * sf->nt && !spans; ++k) spans = pbd__object_of(w, sf->tris[k]) != o0;
    for (int s = 0; spans && s < w->nsurfaces; ++s) pbd__mark_coupled(w, w->surfaces[s].tris, 3L * w->surfaces[s].nt);
    if (out) out->id = PBD__HANDLE(w->surfaces, si);
    return PBD_OK;
}

PBDDEF pbd_result pbd_add_cloth_self_collision(pbd_world *w, pbd_object cloth, const pbd_cloth_desc *desc,
                                               float thickness, pbd_surface *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, desc, "desc");
    int oi;
    PBD__TRY(pbd__object_index(w, cloth, &oi));
    pbd_range rg = {w->objects[oi].first, w->objects[oi].count};
    if (desc->vertex_count != rg.count)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "desc has %d vertices, the cloth %d", desc->vertex_count,
                         rg.count);
    int *tri;
    PBD__TRY(pbd__world_triangles(w, oi, desc->triangles, desc->triangle_count, &tri));
    pbd_collision_surface_desc sd = pbd_collision_surface_desc_default();
    sd.triangles = tri;
    sd.triangle_count = desc->triangle_count;
    sd.thickness = thickness;
    pbd_result r = pbd_add_collision_surface(w, &sd, out);
    pbd__free(w, tri);
    return r;
}

/* The derived tables are rebuilt without it; on failure (memory) the
   surface stays. */
PBDDEF pbd_result pbd_remove_collision_surface(pbd_world *w, pbd_surface handle) {
    PBD__CHECK_WORLD(w);
    int s;
    PBD__TRY(pbd__surface_index(w, handle, &s));
    w->surfaces[s].s.live = 0;
    pbd_result r = pbd__selfcol_build(w, 0);
    w->surfaces[s].s.live = 1;
    if (r != PBD_OK) return pbd__fail(w, r, "no memory to rebuild the self-collision tables");
    pbd__free(w, w->surfaces[s].tris);
    PBD__RELEASE(w->surfaces, s);
    return PBD_OK;
}

PBDDEF int pbd_world_surface_count(const pbd_world *w) { return w ? PBD__LIVE(w->surfaces, w->nsurfaces) : 0; }
static int **pbd__surface_tris(pbd_world *w, int s, int *nt) {
    *nt = w->surfaces[s].nt;
    return &w->surfaces[s].tris;
}
PBDDEF int pbd_world_self_contact_count(const pbd_world *w) {
    if (!w || !w->selfcol) return 0;
    pbd__gpu_sync_also(w, PBD__GPU_STALE_SELFCOL);
    int total = 0;
    for (int i = 0; i < w->selfcol->nv; ++i) total += w->selfcol->npt[i];
    for (int e = 0; e < w->selfcol->ne; ++e) total += w->selfcol->nee[e];
    return total;
}

PBDDEF pbd_result pbd_world_self_contacts(const pbd_world *w, int *quads, int max, int *count, int *point_triangle) {
    if (!w) return pbd__null_world();
    pbd__gpu_sync_also(w, PBD__GPU_STALE_SELFCOL);
    PBD__TRY(pbd__check_list(w, quads, max, count));
    *count = 0;
    if (point_triangle) *point_triangle = 0;
    if (!w->selfcol) return PBD_OK;
    const pbd__selfcol *S = w->selfcol;
    int n = 0;
    for (int i = 0; i < S->nv; ++i)
        for (int k = 0; k < S->npt[i]; ++k, ++n) {
            const int *tv = S->tv + 3 * S->pt[(size_t)i * PBD__SC_PT + k].tri;
            int q[4] = {S->vp[i], S->vp[tv[0]], S->vp[tv[1]], S->vp[tv[2]]};
            if (n < max) memcpy(quads + 4 * (size_t)n, q, sizeof q);
        }
    if (point_triangle) *point_triangle = n;
    for (int e = 0; e < S->ne; ++e)
        for (int k = 0; k < S->nee[e]; ++k, ++n) {
            int f = S->ee[(size_t)e * PBD__SC_EE + k].edge;
            int q[4] = {S->vp[S->ev[2 * e]], S->vp[S->ev[2 * e + 1]], S->vp[S->ev[2 * f]], S->vp[S->ev[2 * f + 1]]};
            if (n < max) memcpy(quads + 4 * (size_t)n, q, sizeof q);
        }
    *count = n;
    return PBD_OK;
}

static void pbd__io_surfaces(pbd__io *io, pbd_world *w) {
    int n = w->nsurfaces;
    pbd__io_table(io, w, (void **)&w->surfaces, &n, &w->surface_cap, sizeof(pbd__surface));
    w->nsurfaces = n;
    if (io->bad) return;
    for (int s = 0; s < w->nsurfaces && !io->bad; ++s) {
        pbd__surface *sf = &w->surfaces[s];
        if (!pbd__io_slot(io, &sf->s)) continue;
        pbd__io_int(io, &sf->nt);
        pbd__io_int(io, &sf->self);
        pbd__io_float(io, &sf->thickness);
        if (io->in && !io->bad && (sf->nt < 1 || sf->nt > INT_MAX / 16)) {
            io->bad = 1;
            return;
        }
        pbd__io_array(io, w, (void **)&sf->tris, 3L * sf->nt, sizeof(int));
    }
    if (pbd__live_surfaces(w) == 0 || io->bad) return;
    /* the candidates: they carry the sides that pairs keep */
    pbd__selfcol *S = w->selfcol;
    if (io->in) {
        S = (pbd__selfcol *)pbd__alloc(w, sizeof *S);
        if (!S) {
            io->bad = 2;
            return;
        }
        memset(S, 0, sizeof *S);
        w->selfcol = S;
    }
    pbd__io_int(io, &S->nv);
    pbd__io_int(io, &S->nt);
    pbd__io_int(io, &S->ne);
    if (io->in && !io->bad &&
        (S->nv < 0 || S->nt < 0 || S->ne < 0 || S->nv > INT_MAX / 16 || S->nt > INT_MAX / 16 || S->ne > INT_MAX / 16)) {
        io->bad = 1;
        return;
    }
    pbd__io_array(io, w, (void **)&S->npt, S->nv, 1);
    pbd__io_array(io, w, (void **)&S->pt, (long)S->nv * PBD__SC_PT, sizeof(pbd__sc_pt));
    pbd__io_array(io, w, (void **)&S->nee, S->ne, 1);
    pbd__io_array(io, w, (void **)&S->ee, (long)S->ne * PBD__SC_EE, sizeof(pbd__sc_ee));
    if (io->in) S->ec = (S->ne + PBD__SC_K - 1) / PBD__SC_K;
    pbd__io_array(io, w, (void **)&S->eord, (long)S->ec * PBD__SC_K, sizeof(int));
}

/* --- per step and substep ------------------------------------------------------ */

/* The candidates (with the sides that pairs keep) saved at the start of a
   step (back = 0) and put back (back = 1) when the step is rolled back. */
static void pbd__selfcol_keep_step(pbd_world *w, int back) {
    pbd__selfcol *S = w->selfcol;
    size_t nv = (size_t)S->nv, ne = (size_t)S->ne, ne_ord = (size_t)S->ec * PBD__SC_K;
#define PBD__SC_KEEP(a, b, n) \
    memcpy(back ? (void *)(a) : (void *)(b), back ? (const void *)(b) : (const void *)(a), (n) * sizeof *(a))
    PBD__SC_KEEP(S->pt, S->pt_step, nv * PBD__SC_PT);
    PBD__SC_KEEP(S->npt, S->npt_step, nv);
    PBD__SC_KEEP(S->ee, S->ee_step, ne * PBD__SC_EE);
    PBD__SC_KEEP(S->nee, S->nee_step, ne);
    PBD__SC_KEEP(S->eord, S->eord_step, ne_ord);
#undef PBD__SC_KEEP
}

/* The sides of the constraints come from the positions at the start of the step. */
static inline PBD_HD void pbd__sc_begin_one(const pbd_world *w, pbd__selfcol *S, int i) {
    pbd__st(S->x0 + 3 * i, pbd__p3(w->x[S->vp[i]]));
}
static void pbd__selfcol_begin_step(pbd_world *w) {
    pbd__selfcol *S = w->selfcol;
    for (int i = 0; i < S->nv; ++i) pbd__sc_begin_one(w, S, i);
}

static inline PBD_HD void pbd__box_init(float *b, pbd__v3 p) {
    b[0] = b[3] = p.x;
    b[1] = b[4] = p.y;
    b[2] = b[5] = p.z;
}
static inline PBD_HD void pbd__box_add(float *b, pbd__v3 p) {
    float q[3] = {p.x, p.y, p.z};
    for (int k = 0; k < 3; ++k) {
        b[k] = q[k] < b[k] ? q[k] : b[k];
        b[3 + k] = q[k] > b[3 + k] ? q[k] : b[3 + k];
    }
}
static inline PBD_HD int pbd__box_overlap(const float *a, const float *b) {
    return a[0] <= b[3] && b[0] <= a[3] && a[1] <= b[4] && b[1] <= a[4] && a[2] <= b[5] && b[2] <= a[5];
}
/* Barycentric coordinates of the projection of q on the plane of abc. */
static PBD_HD int pbd__barycentric(pbd__v3 q, pbd__v3 a, pbd__v3 b, pbd__v3 c, float *u) {
    pbd__v3 e0 = pbd__sub(b, a), e1 = pbd__sub(c, a), d = pbd__sub(q, a);
    float d00 = pbd__dot(e0, e0), d01 = pbd__dot(e0, e1), d11 = pbd__dot(e1, e1), d20 = pbd__dot(d, e0),
          d21 = pbd__dot(d, e1);
    float den = d00 * d11 - d01 * d01;
    if (!(den > PBD__DENOM_MIN)) return 0;
    u[1] = (d11 * d20 - d01 * d21) / den;
    u[2] = (d00 * d21 - d01 * d20) / den;
    u[0] = 1.0f - u[1] - u[2];
    return 1;
}

/* Closest points of segments p1 q1 and p2 q2 (Ericson 5.1.9): parameters. */
static PBD_HD void pbd__segment_closest(pbd__v3 p1, pbd__v3 q1, pbd__v3 p2, pbd__v3 q2, float *s, float *t) {
    pbd__v3 d1 = pbd__sub(q1, p1), d2 = pbd__sub(q2, p2), r = pbd__sub(p1, p2);
    float a = pbd__dot(d1, d1), e = pbd__dot(d2, d2), f = pbd__dot(d2, r);
    float c = pbd__dot(d1, r), b = pbd__dot(d1, d2), den = a * e - b * b;
    if (!(a > PBD__EDGE_LEN2_MIN) || !(e > PBD__EDGE_LEN2_MIN)) {
        *s = *t = 0;
        return;
    } /* a collapsed edge: no edge contact */
    float S = den > PBD__PARALLEL_SIN2 * a * e ? pbd__clampf((b * f - c * e) / den, 0.0f, 1.0f) : 0.0f;
    float T = (b * S + f) / e;
    if (T < 0) {
        T = 0;
        S = pbd__clampf(-c / a, 0.0f, 1.0f);
    } else if (T > 1) {
        T = 1;
        S = pbd__clampf((b - c) / a, 0.0f, 1.0f);
    }
    *s = S;
    *t = T;
}

static inline PBD_HD pbd__v3 pbd__sc_x(const pbd_world *w, const pbd__selfcol *S, int v) {
    return pbd__p3(w->x[S->vp[v]]);
}
static inline PBD_HD pbd__v3 pbd__sc_x0(const pbd__selfcol *S, int v) { return pbd__ld(S->x0 + 3 * v); }
static inline PBD_HD float pbd__sc_travel(const pbd_world *w, const pbd__selfcol *S, int v) {
    (void)w;
    return S->reach[v];
}
static inline PBD_HD float pbd__sc_thickness(const pbd_world *w, int sa, int sb) {
    float a = w->surfaces[sa].thickness, b = w->surfaces[sb].thickness;
    return a > b ? a : b;
}
static inline PBD_HD int pbd__sc_pair_ok(const pbd_world *w, int sa, int sb) {
    return sa != sb || w->surfaces[sa].self;
}

/* Keeps the k nearest candidates, sorted by distance, ties by the index
   `id` of the other item: the kept set and its order do not depend on the
   order in which candidates are found (clusters, threads). */
#define PBD__SC_INSERT(arr, cnt, K, item, id)                                                           \
    do {                                                                                                \
        int pos_ = (cnt) < (K) ? (cnt) : (K);                                                           \
        while (pos_ > 0 && ((arr)[pos_ - 1].dist > (item).dist ||                                       \
                            ((arr)[pos_ - 1].dist == (item).dist && (arr)[pos_ - 1].id > (item).id))) { \
            if (pos_ < (K)) (arr)[pos_] = (arr)[pos_ - 1];                                              \
            --pos_;                                                                                     \
        }                                                                                               \
        if (pos_ < (K)) {                                                                               \
            (arr)[pos_] = (item);                                                                       \
            if ((cnt) < (K)) (cnt)++;                                                                   \
        }                                                                                               \
    } while (0)

/* Whether vertices u and v of the surfaces stood at one point at the
   start of the step: a vertex torn in two (pbd_world_tear: the copy
   starts where the original is) or a seam a mesh did not weld. Such a
   vertex against a triangle on the other (distance 0, no side) was
   found crossing every substep, and the fail-safe stopped the torn cloth
   in mid-air for good; they are neighbours, as a vertex and its own
   triangles are, until they part. */
static inline PBD_HD int pbd__sc_twins(const pbd__selfcol *S, int u, int v) {
    const float *a = S->x0 + 3 * u, *b = S->x0 + 3 * v;
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

/* The exact test of vertex i (at xi, reach tv) against triangle t: a
   candidate when it is within PBD__SC_PT_GAP thicknesses plus the reach of
   both, with the side it keeps (survey 3.4.3). prev: i's candidates of the
   last substep. */
static PBD_HD void pbd__sc_try_pt(const pbd_world *w, const pbd__selfcol *S, int i, int t, pbd__v3 xi, float tv,
                                  const pbd__sc_pt *prev, int nprev, pbd__sc_pt *slots, int *count) {
    const int *tv3 = S->tv + 3 * t;
    if (tv3[0] == i || tv3[1] == i || tv3[2] == i || !pbd__sc_pair_ok(w, S->vs[i], S->ts[t])) return;
    if (pbd__sc_twins(S, i, tv3[0]) || pbd__sc_twins(S, i, tv3[1]) || pbd__sc_twins(S, i, tv3[2])) return;
    pbd__v3 a = pbd__sc_x(w, S, tv3[0]), b = pbd__sc_x(w, S, tv3[1]), c = pbd__sc_x(w, S, tv3[2]);
    int f;
    float d = pbd__len(pbd__sub(xi, pbd__closest_on_triangle(xi, a, b, c, &f)));
    float tt = pbd__sc_travel(w, S, tv3[0]);
    for (int j = 1; j < 3; ++j) {
        float q = pbd__sc_travel(w, S, tv3[j]);
        tt = q > tt ? q : tt;
    }
    float th = pbd__sc_thickness(w, S->vs[i], S->ts[t]);
    if (!(d <= PBD__SC_PT_GAP * th + tv + tt)) return;
    /* the side. While the vertex is over the triangle (within a thickness
       of it, as in the projection) it keeps the side it had, so that a
       vertex the solver could not hold is brought back; a new pair takes
       it from the start of the step where the vertex was over the triangle
       then; a vertex beside the triangle takes the side it is on (it may
       pass around an edge) */
    pbd__v3 nx = pbd__cross(pbd__sub(b, a), pbd__sub(c, a));
    float nl = pbd__len(nx), side = 0;
    if (!(nl > PBD__NORMAL_LEN_MIN)) return;
    float dn = pbd__dot(pbd__sub(xi, a), nx) / nl;
    int over = d * d - dn * dn <= th * th;
    for (int j = 0; over && j < nprev; ++j)
        if (prev[j].tri == t) side = prev[j].side;
    pbd__v3 a0 = pbd__sc_x0(S, tv3[0]), b0 = pbd__sc_x0(S, tv3[1]), c0 = pbd__sc_x0(S, tv3[2]), q0 = pbd__sc_x0(S, i);
    float u[3];
    if (side != 0) {
    } else if (over && pbd__barycentric(q0, a0, b0, c0, u) && u[0] > -PBD__SC_OVER_SLACK &&
               u[1] > -PBD__SC_OVER_SLACK && u[2] > -PBD__SC_OVER_SLACK)
        side = pbd__dot(pbd__sub(q0, a0), pbd__cross(pbd__sub(b0, a0), pbd__sub(c0, a0)));
    else side = dn;
    pbd__sc_pt item;
    item.tri = t;
    item.side = side < 0 ? -1.0f : 1.0f;
    item.dist = d;
    item.lambda = 0;
    PBD__SC_INSERT(slots, *count, PBD__SC_PT, item, tri);
}

/* The exact test of edge e against edge f (f after e in eord): a candidate when their
   closest points are inner points of both and within PBD__SC_EE_GAP
   thicknesses plus the reach of both. */
static PBD_HD void pbd__sc_try_ee(const pbd_world *w, const pbd__selfcol *S, int e, int f, const pbd__sc_ee *prev,
                                  int nprev, pbd__sc_ee *slots, int *count) {
    int a0 = S->ev[2 * e], a1 = S->ev[2 * e + 1], b0 = S->ev[2 * f], b1 = S->ev[2 * f + 1];
    if (b0 == a0 || b0 == a1 || b1 == a0 || b1 == a1 || !pbd__sc_pair_ok(w, S->es[e], S->es[f])) return;
    if (pbd__sc_twins(S, a0, b0) || pbd__sc_twins(S, a0, b1) || pbd__sc_twins(S, a1, b0) || pbd__sc_twins(S, a1, b1))
        return;
    pbd__v3 A0 = pbd__sc_x(w, S, a0), A1 = pbd__sc_x(w, S, a1), B0 = pbd__sc_x(w, S, b0), B1 = pbd__sc_x(w, S, b1);
    float s, t;
    pbd__segment_closest(A0, A1, B0, B1, &s, &t);
    /* closest points at an end are vertex contacts, which the
       point-triangle constraints of the neighbours handle */
    if (s <= PBD__SC_EE_END || s >= 1 - PBD__SC_EE_END || t <= PBD__SC_EE_END || t >= 1 - PBD__SC_EE_END) return;
    pbd__v3 d = pbd__sub(pbd__lerp(A0, A1, s), pbd__lerp(B0, B1, t));
    float dist = pbd__len(d);
    float tr = pbd__sc_travel(w, S, a0), q;
    q = pbd__sc_travel(w, S, a1);
    tr = q > tr ? q : tr;
    float tr2 = pbd__sc_travel(w, S, b0);
    q = pbd__sc_travel(w, S, b1);
    tr2 = q > tr2 ? q : tr2;
    float th = pbd__sc_thickness(w, S->es[e], S->es[f]);
    if (!(dist <= PBD__SC_EE_GAP * th + tr + tr2)) return;
    /* the separating direction at the start of the step */
    pbd__v3 d0 = pbd__sub(pbd__lerp(pbd__sc_x0(S, a0), pbd__sc_x0(S, a1), s),
                          pbd__lerp(pbd__sc_x0(S, b0), pbd__sc_x0(S, b1), t));
    float l0 = pbd__len(d0);
    pbd__sc_ee item;
    int kept = -1;
    for (int j = 0; j < nprev; ++j)
        if (prev[j].edge == f) kept = j;
    if (kept >= 0) item.n = prev[kept].n; /* kept while the pair stays a candidate */
    else if (l0 > PBD__SC_EE_DIR_MIN) item.n = pbd__mul(d0, 1.0f / l0);
    else if (dist > PBD__SC_EE_DIR_MIN) item.n = pbd__mul(d, 1.0f / dist);
    else return;
    item.edge = f;
    item.lambda = 0;
    item.s = s;
    item.t = t;
    item.dist = dist;
    PBD__SC_INSERT(slots, *count, PBD__SC_EE, item, edge);
}

/* --- broad phase ----------------------------------------------------------------
   Clusters against clusters, then members against the members of a
   cluster as lanes. Each kind is grouped in clusters of PBD__SC_K items
   close in space (pbd__sc_clusters). Every substep each triangle gets its
   box padded by PBD__SC_PT_GAP thicknesses and its reach, each edge by
   half the edge gap and its reach, each vertex by its reach; a cluster's
   box holds its members'. A pair can be a candidate only if these boxes
   overlap (on every axis the gap between the boxes is at most the
   distance). The shared hash grid holds the centres of the triangle (edge)
   clusters, with cells as large as the largest cluster box, so a cluster
   box that meets a query box has its centre within half a cell of it. A
   vertex cluster walks the triangle clusters of its grid cells, tests
   their boxes, then each of its vertices against the cluster's box and
   against its PBD__SC_K triangle boxes at once (pbd__sc_lanes), and only
   the survivors get the exact test; edges likewise. A cluster owns the
   candidate slots of its members, so threads never share one, and the
   kept candidates do not depend on the order of the search
   (PBD__SC_INSERT). */

static inline PBD_HD unsigned pbd__sc_lanes(const float *L, const float *b) {
    enum { K = PBD__SC_K };
    unsigned m = 0;
#if PBD__W > 1
    /* W lanes at a time, the same comparisons */
    pbd__vf lo[3], hi[3];
    for (int k = 0; k < 3; ++k) {
        lo[k] = pbd__vset1(b[k]);
        hi[k] = pbd__vset1(b[3 + k]);
    }
    for (int j = 0; j < K; j += PBD__W) {
        pbd__vm in = pbd__vand_m(pbd__vle(lo[0], pbd__vload(L + 3 * K + j)), pbd__vle(pbd__vload(L + j), hi[0]));
        for (int k = 1; k < 3; ++k)
            in = pbd__vand_m(in, pbd__vand_m(pbd__vle(lo[k], pbd__vload(L + (3 + k) * K + j)),
                                             pbd__vle(pbd__vload(L + k * K + j), hi[k])));
        m |= pbd__vbits(in) << j;
    }
    return m;
#endif
    for (int j = 0; j < K; ++j)
        m |= (unsigned)((b[0] <= L[3 * K + j]) & (b[3] >= L[j]) & (b[1] <= L[4 * K + j]) & (b[4] >= L[K + j]) &
                        (b[2] <= L[5 * K + j]) & (b[5] >= L[2 * K + j]))
             << j;
    return m;
}

/* The lanes j < W of V whose value is not a, as bits. */
static inline PBD_HD unsigned pbd__sc_ne_bits(const int *V, int a) {
#if PBD__W == 16
    return ~(unsigned)simde_mm512_cmpeq_epi32_mask(simde_mm512_loadu_si512(V), simde_mm512_set1_epi32(a)) & 0xffffu;
#elif PBD__W == 8
    simde__m256i eq =
        simde_mm256_cmpeq_epi32(simde_mm256_loadu_si256((const simde__m256i *)V), simde_mm256_set1_epi32(a));
    return ~(unsigned)simde_mm256_movemask_ps(simde_mm256_castsi256_ps(eq)) & 0xffu;
#elif PBD__W == 4
    simde__m128i eq = simde_mm_cmpeq_epi32(simde_mm_loadu_si128((const simde__m128i *)V), simde_mm_set1_epi32(a));
    return ~(unsigned)simde_mm_movemask_ps(simde_mm_castsi128_ps(eq)) & 0xfu;
#else
    return (unsigned)(V[0] != a);
#endif
}
/* The lanes j of a triangle cluster (vertex lanes V) that do not hold
   vertex i, and of an edge cluster (its first place, vertex lanes V) whose
   edge has a larger place than `place` and shares no vertex with a0 a1. */
static inline PBD_HD unsigned pbd__sc_lanes_pt(const int *V, int i) {
    enum { K = PBD__SC_K };
    unsigned m = 0;
    for (int j = 0; j < K; j += PBD__W)
        m |= (pbd__sc_ne_bits(V + j, i) & pbd__sc_ne_bits(V + K + j, i) & pbd__sc_ne_bits(V + 2 * K + j, i)) << j;
    return m;
}
static inline PBD_HD unsigned pbd__sc_lanes_ee(int first, const int *V, int place, int a0, int a1) {
    enum { K = PBD__SC_K };
    int d = place - first; /* the lanes j > d */
    unsigned m = 0, after = d < 0 ? ~0u : (d >= K - 1 ? 0u : ~0u << (d + 1));
    for (int j = 0; j < K && (after >> j); j += PBD__W)
        m |= (pbd__sc_ne_bits(V + j, a0) & pbd__sc_ne_bits(V + j, a1) & pbd__sc_ne_bits(V + K + j, a0) &
              pbd__sc_ne_bits(V + K + j, a1))
             << j;
    return m & after;
}
/* The inner-point test of the edge pairs without divisions (they would
   be most of its cost): s = ns / den and t = (b s + f) / e lie in
   (PBD__SC_EE_END, 1 - PBD__SC_EE_END) when ns and nt = b ns + f den lie in the same interval
   times den and den e (both positive here). The interval is widened by
   PBD__SC_INNER_SLACK, and nt's by PBD__SC_INNER_REL of the size of its
   terms (t cancels when an edge is short next to the distance), far more
   than the rounding of either form, so that this cannot reject a pair
   that pbd__sc_try_ee, which decides with pbd__segment_closest, keeps. */
#if PBD__W > 1
/* pbd__sc_lanes_inner for the W lanes L[..] of an edge cluster's rows
   (row k at L + k * PBD__SC_K), in the same operations as its scalar loop. */
static inline unsigned pbd__sc_vlanes_inner(float p0, float p1, float p2, float d0, float d1, float d2, float a,
                                            const float *L) {
    enum { K = PBD__SC_K };
    pbd__vf r0 = pbd__vsub(pbd__vset1(p0), pbd__vload(L + 6 * K)),
            r1 = pbd__vsub(pbd__vset1(p1), pbd__vload(L + 7 * K));
    pbd__vf r2 = pbd__vsub(pbd__vset1(p2), pbd__vload(L + 8 * K));
    pbd__vf e0 = pbd__vload(L + 12 * K), e1 = pbd__vload(L + 13 * K), e2 = pbd__vload(L + 14 * K),
            e = pbd__vload(L + 15 * K);
    pbd__vf D0 = pbd__vset1(d0), D1 = pbd__vset1(d1), D2 = pbd__vset1(d2), A = pbd__vset1(a);
    pbd__vf f = pbd__vadd(pbd__vadd(pbd__vmul(e0, r0), pbd__vmul(e1, r1)), pbd__vmul(e2, r2));
    pbd__vf c = pbd__vadd(pbd__vadd(pbd__vmul(D0, r0), pbd__vmul(D1, r1)), pbd__vmul(D2, r2));
    pbd__vf b = pbd__vadd(pbd__vadd(pbd__vmul(D0, e0), pbd__vmul(D1, e1)), pbd__vmul(D2, e2));
    pbd__vf den = pbd__vsub(pbd__vmul(A, e), pbd__vmul(b, b));
    pbd__vm ok = pbd__vand_m(pbd__vlt(pbd__vset1(PBD__EDGE_LEN2_MIN), A), pbd__vlt(pbd__vset1(PBD__EDGE_LEN2_MIN), e));
    ok = pbd__vand_m(ok, pbd__vlt(pbd__vmul(pbd__vmul(pbd__vset1(PBD__PARALLEL_SIN2), A), e), den));
    pbd__vf ns = pbd__vsub(pbd__vmul(b, f), pbd__vmul(c, e)), bn = pbd__vmul(b, ns), fd = pbd__vmul(f, den),
            nt = pbd__vadd(bn, fd);
    pbd__vf de = pbd__vmul(den, e), lo = pbd__vset1(PBD__SC_EE_END - PBD__SC_INNER_SLACK),
            hi = pbd__vset1(1 - PBD__SC_EE_END + PBD__SC_INNER_SLACK);
    pbd__vf tol = pbd__vmul(pbd__vset1(PBD__SC_INNER_REL), pbd__vadd(pbd__vabs(bn), pbd__vabs(fd)));
    ok = pbd__vand_m(ok, pbd__vand_m(pbd__vlt(pbd__vmul(lo, den), ns), pbd__vlt(ns, pbd__vmul(hi, den))));
    ok = pbd__vand_m(ok, pbd__vand_m(pbd__vlt(pbd__vsub(pbd__vmul(lo, de), tol), nt),
                                     pbd__vlt(nt, pbd__vadd(pbd__vmul(hi, de), tol))));
    return pbd__vbits(ok);
}
#endif
/* The lanes j of mask m of edge cluster L whose segment may have its
   closest points to segment l of the edge lanes P inner points of both:
   the test of pbd__segment_closest without its divisions, a little
   wider, W lanes at a time, skipping the W that m leaves out
   (pbd__sc_try_ee makes it again, exactly). */
static inline PBD_HD unsigned pbd__sc_lanes_inner(const float *P, int l, const float *L, unsigned m0) {
    enum { K = PBD__SC_K };
    float p0 = P[6 * K + l], p1 = P[7 * K + l], p2 = P[8 * K + l];
    float d0 = P[12 * K + l], d1 = P[13 * K + l], d2 = P[14 * K + l], a = P[15 * K + l];
    unsigned m = 0;
#if PBD__W > 1
    for (int j = 0; j < K; j += PBD__W)
        if ((m0 >> j) & ((1u << PBD__W) - 1)) m |= pbd__sc_vlanes_inner(p0, p1, p2, d0, d1, d2, a, L + j) << j;
    return m & m0;
#endif
    for (int j = 0; j < K; ++j) {
        float r0 = p0 - L[6 * K + j], r1 = p1 - L[7 * K + j], r2 = p2 - L[8 * K + j];
        float e0 = L[12 * K + j], e1 = L[13 * K + j], e2 = L[14 * K + j], e = L[15 * K + j];
        float f = e0 * r0 + e1 * r1 + e2 * r2, c = d0 * r0 + d1 * r1 + d2 * r2, b = d0 * e0 + d1 * e1 + d2 * e2;
        float den = a * e - b * b;
        int ok = (a > PBD__EDGE_LEN2_MIN) & (e > PBD__EDGE_LEN2_MIN) & (den > PBD__PARALLEL_SIN2 * a * e);
        float ns = b * f - c * e, bn = b * ns, fd = f * den, nt = bn + fd, de = den * e;
        float lo = PBD__SC_EE_END - PBD__SC_INNER_SLACK, hi = 1 - PBD__SC_EE_END + PBD__SC_INNER_SLACK,
              tol = PBD__SC_INNER_REL * (fabsf(bn) + fabsf(fd));
        m |= (unsigned)(ok & (ns > lo * den) & (ns < hi * den) & (nt > lo * de - tol) & (nt < hi * de + tol)) << j;
    }
    return m & m0;
}

/* The smallest (largest, with hi) of a row of PBD__SC_K lanes; min and max
   are exact, so any order of the comparisons gives the same value. */
static inline PBD_HD float pbd__sc_row_extreme(const float *row, int hi) {
    enum { K = PBD__SC_K };
    float t[PBD__W], m;
#if PBD__W > 1
    pbd__vf v = pbd__vload(row);
    for (int j = PBD__W; j < K; j += PBD__W)
        v = hi ? pbd__vmax(pbd__vload(row + j), v) : pbd__vmin(pbd__vload(row + j), v);
    pbd__vstore(t, v);
#else
    memcpy(t, row, sizeof t);
    for (int j = 1; j < K; ++j) t[0] = hi ? (row[j] > t[0] ? row[j] : t[0]) : (row[j] < t[0] ? row[j] : t[0]);
#endif
    m = t[0];
    for (int l = 1; l < PBD__W; ++l) m = hi ? (t[l] > m ? t[l] : m) : (t[l] < m ? t[l] : m);
    return m;
}

/* The member boxes of one cluster as lanes (rows of PBD__SC_K: lo x y z,
   hi x y z, and for edges the two positions, the vector between them and
   its squared length); V: its vertex rows, -1 past the end, whose lanes
   get a box nothing overlaps. W members at a time, gathered from S->xv;
   the scalar path below does the same operations. */
static PBD_HD void pbd__sc_bound_lanes(const pbd__selfcol *S, const int *V, int per, float pad, float *L) {
    enum { K = PBD__SC_K };
    int rows = per == 2 ? 16 : 6;
#if PBD__W > 1
    for (int l0 = 0; l0 < K; l0 += PBD__W) {
        pbd__vf lo[3], hi[3], r = pbd__vset1(0.0f), x[2][3];
        float live[PBD__W];
        for (int k = 0; k < 6; ++k) x[k / 3][k % 3] = r; /* (set for triangles too: gcc cannot tell) */
        for (int j = 0; j < per; ++j) {
            int ids[PBD__W];
            for (int l = 0; l < PBD__W; ++l) ids[l] = V[j * K + l0 + l] < 0 ? 0 : V[j * K + l0 + l];
            pbd__vp q = pbd__vgather(S->xv, ids);
            pbd__vf qs[3] = {q.x, q.y, q.z};
            for (int k = 0; k < 3; ++k) {
                lo[k] = j == 0 ? qs[k] : pbd__vmin(qs[k], lo[k]);
                hi[k] = j == 0 ? qs[k] : pbd__vmax(qs[k], hi[k]);
                if (j < 2) x[j][k] = qs[k];
            }
            r = pbd__vmax(q.w, r);
        }
        for (int l = 0; l < PBD__W; ++l) live[l] = V[l0 + l] < 0 ? 0.0f : 1.0f;
        pbd__vm dead = pbd__vlt(pbd__vload(live), pbd__vset1(0.5f));
        pbd__vf pr = pbd__vadd(pbd__vset1(pad), r), zero = pbd__vset1(0.0f);
        for (int k = 0; k < 3; ++k) {
            pbd__vstore(L + k * K + l0, pbd__vsel(dead, pbd__vsub(lo[k], pr), pbd__vset1(FLT_MAX)));
            pbd__vstore(L + (3 + k) * K + l0, pbd__vsel(dead, pbd__vadd(hi[k], pr), pbd__vset1(-FLT_MAX)));
        }
        if (rows == 16) {
            pbd__vf d2 = zero;
            for (int k = 0; k < 3; ++k) {
                pbd__vf d = pbd__vsub(x[1][k], x[0][k]);
                pbd__vstore(L + (6 + k) * K + l0, pbd__vsel(dead, x[0][k], zero));
                pbd__vstore(L + (9 + k) * K + l0, pbd__vsel(dead, x[1][k], zero));
                pbd__vstore(L + (12 + k) * K + l0, pbd__vsel(dead, d, zero));
                d2 = k == 0 ? pbd__vmul(d, d) : pbd__vadd(d2, pbd__vmul(d, d));
            }
            pbd__vstore(L + 15 * K + l0, pbd__vsel(dead, d2, zero));
        }
    }
#else
    for (int l = 0; l < K; ++l) {
        if (V[l] < 0) { /* past the end: a box nothing overlaps */
            for (int k = 0; k < 3; ++k) {
                L[k * K + l] = FLT_MAX;
                L[(3 + k) * K + l] = -FLT_MAX;
            }
            for (int k = 6; k < rows; ++k) L[k * K + l] = 0;
            continue;
        }
        float b[6], r = 0;
        for (int j = 0; j < per; ++j) {
            pbd__p4 q = S->xv[V[j * K + l]];
            if (j == 0) pbd__box_init(b, pbd__p3(q));
            else pbd__box_add(b, pbd__p3(q));
            r = q.w > r ? q.w : r;
            if (rows == 16) {
                L[(6 + 3 * j) * K + l] = q.x;
                L[(7 + 3 * j) * K + l] = q.y;
                L[(8 + 3 * j) * K + l] = q.z;
            }
        }
        for (int k = 0; k < 3; ++k) {
            L[k * K + l] = b[k] - (pad + r);
            L[(3 + k) * K + l] = b[3 + k] + (pad + r);
        }
        if (rows == 16) {
            float d[3];
            for (int k = 0; k < 3; ++k) d[k] = L[(9 + k) * K + l] - L[(6 + k) * K + l];
            for (int k = 0; k < 3; ++k) L[(12 + k) * K + l] = d[k];
            L[15 * K + l] = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        }
    }
#endif
}

/* The padded boxes of cluster c of triangles or edges (`per` vertices
   each, their vertices in the lane rows lv: S->tlv or S->elv): the lanes,
   the cluster box and its centre. */
static PBD_HD void pbd__sc_bound(const pbd__selfcol *S, int c, const int *lv, int per, float pad, float *lanes,
                                 float *box, float *cent) {
    enum { K = PBD__SC_K };
    int rows = per == 2 ? 16 : 6;
    float *L = lanes + (size_t)rows * K * c, *cb = box + 6 * (size_t)c;
    pbd__sc_bound_lanes(S, lv + (size_t)per * K * c, per, pad, L);
    for (int k = 0; k < 6; ++k) cb[k] = pbd__sc_row_extreme(L + k * K, k >= 3);
    for (int k = 0; k < 3; ++k) cent[3 * (size_t)c + k] = 0.5f * (cb[k] + cb[3 + k]);
}
/* The buckets of grid g (cells of `cell`) whose cluster boxes may meet box b. */
static PBD_HD int pbd__sc_buckets(const pbd__grid *g, const float *b, float cell, int *out, int max) {
    float hc = 0.5f * cell;
    return pbd__grid_buckets(g, pbd__v(b[0] - hc, b[1] - hc, b[2] - hc), pbd__v(b[3] + hc, b[4] + hc, b[5] + hc), out,
                             max);
}

/* Point-triangle candidates of the vertices of vertex cluster c. */
static PBD_HD void pbd__sc_vertex_cluster(const pbd_world *w, pbd__selfcol *S, int c) {
    enum { K = PBD__SC_K };
    pbd__sc_pt prev[K][PBD__SC_PT];
    int ids[K], nprev[K], count[K], n = 0;
    float vb[K][6], VL[6 * K]; /* the vertices' boxes, also as lanes (a past-the-end lane overlaps nothing) */
    pbd__v3 xs[K];
    for (int l = 0; l < K; ++l) {
        int i = S->vord[c * K + l];
        for (int k = 0; k < 3; ++k) {
            VL[k * K + l] = FLT_MAX;
            VL[(3 + k) * K + l] = -FLT_MAX;
        }
        if (i < 0) continue;
        ids[n] = i;
        nprev[n] = S->npt[i];
        count[n] = 0;
        memcpy(prev[n], S->pt + (size_t)i * PBD__SC_PT, sizeof(pbd__sc_pt) * (size_t)nprev[n]);
        xs[n] = pbd__sc_x(w, S, i);
        float r = S->reach[i];
        pbd__box_init(vb[n], pbd__sub(xs[n], pbd__v(r, r, r)));
        pbd__box_add(vb[n], pbd__add(xs[n], pbd__v(r, r, r)));
        for (int k = 0; k < 6; ++k) VL[k * K + l] = vb[n][k];
        n++;
    }
    const float *cb = S->vbox + 6 * (size_t)c;
    int buckets[64], nb = pbd__sc_buckets(&S->gt, cb, S->cellt, buckets, 64), all = nb < 0;
    if (all) nb = S->gt.mask + 1;
    for (int bi = 0; bi < nb; ++bi) {
        int h = all ? bi : buckets[bi];
        for (int k = S->gt.start[h]; k < S->gt.start[h + 1]; ++k) {
            int tc = S->gt.sorted[k];
            const float *tb = S->tbox + 6 * (size_t)tc, *L = S->tlane + (size_t)6 * K * tc;
            if (!pbd__box_overlap(cb, tb)) continue;
            for (unsigned near = pbd__sc_lanes(VL, tb); near; near &= near - 1) {
                int l = pbd__lowest_bit(near); /* the members of a vertex cluster are its first lanes */
                unsigned m = pbd__sc_lanes(L, vb[l]);
                if (m) m &= pbd__sc_lanes_pt(S->tlv + (size_t)3 * K * tc, ids[l]);
                for (; m; m &= m - 1)
                    pbd__sc_try_pt(w, S, ids[l], S->tord[tc * K + pbd__lowest_bit(m)], xs[l], S->reach[ids[l]], prev[l],
                                   nprev[l], S->pt + (size_t)ids[l] * PBD__SC_PT, &count[l]);
            }
        }
    }
    for (int l = 0; l < n; ++l) {
        int i = ids[l];
        S->npt[i] = (unsigned char)count[l];
        for (int k = 0; k < count[l]; ++k) {
            const pbd__sc_pt *c = &S->pt[(size_t)i * PBD__SC_PT + k];
            const int *tv = S->tv + 3 * c->tri;
            int flip = c->side < 0; /* from below: the reversed winding */
            pbd__sc_q *q = &S->ptq[(size_t)i * PBD__SC_PT + k];
            q->p[0] = S->vp[i];
            q->p[1] = S->vp[tv[0]];
            q->p[2] = S->vp[tv[flip ? 2 : 1]];
            q->p[3] = S->vp[tv[flip ? 1 : 2]];
            q->th = pbd__sc_thickness(w, S->vs[i], S->ts[c->tri]);
        }
    }
}

/* Edge-edge candidates of the edges of edge cluster c (each against the
   edges of a larger place in eord: those of this cluster and of the
   clusters after it, so each pair is tested once). */
static PBD_HD void pbd__sc_edge_cluster(const pbd_world *w, pbd__selfcol *S, int c) {
    enum { K = PBD__SC_K };
    pbd__sc_ee prev[K][PBD__SC_EE];
    int ids[K], lane[K], nprev[K], count[K], n = 0;
    float eb[K][6];
    const float *E = S->elane + (size_t)16 * K * c;
    for (int l = 0; l < K; ++l) {
        int e = S->eord[c * K + l];
        if (e < 0) break;
        ids[n] = e;
        lane[n] = l;
        nprev[n] = S->nee[e];
        count[n] = 0;
        memcpy(prev[n], S->ee + (size_t)e * PBD__SC_EE, sizeof(pbd__sc_ee) * (size_t)nprev[n]);
        for (int k = 0; k < 6; ++k) eb[n][k] = E[k * K + l];
        n++;
    }
    const float *cb = S->ebox + 6 * (size_t)c;
    int buckets[64], nb = pbd__sc_buckets(&S->ge, cb, S->celle, buckets, 64), all = nb < 0;
    if (all) nb = S->ge.mask + 1;
    for (int bi = 0; bi < nb; ++bi) {
        int h = all ? bi : buckets[bi];
        for (int k = S->ge.start[h]; k < S->ge.start[h + 1]; ++k) {
            int fc = S->ge.sorted[k];
            if (fc < c) continue; /* the pairs with a cluster before this one belong to that one */
            const float *fb = S->ebox + 6 * (size_t)fc, *L = S->elane + (size_t)16 * K * fc;
            if (!pbd__box_overlap(cb, fb)) continue;
            for (unsigned near = pbd__sc_lanes(E, fb); near; near &= near - 1) {
                int l = pbd__lowest_bit(near); /* lane l holds member l (past the end: a box nothing overlaps) */
                unsigned m = pbd__sc_lanes(L, eb[l]);
                if (m)
                    m &= pbd__sc_lanes_ee(fc * K, S->elv + (size_t)2 * K * fc, c * K + lane[l], S->ev[2 * ids[l]],
                                          S->ev[2 * ids[l] + 1]);
                if (m) m = pbd__sc_lanes_inner(E, lane[l], L, m);
                for (; m; m &= m - 1)
                    pbd__sc_try_ee(w, S, ids[l], S->eord[fc * K + pbd__lowest_bit(m)], prev[l], nprev[l],
                                   S->ee + (size_t)ids[l] * PBD__SC_EE, &count[l]);
            }
        }
    }
    for (int l = 0; l < n; ++l) {
        int e = ids[l];
        S->nee[e] = (unsigned char)count[l];
        for (int k = 0; k < count[l]; ++k) {
            int f = S->ee[(size_t)e * PBD__SC_EE + k].edge;
            pbd__sc_q *q = &S->eeq[(size_t)e * PBD__SC_EE + k];
            q->p[0] = S->vp[S->ev[2 * e]];
            q->p[1] = S->vp[S->ev[2 * e + 1]];
            q->p[2] = S->vp[S->ev[2 * f]];
            q->p[3] = S->vp[S->ev[2 * f + 1]];
            q->th = pbd__sc_thickness(w, S->es[e], S->es[f]);
        }
    }
}

/* The largest edge of the cluster boxes: the cell of their grid. */
static PBD_HD float pbd__sc_cell(const float *box, int n) {
    float c = 0;
    for (int k = 0; k < n; ++k)
        for (int j = 0; j < 3; ++j) {
            float e = box[6 * (size_t)k + 3 + j] - box[6 * (size_t)k + j];
            c = e > c ? e : c;
        }
    return c * PBD__SC_CELL_GROW + PBD__SC_CELL_PAD;
}

/* The four vertices of candidate slot `id` (see pbd__selfcol). */
static PBD_HD void pbd__sc_slot_vertices(const pbd__selfcol *S, int id, int *v) {
    int npt = S->nv * PBD__SC_PT;
    if (id < npt) {
        const int *tv = S->tv + 3 * S->pt[id].tri;
        v[0] = id / PBD__SC_PT;
        v[1] = tv[0];
        v[2] = tv[1];
        v[3] = tv[2];
    } else {
        int e = (id - npt) / PBD__SC_EE, f = S->ee[id - npt].edge;
        v[0] = S->ev[2 * e];
        v[1] = S->ev[2 * e + 1];
        v[2] = S->ev[2 * f];
        v[3] = S->ev[2 * f + 1];
    }
}

/* Appends the slots of the candidates in counts[0..n) (n items of `per`
   slots each, slot ids from `first`) to cand, in order. Reads the counts
   8 at a time: most items have none. */
static PBD_HD int pbd__sc_list(const unsigned char *counts, int n, int per, int first, int *cand, int at) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, counts + i, 8);
        if (!word) continue;
        for (int j = i; j < i + 8; ++j)
            for (int k = 0; k < counts[j]; ++k) cand[at++] = first + j * per + k;
    }
    for (; i < n; ++i)
        for (int k = 0; k < counts[i]; ++k) cand[at++] = first + i * per + k;
    return at;
}

/* Colours this substep's candidates greedily (survey 3.8), so that the
   projection can share each colour between threads: no two candidates of
   a colour share a vertex (pinned ones included: a correction of 0 is
   still a write). The colour choice is the groups' (pbd__color_pick):
   what does not fit in PBD__MAX_COLORS - 1 colours goes to a serial
   overflow colour; unlike them, first fit (a bit scan) rather than
   balanced colours, and no allocation (the masks are S's): this runs
   every substep, and the balance only helps fill SIMD batches, which this
   projection does not use. The order is fixed (the point-triangle
   candidates by vertex and slot, then the edge-edge ones by edge and
   slot), so the colours, and with them the results, do not depend on the
   threads. Serial: its cost is linear in the candidates and small next
   to the projection's (bench/selfcollision). */
static PBD_HD void pbd__selfcol_color(pbd__selfcol *S) {
    const int last = PBD__MAX_COLORS - 1;
    int npt = S->nv * PBD__SC_PT;
    int n = pbd__sc_list(S->npt, S->nv, PBD__SC_PT, 0, S->cand, 0);
    n = pbd__sc_list(S->nee, S->ne, PBD__SC_EE, npt, S->cand, n);
    memset(S->cmask, 0, sizeof(uint64_t) * (size_t)S->nv);
    int counts[PBD__MAX_COLORS], opened = 0;
    memset(counts, 0, sizeof counts);
    for (int c = 0; c < n; ++c) {
        int v[4];
        pbd__sc_slot_vertices(S, S->cand[c], v);
        uint64_t used = S->cmask[v[0]] | S->cmask[v[1]] | S->cmask[v[2]] | S->cmask[v[3]];
        int col = pbd__color_pick(used, counts, &opened, 0);
        if (col < last)
            for (int j = 0; j < 4; ++j) S->cmask[v[j]] |= (uint64_t)1 << col;
        S->ccol[c] = (unsigned char)col;
        counts[col]++;
    }
    S->ncolors = pbd__color_starts(counts, opened, S->cstart, &S->overflow);
    int fill[PBD__MAX_COLORS + 1];
    memcpy(fill, S->cstart, sizeof(int) * (size_t)(S->ncolors + 1));
    for (int c = 0; c < n; ++c) S->corder[fill[S->ccol[c] == last ? opened : S->ccol[c]]++] = S->cand[c];
}

/* The steps of pbd__selfcol_detect for one element (the GPU runs them
   too): vertex i's speed limit and reach; a triangle (edge) cluster's
   bounds; a vertex cluster's box; the grids' cells. */
static inline PBD_HD void pbd__sc_limit_one(pbd_world *w, pbd__selfcol *S, int i, float h) {
    int q = S->vp[i];
    pbd__v3 x = pbd__p3(w->x[q]), d = pbd__sub(pbd__p3(w->p[q]), x);
    float l = pbd__len(d), lim = PBD__SC_SPEED * w->surfaces[S->vs[i]].thickness;
    /* pinned and kinematic particles move as told; the others at
       most lim, which the solver keeps too (pbd__selfcol_project) */
    S->reach[i] = w->x[q].w == 0 ? l : lim;
    if (w->x[q].w != 0 && l > lim) { /* the maximum speed: thickness per substep */
        d = pbd__mul(d, lim / l);
        w->p[q].x = x.x + d.x;
        w->p[q].y = x.y + d.y;
        w->p[q].z = x.z + d.z;
        w->v[q].x = d.x / h;
        w->v[q].y = d.y / h;
        w->v[q].z = d.z / h;
    }
    S->xv[i] = w->x[q]; /* the start of the substep and the reach, for the bounds */
    S->xv[i].w = S->reach[i];
}
static inline PBD_HD void pbd__sc_tbound(pbd__selfcol *S, int c) {
    pbd__sc_bound(S, c, S->tlv, 3, PBD__SC_PT_GAP * S->maxth, S->tlane, S->tbox, S->tcent);
}
static inline PBD_HD void pbd__sc_ebound(pbd__selfcol *S, int c) {
    pbd__sc_bound(S, c, S->elv, 2, 0.5f * PBD__SC_EE_GAP * S->maxth, S->elane, S->ebox, S->ecent);
}
static inline PBD_HD void pbd__sc_vbox(const pbd_world *w, pbd__selfcol *S, int c) {
    enum { K = PBD__SC_K };
    float *b = S->vbox + 6 * (size_t)c;
    for (int l = 0; l < K && S->vord[c * K + l] >= 0; ++l) {
        int i = S->vord[c * K + l];
        float r = S->reach[i];
        pbd__v3 x = pbd__sc_x(w, S, i);
        if (l == 0) pbd__box_init(b, x);
        pbd__box_add(b, pbd__sub(x, pbd__v(r, r, r)));
        pbd__box_add(b, pbd__add(x, pbd__v(r, r, r)));
    }
}
static inline PBD_HD void pbd__sc_cells(pbd__selfcol *S) {
    S->iter = 0;
    S->cellt = pbd__sc_cell(S->tbox, S->tc);
    S->celle = pbd__sc_cell(S->ebox, S->ec);
}

/* After the prediction: limit the motion, bound it, find the candidates. */
static void pbd__selfcol_detect(pbd_world *w, float h) {
    pbd__selfcol *S = w->selfcol;
    int nv = S->nv;
    PBD__PRAGMA(omp for schedule(static))
    for (int i = 0; i < nv; ++i) pbd__sc_limit_one(w, S, i, h);
    PBD__PRAGMA(omp for schedule(static))
    for (int c = 0; c < S->tc; ++c) pbd__sc_tbound(S, c);
    PBD__PRAGMA(omp for schedule(static))
    for (int c = 0; c < S->ec; ++c) pbd__sc_ebound(S, c);
    PBD__PRAGMA(omp for schedule(static))
    for (int c = 0; c < S->vc; ++c) pbd__sc_vbox(w, S, c);
    PBD__PRAGMA(omp single)
    pbd__sc_cells(S);
    pbd__grid_build(&S->gt, S->tcent, 3, NULL, S->tc, S->cellt);
    if (S->ec > 0) pbd__grid_build(&S->ge, S->ecent, 3, NULL, S->ec, S->celle);
    PBD__PRAGMA(omp for schedule(dynamic, 4))
    for (int c = 0; c < S->vc; ++c) pbd__sc_vertex_cluster(w, S, c);
    PBD__PRAGMA(omp for schedule(dynamic, 4))
    for (int c = 0; c < S->ec; ++c) pbd__sc_edge_cluster(w, S, c);
    PBD__PRAGMA(omp single)
    pbd__selfcol_color(S);
}

/* Moves particles ids[0..n) by w_i g_i dl, the PBD projection of survey 3.3
   for a rigid unilateral constraint C (skipped when C >= 0). */
static PBD_HD float pbd__sc_apply(pbd_world *w, const int *ids, const pbd__v3 *g, int n, float C) {
    if (C >= 0) return 0;
    float wg2 = 0;
    for (int k = 0; k < n; ++k) wg2 += w->p[ids[k]].w * pbd__dot(g[k], g[k]);
    if (!(wg2 > PBD__WG2_MIN)) return 0;
    float dl = -C / wg2, most = 0;
    /* a contact near an edge's end or a triangle's corner whose other
       particles are fixed would move the free one by C over a tiny weight:
       no particle moves further than |C| */
    for (int k = 0; k < n; ++k) {
        float m = w->p[ids[k]].w * pbd__len(g[k]) * dl;
        most = m > most ? m : most;
    }
    if (most > -C) dl *= -C / most;
    for (int k = 0; k < n; ++k) {
        pbd__p4 *P = &w->p[ids[k]];
        float s = P->w * dl;
        P->x += g[k].x * s;
        P->y += g[k].y * s;
        P->z += g[k].z * s;
    }
    return dl;
}

/* The maximum speed holds for the solved motion too: the groups may drag
   a vertex further than its prediction, beyond the reach of the
   candidates; the self-collision projection has the last word. */
static inline PBD_HD void pbd__sc_clamp_one(pbd_world *w, const pbd__selfcol *S, int i) {
    int q = S->vp[i];
    if (w->p[q].w == 0) return;
    pbd__v3 x = pbd__p3(w->x[q]), d = pbd__sub(pbd__p3(w->p[q]), x);
    float l = pbd__len(d), lim = PBD__SC_SPEED * w->surfaces[S->vs[i]].thickness;
    if (l > lim) {
        d = pbd__mul(d, lim / l);
        w->p[q].x = x.x + d.x;
        w->p[q].y = x.y + d.y;
        w->p[q].z = x.z + d.z;
    }
}
static void pbd__sc_clamp(pbd_world *w, const pbd__selfcol *S) {
    PBD__PRAGMA(omp for schedule(static))
    for (int i = 0; i < S->nv; ++i) pbd__sc_clamp_one(w, S, i);
}

/* The cubic of pbd__sc_crossed, ((b-a) x (c-a)) . (q-a), at time t in [0, 1]. */
static PBD_HD float pbd__sc_coplanar(const pbd__v3 *x, const pbd__v3 *y, float t) {
    pbd__v3 p[4];
    for (int j = 0; j < 4; ++j) p[j] = pbd__lerp(x[j], y[j], t);
    return pbd__dot(pbd__cross(pbd__sub(p[2], p[1]), pbd__sub(p[3], p[1])), pbd__sub(p[0], p[1]));
}
/* Whether vertex q passes through triangle abc (edges included) while the
   four move linearly from x[0..3] (q a b c) to y[0..3]: the times where
   they are coplanar are the roots of the cubic ((b-a) x (c-a)) . (q-a);
   the cubic is split at its critical points and each sign change is
   bisected, then the point is tested against the triangle there. */
static PBD_HD int pbd__sc_crossed(const pbd__v3 *x, const pbd__v3 *y) {
    /* the cubic's coefficients from four samples (exact for a cubic, up to rounding) */
    float f0 = pbd__sc_coplanar(x, y, 0), f1 = pbd__sc_coplanar(x, y, 1.0f / 3.0f),
          f2 = pbd__sc_coplanar(x, y, 2.0f / 3.0f), f3 = pbd__sc_coplanar(x, y, 1);
    /* Lagrange on 0 1/3 2/3 1 -> derivative 3 c3 t^2 + 2 c2 t + c1 */
    float c3 = 4.5f * (f3 - 3.0f * f2 + 3.0f * f1 - f0), c2 = 9.0f * (f0 - 2.5f * f1 + 2.0f * f2 - 0.5f * f3);
    float c1 = -5.5f * f0 + 9.0f * f1 - 4.5f * f2 + f3;
    float cuts[4] = {0, 1, 1, 1};
    int nc = 1;
    float A = 3 * c3, B = 2 * c2, C = c1, disc = B * B - 4 * A * C;
    if (fabsf(A) > PBD__DENOM_MIN && disc >= 0) {
        float r = sqrtf(disc), t1 = (-B - r) / (2 * A), t2 = (-B + r) / (2 * A);
        if (t1 > t2) {
            float q = t1;
            t1 = t2;
            t2 = q;
        }
        if (t1 > 0 && t1 < 1) cuts[nc++] = t1;
        if (t2 > 0 && t2 < 1) cuts[nc++] = t2;
    } else if (fabsf(A) <= PBD__DENOM_MIN && fabsf(B) > PBD__DENOM_MIN) {
        float t1 = -C / B;
        if (t1 > 0 && t1 < 1) cuts[nc++] = t1;
    }
    cuts[nc++] = 1;
    for (int k = 0; k + 1 < nc; ++k) {
        float lo = cuts[k], hi = cuts[k + 1], flo = pbd__sc_coplanar(x, y, lo), fhi = pbd__sc_coplanar(x, y, hi);
        if (flo != 0 && fhi != 0 && (flo < 0) == (fhi < 0)) continue;
        for (int it = 0; it < 30 && flo != 0; ++it) {
            float m = 0.5f * (lo + hi), fm = pbd__sc_coplanar(x, y, m);
            if (fm != 0 && (fm < 0) == (flo < 0)) {
                lo = m;
                flo = fm;
            } else hi = m;
        }
        float t = flo == 0 ? lo : 0.5f * (lo + hi), u[3];
        pbd__v3 p[4];
        for (int j = 0; j < 4; ++j) p[j] = pbd__lerp(x[j], y[j], t);
        if (!pbd__barycentric(p[0], p[1], p[2], p[3], u)) continue;
        if (u[0] >= -PBD__SC_BARY_SLACK && u[1] >= -PBD__SC_BARY_SLACK && u[2] >= -PBD__SC_BARY_SLACK) return 1;
    }
    return 0;
}

/* Whether vertex q and triangle abc, moving linearly from x[0..3] to
   y[0..3], cannot touch: their distance d0 at the start (the candidate's
   dist, measured at x) shrinks at most by the motion of q plus the
   largest motion of a corner (every point of the triangle moves by a
   convex combination of the corners' motions), so d0 beyond that cannot
   reach 0. The margin covers the tolerance of pbd__sc_crossed (1e-4 of
   an altitude, in barycentric coordinates) and rounding, so that the
   cubic is skipped only where it would find nothing: most candidates of
   a cloth lying in layers are neighbours that stay apart. */
static PBD_HD int pbd__sc_apart(const pbd__v3 *x, const pbd__v3 *y, float d0) {
    float corner = 0;
    for (int j = 1; j < 4; ++j) {
        float m = pbd__len(pbd__sub(y[j], x[j]));
        corner = m > corner ? m : corner;
    }
    float size = pbd__len(pbd__sub(x[2], x[1])) + pbd__len(pbd__sub(x[3], x[1]));
    float reach = pbd__len(pbd__sub(y[0], x[0])) + corner;
    return d0 > PBD__SC_APART_GROW * reach + PBD__SC_APART_SIZE * size;
}

/* Whether point-triangle candidate k of vertex i crossed during the
   substep with a free particle not yet sent back (vs: its 4 vertices). */
static PBD_HD int pbd__sc_crossing(const pbd_world *w, const pbd__selfcol *S, int i, int k, int *vs) {
    const pbd__sc_pt *c = &S->pt[(size_t)i * PBD__SC_PT + k];
    const int *tv = S->tv + 3 * c->tri;
    int free_ = 0;
    pbd__v3 x[4], y[4];
    vs[0] = i;
    vs[1] = tv[0];
    vs[2] = tv[1];
    vs[3] = tv[2];
    for (int j = 0; j < 4; ++j) {
        int q = S->vp[vs[j]];
        x[j] = pbd__p3(w->x[q]);
        y[j] = pbd__p3(w->p[q]);
        free_ += w->p[q].w > 0 && !S->frozen[vs[j]];
    }
    return free_ && !pbd__sc_apart(x, y, c->dist) && pbd__sc_crossed(x, y);
}

/* Whether any point-triangle candidate of vertex i crosses (the fail-safe's search). */
static inline PBD_HD int pbd__sc_any_crossing(const pbd_world *w, const pbd__selfcol *S, int i) {
    int vs[4];
    for (int k = 0; k < S->npt[i]; ++k)
        if (pbd__sc_crossing(w, S, i, k, vs)) return 1;
    return 0;
}
/* The fail-safe's serial pass (below): from the start, in candidate order. */
static PBD_HD void pbd__sc_failsafe_serial(pbd_world *w, pbd__selfcol *S) {
    int vs[4];
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < S->nv; ++i)
            for (int k = 0; k < S->npt[i]; ++k) {
                if (!pbd__sc_crossing(w, S, i, k, vs)) continue;
                for (int j = 0; j < 4; ++j) {
                    int q = S->vp[vs[j]];
                    if (!(w->p[q].w > 0) || S->frozen[vs[j]]) continue;
                    w->p[q].x = w->x[q].x;
                    w->p[q].y = w->x[q].y;
                    w->p[q].z = w->x[q].z;
                    S->frozen[vs[j]] = 1;
                }
                changed = 1;
            }
    }
}

/* The fail-safe after the last iteration (the contacts could not hold
   everything, e.g. a fold shut tight with its sides at odds): a vertex
   that passed through a candidate triangle between the start of the
   substep (x, free of crossings) and now (p) goes back to the start,
   with the triangle's free particles, so they end the substep at rest
   where they were. Going back can put a pair the other way, so the pass
   repeats until no candidate crosses; each repeat sends back at least one
   more particle, so it ends. Every thread calls it: a parallel search
   for any crossing first (nothing has been sent back yet, so it only
   reads); only when one is found, the serial pass, from the start and in
   candidate order, so the result does not depend on the threads. */
static void pbd__sc_failsafe(pbd_world *w, pbd__selfcol *S) {
    int found = 0;
    PBD__PRAGMA(omp single) {
        memset(S->frozen, 0, (size_t)S->nv);
        S->crossings = 0;
    }
    PBD__PRAGMA(omp for schedule(dynamic, 256))
    for (int i = 0; i < S->nv; ++i)
        if (!found) found = pbd__sc_any_crossing(w, S, i);
    if (found) {
        PBD__PRAGMA(omp atomic write)
        S->crossings = 1;
    }
    PBD__PRAGMA(omp barrier)
    if (!S->crossings) return; /* every thread reads the same: it is reset after a barrier */
    PBD__PRAGMA(omp single)
    pbd__sc_failsafe_serial(w, S);
}

/* Runs fn on every candidate slot (see pbd__selfcol), colour after colour
   (pbd__selfcol_color): the threads share a colour, whose candidates have
   no vertex in common, and the barrier of its omp for separates it from
   the next; the overflow colour runs serially. Within a colour the order
   does not matter, so any thread count gives the same bits; so does one
   thread running all colours in turn, which is what few candidates get
   (a barrier costs a microsecond or more, a projection about 0.1). */
#ifndef PBD__SC_SERIAL_MIN
#define PBD__SC_SERIAL_MIN 512
#endif
/* fn gets the slots W at a time (fewer at a colour's end), all of one
   colour; those of the overflow colour one at a time. */
typedef void (*pbd__sc_block_fn)(pbd_world *w, pbd__selfcol *S, const int *slots, int n);
static void pbd__sc_color_serial(pbd_world *w, pbd__selfcol *S, pbd__sc_block_fn fn, int col) {
    int b = S->cstart[col], e = S->cstart[col + 1], step = S->overflow && col == S->ncolors - 1 ? 1 : PBD__W;
    for (int k = b; k < e; k += step) fn(w, S, S->corder + k, e - k < step ? e - k : step);
}
static void pbd__sc_each_color(pbd_world *w, pbd__selfcol *S, pbd__sc_block_fn fn) {
    int n = S->cstart[S->ncolors]; /* every thread reads the same (written before a barrier) */
    if (n == 0) return;
    if (n < PBD__SC_SERIAL_MIN) {
        PBD__PRAGMA(omp single)
        for (int col = 0; col < S->ncolors; ++col) pbd__sc_color_serial(w, S, fn, col);
        return;
    }
    for (int col = 0; col < S->ncolors; ++col) {
        int b = S->cstart[col], e = S->cstart[col + 1];
        if (S->overflow && col == S->ncolors - 1) {
            PBD__PRAGMA(omp single)
            pbd__sc_color_serial(w, S, fn, col);
            continue;
        }
        PBD__PRAGMA(omp for schedule(static))
        for (int k = b; k < e; k += PBD__W) fn(w, S, S->corder + k, e - k < PBD__W ? e - k : PBD__W);
    }
}

/* Point-triangle candidate pt[id] (vertex id / PBD__SC_PT; survey 3.4.3). */
static PBD_HD void pbd__sc_project_pt(pbd_world *w, pbd__selfcol *S, int id) {
    pbd__sc_pt *c = &S->pt[id];
    const pbd__sc_q *q = &S->ptq[id]; /* in the winding of its side */
    const int *ids = q->p;
    pbd__v3 x[4], g[4], n;
    for (int j = 0; j < 4; ++j) x[j] = pbd__p3(w->p[ids[j]]);
    float th = q->th, l;
    float h = pbd__pt_height(x, &n, &l), C = h - th; /* pbd__eval_point_triangle, the gradients when active */
    if (l < PBD__NORMAL_LEN_MIN || C >= 0) return;
    /* active while the vertex is over the triangle, widened by the
       thickness so that it cannot slip past an edge */
    int f;
    pbd__v3 r = pbd__sub(x[0], pbd__closest_on_triangle(x[0], x[1], x[2], x[3], &f));
    float rn = pbd__dot(r, n);
    if (pbd__dot(r, r) - rn * rn > th * th) return;
    pbd__pt_gradients(x, n, l, h, g);
    c->lambda += pbd__sc_apply(w, ids, g, 4, C);
}

/* Edge-edge candidate ee[id] (edge id / PBD__SC_EE). */
static PBD_HD void pbd__sc_project_ee(pbd_world *w, pbd__selfcol *S, int id) {
    pbd__sc_ee *c = &S->ee[id];
    const int *ids = S->eeq[id].p;
    pbd__v3 x[4];
    for (int j = 0; j < 4; ++j) x[j] = pbd__p3(w->p[ids[j]]);
    pbd__v3 d = pbd__sub(pbd__lerp(x[0], x[1], c->s), pbd__lerp(x[2], x[3], c->t));
    float C = pbd__dot(d, c->n) - S->eeq[id].th;
    pbd__v3 g[4] = {pbd__mul(c->n, 1.0f - c->s), pbd__mul(c->n, c->s), pbd__mul(c->n, c->t - 1.0f),
                    pbd__mul(c->n, -c->t)};
    c->lambda += pbd__sc_apply(w, ids, g, 4, C);
}

#if PBD__W > 1
/* The point-triangle slots pt[0..n) (n <= W, of one colour: no particle
   in common) that pbd__sc_project_pt might move: its two tests (height
   below the thickness, over the triangle) in the same operations for W
   at once, as lane bits. Most candidates of cloth in layers fail them:
   only the others pay for the scalar projection, which tests again. */
static unsigned pbd__sc_pt_may_act(const pbd_world *w, const pbd__selfcol *S, const int *pt, int n) {
    int ids[4][PBD__W];
    float th[PBD__W];
    for (int l = 0; l < PBD__W; ++l) {
        const pbd__sc_q *q = &S->ptq[pt[l < n ? l : 0]];
        for (int j = 0; j < 4; ++j) ids[j][l] = q->p[j];
        th[l] = q->th;
    }
    pbd__vv x[4];
    for (int j = 0; j < 4; ++j) x[j] = pbd__vvpos(pbd__vgather(w->p, ids[j]));
    pbd__vf t = pbd__vload(th), zero = pbd__vset1(0.0f);
    pbd__vv nn = pbd__vvcross(pbd__vvsub(x[2], x[1]), pbd__vvsub(x[3], x[1]));
    pbd__vf l = pbd__vsqrt(pbd__vvdot(nn, nn));
    pbd__vv nh = pbd__vvmul(nn, pbd__vdiv(pbd__vset1(1.0f), l));
    pbd__vf C = pbd__vsub(pbd__vvdot(pbd__vvsub(x[0], x[1]), nh), t);
    pbd__vv r = pbd__vvsub(x[0], pbd__vclosest_on_triangle(x[0], x[1], x[2], x[3]));
    pbd__vf rn = pbd__vvdot(r, nh);
    pbd__vm off = pbd__vor_m(pbd__vlt(l, pbd__vset1(PBD__NORMAL_LEN_MIN)), pbd__vle(zero, C));
    off = pbd__vor_m(off, pbd__vlt(pbd__vmul(t, t), pbd__vsub(pbd__vvdot(r, r), pbd__vmul(rn, rn))));
    return ~pbd__vbits(off) & (((unsigned)1 << n) - 1);
}

/* The edge-edge slots ee[0..n) (n <= W, of one colour) that
   pbd__sc_project_ee might move: C < 0 in the same operations, W at once. */
static unsigned pbd__sc_ee_may_act(const pbd_world *w, const pbd__selfcol *S, const int *ee, int n) {
    int ids[4][PBD__W];
    float th[PBD__W], s[PBD__W], t[PBD__W], nx[3][PBD__W];
    for (int l = 0; l < PBD__W; ++l) {
        int id = ee[l < n ? l : 0];
        const pbd__sc_ee *c = &S->ee[id];
        const pbd__sc_q *q = &S->eeq[id];
        for (int j = 0; j < 4; ++j) ids[j][l] = q->p[j];
        th[l] = q->th;
        s[l] = c->s;
        t[l] = c->t;
        nx[0][l] = c->n.x;
        nx[1][l] = c->n.y;
        nx[2][l] = c->n.z;
    }
    pbd__vv x[4], nn;
    for (int j = 0; j < 4; ++j) x[j] = pbd__vvpos(pbd__vgather(w->p, ids[j]));
    nn.x = pbd__vload(nx[0]);
    nn.y = pbd__vload(nx[1]);
    nn.z = pbd__vload(nx[2]);
    pbd__vv a = pbd__vvadd(x[0], pbd__vvmul(pbd__vvsub(x[1], x[0]), pbd__vload(s))); /* pbd__lerp */
    pbd__vv b = pbd__vvadd(x[2], pbd__vvmul(pbd__vvsub(x[3], x[2]), pbd__vload(t)));
    pbd__vf C = pbd__vsub(pbd__vvdot(pbd__vvsub(a, b), nn), pbd__vload(th));
    return ~pbd__vbits(pbd__vle(pbd__vset1(0.0f), C)) & (((unsigned)1 << n) - 1);
}
#endif

/* A block of slots of one colour (pbd__sc_each_color). */
static PBD_HD void pbd__sc_project_block(pbd_world *w, pbd__selfcol *S, const int *slots, int n) {
    int npt = S->nv * PBD__SC_PT;
#if PBD__W > 1
    if (w->simd) {
        int pt[PBD__W], ee[PBD__W], m = 0, me = 0;
        for (int k = 0; k < n; ++k)
            if (slots[k] < npt) pt[m++] = slots[k];
            else ee[me++] = slots[k] - npt;
        unsigned act = m == 1 ? 1u : (m > 1 ? pbd__sc_pt_may_act(w, S, pt, m) : 0u);
        for (; act; act &= act - 1) pbd__sc_project_pt(w, S, pt[pbd__lowest_bit(act)]);
        act = me == 1 ? 1u : (me > 1 ? pbd__sc_ee_may_act(w, S, ee, me) : 0u);
        for (; act; act &= act - 1) pbd__sc_project_ee(w, S, ee[pbd__lowest_bit(act)]);
        return;
    }
#endif
    for (int k = 0; k < n; ++k) {
        if (slots[k] < npt) pbd__sc_project_pt(w, S, slots[k]);
        else pbd__sc_project_ee(w, S, slots[k] - npt);
    }
}

/* Every iteration: the candidates as coloured Gauss-Seidel (survey 3.8),
   colour after colour in the order of pbd__selfcol_color. */
static void pbd__selfcol_project(pbd_world *w) {
    /* every thread reads iter before the barrier of the first clamp; it
       changes only after it */
    int last = w->selfcol->iter + 1 == w->iterations;
    pbd__sc_clamp(w, w->selfcol);
    pbd__sc_each_color(w, w->selfcol, pbd__sc_project_block);
    /* after the last iteration: the motion within the reach again (the
       contacts moved particles), then the fail-safe */
    if (last) {
        pbd__sc_clamp(w, w->selfcol);
        pbd__sc_failsafe(w, w->selfcol);
    }
    PBD__PRAGMA(omp single)
    w->selfcol->iter++;
}

/* Removes the separating normal velocity between the two sides of an
   active contact: n the contact normal, k[j] the weights of the particles
   (+ on one side, - on the other, summing to 0). The position correction
   that kept them `thickness` apart is not turned into a velocity that
   would throw the layers apart (as the collider contacts do for
   restitution 0); without it, tightly folded cloth gains energy. */
static PBD_HD void pbd__sc_stop(pbd_world *w, const int *ids, const float *k, pbd__v3 n) {
    float vn = 0, den = 0;
    for (int j = 0; j < 4; ++j) {
        vn += k[j] * pbd__dot(pbd__p3(w->v[ids[j]]), n);
        den += w->x[ids[j]].w * k[j] * k[j];
    }
    if (!(vn > 0) || !(den > PBD__WG2_MIN)) return;
    float dv = -vn / den;
    for (int j = 0; j < 4; ++j) {
        pbd__p4 *V = &w->v[ids[j]];
        float s = w->x[ids[j]].w * k[j] * dv;
        V->x += n.x * s;
        V->y += n.y * s;
        V->z += n.z * s;
    }
}

/* Candidate slot `id` (see pbd__selfcol), if it pushed this substep. */
static PBD_HD void pbd__sc_stop_slot(pbd_world *w, pbd__selfcol *S, int id) {
    int npt = S->nv * PBD__SC_PT;
    if (id < npt) {
        const pbd__sc_pt *c = &S->pt[id];
        if (!(c->lambda > 0)) return;
        const int *tv = S->tv + 3 * c->tri;
        int ids[4] = {S->vp[id / PBD__SC_PT], S->vp[tv[0]], S->vp[tv[1]], S->vp[tv[2]]};
        pbd__v3 x[4];
        for (int j = 0; j < 4; ++j) x[j] = pbd__p3(w->x[ids[j]]);
        pbd__v3 n = pbd__cross(pbd__sub(x[2], x[1]), pbd__sub(x[3], x[1]));
        float l = pbd__len(n), u[3];
        if (!(l > PBD__NORMAL_LEN_MIN) || !pbd__barycentric(x[0], x[1], x[2], x[3], u)) return;
        float kk[4] = {1.0f, -u[0], -u[1], -u[2]};
        pbd__sc_stop(w, ids, kk, pbd__mul(n, c->side / l));
    } else {
        const pbd__sc_ee *c = &S->ee[id - npt];
        if (!(c->lambda > 0)) return;
        int e = (id - npt) / PBD__SC_EE;
        int ids[4] = {S->vp[S->ev[2 * e]], S->vp[S->ev[2 * e + 1]], S->vp[S->ev[2 * c->edge]],
                      S->vp[S->ev[2 * c->edge + 1]]};
        float kk[4] = {1.0f - c->s, c->s, c->t - 1.0f, -c->t};
        pbd__sc_stop(w, ids, kk, c->n);
    }
}

/* A block of slots of one colour (pbd__sc_each_color). */
static PBD_HD void pbd__sc_stop_block(pbd_world *w, pbd__selfcol *S, const int *slots, int n) {
    for (int k = 0; k < n; ++k) pbd__sc_stop_slot(w, S, slots[k]);
}
/* After the velocity update: contacts that pushed this substep stop
   separating, in the colours of the projection (each changes the
   velocities of its 4 particles). */
static void pbd__selfcol_velocities(pbd_world *w) { pbd__sc_each_color(w, w->selfcol, pbd__sc_stop_block); }

// ==== plugins ===============================================================

typedef struct pbd__plugin {
    pbd__slot s;
    pbd_plugin_desc d;
    char name[32];
    int order; /* its place in the order of addition among the live plugins (snapshots: pbd__io_plugins) */
} pbd__plugin;

PBDDEF pbd_plugin_desc pbd_plugin_desc_default(void) {
    pbd_plugin_desc d;
    memset(&d, 0, sizeof d);
    d.name = "plugin";
    return d;
}

PBDDEF int pbd_world_plugin_count(const pbd_world *w) { return w ? PBD__LIVE(w->plugins, w->nplugins) : 0; }

PBDDEF pbd_result pbd_world_fail(const pbd_world *w, pbd_result r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pbd__vfail(w, r, fmt, ap);
    va_end(ap);
    return r;
}
/* This thread's last message without its "PBD_ERROR_NAME: ". */
static void pbd__last_message(char *copy, size_t size) {
    const char *m = pbd__last_error, *c = strstr(m, ": ");
    snprintf(copy, size, "%s", c ? c + 2 : m);
}
PBDDEF pbd_result pbd_world_fail_last(const pbd_world *w, pbd_result r) {
    if (r == PBD_OK || !w) return r;
    char copy[sizeof pbd__last_error];
    pbd__last_message(copy, sizeof copy);
    return pbd_world_fail(w, r, "%s", copy);
}
PBDDEF pbd_result pbd_world_fail_in(const pbd_world *w, const char *fn, pbd_result r) {
    if (r == PBD_OK || !fn) return r;
    char copy[sizeof pbd__last_error];
    pbd__last_message(copy, sizeof copy);
    size_t n = strlen(fn);
    if (strncmp(copy, fn, n) == 0 && copy[n] == ':') return pbd_world_fail(w, r, "%s", copy);
    return pbd_world_fail(w, r, "%s: %s", fn, copy);
}
PBDDEF void *pbd_world_alloc(pbd_world *w, size_t size) { return pbd__alloc(w, size); }

/* rows of 5 ints (an element's sorted vertices, then its index), lexicographic */
static int pbd__cmp_int5(const void *a, const void *b) {
    const int *x = (const int *)a, *y = (const int *)b;
    for (int k = 0; k < 5; ++k)
        if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
    return 0;
}
PBDDEF int pbd_find_repeated_element(pbd_world *w, const int *elements, int count, int arity, int *first, int *second) {
    if (arity < 2 || arity > 4) return -1;
    if (count < 2) return 0;
    int *row = (int *)pbd__alloc_n(w, (size_t)count, 5 * sizeof(int));
    if (!row) return -1;
    for (int i = 0; i < count; ++i) {
        int *k = row + 5 * (size_t)i;
        k[2] = k[3] = 0;                  /* the slots an edge or triangle leaves */
        for (int a = 0; a < arity; ++a) { /* insertion sort of the vertices */
            int v = elements[(size_t)arity * i + a], j = a;
            for (; j > 0 && k[j - 1] > v; --j) k[j] = k[j - 1];
            k[j] = v;
        }
        k[4] = i;
    }
    qsort(row, (size_t)count, 5 * sizeof(int), pbd__cmp_int5);
    int found = 0, group = 0; /* group: the row of the current key's earliest element */
    for (int i = 1; i < count; ++i) {
        const int *k = row + 5 * (size_t)i;
        if (memcmp(k, k - 5, 4 * sizeof(int)) != 0) group = i;
        else if (!found || k[4] < *second) {
            found = 1;
            *first = row[5 * (size_t)group + 4];
            *second = k[4];
        }
    }
    pbd__free(w, row);
    return found;
}
PBDDEF int pbd_find_open_edge(pbd_world *w, const int *triangles, int count, int *from, int *to) {
    if (count < 1) return 0;
    uint64_t *keys = (uint64_t *)pbd__alloc_n(w, (size_t)count * 3, sizeof(uint64_t));
    if (!keys) return -1;
    for (int t = 0; t < count; ++t)
        for (int e = 0; e < 3; ++e) {
            uint32_t a = (uint32_t)triangles[3 * t + e], b = (uint32_t)triangles[3 * t + (e + 1) % 3];
            keys[3 * t + e] = ((uint64_t)a << 32) | b;
        }
    qsort(keys, (size_t)count * 3, sizeof *keys, pbd__cmp_u64);
    int found = 0;
    for (long k = 0; k < 3L * count && !found; ++k) {
        uint64_t rev = (keys[k] << 32) | (keys[k] >> 32);
        if (k + 1 < 3L * count && keys[k] == keys[k + 1]) found = 1;
        else if (pbd__find_u64(keys, 3L * count, rev) < 0) found = 2;
        if (found) {
            *from = (int)(uint32_t)(keys[k] >> 32);
            *to = (int)(uint32_t)keys[k];
        }
    }
    pbd__free(w, keys);
    return found;
}
PBDDEF void pbd_world_free(pbd_world *w, void *ptr) { pbd__free(w, ptr); }

PBDDEF int pbd_sym_eigen(int n, double *A, double *V) { return pbd__sym_eigen_hd(n, A, V); }

PBDDEF pbd_result pbd_color_elements(pbd_world *w, const int *elements, int count, int arity, int vertex_count,
                                     int balanced, int *colors, int *starts, int max_starts, int *color_count,
                                     int *overflow) {
    const char *f = "pbd_color_elements";
    if (count < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: count %d < 0", f, count);
    if (arity < 1) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: arity %d < 1", f, arity);
    if ((long long)count * arity > INT_MAX)
        return pbd__fail(w, PBD_ERROR_OVERFLOW, "%s: %d elements of %d vertices are over INT_MAX indices", f, count,
                         arity);
    if (vertex_count < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: vertex_count %d < 0", f, vertex_count);
    if (balanced != 0 && balanced != 1)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: balanced %d is not 0 or 1", f, balanced);
    if (count > 0 && !elements) return pbd__fail(w, PBD_ERROR_NULL_POINTER, "%s: elements is NULL", f);
    if (count > 0 && !colors) return pbd__fail(w, PBD_ERROR_NULL_POINTER, "%s: colors is NULL", f);
    if (!starts) return pbd__fail(w, PBD_ERROR_NULL_POINTER, "%s: starts is NULL", f);
    if (!color_count) return pbd__fail(w, PBD_ERROR_NULL_POINTER, "%s: color_count is NULL", f);
    int need = (count < PBD_MAX_COLORS ? count : PBD_MAX_COLORS) + 1;
    if (max_starts < need)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: max_starts %d < %d (the colours of %d elements + 1)", f,
                         max_starts, need, count);
    for (long i = 0; i < (long)count * arity; ++i)
        if (elements[i] >= vertex_count)
            return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "%s: elements[%ld] = %d is not a vertex (0..%d)", f, i,
                             elements[i], vertex_count - 1);
    uint64_t *mask = (uint64_t *)pbd__alloc_n(w, (size_t)(vertex_count > 0 ? vertex_count : 1), sizeof(uint64_t));
    if (!mask) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "%s: no memory for %d vertices", f, vertex_count);
    memset(mask, 0, sizeof(uint64_t) * (size_t)(vertex_count > 0 ? vertex_count : 1));
    int start[PBD_MAX_COLORS + 1], over;
    int n = pbd__color_greedy(elements, count, arity, balanced, mask, colors, start, &over);
    pbd__free(w, mask);
    memcpy(starts, start, sizeof(int) * (size_t)(n + 1));
    *color_count = n;
    if (overflow) *overflow = over;
    return PBD_OK;
}

/* The index of the plugin a handle names. */
static pbd_result pbd__plugin_index(const pbd_world *w, pbd_plugin handle, int *index) {
    return PBD__RESOLVE(w, handle, w->plugins, w->nplugins, "plugin", index);
}

PBDDEF pbd_result pbd_add_plugin(pbd_world *w, const pbd_plugin_desc *desc, pbd_plugin *out) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, desc, "desc");
    if (desc->particle_end < 0 || desc->particle_end > w->n)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "plugin particle_end %d is not in [0, %d]",
                         desc->particle_end, w->n);
    if (desc->work < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "plugin work %ld < 0", desc->work);
    if (desc->parallel != 0 && desc->parallel != 1)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "plugin parallel must be 0 or 1");
    if (desc->device != 0 && desc->device != 1)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "plugin device must be 0 or 1");
    if (!desc->save_state != !desc->load_state)
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT,
                         "plugin '%s': save_state and load_state go together (%s is NULL)",
                         desc->name ? desc->name : "plugin", desc->save_state ? "load_state" : "save_state");
    int p, order = 0;
    for (int i = 0; i < w->nplugins; ++i)
        if (w->plugins[i].s.live && w->plugins[i].order >= order) order = w->plugins[i].order + 1;
    PBD__TRY(PBD__ACQUIRE(w, w->plugins, w->nplugins, w->plugin_cap, "plugin", &p));
    pbd__plugin *pl = &w->plugins[p];
    pl->d = *desc;
    pl->order = order;
    snprintf(pl->name, sizeof pl->name, "%s", desc->name ? desc->name : "plugin");
    pl->d.name = NULL; /* the caller's string may not outlive the world */
    if (out) out->id = PBD__HANDLE(w->plugins, p);
    return PBD_OK;
}

PBDDEF pbd_result pbd_remove_plugin(pbd_world *w, pbd_plugin handle) {
    PBD__CHECK_WORLD(w);
    int p;
    PBD__TRY(pbd__plugin_index(w, handle, &p));
    pbd__plugin pl = w->plugins[p];
    PBD__RELEASE(w->plugins, p);
    pbd__trim_free_tail(w);
    if (pl.d.destroy) pl.d.destroy(pl.d.user);
    return PBD_OK;
}

PBDDEF pbd_result pbd_plugin_get(const pbd_world *w, pbd_plugin handle, const void **kind, void **user) {
    if (kind) *kind = NULL;
    if (user) *user = NULL;
    if (!w) return pbd__null_world();
    int i = (int)(handle.id & PBD__SLOT_MASK) - 1;
    if (handle.id == 0 || i < 0 || i >= w->nplugins || !w->plugins[i].s.live ||
        w->plugins[i].s.gen != handle.id >> PBD_HANDLE_SLOT_BITS)
        return PBD_ERROR_INVALID_HANDLE;
    if (kind) *kind = w->plugins[i].d.kind;
    if (user) *user = w->plugins[i].d.user;
    return PBD_OK;
}

PBDDEF pbd_plugin pbd_world_plugin(const pbd_world *w, int index) {
    pbd_plugin p;
    p.id = w ? pbd__nth_live(w->plugins, sizeof *w->plugins, w->nplugins, index) : 0u;
    return p;
}

PBDDEF pbd_result pbd_plugin_set_work(pbd_world *w, pbd_plugin handle, long work) {
    PBD__CHECK_WORLD(w);
    int p;
    PBD__TRY(pbd__plugin_index(w, handle, &p));
    if (work < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "plugin work %ld < 0", work);
    w->plugins[p].d.work = work;
    return PBD_OK;
}

PBDDEF pbd_result pbd_world_mark_coupled(pbd_world *w, const int *particles, int count) {
    PBD__CHECK_WORLD(w);
    PBD__CHECK_PTR(w, particles, "particles");
    if (count < 0) return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "count %d < 0", count);
    for (int k = 0; k < count; ++k)
        if (particles[k] < 0 || particles[k] >= w->n)
            return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "particle %d is not in [0, %d)", particles[k], w->n);
    pbd__mark_coupled(w, particles, count);
    return PBD_OK;
}

static void pbd__plugins_destroy(pbd_world *w) {
    for (int i = 0; i < w->nplugins; ++i)
        if (w->plugins[i].s.live && w->plugins[i].d.destroy) w->plugins[i].d.destroy(w->plugins[i].d.user);
    pbd__free(w, w->plugins);
    w->plugins = NULL;
    w->nplugins = w->plugin_cap = 0;
}

static int pbd__plugins_particle_end(const pbd_world *w) {
    int e = 0;
    for (int i = 0; i < w->nplugins; ++i)
        if (w->plugins[i].s.live && w->plugins[i].d.particle_end > e) e = w->plugins[i].d.particle_end;
    return e;
}

static long pbd__plugins_work(const pbd_world *w) {
    long work = 0;
    for (int i = 0; i < w->nplugins; ++i)
        if (w->plugins[i].s.live) work += w->plugins[i].d.work;
    return work;
}

enum { PBD__PLUGIN_BEGIN_SUBSTEP, PBD__PLUGIN_PROJECT, PBD__PLUGIN_PROJECT_AFTER_CONTACTS, PBD__PLUGIN_END_SUBSTEP };

typedef void (*pbd__plugin_stage_fn)(void *, const pbd_solve_context *);
/* A live plugin's callback of a substep stage, or NULL. */
static pbd__plugin_stage_fn pbd__plugin_fn(const pbd__plugin *pl, int stage) {
    if (!pl->s.live) return NULL;
    return stage == PBD__PLUGIN_BEGIN_SUBSTEP            ? pl->d.begin_substep
           : stage == PBD__PLUGIN_PROJECT                ? pl->d.project
           : stage == PBD__PLUGIN_PROJECT_AFTER_CONTACTS ? pl->d.project_after_contacts
                                                         : pl->d.end_substep;
}

/* Runs one substep callback of plugin pl (fn: pbd__plugin_fn) on the
   particle arrays X, P, V (the host's, or a GPU world's device arrays). */
static void pbd__plugin_call(pbd_world *w, pbd__plugin *pl, pbd__plugin_stage_fn fn, float h, int s, int S, int it,
                             pbd__p4 *X, pbd__p4 *P, pbd__p4 *V) {
    pbd_solve_context c;
    c.world = w;
    c.x = &X[0].x;
    c.p = &P[0].x;
    c.v = &V[0].x;
    c.particle_count = w->n;
    c.h = h;
    c.substep = s;
    c.substeps = S;
    c.iteration = it;
    c.iterations = w->iterations;
    c.time = w->time + (double)h * s;
    c.thread = 0;
    c.thread_count = 1;
#if PBD__OPENMP
    c.thread = omp_get_thread_num();
    c.thread_count = omp_get_num_threads();
#endif
    if (pl->d.parallel) {
        fn(pl->d.user, &c);
    } else {
        PBD__PRAGMA(omp single)
        fn(pl->d.user, &c);
    }
}

/* Runs one substep callback of every plugin, inside the substep's parallel
   region: parallel plugins are called by every thread, the others by one
   (with the barrier of `omp single` after it). */
static void pbd__plugins_call(pbd_world *w, int stage, float h, int s, int S, int it) {
    for (int i = 0; i < w->nplugins; ++i) {
        pbd__plugin_stage_fn fn = pbd__plugin_fn(&w->plugins[i], stage);
        if (fn) pbd__plugin_call(w, &w->plugins[i], fn, h, s, S, it, w->x, w->p, w->v);
    }
}

static void pbd__plugins_step(pbd_world *w, float dt, int end) {
    for (int i = 0; i < w->nplugins; ++i) {
        pbd__plugin *pl = &w->plugins[i];
        void (*fn)(void *, pbd_world *, float) = end ? pl->d.end_step : pl->d.begin_step;
        if (pl->s.live && fn) fn(pl->d.user, w, dt);
    }
}

static void pbd__plugins_rollback(pbd_world *w) {
    for (int i = 0; i < w->nplugins; ++i)
        if (w->plugins[i].s.live && w->plugins[i].d.rollback) w->plugins[i].d.rollback(w->plugins[i].d.user, w);
}

/* --- the plugins' states in snapshots ----------------------------------------
   After everything else but the objects' drags and the world's
   reference_dt and granular_cfl (snapshot version 8; the drags follow
   from version 9, reference_dt from 10, granular_cfl from 11): the
   number of states, then
   per state the plugin's name (32 bytes, NUL-padded), its place k among
   the states (0, 1, ...), its size (64 bits) and its bytes. The states are
   those of the live plugins that have save_state, in the order the
   plugins were added (pbd__plugin.order), so a world rebuilt the same
   way gets each back at the same place. */
#define PBD__STATE_HEAD (32 + sizeof(int) + sizeof(uint64_t))

/* The index of the k-th live plugin with a state (in order of addition), or -1. */
static int pbd__state_plugin(const pbd_world *w, int k) {
    int found = -1, last = -1;
    for (int j = 0; j <= k; ++j) {
        found = -1;
        for (int i = 0; i < w->nplugins; ++i) {
            const pbd__plugin *pl = &w->plugins[i];
            if (pl->s.live && pl->d.save_state && pl->order > last &&
                (found < 0 || pl->order < w->plugins[found].order))
                found = i;
        }
        if (found < 0) return -1;
        last = w->plugins[found].order;
    }
    return found;
}

/* Measuring and writing: the live world's plugins. Reading (into the
   restore's temporary world, which has none): the layout only, whose
   start and count the restore keeps (io->plugins_at, io->plugin_states)
   to match them with the target's plugins. */
static void pbd__io_plugins(pbd__io *io, pbd_world *w) {
    if (io->bad) return;
    if (io->in) {
        io->plugins_at = io->off;
        pbd__io_int(io, &io->plugin_states);
        if (!io->bad && (io->plugin_states < 0 || (size_t)io->plugin_states > (io->size - io->off) / PBD__STATE_HEAD))
            io->bad = 1;
        for (int k = 0; k < io->plugin_states && !io->bad; ++k) {
            char name[32] = {0}; /* read into; zeroed all the same (gcc -O3 -Wall saw the write branch read it) */
            int place = -1;
            uint64_t n = 0;
            pbd__io_bytes(io, name, sizeof name);
            pbd__io_int(io, &place);
            pbd__io_bytes(io, &n, sizeof n);
            if (io->bad || !memchr(name, 0, sizeof name) || place != k || n > io->size - io->off) io->bad = 1;
            else io->off += (size_t)n;
        }
        return;
    }
    int count = 0;
    while (pbd__state_plugin(w, count) >= 0) count++;
    pbd__io_int(io, &count);
    for (int k = 0; k < count; ++k) {
        pbd__plugin *pl = &w->plugins[pbd__state_plugin(w, k)];
        char name[32];
        memset(name, 0, sizeof name);
        snprintf(name, sizeof name, "%s", pl->name);
        uint64_t n = (uint64_t)pl->d.save_state(pl->d.user, w, NULL);
        pbd__io_bytes(io, name, sizeof name);
        pbd__io_int(io, &k);
        pbd__io_bytes(io, &n, sizeof n);
        if (io->out) pl->d.save_state(pl->d.user, w, io->out + io->off);
        io->off += (size_t)n;
    }
}

/* The k-th state of a snapshot whose layout pbd__io_plugins checked. */
static const unsigned char *pbd__state_at(const unsigned char *snap, const pbd__io *io, int k, const char **name,
                                          size_t *size) {
    size_t off = io->plugins_at + sizeof(int);
    uint64_t n = 0;
    for (int j = 0;; ++j) {
        memcpy(&n, snap + off + 32 + sizeof(int), sizeof n);
        if (j == k) break;
        off += PBD__STATE_HEAD + (size_t)n;
    }
    *name = (const char *)snap + off;
    *size = (size_t)n;
    return snap + off + PBD__STATE_HEAD;
}

static const char *pbd__ordinal(int k) {
    return k % 10 == 0 && k % 100 != 10   ? "st"
           : k % 10 == 1 && k % 100 != 11 ? "nd"
           : k % 10 == 2 && k % 100 != 12 ? "rd"
                                          : "th";
}

/* Before a restore changes anything: the target's plugins with a state
   match the snapshot's one for one, in order and by name, and each
   accepts its state (load_state with commit 0). Else
   PBD_ERROR_BAD_SNAPSHOT, and why (naming the plugin) in why. */
static pbd_result pbd__plugins_check_states(pbd_world *w, const unsigned char *snap, const pbd__io *io, char *why,
                                            size_t why_size) {
    int have = 0;
    while (pbd__state_plugin(w, have) >= 0) have++;
    for (int k = 0; k < have || k < io->plugin_states; ++k) {
        const char *name = NULL;
        size_t size = 0;
        const unsigned char *state = k < io->plugin_states ? pbd__state_at(snap, io, k, &name, &size) : NULL;
        pbd__plugin *pl = k < have ? &w->plugins[pbd__state_plugin(w, k)] : NULL;
        if (!pl) {
            snprintf(why, why_size, "it holds the state of a %d%s plugin '%s', which this world lacks (it has %d)",
                     k + 1, pbd__ordinal(k), name, have);
            return PBD_ERROR_BAD_SNAPSHOT;
        }
        if (!state) {
            snprintf(why, why_size, "this world's %d%s plugin with a state, '%s', has none in it (it holds %d)", k + 1,
                     pbd__ordinal(k), pl->name, io->plugin_states);
            return PBD_ERROR_BAD_SNAPSHOT;
        }
        if (strcmp(name, pl->name) != 0) {
            snprintf(why, why_size, "its %d%s plugin state is of '%s', this world's %d%s plugin is '%s'", k + 1,
                     pbd__ordinal(k), name, k + 1, pbd__ordinal(k), pl->name);
            return PBD_ERROR_BAD_SNAPSHOT;
        }
        if (pl->d.load_state(pl->d.user, w, state, size, 0) != PBD_OK) {
            const char *m = pbd__last_error, *c = strstr(m, ": ");
            snprintf(why, why_size, "the %d%s plugin, '%s', refused its state: %.120s", k + 1, pbd__ordinal(k),
                     pl->name, c ? c + 2 : m);
            return PBD_ERROR_BAD_SNAPSHOT;
        }
    }
    return PBD_OK;
}

/* After the swap: each plugin takes its state (checked before). */
static void pbd__plugins_load_states(pbd_world *w, const unsigned char *snap, const pbd__io *io) {
    for (int k = 0; k < io->plugin_states; ++k) {
        const char *name;
        size_t size;
        const unsigned char *state = pbd__state_at(snap, io, k, &name, &size);
        pbd__plugin *pl = &w->plugins[pbd__state_plugin(w, k)];
        pl->d.load_state(pl->d.user, w, state, size, 1);
    }
}

// ==== removal ===============================================================
/* Removing particles (pbd_remove_particles, pbd_remove_object,
   pbd_remove_fluid). A removed particle stays in its slot as a free one
   (pbd__free_particles: inverse mass 0, every state zero, at the origin)
   until an add takes it again: pbd__append_particles puts a new range into
   the first run of free particles that holds it, and free particles at the
   end leave the world. So indices never move: a particle index the user
   keeps stays valid while its particle lives. A removal is refused, with
   nothing changed, while anything else still uses one of the particles:
   a group, tether set, strain limit, strand set, tearing or damping
   cluster, self-collision surface or plugin that the removal does not take
   with it: the message names it. */

static int pbd__marked_any(const unsigned char *mark, const int *idx, long n) {
    for (long k = 0; k < n; ++k)
        if (idx[k] >= 0 && mark[idx[k]]) return idx[k];
    return -1;
}

/* The first marked particle something other than object `except` (-1:
   none) uses, with what uses it in `who`; -1 when none is used. */
static int pbd__particle_user(const pbd_world *w, const unsigned char *mark, int except, char *who, size_t size) {
    const pbd__object *own = except >= 0 ? &w->objects[except] : NULL;
    int p;
    for (int g = 0; g < w->ngroups; ++g) {
        const pbd__group *G = &w->groups[g];
        if (!G->s.live ||
            (own && (own->groups[0] == g || own->groups[1] == g || own->groups[2] == g || own->groups[3] == g)))
            continue;
        p = G->type == PBD_CONSTRAINT_MESH_VOLUME ? pbd__marked_any(mark, G->verts, G->nverts)
                                                  : pbd__marked_any(mark, G->idx, (long)G->count * G->arity);
        if (p >= 0) return snprintf(who, size, "group %d", g), p;
    }
    for (int i = 0; i < w->nlras; ++i) {
        const pbd__lra *l = &w->lras[i];
        if (!l->s.live || (own && own->lra == i)) continue;
        if ((p = pbd__marked_any(mark, l->particles, l->count)) >= 0 ||
            (p = pbd__marked_any(mark, l->anchor, l->start ? l->start[l->count] : 0)) >= 0)
            return snprintf(who, size, "long range attachment set %d", i), p;
    }
    for (int i = 0; i < w->nlimits; ++i)
        if (w->limits[i].s.live &&
            (p = pbd__marked_any(mark, w->limits[i].g.idx, (long)w->limits[i].g.count * w->limits[i].g.arity)) >= 0)
            return snprintf(who, size, "strain limit %d", i), p;
    for (int i = 0; i < w->nstrands; ++i)
        if (w->strands[i].s.live && (p = pbd__marked_any(mark, w->strands[i].idx, w->strands[i].nparticles)) >= 0)
            return snprintf(who, size, "strand set %d", i), p;
    for (int i = 0; i < w->ntears; ++i)
        if (w->tears[i].s.live && (!own || w->tears[i].object != except) &&
            (p = pbd__marked_any(mark, w->tears[i].tris, 3L * w->tears[i].ntris)) >= 0)
            return snprintf(who, size, "the tearing of object %d", w->tears[i].object), p;
    for (int i = 0; i < w->nclusters; ++i)
        if (w->clusters[i].s.live && (p = pbd__marked_any(mark, w->clusters[i].particles, w->clusters[i].count)) >= 0)
            return snprintf(who, size, "damping cluster %d", i), p;
    for (int i = 0; i < w->nsurfaces; ++i)
        if (w->surfaces[i].s.live && (p = pbd__marked_any(mark, w->surfaces[i].tris, 3L * w->surfaces[i].nt)) >= 0)
            return snprintf(who, size, "collision surface %d", i), p;
    for (int i = 0; i < w->nplugins; ++i) {
        const pbd__plugin *pl = &w->plugins[i];
        if (!pl->s.live) continue;
        if (pl->d.uses_particles) p = pl->d.uses_particles(pl->d.user, mark, w->n);
        else
            for (p = (pl->d.particle_end < w->n ? pl->d.particle_end : w->n) - 1; p >= 0 && !mark[p]; --p) continue;
        if (p >= 0 && p < w->n && mark[p]) return snprintf(who, size, "plugin \"%s\"", pl->name), p;
    }
    return -1;
}

/* Marks the particles of [first, first + count) and, for an object, the
   copies its tearing made (outside its range, pbd_world.owner names it). */
static unsigned char *pbd__mark_removal(pbd_world *w, int first, int count, int object) {
    unsigned char *mark = (unsigned char *)pbd__alloc_n(w, (size_t)(w->n > 0 ? w->n : 1), 1);
    if (!mark) return NULL;
    memset(mark, 0, (size_t)(w->n > 0 ? w->n : 1));
    memset(mark + first, 1, (size_t)count);
    for (int i = 0; object >= 0 && i < w->n; ++i) mark[i] |= w->owner[i] == object;
    return mark;
}

/* Refuses (nothing changed) while anything but object `except` uses a
   marked particle; else frees them. */
static pbd_result pbd__remove_marked(pbd_world *w, unsigned char *mark, int except, const char *what) {
    char who[64];
    int p = pbd__particle_user(w, mark, except, who, sizeof who);
    if (p >= 0) {
        pbd__free(w, mark);
        return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "%s: particle %d is used by %s: remove that first", what, p,
                         who);
    }
    int collide = 0;
    for (int i = w->n - 1; i >= 0; --i) /* from the end: trailing free particles leave at once */
        if (mark[i]) {
            collide |= w->flags[i] & (PBD__COLLIDE | PBD__FLUID);
            pbd__free_particles(w, i, 1);
        }
    pbd__free(w, mark);
    if (collide) pbd__pp_index(w);
    return PBD_OK;
}

PBDDEF pbd_result pbd_remove_particles(pbd_world *w, pbd_range r) {
    PBD__CHECK_WORLD(w);
    if (r.first < 0 || r.count <= 0 || r.first > w->n - r.count)
        return pbd__fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "particles %d..%lld are not in the world (0..%d)", r.first,
                         (long long)r.first + r.count - 1, w->n - 1); /* (first + count may overflow int) */
    for (int i = r.first; i < r.first + r.count; ++i) {
        if (w->flags[i] & PBD__FREE)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d was removed already", i);
        if (w->owner[i] >= 0)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d belongs to object %d: pbd_remove_object", i,
                             w->owner[i]);
        if (w->owner[i] <= -2)
            return pbd__fail(w, PBD_ERROR_INVALID_ARGUMENT, "particle %d belongs to fluid %d: pbd_remove_fluid", i,
                             -2 - w->owner[i]);
    }
    unsigned char *mark = pbd__mark_removal(w, r.first, r.count, -1);
    if (!mark) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to remove %d particles", r.count);
    return pbd__remove_marked(w, mark, -1, "pbd_remove_particles");
}

PBDDEF pbd_result pbd_remove_object(pbd_world *w, pbd_object handle) {
    PBD__CHECK_WORLD(w);
    int oi;
    PBD__TRY(pbd__object_index(w, handle, &oi));
    pbd__object *o = &w->objects[oi];
    int tear = pbd__find_tear(w, oi);
    unsigned char *mark = pbd__mark_removal(w, o->first, o->count, oi);
    if (!mark) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to remove object %d", oi);
    PBD__TRY(pbd__remove_marked(w, mark, oi, "pbd_remove_object"));
    /* what the builder made goes with the particles */
    for (int k = 0; k < 4; ++k)
        if (o->groups[k] >= 0) {
            pbd__group_free(w, &w->groups[o->groups[k]]);
            PBD__RELEASE(w->groups, o->groups[k]);
        }
    if (o->lra >= 0) {
        pbd__lra_free(w, &w->lras[o->lra]);
        PBD__RELEASE(w->lras, o->lra);
    }
    if (tear >= 0) pbd__tear_release(w, tear);
    pbd__free(w, o->perm);
    pbd__pieces_drop(w, oi);
    PBD__RELEASE(w->objects, oi);
    return PBD_OK;
}

PBDDEF pbd_result pbd_remove_fluid(pbd_world *w, pbd_fluid handle) {
    PBD__CHECK_WORLD(w);
    int fi;
    PBD__TRY(pbd__fluid_index(w, handle, &fi));
    const pbd__fluid *f = &w->pp.fluids[fi];
    unsigned char *mark = pbd__mark_removal(w, f->first, f->count, -1);
    if (!mark) return pbd__fail(w, PBD_ERROR_OUT_OF_MEMORY, "no memory to remove fluid %d", fi);
    PBD__TRY(pbd__remove_marked(w, mark, -1, "pbd_remove_fluid"));
    PBD__RELEASE(w->pp.fluids, fi);
    pbd__pp_index(w);
    return PBD_OK;
}

// ==== threads ===============================================================

#if PBD__OPENMP
/* The default thread policy (pbd_world_set_threads(w, 0)) on a machine that
   other work shares. Every colour of a substep ends in a barrier, so a
   team is as fast as its slowest thread: when another process holds one
   core, the thread that shares it waits for the scheduler at every barrier
   (a time slice, milliseconds) and OpenMP's spinning waits make it worse,
   the waiting threads burning the core that the late one needs. A step
   can then take many times as long on 2 threads as on 1. OMP_WAIT_POLICY and
   GOMP_SPINCOUNT are read once, when the OpenMP runtime starts, so a
   library cannot bound the spinning; it can choose how many threads a
   substep uses, since the results do not depend on that.

   So the default policy measures. It runs each substep on one of the team
   sizes T, T/2, ..., 1 (T = omp_get_max_threads(), halved rounding up), a
   "level", times it, and now and then probes a neighbouring level for one
   substep: a substep is the natural unit, the thread count may change
   between any two without changing a bit. More threads are kept only
   when they take at most PBD__TEAM_GAIN of the time of fewer (a core
   that saves little is better left to the rest of the program). A probe
   costs the time it loses against the current level; the next probe
   waits `factor` times that cost in substep time, and `factor` doubles
   up to PBD__PROBE_BACKOFF with every probe that confirms the choice
   (exponential backoff; a switch resets it to PBD__PROBE_FIRST), so that
   probing costs at most about 1/factor of the run, whatever a probe costs.
   Before a probe with more threads, a parallel region with nothing but
   PBD__GATE_BARRIERS barriers (the gate) checks that those threads meet in
   less than PBD__GATE_SHARE of a substep; when a core is lost they do not,
   and the gate has cost a few barriers instead of a whole substep's.
   When the current level's substep becomes slower than the last one
   measured with fewer threads, the next substep probes fewer at once: a
   core lost while the team runs is noticed after one substep.

   The functions below decide from given times (no clock): pbd__team_next
   says which level the next substep runs, pbd__team_gate_* judge the gate,
   pbd__team_record learns from a substep's time. */
static int pbd__team_size(const pbd__team *a, int level) {
    int n = a->max;
    for (int k = 0; k < level; ++k) n = (n + 1) / 2;
    return n;
}

/* Starts on one thread (a first substep on a busy machine costs no more
   than it must) and probes more threads after the first substep. */
static void pbd__team_init(pbd__team *a, int max_threads) {
    memset(a, 0, sizeof *a);
    a->max = max_threads < 1 ? 1 : max_threads;
    a->levels = 1;
    while (a->levels < PBD__TEAM_LEVELS && pbd__team_size(a, a->levels - 1) > 1) a->levels++;
    a->level = a->levels - 1;
    a->up = 1;
    a->factor = PBD__PROBE_FIRST;
}

/* The level of the next substep: the current one, or a neighbour when a
   probe is due (never before the current level has a time to compare). */
static int pbd__team_next(const pbd__team *a) {
    if (a->levels < 2 || a->wait > 0 || !(a->sec[a->level] > 0)) return a->level;
    int more = a->level > 0, fewer = a->level < a->levels - 1;
    return (more && (a->up || !fewer)) ? a->level - 1 : a->level + 1;
}

/* After a probe of more (or fewer) threads that cost `cost` seconds: the
   wait before the next one, and its direction (between the ends, on the
   way a switch went, the other way after a confirmation). */
static void pbd__team_backoff(pbd__team *a, double cost, int switched, int probed_more) {
    a->factor = switched ? PBD__PROBE_FIRST : (2 * a->factor < PBD__PROBE_BACKOFF ? 2 * a->factor : PBD__PROBE_BACKOFF);
    double floor = 0.25 * a->sec[a->level]; /* probes of equal cost still wait */
    a->wait = a->factor * (cost > floor ? cost : floor);
    if (a->level > 0 && a->level < a->levels - 1) a->up = switched ? probed_more : !probed_more;
    else a->up = a->level > 0;
    a->probes++;
}

/* The gate before a probe with more threads: do gate_seconds of barriers
   leave hope? */
static int pbd__team_gate_passes(const pbd__team *a, double gate_seconds) {
    return gate_seconds < PBD__GATE_SHARE * a->sec[a->level];
}
static void pbd__team_gate_failed(pbd__team *a, double gate_seconds) { pbd__team_backoff(a, gate_seconds, 0, 1); }

/* A substep ran at `level` in `seconds`. */
static void pbd__team_record(pbd__team *a, int level, double seconds) {
    if (!(seconds >= 0)) seconds = 0;
    if (level == a->level) {
        a->sec[level] = seconds;
        a->wait -= seconds;
        int fewer = level + 1;
        if (fewer < a->levels && a->sec[fewer] > 0 && seconds > a->sec[fewer]) {
            a->wait = 0; /* slower than fewer threads were: look again now */
            a->up = 0;
        }
        return;
    }
    double cur = a->sec[a->level];
    int more = level < a->level;
    double t_more = more ? seconds : cur, t_fewer = more ? cur : seconds;
    int keep_more = t_more < PBD__TEAM_GAIN * t_fewer;
    int switched = more == keep_more;
    a->sec[level] = seconds;
    if (switched) {
        a->level = level;
        a->switches++;
    }
    pbd__team_backoff(a, seconds > cur ? seconds - cur : cur - seconds, switched, more);
}
#endif /* PBD__OPENMP */

// ==== gpu ===================================================================
/* A GPU world (pbd_cuda.cu, built into the program with PBD_CUDA; see THE
   GPU in the manual and docs/DESIGN.md section 6). The host keeps the
   whole world as on the CPU: every call validates and changes it there, as
   for a CPU world. The device holds a copy that the steps advance:
   - a step first uploads what the host changed since the last upload
     (gpu_dirty: any call that may change the world marks it, in
     PBD__CHECK_WORLD: everything; PBD__CHECK_WORLD_PARTICLES and
     PBD__CHECK_WORLD_SETTING: what the setters a game calls every frame
     change), then runs every substep on the device;
   - after a step the host's particles are stale (gpu_host_stale); the next
     call that reads or changes the world fetches them first, once.
   The kernels run the functions marked PBD_HD, the same code as the CPU
   solver's scalar path, so a GPU world gives a CPU world's bits. */

/* The device of a new world (pbd_world_create): auto takes the GPU where
   pbd_cuda.cu finds one and logs the choice with PBD_OK. */
static pbd_result pbd__gpu_open(pbd_world *w, const pbd_world_desc *d) {
#ifdef PBD_CUDA
    char why[200] = "";
    if (d->device == PBD_DEVICE_CPU) return PBD_OK;
    pbd_result r = pbd__cuda_open(w, sizeof *w, d->device == PBD_DEVICE_AUTO, why, sizeof why);
    if (r == PBD_OK) {
        w->gpu_dirty = PBD__GPU_DIRTY_ALL;
        if (d->device == PBD_DEVICE_AUTO && d->log) d->log(d->log_user, PBD_OK, why);
        return PBD_OK;
    }
    if (d->device == PBD_DEVICE_GPU) return pbd__create_fail(d, r, why);
    if (d->log) {
        char msg[240];
        snprintf(msg, sizeof msg, "world on the CPU: %s", why);
        d->log(d->log_user, PBD_OK, msg);
    }
    return PBD_OK;
#else
    (void)w;
    if (d->device == PBD_DEVICE_GPU)
        return pbd__create_fail(d, PBD_ERROR_UNSUPPORTED,
                                "device PBD_DEVICE_GPU: this program was built without PBD_CUDA and pbd_cuda.cu");
    if (d->device == PBD_DEVICE_AUTO && d->log) /* the choice logged, as with PBD_CUDA */
        d->log(d->log_user, PBD_OK, "world on the CPU: this program was built without PBD_CUDA and pbd_cuda.cu");
    return PBD_OK;
#endif
}

static void pbd__gpu_close(pbd_world *w) {
#ifdef PBD_CUDA
    if (w->gpu) pbd__cuda_close(w);
    w->gpu = NULL;
#else
    (void)w;
#endif
}

/* The step of a GPU world (pbd_world_step has checked dt). */
static pbd_result pbd__gpu_step(pbd_world *w, float dt, int S) {
#ifdef PBD_CUDA
    /* the host's copy goes up: current first (a plugin's call in the last
       step may have marked the world after the device stepped on) */
    if (w->gpu_dirty) pbd__gpu_sync(w, 0);
    char msg[200] = "";
    pbd_result r = pbd__cuda_step(w, dt, S, msg, sizeof msg);
    if (r != PBD_OK) return pbd__fail(w, r, "%s", msg);
    w->gpu_host_stale |=
        PBD__GPU_STALE_PARTICLES | PBD__GPU_STALE_CONTACTS | PBD__GPU_STALE_NEIGHBORS | PBD__GPU_STALE_SELFCOL;
    w->time += dt;
    return PBD_OK;
#else
    (void)dt;
    (void)S;
    return pbd__fail(w, PBD_ERROR_UNSUPPORTED, "a GPU world in a program without PBD_CUDA");
#endif
}

PBDDEF pbd_device pbd_world_device(const pbd_world *w) { return w && w->gpu ? PBD_DEVICE_GPU : PBD_DEVICE_CPU; }

PBDDEF const float *pbd_world_device_positions(pbd_world *w) {
#ifdef PBD_CUDA
    if (!w || !w->gpu || !w->n) return NULL;
    if (w->gpu_dirty) { /* the host changed the world: the device gets it first */
        char msg[200] = "";
        if (pbd__cuda_step(w, 0.0f, 0, msg, sizeof msg) != PBD_OK) return NULL;
        w->gpu_dirty = 0;
    }
    return pbd__cuda_positions(w);
#else
    (void)w;
    return NULL;
#endif
}

// ==== solver ================================================================
/* The substep in the order it runs (pbd__substep_body): prediction, the
   contacts ("==== contacts"), the iterations over the groups (their
   projection: "==== groups") and the other passes (strain limits,
   strands, plugins, particle phase, self-collision, contacts), the
   velocities, damping and angular momentum; then the step around it. */

/* --- per-particle passes ---------------------------------------------------
   Steps 1, 2 and 5 of Algorithm 1 (survey 3.1). Each particle is independent,
   so they run in parallel and give the same bits for any thread count. The
   SIMD twin uses one 128-bit register per particle (x y z w) and the same
   operations in the same order as the scalar code, so both agree bit for
   bit. */

static inline PBD_HD void pbd__predict_dynamic(pbd__p4 *x, pbd__p4 *v, pbd__p4 *p, const float *gh, float damp,
                                               float h) {
#if PBD__SIMD
    simde__m128 vv = simde_mm_loadu_ps((const float *)(const void *)v);
    vv = simde_mm_add_ps(simde_mm_mul_ps(vv, simde_mm_set1_ps(damp)), simde_mm_loadu_ps(gh));
    simde_mm_storeu_ps((float *)(void *)v, vv);
    simde_mm_storeu_ps((float *)(void *)p, simde_mm_add_ps(simde_mm_loadu_ps((const float *)(const void *)x),
                                                           simde_mm_mul_ps(vv, simde_mm_set1_ps(h))));
#else
    v->x = v->x * damp + gh[0];
    v->y = v->y * damp + gh[1];
    v->z = v->z * damp + gh[2];
    v->w = v->w * damp + gh[3];
    p->x = x->x + v->x * h;
    p->y = x->y + v->y * h;
    p->z = x->z + v->z * h;
    p->w = x->w + v->w * h;
#endif
}

/* What particle i's velocity keeps in a prediction: the world's point
   damping (damp) times its object's drag factor (keep, per object, NULL
   when no object has a drag: see pbd__drag_keeps). */
static inline PBD_HD float pbd__keep_of(const pbd_world *w, const float *keep, float damp, int i) {
    int o = keep ? w->owner[i] : -1;
    return o >= 0 ? damp * keep[o] : damp;
}

/* Each object's drag factor exp(-drag h) for substeps of h into keep (on
   the host: libm's expf and a GPU's differ); whether any is below 1. */
static int pbd__drag_keeps(const pbd_world *w, float h, float *keep) {
    int on = 0;
    for (int o = 0; o < w->nobjects; ++o) {
        keep[o] = w->objects[o].s.live && w->object_drag[o] > 0 ? expf(-w->object_drag[o] * h) : 1.0f;
        on |= keep[o] < 1.0f;
    }
    return on;
}

/* A kinematic particle's prediction (on its way to its target) or a pinned
   one's; 0 for a dynamic particle. */
static inline PBD_HD int pbd__predict_held(pbd_world *w, int i, float t_kin) {
    pbd__p4 *x = &w->x[i], *v = &w->v[i], *p = &w->p[i];
    if (w->flags[i] & PBD__KINEMATIC) {
        pbd__v3 t = pbd__lerp(w->kin_from[i], w->kin_target[i], t_kin);
        p->x = t.x;
        p->y = t.y;
        p->z = t.z;
        p->w = 0;
        return 1;
    }
    if (x->w == 0) { /* pinned */
        *p = *x;
        v->x = v->y = v->z = 0;
        return 1;
    }
    return 0;
}

/* The prediction's constants for substep s of S: gravity times h (gh,
   4 floats) and the point damping factor (computed on the host, as libm's
   expf and a GPU's differ). */
static void pbd__predict_constants(const pbd_world *w, float h, float *gh, float *damp) {
    *damp = w->point_damping > 0 ? expf(-w->point_damping * h) : 1.0f;
    gh[0] = w->gravity[0] * h;
    gh[1] = w->gravity[1] * h;
    gh[2] = w->gravity[2] * h;
    gh[3] = 0.0f;
}

/* A dynamic particle's velocity change of a substep with an acceleration
   field: g = gh + h a, a from the user's callback (a non-finite component
   counts as 0); time: the substep's start. Host code (the callback is a
   host function): a GPU world's step calls it too, once per substep. */
static void pbd__field_term(const pbd_world *w, int i, double time, const float *gh, float h, float *g) {
    const pbd__p4 *x = &w->x[i], *v = &w->v[i];
    float a[3] = {0, 0, 0};
    float xx[3] = {x->x, x->y, x->z}, vv[3] = {v->x, v->y, v->z};
    w->accel(w->accel_user, i, xx, vv, time, a);
    for (int k = 0; k < 3; ++k) g[k] = gh[k] + (pbd__finite(a[k]) ? a[k] * h : 0.0f);
    g[3] = 0;
}

static void pbd__predict(pbd_world *w, float h, int s, int S) {
    float damp, gh[4];
    pbd__predict_constants(w, h, gh, &damp);
    float t_kin = (float)(s + 1) / (float)S;
    double time = w->time + (double)h * s;
    const float *keep = w->drag_on ? w->object_keep : NULL;
    int n = w->n;
    PBD__PRAGMA(omp for schedule(static))
    for (int i = 0; i < n; ++i) {
        pbd__p4 *x = &w->x[i], *v = &w->v[i], *p = &w->p[i];
        if (pbd__predict_held(w, i, t_kin)) continue;
        if (w->accel) {
            float g[4];
            pbd__field_term(w, i, time, gh, h, g);
            pbd__predict_dynamic(x, v, p, g, pbd__keep_of(w, keep, damp, i), h);
        } else {
            pbd__predict_dynamic(x, v, p, gh, pbd__keep_of(w, keep, damp, i), h);
        }
    }
}

/* Step 5 of Algorithm 1: v = (p - x) / h, x = p. */
static inline PBD_HD void pbd__velocity_one(pbd__p4 *x, pbd__p4 *v, const pbd__p4 *p, float inv_h) {
#if PBD__SIMD
    simde__m128 pp = simde_mm_loadu_ps((const float *)(const void *)p);
    simde_mm_storeu_ps((float *)(void *)v,
                       simde_mm_mul_ps(simde_mm_sub_ps(pp, simde_mm_loadu_ps((const float *)(const void *)x)),
                                       simde_mm_set1_ps(inv_h)));
    simde_mm_storeu_ps((float *)(void *)x, pp);
#else
    v->x = (p->x - x->x) * inv_h;
    v->y = (p->y - x->y) * inv_h;
    v->z = (p->z - x->z) * inv_h;
    v->w = (p->w - x->w) * inv_h;
    *x = *p;
#endif
}

static void pbd__update_velocities(pbd_world *w, float h) {
    float inv_h = 1.0f / h;
    int n = w->n;
    PBD__PRAGMA(omp for schedule(static))
    for (int i = 0; i < n; ++i) pbd__velocity_one(&w->x[i], &w->v[i], &w->p[i], inv_h);
}

/* --- damping --------------------------------------------------------------
   Mueller et al. 2007 (survey 3.7): move every velocity towards the rigid
   motion (v_cm + omega x r) of its object. Linear momentum is kept because
   the corrections sum to zero, angular because omega = I^-1 L. */

static PBD_HD int pbd__solve3(const double *A, const double *b, double *x) {
    double det =
        A[0] * (A[4] * A[8] - A[5] * A[7]) - A[1] * (A[3] * A[8] - A[5] * A[6]) + A[2] * (A[3] * A[7] - A[4] * A[6]);
    double tr = A[0] + A[4] + A[8];
    if (!(fabs(det) > PBD__SOLVE3_DET_MIN * tr * tr * tr) || !(tr > 0)) return 0;
    double inv[9] = {A[4] * A[8] - A[5] * A[7], A[2] * A[7] - A[1] * A[8], A[1] * A[5] - A[2] * A[4],
                     A[5] * A[6] - A[3] * A[8], A[0] * A[8] - A[2] * A[6], A[2] * A[3] - A[0] * A[5],
                     A[3] * A[7] - A[4] * A[6], A[1] * A[6] - A[0] * A[7], A[0] * A[4] - A[1] * A[3]};
    for (int r = 0; r < 3; ++r) x[r] = (inv[3 * r] * b[0] + inv[3 * r + 1] * b[1] + inv[3 * r + 2] * b[2]) / det;
    return 1;
}

/* --- sums over particles ----------------------------------------------------
   The sums of damping and of the angular-momentum restore run over a
   particle list (list NULL: first .. first + count) in blocks of
   PBD__SUM_BLOCK consecutive entries: each block is summed in order, then
   the blocks' sums are added in order. pbd_cuda.cu sums the blocks in
   parallel (a thread per block and component, below) and adds them in the
   same order, so a GPU world gets the same bits without a thread per
   object walking a whole cloth. */
#define PBD__SUM_BLOCK 256

static inline PBD_HD int pbd__list_at(const int *list, int first, int j) { return list ? list[j] : first + j; }
static inline PBD_HD int pbd__sum_blocks(int count) { return (count + PBD__SUM_BLOCK - 1) / PBD__SUM_BLOCK; }

/* Mass and first moments (mass times position, times velocity) of the
   particles of one kind: dynamic ones weighted by their masses (anchors
   0), or the anchors - pinned or kinematic, inverse mass 0 - with equal
   weights (anchors 1). Components: m, m x (3), m v (3). */
enum { PBD__MOM_M = 0, PBD__MOM_X = 1, PBD__MOM_V = 4, PBD__MOM_N = 7 };
typedef struct pbd__moments {
    double c[PBD__MOM_N];
} pbd__moments;
/* Angular momentum (3) and inertia tensor (9, row-major) about a centre. */
enum { PBD__SPIN_L = 0, PBD__SPIN_I = 3, PBD__SPIN_N = 12 };
typedef struct pbd__spin {
    double c[PBD__SPIN_N];
} pbd__spin;

/* Each component of a block's sums is its own sum, term by term in order:
   the CPU takes every component of a block at once (the terms computed
   once), a GPU thread one component of one block (components [c0, c1)),
   so that a cloth of a million particles has tens of thousands of
   threads, not one per 256 particles; the same additions either way. */

/* Particle i's terms of its kind's moments; 0 if of the other kind. */
static inline PBD_HD int pbd__moments_terms(const pbd_world *w, int i, int anchors, double *t) {
    const pbd__p4 *x = &w->x[i], *v = &w->v[i];
    if ((x->w == 0) != anchors) return 0;
    double m = anchors ? 1.0 : 1.0 / x->w;
    t[PBD__MOM_M] = m;
    t[PBD__MOM_X + 0] = m * x->x;
    t[PBD__MOM_X + 1] = m * x->y;
    t[PBD__MOM_X + 2] = m * x->z;
    t[PBD__MOM_V + 0] = m * v->x;
    t[PBD__MOM_V + 1] = m * v->y;
    t[PBD__MOM_V + 2] = m * v->z;
    return 1;
}
static PBD_HD void pbd__moments_block(const pbd_world *w, const int *list, int first, int count, int b, int anchors,
                                      int c0, int c1, pbd__moments *s) {
    int j1 = (b + 1) * PBD__SUM_BLOCK < count ? (b + 1) * PBD__SUM_BLOCK : count;
    double acc[PBD__MOM_N] = {0, 0, 0, 0, 0, 0, 0}; /* (not s: a GPU's s is in global memory) */
    for (int j = b * PBD__SUM_BLOCK; j < j1; ++j) {
        double t[PBD__MOM_N];
        if (!pbd__moments_terms(w, pbd__list_at(list, first, j), anchors, t)) continue;
        for (int c = c0; c < c1; ++c) acc[c] += t[c];
    }
    for (int c = c0; c < c1; ++c) s->c[c] = acc[c];
}
static PBD_HD void pbd__moments_add(pbd__moments *t, const pbd__moments *s) {
    for (int c = 0; c < PBD__MOM_N; ++c) t->c[c] += s->c[c];
}

/* Particle i's terms of the angular momentum and inertia of its kind
   about xc: with vc, of the velocities relative to vc (the rigid fit);
   vc NULL: the angular momentum of the absolute positions and velocities
   (about the origin, what pbd__momentum_before keeps). */
static inline PBD_HD int pbd__spin_terms(const pbd_world *w, int i, int anchors, const double *xc, const double *vc,
                                         double *t) {
    const pbd__p4 *x = &w->x[i], *v = &w->v[i];
    if ((x->w == 0) != anchors) return 0;
    double m = anchors ? 1.0 : 1.0 / x->w;
    double r[3] = {x->x - xc[0], x->y - xc[1], x->z - xc[2]};
    double *L = t + PBD__SPIN_L;
    if (vc) {
        double u[3] = {v->x - vc[0], v->y - vc[1], v->z - vc[2]};
        L[0] = m * (r[1] * u[2] - r[2] * u[1]);
        L[1] = m * (r[2] * u[0] - r[0] * u[2]);
        L[2] = m * (r[0] * u[1] - r[1] * u[0]);
    } else {
        L[0] = m * ((double)x->y * v->z - (double)x->z * v->y);
        L[1] = m * ((double)x->z * v->x - (double)x->x * v->z);
        L[2] = m * ((double)x->x * v->y - (double)x->y * v->x);
    }
    double rr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    for (int a = 0; a < 3; ++a)
        for (int c = 0; c < 3; ++c) t[PBD__SPIN_I + 3 * a + c] = m * ((a == c ? rr : 0) - r[a] * r[c]);
    return 1;
}
static PBD_HD void pbd__spin_block(const pbd_world *w, const int *list, int first, int count, int b, int anchors,
                                   const double *xc, const double *vc, int c0, int c1, pbd__spin *s) {
    int j1 = (b + 1) * PBD__SUM_BLOCK < count ? (b + 1) * PBD__SUM_BLOCK : count;
    double acc[PBD__SPIN_N];
    for (int c = 0; c < PBD__SPIN_N; ++c) acc[c] = 0;
    for (int j = b * PBD__SUM_BLOCK; j < j1; ++j) {
        double t[PBD__SPIN_N];
        if (!pbd__spin_terms(w, pbd__list_at(list, first, j), anchors, xc, vc, t)) continue;
        for (int c = c0; c < c1; ++c) acc[c] += t[c];
    }
    for (int c = c0; c < c1; ++c) s->c[c] = acc[c];
}
static PBD_HD void pbd__spin_add(pbd__spin *t, const pbd__spin *s) {
    for (int c = 0; c < PBD__SPIN_N; ++c) t->c[c] += s->c[c];
}

/* The whole list's sums, block by block (the CPU's way to the GPU's bits). */
static void pbd__moments_sum(const pbd_world *w, const int *list, int first, int count, int anchors, pbd__moments *t) {
    pbd__moments s;
    memset(t, 0, sizeof *t);
    for (int b = 0; b < pbd__sum_blocks(count); ++b) {
        pbd__moments_block(w, list, first, count, b, anchors, 0, PBD__MOM_N, &s);
        pbd__moments_add(t, &s);
    }
}
static void pbd__spin_sum(const pbd_world *w, const int *list, int first, int count, int anchors, const double *xc,
                          const double *vc, pbd__spin *t) {
    pbd__spin s;
    memset(t, 0, sizeof *t);
    for (int b = 0; b < pbd__sum_blocks(count); ++b) {
        pbd__spin_block(w, list, first, count, b, anchors, xc, vc, 0, PBD__SPIN_N, &s);
        pbd__spin_add(t, &s);
    }
}

/* --- the rigid fit of damping -------------------------------------------- */

/* Centre and velocity of the fit from the first moments; 0 when there is
   no particle of that kind. */
static PBD_HD int pbd__fit_centre(const pbd__moments *t, double *xc, double *vc) {
    double m = t->c[PBD__MOM_M];
    if (!(m > 0)) return 0;
    for (int a = 0; a < 3; ++a) {
        xc[a] = t->c[PBD__MOM_X + a] / m;
        vc[a] = t->c[PBD__MOM_V + a] / m;
    }
    return 1;
}
/* Its angular velocity om = I^-1 L; the return value of pbd__rigid_fit. */
static PBD_HD int pbd__fit_omega(const pbd__spin *t, int anchors, double *om) {
    if (!pbd__solve3(t->c + PBD__SPIN_I, t->c + PBD__SPIN_L, om)) {
        /* dynamic and collinear (or one particle): the rotation about the
           line is not defined and damping towards v_cm alone would not keep
           the angular momentum, so the caller skips them */
        om[0] = om[1] = om[2] = 0;
        return anchors;
    }
    return 1;
}

/* The rigid motion (centre xc, velocity vc, angular velocity om) that best
   fits the velocities of the particles list[0..count) (list NULL:
   first..first+count) of one kind (pbd__moments_block). Returns 0 when
   there is none of that kind, or, for dynamic particles, when the rotation
   is undefined (collinear); anchors that do not define a rotation (one,
   two, or in a line) give their mean velocity alone. */
static int pbd__rigid_fit(const pbd_world *w, const int *list, int first, int count, int anchors, double *xc,
                          double *vc, double *om) {
    pbd__moments t;
    pbd__spin s;
    pbd__moments_sum(w, list, first, count, anchors, &t);
    if (!pbd__fit_centre(&t, xc, vc)) return 0;
    pbd__spin_sum(w, list, first, count, anchors, xc, vc, &s);
    return pbd__fit_omega(&s, anchors, om);
}

/* Particle i's velocity, the fraction k of the way to the rigid motion. */
static PBD_HD void pbd__damp_one(pbd_world *w, int i, const double *xc, const double *vc, const double *om, float k) {
    if (w->x[i].w == 0) return;
    double r[3] = {w->x[i].x - xc[0], w->x[i].y - xc[1], w->x[i].z - xc[2]};
    double tv[3] = {vc[0] + om[1] * r[2] - om[2] * r[1], vc[1] + om[2] * r[0] - om[0] * r[2],
                    vc[2] + om[0] * r[1] - om[1] * r[0]};
    w->v[i].x += k * (float)(tv[0] - w->v[i].x);
    w->v[i].y += k * (float)(tv[1] - w->v[i].y);
    w->v[i].z += k * (float)(tv[2] - w->v[i].z);
}

/* The particles list[0..count) (list NULL: first..first+count), the
   object's range or a user cluster. Free (no anchor among them): towards
   their own rigid motion, which keeps linear and angular momentum. Held
   by anchors (pinned or kinematic particles): the anchors take momentum
   from the world anyway, and the rigid motion of the dynamic particles is
   mostly the swing about the anchors - a cloth hanging from two corners
   swings as a near-rigid pendulum, which the first rule would never damp - so
   the velocities move towards the rigid motion of the anchors instead: a
   pinned cloth comes to rest, one held by a moving (kinematic) frame
   comes to rest in that frame. k: the fraction of the way (pbd__damp_fraction). */
static void pbd__damp_particles(pbd_world *w, const int *list, int first, int count, float k) {
    double xc[3], vc[3], om[3];
    if (!pbd__rigid_fit(w, list, first, count, 1, xc, vc, om) && !pbd__rigid_fit(w, list, first, count, 0, xc, vc, om))
        return;
    for (int j = 0; j < count; ++j) pbd__damp_one(w, pbd__list_at(list, first, j), xc, vc, om, k);
}

/* The fraction of the way to the rigid motion that damping (1/s) takes in
   a substep h (on the host: libm's expf and a GPU's differ). */
static float pbd__damp_fraction(float damping, float h) { return 1.0f - expf(-damping * h); }

/* Object oi's damping, piece by piece (pbd__object_pieces): a piece torn
   off the pins is damped towards its own rigid motion, not theirs. */
static void pbd__damp_object(pbd_world *w, int oi, float h) {
    const pbd__object *o = &w->objects[oi];
    const pbd__pieces *P = pbd__object_pieces(w, oi);
    float k = pbd__damp_fraction(o->damping, h);
    if (!P) pbd__damp_particles(w, NULL, o->first, o->count, k);
    for (int p = 0; P && p < P->count; ++p)
        pbd__damp_particles(w, P->list + P->start[p], 0, P->start[p + 1] - P->start[p], k);
}

/* --- angular momentum -------------------------------------------------------
   Internal constraints conserve linear and angular momentum, and every
   single projection does so exactly (tests/test_constraints.c), but the
   velocity update v = (p - x) / h conserves angular momentum only to first
   order in h: the corrections are computed at p while the lever arms are
   x. Constraints that fight each other every substep (a balloon's pressure
   against its skin) let that error add up into a steady spin-up. So for an
   isolated object - only its own builder's groups, nothing pinned or
   kinematic - the angular momentum after the substep is made equal to the
   one right after the prediction (which holds gravity's torque) plus what
   its collider contacts gave it (see "what contacts turn"), by a rigid
   rotation about the centre of mass: positions and linear momentum do not
   change. (Restored only without contacts, a balloon resting on the ground
   turned the leak into rolling through friction.) With self-collision, "after the
   prediction" means after its speed limit, which removes momentum from
   outside: taken before it, the removed momentum would come back as spin
   every substep. */

/* Block b of object oi: components [c0, c1) of its angular momentum
   about the origin into L (see pbd__moments_block); returns 1 if the
   block holds an anchor (pinned or kinematic: the object is supported from
   outside, and L is not used). */
static PBD_HD int pbd__momentum_block(const pbd_world *w, int oi, int b, int c0, int c1, double *L) {
    const pbd__object *o = &w->objects[oi];
    int j1 = (b + 1) * PBD__SUM_BLOCK < o->count ? (b + 1) * PBD__SUM_BLOCK : o->count;
    double acc[3] = {0, 0, 0};
    int anchored = 0;
    for (int j = b * PBD__SUM_BLOCK; j < j1 && !anchored; ++j) {
        const pbd__p4 *x = &w->x[o->first + j], *v = &w->v[o->first + j];
        if ((anchored = x->w == 0)) break;
        double m = 1.0 / x->w;
        double t[3] = {m * ((double)x->y * v->z - (double)x->z * v->y), m * ((double)x->z * v->x - (double)x->x * v->z),
                       m * ((double)x->x * v->y - (double)x->y * v->x)};
        for (int c = c0; c < c1; ++c) acc[c] += t[c];
    }
    for (int c = c0; c < c1; ++c) L[c] = acc[c];
    return anchored;
}

static void pbd__momentum_before(pbd_world *w, int oi) {
    const pbd__object *o = &w->objects[oi];
    double *l = w->object_l + 4 * (size_t)oi, L[3];
    l[0] = l[1] = l[2] = 0;
    l[3] = !o->coupled;
    for (int b = 0; b < pbd__sum_blocks(o->count) && l[3]; ++b) {
        if (pbd__momentum_block(w, oi, b, 0, 3, L)) l[3] = 0;
        for (int a = 0; a < 3; ++a) l[a] += L[a];
    }
}

/* The angular velocity that gives object oi back its angular momentum l
   (pbd__momentum_before), from its spin s about its centre; 0 when there
   is nothing to do. */
static PBD_HD int pbd__momentum_omega(const double *l, const pbd__spin *s, double *om) {
    const double *L = s->c + PBD__SPIN_L;
    double dL[3] = {l[0] - L[0], l[1] - L[1], l[2] - L[2]};
    return pbd__solve3(s->c + PBD__SPIN_I, dL, om);
}

/* Particle i turned by om about c. */
static PBD_HD void pbd__spin_one(pbd_world *w, int i, const double *c, const double *om) {
    double r[3] = {w->x[i].x - c[0], w->x[i].y - c[1], w->x[i].z - c[2]};
    w->v[i].x += (float)(om[1] * r[2] - om[2] * r[1]);
    w->v[i].y += (float)(om[2] * r[0] - om[0] * r[2]);
    w->v[i].z += (float)(om[0] * r[1] - om[1] * r[0]);
}

/* Components [c0, c1) of the angular momentum (times h) that the contacts
   gave the particles of block b of [first, first + count) this substep
   (the order of pbd__momentum_block's blocks: the GPU sums them alike). */
static PBD_HD void pbd__contact_turn_block(const pbd_world *w, int first, int count, int b, int c0, int c1, double *L) {
    int j1 = (b + 1) * PBD__SUM_BLOCK < count ? (b + 1) * PBD__SUM_BLOCK : count;
    double acc[3] = {0, 0, 0};
    for (int j = b * PBD__SUM_BLOCK; j < j1; ++j) {
        int i = first + j;
        if (!w->ncontact[i] || !(w->x[i].w > 0)) continue;
        double m = 1.0 / w->x[i].w;
        for (int c = c0; c < c1; ++c) acc[c] += m * w->contact_turn[3 * (size_t)i + c];
    }
    for (int c = c0; c < c1; ++c) L[c] = acc[c];
}

/* The angular momentum an object is to have after the substep: its own
   after the prediction, l, plus what the colliders gave it, sum (the
   blocks' pbd__contact_turn_block added in block order). */
static inline PBD_HD void pbd__momentum_target(const double *l, const double *sum, float h, double *target) {
    for (int c = 0; c < 3; ++c) target[c] = l[c] + sum[c] / (double)h;
}

static void pbd__momentum_restore(pbd_world *w, int oi, float h) {
    const pbd__object *o = &w->objects[oi];
    const double *l = w->object_l + 4 * (size_t)oi;
    if (!l[3]) return;
    pbd__moments t;
    pbd__spin s;
    double c[3], vc[3], om[3], target[3], sum[3] = {0, 0, 0}, B[3];
    for (int b = 0; b < pbd__sum_blocks(o->count); ++b) {
        pbd__contact_turn_block(w, o->first, o->count, b, 0, 3, B);
        for (int a = 0; a < 3; ++a) sum[a] += B[a];
    }
    pbd__momentum_target(l, sum, h, target);
    pbd__moments_sum(w, NULL, o->first, o->count, 0, &t);
    if (!pbd__fit_centre(&t, c, vc)) return;
    pbd__spin_sum(w, NULL, o->first, o->count, 0, c, NULL, &s);
    if (!pbd__momentum_omega(target, &s, om)) return;
    for (int i = o->first; i < o->first + o->count; ++i) pbd__spin_one(w, i, c, om);
}

/* --- step ------------------------------------------------------------------- */

/* Averaged Jacobi (FleX / PhysX style): every constraint of an iteration
   reads the same positions; the corrections of each particle are summed
   (colour by colour, so without atomics and in a fixed order), then the
   average times the relaxation factor is applied. */
static void pbd__jacobi_clear(pbd_world *w) {
    PBD__PRAGMA(omp for schedule(static))
    for (int i = 0; i < w->n; ++i) w->delta[i].x = w->delta[i].y = w->delta[i].z = w->delta[i].w = 0;
}
static inline PBD_HD void pbd__jacobi_apply_one(pbd_world *w, int i) {
    const pbd__p4 *d = &w->delta[i];
    if (d->w > 0) {
        float s = w->jacobi_relax / d->w;
        w->p[i].x += d->x * s;
        w->p[i].y += d->y * s;
        w->p[i].z += d->z * s;
    }
}
static void pbd__jacobi_apply(pbd_world *w) {
    PBD__PRAGMA(omp for schedule(static))
    for (int i = 0; i < w->n; ++i) pbd__jacobi_apply_one(w, i);
}

static void pbd__reset_multipliers(pbd_world *w) {
    for (int g = 0; g < w->ngroups; ++g)
        if (w->groups[g].count) memset(w->groups[g].lambda, 0, sizeof(float) * (size_t)w->groups[g].count);
}

/* --- non-finite steps -------------------------------------------------------
   A step that produces NaN or infinity (an acceleration field or a plugin
   that returns one, velocities that overflow, ...) must not corrupt the
   world silently: at its end every position and velocity is tested, and
   if one is not finite the world goes back to its state at the start of
   the step. What a step changes and snapshots hold: the particles' x and
   v, the objects' coupled flags, the colliders' poses, the self-collision
   candidates, the fluids' pressures (pbd__fluid_lambda's warm start), the
   XPBD multipliers (reset every substep, and left zero at
   the end of every step, so the rollback zeroes them) and the plugins'
   own state (their rollback callbacks); the rest is scratch rebuilt
   every substep. The copies live in memory sized when things are added:
   no allocation in the step. */
/* The passes over every particle at a step's ends (the copy above, the
   kinematic particles' start, the non-finite test below) run on the team
   of the last substep, in blocks: serial, they were a quarter of a
   1-thread step of 10 000 x 32 hair (little work per particle), and the
   whole of it that two threads could not share. Small worlds stay on one
   thread (a team costs microseconds). The blocks' results do not depend
   on the team. */
enum { PBD__ENDS_BLOCK = 8192, PBD__ENDS_PARALLEL_MIN = 65536 };
static int pbd__ends_team(const pbd_world *w) {
    return w->n >= PBD__ENDS_PARALLEL_MIN && w->last_team > 1 ? w->last_team : 1;
}
static int pbd__ends_blocks(const pbd_world *w) { return (w->n + PBD__ENDS_BLOCK - 1) / PBD__ENDS_BLOCK; }

/* Particles [i0, i1): x, v and pressure kept; a kinematic particle's way
   starts at x. */
static void pbd__step_keep_block(pbd_world *w, int i0, int i1) {
    size_t n = (size_t)(i1 - i0);
    memcpy(w->x_step + i0, w->x + i0, sizeof(pbd__p4) * n);
    memcpy(w->v_step + i0, w->v + i0, sizeof(pbd__p4) * n);
    memcpy(w->pressure_step + i0, w->pressure + i0, sizeof(float) * n);
    for (int i = i0; i < i1; ++i)
        if (w->flags[i] & PBD__KINEMATIC) w->kin_from[i] = pbd__p3(w->x[i]);
}

static void pbd__step_keep(pbd_world *w) {
    int nb = pbd__ends_blocks(w), team = pbd__ends_team(w);
    (void)team;
    PBD__PRAGMA(omp parallel for num_threads(team) schedule(static) if (team > 1))
    for (int b = 0; b < nb; ++b) {
        int i0 = b * PBD__ENDS_BLOCK;
        pbd__step_keep_block(w, i0, w->n - i0 < PBD__ENDS_BLOCK ? w->n : i0 + PBD__ENDS_BLOCK);
    }
    w->pressure_h_step = w->pp.pressure_h;
    for (int o = 0; o < w->nobjects; ++o) w->object_coupled[o] = w->objects[o].coupled;
    for (int c = 0; c < w->ncolliders; ++c) {
        memcpy(w->pose_step[c].pos, w->colliders[c].pos, sizeof w->colliders[c].pos);
        memcpy(w->pose_step[c].rot, w->colliders[c].rot, sizeof w->colliders[c].rot);
    }
    if (w->selfcol) pbd__selfcol_keep_step(w, 0);
    pbd__lras_keep(w, 0);
}

static void pbd__step_rollback(pbd_world *w) {
    if (w->n > 0) {
        memcpy(w->x, w->x_step, sizeof(pbd__p4) * (size_t)w->n);
        memcpy(w->v, w->v_step, sizeof(pbd__p4) * (size_t)w->n);
        memcpy(w->p, w->x, sizeof(pbd__p4) * (size_t)w->n); /* as after a step */
        memcpy(w->pressure, w->pressure_step, sizeof(float) * (size_t)w->n);
    }
    w->pp.pressure_h = w->pressure_h_step;
    for (int o = 0; o < w->nobjects; ++o) w->objects[o].coupled = w->object_coupled[o];
    for (int c = 0; c < w->ncolliders; ++c) {
        memcpy(w->colliders[c].pos, w->pose_step[c].pos, sizeof w->colliders[c].pos);
        memcpy(w->colliders[c].rot, w->pose_step[c].rot, sizeof w->colliders[c].rot);
    }
    if (w->selfcol) pbd__selfcol_keep_step(w, 1);
    pbd__lras_keep(w, 1);
    pbd__reset_multipliers(w);
    pbd__plugins_rollback(w);
}

/* Whether any of n floats is NaN or infinite: an OR of the exponent
   fields plus one ULP of exponent carries into the sign bit exactly for
   the all-ones exponent (integer operations with no branch). With SIMD, W
   floats at a time, an OR of the lanes whose exponent bits are all ones
   (gcc 12 vectorises the integer loop at -O3 but not at -O2, where it took
   as long as the copy at the step's start: 10 000 x 32 hair). Integer
   operations both: a float test (x - x != 0) is folded away under
   -ffast-math, and with it every rolled-back step. */
static int pbd__any_nonfinite(const float *a, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        memcpy(&u, &a[i], sizeof u);
        bad |= (u & 0x7f800000u) + 0x00800000u;
    }
    return (bad & 0x80000000u) != 0;
}
static int pbd__any_nonfinite_fast(const float *a, size_t n, int simd) {
    size_t i = 0;
#if PBD__W > 1
    if (simd) {
        pbd__vm m0 = pbd__vnonfinite(pbd__vset1(0.0f)), m1 = m0; /* no lane */
        for (; i + 2 * PBD__W <= n; i += 2 * PBD__W) {
            m0 = pbd__vor_m(m0, pbd__vnonfinite(pbd__vload(a + i)));
            m1 = pbd__vor_m(m1, pbd__vnonfinite(pbd__vload(a + i + PBD__W)));
        }
        if (pbd__vany(pbd__vor_m(m0, m1))) return 1;
    }
#else
    (void)simd;
#endif
    return pbd__any_nonfinite(a + i, n - i);
}

/* Whether any position or velocity is not finite (block by block, as
   pbd__step_keep). */
static int pbd__any_particle_nonfinite(const pbd_world *w) {
    int nb = pbd__ends_blocks(w), team = pbd__ends_team(w), bad = 0;
    (void)team;
    PBD__PRAGMA(omp parallel for num_threads(team) schedule(static) if (team > 1) reduction(| : bad))
    for (int b = 0; b < nb; ++b) {
        int i0 = b * PBD__ENDS_BLOCK;
        size_t n = (size_t)(w->n - i0 < PBD__ENDS_BLOCK ? w->n - i0 : PBD__ENDS_BLOCK);
        bad |=
            pbd__any_nonfinite_fast(&w->x[i0].x, 4 * n, w->simd) | pbd__any_nonfinite_fast(&w->v[i0].x, 4 * n, w->simd);
    }
    return bad;
}

/* The first particle whose position or velocity is not finite, a free
   one (inverse mass > 0) before a held one: a pinned or kinematic
   particle gets NaN only from its constraints' corrections (0 x NaN), so
   it is not where a blow-up began (an audit's cloth, pinned at particle
   0, blown up at particle 5, was reported at particle 0). -1: none. */
static int pbd__first_nonfinite(const pbd_world *w) {
    if (w->n == 0 || !pbd__any_particle_nonfinite(w)) return -1;
    int held = -1;
    for (int i = 0; i < w->n; ++i)
        if (pbd__any_nonfinite(&w->x[i].x, 4) || pbd__any_nonfinite(&w->v[i].x, 4)) {
            if (w->x[i].w > 0) return i;
            if (held < 0) held = i;
        }
    return held;
}

/* Serial below this many particles + constraints: a barrier costs
   microseconds. A particle with particle contact or in a fluid counts
   PBD__PP_WORK: every iteration reads its neighbour list (10-30 pairs),
   which a fluid's builds every substep. Counted as one, 2000 grains (16
   substeps of 4 iterations: then 45 ms a step on 1 thread, 22 on 2; now
   6.6 and 3.7, bench/granular.c) and any
   fluid under 8192 particles never reached the default policy's
   measurements and stepped on one thread. (inline: a build without
   OpenMP has no use for it) */
#define PBD__PP_WORK 16
static inline int pbd__parallel_worth_it(const pbd_world *w) {
    long work = w->n + pbd__plugins_work(w) + pbd__extras_work(w) + (long)w->pp.np * PBD__PP_WORK;
    for (int g = 0; g < w->ngroups; ++g) work += w->groups[g].count;
    return work >= PBD__PARALLEL_MIN;
}

/* One substep (docs/DESIGN.md section 4.2), in one parallel region: every thread
   runs this function; `omp for` shares out the loops and `omp single` runs
   the serial parts, each with its barrier. */
static void pbd__substep_body(pbd_world *w, float h, int s, int S) {
    pbd__predict(w, h, s, S);
    PBD__PRAGMA(omp single) {
        pbd__collider_poses(w, s, S);
        pbd__reset_multipliers(w);
        if (!w->selfcol)
            for (int o = 0; o < w->nobjects; ++o) pbd__momentum_before(w, o);
    }
    if (w->selfcol) {
        /* the angular momentum to keep is taken after the speed limit of
           self-collision, which acts from outside like a collider: taken
           before it, the momentum it removes would come back as spin
           every substep, and a falling cloth would spin up without bound */
        pbd__selfcol_detect(w, h);
        PBD__PRAGMA(omp single)
        for (int o = 0; o < w->nobjects; ++o) pbd__momentum_before(w, o);
    }
    pbd__plugins_call(w, PBD__PLUGIN_BEGIN_SUBSTEP, h, s, S, -1);
    pbd__generate_contacts(w, h);
    pbd__pp_begin_substep(w, s);
    for (int it = 0; it < w->iterations; ++it) {
        if (w->jacobi) pbd__jacobi_clear(w);
        for (int g = 0; g < w->ngroups; ++g)
            if (w->groups[g].enabled) pbd__sweep_group(w, &w->groups[g], h, it & 1);
        if (w->jacobi) pbd__jacobi_apply(w);
        pbd__strain_limits_project(w);
        pbd__strands_project(w, it);
        pbd__plugins_call(w, PBD__PLUGIN_PROJECT, h, s, S, it);
        pbd__pp_project(w, it);
        if (w->selfcol) pbd__selfcol_project(w);
        pbd__project_contacts(w);
        pbd__plugins_call(w, PBD__PLUGIN_PROJECT_AFTER_CONTACTS, h, s, S, it);
    }
    for (int it = w->iterations, nit = pbd__fluid_iterations(w); it < nit; ++it) { /* a fluid's own (see there) */
        pbd__pp_project(w, it);
        pbd__project_contacts(w);
    }
    pbd__update_velocities(w, h);
    pbd__strands_velocities(w, h);
    pbd__contact_velocities(w, h);
    if (w->selfcol) pbd__selfcol_velocities(w);
    pbd__pp_end_substep(w, h);
    pbd__plugins_call(w, PBD__PLUGIN_END_SUBSTEP, h, s, S, -1);
    PBD__PRAGMA(omp single)
    for (int o = 0; o < w->nobjects; ++o) {
        pbd__momentum_restore(w, o, h);
        if (w->objects[o].damping > 0) pbd__damp_object(w, o, h);
    }
    PBD__PRAGMA(omp single)
    pbd__clusters_damp(w, h);
}

#if PBD__OPENMP
static void pbd__substep_on(pbd_world *w, float h, int s, int S, int threads) {
    w->last_team = threads;
    if (threads > 1) {
        PBD__PRAGMA(omp parallel num_threads(threads)) {
            /* the team OpenMP gave: inside a parallel region of yours, where
               it nests none, 1 (an audit: the world reported the 2 it asked for) */
            PBD__PRAGMA(omp master)
            w->last_team = omp_get_num_threads();
            pbd__substep_body(w, h, s, S);
        }
    } else {
        pbd__substep_body(w, h, s, S);
    }
}

/* The policy's clock in seconds: pbd_world.team_clock, else omp_get_wtime. */
static double pbd__team_now(const pbd_world *w) { return w->team_clock ? w->team_clock() : omp_get_wtime(); }
/* The gate of the default policy (see "// ==== threads"): the seconds a
   team of `threads` takes to meet PBD__GATE_BARRIERS times. */
static double pbd__team_gate(const pbd_world *w, int threads) {
    double t0 = pbd__team_now(w);
    PBD__PRAGMA(omp parallel num_threads(threads)) {
        for (int k = 0; k < PBD__GATE_BARRIERS; ++k) { PBD__PRAGMA(omp barrier) }
    }
    return pbd__team_now(w) - t0;
}

/* A substep under the default policy: on the level pbd__team_next
   chooses, behind the gate when that probes more threads, timed. */
static void pbd__substep_default(pbd_world *w, float h, int s, int S) {
    pbd__team *a = &w->team;
    int max = omp_get_max_threads();
    if (a->max != max) pbd__team_init(a, max); /* first use, or omp_set_num_threads */
    int level = pbd__team_next(a);
    if (level < a->level) {
        double g = pbd__team_gate(w, pbd__team_size(a, level));
        if (!pbd__team_gate_passes(a, g)) {
            pbd__team_gate_failed(a, g);
            level = a->level;
        }
    }
    double t0 = pbd__team_now(w);
    pbd__substep_on(w, h, s, S, pbd__team_size(a, level));
    pbd__team_record(a, level, pbd__team_now(w) - t0);
}
#endif

static void pbd__substep(pbd_world *w, float h, int s, int S) {
#if PBD__OPENMP
    if (w->threads > 1) {
        pbd__substep_on(w, h, s, S, w->threads);
        return;
    }
    if (w->threads == 0 && omp_get_max_threads() > 1 && pbd__parallel_worth_it(w)) {
        pbd__substep_default(w, h, s, S);
        return;
    }
#endif
    w->last_team = 1;
    pbd__substep_body(w, h, s, S);
}

PBDDEF int pbd_world_thread_team(const pbd_world *w) { return w ? w->last_team : 0; }

/* The world's substeps per reference_dt: every step keeps about the
   reference's substep, a longer one with more substeps, a shorter one
   with fewer (at least 1). The 0.1% slack keeps a dt written as 0.016667
   one reference step (1.00002 of 1/60). Why fewer: at a limited number of
   iterations a resting cloth's stretch depends on the substep (gravity
   moves it by g h^2 a substep), and a step of another substep shifts it,
   which its velocities then carry: the README's cloth at rest on its
   sphere, stepped at 144 Hz after 60 Hz, jolted to 5.3 m/s and moved at
   1 m/s 2 s later at 4 substeps of 1.7 ms; at 2 of 3.5 ms, 0.6 and 0.06
   m/s. */
static int pbd__reference_substeps(const pbd_world *w, float dt) {
    if (!(w->reference_dt > 0)) return w->substeps;
    double n = ceil((double)w->substeps * (double)dt / ((double)w->reference_dt * 1.001));
    return n > 1000 ? 1000 : n < 1 ? 1 : (int)n;
}

PBDDEF int pbd_world_step_substeps(const pbd_world *w, float dt) {
    if (!w || !pbd__finite(dt) || !(dt > 0)) return 0;
    int S = pbd__reference_substeps(w, dt), Sf = pbd__fluid_substeps(w, dt), Sc = pbd__cloth_substeps(w, dt);
    int Sg = pbd__grain_substeps(w, dt);
    S = Sf > S ? Sf : S;
    S = Sg > S ? Sg : S;
    return Sc > S ? Sc : S;
}

static pbd_result pbd__world_step(pbd_world *w, float dt);
/* Called from inside a parallel region of yours (each of your threads
   stepping its own world), the step runs in a team of one of its own: its
   orphaned worksharing (`omp for`, `single`, barriers, which a 1-thread
   step runs outside any region of its own) would otherwise bind to your
   team, whose other threads never reach them (a deadlock). */
PBDDEF pbd_result pbd_world_step(pbd_world *w, float dt) {
#if PBD__OPENMP
    if (omp_get_level() > 0) {
        pbd_result r = PBD_OK;
        PBD__PRAGMA(omp parallel num_threads(1))
        r = pbd__world_step(w, dt);
        return r;
    }
#endif
    return pbd__world_step(w, dt);
}
/* Whether a step of t seconds is carried over rather than simulated:
   shorter than PBD__CARRY_PARTS-th of the reference substep (0.52 ms at
   the defaults), where the error the steps before it left, turned into
   velocity by its one substep (error / h), jolted a resting cloth at
   11 m/s for 10 us and 1.1 m/s for 0.1 ms; carried, the next step
   simulates it (see pbd_world_step). Never with a fixed substep count
   (reference_dt 0), whose steps are the user's to choose. */
#define PBD__CARRY_PARTS 8
static int pbd__step_carried(const pbd_world *w, float t) {
    return w->reference_dt > 0 && t < w->reference_dt / (float)(PBD__CARRY_PARTS * w->substeps);
}

static pbd_result pbd__world_step(pbd_world *w, float dt_in) {
    if (!w) return pbd__null_world(); /* not PBD__CHECK_WORLD: a GPU world's step needs no fetch */
    if (!(dt_in >= PBD_MIN_TIME_STEP && dt_in <= PBD_MAX_TIME_STEP))
        return pbd__fail(w, PBD_ERROR_INVALID_TIME_STEP, "dt = %g s is outside [%g, %g] s", (double)dt_in,
                         (double)PBD_MIN_TIME_STEP, (double)PBD_MAX_TIME_STEP);
    float dt = dt_in + w->carry; /* what this step simulates */
    if (pbd__step_carried(w, dt)) {
        w->carry = dt;
        return PBD_OK;
    }
    int S = pbd_world_step_substeps(w, dt);
    if (w->tear_stale) { /* see pbd__tear_tables */
        pbd_result r = pbd__tear_tables(w, NULL, 1);
        if (r != PBD_OK) return pbd__fail(w, r, "no memory for the tables of the particles a tear made");
        w->tear_stale = 0;
    }
    if (w->gpu) {
        pbd_result r = pbd__gpu_step(w, dt, S);
        if (r == PBD_OK) w->carry = 0;
        return r;
    }
    float h = dt / (float)S;
    pbd__step_keep(w);
    w->drag_on = pbd__drag_keeps(w, h, w->object_keep);
    pbd__fluid_begin_step(w, h);
    pbd__plugins_step(w, dt, 0);
    if (w->selfcol) pbd__selfcol_begin_step(w);
    for (int s = 0; s < S; ++s) pbd__substep(w, h, s, S);
    for (int c = 0; c < w->ncolliders; ++c) {
        pbd__collider *col = &w->colliders[c];
        memcpy(col->pos, col->to_pos, sizeof col->pos);
        memcpy(col->rot, col->to_rot, sizeof col->rot);
    }
    pbd__plugins_step(w, dt, 1);
    pbd__reset_multipliers(w); /* zero between steps: what a rollback restores */
    int bad = pbd__first_nonfinite(w);
    if (bad >= 0) {
        int o = pbd__object_of(w, bad);
        char obj[32] = "no object";
        if (o >= 0) snprintf(obj, sizeof obj, "object %d", o);
        pbd__step_rollback(w);
        /* the usual cause that is no input error: masses too far apart
           for float in one object (PBD_MAX_MASS); the first bad particle
           is where the blow-up was found, not where it began */
        int first = o >= 0 ? w->objects[o].first : 0, count = o >= 0 ? w->objects[o].count : w->n, lo = -1, hi = -1;
        for (int i = first; i < first + count; ++i) {
            if (!(w->x[i].w > 0)) continue;
            if (lo < 0 || w->mass[i] < w->mass[lo]) lo = i;
            if (hi < 0 || w->mass[i] > w->mass[hi]) hi = i;
        }
        char span[128] = "";
        if (lo >= 0 && w->mass[hi] > 1e11f * w->mass[lo])
            snprintf(span, sizeof span, "; its masses span %g kg (particle %d) to %g kg (particle %d), too far apart",
                     (double)w->mass[lo], lo, (double)w->mass[hi], hi);
        return pbd__fail(w, PBD_ERROR_NOT_FINITE,
                         "the step made particle %d (%s) non-finite; the world is back at its state before the step%s",
                         bad, obj, span);
    }
    pbd__lras_tighten(w);
    w->time += dt;
    w->carry = 0;
    return PBD_OK;
}

// ==== validation ============================================================
/* What pbd_world_restore checks in a snapshot before it swaps it in (the
   invariants every section relies on; section "world", snapshot). It
   reads every kind of record, so it comes last. */

static int pbd__meshcol_index_ok(const pbd_world *w, const pbd__collider *c);
/* pbd_world.owner of a restored world: each live object's and fluid's
   range is its own (ranges do not overlap), a removed particle has no
   owner, and any other particle none or a live object (a torn cloth's
   copies). */
static pbd_result pbd__owners_build(pbd_world *t) {
    if (t->n > 0 && !t->owner) return PBD_ERROR_BAD_SNAPSHOT;
    int nf = t->pp.nfluids;
    for (int k = 0; k < t->nobjects + nf; ++k) {
        int first, count, mark;
        if (k < t->nobjects) {
            if (!t->objects[k].s.live) continue;
            first = t->objects[k].first, count = t->objects[k].count, mark = k;
        } else {
            if (!t->pp.fluids[k - t->nobjects].s.live) continue;
            first = t->pp.fluids[k - t->nobjects].first, count = t->pp.fluids[k - t->nobjects].count;
            mark = -2 - (k - t->nobjects);
        }
        if (first < 0 || count < 0 || first > t->n - count) return PBD_ERROR_BAD_SNAPSHOT;
        for (int i = first; i < first + count; ++i)
            if (t->owner[i] != mark) return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int i = 0; i < t->n; ++i) {
        int o = t->owner[i];
        if ((t->flags[i] & PBD__FREE) ? o != -1
                                      : o < -1 - nf || (o >= 0 && (o >= t->nobjects || !t->objects[o].s.live)))
            return PBD_ERROR_BAD_SNAPSHOT;
        if (o <= -2 && (!t->pp.fluids[-2 - o].s.live || i < t->pp.fluids[-2 - o].first ||
                        i >= t->pp.fluids[-2 - o].first + t->pp.fluids[-2 - o].count))
            return PBD_ERROR_BAD_SNAPSHOT;
    }
    return PBD_OK;
}
/* perm[0..n) holds every one of 0..n-1 once. Marks seen values by the
   sign of their entry (v -> -1 - v) and puts every entry back. */
static int pbd__is_permutation(int *perm, int n) {
    int ok = 1;
    for (int i = 0; i < n && ok; ++i)
        if (perm[i] < 0 || perm[i] >= n) ok = 0;
    for (int i = 0; i < n && ok; ++i) {
        int v = perm[i] < 0 ? -1 - perm[i] : perm[i];
        if (perm[v] < 0) ok = 0; /* seen twice */
        else perm[v] = -1 - perm[v];
    }
    for (int i = 0; i < n; ++i)
        if (perm[i] < 0) perm[i] = -1 - perm[i];
    return ok;
}
/* The slot headers of a pool read as raw bytes. */
static int pbd__slots_ok(const void *records, size_t stride, int n, int seq) {
    for (int i = 0; i < n; ++i) {
        const pbd__slot *s = pbd__slot_of(records, stride, i);
        if (s->gen > PBD__GEN_MASK || (s->live != 0 && s->live != 1) || s->seq < 0 || s->seq > seq) return 0;
    }
    return 1;
}
static pbd_result pbd__validate_restored(const pbd_world *t) {
    if (!pbd__slots_ok(t->objects, sizeof *t->objects, t->nobjects, t->seq) ||
        !pbd__slots_ok(t->colliders, sizeof *t->colliders, t->ncolliders, t->seq) ||
        !pbd__slots_ok(t->pp.fluids, sizeof *t->pp.fluids, t->pp.nfluids, t->seq))
        return PBD_ERROR_BAD_SNAPSHOT;
    if (!pbd__finite_n(t->gravity, 3) || !pbd__finite(t->point_damping) || t->point_damping < 0 ||
        !(t->jacobi_relax > 0 && t->jacobi_relax <= 2) || !pbd__finite(t->time))
        return PBD_ERROR_BAD_SNAPSHOT;
    if (t->n > 0 && (!pbd__finite_n(&t->x[0].x, 4 * (size_t)t->n) || !pbd__finite_n(&t->v[0].x, 4 * (size_t)t->n) ||
                     !pbd__finite_n(t->mass, (size_t)t->n) || !pbd__finite_n(t->radius, (size_t)t->n) ||
                     !pbd__finite_n(&t->kin_target[0].x, 3 * (size_t)t->n)))
        return PBD_ERROR_BAD_SNAPSHOT;
    for (int i = 0; i < t->n; ++i)
        if (t->mass[i] < 0 || t->radius[i] < 0 || t->flags[i] > 31 ||
            t->x[i].w != pbd__inv_mass(t->mass[i], t->flags[i]))
            return PBD_ERROR_BAD_SNAPSHOT;
    for (int gi = 0; gi < t->ngroups; ++gi) {
        const pbd__group *g = &t->groups[gi];
        if (!g->s.live) continue;
        if (g->count <= 0 || !pbd__finite(g->compliance) || g->compliance < 0 ||
            !(g->stiffness >= 0 && g->stiffness <= 1) || !(g->pressure > 0) || !pbd__finite(g->pressure) ||
            !pbd__finite_n(g->rest, (size_t)g->count * g->rest_stride) || !pbd__finite_n(g->lambda, (size_t)g->count) ||
            g->rest_stride != pbd__rest_stride_table[g->type])
            return PBD_ERROR_BAD_SNAPSHOT;
        /* the rest values pbd_add_constraints accepts: lengths, areas and
           thicknesses >= 0, angles in [-pi, pi], volumes != 0 (a forged
           rest length of -4e17 would blow a balloon up to NaN on its first
           step: tests/fuzz/fuzz_restore.c) */
        for (int c = 0; g->type < PBD_CONSTRAINT_TYPE_SIMPLE_COUNT && g->rest_stride == 1 && c < g->count; ++c) {
            float r = g->rest[c];
            if (g->type == PBD_CONSTRAINT_BENDING_DIHEDRAL ? !(fabsf(r) <= 3.14159265358979f)
                : g->type == PBD_CONSTRAINT_TET_VOLUME     ? r == 0
                                                           : r < 0)
                return PBD_ERROR_BAD_SNAPSHOT;
        }
        /* colours: offsets from 0 to count, never decreasing (the solver
           indexes with them); attachments' slots a permutation */
        if (g->overflow != 0 && g->overflow != 1) return PBD_ERROR_BAD_SNAPSHOT;
        if (g->type == PBD_CONSTRAINT_MESH_VOLUME ? g->ncolors != 0 : (g->ncolors < 1 || g->ncolors > PBD__MAX_COLORS))
            return PBD_ERROR_BAD_SNAPSHOT;
        for (int c = 0; c < g->ncolors; ++c)
            if (g->color_start[c] > g->color_start[c + 1]) return PBD_ERROR_BAD_SNAPSHOT;
        if (g->ncolors && (g->color_start[0] != 0 || g->color_start[g->ncolors] != g->count))
            return PBD_ERROR_BAD_SNAPSHOT;
        if ((g->type == PBD_CONSTRAINT_ATTACHMENT) != (g->slot != NULL)) return PBD_ERROR_BAD_SNAPSHOT;
        for (int c = 0; g->slot && c < g->count; ++c)
            if (g->slot[c] < 0 || g->slot[c] >= g->count) return PBD_ERROR_BAD_SNAPSHOT;
        if (g->type == PBD_CONSTRAINT_MESH_VOLUME) {
            if (g->count != 1 || g->arity != 0 || g->nverts <= 0 || g->ntris <= 0) return PBD_ERROR_BAD_SNAPSHOT;
            for (int k = 0; k < g->nverts; ++k)
                if (g->verts[k] < 0 || g->verts[k] >= t->n) return PBD_ERROR_BAD_SNAPSHOT;
            for (long k = 0; k < 3L * g->ntris; ++k)
                if (g->idx[k] < 0 || g->idx[k] >= g->nverts) return PBD_ERROR_BAD_SNAPSHOT;
        } else {
            if (g->arity != pbd__arity_table[g->type] || g->nverts != 0 || g->ntris != 0) return PBD_ERROR_BAD_SNAPSHOT;
            for (long k = 0; k < (long)g->count * g->arity; ++k) {
                int lo = (g->type == PBD_CONSTRAINT_ATTACHMENT && (k & 1)) ? -1 : 0;
                if (g->idx[k] < lo || g->idx[k] >= t->n) return PBD_ERROR_BAD_SNAPSHOT;
            }
        }
    }
    for (int o = 0; o < t->nobjects; ++o) {
        const pbd__object *ob = &t->objects[o];
        if (!ob->s.live) continue;
        if (ob->first < 0 || ob->count < 0 || ob->first > t->n - ob->count || !pbd__finite(ob->damping) ||
            ob->damping < 0 || (ob->coupled != 0 && ob->coupled != 1) || ob->tethers < PBD__TETHERS_OFF ||
            ob->tethers > PBD__TETHERS_STRAIGHT || ob->lra < -1 || ob->lra >= t->nlras ||
            !pbd__finite_n(&ob->gravity_cfl, 3) || ob->gravity_cfl < 0 || ob->hang < 0 || ob->edge < 0)
            return PBD_ERROR_BAD_SNAPSHOT;
        if (ob->perm && !pbd__is_permutation(ob->perm, ob->count)) return PBD_ERROR_BAD_SNAPSHOT;
        for (int k = 0; k < 4; ++k) /* its parts: -1 (none) or a group */
            if (ob->groups[k] < -1 || ob->groups[k] >= t->ngroups) return PBD_ERROR_BAD_SNAPSHOT;
        if (t->object_drag && (!pbd__finite(t->object_drag[o]) || t->object_drag[o] < 0)) return PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int c = 0; c < t->ncolliders; ++c) {
        const pbd__collider *col = &t->colliders[c];
        if (!col->s.live) continue;
        if (col->shape < 0 || col->shape > PBD_COLLIDER_SDF_GRID || !pbd__finite_n(&col->radius, 8) ||
            !pbd__finite_n(col->pos, 14))
            return PBD_ERROR_BAD_SNAPSHOT;
        if (col->shape >= PBD_COLLIDER_MESH && !pbd__meshcol_index_ok(t, col)) return PBD_ERROR_BAD_SNAPSHOT;
    }
    return pbd__validate_extras(t);
}

#ifdef PBD__POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#endif
#endif /* PBD_IMPLEMENTATION_INCLUDED */
#endif /* PBD_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
This software is available under 2 licenses -- choose whichever you prefer.
------------------------------------------------------------------------------
ALTERNATIVE A - MIT License
Copyright (c) 2026 the pbd authors
Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:
The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.
THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
ALTERNATIVE B - Public Domain (www.unlicense.org)
This is free and unencumbered software released into the public domain.
Anyone is free to copy, modify, publish, use, compile, sell, or distribute this
software, either in source code form or as a compiled binary, for any purpose,
commercial or non-commercial, and by any means.
In jurisdictions that recognize copyright laws, the author or authors of this
software dedicate any and all copyright interest in the software to the public
domain. We make this dedication in good faith to the benefit of the public at
large and to the detriment of our heirs and successors in perpetuity.
------------------------------------------------------------------------------
*/
