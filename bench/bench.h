/* bench/bench.h - shared helpers of the benchmark programs.

   Every program prints one JSON object per line. Each scene is measured
   for the scalar reference path on 1 thread, the SIMD path on 1 thread and
   the SIMD path on 2 threads in the same process, so that ratios survive
   a noisy shared machine. ms_per_step is the median of BENCH_RUNS timed
   runs after a warm-up.

   For a profiler (ncu, perf): PBD_BENCH_SCENE=name runs only the scenes
   whose name holds it, and PBD_BENCH_GPU_ONLY=1 only their GPU lines. */
#ifndef PBD_BENCH_H
#define PBD_BENCH_H
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 (without OpenMP's headers) */
#endif
#define PBD_IMPLEMENTATION
#include "../pbd.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_RUNS 5

static double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

/* The device of the worlds that the scenes' make() build (bench_desc): the
   CPU for the three CPU measurements (a program built with PBD_CUDA would
   otherwise put them on the GPU), the GPU for bench_cuda_scene's. */
static pbd_device bench_device = PBD_DEVICE_CPU;
/* PBD_BENCH_FIXED=1: a fixed substep count (reference_dt = 0 and
   granular_cfl = 0), as every bench ran before the reference step and
   the grains' bound (bench/README.md, "Long steps"). */
static pbd_world_desc bench_desc(void) {
    pbd_world_desc d = pbd_world_desc_default();
    d.device = bench_device;
    const char *fixed = getenv("PBD_BENCH_FIXED");
    if (fixed && strcmp(fixed, "1") == 0) d.reference_dt = d.granular_cfl = 0;
    return d;
}

/* Whether the profiling filters above skip scene (gpu: its GPU line). */
static int bench_skip(const char *scene, int gpu) {
    const char *only = getenv("PBD_BENCH_SCENE"), *gpu_only = getenv("PBD_BENCH_GPU_ONLY");
    if (only && *only && !strstr(scene, only)) return 1;
    return !gpu && gpu_only && strcmp(gpu_only, "1") == 0;
}

/* Optional: called before every step (moving kinematic targets, colliders);
   its time is part of the step's. */
static void (*bench_before_step)(pbd_world *w) = NULL;

/* Median ms per pbd_world_step over BENCH_RUNS runs of `steps` steps. */
static double bench_ms_per_step(pbd_world *w, int steps) {
    double t[BENCH_RUNS];
    if (bench_before_step) bench_before_step(w);
    pbd_world_step(w, 1.0f / 60.0f); /* warm-up */
    for (int r = 0; r < BENCH_RUNS; ++r) {
        double t0 = bench_now();
        for (int s = 0; s < steps; ++s) {
            if (bench_before_step) bench_before_step(w);
            pbd_world_step(w, 1.0f / 60.0f);
        }
        t[r] = (bench_now() - t0) * 1e3 / steps;
    }
    qsort(t, BENCH_RUNS, sizeof t[0], bench_cmp_double);
    return t[BENCH_RUNS / 2];
}

/* Optional: constraints solved outside the groups (strand segments). */
static long (*bench_extra_constraints)(const pbd_world *w) = NULL;

/* Constraints and colours over all groups (colours: the most of any group). */
static void bench_count(const pbd_world *w, long *constraints, int *colors) {
    *constraints = bench_extra_constraints ? bench_extra_constraints(w) : 0;
    *colors = 0;
    for (int i = 0; i < pbd_world_group_count(w); ++i) {
        pbd_group g = pbd_world_group(w, i);
        int count = 0, ncol = 0;
        pbd_group_info(w, g, NULL, &count);
        pbd_group_colors(w, g, NULL, 0, &ncol, NULL);
        *constraints += count;
        if (ncol > *colors) *colors = ncol;
    }
}

static int bench_jacobi(const pbd_world *w) {
    int on = 0;
    pbd_world_get_jacobi(w, &on, NULL);
    return on;
}

/* The three measurements of one scene: make() builds a fresh world. */
typedef pbd_world *(*bench_make_fn)(void *ctx);

/* Optional: more keys for bench_cuda_scene's line (",\"key\":value..."),
   those a bench's CPU lines have besides bench_scene's. */
static const char *bench_cuda_keys = "";

/* The GPU measurement of a scene (pbd_cuda.cu): path "cuda", with the
   upload of the world (upload_ms) and one positions read-back after a step
   (readback_ms); warm: steps before the timing. Where there is no GPU
   world to measure (built without PBD_CUDA, no device, a scene that
   fails to build) one line says why: "skipped". */
static void bench_cuda_scene(const char *bench, const char *scene, bench_make_fn make, void *ctx, int warm, int steps) {
    if (bench_skip(scene, 1)) return;
#ifdef PBD_CUDA
    bench_device = PBD_DEVICE_GPU;
    pbd_world *w = make(ctx);
    bench_device = PBD_DEVICE_CPU;
    if (!w || pbd_world_device(w) != PBD_DEVICE_GPU) {
        printf("{\"bench\":\"%s\",\"scene\":\"%s\",\"path\":\"cuda\",\"skipped\":\"%s\"}\n", bench, scene,
               w ? "no GPU world" : pbd_last_error());
        pbd_world_destroy(w);
        return;
    }
    double t0 = bench_now();
    pbd_world_device_positions(w); /* uploads the world */
    double upload = (bench_now() - t0) * 1e3;
    for (int s = 0; s < warm; ++s) pbd_world_step(w, 1.0f / 60.0f);
    double ms = bench_ms_per_step(w, steps);
    pbd_world_step(w, 1.0f / 60.0f);
    t0 = bench_now();
    pbd_world_positions(w); /* fetches x and v */
    double readback = (bench_now() - t0) * 1e3;
    long constraints;
    int colors;
    bench_count(w, &constraints, &colors);
    int iterations = 0, substeps = pbd_world_step_substeps(w, 1.0f / 60.0f);
    pbd_world_get_solver(w, NULL, NULL, &iterations);
    printf("{\"bench\":\"%s\",\"scene\":\"%s\",\"particles\":%d,\"constraints\":%ld,\"colors\":%d,"
           "\"iterations\":%d,\"substeps\":%d,\"mode\":\"%s\",\"path\":\"cuda\",\"threads\":0,"
           "\"ms_per_step\":%.3f,\"proj_per_s\":%.4g,\"upload_ms\":%.3f,\"readback_ms\":%.3f%s}\n",
           bench, scene, pbd_world_particle_count(w), constraints, colors, iterations, substeps,
           bench_jacobi(w) ? "jacobi" : "gs", ms, (double)constraints * iterations * substeps / (ms * 1e-3), upload,
           readback, bench_cuda_keys);
    fflush(stdout);
    pbd_world_destroy(w);
#else
    (void)make, (void)ctx, (void)warm, (void)steps;
    printf("{\"bench\":\"%s\",\"scene\":\"%s\",\"path\":\"cuda\",\"skipped\":\"built without PBD_CUDA "
           "(make bench builds with it where nvcc exists)\"}\n",
           bench, scene);
#endif
}

/* Whether bench_scene measures the GPU too (the benches that the GPU
   companion's issue names: cloth, fluid, strands, self-collision). */
static int bench_with_cuda = 0;

static void bench_scene(const char *bench, const char *scene, bench_make_fn make, void *ctx, int steps) {
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    for (int k = 0; k < 3; ++k) {
        if (bench_skip(scene, 0)) break;
        if (cfg[k].threads > pbd_max_threads() && cfg[k].threads > 1 && pbd_max_threads() == 1) continue;
        pbd_world *w = make(ctx);
        if (!w) {
            fprintf(stderr, "%s: could not build %s\n", bench, scene);
            exit(1);
        }
        pbd_world_set_simd(w, cfg[k].simd);
        pbd_world_set_threads(w, cfg[k].threads);
        double ms = bench_ms_per_step(w, steps);
        long constraints;
        int colors;
        bench_count(w, &constraints, &colors);
        int iterations = 0, substeps = pbd_world_step_substeps(w, 1.0f / 60.0f); /* what a step takes */
        pbd_world_get_solver(w, NULL, NULL, &iterations);
        printf("{\"bench\":\"%s\",\"scene\":\"%s\",\"particles\":%d,\"constraints\":%ld,\"colors\":%d,"
               "\"iterations\":%d,\"substeps\":%d,\"mode\":\"%s\",\"path\":\"%s\",\"threads\":%d,"
               "\"ms_per_step\":%.3f,\"proj_per_s\":%.4g}\n",
               bench, scene, pbd_world_particle_count(w), constraints, colors, iterations, substeps,
               bench_jacobi(w) ? "jacobi" : "gs", cfg[k].simd ? pbd_simd_path() : "scalar", cfg[k].threads, ms,
               (double)constraints * iterations * substeps / (ms * 1e-3));
        fflush(stdout);
        pbd_world_destroy(w);
    }
    if (bench_with_cuda) bench_cuda_scene(bench, scene, make, ctx, 0, steps);
}
#endif
