/* tests/test_tethers.c - the automatic tethers of a pinned cloth
   (pbd_cloth_desc.tethers: geodesic long range attachments, Kim et al.
   2012, to the two nearest anchors): they follow pin / unpin / mass /
   kinematic changes, survive snapshots, can be switched off, and keep a
   cloth hanging from two corners from stretching. */
#include "test.h"
#include <stdlib.h>
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

void suite_tethers(void) {
    RUN(tethers_follow_pins);
    RUN(tethers_snapshot_round_trip);
    RUN(tethers_bad_input);
}
