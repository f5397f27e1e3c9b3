/* fuzz_restore.c - pbd_world_restore from arbitrary bytes.

   Input: one byte choosing the target world (0: empty; bit 1: 8
   particles under a pbd_sm.h shape-matching body, a plugin whose
   particles the snapshot must keep and whose state (rotations, plastic
   states) a version 8 snapshot holds; bit 2: an oriented particle set on
   those particles too, whose state follows the body's), then a snapshot
   body. The harness appends the
   FNV-1a checksum, so that the fuzzer reaches the parser and the
   validation behind the checksum; the raw bytes are also tried as they
   are. Checks: no memory error or undefined behaviour; a refused snapshot
   leaves the world byte-identical; a restored world saves, restores
   again, and steps. */
#include "pbd.h"
#include "pbd_sm.h"
#include "fuzz.h"
#include "scenes.h"

static pbd_world *fz_target(unsigned kind) {
    pbd_world_desc wd = pbd_world_desc_default();
    pbd_world *w = NULL;
    FZ_CHECK(pbd_world_create(&wd, &w) == PBD_OK, "create");
    if (kind & 3) {
        float xyz[3 * 8];
        for (int i = 0; i < 8; ++i) {
            xyz[3 * i] = 0.1f * (float)(i & 1);
            xyz[3 * i + 1] = 0.5f + 0.1f * (float)(i >> 1 & 1);
            xyz[3 * i + 2] = 0.1f * (float)(i >> 2);
        }
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = xyz;
        pd.count = 8;
        pbd_range r;
        FZ_CHECK(pbd_add_particles(w, &pd, &r) == PBD_OK, "particles");
        int ids[8];
        for (int i = 0; i < 8; ++i) ids[i] = r.first + i;
        pbd_sm_body_desc bd = pbd_sm_body_desc_default();
        bd.particles = ids;
        bd.particle_count = 8;
        bd.creep = 1.0f; /* plastic: its plastic states are in the snapshot */
        FZ_CHECK(pbd_sm_add_body(w, &bd, NULL) == PBD_OK, "sm body");
    }
    if (kind & 2) {
        int edges[14];
        for (int i = 0; i < 7; ++i) edges[2 * i] = i, edges[2 * i + 1] = i + 1;
        pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
        od.particles.first = 0;
        od.particles.count = 8;
        od.edges = edges;
        od.edge_count = 7;
        FZ_CHECK(pbd_sm_add_oriented(w, &od, NULL) == PBD_OK, "sm oriented");
    }
    return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    pbd_world *w = fz_target(data[0]);
    fz_snap before = fz_save(w);
    size_t body = size - 1;
    /* as they are: almost always a checksum mismatch */
    if (pbd_world_restore(w, data + 1, body) != PBD_OK)
        FZ_CHECK(fz_same(w, before), "a refused snapshot changed the world");
    unsigned char *buf = (unsigned char *)malloc(body + 8);
    if (body) memcpy(buf, data + 1, body);
    uint64_t sum = fz_fnv1a(buf, body);
    memcpy(buf + body, &sum, 8);
    pbd_result r = pbd_world_restore(w, buf, body + 8);
    if (r != PBD_OK) {
        FZ_CHECK(fz_same(w, before), "a refused snapshot (%s) changed the world", pbd_world_last_error(w));
    } else {
        /* what was restored is a valid world: it saves and restores again */
        fz_snap again = fz_save(w);
        FZ_CHECK(pbd_world_restore(w, again.d, again.n) == PBD_OK, "a restored world's snapshot was refused: %s",
                 pbd_world_last_error(w));
        FZ_CHECK(fz_same(w, again), "save/restore/save not identical");
        free(again.d);
        /* and steps; blow-ups of valid but wild states are the step's
           robustness (pbd_world_step's own checks), not restore's */
        for (int s = 0; s < 2 && fz_world_sane(w, 1e3f); ++s) pbd_world_step(w, 1.0f / 60.0f);
    }
    free(buf);
    free(before.d);
    pbd_world_destroy(w);
    return 0;
}

#ifdef PBD_FUZZ_REPLAY
static void fuzz_seeds(const char *dir) {
    for (int k = 0; k < FZ_SCENE_COUNT; ++k) {
        pbd_world *w = fz_scene(k);
        FZ_CHECK(w != NULL, "scene %d", k);
        fz_snap s = fz_save(w);
        unsigned char *d = (unsigned char *)malloc(s.n);
        d[0] = 0;
        memcpy(d + 1, s.d, s.n - 8); /* the body; the harness appends the checksum */
        char name[64];
        snprintf(name, sizeof name, "scene%d", k);
        fz_write(dir, name, d, s.n - 7);
        free(d);
        free(s.d);
        pbd_world_destroy(w);
    }
    /* worlds the sm plugins' targets accept, with their states (stepped:
       the rotations turned, the body flowed) */
    for (unsigned kind = 1; kind <= 3; kind += 2) {
        pbd_world *w = fz_target(kind);
        for (int k = 0; k < 20; ++k) pbd_world_step(w, 1.0f / 60.0f);
        fz_snap s = fz_save(w);
        unsigned char *d = (unsigned char *)malloc(s.n);
        d[0] = (unsigned char)kind;
        memcpy(d + 1, s.d, s.n - 8);
        fz_write(dir, kind == 1 ? "plugin" : "plugins", d, s.n - 7);
        free(d);
        free(s.d);
        pbd_world_destroy(w);
    }
}
#endif
