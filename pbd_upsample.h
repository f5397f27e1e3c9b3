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

// ==== model =================================================================
/* A fitted upsampler: coarse positions (coarse_count*3 floats) in, detail
   positions (detail_count*3 floats) out. */
typedef enum pbd_up_method {
    PBD_UP_SUBDIVISION = 0,
    PBD_UP_PIU = 1,
    PBD_UP_WPSD = 2,
    PBD_UP_PDM = 3,
    PBD_UP_METHOD_COUNT = 4
} pbd_up_method;

typedef struct pbd_up_model pbd_up_model;

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
#ifndef PBD_UP_MALLOC
#define PBD_UP_MALLOC(sz) malloc(sz)
#define PBD_UP_FREE(p) free(p)
#endif

// ==== model =================================================================

// ==== subdivision ===========================================================

// ==== wrinkle ===============================================================

// ==== training ==============================================================

// ==== piu ===================================================================

// ==== wpsd ==================================================================

// ==== pdm ===================================================================

#endif /* PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED */
#endif /* PBD_UPSAMPLE_IMPLEMENTATION */
