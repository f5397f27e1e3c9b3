/* tests/test_plugins.c - the plugin table (pbd.h section "plugins"): the
   callbacks run at the documented points of the substep loop (the
   projection after the contacts included), a plugin's
   projection acts like a constraint, parallel plugins see the whole team,
   destroy runs once, and bad input changes nothing. */
#include "test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct counter_plugin {
    int begin_step, end_step, begin_substep, project, end_substep, destroyed;
    int bad_order;      /* a callback seen out of the documented order */
    int last_iteration; /* -1 until the first project of a substep */
    int particle;       /* project: hold this particle's prediction at `target` */
    float target[3];
    float h_seen;
} counter_plugin;

static void cp_begin_step(void *u, pbd_world *w, float dt) {
    counter_plugin *c = (counter_plugin *)u;
    (void)w;
    (void)dt;
    c->begin_step++;
}
static void cp_end_step(void *u, pbd_world *w, float dt) {
    counter_plugin *c = (counter_plugin *)u;
    (void)w;
    (void)dt;
    c->end_step++;
}
static void cp_begin_substep(void *u, const pbd_solve_context *s) {
    counter_plugin *c = (counter_plugin *)u;
    if (s->iteration != -1) c->bad_order++;
    c->begin_substep++;
    c->last_iteration = -1;
    c->h_seen = s->h;
}
static void cp_project(void *u, const pbd_solve_context *s) {
    counter_plugin *c = (counter_plugin *)u;
    if (s->iteration != c->last_iteration + 1) c->bad_order++;
    c->last_iteration = s->iteration;
    c->project++;
    float *p = s->p + 4 * c->particle;
    p[0] = c->target[0];
    p[1] = c->target[1];
    p[2] = c->target[2];
}
static void cp_end_substep(void *u, const pbd_solve_context *s) {
    counter_plugin *c = (counter_plugin *)u;
    if (c->last_iteration != s->iterations - 1) c->bad_order++;
    c->end_substep++;
}
static void cp_destroy(void *u) { ((counter_plugin *)u)->destroyed++; }

static pbd_plugin_desc counter_desc(counter_plugin *c, int particle_end) {
    pbd_plugin_desc d = pbd_plugin_desc_default();
    d.name = "counter";
    d.user = c;
    d.particle_end = particle_end;
    d.begin_step = cp_begin_step;
    d.end_step = cp_end_step;
    d.begin_substep = cp_begin_substep;
    d.project = cp_project;
    d.end_substep = cp_end_substep;
    d.destroy = cp_destroy;
    return d;
}

static int add_particles(pbd_world *w, int n) {
    float *pos = (float *)calloc((size_t)n * 3, sizeof(float));
    for (int i = 0; i < n; ++i) pos[3 * i] = (float)i;
    pbd_particles_desc p = pbd_particles_desc_default();
    p.positions = pos;
    p.count = n;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &p, &r));
    free(pos);
    return r.first;
}

/* Callbacks run once per step / substep / iteration in the documented
   order, and a plugin projection holds a particle like a constraint: the
   velocity the solver derives from it is (p - x) / h. */
TEST(plugin_callback_order_and_projection) {
    pbd_world *w = pbdt_world(-9.81f);
    add_particles(w, 3);
    counter_plugin c;
    memset(&c, 0, sizeof c);
    c.particle = 1;
    c.target[0] = 1;
    c.target[1] = 2;
    c.target[2] = 0;
    pbd_plugin_desc d = counter_desc(&c, 2);
    pbd_plugin id = {0};
    CHECK_OK(pbd_add_plugin(w, &d, &id));
    CHECK(id.id != 0 && pbd_world_plugin_count(w) == 1);
    CHECK(pbd_world_plugin(w, 0).id == id.id && pbd_world_plugin(w, 1).id == 0 && pbd_world_plugin(w, -1).id == 0 &&
          pbd_world_plugin(NULL, 0).id == 0);
    int substeps = pbd_world_step_substeps(w, 0.01f), iterations; /* 3: a 10 ms step keeps the 1/240 s substep */
    pbd_solver_mode mode;
    CHECK_OK(pbd_world_get_solver(w, &mode, NULL, &iterations));
    CHECK(substeps == 3);
    for (int f = 0; f < 3; ++f) CHECK_OK(pbd_world_step(w, 0.01f));
    CHECK(c.begin_step == 3 && c.end_step == 3);
    CHECK(c.begin_substep == 3 * substeps && c.end_substep == 3 * substeps);
    CHECK(c.project == 3 * substeps * iterations);
    CHECK(c.bad_order == 0);
    CHECK_NEAR(c.h_seen, 0.01f / (float)substeps, 1e-9);
    const float *x = pbd_world_positions(w);
    CHECK(x[4] == 1.0f && x[5] == 2.0f && x[6] == 0.0f);
    /* the particle sits at its target since the first substep: no velocity */
    const float *v = pbd_world_velocities(w);
    CHECK_NEAR(v[4], 0, 1e-6);
    CHECK_NEAR(v[5], 0, 1e-6);
    /* the other particles fall freely */
    CHECK(x[1] < 0 && x[9] < 0);
    CHECK_OK(pbd_remove_plugin(w, id));
    CHECK(c.destroyed == 1);
    CHECK_OK(pbd_world_step(w, 0.01f));
    CHECK(c.begin_step == 3); /* removed plugins are not called */
    pbd_world_destroy(w);
    CHECK(c.destroyed == 1); /* not twice */
}

TEST(plugin_destroyed_with_world) {
    pbd_world *w = pbdt_world(0);
    counter_plugin c;
    memset(&c, 0, sizeof c);
    pbd_plugin_desc d = counter_desc(&c, 0);
    d.project = NULL;
    CHECK_OK(pbd_add_plugin(w, &d, NULL));
    pbd_world_destroy(w);
    CHECK(c.destroyed == 1);
}

/* A parallel plugin is called by every thread of the substep's region and
   shares its loop with an orphaned omp for; it sees the whole team. */
typedef struct team_plugin {
    int calls[64];
    int team;
    int n;
} team_plugin;
static void tp_project(void *u, const pbd_solve_context *s) {
    team_plugin *t = (team_plugin *)u;
    if (s->thread < 0 || s->thread >= 64) return;
    t->calls[s->thread]++;
    if (s->thread == 0) t->team = s->thread_count;
#if defined(_OPENMP) && !defined(PBD_NO_OPENMP)
#pragma omp for
#endif
    for (int i = 0; i < t->n; ++i) s->p[4 * i + 1] = 5.0f; /* hold every particle at y = 5 */
}
TEST(plugin_parallel_team) {
    pbd_world *w = pbdt_world(-9.81f);
    team_plugin t;
    memset(&t, 0, sizeof t);
    t.n = 1000;
    add_particles(w, t.n);
    pbd_plugin_desc d = pbd_plugin_desc_default();
    d.user = &t;
    d.parallel = 1;
    d.particle_end = t.n;
    d.project = tp_project;
    CHECK_OK(pbd_add_plugin(w, &d, NULL));
    CHECK_OK(pbd_world_set_threads(w, 2));
    CHECK_OK(pbd_world_step(w, 0.01f));
    int substeps = pbd_world_step_substeps(w, 0.01f), iterations;
    pbd_solver_mode mode;
    CHECK_OK(pbd_world_get_solver(w, &mode, NULL, &iterations));
#if defined(_OPENMP) && !defined(PBD_NO_OPENMP)
    int want_team = 2; /* set_threads(2) asks for exactly two */
#else
    int want_team = 1;
#endif
    CHECK(t.team == want_team);
    for (int k = 0; k < want_team; ++k) CHECK(t.calls[k] == substeps * iterations);
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < t.n; ++i) CHECK(x[4 * i + 1] == 5.0f);
    pbd_world_destroy(w);
}

TEST(plugin_bad_input) {
    pbd_world *w = pbdt_world(-9.81f);
    add_particles(w, 4);
    counter_plugin c;
    memset(&c, 0, sizeof c);
    pbd_plugin_desc d = counter_desc(&c, 5); /* past the particles */
    CHECK_RESULT(pbd_add_plugin(w, &d, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
    d.particle_end = -1;
    CHECK_RESULT(pbd_add_plugin(w, &d, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
    d.particle_end = 4;
    d.work = -3;
    CHECK_RESULT(pbd_add_plugin(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d.work = 0;
    d.parallel = 7;
    CHECK_RESULT(pbd_add_plugin(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d.parallel = 0;
    d.device = 2;
    CHECK_RESULT(pbd_add_plugin(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "device") != NULL);
    d.device = 0;
    d.parallel = 7;
    CHECK_RESULT(pbd_add_plugin(w, NULL, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_add_plugin(NULL, &d, NULL), PBD_ERROR_NULL_POINTER);
    CHECK(pbd_world_plugin_count(w) == 0);
    pbd_plugin none = {12345u}; /* no plugin was added */
    CHECK_RESULT(pbd_remove_plugin(w, none), PBD_ERROR_INVALID_HANDLE);
    CHECK_RESULT(pbd_plugin_set_work(w, none, 10), PBD_ERROR_INVALID_HANDLE);
    d.parallel = 0;
    pbd_plugin id;
    CHECK_OK(pbd_add_plugin(w, &d, &id));
    CHECK_RESULT(pbd_plugin_set_work(w, id, -1), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_OK(pbd_plugin_set_work(w, id, 100));
    int bad[2] = {0, 9};
    CHECK_RESULT(pbd_world_mark_coupled(w, bad, 2), PBD_ERROR_INDEX_OUT_OF_RANGE);
    CHECK_RESULT(pbd_world_mark_coupled(w, NULL, 2), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_world_mark_coupled(w, bad, -1), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_OK(pbd_world_mark_coupled(w, bad, 1));
    CHECK_OK(pbd_remove_plugin(w, id));
    CHECK_RESULT(pbd_remove_plugin(w, id), PBD_ERROR_INVALID_HANDLE); /* stale */
    CHECK(c.destroyed == 1);
    pbd_world_destroy(w);
}

/* A snapshot taken before a plugin's particles existed cannot be restored
   under it (the plugin would index past the particles); one that has them
   can, and the plugin stays registered. */
TEST(plugin_survives_restore_and_guards_particles) {
    pbd_world *w = pbdt_world(-9.81f);
    size_t n0 = pbd_world_snapshot_size(w);
    void *empty = malloc(n0);
    CHECK_OK(pbd_world_save(w, empty, n0));
    add_particles(w, 4);
    size_t n1 = pbd_world_snapshot_size(w);
    void *full = malloc(n1);
    CHECK_OK(pbd_world_save(w, full, n1));
    counter_plugin c;
    memset(&c, 0, sizeof c);
    c.particle = 3;
    pbd_plugin_desc d = counter_desc(&c, 4);
    CHECK_OK(pbd_add_plugin(w, &d, NULL));
    CHECK_RESULT(pbd_world_restore(w, empty, n0), PBD_ERROR_BAD_SNAPSHOT);
    CHECK_MSG(strstr(pbd_world_last_error(w), "it holds 0 particles, and this world's plugins use particles up to 3"),
              "message: %s", pbd_world_last_error(w));
    CHECK(pbd_world_particle_count(w) == 4);
    CHECK_OK(pbd_world_restore(w, full, n1));
    CHECK(pbd_world_plugin_count(w) == 1);
    CHECK_OK(pbd_world_step(w, 0.01f));
    CHECK(c.begin_step == 1 && c.destroyed == 0);
    free(empty);
    free(full);
    pbd_world_destroy(w);
    CHECK(c.destroyed == 1);
}

/* A plugin whose uses_particles lets the world's last particles go keeps
   the world's count at its particle_end until it goes itself: the
   particles left, the world's own snapshot loaded no more ("holds 0
   particles, and this world's plugins use particles up to 3"; an audit). */
static int uses_none(void *user, const unsigned char *marked, int n) {
    (void)user;
    (void)marked;
    (void)n;
    return -1;
}
TEST(plugin_keeps_the_particles_below_its_end) {
    pbd_world *w = pbdt_world(-9.81f);
    pbd_range r = {add_particles(w, 4), 4};
    counter_plugin c;
    memset(&c, 0, sizeof c);
    pbd_plugin_desc d = counter_desc(&c, 4);
    d.uses_particles = uses_none;
    pbd_plugin p;
    CHECK_OK(pbd_add_plugin(w, &d, &p));
    CHECK_OK(pbd_remove_particles(w, r));
    CHECK(pbd_world_particle_count(w) == 4); /* free, but below particle_end */
    size_t n = 0;
    unsigned char *snap = pbdt_save(w, &n);
    CHECK(n > 0);
    CHECK_OK(pbd_world_restore(w, snap, n));
    CHECK_OK(pbd_world_step(w, 0.01f));
    CHECK_OK(pbd_remove_plugin(w, p));
    CHECK(pbd_world_particle_count(w) == 0); /* they leave with it */
    free(snap);
    pbd_world_destroy(w);
}

/* A plugin's own state in snapshots (pbd_plugin_desc.save_state /
   load_state): one int, which load_state refuses when negative. */
typedef struct stateful {
    int value, loads;
} stateful;
static size_t stateful_save(void *user, const pbd_world *w, void *out) {
    (void)w;
    if (out) memcpy(out, &((stateful *)user)->value, sizeof(int));
    return sizeof(int);
}
static pbd_result stateful_load(void *user, pbd_world *w, const void *in, size_t size, int commit) {
    (void)w;
    int v;
    if (size != sizeof v) return pbd_world_fail(NULL, PBD_ERROR_BAD_SNAPSHOT, "%zu bytes, not an int", size);
    memcpy(&v, in, sizeof v);
    if (v < 0) return pbd_world_fail(NULL, PBD_ERROR_INVALID_ARGUMENT, "value %d < 0", v);
    if (commit) ((stateful *)user)->value = v, ((stateful *)user)->loads++;
    return PBD_OK;
}
static pbd_plugin add_stateful(pbd_world *w, stateful *s, const char *name) {
    pbd_plugin_desc d = pbd_plugin_desc_default();
    d.name = name;
    d.user = s;
    d.save_state = stateful_save;
    d.load_state = stateful_load;
    pbd_plugin p = {0};
    CHECK_OK(pbd_add_plugin(w, &d, &p));
    return p;
}

/* States go back to the plugin at the same place in the order of addition
   (not the slot: a removal frees one that a later add takes); a world
   rebuilt in that order takes them; a state its plugin refuses fails the
   restore with its message, naming the plugin, and changes nothing;
   save_state and load_state go together. */
TEST(plugin_state_in_snapshots) {
    pbd_world *w = pbdt_world(0);
    stateful a = {1, 0}, b = {2, 0}, c = {3, 0};
    pbd_plugin pa = add_stateful(w, &a, "a");
    add_stateful(w, &b, "b");
    CHECK_OK(pbd_remove_plugin(w, pa));
    add_stateful(w, &c, "c"); /* in a's slot, after b */
    size_t n = 0;
    unsigned char *snap = pbdt_save(w, &n);
    b.value = 20, c.value = 30;
    CHECK_OK(pbd_world_restore(w, snap, n));
    CHECK(b.value == 2 && c.value == 3 && b.loads == 1 && c.loads == 1);
    pbd_world *r = pbdt_world(0);
    stateful b2 = {0, 0}, c2 = {0, 0};
    add_stateful(r, &b2, "b");
    add_stateful(r, &c2, "c");
    CHECK_OK(pbd_world_restore(r, snap, n));
    CHECK(b2.value == 2 && c2.value == 3);
    /* c's state forged to -1 (the last int before the world's reference_dt,
       granular_cfl, carry and the checksum) */
    int minus = -1;
    memcpy(snap + n - 24, &minus, sizeof minus);
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i + 8 < n; ++i) h = (h ^ snap[i]) * 1099511628211ull;
    memcpy(snap + n - 8, &h, 8);
    c2.value = 7;
    CHECK_RESULT(pbd_world_restore(r, snap, n), PBD_ERROR_BAD_SNAPSHOT);
    CHECK_MSG(strstr(pbd_world_last_error(r), "'c', refused its state: value -1 < 0") != NULL, "message: %s",
              pbd_world_last_error(r));
    CHECK(c2.value == 7 && b2.value == 2 && c2.loads == 1);
    pbd_plugin_desc d = pbd_plugin_desc_default();
    d.save_state = stateful_save;
    CHECK_RESULT(pbd_add_plugin(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "load_state") != NULL);
    free(snap);
    pbd_world_destroy(r);
    pbd_world_destroy(w);
}

/* pbd_collider_closest: distance and the outward normal in world space. */
TEST(collider_closest_normal) {
    pbd_world *w = pbdt_world(0);
    float c[3] = {1, 0, 0}, he[3] = {1, 1, 1};
    float q[4] = {0, 0, 0.38268343f, 0.92387953f}; /* 45 degrees about z */
    pbd_collider box;
    CHECK_OK(pbd_add_collider_box(w, c, he, q, 0.5f, &box));
    float pt[3] = {1 + 2.0f * 0.70710678f, 2.0f * 0.70710678f, 0}; /* 2 m along the rotated +x axis */
    float dist, n[3];
    CHECK_OK(pbd_collider_closest(w, box, pt, &dist, n));
    CHECK_NEAR(dist, 1.0f, 1e-5);
    CHECK_NEAR(n[0], 0.70710678f, 1e-5);
    CHECK_NEAR(n[1], 0.70710678f, 1e-5);
    CHECK_NEAR(n[2], 0.0f, 1e-6);
    CHECK_OK(pbd_collider_closest(w, box, pt, &dist, NULL));
    pbd_collider no_collider = {12345u};
    CHECK_RESULT(pbd_collider_closest(w, no_collider, pt, &dist, n), PBD_ERROR_INVALID_HANDLE);
    pbd_world_destroy(w);
}

/* project_after_contacts runs every iteration after the collider
   contacts: a plugin that pushes particle 0 into the ground in `project`
   sees it back on the ground there, with pbd_world_particle_contact_push
   > 0 and the same push up along the ground's normal
   (pbd_world_particle_contact_push_vector), while particle 1, in the air,
   has no push. */
typedef struct late_plugin {
    int project, late, bad_order, pushed, free_pushed, last_iteration, along_normal;
    float lowest;
} late_plugin;
static void lp_project(void *u, const pbd_solve_context *s) {
    late_plugin *c = (late_plugin *)u;
    s->p[1] = -0.5f; /* particle 0 deep below the ground */
    c->project++;
    c->last_iteration = s->iteration;
}
static void lp_late(void *u, const pbd_solve_context *s) {
    late_plugin *c = (late_plugin *)u;
    if (s->iteration != c->last_iteration) c->bad_order++; /* right after this iteration's project */
    c->late++;
    if (s->p[1] < c->lowest) c->lowest = s->p[1];
    c->pushed += pbd_world_particle_contact_push(s->world, 0) > 0;
    c->free_pushed += pbd_world_particle_contact_push(s->world, 1) != 0;
    float v0[3], v1[3];
    pbd_world_particle_contact_push_vector(s->world, 0, v0);
    pbd_world_particle_contact_push_vector(s->world, 1, v1);
    c->along_normal += v0[0] == 0 && v0[2] == 0 && v0[1] == pbd_world_particle_contact_push(s->world, 0) &&
                       v1[0] == 0 && v1[1] == 0 && v1[2] == 0;
}
TEST(plugin_project_after_contacts) {
    pbd_world *w = pbdt_world(-9.81f);
    float pos[6] = {0, 0.01f, 0, 1, 2, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = 2;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    late_plugin c;
    memset(&c, 0, sizeof c);
    c.lowest = 1e30f;
    pbd_plugin_desc d = pbd_plugin_desc_default();
    d.user = &c;
    d.particle_end = 2;
    d.project = lp_project;
    d.project_after_contacts = lp_late;
    CHECK_OK(pbd_add_plugin(w, &d, NULL));
    int substeps, iterations;
    pbd_solver_mode mode;
    CHECK_OK(pbd_world_get_solver(w, &mode, &substeps, &iterations));
    for (int f = 0; f < 2; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    CHECK(c.late == 2 * substeps * iterations && c.project == c.late && c.bad_order == 0);
    CHECK_MSG(c.lowest >= 0.01f - 1e-6f, "after the contacts the particle is at %g, not on the ground (radius 0.01)",
              c.lowest);
    CHECK(c.pushed == c.late && c.free_pushed == 0 && c.along_normal == c.late);
    /* bad input: 0, nothing else */
    CHECK(pbd_world_particle_contact_push(NULL, 0) == 0 && pbd_world_particle_contact_push(w, -1) == 0 &&
          pbd_world_particle_contact_push(w, 2) == 0);
    float v[3] = {1, 1, 1};
    pbd_world_particle_contact_push_vector(NULL, 0, v);
    CHECK(v[0] == 0 && v[1] == 0 && v[2] == 0);
    v[1] = 1;
    pbd_world_particle_contact_push_vector(w, 2, v);
    CHECK(v[1] == 0);
    pbd_world_particle_contact_push_vector(w, 0, NULL); /* nothing */
    pbd_world_destroy(w);
}

/* ---- the extension API for errors and memory ---------------------------------- */
typedef struct fail_log {
    int calls;
    pbd_result last;
    char msg[256];
} fail_log;
static void fail_log_fn(void *user, pbd_result r, const char *message) {
    fail_log *l = (fail_log *)user;
    l->calls++;
    l->last = r;
    snprintf(l->msg, sizeof l->msg, "%s", message);
}
typedef struct count_alloc {
    long allocs, frees, live;
} count_alloc;
static void *count_alloc_fn(void *user, size_t size) {
    count_alloc *c = (count_alloc *)user;
    c->allocs++;
    c->live++;
    return malloc(size);
}
static void count_free_fn(void *user, void *p) {
    count_alloc *c = (count_alloc *)user;
    c->frees++;
    c->live--;
    free(p);
}

TEST(plugin_world_fail_and_last_error) {
    fail_log log = {0, PBD_OK, ""};
    pbd_world_desc d = pbd_world_desc_default();
    d.log = fail_log_fn;
    d.log_user = &log;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK(log.calls == 1 && log.last == PBD_OK); /* the device an auto world got */
    log.calls = 0;
    size_t size = pbd_world_snapshot_size(w);
    unsigned char *before = (unsigned char *)malloc(size), *after = (unsigned char *)malloc(size);
    CHECK_OK(pbd_world_save(w, before, size));
    /* on a world: its message, its log, this thread's pbd_last_error, the result back */
    CHECK(pbd_world_fail(w, PBD_ERROR_INDEX_OUT_OF_RANGE, "my plugin: particle %d of %d", 7, 5) ==
          PBD_ERROR_INDEX_OUT_OF_RANGE);
    CHECK_MSG(strcmp(pbd_world_last_error(w), "PBD_ERROR_INDEX_OUT_OF_RANGE: my plugin: particle 7 of 5") == 0,
              "world message: %s", pbd_world_last_error(w));
    CHECK(log.calls == 1 && log.last == PBD_ERROR_INDEX_OUT_OF_RANGE && strcmp(log.msg, pbd_world_last_error(w)) == 0);
    CHECK(strcmp(pbd_last_error(), pbd_world_last_error(w)) == 0);
    CHECK_OK(pbd_world_save(w, after, size)); /* a message is not simulation state */
    CHECK(memcmp(before, after, size) == 0);
    /* without a world: only pbd_last_error */
    CHECK(pbd_world_fail(NULL, PBD_ERROR_NOT_FINITE, "model: frame %d is NaN", 3) == PBD_ERROR_NOT_FINITE);
    CHECK(strcmp(pbd_last_error(), "PBD_ERROR_NOT_FINITE: model: frame 3 is NaN") == 0);
    CHECK(log.calls == 1 && strstr(pbd_world_last_error(w), "particle 7") != NULL);
    /* a helper's message passed on to the caller's world, without a second code name */
    CHECK(pbd_world_fail_last(w, PBD_ERROR_NOT_FINITE) == PBD_ERROR_NOT_FINITE);
    CHECK_MSG(strcmp(pbd_world_last_error(w), "PBD_ERROR_NOT_FINITE: model: frame 3 is NaN") == 0, "passed on: %s",
              pbd_world_last_error(w));
    CHECK(log.calls == 2);
    CHECK(pbd_world_fail_last(w, PBD_OK) == PBD_OK && log.calls == 2);
    /* ... and named after the public call it failed in, once */
    CHECK(pbd_world_fail_in(w, "my_fit", PBD_ERROR_NOT_FINITE) == PBD_ERROR_NOT_FINITE);
    CHECK_MSG(strcmp(pbd_world_last_error(w), "PBD_ERROR_NOT_FINITE: my_fit: model: frame 3 is NaN") == 0, "named: %s",
              pbd_world_last_error(w));
    CHECK(pbd_world_fail_in(w, "my_fit", PBD_ERROR_NOT_FINITE) == PBD_ERROR_NOT_FINITE);
    CHECK(strcmp(pbd_world_last_error(w), "PBD_ERROR_NOT_FINITE: my_fit: model: frame 3 is NaN") == 0);
    CHECK(pbd_world_fail_in(NULL, "my_load", PBD_ERROR_BAD_SNAPSHOT) == PBD_ERROR_BAD_SNAPSHOT);
    CHECK(strcmp(pbd_last_error(), "PBD_ERROR_BAD_SNAPSHOT: my_load: my_fit: model: frame 3 is NaN") == 0);
    CHECK(pbd_world_fail_in(w, "my_fit", PBD_OK) == PBD_OK && log.calls == 4);
    /* pbd.h's own errors land in pbd_last_error too, and pbd_world_create's */
    CHECK(pbd_world_set_threads(w, -1) == PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(pbd_last_error(), pbd_world_last_error(w)) == 0 && strstr(pbd_last_error(), "threads -1"));
    pbd_world_desc bad = pbd_world_desc_default();
    bad.substeps = 0;
    pbd_world *w2 = NULL;
    CHECK(pbd_world_create(&bad, &w2) == PBD_ERROR_INVALID_ARGUMENT && w2 == NULL);
    CHECK_MSG(strstr(pbd_last_error(), "substeps") != NULL, "create: %s", pbd_last_error());
    free(before);
    free(after);
    pbd_world_destroy(w);
}

/* pbd_format_float, the extensions' number for messages: the fewest
   digits (6 to 9) that read back as the same float. */
TEST(plugin_format_float_reads_back) {
    char buf[32];
    CHECK(strcmp(pbd_format_float(0.1f, buf, sizeof buf), "0.1") == 0);
    CHECK(strcmp(pbd_format_float(-2.5f, buf, sizeof buf), "-2.5") == 0);
    /* %g would print PBD_MIN_MASS's lower neighbour as 1e-12, its bound */
    float below = nextafterf(PBD_MIN_MASS, 0.0f);
    CHECK_MSG(strcmp(pbd_format_float(below, buf, sizeof buf), "9.999999e-13") == 0, "got %s", buf);
    const float v[] = {PBD_MIN_MASS, PBD_MAX_MASS, nextafterf(PBD_MAX_MASS, 2e12f),
                       1.0f / 3.0f,  16777217.0f,  3.4028235e38f,
                       1.4e-45f,     -0.0f,        123456.789f};
    for (int i = 0; i < (int)(sizeof v / sizeof v[0]); ++i) {
        const char *s = pbd_format_float(v[i], buf, sizeof buf);
        CHECK(s == buf && strlen(s) < 16);
        CHECK_MSG(strtof(s, NULL) == v[i], "%s does not read back as %.9g", s, (double)v[i]);
    }
    CHECK(strtof(pbd_format_float(1.0f / 3.0f, buf, sizeof buf), NULL) == 1.0f / 3.0f && strlen(buf) == 10);
    /* no buffer: "", nothing written (snprintf into NULL with a size was undefined) */
    char *none = NULL;
    CHECK(strcmp(pbd_format_float(1.5f, none, 32), "") == 0);
    buf[0] = 'x';
    CHECK(strcmp(pbd_format_float(1.5f, buf, 0), "") == 0 && buf[0] == 'x');
}

TEST(plugin_world_alloc_uses_the_allocator) {
    count_alloc c = {0, 0, 0};
    pbd_world_desc d = pbd_world_desc_default();
    d.allocator.alloc = count_alloc_fn;
    d.allocator.free = count_free_fn;
    d.allocator.user = &c;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    long a0 = c.allocs;
    double *p = (double *)pbd_world_alloc(w, 100 * sizeof(double));
    CHECK(p != NULL && c.allocs == a0 + 1);
    for (int i = 0; i < 100; ++i) p[i] = i; /* usable memory */
    pbd_world_free(w, p);
    pbd_world_free(w, NULL); /* nothing */
    CHECK(c.frees == 1);
    void *q = pbd_world_alloc(NULL, 16); /* no world: PBD_MALLOC */
    CHECK(q != NULL && c.allocs == a0 + 1);
    pbd_world_free(NULL, q);
    pbd_world_destroy(w);
    CHECK_MSG(c.live == 0, "%ld allocations not freed", c.live);
}

void suite_plugins(void) {
    RUN(plugin_keeps_the_particles_below_its_end);
    RUN(plugin_callback_order_and_projection);
    RUN(plugin_destroyed_with_world);
    RUN(plugin_parallel_team);
    RUN(plugin_bad_input);
    RUN(plugin_survives_restore_and_guards_particles);
    RUN(plugin_state_in_snapshots);
    RUN(collider_closest_normal);
    RUN(plugin_project_after_contacts);
    RUN(plugin_world_fail_and_last_error);
    RUN(plugin_format_float_reads_back);
    RUN(plugin_world_alloc_uses_the_allocator);
}
