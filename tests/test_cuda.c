/* tests/test_cuda.c - the GPU companion (pbd_cuda.cu).

   Built with PBD_CUDA (the binary pbd_cuda_tests of `make test`, linked
   with pbd_cuda.cu's CPU emulation; `make test-gpu`: the real GPU), it
   steps the same scene in a CPU world and a GPU world and compares every
   particle's position and velocity bit for bit, on scenes that together
   run every kernel: cloth with tethers on moving colliders with a
   kinematic corner, a soft body, a balloon and an isometric cloth with
   area constraints, the Jacobi mode, the PBD mode with attachments,
   unilateral distances, damping clusters and point damping, setters
   between steps, a fluid with a floating soft box, grains on a cloth, a
   flag in an acceleration field, a user plugin with every callback, cloth self-collision (with the fail-safe), snapshot
   and restore mid-run, and a non-finite step's rollback; pbd_sm.h's
   surface volume, shape-matching bodies (a plastic lattice jelly, rigid
   bodies, octree, region-list and mesh-path sums), an oriented-particle
   plant and the multi-resolution cloth in both schemes (with an overflow
   colour); the setters a game calls every frame (what
   they send). The emulation runs each launch's threads in a shuffled order
   on several threads, so every GPU world runs twice, with two seeds: a
   race between threads of one launch changes the bits with the order.

   Built without PBD_CUDA (the main test binary), it checks that nothing
   changes: auto worlds are CPU worlds, and a GPU world is refused. */
#include "../pbd_upsample.h" /* (first: test.h's helpers for it) */
#include "test.h"
#include "../pbd_sm.h"
#include <float.h>
#include <stdlib.h>
#include <string.h>

static pbd_world *world_on(pbd_device device) {
    pbd_world_desc d = pbd_world_desc_default();
    d.device = device;
    pbd_world *w = NULL;
    pbd_result r = pbd_world_create(&d, &w);
    CHECK_MSG(r == PBD_OK, "pbd_world_create(device %d): %s", (int)device, pbd_last_error());
    return w;
}

#ifndef PBD_CUDA

/* pbd_world_desc.log's record of the last call with PBD_OK */
static char device_log[256];
static void log_device(void *user, pbd_result r, const char *msg) {
    (void)user;
    if (r == PBD_OK) snprintf(device_log, sizeof device_log, "%s", msg);
}

/* The choice of an auto world is logged here too (an audit: only builds
   with PBD_CUDA logged it). */
TEST(cuda_without_pbd_cuda_auto_is_the_cpu_and_gpu_is_refused) {
    pbd_world_desc d = pbd_world_desc_default();
    d.log = log_device;
    device_log[0] = 0;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK(w && pbd_world_device(w) == PBD_DEVICE_CPU);
    CHECK(w && pbd_world_device_positions(w) == NULL);
    CHECK_MSG(strstr(device_log, "world on the CPU: this program was built without PBD_CUDA") != NULL, "logged: %s",
              device_log);
    pbd_world_destroy(w);
    d = pbd_world_desc_default();
    d.device = PBD_DEVICE_GPU;
    w = (pbd_world *)1;
    CHECK_RESULT(pbd_world_create(&d, &w), PBD_ERROR_UNSUPPORTED);
    CHECK(w == (pbd_world *)1); /* out untouched */
    CHECK(strstr(pbd_last_error(), "PBD_CUDA") != NULL);
    d.device = (pbd_device)7;
    CHECK_RESULT(pbd_world_create(&d, &w), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(pbd_world_device(NULL) == PBD_DEVICE_CPU);
}

/* Without PBD_CUDA the device calls of pbd_sm.h and pbd_upsample.h run on
   the host for CPU worlds: a skin's vertices (pbd_sm_skin_apply_world)
   are pbd_sm_skin_apply's in the skin's host array, a wrinkle mesh
   updated from a world's particles (pbd_up_wrinkle_update_world) gives
   pbd_up_wrinkle_update's fine positions on the same coarse positions. */
TEST(cuda_without_pbd_cuda_skins_and_wrinkles_evaluate_on_the_host) {
    pbd_world *w = world_on(PBD_DEVICE_CPU);
    pbd_mesh s, f;
    float c[3] = {0, 0.5f, 0}, *cx = NULL, *fine = NULL;
    pbd_up_wrinkle *wr[2] = {NULL, NULL};
    pbd_sm_skin *skin = NULL;
    CHECK_OK(pbd_mesh_sphere(0, c, 0.3f, &s));
    CHECK_OK(pbd_up_mesh_subdivide(&s, 1, 1, &f));
    if (!w) goto done;
    {
        pbd_cloth_desc cd = pbdt_cloth_desc(&s);
        pbd_object o = {0};
        CHECK_OK(pbd_add_cloth(w, &cd, &o));
        pbd_object_parts parts;
        CHECK_OK(pbd_object_get_parts(w, o, &parts));
        pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
        od.particles = parts.particles;
        od.radius = 0.05f;
        pbd_sm_oriented set;
        CHECK_OK(pbd_sm_add_oriented(w, &od, &set));
        pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
        sd.rest_vertices = f.positions;
        sd.vertex_count = f.vertex_count;
        CHECK_OK(pbd_sm_skin_create(w, set, &sd, &skin));
        for (int k = 0; k < 2; ++k) {
            pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&s, &f);
            CHECK_OK(pbd_up_wrinkle_create(&d, &wr[k]));
        }
        if (!skin || !wr[0] || !wr[1]) goto done;
        size_t nf3 = 3 * (size_t)f.vertex_count;
        cx = (float *)malloc(sizeof(float) * 3 * (size_t)s.vertex_count);
        fine = (float *)malloc(sizeof(float) * nf3);
        for (int frame = 0; frame < 6; ++frame) {
            CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
            const float *out = NULL, *x = pbd_world_positions(w);
            CHECK_OK(pbd_sm_skin_apply(skin, w, fine));
            CHECK_OK(pbd_sm_skin_apply_world(skin, w, &out));
            CHECK(out && !memcmp(out, fine, nf3 * sizeof(float)));
            for (int i = 0; i < s.vertex_count; ++i)
                for (int k = 0; k < 3; ++k) cx[3 * i + k] = x[4 * (parts.particles.first + i) + k];
            CHECK_OK(pbd_up_wrinkle_update(wr[0], cx, fine));
            CHECK_OK(pbd_up_wrinkle_update_world(wr[1], w, parts.particles.first, &out));
            CHECK(out && !memcmp(out, fine, nf3 * sizeof(float)));
        }
    }
done:
    pbd_sm_skin_destroy(skin);
    pbd_up_wrinkle_destroy(wr[0]);
    pbd_up_wrinkle_destroy(wr[1]);
    pbd_world_destroy(w);
    pbd_mesh_free(&s);
    pbd_mesh_free(&f);
    free(cx);
    free(fine);
}

void suite_cuda(void) {
    RUN(cuda_without_pbd_cuda_auto_is_the_cpu_and_gpu_is_refused);
    RUN(cuda_without_pbd_cuda_skins_and_wrinkles_evaluate_on_the_host);
}

#else /* PBD_CUDA */

#ifdef __cplusplus
extern "C" {
#endif
void pbd__cuda_emulate_seed(unsigned seed); /* pbd_cuda.cu: the emulation's launch order (no-op on a GPU) */
void pbd__cuda_read(void *host, const void *device, size_t n); /* pbd_cuda.cu: device memory to the host */
size_t pbd__cuda_bytes_sent(const pbd_world *w);               /* pbd_cuda.cu: bytes sent to the device so far */
#ifdef __cplusplus
}
#endif

/* Whether this machine has a device that GPU worlds can use (the
   emulation always has one). */
static int gpu_present(void) {
    pbd_world_desc d = pbd_world_desc_default();
    d.device = PBD_DEVICE_GPU;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return 0;
    pbd_world_destroy(w);
    return 1;
}
#define NEEDS_GPU()                                 \
    do {                                            \
        if (!gpu_present()) SKIP("no CUDA device"); \
    } while (0)

// ==== scenes =================================================================
/* A scene is built the same way in any world; `frame` runs what the user
   does before step `frame` (moving colliders, kinematic targets, setters). */
typedef struct scene {
    const char *name;
    void (*build)(pbd_world *w);
    void (*frame)(pbd_world *w, int frame);
    int steps;
} scene;

static void ground(pbd_world *w) {
    float p[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p, n, 0.4f, NULL));
}

/* An n x n cloth in the plane y = height, corners (0, h, 0) and (size, h, size). */
static pbd_object cloth(pbd_world *w, int n, float size, float height, pbd_bending_model bending, int area) {
    float o[3] = {-0.5f * size, height, -0.5f * size}, u[3] = {size, 0, 0}, v[3] = {0, 0, size};
    pbd_mesh m;
    pbd_object obj = {0};
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, &m));
    pbd_cloth_desc d = pbdt_cloth_desc(&m);
    d.bending = bending;
    d.area_constraints = area;
    CHECK_OK(pbd_add_cloth(w, &d, &obj));
    pbd_mesh_free(&m);
    return obj;
}

static int first_of(const pbd_world *w, pbd_object o) { return pbdt_parts(w, o).particles.first; }

/* Cloth with tethers (two pinned corners, one kinematic) over a sphere, a
   turning box and a moving capsule, on the ground. */
static void build_cloth(pbd_world *w) {
    ground(w);
    float c[3] = {0, 0.4f, 0}, b[3] = {0.35f, 0.25f, 0.1f}, half[3] = {0.1f, 0.1f, 0.2f};
    float q[4] = {0, 0.3826834f, 0, 0.9238795f}, a0[3] = {-0.4f, 0.2f, -0.3f}, a1[3] = {-0.4f, 0.2f, 0.3f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.2f, 0.5f, NULL));
    CHECK_OK(pbd_add_collider_box(w, b, half, q, 0.3f, NULL));
    CHECK_OK(pbd_add_collider_capsule(w, a0, a1, 0.05f, 0.6f, NULL));
    pbd_object o = cloth(w, 16, 1.0f, 0.8f, PBD_BENDING_DIHEDRAL, 0);
    int f = first_of(w, o);
    CHECK_OK(pbd_particle_pin(w, f));
    CHECK_OK(pbd_particle_pin(w, f + 15));
    CHECK_OK(pbd_particle_set_kinematic(w, f + 16 * 15 + 15, 1));
}

static void frame_cloth(pbd_world *w, int frame) {
    float t = 0.02f * (float)frame;
    float target[3] = {0.5f - 0.3f * t, 0.8f + 0.2f * t, 0.5f};
    CHECK_OK(pbd_particle_set_kinematic_target(w, 16 * 16 - 1, target));
    float pos[3] = {0.05f * t, 0, 0}, rot[4] = {0, 0.0998334f * t, 0, 1};
    float l = sqrtf(rot[1] * rot[1] + 1);
    rot[1] /= l;
    rot[3] /= l;
    pbd_collider cap = pbd_world_collider(w, 3);
    CHECK_OK(pbd_collider_set_pose(w, cap, pos, rot));
    if (frame == 30) CHECK_OK(pbd_particle_unpin(w, 15)); /* the tethers rebuild */
}

/* A soft body, a balloon and an isometric cloth with area constraints. */
static void build_bodies(pbd_world *w) {
    ground(w);
    float lo[3] = {-0.6f, 0.3f, -0.1f}, hi[3] = {-0.3f, 0.6f, 0.2f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_tet_box(4, 4, 4, lo, hi, &m));
    pbd_softbody_desc sd = pbdt_softbody_desc(&m);
    sd.edge_compliance = 1e-6f;
    sd.damping = 1.0f;
    CHECK_OK(pbd_add_softbody(w, &sd, NULL));
    pbd_mesh_free(&m);
    float c[3] = {0.3f, 0.5f, 0};
    CHECK_OK(pbd_mesh_sphere(3, c, 0.2f, &m)); /* 642 particles: several sum blocks, isolated until it lands */
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth.positions = m.positions;
    bd.cloth.vertex_count = m.vertex_count;
    bd.cloth.triangles = m.triangles;
    bd.cloth.triangle_count = m.triangle_count;
    bd.cloth.stretch_compliance = 1e-5f;
    bd.pressure = 1.5f;
    CHECK_OK(pbd_add_balloon(w, &bd, NULL));
    pbd_mesh_free(&m);
    cloth(w, 10, 0.5f, 1.2f, PBD_BENDING_ISOMETRIC, 1);
}

/* Mid-run the soft body goes (its particles wait as free slots) and a
   grain is added into them. */
static void frame_bodies(pbd_world *w, int frame) {
    if (frame != 30) return;
    CHECK_OK(pbd_remove_object(w, pbd_world_object(w, 0)));
    float x[3] = {-0.45f, 0.8f, 0.05f};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = 1;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK(r.first == 0); /* the first free slot */
}

/* The first scene in the averaged Jacobi mode. */
static void build_jacobi(pbd_world *w) {
    build_cloth(w);
    CHECK_OK(pbd_world_set_jacobi(w, 1, 1.5f));
}

/* PBD mode: attachments to points and to a kinematic particle, unilateral
   distances (tethers), a damping cluster and point damping. */
static void build_pbd_mode(pbd_world *w) {
    ground(w);
    float ball[3] = {0.1f, 0.45f, 0.1f};
    CHECK_OK(pbd_add_collider_sphere(w, ball, 0.2f, 0.5f, NULL));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_PBD, 3, 6));
    CHECK_OK(pbd_world_set_point_damping(w, 0.5f));
    pbd_object o = cloth(w, 12, 0.6f, 0.7f, PBD_BENDING_DIHEDRAL, 0);
    int f = first_of(w, o);
    float hand[3] = {0.0f, 1.0f, 0.0f};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = hand;
    pd.count = 1;
    pbd_range h = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &h));
    CHECK_OK(pbd_particle_set_kinematic(w, h.first, 1));
    int who[2] = {f, f + 11}, to[2] = {h.first, h.first};
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    ad.count = 2;
    ad.particles = who;
    ad.target_particles = to;
    ad.max_distance = 0.4f;
    ad.stiffness = 0.8f;
    CHECK_OK(pbd_add_attachments(w, &ad, NULL));
    float pts[6] = {-0.3f, 0.9f, 0.3f, 0.3f, 0.9f, 0.3f};
    int held[2] = {f + 12 * 11, f + 12 * 12 - 1};
    ad = pbd_attachments_desc_default();
    ad.count = 2;
    ad.particles = held;
    ad.target_points = pts;
    CHECK_OK(pbd_add_attachments(w, &ad, NULL));
    int pairs[6] = {f, f + 143, f + 5, f + 138, f + 66, f + 77};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 3;
    cd.indices = pairs;
    cd.unilateral = 1;
    CHECK_OK(pbd_add_constraints(w, &cd, NULL));
    int ring[24];
    for (int i = 0; i < 24; ++i) ring[i] = f + 12 * 5 + i;
    CHECK_OK(pbd_add_damping_cluster(w, ring, 24, 3.0f, NULL));
    CHECK_OK(pbd_add_damping_cluster(w, ring + 6, 12, 1.0f, NULL)); /* overlapping: in order */
}

static void frame_pbd_mode(pbd_world *w, int frame) {
    float t = 0.03f * (float)frame, target[3] = {0.3f * t, 1.0f - 0.2f * t, 0};
    CHECK_OK(pbd_particle_set_kinematic_target(w, pbd_world_particle_count(w) - 1, target));
    if (frame == 20) { /* setters between steps */
        float v[3] = {0.5f, 2.0f, 0};
        pbd_range r = {3, 1};
        CHECK_OK(pbd_particles_set_velocities(w, r, v));
        CHECK_OK(pbd_particle_set_mass(w, 7, 0.05f));
        float g[3] = {0.5f, -9.81f, 0};
        CHECK_OK(pbd_world_set_gravity(w, g));
    }
}

/* Large enough that the emulation's launches run on several threads. */
static void build_large(pbd_world *w) {
    ground(w);
    float c[3] = {0, 0.3f, 0};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.25f, 0.5f, NULL));
    pbd_object o = cloth(w, 64, 1.2f, 0.6f, PBD_BENDING_ISOMETRIC, 0);
    /* damping clusters of several sum blocks (pbd.h: PBD__SUM_BLOCK), overlapping */
    int f = first_of(w, o), list[700];
    for (int i = 0; i < 700; ++i) list[i] = f + 1000 + 3 * i;
    CHECK_OK(pbd_add_damping_cluster(w, list, 700, 4.0f, NULL));
    CHECK_OK(pbd_add_damping_cluster(w, list + 100, 400, 1.0f, NULL));
}

/* An n x n cloth's triangles in builder (local) numbering. */
static int *grid_triangles(int n, int *count) {
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(n, n, o, u, v, &m));
    int *t = (int *)malloc(sizeof(int) * 3 * (size_t)m.triangle_count);
    memcpy(t, m.triangles, sizeof(int) * 3 * (size_t)m.triangle_count);
    *count = m.triangle_count;
    pbd_mesh_free(&m);
    return t;
}

/* Hair on a moving head (strands), and a cloth with triangle and edge
   strain limits pulled by a kinematic corner. */
static pbd_strands hair_set;
static void ball(pbd_world *w) {
    float c[3] = {0.1f, 0.5f, 0.1f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.25f, 0.5f, NULL));
}

static void build_hair_and_limits(pbd_world *w) {
    ground(w);
    ball(w);
    enum { ROOTS = 40 };
    float roots[3 * ROOTS], normals[3 * ROOTS];
    for (int i = 0; i < ROOTS; ++i) {
        float a = 0.157f * (float)i, c = cosf(a), sn = sinf(a);
        roots[3 * i] = 0.1f * c;
        roots[3 * i + 1] = 0.05f * (float)(i % 3);
        roots[3 * i + 2] = 0.1f * sn;
        normals[3 * i] = c;
        normals[3 * i + 1] = 0.3f;
        normals[3 * i + 2] = sn;
    }
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = roots;
    hd.root_normals = normals;
    hd.strand_count = ROOTS;
    hd.particles_per_strand = 12;
    hd.position[1] = 1.0f;
    CHECK_OK(pbd_add_hair(w, &hd, &hair_set, NULL));
    pbd_object o = cloth(w, 12, 0.6f, 0.9f, PBD_BENDING_DIHEDRAL, 0);
    int nt = 0, *tri = grid_triangles(12, &nt), f = first_of(w, o);
    pbd_strain_limit_desc sd = pbd_strain_limit_desc_default();
    sd.object = o;
    sd.triangles = tri;
    sd.triangle_count = nt;
    sd.max_stretch = 1.05f;
    CHECK_OK(pbd_add_strain_limit(w, &sd, NULL));
    sd.mode = PBD_STRAIN_EDGES;
    sd.triangle_count = nt / 2;
    sd.min_stretch = 0.95f;
    CHECK_OK(pbd_add_strain_limit(w, &sd, NULL));
    free(tri);
    CHECK_OK(pbd_particle_pin(w, f));
    CHECK_OK(pbd_particle_set_kinematic(w, f + 11, 1));
}

static void frame_hair_and_limits(pbd_world *w, int frame) {
    float t = 0.05f * (float)frame, pos[3] = {0.2f * sinf(t), 1.0f, 0}, rot[4] = {0, sinf(0.5f * t), 0, cosf(0.5f * t)};
    CHECK_OK(pbd_strands_set_transform(w, hair_set, pos, rot)); /* the same handle in every world built alike */
    int corner = pbd_world_particle_count(w) - 12 * 12 + 11;
    float target[3] = {0.3f + 0.4f * t, 0.9f + 0.1f * t, -0.3f};
    CHECK_OK(pbd_particle_set_kinematic_target(w, corner, target));
}

/* Cloth falling onto a triangle-mesh collider (BVH) and a signed-distance
   grid collider that turns. */
static void build_mesh_colliders(pbd_world *w) {
    ground(w);
    pbd_mesh m;
    float c[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_sphere(2, c, 0.25f, &m));
    pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
    md.positions = m.positions;
    md.vertex_count = m.vertex_count;
    md.triangles = m.triangles;
    md.triangle_count = m.triangle_count;
    md.position[0] = -0.25f;
    md.position[1] = 0.3f;
    CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    md.sdf_resolution = 24;
    md.position[0] = 0.3f;
    md.position[1] = 0.25f;
    CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    pbd_mesh_free(&m);
    cloth(w, 20, 1.2f, 0.8f, PBD_BENDING_DIHEDRAL, 0);
}

static void frame_mesh_colliders(pbd_world *w, int frame) {
    float a = 0.03f * (float)frame, pos[3] = {0.3f, 0.25f, 0}, rot[4] = {0, sinf(a), 0, cosf(a)};
    CHECK_OK(pbd_collider_set_pose(w, pbd_world_collider(w, 2), pos, rot));
}

/* A hub with 100 spokes (distance constraints that all share the hub: more
   than 63 colours, so an overflow colour solved in order) and particles
   kept above triangles by point-triangle constraints. */
static pbd_group spokes_group;
static void build_overflow(pbd_world *w) {
    ground(w);
    enum { SPOKES = 100 };
    float pos[3 * (SPOKES + 1) + 3 * 8];
    pos[0] = 0;
    pos[1] = 1.0f;
    pos[2] = 0;
    for (int i = 1; i <= SPOKES; ++i) {
        float a = 0.0628f * (float)i;
        pos[3 * i] = 0.3f * cosf(a);
        pos[3 * i + 1] = 1.0f + 0.01f * (float)(i % 7);
        pos[3 * i + 2] = 0.3f * sinf(a);
    }
    /* two triangles and two particles just above them */
    float tri[24] = {0.5f,  0.5f, 0, 0.8f,  0.5f, 0, 0.5f,  0.5f, 0.3f, 0.6f,  0.55f, 0.1f,
                     -0.5f, 0.4f, 0, -0.8f, 0.4f, 0, -0.5f, 0.4f, 0.3f, -0.6f, 0.45f, 0.1f};
    memcpy(pos + 3 * (SPOKES + 1), tri, sizeof tri);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = SPOKES + 1 + 8;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    int idx[2 * SPOKES];
    for (int i = 0; i < SPOKES; ++i) {
        idx[2 * i] = r.first;
        idx[2 * i + 1] = r.first + 1 + i;
    }
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = SPOKES;
    cd.indices = idx;
    cd.compliance = 1e-6f;
    CHECK_OK(pbd_add_constraints(w, &cd, &spokes_group));
    int b = r.first + SPOKES + 1, pt[8] = {b + 3, b, b + 1, b + 2, b + 7, b + 4, b + 5, b + 6};
    cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_POINT_TRIANGLE;
    cd.count = 2;
    cd.indices = pt;
    cd.thickness = 0.02f;
    CHECK_OK(pbd_add_constraints(w, &cd, NULL));
    for (int k = 0; k < 3; ++k) { /* the triangles' corners hold */
        CHECK_OK(pbd_particle_pin(w, b + k));
        CHECK_OK(pbd_particle_pin(w, b + 4 + k));
    }
}

/* A cloth that tears, pulled apart by two kinematic corners; pbd_world_tear
   between steps (on the host; the next step uploads the torn cloth). */
static int torn; /* splits so far in the last tearing scene built */
static void build_tearing(pbd_world *w) {
    torn = 0;
    ball(w);
    pbd_object o = cloth(w, 16, 0.8f, 1.0f, PBD_BENDING_NONE, 0);
    int nt = 0, *tri = grid_triangles(16, &nt), f = first_of(w, o);
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = o;
    td.triangles = tri;
    td.triangle_count = nt;
    td.threshold = 1.3f;
    CHECK_OK(pbd_add_tearing(w, &td, NULL));
    free(tri);
    CHECK_OK(pbd_particle_set_kinematic(w, f, 1));
    CHECK_OK(pbd_particle_set_kinematic(w, f + 15, 1));
}

static void frame_tearing(pbd_world *w, int frame) {
    int splits = 0;
    if (frame > 0) CHECK_OK(pbd_world_tear(w, &splits));
    torn += splits;
    float t = 0.02f * (float)frame, a[3] = {-0.4f - t, 1.0f, -0.4f}, b[3] = {0.4f + t, 1.0f, -0.4f};
    CHECK_OK(pbd_particle_set_kinematic_target(w, 0, a));
    CHECK_OK(pbd_particle_set_kinematic_target(w, 15, b));
}

/* A cloth hanging from its pinned top row, its bottom row (kinematic)
   pulled down until a piece tears off, then let go: the piece falls to
   the ground, damped on its own (pbd.h, "pieces of an object"); a cloth
   built after it puts the copies the tear makes outside its range. */
enum { TORN_N = 12, TORN_PULL = 8 };
static int torn_first;
static void build_torn_off(pbd_world *w) {
    torn = 0;
    ground(w);
    float o[3] = {-0.4f, 0.3f, 0}, u[3] = {0.8f, 0, 0}, v[3] = {0, 0.8f, 0}, o2[3] = {1, 0.5f, 0};
    pbd_mesh m, m2;
    pbd_object obj, second;
    CHECK_OK(pbd_mesh_grid(TORN_N, TORN_N, o, u, v, &m));
    CHECK_OK(pbd_mesh_grid(3, 3, o2, u, v, &m2));
    pbd_cloth_desc d = pbdt_cloth_desc(&m), d2 = pbdt_cloth_desc(&m2);
    CHECK_OK(pbd_add_cloth(w, &d, &obj));
    CHECK_OK(pbd_add_cloth(w, &d2, &second));
    CHECK_OK(pbd_particle_pin(w, first_of(w, second) + 8));
    torn_first = first_of(w, obj);
    for (int i = 0; i < TORN_N; ++i) {
        CHECK_OK(pbd_particle_pin(w, torn_first + (TORN_N - 1) * TORN_N + i));
        CHECK_OK(pbd_particle_set_kinematic(w, torn_first + i, 1));
    }
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = obj;
    td.triangles = m.triangles;
    td.triangle_count = m.triangle_count;
    CHECK_OK(pbd_add_tearing(w, &td, NULL));
    pbd_mesh_free(&m);
    pbd_mesh_free(&m2);
}

static void frame_torn_off(pbd_world *w, int frame) {
    int splits = 0;
    if (frame > 0) CHECK_OK(pbd_world_tear(w, &splits));
    torn += splits;
    for (int i = 0; i < TORN_N && frame <= TORN_PULL; ++i) {
        float t[3] = {-0.4f + 0.8f * (float)i / (TORN_N - 1), 0.3f - 0.05f * (float)(frame + 1), 0};
        if (frame < TORN_PULL) CHECK_OK(pbd_particle_set_kinematic_target(w, torn_first + i, t));
        else CHECK_OK(pbd_particle_set_kinematic(w, torn_first + i, 0)); /* let go */
    }
}

/* A tank of plane colliders [-s, s] x [0, inf) x [-s, s] with a sphere in it. */
static void tank(pbd_world *w, float s) {
    float planes[5][6] = {
        {0, 0, 0, 0, 1, 0}, {-s, 0, 0, 1, 0, 0}, {s, 0, 0, -1, 0, 0}, {0, 0, -s, 0, 0, 1}, {0, 0, s, 0, 0, -1}};
    for (int k = 0; k < 5; ++k) CHECK_OK(pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.3f, NULL));
    float c[3] = {0.15f, 0.05f, 0.1f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.1f, 0.3f, NULL));
}

/* A block of fluid falling into a tank (past 2048 particles taking part:
   the emulation runs their launches on several threads), with viscosity
   and vorticity, and a soft box with particle contact dropped onto it. */
static pbd_fluid fluid_handle;
static void build_fluid(pbd_world *w) {
    tank(w, 0.36f);
    float o[3] = {-0.35f, 0.05f, -0.35f};
    float *p = pbdt_lattice(14, 10, 14, 0.05f, o);
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = 14 * 10 * 14;
    fd.viscosity = 0.02f;
    fd.vorticity = 0.01f;
    CHECK_OK(pbd_add_fluid(w, &fd, &fluid_handle, NULL));
    free(p);
    float lo[3] = {-0.1f, 0.65f, -0.1f}, hi[3] = {0.1f, 0.8f, 0.1f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_tet_box(5, 4, 5, lo, hi, &m));
    pbd_softbody_desc sd = pbdt_softbody_desc(&m);
    sd.density = 400.0f;
    pbd_object box;
    CHECK_OK(pbd_add_softbody(w, &sd, &box));
    pbd_mesh_free(&m);
    CHECK_OK(pbd_object_set_particle_contact(w, box, 1));
}

/* A per-frame setter (particles only) and a parameter change mid-run. */
static void frame_fluid(pbd_world *w, int frame) {
    if (frame == 10) {
        float v[3] = {0.5f, 0, 0};
        pbd_range r = {100, 1};
        CHECK_OK(pbd_particles_set_velocities(w, r, v));
    }
    if (frame == 20) CHECK_OK(pbd_fluid_set_viscosity(w, fluid_handle, 0.05f, 0.0f));
}

/* Grains with particle contact and friction poured onto a cloth that has
   particle contact too (the cloth becomes coupled). */
static void build_granular(pbd_world *w) {
    ground(w);
    float c0[3] = {0, 0.3f, 0};
    CHECK_OK(pbd_add_collider_sphere(w, c0, 0.15f, 0.5f, NULL));
    pbd_object c = cloth(w, 16, 0.8f, 0.5f, PBD_BENDING_DIHEDRAL, 0);
    int f = first_of(w, c);
    CHECK_OK(pbd_particle_pin(w, f));
    CHECK_OK(pbd_particle_pin(w, f + 15));
    CHECK_OK(pbd_particle_pin(w, f + 16 * 15));
    CHECK_OK(pbd_particle_pin(w, f + 16 * 15 + 15));
    CHECK_OK(pbd_object_set_particle_contact(w, c, 1));
    float o[3] = {-0.15f, 0.6f, -0.15f};
    float *p = pbdt_lattice(8, 6, 8, 0.04f, o);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = p;
    pd.count = 8 * 6 * 8;
    pd.radius = 0.018f;
    pd.mass = 0.01f;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    free(p);
    CHECK_OK(pbd_particles_set_particle_contact(w, r, 1));
    CHECK_OK(pbd_world_set_particle_contact_friction(w, 0.6f, 0.5f));
}

/* A layer of grains at rest on the ground, one rolled into it and one
   dropped onto it: substeps that keep the lists (PBD__PP_SKIN) and
   substeps that build them, the device deciding as the host does. */
static void build_grains_at_rest(pbd_world *w) {
    ground(w);
    enum { N = 10 };
    const float r = 0.01f;
    float pos[3 * (N * N + 2)], vel[3] = {1.5f, 0, 0.4f};
    for (int i = 0; i < N * N; ++i) {
        pos[3 * i + 0] = (float)(i % N) * 2.05f * r;
        pos[3 * i + 1] = r;
        pos[3 * i + 2] = (float)(i / N) * 2.05f * r;
    }
    pos[3 * N * N + 0] = -0.1f;
    pos[3 * N * N + 1] = r;
    pos[3 * N * N + 2] = 0.05f;
    pos[3 * N * N + 3] = 0.1f;
    pos[3 * N * N + 4] = 0.15f;
    pos[3 * N * N + 5] = 0.1f;
    pbd_range g = pbdt_add_colliding(w, pos, N * N + 2, r, 0.01f);
    pbd_range rolled = {g.first + N * N, 1};
    CHECK_OK(pbd_particles_set_velocities(w, rolled, vel));
}

/* A flag in gusty wind (an acceleration field: the user's callback, which
   a GPU world runs on the host every substep) on a pole, switched off
   mid-run; some particles get a non-finite answer, which counts as 0. */
static void gusts(void *user, int particle, const float *x, const float *v, double time, float *a) {
    (void)user;
    float t = (float)time, gust = 1.0f + 0.6f * sinf(4.0f * t - 2.5f * x[0]) * sinf(1.7f * t + 3.0f * x[1]);
    float wv[3] = {6.0f * gust, 0.8f * sinf(3.0f * t + x[0]), 2.0f * sinf(2.3f * t - 2.0f * x[0])};
    for (int c = 0; c < 3; ++c) a[c] = 1.2f * (wv[c] - v[c]);
    if (particle % 97 == 5) a[1] = NAN;
}
static void build_wind(pbd_world *w) {
    float c[3] = {0.8f, 1.2f, 0.4f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.25f, 0.4f, NULL)); /* the flag starts level and falls onto it */
    float o[3] = {0, 1.5f, 0}, u[3] = {1.2f, 0, 0}, v[3] = {0, 0, 0.8f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(24, 16, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.damping = 0.0f;
    pbd_object flag;
    CHECK_OK(pbd_add_cloth(w, &cd, &flag));
    pbd_mesh_free(&m);
    int f = first_of(w, flag);
    for (int r = 0; r < 16; ++r) CHECK_OK(pbd_particle_pin(w, f + 24 * r)); /* the pole */
    CHECK_OK(pbd_particle_set_kinematic(w, f + 23, 1));
    CHECK_OK(pbd_world_set_acceleration_field(w, gusts, NULL));
}
static void frame_wind(pbd_world *w, int frame) {
    if (frame == 30) CHECK_OK(pbd_world_set_acceleration_field(w, NULL, NULL));
}

/* A fluid collapsed onto three points, with grains collapsed onto a
   fourth (crowded buckets: the device sorts them by heapsort; lists cut
   at PBD_MAX_NEIGHBORS in the grid's order), falling into the tank. */
static void build_collapsed(pbd_world *w) {
    tank(w, 0.36f);
    enum { N = 600 };
    float *p = (float *)malloc(sizeof(float) * 3 * N);
    for (int i = 0; i < N; ++i) {
        p[3 * i + 0] = 0.1f * (float)(i % 3) - 0.1f;
        p[3 * i + 1] = 0.4f;
        p[3 * i + 2] = 0.05f;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = N;
    CHECK_OK(pbd_add_fluid(w, &fd, NULL, NULL));
    for (int i = 0; i < 3 * 100; ++i) p[i] = i % 3 == 1 ? 0.6f : 0.02f;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = p;
    pd.count = 100;
    pd.radius = 0.02f;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_particles_set_particle_contact(w, r, 1));
    free(p);
}

/* Self-collision: a cloth dropped across a bar folds onto itself, and a
   second, smaller one (another surface) lands on it. */
static int plate_first;
static void build_folding(pbd_world *w) {
    ground(w);
    float a0[3] = {-0.6f, 0.4f, 0}, a1[3] = {0.6f, 0.4f, 0};
    CHECK_OK(pbd_add_collider_capsule(w, a0, a1, 0.03f, 0.3f, NULL));
    float sizes[2] = {0.8f, 0.4f}, heights[2] = {0.6f, 0.9f};
    int n[2] = {20, 10};
    for (int k = 0; k < 2; ++k) {
        float o[3] = {-0.5f * sizes[k], heights[k], -0.5f * sizes[k] + 0.05f * (float)k}, u[3] = {sizes[k], 0, 0},
              v[3] = {0, 0, sizes[k]};
        pbd_mesh m;
        pbd_object cl;
        CHECK_OK(pbd_mesh_grid(n[k], n[k], o, u, v, &m));
        pbd_cloth_desc cd = pbdt_cloth_desc(&m);
        CHECK_OK(pbd_add_cloth(w, &cd, &cl));
        CHECK_OK(pbd_add_cloth_self_collision(w, cl, &cd, 0.01f, NULL));
        pbd_mesh_free(&m);
    }
    /* a kinematic plate (a third surface) driven down through them: the
       contacts cannot hold it, the fail-safe sends the cloth back */
    float o[3] = {-0.1f, 1.0f, -0.1f}, u[3] = {0.2f, 0, 0}, v[3] = {0, 0, 0.2f};
    pbd_mesh m;
    pbd_object plate;
    CHECK_OK(pbd_mesh_grid(4, 4, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    CHECK_OK(pbd_add_cloth(w, &cd, &plate));
    CHECK_OK(pbd_add_cloth_self_collision(w, plate, &cd, 0.01f, NULL));
    pbd_mesh_free(&m);
    plate_first = first_of(w, plate);
    for (int i = 0; i < 16; ++i) CHECK_OK(pbd_particle_set_kinematic(w, plate_first + i, 1));
}
static void frame_folding(pbd_world *w, int frame) {
    float drop = frame < 5 ? 0.0f : 0.035f * (float)(frame - 5);
    for (int i = 0; i < 16; ++i) {
        float t[3] = {-0.1f + 0.2f * (float)(i % 4) / 3.0f, 1.0f - drop, -0.1f + 0.2f * (float)(i / 4) / 3.0f};
        CHECK_OK(pbd_particle_set_kinematic_target(w, plate_first + i, t));
    }
}

/* pbd_sm.h's surface volume (a device plugin: its kernels in pbd_cuda.cu)
   on a closed skin that a box squeezes onto the ground: local and global
   weights (alpha 0.5), smoothing, the weights of particles the colliders
   hold, the velocity correction. */
static pbd_collider squeeze_plate;
static pbd_sm_volume squeezed;
static void build_volume(pbd_world *w) {
    ground(w);
    pbd_mesh m;
    float c[3] = {0, 0.26f, 0}, half[3] = {0.4f, 0.05f, 0.4f}, top[3] = {0, 0.6f, 0};
    pbdt_skin(w, 2, c, 0.25f, &m);
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    vd.alpha = 0.5f;
    vd.contact_distance = 0.02f; /* (default 0) so that the kernels weigh particles at the colliders 0 */
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &squeezed));
    pbd_mesh_free(&m);
    CHECK_OK(pbd_add_collider_box(w, top, half, NULL, 0.5f, &squeeze_plate));
}
static void frame_volume(pbd_world *w, int frame) {
    float at[3] = {0, 0.6f - 0.01f * (float)(frame < 25 ? frame : 25), 0};
    CHECK_OK(pbd_collider_set_pose(w, squeeze_plate, at, NULL));
    if (frame == 30) CHECK_OK(pbd_sm_volume_set_alpha(w, squeezed, 0.8f)); /* a setter between steps */
}

/* pbd_sm.h's shape-matching bodies (device plugins): a lattice jelly
   (the lattice plan's scans; linear, plastic) dropped onto a sphere, and
   two rigid boxes (one cluster each: the weighted match after the
   contacts, the velocity fit) onto a tilted box, one onto the other;
   mid-run a setter and a reset of the plasticity. */
static pbd_sm_body jelly;
static int sm_points(pbd_world *w, int nx, int ny, int nz, float h, const float *at, int *idx) {
    float x[3 * 64];
    int n = 0;
    for (int k = 0; k < nz; ++k)
        for (int j = 0; j < ny; ++j)
            for (int i = 0; i < nx; ++i, ++n) {
                x[3 * n] = at[0] + h * (float)i + 0.002f * (float)j; /* a little skew: not axis aligned */
                x[3 * n + 1] = at[1] + h * (float)j;
                x[3 * n + 2] = at[2] + h * (float)k;
            }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = n;
    pd.radius = 0.4f * h;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    for (int i = 0; i < n; ++i) idx[i] = r.first + i;
    return n;
}
static void build_sm_bodies(pbd_world *w) {
    ground(w);
    float c[3] = {-0.3f, 0.2f, 0}, b[3] = {0.35f, 0.1f, 0}, half[3] = {0.25f, 0.05f, 0.25f};
    float q[4] = {0, 0, 0.2588190f, 0.9659258f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.15f, 0.5f, NULL));
    CHECK_OK(pbd_add_collider_box(w, b, half, q, 0.6f, NULL));
    int cells[3 * 5 * 5 * 5];
    pbd_sm_lattice_box(5, 5, 5, cells);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 125;
    ld.spacing = 0.05f;
    ld.origin[0] = -0.4f;
    ld.origin[1] = 0.45f;
    ld.origin[2] = -0.1f;
    ld.half_width = 1;
    ld.body.mode = PBD_SM_LINEAR;
    ld.body.beta = 0.3f;
    ld.body.stiffness = 0.6f;
    ld.body.yield = 0.01f;
    ld.body.creep = 5.0f;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &jelly, NULL));
    for (int k = 0; k < 2; ++k) {
        int idx[64];
        float at[3] = {0.25f + 0.05f * (float)k, 0.35f + 0.2f * (float)k, -0.05f};
        pbd_sm_body_desc bd = pbd_sm_body_desc_default();
        bd.particles = idx;
        bd.particle_count = sm_points(w, 3, 3, 3, 0.05f, at, idx);
        CHECK_OK(pbd_sm_add_body(w, &bd, NULL));
    }
}
static void frame_sm_bodies(pbd_world *w, int frame) {
    if (frame == 20) CHECK_OK(pbd_sm_body_set_mode(w, jelly, PBD_SM_LINEAR, 0.6f));
    if (frame == 28) CHECK_OK(pbd_sm_body_reset_plasticity(w, jelly));
}

/* The other region sums and modes: an octree body (level-0 cells around
   level-1 cells; its summed-volume tables), the same octree's regions as
   lists (quadratic: the naive plan, its per-particle gather), and a
   surface of 2-rings summed along mesh paths, plastic; they fall onto
   the ground and a sphere. */
static void build_sm_sums(pbd_world *w) {
    ground(w);
    float c[3] = {0.6f, 0.15f, 0.2f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.15f, 0.5f, NULL));
    int oc[4 * 216], n = 0;
    float pos[3 * 216];
    for (int z = 0; z < 6; ++z)
        for (int y = 0; y < 6; ++y)
            for (int x = 0; x < 6; ++x) {
                int core = x >= 2 && x < 4 && y >= 2 && y < 4 && z >= 2 && z < 4;
                if (core && ((x | y | z) & 1)) continue; /* one level-1 cell per 2^3 */
                oc[4 * n] = core ? x / 2 : x;
                oc[4 * n + 1] = core ? y / 2 : y;
                oc[4 * n + 2] = core ? z / 2 : z;
                oc[4 * n + 3] = core;
                float h = core ? 0.04f : 0.02f;
                for (int a = 0; a < 3; ++a) pos[3 * n + a] = 0.04f * (float)oc[4 * n + a] * (core ? 2 : 1) + h;
                pos[3 * n] -= 0.6f;
                pos[3 * n + 1] += 0.3f;
                n++;
            }
    for (int copy = 0; copy < 2; ++copy) {
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = pos;
        pd.count = n;
        pd.radius = 0.015f;
        pbd_range r = {0, 0};
        CHECK_OK(pbd_add_particles(w, &pd, &r));
        for (int i = 0; i < n; ++i) pos[3 * i] += 0.4f; /* the next copy beside it */
        int idx[216];
        for (int i = 0; i < n; ++i) idx[i] = r.first + i;
        pbd_sm_sum_plan *plan = NULL;
        CHECK_OK(pbd_sm_plan_octree(n, oc, NULL, 2, &plan));
        pbd_sm_body_desc d = pbd_sm_body_desc_default();
        d.particles = idx;
        d.particle_count = n;
        d.mode = copy ? PBD_SM_QUADRATIC : PBD_SM_LINEAR;
        d.beta = 0.4f;
        d.stiffness = 0.8f;
        d.creep = 10;
        d.yield = 0.02f;
        int *start = NULL, *list = NULL;
        if (copy && plan) { /* its regions as lists: the naive plan */
            int R = pbd_sm_plan_region_count(plan), total = 0, cnt = 0;
            start = (int *)malloc(sizeof(int) * (size_t)(R + 1));
            list = (int *)malloc(sizeof(int) * (size_t)R * 216);
            for (int e = 0; e < R; ++e) {
                start[e] = total;
                pbd_sm_plan_region(plan, e, list + total, 216, &cnt);
                total += cnt;
            }
            start[R] = total;
            d.region_start = start;
            d.region_particles = list;
            d.region_count = R;
            pbd_sm_plan_destroy(plan);
            plan = NULL;
        }
        d.plan = plan;
        d.owns_plan = 1;
        CHECK_OK(pbd_sm_add_body(w, &d, NULL));
        free(start);
        free(list);
    }
    float o[3] = {0.4f, 0.5f, 0}, u[3] = {0.3f, 0, 0}, v[3] = {0, 0, 0.3f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(8, 8, o, u, v, &m));
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = m.positions;
    pd.count = m.vertex_count;
    pd.radius = 0.015f;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    int idx[81];
    for (int i = 0; i < m.vertex_count; ++i) idx[i] = r.first + i;
    pbd_sm_sum_plan *pp = NULL;
    CHECK_OK(pbd_sm_plan_paths(m.vertex_count, m.positions, m.triangle_count, m.triangles, 2, 0, &pp));
    pbd_sm_body_desc d2 = pbd_sm_body_desc_default();
    d2.particles = idx;
    d2.particle_count = m.vertex_count;
    d2.plan = pp;
    d2.owns_plan = 1;
    d2.mode = PBD_SM_LINEAR;
    d2.beta = 0.2f;
    d2.creep = 5;
    d2.yield = 0.01f;
    CHECK_OK(pbd_sm_add_body(w, &d2, NULL));
    pbd_mesh_free(&m);
}

/* pbd_sm.h's oriented particles (a device plugin): a branching plant of
   ellipsoids on a pinned root (a chain and side branches: the 1-ring
   groups, matched one after the other) falling against a sphere and the
   ground (the ellipsoids' collisions), a kinematic tip moved by a hand
   (its orientation turns with its group), mid-run a state set. */
static pbd_sm_oriented plant;
static void build_oriented(pbd_world *w) {
    ground(w);
    float c[3] = {0.35f, 0.35f, 0};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.15f, 0.5f, NULL));
    enum { N = 16 };
    float pos[3 * N];
    int edges[2 * N], ne = 0;
    for (int i = 0; i < 10; ++i) { /* the stem, bent out sideways */
        pos[3 * i] = 0.06f * (float)i;
        pos[3 * i + 1] = 0.3f + 0.05f * (float)i;
        pos[3 * i + 2] = 0.002f * (float)(i * i);
        if (i > 0) edges[2 * ne] = i - 1, edges[2 * ne + 1] = i, ne++;
    }
    for (int i = 10; i < N; ++i) { /* two side branches of three */
        int from = i == 10 || i == 13 ? (i == 10 ? 4 : 7) : i - 1;
        float side = i < 13 ? 1.0f : -1.0f;
        pos[3 * i] = pos[3 * from] + 0.02f;
        pos[3 * i + 1] = pos[3 * from + 1] + 0.03f;
        pos[3 * i + 2] = pos[3 * from + 2] + 0.06f * side;
        edges[2 * ne] = from, edges[2 * ne + 1] = i, ne++;
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = N;
    pd.mass = 0.1f;
    pd.radius = 0.015f;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_particle_pin(w, r.first));
    CHECK_OK(pbd_particle_set_kinematic(w, r.first + 9, 1));
    float radii[3 * N];
    for (int i = 0; i < N; ++i) radii[3 * i] = 0.04f, radii[3 * i + 1] = 0.02f, radii[3 * i + 2] = 0.015f;
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = r;
    od.edges = edges;
    od.edge_count = ne;
    od.radii = radii;
    od.stiffness = 0.7f;
    CHECK_OK(pbd_sm_add_oriented(w, &od, &plant));
}
static void frame_oriented(pbd_world *w, int frame) {
    float t = 0.03f * (float)frame, hand[3] = {0.54f + 0.2f * t, 0.75f - 0.4f * t, 0.1f * t};
    CHECK_OK(pbd_particle_set_kinematic_target(w, 9, hand));
    if (frame == 15) {
        float q[4] = {0, 0.3826834f, 0, 0.9238795f}, om[3] = {0, 0, 8};
        CHECK_OK(pbd_sm_oriented_set_state(w, plant, 12, q, om));
    }
}

/* A skin's rest mesh along the plant's stem (nv vertices), and a skin of
   it on the plant of world w (bones and weights: NULL for the nearest
   particles). */
static void plant_mesh(float *mesh, int nv) {
    for (int v = 0; v < nv; ++v) {
        mesh[3 * v] = 0.015f * (float)v, mesh[3 * v + 1] = 0.32f + 0.012f * (float)v;
        mesh[3 * v + 2] = 0.01f * (float)(v % 3);
    }
}
static pbd_sm_skin *plant_skin(pbd_world *w, const float *mesh, int nv, const int *bones, const float *weights) {
    pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
    sd.rest_vertices = mesh;
    sd.vertex_count = nv;
    sd.bones = bones;
    sd.weights = weights;
    pbd_sm_skin *skin = NULL;
    CHECK_OK(pbd_sm_skin_create(w, plant, &sd, &skin));
    return skin;
}

/* pbd_sm.h's multi-resolution cloth (a device plugin): a 16 x 16 cloth of
   4 levels pinned at two corners falling onto a sphere, with bending,
   damping and wrinkle conservation; nested levels in the independent
   sets scheme (colours, and an overflow colour on the coarse levels),
   centroid levels in the two-pass scheme (goals, then gathers). */
static pbd_sm_cloth mr_cloth;
static void build_multires(pbd_world *w, int nested, pbd_sm_cloth_scheme scheme) {
    ground(w);
    float c[3] = {0.05f, 0.45f, 0.1f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.25f, 0.5f, NULL));
    float o[3] = {-0.4f, 0.8f, -0.4f}, u[3] = {0.8f, 0, 0}, v[3] = {0, 0, 0.8f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(16, 16, o, u, v, &m));
    int keep[2] = {0, 15};
    pbd_sm_cloth_desc d = pbd_sm_cloth_desc_default();
    d.positions = m.positions;
    d.vertex_count = m.vertex_count;
    d.triangles = m.triangles;
    d.triangle_count = m.triangle_count;
    d.levels = 4;
    d.nested = nested;
    d.scheme = scheme;
    d.keep_vertices = keep;
    d.keep_count = 2;
    d.damping = 0.2f;
    d.bending_stiffness = 1e-3f;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_sm_add_cloth(w, &d, &mr_cloth, &r));
    CHECK_OK(pbd_particle_pin(w, r.first));
    CHECK_OK(pbd_particle_pin(w, r.first + 15));
    pbd_mesh_free(&m);
}
/* and a disc of 72 triangles around a hub (an overflow colour: the hub's
   triangles one after the other), falling beside it */
static void build_multires_sets(pbd_world *w) {
    build_multires(w, 1, PBD_SM_CLOTH_INDEPENDENT_SETS);
    enum { RIM = 72 };
    float x[3 * (RIM + 1)] = {0.6f, 0.9f, 0.5f};
    int tri[3 * RIM];
    for (int i = 0; i < RIM; ++i) {
        float a = 6.2831853f * (float)i / RIM;
        x[3 * (i + 1)] = 0.6f + 0.15f * cosf(a);
        x[3 * (i + 1) + 1] = 0.9f + 0.02f * sinf(3 * a);
        x[3 * (i + 1) + 2] = 0.5f + 0.15f * sinf(a);
        tri[3 * i] = 0, tri[3 * i + 1] = 1 + (i + 1) % RIM, tri[3 * i + 2] = 1 + i;
    }
    pbd_sm_cloth_desc d = pbd_sm_cloth_desc_default();
    d.positions = x;
    d.vertex_count = RIM + 1;
    d.triangles = tri;
    d.triangle_count = RIM;
    d.levels = 1;
    CHECK_OK(pbd_sm_add_cloth(w, &d, NULL, NULL));
}
static void build_multires_two_pass(pbd_world *w) { build_multires(w, 0, PBD_SM_CLOTH_TWO_PASS); }
static void frame_multires(pbd_world *w, int frame) {
    if (frame == 20) CHECK_OK(pbd_sm_cloth_set_stiffness(w, mr_cloth, 0.8f, 0.6f)); /* a setter between steps */
}

static const scene scenes[] = {
    {"cloth on colliders", build_cloth, frame_cloth, 60},
    {"soft body, balloon, isometric cloth; a removal", build_bodies, frame_bodies, 60},
    {"Jacobi", build_jacobi, frame_cloth, 40},
    {"PBD mode, attachments, clusters", build_pbd_mode, frame_pbd_mode, 50},
    {"large cloth", build_large, NULL, 25},
    {"hair, strain limits", build_hair_and_limits, frame_hair_and_limits, 40},
    {"tearing", build_tearing, frame_tearing, 40},
    {"a piece torn off its pins falls", build_torn_off, frame_torn_off, 40},
    {"mesh and grid colliders", build_mesh_colliders, frame_mesh_colliders, 50},
    {"overflow colour, point-triangle", build_overflow, NULL, 40},
    {"fluid with a floating box", build_fluid, frame_fluid, 25},
    {"grains on a cloth", build_granular, NULL, 40},
    {"grains at rest, one rolled in", build_grains_at_rest, NULL, 30},
    {"a flag in an acceleration field", build_wind, frame_wind, 40},
    {"a collapsed fluid and grains", build_collapsed, NULL, 20},
    {"self-collision: cloth folding on a bar", build_folding, frame_folding, 40},
    {"pbd_sm.h: surface volume squeezed by a box", build_volume, frame_volume, 40},
    {"pbd_sm.h: a plastic lattice jelly and rigid bodies", build_sm_bodies, frame_sm_bodies, 36},
    {"pbd_sm.h: octree, region lists (quadratic) and mesh paths", build_sm_sums, NULL, 24},
    {"pbd_sm.h: an oriented-particle plant", build_oriented, frame_oriented, 30},
    {"pbd_sm.h: a multi-resolution cloth, nested, independent sets", build_multires_sets, frame_multires, 28},
    {"pbd_sm.h: a multi-resolution cloth, centroids, two-pass", build_multires_two_pass, frame_multires, 28},
};
enum { SCENES = (int)(sizeof scenes / sizeof scenes[0]) };

// ==== comparison ===============================================================

/* Whether both worlds' particles have the same bits (the first difference
   is reported). */
static int same_bits(const char *what, int step, pbd_world *a, pbd_world *b) {
    int n = pbd_world_particle_count(a);
    if (n != pbd_world_particle_count(b)) {
        CHECK_MSG(0, "%s, step %d: %d vs %d particles", what, step, n, pbd_world_particle_count(b));
        return 0;
    }
    const float *xa = pbd_world_positions(a), *xb = pbd_world_positions(b);
    const float *va = pbd_world_velocities(a), *vb = pbd_world_velocities(b);
    for (int i = 0; i < 4 * n; ++i)
        if (memcmp(&xa[i], &xb[i], sizeof(float)) || memcmp(&va[i], &vb[i], sizeof(float))) {
            CHECK_MSG(0, "%s, step %d: particle %d differs: x %.9g vs %.9g, v %.9g vs %.9g", what, step, i / 4,
                      (double)xa[i], (double)xb[i], (double)va[i], (double)vb[i]);
            return 0;
        }
    return 1;
}

/* That scene s moved and touched something in world w (x0: the positions
   of its first n0 particles; tearing and adds make more): a comparison of
   worlds at rest would prove little. */
static void check_moved(const scene *s, pbd_world *w, const float *x0, int n0, int touched) {
    int n = pbd_world_particle_count(w) < n0 ? pbd_world_particle_count(w) : n0;
    const float *x = pbd_world_positions(w);
    float most = 0;
    for (int p = 0; p < n; ++p) {
        float d = fabsf(x[4 * p + 1] - x0[4 * p + 1]);
        most = d > most ? d : most;
    }
    CHECK_MSG(most > 0.05f, "%s: moved at most %g m", s->name, (double)most);
    CHECK_MSG(touched > 0, "%s: no contact", s->name);
    if (s->build == build_tearing || s->build == build_torn_off) CHECK_MSG(torn > 0, "the cloth did not tear");
    if (s->build == build_overflow) {
        int overflow = 0, colors = 0;
        CHECK_OK(pbd_group_colors(w, spokes_group, NULL, 0, &colors, &overflow));
        CHECK_MSG(overflow == 1, "the hub's group has %d colours and no overflow colour", colors);
    }
}

/* Steps scene s in a CPU world and a GPU world (launch order seed `seed`)
   and compares them after every step; with `moved`, checks that the
   scene moves and touches (check_moved). */
static void compare_scene(const scene *s, unsigned seed, int moved) {
    pbd__cuda_emulate_seed(seed);
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU);
    float *x0 = NULL;
    int touched = 0, same = 1, n0 = 0;
    if (!cpu || !gpu) goto done;
    CHECK(pbd_world_device(cpu) == PBD_DEVICE_CPU && pbd_world_device(gpu) == PBD_DEVICE_GPU);
    s->build(cpu);
    s->build(gpu);
    n0 = pbd_world_particle_count(cpu);
    x0 = (float *)malloc(sizeof(float) * 4 * (size_t)n0 + 1);
    memcpy(x0, pbd_world_positions(cpu), sizeof(float) * 4 * (size_t)n0);
    for (int k = 0; k < s->steps && same; ++k) {
        if (s->frame) {
            s->frame(cpu, k);
            s->frame(gpu, k);
        }
        CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
        CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
        touched += pbd_world_contact_count(cpu) > 0;
        same = same_bits(s->name, k, cpu, gpu);
    }
    CHECK(pbd_world_contact_count(gpu) == pbd_world_contact_count(cpu));
    if (moved && same) check_moved(s, cpu, x0, n0, touched); /* the GPU world's bits are the same */
done:
    free(x0);
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
}

/* The sanitizer build (ASan, UBSan) looks for memory errors: one launch
   order there (every other build compares two), which keeps CI's time. */
#if defined(__SANITIZE_ADDRESS__)
#define ORDERS 1
#else
#define ORDERS 2
#endif

TEST(cuda_gpu_worlds_give_the_cpu_worlds_bits_in_two_launch_orders) {
    NEEDS_GPU();
    for (int i = 0; i < SCENES; ++i) {
        compare_scene(&scenes[i], 1u, 1);
        if (ORDERS > 1) compare_scene(&scenes[i], 0x9e3779b9u, 0);
    }
}

TEST(cuda_snapshot_and_restore_mid_run) {
    NEEDS_GPU();
    pbd_world *gpu = world_on(PBD_DEVICE_GPU), *cpu = world_on(PBD_DEVICE_CPU);
    if (!gpu || !cpu) goto done;
    build_cloth(gpu);
    build_cloth(cpu);
    for (int k = 0; k < 20; ++k) {
        frame_cloth(gpu, k);
        CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
    }
    {
        size_t size = pbd_world_snapshot_size(gpu);
        void *snap = malloc(size);
        CHECK_OK(pbd_world_save(gpu, snap, size));
        CHECK_OK(pbd_world_restore(cpu, snap, size)); /* a GPU world's snapshot in a CPU world */
        for (int k = 20; k < 40; ++k) {
            frame_cloth(gpu, k);
            frame_cloth(cpu, k);
            CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
            CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
        }
        CHECK(same_bits("after a restore into a CPU world", 40, cpu, gpu));
        CHECK_OK(pbd_world_restore(gpu, snap, size)); /* and back into the GPU world, mid-run */
        CHECK_OK(pbd_world_restore(cpu, snap, size));
        for (int k = 20; k < 30; ++k) {
            frame_cloth(gpu, k);
            frame_cloth(cpu, k);
            CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
            CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
        }
        CHECK(same_bits("after a restore into the GPU world", 30, cpu, gpu));
        free(snap);
    }
done:
    pbd_world_destroy(gpu);
    pbd_world_destroy(cpu);
}

/* A step that makes a particle infinite is undone on the GPU as on the
   CPU: same code, same message, same state. */
TEST(cuda_a_non_finite_step_rolls_back_as_on_the_cpu) {
    NEEDS_GPU();
    pbd_world *w[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
    char msg[2][256];
    if (!w[0] || !w[1]) goto done;
    for (int k = 0; k < 2; ++k) {
        build_cloth(w[k]);
        for (int s = 0; s < 5; ++s) CHECK_OK(pbd_world_step(w[k], 1.0f / 60.0f));
        CHECK_OK(pbd_world_set_solver(w[k], PBD_SOLVER_XPBD, 1, 2));
        float x[3] = {PBD_MAX_COORDINATE, 1, 0}, v[3] = {3e38f, 0, 0};
        pbd_range r = {40, 1};
        CHECK_OK(pbd_particles_set_positions(w[k], r, x));
        CHECK_OK(pbd_particles_set_velocities(w[k], r, v));
        CHECK_RESULT(pbd_world_step(w[k], 0.5f), PBD_ERROR_NOT_FINITE);
        snprintf(msg[k], sizeof msg[k], "%s", pbd_world_last_error(w[k]));
    }
    CHECK_MSG(!strcmp(msg[0], msg[1]), "CPU: %s; GPU: %s", msg[0], msg[1]);
    CHECK(same_bits("after the rollback", 0, w[0], w[1]));
    for (int k = 0; k < 2; ++k) {
        float x[3] = {0, 1, 0}, v[3] = {0, 0, 0};
        pbd_range r = {40, 1};
        CHECK_OK(pbd_particles_set_positions(w[k], r, x));
        CHECK_OK(pbd_particles_set_velocities(w[k], r, v));
        CHECK_OK(pbd_world_step(w[k], 1.0f / 60.0f));
    }
    CHECK(same_bits("a step after the rollback", 1, w[0], w[1]));
done:
    pbd_world_destroy(w[0]);
    pbd_world_destroy(w[1]);
}

/* What a fluid leaves besides positions and velocities is the CPU's too:
   the neighbour lists, the densities, a query's particles, the pressures
   and coupled flags in a snapshot (the same bytes), and a GPU world's
   snapshot runs on in a CPU world with the same bits (the queries mark
   nothing for upload: the GPU world steps on from its device state). */
TEST(cuda_fluid_lists_densities_and_snapshots_match_the_cpu) {
    NEEDS_GPU();
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU), *again = world_on(PBD_DEVICE_CPU);
    if (!cpu || !gpu || !again) goto done;
    build_fluid(cpu);
    build_fluid(gpu);
    for (int k = 0; k < 12; ++k) {
        frame_fluid(cpu, k);
        frame_fluid(gpu, k);
        CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
        CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
    }
    CHECK(same_bits("fluid", 12, cpu, gpu));
    {
        int n = pbd_world_particle_count(cpu), lists = 0, a[PBD_MAX_NEIGHBORS], b[PBD_MAX_NEIGHBORS], na, nb;
        for (int i = 0; i < n; ++i) {
            CHECK_OK(pbd_world_particle_neighbors(cpu, i, a, PBD_MAX_NEIGHBORS, &na));
            CHECK_OK(pbd_world_particle_neighbors(gpu, i, b, PBD_MAX_NEIGHBORS, &nb));
            lists += na > 0;
            if (na != nb || memcmp(a, b, sizeof(int) * (size_t)na)) {
                CHECK_MSG(0, "particle %d: %d neighbours on the CPU, %d on the GPU, or other ones", i, na, nb);
                break;
            }
        }
        CHECK_MSG(lists > n / 2, "only %d of %d particles have neighbours", lists, n);
        int count = 14 * 10 * 14, ca = 0, cb = 0;
        float *da = (float *)malloc(sizeof(float) * (size_t)count),
              *db = (float *)malloc(sizeof(float) * (size_t)count);
        CHECK_OK(pbd_fluid_densities(cpu, fluid_handle, da, count, &ca));
        CHECK_OK(pbd_fluid_densities(gpu, fluid_handle, db, count, &cb));
        CHECK(ca == count && cb == count && !memcmp(da, db, sizeof(float) * (size_t)count));
        free(da);
        free(db);
        float q[3] = {0, 0.2f, 0};
        int qa[256], qb[256], fa = 0, fb = 0;
        CHECK_OK(pbd_world_query_particles(cpu, q, 0.12f, qa, 256, &fa));
        CHECK_OK(pbd_world_query_particles(gpu, q, 0.12f, qb, 256, &fb));
        CHECK_MSG(fa > 10 && fa == fb && !memcmp(qa, qb, sizeof(int) * (size_t)(fa < 256 ? fa : 256)),
                  "query: %d particles on the CPU, %d on the GPU", fa, fb);
        size_t sa = pbd_world_snapshot_size(cpu), sb = pbd_world_snapshot_size(gpu);
        void *snap_a = malloc(sa), *snap_b = malloc(sb);
        CHECK_OK(pbd_world_save(cpu, snap_a, sa));
        CHECK_OK(pbd_world_save(gpu, snap_b, sb));
        CHECK_MSG(sa == sb && !memcmp(snap_a, snap_b, sa), "the snapshots differ");
        CHECK_OK(pbd_world_restore(again, snap_b, sb));
        for (int k = 12; k < 24; ++k) {
            frame_fluid(gpu, k);
            frame_fluid(again, k);
            CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
            CHECK_OK(pbd_world_step(again, 1.0f / 60.0f));
        }
        CHECK(same_bits("a GPU world's snapshot on the CPU", 24, again, gpu));
        free(snap_a);
        free(snap_b);
    }
done:
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
    pbd_world_destroy(again);
}

/* A user plugin (host code) with every callback: a floor in `project`, a
   nudge at the substep's start, a drag at its end, and a record of what
   the world shows it (a contact's push, positions and velocities) that a
   rollback puts back. */
typedef struct rec_plugin {
    double sum, kept; /* the record, and begin_step's copy */
    int calls[7];
} rec_plugin;
static void rp_begin_step(void *u, pbd_world *w, float dt) {
    rec_plugin *r = (rec_plugin *)u;
    r->kept = r->sum;
    r->calls[0]++;
    r->sum += (double)pbd_world_positions(w)[4 * 5 + 1] * dt;
}
static void rp_begin_substep(void *u, const pbd_solve_context *c) {
    ((rec_plugin *)u)->calls[1]++;
    c->p[4 * 7 + 1] += 0.0005f;
}
static void rp_project(void *u, const pbd_solve_context *c) {
    ((rec_plugin *)u)->calls[2]++;
    for (int i = 0; i < c->particle_count; ++i)
        if (c->p[4 * i + 3] > 0 && c->p[4 * i + 1] < 0.3f) c->p[4 * i + 1] = 0.3f;
}
static void rp_after_contacts(void *u, const pbd_solve_context *c) {
    rec_plugin *r = (rec_plugin *)u;
    r->calls[3]++;
    for (int i = 0; i < c->particle_count; ++i) r->sum += pbd_world_particle_contact_push(c->world, i);
}
static void rp_end_substep(void *u, const pbd_solve_context *c) {
    ((rec_plugin *)u)->calls[4]++;
    for (int i = 0; i < 4 * c->particle_count; ++i) c->v[i] *= 0.995f;
}
static void rp_end_step(void *u, pbd_world *w, float dt) {
    rec_plugin *r = (rec_plugin *)u;
    r->calls[5]++;
    r->sum += (double)pbd_world_velocities(w)[4 * 9] * dt;
}
static void rp_rollback(void *u, pbd_world *w) {
    (void)w;
    rec_plugin *r = (rec_plugin *)u;
    r->sum = r->kept;
    r->calls[6]++;
}

/* A random sequence of calls between steps (setters of every kind, reads,
   snapshots and restores, adds and removals, switches on and off), the same in a CPU
   world and a GPU world: the same results and, after every step, the same
   bits. What a GPU world keeps in step with its host copy (uploads,
   fetches, what each call marks) meets every order of calls here. */
static pbd_surface random_surface;
typedef struct rnd_op {
    int kind, i, k;
    float f[4];
} rnd_op;
static pbd_result apply_op(pbd_world *w, const rnd_op *o, unsigned char *snap, size_t *snap_size) {
    int n = pbd_world_particle_count(w), i = n > 0 ? o->i % n : 0;
    pbd_range one = {i, 1};
    switch (o->kind) {
        case 0: return pbd_particles_set_velocities(w, one, o->f);
        case 1: return pbd_particles_set_positions(w, one, o->f);
        case 2: return o->k & 1 ? pbd_particle_pin(w, i) : pbd_particle_unpin(w, i);
        case 3: {
            pbd_result r = pbd_particle_set_kinematic(w, i, o->k & 1);
            return r != PBD_OK || !(o->k & 1) ? r : pbd_particle_set_kinematic_target(w, i, o->f);
        }
        case 4: {
            float q[4] = {0, o->f[3], 0, 1};
            float l = sqrtf(q[1] * q[1] + 1);
            q[1] /= l;
            q[3] /= l;
            return pbd_collider_set_pose(w, pbd_world_collider(w, 1 + o->k % 3), o->f, q);
        }
        case 5: {
            float g[3] = {o->f[0], -9.81f + o->f[1], o->f[2]};
            return pbd_world_set_gravity(w, g);
        }
        case 6: return pbd_world_set_solver(w, o->k & 1 ? PBD_SOLVER_PBD : PBD_SOLVER_XPBD, 1 + o->k % 3, 1 + o->k % 5);
        case 7: return pbd_world_set_jacobi(w, o->k & 1, 1.2f);
        case 8:
            return pbd_group_set_compliance(w, pbd_world_group(w, o->k % pbd_world_group_count(w)), 1e-6f * o->f[3]);
        case 9: return pbd_group_set_enabled(w, pbd_world_group(w, o->k % pbd_world_group_count(w)), o->k & 1);
        case 10: return pbd_object_set_particle_contact(w, pbd_world_object(w, 0), o->k & 1);
        case 11: return pbd_fluid_set_viscosity(w, fluid_handle, 0.05f * fabsf(o->f[3]), 0.01f * (float)(o->k & 1));
        case 12: return pbd_world_set_point_damping(w, fabsf(o->f[3]));
        case 13: *snap_size = pbd_world_snapshot_size(w); return pbd_world_save(w, snap, *snap_size);
        case 14: return *snap_size ? pbd_world_restore(w, snap, *snap_size) : PBD_OK;
        case 15: {
            int nb[PBD_MAX_NEIGHBORS], c = 0, q[64];
            pbd_result r = pbd_world_particle_neighbors(w, i, nb, PBD_MAX_NEIGHBORS, &c);
            if (r == PBD_OK) r = pbd_world_self_contacts(w, q, 16, &c, NULL);
            return r != PBD_OK ? r : (pbd_result)(c + 1000 * pbd_world_self_contact_count(w) > 1000000);
        }
        case 16: return pbd_particle_set_mass(w, i, 0.01f + fabsf(o->f[3]));
        case 17: {
            pbd_result r = pbd_object_set_damping(w, pbd_world_object(w, 0), fabsf(o->f[3]));
            return r != PBD_OK ? r : pbd_object_set_drag(w, pbd_world_object(w, 0), 0.5f * fabsf(o->f[3]));
        }
        case 18: return pbd_world_set_acceleration_field(w, o->k & 1 ? gusts : NULL, NULL);
        case 19: {
            pbd_particles_desc pd = pbd_particles_desc_default();
            pd.positions = o->f;
            pd.count = 1;
            pd.radius = 0.02f;
            pbd_range r;
            pbd_result res = pbd_add_particles(w, &pd, &r);
            return res != PBD_OK ? res : pbd_particles_set_particle_contact(w, r, 1);
        }
        case 20: return pbd_world_set_particle_contact_friction(w, 0.6f, 0.3f * fabsf(o->f[3]));
        case 21: return o->k % 2 ? PBD_OK : pbd_remove_fluid(w, fluid_handle); /* now and then: then it is gone */
        default: return o->k % 2 ? PBD_OK : pbd_remove_collision_surface(w, random_surface);
    }
}

TEST(cuda_random_calls_between_steps_keep_the_cpu_worlds_bits) {
    NEEDS_GPU();
    enum { STEPS = 50, SNAP = 4 << 20 };
    unsigned char *snap[2] = {(unsigned char *)malloc(SNAP), (unsigned char *)malloc(SNAP)};
    for (unsigned seed = 1; seed <= 2; ++seed) {
        pbd__cuda_emulate_seed(seed);
        pbd_world *w[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
        size_t size[2] = {0, 0};
        unsigned rng = 12345u * seed;
        if (!w[0] || !w[1]) goto next;
        for (int k = 0; k < 2; ++k) { /* cloth on colliders, a fluid, a self-colliding cloth; grains come later */
            build_cloth(w[k]);
            float o[3] = {-0.2f, 1.2f, -0.2f};
            float *p = pbdt_lattice(6, 4, 6, 0.05f, o);
            pbd_fluid_desc fd = pbd_fluid_desc_default();
            fd.positions = p;
            fd.count = 6 * 4 * 6;
            CHECK_OK(pbd_add_fluid(w[k], &fd, &fluid_handle, NULL));
            free(p);
            float c0[3] = {0.1f, 1.5f, 0.1f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
            pbd_mesh m;
            pbd_object sc;
            CHECK_OK(pbd_mesh_grid(8, 8, c0, u, v, &m));
            pbd_cloth_desc cd = pbdt_cloth_desc(&m);
            CHECK_OK(pbd_add_cloth(w[k], &cd, &sc));
            CHECK_OK(pbd_add_cloth_self_collision(w[k], sc, &cd, 0.01f, &random_surface));
            pbd_mesh_free(&m);
        }
        for (int s = 0; s < STEPS; ++s) {
            int ops = (int)(pbdt_rand(&rng) * 4.0f);
            for (int j = 0; j < ops; ++j) {
                rnd_op o;
                o.kind = (int)(pbdt_rand(&rng) * 23.0f);
                o.i = (int)(pbdt_rand(&rng) * 100000.0f);
                o.k = (int)(pbdt_rand(&rng) * 1000.0f);
                for (int c = 0; c < 4; ++c) o.f[c] = pbdt_rand(&rng) - 0.5f;
                o.f[1] += 0.8f; /* positions above the ground */
                pbd_result r0 = apply_op(w[0], &o, snap[0], &size[0]), r1 = apply_op(w[1], &o, snap[1], &size[1]);
                CHECK_MSG(r0 == r1, "step %d, call %d: %d on the CPU, %d on the GPU", s, o.kind, (int)r0, (int)r1);
                if (o.kind == 13)
                    CHECK_MSG(size[0] == size[1] && !memcmp(snap[0], snap[1], size[0]), "step %d: the snapshots differ",
                              s);
            }
            pbd_result r0 = pbd_world_step(w[0], 1.0f / 60.0f), r1 = pbd_world_step(w[1], 1.0f / 60.0f);
            CHECK_MSG(r0 == r1, "step %d: %d on the CPU, %d on the GPU", s, (int)r0, (int)r1);
            if (!same_bits("random calls", s, w[0], w[1])) break;
        }
    next:
        pbd_world_destroy(w[0]);
        pbd_world_destroy(w[1]);
    }
    free(snap[0]);
    free(snap[1]);
}

/* A GPU world runs a plugin's callbacks on the host, around its kernels:
   the same bits and the same record as a CPU world, through a rollback. */
TEST(cuda_a_user_plugin_runs_on_the_host_with_the_cpu_worlds_bits) {
    NEEDS_GPU();
    for (int seed = 0; seed < 2; ++seed) {
        pbd__cuda_emulate_seed(seed ? 0x9e3779b9u : 1u);
        pbd_world *w[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
        rec_plugin rec[2];
        memset(rec, 0, sizeof rec);
        if (!w[0] || !w[1]) goto next;
        for (int k = 0; k < 2; ++k) {
            build_cloth(w[k]);
            pbd_plugin_desc d = pbd_plugin_desc_default();
            d.user = &rec[k];
            d.particle_end = pbd_world_particle_count(w[k]);
            d.begin_step = rp_begin_step;
            d.begin_substep = rp_begin_substep;
            d.project = rp_project;
            d.project_after_contacts = rp_after_contacts;
            d.end_substep = rp_end_substep;
            d.end_step = rp_end_step;
            d.rollback = rp_rollback;
            CHECK_OK(pbd_add_plugin(w[k], &d, NULL));
        }
        for (int s = 0; s < 40; ++s) {
            for (int k = 0; k < 2; ++k) {
                frame_cloth(w[k], s);
                if (s == 25) { /* a step that fails: the world and the record go back */
                    float v[3] = {3e38f, 3e38f, 0};
                    pbd_range r = {40, 1};
                    CHECK_OK(pbd_particles_set_velocities(w[k], r, v));
                    CHECK_RESULT(pbd_world_step(w[k], 1.0f / 60.0f), PBD_ERROR_NOT_FINITE);
                    float z[3] = {0, 0, 0};
                    CHECK_OK(pbd_particles_set_velocities(w[k], r, z));
                }
                CHECK_OK(pbd_world_step(w[k], 1.0f / 60.0f));
            }
            if (!same_bits("a user plugin", s, w[0], w[1])) break;
        }
        CHECK_MSG(rec[0].sum == rec[1].sum, "the records differ: %.17g vs %.17g", rec[0].sum, rec[1].sum);
        CHECK(!memcmp(rec[0].calls, rec[1].calls, sizeof rec[0].calls));
        CHECK(rec[1].calls[6] == 1 && rec[1].calls[2] > 0 && rec[1].sum != 0);
    next:
        pbd_world_destroy(w[0]);
        pbd_world_destroy(w[1]);
    }
}

/* A step the world refuses (PBD_ERROR_NOT_FINITE, the world put back as
   it was before the step; pbd.h, CONVENTIONS): particle i's velocity
   -FLT_MAX under an acceleration field of -3e38 m/s^2 on it (a field runs
   on the host, for CPU and GPU worlds alike) leaves float's range in the
   prediction. (A particle cannot be
   put at 3e38 m any more: positions are bounded by PBD_MAX_COORDINATE,
   gravity by PBD_MAX_GRAVITY; pbd_sm.h's sums in double take a fast
   particle in their stride.) The field is taken off after. */
static void refusing_field(void *user, int particle, const float *x, const float *v, double time, float *a) {
    (void)x;
    (void)v;
    (void)time;
    a[0] = a[2] = 0;
    a[1] = particle == *(const int *)user ? -3e38f : 0.0f;
}
static void refused_step(pbd_world *w, int i) {
    float v[3] = {0, -FLT_MAX, 0}, v0[3];
    pbd_range one = {i, 1};
    CHECK_OK(pbd_particles_get_velocities(w, one, v0));
    CHECK_OK(pbd_particles_set_velocities(w, one, v));
    CHECK_OK(pbd_world_set_acceleration_field(w, refusing_field, &i));
    CHECK_RESULT(pbd_world_step(w, 0.5f), PBD_ERROR_NOT_FINITE);
    CHECK_OK(pbd_world_set_acceleration_field(w, NULL, NULL));
    CHECK_OK(pbd_particles_set_velocities(w, one, v0));
}

/* A multi-resolution cloth on a GPU world: its coarse levels' positions
   (pbd_sm_cloth_level) are the device's, the CPU world's bits; its
   removal frees it while the world steps on. */
TEST(cuda_a_multires_cloth_reads_and_goes_on_a_gpu_world) {
    NEEDS_GPU();
    pbd_world *ws[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
    pbd_sm_cloth cl[2];
    if (!ws[0] || !ws[1]) goto done;
    for (int k = 0; k < 2; ++k) {
        build_multires(ws[k], 0, PBD_SM_CLOTH_INDEPENDENT_SETS);
        cl[k] = mr_cloth;
        for (int s = 0; s < 15; ++s) CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
        /* a non-finite step puts the coarse levels back too (as on the
           CPU), so the world's snapshot still loads */
        size_t n0 = 0, n1 = 0;
        unsigned char *before = pbdt_save(ws[k], &n0);
        refused_step(ws[k], 20);
        unsigned char *after = pbdt_save(ws[k], &n1);
        CHECK_MSG(n0 == n1 && n0 > 0 && !memcmp(before, after, n0), "world %d", k);
        CHECK_OK(pbd_world_restore(ws[k], after, n1));
        free(before);
        free(after);
    }
    for (int l = 0; l < 4; ++l) {
        int nv[2] = {0, 1};
        const float *x[2] = {NULL, NULL};
        for (int k = 0; k < 2; ++k) CHECK_OK(pbd_sm_cloth_level(ws[k], cl[k], l, &nv[k], NULL, NULL, &x[k]));
        CHECK_MSG(nv[0] == nv[1] && x[0] && x[1] && !memcmp(x[0], x[1], sizeof(float) * 4 * (size_t)nv[0]), "level %d",
                  l);
    }
    for (int k = 0; k < 2; ++k) {
        CHECK_OK(pbd_sm_remove_cloth(ws[k], cl[k]));
        CHECK(pbd_world_plugin_count(ws[k]) == 0);
        CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
    }
    same_bits("a cloth removed", 0, ws[0], ws[1]);
done:
    pbd_world_destroy(ws[0]);
    pbd_world_destroy(ws[1]);
}

/* pbd_sm.h's states in a GPU world's snapshot (pbd.h, PLUGIN STATE IN
   SNAPSHOTS): the plant, the plastic jelly and rigid boxes, the
   multi-resolution cloth and the surface volume in one world, saved
   mid-run after setters (a GPU world's save fetches the device's states:
   the plugins' states in its snapshot are the CPU world's, byte for
   byte), then restored (a) into the same GPU world, (b) into a GPU world
   rebuilt the same way and (c) into a rebuilt CPU world (a device move):
   each goes on with the CPU world's bits and ends with its states. */
static void build_sm_all(pbd_world *w) {
    build_oriented(w); /* first: its frames lead particle 9 */
    build_sm_bodies(w);
    build_multires_sets(w);
    build_volume(w);
}
static void frame_sm_all(pbd_world *w, int k) {
    frame_oriented(w, k);
    frame_sm_bodies(w, k);
    frame_multires(w, k);
    frame_volume(w, k);
}
static void steps_sm_all(pbd_world *w, int from, int to) {
    for (int k = from; k < to; ++k) {
        frame_sm_all(w, k);
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    }
}
/* Whether a and b hold the same plugin states: their snapshots' ends
   from the first state's head (the count before the first
   "pbd_sm" name) to the checksum. (The rest of a GPU world's snapshot
   may differ from a CPU world's where the device keeps what the host
   does not read: the fluids' pressure substep when there are none.) */
static long states_at(const unsigned char *b, size_t n) {
    for (size_t i = 4; i + 6 <= n; ++i)
        if (!memcmp(b + i, "pbd_sm", 6)) return (long)i - 4;
    return -1;
}
static int same_states(const char *what, const pbd_world *a, const pbd_world *b) {
    size_t na = 0, nb = 0;
    unsigned char *sa = pbdt_save(a, &na), *sb = pbdt_save(b, &nb);
    long ia = states_at(sa, na), ib = states_at(sb, nb);
    int same = ia > 0 && na - (size_t)ia == nb - (size_t)ib && !memcmp(sa + ia, sb + ib, na - (size_t)ia - 8);
    CHECK_MSG(same, "%s: the plugins' states differ", what);
    free(sa);
    free(sb);
    return same;
}
static void sm_states_in_snapshots(unsigned seed) {
    enum { AT = 24, ON = 10 };
    pbd__cuda_emulate_seed(seed);
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU), *w = NULL;
    unsigned char *snap = NULL;
    size_t size = 0;
    if (!cpu || !gpu) goto done;
    build_sm_all(cpu);
    build_sm_all(gpu);
    steps_sm_all(cpu, 0, AT);
    steps_sm_all(gpu, 0, AT);
    snap = pbdt_save(gpu, &size);
    if (!same_states("saved mid-run", gpu, cpu)) goto done;
    steps_sm_all(cpu, AT, AT + ON); /* the reference */
    for (int k = 0; k < 3; ++k) {
        const char *what[3] = {"(a) the same GPU world", "(b) a rebuilt GPU world", "(c) a rebuilt CPU world"};
        if (k > 0) {
            w = world_on(k == 1 ? PBD_DEVICE_GPU : PBD_DEVICE_CPU);
            if (!w) break;
            build_sm_all(w);
        }
        pbd_world *t = k == 0 ? gpu : w;
        CHECK_OK(pbd_world_restore(t, snap, size));
        steps_sm_all(t, AT, AT + ON);
        if (same_bits(what[k], AT + ON, t, cpu)) same_states(what[k], t, cpu);
        if (k > 0) pbd_world_destroy(w);
        w = NULL;
    }
done:
    free(snap);
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
}
TEST(cuda_sm_states_in_snapshots_go_on_with_the_cpu_worlds_bits) {
    NEEDS_GPU();
    sm_states_in_snapshots(1u);
    if (ORDERS > 1) sm_states_in_snapshots(0x9e3779b9u);
}

/* A wrinkle mesh whose fine cloth is a GPU world (pbd_up_wrinkle_desc.device):
   the Loop-subdivided sphere on its squeezed, moving coarse icosahedron,
   one-sided (the projection a device plugin), gives the CPU wrinkle
   mesh's fine positions bit for bit, frame after frame, and keeps every
   fine vertex outside the coarse mesh. */
TEST(cuda_a_wrinkle_mesh_solves_on_a_gpu_world) {
    NEEDS_GPU();
    pbd_mesh s, f;
    float c[3] = {0, 0, 0};
    CHECK_OK(pbd_mesh_sphere(0, c, 1.0f, &s));
    CHECK_OK(pbd_up_mesh_subdivide(&s, 2, 1, &f));
    float *cx = (float *)malloc(sizeof(float) * 3 * (size_t)s.vertex_count);
    float *x[2] = {(float *)malloc(sizeof(float) * 3 * (size_t)f.vertex_count),
                   (float *)malloc(sizeof(float) * 3 * (size_t)f.vertex_count)};
    pbd_up_wrinkle *wr[2] = {NULL, NULL};
    for (int k = 0; k < 2; ++k) {
        pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&s, &f);
        d.one_sided = 1;
        d.device = k ? PBD_DEVICE_GPU : PBD_DEVICE_CPU;
        CHECK_OK(pbd_up_wrinkle_create(&d, &wr[k]));
    }
    if (wr[0] && wr[1]) {
        CHECK(pbd_world_device(pbd_up_wrinkle_world(wr[1])) == PBD_DEVICE_GPU);
        for (int frame = 0; frame < 8; ++frame) {
            float t = 0.05f * (float)frame;
            for (int i = 0; i < s.vertex_count; ++i) {
                cx[3 * i] = (1 + 0.5f * t) * s.positions[3 * i] + 0.1f * t;
                cx[3 * i + 1] = (1 - t) * s.positions[3 * i + 1];
                cx[3 * i + 2] = s.positions[3 * i + 2];
            }
            for (int k = 0; k < 2; ++k) CHECK_OK(pbd_up_wrinkle_update(wr[k], cx, x[k]));
            CHECK_MSG(!memcmp(x[0], x[1], sizeof(float) * 3 * (size_t)f.vertex_count), "frame %d", frame);
        }
        int inside = 0;
        float *n = (float *)malloc(sizeof(float) * 3 * (size_t)f.vertex_count),
              *a = (float *)malloc(sizeof(float) * 3 * (size_t)f.vertex_count),
              *q = (float *)malloc(sizeof(float) * 3 * (size_t)f.vertex_count);
        CHECK_OK(pbd_up_wrinkle_targets(wr[1], q, a, n));
        for (int i = 0; i < f.vertex_count; ++i) { /* outside its coarse triangle's plane (the one-sided bound) */
            float d = 0;
            for (int k = 0; k < 3; ++k) d += (x[1][3 * i + k] - a[3 * i + k]) * n[3 * i + k];
            inside += d < -1e-5f;
        }
        CHECK_MSG(inside == 0, "%d fine vertices inside their coarse triangle's plane", inside);
        free(n);
        free(a);
        free(q);
    }
    pbd_up_wrinkle_destroy(wr[0]);
    pbd_up_wrinkle_destroy(wr[1]);
    free(cx);
    free(x[0]);
    free(x[1]);
    pbd_mesh_free(&s);
    pbd_mesh_free(&f);
}

/* Oriented particles on a GPU world: the getters (orientations, angular
   velocities, the rotational energy, a skin on them) read what the
   device computed, with the CPU world's bits; a non-finite step puts them
   back as on the CPU; a removal frees the set while the world steps on. */
TEST(cuda_oriented_particles_read_roll_back_and_go_on_a_gpu_world) {
    NEEDS_GPU();
    pbd_world *ws[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
    pbd_sm_oriented set[2];
    pbd_sm_skin *skin[2] = {NULL, NULL};
    float mesh[3 * 40], out[2][3 * 40];
    plant_mesh(mesh, 40);
    if (!ws[0] || !ws[1]) goto done;
    for (int k = 0; k < 2; ++k) {
        build_oriented(ws[k]);
        set[k] = plant;
        skin[k] = plant_skin(ws[k], mesh, 40, NULL, NULL);
        for (int s = 0; s < 20; ++s) {
            frame_oriented(ws[k], s);
            CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
        }
    }
    for (int pass = 0; pass < 2; ++pass) {
        float turned = 0;
        for (int i = 0; i < 16; ++i) {
            float q[2][4], om[2][3];
            for (int k = 0; k < 2; ++k) CHECK_OK(pbd_sm_oriented_get_state(ws[k], set[k], i, q[k], om[k]));
            CHECK_MSG(!memcmp(q[0], q[1], sizeof q[0]) && !memcmp(om[0], om[1], sizeof om[0]), "pass %d, particle %d",
                      pass, i);
            turned += fabsf(q[0][3]) < 0.99f;
        }
        double e[2] = {0, 1};
        for (int k = 0; k < 2; ++k) {
            CHECK_OK(pbd_sm_oriented_rotational_energy(ws[k], set[k], &e[k]));
            CHECK_OK(pbd_sm_skin_apply(skin[k], ws[k], out[k]));
        }
        CHECK(!memcmp(&e[0], &e[1], sizeof e[0]) && !memcmp(out[0], out[1], sizeof out[0]));
        if (pass == 0) { /* a non-finite step: back to the step's start */
            CHECK_MSG(turned > 3, "%g of 16 orientations turned", (double)turned);
            for (int k = 0; k < 2; ++k) refused_step(ws[k], 5);
        }
        same_bits("oriented particles", pass, ws[0], ws[1]);
    }
    for (int k = 0; k < 2; ++k) {
        pbd_sm_skin_destroy(skin[k]);
        CHECK_OK(pbd_sm_remove_oriented(ws[k], set[k]));
        CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
    }
    same_bits("oriented particles removed", 2, ws[0], ws[1]);
done:
    pbd_world_destroy(ws[0]);
    pbd_world_destroy(ws[1]);
}

/* A skin on a GPU world's oriented particles evaluates on the device
   (pbd_sm_skin_apply_world: one thread per vertex into a device array)
   with the bits of pbd_sm_skin_apply on the CPU world, frame after frame,
   in two launch orders: nearest-particle weights, and bones given with
   unused slots and uneven weights. On the CPU world it gives
   pbd_sm_skin_apply's vertices in a host array. Bad input changes
   nothing; a removed set is refused. */
TEST(cuda_a_skin_evaluates_on_the_device) {
    NEEDS_GPU();
    enum { NV = 40 };
    float mesh[3 * NV], wts[4 * NV], host[3 * NV], dev[3 * NV];
    int bones[4 * NV];
    plant_mesh(mesh, NV);
    for (int v = 0; v < NV; ++v) {
        int b[4] = {v % 16, (v + 5) % 16, -1, (7 * v + 3) % 16};
        float wt[4] = {1.0f, 0.5f + 0.01f * (float)v, 3.0f, 0.25f};
        for (int k = 0; k < 4; ++k) bones[4 * v + k] = b[k], wts[4 * v + k] = wt[k];
    }
    for (int order = 0; order < ORDERS; ++order) {
        pbd__cuda_emulate_seed(order ? 0x9e3779b9u : 1u);
        pbd_world *ws[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
        pbd_sm_skin *sk[2][2] = {{NULL, NULL}, {NULL, NULL}};
        pbd_sm_oriented set[2];
        float moved = 0;
        if (!ws[0] || !ws[1]) goto next;
        for (int k = 0; k < 2; ++k) {
            build_oriented(ws[k]);
            set[k] = plant;
            sk[k][0] = plant_skin(ws[k], mesh, NV, NULL, NULL);
            sk[k][1] = plant_skin(ws[k], mesh, NV, bones, wts);
        }
        if (!sk[0][0] || !sk[0][1] || !sk[1][0] || !sk[1][1]) goto next;
        for (int frame = 0; frame < 24; ++frame) {
            for (int k = 0; k < 2; ++k) {
                frame_oriented(ws[k], frame);
                CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
            }
            for (int j = 0; j < 2; ++j) {
                const float *d = NULL, *c = NULL;
                CHECK_OK(pbd_sm_skin_apply_world(sk[1][j], ws[1], &d));
                CHECK_OK(pbd_sm_skin_apply(sk[0][j], ws[0], host));
                if (d) pbd__cuda_read(dev, d, sizeof dev);
                CHECK_MSG(d && !memcmp(dev, host, sizeof dev), "order %d, frame %d, skin %d", order, frame, j);
                CHECK_OK(pbd_sm_skin_apply_world(sk[0][j], ws[0], &c)); /* the CPU world: a host array */
                CHECK(c && !memcmp(c, host, sizeof host));
            }
        }
        for (int i = 0; i < 3 * NV; ++i) moved = fmaxf(moved, fabsf(host[i] - mesh[i]));
        CHECK_MSG(moved > 0.05f, "the skin moved at most %g m", (double)moved);
        {
            size_t n0 = 0, n1 = 0;
            unsigned char *before = pbdt_save(ws[1], &n0);
            const float keep[1] = {0}, *out = keep;
            CHECK_RESULT(pbd_sm_skin_apply_world(NULL, ws[1], &out), PBD_ERROR_NULL_POINTER);
            CHECK_RESULT(pbd_sm_skin_apply_world(sk[1][0], NULL, &out), PBD_ERROR_NULL_POINTER);
            CHECK_RESULT(pbd_sm_skin_apply_world(sk[1][0], ws[1], NULL), PBD_ERROR_NULL_POINTER);
            CHECK_RESULT(pbd_sm_skin_apply_world(sk[1][0], ws[0], &out), PBD_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(pbd_world_last_error(ws[0]), "another world") != NULL);
            CHECK_RESULT(pbd_sm_skin_apply_world(sk[0][0], ws[1], &out), PBD_ERROR_INVALID_ARGUMENT);
            unsigned char *after = pbdt_save(ws[1], &n1);
            CHECK(out == keep && n0 > 0 && n1 == n0 && !memcmp(before, after, n0));
            free(before);
            free(after);
            CHECK_OK(pbd_sm_remove_oriented(ws[1], set[1]));
            CHECK_RESULT(pbd_sm_skin_apply_world(sk[1][1], ws[1], &out), PBD_ERROR_INVALID_HANDLE);
            CHECK(out == keep);
        }
    next:
        pbd_world_destroy(ws[0]);
        pbd_world_destroy(ws[1]);
        for (int k = 0; k < 4; ++k) pbd_sm_skin_destroy(sk[k / 2][k % 2]); /* a skin outlives its world */
    }
}

/* A wrinkle mesh on the GPU follows a coarse GPU world's device particles
   (pbd_up_wrinkle_update_world: the normals and targets by kernels, the
   fine positions a device array) with the bits of a CPU wrinkle mesh
   updated from the CPU world's positions (pbd_up_wrinkle_update), frame
   after frame, in two launch orders: a closed coarse cloth (after 3 other
   particles) falling and crumpling on the ground, one-sided. Host
   updates between device updates keep the bits; the targets read back;
   the fine world's host copy of the targets is current (a change and a
   step of the fine world). A CPU wrinkle mesh takes either coarse world
   (host arrays). Bad input changes nothing. */
TEST(cuda_a_wrinkle_mesh_follows_a_gpu_coarse_world) {
    NEEDS_GPU();
    pbd_mesh s, f;
    float c[3] = {0, 0.4f, 0};
    CHECK_OK(pbd_mesh_sphere(0, c, 0.3f, &s));
    CHECK_OK(pbd_up_mesh_subdivide(&s, 2, 1, &f));
    size_t nf3 = 3 * (size_t)f.vertex_count;
    float *cx = (float *)malloc(sizeof(float) * 3 * (size_t)s.vertex_count);
    float *ref = (float *)malloc(sizeof(float) * nf3), *got = (float *)malloc(sizeof(float) * nf3);
    float *t[2][3];
    for (int k = 0; k < 6; ++k) t[k / 3][k % 3] = (float *)malloc(sizeof(float) * nf3);
    for (int order = 0; order < ORDERS; ++order) {
        pbd__cuda_emulate_seed(order ? 0x9e3779b9u : 1u);
        pbd_world *ws[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
        pbd_up_wrinkle *wr[4] = {NULL, NULL, NULL, NULL};
        int first = 0, nc = s.vertex_count, n = 0;
        if (!ws[0] || !ws[1]) goto next;
        for (int k = 0; k < 2; ++k) {
            ground(ws[k]);
            float three[9] = {2, 0.1f, 0, 2.2f, 0.1f, 0, 2.4f, 0.1f, 0};
            pbd_particles_desc pd = pbd_particles_desc_default();
            pd.positions = three;
            pd.count = 3;
            CHECK_OK(pbd_add_particles(ws[k], &pd, NULL));
            pbd_cloth_desc cd = pbdt_cloth_desc(&s);
            pbd_object o = {0};
            CHECK_OK(pbd_add_cloth(ws[k], &cd, &o));
            first = pbdt_parts(ws[k], o).particles.first;
        }
        CHECK(first == 3);
        n = pbd_world_particle_count(ws[1]);
        for (int k = 0; k < 4; ++k) { /* 0: host updates; 1: on the GPU; 2, 3: CPU, from either world */
            pbd_up_wrinkle_desc d = pbdt_wrinkle_desc(&s, &f);
            d.one_sided = 1;
            d.device = k == 1 ? PBD_DEVICE_GPU : PBD_DEVICE_CPU;
            CHECK_OK(pbd_up_wrinkle_create(&d, &wr[k]));
        }
        if (!wr[0] || !wr[1] || !wr[2] || !wr[3]) goto next;
        for (int frame = 0; frame < 14; ++frame) {
            for (int k = 0; k < 2; ++k) {
                CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
                if (frame == 6 || frame == 8) { /* coarse triangle 0 collapses: it keeps its last normal, */
                    const float *a = pbd_world_positions(ws[k]) + 4 * (first + s.triangles[0]);
                    float at[3] = {a[0], a[1], a[2]}; /* which the device (6) or the host (8) made */
                    pbd_range b = {first + s.triangles[1], 1};
                    CHECK_OK(pbd_particles_set_positions(ws[k], b, at));
                }
            }
            const float *x = pbd_world_positions(ws[0]), *d = NULL, *h = NULL;
            for (int i = 0; i < nc; ++i)
                for (int k = 0; k < 3; ++k) cx[3 * i + k] = x[4 * (first + i) + k];
            CHECK_OK(pbd_up_wrinkle_update(wr[0], cx, ref));
            if (frame == 6 || frame == 7) { /* host updates between device updates */
                CHECK_OK(pbd_up_wrinkle_update(wr[1], cx, got));
            } else {
                CHECK_OK(pbd_up_wrinkle_update_world(wr[1], ws[1], first, &d));
                if (d) pbd__cuda_read(got, d, sizeof(float) * nf3);
            }
            CHECK_MSG(!memcmp(got, ref, sizeof(float) * nf3), "order %d, frame %d", order, frame);
            CHECK_OK(pbd_up_wrinkle_update_world(wr[2], ws[0], first, &h));
            CHECK_MSG(h && !memcmp(h, ref, sizeof(float) * nf3), "the CPU fallback, frame %d", frame);
            CHECK_OK(pbd_up_wrinkle_update_world(wr[3], ws[1], first, &h));
            CHECK_MSG(h && !memcmp(h, ref, sizeof(float) * nf3), "a CPU wrinkle mesh on the GPU world, frame %d",
                      frame);
            if (frame % 5 == 4)
                same_bits("the fine worlds", frame, pbd_up_wrinkle_world(wr[0]), pbd_up_wrinkle_world(wr[1]));
        }
        {
            float most = 0;
            for (size_t i = 0; i < nf3; ++i) most = fmaxf(most, fabsf(ref[i] - f.positions[i]));
            CHECK_MSG(most > 0.1f, "the fine mesh moved at most %g m", (double)most);
        }
        for (int k = 0; k < 2; ++k) CHECK_OK(pbd_up_wrinkle_targets(wr[k], t[k][0], t[k][1], t[k][2]));
        for (int j = 0; j < 3; ++j) CHECK_MSG(!memcmp(t[0][j], t[1][j], sizeof(float) * nf3), "targets, array %d", j);
        {
            const float keep[1] = {0}, *out = keep;
            pbd_world *fw = pbd_up_wrinkle_world(wr[1]);
            size_t n0 = 0, n1 = 0;
            unsigned char *before = pbdt_save(fw, &n0);
            CHECK_RESULT(pbd_up_wrinkle_update_world(NULL, ws[1], first, &out), PBD_ERROR_NULL_POINTER);
            CHECK_RESULT(pbd_up_wrinkle_update_world(wr[1], NULL, first, &out), PBD_ERROR_NULL_POINTER);
            CHECK_RESULT(pbd_up_wrinkle_update_world(wr[1], ws[1], first, NULL), PBD_ERROR_NULL_POINTER);
            CHECK_RESULT(pbd_up_wrinkle_update_world(wr[1], ws[1], -1, &out), PBD_ERROR_INDEX_OUT_OF_RANGE);
            CHECK_RESULT(pbd_up_wrinkle_update_world(wr[1], ws[1], n - nc + 1, &out), PBD_ERROR_INDEX_OUT_OF_RANGE);
            CHECK_RESULT(pbd_up_wrinkle_update_world(wr[1], ws[0], first, &out), PBD_ERROR_INVALID_ARGUMENT);
            CHECK(strstr(pbd_world_last_error(fw), "GPU coarse world") != NULL);
            CHECK_RESULT(pbd_up_wrinkle_update_world(wr[1], fw, 0, &out), PBD_ERROR_INVALID_ARGUMENT);
            unsigned char *after = pbdt_save(fw, &n1);
            CHECK(out == keep && n0 > 0 && n1 == n0 && !memcmp(before, after, n0));
            free(before);
            free(after);
        }
        /* one more device update, then the fine worlds change and step on
           their own: the GPU world's host copy of the targets must be the
           device's (a change uploads the host's) */
        {
            const float *d = NULL;
            CHECK_OK(pbd_up_wrinkle_update(wr[0], cx, ref));
            CHECK_OK(pbd_up_wrinkle_update_world(wr[1], ws[1], first, &d));
            for (int k = 0; k < 2; ++k) {
                pbd_world *fw = pbd_up_wrinkle_world(wr[k]);
                CHECK_OK(pbd_particle_pin(fw, 0));
                CHECK_OK(pbd_world_step(fw, 1.0f / 60.0f));
            }
            same_bits("the fine worlds stepped alone", 0, pbd_up_wrinkle_world(wr[0]), pbd_up_wrinkle_world(wr[1]));
        }
    next:
        for (int k = 0; k < 4; ++k) pbd_up_wrinkle_destroy(wr[k]);
        pbd_world_destroy(ws[0]);
        pbd_world_destroy(ws[1]);
    }
    for (int k = 0; k < 6; ++k) free(t[k / 3][k % 3]);
    free(cx);
    free(ref);
    free(got);
    pbd_mesh_free(&s);
    pbd_mesh_free(&f);
}

/* A surface volume on a GPU world: its getters read what the device
   computed (the weights, the measured volume) with the CPU world's bits,
   its setters reach the device, and its removal frees it while the world
   steps on. */
TEST(cuda_a_surface_volume_reads_sets_and_goes_on_a_gpu_world) {
    NEEDS_GPU();
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU);
    pbd_sm_volume vol[2];
    pbd_world *ws[2] = {cpu, gpu};
    if (!cpu || !gpu) goto done;
    for (int k = 0; k < 2; ++k) {
        build_volume(ws[k]);
        vol[k] = squeezed;
    }
    for (int step = 0; step < 12; ++step)
        for (int k = 0; k < 2; ++k) {
            frame_volume(ws[k], step + 10);
            if (step == 6)
                CHECK_OK(pbd_sm_volume_set_rest(ws[k], vol[k], 0.8 * 4.0 / 3.0 * 3.14159 * 0.25 * 0.25 * 0.25));
            CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
        }
    same_bits("surface volume", 12, cpu, gpu);
    {
        float wc[200], wg[200];
        int nc = 0, ng = 0;
        double vc = 0, vg = 1;
        CHECK_OK(pbd_sm_volume_weights(cpu, vol[0], wc, 200, &nc));
        CHECK_OK(pbd_sm_volume_weights(gpu, vol[1], wg, 200, &ng));
        CHECK(nc == ng && nc > 0 && nc <= 200 && memcmp(wc, wg, sizeof(float) * (size_t)nc) == 0);
        int zero = 0;
        for (int i = 0; i < nc; ++i) zero += wc[i] == 0;
        CHECK_MSG(zero > 0 && zero < nc, "%d of %d weights are 0 (the particles the colliders hold)", zero, nc);
        CHECK_OK(pbd_sm_volume_measure(cpu, vol[0], &vc));
        CHECK_OK(pbd_sm_volume_measure(gpu, vol[1], &vg));
        CHECK(memcmp(&vc, &vg, sizeof vc) == 0);
    }
    for (int k = 0; k < 2; ++k) {
        CHECK_OK(pbd_sm_remove_surface_volume(ws[k], vol[k]));
        CHECK(pbd_world_plugin_count(ws[k]) == 0);
        CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
    }
    same_bits("surface volume removed", 13, cpu, gpu);
done:
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
}

/* Shape-matching bodies on a GPU world: the getters read what the device
   computed (rotations, plastic states, goals: the CPU world's bits), a
   non-finite step puts the rotations and plastic states back as on the
   CPU, the reset of the plasticity reaches the device, and a removal
   frees the body while the world steps on. */
TEST(cuda_a_body_reads_sets_rolls_back_and_goes_on_a_gpu_world) {
    NEEDS_GPU();
    pbd_world *ws[2] = {world_on(PBD_DEVICE_CPU), world_on(PBD_DEVICE_GPU)};
    pbd_sm_body body[2];
    int nr = 0;
    static float goals[2][3 * 125];
    if (!ws[0] || !ws[1]) goto done;
    for (int k = 0; k < 2; ++k) {
        build_sm_bodies(ws[k]);
        body[k] = jelly;
        for (int s = 0; s < 12; ++s) CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
    }
    CHECK_OK(pbd_sm_body_region_count(ws[1], body[1], &nr));
    for (int pass = 0; pass < 3; ++pass) {
        int plastic = 0;
        for (int r = 0; r < nr; ++r) {
            float q[2][4], S[2][9];
            for (int k = 0; k < 2; ++k) {
                CHECK_OK(pbd_sm_body_rotation(ws[k], body[k], r, q[k]));
                CHECK_OK(pbd_sm_body_plastic_state(ws[k], body[k], r, S[k]));
            }
            CHECK_MSG(!memcmp(q[0], q[1], sizeof q[0]) && !memcmp(S[0], S[1], sizeof S[0]), "pass %d, region %d", pass,
                      r);
            plastic += S[0][0] != 1 || S[0][1] != 0;
        }
        for (int k = 0; k < 2; ++k) CHECK_OK(pbd_sm_body_goals(ws[k], body[k], goals[k]));
        CHECK(!memcmp(goals[0], goals[1], sizeof goals[0]));
        if (pass == 0) { /* a non-finite step: back to the step's start, the rotations and plastic states too */
            CHECK_MSG(plastic > 0, "no region flowed plastically");
            for (int k = 0; k < 2; ++k) refused_step(ws[k], 60);
        } else if (pass == 1) { /* the reset, then steps */
            for (int k = 0; k < 2; ++k) {
                float x[3] = {-0.3f, 0.6f, 0}, v[3] = {0, 0, 0};
                pbd_range one = {60, 1};
                CHECK_OK(pbd_particles_set_positions(ws[k], one, x));
                CHECK_OK(pbd_particles_set_velocities(ws[k], one, v));
                CHECK_OK(pbd_sm_body_reset_plasticity(ws[k], body[k]));
                for (int s = 0; s < 3; ++s) CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
            }
        }
        same_bits("bodies", pass, ws[0], ws[1]);
    }
    for (int k = 0; k < 2; ++k) {
        int plugins = pbd_world_plugin_count(ws[k]);
        CHECK_OK(pbd_sm_remove_body(ws[k], body[k]));
        CHECK(pbd_world_plugin_count(ws[k]) == plugins - 1);
        CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
    }
    same_bits("a body removed", 3, ws[0], ws[1]);
done:
    pbd_world_destroy(ws[0]);
    pbd_world_destroy(ws[1]);
}

/* A CPU world's snapshot with self-collision (candidates held in it)
   restored into a GPU world mid-run steps on with the CPU world's bits,
   and the GPU world's snapshot is the CPU world's, byte for byte. */
TEST(cuda_a_snapshot_with_self_collision_runs_on_in_a_gpu_world) {
    NEEDS_GPU();
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU);
    if (!cpu || !gpu) goto done;
    build_folding(cpu);
    build_cloth(gpu); /* something else, replaced by the restore */
    for (int k = 0; k < 20; ++k) {
        frame_folding(cpu, k);
        CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
    }
    CHECK(pbd_world_self_contact_count(cpu) > 0);
    {
        size_t size = pbd_world_snapshot_size(cpu);
        void *a = malloc(size), *b = malloc(size);
        CHECK_OK(pbd_world_save(cpu, a, size));
        CHECK_OK(pbd_world_restore(gpu, a, size));
        for (int k = 20; k < 35; ++k) {
            frame_folding(cpu, k);
            frame_folding(gpu, k);
            CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
            CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
            if (!same_bits("self-collision after a restore", k, cpu, gpu)) break;
        }
        CHECK(pbd_world_self_contact_count(gpu) == pbd_world_self_contact_count(cpu));
        CHECK(pbd_world_snapshot_size(gpu) == size);
        CHECK_OK(pbd_world_save(cpu, a, size));
        CHECK_OK(pbd_world_save(gpu, b, size));
        CHECK_MSG(!memcmp(a, b, size), "the snapshots differ");
        free(a);
        free(b);
    }
done:
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
}

static int logged_ok;
static char logged[256];
static void log_fn(void *user, pbd_result r, const char *message) {
    (void)user;
    if (r == PBD_OK) {
        logged_ok++;
        snprintf(logged, sizeof logged, "%s", message);
    }
}

/* Worlds with nothing in them step on the GPU as on the CPU. */
TEST(cuda_empty_worlds_step) {
    NEEDS_GPU();
    pbd_world *w = world_on(PBD_DEVICE_GPU);
    if (!w) return;
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK(pbd_world_device_positions(w) == NULL && pbd_world_positions(w) == NULL);
    ground(w);
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    float x[3] = {0, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = 1;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    for (int k = 0; k < 60; ++k) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *p = pbd_world_positions(w);
    CHECK(p && fabsf(p[1] - 0.01f) < 1e-3f); /* resting on the ground at its radius */
    pbd_world_destroy(w);
}

/* The device choice: GPU only gets the GPU (or fails), CPU the CPU; auto
   takes a real GPU and logs its choice. The emulation is never chosen
   automatically: it is slower than the CPU path, for tests only. */
TEST(cuda_the_device_is_chosen_per_world_and_logged) {
    pbd_world_desc d = pbd_world_desc_default();
    d.log = log_fn;
    pbd_world *w = NULL;
    logged_ok = 0;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK(logged_ok == 1 && strstr(logged, "world on the") != NULL);
#ifdef PBDT_CUDA_EMULATED
    CHECK(w && pbd_world_device(w) == PBD_DEVICE_CPU);
    CHECK(strstr(logged, "emulat") != NULL);
#else
    if (gpu_present()) {
        CHECK(w && pbd_world_device(w) == PBD_DEVICE_GPU);
        CHECK(strstr(logged, "world on the GPU") != NULL);
    } else { /* the fallback, and GPU only fails with the reason */
        CHECK(w && pbd_world_device(w) == PBD_DEVICE_CPU);
        CHECK(strstr(logged, "world on the CPU") != NULL);
        pbd_world_desc g = pbd_world_desc_default();
        g.device = PBD_DEVICE_GPU;
        pbd_world *none = NULL;
        CHECK_RESULT(pbd_world_create(&g, &none), PBD_ERROR_UNSUPPORTED);
        CHECK(none == NULL);
        CHECK_MSG(strstr(pbd_last_error(), "CUDA") != NULL, "%s", pbd_last_error());
    }
#endif
    pbd_world_destroy(w);
    d.device = PBD_DEVICE_CPU;
    logged_ok = 0;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK(w && pbd_world_device(w) == PBD_DEVICE_CPU && logged_ok == 0);
    CHECK(pbd_world_device_positions(w) == NULL);
    pbd_world_destroy(w);
}

/* The device pointer for interop holds the positions (in the emulation
   device memory is host memory, so the test reads it). */
/* A subdivision model with two-scale detail on the GPU evaluates a GPU
   world's cloth from its device particles, into a device array, with the
   bits of the same model on the CPU evaluating the CPU world; a fit on
   the GPU model reaches the device; a GPU model refuses a CPU world; back
   on the CPU it evaluates there. */
TEST(cuda_a_subdivision_model_evaluates_a_gpu_worlds_cloth) {
    NEEDS_GPU();
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU);
    pbd_up_model *mc = NULL, *mg = NULL;
    pbd_mesh m;
    float *fine = NULL, *out = NULL;
    float o[3] = {-0.3f, 0.8f, -0.3f}, u[3] = {0.6f, 0, 0}, v[3] = {0, 0, 0.6f};
    if (!cpu || !gpu) goto done;
    CHECK_OK(pbd_mesh_grid(9, 9, o, u, v, &m));
    {
        int first = pbd_world_particle_count(cpu), nd = 0;
        pbd_world *ws[2] = {cpu, gpu};
        for (int k = 0; k < 2; ++k) {
            ground(ws[k]);
            pbd_cloth_desc cd = pbdt_cloth_desc(&m);
            CHECK_OK(pbd_add_cloth(ws[k], &cd, NULL));
        }
        CHECK_OK(pbd_up_subdivision_create(m.triangles, m.triangle_count, m.vertex_count, 2, &mc));
        CHECK_OK(pbd_up_subdivision_create(m.triangles, m.triangle_count, m.vertex_count, 2, &mg));
        /* AUTO never takes the emulated GPU, for models as for worlds (an
           audit: an AUTO model went to it, and then refused the AUTO
           world's CPU particles) */
        CHECK_OK(pbd_up_model_set_device(mg, PBD_DEVICE_AUTO));
        CHECK(pbd_up_model_device(mg) == PBD_DEVICE_CPU);
        CHECK_OK(pbd_up_model_set_device(mg, PBD_DEVICE_GPU));
        CHECK(pbd_up_model_device(mg) == PBD_DEVICE_GPU && pbd_up_model_device(mc) == PBD_DEVICE_CPU);
        nd = pbd_up_model_detail_count(mc);
        fine = (float *)malloc(sizeof(float) * 3 * (size_t)nd);
        out = (float *)malloc(sizeof(float) * 3 * (size_t)nd);
        /* detail: the smooth rest surface with ripples */
        CHECK_OK(pbd_up_model_eval(mc, m.positions, fine));
        for (int i = 0; i < nd; ++i) fine[3 * i + 1] += 0.01f * sinf(40.0f * fine[3 * i]);
        CHECK_OK(pbd_up_subdivision_fit_detail(mc, m.positions, fine));
        CHECK_OK(pbd_up_subdivision_fit_detail(mg, m.positions, fine)); /* sent to the device */
        for (int step = 0; step < 20; ++step) {
            CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
            CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
        }
        const float *dc = NULL, *dg = NULL;
        CHECK_OK(pbd_up_model_eval_world(mc, cpu, first, &dc));
        CHECK_OK(pbd_up_model_eval_world(mg, gpu, first, &dg));
        if (dc && dg) {
            pbd__cuda_read(out, dg, sizeof(float) * 3 * (size_t)nd);
            CHECK(memcmp(out, dc, sizeof(float) * 3 * (size_t)nd) == 0);
            CHECK(fabsf(dc[1] - fine[1]) > 0.05f); /* the cloth fell: not the rest pose */
        }
        CHECK_RESULT(pbd_up_model_eval_world(mg, cpu, first, &dg), PBD_ERROR_INVALID_ARGUMENT);
        CHECK_RESULT(pbd_up_model_eval_world(mc, cpu, first + 1, &dc), PBD_ERROR_INDEX_OUT_OF_RANGE);
        CHECK_OK(pbd_up_model_set_device(mg, PBD_DEVICE_CPU)); /* back: evaluates on the host */
        CHECK(pbd_up_model_device(mg) == PBD_DEVICE_CPU);
        CHECK_OK(pbd_up_model_eval_world(mg, cpu, first, &dg));
        if (dc && dg) CHECK(memcmp(dg, dc, sizeof(float) * 3 * (size_t)nd) == 0);
    }
done:
    pbd_up_model_destroy(mc);
    pbd_up_model_destroy(mg);
    pbd_mesh_free(&m);
    free(fine);
    free(out);
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
}

/* A PIU model with oscillatory modes, a PDM and a WPSD model on the GPU
   evaluate a GPU world's cloth (the training cape's coarse mesh) with the
   bits of the same models on the CPU evaluating the CPU world, while
   PIU's oscillators (host state) advance with the cloth. */
TEST(cuda_learned_models_evaluate_a_gpu_worlds_cloth) {
    NEEDS_GPU();
    pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU);
    pbd_up_model *mc = NULL, *mg = NULL, *sub = NULL, *pc = NULL, *pg = NULL, *wc = NULL, *wg = NULL;
    pbd_up_training t;
    memset(&t, 0, sizeof t);
    float *out = NULL, *u = NULL;
    pbd_up_training_desc td = pbd_up_training_desc_default();
    td.coarse_resolution = 6;
    td.frames = 12;
    td.steps_per_frame = 3;
    if (!cpu || !gpu) goto done;
    CHECK_OK(pbd_up_training_generate(&td, &t));
    {
        pbd_up_piu_desc pd = pbd_up_piu_desc_from(&t, NULL);
        pd.support = 8;
        pd.oscillatory_modes = 2;
        pd.frame_dt = td.time_step * (float)td.steps_per_frame;
        CHECK_OK(pbd_up_piu_fit(&pd, &mc));
        CHECK_OK(pbd_up_piu_fit(&pd, &mg));
    }
    if (!mc || !mg) goto done;
    CHECK_OK(pbd_up_model_set_device(mg, PBD_DEVICE_GPU));
    {
        int nc = t.coarse_count, nd = t.detail_count, first = 0;
        pbd_world *ws[2] = {cpu, gpu};
        for (int k = 0; k < 2; ++k) {
            pbd_cloth_desc cd = pbd_cloth_desc_default();
            cd.positions = t.coarse_rest;
            cd.vertex_count = nc;
            cd.triangles = t.coarse_triangles;
            cd.triangle_count = t.coarse_triangle_count;
            ground(ws[k]);
            CHECK_OK(pbd_add_cloth(ws[k], &cd, NULL));
        }
        out = (float *)malloc(sizeof(float) * 3 * (size_t)nd);
        u = (float *)malloc(sizeof(float) * 3 * (size_t)nc);
        for (int step = 0; step < 15; ++step) {
            pbd_up_model *ms[2] = {mc, mg};
            for (int k = 0; k < 2; ++k) {
                CHECK_OK(pbd_world_step(ws[k], 1.0f / 60.0f));
                const float *x = pbd_world_positions(ws[k]);
                for (int i = 0; i < 3 * nc; ++i) u[i] = x[4 * (i / 3) + i % 3];
                CHECK_OK(pbd_up_piu_advance(ms[k], u, 1.0f / 60.0f)); /* the oscillators: host state */
            }
            const float *dc = NULL, *dg = NULL;
            CHECK_OK(pbd_up_model_eval_world(mc, cpu, first, &dc));
            CHECK_OK(pbd_up_model_eval_world(mg, gpu, first, &dg));
            if (!dc || !dg) break;
            pbd__cuda_read(out, dg, sizeof(float) * 3 * (size_t)nd);
            if (memcmp(out, dc, sizeof(float) * 3 * (size_t)nd)) {
                CHECK_MSG(0, "step %d: the GPU model's detail differs from the CPU model's", step);
                break;
            }
        }
    }
    if (out && u) { /* the modes are live (else the comparison would not see them): an advance alone moves the detail */
        const float *a = NULL, *b = NULL;
        int nd = t.detail_count;
        CHECK_OK(pbd_up_model_eval_world(mc, cpu, 0, &a));
        if (a) memcpy(out, a, sizeof(float) * 3 * (size_t)nd);
        CHECK_OK(pbd_up_piu_advance(mc, u, 1.0f / 60.0f));
        CHECK_OK(pbd_up_model_eval_world(mc, cpu, 0, &b));
        if (b) CHECK(memcmp(out, b, sizeof(float) * 3 * (size_t)nd) != 0);
    }
    CHECK_OK(pbd_up_subdivision_create(t.coarse_triangles, t.coarse_triangle_count, t.coarse_count, t.levels, &sub));
    {
        pbd_up_pdm_desc dd = pbd_up_pdm_desc_from(&t, sub);
        CHECK_OK(pbd_up_pdm_fit(&dd, &pc));
        CHECK_OK(pbd_up_pdm_fit(&dd, &pg));
        pbd_up_wpsd_desc wd = pbd_up_wpsd_desc_from(&t, sub);
        wd.max_poses = 4;
        CHECK_OK(pbd_up_wpsd_fit(&wd, &wc));
        CHECK_OK(pbd_up_wpsd_fit(&wd, &wg));
    }
    for (int k = 0; k < 2 && out; ++k) {
        pbd_up_model *c = k ? wc : pc, *g = k ? wg : pg;
        const float *dc = NULL, *dg = NULL;
        if (!c || !g) continue;
        CHECK_OK(pbd_up_model_set_device(g, PBD_DEVICE_GPU));
        CHECK_OK(pbd_up_model_eval_world(c, cpu, 0, &dc));
        CHECK_OK(pbd_up_model_eval_world(g, gpu, 0, &dg));
        if (dc && dg) {
            pbd__cuda_read(out, dg, sizeof(float) * 3 * (size_t)t.detail_count);
            CHECK_MSG(!memcmp(out, dc, sizeof(float) * 3 * (size_t)t.detail_count), "%s: the GPU model differs",
                      k ? "WPSD" : "PDM");
        }
    }
done:
    pbd_up_model_destroy(mc);
    pbd_up_model_destroy(mg);
    pbd_up_model_destroy(sub);
    pbd_up_model_destroy(pc);
    pbd_up_model_destroy(pg);
    pbd_up_model_destroy(wc);
    pbd_up_model_destroy(wg);
    pbd_up_training_free(&t);
    free(out);
    free(u);
    pbd_world_destroy(cpu);
    pbd_world_destroy(gpu);
}

TEST(cuda_device_positions_for_interop) {
    NEEDS_GPU();
    pbd_world *w = world_on(PBD_DEVICE_GPU);
    if (!w) return;
    build_bodies(w);
    const float *d = pbd_world_device_positions(w); /* uploads first */
    CHECK(d != NULL);
    for (int k = 0; k < 5; ++k) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    d = pbd_world_device_positions(w);
    CHECK(d != NULL);
#ifdef PBDT_CUDA_EMULATED
    if (d) CHECK(!memcmp(d, pbd_world_positions(w), sizeof(float) * 4 * (size_t)pbd_world_particle_count(w)));
#endif
    pbd_world_destroy(w);
}

/* The setters a game calls every frame - a dragged attachment's target,
   gravity, a group's compliance, an object's damping, point damping, a
   collider's pose and friction - send the records and the attachment
   targets, not the world: the same bytes per frame for a 16 x 16 and a
   32 x 32 cloth, and the CPU world's bits. */
static pbd_group drag_group;
static void build_dragged(pbd_world *w, int n) {
    ground(w);
    float c[3] = {0, 0.3f, 0};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.2f, 0.5f, NULL));
    pbd_object o = cloth(w, n, 0.8f, 0.7f, PBD_BENDING_DIHEDRAL, 0);
    int f = first_of(w, o), who[2] = {f, f + n - 1};
    float pts[6] = {-0.4f, 0.7f, -0.4f, 0.4f, 0.7f, -0.4f};
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    ad.count = 2;
    ad.particles = who;
    ad.target_points = pts;
    CHECK_OK(pbd_add_attachments(w, &ad, &drag_group));
}
static void frame_dragged(pbd_world *w, int frame) {
    float t = 0.05f * (float)frame, at[3] = {0.4f + 0.3f * t, 0.7f + 0.1f * t, -0.4f};
    float g[3] = {0.3f * sinf(t), -9.81f, 0}, pose[3] = {0, 0.3f - 0.02f * t, 0};
    CHECK_OK(pbd_group_set_attachment_target(w, drag_group, 1, at));
    CHECK_OK(pbd_world_set_gravity(w, g));
    CHECK_OK(pbd_group_set_compliance(w, pbd_world_group(w, 0), 1e-7f * (float)(frame % 5)));
    CHECK_OK(pbd_object_set_damping(w, pbd_world_object(w, 0), 0.1f * (float)(frame % 3)));
    CHECK_OK(pbd_world_set_point_damping(w, 0.05f * (float)(frame % 2)));
    CHECK_OK(pbd_collider_set_pose(w, pbd_world_collider(w, 1), pose, NULL));
    CHECK_OK(pbd_collider_set_friction(w, pbd_world_collider(w, 1), 0.5f, 0.1f * (float)(frame % 4), 0));
}
TEST(cuda_per_frame_setters_send_what_they_change) {
    NEEDS_GPU();
    size_t per_frame[2] = {0, 0};
    for (int size = 0; size < 2; ++size) {
        int n = size ? 32 : 16;
        pbd_world *cpu = world_on(PBD_DEVICE_CPU), *gpu = world_on(PBD_DEVICE_GPU);
        float start = 0, moved = 0;
        size_t before = 0, sent = 0;
        if (!cpu || !gpu) goto next;
        build_dragged(cpu, n);
        build_dragged(gpu, n);
        start = pbd_world_positions(cpu)[4 * (n - 1)];
        for (int k = 0; k < 16; ++k) {
            frame_dragged(cpu, k);
            frame_dragged(gpu, k);
            before = pbd__cuda_bytes_sent(gpu);
            CHECK_OK(pbd_world_step(cpu, 1.0f / 60.0f));
            CHECK_OK(pbd_world_step(gpu, 1.0f / 60.0f));
            sent = pbd__cuda_bytes_sent(gpu) - before;
            if (k == 1) per_frame[size] = sent;
            if (k > 1)
                CHECK_MSG(sent == per_frame[size], "frame %d sent %zu bytes, frame 1 %zu", k, sent, per_frame[size]);
            if (!same_bits("dragged cloth", k, cpu, gpu)) break;
        }
        moved = pbd_world_positions(cpu)[4 * (n - 1)] - start;
        CHECK_MSG(moved > 0.1f, "the dragged corner moved %g m", (double)moved);
    next:
        pbd_world_destroy(cpu);
        pbd_world_destroy(gpu);
    }
    CHECK_MSG(per_frame[0] > 0 && per_frame[0] == per_frame[1], "a frame sent %zu bytes (16 x 16), %zu (32 x 32)",
              per_frame[0], per_frame[1]);
}

void suite_cuda(void) {
    RUN(cuda_per_frame_setters_send_what_they_change);
    RUN(cuda_gpu_worlds_give_the_cpu_worlds_bits_in_two_launch_orders);
    RUN(cuda_fluid_lists_densities_and_snapshots_match_the_cpu);
    RUN(cuda_a_user_plugin_runs_on_the_host_with_the_cpu_worlds_bits);
    RUN(cuda_random_calls_between_steps_keep_the_cpu_worlds_bits);
    RUN(cuda_snapshot_and_restore_mid_run);
    RUN(cuda_a_non_finite_step_rolls_back_as_on_the_cpu);
    RUN(cuda_a_snapshot_with_self_collision_runs_on_in_a_gpu_world);
    RUN(cuda_a_surface_volume_reads_sets_and_goes_on_a_gpu_world);
    RUN(cuda_a_body_reads_sets_rolls_back_and_goes_on_a_gpu_world);
    RUN(cuda_oriented_particles_read_roll_back_and_go_on_a_gpu_world);
    RUN(cuda_a_multires_cloth_reads_and_goes_on_a_gpu_world);
    RUN(cuda_sm_states_in_snapshots_go_on_with_the_cpu_worlds_bits);
    RUN(cuda_a_wrinkle_mesh_solves_on_a_gpu_world);
    RUN(cuda_a_wrinkle_mesh_follows_a_gpu_coarse_world);
    RUN(cuda_a_skin_evaluates_on_the_device);
    RUN(cuda_empty_worlds_step);
    RUN(cuda_the_device_is_chosen_per_world_and_logged);
    RUN(cuda_device_positions_for_interop);
    RUN(cuda_a_subdivision_model_evaluates_a_gpu_worlds_cloth);
    RUN(cuda_learned_models_evaluate_a_gpu_worlds_cloth);
}

#endif /* PBD_CUDA */
