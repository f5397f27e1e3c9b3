/* tests/test_particle_contact.c - the hash grid and particle-particle
   contact with friction (survey 3.4.3 / 3.8; Macklin et al. 2014). */
#include "test.h"
#include <stdlib.h>

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : (x > y);
}

/* n loose particles of radius r at the given positions, all colliding. */
static pbd_world *particle_world(const float *pos, int n, float r, float gy) {
    pbd_world *w = pbdt_world(gy);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = n;
    pd.radius = r;
    pbd_range range;
    CHECK_OK(pbd_add_particles(w, &pd, &range));
    CHECK_OK(pbd_set_particle_collision(w, range, 1));
    return w;
}

/* pbd_world_query_particles (the grid's sphere query) returns exactly the
   brute-force set, for radii below, near and far above the cell. */
TEST(grid_query_equals_brute_force) {
    enum { N = 1500 };
    unsigned seed = 11;
    float *pos = (float *)malloc(sizeof(float) * 3 * N);
    for (int i = 0; i < N; ++i)
        for (int a = 0; a < 3; ++a) /* a cluster and a sparse cloud, some far away */
            pos[3 * i + a] = i < 500 ? 0.2f * pbdt_rand(&seed) : (i % 97 == 0 ? 50.0f : 2.0f) * (pbdt_rand(&seed) - 0.5f);
    pbd_world *w = particle_world(pos, N, 0.01f, 0);
    int *got = (int *)malloc(sizeof(int) * N), *want = (int *)malloc(sizeof(int) * N);
    float radii[5] = {0.0f, 0.03f, 0.1f, 0.5f, 40.0f};
    for (int t = 0; t < 40; ++t) {
        float q[3];
        for (int a = 0; a < 3; ++a) q[a] = t < 20 ? 0.2f * pbdt_rand(&seed) : 2.0f * (pbdt_rand(&seed) - 0.5f);
        if (t == 0) { q[0] = pos[0]; q[1] = pos[1]; q[2] = pos[2]; } /* radius 0 on a particle */
        float r = radii[t % 5];
        int count = -1, nw = 0;
        CHECK_OK(pbd_world_query_particles(w, q, r, got, N, &count));
        for (int i = 0; i < N; ++i) {
            float d[3] = {pos[3 * i] - q[0], pos[3 * i + 1] - q[1], pos[3 * i + 2] - q[2]};
            if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r) want[nw++] = i;
        }
        CHECK_MSG(count == nw, "query %d (r %g): grid %d, brute force %d", t, (double)r, count, nw);
        if (count != nw) continue;
        qsort(got, (size_t)count, sizeof(int), cmp_int);
        for (int k = 0; k < count; ++k) CHECK(got[k] == want[k]);
        if (t == 0) CHECK(count >= 1);
    }
    int c = 0;
    CHECK_OK(pbd_world_query_particles(w, pos, 0.1f, got, 3, &c)); /* max smaller than the count */
    CHECK(c > 3);
    free(got);
    free(want);
    free(pos);
    pbd_world_destroy(w);
}

/* The solver's neighbour lists (built from the predicted positions by the
   grid every substep) equal brute force within the search radius, 3 r for
   loose particles; a jittered lattice with gaps > 2 r keeps every contact
   open, so nothing moves. The order is deterministic: the same twice. */
TEST(grid_neighbor_lists_equal_brute_force) {
    enum { S = 9, N = S * S * S };
    float r = 0.01f, pos[3 * N];
    unsigned seed = 5;
    for (int i = 0; i < N; ++i) {
        int c[3] = {i % S, (i / S) % S, i / (S * S)};
        for (int a = 0; a < 3; ++a) pos[3 * i + a] = 2.5f * r * (float)c[a] + 0.2f * r * (pbdt_rand(&seed) - 0.5f);
    }
    pbd_world *w = particle_world(pos, N, r, 0);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < 3 * N; ++i) CHECK(x[4 * (i / 3) + i % 3] == pos[i]);
    int list[PBD_MAX_NEIGHBORS], again[PBD_MAX_NEIGHBORS], want[N];
    long total = 0;
    for (int i = 0; i < N; ++i) {
        int count = 0, nw = 0, count2 = 0;
        CHECK_OK(pbd_world_particle_neighbors(w, i, list, PBD_MAX_NEIGHBORS, &count));
        CHECK_OK(pbd_world_particle_neighbors(w, i, again, PBD_MAX_NEIGHBORS, &count2));
        CHECK(count == count2 && memcmp(list, again, sizeof(int) * (size_t)count) == 0);
        for (int j = 0; j < N; ++j) {
            float d[3] = {pos[3 * j] - pos[3 * i], pos[3 * j + 1] - pos[3 * i + 1], pos[3 * j + 2] - pos[3 * i + 2]};
            if (j != i && d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < 9 * r * r) want[nw++] = j;
        }
        CHECK_MSG(count == nw, "particle %d: %d neighbours, brute force %d", i, count, nw);
        if (count != nw) continue;
        qsort(list, (size_t)count, sizeof(int), cmp_int);
        for (int k = 0; k < count; ++k) CHECK(list[k] == want[k]);
        total += count;
    }
    CHECK(total >= 2L * 3 * S * S * (S - 1)); /* at least every lattice edge, both ways */
    pbd_world_destroy(w);
}

void suite_particle_contact(void) {
    RUN(grid_query_equals_brute_force);
    RUN(grid_neighbor_lists_equal_brute_force);
}
