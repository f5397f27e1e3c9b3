/* tests/test_robust.c - no state reads or writes out of bounds, and the
   step never corrupts the world silently (pbd.h CONVENTIONS):
     * time steps outside [PBD_MIN_TIME_STEP, PBD_MAX_TIME_STEP] are refused
       and change nothing, among them the two that once made a fluid read
       out of bounds (1e-40 and 1e20);
     * at the smallest valid step and the most substeps, a rigid distance
       constraint and one of a huge (valid) compliance stay finite;
     * a step that makes NaN or infinity (an acceleration field, a plugin)
       returns PBD_ERROR_NOT_FINITE naming the particle, and the world is
       back at its state before the step: the snapshot byte-identical, and
       the plugins' state too (pbd_sm.h bodies and oriented particles), so
       the world steps on with the bits of a twin that never saw it;
     * NaN, +-Inf and 1e30 through every float-to-index path of a step (the
       hash grid of fluids and particle contact, a signed-distance grid
       collider, a BVH mesh collider, cloth self-collision) index nothing
       outside its arrays (run under AddressSanitizer by SAN=1). */
#include "test.h"
#include "../pbd_sm.h"
#include <stdlib.h>

typedef struct snap {
    unsigned char *b;
    size_t n;
} snap;
static snap take(const pbd_world *w) {
    snap s;
    s.n = pbd_world_snapshot_size(w);
    s.b = (unsigned char *)malloc(s.n);
    if (pbd_world_save(w, s.b, s.n) != PBD_OK) s.n = 0;
    return s;
}
static int same(const snap *a, const snap *b) { return a->n > 0 && a->n == b->n && memcmp(a->b, b->b, a->n) == 0; }

static int all_finite(const pbd_world *w) {
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    for (int i = 0; i < 4 * pbd_world_particle_count(w); ++i)
        if (!isfinite(x[i]) || !isfinite(v[i])) return 0;
    return 1;
}

/* nx*ny*nz points on a lattice of spacing d from corner o */
static float *lattice(int nx, int ny, int nz, float d, const float *o) {
    float *p = (float *)malloc(sizeof(float) * 3 * (size_t)(nx * ny * nz));
    for (int i = 0; i < nx * ny * nz; ++i) {
        p[3 * i + 0] = o[0] + (float)(i % nx) * d;
        p[3 * i + 1] = o[1] + (float)((i / nx) % ny) * d;
        p[3 * i + 2] = o[2] + (float)(i / (nx * ny)) * d;
    }
    return p;
}

/* A fluid-only world: 5x5x5 particles (125, not a multiple of the 16
   candidates the neighbour search tests at a time, so its padding is used). */
static pbd_world *fluid_world(void) {
    pbd_world *w = pbdt_world(-9.81f);
    const float o[3] = {0, 0.1f, 0};
    CHECK(pbdt_fluid_cube(w, 5, o).count == 125);
    return w;
}

/* ---- time steps ----------------------------------------------------------------- */

/* The two steps that read out of bounds (issue: a fluid-only world at dt =
   1e-40 and 1e20) are refused, the world untouched; steps at both ends of
   the range are taken and stay finite. */
TEST(robust_fluid_dt_out_of_range_refused) {
    pbd_world *w = fluid_world();
    CHECK_OK(pbd_world_step(w, 1.0f / 60));
    snap before = take(w);
    const float bad[] = {1e-40f, 1e20f, 0.5e-6f, 2.0f};
    for (int k = 0; k < 4; ++k) {
        CHECK_RESULT(pbd_world_step(w, bad[k]), PBD_ERROR_INVALID_TIME_STEP);
        snap after = take(w);
        CHECK_MSG(same(&before, &after), "dt = %g changed the world", (double)bad[k]);
        free(after.b);
    }
    CHECK_MSG(strstr(pbd_world_last_error(w), "outside [1e-06, 1] s") != NULL, "message: %s", pbd_world_last_error(w));
    CHECK_OK(pbd_world_step(w, PBD_MIN_TIME_STEP));
    CHECK_OK(pbd_world_step(w, PBD_MAX_TIME_STEP));
    CHECK(all_finite(w));
    free(before.b);
    pbd_world_destroy(w);
}

/* The smallest substep the range allows, h = 1e-6 s / 1000 = 1e-9 s: a
   rigid distance constraint (which at dt = 1e-22 made NaN) is kept, and one
   of compliance 1e30 m/N (valid; compliance / h^2 = 1e48 leaves float
   range, capped) does nothing and stays finite. */
TEST(robust_smallest_substep_stays_finite) {
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1000, 1));
    const float x[12] = {0, 1, 0, 1, 1, 0, 0, 2, 0, 1.5f, 2, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = 4;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    const float v[12] = {0, 0, 1, 0, 0, -1, 0, 0, 0, 0, 0, 0};
    CHECK_OK(pbd_particles_set_velocities(w, r, v));
    int e0[2] = {0, 1}, e1[2] = {2, 3};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = e0;
    CHECK_OK(pbd_add_constraints(w, &cd, NULL));
    cd.indices = e1;
    cd.compliance = 1e30f;
    CHECK_OK(pbd_add_constraints(w, &cd, NULL));
    for (int s = 0; s < 3; ++s) CHECK_OK(pbd_world_step(w, PBD_MIN_TIME_STEP));
    CHECK(all_finite(w));
    const float *p = pbd_world_positions(w);
    float dx = p[0] - p[4], dy = p[1] - p[5], dz = p[2] - p[6];
    CHECK_NEAR(sqrtf(dx * dx + dy * dy + dz * dz), 1.0f, 1e-5f);
    CHECK_NEAR(p[12] - p[8], 1.5f, 1e-6f); /* the soft spring does not pull */
    pbd_world_destroy(w);
}

/* ---- non-finite steps ------------------------------------------------------------- */

/* Everything a step changes: a cloth with self-collision, a soft body, a
   fluid with particle contact, a shape-matching body with plasticity and
   oriented particles (pbd_sm.h plugins), a moving sphere, a signed-distance
   grid and a BVH mesh collider, a plane, a second cloth just above the
   first (cloth-cloth self-collision candidates). The soft body is object
   1, from particle 64. */
typedef struct rich {
    pbd_world *w;
    pbd_sm_body body;
    pbd_collider sphere;
    int steps;
} rich;

static rich rich_world(void) {
    rich R;
    memset(&R, 0, sizeof R);
    pbd_world *w = R.w = pbdt_world(-9.81f);
    pbd_mesh m;
    float o[3] = {-0.4f, 0.6f, -0.4f}, u[3] = {0.8f, 0, 0}, v[3] = {0, 0, 0.8f};
    CHECK_OK(pbd_mesh_grid(8, 8, o, u, v, &m));
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &c, &cloth));
    CHECK_OK(pbd_add_cloth_self_collision(w, cloth, &c, 0.01f, NULL));
    pbd_mesh_free(&m);
    for (int i = 0; i < 8; ++i)
        CHECK_OK(pbd_particle_pin(w, 8 * i)); /* held, so that the other cloth moves against it */
    float lo[3] = {1, 0.3f, 0}, hi[3] = {1.3f, 0.6f, 0.3f};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &m));
    pbd_softbody_desc sb = pbd_softbody_desc_default();
    sb.positions = m.positions;
    sb.vertex_count = m.vertex_count;
    sb.tets = m.tets;
    sb.tet_count = m.tet_count;
    CHECK_OK(pbd_add_softbody(w, &sb, NULL));
    pbd_mesh_free(&m);
    /* fluid */
    const float fo[3] = {-1.2f, 0.05f, 0};
    float *fp = lattice(5, 5, 5, 0.05f, fo);
    pbd_fluid_desc f = pbd_fluid_desc_default();
    f.positions = fp;
    f.count = 125;
    CHECK_OK(pbd_add_fluid(w, &f, NULL, NULL));
    free(fp);
    /* a shape-matching cube with plasticity, its particles colliding with the fluid */
    const float bo[3] = {-1.1f, 0.5f, 0.05f};
    float *bp = lattice(3, 3, 3, 0.05f, bo);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = bp;
    pd.count = 27;
    pd.radius = 0.025f;
    pbd_range br;
    CHECK_OK(pbd_add_particles(w, &pd, &br));
    free(bp);
    CHECK_OK(pbd_particles_set_particle_contact(w, br, 1));
    int ids[27];
    for (int i = 0; i < 27; ++i) ids[i] = br.first + i;
    pbd_sm_body_desc bd = pbd_sm_body_desc_default();
    bd.particles = ids;
    bd.particle_count = 27;
    bd.mode = PBD_SM_LINEAR;
    bd.creep = 5.0f;
    bd.yield = 0.0f;
    CHECK_OK(pbd_sm_add_body(w, &bd, &R.body));
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = br;
    pbd_sm_oriented ori = {0};
    CHECK_OK(pbd_sm_add_oriented(w, &od, &ori));
    /* colliders */
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0}, sc[3] = {0, 0.2f, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    CHECK_OK(pbd_add_collider_sphere(w, sc, 0.2f, 0.5f, &R.sphere));
    float mc[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_sphere(1, mc, 0.15f, &m));
    pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
    md.positions = m.positions;
    md.vertex_count = m.vertex_count;
    md.triangles = m.triangles;
    md.triangle_count = m.triangle_count;
    md.position[0] = 1.15f;
    md.position[1] = 0.1f;
    md.position[2] = 0.15f;
    md.sdf_resolution = 8;
    CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    md.position[0] = -1.1f;
    md.sdf_resolution = 0;
    CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    pbd_mesh_free(&m);
    /* a second cloth 1.5 thicknesses above the first: cloth-cloth
       candidates from the first step on */
    o[1] = 0.615f;
    CHECK_OK(pbd_mesh_grid(8, 8, o, u, v, &m));
    c = pbdt_cloth_desc(&m);
    pbd_object top;
    CHECK_OK(pbd_add_cloth(w, &c, &top));
    CHECK_OK(pbd_add_cloth_self_collision(w, top, &c, 0.01f, NULL));
    pbd_mesh_free(&m);
    return R;
}

/* One frame: the sphere is sent somewhere (its pose at the end of the
   next step), then the step (which moves the sphere there). */
static void rich_move(rich *R) {
    float pos[3] = {0.1f * (float)(R->steps + 1), 0.2f, 0}, rot[4] = {0, 0, 0, 1};
    CHECK_OK(pbd_collider_set_pose(R->w, R->sphere, pos, rot));
}
static pbd_result rich_step(rich *R) {
    rich_move(R);
    pbd_result r = pbd_world_step(R->w, 1.0f / 60);
    if (r == PBD_OK) R->steps++;
    return r;
}

static float g_bad_value;
static int g_bad_particle;
/* The bad value as the acceleration of one particle (the others: none). */
static void bad_field(void *user, int particle, const float *x, const float *v, double time, float *a) {
    (void)user;
    (void)x;
    (void)v;
    (void)time;
    float b = particle == g_bad_particle ? g_bad_value : 0.0f;
    a[0] = b;
    a[1] = b;
    a[2] = b;
}

/* Particle 64, of the soft body, driven to overflow - by an acceleration
   field of 3e38 m/s^2 (non-finite fields are already read as 0) or by a
   velocity of 3e38 m/s set between steps - makes its
   constraints NaN within the step: the step returns PBD_ERROR_NOT_FINITE
   naming the particle and its object, the
   snapshot is byte-identical to the one before the step, the
   shape-matching state (rotations, plastic states) is that before the
   step, and once the cause is gone the world steps on with the very bits
   of a twin world that never took the failed step. */
TEST(robust_nonfinite_step_rolls_back) {
#ifdef PBDT_FAST_MATH
    /* the implementation at -Ofast: the overflow that makes this test's NaN
       need not happen once the compiler reorders the arithmetic (measured: it
       did not); robust_plugin_nan_rolls_back rolls back there */
    SKIP("forces its non-finite step by float overflow, which -ffast-math reorders away");
#endif
    for (int k = 0; k < 2; ++k) {
        rich A = rich_world(), B = rich_world();
        for (int s = 0; s < 3; ++s) {
            CHECK_OK(rich_step(&A));
            CHECK_OK(rich_step(&B));
        }
        rich_move(&A);
        CHECK_MSG(pbd_world_self_contact_count(A.w) > 0, "no cloth-cloth candidates to roll back");
        snap before = take(A.w);
        float rot0[4], sp0[9], rot1[4], sp1[9];
        CHECK_OK(pbd_sm_body_rotation(A.w, A.body, 0, rot0));
        CHECK_OK(pbd_sm_body_plastic_state(A.w, A.body, 0, sp0));
        g_bad_value = 3e38f;
        int bad = 64; /* of the soft body (the cloth's speed limit, of self-collision, would stop it) */
        pbd_range p0 = {bad, 1};
        float v0[3] = {0, 3e38f, 0}, v_was[3];
        CHECK_OK(pbd_particles_get_velocities(A.w, p0, v_was));
        g_bad_particle = bad;
        if (k == 0) CHECK_OK(pbd_world_set_acceleration_field(A.w, bad_field, NULL));
        else CHECK_OK(pbd_particles_set_velocities(A.w, p0, v0));
        if (k == 1) {
            free(before.b);
            before = take(A.w);
        }
        CHECK_RESULT(pbd_world_step(A.w, 1.0f / 60), PBD_ERROR_NOT_FINITE);
        CHECK_MSG(strstr(pbd_world_last_error(A.w), "particle 64 (object 1)") != NULL, "message: %s",
                  pbd_world_last_error(A.w));
        snap after = take(A.w);
        CHECK_MSG(same(&before, &after), "the failed step (%s) changed the snapshot", k ? "velocity" : "acceleration");
        CHECK(all_finite(A.w));
        CHECK_OK(pbd_sm_body_rotation(A.w, A.body, 0, rot1));
        CHECK_OK(pbd_sm_body_plastic_state(A.w, A.body, 0, sp1));
        CHECK(memcmp(rot0, rot1, sizeof rot0) == 0 && memcmp(sp0, sp1, sizeof sp0) == 0);
        CHECK_OK(pbd_world_set_acceleration_field(A.w, NULL, NULL));
        CHECK_OK(pbd_particles_set_velocities(A.w, p0, v_was));
        for (int s = 0; s < 3; ++s) {
            CHECK_OK(rich_step(&A));
            CHECK_OK(rich_step(&B));
        }
        int n = pbd_world_particle_count(A.w);
        CHECK(memcmp(pbd_world_positions(A.w), pbd_world_positions(B.w), sizeof(float) * 4 * (size_t)n) == 0);
        CHECK(memcmp(pbd_world_velocities(A.w), pbd_world_velocities(B.w), sizeof(float) * 4 * (size_t)n) == 0);
        CHECK_OK(pbd_sm_body_rotation(A.w, A.body, 0, rot0));
        CHECK_OK(pbd_sm_body_rotation(B.w, B.body, 0, rot1));
        CHECK(memcmp(rot0, rot1, sizeof rot0) == 0);
        free(before.b);
        free(after.b);
        pbd_world_destroy(A.w);
        pbd_world_destroy(B.w);
    }
}

/* The error names a particle where the blow-up could begin: a free one.
   A cloth pinned at its first particle, one free particle driven to
   overflow by the field: NaN reaches the pinned particle too (its
   corrections are 0 x NaN), and naming it, the first by index, sent a
   user to the one particle that cannot be the cause (an audit). */
TEST(robust_nonfinite_step_names_a_free_particle) {
    pbd_world *w = pbdt_world(-9.81f);
    float origin[3] = {0, 1, 0}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.5f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(8, 8, origin, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    CHECK_OK(pbd_add_cloth(w, &cd, NULL));
    CHECK_OK(pbd_particle_pin(w, 0));
    for (int s = 0; s < 3; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    g_bad_value = 3e38f;
    g_bad_particle = 5;
    CHECK_OK(pbd_world_set_acceleration_field(w, bad_field, NULL));
    CHECK_RESULT(pbd_world_step(w, 1.0f / 60), PBD_ERROR_NOT_FINITE);
    const char *msg = pbd_world_last_error(w), *at = strstr(msg, "made particle ");
    CHECK_MSG(at != NULL, "message: %s", msg);
    if (at) {
        int named = atoi(at + strlen("made particle "));
        float inv = pbd_world_positions(w)[4 * named + 3]; /* w: the inverse mass */
        CHECK_MSG(inv > 0, "the message names particle %d, held (inverse mass %g): %s", named, (double)inv, msg);
    }
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* A world big enough that the step's passes over all particles (the
   rollback copy, the kinematic particles' start, the non-finite test)
   run in blocks on two threads (pbd.h, pbd__ends_team): a particle blown
   up in the first block, a middle one or the last particle (past the
   SIMD lanes of the last block) is found and named, and the world is
   back as it was; a kinematic particle far from the first block reaches
   its target. */
TEST(robust_nonfinite_step_in_a_big_world_on_two_threads) {
    const int n = 70001, kin = 69000;
    pbd_world *w = pbdt_world(-9.81f);
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        pos[3 * i] = (float)(i % 300) * 0.05f;
        pos[3 * i + 1] = 1.0f + (float)(i / 300 % 100) * 0.05f;
        pos[3 * i + 2] = (float)(i / 30000) * 0.05f;
    }
    pbd_particles_desc d = pbd_particles_desc_default();
    d.positions = pos;
    d.count = n;
    CHECK_OK(pbd_add_particles(w, &d, NULL));
    CHECK_OK(pbd_world_set_threads(w, 2));
    CHECK_OK(pbd_particle_set_kinematic(w, kin, 1));
    float target[3] = {0.5f, 3.0f, -0.25f};
    CHECK_OK(pbd_particle_set_kinematic_target(w, kin, target));
    for (int s = 0; s < 2; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    const float *k = pbd_world_positions(w) + 4 * kin;
    CHECK_MSG(k[0] == target[0] && k[1] == target[1] && k[2] == target[2], "kinematic particle at (%g, %g, %g)",
              (double)k[0], (double)k[1], (double)k[2]);
    int bads[3] = {0, 40000, n - 1};
    for (int b = 0; b < 3; ++b) {
        snap before = take(w);
        float v[3] = {0, 3.4e38f, 0}, v_was[3]; /* FLT_MAX is 3.40282e38: the field's push overflows it */
        pbd_range one = {bads[b], 1};
        CHECK_OK(pbd_particles_get_velocities(w, one, v_was));
        CHECK_OK(pbd_particles_set_velocities(w, one, v));
        free(before.b);
        before = take(w);
        g_bad_value = 3e38f;
        g_bad_particle = bads[b];
        CHECK_OK(pbd_world_set_acceleration_field(w, bad_field, NULL));
        CHECK_RESULT(pbd_world_step(w, 1.0f / 60), PBD_ERROR_NOT_FINITE);
        char named[64];
        snprintf(named, sizeof named, "made particle %d ", bads[b]);
        CHECK_MSG(strstr(pbd_world_last_error(w), named) != NULL, "message: %s", pbd_world_last_error(w));
        snap after = take(w);
        CHECK_MSG(same(&before, &after), "the failed step changed the snapshot (particle %d)", bads[b]);
        CHECK(all_finite(w));
        CHECK_OK(pbd_world_set_acceleration_field(w, NULL, NULL));
        CHECK_OK(pbd_particles_set_velocities(w, one, v_was));
        CHECK_OK(pbd_world_step(w, 1.0f / 60));
        free(before.b);
        free(after.b);
    }
    free(pos);
    pbd_world_destroy(w);
}

/* A plugin that writes NaN into one prediction: the step fails, the world
   is as before, and the plugin's rollback callback is called once, after
   its end_step. */
typedef struct nan_plugin {
    int begin, end, rollback, order_ok, particle, iteration;
} nan_plugin;
static void np_project(void *user, const pbd_solve_context *c) {
    nan_plugin *u = (nan_plugin *)user;
    if (c->substep == 1 && c->iteration == u->iteration) c->p[4 * u->particle + 1] = NAN;
}
static void np_begin(void *user, pbd_world *w, float dt) {
    (void)w;
    (void)dt;
    ((nan_plugin *)user)->begin++;
}
static void np_end(void *user, pbd_world *w, float dt) {
    (void)w;
    (void)dt;
    ((nan_plugin *)user)->end++;
}
static void np_rollback(void *user, pbd_world *w) {
    nan_plugin *u = (nan_plugin *)user;
    (void)w;
    u->rollback++;
    u->order_ok = u->end == u->rollback;
}
TEST(robust_plugin_nan_rolls_back) {
    pbd_world *w = fluid_world();
    CHECK_OK(pbd_world_step(w, 1.0f / 60));
    nan_plugin u;
    memset(&u, 0, sizeof u);
    u.particle = 77;
    pbd_plugin_desc d = pbd_plugin_desc_default();
    d.user = &u;
    d.particle_end = 78;
    d.project = np_project;
    d.begin_step = np_begin;
    d.end_step = np_end;
    d.rollback = np_rollback;
    CHECK_OK(pbd_add_plugin(w, &d, NULL));
    snap before = take(w);
    CHECK_RESULT(pbd_world_step(w, 1.0f / 60), PBD_ERROR_NOT_FINITE);
    snap after = take(w);
    CHECK(same(&before, &after));
    CHECK(u.begin == 1 && u.end == 1 && u.rollback == 1 && u.order_ok);
    CHECK(pbd_world_time(w) > 0 && pbd_world_time(w) < 0.02);
    free(before.b);
    free(after.b);
    pbd_world_destroy(w);
}

/* The same NaN in the middle of a strand, in any iteration: the strands'
   follow-the-leader pass put a NaN particle back on its leader's sphere
   along a made-up direction, so the step ended PBD_OK with the particle
   jumped 10-16 cm (an audit); now the NaN stays, and the step fails and
   rolls back. */
TEST(robust_plugin_nan_in_a_strand_rolls_back) {
    for (int it = 0; it < 4; ++it) {
        pbd_world *w = pbdt_world(-9.81f);
        float pos[3 * 10];
        for (int i = 0; i < 10; ++i) pos[3 * i] = 0.05f * (float)i, pos[3 * i + 1] = 0.5f, pos[3 * i + 2] = 0;
        CHECK(pbdt_strand(w, pos, NULL, 10, 0, -1).count == 10);
        CHECK_OK(pbd_world_step(w, 1.0f / 60));
        nan_plugin u;
        memset(&u, 0, sizeof u);
        u.particle = 5;
        u.iteration = it;
        pbd_plugin_desc d = pbd_plugin_desc_default();
        d.user = &u;
        d.particle_end = 10;
        d.project = np_project;
        CHECK_OK(pbd_add_plugin(w, &d, NULL));
        snap before = take(w);
        CHECK_MSG(pbd_world_step(w, 1.0f / 60) == PBD_ERROR_NOT_FINITE, "NaN in iteration %d: the step passed", it);
        snap after = take(w);
        CHECK(same(&before, &after));
        free(before.b);
        free(after.b);
        pbd_world_destroy(w);
    }
}

/* ---- float-to-index guards --------------------------------------------------------- */

/* A plugin that writes a value into the predictions of every 41st
   particle at the start of substep 1: substeps 1.. then see it in the
   contacts (analytic, SDF grid and BVH colliders), the hash grid of the
   fluid and particle contact, and cloth self-collision. */
typedef struct poke {
    float value;
    int n;
} poke;
static void poke_begin_substep(void *user, const pbd_solve_context *c) {
    poke *u = (poke *)user;
    if (c->substep != 1) return;
    for (int i = 0; i < u->n; i += 41)
        for (int k = 0; k < 3; ++k) c->p[4 * i + k] = (k == 1 ? -1.0f : 1.0f) * u->value;
}

/* NaN, +-Inf and +-1e30 through every float-to-index path of a step:
   nothing is read out of bounds (AddressSanitizer in SAN=1; the NaN
   fluid read before the candidates' padding was masked), the step either
   works or is rolled back, and the world stays finite. */
TEST(robust_float_to_index_guards) {
    const float values[5] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f};
    for (int k = 0; k < 5; ++k) {
        rich R = rich_world();
        CHECK_OK(rich_step(&R));
        poke u;
        u.value = values[k];
        u.n = pbd_world_particle_count(R.w);
        pbd_plugin_desc d = pbd_plugin_desc_default();
        d.user = &u;
        d.particle_end = u.n;
        d.begin_substep = poke_begin_substep;
        CHECK_OK(pbd_add_plugin(R.w, &d, NULL));
        pbd_result r = rich_step(&R);
        CHECK_MSG(values[k] != values[k] || fabsf(values[k]) > 1e38f ? r == PBD_ERROR_NOT_FINITE
                                                                     : (r == PBD_OK || r == PBD_ERROR_NOT_FINITE),
                  "%g: %s", (double)values[k], pbd_result_string(r));
        CHECK(all_finite(R.w));
        pbd_world_destroy(R.w);
    }
}

/* A world with nothing in it steps (and keeps nothing for a rollback):
   UBSan caught the copies of its NULL particle arrays (fuzz_step). */
TEST(robust_empty_world_steps) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    for (int i = 0; i < 3; ++i) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK(fabs(pbd_world_time(w) - 3.0 / 60.0) < 1e-6);
    pbd_world_destroy(w);
}

void suite_robust(void) {
    RUN(robust_empty_world_steps);
    RUN(robust_fluid_dt_out_of_range_refused);
    RUN(robust_smallest_substep_stays_finite);
    RUN(robust_nonfinite_step_rolls_back);
    RUN(robust_nonfinite_step_names_a_free_particle);
    RUN(robust_nonfinite_step_in_a_big_world_on_two_threads);
    RUN(robust_plugin_nan_rolls_back);
    RUN(robust_plugin_nan_in_a_strand_rolls_back);
    RUN(robust_float_to_index_guards);
}
