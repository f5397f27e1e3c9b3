/* tests/test_sm_volume.c - pbd_sm.h section "surface volume": volume
   conservation of closed surface meshes (survey 4.5.1, Diziol et al.
   2011). The divergence-theorem volume against the tetrahedra sum,
   opposing pairs by ray casting on a symmetric sphere, the survey's
   Figure 20 experiment (a sphere squeezed by a plate: < 1% volume loss
   with global conservation, far more without), weights (collision zero,
   global uniform), the divergence-free velocity correction, determinism
   across thread counts and bad input. */
#include "test.h"
#include "check_error.h"
#include "../pbd_sm.h"
#include <stdlib.h>

static int vol_world_finite(const pbd_world *w) {
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < 4 * pbd_world_particle_count(w); ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* The sphere of the squeeze test: an icosphere skin (cloth: compliant
   stretch so the skin can stretch as the volume is pushed sideways,
   isometric bending), resting on the ground. */
static pbd_world *sphere_world(pbd_mesh *m, pbd_object *obj, float radius, int subdiv) {
    pbd_world *w = pbdt_world(-9.81f);
    float c[3] = {0, radius + 0.011f, 0};
    *obj = pbdt_skin(w, subdiv, c, radius, m);
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    pbd_add_collider_plane(w, ground, up, 0.5f, NULL);
    return w;
}

/* eq. 12 on an icosphere equals the sum of the tetrahedra (origin, a, b, c),
   independent of where the origin is; with the mesh shifted it does not
   change. */
TEST(sm_volume_divergence_theorem) {
    pbd_mesh m;
    pbd_object obj;
    pbd_world *w = sphere_world(&m, &obj, 0.3f, 2);
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    pbd_sm_volume v = {0};
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    double ref = 0;
    const float *x = pbd_world_positions(w);
    for (int t = 0; t < m.triangle_count; ++t) {
        const float *a = x + 4 * m.triangles[3 * t], *b = x + 4 * m.triangles[3 * t + 1],
                    *c = x + 4 * m.triangles[3 * t + 2];
        double o[3] = {0.1, -0.2, 0.3}; /* an arbitrary apex */
        double ab[3], ac[3], ao[3];
        for (int k = 0; k < 3; ++k) {
            ab[k] = b[k] - a[k];
            ac[k] = c[k] - a[k];
            ao[k] = o[k] - a[k];
        }
        ref -= (ab[1] * ac[2] - ab[2] * ac[1]) * ao[0] + (ab[2] * ac[0] - ab[0] * ac[2]) * ao[1] +
               (ab[0] * ac[1] - ab[1] * ac[0]) * ao[2];
    }
    ref /= 6;
    double vol;
    CHECK_OK(pbd_sm_volume_measure(w, v, &vol));
    CHECK_NEAR(vol, ref, 1e-9);
    double rest = 0;
    CHECK_OK(pbd_sm_volume_get_rest(w, v, &rest));
    CHECK_NEAR(rest, ref, 1e-9);
    double sphere = 4.0 / 3.0 * 3.14159265358979 * 0.027;
    CHECK(vol < sphere && vol > 0.95 * sphere); /* an inscribed polyhedron */
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* Ray casting finds, for every vertex of an icosphere (symmetric under
   x -> -x about its centre), the antipodal vertex. */
TEST(sm_volume_opposing_pairs) {
    pbd_mesh m;
    pbd_object obj;
    pbd_world *w = sphere_world(&m, &obj, 0.3f, 2);
    const pbd_range op = pbdt_parts(w, obj).particles;
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    pbd_sm_volume v = {0};
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    const float *x = pbd_world_positions(w);
    float cy = 0.311f;
    int wrong = 0;
    for (int i = 0; i < m.vertex_count; ++i) {
        int k = -2;
        CHECK_OK(pbd_sm_volume_opposite(w, v, op.first + i, &k));
        if (k < 0) {
            wrong++;
            continue;
        }
        const float *a = x + 4 * (op.first + i), *b = x + 4 * k;
        double s = fabs(a[0] + b[0]) + fabs(a[1] + b[1] - 2 * cy) + fabs(a[2] + b[2]);
        if (s > 1e-4) wrong++;
    }
    CHECK_MSG(wrong == 0, "%d of %d vertices without their antipode", wrong, m.vertex_count);
    int k;
    CHECK_WORLD_ERROR(w, pbd_sm_volume_opposite(w, v, op.first + m.vertex_count, &k), PBD_ERROR_INDEX_OUT_OF_RANGE,
                      "is not on the mesh");
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

typedef struct squeeze_result {
    double max_loss; /* max over the run of (V_rest - V) / V_rest */
    double end_loss; /* that at the end */
    double min_height;
    int finite;
    int team; /* threads of the last substep (pbd_world_thread_team) */
} squeeze_result;

/* The survey's Figure 20: a sphere (radius 0.3) on the ground squeezed by a
   plate (a box collider) moving down to 60% of its height and back up a
   little. mode: 0 none, 1 global (alpha 1), 2 local (alpha 0); the volume
   constraint is removed (pbd_sm_remove_surface_volume) before step
   remove_at (-1: never). */
static squeeze_result squeeze_until(int mode, int threads, int steps, int remove_at, float *x_out) {
    squeeze_result res = {0, 0, 1, 1, 0};
    pbd_mesh m;
    pbd_object obj;
    pbd_world *w = sphere_world(&m, &obj, 0.3f, 2);
    const pbd_range op = pbdt_parts(w, obj).particles;
    pbd_world_set_threads(w, threads);
    pbd_sm_volume v = {0};
    if (mode) {
        pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
        vd.triangles = m.triangles;
        vd.triangle_count = m.triangle_count;
        vd.alpha = mode == 1 ? 1.0f : 0.0f;
        vd.contact_distance = 0.02f; /* the survey's zero weight at the plate and ground (default 0: 2.7% lost) */
        CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    }
    /* measure with an unconditional helper: the divergence theorem sum */
    double v0 = 0;
    const float *x = pbd_world_positions(w);
    for (int t = 0; t < m.triangle_count; ++t) {
        const float *a = x + 4 * m.triangles[3 * t], *b = x + 4 * m.triangles[3 * t + 1],
                    *c = x + 4 * m.triangles[3 * t + 2];
        v0 += (a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2]) +
               a[2] * (b[0] * c[1] - b[1] * c[0])) /
              6.0;
    }
    float half[3] = {1, 0.05f, 1}, top = 0.622f + 0.05f;
    float centre[3] = {0, top, 0};
    pbd_collider plate;
    pbd_add_collider_box(w, centre, half, NULL, 0.5f, &plate);
    for (int s = 0; s < steps; ++s) {
        if (s == remove_at && mode) {
            CHECK_OK(pbd_sm_remove_surface_volume(w, v));
            CHECK(pbd_world_plugin_count(w) == 0);
            double rest = 0;
            CHECK_WORLD_ERROR(w, pbd_sm_volume_get_rest(w, v, &rest), PBD_ERROR_INVALID_HANDLE,
                              "surface volume handle");
        }
        float y = s < 60 ? top - (0.5f * 0.622f) * (float)(s + 1) / 60.0f : top - 0.5f * 0.622f;
        centre[1] = y;
        pbd_collider_set_pose(w, plate, centre, NULL);
        pbd_world_step(w, 1.0f / 60.0f);
        x = pbd_world_positions(w);
        double vol = 0;
        for (int t = 0; t < m.triangle_count; ++t) {
            const float *a = x + 4 * m.triangles[3 * t], *b = x + 4 * m.triangles[3 * t + 1],
                        *c = x + 4 * m.triangles[3 * t + 2];
            vol += (a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2]) +
                    a[2] * (b[0] * c[1] - b[1] * c[0])) /
                   6.0;
        }
        double loss = (v0 - vol) / v0;
        if (loss > res.max_loss) res.max_loss = loss;
        res.end_loss = loss;
    }
    double hmax = -1;
    for (int i = 0; i < m.vertex_count; ++i) hmax = fmax(hmax, x[4 * (op.first + i) + 1]);
    res.min_height = hmax;
    res.finite = vol_world_finite(w);
    res.team = pbd_world_thread_team(w);
    if (x_out) memcpy(x_out, x, sizeof(float) * 4 * (size_t)m.vertex_count);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return res;
}
static squeeze_result squeeze(int mode, int threads, int steps, float *x_out) {
    return squeeze_until(mode, threads, steps, -1, x_out);
}

TEST(sm_volume_squeezed_sphere) {
    squeeze_result none = squeeze(0, 0, 90, NULL), global = squeeze(1, 0, 90, NULL), local = squeeze(2, 0, 90, NULL);
    CHECK(none.finite && global.finite && local.finite);
    CHECK_MSG(global.max_loss < 0.01, "global conservation lost %.2f%%", 100 * global.max_loss);
    CHECK_MSG(local.max_loss < 0.02, "local conservation lost %.2f%%", 100 * local.max_loss);
    CHECK_MSG(none.max_loss > 0.1, "without conservation only %.2f%% lost", 100 * none.max_loss);
    /* the plate really squeezed it: the top is at 75% of the height */
    CHECK(global.min_height < 0.33 && none.min_height < 0.33);
}

/* pbd_sm_remove_surface_volume takes the constraint out of the step: the
   sphere held its volume under the plate until then, and loses as much as
   one that never had it, once it is gone. */
TEST(sm_volume_remove_stops_it) {
    squeeze_result kept = squeeze_until(1, 0, 90, -1, NULL), removed = squeeze_until(1, 0, 90, 60, NULL),
                   none = squeeze(0, 0, 90, NULL);
    printf("    volume lost at the end: %.2f%% kept, %.2f%% removed at step 60, %.2f%% never added\n",
           100 * kept.end_loss, 100 * removed.end_loss, 100 * none.end_loss);
    CHECK(kept.finite && removed.finite);
    CHECK_MSG(kept.end_loss < 0.01, "kept: %.2f%% lost", 100 * kept.end_loss);
    CHECK_MSG(removed.end_loss > 0.1 && removed.end_loss > 0.5 * none.end_loss, "removed: only %.2f%% lost",
              100 * removed.end_loss);
}

/* 1 and 2 threads give the same bits, in a run that did something: the
   plate pressed the sphere (its top, 0.611 at rest, went down by more
   than a centimetre), the volume held, and the second run really ran on
   two threads. */
TEST(sm_volume_threads_bit_identical) {
    if (!PBDT_THREADS) SKIP("no OpenMP: 2 threads == 1 compares a path with itself");
    float *a = (float *)malloc(sizeof(float) * 4 * 162), *b = (float *)malloc(sizeof(float) * 4 * 162);
    squeeze_result one = squeeze(2, 1, 10, a), two = squeeze(2, 2, 10, b);
    CHECK(memcmp(a, b, sizeof(float) * 4 * 162) == 0);
    CHECK(one.finite && two.finite);
    CHECK_MSG(one.min_height < 0.6, "the plate did not press the sphere: its top is at %g", one.min_height);
    CHECK_MSG(one.max_loss < 0.02, "the squeezed sphere lost %.2f%% of its volume", 100 * one.max_loss);
    CHECK_MSG(one.team == 1 && two.team == 2, "teams of %d and %d threads, not 1 and 2", one.team, two.team);
    free(a);
    free(b);
}

/* A sphere half squeezed (plate at rest now): the weights of the last
   projection are 0 exactly for particles touching the ground or the plate
   and 1/n (global, alpha 1: smoothing keeps a uniform field) elsewhere;
   the velocity field after a step has dC/dt = sum grad_i C . v_i ~ 0,
   unlike the same run without the velocity correction. */
static double squeeze_state(int velocity_correction, int check_weights) {
    pbd_mesh m;
    pbd_object obj;
    pbd_world *w = sphere_world(&m, &obj, 0.3f, 2);
    const pbd_range op = pbdt_parts(w, obj).particles;
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    vd.velocity_correction = velocity_correction;
    vd.contact_distance = 0.02f; /* weight 0 near the plate and the ground */
    pbd_sm_volume v = {0};
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    float half[3] = {1, 0.05f, 1}, centre[3] = {0, 0.672f, 0};
    pbd_collider plate;
    CHECK_OK(pbd_add_collider_box(w, centre, half, NULL, 0.5f, &plate));
    for (int s = 0; s < 20; ++s) {
        centre[1] = 0.672f - 0.1f * (float)(s + 1) / 20.0f;
        CHECK_OK(pbd_collider_set_pose(w, plate, centre, NULL));
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    }
    const float *x = pbd_world_positions(w), *vel = pbd_world_velocities(w);
    if (check_weights) {
        float wts[162];
        int n = 0, zeros = 0, bad = 0;
        CHECK_OK(pbd_sm_volume_weights(w, v, wts, 162, &n));
        CHECK(n == m.vertex_count);
        for (int i = 0; i < n; ++i) {
            float d0, d1;
            pbd_collider_distance(w, pbd_world_collider(w, 0), x + 4 * (op.first + i), &d0);
            pbd_collider_distance(w, plate, x + 4 * (op.first + i), &d1);
            float d = d0 < d1 ? d0 : d1;
            if (wts[i] == 0) {
                zeros++;
                if (d > 0.03f) bad++;
            } else if (fabs(wts[i] - 1.0 / n) > 1e-7 || d < 0.015f) bad++;
        }
        CHECK_MSG(bad == 0, "%d weights neither 1/n nor 0 at a collider", bad);
        CHECK(zeros >= 2);
    }
    double dcdt = 0, scale = 0;
    double *g = (double *)calloc(3 * (size_t)m.vertex_count, sizeof(double));
    for (int t = 0; t < m.triangle_count; ++t) {
        const int *e = m.triangles + 3 * t;
        const float *a = x + 4 * e[0], *b = x + 4 * e[1], *c = x + 4 * e[2];
        double ab[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, ac[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
        double nA[3] = {ab[1] * ac[2] - ab[2] * ac[1], ab[2] * ac[0] - ab[0] * ac[2], ab[0] * ac[1] - ab[1] * ac[0]};
        for (int k = 0; k < 3; ++k)
            for (int j = 0; j < 3; ++j) g[3 * e[k] + j] += nA[j] / 6.0;
    }
    for (int i = 0; i < m.vertex_count; ++i) {
        const float *vi = vel + 4 * (op.first + i);
        dcdt += g[3 * i] * vi[0] + g[3 * i + 1] * vi[1] + g[3 * i + 2] * vi[2];
        scale += sqrt(g[3 * i] * g[3 * i] + g[3 * i + 1] * g[3 * i + 1] + g[3 * i + 2] * g[3 * i + 2]) *
                 sqrt(vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2]);
    }
    free(g);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return fabs(dcdt) / scale;
}

TEST(sm_volume_weights_and_divergence_free_velocity) {
    double with = squeeze_state(1, 1), without = squeeze_state(0, 0);
    CHECK_MSG(with < 1e-4, "relative dC/dt with the correction %g", with);
    CHECK_MSG(without > 10 * with, "relative dC/dt without %g (with %g)", without, with);
}

/* Local weights (alpha 0, beta 0: own displacement only), one substep of
   one iteration: an attachment (a constraint group, solved before the
   plugin) pulls vertex 0 of a weightless sphere inwards, so it is the only
   particle the solver moved: its raw weight is 1, all others 0. One
   Laplacian pass halves it and gives each of its 5 neighbours (valence 6)
   0.5 / 6. Either way the projection restores the volume. */
static void local_weights(int smoothing, int with_volume, float *wts, int *n, double *loss) {
    pbd_world *w = pbdt_world(0.0f);
    pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1);
    pbd_mesh m;
    float c[3] = {0, 0, 0};
    pbd_mesh_sphere(2, c, 0.3f, &m);
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    pbd_object obj;
    pbd_add_cloth(w, &cd, &obj);
    const pbd_range op = pbdt_parts(w, obj).particles;
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = m.triangles;
    vd.triangle_count = m.triangle_count;
    vd.alpha = 0;
    vd.beta = 0;
    vd.smoothing = smoothing;
    pbd_sm_volume v = {0};
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    if (!with_volume) CHECK_OK(pbd_sm_remove_surface_volume(w, v));
    int pulled = op.first; /* vertex 0 */
    const float *x = pbd_world_positions(w);
    float target[3] = {0.7f * x[0], 0.7f * x[1], 0.7f * x[2]};
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    ad.count = 1;
    ad.particles = &pulled;
    ad.target_points = target;
    CHECK_OK(pbd_add_attachments(w, &ad, NULL));
    /* the volume before, measured independently of the plugin */
    double v0 = 0, v1 = 0;
    for (int pass = 0; pass < 2; ++pass) {
        x = pbd_world_positions(w);
        double vol = 0;
        for (int t = 0; t < m.triangle_count; ++t) {
            const float *a = x + 4 * m.triangles[3 * t], *b = x + 4 * m.triangles[3 * t + 1],
                        *d = x + 4 * m.triangles[3 * t + 2];
            vol += (a[0] * (b[1] * d[2] - b[2] * d[1]) + a[1] * (b[2] * d[0] - b[0] * d[2]) +
                    a[2] * (b[0] * d[1] - b[1] * d[0])) /
                   6.0;
        }
        if (pass == 0) {
            v0 = vol;
            CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        } else v1 = vol;
    }
    *loss = (v0 - v1) / v0;
    if (with_volume) CHECK_OK(pbd_sm_volume_weights(w, v, wts, 162, n));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(sm_volume_local_weights) {
    float raw[162], smooth[162];
    int n = 0, n2 = 0;
    double loss_raw, loss_smooth, loss_none;
    local_weights(0, 1, raw, &n, &loss_raw);
    local_weights(1, 1, smooth, &n2, &loss_smooth);
    local_weights(0, 0, NULL, NULL, &loss_none);
    CHECK(n == 162 && n2 == 162);
    CHECK_NEAR(raw[0], 1.0, 1e-6);
    int others = 0, nb = 0;
    for (int i = 1; i < n; ++i) others += raw[i] > 1e-6f;
    CHECK_MSG(others == 0, "%d other particles with a raw weight", others);
    CHECK_NEAR(smooth[0], 0.5, 1e-6);
    for (int i = 1; i < n2; ++i) {
        if (smooth[i] == 0) continue;
        nb++;
        CHECK_NEAR(smooth[i], 0.5 / 6.0, 1e-6);
    }
    CHECK(nb == 5);
    CHECK_MSG(loss_none > 1e-3, "the dent alone lost only %g", loss_none);
    CHECK_MSG(fabs(loss_raw) < 0.02 * loss_none && fabs(loss_smooth) < 0.02 * loss_none,
              "volume loss %g / %g (without %g)", loss_raw, loss_smooth, loss_none);
}

/* Bad input returns its error and changes nothing (same snapshot bytes, no
   plugin). */
/* A closed cloth ball (radius 0.2 m, the cloth's and the volume's
   defaults) dropped on the ground comes to rest and keeps its volume, at
   30 and 60 Hz. With the old default contact_distance 0.02 its particles
   still moved at 6 m/s after 9 s at 60 Hz and gained energy without bound
   at 30 Hz (25 m/s): the weight-0 set near the ground changed as it
   rocked. */
static void ball_at_rest(int hz, double *speed, double *vol) {
    pbd_world *w = NULL;
    pbd_world_desc wd = pbd_world_desc_default();
    CHECK_OK(pbd_world_create(&wd, &w));
    if (!w) return;
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0}, c[3] = {0, 0.21f, 0};
    CHECK_OK(pbd_add_collider_plane(w, o, up, 0.5f, NULL));
    pbd_mesh m;
    CHECK_OK(pbd_mesh_sphere(3, c, 0.2f, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m); /* the cloth's defaults */
    pbd_object ball;
    CHECK_OK(pbd_add_cloth(w, &cd, &ball));
    pbd_range r = pbdt_parts(w, ball).particles;
    int *tris = (int *)malloc(sizeof(int) * 3 * (size_t)m.triangle_count);
    for (int i = 0; i < 3 * m.triangle_count; ++i) tris[i] = r.first + m.triangles[i];
    pbd_sm_volume_desc vd = pbd_sm_volume_desc_default();
    vd.triangles = tris;
    vd.triangle_count = m.triangle_count;
    pbd_sm_volume v = {0};
    CHECK_OK(pbd_sm_add_surface_volume(w, &vd, &v));
    double rest = 0, now = 0;
    CHECK_OK(pbd_sm_volume_get_rest(w, v, &rest));
    for (int f = 0; f < 7 * hz; ++f) CHECK_OK(pbd_world_step(w, 1.0f / (float)hz));
    const float *vel = pbd_world_velocities(w);
    *speed = 0;
    for (int i = r.first; i < r.first + r.count; ++i) {
        double s = sqrt((double)vel[4 * i] * vel[4 * i] + (double)vel[4 * i + 1] * vel[4 * i + 1] +
                        (double)vel[4 * i + 2] * vel[4 * i + 2]);
        *speed = s > *speed ? s : *speed;
    }
    CHECK_OK(pbd_sm_volume_measure(w, v, &now));
    *vol = now / rest;
    free(tris);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

TEST(sm_volume_ball_comes_to_rest_on_the_ground) {
    LONG_SCENE();
    for (int k = 0; k < 2; ++k) {
        int hz = k ? 60 : 30;
        double speed = 1e30, vol = 0;
        ball_at_rest(hz, &speed, &vol);
        printf("    %d Hz, after 7 s: fastest particle %.4f m/s, volume %.4f of its rest\n", hz, speed, vol);
        CHECK_MSG(speed < 0.02, "%d Hz: a particle at %g m/s after 7 s", hz, speed);
        CHECK_MSG(fabs(vol - 1) < 0.01, "%d Hz: volume %g of its rest", hz, vol);
    }
}

TEST(sm_volume_bad_input) {
    pbd_mesh m;
    pbd_object obj;
    pbd_world *w = sphere_world(&m, &obj, 0.3f, 1);
    const pbd_range op = pbdt_parts(w, obj).particles;
    size_t sz = pbd_world_snapshot_size(w);
    unsigned char *before = (unsigned char *)malloc(sz), *after = (unsigned char *)malloc(sz);
    CHECK_OK(pbd_world_save(w, before, sz));
    int nt = m.triangle_count;
    int *tri = (int *)malloc(sizeof(int) * 3 * (size_t)nt);
    memcpy(tri, m.triangles, sizeof(int) * 3 * (size_t)nt);
    pbd_sm_volume_desc good = pbd_sm_volume_desc_default(), d;
    good.triangles = tri;
    good.triangle_count = nt;
    pbd_sm_volume v = {0};
    CHECK_ERROR(pbd_sm_add_surface_volume(NULL, &good, &v), PBD_ERROR_NULL_POINTER, "w is NULL");
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, NULL, &v), PBD_ERROR_NULL_POINTER, "d is NULL");
    d = good;
    d.triangle_count = 0; /* empty */
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_INVALID_ARGUMENT,
                      "triangle_count 0 outside 1..");
    d = good;
    d.triangles = NULL;
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_NULL_POINTER,
                      "pbd_sm_volume_desc.triangles is NULL");
    d = good;
    d.alpha = 1.5f;
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_INVALID_ARGUMENT, "alpha 1.5 outside [0, 1]");
    d = good;
    d.beta = NAN;
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_NOT_FINITE, "beta nan");
    d = good;
    d.stiffness = 0;
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_INVALID_ARGUMENT,
                      "stiffness 0 outside (0, 1]");
    d = good;
    d.smoothing = -1;
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_INVALID_ARGUMENT,
                      "smoothing -1 outside 0..64");
    d = good;
    d.contact_distance = INFINITY;
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_NOT_FINITE,
                      "contact_distance inf is not finite");
    tri[4] = m.vertex_count + op.first; /* out of range */
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &good, &v), PBD_ERROR_INDEX_OUT_OF_RANGE,
                      "triangle 1 names particle 42, not a particle of the world (0..41)");
    tri[4] = tri[3]; /* repeated particle */
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &good, &v), PBD_ERROR_DEGENERATE,
                      "triangle 1 repeats particle 11");
    tri[4] = m.triangles[4];
    int t1 = tri[4];
    tri[4] = tri[5];
    tri[5] = t1; /* one flipped triangle */
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &good, &v), PBD_ERROR_NOT_CLOSED,
                      "edge (11, 16) is in two triangles in the same direction (the");
    tri[5] = tri[4];
    tri[4] = t1;
    d = good;
    d.triangle_count = nt - 1; /* a hole */
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &d, &v), PBD_ERROR_NOT_CLOSED,
                      "edge (19, 40) has no opposite edge (the");
    for (int t = 0; t < nt; ++t) {
        int s = tri[3 * t + 1];
        tri[3 * t + 1] = tri[3 * t + 2];
        tri[3 * t + 2] = s;
    }
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &good, &v), PBD_ERROR_DEGENERATE,
                      "the mesh encloses volume -"); /* inside out */
    for (int t = 0; t < nt; ++t) {
        int s = tri[3 * t + 1];
        tri[3 * t + 1] = tri[3 * t + 2];
        tri[3 * t + 2] = s;
    }
    CHECK(v.id == 0);
    CHECK(pbd_world_plugin_count(w) == 0);
    CHECK_OK(pbd_world_save(w, after, sz));
    CHECK(memcmp(before, after, sz) == 0);
    /* a flat (zero-area) triangle: collapse the mesh onto a plane */
    float *flat = (float *)malloc(sizeof(float) * 3 * (size_t)m.vertex_count);
    CHECK_OK(pbd_particles_get_positions(w, op, flat));
    for (int i = 0; i < m.vertex_count; ++i) flat[3 * i + 1] = 0.5f;
    CHECK_OK(pbd_particles_set_positions(w, op, flat));
    CHECK_WORLD_ERROR(w, pbd_sm_add_surface_volume(w, &good, &v), PBD_ERROR_DEGENERATE,
                      "triangle 25 (particles 11, 32, 34) has zero area");
    CHECK(pbd_world_plugin_count(w) == 0);
    CHECK_OK(pbd_world_restore(w, before, sz));
    CHECK_OK(pbd_sm_add_surface_volume(w, &good, &v));
    CHECK_WORLD_ERROR(w, pbd_sm_volume_set_rest(w, v, -1.0), PBD_ERROR_INVALID_ARGUMENT, "rest_volume -1");
    CHECK_WORLD_ERROR(w, pbd_sm_volume_set_rest(w, v, NAN), PBD_ERROR_NOT_FINITE, "rest_volume is not finite (nan)");
    CHECK_WORLD_ERROR(w, pbd_sm_volume_set_rest(w, v, 1e300), PBD_ERROR_INVALID_ARGUMENT,
                      "rest_volume 1e+300 m^3 is more than");
    CHECK_WORLD_ERROR(w, pbd_sm_volume_set_alpha(w, v, -0.1f), PBD_ERROR_INVALID_ARGUMENT, "alpha -0.1");
    double r0 = 0, now;
    CHECK_OK(pbd_sm_volume_get_rest(w, v, &r0));
    CHECK(r0 > 0);
    CHECK_OK(pbd_sm_volume_measure(w, v, &now));
    CHECK_NEAR(now, r0, 1e-12);
    CHECK_WORLD_ERROR(w, pbd_sm_volume_measure(w, v, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    int cnt;
    CHECK_WORLD_ERROR(w, pbd_sm_volume_weights(w, v, NULL, 4, &cnt), PBD_ERROR_NULL_POINTER, "weights is NULL");
    pbd_sm_volume none = {0};
    CHECK_WORLD_ERROR(w, pbd_sm_volume_measure(w, none, &now), PBD_ERROR_INVALID_HANDLE,
                      "the surface volume handle is 0");
    CHECK_ERROR(pbd_sm_volume_measure(NULL, v, &now), PBD_ERROR_NULL_POINTER, "w is NULL");
    /* its handle is that of its plugin: removing the plugin frees the volume too */
    pbd_plugin pl = {v.id};
    CHECK_OK(pbd_remove_plugin(w, pl));
    CHECK(pbd_world_plugin_count(w) == 0);
    CHECK_WORLD_ERROR(w, pbd_sm_volume_get_rest(w, v, &r0), PBD_ERROR_INVALID_HANDLE, "surface volume handle");
    /* out may be NULL (the world owns the volume) */
    CHECK_OK(pbd_sm_add_surface_volume(w, &good, NULL));
    CHECK(pbd_world_plugin_count(w) == 1);
    free(flat);
    free(tri);
    free(before);
    free(after);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

void suite_sm_volume(void) {
    RUN(sm_volume_divergence_theorem);
    RUN(sm_volume_opposing_pairs);
    RUN(sm_volume_squeezed_sphere);
    RUN(sm_volume_weights_and_divergence_free_velocity);
    RUN(sm_volume_local_weights);
    RUN(sm_volume_ball_comes_to_rest_on_the_ground);
    RUN(sm_volume_bad_input);
    RUN(sm_volume_remove_stops_it);
    RUN(sm_volume_threads_bit_identical);
}
