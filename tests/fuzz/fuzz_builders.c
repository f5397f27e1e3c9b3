/* fuzz_builders.c - every builder and setter fed arbitrary meshes and
   parameters.

   A world starts with 16 loose particles (targets for the builders that
   take world indices); then up to 6 operations, each chosen by a byte:
   the object builders of pbd.h (cloth, soft body, balloon, hair, strands,
   long range attachments, strain limits, tearing, collision surfaces,
   mesh colliders and SDF grids, constraints, attachments, mesh volumes,
   fluids, particles, damping clusters, colliders), its setters, the
   builders of pbd_sm.h (bodies, lattices, oriented particles, surface
   volume, multi-resolution cloth, summation plans, voxelisation, rings)
   and pbd_upsample.h's mesh functions (subdivision, wrinkle meshes). Their
   meshes come from generators (grid, sphere, tet box) or raw bytes, then
   get a few entries overwritten, so both valid and broken meshes occur.
   Floats are mostly in range, sometimes any bits (NaN, Inf, huge).
   Checks: no memory error or undefined behaviour; a builder or setter that
   returns an error leaves the world's snapshot byte-identical (the
   library's contract); the world then steps and tears. */
#include "pbd.h"
#include "pbd_sm.h"
#include "pbd_upsample.h"
#include "fuzz.h"

enum { FZ_MAXV = 96, FZ_MAXT = 160, FZ_BASE = 16 };

typedef struct fz_mesh {
    float pos[3 * FZ_MAXV];
    int nv;
    int tri[3 * FZ_MAXT];
    int nt;
    int tet[4 * FZ_MAXT];
    int ntet;
} fz_mesh;

static void fz_mesh_copy(fz_mesh *fm, const pbd_mesh *m) {
    fm->nv = m->vertex_count < FZ_MAXV ? m->vertex_count : FZ_MAXV;
    memcpy(fm->pos, m->positions, sizeof(float) * 3 * (size_t)fm->nv);
    fm->nt = m->triangle_count < FZ_MAXT ? m->triangle_count : FZ_MAXT;
    if (fm->nt) memcpy(fm->tri, m->triangles, sizeof(int) * 3 * (size_t)fm->nt);
    fm->ntet = m->tet_count < FZ_MAXT ? m->tet_count : FZ_MAXT;
    if (fm->ntet) memcpy(fm->tet, m->tets, sizeof(int) * 4 * (size_t)fm->ntet);
}

/* A mesh: generated or raw, then up to 4 entries overwritten. */
static void fz_mesh_read(fz *f, fz_mesh *fm) {
    memset(fm, 0, sizeof *fm);
    pbd_mesh m;
    memset(&m, 0, sizeof m);
    unsigned src = fz_u8(f) % 4;
    pbd_result r = PBD_ERROR_INVALID_ARGUMENT;
    float o[3] = {-0.2f, 0.5f, -0.2f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
    float lo[3] = {-0.1f, 0.4f, -0.1f}, hi[3] = {0.1f, 0.6f, 0.1f}, c[3] = {0, 0.5f, 0};
    if (src == 0) r = pbd_mesh_grid(fz_int(f, 1, 8), fz_int(f, 1, 8), o, u, v, &m);
    else if (src == 1) r = pbd_mesh_sphere(fz_int(f, 0, 1), c, fz_float(f, 0, 0.3f), &m);
    else if (src == 2) r = pbd_mesh_tet_box(fz_int(f, 2, 3), fz_int(f, 2, 3), fz_int(f, 2, 3), lo, hi, &m);
    if (r == PBD_OK) fz_mesh_copy(fm, &m);
    pbd_mesh_free(&m);
    if (src == 3) {
        fm->nv = fz_int(f, 0, 24);
        for (int i = 0; i < 3 * fm->nv; ++i) fm->pos[i] = fz_float(f, -0.5f, 0.5f) + (i % 3 == 1 ? 0.5f : 0);
        fm->nt = fz_int(f, 0, 24);
        for (int i = 0; i < 3 * fm->nt; ++i) fm->tri[i] = fz_int(f, -1, fm->nv);
        fm->ntet = fz_int(f, 0, 8);
        for (int i = 0; i < 4 * fm->ntet; ++i) fm->tet[i] = fz_int(f, -1, fm->nv);
    }
    int edits = fz_int(f, 0, 4);
    for (int e = 0; e < edits; ++e) {
        unsigned what = fz_u8(f) % 3;
        if (what == 0 && fm->nv) fm->pos[fz_int(f, 0, 3 * fm->nv - 1)] = fz_float(f, -1, 1);
        else if (what == 1 && fm->nt) fm->tri[fz_int(f, 0, 3 * fm->nt - 1)] = fz_int(f, -2, fm->nv + 1);
        else if (what == 2 && fm->ntet) fm->tet[fz_int(f, 0, 4 * fm->ntet - 1)] = fz_int(f, -2, fm->nv + 1);
    }
}

/* World particle indices (some out of range). */
static void fz_indices(fz *f, const pbd_world *w, int *out, int n) {
    int np = pbd_world_particle_count(w);
    for (int i = 0; i < n; ++i) out[i] = fz_int(f, -1, np);
}

/* A handle id from a number v the bytes chose: v >= 0 names slot v at
   generation 0 (the handle of the v-th thing of its kind while nothing
   was removed; past the last, a slot out of range), -1 is no handle (0),
   -2 slot 0 at a later generation (a stale handle). */
static uint32_t fz_handle_id(int v) {
    if (v >= 0) return (uint32_t)v + 1u;
    return v == -1 ? 0u : (1u << PBD_HANDLE_SLOT_BITS) | 1u;
}
static pbd_object fz_object(int v) {
    pbd_object o;
    o.id = fz_handle_id(v);
    return o;
}
static pbd_collider fz_collider(int v) {
    pbd_collider c;
    c.id = fz_handle_id(v);
    return c;
}

static float fz_compliance(fz *f) { return fz_float(f, 0, 1e-2f); }

static pbd_object fz_last_object;   /* the last object built (tearing, LRA, surfaces) */
static pbd_range fz_last_particles; /* its particles */

static pbd_range fz_parts(const pbd_world *w, pbd_object o) {
    pbd_object_parts p;
    memset(&p, 0, sizeof p);
    pbd_object_get_parts(w, o, &p);
    return p.particles;
}
static fz_mesh fz_last_mesh;
static pbd_cloth_desc fz_last_cloth;
static int fz_last_perm[FZ_MAXV];

static pbd_result fz_cloth_desc(fz *f, const fz_mesh *fm, pbd_cloth_desc *cd, float *masses) {
    *cd = pbd_cloth_desc_default();
    cd->positions = fm->pos;
    cd->vertex_count = fz_int(f, -1, fm->nv);
    cd->triangles = fm->tri;
    cd->triangle_count = fz_int(f, -1, fm->nt);
    if (fz_u8(f) & 1) {
        for (int i = 0; i < fm->nv; ++i) masses[i] = fz_float(f, 0, 0.1f);
        cd->masses = masses;
    }
    cd->density = fz_float(f, 0, 1);
    cd->stretch_compliance = fz_compliance(f);
    cd->bending_compliance = fz_compliance(f);
    cd->area_compliance = fz_compliance(f);
    cd->bending = (pbd_bending_model)fz_int(f, -1, 3);
    cd->area_constraints = fz_int(f, 0, 1);
    cd->thickness = fz_float(f, 0, 0.05f);
    cd->damping = fz_float(f, 0, 5);
    cd->reorder = fz_int(f, 0, 1);
    cd->permutation = fz_last_perm;
    return PBD_OK;
}

static pbd_result fz_op(fz *f, pbd_world *w, unsigned op) {
    fz_mesh fm;
    float masses[FZ_MAXV];
    int idx[64];
    pbd_object obj;
    switch (op) {
        case 0: { /* cloth */
            fz_mesh_read(f, &fm);
            pbd_cloth_desc cd;
            fz_cloth_desc(f, &fm, &cd, masses);
            pbd_result r = pbd_add_cloth(w, &cd, &obj);
            if (r == PBD_OK) {
                fz_last_object = obj;
                fz_last_particles = fz_parts(w, obj);
                fz_last_mesh = fm;
                fz_last_cloth = cd;
                fz_last_cloth.positions = fz_last_mesh.pos;
                fz_last_cloth.triangles = fz_last_mesh.tri;
            }
            return r;
        }
        case 1: { /* soft body */
            fz_mesh_read(f, &fm);
            pbd_softbody_desc sd = pbd_softbody_desc_default();
            sd.positions = fm.pos;
            sd.vertex_count = fz_int(f, -1, fm.nv);
            sd.tets = fm.tet;
            sd.tet_count = fz_int(f, -1, fm.ntet);
            if (fz_u8(f) & 1) {
                for (int i = 0; i < fm.nv; ++i) masses[i] = fz_float(f, 0, 1);
                sd.masses = masses;
            }
            sd.density = fz_float(f, 0, 2000);
            sd.edge_compliance = fz_compliance(f);
            sd.volume_compliance = fz_compliance(f);
            sd.volume_constraints = fz_int(f, 0, 1);
            sd.radius = fz_float(f, 0, 0.05f);
            sd.damping = fz_float(f, 0, 5);
            sd.reorder = fz_int(f, 0, 1);
            sd.permutation = fz_last_perm;
            pbd_result r = pbd_add_softbody(w, &sd, &obj);
            if (r == PBD_OK) {
                fz_last_object = obj;
                fz_last_particles = fz_parts(w, obj);
            }
            return r;
        }
        case 2: { /* balloon */
            fz_mesh_read(f, &fm);
            pbd_balloon_desc b = pbd_balloon_desc_default();
            fz_cloth_desc(f, &fm, &b.cloth, masses);
            b.pressure = fz_float(f, 0, 3);
            b.volume_compliance = fz_compliance(f);
            b.drag = fz_float(f, -1, 3);
            pbd_result r = pbd_add_balloon(w, &b, &obj);
            if (r == PBD_OK) {
                fz_last_object = obj;
                fz_last_particles = fz_parts(w, obj);
                fz_last_mesh = fm;
                fz_last_cloth = b.cloth;
                fz_last_cloth.positions = fz_last_mesh.pos;
                fz_last_cloth.triangles = fz_last_mesh.tri;
            }
            return r;
        }
        case 3: { /* hair */
            float roots[3 * 8], normals[3 * 8];
            int n = fz_int(f, -1, 8);
            for (int i = 0; i < 3 * 8; ++i) {
                roots[i] = fz_float(f, -0.2f, 0.2f);
                normals[i] = fz_float(f, -1, 1);
            }
            pbd_hair_desc h = pbd_hair_desc_default();
            h.root_positions = roots;
            h.root_normals = normals;
            h.strand_count = n;
            h.particles_per_strand = fz_int(f, 0, 12);
            h.length = fz_float(f, 0, 0.5f);
            h.mass = fz_float(f, 0, 1e-3f);
            h.radius = fz_float(f, 0, 0.01f);
            h.damping = fz_float(f, 0, 1);
            h.clamped = fz_int(f, 0, 1);
            for (int i = 0; i < 4; ++i) h.rotation[i] = fz_float(f, -1, 1);
            pbd_strands s;
            pbd_range pr;
            pbd_result r = pbd_add_hair(w, &h, &s, &pr);
            if (r == PBD_OK) {
                float p[3] = {fz_float(f, -1, 1), fz_float(f, -1, 1), fz_float(f, -1, 1)};
                float q[4] = {fz_float(f, -1, 1), fz_float(f, -1, 1), fz_float(f, -1, 1), fz_float(f, -1, 1)};
                fz_snap before = fz_save(w);
                if (pbd_strands_set_transform(w, s, p, q) != PBD_OK) FZ_CHECK(fz_same(w, before), "hair_set_transform");
                free(before.d);
            }
            return r;
        }
        case 4: { /* strands */
            int starts[5], n = fz_int(f, -1, 4);
            fz_indices(f, w, idx, 16);
            for (int i = 0; i < 5; ++i) starts[i] = fz_int(f, -1, 17);
            pbd_strands_desc sd = pbd_strands_desc_default();
            sd.particles = idx;
            sd.strand_starts = starts;
            sd.strand_count = n;
            sd.damping = fz_float(f, 0, 1);
            return pbd_add_strands(w, &sd, NULL);
        }
        case 5: { /* long range attachments */
            int anchors[8];
            pbd_lra_desc l = pbd_lra_desc_default();
            l.object = fz_u8(f) & 1 ? fz_last_object : fz_object(fz_int(f, -2, 4));
            int local = fz_u8(f) & 1;
            for (int i = 0; i < 8; ++i)
                anchors[i] = local && fz_last_particles.count
                                 ? fz_last_particles.first + fz_int(f, -1, fz_last_particles.count)
                                 : fz_int(f, -1, pbd_world_particle_count(w));
            l.anchors = anchors;
            l.anchor_count = fz_int(f, -1, 8);
            if (fz_u8(f) & 1) {
                fz_indices(f, w, idx, 16);
                l.particles = idx;
                l.count = fz_int(f, -1, 16);
            }
            l.geodesic = fz_int(f, 0, 1);
            if (fz_u8(f) & 1) {
                fz_indices(f, w, idx + 16, 24);
                l.triangles = idx + 16;
                l.triangle_count = fz_int(f, -1, 8);
            }
            l.anchors_per_particle = fz_int(f, 0, 17);
            l.slack = fz_float(f, -0.1f, 1);
            pbd_lra out;
            pbd_result r = pbd_add_long_range_attachments(w, &l, &out);
            if (r == PBD_OK) pbd_lra_set_enabled(w, out, fz_int(f, 0, 1));
            return r;
        }
        case 6: { /* strain limit */
            pbd_strain_limit_desc s = pbd_strain_limit_desc_default();
            s.mode = (pbd_strain_mode)fz_int(f, -1, 2);
            if (fz_u8(f) & 1) {
                s.object = fz_last_object;
                s.triangles = fz_last_mesh.tri;
                s.triangle_count = fz_int(f, -1, fz_last_mesh.nt);
            } else {
                s.object = fz_object(fz_int(f, -2, 2));
                fz_indices(f, w, idx, 24);
                s.triangles = idx;
                s.triangle_count = fz_int(f, -1, 8);
            }
            s.min_stretch = fz_float(f, -0.1f, 1.1f);
            s.max_stretch = fz_float(f, 0.9f, 2);
            s.stiffness = fz_float(f, -0.1f, 1.1f);
            pbd_strain_limit out;
            pbd_result r = pbd_add_strain_limit(w, &s, &out);
            if (r == PBD_OK) {
                fz_snap before = fz_save(w);
                if (pbd_strain_limit_set_range(w, out, fz_float(f, -0.1f, 1.1f), fz_float(f, 0.9f, 2)) != PBD_OK)
                    FZ_CHECK(fz_same(w, before), "strain_limit_set_range");
                free(before.d);
            }
            return r;
        }
        case 7: { /* tearing */
            pbd_tearing_desc t = pbd_tearing_desc_default();
            t.object = fz_u8(f) & 1 ? fz_last_object : fz_object(fz_int(f, -2, 4));
            t.triangles = fz_last_mesh.tri;
            t.triangle_count = fz_int(f, -1, fz_last_mesh.nt);
            if (!fz_last_cloth.reorder) (void)fz_u8(f); /* 0.1's permutation switch: the corpus keeps its meaning */
            t.threshold = fz_float(f, 0.9f, 3);
            t.max_splits = fz_int(f, -1, 100);
            return pbd_add_tearing(w, &t, NULL);
        }
        case 8: { /* collision surfaces */
            if (fz_u8(f) & 1) {
                if (!fz_last_cloth.positions) return PBD_ERROR_INVALID_ARGUMENT;
                return pbd_add_cloth_self_collision(w, fz_last_object, &fz_last_cloth, fz_float(f, 0, 0.02f), NULL);
            }
            pbd_collision_surface_desc s = pbd_collision_surface_desc_default();
            fz_indices(f, w, idx, 36);
            s.triangles = idx;
            s.triangle_count = fz_int(f, -1, 12);
            s.thickness = fz_float(f, 0, 0.02f);
            s.self_collision = fz_int(f, 0, 1);
            return pbd_add_collision_surface(w, &s, NULL);
        }
        case 9: { /* mesh collider: BVH or SDF grid */
            fz_mesh_read(f, &fm);
            pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
            md.positions = fm.pos;
            md.vertex_count = fz_int(f, -1, fm.nv);
            md.triangles = fm.tri;
            md.triangle_count = fz_int(f, -1, fm.nt);
            md.sdf_resolution = fz_u8(f) & 1 ? fz_int(f, -1, 16) : 0;
            for (int i = 0; i < 3; ++i) md.position[i] = fz_float(f, -1, 1);
            if (fz_u8(f) & 1)
                for (int i = 0; i < 4; ++i) md.rotation[i] = fz_float(f, -1, 1);
            md.static_friction = fz_float(f, 0, 1);
            md.dynamic_friction = fz_float(f, 0, 1);
            md.restitution = fz_float(f, 0, 1);
            return pbd_add_collider_mesh(w, &md, NULL);
        }
        case 10: { /* constraints of any type */
            pbd_constraints_desc cd = pbd_constraints_desc_default();
            float rest[16];
            cd.type = (pbd_constraint_type)fz_int(f, -1, 8);
            cd.count = fz_int(f, -1, 4);
            fz_indices(f, w, idx, 16);
            cd.indices = idx;
            if (fz_u8(f) & 1) {
                for (int i = 0; i < 16; ++i) rest[i] = fz_float(f, -1, 1);
                cd.rest = rest;
            }
            cd.thickness = fz_float(f, 0, 0.1f);
            cd.compliance = fz_compliance(f);
            cd.stiffness = fz_float(f, 0, 1);
            cd.unilateral = fz_int(f, 0, 1);
            pbd_group g;
            pbd_result r = pbd_add_constraints(w, &cd, &g);
            if (r == PBD_OK) {
                fz_snap before = fz_save(w);
                unsigned s = fz_u8(f) % 4;
                pbd_result r2 = s == 0   ? pbd_group_set_compliance(w, g, fz_float(f, -1, 1))
                                : s == 1 ? pbd_group_set_stiffness(w, g, fz_float(f, -1, 2))
                                : s == 2 ? pbd_group_set_enabled(w, g, fz_int(f, -1, 2))
                                         : pbd_group_set_pressure(w, g, fz_float(f, -1, 2));
                if (r2 != PBD_OK) FZ_CHECK(fz_same(w, before), "group setter %u", s);
                free(before.d);
            }
            return r;
        }
        case 11: { /* attachments */
            pbd_attachments_desc a = pbd_attachments_desc_default();
            float pts[3 * 4];
            a.count = fz_int(f, -1, 4);
            fz_indices(f, w, idx, 8);
            a.particles = idx;
            unsigned which = fz_u8(f) % 3;
            for (int i = 0; i < 12; ++i) pts[i] = fz_float(f, -1, 1);
            if (which & 1) a.target_particles = idx + 4;
            if (which != 1) a.target_points = pts;
            a.max_distance = fz_float(f, -0.1f, 0.5f);
            a.compliance = fz_compliance(f);
            pbd_group g;
            pbd_result r = pbd_add_attachments(w, &a, &g);
            if (r == PBD_OK) {
                fz_snap before = fz_save(w);
                if (pbd_group_set_attachment_target(w, g, fz_int(f, -1, 4), pts) != PBD_OK)
                    FZ_CHECK(fz_same(w, before), "set_attachment_target");
                free(before.d);
            }
            return r;
        }
        case 12: { /* mesh volume */
            pbd_mesh_volume_desc mv = pbd_mesh_volume_desc_default();
            fz_indices(f, w, idx, 36);
            mv.triangles = idx;
            mv.triangle_count = fz_int(f, -1, 12);
            mv.pressure = fz_float(f, -0.5f, 3);
            mv.compliance = fz_compliance(f);
            return pbd_add_mesh_volume(w, &mv, NULL);
        }
        case 13: { /* fluid */
            fz_mesh_read(f, &fm);
            pbd_fluid_desc fd = pbd_fluid_desc_default();
            fd.positions = fm.pos;
            fd.count = fz_int(f, -1, fm.nv);
            fd.rest_density = fz_float(f, 0, 2000);
            fd.spacing = fz_float(f, 0, 0.2f);
            fd.kernel_radius = fz_float(f, 0, 0.5f);
            fd.radius = fz_float(f, 0, 0.1f);
            fd.relaxation = fz_float(f, 0, 0.1f);
            fd.viscosity = fz_float(f, 0, 1);
            fd.vorticity = fz_float(f, 0, 1);
            fd.scorr_k = fz_float(f, 0, 0.2f);
            fd.scorr_n = fz_float(f, 0, 8);
            fd.scorr_dq = fz_float(f, 0, 1);
            pbd_fluid fl;
            pbd_result r = pbd_add_fluid(w, &fd, &fl, NULL);
            if (r == PBD_OK) {
                fz_snap before = fz_save(w);
                if (pbd_fluid_set_viscosity(w, fl, fz_float(f, -1, 1), fz_float(f, -1, 1)) != PBD_OK)
                    FZ_CHECK(fz_same(w, before), "fluid_set_viscosity");
                free(before.d);
            }
            return r;
        }
        case 14: { /* particles */
            fz_mesh_read(f, &fm);
            pbd_particles_desc pd = pbd_particles_desc_default();
            pd.positions = fm.pos;
            pd.count = fz_int(f, -1, fm.nv);
            if (fz_u8(f) & 1) {
                for (int i = 0; i < fm.nv; ++i) masses[i] = fz_float(f, 0, 1);
                pd.masses = masses;
            }
            pd.mass = fz_float(f, 0, 1);
            pd.radius = fz_float(f, 0, 0.05f);
            pbd_range r;
            pbd_result res = pbd_add_particles(w, &pd, &r);
            if (res == PBD_OK) pbd_particles_set_particle_contact(w, r, fz_int(f, 0, 1));
            return res;
        }
        case 15: { /* damping cluster */
            fz_indices(f, w, idx, 8);
            pbd_damping_cluster c;
            pbd_result r = pbd_add_damping_cluster(w, idx, fz_int(f, -1, 8), fz_float(f, -1, 5), &c);
            if (r == PBD_OK) pbd_damping_cluster_set_damping(w, c, fz_float(f, 0, 5));
            return r;
        }
        case 16: { /* analytic collider */
            pbd_collider_desc cd = pbd_collider_desc_default();
            cd.shape = (pbd_collider_shape)fz_int(f, -1, 6);
            for (int i = 0; i < 3; ++i) cd.position[i] = fz_float(f, -1, 1);
            if (fz_u8(f) & 1)
                for (int i = 0; i < 4; ++i) cd.rotation[i] = fz_float(f, -1, 1);
            cd.radius = fz_float(f, 0, 0.5f);
            cd.half_height = fz_float(f, 0, 0.5f);
            for (int i = 0; i < 3; ++i) cd.half_extents[i] = fz_float(f, 0, 0.5f);
            cd.rounding = fz_float(f, -0.05f, 0.2f); /* a box's; below 0 is refused */
            cd.static_friction = fz_float(f, 0, 1);
            cd.dynamic_friction = fz_float(f, 0, 1);
            cd.restitution = fz_float(f, 0, 1);
            return pbd_add_collider(w, &cd, NULL);
        }
        case 17: { /* setters on particles, colliders, objects, the world */
            int np = pbd_world_particle_count(w), i = fz_int(f, -1, np);
            float p3[3] = {fz_float(f, -1, 1), fz_float(f, -1, 1), fz_float(f, -1, 1)};
            float q4[4] = {fz_float(f, -1, 1), fz_float(f, -1, 1), fz_float(f, -1, 1), fz_float(f, -1, 1)};
            pbd_range r = {fz_int(f, -1, np), fz_int(f, -1, np)};
            switch (fz_u8(f) % 16) {
                case 0: return pbd_particle_set_mass(w, i, fz_float(f, -0.1f, 1));
                case 1: return pbd_particle_set_radius(w, i, fz_float(f, -0.1f, 0.1f));
                case 2: return pbd_particle_pin(w, i);
                case 3: return pbd_particle_unpin(w, i);
                case 4: return pbd_particle_set_kinematic(w, i, fz_int(f, -1, 2));
                case 5: return pbd_particle_set_kinematic_target(w, i, p3);
                case 6:
                    return pbd_collider_set_pose(w, fz_collider(fz_int(f, -1, pbd_world_collider_count(w))), p3,
                                                 fz_u8(f) & 1 ? q4 : NULL);
                case 7:
                    return pbd_collider_set_friction(w, fz_collider(fz_int(f, -1, pbd_world_collider_count(w))), q4[0],
                                                     q4[1], q4[2]);
                case 8: {
                    pbd_object o = fz_object(fz_int(f, -1, pbd_world_object_count(w)));
                    return fz_u8(f) & 1 ? pbd_object_set_drag(w, o, p3[0]) : pbd_object_set_damping(w, o, p3[0]);
                }
                case 9:
                    return pbd_object_set_particle_contact(w, fz_object(fz_int(f, -1, pbd_world_object_count(w))),
                                                           fz_int(f, -1, 2));
                case 10: {
                    float xyz[3 * 4];
                    for (int k = 0; k < 12; ++k) xyz[k] = fz_float(f, -1, 1);
                    if (r.count > 4) r.count = 4;
                    return fz_u8(f) & 1 ? pbd_particles_set_positions(w, r, xyz)
                                        : pbd_particles_set_velocities(w, r, xyz);
                }
                case 11: return pbd_world_set_gravity(w, p3);
                case 12:
                    return pbd_world_set_solver(w, (pbd_solver_mode)fz_int(f, -1, 2), fz_int(f, -1, 9),
                                                fz_int(f, -1, 9));
                case 13: return pbd_world_set_point_damping(w, p3[0]);
                case 14: return pbd_world_set_jacobi(w, fz_int(f, -1, 2), fz_float(f, -1, 3));
                default: return pbd_world_set_particle_contact_friction(w, q4[0], q4[1]);
            }
        }
        /* ---- pbd_sm.h ---- */
        case 18: { /* shape-matching body over world particles */
            pbd_sm_body_desc bd = pbd_sm_body_desc_default();
            int starts[5];
            float rest[3 * 16];
            fz_indices(f, w, idx, 16);
            bd.particles = idx;
            bd.particle_count = fz_int(f, -1, 16);
            if (fz_u8(f) & 1) {
                bd.region_count = fz_int(f, -1, 4);
                for (int i = 0; i < 5; ++i) starts[i] = fz_int(f, -1, 20);
                for (int i = 0; i < 20; ++i) idx[16 + i] = fz_int(f, -1, 16);
                bd.region_start = starts;
                bd.region_particles = idx + 16;
            }
            if (fz_u8(f) & 1) {
                for (int i = 0; i < 48; ++i) rest[i] = fz_float(f, -0.5f, 0.5f);
                bd.rest_positions = rest;
            }
            if (fz_u8(f) & 1) {
                for (int i = 0; i < 16; ++i) masses[i] = fz_float(f, 0, 1);
                bd.masses = masses;
            }
            bd.mode = (pbd_sm_mode)fz_int(f, -1, 3);
            bd.beta = fz_float(f, -0.1f, 1.1f);
            bd.stiffness = fz_float(f, -0.1f, 1.1f);
            bd.yield = fz_float(f, -0.1f, 1);
            bd.creep = fz_float(f, -0.1f, 10);
            bd.max_plastic = fz_float(f, -0.1f, 2);
            bd.rotation_iterations = fz_int(f, -1, 101);
            return pbd_sm_add_body(w, &bd, NULL);
        }
        case 19: { /* lattice */
            pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
            int cells[3 * 27];
            int n = fz_int(f, -1, 27);
            if (fz_u8(f) & 1) pbd_sm_lattice_box(3, 3, 3, cells);
            else
                for (int i = 0; i < 81; ++i) cells[i] = fz_int(f, -3, 5);
            int edits = fz_int(f, 0, 3);
            for (int e = 0; e < edits; ++e) cells[fz_int(f, 0, 80)] = fz_int(f, -3, 5);
            ld.cells = cells;
            ld.cell_count = n;
            for (int i = 0; i < 3; ++i) ld.origin[i] = fz_float(f, -1, 1);
            ld.spacing = fz_float(f, 0, 0.2f);
            ld.particle_mass = fz_float(f, 0, 1);
            ld.radius = fz_float(f, 0, 0.1f);
            ld.half_width = fz_int(f, -1, 4);
            ld.body.mode = (pbd_sm_mode)fz_int(f, 0, 2);
            ld.body.creep = fz_float(f, 0, 5);
            pbd_sm_body b = {0};
            pbd_result r = pbd_sm_add_lattice(w, &ld, &b, NULL);
            if (r == PBD_OK) {
                pbd_sm_body_set_stiffness(w, b, fz_float(f, -0.1f, 1.1f));
                pbd_sm_body_set_mode(w, b, (pbd_sm_mode)fz_int(f, -1, 3), fz_float(f, -0.1f, 1.1f));
                pbd_sm_body_set_plasticity(w, b, fz_float(f, -0.1f, 1), fz_float(f, -0.1f, 5), fz_float(f, -0.1f, 2));
            }
            return r;
        }
        case 20: { /* oriented particles */
            pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
            float radii[3 * 16], q[4 * 16];
            int np = pbd_world_particle_count(w);
            od.particles.first = fz_int(f, -1, np);
            od.particles.count = fz_int(f, -1, 16);
            od.edge_count = fz_int(f, -1, 16);
            for (int i = 0; i < 32; ++i) idx[i] = fz_int(f, -1, 16);
            od.edges = idx;
            if (fz_u8(f) & 1) {
                for (int i = 0; i < 48; ++i) radii[i] = fz_float(f, 0, 0.1f);
                od.radii = radii;
            }
            od.radius = fz_float(f, 0, 0.1f);
            if (fz_u8(f) & 1) {
                for (int i = 0; i < 64; ++i) q[i] = fz_float(f, -1, 1);
                od.orientations = q;
            }
            od.stiffness = fz_float(f, -0.1f, 1.1f);
            od.collide = fz_int(f, 0, 1);
            od.rotation_iterations = fz_int(f, -1, 101);
            pbd_sm_oriented o = {0};
            pbd_result r = pbd_sm_add_oriented(w, &od, &o);
            if (r == PBD_OK && (fz_u8(f) & 1)) {
                fz_mesh_read(f, &fm);
                pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
                sd.rest_vertices = fm.pos;
                sd.vertex_count = fz_int(f, -1, fm.nv);
                sd.influences = fz_int(f, -1, 9);
                pbd_sm_skin *skin = NULL;
                if (pbd_sm_skin_create(w, o, &sd, &skin) == PBD_OK) {
                    float *out = (float *)malloc(sizeof(float) * 3 * (size_t)sd.vertex_count);
                    pbd_sm_skin_apply(skin, w, out);
                    free(out);
                    pbd_sm_skin_destroy(skin);
                }
            }
            return r;
        }
        case 21: { /* surface volume over world particles */
            pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
            if (fz_u8(f) & 1 && fz_last_mesh.nt && fz_last_particles.count == fz_last_mesh.nv &&
                !fz_last_cloth.reorder) {
                int n = fz_last_mesh.nt < 21 ? fz_last_mesh.nt : 21;
                for (int i = 0; i < 3 * n; ++i) idx[i] = fz_last_particles.first + fz_last_mesh.tri[i];
                vd.triangle_count = n;
            } else {
                fz_indices(f, w, idx, 36);
                vd.triangle_count = fz_int(f, -1, 12);
            }
            vd.triangles = idx;
            vd.alpha = fz_float(f, -0.1f, 1.1f);
            vd.beta = fz_float(f, -0.1f, 1.1f);
            vd.pair_stiffness = fz_float(f, -0.1f, 2);
            vd.smoothing = fz_int(f, -1, 65);
            vd.stiffness = fz_float(f, -0.1f, 1.1f);
            vd.velocity_correction = fz_int(f, 0, 1);
            vd.contact_distance = fz_float(f, -0.1f, 0.1f);
            return pbd_sm_add_surface_volume(w, &vd, NULL);
        }
        case 22: { /* multi-resolution cloth */
            fz_mesh_read(f, &fm);
            pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
            float init[3 * FZ_MAXV];
            int keep[4];
            cd.positions = fm.pos;
            cd.vertex_count = fz_int(f, -1, fm.nv);
            cd.triangles = fm.tri;
            cd.triangle_count = fz_int(f, -1, fm.nt);
            if (fz_u8(f) & 1) {
                for (int i = 0; i < 3 * fm.nv; ++i) init[i] = fz_float(f, -0.5f, 0.5f);
                cd.initial_positions = init;
            }
            cd.density = fz_float(f, 0, 1);
            cd.levels = fz_int(f, 0, 11);
            cd.reduction = fz_float(f, 0, 1);
            cd.nested = fz_int(f, 0, 1);
            cd.alpha = fz_float(f, -0.1f, 1.1f);
            cd.beta = fz_float(f, -0.1f, 1.1f);
            cd.conserve_wrinkles = fz_int(f, 0, 1);
            cd.damping = fz_float(f, -0.1f, 1.1f);
            cd.bending_stiffness = fz_float(f, -1e-4f, 1e-3f);
            cd.scheme = (pbd_sm_cloth_scheme)fz_int(f, -1, 2);
            cd.thickness = fz_float(f, 0, 0.02f);
            for (int i = 0; i < 4; ++i) keep[i] = fz_int(f, -1, fm.nv);
            cd.keep_vertices = keep;
            cd.keep_count = fz_int(f, 0, 4);
            pbd_sm_cloth c = {0};
            return pbd_sm_add_cloth(w, &cd, &c, NULL);
        }
        case 23: { /* pbd_sm.h's standalone mesh functions and plans */
            fz_mesh_read(f, &fm);
            pbd_sm_sum_plan *plan = NULL;
            int starts[FZ_MAXV + 1], total = 0, cells[3 * 64], count = 0;
            float origin[3];
            unsigned k = fz_u8(f) % 5;
            int nv = fz_int(f, -1, fm.nv), nt = fz_int(f, -1, fm.nt), omega = fz_int(f, -1, 4);
            if (k == 0) {
                pbd_sm_voxelize(fm.pos, nv, fm.tri, nt, fz_float(f, 0.02f, 0.2f), origin, cells, 64, &count);
            } else if (k == 1) {
                int *members = (int *)malloc(sizeof(int) * FZ_MAXV * FZ_MAXV);
                int arity = fz_int(f, 1, 5);
                const int *el = arity == 4 ? fm.tet : fm.tri;
                int ne = arity == 4 ? fz_int(f, -1, fm.ntet) : nt;
                if (pbd_sm_mesh_rings(nv, el, ne, arity, omega, starts, NULL, 0, &total) == PBD_OK &&
                    total <= FZ_MAXV * FZ_MAXV)
                    pbd_sm_mesh_rings(nv, el, ne, arity, omega, starts, members, total, &total);
                free(members);
            } else if (k == 2) {
                pbd_sm_plan_rings(nv, fm.tri, nt, 3, omega, &plan);
            } else if (k == 3) {
                pbd_sm_plan_paths(nv, fm.pos, nt, fm.tri, omega, fz_int(f, -1, 16), &plan);
            } else {
                for (int i = 0; i < 3 * 64; ++i) cells[i] = fz_int(f, -2, 6);
                int n = fz_int(f, -1, 64);
                if (fz_u8(f) & 1) pbd_sm_plan_lattice(n, cells, omega, &plan);
                else {
                    int widths[64];
                    for (int i = 0; i < 64; ++i) widths[i] = fz_int(f, -1, 4);
                    pbd_sm_plan_octree(n, cells, widths, omega, &plan);
                }
            }
            if (plan) {
                int n = pbd_sm_plan_particle_count(plan), nr = pbd_sm_plan_region_count(plan);
                double *vals = (double *)calloc((size_t)n * 2 + 1, sizeof(double));
                double *sums = (double *)calloc((size_t)nr * 2 + 1, sizeof(double));
                for (int i = 0; i < 2 * n; ++i) vals[i] = (double)i;
                pbd_sm_plan_sum(plan, vals, 2, sums);
                free(vals);
                free(sums);
                pbd_sm_plan_destroy(plan);
            }
            return PBD_OK;
        }
        /* ---- pbd_upsample.h ---- */
        case 24: { /* subdivision */
            fz_mesh_read(f, &fm);
            int levels = fz_int(f, -1, 3), nv = fz_int(f, -1, fm.nv), nt = fz_int(f, -1, fm.nt);
            if (fz_u8(f) & 1) {
                pbd_mesh in, out;
                memset(&in, 0, sizeof in);
                memset(&out, 0, sizeof out);
                in.positions = fm.pos;
                in.vertex_count = nv;
                in.triangles = fm.tri;
                in.triangle_count = nt;
                if (pbd_up_mesh_subdivide(&in, levels, fz_int(f, -1, 2), &out) == PBD_OK) pbd_up_mesh_free(&out);
            } else {
                pbd_up_model *m = NULL;
                if (pbd_up_subdivision_create(fm.tri, nt, nv, levels, &m) == PBD_OK) {
                    int nd = pbd_up_model_detail_count(m);
                    float *det = (float *)malloc(sizeof(float) * 3 * (size_t)nd);
                    float *fr = (float *)malloc(sizeof(float) * 9 * (size_t)nd);
                    pbd_up_model_eval_checked(m, fm.pos, nv, det, nd);
                    pbd_up_subdivision_smooth(m, fm.pos, det, fr);
                    pbd_up_subdivision_fit_detail(m, fm.pos, det);
                    free(det);
                    free(fr);
                    pbd_up_model_destroy(m);
                }
            }
            return PBD_OK;
        }
        default: { /* wrinkle mesh: a coarse mesh and a fine one */
            fz_mesh coarse;
            fz_mesh_read(f, &coarse);
            fz_mesh_read(f, &fm);
            pbd_up_wrinkle_desc wd = pbd_up_wrinkle_desc_default();
            wd.coarse_positions = coarse.pos;
            wd.coarse_count = fz_int(f, -1, coarse.nv);
            wd.coarse_triangles = coarse.tri;
            wd.coarse_triangle_count = fz_int(f, -1, coarse.nt);
            wd.fine_positions = fm.pos;
            wd.fine_count = fz_int(f, -1, fm.nv);
            wd.fine_triangles = fm.tri;
            wd.fine_triangle_count = fz_int(f, -1, fm.nt);
            wd.radius = fz_float(f, -0.01f, 0.05f);
            wd.one_sided = fz_int(f, 0, 1);
            wd.iterations = fz_int(f, 0, 8);
            wd.time_step = fz_float(f, 0, 0.05f);
            wd.stretch_compliance = fz_compliance(f);
            wd.bending_compliance = fz_compliance(f);
            wd.bending = (pbd_bending_model)fz_int(f, -1, 3);
            pbd_up_wrinkle *wr = NULL;
            if (pbd_up_wrinkle_create(&wd, &wr) == PBD_OK) {
                float *out = (float *)malloc(sizeof(float) * 3 * (size_t)wd.fine_count);
                pbd_up_wrinkle_update(wr, coarse.pos, out);
                free(out);
                pbd_up_wrinkle_destroy(wr);
            }
            return PBD_OK;
        }
    }
}

enum { FZ_OPS = 26 };

/* Runs one input; returns the result of its last operation. */
static pbd_result fz_run(const uint8_t *data, size_t size) {
    fz f = fz_make(data, size);
    pbd_result last = PBD_OK;
    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 2;
    wd.iterations = 2;
    pbd_world *w = NULL;
    FZ_CHECK(pbd_world_create(&wd, &w) == PBD_OK, "create");
    float xyz[3 * FZ_BASE];
    for (int i = 0; i < FZ_BASE; ++i) {
        xyz[3 * i] = 0.05f * (float)(i % 4);
        xyz[3 * i + 1] = 0.5f + 0.05f * (float)(i / 4 % 2);
        xyz[3 * i + 2] = 0.05f * (float)(i / 8);
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = xyz;
    pd.count = FZ_BASE;
    FZ_CHECK(pbd_add_particles(w, &pd, NULL) == PBD_OK, "base particles");
    memset(&fz_last_object, 0, sizeof fz_last_object); /* none */
    memset(&fz_last_particles, 0, sizeof fz_last_particles);
    memset(&fz_last_mesh, 0, sizeof fz_last_mesh);
    memset(&fz_last_cloth, 0, sizeof fz_last_cloth);
    memset(fz_last_perm, 0, sizeof fz_last_perm);
    int ops = fz_int(&f, 1, 6);
    for (int k = 0; k < ops; ++k) {
        unsigned op = fz_u8(&f) % FZ_OPS;
        fz_snap before = fz_save(w);
        pbd_result r = fz_op(&f, w, op);
        last = r;
        if (getenv("FZ_VERBOSE"))
            fprintf(stderr, "op %u: %s %s\n", op, pbd_result_string(r), r ? pbd_world_last_error(w) : "");
        if (r != PBD_OK)
            FZ_CHECK(fz_same(w, before), "operation %u refused (%s: %s) but changed the world", op,
                     pbd_result_string(r), pbd_world_last_error(w));
        free(before.d);
    }
    /* what was built steps and tears (bounded: the step's own robustness
       against wild states is tested elsewhere) */
    for (int s = 0; s < 2 && fz_world_sane(w, 1e3f); ++s) {
        pbd_world_step(w, 1.0f / 60.0f);
        pbd_world_tear(w, NULL);
    }
    pbd_world_destroy(w);
    return last;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_run(data, size);
    return 0;
}

#ifdef PBD_FUZZ_REPLAY
/* Seeds: for every operation, an input where it succeeds: a valid 4 x 4
   cloth first (so that there are an object and a mesh to refer to), then
   the operation with random bytes, the first of a few thousand tries that
   the operation accepts (a small random search; fixed seed). */
static void fuzz_seeds(const char *dir) {
    char name[32];
    unsigned rng = 12345u;
    for (int op = 0; op < FZ_OPS; ++op) {
        fz_buf b;
        int found = 0;
        for (int trial = 0; trial < 20000 && !found; ++trial) {
            b.n = 0;
            fz_put_int(&b, 1, 2);
            fz_put_u8(&b, 0);
            fz_put_u8(&b, 0);
            fz_put_int(&b, 1, 4);
            fz_put_int(&b, 1, 4);
            fz_put_int(&b, 0, 0); /* 4 x 4 grid */
            fz_put_int(&b, -1, 16);
            fz_put_int(&b, -1, 18);
            fz_put_u8(&b, 0);
            fz_put_float(&b, 0, 1, 0.2f);
            for (int k = 0; k < 3; ++k) fz_put_float(&b, 0, 1e-2f, 1e-4f);
            fz_put_int(&b, -1, 1);
            fz_put_int(&b, 0, 0);
            fz_put_float(&b, 0, 0.05f, 0.01f);
            fz_put_float(&b, 0, 5, 0);
            fz_put_int(&b, 0, 0);
            fz_put_u8(&b, (unsigned)op);
            for (int k = 0; k < 700; ++k) {
                rng = rng * 1664525u + 1013904223u;
                unsigned byte = rng >> 24;
                fz_put_u8(&b, byte == 0xffu ? 0 : byte);
            }
            found = fz_run(b.d, b.n) == PBD_OK;
        }
        if (!found) fprintf(stderr, "op %d: no accepted input found; seeding a refused one\n", op);
        snprintf(name, sizeof name, "op%02d", op);
        fz_write_buf(dir, name, &b);
    }
}
#endif
