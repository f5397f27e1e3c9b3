/* pbd_cuda.cu - the GPU companion of pbd.h: a world's step on a CUDA device.

   BUILD
       One file next to your program, one define in the file that holds
       pbd.h's implementation:
           nvcc -O3 --fmad=false -DPBD_CUDA app.c pbd_cuda.cu -o app
       or in two steps:
           cc -O2 -DPBD_CUDA -c app.c
           nvcc -O3 --fmad=false -c pbd_cuda.cu
           cc app.o pbd_cuda.o -L/usr/local/cuda/lib64 -lcudart -lstdc++ -lm -o app
       (--fmad=false: no fused multiply-adds, so that a GPU world gives a
       CPU world's bits; without it the results differ in the last bits.)
       Without PBD_CUDA nothing changes: pbd.h includes no CUDA header and
       needs nothing of this file. `make cuda` builds the examples this way.

   THE DEVICE
       pbd_world_desc.device chooses, per world:
           PBD_DEVICE_AUTO (default)  the GPU if one is found, else the CPU;
                                      the choice goes to the desc's log
                                      callback with PBD_OK
           PBD_DEVICE_GPU             the GPU, or pbd_world_create fails with
                                      PBD_ERROR_UNSUPPORTED and the reason (no
                                      device, driver too old, a pbd_cuda.cu
                                      built against another pbd.h) or with
                                      PBD_ERROR_OUT_OF_MEMORY
           PBD_DEVICE_CPU             the CPU
       pbd_world_device(w) tells which one a world got. One program can step
       a CPU world and a GPU world side by side (the tests compare them).
       The emulation (below) is a GPU only when asked for: auto declines it.

   WHAT RUNS ON THE GPU
       Prediction (gravity, point damping, objects' drag, pinned and kinematic particles);
       every constraint group type (distance, dihedral and isometric
       bending, area, tet volume, attachments, unilateral constraints,
       balloons' global volume) in Gauss-Seidel by the CPU's colours (the
       overflow colour in one thread) or in the averaged Jacobi mode; long
       range attachments (tethers, with their give-way and tightening);
       strain limits (triangles and edges, by the CPU's colours); strands
       (follow-the-leader, one thread per strand, and its velocity pass);
       tearing (on the host between steps, as pbd_world_tear is called:
       the next step uploads the torn cloth);
       colliders (plane, sphere, capsule, box, triangle mesh through its
       BVH, signed-distance grid) with continuous
       contacts, friction and restitution; the velocity pass; the
       angular-momentum restore; momentum-conserving damping per object and
       per cluster; the non-finite check and its rollback; particle
       contact and granular matter (friction between particles, objects
       coupled by their contacts); PBF fluids (the neighbour search by the
       CPU's hash grid, built on the device by a counting sort, density
       constraints with their warm start, the colliders' boundary density,
       XSPH viscosity and vorticity confinement); the fluid queries
       (pbd_world_particle_neighbors gives the last step's lists,
       pbd_fluid_densities) as on the CPU. Snapshots and restore work on
       GPU worlds as on CPU worlds.
       An acceleration field (pbd_world_set_acceleration_field) is the
       user's host function: a GPU world calls it on the host, once per
       substep and dynamic particle, in particle order (so a field that
       keeps state sees the CPU's calls, if not their threads): the
       positions and velocities come down before and the accelerations go
       up after (48 bytes a particle per substep, and a synchronisation).
       Your plugins (pbd_add_plugin) are host code too: their callbacks run on the host in the CPU's places,
       each stage that some plugin has bracketed by a copy of x, p and v
       (and the contacts, for pbd_world_particle_contact_push) down and of
       x, p and v back up, so a plugin sees and moves what it would on the
       CPU, and calls it makes read the current world (about 100 bytes a
       particle per stage: `project` runs every iteration). A plugin
       made with pbd_plugin_desc.device = 1 is device code instead: its
       callbacks get the device's x, p and v and launch their own kernels
       on the default stream, with no copy.
       pbd_sm.h (its implementation built with PBD_CUDA too): this file
       holds a private copy of it, and its surface volume
       (pbd_sm_add_surface_volume) and shape-matching bodies
       (pbd_sm_add_body, pbd_sm_add_lattice) are such device plugins,
       their arrays on the device from the moment they are added. The
       volume's loops run one thread per particle and its sums (the
       volume, the weights', the denominator) one thread each; a body's
       values, gather and update one thread per particle, its region
       sums by its plan's passes (naive: per region; lattice and mesh
       paths: per line or path, then per region; octree: per node level,
       or per line and slab of its summed-volume tables, then per region),
       its goals (rotation extraction included) and plastic flow one
       thread per region, a rigid body's weighted match and velocity fit
       one thread each; oriented particles (pbd_sm_add_oriented) their
       predictions and angular velocities one thread per particle, their
       groups' matches one after the other in one thread (Gauss-Seidel
       over overlapping groups, as on the CPU), their ellipsoids against
       the colliders one thread per particle, and a skin on them
       (pbd_sm_skin_apply_world) one thread per vertex from the device's
       particles and orientations into a device array, its data on the
       device from its first call; the multi-resolution cloth
       (pbd_sm_add_cloth) its V-cycle's passes per vertex (coarse
       positions, x^, restriction, prolongation, gathers) and per
       element (two-pass: every triangle's and edge's goals, then the
       gather; independent sets: colour by colour, the overflow colour in
       one thread), its bending per vertex and damping per triangle; all
       in the CPU's order: the CPU world's bits.
       pbd_upsample.h (likewise built with PBD_CUDA): a model of any method
       set to PBD_DEVICE_GPU (pbd_up_model_set_device) keeps its
       data on the device, and pbd_up_model_eval_world evaluates it from a
       GPU world's device particles into a device array (one thread per
       detail vertex: the stencil row, the local frame, the detail; PIU's
       lanes, then its oscillatory modes with coefficients from the host;
       PDM's coarse features on its feature mesh, then its heights along
       the detail mesh's normals; WPSD's edge strains, pose weights per
       coarse vertex, then its blended displacements), with the CPU's
       bits. A wrinkle mesh's fine cloth can be a GPU world
       (pbd_up_wrinkle_desc.device): pbd.h's kernels solve it, its
       one-sided projection is a device plugin; from your host coarse
       positions (pbd_up_wrinkle_update) each update sends the attachment
       targets and the projection's planes, which the host computes, and
       from a coarse GPU world (pbd_up_wrinkle_update_world) kernels
       compute them from its device particles (one thread per coarse
       triangle for its normal, per fine vertex for its target, the
       binding on the device from the first such update), and the fine
       positions stay on the device.
       Cloth self-collision (pbd_add_cloth_self_collision,
       pbd_add_collision_surface) runs on the GPU as on the CPU: the speed
       limit, the clusters' bounds and grids, the candidates (one thread
       per cluster of 32 vertices or edges), their colouring (one thread:
       serial on the CPU too), the projection colour by colour, the
       fail-safe and the velocity stops; the colours come back to the host
       once per substep (a few hundred bytes) to plan the launches, and
       the fail-safe's "anything crossed?" once per substep.

   DATA
       The host keeps the whole world, and every call validates and changes
       it there exactly as for a CPU world (same checks, same errors). The
       device holds a copy that the steps advance:
       - the first step after a change uploads the world (the particles,
         groups, objects, colliders, tethers, clusters, ...); after the
         setters a game calls every frame only what they changed goes
         up: the particles' arrays after particle positions, velocities,
         kinematic targets, a hair's transform or roots; the records (a
         few kilobytes, whatever the world's size) after numbers
         (gravity, solver settings, compliances, damping, viscosity,
         switches, ranges) and attachment targets, which fetch nothing
         first either (but for targets a kernel moved: after
         pbd_up_wrinkle_update_world the first target setter fetches
         them); the colliders (their poses and friction) go with
         every step;
       - after a step the host's particles are stale; the first call that
         reads or changes the world fetches them (x and v, the fluids'
         pressures and the objects' coupled flags, once per step at most;
         the neighbour lists only for pbd_world_particle_neighbors): pbd_world_positions(w) after each step, not a pointer kept
         from before it. That fetch writes the host's copy, so the const
         getters of a GPU world are not safe to call from several threads
         at once right after a step (one call first, then any number);
       - pbd_world_device_positions(w) gives the device's positions (4
         floats per particle, w the inverse mass) for CUDA-OpenGL interop:
         a renderer draws them without a copy.

   THE SAME BITS
       The kernels call the functions of pbd.h marked PBD_HD, the CPU
       solver's scalar path (which the SIMD path matches bit for bit): the
       constraint math, the XPBD update, the colliders' distances, the
       prediction, the velocity pass and the sums of damping and momentum
       exist once. Every kernel keeps the CPU's order where it matters: one
       thread per constraint of a colour (no two share a particle), one
       thread per particle for its contacts and tethers, one thread for the
       overflow colour and a balloon's volume. The sums of damping and of
       the angular-momentum restore run, on the CPU too, in blocks of 256
       particles (pbd.h, "sums over particles"): here one thread per block
       and component (each component is its own sum), one per particle
       applying the result, and one per object adding its blocks in order;
       damping clusters
       one after the other (a particle may be in several). The particle
       phase's grid is the CPU's (the same buckets; integer atomics count
       them, then each bucket is sorted by particle: the CPU's stable
       counting sort), each particle's list is the CPU's, in the grid's
       order, kept over substeps as the CPU keeps it (a kernel ORs the
       particles' "moved a quarter of its radius" into a flag that the
       list kernels read, so no read-back; the grid itself is sorted every
       substep; every substep a kernel puts each list's pairs within reach
       first and counts their loads, pbd__pp_activate), and the fluids'
       sums over a list run in the lanes of the host's SIMD width
       (pbd_world.lanes: the SIMD and scalar paths of the host's build sum
       neighbour j into lane j mod W, then the lanes in one tree). No
       float atomics. Constants that need libm (expf of the damping) are
       computed on the host. One exception: a fluid whose
       scorr_n is not an integer raises the kernel to that power with
       powf, whose last bit may differ between the GPU and the host's
       libm (the default 4 is exact). So a GPU world gives a CPU world's
       bits (with
       --fmad=false and CUDA's default IEEE division and square root;
       checked on an NVIDIA H200 with CUDA 13.0 for every feature, by
       the tests of tests/test_cuda.c, and in the emulation below on every
       machine).

   EMULATION
       Compiled as C++ by the host compiler with PBD_CUDA_EMULATE defined,
       this file runs its kernels on the CPU: device memory is host memory,
       and a launch runs one logical thread per element, in a seeded
       shuffled order, on OpenMP threads. A race between threads of one
       launch (two writing the same particle) then changes the result with
       the order, and the tests (tests/test_cuda.c, in `make test`) compare
       two orders and the CPU world bit for bit on every machine.
       pbd__cuda_emulate_seed(s) sets the order's seed. `make test-gpu`
       runs the same tests on a real GPU, and compute-sanitizer over them.

   LICENSE: as pbd.h (see the end of pbd.h). */

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic ignored "-Wunused-function" /* the private copy of pbd.h */
#endif
#define PBD_CUDA_COMPANION /* this file's private copy: no PBD_CUDA hooks */
#define PBD_IMPLEMENTATION
#define PBD_STATIC
#ifndef PBD_NO_SIMD /* (a scalar build may define it already) */
#define PBD_NO_SIMD /* the kernels run the scalar reference path */
#endif
#ifndef PBD_NO_OPENMP
#define PBD_NO_OPENMP /* the host code here is serial */
#endif
#include "pbd.h"
#define PBD_SM_IMPLEMENTATION /* and of pbd_sm.h, whose plugins run here on a GPU world */
#include "pbd_sm.h"
#define PBD_UPSAMPLE_IMPLEMENTATION /* and of pbd_upsample.h, whose models evaluate here */
#include "pbd_upsample.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PBD_CUDA_EMULATE
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif
#else
#include <cuda_runtime.h>
#endif

// ==== launches ==============================================================
/* A kernel is a grid-stride loop over its elements (PBD__GRID_LOOP). On a
   GPU, pbd__launch starts enough blocks of 256 threads; emulated, it runs
   one logical thread per element in a shuffled order on OpenMP threads. */

#ifdef PBD_CUDA_EMULATE
#define PBD__KERNEL static void
static thread_local int pbd__emu_tid, pbd__emu_threads;
#define PBD__GRID_LOOP(i, n) for (int i = pbd__emu_tid; i < (n); i += pbd__emu_threads)
static unsigned pbd__emu_seed = 1u;
enum { PBD__EMU_PARALLEL_MIN = 2048 };
#else
#define PBD__KERNEL static __global__ void
#define PBD__GRID_LOOP(i, n) \
    for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < (n); i += (int)(blockDim.x * gridDim.x))
#endif

extern "C" void pbd__cuda_emulate_seed(unsigned seed) {
#ifdef PBD_CUDA_EMULATE
    pbd__emu_seed = seed ? seed : 1u;
#else
    (void)seed; /* a real GPU runs in its own order */
#endif
}

typedef struct pbd__f4 {
    float v[4];
} pbd__f4;

/* A particle set whose sums run in blocks (pbd.h, "sums over particles"):
   an object (list NULL, its range), a piece of an object that is damped
   piece by piece (pbd.h, "pieces of an object": a part of its list) or a
   damping cluster (its list). */
typedef struct pbd__set {
    const int *list;
    int first, count, blk0; /* its blocks: blk0 .. blk0 + pbd__sum_blocks(count) */
    float damping;
} pbd__set;

/* A set's rigid fit (damping) or centre and turn (momentum restore). */
typedef struct pbd__fit {
    double xc[3], vc[3], om[3];
    int mode; /* -1: nothing to do; 0: dynamic particles; 1: anchors */
} pbd__fit;

/* The sets (objects first, then the pieces of the objects that have
   them, then clusters), their blocks and the blocks' sums. An object with
   pieces is damped through them: its own set has damping 0 (its restore
   still takes its range). */
typedef struct pbd__sums {
    pbd__set *sets;
    int *blk_set;          /* per block: its set */
    pbd__moments *ma, *md; /* per block: the anchors' and the dynamic particles' moments */
    pbd__spin *sp;         /* per block: the spin of the chosen kind */
    double *lb;            /* per block of an object: its angular momentum about the origin */
    int *flag;             /* per block: it holds an anchor / a pushed particle */
    pbd__fit *fit;         /* per set */
    int nsets, nblk, nobj_blk;
    int npieces, damp_blk; /* the pieces' sets; the blocks of objects and pieces */
} pbd__sums;

/* A device grid's bucket starts (its record's), the buckets' fill
   counters and the prefix sum's levels: level 0 is the starts, level l + 1
   the chunk totals of level l (one after another in sums), up to a level
   of one chunk. */
enum { PBD__SCAN_CHUNK = 32, PBD__SCAN_LEVELS = 8 };
typedef struct pbd__dscan {
    int *start, *fill, *sums;
    int n[PBD__SCAN_LEVELS], off[PBD__SCAN_LEVELS]; /* each level's length and place in sums */
    int nlevels;
} pbd__dscan;

/* The device's state of one world. */
typedef struct pbd__buf {
    void *p;
    size_t cap;
} pbd__buf;

struct pbd__gpu {
    pbd_world shadow; /* the world as the kernels see it: device pointers */
    pbd_world *dw;    /* the shadow in device memory */
    int *bad;         /* the non-finite check's flag */
    float *lambdas;   /* every group's multipliers, one block (zeroed every substep) */
    size_t nlambdas;
    pbd__lra *lras; /* host image of the device's tether records (their device arrays) */
    pbd__sums sums; /* the blocked sums of damping and momentum (device arrays) */
    float *set_k;   /* per set: the damping fraction of a substep */
    float *keep;    /* per object: its drag factor of a substep (pbd__drag_keeps) */
    int drag_on;    /* this step: some object has a drag (the prediction reads keep) */
    /* the particle phase's grid build: the buckets' fill counters, the
       scan's chunk sums; the objects' coupled flags at the step's start
       and a copy for the host */
    pbd__dscan pp_scan, sc_scan[2]; /* the grids' prefix sums: particle phase, self-collision's two */
    pbd__selfcol sc;                /* self-collision: the device record's image (device arrays) ... */
    pbd__selfcol *sc_dev;           /* ... the record on the device (NULL: none) ... */
    pbd__selfcol scv;               /* ... and a copy of it read back (its colours) */
    int *flag;                      /* the fail-safe's "a candidate crossed" */
    int *pp_stale;                  /* the particle phase builds its lists (pbd__k_pp_stale) */
    int *coupled, *coupled_out;
    float pressure_h_keep;
    /* device buffers, reused by the next upload in the same order */
    pbd__buf *bufs;
    int nbufs, used;
    /* a settings upload (pbd__upload_settings): the PBD__GPU_DIRTY_* bits it
       serves; broken: it needed a new buffer (the world's structure changed) */
    int refresh, refresh_broken;
    size_t bytes_up; /* bytes sent to the device since the world was opened */
    /* host scratch sized at upload: the colliders' poses at the step's start
       (rollback), the damping fractions */
    pbd__collider *col_keep;
    float *hk, *hkeep;
    int *hc;                           /* the objects' coupled flags on their way to the host */
    struct pbd__f4 *field, *field_dev; /* an acceleration field's terms of a substep (host, device) */
    int nlras_cap;
#ifdef PBD_CUDA_EMULATE
    std::vector<int> *order;
    unsigned launches;
#endif
};

#ifdef PBD_CUDA_EMULATE
/* A seeded shuffle of 0..n-1 (Fisher-Yates with xorshift), different per launch. */
static const int *pbd__emu_order(pbd__gpu *g, int n) {
    std::vector<int> &o = *g->order;
    o.resize((size_t)n);
    for (int i = 0; i < n; ++i) o[(size_t)i] = i;
    unsigned s = pbd__emu_seed * 2654435761u + (++g->launches) * 40503u;
    for (int i = n - 1; i > 0; --i) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        int j = (int)(s % (unsigned)(i + 1));
        int t = o[(size_t)i];
        o[(size_t)i] = o[(size_t)j];
        o[(size_t)j] = t;
    }
    return o.data();
}
template <typename... P, typename... A> static void pbd__launch(pbd__gpu *g, int n, void (*k)(P...), A... a) {
    if (n <= 0) return;
    const int *order = pbd__emu_order(g, n);
    /* in parallel where there is enough to share: the shuffled order alone
       already makes a race show, and a parallel region costs microseconds */
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 64) if (n >= PBD__EMU_PARALLEL_MIN)
#endif
    for (int j = 0; j < n; ++j) {
        pbd__emu_tid = order[j];
        pbd__emu_threads = n;
        k(a...);
    }
}
#else
template <typename... P, typename... A> static void pbd__launch(pbd__gpu *g, int n, void (*k)(P...), A... a) {
    (void)g;
    if (n <= 0) return;
    int threads = 256, blocks = (n + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536; /* the grid-stride loop does the rest */
    k<<<blocks, threads>>>(a...);
}
#endif

// ==== device memory ==========================================================

#ifdef PBD_CUDA_EMULATE
static int pbd__dmalloc(void **p, size_t n) {
    *p = malloc(n ? n : 1);
    return *p != NULL;
}
static void pbd__dfree(void *p) { free(p); }
static void pbd__h2d(void *d, const void *h, size_t n) {
    if (n) memcpy(d, h, n);
}
static void pbd__d2h(void *h, const void *d, size_t n) {
    if (n) memcpy(h, d, n);
}
static void pbd__d2d(void *d, const void *s, size_t n) {
    if (n) memcpy(d, s, n);
}
static void pbd__dzero(void *d, size_t n) {
    if (n) memset(d, 0, n);
}
static void pbd__dsync(void) {}
#else
static int pbd__dmalloc(void **p, size_t n) { return cudaMalloc(p, n ? n : 1) == cudaSuccess; }
static void pbd__dfree(void *p) { cudaFree(p); }
static void pbd__h2d(void *d, const void *h, size_t n) {
    if (n) cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);
}
static void pbd__d2h(void *h, const void *d, size_t n) {
    if (n) cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
}
static void pbd__d2d(void *d, const void *s, size_t n) {
    if (n) cudaMemcpy(d, s, n, cudaMemcpyDeviceToDevice);
}
static void pbd__dzero(void *d, size_t n) {
    if (n) cudaMemset(d, 0, n);
}
static void pbd__dsync(void) { cudaDeviceSynchronize(); }
#endif

/* The next device buffer of an upload, at least n bytes (NULL: out of
   memory). Buffers are taken in the same order by every upload, so an
   upload of an unchanged world allocates nothing. */
static void *pbd__take(pbd__gpu *g, size_t n) {
    if (n == 0) n = 1;
    if (g->used == g->nbufs) {
        pbd__buf *b = (pbd__buf *)realloc(g->bufs, sizeof *b * (size_t)(g->nbufs + 16));
        if (!b) return NULL;
        memset(b + g->nbufs, 0, sizeof *b * 16);
        g->bufs = b;
        g->nbufs += 16;
    }
    pbd__buf *b = &g->bufs[g->used];
    if (b->cap < n && g->refresh) { /* the structure changed: nothing is sent (pbd__upload_settings) */
        g->refresh_broken = 1;
        g->used++;
        return b->p ? b->p : (void *)g;
    }
    if (b->cap < n) {
        pbd__dfree(b->p);
        b->p = NULL;
        b->cap = 0;
        if (!pbd__dmalloc(&b->p, n)) return NULL;
        b->cap = n;
    }
    g->used++;
    return b->p;
}
static void pbd__send(pbd__gpu *g, void *d, const void *h, size_t n) {
    g->bytes_up += n;
    pbd__h2d(d, h, n);
}
/* A device copy of n bytes of host memory (NULL host: none). A settings
   upload (g->refresh) takes the same buffer and sends only what `send`
   says: the records, which hold the settings. */
static int pbd__copy_up(pbd__gpu *g, void **dev, const void *host, size_t n, int send) {
    if (!host) {
        *dev = NULL;
        return 1;
    }
    *dev = pbd__take(g, n);
    if (!*dev) return 0;
    if ((send || !g->refresh) && !g->refresh_broken) pbd__send(g, *dev, host, n);
    return 1;
}
#define PBD__UP_IF(g, field, host, count, send) \
    pbd__copy_up((g), (void **)&(field), (host), sizeof *(host) * (size_t)(count), (send))
/* an array (state or structure: what a settings upload keeps) */
#define PBD__UP(g, field, host, count) PBD__UP_IF(g, field, host, count, 0)
/* records of things (their settings, and device pointers) */
#define PBD__UP_RECORDS(g, field, host, count) PBD__UP_IF(g, field, host, count, 1)
#define PBD__SCRATCH(g, field, count) ((field) = (decltype(field))pbd__take((g), sizeof *(field) * (size_t)(count)))

// ==== upload =================================================================

/* The number of pieces of the objects that are damped piece by piece. */
static int pbd__piece_count(const pbd_world *w) {
    int np = 0;
    for (int o = 0; o < w->nobjects; ++o)
        if (pbd__object_pieces(w, o)) np += pbd__object_pieces(w, o)->count;
    return np;
}

/* The sets and blocks of the blocked sums; clusters: the host image of
   the uploaded cluster records (their device lists); pieces[o]: object
   o's piece list on the device (NULL: it is one piece, its range). */
static int pbd__upload_sums(pbd__gpu *g, const pbd_world *w, const pbd__cluster *clusters, int *const *pieces) {
    pbd__sums *S = &g->sums;
    int np = pbd__piece_count(w), nsets = w->nobjects + np + w->nclusters, nblk = 0;
    pbd__set *sets = (pbd__set *)malloc(sizeof(pbd__set) * (size_t)(nsets + 1));
    if (!sets) return 0;
    for (int o = 0, i = w->nobjects; o < w->nobjects; ++o) { /* the objects, and after them their pieces */
        const pbd__pieces *P = pbd__object_pieces(w, o);
        sets[o].list = NULL;
        sets[o].first = w->objects[o].first;
        sets[o].count = w->objects[o].count;
        sets[o].damping = P ? 0.0f : w->objects[o].damping;
        for (int p = 0; P && p < P->count; ++p, ++i) {
            sets[i].list = pieces[o] + P->start[p];
            sets[i].first = 0;
            sets[i].count = P->start[p + 1] - P->start[p];
            sets[i].damping = w->objects[o].damping;
        }
    }
    for (int c = 0; c < w->nclusters; ++c) {
        pbd__set *t = &sets[w->nobjects + np + c];
        t->list = clusters[c].particles;
        t->first = 0;
        t->count = clusters[c].count;
        t->damping = clusters[c].damping;
    }
    for (int i = 0; i < nsets; ++i) {
        sets[i].blk0 = nblk;
        nblk += pbd__sum_blocks(sets[i].count);
        if (i == w->nobjects - 1) S->nobj_blk = nblk;
        if (i == w->nobjects + np - 1) S->damp_blk = nblk;
    }
    if (w->nobjects == 0) S->nobj_blk = 0;
    if (w->nobjects + np == 0) S->damp_blk = 0;
    int *blk_set = (int *)malloc(sizeof(int) * (size_t)(nblk + 1));
    int ok = blk_set != NULL;
    for (int i = 0; ok && i < nsets; ++i)
        for (int b = 0; b < pbd__sum_blocks(sets[i].count); ++b) blk_set[sets[i].blk0 + b] = i;
    S->nsets = nsets;
    S->nblk = nblk;
    S->npieces = np;
    ok = ok && PBD__UP_RECORDS(g, S->sets, sets, nsets) && PBD__UP(g, S->blk_set, blk_set, nblk) &&
         PBD__SCRATCH(g, S->ma, nblk) && PBD__SCRATCH(g, S->md, nblk) && PBD__SCRATCH(g, S->sp, nblk) &&
         PBD__SCRATCH(g, S->lb, 3 * (size_t)nblk) && PBD__SCRATCH(g, S->flag, nblk) && PBD__SCRATCH(g, S->fit, nsets);
    free(sets);
    free(blk_set);
    return ok;
}

/* A group's arrays on the device (slot, the attachments' user index map,
   stays on the host). */
static int pbd__upload_group(pbd__gpu *g, pbd__group *d, const pbd__group *h, float *lambda) {
    *d = *h;
    d->lambda = lambda;
    size_t nidx = h->ncolors == 0 ? (size_t)h->ntris * 3 : (size_t)h->count * (size_t)h->arity;
    size_t nrest = (size_t)(h->count > 0 ? h->count : 1) * (size_t)h->rest_stride;
    d->slot = NULL;
    int targets = (g->refresh & PBD__GPU_DIRTY_TARGETS) && h->type == PBD_CONSTRAINT_ATTACHMENT;
    return PBD__UP(g, d->idx, h->idx, nidx) && PBD__UP_IF(g, d->rest, h->rest, nrest, targets) &&
           PBD__UP(g, d->verts, h->verts, h->nverts) && PBD__UP(g, d->scratch, h->scratch, 6 * (size_t)h->nverts) &&
           PBD__UP(g, d->color_start, h->color_start, h->ncolors + 1);
}

static int pbd__upload_lra(pbd__gpu *g, pbd__lra *d, const pbd__lra *h) {
    *d = *h;
    long nt = h->count > 0 && h->start ? h->start[h->count] : 0;
    return PBD__UP(g, d->particles, h->particles, h->count) && PBD__UP(g, d->start, h->start, h->count + 1) &&
           PBD__UP(g, d->anchor, h->anchor, nt) && PBD__UP(g, d->length, h->length, nt) &&
           PBD__UP(g, d->reach, h->reach, 2 * nt);
}

/* Mesh and SDF-grid colliders: the mesh, its BVH and its grid. */
static int pbd__upload_meshcols(pbd__gpu *g, const pbd_world *w) {
    pbd__meshcol *mc = (pbd__meshcol *)malloc(sizeof(pbd__meshcol) * (size_t)(w->nmeshcols + 1));
    int ok = mc != NULL;
    for (int i = 0; ok && i < w->nmeshcols; ++i) {
        const pbd__meshcol *h = &w->meshcols[i];
        size_t cells = h->grid ? (size_t)(h->dims[0] + 1) * (size_t)(h->dims[1] + 1) * (size_t)(h->dims[2] + 1) : 0;
        mc[i] = *h;
        ok = PBD__UP(g, mc[i].verts, h->verts, 3 * (size_t)h->nv) &&
             PBD__UP(g, mc[i].tris, h->tris, 3 * (size_t)h->nt) && PBD__UP(g, mc[i].pn, h->pn, 21 * (size_t)h->nt) &&
             PBD__UP(g, mc[i].order, h->order, h->nt) && PBD__UP(g, mc[i].nodes, h->nodes, h->nnodes) &&
             PBD__UP(g, mc[i].grid, h->grid, cells);
    }
    ok = ok && PBD__UP_RECORDS(g, g->shadow.meshcols, mc, w->nmeshcols);
    free(mc);
    return ok;
}

/* Strain limits: private groups (their multipliers unused). */
static int pbd__upload_limits(pbd__gpu *g, const pbd_world *w) {
    pbd__limit *limits = (pbd__limit *)malloc(sizeof(pbd__limit) * (size_t)(w->nlimits + 1));
    int ok = limits != NULL;
    for (int i = 0; ok && i < w->nlimits; ++i) {
        limits[i] = w->limits[i];
        ok = pbd__upload_group(g, &limits[i].g, &w->limits[i].g, NULL);
    }
    ok = ok && PBD__UP_RECORDS(g, g->shadow.limits, limits, w->nlimits);
    free(limits);
    return ok;
}

/* Strand sets: their particles, segments and the FTL corrections (the
   hair's roots stay on the host: they set kinematic targets). */
static int pbd__upload_strands(pbd__gpu *g, const pbd_world *w) {
    pbd__strands *st = (pbd__strands *)malloc(sizeof(pbd__strands) * (size_t)(w->nstrands + 1));
    int ok = st != NULL;
    for (int i = 0; ok && i < w->nstrands; ++i) {
        const pbd__strands *h = &w->strands[i];
        st[i] = *h;
        st[i].root = NULL;
        ok = PBD__UP(g, st[i].start, h->start, h->start ? h->nstrands + 1 : 0) &&
             PBD__UP(g, st[i].idx, h->idx, h->nparticles) && PBD__UP(g, st[i].rest, h->rest, h->nparticles) &&
             PBD__UP(g, st[i].d, h->d, 3 * (size_t)h->nparticles);
    }
    ok = ok && PBD__UP_RECORDS(g, g->shadow.strands, st, w->nstrands);
    free(st);
    return ok;
}

/* Scratch of a device grid build (d: the grid's device record image, its
   start array already taken): the levels of its prefix sum. Chunks of 32
   and a level per chunk size: every thread reads a few neighbouring
   words, and a table of 2^18 buckets takes 7 launches (one thread per
   256 buckets read them strided, 219 us on an H200, now 64). */
static int pbd__upload_scan(pbd__gpu *g, pbd__dscan *scan, const pbd__grid *d) {
    size_t nb = (size_t)d->mask + 1, total = 0;
    int l = 0;
    scan->start = d->start;
    scan->n[0] = (int)(nb + 1);
    scan->off[0] = 0;
    while (scan->n[l] > PBD__SCAN_CHUNK && l + 1 < PBD__SCAN_LEVELS) {
        scan->n[l + 1] = (scan->n[l] + PBD__SCAN_CHUNK - 1) / PBD__SCAN_CHUNK;
        scan->off[l + 1] = (int)total;
        total += (size_t)scan->n[l + 1];
        l++;
    }
    scan->nlevels = l;
    return PBD__SCRATCH(g, scan->fill, nb) && PBD__SCRATCH(g, scan->sums, total + 1);
}

/* Particle contact and fluids (pbd.h "==== particle contact", "==== fluids"):
   the records of the fluids, the particles taking part and the scratch of
   the grid, the lists and the passes. The reach (the grid's cell) only
   changes with what marks the world for upload. The device keeps the
   slots in the grid's order: the CPU lays them out in space for its
   caches, but the lists follow the grid's order either way, and so do the
   sums over them. */
static int pbd__upload_pp(pbd__gpu *g, const pbd_world *w) {
    const pbd__particle_phase *h = &w->pp;
    pbd__particle_phase *d = &g->shadow.pp;
    memset(d, 0, sizeof *d);
    d->nfluids = d->fluid_cap = h->nfluids;
    d->mu_s = h->mu_s;
    d->mu_d = h->mu_d;
    d->pressure_h = h->pressure_h;
    d->np = d->cap = h->np;
    if (!PBD__UP_RECORDS(g, d->fluids, h->fluids, h->nfluids)) return 0;
    if (h->np == 0) return 1;
    size_t n = (size_t)h->np, nb = (size_t)h->grid.mask + 1;
    d->reach = pbd__pp_reach(w);
    d->grid = h->grid; /* the host's table: the same buckets */
    pbd__grid_set_cell(&d->grid, d->reach, h->np);

    return PBD__UP(g, d->ids, h->ids, n) && PBD__UP(g, d->fluid, h->fluid, n) && PBD__UP(g, d->object, h->object, n) &&
           PBD__SCRATCH(g, d->slot, n) && PBD__SCRATCH(g, d->sid, n) && PBD__SCRATCH(g, d->sfluid, n) &&
           PBD__SCRATCH(g, d->sobject, n) && PBD__SCRATCH(g, d->nbr, n * PBD_MAX_NEIGHBORS) &&
           PBD__SCRATCH(g, d->nbr_count, n) && PBD__SCRATCH(g, d->nbr_listed, n) && PBD__SCRATCH(g, d->cload, n) &&
           PBD__SCRATCH(g, d->nbr_off, n) && PBD__SCRATCH(g, d->cross, n) && PBD__SCRATCH(g, d->pure, n) &&
           PBD__SCRATCH(g, d->lambda, n) && PBD__SCRATCH(g, d->density, n) && PBD__SCRATCH(g, d->omega_len, n) &&
           PBD__SCRATCH(g, d->spos, n) && PBD__SCRATCH(g, d->dp, n) && PBD__SCRATCH(g, d->omega, n) &&
           PBD__SCRATCH(g, d->svel, n) && PBD__SCRATCH(g, d->gslot, n) &&
           PBD__SCRATCH(g, d->wall, n * PBD__FLUID_WALLS) && PBD__SCRATCH(g, d->nwall, n) &&
           PBD__SCRATCH(g, d->grid.start, nb + 1) && PBD__SCRATCH(g, d->grid.sorted, n) &&
           PBD__SCRATCH(g, d->grid.key, n) && PBD__SCRATCH(g, d->grid.pos, 4 * n) && PBD__SCRATCH(g, d->built, n) &&
           PBD__SCRATCH(g, g->pp_stale, 1) && pbd__upload_scan(g, &g->pp_scan, &d->grid);
}

/* Self-collision (pbd.h "==== self-collision"): the surfaces' records
   (their triangle lists stay on the host: the tables below hold them),
   the tables, the candidates (state: the host's, current after a sync)
   and the scratch of detection and colouring; the two grids of cluster
   centres on the host's tables. */
static int pbd__upload_selfcol(pbd__gpu *g, const pbd_world *w) {
    pbd_world *sh = &g->shadow;
    g->sc_dev = NULL;
    sh->selfcol = NULL;
    sh->surfaces = NULL;
    const pbd__selfcol *h = w->selfcol;
    if (!h) return 1;
    pbd__surface *sf = (pbd__surface *)malloc(sizeof(pbd__surface) * (size_t)(w->nsurfaces + 1));
    if (!sf) return 0;
    for (int i = 0; i < w->nsurfaces; ++i) {
        sf[i] = w->surfaces[i];
        sf[i].tris = NULL;
    }
    int ok = PBD__UP_RECORDS(g, sh->surfaces, sf, w->nsurfaces);
    free(sf);
    pbd__selfcol *d = &g->sc;
    *d = *h;
    size_t nv = (size_t)h->nv, nt = (size_t)h->nt, ne = (size_t)h->ne, K = PBD__SC_K;
    size_t vc = (size_t)h->vc, tc = (size_t)h->tc, ec = (size_t)h->ec;
    size_t slots = nv * PBD__SC_PT + ne * PBD__SC_EE;
    d->pt_step = NULL; /* the step's copies below, for a rollback (eord does not change in a step) */
    d->npt_step = NULL;
    d->ee_step = NULL;
    d->nee_step = NULL;
    d->eord_step = NULL;
    ok = ok && PBD__UP(g, d->vp, h->vp, nv) && PBD__UP(g, d->vs, h->vs, nv) && PBD__UP(g, d->tv, h->tv, 3 * nt) &&
         PBD__UP(g, d->ts, h->ts, nt) && PBD__UP(g, d->ev, h->ev, 2 * ne) && PBD__UP(g, d->es, h->es, ne) &&
         PBD__UP(g, d->x0, h->x0, 3 * nv) && PBD__SCRATCH(g, d->reach, nv) && PBD__SCRATCH(g, d->xv, nv) &&
         PBD__SCRATCH(g, d->frozen, nv) && PBD__UP(g, d->vord, h->vord, vc * K) &&
         PBD__UP(g, d->tord, h->tord, tc * K) && PBD__UP(g, d->eord, h->eord, ec * K + 1) &&
         PBD__UP(g, d->tlv, h->tlv, tc * 3 * K) && PBD__UP(g, d->elv, h->elv, ec * 2 * K + 1) &&
         PBD__UP(g, d->epos, h->epos, ne + 1) && PBD__SCRATCH(g, d->vbox, vc * 6) && PBD__SCRATCH(g, d->tbox, tc * 6) &&
         PBD__SCRATCH(g, d->ebox, ec * 6 + 1) && PBD__SCRATCH(g, d->tlane, tc * 6 * K) &&
         PBD__SCRATCH(g, d->elane, ec * 16 * K + 1) && PBD__SCRATCH(g, d->tcent, tc * 3) &&
         PBD__SCRATCH(g, d->ecent, ec * 3 + 1) && PBD__UP(g, d->pt, h->pt, nv * PBD__SC_PT) &&
         PBD__UP(g, d->npt, h->npt, nv) && PBD__UP(g, d->ee, h->ee, ne * PBD__SC_EE) &&
         PBD__UP(g, d->nee, h->nee, ne) && PBD__SCRATCH(g, d->ptq, nv * PBD__SC_PT) &&
         PBD__SCRATCH(g, d->eeq, ne * PBD__SC_EE + 1) && PBD__SCRATCH(g, d->pt_step, nv * PBD__SC_PT) &&
         PBD__SCRATCH(g, d->npt_step, nv) && PBD__SCRATCH(g, d->ee_step, ne * PBD__SC_EE + 1) &&
         PBD__SCRATCH(g, d->nee_step, ne + 1) && PBD__SCRATCH(g, d->cmask, nv) && PBD__SCRATCH(g, d->cand, slots) &&
         PBD__SCRATCH(g, d->ccol, slots) && PBD__SCRATCH(g, d->corder, slots) && PBD__SCRATCH(g, g->flag, 1);
    pbd__grid *grids[2] = {&d->gt, &d->ge};
    for (int k = 0; ok && k < 2; ++k) {
        pbd__grid *G = grids[k];
        size_t nb = (size_t)G->mask + 1, cap = (size_t)G->cap;
        ok = PBD__SCRATCH(g, G->start, nb + 1) && PBD__SCRATCH(g, G->sorted, cap) && PBD__SCRATCH(g, G->key, cap) &&
             PBD__SCRATCH(g, G->pos, 4 * cap) && pbd__upload_scan(g, &g->sc_scan[k], G);
    }
    ok = ok && PBD__UP_RECORDS(g, g->sc_dev, d, 1);
    sh->selfcol = g->sc_dev;
    return ok;
}

/* The shadow world (the world's record with device pointers) for the kernels. */
static int pbd__upload_shadow(pbd__gpu *g) {
    g->dw = (pbd_world *)pbd__take(g, sizeof(pbd_world));
    if (!g->dw) return 0;
    if (!g->refresh_broken) pbd__send(g, g->dw, &g->shadow, sizeof g->shadow);
    return 1;
}

/* The whole world onto the device: the shadow world with device pointers,
   copied to device memory for the kernels. */
static int pbd__upload(pbd__gpu *g, const pbd_world *w) {
    g->used = 0;
    g->dw = NULL; /* until this upload is complete: nothing to fetch (the host has it all) */
    pbd_world *s = &g->shadow;
    *s = *w;
    int n = w->n;
    /* what the kernels do not use, or GPU worlds do not have */
    s->mass = NULL;
    s->object_drag = NULL; /* the drags reach the kernels as factors (pbd__drag_dev) */
    s->object_keep = NULL;
    s->contact_ids = NULL;
    s->object_coupled = NULL;
    s->pose_step = NULL;
    s->tears = NULL; /* tearing runs on the host between steps (pbd_world_tear), which marks the world */
    s->plugins = NULL;
    s->gpu = NULL;
    int ok = PBD__UP(g, s->x, w->x, n) && PBD__UP(g, s->v, w->v, n) && PBD__UP(g, s->p, w->p, n) &&
             PBD__UP(g, s->radius, w->radius, n) && PBD__UP(g, s->flags, w->flags, n) &&
             PBD__UP(g, s->owner, w->owner, n) && PBD__UP(g, s->kin_target, w->kin_target, n) &&
             PBD__UP(g, s->kin_from, w->kin_from, n) && PBD__SCRATCH(g, s->delta, n) && PBD__SCRATCH(g, s->x_step, n) &&
             PBD__SCRATCH(g, s->v_step, n) && PBD__SCRATCH(g, s->ncontact, n) &&
             PBD__SCRATCH(g, s->contacts, w->contact_cap) && PBD__SCRATCH(g, s->contact_turn, 3 * (size_t)n) &&
             PBD__SCRATCH(g, s->pose_from, w->ncolliders) && PBD__SCRATCH(g, s->pose_to, w->ncolliders) &&
             PBD__SCRATCH(g, s->object_l, 4 * (size_t)w->nobjects) && PBD__UP(g, s->pressure, w->pressure, n) &&
             PBD__SCRATCH(g, s->pressure_step, n) && PBD__SCRATCH(g, g->coupled, w->nobjects) &&
             PBD__SCRATCH(g, g->coupled_out, w->nobjects) && pbd__upload_pp(g, w) && pbd__upload_selfcol(g, w) &&
             PBD__UP_RECORDS(g, s->colliders, w->colliders, w->ncolliders);
    if (!ok) return 0;
    if (n && !g->refresh) pbd__dzero(s->ncontact, (size_t)n);
    /* groups, tethers and clusters: their arrays first, then the records */
    if (w->nlras + 1 > g->nlras_cap) {
        free(g->lras);
        g->nlras_cap = 0;
        g->lras = (pbd__lra *)malloc(sizeof(pbd__lra) * (size_t)(w->nlras + 1));
        if (!g->lras) return 0;
        g->nlras_cap = w->nlras + 1;
    }
    pbd__lra *lras = g->lras;
    /* the multipliers: one block, which one memset zeroes every substep */
    g->nlambdas = 0;
    for (int i = 0; i < w->ngroups; ++i) g->nlambdas += (size_t)(w->groups[i].count > 0 ? w->groups[i].count : 1);
    if (!PBD__SCRATCH(g, g->lambdas, g->nlambdas)) return 0;
    if (!g->refresh) pbd__dzero(g->lambdas, sizeof(float) * g->nlambdas);
    pbd__group *groups = (pbd__group *)malloc(sizeof(pbd__group) * (size_t)(w->ngroups + 1));
    pbd__cluster *clusters = (pbd__cluster *)malloc(sizeof(pbd__cluster) * (size_t)(w->nclusters + 1));
    pbd__object *objects = (pbd__object *)malloc(sizeof(pbd__object) * (size_t)(w->nobjects + 1));
    int **pieces = (int **)calloc((size_t)w->nobjects + 1, sizeof(int *)); /* device piece lists */
    ok = groups && lras && clusters && objects && pieces;
    size_t off = 0;
    for (int i = 0; ok && i < w->ngroups; ++i) {
        ok = pbd__upload_group(g, &groups[i], &w->groups[i], g->lambdas + off);
        off += (size_t)(w->groups[i].count > 0 ? w->groups[i].count : 1);
    }
    for (int i = 0; ok && i < w->nlras; ++i) ok = pbd__upload_lra(g, &lras[i], &w->lras[i]);
    for (int i = 0; ok && i < w->nclusters; ++i) {
        clusters[i] = w->clusters[i];
        ok = PBD__UP(g, clusters[i].particles, w->clusters[i].particles, w->clusters[i].count);
    }
    for (int i = 0; ok && i < w->nobjects; ++i) {
        const pbd__pieces *P = pbd__object_pieces(w, i);
        objects[i] = w->objects[i];
        objects[i].perm = NULL; /* the builder's numbering: host only */
        if (P) ok = PBD__UP(g, pieces[i], P->list, P->start[P->count]);
    }
    int nsets = w->nobjects + pbd__piece_count(w) + w->nclusters;
    ok = ok && pbd__upload_sums(g, w, clusters, pieces) && pbd__upload_limits(g, w) && pbd__upload_strands(g, w) &&
         pbd__upload_meshcols(g, w);
    ok = ok && PBD__UP_RECORDS(g, s->groups, groups, w->ngroups) && PBD__UP_RECORDS(g, s->lras, lras, w->nlras) &&
         PBD__UP_RECORDS(g, s->clusters, clusters, w->nclusters) &&
         PBD__UP_RECORDS(g, s->objects, objects, w->nobjects) && PBD__SCRATCH(g, g->set_k, nsets) &&
         PBD__SCRATCH(g, g->keep, w->nobjects);
    free(groups);
    free(clusters);
    free(objects);
    free(pieces);
    if (!ok) return 0;
    if (w->accel && !PBD__SCRATCH(g, g->field_dev, n)) return 0;
    if (g->refresh) return pbd__upload_shadow(g); /* the host scratch below is sized already */
    /* host scratch for the steps */
    free(g->col_keep);
    free(g->hk);
    free(g->hkeep);
    free(g->hc);
    free(g->field);
    g->field = NULL;
    g->col_keep = (pbd__collider *)malloc(sizeof(pbd__collider) * (size_t)(w->ncolliders + 1));
    g->hk = (float *)malloc(sizeof(float) * (size_t)(nsets + 1));
    g->hkeep = (float *)malloc(sizeof(float) * (size_t)(w->nobjects + 1));
    g->hc = (int *)malloc(sizeof(int) * (size_t)(w->nobjects + 1));
    if (!g->col_keep || !g->hk || !g->hkeep || !g->hc) return 0;
    if (w->accel && !(g->field = (pbd__f4 *)malloc(sizeof(pbd__f4) * (size_t)(n + 1)))) return 0;
    return pbd__upload_shadow(g);
}

/* What the setters of numbers changed (PBD__GPU_DIRTY_SETTINGS, _TARGETS:
   `what`): pbd__upload again, taking the same buffers, sending the records
   (the world's, its things') and, for _TARGETS, the attachment groups'
   targets; the arrays keep what the device holds (the host's copy may be
   stale: these setters fetch nothing). Where it would need a new buffer
   (the world's structure changed after all, which no such setter does),
   it sends nothing and keeps every buffer, so the device's state comes
   down to the host, and the whole upload follows. */
static int pbd__upload_settings(pbd__gpu *g, const pbd_world *w, int what) {
    g->refresh = what;
    g->refresh_broken = 0;
    int ok = pbd__upload(g, w);
    g->refresh = 0;
    if (ok && !g->refresh_broken) return 1;
    pbd__cuda_pull((pbd_world *)w, w->gpu_host_stale);
    ((pbd_world *)w)->gpu_host_stale = 0;
    return pbd__upload(g, w);
}

// ==== kernels ================================================================
/* Each is one loop of pbd.h's substep (pbd__substep_body) over its
   independent elements, calling the same PBD_HD function. */

PBD__KERNEL pbd__k_kin_from(pbd_world *w) {
    PBD__GRID_LOOP(i, w->n) {
        if (w->flags[i] & PBD__KINEMATIC) w->kin_from[i] = pbd__p3(w->x[i]);
    }
}

PBD__KERNEL pbd__k_predict(pbd_world *w, pbd__f4 gh, float damp, const float *keep, float h, float t_kin) {
    PBD__GRID_LOOP(i, w->n) {
        if (!pbd__predict_held(w, i, t_kin))
            pbd__predict_dynamic(&w->x[i], &w->v[i], &w->p[i], gh.v, pbd__keep_of(w, keep, damp, i), h);
    }
}

/* with an acceleration field: each dynamic particle's own term (pbd__field_term) */
PBD__KERNEL pbd__k_predict_field(pbd_world *w, const pbd__f4 *g, float damp, const float *keep, float h, float t_kin) {
    PBD__GRID_LOOP(i, w->n) {
        if (!pbd__predict_held(w, i, t_kin))
            pbd__predict_dynamic(&w->x[i], &w->v[i], &w->p[i], g[i].v, pbd__keep_of(w, keep, damp, i), h);
    }
}

PBD__KERNEL pbd__k_poses(pbd_world *w, int s, int S) {
    PBD__GRID_LOOP(c, w->ncolliders) { pbd__collider_poses_one(w, c, s, S); }
}

PBD__KERNEL pbd__k_contacts(pbd_world *w, int per, float h) {
    PBD__GRID_LOOP(i, w->n) {
        pbd__contacts_of(w, i, per, h);
        if (w->ncontact[i]) pbd__contact_turn_clear(w, i); /* as pbd__generate_contacts */
    }
}

/* Constraints [b, e) of group gi: one colour (no two share a particle). */
PBD__KERNEL pbd__k_project(pbd_world *w, int gi, int b, int e, float at, float scale) {
    pbd__p4 *D = w->jacobi ? w->delta : NULL;
    PBD__GRID_LOOP(k, e - b) { pbd__project_one(w->p, D, &w->groups[gi], b + k, at, scale); }
}

/* The overflow colour, whose constraints may share particles: in order. */
PBD__KERNEL pbd__k_project_serial(pbd_world *w, int gi, int b, int e, float at, float scale) {
    pbd__p4 *D = w->jacobi ? w->delta : NULL;
    PBD__GRID_LOOP(k, 1) {
        for (int c = b; c < e; ++c) pbd__project_one(w->p, D, &w->groups[gi], c, at, scale);
    }
}

/* A balloon's global volume: one sum in a fixed order (double). */
PBD__KERNEL pbd__k_mesh_volume(pbd_world *w, int gi, float at, float scale) {
    PBD__GRID_LOOP(k, 1) { pbd__project_mesh_volume(w->p, w->jacobi ? w->delta : NULL, &w->groups[gi], at, scale); }
}

PBD__KERNEL pbd__k_jacobi_apply(pbd_world *w) {
    PBD__GRID_LOOP(i, w->n) { pbd__jacobi_apply_one(w, i); }
}

PBD__KERNEL pbd__k_lra(pbd_world *w, int li) {
    PBD__GRID_LOOP(k, w->lras[li].count) { pbd__lra_project_one(w->p, &w->lras[li], k); }
}

/* A colour of strain limit set li (pbd__limit_sweep), or its overflow colour in order. */
PBD__KERNEL pbd__k_limits(pbd_world *w, int li, int b, int e) {
    PBD__GRID_LOOP(k, e - b) { pbd__limit_one(w, &w->limits[li], b + k); }
}
PBD__KERNEL pbd__k_limits_serial(pbd_world *w, int li, int b, int e) {
    PBD__GRID_LOOP(k, 1) {
        for (int c = b; c < e; ++c) pbd__limit_one(w, &w->limits[li], c);
    }
}

/* Follow-the-leader over the strands of set si, one thread per strand. */
PBD__KERNEL pbd__k_ftl(pbd_world *w, int si, int first_iteration) {
    PBD__GRID_LOOP(s, w->strands[si].nstrands) { pbd__ftl_strand(w->p, &w->strands[si], s, first_iteration); }
}
PBD__KERNEL pbd__k_strand_velocities(pbd_world *w, int si, float h) {
    PBD__GRID_LOOP(s, w->strands[si].nstrands) { pbd__strand_velocity(w, &w->strands[si], s, h); }
}

PBD__KERNEL pbd__k_lra_tighten(pbd_world *w, int li) {
    PBD__GRID_LOOP(k, w->lras[li].count) { pbd__lra_tighten_one(w->x, &w->lras[li], k); }
}

PBD__KERNEL pbd__k_project_contacts(pbd_world *w) {
    PBD__GRID_LOOP(i, w->n) {
        if (w->ncontact[i]) pbd__project_contacts_of(w, i);
    }
}

PBD__KERNEL pbd__k_velocities(pbd_world *w, float inv_h) {
    PBD__GRID_LOOP(i, w->n) { pbd__velocity_one(&w->x[i], &w->v[i], &w->p[i], inv_h); }
}

PBD__KERNEL pbd__k_contact_velocities(pbd_world *w, float h, float threshold) {
    PBD__GRID_LOOP(i, w->n) {
        if (w->ncontact[i]) pbd__contact_velocities_of(w, i, h, threshold);
    }
}

/* --- particle contact and fluids --------------------------------------------
   The grid (pbd__grid_build): the bucket of every point, the buckets'
   counts (integer atomics: the same counts in any order), their prefix
   sum, the points dropped into their buckets, and each bucket sorted by
   point: the CPU's stable counting sort, so the same slots. Then per
   slot: its particle, its list (pbd__pp_scan), the coupling of objects,
   the fluids' walls; per iteration the multipliers and the corrections;
   after the velocity pass the fluids' viscosity and vorticity. */

#ifdef PBD_CUDA_EMULATE
#define PBD__ATOMIC_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define PBD__ATOMIC_SET(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define PBD__ATOMIC_OR(p, v) __atomic_fetch_or((p), (v), __ATOMIC_RELAXED)
#else
#define PBD__ATOMIC_ADD(p, v) atomicAdd((p), (v))
#define PBD__ATOMIC_SET(p, v) atomicExch((p), (v))
#define PBD__ATOMIC_OR(p, v) atomicOr((p), (v)) /* an integer OR: the same whatever the order */
#endif

/* The grid g (a device record) over its count points (pbd__grid_point of
   base, stride, ids): the keys, ... */
PBD__KERNEL pbd__k_grid_keys(pbd__grid *g, const float *base, int stride, const int *ids) {
    PBD__GRID_LOOP(k, g->count) {
        const float *p = pbd__grid_point(base, stride, ids, k);
        g->key[k] = pbd__grid_hash(g, pbd__grid_coord(g, p[0]), pbd__grid_coord(g, p[1]), pbd__grid_coord(g, p[2]));
    }
}
/* ... the buckets' counts, ... */
PBD__KERNEL pbd__k_grid_count(pbd__grid *g) {
    PBD__GRID_LOOP(k, g->count) { PBD__ATOMIC_ADD(&g->start[g->key[k]], 1); }
}
/* The exclusive prefix sum of a[0 .. n) in place, by levels: each chunk's
   total into the next level, the last level (one chunk) by one thread,
   then each chunk's prefix from its total's; copy gets level 0's result
   too. */
PBD__KERNEL pbd__k_scan_sums(const int *a, int n, int *sums) {
    PBD__GRID_LOOP(c, (n + PBD__SCAN_CHUNK - 1) / PBD__SCAN_CHUNK) {
        int e = (c + 1) * PBD__SCAN_CHUNK < n ? (c + 1) * PBD__SCAN_CHUNK : n, sum = 0;
        for (int i = c * PBD__SCAN_CHUNK; i < e; ++i) sum += a[i];
        sums[c] = sum;
    }
}
PBD__KERNEL pbd__k_scan_top(int *a, int n, int *copy, int ncopy) {
    PBD__GRID_LOOP(t, 1) {
        int sum = 0;
        for (int c = 0; c < n; ++c) {
            int v = a[c];
            a[c] = sum;
            if (c < ncopy) copy[c] = sum;
            sum += v;
        }
    }
}
PBD__KERNEL pbd__k_scan_apply(int *a, int n, const int *sums, int *copy, int ncopy) {
    PBD__GRID_LOOP(c, (n + PBD__SCAN_CHUNK - 1) / PBD__SCAN_CHUNK) {
        int e = (c + 1) * PBD__SCAN_CHUNK < n ? (c + 1) * PBD__SCAN_CHUNK : n, run = sums[c];
        for (int i = c * PBD__SCAN_CHUNK; i < e; ++i) {
            int v = a[i];
            a[i] = run;
            if (i < ncopy) copy[i] = run;
            run += v;
        }
    }
}
/* ... the points dropped into their buckets (fill: a copy of the starts), ... */
PBD__KERNEL pbd__k_grid_place(pbd__grid *g, int *fill) {
    PBD__GRID_LOOP(k, g->count) { g->sorted[PBD__ATOMIC_ADD(&fill[g->key[k]], 1)] = k; }
}
/* a[0 .. n) in increasing order: insertion for the usual few points of a
   bucket, heapsort (n log n at worst) for a crowded one (a collapsed fluid) */
static PBD_HD void pbd__sift_down(int *a, int i, int n) {
    for (int c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && a[c + 1] > a[c]) c++;
        if (a[i] >= a[c]) return;
        int t = a[i];
        a[i] = a[c];
        a[c] = t;
    }
}
static PBD_HD void pbd__sort_ints(int *a, int n) {
    if (n <= 32) {
        pbd__sort_small(a, n);
        return;
    }
    for (int i = n / 2 - 1; i >= 0; --i) pbd__sift_down(a, i, n);
    for (int e = n - 1; e > 0; --e) {
        int t = a[0];
        a[0] = a[e];
        a[e] = t;
        pbd__sift_down(a, 0, e);
    }
}
/* ... each bucket in point order, ... */
PBD__KERNEL pbd__k_grid_order(pbd__grid *g) {
    PBD__GRID_LOOP(b, g->mask + 1) { pbd__sort_ints(g->sorted + g->start[b], g->start[b + 1] - g->start[b]); }
}
/* ... and the points' positions slot by slot. */
PBD__KERNEL pbd__k_grid_pos(pbd__grid *g, const float *base, int stride, const int *ids) {
    PBD__GRID_LOOP(s, g->count) {
        const float *p = pbd__grid_point(base, stride, ids, g->sorted[s]);
        float *q = g->pos + 4 * (size_t)s;
        q[0] = p[0];
        q[1] = p[1];
        q[2] = p[2];
        q[3] = 0;
    }
}
/* whether this substep builds the lists (pbd__pp_lists_stale): always,
   or a particle moved too far (*stale zeroed before) */
PBD__KERNEL pbd__k_pp_stale(pbd_world *w, int always, int *stale) {
    PBD__GRID_LOOP(k, w->pp.np) {
        if (always ? k == 0 : pbd__pp_moved(w, w->p, k)) PBD__ATOMIC_OR(stale, 1);
    }
}
/* slot s: the grid's point sorted[s] and its records (the slots, lists
   and coupling only when *stale: lists kept keep their slots) */
PBD__KERNEL pbd__k_pp_slots(pbd_world *w, const int *stale) {
    pbd__particle_phase *pp = &w->pp;
    if (!*stale) return;
    PBD__GRID_LOOP(s, pp->np) {
        int k = pp->grid.sorted[s], i = pp->ids[k];
        pp->built[k] = w->p[i];
        pp->gslot[s] = s;
        pp->slot[k] = s;
        pp->sid[s] = i;
        pp->sfluid[s] = pp->fluid[k];
        pp->sobject[s] = pp->object[k];
    }
}
PBD__KERNEL pbd__k_pp_unlisted(pbd_world *w) {
    PBD__GRID_LOOP(k, w->pp.np) { pbd__pp_unlisted(&w->pp, k); }
}
PBD__KERNEL pbd__k_pp_lists(pbd_world *w, const int *stale) {
    pbd__particle_phase *pp = &w->pp;
    float R = pp->reach;
    if (!*stale) return;
    PBD__GRID_LOOP(a, pp->np) {
        pbd__v3 q = pbd__ld(pp->grid.pos + 4 * (size_t)a);
        int buckets[27],
            nb = pbd__grid_buckets(&pp->grid, pbd__sub(q, pbd__v(R, R, R)), pbd__add(q, pbd__v(R, R, R)), buckets, 27);
        pp->nbr_off[a] = a * PBD_MAX_NEIGHBORS;
        pbd__pp_scan(w, a, q, buckets, nb, pp->nbr + pp->nbr_off[a]);
    }
}
/* solids: the pairs within reach first, and the loads, at this
   substep's predictions (pbd__pp_activate), after a build (then over the
   whole new list) or in a substep that keeps the lists */
PBD__KERNEL pbd__k_pp_activate(pbd_world *w, const int *stale) {
    PBD__GRID_LOOP(a, w->pp.np) {
        if (*stale) w->pp.nbr_listed[a] = w->pp.nbr_count[a];
        pbd__pp_activate(w, w->p, a);
    }
}
/* objects that touch other objects' particles become coupled (every
   writer writes 1) */
PBD__KERNEL pbd__k_pp_couple(pbd_world *w, const int *stale) {
    pbd__particle_phase *pp = &w->pp;
    if (!*stale) return;
    PBD__GRID_LOOP(a, pp->np) {
        if (!pp->cross[a]) continue;
        if (pp->sobject[a] >= 0) PBD__ATOMIC_SET(&w->objects[pp->sobject[a]].coupled, 1);
        const int *list = pp->nbr + pp->nbr_off[a];
        for (int s = 0; s < pp->nbr_count[a]; ++s)
            if (pp->sobject[list[s]] >= 0) PBD__ATOMIC_SET(&w->objects[pp->sobject[list[s]]].coupled, 1);
    }
}
PBD__KERNEL pbd__k_fluid_walls(pbd_world *w) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__fluid_walls_one(w, w->p, a); }
}
PBD__KERNEL pbd__k_pp_gather(pbd_world *w) {
    PBD__GRID_LOOP(a, w->pp.np) { w->pp.spos[a] = w->p[w->pp.sid[a]]; }
}
PBD__KERNEL pbd__k_pp_lambda(pbd_world *w, int it) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__pp_lambda(w, a, it); }
}
PBD__KERNEL pbd__k_pp_correction(pbd_world *w) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__pp_correction(w, w->pp.spos, a); }
}
PBD__KERNEL pbd__k_fluid_gather(pbd_world *w) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__fluid_gather_xv(w, a); }
}
PBD__KERNEL pbd__k_fluid_curl(pbd_world *w, int vort) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__fluid_curl(w, a, vort); }
}
PBD__KERNEL pbd__k_fluid_vorticity(pbd_world *w, float h) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__fluid_vorticity(w, a, h); }
}
PBD__KERNEL pbd__k_fluid_apply(pbd_world *w) {
    PBD__GRID_LOOP(a, w->pp.np) { pbd__fluid_velocity_apply(w, a); }
}
PBD__KERNEL pbd__k_fluid_rescale(pbd_world *w, float r) {
    PBD__GRID_LOOP(i, w->n) { pbd__fluid_rescale(w, i, r); }
}
/* the objects' coupled flags to (save) or from an array */
PBD__KERNEL pbd__k_coupled(pbd_world *w, int *flags, int save) {
    PBD__GRID_LOOP(o, w->nobjects) {
        if (save) flags[o] = w->objects[o].coupled;
        else w->objects[o].coupled = flags[o];
    }
}

/* --- self-collision ----------------------------------------------------------
   pbd__selfcol_detect, _project and _velocities: per vertex, per cluster
   (a cluster owns its members' candidate slots), one thread for the
   cells, the colouring and the fail-safe's serial pass (serial on the CPU
   too), and per candidate of a colour. */
PBD__KERNEL pbd__k_sc_begin(pbd_world *w) {
    PBD__GRID_LOOP(i, w->selfcol->nv) { pbd__sc_begin_one(w, w->selfcol, i); }
}
PBD__KERNEL pbd__k_sc_limit(pbd_world *w, float h) {
    PBD__GRID_LOOP(i, w->selfcol->nv) { pbd__sc_limit_one(w, w->selfcol, i, h); }
}
PBD__KERNEL pbd__k_sc_tbound(pbd_world *w) {
    PBD__GRID_LOOP(c, w->selfcol->tc) { pbd__sc_tbound(w->selfcol, c); }
}
PBD__KERNEL pbd__k_sc_ebound(pbd_world *w) {
    PBD__GRID_LOOP(c, w->selfcol->ec) { pbd__sc_ebound(w->selfcol, c); }
}
PBD__KERNEL pbd__k_sc_vbox(pbd_world *w) {
    PBD__GRID_LOOP(c, w->selfcol->vc) { pbd__sc_vbox(w, w->selfcol, c); }
}
/* the cells, and the grids' cells and counts (pbd__grid_build's) */
PBD__KERNEL pbd__k_sc_cells(pbd_world *w) {
    PBD__GRID_LOOP(t, 1) {
        pbd__selfcol *S = w->selfcol;
        pbd__sc_cells(S);
        pbd__grid_set_cell(&S->gt, S->cellt, S->tc);
        pbd__grid_set_cell(&S->ge, S->celle, S->ec);
    }
}
PBD__KERNEL pbd__k_sc_vertex_clusters(pbd_world *w) {
    PBD__GRID_LOOP(c, w->selfcol->vc) { pbd__sc_vertex_cluster(w, w->selfcol, c); }
}
PBD__KERNEL pbd__k_sc_edge_clusters(pbd_world *w) {
    PBD__GRID_LOOP(c, w->selfcol->ec) { pbd__sc_edge_cluster(w, w->selfcol, c); }
}
PBD__KERNEL pbd__k_sc_color(pbd_world *w) {
    PBD__GRID_LOOP(t, 1) { pbd__selfcol_color(w->selfcol); }
}
PBD__KERNEL pbd__k_sc_clamp(pbd_world *w) {
    PBD__GRID_LOOP(i, w->selfcol->nv) { pbd__sc_clamp_one(w, w->selfcol, i); }
}
/* the candidates corder[b, e) of one colour (none shares a particle), or
   of the overflow colour in order (serial) */
PBD__KERNEL pbd__k_sc_project(pbd_world *w, int b, int e) {
    PBD__GRID_LOOP(k, e - b) { pbd__sc_project_block(w, w->selfcol, w->selfcol->corder + b + k, 1); }
}
PBD__KERNEL pbd__k_sc_project_serial(pbd_world *w, int b, int e) {
    PBD__GRID_LOOP(t, 1) {
        for (int k = b; k < e; ++k) pbd__sc_project_block(w, w->selfcol, w->selfcol->corder + k, 1);
    }
}
PBD__KERNEL pbd__k_sc_stop(pbd_world *w, int b, int e) {
    PBD__GRID_LOOP(k, e - b) { pbd__sc_stop_block(w, w->selfcol, w->selfcol->corder + b + k, 1); }
}
PBD__KERNEL pbd__k_sc_stop_serial(pbd_world *w, int b, int e) {
    PBD__GRID_LOOP(t, 1) {
        for (int k = b; k < e; ++k) pbd__sc_stop_block(w, w->selfcol, w->selfcol->corder + k, 1);
    }
}
/* the fail-safe: any crossing (an integer OR), then the serial pass */
PBD__KERNEL pbd__k_sc_crossings(pbd_world *w, int *flag) {
    PBD__GRID_LOOP(i, w->selfcol->nv) {
        if (pbd__sc_any_crossing(w, w->selfcol, i)) PBD__ATOMIC_OR(flag, 1);
    }
}
PBD__KERNEL pbd__k_sc_failsafe(pbd_world *w) {
    PBD__GRID_LOOP(t, 1) { pbd__sc_failsafe_serial(w, w->selfcol); }
}

/* --- the blocked sums (pbd.h, "sums over particles") ---------------------------
   One thread per block and component sums it (the component a constant
   through PBD__WITH_CONST); one thread per set adds its blocks in order:
   the CPU's bits. One thread per particle applies the result. Objects run
   all at once (disjoint ranges); clusters one after the other (a particle
   may be in several). A thread per block alone left 30 threads per
   multiprocessor for a million particles: 500 us a sum on an H200. */

/* The sum of a set's blocks, in order. */
static PBD_HD void pbd__blocks_sum(const pbd__sums &S, int set, const pbd__moments *blocks, pbd__moments *t) {
    const pbd__set *st = &S.sets[set];
    memset(t, 0, sizeof *t);
    for (int b = 0; b < pbd__sum_blocks(st->count); ++b) pbd__moments_add(t, &blocks[st->blk0 + b]);
}
static PBD_HD void pbd__blocks_sum(const pbd__sums &S, int set, const pbd__spin *blocks, pbd__spin *t) {
    const pbd__set *st = &S.sets[set];
    memset(t, 0, sizeof *t);
    for (int b = 0; b < pbd__sum_blocks(st->count); ++b) pbd__spin_add(t, &blocks[st->blk0 + b]);
}

/* Runs stmt with C_ the constant equal to c (0 <= c < PBD__SPIN_N): a
   thread's component of a block's sums (pbd__moments_block) as a
   constant, so that the sum's arrays, indexed by it, stay in registers (a
   variable index puts them in slow local memory: 112 bytes a thread,
   450 us for a million particles on an H200). */
// clang-format off
#define PBD__CONST_CASE(k, stmt) case k: { const int C_ = k; stmt; } break;
#define PBD__WITH_CONST(c, stmt)                                                                                       \
    switch (c) {                                                                                                       \
        PBD__CONST_CASE(0, stmt) PBD__CONST_CASE(1, stmt) PBD__CONST_CASE(2, stmt) PBD__CONST_CASE(3, stmt)            \
        PBD__CONST_CASE(4, stmt) PBD__CONST_CASE(5, stmt) PBD__CONST_CASE(6, stmt) PBD__CONST_CASE(7, stmt)            \
        PBD__CONST_CASE(8, stmt) PBD__CONST_CASE(9, stmt) PBD__CONST_CASE(10, stmt) PBD__CONST_CASE(11, stmt)          \
    }
// clang-format on

/* angular momentum after the prediction (pbd__momentum_before) */
PBD__KERNEL pbd__k_momentum_blocks(pbd_world *w, pbd__sums S) {
    PBD__GRID_LOOP(k, 3 * S.nobj_blk) { /* a thread per block and component (pbd__moments_block) */
        int blk = k / 3, c = k % 3, o = S.blk_set[blk];
        int anchored = 0;
        PBD__WITH_CONST(c, anchored = pbd__momentum_block(w, o, blk - S.sets[o].blk0, C_, C_ + 1, &S.lb[3 * blk]))
        if (c == 0) S.flag[blk] = anchored;
    }
}
PBD__KERNEL pbd__k_momentum_before(pbd_world *w, pbd__sums S) {
    PBD__GRID_LOOP(o, w->nobjects) {
        double *l = w->object_l + 4 * (size_t)o;
        l[0] = l[1] = l[2] = 0;
        l[3] = !w->objects[o].coupled;
        const pbd__set *st = &S.sets[o];
        for (int b = 0; b < pbd__sum_blocks(st->count) && l[3]; ++b) {
            if (S.flag[st->blk0 + b]) l[3] = 0;
            for (int a = 0; a < 3; ++a) l[a] += S.lb[3 * (st->blk0 + b) + a];
        }
    }
}

/* the restore (pbd__momentum_restore): moments and what contacts turned per block, ... */
PBD__KERNEL pbd__k_restore_blocks(pbd_world *w, pbd__sums S) {
    PBD__GRID_LOOP(k, (PBD__MOM_N + 1) * S.nobj_blk) { /* per block: its components, then its contacts' turn */
        int blk = k / (PBD__MOM_N + 1), c = k % (PBD__MOM_N + 1), o = S.blk_set[blk], b = blk - S.sets[o].blk0;
        const pbd__set *st = &S.sets[o];
        if (!w->object_l[4 * (size_t)o + 3]) continue;
        if (c == PBD__MOM_N) pbd__contact_turn_block(w, st->first, st->count, b, 0, 3, &S.lb[3 * blk]);
        else PBD__WITH_CONST(c, pbd__moments_block(w, NULL, st->first, st->count, b, 0, C_, C_ + 1, &S.md[blk]))
    }
}
/* ... the centre per object, ... */
PBD__KERNEL pbd__k_restore_centre(pbd_world *w, pbd__sums S) {
    PBD__GRID_LOOP(o, w->nobjects) {
        pbd__fit *f = &S.fit[o];
        f->mode = -1;
        if (!w->object_l[4 * (size_t)o + 3]) continue;
        pbd__moments t;
        pbd__blocks_sum(S, o, S.md, &t);
        if (pbd__fit_centre(&t, f->xc, f->vc)) f->mode = 0;
    }
}
/* ... the spin per block about it (absolute angular momentum) ... */
PBD__KERNEL pbd__k_spin_blocks(pbd_world *w, pbd__sums S, int b0, int b1, int absolute) {
    PBD__GRID_LOOP(k, PBD__SPIN_N * (b1 - b0)) {
        int blk = b0 + k / PBD__SPIN_N, c = k % PBD__SPIN_N, set = S.blk_set[blk];
        const pbd__fit *f = &S.fit[set];
        const pbd__set *st = &S.sets[set];
        if (f->mode < 0) continue;
        const double *vc = absolute ? NULL : f->vc;
        PBD__WITH_CONST(c, pbd__spin_block(w, st->list, st->first, st->count, blk - st->blk0, f->mode, f->xc, vc, C_,
                                           C_ + 1, &S.sp[blk]))
    }
}
/* ... the turn per object, ... */
PBD__KERNEL pbd__k_restore_omega(pbd_world *w, pbd__sums S, float h) {
    PBD__GRID_LOOP(o, w->nobjects) {
        pbd__fit *f = &S.fit[o];
        if (f->mode < 0) continue;
        pbd__spin t;
        pbd__blocks_sum(S, o, S.sp, &t);
        const pbd__set *st = &S.sets[o];
        double sum[3] = {0, 0, 0}, target[3];
        for (int b = 0; b < pbd__sum_blocks(st->count); ++b)
            for (int a = 0; a < 3; ++a) sum[a] += S.lb[3 * (st->blk0 + b) + a];
        pbd__momentum_target(w->object_l + 4 * (size_t)o, sum, h, target);
        if (!pbd__momentum_omega(target, &t, f->om)) f->mode = -1;
    }
}
/* ... and the velocities, per block. */
PBD__KERNEL pbd__k_restore_apply(pbd_world *w, pbd__sums S) {
    PBD__GRID_LOOP(k, PBD__SUM_BLOCK * S.nobj_blk) { /* a thread per particle */
        int blk = k / PBD__SUM_BLOCK, o = S.blk_set[blk];
        const pbd__fit *f = &S.fit[o];
        const pbd__set *st = &S.sets[o];
        int j = (blk - st->blk0) * PBD__SUM_BLOCK + k % PBD__SUM_BLOCK;
        if (f->mode >= 0 && j < st->count) pbd__spin_one(w, st->first + j, f->xc, f->om);
    }
}

/* damping (pbd__damp_particles) of the sets [s0, s1), blocks [b0, b1):
   both kinds' moments per block, ... */
PBD__KERNEL pbd__k_damp_blocks(pbd_world *w, pbd__sums S, int b0, int b1) {
    PBD__GRID_LOOP(k, 2 * PBD__MOM_N * (b1 - b0)) { /* per block: the anchors' components, the others' */
        int blk = b0 + k / (2 * PBD__MOM_N), c = k % (2 * PBD__MOM_N), set = S.blk_set[blk], anchors = c < PBD__MOM_N;
        const pbd__set *st = &S.sets[set];
        pbd__moments *out = anchors ? &S.ma[blk] : &S.md[blk];
        PBD__WITH_CONST(c % PBD__MOM_N,
                        pbd__moments_block(w, st->list, st->first, st->count, blk - st->blk0, anchors, C_, C_ + 1, out))
    }
}
/* ... the kind per set (anchors if it has any), ... */
PBD__KERNEL pbd__k_damp_centre(pbd_world *w, pbd__sums S, int s0, int s1) {
    (void)w;
    PBD__GRID_LOOP(k, s1 - s0) {
        int set = s0 + k;
        pbd__fit *f = &S.fit[set];
        pbd__moments t;
        f->mode = -1;
        if (!(S.sets[set].damping > 0)) continue;
        pbd__blocks_sum(S, set, S.ma, &t);
        if (pbd__fit_centre(&t, f->xc, f->vc)) {
            f->mode = 1;
            continue;
        }
        pbd__blocks_sum(S, set, S.md, &t);
        if (pbd__fit_centre(&t, f->xc, f->vc)) f->mode = 0;
    }
}
/* ... (spin per block: pbd__k_spin_blocks), the angular velocity per set, ... */
PBD__KERNEL pbd__k_damp_omega(pbd_world *w, pbd__sums S, int s0, int s1) {
    (void)w;
    PBD__GRID_LOOP(k, s1 - s0) {
        int set = s0 + k;
        pbd__fit *f = &S.fit[set];
        if (f->mode < 0) continue;
        pbd__spin t;
        pbd__blocks_sum(S, set, S.sp, &t);
        if (!pbd__fit_omega(&t, f->mode, f->om)) f->mode = -1;
    }
}
/* ... and the velocities, per block. */
PBD__KERNEL pbd__k_damp_apply(pbd_world *w, pbd__sums S, const float *set_k, int b0, int b1) {
    PBD__GRID_LOOP(k, PBD__SUM_BLOCK * (b1 - b0)) { /* a thread per particle */
        int blk = b0 + k / PBD__SUM_BLOCK, set = S.blk_set[blk];
        const pbd__fit *f = &S.fit[set];
        const pbd__set *st = &S.sets[set];
        int j = (blk - st->blk0) * PBD__SUM_BLOCK + k % PBD__SUM_BLOCK;
        if (f->mode >= 0 && j < st->count)
            pbd__damp_one(w, pbd__list_at(st->list, st->first, j), f->xc, f->vc, f->om, set_k[set]);
    }
}

PBD__KERNEL pbd__k_nonfinite(pbd_world *w, int *bad) {
    PBD__GRID_LOOP(i, w->n) {
        const float *x = &w->x[i].x, *v = &w->v[i].x;
        int ok = 1;
        for (int k = 0; k < 4; ++k) ok &= pbd__finite(x[k]) & pbd__finite(v[k]);
        if (!ok) PBD__ATOMIC_OR(bad, 1);
    }
}

// ==== step ===================================================================

/* The tethers' reach at the step's start (pbd__lras_keep), on the device:
   restore 0 keeps it, 1 puts it back. */
static void pbd__lras_keep_dev(const pbd__gpu *g, const pbd_world *w, int restore) {
    for (int i = 0; i < w->nlras; ++i) {
        const pbd__lra *l = &w->lras[i];
        long nt = l->count > 0 ? l->start[l->count] : 0;
        if (!l->reach || nt == 0) continue;
        float *r = g->lras[i].reach;
        if (restore) pbd__d2d(r, r + nt, sizeof(float) * (size_t)nt);
        else pbd__d2d(r + nt, r, sizeof(float) * (size_t)nt);
    }
}

static void pbd__momentum_before_dev(pbd__gpu *g) {
    pbd__launch(g, 3 * g->sums.nobj_blk, pbd__k_momentum_blocks, g->dw, g->sums);
    pbd__launch(g, g->shadow.nobjects, pbd__k_momentum_before, g->dw, g->sums);
}

/* Damping of the sets [s0, s1) whose blocks are [b0, b1). */
static void pbd__damp_dev(pbd__gpu *g, int s0, int s1, int b0, int b1) {
    pbd__launch(g, 2 * PBD__MOM_N * (b1 - b0), pbd__k_damp_blocks, g->dw, g->sums, b0, b1);
    pbd__launch(g, s1 - s0, pbd__k_damp_centre, g->dw, g->sums, s0, s1);
    pbd__launch(g, PBD__SPIN_N * (b1 - b0), pbd__k_spin_blocks, g->dw, g->sums, b0, b1, 0);
    pbd__launch(g, s1 - s0, pbd__k_damp_omega, g->dw, g->sums, s0, s1);
    pbd__launch(g, PBD__SUM_BLOCK * (b1 - b0), pbd__k_damp_apply, g->dw, g->sums, (const float *)g->set_k, b0, b1);
}

/* After the velocity pass: every object's angular momentum restore, then
   its damping, over its range or piece by piece (pbd__substep_body's loop
   over objects: their particles are disjoint, so all at once), then the
   clusters in order. */
static void pbd__restore_and_damp_dev(pbd__gpu *g, const pbd_world *w, float h) {
    const pbd__sums *S = &g->sums;
    pbd_world *dw = g->dw;
    int no = w->nobjects;
    pbd__launch(g, (PBD__MOM_N + 1) * S->nobj_blk, pbd__k_restore_blocks, dw, *S);
    pbd__launch(g, no, pbd__k_restore_centre, dw, *S);
    pbd__launch(g, PBD__SPIN_N * S->nobj_blk, pbd__k_spin_blocks, dw, *S, 0, S->nobj_blk, 1);
    pbd__launch(g, no, pbd__k_restore_omega, dw, *S, h);
    pbd__launch(g, PBD__SUM_BLOCK * S->nobj_blk, pbd__k_restore_apply, dw, *S);
    pbd__damp_dev(g, 0, no + S->npieces, 0, S->damp_blk); /* objects and pieces: disjoint */
    for (int c = 0, s = no + S->npieces, b0 = S->damp_blk; c < w->nclusters;
         b0 += pbd__sum_blocks(w->clusters[c++].count))
        if (w->clusters[c].damping > 0)
            pbd__damp_dev(g, s + c, s + c + 1, b0, b0 + pbd__sum_blocks(w->clusters[c].count));
}

/* One group's sweep (pbd__sweep_group): a launch per colour, forwards or
   backwards; the overflow colour and a balloon's volume in one thread. */
static void pbd__sweep_dev(pbd__gpu *g, const pbd_world *w, int gi, float h, int backwards) {
    const pbd__group *G = &w->groups[gi];
    float at = w->mode == PBD_SOLVER_XPBD ? pbd__alpha_tilde(G->compliance, h) : 0.0f;
    float scale = pbd__group_scale(w, G);
    if (G->ncolors == 0) {
        pbd__launch(g, 1, pbd__k_mesh_volume, g->dw, gi, at, scale);
        return;
    }
    for (int k = 0; k < G->ncolors; ++k) {
        int col = backwards ? G->ncolors - 1 - k : k;
        int b = G->color_start[col], e = G->color_start[col + 1];
        if (G->overflow && col == G->ncolors - 1) pbd__launch(g, 1, pbd__k_project_serial, g->dw, gi, b, e, at, scale);
        else pbd__launch(g, e - b, pbd__k_project, g->dw, gi, b, e, at, scale);
    }
}

/* One sweep of strain limit set li (pbd__limit_sweep): a launch per colour. */
static void pbd__limits_dev(pbd__gpu *g, const pbd_world *w, int li) {
    const pbd__group *G = &w->limits[li].g;
    for (int col = 0; col < G->ncolors; ++col) {
        int b = G->color_start[col], e = G->color_start[col + 1];
        if (G->overflow && col == G->ncolors - 1) pbd__launch(g, 1, pbd__k_limits_serial, g->dw, li, b, e);
        else pbd__launch(g, e - b, pbd__k_limits, g->dw, li, b, e);
    }
}

/* The exclusive prefix sum of the starts (pbd__k_scan_sums), the fill
   counters a copy of it. */
static void pbd__dscan_run(pbd__gpu *g, pbd__dscan *scan) {
    int L = scan->nlevels;
    if (L < 0 || L >= PBD__SCAN_LEVELS) return; /* (never: the levels end in one chunk; tells GCC the bounds) */
#define PBD__SCAN_LEVEL(l) ((l) == 0 ? scan->start : scan->sums + scan->off[l])
    for (int l = 0; l < L; ++l) {
        int chunks = scan->n[l + 1];
        pbd__launch(g, chunks, pbd__k_scan_sums, (const int *)PBD__SCAN_LEVEL(l), scan->n[l], PBD__SCAN_LEVEL(l + 1));
    }
    pbd__launch(g, 1, pbd__k_scan_top, PBD__SCAN_LEVEL(L), scan->n[L], L == 0 ? scan->fill : NULL,
                L == 0 ? scan->n[0] - 1 : 0);
    for (int l = L - 1; l >= 0; --l)
        pbd__launch(g, scan->n[l + 1], pbd__k_scan_apply, PBD__SCAN_LEVEL(l), scan->n[l],
                    (const int *)PBD__SCAN_LEVEL(l + 1), l == 0 ? scan->fill : NULL, l == 0 ? scan->n[0] - 1 : 0);
#undef PBD__SCAN_LEVEL
}

/* pbd__grid_build on the device: grid G (the device record; h: the host's
   record of the same table) over n points of base (stride, ids), its cell
   and count already set in G. */
static void pbd__grid_build_dev(pbd__gpu *g, pbd__grid *G, const pbd__grid *h, pbd__dscan *scan, const float *base,
                                int stride, const int *ids, int n) {
    int nb = h->mask + 1;
    if (n == 0) return;
    pbd__launch(g, n, pbd__k_grid_keys, G, base, stride, ids);
    pbd__dzero(scan->start, sizeof(int) * ((size_t)nb + 1));
    pbd__launch(g, n, pbd__k_grid_count, G);
    pbd__dscan_run(g, scan);
    pbd__launch(g, n, pbd__k_grid_place, G, scan->fill);
    pbd__launch(g, nb, pbd__k_grid_order, G);
    pbd__launch(g, n, pbd__k_grid_pos, G, base, stride, ids);
}

/* The particle phase's grid and lists at the predictions (pbd__pp_build)
   when substep s builds them (pbd__pp_lists_stale; the grid, a counting
   sort, is built every substep, which needs no read-back of the flag:
   the kernels after it read it), and the fluids' walls
   (pbd__pp_begin_substep). */
static void pbd__pp_build_dev(pbd__gpu *g, const pbd_world *w, int s) {
    const pbd__particle_phase *pp = &g->shadow.pp;
    pbd_world *dw = g->dw;
    int np = pp->np;
    if (np == 0) return;
    if (!(pp->reach > 0)) {
        pbd__launch(g, np, pbd__k_pp_unlisted, dw);
        return;
    }
    pbd__dzero(g->pp_stale, sizeof(int));
    pbd__launch(g, np, pbd__k_pp_stale, dw, (int)(s == 0 || pp->nfluids > 0), g->pp_stale);
    pbd__grid_build_dev(g, &dw->pp.grid, &w->pp.grid, &g->pp_scan, &g->shadow.p[0].x, 4, pp->ids, np);
    pbd__launch(g, np, pbd__k_pp_slots, dw, (const int *)g->pp_stale);
    pbd__launch(g, np, pbd__k_pp_lists, dw, (const int *)g->pp_stale);
    if (pp->nfluids == 0) pbd__launch(g, np, pbd__k_pp_activate, dw, (const int *)g->pp_stale);
    if (w->nobjects > 0) pbd__launch(g, np, pbd__k_pp_couple, dw, (const int *)g->pp_stale);
    if (pp->nfluids > 0) pbd__launch(g, np, pbd__k_fluid_walls, dw);
}

/* One iteration of contacts and density constraints (pbd__pp_project). */
static void pbd__pp_project_dev(pbd__gpu *g, int it) {
    const pbd__particle_phase *pp = &g->shadow.pp;
    if (pp->np == 0 || !(pp->reach > 0)) return;
    pbd__launch(g, pp->np, pbd__k_pp_gather, g->dw);
    if (pp->nfluids > 0) pbd__launch(g, pp->np, pbd__k_pp_lambda, g->dw, it);
    pbd__launch(g, pp->np, pbd__k_pp_correction, g->dw);
}

/* The fluids' viscosity and vorticity (pbd__fluid_velocities). */
static void pbd__fluid_velocities_dev(pbd__gpu *g, const pbd_world *w, float h) {
    int np = g->shadow.pp.np, vort; /* the shadow's arrays are the device's: the host's records */
    if (np == 0 || !(g->shadow.pp.reach > 0) || !pbd__fluid_velocity_work(w, &vort)) return;
    pbd__launch(g, np, pbd__k_fluid_gather, g->dw);
    pbd__launch(g, np, pbd__k_fluid_curl, g->dw, vort);
    if (vort) pbd__launch(g, np, pbd__k_fluid_vorticity, g->dw, h);
    pbd__launch(g, np, pbd__k_fluid_apply, g->dw);
}

/* The fluids' parameters of this step's substep h (pbd__fluid_begin_step):
   s_corr's scale up to the device, the pressures rescaled there. */
static void pbd__fluid_begin_dev(pbd__gpu *g, pbd_world *w, float h) {
    g->pressure_h_keep = w->pp.pressure_h;
    if (w->pp.nfluids == 0) return;
    float r = pbd__fluid_begin_params(w, h);
    pbd__send(g, g->shadow.pp.fluids, w->pp.fluids, sizeof(pbd__fluid) * (size_t)w->pp.nfluids);
    if (r > 0) pbd__launch(g, w->n, pbd__k_fluid_rescale, g->dw, r);
}

/* The prediction with an acceleration field (a host callback): the
   particles come down into the host's arrays (stale between steps
   anyway), the callback gives each dynamic particle's term on the host
   (pbd__field_term, in particle order), the terms go up. */
static void pbd__field_dev(pbd__gpu *g, pbd_world *w, float h, int s, const float *gh, float damp, float t_kin) {
    size_t n = (size_t)w->n;
    pbd__d2h(w->x, g->shadow.x, sizeof(pbd__p4) * n);
    pbd__d2h(w->v, g->shadow.v, sizeof(pbd__p4) * n);
    double time = w->time + (double)h * s;
    for (int i = 0; i < w->n; ++i) {
        pbd__f4 *f = &g->field[i];
        if ((w->flags[i] & PBD__KINEMATIC) || w->x[i].w == 0) /* held: no field (pbd__predict_held) */
            f->v[0] = f->v[1] = f->v[2] = f->v[3] = 0;
        else pbd__field_term(w, i, time, gh, h, f->v);
    }
    pbd__send(g, g->field_dev, g->field, sizeof(pbd__f4) * n);
    pbd__launch(g, w->n, pbd__k_predict_field, g->dw, (const pbd__f4 *)g->field_dev, damp,
                (const float *)(g->drag_on ? g->keep : NULL), h, t_kin);
}

/* --- plugins -------------------------------------------------------------------
   A plugin is host code (the user's; pbd_sm.h's are device plugins,
   below), so its callbacks run
   on the host, in pbd__substep_body's places, with the host's arrays as
   their view of the world: x, p and v (and the contacts, which
   pbd_world_particle_contact_push reads) come down before a stage that
   some plugin has, and x, p and v go back up after it. The host's copy is
   current meanwhile, so the calls a callback makes read what the CPU's
   would; what they mark for upload stays marked for the next step. */

static void pbd__host_view(pbd__gpu *g, pbd_world *w) {
    size_t n = (size_t)w->n;
    pbd__d2h(w->x, g->shadow.x, sizeof(pbd__p4) * n);
    pbd__d2h(w->p, g->shadow.p, sizeof(pbd__p4) * n);
    pbd__d2h(w->v, g->shadow.v, sizeof(pbd__p4) * n);
    pbd__d2h(w->ncontact, g->shadow.ncontact, n);
    pbd__d2h(w->contacts, g->shadow.contacts, sizeof(pbd__contact) * (size_t)w->contact_cap);
    w->gpu_host_stale = 0;
}
static void pbd__device_view(pbd__gpu *g, const pbd_world *w) {
    size_t n = (size_t)w->n;
    pbd__send(g, g->shadow.x, w->x, sizeof(pbd__p4) * n);
    pbd__send(g, g->shadow.p, w->p, sizeof(pbd__p4) * n);
    pbd__send(g, g->shadow.v, w->v, sizeof(pbd__p4) * n);
}

/* A substep stage's callbacks (pbd__plugins_call), in order: a host
   plugin's with the host's x, p, v (fetched before the first, sent back
   before a device plugin and after the last), a device plugin's
   (pbd_plugin_desc.device) with the device's arrays. */
static void pbd__plugins_dev(pbd__gpu *g, pbd_world *w, int stage, float h, int s, int S, int it) {
    int host = 0; /* the host's arrays are the current ones */
    for (int i = 0; i < w->nplugins; ++i) {
        pbd__plugin *pl = &w->plugins[i];
        pbd__plugin_stage_fn fn = pbd__plugin_fn(pl, stage);
        if (!fn) continue;
        if (pl->d.device && host) pbd__device_view(g, w);
        if (!pl->d.device && !host) pbd__host_view(g, w);
        host = !pl->d.device;
        if (host) pbd__plugin_call(w, pl, fn, h, s, S, it, w->x, w->p, w->v);
        else pbd__plugin_call(w, pl, fn, h, s, S, it, g->shadow.x, g->shadow.p, g->shadow.v);
    }
    if (host) pbd__device_view(g, w);
}

/* begin_step (end 0) or end_step (end 1) (pbd__plugins_step), likewise. */
static void pbd__plugins_step_dev(pbd__gpu *g, pbd_world *w, float dt, int end) {
    int host = 0;
    for (int i = 0; i < w->nplugins; ++i) {
        pbd__plugin *pl = &w->plugins[i];
        void (*fn)(void *, pbd_world *, float) = end ? pl->d.end_step : pl->d.begin_step;
        if (!pl->s.live || !fn) continue;
        if (pl->d.device && host) pbd__device_view(g, w);
        if (!pl->d.device && !host) pbd__host_view(g, w);
        host = !pl->d.device;
        fn(pl->d.user, w, dt);
    }
    if (host) pbd__device_view(g, w);
}

/* Self-collision's detection (pbd__selfcol_detect), then the colours read
   back: the launches of the projection follow them. */
static void pbd__sc_detect_dev(pbd__gpu *g, const pbd_world *w, float h) {
    const pbd__selfcol *S = &g->sc, *hs = w->selfcol;
    pbd_world *dw = g->dw;
    pbd__launch(g, S->nv, pbd__k_sc_limit, dw, h);
    pbd__launch(g, S->tc, pbd__k_sc_tbound, dw);
    pbd__launch(g, S->ec, pbd__k_sc_ebound, dw);
    pbd__launch(g, S->vc, pbd__k_sc_vbox, dw);
    pbd__launch(g, 1, pbd__k_sc_cells, dw);
    pbd__grid_build_dev(g, &g->sc_dev->gt, &hs->gt, &g->sc_scan[0], S->tcent, 3, NULL, S->tc);
    if (S->ec > 0) pbd__grid_build_dev(g, &g->sc_dev->ge, &hs->ge, &g->sc_scan[1], S->ecent, 3, NULL, S->ec);
    pbd__launch(g, S->vc, pbd__k_sc_vertex_clusters, dw);
    pbd__launch(g, S->ec, pbd__k_sc_edge_clusters, dw);
    pbd__launch(g, 1, pbd__k_sc_color, dw);
    pbd__d2h(&g->scv, g->sc_dev, sizeof g->scv);
}

/* Runs kernel k (or its serial twin for the overflow colour) over every
   colour of the candidates (pbd__sc_each_color). */
static void pbd__sc_colors_dev(pbd__gpu *g, void (*k)(pbd_world *, int, int), void (*serial)(pbd_world *, int, int)) {
    const pbd__selfcol *S = &g->scv;
    for (int col = 0; col < S->ncolors; ++col) {
        int b = S->cstart[col], e = S->cstart[col + 1];
        if (S->overflow && col == S->ncolors - 1) pbd__launch(g, 1, serial, g->dw, b, e);
        else pbd__launch(g, e - b, k, g->dw, b, e);
    }
}

/* One iteration's self-collision projection (pbd__selfcol_project). */
static void pbd__sc_project_dev(pbd__gpu *g, const pbd_world *w, int it) {
    int nv = g->sc.nv;
    if (nv <= 0) return;
    pbd__launch(g, nv, pbd__k_sc_clamp, g->dw);
    pbd__sc_colors_dev(g, pbd__k_sc_project, pbd__k_sc_project_serial);
    if (it + 1 != w->iterations) return;
    pbd__launch(g, nv, pbd__k_sc_clamp, g->dw);
    pbd__dzero(g->sc.frozen, (size_t)nv);
    pbd__dzero(g->flag, sizeof(int));
    pbd__launch(g, nv, pbd__k_sc_crossings, g->dw, g->flag);
    int crossed = 0;
    pbd__d2h(&crossed, g->flag, sizeof crossed);
    if (crossed) pbd__launch(g, 1, pbd__k_sc_failsafe, g->dw);
}

/* The candidates at the step's start (back 0), or back to them (1). */
static void pbd__keep_dev(void *live, void *kept, size_t n, int back) {
    if (back) pbd__d2d(live, kept, n);
    else pbd__d2d(kept, live, n);
}
static void pbd__sc_keep_dev(pbd__gpu *g, int back) {
    const pbd__selfcol *S = &g->sc;
    size_t nv = (size_t)S->nv, ne = (size_t)S->ne;
    pbd__keep_dev(S->pt, S->pt_step, sizeof(pbd__sc_pt) * nv * PBD__SC_PT, back);
    pbd__keep_dev(S->npt, S->npt_step, nv, back);
    pbd__keep_dev(S->ee, S->ee_step, sizeof(pbd__sc_ee) * ne * PBD__SC_EE, back);
    pbd__keep_dev(S->nee, S->nee_step, ne, back);
}

/* One substep (pbd__substep_body without what GPU worlds do not have). */
static void pbd__substep_dev(pbd__gpu *g, pbd_world *w, float h, int s, int S) {
    pbd_world *dw = g->dw;
    int n = w->n;
    pbd__f4 gh;
    float damp;
    pbd__predict_constants(w, h, gh.v, &damp);
    if (w->accel) pbd__field_dev(g, w, h, s, gh.v, damp, (float)(s + 1) / (float)S);
    else
        pbd__launch(g, n, pbd__k_predict, dw, gh, damp, (const float *)(g->drag_on ? g->keep : NULL), h,
                    (float)(s + 1) / (float)S);
    pbd__launch(g, w->ncolliders, pbd__k_poses, dw, s, S);
    pbd__dzero(g->lambdas, sizeof(float) * g->nlambdas);
    if (g->sc_dev) pbd__sc_detect_dev(g, w, h); /* before the momentum: see pbd__substep_body */
    pbd__momentum_before_dev(g);
    pbd__plugins_dev(g, w, PBD__PLUGIN_BEGIN_SUBSTEP, h, s, S, -1);
    int per = pbd__contacts_per_particle(w);
    if (per > 0) pbd__launch(g, n, pbd__k_contacts, dw, per, h);
    pbd__pp_build_dev(g, w, s);
    for (int it = 0; it < w->iterations; ++it) {
        if (w->jacobi) pbd__dzero(g->shadow.delta, sizeof(pbd__p4) * (size_t)n);
        for (int gi = 0; gi < w->ngroups; ++gi)
            if (w->groups[gi].enabled) pbd__sweep_dev(g, w, gi, h, it & 1);
        if (w->jacobi) pbd__launch(g, n, pbd__k_jacobi_apply, dw);
        for (int li = 0; li < w->nlras; ++li)
            if (w->lras[li].enabled) pbd__launch(g, w->lras[li].count, pbd__k_lra, dw, li);
        for (int li = 0; li < w->nlimits; ++li)
            if (w->limits[li].enabled) pbd__limits_dev(g, w, li);
        for (int si = 0; si < w->nstrands; ++si)
            if (w->strands[si].s.live) pbd__launch(g, w->strands[si].nstrands, pbd__k_ftl, dw, si, it == 0);
        pbd__plugins_dev(g, w, PBD__PLUGIN_PROJECT, h, s, S, it);
        pbd__pp_project_dev(g, it);
        if (g->sc_dev) pbd__sc_project_dev(g, w, it);
        if (per > 0) pbd__launch(g, n, pbd__k_project_contacts, dw);
        pbd__plugins_dev(g, w, PBD__PLUGIN_PROJECT_AFTER_CONTACTS, h, s, S, it);
    }
    for (int it = w->iterations; it < pbd__fluid_iterations(w); ++it) { /* a fluid's own */
        pbd__pp_project_dev(g, it);
        if (per > 0) pbd__launch(g, n, pbd__k_project_contacts, dw);
    }
    pbd__launch(g, n, pbd__k_velocities, dw, 1.0f / h);
    for (int si = 0; si < w->nstrands; ++si) /* also at s_damping 0: see pbd__strand_velocity */
        if (w->strands[si].s.live) pbd__launch(g, w->strands[si].nstrands, pbd__k_strand_velocities, dw, si, h);
    if (per > 0) pbd__launch(g, n, pbd__k_contact_velocities, dw, h, pbd__restitution_threshold(w, h));
    if (g->sc_dev) pbd__sc_colors_dev(g, pbd__k_sc_stop, pbd__k_sc_stop_serial);
    pbd__fluid_velocities_dev(g, w, h);
    pbd__plugins_dev(g, w, PBD__PLUGIN_END_SUBSTEP, h, s, S, -1);
    pbd__restore_and_damp_dev(g, w, h);
}

/* The damping fractions and drag factors of this step's substep h, up to the device. */
static void pbd__damping_fractions(pbd__gpu *g, const pbd_world *w, float h) {
    int k = w->nobjects;
    for (int o = 0; o < w->nobjects; ++o) {
        const pbd__pieces *P = pbd__object_pieces(w, o);
        g->hk[o] = pbd__damp_fraction(w->objects[o].damping, h);
        for (int p = 0; P && p < P->count; ++p) g->hk[k++] = g->hk[o]; /* its pieces (pbd__upload_sums) */
    }
    for (int c = 0; c < w->nclusters; ++c) g->hk[k++] = pbd__damp_fraction(w->clusters[c].damping, h);
    pbd__send(g, g->set_k, g->hk, sizeof(float) * (size_t)k);
    g->drag_on = pbd__drag_keeps(w, h, g->hkeep);
    if (g->drag_on) pbd__send(g, g->keep, g->hkeep, sizeof(float) * (size_t)w->nobjects);
}

/* Whether the device may change objects' coupled flags (particle contact
   between objects marks them; only then are they kept, restored and
   fetched). Fluids' pressures likewise only with fluids. */
static int pbd__couples(const pbd_world *w) { return w->nobjects > 0 && w->pp.np > 0; }

static void pbd__pull_particles(pbd__gpu *g, pbd_world *w) {
    size_t n = (size_t)w->n;
    pbd__d2h(w->x, g->shadow.x, sizeof(pbd__p4) * n);
    pbd__d2h(w->v, g->shadow.v, sizeof(pbd__p4) * n);
    if (n) memcpy(w->p, w->x, sizeof(pbd__p4) * n); /* as after a step on the CPU */
    pbd__d2h(w->ncontact, g->shadow.ncontact, n);
    if (w->pp.nfluids > 0) pbd__d2h(w->pressure, g->shadow.pressure, sizeof(float) * n);
    if (pbd__couples(w)) {
        pbd__launch(g, w->nobjects, pbd__k_coupled, g->dw, g->coupled_out, 1);
        pbd__d2h(g->hc, g->coupled_out, sizeof(int) * (size_t)w->nobjects);
        for (int o = 0; o < w->nobjects; ++o) w->objects[o].coupled = g->hc[o];
    }
    for (int i = 0; i < w->nlras; ++i) {
        const pbd__lra *l = &w->lras[i];
        long nt = l->count > 0 ? l->start[l->count] : 0;
        if (l->reach && nt) pbd__d2h(l->reach, g->lras[i].reach, sizeof(float) * 2 * (size_t)nt);
    }
}

/* The attachment groups' targets (their rest arrays), which a kernel
   moved (pbd_up_wrinkle_update_world): each group's device record gives
   its device array. */
static void pbd__pull_targets(pbd__gpu *g, pbd_world *w) {
    for (int i = 0; i < w->ngroups; ++i) {
        const pbd__group *h = &w->groups[i];
        if (h->type != PBD_CONSTRAINT_ATTACHMENT || h->count <= 0) continue;
        pbd__group d;
        pbd__d2h(&d, g->shadow.groups + i, sizeof d);
        pbd__d2h(h->rest, d.rest, sizeof(float) * (size_t)h->count * (size_t)h->rest_stride);
    }
}

/* The particle phase's lists of the last step (pbd_world_particle_neighbors),
   in the device's slots. */
static void pbd__pull_neighbors(pbd__gpu *g, pbd_world *w) {
    const pbd__particle_phase *d = &g->shadow.pp;
    pbd__particle_phase *h = &w->pp;
    size_t n = (size_t)d->np;
    if (n == 0 || n != (size_t)h->np) return;
    pbd__d2h(h->slot, d->slot, sizeof(int) * n);
    pbd__d2h(h->sid, d->sid, sizeof(int) * n);
    pbd__d2h(h->nbr_off, d->nbr_off, sizeof(int) * n);
    pbd__d2h(h->nbr_count, d->nbr_count, sizeof(int) * n);
    pbd__d2h(h->nbr, d->nbr, sizeof(int) * n * PBD_MAX_NEIGHBORS);
}

/* A step that made a particle non-finite: everything back as it was at the
   step's start (pbd__step_rollback), on the device and the host. */
static void pbd__rollback_dev(pbd__gpu *g, pbd_world *w) {
    size_t n = (size_t)w->n;
    pbd__d2d(g->shadow.x, g->shadow.x_step, sizeof(pbd__p4) * n);
    pbd__d2d(g->shadow.v, g->shadow.v_step, sizeof(pbd__p4) * n);
    pbd__d2d(g->shadow.p, g->shadow.x, sizeof(pbd__p4) * n); /* as after a step */
    if (w->pp.nfluids > 0) pbd__d2d(g->shadow.pressure, g->shadow.pressure_step, sizeof(float) * n);
    w->pp.pressure_h = g->pressure_h_keep;
    if (pbd__couples(w)) pbd__launch(g, w->nobjects, pbd__k_coupled, g->dw, g->coupled, 0);
    if (g->sc_dev) pbd__sc_keep_dev(g, 1);
    pbd__lras_keep_dev(g, w, 1);
    pbd__dzero(g->lambdas, sizeof(float) * g->nlambdas);
    for (int c = 0; c < w->ncolliders; ++c) {
        memcpy(w->colliders[c].pos, g->col_keep[c].pos, sizeof w->colliders[c].pos);
        memcpy(w->colliders[c].rot, g->col_keep[c].rot, sizeof w->colliders[c].rot);
    }
    pbd__pull_particles(g, w);
    pbd__plugins_rollback(w); /* their own state (pbd__step_rollback) */
}

extern "C" pbd_result pbd__cuda_step(pbd_world *w, float dt, int S, char *msg, size_t msg_size) {
    pbd__gpu *g = w->gpu;
    int dirty = g->dw ? w->gpu_dirty : PBD__GPU_DIRTY_ALL, settings = PBD__GPU_DIRTY_SETTINGS | PBD__GPU_DIRTY_TARGETS;
    int ok = 1;
    if (dirty & PBD__GPU_DIRTY_ALL) ok = pbd__upload(g, w);
    else if (dirty & settings) ok = pbd__upload_settings(g, w, dirty & settings);
    if (!ok) {
        w->gpu_dirty = PBD__GPU_DIRTY_ALL; /* try again next time */
        snprintf(msg, msg_size, "out of device memory for a world of %d particles", w->n);
        return PBD_ERROR_OUT_OF_MEMORY;
    }
    if ((dirty & PBD__GPU_DIRTY_PARTICLES) && !(dirty & PBD__GPU_DIRTY_ALL)) { /* the per-frame setters: their arrays */
        size_t n = (size_t)w->n;
        pbd__send(g, g->shadow.x, w->x, sizeof(pbd__p4) * n);
        pbd__send(g, g->shadow.v, w->v, sizeof(pbd__p4) * n);
        pbd__send(g, g->shadow.p, w->p, sizeof(pbd__p4) * n);
        pbd__send(g, g->shadow.kin_target, w->kin_target, sizeof(pbd__v3) * n);
    }
    w->gpu_dirty = 0; /* what a plugin marks in this step stays marked */
    if (S == 0) {
        pbd__dsync();
        return PBD_OK;
    }
    float h = dt / (float)S;
    size_t n = (size_t)w->n;
    /* the colliders' poses live on the host (their setters and
       pbd__collider_poses); each step sends their records */
    pbd__send(g, g->shadow.colliders, w->colliders, sizeof(pbd__collider) * (size_t)w->ncolliders);
    if (w->ncolliders) memcpy(g->col_keep, w->colliders, sizeof(pbd__collider) * (size_t)w->ncolliders);
    pbd__d2d(g->shadow.x_step, g->shadow.x, sizeof(pbd__p4) * n);
    pbd__d2d(g->shadow.v_step, g->shadow.v, sizeof(pbd__p4) * n);
    if (w->pp.nfluids > 0) pbd__d2d(g->shadow.pressure_step, g->shadow.pressure, sizeof(float) * n);
    if (pbd__couples(w)) pbd__launch(g, w->nobjects, pbd__k_coupled, g->dw, g->coupled, 1);
    if (g->sc_dev) pbd__sc_keep_dev(g, 0);
    pbd__lras_keep_dev(g, w, 0);
    pbd__fluid_begin_dev(g, w, h);
    pbd__launch(g, w->n, pbd__k_kin_from, g->dw);
    pbd__damping_fractions(g, w, h);
    pbd__plugins_step_dev(g, w, dt, 0);
    if (g->sc_dev) pbd__launch(g, g->sc.nv, pbd__k_sc_begin, g->dw);
    for (int s = 0; s < S; ++s) pbd__substep_dev(g, w, h, s, S);
    for (int c = 0; c < w->ncolliders; ++c) {
        pbd__collider *col = &w->colliders[c];
        memcpy(col->pos, col->to_pos, sizeof col->pos);
        memcpy(col->rot, col->to_rot, sizeof col->rot);
    }
    pbd__plugins_step_dev(g, w, dt, 1);
    pbd__dzero(g->lambdas, sizeof(float) * g->nlambdas); /* zero between steps */
    pbd__dzero(g->bad, sizeof(int));
    pbd__launch(g, w->n, pbd__k_nonfinite, g->dw, g->bad);
    int bad = 0;
    pbd__d2h(&bad, g->bad, sizeof bad);
#ifndef PBD_CUDA_EMULATE
    cudaError_t e = cudaGetLastError(); /* a launch or a copy of this step that failed */
    if (e != cudaSuccess) {
        snprintf(msg, msg_size, "the GPU failed in the step: %s", cudaGetErrorString(e));
        return PBD_ERROR_UNSUPPORTED;
    }
#endif
    if (bad) {
        pbd__pull_particles(g, w);
        int i = pbd__first_nonfinite(w), o = i >= 0 ? pbd__object_of(w, i) : -1;
        pbd__rollback_dev(g, w);
        char obj[32] = "no object";
        if (o >= 0) snprintf(obj, sizeof obj, "object %d", o);
        snprintf(msg, msg_size,
                 "the step made particle %d (%s) non-finite; the world is back at its state before the step", i, obj);
        return PBD_ERROR_NOT_FINITE;
    }
    for (int li = 0; li < w->nlras; ++li)
        if (w->lras[li].reach) pbd__launch(g, w->lras[li].count, pbd__k_lra_tighten, g->dw, li);
    return PBD_OK;
}

// ==== pbd_sm.h ================================================================
/* pbd_sm.h's plugins on a GPU world (pbd_plugin_desc.device): their arrays
   on the device from the moment they are added, their stages as kernels
   over pbd_sm.h's PBD_HD functions, with the CPU's loops one thread per
   element and its sums one thread each, in its order: the CPU's bits. So
   far the surface volume (pbd_sm.h, "surface volume"), the
   shape-matching bodies ("shape matching"), oriented particles
   ("oriented", and their skins) and the multi-resolution cloth
   ("multires cloth"). */

/* A surface volume's device side: its device arrays (pointers of the
   record's shape, filled in by pbd__sm_volume_image) and scratch for its
   sums. */
enum { PBD__VS_C, PBD__VS_SUM, PBD__VS_DEN, PBD__VS_DCDT, PBD__VS_N };
typedef struct pbd__sm_volume_dev {
    pbd_sm__volume d; /* only the arrays are used */
    double *scratch;  /* PBD__VS_N: C, the local weights' sum, the denominator, dC/dt */
} pbd__sm_volume_dev;

/* The record the kernels get (by value): the host's, with the device's arrays. */
static pbd_sm__volume pbd__sm_volume_image(const pbd_sm__volume *v) {
    const pbd_sm__volume *d = &((const pbd__sm_volume_dev *)v->gpu)->d;
    pbd_sm__volume m = *v;
    m.verts = d->verts;
    m.tri = d->tri;
    m.adj_start = d->adj_start;
    m.adj = d->adj;
    m.opposite = d->opposite;
    m.pair_rest = d->pair_rest;
    m.grad = d->grad;
    m.weight = d->weight;
    m.weight2 = d->weight2;
    m.pred = d->pred;
    m.world = NULL;
    m.gpu = NULL;
    return m;
}

/* Whether p is within d of a collider (pbd_sm__volume_colliding's test on
   the device's colliders, in the same order). */
static PBD_HD int pbd__sm_colliding(const pbd_world *w, const float *p, float d) {
    for (int k = 0; k < w->ncolliders; ++k) {
        pbd__v3 n;
        if (w->colliders[k].s.live && pbd__collider_closest_at(w, &w->colliders[k], pbd__ld(p), &n) < d) return 1;
    }
    return 0;
}

PBD__KERNEL pbd__k_vol_pred(pbd_sm__volume v, const float *P) {
    PBD__GRID_LOOP(i, v.nv) { pbd_sm__volume_predicted(&v, P, i); }
}
/* V and its gradient at P (one thread); project: C into the scratch */
PBD__KERNEL pbd__k_vol_eval(pbd_sm__volume v, const float *P, double *scr, int project) {
    PBD__GRID_LOOP(t, 1) {
        double V = pbd_sm__volume_eval(&v, P, v.grad);
        if (project) scr[PBD__VS_C] = V - v.rest_volume;
    }
}
/* the weights (pbd_sm__volume_weights), loop by loop */
PBD__KERNEL pbd__k_vol_local(pbd_sm__volume v, const float *P) {
    PBD__GRID_LOOP(i, v.nv) { v.weight[i] = pbd_sm__volume_local(&v, P, i); }
}
PBD__KERNEL pbd__k_vol_sum(pbd_sm__volume v, double *scr) {
    PBD__GRID_LOOP(t, 1) { scr[PBD__VS_SUM] = pbd_sm__volume_sum(v.weight, v.nv); }
}
PBD__KERNEL pbd__k_vol_blend(pbd_sm__volume v, const double *scr) {
    PBD__GRID_LOOP(i, v.nv) { pbd_sm__volume_blend(&v, i, scr[PBD__VS_SUM]); }
}
PBD__KERNEL pbd__k_vol_smooth(pbd_sm__volume v) {
    PBD__GRID_LOOP(i, v.nv) { pbd_sm__volume_smooth(&v, i); }
}
PBD__KERNEL pbd__k_vol_settle(pbd_sm__volume v) {
    PBD__GRID_LOOP(i, v.nv) { v.weight[i] = v.weight2[i]; }
}
PBD__KERNEL pbd__k_vol_fixed(pbd_sm__volume v, const pbd_world *w, const float *P) {
    PBD__GRID_LOOP(i, v.nv) {
        const float *pi = P + 4 * v.verts[i];
        if (!(pi[3] > 0) || pbd__sm_colliding(w, pi, v.contact_distance)) v.weight[i] = 0;
    }
}
/* the denominator, and with V the velocities' dC/dt (one thread) */
PBD__KERNEL pbd__k_vol_den(pbd_sm__volume v, double *scr, const float *V) {
    PBD__GRID_LOOP(t, 1) {
        scr[PBD__VS_DEN] = pbd_sm__volume_den(&v);
        if (V) scr[PBD__VS_DCDT] = pbd_sm__volume_dcdt(&v, V);
    }
}
/* the positions (velocity 0: eq. 13) or the velocities moved */
PBD__KERNEL pbd__k_vol_move(pbd_sm__volume v, float *A, const double *scr, int velocity) {
    PBD__GRID_LOOP(i, v.nv) {
        double den = scr[PBD__VS_DEN];
        if (!(den > PBD_SM__VOLUME_DEN_MIN)) continue;
        pbd_sm__volume_move(&v, A, i, velocity ? -scr[PBD__VS_DCDT] / den : -v.stiffness * scr[PBD__VS_C] / den);
    }
}

static void pbd__sm_volume_free(pbd_sm__volume *v) {
    pbd__sm_volume_dev *r = (pbd__sm_volume_dev *)v->gpu;
    if (!r) return;
    void *arrays[] = {r->d.verts, r->d.tri,    r->d.adj_start, r->d.adj,  r->d.opposite, r->d.pair_rest,
                      r->d.grad,  r->d.weight, r->d.weight2,   r->d.pred, r->scratch};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    free(r);
    v->gpu = NULL;
}
/* A device array of n elements of host, copied up (host NULL: left as is). */
template <typename T> static int pbd__sm_array(T **dev, const T *host, size_t n) {
    if (!pbd__dmalloc((void **)dev, sizeof(T) * (n ? n : 1))) return 0;
    if (host) pbd__h2d(*dev, host, sizeof(T) * n);
    return 1;
}
static int pbd__sm_volume_upload(pbd_sm__volume *v) {
    pbd__sm_volume_dev *r = (pbd__sm_volume_dev *)calloc(1, sizeof *r);
    if (!r) return 0;
    v->gpu = r;
    size_t nv = (size_t)v->nv, nt = (size_t)v->nt;
    pbd_sm__volume *d = &r->d;
    int ok = pbd__sm_array(&d->verts, v->verts, nv) && pbd__sm_array(&d->tri, v->tri, 3 * nt) &&
             pbd__sm_array(&d->adj_start, v->adj_start, nv + 1) &&
             pbd__sm_array(&d->adj, v->adj, (size_t)v->adj_start[nv]) && pbd__sm_array(&d->opposite, v->opposite, nv) &&
             pbd__sm_array(&d->pair_rest, v->pair_rest, nv) && pbd__sm_array(&d->grad, v->grad, 3 * nv) &&
             pbd__sm_array(&d->weight, v->weight, nv) && pbd__sm_array(&d->weight2, (const double *)NULL, nv) &&
             pbd__sm_array(&d->pred, v->pred, 3 * nv) && pbd__sm_array(&r->scratch, (const double *)NULL, PBD__VS_N);
    if (!ok) pbd__sm_volume_free(v);
    return ok;
}

/* The stages of pbd_sm__volume_begin_substep, _project and _end_substep. */
static void pbd__sm_volume_stage(pbd_sm__volume *v, const pbd_solve_context *c, int what) {
    pbd__gpu *g = c->world->gpu;
    pbd_sm__volume m = pbd__sm_volume_image(v);
    double *scr = ((pbd__sm_volume_dev *)v->gpu)->scratch;
    int n = v->nv;
    if (what == PBD_SM__CUDA_BEGIN) {
        pbd__launch(g, n, pbd__k_vol_pred, m, (const float *)c->p);
    } else if (what == PBD_SM__CUDA_PROJECT) {
        const float *P = c->p;
        pbd__launch(g, 1, pbd__k_vol_eval, m, P, scr, 1);
        pbd__launch(g, n, pbd__k_vol_local, m, P);
        pbd__launch(g, 1, pbd__k_vol_sum, m, scr);
        pbd__launch(g, n, pbd__k_vol_blend, m, (const double *)scr);
        for (int pass = 0; pass < v->smoothing; ++pass) {
            pbd__launch(g, n, pbd__k_vol_smooth, m);
            pbd__launch(g, n, pbd__k_vol_settle, m);
        }
        pbd__launch(g, n, pbd__k_vol_fixed, m, (const pbd_world *)g->dw, P);
        pbd__launch(g, 1, pbd__k_vol_den, m, scr, (const float *)NULL);
        pbd__launch(g, n, pbd__k_vol_move, m, c->p, (const double *)scr, 0);
    } else {
        pbd__launch(g, 1, pbd__k_vol_eval, m, (const float *)c->x, scr, 0);
        pbd__launch(g, 1, pbd__k_vol_den, m, scr, (const float *)c->v);
        pbd__launch(g, n, pbd__k_vol_move, m, c->v, (const double *)scr, 1);
    }
}

extern "C" int pbd_sm__cuda_volume(pbd_sm__volume *v, size_t size, const pbd_solve_context *c, int what) {
    if (size != sizeof *v) return 0; /* another pbd_sm.h than this file's */
    switch (what) {
        case PBD_SM__CUDA_UPLOAD: return pbd__sm_volume_upload(v);
        case PBD_SM__CUDA_FETCH:
            pbd__d2h(v->weight, ((pbd__sm_volume_dev *)v->gpu)->d.weight, sizeof(double) * (size_t)v->nv);
            return 1;
        case PBD_SM__CUDA_PUSH: /* the weights back (a restored snapshot) */
            pbd__h2d(((pbd__sm_volume_dev *)v->gpu)->d.weight, v->weight, sizeof(double) * (size_t)v->nv);
            return 1;
        case PBD_SM__CUDA_FREE: pbd__sm_volume_free(v); return 1;
        default: pbd__sm_volume_stage(v, c, what); return 1;
    }
}

/* --- shape-matching bodies ------------------------------------------------------
   A body's arrays and its summation plan on the device; its stages
   (pbd_sm__solve's, one kernel per loop of the CPU's, whose elements are
   independent) with pbd_sm.h's PBD_HD functions: the values per particle,
   the plan's sums (naive: per region; lattice and paths: per line, then
   per region of the scans; octree: per node level or per line and slab of
   its tables, then per region), the goals per region, the gather per
   particle (or the plan's sums again), the update per particle, the
   plastic flow per region; a rigid body's weights per particle and its
   weighted match and velocity fit in one thread each (one thread on the
   CPU too); a linear or quadratic body's volume term (pbd_sm.h "---
   volume") with the same sums and gather, its weights and moves per
   particle and its corrections per region. The same operations in the same order: the CPU's bits. */

/* A plan's data on the device (the image of its record and its method's). */
typedef struct pbd__sm_plan_dev {
    pbd_sm_summation method;
    int n, nr;
    int *region_start, *region_particles; /* naive */
    pbd_sm__scan pass[3];                 /* lattice: bars, plates, cubes; paths: pass[0] */
    double *P, *B;                        /* their scratch, rows of k */
    pbd_sm__octree T;                     /* octree: the image of its record */
    int *h_level, *h_dim;                 /* and host copies of its levels' starts and tables' sizes */
} pbd__sm_plan_dev;

typedef struct pbd__sm_body_dev {
    pbd_sm__body d; /* only the arrays are used */
    pbd__sm_plan_dev plan;
    double *o; /* 3: the projection's origin */
} pbd__sm_body_dev;

static int pbd__sm_scan_up(pbd_sm__scan *d, const pbd_sm__scan *h) {
    *d = *h;
    long long ivs = h->out_start ? h->out_start[h->out_count] : h->out_count;
    d->gather = d->out_start = d->iv = NULL;
    return (!h->gather || pbd__sm_array(&d->gather, h->gather, (size_t)h->in_count)) &&
           pbd__sm_array(&d->seg_start, h->seg_start, (size_t)h->seg_count + 1) &&
           (!h->out_start || pbd__sm_array(&d->out_start, h->out_start, (size_t)h->out_count + 1)) &&
           pbd__sm_array(&d->iv, h->iv, 2 * (size_t)ivs);
}
static void pbd__sm_scan_free(pbd_sm__scan *d) {
    pbd__dfree(d->gather);
    pbd__dfree(d->seg_start);
    pbd__dfree(d->out_start);
    pbd__dfree(d->iv);
}
static int pbd__sm_octree_up(pbd_sm__octree *d, const pbd_sm__octree *h, int k) {
    memset(d, 0, sizeof *d);
    d->n = h->n;
    d->m = h->m;
    d->levels = h->levels;
    d->tab_count = h->tab_count;
    if (h->tab_count > 0) {
        long long groups = h->corner_start[h->n];
        return pbd__sm_array(&d->tab_dim, h->tab_dim, 3 * (size_t)h->tab_count) &&
               pbd__sm_array(&d->tab_row, h->tab_row, (size_t)h->tab_count + 1) &&
               pbd__sm_array(&d->tab_cell, h->tab_cell, (size_t)h->tab_count + 1) &&
               pbd__sm_array(&d->tab_leaf, h->tab_leaf, (size_t)h->tab_cell[h->tab_count]) &&
               pbd__sm_array(&d->corner_start, h->corner_start, (size_t)h->n + 1) &&
               pbd__sm_array(&d->corner, h->corner, 8 * (size_t)groups) &&
               pbd__sm_array(&d->tab, (const double *)NULL, (size_t)h->tab_row[h->tab_count] * (size_t)k);
    }
    return pbd__sm_array(&d->level_start, h->level_start, (size_t)h->levels + 1) &&
           pbd__sm_array(&d->child_start, h->child_start, (size_t)h->m + 1) &&
           pbd__sm_array(&d->child, h->child, (size_t)h->child_start[h->m]) &&
           pbd__sm_array(&d->reg_start, h->reg_start, (size_t)h->n + 1) &&
           pbd__sm_array(&d->reg_node, h->reg_node, (size_t)h->reg_start[h->n]) &&
           pbd__sm_array(&d->node_sums, (const double *)NULL, (size_t)h->m * (size_t)k + 1);
}
static void pbd__sm_plan_free(pbd__sm_plan_dev *d) {
    pbd__dfree(d->region_start);
    pbd__dfree(d->region_particles);
    for (int s = 0; s < 3; ++s) pbd__sm_scan_free(&d->pass[s]);
    pbd__dfree(d->P);
    pbd__dfree(d->B);
    pbd_sm__octree *T = &d->T;
    void *arrays[] = {T->level_start,  T->child_start, T->child,   T->reg_start, T->reg_node,
                      T->node_sums,    T->tab_dim,     T->tab_row, T->tab_leaf,  T->tab_cell,
                      T->corner_start, T->corner,      T->tab};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    free(d->h_level);
    free(d->h_dim);
}
/* Plan p for sums of k doubles per row. */
static int pbd__sm_plan_up(pbd__sm_plan_dev *d, const pbd_sm_sum_plan *p, int k) {
    memset(d, 0, sizeof *d);
    d->method = p->method;
    d->n = p->particle_count;
    d->nr = p->region_count;
    int ok = pbd__sm_array(&d->region_start, p->region_start, (size_t)p->region_count + 1) &&
             pbd__sm_array(&d->region_particles, p->region_particles, (size_t)p->region_start[p->region_count]);
    if (ok && p->method == PBD_SM_SUM_LATTICE) {
        const pbd_sm__lattice *L = (const pbd_sm__lattice *)p->impl;
        size_t prow = 0, brow = (size_t)(L->pass[0].out_count > L->pass[1].out_count ? L->pass[0].out_count
                                                                                     : L->pass[1].out_count);
        for (int s = 0; ok && s < 3; ++s) {
            size_t rows = (size_t)L->pass[s].in_count + (size_t)L->pass[s].seg_count;
            if (rows > prow) prow = rows;
            ok = pbd__sm_scan_up(&d->pass[s], &L->pass[s]);
        }
        ok = ok && pbd__sm_array(&d->P, (const double *)NULL, prow * (size_t)k) &&
             pbd__sm_array(&d->B, (const double *)NULL, brow * (size_t)k);
    } else if (ok && p->method == PBD_SM_SUM_PATHS) {
        const pbd_sm__paths *Q = (const pbd_sm__paths *)p->impl;
        ok = pbd__sm_scan_up(&d->pass[0], &Q->scan) &&
             pbd__sm_array(&d->P, (const double *)NULL,
                           ((size_t)Q->scan.in_count + (size_t)Q->scan.seg_count) * (size_t)k);
    } else if (ok && p->method == PBD_SM_SUM_OCTREE) {
        const pbd_sm__octree *T = (const pbd_sm__octree *)p->impl;
        size_t nl = (size_t)T->levels + 1, nd = 3 * (size_t)T->tab_count + 1;
        d->h_level = (int *)malloc(sizeof(int) * nl);
        d->h_dim = (int *)malloc(sizeof(int) * nd);
        ok = d->h_level && d->h_dim && pbd__sm_octree_up(&d->T, T, k);
        if (ok && T->level_start) memcpy(d->h_level, T->level_start, sizeof(int) * nl);
        if (ok && T->tab_count > 0) memcpy(d->h_dim, T->tab_dim, sizeof(int) * (nd - 1));
    }
    if (!ok) pbd__sm_plan_free(d);
    return ok;
}

PBD__KERNEL pbd__k_sm_gather(int count, const int *start, const int *idx, const double *lo, int split, const double *hi,
                             int k, double *out) {
    PBD__GRID_LOOP(o, count) { pbd_sm__gather_one(o, start, idx, lo, split, hi, k, out, 0); }
}
PBD__KERNEL pbd__k_sm_scan_segment(pbd_sm__scan s, const double *src, double *P, int k) {
    PBD__GRID_LOOP(g, s.seg_count) { pbd_sm__scan_segment(&s, src, P, k, g, 0); }
}
PBD__KERNEL pbd__k_sm_scan_output(pbd_sm__scan s, const double *P, double *dst, int k) {
    PBD__GRID_LOOP(o, s.out_count) { pbd_sm__scan_output(&s, P, dst, k, o, 0); }
}
PBD__KERNEL pbd__k_sm_table_x(pbd_sm__octree T, int t, const double *values, int k, int lines) {
    PBD__GRID_LOOP(L, lines) { pbd_sm__table_x(&T, t, values, k, L, 0); }
}
PBD__KERNEL pbd__k_sm_table_yz(pbd_sm__octree T, int t, int k, int axis, int slabs) {
    PBD__GRID_LOOP(u, slabs) { pbd_sm__table_yz(&T, t, k, axis, u + 1, 0); }
}
PBD__KERNEL pbd__k_sm_table_region(pbd_sm__octree T, double *sums, int k) {
    PBD__GRID_LOOP(r, T.n) { pbd_sm__table_region(&T, sums, k, r, 0); }
}

static void pbd__sm_scan_dev(pbd__gpu *g, const pbd_sm__scan *s, const double *src, double *P, double *dst, int k) {
    pbd__launch(g, s->seg_count, pbd__k_sm_scan_segment, *s, src, P, k);
    pbd__launch(g, s->out_count, pbd__k_sm_scan_output, *s, (const double *)P, dst, k);
}
/* pbd_sm_plan_sum's passes (the methods' sum functions), on the device. */
static void pbd__sm_plan_sum_dev(pbd__gpu *g, const pbd__sm_plan_dev *p, const double *values, int k, double *sums) {
    const pbd_sm__octree *T = &p->T;
    switch (p->method) {
        case PBD_SM_SUM_LATTICE:
            pbd__sm_scan_dev(g, &p->pass[0], values, p->P, p->B, k);
            pbd__sm_scan_dev(g, &p->pass[1], p->B, p->P, p->B, k);
            pbd__sm_scan_dev(g, &p->pass[2], p->B, p->P, sums, k);
            break;
        case PBD_SM_SUM_PATHS: pbd__sm_scan_dev(g, &p->pass[0], values, p->P, sums, k); break;
        case PBD_SM_SUM_OCTREE:
            if (T->tab_count > 0) {
                for (int t = 0; t < T->tab_count; ++t) {
                    const int *dim = p->h_dim + 3 * t;
                    pbd__launch(g, (dim[1] + 1) * (dim[2] + 1), pbd__k_sm_table_x, *T, t, values, k,
                                (dim[1] + 1) * (dim[2] + 1));
                    pbd__launch(g, dim[2], pbd__k_sm_table_yz, *T, t, k, 1, dim[2]);
                    pbd__launch(g, dim[1], pbd__k_sm_table_yz, *T, t, k, 2, dim[1]);
                }
                pbd__launch(g, T->n, pbd__k_sm_table_region, *T, sums, k);
                break;
            }
            for (int l = 0; l < T->levels; ++l) {
                int b = p->h_level[l], e = p->h_level[l + 1];
                pbd__launch(g, e - b, pbd__k_sm_gather, e - b, (const int *)T->child_start + b, (const int *)T->child,
                            values, T->n, (const double *)T->node_sums, k, T->node_sums + (size_t)b * k);
            }
            pbd__launch(g, T->n, pbd__k_sm_gather, T->n, (const int *)T->reg_start, (const int *)T->reg_node, values,
                        T->n, (const double *)T->node_sums, k, sums);
            break;
        default:
            pbd__launch(g, p->nr, pbd__k_sm_gather, p->nr, (const int *)p->region_start,
                        (const int *)p->region_particles, values, p->n, (const double *)NULL, k, sums);
    }
}

/* The record the kernels get (by value): the host's, with the device's arrays. */
static pbd_sm__body pbd__sm_body_image(const pbd_sm__body *b) {
    const pbd_sm__body *d = &((const pbd__sm_body_dev *)b->gpu)->d;
    pbd_sm__body m = *b;
    m.idx = d->idx;
    m.p2r_start = d->p2r_start;
    m.p2r = d->p2r;
    m.xbar = d->xbar;
    m.mt = d->mt;
    m.inv_nreg = d->inv_nreg;
    m.M = d->M;
    m.cbar = d->cbar;
    m.Aqq_pinv = d->Aqq_pinv;
    m.Aqq_null = d->Aqq_null;
    m.A9_pinv = d->A9_pinv;
    m.Qbar = d->Qbar;
    m.rot = d->rot;
    m.Sp = d->Sp;
    m.rot_step = d->rot_step;
    m.Sp_step = d->Sp_step;
    m.values = d->values;
    m.sums = d->sums;
    m.T = d->T;
    m.G = d->G;
    m.vsums = d->vsums;
    m.rot_tmp = NULL;
    m.plan = NULL; /* the sums run on pbd__sm_body_dev.plan */
    m.world = NULL;
    m.gpu = NULL;
    return m;
}

PBD__KERNEL pbd__k_sm_origin(pbd_sm__body b, const float *pos, double *o) {
    PBD__GRID_LOOP(t, 1) { pbd_sm__origin(&b, pos, o); }
}
PBD__KERNEL pbd__k_sm_values(pbd_sm__body b, const float *pos, const double *o) {
    PBD__GRID_LOOP(i, b.n) { pbd_sm__value(&b, pos, o, i); }
}
PBD__KERNEL pbd__k_sm_goals(pbd_sm__body b) {
    PBD__GRID_LOOP(r, b.nr) { pbd_sm__region_goal(&b, r, b.rot + 4 * (size_t)r); }
}
PBD__KERNEL pbd__k_sm_gather_lists(pbd_sm__body b) {
    PBD__GRID_LOOP(i, b.n) { pbd_sm__gather_list(&b, i); }
}
PBD__KERNEL pbd__k_sm_apply(pbd_sm__body b, float *p, const double *o, double alpha) {
    PBD__GRID_LOOP(i, b.n) { pbd_sm__apply(&b, p, o, alpha, i); }
}
PBD__KERNEL pbd__k_sm_plastic(pbd_sm__body b, double h) {
    PBD__GRID_LOOP(r, b.nr) { pbd_sm__region_plastic(&b, r, h); }
}
/* pbd_sm__rigid_weights with the device's contacts (pbd_world_particle_contact_push's sum and vector) */
PBD__KERNEL pbd__k_sm_rigid_weights(pbd_sm__body b, const pbd_world *w, const float *pos) {
    PBD__GRID_LOOP(i, b.n) {
        pbd__v3 d = pbd__contact_push_vector(w, b.idx[i]);
        float dir[3] = {d.x, d.y, d.z};
        pbd_sm__rigid_weight(&b, pos, i, pbd__contact_push(w, b.idx[i]), dir);
    }
}
PBD__KERNEL pbd__k_sm_rigid_match(pbd_sm__body b, float *p) {
    PBD__GRID_LOOP(t, 1) { pbd_sm__rigid_match(&b, p); }
}
PBD__KERNEL pbd__k_sm_rigid_fit(pbd_sm__body b, const float *x, float *v, double h) {
    PBD__GRID_LOOP(t, 1) { pbd_sm__rigid_fit_velocities(&b, x, v, h); }
}
/* the volume term (pbd_sm__keep_volumes' loops) with the device's contacts */
PBD__KERNEL pbd__k_sm_volume_weights(pbd_sm__body b, const pbd_world *w, const float *pos) {
    PBD__GRID_LOOP(i, b.n) { pbd_sm__volume_weight(&b, pos, i, pbd__contact_push(w, b.idx[i])); }
}
PBD__KERNEL pbd__k_sm_region_volumes(pbd_sm__body b) {
    PBD__GRID_LOOP(r, b.nr) { pbd_sm__region_volume(&b, r); }
}
PBD__KERNEL pbd__k_sm_volume_apply(pbd_sm__body b, const pbd_world *w, float *p, double alpha) {
    PBD__GRID_LOOP(i, b.n) { pbd_sm__volume_apply(&b, p, alpha, i, pbd__contact_push(w, b.idx[i])); }
}

static void pbd__sm_body_free(pbd_sm__body *b) {
    pbd__sm_body_dev *r = (pbd__sm_body_dev *)b->gpu;
    if (!r) return;
    const pbd_sm__body *d = &r->d;
    void *arrays[] = {d->idx,      d->p2r_start, d->p2r,     d->xbar, d->mt,  d->inv_nreg, d->M,        d->cbar,
                      d->Aqq_pinv, d->Aqq_null,  d->A9_pinv, d->Qbar, d->rot, d->Sp,       d->rot_step, d->Sp_step,
                      d->values,   d->sums,      d->T,       d->G,    r->o,   d->vsums};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    pbd__sm_plan_free(&r->plan);
    free(r);
    b->gpu = NULL;
}
static int pbd__sm_body_upload(pbd_sm__body *b) {
    pbd__sm_body_dev *r = (pbd__sm_body_dev *)calloc(1, sizeof *r);
    if (!r) return 0;
    b->gpu = r;
    size_t n = (size_t)b->n, nr = (size_t)b->nr, k = 3 * (size_t)pbd_sm__body_nb(b);
    int quad = b->mode == PBD_SM_QUADRATIC;
    pbd_sm__body *d = &r->d;
    int ok = pbd__sm_array(&d->idx, b->idx, n) && pbd__sm_array(&d->xbar, b->xbar, 3 * n) &&
             pbd__sm_array(&d->mt, b->mt, n) && pbd__sm_array(&d->inv_nreg, b->inv_nreg, n) &&
             pbd__sm_array(&d->M, b->M, nr) && pbd__sm_array(&d->cbar, b->cbar, 3 * nr) &&
             pbd__sm_array(&d->Aqq_pinv, b->Aqq_pinv, 9 * nr) && pbd__sm_array(&d->Aqq_null, b->Aqq_null, 9 * nr) &&
             (!quad || (pbd__sm_array(&d->A9_pinv, b->A9_pinv, 81 * nr) && pbd__sm_array(&d->Qbar, b->Qbar, 6 * nr))) &&
             pbd__sm_array(&d->rot, b->rot, 4 * nr) && pbd__sm_array(&d->Sp, b->Sp, 9 * nr) &&
             pbd__sm_array(&d->rot_step, b->rot_step, 4 * nr) && pbd__sm_array(&d->Sp_step, b->Sp_step, 9 * nr) &&
             pbd__sm_array(&d->values, (const double *)NULL, n * (k > PBD_SM__VOLUME_K ? k : PBD_SM__VOLUME_K)) &&
             pbd__sm_array(&d->sums, (const double *)NULL, nr * k) &&
             pbd__sm_array(&d->T, (const double *)NULL, nr * k) && pbd__sm_array(&d->G, (const double *)NULL, n * k) &&
             pbd__sm_array(&d->vsums, (const double *)NULL, nr * PBD_SM__VOLUME_K) &&
             pbd__sm_array(&r->o, (const double *)NULL, 3) &&
             pbd__sm_plan_up(&r->plan, b->plan, (int)(k > PBD_SM__VOLUME_K ? k : PBD_SM__VOLUME_K));
    if (ok && !b->symmetric) {
        size_t total = (size_t)b->p2r_start[n];
        ok = pbd__sm_array(&d->p2r_start, b->p2r_start, n + 1) && pbd__sm_array(&d->p2r, b->p2r, total);
    }
    if (!ok) pbd__sm_body_free(b);
    return ok;
}

/* One projection (or, plastic, the plastic flow after a substep) of the
   positions pos: pbd_sm__solve's stages. */
static void pbd__sm_body_solve(pbd__gpu *g, pbd_sm__body *b, float *pos, double alpha, int plastic, double h) {
    pbd__sm_body_dev *r = (pbd__sm_body_dev *)b->gpu;
    pbd_sm__body m = pbd__sm_body_image(b);
    int k = 3 * pbd_sm__body_nb(b);
    pbd__launch(g, 1, pbd__k_sm_origin, m, (const float *)pos, r->o);
    pbd__launch(g, b->n, pbd__k_sm_values, m, (const float *)pos, (const double *)r->o);
    pbd__sm_plan_sum_dev(g, &r->plan, m.values, k, m.sums);
    if (plastic) {
        pbd__launch(g, b->nr, pbd__k_sm_plastic, m, h);
        return;
    }
    pbd__launch(g, b->nr, pbd__k_sm_goals, m);
    if (b->symmetric) pbd__sm_plan_sum_dev(g, &r->plan, m.T, k, m.G);
    else pbd__launch(g, b->n, pbd__k_sm_gather_lists, m);
    pbd__launch(g, b->n, pbd__k_sm_apply, m, pos, (const double *)r->o, alpha);
}

/* The volume term on pos (pbd_sm__keep_volumes' stages): the weight sums,
   then the sweeps. */
static void pbd__sm_body_volume(pbd__gpu *g, pbd_sm__body *b, float *pos, double alpha) {
    pbd__sm_body_dev *r = (pbd__sm_body_dev *)b->gpu;
    pbd_sm__body m = pbd__sm_body_image(b);
    int k = 3 * pbd_sm__body_nb(b);
    const pbd_world *w = (const pbd_world *)g->dw;
    pbd__launch(g, b->n, pbd__k_sm_volume_weights, m, w, (const float *)pos);
    pbd__sm_plan_sum_dev(g, &r->plan, m.values, PBD_SM__VOLUME_K, m.vsums);
    for (int s = 0; s < PBD_SM__VOLUME_SWEEPS; ++s) {
        pbd__launch(g, 1, pbd__k_sm_origin, m, (const float *)pos, r->o);
        pbd__launch(g, b->n, pbd__k_sm_values, m, (const float *)pos, (const double *)r->o);
        pbd__sm_plan_sum_dev(g, &r->plan, m.values, k, m.sums);
        pbd__launch(g, b->nr, pbd__k_sm_region_volumes, m);
        if (b->symmetric) pbd__sm_plan_sum_dev(g, &r->plan, m.T, k, m.G);
        else pbd__launch(g, b->n, pbd__k_sm_gather_lists, m);
        pbd__launch(g, b->n, pbd__k_sm_volume_apply, m, w, pos, alpha);
    }
}

/* The plugin's callbacks (pbd_sm__plugin_*), on the device. */
static void pbd__sm_body_stage(pbd_sm__body *b, const pbd_solve_context *c, int what) {
    pbd__gpu *g = c->world->gpu;
    pbd_sm__body m = pbd__sm_body_image(b);
    if (what == PBD_SM__CUDA_PROJECT) {
        pbd__sm_body_solve(g, b, c->p, pbd_sm__alpha(b, c->iterations), 0, 0);
    } else if (what == PBD_SM__CUDA_AFTER_CONTACTS && pbd_sm__is_rigid(b)) {
        pbd__launch(g, b->n, pbd__k_sm_rigid_weights, m, (const pbd_world *)g->dw, (const float *)c->p);
        pbd__launch(g, 1, pbd__k_sm_rigid_match, m, c->p);
    } else if (what == PBD_SM__CUDA_AFTER_CONTACTS) {
        pbd__sm_body_volume(g, b, c->p, pbd_sm__volume_alpha(b, c->iterations));
    } else if (what == PBD_SM__CUDA_END) {
        if (pbd_sm__is_rigid(b)) {
            pbd__launch(g, b->n, pbd__k_sm_rigid_weights, m, (const pbd_world *)g->dw, (const float *)c->x);
            pbd__launch(g, 1, pbd__k_sm_rigid_fit, m, (const float *)c->x, c->v, (double)c->h);
        }
        if (b->creep > 0) pbd__sm_body_solve(g, b, c->x, 0, 1, c->h);
    }
}

extern "C" int pbd_sm__cuda_body(pbd_sm__body *b, size_t size, const pbd_solve_context *c, int what) {
    if (size != sizeof *b) return 0; /* another pbd_sm.h than this file's */
    pbd__sm_body_dev *r = (pbd__sm_body_dev *)b->gpu;
    size_t nr = (size_t)b->nr;
    switch (what) {
        case PBD_SM__CUDA_UPLOAD: return pbd__sm_body_upload(b);
        case PBD_SM__CUDA_FREE: pbd__sm_body_free(b); return 1;
        case PBD_SM__CUDA_FETCH: /* the rotations and plastic states (what the getters read) */
            pbd__d2h(b->rot, r->d.rot, sizeof(double) * 4 * nr);
            pbd__d2h(b->Sp, r->d.Sp, sizeof(double) * 9 * nr);
            return 1;
        case PBD_SM__CUDA_PUSH: /* likewise (pbd_sm_body_reset_plasticity, a restored snapshot) */
            pbd__h2d(r->d.rot, b->rot, sizeof(double) * 4 * nr);
            pbd__h2d(r->d.Sp, b->Sp, sizeof(double) * 9 * nr);
            return 1;
        case PBD_SM__CUDA_KEEP:
            pbd__d2d(r->d.rot_step, r->d.rot, sizeof(double) * 4 * nr);
            pbd__d2d(r->d.Sp_step, r->d.Sp, sizeof(double) * 9 * nr);
            return 1;
        case PBD_SM__CUDA_ROLLBACK:
            pbd__d2d(r->d.rot, r->d.rot_step, sizeof(double) * 4 * nr);
            pbd__d2d(r->d.Sp, r->d.Sp_step, sizeof(double) * 9 * nr);
            return 1;
        default: pbd__sm_body_stage(b, c, what); return 1;
    }
}

/* --- oriented particles ---------------------------------------------------------
   A set's arrays on the device; its stages with pbd_sm.h's PBD_HD
   functions: the predicted orientations per particle; the groups' matches
   one after the other in one thread (Gauss-Seidel over overlapping
   groups, as on the CPU: each reads what the last one moved); the
   ellipsoids against the colliders per particle (each moves only its
   own particle and orientation), the colliders in slot order; the angular
   velocities per particle. */
typedef struct pbd__sm_oriented_dev {
    pbd_sm__oriented d; /* only the arrays are used */
} pbd__sm_oriented_dev;

static pbd_sm__oriented pbd__sm_oriented_image(const pbd_sm__oriented *o) {
    const pbd_sm__oriented *d = &((const pbd__sm_oriented_dev *)o->gpu)->d;
    pbd_sm__oriented m = *o;
    m.q = d->q;
    m.qp = d->qp;
    m.omega = d->omega;
    m.q_step = d->q_step;
    m.omega_step = d->omega_step;
    m.rest_q = d->rest_q;
    m.radii = d->radii;
    m.rest = d->rest;
    m.mass = d->mass;
    m.ring_start = d->ring_start;
    m.ring = d->ring;
    m.world = NULL;
    m.gpu = NULL;
    return m;
}

PBD__KERNEL pbd__k_or_predict(pbd_sm__oriented o, const float *p, double h) {
    PBD__GRID_LOOP(i, o.count) { pbd_sm__oriented_predict(&o, p, h, i); }
}
/* every group in order; a particle of inverse mass 0 turns with its group
   when it is kinematic (pbd_sm__oriented_turns, from the device's flags) */
PBD__KERNEL pbd__k_or_match(pbd_sm__oriented o, const pbd_world *w, float *p) {
    PBD__GRID_LOOP(t, 1) {
        for (int g = 0; g < o.count; ++g)
            pbd_sm__oriented_match(&o, p, g, (w->flags[o.first + g] & PBD__KINEMATIC) != 0);
    }
}
PBD__KERNEL pbd__k_or_collide(pbd_sm__oriented o, const pbd_world *w, float *p) {
    PBD__GRID_LOOP(i, o.count) {
        float *pi = p + 4 * (o.first + i);
        if (!(pi[3] > 0)) continue;
        for (int k = 0; k < w->ncolliders; ++k) {
            const pbd__collider *col = &w->colliders[k];
            if (!col->s.live) continue;
            pbd__v3 n;
            float dist = pbd__collider_closest_at(w, col, pbd__ld(pi), &n), nf[3] = {n.x, n.y, n.z}, s[3];
            double mu[3];
            if (!pbd_sm__ellipsoid_support(&o, p, i, dist, nf, s, mu)) continue;
            float d2 = pbd__collider_closest_at(w, col, pbd__ld(s), &n), n2[3] = {n.x, n.y, n.z};
            pbd_sm__ellipsoid_push(&o, p, i, mu, d2, n2);
        }
    }
}
PBD__KERNEL pbd__k_or_advance(pbd_sm__oriented o, const float *p, double h) {
    PBD__GRID_LOOP(i, o.count) { pbd_sm__oriented_advance(&o, p, h, i); }
}

static void pbd__sm_oriented_free(pbd_sm__oriented *o) {
    pbd__sm_oriented_dev *r = (pbd__sm_oriented_dev *)o->gpu;
    if (!r) return;
    const pbd_sm__oriented *d = &r->d;
    void *arrays[] = {d->q,     d->qp,   d->omega, d->q_step,     d->omega_step, d->rest_q,
                      d->radii, d->rest, d->mass,  d->ring_start, d->ring};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    free(r);
    o->gpu = NULL;
}
static int pbd__sm_oriented_upload(pbd_sm__oriented *o) {
    pbd__sm_oriented_dev *r = (pbd__sm_oriented_dev *)calloc(1, sizeof *r);
    if (!r) return 0;
    o->gpu = r;
    size_t n = (size_t)o->count;
    pbd_sm__oriented *d = &r->d;
    int ok = pbd__sm_array(&d->q, o->q, 4 * n) && pbd__sm_array(&d->qp, o->qp, 4 * n) &&
             pbd__sm_array(&d->omega, o->omega, 3 * n) && pbd__sm_array(&d->q_step, o->q_step, 4 * n) &&
             pbd__sm_array(&d->omega_step, o->omega_step, 3 * n) && pbd__sm_array(&d->rest_q, o->rest_q, 4 * n) &&
             pbd__sm_array(&d->radii, o->radii, 3 * n) && pbd__sm_array(&d->rest, o->rest, 3 * n) &&
             pbd__sm_array(&d->mass, o->mass, n) && pbd__sm_array(&d->ring_start, o->ring_start, n + 1) &&
             pbd__sm_array(&d->ring, o->ring, (size_t)o->ring_start[n]);
    if (!ok) pbd__sm_oriented_free(o);
    return ok;
}

extern "C" int pbd_sm__cuda_oriented(pbd_sm__oriented *o, size_t size, const pbd_solve_context *c, int what) {
    if (size != sizeof *o) return 0; /* another pbd_sm.h than this file's */
    pbd__sm_oriented_dev *r = (pbd__sm_oriented_dev *)o->gpu;
    size_t n = (size_t)o->count;
    if (what == PBD_SM__CUDA_UPLOAD) return pbd__sm_oriented_upload(o);
    if (what == PBD_SM__CUDA_FREE) {
        pbd__sm_oriented_free(o);
        return 1;
    }
    const pbd_sm__oriented *d = &r->d;
    switch (what) {
        case PBD_SM__CUDA_FETCH: /* the orientations and angular velocities (what the getters read) */
            pbd__d2h(o->q, d->q, sizeof(double) * 4 * n);
            pbd__d2h(o->qp, d->qp, sizeof(double) * 4 * n);
            pbd__d2h(o->omega, d->omega, sizeof(double) * 3 * n);
            return 1;
        case PBD_SM__CUDA_PUSH: /* likewise, after pbd_sm_oriented_set_state */
            pbd__h2d(d->q, o->q, sizeof(double) * 4 * n);
            pbd__h2d(d->qp, o->qp, sizeof(double) * 4 * n);
            pbd__h2d(d->omega, o->omega, sizeof(double) * 3 * n);
            return 1;
        case PBD_SM__CUDA_KEEP:
            pbd__d2d(d->q_step, d->q, sizeof(double) * 4 * n);
            pbd__d2d(d->omega_step, d->omega, sizeof(double) * 3 * n);
            return 1;
        case PBD_SM__CUDA_ROLLBACK: /* qp too, as pbd_sm__oriented_rollback */
            pbd__d2d(d->q, d->q_step, sizeof(double) * 4 * n);
            pbd__d2d(d->qp, d->q_step, sizeof(double) * 4 * n);
            pbd__d2d(d->omega, d->omega_step, sizeof(double) * 3 * n);
            return 1;
        default: break;
    }
    pbd__gpu *g = c->world->gpu;
    pbd_sm__oriented m = pbd__sm_oriented_image(o);
    if (what == PBD_SM__CUDA_BEGIN) {
        pbd__launch(g, o->count, pbd__k_or_predict, m, (const float *)c->p, (double)c->h);
    } else if (what == PBD_SM__CUDA_PROJECT) {
        pbd__launch(g, 1, pbd__k_or_match, m, (const pbd_world *)g->dw, c->p);
        if (o->collide) pbd__launch(g, o->count, pbd__k_or_collide, m, (const pbd_world *)g->dw, c->p);
    } else if (what == PBD_SM__CUDA_END) {
        pbd__launch(g, o->count, pbd__k_or_advance, m, (const float *)c->p, (double)c->h);
    }
    return 1;
}

/* --- skins ------------------------------------------------------------------------
   A skin on the oriented particles of a GPU world (pbd_sm_skin_apply_world):
   its bones, weights and offsets on the device from its first evaluation,
   one thread per vertex (pbd_sm__skin_vertex) from the device's particles
   and orientations into a device array. */
typedef struct pbd__sm_skin_dev {
    pbd_sm_skin d; /* only the arrays are used */
} pbd__sm_skin_dev;

PBD__KERNEL pbd__k_skin(pbd_sm_skin s, const float *x, const double *q) {
    PBD__GRID_LOOP(v, s.vertex_count) { pbd_sm__skin_vertex(&s, x, q, v, s.out); }
}

static void pbd__sm_skin_free(pbd_sm_skin *s) {
    pbd__sm_skin_dev *r = (pbd__sm_skin_dev *)s->gpu;
    if (!r) return;
    void *arrays[] = {r->d.bones, r->d.weights, r->d.local, r->d.out};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    free(r);
    s->gpu = NULL;
}

extern "C" int pbd_sm__cuda_skin(pbd_sm_skin *s, size_t size, const pbd_sm__oriented *o, size_t oriented_size,
                                 pbd_world *w, const float *x, int what, const float **out) {
    if (size != sizeof *s || (o && oriented_size != sizeof *o)) return -2; /* another pbd_sm.h than this file's */
    if (what == PBD_SM__CUDA_FREE) {
        pbd__sm_skin_free(s);
        return 1;
    }
    size_t nk = (size_t)s->vertex_count * (size_t)s->influences;
    if (what == PBD_SM__CUDA_UPLOAD) {
        pbd__sm_skin_dev *r = (pbd__sm_skin_dev *)calloc(1, sizeof *r);
        if (!r) return 0;
        s->gpu = r;
        int ok = pbd__sm_array(&r->d.bones, (const int *)s->bones, nk) &&
                 pbd__sm_array(&r->d.weights, (const double *)s->weights, nk) &&
                 pbd__sm_array(&r->d.local, (const double *)s->local, 3 * nk) &&
                 pbd__sm_array(&r->d.out, (const float *)NULL, 3 * (size_t)s->vertex_count);
        if (!ok) pbd__sm_skin_free(s);
        return ok;
    }
    const pbd__sm_skin_dev *r = (const pbd__sm_skin_dev *)s->gpu;
    pbd_sm_skin m = *s; /* the record the kernel gets: the device's arrays */
    m.bones = r->d.bones;
    m.weights = r->d.weights;
    m.local = r->d.local;
    m.out = r->d.out;
    m.world = NULL;
    m.gpu = NULL;
    const double *q = ((const pbd__sm_oriented_dev *)o->gpu)->d.q; /* the set's orientations on the device */
    pbd__launch(w->gpu, s->vertex_count, pbd__k_skin, m, x, q);
    *out = r->d.out;
    return 1;
}

/* --- the multi-resolution cloth ------------------------------------------------
   Its levels' arrays on the device; a V-cycle (pbd_sm__vcycle) as
   launches of pbd_sm.h's PBD_HD functions, as the paper's section 5 runs
   it on a GPU: the coarse positions per vertex level by level
   (pbd_sm__sync_vertex), the x^ per vertex, the matches - two-pass: every
   triangle's (edge's) goals into its corners' slots, then a gather per
   vertex; independent sets: colour by colour, each element applying its
   own corrections (the overflow colour in one thread, in order) -, the
   restriction per coarse vertex, the prolongation per fine vertex; the
   bending per vertex, the damping per triangle then a gather. */
typedef struct pbd__sm_cloth_dev {
    pbd_sm__level *lv; /* nlevels images with the device's arrays (the finest level's x: the world's p) */
    pbd_sm__cloth d;   /* the bending's arrays */
    float *kept;       /* pbd_sm__cloth.kept's layout: the step's start (KEEP, ROLLBACK) */
} pbd__sm_cloth_dev;

PBD__KERNEL pbd__k_cl_sync(pbd_sm__level C, const float *xf) {
    PBD__GRID_LOOP(v, C.nv) { pbd_sm__sync_vertex(&C, xf, v); }
}
PBD__KERNEL pbd__k_cl_store(pbd_sm__level L, const float *x) {
    PBD__GRID_LOOP(v, L.nv) { pbd_sm__store_vertex(&L, x, v); }
}
PBD__KERNEL pbd__k_cl_restrict(pbd_sm__level C, pbd_sm__level F, const float *xf) {
    PBD__GRID_LOOP(v, C.nv) { pbd_sm__restrict_vertex(&C, &F, xf, v); }
}
PBD__KERNEL pbd__k_cl_prolong(pbd_sm__level C, float *xf, int nf) {
    PBD__GRID_LOOP(f, nf) { pbd_sm__prolong_vertex(&C, xf, f); }
}
PBD__KERNEL pbd__k_cl_gather(int nv, float *x, const int *start, const int *list, const float *dx) {
    PBD__GRID_LOOP(v, nv) { pbd_sm__gather_vertex(v, x, start, list, dx); }
}
/* elements lo .. lo + n - 1 of one kind (arity 3: triangles, 2: edges):
   goals into the scratch (two-pass), or applied at once (a colour: no two
   share a vertex) */
PBD__KERNEL pbd__k_cl_match(pbd_sm__level L, float *x, int conserve, float k, int arity, int lo, int n, int apply) {
    PBD__GRID_LOOP(i, n) {
        int e = lo + i;
        float d[9], *o = apply ? d : (arity == 3 ? L.tdx + 9 * (size_t)e : L.edx + 6 * (size_t)e);
        if (arity == 3) pbd_sm__tri_one(&L, e, x, conserve, k, o);
        else pbd_sm__edge_one(&L, e, x, conserve, k, o);
        if (apply)
            for (int j = 0; j < arity; ++j)
                pbd_sm__add3(x + 4 * (arity == 3 ? L.tri : L.edge)[arity * e + j], d + 3 * j);
    }
}
/* the overflow colour: its elements one after the other */
PBD__KERNEL pbd__k_cl_serial(pbd_sm__level L, float *x, int conserve, float k, int arity, int lo, int hi) {
    PBD__GRID_LOOP(t, 1) {
        for (int e = lo; e < hi; ++e) {
            float d[9];
            if (arity == 3) pbd_sm__tri_one(&L, e, x, conserve, k, d);
            else pbd_sm__edge_one(&L, e, x, conserve, k, d);
            for (int j = 0; j < arity; ++j)
                pbd_sm__add3(x + 4 * (arity == 3 ? L.tri : L.edge)[arity * e + j], d + 3 * j);
        }
    }
}
PBD__KERNEL pbd__k_cl_bend(pbd_sm__cloth c, int nv, const float *x, float *v, float *p, float h) {
    PBD__GRID_LOOP(i, nv) { pbd_sm__bend_vertex(&c, x, v, p, h, i); }
}
PBD__KERNEL pbd__k_cl_damp(pbd_sm__level L, const float *x, const float *v, float kd) {
    PBD__GRID_LOOP(t, L.nt) { pbd_sm__damp_triangle(&L, x, v, kd, t); }
}

/* pbd_sm__match: one element kind of level l. */
static void pbd__sm_cloth_match(pbd__gpu *g, const pbd_sm__cloth *c, int l, float *x, int conserve, int arity) {
    const pbd_sm__level *H = &c->lv[l], *L = &((pbd__sm_cloth_dev *)c->gpu)->lv[l];
    int n = arity == 3 ? H->nt : H->ne, ncol = arity == 3 ? H->ntc : H->nec;
    const int *col = arity == 3 ? H->tc : H->ec;
    float k = arity == 3 ? c->alpha : c->beta;
    if (c->scheme == PBD_SM_CLOTH_TWO_PASS) {
        pbd__launch(g, n, pbd__k_cl_match, *L, x, conserve, k, arity, 0, n, 0);
        if (arity == 3)
            pbd__launch(g, H->nv, pbd__k_cl_gather, H->nv, x, (const int *)L->vt_start, (const int *)L->vt_list,
                        (const float *)L->tdx);
        else
            pbd__launch(g, H->nv, pbd__k_cl_gather, H->nv, x, (const int *)L->ve_start, (const int *)L->ve_list,
                        (const float *)L->edx);
        return;
    }
    for (int q = 0; q < ncol; ++q) {
        int lo = col[q], hi = col[q + 1];
        if (q == ncol - 1 && hi - lo > 0 && H->overflow[arity == 3 ? 0 : 1])
            pbd__launch(g, 1, pbd__k_cl_serial, *L, x, conserve, k, arity, lo, hi);
        else pbd__launch(g, hi - lo, pbd__k_cl_match, *L, x, conserve, k, arity, lo, hi - lo, 1);
    }
}
static void pbd__sm_cloth_level_match(pbd__gpu *g, const pbd_sm__cloth *c, int l, float *x, int conserve) {
    if (c->beta > 0) pbd__sm_cloth_match(g, c, l, x, conserve, 2);
    if (c->alpha > 0) pbd__sm_cloth_match(g, c, l, x, conserve, 3);
}
/* pbd_sm__vcycle on the device (x: the cloth's particles' p). */
static void pbd__sm_cloth_vcycle(pbd__gpu *g, const pbd_sm__cloth *c, float *x) {
    const pbd_sm__level *L = ((pbd__sm_cloth_dev *)c->gpu)->lv;
    int top = c->nlevels - 1;
#define PBD__CLX(l) ((l) == top ? x : L[l].x)
    for (int l = top; l > 0; --l) pbd__launch(g, L[l - 1].nv, pbd__k_cl_sync, L[l - 1], (const float *)PBD__CLX(l));
    pbd__launch(g, L[top].nv, pbd__k_cl_store, L[top], (const float *)x);
    for (int l = top; l >= 1; --l) {
        pbd__sm_cloth_level_match(g, c, l, PBD__CLX(l), c->conserve && l < top);
        pbd__launch(g, L[l - 1].nv, pbd__k_cl_store, L[l - 1], (const float *)PBD__CLX(l - 1));
        pbd__launch(g, L[l - 1].nv, pbd__k_cl_restrict, L[l - 1], L[l], (const float *)PBD__CLX(l));
    }
    pbd__launch(g, L[0].nv, pbd__k_cl_store, L[0], (const float *)PBD__CLX(0));
    for (int l = 0; l <= top; ++l) {
        pbd__sm_cloth_level_match(g, c, l, PBD__CLX(l), c->conserve && l < top);
        if (l == top) break;
        pbd__launch(g, L[l + 1].nv, pbd__k_cl_store, L[l + 1], (const float *)PBD__CLX(l + 1));
        pbd__launch(g, L[l + 1].nv, pbd__k_cl_prolong, L[l], PBD__CLX(l + 1), L[l + 1].nv);
    }
#undef PBD__CLX
}

static void pbd__sm_level_free(pbd_sm__level *L) {
    void *a[] = {L->tri,    L->edge, L->x,       L->xhat,  L->mass,      L->mt,      L->me,       L->inv_rt,
                 L->inv_re, L->tq,   L->tP,      L->eq,    L->vt_start,  L->vt_list, L->ve_start, L->ve_list,
                 L->tdx,    L->edx,  L->pro_idx, L->pro_w, L->res_start, L->res_idx, L->res_w,    L->fine_of};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; ++i) pbd__dfree(a[i]);
}
static void pbd__sm_cloth_free(pbd_sm__cloth *c) {
    pbd__sm_cloth_dev *r = (pbd__sm_cloth_dev *)c->gpu;
    if (!r) return;
    for (int l = 0; r->lv && l < c->nlevels; ++l) pbd__sm_level_free(&r->lv[l]);
    free(r->lv);
    pbd__dfree(r->d.q_start);
    pbd__dfree(r->d.q_idx);
    pbd__dfree(r->d.q_val);
    pbd__dfree(r->d.q_row);
    pbd__dfree(r->kept);
    free(r);
    c->gpu = NULL;
}
/* Level l's arrays (nf: the next finer level's vertices, for the
   prolongation's rows; 0 at the finest). Colour offsets stay on the host. */
#define PBD__SM_UP(field, n) (!h->field || pbd__sm_array(&d->field, h->field, (size_t)(n)))
static int pbd__sm_level_upload(pbd_sm__level *d, const pbd_sm__level *h, int finest, int nf) {
    memset(d, 0, sizeof *d);
    d->nv = h->nv;
    d->nt = h->nt;
    d->ne = h->ne;
    size_t nv = (size_t)h->nv, nt = (size_t)h->nt, ne = (size_t)h->ne;
    int ok = PBD__SM_UP(tri, 3 * nt) && PBD__SM_UP(edge, 2 * ne) && (finest || PBD__SM_UP(x, 4 * nv)) &&
             PBD__SM_UP(xhat, 4 * nv) && PBD__SM_UP(mass, nv) && PBD__SM_UP(mt, nv) && PBD__SM_UP(me, nv) &&
             PBD__SM_UP(inv_rt, nv) && PBD__SM_UP(inv_re, nv) && PBD__SM_UP(tq, 6 * nt) && PBD__SM_UP(tP, 6 * nt) &&
             PBD__SM_UP(eq, 3 * ne) && PBD__SM_UP(vt_start, nv + 1) && PBD__SM_UP(ve_start, nv + 1) &&
             PBD__SM_UP(tdx, 9 * nt) && PBD__SM_UP(edx, 6 * ne) && PBD__SM_UP(fine_of, nv) &&
             PBD__SM_UP(pro_idx, 3 * (size_t)nf) && PBD__SM_UP(pro_w, 3 * (size_t)nf) && PBD__SM_UP(res_start, nv + 1);
    ok = ok && (!h->vt_start || PBD__SM_UP(vt_list, (size_t)h->vt_start[nv])) &&
         (!h->ve_start || PBD__SM_UP(ve_list, (size_t)h->ve_start[nv])) &&
         (!h->res_start ||
          (PBD__SM_UP(res_idx, (size_t)h->res_start[nv]) && PBD__SM_UP(res_w, (size_t)h->res_start[nv])));
    d->ntc = h->ntc;
    d->nec = h->nec;
    d->overflow[0] = h->overflow[0];
    d->overflow[1] = h->overflow[1];
    return ok;
}
static int pbd__sm_cloth_upload(pbd_sm__cloth *c) {
    pbd__sm_cloth_dev *r = (pbd__sm_cloth_dev *)calloc(1, sizeof *r);
    if (!r) return 0;
    c->gpu = r;
    r->lv = (pbd_sm__level *)calloc((size_t)c->nlevels, sizeof(pbd_sm__level));
    int ok = r->lv != NULL, top = c->nlevels - 1;
    for (int l = 0; ok && l <= top; ++l)
        ok = pbd__sm_level_upload(&r->lv[l], &c->lv[l], l == top, l < top ? c->lv[l + 1].nv : 0);
    const pbd_sm__cloth *h = c;
    pbd_sm__cloth *d = &r->d;
    size_t nv = (size_t)c->lv[top].nv;
    ok = ok && PBD__SM_UP(q_start, nv + 1) && PBD__SM_UP(q_row, nv) &&
         (!h->q_start || (PBD__SM_UP(q_idx, (size_t)h->q_start[nv]) && PBD__SM_UP(q_val, (size_t)h->q_start[nv]))) &&
         pbd__dmalloc((void **)&r->kept, sizeof(float) * c->nkept);
    if (!ok) pbd__sm_cloth_free(c);
    return ok;
}
#undef PBD__SM_UP

extern "C" int pbd_sm__cuda_cloth(pbd_sm__cloth *c, size_t size, const pbd_solve_context *s, int what) {
    if (size != sizeof *c) return 0; /* another pbd_sm.h than this file's */
    pbd__sm_cloth_dev *r = (pbd__sm_cloth_dev *)c->gpu;
    if (what == PBD_SM__CUDA_UPLOAD) return pbd__sm_cloth_upload(c);
    if (what == PBD_SM__CUDA_FREE) {
        pbd__sm_cloth_free(c);
        return 1;
    }
    if (what == PBD_SM__CUDA_KEEP || what == PBD_SM__CUDA_ROLLBACK) { /* pbd_sm__cloth_keep on the device */
        float *k = r->kept;
        for (int l = 0; l < c->nlevels; ++l) {
            pbd_sm__level *D = &r->lv[l];
            size_t np = 6 * (size_t)D->nt, nx = l < c->nlevels - 1 ? 4 * (size_t)D->nv : 0;
            if (what == PBD_SM__CUDA_KEEP) pbd__d2d(k, D->tP, sizeof(float) * np);
            else pbd__d2d(D->tP, k, sizeof(float) * np);
            if (nx && what == PBD_SM__CUDA_KEEP) pbd__d2d(k + np, D->x, sizeof(float) * nx);
            else if (nx) pbd__d2d(D->x, k + np, sizeof(float) * nx);
            k += np + nx;
        }
        return 1;
    }
    if (what == PBD_SM__CUDA_FETCH || what == PBD_SM__CUDA_PUSH) {
        /* the coarse levels' positions (pbd_sm_cloth_level) and every
           level's last valid projections, to the host or back (snapshots) */
        for (int l = 0; l < c->nlevels; ++l) {
            pbd_sm__level *H = &c->lv[l], *D = &r->lv[l];
            size_t xs = sizeof(float) * 4 * (size_t)H->nv, ps = sizeof(float) * 6 * (size_t)H->nt;
            if (what == PBD_SM__CUDA_FETCH) {
                if (l < c->nlevels - 1) pbd__d2h(H->x, D->x, xs);
                pbd__d2h(H->tP, D->tP, ps);
            } else {
                if (l < c->nlevels - 1) pbd__h2d(D->x, H->x, xs);
                pbd__h2d(D->tP, H->tP, ps);
            }
        }
        return 1;
    }
    pbd__gpu *g = s->world->gpu;
    const pbd_sm__level *F = &r->lv[c->nlevels - 1];
    size_t first = 4 * (size_t)c->particles.first;
    if (what == PBD_SM__CUDA_BEGIN) {
        pbd_sm__cloth m = *c;
        m.q_start = r->d.q_start;
        m.q_idx = r->d.q_idx;
        m.q_val = r->d.q_val;
        m.q_row = r->d.q_row;
        m.lv = NULL;
        m.world = NULL;
        m.gpu = NULL;
        pbd__launch(g, F->nv, pbd__k_cl_bend, m, F->nv, (const float *)(s->x + first), s->v + first, s->p + first,
                    s->h);
    } else if (what == PBD_SM__CUDA_PROJECT) {
        pbd__sm_cloth_vcycle(g, c, s->p + first);
    } else if (what == PBD_SM__CUDA_END) {
        pbd__launch(g, F->nt, pbd__k_cl_damp, *F, (const float *)(s->x + first), (const float *)(s->v + first),
                    c->damping);
        pbd__launch(g, F->nv, pbd__k_cl_gather, F->nv, s->v + first, (const int *)F->vt_start, (const int *)F->vt_list,
                    (const float *)F->tdx);
    }
    return 1;
}

/* A wrinkle mesh's fine cloth on a GPU world (pbd_up_wrinkle_desc.device):
   pbd.h's kernels solve it; its one-sided projection is a device plugin,
   one thread per fine vertex, on a and n (surface, fnormal). From host
   coarse positions (pbd_up_wrinkle_update) the host computes them and the
   targets at every update and sends a and n (6 floats a fine vertex).
   From a coarse GPU world (pbd_up_wrinkle_update_world) the binding goes
   to the device once (BIND), and kernels compute them from the coarse
   world's device particles: one thread per coarse triangle for its
   normal (pbd_up__wrinkle_normal), one per fine vertex for its a, n and
   target (pbd_up__wrinkle_target), which it writes into the fine world's
   attachment group (its slot) while zeroing the vertex's velocity; after
   the step one per fine vertex zeroes the velocity again and copies the
   position into the fine array. */
typedef struct pbd__up_wrinkle_dev {
    float *surface, *fnormal; /* fine_count*3: a and n */
    int bound;                /* the rest is on the device (BIND) */
    pbd_up_wrinkle d;         /* the binding and normals, targets (device arrays; surface, fnormal as above) */
    int *slot;                /* per fine vertex: its slot in the attachment group */
    int group;                /* the attachment group's index in the fine world */
    float *fine;              /* fine_count*3: the fine positions of the last update */
} pbd__up_wrinkle_dev;

PBD__KERNEL pbd__k_up_side(const float *surface, const float *fnormal, float *p, int first, int n) {
    PBD__GRID_LOOP(i, n) { pbd_up__wrinkle_side(surface, fnormal, p, first, i); }
}
PBD__KERNEL pbd__k_wr_normals(pbd_up_wrinkle wr, const float *x) {
    PBD__GRID_LOOP(t, wr.coarse_triangle_count) { pbd_up__wrinkle_normal(&wr, x, 4, t); }
}
PBD__KERNEL pbd__k_wr_targets(pbd_up_wrinkle wr, const float *x, pbd_world *fw, int group, const int *slot) {
    PBD__GRID_LOOP(i, wr.fine_count) {
        float *q = wr.targets + 3 * (size_t)i, *target = fw->groups[group].rest + 4 * (size_t)slot[i];
        pbd_up__wrinkle_target(&wr, x, 4, i, q);
        for (int k = 0; k < 3; ++k) target[k] = q[k];
        pbd__p4 *v = &fw->v[wr.cloth_particles.first + i];
        v->x = v->y = v->z = 0.0f; /* a static solve (pbd_up_wrinkle_update's zeroed velocities) */
    }
}
PBD__KERNEL pbd__k_wr_fine(pbd_world *fw, int first, int n, float *fine) {
    PBD__GRID_LOOP(i, n) {
        pbd__p4 *v = &fw->v[first + i];
        const pbd__p4 *x = &fw->x[first + i];
        v->x = v->y = v->z = 0.0f;
        fine[3 * (size_t)i] = x->x;
        fine[3 * (size_t)i + 1] = x->y;
        fine[3 * (size_t)i + 2] = x->z;
    }
}

/* The binding's arrays (BIND) off the device. */
static void pbd__up_wrinkle_unbind(pbd__up_wrinkle_dev *r) {
    const pbd_up_wrinkle *d = &r->d;
    void *arrays[] = {d->coarse_triangles, d->tri, d->bary, d->offset, d->normals, d->targets, r->slot, r->fine};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    memset(&r->d, 0, sizeof r->d);
    r->slot = NULL;
    r->fine = NULL;
    r->bound = 0;
}
static void pbd__up_wrinkle_free(pbd_up_wrinkle *wr) {
    pbd__up_wrinkle_dev *r = (pbd__up_wrinkle_dev *)wr->gpu;
    if (!r) return;
    pbd__up_wrinkle_unbind(r);
    pbd__dfree(r->surface);
    pbd__dfree(r->fnormal);
    free(r);
    wr->gpu = NULL;
}
/* The record with a and n (UPLOAD: the one-sided projection's), and with
   `bind` the binding, the normals, the targets and the attachment slots
   too (BIND). Out of device memory, a record made here goes; one made
   before keeps its a and n for the projection. */
static int pbd__up_wrinkle_upload(pbd_up_wrinkle *wr, int bind) {
    pbd__up_wrinkle_dev *r = (pbd__up_wrinkle_dev *)wr->gpu;
    int made = !r;
    if (made) {
        if (!(r = (pbd__up_wrinkle_dev *)calloc(1, sizeof *r))) return 0;
        wr->gpu = r;
    }
    size_t nf = (size_t)wr->fine_count, n3 = 3 * nf, nct = (size_t)wr->coarse_triangle_count;
    int ok = r->surface || (pbd__sm_array(&r->surface, (const float *)wr->surface, n3) &&
                            pbd__sm_array(&r->fnormal, (const float *)wr->fnormal, n3));
    if (ok && bind && !r->bound) {
        pbd_world *fw = wr->world;
        pbd__group_index(fw, wr->attach, &r->group);
        const pbd__group *h = &fw->groups[r->group];
        pbd_up_wrinkle *d = &r->d;
        ok = pbd__sm_array(&d->coarse_triangles, (const int *)wr->coarse_triangles, 3 * nct) &&
             pbd__sm_array(&d->tri, (const int *)wr->tri, nf) && pbd__sm_array(&d->bary, (const float *)wr->bary, n3) &&
             pbd__sm_array(&d->offset, (const float *)wr->offset, nf) &&
             pbd__sm_array(&d->normals, (const float *)wr->normals, 3 * nct) &&
             pbd__sm_array(&d->targets, (const float *)wr->targets, n3) &&
             pbd__sm_array(&r->slot, (const int *)h->slot, nf) && pbd__sm_array(&r->fine, (const float *)NULL, n3);
        if (ok) r->bound = 1;
        else pbd__up_wrinkle_unbind(r);
    }
    if (!ok && made) pbd__up_wrinkle_free(wr);
    return ok;
}

extern "C" int pbd_up__cuda_wrinkle(pbd_up_wrinkle *wr, size_t size, const pbd_solve_context *c, int what,
                                    const float *x, const float **fine) {
    if (size != sizeof *wr) return -2; /* another pbd_upsample.h than this file's */
    pbd__up_wrinkle_dev *r = (pbd__up_wrinkle_dev *)wr->gpu;
    size_t n3 = 3 * (size_t)wr->fine_count, nct3 = 3 * (size_t)wr->coarse_triangle_count;
    pbd__gpu *g = what == PBD_UP__CUDA_TARGETS || what == PBD_UP__CUDA_FINE ? wr->world->gpu : NULL;
    switch (what) {
        case PBD_UP__CUDA_UPLOAD: return pbd__up_wrinkle_upload(wr, 0);
        case PBD_UP__CUDA_BIND: return pbd__up_wrinkle_upload(wr, 1);
        case PBD_UP__CUDA_FREE: pbd__up_wrinkle_free(wr); return 1;
        case PBD_UP__CUDA_PUSH: /* after pbd_up_wrinkle_update: a and n (and the normals, once bound) */
            pbd__h2d(r->surface, wr->surface, sizeof(float) * n3);
            pbd__h2d(r->fnormal, wr->fnormal, sizeof(float) * n3);
            if (r->bound) pbd__h2d(r->d.normals, wr->normals, sizeof(float) * nct3);
            return 1;
        case PBD_UP__CUDA_FETCH: /* what pbd_up_wrinkle_update_world computed, for the host */
            pbd__d2h(wr->surface, r->surface, sizeof(float) * n3);
            pbd__d2h(wr->fnormal, r->fnormal, sizeof(float) * n3);
            pbd__d2h(wr->normals, r->d.normals, sizeof(float) * nct3);
            pbd__d2h(wr->targets, r->d.targets, sizeof(float) * n3);
            return 1;
        case PBD_UP__CUDA_TARGETS: { /* from the coarse world's device particles x */
            pbd_up_wrinkle m = *wr;
            m.coarse_triangles = r->d.coarse_triangles;
            m.tri = r->d.tri;
            m.bary = r->d.bary;
            m.offset = r->d.offset;
            m.normals = r->d.normals;
            m.targets = r->d.targets;
            m.surface = r->surface;
            m.fnormal = r->fnormal;
            m.zero = NULL;
            m.world = NULL;
            m.gpu = NULL;
            pbd__launch(g, wr->coarse_triangle_count, pbd__k_wr_normals, m, x);
            pbd__launch(g, wr->fine_count, pbd__k_wr_targets, m, x, g->dw, r->group, (const int *)r->slot);
            wr->world->gpu_host_stale |= PBD__GPU_STALE_TARGETS; /* the host's are behind */
            return 1;
        }
        case PBD_UP__CUDA_FINE:
            pbd__launch(g, wr->fine_count, pbd__k_wr_fine, g->dw, wr->cloth_particles.first, wr->fine_count, r->fine);
            *fine = r->fine;
            return 1;
        default: /* the one-sided projection (a device plugin's callback) */
            pbd__launch(c->world->gpu, wr->fine_count, pbd__k_up_side, (const float *)r->surface,
                        (const float *)r->fnormal, c->p, wr->cloth_particles.first, wr->fine_count);
            return 1;
    }
}

extern "C" void pbd__cuda_read(void *host, const void *device, size_t n) { pbd__d2h(host, device, n); }
extern "C" size_t pbd__cuda_bytes_sent(const pbd_world *w) { return w->gpu ? w->gpu->bytes_up : 0; }

// ==== pbd_upsample.h ==========================================================
/* A GPU model (pbd_up_model_set_device): its data on the device, evaluated
   from a GPU world's device particles into a device array, with the
   loops of its CPU evaluation one thread per row or vertex: the CPU's
   bits. Subdivision, with or without two-scale detail: the stencil rows
   (pbd_up__sparse_row, reading float4 particles), then each detail
   vertex's frame and x0 + R dx. PIU: each lane of each group
   (pbd_up__piu_lane), then each coordinate's oscillatory modes, whose
   coefficients (sinf) the host computes. */
typedef struct pbd__up_dev {
    pbd_up__subdiv d;  /* subdivision: the image of the model's data, device arrays */
    pbd_up__piu piu;   /* PIU: likewise */
    pbd_up__pdm pdm;   /* PDM: likewise (its nested models are GPU models of their own) */
    pbd_up__wpsd wpsd; /* WPSD: likewise */
    float *out;        /* detail_count*3 */
} pbd__up_dev;
typedef struct pbd__up_coeffs {
    float c[64]; /* PIU's modes' coefficients (by value) */
} pbd__up_coeffs;

PBD__KERNEL pbd__k_piu_lanes(pbd_up__piu p, const float *x, float *out) {
    PBD__GRID_LOOP(t, p.group_count * PBD_UP__LANES) {
        int v = p.lane_vertex[t];
        if (v >= 0) pbd_up__piu_lane(&p, t / PBD_UP__LANES, t % PBD_UP__LANES, x, 4, out + 3 * (size_t)v);
    }
}
/* PDM: (u1, u2) per coarse vertex from the feature mesh (x, frames: its
   device x0 and frames), then every detail vertex (s: the detail mesh's) */
PBD__KERNEL pbd__k_pdm_uv(pbd_up__pdm p, const float *x, const float *frames, int nc) {
    PBD__GRID_LOOP(v, nc) { pbd_up__pdm_uv(&p, x, frames, v, p.uvc); }
}
PBD__KERNEL pbd__k_pdm_detail(pbd_up__pdm p, pbd_up__subdiv s, int nd, float *out) {
    PBD__GRID_LOOP(i, nd) { pbd_up__pdm_detail(&p, &s, i, out); }
}
/* WPSD: the edges' strains (x: the world's float4 particles), the pose
   weights per coarse vertex, then every detail vertex */
PBD__KERNEL pbd__k_wpsd_strains(pbd_up__wpsd p, const float *x) {
    PBD__GRID_LOOP(e, p.edge_count) { p.strain[e] = pbd_up__edge_strain(p.edges, p.rest_len, x, 4, e); }
}
PBD__KERNEL pbd__k_wpsd_coarse(pbd_up__wpsd p, int nc) {
    PBD__GRID_LOOP(v, nc) { pbd_up__wpsd_coarse_one(&p, v, p.wc); }
}
PBD__KERNEL pbd__k_wpsd_detail(pbd_up__wpsd p, pbd_up__subdiv s, int nd, float *out) {
    PBD__GRID_LOOP(i, nd) { pbd_up__wpsd_detail(&p, &s, nd, i, out); }
}
PBD__KERNEL pbd__k_piu_modes(pbd_up__piu p, pbd__up_coeffs c, float *out) {
    PBD__GRID_LOOP(i, 3 * p.detail_count) { pbd_up__piu_mode_add(&p, c.c, out, i); }
}

PBD__KERNEL pbd__k_up_rows(pbd_up__subdiv s, const float *x, float *y) {
    PBD__GRID_LOOP(i, s.S.rows) { pbd_up__sparse_row(&s.S, x, 4, i, y + 3 * (size_t)i); }
}
PBD__KERNEL pbd__k_up_frames(pbd_up__subdiv s, int n) {
    PBD__GRID_LOOP(v, n) { pbd_up__vertex_frame(&s, s.x0, v, s.frames + 9 * (size_t)v); }
}
PBD__KERNEL pbd__k_up_detail(pbd_up__subdiv s, int n, float *out) {
    PBD__GRID_LOOP(v, n) { pbd_up__subdiv_detail(&s, v, out); }
}

static void pbd__up_free(pbd_up_model *m) {
    pbd__up_dev *r = (pbd__up_dev *)m->gpu;
    if (!r) return;
    if (m->method == PBD_UP_PDM) {
        const pbd_up__pdm *h = (const pbd_up__pdm *)m->impl;
        pbd__up_free(h->sub);
        pbd__up_free(h->feature);
        void *pdm[] = {r->pdm.edges,    r->pdm.rest_len, r->pdm.rest_offset, r->pdm.coef,
                       r->pdm.nb_start, r->pdm.nb,       r->pdm.uvc};
        for (size_t i = 0; i < sizeof pdm / sizeof pdm[0]; ++i) pbd__dfree(pdm[i]);
    }
    if (m->method == PBD_UP_WPSD) {
        pbd__up_free(((const pbd_up__wpsd *)m->impl)->sub);
        const pbd_up__wpsd *d = &r->wpsd;
        void *wpsd[] = {d->edges, d->rest_len, d->vert_edges, d->vert_w, d->pose_q,
                        d->omega, d->disp,     d->strain,     d->wc};
        for (size_t i = 0; i < sizeof wpsd / sizeof wpsd[0]; ++i) pbd__dfree(wpsd[i]);
    }
    void *arrays[] = {r->d.S.start,         r->d.S.col,     r->d.S.val,         r->d.triangles, r->d.detail,
                      r->d.vt_start,        r->d.vt_tri,    r->d.first_nb,      r->d.x0,        r->d.frames,
                      r->piu.group_support, r->piu.weights, r->piu.lane_vertex, r->piu.modes,   r->out};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) pbd__dfree(arrays[i]);
    free(r);
    m->gpu = NULL;
}
/* PIU's arrays that the evaluation reads (the oscillators' state stays
   on the host: the coefficients go with every evaluation). */
static int pbd__up_upload_piu(pbd__up_dev *r, const pbd_up__piu *h) {
    pbd_up__piu *d = &r->piu;
    d->coarse_count = h->coarse_count;
    d->detail_count = h->detail_count;
    d->support = h->support;
    d->group_count = h->group_count;
    d->mode_count = h->mode_count;
    size_t G = (size_t)h->group_count, K = (size_t)h->support, M = (size_t)h->mode_count;
    return pbd__sm_array(&d->group_support, h->group_support, G * K) &&
           pbd__sm_array(&d->weights, h->weights, G * K * PBD_UP__LANES) &&
           pbd__sm_array(&d->lane_vertex, h->lane_vertex, G * PBD_UP__LANES) &&
           (M == 0 || pbd__sm_array(&d->modes, h->modes, M * (size_t)h->detail_count * 3));
}
static int pbd__up_upload(pbd_up_model *m);
/* PDM's arrays, and its nested subdivision models (the detail mesh's and
   the feature mesh's: each a GPU model of its own, whose x0 and frames
   the evaluation computes). */
static int pbd__up_upload_pdm(pbd__up_dev *r, const pbd_up__pdm *h, int nc, int nd) {
    pbd_up__pdm *d = &r->pdm;
    *d = *h; /* the scalars; every array below */
    d->edges = d->nb_start = d->nb = NULL;
    d->rest_len = d->rest_offset = d->coef = d->fx0 = d->fframes = d->uvc = NULL;
    size_t ne = (size_t)h->edge_count;
    return pbd__up_upload(h->sub) && pbd__up_upload(h->feature) && pbd__sm_array(&d->edges, h->edges, 2 * ne) &&
           pbd__sm_array(&d->rest_len, h->rest_len, ne) &&
           pbd__sm_array(&d->rest_offset, h->rest_offset, 3 * (size_t)nc) &&
           pbd__sm_array(&d->coef, h->coef, 6 * (size_t)nd) &&
           pbd__sm_array(&d->nb_start, h->nb_start, (size_t)nc + 1) &&
           pbd__sm_array(&d->nb, h->nb, (size_t)h->nb_start[nc]) &&
           pbd__sm_array(&d->uvc, (const float *)NULL, 2 * (size_t)nc) &&
           pbd__sm_array(&r->out, (const float *)NULL, 3 * (size_t)nd);
}
/* WPSD's arrays and its nested subdivision model. */
static int pbd__up_upload_wpsd(pbd__up_dev *r, const pbd_up__wpsd *h, int nc, int nd) {
    pbd_up__wpsd *d = &r->wpsd;
    *d = *h; /* the scalars; every array below */
    d->edges = d->vert_edges = d->pose_frame = NULL;
    d->rest_len = d->vert_w = d->pose_q = d->omega = d->disp = d->sel_error = d->strain = d->wc = NULL;
    size_t ne = (size_t)h->edge_count, K = (size_t)h->K, P = (size_t)h->poses, c = (size_t)nc;
    return pbd__up_upload(h->sub) && pbd__sm_array(&d->edges, h->edges, 2 * ne) &&
           pbd__sm_array(&d->rest_len, h->rest_len, ne) && pbd__sm_array(&d->vert_edges, h->vert_edges, c * K) &&
           pbd__sm_array(&d->vert_w, h->vert_w, c * K) && pbd__sm_array(&d->pose_q, h->pose_q, c * P * K) &&
           pbd__sm_array(&d->omega, h->omega, c * P * P) && pbd__sm_array(&d->disp, h->disp, P * (size_t)nd * 3) &&
           pbd__sm_array(&d->strain, (const float *)NULL, ne) && pbd__sm_array(&d->wc, (const float *)NULL, c * P) &&
           pbd__sm_array(&r->out, (const float *)NULL, 3 * (size_t)nd);
}
static int pbd__up_upload(pbd_up_model *m) {
    pbd__up_dev *r = (pbd__up_dev *)calloc(1, sizeof *r);
    if (!r) return 0;
    m->gpu = r;
    if (m->method == PBD_UP_WPSD) {
        int ok = pbd__up_upload_wpsd(r, (const pbd_up__wpsd *)m->impl, m->coarse_count, m->detail_count);
        if (!ok) pbd__up_free(m);
        return ok;
    }
    if (m->method == PBD_UP_PDM) {
        int ok = pbd__up_upload_pdm(r, (const pbd_up__pdm *)m->impl, m->coarse_count, m->detail_count);
        if (!ok) pbd__up_free(m);
        return ok;
    }
    if (m->method == PBD_UP_PIU) {
        int ok = pbd__up_upload_piu(r, (const pbd_up__piu *)m->impl) &&
                 pbd__sm_array(&r->out, (const float *)NULL, 3 * (size_t)m->detail_count);
        if (!ok) pbd__up_free(m);
        return ok;
    }
    const pbd_up__subdiv *h = (const pbd_up__subdiv *)m->impl;
    pbd_up__subdiv *d = &r->d;
    *d = *h; /* the scalars; every array below */
    d->S.start = d->S.col = d->vt_start = d->vt_tri = d->first_nb = d->triangles = NULL;
    d->S.val = d->detail = d->x0 = d->frames = NULL;
    size_t nd = (size_t)m->detail_count, nnz = (size_t)h->S.start[h->S.rows], nt = (size_t)h->triangle_count;
    /* the frames' topology and scratch too: PDM's nested models need frames without detail */
    int ok = pbd__sm_array(&d->S.start, h->S.start, (size_t)h->S.rows + 1) && pbd__sm_array(&d->S.col, h->S.col, nnz) &&
             pbd__sm_array(&d->S.val, h->S.val, nnz) && pbd__sm_array(&r->out, (const float *)NULL, 3 * nd) &&
             pbd__sm_array(&d->triangles, h->triangles, 3 * nt) && pbd__sm_array(&d->vt_start, h->vt_start, nd + 1) &&
             pbd__sm_array(&d->vt_tri, h->vt_tri, (size_t)h->vt_start[nd]) &&
             pbd__sm_array(&d->first_nb, h->first_nb, nd) && pbd__sm_array(&d->x0, (const float *)NULL, 3 * nd) &&
             pbd__sm_array(&d->frames, (const float *)NULL, 9 * nd) &&
             (!h->has_detail || pbd__sm_array(&d->detail, h->detail, 3 * nd));
    if (!ok) pbd__up_free(m);
    return ok;
}

extern "C" int pbd_up__cuda_model(pbd_up_model *m, size_t size, size_t impl_size, int what, pbd_world *w,
                                  const float *x, const float **out) {
    if (size != sizeof *m || impl_size != pbd_up__impl_size(m)) return -2; /* another pbd_upsample.h */
    if (what == PBD_UP__CUDA_FREE) {
        pbd__up_free(m);
        return 1;
    }
    if (what == PBD_UP__CUDA_UPLOAD || what == PBD_UP__CUDA_UPLOAD_AUTO) {
#ifdef PBD_CUDA_EMULATE
        if (what == PBD_UP__CUDA_UPLOAD_AUTO) return -3; /* never chosen by itself (pbd__cuda_open) */
#else
        int devices = 0;
        if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
            cudaGetLastError(); /* (clears the error) */
            return -1;
        }
#endif
        return pbd__up_upload(m);
    }
    pbd__gpu *g = w->gpu;
    pbd__up_dev *r = (pbd__up_dev *)m->gpu;
    int n = m->detail_count;
    if (m->method == PBD_UP_WPSD) {
        const pbd_up__wpsd *h = (const pbd_up__wpsd *)m->impl;
        const pbd_up__subdiv *sd = &((pbd__up_dev *)h->sub->gpu)->d;
        pbd__launch(g, h->edge_count, pbd__k_wpsd_strains, r->wpsd, x);
        pbd__launch(g, m->coarse_count, pbd__k_wpsd_coarse, r->wpsd, m->coarse_count);
        pbd__launch(g, n, pbd__k_up_rows, *sd, x, sd->x0);
        pbd__launch(g, n, pbd__k_up_frames, *sd, n);
        pbd__launch(g, n, pbd__k_wpsd_detail, r->wpsd, *sd, n, r->out);
    } else if (m->method == PBD_UP_PDM) {
        const pbd_up__pdm *h = (const pbd_up__pdm *)m->impl;
        const pbd_up__subdiv *f = &((pbd__up_dev *)h->feature->gpu)->d, *sd = &((pbd__up_dev *)h->sub->gpu)->d;
        int nc = m->coarse_count, nf = h->feature->detail_count;
        pbd__launch(g, nf, pbd__k_up_rows, *f, x, f->x0); /* the feature mesh's x0 and frames */
        pbd__launch(g, nf, pbd__k_up_frames, *f, nf);
        pbd__launch(g, nc, pbd__k_pdm_uv, r->pdm, (const float *)f->x0, (const float *)f->frames, nc);
        pbd__launch(g, n, pbd__k_up_rows, *sd, x, sd->x0); /* the detail mesh's */
        pbd__launch(g, n, pbd__k_up_frames, *sd, n);
        pbd__launch(g, n, pbd__k_pdm_detail, r->pdm, *sd, n, r->out);
    } else if (m->method == PBD_UP_PIU) {
        const pbd_up__piu *h = (const pbd_up__piu *)m->impl;
        pbd__up_coeffs c;
        pbd_up__piu_mode_coeffs(h, c.c);
        pbd__launch(g, r->piu.group_count * PBD_UP__LANES, pbd__k_piu_lanes, r->piu, x, r->out);
        if (h->mode_count > 0) pbd__launch(g, 3 * n, pbd__k_piu_modes, r->piu, c, r->out);
    } else if (!r->d.has_detail) {
        pbd__launch(g, n, pbd__k_up_rows, r->d, x, r->out);
    } else {
        pbd__launch(g, n, pbd__k_up_rows, r->d, x, r->d.x0);
        pbd__launch(g, n, pbd__k_up_frames, r->d, n);
        pbd__launch(g, n, pbd__k_up_detail, r->d, n, r->out);
    }
    *out = r->out;
    return 1;
}

// ==== open, close, fetch ======================================================

extern "C" pbd_result pbd__cuda_open(pbd_world *w, size_t world_size, int automatic, char *msg, size_t msg_size) {
    if (world_size != sizeof(pbd_world)) {
        snprintf(msg, msg_size, "pbd_cuda.cu was built against another version of pbd.h");
        return PBD_ERROR_UNSUPPORTED;
    }
#ifdef PBD_CUDA_EMULATE
    if (automatic) { /* slower than the CPU path: for tests, never chosen by itself */
        snprintf(msg, msg_size, "the emulated GPU (PBD_CUDA_EMULATE) is only used when asked for");
        return PBD_ERROR_UNSUPPORTED;
    }
    snprintf(msg, msg_size, "world on the GPU: emulated on the CPU (pbd_cuda.cu built with PBD_CUDA_EMULATE)");
#else
    (void)automatic;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorInsufficientDriver) {
        snprintf(msg, msg_size,
                 "no CUDA device: no NVIDIA driver, or one older than the CUDA runtime pbd_cuda.cu was built with");
        return PBD_ERROR_UNSUPPORTED;
    }
    if (e != cudaSuccess || count == 0) {
        snprintf(msg, msg_size, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        cudaGetLastError(); /* clear it */
        return PBD_ERROR_UNSUPPORTED;
    }
    int dev = 0;
    cudaDeviceProp prop;
    cudaGetDevice(&dev);
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        snprintf(msg, msg_size, "the CUDA device cannot be queried");
        return PBD_ERROR_UNSUPPORTED;
    }
    snprintf(msg, msg_size, "world on the GPU: %s (compute capability %d.%d)", prop.name, prop.major, prop.minor);
#endif
    pbd__gpu *g = (pbd__gpu *)calloc(1, sizeof *g);
    if (!g || !pbd__dmalloc((void **)&g->bad, sizeof(int))) {
        free(g);
        snprintf(msg, msg_size, "out of memory for the GPU world's state");
        return PBD_ERROR_OUT_OF_MEMORY;
    }
#ifdef PBD_CUDA_EMULATE
    g->order = new std::vector<int>();
#endif
    w->gpu = g;
    return PBD_OK;
}

extern "C" void pbd__cuda_close(pbd_world *w) {
    pbd__gpu *g = w->gpu;
    if (!g) return;
    for (int i = 0; i < g->nbufs; ++i) pbd__dfree(g->bufs[i].p);
    free(g->bufs);
    pbd__dfree(g->bad);
    free(g->col_keep);
    free(g->hk);
    free(g->hkeep);
    free(g->hc);
    free(g->field);
    free(g->lras);
#ifdef PBD_CUDA_EMULATE
    delete g->order;
#endif
    free(g);
    w->gpu = NULL;
}

extern "C" void pbd__cuda_pull(pbd_world *w, int what) {
    pbd__gpu *g = w->gpu;
    if (!g || !g->dw) return; /* nothing uploaded yet: the host has it all */
    if (what & PBD__GPU_STALE_PARTICLES) pbd__pull_particles(g, w);
    if (what & PBD__GPU_STALE_CONTACTS)
        pbd__d2h(w->contacts, g->shadow.contacts, sizeof(pbd__contact) * (size_t)w->contact_cap);
    if (what & PBD__GPU_STALE_NEIGHBORS) pbd__pull_neighbors(g, w);
    if (what & PBD__GPU_STALE_TARGETS) pbd__pull_targets(g, w);
    if ((what & PBD__GPU_STALE_SELFCOL) && g->sc_dev && w->selfcol && w->selfcol->nv == g->sc.nv) {
        const pbd__selfcol *d = &g->sc;
        pbd__selfcol *h = w->selfcol;
        pbd__d2h(h->pt, d->pt, sizeof(pbd__sc_pt) * (size_t)d->nv * PBD__SC_PT);
        pbd__d2h(h->npt, d->npt, (size_t)d->nv);
        pbd__d2h(h->ee, d->ee, sizeof(pbd__sc_ee) * (size_t)d->ne * PBD__SC_EE);
        pbd__d2h(h->nee, d->nee, (size_t)d->ne);
    }
}

extern "C" const float *pbd__cuda_positions(pbd_world *w) {
    pbd__gpu *g = w->gpu;
    return g && g->dw ? &g->shadow.x[0].x : NULL;
}
