/* pbd_upsample.h - v0.1 - coarse-to-fine upsampling for pbd.h: subdivision
   and two-scale detail, wrinkle meshes, physics-inspired upsampling (PIU),
   weighted pose-space deformation (WPSD), polynomial displacement maps (PDM).

   MANUAL
   ======
   Include pbd.h's implementation somewhere, and in *one* C or C++ file:

       #define PBD_UPSAMPLE_IMPLEMENTATION
       #include "pbd_upsample.h"

   Every other file includes "pbd_upsample.h" alone. Fitting runs offline;
   evaluation (pbd_up_eval) runs every frame.

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
       PBD_SIMD_WIDTH       4, 8 or 16: cap the SIMD width (as pbd.h)
       PBD_NO_OPENMP        never use OpenMP even with -fopenmp
       PBD_UP_MALLOC(sz) / PBD_UP_FREE(p)  replace malloc/free (both or none)

   THE COMMON MODEL API (section "model")
   Every method produces an opaque pbd_up_model (coarse vertex count,
   detail vertex count, method) with the same life cycle:

       pbd_up_model *m = NULL;
       pbd_up_subdivision_create(tris, ntris, nverts, 2, &m);  // or a fit
       pbd_up_eval(m, coarse_xyz, detail_xyz);                 // per frame
       size_t n = pbd_up_model_save_size(m);                   // offline
       pbd_up_model_save(m, buf, n);
       pbd_up_model_load(buf, n, &m2);   // evaluates bit-identically
       pbd_up_model_destroy(m);

   Positions are 3 floats per vertex. pbd_up_eval never allocates; it
   refuses NaN/Inf input (PBD_ERROR_NOT_FINITE), wrong sizes
   (pbd_up_eval_checked), untrained models (PBD_ERROR_INVALID_ARGUMENT);
   pbd_up_model_load refuses corrupt or foreign buffers
   (PBD_ERROR_BAD_SNAPSHOT). pbd_up_model_set_simd / _set_threads choose
   the SIMD kernels and the OpenMP team; neither changes a result bit.

   ADDING A METHOD (for the sections of this header)
   A method is a row of the method table: a pbd_up__methods struct with
     eval(m, coarse, detail)  evaluate; arguments, sizes, finiteness and
                              m->trained are already checked;
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
   implementation). Sparse operators (subdivision stencils, PIU's B) share
   pbd_up__sparse: CSR (saved with pbd_up__sparse_io), a sliced-ELL copy
   built by pbd_up__sparse_prepare and pbd_up__sparse_mul3 (y = S x for xyz
   vertices; SIMD == scalar, any thread count, bit for bit).

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
/* The SIMD path of the evaluators ("scalar", "sse", "avx2", "avx512"; the
   same choice as pbd.h's) and its width in floats (1 for scalar). */
PBD_UP_DEF const char *pbd_up_simd_path(void);
PBD_UP_DEF int pbd_up_simd_width(void);

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
   Errors: NULL pointers; PBD_ERROR_NOT_FINITE for NaN/Inf in coarse (the
   output is then untouched); PBD_ERROR_INVALID_ARGUMENT for an untrained
   model. One model is evaluated by one thread at a time (it owns its
   scratch); OpenMP threads inside are controlled below. No allocation. */
PBD_UP_DEF pbd_result pbd_up_eval(pbd_up_model *m, const float *coarse_positions,
                                  float *detail_positions_out);
/* Like pbd_up_eval, with the sizes the caller's arrays have (in vertices):
   PBD_ERROR_INVALID_ARGUMENT when they are not the model's. */
PBD_UP_DEF pbd_result pbd_up_eval_checked(pbd_up_model *m, const float *coarse_positions,
                                          int coarse_count, float *detail_positions_out,
                                          int detail_count);

/* Execution choices that never change the result bits: the SIMD kernels
   (on by default where compiled in; off runs the scalar reference twins)
   and the OpenMP threads (0, the default: OpenMP's count, serial for small
   models; n >= 1: exactly n). */
PBD_UP_DEF pbd_result pbd_up_model_set_simd(pbd_up_model *m, int on);
PBD_UP_DEF pbd_result pbd_up_model_set_threads(pbd_up_model *m, int threads);
PBD_UP_DEF void pbd_up_model_destroy(pbd_up_model *m);

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

// ==== wrinkle ===============================================================

// ==== training ==============================================================

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
    int support;                /* coarse vertices per neighbourhood, 2..64 (default 16);
                                   clamped to coarse_count */
    float regularization;       /* lambda >= 0 (default 1e-3); 0 is treated as 1e-9 */
    int oscillatory_modes;      /* residual modes, 0 (default) .. 64 */
    float frame_dt;             /* seconds between training frames (needed for modes) */
} pbd_up_piu_desc;

PBD_UP_DEF pbd_up_piu_desc pbd_up_piu_desc_default(void);
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
PBD_UP_DEF pbd_result pbd_up_piu_row(const pbd_up_model *m, int detail_vertex, int *index, float *weight,
                                     int max, int *count);
/* Mode count and, for mode k, its angular frequency (rad/s) and training
   amplitude. */
PBD_UP_DEF int pbd_up_piu_mode_count(const pbd_up_model *m);
PBD_UP_DEF pbd_result pbd_up_piu_mode(const pbd_up_model *m, int k, float *omega, float *amplitude,
                                      float *mode /* detail_count*3 or NULL */);

// ==== wpsd ==================================================================

// ==== pdm ===================================================================

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

/* SIMD as in pbd.h (DESIGN.md section 5): SIMDe's prefixed API when it is
   installed, the width the compiler targets natively, PBD_NO_SIMD for the
   scalar reference path, PBD_SIMD_WIDTH to cap the width. */
#if !defined(PBD_NO_SIMD) && defined(__has_include)
#if __has_include(<simde/x86/sse2.h>)
#define PBD_UP__SIMD 1
#endif
#endif
#ifndef PBD_UP__SIMD
#define PBD_UP__SIMD 0
#endif
#if defined(PBD_SIMD_WIDTH)
#define PBD_UP__WCAP PBD_SIMD_WIDTH
#else
#define PBD_UP__WCAP 16
#endif
#if PBD_UP__SIMD && defined(__AVX512F__) && PBD_UP__WCAP >= 16
#include <simde/x86/avx512.h>
#define PBD_UP__W 16
#if defined(__GNUC__) && !defined(__clang__) && defined(__cplusplus)
/* g++ 12's false -Wuninitialized in its own AVX-512 header (see pbd.h). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define PBD_UP__POP_DIAGNOSTICS 1
#endif
#elif PBD_UP__SIMD && defined(__AVX2__) && PBD_UP__WCAP >= 8
#include <simde/x86/avx2.h>
#define PBD_UP__W 8
#elif PBD_UP__SIMD
#include <simde/x86/sse2.h>
#define PBD_UP__W 4
#else
#define PBD_UP__W 1
#endif
/* Below this many multiply-adds an evaluation runs serially (threads 0):
   an OpenMP fork/join costs microseconds. */
#define PBD_UP__PARALLEL_MIN 32768L

PBD_UP_DEF const char *pbd_up_simd_path(void) {
#if PBD_UP__W == 16
    return "avx512";
#elif PBD_UP__W == 8
    return "avx2";
#elif PBD_UP__W == 4 && (defined(__ARM_NEON) || defined(__ARM_NEON__))
    return "neon";
#elif PBD_UP__W == 4
    return "sse";
#else
    return "scalar";
#endif
}

PBD_UP_DEF int pbd_up_simd_width(void) { return PBD_UP__W; }

/* Helpers the methods share: not every build uses every one. */
#if defined(__GNUC__) || defined(__clang__)
#define PBD_UP__SHARED static __attribute__((unused))
#else
#define PBD_UP__SHARED static
#endif

static void *pbd_up__alloc(size_t n) { return PBD_UP_MALLOC(n ? n : 1); }
static void pbd_up__free(void *p) { if (p) PBD_UP_FREE(p); }
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
        if (!(x[i] - x[i] == 0.0f)) return 0; /* NaN and Inf both fail */
    return 1;
}

/* The OpenMP team for `work` multiply-adds under the model's setting. */
static int pbd_up__team(int threads, long work) {
#if PBD_UP__OPENMP
    if (threads >= 1) return threads;
    return work < PBD_UP__PARALLEL_MIN ? 1 : omp_get_max_threads();
#else
    (void)threads; (void)work;
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
        if (n > io->size - io->off) { io->bad = 1; return; }
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
        if (elem && count > (io->size - io->off) / elem) { io->bad = 1; return; }
        *p = pbd_up__alloc_array(count, elem);
        if (!*p) { io->bad = 2; return; }
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
    int simd;    /* 1: SIMD kernels (where compiled in) */
    int threads; /* 0: automatic */
    void *impl;  /* the method's data */
};

/* Defined at the end of the implementation ("// ==== method table"), after
   every method's section; NULL for a method that is not compiled in. */
static const pbd_up__methods *pbd_up__methods_of(int method);

/* A new model of a method (impl NULL, untrained), for the methods' create
   and fit functions. */
PBD_UP__SHARED pbd_up_model *pbd_up__model_new(pbd_up_method method, int coarse_count, int detail_count) {
    pbd_up_model *m = (pbd_up_model *)pbd_up__alloc(sizeof *m);
    if (!m) return NULL;
    memset(m, 0, sizeof *m);
    m->method = method;
    m->coarse_count = coarse_count;
    m->detail_count = detail_count;
    m->simd = 1;
    return m;
}

PBD_UP_DEF const char *pbd_up_method_name(pbd_up_method method) {
    static const char *const names[PBD_UP_METHOD_COUNT] = {"subdivision", "piu", "wpsd", "pdm"};
    return (int)method >= 0 && (int)method < PBD_UP_METHOD_COUNT ? names[method] : NULL;
}
PBD_UP_DEF int pbd_up_method_available(pbd_up_method method) {
    return (int)method >= 0 && (int)method < PBD_UP_METHOD_COUNT && pbd_up__methods_of(method) != NULL;
}
PBD_UP_DEF pbd_up_method pbd_up_model_method(const pbd_up_model *m) {
    return m ? m->method : PBD_UP_METHOD_COUNT;
}
PBD_UP_DEF int pbd_up_model_coarse_count(const pbd_up_model *m) { return m ? m->coarse_count : 0; }
PBD_UP_DEF int pbd_up_model_detail_count(const pbd_up_model *m) { return m ? m->detail_count : 0; }
PBD_UP_DEF int pbd_up_model_trained(const pbd_up_model *m) { return m ? m->trained : 0; }

PBD_UP_DEF pbd_result pbd_up_eval(pbd_up_model *m, const float *coarse_positions,
                                  float *detail_positions_out) {
    if (!m || !coarse_positions || !detail_positions_out) return PBD_ERROR_NULL_POINTER;
    const pbd_up__methods *t = pbd_up__methods_of(m->method);
    if (!t || !m->trained || !m->impl) return PBD_ERROR_INVALID_ARGUMENT;
    if (!pbd_up__finite(coarse_positions, (size_t)m->coarse_count * 3)) return PBD_ERROR_NOT_FINITE;
    return t->eval(m, coarse_positions, detail_positions_out);
}

PBD_UP_DEF pbd_result pbd_up_eval_checked(pbd_up_model *m, const float *coarse_positions,
                                          int coarse_count, float *detail_positions_out,
                                          int detail_count) {
    if (!m || !coarse_positions || !detail_positions_out) return PBD_ERROR_NULL_POINTER;
    if (coarse_count != m->coarse_count || detail_count != m->detail_count) return PBD_ERROR_INVALID_ARGUMENT;
    return pbd_up_eval(m, coarse_positions, detail_positions_out);
}

PBD_UP_DEF pbd_result pbd_up_model_set_simd(pbd_up_model *m, int on) {
    if (!m) return PBD_ERROR_NULL_POINTER;
    if (on != 0 && on != 1) return PBD_ERROR_INVALID_ARGUMENT;
    m->simd = on;
    return PBD_OK;
}
PBD_UP_DEF pbd_result pbd_up_model_set_threads(pbd_up_model *m, int threads) {
    if (!m) return PBD_ERROR_NULL_POINTER;
    if (threads < 0 || threads > 1024) return PBD_ERROR_INVALID_ARGUMENT;
    m->threads = threads;
    return PBD_OK;
}

PBD_UP_DEF void pbd_up_model_destroy(pbd_up_model *m) {
    if (!m) return;
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

static uint64_t pbd_up__fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
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
    if (!m || !buffer) return PBD_ERROR_NULL_POINTER;
    size_t need = pbd_up_model_save_size(m);
    if (!need) return PBD_ERROR_INVALID_ARGUMENT; /* untrained */
    if (size < need) return PBD_ERROR_INVALID_ARGUMENT;
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
    if (io.bad || io.off != io.size) return PBD_ERROR_INVALID_ARGUMENT; /* cannot happen */
    uint64_t sum = pbd_up__fnv1a(out, need - sizeof sum);
    memcpy(out + need - sizeof sum, &sum, sizeof sum);
    return PBD_OK;
}

PBD_UP_DEF pbd_result pbd_up_model_load(const void *buffer, size_t size, pbd_up_model **out) {
    if (!buffer || !out) return PBD_ERROR_NULL_POINTER;
    pbd_up__header h;
    uint64_t sum;
    const unsigned char *in = (const unsigned char *)buffer;
    if (size < sizeof h + sizeof sum) return PBD_ERROR_BAD_SNAPSHOT;
    memcpy(&h, in, sizeof h);
    memcpy(&sum, in + size - sizeof sum, sizeof sum);
    if (memcmp(h.magic, PBD_UP__MAGIC, 8) != 0 || h.format != PBD_UP__FORMAT ||
        h.byte_order != PBD_UP__BYTE_ORDER || h.reserved != 0)
        return PBD_ERROR_BAD_SNAPSHOT;
    if (h.payload != (uint64_t)(size - sizeof h - sizeof sum)) return PBD_ERROR_BAD_SNAPSHOT;
    if (sum != pbd_up__fnv1a(in, size - sizeof sum)) return PBD_ERROR_BAD_SNAPSHOT;
    if (h.method >= (uint32_t)PBD_UP_METHOD_COUNT || h.coarse_count <= 0 || h.detail_count <= 0 ||
        h.coarse_count > INT_MAX / 3 || h.detail_count > INT_MAX / 3)
        return PBD_ERROR_BAD_SNAPSHOT;
    const pbd_up__methods *t = pbd_up__methods_of((int)h.method);
    if (!t) return PBD_ERROR_BAD_SNAPSHOT;
    pbd_up_model *m = pbd_up__model_new((pbd_up_method)h.method, h.coarse_count, h.detail_count);
    if (!m) return PBD_ERROR_OUT_OF_MEMORY;
    pbd_up__io io;
    memset(&io, 0, sizeof io);
    io.in = in + sizeof h;
    io.size = (size_t)h.payload;
    t->io(m, &io);
    pbd_result r = PBD_OK;
    if (io.bad == 2) r = PBD_ERROR_OUT_OF_MEMORY;
    else if (io.bad || io.off != io.size || !m->impl) r = PBD_ERROR_BAD_SNAPSHOT;
    else r = t->prepare(m);
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
   Stored as CSR (what is saved) and, derived from it, in sliced-ELL form
   for the SIMD kernel: rows in chunks of W, each chunk padded to its
   longest row with weight-0 entries and stored entry-major, so one SIMD
   lane is one row. Every row is summed in the same order, acc = 0 then
   acc += w_k x_k for k = 0, 1, ..., in both paths; a padding entry adds
   0 * x = +-0 to acc, which leaves acc's bits unchanged (x is finite:
   pbd_up_eval checks), so SIMD == scalar bit for bit, and rows do not
   depend on each other, so any thread count gives the same bits. */
typedef struct pbd_up__sparse {
    int rows, cols;
    int *start; /* rows + 1 */
    int *col;   /* start[rows] column indices, increasing within a row */
    float *val;
    /* derived (not saved) */
    int chunks;
    int *chunk_start; /* chunks + 1, in entries of W lanes */
    int *ell_col;     /* 3 * column, padding repeats a valid column */
    float *ell_val;
} pbd_up__sparse;

PBD_UP__SHARED void pbd_up__sparse_free(pbd_up__sparse *s) {
    pbd_up__free(s->start); pbd_up__free(s->col); pbd_up__free(s->val);
    pbd_up__free(s->chunk_start); pbd_up__free(s->ell_col); pbd_up__free(s->ell_val);
    memset(s, 0, sizeof *s);
}

PBD_UP__SHARED void pbd_up__sparse_io(pbd_up__io *io, pbd_up__sparse *s) {
    pbd_up__io_int(io, &s->rows);
    pbd_up__io_int(io, &s->cols);
    if (io->in && (s->rows <= 0 || s->cols <= 0 || s->rows == INT_MAX)) io->bad = 1;
    pbd_up__io_array(io, (void **)&s->start, (size_t)s->rows + 1, sizeof(int));
    if (io->bad) return;
    int nnz = s->start[s->rows];
    if (io->in && (s->start[0] != 0 || nnz < 0)) { io->bad = 1; return; }
    pbd_up__io_array(io, (void **)&s->col, (size_t)nnz, sizeof(int));
    pbd_up__io_array(io, (void **)&s->val, (size_t)nnz, sizeof(float));
}

/* Checks the CSR arrays (monotone starts, columns in range and increasing,
   finite weights) and builds the sliced-ELL copy. */
PBD_UP__SHARED pbd_result pbd_up__sparse_prepare(pbd_up__sparse *s) {
    if (s->rows <= 0 || s->cols <= 0 || !s->start || s->start[0] != 0) return PBD_ERROR_BAD_SNAPSHOT;
    for (int i = 0; i < s->rows; ++i) {
        if (s->start[i + 1] < s->start[i]) return PBD_ERROR_BAD_SNAPSHOT;
        for (int k = s->start[i]; k < s->start[i + 1]; ++k) {
            if (s->col[k] < 0 || s->col[k] >= s->cols || (k > s->start[i] && s->col[k] <= s->col[k - 1]))
                return PBD_ERROR_BAD_SNAPSHOT;
            if (!pbd_up__finite(&s->val[k], 1)) return PBD_ERROR_NOT_FINITE;
        }
    }
    if (s->cols > INT_MAX / 3) return PBD_ERROR_OVERFLOW;
    const int W = PBD_UP__W;
    pbd_up__free(s->chunk_start); pbd_up__free(s->ell_col); pbd_up__free(s->ell_val);
    s->ell_col = NULL; s->ell_val = NULL;
    s->chunks = (s->rows + W - 1) / W;
    s->chunk_start = (int *)pbd_up__alloc_array((size_t)s->chunks + 1, sizeof(int));
    if (!s->chunk_start) return PBD_ERROR_OUT_OF_MEMORY;
    size_t total = 0;
    s->chunk_start[0] = 0;
    for (int c = 0; c < s->chunks; ++c) {
        int longest = 0;
        for (int i = c * W; i < (c + 1) * W && i < s->rows; ++i)
            if (s->start[i + 1] - s->start[i] > longest) longest = s->start[i + 1] - s->start[i];
        total += (size_t)longest;
        if (total > (size_t)INT_MAX / (size_t)W) return PBD_ERROR_OVERFLOW;
        s->chunk_start[c + 1] = (int)total;
    }
    s->ell_col = (int *)pbd_up__alloc_array(total * W, sizeof(int));
    s->ell_val = (float *)pbd_up__alloc_array(total * W, sizeof(float));
    if (!s->ell_col || !s->ell_val) return PBD_ERROR_OUT_OF_MEMORY;
    for (int c = 0; c < s->chunks; ++c) {
        for (int k = s->chunk_start[c]; k < s->chunk_start[c + 1]; ++k) {
            for (int lane = 0; lane < W; ++lane) {
                int i = c * W + lane, e = k - s->chunk_start[c];
                size_t slot = (size_t)k * W + lane;
                int have = i < s->rows && e < s->start[i + 1] - s->start[i];
                s->ell_col[slot] = have ? 3 * s->col[s->start[i] + e] : 0;
                s->ell_val[slot] = have ? s->val[s->start[i] + e] : 0.0f;
            }
        }
    }
    return PBD_OK;
}

/* The scalar reference: rows [r0, r1). */
static void pbd_up__sparse_rows_scalar(const pbd_up__sparse *s, const float *x, float *y, int r0, int r1) {
    for (int i = r0; i < r1; ++i) {
        float ax = 0.0f, ay = 0.0f, az = 0.0f;
        for (int k = s->start[i]; k < s->start[i + 1]; ++k) {
            const float w = s->val[k], *p = x + 3 * (size_t)s->col[k];
            ax += w * p[0];
            ay += w * p[1];
            az += w * p[2];
        }
        y[3 * (size_t)i] = ax;
        y[3 * (size_t)i + 1] = ay;
        y[3 * (size_t)i + 2] = az;
    }
}

#if PBD_UP__W > 1
#if PBD_UP__W == 16
typedef simde__m512 pbd_up__vf;
typedef const int *pbd_up__vi; /* gathered as two 8-wide halves */
#define PBD_UP__VZERO() simde_mm512_setzero_ps()
#define PBD_UP__VLOAD(p) simde_mm512_loadu_ps(p)
#define PBD_UP__VLOADI(p) (p)
#define PBD_UP__VADD(a, b) simde_mm512_add_ps(a, b)
#define PBD_UP__VMUL(a, b) simde_mm512_mul_ps(a, b)
#define PBD_UP__VSTORE(p, a) simde_mm512_storeu_ps(p, a)
#define PBD_UP__VGATHER(base, idx) pbd_up__gather16(base, idx)
static inline simde__m512 pbd_up__gather16(const float *base, const int *idx) {
    simde__m256 lo = simde_mm256_i32gather_ps(base, simde_mm256_loadu_si256((const simde__m256i *)(const void *)idx), 4);
    simde__m256 hi = simde_mm256_i32gather_ps(base, simde_mm256_loadu_si256((const simde__m256i *)(const void *)(idx + 8)), 4);
    return simde_mm512_insertf32x8(simde_mm512_castps256_ps512(lo), hi, 1);
}
#elif PBD_UP__W == 8
typedef simde__m256 pbd_up__vf;
typedef simde__m256i pbd_up__vi;
#define PBD_UP__VZERO() simde_mm256_setzero_ps()
#define PBD_UP__VLOAD(p) simde_mm256_loadu_ps(p)
#define PBD_UP__VLOADI(p) simde_mm256_loadu_si256((const simde__m256i *)(const void *)(p))
#define PBD_UP__VADD(a, b) simde_mm256_add_ps(a, b)
#define PBD_UP__VMUL(a, b) simde_mm256_mul_ps(a, b)
#define PBD_UP__VSTORE(p, a) simde_mm256_storeu_ps(p, a)
#define PBD_UP__VGATHER(base, idx) simde_mm256_i32gather_ps(base, idx, 4)
#else
typedef simde__m128 pbd_up__vf;
typedef const int *pbd_up__vi; /* SSE2 has no gather: four loads */
#define PBD_UP__VZERO() simde_mm_setzero_ps()
#define PBD_UP__VLOAD(p) simde_mm_loadu_ps(p)
#define PBD_UP__VLOADI(p) (p)
#define PBD_UP__VADD(a, b) simde_mm_add_ps(a, b)
#define PBD_UP__VMUL(a, b) simde_mm_mul_ps(a, b)
#define PBD_UP__VSTORE(p, a) simde_mm_storeu_ps(p, a)
#define PBD_UP__VGATHER(base, idx) simde_mm_set_ps((base)[(idx)[3]], (base)[(idx)[2]], (base)[(idx)[1]], (base)[(idx)[0]])
#endif

/* The SIMD kernel: chunks [c0, c1), one row per lane. */
static void pbd_up__sparse_chunks_simd(const pbd_up__sparse *s, const float *x, float *y, int c0, int c1) {
    const int W = PBD_UP__W;
    float ox[PBD_UP__W], oy[PBD_UP__W], oz[PBD_UP__W];
    for (int c = c0; c < c1; ++c) {
        pbd_up__vf ax = PBD_UP__VZERO(), ay = PBD_UP__VZERO(), az = PBD_UP__VZERO();
        for (int k = s->chunk_start[c]; k < s->chunk_start[c + 1]; ++k) {
            pbd_up__vi idx = PBD_UP__VLOADI(s->ell_col + (size_t)k * W);
            pbd_up__vf w = PBD_UP__VLOAD(s->ell_val + (size_t)k * W);
            ax = PBD_UP__VADD(ax, PBD_UP__VMUL(w, PBD_UP__VGATHER(x, idx)));
            ay = PBD_UP__VADD(ay, PBD_UP__VMUL(w, PBD_UP__VGATHER(x + 1, idx)));
            az = PBD_UP__VADD(az, PBD_UP__VMUL(w, PBD_UP__VGATHER(x + 2, idx)));
        }
        PBD_UP__VSTORE(ox, ax);
        PBD_UP__VSTORE(oy, ay);
        PBD_UP__VSTORE(oz, az);
        int n = s->rows - c * W < W ? s->rows - c * W : W;
        float *o = y + 3 * (size_t)c * W;
        for (int lane = 0; lane < n; ++lane) {
            o[3 * lane] = ox[lane];
            o[3 * lane + 1] = oy[lane];
            o[3 * lane + 2] = oz[lane];
        }
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
#if PBD_UP__W > 1
    if (simd) {
        if (team <= 1) { pbd_up__sparse_chunks_simd(s, x, y, 0, s->chunks); return; }
        PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team))
        for (int c = 0; c < s->chunks; ++c) pbd_up__sparse_chunks_simd(s, x, y, c, c + 1);
        return;
    }
#endif
    if (team <= 1) { pbd_up__sparse_rows_scalar(s, x, y, 0, s->rows); return; }
    PBD_UP__PRAGMA(omp parallel for schedule(static) num_threads(team))
    for (int c = 0; c < s->chunks; ++c) {
        int r1 = (c + 1) * W < s->rows ? (c + 1) * W : s->rows;
        pbd_up__sparse_rows_scalar(s, x, y, c * W, r1);
    }
}

// ==== subdivision ===========================================================

// ==== wrinkle ===============================================================

// ==== training ==============================================================

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
        if (!(fabs(r) > 1e-13 * rmax)) return -1;
        double s = b[k];
        for (int j = k + 1; j < n; ++j) s -= A[(size_t)j * m + k] * x[j];
        x[k] = s / r;
    }
    return 0;
}

/* Eigen-decomposition of a symmetric n x n matrix (row-major, overwritten)
   by cyclic Jacobi rotations: eigenvalues descending in evals, eigenvector k
   in column k of evecs (row-major n x n). */
static void pbd_up__sym_eigen(int n, double *A, double *evals, double *evecs) {
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) evecs[i * n + j] = i == j ? 1.0 : 0.0;
    for (int sweep = 0; sweep < 100; ++sweep) {
        double off = 0.0, diag = 0.0;
        for (int i = 0; i < n; ++i) {
            diag += A[i * n + i] * A[i * n + i];
            for (int j = i + 1; j < n; ++j) off += A[i * n + j] * A[i * n + j];
        }
        if (off <= 1e-30 * diag || off == 0.0) break;
        for (int p = 0; p < n; ++p)
            for (int q = p + 1; q < n; ++q) {
                double apq = A[p * n + q];
                if (apq == 0.0) continue;
                double theta = (A[q * n + q] - A[p * n + p]) / (2.0 * apq);
                double t = (theta >= 0.0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < n; ++k) { /* A = A J */
                    double akp = A[k * n + p], akq = A[k * n + q];
                    A[k * n + p] = c * akp - s * akq;
                    A[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; ++k) { /* A = J^T A */
                    double apk = A[p * n + k], aqk = A[q * n + k];
                    A[p * n + k] = c * apk - s * aqk;
                    A[q * n + k] = s * apk + c * aqk;
                }
                for (int k = 0; k < n; ++k) {
                    double vkp = evecs[k * n + p], vkq = evecs[k * n + q];
                    evecs[k * n + p] = c * vkp - s * vkq;
                    evecs[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (int i = 0; i < n; ++i) evals[i] = A[i * n + i];
    for (int i = 0; i < n; ++i) { /* selection sort, descending */
        int best = i;
        for (int j = i + 1; j < n; ++j)
            if (evals[j] > evals[best]) best = j;
        if (best == i) continue;
        double t = evals[i]; evals[i] = evals[best]; evals[best] = t;
        for (int k = 0; k < n; ++k) {
            double u = evecs[k * n + i]; evecs[k * n + i] = evecs[k * n + best]; evecs[k * n + best] = u;
        }
    }
}


/* --- PIU --- */

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
    float *modes;       /* mode_count * detail_count * 3, unit vectors */
    float *omega;       /* mode_count: angular frequency (rad/s) */
    float *amplitude;   /* mode_count: training amplitude */
    float train_speed;  /* RMS coarse vertex speed of the training frames */
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
static void pbd_up__piu_group(const pbd_up__piu *p, int g, const float *u, float *X, int simd) {
    const int K = p->support;
    const int *s = p->group_support + (size_t)g * K;
    const float *w = p->weights + (size_t)g * K * PBD_UP__LANES;
    const int *lv = p->lane_vertex + (size_t)g * PBD_UP__LANES;
    float ax[PBD_UP__LANES], ay[PBD_UP__LANES], az[PBD_UP__LANES];
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
            float x = 0.0f, y = 0.0f, z = 0.0f;
            for (int j = 0; j < K; ++j) {
                const float *c = u + 3 * (size_t)s[j];
                float wj = w[(size_t)j * PBD_UP__LANES + l];
                x = x + wj * c[0];
                y = y + wj * c[1];
                z = z + wj * c[2];
            }
            ax[l] = x; ay[l] = y; az[l] = z;
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

/* Adds the oscillatory modes: X += sum_k level_k sin(phase_k) mode_k. */
static void pbd_up__piu_add_modes(const pbd_up__piu *p, float *X, int threads) {
    if (p->mode_count == 0) return;
    float c[64];
    for (int k = 0; k < p->mode_count; ++k) c[k] = p->level[k] * sinf(p->phase[k]);
    const long n = (long)p->detail_count * 3;
    const size_t stride = (size_t)p->detail_count * 3;
    (void)threads;
    PBD_UP__PRAGMA(omp parallel for num_threads(threads) schedule(static) if(threads > 1 && n > 30000))
    for (long i = 0; i < n; ++i) {
        float x = X[i];
        for (int k = 0; k < p->mode_count; ++k) x = x + c[k] * p->modes[(size_t)k * stride + (size_t)i];
        X[i] = x;
    }
}

/* Below this many groups evaluation runs on one thread (a parallel region
   costs a few microseconds; 64 groups are 512 detail vertices). */
#define PBD_UP__PIU_PARALLEL_MIN 64

static void pbd_up__piu_apply(const pbd_up__piu *p, const float *u, float *X, int threads, int simd) {
    const int G = p->group_count;
    (void)threads;
    PBD_UP__PRAGMA(omp parallel for num_threads(threads) schedule(static) if(threads > 1 && G >= PBD_UP__PIU_PARALLEL_MIN))
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

static int pbd_up__int_cmp(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

static double pbd_up__dist2(const float *a, const float *b) {
    double dx = (double)a[0] - b[0], dy = (double)a[1] - b[1], dz = (double)a[2] - b[2];
    return dx * dx + dy * dy + dz * dz;
}

static pbd_result pbd_up__piu_check_desc(const pbd_up_piu_desc *d) {
    if (!d || !d->coarse_frames || !d->detail_frames) return PBD_ERROR_NULL_POINTER;
    if (d->coarse_count < 1 || d->detail_count < 1 || d->frame_count < 1) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->support < 2 || d->support > 64) return PBD_ERROR_INVALID_ARGUMENT;
    if (!(d->regularization >= 0.0f) || !isfinite(d->regularization)) return PBD_ERROR_INVALID_ARGUMENT;
    if (d->oscillatory_modes < 0 || d->oscillatory_modes > 64 || d->oscillatory_modes > d->frame_count)
        return PBD_ERROR_INVALID_ARGUMENT;
    if (d->oscillatory_modes > 0 && (!(d->frame_dt > 0.0f) || !isfinite(d->frame_dt) || d->frame_count < 3))
        return PBD_ERROR_INVALID_ARGUMENT;
    int np = (d->prior_start != NULL) + (d->prior_index != NULL) + (d->prior_weight != NULL);
    if (np != 0 && np != 3) return PBD_ERROR_NULL_POINTER;
    const size_t nc3 = (size_t)d->coarse_count * 3, nd3 = (size_t)d->detail_count * 3;
    if (d->coarse_count > INT_MAX / 3 || d->detail_count > INT_MAX / 3 - PBD_UP__LANES ||
        nd3 > ((size_t)-1 / sizeof(double)) / (size_t)d->frame_count ||
        nc3 > ((size_t)-1 / sizeof(float)) / (size_t)d->frame_count)
        return PBD_ERROR_OVERFLOW;
    if (!pbd_up__finite(d->coarse_frames, nc3 * (size_t)d->frame_count) ||
        !pbd_up__finite(d->detail_frames, nd3 * (size_t)d->frame_count))
        return PBD_ERROR_NOT_FINITE;
    if ((d->coarse_rest && !pbd_up__finite(d->coarse_rest, nc3)) ||
        (d->detail_rest && !pbd_up__finite(d->detail_rest, nd3)))
        return PBD_ERROR_NOT_FINITE;
    if (np == 3) {
        if (d->prior_start[0] != 0) return PBD_ERROR_INVALID_ARGUMENT;
        for (int i = 0; i < d->detail_count; ++i)
            if (d->prior_start[i + 1] < d->prior_start[i]) return PBD_ERROR_INVALID_ARGUMENT;
        for (int e = 0; e < d->prior_start[d->detail_count]; ++e) {
            if (d->prior_index[e] < 0 || d->prior_index[e] >= d->coarse_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
            if (!isfinite(d->prior_weight[e])) return PBD_ERROR_NOT_FINITE;
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
                if (dd < bd) { bd = dd; best = v; }
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
static int pbd_up__piu_fit_row(const pbd_up_piu_desc *d, int i, const int *s, int K, const double *p,
                               double *A, double *rhs, double *z, float *out) {
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
    double lambda = d->regularization > 1e-9f ? (double)d->regularization : 1e-9;
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
static void pbd_up__piu_support(const pbd_up_piu_desc *d, const float *crest, int v, const int *rows,
                                int row_count, int K, double *psum, int *mark, pbd_up__rank *cand, int *s) {
    int nc = 0;
    if (d->prior_start)
        for (int r = 0; r < row_count; ++r)
            for (int e = d->prior_start[rows[r]]; e < d->prior_start[rows[r] + 1]; ++e) {
                int c = d->prior_index[e];
                if (!mark[c]) { mark[c] = 1; cand[nc++].index = c; }
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
        while (k > 0 && nd[k - 1] > dd) { nd[k] = nd[k - 1]; near[k] = near[k - 1]; --k; }
        nd[k] = dd;
        near[k] = c;
    }
    for (int k = 0; k < nn; ++k)
        if (!mark[near[k]]) { mark[near[k]] = 1; cand[nc++].index = near[k]; }
    for (int k = 0; k < nc; ++k) {
        int c = cand[k].index;
        cand[k].key0 = psum[c];
        cand[k].key1 = pbd_up__dist2(crest + 3 * (size_t)c, crest + 3 * (size_t)v);
    }
    qsort(cand, (size_t)nc, sizeof cand[0], pbd_up__rank_cmp);
    for (int k = 0; k < nc; ++k) { mark[cand[k].index] = 0; psum[cand[k].index] = 0.0; }
    for (int k = 0; k < K; ++k) s[k] = cand[k].index;
    qsort(s, (size_t)K, sizeof s[0], pbd_up__int_cmp);
}

/* The prior row restricted to the support and renormalised; inverse
   squared distance (Shepard) weights where there is no prior or it puts
   no weight on the support. */
static void pbd_up__piu_prior(const pbd_up_piu_desc *d, const float *crest, const float *drest, int i,
                              const int *s, int K, double *p) {
    double sum = 0.0;
    for (int j = 0; j < K; ++j) p[j] = 0.0;
    if (d->prior_start)
        for (int e = d->prior_start[i]; e < d->prior_start[i + 1]; ++e)
            for (int j = 0; j < K; ++j)
                if (s[j] == d->prior_index[e]) { p[j] += d->prior_weight[e]; sum += d->prior_weight[e]; }
    if (!(fabs(sum) > 1e-6)) {
        sum = 0.0;
        for (int j = 0; j < K; ++j) {
            p[j] = 1.0 / (pbd_up__dist2(drest + 3 * (size_t)i, crest + 3 * (size_t)s[j]) + 1e-12);
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
    if (!res || !G) { pbd_up__free(res); pbd_up__free(G); return PBD_ERROR_OUT_OF_MEMORY; }
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
    while (m < M && ev[m] > 1e-12 * trace && ev[m] > 0.0) ++m;
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
            ss += sn * sn; sc += sn * cs; cc += cs * cs; ys += y * sn; yc += y * cs;
        }
        double det = ss * cc - sc * sc, alpha = 0.0, beta = 0.0;
        if (det > 1e-12 * (ss * cc) && det > 0.0) {
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
    if (!p->group_support || !p->weights || !p->lane_vertex || !p->prev_coarse) return PBD_ERROR_OUT_OF_MEMORY;
    if (modes > 0) {
        p->modes = (float *)pbd_up__alloc_array(nd3 * (size_t)modes, sizeof(float));
        p->omega = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        p->amplitude = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        p->level = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        p->phase = (float *)pbd_up__alloc(sizeof(float) * (size_t)modes);
        if (!p->modes || !p->omega || !p->amplitude || !p->level || !p->phase) return PBD_ERROR_OUT_OF_MEMORY;
    }
    return PBD_OK;
}

static pbd_result pbd_up__piu_build(const pbd_up_piu_desc *d, pbd_up__piu **out) {
    pbd_result r = pbd_up__piu_check_desc(d);
    if (r != PBD_OK) return r;
    const int nc = d->coarse_count, nd = d->detail_count, F = d->frame_count;
    const int K = d->support < nc ? d->support : nc;
    if (K < 2) return PBD_ERROR_INVALID_ARGUMENT;
    const float *crest = d->coarse_rest ? d->coarse_rest : d->coarse_frames;
    const float *drest = d->detail_rest ? d->detail_rest : d->detail_frames;
    const int m = 3 * F + K;
    int *owner = (int *)pbd_up__alloc(sizeof(int) * ((size_t)nd * 2 + (size_t)nc * 2 + 1));
    double *dscr = (double *)pbd_up__alloc(sizeof(double) * ((size_t)nc + (size_t)m * K + (size_t)m + 3 * (size_t)K));
    pbd_up__rank *cand = (pbd_up__rank *)pbd_up__alloc(sizeof(pbd_up__rank) * ((size_t)nc + 64));
    pbd_up__piu *p = (pbd_up__piu *)pbd_up__alloc(sizeof(pbd_up__piu));
    if (!owner || !dscr || !cand || !p) {
        pbd_up__free(owner); pbd_up__free(dscr); pbd_up__free(cand); pbd_up__free(p);
        return PBD_ERROR_OUT_OF_MEMORY;
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
                    if (pbd_up__piu_fit_row(d, i, s, K, prior, A, rhs, z, row) != 0) r = PBD_ERROR_DEGENERATE;
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
    if (r != PBD_OK) { pbd_up__piu_free(p); return r; }
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
        if (!m->impl) { io->bad = 2; return; }
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
        if (p->group_support[k] < 0 || p->group_support[k] >= p->coarse_count) return PBD_ERROR_BAD_SNAPSHOT;
    int *seen = (int *)pbd_up__calloc_array((size_t)p->detail_count, sizeof(int));
    if (!seen) return PBD_ERROR_OUT_OF_MEMORY;
    pbd_result r = PBD_OK;
    for (size_t k = 0; k < G * PBD_UP__LANES && r == PBD_OK; ++k) {
        int v = p->lane_vertex[k];
        if (v < -1 || v >= p->detail_count || (v >= 0 && seen[v]++)) r = PBD_ERROR_BAD_SNAPSHOT;
    }
    for (int v = 0; v < p->detail_count && r == PBD_OK; ++v)
        if (!seen[v]) r = PBD_ERROR_BAD_SNAPSHOT;
    pbd_up__free(seen);
    if (r != PBD_OK) return r;
    if (!pbd_up__finite(p->weights, G * K * PBD_UP__LANES) ||
        !pbd_up__finite(p->prev_coarse, (size_t)p->coarse_count * 3) || !(p->train_speed >= 0.0f))
        return PBD_ERROR_BAD_SNAPSHOT;
    if (M > 0 && (!pbd_up__finite(p->modes, M * (size_t)p->detail_count * 3) || !pbd_up__finite(p->omega, M) ||
                  !pbd_up__finite(p->amplitude, M) || !pbd_up__finite(p->level, M) || !pbd_up__finite(p->phase, M)))
        return PBD_ERROR_BAD_SNAPSHOT;
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

PBD_UP_DEF pbd_result pbd_up_piu_fit(const pbd_up_piu_desc *desc, pbd_up_model **out) {
    if (!out) return PBD_ERROR_NULL_POINTER;
    pbd_up__piu *p = NULL;
    pbd_result r = pbd_up__piu_build(desc, &p);
    if (r != PBD_OK) return r;
    pbd_up_model *m = pbd_up__model_new(PBD_UP_PIU, desc->coarse_count, desc->detail_count);
    if (!m) { pbd_up__piu_free(p); return PBD_ERROR_OUT_OF_MEMORY; }
    m->impl = p;
    r = pbd_up__piu_prepare(m);
    if (r != PBD_OK) { pbd_up_model_destroy(m); return r; }
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
    if (!m || !coarse) return PBD_ERROR_NULL_POINTER;
    pbd_up__piu *p = pbd_up__piu_of(m);
    if (!p) return PBD_ERROR_INVALID_ARGUMENT;
    if (!(dt > 0.0f) || !isfinite(dt)) return PBD_ERROR_INVALID_TIME_STEP;
    const size_t nc3 = (size_t)p->coarse_count * 3;
    if (!pbd_up__finite(coarse, nc3)) return PBD_ERROR_NOT_FINITE;
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
    if (!m || !count) return PBD_ERROR_NULL_POINTER;
    const pbd_up__piu *p = pbd_up__piu_of(m);
    if (!p) return PBD_ERROR_INVALID_ARGUMENT;
    if (detail_vertex < 0 || detail_vertex >= p->detail_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (max < 0 || (max > 0 && (!index || !weight))) return PBD_ERROR_INVALID_ARGUMENT;
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
    return PBD_ERROR_INDEX_OUT_OF_RANGE; /* cannot happen for a prepared model */
}

PBD_UP_DEF int pbd_up_piu_mode_count(const pbd_up_model *m) {
    const pbd_up__piu *p = pbd_up__piu_of(m);
    return p ? p->mode_count : 0;
}

PBD_UP_DEF pbd_result pbd_up_piu_mode(const pbd_up_model *m, int k, float *omega, float *amplitude, float *mode) {
    if (!m) return PBD_ERROR_NULL_POINTER;
    const pbd_up__piu *p = pbd_up__piu_of(m);
    if (!p) return PBD_ERROR_INVALID_ARGUMENT;
    if (k < 0 || k >= p->mode_count) return PBD_ERROR_INDEX_OUT_OF_RANGE;
    if (omega) *omega = p->omega[k];
    if (amplitude) *amplitude = p->amplitude[k];
    if (mode) memcpy(mode, p->modes + (size_t)k * p->detail_count * 3, sizeof(float) * (size_t)p->detail_count * 3);
    return PBD_OK;
}

// ==== wpsd ==================================================================

// ==== pdm ===================================================================

// ==== method table ==========================================================
/* One row per pbd_up_method (see "ADDING A METHOD" in the manual); NULL
   where a method is not compiled in. */
static const pbd_up__methods *pbd_up__methods_of(int method) {
    switch (method) {
    case PBD_UP_PIU: return &pbd_up__piu_methods;
    default: return NULL;
    }
}

#ifdef PBD_UP__POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#endif
#endif /* PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED */
#endif /* PBD_UPSAMPLE_IMPLEMENTATION */
