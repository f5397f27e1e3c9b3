/* pbd_upsample.h - v0.1 - coarse-to-fine upsampling for pbd.h: subdivision
   and two-scale detail, wrinkle meshes, physics-inspired upsampling (PIU),
   weighted pose-space deformation (WPSD), polynomial displacement maps (PDM).

   MANUAL
   ======
   Include pbd.h's implementation somewhere, and in *one* C or C++ file:

       #define PBD_UPSAMPLE_IMPLEMENTATION
       #include "pbd_upsample.h"

   Every other file includes "pbd_upsample.h" alone. Fitting runs offline;
   evaluation (pbd_up_model_eval) runs every frame.

   The method reference is section 5 ("Data-driven upsampling") and
   section 3.6 ("Wrinkle meshes") of Bender et al. 2017, "A survey on
   position based dynamics".

   CONTENTS (declarations and implementation in this order; search for
   "// ==== <name>")
       ==== config          macros, OpenMP, SIMD
       ==== model           the common model: eval, save/load, destroy
       ==== subdivision     Loop subdivision as a sparse stencil matrix,
                            local frames, two-scale detail (survey 5.1)
       ==== wrinkle         wrinkle meshes (survey 3.6)
       ==== training        training pairs from pbd simulations
       ==== piu             physics-inspired upsampling (survey 5.2.3)
       ==== wpsd            weighted pose-space deformation (5.2.1)
       ==== pdm             polynomial displacement maps (5.2.2)
       ==== method table    (implementation only) one row per method

   CONFIG MACROS (define before including the implementation)
       PBD_UPSAMPLE_IMPLEMENTATION  emit the implementation here
       PBD_STATIC           make every function static (as pbd.h)
       PBD_NO_SIMD          scalar reference kernels only
       PBD_SIMD_WIDTH       4, 8 or 16: cap the SIMD width (pbd.h decides
                            SIMD for every header: PBD_SIMD_LANES in its
                            "==== config"; pbd_simd_path() and
                            pbd_simd_width() report it)
       PBD_NO_OPENMP        never use OpenMP even with -fopenmp
       PBD_UP_MALLOC(sz) / PBD_UP_FREE(p)  replace malloc/free (both or none)

   ERRORS follow pbd.h's CONVENTIONS: every call that fails returns its
   pbd_result with a message naming what was wrong and the offending value
   or index. Models, training sets and subdivision have no world: their
   calls (fitting, eval, save/load, subdivide) leave the message in
   pbd_last_error() (per thread). A wrinkle mesh's calls write it to its
   world's pbd_world_last_error() (pbd_up_wrinkle_world) and log; a
   failing pbd_up_wrinkle_create, whose world is destroyed with it, leaves
   it in pbd_last_error(). A failing call changes nothing.

   THE COMMON MODEL API (section "model")
   Every method produces an opaque pbd_up_model (coarse vertex count,
   detail vertex count, method) with the same life cycle:

       pbd_up_model *m = NULL;
       pbd_up_subdivision_create(tris, ntris, nverts, 2, &m);  // or a fit
       pbd_up_model_eval(m, coarse_xyz, detail_xyz);                 // per frame
       size_t n = pbd_up_model_save_size(m);                   // offline
       pbd_up_model_save(m, buf, n);
       pbd_up_model_load(buf, n, &m2);   // evaluates bit-identically
       pbd_up_model_destroy(m);

   Positions are 3 floats per vertex. pbd_up_model_eval never allocates; it
   refuses NaN/Inf input (PBD_ERROR_NOT_FINITE), wrong sizes
   (pbd_up_model_eval_checked), untrained models (PBD_ERROR_INVALID_ARGUMENT),
   and a result that came out NaN or infinite from finite input
   (PBD_ERROR_NOT_FINITE: one coarse coordinate set to 1e30 m made 618 of
   WPSD's and 315 of PDM's 17787 output values non-finite on the 400 ->
   5929 vertex cape; PIU's stayed finite). Every refusal leaves the output
   array as it was: the model evaluates into an array of its own, checks
   it and copies it out (measured on that cape, 1 thread: that adds about
   10 us to subdivision's 40 us per eval and 20 us to PIU's 45 us; a GPU
   model's pbd_up_model_eval_world does not check its result);
   pbd_up_model_load refuses corrupt or foreign buffers
   (PBD_ERROR_BAD_SNAPSHOT). pbd_up_model_set_simd / _set_threads choose
   the SIMD kernels and the OpenMP team; neither changes a result bit.

   A TYPICAL PIPELINE
       // 1. training pairs from the library's own simulations (offline)
       pbd_up_training_desc td = pbd_up_training_desc_default();
       td.coarse_resolution = 20; td.levels = 2;          // 400 -> 5929 vertices
       pbd_up_training t;
       pbd_up_training_generate(&td, &t);
       // 2. the subdivision baseline and a learned method on top of it
       pbd_up_model *sub = NULL, *piu = NULL;
       pbd_up_subdivision_create(t.coarse_triangles, t.coarse_triangle_count,
                                 t.coarse_count, td.levels, &sub);
       pbd_up_piu_desc pd = pbd_up_piu_desc_from(&t, sub); // (or fill it in)
       pbd_up_piu_fit(&pd, &piu);
       // 3. every frame: coarse simulation -> detail mesh
       pbd_up_model_eval(piu, coarse_xyz, detail_xyz);
   The training scene's coarse cloth also runs live, as it was trained
   (pbd_up_training_world, pbd_up_training_drive: section "training"), so
   a model fitted to it upsamples a cloth a game moves or a hand drags
   (the viewer's upsampling scene, examples/common/scenes.h).
   On a GPU world (pbd_cuda.cu; define PBD_CUDA where
   PBD_UPSAMPLE_IMPLEMENTATION is too) a model of any method can evaluate
   on the device, from the world's device particles into a device array that
   a renderer draws through CUDA interop, with the CPU's bits:
       pbd_up_model_set_device(sub, PBD_DEVICE_GPU);
       const float *detail;                    // a device pointer
       pbd_up_model_eval_world(sub, world, first_particle, &detail);
   (pbd_up_model_eval_world takes a CPU model and world too.) A wrinkle
   mesh's fine cloth can be a GPU world too (pbd_up_wrinkle_desc.device):
   its solve and one-sided projection run there with the CPU's bits; its
   targets come from coarse positions on the host (pbd_up_wrinkle_update)
   or, by kernels, from a coarse GPU world's device particles, the fine
   positions then a device array:
       const float *fine;                      // a device pointer
       pbd_up_wrinkle_update_world(wr, coarse_world, first_particle, &fine);
   Wrinkle meshes are stateful (the fine mesh keeps its shape from frame
   to frame), so they are not a pbd_up_model: pbd_up_wrinkle_create with
   the coarse and fine rest meshes, then pbd_up_wrinkle_update(wr, coarse,
   fine_out) every frame. examples/upsample.c shows every method side by
   side.

   SUBDIVISION AND FRAMES (section "subdivision"): pbd_up_mesh_subdivide makes
   a subdivided pbd_mesh (Loop or midpoint rules, the same numbering:
   vertices keep their indices, edge vertices follow); a subdivision model
   holds the same subdivision as a stencil matrix over the coarse vertices
   and the local frames (tangent, bitangent, normal) that two-scale detail
   and the learned methods express displacements in.

   ADDING A METHOD (for the sections of this header)
   A method is a row of the method table: a pbd_up__methods struct with
     eval(m, coarse, detail)  evaluate; arguments, sizes, finiteness and
                              m->trained are already checked; detail is
                              m->result, which pbd_up_model_eval checks
                              and copies out;
     io(m, io)                walk the method's data (m->impl) with the
                              pbd_up__io_* helpers: one function measures,
                              saves and, with m->impl NULL, loads (it
                              allocates m->impl and its arrays);
     prepare(m)               after a load: validate the payload (indices
                              in range, finite values; PBD_ERROR_BAD_SNAPSHOT)
                              and build derived data (scratch, SIMD layouts);
     destroy(m)               free m->impl, also when only partly loaded.
   The method's fit/create function makes the model with
   pbd_up__model_new(method, coarse_count, detail_count), fills m->impl,
   calls its prepare and sets m->trained = 1. Register the row in
   pbd_up__methods_of() (section "method table", at the end of the
   implementation). Sparse stencil operators (subdivision, and the
   subdivision weights WPSD and PDM use) share pbd_up__sparse: CSR (saved
   with pbd_up__sparse_io), checked by pbd_up__sparse_prepare, applied by
   pbd_up__sparse_mul3 (y = S x for xyz vertices; SIMD == scalar, any
   thread count, bit for bit). PIU's B has its own blocked layout, 8 detail
   vertices per coarse-vertex load (section "piu").

   LEARNED UPSAMPLERS (sections piu, wpsd, pdm; survey 5.2)
   Fitted offline from training pairs (u_f, X_f): coarse positions and the
   matching detail mesh of frame f, e.g. from pbd_up_training_generate
   (section "training"). Each fit takes a desc (defaults from
   pbd_up_<method>_desc_default()) and returns a trained pbd_up_model
   (PIU in "A TYPICAL PIPELINE" above; WPSD and PDM alike):

     PIU   X = B u, a sparse learned operator (Kavan et al. 2011): every
           detail vertex a partition-of-unity combination of `support`
           nearby coarse vertices, ridge-regularised toward a prior (the
           subdivision stencil); the fastest evaluator (no gathers: 8
           detail vertices share each broadcast coarse vertex). Optional
           oscillatory modes for travelling waves, stepped by
           pbd_up_piu_advance().
     WPSD  smooth mesh + local-frame displacements of a few training poses
           blended by RBF weights in a local strain pose space (Bickel et
           al. 2008, Zurdo et al. 2013); poses chosen greedily until an
           error threshold.
     PDM   smooth mesh + a biquadratic function of a 2D local strain
           coordinate along the normal (Ma et al. 2008). Along the
           normal only: on the training sets of pbd_up_training_generate,
           whose fine meshes are midpoint-subdivided and whose detail is
           mostly tangential to Loop's smooth mesh, PDM is barely better
           than the subdivision (the default cape's training RMS 7.459 mm
           against 7.463 mm; of it 0.25 mm is along the normals, which PDM
           cuts to 0.04 mm; PIU 0.31 mm, of it 0.25 along the normals,
           WPSD 0.019 mm): use it for
           normal detail such as wrinkles on a smooth surface.
   WPSD and PDM need a subdivision model of the coarse mesh (the detail
   mesh is its topology and numbering) and the coarse triangles; they copy
   the subdivision model, so their saved models are self-contained. All
   three evaluate bit-identically with SIMD on or off and any thread count.

   FAR FROM THE ORIGIN positions are floats, 7.8 mm apart at 1e5 m, and
   every method's result is that coarse. Measured: the cape of
   pbd_up_training_desc_default with frames = 30 (144 -> 529 vertices; at
   the default 60 frames PDM's 1e5 and 1e7 m rows read 81 mm and 1.05e4
   m), frame 15
   shifted by a constant, rms distance from the unshifted result shifted:
       shift       subdivision   PIU       WPSD      PDM
       1e3 m       0.06 mm       0.09 mm   0.09 mm   0.07 mm
       1e5 m       8.7 mm        11 mm     27 mm     95 mm
       1e7 m       0.52 m        1.4 m     2.1 m     1.1e4 m
   PDM loses most: its feature is a vertex's offset from its neighbours'
   mean over the mean edge (a few cm), so the input's rounding is a large
   feature error, and its biquadratic height magnifies it. Subtracting a
   reference point inside would not help: the input is already rounded.
   Far from the origin, evaluate in coordinates local to the cloth
   (subtract its anchor before the call, in double, and add it back to
   the output): the result is then the one at the origin.

   LICENSE: MIT or public domain (your choice), see pbd.h.
*/
#ifndef PBD_UPSAMPLE_H_INCLUDED
#define PBD_UPSAMPLE_H_INCLUDED

#include "pbd.h"

#ifdef PBD_STATIC
#define PBD_UP_DEF static
#else
#define PBD_UP_DEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ==== config ================================================================
/* The evaluators' SIMD kernels use pbd.h's choice (PBD_SIMD_LANES):
   pbd_simd_path() and pbd_simd_width() describe them. */

// ==== model =================================================================
/* A fitted upsampler: coarse positions (coarse_count*3 floats) in, detail
   positions (detail_count*3 floats) out. Every method makes one (its
   section's create/fit functions); everything else is common. */
typedef enum pbd_up_method {
    PBD_UP_SUBDIVISION = 0,
    PBD_UP_PIU = 1,
    PBD_UP_WPSD = 2,
    PBD_UP_PDM = 3,
    PBD_UP_METHOD_COUNT = 4
} pbd_up_method;

typedef struct pbd_up_model pbd_up_model;

/* "subdivision", "piu", "wpsd", "pdm" (NULL for other values). */
PBD_UP_DEF const char *pbd_up_method_name(pbd_up_method method);
/* 1 when the method's evaluator is compiled into this header. */
PBD_UP_DEF int pbd_up_method_available(pbd_up_method method);
PBD_UP_DEF pbd_up_method pbd_up_model_method(const pbd_up_model *m);
PBD_UP_DEF int pbd_up_model_coarse_count(const pbd_up_model *m); /* 0 for NULL */
PBD_UP_DEF int pbd_up_model_detail_count(const pbd_up_model *m);
/* 1 once fitted (an untrained model refuses eval and save). */
PBD_UP_DEF int pbd_up_model_trained(const pbd_up_model *m);

/* detail_out = the upsampled detail mesh of the coarse configuration.
   Errors: NULL pointers; PBD_ERROR_NOT_FINITE for NaN/Inf in coarse, and
   for a result that would be NaN/Inf (a finite coordinate too large for
   the method's float arithmetic, such as 1e30 m); the output is then
   untouched; PBD_ERROR_INVALID_ARGUMENT for an untrained
   model. One model is evaluated by one thread at a time (it owns its
   scratch); OpenMP threads inside are controlled below. No allocation. */
PBD_UP_DEF pbd_result pbd_up_model_eval(pbd_up_model *m, const float *coarse_positions, float *detail_positions_out);
/* Like pbd_up_model_eval, with the sizes the caller's arrays have (in vertices):
   PBD_ERROR_INVALID_ARGUMENT when they are not the model's. */
PBD_UP_DEF pbd_result pbd_up_model_eval_checked(pbd_up_model *m, const float *coarse_positions, int coarse_count,
                                                float *detail_positions_out, int detail_count);

/* Execution choices that never change the result bits: the SIMD kernels
   (on by default where compiled in; off runs the scalar reference twins)
   and the OpenMP threads (0, the default: OpenMP's count, serial for small
   models; n >= 1: exactly n). */
PBD_UP_DEF pbd_result pbd_up_model_set_simd(pbd_up_model *m, int on);
PBD_UP_DEF pbd_result pbd_up_model_set_threads(pbd_up_model *m, int threads);
PBD_UP_DEF void pbd_up_model_destroy(pbd_up_model *m);

/* THE GPU (pbd_cuda.cu, with PBD_CUDA where PBD_UPSAMPLE_IMPLEMENTATION
   is): a model evaluates on the CPU (the default) or on the GPU. Setting
   PBD_DEVICE_GPU sends its data to the device (PBD_ERROR_UNSUPPORTED
   naming why: no device, a build without PBD_CUDA, a pbd_cuda.cu built
   against another pbd_upsample.h; PBD_ERROR_OUT_OF_MEMORY);
   PBD_DEVICE_AUTO takes the GPU when it can, else the CPU; PBD_DEVICE_CPU
   frees the device's copy. Every method runs on the GPU: subdivision
   (with or without two-scale detail), PIU (its oscillators' state stays
   on the host: pbd_up_piu_advance as before), WPSD and PDM. Fitting stays
   on the CPU (a fit on a GPU model sends the result). */
PBD_UP_DEF pbd_result pbd_up_model_set_device(pbd_up_model *m, pbd_device device);
PBD_UP_DEF pbd_device pbd_up_model_device(const pbd_up_model *m); /* PBD_DEVICE_CPU for NULL */
/* Evaluates the model on world particles [first, first + coarse count) as
   the coarse positions; *detail gets the detail positions (3 floats per
   vertex, the model's array: valid until the next evaluation, a fit or
   the model's destruction). A GPU model needs a GPU world: it reads the
   device's particles (pbd_world_device_positions) and *detail is a device
   pointer, for a renderer's CUDA interop with no copy; the bits are those
   of pbd_up_model_eval on the same positions. A CPU model reads
   pbd_world_positions into host arrays (allocated by its first call).
   Errors: NULL pointers; PBD_ERROR_INDEX_OUT_OF_RANGE for particles the
   world does not have; PBD_ERROR_INVALID_ARGUMENT for an untrained model
   or a GPU model with a CPU world; PBD_ERROR_NOT_FINITE (CPU models). */
PBD_UP_DEF pbd_result pbd_up_model_eval_world(pbd_up_model *m, pbd_world *w, int first, const float **detail);

/* Save / load a fitted model. The buffer is a versioned header (magic
   "PBDUPMDL", format version, byte-order tag, method, counts, payload
   size), the method's payload and an FNV-1a checksum; a loaded model
   evaluates bit-identically and saves to the same bytes. Load refuses
   (PBD_ERROR_BAD_SNAPSHOT) wrong magic/version/byte order, a method not
   compiled in, truncated or corrupted buffers and payloads that fail the
   method's validation (indices out of range, NaN weights ...).
   Threads and SIMD settings are not saved. */
PBD_UP_DEF size_t pbd_up_model_save_size(const pbd_up_model *m); /* 0: NULL or untrained */
PBD_UP_DEF pbd_result pbd_up_model_save(const pbd_up_model *m, void *buffer, size_t size);
PBD_UP_DEF pbd_result pbd_up_model_load(const void *buffer, size_t size, pbd_up_model **out);

// ==== subdivision ===========================================================
/* Loop subdivision (Loop 1987) of a coarse ("feature") triangle mesh and
   two-scale geometry (survey 5.1: the detail mesh is x = x0 + R dx, x0
   the smooth subdivided mesh, R a local frame on it, dx the per-vertex
   detail in that frame).

   One level splits every triangle into 4: the vertices keep their indices
   (even vertices, moved to (1 - n beta) v + beta sum of the n neighbours,
   beta = (5/8 - (3/8 + cos(2 pi / n) / 4)^2) / n), and every edge adds an
   odd vertex (3/8 of its ends + 1/8 of the two opposite vertices) numbered
   vertex_count + its index in the edges sorted by (min, max) end. Boundary
   rules: a boundary edge's vertex is its midpoint, a boundary vertex with
   two boundary edges moves to 3/4 v + 1/8 of each boundary neighbour, a
   vertex with more than two boundary edges stays (a corner). Counts per
   level: V' = V + E, F' = 4 F (E = edges: 3F/2 for a closed mesh).
   Triangle (a, b, c) becomes (a, ab, ca), (ab, b, bc), (ca, bc, c),
   (ab, bc, ca), so orientation is kept. The input must be an edge-manifold
   triangle mesh (an edge in at most two triangles) with no triangle
   listed twice (PBD_ERROR_INVALID_ARGUMENT) and distinct corners
   (PBD_ERROR_DEGENERATE), as every mesh this header takes. */

/* The subdivided mesh itself (positions and triangles); smooth 1: Loop's
   rules, 0: linear (midpoint) subdivision with the same topology and
   numbering. levels 0..8. Free `out` with pbd_up_mesh_free. */
PBD_UP_DEF pbd_result pbd_up_mesh_subdivide(const pbd_mesh *in, int levels, int smooth, pbd_mesh *out);
PBD_UP_DEF void pbd_up_mesh_free(pbd_mesh *m);

/* A PBD_UP_SUBDIVISION model: `levels` (0..8) of Loop subdivision of the
   coarse topology, precomputed as one sparse stencil matrix S (CSR, row i
   = detail vertex i as a weighted sum of coarse vertices; every row sums
   to 1), so evaluation x0 = S u is one sparse matrix-vector product (SIMD
   kernel, OpenMP rows). The model is trained on creation: without detail
   it evaluates the smooth mesh x0 (the "subdivision only" baseline). */
PBD_UP_DEF pbd_result pbd_up_subdivision_create(const int *triangles, int triangle_count, int vertex_count, int levels,
                                                pbd_up_model **out);
PBD_UP_DEF int pbd_up_subdivision_levels(const pbd_up_model *m); /* -1 if not a subdivision model */
/* The detail (smooth) mesh's triangles: valid while the model lives. */
PBD_UP_DEF pbd_result pbd_up_subdivision_triangles(const pbd_up_model *m, const int **triangles, int *triangle_count);
/* Row `row` of S: writes at most max columns/weights (either may be NULL
   with max 0), *count receives the row's length. */
PBD_UP_DEF pbd_result pbd_up_subdivision_stencil(const pbd_up_model *m, int row, int *columns, float *weights, int max,
                                                 int *count);
/* The smooth mesh x0 = S u and (frames_out, optional) each vertex's local
   frame, 9 floats: tangent t, bitangent b, normal n (orthonormal, right
   handed). n is the normalised sum of the adjacent triangles' (area
   weighted) normals, t the direction to the vertex's first neighbour (the
   lowest-numbered one) projected on the tangent plane, b = n x t.
   A vertex whose frame is degenerate (zero normal or tangent) gets the
   world axes. */
PBD_UP_DEF pbd_result pbd_up_subdivision_smooth(pbd_up_model *m, const float *coarse_positions, float *smooth_out,
                                                float *frames_out);
/* Two-scale detail (survey 5.1): dx_i = R_i^T (X_i - x0_i) in the local
   frames of the smooth mesh of `coarse_positions`, for a detail mesh X
   (detail_count*3) of the same topology; afterwards pbd_up_model_eval returns
   x0 + R dx for any coarse configuration. Clear with detail = NULL. */
PBD_UP_DEF pbd_result pbd_up_subdivision_fit_detail(pbd_up_model *m, const float *coarse_positions,
                                                    const float *detail_positions);

// ==== wrinkle ===============================================================
/* Wrinkle meshes (Mueller and Chentanez 2010; survey 3.6): a high
   resolution (fine) mesh rides on the coarse dynamic mesh. Every fine
   vertex is bound, at rest, to the closest point of the coarse mesh
   (triangle, barycentric coordinates, signed offset d along the triangle's
   normal); each update moves the attachment targets a + d n with the
   coarse mesh and solves, statically (velocities zeroed, no gravity), a
   few iterations of the fine mesh's own stretch and bending constraints
   together with the attachments, which let a vertex move freely within
   `radius` of its target (unilateral: |p - target| <= radius). The slack
   lets the fine mesh keep its edge lengths where the coarse mesh
   compresses, so it buckles into wrinkles, given something to buckle
   from: with bending = PBD_BENDING_ISOMETRIC a perfectly flat fine mesh
   under in-plane compression stays flat (its edges shrink instead: to
   0.90 of their rest length at 30%); with the default dihedral bending it
   stays flat to about 26%, then single vertices pop out of the plane by
   1-2 mm, not as buckling (at 30% held: a fifth of them over 1 mm, up to
   `radius`, and one edge shrunk to 1% of its length; an audit). 1 mm of
   out-of-plane noise in its rest positions (or a curved coarse mesh)
   lets it wrinkle up to `radius`. With one_sided (closed coarse
   meshes) the fine vertices also stay on the outer side of their coarse
   triangle's plane ((p - a) . n >= 0, offsets clamped to d >= 0), so a
   garment's wrinkles never sink into the body; this projection runs after
   the constraints in every iteration (a pbd.h plugin) and never moves a
   vertex out of its radius.
   The solver is pbd.h's: a pbd_world with zero gravity, one substep of
   time_step and `iterations` iterations per update (XPBD, so the bending
   compliance is relative to time_step). */
typedef struct pbd_up_wrinkle pbd_up_wrinkle;

typedef struct pbd_up_wrinkle_desc {
    const float *coarse_positions; /* the coarse rest mesh: coarse_count*3 */
    int coarse_count;
    const int *coarse_triangles; /* coarse_triangle_count*3 */
    int coarse_triangle_count;
    const float *fine_positions; /* the fine rest mesh: fine_count*3 */
    int fine_count;
    const int *fine_triangles; /* fine_triangle_count*3, edge-manifold */
    int fine_triangle_count;
    float radius;              /* attachment radius (m), >= 0; default 0.01 */
    int one_sided;             /* 1: closed coarse mesh, stay outside; default 0 */
    int iterations;            /* per update, 1..1000; default 4 */
    float time_step;           /* the solve's h (s), default 1/60 */
    float stretch_compliance;  /* default 0 */
    float bending_compliance;  /* default 1e-3 */
    pbd_bending_model bending; /* default PBD_BENDING_DIHEDRAL */
    pbd_device device;         /* the fine cloth's world (pbd.h's pbd_world_desc.device): PBD_DEVICE_CPU
                                  (default), PBD_DEVICE_GPU or PBD_DEVICE_AUTO; on a GPU its solve and
                                  the one-sided projection run there (pbd_cuda.cu, PBD_CUDA where
                                  PBD_UPSAMPLE_IMPLEMENTATION is), the targets from your host
                                  coarse positions or, by kernels, from a coarse GPU world's
                                  particles (pbd_up_wrinkle_update_world) */
} pbd_up_wrinkle_desc;

PBD_UP_DEF pbd_up_wrinkle_desc pbd_up_wrinkle_desc_default(void);
/* Errors: NULL pointers, counts <= 0, indices out of range
   (PBD_ERROR_INDEX_OUT_OF_RANGE), NaN/Inf, a zero-area coarse triangle or
   repeated corners (PBD_ERROR_DEGENERATE), a coarse mesh that is not
   closed and consistently oriented with one_sided (PBD_ERROR_NOT_CLOSED),
   parameters out of range or a triangle listed twice
   (PBD_ERROR_INVALID_ARGUMENT). */
PBD_UP_DEF pbd_result pbd_up_wrinkle_create(const pbd_up_wrinkle_desc *desc, pbd_up_wrinkle **out);
PBD_UP_DEF void pbd_up_wrinkle_destroy(pbd_up_wrinkle *wr);
/* One frame: targets from coarse_positions (coarse_count*3), the static
   solve, and (fine_out, optional) the fine positions, fine_count*3.
   A NaN/Inf coarse position (PBD_ERROR_NOT_FINITE) or one beyond
   PBD_MAX_COORDINATE (PBD_ERROR_INVALID_ARGUMENT) is refused and changes
   nothing. A coarse triangle that degenerates keeps its last normal. */
PBD_UP_DEF pbd_result pbd_up_wrinkle_update(pbd_up_wrinkle *wr, const float *coarse_positions, float *fine_out);
/* The same frame with world particles [first, first + coarse_count) of
   `coarse` as the coarse positions; *fine gets the fine positions (3
   floats a vertex, the wrinkle mesh's array: valid until its next update
   or destruction). A wrinkle mesh on the GPU (desc.device; pbd_cuda.cu,
   PBD_CUDA where PBD_UPSAMPLE_IMPLEMENTATION is) needs a GPU coarse
   world: kernels compute the targets from its device particles, the fine
   cloth solves, and *fine is a device pointer, for a renderer's CUDA
   interop with no copy (the binding goes to the device once, at the
   first such call; pbd_up_wrinkle_targets then fetches the targets). A
   CPU wrinkle mesh reads pbd_world_positions of either kind of coarse
   world into host arrays (allocated by its first call) and runs
   pbd_up_wrinkle_update. Both give pbd_up_wrinkle_update's bits on the
   same positions. Errors (changing nothing): NULL pointers;
   PBD_ERROR_INDEX_OUT_OF_RANGE for particles the coarse world does not
   have; PBD_ERROR_INVALID_ARGUMENT for a GPU wrinkle mesh with a CPU
   coarse world or coarse the wrinkle mesh's own world;
   PBD_ERROR_OUT_OF_MEMORY; PBD_ERROR_UNSUPPORTED with the reason (a build
   without PBD_CUDA here); NOT_FINITE (a CPU wrinkle mesh). A step's error
   (pbd_world_step of the fine world) is returned as it is. */
PBD_UP_DEF pbd_result pbd_up_wrinkle_update_world(pbd_up_wrinkle *wr, pbd_world *coarse, int first, const float **fine);
PBD_UP_DEF int pbd_up_wrinkle_fine_count(const pbd_up_wrinkle *wr);
/* The binding of fine vertex v: coarse triangle, barycentric coordinates
   (3 floats), offset along the normal. */
PBD_UP_DEF pbd_result pbd_up_wrinkle_binding(const pbd_up_wrinkle *wr, int v, int *triangle, float *barycentric,
                                             float *offset);
/* The attachment targets of the last update (fine_count*3), and
   (optional) the coarse surface points a and unit normals n. */
PBD_UP_DEF pbd_result pbd_up_wrinkle_targets(const pbd_up_wrinkle *wr, float *targets, float *surface_points,
                                             float *normals);
/* The fine mesh's world (read positions, change compliances); owned by
   the wrinkle mesh: do not destroy it or add objects to it. */
PBD_UP_DEF pbd_world *pbd_up_wrinkle_world(pbd_up_wrinkle *wr);
/* Passed to the world: never change the result bits. */
PBD_UP_DEF pbd_result pbd_up_wrinkle_set_threads(pbd_up_wrinkle *wr, int threads);
PBD_UP_DEF pbd_result pbd_up_wrinkle_set_simd(pbd_up_wrinkle *wr, int on);

// ==== training ==============================================================
/* Training data for the data-driven methods (survey 5.2): matched pairs
   (coarse configuration u, detail mesh X) made by the library's own
   simulations. A coarse cloth (coarse_resolution^2 vertices) is simulated
   in one pbd_world; a fine cloth, the coarse grid subdivided `levels` times
   (Loop's topology and numbering, midpoint positions, so fine vertex i is
   coarse vertex i for i < coarse_count), is simulated in a second world
   and tracks it: its vertices at the coarse vertices are kinematic and
   follow the coarse particles every step, everything between them is
   simulated (finer, softer in bending, so it forms its own folds).
   Scripted motions:
     PBD_UP_SCENE_CAPE  a cape of size x size hanging from its top edge in
                        the x-y plane; the top edge swings sideways,
                        x(t) = amplitude sin(2 pi frequency t), and forward
                        and back, z(t) = amplitude/2 sin(pi frequency t);
     PBD_UP_SCENE_DROP  a horizontal cloth released `amplitude` above a
                        sphere of radius 0.3 size at the origin (friction
                        0.5), with an initial tilt so that it slides off.
   Frame f is recorded after (f + 1) * steps_per_frame steps.

   FILE FORMAT (pbd_up_training_save; native byte order, checked on load):
     char magic[8] = "PBDUPTRN"; uint32 version = 1; uint32 byte-order tag
     0x01020304; int32 coarse_count, detail_count, frame_count,
     coarse_triangle_count, detail_triangle_count, levels;
     int32 coarse_triangles[3 * coarse_triangle_count];
     int32 detail_triangles[3 * detail_triangle_count];
     float coarse_rest[3 * coarse_count]; float detail_rest[3 * detail_count];
     float coarse[frame_count][3 * coarse_count];
     float detail[frame_count][3 * detail_count];
     uint64 FNV-1a checksum of all the bytes before it (64-bit: offset
       basis 14695981039346656037, prime 1099511628211; models use the
       same; files of before 0.2, from the basis 1469598103934665603, are
       still read). */
typedef enum pbd_up_scene { PBD_UP_SCENE_CAPE = 0, PBD_UP_SCENE_DROP = 1 } pbd_up_scene;

typedef struct pbd_up_training {
    int coarse_count, detail_count, frame_count;
    int coarse_triangle_count, detail_triangle_count;
    int levels;            /* detail = coarse subdivided this many times */
    int *coarse_triangles; /* coarse_triangle_count*3 */
    int *detail_triangles; /* detail_triangle_count*3 */
    float *coarse_rest;    /* coarse_count*3 */
    float *detail_rest;    /* detail_count*3 */
    float *coarse;         /* frame_count * coarse_count*3: u of frame f at f*coarse_count*3 */
    float *detail;         /* frame_count * detail_count*3: X of frame f */
} pbd_up_training;

typedef struct pbd_up_training_desc {
    pbd_up_scene scene;              /* default PBD_UP_SCENE_CAPE */
    int coarse_resolution;           /* vertices per side, 3..256; default 12 */
    int levels;                      /* 1..4; default 1 */
    float size;                      /* cloth width (m), default 1 */
    int frames;                      /* recorded pairs, >= 1; default 60 */
    int steps_per_frame;             /* >= 1; default 2 */
    float time_step;                 /* s per step, default 1/60 */
    int substeps, iterations;        /* both worlds; default 4 and 4 */
    float amplitude;                 /* m; default 0.3 */
    float frequency;                 /* Hz (cape); default 0.7 */
    float coarse_bending_compliance; /* default 1e-3 */
    float fine_bending_compliance;   /* default 1e-1 (softer: finer folds) */
    float jitter;                    /* out-of-plane rest jitter of the fine
                                    vertices between coarse ones (m), breaks
                                    symmetry; default 1e-3 */
    unsigned seed;                   /* for the jitter; default 1 */
    int threads;                     /* both worlds (pbd_world_set_threads): 0 automatic
                                    (default); 1 avoids OpenMP barrier stalls when
                                    the machine is busy with other work */
    pbd_device device;               /* both worlds (pbd_world_desc.device); default
                                    PBD_DEVICE_CPU */
} pbd_up_training_desc;

PBD_UP_DEF pbd_up_training_desc pbd_up_training_desc_default(void);
/* Runs both simulations; `out` is filled (free with pbd_up_training_free). */
PBD_UP_DEF pbd_result pbd_up_training_generate(const pbd_up_training_desc *desc, pbd_up_training *out);
/* The scene's coarse simulation as a live world, built as
   pbd_up_training_generate builds it: the coarse cloth (its particles
   `cloth`, in the order of the training's coarse vertices), the solver
   settings, the drop scene's sphere, and the cape's top row kinematic
   (pbd_world_destroy it). Before each pbd_world_step of d->time_step,
   pbd_up_training_drive(d, w, cloth, time) puts the cape's top row where
   the script has it at `time` (the step's end: (k + 1) * time_step for
   step k; the drop scene has no script), or move those particles yourself
   (pbd_particle_set_kinematic_target). A model fitted to the scene's
   training pairs then upsamples the live cloth, also where a hand drags it
   (the viewer's upsampling scene: examples/common/scenes.h). */
PBD_UP_DEF pbd_result pbd_up_training_world(const pbd_up_training_desc *desc, pbd_world **w, pbd_range *cloth);
PBD_UP_DEF pbd_result pbd_up_training_drive(const pbd_up_training_desc *desc, pbd_world *w, pbd_range cloth,
                                            double time);
/* All frames of a then of b (same meshes: PBD_ERROR_INVALID_ARGUMENT
   otherwise), e.g. to train on both scenes. */
PBD_UP_DEF pbd_result pbd_up_training_concat(const pbd_up_training *a, const pbd_up_training *b, pbd_up_training *out);
PBD_UP_DEF void pbd_up_training_free(pbd_up_training *t);
/* The file format above, in memory. Load refuses (PBD_ERROR_BAD_SNAPSHOT)
   a wrong magic/version/byte order, a size that does not match the
   counts, a bad checksum, indices out of range and NaN/Inf. */
PBD_UP_DEF size_t pbd_up_training_save_size(const pbd_up_training *t);
PBD_UP_DEF pbd_result pbd_up_training_save(const pbd_up_training *t, void *buffer, size_t size);
PBD_UP_DEF pbd_result pbd_up_training_load(const void *buffer, size_t size, pbd_up_training *out);

// ==== piu ===================================================================
/* Physics-inspired upsampling (survey 5.2.3; Kavan, Gerszewski, Bargteil
   and Sloan 2011). A learned linear operator X = B u: every detail vertex
   is a weighted sum of a local neighbourhood ("support") of coarse
   vertices, the same weights for x, y and z. B is fitted to training pairs
   (u_f, X_f) by regularised least squares, row by row,

       min_b  sum_f |b . u_f(support) - X_f(i)|^2 + lambda' |b - p|^2
       subject to sum_j b_j = 1                  (partition of unity),

   where p is the prior row (the subdivision stencil when one is given,
   else inverse-distance weights over the support) and lambda' = lambda
   times the mean diagonal of the data's normal matrix (so lambda is
   dimensionless). The partition of unity makes the operator translation
   invariant: moving the coarse mesh by t moves every detail vertex by t.

   Layout for evaluation: detail vertices are grouped by their nearest
   coarse vertex (in the rest pose); a group shares one support of
   `support` coarse vertices and stores its weights in fixed-width SoA
   rows of 8 lanes, so that evaluation broadcasts each support vertex once
   and multiplies 8 detail vertices at a time (no gathers); float at
   evaluation, double when fitting.

   Oscillatory modes (Kavan et al. 2011, section 6), optional: the
   principal components of the training residual X_f - B u_f become modes
   that oscillate at the frequency found in the training data, with an
   amplitude driven by the speed of the coarse mesh (relative to the
   training speed); pbd_up_piu_advance() steps the oscillators once per
   frame and evaluation adds them. */
typedef struct pbd_up_piu_desc {
    int coarse_count;           /* feature-mesh vertices */
    int detail_count;           /* detail-mesh vertices */
    int frame_count;            /* training pairs (>= 1) */
    const float *coarse_frames; /* frame_count * coarse_count * 3 */
    const float *detail_frames; /* frame_count * detail_count * 3 */
    const float *coarse_rest;   /* coarse_count * 3, the rest pose; NULL: frame 0 */
    const float *detail_rest;   /* detail_count * 3; NULL: frame 0 */
    /* Optional prior operator (e.g. the Loop subdivision stencil matrix),
       CSR over detail rows: row i holds prior_index/prior_weight
       [prior_start[i] .. prior_start[i+1]). All three or none. */
    const int *prior_start;
    const int *prior_index;
    const float *prior_weight;
    /* Or the prior from a PBD_UP_SUBDIVISION model of the coarse mesh (its
       stencil matrix; not with the arrays above). */
    const pbd_up_model *subdivision;
    int support;           /* coarse vertices per neighbourhood, 2..64 (default 16);
                                   clamped to coarse_count */
    float regularization;  /* lambda >= 0 (default 1e-3); 0 is treated as 1e-9 */
    int oscillatory_modes; /* residual modes, 0 (default) .. 64 */
    float frame_dt;        /* seconds between training frames (needed for modes) */
} pbd_up_piu_desc;

PBD_UP_DEF pbd_up_piu_desc pbd_up_piu_desc_default(void);
/* The defaults with the training pairs of t (counts, frames, rest poses)
   and sub (may be NULL) as the prior: what every fit from a training set
   fills in. The WPSD and PDM twins below likewise. */
PBD_UP_DEF pbd_up_piu_desc pbd_up_piu_desc_from(const pbd_up_training *t, const pbd_up_model *sub);
/* Fits B (and the oscillatory modes, if asked) to the training pairs.
   Errors: NULL pointers, sizes < 1 or whose product overflows, support
   out of range, negative or non-finite lambda, NaN/Inf in the data, prior
   indices out of range, modes > frame_count or without frame_dt > 0. */
PBD_UP_DEF pbd_result pbd_up_piu_fit(const pbd_up_piu_desc *desc, pbd_up_model **out);
/* Steps the oscillatory modes by dt with the current coarse positions
   (their speed since the previous call excites the modes). A no-op for a
   model without modes. Errors: not a PIU model, dt <= 0, NaN input. */
PBD_UP_DEF pbd_result pbd_up_piu_advance(pbd_up_model *m, const float *coarse, float dt);
/* The fitted operator as a dense row: weights[j] for coarse vertex
   index[j], j < *count (at most `support` entries). For inspection and
   tests; coarse indices are ascending. */
PBD_UP_DEF pbd_result pbd_up_piu_row(const pbd_up_model *m, int detail_vertex, int *index, float *weight, int max,
                                     int *count);
/* Mode count and, for mode k, its angular frequency (rad/s) and training
   amplitude. */
PBD_UP_DEF int pbd_up_piu_mode_count(const pbd_up_model *m);
PBD_UP_DEF pbd_result pbd_up_piu_mode(const pbd_up_model *m, int k, float *omega, float *amplitude,
                                      float *mode /* detail_count*3 or NULL */);

// ==== wpsd ==================================================================
/* Weighted pose-space deformation (survey 5.2.1; Bickel et al. 2008 for
   faces, Zurdo et al. 2013 for cloth). The detail mesh is the smooth
   (subdivided) mesh plus a displacement in each vertex's local frame
   (survey 5.1), a blend of the displacements of a few training poses:

       x_i = x0_i + R_i sum_j w_j(i) d_j(i)                   (survey eq. 14)

   Pose space is local: at feature (coarse) vertex v the pose vector holds
   the strain (l - L) / L of the 16 feature edges closest to v (edge
   midpoints in the rest pose), each times a fast-decaying weight
   exp(-(distance / mean edge length)^2). Pose weights at v come from RBF
   interpolation with phi(r) = r,

       w_j(v) = sum_i omega_v[i][j] |q_v - q_v(pose i)|,

   with omega_v = Phi_v^-1 precomputed (Phi_v[i][k] = |q_v(i) - q_v(k)|)
   so that w_j = 1 at pose j and 0 at the other poses (Kronecker delta);
   a pseudo-inverse where two poses coincide locally. The weights at
   detail vertices are the subdivision stencil's combination of the
   weights at the feature vertices (Zurdo et al.). Poses are chosen
   greedily from the training frames (Zurdo et al.): start with the frame
   with the most detail, then repeatedly add the frame with the largest L2
   error of the synthesised detail, until the RMS error over all training
   frames (per vertex) is at most error_threshold or max_poses are used.
   That error need not fall with every pose: on the default cape it is
   0.92 mm with one pose, 1.83 mm with two (the second pose's weights
   spread its detail onto frames unlike it), then 1.43, 0.69 and 0.14 mm;
   a threshold between the first errors stops at the first pose. */
typedef struct pbd_up_wpsd_desc {
    const pbd_up_model *subdivision; /* a PBD_UP_SUBDIVISION model of the coarse mesh (copied): the
                                        smooth mesh, the frames and the interpolation weights */
    const int *coarse_triangles;     /* the feature mesh (its edges span pose space) */
    int coarse_triangle_count;
    int frame_count;            /* training pairs */
    int coarse_count;           /* the frames' vertices: the subdivision model's coarse and */
    int detail_count;           /*   detail counts (checked; pbd_up_wpsd_desc_from fills them) */
    const float *coarse_frames; /* frame_count * coarse_count * 3 */
    const float *detail_frames; /* frame_count * detail_count * 3 (subdivision's numbering) */
    const float *coarse_rest;   /* rest pose (edge rest lengths); NULL: frame 0 */
    int edges_per_vertex;       /* 1..64, default 16 (Bickel et al.) */
    float error_threshold;      /* RMS per-vertex error that stops the selection (>= 0;
                                        default 0: select max_poses) */
    int max_poses;              /* 1..256, default 32 */
} pbd_up_wpsd_desc;

PBD_UP_DEF pbd_up_wpsd_desc pbd_up_wpsd_desc_default(void);
/* (t's frames, rest pose and coarse mesh; sub: the smooth operator) */
PBD_UP_DEF pbd_up_wpsd_desc pbd_up_wpsd_desc_from(const pbd_up_training *t, const pbd_up_model *sub);
/* Errors: NULL pointers, a model that is not subdivision, coarse_count
   and detail_count other than the model's, sizes or counts out of range,
   coarse triangles out of range or with fewer edges than
   edges_per_vertex, NaN/Inf data, zero-length rest edges. */
PBD_UP_DEF pbd_result pbd_up_wpsd_fit(const pbd_up_wpsd_desc *desc, pbd_up_model **out);
/* The greedy selection: the training frame of each pose in the order
   chosen, and the RMS training error after each addition (at most max of
   each; either may be NULL with max 0); *count receives the pose count. */
PBD_UP_DEF pbd_result pbd_up_wpsd_selection(const pbd_up_model *m, int *frames, float *errors, int max, int *count);
/* The pose weights of a coarse configuration at the feature vertices
   (coarse_count * poses, vertex-major) and/or at the detail vertices
   (detail_count * poses); either may be NULL. */
PBD_UP_DEF pbd_result pbd_up_wpsd_weights(pbd_up_model *m, const float *coarse_positions, float *coarse_weights,
                                          float *detail_weights);

// ==== pdm ===================================================================
/* Polynomial displacement maps (survey 5.2.2; Ma et al. 2008, after the
   polynomial texture maps of Malzbender et al. 2001). Each detail vertex
   moves along the normal n_i of the smooth (subdivided) mesh by a
   biquadratic polynomial of a 2D local strain coordinate (u1, u2):

       x_i = x0_i + h_i n_i,
       h_i = c_i . (u1^2, u2^2, u1 u2, u1, u2, 1).

   (u1, u2) comes from a 5D feature of each feature (coarse) vertex v: the
   change of its local offset from the mean of its neighbours, in v's
   local frame and divided by the mean rest edge length (3 values), and
   the in-plane strain along the frame's two tangent directions (the
   incident edges' strains weighted by their squared direction cosines;
   2 values). The two principal components of these 5D vectors over all
   vertices and training frames (PCA, scaled to unit variance) give
   (u1, u2) at the feature vertices; the subdivision weights carry them to
   the detail vertices.
   The six coefficients c_i of every detail vertex are the least-squares
   fit over the training frames of h_i = n_i . (X_i - x0_i). */
typedef struct pbd_up_pdm_desc {
    const pbd_up_model *subdivision; /* a PBD_UP_SUBDIVISION model of the coarse mesh (copied) */
    const int *coarse_triangles;     /* the feature mesh (frames, neighbours, edges) */
    int coarse_triangle_count;
    int frame_count;            /* training pairs (>= 6 for six coefficients) */
    int coarse_count;           /* the frames' vertices: the subdivision model's coarse and */
    int detail_count;           /*   detail counts (checked; pbd_up_pdm_desc_from fills them) */
    const float *coarse_frames; /* frame_count * coarse_count * 3 */
    const float *detail_frames; /* frame_count * detail_count * 3 */
    const float *coarse_rest;   /* rest pose; NULL: frame 0 */
} pbd_up_pdm_desc;

PBD_UP_DEF pbd_up_pdm_desc pbd_up_pdm_desc_default(void);
/* (t's frames, rest pose and coarse mesh; sub: the smooth operator) */
PBD_UP_DEF pbd_up_pdm_desc pbd_up_pdm_desc_from(const pbd_up_training *t, const pbd_up_model *sub);
/* Errors as pbd_up_wpsd_fit's, and PBD_ERROR_INVALID_ARGUMENT for fewer
   than 6 frames, PBD_ERROR_DEGENERATE when the features of the training
   frames do not span two principal directions, or the second varies by
   no more than ten times their float rounding (FLT_EPSILON times the
   largest coordinate over the mean rest edge): frames that hardly leave
   the rest pose, whose rounding the unit-variance scaling would blow up
   (detail vertices kilometres off). A detail vertex whose
   coordinates hardly vary over the frames gets the minimum-norm
   coefficients (a ridge of 1e-10 of the data's scale keeps its fit
   finite). */
PBD_UP_DEF pbd_result pbd_up_pdm_fit(const pbd_up_pdm_desc *desc, pbd_up_model **out);
/* For a coarse configuration: the strain coordinates (u1, u2) of every
   detail vertex (detail_count*2), and optionally the smooth mesh x0 and
   its normals (detail_count*3 each, NULL to skip). */
PBD_UP_DEF pbd_result pbd_up_pdm_coordinates(pbd_up_model *m, const float *coarse_positions, float *uv_out,
                                             float *smooth_out, float *normals_out);
/* The six coefficients of detail vertex i (order u1^2, u2^2, u1 u2, u1, u2, 1). */
PBD_UP_DEF pbd_result pbd_up_pdm_coefficients(const pbd_up_model *m, int detail_vertex, float *c6);

#ifdef __cplusplus
}
#endif
#endif /* PBD_UPSAMPLE_H_INCLUDED */

/* ========================================================================== */
/*                              IMPLEMENTATION                                */
/* ========================================================================== */
#ifdef PBD_UPSAMPLE_IMPLEMENTATION
#ifndef PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED
#define PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED
#if PBD__FAST_MATH_WARN && !defined(PBD__FAST_MATH_WARNED)
#define PBD__FAST_MATH_WARNED
#warning \
    "pbd: -ffast-math changes the solver's results (inputs are still checked): compile this file with -fno-fast-math, or define PBD_ALLOW_FAST_MATH"
#endif

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
#define PBD_UP__OPENMP 1
#else
#define PBD_UP__OPENMP 0
#endif
#if PBD_UP__OPENMP
#define PBD_UP__STR(x) #x
#define PBD_UP__PRAGMA(x) _Pragma(PBD_UP__STR(x))
#else
#define PBD_UP__PRAGMA(x)
#endif
#if defined(PBD_UP_MALLOC) != defined(PBD_UP_FREE)
#error "pbd_upsample.h: define both PBD_UP_MALLOC and PBD_UP_FREE, or neither"
#endif
#ifndef PBD_UP_MALLOC
#define PBD_UP_MALLOC(sz) malloc(sz)
#define PBD_UP_FREE(p) free(p)
#endif

/* SIMD as pbd.h chose it (PBD_SIMD_LANES, pbd.h "==== config"; docs/DESIGN.md
   section 5.2): SIMDe's prefixed API, PBD_UP__W lanes, 1 for the scalar
   reference path. */
#define PBD_UP__W PBD_SIMD_LANES
#if PBD_UP__W > 1
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
/* g++ 12's false -Wuninitialized in its own AVX-512 header (see pbd.h). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define PBD_UP__POP_DIAGNOSTICS 1
#endif
/* Below this many multiply-adds an evaluation runs serially (threads 0):
   an OpenMP fork/join costs microseconds. */
#define PBD_UP__PARALLEL_MIN 32768L

// ---- tolerances ------------------------------------------------------------
/* Every epsilon of the implementation, named by its role (one role, one name;
   two roles of one value, two names). A literal's type is part of its value
   (an f suffix where it meets floats).
   Not here, as not tolerances: the documented defaults of the descriptors
   (compliances 1e-3 and 1e-1, jitter 1e-3, regularization 1e-3), the 1e300
   starts of min/max searches, the 0.9f axis choice of pbd_up__vertex_frame. */
/* A float length at or below this is zero, not divided by: smaller lets n / len overflow, larger drops tiny meshes. */
#define PBD_UP__LENGTH_MIN 1e-30f
/* Tangent under this fraction of the neighbour offset: offset along the normal; larger rejects steep real edges. */
#define PBD_UP__TANGENT_REL_MIN 1e-6f
/* |e1 x e2| under this times |e1|^2 + |e2|^2: no normal; far under float noise (1e-7), larger drops thin triangles. */
#define PBD_UP__NORMAL_REL_MIN 1e-12f
/* QR: an R diagonal under this times the largest is rank loss (refused); smaller solves round-off, larger refuses. */
#define PBD_UP__QR_PIVOT_REL_MIN 1e-13
/* A regularization (float field) at or below this counts as 0, as documented; larger overrides small asked lambdas. */
#define PBD_UP__PIU_LAMBDA_MIN_F 1e-9f
/* The lambda that replaces it (documented): smaller lets the QR refuse collinear supports, larger biases the fit. */
#define PBD_UP__PIU_LAMBDA_MIN 1e-9
/* Prior weights summing under this are absent: inverse-distance weights instead; larger overrides small priors. */
#define PBD_UP__PRIOR_SUM_MIN 1e-6
/* Added to squared distances of that prior: a coincident vertex weighs 1e12, not inf; larger flattens close weights. */
#define PBD_UP__PRIOR_DIST2_BIAS 1e-12
/* Residual modes with eigenvalue below this times the trace are noise, dropped; larger loses small real modes. */
#define PBD_UP__MODE_EV_REL_MIN 1e-12
/* Phase fit: sin, cos columns dependent (det vs ss * cc) when w t hardly varies: alpha = beta = 0, not round-off. */
#define PBD_UP__PHASE_DET_REL_MIN 1e-12
/* Pseudo-inverse drops eigenvalues below this times the largest: 1/ev of round-off would swamp the weights. */
#define PBD_UP__PINV_EV_REL_MIN 1e-12
/* PDM: second principal variance under this times the first: features on a line, DEGENERATE; near round-off. */
#define PBD_UP__PDM_EV_REL_MIN 1e-14
/* Absolute floor under that scale, so a zero covariance is degenerate; far under any real squared coordinate. */
#define PBD_UP__PDM_EV_FLOOR 1e-300
/* PDM: the second principal direction's standard deviation must exceed this times the features' float
   rounding; under it (u1, u2) would be rounding noise scaled to unit size (detail vertices km away). */
#define PBD_UP__PDM_NOISE_MIN 10.0
/* PDM ridge, relative to the mean diagonal (documented): keeps flat directions finite; larger biases real fits. */
#define PBD_UP__PDM_RIDGE 1e-10

/* Helpers the methods share: not every build uses every one. */
#if defined(__GNUC__) || defined(__clang__)
#define PBD_UP__SHARED static __attribute__((unused))
#else
#define PBD_UP__SHARED static
#endif

static void *pbd_up__alloc(size_t n) { return PBD_UP_MALLOC(n ? n : 1); }
static void pbd_up__free(void *p) {
    if (p) PBD_UP_FREE(p);
}
/* count * elem bytes, or NULL when that overflows or allocation fails. */
static void *pbd_up__alloc_array(size_t count, size_t elem) {
    if (elem && count > (size_t)-1 / elem) return NULL;
    return pbd_up__alloc(count * elem);
}
PBD_UP__SHARED void *pbd_up__calloc_array(size_t count, size_t elem) {
    void *p = pbd_up__alloc_array(count, elem);
    if (p && count && elem) memset(p, 0, count * elem);
    return p;
}
static int pbd_up__finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (!pbd__finite_bits(x[i])) return 0; /* its bits: -ffast-math cannot assume them away */
    return 1;
}
/* The refusal of the first of n counts of fn below min, by its name and
   value (one message per argument, not "a, b and c must be > 0"); PBD_OK
   when none is. fn NULL: a helper whose caller names the call. */
static pbd_result pbd_up__check_counts(const char *fn, const int *v, const char *const *names, int n, int min) {
    for (int i = 0; i < n; ++i)
        if (v[i] < min)
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "%s%s%s %d must be >= %d", fn ? fn : "",
                                  fn ? ": " : "", names[i], v[i], min);
    return PBD_OK;
}
/* The same for the first of n floats that is not finite. */
static pbd_result pbd_up__check_finite_named(const char *fn, const float *x, const char *const *names, int n) {
    for (int i = 0; i < n; ++i)
        if (!pbd_up__finite(x + i, 1))
            return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "%s: %s %g is not finite", fn, names[i], (double)x[i]);
    return PBD_OK;
}
/* pbd_up__finite for a whole detail mesh every eval: no branch per value,
   so compilers vectorise it. A float is NaN or infinite when its exponent
   bits are all ones; adding one to that exponent field carries into bit 31. */
static int pbd_up__finite_fast(const float *x, size_t n) {
    uint32_t acc = 0;
    for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        acc |= (u & 0x7f800000u) + 0x00800000u;
    }
    return !(acc & 0x80000000u);
}

/* The OpenMP team for `work` multiply-adds under the model's setting. */
static int pbd_up__team(int threads, long work) {
#if PBD_UP__OPENMP
    if (threads >= 1) return threads;
    return work < PBD_UP__PARALLEL_MIN ? 1 : omp_get_max_threads();
#else
    (void)threads;
    (void)work;
    return 1;
#endif
}

// ==== model =================================================================

/* Serialisation: one function per data structure walks it for measuring
   (out and in NULL), saving (out) and loading (in), like pbd.h's snapshot.
   bad: 1 truncated or invalid, 2 out of memory. */
typedef struct pbd_up__io {
    unsigned char *out;
    const unsigned char *in;
    size_t size, off;
    int bad;
} pbd_up__io;

static void pbd_up__io_bytes(pbd_up__io *io, void *p, size_t n) {
    if (io->bad) return;
    if (io->out || io->in) {
        if (n > io->size - io->off) {
            io->bad = 1;
            return;
        }
        if (io->out) memcpy(io->out + io->off, p, n);
        else memcpy(p, io->in + io->off, n);
    }
    io->off += n;
}
PBD_UP__SHARED void pbd_up__io_int(pbd_up__io *io, int *v) { pbd_up__io_bytes(io, v, sizeof *v); }
PBD_UP__SHARED void pbd_up__io_float(pbd_up__io *io, float *v) { pbd_up__io_bytes(io, v, sizeof *v); }
/* An array of count elements: allocated when loading (count is already
   known to be sane: it must fit in what is left of the buffer). */
PBD_UP__SHARED void pbd_up__io_array(pbd_up__io *io, void **p, size_t count, size_t elem) {
    if (io->bad) return;
    if (io->in) {
        if (elem && count > (io->size - io->off) / elem) {
            io->bad = 1;
            return;
        }
        *p = pbd_up__alloc_array(count, elem);
        if (!*p) {
            io->bad = 2;
            return;
        }
    }
    pbd_up__io_bytes(io, *p, count * elem);
}

/* A method's row of the method table (see "ADDING A METHOD" in the
   manual). The common code checks arguments, sizes, finiteness and the
   trained flag before calling eval; load calls io with m->impl NULL (io
   allocates it), then prepare; destroy must accept a partly loaded impl. */
typedef struct pbd_up__methods {
    const char *name;
    pbd_result (*eval)(pbd_up_model *m, const float *coarse, float *detail);
    void (*io)(pbd_up_model *m, pbd_up__io *io);
    pbd_result (*prepare)(pbd_up_model *m);
    void (*destroy)(pbd_up_model *m);
} pbd_up__methods;

struct pbd_up_model {
    pbd_up_method method;
    int coarse_count, detail_count;
    int trained;
    int simd;                    /* 1: SIMD kernels (where compiled in) */
    int threads;                 /* 0: automatic */
    void *impl;                  /* the method's data */
    void *gpu;                   /* a GPU model: pbd_cuda.cu's copy (pbd_up__cuda_model) */
    float *world_in, *world_out; /* a CPU model's pbd_up_model_eval_world arrays */
    float *result;               /* pbd_up_model_eval's result (3 floats per detail vertex) before
                                    it is checked: a finite coarse pose far out of range (1e30)
                                    can make a non-finite one, which must not reach the caller */
};

/* pbd_cuda.cu's side of a GPU model: its data on the device (UPLOAD: 1,
   or 0 for no memory), an evaluation from a GPU world's device particles
   (EVAL on world w's launches, x: the first coarse vertex's float4;
   *out: the device's detail array), FREE. sizes: sizeof of the model and of the method's data,
   checked against pbd_cuda.cu's copy of this header. */
enum {
    PBD_UP__CUDA_UPLOAD,
    PBD_UP__CUDA_EVAL,
    PBD_UP__CUDA_FREE,
    PBD_UP__CUDA_PUSH,
    PBD_UP__CUDA_PROJECT,
    PBD_UP__CUDA_BIND,       /* a wrinkle mesh's binding to the device (pbd_up_wrinkle_update_world) */
    PBD_UP__CUDA_TARGETS,    /* its targets from a coarse GPU world */
    PBD_UP__CUDA_FINE,       /* its fine positions into a device array */
    PBD_UP__CUDA_FETCH,      /* its targets, a, n and normals to the host */
    PBD_UP__CUDA_UPLOAD_AUTO /* UPLOAD for PBD_DEVICE_AUTO: the emulation declines (-3), as for worlds */
};
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_up__cuda_model(pbd_up_model *m, size_t size, size_t impl_size, int what, pbd_world *w, const float *x,
                       const float **out);
#endif

/* Defined at the end of the implementation ("// ==== method table"), after
   every method's section; NULL for a method that is not compiled in. */
static const pbd_up__methods *pbd_up__methods_of(int method);

/* A new model of a method (impl NULL, untrained, no result array yet). */
static pbd_up_model *pbd_up__model_alloc(pbd_up_method method, int coarse_count, int detail_count) {
    pbd_up_model *m = (pbd_up_model *)pbd_up__alloc(sizeof *m);
    if (!m) return NULL;
    memset(m, 0, sizeof *m);
    m->method = method;
    m->coarse_count = coarse_count;
    m->detail_count = detail_count;
    m->simd = 1;
    return m;
}
/* pbd_up_model_eval's result array (3 floats per detail vertex). */
static int pbd_up__model_result(pbd_up_model *m) {
    m->result = (float *)pbd_up__alloc_array((size_t)(m->detail_count > 0 ? m->detail_count : 0) * 3, sizeof(float));
    return m->result != NULL;
}
/* A new model of a method (impl NULL, untrained), for the methods' create
   and fit functions, whose counts come from meshes already checked. */
PBD_UP__SHARED pbd_up_model *pbd_up__model_new(pbd_up_method method, int coarse_count, int detail_count) {
    pbd_up_model *m = pbd_up__model_alloc(method, coarse_count, detail_count);
    if (m && !pbd_up__model_result(m)) {
        pbd_up__free(m);
        return NULL;
    }
    return m;
}

PBD_UP_DEF const char *pbd_up_method_name(pbd_up_method method) {
    static const char *const names[PBD_UP_METHOD_COUNT] = {"subdivision", "piu", "wpsd", "pdm"};
    return (int)method >= 0 && (int)method < PBD_UP_METHOD_COUNT ? names[method] : NULL;
}
PBD_UP_DEF int pbd_up_method_available(pbd_up_method method) {
    return (int)method >= 0 && (int)method < PBD_UP_METHOD_COUNT && pbd_up__methods_of(method) != NULL;
}
PBD_UP_DEF pbd_up_method pbd_up_model_method(const pbd_up_model *m) { return m ? m->method : PBD_UP_METHOD_COUNT; }
PBD_UP_DEF int pbd_up_model_coarse_count(const pbd_up_model *m) { return m ? m->coarse_count : 0; }
PBD_UP_DEF int pbd_up_model_detail_count(const pbd_up_model *m) { return m ? m->detail_count : 0; }
PBD_UP_DEF int pbd_up_model_trained(const pbd_up_model *m) { return m ? m->trained : 0; }

/* Copies m->result to out when it is finite. Finite coarse positions can
   still make a non-finite result: a coordinate of 1e30 m squared in an
   edge strain (WPSD) or a feature (PDM) overflows float. Then the caller's
   array keeps its contents and the message names the first bad detail
   vertex and the largest coarse coordinate. */
static pbd_result pbd_up__eval_deliver(const pbd_up_model *m, const float *coarse, float *out) {
    const size_t n3 = (size_t)m->detail_count * 3;
    if (!pbd_up__finite_fast(m->result, n3)) {
        int bad = 0;
        while (bad < m->detail_count && pbd_up__finite(m->result + 3 * (size_t)bad, 3)) ++bad;
        float big = 0.0f;
        for (size_t k = 0; k < (size_t)m->coarse_count * 3; ++k) big = fabsf(coarse[k]) > big ? fabsf(coarse[k]) : big;
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_model_eval: the %s model made detail vertex %d NaN or infinite (the largest "
                              "coarse coordinate is %g m); detail_positions_out is unchanged",
                              pbd_up_method_name(m->method), bad, (double)big);
    }
    memcpy(out, m->result, n3 * sizeof(float));
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_model_eval(pbd_up_model *m, const float *coarse_positions, float *detail_positions_out) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_eval: m is NULL");
    if (!coarse_positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_eval: coarse_positions is NULL");
    if (!detail_positions_out)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_eval: detail_positions_out is NULL");
    const pbd_up__methods *t = pbd_up__methods_of(m->method);
    if (!t)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_model_eval: the model's method %d is not compiled in", (int)m->method);
    if (!m->trained)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_model_eval: the model is not trained");
    if (!m->impl)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_model_eval: the model has no data (not trained)");
    if (!pbd_up__finite(coarse_positions, (size_t)m->coarse_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_model_eval: coarse_positions contain NaN or infinity (%d vertices)",
                              m->coarse_count);
    pbd_result r = t->eval(m, coarse_positions, m->result);
    if (r != PBD_OK) return r;
    return pbd_up__eval_deliver(m, coarse_positions, detail_positions_out);
}

PBD_UP_DEF pbd_result pbd_up_model_eval_checked(pbd_up_model *m, const float *coarse_positions, int coarse_count,
                                                float *detail_positions_out, int detail_count) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_eval_checked: m is NULL");
    if (!coarse_positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_eval_checked: coarse_positions is NULL");
    if (!detail_positions_out)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_eval_checked: detail_positions_out is NULL");
    if (coarse_count != m->coarse_count || detail_count != m->detail_count)
        return pbd_world_fail(
            NULL, PBD_ERROR_INVALID_ARGUMENT,
            "pbd_up_model_eval_checked: coarse_count %d and detail_count %d are not the model's %d and %d",
            coarse_count, detail_count, m->coarse_count, m->detail_count);
    return pbd_up_model_eval(m, coarse_positions, detail_positions_out);
}

PBD_UP_DEF pbd_result pbd_up_model_set_simd(pbd_up_model *m, int on) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_set_simd: m is NULL");
    if (on != 0 && on != 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_model_set_simd: on %d must be 0 or 1", on);
    m->simd = on;
    return PBD_OK;
}
PBD_UP_DEF pbd_result pbd_up_model_set_threads(pbd_up_model *m, int threads) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_set_threads: m is NULL");
    if (threads < 0 || threads > 1024)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_model_set_threads: threads %d outside 0..1024",
                              threads);
    m->threads = threads;
    return PBD_OK;
}

PBD_UP_DEF void pbd_up_model_destroy(pbd_up_model *m) {
    if (!m) return;
    pbd_up_model_set_device(m, PBD_DEVICE_CPU); /* frees the device's copy */
    pbd_up__free(m->world_in);
    pbd_up__free(m->world_out);
    pbd_up__free(m->result);
    const pbd_up__methods *t = pbd_up__methods_of(m->method);
    if (t && m->impl) t->destroy(m);
    pbd_up__free(m);
}

/* The header: magic, format version, byte-order tag, method, counts,
   payload size. The checksum (FNV-1a of header and payload) follows the
   payload. */
#define PBD_UP__MAGIC "PBDUPMDL"
#define PBD_UP__FORMAT 1
#define PBD_UP__BYTE_ORDER 0x01020304u
typedef struct pbd_up__header {
    char magic[8];
    uint32_t format, byte_order, method;
    int32_t coarse_count, detail_count;
    uint32_t reserved;
    uint64_t payload;
} pbd_up__header;

/* The same checksum as pbd.h's snapshots (FNV-1a, 64-bit offset basis
   14695981039346656037); pbd.h's functions are private to its
   implementation, which need not be in this translation unit. Files
   written before 0.2 started from 1469598103934665603 (the basis less its
   last digit): still read. */
static uint64_t pbd_up__fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
/* Whether sum is the checksum of p[0..n) from either basis (one pass). */
static int pbd_up__fnv1a_matches(const unsigned char *p, size_t n, uint64_t sum) {
    uint64_t h = 14695981039346656037ull, old = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 1099511628211ull;
        old = (old ^ p[i]) * 1099511628211ull;
    }
    return sum == h || sum == old;
}

static size_t pbd_up__payload_size(const pbd_up_model *m, const pbd_up__methods *t) {
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    t->io((pbd_up_model *)m, &io); /* measuring does not write */
    return io.off;
}

PBD_UP_DEF size_t pbd_up_model_save_size(const pbd_up_model *m) {
    if (!m || !m->trained || !m->impl) return 0;
    const pbd_up__methods *t = pbd_up__methods_of(m->method);
    if (!t) return 0;
    return sizeof(pbd_up__header) + pbd_up__payload_size(m, t) + sizeof(uint64_t);
}

PBD_UP_DEF pbd_result pbd_up_model_save(const pbd_up_model *m, void *buffer, size_t size) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_save: m is NULL");
    if (!buffer) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_save: buffer is NULL");
    size_t need = pbd_up_model_save_size(m);
    if (!need) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_model_save: the model is not trained");
    if (size < need)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_model_save: buffer of %zu bytes, the model needs %zu", size, need);
    const pbd_up__methods *t = pbd_up__methods_of(m->method);
    pbd_up__header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PBD_UP__MAGIC, 8);
    h.format = PBD_UP__FORMAT;
    h.byte_order = PBD_UP__BYTE_ORDER;
    h.method = (uint32_t)m->method;
    h.coarse_count = m->coarse_count;
    h.detail_count = m->detail_count;
    h.payload = (uint64_t)(need - sizeof h - sizeof(uint64_t));
    unsigned char *out = (unsigned char *)buffer;
    memcpy(out, &h, sizeof h);
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    io.out = out + sizeof h;
    io.size = (size_t)h.payload;
    t->io((pbd_up_model *)m, &io);
    if (io.bad || io.off != io.size)
        return pbd_world_fail(
            NULL, PBD_ERROR_INVALID_ARGUMENT,
            "pbd_up_model_save: the model's data did not fit its size (internal error)"); /* cannot happen */
    uint64_t sum = pbd_up__fnv1a(out, need - sizeof sum);
    memcpy(out + need - sizeof sum, &sum, sizeof sum);
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_model_load(const void *buffer, size_t size, pbd_up_model **out) {
    if (!buffer) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_load: buffer is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_load: out is NULL");
    pbd_up__header h;
    uint64_t sum;
    const unsigned char *in = (const unsigned char *)buffer;
    if (size < sizeof h + sizeof sum)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "pbd_up_model_load: %zu bytes are too few for a model file",
                              size);
    memcpy(&h, in, sizeof h);
    memcpy(&sum, in + size - sizeof sum, sizeof sum);
    if (memcmp(h.magic, PBD_UP__MAGIC, 8) != 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: not a pbd_upsample model file (wrong magic)");
    if (h.format != PBD_UP__FORMAT)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: model file is from format %u, this build reads %u",
                              (unsigned)h.format, (unsigned)PBD_UP__FORMAT);
    if (h.byte_order != PBD_UP__BYTE_ORDER)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: the model file has another byte order (tag 0x%08x)",
                              (unsigned)h.byte_order);
    if (h.reserved != 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: the header's reserved field is %u, not 0: the model file is damaged",
                              (unsigned)h.reserved);
    if (h.payload != (uint64_t)(size - sizeof h - sizeof sum))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: the header announces %llu payload bytes, the buffer of %zu bytes "
                              "holds %zu (%s: the size passed must be the file's exactly)",
                              (unsigned long long)h.payload, size, size - sizeof h - sizeof sum,
                              h.payload > (uint64_t)(size - sizeof h - sizeof sum) ? "truncated"
                                                                                   : "bytes past its end");
    if (!pbd_up__fnv1a_matches(in, size - sizeof sum, sum))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: checksum mismatch: the model file is damaged (%zu bytes)", size);
    if (h.method >= (uint32_t)PBD_UP_METHOD_COUNT)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: method %u is not a pbd_up_method (0..%d)", (unsigned)h.method,
                              PBD_UP_METHOD_COUNT - 1);
    if (h.coarse_count <= 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "pbd_up_model_load: coarse vertex count %d must be > 0",
                              (int)h.coarse_count);
    if (h.detail_count <= 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "pbd_up_model_load: detail vertex count %d must be > 0",
                              (int)h.detail_count);
    if (h.coarse_count > INT_MAX / 3)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: coarse vertex count %d is too large (at most %d)",
                              (int)h.coarse_count, INT_MAX / 3);
    if (h.detail_count > INT_MAX / 3)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: detail vertex count %d is too large (at most %d)",
                              (int)h.detail_count, INT_MAX / 3);
    const pbd_up__methods *t = pbd_up__methods_of((int)h.method);
    if (!t)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_model_load: method %s is not compiled into this build",
                              pbd_up_method_name((pbd_up_method)h.method));
    /* the result array waits for a payload that holds up: a damaged
       header's detail count (up to INT_MAX / 3) is not a size to allocate */
    pbd_up_model *m = pbd_up__model_alloc((pbd_up_method)h.method, h.coarse_count, h.detail_count);
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_model_load: out of memory");
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    io.in = in + sizeof h;
    io.size = (size_t)h.payload;
    t->io(m, &io);
    pbd_result r = PBD_OK;
    if (io.bad == 2) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_model_load: out of memory");
    else if (io.bad || io.off != io.size || !m->impl)
        r = pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                           "pbd_up_model_load: the %s payload is malformed: the model file is damaged",
                           pbd_up_method_name((pbd_up_method)h.method));
    else r = t->prepare(m);
    if (r == PBD_OK && !pbd_up__model_result(m))
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_model_load: out of memory");
    if (r != PBD_OK) {
        pbd_up_model_destroy(m);
        return r;
    }
    m->trained = 1;
    *out = m;
    return PBD_OK;
}

/* ---- sparse stencil matrices (shared by the methods) ----------------------
   y = S x for 3 floats per vertex: row i of S gives detail vertex i as a
   weighted sum of coarse vertices (subdivision stencils, PIU's operator B).
   Stored as CSR. The SIMD kernel keeps a row's x, y, z in the lanes of
   one 128-bit register: a vertex is one load, one multiply by the
   broadcast weight and one add (the scalar loop does three of each; a
   lane-per-row layout would need three gathers per entry, which cost
   more than the scalar loads they replace). Every row is summed in the
   same order, acc = 0 then acc += w_k x_k for k = 0, 1, ..., in both
   paths, so SIMD == scalar bit for bit, and rows do not depend on each
   other, so any thread count gives the same bits. */
typedef struct pbd_up__sparse {
    int rows, cols;
    int *start; /* rows + 1 */
    int *col;   /* start[rows] column indices, increasing within a row */
    float *val;
    /* derived (not saved) */
    int chunks; /* row blocks of PBD_UP__W shared out between threads */
} pbd_up__sparse;

PBD_UP__SHARED void pbd_up__sparse_free(pbd_up__sparse *s) {
    pbd_up__free(s->start);
    pbd_up__free(s->col);
    pbd_up__free(s->val);
    memset(s, 0, sizeof *s);
}

PBD_UP__SHARED void pbd_up__sparse_io(pbd_up__io *io, pbd_up__sparse *s) {
    pbd_up__io_int(io, &s->rows);
    pbd_up__io_int(io, &s->cols);
    if (io->in && (s->rows <= 0 || s->cols <= 0 || s->rows == INT_MAX)) io->bad = 1;
    pbd_up__io_array(io, (void **)&s->start, (size_t)s->rows + 1, sizeof(int));
    if (io->bad) return;
    int nnz = s->start[s->rows];
    if (io->in && (s->start[0] != 0 || nnz < 0)) {
        io->bad = 1;
        return;
    }
    pbd_up__io_array(io, (void **)&s->col, (size_t)nnz, sizeof(int));
    pbd_up__io_array(io, (void **)&s->val, (size_t)nnz, sizeof(float));
}

/* Checks the CSR arrays (monotone starts, columns in range and increasing,
   finite weights) and builds the sliced-ELL copy. */
PBD_UP__SHARED pbd_result pbd_up__sparse_prepare(pbd_up__sparse *s) {
    if (s->rows <= 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "stencil matrix: %d rows, must be > 0", s->rows);
    if (s->cols <= 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "stencil matrix: %d columns, must be > 0", s->cols);
    if (!s->start) return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "stencil matrix: no row starts");
    if (s->start[0] != 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "stencil matrix: row 0 starts at %d, not 0", s->start[0]);
    /* all starts first: the column arrays hold start[rows] entries, and a
       row that ends past them must be refused before it is read */
    for (int i = 0; i < s->rows; ++i)
        if (s->start[i + 1] < s->start[i])
            return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                                  "stencil matrix: row %d starts at %d, before row %d (at %d)", i + 1, s->start[i + 1],
                                  i, s->start[i]);
    for (int i = 0; i < s->rows; ++i) {
        for (int k = s->start[i]; k < s->start[i + 1]; ++k) {
            if (s->col[k] < 0 || s->col[k] >= s->cols || (k > s->start[i] && s->col[k] <= s->col[k - 1]))
                return pbd_world_fail(
                    NULL, PBD_ERROR_BAD_SNAPSHOT,
                    "stencil matrix: entry %d of row %d has column %d, out of 0..%d or not increasing", k, i, s->col[k],
                    s->cols - 1);
            if (!pbd_up__finite(&s->val[k], 1))
                return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                                      "stencil matrix: the weight of entry %d (row %d) is not finite", k, i);
        }
    }
    if (s->cols > INT_MAX / 3)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW, "stencil matrix: %d columns are too many (at most %d)", s->cols,
                              INT_MAX / 3);
    s->chunks = (s->rows + PBD_UP__W - 1) / PBD_UP__W;
    return PBD_OK;
}

/* The scalar reference: row i of S x into y[0 .. 3), x `stride` floats a
   vertex (3; a GPU model reads a world's float4 particles). */
static PBD_HD void pbd_up__sparse_row(const pbd_up__sparse *s, const float *x, int stride, int i, float *y) {
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int k = s->start[i]; k < s->start[i + 1]; ++k) {
        const float w = s->val[k], *p = x + (size_t)stride * (size_t)s->col[k];
        ax += w * p[0];
        ay += w * p[1];
        az += w * p[2];
    }
    y[0] = ax;
    y[1] = ay;
    y[2] = az;
}
/* rows [r0, r1) */
static void pbd_up__sparse_rows_scalar(const pbd_up__sparse *s, const float *x, float *y, int r0, int r1) {
    for (int i = r0; i < r1; ++i) pbd_up__sparse_row(s, x, 3, i, y + 3 * (size_t)i);
}

#if PBD_UP__W > 1
/* The SIMD kernel: rows [r0, r1), x y z in the lanes of one register. The
   last vertex is loaded by parts: a 4-float load there would read past x. */
static void pbd_up__sparse_rows_simd(const pbd_up__sparse *s, const float *x, float *y, int r0, int r1) {
    const int last = s->cols - 1;
    for (int i = r0; i < r1; ++i) {
        simde__m128 acc = simde_mm_setzero_ps();
        for (int k = s->start[i]; k < s->start[i + 1]; ++k) {
            const int c = s->col[k];
            const float *p = x + 3 * (size_t)c;
            simde__m128 v = c < last ? simde_mm_loadu_ps(p) : simde_mm_set_ps(0.0f, p[2], p[1], p[0]);
            acc = simde_mm_add_ps(acc, simde_mm_mul_ps(simde_mm_set1_ps(s->val[k]), v));
        }
        float o[4];
        simde_mm_storeu_ps(o, acc);
        y[3 * (size_t)i] = o[0];
        y[3 * (size_t)i + 1] = o[1];
        y[3 * (size_t)i + 2] = o[2];
    }
}
#endif

/* y (rows*3) = S x (cols*3): one sparse matrix-vector product, SIMD or
   scalar, shared by `threads` OpenMP threads (0: automatic). */
PBD_UP__SHARED void pbd_up__sparse_mul3(const pbd_up__sparse *s, const float *x, float *y, int simd, int threads) {
    int team = pbd_up__team(threads, (long)s->start[s->rows]);
    const int W = PBD_UP__W;
    (void)simd;
    (void)team;
    void (*rows)(const pbd_up__sparse *, const float *, float *, int, int) = pbd_up__sparse_rows_scalar;
#if PBD_UP__W > 1
    if (simd) rows = pbd_up__sparse_rows_simd;
#endif
    if (team <= 1) {
        rows(s, x, y, 0, s->rows);
        return;
    }
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team))
    for (int c = 0; c < s->chunks; ++c) {
        int r1 = (c + 1) * W < s->rows ? (c + 1) * W : s->rows;
        rows(s, x, y, c * W, r1);
    }
}

// ==== subdivision ===========================================================

/* A CSR matrix with double weights, built while composing the levels. */
typedef struct pbd_up__csrd {
    int rows, nnz, cap;
    int *start, *col;
    double *val;
} pbd_up__csrd;

static void pbd_up__csrd_free(pbd_up__csrd *a) {
    pbd_up__free(a->start);
    pbd_up__free(a->col);
    pbd_up__free(a->val);
    memset(a, 0, sizeof *a);
}
static int pbd_up__csrd_init(pbd_up__csrd *a, int rows, int cap) {
    memset(a, 0, sizeof *a);
    a->rows = rows;
    a->cap = cap > 16 ? cap : 16;
    a->start = (int *)pbd_up__alloc_array((size_t)rows + 1, sizeof(int));
    a->col = (int *)pbd_up__alloc_array((size_t)a->cap, sizeof(int));
    a->val = (double *)pbd_up__alloc_array((size_t)a->cap, sizeof(double));
    if (!a->start || !a->col || !a->val) {
        pbd_up__csrd_free(a);
        return 0;
    }
    a->start[0] = 0;
    return 1;
}
static int pbd_up__csrd_push(pbd_up__csrd *a, int col, double val) {
    if (a->nnz == a->cap) {
        if (a->cap > INT_MAX / 2) return 0;
        int cap = a->cap * 2;
        int *c = (int *)pbd_up__alloc_array((size_t)cap, sizeof(int));
        double *v = (double *)pbd_up__alloc_array((size_t)cap, sizeof(double));
        if (!c || !v) {
            pbd_up__free(c);
            pbd_up__free(v);
            return 0;
        }
        memcpy(c, a->col, (size_t)a->nnz * sizeof(int));
        memcpy(v, a->val, (size_t)a->nnz * sizeof(double));
        pbd_up__free(a->col);
        pbd_up__free(a->val);
        a->col = c;
        a->val = v;
        a->cap = cap;
    }
    a->col[a->nnz] = col;
    a->val[a->nnz] = val;
    a->nnz++;
    return 1;
}

typedef struct pbd_up__edge_ref {
    int a, b, tri, k;
} pbd_up__edge_ref;

static int pbd_up__edge_ref_cmp(const void *pa, const void *pb) {
    const pbd_up__edge_ref *x = (const pbd_up__edge_ref *)pa, *y = (const pbd_up__edge_ref *)pb;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    if (x->tri != y->tri) return x->tri < y->tri ? -1 : 1;
    return x->k < y->k ? -1 : (x->k > y->k);
}
static int pbd_up__int_cmp(const void *pa, const void *pb) {
    int x = *(const int *)pa, y = *(const int *)pb;
    return x < y ? -1 : (x > y);
}

/* Checks a triangle list: indices in range, three distinct corners, no
   triangle listed twice (in any vertex order: pbd.h's
   pbd_find_repeated_element; where its edges border nothing else such a
   triangle passes as edge-manifold); the message starts with what, the
   field they came from (a wrinkle checks two meshes). */
static pbd_result pbd_up__check_triangles(const int *tris, int nt, int nv, const char *what) {
    for (long t = 0; t < (long)nt; ++t) {
        const int *v = tris + 3 * t;
        for (int k = 0; k < 3; ++k)
            if (v[k] < 0 || v[k] >= nv)
                return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                      "%s: triangle %ld names vertex %d, outside 0..%d", what, t, v[k], nv - 1);
        int r = v[0] == v[1] || v[0] == v[2] ? v[0] : v[1] == v[2] ? v[1] : -1;
        if (r >= 0) return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "%s: triangle %ld repeats vertex %d", what, t, r);
    }
    int a = 0, b = 0, twice = pbd_find_repeated_element(NULL, tris, nt, 3, &a, &b);
    if (twice < 0) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "%s: out of memory checking them", what);
    if (twice)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "%s: triangles %d and %d are the same triangle (vertices %d, %d, %d)", what, a, b,
                              tris[3 * a], tris[3 * a + 1], tris[3 * a + 2]);
    return PBD_OK;
}

/* One level of Loop (smooth) or midpoint (linear) subdivision of the
   topology (tris, nt, nv): L (nv + E rows over the nv old vertices) and
   the 4 nt new triangles. Loop 1987; boundary rules as in the manual. */
static pbd_result pbd_up__loop_level(const int *tris, int nt, int nv, int smooth, pbd_up__csrd *L, int **tris_out,
                                     int *nv_out) {
    pbd_result r = PBD_OK;
    size_t nref = (size_t)nt * 3;
    pbd_up__edge_ref *ref = (pbd_up__edge_ref *)pbd_up__alloc_array(nref, sizeof *ref);
    int *tri_edge = (int *)pbd_up__alloc_array(nref, sizeof(int));
    int *edge = (int *)pbd_up__alloc_array(nref * 4, sizeof(int)); /* a, b, opposite0, opposite1 (-1) */
    int *nb_start = (int *)pbd_up__calloc_array((size_t)nv + 1, sizeof(int));
    int *nb = (int *)pbd_up__alloc_array(nref * 2, sizeof(int));
    int *bnd = (int *)pbd_up__alloc_array((size_t)nv * 2, sizeof(int));
    int *bcount = (int *)pbd_up__calloc_array((size_t)nv, sizeof(int));
    int *fill = (int *)pbd_up__calloc_array((size_t)nv, sizeof(int));
    int *nt4 = (int *)pbd_up__alloc_array(nref * 4, sizeof(int));
    int ne = 0;
    memset(L, 0, sizeof *L);
    *tris_out = NULL;
    if (!ref || !tri_edge || !edge || !nb_start || !nb || !bnd || !bcount || !fill || !nt4) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
        goto done;
    }
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k) {
            int u = tris[3 * t + k], v = tris[3 * t + (k + 1) % 3];
            pbd_up__edge_ref e;
            e.a = u < v ? u : v;
            e.b = u < v ? v : u;
            e.tri = t;
            e.k = k;
            ref[3 * (size_t)t + k] = e;
        }
    qsort(ref, nref, sizeof *ref, pbd_up__edge_ref_cmp);
    for (size_t i = 0; i < nref;) {
        size_t j = i;
        while (j < nref && ref[j].a == ref[i].a && ref[j].b == ref[i].b) ++j;
        if (j - i > 2) {
            r = pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                               "edge (%d, %d) is in %d triangles: the mesh must be edge-manifold", ref[i].a, ref[i].b,
                               (int)(j - i));
            goto done;
        } /* not edge-manifold */
        int *e = edge + 4 * (size_t)ne;
        e[0] = ref[i].a;
        e[1] = ref[i].b;
        e[2] = e[3] = -1;
        for (size_t q = i; q < j; ++q) {
            const int *tv = tris + 3 * (size_t)ref[q].tri;
            e[2 + (q - i)] = tv[(ref[q].k + 2) % 3];
            tri_edge[3 * (size_t)ref[q].tri + ref[q].k] = ne;
        }
        nb_start[e[0] + 1]++;
        nb_start[e[1] + 1]++;
        if (e[3] < 0) {
            for (int s = 0; s < 2; ++s) {
                int v = e[s], o = e[1 - s];
                if (bcount[v] < 2) bnd[2 * v + bcount[v]] = o;
                bcount[v]++;
            }
        }
        ne++;
        i = j;
    }
    if ((long)nv + ne > INT_MAX / 3) {
        r = pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                           "subdividing %d vertices and %d edges makes too many vertices (at most %d)", nv, ne,
                           INT_MAX / 3);
        goto done;
    }
    for (int v = 0; v < nv; ++v) nb_start[v + 1] += nb_start[v];
    for (int i = 0; i < ne; ++i) {
        const int *e = edge + 4 * (size_t)i;
        nb[nb_start[e[0]] + fill[e[0]]++] = e[1];
        nb[nb_start[e[1]] + fill[e[1]]++] = e[0];
    }
    if (!pbd_up__csrd_init(L, nv + ne, 7 * (nv + ne))) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
        goto done;
    }
    for (int v = 0; v < nv; ++v) { /* even vertices */
        int n = nb_start[v + 1] - nb_start[v], ok = 1;
        if (!smooth || n == 0 || (bcount[v] != 0 && bcount[v] != 2)) {
            ok = pbd_up__csrd_push(L, v, 1.0); /* linear, isolated or corner */
        } else if (bcount[v] == 2) {
            ok = pbd_up__csrd_push(L, v, 0.75) && pbd_up__csrd_push(L, bnd[2 * v], 0.125) &&
                 pbd_up__csrd_push(L, bnd[2 * v + 1], 0.125);
        } else {
            const double pi = 3.14159265358979323846;
            double c = 0.375 + 0.25 * cos(2.0 * pi / n);
            double beta = (0.625 - c * c) / n;
            ok = pbd_up__csrd_push(L, v, 1.0 - n * beta);
            for (int q = nb_start[v]; q < nb_start[v + 1] && ok; ++q) ok = pbd_up__csrd_push(L, nb[q], beta);
        }
        if (!ok) {
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
            goto done;
        }
        L->start[v + 1] = L->nnz;
    }
    for (int i = 0; i < ne; ++i) { /* odd vertices */
        const int *e = edge + 4 * (size_t)i;
        int ok;
        if (smooth && e[3] >= 0)
            ok = pbd_up__csrd_push(L, e[0], 0.375) && pbd_up__csrd_push(L, e[1], 0.375) &&
                 pbd_up__csrd_push(L, e[2], 0.125) && pbd_up__csrd_push(L, e[3], 0.125);
        else ok = pbd_up__csrd_push(L, e[0], 0.5) && pbd_up__csrd_push(L, e[1], 0.5);
        if (!ok) {
            r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
            goto done;
        }
        L->start[nv + i + 1] = L->nnz;
    }
    for (int t = 0; t < nt; ++t) {
        int a = tris[3 * t], b = tris[3 * t + 1], c = tris[3 * t + 2];
        int ab = nv + tri_edge[3 * t], bc = nv + tri_edge[3 * t + 1], ca = nv + tri_edge[3 * t + 2];
        int q[12] = {a, ab, ca, ab, b, bc, ca, bc, c, ab, bc, ca};
        memcpy(nt4 + 12 * (size_t)t, q, sizeof q);
    }
    *tris_out = nt4;
    nt4 = NULL;
    *nv_out = nv + ne;
done:
    if (r != PBD_OK) pbd_up__csrd_free(L);
    pbd_up__free(ref);
    pbd_up__free(tri_edge);
    pbd_up__free(edge);
    pbd_up__free(nb_start);
    pbd_up__free(nb);
    pbd_up__free(bnd);
    pbd_up__free(bcount);
    pbd_up__free(fill);
    pbd_up__free(nt4);
    return r;
}

/* S_new = L S (rows of L combine rows of S), columns sorted, exact zeros
   dropped; a dense accumulator over the coarse vertices. */
static pbd_result pbd_up__compose(const pbd_up__csrd *L, const pbd_up__csrd *S, int ncoarse, pbd_up__csrd *out) {
    double *acc = (double *)pbd_up__calloc_array((size_t)ncoarse, sizeof(double));
    int *mark = (int *)pbd_up__alloc_array((size_t)ncoarse, sizeof(int));
    int *touched = (int *)pbd_up__alloc_array((size_t)ncoarse, sizeof(int));
    pbd_result r = PBD_OK;
    if (!acc || !mark || !touched || !pbd_up__csrd_init(out, L->rows, L->nnz * 2)) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
        goto done;
    }
    for (int c = 0; c < ncoarse; ++c) mark[c] = -1;
    for (int i = 0; i < L->rows; ++i) {
        int nt = 0;
        for (int k = L->start[i]; k < L->start[i + 1]; ++k) {
            int j = L->col[k];
            for (int q = S->start[j]; q < S->start[j + 1]; ++q) {
                int c = S->col[q];
                if (mark[c] != i) {
                    mark[c] = i;
                    acc[c] = 0.0;
                    touched[nt++] = c;
                }
                acc[c] += L->val[k] * S->val[q];
            }
        }
        qsort(touched, (size_t)nt, sizeof(int), pbd_up__int_cmp);
        for (int q = 0; q < nt; ++q)
            if (acc[touched[q]] != 0.0 && !pbd_up__csrd_push(out, touched[q], acc[touched[q]])) {
                r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
                goto done;
            }
        out->start[i + 1] = out->nnz;
    }
done:
    if (r != PBD_OK) pbd_up__csrd_free(out);
    pbd_up__free(acc);
    pbd_up__free(mark);
    pbd_up__free(touched);
    return r;
}

/* `levels` levels: the stencil S over the nv coarse vertices and the fine
   triangles (nt 4^levels of them). */
static pbd_result pbd_up__loop_build(const int *tris, int nt, int nv, int levels, int smooth, pbd_up__csrd *S,
                                     int **tris_out, int *nv_out) {
    if (!tris) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "triangles is NULL");
    if (!S) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "internal error: no stencil to fill");
    if (!tris_out)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "internal error: no array for the subdivided triangles");
    if (!nv_out)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "internal error: no count for the subdivided vertices");
    static const char *const count_names[2] = {"triangle_count", "vertex_count"};
    const int counts[2] = {nt, nv};
    pbd_result bad = pbd_up__check_counts(NULL, counts, count_names, 2, 1);
    if (bad != PBD_OK) return bad;
    if (levels < 0 || levels > 8)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "levels %d must be in 0..8", levels);
    if ((long long)nt << (2 * levels) > INT_MAX / 12)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "%d triangles at %d levels make %lld triangles, too many (at most %d)", nt, levels,
                              (long long)nt << (2 * levels), INT_MAX / 12);
    pbd_result r = pbd_up__check_triangles(tris, nt, nv, "triangles");
    if (r != PBD_OK) return r;
    int *cur = (int *)pbd_up__alloc_array((size_t)nt * 3, sizeof(int));
    if (!cur || !pbd_up__csrd_init(S, nv, nv)) {
        pbd_up__free(cur);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory subdividing the mesh");
    }
    memcpy(cur, tris, (size_t)nt * 3 * sizeof(int));
    for (int v = 0; v < nv; ++v) {
        pbd_up__csrd_push(S, v, 1.0);
        S->start[v + 1] = v + 1;
    }
    int cnv = nv, cnt = nt;
    for (int l = 0; l < levels && r == PBD_OK; ++l) {
        pbd_up__csrd L, S2;
        int *next = NULL, nnv = 0;
        r = pbd_up__loop_level(cur, cnt, cnv, smooth, &L, &next, &nnv);
        if (r != PBD_OK) break;
        r = pbd_up__compose(&L, S, nv, &S2);
        pbd_up__csrd_free(&L);
        if (r != PBD_OK) {
            pbd_up__free(next);
            break;
        }
        pbd_up__csrd_free(S);
        *S = S2;
        pbd_up__free(cur);
        cur = next;
        cnv = nnv;
        cnt *= 4;
    }
    if (r != PBD_OK) {
        pbd_up__csrd_free(S);
        pbd_up__free(cur);
        return r;
    }
    *tris_out = cur;
    *nv_out = cnv;
    return PBD_OK;
}

PBD_UP_DEF void pbd_up_mesh_free(pbd_mesh *m) {
    if (!m) return;
    pbd_up__free(m->positions);
    pbd_up__free(m->triangles);
    pbd_up__free(m->tets);
    memset(m, 0, sizeof *m);
}

PBD_UP_DEF pbd_result pbd_up_mesh_subdivide(const pbd_mesh *in, int levels, int smooth, pbd_mesh *out) {
    if (!in) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_mesh_subdivide: in is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_mesh_subdivide: out is NULL");
    if (!in->positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_mesh_subdivide: in.positions is NULL");
    if (!in->triangles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_mesh_subdivide: in.triangles is NULL");
    if (smooth != 0 && smooth != 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_mesh_subdivide: smooth %d must be 0 or 1",
                              smooth);
    if (in->vertex_count > INT_MAX / 3)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_up_mesh_subdivide: vertex_count %d is too large (at most %d)", in->vertex_count,
                              INT_MAX / 3);
    if (in->vertex_count > 0 && !pbd_up__finite(in->positions, (size_t)in->vertex_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_mesh_subdivide: in.positions contain NaN or infinity (%d vertices)",
                              in->vertex_count);
    pbd_up__csrd S;
    int *tris = NULL, nv = 0;
    pbd_result r =
        pbd_up__loop_build(in->triangles, in->triangle_count, in->vertex_count, levels, smooth, &S, &tris, &nv);
    if (r != PBD_OK) return r;
    float *x = (float *)pbd_up__alloc_array((size_t)nv * 3, sizeof(float));
    if (!x) {
        pbd_up__csrd_free(&S);
        pbd_up__free(tris);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_mesh_subdivide: out of memory");
    }
    for (int i = 0; i < nv; ++i)
        for (int c = 0; c < 3; ++c) {
            double s = 0.0;
            for (int k = S.start[i]; k < S.start[i + 1]; ++k) s += S.val[k] * in->positions[3 * (size_t)S.col[k] + c];
            x[3 * (size_t)i + c] = (float)s;
        }
    pbd_up__csrd_free(&S);
    memset(out, 0, sizeof *out);
    out->positions = x;
    out->vertex_count = nv;
    out->triangles = tris;
    out->triangle_count = in->triangle_count << (2 * levels);
    return PBD_OK;
}

/* The subdivision model's data. */
typedef struct pbd_up__subdiv {
    int levels;
    pbd_up__sparse S; /* detail_count x coarse_count */
    int triangle_count;
    int *triangles; /* the detail mesh */
    int has_detail;
    float *detail; /* detail_count*3: dx in the local frames */
    /* derived */
    int *vt_start, *vt_tri; /* triangles around each detail vertex, increasing */
    int *first_nb;          /* lowest-numbered neighbour (-1: none) */
    float *x0, *frames;     /* scratch: detail_count*3 and *9 */
} pbd_up__subdiv;

static pbd_up__subdiv *pbd_up__subdiv_of(const pbd_up_model *m) {
    return m && m->method == PBD_UP_SUBDIVISION && m->impl ? (pbd_up__subdiv *)m->impl : NULL;
}

static void pbd_up__subdiv_destroy(pbd_up_model *m) {
    pbd_up__subdiv *s = (pbd_up__subdiv *)m->impl;
    pbd_up__sparse_free(&s->S);
    pbd_up__free(s->triangles);
    pbd_up__free(s->detail);
    pbd_up__free(s->vt_start);
    pbd_up__free(s->vt_tri);
    pbd_up__free(s->first_nb);
    pbd_up__free(s->x0);
    pbd_up__free(s->frames);
    pbd_up__free(s);
    m->impl = NULL;
}

static void pbd_up__subdiv_io(pbd_up_model *m, pbd_up__io *io) {
    if (io->in) {
        m->impl = pbd_up__calloc_array(1, sizeof(pbd_up__subdiv));
        if (!m->impl) {
            io->bad = 2;
            return;
        }
    }
    pbd_up__subdiv *s = (pbd_up__subdiv *)m->impl;
    pbd_up__io_int(io, &s->levels);
    pbd_up__sparse_io(io, &s->S);
    pbd_up__io_int(io, &s->triangle_count);
    if (io->in && s->triangle_count <= 0) io->bad = 1;
    pbd_up__io_array(io, (void **)&s->triangles, (size_t)s->triangle_count * 3, sizeof(int));
    pbd_up__io_int(io, &s->has_detail);
    if (io->in && s->has_detail != 0 && s->has_detail != 1) io->bad = 1;
    if (s->has_detail) pbd_up__io_array(io, (void **)&s->detail, (size_t)m->detail_count * 3, sizeof(float));
}

/* Validates the data and builds the adjacency and scratch. */
static pbd_result pbd_up__subdiv_prepare(pbd_up_model *m) {
    pbd_up__subdiv *s = (pbd_up__subdiv *)m->impl;
    int n = m->detail_count;
    if (s->levels < 0 || s->levels > 8 || s->S.rows != n || s->S.cols != m->coarse_count)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "model: a subdivision of %d levels with a %d x %d stencil does not fit %d detail and %d "
                              "coarse vertices (levels 0..8)",
                              s->levels, s->S.rows, s->S.cols, n, m->coarse_count);
    pbd_result r = pbd_up__sparse_prepare(&s->S);
    if (r != PBD_OK)
        return r == PBD_ERROR_OUT_OF_MEMORY
                   ? r
                   : pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "model: its subdivision stencil is invalid (%s)",
                                    pbd_result_string(r));
    if (pbd_up__check_triangles(s->triangles, s->triangle_count, n, "model") != PBD_OK)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "model: the subdivided triangles are invalid (%d detail vertices)", n);
    if (s->has_detail && !pbd_up__finite(s->detail, (size_t)n * 3))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "model: the two-scale detail contains NaN or infinity (%d detail vertices)", n);
    pbd_up__free(s->vt_start);
    pbd_up__free(s->vt_tri);
    pbd_up__free(s->first_nb);
    pbd_up__free(s->x0);
    pbd_up__free(s->frames);
    s->vt_start = (int *)pbd_up__calloc_array((size_t)n + 1, sizeof(int));
    s->vt_tri = (int *)pbd_up__alloc_array((size_t)s->triangle_count * 3, sizeof(int));
    s->first_nb = (int *)pbd_up__alloc_array((size_t)n, sizeof(int));
    s->x0 = (float *)pbd_up__alloc_array((size_t)n * 3, sizeof(float));
    s->frames = (float *)pbd_up__alloc_array((size_t)n * 9, sizeof(float));
    if (!s->vt_start || !s->vt_tri || !s->first_nb || !s->x0 || !s->frames)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory preparing a subdivision model");
    for (int t = 0; t < s->triangle_count; ++t)
        for (int k = 0; k < 3; ++k) s->vt_start[s->triangles[3 * t + k] + 1]++;
    for (int v = 0; v < n; ++v) s->vt_start[v + 1] += s->vt_start[v];
    int *fill = (int *)pbd_up__calloc_array((size_t)n, sizeof(int));
    if (!fill) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory preparing a subdivision model");
    for (int t = 0; t < s->triangle_count; ++t)
        for (int k = 0; k < 3; ++k) {
            int v = s->triangles[3 * t + k];
            s->vt_tri[s->vt_start[v] + fill[v]++] = t;
        }
    pbd_up__free(fill);
    for (int v = 0; v < n; ++v) s->first_nb[v] = -1;
    for (int t = 0; t < s->triangle_count; ++t)
        for (int k = 0; k < 3; ++k) {
            int v = s->triangles[3 * t + k];
            for (int q = 1; q < 3; ++q) {
                int u = s->triangles[3 * t + (k + q) % 3];
                if (s->first_nb[v] < 0 || u < s->first_nb[v]) s->first_nb[v] = u;
            }
        }
    return PBD_OK;
}

/* The local frame of vertex v of the smooth mesh x (survey 5.1), 9 floats
   t, b, n; see pbd_up_subdivision_smooth. */
static PBD_HD void pbd_up__vertex_frame(const pbd_up__subdiv *s, const float *x, int v, float *f) {
    float n[3] = {0.0f, 0.0f, 0.0f};
    for (int q = s->vt_start[v]; q < s->vt_start[v + 1]; ++q) {
        const int *t = s->triangles + 3 * (size_t)s->vt_tri[q];
        const float *a = x + 3 * (size_t)t[0], *b = x + 3 * (size_t)t[1], *c = x + 3 * (size_t)t[2];
        float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
        n[0] += e1[1] * e2[2] - e1[2] * e2[1];
        n[1] += e1[2] * e2[0] - e1[0] * e2[2];
        n[2] += e1[0] * e2[1] - e1[1] * e2[0];
    }
    float len = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (len > PBD_UP__LENGTH_MIN) {
        n[0] /= len;
        n[1] /= len;
        n[2] /= len;
    } else {
        n[0] = 0.0f;
        n[1] = 0.0f;
        n[2] = 1.0f;
    }
    float d[3] = {1.0f, 0.0f, 0.0f};
    if (s->first_nb[v] >= 0) {
        const float *p = x + 3 * (size_t)v, *u = x + 3 * (size_t)s->first_nb[v];
        d[0] = u[0] - p[0];
        d[1] = u[1] - p[1];
        d[2] = u[2] - p[2];
    }
    float t[3], tl = 0.0f;
    for (int attempt = 0; attempt < 3; ++attempt) {
        float dn = d[0] * n[0] + d[1] * n[1] + d[2] * n[2];
        t[0] = d[0] - dn * n[0];
        t[1] = d[1] - dn * n[1];
        t[2] = d[2] - dn * n[2];
        tl = sqrtf(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
        float dl = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        if (tl > PBD_UP__TANGENT_REL_MIN * dl && tl > PBD_UP__LENGTH_MIN) break;
        /* the neighbour lies along the normal: try the world axes */
        d[0] = attempt == 0 ? 1.0f : 0.0f;
        d[1] = attempt == 1 ? 1.0f : 0.0f;
        d[2] = attempt == 2 ? 1.0f : 0.0f;
        if (attempt == 0 && fabsf(n[0]) > 0.9f) {
            d[0] = 0.0f;
            d[1] = 1.0f;
        }
        tl = 0.0f;
    }
    if (!(tl > 0.0f)) {
        t[0] = 1.0f;
        t[1] = 0.0f;
        t[2] = 0.0f;
        tl = 1.0f;
    }
    t[0] /= tl;
    t[1] /= tl;
    t[2] /= tl;
    f[0] = t[0];
    f[1] = t[1];
    f[2] = t[2];
    f[3] = n[1] * t[2] - n[2] * t[1];
    f[4] = n[2] * t[0] - n[0] * t[2];
    f[5] = n[0] * t[1] - n[1] * t[0];
    f[6] = n[0];
    f[7] = n[1];
    f[8] = n[2];
}

/* x0 = S u into x0; frames (optional) for every vertex. */
static void pbd_up__subdiv_smooth(pbd_up_model *m, const float *u, float *x0, float *frames) {
    pbd_up__subdiv *s = (pbd_up__subdiv *)m->impl;
    pbd_up__sparse_mul3(&s->S, u, x0, m->simd, m->threads);
    if (!frames) return;
    int n = m->detail_count;
    int team = pbd_up__team(m->threads, 24L * n);
    (void)team;
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team) if(team > 1))
    for (int v = 0; v < n; ++v) pbd_up__vertex_frame(s, x0, v, frames + 9 * (size_t)v);
}

/* Detail vertex v: x = x0 + R dx (survey 5.1). */
static PBD_HD void pbd_up__subdiv_detail(const pbd_up__subdiv *s, int v, float *out) {
    const float *f = s->frames + 9 * (size_t)v, *d = s->detail + 3 * (size_t)v, *p = s->x0 + 3 * (size_t)v;
    for (int c = 0; c < 3; ++c) out[3 * (size_t)v + c] = p[c] + (d[0] * f[c] + d[1] * f[3 + c] + d[2] * f[6 + c]);
}

/* x = x0 + R dx (survey 5.1). */
static pbd_result pbd_up__subdiv_eval(pbd_up_model *m, const float *u, float *out) {
    pbd_up__subdiv *s = (pbd_up__subdiv *)m->impl;
    if (!s->has_detail) {
        pbd_up__sparse_mul3(&s->S, u, out, m->simd, m->threads);
        return PBD_OK;
    }
    pbd_up__subdiv_smooth(m, u, s->x0, s->frames);
    int n = m->detail_count;
    int team = pbd_up__team(m->threads, 8L * n);
    (void)team;
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team) if(team > 1))
    for (int v = 0; v < n; ++v) pbd_up__subdiv_detail(s, v, out);
    return PBD_OK;
}

static const pbd_up__methods pbd_up__subdivision_methods = {"subdivision", pbd_up__subdiv_eval, pbd_up__subdiv_io,
                                                            pbd_up__subdiv_prepare, pbd_up__subdiv_destroy};

PBD_UP_DEF pbd_result pbd_up_subdivision_create(const int *triangles, int triangle_count, int vertex_count, int levels,
                                                pbd_up_model **out) {
    if (!triangles) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_create: triangles is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_create: out is NULL");
    pbd_up__csrd S;
    int *tris = NULL, nv = 0;
    pbd_result r = pbd_up__loop_build(triangles, triangle_count, vertex_count, levels, 1, &S, &tris, &nv);
    if (r != PBD_OK) return r;
    pbd_up_model *m = pbd_up__model_new(PBD_UP_SUBDIVISION, vertex_count, nv);
    pbd_up__subdiv *s = (pbd_up__subdiv *)pbd_up__calloc_array(1, sizeof(pbd_up__subdiv));
    if (m) m->impl = s;
    if (!m || !s) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_subdivision_create: out of memory");
        goto fail;
    }
    s->levels = levels;
    s->triangles = tris;
    tris = NULL;
    s->triangle_count = triangle_count << (2 * levels);
    s->S.rows = nv;
    s->S.cols = vertex_count;
    s->S.start = (int *)pbd_up__alloc_array((size_t)nv + 1, sizeof(int));
    s->S.col = (int *)pbd_up__alloc_array((size_t)S.nnz, sizeof(int));
    s->S.val = (float *)pbd_up__alloc_array((size_t)S.nnz, sizeof(float));
    if (!s->S.start || !s->S.col || !s->S.val) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_subdivision_create: out of memory");
        goto fail;
    }
    memcpy(s->S.start, S.start, ((size_t)nv + 1) * sizeof(int));
    memcpy(s->S.col, S.col, (size_t)S.nnz * sizeof(int));
    for (int k = 0; k < S.nnz; ++k) s->S.val[k] = (float)S.val[k];
    r = pbd_up__subdiv_prepare(m);
    if (r != PBD_OK) goto fail;
    pbd_up__csrd_free(&S);
    m->trained = 1;
    *out = m;
    return PBD_OK;
fail:
    pbd_up__csrd_free(&S);
    pbd_up__free(tris);
    if (m && !m->impl) pbd_up__free(s);
    pbd_up_model_destroy(m);
    return r;
}

PBD_UP_DEF int pbd_up_subdivision_levels(const pbd_up_model *m) {
    const pbd_up__subdiv *s = pbd_up__subdiv_of(m);
    return s ? s->levels : -1;
}

PBD_UP_DEF pbd_result pbd_up_subdivision_triangles(const pbd_up_model *m, const int **triangles, int *triangle_count) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_triangles: m is NULL");
    if (!triangles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_triangles: triangles is NULL");
    if (!triangle_count)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_triangles: triangle_count is NULL");
    const pbd_up__subdiv *s = pbd_up__subdiv_of(m);
    if (!s)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_subdivision_triangles: m is not a subdivision model");
    *triangles = s->triangles;
    *triangle_count = s->triangle_count;
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_subdivision_stencil(const pbd_up_model *m, int row, int *columns, float *weights, int max,
                                                 int *count) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_stencil: m is NULL");
    if (!count) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_stencil: count is NULL");
    const pbd_up__subdiv *s = pbd_up__subdiv_of(m);
    if (!s)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_subdivision_stencil: m is not a subdivision model");
    if (row < 0 || row >= m->detail_count)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_up_subdivision_stencil: row %d outside 0..%d",
                              row, m->detail_count - 1);
    if (max < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_subdivision_stencil: max %d < 0", max);
    if (max > 0 && (!columns || !weights))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_subdivision_stencil: %s is NULL with max %d > 0 (pass max 0 to ask the count)",
                              !columns ? "columns" : "weights", max);
    int n = s->S.start[row + 1] - s->S.start[row];
    for (int k = 0; k < n && k < max; ++k) {
        columns[k] = s->S.col[s->S.start[row] + k];
        weights[k] = s->S.val[s->S.start[row] + k];
    }
    *count = n;
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_subdivision_smooth(pbd_up_model *m, const float *coarse_positions, float *smooth_out,
                                                float *frames_out) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_smooth: m is NULL");
    if (!coarse_positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_smooth: coarse_positions is NULL");
    if (!smooth_out)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_smooth: smooth_out is NULL");
    if (!pbd_up__subdiv_of(m))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_subdivision_smooth: m is not a subdivision model");
    if (!pbd_up__finite(coarse_positions, (size_t)m->coarse_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_subdivision_smooth: coarse_positions contain NaN or infinity (%d vertices)",
                              m->coarse_count);
    pbd_up__subdiv_smooth(m, coarse_positions, smooth_out, frames_out);
    return PBD_OK;
}

static pbd_result pbd_up__model_changed(pbd_up_model *m, const char *fn); /* (the GPU, below) */

PBD_UP_DEF pbd_result pbd_up_subdivision_fit_detail(pbd_up_model *m, const float *coarse_positions,
                                                    const float *detail_positions) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_fit_detail: m is NULL");
    pbd_up__subdiv *s = pbd_up__subdiv_of(m);
    if (!s)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_subdivision_fit_detail: m is not a subdivision model");
    if (!detail_positions) {
        s->has_detail = 0;
        pbd_up__free(s->detail);
        s->detail = NULL;
        return pbd_up__model_changed(m, "pbd_up_subdivision_fit_detail");
    }
    if (!coarse_positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_subdivision_fit_detail: coarse_positions is NULL");
    size_t n = (size_t)m->detail_count;
    if (!pbd_up__finite(coarse_positions, (size_t)m->coarse_count * 3) || !pbd_up__finite(detail_positions, n * 3))
        return pbd_world_fail(
            NULL, PBD_ERROR_NOT_FINITE,
            "pbd_up_subdivision_fit_detail: %s contain NaN or infinity (%d coarse, %zu detail vertices)",
            pbd_up__finite(coarse_positions, (size_t)m->coarse_count * 3) ? "detail_positions" : "coarse_positions",
            m->coarse_count, n);
    float *d = s->detail ? s->detail : (float *)pbd_up__alloc_array(n * 3, sizeof(float));
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_subdivision_fit_detail: out of memory");
    pbd_up__subdiv_smooth(m, coarse_positions, s->x0, s->frames);
    for (size_t v = 0; v < n; ++v) {
        const float *f = s->frames + 9 * v, *p = s->x0 + 3 * v, *X = detail_positions + 3 * v;
        float e[3] = {X[0] - p[0], X[1] - p[1], X[2] - p[2]};
        for (int a = 0; a < 3; ++a) d[3 * v + a] = e[0] * f[3 * a] + e[1] * f[3 * a + 1] + e[2] * f[3 * a + 2];
    }
    s->detail = d;
    s->has_detail = 1;
    return pbd_up__model_changed(m, "pbd_up_subdivision_fit_detail");
}

/* --- the GPU (pbd_up_model_set_device) ---------------------------------- */

/* sizeof the method's data (pbd_cuda.cu checks it against its own copy) */
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
static size_t pbd_up__impl_size(const pbd_up_model *m); /* (before the method table) */
#endif

/* Why m cannot go to the GPU (NULL: it can), and the code. */
static const char *pbd_up__gpu_refusal(pbd_up_model *m, int automatic, pbd_result *code) {
    *code = PBD_ERROR_UNSUPPORTED;
    if (!m->trained || !m->impl) {
        *code = PBD_ERROR_INVALID_ARGUMENT;
        return "the model is not trained";
    }
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    int r = pbd_up__cuda_model(m, sizeof *m, pbd_up__impl_size(m),
                               automatic ? PBD_UP__CUDA_UPLOAD_AUTO : PBD_UP__CUDA_UPLOAD, NULL, NULL, NULL);
    if (r == 1) return NULL;
    if (r == 0) *code = PBD_ERROR_OUT_OF_MEMORY;
    return r == 0    ? "out of device memory"
           : r == -1 ? "no CUDA device"
           : r == -3 ? "the emulated GPU (PBD_CUDA_EMULATE) is only used when asked for"
                     : "pbd_cuda.cu was built against another pbd_upsample.h";
#else
    (void)automatic;
    return "built without PBD_CUDA where PBD_UPSAMPLE_IMPLEMENTATION is (pbd_cuda.cu's kernels)";
#endif
}

PBD_UP_DEF pbd_result pbd_up_model_set_device(pbd_up_model *m, pbd_device device) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_model_set_device: m is NULL");
    if (device != PBD_DEVICE_AUTO && device != PBD_DEVICE_CPU && device != PBD_DEVICE_GPU)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_model_set_device: device %d is not a device",
                              (int)device);
    if (device == PBD_DEVICE_CPU) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
        if (m->gpu) pbd_up__cuda_model(m, sizeof *m, pbd_up__impl_size(m), PBD_UP__CUDA_FREE, NULL, NULL, NULL);
#endif
        return PBD_OK;
    }
    if (m->gpu) return PBD_OK;
    pbd_result code;
    const char *why = pbd_up__gpu_refusal(m, device == PBD_DEVICE_AUTO, &code);
    if (!why || device == PBD_DEVICE_AUTO) return PBD_OK; /* AUTO: the CPU when not the GPU */
    return pbd_world_fail(NULL, code, "pbd_up_model_set_device: a %s model cannot go to the GPU: %s",
                          pbd_up_method_name(m->method), why);
}

PBD_UP_DEF pbd_device pbd_up_model_device(const pbd_up_model *m) {
    return m && m->gpu ? PBD_DEVICE_GPU : PBD_DEVICE_CPU;
}

/* After a fit changed a GPU model's data: the device's copy again. */
static pbd_result pbd_up__model_changed(pbd_up_model *m, const char *fn) {
    if (!m->gpu) return PBD_OK;
    pbd_up_model_set_device(m, PBD_DEVICE_CPU);
    pbd_result code;
    const char *why = pbd_up__gpu_refusal(m, 0, &code);
    if (!why) return PBD_OK;
    return pbd_world_fail(NULL, code, "%s: the fit is done, but the model is back on the CPU: %s", fn, why);
}

/* The host side of a *_world call on the CPU: its arrays (*in: nc
   vertices, *out: nout vertices, 3 floats each) at its first call, then
   the xyz of world particles [first, first + nc) into *in. 0: out of
   memory (nothing changed). */
static int pbd_up__world_host_in(const pbd_world *w, int first, int nc, float **in, float **out, int nout) {
    if (!*in) {
        *in = (float *)pbd_up__alloc_array(3 * (size_t)nc, sizeof(float));
        *out = (float *)pbd_up__alloc_array(3 * (size_t)nout, sizeof(float));
        if (!*in || !*out) {
            pbd_up__free(*in);
            pbd_up__free(*out);
            *in = *out = NULL;
            return 0;
        }
    }
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < nc; ++i)
        for (int k = 0; k < 3; ++k) (*in)[3 * (size_t)i + k] = x[4 * (size_t)(first + i) + k];
    return 1;
}

PBD_UP_DEF pbd_result pbd_up_model_eval_world(pbd_up_model *m, pbd_world *w, int first, const float **detail) {
    const char *f = "pbd_up_model_eval_world";
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "%s: m is NULL", f);
    if (!w) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "%s: w is NULL", f);
    if (!detail) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "%s: detail is NULL", f);
    if (!m->trained || !m->impl)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "%s: the model is not trained", f);
    int n = pbd_world_particle_count(w), nc = m->coarse_count;
    if (first < 0 || first > n - nc)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "%s: particles [%d, %lld) are not in the world (%d particles)", f, first,
                              (long long)first + nc, n); /* (first + nc may overflow int) */
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (m->gpu) {
        if (pbd_world_device(w) != PBD_DEVICE_GPU)
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "%s: a GPU model evaluates a GPU world", f);
        const float *x = pbd_world_device_positions(w);
        if (!x) return pbd_world_fail(NULL, PBD_ERROR_UNSUPPORTED, "%s: %s", f, pbd_world_last_error(w));
        pbd_up__cuda_model(m, sizeof *m, pbd_up__impl_size(m), PBD_UP__CUDA_EVAL, w, x + 4 * (size_t)first, detail);
        return PBD_OK;
    }
#endif
    if (!pbd_up__world_host_in(w, first, nc, &m->world_in, &m->world_out, m->detail_count))
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "%s: out of memory for %d coarse vertices", f, nc);
    pbd_result r = pbd_up_model_eval(m, m->world_in, m->world_out);
    if (r == PBD_OK) *detail = m->world_out;
    return r;
}

// ==== wrinkle ===============================================================

struct pbd_up_wrinkle {
    pbd_world *world;
    pbd_object cloth;
    pbd_range cloth_particles; /* its particles */
    pbd_group attach;
    int coarse_count, coarse_triangle_count, fine_count, one_sided;
    float time_step;
    int *coarse_triangles;
    int *tri;                    /* binding: coarse triangle per fine vertex */
    float *bary;                 /* 3 per fine vertex */
    float *offset;               /* 1 per fine vertex */
    float *normals;              /* coarse_triangle_count*3: the last good face normals */
    float *surface;              /* fine_count*3: a of the last update */
    float *fnormal;              /* fine_count*3: n of the last update */
    float *targets;              /* fine_count*3 */
    float *zero;                 /* fine_count*3 zeros for the velocities */
    void *gpu;                   /* on a GPU world: pbd_cuda.cu's copy of surface and fnormal (pbd_up__cuda_wrinkle) */
    int device_newer;            /* pbd_up_wrinkle_update_world left normals, surface, fnormal and targets newer
                         on the device (FETCH before the host reads them) */
    float *coarse_in, *fine_out; /* pbd_up_wrinkle_update_world's host arrays (a CPU fine world) */
};

#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
/* pbd_cuda.cu's side of a wrinkle mesh on a GPU world: the one-sided
   projection's a and n on the device (UPLOAD; PUSH after an update's
   targets), the projection on the context's device positions (PROJECT);
   for pbd_up_wrinkle_update_world the binding, the normals, the targets
   and the attachment slots on the device (BIND, once), the targets from
   a coarse GPU world's device particles x (its first coarse vertex's
   float4) into the fine world's attachment group, its velocities zeroed
   (TARGETS), after the step its velocities zeroed and the fine positions
   into a device array (FINE: *fine), what TARGETS computed to the host
   (FETCH); FREE. Returns 1, 0 when out of device memory, -2 for size
   (sizeof *wr) not pbd_cuda.cu's. */
#ifdef __cplusplus
extern "C"
#endif
    int
    pbd_up__cuda_wrinkle(pbd_up_wrinkle *wr, size_t size, const pbd_solve_context *c, int what, const float *x,
                         const float **fine);
#endif
static int pbd_up__wrinkle_gpu(pbd_up_wrinkle *wr, const pbd_solve_context *c, int what) {
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
    if (wr->gpu) return pbd_up__cuda_wrinkle(wr, sizeof *wr, c, what, NULL, NULL), 1;
#else
    (void)wr;
    (void)c;
    (void)what;
#endif
    return 0;
}

PBD_UP_DEF pbd_up_wrinkle_desc pbd_up_wrinkle_desc_default(void) {
    pbd_up_wrinkle_desc d;
    memset(&d, 0, sizeof d);
    d.radius = 0.01f;
    d.iterations = 4;
    d.time_step = 1.0f / 60.0f;
    d.stretch_compliance = 0.0f;
    d.bending_compliance = 1e-3f;
    d.bending = PBD_BENDING_DIHEDRAL;
    d.device = PBD_DEVICE_CPU;
    return d;
}

/* Unit normal of triangle t of x (stride floats a vertex); 0 when it is
   degenerate. */
static PBD_HD int pbd_up__face_normal_at(const float *x, int stride, const int *t, float *n) {
    const float *a = x + stride * (size_t)t[0], *b = x + stride * (size_t)t[1], *c = x + stride * (size_t)t[2];
    float e1[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, e2[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    float m[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    float l = sqrtf(m[0] * m[0] + m[1] * m[1] + m[2] * m[2]);
    float scale = (e1[0] * e1[0] + e1[1] * e1[1] + e1[2] * e1[2]) + (e2[0] * e2[0] + e2[1] * e2[1] + e2[2] * e2[2]);
    if (!(l > PBD_UP__NORMAL_REL_MIN * scale) || !(l > 0.0f)) return 0;
    n[0] = m[0] / l;
    n[1] = m[1] / l;
    n[2] = m[2] / l;
    return 1;
}
static int pbd_up__face_normal(const float *x, const int *t, float *n) { return pbd_up__face_normal_at(x, 3, t, n); }

/* Closest point of triangle (a, b, c) to p as barycentric coordinates
   (Ericson, "Real-Time Collision Detection", 5.1.5), in double. */
static void pbd_up__closest_on_triangle(const float *pf, const float *af, const float *bf, const float *cf, double *w) {
    double p[3], a[3], b[3], c[3], ab[3], ac[3], ap[3], bp[3], cp[3];
    for (int k = 0; k < 3; ++k) {
        p[k] = pf[k];
        a[k] = af[k];
        b[k] = bf[k];
        c[k] = cf[k];
        ab[k] = b[k] - a[k];
        ac[k] = c[k] - a[k];
        ap[k] = p[k] - a[k];
        bp[k] = p[k] - b[k];
        cp[k] = p[k] - c[k];
    }
#define PBD_UP__DOT(u, v) ((u)[0] * (v)[0] + (u)[1] * (v)[1] + (u)[2] * (v)[2])
    double d1 = PBD_UP__DOT(ab, ap), d2 = PBD_UP__DOT(ac, ap);
    if (d1 <= 0 && d2 <= 0) {
        w[0] = 1;
        w[1] = 0;
        w[2] = 0;
        return;
    }
    double d3 = PBD_UP__DOT(ab, bp), d4 = PBD_UP__DOT(ac, bp);
    if (d3 >= 0 && d4 <= d3) {
        w[0] = 0;
        w[1] = 1;
        w[2] = 0;
        return;
    }
    double vc = d1 * d4 - d3 * d2;
    if (vc <= 0 && d1 >= 0 && d3 <= 0) {
        double v = d1 / (d1 - d3);
        w[0] = 1 - v;
        w[1] = v;
        w[2] = 0;
        return;
    }
    double d5 = PBD_UP__DOT(ab, cp), d6 = PBD_UP__DOT(ac, cp);
    if (d6 >= 0 && d5 <= d6) {
        w[0] = 0;
        w[1] = 0;
        w[2] = 1;
        return;
    }
    double vb = d5 * d2 - d1 * d6;
    if (vb <= 0 && d2 >= 0 && d6 <= 0) {
        double v = d2 / (d2 - d6);
        w[0] = 1 - v;
        w[1] = 0;
        w[2] = v;
        return;
    }
    double va = d3 * d6 - d5 * d4;
    if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
        double v = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        w[0] = 0;
        w[1] = 1 - v;
        w[2] = v;
        return;
    }
    double den = 1.0 / (va + vb + vc);
    w[1] = vb * den;
    w[2] = vc * den;
    w[0] = 1 - w[1] - w[2];
#undef PBD_UP__DOT
}

static int pbd_up__ll_cmp(const void *pa, const void *pb) {
    long long x = *(const long long *)pa, y = *(const long long *)pb;
    return x < y ? -1 : (x > y);
}

/* Every directed edge once and its reverse once: 1 closed, 0 not, -1 out
   of memory (pbd.h's balloon check is private to its implementation). */
static int pbd_up__mesh_closed(const int *tris, int nt) {
    size_t n = (size_t)nt * 3;
    long long *e = (long long *)pbd_up__alloc_array(n, sizeof(long long));
    if (!e) return -1;
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k)
            e[3 * (size_t)t + k] = ((long long)tris[3 * t + k] << 32) | (unsigned)tris[3 * t + (k + 1) % 3];
    int ok = 1;
    qsort(e, n, sizeof *e, pbd_up__ll_cmp);
    for (size_t i = 0; i < n && ok; ++i) {
        if (i + 1 < n && e[i + 1] == e[i]) ok = 0;
        long long rev = ((e[i] & 0xffffffffLL) << 32) | (long long)((unsigned long long)e[i] >> 32);
        size_t lo = 0, hi = n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (e[mid] < rev) lo = mid + 1;
            else hi = mid;
        }
        if (lo == n || e[lo] != rev) ok = 0;
    }
    pbd_up__free(e);
    return ok;
}

/* After pbd_up_wrinkle_update_world on a GPU: what it computed to the host. */
static void pbd_up__wrinkle_fetch(pbd_up_wrinkle *wr) {
    if (!wr->device_newer) return;
    pbd_up__wrinkle_gpu(wr, NULL, PBD_UP__CUDA_FETCH);
    wr->device_newer = 0;
}

static void pbd_up__wrinkle_free(pbd_up_wrinkle *wr) {
    if (!wr) return;
    pbd_up__wrinkle_gpu(wr, NULL, PBD_UP__CUDA_FREE);
    if (wr->world) pbd_world_destroy(wr->world);
    pbd_up__free(wr->coarse_triangles);
    pbd_up__free(wr->tri);
    pbd_up__free(wr->bary);
    pbd_up__free(wr->offset);
    pbd_up__free(wr->normals);
    pbd_up__free(wr->surface);
    pbd_up__free(wr->fnormal);
    pbd_up__free(wr->targets);
    pbd_up__free(wr->zero);
    pbd_up__free(wr->coarse_in);
    pbd_up__free(wr->fine_out);
    pbd_up__free(wr);
}

/* The one-sided attachment (survey 3.6): C = (p - a) . n >= 0, projected
   after the constraint groups in every iteration. */
static PBD_HD void pbd_up__wrinkle_side(const float *surface, const float *fnormal, float *P, int first, int i) {
    float *p = P + 4 * (size_t)(first + i);
    const float *a = surface + 3 * (size_t)i, *n = fnormal + 3 * (size_t)i;
    float s = (p[0] - a[0]) * n[0] + (p[1] - a[1]) * n[1] + (p[2] - a[2]) * n[2];
    if (s < 0.0f) {
        p[0] -= s * n[0];
        p[1] -= s * n[1];
        p[2] -= s * n[2];
    }
}
static void pbd_up__wrinkle_project(void *user, const pbd_solve_context *c) {
    pbd_up_wrinkle *wr = (pbd_up_wrinkle *)user;
    if (pbd_up__wrinkle_gpu(wr, c, PBD_UP__CUDA_PROJECT)) return;
    for (int i = 0; i < wr->fine_count; ++i)
        pbd_up__wrinkle_side(wr->surface, wr->fnormal, c->p, wr->cloth_particles.first, i);
}

/* Coarse triangle t's normal (wr->normals) for coarse positions x (stride
   floats a vertex: 3 on the host, a GPU world's float4 particles in a
   kernel); a degenerate triangle keeps its last one. */
static PBD_HD void pbd_up__wrinkle_normal(const pbd_up_wrinkle *wr, const float *x, int stride, int t) {
    float n[3];
    if (pbd_up__face_normal_at(x, stride, wr->coarse_triangles + 3 * (size_t)t, n))
        for (int k = 0; k < 3; ++k) wr->normals[3 * (size_t)t + k] = n[k];
}
/* Fine vertex i's surface point a and normal n (wr->surface, fnormal) and
   its target a + d n (q), after the normals. */
static PBD_HD void pbd_up__wrinkle_target(const pbd_up_wrinkle *wr, const float *x, int stride, int i, float *q) {
    const int *t = wr->coarse_triangles + 3 * (size_t)wr->tri[i];
    const float *b = wr->bary + 3 * (size_t)i, *n = wr->normals + 3 * (size_t)wr->tri[i];
    float *a = wr->surface + 3 * (size_t)i;
    const float *x0 = x + stride * (size_t)t[0], *x1 = x + stride * (size_t)t[1], *x2 = x + stride * (size_t)t[2];
    for (int k = 0; k < 3; ++k) {
        a[k] = b[0] * x0[k] + b[1] * x1[k] + b[2] * x2[k];
        q[k] = a[k] + wr->offset[i] * n[k];
        wr->fnormal[3 * (size_t)i + k] = n[k];
    }
}
/* Targets a + d n (and a, n) of every fine vertex for coarse positions x. */
static void pbd_up__wrinkle_targets(pbd_up_wrinkle *wr, const float *x) {
    for (int t = 0; t < wr->coarse_triangle_count; ++t) pbd_up__wrinkle_normal(wr, x, 3, t);
    for (int i = 0; i < wr->fine_count; ++i) pbd_up__wrinkle_target(wr, x, 3, i, wr->targets + 3 * (size_t)i);
}

static pbd_result pbd_up__wrinkle_check(const pbd_up_wrinkle_desc *d) {
    if (!d->coarse_positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_create: pbd_up_wrinkle_desc.coarse_positions is NULL");
    if (!d->coarse_triangles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_create: pbd_up_wrinkle_desc.coarse_triangles is NULL");
    if (!d->fine_positions)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_create: pbd_up_wrinkle_desc.fine_positions is NULL");
    if (!d->fine_triangles)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_create: pbd_up_wrinkle_desc.fine_triangles is NULL");
    if (d->coarse_count <= 0 || d->coarse_triangle_count <= 0 || d->fine_count <= 0 || d->fine_triangle_count <= 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_wrinkle_create: coarse_count %d, coarse_triangle_count %d, fine_count %d and "
                              "fine_triangle_count %d must be > 0",
                              d->coarse_count, d->coarse_triangle_count, d->fine_count, d->fine_triangle_count);
    if (d->coarse_count > INT_MAX / 9 || d->fine_count > INT_MAX / 9 || d->coarse_triangle_count > INT_MAX / 9 ||
        d->fine_triangle_count > INT_MAX / 9)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_up_wrinkle_create: coarse_count %d, fine_count %d, coarse_triangle_count %d or "
                              "fine_triangle_count %d is too large (at most %d)",
                              d->coarse_count, d->fine_count, d->coarse_triangle_count, d->fine_triangle_count,
                              INT_MAX / 9);
    if (!pbd_up__finite(&d->radius, 1) || !pbd_up__finite(&d->time_step, 1) ||
        !pbd_up__finite(&d->stretch_compliance, 1) || !pbd_up__finite(&d->bending_compliance, 1))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_wrinkle_create: radius %g, time_step %g, stretch_compliance %g or "
                              "bending_compliance %g is not finite",
                              (double)d->radius, (double)d->time_step, (double)d->stretch_compliance,
                              (double)d->bending_compliance);
    if (d->radius < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: radius %g < 0",
                              (double)d->radius);
    if (!(d->time_step > 0))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: time_step %g must be > 0",
                              (double)d->time_step);
    if (d->iterations < 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: iterations %d outside 1..1000",
                              d->iterations);
    if (d->iterations > 1000)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: iterations %d outside 1..1000",
                              d->iterations);
    if (d->one_sided != 0 && d->one_sided != 1)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: one_sided %d must be 0 or 1",
                              d->one_sided);
    if (d->stretch_compliance < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: stretch_compliance %g < 0",
                              (double)d->stretch_compliance);
    if (d->bending_compliance < 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wrinkle_create: bending_compliance %g < 0",
                              (double)d->bending_compliance);
    if (!pbd_up__finite(d->coarse_positions, (size_t)d->coarse_count * 3) ||
        !pbd_up__finite(d->fine_positions, (size_t)d->fine_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_wrinkle_create: %s contain NaN or infinity (%d coarse, %d fine vertices)",
                              pbd_up__finite(d->coarse_positions, (size_t)d->coarse_count * 3) ? "fine_positions"
                                                                                               : "coarse_positions",
                              d->coarse_count, d->fine_count);
    pbd_result r = pbd_up__check_triangles(d->coarse_triangles, d->coarse_triangle_count, d->coarse_count,
                                           "pbd_up_wrinkle_create: coarse_triangles");
    if (r == PBD_OK)
        r = pbd_up__check_triangles(d->fine_triangles, d->fine_triangle_count, d->fine_count,
                                    "pbd_up_wrinkle_create: fine_triangles");
    if (r != PBD_OK) return r;
    float n[3];
    for (int t = 0; t < d->coarse_triangle_count; ++t)
        if (!pbd_up__face_normal(d->coarse_positions, d->coarse_triangles + 3 * (size_t)t, n))
            return pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                                  "pbd_up_wrinkle_create: coarse triangle %d (vertices %d, %d, %d) has zero area", t,
                                  d->coarse_triangles[3 * (size_t)t], d->coarse_triangles[3 * (size_t)t + 1],
                                  d->coarse_triangles[3 * (size_t)t + 2]);
    if (d->one_sided) {
        int closed = pbd_up__mesh_closed(d->coarse_triangles, d->coarse_triangle_count);
        if (closed < 0) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
        if (!closed)
            return pbd_world_fail(NULL, PBD_ERROR_NOT_CLOSED,
                                  "pbd_up_wrinkle_create: one_sided needs a closed, consistently oriented coarse mesh");
    }
    return PBD_OK;
}

/* Squared distance from p to the closest point of coarse triangle t, and
   that point's barycentric coordinates. */
static double pbd_up__triangle_d2(const pbd_up_wrinkle_desc *d, int t, const float *p, double *w) {
    const float *X = d->coarse_positions;
    const int *v = d->coarse_triangles + 3 * (size_t)t;
    double d2 = 0;
    pbd_up__closest_on_triangle(p, X + 3 * (size_t)v[0], X + 3 * (size_t)v[1], X + 3 * (size_t)v[2], w);
    for (int k = 0; k < 3; ++k) {
        double q = w[0] * X[3 * (size_t)v[0] + k] + w[1] * X[3 * (size_t)v[1] + k] + w[2] * X[3 * (size_t)v[2] + k];
        d2 += (p[k] - q) * (p[k] - q);
    }
    return d2;
}

/* A uniform grid over the coarse triangles' bounding boxes. */
typedef struct pbd_up__tri_grid {
    double lo[3], h;
    int dim[3];
    int *start, *list; /* CSR: the triangles overlapping each cell */
} pbd_up__tri_grid;

/* The cell of coordinate x along axis k, clamped to the grid; decided in
   double before the conversion (converting NaN or a value outside int's
   range is undefined behaviour in C): NaN goes to cell 0. */
static int pbd_up__grid_cell(const pbd_up__tri_grid *g, double x, int k) {
    double c = (x - g->lo[k]) / g->h;
    return !(c >= 0) ? 0 : (c >= g->dim[k] - 1 ? g->dim[k] - 1 : (int)c);
}

static pbd_result pbd_up__tri_grid_build(pbd_up__tri_grid *g, const pbd_up_wrinkle_desc *d) {
    const float *X = d->coarse_positions;
    const int *T = d->coarse_triangles;
    int nt = d->coarse_triangle_count;
    double hi[3] = {-1e300, -1e300, -1e300}, diag = 0, extent = 0;
    memset(g, 0, sizeof *g);
    g->lo[0] = g->lo[1] = g->lo[2] = 1e300;
    for (int t = 0; t < nt; ++t) {
        double tl[3] = {1e300, 1e300, 1e300}, th[3] = {-1e300, -1e300, -1e300}, e2 = 0;
        for (int q = 0; q < 3; ++q)
            for (int k = 0; k < 3; ++k) {
                double x = X[3 * (size_t)T[3 * (size_t)t + q] + k];
                tl[k] = x < tl[k] ? x : tl[k];
                th[k] = x > th[k] ? x : th[k];
            }
        for (int k = 0; k < 3; ++k) {
            e2 += (th[k] - tl[k]) * (th[k] - tl[k]);
            g->lo[k] = tl[k] < g->lo[k] ? tl[k] : g->lo[k];
            hi[k] = th[k] > hi[k] ? th[k] : hi[k];
        }
        diag += sqrt(e2);
    }
    for (int k = 0; k < 3; ++k) extent = hi[k] - g->lo[k] > extent ? hi[k] - g->lo[k] : extent;
    g->h = diag / nt;
    if (!(g->h > extent / 128)) g->h = extent / 128; /* at most 129 cells a side */
    if (!(g->h > 0)) g->h = 1;
    for (int k = 0; k < 3; ++k) { /* at most 129 (NaN from an overflowing extent: 1) */
        double c = (hi[k] - g->lo[k]) / g->h;
        g->dim[k] = (c >= 0 ? (c <= 128 ? (int)c : 128) : 0) + 1;
    }
    size_t ncell = (size_t)g->dim[0] * g->dim[1] * g->dim[2];
    g->start = (int *)pbd_up__calloc_array(ncell + 1, sizeof(int));
    int *fill = (int *)pbd_up__calloc_array(ncell, sizeof(int));
    if (!g->start || !fill) {
        pbd_up__free(fill);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
    }
    for (int pass = 0; pass < 2; ++pass) { /* count, then fill */
        for (int t = 0; t < nt; ++t) {
            int c0[3], c1[3];
            for (int k = 0; k < 3; ++k) {
                float a = X[3 * (size_t)T[3 * (size_t)t] + k], b = X[3 * (size_t)T[3 * (size_t)t + 1] + k],
                      c = X[3 * (size_t)T[3 * (size_t)t + 2] + k];
                c0[k] = pbd_up__grid_cell(g, a < b ? (a < c ? a : c) : (b < c ? b : c), k);
                c1[k] = pbd_up__grid_cell(g, a > b ? (a > c ? a : c) : (b > c ? b : c), k);
            }
            for (int z = c0[2]; z <= c1[2]; ++z)
                for (int y = c0[1]; y <= c1[1]; ++y)
                    for (int x = c0[0]; x <= c1[0]; ++x) {
                        size_t cell = ((size_t)z * g->dim[1] + y) * g->dim[0] + x;
                        if (pass == 0) g->start[cell + 1]++;
                        else g->list[g->start[cell] + fill[cell]++] = t;
                    }
        }
        if (pass == 0) {
            for (size_t c = 0; c < ncell; ++c) {
                if (g->start[c + 1] > INT_MAX - g->start[c]) {
                    pbd_up__free(fill);
                    return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                                          "pbd_up_wrinkle_create: the coarse triangles fill the search grid's cells "
                                          "more than %d times (cell %zu)",
                                          INT_MAX, c);
                }
                g->start[c + 1] += g->start[c];
            }
            g->list = (int *)pbd_up__alloc_array((size_t)g->start[ncell] + 1, sizeof(int));
            if (!g->list) {
                pbd_up__free(fill);
                return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
            }
        }
    }
    pbd_up__free(fill);
    return PBD_OK;
}

/* Binds every fine vertex to its closest coarse point; equally close
   triangles go to the lowest index. The grid is searched in growing rings
   of cells (Chebyshev distance r from the point's cell) until the best
   distance is below (r) h: every cell of a later ring is at least that
   far, so the result is the brute-force one. */
static pbd_result pbd_up__wrinkle_bind(pbd_up_wrinkle *wr, const pbd_up_wrinkle_desc *d) {
    const float *X = d->coarse_positions;
    pbd_up__tri_grid g;
    pbd_result r = pbd_up__tri_grid_build(&g, d);
    int *stamp = r == PBD_OK ? (int *)pbd_up__alloc_array((size_t)d->coarse_triangle_count, sizeof(int)) : NULL;
    if (r == PBD_OK && !stamp)
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
    if (r != PBD_OK) {
        pbd_up__free(g.start);
        pbd_up__free(g.list);
        return r;
    }
    for (int t = 0; t < d->coarse_triangle_count; ++t) stamp[t] = -1;
    int rings = g.dim[0] > g.dim[1] ? g.dim[0] : g.dim[1];
    rings = rings > g.dim[2] ? rings : g.dim[2];
    for (int i = 0; i < d->fine_count; ++i) {
        const float *p = d->fine_positions + 3 * (size_t)i;
        double best = 1e300, bw[3] = {1, 0, 0};
        int bt = -1, c[3];
        for (int k = 0; k < 3; ++k) c[k] = pbd_up__grid_cell(&g, p[k], k);
        for (int ring = 0; ring <= rings; ++ring) {
            for (int z = c[2] - ring; z <= c[2] + ring; ++z)
                for (int y = c[1] - ring; y <= c[1] + ring; ++y)
                    for (int x = c[0] - ring; x <= c[0] + ring; ++x) {
                        int dz = z - c[2], dy = y - c[1], dx = x - c[0];
                        int cheb = abs(dx) > abs(dy) ? abs(dx) : abs(dy);
                        cheb = cheb > abs(dz) ? cheb : abs(dz);
                        if (cheb != ring || x < 0 || y < 0 || z < 0 || x >= g.dim[0] || y >= g.dim[1] || z >= g.dim[2])
                            continue;
                        size_t cell = ((size_t)z * g.dim[1] + y) * g.dim[0] + x;
                        for (int q = g.start[cell]; q < g.start[cell + 1]; ++q) {
                            int t = g.list[q];
                            if (stamp[t] == i) continue;
                            stamp[t] = i;
                            double w[3], d2 = pbd_up__triangle_d2(d, t, p, w);
                            if (d2 < best || (d2 == best && t < bt)) {
                                best = d2;
                                bt = t;
                                bw[0] = w[0];
                                bw[1] = w[1];
                                bw[2] = w[2];
                            }
                        }
                    }
            double reach = ring * g.h; /* cells ring+1 away are at least this far */
            if (bt >= 0 && best < reach * reach) break;
        }
        wr->tri[i] = bt;
        for (int k = 0; k < 3; ++k) wr->bary[3 * (size_t)i + k] = (float)bw[k];
        const int *v = d->coarse_triangles + 3 * (size_t)bt;
        float n[3], off = 0.0f;
        pbd_up__face_normal(X, v, n);
        for (int k = 0; k < 3; ++k) {
            float a = wr->bary[3 * (size_t)i] * X[3 * (size_t)v[0] + k] +
                      wr->bary[3 * (size_t)i + 1] * X[3 * (size_t)v[1] + k] +
                      wr->bary[3 * (size_t)i + 2] * X[3 * (size_t)v[2] + k];
            off += (p[k] - a) * n[k];
        }
        wr->offset[i] = d->one_sided && off < 0.0f ? 0.0f : off;
    }
    pbd_up__free(stamp);
    pbd_up__free(g.start);
    pbd_up__free(g.list);
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_wrinkle_create(const pbd_up_wrinkle_desc *d, pbd_up_wrinkle **out) {
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_create: d is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_create: out is NULL");
    pbd_result r = pbd_up__wrinkle_check(d);
    if (r != PBD_OK) return r;
    pbd_up_wrinkle *wr = (pbd_up_wrinkle *)pbd_up__calloc_array(1, sizeof *wr);
    if (!wr) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
    size_t nf = (size_t)d->fine_count, nct = (size_t)d->coarse_triangle_count;
    wr->coarse_count = d->coarse_count;
    wr->coarse_triangle_count = d->coarse_triangle_count;
    wr->fine_count = d->fine_count;
    wr->one_sided = d->one_sided;
    wr->time_step = d->time_step;
    wr->coarse_triangles = (int *)pbd_up__alloc_array(nct * 3, sizeof(int));
    wr->tri = (int *)pbd_up__alloc_array(nf, sizeof(int));
    wr->bary = (float *)pbd_up__alloc_array(nf * 3, sizeof(float));
    wr->offset = (float *)pbd_up__alloc_array(nf, sizeof(float));
    wr->normals = (float *)pbd_up__alloc_array(nct * 3, sizeof(float));
    wr->surface = (float *)pbd_up__alloc_array(nf * 3, sizeof(float));
    wr->fnormal = (float *)pbd_up__alloc_array(nf * 3, sizeof(float));
    wr->targets = (float *)pbd_up__alloc_array(nf * 3, sizeof(float));
    wr->zero = (float *)pbd_up__calloc_array(nf * 3, sizeof(float));
    if (!wr->coarse_triangles || !wr->tri || !wr->bary || !wr->offset || !wr->normals || !wr->surface || !wr->fnormal ||
        !wr->targets || !wr->zero) {
        pbd_up__wrinkle_free(wr);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
    }
    memcpy(wr->coarse_triangles, d->coarse_triangles, nct * 3 * sizeof(int));
    r = pbd_up__wrinkle_bind(wr, d);
    if (r != PBD_OK) {
        pbd_up__wrinkle_free(wr);
        return r;
    }
    for (size_t t = 0; t < nct; ++t)
        pbd_up__face_normal(d->coarse_positions, wr->coarse_triangles + 3 * t, wr->normals + 3 * t);
    pbd_up__wrinkle_targets(wr, d->coarse_positions);

    pbd_world_desc wd = pbd_world_desc_default();
    wd.device = d->device;
    wd.gravity[0] = wd.gravity[1] = wd.gravity[2] = 0.0f;
    wd.substeps = 1;
    wd.reference_dt = 0; /* one solve of h = time_step per update, whatever time_step is */
    wd.iterations = d->iterations;
    r = pbd_world_create(&wd, &wr->world);
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = d->fine_positions;
    cd.vertex_count = d->fine_count;
    cd.triangles = d->fine_triangles;
    cd.triangle_count = d->fine_triangle_count;
    cd.stretch_compliance = d->stretch_compliance;
    cd.bending_compliance = d->bending_compliance;
    cd.bending = d->bending;
    if (r == PBD_OK) r = pbd_add_cloth(wr->world, &cd, &wr->cloth);
    pbd_object_parts parts;
    if (r == PBD_OK) r = pbd_object_get_parts(wr->world, wr->cloth, &parts);
    if (r == PBD_OK) wr->cloth_particles = parts.particles;
    int *idx = r == PBD_OK ? (int *)pbd_up__alloc_array(nf, sizeof(int)) : NULL;
    if (r == PBD_OK && !idx) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wrinkle_create: out of memory");
    if (r == PBD_OK) {
        for (size_t i = 0; i < nf; ++i) idx[i] = wr->cloth_particles.first + (int)i;
        pbd_attachments_desc ad = pbd_attachments_desc_default();
        ad.count = d->fine_count;
        ad.particles = idx;
        ad.target_points = wr->targets;
        ad.max_distance = d->radius;
        r = pbd_add_attachments(wr->world, &ad, &wr->attach);
    }
    pbd_up__free(idx);
    if (r == PBD_OK && d->one_sided) {
        pbd_plugin_desc pd = pbd_plugin_desc_default();
        pd.name = "wrinkle one-sided";
        pd.user = wr;
        pd.particle_end = wr->cloth_particles.first + d->fine_count;
        pd.work = d->fine_count;
        pd.project = pbd_up__wrinkle_project;
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
        if (pbd_world_device(wr->world) == PBD_DEVICE_GPU) { /* a device plugin: a and n on the device */
            pd.device = 1;
            if (pbd_up__cuda_wrinkle(wr, sizeof *wr, NULL, PBD_UP__CUDA_UPLOAD, NULL, NULL) != 1)
                r = pbd_world_fail(wr->world, PBD_ERROR_OUT_OF_MEMORY,
                                   "pbd_up_wrinkle_create: out of device memory for %d fine vertices", d->fine_count);
        }
#endif
        if (r == PBD_OK) r = pbd_add_plugin(wr->world, &pd, NULL);
    }
    if (r != PBD_OK) {
        /* the wrinkle's own world goes with it: its message moves to pbd_last_error() */
        if (wr->world && pbd_world_last_error(wr->world)[0])
            pbd_world_fail(NULL, r, "pbd_up_wrinkle_create: its fine cloth: %s", pbd_world_last_error(wr->world));
        pbd_up__wrinkle_free(wr);
        return r;
    }
    *out = wr;
    return PBD_OK;
}

PBD_UP_DEF void pbd_up_wrinkle_destroy(pbd_up_wrinkle *wr) { pbd_up__wrinkle_free(wr); }

PBD_UP_DEF pbd_result pbd_up_wrinkle_update(pbd_up_wrinkle *wr, const float *x, float *fine_out) {
    if (!wr)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_update: wr is NULL");
    if (!x)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_update: coarse_positions is NULL");
    if (!pbd_up__finite(x, (size_t)wr->coarse_count * 3))
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NOT_FINITE,
                              "pbd_up_wrinkle_update: coarse_positions contain NaN or infinity (%d vertices)",
                              wr->coarse_count);
    /* the fine cloth is a pbd.h world's: beyond its bound its particles
       stood still at 1e20 m while the call returned PBD_OK (an audit) */
    for (size_t i = 0; i < (size_t)wr->coarse_count * 3; ++i)
        if (!(fabsf(x[i]) <= PBD_MAX_COORDINATE))
            return pbd_world_fail(
                wr->world, PBD_ERROR_INVALID_ARGUMENT,
                "pbd_up_wrinkle_update: coarse vertex %zu is %g m from the origin on axis %zu, beyond "
                "PBD_MAX_COORDINATE = %g m",
                i / 3, (double)x[i], i % 3, (double)PBD_MAX_COORDINATE);
    pbd_up__wrinkle_fetch(wr); /* the normals of a last update from a GPU world */
    pbd_up__wrinkle_targets(wr, x);
    pbd_up__wrinkle_gpu(wr, NULL, PBD_UP__CUDA_PUSH);
    pbd_result r = PBD_OK;
    for (int i = 0; i < wr->fine_count && r == PBD_OK; ++i)
        r = pbd_group_set_attachment_target(wr->world, wr->attach, i, wr->targets + 3 * (size_t)i);
    /* a static solve: no inertia carried from frame to frame */
    if (r == PBD_OK) r = pbd_particles_set_velocities(wr->world, wr->cloth_particles, wr->zero);
    if (r == PBD_OK) r = pbd_world_step(wr->world, wr->time_step);
    if (r == PBD_OK) r = pbd_particles_set_velocities(wr->world, wr->cloth_particles, wr->zero);
    if (r == PBD_OK && fine_out) r = pbd_particles_get_positions(wr->world, wr->cloth_particles, fine_out);
    return r;
}

PBD_UP_DEF pbd_result pbd_up_wrinkle_update_world(pbd_up_wrinkle *wr, pbd_world *coarse, int first,
                                                  const float **fine) {
    const char *f = "pbd_up_wrinkle_update_world";
    if (!wr) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "%s: wr is NULL", f);
    if (!coarse) return pbd_world_fail(wr->world, PBD_ERROR_NULL_POINTER, "%s: coarse is NULL", f);
    if (!fine) return pbd_world_fail(wr->world, PBD_ERROR_NULL_POINTER, "%s: fine is NULL", f);
    if (coarse == wr->world)
        return pbd_world_fail(wr->world, PBD_ERROR_INVALID_ARGUMENT, "%s: coarse is the wrinkle mesh's own world", f);
    int n = pbd_world_particle_count(coarse), nc = wr->coarse_count;
    if (first < 0 || first > n - nc)
        return pbd_world_fail(wr->world, PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "%s: particles [%d, %lld) are not in the coarse world (%d particles)", f, first,
                              (long long)first + nc, n); /* (first + nc may overflow int) */
    if (pbd_world_device(wr->world) == PBD_DEVICE_GPU) {
        if (pbd_world_device(coarse) != PBD_DEVICE_GPU)
            return pbd_world_fail(wr->world, PBD_ERROR_INVALID_ARGUMENT,
                                  "%s: a wrinkle mesh on the GPU (pbd_up_wrinkle_desc.device) takes a GPU coarse "
                                  "world",
                                  f);
#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
        const float *x = pbd_world_device_positions(coarse);
        if (!x) return pbd_world_fail(wr->world, PBD_ERROR_UNSUPPORTED, "%s: %s", f, pbd_world_last_error(coarse));
        if (!pbd_world_device_positions(wr->world)) /* the fine world up to date on the device */
            return pbd_world_fail(wr->world, PBD_ERROR_UNSUPPORTED, "%s: %s", f, pbd_world_last_error(wr->world));
        int up = pbd_up__cuda_wrinkle(wr, sizeof *wr, NULL, PBD_UP__CUDA_BIND, NULL, NULL);
        if (up == -2)
            return pbd_world_fail(wr->world, PBD_ERROR_UNSUPPORTED,
                                  "%s: pbd_cuda.cu was built against another pbd_upsample.h", f);
        if (up != 1)
            return pbd_world_fail(wr->world, PBD_ERROR_OUT_OF_MEMORY, "%s: out of device memory for %d fine vertices",
                                  f, wr->fine_count);
        pbd_up__cuda_wrinkle(wr, sizeof *wr, NULL, PBD_UP__CUDA_TARGETS, x + 4 * (size_t)first, NULL);
        wr->device_newer = 1;
        pbd_result r = pbd_world_step(wr->world, wr->time_step);
        if (r == PBD_OK) pbd_up__cuda_wrinkle(wr, sizeof *wr, NULL, PBD_UP__CUDA_FINE, NULL, fine);
        return r;
#else
        return pbd_world_fail(wr->world, PBD_ERROR_UNSUPPORTED,
                              "%s: built without PBD_CUDA where PBD_UPSAMPLE_IMPLEMENTATION is (pbd_cuda.cu's kernels)",
                              f);
#endif
    }
    if (!pbd_up__world_host_in(coarse, first, nc, &wr->coarse_in, &wr->fine_out, wr->fine_count))
        return pbd_world_fail(wr->world, PBD_ERROR_OUT_OF_MEMORY, "%s: out of memory for %d fine vertices", f,
                              wr->fine_count);
    pbd_result r = pbd_up_wrinkle_update(wr, wr->coarse_in, wr->fine_out);
    if (r == PBD_OK) *fine = wr->fine_out;
    return r;
}

PBD_UP_DEF int pbd_up_wrinkle_fine_count(const pbd_up_wrinkle *wr) { return wr ? wr->fine_count : 0; }

PBD_UP_DEF pbd_result pbd_up_wrinkle_binding(const pbd_up_wrinkle *wr, int v, int *triangle, float *barycentric,
                                             float *offset) {
    if (!wr)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_binding: wr is NULL");
    if (v < 0 || v >= wr->fine_count)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "pbd_up_wrinkle_binding: fine vertex %d outside 0..%d", v, wr->fine_count - 1);
    if (triangle) *triangle = wr->tri[v];
    if (barycentric) memcpy(barycentric, wr->bary + 3 * (size_t)v, 3 * sizeof(float));
    if (offset) *offset = wr->offset[v];
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_wrinkle_targets(const pbd_up_wrinkle *wr, float *targets, float *surface_points,
                                             float *normals) {
    if (!wr)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_targets: wr is NULL");
    if (!targets)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_targets: targets is NULL");
    pbd_up__wrinkle_fetch((pbd_up_wrinkle *)wr); /* the host's copy of the device's state */
    size_t n = (size_t)wr->fine_count * 3 * sizeof(float);
    memcpy(targets, wr->targets, n);
    if (surface_points) memcpy(surface_points, wr->surface, n);
    if (normals) memcpy(normals, wr->fnormal, n);
    return PBD_OK;
}

PBD_UP_DEF pbd_world *pbd_up_wrinkle_world(pbd_up_wrinkle *wr) { return wr ? wr->world : NULL; }

PBD_UP_DEF pbd_result pbd_up_wrinkle_set_threads(pbd_up_wrinkle *wr, int threads) {
    if (!wr)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER,
                              "pbd_up_wrinkle_set_threads: wr is NULL");
    return pbd_world_set_threads(wr->world, threads);
}
PBD_UP_DEF pbd_result pbd_up_wrinkle_set_simd(pbd_up_wrinkle *wr, int on) {
    if (!wr)
        return pbd_world_fail((wr ? wr->world : NULL), PBD_ERROR_NULL_POINTER, "pbd_up_wrinkle_set_simd: wr is NULL");
    return pbd_world_set_simd(wr->world, on);
}

// ==== training ==============================================================

PBD_UP_DEF pbd_up_training_desc pbd_up_training_desc_default(void) {
    pbd_up_training_desc d;
    memset(&d, 0, sizeof d);
    d.scene = PBD_UP_SCENE_CAPE;
    d.coarse_resolution = 12;
    d.levels = 1;
    d.size = 1.0f;
    d.frames = 60;
    d.steps_per_frame = 2;
    d.time_step = 1.0f / 60.0f;
    d.substeps = 4;
    d.iterations = 4;
    d.amplitude = 0.3f;
    d.frequency = 0.7f;
    d.coarse_bending_compliance = 1e-3f;
    d.fine_bending_compliance = 1e-1f;
    d.jitter = 1e-3f;
    d.seed = 1;
    d.device = PBD_DEVICE_CPU; /* fitting runs on the CPU */
    return d;
}

PBD_UP_DEF void pbd_up_training_free(pbd_up_training *t) {
    if (!t) return;
    pbd_up__free(t->coarse_triangles);
    pbd_up__free(t->detail_triangles);
    pbd_up__free(t->coarse_rest);
    pbd_up__free(t->detail_rest);
    pbd_up__free(t->coarse);
    pbd_up__free(t->detail);
    memset(t, 0, sizeof *t);
}

static pbd_result pbd_up__training_alloc(pbd_up_training *t) {
    size_t cc = (size_t)t->coarse_count * 3, dc = (size_t)t->detail_count * 3, nf = (size_t)t->frame_count;
    if (nf && (cc > (size_t)-1 / nf / sizeof(float) || dc > (size_t)-1 / nf / sizeof(float)))
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "a training set of %d frames of %d coarse and %d detail vertices is too large for memory",
                              t->frame_count, t->coarse_count, t->detail_count);
    t->coarse_triangles = (int *)pbd_up__alloc_array((size_t)t->coarse_triangle_count * 3, sizeof(int));
    t->detail_triangles = (int *)pbd_up__alloc_array((size_t)t->detail_triangle_count * 3, sizeof(int));
    t->coarse_rest = (float *)pbd_up__alloc_array(cc, sizeof(float));
    t->detail_rest = (float *)pbd_up__alloc_array(dc, sizeof(float));
    t->coarse = (float *)pbd_up__alloc_array(cc * nf, sizeof(float));
    t->detail = (float *)pbd_up__alloc_array(dc * nf, sizeof(float));
    if (!t->coarse_triangles || !t->detail_triangles || !t->coarse_rest || !t->detail_rest || !t->coarse ||
        !t->detail) {
        pbd_up_training_free(t);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory for a training set");
    }
    return PBD_OK;
}

static pbd_result pbd_up__training_check_desc(const pbd_up_training_desc *d) {
    const float f[7] = {
        d->size,  d->time_step, d->amplitude, d->frequency, d->coarse_bending_compliance, d->fine_bending_compliance,
        d->jitter};
    static const char *const f_names[7] = {
        "size",  "time_step", "amplitude", "frequency", "coarse_bending_compliance", "fine_bending_compliance",
        "jitter"};
    pbd_result nonfinite = pbd_up__check_finite_named("pbd_up_training_desc", f, f_names, 7);
    if (nonfinite != PBD_OK) return nonfinite;
    const char *bad = (int)d->scene < 0 || (int)d->scene > 1                   ? "scene is not a pbd_up_scene"
                      : d->coarse_resolution < 3 || d->coarse_resolution > 256 ? "coarse_resolution outside 3..256"
                      : d->levels < 1 || d->levels > 4                         ? "levels outside 1..4"
                      : !(d->size > 0)                                         ? "size <= 0"
                      : d->frames < 1                                          ? "frames < 1"
                      : d->steps_per_frame < 1                                 ? "steps_per_frame < 1"
                      : !(d->time_step >= PBD_MIN_TIME_STEP && d->time_step <= PBD_MAX_TIME_STEP)
                          ? "time_step outside [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] = [1e-6, 1] s"
                      : d->substeps < 1 || d->substeps > 1000     ? "substeps outside 1..1000"
                      : d->iterations < 1 || d->iterations > 1000 ? "iterations outside 1..1000"
                      : d->amplitude < 0                          ? "amplitude < 0"
                      : d->frequency < 0                          ? "frequency < 0"
                      : d->coarse_bending_compliance < 0          ? "coarse_bending_compliance < 0"
                      : d->fine_bending_compliance < 0            ? "fine_bending_compliance < 0"
                      : d->jitter < 0                             ? "jitter < 0"
                      : d->threads < 0 || d->threads > 1024       ? "threads outside 0..1024"
                                                                  : NULL;
    if (bad)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_training_desc: %s (scene %d, coarse_resolution %d, "
                              "levels %d, frames %d, steps_per_frame %d, substeps %d, iterations %d, threads %d)",
                              bad, (int)d->scene, d->coarse_resolution, d->levels, d->frames, d->steps_per_frame,
                              d->substeps, d->iterations, d->threads);
    long long per = (2 * (long long)d->coarse_resolution - 1) * (2 * (long long)d->coarse_resolution - 1);
    for (int l = 1; l < d->levels; ++l) per *= 4;
    if (per * 3 * d->frames > INT_MAX || (long long)d->frames * d->steps_per_frame > INT_MAX)
        return pbd_world_fail(
            NULL, PBD_ERROR_OVERFLOW,
            "pbd_up_training_desc: %d frames of %lld detail vertices, or %d steps per frame, are too many", d->frames,
            per, d->steps_per_frame);
    return PBD_OK;
}

/* A world with the scene's solver settings, a cloth and (drop) the sphere. */
static pbd_result pbd_up__training_world(const pbd_up_training_desc *d, const pbd_mesh *m, float bending, pbd_world **w,
                                         pbd_range *cloth) {
    pbd_world_desc wd = pbd_world_desc_default();
    wd.device = d->device;
    wd.substeps = d->substeps;
    wd.reference_dt = 0; /* the desc's substeps per time_step, as asked */
    wd.iterations = d->iterations;
    pbd_result r = pbd_world_create(&wd, w);
    if (r == PBD_OK) r = pbd_world_set_threads(*w, d->threads);
    if (r != PBD_OK) return r;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m->positions;
    cd.vertex_count = m->vertex_count;
    cd.triangles = m->triangles;
    cd.triangle_count = m->triangle_count;
    cd.bending_compliance = bending;
    pbd_object obj;
    pbd_object_parts parts;
    r = pbd_add_cloth(*w, &cd, &obj);
    if (r == PBD_OK) r = pbd_object_get_parts(*w, obj, &parts);
    if (r == PBD_OK) *cloth = parts.particles;
    if (r == PBD_OK && d->scene == PBD_UP_SCENE_DROP) {
        float centre[3] = {0.0f, 0.0f, 0.0f};
        r = pbd_add_collider_sphere(*w, centre, 0.3f * d->size, 0.5f, NULL);
    }
    return r;
}

/* The coarse grid of the scene at rest. */
static pbd_result pbd_up__training_mesh(const pbd_up_training_desc *d, pbd_mesh *m, float *normal) {
    int n = d->coarse_resolution;
    float s = d->size;
    if (d->scene == PBD_UP_SCENE_CAPE) {
        float o[3] = {-0.5f * s, s, 0.0f}, u[3] = {s, 0.0f, 0.0f}, v[3] = {0.0f, -s, 0.0f};
        normal[0] = 0.0f;
        normal[1] = 0.0f;
        normal[2] = -1.0f;
        return pbd_mesh_grid(n, n, o, u, v, m);
    }
    float o[3] = {-0.5f * s, 0.3f * s + d->amplitude + 0.02f * s, -0.5f * s}, u[3] = {s, 0.0f, 0.0f},
          v[3] = {0.0f, 0.0f, s};
    pbd_result r = pbd_mesh_grid(n, n, o, u, v, m);
    if (r != PBD_OK) return r;
    /* tilted by 0.15 rad about z and shifted off centre, so it slides off */
    float c = cosf(0.15f), sn = sinf(0.15f), y0 = o[1];
    for (int i = 0; i < m->vertex_count; ++i) {
        float *p = m->positions + 3 * (size_t)i, x = p[0], y = p[1] - y0;
        p[0] = c * x - sn * y + 0.1f * s;
        p[1] = sn * x + c * y + y0;
    }
    normal[0] = sn;
    normal[1] = -c;
    normal[2] = 0.0f;
    return PBD_OK;
}

/* The coarse world over the scene's coarse mesh m: the cape's top row
   kinematic (it follows the script). */
static pbd_result pbd_up__training_coarse(const pbd_up_training_desc *d, const pbd_mesh *m, pbd_world **w,
                                          pbd_range *cloth) {
    pbd_result r = pbd_up__training_world(d, m, d->coarse_bending_compliance, w, cloth);
    pbd_range top = {cloth->first, d->coarse_resolution};
    if (r == PBD_OK && d->scene == PBD_UP_SCENE_CAPE) r = pbd_particles_set_kinematic(*w, top, 1);
    return r;
}

/* The cape's script: top-row vertex i at `time`, swung from its rest place
   on pbd_up__training_mesh's grid (row 0 of pbd_mesh_grid: origin + u i /
   (n - 1), in the same float operations). */
static void pbd_up__cape_target(const pbd_up_training_desc *d, int i, double time, float *target) {
    const double two_pi = 6.28318530717958647692;
    float s = d->size, f = (float)i / (float)(d->coarse_resolution - 1);
    target[0] = (-0.5f * s + s * f) + d->amplitude * (float)sin(two_pi * d->frequency * time);
    target[1] = s;
    target[2] = 0.0f + 0.5f * d->amplitude * (float)sin(0.5 * two_pi * d->frequency * time);
}

static pbd_result pbd_up__training_drive(const pbd_up_training_desc *d, pbd_world *w, pbd_range cloth, double time) {
    pbd_result r = PBD_OK;
    for (int i = 0; d->scene == PBD_UP_SCENE_CAPE && i < d->coarse_resolution && r == PBD_OK; ++i) {
        float target[3];
        pbd_up__cape_target(d, i, time, target);
        r = pbd_particle_set_kinematic_target(w, cloth.first + i, target);
    }
    return r;
}

PBD_UP_DEF pbd_result pbd_up_training_world(const pbd_up_training_desc *d, pbd_world **w, pbd_range *cloth) {
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_world: desc is NULL");
    if (!w) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_world: w is NULL");
    if (!cloth) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_world: cloth is NULL");
    pbd_result r = pbd_up__training_check_desc(d);
    if (r != PBD_OK) return r;
    pbd_mesh m;
    float normal[3];
    memset(&m, 0, sizeof m);
    pbd_world *cw = NULL;
    pbd_range co;
    r = pbd_up__training_mesh(d, &m, normal);
    if (r == PBD_OK) r = pbd_up__training_coarse(d, &m, &cw, &co);
    pbd_mesh_free(&m);
    if (r != PBD_OK) {
        if (cw) pbd_world_destroy(cw);
        return r;
    }
    *w = cw;
    *cloth = co;
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_training_drive(const pbd_up_training_desc *d, pbd_world *w, pbd_range cloth, double time) {
    if (!w) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_drive: w is NULL");
    if (!d) return pbd_world_fail(w, PBD_ERROR_NULL_POINTER, "pbd_up_training_drive: desc is NULL");
    pbd_result r = pbd_up__training_check_desc(d);
    if (r != PBD_OK) return pbd_world_fail_in(w, "pbd_up_training_drive", r); /* the desc's message, on w */
    if (!pbd__finite_bits_d(time))
        return pbd_world_fail(w, PBD_ERROR_NOT_FINITE, "pbd_up_training_drive: time is %g", time);
    long long n = d->coarse_resolution;
    if (cloth.first < 0 || cloth.count != n * n || (long long)cloth.first + cloth.count > pbd_world_particle_count(w))
        return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_training_drive: cloth (first %d, count %d) is not the scene's %lld x %lld "
                              "vertices in this world of %d particles",
                              cloth.first, cloth.count, n, n, pbd_world_particle_count(w));
    for (int i = 0; d->scene == PBD_UP_SCENE_CAPE && i < d->coarse_resolution; ++i) {
        int kinematic = 0;
        r = pbd_particle_get_kinematic(w, cloth.first + i, &kinematic);
        if (r != PBD_OK) return r;
        if (!kinematic)
            return pbd_world_fail(w, PBD_ERROR_INVALID_ARGUMENT,
                                  "pbd_up_training_drive: the cape's top-row particle %d is not kinematic",
                                  cloth.first + i);
    }
    return pbd_up__training_drive(d, w, cloth, time);
}

PBD_UP_DEF pbd_result pbd_up_training_generate(const pbd_up_training_desc *d, pbd_up_training *out) {
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_generate: d is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_generate: out is NULL");
    pbd_result r = pbd_up__training_check_desc(d);
    if (r != PBD_OK) return r;
    pbd_mesh cm, fm;
    float normal[3];
    memset(&cm, 0, sizeof cm);
    memset(&fm, 0, sizeof fm);
    pbd_world *cw = NULL, *fw = NULL;
    pbd_range co = {0, 0}, fo = {0, 0}; /* the cloths' particles */
    pbd_up_training t;
    memset(&t, 0, sizeof t);
    float *u = NULL;
    int steps = d->frames * d->steps_per_frame;
    r = pbd_up__training_mesh(d, &cm, normal);
    if (r == PBD_OK) r = pbd_up_mesh_subdivide(&cm, d->levels, 0, &fm);
    if (r != PBD_OK) goto done;
    {
        unsigned st = d->seed ? d->seed : 1u;
        for (int i = cm.vertex_count; i < fm.vertex_count; ++i) { /* xorshift32 */
            st ^= st << 13;
            st ^= st >> 17;
            st ^= st << 5;
            float j = d->jitter * ((float)(st >> 8) * (1.0f / 16777216.0f) - 0.5f);
            for (int k = 0; k < 3; ++k) fm.positions[3 * (size_t)i + k] += j * normal[k];
        }
    }
    t.coarse_count = cm.vertex_count;
    t.detail_count = fm.vertex_count;
    t.frame_count = d->frames;
    t.coarse_triangle_count = cm.triangle_count;
    t.detail_triangle_count = fm.triangle_count;
    t.levels = d->levels;
    r = pbd_up__training_alloc(&t);
    if (r != PBD_OK) goto done;
    memcpy(t.coarse_triangles, cm.triangles, sizeof(int) * 3 * (size_t)cm.triangle_count);
    memcpy(t.detail_triangles, fm.triangles, sizeof(int) * 3 * (size_t)fm.triangle_count);
    memcpy(t.coarse_rest, cm.positions, sizeof(float) * 3 * (size_t)cm.vertex_count);
    memcpy(t.detail_rest, fm.positions, sizeof(float) * 3 * (size_t)fm.vertex_count);
    r = pbd_up__training_coarse(d, &cm, &cw, &co);
    if (r == PBD_OK) r = pbd_up__training_world(d, &fm, d->fine_bending_compliance, &fw, &fo);
    /* the fine vertices at coarse vertices (the first: pbd_up_mesh_subdivide's numbering) follow them */
    if (r == PBD_OK) {
        pbd_range follow = {fo.first, cm.vertex_count};
        r = pbd_particles_set_kinematic(fw, follow, 1);
    }
    u = (float *)pbd_up__alloc_array((size_t)cm.vertex_count * 3, sizeof(float));
    if (r == PBD_OK && !u) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_training_generate: out of memory");
    for (int k = 0; k < steps && r == PBD_OK; ++k) {
        r = pbd_up__training_drive(d, cw, co, (k + 1) * (double)d->time_step);
        if (r == PBD_OK) r = pbd_world_step(cw, d->time_step);
        if (r == PBD_OK) r = pbd_particles_get_positions(cw, co, u);
        for (int i = 0; i < cm.vertex_count && r == PBD_OK; ++i)
            r = pbd_particle_set_kinematic_target(fw, fo.first + i, u + 3 * (size_t)i);
        if (r == PBD_OK) r = pbd_world_step(fw, d->time_step);
        if (r == PBD_OK && (k + 1) % d->steps_per_frame == 0) {
            int f = (k + 1) / d->steps_per_frame - 1;
            memcpy(t.coarse + (size_t)f * 3 * t.coarse_count, u, sizeof(float) * 3 * (size_t)t.coarse_count);
            r = pbd_particles_get_positions(fw, fo, t.detail + (size_t)f * 3 * t.detail_count);
        }
    }
done:
    pbd_up__free(u);
    if (cw) pbd_world_destroy(cw);
    if (fw) pbd_world_destroy(fw);
    pbd_mesh_free(&cm);
    pbd_up_mesh_free(&fm);
    if (r != PBD_OK) {
        pbd_up_training_free(&t);
        return r;
    }
    *out = t;
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_training_concat(const pbd_up_training *a, const pbd_up_training *b, pbd_up_training *out) {
    if (!a) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: a is NULL");
    if (!b) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: b is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: out is NULL");
    if (!a->coarse)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: a has no coarse frames (NULL)");
    if (!b->coarse)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: b has no coarse frames (NULL)");
    if (!a->detail)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: a has no detail frames (NULL)");
    if (!b->detail)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_concat: b has no detail frames (NULL)");
    if (a->coarse_count != b->coarse_count || a->detail_count != b->detail_count)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_training_concat: vertex counts differ (coarse %d and %d, detail %d and %d)",
                              a->coarse_count, b->coarse_count, a->detail_count, b->detail_count);
    if (a->coarse_triangle_count != b->coarse_triangle_count || a->detail_triangle_count != b->detail_triangle_count ||
        a->levels != b->levels ||
        memcmp(a->coarse_triangles, b->coarse_triangles, sizeof(int) * 3 * (size_t)a->coarse_triangle_count) != 0 ||
        memcmp(a->detail_triangles, b->detail_triangles, sizeof(int) * 3 * (size_t)a->detail_triangle_count) != 0)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_training_concat: the two sets have different triangles or levels (%d and %d)",
                              a->levels, b->levels);
    if (a->frame_count > INT_MAX - b->frame_count)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW,
                              "pbd_up_training_concat: %d and %d frames are too many together (at most %d)",
                              a->frame_count, b->frame_count, INT_MAX);
    pbd_up_training t = *a;
    t.frame_count = a->frame_count + b->frame_count;
    t.coarse_triangles = NULL;
    t.detail_triangles = NULL;
    t.coarse_rest = NULL;
    t.detail_rest = NULL;
    t.coarse = NULL;
    t.detail = NULL;
    pbd_result r = pbd_up__training_alloc(&t);
    if (r != PBD_OK) return r;
    size_t cc = (size_t)a->coarse_count * 3, dc = (size_t)a->detail_count * 3;
    memcpy(t.coarse_triangles, a->coarse_triangles, sizeof(int) * 3 * (size_t)a->coarse_triangle_count);
    memcpy(t.detail_triangles, a->detail_triangles, sizeof(int) * 3 * (size_t)a->detail_triangle_count);
    memcpy(t.coarse_rest, a->coarse_rest, sizeof(float) * cc);
    memcpy(t.detail_rest, a->detail_rest, sizeof(float) * dc);
    memcpy(t.coarse, a->coarse, sizeof(float) * cc * a->frame_count);
    memcpy(t.coarse + cc * a->frame_count, b->coarse, sizeof(float) * cc * b->frame_count);
    memcpy(t.detail, a->detail, sizeof(float) * dc * a->frame_count);
    memcpy(t.detail + dc * a->frame_count, b->detail, sizeof(float) * dc * b->frame_count);
    *out = t;
    return PBD_OK;
}

#define PBD_UP__TRAINING_MAGIC "PBDUPTRN"

/* The body (everything but the checksum) in the documented order. */
static void pbd_up__training_io(pbd_up__io *io, pbd_up_training *t) {
    char magic[8];
    uint32_t version = 1, order = PBD_UP__BYTE_ORDER;
    memcpy(magic, PBD_UP__TRAINING_MAGIC, 8);
    pbd_up__io_bytes(io, magic, 8);
    pbd_up__io_bytes(io, &version, 4);
    pbd_up__io_bytes(io, &order, 4);
    if (io->in && (memcmp(magic, PBD_UP__TRAINING_MAGIC, 8) != 0 || version != 1 || order != PBD_UP__BYTE_ORDER))
        io->bad = 1;
    pbd_up__io_int(io, &t->coarse_count);
    pbd_up__io_int(io, &t->detail_count);
    pbd_up__io_int(io, &t->frame_count);
    pbd_up__io_int(io, &t->coarse_triangle_count);
    pbd_up__io_int(io, &t->detail_triangle_count);
    pbd_up__io_int(io, &t->levels);
    if (io->bad) return;
    if (io->in && (t->coarse_count <= 0 || t->detail_count <= 0 || t->frame_count <= 0 ||
                   t->coarse_triangle_count <= 0 || t->detail_triangle_count <= 0 || t->levels < 0 ||
                   t->coarse_count > INT_MAX / 3 || t->detail_count > INT_MAX / 3 ||
                   t->coarse_triangle_count > INT_MAX / 3 || t->detail_triangle_count > INT_MAX / 3)) {
        io->bad = 1;
        return;
    }
    size_t cc = (size_t)t->coarse_count * 3, dc = (size_t)t->detail_count * 3, nf = (size_t)t->frame_count;
    /* nf is 0 when measuring a set without frames (save refuses it after) */
    if (nf && (cc > (size_t)-1 / nf || dc > (size_t)-1 / nf)) {
        io->bad = 1;
        return;
    }
    pbd_up__io_array(io, (void **)&t->coarse_triangles, (size_t)t->coarse_triangle_count * 3, sizeof(int));
    pbd_up__io_array(io, (void **)&t->detail_triangles, (size_t)t->detail_triangle_count * 3, sizeof(int));
    pbd_up__io_array(io, (void **)&t->coarse_rest, cc, sizeof(float));
    pbd_up__io_array(io, (void **)&t->detail_rest, dc, sizeof(float));
    pbd_up__io_array(io, (void **)&t->coarse, cc * nf, sizeof(float));
    pbd_up__io_array(io, (void **)&t->detail, dc * nf, sizeof(float));
}

/* What a loaded training set must be (the message says what it is not):
   levels a subdivision's (0..8) whose triangle count the detail mesh has,
   valid triangles, finite positions. */
static pbd_result pbd_up__training_check(const pbd_up_training *t) {
    size_t cc = (size_t)t->coarse_count * 3, dc = (size_t)t->detail_count * 3, nf = (size_t)t->frame_count;
    if (t->levels < 0 || t->levels > 8)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "levels %d outside 0..8", t->levels);
    if (((long long)t->coarse_triangle_count << (2 * t->levels)) != t->detail_triangle_count)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "%d detail triangles, not the %d coarse ones subdivided %d times (%lld)",
                              t->detail_triangle_count, t->coarse_triangle_count, t->levels,
                              (long long)t->coarse_triangle_count << (2 * t->levels));
    pbd_result r =
        pbd_up__check_triangles(t->coarse_triangles, t->coarse_triangle_count, t->coarse_count, "coarse_triangles");
    if (r == PBD_OK)
        r = pbd_up__check_triangles(t->detail_triangles, t->detail_triangle_count, t->detail_count, "detail_triangles");
    if (r != PBD_OK) return r;
    const char *nan = !pbd_up__finite(t->coarse_rest, cc)   ? "coarse_rest"
                      : !pbd_up__finite(t->detail_rest, dc) ? "detail_rest"
                      : !pbd_up__finite(t->coarse, cc * nf) ? "the coarse frames"
                      : !pbd_up__finite(t->detail, dc * nf) ? "the detail frames"
                                                            : NULL;
    return nan ? pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "%s contain NaN or infinity", nan) : PBD_OK;
}

PBD_UP_DEF size_t pbd_up_training_save_size(const pbd_up_training *t) {
    if (!t || !t->coarse || !t->detail || !t->coarse_rest || !t->detail_rest || !t->coarse_triangles ||
        !t->detail_triangles)
        return 0;
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    pbd_up__training_io(&io, (pbd_up_training *)t);
    return io.off + sizeof(uint64_t);
}

PBD_UP_DEF pbd_result pbd_up_training_save(const pbd_up_training *t, void *buffer, size_t size) {
    if (!t) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_save: t is NULL");
    if (!buffer) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_save: buffer is NULL");
    /* the counts first: a set without frames has no size to compare */
    static const char *const count_names[3] = {"coarse_count", "detail_count", "frame_count"};
    const int counts[3] = {t->coarse_count, t->detail_count, t->frame_count};
    pbd_result bad = pbd_up__check_counts("pbd_up_training_save", counts, count_names, 3, 1);
    if (bad != PBD_OK) return bad;
    size_t need = pbd_up_training_save_size(t);
    if (!need)
        return pbd_world_fail(
            NULL, PBD_ERROR_NULL_POINTER,
            "pbd_up_training_save: t has no data: one of its arrays (frames, rest poses, triangles) is NULL");
    if (size < need)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_training_save: buffer of %zu bytes, the training set needs %zu", size, need);
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    io.out = (unsigned char *)buffer;
    io.size = need - sizeof(uint64_t);
    pbd_up__training_io(&io, (pbd_up_training *)t);
    if (io.bad)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_training_save: t's counts do not match its data");
    uint64_t sum = pbd_up__fnv1a(io.out, io.off);
    memcpy(io.out + io.off, &sum, sizeof sum);
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_training_load(const void *buffer, size_t size, pbd_up_training *out) {
    if (!buffer) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_load: buffer is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_training_load: out is NULL");
    uint64_t sum;
    if (size < 40 + sizeof sum)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_training_load: %zu bytes are too few for a training set file", size);
    const unsigned char *in = (const unsigned char *)buffer;
    memcpy(&sum, in + size - sizeof sum, sizeof sum);
    if (!pbd_up__fnv1a_matches(in, size - sizeof sum, sum))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "pbd_up_training_load: checksum mismatch: the training set file is damaged (%zu bytes)",
                              size);
    pbd_up_training t;
    memset(&t, 0, sizeof t);
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    io.in = in;
    io.size = size - sizeof sum;
    pbd_up__training_io(&io, &t);
    pbd_result r = PBD_OK;
    if (io.bad == 2) r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_training_load: out of memory");
    else if (io.bad || io.off != io.size)
        r = pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "pbd_up_training_load: the training set file is malformed: %s",
                           io.bad ? "not a training set of this version and byte order, or bad counts"
                                  : "its size does not match its counts");
    else if ((r = pbd_up__training_check(&t)) != PBD_OK)
        r = pbd_world_fail_in(NULL, "pbd_up_training_load: the training set file is malformed", PBD_ERROR_BAD_SNAPSHOT);
    if (r != PBD_OK) {
        pbd_up_training_free(&t);
        return r;
    }
    *out = t;
    return PBD_OK;
}

// ==== piu ===================================================================

/* --- small dense linear algebra in double, shared by piu, wpsd and pdm --- */

/* Least squares min |A x - b| by Householder QR (A is m x n column-major,
   m >= n; A and b are overwritten). Returns 0, or -1 when a column is
   (numerically) dependent on the others. */
static int pbd_up__lstsq(int m, int n, double *A, double *b, double *x) {
    for (int k = 0; k < n; ++k) {
        double *a = A + (size_t)k * m;
        double norm = 0.0, scale = 0.0;
        for (int i = k; i < m; ++i) scale = fmax(scale, fabs(a[i]));
        if (scale == 0.0) return -1;
        for (int i = k; i < m; ++i) norm += (a[i] / scale) * (a[i] / scale);
        norm = scale * sqrt(norm);
        double alpha = a[k] > 0.0 ? -norm : norm;
        double v0 = a[k] - alpha;
        /* v = (v0, a[k+1..m)); H = I - 2 v v^T / (v^T v) */
        double vv = v0 * v0;
        for (int i = k + 1; i < m; ++i) vv += a[i] * a[i];
        a[k] = v0;
        if (vv > 0.0) {
            for (int j = k + 1; j < n; ++j) {
                double *c = A + (size_t)j * m, s = 0.0;
                for (int i = k; i < m; ++i) s += a[i] * c[i];
                s = 2.0 * s / vv;
                for (int i = k; i < m; ++i) c[i] -= s * a[i];
            }
            double s = 0.0;
            for (int i = k; i < m; ++i) s += a[i] * b[i];
            s = 2.0 * s / vv;
            for (int i = k; i < m; ++i) b[i] -= s * a[i];
        }
        a[k] = alpha; /* R's diagonal */
    }
    double rmax = 0.0;
    for (int k = 0; k < n; ++k) rmax = fmax(rmax, fabs(A[(size_t)k * m + k]));
    for (int k = n - 1; k >= 0; --k) {
        double r = A[(size_t)k * m + k];
        if (!(fabs(r) > PBD_UP__QR_PIVOT_REL_MIN * rmax)) return -1;
        double s = b[k];
        for (int j = k + 1; j < n; ++j) s -= A[(size_t)j * m + k] * x[j];
        x[k] = s / r;
    }
    return 0;
}

/* Eigen-decomposition of a symmetric n x n matrix (row-major, overwritten)
   by pbd.h's pbd_sym_eigen: eigenvalues descending in evals, eigenvector k
   in column k of evecs (row-major n x n). */
static void pbd_up__sym_eigen(int n, double *A, double *evals, double *evecs) {
    pbd_sym_eigen(n, A, evecs); /* pbd.h's, shared with pbd_sm.h */
    for (int i = 0; i < n; ++i) evals[i] = A[i * n + i];
    for (int i = 0; i < n; ++i) { /* selection sort, descending */
        int best = i;
        for (int j = i + 1; j < n; ++j)
            if (evals[j] > evals[best]) best = j;
        if (best == i) continue;
        double t = evals[i];
        evals[i] = evals[best];
        evals[best] = t;
        for (int k = 0; k < n; ++k) {
            double u = evecs[k * n + i];
            evecs[k * n + i] = evecs[k * n + best];
            evecs[k * n + best] = u;
        }
    }
}

/* --- PIU --- */

/* PIU has its own layout rather than the shared pbd_up__sparse (CSR +
   sliced ELL) because that SIMD kernel gathers the coarse coordinates of
   every entry, while PIU's blocks let 8 detail vertices share one
   broadcast per support vertex, so the kernel streams only the weights
   (4 bytes per entry) and never gathers; it is faster even with more
   entries per row (bench/upsample.c times both: the subdivision model
   evaluates through pbd_up__sparse). */
#define PBD_UP__LANES 8 /* detail vertices per SoA row group */

/* The 8 lanes are one 256-bit register where the target has AVX (the
   AVX2 and AVX-512 headers include it), two 128-bit registers with SSE2. */
#if PBD_UP__W >= 8
#define PBD_UP__PIU_SIMD 8
#elif PBD_UP__W == 4
#define PBD_UP__PIU_SIMD 4
#else
#define PBD_UP__PIU_SIMD 0
#endif

typedef struct pbd_up__piu {
    int coarse_count, detail_count, support, group_count;
    int *group_support; /* group_count * support coarse indices (the group's neighbourhood) */
    float *weights;     /* group_count * support * LANES: weights[(g*support + j)*LANES + lane] */
    int *lane_vertex;   /* group_count * LANES detail indices, -1 for padding lanes */
    /* oscillatory modes (Kavan et al. 2011, section 6) */
    int mode_count;
    float *modes;      /* mode_count * detail_count * 3, unit vectors */
    float *omega;      /* mode_count: angular frequency (rad/s) */
    float *amplitude;  /* mode_count: training amplitude */
    float train_speed; /* RMS coarse vertex speed of the training frames */
    /* oscillator state */
    float *level, *phase; /* mode_count each */
    float *prev_coarse;   /* coarse_count * 3 */
    int have_prev;
} pbd_up__piu;

static void pbd_up__piu_free(pbd_up__piu *p) {
    if (!p) return;
    pbd_up__free(p->group_support);
    pbd_up__free(p->weights);
    pbd_up__free(p->lane_vertex);
    pbd_up__free(p->modes);
    pbd_up__free(p->omega);
    pbd_up__free(p->amplitude);
    pbd_up__free(p->level);
    pbd_up__free(p->phase);
    pbd_up__free(p->prev_coarse);
    pbd_up__free(p);
}

/* X = B u for one group of LANES detail vertices: each support vertex is
   broadcast and multiplied with a row of LANES weights. The SIMD kernel and
   its scalar twin add the terms in the same order (j = 0, 1, ...), with
   separate multiply and add, so they agree bit for bit. */
/* The scalar reference of lane l of group g: sum_j w_j u[s_j] into
   out[0 .. 3) (u: `stride` floats a coarse vertex; a GPU model reads a
   world's float4 particles). */
static PBD_HD void pbd_up__piu_lane(const pbd_up__piu *p, int g, int l, const float *u, int stride, float *out) {
    const int K = p->support;
    const int *s = p->group_support + (size_t)g * K;
    const float *w = p->weights + (size_t)g * K * PBD_UP__LANES;
    float x = 0.0f, y = 0.0f, z = 0.0f;
    for (int j = 0; j < K; ++j) {
        const float *c = u + (size_t)stride * (size_t)s[j];
        float wj = w[(size_t)j * PBD_UP__LANES + l];
        x = x + wj * c[0];
        y = y + wj * c[1];
        z = z + wj * c[2];
    }
    out[0] = x;
    out[1] = y;
    out[2] = z;
}

static void pbd_up__piu_group(const pbd_up__piu *p, int g, const float *u, float *X, int simd) {
    const int *lv = p->lane_vertex + (size_t)g * PBD_UP__LANES;
    float ax[PBD_UP__LANES], ay[PBD_UP__LANES], az[PBD_UP__LANES];
#if PBD_UP__PIU_SIMD != 0
    const int K = p->support;
    const int *s = p->group_support + (size_t)g * K;
    const float *w = p->weights + (size_t)g * K * PBD_UP__LANES;
#endif
#if PBD_UP__PIU_SIMD == 8
    if (simd) {
        simde__m256 sx = simde_mm256_setzero_ps(), sy = sx, sz = sx;
        for (int j = 0; j < K; ++j) {
            const float *c = u + 3 * (size_t)s[j];
            simde__m256 wj = simde_mm256_loadu_ps(w + (size_t)j * PBD_UP__LANES);
            sx = simde_mm256_add_ps(sx, simde_mm256_mul_ps(wj, simde_mm256_set1_ps(c[0])));
            sy = simde_mm256_add_ps(sy, simde_mm256_mul_ps(wj, simde_mm256_set1_ps(c[1])));
            sz = simde_mm256_add_ps(sz, simde_mm256_mul_ps(wj, simde_mm256_set1_ps(c[2])));
        }
        simde_mm256_storeu_ps(ax, sx);
        simde_mm256_storeu_ps(ay, sy);
        simde_mm256_storeu_ps(az, sz);
    } else
#elif PBD_UP__PIU_SIMD == 4
    if (simd) {
        for (int h = 0; h < PBD_UP__LANES; h += 4) {
            simde__m128 sx = simde_mm_setzero_ps(), sy = sx, sz = sx;
            for (int j = 0; j < K; ++j) {
                const float *c = u + 3 * (size_t)s[j];
                simde__m128 wj = simde_mm_loadu_ps(w + (size_t)j * PBD_UP__LANES + h);
                sx = simde_mm_add_ps(sx, simde_mm_mul_ps(wj, simde_mm_set1_ps(c[0])));
                sy = simde_mm_add_ps(sy, simde_mm_mul_ps(wj, simde_mm_set1_ps(c[1])));
                sz = simde_mm_add_ps(sz, simde_mm_mul_ps(wj, simde_mm_set1_ps(c[2])));
            }
            simde_mm_storeu_ps(ax + h, sx);
            simde_mm_storeu_ps(ay + h, sy);
            simde_mm_storeu_ps(az + h, sz);
        }
    } else
#endif
    {
        (void)simd;
        for (int l = 0; l < PBD_UP__LANES; ++l) {
            float o[3];
            pbd_up__piu_lane(p, g, l, u, 3, o);
            ax[l] = o[0];
            ay[l] = o[1];
            az[l] = o[2];
        }
    }
    for (int l = 0; l < PBD_UP__LANES; ++l) {
        int v = lv[l];
        if (v < 0) continue;
        X[3 * (size_t)v] = ax[l];
        X[3 * (size_t)v + 1] = ay[l];
        X[3 * (size_t)v + 2] = az[l];
    }
}

/* The modes' coefficients level_k sin(phase_k) (host code: sinf). */
static void pbd_up__piu_mode_coeffs(const pbd_up__piu *p, float *c) {
    for (int k = 0; k < p->mode_count; ++k) c[k] = p->level[k] * sinf(p->phase[k]);
}
/* Element i of X with the modes added (c: their coefficients). */
static PBD_HD void pbd_up__piu_mode_add(const pbd_up__piu *p, const float *c, float *X, long i) {
    const size_t stride = (size_t)p->detail_count * 3;
    float x = X[i];
    for (int k = 0; k < p->mode_count; ++k) x = x + c[k] * p->modes[(size_t)k * stride + (size_t)i];
    X[i] = x;
}
/* Adds the oscillatory modes: X += sum_k level_k sin(phase_k) mode_k. */
static void pbd_up__piu_add_modes(const pbd_up__piu *p, float *X, int threads) {
    if (p->mode_count == 0) return;
    float c[64];
    pbd_up__piu_mode_coeffs(p, c);
    const long n = (long)p->detail_count * 3;
    (void)threads;
    PBD_UP__PRAGMA(omp parallel for num_threads(threads) schedule(static) if(threads > 1 && n > 30000))
    for (long i = 0; i < n; ++i) pbd_up__piu_mode_add(p, c, X, i);
}

/* Below this many groups evaluation runs on one thread (a parallel region
   costs a few microseconds; 64 groups are 512 detail vertices). */
#define PBD_UP__PIU_PARALLEL_MIN 64

static void pbd_up__piu_apply(const pbd_up__piu *p, const float *u, float *X, int threads, int simd) {
    const int G = p->group_count;
    (void)threads;
    const int parallel = threads > 1 && G >= PBD_UP__PIU_PARALLEL_MIN;
    (void)parallel;
    PBD_UP__PRAGMA(omp parallel for num_threads(threads) schedule(static) if(parallel))
    for (int g = 0; g < G; ++g) pbd_up__piu_group(p, g, u, X, simd);
    pbd_up__piu_add_modes(p, X, threads);
}

/* The support of a block (the detail vertices whose nearest coarse
   vertex is `owner`): coarse vertices ranked by the prior weight the
   block's rows give them, then by rest distance to the owner. */
typedef struct pbd_up__rank {
    double key0, key1;
    int index;
} pbd_up__rank;

static int pbd_up__rank_cmp(const void *a, const void *b) {
    const pbd_up__rank *x = (const pbd_up__rank *)a, *y = (const pbd_up__rank *)b;
    if (x->key0 != y->key0) return x->key0 > y->key0 ? -1 : 1; /* larger prior first */
    if (x->key1 != y->key1) return x->key1 < y->key1 ? -1 : 1; /* then nearer */
    return x->index < y->index ? -1 : (x->index > y->index ? 1 : 0);
}

static double pbd_up__dist2(const float *a, const float *b) {
    double dx = (double)a[0] - b[0], dy = (double)a[1] - b[1], dz = (double)a[2] - b[2];
    return dx * dx + dy * dy + dz * dz;
}

static pbd_result pbd_up__piu_check_desc(const pbd_up_piu_desc *d) {
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_fit: desc is NULL");
    if (!d->coarse_frames)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_fit: pbd_up_piu_desc.coarse_frames is NULL");
    if (!d->detail_frames)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_fit: pbd_up_piu_desc.detail_frames is NULL");
    static const char *const count_names[3] = {"coarse_count", "detail_count", "frame_count"};
    const int counts[3] = {d->coarse_count, d->detail_count, d->frame_count};
    pbd_result bad = pbd_up__check_counts("pbd_up_piu_fit", counts, count_names, 3, 1);
    if (bad != PBD_OK) return bad;
    if (d->support < 2 || d->support > 64)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_piu_fit: support %d outside 2..64", d->support);
    if (!(d->regularization >= 0.0f) || !pbd__finite_bits(d->regularization))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_piu_fit: regularization %g must be finite and >= 0", (double)d->regularization);
    if (d->oscillatory_modes < 0 || d->oscillatory_modes > 64 || d->oscillatory_modes > d->frame_count)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_piu_fit: oscillatory_modes %d outside 0..64 or more than frame_count %d",
                              d->oscillatory_modes, d->frame_count);
    if (d->oscillatory_modes > 0 && (!(d->frame_dt > 0.0f) || !pbd__finite_bits(d->frame_dt) || d->frame_count < 3))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_piu_fit: %d oscillatory_modes need frame_dt > 0 (%g) and frame_count >= 3 (%d)",
                              d->oscillatory_modes, (double)d->frame_dt, d->frame_count);
    int np = (d->prior_start != NULL) + (d->prior_index != NULL) + (d->prior_weight != NULL);
    if (np != 0 && np != 3)
        return pbd_world_fail(
            NULL, PBD_ERROR_NULL_POINTER,
            "pbd_up_piu_fit: give all three of prior_start, prior_index and prior_weight, or none (%d given)", np);
    if (d->subdivision &&
        (np || !pbd_up__subdiv_of(d->subdivision) || !d->subdivision->trained ||
         d->subdivision->coarse_count != d->coarse_count || d->subdivision->detail_count != d->detail_count))
        return pbd_world_fail(
            NULL, PBD_ERROR_INVALID_ARGUMENT,
            "pbd_up_piu_fit: subdivision %s (it has %d coarse and %d detail vertices, the desc %d and %d)",
            np ? "comes with the prior arrays: give one prior"
            : !pbd_up__subdiv_of(d->subdivision) || !d->subdivision->trained
                ? "is not a trained subdivision model"
                : "does not match the desc's vertex counts",
            d->subdivision->coarse_count, d->subdivision->detail_count, d->coarse_count, d->detail_count);
    const size_t nc3 = (size_t)d->coarse_count * 3, nd3 = (size_t)d->detail_count * 3;
    if (d->coarse_count > INT_MAX / 3 || d->detail_count > INT_MAX / 3 - PBD_UP__LANES ||
        nd3 > ((size_t)-1 / sizeof(double)) / (size_t)d->frame_count ||
        nc3 > ((size_t)-1 / sizeof(float)) / (size_t)d->frame_count)
        return pbd_world_fail(
            NULL, PBD_ERROR_OVERFLOW,
            "pbd_up_piu_fit: coarse_count %d, detail_count %d and frame_count %d are too large for memory",
            d->coarse_count, d->detail_count, d->frame_count);
    if (!pbd_up__finite(d->coarse_frames, nc3 * (size_t)d->frame_count) ||
        !pbd_up__finite(d->detail_frames, nd3 * (size_t)d->frame_count))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_up_piu_fit: %s contain NaN or infinity (%d frames)",
                              pbd_up__finite(d->coarse_frames, nc3 * (size_t)d->frame_count) ? "detail_frames"
                                                                                             : "coarse_frames",
                              d->frame_count);
    if ((d->coarse_rest && !pbd_up__finite(d->coarse_rest, nc3)) ||
        (d->detail_rest && !pbd_up__finite(d->detail_rest, nd3)))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_up_piu_fit: %s contains NaN or infinity",
                              d->coarse_rest && !pbd_up__finite(d->coarse_rest, nc3) ? "coarse_rest" : "detail_rest");
    if (np == 3) {
        if (d->prior_start[0] != 0)
            return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_piu_fit: prior_start[0] is %d, must be 0",
                                  d->prior_start[0]);
        for (int i = 0; i < d->detail_count; ++i)
            if (d->prior_start[i + 1] < d->prior_start[i])
                return pbd_world_fail(
                    NULL, PBD_ERROR_INVALID_ARGUMENT,
                    "pbd_up_piu_fit: prior_start decreases: prior_start[%d] = %d after prior_start[%d] = %d", i + 1,
                    d->prior_start[i + 1], i, d->prior_start[i]);
        for (int e = 0; e < d->prior_start[d->detail_count]; ++e) {
            if (d->prior_index[e] < 0 || d->prior_index[e] >= d->coarse_count)
                return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                                      "pbd_up_piu_fit: prior_index[%d] = %d is not a coarse vertex (0..%d)", e,
                                      d->prior_index[e], d->coarse_count - 1);
            if (!pbd__finite_bits(d->prior_weight[e]))
                return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "pbd_up_piu_fit: prior_weight[%d] is not finite (%g)",
                                      e, (double)d->prior_weight[e]);
        }
    }
    return PBD_OK;
}

/* Nearest coarse vertex of every detail vertex: the largest prior weight
   when a prior is given (for a subdivision stencil, the nearest control
   vertex), else the nearest in the rest pose. */
static void pbd_up__piu_owners(const pbd_up_piu_desc *d, const float *crest, const float *drest, int *owner) {
    for (int i = 0; i < d->detail_count; ++i) {
        int best = -1;
        if (d->prior_start) {
            float bw = -FLT_MAX;
            for (int e = d->prior_start[i]; e < d->prior_start[i + 1]; ++e)
                if (d->prior_weight[e] > bw || (d->prior_weight[e] == bw && d->prior_index[e] < best)) {
                    bw = d->prior_weight[e];
                    best = d->prior_index[e];
                }
        }
        if (best < 0) {
            double bd = DBL_MAX;
            for (int v = 0; v < d->coarse_count; ++v) {
                double dd = pbd_up__dist2(drest + 3 * (size_t)i, crest + 3 * (size_t)v);
                if (dd < bd) {
                    bd = dd;
                    best = v;
                }
            }
        }
        owner[i] = best;
    }
}

/* One row of B: least squares with the partition of unity eliminated
   (b_last = 1 - sum of the others) and the ridge toward the prior row p
   written as extra rows, solved by QR in double. Coordinates are taken
   relative to the last support vertex, which the partition of unity
   allows and which keeps the problem well conditioned far from the origin. */
static int pbd_up__piu_fit_row(const pbd_up_piu_desc *d, int i, const int *s, int K, const double *p, double *A,
                               double *rhs, double *z, float *out) {
    const int F = d->frame_count, n = K - 1, m = 3 * F + K;
    const size_t nc3 = (size_t)d->coarse_count * 3, nd3 = (size_t)d->detail_count * 3;
    double trace = 0.0;
    for (int f = 0; f < F; ++f) {
        const float *u = d->coarse_frames + (size_t)f * nc3;
        const float *X = d->detail_frames + (size_t)f * nd3 + 3 * (size_t)i;
        for (int c = 0; c < 3; ++c) {
            int r = 3 * f + c;
            double last = u[3 * (size_t)s[K - 1] + c];
            for (int j = 0; j < n; ++j) {
                double a = (double)u[3 * (size_t)s[j] + c] - last;
                A[(size_t)j * m + r] = a;
                trace += a * a;
            }
            rhs[r] = (double)X[c] - last;
        }
    }
    double lambda = d->regularization > PBD_UP__PIU_LAMBDA_MIN_F ? (double)d->regularization : PBD_UP__PIU_LAMBDA_MIN;
    double scale = trace > 0.0 ? trace / n : 1.0;
    double sl = sqrt(lambda * scale);
    for (int k = 0; k < K; ++k) {
        int r = 3 * F + k;
        for (int j = 0; j < n; ++j) A[(size_t)j * m + r] = k == n ? -sl : (j == k ? sl : 0.0);
        rhs[r] = k == n ? sl * (p[n] - 1.0) : sl * p[k];
    }
    if (pbd_up__lstsq(m, n, A, rhs, z) != 0) return -1;
    double last = 1.0;
    for (int j = 0; j < n; ++j) {
        out[j] = (float)z[j];
        last -= z[j];
    }
    out[n] = (float)last;
    return 0;
}

/* The support of the block owned by coarse vertex v: the coarse vertices
   its rows' prior touches (by total |weight|) and then the nearest to v in
   the rest pose, K in all, ascending. mark/psum are coarse_count scratch
   (zero on entry and exit), cand holds up to coarse_count entries. */
static void pbd_up__piu_support(const pbd_up_piu_desc *d, const float *crest, int v, const int *rows, int row_count,
                                int K, double *psum, int *mark, pbd_up__rank *cand, int *s) {
    int nc = 0;
    if (d->prior_start)
        for (int r = 0; r < row_count; ++r)
            for (int e = d->prior_start[rows[r]]; e < d->prior_start[rows[r] + 1]; ++e) {
                int c = d->prior_index[e];
                if (!mark[c]) {
                    mark[c] = 1;
                    cand[nc++].index = c;
                }
                psum[c] += fabs((double)d->prior_weight[e]);
            }
    /* the K nearest to v, kept sorted by insertion */
    int *near = s; /* s doubles as scratch for the K nearest */
    double nd[64];
    int nn = 0;
    for (int c = 0; c < d->coarse_count; ++c) {
        double dd = pbd_up__dist2(crest + 3 * (size_t)c, crest + 3 * (size_t)v);
        if (nn == K && dd >= nd[K - 1]) continue;
        int k = nn < K ? nn++ : K - 1;
        while (k > 0 && nd[k - 1] > dd) {
            nd[k] = nd[k - 1];
            near[k] = near[k - 1];
            --k;
        }
        nd[k] = dd;
        near[k] = c;
    }
    for (int k = 0; k < nn; ++k)
        if (!mark[near[k]]) {
            mark[near[k]] = 1;
            cand[nc++].index = near[k];
        }
    for (int k = 0; k < nc; ++k) {
        int c = cand[k].index;
        cand[k].key0 = psum[c];
        cand[k].key1 = pbd_up__dist2(crest + 3 * (size_t)c, crest + 3 * (size_t)v);
    }
    qsort(cand, (size_t)nc, sizeof cand[0], pbd_up__rank_cmp);
    for (int k = 0; k < nc; ++k) {
        mark[cand[k].index] = 0;
        psum[cand[k].index] = 0.0;
    }
    for (int k = 0; k < K; ++k) s[k] = cand[k].index;
    qsort(s, (size_t)K, sizeof s[0], pbd_up__int_cmp);
}

/* The prior row restricted to the support and renormalised; inverse
   squared distance (Shepard) weights where there is no prior or it puts
   no weight on the support. */
static void pbd_up__piu_prior(const pbd_up_piu_desc *d, const float *crest, const float *drest, int i, const int *s,
                              int K, double *p) {
    double sum = 0.0;
    for (int j = 0; j < K; ++j) p[j] = 0.0;
    if (d->prior_start)
        for (int e = d->prior_start[i]; e < d->prior_start[i + 1]; ++e)
            for (int j = 0; j < K; ++j)
                if (s[j] == d->prior_index[e]) {
                    p[j] += d->prior_weight[e];
                    sum += d->prior_weight[e];
                }
    if (!(fabs(sum) > PBD_UP__PRIOR_SUM_MIN)) {
        sum = 0.0;
        for (int j = 0; j < K; ++j) {
            p[j] = 1.0 / (pbd_up__dist2(drest + 3 * (size_t)i, crest + 3 * (size_t)s[j]) + PBD_UP__PRIOR_DIST2_BIAS);
            sum += p[j];
        }
    }
    for (int j = 0; j < K; ++j) p[j] /= sum;
}

/* Oscillatory modes from the training residual (Kavan et al. 2011,
   section 6): principal components through the frames' Gram matrix, the
   frequency of each mode's coefficient from the linear prediction
   c(f+1) + c(f-1) = 2 cos(omega dt) c(f) (exact for a sinusoid), and its
   amplitude from the coefficient's standard deviation. */
static pbd_result pbd_up__piu_fit_modes(pbd_up__piu *p, const pbd_up_piu_desc *d) {
    const int F = d->frame_count, M = d->oscillatory_modes;
    const size_t nd3 = (size_t)d->detail_count * 3, nc3 = (size_t)d->coarse_count * 3;
    float *res = (float *)pbd_up__alloc_array(nd3 * (size_t)F, sizeof(float));
    double *G = (double *)pbd_up__alloc(sizeof(double) * (size_t)F * F * 2 + sizeof(double) * F);
    if (!res || !G) {
        pbd_up__free(res);
        pbd_up__free(G);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_piu_fit: out of memory");
    }
    double *V = G + (size_t)F * F, *ev = V + (size_t)F * F;
    int saved = p->mode_count;
    p->mode_count = 0; /* the residual of the operator alone */
    for (int f = 0; f < F; ++f) {
        float *r = res + (size_t)f * nd3;
        const float *X = d->detail_frames + (size_t)f * nd3;
        pbd_up__piu_apply(p, d->coarse_frames + (size_t)f * nc3, r, 1, 0);
        for (size_t k = 0; k < nd3; ++k) r[k] = X[k] - r[k];
    }
    p->mode_count = saved;
    double trace = 0.0;
    for (int a = 0; a < F; ++a)
        for (int b = a; b < F; ++b) {
            double s = 0.0;
            const float *ra = res + (size_t)a * nd3, *rb = res + (size_t)b * nd3;
            for (size_t k = 0; k < nd3; ++k) s += (double)ra[k] * rb[k];
            G[a * F + b] = G[b * F + a] = s;
            if (a == b) trace += s;
        }
    pbd_up__sym_eigen(F, G, ev, V);
    int m = 0;
    while (m < M && ev[m] > PBD_UP__MODE_EV_REL_MIN * trace && ev[m] > 0.0) ++m;
    p->mode_count = m;
    double speed2 = 0.0;
    for (int f = 1; f < F; ++f)
        for (size_t k = 0; k < nc3; ++k) {
            double dv = (double)d->coarse_frames[(size_t)f * nc3 + k] - d->coarse_frames[(size_t)(f - 1) * nc3 + k];
            speed2 += dv * dv;
        }
    p->train_speed = (float)(sqrt(speed2 / ((double)(F - 1) * d->coarse_count)) / d->frame_dt);
    for (int k = 0; k < m; ++k) {
        double sq = sqrt(ev[k]), mean = 0.0, num = 0.0, den = 0.0, var = 0.0;
        float *mode = p->modes + (size_t)k * nd3;
        for (size_t e = 0; e < nd3; ++e) {
            double s = 0.0;
            for (int f = 0; f < F; ++f) s += V[f * F + k] * res[(size_t)f * nd3 + e];
            mode[e] = (float)(s / sq);
        }
        for (int f = 0; f < F; ++f) mean += sq * V[f * F + k];
        mean /= F;
        for (int f = 0; f < F; ++f) {
            double y = sq * V[f * F + k] - mean;
            var += y * y;
            if (f > 0 && f < F - 1) {
                num += y * (sq * V[(f + 1) * F + k] - mean + sq * V[(f - 1) * F + k] - mean);
                den += 2.0 * y * y;
            }
        }
        double cw = den > 0.0 ? num / den : 1.0;
        cw = cw > 1.0 ? 1.0 : (cw < -1.0 ? -1.0 : cw);
        double w = acos(cw) / d->frame_dt;
        /* amplitude and phase: c(f) - mean = alpha sin(w t) + beta cos(w t)
           by least squares; the phases keep modes of one travelling wave
           in quadrature */
        double ss = 0, sc = 0, cc = 0, ys = 0, yc = 0;
        for (int f = 0; f < F; ++f) {
            double t = (double)f * d->frame_dt, sn = sin(w * t), cs = cos(w * t);
            double y = sq * V[f * F + k] - mean;
            ss += sn * sn;
            sc += sn * cs;
            cc += cs * cs;
            ys += y * sn;
            yc += y * cs;
        }
        double det = ss * cc - sc * sc, alpha = 0.0, beta = 0.0;
        if (det > PBD_UP__PHASE_DET_REL_MIN * (ss * cc) && det > 0.0) {
            alpha = (ys * cc - yc * sc) / det;
            beta = (yc * ss - ys * sc) / det;
        }
        double amp = sqrt(alpha * alpha + beta * beta);
        p->omega[k] = (float)w;
        p->amplitude[k] = (float)(amp > 0.0 ? amp : sqrt(2.0 * var / F));
        p->phase[k] = (float)(amp > 0.0 ? atan2(beta, alpha) : 0.0);
        p->level[k] = 0.0f;
    }
    pbd_up__free(res);
    pbd_up__free(G);
    return PBD_OK;
}

static pbd_result pbd_up__piu_alloc(pbd_up__piu *p, int group_count, int K, int detail_count, int coarse_count,
                                    int modes) {
    p->group_count = group_count;
    p->support = K;
    p->detail_count = detail_count;
    p->coarse_count = coarse_count;
    p->mode_count = modes;
    size_t G = (size_t)group_count, nd3 = (size_t)detail_count * 3;
    p->group_support = (int *)pbd_up__alloc_array(G * K, sizeof(int));
    p->weights = (float *)pbd_up__alloc_array(G * K * PBD_UP__LANES, sizeof(float));
    p->lane_vertex = (int *)pbd_up__alloc_array(G * PBD_UP__LANES, sizeof(int));
    p->prev_coarse = (float *)pbd_up__alloc_array((size_t)coarse_count * 3, sizeof(float));
    if (!p->group_support || !p->weights || !p->lane_vertex || !p->prev_coarse)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_piu_fit: out of memory");
    if (modes > 0) {
        p->modes = (float *)pbd_up__alloc_array(nd3 * (size_t)modes, sizeof(float));
        p->omega = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        p->amplitude = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        p->level = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        p->phase = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        if (!p->modes || !p->omega || !p->amplitude || !p->level || !p->phase)
            return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_piu_fit: out of memory");
    }
    return PBD_OK;
}

static pbd_result pbd_up__piu_build(const pbd_up_piu_desc *desc, pbd_up__piu **out) {
    pbd_result r = pbd_up__piu_check_desc(desc);
    if (r != PBD_OK) return r;
    pbd_up_piu_desc dd = *desc, *d = &dd;
    if (d->subdivision) { /* its stencil matrix is the prior */
        const pbd_up__sparse *S = &pbd_up__subdiv_of(d->subdivision)->S;
        d->prior_start = S->start;
        d->prior_index = S->col;
        d->prior_weight = S->val;
    }
    const int nc = d->coarse_count, nd = d->detail_count, F = d->frame_count;
    const int K = d->support < nc ? d->support : nc;
    if (K < 2)
        return pbd_world_fail(
            NULL, PBD_ERROR_INVALID_ARGUMENT,
            "pbd_up_piu_fit: support %d with %d coarse vertices leaves fewer than 2 per neighbourhood", d->support, nc);
    const float *crest = d->coarse_rest ? d->coarse_rest : d->coarse_frames;
    const float *drest = d->detail_rest ? d->detail_rest : d->detail_frames;
    const int m = 3 * F + K;
    int *owner = (int *)pbd_up__alloc(sizeof(int) * ((size_t)nd * 2 + (size_t)nc * 2 + 1));
    double *dscr = (double *)pbd_up__alloc(sizeof(double) * ((size_t)nc + (size_t)m * K + (size_t)m + 3 * (size_t)K));
    pbd_up__rank *cand = (pbd_up__rank *)pbd_up__alloc(sizeof(pbd_up__rank) * ((size_t)nc + 64));
    pbd_up__piu *p = (pbd_up__piu *)pbd_up__alloc(sizeof(pbd_up__piu));
    if (!owner || !dscr || !cand || !p) {
        pbd_up__free(owner);
        pbd_up__free(dscr);
        pbd_up__free(cand);
        pbd_up__free(p);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_piu_fit: out of memory");
    }
    memset(p, 0, sizeof *p);
    int *order = owner + nd, *start = order + nd, *mark = start + nc + 1;
    double *psum = dscr, *A = psum + nc, *rhs = A + (size_t)m * K, *z = rhs + m, *prior = z + K;
    float row[64];
    pbd_up__piu_owners(d, crest, drest, owner);
    /* counting sort of the detail vertices by owner (stable) */
    memset(start, 0, sizeof(int) * ((size_t)nc + 1));
    for (int i = 0; i < nd; ++i) start[owner[i] + 1]++;
    int groups = 0;
    for (int v = 0; v < nc; ++v) {
        groups += (start[v + 1] + PBD_UP__LANES - 1) / PBD_UP__LANES;
        start[v + 1] += start[v];
    }
    for (int v = 0; v < nc; ++v) mark[v] = start[v];
    for (int i = 0; i < nd; ++i) order[mark[owner[i]]++] = i;
    memset(mark, 0, sizeof(int) * (size_t)nc);
    for (int v = 0; v < nc; ++v) psum[v] = 0.0;
    r = pbd_up__piu_alloc(p, groups, K, nd, nc, d->oscillatory_modes);
    int g = 0;
    for (int v = 0; v < nc && r == PBD_OK; ++v) {
        const int *rows = order + start[v];
        int count = start[v + 1] - start[v];
        if (count == 0) continue;
        int s[64];
        pbd_up__piu_support(d, crest, v, rows, count, K, psum, mark, cand, s);
        for (int k = 0; k < count && r == PBD_OK; k += PBD_UP__LANES, ++g) {
            memcpy(p->group_support + (size_t)g * K, s, sizeof(int) * (size_t)K);
            float *w = p->weights + (size_t)g * K * PBD_UP__LANES;
            for (int l = 0; l < PBD_UP__LANES; ++l) {
                int i = k + l < count ? rows[k + l] : -1;
                p->lane_vertex[(size_t)g * PBD_UP__LANES + l] = i;
                if (i >= 0) {
                    pbd_up__piu_prior(d, crest, drest, i, s, K, prior);
                    if (pbd_up__piu_fit_row(d, i, s, K, prior, A, rhs, z, row) != 0)
                        r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                                           "pbd_up_piu_fit: the least-squares fit of detail vertex %d is singular", i);
                }
                for (int j = 0; j < K; ++j) w[(size_t)j * PBD_UP__LANES + l] = i >= 0 ? row[j] : 0.0f;
            }
        }
    }
    if (r == PBD_OK && p->coarse_count) memcpy(p->prev_coarse, crest, sizeof(float) * (size_t)nc * 3);
    if (r == PBD_OK && d->oscillatory_modes > 0) r = pbd_up__piu_fit_modes(p, d);
    pbd_up__free(owner);
    pbd_up__free(dscr);
    pbd_up__free(cand);
    if (r != PBD_OK) {
        pbd_up__piu_free(p);
        return r;
    }
    *out = p;
    return PBD_OK;
}

/* --- PIU as a pbd_up_model --- */

static pbd_result pbd_up__piu_eval(pbd_up_model *m, const float *coarse, float *detail) {
    const pbd_up__piu *p = (const pbd_up__piu *)m->impl;
    int team = pbd_up__team(m->threads, (long)p->group_count * PBD_UP__LANES * p->support * 3);
    pbd_up__piu_apply(p, coarse, detail, team, m->simd);
    return PBD_OK;
}

static void pbd_up__piu_io(pbd_up_model *m, pbd_up__io *io) {
    if (io->in) {
        m->impl = pbd_up__calloc_array(1, sizeof(pbd_up__piu));
        if (!m->impl) {
            io->bad = 2;
            return;
        }
    }
    pbd_up__piu *p = (pbd_up__piu *)m->impl;
    pbd_up__io_int(io, &p->coarse_count);
    pbd_up__io_int(io, &p->detail_count);
    pbd_up__io_int(io, &p->support);
    pbd_up__io_int(io, &p->group_count);
    pbd_up__io_int(io, &p->mode_count);
    pbd_up__io_int(io, &p->have_prev);
    pbd_up__io_float(io, &p->train_speed);
    if (io->bad) return;
    if (io->in && (p->coarse_count != m->coarse_count || p->detail_count != m->detail_count || p->support < 2 ||
                   p->support > 64 || p->group_count < 1 || p->mode_count < 0 || p->mode_count > 64)) {
        io->bad = 1;
        return;
    }
    const size_t G = (size_t)p->group_count, K = (size_t)p->support, M = (size_t)p->mode_count;
    pbd_up__io_array(io, (void **)&p->group_support, G * K, sizeof(int));
    pbd_up__io_array(io, (void **)&p->weights, G * K * PBD_UP__LANES, sizeof(float));
    pbd_up__io_array(io, (void **)&p->lane_vertex, G * PBD_UP__LANES, sizeof(int));
    pbd_up__io_array(io, (void **)&p->prev_coarse, (size_t)p->coarse_count * 3, sizeof(float));
    if (M > 0) {
        pbd_up__io_array(io, (void **)&p->modes, M * (size_t)p->detail_count * 3, sizeof(float));
        pbd_up__io_array(io, (void **)&p->omega, M, sizeof(float));
        pbd_up__io_array(io, (void **)&p->amplitude, M, sizeof(float));
        pbd_up__io_array(io, (void **)&p->level, M, sizeof(float));
        pbd_up__io_array(io, (void **)&p->phase, M, sizeof(float));
    }
}

/* After a load: indices in range, every detail vertex in exactly one lane,
   finite numbers. */
static pbd_result pbd_up__piu_prepare(pbd_up_model *m) {
    const pbd_up__piu *p = (const pbd_up__piu *)m->impl;
    const size_t G = (size_t)p->group_count, K = (size_t)p->support, M = (size_t)p->mode_count;
    for (size_t k = 0; k < G * K; ++k)
        if (p->group_support[k] < 0 || p->group_support[k] >= p->coarse_count)
            return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                                  "PIU model: support entry %zu names coarse vertex %d, outside 0..%d", k,
                                  p->group_support[k], p->coarse_count - 1);
    int *seen = (int *)pbd_up__calloc_array((size_t)p->detail_count, sizeof(int));
    if (!seen) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory checking a PIU model");
    pbd_result r = PBD_OK;
    for (size_t k = 0; k < G * PBD_UP__LANES && r == PBD_OK; ++k) {
        int v = p->lane_vertex[k];
        if (v < -1 || v >= p->detail_count || (v >= 0 && seen[v]++))
            r = pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                               "PIU model: lane %zu holds detail vertex %d, out of range or already in another lane", k,
                               v);
    }
    for (int v = 0; v < p->detail_count && r == PBD_OK; ++v)
        if (!seen[v]) r = pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "PIU model: detail vertex %d is in no lane", v);
    pbd_up__free(seen);
    if (r != PBD_OK) return r;
    if (!pbd_up__finite(p->weights, G * K * PBD_UP__LANES))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "PIU model: its weights contain NaN or infinity");
    if (!pbd_up__finite(p->prev_coarse, (size_t)p->coarse_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "PIU model: its previous coarse positions contain NaN or infinity");
    if (!(p->train_speed >= 0.0f))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "PIU model: its training speed %g must be >= 0",
                              (double)p->train_speed);
    if (M > 0 && (!pbd_up__finite(p->modes, M * (size_t)p->detail_count * 3) || !pbd_up__finite(p->omega, M) ||
                  !pbd_up__finite(p->amplitude, M) || !pbd_up__finite(p->level, M) || !pbd_up__finite(p->phase, M)))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "PIU model: its %zu oscillatory modes contain NaN or infinity", M);
    return PBD_OK;
}

static void pbd_up__piu_destroy(pbd_up_model *m) {
    pbd_up__piu_free((pbd_up__piu *)m->impl);
    m->impl = NULL;
}

static const pbd_up__methods pbd_up__piu_methods = {"piu", pbd_up__piu_eval, pbd_up__piu_io, pbd_up__piu_prepare,
                                                    pbd_up__piu_destroy};

PBD_UP_DEF pbd_up_piu_desc pbd_up_piu_desc_default(void) {
    pbd_up_piu_desc d;
    memset(&d, 0, sizeof d);
    d.support = 16;
    d.regularization = 1e-3f;
    return d;
}

PBD_UP_DEF pbd_up_piu_desc pbd_up_piu_desc_from(const pbd_up_training *t, const pbd_up_model *sub) {
    pbd_up_piu_desc d = pbd_up_piu_desc_default();
    if (!t) return d;
    d.coarse_count = t->coarse_count;
    d.detail_count = t->detail_count;
    d.frame_count = t->frame_count;
    d.coarse_frames = t->coarse;
    d.detail_frames = t->detail;
    d.coarse_rest = t->coarse_rest;
    d.detail_rest = t->detail_rest;
    d.subdivision = sub;
    return d;
}

PBD_UP_DEF pbd_result pbd_up_piu_fit(const pbd_up_piu_desc *desc, pbd_up_model **out) {
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_fit: out is NULL");
    pbd_up__piu *p = NULL;
    pbd_result r = pbd_up__piu_build(desc, &p);
    if (r != PBD_OK) return r;
    pbd_up_model *m = pbd_up__model_new(PBD_UP_PIU, desc->coarse_count, desc->detail_count);
    if (!m) {
        pbd_up__piu_free(p);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_piu_fit: out of memory");
    }
    m->impl = p;
    r = pbd_up__piu_prepare(m);
    if (r != PBD_OK) {
        pbd_up_model_destroy(m);
        return r;
    }
    m->trained = 1;
    *out = m;
    return PBD_OK;
}

static pbd_up__piu *pbd_up__piu_of(const pbd_up_model *m) {
    return m && m->method == PBD_UP_PIU && m->trained ? (pbd_up__piu *)m->impl : NULL;
}

/* The oscillators (Kavan et al. 2011, section 6): the target amplitude of
   each mode is its training amplitude times the excitation, the coarse
   mesh's RMS vertex speed over the training speed (at most 1); the
   amplitude follows the target over about one period, the phase advances
   by omega dt. */
PBD_UP_DEF pbd_result pbd_up_piu_advance(pbd_up_model *m, const float *coarse, float dt) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_advance: m is NULL");
    if (!coarse) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_advance: coarse is NULL");
    pbd_up__piu *p = pbd_up__piu_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_piu_advance: m is not a PIU model");
    if (!(dt > 0.0f) || !pbd__finite_bits(dt))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_TIME_STEP, "pbd_up_piu_advance: dt %g must be finite and > 0",
                              (double)dt);
    const size_t nc3 = (size_t)p->coarse_count * 3;
    if (!pbd_up__finite(coarse, nc3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_piu_advance: coarse contains NaN or infinity (%d vertices)", p->coarse_count);
    double s2 = 0.0;
    for (size_t k = 0; k < nc3; ++k) {
        double dv = (double)coarse[k] - p->prev_coarse[k];
        s2 += dv * dv;
    }
    double speed = p->have_prev ? sqrt(s2 / p->coarse_count) / dt : 0.0;
    double excite = p->train_speed > 0.0f ? speed / p->train_speed : 1.0;
    if (excite > 1.0) excite = 1.0;
    for (int k = 0; k < p->mode_count; ++k) {
        double w = p->omega[k], follow = 1.0 - exp(-(double)dt * (w > 0.0 ? w / (2.0 * 3.14159265358979) : 1.0));
        p->level[k] = (float)(p->level[k] + (p->amplitude[k] * excite - p->level[k]) * follow);
        p->phase[k] = (float)fmod((double)p->phase[k] + w * dt, 2.0 * 3.14159265358979);
    }
    memcpy(p->prev_coarse, coarse, sizeof(float) * nc3);
    p->have_prev = 1;
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_piu_row(const pbd_up_model *m, int detail_vertex, int *index, float *weight, int max,
                                     int *count) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_row: m is NULL");
    if (!count) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_row: count is NULL");
    const pbd_up__piu *p = pbd_up__piu_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_piu_row: m is not a PIU model");
    if (detail_vertex < 0 || detail_vertex >= p->detail_count)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE, "pbd_up_piu_row: detail_vertex %d outside 0..%d",
                              detail_vertex, p->detail_count - 1);
    if (max < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_piu_row: max %d < 0", max);
    if (max > 0 && (!index || !weight))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_piu_row: %s is NULL with max %d > 0 (pass max 0 to ask the count)",
                              !index ? "index" : "weight", max);
    for (size_t k = 0; k < (size_t)p->group_count * PBD_UP__LANES; ++k) {
        if (p->lane_vertex[k] != detail_vertex) continue;
        size_t g = k / PBD_UP__LANES, l = k % PBD_UP__LANES;
        *count = p->support;
        for (int j = 0; j < p->support && j < max; ++j) {
            index[j] = p->group_support[g * p->support + j];
            weight[j] = p->weights[(g * p->support + j) * PBD_UP__LANES + l];
        }
        return PBD_OK;
    }
    return pbd_world_fail(
        NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
        "pbd_up_piu_row: cannot happen for a prepared model"); /* cannot happen for a prepared model */
}

PBD_UP_DEF int pbd_up_piu_mode_count(const pbd_up_model *m) {
    const pbd_up__piu *p = pbd_up__piu_of(m);
    return p ? p->mode_count : 0;
}

PBD_UP_DEF pbd_result pbd_up_piu_mode(const pbd_up_model *m, int k, float *omega, float *amplitude, float *mode) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_piu_mode: m is NULL");
    const pbd_up__piu *p = pbd_up__piu_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_piu_mode: m is not a PIU model");
    if (k < 0 || k >= p->mode_count)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "pbd_up_piu_mode: mode %d, but the model has %d oscillatory modes", k, p->mode_count);
    if (omega) *omega = p->omega[k];
    if (amplitude) *amplitude = p->amplitude[k];
    if (mode) memcpy(mode, p->modes + (size_t)k * p->detail_count * 3, sizeof(float) * (size_t)p->detail_count * 3);
    return PBD_OK;
}

// ==== wpsd ==================================================================

/* --- two-scale helpers shared by wpsd and pdm --- */

/* A private copy of a subdivision model (without its own detail): the
   fitted models own their smooth operator, so they save and load alone. */
static pbd_result pbd_up__clone_subdivision(const pbd_up_model *src, pbd_up_model **out) {
    if (!pbd_up__subdiv_of(src) || !src->trained)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "subdivision is not a trained subdivision model");
    size_t n = pbd_up_model_save_size(src);
    unsigned char *buf = (unsigned char *)pbd_up__alloc(n);
    if (!buf) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory copying the subdivision model");
    pbd_result r = pbd_up_model_save(src, buf, n);
    if (r == PBD_OK) r = pbd_up_model_load(buf, n, out);
    pbd_up__free(buf);
    if (r == PBD_OK) pbd_up_subdivision_fit_detail(*out, NULL, NULL);
    return r;
}

/* A nested subdivision model inside a method's payload. */
static void pbd_up__nested_io(pbd_up__io *io, pbd_up_model **sub, int coarse_count, int detail_count) {
    if (io->bad) return;
    if (io->in) { /* its result array once it holds up: pbd_up__nested_prepare */
        *sub = pbd_up__model_alloc(PBD_UP_SUBDIVISION, coarse_count, detail_count);
        if (!*sub) {
            io->bad = 2;
            return;
        }
    }
    pbd_up__subdiv_io(*sub, io);
}

static pbd_result pbd_up__nested_prepare(pbd_up_model *sub, int coarse_count, int detail_count) {
    if (!sub || !sub->impl || sub->coarse_count != coarse_count || sub->detail_count != detail_count)
        return pbd_world_fail(
            NULL, PBD_ERROR_BAD_SNAPSHOT,
            "model: its nested subdivision is missing or does not fit %d coarse and %d detail vertices", coarse_count,
            detail_count);
    pbd_result r = pbd_up__subdiv_prepare(sub);
    if (r != PBD_OK)
        return r == PBD_ERROR_OUT_OF_MEMORY
                   ? r
                   : pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "model: its nested subdivision is invalid (%s)",
                                    pbd_result_string(r));
    if (((pbd_up__subdiv *)sub->impl)->has_detail)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "model: its nested subdivision has two-scale detail, which it must not");
    if (!sub->result && !pbd_up__model_result(sub))
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "model: out of memory for its nested subdivision");
    sub->trained = 1;
    return PBD_OK;
}

static int pbd_up__pair_cmp(const void *pa, const void *pb) {
    const int *x = (const int *)pa, *y = (const int *)pb;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : (x[1] > y[1]);
}

/* The unique edges (a < b, sorted) of a triangle list. */
static pbd_result pbd_up__mesh_edges(const int *tris, int nt, int **edges_out, int *ne_out) {
    int *e = (int *)pbd_up__alloc_array((size_t)nt * 3, 2 * sizeof(int));
    if (!e) return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory for the coarse mesh's edges");
    size_t n = 0;
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k) {
            int a = tris[3 * t + k], b = tris[3 * t + (k + 1) % 3];
            e[2 * n] = a < b ? a : b;
            e[2 * n + 1] = a < b ? b : a;
            ++n;
        }
    qsort(e, n, 2 * sizeof(int), pbd_up__pair_cmp);
    size_t u = 0;
    for (size_t k = 0; k < n; ++k)
        if (u == 0 || e[2 * k] != e[2 * u - 2] || e[2 * k + 1] != e[2 * u - 1]) {
            e[2 * u] = e[2 * k];
            e[2 * u + 1] = e[2 * k + 1];
            ++u;
        }
    *edges_out = e;
    *ne_out = (int)u;
    return PBD_OK;
}

/* Whether coarse triangles tris subdivide into the subdivision model's
   detail mesh (the coarse mesh it was made from): WPSD's and PDM's
   features come from the coarse triangles, their detail from the model,
   and a mesh one triangle short or with one flipped fitted (an audit). */
static pbd_result pbd_up__same_coarse_mesh(const pbd_up__subdiv *s, const int *tris, int nt, int nv) {
    if (((long long)nt << (2 * s->levels)) != s->triangle_count)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "coarse_triangle_count %d makes %lld triangles at %d levels; the subdivision model has "
                              "%d: not the mesh it was made from",
                              nt, (long long)nt << (2 * s->levels), s->levels, s->triangle_count);
    pbd_up__csrd S;
    int *fine = NULL, nfine = 0;
    pbd_result r = pbd_up__loop_build(tris, nt, nv, s->levels, 1, &S, &fine, &nfine);
    if (r != PBD_OK) return r;
    int same = memcmp(fine, s->triangles, sizeof(int) * 3 * (size_t)s->triangle_count) == 0;
    pbd_up__csrd_free(&S);
    pbd_up__free(fine);
    return same ? PBD_OK
                : pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                                 "coarse_triangles are not the mesh the subdivision model was made from (its "
                                 "subdivided triangles differ)");
}

/* Checks shared by the wpsd and pdm descs (their callers name the fit:
   pbd_world_fail_in). */
static pbd_result pbd_up__twoscale_check(const pbd_up_model *sub, const int *tris, int nt, int frames, int nc, int nd,
                                         const float *cf, const float *df, const float *rest, int min_frames) {
    if (!sub) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "subdivision is NULL");
    if (!tris) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "coarse_triangles is NULL");
    if (!cf) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "coarse_frames is NULL");
    if (!df) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "detail_frames is NULL");
    if (!pbd_up__subdiv_of(sub) || !sub->trained)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "subdivision is not a trained subdivision model");
    /* the frames' sizes: a model of another level or mesh would read past them */
    if (nc != sub->coarse_count || nd != sub->detail_count)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "coarse_count %d and detail_count %d (the frames' vertices) are not the subdivision "
                              "model's %d and %d",
                              nc, nd, sub->coarse_count, sub->detail_count);
    if (nt < 1) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "coarse_triangle_count %d must be >= 1", nt);
    if (frames < min_frames)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "frame_count %d must be >= %d", frames, min_frames);
    pbd_result r = pbd_up__check_triangles(tris, nt, sub->coarse_count, "coarse_triangles");
    if (r == PBD_OK) r = pbd_up__same_coarse_mesh(pbd_up__subdiv_of(sub), tris, nt, sub->coarse_count);
    if (r != PBD_OK) return r;
    size_t nc3 = (size_t)sub->coarse_count * 3, nd3 = (size_t)sub->detail_count * 3;
    if (nd3 > ((size_t)-1 / sizeof(float)) / (size_t)frames)
        return pbd_world_fail(NULL, PBD_ERROR_OVERFLOW, "%d frames of %d detail vertices are too large for memory",
                              frames, sub->detail_count);
    if (!pbd_up__finite(cf, nc3 * (size_t)frames) || !pbd_up__finite(df, nd3 * (size_t)frames) ||
        (rest && !pbd_up__finite(rest, nc3)))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "%s contain NaN or infinity (%d frames)",
                              !pbd_up__finite(cf, nc3 * (size_t)frames)   ? "coarse_frames"
                              : !pbd_up__finite(df, nd3 * (size_t)frames) ? "detail_frames"
                                                                          : "coarse_rest",
                              frames);
    return PBD_OK;
}

/* sum over row i of S of S_iv * values[v*k + j], j < k (the subdivision
   weights carrying per-feature-vertex values to detail vertex i). */
static PBD_HD void pbd_up__stencil_combine(const pbd_up__sparse *S, int i, const float *values, int k, float *out) {
    for (int j = 0; j < k; ++j) out[j] = 0.0f;
    for (int e = S->start[i]; e < S->start[i + 1]; ++e) {
        const float w = S->val[e], *v = values + (size_t)S->col[e] * k;
        for (int j = 0; j < k; ++j) out[j] += w * v[j];
    }
}

/* --- WPSD --- */

typedef struct pbd_up__wpsd {
    pbd_up_model *sub; /* the smooth operator and frames (a subdivision model) */
    int K, poses, edge_count;
    int *edges;       /* edge_count * 2 */
    float *rest_len;  /* edge_count */
    int *vert_edges;  /* coarse_count * K: the K closest edges of each feature vertex */
    float *vert_w;    /* coarse_count * K: their fast-decaying weights */
    float *pose_q;    /* coarse_count * poses * K: each pose's local pose vector */
    float *omega;     /* coarse_count * poses * poses: omega_v[i][j] */
    float *disp;      /* poses * detail_count * 3: displacements in the local frames */
    int *pose_frame;  /* poses: training frame of each pose */
    float *sel_error; /* poses: RMS error after each selection step */
    /* scratch (derived) */
    float *strain; /* edge_count */
    float *wc;     /* coarse_count * poses */
} pbd_up__wpsd;

static void pbd_up__wpsd_free(pbd_up__wpsd *p) {
    if (!p) return;
    pbd_up_model_destroy(p->sub);
    pbd_up__free(p->edges);
    pbd_up__free(p->rest_len);
    pbd_up__free(p->vert_edges);
    pbd_up__free(p->vert_w);
    pbd_up__free(p->pose_q);
    pbd_up__free(p->omega);
    pbd_up__free(p->disp);
    pbd_up__free(p->pose_frame);
    pbd_up__free(p->sel_error);
    pbd_up__free(p->strain);
    pbd_up__free(p->wc);
    pbd_up__free(p);
}

/* The strain of edge e at x (`stride` floats a vertex: 3, or a world's
   float4 particles on the device). */
static PBD_HD float pbd_up__edge_strain(const int *edges, const float *rest_len, const float *x, int stride, int e) {
    const float *a = x + (size_t)stride * (size_t)edges[2 * e], *b = x + (size_t)stride * (size_t)edges[2 * e + 1];
    float d[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    return (sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) - rest_len[e]) / rest_len[e];
}
static void pbd_up__edge_strains(const int *edges, const float *rest_len, int ne, const float *x, float *strain) {
    for (int e = 0; e < ne; ++e) strain[e] = pbd_up__edge_strain(edges, rest_len, x, 3, e);
}

/* The local pose vector of feature vertex v (survey 5.2.1). */
static PBD_HD void pbd_up__wpsd_q(const pbd_up__wpsd *p, int v, const float *strain, float *q) {
    for (int k = 0; k < p->K; ++k) q[k] = p->vert_w[(size_t)v * p->K + k] * strain[p->vert_edges[(size_t)v * p->K + k]];
}

/* Pose weights at feature vertex v for the pose vector q: the RBF sum with
   phi(r) = r. */
static PBD_HD void pbd_up__wpsd_vertex_weights(const pbd_up__wpsd *p, int v, const float *q, float *w) {
    const int P = p->poses, K = p->K;
    if (P == 1) {
        w[0] = 1.0f;
        return;
    }
    float r[256];
    for (int i = 0; i < P; ++i) {
        const float *qi = p->pose_q + ((size_t)v * P + i) * K;
        float s = 0.0f;
        for (int k = 0; k < K; ++k) s += (q[k] - qi[k]) * (q[k] - qi[k]);
        r[i] = sqrtf(s);
    }
    const float *om = p->omega + (size_t)v * P * P;
    for (int j = 0; j < P; ++j) {
        float s = 0.0f;
        for (int i = 0; i < P; ++i) s += om[(size_t)i * P + j] * r[i];
        w[j] = s;
    }
}

/* The pose weights of feature vertex v from the edges' strains. */
static PBD_HD void pbd_up__wpsd_coarse_one(const pbd_up__wpsd *p, int v, float *wc) {
    float q[64];
    pbd_up__wpsd_q(p, v, p->strain, q);
    pbd_up__wpsd_vertex_weights(p, v, q, wc + (size_t)v * p->poses);
}
/* Detail vertex i: x0 + R sum_j w_j d_j, the coarse weights interpolated
   by the stencil (s: the detail mesh's smooth positions and frames). */
static PBD_HD void pbd_up__wpsd_detail(const pbd_up__wpsd *p, const pbd_up__subdiv *s, int nd, int i, float *out) {
    const int P = p->poses;
    float w[256], d[3] = {0.0f, 0.0f, 0.0f};
    pbd_up__stencil_combine(&s->S, i, p->wc, P, w);
    for (int j = 0; j < P; ++j) {
        const float *dj = p->disp + ((size_t)j * nd + i) * 3;
        d[0] += w[j] * dj[0];
        d[1] += w[j] * dj[1];
        d[2] += w[j] * dj[2];
    }
    const float *f = s->frames + 9 * (size_t)i, *x0 = s->x0 + 3 * (size_t)i;
    for (int c = 0; c < 3; ++c) out[3 * (size_t)i + c] = x0[c] + (d[0] * f[c] + d[1] * f[3 + c] + d[2] * f[6 + c]);
}

/* Weights at all feature vertices (coarse_count * poses) of coarse u. */
static void pbd_up__wpsd_coarse_weights(pbd_up__wpsd *p, const float *u, float *wc, int team) {
    const int nc = p->sub->coarse_count;
    pbd_up__edge_strains(p->edges, p->rest_len, p->edge_count, u, p->strain);
    (void)team;
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team) if(team > 1))
    for (int v = 0; v < nc; ++v) pbd_up__wpsd_coarse_one(p, v, wc);
}

static pbd_result pbd_up__wpsd_eval(pbd_up_model *m, const float *u, float *out) {
    pbd_up__wpsd *p = (pbd_up__wpsd *)m->impl;
    pbd_up__subdiv *s = (pbd_up__subdiv *)p->sub->impl;
    const int nd = m->detail_count, P = p->poses;
    p->sub->simd = m->simd;
    p->sub->threads = m->threads;
    int team = pbd_up__team(m->threads, (long)nd * (P * 8 + 24));
    pbd_up__wpsd_coarse_weights(p, u, p->wc, team);
    pbd_up__subdiv_smooth(p->sub, u, s->x0, s->frames);
    (void)team;
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team) if(team > 1))
    for (int i = 0; i < nd; ++i) pbd_up__wpsd_detail(p, s, nd, i, out);
    return PBD_OK;
}

static void pbd_up__wpsd_io(pbd_up_model *m, pbd_up__io *io) {
    if (io->in) {
        m->impl = pbd_up__calloc_array(1, sizeof(pbd_up__wpsd));
        if (!m->impl) {
            io->bad = 2;
            return;
        }
    }
    pbd_up__wpsd *p = (pbd_up__wpsd *)m->impl;
    pbd_up__nested_io(io, &p->sub, m->coarse_count, m->detail_count);
    pbd_up__io_int(io, &p->K);
    pbd_up__io_int(io, &p->poses);
    pbd_up__io_int(io, &p->edge_count);
    if (io->bad) return;
    if (io->in && (p->K < 1 || p->K > 64 || p->poses < 1 || p->poses > 256 || p->edge_count < p->K)) {
        io->bad = 1;
        return;
    }
    const size_t nc = (size_t)m->coarse_count, K = (size_t)p->K, P = (size_t)p->poses;
    pbd_up__io_array(io, (void **)&p->edges, (size_t)p->edge_count * 2, sizeof(int));
    pbd_up__io_array(io, (void **)&p->rest_len, (size_t)p->edge_count, sizeof(float));
    pbd_up__io_array(io, (void **)&p->vert_edges, nc * K, sizeof(int));
    pbd_up__io_array(io, (void **)&p->vert_w, nc * K, sizeof(float));
    pbd_up__io_array(io, (void **)&p->pose_q, nc * P * K, sizeof(float));
    pbd_up__io_array(io, (void **)&p->omega, nc * P * P, sizeof(float));
    pbd_up__io_array(io, (void **)&p->disp, P * (size_t)m->detail_count * 3, sizeof(float));
    pbd_up__io_array(io, (void **)&p->pose_frame, P, sizeof(int));
    pbd_up__io_array(io, (void **)&p->sel_error, P, sizeof(float));
}

static pbd_result pbd_up__wpsd_prepare(pbd_up_model *m) {
    pbd_up__wpsd *p = (pbd_up__wpsd *)m->impl;
    pbd_result r = pbd_up__nested_prepare(p->sub, m->coarse_count, m->detail_count);
    if (r != PBD_OK) return r;
    const size_t nc = (size_t)m->coarse_count, K = (size_t)p->K, P = (size_t)p->poses;
    for (int e = 0; e < p->edge_count; ++e)
        if (p->edges[2 * e] < 0 || p->edges[2 * e] >= m->coarse_count || p->edges[2 * e + 1] < 0 ||
            p->edges[2 * e + 1] >= m->coarse_count || !(p->rest_len[e] > 0.0f) || !pbd__finite_bits(p->rest_len[e]))
            return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                                  "WPSD model: edge %d (%d, %d) is out of range or has rest length %g", e,
                                  p->edges[2 * e], p->edges[2 * e + 1], (double)p->rest_len[e]);
    for (size_t k = 0; k < nc * K; ++k)
        if (p->vert_edges[k] < 0 || p->vert_edges[k] >= p->edge_count)
            return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                                  "WPSD model: neighbourhood entry %zu names edge %d, outside 0..%d", k,
                                  p->vert_edges[k], p->edge_count - 1);
    if (!pbd_up__finite(p->vert_w, nc * K) || !pbd_up__finite(p->pose_q, nc * P * K) ||
        !pbd_up__finite(p->omega, nc * P * P) || !pbd_up__finite(p->disp, P * (size_t)m->detail_count * 3) ||
        !pbd_up__finite(p->sel_error, P))
        return pbd_world_fail(
            NULL, PBD_ERROR_BAD_SNAPSHOT,
            "WPSD model: its weights, poses or displacements contain NaN or infinity (%zu coarse vertices)", nc);
    pbd_up__free(p->strain);
    pbd_up__free(p->wc);
    p->strain = (float *)pbd_up__alloc_array((size_t)p->edge_count, sizeof(float));
    p->wc = (float *)pbd_up__alloc_array(nc * P, sizeof(float));
    if (!p->strain || !p->wc)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory preparing a WPSD model");
    return PBD_OK;
}

static void pbd_up__wpsd_destroy(pbd_up_model *m) {
    pbd_up__wpsd_free((pbd_up__wpsd *)m->impl);
    m->impl = NULL;
}

static const pbd_up__methods pbd_up__wpsd_methods = {"wpsd", pbd_up__wpsd_eval, pbd_up__wpsd_io, pbd_up__wpsd_prepare,
                                                     pbd_up__wpsd_destroy};

PBD_UP_DEF pbd_up_wpsd_desc pbd_up_wpsd_desc_default(void) {
    pbd_up_wpsd_desc d;
    memset(&d, 0, sizeof d);
    d.edges_per_vertex = 16;
    d.max_poses = 32;
    return d;
}

/* The fields WPSD's and PDM's descs share (the same names), from training
   set t (may be NULL) and the subdivision model sub. */
#define PBD_UP__DESC_FROM_TRAINING(d, t, sub)                       \
    do {                                                            \
        (d).subdivision = (sub);                                    \
        if (t) {                                                    \
            (d).coarse_triangles = (t)->coarse_triangles;           \
            (d).coarse_triangle_count = (t)->coarse_triangle_count; \
            (d).frame_count = (t)->frame_count;                     \
            (d).coarse_count = (t)->coarse_count;                   \
            (d).detail_count = (t)->detail_count;                   \
            (d).coarse_frames = (t)->coarse;                        \
            (d).detail_frames = (t)->detail;                        \
            (d).coarse_rest = (t)->coarse_rest;                     \
        }                                                           \
    } while (0)
PBD_UP_DEF pbd_up_wpsd_desc pbd_up_wpsd_desc_from(const pbd_up_training *t, const pbd_up_model *sub) {
    pbd_up_wpsd_desc d = pbd_up_wpsd_desc_default();
    PBD_UP__DESC_FROM_TRAINING(d, t, sub);
    return d;
}

/* The K edges closest to each feature vertex (rest midpoints) and their
   weights exp(-(d / mean edge length)^2). */
static void pbd_up__wpsd_neighbourhoods(pbd_up__wpsd *p, const float *rest, int nc) {
    const int K = p->K;
    double mean = 0.0;
    for (int e = 0; e < p->edge_count; ++e) mean += p->rest_len[e];
    mean /= p->edge_count;
    for (int v = 0; v < nc; ++v) {
        double best[64];
        int *idx = p->vert_edges + (size_t)v * K, n = 0;
        for (int e = 0; e < p->edge_count; ++e) {
            const float *a = rest + 3 * (size_t)p->edges[2 * e], *b = rest + 3 * (size_t)p->edges[2 * e + 1];
            float mid[3] = {0.5f * (a[0] + b[0]), 0.5f * (a[1] + b[1]), 0.5f * (a[2] + b[2])};
            double d = pbd_up__dist2(mid, rest + 3 * (size_t)v);
            if (n == K && d >= best[K - 1]) continue;
            int k = n < K ? n++ : K - 1;
            while (k > 0 && best[k - 1] > d) {
                best[k] = best[k - 1];
                idx[k] = idx[k - 1];
                --k;
            }
            best[k] = d;
            idx[k] = e;
        }
        for (int k = 0; k < K; ++k) p->vert_w[(size_t)v * K + k] = (float)exp(-best[k] / (mean * mean));
    }
}

/* omega_v = Phi_v^+ for the current poses: the symmetric distance matrix's
   pseudo-inverse through its eigen-decomposition (Phi_v is invertible for
   distinct poses; coincident ones are dropped by the cutoff). */
static void pbd_up__wpsd_rbf(pbd_up__wpsd *p, int nc, double *scratch) {
    const int P = p->poses, K = p->K;
    double *A = scratch, *V = A + (size_t)P * P, *ev = V + (size_t)P * P;
    for (int v = 0; v < nc; ++v) {
        const float *q = p->pose_q + (size_t)v * P * K;
        for (int i = 0; i < P; ++i)
            for (int j = 0; j < P; ++j) {
                double s = 0.0;
                for (int k = 0; k < K; ++k) {
                    double d = (double)q[(size_t)i * K + k] - q[(size_t)j * K + k];
                    s += d * d;
                }
                A[i * P + j] = sqrt(s);
            }
        pbd_up__sym_eigen(P, A, ev, V);
        double big = 0.0;
        for (int i = 0; i < P; ++i) big = fmax(big, fabs(ev[i]));
        float *om = p->omega + (size_t)v * P * P;
        for (int i = 0; i < P; ++i)
            for (int j = 0; j < P; ++j) {
                double s = 0.0;
                for (int k = 0; k < P; ++k)
                    if (fabs(ev[k]) > PBD_UP__PINV_EV_REL_MIN * big) s += V[i * P + k] * V[j * P + k] / ev[k];
                om[(size_t)i * P + j] = (float)s;
            }
    }
}

/* Greedy pose selection and the final model (survey 5.2.1, Zurdo et al.). */
static pbd_result pbd_up__wpsd_build(const pbd_up_wpsd_desc *d, pbd_up__wpsd *p) {
    pbd_up_model *sub = p->sub;
    pbd_up__subdiv *s = (pbd_up__subdiv *)sub->impl;
    const int nc = sub->coarse_count, nd = sub->detail_count, F = d->frame_count, K = p->K;
    const int Pmax = d->max_poses < F ? d->max_poses : F;
    const size_t nc3 = (size_t)nc * 3, nd3 = (size_t)nd * 3;
    const float *rest = d->coarse_rest ? d->coarse_rest : d->coarse_frames;
    pbd_result r = pbd_up__mesh_edges(d->coarse_triangles, d->coarse_triangle_count, &p->edges, &p->edge_count);
    if (r != PBD_OK) return r;
    if (p->edge_count < K)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_wpsd_fit: the coarse mesh has %d edges, fewer than edges_per_vertex %d",
                              p->edge_count, K);
    p->rest_len = (float *)pbd_up__alloc_array((size_t)p->edge_count, sizeof(float));
    p->vert_edges = (int *)pbd_up__alloc_array((size_t)nc * K, sizeof(int));
    p->vert_w = (float *)pbd_up__alloc_array((size_t)nc * K, sizeof(float));
    p->pose_q = (float *)pbd_up__alloc_array((size_t)nc * Pmax * K, sizeof(float));
    p->omega = (float *)pbd_up__alloc_array((size_t)nc * Pmax * Pmax, sizeof(float));
    p->disp = (float *)pbd_up__alloc_array((size_t)Pmax * nd3, sizeof(float));
    p->pose_frame = (int *)pbd_up__alloc_array((size_t)Pmax, sizeof(int));
    p->sel_error = (float *)pbd_up__alloc_array((size_t)Pmax, sizeof(float));
    p->strain = (float *)pbd_up__alloc_array((size_t)p->edge_count, sizeof(float));
    p->wc = (float *)pbd_up__alloc_array((size_t)nc * Pmax, sizeof(float));
    float *Q = (float *)pbd_up__alloc_array((size_t)F * nc * K, sizeof(float)); /* every frame's pose vectors */
    float *D = (float *)pbd_up__alloc_array((size_t)F * nd3, sizeof(float));    /* local displacements */
    double *err = (double *)pbd_up__alloc_array((size_t)F, sizeof(double));
    double *scratch = (double *)pbd_up__alloc_array((size_t)Pmax * Pmax * 2 + Pmax, sizeof(double));
    if (!p->rest_len || !p->vert_edges || !p->vert_w || !p->pose_q || !p->omega || !p->disp || !p->pose_frame ||
        !p->sel_error || !p->strain || !p->wc || !Q || !D || !err || !scratch) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wpsd_fit: out of memory");
        goto done;
    }
    for (int e = 0; e < p->edge_count; ++e) {
        const float *a = rest + 3 * (size_t)p->edges[2 * e], *b = rest + 3 * (size_t)p->edges[2 * e + 1];
        p->rest_len[e] = (float)sqrt(pbd_up__dist2(a, b));
        if (!(p->rest_len[e] > 0.0f)) {
            r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE, "pbd_up_wpsd_fit: coarse edge (%d, %d) has zero rest length",
                               p->edges[2 * e], p->edges[2 * e + 1]);
            goto done;
        }
    }
    {
        pbd_up__wpsd_neighbourhoods(p, rest, nc);
        /* per frame: pose vectors and the detail in the smooth mesh's frames */
        for (int f = 0; f < F; ++f) {
            const float *u = d->coarse_frames + (size_t)f * nc3, *X = d->detail_frames + (size_t)f * nd3;
            pbd_up__edge_strains(p->edges, p->rest_len, p->edge_count, u, p->strain);
            for (int v = 0; v < nc; ++v) pbd_up__wpsd_q(p, v, p->strain, Q + ((size_t)f * nc + v) * K);
            pbd_up__subdiv_smooth(sub, u, s->x0, s->frames);
            for (int i = 0; i < nd; ++i) {
                const float *fr = s->frames + 9 * (size_t)i, *x0 = s->x0 + 3 * (size_t)i, *x = X + 3 * (size_t)i;
                float e3[3] = {x[0] - x0[0], x[1] - x0[1], x[2] - x0[2]};
                for (int a = 0; a < 3; ++a)
                    D[(size_t)f * nd3 + 3 * (size_t)i + a] =
                        e3[0] * fr[3 * a] + e3[1] * fr[3 * a + 1] + e3[2] * fr[3 * a + 2];
            }
        }
        /* the first pose: the frame with the most detail */
        int first = 0;
        double most = -1.0;
        for (int f = 0; f < F; ++f) {
            double sum = 0.0;
            for (size_t k = 0; k < nd3; ++k) sum += (double)D[(size_t)f * nd3 + k] * D[(size_t)f * nd3 + k];
            if (sum > most) {
                most = sum;
                first = f;
            }
        }
        int next = first;
        p->poses = 0;
        for (;;) {
            /* add the pose: omega is laid out for the new count */
            int P = ++p->poses;
            p->pose_frame[P - 1] = next;
            for (int v = 0; v < nc; ++v)
                for (int i = 0; i < P; ++i)
                    memcpy(p->pose_q + ((size_t)v * P + i) * K, Q + ((size_t)p->pose_frame[i] * nc + v) * K,
                           sizeof(float) * (size_t)K);
            for (int j = 0; j < P; ++j)
                memcpy(p->disp + (size_t)j * nd3, D + (size_t)p->pose_frame[j] * nd3, sizeof(float) * nd3);
            pbd_up__wpsd_rbf(p, nc, scratch);
            /* synthesise every training frame: in the local frames the error
               is |D_f - sum_j w_j d_j| (R is orthonormal) */
            double total = 0.0;
            for (int f = 0; f < F; ++f) {
                float q[64], w[256];
                for (int v = 0; v < nc; ++v) {
                    for (int k = 0; k < K; ++k) q[k] = Q[((size_t)f * nc + v) * K + k];
                    pbd_up__wpsd_vertex_weights(p, v, q, p->wc + (size_t)v * P);
                }
                double e2 = 0.0;
                for (int i = 0; i < nd; ++i) {
                    pbd_up__stencil_combine(&s->S, i, p->wc, P, w);
                    for (int a = 0; a < 3; ++a) {
                        double x = D[(size_t)f * nd3 + 3 * (size_t)i + a];
                        for (int j = 0; j < P; ++j) x -= (double)w[j] * p->disp[(size_t)j * nd3 + 3 * (size_t)i + a];
                        e2 += x * x;
                    }
                }
                err[f] = e2 / nd;
                total += e2 / nd;
            }
            p->sel_error[P - 1] = (float)sqrt(total / F);
            if (p->sel_error[P - 1] <= d->error_threshold || P == Pmax) break;
            next = -1;
            for (int f = 0; f < F; ++f) {
                int used = 0;
                for (int j = 0; j < P; ++j) used |= p->pose_frame[j] == f;
                if (!used && (next < 0 || err[f] > err[next])) next = f;
            }
            if (next < 0) break;
        }
    }
done:
    pbd_up__free(Q);
    pbd_up__free(D);
    pbd_up__free(err);
    pbd_up__free(scratch);
    return r;
}

PBD_UP_DEF pbd_result pbd_up_wpsd_fit(const pbd_up_wpsd_desc *d, pbd_up_model **out) {
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_fit: d is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_fit: out is NULL");
    pbd_result r =
        pbd_up__twoscale_check(d->subdivision, d->coarse_triangles, d->coarse_triangle_count, d->frame_count,
                               d->coarse_count, d->detail_count, d->coarse_frames, d->detail_frames, d->coarse_rest, 1);
    if (r != PBD_OK) return pbd_world_fail_in(NULL, "pbd_up_wpsd_fit", r);
    if (d->edges_per_vertex < 1 || d->edges_per_vertex > 64 || d->max_poses < 1 || d->max_poses > 256 ||
        !(d->error_threshold >= 0.0f) || !pbd__finite_bits(d->error_threshold))
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_wpsd_fit: edges_per_vertex %d (1..64), max_poses %d (1..256) or error_threshold "
                              "%g (finite, >= 0) is out of range",
                              d->edges_per_vertex, d->max_poses, (double)d->error_threshold);
    pbd_up_model *m = pbd_up__model_new(PBD_UP_WPSD, d->subdivision->coarse_count, d->subdivision->detail_count);
    pbd_up__wpsd *p = (pbd_up__wpsd *)pbd_up__calloc_array(1, sizeof(pbd_up__wpsd));
    if (!m || !p) {
        pbd_up__free(m);
        pbd_up__free(p);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_wpsd_fit: out of memory");
    }
    m->impl = p;
    p->K = d->edges_per_vertex;
    r = pbd_up__clone_subdivision(d->subdivision, &p->sub);
    if (r == PBD_OK) r = pbd_up__wpsd_build(d, p);
    if (r == PBD_OK) r = pbd_up__wpsd_prepare(m);
    if (r != PBD_OK) {
        pbd_up_model_destroy(m);
        return r;
    }
    m->trained = 1;
    *out = m;
    return PBD_OK;
}

static pbd_up__wpsd *pbd_up__wpsd_of(const pbd_up_model *m) {
    return m && m->method == PBD_UP_WPSD && m->trained ? (pbd_up__wpsd *)m->impl : NULL;
}

PBD_UP_DEF pbd_result pbd_up_wpsd_selection(const pbd_up_model *m, int *frames, float *errors, int max, int *count) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_selection: m is NULL");
    if (!count) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_selection: count is NULL");
    const pbd_up__wpsd *p = pbd_up__wpsd_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wpsd_selection: m is not a WPSD model");
    if (max < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wpsd_selection: max %d < 0", max);
    if (max > 0 && !frames && !errors)
        return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT,
                              "pbd_up_wpsd_selection: frames and errors are both NULL with max %d > 0 (pass max 0 "
                              "to ask the count)",
                              max);
    for (int j = 0; j < p->poses && j < max; ++j) {
        if (frames) frames[j] = p->pose_frame[j];
        if (errors) errors[j] = p->sel_error[j];
    }
    *count = p->poses;
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_wpsd_weights(pbd_up_model *m, const float *coarse, float *coarse_weights,
                                          float *detail_weights) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_weights: m is NULL");
    if (!coarse) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_weights: coarse_positions is NULL");
    pbd_up__wpsd *p = pbd_up__wpsd_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_wpsd_weights: m is not a WPSD model");
    if (!pbd_up__finite(coarse, (size_t)m->coarse_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_wpsd_weights: coarse_positions contain NaN or infinity (%d vertices)",
                              m->coarse_count);
    pbd_up__wpsd_coarse_weights(p, coarse, p->wc, 1);
    if (coarse_weights) memcpy(coarse_weights, p->wc, sizeof(float) * (size_t)m->coarse_count * p->poses);
    if (detail_weights)
        for (int i = 0; i < m->detail_count; ++i)
            pbd_up__stencil_combine(&((pbd_up__subdiv *)p->sub->impl)->S, i, p->wc, p->poses,
                                    detail_weights + (size_t)i * p->poses);
    return PBD_OK;
}

// ==== pdm ===================================================================

typedef struct pbd_up__pdm {
    pbd_up_model *sub;     /* the smooth operator and frames of the detail mesh */
    pbd_up_model *feature; /* level-0 subdivision of the coarse mesh: its local frames */
    int edge_count;
    int *edges;         /* edge_count * 2 */
    float *rest_len;    /* edge_count */
    float *rest_offset; /* coarse_count * 3: the rest offsets in the rest frames */
    float mean_edge;
    float pca[15]; /* mean (5), axis 1 (5), axis 2 (5) */
    float *coef;   /* detail_count * 6 */
    /* derived */
    int *nb_start, *nb;   /* feature-vertex neighbours (CSR, from edges) */
    float *fx0, *fframes; /* feature mesh positions and frames (scratch) */
    float *uvc;           /* coarse_count * 2 (scratch) */
} pbd_up__pdm;

static void pbd_up__pdm_free(pbd_up__pdm *p) {
    if (!p) return;
    pbd_up_model_destroy(p->sub);
    pbd_up_model_destroy(p->feature);
    pbd_up__free(p->edges);
    pbd_up__free(p->rest_len);
    pbd_up__free(p->rest_offset);
    pbd_up__free(p->coef);
    pbd_up__free(p->nb_start);
    pbd_up__free(p->nb);
    pbd_up__free(p->fx0);
    pbd_up__free(p->fframes);
    pbd_up__free(p->uvc);
    pbd_up__free(p);
}

/* The neighbour lists of the feature vertices (from the unique edges). */
static pbd_result pbd_up__pdm_neighbours(pbd_up__pdm *p, int nc) {
    pbd_up__free(p->nb_start);
    pbd_up__free(p->nb);
    p->nb_start = (int *)pbd_up__calloc_array((size_t)nc + 1, sizeof(int));
    p->nb = (int *)pbd_up__alloc_array((size_t)p->edge_count * 2, sizeof(int));
    int *fill = (int *)pbd_up__calloc_array((size_t)nc, sizeof(int));
    if (!p->nb_start || !p->nb || !fill) {
        pbd_up__free(fill);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory preparing a PDM model");
    }
    for (int e = 0; e < 2 * p->edge_count; ++e) p->nb_start[p->edges[e] + 1]++;
    for (int v = 0; v < nc; ++v) p->nb_start[v + 1] += p->nb_start[v];
    for (int e = 0; e < p->edge_count; ++e) {
        int a = p->edges[2 * e], b = p->edges[2 * e + 1];
        p->nb[p->nb_start[a] + fill[a]++] = e;
        p->nb[p->nb_start[b] + fill[b]++] = e;
    }
    pbd_up__free(fill);
    return PBD_OK;
}

/* The local offset of feature vertex v (its position minus the mean of
   its neighbours) in its frame f (t, b, n). */
static PBD_HD void pbd_up__pdm_offset(const pbd_up__pdm *p, const float *x, const float *f, int v, float *o) {
    double mean[3] = {0.0, 0.0, 0.0};
    int n = p->nb_start[v + 1] - p->nb_start[v];
    for (int k = p->nb_start[v]; k < p->nb_start[v + 1]; ++k) {
        int e = p->nb[k], w = p->edges[2 * e] == v ? p->edges[2 * e + 1] : p->edges[2 * e];
        for (int c = 0; c < 3; ++c) mean[c] += x[3 * (size_t)w + c];
    }
    float d[3];
    for (int c = 0; c < 3; ++c) d[c] = n ? (float)(x[3 * (size_t)v + c] - mean[c] / n) : 0.0f;
    for (int a = 0; a < 3; ++a) o[a] = d[0] * f[3 * a] + d[1] * f[3 * a + 1] + d[2] * f[3 * a + 2];
}

/* The 5D feature of vertex v (survey 5.2.2): offset change / mean edge
   length (3) and the in-plane strain along t and b (2). */
static PBD_HD void pbd_up__pdm_feature(const pbd_up__pdm *p, const float *x, const float *frames, int v, double *phi) {
    const float *f = frames + 9 * (size_t)v;
    float o[3];
    pbd_up__pdm_offset(p, x, f, v, o);
    for (int a = 0; a < 3; ++a) phi[a] = ((double)o[a] - p->rest_offset[3 * (size_t)v + a]) / p->mean_edge;
    double st = 0.0, sb = 0.0, wt = 0.0, wb = 0.0;
    for (int k = p->nb_start[v]; k < p->nb_start[v + 1]; ++k) {
        int e = p->nb[k];
        const float *a = x + 3 * (size_t)p->edges[2 * e], *b = x + 3 * (size_t)p->edges[2 * e + 1];
        double d[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
        double len = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        if (!(len > 0.0)) continue;
        double ct = (d[0] * f[0] + d[1] * f[1] + d[2] * f[2]) / len,
               cb = (d[0] * f[3] + d[1] * f[4] + d[2] * f[5]) / len;
        double strain = len / p->rest_len[e] - 1.0;
        st += ct * ct * strain;
        wt += ct * ct;
        sb += cb * cb * strain;
        wb += cb * cb;
    }
    phi[3] = wt > 0.0 ? st / wt : 0.0;
    phi[4] = wb > 0.0 ? sb / wb : 0.0;
}

/* (u1, u2) at feature vertex v: its feature projected on the two principal
   axes (x, frames: the feature mesh's positions and frames). */
static PBD_HD void pbd_up__pdm_uv(const pbd_up__pdm *p, const float *x, const float *frames, int v, float *uvc) {
    double phi[5], a = 0.0, b = 0.0;
    pbd_up__pdm_feature(p, x, frames, v, phi);
    for (int k = 0; k < 5; ++k) {
        a += (phi[k] - p->pca[k]) * p->pca[5 + k];
        b += (phi[k] - p->pca[k]) * p->pca[10 + k];
    }
    uvc[2 * (size_t)v] = (float)a;
    uvc[2 * (size_t)v + 1] = (float)b;
}

/* (u1, u2) at every feature vertex: the feature projected on the two
   principal axes. */
static void pbd_up__pdm_coarse_uv(pbd_up__pdm *p, const float *u, float *uvc, int team) {
    const int nc = p->feature->coarse_count;
    pbd_up__subdiv_smooth(p->feature, u, p->fx0, p->fframes); /* level 0: x0 = u and the frames */
    (void)team;
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team) if(team > 1))
    for (int v = 0; v < nc; ++v) pbd_up__pdm_uv(p, p->fx0, p->fframes, v, uvc);
}

/* The biquadratic basis (Ma et al.): u1^2, u2^2, u1 u2, u1, u2, 1. */
static void pbd_up__pdm_basis(const float *uv, double *b) {
    double a = uv[0], c = uv[1];
    b[0] = a * a;
    b[1] = c * c;
    b[2] = a * c;
    b[3] = a;
    b[4] = c;
    b[5] = 1.0;
}

static PBD_HD float pbd_up__pdm_height(const float *c, const float *uv) {
    float a = uv[0], b = uv[1];
    return c[0] * (a * a) + c[1] * (b * b) + c[2] * (a * b) + c[3] * a + c[4] * b + c[5];
}
/* Detail vertex i: x0 + h(u1, u2) n, the coarse (u1, u2) interpolated by
   the stencil (s: the detail mesh's smooth positions and frames). */
static PBD_HD void pbd_up__pdm_detail(const pbd_up__pdm *p, const pbd_up__subdiv *s, int i, float *out) {
    float uv[2];
    pbd_up__stencil_combine(&s->S, i, p->uvc, 2, uv);
    float h = pbd_up__pdm_height(p->coef + 6 * (size_t)i, uv);
    const float *n = s->frames + 9 * (size_t)i + 6, *x0 = s->x0 + 3 * (size_t)i;
    for (int c = 0; c < 3; ++c) out[3 * (size_t)i + c] = x0[c] + h * n[c];
}

static pbd_result pbd_up__pdm_eval(pbd_up_model *m, const float *u, float *out) {
    pbd_up__pdm *p = (pbd_up__pdm *)m->impl;
    pbd_up__subdiv *s = (pbd_up__subdiv *)p->sub->impl;
    const int nd = m->detail_count;
    p->sub->simd = p->feature->simd = m->simd;
    p->sub->threads = p->feature->threads = m->threads;
    int team = pbd_up__team(m->threads, (long)nd * 40);
    pbd_up__pdm_coarse_uv(p, u, p->uvc, team);
    pbd_up__subdiv_smooth(p->sub, u, s->x0, s->frames);
    (void)team;
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team) if(team > 1))
    for (int i = 0; i < nd; ++i) pbd_up__pdm_detail(p, s, i, out);
    return PBD_OK;
}

static void pbd_up__pdm_io(pbd_up_model *m, pbd_up__io *io) {
    if (io->in) {
        m->impl = pbd_up__calloc_array(1, sizeof(pbd_up__pdm));
        if (!m->impl) {
            io->bad = 2;
            return;
        }
    }
    pbd_up__pdm *p = (pbd_up__pdm *)m->impl;
    pbd_up__nested_io(io, &p->sub, m->coarse_count, m->detail_count);
    pbd_up__nested_io(io, &p->feature, m->coarse_count, m->coarse_count);
    pbd_up__io_int(io, &p->edge_count);
    pbd_up__io_float(io, &p->mean_edge);
    pbd_up__io_bytes(io, p->pca, sizeof p->pca);
    if (io->bad) return;
    if (io->in && p->edge_count < 1) {
        io->bad = 1;
        return;
    }
    pbd_up__io_array(io, (void **)&p->edges, (size_t)p->edge_count * 2, sizeof(int));
    pbd_up__io_array(io, (void **)&p->rest_len, (size_t)p->edge_count, sizeof(float));
    pbd_up__io_array(io, (void **)&p->rest_offset, (size_t)m->coarse_count * 3, sizeof(float));
    pbd_up__io_array(io, (void **)&p->coef, (size_t)m->detail_count * 6, sizeof(float));
}

static pbd_result pbd_up__pdm_prepare(pbd_up_model *m) {
    pbd_up__pdm *p = (pbd_up__pdm *)m->impl;
    pbd_result r = pbd_up__nested_prepare(p->sub, m->coarse_count, m->detail_count);
    if (r == PBD_OK) r = pbd_up__nested_prepare(p->feature, m->coarse_count, m->coarse_count);
    if (r != PBD_OK) return r;
    if (pbd_up_subdivision_levels(p->feature) != 0)
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "PDM model: its feature subdivision has %d levels, not 0",
                              pbd_up_subdivision_levels(p->feature));
    for (int e = 0; e < p->edge_count; ++e)
        if (p->edges[2 * e] < 0 || p->edges[2 * e] >= m->coarse_count || p->edges[2 * e + 1] < 0 ||
            p->edges[2 * e + 1] >= m->coarse_count || !(p->rest_len[e] > 0.0f) || !pbd__finite_bits(p->rest_len[e]))
            return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                                  "PDM model: edge %d (%d, %d) is out of range or has rest length %g", e,
                                  p->edges[2 * e], p->edges[2 * e + 1], (double)p->rest_len[e]);
    if (!(p->mean_edge > 0.0f))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "PDM model: its mean edge length %g must be > 0",
                              (double)p->mean_edge);
    if (!pbd__finite_bits(p->mean_edge))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "PDM model: its mean edge length is not finite (%g)",
                              (double)p->mean_edge);
    if (!pbd_up__finite(p->pca, 15))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "PDM model: its principal components contain NaN or infinity");
    if (!pbd_up__finite(p->rest_offset, (size_t)m->coarse_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "PDM model: its rest offsets contain NaN or infinity (%d coarse vertices)",
                              m->coarse_count);
    if (!pbd_up__finite(p->coef, (size_t)m->detail_count * 6))
        return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT,
                              "PDM model: its coefficients contain NaN or infinity (%d detail vertices)",
                              m->detail_count);
    r = pbd_up__pdm_neighbours(p, m->coarse_count);
    if (r != PBD_OK) return r;
    pbd_up__free(p->fx0);
    pbd_up__free(p->fframes);
    pbd_up__free(p->uvc);
    p->fx0 = (float *)pbd_up__alloc_array((size_t)m->coarse_count * 3, sizeof(float));
    p->fframes = (float *)pbd_up__alloc_array((size_t)m->coarse_count * 9, sizeof(float));
    p->uvc = (float *)pbd_up__alloc_array((size_t)m->coarse_count * 2, sizeof(float));
    if (!p->fx0 || !p->fframes || !p->uvc)
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "out of memory preparing a PDM model");
    return PBD_OK;
}

static void pbd_up__pdm_destroy(pbd_up_model *m) {
    pbd_up__pdm_free((pbd_up__pdm *)m->impl);
    m->impl = NULL;
}

static const pbd_up__methods pbd_up__pdm_methods = {"pdm", pbd_up__pdm_eval, pbd_up__pdm_io, pbd_up__pdm_prepare,
                                                    pbd_up__pdm_destroy};

PBD_UP_DEF pbd_up_pdm_desc pbd_up_pdm_desc_default(void) {
    pbd_up_pdm_desc d;
    memset(&d, 0, sizeof d);
    return d;
}

PBD_UP_DEF pbd_up_pdm_desc pbd_up_pdm_desc_from(const pbd_up_training *t, const pbd_up_model *sub) {
    pbd_up_pdm_desc d = pbd_up_pdm_desc_default();
    PBD_UP__DESC_FROM_TRAINING(d, t, sub); /* (WPSD's section) */
    return d;
}

/* The float rounding of the features (pbd_up__pdm_feature): positions
   carry FLT_EPSILON times the largest coordinate of the rest pose and
   the training frames, and the features divide them by edge lengths, so
   that over the mean rest edge. */
static double pbd_up__pdm_rounding(const pbd_up_pdm_desc *d, const float *rest, int nc, double mean_edge) {
    double X = 0.0;
    for (size_t k = 0; k < (size_t)nc * 3; ++k) X = fmax(X, fabs((double)rest[k]));
    for (size_t k = 0; k < (size_t)d->frame_count * nc * 3; ++k) X = fmax(X, fabs((double)d->coarse_frames[k]));
    return FLT_EPSILON * X / mean_edge;
}

/* Rest data, PCA of the 5D features over all vertices and frames, then
   one 6-coefficient least-squares fit per detail vertex (Ma et al.). */
static pbd_result pbd_up__pdm_build(const pbd_up_pdm_desc *d, pbd_up_model *m) {
    pbd_up__pdm *p = (pbd_up__pdm *)m->impl;
    pbd_up__subdiv *s = (pbd_up__subdiv *)p->sub->impl;
    const int nc = m->coarse_count, nd = m->detail_count, F = d->frame_count;
    const size_t nc3 = (size_t)nc * 3, nd3 = (size_t)nd * 3;
    const float *rest = d->coarse_rest ? d->coarse_rest : d->coarse_frames;
    pbd_result r = pbd_up__mesh_edges(d->coarse_triangles, d->coarse_triangle_count, &p->edges, &p->edge_count);
    if (r != PBD_OK) return r;
    p->rest_len = (float *)pbd_up__alloc_array((size_t)p->edge_count, sizeof(float));
    p->rest_offset = (float *)pbd_up__calloc_array(nc3, sizeof(float));
    p->coef = (float *)pbd_up__calloc_array((size_t)nd * 6, sizeof(float));
    float *uvd = (float *)pbd_up__alloc_array((size_t)F * nd, 2 * sizeof(float));
    float *h = (float *)pbd_up__alloc_array((size_t)F * nd, sizeof(float));
    double *A = (double *)pbd_up__alloc_array((size_t)(F + 6) * 7 + 6, sizeof(double));
    if (!p->rest_len || !p->rest_offset || !p->coef || !uvd || !h || !A) {
        r = pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_pdm_fit: out of memory");
        goto done;
    }
    {
        double mean_edge = 0.0;
        for (int e = 0; e < p->edge_count; ++e) {
            p->rest_len[e] =
                (float)sqrt(pbd_up__dist2(rest + 3 * (size_t)p->edges[2 * e], rest + 3 * (size_t)p->edges[2 * e + 1]));
            if (!(p->rest_len[e] > 0.0f)) {
                r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                                   "pbd_up_pdm_fit: coarse edge (%d, %d) has zero rest length", p->edges[2 * e],
                                   p->edges[2 * e + 1]);
                goto done;
            }
            mean_edge += p->rest_len[e];
        }
        p->mean_edge = (float)(mean_edge / p->edge_count);
        r = pbd_up__pdm_prepare(m); /* neighbours and scratch (rest offsets and pca are still zero) */
        if (r != PBD_OK) goto done;
        pbd_up__subdiv_smooth(p->feature, rest, p->fx0, p->fframes);
        for (int v = 0; v < nc; ++v)
            pbd_up__pdm_offset(p, p->fx0, p->fframes + 9 * (size_t)v, v, p->rest_offset + 3 * (size_t)v);
        /* PCA of the 5D features (double sums in a fixed order) */
        {
            double mean[5] = {0, 0, 0, 0, 0}, C[25], V[25], ev[5], phi[5];
            memset(C, 0, sizeof C);
            for (int pass = 0; pass < 2; ++pass)
                for (int f = 0; f < F; ++f) {
                    pbd_up__subdiv_smooth(p->feature, d->coarse_frames + (size_t)f * nc3, p->fx0, p->fframes);
                    for (int v = 0; v < nc; ++v) {
                        pbd_up__pdm_feature(p, p->fx0, p->fframes, v, phi);
                        for (int a = 0; a < 5; ++a) {
                            if (pass == 0) {
                                mean[a] += phi[a];
                                continue;
                            }
                            for (int b = 0; b < 5; ++b) C[a * 5 + b] += (phi[a] - mean[a]) * (phi[b] - mean[b]);
                        }
                    }
                    if (pass == 0 && f == F - 1)
                        for (int a = 0; a < 5; ++a) mean[a] /= (double)F * nc;
                }
            pbd_up__sym_eigen(5, C, ev, V);
            if (!(ev[1] > PBD_UP__PDM_EV_REL_MIN * (ev[0] + PBD_UP__PDM_EV_FLOOR))) {
                r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                                   "pbd_up_pdm_fit: the features of the training frames do not span two principal "
                                   "directions (eigenvalues %g and %g)",
                                   ev[0], ev[1]);
                goto done;
            }
            /* axes scaled by 1 / standard deviation: (u1, u2) have unit
               variance over the training data, which keeps the biquadratic
               basis well conditioned; so a second direction no larger than
               the features' float rounding would blow that rounding up to
               unit size: refused (pbd_up__pdm_rounding) */
            double sd1 = sqrt(ev[0] / ((double)F * nc)), sd2 = sqrt(ev[1] / ((double)F * nc)),
                   noise = pbd_up__pdm_rounding(d, rest, nc, p->mean_edge);
            if (!(sd2 > PBD_UP__PDM_NOISE_MIN * noise)) {
                r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                                   "pbd_up_pdm_fit: the features of the training frames do not span two principal "
                                   "directions above float rounding (standard deviations %g and %g, rounding %g)",
                                   sd1, sd2, noise);
                goto done;
            }
            for (int a = 0; a < 5; ++a) {
                p->pca[a] = (float)mean[a];
                p->pca[5 + a] = (float)(V[a * 5 + 0] / sd1);
                p->pca[10 + a] = (float)(V[a * 5 + 1] / sd2);
            }
        }
        /* per frame: detail coordinates and heights along the smooth normals */
        for (int f = 0; f < F; ++f) {
            const float *u = d->coarse_frames + (size_t)f * nc3, *X = d->detail_frames + (size_t)f * nd3;
            pbd_up__pdm_coarse_uv(p, u, p->uvc, 1);
            pbd_up__subdiv_smooth(p->sub, u, s->x0, s->frames);
            for (int i = 0; i < nd; ++i) {
                pbd_up__stencil_combine(&s->S, i, p->uvc, 2, uvd + ((size_t)f * nd + i) * 2);
                const float *n = s->frames + 9 * (size_t)i + 6, *x0 = s->x0 + 3 * (size_t)i, *x = X + 3 * (size_t)i;
                h[(size_t)f * nd + i] = (float)(((double)x[0] - x0[0]) * n[0] + ((double)x[1] - x0[1]) * n[1] +
                                                ((double)x[2] - x0[2]) * n[2]);
            }
        }
        /* least squares per detail vertex, a vanishing ridge (1e-10 of the
           mean diagonal) only to keep flat directions finite */
        for (int i = 0; i < nd && r == PBD_OK; ++i) {
            const int rows = F + 6;
            double *M = A, *rhs = A + (size_t)rows * 6, *c = rhs + rows, b[6], diag = 0.0;
            for (int f = 0; f < F; ++f) {
                pbd_up__pdm_basis(uvd + ((size_t)f * nd + i) * 2, b);
                for (int k = 0; k < 6; ++k) {
                    M[(size_t)k * rows + f] = b[k];
                    diag += b[k] * b[k];
                }
                rhs[f] = h[(size_t)f * nd + i];
            }
            double ridge = sqrt(PBD_UP__PDM_RIDGE * diag / 6.0);
            for (int k = 0; k < 6; ++k) {
                for (int j = 0; j < 6; ++j) M[(size_t)j * rows + F + k] = j == k ? ridge : 0.0;
                rhs[F + k] = 0.0;
            }
            if (pbd_up__lstsq(rows, 6, M, rhs, c) != 0)
                r = pbd_world_fail(NULL, PBD_ERROR_DEGENERATE,
                                   "pbd_up_pdm_fit: the least-squares fit of detail vertex %d failed (%d equations)", i,
                                   rows);
            for (int k = 0; k < 6; ++k) p->coef[6 * (size_t)i + k] = (float)c[k];
        }
    }
done:
    pbd_up__free(uvd);
    pbd_up__free(h);
    pbd_up__free(A);
    return r;
}

PBD_UP_DEF pbd_result pbd_up_pdm_fit(const pbd_up_pdm_desc *d, pbd_up_model **out) {
    if (!d) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_fit: d is NULL");
    if (!out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_fit: out is NULL");
    pbd_result r =
        pbd_up__twoscale_check(d->subdivision, d->coarse_triangles, d->coarse_triangle_count, d->frame_count,
                               d->coarse_count, d->detail_count, d->coarse_frames, d->detail_frames, d->coarse_rest, 6);
    if (r != PBD_OK) return pbd_world_fail_in(NULL, "pbd_up_pdm_fit", r);
    pbd_up_model *m = pbd_up__model_new(PBD_UP_PDM, d->subdivision->coarse_count, d->subdivision->detail_count);
    pbd_up__pdm *p = (pbd_up__pdm *)pbd_up__calloc_array(1, sizeof(pbd_up__pdm));
    if (!m || !p) {
        pbd_up__free(m);
        pbd_up__free(p);
        return pbd_world_fail(NULL, PBD_ERROR_OUT_OF_MEMORY, "pbd_up_pdm_fit: out of memory");
    }
    m->impl = p;
    r = pbd_up__clone_subdivision(d->subdivision, &p->sub);
    if (r == PBD_OK)
        r = pbd_up_subdivision_create(d->coarse_triangles, d->coarse_triangle_count, m->coarse_count, 0, &p->feature);
    if (r == PBD_OK) r = pbd_up__pdm_build(d, m);
    if (r == PBD_OK) r = pbd_up__pdm_prepare(m);
    if (r != PBD_OK) {
        pbd_up_model_destroy(m);
        return r;
    }
    m->trained = 1;
    *out = m;
    return PBD_OK;
}

static pbd_up__pdm *pbd_up__pdm_of(const pbd_up_model *m) {
    return m && m->method == PBD_UP_PDM && m->trained ? (pbd_up__pdm *)m->impl : NULL;
}

PBD_UP_DEF pbd_result pbd_up_pdm_coordinates(pbd_up_model *m, const float *coarse, float *uv_out, float *smooth_out,
                                             float *normals_out) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_coordinates: m is NULL");
    if (!coarse)
        return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_coordinates: coarse_positions is NULL");
    if (!uv_out) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_coordinates: uv_out is NULL");
    pbd_up__pdm *p = pbd_up__pdm_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_pdm_coordinates: m is not a PDM model");
    if (!pbd_up__finite(coarse, (size_t)m->coarse_count * 3))
        return pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE,
                              "pbd_up_pdm_coordinates: coarse_positions contain NaN or infinity (%d vertices)",
                              m->coarse_count);
    pbd_up__subdiv *s = (pbd_up__subdiv *)p->sub->impl;
    pbd_up__pdm_coarse_uv(p, coarse, p->uvc, 1);
    pbd_up__subdiv_smooth(p->sub, coarse, s->x0, s->frames);
    for (int i = 0; i < m->detail_count; ++i) {
        pbd_up__stencil_combine(&s->S, i, p->uvc, 2, uv_out + 2 * (size_t)i);
        for (int c = 0; c < 3; ++c) {
            if (smooth_out) smooth_out[3 * (size_t)i + c] = s->x0[3 * (size_t)i + c];
            if (normals_out) normals_out[3 * (size_t)i + c] = s->frames[9 * (size_t)i + 6 + c];
        }
    }
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_pdm_coefficients(const pbd_up_model *m, int detail_vertex, float *c6) {
    if (!m) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_coefficients: m is NULL");
    if (!c6) return pbd_world_fail(NULL, PBD_ERROR_NULL_POINTER, "pbd_up_pdm_coefficients: c6 is NULL");
    const pbd_up__pdm *p = pbd_up__pdm_of(m);
    if (!p) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "pbd_up_pdm_coefficients: m is not a PDM model");
    if (detail_vertex < 0 || detail_vertex >= m->detail_count)
        return pbd_world_fail(NULL, PBD_ERROR_INDEX_OUT_OF_RANGE,
                              "pbd_up_pdm_coefficients: detail_vertex %d outside 0..%d", detail_vertex,
                              m->detail_count - 1);
    memcpy(c6, p->coef + 6 * (size_t)detail_vertex, 6 * sizeof(float));
    return PBD_OK;
}

#if defined(PBD_CUDA) || defined(PBD_CUDA_COMPANION)
/* sizeof the method's data (pbd_cuda.cu checks it against its own copy) */
static size_t pbd_up__impl_size(const pbd_up_model *m) {
    return m->method == PBD_UP_SUBDIVISION ? sizeof(pbd_up__subdiv)
           : m->method == PBD_UP_PIU       ? sizeof(pbd_up__piu)
           : m->method == PBD_UP_PDM       ? sizeof(pbd_up__pdm)
                                           : sizeof(pbd_up__wpsd);
}
#endif

// ==== method table ==========================================================
/* One row per pbd_up_method (see "ADDING A METHOD" in the manual); NULL
   where a method is not compiled in. */
static const pbd_up__methods *pbd_up__methods_of(int method) {
    switch (method) {
        case PBD_UP_SUBDIVISION: return &pbd_up__subdivision_methods;
        case PBD_UP_PIU: return &pbd_up__piu_methods;
        case PBD_UP_WPSD: return &pbd_up__wpsd_methods;
        case PBD_UP_PDM: return &pbd_up__pdm_methods;
        default: return NULL;
    }
}

#ifdef PBD_UP__POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#endif
#endif /* PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED */
#endif /* PBD_UPSAMPLE_IMPLEMENTATION */
