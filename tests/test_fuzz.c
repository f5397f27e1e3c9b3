/* tests/test_fuzz.c - regressions of what the fuzz harnesses
   (tests/fuzz/, `make fuzz`) found: each test replays the essence of one
   finding as a forged or hostile input and checks that it is refused with
   an error, leaving the world untouched. Each fails without its fix (under
   the ASan configuration where the finding was a memory error). */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include "../pbd_upsample.h"
#include <stdint.h>
#include <stdlib.h>

/* FNV-1a from offset basis h (the standard one: 14695981039346656037). */
static uint64_t fzt_fnv_from(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
static uint64_t fzt_fnv(const unsigned char *p, size_t n) { return fzt_fnv_from(14695981039346656037ull, p, n); }
/* Rewrites the FNV-1a checksum at the end of a snapshot or model file. */
static void fzt_reseal(unsigned char *buf, size_t size) {
    uint64_t sum = fzt_fnv(buf, size - 8);
    memcpy(buf + size - 8, &sum, 8);
}

/* Seals buf with FNV-1a from the offset basis of files written before 0.2
   (1469598103934665603: the basis less its last digit). */
static void fzt_reseal_before_0_2(unsigned char *buf, size_t size) {
    uint64_t h = fzt_fnv_from(1469598103934665603ull, buf, size - 8);
    memcpy(buf + size - 8, &h, 8);
}
/* A saved subdivision model of two triangles (and the model, in *m). */
static unsigned char *fzt_saved_model(pbd_up_model **m, size_t *size) {
    int tris[6] = {0, 1, 2, 0, 2, 3};
    *m = NULL;
    if (pbd_up_subdivision_create(tris, 2, 4, 1, m) != PBD_OK) return NULL;
    *size = pbd_up_model_save_size(*m);
    unsigned char *buf = (unsigned char *)malloc(*size);
    if (buf && pbd_up_model_save(*m, buf, *size) == PBD_OK) return buf;
    free(buf);
    pbd_up_model_destroy(*m);
    *m = NULL;
    return NULL;
}
/* A small training set (a 4 x 4 cape, 1 level, 2 frames). */
static pbd_result fzt_training(pbd_up_training *t) {
    pbd_up_training_desc d = pbd_up_training_desc_default();
    d.coarse_resolution = 4;
    d.levels = 1;
    d.frames = 2;
    d.steps_per_frame = 1;
    return pbd_up_training_generate(&d, t);
}
/* Whether buf ends with the standard FNV-1a of the bytes before it. */
static int fzt_sealed(const unsigned char *buf, size_t size) {
    uint64_t sum;
    memcpy(&sum, buf + size - 8, 8);
    return sum == fzt_fnv(buf, size - 8);
}

/* The checksums are FNV-1a as documented (an audit rebuilt a training
   file from pbd_upsample.h's format and had it refused: the offset basis
   was 1469598103934665603, the standard 14695981039346656037 less its
   last digit): snapshots, models and training sets end with the standard
   FNV-1a of the bytes before them; buffers sealed the old way are still
   read; a flipped byte is still refused. */
TEST(checksums_are_fnv1a_and_old_buffers_still_read) {
    pbd_world *w = pbdt_world(-9.81f);
    float x[3] = {0, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = 1;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    size_t n = 0;
    unsigned char *snap = pbdt_save(w, &n);
    CHECK(fzt_sealed(snap, n));
    fzt_reseal_before_0_2(snap, n);
    CHECK_OK(pbd_world_restore(w, snap, n));
    snap[n / 2] ^= 1;
    CHECK_RESULT(pbd_world_restore(w, snap, n), PBD_ERROR_BAD_SNAPSHOT);
    free(snap);
    pbd_world_destroy(w);

    pbd_up_model *m = NULL, *out = NULL;
    size_t size = 0;
    unsigned char *buf = fzt_saved_model(&m, &size);
    CHECK(buf != NULL);
    if (!buf) return;
    CHECK(fzt_sealed(buf, size));
    fzt_reseal_before_0_2(buf, size);
    CHECK_OK(pbd_up_model_load(buf, size, &out));
    pbd_up_model_destroy(out);
    out = NULL;
    buf[size / 2] ^= 1;
    CHECK_RESULT(pbd_up_model_load(buf, size, &out), PBD_ERROR_BAD_SNAPSHOT);
    free(buf);
    pbd_up_model_destroy(m);

    pbd_up_training t, l;
    CHECK_OK(fzt_training(&t));
    size = pbd_up_training_save_size(&t);
    buf = (unsigned char *)malloc(size);
    CHECK_OK(pbd_up_training_save(&t, buf, size));
    CHECK(fzt_sealed(buf, size));
    fzt_reseal_before_0_2(buf, size);
    CHECK_OK(pbd_up_training_load(buf, size, &l));
    pbd_up_training_free(&l);
    buf[size / 2] ^= 1;
    CHECK_RESULT(pbd_up_training_load(buf, size, &l), PBD_ERROR_BAD_SNAPSHOT);
    free(buf);
    pbd_up_training_free(&t);
}

/* A training-set file with a valid checksum but a header or triangles
   that cannot be (an audit: levels 0, 5, 1000 and INT_MAX loaded; a
   repeated triangle corner was called "NaN, infinity or a triangle index
   out of range"): refused, saying what is wrong. Header: magic, version,
   byte order (16 bytes), then coarse_count, detail_count, frame_count,
   coarse and detail triangle counts, levels; the coarse triangles follow. */
TEST(training_load_names_what_is_wrong) {
    pbd_up_training t, l;
    CHECK_OK(fzt_training(&t));
    size_t size = pbd_up_training_save_size(&t);
    unsigned char *buf = (unsigned char *)malloc(size), *forged = (unsigned char *)malloc(size);
    CHECK_OK(pbd_up_training_save(&t, buf, size));
    const struct {
        size_t at;
        int value;
        const char *says;
    } cases[4] = {{36, 1000, "levels 1000 outside 0..8"},
                  {36, 2, "not the 18 coarse ones subdivided 2 times"},
                  {36, 0x7fffffff, "outside 0..8"},
                  {44, 0, "repeats vertex 0"}}; /* the first triangle's second corner := its first */
    for (int k = 0; k < 4; ++k) {
        memcpy(forged, buf, size);
        memcpy(forged + cases[k].at, &cases[k].value, 4);
        fzt_reseal(forged, size);
        CHECK_ERROR(pbd_up_training_load(forged, size, &l), PBD_ERROR_BAD_SNAPSHOT, cases[k].says);
    }
    CHECK_OK(pbd_up_training_load(buf, size, &l));
    pbd_up_training_free(&l);
    free(forged);
    free(buf);
    pbd_up_training_free(&t);
}

/* An allocator that refuses requests above 64 MB and records the largest. */
typedef struct fzt_alloc {
    size_t largest;
} fzt_alloc;
static void *fzt_malloc(void *user, size_t size) {
    fzt_alloc *a = (fzt_alloc *)user;
    if (size > a->largest) a->largest = size;
    return size > ((size_t)64 << 20) ? NULL : malloc(size);
}
static void fzt_free(void *user, void *p) {
    (void)user;
    free(p);
}

/* fuzz_restore: a snapshot whose group count is far beyond what its bytes
   can hold made restore allocate (and zero) count * sizeof(group) bytes,
   150 GB for a 1 KB forgery (ASan: allocator out of memory). It must be
   refused as a bad snapshot without any large allocation. */
TEST(fuzz_restore_group_count_beyond_the_bytes) {
    fzt_alloc A = {0};
    pbd_world_desc d = pbd_world_desc_default();
    d.allocator.alloc = fzt_malloc;
    d.allocator.free = fzt_free;
    d.allocator.user = &A;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    if (!w) return;
    float xyz[6] = {0, 1, 0, 1, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = xyz;
    pd.count = 2;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    int pair[2] = {r.first, r.first + 1};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = pair;
    CHECK_OK(pbd_add_constraints(w, &cd, NULL));
    size_t n = pbd_world_snapshot_size(w);
    unsigned char *snap = (unsigned char *)malloc(n), *forged = (unsigned char *)malloc(n),
                  *after = (unsigned char *)malloc(n);
    CHECK_OK(pbd_world_save(w, snap, n));
    /* the group count follows magic, version, gravity, 5 ints, damping,
       Jacobi switch and relaxation, time (double), the add count and the
       particle count */
    const size_t at = 4 + 4 + 12 + 20 + 4 + 4 + 4 + 8 + 4 + 4;
    int groups;
    memcpy(&groups, snap + at, 4);
    CHECK(groups == pbd_world_group_count(w)); /* the offset is right */
    memcpy(forged, snap, n);
    int huge = 0x2b2b2b2b;
    memcpy(forged + at, &huge, 4);
    fzt_reseal(forged, n);
    A.largest = 0;
    CHECK_RESULT(pbd_world_restore(w, forged, n), PBD_ERROR_BAD_SNAPSHOT);
    CHECK_MSG(A.largest < ((size_t)1 << 20), "restore asked for %zu bytes", A.largest);
    CHECK_OK(pbd_world_save(w, after, n));
    CHECK(memcmp(snap, after, n) == 0);
    CHECK(strlen(pbd_world_last_error(w)) > 0);
    free(snap);
    free(forged);
    free(after);
    pbd_world_destroy(w);
}

/* fuzz_model: a model file whose sparse matrix has a row ending past the
   stored columns (start[i + 1] > start[rows], the starts non-monotone
   later) was read out of bounds while it was validated (ASan:
   heap-buffer-overflow in pbd_up__sparse_prepare). The forgery keeps the
   subdivision model's triangles and replaces its matrix by one of two
   entries: row 0 = {col 0}, row 1 = {col 1, and one past the array}, the
   other rows end at 2, before row 1 does. */
TEST(fuzz_model_row_past_the_columns) {
    pbd_up_model *m = NULL, *out = NULL;
    size_t size = 0;
    unsigned char *buf = fzt_saved_model(&m, &size);
    CHECK(buf != NULL);
    if (!buf) return;
    /* payload: levels, rows, cols, start[rows + 1], col[nnz], val[nnz],
       then the triangles and the detail flag (the tail, kept) */
    const size_t header = 40, start_at = header + 12;
    int rows, nnz;
    memcpy(&rows, buf + header + 4, 4);
    CHECK(rows == pbd_up_model_detail_count(m) && rows >= 4);
    memcpy(&nnz, buf + start_at + 4 * (size_t)rows, 4);
    size_t tail_at = start_at + 4 * ((size_t)rows + 1) + 8 * (size_t)nnz, tail = size - 8 - tail_at;
    size_t fsize = start_at + 4 * ((size_t)rows + 1) + 16 + tail + 8;
    unsigned char *f = (unsigned char *)malloc(fsize);
    memcpy(f, buf, start_at);
    uint64_t payload = (uint64_t)(fsize - header - 8);
    memcpy(f + 32, &payload, 8);
    for (int i = 0; i <= rows; ++i) {
        int st = i == 0 ? 0 : i == 1 ? 1 : i == 2 ? 3 : 2;
        memcpy(f + start_at + 4 * (size_t)i, &st, 4);
    }
    int cols[2] = {0, 1};
    float vals[2] = {1, 1};
    memcpy(f + start_at + 4 * ((size_t)rows + 1), cols, 8);
    memcpy(f + start_at + 4 * ((size_t)rows + 1) + 8, vals, 8);
    memcpy(f + start_at + 4 * ((size_t)rows + 1) + 16, buf + tail_at, tail);
    fzt_reseal(f, fsize);
    CHECK_RESULT(pbd_up_model_load(f, fsize, &out), PBD_ERROR_BAD_SNAPSHOT);
    CHECK(out == NULL);
    free(f);
    free(buf);
    pbd_up_model_destroy(m);
}

/* fuzz_builders: pbd_sm_voxelize with a spacing so fine that the
   bounding box holds more cells than an int counts (a 1 m sphere at
   0.1 mm: 10^12) scanned its 10^8 rows for hours (a libFuzzer timeout). It
   is refused as an overflow at once. */
TEST(fuzz_voxelize_box_beyond_int) {
    pbd_mesh m;
    float c[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_sphere(1, c, 0.5f, &m));
    float origin[3];
    int count = -1;
    CHECK_RESULT(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 1e-4f, origin, NULL, 0, &count),
        PBD_ERROR_OVERFLOW);
    CHECK(count == -1);
    /* the same mesh at a sane spacing still voxelises */
    CHECK_OK(
        pbd_sm_voxelize(m.positions, m.vertex_count, m.triangles, m.triangle_count, 0.1f, origin, NULL, 0, &count));
    CHECK(count > 0);
    pbd_mesh_free(&m);
}

/* fuzz_restore: a snapshot whose distance constraint has a negative rest
   length (-4e17, a shuffled float) was restored, and the first step blew
   the balloon up to NaN (UBSan: NaN converted to a grid index). Restore
   refuses the rest values pbd_add_constraints refuses. */
TEST(fuzz_restore_negative_rest_length) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    if (!w) return;
    float xyz[6] = {0, 1, 0, 0, 1.625f, 0}; /* 0.625 m apart, exactly */
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = xyz;
    pd.count = 2;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    int pair[2] = {r.first, r.first + 1};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = pair;
    CHECK_OK(pbd_add_constraints(w, &cd, NULL));
    size_t n = pbd_world_snapshot_size(w);
    unsigned char *snap = (unsigned char *)malloc(n), *after = (unsigned char *)malloc(n);
    CHECK_OK(pbd_world_save(w, snap, n));
    /* the rest length is the only 0.625f of the snapshot */
    float half = 0.625f, bad = -4.27e17f;
    size_t at = 0;
    int found = 0;
    for (size_t i = 0; i + 4 <= n - 8; ++i)
        if (!memcmp(snap + i, &half, 4)) {
            at = i;
            ++found;
        }
    CHECK(found == 1);
    memcpy(snap + at, &bad, 4);
    fzt_reseal(snap, n);
    CHECK_RESULT(pbd_world_restore(w, snap, n), PBD_ERROR_BAD_SNAPSHOT);
    /* the API refuses the same value */
    cd.rest = &bad;
    CHECK_RESULT(pbd_add_constraints(w, &cd, NULL), PBD_ERROR_INVALID_ARGUMENT);
    memcpy(snap + at, &half, 4);
    fzt_reseal(snap, n);
    CHECK_OK(pbd_world_restore(w, snap, n)); /* the genuine snapshot still restores */
    CHECK_OK(pbd_world_save(w, after, n));
    CHECK(memcmp(snap, after, n) == 0);
    free(snap);
    free(after);
    pbd_world_destroy(w);
}

void suite_fuzz(void) {
    RUN(checksums_are_fnv1a_and_old_buffers_still_read);
    RUN(training_load_names_what_is_wrong);
    RUN(fuzz_restore_group_count_beyond_the_bytes);
    RUN(fuzz_model_row_past_the_columns);
    RUN(fuzz_voxelize_box_beyond_int);
    RUN(fuzz_restore_negative_rest_length);
}
