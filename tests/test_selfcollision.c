/* tests/test_selfcollision.c - cloth self-collision and cloth-cloth
   collision (survey 3.4.3). Crossings are found by this file's own
   continuous vertex-triangle test: for each vertex and each triangle it is
   not part of, moving linearly between two steps, the cubic whose roots
   are the coplanar times, then a point-in-triangle test at each root. The
   scenes step with one substep per step, so that the straight path between
   two steps is the path the solver took. */
#include "test.h"
#include <stdlib.h>

#define SC_PI 3.14159265358979

/* ---- continuous vertex-triangle test -------------------------------------- */

typedef struct sc_v {
    double x, y, z;
} sc_v;
static sc_v sc_sub(sc_v a, sc_v b) {
    sc_v r = {a.x - b.x, a.y - b.y, a.z - b.z};
    return r;
}
static sc_v sc_cross(sc_v a, sc_v b) {
    sc_v r = {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
    return r;
}
static double sc_dot(sc_v a, sc_v b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
static sc_v sc_at(sc_v a, sc_v da, double t) {
    sc_v r = {a.x + da.x * t, a.y + da.y * t, a.z + da.z * t};
    return r;
}

/* Coefficients c0 + c1 t + c2 t^2 + c3 t^3 of
   ((b - a) x (c - a)) . (q - a) with every point moving linearly. */
static void sc_cubic(const sc_v *x0, const sc_v *d, double *c) {
    sc_v e1 = sc_sub(x0[2], x0[1]), e2 = sc_sub(x0[3], x0[1]), r = sc_sub(x0[0], x0[1]);
    sc_v de1 = sc_sub(d[2], d[1]), de2 = sc_sub(d[3], d[1]), dr = sc_sub(d[0], d[1]);
    sc_v n0 = sc_cross(e1, e2), n1 = sc_sub(sc_cross(de1, e2), sc_cross(de2, e1)), n2 = sc_cross(de1, de2);
    n1 = sc_cross(e1, de2);
    sc_v t2 = sc_cross(de1, e2);
    n1.x += t2.x;
    n1.y += t2.y;
    n1.z += t2.z;
    c[0] = sc_dot(n0, r);
    c[1] = sc_dot(n1, r) + sc_dot(n0, dr);
    c[2] = sc_dot(n2, r) + sc_dot(n1, dr);
    c[3] = sc_dot(n2, dr);
}
static double sc_eval(const double *c, double t) { return ((c[3] * t + c[2]) * t + c[1]) * t + c[0]; }

/* Roots in [0, 1]: split at the critical points, bisect each monotone piece. */
static int sc_roots(const double *c, double *roots) {
    double cuts[4] = {0, 0, 0, 1};
    int nc = 1;
    double A = 3 * c[3], B = 2 * c[2], C = c[1];
    if (fabs(A) > 1e-300) {
        double disc = B * B - 4 * A * C;
        if (disc >= 0) {
            double s = sqrt(disc), r1 = (-B - s) / (2 * A), r2 = (-B + s) / (2 * A);
            if (r1 > r2) {
                double t = r1;
                r1 = r2;
                r2 = t;
            }
            if (r1 > 0 && r1 < 1) cuts[nc++] = r1;
            if (r2 > 0 && r2 < 1) cuts[nc++] = r2;
        }
    } else if (fabs(B) > 1e-300) {
        double r = -C / B;
        if (r > 0 && r < 1) cuts[nc++] = r;
    }
    cuts[nc++] = 1;
    int n = 0;
    for (int k = 0; k + 1 < nc; ++k) {
        double lo = cuts[k], hi = cuts[k + 1], flo = sc_eval(c, lo), fhi = sc_eval(c, hi);
        if (flo == 0) {
            roots[n++] = lo;
            continue;
        }
        if ((flo < 0) == (fhi < 0)) continue;
        for (int it = 0; it < 60; ++it) {
            double m = 0.5 * (lo + hi), fm = sc_eval(c, m);
            if ((fm < 0) == (flo < 0)) {
                lo = m;
                flo = fm;
            } else hi = m;
        }
        roots[n++] = 0.5 * (lo + hi);
    }
    return n;
}

/* Whether vertex q crosses triangle abc while all four move linearly from
   x0 to x1 (the point within the triangle, edges included, at a coplanar
   time). */
static int sc_crosses(const sc_v *x0, const sc_v *x1) {
    sc_v d[4];
    for (int k = 0; k < 4; ++k) d[k] = sc_sub(x1[k], x0[k]);
    double c[4], roots[4];
    sc_cubic(x0, d, c);
    int n = sc_roots(c, roots);
    for (int k = 0; k < n; ++k) {
        double t = roots[k];
        sc_v q = sc_at(x0[0], d[0], t), a = sc_at(x0[1], d[1], t), b = sc_at(x0[2], d[2], t),
             cc = sc_at(x0[3], d[3], t);
        sc_v nn = sc_cross(sc_sub(b, a), sc_sub(cc, a));
        double l2 = sc_dot(nn, nn);
        if (l2 < 1e-30) continue;
        double u = sc_dot(sc_cross(sc_sub(b, q), sc_sub(cc, q)), nn) / l2;
        double v = sc_dot(sc_cross(sc_sub(cc, q), sc_sub(a, q)), nn) / l2;
        double w = 1 - u - v;
        if (u >= 0 && v >= 0 && w >= 0) return 1;
    }
    return 0;
}

/* Crossings between two states (4 floats per particle) of the triangles
   tri (world particles): every vertex against every triangle it is not
   part of, after a swept-box test. */
static int sc_count_crossings(const float *xa, const float *xb, const int *tri, int nt, int first, int count) {
    int crossings = 0;
    for (int t = 0; t < nt; ++t) {
        const int *T = tri + 3 * t;
        double lo[3], hi[3];
        for (int k = 0; k < 3; ++k) {
            lo[k] = 1e30;
            hi[k] = -1e30;
        }
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 3; ++k) {
                double a = xa[4 * T[j] + k], b = xb[4 * T[j] + k];
                lo[k] = fmin(lo[k], fmin(a, b));
                hi[k] = fmax(hi[k], fmax(a, b));
            }
        for (int i = first; i < first + count; ++i) {
            if (i == T[0] || i == T[1] || i == T[2]) continue;
            int out = 0;
            for (int k = 0; k < 3 && !out; ++k) {
                double a = xa[4 * i + k], b = xb[4 * i + k];
                out = fmax(a, b) < lo[k] || fmin(a, b) > hi[k];
            }
            if (out) continue;
            sc_v x0[4], x1[4];
            int ids[4] = {i, T[0], T[1], T[2]};
            for (int j = 0; j < 4; ++j) {
                sc_v p = {xa[4 * ids[j]], xa[4 * ids[j] + 1], xa[4 * ids[j] + 2]};
                sc_v q = {xb[4 * ids[j]], xb[4 * ids[j] + 1], xb[4 * ids[j] + 2]};
                x0[j] = p;
                x1[j] = q;
            }
            crossings += sc_crosses(x0, x1);
        }
    }
    return crossings;
}

TEST(selfcollision_ccd_reference) {
    /* the test's own CCD: a vertex through a triangle, past it, and parallel */
    sc_v a0[4] = {{0.2, 1, 0.2}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}},
         a1[4] = {{0.2, -1, 0.2}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}};
    CHECK(sc_crosses(a0, a1) == 1);
    sc_v b1[4] = {{0.2, 0.01, 0.2}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}};
    CHECK(sc_crosses(a0, b1) == 0);
    sc_v c0[4] = {{2, 1, 2}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}}, c1[4] = {{2, -1, 2}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}};
    CHECK(sc_crosses(c0, c1) == 0);
    /* the triangle moving through a resting vertex, rotating */
    sc_v d0[4] = {{0.2, 0, 0.2}, {0, 0.5, 0}, {1, 0.5, 0}, {0, 0.5, 1}},
         d1[4] = {{0.2, 0, 0.2}, {0, -0.5, 0}, {1, -0.2, 0}, {0, -0.7, 1}};
    CHECK(sc_crosses(d0, d1) == 1);
}

/* ---- scenes ----------------------------------------------------------------- */

typedef struct sc_scene {
    pbd_world *w;
    pbd_mesh m;
    pbd_object cloth;
    pbd_range particles; /* the cloth's */
    int *tri;            /* world particle triangles */
    int nt;
} sc_scene;

static void sc_free(sc_scene *s) {
    free(s->tri);
    pbd_mesh_free(&s->m);
    pbd_world_destroy(s->w);
}

/* An n x n cloth of size `size` with its triangles in world numbers. */
static int sc_cloth(sc_scene *s, int n, const float *o, const float *u, const float *v, int iterations) {
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = 1;
    d.iterations = iterations;
    if (!s->w && pbd_world_create(&d, &s->w) != PBD_OK) return 0;
    if (pbd_mesh_grid(n, n, o, u, v, &s->m) != PBD_OK) return 0;
    pbd_cloth_desc cd = pbdt_cloth_desc(&s->m);
    cd.bending_compliance = 1e-3f;
    if (pbd_add_cloth(s->w, &cd, &s->cloth) != PBD_OK) return 0;
    s->particles = pbdt_parts(s->w, s->cloth).particles;
    s->nt = s->m.triangle_count;
    s->tri = (int *)malloc(sizeof(int) * 3 * (size_t)s->nt);
    for (int k = 0; k < 3 * s->nt; ++k) s->tri[k] = s->particles.first + s->m.triangles[k];
    return 1;
}

static int sc_surface(sc_scene *s, float thickness) {
    pbd_collision_surface_desc sd = pbd_collision_surface_desc_default();
    sd.triangles = s->tri;
    sd.triangle_count = s->nt;
    sd.thickness = thickness;
    return pbd_add_collision_surface(s->w, &sd, NULL) == PBD_OK;
}

/* Steps a scene and counts crossings between consecutive steps; `move`
   (optional) runs before each step. Returns the crossings, and the largest
   number of self-contact candidates seen. */
static int sc_run(sc_scene *s, int steps, float dt, void (*move)(sc_scene *, int), int *contacts) {
    int n = pbd_world_particle_count(s->w), total = 0;
    float *prev = (float *)malloc(sizeof(float) * 4 * (size_t)n);
    *contacts = 0;
    for (int k = 0; k < steps; ++k) {
        memcpy(prev, pbd_world_positions(s->w), sizeof(float) * 4 * (size_t)n);
        if (move) move(s, k);
        CHECK_OK(pbd_world_step(s->w, dt));
        int c = pbd_world_self_contact_count(s->w);
        if (c > *contacts) *contacts = c;
        total +=
            sc_count_crossings(prev, pbd_world_positions(s->w), s->tri, s->nt, s->particles.first, s->particles.count);
    }
    free(prev);
    return total;
}

/* A 1 m cloth (14 x 14) dropped off-centre onto a sphere of radius 0.2
   just above the ground: it drapes over the sphere, slides off to one side
   and folds onto itself on the ground. (At this resolution the drop does
   not pass the cloth through itself even without self-collision; the
   twist below is the scene that does.) */
static int sc_drop_on_sphere(int self, int *contacts) {
    sc_scene s;
    memset(&s, 0, sizeof s);
    float o[3] = {-0.25f, 0.3f, -0.5f}, u[3] = {1.0f, 0, 0}, v[3] = {0, 0, 1.0f};
    if (!sc_cloth(&s, 14, o, u, v, 8)) return -1;
    float c[3] = {0, 0, 0}, p[3] = {0, -0.2f, 0}, n[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_sphere(s.w, c, 0.2f, 0.3f, NULL));
    CHECK_OK(pbd_add_collider_plane(s.w, p, n, 0.5f, NULL));
    if (self) CHECK(sc_surface(&s, 0.015f));
    int crossings = sc_run(&s, 300, 1.0f / 240.0f, NULL, contacts);
    sc_free(&s);
    return crossings;
}

TEST(selfcollision_cloth_on_sphere_never_crosses) {
    int contacts = 0;
    int crossings = sc_drop_on_sphere(1, &contacts);
    printf("    cloth on a sphere: %d crossings (up to %d self-contact candidates)\n", crossings, contacts);
    CHECK(crossings == 0);
    CHECK(contacts > 0);
}

/* A hanging 0.6 m cloth, bottom edge pinned, whose top edge (kinematic)
   turns a full turn about the vertical axis in 1 s while coming down to
   half the height (a full twist of an inextensible sheet needs the slack):
   the cloth wraps around itself. */
static void sc_twist_turns(sc_scene *s, int k, int turns, double drop, double width) {
    int n = 12;
    double f = fmin(1.0, (k + 1) / (240.0 * turns)), ang = 2 * SC_PI * turns * f;
    for (int i = 0; i < n; ++i) {
        int id = s->particles.first + (n - 1) * n + i;
        double x = width * ((double)i / (n - 1) - 0.5);
        float t[3] = {(float)(x * cos(ang)), (float)(0.6 - drop * f), (float)(x * sin(ang))};
        pbd_particle_set_kinematic_target(s->w, id, t);
    }
}
static void sc_twist_move(sc_scene *s, int k) { sc_twist_turns(s, k, 1, 0.3, 0.6); }

static int sc_strip_scene(sc_scene *s, float width, float thickness) {
    memset(s, 0, sizeof *s);
    float o[3] = {-0.5f * width, 0.0f, 0.0f}, u[3] = {width, 0, 0}, v[3] = {0, 0.6f, 0};
    if (!sc_cloth(s, 12, o, u, v, 8)) return 0;
    for (int i = 0; i < 12; ++i) {
        CHECK_OK(pbd_particle_pin(s->w, s->particles.first + i));
        CHECK_OK(pbd_particle_set_kinematic(s->w, s->particles.first + 11 * 12 + i, 1));
    }
    if (thickness > 0) CHECK(sc_surface(s, thickness));
    return 1;
}
static int sc_twist_scene(sc_scene *s, int self) { return sc_strip_scene(s, 0.6f, self ? 0.01f : 0); }

static int sc_twist(int self, int *contacts) {
    sc_scene s;
    if (!sc_twist_scene(&s, self)) return -1;
    int crossings = sc_run(&s, 420, 1.0f / 240.0f, sc_twist_move, contacts);
    sc_free(&s);
    return crossings;
}

/* Runs scene (its crossings; self: with self-collision) with and without
   self-collision: no crossing with it, more than min_contacts candidates
   at some step, and crossings without it (the scene is a real test). */
static void sc_with_and_without(const char *name, int (*scene)(int self, int *contacts), int min_contacts) {
    int contacts = 0, off_contacts = 0;
    int without = scene(0, &off_contacts);
    int crossings = scene(1, &contacts); /* last: what the scene keeps of its run is this one's */
    printf("    %s: %d crossings with self-collision (up to %d candidates), %d without\n", name, crossings, contacts,
           without);
    CHECK(crossings == 0);
    CHECK(contacts > min_contacts);
    CHECK_MSG(without > 0, "%s should pass through itself without self-collision", name);
}

TEST(selfcollision_twisted_cloth_never_crosses) { sc_with_and_without("cloth twisted 360 deg", sc_twist, 0); }

/* A strip a third as wide (0.2 m, 6 mm thick) twisted two turns in 2 s
   while its top comes down by a third: it winds into a rope, each turn
   pressed against the next. (Three turns, or two with the top brought
   down further, still cross: a vertex with more close triangles than its
   8 candidate slots, which the fail-safe does not see, and the pinned and
   kinematic rows, which nothing can send back, driven through the wound
   cloth: see the manual's self-collision section.) */
static void sc_twist2_move(sc_scene *s, int k) { sc_twist_turns(s, k, 2, 0.2, 0.2); }

static int sc_strip_twist(int self, int *contacts) {
    sc_scene s;
    if (!sc_strip_scene(&s, 0.2f, self ? 0.006f : 0)) return -1;
    int crossings = sc_run(&s, 600, 1.0f / 240.0f, sc_twist2_move, contacts);
    sc_free(&s);
    return crossings;
}

TEST(selfcollision_strip_twisted_two_turns_never_crosses) {
    sc_with_and_without("strip twisted two turns", sc_strip_twist, 200);
}

/* A 0.9 m cloth laid in a U on the ground (rest shape flat): its lower half
   lies on the ground, a half turn of radius 5 cm leads to its upper half
   10 cm above, which is thrown down at 6 m/s, faster than the speed limit
   of self-collision (a thickness per substep: 2.4 m/s), so it lands on the
   lower half at the limit. */
static void sc_u_fold(sc_scene *s, int n, float len, float radius, float y0) {
    float *x = (float *)malloc(sizeof(float) * 3 * (size_t)n * n),
          *v = (float *)calloc(3 * (size_t)n * n, sizeof(float));
    float arc = (float)SC_PI * radius, flat = 0.5f * (len - arc);
    for (int j = 0; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            float *p = x + 3 * ((size_t)j * n + i), d = len * (float)j / (float)(n - 1), y = y0, z = d;
            if (d >= flat + arc) {
                z = flat - (d - flat - arc);
                y = y0 + 2 * radius;
                v[3 * ((size_t)j * n + i) + 1] = -6.0f;
            } else if (d > flat) {
                float a = (d - flat) / radius;
                z = flat + radius * sinf(a);
                y = y0 + radius * (1 - cosf(a));
            }
            p[0] = len * (float)i / (float)(n - 1);
            p[1] = y;
            p[2] = z;
        }
    CHECK_OK(pbd_particles_set_positions(s->w, s->particles, x));
    CHECK_OK(pbd_particles_set_velocities(s->w, s->particles, v));
    free(x);
    free(v);
}

static int sc_fall_onto_itself(int self, int *contacts) {
    sc_scene s;
    memset(&s, 0, sizeof s);
    const int n = 16;
    const float len = 0.9f;
    float o[3] = {0, 0, 0}, u[3] = {len, 0, 0}, v[3] = {0, 0, len};
    if (!sc_cloth(&s, n, o, u, v, 8)) return -1;
    float p[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(s.w, p, up, 0.5f, NULL));
    sc_u_fold(&s, n, len, 0.05f, 0.01f);
    if (self) CHECK(sc_surface(&s, 0.01f));
    int crossings = sc_run(&s, 240, 1.0f / 240.0f, NULL, contacts);
    sc_free(&s);
    return crossings;
}

TEST(selfcollision_cloth_falling_onto_itself_at_the_limit_never_crosses) {
    sc_with_and_without("cloth thrown onto itself", sc_fall_onto_itself, 0);
}

/* A sleeve: an open tube (radius 6 cm, 0.6 m long, 16 x 16 vertices, 8 mm
   thick) lying on the ground along x, with next to no bending stiffness
   and four times gravity, its upper half thrown down at 3 m/s (the speed
   limit is 1.9 m/s): it collapses onto itself, its upper half on its lower
   half, and the folds at its sides close. */
static float sc_sleeve_height; /* the highest point at the end of the last run */
static int sc_sleeve(int self, int *contacts) {
    sc_scene scene, *s = &scene;
    memset(s, 0, sizeof *s);
    enum { NA = 16, NL = 16 };
    const float r = 0.06f, len = 0.6f, th = 0.008f;
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = 1;
    d.iterations = 8;
    d.gravity[1] = -4 * 9.81f;
    if (pbd_world_create(&d, &s->w) != PBD_OK) return -1;
    s->m.vertex_count = NA * NL;
    s->m.triangle_count = 2 * NA * (NL - 1);
    s->m.positions = (float *)malloc(sizeof(float) * 3 * (size_t)s->m.vertex_count);
    s->m.triangles = (int *)malloc(sizeof(int) * 3 * (size_t)s->m.triangle_count);
    for (int j = 0; j < NL; ++j)
        for (int i = 0; i < NA; ++i) {
            float a = 2 * (float)SC_PI * (float)i / NA, *p = s->m.positions + 3 * (j * NA + i);
            p[0] = len * (float)j / (NL - 1);
            p[1] = r + 0.012f - r * cosf(a);
            p[2] = r * sinf(a);
        }
    int *t = s->m.triangles;
    for (int j = 0; j + 1 < NL; ++j)
        for (int i = 0; i < NA; ++i) {
            int a = j * NA + i, b = j * NA + (i + 1) % NA, c = a + NA, e = b + NA;
            int q[6] = {a, b, e, a, e, c};
            memcpy(t, q, sizeof q);
            t += 6;
        }
    pbd_cloth_desc cd = pbdt_cloth_desc(&s->m);
    cd.bending_compliance = 1000.0f; /* about none: a stiffer tube holds its shape */
    cd.thickness = 0.004f;
    if (pbd_add_cloth(s->w, &cd, &s->cloth) != PBD_OK) return -1;
    s->particles = pbdt_parts(s->w, s->cloth).particles;
    s->nt = s->m.triangle_count;
    s->tri = (int *)malloc(sizeof(int) * 3 * (size_t)s->nt);
    for (int k = 0; k < 3 * s->nt; ++k) s->tri[k] = s->particles.first + s->m.triangles[k];
    float p[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(s->w, p, up, 0.5f, NULL));
    float *vel = (float *)calloc(3 * (size_t)s->particles.count, sizeof(float));
    for (int i = 0; i < s->particles.count; ++i) /* the upper half thrown down at 3 m/s (the limit: 1.9 m/s) */
        vel[3 * i + 1] = s->m.positions[3 * i + 1] > r + 0.012f ? -3.0f : 0.0f;
    CHECK_OK(pbd_particles_set_velocities(s->w, s->particles, vel));
    free(vel);
    if (self) CHECK(sc_surface(s, th));
    int crossings = sc_run(s, 360, 1.0f / 240.0f, NULL, contacts);
    const float *x = pbd_world_positions(s->w);
    sc_sleeve_height = 0;
    for (int i = 0; i < s->particles.count; ++i) {
        float y = x[4 * (s->particles.first + i) + 1];
        sc_sleeve_height = y > sc_sleeve_height ? y : sc_sleeve_height;
    }
    sc_free(s);
    return crossings;
}

TEST(selfcollision_collapsing_sleeve_never_crosses) {
    sc_with_and_without("collapsing sleeve", sc_sleeve, 0);
    CHECK_MSG(sc_sleeve_height < 0.07f, "the sleeve did not collapse: %.3g m high (0.132 at the start)",
              sc_sleeve_height);
}

/* Two n x n cloths in one world (the lower one at o1, the upper one at o2,
   both with sides u and v) over a ground plane, each a collision surface
   of thickness th. */
static void sc_two_cloths(sc_scene *lower, sc_scene *upper, int n, const float *o1, const float *o2, const float *u,
                          const float *v, float th) {
    memset(lower, 0, sizeof *lower);
    memset(upper, 0, sizeof *upper);
    CHECK(sc_cloth(lower, n, o1, u, v, 8));
    upper->w = lower->w;
    CHECK(sc_cloth(upper, n, o2, u, v, 8));
    float p[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(lower->w, p, up, 0.5f, NULL));
    pbd_collision_surface_desc sd = pbd_collision_surface_desc_default();
    sd.thickness = th;
    sd.triangles = lower->tri;
    sd.triangle_count = lower->nt;
    CHECK_OK(pbd_add_collision_surface(lower->w, &sd, NULL));
    sd.triangles = upper->tri;
    sd.triangle_count = upper->nt;
    CHECK_OK(pbd_add_collision_surface(lower->w, &sd, NULL));
}

/* Two cloths dropped one above the other onto the ground: cloth-cloth
   collision keeps every vertex of each at least 0.9 thickness from the
   triangles of the other. */
static double sc_point_tri(const float *q, const float *a, const float *b, const float *c);

TEST(selfcollision_stacked_cloths_keep_thickness) {
    const float th = 0.02f;
    sc_scene lower, upper;
    float o1[3] = {-0.4f, 0.05f, -0.4f}, o2[3] = {-0.3f, 0.15f, -0.35f}, u[3] = {0.8f, 0, 0}, v[3] = {0, 0, 0.8f};
    sc_two_cloths(&lower, &upper, 10, o1, o2, u, v, th);
    CHECK(pbd_world_surface_count(lower.w) == 2);
    double worst = 1e9;
    for (int k = 0; k < 240; ++k) {
        CHECK_OK(pbd_world_step(lower.w, 1.0f / 240.0f));
        if (k < 120 || k % 8) continue; /* the last half second, at rest */
        const float *x = pbd_world_positions(lower.w);
        for (int pass = 0; pass < 2; ++pass) {
            const sc_scene *A = pass ? &upper : &lower, *B = pass ? &lower : &upper;
            for (int i = 0; i < B->particles.count; ++i) {
                const float *q = x + 4 * (B->particles.first + i);
                double best = 1e9;
                for (int t = 0; t < A->nt; ++t) {
                    double d =
                        sc_point_tri(q, x + 4 * A->tri[3 * t], x + 4 * A->tri[3 * t + 1], x + 4 * A->tri[3 * t + 2]);
                    if (d < best) best = d;
                }
                if (best < worst) worst = best;
            }
        }
    }
    printf("    stacked cloths: smallest vertex-triangle distance %.4g m (thickness %.3g)\n", worst, th);
    CHECK(worst >= 0.9 * th);
    /* they do touch: the upper one rests on the lower one */
    CHECK(worst < 1.5 * th);
    free(upper.tri);
    pbd_mesh_free(&upper.m);
    sc_free(&lower);
}

/* Two 0.6 m cloths (12 x 12) lying one on the other on the ground: the
   lower one held by its back edge, the upper one dragged by its front edge
   (kinematic) 0.45 m across it at 0.75 m/s, with self- and cloth-cloth
   collision. The crossing test covers both cloths' vertices against both
   cloths' triangles. */
static void sc_drag_move(sc_scene *s, int k) {
    const int n = 12;
    float shift = 0.75f / 240.0f * (float)(k < 144 ? k + 1 : 144);
    const float *x = pbd_world_positions(s->w);
    for (int i = 0; i < n; ++i) {
        int id = s->particles.first + s->particles.count - n + i; /* the upper cloth's last row */
        float t[3] = {0.3f + shift, x[4 * id + 1], x[4 * id + 2]};
        pbd_particle_set_kinematic_target(s->w, id, t);
    }
}

TEST(selfcollision_stacked_cloths_dragged_never_cross) {
    const float th = 0.01f;
    sc_scene lower, upper;
    /* v along x, so the last row of the upper cloth is its front edge at x = 0.3 */
    float o1[3] = {-0.3f, 0.011f, -0.3f}, o2[3] = {-0.3f, 0.011f + 2.5f * th, -0.3f}, u[3] = {0, 0, 0.6f},
          v[3] = {0.6f, 0, 0};
    sc_two_cloths(&lower, &upper, 12, o1, o2, u, v, th);
    for (int i = 0; i < 12; ++i) {
        CHECK_OK(pbd_particle_pin(lower.w, lower.particles.first + i));
        CHECK_OK(pbd_particle_set_kinematic(lower.w, upper.particles.first + upper.particles.count - 12 + i, 1));
    }
    /* one scene over both cloths (their particles are contiguous) */
    sc_scene both = lower;
    CHECK(upper.particles.first == lower.particles.first + lower.particles.count);
    both.nt = lower.nt + upper.nt;
    both.tri = (int *)malloc(sizeof(int) * 3 * (size_t)both.nt);
    memcpy(both.tri, lower.tri, sizeof(int) * 3 * (size_t)lower.nt);
    memcpy(both.tri + 3 * lower.nt, upper.tri, sizeof(int) * 3 * (size_t)upper.nt);
    both.particles.count = lower.particles.count + upper.particles.count;
    int contacts = 0, crossings = sc_run(&both, 240, 1.0f / 240.0f, sc_drag_move, &contacts);
    const float *x = pbd_world_positions(lower.w);
    float front = x[4 * (upper.particles.first + upper.particles.count - 1)];
    printf("    upper cloth dragged across the lower one: %d crossings (up to %d candidates), front edge at x = %.3g\n",
           crossings, contacts, front);
    CHECK(crossings == 0);
    CHECK(contacts > 100);
    CHECK(front > 0.7f);
    free(both.tri);
    free(upper.tri);
    pbd_mesh_free(&upper.m);
    sc_free(&lower);
}

/* Vertex-triangle distance (closest point by barycentric clamping to edges). */
static double sc_point_tri(const float *qf, const float *af, const float *bf, const float *cf) {
    sc_v q = {qf[0], qf[1], qf[2]}, a = {af[0], af[1], af[2]}, b = {bf[0], bf[1], bf[2]}, c = {cf[0], cf[1], cf[2]};
    sc_v nn = sc_cross(sc_sub(b, a), sc_sub(c, a));
    double l2 = sc_dot(nn, nn);
    double u = sc_dot(sc_cross(sc_sub(b, q), sc_sub(c, q)), nn) / l2;
    double v = sc_dot(sc_cross(sc_sub(c, q), sc_sub(a, q)), nn) / l2;
    if (u >= 0 && v >= 0 && 1 - u - v >= 0) return fabs(sc_dot(sc_sub(q, a), nn)) / sqrt(l2);
    const sc_v *P[3] = {&a, &b, &c};
    double best = 1e30;
    for (int k = 0; k < 3; ++k) {
        sc_v s = *P[k], e = sc_sub(*P[(k + 1) % 3], s), r = sc_sub(q, s);
        double t = sc_dot(r, e) / sc_dot(e, e);
        t = t < 0 ? 0 : (t > 1 ? 1 : t);
        sc_v d = {r.x - t * e.x, r.y - t * e.y, r.z - t * e.z};
        double l = sqrt(sc_dot(d, d));
        if (l < best) best = l;
    }
    return best;
}

/* ---- the candidate search against brute force ------------------------------- */

/* Closest points of segments p0 p1 and q0 q1 in double (Ericson 5.1.9):
   the parameters, or 0 when the segments are near parallel. */
static int sc_segments(const float *p0, const float *p1, const float *q0, const float *q1, double *s, double *t,
                       double *dist) {
    sc_v P0 = {p0[0], p0[1], p0[2]}, P1 = {p1[0], p1[1], p1[2]}, Q0 = {q0[0], q0[1], q0[2]}, Q1 = {q1[0], q1[1], q1[2]};
    sc_v d1 = sc_sub(P1, P0), d2 = sc_sub(Q1, Q0), r = sc_sub(P0, Q0);
    double a = sc_dot(d1, d1), e = sc_dot(d2, d2), b = sc_dot(d1, d2), c = sc_dot(d1, r), f = sc_dot(d2, r),
           den = a * e - b * b;
    if (!(den > 1e-6 * a * e)) return 0;
    double S = (b * f - c * e) / den, T = (b * S + f) / e;
    if (S < 0 || S > 1 || T < 0 || T > 1) return 0; /* the closest points are not both inner points */
    sc_v x = sc_at(P0, d1, S), y = sc_at(Q0, d2, T), dd = sc_sub(x, y);
    *s = S;
    *t = T;
    *dist = sqrt(sc_dot(dd, dd));
    return 1;
}

/* A crumpled cloth: a 12 x 12 grid squeezed to a third of its size with
   random heights and jitter, so that it overlaps itself everywhere. Its
   candidates after one substep (found from these positions) hold every
   vertex-triangle pair and every pair of edges with inner closest points
   that are closer than the thickness, unless the vertex (edge) already
   holds as many nearer candidates as it keeps (8, 4); 1 and 2 threads
   agree. The search reaches further: particles may move a thickness per
   substep, and a vertex acts within sqrt(2) thicknesses of a triangle
   (see the manual), so the pairs within 3.3 (vertex-triangle) and 2.9
   (edge-edge) thicknesses are checked as well. */
static pbd_world *sc_crumpled(sc_scene *s, float th, unsigned seed, int threads) {
    memset(s, 0, sizeof *s);
    pbd_world_desc d = pbd_world_desc_default();
    d.gravity[1] = 0;
    d.substeps = 1;
    d.iterations = 1;
    CHECK_OK(pbd_world_create(&d, &s->w));
    float o[3] = {0, 0, 0}, u[3] = {0.5f, 0, 0}, v[3] = {0, 0, 0.5f};
    CHECK(sc_cloth(s, 12, o, u, v, 1));
    int n = s->particles.count;
    float *x = (float *)malloc(sizeof(float) * 3 * (size_t)n);
    for (int i = 0; i < n; ++i) {
        x[3 * i] = s->m.positions[3 * i] * 0.3f + 0.01f * pbdt_rand(&seed);
        x[3 * i + 1] = 0.05f * pbdt_rand(&seed);
        x[3 * i + 2] = s->m.positions[3 * i + 2] * 0.3f + 0.01f * pbdt_rand(&seed);
    }
    CHECK_OK(pbd_particles_set_positions(s->w, s->particles, x));
    free(x);
    CHECK(sc_surface(s, th));
    CHECK_OK(pbd_world_set_threads(s->w, threads));
    return s->w;
}

static int sc_has(const int *q, int nq, int a, int b, int c, int d) {
    for (int k = 0; k < nq; ++k)
        if (q[4 * k] == a && q[4 * k + 1] == b && q[4 * k + 2] == c && q[4 * k + 3] == d) return 1;
    return 0;
}

TEST(selfcollision_candidates_hold_every_close_pair) {
    const float th = 0.012f;
    for (unsigned seed = 1; seed <= 6; ++seed) {
        double reach_pt = seed <= 3 ? th : 3.3 * th, reach_ee = seed <= 3 ? th : 2.9 * th;
        sc_scene s, s2;
        sc_crumpled(&s, th, (seed % 3 + 1) * 7919u, 1);
        sc_crumpled(&s2, th, (seed % 3 + 1) * 7919u, 2);
        int n = pbd_world_particle_count(s.w);
        float *x = (float *)malloc(sizeof(float) * 4 * (size_t)n);
        memcpy(x, pbd_world_positions(s.w), sizeof(float) * 4 * (size_t)n); /* the positions of the search */
        CHECK_OK(pbd_world_step(s.w, 1.0f / 240.0f));
        CHECK_OK(pbd_world_step(s2.w, 1.0f / 240.0f));
        int npt = 0, npt2 = 0, nq = 0, nq1 = 0, nq2 = 0;
        CHECK_OK(pbd_world_self_contacts(s.w, NULL, 0, &nq, &npt));
        CHECK(nq == pbd_world_self_contact_count(s.w));
        int *q = (int *)malloc(sizeof(int) * 4 * (size_t)(nq + 1)),
            *q2 = (int *)malloc(sizeof(int) * 4 * (size_t)(nq + 1));
        CHECK_OK(pbd_world_self_contacts(s.w, q, nq, &nq1, NULL));
        CHECK_OK(pbd_world_self_contacts(s2.w, q2, nq, &nq2, &npt2));
        CHECK(nq1 == nq && nq2 == nq);
        CHECK(npt2 == npt);
        CHECK_MSG(memcmp(q, q2, sizeof(int) * 4 * (size_t)nq) == 0, "1 and 2 threads found other candidates");
        /* vertex-triangle pairs */
        int close = 0, missed = 0;
        for (int i = 0; i < n; ++i) {
            int held = 0;
            double farthest = 0;
            for (int k = 0; k < npt; ++k)
                if (q[4 * k] == i) {
                    double dk =
                        sc_point_tri(x + 4 * i, x + 4 * q[4 * k + 1], x + 4 * q[4 * k + 2], x + 4 * q[4 * k + 3]);
                    held++;
                    farthest = dk > farthest ? dk : farthest;
                }
            for (int t = 0; t < s.nt; ++t) {
                const int *T = s.tri + 3 * t;
                if (T[0] == i || T[1] == i || T[2] == i) continue;
                double dist = sc_point_tri(x + 4 * i, x + 4 * T[0], x + 4 * T[1], x + 4 * T[2]);
                if (!(dist < reach_pt)) continue;
                close++;
                if (!sc_has(q, npt, i, T[0], T[1], T[2]) && !(held == 8 && farthest <= dist + 1e-6)) missed++;
            }
        }
        /* edge-edge pairs: the edges of the grid's triangles */
        int nes = 0, *edges = (int *)malloc(sizeof(int) * 6 * (size_t)s.nt);
        for (int t = 0; t < s.nt; ++t)
            for (int j = 0; j < 3; ++j) {
                int a = s.tri[3 * t + j], b = s.tri[3 * t + (j + 1) % 3], dup = 0;
                for (int k = 0; k < nes && !dup; ++k)
                    dup = (edges[2 * k] == a && edges[2 * k + 1] == b) || (edges[2 * k] == b && edges[2 * k + 1] == a);
                if (!dup) {
                    edges[2 * nes] = a;
                    edges[2 * nes + 1] = b;
                    nes++;
                }
            }
        int close_ee = 0, missed_ee = 0;
        for (int e = 0; e < nes; ++e)
            for (int f = e + 1; f < nes; ++f) {
                int a0 = edges[2 * e], a1 = edges[2 * e + 1], b0 = edges[2 * f], b1 = edges[2 * f + 1];
                if (a0 == b0 || a0 == b1 || a1 == b0 || a1 == b1) continue;
                double ps, pt, dist;
                if (!sc_segments(x + 4 * a0, x + 4 * a1, x + 4 * b0, x + 4 * b1, &ps, &pt, &dist)) continue;
                if (!(dist < reach_ee) || ps < 0.01 || ps > 0.99 || pt < 0.01 || pt > 0.99) continue;
                close_ee++;
                int found = 0, held_a = 0, held_b = 0;
                for (int k = npt; k < nq; ++k) {
                    const int *Q = q + 4 * k;
                    int ea = (Q[0] == a0 && Q[1] == a1) || (Q[0] == a1 && Q[1] == a0);
                    int eb = (Q[2] == b0 && Q[3] == b1) || (Q[2] == b1 && Q[3] == b0);
                    int fa = (Q[0] == b0 && Q[1] == b1) || (Q[0] == b1 && Q[1] == b0);
                    int fb = (Q[2] == a0 && Q[3] == a1) || (Q[2] == a1 && Q[3] == a0);
                    found |= (ea && eb) || (fa && fb);
                    held_a += ea;
                    held_b += fa;
                }
                if (!found && held_a < 4 && held_b < 4) missed_ee++;
            }
        printf("    crumpled cloth %u: %d candidates; %d vertex-triangle and %d edge-edge pairs within %.1f and %.1f "
               "thicknesses, %d + %d missed\n",
               seed, nq, close, close_ee, reach_pt / th, reach_ee / th, missed, missed_ee);
        CHECK(close > 20);
        CHECK(close_ee > 0);
        CHECK(missed == 0);
        CHECK(missed_ee == 0);
        free(edges);
        free(q);
        free(q2);
        free(x);
        sc_free(&s);
        sc_free(&s2);
    }
}

/* ---- determinism, snapshot, bad input ------------------------------------------ */

static pbd_world *sc_small_scene(sc_scene *s) {
    memset(s, 0, sizeof *s);
    float o[3] = {-0.45f, 0.35f, -0.6f}, u[3] = {1.2f, 0, 0}, v[3] = {0, 0.25f, 1.2f};
    sc_cloth(s, 14, o, u, v, 6);
    float c[3] = {0, 0, 0};
    pbd_add_collider_sphere(s->w, c, 0.2f, 0.3f, NULL);
    sc_surface(s, 0.02f);
    return s->w;
}

TEST(selfcollision_threads_simd_snapshot_identical) {
    pbdt_parity(PBDT_SIMD, PBDT_THREADS); /* the snapshot part runs in every build */
    sc_scene a, b, c;
    sc_small_scene(&a);
    sc_small_scene(&b);
    sc_small_scene(&c);
    CHECK_OK(pbd_world_set_threads(a.w, 1));
    CHECK_OK(pbd_world_set_simd(a.w, 0));
    CHECK_OK(pbd_world_set_threads(b.w, 2));
    CHECK_OK(pbd_world_set_threads(c.w, 1));
    int seen = 0;
    for (int k = 0; k < 90; ++k) {
        CHECK_OK(pbd_world_step(a.w, 1.0f / 240.0f));
        CHECK_OK(pbd_world_step(c.w, 1.0f / 240.0f));
        if (k >= 85) CHECK_OK(pbd_world_step(b.w, 1.0f / 240.0f)); /* b: restored below */
        if (k == 84) {
            size_t n = pbd_world_snapshot_size(c.w);
            void *buf = malloc(n);
            CHECK_OK(pbd_world_save(c.w, buf, n));
            CHECK_OK(pbd_world_restore(b.w, buf, n));
            CHECK(pbd_world_surface_count(b.w) == 1);
            free(buf);
        }
        seen += pbd_world_self_contact_count(a.w);
    }
    int n = pbd_world_particle_count(a.w);
    CHECK(seen > 0);
    CHECK_MSG(memcmp(pbd_world_positions(a.w), pbd_world_positions(c.w), sizeof(float) * 4 * (size_t)n) == 0,
              "scalar 1 thread differs from SIMD 1 thread");
    CHECK_MSG(memcmp(pbd_world_positions(b.w), pbd_world_positions(c.w), sizeof(float) * 4 * (size_t)n) == 0,
              "restored and run on 2 threads differs from 1 thread");
    sc_free(&a);
    sc_free(&b);
    sc_free(&c);
    /* the twist, wrapped around itself: hundreds of candidates, so many
       colours (a colour holds at most a quarter of the vertices' worth of
       candidates, 4 vertices each); the 2-thread world takes over from a
       snapshot before the cloth wraps (barriers are slow under
       OMP_WAIT_POLICY=passive) */
    sc_scene t[3];
    int most = 0;
    for (int k = 0; k < 3; ++k) {
        CHECK(sc_twist_scene(&t[k], 1));
        CHECK_OK(pbd_world_set_threads(t[k].w, k == 2 ? 2 : 1));
        CHECK_OK(pbd_world_set_simd(t[k].w, k != 0));
    }
    for (int s = 0; s < 300; ++s) {
        if (s == 280) {
            size_t bytes = pbd_world_snapshot_size(t[1].w);
            void *buf = malloc(bytes);
            CHECK_OK(pbd_world_save(t[1].w, buf, bytes));
            CHECK_OK(pbd_world_restore(t[2].w, buf, bytes));
            free(buf);
        }
        for (int k = 0; k < 3; ++k) {
            if (k == 2 && s < 280) continue;
            sc_twist_move(&t[k], s);
            CHECK_OK(pbd_world_step(t[k].w, 1.0f / 240.0f));
        }
        int c = pbd_world_self_contact_count(t[2].w);
        most = c > most ? c : most;
    }
    n = pbd_world_particle_count(t[0].w);
    printf("    twist on 2 threads: up to %d candidates, at least %d colours\n", most, (most + n / 4 - 1) / (n / 4));
    CHECK(most > 4 * (n / 4)); /* more than 4 colours */
    CHECK_MSG(memcmp(pbd_world_positions(t[0].w), pbd_world_positions(t[1].w), sizeof(float) * 4 * (size_t)n) == 0,
              "twist: scalar 1 thread differs from SIMD 1 thread");
    CHECK_MSG(memcmp(pbd_world_positions(t[2].w), pbd_world_positions(t[1].w), sizeof(float) * 4 * (size_t)n) == 0,
              "twist: 2 threads differ from 1 thread");
    for (int k = 0; k < 3; ++k) sc_free(&t[k]);
}

TEST(selfcollision_cloth_helper_with_permutation) {
    pbd_world *w = pbdt_world(-9.81f);
    pbd_mesh m;
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(8, 8, o, u, v, &m));
    int perm[64];
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.reorder = 1;
    cd.permutation = perm;
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &cd, &cloth));
    pbd_surface s = {0};
    CHECK_OK(pbd_add_cloth_self_collision(w, cloth, &cd, 0.01f, &s));
    CHECK(s.id != 0);
    /* the same particles again: a particle belongs to one surface */
    CHECK_RESULT(pbd_add_cloth_self_collision(w, cloth, &cd, 0.01f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(pbd_world_surface_count(w) == 1);
    for (int k = 0; k < 5; ++k) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(selfcollision_bad_input) {
    sc_scene s;
    sc_small_scene(&s);
    pbd_world *w = s.w;
    size_t n = pbd_world_snapshot_size(w);
    unsigned char *a = (unsigned char *)malloc(n), *b = (unsigned char *)malloc(n);
    CHECK_OK(pbd_world_save(w, a, n));
    int tri[3] = {0, 1, 2}, oob[3] = {0, 1, 100000}, rep[3] = {0, 0, 1};
    pbd_collision_surface_desc d = pbd_collision_surface_desc_default();
    d.triangle_count = 1;
    d.triangles = tri;
    CHECK_RESULT(pbd_add_collision_surface(NULL, &d, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_add_collision_surface(w, NULL, NULL), PBD_ERROR_NULL_POINTER);
    d.thickness = 0;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d.thickness = -0.1f;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d.thickness = NAN;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_NOT_FINITE);
    d.thickness = 0.01f;
    d.self_collision = 2; /* a switch: 0 or 1 */
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "self_collision 2 must be 0 or 1") != NULL);
    d.self_collision = 1;
    d.triangles = oob;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
    d.triangles = rep;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d.triangles = NULL;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_NULL_POINTER);
    d.triangles = tri;
    d.triangle_count = 0;
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d.triangle_count = 1; /* particles 0..2 already belong to the scene's surface */
    CHECK_RESULT(pbd_add_collision_surface(w, &d, NULL), PBD_ERROR_INVALID_ARGUMENT);
    pbd_cloth_desc cd = pbdt_cloth_desc(&s.m);
    pbd_object forged = {12345u}, none = {0};
    CHECK_RESULT(pbd_add_cloth_self_collision(w, forged, &cd, 0.01f, NULL), PBD_ERROR_INVALID_HANDLE);
    CHECK_RESULT(pbd_add_cloth_self_collision(w, none, &cd, 0.01f, NULL), PBD_ERROR_INVALID_HANDLE);
    CHECK_RESULT(pbd_add_cloth_self_collision(w, s.cloth, NULL, 0.01f, NULL), PBD_ERROR_NULL_POINTER);
    cd.vertex_count = 3;
    CHECK_RESULT(pbd_add_cloth_self_collision(w, s.cloth, &cd, 0.01f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(pbd_world_surface_count(w) == 1);
    CHECK(pbd_world_snapshot_size(w) == n);
    CHECK_OK(pbd_world_save(w, b, n));
    CHECK(memcmp(a, b, n) == 0);
    free(a);
    free(b);
    sc_free(&s);
}

/* A self-colliding surface thicker than its rest gap (the median of its
   triangles' smallest heights: a grid's edge / sqrt(2)) would start in
   contact with itself and fly apart (a 24 x 24 cloth of 4.3 cm edges,
   gap 3.07 cm: at rest at 3 cm, 17 m/s at 3.2 cm): refused, naming both,
   with nothing changed. Without self-collision the thickness is free (it
   meets only other surfaces). */
TEST(selfcollision_thicker_than_its_rest_gap_is_refused) {
    pbd_world *w = pbdt_world(-9.81f);
    pbd_mesh m;
    pbd_cloth_desc cd;
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_object cloth = pbdt_grid_cloth(w, 24, 24, o, u, v, &m, &cd);
    CHECK(cloth.id != 0);
    size_t n;
    unsigned char *before = pbdt_save(w, &n);
    CHECK_RESULT(pbd_add_cloth_self_collision(w, cloth, &cd, 0.032f, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_MSG(strstr(pbd_world_last_error(w), "thickness 0.032 m") && strstr(pbd_world_last_error(w), "rest gap 0.030"),
              "message: %s", pbd_world_last_error(w));
    size_t n2;
    unsigned char *after = pbdt_save(w, &n2);
    CHECK(n2 == n && memcmp(before, after, n) == 0 && pbd_world_surface_count(w) == 0);
    CHECK_OK(pbd_add_cloth_self_collision(w, cloth, &cd, 0.03f, NULL));
    pbd_world_destroy(w);
    /* without self-collision: any thickness */
    w = pbdt_world(-9.81f);
    CHECK_OK(pbd_add_cloth(w, &cd, &cloth));
    int *tri = (int *)malloc(sizeof(int) * 3 * (size_t)m.triangle_count);
    pbd_object_parts parts = pbdt_parts(w, cloth);
    for (int k = 0; k < 3 * m.triangle_count; ++k) tri[k] = parts.particles.first + m.triangles[k];
    pbd_collision_surface_desc sd = pbd_collision_surface_desc_default();
    sd.triangles = tri;
    sd.triangle_count = m.triangle_count;
    sd.thickness = 0.1f;
    sd.self_collision = 0;
    CHECK_OK(pbd_add_collision_surface(w, &sd, NULL));
    free(tri);
    free(before);
    free(after);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* The speed limit of self-collision takes velocity away from a falling
   cloth from outside, as a collider would: the free object's angular
   momentum kept by the solver (docs/DESIGN.md section 4.4) must be taken after
   it. Taken before, the removed momentum came back as spin every substep:
   a cloth dropped away from the origin had velocities growing with g t
   (10 m/s after 1 s against a limit of 0.12 m/s) and corners flung
   upwards. */
TEST(selfcollision_speed_limit_adds_no_spin) {
    sc_scene s;
    memset(&s, 0, sizeof s);
    float o[3] = {1.0f, 2.0f, 0.5f}, u[3] = {0.2f, 0, 0}, v[3] = {0, 0, 0.2f};
    const float th = 0.002f, dt = 1.0f / 60.0f, limit = th / dt; /* one substep: a thickness per step */
    CHECK(sc_cloth(&s, 10, o, u, v, 4));
    CHECK(sc_surface(&s, th));
    int n = pbd_world_particle_count(s.w);
    for (int k = 0; k < 60; ++k) CHECK_OK(pbd_world_step(s.w, dt));
    const float *x = pbd_world_positions(s.w), *vel = pbd_world_velocities(s.w);
    double c[3] = {0, 0, 0}, L[3] = {0, 0, 0}, fastest = 0, up = -1e9;
    for (int i = 0; i < n; ++i)
        for (int a = 0; a < 3; ++a) c[a] += x[4 * i + a] / n;
    for (int i = 0; i < n; ++i) {
        double r[3] = {x[4 * i] - c[0], x[4 * i + 1] - c[1], x[4 * i + 2] - c[2]};
        const float *q = vel + 4 * i;
        L[0] += r[1] * q[2] - r[2] * q[1];
        L[1] += r[2] * q[0] - r[0] * q[2];
        L[2] += r[0] * q[1] - r[1] * q[0];
        double sp = sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]);
        fastest = sp > fastest ? sp : fastest;
        up = q[1] > up ? q[1] : up;
    }
    CHECK_MSG(fastest <= limit * 1.001, "fastest particle %.4g m/s, the limit is %.4g", fastest, limit);
    CHECK_MSG(up < 0, "a particle rises at %.4g m/s in free fall", up);
    double spin =
        sqrt(L[0] * L[0] + L[1] * L[1] + L[2] * L[2]) / (n * 0.1 * limit); /* against a whole turn at the limit */
    CHECK_MSG(spin < 1e-3, "angular momentum about the centre %.3g of its bound", spin);
    sc_free(&s);
}

void suite_selfcollision(void) {
    RUN(selfcollision_speed_limit_adds_no_spin);
    RUN(selfcollision_ccd_reference);
    RUN(selfcollision_cloth_on_sphere_never_crosses);
    RUN(selfcollision_twisted_cloth_never_crosses);
    RUN(selfcollision_strip_twisted_two_turns_never_crosses);
    RUN(selfcollision_cloth_falling_onto_itself_at_the_limit_never_crosses);
    RUN(selfcollision_collapsing_sleeve_never_crosses);
    RUN(selfcollision_stacked_cloths_keep_thickness);
    RUN(selfcollision_stacked_cloths_dragged_never_cross);
    RUN(selfcollision_candidates_hold_every_close_pair);
    RUN(selfcollision_threads_simd_snapshot_identical);
    RUN(selfcollision_cloth_helper_with_permutation);
    RUN(selfcollision_bad_input);
    RUN(selfcollision_thicker_than_its_rest_gap_is_refused);
}
