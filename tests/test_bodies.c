/* tests/test_bodies.c - object builders as physical bodies: balloons (closed
   mesh volume with overpressure, survey 3.4.5) and soft bodies (tet volume
   constraints, survey 3.4.4) under load. */
#include "test.h"
#include <stdlib.h>

static int bodies_finite(const pbd_world *w) {
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < 4 * n; ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* ---- balloons ------------------------------------------------------------- */

typedef struct balloon_run {
    double v0;                        /* volume at creation */
    double v_end;                     /* after the run */
    double v_min, v_max;              /* over all steps */
    double stretch_mean, stretch_max; /* |edge length - rest| at the end (m) */
    int ok;
} balloon_run;

/* An icosphere balloon (subdivision 2, radius 0.5, no gravity). squeeze:
   the particles start with an inward velocity v = -(2, 8, 2) * x (4 m/s at
   the poles, 1 m/s at the equator). volume_on = 0 disables
   the volume group (the control). */
static balloon_run balloon(float pressure, float stretch_compliance, float volume_compliance, int squeeze,
                           int volume_on, int steps) {
    balloon_run out;
    memset(&out, 0, sizeof out);
    pbd_world *w = pbdt_world(0.0f);
    if (!w) return out;
    pbd_mesh m;
    float c[3] = {0, 0, 0};
    if (pbd_mesh_sphere(2, c, 0.5f, &m) != PBD_OK) {
        pbd_world_destroy(w);
        return out;
    }
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth.positions = m.positions;
    bd.cloth.vertex_count = m.vertex_count;
    bd.cloth.triangles = m.triangles;
    bd.cloth.triangle_count = m.triangle_count;
    bd.cloth.stretch_compliance = stretch_compliance;
    bd.pressure = pressure;
    bd.volume_compliance = volume_compliance;
    int *perm = (int *)malloc(sizeof(int) * m.vertex_count);
    bd.cloth.permutation = perm;
    pbd_object b;
    int ok = pbd_add_balloon(w, &bd, &b) == PBD_OK;
    const pbd_object_parts bp = pbdt_parts(w, b);
    ok = ok && bp.volume.id != 0;
    float vol = 0;
    ok = ok && pbd_group_mesh_volume(w, bp.volume, &vol) == PBD_OK;
    out.v0 = vol;
    if (ok && !volume_on) ok = pbd_group_set_enabled(w, bp.volume, 0) == PBD_OK;
    if (ok && squeeze) {
        float *v = (float *)malloc(sizeof(float) * 3 * m.vertex_count);
        for (int i = 0; i < m.vertex_count; ++i) { /* in world order */
            int k = perm[i];
            v[3 * k] = -2.0f * m.positions[3 * i];
            v[3 * k + 1] = -8.0f * m.positions[3 * i + 1];
            v[3 * k + 2] = -2.0f * m.positions[3 * i + 2];
        }
        ok = pbd_particles_set_velocities(w, bp.particles, v) == PBD_OK;
        free(v);
    }
    ok = ok && pbd_world_set_point_damping(w, 1.0f) == PBD_OK;
    out.v_min = out.v_max = out.v0;
    for (int s = 0; ok && s < steps; ++s) {
        ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK && bodies_finite(w);
        ok = ok && pbd_group_mesh_volume(w, bp.volume, &vol) == PBD_OK;
        if (vol < out.v_min) out.v_min = vol;
        if (vol > out.v_max) out.v_max = vol;
    }
    out.v_end = vol;
    float em = 0, ex = 0;
    if (ok && bp.stretch.id != 0 && pbd_group_error(w, bp.stretch, &em, &ex) == PBD_OK) {
        out.stretch_mean = em;
        out.stretch_max = ex;
    }
    out.ok = ok;
    free(perm);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return out;
}

TEST(bodies_balloon_keeps_volume) {
    /* the rest volume of the icosphere: a bit below 4/3 pi 0.5^3 */
    balloon_run still = balloon(1.0f, 0.0f, 0.0f, 0, 1, 60);
    CHECK(still.ok);
    CHECK_MSG(still.v0 > 0.45 && still.v0 < 0.5236, "rest volume %g", still.v0);
    CHECK_NEAR(still.v_min / still.v0, 1.0, 0.01);
    CHECK_NEAR(still.v_max / still.v0, 1.0, 0.01);
    /* squeezed, with soft stretching so that only the volume constraint
       holds it: it keeps its volume within 1% at every step... */
    balloon_run sq = balloon(1.0f, 1e-2f, 0.0f, 1, 1, 120);
    CHECK(sq.ok);
    printf("    balloon squeezed: volume/V0 in [%.4f, %.4f], end %.4f\n", sq.v_min / sq.v0, sq.v_max / sq.v0,
           sq.v_end / sq.v0);
    CHECK_NEAR(sq.v_min / sq.v0, 1.0, 0.01);
    CHECK_NEAR(sq.v_max / sq.v0, 1.0, 0.01);
    /* ...while the same squeeze without it loses far more than that 1%
       (the squeeze is real) */
    balloon_run off = balloon(1.0f, 1e-2f, 0.0f, 1, 0, 120);
    CHECK(off.ok);
    printf("    balloon squeezed, volume group off: min volume/V0 %.4f\n", off.v_min / off.v0);
    CHECK_MSG(off.v_min < 0.95 * off.v0, "control lost too little volume: %g", off.v_min / off.v0);
}

/* Overpressure against the skin is a balance of two compliances (XPBD):
   the gas's (volume_compliance) and the skin's (stretch_compliance). */
TEST(bodies_balloon_overpressure_soft_stretch_grows) {
    /* skin compliance much larger than the gas's: the pressure wins */
    balloon_run r = balloon(1.5f, 1e-2f, 1e-5f, 0, 1, 180);
    CHECK(r.ok);
    printf("    balloon p=1.5, stretch compliance 1e-2, volume 1e-5: volume/V0 %.4f\n", r.v_end / r.v0);
    CHECK_NEAR(r.v_end / r.v0, 1.5, 0.05 * 1.5);
    /* and with an incompressible gas (volume compliance 0) too */
    balloon_run h = balloon(1.5f, 1e-2f, 0.0f, 0, 1, 180);
    CHECK(h.ok);
    CHECK_NEAR(h.v_end / h.v0, 1.5, 0.05 * 1.5);
}

TEST(bodies_balloon_overpressure_stiff_stretch_bounded) {
    /* A rigid skin (compliance 0) against a compressible gas: the pressure
       cannot blow the sphere up, as an icosphere of fixed edge lengths has
       almost no room to grow. (Rigid skin and incompressible gas together
       have no solution; the solver then settles between them.) */
    balloon_run r = balloon(1.5f, 0.0f, 1e-2f, 0, 1, 180);
    CHECK(r.ok);
    printf("    balloon p=1.5, stretch compliance 0: volume/V0 end %.4f, max %.4f; edge error mean "
           "%.4g m, max %.4g m\n",
           r.v_end / r.v0, r.v_max / r.v0, r.stretch_mean, r.stretch_max);
    CHECK_MSG(r.v_max < 1.05 * r.v0, "grew to %g V0 with rigid edges", r.v_max / r.v0);
    CHECK_MSG(r.v_end > 0.99 * r.v0, "shrank to %g V0", r.v_end / r.v0);
}

/* ---- soft box under a heavy plate ----------------------------------------- */

/* Sum of the signed tet volumes; vertex i is particle first + perm[i]. */
static double tets_volume(const pbd_world *w, int first, const int *perm, const pbd_mesh *m) {
    const float *x = pbd_world_positions(w);
    double v = 0;
    for (int t = 0; t < m->tet_count; ++t) {
        const float *p0 = x + 4 * (first + perm[m->tets[4 * t]]);
        const float *p1 = x + 4 * (first + perm[m->tets[4 * t + 1]]);
        const float *p2 = x + 4 * (first + perm[m->tets[4 * t + 2]]);
        const float *p3 = x + 4 * (first + perm[m->tets[4 * t + 3]]);
        double a[3], b[3], c[3];
        for (int k = 0; k < 3; ++k) {
            a[k] = (double)p1[k] - p0[k];
            b[k] = (double)p2[k] - p0[k];
            c[k] = (double)p3[k] - p0[k];
        }
        v += ((a[1] * b[2] - a[2] * b[1]) * c[0] + (a[2] * b[0] - a[0] * b[2]) * c[1] +
              (a[0] * b[1] - a[1] * b[0]) * c[2]) /
             6.0;
    }
    return v;
}

/* ---- soft boxes ------------------------------------------------------------ */

/* A soft box of 4 x 4 x 4 nodes (135 tets) between lo and hi: vertex i of
   b->m is world particle b->first + b->perm[i]; b->top and b->bot are the
   particles of its top and bottom layers (16 each). */
typedef struct soft_box {
    pbd_mesh m; /* freed by soft_box_free */
    pbd_object obj;
    int first, perm[64], top[16], bot[16];
} soft_box;

/* Adds it with sd's parameters (compliances, radius, volume constraints;
   its mesh fields are filled here). 0 on a failure (b->m freed). */
static int soft_box_add(pbd_world *w, const float *lo, const float *hi, pbd_softbody_desc sd, soft_box *b) {
    memset(b, 0, sizeof *b);
    if (pbd_mesh_tet_box(4, 4, 4, lo, hi, &b->m) != PBD_OK) return 0;
    sd.positions = b->m.positions;
    sd.vertex_count = b->m.vertex_count;
    sd.tets = b->m.tets;
    sd.tet_count = b->m.tet_count;
    sd.permutation = b->perm;
    int ok = b->m.vertex_count == 64 && b->m.tet_count == 135 && pbd_add_softbody(w, &sd, &b->obj) == PBD_OK;
    int ntop = 0, nbot = 0;
    if (ok) b->first = pbdt_parts(w, b->obj).particles.first;
    for (int i = 0; ok && i < 64; ++i) {
        float y = b->m.positions[3 * i + 1];
        if (fabsf(y - hi[1]) < 1e-5f && ntop < 16) b->top[ntop++] = b->first + b->perm[i];
        if (fabsf(y - lo[1]) < 1e-5f && nbot < 16) b->bot[nbot++] = b->first + b->perm[i];
    }
    ok = ok && ntop == 16 && nbot == 16;
    if (!ok) pbd_mesh_free(&b->m);
    return ok;
}

static void soft_box_free(soft_box *b) { pbd_mesh_free(&b->m); }

/* A 0.3 m soft box (4x4x4 nodes, compliant edges) on a ground plane; its
   top face is a heavy rigid plate (the core has no particle-particle
   contact yet): 20 kg per top node, 320 kg in all, tied together by rigid
   distance constraints between every pair of top nodes. Returns V / V0
   after 3 s, or -1 on a failure; *height gets the box height / rest. */
static double squeezed_box(int volume_constraints, double *height) {
    pbd_world *w = pbdt_world(-9.81f);
    if (!w) return -1;
    const float r = 0.01f;
    float lo[3] = {-0.15f, r, -0.15f}, hi[3] = {0.15f, 0.3f + r, 0.15f};
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.edge_compliance = 1e-4f;
    sd.volume_compliance = 0.0f;
    sd.volume_constraints = volume_constraints;
    sd.radius = r;
    soft_box b;
    if (!soft_box_add(w, lo, hi, sd, &b)) {
        pbd_world_destroy(w);
        return -1;
    }
    const int *top = b.top, ntop = 16;
    int ok = 1;
    for (int i = 0; ok && i < ntop; ++i) ok = pbd_particle_set_mass(w, top[i], 20.0f) == PBD_OK;
    int pairs[2 * 16 * 15 / 2], np = 0;
    for (int i = 0; i < ntop; ++i)
        for (int j = i + 1; j < ntop; ++j) {
            pairs[2 * np] = top[i];
            pairs[2 * np + 1] = top[j];
            np++;
        }
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = np;
    cd.indices = pairs;
    cd.compliance = 0.0f;
    pbd_group plate;
    ok = ok && pbd_add_constraints(w, &cd, &plate) == PBD_OK;
    float o[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    ok = ok && pbd_add_collider_plane(w, o, n, 0.5f, NULL) == PBD_OK;
    ok = ok && pbd_world_set_point_damping(w, 3.0f) == PBD_OK;
    double v0 = tets_volume(w, b.first, b.perm, &b.m);
    for (int s = 0; ok && s < 180; ++s) ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK && bodies_finite(w);
    double ratio = -1;
    if (ok) {
        ratio = tets_volume(w, b.first, b.perm, &b.m) / v0;
        const float *x = pbd_world_positions(w);
        double ytop = 0;
        for (int i = 0; i < ntop; ++i) ytop += x[4 * top[i] + 1];
        *height = (ytop / ntop - r) / 0.3;
    }
    soft_box_free(&b);
    pbd_world_destroy(w);
    return ratio;
}

TEST(bodies_softbody_volume_under_load) {
    double h_on = 0, h_off = 0;
    double on = squeezed_box(1, &h_on);
    double off = squeezed_box(0, &h_off);
    printf("    squeezed soft box: volume/V0 %.4f (height %.3f) with volume constraints, %.4f "
           "(height %.3f) without\n",
           on, h_on, off, h_off);
    CHECK_MSG(on > 0, "run with volume constraints failed");
    CHECK_MSG(off > 0, "run without volume constraints failed");
    CHECK_NEAR(on, 1.0, 0.03);
    CHECK_MSG(off < 0.9, "without volume constraints the box kept %g of its volume", off);
    /* the load does squeeze it (the volume is kept by bulging, not by
       standing firm) */
    CHECK_MSG(h_on < 0.97, "box with volume constraints barely compressed: height %g", h_on);
}

/* ---- crushed and inverted soft boxes; what compliance means ---------------- */

/* Signed volume of tet t: over world positions x (4 floats a particle,
   vertex i is particle first + perm[i]) or, with perm NULL, over the mesh's
   own positions (3 floats a vertex). */
static double tet_signed_volume(const float *x, int first, const int *perm, const pbd_mesh *m, int t) {
    const float *p[4];
    for (int k = 0; k < 4; ++k) {
        int v = m->tets[4 * t + k];
        p[k] = perm ? x + 4 * (first + perm[v]) : m->positions + 3 * v;
    }
    double a[3], b[3], c[3];
    for (int k = 0; k < 3; ++k) {
        a[k] = (double)p[1][k] - p[0][k];
        b[k] = (double)p[2][k] - p[0][k];
        c[k] = (double)p[3][k] - p[0][k];
    }
    return ((a[1] * b[2] - a[2] * b[1]) * c[0] + (a[2] * b[0] - a[0] * b[2]) * c[1] +
            (a[0] * b[1] - a[1] * b[0]) * c[2]) /
           6.0;
}

typedef struct crush_run {
    double v_start, v_end; /* total signed volume / V0 after the crush and at the end */
    double tet_min;        /* smallest tet volume / its rest volume at the end */
    double tet_min_start;  /* smallest tet volume / its rest volume after the crush */
    int inverted_start;    /* tets with signed volume <= 0 after the crush */
    int steps_to_recover;  /* first step after which V/V0 is within 1% and no tet is inverted */
    int inverted_end;      /* ... and at the end */
    int ok;                /* every call succeeded and every position stayed finite */
} crush_run;

/* A default soft box (pbd_softbody_desc_default: edge and volume compliance
   0), 0.2 m, 4 x 4 x 4 nodes, 135 tets, in zero gravity, crushed at time 0
   (positions moved, velocities 0) and released for `steps` steps at 60 Hz:
   how 0 flattened to 1% of its height (y -> 0.01 y), 1 folded: the part
   above 0.45 of the height mirrored down through that plane (the tets
   across and above it inverted, lying inside the lower part), 2 mirrored
   whole (y -> -y: every tet inverted, every edge at its rest length). */
static crush_run crushed_box(int how, int steps) {
    crush_run out;
    memset(&out, 0, sizeof out);
    pbd_world *w = pbdt_world(0.0f);
    if (!w) return out;
    float lo[3] = {-0.1f, 0.0f, -0.1f}, hi[3] = {0.1f, 0.2f, 0.1f};
    soft_box b;
    if (!soft_box_add(w, lo, hi, pbd_softbody_desc_default(), &b)) {
        pbd_world_destroy(w);
        return out;
    }
    const pbd_mesh m = b.m;
    const int *perm = b.perm, first = b.first;
    pbd_range r = pbdt_parts(w, b.obj).particles;
    int ok = 1;
    float xs[3 * 64];
    ok = ok && pbd_particles_get_positions(w, r, xs) == PBD_OK;
    const float fold = 0.45f * 0.2f;
    for (int i = 0; ok && i < 64; ++i) {
        float *y = xs + 3 * perm[i] + 1;
        if (how == 0) *y *= 0.01f;
        else if (how == 1 && *y > fold) *y = 2.0f * fold - *y;
        else if (how == 2) *y = -*y;
    }
    ok = ok && pbd_particles_set_positions(w, r, xs) == PBD_OK;
    double rest[135], v0 = 0;
    ok = ok && m.tet_count == 135;
    for (int t = 0; ok && t < m.tet_count; ++t) {
        rest[t] = tet_signed_volume(NULL, 0, NULL, &m, t);
        v0 += rest[t];
    }
    const float *x = pbd_world_positions(w);
    double v = 0;
    for (int t = 0; ok && t < m.tet_count; ++t) {
        double vt = tet_signed_volume(x, first, perm, &m, t);
        v += vt;
        out.inverted_start += vt <= 0;
        if (t == 0 || vt / rest[t] < out.tet_min_start) out.tet_min_start = vt / rest[t];
    }
    out.v_start = v / v0;
    out.steps_to_recover = -1;
    for (int s = 0; ok && s < steps; ++s) {
        ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK && bodies_finite(w);
        x = pbd_world_positions(w);
        int inv = 0;
        v = 0;
        for (int t = 0; ok && t < m.tet_count; ++t) {
            double vt = tet_signed_volume(x, first, perm, &m, t);
            v += vt;
            inv += vt <= 0;
        }
        if (ok && out.steps_to_recover < 0 && inv == 0 && fabs(v / v0 - 1.0) < 0.01) out.steps_to_recover = s + 1;
    }
    x = pbd_world_positions(w);
    v = 0;
    out.tet_min = 1e30;
    for (int t = 0; ok && t < m.tet_count; ++t) {
        double vt = tet_signed_volume(x, first, perm, &m, t);
        v += vt;
        out.inverted_end += vt <= 0;
        if (vt / rest[t] < out.tet_min) out.tet_min = vt / rest[t];
    }
    out.v_end = v / v0;
    out.ok = ok;
    soft_box_free(&b);
    pbd_world_destroy(w);
    return out;
}

/* The same 0.2 m box (8 kg at the default 1000 kg/m^3) resting on a ground
   plane under gravity, edge and volume compliance as given, everything else
   default (4 substeps x 4 iterations, 60 Hz steps, no damping): the sag of
   its top face, 1 - (mean top - mean bottom height) / (rest height), averaged over 2..4 s
   (it rings around that without damping); *worst gets the largest sag of
   that window. -1 on a failure. */
static double sagging_box(float edge_compliance, float volume_compliance, double *worst) {
    pbd_world *w = pbdt_world(-9.81f);
    if (!w) return -1;
    const float rad = 0.01f, h = 0.2f;
    float lo[3] = {-0.1f, rad, -0.1f}, hi[3] = {0.1f, rad + h, 0.1f};
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.edge_compliance = edge_compliance;
    sd.volume_compliance = volume_compliance;
    soft_box b;
    if (!soft_box_add(w, lo, hi, sd, &b)) {
        pbd_world_destroy(w);
        return -1;
    }
    float o[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    int ok = pbd_add_collider_plane(w, o, n, 0.5f, NULL) == PBD_OK;
    double sum = 0;
    int count = 0;
    *worst = 0;
    for (int s = 0; ok && s < 240; ++s) {
        ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK && bodies_finite(w);
        if (!ok || s < 120) continue;
        const float *x = pbd_world_positions(w);
        double yt = 0, yb = 0;
        for (int i = 0; i < 16; ++i) yt += x[4 * b.top[i] + 1] / 16;
        for (int i = 0; i < 16; ++i) yb += x[4 * b.bot[i] + 1] / 16;
        double sag = 1.0 - (yt - yb) / h;
        sum += sag;
        count++;
        if (sag > *worst) *worst = sag;
    }
    soft_box_free(&b);
    pbd_world_destroy(w);
    return ok && count ? sum / count : -1;
}

/* A default soft body comes back from being crushed flat, folded through
   itself or mirrored whole: its volume constraints use the signed volume
   (survey 3.4.4, C = V - V0), whose gradient points towards positive volume
   on both sides of a flat tet, so an inverted tet is pushed back through
   rather than held inverted. */
TEST(bodies_softbody_recovers_from_crush_and_inversion) {
    static const char *name[3] = {"flattened to 1%", "folded at 0.45 h", "mirrored whole"};
    for (int how = 0; how < 3; ++how) {
        crush_run r = crushed_box(how, 120);
        printf("    soft box %s: V/V0 %.3f, %d/135 tets inverted, smallest %.3f of its rest; recovered (V within "
               "1%%, none inverted) after %d steps; after 2 s V/V0 %.4f, smallest tet %.3f of its rest, %d "
               "inverted\n",
               name[how], r.v_start, r.inverted_start, r.tet_min_start, r.steps_to_recover, r.v_end, r.tet_min,
               r.inverted_end);
        CHECK_MSG(r.ok, "%s: a step failed or a position is not finite", name[how]);
        CHECK_MSG(r.tet_min_start < 0.02, "%s: the crush left every tet above 2%% of its volume", name[how]);
        CHECK_MSG(r.steps_to_recover > 0, "%s: never recovered", name[how]);
        CHECK_NEAR(r.v_end, 1.0, 0.01);
        CHECK_MSG(r.inverted_end == 0, "%s: %d tets still inverted after 2 s", name[how], r.inverted_end);
        CHECK_MSG(r.tet_min > 0.9, "%s: a tet is at %g of its rest volume after 2 s", name[how], r.tet_min);
    }
}

/* What compliance means: XPBD compliance is inverse stiffness, in m/N for
   the edges (C a length) and m^5/N for the tets (C a volume); 0, the
   default, is rigid up to what 4 x 4 iterations converge. */
TEST(bodies_softbody_compliance_sag) {
    static const float ec[5] = {0.0f, 1e-5f, 1e-4f, 1e-3f, 1e-2f};
    double sag[5], worst[5];
    for (int k = 0; k < 5; ++k) {
        sag[k] = sagging_box(ec[k], 0.0f, &worst[k]);
        printf("    soft box on the ground, edge compliance %g m/N, volume 0: sag %.3f%% (worst %.3f%%)\n",
               (double)ec[k], 100 * sag[k], 100 * worst[k]);
        CHECK_MSG(sag[k] >= -0.001, "edge compliance %g: run failed or box grew (%g)", (double)ec[k], sag[k]);
    }
    double both_worst = 0;
    double both = sagging_box(1e-4f, 1e-9f, &both_worst);
    printf("    soft box on the ground, edge compliance 1e-4 m/N, volume 1e-9 m^5/N: sag %.3f%% (worst %.3f%%)\n",
           100 * both, 100 * both_worst);
    CHECK_MSG(sag[0] < 0.01, "default (rigid) box sags %g", sag[0]);
    for (int k = 1; k < 5; ++k) CHECK_MSG(sag[k] > sag[k - 1], "sag not growing with compliance at %g", (double)ec[k]);
    CHECK_MSG(both > sag[2], "a compliant volume did not add to the sag: %g vs %g", both, sag[2]);
}

void suite_bodies(void) {
    RUN(bodies_balloon_keeps_volume);
    RUN(bodies_balloon_overpressure_soft_stretch_grows);
    RUN(bodies_balloon_overpressure_stiff_stretch_bounded);
    RUN(bodies_softbody_volume_under_load);
    RUN(bodies_softbody_recovers_from_crush_and_inversion);
    RUN(bodies_softbody_compliance_sag);
}
