/* tests/test_sm_snapshot.c - pbd_sm.h's states in the world's snapshots
   (SNAPSHOTS in pbd_sm.h's manual; pbd.h, PLUGIN STATE IN SNAPSHOTS): a
   world with an oriented-particle plant, a plastic lattice jelly, a rigid
   box, a multi-resolution cloth and a surface volume is stepped, saved
   and stepped on; restored into the same world and into a world rebuilt
   the same way, it goes on with the same bits, getters included, and its
   snapshot after the restore is the saved one. Forged states (a NaN, a
   collapsed plastic state, a parameter out of range, another kind's
   state, cut or padded states) and target worlds whose plugins differ (one
   missing, one extra, two in another order) are refused with
   PBD_ERROR_BAD_SNAPSHOT and a message naming the plugin, and change
   nothing; a snapshot of version 7 (no plugin states) still restores. */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include <stdint.h>
#include <stdlib.h>

#define DT (1.0f / 60.0f)

typedef struct things {
    pbd_sm_oriented plant;
    pbd_sm_body jelly, box;
    pbd_sm_cloth cloth;
    pbd_sm_volume volume;
} things;

enum { PLANT = 12, SAVE_AT = 30, GO_ON = 20 };

/* A plant of ellipsoids on a pinned root: a stem bent sideways and a branch. */
static pbd_sm_oriented add_plant(pbd_world *w) {
    float pos[3 * PLANT], radii[3 * PLANT];
    int edges[2 * PLANT], ne = 0;
    for (int i = 0; i < PLANT; ++i) {
        int from = i == 9 ? 3 : i - 1; /* 9..11: a branch from particle 3 */
        pos[3 * i] = i < 9 ? 0.05f * (float)i : pos[3 * from] + 0.03f;
        pos[3 * i + 1] = i < 9 ? 0.6f + 0.04f * (float)i : pos[3 * from + 1] + 0.02f;
        pos[3 * i + 2] = i < 9 ? 0.003f * (float)(i * i) : pos[3 * from + 2] + 0.05f;
        if (i > 0) edges[2 * ne] = from, edges[2 * ne + 1] = i, ne++;
        radii[3 * i] = 0.04f, radii[3 * i + 1] = 0.02f, radii[3 * i + 2] = 0.015f;
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = PLANT;
    pd.mass = 0.1f;
    pd.radius = 0.015f;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_particle_pin(w, r.first));
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = r;
    od.edges = edges;
    od.edge_count = ne;
    od.radii = radii;
    od.stiffness = 0.7f;
    pbd_sm_oriented o = {0};
    CHECK_OK(pbd_sm_add_oriented(w, &od, &o));
    return o;
}

/* A plastic jelly (a lattice, linear, creeping above 1% strain) dropped
   onto a sphere. */
static pbd_sm_body add_jelly(pbd_world *w) {
    int cells[3 * 4 * 4 * 4];
    pbd_sm_lattice_box(4, 4, 4, cells);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 64;
    ld.spacing = 0.05f;
    ld.origin[0] = -0.45f;
    ld.origin[1] = 0.4f;
    ld.origin[2] = -0.1f;
    ld.body.mode = PBD_SM_LINEAR;
    ld.body.beta = 0.3f;
    ld.body.stiffness = 0.6f;
    ld.body.yield = 0.01f;
    ld.body.creep = 5.0f;
    pbd_sm_body b = {0};
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, NULL));
    return b;
}

/* A rigid box of 2 x 2 x 3 particles, tilted, dropped onto the ground. */
static pbd_sm_body add_box(pbd_world *w) {
    float x[3 * 12];
    for (int i = 0; i < 12; ++i) {
        x[3 * i] = 0.3f + 0.06f * (float)(i % 2) + 0.01f * (float)(i / 4);
        x[3 * i + 1] = 0.25f + 0.06f * (float)(i / 2 % 2) + 0.02f * (float)(i % 2);
        x[3 * i + 2] = -0.3f + 0.06f * (float)(i / 4);
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = 12;
    pd.radius = 0.02f;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    int idx[12];
    for (int i = 0; i < 12; ++i) idx[i] = r.first + i;
    pbd_sm_body_desc bd = pbd_sm_body_desc_default();
    bd.particles = idx;
    bd.particle_count = 12;
    pbd_sm_body b = {0};
    CHECK_OK(pbd_sm_add_body(w, &bd, &b));
    return b;
}

/* A 10 x 10 cloth of 3 levels pinned at two corners, over the sphere. */
static pbd_sm_cloth add_cloth(pbd_world *w) {
    float o[3] = {-0.2f, 0.75f, -0.2f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(10, 10, o, u, v, &m));
    int keep[2] = {0, 9};
    pbd_sm_cloth_desc d = pbd_sm_cloth_desc_default();
    d.positions = m.positions;
    d.vertex_count = m.vertex_count;
    d.triangles = m.triangles;
    d.triangle_count = m.triangle_count;
    d.levels = 3;
    d.keep_vertices = keep;
    d.keep_count = 2;
    d.bending_stiffness = 1e-3f;
    pbd_sm_cloth c = {0};
    pbd_range r = {0, 0};
    CHECK_OK(pbd_sm_add_cloth(w, &d, &c, &r));
    CHECK_OK(pbd_particle_pin(w, r.first));
    CHECK_OK(pbd_particle_pin(w, r.first + 9));
    pbd_mesh_free(&m);
    return c;
}

/* A closed skin whose volume is kept, falling onto the ground. */
static pbd_sm_volume add_volume(pbd_world *w) {
    pbd_mesh m;
    float c[3] = {0.4f, 0.35f, 0.35f};
    pbdt_skin(w, 1, c, 0.12f, &m);
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    vd.alpha = 0.5f;
    pbd_sm_volume v = {0};
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    pbd_mesh_free(&m);
    return v;
}

static void build(pbd_world *w, things *t) {
    float p[3] = {0, 0, 0}, n[3] = {0, 1, 0}, c[3] = {-0.35f, 0.15f, 0};
    CHECK_OK(pbd_add_collider_plane(w, p, n, 0.4f, NULL));
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.15f, 0.5f, NULL));
    t->plant = add_plant(w);
    t->jelly = add_jelly(w);
    t->box = add_box(w);
    t->cloth = add_cloth(w);
    t->volume = add_volume(w);
}

static pbd_world *built(things *t) {
    pbd_world *w = pbdt_world(-9.81f);
    if (w) build(w, t);
    return w;
}

/* What the user does before step k: setters, whose values the states hold. */
static void frame(pbd_world *w, const things *t, int k) {
    if (k == 5) {
        CHECK_OK(pbd_sm_body_set_stiffness(w, t->jelly, 0.5f));
        CHECK_OK(pbd_sm_cloth_set_damping(w, t->cloth, 0.1f));
        CHECK_OK(pbd_sm_volume_set_alpha(w, t->volume, 0.8f));
        CHECK_OK(pbd_sm_volume_set_rest(w, t->volume, 0.006));
    }
    if (k == 12) {
        float q[4] = {0, 0.3826834f, 0, 0.9238795f}, om[3] = {0, 0, 8};
        CHECK_OK(pbd_sm_oriented_set_state(w, t->plant, 10, q, om));
    }
}

static void run(pbd_world *w, const things *t, int from, int to) {
    for (int k = from; k < to; ++k) {
        frame(w, t, k);
        CHECK_OK(pbd_world_step(w, DT));
    }
}

/* Everything a world and its plugins show, hashed part by part (FNV-1a):
   particles, bodies (rotations, plastic states), the plant (orientations,
   angular velocities), the volume's weights, the cloth's coarse levels. */
enum { PARTS = 5 };
static const char *const part_names[PARTS] = {"particles", "bodies", "oriented set", "volume", "cloth levels"};
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}
static void fingerprint(pbd_world *w, const things *t, uint64_t *h) {
    for (int k = 0; k < PARTS; ++k) h[k] = 1469598103934665603ull;
    int n = pbd_world_particle_count(w);
    h[0] = fnv(h[0], pbd_world_positions(w), sizeof(float) * 4 * (size_t)n);
    h[0] = fnv(h[0], pbd_world_velocities(w), sizeof(float) * 4 * (size_t)n);
    pbd_sm_body bodies[2] = {t->jelly, t->box};
    for (int b = 0; b < 2; ++b) {
        int nr = 0;
        CHECK_OK(pbd_sm_body_region_count(w, bodies[b], &nr));
        for (int r = 0; r < nr; ++r) {
            float q[4], S[9];
            CHECK_OK(pbd_sm_body_rotation(w, bodies[b], r, q));
            CHECK_OK(pbd_sm_body_plastic_state(w, bodies[b], r, S));
            h[1] = fnv(fnv(h[1], q, sizeof q), S, sizeof S);
        }
    }
    for (int i = 0; i < PLANT; ++i) {
        float q[4], om[3];
        CHECK_OK(pbd_sm_oriented_get_state(w, t->plant, i, q, om));
        h[2] = fnv(fnv(h[2], q, sizeof q), om, sizeof om);
    }
    float wt[256];
    int nw = 0;
    double rest = 0;
    CHECK_OK(pbd_sm_volume_weights(w, t->volume, wt, 256, &nw));
    CHECK_OK(pbd_sm_volume_get_rest(w, t->volume, &rest));
    h[3] = fnv(fnv(h[3], wt, sizeof(float) * (size_t)(nw < 256 ? nw : 256)), &rest, sizeof rest);
    int levels = 0;
    CHECK_OK(pbd_sm_cloth_level_count(w, t->cloth, &levels));
    for (int l = 0; l < levels - 1; ++l) { /* the coarse ones (the finest is the world's particles) */
        int nv = 0, nt = 0;
        const int *tri = NULL;
        const float *x = NULL;
        CHECK_OK(pbd_sm_cloth_level(w, t->cloth, l, &nv, &nt, &tri, &x));
        if (x) h[4] = fnv(h[4], x, sizeof(float) * 4 * (size_t)nv);
    }
}
static void check_same(const char *what, const uint64_t *got, const uint64_t *want) {
    for (int k = 0; k < PARTS; ++k)
        CHECK_MSG(got[k] == want[k], "%s: the %s differ from the reference's", what, part_names[k]);
}

/* The saved snapshot, the reference (SAVE_AT + GO_ON steps in one run),
   and the world at SAVE_AT. */
typedef struct saved {
    things t;
    pbd_world *w;
    unsigned char *snap;
    size_t size;
    uint64_t at_save[PARTS], ref[PARTS];
} saved;
static int save_mid_run(saved *s) {
    memset(s, 0, sizeof *s);
    s->w = built(&s->t);
    if (!s->w) return 0;
    run(s->w, &s->t, 0, SAVE_AT);
    s->snap = pbdt_save(s->w, &s->size);
    CHECK(s->size > 0);
    fingerprint(s->w, &s->t, s->at_save);
    run(s->w, &s->t, SAVE_AT, SAVE_AT + GO_ON);
    fingerprint(s->w, &s->t, s->ref);
    return s->size > 0;
}
static void saved_free(saved *s) {
    free(s->snap);
    pbd_world_destroy(s->w);
}

/* The snapshot of w is s's, byte for byte. */
static void check_snapshot_is(pbd_world *w, const saved *s, const char *what) {
    size_t n = 0;
    unsigned char *b = pbdt_save(w, &n);
    CHECK_MSG(n == s->size && memcmp(b, s->snap, n) == 0, "%s: the world's snapshot is not the one restored", what);
    free(b);
}

TEST(sm_snapshot_restores_every_kinds_state_bit_for_bit) {
    saved s;
    if (!save_mid_run(&s)) return;
    /* the scene has state worth saving: plastic flow, spin */
    float S[9], q[4], om[3];
    CHECK_OK(pbd_sm_body_plastic_state(s.w, s.t.jelly, 0, S));
    CHECK_MSG(fabsf(S[0] - 1) + fabsf(S[1]) + fabsf(S[4] - 1) > 1e-3f, "the jelly did not flow");
    CHECK_OK(pbd_sm_oriented_get_state(s.w, s.t.plant, 10, q, om));
    CHECK_MSG(fabsf(om[0]) + fabsf(om[1]) + fabsf(om[2]) > 0.1f, "the plant does not spin");
    uint64_t h[PARTS];
    /* (a) into the same world, which went on */
    CHECK_OK(pbd_world_restore(s.w, s.snap, s.size));
    fingerprint(s.w, &s.t, h);
    check_same("the same world just after the restore", h, s.at_save);
    check_snapshot_is(s.w, &s, "the same world");
    run(s.w, &s.t, SAVE_AT, SAVE_AT + GO_ON);
    fingerprint(s.w, &s.t, h);
    check_same("the same world, stepped on", h, s.ref);
    /* (b) into a world rebuilt the same way (a saved game): no setter ran there */
    things t;
    pbd_world *b = built(&t);
    if (b) {
        CHECK_OK(pbd_world_restore(b, s.snap, s.size));
        check_snapshot_is(b, &s, "a rebuilt world");
        run(b, &t, SAVE_AT, SAVE_AT + GO_ON);
        fingerprint(b, &t, h);
        check_same("a rebuilt world, stepped on", h, s.ref);
        pbd_world_destroy(b);
    }
    saved_free(&s);
}

/* A byte string's first place in a buffer, or -1. */
static long find(const unsigned char *b, size_t n, const char *str) {
    size_t k = strlen(str);
    for (size_t i = 0; i + k <= n; ++i)
        if (memcmp(b + i, str, k) == 0) return (long)i;
    return -1;
}
static void reseal(unsigned char *b, size_t n) {
    uint64_t sum = fnv(1469598103934665603ull, b, n - 8);
    memcpy(b + n - 8, &sum, 8);
}
/* The head of a plugin's state in a snapshot: its name at `at`, then its
   place (int), its size (64 bits) and its bytes. */
#define STATE_BYTES(at) ((at) + 32 + 4 + 8)

/* Restoring bytes b (n) into w fails with PBD_ERROR_BAD_SNAPSHOT, a
   message that names needle, and changes nothing. */
static void check_refused(pbd_world *w, const unsigned char *b, size_t n, const char *needle, const char *what) {
    size_t n0 = 0, n1 = 0;
    unsigned char *before = pbdt_save(w, &n0);
    pbd_result r = pbd_world_restore(w, b, n);
    CHECK_MSG(r == PBD_ERROR_BAD_SNAPSHOT, "%s: restore returned %s", what, pbd_result_string(r));
    CHECK_MSG(!needle || strstr(pbd_world_last_error(w), needle), "%s: the message \"%s\" does not name \"%s\"", what,
              pbd_world_last_error(w), needle);
    if (getenv("PBDT_PRINT_ERRORS")) printf("PBDT_MSG %s: %s\n", what, pbd_world_last_error(w));
    unsigned char *after = pbdt_save(w, &n1);
    CHECK_MSG(n0 == n1 && memcmp(before, after, n0) == 0, "%s: the world changed", what);
    free(before);
    free(after);
}

/* A copy of s's snapshot with the plugin state named `name` edited: `at`
   bytes into the state, `len` bytes replaced by `with` (NULL: removed),
   `add` bytes inserted; the state's size and the checksum follow. */
static unsigned char *forged(const saved *s, const char *name, size_t at, const void *with, size_t len, size_t add,
                             size_t *n) {
    long h = find(s->snap, s->size, name);
    CHECK(h > 0);
    *n = s->size - (with ? 0 : len) + add;
    unsigned char *b = (unsigned char *)calloc(*n, 1);
    if (h <= 0) return b;
    size_t off = STATE_BYTES((size_t)h) + at;
    memcpy(b, s->snap, off);
    if (with) memcpy(b + off, with, len);
    size_t rest = off + len; /* what follows the edit in the original */
    memcpy(b + off + (with ? len : 0) + add, s->snap + rest, s->size - rest);
    uint64_t size;
    memcpy(&size, b + h + 36, 8);
    size = size - (with ? 0 : len) + add;
    memcpy(b + h + 36, &size, 8);
    reseal(b, *n);
    return b;
}

#define BODY "pbd_sm shape-matching body"
#define ORIENTED "pbd_sm oriented particle set"
#define VOLUME "pbd_sm surface volume"
#define CLOTH "pbd_sm multi-resolution cloth"

TEST(sm_snapshot_forged_states_are_refused_and_change_nothing) {
    saved s;
    if (!save_mid_run(&s)) return;
    things t;
    pbd_world *b = built(&t);
    int nr = 0;
    CHECK_OK(pbd_sm_body_region_count(s.w, s.t.jelly, &nr));
    /* the jelly's state: tag, version, 3 counts, first particle and hash (pbd_sm__io_built), 5 doubles,
       2 ints, rotations, plastic states */
    size_t sp = 4 + 4 + 12 + 8 + 40 + 8 + 32 * (size_t)nr;
    double nan = NAN, zero9[9] = {0}, two = 2.0;
    uint32_t oriented_tag = 0x4f736d70u;
    int more = nr + 1;
    double zero4[4] = {0, 0, 0, 0}, negative = -1.0;
    int scheme = 7;
    struct {
        const char *name;
        size_t at;
        const void *with;
        size_t len, add;
        const char *needle, *what;
    } cases[] = {
        {BODY, sp + 8 * 4, &nan, 8, 0, "plastic state[4] is nan", "a NaN in a plastic state"},
        {BODY, sp, zero9, sizeof zero9, 0, "determinant", "a collapsed plastic state"},
        {BODY, 28, &two, 8, 0, "stiffness", "a stiffness of 2"},
        {BODY, 0, &oriented_tag, 4, 0, "oriented particle set", "an oriented set's tag on a body's state"},
        {BODY, 12, &more, 4, 0, "region count", "another region count"},
        {BODY, sp + 72 * (size_t)nr - 8, NULL, 8, 0, "cut short", "a body's state 8 bytes short"},
        {BODY, sp + 72 * (size_t)nr, NULL, 0, 8, "are expected", "a body's state 8 bytes long"},
        {ORIENTED, 20, zero4, sizeof zero4, 0, "squared norm", "a zero orientation"},
        {VOLUME, 24, &negative, 8, 0, "rest volume", "a negative rest volume"},
        {CLOTH, 4 + 4 + 20 + 16 + 4, &scheme, 4, 0, "scheme 7", "a cloth scheme 7"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        size_t n = 0;
        unsigned char *f = forged(&s, cases[k].name, cases[k].at, cases[k].with, cases[k].len, cases[k].add, &n);
        check_refused(s.w, f, n, cases[k].needle, cases[k].what);
        if (b) check_refused(b, f, n, cases[k].name, cases[k].what); /* the message names the plugin */
        free(f);
    }
    /* pbd.h's layout of the states: a wrong place, a size beyond the
       bytes, another name, the count of states, the snapshot cut short */
    unsigned char *f = (unsigned char *)malloc(s.size);
    long h = find(s.snap, s.size, VOLUME);
    struct {
        long at;
        unsigned char v;
        const char *needle, *what;
    } heads[] = {{h + 32, 9, NULL, "a state's place"},
                 {h + 36 + 5, 1, NULL, "a state's size beyond the bytes"},
                 {h + 12, 'X', "'pbd_sm surfaXe volume'", "another plugin's name"},
                 {find(s.snap, s.size, ORIENTED) - 4, 4, NULL, "the number of states"}};
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; ++k) {
        memcpy(f, s.snap, s.size);
        f[heads[k].at] = heads[k].v;
        reseal(f, s.size);
        check_refused(s.w, f, s.size, heads[k].needle, heads[k].what);
    }
    memcpy(f, s.snap, s.size);
    reseal(f, s.size - 20);
    check_refused(s.w, f, s.size - 20, NULL, "the snapshot cut in the volume's state");
    free(f);
    /* the states still restore after all that */
    CHECK_OK(pbd_world_restore(s.w, s.snap, s.size));
    check_snapshot_is(s.w, &s, "after the refusals");
    pbd_world_destroy(b);
    saved_free(&s);
}

/* Target worlds whose plugins do not match the snapshot's. */
TEST(sm_snapshot_other_plugins_are_refused_and_change_nothing) {
    saved s;
    if (!save_mid_run(&s)) return;
    things t;
    /* the cloth missing (removed: its particles stay) */
    pbd_world *w = built(&t);
    if (w) {
        CHECK_OK(pbd_sm_remove_cloth(w, t.cloth));
        check_refused(w, s.snap, s.size, "'" CLOTH "'", "the cloth missing");
        pbd_world_destroy(w);
    }
    /* one more body */
    w = built(&t);
    if (w) {
        pbd_sm_body_desc bd = pbd_sm_body_desc_default();
        int idx[4] = {20, 21, 22, 23};
        bd.particles = idx;
        bd.particle_count = 4;
        CHECK_OK(pbd_sm_add_body(w, &bd, NULL));
        check_refused(w, s.snap, s.size, "'" BODY "', has none in it", "an extra body");
        pbd_world_destroy(w);
    }
    /* the jelly and the box added in the other order: same names, each
       refuses the other's state */
    w = pbdt_world(-9.81f);
    if (w) {
        float p[3] = {0, 0, 0}, n[3] = {0, 1, 0}, c[3] = {-0.35f, 0.15f, 0};
        CHECK_OK(pbd_add_collider_plane(w, p, n, 0.4f, NULL));
        CHECK_OK(pbd_add_collider_sphere(w, c, 0.15f, 0.5f, NULL));
        t.plant = add_plant(w);
        t.box = add_box(w);
        t.jelly = add_jelly(w);
        t.cloth = add_cloth(w);
        t.volume = add_volume(w);
        check_refused(w, s.snap, s.size, "particle count", "the bodies in the other order");
        pbd_world_destroy(w);
    }
    /* a plugin without a state is not matched: the restore goes on */
    w = built(&t);
    if (w) {
        pbd_plugin_desc d = pbd_plugin_desc_default();
        d.name = "no state";
        CHECK_OK(pbd_add_plugin(w, &d, NULL));
        CHECK_OK(pbd_world_restore(w, s.snap, s.size));
        check_snapshot_is(w, &s, "a world with a stateless plugin more");
        pbd_world_destroy(w);
    }
    saved_free(&s);
}

/* A world built in another order, its plugins of the same counts (an
   audit: pbd.h's cloth and a lattice swapped restored with PBD_OK, and the
   lattice's body then matched cloth particles to its cube and flung the
   cloth 80 m in 2 s): refused, the body lies on other particles; two
   bodies of the same counts and particles but other rest shapes swapped:
   refused too. */
static void cloth_then_lattice(pbd_world *w, int lattice_first, float spacing, float spacing2) {
    float o[3] = {-0.3f, 0.6f, -0.3f}, u[3] = {0.6f, 0, 0}, v[3] = {0, 0, 0.6f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(8, 8, o, u, v, &m));
    int cells[3 * 8];
    pbd_sm_lattice_box(2, 2, 2, cells);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 8;
    ld.origin[1] = 1.0f;
    for (int k = 0; k < 3; ++k) {
        int lattice = lattice_first ? k == 0 : k == 1;
        if (k == 2) { /* a second lattice of the same counts */
            ld.spacing = spacing2;
            ld.origin[0] = 0.5f;
            CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, NULL));
        } else if (lattice) {
            ld.spacing = spacing;
            CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, NULL));
        } else {
            pbd_cloth_desc cd = pbdt_cloth_desc(&m);
            CHECK_OK(pbd_add_cloth(w, &cd, NULL));
        }
    }
    pbd_mesh_free(&m);
}
TEST(sm_snapshot_a_world_built_in_another_order_is_refused) {
    pbd_world *a = pbdt_world(-9.81f), *d = pbdt_world(-9.81f), *e = pbdt_world(-9.81f);
    if (!a || !d || !e) return;
    cloth_then_lattice(a, 0, 0.1f, 0.15f);
    cloth_then_lattice(d, 1, 0.1f, 0.15f);
    cloth_then_lattice(e, 0, 0.15f, 0.1f);
    for (int k = 0; k < 10; ++k) CHECK_OK(pbd_world_step(a, 1.0f / 60));
    size_t n = 0;
    unsigned char *snap = pbdt_save(a, &n);
    check_refused(d, snap, n, "starts at particle 64, this one at 0", "the cloth and a lattice swapped");
    check_refused(e, snap, n, "another rest shape: the world was built otherwise",
                  "two lattices of the same counts swapped");
    pbd_world *same = pbdt_world(-9.81f);
    cloth_then_lattice(same, 0, 0.1f, 0.15f);
    CHECK_OK(pbd_world_restore(same, snap, n)); /* the same order restores */
    free(snap);
    pbd_world_destroy(same);
    pbd_world_destroy(a);
    pbd_world_destroy(d);
    pbd_world_destroy(e);
}

/* A snapshot of version 7 has no plugin state: it restores, and the
   plugins keep theirs (as before version 8). */
TEST(sm_snapshot_version_7_restores_and_keeps_the_plugins_state) {
    saved s;
    if (!save_mid_run(&s)) return;
    long at = find(s.snap, s.size, ORIENTED) - 4; /* the plugin states: the plant's first */
    CHECK(at > 0);
    if (at > 0) {
        size_t n = (size_t)at + 8;
        unsigned char *old = (unsigned char *)malloc(n);
        memcpy(old, s.snap, (size_t)at);
        unsigned version = 7;
        memcpy(old + 4, &version, 4);
        reseal(old, n);
        uint64_t before[PARTS], after[PARTS];
        fingerprint(s.w, &s.t, before);
        CHECK_OK(pbd_world_restore(s.w, old, n));
        fingerprint(s.w, &s.t, after);
        CHECK_MSG(after[0] == s.at_save[0], "the particles are not the snapshot's");
        for (int k = 1; k < PARTS; ++k) CHECK_MSG(after[k] == before[k], "the %s changed", part_names[k]);
        version = 6;
        memcpy(old + 4, &version, 4);
        reseal(old, n);
        check_refused(s.w, old, n, NULL, "version 6");
        free(old);
    }
    saved_free(&s);
}

void suite_sm_snapshot(void) {
    RUN(sm_snapshot_restores_every_kinds_state_bit_for_bit);
    RUN(sm_snapshot_forged_states_are_refused_and_change_nothing);
    RUN(sm_snapshot_other_plugins_are_refused_and_change_nothing);
    RUN(sm_snapshot_version_7_restores_and_keeps_the_plugins_state);
    RUN(sm_snapshot_a_world_built_in_another_order_is_refused);
}
