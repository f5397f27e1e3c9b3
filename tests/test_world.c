/* tests/test_world.c - world and particles (pbd.h sections "world" and
   "particles"): defaults, read/write access, pin/unpin, kinematic particles,
   free fall against the exact discrete answer, the acceleration field, the
   user allocator, and snapshot/restore. */
#include "test.h"
#include <stdint.h>
#include <stdlib.h>

static const float DT = 1.0f / 60.0f;

static pbd_world *make_world(const pbd_world_desc *d) {
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(d, &w));
    return w;
}
static pbd_world *make_default_world(void) {
    pbd_world_desc d = pbd_world_desc_default();
    return make_world(&d);
}
static int add_one(pbd_world *w, float x, float y, float z, float mass) {
    pbd_particles_desc p = pbd_particles_desc_default();
    float pos[3] = {x, y, z};
    p.positions = pos;
    p.count = 1;
    p.mass = mass;
    pbd_range r = {-1, 0};
    CHECK_OK(pbd_add_particles(w, &p, &r));
    CHECK(r.count == 1);
    return r.first;
}
static const float *particle(const pbd_world *w, int i) { return pbd_world_positions(w) + 4 * i; }

/* ---- defaults ----------------------------------------------------------------- */
TEST(world_create_destroy_defaults) {
    pbd_world_desc d = pbd_world_desc_default();
    CHECK(d.gravity[0] == 0.0f && d.gravity[1] == -9.81f && d.gravity[2] == 0.0f);
    CHECK(d.substeps == 4 && d.iterations == 4);
    CHECK(d.mode == PBD_SOLVER_XPBD);
    CHECK(d.stiffness_correction == 1);
    CHECK(d.point_damping == 0.0f);
    CHECK(d.max_contacts_per_particle == 4);
    CHECK(d.allocator.alloc == NULL && d.allocator.free == NULL);
    CHECK(d.log == NULL);
    pbd_world *w = make_world(&d);
    if (!w) return;
    CHECK(pbd_world_particle_count(w) == 0);
    CHECK(pbd_world_group_count(w) == 0);
    CHECK(pbd_world_object_count(w) == 0);
    CHECK(pbd_world_collider_count(w) == 0);
    CHECK(pbd_world_contact_count(w) == 0);
    CHECK(pbd_world_time(w) == 0.0);
    const char *e = pbd_world_last_error(w);
    CHECK(e != NULL && e[0] == 0);
    CHECK_OK(pbd_world_step(w, DT)); /* an empty world steps */
    CHECK_NEAR(pbd_world_time(w), DT, 1e-12);
    pbd_world_destroy(w);

    pbd_particles_desc pd = pbd_particles_desc_default();
    CHECK(pd.positions == NULL && pd.velocities == NULL && pd.masses == NULL);
    CHECK(pd.mass == 1.0f && pd.radius == 0.01f);
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    CHECK(cd.compliance == 0.0f && cd.stiffness == 1.0f && cd.rest == NULL && cd.unilateral == 0);
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    CHECK(ad.compliance == 0.0f && ad.stiffness == 1.0f && ad.max_distance == 0.0f);
    pbd_mesh_volume_desc md = pbd_mesh_volume_desc_default();
    CHECK(md.pressure == 1.0f && md.compliance == 0.0f && md.stiffness == 1.0f);
    pbd_cloth_desc cl = pbd_cloth_desc_default();
    CHECK(cl.density == 0.2f && cl.bending == PBD_BENDING_DIHEDRAL && cl.area_constraints == 0);
    CHECK(cl.stretch_stiffness == 1.0f && cl.bending_stiffness == 0.1f && cl.area_stiffness == 1.0f);
    CHECK(cl.thickness == 0.01f && cl.damping == 2.0f && cl.stretch_compliance == 0.0f && cl.tethers == 1);
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    CHECK(sd.density == 1000.0f && sd.volume_constraints == 1 && sd.radius == 0.01f && sd.damping == 0.0f);
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    CHECK(bd.pressure == 1.0f && bd.volume_compliance == 0.0f && bd.volume_stiffness == 1.0f &&
          bd.cloth.damping == 0.0f);
    pbd_collider_desc co = pbd_collider_desc_default();
    CHECK(co.rotation[0] == 0 && co.rotation[1] == 0 && co.rotation[2] == 0 && co.rotation[3] == 1);
    CHECK(co.static_friction == 0.5f && co.dynamic_friction == 0.4f && co.restitution == 0.0f);
}

/* ---- particles read/write ------------------------------------------------------- */
TEST(world_particles_read_back) {
    pbd_world *w = make_default_world();
    if (!w) return;
    float pos[5 * 3], vel[5 * 3], mass[5] = {1.0f, 2.0f, 0.0f, 0.5f, 4.0f};
    unsigned s = 77u;
    for (int i = 0; i < 15; ++i) {
        pos[i] = pbdt_rand(&s) * 4 - 2;
        vel[i] = pbdt_rand(&s) * 2 - 1;
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.velocities = vel;
    pd.masses = mass;
    pd.count = 5;
    pbd_range a = {-1, -1}, b = {-1, -1};
    CHECK_OK(pbd_add_particles(w, &pd, &a));
    CHECK(a.first == 0 && a.count == 5);
    /* a second batch with a uniform mass and no velocities */
    pbd_particles_desc pe = pbd_particles_desc_default();
    pe.positions = pos;
    pe.count = 3;
    pe.mass = 2.5f;
    CHECK_OK(pbd_add_particles(w, &pe, &b));
    CHECK(b.first == 5 && b.count == 3);
    CHECK(pbd_world_particle_count(w) == 8);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    for (int i = 0; i < 5; ++i) {
        for (int k = 0; k < 3; ++k) {
            CHECK(x[4 * i + k] == pos[3 * i + k]);
            CHECK(v[4 * i + k] == vel[3 * i + k]);
        }
        CHECK(x[4 * i + 3] == (mass[i] > 0 ? 1.0f / mass[i] : 0.0f));
        CHECK(v[4 * i + 3] == 0.0f);
        float m = -1;
        CHECK_OK(pbd_particle_get_mass(w, i, &m));
        CHECK(m == mass[i]);
    }
    for (int i = 0; i < 3; ++i) {
        for (int k = 0; k < 3; ++k) {
            CHECK(x[4 * (5 + i) + k] == pos[3 * i + k]);
            CHECK(v[4 * (5 + i) + k] == 0.0f);
        }
        CHECK(x[4 * (5 + i) + 3] == 1.0f / 2.5f);
    }
    /* 3-float copies of a sub-range */
    float out[9];
    pbd_range mid = {2, 3};
    CHECK_OK(pbd_particles_get_positions(w, mid, out));
    CHECK(memcmp(out, pos + 6, sizeof out) == 0);
    CHECK_OK(pbd_particles_get_velocities(w, mid, out));
    CHECK(memcmp(out, vel + 6, sizeof out) == 0);
    /* write positions and velocities, read them back through both paths */
    float np[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, nv[9] = {-1, -2, -3, 0.5f, 0.25f, 0.125f, 9, 8, 7};
    CHECK_OK(pbd_particles_set_positions(w, mid, np));
    CHECK_OK(pbd_particles_set_velocities(w, mid, nv));
    CHECK_OK(pbd_particles_get_positions(w, mid, out));
    CHECK(memcmp(out, np, sizeof out) == 0);
    CHECK_OK(pbd_particles_get_velocities(w, mid, out));
    CHECK(memcmp(out, nv, sizeof out) == 0);
    x = pbd_world_positions(w);
    v = pbd_world_velocities(w);
    for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 3; ++k) {
            CHECK(x[4 * (2 + i) + k] == np[3 * i + k]);
            CHECK(v[4 * (2 + i) + k] == nv[3 * i + k]);
        }
    /* inverse masses untouched by position writes; neighbours untouched */
    CHECK(x[4 * 3 + 3] == 2.0f && x[4 * 2 + 3] == 0.0f);
    CHECK(x[4 * 1 + 0] == pos[3] && x[4 * 5 + 0] == pos[0]);
    /* set_mass */
    CHECK_OK(pbd_particle_set_mass(w, 1, 8.0f));
    CHECK(particle(w, 1)[3] == 0.125f);
    float m = 0;
    CHECK_OK(pbd_particle_get_mass(w, 1, &m));
    CHECK(m == 8.0f);
    CHECK_OK(pbd_particle_set_radius(w, 1, 0.2f));
    pbd_world_destroy(w);
}

/* ---- pin / unpin / mass 0 ---------------------------------------------------------- */
TEST(world_pin_unpin_and_zero_mass) {
    pbd_world *w = make_default_world();
    if (!w) return;
    int a = add_one(w, 0, 2, 0, 2.0f);    /* pinned by pbd_particle_pin */
    int b = add_one(w, 0.5f, 2, 0, 1.0f); /* hangs from a */
    int c = add_one(w, 3, 2, 0, 1.0f);    /* pinned by mass 0 */
    int d = add_one(w, 4, 2, 0, 1.0f);    /* free: falls */
    int idx[2] = {a, b};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = idx;
    pbd_group g;
    CHECK_OK(pbd_add_constraints(w, &cd, &g));
    CHECK_OK(pbd_particle_pin(w, a));
    CHECK(particle(w, a)[3] == 0.0f);
    CHECK_OK(pbd_particle_set_mass(w, c, 0.0f));
    CHECK(particle(w, c)[3] == 0.0f);
    float m = -1;
    CHECK_OK(pbd_particle_get_mass(w, c, &m));
    CHECK(m == 0.0f);
    float xa[4], xc[4];
    memcpy(xa, particle(w, a), sizeof xa);
    memcpy(xc, particle(w, c), sizeof xc);
    for (int i = 0; i < 60; ++i) CHECK_OK(pbd_world_step(w, DT));
    CHECK(memcmp(xa, particle(w, a), sizeof xa) == 0);
    CHECK(memcmp(xc, particle(w, c), sizeof xc) == 0);
    float va[3], vc[3];
    pbd_range ra = {a, 1}, rc = {c, 1};
    CHECK_OK(pbd_particles_get_velocities(w, ra, va));
    CHECK_OK(pbd_particles_get_velocities(w, rc, vc));
    CHECK(va[0] == 0 && va[1] == 0 && va[2] == 0);
    CHECK(vc[0] == 0 && vc[1] == 0 && vc[2] == 0);
    /* b swings below a on its rope; d fell freely */
    const float *pb = particle(w, b);
    double rope =
        sqrt((pb[0] - xa[0]) * (pb[0] - xa[0]) + (pb[1] - xa[1]) * (pb[1] - xa[1]) + (pb[2] - xa[2]) * (pb[2] - xa[2]));
    CHECK_NEAR(rope, 0.5, 1e-3);
    CHECK(pb[1] < 2.0f - 0.1f);
    CHECK(particle(w, d)[1] < 2.0f - 4.0f);
    /* unpin restores the mass and the particle falls */
    CHECK_OK(pbd_particle_unpin(w, a));
    CHECK(particle(w, a)[3] == 0.5f);
    CHECK_OK(pbd_particle_get_mass(w, a, &m));
    CHECK(m == 2.0f);
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_world_step(w, DT));
    CHECK(particle(w, a)[1] < xa[1] - 0.1f);
    /* mass 0 stays pinned until given a mass */
    CHECK(memcmp(xc, particle(w, c), sizeof xc) == 0);
    CHECK_OK(pbd_particle_set_mass(w, c, 4.0f));
    CHECK(particle(w, c)[3] == 0.25f);
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_world_step(w, DT));
    CHECK(particle(w, c)[1] < xc[1] - 0.1f);
    /* pinning twice, then one unpin, restores the mass */
    CHECK_OK(pbd_particle_pin(w, d));
    CHECK_OK(pbd_particle_pin(w, d));
    CHECK(particle(w, d)[3] == 0.0f);
    CHECK_OK(pbd_particle_unpin(w, d));
    CHECK(particle(w, d)[3] == 1.0f);
    pbd_world_destroy(w);
}

/* ---- kinematic particles ------------------------------------------------------------ */
TEST(world_kinematic_reaches_target) {
    pbd_world *w = make_default_world();
    if (!w) return;
    int k = add_one(w, 0, 1, 0, 1.0f);
    int f = add_one(w, 0, 0.5f, 0, 1.0f);
    int idx[2] = {k, f};
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 1;
    cd.indices = idx;
    pbd_group g;
    CHECK_OK(pbd_add_constraints(w, &cd, &g));
    CHECK_OK(pbd_particle_set_kinematic(w, k, 1));
    CHECK(particle(w, k)[3] == 0.0f);
    float start[3] = {0, 1, 0};
    for (int i = 1; i <= 30; ++i) {
        /* move along a circle, one target per step */
        float t[3] = {0.3f * sinf(0.2f * i), 1.0f + 0.1f * i / 30.0f, 0.3f * (1 - cosf(0.2f * i))};
        CHECK_OK(pbd_particle_set_kinematic_target(w, k, t));
        CHECK_OK(pbd_world_step(w, DT));
        const float *x = particle(w, k);
        for (int c = 0; c < 3; ++c) CHECK_NEAR(x[c], t[c], 1e-6);
        CHECK(x[3] == 0.0f);
        float v[3];
        pbd_range r = {k, 1};
        CHECK_OK(pbd_particles_get_velocities(w, r, v));
        for (int c = 0; c < 3; ++c) CHECK_NEAR(v[c], (t[c] - start[c]) / DT, 1e-3);
        memcpy(start, t, sizeof start);
    }
    /* the follower is pulled along at rope length */
    const float *xk = particle(w, k), *xf = particle(w, f);
    double dx = xk[0] - xf[0], dy = xk[1] - xf[1], dz = xk[2] - xf[2];
    CHECK_NEAR(sqrt(dx * dx + dy * dy + dz * dz), 0.5, 1e-3);
    /* without a new target it stays where it is */
    float here[3] = {xk[0], xk[1], xk[2]};
    for (int i = 0; i < 5; ++i) CHECK_OK(pbd_world_step(w, DT));
    for (int c = 0; c < 3; ++c) CHECK_NEAR(particle(w, k)[c], here[c], 1e-6);
    /* no longer kinematic: dynamic again with its mass */
    CHECK_OK(pbd_particle_set_kinematic(w, k, 0));
    CHECK(particle(w, k)[3] == 1.0f);
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_world_step(w, DT));
    CHECK(particle(w, k)[1] < here[1] - 0.1f);
    pbd_world_destroy(w);
}

/* ---- free fall: the exact discrete answer of symplectic Euler ------------------------ */
/* N substeps of h: v_N = v0 + N g h, x_N = x0 + N h v0 + g h^2 N (N+1) / 2.
   The float scheme v = (p - x) / h loses digits to cancellation (x is
   a few ulps off after each substep and those errors are integrated), so
   positions start near the origin: simulated in float, these cases stay
   within 4e-6 m and 9e-5 m/s of the exact discrete answer, while the next
   most likely integrators (explicit Euler, x += h v before v += h g, or
   gravity applied to positions as g h^2 / 2) are off by >= 3e-3 m. */
static void free_fall_case(int substeps, const float *gravity, int steps) {
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = substeps;
    if (gravity) memcpy(d.gravity, gravity, sizeof d.gravity);
    pbd_world *w = make_world(&d);
    if (!w) return;
    float x0[6] = {0.1f, 0.05f, -0.1f, -0.05f, 0.0f, 0.03f}, v0[6] = {0.5f, 1.0f, -0.25f, 0, 0, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x0;
    pd.velocities = v0;
    pd.count = 2;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    for (int i = 0; i < steps; ++i) CHECK_OK(pbd_world_step(w, DT));
    double h = (double)DT / substeps, N = (double)steps * substeps;
    for (int p = 0; p < 2; ++p)
        for (int k = 0; k < 3; ++k) {
            double g = d.gravity[k];
            double xe = x0[3 * p + k] + N * h * v0[3 * p + k] + g * h * h * N * (N + 1) / 2;
            double ve = v0[3 * p + k] + N * g * h;
            CHECK_MSG(fabs(particle(w, p)[k] - xe) <= 1e-5,
                      "substeps %d particle %d axis %d: x %.9g, exact discrete %.9g", substeps, p, k, particle(w, p)[k],
                      xe);
            CHECK_MSG(fabs(pbd_world_velocities(w)[4 * p + k] - ve) <= 3e-4,
                      "substeps %d particle %d axis %d: v %.9g, exact discrete %.9g", substeps, p, k,
                      pbd_world_velocities(w)[4 * p + k], ve);
        }
    CHECK_NEAR(pbd_world_time(w), steps * (double)DT, 1e-9);
    pbd_world_destroy(w);
}

TEST(world_free_fall_exact_discrete) {
    free_fall_case(4, NULL, 10);
    free_fall_case(1, NULL, 10);
    free_fall_case(8, NULL, 5);
    const float g[3] = {1.0f, -5.0f, 2.0f};
    free_fall_case(3, g, 10);
}

TEST(world_set_gravity_and_solver) {
    pbd_world *w = make_default_world();
    if (!w) return;
    int p = add_one(w, 0, 0, 0, 1.0f);
    const float g[3] = {2.0f, 0.0f, -1.0f};
    CHECK_OK(pbd_world_set_gravity(w, g));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 2, 3));
    for (int i = 0; i < 6; ++i) CHECK_OK(pbd_world_step(w, DT));
    double h = (double)DT / 2, N = 12;
    CHECK_NEAR(particle(w, p)[0], 2.0 * h * h * N * (N + 1) / 2, 1e-5);
    CHECK_NEAR(particle(w, p)[1], 0.0, 1e-7);
    CHECK_NEAR(particle(w, p)[2], -1.0 * h * h * N * (N + 1) / 2, 1e-5);
    pbd_world_destroy(w);
}

/* ---- acceleration field ------------------------------------------------------------ */
typedef struct field_log {
    int calls;
    int per_particle[4];
    double max_time;
    int bad_args;
} field_log;
static void wind_field(void *user, int particle, const float *x, const float *v, double time, float *out) {
    field_log *l = (field_log *)user;
#ifdef _OPENMP
#pragma omp critical(pbdt_wind_field)
#endif
    {
        l->calls++;
        if (particle >= 0 && particle < 4) l->per_particle[particle]++;
        if (time > l->max_time) l->max_time = time;
        if (!x || !v || !isfinite(x[0]) || !isfinite(v[0])) l->bad_args++;
    }
    out[0] = 1.5f * (float)particle;
    out[1] = 0.0f;
    out[2] = -0.5f;
}

TEST(world_acceleration_field) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = make_world(&d);
    if (!w) return;
    for (int i = 0; i < 4; ++i) add_one(w, 0.01f * i, 0.05f, 0, 1.0f); /* near 0: see free fall */
    CHECK_OK(pbd_particle_pin(w, 3));                                  /* not dynamic: never asked */
    field_log log;
    memset(&log, 0, sizeof log);
    CHECK_OK(pbd_world_set_acceleration_field(w, wind_field, &log));
    const int steps = 10;
    for (int i = 0; i < steps; ++i) CHECK_OK(pbd_world_step(w, DT));
    CHECK_MSG(log.calls == 3 * steps * d.substeps, "field called %d times, want %d", log.calls, 3 * steps * d.substeps);
    for (int i = 0; i < 3; ++i) CHECK(log.per_particle[i] == steps * d.substeps);
    CHECK(log.per_particle[3] == 0);
    CHECK(log.bad_args == 0);
    CHECK(log.max_time <= steps * (double)DT + 1e-9 && log.max_time >= (steps - 1) * (double)DT);
    /* same as changing gravity: exact discrete answer with g + a_i */
    double h = (double)DT / d.substeps, N = (double)steps * d.substeps, q = h * h * N * (N + 1) / 2;
    for (int i = 0; i < 3; ++i) {
        CHECK_NEAR(particle(w, i)[0], 0.01f * i + 1.5 * i * q, 1e-5);
        CHECK_NEAR(particle(w, i)[1], 0.05f + d.gravity[1] * q, 1e-5);
        CHECK_NEAR(particle(w, i)[2], -0.5 * q, 1e-5);
    }
    CHECK(particle(w, 3)[0] == 0.03f && particle(w, 3)[1] == 0.05f);
    /* a world whose gravity includes the wind gives the same motion */
    pbd_world_desc d2 = d;
    d2.gravity[0] = 1.5f;
    d2.gravity[2] = -0.5f;
    pbd_world *w2 = make_world(&d2);
    if (w2) {
        add_one(w2, 0.01f, 0.05f, 0, 1.0f);
        for (int i = 0; i < steps; ++i) CHECK_OK(pbd_world_step(w2, DT));
        for (int k = 0; k < 3; ++k) CHECK_NEAR(particle(w2, 0)[k], particle(w, 1)[k], 1e-6);
        pbd_world_destroy(w2);
    }
    /* removing it */
    CHECK_OK(pbd_world_set_acceleration_field(w, NULL, NULL));
    int before = log.calls;
    CHECK_OK(pbd_world_step(w, DT));
    CHECK(log.calls == before);
    pbd_world_destroy(w);
}

/* ---- a user allocator ---------------------------------------------------------------- */
typedef struct alloc_stats {
    long allocs, frees, live;
    size_t bytes, live_bytes;
} alloc_stats;
static void *count_alloc(void *user, size_t size) {
    alloc_stats *s = (alloc_stats *)user;
    size_t *p = (size_t *)malloc(size + 16);
    if (!p) return NULL;
    p[0] = size;
    s->allocs++;
    s->live++;
    s->bytes += size;
    s->live_bytes += size;
    return (char *)p + 16;
}
static void count_free(void *user, void *ptr) {
    alloc_stats *s = (alloc_stats *)user;
    if (!ptr) return;
    size_t *p = (size_t *)((char *)ptr - 16);
    s->frees++;
    s->live--;
    s->live_bytes -= p[0];
    free(p);
}

/* a cloth with attachments, a free particle, colliders and a kinematic particle */
static void build_scene(pbd_world *w, pbd_object *cloth_out) {
    pbd_mesh m;
    float o[3] = {-0.5f, 1.0f, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(12, 12, o, u, v, &m));
    pbd_cloth_desc c = pbdt_cloth_desc(&m);
    c.bending_compliance = 1e-3f;
    c.area_constraints = 1;
    c.damping = 0.1f;
    pbd_object cloth;
    memset(&cloth, 0, sizeof cloth);
    CHECK_OK(pbd_add_cloth(w, &c, &cloth));
    if (cloth_out) *cloth_out = cloth;
    const int first = pbdt_parts(w, cloth).particles.first;
    int corners[2] = {first, first + 11};
    float targets[6] = {-0.5f, 1.0f, -0.5f, 0.5f, 1.0f, -0.5f};
    pbd_attachments_desc a = pbd_attachments_desc_default();
    a.count = 2;
    a.particles = corners;
    a.target_points = targets;
    pbd_group ag;
    CHECK_OK(pbd_add_attachments(w, &a, &ag));
    pbd_mesh_free(&m);
    float centre[3] = {0.1f, 0.6f, 0.1f}, ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_sphere(w, centre, 0.25f, 0.5f, NULL));
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.3f, NULL));
    float a0[3] = {0.6f, 0.3f, -0.2f}, a1[3] = {0.6f, 0.3f, 0.4f}, he[3] = {0.2f, 0.1f, 0.2f},
          rot[4] = {0, 0.38268343f, 0, 0.92387953f}, bc[3] = {-0.7f, 0.1f, 0.3f};
    CHECK_OK(pbd_add_collider_capsule(w, a0, a1, 0.1f, 0.4f, NULL));
    CHECK_OK(pbd_add_collider_box(w, bc, he, rot, 0.6f, NULL));
    /* free particles dropping onto the capsule and the box, one kinematic */
    float pp[9] = {0.6f, 0.8f, 0.1f, -0.7f, 0.9f, 0.3f, 0.0f, 1.5f, 0.0f}, pv[9] = {0, 0, 0, 0.1f, 0, 0, 0, 0, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pp;
    pd.velocities = pv;
    pd.count = 3;
    pd.radius = 0.02f;
    pbd_range r;
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    CHECK_OK(pbd_particle_set_kinematic(w, r.first + 2, 1));
    float t[3] = {0.1f, 1.4f, 0.0f};
    CHECK_OK(pbd_particle_set_kinematic_target(w, r.first + 2, t));
}

TEST(world_custom_allocator) {
    alloc_stats st;
    memset(&st, 0, sizeof st);
    pbd_world_desc d = pbd_world_desc_default();
    d.allocator.alloc = count_alloc;
    d.allocator.free = count_free;
    d.allocator.user = &st;
    pbd_world *w = make_world(&d);
    if (!w) return;
    CHECK(st.allocs > 0); /* the world itself */
    build_scene(w, NULL);
    size_t particles = (size_t)pbd_world_particle_count(w);
    CHECK(st.live_bytes >= particles * 4 * sizeof(float) * 2); /* positions and velocities at least */
    long before = st.allocs, freed = st.frees;
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_world_step(w, DT));
    CHECK_MSG(st.allocs == before && st.frees == freed, "pbd_world_step allocated %ld / freed %ld", st.allocs - before,
              st.frees - freed);
    /* snapshots and restores go through it too and leak nothing */
    size_t n = pbd_world_snapshot_size(w);
    void *buf = malloc(n);
    CHECK_OK(pbd_world_save(w, buf, n));
    CHECK_OK(pbd_world_restore(w, buf, n));
    free(buf);
    pbd_world_destroy(w);
    CHECK_MSG(st.live == 0 && st.live_bytes == 0, "%ld blocks (%zu bytes) not freed", st.live, st.live_bytes);
    CHECK(st.allocs == st.frees);
}

/* ---- snapshot / restore ------------------------------------------------------------- */
static unsigned char *save_world(const pbd_world *w, size_t *size) {
    *size = pbd_world_snapshot_size(w);
    unsigned char *b = (unsigned char *)malloc(*size ? *size : 1);
    CHECK(*size > 0);
    CHECK_OK(pbd_world_save(w, b, *size));
    return b;
}
static float *copy_state(const pbd_world *w, int *n) {
    *n = pbd_world_particle_count(w);
    float *s = (float *)malloc(sizeof(float) * 8 * (*n ? *n : 1));
    memcpy(s, pbd_world_positions(w), sizeof(float) * 4 * *n);
    memcpy(s + 4 * *n, pbd_world_velocities(w), sizeof(float) * 4 * *n);
    return s;
}

TEST(world_snapshot_restore_bit_identical) {
    pbd_world *w = make_default_world();
    if (!w) return;
    build_scene(w, NULL);
    for (int i = 0; i < 30; ++i) CHECK_OK(pbd_world_step(w, DT));
    size_t size;
    unsigned char *snap = save_world(w, &size);
    double t30 = pbd_world_time(w);
    for (int i = 0; i < 50; ++i) CHECK_OK(pbd_world_step(w, DT));
    int n;
    float *want = copy_state(w, &n);
    double t80 = pbd_world_time(w);
    CHECK(pbd_world_contact_count(w) > 0); /* the scene does collide */

    /* restore into the same world */
    CHECK_OK(pbd_world_restore(w, snap, size));
    CHECK(pbd_world_time(w) == t30);
    size_t size2;
    unsigned char *again = save_world(w, &size2);
    CHECK(size2 == size && memcmp(again, snap, size) == 0); /* save(restore(s)) == s */
    free(again);
    for (int i = 0; i < 50; ++i) CHECK_OK(pbd_world_step(w, DT));
    int n2;
    float *got = copy_state(w, &n2);
    CHECK(n2 == n);
    CHECK_MSG(memcmp(want, got, sizeof(float) * 8 * n) == 0, "restored world diverged");
    CHECK(pbd_world_time(w) == t80);
    free(got);

    /* restore into a different, fresh world with other parameters */
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = 1;
    d.iterations = 9;
    d.gravity[1] = 0;
    d.point_damping = 3;
    pbd_world *w2 = make_world(&d);
    if (w2) {
        add_one(w2, 5, 5, 5, 3.0f); /* existing content is replaced */
        CHECK_OK(pbd_world_restore(w2, snap, size));
        CHECK(pbd_world_particle_count(w2) == n);
        CHECK(pbd_world_group_count(w2) == pbd_world_group_count(w));
        CHECK(pbd_world_object_count(w2) == pbd_world_object_count(w));
        CHECK(pbd_world_collider_count(w2) == pbd_world_collider_count(w));
        for (int i = 0; i < 50; ++i) CHECK_OK(pbd_world_step(w2, DT));
        got = copy_state(w2, &n2);
        CHECK(n2 == n);
        CHECK_MSG(n2 == n && memcmp(want, got, sizeof(float) * 8 * n) == 0,
                  "world restored into a fresh world diverged");
        CHECK(pbd_world_time(w2) == t80);
        free(got);
        pbd_world_destroy(w2);
    }
    free(want);
    free(snap);
    pbd_world_destroy(w);
}

/* a bad restore is refused and changes nothing */
static void expect_bad_restore(pbd_world *w, const void *buf, size_t size, const char *what) {
    size_t n0, n1;
    unsigned char *s0 = save_world(w, &n0);
    pbd_result r = pbd_world_restore(w, buf, size);
    CHECK_MSG(r == PBD_ERROR_BAD_SNAPSHOT, "%s: restore returned %s", what, pbd_result_string(r));
    unsigned char *s1 = save_world(w, &n1);
    CHECK_MSG(n0 == n1 && memcmp(s0, s1, n0) == 0, "%s: the world changed", what);
    free(s0);
    free(s1);
}

/* Snapshot b of n bytes gets its checksum (FNV-1a of all bytes before
   its last 8) again, after a test changed it. */
static void reseal_snapshot(unsigned char *b, size_t n) {
    uint64_t sum = 14695981039346656037ull;
    for (size_t i = 0; i + 8 < n; ++i) sum = (sum ^ b[i]) * 1099511628211ull;
    memcpy(b + n - 8, &sum, 8);
}
/* Snapshot snap (n bytes) as an older version wrote it: without the
   `cut` bytes before its checksum, of `version` (malloc'd, n - cut). */
static unsigned char *older_snapshot(const unsigned char *snap, size_t n, size_t cut, unsigned version) {
    unsigned char *old = (unsigned char *)malloc(n - cut);
    memcpy(old, snap, n - cut - 8);
    memcpy(old + 4, &version, 4);
    reseal_snapshot(old, n - cut);
    return old;
}

/* reference_dt: substeps count per reference step, so every step keeps
   about the reference's substep, a longer one with more substeps, a
   shorter one with fewer, at least 1 (pbd_world_step_substeps); refused values change
   nothing; snapshots keep it, and a version 9 one (before it) restores
   with a fixed count. */
TEST(world_reference_dt_keeps_the_substep) {
    pbd_world_desc d = pbd_world_desc_default();
    CHECK(d.reference_dt == 1.0f / 60.0f);
    pbd_world *w = make_default_world();
    if (!w) return;
    add_one(w, 0, 1, 0, 1.0f);
    const float dts[] = {1.0f / 60, 0.016667f, 1.0f / 120, 1e-6f, 0.017f,    0.02f,
                         1.0f / 30, 0.25f,     1.0f,       0.01f, 1.0f / 240};
    const int want[] = {4, 4, 2, 1, 5, 5, 8, 60, 240, 3, 1};
    for (int k = 0; k < (int)(sizeof want / sizeof *want); ++k)
        CHECK_MSG(pbd_world_step_substeps(w, dts[k]) == want[k], "dt %g: %d substeps, want %d", (double)dts[k],
                  pbd_world_step_substeps(w, dts[k]), want[k]);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1000, 1));
    CHECK(pbd_world_step_substeps(w, 1.0f) == 1000); /* capped */
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 2, 4));
    CHECK_OK(pbd_world_set_reference_dt(w, 1.0f / 120));
    CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 4 && pbd_world_step_substeps(w, 1.0f / 120) == 2 &&
          pbd_world_step_substeps(w, 1.0f / 240) == 1 && pbd_world_step_substeps(w, 1.0f / 480) == 1);
    /* a 1/30 s step is two 1/60 s steps' worth of substeps: a free fall
       lands where 2 x 4 substeps of 1/240 s put it */
    CHECK_OK(pbd_world_step(w, 1.0f / 30));
    double h = 1.0 / 240, N = 8;
    CHECK_NEAR(particle(w, 0)[1], 1.0 - 9.81 * h * h * N * (N + 1) / 2, 1e-5);
    const float bad[] = {-1.0f / 60, 2.0f, 1e-7f, NAN, INFINITY};
    for (int k = 0; k < 5; ++k) {
        pbd_result r = pbd_world_set_reference_dt(w, bad[k]);
        CHECK_MSG(r == (k < 3 ? PBD_ERROR_INVALID_ARGUMENT : PBD_ERROR_NOT_FINITE), "%g: %s", (double)bad[k],
                  pbd_result_string(r));
        CHECK(strstr(pbd_world_last_error(w), "reference_dt") != NULL);
        CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 4);
        pbd_world_desc bd = pbd_world_desc_default();
        bd.reference_dt = bad[k];
        pbd_world *none = NULL;
        CHECK(pbd_world_create(&bd, &none) == r && none == NULL);
    }
    CHECK_RESULT(pbd_world_set_reference_dt(NULL, 0), PBD_ERROR_NULL_POINTER);
    /* snapshots */
    size_t n;
    unsigned char *snap = save_world(w, &n);
    pbd_world *r = make_default_world();
    CHECK_OK(pbd_world_restore(r, snap, n));
    CHECK(pbd_world_step_substeps(r, 1.0f / 60) == 4);
    /* before the checksum: reference_dt, granular_cfl, the time carried
       over (4 bytes each) */
    unsigned char *old = older_snapshot(snap, n, 12, 9);
    CHECK_OK(pbd_world_restore(r, old, n - 12));
    CHECK(pbd_world_step_substeps(r, 1.0f / 30) == 2 && pbd_world_step_substeps(r, 1.0f) == 2);
    float nan = NAN; /* a forged reference_dt is refused */
    memcpy(snap + n - 20, &nan, 4);
    reseal_snapshot(snap, n);
    expect_bad_restore(r, snap, n, "reference_dt NaN");
    free(old);
    free(snap);
    pbd_world_destroy(r);
    pbd_world_destroy(w);
}

/* A hanging cloth pinned at two corners, at rest after 3 s at 60 Hz;
   *range its particles. */
static pbd_world *resting_curtain(pbd_world_desc d) {
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    float o[3] = {0, 2, 0}, u[3] = {1, 0, 0}, v[3] = {0, -1, 0};
    pbd_mesh m;
    pbd_object ob = pbdt_grid_cloth(w, 16, 16, o, u, v, &m, NULL);
    CHECK(ob.id != 0);
    CHECK_OK(pbd_particle_pin(w, 0));
    CHECK_OK(pbd_particle_pin(w, 15));
    pbd_mesh_free(&m);
    for (int s = 0; s < 180; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    return w;
}

/* A step shorter than an eighth of the reference substep is carried over
   to the next (pbd_world_step): one step of 10 us turned the error the
   1/60 s steps left into velocity (error / h) and threw a resting curtain
   at 11 m/s (1 m/s at 0.1 ms). Carried, it changes nothing but the
   carry; the next step simulates it too, and snapshots keep it; a world
   with a fixed substep count (reference_dt 0) never carries. */
TEST(world_short_steps_are_carried_over) {
    pbd_world *w = resting_curtain(pbd_world_desc_default());
    float rest = pbdt_max_speed(w);
    int np = pbd_world_particle_count(w);
    size_t bytes = sizeof(float) * 4 * (size_t)np;
    float *x0 = (float *)malloc(bytes);
    memcpy(x0, pbd_world_positions(w), bytes);
    double t0 = pbd_world_time(w);
    CHECK_OK(pbd_world_step(w, 1e-5f));
    CHECK(pbd_world_time(w) == t0 && memcmp(pbd_world_positions(w), x0, bytes) == 0); /* nothing moved */
    size_t n2;
    unsigned char *carried = save_world(w, &n2); /* with the carry */
    pbd_world *twin = make_default_world();
    CHECK_OK(pbd_world_restore(twin, carried, n2));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK_OK(pbd_world_step(twin, 1.0f / 60.0f));
    CHECK_MSG(pbd_world_time(w) == t0 + (double)(1.0f / 60.0f + 1e-5f), "time %.9f, wanted %.9f", pbd_world_time(w),
              t0 + (double)(1.0f / 60.0f + 1e-5f));
    CHECK(memcmp(pbd_world_positions(w), pbd_world_positions(twin), bytes) == 0);
    float after = pbdt_max_speed(w);
    CHECK_MSG(after < rest + 0.01f, "a carried 10 us step jolted the curtain from %.4f to %.4f m/s", (double)rest,
              (double)after);
    /* 0.1 ms steps: carried until they make a step worth simulating (an
       eighth of the reference substep, 0.52 ms), whose jolt is about a 1
       ms step's; the time simulated lags the time given by less than that */
    double t1 = pbd_world_time(w);
    float worst = 0;
    for (int k = 0; k < 25; ++k) {
        CHECK_OK(pbd_world_step(w, 1e-4f));
        worst = pbdt_max_speed(w) > worst ? pbdt_max_speed(w) : worst;
    }
    CHECK_MSG(worst < rest + 0.25f, "0.1 ms steps jolted it to %.4f m/s", (double)worst);
    double lag = t1 + 25e-4 - pbd_world_time(w);
    CHECK_MSG(lag > -1e-6 && lag < 0.53e-3, "time %.6f after 2.5 ms of 0.1 ms steps from %.6f", pbd_world_time(w), t1);
    /* a fixed substep count steps whatever it is given */
    pbd_world_desc fixed = pbd_world_desc_default();
    fixed.reference_dt = 0;
    pbd_world *f = resting_curtain(fixed);
    double tf = pbd_world_time(f);
    CHECK_OK(pbd_world_step(f, 1e-5f));
    CHECK(pbd_world_time(f) > tf);
    free(x0);
    free(carried);
    pbd_world_destroy(f);
    pbd_world_destroy(twin);
    pbd_world_destroy(w);
}

/* granular_cfl: grains (loose particles with particle contact) of
   radius r make a step take ceil(dt sqrt(|g| / r) / granular_cfl)
   substeps; an object's particles, a fluid's, pinned grains and grains
   without contact do not count; 0 or no gravity: the world's count.
   Refused values name the field; snapshots keep it, and a version 10 one
   (before it) restores with 0. */
static pbd_range add_grains(pbd_world *w, float radius, float mass) {
    float pos[6] = {0, 1, 0, 0.5f, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = 2;
    pd.radius = radius;
    pd.mass = mass;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_particles(w, &pd, &r));
    return r;
}
TEST(world_granular_cfl_gives_grains_their_substeps) {
    CHECK(pbd_world_desc_default().granular_cfl == 0.033f);
    pbd_world *w = make_default_world();
    if (!w) return;
    pbd_range pinned = add_grains(w, 0.001f, 0.0f), small = add_grains(w, 0.05f, 1.0f);
    CHECK_OK(pbd_particles_set_particle_contact(w, pinned, 1));
    CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 4); /* a pinned grain needs nothing */
    CHECK_OK(pbd_particles_set_particle_contact(w, small, 1));
    /* 5 cm: 1/60 sqrt(9.81 / 0.05) / 0.033 = 7.07; 1/30: 14.1 */
    CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 8 && pbd_world_step_substeps(w, 1.0f / 30) == 15);
    pbd_range one_cm = add_grains(w, 0.01f, 1.0f);
    CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 8); /* no contact: no grain */
    CHECK_OK(pbd_particles_set_particle_contact(w, one_cm, 1));
    CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 16); /* 15.8 */
    float zero[3] = {0, 0, 0}, down[3] = {0, -9.81f, 0};
    CHECK_OK(pbd_world_set_gravity(w, zero));
    CHECK(pbd_world_step_substeps(w, 1.0f / 60) == 4);
    CHECK_OK(pbd_world_set_gravity(w, down));
    /* a cloth's particles are no grains, whatever their radius */
    pbd_world *c = make_default_world();
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    pbd_object cloth = pbdt_grid_cloth(c, 2, 2, o, u, v, &m, NULL);
    pbd_mesh_free(&m);
    CHECK_OK(pbd_object_set_particle_contact(c, cloth, 1));
    CHECK(pbd_world_step_substeps(c, 1.0f / 60) == 4);
    pbd_world_destroy(c);
    /* refused at create */
    const float bad[] = {-0.01f, NAN, INFINITY};
    for (int k = 0; k < 3; ++k) {
        pbd_world_desc bd = pbd_world_desc_default();
        bd.granular_cfl = bad[k];
        pbd_world *none = NULL;
        pbd_result r = pbd_world_create(&bd, &none);
        CHECK_MSG(r == (k == 0 ? PBD_ERROR_INVALID_ARGUMENT : PBD_ERROR_NOT_FINITE) && none == NULL, "%g: %s",
                  (double)bad[k], pbd_result_string(r));
        CHECK(strstr(pbd_last_error(), "granular_cfl") != NULL);
    }
    /* snapshots: a world of granular_cfl 0.066 restored into a default
       one steps as it did */
    pbd_world_desc hd = pbd_world_desc_default();
    hd.granular_cfl = 0.066f;
    pbd_world *half = make_world(&hd);
    CHECK_OK(pbd_particles_set_particle_contact(half, add_grains(half, 0.01f, 1.0f), 1));
    CHECK(pbd_world_step_substeps(half, 1.0f / 60) == 8);
    size_t n;
    unsigned char *snap = save_world(half, &n);
    pbd_world *r = make_default_world();
    CHECK_OK(pbd_world_restore(r, snap, n));
    CHECK(pbd_world_step_substeps(r, 1.0f / 60) == 8);
    /* version 10: the snapshot without its granular_cfl and carry (the 8
       bytes before the checksum) restores with none */
    unsigned char *old = older_snapshot(snap, n, 8, 10);
    CHECK_OK(pbd_world_restore(r, old, n - 8));
    CHECK(pbd_world_step_substeps(r, 1.0f / 60) == 4);
    const float forged[] = {NAN, -1.0f}; /* a forged granular_cfl is refused */
    for (int k = 0; k < 2; ++k) {
        memcpy(snap + n - 16, &forged[k], 4);
        reseal_snapshot(snap, n);
        expect_bad_restore(r, snap, n, "granular_cfl forged");
    }
    free(old);
    free(snap);
    pbd_world_destroy(r);
    pbd_world_destroy(half);
    pbd_world_destroy(w);
}

TEST(world_snapshot_truncated_or_garbage) {
    pbd_world *w = make_default_world();
    if (!w) return;
    build_scene(w, NULL);
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_world_step(w, DT));
    size_t size;
    unsigned char *snap = save_world(w, &size);
    pbd_world *other = make_default_world(); /* a different world to restore into */
    if (!other) {
        free(snap);
        pbd_world_destroy(w);
        return;
    }
    add_one(other, 1, 2, 3, 1.0f);
    char what[64];
    const size_t cuts[] = {0, 1, 4, 8, 16, 64, size / 3, size / 2, size - 8, size - 1};
    for (unsigned i = 0; i < sizeof cuts / sizeof cuts[0]; ++i) {
        if (cuts[i] >= size) continue;
        snprintf(what, sizeof what, "truncated to %zu of %zu", cuts[i], size);
        expect_bad_restore(w, snap, cuts[i], what);
        expect_bad_restore(other, snap, cuts[i], what);
    }
    /* header: any of the first 8 bytes changed */
    unsigned char *bad = (unsigned char *)malloc(size);
    for (int i = 0; i < 8 && (size_t)i < size; ++i) {
        memcpy(bad, snap, size);
        bad[i] ^= 0x5a;
        snprintf(what, sizeof what, "header byte %d changed", i);
        expect_bad_restore(w, bad, size, what);
    }
    memset(bad, 0, size);
    expect_bad_restore(other, bad, size, "all zero");
    unsigned s = 4711u;
    for (size_t i = 0; i < size; ++i) bad[i] = (unsigned char)(pbdt_rand(&s) * 256);
    expect_bad_restore(other, bad, size, "random bytes");
    /* a snapshot of one world still restores into another after all that */
    CHECK_OK(pbd_world_restore(other, snap, size));
    free(bad);
    free(snap);
    pbd_world_destroy(other);
    pbd_world_destroy(w);
}

/* A snapshot corrupted in its body (counts, indices, floats) is not a
   snapshot of this version: restore must refuse it rather than load a
   state that can index out of bounds. */
TEST(world_snapshot_body_corruption) {
    pbd_world *w = make_default_world();
    if (!w) return;
    build_scene(w, NULL);
    for (int i = 0; i < 10; ++i) CHECK_OK(pbd_world_step(w, DT));
    size_t size;
    unsigned char *snap = save_world(w, &size);
    unsigned char *bad = (unsigned char *)malloc(size);
    char what[64];
    int accepted = 0;
    for (int k = 0; k < 48; ++k) {
        size_t at = 8 + (size - 8) * (size_t)k / 48;
        memcpy(bad, snap, size);
        bad[at] ^= 0x10;
        size_t n0, n1;
        unsigned char *s0 = save_world(w, &n0);
        pbd_result r = pbd_world_restore(w, bad, size);
        unsigned char *s1 = save_world(w, &n1);
        if (r == PBD_OK) {
            accepted++;
            CHECK_OK(pbd_world_restore(w, snap, size)); /* back to the good state */
        } else {
            snprintf(what, sizeof what, "byte %zu of %zu flipped", at, size);
            CHECK_MSG(r == PBD_ERROR_BAD_SNAPSHOT, "%s: restore returned %s", what, pbd_result_string(r));
            CHECK_MSG(n0 == n1 && memcmp(s0, s1, n0) == 0, "%s: the world changed", what);
        }
        free(s0);
        free(s1);
    }
    CHECK_MSG(accepted == 0, "%d of 48 snapshots with one flipped byte were accepted", accepted);
    free(bad);
    free(snap);
    pbd_world_destroy(w);
}

/* Corrupted snapshots whose checksum was forged to match: restore either
   refuses them or gives a world that steps without crashing or hanging
   (the sanitizer build checks every access). The world parameters at the
   front are left alone: a valid 1000 substeps x 1000 iterations is only
   slow, not wrong. */
static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* A forged snapshot whose object names a group that is not there (its
   checksum sealed again) is refused: pbd_object_get_parts and
   pbd_add_tearing read the world's groups at those indices. The cloth's
   record is found by its fields: first 0, its vertex count, a NULL
   permutation, damping 0.1, then its four parts. */
TEST(world_snapshot_object_parts_out_of_range_are_refused) {
    pbd_world *w = make_default_world();
    if (!w) return;
    pbd_object cloth;
    build_scene(w, &cloth);
    pbd_object_parts parts;
    CHECK_OK(pbd_object_get_parts(w, cloth, &parts));
    size_t size;
    unsigned char *snap = save_world(w, &size);
    int first = parts.particles.first, count = parts.particles.count;
    float damping = 0.1f;
    static const unsigned char zero[16] = {0};
    long at = -1;
    for (size_t i = 0; i + 48 <= size && at < 0; ++i) {
        if (memcmp(snap + i, &first, 4) != 0 || memcmp(snap + i + 4, &count, 4) != 0) continue;
        for (size_t j = 16; j <= 20 && at < 0; j += 4) /* the pointer's alignment: padding or not */
            if (memcmp(snap + i + 8, zero, j - 8) == 0 && memcmp(snap + i + j, &damping, 4) == 0)
                at = (long)(i + j + 4);
    }
    CHECK_MSG(at > 0, "the cloth's record is not in the snapshot");
    for (int k = 0; at > 0 && k < 4; ++k) {
        int bad[2] = {-2, pbd_world_group_count(w) + 5};
        for (int b = 0; b < 2; ++b) {
            unsigned char *forged = (unsigned char *)malloc(size);
            memcpy(forged, snap, size);
            memcpy(forged + at + 4 * k, &bad[b], 4);
            uint64_t sum = fnv1a(forged, size - 8);
            memcpy(forged + size - 8, &sum, 8);
            CHECK_MSG(pbd_world_restore(w, forged, size) == PBD_ERROR_BAD_SNAPSHOT,
                      "part %d of the cloth as group %d was restored", k, bad[b]);
            CHECK_MSG(strstr(pbd_world_last_error(w), "a field is out of range"), "message: %s",
                      pbd_world_last_error(w)); /* the refusal says why */
            free(forged);
        }
    }
    CHECK_OK(pbd_object_get_parts(w, cloth, &parts));
    free(snap);
    pbd_world_destroy(w);
}

TEST(world_snapshot_forged_checksum_fuzz) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = make_world(&d);
    if (!w) return;
    build_scene(w, NULL);
    for (int i = 0; i < 5; ++i) CHECK_OK(pbd_world_step(w, DT));
    size_t size;
    unsigned char *snap = save_world(w, &size);
    unsigned char *bad = (unsigned char *)malloc(size);
    unsigned seed = 99;
    int refused = 0, accepted = 0;
    for (int k = 0; k < 300; ++k) {
        memcpy(bad, snap, size);
        int flips = 1 + k % 4;
        for (int f = 0; f < flips; ++f) {
            size_t at = 64 + (size_t)(pbdt_rand(&seed) * (float)(size - 72));
            bad[at] = (unsigned char)(pbdt_rand(&seed) * 256.0f);
        }
        uint64_t sum = fnv1a(bad, size - 8);
        memcpy(bad + size - 8, &sum, 8);
        pbd_result r = pbd_world_restore(w, bad, size);
        CHECK(r == PBD_OK || r == PBD_ERROR_BAD_SNAPSHOT);
        if (r == PBD_OK) {
            accepted++;
            for (int s = 0; s < 2; ++s) (void)pbd_world_step(w, DT);
        } else {
            refused++;
        }
        CHECK_OK(pbd_world_restore(w, snap, size));
    }
    CHECK(refused > 0);
    free(bad);
    free(snap);
    pbd_world_destroy(w);
}

void suite_world(void) {
    RUN(world_create_destroy_defaults);
    RUN(world_particles_read_back);
    RUN(world_pin_unpin_and_zero_mass);
    RUN(world_kinematic_reaches_target);
    RUN(world_free_fall_exact_discrete);
    RUN(world_set_gravity_and_solver);
    RUN(world_acceleration_field);
    RUN(world_custom_allocator);
    RUN(world_snapshot_restore_bit_identical);
    RUN(world_reference_dt_keeps_the_substep);
    RUN(world_short_steps_are_carried_over);
    RUN(world_granular_cfl_gives_grains_their_substeps);
    RUN(world_snapshot_truncated_or_garbage);
    RUN(world_snapshot_body_corruption);
    RUN(world_snapshot_forged_checksum_fuzz);
    RUN(world_snapshot_object_parts_out_of_range_are_refused);
}
