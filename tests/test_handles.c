/* tests/test_handles.c - removal and handles (pbd.h CONVENTIONS: Handles,
   Names, Removal): every pbd_remove_* takes its thing out of the physics
   (shown by what the simulation does afterwards), leaves a stale handle
   (PBD_ERROR_INVALID_HANDLE, naming the kind), frees its slot for the next
   add, which gets a new id; a removal that something else still depends on
   is refused with nothing changed (the snapshot byte-identical) and a
   message that names the user; snapshots with free slots restore and step
   bit-identically; add/remove churn keeps the counts and the memory
   bounded; a failed add into a world with free slots and free particles
   changes nothing. */
#include "test.h"
#include <limits.h>
#include "check_error.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const float DT = 1.0f / 60.0f;
#define SLOT(id) ((id) & ((1u << PBD_HANDLE_SLOT_BITS) - 1u))

/* ---- helpers ---------------------------------------------------------------------------- */

typedef struct hsnap {
    unsigned char *b;
    size_t n;
} hsnap;
static hsnap snap_take(const pbd_world *w) {
    hsnap s;
    s.n = pbd_world_snapshot_size(w);
    s.b = (unsigned char *)malloc(s.n ? s.n : 1);
    if (pbd_world_save(w, s.b, s.n) != PBD_OK) s.n = 0;
    return s;
}
static int snap_equal(const pbd_world *w, hsnap s) {
    hsnap t = snap_take(w);
    int same = s.n > 0 && t.n == s.n && memcmp(t.b, s.b, s.n) == 0;
    free(t.b);
    return same;
}
/* expr fails with want, its message names needle, and the world's snapshot
   is byte-identical to the one before the call */
#define CHECK_REFUSED(w, expr, want, needle)                                           \
    do {                                                                               \
        hsnap pbdt_s_ = snap_take(w);                                                  \
        CHECK_WORLD_ERROR((w), (expr), (want), (needle));                              \
        CHECK_MSG(snap_equal((w), pbdt_s_), "%s changed the world's snapshot", #expr); \
        free(pbdt_s_.b);                                                               \
    } while (0)
/* A stale (or unknown) handle: refused as such, its kind in the message. */
#define CHECK_STALE(w, expr, kind) CHECK_REFUSED((w), (expr), PBD_ERROR_INVALID_HANDLE, (kind))

static pbd_world *serial_world(float gy) {
    pbd_world *w = pbdt_world(gy);
    CHECK_OK(pbd_world_set_threads(w, 1));
    return w;
}

static pbd_range add_pts(pbd_world *w, const float *pos, const float *vel, int n, float mass, float radius) {
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.velocities = vel;
    pd.count = n;
    pd.mass = mass;
    if (radius > 0) pd.radius = radius;
    pbd_range r = {-1, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    return r;
}
static pbd_range add_one(pbd_world *w, float x, float y, float z, float mass) {
    float p[3] = {x, y, z};
    return add_pts(w, p, NULL, 1, mass, 0);
}

/* A cloth over an nx x ny grid at o + u i + v j (the mesh is kept for its
   triangles; free it with pbd_mesh_free). */
typedef struct hcloth {
    pbd_mesh m;
    pbd_object o;
    pbd_range r;
} hcloth;
static int add_cloth(pbd_world *w, int nx, int ny, const float *o, const float *u, const float *v, int tethers,
                     hcloth *c) {
    memset(c, 0, sizeof *c);
    if (pbd_mesh_grid(nx, ny, o, u, v, &c->m) != PBD_OK) return 0;
    pbd_cloth_desc cd = pbdt_cloth_desc(&c->m);
    cd.tethers = tethers;
    pbd_result r = pbd_add_cloth(w, &cd, &c->o);
    CHECK_OK(r);
    c->r = pbdt_parts(w, c->o).particles;
    return r == PBD_OK;
}
/* a horizontal cloth of side s at height y, corner (x, z) */
static int flat_cloth(pbd_world *w, int n, float s, float x, float y, float z, hcloth *c) {
    float o[3] = {x, y, z}, u[3] = {s, 0, 0}, v[3] = {0, 0, s};
    return add_cloth(w, n, n, o, u, v, 0, c);
}

static const float *px(const pbd_world *w, int i) { return pbd_world_positions(w) + 4 * i; }
static double dist(const pbd_world *w, int a, int b) {
    const float *x = px(w, a), *y = px(w, b);
    return sqrt((double)(x[0] - y[0]) * (x[0] - y[0]) + (double)(x[1] - y[1]) * (x[1] - y[1]) +
                (double)(x[2] - y[2]) * (x[2] - y[2]));
}
/* a removed particle: at the origin, inverse mass 0, at rest */
static int is_free_particle(const pbd_world *w, int i) {
    if (i >= pbd_world_particle_count(w)) return 1; /* left the world at its end */
    const float *x = pbd_world_positions(w) + 4 * i, *v = pbd_world_velocities(w) + 4 * i;
    return x[0] == 0 && x[1] == 0 && x[2] == 0 && x[3] == 0 && v[0] == 0 && v[1] == 0 && v[2] == 0;
}
static int all_finite(const pbd_world *w) {
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    for (int i = 0; i < 4 * n; ++i)
        if (!isfinite(x[i]) || !isfinite(v[i])) return 0;
    return 1;
}
static void steps(pbd_world *w, int n) {
    for (int s = 0; s < n; ++s) CHECK_OK(pbd_world_step(w, DT));
}
/* positions and velocities of a range, copied (8 floats per particle) */
static float *state_of(const pbd_world *w, pbd_range r) {
    float *s = (float *)malloc(sizeof(float) * 8 * (size_t)(r.count > 0 ? r.count : 1));
    memcpy(s, pbd_world_positions(w) + 4 * r.first, sizeof(float) * 4 * (size_t)r.count);
    memcpy(s + 4 * r.count, pbd_world_velocities(w) + 4 * r.first, sizeof(float) * 4 * (size_t)r.count);
    return s;
}
static int same_state(const pbd_world *w, pbd_range r, const float *s) {
    float *t = state_of(w, r);
    int same = memcmp(s, t, sizeof(float) * 8 * (size_t)r.count) == 0;
    free(t);
    return same;
}

/* A counting allocator that can also refuse: `left` allocations are
   granted (< 0: all), live blocks and bytes are counted (a header holds
   the size). */
typedef struct halloc {
    long left, live, allocs;
    size_t live_bytes;
} halloc;
static void *h_alloc(void *user, size_t size) {
    halloc *a = (halloc *)user;
    if (a->left == 0) return NULL;
    if (a->left > 0) a->left--;
    size_t *p = (size_t *)malloc(size + 16);
    if (!p) return NULL;
    p[0] = size;
    a->live++;
    a->allocs++;
    a->live_bytes += size;
    return (char *)p + 16;
}
static void h_free(void *user, void *ptr) {
    halloc *a = (halloc *)user;
    if (!ptr) return;
    size_t *p = (size_t *)((char *)ptr - 16);
    a->live--;
    a->live_bytes -= p[0];
    free(p);
}
static pbd_world *world_alloc(halloc *a, float gy) {
    memset(a, 0, sizeof *a);
    a->left = -1;
    pbd_world_desc d = pbd_world_desc_default();
    d.gravity[1] = gy;
    d.allocator.alloc = h_alloc;
    d.allocator.free = h_free;
    d.allocator.user = a;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    return w;
}

/* ---- 1. groups -------------------------------------------------------------------------- */

static void push_apart(pbd_world *w, pbd_range r) {
    float v[6] = {-1, 0, 0, 1, 0, 0};
    CHECK_OK(pbd_particles_set_velocities(w, r, v));
}

/* A distance constraint holds two particles pushed apart at its rest
   length; removed, they fly apart; its handle is stale; the next group
   takes its slot with another id; an object's own group is refused. */
TEST(handles_group_remove) {
    pbd_world *w = pbdt_world(0.0f);
    float pos[6] = {-0.25f, 1, 0, 0.25f, 1, 0};
    pbd_range r = add_pts(w, pos, NULL, 2, 1.0f, 0);
    int idx[2] = {r.first, r.first + 1};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = idx;
    pbd_group g = {0};
    CHECK_OK(pbd_add_constraints(w, &cd, &g));
    CHECK(pbd_world_group_count(w) == 1);
    push_apart(w, r);
    steps(w, 30);
    CHECK_NEAR(dist(w, idx[0], idx[1]), 0.5, 1e-3); /* held */
    CHECK_OK(pbd_remove_group(w, g));
    CHECK(pbd_world_group_count(w) == 0);
    push_apart(w, r);
    steps(w, 30);
    CHECK_MSG(dist(w, idx[0], idx[1]) > 1.4, "after the removal the pair is only %g apart", dist(w, idx[0], idx[1]));
    /* the old handle names nothing */
    CHECK_STALE(w, pbd_group_info(w, g, NULL, NULL), "group");
    CHECK_STALE(w, pbd_remove_group(w, g), "group");
    CHECK_STALE(w, pbd_group_set_compliance(w, g, 1e-3f), "group");
    pbd_group none = {0};
    CHECK_STALE(w, pbd_remove_group(w, none), "group");
    /* the next group reuses the slot with a new generation */
    float rest = 0.2f;
    cd.rest = &rest;
    pbd_group g2 = {0};
    CHECK_OK(pbd_add_constraints(w, &cd, &g2));
    CHECK(SLOT(g2.id) == SLOT(g.id));
    CHECK(g2.id != g.id && g2.id != 0);
    CHECK_STALE(w, pbd_group_info(w, g, NULL, NULL), "group");
    int count = 0;
    CHECK_OK(pbd_group_info(w, g2, NULL, &count));
    CHECK(count == 1);
    steps(w, 2);
    CHECK_NEAR(dist(w, idx[0], idx[1]), 0.2, 1e-3); /* and the new one acts */

    /* an object's own group goes with the object only */
    hcloth c;
    CHECK(flat_cloth(w, 4, 0.3f, 2, 1, 0, &c));
    pbd_object_parts parts = pbdt_parts(w, c.o);
    CHECK(parts.stretch.id != 0 && parts.bending.id != 0);
    int groups = pbd_world_group_count(w);
    CHECK_REFUSED(w, pbd_remove_group(w, parts.stretch), PBD_ERROR_INVALID_ARGUMENT, "object");
    CHECK_REFUSED(w, pbd_remove_group(w, parts.bending), PBD_ERROR_INVALID_ARGUMENT, "object");
    CHECK(pbd_world_group_count(w) == groups);
    CHECK_OK(pbd_group_info(w, parts.stretch, NULL, NULL));
    pbd_mesh_free(&c.m);
    pbd_world_destroy(w);
}

/* Groups are solved in the order of their slots: a group that takes a
   removed group's slot is solved in its place, bit for bit like a world
   that had it there from the start (and unlike the other order). */
static pbd_world *chain_world(pbd_range *r) {
    pbd_world *w = pbdt_world(-9.81f);
    float pos[9] = {0, 1, 0, 0.5f, 1.1f, 0, 1.1f, 0.9f, 0.1f};
    *r = add_pts(w, pos, NULL, 3, 1.0f, 0);
    CHECK_OK(pbd_particle_pin(w, r->first));
    return w;
}
static void add_dist(pbd_world *w, int a, int b, float rest, pbd_group *out) {
    int idx[2] = {a, b};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = idx;
    cd.rest = &rest;
    CHECK_OK(pbd_add_constraints(w, &cd, out));
}
TEST(handles_group_slot_reuse_keeps_solve_order) {
    pbd_range rx, ry, rz;
    pbd_world *x = chain_world(&rx), *y = chain_world(&ry), *z = chain_world(&rz);
    pbd_group tmp, g1, g2, h;
    /* x: tmp in slot 0, g2 in slot 1; tmp goes, g1 takes slot 0 */
    add_dist(x, rx.first, rx.first + 2, 0.7f, &tmp);
    add_dist(x, rx.first + 1, rx.first + 2, 0.3f, &g2);
    CHECK_OK(pbd_remove_group(x, tmp));
    add_dist(x, rx.first, rx.first + 1, 0.3f, &g1);
    CHECK(SLOT(g1.id) == SLOT(tmp.id) && g1.id != tmp.id);
    /* y: g1 then g2 from the start; z: the other order */
    add_dist(y, ry.first, ry.first + 1, 0.3f, &h);
    add_dist(y, ry.first + 1, ry.first + 2, 0.3f, &h);
    add_dist(z, rz.first + 1, rz.first + 2, 0.3f, &h);
    add_dist(z, rz.first, rz.first + 1, 0.3f, &h);
    for (int s = 0; s < 3; ++s) {
        CHECK_OK(pbd_world_step(x, DT));
        CHECK_OK(pbd_world_step(y, DT));
        CHECK_OK(pbd_world_step(z, DT));
    }
    float *sx = state_of(x, rx);
    CHECK_MSG(same_state(y, ry, sx), "the group in the reused slot is not solved in its place");
    CHECK_MSG(!same_state(z, rz, sx), "the solve order makes no difference here: the test proves nothing");
    free(sx);
    pbd_world_destroy(x);
    pbd_world_destroy(y);
    pbd_world_destroy(z);
}

/* ---- 2. colliders ----------------------------------------------------------------------- */

/* the closed surface of the box [-1, 1] x [-1, 0] x [-1, 1] (top at y = 0) */
static pbd_collider add_box_mesh(pbd_world *w, int sdf_resolution, float x) {
    pbd_mesh m;
    float lo[3] = {-1, -1, -1}, hi[3] = {1, 0, 1};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &m));
    pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
    md.positions = m.positions;
    md.vertex_count = m.vertex_count;
    md.triangles = m.triangles;
    md.triangle_count = m.triangle_count;
    md.sdf_resolution = sdf_resolution;
    md.position[0] = x;
    pbd_collider c = {0};
    CHECK_OK(pbd_add_collider_mesh(w, &md, &c));
    pbd_mesh_free(&m);
    return c;
}
/* kind 0 sphere, 1 plane, 2 mesh (BVH), 3 mesh (signed-distance grid):
   its top at y = 0 under x = x0 */
static pbd_collider add_kind(pbd_world *w, int kind, float x0) {
    pbd_collider c = {0};
    if (kind == 0) {
        float centre[3] = {x0, -0.5f, 0};
        CHECK_OK(pbd_add_collider_sphere(w, centre, 0.5f, 0.5f, &c));
    } else if (kind == 1) {
        float p[3] = {x0, 0, 0}, n[3] = {0, 1, 0};
        CHECK_OK(pbd_add_collider_plane(w, p, n, 0.5f, &c));
    } else {
        c = add_box_mesh(w, kind == 2 ? 0 : 16, x0);
    }
    return c;
}

/* A particle resting on a collider falls through once it is removed; the
   handle is stale; the count drops; the next collider takes the slot. */
TEST(handles_collider_remove) {
    static const char *names[4] = {"sphere", "plane", "mesh", "sdf grid"};
    for (int kind = 0; kind < 4; ++kind) {
        pbd_world *w = pbdt_world(-9.81f);
        pbd_collider c = add_kind(w, kind, 0);
        float far[3] = {30, 0, 0};
        pbd_collider other = {0};
        CHECK_OK(pbd_add_collider_sphere(w, far, 0.5f, 0.5f, &other)); /* slot 1 stays */
        pbd_range p = add_one(w, 0, 0.3f, 0, 1.0f);
        steps(w, 60);
        const float *x = px(w, p.first);
        CHECK_MSG(fabsf(x[1]) < 0.2f && fabsf(pbd_world_velocities(w)[4 * p.first + 1]) < 0.1f,
                  "%s: the particle does not rest on it (y %g)", names[kind], x[1]);
        CHECK(pbd_world_collider_count(w) == 2);
        CHECK_OK(pbd_remove_collider(w, c));
        CHECK(pbd_world_collider_count(w) == 1);
        CHECK(pbd_world_collider(w, 0).id == other.id); /* the walk skips the free slot */
        CHECK(pbd_world_collider(w, 1).id == 0);
        pbd_collider all[4] = {{0}, {0}, {0}, {0}};
        int ncol = -1;
        CHECK_OK(pbd_world_colliders(w, all, 4, &ncol)); /* the list walks the same way */
        CHECK(ncol == 1 && all[0].id == other.id && all[1].id == 0);
        CHECK_OK(pbd_world_colliders(w, NULL, 0, &ncol));
        CHECK(ncol == 1);
        CHECK(pbd_world_particle_contact_push(w, p.first) == 0.0f); /* no contact with a removed collider */
        steps(w, 60);
        CHECK_MSG(px(w, p.first)[1] < -1.5f, "%s: removed, yet the particle is at y %g", names[kind],
                  px(w, p.first)[1]);
        float q[3] = {0, 1, 0}, d = 0;
        CHECK_STALE(w, pbd_collider_distance(w, c, q, &d), "collider");
        CHECK_STALE(w, pbd_collider_set_pose(w, c, q, NULL), "collider");
        CHECK_STALE(w, pbd_collider_set_friction(w, c, 0.1f, 0.1f, 0), "collider");
        CHECK_STALE(w, pbd_remove_collider(w, c), "collider");
        /* added again: the same slot, another id; the old handle stays stale */
        pbd_collider c2 = add_kind(w, kind, 0);
        CHECK(SLOT(c2.id) == SLOT(c.id) && c2.id != c.id);
        CHECK(pbd_world_collider_count(w) == 2);
        CHECK_STALE(w, pbd_collider_distance(w, c, q, &d), "collider");
        CHECK_OK(pbd_collider_distance(w, c2, q, &d));
        CHECK_NEAR(d, 1.0, kind == 3 ? 0.2 : 1e-4); /* the new one is the one in the slot */
        pbd_world_destroy(w);
    }
}

/* A fluid block of nx*ny*nz particles at spacing d from corner o. */
static pbd_fluid add_fluid_block(pbd_world *w, int nx, int ny, int nz, float d, const float *o, pbd_range *r) {
    int n = nx * ny * nz;
    float *p = (float *)malloc(sizeof(float) * 3 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        p[3 * i + 0] = o[0] + (0.5f + (float)(i % nx)) * d;
        p[3 * i + 1] = o[1] + (0.5f + (float)((i / nx) % ny)) * d;
        p[3 * i + 2] = o[2] + (0.5f + (float)(i / (nx * ny))) * d;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = n;
    fd.spacing = d;
    pbd_fluid f = {0};
    CHECK_OK(pbd_add_fluid(w, &fd, &f, r));
    free(p);
    return f;
}
static void add_tank(pbd_world *w, float x0, float size) {
    float planes[5][6] = {{x0, 0, 0, 0, 1, 0},
                          {x0, 0, 0, 1, 0, 0},
                          {x0 + size, 0, 0, -1, 0, 0},
                          {x0, 0, 0, 0, 0, 1},
                          {x0, 0, size, 0, 0, -1}};
    for (int k = 0; k < 5; ++k) CHECK_OK(pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.3f, NULL));
}

/* A world with free slots in the pools of colliders (analytic, mesh and
   grid), groups and objects, and free particles in the middle: its
   snapshot restores into a fresh world (save(restore(s)) == s), which
   steps bit-identically; the stale handles stay stale there, the live ones
   valid, and the next adds get the same handles in both. */
TEST(handles_snapshot_with_free_slots) {
    pbd_world *w = pbdt_world(-9.81f);
    float ground[3] = {0, -0.5f, 0}, up[3] = {0, 1, 0}, sc[3] = {0.3f, 0.2f, 0.3f};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.4f, NULL));
    pbd_collider sphere = {0}, bvh = add_box_mesh(w, 0, 5), grid = add_box_mesh(w, 12, 8);
    CHECK_OK(pbd_add_collider_sphere(w, sc, 0.2f, 0.5f, &sphere));
    pbd_collider grid2 = add_box_mesh(w, 8, -6);
    hcloth a, b;
    CHECK(flat_cloth(w, 6, 0.6f, 0, 0.6f, 0, &a));
    CHECK(flat_cloth(w, 5, 0.5f, 4.8f, 0.4f, -0.2f, &b)); /* over the mesh box */
    float pp[12] = {-2, 1, 0, -2, 1.3f, 0, -2, 1.6f, 0.1f, -2.2f, 1.9f, 0};
    pbd_range r = add_pts(w, pp, NULL, 4, 1.0f, 0);
    CHECK_OK(pbd_particle_pin(w, r.first));
    pbd_group g1, g2, g3;
    add_dist(w, r.first, r.first + 1, 0.3f, &g1);
    add_dist(w, r.first + 1, r.first + 2, 0.3f, &g2);
    add_dist(w, r.first + 2, r.first + 3, 0.3f, &g3);
    pbd_object_parts pa = pbdt_parts(w, a.o);
    steps(w, 15);
    int colliders = pbd_world_collider_count(w);
    CHECK_OK(pbd_remove_collider(w, sphere));
    CHECK_OK(pbd_remove_collider(w, bvh)); /* b falls onto the ground now */
    CHECK_OK(pbd_remove_collider(w, grid));
    CHECK_OK(pbd_remove_group(w, g2)); /* the chain breaks */
    CHECK_OK(pbd_remove_object(w, a.o));
    steps(w, 5);
    hsnap s = snap_take(w);
    CHECK(s.n > 0);
    int n = pbd_world_particle_count(w);
    CHECK(n == b.r.first + b.r.count + 4); /* a's particles are free ones in the middle */
    pbd_range all = {0, n};
    steps(w, 30);
    float *want = state_of(w, all);
    pbd_world *w2 = pbdt_world(0.0f);
    add_one(w2, 1, 2, 3, 1.0f); /* replaced by the restore */
    CHECK_OK(pbd_world_restore(w2, s.b, s.n));
    CHECK_MSG(snap_equal(w2, s), "save(restore(s)) != s for a snapshot with free slots");
    CHECK(pbd_world_particle_count(w2) == n);
    CHECK(pbd_world_collider_count(w2) == colliders - 3);
    CHECK(pbd_world_group_count(w2) == pbd_world_group_count(w) && pbd_world_object_count(w2) == 1);
    for (int i = a.r.first; i < a.r.first + a.r.count; ++i) CHECK(is_free_particle(w2, i));
    steps(w2, 30);
    CHECK_MSG(same_state(w2, all, want), "the restored world diverged");
    free(want);
    /* the restored handles: old ones stale, live ones valid, next adds alike */
    CHECK_STALE(w2, pbd_remove_collider(w2, sphere), "collider");
    CHECK_STALE(w2, pbd_remove_collider(w2, bvh), "collider");
    CHECK_STALE(w2, pbd_remove_group(w2, g2), "group");
    CHECK_STALE(w2, pbd_remove_group(w2, pa.stretch), "group");
    CHECK_STALE(w2, pbd_remove_object(w2, a.o), "object");
    CHECK_OK(pbd_group_info(w2, g1, NULL, NULL));
    CHECK_OK(pbd_group_info(w2, g3, NULL, NULL));
    float q[3] = {0, 3, 0}, d = 0;
    CHECK_OK(pbd_collider_distance(w2, grid2, q, &d));
    pbd_collider n1 = {0}, n2 = {0};
    CHECK_OK(pbd_add_collider_sphere(w, q, 0.1f, 0.5f, &n1));
    CHECK_OK(pbd_add_collider_sphere(w2, q, 0.1f, 0.5f, &n2));
    CHECK(n1.id == n2.id && SLOT(n1.id) == SLOT(bvh.id) && n1.id != bvh.id); /* the first free slot */
    pbd_group h1, h2;
    add_dist(w, r.first + 1, r.first + 2, 0.3f, &h1);
    add_dist(w2, r.first + 1, r.first + 2, 0.3f, &h2);
    CHECK(h1.id == h2.id && SLOT(h1.id) == SLOT(pa.bending.id) && h1.id != pa.bending.id);
    /* a mesh collider into the restored free slot and mesh entry */
    pbd_collider m1 = add_box_mesh(w, 0, 5), m2 = add_box_mesh(w2, 0, 5);
    CHECK(m1.id == m2.id && SLOT(m1.id) == SLOT(grid.id) && m1.id != grid.id);
    hcloth c1, c2; /* and a cloth into the free particles */
    CHECK(flat_cloth(w, 6, 0.6f, 0, 0.6f, 0, &c1));
    CHECK(flat_cloth(w2, 6, 0.6f, 0, 0.6f, 0, &c2));
    CHECK(c1.o.id == c2.o.id && c1.r.first == a.r.first && c2.r.first == a.r.first);
    steps(w, 10);
    steps(w2, 10);
    CHECK(pbd_world_particle_count(w) == n && pbd_world_particle_count(w2) == n);
    want = state_of(w, all);
    CHECK_MSG(same_state(w2, all, want), "after the same adds the two worlds diverged");
    free(want);
    free(s.b);
    hcloth *cl[4] = {&a, &b, &c1, &c2};
    for (int k = 0; k < 4; ++k) pbd_mesh_free(&cl[k]->m);
    pbd_world_destroy(w2);
    pbd_world_destroy(w);
}

/* The same with fluids: one removed, one left. The restored world steps
   bit-identically; the stale and the live fluid handles are restored; the
   next fluid takes the free slot and the free range in both. */
TEST(handles_snapshot_with_free_fluid_slot) {
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 0, 0.4f);
    float fo1[3] = {0, 0, 0}, fo2[3] = {0.2f, 0, 0.2f};
    pbd_range r1;
    pbd_fluid f1 = add_fluid_block(w, 3, 3, 3, 0.05f, fo1, &r1);
    pbd_fluid f2 = add_fluid_block(w, 4, 4, 4, 0.05f, fo2, NULL);
    steps(w, 10);
    CHECK_OK(pbd_remove_fluid(w, f1));
    steps(w, 5);
    hsnap s = snap_take(w);
    int n = pbd_world_particle_count(w);
    pbd_range all = {0, n};
    steps(w, 20);
    float *want = state_of(w, all);
    pbd_world *w2 = pbdt_world(0.0f);
    CHECK_OK(pbd_world_restore(w2, s.b, s.n));
    CHECK(pbd_world_fluid_count(w2) == 1 && pbd_world_particle_count(w2) == n);
    CHECK_STALE(w2, pbd_remove_fluid(w2, f1), "fluid");
    CHECK_OK(pbd_fluid_set_viscosity(w2, f2, 0.01f, 0));
    steps(w2, 20);
    CHECK_MSG(same_state(w2, all, want), "the restored world diverged");
    free(want);
    /* the next fluid takes the free slot and range in both */
    pbd_range ra, rb;
    pbd_fluid fa = add_fluid_block(w, 3, 3, 3, 0.05f, fo1, &ra), fb = add_fluid_block(w2, 3, 3, 3, 0.05f, fo1, &rb);
    CHECK(fa.id == fb.id && SLOT(fa.id) == SLOT(f1.id) && fa.id != f1.id && ra.first == r1.first &&
          rb.first == r1.first);
    free(s.b);
    pbd_world_destroy(w2);
    pbd_world_destroy(w);
}

/* save(restore(s)) == s for that world too (a snapshot is canonical: a
   refused call is checked against it byte for byte). */
TEST(handles_snapshot_round_trip_with_fluid) {
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 0, 0.4f);
    float fo1[3] = {0, 0, 0}, fo2[3] = {0.2f, 0, 0.2f};
    pbd_fluid f1 = add_fluid_block(w, 3, 3, 3, 0.05f, fo1, NULL);
    add_fluid_block(w, 4, 4, 4, 0.05f, fo2, NULL);
    steps(w, 2);
    CHECK_OK(pbd_remove_fluid(w, f1));
    steps(w, 2);
    hsnap s = snap_take(w);
    pbd_world *w2 = pbdt_world(0.0f);
    CHECK_OK(pbd_world_restore(w2, s.b, s.n));
    CHECK_MSG(snap_equal(w2, s), "save(restore(s)) != s for a world with a fluid that has stepped");
    free(s.b);
    pbd_world_destroy(w2);
    pbd_world_destroy(w);
}

/* ---- 3. objects ------------------------------------------------------------------------- */

/* A removed cloth: its groups' handles stale, its particles free (at the
   origin, inverse mass 0), the count unchanged while a later object holds
   the end; the later object untouched by the call and stepping exactly as
   in a world that never had the first; the next cloth that fits takes the
   freed range, a bigger one goes to the end. */
TEST(handles_object_remove) {
    pbd_world *w = pbdt_world(-9.81f), *ref = pbdt_world(-9.81f);
    hcloth a, b, bref;
    CHECK(flat_cloth(w, 6, 0.5f, 0, 1, 0, &a));
    CHECK(flat_cloth(w, 5, 0.4f, 2, 2, 0, &b));
    CHECK(flat_cloth(ref, 5, 0.4f, 2, 2, 0, &bref));
    CHECK(a.r.first == 0 && b.r.first == 36 && bref.r.first == 0);
    steps(w, 10);
    steps(ref, 10);
    float *sb0 = state_of(w, b.r);
    CHECK_MSG(same_state(ref, bref.r, sb0), "the two worlds differ before the removal: the comparison proves nothing");
    free(sb0);
    pbd_object_parts pa = pbdt_parts(w, a.o);
    int n0 = pbd_world_particle_count(w), groups0 = pbd_world_group_count(w), own = 0;
    pbd_group ag[4] = {pa.stretch, pa.bending, pa.area, pa.volume};
    for (int k = 0; k < 4; ++k) own += ag[k].id != 0;
    CHECK(own >= 2);
    float *sb = state_of(w, b.r);
    CHECK_OK(pbd_remove_object(w, a.o));
    CHECK(pbd_world_object_count(w) == 1);
    CHECK(pbd_world_group_count(w) == groups0 - own);
    CHECK(pbd_world_particle_count(w) == n0); /* b holds the end */
    CHECK_MSG(same_state(w, b.r, sb), "removing a moved the other cloth");
    free(sb);
    for (int k = 0; k < 4; ++k)
        if (ag[k].id) CHECK_STALE(w, pbd_group_info(w, ag[k], NULL, NULL), "group");
    pbd_object_parts none;
    CHECK_STALE(w, pbd_object_get_parts(w, a.o, &none), "object");
    CHECK_STALE(w, pbd_object_set_damping(w, a.o, 1), "object");
    CHECK_STALE(w, pbd_remove_object(w, a.o), "object");
    for (int i = a.r.first; i < a.r.first + a.r.count; ++i)
        CHECK_MSG(is_free_particle(w, i), "particle %d of the removed cloth is not free", i);
    /* b steps on exactly as in a world that never had a */
    for (int s = 0; s < 30; ++s) {
        CHECK_OK(pbd_world_step(w, DT));
        CHECK_OK(pbd_world_step(ref, DT));
    }
    CHECK(all_finite(w));
    float *sr = state_of(ref, bref.r);
    CHECK_MSG(same_state(w, b.r, sr), "the remaining cloth does not step as without the removed one");
    free(sr);
    for (int i = a.r.first; i < a.r.first + a.r.count; ++i) CHECK(is_free_particle(w, i)); /* and stay so */
    /* the next cloth that fits takes the freed range; a bigger one the end */
    hcloth c, d;
    CHECK(flat_cloth(w, 6, 0.5f, 0, 1, 0, &c));
    CHECK(c.r.first == a.r.first && pbd_world_particle_count(w) == n0);
    CHECK(SLOT(c.o.id) == SLOT(a.o.id) && c.o.id != a.o.id);
    CHECK_STALE(w, pbd_object_get_parts(w, a.o, &none), "object");
    CHECK(flat_cloth(w, 7, 0.5f, 0, 3, 0, &d));
    CHECK(d.r.first == n0 && pbd_world_particle_count(w) == n0 + 49);
    steps(w, 10);
    CHECK(all_finite(w));
    /* removing the objects at the end shrinks the world */
    CHECK_OK(pbd_remove_object(w, d.o));
    CHECK(pbd_world_particle_count(w) == n0);
    CHECK_OK(pbd_remove_object(w, b.o));
    CHECK(pbd_world_particle_count(w) == 36);
    CHECK_OK(pbd_remove_object(w, c.o));
    CHECK(pbd_world_particle_count(w) == 0 && pbd_world_object_count(w) == 0 && pbd_world_group_count(w) == 0);
    CHECK_OK(pbd_world_step(w, DT));
    hcloth *all[5] = {&a, &b, &bref, &c, &d};
    for (int k = 0; k < 5; ++k) pbd_mesh_free(&all[k]->m);
    pbd_world_destroy(ref);
    pbd_world_destroy(w);
}

/* Removal is refused while something else uses the object's particles
   (named in the message, nothing changed), and goes once that is gone. */
TEST(handles_object_remove_refused_while_used) {
    static const char *users[5] = {"group", "long range attachment", "strain limit", "damping cluster",
                                   "collision surface"};
    for (int kind = 0; kind < 5; ++kind) {
        pbd_world *w = pbdt_world(-9.81f);
        pbd_range p = add_one(w, 2, 1.5f, 0, 0.0f); /* pinned: an anchor */
        hcloth a;
        CHECK(flat_cloth(w, 5, 0.4f, 0, 1, 0, &a));
        pbd_group g = {0};
        pbd_lra l = {0};
        pbd_strain_limit s = {0};
        pbd_damping_cluster dc = {0};
        pbd_surface surf = {0};
        int v = a.r.first + 7;
        if (kind == 0) add_dist(w, v, p.first, 1.0f, &g);
        if (kind == 1) {
            pbd_lra_desc ld = pbd_lra_desc_default();
            ld.particles = &v;
            ld.count = 1;
            ld.anchors = &p.first;
            ld.anchor_count = 1;
            CHECK_OK(pbd_add_long_range_attachments(w, &ld, &l));
        }
        if (kind == 2) {
            pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
            sd.object = a.o;
            sd.triangles = a.m.triangles;
            sd.triangle_count = a.m.triangle_count;
            CHECK_OK(pbd_add_strain_limit(w, &sd, &s));
        }
        if (kind == 3) {
            int ids[3] = {v, v + 1, v + 2};
            CHECK_OK(pbd_add_damping_cluster(w, ids, 3, 1.0f, &dc));
        }
        if (kind == 4) {
            pbd_cloth_desc cd = pbdt_cloth_desc(&a.m);
            CHECK_OK(pbd_add_cloth_self_collision(w, a.o, &cd, 0.01f, &surf));
        }
        steps(w, 3);
        int objects = pbd_world_object_count(w), n = pbd_world_particle_count(w);
        CHECK_REFUSED(w, pbd_remove_object(w, a.o), PBD_ERROR_INVALID_ARGUMENT, users[kind]);
        CHECK(pbd_world_object_count(w) == objects && pbd_world_particle_count(w) == n);
        CHECK(pbdt_parts(w, a.o).particles.count == 25);
        /* the user goes, then the object may */
        if (kind == 0) CHECK_OK(pbd_remove_group(w, g));
        if (kind == 1) CHECK_OK(pbd_remove_long_range_attachments(w, l));
        if (kind == 2) CHECK_OK(pbd_remove_strain_limit(w, s));
        if (kind == 3) CHECK_OK(pbd_remove_damping_cluster(w, dc));
        if (kind == 4) CHECK_OK(pbd_remove_collision_surface(w, surf));
        CHECK_OK(pbd_remove_object(w, a.o));
        CHECK(pbd_world_object_count(w) == 0 && pbd_world_particle_count(w) == 1); /* the anchor stays */
        CHECK(px(w, p.first)[0] == 2.0f);
        steps(w, 3);
        CHECK(all_finite(w));
        pbd_mesh_free(&a.m);
        pbd_world_destroy(w);
    }
}

/* A strip (no gravity): left column pinned, right column kinematic and
   pulled right until it tears. */
enum { SX = 12, SY = 5 };
static void strip(pbd_world *w, hcloth *c) {
    float o[3] = {0, 0, 0}, u[3] = {1.1f, 0, 0}, v[3] = {0, 0.4f, 0};
    memset(c, 0, sizeof *c);
    CHECK_OK(pbd_mesh_grid(SX, SY, o, u, v, &c->m));
    unsigned seed = 5;
    for (int i = 0; i < c->m.vertex_count; ++i) c->m.positions[3 * i + 2] = 0.001f * pbdt_rand(&seed);
    pbd_cloth_desc cd = pbdt_cloth_desc(&c->m);
    cd.stretch_compliance = 1e-5f;
    cd.tethers = 0;
    CHECK_OK(pbd_add_cloth(w, &cd, &c->o));
    c->r = pbdt_parts(w, c->o).particles;
    for (int j = 0; j < SY; ++j) {
        CHECK_OK(pbd_particle_pin(w, c->r.first + j * SX));
        CHECK_OK(pbd_particle_set_kinematic(w, c->r.first + j * SX + SX - 1, 1));
    }
}
static int pull_until_torn(pbd_world *w, const hcloth *c) {
    int total = 0;
    for (int s = 0; s < 80 && total < 6; ++s) {
        for (int j = 0; j < SY; ++j) {
            float t[3] = {1.1f + 0.02f * (float)s * (1.0f + 0.3f * (float)j), 0.1f * (float)j, 0};
            CHECK_OK(pbd_particle_set_kinematic_target(w, c->r.first + j * SX + SX - 1, t));
        }
        CHECK_OK(pbd_world_step(w, DT));
        int splits = 0;
        CHECK_OK(pbd_world_tear(w, &splits));
        total += splits;
    }
    return total;
}

/* A torn cloth removed frees its split copies too: (0) the cloth holds the
   world's last particles (the copies join its range), (1) a particle was
   added after it (the copies lie beyond it), (2) as (1) but its tearing
   was removed first (what has torn stays torn: the copies are still its),
   (3) as (2) in a world restored from a snapshot taken before the removal. */
TEST(handles_object_remove_torn_cloth) {
    for (int mode = 0; mode < 4; ++mode) {
        pbd_world *w = pbdt_world(0.0f);
        pbd_range before = add_one(w, -3, 0, 0, 1.0f);
        hcloth c;
        strip(w, &c);
        pbd_range after = {-1, 0};
        if (mode >= 1) after = add_one(w, -3, 1, 0, 1.0f);
        pbd_tearing_desc td = pbd_tearing_desc_default();
        td.object = c.o;
        td.triangles = c.m.triangles;
        td.triangle_count = c.m.triangle_count;
        td.threshold = 1.3f;
        td.max_splits = 4;
        pbd_tearing t = {0};
        CHECK_OK(pbd_add_tearing(w, &td, &t));
        int n0 = pbd_world_particle_count(w);
        int splits = pull_until_torn(w, &c);
        int n1 = pbd_world_particle_count(w);
        CHECK_MSG(splits > 0 && n1 == n0 + splits, "mode %d: %d splits, %d -> %d particles", mode, splits, n0, n1);
        int nt_torn = 0;
        CHECK_OK(pbd_object_triangles(w, c.o, NULL, 0, &nt_torn));
        if (mode >= 2) {
            CHECK_OK(pbd_remove_tearing(w, t));
            CHECK_STALE(w, pbd_remove_tearing(w, t), "tearing");
            /* what has torn stays torn, and drawable */
            int nt = 0;
            CHECK_OK(pbd_object_triangles(w, c.o, NULL, 0, &nt));
            CHECK(nt == nt_torn);
            CHECK(pbd_world_tear(w, NULL) == PBD_OK && pbd_world_particle_count(w) == n1);
        }
        if (mode == 3) {
            hsnap s = snap_take(w);
            pbd_world *w2 = pbdt_world(0.0f);
            CHECK_OK(pbd_world_restore(w2, s.b, s.n));
            free(s.b);
            pbd_world_destroy(w);
            w = w2;
        }
        float *keep = state_of(w, before);
        CHECK_OK(pbd_remove_object(w, c.o));
        CHECK(pbd_world_object_count(w) == 0 && pbd_world_group_count(w) == 0);
        if (mode >= 1) CHECK_STALE(w, pbd_remove_tearing(w, t), "tearing"); /* it went with the cloth */
        int expect = mode == 0 ? before.first + 1 : after.first + 1;
        CHECK_MSG(pbd_world_particle_count(w) == expect, "mode %d: %d particles left, wanted %d (of %d)", mode,
                  pbd_world_particle_count(w), expect, n1);
        int left = 0;
        for (int i = c.r.first; i < n1; ++i)
            if (i != after.first && !is_free_particle(w, i)) left++;
        CHECK_MSG(left == 0, "mode %d: %d particles of the torn cloth (copies from %d on) are not free", mode, left,
                  n0);
        CHECK(same_state(w, before, keep));
        free(keep);
        if (mode >= 1) CHECK(px(w, after.first)[0] == -3.0f && px(w, after.first)[3] == 1.0f);
        steps(w, 3);
        CHECK(all_finite(w));
        pbd_mesh_free(&c.m);
        pbd_world_destroy(w);
    }
}

/* ---- 4. fluids and particles ------------------------------------------------------------- */

/* A removed fluid: its particles free and out of every neighbour list, its
   handle stale; the other fluid goes on (finite, density sane); a new
   fluid of the same size takes the freed range and the slot. */
TEST(handles_fluid_remove) {
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 0, 0.6f);
    float o1[3] = {0, 0, 0}, o2[3] = {0.3f, 0, 0};
    pbd_range r1, r2;
    pbd_fluid f1 = add_fluid_block(w, 5, 5, 5, 0.05f, o1, &r1);
    pbd_fluid f2 = add_fluid_block(w, 5, 5, 5, 0.05f, o2, &r2);
    CHECK(pbd_world_fluid_count(w) == 2);
    steps(w, 20);
    CHECK_OK(pbd_remove_fluid(w, f1));
    CHECK(pbd_world_fluid_count(w) == 1);
    CHECK(pbd_world_particle_count(w) == r2.first + r2.count);
    for (int i = r1.first; i < r1.first + r1.count; ++i) CHECK(is_free_particle(w, i));
    CHECK_STALE(w, pbd_remove_fluid(w, f1), "fluid");
    CHECK_STALE(w, pbd_fluid_set_viscosity(w, f1, 0.01f, 0), "fluid");
    int cnt = 0;
    CHECK_STALE(w, pbd_fluid_densities(w, f1, NULL, 0, &cnt), "fluid");
    steps(w, 60);
    CHECK(all_finite(w));
    for (int i = r1.first; i < r1.first + r1.count; ++i) CHECK(is_free_particle(w, i));
    /* the removed particles (at the origin, a corner of the tank) are no
       neighbours of anyone */
    int nbr[PBD_MAX_NEIGHBORS], bad = 0, total = 0;
    for (int i = r2.first; i < r2.first + r2.count; ++i) {
        int k = 0;
        CHECK_OK(pbd_world_particle_neighbors(w, i, nbr, PBD_MAX_NEIGHBORS, &k));
        total += k;
        for (int j = 0; j < k && j < PBD_MAX_NEIGHBORS; ++j) bad += nbr[j] >= r1.first && nbr[j] < r1.first + r1.count;
    }
    CHECK_MSG(bad == 0, "%d neighbours are removed fluid particles", bad);
    CHECK(total > r2.count); /* the lists are not empty */
    float dens[125];
    CHECK_OK(pbd_fluid_densities(w, f2, dens, 125, &cnt));
    CHECK(cnt == 125);
    double mean = 0, mx = 0;
    for (int i = 0; i < 125; ++i) {
        mean += dens[i] / 125.0;
        if (dens[i] > mx) mx = dens[i];
    }
    CHECK_MSG(mean > 0.3 && mean < 1.05 && mx < 1.15, "remaining fluid: density mean %g, max %g", mean, mx);
    /* still in the tank */
    for (int i = r2.first; i < r2.first + r2.count; ++i) {
        const float *x = px(w, i);
        CHECK(x[0] > -0.01f && x[0] < 0.61f && x[1] > -0.01f && x[1] < 1.0f && x[2] > -0.01f && x[2] < 0.61f);
    }
    /* the next fluid of that size takes the range and the slot */
    pbd_range r3;
    pbd_fluid f3 = add_fluid_block(w, 5, 5, 5, 0.05f, o1, &r3);
    CHECK(r3.first == r1.first && SLOT(f3.id) == SLOT(f1.id) && f3.id != f1.id);
    steps(w, 10);
    CHECK(all_finite(w));
    CHECK_OK(pbd_remove_fluid(w, f2)); /* the last particles: the world shrinks */
    CHECK(pbd_world_particle_count(w) == r3.first + r3.count);
    CHECK_OK(pbd_remove_fluid(w, f3));
    CHECK(pbd_world_particle_count(w) == 0 && pbd_world_fluid_count(w) == 0);
    CHECK_OK(pbd_world_step(w, DT));
    pbd_world_destroy(w);
}

/* One strand over particles of pbd_add_particles (root pinned). */
static pbd_strands add_strand(pbd_world *w, float x0, int n, pbd_range *r) {
    float pos[3 * 8] = {0}; /* (n may be 0 for the compiler) */
    for (int i = 0; i < n; ++i) {
        pos[3 * i] = x0 + 0.1f * (float)i;
        pos[3 * i + 1] = 1;
        pos[3 * i + 2] = 0;
    }
    *r = add_pts(w, pos, NULL, n, 0.01f, 0);
    CHECK_OK(pbd_particle_pin(w, r->first));
    int idx[8], starts[2] = {0, n};
    for (int i = 0; i < n; ++i) idx[i] = r->first + i;
    pbd_strands_desc sd = pbd_strands_desc_default();
    sd.particles = idx;
    sd.strand_starts = starts;
    sd.strand_count = 1;
    pbd_strands s = {0};
    CHECK_OK(pbd_add_strands(w, &sd, &s));
    return s;
}

/* pbd_remove_particles: loose particles only, once, within the world, and
   not while a strand set or a group uses them. */
TEST(handles_particles_remove) {
    pbd_world *w = pbdt_world(-9.81f);
    float pp[12] = {5, 1, 0, 5, 1.2f, 0, 5, 1.4f, 0, 5, 1.6f, 0};
    pbd_range p = add_pts(w, pp, NULL, 4, 1.0f, 0);
    hcloth a;
    CHECK(flat_cloth(w, 3, 0.2f, 0, 1, 0, &a));
    float fo[3] = {-2, 0, 0};
    pbd_range fr;
    pbd_fluid f = add_fluid_block(w, 2, 2, 2, 0.05f, fo, &fr);
    (void)f;
    pbd_range q = add_pts(w, pp, NULL, 3, 1.0f, 0);
    int n = pbd_world_particle_count(w);
    pbd_range r;
    r.first = a.r.first + 2, r.count = 1;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INVALID_ARGUMENT, "object");
    r.first = p.first + 2, r.count = 4; /* into the cloth */
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INVALID_ARGUMENT, "object");
    r.first = fr.first + 1, r.count = 2;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INVALID_ARGUMENT, "fluid");
    r.first = q.first - 1, r.count = 2; /* the fluid's last and q's first */
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INVALID_ARGUMENT, "fluid");
    r.first = -1, r.count = 1;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INDEX_OUT_OF_RANGE, NULL);
    r.first = n - 1, r.count = 2;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INDEX_OUT_OF_RANGE, NULL);
    r.first = n, r.count = 1;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INDEX_OUT_OF_RANGE, NULL);
    r.first = 0, r.count = 0;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INDEX_OUT_OF_RANGE, NULL);
    r.first = INT_MAX, r.count = 1; /* the message's last index overflowed int (UBSan) */
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INDEX_OUT_OF_RANGE, "2147483647..2147483647");
    r.first = INT_MIN, r.count = INT_MAX;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INDEX_OUT_OF_RANGE, NULL);
    /* a group over q's first particle keeps it */
    pbd_group g;
    add_dist(w, q.first, q.first + 1, 0.2f, &g);
    CHECK_REFUSED(w, pbd_remove_particles(w, q), PBD_ERROR_INVALID_ARGUMENT, "group");
    CHECK_OK(pbd_remove_group(w, g));
    /* loose ones go; the count stays while others hold the end */
    CHECK_OK(pbd_remove_particles(w, p));
    CHECK(pbd_world_particle_count(w) == n);
    for (int i = p.first; i < p.first + p.count; ++i) CHECK(is_free_particle(w, i));
    CHECK_REFUSED(w, pbd_remove_particles(w, p), PBD_ERROR_INVALID_ARGUMENT, "removed");
    r.first = p.first + 3, r.count = 1;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INVALID_ARGUMENT, "removed");
    steps(w, 5);
    for (int i = p.first; i < p.first + p.count; ++i) CHECK(is_free_particle(w, i)); /* gravity does not move them */
    CHECK_OK(pbd_remove_particles(w, q)); /* the last ones: the world shrinks */
    CHECK(pbd_world_particle_count(w) == q.first);
    pbd_mesh_free(&a.m);
    pbd_world_destroy(w);
}

/* Strands and hair keep their particles until they are removed. */
static void particles_of_strands_part(void) {
    pbd_world *w = serial_world(-9.81f);
    pbd_range q = add_one(w, 9, 9, 9, 1.0f), r;
    /* a strand set keeps its particles until it is removed */
    pbd_range sr;
    pbd_strands s = add_strand(w, 3, 5, &sr);
    steps(w, 20);
    CHECK_REFUSED(w, pbd_remove_particles(w, sr), PBD_ERROR_INVALID_ARGUMENT, "strand");
    r.first = sr.first + 4, r.count = 1;
    CHECK_REFUSED(w, pbd_remove_particles(w, r), PBD_ERROR_INVALID_ARGUMENT, "strand");
    CHECK_OK(pbd_remove_strands(w, s));
    CHECK_STALE(w, pbd_strands_info(w, s, NULL, NULL), "strand");
    CHECK_STALE(w, pbd_remove_strands(w, s), "strand");
    CHECK_OK(pbd_remove_particles(w, sr));
    CHECK(pbd_world_particle_count(w) == sr.first);
    /* a hair's particles too */
    pbd_hair_desc hd = pbd_hair_desc_default();
    float root[3] = {0, 2, 0}, normal[3] = {0, 1, 0};
    hd.root_positions = root;
    hd.root_normals = normal;
    hd.strand_count = 1;
    hd.particles_per_strand = 6;
    pbd_strands hair = {0};
    pbd_range hr = {0, 0};
    CHECK_OK(pbd_add_hair(w, &hd, &hair, &hr));
    CHECK(hr.count == 6);
    steps(w, 5);
    CHECK_REFUSED(w, pbd_remove_particles(w, hr), PBD_ERROR_INVALID_ARGUMENT, "strand");
    CHECK_OK(pbd_remove_strands(w, hair));
    CHECK_OK(pbd_remove_particles(w, hr));
    CHECK(pbd_world_particle_count(w) == hr.first);
    steps(w, 5);
    CHECK(all_finite(w));
    (void)q;
    pbd_world_destroy(w);
}
TEST(handles_particles_remove_strands) { particles_of_strands_part(); }

/* A particle (particle contact on) resting on another falls to the ground
   once the one below is removed: the removed one collides no more. */
TEST(handles_particles_remove_stops_contact) {
    pbd_world *w = pbdt_world(-9.81f);
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    float pb[3] = {5, 0.05f, 0}, pa[3] = {5, 0.16f, 0};
    pbd_range below = add_pts(w, pb, NULL, 1, 1.0f, 0.05f);
    pbd_range above = add_pts(w, pa, NULL, 1, 1.0f, 0.05f);
    CHECK_OK(pbd_particles_set_particle_contact(w, below, 1));
    CHECK_OK(pbd_particles_set_particle_contact(w, above, 1));
    steps(w, 60);
    CHECK_NEAR(px(w, above.first)[1], 0.15, 0.01); /* stacked */
    CHECK_OK(pbd_remove_particles(w, below));
    steps(w, 60);
    CHECK_NEAR(px(w, above.first)[1], 0.05, 0.01); /* on the ground */
    CHECK_NEAR(px(w, above.first)[0], 5.0, 1e-4);
    pbd_world_destroy(w);
}

/* ---- 5. the other removals stop acting ---------------------------------------------------- */

/* A particle tethered below a pinned anchor hangs at the tether's length;
   removed, the tether lets it fall. A cloth's automatic tethers are no
   set of the user's: refused. */
TEST(handles_lra_remove) {
    pbd_world *w = pbdt_world(-9.81f);
    float pos[6] = {0, 1, 0, 0, 0.6f, 0};
    pbd_range r = add_pts(w, pos, NULL, 2, 1.0f, 0);
    CHECK_OK(pbd_particle_pin(w, r.first));
    int anchor = r.first, particle = r.first + 1;
    pbd_lra_desc ld = pbd_lra_desc_default();
    ld.particles = &particle;
    ld.count = 1;
    ld.anchors = &anchor;
    ld.anchor_count = 1;
    pbd_lra l = {0};
    CHECK_OK(pbd_add_long_range_attachments(w, &ld, &l));
    steps(w, 60);
    CHECK_NEAR(px(w, particle)[1], 0.6, 1e-3);
    CHECK_OK(pbd_remove_long_range_attachments(w, l));
    steps(w, 30);
    CHECK_MSG(px(w, particle)[1] < 0.0f, "the untethered particle is at y %g", px(w, particle)[1]);
    int count = 0;
    CHECK_STALE(w, pbd_lra_tethers(w, l, NULL, NULL, NULL, 0, &count), "long range attachment");
    CHECK_STALE(w, pbd_lra_set_enabled(w, l, 1), "long range attachment");
    CHECK_STALE(w, pbd_remove_long_range_attachments(w, l), "long range attachment");
    /* automatic tethers */
    hcloth c;
    float o[3] = {2, 1, 0}, u[3] = {0.5f, 0, 0}, v[3] = {0, -0.5f, 0};
    CHECK(add_cloth(w, 5, 5, o, u, v, 1, &c));
    CHECK_OK(pbd_particle_pin(w, c.r.first));
    CHECK_OK(pbd_particle_pin(w, c.r.first + 4));
    pbd_lra auto_set = {0};
    CHECK_OK(pbd_object_tethers(w, c.o, &auto_set));
    CHECK(auto_set.id != 0);
    CHECK_REFUSED(w, pbd_remove_long_range_attachments(w, auto_set), PBD_ERROR_INVALID_ARGUMENT, "object");
    CHECK_OK(pbd_lra_tethers(w, auto_set, NULL, NULL, NULL, 0, &count));
    CHECK(count > 0);
    /* they go with the cloth */
    CHECK_OK(pbd_remove_object(w, c.o));
    CHECK_STALE(w, pbd_lra_tethers(w, auto_set, NULL, NULL, NULL, 0, &count), "long range attachment");
    pbd_mesh_free(&c.m);
    pbd_world_destroy(w);
}

/* Largest relative edge stretch of a cloth. */
static double max_stretch(const pbd_world *w, const hcloth *c) {
    double mx = 0;
    for (int t = 0; t < c->m.triangle_count; ++t)
        for (int e = 0; e < 3; ++e) {
            int a = c->m.triangles[3 * t + e], b = c->m.triangles[3 * t + (e + 1) % 3];
            const float *ra = c->m.positions + 3 * a, *rb = c->m.positions + 3 * b;
            double rest = sqrt((double)(ra[0] - rb[0]) * (ra[0] - rb[0]) + (double)(ra[1] - rb[1]) * (ra[1] - rb[1]) +
                               (double)(ra[2] - rb[2]) * (ra[2] - rb[2]));
            double s = dist(w, c->r.first + a, c->r.first + b) / rest - 1;
            if (s > mx) mx = s;
        }
    return mx;
}

/* A soft cloth hanging from its top row: a strain limit keeps it within
   5%; removed, it stretches far beyond. */
TEST(handles_strain_limit_remove) {
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 4, 16));
    hcloth c;
    float o[3] = {-0.5f, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, -1, 0};
    memset(&c, 0, sizeof c);
    CHECK_OK(pbd_mesh_grid(10, 10, o, u, v, &c.m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&c.m);
    cd.stretch_compliance = 0.5f;
    cd.tethers = 0;
    CHECK_OK(pbd_add_cloth(w, &cd, &c.o));
    c.r = pbdt_parts(w, c.o).particles;
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_particle_pin(w, c.r.first + i));
    pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
    sd.object = c.o;
    sd.triangles = c.m.triangles;
    sd.triangle_count = c.m.triangle_count;
    sd.mode = PBD_STRAIN_EDGES;
    sd.min_stretch = 0.95f;
    sd.max_stretch = 1.05f;
    pbd_strain_limit s = {0};
    CHECK_OK(pbd_add_strain_limit(w, &sd, &s));
    steps(w, 90);
    double limited = max_stretch(w, &c);
    CHECK_OK(pbd_remove_strain_limit(w, s));
    steps(w, 90);
    double free_ = max_stretch(w, &c);
    printf("    hanging soft cloth: edge stretch %.4f with the limit, %.4f after its removal\n", limited, free_);
    CHECK(limited < 0.06);
    CHECK_MSG(free_ > 0.10 && free_ > 2 * limited, "removed, yet the stretch is %g (limited %g)", free_, limited);
    CHECK_STALE(w, pbd_strain_limit_set_enabled(w, s, 1), "strain limit");
    CHECK_STALE(w, pbd_strain_limit_set_range(w, s, 0.9f, 1.1f), "strain limit");
    CHECK_STALE(w, pbd_remove_strain_limit(w, s), "strain limit");
    /* the object goes now (nothing else uses it) */
    CHECK_OK(pbd_remove_object(w, c.o));
    CHECK(pbd_world_particle_count(w) == 0);
    pbd_mesh_free(&c.m);
    pbd_world_destroy(w);
}

/* A horizontal strand (root pinned) keeps its segment lengths; with its
   strands removed the particles fall freely. */
static void strands_remove_part(void) {
    pbd_world *w = serial_world(-9.81f);
    pbd_range a, b;
    pbd_strands sa = add_strand(w, 0, 5, &a), sb = add_strand(w, 3, 5, &b);
    CHECK_OK(pbd_remove_strands(w, sb));
    steps(w, 30);
    for (int i = 1; i < 5; ++i) CHECK_NEAR(dist(w, a.first + i - 1, a.first + i), 0.1, 1e-3);
    CHECK_MSG(dist(w, b.first, b.first + 1) > 0.5, "the strand still holds: segment %g", dist(w, b.first, b.first + 1));
    CHECK_NEAR(px(w, b.first + 1)[1], 1 - 0.5 * 9.81 * 0.5 * 0.5, 0.02); /* free fall for 0.5 s */
    CHECK_STALE(w, pbd_strands_set_damping(w, sb, 0.5f), "strand");
    CHECK_OK(pbd_strands_set_damping(w, sa, 0.5f));
    /* the next set takes the slot */
    pbd_range c;
    pbd_strands sc = add_strand(w, 6, 4, &c);
    CHECK(SLOT(sc.id) == SLOT(sb.id) && sc.id != sb.id);
    int ns = 0, np = 0;
    CHECK_OK(pbd_strands_info(w, sc, &ns, &np));
    CHECK(ns == 1 && np == 4);
    pbd_world_destroy(w);
}
TEST(handles_strands_remove) { strands_remove_part(); }

/* The smallest case: a world steps after its only strand set was removed. */
static void step_after_strands_removed_part(void) {
    pbd_world *w = serial_world(-9.81f);
    pbd_range a;
    pbd_strands s = add_strand(w, 0, 4, &a);
    CHECK_OK(pbd_remove_strands(w, s));
    CHECK_OK(pbd_world_step(w, DT));
    CHECK_NEAR(px(w, a.first + 3)[1], 1 - 9.81 * DT * DT * 5 / 8, 1e-5); /* it fell (4 substeps) */
    pbd_world_destroy(w);
}
TEST(handles_step_after_strands_removed) { step_after_strands_removed_part(); }

/* Tearing removed before the pull: nothing tears; the same pull tears a
   strip that keeps its tearing. */
TEST(handles_tearing_remove) {
    int splits[2] = {0, 0};
    for (int keep = 0; keep < 2; ++keep) {
        pbd_world *w = pbdt_world(0.0f);
        hcloth c;
        strip(w, &c);
        pbd_tearing_desc td = pbd_tearing_desc_default();
        td.object = c.o;
        td.triangles = c.m.triangles;
        td.triangle_count = c.m.triangle_count;
        td.threshold = 1.3f;
        pbd_tearing t = {0};
        CHECK_OK(pbd_add_tearing(w, &td, &t));
        int n0 = pbd_world_particle_count(w);
        if (!keep) {
            CHECK_OK(pbd_remove_tearing(w, t));
            CHECK_STALE(w, pbd_remove_tearing(w, t), "tearing");
            int nt = 0; /* stopped, it keeps its triangles */
            CHECK_OK(pbd_object_triangles(w, c.o, NULL, 0, &nt));
            CHECK(nt == c.m.triangle_count);
        }
        splits[keep] = pull_until_torn(w, &c);
        CHECK(pbd_world_particle_count(w) == n0 + splits[keep]);
        if (!keep) {
            /* a new tearing takes the slot */
            pbd_tearing t2 = {0};
            CHECK_OK(pbd_add_tearing(w, &td, &t2));
            CHECK(SLOT(t2.id) == SLOT(t.id) && t2.id != t.id);
        }
        pbd_mesh_free(&c.m);
        pbd_world_destroy(w);
    }
    CHECK_MSG(splits[0] == 0 && splits[1] > 0, "splits without / with tearing: %d / %d", splits[0], splits[1]);
}

/* Free particles in a damping cluster: its relative motion decays; after
   the removal their velocities are kept. */
TEST(handles_damping_cluster_remove) {
    pbd_world *w = pbdt_world(0.0f);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1));
    enum { N = 12 };
    float pos[3 * N], vel[3 * N];
    unsigned seed = 3;
    for (int i = 0; i < 3 * N; ++i) {
        pos[i] = 0.1f * (pbdt_rand(&seed) - 0.5f);
        vel[i] = 2.0f * (pbdt_rand(&seed) - 0.5f);
    }
    pbd_range r = add_pts(w, pos, vel, N, 1.0f, 0);
    int ids[N];
    for (int i = 0; i < N; ++i) ids[i] = r.first + i;
    pbd_damping_cluster c = {0};
    CHECK_OK(pbd_add_damping_cluster(w, ids, N, 20.0f, &c));
    float *v0 = state_of(w, r);
    CHECK_OK(pbd_world_step(w, DT));
    const float *v = pbd_world_velocities(w);
    double change = 0;
    for (int i = 0; i < 4 * N; ++i) change = fmax(change, fabs(v[i] - v0[4 * N + i]));
    CHECK_MSG(change > 0.1, "the cluster changed the velocities by only %g", change);
    free(v0);
    CHECK_OK(pbd_remove_damping_cluster(w, c));
    v0 = state_of(w, r);
    steps(w, 10);
    v = pbd_world_velocities(w);
    change = 0;
    for (int i = 0; i < 4 * N; ++i) change = fmax(change, fabs(v[i] - v0[4 * N + i]));
    CHECK_MSG(change < 1e-4, "removed, yet the velocities changed by %g", change);
    free(v0);
    CHECK_STALE(w, pbd_damping_cluster_set_damping(w, c, 1.0f), "damping cluster");
    CHECK_STALE(w, pbd_remove_damping_cluster(w, c), "damping cluster");
    pbd_damping_cluster c2 = {0};
    CHECK_OK(pbd_add_damping_cluster(w, ids, 3, 1.0f, &c2));
    CHECK(SLOT(c2.id) == SLOT(c.id) && c2.id != c.id);
    pbd_world_destroy(w);
}

/* Two cloths dropped onto each other over a floor: with their collision
   surfaces the upper one rests on the lower one a thickness above it;
   with the surfaces removed it falls through onto the floor, and there
   are no self-contacts. */
static void collision_surface_remove_part(void) {
    double gap[2] = {0, 0};
    int contacts[2] = {0, 0};
    const float th = 0.02f;
    for (int keep = 0; keep < 2; ++keep) {
        pbd_world *w = serial_world(-9.81f);
        float p[3] = {0, 0, 0}, n[3] = {0, 1, 0};
        CHECK_OK(pbd_add_collider_plane(w, p, n, 0.5f, NULL));
        hcloth lo, hi;
        CHECK(flat_cloth(w, 8, 0.6f, -0.3f, 0.02f, -0.3f, &lo));
        CHECK(flat_cloth(w, 8, 0.5f, -0.25f, 0.1f, -0.25f, &hi));
        pbd_cloth_desc cd = pbdt_cloth_desc(&lo.m);
        pbd_surface s1 = {0}, s2 = {0};
        CHECK_OK(pbd_add_cloth_self_collision(w, lo.o, &cd, th, &s1));
        cd = pbdt_cloth_desc(&hi.m);
        CHECK_OK(pbd_add_cloth_self_collision(w, hi.o, &cd, th, &s2));
        CHECK(pbd_world_surface_count(w) == 2);
        if (!keep) {
            CHECK_OK(pbd_remove_collision_surface(w, s1));
            CHECK_OK(pbd_remove_collision_surface(w, s2));
            CHECK(pbd_world_surface_count(w) == 0);
            int nt = 0;
            CHECK_STALE(w, pbd_surface_triangles(w, s1, NULL, 0, &nt), "surface");
            CHECK_STALE(w, pbd_remove_collision_surface(w, s2), "surface");
        }
        for (int k = 0; k < 90; ++k) {
            CHECK_OK(pbd_world_step(w, DT));
            contacts[keep] += pbd_world_self_contact_count(w);
        }
        double ylo = 0, yhi = 0;
        for (int i = 0; i < lo.r.count; ++i) ylo += px(w, lo.r.first + i)[1] / lo.r.count;
        for (int i = 0; i < hi.r.count; ++i) yhi += px(w, hi.r.first + i)[1] / hi.r.count;
        gap[keep] = yhi - ylo;
        CHECK(all_finite(w));
        if (!keep) { /* a new surface takes the first slot */
            pbd_surface s3 = {0};
            cd = pbdt_cloth_desc(&lo.m);
            CHECK_OK(pbd_add_cloth_self_collision(w, lo.o, &cd, th, &s3));
            CHECK(SLOT(s3.id) == SLOT(s1.id) && s3.id != s1.id);
            CHECK_STALE(w, pbd_remove_collision_surface(w, s1), "surface");
        }
        pbd_mesh_free(&lo.m);
        pbd_mesh_free(&hi.m);
        pbd_world_destroy(w);
    }
    printf("    stacked cloths: mean gap %.4f m with surfaces, %.4f m without\n", gap[1], gap[0]);
    CHECK(contacts[1] > 0 && contacts[0] == 0);
    CHECK_MSG(gap[1] > 0.8 * th, "with surfaces the gap is %g", gap[1]);
    CHECK_MSG(fabs(gap[0]) < 0.25 * th, "without surfaces the gap is %g", gap[0]);
}
TEST(handles_collision_surface_remove) { collision_surface_remove_part(); }

/* ---- 6. churn ----------------------------------------------------------------------------- */

/* 200 rounds of adding two small cloths and removing them in either order,
   stepping in between, next to a cloth that stays: the counts come back
   to the same values after every round, the handles' slots stay in the
   first few, the world stays finite, and the live memory (a counting
   allocator) after every round equals that after the first round
   exactly: a round reuses the slots, the free particles and the capacity
   the first one made. */
TEST(handles_churn_stays_bounded) {
    halloc A;
    pbd_world *w = world_alloc(&A, -9.81f);
    float ground[3] = {0, -1, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    hcloth keep;
    CHECK(flat_cloth(w, 6, 0.5f, 2, 0.5f, 0, &keep));
    int n0 = pbd_world_particle_count(w), g0 = pbd_world_group_count(w);
    pbd_mesh m1, m2;
    float o1[3] = {0, 0.3f, 0}, o2[3] = {0.1f, 0.6f, 0}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
    CHECK_OK(pbd_mesh_grid(5, 5, o1, u, v, &m1));
    CHECK_OK(pbd_mesh_grid(4, 4, o2, u, v, &m2));
    pbd_cloth_desc c1 = pbdt_cloth_desc(&m1), c2 = pbdt_cloth_desc(&m2);
    size_t bytes1 = 0;
    long blocks1 = 0;
    int bad_counts = 0, bad_bytes = 0, max_slot = 0, max_n = 0;
    for (int round = 0; round < 200; ++round) {
        pbd_object x = {0}, y = {0};
        CHECK_OK(pbd_add_cloth(w, &c1, &x));
        CHECK_OK(pbd_world_step(w, DT));
        CHECK_OK(pbd_add_cloth(w, &c2, &y));
        CHECK_OK(pbd_world_step(w, DT));
        if (pbd_world_particle_count(w) > max_n) max_n = pbd_world_particle_count(w);
        if ((int)SLOT(x.id) > max_slot) max_slot = (int)SLOT(x.id);
        if ((int)SLOT(y.id) > max_slot) max_slot = (int)SLOT(y.id);
        CHECK_OK(pbd_remove_object(w, round & 1 ? x : y));
        CHECK_OK(pbd_world_step(w, DT));
        CHECK_OK(pbd_remove_object(w, round & 1 ? y : x));
        if (round % 3 == 0) CHECK_OK(pbd_world_step(w, DT));
        if (pbd_world_particle_count(w) != n0 || pbd_world_group_count(w) != g0 || pbd_world_object_count(w) != 1)
            bad_counts++;
        if (round == 0) {
            bytes1 = A.live_bytes;
            blocks1 = A.live;
        } else if (A.live_bytes != bytes1 || A.live != blocks1) {
            if (!bad_bytes)
                printf("    round %d: %ld blocks, %zu bytes live (round 0: %ld, %zu)\n", round, A.live, A.live_bytes,
                       blocks1, bytes1);
            bad_bytes++;
        }
    }
    CHECK_MSG(bad_counts == 0, "%d rounds ended with other counts than %d particles, %d groups, 1 object", bad_counts,
              n0, g0);
    CHECK_MSG(bad_bytes == 0, "%d rounds ended with other live memory than the first", bad_bytes);
    CHECK(max_n == n0 + 25 + 16);
    CHECK(max_slot <= 3); /* keep's slot and two more */
    CHECK(all_finite(w));
    CHECK(px(w, keep.r.first)[1] > -1.1f); /* the cloth that stayed lies on the ground */
    pbd_world_destroy(w);
    CHECK_MSG(A.live == 0, "%ld blocks leaked", A.live);
    pbd_mesh_free(&m1);
    pbd_mesh_free(&m2);
    pbd_mesh_free(&keep.m);
}

/* ---- 7. failed adds into a world with free slots ------------------------------------------ */

/* A world with free slots in every pool and a run of free particles in the
   middle. */
static void holey_world(pbd_world *w, hcloth *gone, hcloth *stay) {
    float ground[3] = {0, -1, 0}, up[3] = {0, 1, 0}, sc[3] = {0, 0, 0};
    pbd_collider c1 = {0};
    CHECK_OK(pbd_add_collider_sphere(w, sc, 0.2f, 0.5f, &c1));
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    CHECK(flat_cloth(w, 5, 0.4f, 0, 1, 0, gone));
    pbd_range p = add_one(w, 3, 1, 0, 1.0f);
    CHECK(flat_cloth(w, 4, 0.3f, 1, 1, 0, stay));
    pbd_group g;
    add_dist(w, p.first, stay->r.first, 0.5f, &g);
    pbd_group g2;
    add_dist(w, p.first, stay->r.first + 1, 0.5f, &g2);
    pbd_damping_cluster dc = {0};
    int ids[2] = {stay->r.first, stay->r.first + 2};
    CHECK_OK(pbd_add_damping_cluster(w, ids, 2, 1.0f, &dc));
    steps(w, 3);
    CHECK_OK(pbd_remove_collider(w, c1));
    CHECK_OK(pbd_remove_group(w, g));
    CHECK_OK(pbd_remove_damping_cluster(w, dc));
    CHECK_OK(pbd_remove_object(w, gone->o));
    steps(w, 2);
}

/* Every failed add (out of memory at each allocation in turn, or input
   found bad after the particles went in) leaves the snapshot byte-identical;
   the successful one takes the free slots; nothing leaks (every block is
   freed by pbd_world_destroy: a failed add may keep capacity it grew, which
   is not observable, so live blocks are not compared per call). */
TEST(handles_failed_add_changes_nothing) {
    halloc A;
    pbd_world *w = world_alloc(&A, -9.81f);
    hcloth gone, stay;
    holey_world(w, &gone, &stay);
    int n = pbd_world_particle_count(w), k, ok, failures = 0;
    /* a cloth with an edge shared by three triangles: found after its
       particles took the free run */
    float pos[15] = {0, 1, 0, 0.2f, 1, 0, 0.1f, 1.2f, 0, 0.1f, 0.8f, 0, 0.1f, 1, 0.2f};
    int tris[9] = {0, 1, 2, 1, 0, 3, 0, 1, 4};
    pbd_cloth_desc bad = pbd_cloth_desc_default();
    bad.positions = pos;
    bad.vertex_count = 5;
    bad.triangles = tris;
    bad.triangle_count = 3;
    pbd_object o = {0};
    CHECK_REFUSED(w, pbd_add_cloth(w, &bad, &o), PBD_ERROR_INVALID_ARGUMENT, "edge");
    CHECK(pbd_world_particle_count(w) == n);
    bad.reorder = 1;
    CHECK_REFUSED(w, pbd_add_cloth(w, &bad, &o), PBD_ERROR_INVALID_ARGUMENT, "edge");

#define OOM_ADD(expr, on_ok)                                                                         \
    for (k = 0, ok = 0; k < 400 && !ok; ++k) {                                                       \
        hsnap s_ = snap_take(w);                                                                     \
        A.left = k;                                                                                  \
        pbd_result r_ = (expr);                                                                      \
        A.left = -1;                                                                                 \
        if (r_ == PBD_OK) {                                                                          \
            ok = 1;                                                                                  \
            on_ok;                                                                                   \
        } else {                                                                                     \
            failures++;                                                                              \
            CHECK_MSG(r_ == PBD_ERROR_OUT_OF_MEMORY, "%s with %d allocations: %s (%s)", #expr, k,    \
                      pbd_result_string(r_), pbd_world_last_error(w));                               \
            if (r_ != PBD_ERROR_OUT_OF_MEMORY) k = 400;                                              \
            CHECK_MSG(snap_equal(w, s_), "%s failing at allocation %d changed the world", #expr, k); \
        }                                                                                            \
        free(s_.b);                                                                                  \
    }                                                                                                \
    CHECK_MSG(ok, "%s never succeeded", #expr)

    /* a cloth that fits the free run, and one (pinned, with tethers) that does not */
    pbd_cloth_desc cd = pbdt_cloth_desc(&gone.m);
    cd.area_constraints = 1;
    OOM_ADD(pbd_add_cloth(w, &cd, &o), {
        CHECK(pbdt_parts(w, o).particles.first == gone.r.first);
        CHECK(SLOT(o.id) == SLOT(gone.o.id) && o.id != gone.o.id);
        CHECK_OK(pbd_remove_object(w, o));
    });
    float masses[25];
    for (int i = 0; i < 25; ++i) masses[i] = i == 0 || i == 4 ? 0.0f : 0.01f;
    cd.masses = masses;
    cd.reorder = 1;
    OOM_ADD(pbd_add_cloth(w, &cd, &o), {
        pbd_lra t = {0};
        CHECK_OK(pbd_object_tethers(w, o, &t));
        CHECK(t.id != 0);
        CHECK_OK(pbd_remove_object(w, o));
    });
    /* a soft body, a balloon */
    pbd_mesh box, ball;
    float lo[3] = {0, 1, 0}, hi[3] = {0.2f, 1.2f, 0.2f}, cen[3] = {0, 2, 0};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &box));
    CHECK_OK(pbd_mesh_sphere(2, cen, 0.2f, &ball));
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = box.positions;
    sd.vertex_count = box.vertex_count;
    sd.tets = box.tets;
    sd.tet_count = box.tet_count;
    OOM_ADD(pbd_add_softbody(w, &sd, &o), {
        CHECK(pbdt_parts(w, o).particles.first == gone.r.first); /* 8 fit in the 25 */
        CHECK_OK(pbd_remove_object(w, o));
    });
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth = pbdt_cloth_desc(&ball);
    OOM_ADD(pbd_add_balloon(w, &bd, &o), CHECK_OK(pbd_remove_object(w, o)));
    /* loose particles, a fluid, a hair into the free run */
    float pp[6] = {0, 2, 0, 0.1f, 2, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pp;
    pd.count = 2;
    pbd_range r = {0, 0};
    OOM_ADD(pbd_add_particles(w, &pd, &r), {
        CHECK(r.first == gone.r.first);
        CHECK_OK(pbd_remove_particles(w, r));
    });
    float fp[3 * 8];
    for (int i = 0; i < 8; ++i) {
        fp[3 * i] = 0.05f * (float)(i & 1);
        fp[3 * i + 1] = 2 + 0.05f * (float)((i >> 1) & 1);
        fp[3 * i + 2] = 0.05f * (float)(i >> 2);
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = fp;
    fd.count = 8;
    pbd_fluid f = {0};
    OOM_ADD(pbd_add_fluid(w, &fd, &f, &r), {
        CHECK(r.first == gone.r.first);
        CHECK_OK(pbd_remove_fluid(w, f));
    });
    /* things without particles, into free slots */
    pbd_group g = {0};
    int di[2] = {stay.r.first, stay.r.first + 3};
    pbd_constraints_desc cdd = pbd_constraints_desc_default();
    cdd.type = PBD_CONSTRAINT_DISTANCE;
    cdd.count = 1;
    cdd.indices = di;
    OOM_ADD(pbd_add_constraints(w, &cdd, &g), CHECK_OK(pbd_remove_group(w, g)));
    float sc[3] = {0, 3, 0};
    pbd_collider col = {0};
    OOM_ADD(pbd_add_collider_sphere(w, sc, 0.1f, 0.5f, &col), CHECK_OK(pbd_remove_collider(w, col)));
    pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
    md.positions = ball.positions;
    md.vertex_count = ball.vertex_count;
    md.triangles = ball.triangles;
    md.triangle_count = ball.triangle_count;
    md.sdf_resolution = 8;
    OOM_ADD(pbd_add_collider_mesh(w, &md, &col), CHECK_OK(pbd_remove_collider(w, col)));
    pbd_damping_cluster dc = {0};
    int ids[3] = {stay.r.first, stay.r.first + 1, stay.r.first + 5};
    OOM_ADD(pbd_add_damping_cluster(w, ids, 3, 1.0f, &dc), CHECK_OK(pbd_remove_damping_cluster(w, dc)));
    pbd_cloth_desc scd = pbdt_cloth_desc(&stay.m);
    pbd_surface surf = {0};
    OOM_ADD(pbd_add_cloth_self_collision(w, stay.o, &scd, 0.01f, &surf),
            CHECK_OK(pbd_remove_collision_surface(w, surf)));
    pbd_strain_limit_desc sld = pbd_strain_limit_desc_default();
    sld.object = stay.o;
    sld.triangles = stay.m.triangles;
    sld.triangle_count = stay.m.triangle_count;
    pbd_strain_limit sl = {0};
    OOM_ADD(pbd_add_strain_limit(w, &sld, &sl), CHECK_OK(pbd_remove_strain_limit(w, sl)));
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = stay.o;
    td.triangles = stay.m.triangles;
    td.triangle_count = stay.m.triangle_count;
    pbd_tearing tear = {0};
    OOM_ADD(pbd_add_tearing(w, &td, &tear), CHECK_OK(pbd_remove_tearing(w, tear)));
    CHECK(pbd_world_particle_count(w) == n);
    steps(w, 5);
    CHECK(all_finite(w));
    /* last, a hair (a world does not step after a removed strand set:
       see handles_step_after_strands_removed) */
    pbd_hair_desc hd = pbd_hair_desc_default();
    float root[3] = {0, 2, 0}, normal[3] = {0, 1, 0};
    hd.root_positions = root;
    hd.root_normals = normal;
    hd.strand_count = 1;
    hd.particles_per_strand = 5;
    pbd_strands hs = {0};
    OOM_ADD(pbd_add_hair(w, &hd, &hs, &r), {
        CHECK(r.first == gone.r.first);
        CHECK_OK(pbd_remove_strands(w, hs));
        CHECK_OK(pbd_remove_particles(w, r));
    });
#undef OOM_ADD
    CHECK(failures > 20);
    pbd_mesh_free(&box);
    pbd_mesh_free(&ball);
    pbd_mesh_free(&gone.m);
    pbd_mesh_free(&stay.m);
    pbd_world_destroy(w);
    CHECK_MSG(A.live == 0, "%ld blocks leaked", A.live);
}

/* ---- removed particles stay removed --------------------------------------------------------- */

/* The manual: a removed particle stays in its slot "(inverse mass 0, at
   the origin) until an add reuses it", and nothing may use it (a removal is
   refused while something uses a particle, so a thing over a free particle
   would act on whatever add takes the slot next). Calls that would give it
   mass, motion or a user must leave it so. */
TEST(handles_removed_particles_stay_removed) {
    pbd_world *w = pbdt_world(-9.81f);
    float pp[6] = {1, 1, 0, 1.2f, 1, 0};
    pbd_range p = add_pts(w, pp, NULL, 2, 1.0f, 0);
    pbd_range q = add_one(w, 2, 1, 0, 1.0f);
    CHECK_OK(pbd_remove_particles(w, p));
    int f = p.first;
    /* mass, unpin, kinematic, velocity: whatever they return, it stays put */
    pbd_result r1 = pbd_particle_set_mass(w, f, 1.0f), r2 = pbd_particle_unpin(w, f);
    float vel[3] = {0, 5, 0};
    pbd_range one = {f, 1};
    pbd_result r3 = pbd_particles_set_velocities(w, one, vel);
    float t[3] = {0, 3, 0};
    pbd_result r4 = pbd_particle_set_kinematic(w, f + 1, 1), r5 = pbd_particle_set_kinematic_target(w, f + 1, t);
    steps(w, 5);
    CHECK_MSG(is_free_particle(w, f),
              "the removed particle %d moves: (%g %g %g), inverse mass %g (set_mass: %s, unpin: %s, "
              "set_velocities: %s)",
              f, px(w, f)[0], px(w, f)[1], px(w, f)[2], px(w, f)[3], pbd_result_string(r1), pbd_result_string(r2),
              pbd_result_string(r3));
    CHECK_MSG(is_free_particle(w, f + 1), "the removed particle %d moves: (%g %g %g) (set_kinematic: %s, target: %s)",
              f + 1, px(w, f + 1)[0], px(w, f + 1)[1], px(w, f + 1)[2], pbd_result_string(r4), pbd_result_string(r5));
    /* nothing new may use a free particle */
    int di[2] = {f, q.first};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = di;
    pbd_group g = {0};
    pbd_result r = pbd_add_constraints(w, &cd, &g);
    CHECK_MSG(r != PBD_OK, "a group over the removed particle %d was accepted", f);
    pbd_damping_cluster dc = {0};
    r = pbd_add_damping_cluster(w, di, 2, 1.0f, &dc);
    CHECK_MSG(r != PBD_OK, "a damping cluster over the removed particle %d was accepted", f);
    /* (what such a group would do: the next add takes the slot, and the
       group, added before, acts on the new particle) */
    if (g.id) {
        pbd_range n2 = add_one(w, 5, 5, 5, 1.0f);
        CHECK(n2.first == f);
        double d0 = dist(w, f, q.first);
        steps(w, 1);
        printf("    the group over the removed particle now holds the new particle %d: %.3g m from particle %d "
               "(%.3g before the step)\n",
               f, dist(w, f, q.first), q.first, d0);
    }
    pbd_world_destroy(w);
}

/* A builder's triangles index its own vertices, not the world's particles:
   a removed particle whose index equals a local vertex does not matter,
   even when the mesh has as many vertices as the world has particles. */
TEST(handles_local_vertices_are_not_particles) {
    pbd_mesh ball, grid;
    float cen[3] = {0, 2, 0}, o[3] = {0, 1, 0}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.6f};
    CHECK_OK(pbd_mesh_sphere(1, cen, 0.2f, &ball));
    CHECK_OK(pbd_mesh_grid(6, 7, o, u, v, &grid));
    CHECK(ball.vertex_count == 42 && grid.vertex_count == 42);
    for (int kind = 0; kind < 3; ++kind) {
        pbd_world *w = pbdt_world(-9.81f);
        float *pos = (float *)malloc(sizeof(float) * 3 * 42);
        for (int i = 0; i < 3 * 42; ++i) pos[i] = 5.0f + 0.1f * (float)i;
        pbd_range r = add_pts(w, pos, NULL, 42, 1.0f, 0);
        free(pos);
        pbd_range first = {r.first, 1};
        CHECK_OK(pbd_remove_particles(w, first)); /* particle 0 is free, the world still holds 42 */
        CHECK(pbd_world_particle_count(w) == 42);
        pbd_result res;
        if (kind == 0) {
            pbd_balloon_desc bd = pbd_balloon_desc_default();
            bd.cloth = pbdt_cloth_desc(&ball);
            pbd_object o2 = {0};
            res = pbd_add_balloon(w, &bd, &o2);
        } else if (kind == 1) {
            pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
            md.positions = ball.positions;
            md.vertex_count = ball.vertex_count;
            md.triangles = ball.triangles;
            md.triangle_count = ball.triangle_count;
            res = pbd_add_collider_mesh(w, &md, NULL);
        } else {
            pbd_cloth_desc cd = pbdt_cloth_desc(&grid);
            pbd_object o2 = {0};
            res = pbd_add_cloth(w, &cd, &o2);
        }
        static const char *names[3] = {"pbd_add_balloon", "pbd_add_collider_mesh", "pbd_add_cloth"};
        CHECK_MSG(res == PBD_OK, "%s over a 42-vertex mesh in a world of 42 particles, particle 0 removed: %s",
                  names[kind], pbd_world_last_error(w));
        pbd_world_destroy(w);
    }
    pbd_mesh_free(&ball);
    pbd_mesh_free(&grid);
}

/* A torn cloth that holds the world's last particles takes its split copies
   into its range (pbd_object_get_parts): they are its particles like the
   others. So pbd_remove_particles refuses them as the object's, and with
   particle contact on (no contact within an object) a copy does not push
   its original, which lies where it lies: the world and its snapshot
   restored elsewhere (where ownership comes from the ranges) step alike. */
TEST(handles_torn_copies_belong_to_their_cloth) {
    pbd_world *w = pbdt_world(0.0f);
    hcloth c;
    strip(w, &c);
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = c.o;
    td.triangles = c.m.triangles;
    td.triangle_count = c.m.triangle_count;
    td.threshold = 1.3f;
    td.max_splits = 4;
    CHECK_OK(pbd_add_tearing(w, &td, NULL));
    int n0 = pbd_world_particle_count(w), splits = pull_until_torn(w, &c);
    CHECK(splits > 0);
    pbd_range parts = pbdt_parts(w, c.o).particles;
    CHECK(parts.first == 0 && parts.count == n0 + splits); /* the copies are in the range */
    pbd_range copy = {n0, 1};
    CHECK_REFUSED(w, pbd_remove_particles(w, copy), PBD_ERROR_INVALID_ARGUMENT, "object");
    CHECK_OK(pbd_object_set_particle_contact(w, c.o, 1));
    hsnap s = snap_take(w);
    pbd_world *w2 = pbdt_world(0.0f);
    CHECK_OK(pbd_world_restore(w2, s.b, s.n));
    pbd_range all = {0, pbd_world_particle_count(w)};
    for (int k = 0; k < 3; ++k) {
        CHECK_OK(pbd_world_step(w, DT));
        CHECK_OK(pbd_world_step(w2, DT));
    }
    float *x = state_of(w, all);
    CHECK_MSG(same_state(w2, all, x), "a torn cloth with particle contact steps differently after a restore");
    free(x);
    free(s.b);
    pbd_mesh_free(&c.m);
    pbd_world_destroy(w2);
    pbd_world_destroy(w);
}
/* A handle carries no world: each world checks it against its own slots
   (pbd.h CONVENTIONS, Handles). One of world A that names a slot world B
   does not hold, or holds in another generation, is refused by B with
   PBD_ERROR_INVALID_HANDLE and nothing changed; one whose slot and
   generation B also holds names B's thing, which the call then acts on. */
TEST(handles_of_another_world) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *a = NULL, *b = NULL;
    CHECK_OK(pbd_world_create(&d, &a));
    CHECK_OK(pbd_world_create(&d, &b));
    float c[3] = {0, 0, 0}, p[3] = {0, 3, 0}, dist = 0;
    pbd_collider a1, a2, b1;
    CHECK_OK(pbd_add_collider_sphere(a, c, 1.0f, 0.5f, &a1));
    CHECK_OK(pbd_add_collider_sphere(a, c, 1.0f, 0.5f, &a2));
    float cb[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_sphere(b, cb, 0.5f, 0.5f, &b1));
    /* a2's slot is not one of b's: refused, b unchanged */
    hsnap before = snap_take(b);
    CHECK_WORLD_ERROR(b, pbd_collider_distance(b, a2, p, &dist), PBD_ERROR_INVALID_HANDLE, "collider");
    CHECK_WORLD_ERROR(b, pbd_collider_set_friction(b, a2, 0.1f, 0.1f, 0), PBD_ERROR_INVALID_HANDLE, "collider");
    hsnap after = snap_take(b);
    CHECK(before.n > 0 && before.n == after.n && memcmp(before.b, after.b, before.n) == 0);
    free(before.b);
    free(after.b);
    /* a1 has the slot and generation of b1: it names b's sphere */
    CHECK(a1.id == b1.id);
    CHECK_OK(pbd_collider_distance(b, a1, p, &dist));
    CHECK_NEAR(dist, 1.5f, 1e-6f); /* b's sphere (centre y 1, radius 0.5), not a's (distance 2) */
    /* after b removes and re-adds in that slot, the old generation is refused */
    CHECK_OK(pbd_remove_collider(b, b1));
    CHECK_OK(pbd_add_collider_sphere(b, cb, 0.5f, 0.5f, &b1));
    CHECK(a1.id != b1.id && SLOT(a1.id) == SLOT(b1.id));
    CHECK_WORLD_ERROR(b, pbd_collider_distance(b, a1, p, &dist), PBD_ERROR_INVALID_HANDLE, "removed");
    pbd_world_destroy(a);
    pbd_world_destroy(b);
}

/* A slot whose generations are used up retires instead of wrapping round:
   2100 adds and removals of a collider in one world never hand out an id
   twice, and the first handle stays stale (an audit: the 1024th add took
   the first one's id, which then named the new sphere). The retired slot
   is skipped: later adds take new slots. */
TEST(handles_never_come_back) {
    pbd_world *w = pbdt_world(-9.81f);
    float c[3] = {0, 0, 0};
    enum { N = 2100 };
    static uint32_t ids[N];
    pbd_collider first = {0};
    for (int k = 0; k < N; ++k) {
        pbd_collider h = {0};
        CHECK_OK(pbd_add_collider_sphere(w, c, 0.5f, 0.5f, &h));
        ids[k] = h.id;
        if (k == 0) first = h;
        CHECK_OK(pbd_remove_collider(w, h));
    }
    int repeated = 0;
    for (int k = 1; k < N; ++k)
        for (int j = 0; j < k; ++j) repeated += ids[j] == ids[k];
    CHECK_MSG(repeated == 0, "%d ids handed out twice", repeated);
    CHECK(pbd_collider_set_friction(w, first, 0.3f, 0.2f, 0.0f) == PBD_ERROR_INVALID_HANDLE);
    CHECK_MSG(ids[N - 1] % (1u << PBD_HANDLE_SLOT_BITS) == 3, "the last add is in slot %u",
              ids[N - 1] % (1u << PBD_HANDLE_SLOT_BITS));
    pbd_world_destroy(w);
}

void suite_handles(void) {
    RUN(handles_never_come_back);
    RUN(handles_group_remove);
    RUN(handles_group_slot_reuse_keeps_solve_order);
    RUN(handles_collider_remove);
    RUN(handles_snapshot_with_free_slots);
    RUN(handles_snapshot_with_free_fluid_slot);
    RUN(handles_snapshot_round_trip_with_fluid);
    RUN(handles_object_remove);
    RUN(handles_object_remove_refused_while_used);
    RUN(handles_object_remove_torn_cloth);
    RUN(handles_torn_copies_belong_to_their_cloth);
    RUN(handles_fluid_remove);
    RUN(handles_particles_remove);
    RUN(handles_particles_remove_strands);
    RUN(handles_particles_remove_stops_contact);
    RUN(handles_lra_remove);
    RUN(handles_strain_limit_remove);
    RUN(handles_strands_remove);
    RUN(handles_step_after_strands_removed);
    RUN(handles_tearing_remove);
    RUN(handles_damping_cluster_remove);
    RUN(handles_collision_surface_remove);
    RUN(handles_churn_stays_bounded);
    RUN(handles_failed_add_changes_nothing);
    RUN(handles_removed_particles_stay_removed);
    RUN(handles_local_vertices_are_not_particles);
    RUN(handles_of_another_world);
}
