/* fuzz_step.c - a step loop whose scene and parameters come from the
   fuzzer's bytes: solver settings (substeps, iterations, XPBD/PBD, Jacobi,
   damping, gravity), objects (cloth, soft body, balloon, fluid block,
   granular particles, hair, shape-matching lattice, multi-resolution
   cloth) with their compliances, masses and pins, colliders of every shape
   with their poses, a wind field, and per step the time step and user
   actions (collider moves, kinematic grabs, mass and velocity changes,
   tearing, snapshot round trips).

   Inputs stay finite and the time step in [1e-6, 1] s: the step's own
   detection of non-finite blow-ups is tested by the normal suite. The loop
   stops once the world is no longer sane (|x| or |v| > 1e3). Checks: no
   memory error or undefined behaviour; a step that returns an error
   leaves a world that saves, restores and steps again. */
#include "pbd.h"
#include "pbd_sm.h"
#include "fuzz.h"

typedef struct fz_wind {
    float dir[3];
    float gust;
} fz_wind;

static void fz_wind_fn(void *user, int particle, const float *x, const float *v, double time, float *out) {
    const fz_wind *wd = (const fz_wind *)user;
    float s = 1.0f + wd->gust * (float)((particle * 7 + (int)(time * 60.0)) % 5) * 0.25f;
    for (int k = 0; k < 3; ++k) out[k] = s * wd->dir[k] - 0.1f * v[k] + 0.0f * x[k];
}

static void fz_add_object(fz *f, pbd_world *w) {
    unsigned kind = fz_u8(f) % 8;
    float off[3] = {fz_range(f, -0.5f, 0.5f), fz_range(f, 0.1f, 1.0f), fz_range(f, -0.5f, 0.5f)};
    pbd_mesh m;
    memset(&m, 0, sizeof m);
    if (kind == 0 || kind == 2) { /* cloth or balloon */
        float o[3] = {off[0] - 0.2f, off[1], off[2] - 0.2f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
        int n = fz_int(f, 2, 8);
        pbd_result r = kind == 0 ? pbd_mesh_grid(n, n, o, u, v, &m)
                                 : pbd_mesh_sphere(fz_int(f, 0, 1), off, fz_range(f, 0.05f, 0.3f), &m);
        if (r != PBD_OK) return;
        pbd_balloon_desc b = pbd_balloon_desc_default();
        pbd_cloth_desc *cd = &b.cloth;
        cd->positions = m.positions;
        cd->vertex_count = m.vertex_count;
        cd->triangles = m.triangles;
        cd->triangle_count = m.triangle_count;
        cd->density = fz_range(f, 0.01f, 2);
        cd->stretch_compliance = fz_range(f, 0, 1e-2f);
        cd->bending_compliance = fz_range(f, 0, 1);
        cd->bending = (pbd_bending_model)fz_int(f, 0, 2);
        cd->area_constraints = fz_int(f, 0, 1);
        cd->thickness = fz_range(f, 0.001f, 0.03f);
        cd->damping = fz_range(f, 0, 5);
        b.pressure = fz_range(f, 0.5f, 2);
        b.drag = fz_range(f, 0, 3);
        pbd_object obj;
        r = kind == 0 ? pbd_add_cloth(w, cd, &obj) : pbd_add_balloon(w, &b, &obj);
        if (r == PBD_OK && kind == 0) {
            int pins = fz_int(f, 0, 2);
            pbd_object_parts parts;
            memset(&parts, 0, sizeof parts);
            pbd_object_get_parts(w, obj, &parts);
            for (int i = 0; i < pins; ++i) pbd_particle_pin(w, parts.particles.first + (i ? n - 1 : 0));
            if (fz_u8(f) & 1) {
                pbd_tearing_desc t = pbd_tearing_desc_default();
                t.object = obj;
                t.triangles = m.triangles;
                t.triangle_count = m.triangle_count;
                t.threshold = fz_range(f, 1.05f, 3);
                pbd_add_tearing(w, &t, NULL);
            }
            if (fz_u8(f) & 1) pbd_add_cloth_self_collision(w, obj, cd, fz_range(f, 0.002f, 0.02f), NULL);
        }
    } else if (kind == 1) { /* soft body */
        float lo[3] = {off[0] - 0.1f, off[1], off[2] - 0.1f}, hi[3] = {off[0] + 0.1f, off[1] + 0.2f, off[2] + 0.1f};
        if (pbd_mesh_tet_box(fz_int(f, 2, 4), fz_int(f, 2, 4), fz_int(f, 2, 4), lo, hi, &m) != PBD_OK) return;
        pbd_softbody_desc sd = pbd_softbody_desc_default();
        sd.positions = m.positions;
        sd.vertex_count = m.vertex_count;
        sd.tets = m.tets;
        sd.tet_count = m.tet_count;
        sd.density = fz_range(f, 10, 3000);
        sd.edge_compliance = fz_range(f, 0, 1e-3f);
        sd.volume_compliance = fz_range(f, 0, 1e-3f);
        sd.damping = fz_range(f, 0, 5);
        pbd_object obj;
        if (pbd_add_softbody(w, &sd, &obj) == PBD_OK && (fz_u8(f) & 1)) pbd_object_set_particle_contact(w, obj, 1);
    } else if (kind == 3 || kind == 4) { /* fluid block or granular pile */
        int n = fz_int(f, 2, 5);
        float d = fz_range(f, 0.02f, 0.1f);
        float *xyz = (float *)malloc(sizeof(float) * 3 * (size_t)(n * n * n));
        for (int i = 0; i < n * n * n; ++i) {
            xyz[3 * i] = off[0] + d * (float)(i % n);
            xyz[3 * i + 1] = off[1] + d * (float)(i / n % n);
            xyz[3 * i + 2] = off[2] + d * (float)(i / (n * n));
        }
        if (kind == 3) {
            pbd_fluid_desc fd = pbd_fluid_desc_default();
            fd.positions = xyz;
            fd.count = n * n * n;
            fd.spacing = d;
            fd.viscosity = fz_range(f, 0, 0.5f);
            fd.vorticity = fz_range(f, 0, 0.5f);
            pbd_add_fluid(w, &fd, NULL, NULL);
        } else {
            pbd_particles_desc pd = pbd_particles_desc_default();
            pd.positions = xyz;
            pd.count = n * n * n;
            pd.radius = 0.45f * d;
            pd.mass = fz_range(f, 0.001f, 10);
            pbd_range r;
            if (pbd_add_particles(w, &pd, &r) == PBD_OK) pbd_particles_set_particle_contact(w, r, 1);
        }
        free(xyz);
    } else if (kind == 5) { /* hair */
        float roots[6] = {off[0], off[1], off[2], off[0] + 0.05f, off[1], off[2]}, normals[6] = {0, 1, 0, 1, 0, 0};
        pbd_hair_desc h = pbd_hair_desc_default();
        h.root_positions = roots;
        h.root_normals = normals;
        h.strand_count = 2;
        h.particles_per_strand = fz_int(f, 2, 12);
        h.length = fz_range(f, 0.02f, 0.5f);
        h.damping = fz_range(f, 0, 1);
        pbd_add_hair(w, &h, NULL, NULL);
    } else if (kind == 6) { /* shape-matching lattice */
        int nx = fz_int(f, 1, 4), ny = fz_int(f, 1, 4), nz = fz_int(f, 1, 4);
        int cells[3 * 64];
        pbd_sm_lattice_box(nx, ny, nz, cells);
        pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
        ld.cells = cells;
        ld.cell_count = nx * ny * nz;
        memcpy(ld.origin, off, sizeof off);
        ld.spacing = fz_range(f, 0.02f, 0.1f);
        ld.half_width = fz_int(f, 1, 2);
        ld.body.mode = (pbd_sm_mode)fz_int(f, 0, 2);
        ld.body.beta = fz_range(f, 0, 1);
        ld.body.stiffness = fz_range(f, 0, 1);
        ld.body.creep = fz_range(f, 0, 5);
        pbd_sm_add_lattice(w, &ld, NULL, NULL);
    } else { /* multi-resolution cloth */
        float o[3] = {off[0] - 0.2f, off[1], off[2] - 0.2f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
        int n = fz_int(f, 3, 8);
        if (pbd_mesh_grid(n, n, o, u, v, &m) != PBD_OK) return;
        pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
        cd.positions = m.positions;
        cd.vertex_count = m.vertex_count;
        cd.triangles = m.triangles;
        cd.triangle_count = m.triangle_count;
        cd.levels = fz_int(f, 1, 4);
        cd.alpha = fz_range(f, 0, 1);
        cd.beta = fz_range(f, 0, 1);
        cd.damping = fz_range(f, 0, 1);
        cd.scheme = (pbd_sm_cloth_scheme)fz_int(f, 0, 1);
        pbd_range r;
        if (pbd_sm_add_cloth(w, &cd, NULL, &r) == PBD_OK && (fz_u8(f) & 1)) pbd_particle_pin(w, r.first);
    }
    pbd_mesh_free(&m);
}

static void fz_add_collider(fz *f, pbd_world *w) {
    float p[3] = {fz_range(f, -1, 1), fz_range(f, -0.5f, 1), fz_range(f, -1, 1)};
    float q[4] = {fz_range(f, -1, 1), fz_range(f, -1, 1), fz_range(f, -1, 1), fz_range(f, -1, 1)};
    float n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
    if (n2 < 1e-3f) {
        q[0] = q[1] = q[2] = 0;
        q[3] = 1;
    }
    unsigned shape = fz_u8(f) % 6;
    if (shape < 4) {
        pbd_collider_desc cd = pbd_collider_desc_default();
        cd.shape = (pbd_collider_shape)shape;
        memcpy(cd.position, p, sizeof p);
        memcpy(cd.rotation, q, sizeof q); /* normalised by the library (or refused) */
        cd.radius = fz_range(f, 0.01f, 0.5f);
        cd.half_height = fz_range(f, 0.01f, 0.5f);
        for (int k = 0; k < 3; ++k) cd.half_extents[k] = fz_range(f, 0.01f, 0.5f);
        cd.static_friction = fz_range(f, 0, 1);
        cd.dynamic_friction = fz_range(f, 0, cd.static_friction);
        cd.restitution = fz_range(f, 0, 1);
        pbd_add_collider(w, &cd, NULL);
    } else {
        pbd_mesh m;
        if (pbd_mesh_sphere(fz_int(f, 0, 1), p, fz_range(f, 0.05f, 0.4f), &m) != PBD_OK) return;
        pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
        md.positions = m.positions;
        md.vertex_count = m.vertex_count;
        md.triangles = m.triangles;
        md.triangle_count = m.triangle_count;
        md.sdf_resolution = shape == 5 ? fz_int(f, 2, 16) : 0;
        memcpy(md.rotation, q, sizeof q);
        pbd_add_collider_mesh(w, &md, NULL);
        pbd_mesh_free(&m);
    }
}

/* One user action between steps. */
static void fz_action(fz *f, pbd_world *w) {
    int np = pbd_world_particle_count(w), nc = pbd_world_collider_count(w);
    unsigned a = fz_u8(f) % 8;
    float p[3] = {fz_range(f, -1, 1), fz_range(f, -0.5f, 1.5f), fz_range(f, -1, 1)};
    if (a == 0 && nc) {
        float q[4] = {fz_range(f, -1, 1), fz_range(f, -1, 1), fz_range(f, -1, 1), 1};
        pbd_collider_set_pose(w, pbd_world_collider(w, fz_int(f, 0, nc - 1)), p, fz_u8(f) & 1 ? q : NULL);
    } else if (a == 1 && np) { /* a grab: kinematic and dragged */
        int i = fz_int(f, 0, np - 1);
        pbd_particle_set_kinematic(w, i, 1);
        pbd_particle_set_kinematic_target(w, i, p);
    } else if (a == 2 && np) {
        pbd_particle_set_kinematic(w, fz_int(f, 0, np - 1), 0);
    } else if (a == 3 && np) {
        pbd_particle_set_mass(w, fz_int(f, 0, np - 1), fz_range(f, 0, 10));
    } else if (a == 4 && np) {
        pbd_range r = {fz_int(f, 0, np - 1), 1};
        float v[3] = {fz_range(f, -20, 20), fz_range(f, -20, 20), fz_range(f, -20, 20)};
        pbd_particles_set_velocities(w, r, v);
    } else if (a == 5) {
        pbd_world_tear(w, NULL);
    } else if (a == 6) {
        fz_snap s = fz_save(w);
        FZ_CHECK(pbd_world_restore(w, s.d, s.n) == PBD_OK, "restoring a world's own snapshot: %s",
                 pbd_world_last_error(w));
        free(s.d);
    } else if (a == 7 && np) {
        int i = fz_int(f, 0, np - 1);
        if (fz_u8(f) & 1) pbd_particle_pin(w, i);
        else pbd_particle_unpin(w, i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = fz_make(data, size);
    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = fz_int(&f, 1, 8);
    wd.iterations = fz_int(&f, 1, 8);
    wd.mode = (pbd_solver_mode)fz_int(&f, 0, 1);
    wd.point_damping = fz_range(&f, 0, 5);
    wd.gravity[0] = fz_range(&f, -5, 5);
    wd.gravity[1] = fz_range(&f, -20, 5);
    wd.gravity[2] = fz_range(&f, -5, 5);
    wd.max_contacts_per_particle = fz_int(&f, 1, 8);
    pbd_world *w = NULL;
    FZ_CHECK(pbd_world_create(&wd, &w) == PBD_OK, "create");
    if (fz_u8(&f) & 1) pbd_world_set_jacobi(w, 1, fz_range(&f, 0.1f, 2));
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (!(fz_u8(&f) & 7)) up[0] = 0.3f; /* sometimes a slope */
    pbd_add_collider_plane(w, ground, up, fz_range(&f, 0, 1), NULL);
    int objects = fz_int(&f, 1, 3);
    for (int i = 0; i < objects; ++i) fz_add_object(&f, w);
    int colliders = fz_int(&f, 0, 3);
    for (int i = 0; i < colliders; ++i) fz_add_collider(&f, w);
    fz_wind wind = {{fz_range(&f, -10, 10), fz_range(&f, -2, 2), fz_range(&f, -10, 10)}, fz_range(&f, 0, 1)};
    if (fz_u8(&f) & 1) pbd_world_set_acceleration_field(w, fz_wind_fn, &wind);
    int steps = fz_int(&f, 1, 12);
    for (int s = 0; s < steps && fz_world_sane(w, 1e3f); ++s) {
        int actions = fz_int(&f, 0, 2);
        for (int a = 0; a < actions; ++a) fz_action(&f, w);
        float dt = fz_u8(&f) & 1 ? 1.0f / 60.0f : fz_range(&f, 1e-6f, 1.0f);
        if (pbd_world_step(w, dt) != PBD_OK) {
            /* whatever the step reports, the world stays valid */
            fz_snap snap = fz_save(w);
            FZ_CHECK(pbd_world_restore(w, snap.d, snap.n) == PBD_OK, "a world after a failed step does not restore: %s",
                     pbd_world_last_error(w));
            free(snap.d);
        }
    }
    pbd_world_destroy(w);
    return 0;
}

#ifdef PBD_FUZZ_REPLAY
/* Seeds: random scenes (fixed seed) of every object kind, at 60 Hz. */
static void fuzz_seeds(const char *dir) {
    unsigned rng = 777u;
    for (int k = 0; k < 16; ++k) {
        fz_buf b;
        b.n = 0;
        fz_put_int(&b, 1, 4);
        fz_put_int(&b, 1, 4);
        fz_put_int(&b, 0, 0);
        fz_put_range(&b, 0, 5, 0);
        fz_put_range(&b, -5, 5, 0);
        fz_put_range(&b, -20, 5, -9.81f);
        fz_put_range(&b, -5, 5, 0);
        fz_put_int(&b, 1, 4);
        fz_put_u8(&b, 0); /* Gauss-Seidel */
        fz_put_u8(&b, 1); /* flat ground */
        fz_put_range(&b, 0, 1, 0.5f);
        fz_put_int(&b, 1, 1 + k % 2);
        fz_put_u8(&b, (unsigned)(k % 8)); /* the first object's kind */
        for (int i = 0; i < 300; ++i) {
            rng = rng * 1664525u + 1013904223u;
            fz_put_u8(&b, rng >> 24);
        }
        char name[32];
        snprintf(name, sizeof name, "scene%02d", k);
        fz_write_buf(dir, name, &b);
    }
}
#endif
