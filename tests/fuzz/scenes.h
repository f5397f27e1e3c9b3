/* scenes.h - small worlds that use every kind of state a snapshot holds:
   the restore harness's seeds are their snapshots. Include after pbd.h. */
#ifndef PBD_FUZZ_SCENES_H
#define PBD_FUZZ_SCENES_H

enum { FZ_SCENE_COUNT = 5 };

/* Builds scene `which` (0..FZ_SCENE_COUNT-1) and steps it a few times;
   NULL when something failed (a bug: these are valid inputs). */
static inline pbd_world *fz_scene(int which) {
    pbd_world_desc wd = pbd_world_desc_default();
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return NULL;
    int ok = 1;
    float o[3] = {-0.25f, 0.6f, -0.25f}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.5f};
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    ok &= pbd_add_collider_plane(w, ground, up, 0.5f, NULL) == PBD_OK;
    pbd_mesh m;
    memset(&m, 0, sizeof m);
    if (which == 0) { /* cloth with tearing, self-collision, LRA, strain limit, sphere */
        ok &= pbd_mesh_grid(6, 6, o, u, v, &m) == PBD_OK;
        pbd_cloth_desc cd = pbd_cloth_desc_default();
        cd.positions = m.positions;
        cd.vertex_count = m.vertex_count;
        cd.triangles = m.triangles;
        cd.triangle_count = m.triangle_count;
        pbd_object cloth = {0};
        pbd_object_parts cp;
        memset(&cp, 0, sizeof cp);
        ok &= pbd_add_cloth(w, &cd, &cloth) == PBD_OK;
        ok &= pbd_object_get_parts(w, cloth, &cp) == PBD_OK;
        ok &= pbd_particle_pin(w, cp.particles.first) == PBD_OK;
        ok &= pbd_particle_pin(w, cp.particles.first + 5) == PBD_OK;
        int anchors[2] = {cp.particles.first, cp.particles.first + 5};
        pbd_lra_desc l = pbd_lra_desc_default();
        l.object = cloth;
        l.anchors = anchors;
        l.anchor_count = 2;
        l.geodesic = 1;
        ok &= pbd_add_long_range_attachments(w, &l, NULL) == PBD_OK;
        pbd_strain_limit_desc s = pbd_strain_limit_desc_default();
        s.object = cloth;
        s.triangles = m.triangles;
        s.triangle_count = m.triangle_count;
        ok &= pbd_add_strain_limit(w, &s, NULL) == PBD_OK;
        pbd_tearing_desc t = pbd_tearing_desc_default();
        t.object = cloth;
        t.triangles = m.triangles;
        t.triangle_count = m.triangle_count;
        ok &= pbd_add_tearing(w, &t, NULL) == PBD_OK;
        ok &= pbd_add_cloth_self_collision(w, cloth, &cd, 0.01f, NULL) == PBD_OK;
        float c[3] = {0, 0.3f, 0};
        ok &= pbd_add_collider_sphere(w, c, 0.15f, 0.4f, NULL) == PBD_OK;
    } else if (which == 1) { /* soft body on a box, damping cluster, attachments */
        float lo[3] = {-0.1f, 0.3f, -0.1f}, hi[3] = {0.1f, 0.5f, 0.1f};
        ok &= pbd_mesh_tet_box(3, 3, 3, lo, hi, &m) == PBD_OK;
        pbd_softbody_desc sd = pbd_softbody_desc_default();
        sd.positions = m.positions;
        sd.vertex_count = m.vertex_count;
        sd.tets = m.tets;
        sd.tet_count = m.tet_count;
        pbd_object body = {0};
        pbd_object_parts bp;
        memset(&bp, 0, sizeof bp);
        ok &= pbd_add_softbody(w, &sd, &body) == PBD_OK;
        ok &= pbd_object_get_parts(w, body, &bp) == PBD_OK;
        int ps[4] = {bp.particles.first, bp.particles.first + 1, bp.particles.first + 2, bp.particles.first + 3};
        ok &= pbd_add_damping_cluster(w, ps, 4, 1.0f, NULL) == PBD_OK;
        pbd_attachments_desc a = pbd_attachments_desc_default();
        float target[3] = {0, 0.6f, 0};
        a.count = 1;
        a.particles = ps;
        a.target_points = target;
        a.max_distance = 0.2f;
        ok &= pbd_add_attachments(w, &a, NULL) == PBD_OK;
        float bc[3] = {0.3f, 0.1f, 0}, he[3] = {0.1f, 0.1f, 0.1f}, q[4] = {0, 0, 0, 1};
        ok &= pbd_add_collider_box(w, bc, he, q, 0.5f, NULL) == PBD_OK;
        float a0[3] = {-0.3f, 0.1f, 0}, a1[3] = {-0.3f, 0.3f, 0};
        ok &= pbd_add_collider_capsule(w, a0, a1, 0.05f, 0.5f, NULL) == PBD_OK;
    } else if (which == 2) { /* fluid and granular particles */
        float xyz[3 * 27], gr[3 * 8];
        for (int i = 0; i < 27; ++i) {
            xyz[3 * i] = 0.05f * (float)(i % 3);
            xyz[3 * i + 1] = 0.1f + 0.05f * (float)(i / 3 % 3);
            xyz[3 * i + 2] = 0.05f * (float)(i / 9);
        }
        for (int i = 0; i < 8; ++i) {
            gr[3 * i] = 0.3f + 0.03f * (float)(i % 2);
            gr[3 * i + 1] = 0.1f + 0.03f * (float)(i / 2 % 2);
            gr[3 * i + 2] = 0.03f * (float)(i / 4);
        }
        pbd_fluid_desc f = pbd_fluid_desc_default();
        f.positions = xyz;
        f.count = 27;
        ok &= pbd_add_fluid(w, &f, NULL, NULL) == PBD_OK;
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = gr;
        pd.count = 8;
        pd.radius = 0.015f;
        pbd_range r;
        ok &= pbd_add_particles(w, &pd, &r) == PBD_OK;
        ok &= pbd_particles_set_particle_contact(w, r, 1) == PBD_OK;
        ok &= pbd_particle_set_kinematic(w, r.first, 1) == PBD_OK;
    } else if (which == 3) { /* balloon over a mesh collider and an SDF grid */
        float c[3] = {0, 0.5f, 0};
        ok &= pbd_mesh_sphere(1, c, 0.15f, &m) == PBD_OK;
        pbd_balloon_desc b = pbd_balloon_desc_default();
        b.cloth.positions = m.positions;
        b.cloth.vertex_count = m.vertex_count;
        b.cloth.triangles = m.triangles;
        b.cloth.triangle_count = m.triangle_count;
        ok &= pbd_add_balloon(w, &b, NULL) == PBD_OK;
        pbd_mesh s;
        float sc[3] = {0, 0, 0};
        ok &= pbd_mesh_sphere(1, sc, 0.2f, &s) == PBD_OK;
        pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
        md.positions = s.positions;
        md.vertex_count = s.vertex_count;
        md.triangles = s.triangles;
        md.triangle_count = s.triangle_count;
        md.position[0] = 0.3f;
        ok &= pbd_add_collider_mesh(w, &md, NULL) == PBD_OK;
        md.sdf_resolution = 8;
        md.position[0] = -0.3f;
        ok &= pbd_add_collider_mesh(w, &md, NULL) == PBD_OK;
        pbd_mesh_free(&s);
    } else { /* hair and plain strands */
        float roots[6] = {0, 0.5f, 0, 0.05f, 0.5f, 0}, normals[6] = {0, 1, 0, 1, 0, 0};
        pbd_hair_desc h = pbd_hair_desc_default();
        h.root_positions = roots;
        h.root_normals = normals;
        h.strand_count = 2;
        h.particles_per_strand = 6;
        pbd_strands hs;
        ok &= pbd_add_hair(w, &h, &hs, NULL) == PBD_OK;
        float pos[3 * 4] = {0.2f, 0.5f, 0, 0.2f, 0.45f, 0, 0.2f, 0.4f, 0, 0.2f, 0.35f, 0};
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = pos;
        pd.count = 4;
        pbd_range r;
        ok &= pbd_add_particles(w, &pd, &r) == PBD_OK;
        ok &= pbd_particle_pin(w, r.first) == PBD_OK;
        int ids[4] = {r.first, r.first + 1, r.first + 2, r.first + 3}, starts[2] = {0, 4};
        pbd_strands_desc sd = pbd_strands_desc_default();
        sd.particles = ids;
        sd.strand_starts = starts;
        sd.strand_count = 1;
        ok &= pbd_add_strands(w, &sd, NULL) == PBD_OK;
        pbd_constraints_desc cd = pbd_constraints_desc_default();
        int pair[2] = {r.first + 1, r.first + 3};
        cd.type = PBD_CONSTRAINT_DISTANCE;
        cd.count = 1;
        cd.indices = pair;
        cd.compliance = 1e-4f;
        ok &= pbd_add_constraints(w, &cd, NULL) == PBD_OK;
    }
    pbd_mesh_free(&m);
    for (int s = 0; s < 3 && ok; ++s) ok &= pbd_world_step(w, 1.0f / 60.0f) == PBD_OK;
    if (ok && which == 0) ok &= pbd_world_tear(w, NULL) == PBD_OK;
    if (!ok) {
        fprintf(stderr, "fz_scene %d: %s\n", which, pbd_world_last_error(w));
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}
#endif
