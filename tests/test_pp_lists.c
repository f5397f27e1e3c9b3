/* tests/test_pp_lists.c - pbd.h section "particle contact": neighbour
   lists kept over a step's substeps (PBD__PP_SKIN, pbd__pp_lists_stale,
   private). The rule itself: a step's first substep builds, a particle a
   quarter of its radius away from its place builds (NaN too), fluids
   build every substep; and what it guards: a grain rolling into another
   within one step meets it as it did with lists built every substep.
   Compiles its own static copy of the implementation (tests/private.h). */
#include "private.h"
#include <stdlib.h>

/* A layer of n x n grains of radius r at rest on a plane, settled. */
static pbd_world *grain_layer(int n, float r) {
    pbd_world *w = NULL;
    pbd_world_desc d = pbd_world_desc_default();
    CHECK_OK(pbd_world_create(&d, &w));
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)(n * n));
    for (int i = 0; i < n * n; ++i) {
        pos[3 * i + 0] = (float)(i % n) * 2.1f * r;
        pos[3 * i + 1] = r;
        pos[3 * i + 2] = (float)(i / n) * 2.1f * r;
    }
    pbdt_add_colliding(w, pos, n * n, r, 0.01f);
    free(pos);
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, o, up, 0.5f, NULL));
    for (int s = 0; s < 10; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    return w;
}

/* The lists built at the positions p (a substep's predictions) serve
   later substeps until one particle moved PBD__PP_SKIN of its radius. */
TEST(pp_lists_are_kept_until_a_particle_moves_a_quarter_radius) {
    const float r = 0.01f;
    pbd_world *w = grain_layer(6, r);
    memcpy(w->p, w->x, sizeof(pbd__p4) * (size_t)w->n);
    pbd__pp_build(w, w->p, 0);
    CHECK(pbd__pp_lists_stale(w, 0) == 1); /* a step's first substep */
    CHECK(pbd__pp_lists_stale(w, 1) == 0);
    w->p[7].x += 0.2f * r;
    CHECK(pbd__pp_lists_stale(w, 3) == 0);
    w->p[7].x += 0.1f * r; /* 0.3 r in all */
    CHECK(pbd__pp_lists_stale(w, 3) == 1);
    w->p[7] = w->x[7];
    w->p[20].y = NAN;
    CHECK(pbd__pp_lists_stale(w, 2) == 1);
    pbd_world_destroy(w);
}

/* Fluids' lists have no margin (the kernel radius): built every substep. */
TEST(pp_lists_of_fluids_are_built_every_substep) {
    pbd_world *w = pbdt_world(-9.81f);
    float o[3] = {0, 0.05f, 0};
    CHECK(pbdt_fluid_cube(w, 4, o).count == 64);
    memcpy(w->p, w->x, sizeof(pbd__p4) * (size_t)w->n);
    pbd__pp_build(w, w->p, 0);
    CHECK(w->pp.np > 0 && pbd__pp_lists_stale(w, 1) == 1);
    pbd_world_destroy(w);
}

/* A grain rolled at 1.5 m/s at one 4 cm away (centres; 2 cm of gap at
   r = 1 cm, outside the lists' reach of 3.5 cm at the step's start) meets
   it within the step: the lists are built again on the way (16 substeps
   of 1.6 mm each; kept for the whole step, the two would end it about half
   a radius deep in each other and collide only at the next step). */
TEST(pp_lists_a_grain_rolled_at_another_meets_it_within_the_step) {
    const float r = 0.01f;
    pbd_world *w = NULL;
    pbd_world_desc d = pbd_world_desc_default();
    CHECK_OK(pbd_world_create(&d, &w));
    float pos[6] = {0, r, 0, 0.04f, r, 0}, vel[3] = {1.5f, 0, 0};
    pbd_range g = pbdt_add_colliding(w, pos, 2, r, 0.01f);
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, o, up, 0.0f, NULL));
    pbd_range first = {g.first, 1};
    CHECK_OK(pbd_particles_set_velocities(w, first, vel));
    CHECK(pbd_world_step_substeps(w, 1.0f / 60.0f) == 16);
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    float gap = x[4 * (g.first + 1)] - x[4 * g.first] - 2 * r;
    CHECK_MSG(gap > -0.02f * r, "the grains end the step %.3f r apart", (double)(gap / r));
    CHECK_MSG(v[4 * (g.first + 1)] > 0.3f, "the hit grain moves at %.3f m/s", (double)v[4 * (g.first + 1)]);
    pbd_world_destroy(w);
}

/* Slot a's pairs within reach (the first nbr_count of its list) as sorted
   particle ids, its load into *load; the count. */
static int active_pairs(const pbd_world *w, int a, int *ids, float *load) {
    const pbd__particle_phase *pp = &w->pp;
    int n = pp->nbr_count[a];
    for (int j = 0; j < n; ++j) ids[j] = pp->sid[pp->nbr[pp->nbr_off[a] + j]];
    for (int i = 1; i < n; ++i) /* insertion sort: a few tens */
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; --j) {
            int t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    *load = pp->cload[a];
    return n;
}

/* A substep that keeps the lists has the pairs within reach (1.5 (r_a +
   r_b)) and the contact loads that lists built at its predictions would
   have: a block of grains whose neighbours lie around that reach, each
   moved by up to 0.24 r after the build (inside the skin). Kept lists of
   the pairs within reach at the build (no margin) missed pairs that came
   within it, and loads counted at the build kept a resting column of
   grains shaking (pbd__pp_activate). */
TEST(pp_lists_kept_hold_what_a_build_would) {
    const float r = 0.01f;
    const int n = 6, N = n * n * n;
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)N);
    unsigned seed = 12345u;
    for (int i = 0; i < N; ++i)
        for (int c = 0; c < 3; ++c) {
            seed = seed * 1664525u + 1013904223u;
            float jitter = ((float)(seed >> 8) / 16777216.0f - 0.5f) * 0.4f * r;
            int cell = c == 0 ? i % n : c == 1 ? (i / n) % n : i / (n * n);
            pos[3 * i + c] = (float)cell * 2.1f * r + jitter + (c == 1 ? 0.5f : 0.0f);
        }
    pbd_world *w = pbdt_world(0.0f);
    pbd_range g = pbdt_add_colliding(w, pos, N, r, 0.01f);
    free(pos);
    memcpy(w->p, w->x, sizeof(pbd__p4) * (size_t)w->n);
    pbd__pp_build(w, w->p, 0);
    for (int i = 0; i < N; ++i) { /* a random direction, up to 0.24 r */
        float d[3];
        for (int c = 0; c < 3; ++c) {
            seed = seed * 1664525u + 1013904223u;
            d[c] = (float)(seed >> 8) / 16777216.0f - 0.5f;
        }
        float len = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) + 1e-6f;
        float step = 0.24f * r * (float)((i * 7) % 10) / 9.0f / len;
        w->p[g.first + i].x += d[0] * step;
        w->p[g.first + i].y += d[1] * step;
        w->p[g.first + i].z += d[2] * step;
    }
    pbd__pp_begin_substep(w, 1);
    CHECK(w->pp.stale == 0); /* kept */
    int *kept = (int *)malloc(sizeof(int) * (size_t)N * PBD_MAX_NEIGHBORS),
        *count = (int *)calloc((size_t)N, sizeof(int));
    float *load = (float *)malloc(sizeof(float) * (size_t)N);
    int pairs = 0, nearly = 0;
    for (int a = 0; a < w->pp.np; ++a) {
        int i = w->pp.sid[a] - g.first;
        count[i] = active_pairs(w, a, kept + (size_t)i * PBD_MAX_NEIGHBORS, &load[i]);
        pairs += count[i];
        nearly += w->pp.nbr_listed[a] - count[i];
    }
    CHECK_MSG(pairs > 5 * N && nearly > N, "%d pairs within reach, %d listed beyond it: not the scene meant", pairs,
              nearly);
    pbd__pp_build(w, w->p, 0);
    int differ = 0, ids[PBD_MAX_NEIGHBORS];
    for (int a = 0; a < w->pp.np; ++a) {
        int i = w->pp.sid[a] - g.first;
        float built_load;
        int c = active_pairs(w, a, ids, &built_load);
        differ += c != count[i] || built_load != load[i] ||
                  memcmp(ids, kept + (size_t)i * PBD_MAX_NEIGHBORS, sizeof(int) * (size_t)c) != 0;
    }
    CHECK_MSG(differ == 0, "%d of %d grains' pairs or loads differ from a build's", differ, N);
    free(kept);
    free(count);
    free(load);
    pbd_world_destroy(w);
}

void suite_pp_lists(void) {
    RUN(pp_lists_are_kept_until_a_particle_moves_a_quarter_radius);
    RUN(pp_lists_of_fluids_are_built_every_substep);
    RUN(pp_lists_a_grain_rolled_at_another_meets_it_within_the_step);
    RUN(pp_lists_kept_hold_what_a_build_would);
}
