/* fuzz_model.c - pbd_upsample.h's loaders from arbitrary bytes:
   pbd_up_model_load (byte 0 even) and pbd_up_training_load (odd).

   For models the harness writes the header's payload size and appends the
   checksum, so that the fuzzer reaches the method's parser and the
   validation of what it read; for training sets it appends the checksum.
   The raw bytes are also tried as they are. Checks: no memory error or
   undefined behaviour; a loaded model evaluates (with checked sizes),
   saves and loads again to the same bytes; a loaded training set saves
   and loads again. */
#include "pbd.h"
#include "pbd_upsample.h"
#include "fuzz.h"

enum { FZ_HEADER = 40, FZ_PAYLOAD_AT = 32 };

static void fz_model(const uint8_t *d, size_t n) {
    pbd_up_model *m = NULL;
    if (pbd_up_model_load(d, n, &m) == PBD_OK) pbd_up_model_destroy(m);
    m = NULL;
    unsigned char *buf = (unsigned char *)malloc(n + 8);
    if (n) memcpy(buf, d, n);
    if (n >= FZ_HEADER) {
        uint64_t payload = (uint64_t)(n - FZ_HEADER);
        memcpy(buf + FZ_PAYLOAD_AT, &payload, 8);
    }
    uint64_t sum = fz_fnv1a(buf, n);
    memcpy(buf + n, &sum, 8);
    if (pbd_up_model_load(buf, n + 8, &m) == PBD_OK) {
        int nc = pbd_up_model_coarse_count(m), nd = pbd_up_model_detail_count(m);
        FZ_CHECK(nc > 0 && nd > 0, "a loaded model has %d coarse, %d detail vertices", nc, nd);
        if (nc <= 100000 && nd <= 1000000) {
            float *coarse = (float *)malloc(sizeof(float) * 3 * (size_t)nc);
            float *detail = (float *)malloc(sizeof(float) * 3 * (size_t)nd);
            for (int i = 0; i < 3 * nc; ++i) coarse[i] = 0.01f * (float)(i % 97);
            pbd_up_model_eval_checked(m, coarse, nc, detail, nd);
            if (pbd_up_model_method(m) == PBD_UP_PIU) pbd_up_piu_advance(m, coarse, 1.0f / 60.0f);
            free(coarse);
            free(detail);
        }
        size_t need = pbd_up_model_save_size(m);
        FZ_CHECK(need > 0, "a loaded model has no save size");
        unsigned char *again = (unsigned char *)malloc(need);
        FZ_CHECK(pbd_up_model_save(m, again, need) == PBD_OK, "a loaded model does not save");
        pbd_up_model *m2 = NULL;
        FZ_CHECK(pbd_up_model_load(again, need, &m2) == PBD_OK, "a saved model does not load");
        pbd_up_model_destroy(m2);
        free(again);
        pbd_up_model_destroy(m);
    }
    free(buf);
}

static void fz_training(const uint8_t *d, size_t n) {
    pbd_up_training t;
    memset(&t, 0, sizeof t);
    if (pbd_up_training_load(d, n, &t) == PBD_OK) pbd_up_training_free(&t);
    unsigned char *buf = (unsigned char *)malloc(n + 8);
    if (n) memcpy(buf, d, n);
    uint64_t sum = fz_fnv1a(buf, n);
    memcpy(buf + n, &sum, 8);
    memset(&t, 0, sizeof t);
    if (pbd_up_training_load(buf, n + 8, &t) == PBD_OK) {
        size_t need = pbd_up_training_save_size(&t);
        unsigned char *again = (unsigned char *)malloc(need ? need : 1);
        FZ_CHECK(need > 0 && pbd_up_training_save(&t, again, need) == PBD_OK, "a loaded training set does not save");
        pbd_up_training t2;
        memset(&t2, 0, sizeof t2);
        FZ_CHECK(pbd_up_training_load(again, need, &t2) == PBD_OK, "a saved training set does not load");
        pbd_up_training_free(&t2);
        free(again);
        pbd_up_training_free(&t);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (data[0] & 1) fz_training(data + 1, size - 1);
    else fz_model(data + 1, size - 1);
    return 0;
}

#ifdef PBD_FUZZ_REPLAY
/* A seed: the mode byte, then the file without its checksum. */
static void fz_seed(const char *dir, const char *name, unsigned mode, const unsigned char *file, size_t n) {
    unsigned char *d = (unsigned char *)malloc(n - 7);
    d[0] = (unsigned char)mode;
    memcpy(d + 1, file, n - 8);
    fz_write(dir, name, d, n - 7);
    free(d);
}
static void fz_seed_model(const char *dir, const char *name, const pbd_up_model *m) {
    size_t n = pbd_up_model_save_size(m);
    unsigned char *b = (unsigned char *)malloc(n);
    FZ_CHECK(pbd_up_model_save(m, b, n) == PBD_OK, "save %s", name);
    fz_seed(dir, name, 0, b, n);
    free(b);
}
static void fuzz_seeds(const char *dir) {
    pbd_up_training_desc td = pbd_up_training_desc_default();
    td.coarse_resolution = 3;
    td.frames = 8;
    td.steps_per_frame = 1;
    td.threads = 1;
    pbd_up_training t;
    FZ_CHECK(pbd_up_training_generate(&td, &t) == PBD_OK, "training");
    size_t n = pbd_up_training_save_size(&t);
    unsigned char *b = (unsigned char *)malloc(n);
    FZ_CHECK(pbd_up_training_save(&t, b, n) == PBD_OK, "training save");
    fz_seed(dir, "training", 1, b, n);
    free(b);
    pbd_up_model *sub = NULL, *piu = NULL, *wpsd = NULL, *pdm = NULL;
    FZ_CHECK(pbd_up_subdivision_create(t.coarse_triangles, t.coarse_triangle_count, t.coarse_count, 1, &sub) == PBD_OK,
             "subdivision");
    fz_seed_model(dir, "subdivision", sub);
    pbd_up_piu_desc pd = pbd_up_piu_desc_from(&t, sub);
    pd.support = 4;
    pd.oscillatory_modes = 2;
    pd.frame_dt = 1.0f / 60.0f;
    FZ_CHECK(pbd_up_piu_fit(&pd, &piu) == PBD_OK, "piu");
    fz_seed_model(dir, "piu", piu);
    pbd_up_wpsd_desc wd = pbd_up_wpsd_desc_from(&t, sub);
    wd.max_poses = 3;
    wd.edges_per_vertex = 4;
    FZ_CHECK(pbd_up_wpsd_fit(&wd, &wpsd) == PBD_OK, "wpsd");
    fz_seed_model(dir, "wpsd", wpsd);
    pbd_up_pdm_desc dd = pbd_up_pdm_desc_from(&t, sub);
    if (pbd_up_pdm_fit(&dd, &pdm) == PBD_OK) fz_seed_model(dir, "pdm", pdm);
    else fprintf(stderr, "pdm seed skipped (its fit refused the tiny training set)\n");
    pbd_up_model_destroy(sub);
    pbd_up_model_destroy(piu);
    pbd_up_model_destroy(wpsd);
    pbd_up_model_destroy(pdm);
    pbd_up_training_free(&t);
}
#endif
