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

// ==== wpsd ==================================================================

// ==== pdm ===================================================================

// ==== method table ==========================================================
/* One row per pbd_up_method (see "ADDING A METHOD" in the manual); NULL
   where a method is not compiled in. */
static const pbd_up__methods *pbd_up__methods_of(int method) {
    switch (method) {
    default: return NULL;
    }
}

#ifdef PBD_UP__POP_DIAGNOSTICS
#pragma GCC diagnostic pop
#endif
#endif /* PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED */
#endif /* PBD_UPSAMPLE_IMPLEMENTATION */
