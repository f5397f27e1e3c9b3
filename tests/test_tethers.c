/* tests/test_tethers.c - the automatic tethers of a pinned cloth
   (pbd_cloth_desc.tethers: geodesic long range attachments, Kim et al.
   2012, to the two nearest anchors): they follow pin / unpin / mass /
   kinematic changes, survive snapshots, can be switched off, and keep a
   cloth hanging from two corners from stretching. */
#include "test.h"
#include <stdlib.h>
#include <math.h>
#include <string.h>

/* An n x n cloth, 1 m wide, horizontal at y = 1, defaults but for
   `tethers`; masses (optional) as given to pbd_add_cloth. */
static pbd_world *tether_cloth(int n, int tethers, const float *masses, pbd_object *obj) {
    pbd_world *w = pbdt_world(-9.81f);
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.tethers = tethers;
    cd.masses = masses;
    CHECK_OK(pbd_add_cloth(w, &cd, obj));
    pbd_mesh_free(&m);
    return w;
}

/* The set's tethers: how many, and how many to each of two anchors. */
static int tethers_to(const pbd_world *w, pbd_lra l, int a, int b, int *to_a, int *to_b, int *others) {
    int count = 0;
    CHECK_OK(pbd_lra_tethers(w, l, NULL, NULL, NULL, 0, &count));
    int *anchors = (int *)malloc(sizeof(int) * (size_t)(count > 0 ? count : 1));
    CHECK_OK(pbd_lra_tethers(w, l, NULL, anchors, NULL, count, NULL));
    *to_a = *to_b = *others = 0;
    for (int t = 0; t < count; ++t) {
        if (anchors[t] == a) ++*to_a;
        else if (anchors[t] == b) ++*to_b;
        else ++*others;
    }
    free(anchors);
    return count;
}

/* Pinning, unpinning, mass 0 and kinematic particles rebuild the set in
   place: every free vertex is tethered to each of its (at most two)
   anchors, and no tether points at a vertex that is no longer one. */
TEST(tethers_follow_pins) {
    const int n = 8, last = n - 1, far = n * n - 1, free_count = n * n - 1;
    pbd_object obj;
    pbd_world *w = tether_cloth(n, 1, NULL, &obj);
    pbd_lra l = 0;
    CHECK_OK(pbd_object_tethers(w, obj.id, &l));
    CHECK_MSG(l == -1, "a cloth without anchors has no tether set yet (%d)", l);
    int a, b, o;
    CHECK_OK(pbd_pin(w, 0));
    CHECK_OK(pbd_object_tethers(w, obj.id, &l));
    CHECK(l >= 0);
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == free_count && a == free_count && b == 0 && o == 0);
    /* the neighbour's tether is its edge: geodesic rest length 1/7 */
    int parts[2 * 64];
    float len[2 * 64];
    CHECK_OK(pbd_lra_tethers(w, l, parts, NULL, len, 2 * 64, NULL));
    for (int t = 0; t < free_count; ++t)
        if (parts[t] == 1) CHECK_NEAR(len[t], 1.0f / (n - 1), 1e-6f);
    CHECK_OK(pbd_pin(w, last));
    pbd_lra l2 = -1;
    CHECK_OK(pbd_object_tethers(w, obj.id, &l2));
    CHECK(l2 == l); /* rebuilt in place */
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == 2 * (n * n - 2) && a == n * n - 2 && b == n * n - 2 && o == 0);
    CHECK_OK(pbd_unpin(w, 0)); /* no stale tether to 0 */
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == free_count && a == 0 && b == free_count && o == 0);
    CHECK_OK(pbd_set_mass(w, far, 0.0f)); /* mass 0 pins too */
    CHECK(tethers_to(w, l, far, last, &a, &b, &o) == 2 * (n * n - 2) && a == n * n - 2 && b == n * n - 2);
    CHECK_OK(pbd_set_mass(w, far, 0.01f));
    CHECK_OK(pbd_unpin(w, last));
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == 0); /* no anchor: empty */
    CHECK_OK(pbd_set_kinematic(w, last, 1));
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == free_count && b == free_count);
    /* calls that leave the anchors as they are keep the set */
    CHECK_OK(pbd_set_kinematic(w, last, 1));
    CHECK_OK(pbd_pin(w, last));
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == free_count);
    CHECK_OK(pbd_pin(w, 0));
    CHECK(tethers_to(w, l, 0, last, &a, &b, &o) == 2 * (n * n - 2));
    pbd_world_destroy(w);

    /* masses of 0 at add time: built with the cloth */
    float masses[64];
    for (int i = 0; i < n * n; ++i) masses[i] = i == 0 || i == last ? 0.0f : 0.003f;
    w = tether_cloth(n, 1, masses, &obj);
    CHECK_OK(pbd_object_tethers(w, obj.id, &l));
    CHECK(l >= 0 && tethers_to(w, l, 0, last, &a, &b, &o) == 2 * (n * n - 2));
    pbd_world_destroy(w);

    /* switched off */
    w = tether_cloth(n, 0, masses, &obj);
    CHECK_OK(pbd_pin(w, 5));
    CHECK_OK(pbd_object_tethers(w, obj.id, &l));
    CHECK(l == -1);
    pbd_world_destroy(w);
}

/* A cloth hanging from two corners, stepped, saved with its tethers,
   stepped on; restored and stepped again: the same bits. A pin after the
   restore rebuilds the restored set. */
TEST(tethers_snapshot_round_trip) {
    pbd_object obj;
    pbd_world *w = tether_cloth(12, 1, NULL, &obj);
    CHECK_OK(pbd_pin(w, 0));
    CHECK_OK(pbd_pin(w, 11));
    for (int s = 0; s < 10; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    size_t size = pbd_world_snapshot_size(w);
    unsigned char *saved = (unsigned char *)malloc(size), *a = (unsigned char *)malloc(size), *b = (unsigned char *)malloc(size);
    CHECK_OK(pbd_world_save(w, saved, size));
    for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK_OK(pbd_world_save(w, a, size));
    CHECK_OK(pbd_world_restore(w, saved, size));
    for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK(pbd_world_snapshot_size(w) == size);
    CHECK_OK(pbd_world_save(w, b, size));
    CHECK_MSG(memcmp(a, b, size) == 0, "restored world diverged");
    pbd_lra l = -1;
    int ta, tb, to;
    CHECK_OK(pbd_object_tethers(w, obj.id, &l));
    CHECK_OK(pbd_unpin(w, 11));
    CHECK(tethers_to(w, l, 0, 11, &ta, &tb, &to) == 143 && ta == 143);
    free(saved); free(a); free(b);
    pbd_world_destroy(w);
}

TEST(tethers_bad_input) {
    pbd_object obj;
    pbd_world *w = tether_cloth(4, 1, NULL, &obj);
    pbd_lra l;
    CHECK_RESULT(pbd_object_tethers(NULL, 0, &l), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_object_tethers(w, 0, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_object_tethers(w, 1, &l), PBD_ERROR_INDEX_OUT_OF_RANGE);
    CHECK_RESULT(pbd_object_tethers(w, -1, &l), PBD_ERROR_INDEX_OUT_OF_RANGE);
    size_t size = pbd_world_snapshot_size(w);
    unsigned char *before = (unsigned char *)malloc(size), *after = (unsigned char *)malloc(size);
    CHECK_OK(pbd_world_save(w, before, size));
    pbd_mesh m;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.tethers = 2;
    CHECK_RESULT(pbd_add_cloth(w, &cd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(pbd_world_snapshot_size(w) == size);
    CHECK_OK(pbd_world_save(w, after, size));
    CHECK(memcmp(before, after, size) == 0);
    pbd_mesh_free(&m);
    free(before); free(after);
    pbd_world_destroy(w);
}

/* Worst edge strain |x_a - x_b| / rest - 1 of an n x n grid cloth (first
   particle 0): the grid's edges, diagonals included. */
static double worst_grid_strain(const pbd_world *w, const pbd_mesh *m) {
    const float *x = pbd_world_positions(w);
    double worst = 0;
    for (int k = 0; k < 3 * m->triangle_count; ++k) {
        int a = m->triangles[k], b = m->triangles[k % 3 == 2 ? k - 2 : k + 1];
        const float *ra = m->positions + 3 * a, *rb = m->positions + 3 * b, *xa = x + 4 * a, *xb = x + 4 * b;
        double r = sqrt((double)(ra[0] - rb[0]) * (ra[0] - rb[0]) + (double)(ra[2] - rb[2]) * (ra[2] - rb[2]));
        double l = sqrt((double)(xa[0] - xb[0]) * (xa[0] - xb[0]) + (double)(xa[1] - xb[1]) * (xa[1] - xb[1]) +
                        (double)(xa[2] - xb[2]) * (xa[2] - xb[2]));
        if (l / r - 1 > worst) worst = l / r - 1;
    }
    return worst;
}

/* bench/cloth_defaults' scene: a 1 m, 32 x 32 cloth hanging from its two
   top corners, 1/60 s; the worst edge over the fall (the first 2 s at
   most) and over the last half second. */
static void hanging_strain(int substeps, int iterations, int tethers, float damping, int steps, double *fall, double *rest) {
    pbd_world_desc d = pbd_world_desc_default();
    if (substeps) { d.substeps = substeps; d.iterations = iterations; }
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK_OK(pbd_world_set_threads(w, 1));
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(32, 32, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.tethers = tethers;
    cd.damping = damping;
    CHECK_OK(pbd_add_cloth(w, &cd, NULL));
    CHECK_OK(pbd_pin(w, 0));
    CHECK_OK(pbd_pin(w, 31));
    *fall = *rest = 0;
    for (int s = 1; s <= steps; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        double e = worst_grid_strain(w, &m);
        if (s <= 120 && e > *fall) *fall = e;
        if (s > steps - 30 && e > *rest) *rest = e;
    }
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* With the defaults (4 x 4) the tethers cut the worst edge of the first
   second from 223% to 33% (of 2 s in bench/cloth_defaults: 295% to 38%);
   without them it is back. With 16 substeps x 1 iteration (the same
   number of projections) and the cloth's damping at 2/s the targets of
   issue 16 hold: at most 10% in the fall, 5% once it hangs (2..2.5 s). */
TEST(tethers_hanging_cloth_strain) {
    double fall_on, fall_off, rest_on, fall16, rest16;
    hanging_strain(0, 0, 1, 0.0f, 60, &fall_on, &rest_on);
    hanging_strain(0, 0, 0, 0.0f, 60, &fall_off, &rest_on);
    hanging_strain(16, 1, 1, 2.0f, 150, &fall16, &rest16);
    printf("    32 x 32 from two corners, worst edge: 4 x 4 fall %.1f%% with tethers, %.1f%% without; "
           "16 x 1, damping 2: fall %.1f%%, hanging %.1f%%\n", 100 * fall_on, 100 * fall_off, 100 * fall16, 100 * rest16);
    CHECK_MSG(fall_on < 0.45, "4 x 4 with tethers: %g", fall_on);
    CHECK_MSG(fall_off > 1.5, "4 x 4 without tethers: %g (the measurement lost its meaning)", fall_off);
    CHECK_MSG(fall16 <= 0.10, "16 x 1 fall: %g > 10%%", fall16);
    CHECK_MSG(rest16 <= 0.05, "16 x 1 hanging: %g > 5%%", rest16);
}

void suite_tethers(void) {
    RUN(tethers_hanging_cloth_strain);
    RUN(tethers_follow_pins);
    RUN(tethers_snapshot_round_trip);
    RUN(tethers_bad_input);
}
