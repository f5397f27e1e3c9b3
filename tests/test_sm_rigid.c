/* tests/test_sm_rigid.c - pbd_sm.h rigid bodies under contact (issue 16,
   item 3): a rigid body (RIGID mode, stiffness 1, one cluster: the
   defaults) dropped 1 m onto a plane, onto a box edge and onto another
   body keeps its shape within 0.5% at every substep and then rests
   without jitter; static friction holds it on a slope, restitution and
   sliding friction act on it as on a rigid body (against the analytic
   bounce height and stopping distance); particle contacts between two
   flying bodies of different masses keep linear momentum, and a free
   body keeps linear and angular momentum; linear and quadratic bodies
   deform under contact as much as under pinning (their stiffness is not
   changed by the contacts); a lattice with the defaults is one rigid
   cluster and stays rigid dropped and hung from a corner.

   Distortion of a body: the largest distance of a particle from the best
   rigid fit of the rest shape (least squares, equal weights), over the
   body's radius (largest rest distance from its centre); and the largest
   relative change of a particle pair's distance. */
#include "test.h"
#include "../pbd_sm.h"
#include <stdlib.h>

#define SMR_N 4 /* a body is SMR_N^3 particles */
#define SMR_COUNT (SMR_N * SMR_N * SMR_N)
static const float SMR_S = 0.05f; /* spacing; radius SMR_S / 2: a closed 0.2 m box */

typedef struct smr_body {
    pbd_range r;
    double rest[3 * SMR_COUNT]; /* rest offsets from the centre */
    double radius;
} smr_body;

static void smr_quat(double ax, double ay, double az, double ang, double *q) {
    double l = sqrt(ax * ax + ay * ay + az * az), s = sin(ang / 2) / l;
    q[0] = ax * s;
    q[1] = ay * s;
    q[2] = az * s;
    q[3] = cos(ang / 2);
}
static void smr_rotate(const double *q, const double *v, double *o) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    double R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - z * w),     2 * (x * z + y * w),
                   2 * (x * y + z * w),     1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                   2 * (x * z - y * w),     2 * (y * z + x * w),     1 - 2 * (x * x + y * y)};
    for (int a = 0; a < 3; ++a) o[a] = R[3 * a] * v[0] + R[3 * a + 1] * v[1] + R[3 * a + 2] * v[2];
}

/* A box of particles centred at `centre`, turned by q, as one shape-matched
   body with the defaults (or `mode`). */
static void smr_add_box(pbd_world *w, smr_body *b, const float *centre, const double *q, float mass, pbd_sm_mode mode) {
    float pos[3 * SMR_COUNT];
    double h = 0.5 * (SMR_N - 1) * SMR_S;
    int k = 0;
    for (int z = 0; z < SMR_N; ++z)
        for (int y = 0; y < SMR_N; ++y)
            for (int x = 0; x < SMR_N; ++x, ++k) {
                double v[3] = {x * SMR_S - h, y * SMR_S - h, z * SMR_S - h}, o[3];
                smr_rotate(q, v, o);
                for (int a = 0; a < 3; ++a) {
                    b->rest[3 * k + a] = v[a];
                    pos[3 * k + a] = (float)(centre[a] + o[a]);
                }
            }
    b->radius = sqrt(3.0) * h;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = SMR_COUNT;
    pd.mass = mass;
    pd.radius = 0.5f * SMR_S;
    CHECK_OK(pbd_add_particles(w, &pd, &b->r));
    int idx[SMR_COUNT];
    for (int i = 0; i < SMR_COUNT; ++i) idx[i] = b->r.first + i;
    pbd_sm_body_desc d = pbd_sm_body_desc_default();
    d.particles = idx;
    d.particle_count = SMR_COUNT;
    d.mode = mode;
    CHECK_OK(pbd_sm_add_body(w, &d, NULL));
}

/* Distortion of body b at positions x (4 floats per particle): best-fit
   distance / radius, and the largest relative change of a pair distance. */
static void smr_distortion(const smr_body *b, const float *x, double *fit, double *pair) {
    double c[3] = {0, 0, 0}, A[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0}, q[4] = {0, 0, 0, 1};
    const float *p = x + 4 * (size_t)b->r.first;
    for (int i = 0; i < SMR_COUNT; ++i)
        for (int a = 0; a < 3; ++a) c[a] += p[4 * i + a] / (double)SMR_COUNT;
    for (int i = 0; i < SMR_COUNT; ++i)
        for (int a = 0; a < 3; ++a)
            for (int d = 0; d < 3; ++d) A[3 * a + d] += (p[4 * i + a] - c[a]) * b->rest[3 * i + d];
    pbd_sm_extract_rotation_d(A, q, 100);
    *fit = *pair = 0;
    for (int i = 0; i < SMR_COUNT; ++i) {
        double g[3], e = 0;
        smr_rotate(q, b->rest + 3 * i, g);
        for (int a = 0; a < 3; ++a) e += (p[4 * i + a] - c[a] - g[a]) * (p[4 * i + a] - c[a] - g[a]);
        if (sqrt(e) / b->radius > *fit) *fit = sqrt(e) / b->radius;
        for (int j = i + 1; j < SMR_COUNT; ++j) {
            double d0 = 0, d1 = 0;
            for (int a = 0; a < 3; ++a) {
                double u = b->rest[3 * i + a] - b->rest[3 * j + a], v = (double)p[4 * i + a] - p[4 * j + a];
                d0 += u * u;
                d1 += v * v;
            }
            double rel = fabs(sqrt(d1) - sqrt(d0)) / sqrt(d0);
            if (rel > *pair) *pair = rel;
        }
    }
}

/* A plugin that records the largest distortion after every substep. */
typedef struct smr_probe {
    const smr_body *bodies[2];
    int count;
    double fit, pair;
} smr_probe;

static void smr_probe_end(void *user, const pbd_solve_context *c) {
    smr_probe *pr = (smr_probe *)user;
    for (int k = 0; k < pr->count; ++k) {
        double f, p;
        smr_distortion(pr->bodies[k], c->x, &f, &p);
        if (f > pr->fit) pr->fit = f;
        if (p > pr->pair) pr->pair = p;
    }
}

static void smr_add_probe(pbd_world *w, smr_probe *pr) {
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "distortion probe";
    pd.user = pr;
    pd.particle_end = pbd_world_particle_count(w);
    pd.end_substep = smr_probe_end;
    CHECK_OK(pbd_add_plugin(w, &pd, NULL));
}

/* Steps `steps` frames of 1/60 s; over the last `rest` of them, the largest
   particle speed and the largest displacement from where the window began. */
static void smr_run(pbd_world *w, int steps, int rest, double *max_speed, double *drift) {
    int n = pbd_world_particle_count(w);
    float *start = (float *)malloc(sizeof(float) * 4 * (size_t)n);
    *max_speed = *drift = 0;
    for (int s = 0; s < steps && start; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60));
        const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
        if (s == steps - rest - 1) memcpy(start, x, sizeof(float) * 4 * (size_t)n);
        if (s < steps - rest) continue;
        for (int i = 0; i < n; ++i) {
            double sp = 0, d = 0;
            for (int a = 0; a < 3; ++a) {
                sp += (double)v[4 * i + a] * v[4 * i + a];
                d += ((double)x[4 * i + a] - start[4 * i + a]) * ((double)x[4 * i + a] - start[4 * i + a]);
            }
            if (sqrt(sp) > *max_speed) *max_speed = sqrt(sp);
            if (sqrt(d) > *drift) *drift = sqrt(d);
        }
    }
    free(start);
}

static double smr_min_y(const pbd_world *w) {
    const float *x = pbd_world_positions(w);
    double m = 1e30;
    for (int i = 0; i < pbd_world_particle_count(w); ++i) m = x[4 * i + 1] < m ? x[4 * i + 1] : m;
    return m;
}

/* Dropped from 1 m (lowest point 1 m above what it lands on), tilted so
   that a corner or an edge strikes first: onto the ground, onto the edge
   of a box turned 45 degrees (it tips off onto the ground), onto a body
   resting on the ground. 3.5 s, the last second at rest (the body that
   tips off the edge tumbles on the ground until 2.5 s). */
static void smr_drop(int scene) {
    const double half = 0.5 * SMR_N * SMR_S; /* half width with the particle radius */
    {
        pbd_world *w = pbdt_world(-9.81f);
        float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
        CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
        smr_body a, b;
        smr_probe pr = {{&a, &b}, 1, 0, 0};
        double q[4], q0[4] = {0, 0, 0, 1};
        if (scene == 0) {
            smr_quat(1, 0.3, 0.5, 0.6, q);
            float c[3] = {0, (float)(1.0 + 1.5 * half), 0};
            smr_add_box(w, &a, c, q, 1, PBD_SM_RIGID);
        } else if (scene == 1) {
            double e[4];
            smr_quat(0, 0, 1, 0.785398163, e);
            float bc[3] = {0, 0.2f, 0}, he[3] = {0.1f, 0.1f, 0.3f},
                  br[4] = {(float)e[0], (float)e[1], (float)e[2], (float)e[3]};
            CHECK_OK(pbd_add_collider_box(w, bc, he, br, 0.5f, NULL));
            smr_quat(0, 1, 0, 0.3, q);
            float c[3] = {0.03f, (float)(0.2 + 0.1 * sqrt(2.0) + 1.0 + half), 0};
            smr_add_box(w, &a, c, q, 1, PBD_SM_RIGID);
        } else {
            float cb[3] = {0, (float)half, 0};
            smr_add_box(w, &b, cb, q0, 1, PBD_SM_RIGID);
            smr_quat(1, 0, 1, 0.4, q);
            float c[3] = {0.04f, (float)(2 * half + 1.0 + 1.5 * half), 0.02f};
            smr_add_box(w, &a, c, q, 1, PBD_SM_RIGID);
            pbd_range all = {0, pbd_world_particle_count(w)};
            CHECK_OK(pbd_particles_set_particle_contact(w, all, 1)); /* body on body: particle contacts */
            pr.count = 2;
        }
        smr_add_probe(w, &pr);
        double speed, drift;
        smr_run(w, 210, 60, &speed, &drift);
        /* before the fix (shape matching before the contacts): 26%, 18%,
           17% of the radius; pairs 42%, 50%, 35% */
        CHECK_MSG(pr.fit <= 0.005 && pr.pair <= 0.005, "scene %d: distortion %.3g%% of the radius, pairs %.3g%%", scene,
                  100 * pr.fit, 100 * pr.pair);
        CHECK_MSG(speed < 1e-4 && drift < 1e-4, "scene %d at rest: speed %.3g m/s, drift %.3g m over 1 s", scene, speed,
                  drift);
        /* resting on the particles' radius, not sunk into the ground */
        CHECK_MSG(smr_min_y(w) > 0.5 * SMR_S - 1e-3, "scene %d: lowest particle at %.4f", scene, smr_min_y(w));
        pbd_world_destroy(w);
    }
}
TEST(sm_rigid_drop_on_plane_stays_rigid) { smr_drop(0); }
TEST(sm_rigid_drop_on_box_edge_stays_rigid) { smr_drop(1); }
TEST(sm_rigid_drop_on_body_stays_rigid) { smr_drop(2); }

/* Static friction 0.5 holds a box on a 20 degree slope (tan 20 = 0.36).
   Matched by mass alone after the contacts, a contact moved the body by
   its particle's share of the mass and the box crept down at 7.7 mm/s. */
TEST(sm_rigid_static_friction_holds_on_slope) {
    const double th = 20 * 3.14159265358979 / 180, half = 0.5 * SMR_N * SMR_S;
    pbd_world *w = pbdt_world(-9.81f);
    float origin[3] = {0, 0, 0}, n[3] = {(float)-sin(th), (float)cos(th), 0};
    CHECK_OK(pbd_add_collider_plane(w, origin, n, 0.5f, NULL));
    smr_body a;
    double q[4];
    smr_quat(0, 0, 1, th, q);
    float c[3] = {(float)(-sin(th) * half * 1.02), (float)(cos(th) * half * 1.02), 0};
    smr_add_box(w, &a, c, q, 1, PBD_SM_RIGID);
    smr_probe pr = {{&a, NULL}, 1, 0, 0};
    smr_add_probe(w, &pr);
    double speed, drift;
    smr_run(w, 120, 60, &speed, &drift);
    CHECK_MSG(speed < 1e-4 && drift < 1e-4, "on the slope: speed %.3g m/s, drift %.3g m over 1 s", speed, drift);
    CHECK_MSG(pr.fit <= 0.005, "distortion %.3g%%", 100 * pr.fit);
    pbd_world_destroy(w);
}

/* Restitution and sliding friction act on the body as a whole: a box
   dropped flat from 1 m with restitution 0.5 bounces to e^2 h = 0.25 m
   (0.008 m when each particle's velocity was changed alone and shape
   matching then averaged it); a box thrown along the ground at 3 m/s with
   friction 0.5 stops after v^2 / (2 mu g) = 0.917 m. */
TEST(sm_rigid_restitution_and_sliding_friction) {
    const double half = 0.5 * SMR_N * SMR_S;
    double q0[4] = {0, 0, 0, 1};
    for (int scene = 0; scene < 2; ++scene) {
        pbd_world *w = pbdt_world(-9.81f);
        pbd_collider_desc cd = pbd_collider_desc_default();
        cd.static_friction = cd.dynamic_friction = 0.5f;
        cd.restitution = scene == 0 ? 0.5f : 0.0f;
        CHECK_OK(pbd_add_collider(w, &cd, NULL));
        smr_body a;
        float c[3] = {0, (float)(half + (scene == 0 ? 1.0 : 0.0005)), 0};
        smr_add_box(w, &a, c, q0, 1, PBD_SM_RIGID);
        if (scene == 1) {
            float v[3 * SMR_COUNT];
            for (int i = 0; i < SMR_COUNT; ++i) {
                v[3 * i] = 3;
                v[3 * i + 1] = v[3 * i + 2] = 0;
            }
            CHECK_OK(pbd_particles_set_velocities(w, a.r, v));
        }
        double apex = 0, prev_vy = -1, cx = 0;
        int falls = 0;
        for (int s = 0; s < 60; ++s) {
            CHECK_OK(pbd_world_step(w, 1.0f / 60));
            const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
            double cy = 0, vy = 0;
            cx = 0;
            for (int i = a.r.first; i < a.r.first + SMR_COUNT; ++i) {
                cy += x[4 * i + 1] / SMR_COUNT;
                cx += x[4 * i] / SMR_COUNT;
                vy += v[4 * i + 1] / SMR_COUNT;
            }
            if (prev_vy > 0 && vy <= 0 && !falls++) apex = cy - half; /* the first apex after the bounce */
            prev_vy = vy;
        }
        if (scene == 0) CHECK_MSG(fabs(apex - 0.25) < 0.025, "bounce apex %.4f m, e^2 h = 0.25 m", apex);
        else CHECK_MSG(fabs(cx - 9 / (2 * 0.5 * 9.81)) < 0.05, "slid %.4f m, v^2 / (2 mu g) = 0.917 m", cx);
        pbd_world_destroy(w);
    }
}

/* Momentum: a free body spinning and flying keeps linear and angular
   momentum (no gravity, 1 s); two bodies, the second 5x heavier, collide
   through particle contacts and keep their total linear momentum (a
   contact weighted like a collider's, as if the other body were
   immovable, would not). */
TEST(sm_rigid_momentum) {
    double q0[4] = {0, 0, 0, 1}, q[4];
    for (int scene = 0; scene < 2; ++scene) {
        pbd_world *w = pbdt_world(0);
        smr_body a, b;
        smr_quat(1, 0, 1, 0.4, q);
        float ca[3] = {0, 0, 0}, cb[3] = {0.3f, 0.03f, 0.02f};
        smr_add_box(w, &a, ca, q, 1, PBD_SM_RIGID);
        if (scene == 1) smr_add_box(w, &b, cb, q0, 5, PBD_SM_RIGID);
        int n = pbd_world_particle_count(w);
        float v[3 * SMR_COUNT];
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < SMR_COUNT; ++i) { /* 2 m/s along x, and 3 rad/s about (0.2, 1, 0.3) for the free body */
            double om[3] = {scene == 0 ? 0.6 : 0, scene == 0 ? 3.0 : 0, scene == 0 ? 0.9 : 0};
            const float *p = x + 4 * (size_t)(a.r.first + i);
            v[3 * i] = (float)(2 + om[1] * p[2] - om[2] * p[1]);
            v[3 * i + 1] = (float)(om[2] * p[0] - om[0] * p[2]);
            v[3 * i + 2] = (float)(om[0] * p[1] - om[1] * p[0]);
        }
        CHECK_OK(pbd_particles_set_velocities(w, a.r, v));
        if (scene == 1) {
            pbd_range all = {0, n};
            CHECK_OK(pbd_particles_set_particle_contact(w, all, 1));
        }
        double P0[3], L0[3], P1[3], L1[3];
        for (int s = 0; s < 2; ++s) {
            double *P = s ? P1 : P0, *L = s ? L1 : L0;
            if (s)
                for (int f = 0; f < 60; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
            const float *X = pbd_world_positions(w), *V = pbd_world_velocities(w);
            for (int a2 = 0; a2 < 3; ++a2) P[a2] = L[a2] = 0;
            for (int i = 0; i < n; ++i) {
                double m = 1.0 / X[4 * i + 3];
                const float *p = X + 4 * i, *u = V + 4 * i;
                for (int a2 = 0; a2 < 3; ++a2) P[a2] += m * u[a2];
                L[0] += m * ((double)p[1] * u[2] - (double)p[2] * u[1]);
                L[1] += m * ((double)p[2] * u[0] - (double)p[0] * u[2]);
                L[2] += m * ((double)p[0] * u[1] - (double)p[1] * u[0]);
            }
        }
        /* scale: |P| = 128 kg m/s, |L| about 2 kg m^2/s for the free body */
        for (int a2 = 0; a2 < 3; ++a2) {
            CHECK_MSG(fabs(P1[a2] - P0[a2]) < 0.05, "scene %d: P[%d] %.5f -> %.5f", scene, a2, P0[a2], P1[a2]);
            /* the velocity update v = (p - x) / h of a turning body loses
               about (omega h)^2 of its spin per substep: 4.0% in 1 s at
               3.2 rad/s, as before the contacts' rigid correction; the
               direction is kept */
            if (scene == 0)
                CHECK_MSG(fabs(L1[a2] - 0.96 * L0[a2]) < 0.005 * fabs(L0[a2]) + 1e-4, "L[%d] %.6f -> %.6f", a2, L0[a2],
                          L1[a2]);
        }
        if (scene == 1) { /* they did collide: the heavy body moves */
            const float *V = pbd_world_velocities(w);
            CHECK_MSG(V[4 * b.r.first] > 0.1f, "the heavy body's speed %.3f", V[4 * b.r.first]);
        }
        pbd_world_destroy(w);
    }
}

/* Linear and quadratic bodies (region-based lattices, stiffness 0.3 per
   substep) keep their stiffness under contact: resting on the ground they
   sag (the contacts do not make them rigid, as they do a rigid body: its
   top stays within 1e-5 m), and by the same amount with 2 and 4 iterations
   (stiffness per substep, survey 3.3: the contacts do not stiffen them
   with every extra iteration). */
TEST(sm_rigid_deformable_stiffness_under_contact) {
    enum { NX = 4 };
    int cells[3 * NX * NX * NX];
    CHECK_OK(pbd_sm_lattice_box(NX, NX, NX, cells));
    for (int mode = PBD_SM_RIGID; mode <= PBD_SM_QUADRATIC; ++mode) {
        double sag[2];
        for (int it = 0; it < (mode == PBD_SM_RIGID ? 1 : 2); ++it) {
            pbd_world *w = pbdt_world(-9.81f);
            CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 4, it ? 4 : 2));
            float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
            CHECK_OK(pbd_add_collider_plane(w, ground, up, 1.0f, NULL));
            pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
            ld.cells = cells;
            ld.cell_count = NX * NX * NX;
            ld.spacing = 0.05f;
            ld.origin[1] = 0.025f;                         /* the bottom layer touches the ground */
            ld.half_width = mode == PBD_SM_RIGID ? NX : 1; /* rigid: every region is the whole body */
            ld.body.mode = (pbd_sm_mode)mode;
            ld.body.stiffness = mode == PBD_SM_RIGID ? 1.0f : 0.3f;
            pbd_range r;
            CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, &r));
            CHECK_OK(pbd_world_set_point_damping(w, 8.0f));
            for (int f = 0; f < 40; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
            const float *x = pbd_world_positions(w);
            int top = r.first + (NX / 2) + NX * ((NX - 1) + NX * (NX / 2)); /* centre of the top face */
            sag[it] = 0.025 + (NX - 1) * 0.05 - x[4 * top + 1];
            if (getenv("SMR_PRINT")) printf("mode %d it %d sag %.5f\n", mode, it, sag[it]);
            pbd_world_destroy(w);
        }
        if (mode == PBD_SM_RIGID) {
            CHECK_MSG(fabs(sag[0]) < 1e-5, "rigid: sag %.3g m", sag[0]);
        } else {
            /* 3.8 mm (LINEAR) and 4.3 mm (QUADRATIC): keeping its regions'
               volume (pbd_sm.h "volume"), it bulges instead of being
               compressed (7.5 and 9.5 mm with volume = 0) */
            CHECK_MSG(sag[0] > 0.003, "mode %d: sag %.4f m on the ground: not soft", mode, sag[0]);
            CHECK_MSG(fabs(sag[0] - sag[1]) < 0.1 * sag[0], "mode %d: sag %.4f m with 2 iterations, %.4f m with 4",
                      mode, sag[0], sag[1]);
        }
    }
}

/* The rigid correction runs on one thread in a fixed order, and the
   contact multipliers it reads are the same bits with or without SIMD:
   a box dropped on another gives the same bits for SIMD on / off and 1 /
   2 threads. */
static void smr_stack_run(int simd, int threads, float *out, int *n) {
    const double half = 0.5 * SMR_N * SMR_S;
    double q[4], q0[4] = {0, 0, 0, 1};
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_OK(pbd_world_set_simd(w, simd));
    CHECK_OK(pbd_world_set_threads(w, threads));
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    smr_body a, b;
    float cb[3] = {0, (float)half, 0}, ca[3] = {0.04f, (float)(2 * half + 0.1), 0.02f};
    smr_add_box(w, &b, cb, q0, 1, PBD_SM_RIGID);
    smr_quat(1, 0, 1, 0.4, q);
    smr_add_box(w, &a, ca, q, 1, PBD_SM_RIGID);
    pbd_range all = {0, pbd_world_particle_count(w)};
    CHECK_OK(pbd_particles_set_particle_contact(w, all, 1));
    for (int f = 0; f < 20; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    *n = pbd_world_particle_count(w);
    memcpy(out, pbd_world_positions(w), sizeof(float) * 4 * (size_t)*n);
    memcpy(out + 4 * *n, pbd_world_velocities(w), sizeof(float) * 4 * (size_t)*n);
    pbd_world_destroy(w);
}

TEST(sm_rigid_simd_and_threads_bit_identical) {
    /* the world's SIMD switch reaches pbd.h's kernels and pbd_sm.h's */
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    static float ref[8 * 2 * SMR_COUNT], got[8 * 2 * SMR_COUNT];
    int n = 0, m = 0;
    smr_stack_run(0, 1, ref, &n);
    for (int k = 1; k < 4; ++k) {
        smr_stack_run(k & 1, k & 2 ? 2 : 1, got, &m);
        CHECK(m == n);
        CHECK_MSG(memcmp(ref, got, sizeof(float) * 8 * (size_t)n) == 0, "simd %d, %d threads differ", k & 1,
                  k & 2 ? 2 : 1);
    }
}

/* The defaults of pbd_sm_lattice_desc make a rigid body: RIGID mode,
   stiffness 1 and half_width 0, which in RIGID mode is one cluster of the
   whole lattice (survey 4.1; Mueller et al. 2005 section 4.1). Before,
   the default half-width was 1: regions of 3 x 3 x 3 cells that do not
   span the block, which the contacts and the pin deform (pairs changed by
   up to 7.9% dropped, 6.8% hung). A 5 x 4 x 3 lattice dropped 1 m flat
   onto the ground, and one hung from a pinned corner (it swings about it
   for 2 s), keep every pair distance after every substep within 1e-5 of
   its rest length (relative). The bound is float rounding with a margin
   of five: the positions lie about 1 m from the origin, where a float
   coordinate is rounded by up to 6e-8 m, so a pair 0.1 m apart (the
   closest) is off by about 2e-6 of its length after any rigid motion (the
   measured worst: 1.6e-6 dropped, 2.1e-6 hung); any elastic give under
   these loads is thousands of times larger. */
typedef struct smr_lattice_probe {
    pbd_range r;
    const int *cells;
    float spacing;
    double pair;
} smr_lattice_probe;

static void smr_lattice_probe_end(void *user, const pbd_solve_context *c) {
    smr_lattice_probe *pr = (smr_lattice_probe *)user;
    const float *p = c->x + 4 * (size_t)pr->r.first;
    for (int i = 0; i < pr->r.count; ++i)
        for (int j = i + 1; j < pr->r.count; ++j) {
            double d0 = 0, d1 = 0;
            for (int a = 0; a < 3; ++a) {
                double u = (double)pr->spacing * (pr->cells[3 * i + a] - pr->cells[3 * j + a]);
                double v = (double)p[4 * i + a] - p[4 * j + a];
                d0 += u * u;
                d1 += v * v;
            }
            double rel = fabs(sqrt(d1) - sqrt(d0)) / sqrt(d0);
            if (rel > pr->pair) pr->pair = rel;
        }
}

static double smr_default_lattice(int hung) {
    enum { NX = 5, NY = 4, NZ = 3, N = NX * NY * NZ };
    int cells[3 * N];
    CHECK_OK(pbd_sm_lattice_box(NX, NY, NZ, cells));
    pbd_world *w = pbdt_world(-9.81f);
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default(); /* only the cells and where */
    ld.cells = cells;
    ld.cell_count = N;
    ld.origin[0] = 0.3f;
    ld.origin[1] = hung ? 1.0f : 1.05f;
    pbd_sm_body b = {0};
    smr_lattice_probe pr = {{0, 0}, cells, ld.spacing, 0};
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &pr.r));
    int regions = 0;
    CHECK_OK(pbd_sm_body_region_count(w, b, &regions));
    CHECK_MSG(regions == 1, "the default lattice has %d regions, not one cluster", regions);
    if (hung) CHECK_OK(pbd_particle_pin(w, pr.r.first)); /* cell (0, 0, 0) */
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "pair probe";
    pd.user = &pr;
    pd.particle_end = pbd_world_particle_count(w);
    pd.end_substep = smr_lattice_probe_end;
    CHECK_OK(pbd_add_plugin(w, &pd, NULL));
    for (int f = 0; f < 120; ++f) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    if (hung) {
        const float *x = pbd_world_positions(w);
        CHECK_MSG(x[4 * (pr.r.first + N - 1) + 1] < 0.9f, "hung: the far corner at y %.3f did not swing down",
                  x[4 * (pr.r.first + N - 1) + 1]);
    } else {
        CHECK_MSG(fabs(smr_min_y(w) - 0.05) < 1e-3, "dropped: lowest particle at %.4f, not on the ground",
                  smr_min_y(w));
    }
    if (getenv("SMR_PRINT")) printf("default lattice, %s: pairs %.3g\n", hung ? "hung" : "dropped", pr.pair);
    pbd_world_destroy(w);
    return pr.pair;
}

/* A plank (pbd_sm_lattice_desc's defaults: one rigid cluster; 10 x 2
   particles 0.1 m apart) laid on a box 0.5 m wide, its centre of mass
   `beyond` m past the box's edge, 5 s at 60 Hz. Returns its centre's
   height at the end (it starts at 0.56 m) and the tilt of its long side
   in degrees. */
static void smr_plank(float beyond, float friction, double *height, double *tilt) {
    pbd_world *w = pbdt_world(-9.81f);
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0}, bc[3] = {0, 0.25f, 0}, he[3] = {0.25f, 0.25f, 0.25f};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, friction, NULL));
    CHECK_OK(pbd_add_collider_box(w, bc, he, NULL, friction, NULL));
    int cells[3 * 20];
    CHECK_OK(pbd_sm_lattice_box(10, 1, 2, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 20;
    ld.spacing = 0.1f;
    ld.origin[0] = 0.25f + beyond - 0.45f; /* the particles' x from origin to origin + 0.9 */
    ld.origin[1] = 0.56f;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, &r));
    for (int s = 0; s < 300; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    const float *x = pbd_world_positions(w), *a = x + 4 * r.first, *b = x + 4 * (r.first + 9);
    *height = 0;
    for (int i = 0; i < r.count; ++i) *height += x[4 * (r.first + i) + 1] / r.count;
    *tilt = atan2(b[1] - a[1], b[0] - a[0]) * 180 / 3.14159265358979;
    pbd_world_destroy(w);
}

/* A rigid body tips over an edge as its centre of mass decides: a held
   particle weighs PBD_SM__HELD_WEIGHT times its mass in the match, and
   before the match let go of the particles it lifts off their collider,
   the plank's row far from the edge held it level at any overhang, even
   frictionless (pbd_sm__rigid_match). With its centre of mass 0.1 m
   inside the edge it stays on the box, level to 0.02 degrees. */
TEST(sm_rigid_body_tips_over_an_edge) {
    const float beyond[] = {0.3f, 0.2f, 0.1f, -0.1f, -0.3f};
    for (int k = 0; k < 5; ++k)
        for (int f = 0; f < 2; ++f) {
            double height, tilt;
            smr_plank(beyond[k], f ? 0.5f : 0.0f, &height, &tilt);
            if (beyond[k] > 0) /* it tips, and slides off when frictionless */
                CHECK_MSG(height < 0.45, "%.1f m past the edge, friction %d: at %.3f m, tilted %.1f deg",
                          (double)beyond[k], f, height, tilt);
            else /* its far end rests 0.1 mm above the box: the held rows' weights */
                CHECK_MSG(fabs(height - 0.55) < 1e-3 && fabs(tilt) < 0.05,
                          "%.1f m inside the edge, friction %d: at %.3f m, tilted %.2f deg", -(double)beyond[k], f,
                          height, tilt);
        }
}

TEST(sm_rigid_default_lattice_is_rigid) {
    for (int hung = 0; hung < 2; ++hung) {
        double pair = smr_default_lattice(hung);
        CHECK_MSG(pair < 1e-5, "default lattice %s: a pair distance changed by %.3g%%",
                  hung ? "hung from a corner" : "dropped", 100 * pair);
    }
}

void suite_sm_rigid(void) {
    RUN(sm_rigid_drop_on_plane_stays_rigid);
    RUN(sm_rigid_drop_on_box_edge_stays_rigid);
    RUN(sm_rigid_drop_on_body_stays_rigid);
    RUN(sm_rigid_static_friction_holds_on_slope);
    RUN(sm_rigid_restitution_and_sliding_friction);
    RUN(sm_rigid_momentum);
    RUN(sm_rigid_deformable_stiffness_under_contact);
    RUN(sm_rigid_simd_and_threads_bit_identical);
    RUN(sm_rigid_default_lattice_is_rigid);
    RUN(sm_rigid_body_tips_over_an_edge);
}
