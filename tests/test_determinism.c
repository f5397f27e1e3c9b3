/* tests/test_determinism.c - cross-platform determinism, in the manner of
   Box2D v3's test "determinism" (a fixed scene stepped a fixed number of
   times, its bodies' transforms hashed and compared with a stored
   constant).

   Fixed scenes that together use every feature of the three headers are
   stepped STEPS times; the bits of every particle's position (with its
   inverse mass) and velocity, and the state the extensions keep outside
   the particles (oriented particles' rotations, upsampled meshes), are
   hashed with 64-bit FNV-1a, one hash per feature and one per scene
   (every particle of its world, torn-off copies included), and compared
   with the constants of `expected` below. The scenes are kept apart in
   space (and in five worlds) so that a change of one feature's physics
   changes its own hashes and its scene's, not the others'.

   The same constants must come out of every build .ci/run makes: gcc and
   clang, C and C++, with and without OpenMP, 1 and 2 threads, sanitizers
   at -O1, SIMD on or off at run time (PBDT_DETERMINISM_SIMD=0) or forced
   threads (PBDT_DETERMINISM_THREADS=2); each SIMD width, the scalar build
   (SIMD=0) included, has rows of its own for now (see `expected`). A difference there is a determinism bug
   (a libm call whose result differs, contraction into FMA, a reduction
   whose order depends on the threads or the SIMD width), not a reason to
   update a constant.

   When physics changes on purpose, update the constants: run
       make determinism-hash && make determinism-hash SIMD=0
   (or PBDT_PRINT_HASHES=1 ./build/<config>/pbd_tests suite_determinism)
   and paste the printed rows over those of their width in `expected`; a
   failing run prints the same rows. Say in the commit which feature's hashes changed and why. Never
   update them to hide a difference between two builds. */
#include "test.h"
#include "../pbd_sm.h"
#include "../pbd_upsample.h"
#include <stdint.h>
#include <stdlib.h>

enum { STEPS = 60 };
static const float DT = 1.0f / 60.0f;

// ==== hashing ===============================================================

#define PBDT_FNV_OFFSET 0xcbf29ce484222325ull
#define PBDT_FNV_PRIME 0x100000001b3ull

static uint64_t fnv_bytes(uint64_t h, const void *data, size_t size) {
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < size; ++i) {
        h ^= b[i];
        h *= PBDT_FNV_PRIME;
    }
    return h;
}

static uint64_t fnv_int(uint64_t h, int v) { return fnv_bytes(h, &v, sizeof v); }

/* Positions (x, y, z, inverse mass) and velocities of particles r. */
static uint64_t hash_particles(uint64_t h, const pbd_world *w, pbd_range r) {
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    h = fnv_int(h, r.count);
    if (!x || !v || r.count <= 0) return h;
    h = fnv_bytes(h, x + 4 * (size_t)r.first, sizeof(float) * 4 * (size_t)r.count);
    for (int i = r.first; i < r.first + r.count; ++i) h = fnv_bytes(h, v + 4 * (size_t)i, sizeof(float) * 3);
    return h;
}

// ==== scenes ================================================================
/* A scene: one world, its named features (particle ranges and any extra
   state an `extra` hook hashes), and what it does between steps. */
enum { MAX_FEATURES = 8 };
typedef struct scene {
    const char *name;
    pbd_world *world;
    int feature_count;
    const char *feature[MAX_FEATURES];
    pbd_range range[MAX_FEATURES];
    uint64_t (*extra[MAX_FEATURES])(struct scene *s, uint64_t h); /* optional */
    void (*before_step)(struct scene *s, int step);               /* optional */
    void (*after_step)(struct scene *s, int step);                /* optional */
    void (*destroy)(struct scene *s);                             /* optional */
    void *user;
    int activity; /* something the scene must have done (checked per scene) */
} scene;

static void add_feature(scene *s, const char *name, pbd_range r) {
    CHECK(s->feature_count < MAX_FEATURES);
    if (s->feature_count >= MAX_FEATURES) return;
    s->feature[s->feature_count] = name;
    s->range[s->feature_count] = r;
    s->extra[s->feature_count] = NULL;
    s->feature_count++;
}

/* The worlds run with the default thread policy (threads 0), which keeps
   scenes this small on one thread. PBDT_DETERMINISM_THREADS=n forces n
   threads everywhere (the hashes must not change; on a loaded 2-core
   machine 2 forced threads take seconds, so make test does not). */
static int threads(void) {
    const char *t = getenv("PBDT_DETERMINISM_THREADS");
    return t ? atoi(t) : 0;
}
/* PBDT_DETERMINISM_SIMD=0 turns the SIMD kernels off at run time (worlds,
   multi-resolution cloth, upsampling): the hashes must not change. */
static int simd(void) {
    const char *t = getenv("PBDT_DETERMINISM_SIMD");
    return t ? atoi(t) != 0 : 1;
}

static pbd_world *new_world(void) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    if (w) CHECK_OK(pbd_world_set_threads(w, threads()));
    if (w) CHECK_OK(pbd_world_set_simd(w, simd()));
    return w;
}

static pbd_range range_of(int first, int count) {
    pbd_range r;
    r.first = first;
    r.count = count;
    return r;
}

static void add_ground(pbd_world *w) {
    float p[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p, n, 0.5f, NULL));
}

/* A scene's world (with a ground plane) and its hooks. */
static pbd_world *begin_scene(scene *s, const char *name, void *user, void (*before)(scene *, int),
                              void (*after)(scene *, int)) {
    s->name = name;
    s->world = new_world();
    s->user = user;
    s->before_step = before;
    s->after_step = after;
    if (s->world) add_ground(s->world);
    return s->world;
}

/* A scene whose colliders must have touched something. */
static void count_contacts(scene *s, int step) {
    (void)step;
    s->activity += pbd_world_contact_count(s->world) > 0;
}

/* count particles on a lattice of `spacing` from `origin`, nx by ny by nz. */
static float *lattice_positions(int nx, int ny, int nz, float spacing, const float *origin) {
    float *p = (float *)malloc(sizeof(float) * 3 * (size_t)(nx * ny * nz));
    for (int k = 0, i = 0; k < nz; ++k)
        for (int j = 0; j < ny; ++j)
            for (int l = 0; l < nx; ++l, ++i) {
                p[3 * i] = origin[0] + spacing * (float)l;
                p[3 * i + 1] = origin[1] + spacing * (float)j;
                p[3 * i + 2] = origin[2] + spacing * (float)k;
            }
    return p;
}

/* 3 x 3 x 3 loose particles 5 cm apart from `origin`, with particle
   contacts; mass 0: the default. */
static pbd_range add_grains(pbd_world *w, const float *origin, float radius, float mass) {
    float *p = lattice_positions(3, 3, 3, 0.05f, origin), masses[27];
    for (int i = 0; i < 27; ++i) masses[i] = mass;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = p;
    pd.count = 27;
    pd.radius = radius;
    if (mass > 0) pd.masses = masses;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_particles_set_particle_contact(w, r, 1));
    free(p);
    return r;
}

/* ---- scene "cloth": cloth with tethers, dihedral bending, a strain limit
   and tearing, pulled by a kinematic corner past a moving capsule; a
   reordered cloth with isometric bending, area constraints, object
   damping and self-collision folding over a sphere and a turning box,
   with granular particles (particle contacts) landing on it; the
   upsampling of that cloth (Loop subdivision model, wrinkle mesh). */
typedef struct cloth_scene {
    pbd_object pulled, draped;
    pbd_range draped_particles;
    int pull_corner;
    pbd_collider capsule, box;
    pbd_mesh draped_mesh;
    int *permutation;
    float *coarse; /* the draped cloth in mesh vertex order */
    pbd_up_model *subdivision;
    pbd_up_wrinkle *wrinkle;
    float *detail, *fine;
    int detail_count, fine_count;
    int splits, self_contacts;
} cloth_scene;

static void cloth_gather_coarse(scene *s) {
    cloth_scene *c = (cloth_scene *)s->user;
    const float *x = pbd_world_positions(s->world);
    for (int i = 0; i < c->draped_mesh.vertex_count; ++i)
        for (int k = 0; k < 3; ++k) c->coarse[3 * i + k] = x[4 * (c->draped_particles.first + c->permutation[i]) + k];
}

static void cloth_before(scene *s, int step) {
    cloth_scene *c = (cloth_scene *)s->user;
    float t = (float)(step + 1) * DT;
    float target[3] = {-0.6f + 0.6f * t, 1.0f + 0.2f * t, 0.0f};
    CHECK_OK(pbd_particle_set_kinematic_target(s->world, c->pull_corner, target));
    float cp[3] = {-0.8f, 0.75f - 0.3f * t, 0.2f}, cq[4] = {0, 0, 0, 1};
    CHECK_OK(pbd_collider_set_pose(s->world, c->capsule, cp, cq));
    /* a quarter turn about y per second (q = (0, sin a/2, 0, cos a/2), a
       small-angle polynomial: no libm call of the test's own) */
    float a = 0.5f * 1.5707964f * t, bq[4] = {0, a - a * a * a / 6.0f, 0, 1.0f - a * a / 2.0f};
    float n = sqrtf(bq[1] * bq[1] + bq[3] * bq[3]);
    bq[1] /= n;
    bq[3] /= n;
    float bp[3] = {0.9f, 0.1f, 0.0f};
    CHECK_OK(pbd_collider_set_pose(s->world, c->box, bp, bq));
}

static void cloth_after(scene *s, int step) {
    cloth_scene *c = (cloth_scene *)s->user;
    int splits = 0;
    CHECK_OK(pbd_world_tear(s->world, &splits));
    c->splits += splits;
    c->self_contacts += pbd_world_self_contact_count(s->world);
    cloth_gather_coarse(s);
    CHECK_OK(pbd_up_wrinkle_update(c->wrinkle, c->coarse, step == STEPS - 1 ? c->fine : NULL));
    s->activity = c->splits > 0 && c->self_contacts > 0;
}

static uint64_t cloth_upsampled(scene *s, uint64_t h) {
    cloth_scene *c = (cloth_scene *)s->user;
    cloth_gather_coarse(s);
    CHECK_OK(pbd_up_model_eval(c->subdivision, c->coarse, c->detail));
    h = fnv_bytes(h, c->detail, sizeof(float) * 3 * (size_t)c->detail_count);
    return fnv_bytes(h, c->fine, sizeof(float) * 3 * (size_t)c->fine_count);
}

static void cloth_destroy(scene *s) {
    cloth_scene *c = (cloth_scene *)s->user;
    pbd_up_model_destroy(c->subdivision);
    pbd_up_wrinkle_destroy(c->wrinkle);
    pbd_mesh_free(&c->draped_mesh);
    free(c->permutation);
    free(c->coarse);
    free(c->detail);
    free(c->fine);
    free(c);
}

static void build_cloth_scene(scene *s) {
    cloth_scene *c = (cloth_scene *)calloc(1, sizeof *c);
    pbd_world *w = begin_scene(s, "cloth", c, cloth_before, cloth_after);
    s->destroy = cloth_destroy;

    /* pulled: 9 x 9, pinned at one corner, the other kinematic */
    pbd_mesh m;
    float o[3] = {-1.0f, 1.0f, 0.0f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
    CHECK_OK(pbd_mesh_grid(9, 9, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.stretch_compliance = 1e-5f;
    CHECK_OK(pbd_add_cloth(w, &cd, &c->pulled));
    pbd_range pulled = pbdt_parts(w, c->pulled).particles;
    CHECK_OK(pbd_particle_pin(w, pulled.first)); /* tethers (re)built from here */
    c->pull_corner = pulled.first + 8;
    CHECK_OK(pbd_particle_set_kinematic(w, c->pull_corner, 1));
    pbd_strain_limit_desc sl = pbd_strain_limit_desc_default();
    sl.object = c->pulled;
    sl.triangles = m.triangles;
    sl.triangle_count = m.triangle_count;
    sl.max_stretch = 1.2f;
    CHECK_OK(pbd_add_strain_limit(w, &sl, NULL));
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = c->pulled;
    td.triangles = m.triangles;
    td.triangle_count = m.triangle_count;
    td.threshold = 1.3f;
    td.max_splits = 4;
    CHECK_OK(pbd_add_tearing(w, &td, NULL));
    pbd_mesh_free(&m);
    float ca[3] = {-0.8f, 0.75f, 0.0f}, cb[3] = {-0.8f, 0.75f, 0.4f};
    CHECK_OK(pbd_add_collider_capsule(w, ca, cb, 0.05f, 0.4f, &c->capsule));
    add_feature(s, "pulled cloth", pulled);

    /* draped: 10 x 10, reordered, over a sphere and a box */
    float o2[3] = {0.55f, 0.6f, -0.35f}, u2[3] = {0.7f, 0, 0}, v2[3] = {0, 0, 0.7f};
    CHECK_OK(pbd_mesh_grid(10, 10, o2, u2, v2, &c->draped_mesh));
    /* folded in two at column 5 (the upper layer 1.5 thicknesses above), so
       that self-collision has work from the first step */
    for (int i = 0; i < c->draped_mesh.vertex_count; ++i) {
        int col = i % 10;
        float *p = c->draped_mesh.positions + 3 * i;
        if (col > 5) p[0] = c->draped_mesh.positions[3 * (i - 2 * (col - 5))], p[1] += 0.015f;
    }
    c->permutation = (int *)malloc(sizeof(int) * (size_t)c->draped_mesh.vertex_count);
    pbd_cloth_desc dd = pbdt_cloth_desc(&c->draped_mesh);
    dd.bending = PBD_BENDING_ISOMETRIC;
    dd.area_constraints = 1;
    dd.damping = 0.5f;
    dd.reorder = 1;
    dd.permutation = c->permutation;
    CHECK_OK(pbd_add_cloth(w, &dd, &c->draped));
    c->draped_particles = pbdt_parts(w, c->draped).particles;
    CHECK_OK(pbd_add_cloth_self_collision(w, c->draped, &dd, 0.01f, NULL));
    CHECK_OK(pbd_object_set_particle_contact(w, c->draped, 1));
    float sc[3] = {0.9f, 0.35f, 0.0f}, he[3] = {0.12f, 0.1f, 0.3f}, q[4] = {0, 0, 0, 1}, bp[3] = {0.9f, 0.1f, 0.0f};
    CHECK_OK(pbd_add_collider_sphere(w, sc, 0.15f, 0.3f, NULL));
    CHECK_OK(pbd_add_collider_box(w, bp, he, q, 0.6f, &c->box));
    add_feature(s, "draped cloth", c->draped_particles);

    /* granular: 3 x 3 x 3 grains onto the draped cloth */
    float go[3] = {0.8f, 0.9f, -0.1f};
    pbd_range gr = add_grains(w, go, 0.02f, 0);
    CHECK_OK(pbd_world_set_particle_contact_friction(w, 0.6f, 0.5f));
    add_feature(s, "granular", gr);

    /* upsampling of the draped cloth */
    const pbd_mesh *dm = &c->draped_mesh;
    c->coarse = (float *)malloc(sizeof(float) * 3 * (size_t)dm->vertex_count);
    CHECK_OK(pbd_up_subdivision_create(dm->triangles, dm->triangle_count, dm->vertex_count, 1, &c->subdivision));
    c->detail_count = pbd_up_model_detail_count(c->subdivision);
    c->detail = (float *)calloc(3 * (size_t)c->detail_count, sizeof(float));
    pbd_mesh fine;
    CHECK_OK(pbd_up_mesh_subdivide(dm, 1, 1, &fine));
    pbd_up_wrinkle_desc wd = pbd_up_wrinkle_desc_default();
    wd.coarse_positions = dm->positions;
    wd.coarse_count = dm->vertex_count;
    wd.coarse_triangles = dm->triangles;
    wd.coarse_triangle_count = dm->triangle_count;
    wd.fine_positions = fine.positions;
    wd.fine_count = fine.vertex_count;
    wd.fine_triangles = fine.triangles;
    wd.fine_triangle_count = fine.triangle_count;
    CHECK_OK(pbd_up_wrinkle_create(&wd, &c->wrinkle));
    CHECK_OK(pbd_up_wrinkle_set_threads(c->wrinkle, threads()));
    CHECK_OK(pbd_up_model_set_threads(c->subdivision, threads()));
    CHECK_OK(pbd_up_wrinkle_set_simd(c->wrinkle, simd()));
    CHECK_OK(pbd_up_model_set_simd(c->subdivision, simd()));
    c->fine_count = fine.vertex_count;
    c->fine = (float *)calloc(3 * (size_t)c->fine_count, sizeof(float));
    pbd_up_mesh_free(&fine);
    add_feature(s, "upsampled", range_of(0, 0));
    s->extra[s->feature_count - 1] = cloth_upsampled;
}

/* ---- scene "solids": a soft body (tets) with a damping cluster and an
   attachment onto a triangle-mesh collider (BVH); a balloon (mesh volume)
   onto a signed-distance-grid collider; hair whose head moves and turns;
   a plain strand on a pinned root. */
typedef struct solids_scene {
    pbd_strands hair;
} solids_scene;

static void solids_before(scene *s, int step) {
    solids_scene *c = (solids_scene *)s->user;
    float t = (float)(step + 1) * DT, a = 0.5f * t;
    float pos[3] = {0.3f * t, 1.2f, 1.0f}, q[4] = {0, 0, a - a * a * a / 6.0f, 1.0f - a * a / 2.0f};
    float n = sqrtf(q[2] * q[2] + q[3] * q[3]);
    q[2] /= n;
    q[3] /= n;
    CHECK_OK(pbd_strands_set_transform(s->world, c->hair, pos, q));
}

static void build_solids_scene(scene *s) {
    solids_scene *c = (solids_scene *)calloc(1, sizeof *c);
    pbd_world *w = begin_scene(s, "solids", c, solids_before, count_contacts);

    pbd_mesh m, sphere;
    float sc[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_sphere(1, sc, 0.2f, &sphere));
    pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
    md.positions = sphere.positions;
    md.vertex_count = sphere.vertex_count;
    md.triangles = sphere.triangles;
    md.triangle_count = sphere.triangle_count;
    md.position[0] = -0.5f;
    md.position[1] = 0.1f;
    CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    md.sdf_resolution = 12;
    md.position[0] = 0.5f;
    CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    pbd_mesh_free(&sphere);

    float lo[3] = {-0.62f, 0.45f, -0.1f}, hi[3] = {-0.42f, 0.6f, 0.1f};
    CHECK_OK(pbd_mesh_tet_box(4, 3, 3, lo, hi, &m));
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = m.positions;
    sd.vertex_count = m.vertex_count;
    sd.tets = m.tets;
    sd.tet_count = m.tet_count;
    sd.edge_compliance = 1e-5f;
    sd.volume_compliance = 1e-6f;
    pbd_object body;
    CHECK_OK(pbd_add_softbody(w, &sd, &body));
    pbd_range body_particles = pbdt_parts(w, body).particles;
    pbd_mesh_free(&m);
    int cluster[8];
    for (int i = 0; i < 8; ++i) cluster[i] = body_particles.first + 3 * i;
    CHECK_OK(pbd_add_damping_cluster(w, cluster, 8, 2.0f, NULL));
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    float target[3] = {-0.62f, 0.8f, -0.1f};
    ad.count = 1;
    ad.particles = cluster;
    ad.target_points = target;
    ad.max_distance = 0.15f;
    ad.compliance = 1e-4f;
    CHECK_OK(pbd_add_attachments(w, &ad, NULL));
    add_feature(s, "soft body", body_particles);

    float bc[3] = {0.5f, 0.6f, 0.0f};
    CHECK_OK(pbd_mesh_sphere(1, bc, 0.15f, &m));
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth = pbdt_cloth_desc(&m);
    bd.cloth.stretch_compliance = 1e-4f;
    bd.pressure = 1.5f;
    pbd_object balloon;
    CHECK_OK(pbd_add_balloon(w, &bd, &balloon));
    pbd_mesh_free(&m);
    add_feature(s, "balloon", pbdt_parts(w, balloon).particles);

    float roots[12] = {0, 0, 0, 0.03f, 0, 0, 0, 0, 0.03f, 0.03f, 0, 0.03f};
    float normals[12] = {0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0};
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = roots;
    hd.root_normals = normals;
    hd.strand_count = 4;
    hd.particles_per_strand = 8;
    hd.position[1] = 1.2f;
    hd.position[2] = 1.0f;
    pbd_range hr;
    CHECK_OK(pbd_add_hair(w, &hd, &c->hair, &hr));
    add_feature(s, "hair", hr);

    float sp[3 * 6];
    for (int i = 0; i < 6; ++i) {
        sp[3 * i] = 1.2f + 0.05f * (float)i;
        sp[3 * i + 1] = 0.8f;
        sp[3 * i + 2] = -0.5f;
    }
    pbd_range strand = pbdt_strand(w, sp, NULL, 6, 0, -1);
    CHECK(strand.count == 6);
    add_feature(s, "strand", strand);
}

/* ---- scene "shape matching" (pbd_sm.h): a rigid body and a quadratic
   lattice body with plasticity colliding; oriented particles (ellipsoids)
   along a chain; a closed skin with surface volume conservation squeezed
   by a plate; a multi-resolution shape-matching cloth over a sphere. */
typedef struct sm_scene {
    pbd_sm_oriented oriented;
    pbd_collider plate;
    pbd_range rigid;
} sm_scene;

static void sm_before(scene *s, int step) {
    sm_scene *c = (sm_scene *)s->user;
    float centre[3] = {1.0f, 0.55f - 0.15f * (float)(step + 1) / (float)STEPS, 0.0f};
    CHECK_OK(pbd_collider_set_pose(s->world, c->plate, centre, NULL));
}

static void sm_after(scene *s, int step) {
    (void)step;
    sm_scene *c = (sm_scene *)s->user;
    float q[4], omega[3];
    CHECK_OK(pbd_sm_oriented_get_state(s->world, c->oriented, 7, q, omega)); /* the free end */
    s->activity = q[3] < 0.9999f;                                            /* the ellipsoids turned */
}

static uint64_t sm_orientations(scene *s, uint64_t h) {
    sm_scene *c = (sm_scene *)s->user;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_sm_oriented_particles(s->world, c->oriented, &r));
    for (int i = 0; i < r.count; ++i) {
        float q[4], omega[3];
        CHECK_OK(pbd_sm_oriented_get_state(s->world, c->oriented, i, q, omega));
        h = fnv_bytes(h, q, sizeof q);
        h = fnv_bytes(h, omega, sizeof omega);
    }
    return h;
}

static void build_sm_scene(scene *s) {
    sm_scene *c = (sm_scene *)calloc(1, sizeof *c);
    pbd_world *w = begin_scene(s, "shape matching", c, sm_before, sm_after);

    /* a rigid body falling onto the lattice body, both with particle contacts */
    float ro[3] = {-1.05f, 0.7f, -0.05f};
    c->rigid = add_grains(w, ro, 0.025f, 0);
    int ids[27];
    for (int i = 0; i < 27; ++i) ids[i] = c->rigid.first + i;
    pbd_sm_body_desc bd = pbd_sm_body_desc_default();
    bd.particles = ids;
    bd.particle_count = 27;
    bd.mode = PBD_SM_RIGID;
    CHECK_OK(pbd_sm_add_body(w, &bd, NULL));
    add_feature(s, "rigid body", c->rigid);

    int cells[3 * 4 * 2 * 3];
    CHECK_OK(pbd_sm_lattice_box(4, 2, 3, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 24;
    ld.origin[0] = -1.15f;
    ld.origin[1] = 0.3f;
    ld.origin[2] = -0.1f;
    ld.spacing = 0.08f;
    ld.body.mode = PBD_SM_QUADRATIC;
    ld.body.stiffness = 0.5f;
    ld.body.creep = 5.0f;
    ld.body.yield = 0.01f;
    pbd_range lr;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, &lr));
    CHECK_OK(pbd_particles_set_particle_contact(w, lr, 1));
    float ls[3] = {-1.0f, 0.1f, 0.0f};
    CHECK_OK(pbd_add_collider_sphere(w, ls, 0.15f, 0.5f, NULL));
    add_feature(s, "lattice body", lr);

    /* oriented particles: a chain of 8 ellipsoids, its first end pinned */
    float op[3 * 8], radii[3 * 8];
    int edges[2 * 7];
    for (int i = 0; i < 8; ++i) {
        op[3 * i] = -0.3f + 0.06f * (float)i;
        op[3 * i + 1] = 0.8f;
        op[3 * i + 2] = 0.0f;
        radii[3 * i] = 0.04f;
        radii[3 * i + 1] = 0.015f;
        radii[3 * i + 2] = 0.02f;
        if (i < 7) edges[2 * i] = i, edges[2 * i + 1] = i + 1;
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = op;
    pd.count = 8;
    pbd_range orr;
    CHECK_OK(pbd_add_particles(w, &pd, &orr));
    CHECK_OK(pbd_particle_pin(w, orr.first));
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = orr;
    od.edges = edges;
    od.edge_count = 7;
    od.radii = radii;
    od.stiffness = 0.8f;
    CHECK_OK(pbd_sm_add_oriented(w, &od, &c->oriented));
    add_feature(s, "oriented particles", orr);
    s->extra[s->feature_count - 1] = sm_orientations;

    /* a closed skin (cloth over an icosphere) with surface volume */
    pbd_mesh m;
    float vc[3] = {1.0f, 0.26f, 0.0f};
    pbd_object skin = pbdt_skin(w, 1, vc, 0.25f, &m);
    CHECK(skin.id != 0);
    pbd_range skin_particles = pbdt_parts(w, skin).particles;
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    vd.contact_distance = 0.02f; /* (the default before 0.2; these rows hash with it) */
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, NULL));
    pbd_mesh_free(&m);
    float half[3] = {0.4f, 0.05f, 0.4f}, centre[3] = {1.0f, 0.55f, 0.0f};
    CHECK_OK(pbd_add_collider_box(w, centre, half, NULL, 0.5f, &c->plate));
    add_feature(s, "surface volume", skin_particles);

    /* a multi-resolution shape-matching cloth (3 levels) over a sphere */
    float o[3] = {-0.3f, 0.5f, 0.6f}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.5f};
    CHECK_OK(pbd_mesh_grid(9, 9, o, u, v, &m));
    pbd_sm_cloth_desc scd = pbd_sm_cloth_desc_default();
    scd.positions = m.positions;
    scd.vertex_count = m.vertex_count;
    scd.triangles = m.triangles;
    scd.triangle_count = m.triangle_count;
    scd.levels = 3;
    pbd_range smc = {0, 0};
    pbd_sm_cloth smcloth = {0};
    CHECK_OK(pbd_sm_add_cloth(w, &scd, &smcloth, &smc));
    if (smcloth.id) CHECK_OK(pbd_sm_cloth_set_simd(w, smcloth, simd()));
    pbd_mesh_free(&m);
    float cs[3] = {-0.05f, 0.25f, 0.85f};
    CHECK_OK(pbd_add_collider_sphere(w, cs, 0.2f, 0.5f, NULL));
    add_feature(s, "multires cloth", smc);
}

/* ---- scene "fluid": a block of position based fluid with viscosity and
   vorticity confinement in a tank of planes, with a light cube of grains
   (particle contacts, two-way coupled through the density). */
static void build_fluid_scene(scene *s) {
    pbd_world *w = begin_scene(s, "fluid", NULL, NULL, count_contacts);
    float walls[4][6] = {
        {-0.2f, 0, 0, 1, 0, 0}, {0.2f, 0, 0, -1, 0, 0}, {0, 0, -0.15f, 0, 0, 1}, {0, 0, 0.15f, 0, 0, -1}};
    for (int i = 0; i < 4; ++i) CHECK_OK(pbd_add_collider_plane(w, walls[i], walls[i] + 3, 0.2f, NULL));
    float fo[3] = {-0.175f, 0.025f, -0.125f};
    float *fp = lattice_positions(6, 5, 6, 0.05f, fo);
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = fp;
    fd.count = 180;
    fd.viscosity = 0.02f;
    fd.vorticity = 0.01f;
    pbd_range fr;
    CHECK_OK(pbd_add_fluid(w, &fd, NULL, &fr));
    free(fp);
    add_feature(s, "fluid", fr);
    float go[3] = {0.05f, 0.35f, -0.05f};
    pbd_range gr = add_grains(w, go, 0.025f, 0.04f);
    add_feature(s, "grains in fluid", gr);
}

/* ---- scene "solver": the other solver choices: PBD mode (stiffness form)
   with averaged Jacobi iterations, point damping, a user acceleration field
   and a user constraint group of every fixed arity. */
static void wind(void *user, int particle, const float *x, const float *v, double time, float *out) {
    (void)user;
    (void)particle;
    (void)v;
    out[0] = 2.0f * x[1];
    out[1] = 0.0f;
    out[2] = (float)time;
}

static void build_solver_scene(scene *s) {
    pbd_world *w = begin_scene(s, "solver", NULL, NULL, NULL);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_PBD, 3, 5));
    CHECK_OK(pbd_world_set_jacobi(w, 1, 1.5f));
    CHECK_OK(pbd_world_set_point_damping(w, 0.3f));
    CHECK_OK(pbd_world_set_acceleration_field(w, wind, NULL));
    pbd_mesh m;
    float o[3] = {0, 0.8f, 0}, u[3] = {0.3f, 0, 0}, v[3] = {0, 0, 0.3f};
    CHECK_OK(pbd_mesh_grid(6, 6, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.stretch_stiffness = 0.9f;
    cd.bending_stiffness = 0.2f;
    cd.area_constraints = 1;
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &cd, &cloth));
    pbd_range cloth_particles = pbdt_parts(w, cloth).particles;
    CHECK_OK(pbd_particle_pin(w, cloth_particles.first));
    CHECK_OK(pbd_particle_pin(w, cloth_particles.first + 5));
    pbd_mesh_free(&m);
    add_feature(s, "pbd jacobi cloth", cloth_particles);
    float lo[3] = {0.5f, 0.3f, 0}, hi[3] = {0.65f, 0.45f, 0.15f};
    CHECK_OK(pbd_mesh_tet_box(2, 2, 2, lo, hi, &m));
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = m.positions;
    pd.count = m.vertex_count;
    pbd_range box;
    CHECK_OK(pbd_add_particles(w, &pd, &box));
    pbd_constraints_desc cs = pbd_constraints_desc_default();
    int idx[3 * 4 * 12];
    cs.type = PBD_CONSTRAINT_TET_VOLUME;
    cs.count = m.tet_count;
    for (int i = 0; i < 4 * m.tet_count; ++i) idx[i] = box.first + m.tets[i];
    cs.indices = idx;
    cs.stiffness = 0.8f;
    CHECK_OK(pbd_add_constraints(w, &cs, NULL));
    cs.type = PBD_CONSTRAINT_AREA;
    cs.count = m.triangle_count;
    for (int i = 0; i < 3 * m.triangle_count; ++i) idx[i] = box.first + m.triangles[i];
    CHECK_OK(pbd_add_constraints(w, &cs, NULL));
    cs.type = PBD_CONSTRAINT_DISTANCE;
    cs.count = m.triangle_count;
    for (int t = 0; t < m.triangle_count; ++t) {
        idx[2 * t] = box.first + m.triangles[3 * t];
        idx[2 * t + 1] = box.first + m.triangles[3 * t + 1];
    }
    CHECK_OK(pbd_add_constraints(w, &cs, NULL));
    pbd_mesh_free(&m);
    add_feature(s, "user constraints", box);
}

// ==== the test ==============================================================

/* The constants, per SIMD width of pbd.h (pbd_simd_width(): 1 scalar
   build, 4 SSE / NEON, 8 AVX2, 16 AVX-512). They should not depend on it,
   but do: the sums over a particle's hash-grid neighbours (fluid density,
   multipliers and corrections, particle contacts, XSPH and vorticity) run
   in W lanes, neighbour j into lane j mod W, then pbd__lane_sum adds the
   lanes in a tree. SIMD on and off agree within one build (same W), not
   across widths: the fluid, and the particle contacts between the two
   shape-matching bodies (several contacts per particle), hash differently
   at every width (1, 4, 8, 16); the other features do not. Until those
   sums use a fixed lane count, each width has its own rows; a width
   without rows prints them and is skipped. Update: `make
   determinism-hash` (width 16 on the CI machine), `make determinism-hash
   SIMD=0` (width 1); widths 8 and 4 came from this AVX-512 machine with
   -DPBD_SIMD_WIDTH=8 and 4 in the compile of tests/main.c. */
typedef struct expected_hash {
    int simd_width;
    const char *scene, *feature; /* feature "*": every particle of the scene */
    unsigned long long hash;
} expected_hash;

static const expected_hash expected[] = {
    {16, "cloth", "pulled cloth", 0xdf4c882fdcaf5fdeull},
    {16, "cloth", "draped cloth", 0x4a980361e214de96ull},
    {16, "cloth", "granular", 0xe065474befd86abeull},
    {16, "cloth", "upsampled", 0xec4514e3bb849990ull},
    {16, "cloth", "*", 0xd876fa0569479a71ull},
    {16, "solids", "soft body", 0x5b78c1be47173440ull},
    {16, "solids", "balloon", 0xb42573d7920018a9ull},
    {16, "solids", "hair", 0x06b8b101b3868292ull},
    {16, "solids", "strand", 0x3270ee3f4037c1faull},
    {16, "solids", "*", 0x2d227338e74da904ull},
    {16, "shape matching", "rigid body", 0xd24ba0d410b66c3eull},
    {16, "shape matching", "lattice body", 0x255125c8258b949dull},
    {16, "shape matching", "oriented particles", 0xe7241ca2ed0cb6f6ull},
    {16, "shape matching", "surface volume", 0x011732a81e06ad24ull},
    {16, "shape matching", "multires cloth", 0xbdb046a541f0d9c8ull},
    {16, "shape matching", "*", 0x422a8502e9c5239aull},
    {16, "fluid", "fluid", 0xf26728ff10fe7cd5ull},
    {16, "fluid", "grains in fluid", 0x80c5759e897b0d84ull},
    {16, "fluid", "*", 0x1ff8b58d0f0302a6ull},
    {16, "solver", "pbd jacobi cloth", 0x4389ffae6836953full},
    {16, "solver", "user constraints", 0x235a059497cb548aull},
    {16, "solver", "*", 0x225ce2b948d64545ull},
    {1, "cloth", "pulled cloth", 0xdf4c882fdcaf5fdeull},
    {1, "cloth", "draped cloth", 0x4a980361e214de96ull},
    {1, "cloth", "granular", 0xe065474befd86abeull},
    {1, "cloth", "upsampled", 0xec4514e3bb849990ull},
    {1, "cloth", "*", 0xd876fa0569479a71ull},
    {1, "solids", "soft body", 0x5b78c1be47173440ull},
    {1, "solids", "balloon", 0xb42573d7920018a9ull},
    {1, "solids", "hair", 0x06b8b101b3868292ull},
    {1, "solids", "strand", 0x3270ee3f4037c1faull},
    {1, "solids", "*", 0x2d227338e74da904ull},
    {1, "shape matching", "rigid body", 0x3f740fab3b41ceb0ull},
    {1, "shape matching", "lattice body", 0xa789b693d9e0edd9ull},
    {1, "shape matching", "oriented particles", 0xe7241ca2ed0cb6f6ull},
    {1, "shape matching", "surface volume", 0x011732a81e06ad24ull},
    {1, "shape matching", "multires cloth", 0xbdb046a541f0d9c8ull},
    {1, "shape matching", "*", 0x56150bcd3ef2ff0cull},
    {1, "fluid", "fluid", 0xa2c5d5ac29cbf548ull},
    {1, "fluid", "grains in fluid", 0x32a9d7a78636dbaeull},
    {1, "fluid", "*", 0xd5ce5e25c3bd77faull},
    {1, "solver", "pbd jacobi cloth", 0x4389ffae6836953full},
    {1, "solver", "user constraints", 0x235a059497cb548aull},
    {1, "solver", "*", 0x225ce2b948d64545ull},
    {8, "cloth", "pulled cloth", 0xdf4c882fdcaf5fdeull},
    {8, "cloth", "draped cloth", 0x4a980361e214de96ull},
    {8, "cloth", "granular", 0xe065474befd86abeull},
    {8, "cloth", "upsampled", 0xec4514e3bb849990ull},
    {8, "cloth", "*", 0xd876fa0569479a71ull},
    {8, "solids", "soft body", 0x5b78c1be47173440ull},
    {8, "solids", "balloon", 0xb42573d7920018a9ull},
    {8, "solids", "hair", 0x06b8b101b3868292ull},
    {8, "solids", "strand", 0x3270ee3f4037c1faull},
    {8, "solids", "*", 0x2d227338e74da904ull},
    {8, "shape matching", "rigid body", 0xd24ba0d410b66c3eull},
    {8, "shape matching", "lattice body", 0x255125c8258b949dull},
    {8, "shape matching", "oriented particles", 0xe7241ca2ed0cb6f6ull},
    {8, "shape matching", "surface volume", 0x011732a81e06ad24ull},
    {8, "shape matching", "multires cloth", 0xbdb046a541f0d9c8ull},
    {8, "shape matching", "*", 0x422a8502e9c5239aull},
    {8, "fluid", "fluid", 0x1efff8b45d5ac80bull},
    {8, "fluid", "grains in fluid", 0x5038a40c339aa7dbull},
    {8, "fluid", "*", 0x84406af3b098315full},
    {8, "solver", "pbd jacobi cloth", 0x4389ffae6836953full},
    {8, "solver", "user constraints", 0x235a059497cb548aull},
    {8, "solver", "*", 0x225ce2b948d64545ull},
    {4, "cloth", "pulled cloth", 0xdf4c882fdcaf5fdeull},
    {4, "cloth", "draped cloth", 0x4a980361e214de96ull},
    {4, "cloth", "granular", 0xe065474befd86abeull},
    {4, "cloth", "upsampled", 0xec4514e3bb849990ull},
    {4, "cloth", "*", 0xd876fa0569479a71ull},
    {4, "solids", "soft body", 0x5b78c1be47173440ull},
    {4, "solids", "balloon", 0xb42573d7920018a9ull},
    {4, "solids", "hair", 0x06b8b101b3868292ull},
    {4, "solids", "strand", 0x3270ee3f4037c1faull},
    {4, "solids", "*", 0x2d227338e74da904ull},
    {4, "shape matching", "rigid body", 0xd24ba0d410b66c3eull},
    {4, "shape matching", "lattice body", 0x255125c8258b949dull},
    {4, "shape matching", "oriented particles", 0xe7241ca2ed0cb6f6ull},
    {4, "shape matching", "surface volume", 0x011732a81e06ad24ull},
    {4, "shape matching", "multires cloth", 0xbdb046a541f0d9c8ull},
    {4, "shape matching", "*", 0x422a8502e9c5239aull},
    {4, "fluid", "fluid", 0xc3aa3078be060a6full},
    {4, "fluid", "grains in fluid", 0x66da6e145a2aba8dull},
    {4, "fluid", "*", 0xaef5b79569a78508ull},
    {4, "solver", "pbd jacobi cloth", 0x4389ffae6836953full},
    {4, "solver", "user constraints", 0x235a059497cb548aull},
    {4, "solver", "*", 0x225ce2b948d64545ull},
};

static int have_width(int width) {
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; ++i)
        if (expected[i].simd_width == width) return 1;
    return 0;
}

static unsigned long long expected_for(const char *scene_name, const char *feature, int *found) {
    *found = 0;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; ++i)
        if (expected[i].simd_width == pbd_simd_width() && !strcmp(expected[i].scene, scene_name) &&
            !strcmp(expected[i].feature, feature)) {
            *found = 1;
            return expected[i].hash;
        }
    return 0;
}

/* Compares one hash; prints its row (to paste into `expected`) when it
   differs or when asked to. Returns 1 when it matched. */
static int compare(const char *scene_name, const char *feature, uint64_t h, int print) {
    int found;
    unsigned long long want = expected_for(scene_name, feature, &found);
    int ok = found && want == (unsigned long long)h;
    if (ok && !print) return 1;
    printf("    {%d, \"%s\", \"%s\", 0x%016llxull},", pbd_simd_width(), scene_name, feature, (unsigned long long)h);
    if (!found) printf(" /* no constant */");
    else if (!ok) printf(" /* differs: the constant is 0x%016llx */", want);
    printf("\n");
    return ok;
}

typedef void (*scene_builder)(scene *s);

TEST(determinism_hashes_match_the_constants) {
    const scene_builder builders[] = {build_cloth_scene, build_solids_scene, build_sm_scene, build_fluid_scene,
                                      build_solver_scene};
    const char *env = getenv("PBDT_PRINT_HASHES");
    int print = env && env[0] && strcmp(env, "0") != 0, mismatches = 0;
    if (!have_width(pbd_simd_width())) print = 1;
    for (size_t b = 0; b < sizeof builders / sizeof builders[0]; ++b) {
        scene s;
        memset(&s, 0, sizeof s);
        builders[b](&s);
        if (!s.world) continue;
        for (int step = 0; step < STEPS; ++step) {
            if (s.before_step) s.before_step(&s, step);
            CHECK_OK(pbd_world_step(s.world, DT));
            if (s.after_step) s.after_step(&s, step);
        }
        const float *x = pbd_world_positions(s.world);
        int n = pbd_world_particle_count(s.world), finite = 1;
        for (int i = 0; i < 4 * n; ++i) finite &= isfinite(x[i]) != 0;
        CHECK_MSG(finite, "scene %s: NaN or Inf", s.name);
        CHECK_MSG(s.activity > 0 || (!s.before_step && !s.after_step), "scene %s did not do what it tests", s.name);
        uint64_t all = hash_particles(PBDT_FNV_OFFSET, s.world, range_of(0, n));
        for (int f = 0; f < s.feature_count; ++f) {
            uint64_t h = hash_particles(PBDT_FNV_OFFSET, s.world, s.range[f]);
            if (s.extra[f]) h = s.extra[f](&s, h);
            mismatches += !compare(s.name, s.feature[f], h, print);
            all = fnv_bytes(all, &h, sizeof h);
        }
        mismatches += !compare(s.name, "*", all, print);
        if (s.destroy) s.destroy(&s);
        else free(s.user);
        pbd_world_destroy(s.world);
    }
    if (!have_width(pbd_simd_width()))
        SKIP("no constants for SIMD width %d (%s): paste the rows above into `expected`", pbd_simd_width(),
             pbd_simd_path());
    CHECK_MSG(mismatches == 0,
              "%d hashes differ from tests/test_determinism.c's constants (rows above). In a build .ci/run "
              "makes, or between two of them, that is a determinism bug; after an intended change of physics, "
              "paste the rows of `make determinism-hash` over `expected` (SIMD=0 too: see `expected`).",
              mismatches);
}

void suite_determinism(void) { RUN(determinism_hashes_match_the_constants); }
