/* bench/strands.c - hair: 10 000 follow-the-leader strands of 32 particles
   (Mueller et al. 2012, dynamic FTL) on a head sphere that moves every
   step, without and with the head as a sphere collider. 1/60 s steps of
   1 or 2 substeps of one iteration (one FTL pass is exact).
   Prints JSON lines (see bench/bench.h); the target is <= 5 ms per step on
   2 threads. Build and run: make bench BENCH=strands */
#include "bench.h"
#include <math.h>

typedef struct hair_ctx {
    int strands, per, substeps, iterations, head;
} hair_ctx;

static pbd_strands bench_hair;
static int bench_step;

static pbd_world *make_hair(void *vctx) {
    const hair_ctx *c = (const hair_ctx *)vctx;
    pbd_world_desc d = bench_desc();
    d.substeps = c->substeps;
    d.iterations = c->iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)c->strands),
          *nrm = (float *)malloc(sizeof(float) * 3 * (size_t)c->strands);
    for (int s = 0; s < c->strands; ++s) { /* a Fibonacci spiral over the upper hemisphere */
        float y = ((float)s + 0.5f) / (float)c->strands, phi = 2.39996323f * (float)s, r = sqrtf(1 - y * y);
        nrm[3 * s] = r * cosf(phi);
        nrm[3 * s + 1] = y;
        nrm[3 * s + 2] = r * sinf(phi);
        for (int k = 0; k < 3; ++k) pos[3 * s + k] = 0.1f * nrm[3 * s + k];
    }
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = pos;
    hd.root_normals = nrm;
    hd.strand_count = c->strands;
    hd.particles_per_strand = c->per;
    hd.length = 0.3f;
    hd.position[1] = 1.0f;
    pbd_result r = pbd_add_hair(w, &hd, &bench_hair, NULL);
    free(pos);
    free(nrm);
    float centre[3] = {0, 1, 0};
    if (r != PBD_OK || (c->head && pbd_add_collider_sphere(w, centre, 0.1f, 0.3f, NULL) != PBD_OK)) {
        pbd_world_destroy(w);
        return NULL;
    }
    bench_step = 0;
    return w;
}

/* The head shakes: the roots and the collider follow a moving pose. */
static void shake(pbd_world *w) {
    float t = (float)bench_step++ / 60.0f;
    float pos[3] = {0.05f * sinf(6.0f * t), 1.0f, 0},
          rot[4] = {0, sinf(0.3f * sinf(5.0f * t)), 0, cosf(0.3f * sinf(5.0f * t))};
    pbd_strands_set_transform(w, bench_hair, pos, rot);
    if (pbd_world_collider_count(w) > 0) pbd_collider_set_pose(w, pbd_world_collider(w, 0), pos, rot);
}

/* FTL segments count as the constraints (one projection each per iteration). */
static long segments(const pbd_world *w) {
    int strands = 0, particles = 0;
    pbd_strands_info(w, bench_hair, &strands, &particles);
    return (long)particles - strands;
}

int main(void) {
    bench_with_cuda = 1;
    bench_before_step = shake;
    bench_extra_constraints = segments;
    hair_ctx one = {10000, 32, 1, 1, 0}; /* DFTL as in the paper: one step, one pass */
    bench_scene("strands", "hair10000x32_1substep", make_hair, &one, 10);
    hair_ctx c = {10000, 32, 2, 1, 0};
    bench_scene("strands", "hair10000x32", make_hair, &c, 10);
    hair_ctx head = {10000, 32, 2, 1, 1};
    bench_scene("strands", "hair10000x32_head", make_hair, &head, 10);
    return 0;
}
