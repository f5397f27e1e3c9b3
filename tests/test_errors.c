/* tests/test_errors.c - every bad input gets its error and changes nothing.

   Each bad call runs against a populated world (particles, a cloth, a soft
   body, a balloon, constraint and attachment groups, colliders, a few steps
   taken) and must (1) return the specific pbd_result of the header's table,
   (2) leave the world's snapshot byte-identical (and its counts), (3) put a
   non-empty message in pbd_world_last_error() and (4) call the log callback
   with that result. Where the header leaves two codes equally plausible the
   test accepts either, but never PBD_OK. */
#include "test.h"
#include "check_error.h"
#include <limits.h>
#include <stdlib.h>

static int log_calls = 0;
static pbd_result log_last = PBD_OK;
static void count_log(void *user, pbd_result r, const char *message) {
    (void)user;
    log_calls++;
    log_last = r;
    if (!message || !message[0]) log_last = (pbd_result)1; /* flags an empty message */
}

/* ---- the populated world ----------------------------------------------------- */
/* free particles, offsets into S.free:
   0 (0,2,0) 1 (1,2,0) 2 (0,2,1) 3 (1,2.5,1) pinned (mass 0); 4 (0.5,3,0.5) mass 1,
   hangs from 0,1,2; 5 = 0 (coincident); 6 (2,2,0) collinear with 0,1;
   7 (1,2,1) coplanar with 0,1,2; 8 kinematic; 9 mass 0 */
enum { NFREE = 10 };
typedef struct scene {
    pbd_world *w;
    pbd_range free;
    pbd_object cloth, soft, balloon;
    pbd_group dist, attach_points, attach_particles;
    pbd_collider sphere, plane;
    int balloon_tris[20 * 3]; /* the balloon's triangles in world indices */
    int balloon_tri_count;
} scene;

static const float free_pos[NFREE * 3] = {0, 2, 0, 1, 2, 0, 0, 2, 1, 1, 2.5f, 1, 0.5f, 3, 0.5f,
                                          0, 2, 0, 2, 2, 0, 1, 2, 1, 3, 3,    3, 0.2f, 2, 0};
static const float free_mass[NFREE] = {0, 0, 0, 0, 1, 0, 0, 0, 1, 0};

static int build_scene(scene *S) {
    memset(S, 0, sizeof *S);
    pbd_world_desc d = pbd_world_desc_default();
    d.log = count_log;
    if (pbd_world_create(&d, &S->w) != PBD_OK || !S->w) {
        CHECK(0);
        return 0;
    }
    pbd_world *w = S->w;
    int ok = 1;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = free_pos;
    pd.masses = free_mass;
    pd.count = NFREE;
    ok &= pbd_add_particles(w, &pd, &S->free) == PBD_OK;
    int f = S->free.first;
    ok &= pbd_particle_set_kinematic(w, f + 8, 1) == PBD_OK;
    int di[6] = {f + 4, f + 0, f + 4, f + 1, f + 4, f + 2};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 3;
    cd.indices = di;
    ok &= pbd_add_constraints(w, &cd, &S->dist) == PBD_OK;
    /* cloth 4x4 */
    pbd_mesh m;
    float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    ok &= pbd_mesh_grid(4, 4, o, u, v, &m) == PBD_OK;
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    ok &= pbd_add_cloth(w, &c, &S->cloth) == PBD_OK;
    pbd_mesh_free(&m);
    /* soft body 2x2x2 */
    float lo[3] = {2, 0.5f, 0}, hi[3] = {2.5f, 1, 0.5f};
    ok &= pbd_mesh_tet_box(2, 2, 2, lo, hi, &m) == PBD_OK;
    pbd_softbody_desc sb = pbd_softbody_desc_default();
    sb.positions = m.positions;
    sb.vertex_count = m.vertex_count;
    sb.tets = m.tets;
    sb.tet_count = m.tet_count;
    ok &= pbd_add_softbody(w, &sb, &S->soft) == PBD_OK;
    pbd_mesh_free(&m);
    /* balloon: icosahedron */
    float bc[3] = {-2, 1, 0};
    ok &= pbd_mesh_sphere(0, bc, 0.3f, &m) == PBD_OK;
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth.positions = m.positions;
    bd.cloth.vertex_count = m.vertex_count;
    bd.cloth.triangles = m.triangles;
    bd.cloth.triangle_count = m.triangle_count;
    ok &= pbd_add_balloon(w, &bd, &S->balloon) == PBD_OK;
    S->balloon_tri_count = m.triangle_count;
    int b0 = pbdt_parts(w, S->balloon).particles.first;
    for (int i = 0; i < 3 * m.triangle_count && i < 60; ++i) S->balloon_tris[i] = b0 + m.triangles[i];
    pbd_mesh_free(&m);
    /* attachments: two cloth corners to points, one cloth corner to the kinematic particle */
    int c0 = pbdt_parts(w, S->cloth).particles.first;
    int corners[2] = {c0, c0 + 3};
    float tp[6] = {-0.5f, 1, -0.5f, 0.5f, 1, -0.5f};
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    ad.count = 2;
    ad.particles = corners;
    ad.target_points = tp;
    ok &= pbd_add_attachments(w, &ad, &S->attach_points) == PBD_OK;
    int last = c0 + 15, kin = f + 8;
    pbd_attachments_desc ap = pbd_attachments_desc_default();
    ap.count = 1;
    ap.particles = &last;
    ap.target_particles = &kin;
    ap.max_distance = 3.0f;
    ok &= pbd_add_attachments(w, &ap, &S->attach_particles) == PBD_OK;
    /* colliders */
    float sc[3] = {0, 0.5f, 0}, ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    ok &= pbd_add_collider_sphere(w, sc, 0.2f, 0.5f, &S->sphere) == PBD_OK;
    ok &= pbd_add_collider_plane(w, ground, up, 0.5f, &S->plane) == PBD_OK;
    for (int i = 0; i < 3; ++i) ok &= pbd_world_step(w, 1.0f / 60) == PBD_OK;
    CHECK_MSG(ok, "building the populated world failed");
    return ok;
}

/* ---- the check ------------------------------------------------------------------- */
typedef struct world_state {
    unsigned char *snap;
    size_t size;
    int particles, groups, objects, colliders;
} world_state;
static world_state take_state(const pbd_world *w) {
    world_state s;
    s.size = pbd_world_snapshot_size(w);
    s.snap = (unsigned char *)malloc(s.size ? s.size : 1);
    if (pbd_world_save(w, s.snap, s.size) != PBD_OK) s.size = 0;
    s.particles = pbd_world_particle_count(w);
    s.groups = pbd_world_group_count(w);
    s.objects = pbd_world_object_count(w);
    s.colliders = pbd_world_collider_count(w);
    return s;
}
/* mode 0: exactly want; 1: want or want2; 2: anything but PBD_OK */
static void check_error(const pbd_world *w, const world_state *before, pbd_result got, pbd_result want,
                        pbd_result want2, int mode, int logs_before, int world_given, const char *expr,
                        const char *file, int line) {
    int good = mode == 0 ? got == want : mode == 1 ? (got == want || got == want2) : got != PBD_OK;
    if (!good) {
        if (mode == 2) pbdt_fail(file, line, "%s returned PBD_OK, wanted an error", expr);
        else
            pbdt_fail(file, line, "%s returned %s, wanted %s%s%s", expr, pbd_result_string(got),
                      pbd_result_string(want), mode == 1 ? " or " : "", mode == 1 ? pbd_result_string(want2) : "");
    }
    world_state after = take_state(w);
    if (!(before->size > 0 && after.size == before->size && memcmp(after.snap, before->snap, after.size) == 0))
        pbdt_fail(file, line, "%s changed the world's snapshot", expr);
    if (after.particles != before->particles || after.groups != before->groups || after.objects != before->objects ||
        after.colliders != before->colliders)
        pbdt_fail(file, line, "%s changed the world's counts", expr);
    free(after.snap);
    if (!world_given && !strstr(pbd_last_error(), "NULL"))
        pbdt_fail(file, line, "%s: pbd_last_error() says \"%s\", not that a pointer is NULL", expr, pbd_last_error());
    if (world_given && got != PBD_OK) {
        const char *e = pbd_world_last_error(w);
        if (!e || !e[0]) pbdt_fail(file, line, "%s: pbd_world_last_error is empty", expr);
        if (log_calls == logs_before) pbdt_fail(file, line, "%s: the log callback was not called", expr);
        else if (log_last != got)
            pbdt_fail(file, line, "%s: the log callback got %d (1: empty message), the call returned %d", expr,
                      (int)log_last, (int)got);
    }
}
#define ERR_GENERIC(S, expr, want, want2, mode, world_given)                                             \
    do {                                                                                                 \
        world_state st_ = take_state((S)->w);                                                            \
        int logs_ = log_calls;                                                                           \
        pbd_result r_ = (expr);                                                                          \
        check_error((S)->w, &st_, r_, want, want2, mode, logs_, world_given, #expr, __FILE__, __LINE__); \
        free(st_.snap);                                                                                  \
    } while (0)
/* the specific error */
#define EXPECT_ERR(S, expr, want) ERR_GENERIC(S, expr, want, want, 0, 1)
/* one of two codes the header leaves open */
#define EXPECT_ERR2(S, expr, a, b) ERR_GENERIC(S, expr, a, b, 1, 1)
/* any error (the header names none) */
#define EXPECT_FAIL(S, expr) ERR_GENERIC(S, expr, PBD_OK, PBD_OK, 2, 1)
/* a NULL world: nothing to log into; the populated world must not change either */
#define EXPECT_NULL_WORLD(S, expr) ERR_GENERIC(S, expr, PBD_ERROR_NULL_POINTER, PBD_ERROR_NULL_POINTER, 0, 0)
/* The base of a descriptor's failures is valid: `call` (on T.w) passes on
   a scratch world of the same scene. */
#define BASE_IS_VALID(call)                  \
    do {                                     \
        scene T;                             \
        if (build_scene(&T)) CHECK_OK(call); \
        pbd_world_destroy(T.w);              \
    } while (0)
/* A descriptor's failures: reset (the valid base d0 back in d, and any
   arrays the cases edit), one change, then the call must fail with want
   (FAILS_WITH2: a or b) and leave the world as it was. */
#define FAILS_WITH(reset, field_set, call, want) \
    do {                                         \
        reset;                                   \
        field_set;                               \
        EXPECT_ERR(&S, call, want);              \
    } while (0)
#define FAILS_WITH2(reset, field_set, call, a, b) \
    do {                                          \
        reset;                                    \
        field_set;                                \
        EXPECT_ERR2(&S, call, a, b);              \
    } while (0)

static const float qnan = NAN;
static const float pinf = INFINITY;

/* ---- result strings ---------------------------------------------------------------- */
TEST(errors_result_strings) {
    static const char *names[] = {"PBD_OK",
                                  "PBD_ERROR_NULL_POINTER",
                                  "PBD_ERROR_INVALID_ARGUMENT",
                                  "PBD_ERROR_INDEX_OUT_OF_RANGE",
                                  "PBD_ERROR_NOT_FINITE",
                                  "PBD_ERROR_NEGATIVE_MASS",
                                  "PBD_ERROR_DEGENERATE",
                                  "PBD_ERROR_INVALID_TIME_STEP",
                                  "PBD_ERROR_OVERFLOW",
                                  "PBD_ERROR_OUT_OF_MEMORY",
                                  "PBD_ERROR_BAD_SNAPSHOT",
                                  "PBD_ERROR_NOT_CLOSED",
                                  "PBD_ERROR_INVALID_HANDLE"};
    enum { NCODES = (int)(sizeof names / sizeof names[0]) };
    const char *s[NCODES];
    for (int i = 0; i < NCODES; ++i) {
        s[i] = pbd_result_string((pbd_result)-i);
        CHECK_MSG(s[i] != NULL && s[i][0] != 0, "no string for %d", -i);
        if (s[i])
            CHECK_MSG(strncmp(s[i], names[i], strlen(names[i])) == 0 &&
                          (s[i][strlen(names[i])] == 0 || s[i][strlen(names[i])] == ':'),
                      "string for %s is \"%s\"", names[i], s[i]);
    }
    for (int i = 0; i < NCODES; ++i)
        for (int j = i + 1; j < NCODES; ++j)
            if (s[i] && s[j]) CHECK_MSG(strcmp(s[i], s[j]) != 0, "codes %d and %d share \"%s\"", -i, -j, s[i]);
    const char *u = pbd_result_string((pbd_result)-100), *v = pbd_result_string((pbd_result)5);
    CHECK(u != NULL && v != NULL);
}

/* ---- world creation ------------------------------------------------------------------ */
static void *dummy_alloc(void *user, size_t size) {
    (void)user;
    return malloc(size);
}
static void dummy_free(void *user, void *p) {
    (void)user;
    free(p);
}

static void create_fails(pbd_world_desc d, pbd_result want, const char *what, int line) {
    pbd_world *w = NULL;
    int logs = log_calls;
    d.log = count_log;
    pbd_result r = pbd_world_create(&d, &w);
    if (r != want)
        pbdt_fail(__FILE__, line, "%s: pbd_world_create returned %s, wanted %s", what, pbd_result_string(r),
                  pbd_result_string(want));
    if (w) {
        pbdt_fail(__FILE__, line, "%s: a failed pbd_world_create handed out a world", what);
        if (r != PBD_OK) w = NULL; /* don't free what we don't own */
        else pbd_world_destroy(w);
    }
    if (r != PBD_OK && log_calls == logs) pbdt_fail(__FILE__, line, "%s: the desc's log callback was not called", what);
}
TEST(errors_world_create) {
    pbd_world_desc d0 = pbd_world_desc_default(), d;
    pbd_world *w = NULL;
    CHECK_RESULT(pbd_world_create(NULL, &w), PBD_ERROR_NULL_POINTER);
    CHECK(w == NULL);
    CHECK_RESULT(pbd_world_create(&d0, NULL), PBD_ERROR_NULL_POINTER);
#define CREATE_FAILS(field_set, want)                \
    do {                                             \
        d = d0;                                      \
        field_set;                                   \
        create_fails(d, want, #field_set, __LINE__); \
    } while (0)
    CREATE_FAILS(d.substeps = 0, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.stiffness_correction = 2, PBD_ERROR_INVALID_ARGUMENT); /* a switch: 0 or 1 */
    CREATE_FAILS(d.substeps = -3, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.substeps = 1001, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.iterations = 0, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.iterations = -1, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.iterations = 1001, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.mode = (pbd_solver_mode)2, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.mode = (pbd_solver_mode)-1, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.gravity[1] = qnan, PBD_ERROR_NOT_FINITE);
    CREATE_FAILS(d.gravity[2] = pinf, PBD_ERROR_NOT_FINITE);
    CREATE_FAILS(d.gravity[1] = -1e30f, PBD_ERROR_INVALID_ARGUMENT); /* PBD_MAX_GRAVITY: every step would fail */
    CREATE_FAILS(d.point_damping = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.point_damping = qnan, PBD_ERROR_NOT_FINITE);
    CREATE_FAILS(d.max_contacts_per_particle = 0, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.max_contacts_per_particle = 65, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.allocator.alloc = dummy_alloc, PBD_ERROR_INVALID_ARGUMENT);
    CREATE_FAILS(d.allocator.free = dummy_free, PBD_ERROR_INVALID_ARGUMENT);
#undef CREATE_FAILS
    /* the limits themselves are fine */
    d = d0;
    d.substeps = 1000;
    d.iterations = 1;
    d.max_contacts_per_particle = 64;
    d.allocator.alloc = dummy_alloc;
    d.allocator.free = dummy_free;
    CHECK_OK(pbd_world_create(&d, &w));
    pbd_world_destroy(w);
}

/* ---- world parameters and stepping ------------------------------------------------------ */
TEST(errors_world_parameters) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    float g_nan[3] = {0, qnan, 0}, g_inf[3] = {pinf, 0, 0};
    EXPECT_NULL_WORLD(&S, pbd_world_set_gravity(NULL, g_nan));
    EXPECT_ERR(&S, pbd_world_set_gravity(w, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_world_set_gravity(w, g_nan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_world_set_gravity(w, g_inf), PBD_ERROR_NOT_FINITE);
    float g_huge[3] = {0, -2 * PBD_MAX_GRAVITY, 0}, g_most[3] = {0, -PBD_MAX_GRAVITY, 0}, g[3] = {0, -9.81f, 0};
    EXPECT_ERR(&S, pbd_world_set_gravity(w, g_huge), PBD_ERROR_INVALID_ARGUMENT); /* every step would fail */
    CHECK(strstr(pbd_world_last_error(w), "gravity[1] = -2e+06 m/s^2 is above PBD_MAX_GRAVITY = 1e+06") != NULL);
    CHECK_OK(pbd_world_set_gravity(w, g_most));
    CHECK_OK(pbd_world_set_gravity(w, g));
    EXPECT_NULL_WORLD(&S, pbd_world_set_solver(NULL, PBD_SOLVER_XPBD, 4, 4));
    EXPECT_ERR(&S, pbd_world_set_solver(w, (pbd_solver_mode)5, 4, 4), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_solver(w, (pbd_solver_mode)-1, 4, 4), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_solver(w, PBD_SOLVER_PBD, 0, 4), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_solver(w, PBD_SOLVER_PBD, -2, 4), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_solver(w, PBD_SOLVER_PBD, 1001, 4), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_solver(w, PBD_SOLVER_PBD, 4, 0), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_solver(w, PBD_SOLVER_PBD, 4, 1001), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_NULL_WORLD(&S, pbd_world_set_stiffness_correction(NULL, 1));
    /* switches take 0 or 1 (CONVENTIONS) */
    EXPECT_ERR(&S, pbd_world_set_stiffness_correction(w, 2), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_jacobi(w, -1, 1.0f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_simd(w, 2), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_particles_set_particle_contact(w, S.free, 2), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_object_set_particle_contact(w, S.cloth, 7), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_particle_set_kinematic(w, S.free.first, 2), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_particles_set_kinematic(w, S.free, -1), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_NULL_WORLD(&S, pbd_world_set_point_damping(NULL, 1.0f));
    EXPECT_ERR(&S, pbd_world_set_point_damping(w, -0.5f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_world_set_point_damping(w, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_world_set_point_damping(w, pinf), PBD_ERROR_NOT_FINITE);
    EXPECT_NULL_WORLD(&S, pbd_world_set_acceleration_field(NULL, NULL, NULL));
    /* time steps */
    EXPECT_NULL_WORLD(&S, pbd_world_step(NULL, 1.0f / 60));
    EXPECT_ERR(&S, pbd_world_step(w, 0.0f), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, -0.0f), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, -1.0f / 60), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, qnan), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, pinf), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, -pinf), PBD_ERROR_INVALID_TIME_STEP);
    /* outside [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] = [1e-6, 1] s: below, h^-2
       and h^-1 leave float range; 1e-40 (denormal) and 1e20 made NaN */
    EXPECT_ERR(&S, pbd_world_step(w, 1e-40f), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, 1e-22f), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, 0.99e-6f), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, 1.0001f), PBD_ERROR_INVALID_TIME_STEP);
    EXPECT_ERR(&S, pbd_world_step(w, 1e20f), PBD_ERROR_INVALID_TIME_STEP);
    CHECK_MSG(strstr(pbd_world_last_error(w), "[1e-06, 1] s") != NULL, "the message names the range: %s",
              pbd_world_last_error(w));
    /* snapshots */
    size_t n = pbd_world_snapshot_size(w);
    unsigned char *buf = (unsigned char *)malloc(n);
    EXPECT_NULL_WORLD(&S, pbd_world_save(NULL, buf, n));
    EXPECT_ERR(&S, pbd_world_save(w, NULL, n), PBD_ERROR_NULL_POINTER);
    EXPECT_FAIL(&S, pbd_world_save(w, buf, n - 1)); /* too small: the header names no code */
    CHECK_OK(pbd_world_save(w, buf, n));
    EXPECT_NULL_WORLD(&S, pbd_world_restore(NULL, buf, n));
    EXPECT_ERR(&S, pbd_world_restore(w, NULL, n), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_world_restore(w, buf, n - 1), PBD_ERROR_BAD_SNAPSHOT);
    buf[0] ^= 0xff;
    EXPECT_ERR(&S, pbd_world_restore(w, buf, n), PBD_ERROR_BAD_SNAPSHOT);
    free(buf);
    pbd_world_destroy(w);
}

/* ---- particles ---------------------------------------------------------------------------- */
TEST(errors_particles) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int n = pbd_world_particle_count(w), f = S.free.first;
    float p3[6] = {0, 1, 0, 1, 1, 0}, bad3[6] = {0, 1, 0, 1, qnan, 0}, inf3[6] = {0, 1, pinf, 1, 1, 0};
    float v3[6] = {0, 0, 0, 0, 0, 0}, m2[2] = {1, 1};
    pbd_range out;
    pbd_particles_desc d0 = pbd_particles_desc_default(), d;
    d0.positions = p3;
    d0.count = 2;
    EXPECT_NULL_WORLD(&S, pbd_add_particles(NULL, &d0, &out));
    EXPECT_ERR(&S, pbd_add_particles(w, NULL, &out), PBD_ERROR_NULL_POINTER);
#define ADD_FAILS(field_set, want) FAILS_WITH(d = d0, field_set, pbd_add_particles(w, &d, &out), want)
    ADD_FAILS(d.positions = NULL, PBD_ERROR_NULL_POINTER);
    ADD_FAILS(d.count = 0, PBD_ERROR_INVALID_ARGUMENT);
    ADD_FAILS(d.count = -1, PBD_ERROR_INVALID_ARGUMENT);
    ADD_FAILS(d.positions = bad3, PBD_ERROR_NOT_FINITE);
    ADD_FAILS(d.positions = inf3, PBD_ERROR_NOT_FINITE);
    ADD_FAILS(d.velocities = bad3, PBD_ERROR_NOT_FINITE);
    ADD_FAILS(d.velocities = inf3, PBD_ERROR_NOT_FINITE);
    ADD_FAILS((m2[1] = -1, d.masses = m2), PBD_ERROR_NEGATIVE_MASS);
    ADD_FAILS((m2[1] = qnan, d.masses = m2), PBD_ERROR_NOT_FINITE);
    ADD_FAILS((m2[1] = pinf, d.masses = m2), PBD_ERROR_NOT_FINITE);
    ADD_FAILS(d.mass = -2.0f, PBD_ERROR_NEGATIVE_MASS);
    ADD_FAILS(d.mass = qnan, PBD_ERROR_NOT_FINITE);
    ADD_FAILS(d.radius = -0.1f, PBD_ERROR_INVALID_ARGUMENT);
    ADD_FAILS(d.radius = qnan, PBD_ERROR_NOT_FINITE);
#undef ADD_FAILS
    d = d0;
    d.count = INT_MAX / 3 + 1; /* count * 3 floats overflows int: refused before reading */
    EXPECT_ERR2(&S, pbd_add_particles(w, &d, &out), PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
    d.count = INT_MAX;
    EXPECT_ERR2(&S, pbd_add_particles(w, &d, &out), PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);

    /* ranges */
    float buf[3 * 4];
    pbd_range bad_ranges[] = {{n, 1}, {-1, 1}, {0, n + 1}, {n - 1, 2}, {1, INT_MAX}, {INT_MAX, 1}, {INT_MIN, 2}};
    for (unsigned i = 0; i < sizeof bad_ranges / sizeof bad_ranges[0]; ++i) {
        pbd_range r = bad_ranges[i];
        EXPECT_ERR2(&S, pbd_particles_get_positions(w, r, buf), PBD_ERROR_INDEX_OUT_OF_RANGE, PBD_ERROR_OVERFLOW);
        EXPECT_ERR2(&S, pbd_particles_set_positions(w, r, buf), PBD_ERROR_INDEX_OUT_OF_RANGE, PBD_ERROR_OVERFLOW);
        EXPECT_ERR2(&S, pbd_particles_get_velocities(w, r, buf), PBD_ERROR_INDEX_OUT_OF_RANGE, PBD_ERROR_OVERFLOW);
        EXPECT_ERR2(&S, pbd_particles_set_velocities(w, r, buf), PBD_ERROR_INDEX_OUT_OF_RANGE, PBD_ERROR_OVERFLOW);
    }
    pbd_range neg = {0, -1};
    EXPECT_ERR2(&S, pbd_particles_get_positions(w, neg, buf), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_INDEX_OUT_OF_RANGE);
    EXPECT_ERR2(&S, pbd_particles_set_positions(w, neg, buf), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_INDEX_OUT_OF_RANGE);
    pbd_range r2 = {f, 2};
    EXPECT_NULL_WORLD(&S, pbd_particles_get_positions(NULL, r2, buf));
    EXPECT_NULL_WORLD(&S, pbd_particles_set_positions(NULL, r2, p3));
    EXPECT_NULL_WORLD(&S, pbd_particles_get_velocities(NULL, r2, buf));
    EXPECT_NULL_WORLD(&S, pbd_particles_set_velocities(NULL, r2, v3));
    EXPECT_ERR(&S, pbd_particles_get_positions(w, r2, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_particles_set_positions(w, r2, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_particles_get_velocities(w, r2, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_particles_set_velocities(w, r2, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_particles_set_positions(w, r2, bad3), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particles_set_positions(w, r2, inf3), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particles_set_velocities(w, r2, bad3), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particles_set_velocities(w, r2, inf3), PBD_ERROR_NOT_FINITE);

    /* per-particle setters */
    const int bad_idx[] = {-1, n, n + 100, INT_MIN, INT_MAX};
    float mass, tgt[3] = {0, 1, 0};
    for (unsigned i = 0; i < sizeof bad_idx / sizeof bad_idx[0]; ++i) {
        int k = bad_idx[i];
        EXPECT_ERR(&S, pbd_particle_set_mass(w, k, 1.0f), PBD_ERROR_INDEX_OUT_OF_RANGE);
        EXPECT_ERR(&S, pbd_particle_get_mass(w, k, &mass), PBD_ERROR_INDEX_OUT_OF_RANGE);
        EXPECT_ERR(&S, pbd_particle_set_radius(w, k, 0.1f), PBD_ERROR_INDEX_OUT_OF_RANGE);
        EXPECT_ERR(&S, pbd_particle_pin(w, k), PBD_ERROR_INDEX_OUT_OF_RANGE);
        EXPECT_ERR(&S, pbd_particle_unpin(w, k), PBD_ERROR_INDEX_OUT_OF_RANGE);
        EXPECT_ERR(&S, pbd_particle_set_kinematic(w, k, 1), PBD_ERROR_INDEX_OUT_OF_RANGE);
        EXPECT_ERR(&S, pbd_particle_set_kinematic_target(w, k, tgt), PBD_ERROR_INDEX_OUT_OF_RANGE);
    }
    EXPECT_NULL_WORLD(&S, pbd_particle_set_mass(NULL, f, 1.0f));
    EXPECT_NULL_WORLD(&S, pbd_particle_get_mass(NULL, f, &mass));
    EXPECT_NULL_WORLD(&S, pbd_particle_set_radius(NULL, f, 0.1f));
    EXPECT_NULL_WORLD(&S, pbd_particle_pin(NULL, f));
    EXPECT_NULL_WORLD(&S, pbd_particle_unpin(NULL, f));
    EXPECT_NULL_WORLD(&S, pbd_particle_set_kinematic(NULL, f, 1));
    EXPECT_NULL_WORLD(&S, pbd_particle_set_kinematic_target(NULL, f + 8, tgt));
    EXPECT_ERR(&S, pbd_particle_get_mass(w, f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_particle_set_mass(w, f + 4, -1.0f), PBD_ERROR_NEGATIVE_MASS);
    EXPECT_ERR(&S, pbd_particle_set_mass(w, f + 4, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particle_set_mass(w, f + 4, pinf), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particle_set_radius(w, f + 4, -0.01f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_particle_set_radius(w, f + 4, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particle_set_radius(w, f + 4, pinf), PBD_ERROR_NOT_FINITE);
    /* unpinning a particle of mass 0 is an error (the header names no code) */
    EXPECT_FAIL(&S, pbd_particle_unpin(w, f + 9));
    EXPECT_FAIL(&S, pbd_particle_unpin(w, f + 0));
    float tnan[3] = {0, qnan, 0}, tinf[3] = {0, 0, -pinf};
    EXPECT_ERR(&S, pbd_particle_set_kinematic_target(w, f + 8, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_particle_set_kinematic_target(w, f + 8, tnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_particle_set_kinematic_target(w, f + 8, tinf), PBD_ERROR_NOT_FINITE);
    pbd_world_destroy(w);
}

/* ---- constraint groups -------------------------------------------------------------------- */
static const int arity_of[6] = {2, 4, 4, 3, 4, 4};
/* a valid constraint of each type over the free particles (offsets) */
static const int valid_idx[6][4] = {{0, 1}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2}, {0, 2, 1, 3}, {4, 0, 1, 2}};
/* the same with a repeated index */
static const int repeat_idx[6][4] = {{1, 1}, {0, 1, 2, 2}, {0, 1, 0, 3}, {0, 2, 2}, {0, 1, 2, 0}, {4, 0, 4, 2}};
/* degenerate rest geometry: coincident (5 = 0), collinear (6 on 0-1), coplanar (7) */
static const int degen_idx[6][4] = {{0, 5}, {0, 1, 6, 3}, {0, 1, 2, 6}, {0, 1, 6}, {0, 1, 2, 7}, {4, 0, 1, 6}};

static pbd_constraints_desc cdesc(int type, const int *idx) {
    pbd_constraints_desc d = pbd_constraints_desc_default();
    d.type = (pbd_constraint_type)type;
    d.count = 1;
    d.indices = idx;
    return d;
}

/* Masses are 0 (pinned) or in [PBD_MIN_MASS, PBD_MAX_MASS], radii at most
   PBD_MAX_RADIUS, at every entry point that takes one or makes one (a
   density, a fluid's spacing): an inverse mass that is not finite (1e-39,
   a denormal), a mass the solver's float cannot carry (1e18), a density of
   0 that pinned a whole cloth and a fluid of 1e6 m spacing were accepted
   before. Each refusal names the parameter and its value and changes
   nothing. */
#define EXPECT_ERR_NAMING(S, expr, want, needle)                                                                  \
    do {                                                                                                          \
        EXPECT_ERR(S, expr, want);                                                                                \
        CHECK_MSG(strstr(pbd_world_last_error((S)->w), needle) != NULL, "%s: \"%s\" does not name \"%s\"", #expr, \
                  pbd_world_last_error((S)->w), needle);                                                          \
        CHECK_MSG(pbdt_message_reads_as_words(pbd_world_last_error((S)->w)), "%s: \"%s\" reads as code", #expr,   \
                  pbd_world_last_error((S)->w));                                                                  \
    } while (0)
TEST(errors_mass_and_radius_bounds) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int f = S.free.first;
    const float tiny = 1e-39f, denormal = 1e-42f, huge = 1e18f;
    float p3[6] = {0, 1, 0, 1, 1, 0}, m2[2] = {1, 1};
    pbd_range out;
    pbd_particles_desc d0 = pbd_particles_desc_default(), d;
    d0.positions = p3;
    d0.count = 2;
#define ADD_FAILS(field_set, want, needle)                                   \
    do {                                                                     \
        d = d0;                                                              \
        field_set;                                                           \
        EXPECT_ERR_NAMING(&S, pbd_add_particles(w, &d, &out), want, needle); \
    } while (0)
    if (PBDT_SUBNORMALS) {
        ADD_FAILS(d.mass = tiny, PBD_ERROR_INVALID_ARGUMENT, "mass = 1e-39 kg");
        ADD_FAILS(d.mass = denormal, PBD_ERROR_INVALID_ARGUMENT, "PBD_MIN_MASS");
        ADD_FAILS((m2[1] = tiny, d.masses = m2), PBD_ERROR_INVALID_ARGUMENT, "masses[1] = 1e-39");
        m2[1] = 1;
    }
    ADD_FAILS(d.mass = huge, PBD_ERROR_INVALID_ARGUMENT, "mass = 1e+18 kg");
    ADD_FAILS(d.mass = 0.5f * PBD_MIN_MASS, PBD_ERROR_INVALID_ARGUMENT, "PBD_MIN_MASS");
    ADD_FAILS(d.mass = 2.0f * PBD_MAX_MASS, PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_MASS");
    /* the float just below the bound: %g printed it as "1e-12 kg is outside [1e-12, 1e+12]" */
    ADD_FAILS(d.mass = nextafterf(PBD_MIN_MASS, 0.0f), PBD_ERROR_INVALID_ARGUMENT,
              "mass = 9.999999e-13 kg is outside [PBD_MIN_MASS, PBD_MAX_MASS] = [1e-12, 1e+12] kg");
    ADD_FAILS(d.mass = nextafterf(PBD_MAX_MASS, 2.0f * PBD_MAX_MASS), PBD_ERROR_INVALID_ARGUMENT,
              "mass = 1.00000006e+12 kg is outside");
    ADD_FAILS((m2[1] = huge, d.masses = m2), PBD_ERROR_INVALID_ARGUMENT, "masses[1] = 1e+18");
    m2[1] = 1;
    ADD_FAILS(d.radius = 1e6f, PBD_ERROR_INVALID_ARGUMENT, "radius = 1e+06 m is above PBD_MAX_RADIUS");
    ADD_FAILS(d.radius = 2.0f * PBD_MAX_RADIUS, PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_RADIUS");
#undef ADD_FAILS
    if (PBDT_SUBNORMALS) {
        EXPECT_ERR_NAMING(&S, pbd_particle_set_mass(w, f + 4, tiny), PBD_ERROR_INVALID_ARGUMENT, "mass = 1e-39");
        EXPECT_ERR_NAMING(&S, pbd_particle_set_mass(w, f + 4, denormal), PBD_ERROR_INVALID_ARGUMENT, "PBD_MIN_MASS");
    }
    EXPECT_ERR_NAMING(&S, pbd_particle_set_mass(w, f + 4, huge), PBD_ERROR_INVALID_ARGUMENT, "mass = 1e+18");
    EXPECT_ERR_NAMING(&S, pbd_particle_set_radius(w, f + 4, 1e6f), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_RADIUS");

    /* cloths and soft bodies: given masses, the masses a density makes, density 0, thickness / radius */
    pbd_mesh m;
    float o[3] = {5, 1, 5}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(4, 4, o, u, v, &m));
    float cm[16];
    for (int i = 0; i < 16; ++i) cm[i] = 0.01f;
    pbd_cloth_desc c0 = pbd_cloth_desc_default(), c;
    c0.positions = m.positions;
    c0.vertex_count = m.vertex_count;
    c0.triangles = m.triangles;
    c0.triangle_count = m.triangle_count;
    CHECK(m.vertex_count <= 16);
    pbd_object ob;
    c = c0;
    c.density = 0; /* pinned every vertex */
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "density 0");
    c.density = 1e-30f; /* vertex masses below PBD_MIN_MASS */
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "density 1e-30");
    c.density = 1e30f;
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_MASS");
    c.reorder = 1; /* the same checks before the Morton order */
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_MASS");
    c = c0;
    cm[5] = tiny;
    c.masses = cm;
    c.density = 0; /* unused with masses */
    if (PBDT_SUBNORMALS)
        EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "masses[5] = 1e-39");
    cm[5] = huge;
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "masses[5] = 1e+18");
    cm[5] = 0.01f;
    c = c0;
    c.thickness = 100;
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "thickness = 100");
    pbd_balloon_desc b = pbd_balloon_desc_default();
    pbd_mesh sph;
    float centre[3] = {5, 3, 5};
    CHECK_OK(pbd_mesh_sphere(1, centre, 0.3f, &sph));
    b.cloth.positions = sph.positions;
    b.cloth.vertex_count = sph.vertex_count;
    b.cloth.triangles = sph.triangles;
    b.cloth.triangle_count = sph.triangle_count;
    b.cloth.density = 0;
    EXPECT_ERR_NAMING(&S, pbd_add_balloon(w, &b, &ob), PBD_ERROR_INVALID_ARGUMENT, "density 0");
    pbd_mesh_free(&sph);
    pbd_mesh tm;
    float lo[3] = {5, 1, 5}, hi[3] = {5.2f, 1.2f, 5.2f};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &tm));
    pbd_softbody_desc s0 = pbd_softbody_desc_default(), sb;
    s0.positions = tm.positions;
    s0.vertex_count = tm.vertex_count;
    s0.tets = tm.tets;
    s0.tet_count = tm.tet_count;
    sb = s0;
    sb.density = 0;
    EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, &ob), PBD_ERROR_INVALID_ARGUMENT, "density 0");
    sb.density = 1e-40f;
    if (PBDT_SUBNORMALS)
        EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, &ob), PBD_ERROR_INVALID_ARGUMENT, "PBD_MIN_MASS");
    sb = s0;
    sb.radius = 1e3f;
    EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, &ob), PBD_ERROR_INVALID_ARGUMENT, "radius = 1000");
    pbd_mesh_free(&tm);

    /* fluids: spacing and radius bounded, the mass rest_density * spacing^3 too */
    float fp[6] = {5, 1, 5, 5.05f, 1, 5};
    pbd_fluid_desc fd0 = pbd_fluid_desc_default(), fd;
    fd0.positions = fp;
    fd0.count = 2;
    fd = fd0;
    fd.spacing = 1e6f;
    EXPECT_ERR_NAMING(&S, pbd_add_fluid(w, &fd, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT,
                      "spacing = 1e+06 m is above PBD_MAX_RADIUS");
    fd = fd0;
    fd.radius = 50;
    EXPECT_ERR_NAMING(&S, pbd_add_fluid(w, &fd, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT, "radius = 50");
    fd = fd0;
    fd.rest_density = 1e30f; /* 1.25e26 kg a particle */
    EXPECT_ERR_NAMING(&S, pbd_add_fluid(w, &fd, NULL, NULL), PBD_ERROR_DEGENERATE, "PBD_MAX_MASS");
    fd = fd0;
    fd.rest_density = 1e-20f;
    EXPECT_ERR_NAMING(&S, pbd_add_fluid(w, &fd, NULL, NULL), PBD_ERROR_DEGENERATE, "PBD_MIN_MASS");

    /* hair */
    float root[3] = {5, 1, 5}, normal[3] = {0, 1, 0};
    pbd_hair_desc h0 = pbd_hair_desc_default(), h;
    h0.root_positions = root;
    h0.root_normals = normal;
    h0.strand_count = 1;
    pbd_strands st;
    h = h0;
    h.mass = tiny;
    if (PBDT_SUBNORMALS)
        EXPECT_ERR_NAMING(&S, pbd_add_hair(w, &h, &st, NULL), PBD_ERROR_INVALID_ARGUMENT, "mass = 1e-39");
    h.mass = huge;
    EXPECT_ERR_NAMING(&S, pbd_add_hair(w, &h, &st, NULL), PBD_ERROR_INVALID_ARGUMENT, "mass = 1e+18");
    h = h0;
    h.radius = 1e3f;
    EXPECT_ERR_NAMING(&S, pbd_add_hair(w, &h, &st, NULL), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_RADIUS");

    /* the bounds themselves are valid */
    d = d0;
    float mb[2] = {PBD_MIN_MASS, PBD_MAX_MASS};
    d.masses = mb;
    d.radius = PBD_MAX_RADIUS;
    CHECK_OK(pbd_add_particles(w, &d, &out));
    CHECK_OK(pbd_particle_set_mass(w, out.first, PBD_MAX_MASS));
    CHECK_OK(pbd_particle_set_mass(w, out.first, 0));
    c = c0;
    c.masses = cm;
    c.density = 0;
    CHECK_OK(pbd_add_cloth(w, &c, &ob));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}
/* Particle positions beyond PBD_MAX_COORDINATE (1e6 m) on any axis are
   refused wherever the world is given them (1e38 m used to be taken, the
   particle never moving); the bound itself is valid. */
TEST(errors_positions_beyond_max_coordinate) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int f = S.free.first;
    float p3[6] = {0, 1, 0, 1, 1, 0};
    pbd_range out;
    pbd_particles_desc d = pbd_particles_desc_default();
    d.positions = p3;
    d.count = 2;
    p3[3] = 1e38f;
    EXPECT_ERR_NAMING(&S, pbd_add_particles(w, &d, &out), PBD_ERROR_INVALID_ARGUMENT,
                      "positions: coordinate x of point 1 is 1e+38 m, beyond PBD_MAX_COORDINATE = 1e+06 m");
    p3[3] = 1;
    p3[2] = -nextafterf(PBD_MAX_COORDINATE, 2 * PBD_MAX_COORDINATE);
    EXPECT_ERR_NAMING(&S, pbd_add_particles(w, &d, &out), PBD_ERROR_INVALID_ARGUMENT, "coordinate z of point 0");
    p3[2] = 0;
    float far[3] = {0, 2e6f, 0};
    pbd_range one = {f, 1};
    EXPECT_ERR_NAMING(&S, pbd_particles_set_positions(w, one, far), PBD_ERROR_INVALID_ARGUMENT,
                      "coordinate y of point 0 is 2e+06 m");
    CHECK_OK(pbd_particle_set_kinematic(w, f, 1));
    EXPECT_ERR_NAMING(&S, pbd_particle_set_kinematic_target(w, f, far), PBD_ERROR_INVALID_ARGUMENT, "target");

    pbd_mesh m;
    float o[3] = {5, 1, 5}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &m));
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = m.positions;
    c.vertex_count = m.vertex_count;
    c.triangles = m.triangles;
    c.triangle_count = m.triangle_count;
    m.positions[3 * 4] = -3e7f;
    pbd_object ob;
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "coordinate x of point 4");
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    float fp[6] = {5, 1, 5, 5.05f, 1e9f, 5};
    fd.positions = fp;
    fd.count = 2;
    EXPECT_ERR_NAMING(&S, pbd_add_fluid(w, &fd, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT, "PBD_MAX_COORDINATE");
    float root[3] = {5, 1, 2e6f}, normal[3] = {0, 1, 0};
    pbd_hair_desc h = pbd_hair_desc_default();
    h.root_positions = root;
    h.root_normals = normal;
    h.strand_count = 1;
    pbd_strands st;
    EXPECT_ERR_NAMING(&S, pbd_add_hair(w, &h, &st, NULL), PBD_ERROR_INVALID_ARGUMENT, "root_positions");

    /* the bound itself is valid, on every axis and sign */
    float edge[6] = {PBD_MAX_COORDINATE,  -PBD_MAX_COORDINATE, PBD_MAX_COORDINATE,
                     -PBD_MAX_COORDINATE, PBD_MAX_COORDINATE,  -PBD_MAX_COORDINATE};
    d.positions = edge;
    CHECK_OK(pbd_add_particles(w, &d, &out));
    CHECK_OK(pbd_particle_set_kinematic_target(w, f, edge));
    m.positions[3 * 4] = PBD_MAX_COORDINATE;
    CHECK_OK(pbd_add_cloth(w, &c, &ob));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}
/* A triangle or tet listed twice (in any vertex order) is refused, naming
   both: a separate triangle listed twice has each edge in two triangles
   and passed as manifold, and a repeated tet was taken (its mass and
   constraints counting twice). pbd_find_repeated_element (extension API)
   finds them. */
/* pbd_find_open_edge, and the builders that need a closed mesh naming the
   edge that is not: an open mesh, a flipped triangle. */
TEST(errors_open_meshes_are_refused_naming_an_edge) {
    pbd_mesh m;
    float c[3] = {0, 2, 0};
    CHECK_OK(pbd_mesh_sphere(1, c, 0.3f, &m));
    int a = -1, b = -1;
    CHECK(pbd_find_open_edge(NULL, m.triangles, m.triangle_count, &a, &b) == 0 && a == -1 && b == -1);
    CHECK(pbd_find_open_edge(NULL, m.triangles, 0, &a, &b) == 0);
    /* the last triangle gone: its three edges have no opposite */
    const int *last = m.triangles + 3 * (m.triangle_count - 1);
    CHECK(pbd_find_open_edge(NULL, m.triangles, m.triangle_count - 1, &a, &b) == 2);
    int hit = 0;
    for (int k = 0; k < 3; ++k) hit |= a == last[(k + 1) % 3] && b == last[k];
    CHECK_MSG(hit, "the open edge (%d, %d) is not the reverse of one of the missing triangle's", a, b);
    /* a triangle flipped: its edges repeat their neighbours' direction */
    int *flipped = (int *)malloc(sizeof(int) * 3 * (size_t)m.triangle_count);
    memcpy(flipped, m.triangles, sizeof(int) * 3 * (size_t)m.triangle_count);
    int t = flipped[0];
    flipped[0] = flipped[1];
    flipped[1] = t;
    CHECK(pbd_find_open_edge(NULL, flipped, m.triangle_count, &a, &b) == 1);
    pbd_world *w = pbdt_world(-9.81f);
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth.positions = m.positions;
    bd.cloth.vertex_count = m.vertex_count;
    bd.cloth.triangles = flipped;
    bd.cloth.triangle_count = m.triangle_count;
    char want[96];
    snprintf(want, sizeof want, "edge (%d, %d) is in two triangles in the same direction", a, b);
    CHECK_WORLD_ERROR(w, pbd_add_balloon(w, &bd, NULL), PBD_ERROR_NOT_CLOSED, want);
    bd.cloth.triangles = m.triangles;
    bd.cloth.triangle_count = m.triangle_count - 1;
    CHECK_WORLD_ERROR(w, pbd_add_balloon(w, &bd, NULL), PBD_ERROR_NOT_CLOSED, "has no opposite edge");
    CHECK(pbd_world_object_count(w) == 0);
    free(flipped);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(errors_repeated_elements_are_refused) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    /* a 3 x 3 grid (8 triangles) and a separate triangle, listed twice */
    float pos[3 * 12];
    int tri[3 * 10];
    pbd_mesh m;
    float o[3] = {5, 1, 5}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &m));
    CHECK(m.vertex_count == 9 && m.triangle_count == 8);
    memcpy(pos, m.positions, sizeof(float) * 27);
    memcpy(tri, m.triangles, sizeof(int) * 24);
    float extra[9] = {8, 1, 8, 9, 1, 8, 8, 1, 9};
    memcpy(pos + 27, extra, sizeof extra);
    int again[2][3] = {{10, 11, 9}, {9, 11, 10}}; /* rotated; reversed */
    tri[24] = 9, tri[25] = 10, tri[26] = 11;
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = pos;
    c.vertex_count = 12;
    c.triangles = tri;
    c.triangle_count = 10;
    pbd_object ob;
    for (int k = 0; k < 2; ++k) {
        memcpy(tri + 27, again[k], sizeof again[k]);
        EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT,
                          "triangles 8 and 9 are the same triangle (vertices 9, 10, 11)");
    }
    c.triangle_count = 9; /* listed once: a cloth */
    CHECK_OK(pbd_add_cloth(w, &c, &ob));
    /* a soft body's tet listed twice */
    pbd_mesh tm;
    float lo[3] = {5, 1, 5}, hi[3] = {5.2f, 1.2f, 5.2f};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &tm));
    int *tets = (int *)malloc(sizeof(int) * 4 * (size_t)(tm.tet_count + 1));
    memcpy(tets, tm.tets, sizeof(int) * 4 * (size_t)tm.tet_count);
    int *last = tets + 4 * tm.tet_count, *t1 = tm.tets + 4;
    last[0] = t1[2], last[1] = t1[3], last[2] = t1[0], last[3] = t1[1]; /* tet 1, an even permutation */
    pbd_softbody_desc sb = pbd_softbody_desc_default();
    sb.positions = tm.positions;
    sb.vertex_count = tm.vertex_count;
    sb.tets = tets;
    sb.tet_count = tm.tet_count + 1;
    char want[96];
    snprintf(want, sizeof want, "tets 1 and %d are the same tet (vertices %d, %d, %d, %d)", tm.tet_count, t1[0], t1[1],
             t1[2], t1[3]);
    EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, &ob), PBD_ERROR_INVALID_ARGUMENT, want);
    sb.tet_count = tm.tet_count;
    CHECK_OK(pbd_add_softbody(w, &sb, &ob));
    /* the finder itself: edges either way round, the earliest repeat, none, bad arity */
    int edges[8] = {0, 1, 1, 2, 2, 0, 1, 0}, a = -1, b = -1;
    CHECK(pbd_find_repeated_element(w, edges, 4, 2, &a, &b) == 1 && a == 0 && b == 3);
    CHECK(pbd_find_repeated_element(NULL, edges, 3, 2, &a, &b) == 0);
    CHECK(pbd_find_repeated_element(NULL, edges, 4, 5, &a, &b) == -1);
    free(tets);
    pbd_mesh_free(&tm);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* A vertex in no triangle (no tetrahedron) gets no share of a density:
   mass 0 would pin it silently, so the mesh is refused, naming the vertex
   in the caller's numbering (the check comes before the Morton order);
   with per-vertex masses the same mesh is fine (the vertex is a free
   particle). */
TEST(errors_density_leaves_no_vertex_massless) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    pbd_object ob;
    pbd_mesh m;
    float o[3] = {5, 1, 5}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &m)); /* 9 vertices, then a 10th in no triangle */
    float pos[30], mass[10];
    memcpy(pos, m.positions, sizeof(float) * 27);
    pos[27] = 5.5f, pos[28] = 2, pos[29] = 5.5f;
    for (int i = 0; i < 10; ++i) mass[i] = 0.01f;
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = pos;
    c.vertex_count = 10;
    c.triangles = m.triangles;
    c.triangle_count = m.triangle_count;
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "vertex 9 is in no triangle");
    c.reorder = 1;
    EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, &ob), PBD_ERROR_INVALID_ARGUMENT, "vertex 9 is in no triangle");
    pbd_balloon_desc b = pbd_balloon_desc_default();
    pbd_mesh sph;
    float centre[3] = {5, 3, 5};
    CHECK_OK(pbd_mesh_sphere(1, centre, 0.3f, &sph));
    float *bp = (float *)malloc(sizeof(float) * 3 * (size_t)(sph.vertex_count + 1));
    memcpy(bp, sph.positions, sizeof(float) * 3 * (size_t)sph.vertex_count);
    bp[3 * sph.vertex_count] = 5, bp[3 * sph.vertex_count + 1] = 4, bp[3 * sph.vertex_count + 2] = 5;
    b.cloth.positions = bp;
    b.cloth.vertex_count = sph.vertex_count + 1;
    b.cloth.triangles = sph.triangles;
    b.cloth.triangle_count = sph.triangle_count;
    EXPECT_ERR_NAMING(&S, pbd_add_balloon(w, &b, &ob), PBD_ERROR_INVALID_ARGUMENT, "is in no triangle");
    free(bp);
    pbd_mesh_free(&sph);

    pbd_mesh tm;
    float lo[3] = {5, 1, 5}, hi[3] = {5.2f, 1.2f, 5.2f};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &tm)); /* 8 vertices, 5 tets: vertex 0 in one of them */
    int tets[20];
    CHECK(tm.tet_count == 5 && tm.vertex_count == 8);
    int kept = 0, lone = -1, used[8] = {0}; /* drop the tets of vertex tets[0]: it, and maybe others, in none */
    for (int t = 0; t < 5; ++t) {
        int has = 0;
        for (int i = 0; i < 4; ++i) has |= tm.tets[4 * t + i] == tm.tets[0];
        if (!has) memcpy(tets + 4 * kept++, tm.tets + 4 * t, sizeof(int) * 4);
    }
    for (int i = 0; i < 4 * kept; ++i) used[tets[i]] = 1;
    for (int i = 7; i >= 0; --i) lone = used[i] ? lone : i; /* the first in no tet: the message names it */
    CHECK(kept > 0 && lone >= 0);
    char needle[64];
    snprintf(needle, sizeof needle, "vertex %d is in no tetrahedron", lone);
    pbd_softbody_desc sb = pbd_softbody_desc_default();
    sb.positions = tm.positions;
    sb.vertex_count = tm.vertex_count;
    sb.tets = tets;
    sb.tet_count = kept;
    EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, &ob), PBD_ERROR_INVALID_ARGUMENT, needle);
    sb.reorder = 1;
    EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, &ob), PBD_ERROR_INVALID_ARGUMENT, needle);

    /* given masses: the lone vertices are free particles of their own mass */
    c.masses = mass;
    CHECK_OK(pbd_add_cloth(w, &c, &ob));
    sb.masses = mass;
    CHECK_OK(pbd_add_softbody(w, &sb, &ob));
    pbd_mesh_free(&tm);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* A step that blows up because the masses of one object are too far apart
   for float (each valid on its own) says so: the first non-finite particle
   is where the blow-up was found (particle 0 of the cloth), not its cause,
   so the message names the lightest and the heaviest. */
TEST(errors_step_names_masses_too_far_apart) {
    pbd_world_desc wd = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&wd, &w));
    pbd_mesh m;
    float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(9, 9, o, u, v, &m));
    float ms[81];
    CHECK(m.vertex_count == 81);
    for (int i = 0; i < 81; ++i) ms[i] = PBD_MIN_MASS;
    ms[37] = PBD_MAX_MASS;
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = m.positions;
    c.vertex_count = m.vertex_count;
    c.triangles = m.triangles;
    c.triangle_count = m.triangle_count;
    c.masses = ms;
    pbd_object ob;
    CHECK_OK(pbd_add_cloth(w, &c, &ob));
    float ce[3] = {0, 0.5f, 0}, n[3] = {0, 1, 0}, pt[3] = {0, 0, 0};
    CHECK_OK(pbd_add_collider_sphere(w, ce, 0.3f, 0.5f, NULL));
    CHECK_OK(pbd_add_collider_plane(w, pt, n, 0.5f, NULL));
    pbd_result r = PBD_OK;
    for (int f = 0; f < 300 && r == PBD_OK; ++f) r = pbd_world_step(w, 1.0f / 60.0f);
    CHECK_MSG(r == PBD_ERROR_NOT_FINITE, "a cloth of 1e-12 kg vertices with one of 1e12 kg stepped (%s)",
              pbd_result_string(r));
    if (r == PBD_ERROR_NOT_FINITE) {
        const char *e = pbd_world_last_error(w);
        CHECK_MSG(strstr(e, "to 1e+12 kg (particle 37)") && strstr(e, "1e-12 kg (particle 0)"),
                  "the message \"%s\" does not name the masses too far apart", e);
        CHECK(pbdt_message_reads_as_words(e));
    }
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(errors_constraints) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int f = S.free.first, n = pbd_world_particle_count(w);
    pbd_group g;
    for (int t = 0; t < 6; ++t) {
        int idx[8], k;
        for (k = 0; k < arity_of[t]; ++k) idx[k] = f + valid_idx[t][k];
        pbd_constraints_desc d0 = cdesc(t, idx), d;
        /* the base is valid (checked on a scratch world) */
        scene T;
        if (build_scene(&T)) {
            int tidx[4];
            for (k = 0; k < arity_of[t]; ++k) tidx[k] = T.free.first + valid_idx[t][k];
            pbd_constraints_desc td = cdesc(t, tidx);
            CHECK_OK(pbd_add_constraints(T.w, &td, &g));
        }
        pbd_world_destroy(T.w);
        EXPECT_NULL_WORLD(&S, pbd_add_constraints(NULL, &d0, &g));
        EXPECT_ERR(&S, pbd_add_constraints(w, NULL, &g), PBD_ERROR_NULL_POINTER);
#define CON_FAILS(field_set, want) FAILS_WITH(d = d0, field_set, pbd_add_constraints(w, &d, &g), want)
#define CON_FAILS2(field_set, a, b) FAILS_WITH2(d = d0, field_set, pbd_add_constraints(w, &d, &g), a, b)
        CON_FAILS(d.indices = NULL, PBD_ERROR_NULL_POINTER);
        CON_FAILS(d.count = 0, PBD_ERROR_INVALID_ARGUMENT);
        CON_FAILS(d.count = -4, PBD_ERROR_INVALID_ARGUMENT);
        CON_FAILS(d.compliance = -1e-6f, PBD_ERROR_INVALID_ARGUMENT);
        CON_FAILS(d.compliance = qnan, PBD_ERROR_NOT_FINITE);
        CON_FAILS(d.compliance = pinf, PBD_ERROR_NOT_FINITE);
        CON_FAILS(d.stiffness = 1.5f, PBD_ERROR_INVALID_ARGUMENT);
        CON_FAILS(d.stiffness = -0.1f, PBD_ERROR_INVALID_ARGUMENT);
        CON_FAILS(d.stiffness = qnan, PBD_ERROR_NOT_FINITE);
        float rnan = qnan, rinf = pinf;
        if (t != PBD_CONSTRAINT_BENDING_ISOMETRIC) { /* its rest comes from the positions only */
            CON_FAILS(d.rest = &rnan, PBD_ERROR_NOT_FINITE);
            CON_FAILS(d.rest = &rinf, PBD_ERROR_NOT_FINITE);
        }
        if (t == PBD_CONSTRAINT_POINT_TRIANGLE) CON_FAILS(d.thickness = qnan, PBD_ERROR_NOT_FINITE);
        /* out-of-range and negative indices, in the last slot */
        int bad[4];
        const int oob[] = {n, n + 7, -1, INT_MIN};
        for (unsigned o = 0; o < sizeof oob / sizeof oob[0]; ++o) {
            memcpy(bad, idx, sizeof bad);
            bad[arity_of[t] - 1] = oob[o];
            CON_FAILS(d.indices = bad, PBD_ERROR_INDEX_OUT_OF_RANGE);
        }
        /* repeated index inside one constraint */
        for (k = 0; k < arity_of[t]; ++k) bad[k] = f + repeat_idx[t][k];
        CON_FAILS2(d.indices = bad, PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
        /* degenerate rest geometry measured from the positions */
        for (k = 0; k < arity_of[t]; ++k) bad[k] = f + degen_idx[t][k];
        CON_FAILS(d.indices = bad, PBD_ERROR_DEGENERATE);
        /* the second of two constraints is bad: nothing is added */
        int two[8];
        for (k = 0; k < arity_of[t]; ++k) {
            two[k] = idx[k];
            two[arity_of[t] + k] = idx[k];
        }
        two[2 * arity_of[t] - 1] = n;
        CON_FAILS((d.count = 2, d.indices = two), PBD_ERROR_INDEX_OUT_OF_RANGE);
        /* count * arity overflows int: refused before the indices are read */
        CON_FAILS2(d.count = INT_MAX / arity_of[t] + 1, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
        CON_FAILS2(d.count = INT_MAX, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
#undef CON_FAILS
#undef CON_FAILS2
    }
    /* types that are not one of the first six */
    int idx2[4] = {f, f + 1, f + 2, f + 3};
    const int bad_types[] = {PBD_CONSTRAINT_ATTACHMENT, PBD_CONSTRAINT_MESH_VOLUME, PBD_CONSTRAINT_TYPE_COUNT, -1, 100};
    for (unsigned i = 0; i < sizeof bad_types / sizeof bad_types[0]; ++i) {
        pbd_constraints_desc d = cdesc(bad_types[i], idx2);
        EXPECT_ERR(&S, pbd_add_constraints(w, &d, &g), PBD_ERROR_INVALID_ARGUMENT);
    }
    /* a negative rest length */
    int di[2] = {f, f + 1};
    float rneg = -0.5f;
    pbd_constraints_desc d = cdesc(PBD_CONSTRAINT_DISTANCE, di);
    d.rest = &rneg;
    EXPECT_ERR2(&S, pbd_add_constraints(w, &d, &g), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    pbd_world_destroy(w);
}

TEST(errors_attachments) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int f = S.free.first, n = pbd_world_particle_count(w);
    int part[2] = {f + 4, pbdt_parts(w, S.cloth).particles.first + 5}, tpart[2] = {f + 8, f + 0};
    float pts[6] = {0, 3, 0, 0, 1.2f, 0};
    pbd_group g;
    pbd_attachments_desc d0 = pbd_attachments_desc_default(), d;
    d0.count = 2;
    d0.particles = part;
    d0.target_points = pts;
    { /* both bases are valid on a scratch world */
        scene T;
        if (build_scene(&T)) {
            int tp[2] = {T.free.first + 4, pbdt_parts(T.w, T.cloth).particles.first + 5},
                tt[2] = {T.free.first + 8, T.free.first};
            pbd_attachments_desc td = d0;
            td.particles = tp;
            CHECK_OK(pbd_add_attachments(T.w, &td, &g));
            td.target_points = NULL;
            td.target_particles = tt;
            CHECK_OK(pbd_add_attachments(T.w, &td, &g));
        }
        pbd_world_destroy(T.w);
    }
    EXPECT_NULL_WORLD(&S, pbd_add_attachments(NULL, &d0, &g));
    EXPECT_ERR(&S, pbd_add_attachments(w, NULL, &g), PBD_ERROR_NULL_POINTER);
#define ATT_FAILS(field_set, want) FAILS_WITH(d = d0, field_set, pbd_add_attachments(w, &d, &g), want)
#define ATT_FAILS2(field_set, a, b) FAILS_WITH2(d = d0, field_set, pbd_add_attachments(w, &d, &g), a, b)
    ATT_FAILS(d.particles = NULL, PBD_ERROR_NULL_POINTER);
    ATT_FAILS(d.count = 0, PBD_ERROR_INVALID_ARGUMENT);
    ATT_FAILS(d.count = -1, PBD_ERROR_INVALID_ARGUMENT);
    ATT_FAILS(d.target_particles = tpart, PBD_ERROR_INVALID_ARGUMENT);                      /* both */
    ATT_FAILS2(d.target_points = NULL, PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_NULL_POINTER); /* neither */
    ATT_FAILS(d.max_distance = -0.1f, PBD_ERROR_INVALID_ARGUMENT);
    ATT_FAILS(d.max_distance = qnan, PBD_ERROR_NOT_FINITE);
    ATT_FAILS(d.max_distance = pinf, PBD_ERROR_NOT_FINITE);
    ATT_FAILS(d.compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    ATT_FAILS(d.compliance = qnan, PBD_ERROR_NOT_FINITE);
    ATT_FAILS(d.stiffness = 2.0f, PBD_ERROR_INVALID_ARGUMENT);
    ATT_FAILS(d.stiffness = qnan, PBD_ERROR_NOT_FINITE);
    float pnan[6] = {0, 3, 0, 0, qnan, 0}, pinf6[6] = {pinf, 3, 0, 0, 1, 0};
    ATT_FAILS(d.target_points = pnan, PBD_ERROR_NOT_FINITE);
    ATT_FAILS(d.target_points = pinf6, PBD_ERROR_NOT_FINITE);
    float pfar[6] = {0, 3, 0, 0, 1e7f, 0}; /* beyond PBD_MAX_COORDINATE, as particles' positions */
    ATT_FAILS(d.target_points = pfar, PBD_ERROR_INVALID_ARGUMENT);
    int bp[2] = {f + 4, n}, bn[2] = {-1, f + 4}, bt[2] = {f + 8, n + 3}, self[2] = {f + 4, f + 8};
    int selft[2] = {f + 4, f + 0};
    ATT_FAILS(d.particles = bp, PBD_ERROR_INDEX_OUT_OF_RANGE);
    ATT_FAILS(d.particles = bn, PBD_ERROR_INDEX_OUT_OF_RANGE);
    ATT_FAILS((d.target_points = NULL, d.target_particles = bt), PBD_ERROR_INDEX_OUT_OF_RANGE);
    /* a particle attached to itself */
    ATT_FAILS2((d.particles = self, d.target_points = NULL, d.target_particles = selft), PBD_ERROR_INVALID_ARGUMENT,
               PBD_ERROR_DEGENERATE);
    ATT_FAILS2(d.count = INT_MAX / 3 + 1, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
    ATT_FAILS2(d.count = INT_MAX, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
#undef ATT_FAILS
#undef ATT_FAILS2
    /* moving a point target */
    pbd_group ga = S.attach_points;
    float ok3[3] = {0, 1, 0}, nan3[3] = {qnan, 1, 0}, inf3[3] = {0, -pinf, 0};
    EXPECT_NULL_WORLD(&S, pbd_group_set_attachment_target(NULL, ga, 0, ok3));
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, ga, 0, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, ga, 0, nan3), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, ga, 1, inf3), PBD_ERROR_NOT_FINITE);
    float far3[3] = {0, 3e38f, 0};
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, ga, 1, far3), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, ga, 2, ok3), PBD_ERROR_INDEX_OUT_OF_RANGE);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, ga, -1, ok3), PBD_ERROR_INDEX_OUT_OF_RANGE);
    pbd_group none = {0}, beyond = {(uint32_t)pbd_world_group_count(w) + 1u}; /* slot group_count */
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, none, 0, ok3), PBD_ERROR_INVALID_HANDLE);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, beyond, 0, ok3), PBD_ERROR_INVALID_HANDLE);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, S.dist, 0, ok3), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_attachment_target(w, S.attach_particles, 0, ok3), PBD_ERROR_INVALID_ARGUMENT);
    pbd_world_destroy(w);
}

TEST(errors_mesh_volume_group) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int n = pbd_world_particle_count(w), nt = S.balloon_tri_count;
    int tris[60], bad[60];
    memcpy(tris, S.balloon_tris, sizeof tris);
    pbd_group g;
    pbd_mesh_volume_desc d0 = pbd_mesh_volume_desc_default(), d;
    d0.triangles = tris;
    d0.triangle_count = nt;
    {
        scene T;
        if (build_scene(&T)) {
            pbd_mesh_volume_desc td = d0;
            td.triangles = T.balloon_tris;
            CHECK_OK(pbd_add_mesh_volume(T.w, &td, &g));
        }
        pbd_world_destroy(T.w);
    }
    EXPECT_NULL_WORLD(&S, pbd_add_mesh_volume(NULL, &d0, &g));
    EXPECT_ERR(&S, pbd_add_mesh_volume(w, NULL, &g), PBD_ERROR_NULL_POINTER);
#define MV_RESET() (d = d0, memcpy(bad, tris, sizeof bad))
#define MV_FAILS(field_set, want) FAILS_WITH(MV_RESET(), field_set, pbd_add_mesh_volume(w, &d, &g), want)
#define MV_FAILS2(field_set, a, b) FAILS_WITH2(MV_RESET(), field_set, pbd_add_mesh_volume(w, &d, &g), a, b)
    MV_FAILS(d.triangles = NULL, PBD_ERROR_NULL_POINTER);
    MV_FAILS(d.triangle_count = 0, PBD_ERROR_INVALID_ARGUMENT);
    MV_FAILS(d.triangle_count = -2, PBD_ERROR_INVALID_ARGUMENT);
    MV_FAILS(d.triangle_count = nt - 1, PBD_ERROR_NOT_CLOSED);                               /* a hole */
    MV_FAILS((bad[4] = tris[5], bad[5] = tris[4], d.triangles = bad), PBD_ERROR_NOT_CLOSED); /* one flipped */
    MV_FAILS((bad[7] = n, d.triangles = bad), PBD_ERROR_INDEX_OUT_OF_RANGE);
    MV_FAILS((bad[7] = -1, d.triangles = bad), PBD_ERROR_INDEX_OUT_OF_RANGE);
    MV_FAILS(d.pressure = 0.0f, PBD_ERROR_INVALID_ARGUMENT);
    MV_FAILS(d.pressure = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    MV_FAILS(d.pressure = qnan, PBD_ERROR_NOT_FINITE);
    MV_FAILS(d.pressure = pinf, PBD_ERROR_NOT_FINITE);
    MV_FAILS(d.compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    MV_FAILS(d.compliance = qnan, PBD_ERROR_NOT_FINITE);
    MV_FAILS(d.stiffness = 1.01f, PBD_ERROR_INVALID_ARGUMENT);
    MV_FAILS(d.stiffness = qnan, PBD_ERROR_NOT_FINITE);
    MV_FAILS2(d.triangle_count = INT_MAX / 3 + 1, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
    /* a repeated index inside a triangle (the header names no code) */
    d = d0;
    memcpy(bad, tris, sizeof bad);
    bad[1] = bad[0];
    d.triangles = bad;
    EXPECT_FAIL(&S, pbd_add_mesh_volume(w, &d, &g));
    /* two triangles of the cloth: an open sheet is not closed */
    int c0 = pbdt_parts(w, S.cloth).particles.first;
    int sheet[6] = {c0, c0 + 1, c0 + 4, c0 + 1, c0 + 5, c0 + 4};
    d = d0;
    d.triangles = sheet;
    d.triangle_count = 2;
    EXPECT_ERR(&S, pbd_add_mesh_volume(w, &d, &g), PBD_ERROR_NOT_CLOSED);
#undef MV_FAILS
#undef MV_FAILS2
#undef MV_RESET
    pbd_world_destroy(w);
}

TEST(errors_group_parameters) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int ng = pbd_world_group_count(w);
    pbd_constraint_type type;
    int count;
    float mean, mx, vol;
    /* forged handles: none, slots beyond the pool, every bit set, the high bit alone (slot field 0,
       generation 512) */
    const uint32_t bad_g[] = {0u, (uint32_t)ng + 1u, (uint32_t)ng + 6u, UINT32_MAX, (uint32_t)INT_MAX, 0x80000000u};
    for (unsigned i = 0; i < sizeof bad_g / sizeof bad_g[0]; ++i) {
        pbd_group g = {bad_g[i]};
        EXPECT_ERR(&S, pbd_group_info(w, g, &type, &count), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_group_set_compliance(w, g, 0.0f), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_group_set_stiffness(w, g, 1.0f), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_group_set_enabled(w, g, 0), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_group_set_pressure(w, g, 1.0f), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_group_error(w, g, &mean, &mx), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_group_mesh_volume(w, g, &vol), PBD_ERROR_INVALID_HANDLE);
    }
    pbd_group gd = S.dist, gv = pbdt_parts(w, S.balloon).volume;
    CHECK(gv.id != 0);
    EXPECT_NULL_WORLD(&S, pbd_group_info(NULL, gd, &type, &count));
    EXPECT_NULL_WORLD(&S, pbd_group_set_compliance(NULL, gd, 0.0f));
    EXPECT_NULL_WORLD(&S, pbd_group_set_stiffness(NULL, gd, 1.0f));
    EXPECT_NULL_WORLD(&S, pbd_group_set_enabled(NULL, gd, 1));
    EXPECT_NULL_WORLD(&S, pbd_group_set_pressure(NULL, gv, 1.0f));
    EXPECT_NULL_WORLD(&S, pbd_group_error(NULL, gd, &mean, &mx));
    EXPECT_NULL_WORLD(&S, pbd_group_mesh_volume(NULL, gv, &vol));
    EXPECT_ERR(&S, pbd_group_set_compliance(w, gd, -1e-3f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_compliance(w, gd, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_group_set_compliance(w, gd, pinf), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_group_set_stiffness(w, gd, 1.0001f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_stiffness(w, gd, -0.5f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_stiffness(w, gd, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_group_set_pressure(w, gd, 1.0f), PBD_ERROR_INVALID_ARGUMENT); /* not a volume group */
    EXPECT_ERR(&S, pbd_group_set_pressure(w, gv, 0.0f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_pressure(w, gv, -2.0f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_set_pressure(w, gv, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_group_set_pressure(w, gv, pinf), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_group_mesh_volume(w, gd, &vol), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_group_mesh_volume(w, gv, NULL), PBD_ERROR_NULL_POINTER);
    /* the valid calls work (so the failures above are about the bad value) */
    CHECK_OK(pbd_group_mesh_volume(w, gv, &vol));
    CHECK(vol > 0);
    CHECK_OK(pbd_group_set_pressure(w, gv, 1.5f));
    CHECK_OK(pbd_group_set_compliance(w, gd, 1e-4f));
    pbd_world_destroy(w);
}

/* Switches take 0 or 1 (CONVENTIONS): the enabled setters of groups,
   long range attachments and strain limits, the builders' `reorder` and
   pbd_constraints_desc.unilateral took 2 or -1 as on. Each is refused,
   naming the switch and its value, with the world unchanged. */
TEST(errors_switches_take_0_or_1) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int f = S.free.first, c0 = pbdt_parts(w, S.cloth).particles.first;
    pbd_mesh m;
    float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(4, 4, o, u, v, &m)); /* the scene's cloth */
    pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
    sd.object = S.cloth;
    sd.triangles = m.triangles;
    sd.triangle_count = m.triangle_count;
    pbd_strain_limit sl;
    CHECK_OK(pbd_add_strain_limit(w, &sd, &sl));
    int anchor = c0;
    pbd_lra_desc ld = pbd_lra_desc_default();
    ld.object = S.cloth;
    ld.anchors = &anchor;
    ld.anchor_count = 1;
    pbd_lra l;
    CHECK_OK(pbd_add_long_range_attachments(w, &ld, &l));
    static const int bad[2] = {2, -1};
    for (int k = 0; k < 2; ++k) {
        char said[32];
        snprintf(said, sizeof said, "enabled %d must be 0 or 1", bad[k]);
        EXPECT_ERR_NAMING(&S, pbd_group_set_enabled(w, S.dist, bad[k]), PBD_ERROR_INVALID_ARGUMENT, said);
        EXPECT_ERR_NAMING(&S, pbd_lra_set_enabled(w, l, bad[k]), PBD_ERROR_INVALID_ARGUMENT, said);
        EXPECT_ERR_NAMING(&S, pbd_strain_limit_set_enabled(w, sl, bad[k]), PBD_ERROR_INVALID_ARGUMENT, said);
        snprintf(said, sizeof said, "reorder %d must be 0 or 1", bad[k]);
        pbd_cloth_desc c = pbdt_cloth_desc(&m);
        c.reorder = bad[k];
        EXPECT_ERR_NAMING(&S, pbd_add_cloth(w, &c, NULL), PBD_ERROR_INVALID_ARGUMENT, said);
        pbd_balloon_desc bd = pbd_balloon_desc_default();
        bd.cloth = c; /* refused before it is found open */
        EXPECT_ERR_NAMING(&S, pbd_add_balloon(w, &bd, NULL), PBD_ERROR_INVALID_ARGUMENT, said);
        pbd_softbody_desc sb = pbd_softbody_desc_default();
        float lo[3] = {2, 0.5f, 0}, hi[3] = {2.5f, 1, 0.5f};
        pbd_mesh b;
        CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &b));
        sb.positions = b.positions;
        sb.vertex_count = b.vertex_count;
        sb.tets = b.tets;
        sb.tet_count = b.tet_count;
        sb.reorder = bad[k];
        EXPECT_ERR_NAMING(&S, pbd_add_softbody(w, &sb, NULL), PBD_ERROR_INVALID_ARGUMENT, said);
        pbd_mesh_free(&b);
        int pair[2] = {f + 4, f + 6};
        pbd_constraints_desc cd = pbd_constraints_desc_default();
        cd.type = PBD_CONSTRAINT_DISTANCE;
        cd.count = 1;
        cd.indices = pair;
        cd.unilateral = bad[k];
        snprintf(said, sizeof said, "unilateral %d must be 0 or 1", bad[k]);
        EXPECT_ERR_NAMING(&S, pbd_add_constraints(w, &cd, NULL), PBD_ERROR_INVALID_ARGUMENT, said);
    }
    /* 0 and 1 are the switch */
    CHECK_OK(pbd_group_set_enabled(w, S.dist, 0));
    CHECK_OK(pbd_lra_set_enabled(w, l, 0));
    CHECK_OK(pbd_strain_limit_set_enabled(w, sl, 1));
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    c.reorder = 1;
    CHECK_OK(pbd_add_cloth(w, &c, NULL));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}
#undef EXPECT_ERR_NAMING

/* A message names the one argument or field at fault, with its value
   (CONVENTIONS): these said "mode must be XPBD or PBD, substeps and
   iterations in 1..1000", "density, thickness or damping is not finite",
   "origin, u, v or out is NULL", "length, mass or radius is not finite",
   "strand particle 12345 is not a particle" (where in particles?),
   "collider shape 4", "bending model 7", "strain mode 5". The world does
   not change. */
TEST(errors_messages_name_the_one_field_at_fault) {
    pbd_world_desc wd = pbd_world_desc_default();
    pbd_world *none = NULL;
    CHECK_ERROR_IN_WORDS(NULL, pbd_world_create(NULL, &none), PBD_ERROR_NULL_POINTER, "desc is NULL");
    CHECK_ERROR_IN_WORDS(NULL, pbd_world_create(&wd, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
/* one field of the default desc set, and the message that names it */
#define CREATE_SAYS(field_set, want, needle)                                    \
    do {                                                                        \
        wd = pbd_world_desc_default();                                          \
        field_set;                                                              \
        CHECK_ERROR_IN_WORDS(NULL, pbd_world_create(&wd, &none), want, needle); \
    } while (0)
    CREATE_SAYS(wd.mode = (pbd_solver_mode)7, PBD_ERROR_INVALID_ARGUMENT,
                "solver mode 7 is neither PBD_SOLVER_XPBD (0) nor PBD_SOLVER_PBD (1)");
    CREATE_SAYS(wd.substeps = 1001, PBD_ERROR_INVALID_ARGUMENT, "substeps 1001 must be in 1..1000");
    CREATE_SAYS(wd.iterations = 0, PBD_ERROR_INVALID_ARGUMENT, "iterations 0 must be in 1..1000");
    CREATE_SAYS(wd.gravity[1] = NAN, PBD_ERROR_NOT_FINITE, "gravity (0, nan, 0) is not finite");
    CREATE_SAYS(wd.point_damping = -1, PBD_ERROR_INVALID_ARGUMENT, "point_damping -1 < 0");
    CREATE_SAYS(wd.max_contacts_per_particle = 65, PBD_ERROR_INVALID_ARGUMENT,
                "max_contacts_per_particle 65 must be in 1..64");
    CREATE_SAYS(wd.reference_dt = 2, PBD_ERROR_INVALID_ARGUMENT, "reference_dt 2 s must be 0 or in [1e-6, 1] s");
    CREATE_SAYS(wd.granular_cfl = -0.5f, PBD_ERROR_INVALID_ARGUMENT, "granular_cfl -0.5 must be >= 0");
    CREATE_SAYS(wd.device = (pbd_device)9, PBD_ERROR_INVALID_ARGUMENT,
                "device 9 must be PBD_DEVICE_AUTO, _GPU or _CPU");
#undef CREATE_SAYS
    CHECK(none == NULL);
    /* the mesh generators */
    pbd_mesh m;
    float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1}, bad[3] = {0, INFINITY, 0};
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_grid(4, 4, o, NULL, v, &m), PBD_ERROR_NULL_POINTER, "pbd_mesh_grid: u is NULL");
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_grid(4, 4, o, u, v, NULL), PBD_ERROR_NULL_POINTER,
                         "pbd_mesh_grid: out is NULL");
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_grid(4, 4, o, u, bad, &m), PBD_ERROR_NOT_FINITE,
                         "pbd_mesh_grid: v (0, inf, 0) is not finite");
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_tet_box(2, 2, 2, o, NULL, &m), PBD_ERROR_NULL_POINTER,
                         "pbd_mesh_tet_box: hi is NULL");
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_tet_box(2, 2, 2, bad, o, &m), PBD_ERROR_NOT_FINITE,
                         "pbd_mesh_tet_box: lo (0, inf, 0) is not finite");
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_sphere(1, o, NAN, &m), PBD_ERROR_NOT_FINITE,
                         "pbd_mesh_sphere: radius nan is not finite");
    CHECK_ERROR_IN_WORDS(NULL, pbd_mesh_sphere(1, NULL, 1, &m), PBD_ERROR_NULL_POINTER,
                         "pbd_mesh_sphere: centre is NULL");
    float tri[9] = {0}, im[3] = {1, 1, 1};
    CHECK_ERROR_IN_WORDS(NULL, pbd_strain_limit_triangle(tri, tri, NULL, 0.9f, 1.1f, NULL), PBD_ERROR_NULL_POINTER,
                         "pbd_strain_limit_triangle: inv_mass is NULL");
    CHECK_ERROR_IN_WORDS(NULL, pbd_strain_limit_triangle(tri, tri, im, 0.9f, 0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT,
                         "pbd_strain_limit_triangle: max_stretch 0.5 must be >= 1");
    CHECK_ERROR_IN_WORDS(NULL, pbd_ftl_project(tri, 3, NULL, NULL), PBD_ERROR_NULL_POINTER,
                         "pbd_ftl_project: rest is NULL");
    float rest2[2] = {0.1f, NAN};
    CHECK_ERROR_IN_WORDS(NULL, pbd_ftl_project(tri, 3, rest2, NULL), PBD_ERROR_NOT_FINITE,
                         "pbd_ftl_project: rest[1] = nan is not finite");
    tri[4] = INFINITY;
    CHECK_ERROR_IN_WORDS(NULL, pbd_ftl_project(tri, 3, rest2, NULL), PBD_ERROR_NOT_FINITE,
                         "pbd_ftl_project: points[4] = inf is not finite (point 1)");
    tri[4] = 0;
    /* on a world */
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_ERROR_IN_WORDS(w, pbd_world_set_solver(w, PBD_SOLVER_XPBD, 4, 1001), PBD_ERROR_INVALID_ARGUMENT,
                         "iterations 1001 must be in 1..1000");
    CHECK_OK(pbd_mesh_grid(4, 4, o, u, v, &m));
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &c, &cloth));
    float fp[6] = {3, 1, 0, 3.05f, 1, 0};
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = fp;
    fd.count = 2;
    pbd_fluid fluid;
    CHECK_OK(pbd_add_fluid(w, &fd, &fluid, NULL));
    pbd_range free2 = pbdt_add_colliding(w, fp, 2, 0.01f, 1);
    size_t size, size_after;
    unsigned char *before = pbdt_save(w, &size);
    c.density = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_add_cloth(w, &c, NULL), PBD_ERROR_NOT_FINITE, "density nan is not finite");
    c = pbdt_cloth_desc(&m);
    c.thickness = INFINITY;
    CHECK_ERROR_IN_WORDS(w, pbd_add_cloth(w, &c, NULL), PBD_ERROR_NOT_FINITE, "thickness inf is not finite");
    c = pbdt_cloth_desc(&m);
    c.damping = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_add_cloth(w, &c, NULL), PBD_ERROR_NOT_FINITE, "damping nan is not finite");
    c = pbdt_cloth_desc(&m);
    c.bending = (pbd_bending_model)7;
    CHECK_ERROR_IN_WORDS(w, pbd_add_cloth(w, &c, NULL), PBD_ERROR_INVALID_ARGUMENT,
                         "bending model 7 is not PBD_BENDING_NONE, _DIHEDRAL or _ISOMETRIC (0..2)");
    c = pbdt_cloth_desc(&m);
    c.stretch_compliance = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_add_cloth(w, &c, NULL), PBD_ERROR_NOT_FINITE, "stretch_compliance nan is not finite");
    pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
    sd.object = cloth;
    sd.triangles = m.triangles;
    sd.triangle_count = m.triangle_count;
    sd.mode = (pbd_strain_mode)5;
    CHECK_ERROR_IN_WORDS(w, pbd_add_strain_limit(w, &sd, NULL), PBD_ERROR_INVALID_ARGUMENT,
                         "strain mode 5 is not PBD_STRAIN_TRIANGLES or PBD_STRAIN_EDGES (0 or 1)");
    pbd_collider_desc cd = pbd_collider_desc_default();
    cd.shape = PBD_COLLIDER_MESH;
    CHECK_ERROR_IN_WORDS(w, pbd_add_collider(w, &cd, NULL), PBD_ERROR_INVALID_ARGUMENT,
                         "collider shape 4 is not PBD_COLLIDER_PLANE, _SPHERE, _CAPSULE or _BOX (0..3); triangle "
                         "meshes and signed-distance grids are added with pbd_add_collider_mesh");
    cd.shape = PBD_COLLIDER_CAPSULE;
    cd.half_height = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_add_collider(w, &cd, NULL), PBD_ERROR_NOT_FINITE, "half_height nan is not finite");
    CHECK_ERROR_IN_WORDS(w, pbd_fluid_set_viscosity(w, fluid, 0.1f, NAN), PBD_ERROR_NOT_FINITE,
                         "vorticity nan is not finite");
    CHECK_ERROR_IN_WORDS(w, pbd_fluid_set_viscosity(w, fluid, 2, 0), PBD_ERROR_INVALID_ARGUMENT,
                         "viscosity 2 must be in [0, 1]");
    float root[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = root;
    hd.root_normals = up;
    hd.strand_count = 1;
    hd.length = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_add_hair(w, &hd, NULL, NULL), PBD_ERROR_NOT_FINITE, "length nan is not finite");
    hd.length = 0.2f;
    hd.mass = INFINITY;
    CHECK_ERROR_IN_WORDS(w, pbd_add_hair(w, &hd, NULL, NULL), PBD_ERROR_NOT_FINITE, "mass = inf is not finite");
    hd.mass = 1e-4f;
    hd.radius = NAN;
    CHECK_ERROR_IN_WORDS(w, pbd_add_hair(w, &hd, NULL, NULL), PBD_ERROR_NOT_FINITE, "radius = nan is not finite");
    int idx[4] = {free2.first, free2.first + 1, free2.first, 12345}, starts[3] = {0, 2, 4};
    pbd_strands_desc sdesc = pbd_strands_desc_default();
    sdesc.particles = idx;
    sdesc.strand_starts = starts;
    sdesc.strand_count = 2;
    int last = pbd_world_particle_count(w) - 1;
    char said[96];
    snprintf(said, sizeof said, "particles[2] = %d is listed twice or is in another strand set", free2.first);
    CHECK_ERROR_IN_WORDS(w, pbd_add_strands(w, &sdesc, NULL), PBD_ERROR_INVALID_ARGUMENT, said);
    idx[2] = 12345;
    idx[3] = free2.first;
    snprintf(said, sizeof said, "particles[2] = 12345 is not a particle (0..%d)", last);
    CHECK_ERROR_IN_WORDS(w, pbd_add_strands(w, &sdesc, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE, said);
    unsigned char *after = pbdt_save(w, &size_after);
    CHECK(size > 0 && size_after == size && memcmp(before, after, size) == 0);
    free(before);
    free(after);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* ---- objects -------------------------------------------------------------------------------- */
TEST(errors_cloth) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    pbd_mesh m;
    float o[3] = {0, 1.5f, 0}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.5f};
    CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &m)); /* 9 vertices, 8 triangles */
    float pos[27], mass[9];
    int tri[24];
    memcpy(pos, m.positions, sizeof pos);
    memcpy(tri, m.triangles, sizeof tri);
    pbd_mesh_free(&m);
    for (int i = 0; i < 9; ++i) mass[i] = 0.1f;
    pbd_object ob;
    pbd_cloth_desc d0 = pbd_cloth_desc_default(), d;
    d0.positions = pos;
    d0.vertex_count = 9;
    d0.triangles = tri;
    d0.triangle_count = 8;
    BASE_IS_VALID(pbd_add_cloth(T.w, &d0, &ob));
    float bp[27], bm[9];
    int bt[24];
    EXPECT_NULL_WORLD(&S, pbd_add_cloth(NULL, &d0, &ob));
    EXPECT_ERR(&S, pbd_add_cloth(w, NULL, &ob), PBD_ERROR_NULL_POINTER);
#define CL_RESET() (d = d0, memcpy(bp, pos, sizeof bp), memcpy(bm, mass, sizeof bm), memcpy(bt, tri, sizeof bt))
#define CL_FAILS(field_set, want) FAILS_WITH(CL_RESET(), field_set, pbd_add_cloth(w, &d, &ob), want)
#define CL_FAILS2(field_set, a, b) FAILS_WITH2(CL_RESET(), field_set, pbd_add_cloth(w, &d, &ob), a, b)
    CL_FAILS(d.positions = NULL, PBD_ERROR_NULL_POINTER);
    CL_FAILS(d.triangles = NULL, PBD_ERROR_NULL_POINTER);
    CL_FAILS(d.vertex_count = 0, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.vertex_count = -9, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.triangle_count = 0, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.triangle_count = -1, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS((bp[13] = qnan, d.positions = bp), PBD_ERROR_NOT_FINITE);
    CL_FAILS((bp[0] = -pinf, d.positions = bp), PBD_ERROR_NOT_FINITE);
    CL_FAILS((bt[5] = 9, d.triangles = bt), PBD_ERROR_INDEX_OUT_OF_RANGE);
    CL_FAILS((bt[23] = -1, d.triangles = bt), PBD_ERROR_INDEX_OUT_OF_RANGE);
    CL_FAILS(d.density = -0.2f, PBD_ERROR_NEGATIVE_MASS);
    CL_FAILS(d.density = qnan, PBD_ERROR_NOT_FINITE);
    CL_FAILS((bm[4] = -0.1f, d.masses = bm), PBD_ERROR_NEGATIVE_MASS);
    CL_FAILS((bm[4] = qnan, d.masses = bm), PBD_ERROR_NOT_FINITE);
    CL_FAILS(d.stretch_compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.bending_compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS((d.area_constraints = 1, d.area_compliance = -1.0f), PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.stretch_compliance = qnan, PBD_ERROR_NOT_FINITE);
    CL_FAILS(d.bending_compliance = pinf, PBD_ERROR_NOT_FINITE);
    CL_FAILS(d.stretch_stiffness = 1.5f, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.bending_stiffness = -0.1f, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS((d.area_constraints = 1, d.area_stiffness = 2.0f), PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.area_constraints = 2, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.bending_stiffness = qnan, PBD_ERROR_NOT_FINITE);
    CL_FAILS(d.bending = (pbd_bending_model)7, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.bending = (pbd_bending_model)-1, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.thickness = -0.01f, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.thickness = qnan, PBD_ERROR_NOT_FINITE);
    CL_FAILS(d.damping = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS(d.damping = qnan, PBD_ERROR_NOT_FINITE);
    /* zero-area triangle: the third vertex of triangle 0 moved between its first two */
    CL_FAILS((bp[3 * tri[2] + 0] = (pos[3 * tri[0] + 0] + pos[3 * tri[1] + 0]) / 2,
              bp[3 * tri[2] + 1] = (pos[3 * tri[0] + 1] + pos[3 * tri[1] + 1]) / 2,
              bp[3 * tri[2] + 2] = (pos[3 * tri[0] + 2] + pos[3 * tri[1] + 2]) / 2, d.positions = bp),
             PBD_ERROR_DEGENERATE);
    /* two vertices at the same place: a zero-length edge */
    CL_FAILS((bp[3] = bp[0], bp[4] = bp[1], bp[5] = bp[2], d.positions = bp), PBD_ERROR_DEGENERATE);
    /* a repeated index inside a triangle */
    CL_FAILS2((bt[1] = bt[0], d.triangles = bt), PBD_ERROR_DEGENERATE, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS2(d.triangle_count = INT_MAX / 3 + 1, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
    CL_FAILS2(d.vertex_count = INT_MAX / 3 + 1, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
#undef CL_FAILS
#undef CL_FAILS2
#undef CL_RESET
    { /* an edge shared by three triangles is not a manifold: the header names no code */
        float p5[15] = {0, 1.5f, 0, 1, 1.5f, 0, 0.5f, 2.5f, 0, 0.5f, 1.5f, 1, 0.5f, 1.5f, -1};
        int t3[9] = {0, 1, 2, 0, 1, 3, 1, 0, 4};
        d = d0;
        d.positions = p5;
        d.vertex_count = 5;
        d.triangles = t3;
        d.triangle_count = 3;
        EXPECT_FAIL(&S, pbd_add_cloth(w, &d, &ob));
    }
    EXPECT_NULL_WORLD(&S, pbd_object_set_damping(NULL, S.cloth, 1.0f));
    uint32_t no = (uint32_t)pbd_world_object_count(w);
    pbd_object none = {0}, beyond = {no + 1u}, high = {0x80000000u}; /* high: slot field 0, generation 512 */
    EXPECT_ERR(&S, pbd_object_set_damping(w, none, 1.0f), PBD_ERROR_INVALID_HANDLE);
    EXPECT_ERR(&S, pbd_object_set_damping(w, beyond, 1.0f), PBD_ERROR_INVALID_HANDLE);
    EXPECT_ERR(&S, pbd_object_set_damping(w, high, 1.0f), PBD_ERROR_INVALID_HANDLE);
    EXPECT_ERR(&S, pbd_object_set_damping(w, S.cloth, -0.5f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_object_set_damping(w, S.cloth, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_object_set_damping(w, S.cloth, pinf), PBD_ERROR_NOT_FINITE);
    pbd_world_destroy(w);
}

TEST(errors_softbody) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    pbd_mesh m;
    float lo[3] = {-3, 0.5f, -3}, hi[3] = {-2.5f, 1, -2.5f};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &m)); /* 8 vertices, 5 tets */
    float pos[24], mass[8], bp[24], bm[8];
    int tets[20], bt[20];
    memcpy(pos, m.positions, sizeof pos);
    memcpy(tets, m.tets, sizeof tets);
    pbd_mesh_free(&m);
    for (int i = 0; i < 8; ++i) mass[i] = 1.0f;
    pbd_object ob;
    pbd_softbody_desc d0 = pbd_softbody_desc_default(), d;
    d0.positions = pos;
    d0.vertex_count = 8;
    d0.tets = tets;
    d0.tet_count = 5;
    BASE_IS_VALID(pbd_add_softbody(T.w, &d0, &ob));
    EXPECT_NULL_WORLD(&S, pbd_add_softbody(NULL, &d0, &ob));
    EXPECT_ERR(&S, pbd_add_softbody(w, NULL, &ob), PBD_ERROR_NULL_POINTER);
#define SB_RESET() (d = d0, memcpy(bp, pos, sizeof bp), memcpy(bm, mass, sizeof bm), memcpy(bt, tets, sizeof bt))
#define SB_FAILS(field_set, want) FAILS_WITH(SB_RESET(), field_set, pbd_add_softbody(w, &d, &ob), want)
#define SB_FAILS2(field_set, a, b) FAILS_WITH2(SB_RESET(), field_set, pbd_add_softbody(w, &d, &ob), a, b)
    SB_FAILS(d.positions = NULL, PBD_ERROR_NULL_POINTER);
    SB_FAILS(d.tets = NULL, PBD_ERROR_NULL_POINTER);
    SB_FAILS(d.vertex_count = 0, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.tet_count = 0, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.tet_count = -5, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.volume_constraints = 7, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS((bp[7] = qnan, d.positions = bp), PBD_ERROR_NOT_FINITE);
    SB_FAILS((bp[23] = pinf, d.positions = bp), PBD_ERROR_NOT_FINITE);
    SB_FAILS((bt[6] = 8, d.tets = bt), PBD_ERROR_INDEX_OUT_OF_RANGE);
    SB_FAILS((bt[19] = -1, d.tets = bt), PBD_ERROR_INDEX_OUT_OF_RANGE);
    SB_FAILS(d.density = -1000.0f, PBD_ERROR_NEGATIVE_MASS);
    SB_FAILS(d.density = qnan, PBD_ERROR_NOT_FINITE);
    SB_FAILS((bm[3] = -1.0f, d.masses = bm), PBD_ERROR_NEGATIVE_MASS);
    SB_FAILS((bm[3] = pinf, d.masses = bm), PBD_ERROR_NOT_FINITE);
    SB_FAILS(d.edge_compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.volume_compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.edge_compliance = qnan, PBD_ERROR_NOT_FINITE);
    SB_FAILS(d.edge_stiffness = 1.5f, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.volume_stiffness = -0.5f, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.volume_stiffness = qnan, PBD_ERROR_NOT_FINITE);
    SB_FAILS(d.radius = -0.01f, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS(d.radius = qnan, PBD_ERROR_NOT_FINITE);
    SB_FAILS(d.damping = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    /* a flat tet: its 4th vertex moved into the plane of the other three */
    {
        int a = tets[0], b = tets[1], c = tets[2], e = tets[3];
        SB_FAILS((bp[3 * e + 0] = (pos[3 * a] + pos[3 * b] + pos[3 * c]) / 3,
                  bp[3 * e + 1] = (pos[3 * a + 1] + pos[3 * b + 1] + pos[3 * c + 1]) / 3,
                  bp[3 * e + 2] = (pos[3 * a + 2] + pos[3 * b + 2] + pos[3 * c + 2]) / 3, d.positions = bp),
                 PBD_ERROR_DEGENERATE);
    }
    /* an inverted tet (negative volume): the header requires positive volume */
    SB_FAILS2((bt[0] = tets[1], bt[1] = tets[0], d.tets = bt), PBD_ERROR_DEGENERATE, PBD_ERROR_INVALID_ARGUMENT);
    /* a repeated index inside a tet */
    SB_FAILS2((bt[2] = bt[0], d.tets = bt), PBD_ERROR_DEGENERATE, PBD_ERROR_INVALID_ARGUMENT);
    SB_FAILS2(d.tet_count = INT_MAX / 4 + 1, PBD_ERROR_OVERFLOW, PBD_ERROR_INVALID_ARGUMENT);
#undef SB_FAILS
#undef SB_FAILS2
#undef SB_RESET
    pbd_world_destroy(w);
}

TEST(errors_balloon) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    pbd_mesh m;
    float c[3] = {3, 2, 3};
    CHECK_OK(pbd_mesh_sphere(1, c, 0.4f, &m));
    int nt = m.triangle_count;
    int *bt = (int *)malloc(sizeof(int) * 3 * nt);
    float *bp = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
    pbd_object ob;
    pbd_balloon_desc d0 = pbd_balloon_desc_default(), d;
    d0.cloth.positions = m.positions;
    d0.cloth.vertex_count = m.vertex_count;
    d0.cloth.triangles = m.triangles;
    d0.cloth.triangle_count = nt;
    BASE_IS_VALID(pbd_add_balloon(T.w, &d0, &ob));
    EXPECT_NULL_WORLD(&S, pbd_add_balloon(NULL, &d0, &ob));
    EXPECT_ERR(&S, pbd_add_balloon(w, NULL, &ob), PBD_ERROR_NULL_POINTER);
#define BA_RESET() \
    (d = d0, memcpy(bt, m.triangles, sizeof(int) * 3 * nt), memcpy(bp, m.positions, sizeof(float) * 3 * m.vertex_count))
#define BA_FAILS(field_set, want) FAILS_WITH(BA_RESET(), field_set, pbd_add_balloon(w, &d, &ob), want)
    BA_FAILS(d.pressure = 0.0f, PBD_ERROR_INVALID_ARGUMENT);
    BA_FAILS(d.pressure = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    BA_FAILS(d.pressure = qnan, PBD_ERROR_NOT_FINITE);
    BA_FAILS(d.volume_compliance = -1.0f, PBD_ERROR_INVALID_ARGUMENT);
    BA_FAILS(d.volume_compliance = qnan, PBD_ERROR_NOT_FINITE);
    BA_FAILS(d.volume_stiffness = 3.0f, PBD_ERROR_INVALID_ARGUMENT);
    BA_FAILS(d.cloth.triangle_count = nt - 1, PBD_ERROR_NOT_CLOSED); /* a hole */
    BA_FAILS((bt[7] = m.triangles[8], bt[8] = m.triangles[7], d.cloth.triangles = bt),
             PBD_ERROR_NOT_CLOSED); /* flipped */
    BA_FAILS((bp[10] = qnan, d.cloth.positions = bp), PBD_ERROR_NOT_FINITE);
    BA_FAILS(d.cloth.density = -1.0f, PBD_ERROR_NEGATIVE_MASS);
    BA_FAILS(d.cloth.positions = NULL, PBD_ERROR_NULL_POINTER);
    { /* an open grid is not closed */
        pbd_mesh g;
        float o[3] = {3, 3, 3}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
        CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &g));
        BA_FAILS((d.cloth.positions = g.positions, d.cloth.vertex_count = g.vertex_count,
                  d.cloth.triangles = g.triangles, d.cloth.triangle_count = g.triangle_count),
                 PBD_ERROR_NOT_CLOSED);
        pbd_mesh_free(&g);
    }
#undef BA_FAILS
#undef BA_RESET
    free(bt);
    free(bp);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* ---- colliders ------------------------------------------------------------------------------ */
TEST(errors_colliders) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    pbd_collider c;
    float p[3] = {0, 1, 0}, up[3] = {0, 1, 0}, zero[3] = {0, 0, 0}, nan3[3] = {0, qnan, 0}, inf3[3] = {pinf, 0, 0},
          he[3] = {0.1f, 0.2f, 0.3f}, rot[4] = {0, 0, 0, 1}, qz[4] = {0, 0, 0, 0}, qn[4] = {0, 0, qnan, 1},
          b[3] = {0, 2, 0};
    pbd_collider_desc d0 = pbd_collider_desc_default(), d;
    d0.shape = PBD_COLLIDER_SPHERE;
    d0.radius = 0.2f;
    d0.half_height = 0.3f;
    d0.half_extents[0] = d0.half_extents[1] = d0.half_extents[2] = 0.2f;
    d0.position[1] = 1;
    {
        scene T;
        if (build_scene(&T)) {
            for (int s = 0; s < 4; ++s) {
                d = d0;
                d.shape = (pbd_collider_shape)s;
                CHECK_OK(pbd_add_collider(T.w, &d, &c));
            }
        }
        pbd_world_destroy(T.w);
    }
    EXPECT_NULL_WORLD(&S, pbd_add_collider(NULL, &d0, &c));
    EXPECT_ERR(&S, pbd_add_collider(w, NULL, &c), PBD_ERROR_NULL_POINTER);
#define CO_FAILS(field_set, want) FAILS_WITH(d = d0, field_set, pbd_add_collider(w, &d, &c), want)
#define CO_FAILS2(field_set, a, b) FAILS_WITH2(d = d0, field_set, pbd_add_collider(w, &d, &c), a, b)
    CO_FAILS(d.shape = (pbd_collider_shape)4, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS(d.shape = (pbd_collider_shape)-1, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS(d.position[2] = qnan, PBD_ERROR_NOT_FINITE);
    CO_FAILS(d.position[0] = pinf, PBD_ERROR_NOT_FINITE);
    CO_FAILS((d.shape = PBD_COLLIDER_BOX, d.rotation[1] = qnan), PBD_ERROR_NOT_FINITE);
    CO_FAILS(d.radius = qnan, PBD_ERROR_NOT_FINITE);
    CO_FAILS2(d.radius = 0.0f, PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    CO_FAILS2(d.radius = -1.0f, PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    CO_FAILS2((d.shape = PBD_COLLIDER_CAPSULE, d.radius = -0.1f), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    CO_FAILS2((d.shape = PBD_COLLIDER_CAPSULE, d.half_height = -0.1f), PBD_ERROR_INVALID_ARGUMENT,
              PBD_ERROR_DEGENERATE);
    CO_FAILS((d.shape = PBD_COLLIDER_CAPSULE, d.half_height = qnan), PBD_ERROR_NOT_FINITE);
    CO_FAILS2((d.shape = PBD_COLLIDER_BOX, d.half_extents[1] = -0.1f), PBD_ERROR_INVALID_ARGUMENT,
              PBD_ERROR_DEGENERATE);
    CO_FAILS2((d.shape = PBD_COLLIDER_BOX, d.half_extents[2] = 0.0f), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    CO_FAILS((d.shape = PBD_COLLIDER_BOX, d.half_extents[0] = pinf), PBD_ERROR_NOT_FINITE);
    CO_FAILS((d.shape = PBD_COLLIDER_BOX, d.half_extents[0] = d.half_extents[1] = d.half_extents[2] = 0.1f,
              d.rounding = -0.01f),
             PBD_ERROR_INVALID_ARGUMENT); /* a box's rounding */
    CO_FAILS((d.shape = PBD_COLLIDER_BOX, d.rounding = qnan), PBD_ERROR_NOT_FINITE);
    CO_FAILS2((d.shape = PBD_COLLIDER_BOX, d.rotation[3] = 0.0f), PBD_ERROR_INVALID_ARGUMENT,
              PBD_ERROR_DEGENERATE); /* zero quaternion */
    CO_FAILS(d.static_friction = -0.1f, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS(d.dynamic_friction = -0.1f, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS((d.static_friction = 0.2f, d.dynamic_friction = 0.3f), PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS(d.static_friction = qnan, PBD_ERROR_NOT_FINITE);
    CO_FAILS(d.restitution = 1.5f, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS(d.restitution = -0.5f, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS(d.restitution = qnan, PBD_ERROR_NOT_FINITE);
    /* sizes beyond PBD_MAX_COORDINATE: a sphere of radius 3e38 was taken,
       and then every step failed (an audit) */
    CO_FAILS(d.radius = 3e38f, PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS((d.shape = PBD_COLLIDER_CAPSULE, d.half_height = 2e6f), PBD_ERROR_INVALID_ARGUMENT);
    CO_FAILS((d.shape = PBD_COLLIDER_BOX, d.half_extents[2] = 1e30f), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "half_extents[2] 1e+30 m is above PBD_MAX_COORDINATE = 1e+06 m") != NULL);
#undef CO_FAILS
#undef CO_FAILS2
    /* shortcuts */
    EXPECT_NULL_WORLD(&S, pbd_add_collider_plane(NULL, p, up, 0.5f, NULL));
    EXPECT_ERR(&S, pbd_add_collider_plane(w, NULL, up, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_plane(w, p, NULL, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_plane(w, nan3, up, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_add_collider_plane(w, p, inf3, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR2(&S, pbd_add_collider_plane(w, p, zero, 0.5f, NULL), PBD_ERROR_DEGENERATE, PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_add_collider_plane(w, p, up, -0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_add_collider_plane(w, p, up, qnan, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_NULL_WORLD(&S, pbd_add_collider_sphere(NULL, p, 0.2f, 0.5f, NULL));
    EXPECT_ERR(&S, pbd_add_collider_sphere(w, NULL, 0.2f, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_sphere(w, nan3, 0.2f, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_add_collider_sphere(w, p, qnan, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_add_collider_sphere(w, p, pinf, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR2(&S, pbd_add_collider_sphere(w, p, 0.0f, 0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    EXPECT_ERR2(&S, pbd_add_collider_sphere(w, p, -0.2f, 0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    EXPECT_ERR(&S, pbd_add_collider_sphere(w, p, 0.2f, -1.0f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_NULL_WORLD(&S, pbd_add_collider_capsule(NULL, p, b, 0.1f, 0.5f, NULL));
    EXPECT_ERR(&S, pbd_add_collider_capsule(w, NULL, b, 0.1f, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_capsule(w, p, NULL, 0.1f, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_capsule(w, p, nan3, 0.1f, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_add_collider_capsule(w, inf3, b, 0.1f, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR2(&S, pbd_add_collider_capsule(w, p, b, -0.1f, 0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT,
                PBD_ERROR_DEGENERATE);
    EXPECT_ERR(&S, pbd_add_collider_capsule(w, p, b, 0.1f, qnan, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_NULL_WORLD(&S, pbd_add_collider_box(NULL, p, he, rot, 0.5f, NULL));
    EXPECT_ERR(&S, pbd_add_collider_box(w, NULL, he, rot, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_box(w, p, NULL, rot, 0.5f, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_add_collider_box(w, nan3, he, rot, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_add_collider_box(w, p, inf3, rot, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_add_collider_box(w, p, he, qn, 0.5f, NULL), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR2(&S, pbd_add_collider_box(w, p, he, qz, 0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    {
        float hneg[3] = {0.1f, -0.2f, 0.3f};
        EXPECT_ERR2(&S, pbd_add_collider_box(w, p, hneg, rot, 0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT,
                    PBD_ERROR_DEGENERATE);
    }
    EXPECT_ERR(&S, pbd_add_collider_box(w, p, he, rot, -0.5f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    /* existing colliders */
    uint32_t nc = (uint32_t)pbd_world_collider_count(w);
    /* forged handles: none, slots beyond the pool, the high bit alone (slot field 0, generation 512) */
    const uint32_t bad_c[] = {0u, nc + 1u, nc + 4u, 0x80000000u};
    float dist;
    for (unsigned i = 0; i < sizeof bad_c / sizeof bad_c[0]; ++i) {
        pbd_collider bc = {bad_c[i]};
        EXPECT_ERR(&S, pbd_collider_set_pose(w, bc, p, rot), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_collider_set_friction(w, bc, 0.5f, 0.4f, 0.0f), PBD_ERROR_INVALID_HANDLE);
        EXPECT_ERR(&S, pbd_collider_distance(w, bc, p, &dist), PBD_ERROR_INVALID_HANDLE);
    }
    pbd_collider s = S.sphere;
    EXPECT_NULL_WORLD(&S, pbd_collider_set_pose(NULL, s, p, rot));
    EXPECT_NULL_WORLD(&S, pbd_collider_set_friction(NULL, s, 0.5f, 0.4f, 0.0f));
    EXPECT_NULL_WORLD(&S, pbd_collider_distance(NULL, s, p, &dist));
    EXPECT_ERR(&S, pbd_collider_set_pose(w, s, NULL, rot), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_collider_set_pose(w, s, nan3, rot), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_collider_set_pose(w, s, inf3, rot), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_collider_set_pose(w, s, p, qn), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR2(&S, pbd_collider_set_pose(w, s, p, qz), PBD_ERROR_INVALID_ARGUMENT, PBD_ERROR_DEGENERATE);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, -0.5f, 0.0f, 0.0f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, 0.5f, -0.1f, 0.0f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, 0.3f, 0.4f, 0.0f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, 0.5f, 0.4f, 1.5f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, 0.5f, 0.4f, -0.1f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, qnan, 0.4f, 0.0f), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_collider_set_friction(w, s, 0.5f, 0.4f, qnan), PBD_ERROR_NOT_FINITE);
    EXPECT_ERR(&S, pbd_collider_distance(w, s, NULL, &dist), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_collider_distance(w, s, p, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_ERR(&S, pbd_collider_distance(w, s, nan3, &dist), PBD_ERROR_NOT_FINITE);
    CHECK_OK(pbd_collider_distance(w, s, p, &dist));
    CHECK_NEAR(dist, 0.3, 1e-5); /* sphere at (0, 0.5, 0), radius 0.2 */
    pbd_world_destroy(w);
}

/* ---- stale, zero and forged handles ------------------------------------------------------- */
/* A handle with id 0, one whose slot is beyond the pool and one with the
   right slot but another generation (what a handle kept after a removal
   looks like) are each refused with PBD_ERROR_INVALID_HANDLE and a message
   that names the kind, and leave the world's snapshot byte-identical. */
#define EXPECT_BAD_HANDLE(S, expr, kind)                                                                  \
    do {                                                                                                  \
        EXPECT_ERR(S, expr, PBD_ERROR_INVALID_HANDLE);                                                    \
        CHECK_MSG(strstr(pbd_world_last_error((S)->w), kind) != NULL,                                     \
                  "%s: the message \"%s\" does not name the " kind, #expr, pbd_world_last_error((S)->w)); \
    } while (0)
TEST(errors_stale_handles) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    const uint32_t other_gen = 1u << PBD_HANDLE_SLOT_BITS, beyond = (1u << PBD_HANDLE_SLOT_BITS) - 1u;
    CHECK(S.dist.id != 0 && S.cloth.id != 0 && S.sphere.id != 0);
    pbd_constraint_type type;
    int count;
    float mean, mx, p[3] = {0, 1, 0}, rot[4] = {0, 0, 0, 1}, dist;
    pbd_object_parts parts;
    for (int k = 0; k < 3; ++k) {
        uint32_t gid = k == 0 ? 0u : k == 1 ? beyond : S.dist.id + other_gen;
        uint32_t oid = k == 0 ? 0u : k == 1 ? beyond : S.cloth.id + other_gen;
        uint32_t cid = k == 0 ? 0u : k == 1 ? beyond : S.sphere.id + other_gen;
        pbd_group g = {gid};
        pbd_object o = {oid};
        pbd_collider c = {cid};
        EXPECT_BAD_HANDLE(&S, pbd_group_info(w, g, &type, &count), "group");
        EXPECT_BAD_HANDLE(&S, pbd_group_set_compliance(w, g, 1e-4f), "group");
        EXPECT_BAD_HANDLE(&S, pbd_group_set_enabled(w, g, 0), "group");
        EXPECT_BAD_HANDLE(&S, pbd_group_error(w, g, &mean, &mx), "group");
        EXPECT_BAD_HANDLE(&S, pbd_object_get_parts(w, o, &parts), "object");
        EXPECT_BAD_HANDLE(&S, pbd_object_set_damping(w, o, 1.0f), "object");
        EXPECT_BAD_HANDLE(&S, pbd_object_set_drag(w, o, 1.0f), "object");
        EXPECT_BAD_HANDLE(&S, pbd_object_get_drag(w, o, &dist), "object");
        EXPECT_BAD_HANDLE(&S, pbd_collider_set_pose(w, c, p, rot), "collider");
        EXPECT_BAD_HANDLE(&S, pbd_collider_set_friction(w, c, 0.5f, 0.4f, 0.0f), "collider");
        EXPECT_BAD_HANDLE(&S, pbd_collider_distance(w, c, p, &dist), "collider");
    }
    /* the same calls with the real handles work (so the failures are about the handle) */
    CHECK_OK(pbd_group_info(w, S.dist, &type, &count));
    CHECK_OK(pbd_object_get_parts(w, S.cloth, &parts));
    CHECK_OK(pbd_collider_distance(w, S.sphere, p, &dist));
    CHECK_OK(pbd_group_set_compliance(w, S.dist, 1e-4f));
    CHECK_OK(pbd_object_set_damping(w, S.cloth, 1.0f));
    CHECK_OK(pbd_object_set_drag(w, S.cloth, 1.0f));
    CHECK_OK(pbd_object_get_drag(w, S.cloth, &dist));
    CHECK_OK(pbd_collider_set_friction(w, S.sphere, 0.5f, 0.4f, 0.0f));
    pbd_world_destroy(w);
}
#undef EXPECT_BAD_HANDLE

/* ---- the stateless helper that can fail ---------------------------------------------------- */
TEST(errors_isometric_rest) {
    float ok[12] = {0, 0, 0, 1, 0, 0, 0.5f, -1, 0, 0.5f, 1, 0.3f}, out[6];
    CHECK_OK(pbd_isometric_bending_rest(ok, out));
    float saved[6];
    memcpy(saved, out, sizeof out);
    CHECK_RESULT(pbd_isometric_bending_rest(NULL, out), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_isometric_bending_rest(ok, NULL), PBD_ERROR_NULL_POINTER);
    float b[12];
    memcpy(b, ok, sizeof b);
    b[4] = NAN;
    CHECK_RESULT(pbd_isometric_bending_rest(b, out), PBD_ERROR_NOT_FINITE);
    memcpy(b, ok, sizeof b);
    b[9] = INFINITY;
    CHECK_RESULT(pbd_isometric_bending_rest(b, out), PBD_ERROR_NOT_FINITE);
    memcpy(b, ok, sizeof b);
    b[6] = 2;
    b[7] = 0;
    b[8] = 0; /* wing on the edge line */
    CHECK_RESULT(pbd_isometric_bending_rest(b, out), PBD_ERROR_DEGENERATE);
    memcpy(b, ok, sizeof b);
    b[3] = 0; /* zero-length edge */
    CHECK_RESULT(pbd_isometric_bending_rest(b, out), PBD_ERROR_DEGENERATE);
    CHECK(memcmp(saved, out, sizeof out) == 0); /* failures wrote nothing */
}

/* ---- running out of memory half-way leaves the world as it was --------------------------- */
typedef struct budget {
    long left;
    long live;
} budget;
static void *budget_alloc(void *user, size_t size) {
    budget *b = (budget *)user;
    if (b->left <= 0) return NULL;
    b->left--;
    b->live++;
    return malloc(size);
}
static void budget_free(void *user, void *p) {
    budget *b = (budget *)user;
    if (p) {
        b->live--;
        free(p);
    }
}
TEST(errors_out_of_memory_leaves_world_unchanged) {
    budget B = {1000000, 0};
    pbd_world_desc d = pbd_world_desc_default();
    d.allocator.alloc = budget_alloc;
    d.allocator.free = budget_free;
    d.allocator.user = &B;
    d.log = count_log;
    B.left = 0;
    pbd_world *w = NULL;
    CHECK_RESULT(pbd_world_create(&d, &w), PBD_ERROR_OUT_OF_MEMORY);
    CHECK(w == NULL && B.live == 0);
    B.left = 1000000;
    CHECK_OK(pbd_world_create(&d, &w));
    if (!w) return;
    scene S;
    memset(&S, 0, sizeof S);
    S.w = w;
    float pp[6] = {0, 1, 0, 1, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pp;
    pd.count = 2;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    for (int i = 0; i < 2; ++i) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    pbd_mesh m;
    float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(6, 6, o, u, v, &m));
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    c.area_constraints = 1;
    pbd_object ob;
    /* allow k allocations, k = 0, 1, 2, ... until the cloth fits */
    int k, ok = 0;
    for (k = 0; k < 200 && !ok; ++k) {
        world_state before = take_state(w);
        int logs = log_calls;
        B.left = k;
        pbd_result res = pbd_add_cloth(w, &c, &ob);
        B.left = 1000000;
        if (res == PBD_OK) {
            ok = 1;
            free(before.snap);
            break;
        }
        CHECK_MSG(res == PBD_ERROR_OUT_OF_MEMORY, "with %d allocations allowed: %s", k, pbd_result_string(res));
        check_error(w, &before, res, PBD_ERROR_OUT_OF_MEMORY, PBD_ERROR_OUT_OF_MEMORY, 0, logs, 1,
                    "pbd_add_cloth out of memory", __FILE__, __LINE__);
        free(before.snap);
    }
    CHECK(ok);
    CHECK(k > 0);
    /* the same for a collider and a constraint group */
    float sc[3] = {0, 0, 0};
    int di[2] = {r.first, r.first + 1};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = di;
    pbd_group g;
#define OOM_LOOP(expr)                                                                                        \
    for (k = 0, ok = 0; k < 50 && !ok; ++k) {                                                                 \
        world_state before = take_state(w);                                                                   \
        int logs = log_calls;                                                                                 \
        B.left = k;                                                                                           \
        pbd_result res = (expr);                                                                              \
        B.left = 1000000;                                                                                     \
        if (res == PBD_OK) ok = 1;                                                                            \
        else                                                                                                  \
            check_error(w, &before, res, PBD_ERROR_OUT_OF_MEMORY, PBD_ERROR_OUT_OF_MEMORY, 0, logs, 1, #expr, \
                        __FILE__, __LINE__);                                                                  \
        free(before.snap);                                                                                    \
    }                                                                                                         \
    CHECK(ok)
    OOM_LOOP(pbd_add_collider_sphere(w, sc, 0.2f, 0.5f, NULL));
    OOM_LOOP(pbd_add_constraints(w, &cd, &g));
    OOM_LOOP(pbd_add_particles(w, &pd, &r));
    /* pins that build, rebuild and empty the cloth's automatic tethers */
    int ob0 = pbdt_parts(w, ob).particles.first;
    OOM_LOOP(pbd_particle_pin(w, ob0));
    OOM_LOOP(pbd_particle_pin(w, ob0 + 5));
    OOM_LOOP(pbd_particle_unpin(w, ob0));
    OOM_LOOP(pbd_particle_set_kinematic(w, ob0 + 35, 1));
#undef OOM_LOOP
    for (int i = 0; i < 3; ++i) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    CHECK_MSG(B.live == 0, "%ld blocks leaked", B.live);
}

/* ---- last error and the log --------------------------------------------------------------- */
TEST(errors_last_error_and_log) {
    scene S;
    if (!build_scene(&S)) {
        pbd_world_destroy(S.w);
        return;
    }
    pbd_world *w = S.w;
    int before = log_calls;
    CHECK_RESULT(pbd_world_step(w, -1.0f), PBD_ERROR_INVALID_TIME_STEP);
    CHECK(log_calls == before + 1);
    CHECK(log_last == PBD_ERROR_INVALID_TIME_STEP);
    const char *e = pbd_world_last_error(w);
    CHECK(e != NULL && strlen(e) > 0);
    char first[256];
    snprintf(first, sizeof first, "%s", e ? e : "");
    CHECK_RESULT(pbd_particle_set_mass(w, -5, 1.0f), PBD_ERROR_INDEX_OUT_OF_RANGE);
    CHECK(log_calls == before + 2);
    CHECK(log_last == PBD_ERROR_INDEX_OUT_OF_RANGE);
    e = pbd_world_last_error(w);
    CHECK(e != NULL && strlen(e) > 0 && strcmp(e, first) != 0); /* the message is the latest one */
    /* successful calls do not log */
    CHECK_OK(pbd_world_step(w, 1.0f / 60));
    CHECK(log_calls == before + 2);
    pbd_world_destroy(w);
}

/* Every list output of pbd.h follows the manual's one convention
   (CONVENTIONS, Lists): (out, max, *count); (NULL, 0, &n) sizes the list;
   a short buffer is no error and still reports the full length; count is
   required; max < 0, or max > 0 with no buffer, is refused with a message. */
#define LIST_CONVENTION(w, CALL)                                                                     \
    do {                                                                                             \
        int n_ = -1, k_ = -1;                                                                        \
        CHECK_OK(CALL(NULL, 0, &n_));                                                                \
        CHECK_MSG(n_ > 1, "%s: %d items, the scene should give several", #CALL, n_);                 \
        for (int i_ = 0; i_ < (int)(sizeof buf / sizeof buf[0]); ++i_) buf[i_] = -7;                 \
        CHECK_OK(CALL(buf, 1, &k_));                                                                 \
        CHECK_MSG(k_ == n_, "%s: a short buffer reported %d of %d", #CALL, k_, n_);                  \
        CHECK_MSG(buf[0] != -7 && buf[ITEM_MAX] == -7, "%s: wrote no item or more than one", #CALL); \
        CHECK_WORLD_ERROR(w, CALL(buf, -1, &k_), PBD_ERROR_INVALID_ARGUMENT, "max");                 \
        CHECK_WORLD_ERROR(w, CALL(NULL, 1, &k_), PBD_ERROR_INVALID_ARGUMENT, "out is NULL");         \
        CHECK_WORLD_ERROR(w, CALL(buf, n_, NULL), PBD_ERROR_NULL_POINTER, "count");                  \
    } while (0)
enum { ITEM_MAX = 4 }; /* ints in the largest item (a self-contact quadruple) */

TEST(errors_lists_follow_one_convention) {
    pbd_world *w = pbdt_world(-9.81f);
    pbd_mesh m;
    float o[3] = {0, 1, 0}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.5f};
    CHECK_OK(pbd_mesh_grid(6, 6, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &cd, &cloth));
    pbd_object_parts parts = pbdt_parts(w, cloth);
    CHECK_OK(pbd_particle_pin(w, parts.particles.first));
    CHECK_OK(pbd_particle_pin(w, parts.particles.first + 5));
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = cloth;
    td.triangles = m.triangles;
    td.triangle_count = m.triangle_count;
    CHECK_OK(pbd_add_tearing(w, &td, NULL));
    pbd_surface surface = {0};
    CHECK_OK(pbd_add_cloth_self_collision(w, cloth, &cd, 0.02f, &surface));
    /* a second cloth 1 cm under it: candidates at rest (a surface thicker
       than its own rest gap is refused) */
    float o2[3] = {0, 0.99f, 0};
    pbd_mesh m2;
    pbd_cloth_desc cd2;
    pbd_object under = pbdt_grid_cloth(w, 6, 6, o2, u, v, &m2, &cd2);
    CHECK_OK(pbd_add_cloth_self_collision(w, under, &cd2, 0.02f, NULL));
    pbd_mesh_free(&m2);
    float fp[3 * 8];
    for (int i = 0; i < 8; ++i) {
        fp[3 * i] = 2.0f + 0.05f * (float)(i % 2);
        fp[3 * i + 1] = 0.05f * (float)(i / 4);
        fp[3 * i + 2] = 0.05f * (float)((i / 2) % 2);
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = fp;
    fd.count = 8;
    fd.spacing = 0.05f;
    pbd_fluid fluid;
    CHECK_OK(pbd_add_fluid(w, &fd, &fluid, NULL));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    pbd_lra tethers = {0};
    CHECK_OK(pbd_object_tethers(w, cloth, &tethers));
    int buf[ITEM_MAX * 2];
    float fbuf[2], q[3] = {fp[0], fp[1], fp[2]};
    (void)fbuf;
#define GROUP_COLORS(out, max, count) pbd_group_colors(w, parts.stretch, out, max, count, NULL)
#define COLOR_PARTICLES(out, max, count) pbd_group_color_particles(w, parts.stretch, 0, out, max, count)
#define QUERY(out, max, count) pbd_world_query_particles(w, q, 0.2f, out, max, count)
#define NEIGHBORS(out, max, count) pbd_world_particle_neighbors(w, pbd_world_particle_count(w) - 1, out, max, count)
#define DENSITIES(out, max, count) pbd_fluid_densities(w, fluid, (float *)(void *)(out), max, count)
#define TETHERS(out, max, count) pbd_lra_tethers(w, tethers, out, NULL, NULL, max, count)
#define OBJECT_TRIS(out, max, count) pbd_object_triangles(w, cloth, out, max, count)
#define SURFACE_TRIS(out, max, count) pbd_surface_triangles(w, surface, out, max, count)
#define SELF_CONTACTS(out, max, count) pbd_world_self_contacts(w, out, max, count, NULL)
    LIST_CONVENTION(w, GROUP_COLORS);
    LIST_CONVENTION(w, COLOR_PARTICLES);
    LIST_CONVENTION(w, QUERY);
    LIST_CONVENTION(w, NEIGHBORS);
    LIST_CONVENTION(w, DENSITIES);
    LIST_CONVENTION(w, TETHERS);
    LIST_CONVENTION(w, OBJECT_TRIS);
    LIST_CONVENTION(w, SURFACE_TRIS);
    LIST_CONVENTION(w, SELF_CONTACTS);
#undef GROUP_COLORS
#undef COLOR_PARTICLES
#undef QUERY
#undef NEIGHBORS
#undef DENSITIES
#undef TETHERS
#undef OBJECT_TRIS
#undef SURFACE_TRIS
#undef SELF_CONTACTS
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

void suite_errors(void) {
    RUN(errors_result_strings);
    RUN(errors_world_create);
    RUN(errors_world_parameters);
    RUN(errors_particles);
    RUN(errors_mass_and_radius_bounds);
    RUN(errors_positions_beyond_max_coordinate);
    RUN(errors_repeated_elements_are_refused);
    RUN(errors_open_meshes_are_refused_naming_an_edge);
    RUN(errors_density_leaves_no_vertex_massless);
    RUN(errors_step_names_masses_too_far_apart);
    RUN(errors_constraints);
    RUN(errors_attachments);
    RUN(errors_mesh_volume_group);
    RUN(errors_group_parameters);
    RUN(errors_switches_take_0_or_1);
    RUN(errors_messages_name_the_one_field_at_fault);
    RUN(errors_cloth);
    RUN(errors_softbody);
    RUN(errors_balloon);
    RUN(errors_colliders);
    RUN(errors_stale_handles);
    RUN(errors_isometric_rest);
    RUN(errors_out_of_memory_leaves_world_unchanged);
    RUN(errors_last_error_and_log);
    RUN(errors_lists_follow_one_convention);
}
