/* soak.c - an example scene run for a long time with a user's hands on it.

   Built once per example (make soak): the example's own source is
   included with its main renamed and its pbd_world_step calls routed
   through soak_world_step, so the scene is exactly the example's, set up
   by its own code, with its own per-frame work (tearing, hair transforms,
   upsampling, ...; a tearing scene also tears between the extra steps).
   Each of the example's steps becomes
   ceil(SOAK_STEPS / its step count) steps, so that the whole run is
   SOAK_STEPS steps (default 10 000); between them:
     - mouse-like grabs: every 30-120 steps a random dynamic particle
       slower than 5 m/s is made kinematic and dragged along a random
       direction at 0.5-2 m/s with a wobble, for 30-90 steps, then
       released (it keeps its velocity);
     - the hand stays on the planes' side (a mouse stops at the floor);
     - collider moves: every non-plane collider slides along a slow
       Lissajous path around its start pose (10 cm sideways, 0-5 cm up),
       except those the example poses itself (see soak_set_pose).
   After every step: the step returned PBD_OK, every position and velocity
   is finite, the energy E = sum over dynamic particles of
   m (|v|^2 / 2 - g . (x - x_ref)), x_ref 1 m below the lowest particle at
   the start (so that E > 0), stays below SOAK_ENERGY (default 10) times
   its starting value, and every particle stays below 50 m/s (in a scene
   driven by an acceleration field, wind, the energy grows by design: only
   the speed bound applies there). The speed bound is not applied in the
   SOAK_RELEASE_STEPS (10) steps after a release: a particle the hand
   dragged metres away from a stiff shape-matched body is pulled back by
   a fixed fraction of the gap per substep, gap * stiffness / h (2 m from
   a jelly of stiffness 0.3 at 1/120 s: 70 m/s), as the model says; the
   energy bound still holds there, and the summary reports the fastest
   particle of those windows apart. Built with ASan and UBSan, any memory error stops
   the run. The upsample example steps no world itself (its simulations
   run inside pbd_up_training_generate): its training simulation is run for
   SOAK_STEPS steps (more recorded frames, of which the example then sees
   the last ones) and its recorded frames must stay finite and within
   100 m. The soak sees the scene through the public API only (it wraps
   the example's pbd_world_create and collider calls to learn its gravity
   and the colliders' start poses), so every example links against one
   set of implementation objects.

   Exit status 0 when all of that held; prints one line:
     soak <example>: <steps> steps, <grabs> grabs, max energy ratio <r>,
     max speed <v> m/s (<v> m/s just after releases), ok */
#define _POSIX_C_SOURCE 200809L
#include "pbd.h"
#include "pbd_sm.h"
#include "pbd_upsample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SOAK_ENERGY
#define SOAK_ENERGY 10.0
#endif
/* A hand grabs particles slower than this (m/s): the grab stops the
   particle dead, and a mouse does not catch a piece of flag that a storm
   blows along the ground at 30 m/s (stopped by one point, the piece
   whipped round it at 60-77 m/s). */
#ifndef SOAK_GRAB_SPEED
#define SOAK_GRAB_SPEED 5.0f
#endif
#ifndef SOAK_SPEED
#define SOAK_SPEED 50.0f
#endif
#ifndef SOAK_RELEASE_STEPS
#define SOAK_RELEASE_STEPS 10
#endif

static long soak_steps = 10000;    /* --steps */
static unsigned soak_rng = 12345u; /* --seed */
static int soak_failed = 0;
static long soak_done = 0; /* steps taken */
static int soak_grabs = 0;
static double soak_max_ratio = 0;
static double soak_max_speed = 0;   /* m/s, over every particle and step outside release windows */
static double soak_max_release = 0; /* m/s, in the SOAK_RELEASE_STEPS after releases */
static const char *soak_name = SOAK_NAME;

/* What the example builds, seen through the calls below (the soak uses
   the public API only, so it links against one implementation object):
   the gravity of its world and the start pose of every collider. */
enum { SOAK_MAX_COLLIDERS = 64 };
static float soak_gravity[3] = {0, -9.81f, 0};
static int soak_ncol = 0;
static pbd_collider soak_col_id[SOAK_MAX_COLLIDERS];
static float soak_col_home[SOAK_MAX_COLLIDERS][3];

static void soak_record(pbd_result r, pbd_collider id, const float *p) {
    if (r != PBD_OK || soak_ncol == SOAK_MAX_COLLIDERS) return;
    soak_col_id[soak_ncol] = id;
    memcpy(soak_col_home[soak_ncol++], p, sizeof(float) * 3);
}
static inline pbd_result soak_world_create(const pbd_world_desc *d, pbd_world **out) {
    if (d) memcpy(soak_gravity, d->gravity, sizeof soak_gravity);
    return pbd_world_create(d, out);
}
static inline pbd_result soak_set_gravity(pbd_world *w, const float *g) {
    pbd_result r = pbd_world_set_gravity(w, g);
    if (r == PBD_OK) memcpy(soak_gravity, g, sizeof soak_gravity);
    return r;
}
/* Planes are not moved: they are the floor and the walls. The hand stays
   on their side (soak_hands): a hand that drags a vertex under a fixed
   floor asks the impossible of hard edges against a hard floor (the
   showcase's cloth, a vertex dragged 1.3 m under the ground: particles
   jittering at 66-103 m/s between the two); a mouse stops at the floor. */
enum { SOAK_MAX_PLANES = 16 };
static int soak_nplanes = 0;
static float soak_plane[SOAK_MAX_PLANES][6]; /* point, unit normal */
static inline pbd_result soak_add_plane(pbd_world *w, const float *point, const float *normal, float friction,
                                        pbd_collider *out) {
    pbd_result r = pbd_add_collider_plane(w, point, normal, friction, out);
    float len = normal ? sqrtf(normal[0] * normal[0] + normal[1] * normal[1] + normal[2] * normal[2]) : 0;
    if (r == PBD_OK && len > 0 && soak_nplanes < SOAK_MAX_PLANES) {
        for (int k = 0; k < 3; ++k) {
            soak_plane[soak_nplanes][k] = point[k];
            soak_plane[soak_nplanes][3 + k] = normal[k] / len;
        }
        ++soak_nplanes;
    }
    return r;
}
static inline pbd_result soak_add_sphere(pbd_world *w, const float *c, float radius, float friction,
                                         pbd_collider *out) {
    pbd_collider id = {0};
    pbd_result r = pbd_add_collider_sphere(w, c, radius, friction, &id);
    soak_record(r, id, c);
    if (out && r == PBD_OK) *out = id;
    return r;
}
static inline pbd_result soak_add_capsule(pbd_world *w, const float *a, const float *b, float radius, float friction,
                                          pbd_collider *out) {
    pbd_collider id = {0};
    pbd_result r = pbd_add_collider_capsule(w, a, b, radius, friction, &id);
    float m[3] = {0.5f * (a[0] + b[0]), 0.5f * (a[1] + b[1]), 0.5f * (a[2] + b[2])};
    soak_record(r, id, m);
    if (out && r == PBD_OK) *out = id;
    return r;
}
static inline pbd_result soak_add_box(pbd_world *w, const float *c, const float *he, const float *q, float friction,
                                      pbd_collider *out) {
    pbd_collider id = {0};
    pbd_result r = pbd_add_collider_box(w, c, he, q, friction, &id);
    soak_record(r, id, c);
    if (out && r == PBD_OK) *out = id;
    return r;
}
static inline pbd_result soak_add_collider(pbd_world *w, const pbd_collider_desc *d, pbd_collider *out) {
    pbd_collider id = {0};
    pbd_result r = pbd_add_collider(w, d, &id);
    if (d && d->shape != PBD_COLLIDER_PLANE) soak_record(r, id, d->position);
    if (out && r == PBD_OK) *out = id;
    return r;
}
static inline pbd_result soak_add_mesh(pbd_world *w, const pbd_mesh_collider_desc *d, pbd_collider *out) {
    pbd_collider id = {0};
    pbd_result r = pbd_add_collider_mesh(w, d, &id);
    if (d) soak_record(r, id, d->position);
    if (out && r == PBD_OK) *out = id;
    return r;
}

/* A collider the example poses itself (the hair's head, the plant's ball)
   is the example's to move: the soak leaves it where the example puts it.
   The head carries the hair's roots (kinematic particles on its surface):
   the soak's offset would bury them up to 10 cm inside the head, where no
   strand can both keep its length and stay outside the collider. */
static int soak_col_animated[SOAK_MAX_COLLIDERS];
static inline pbd_result soak_set_pose(pbd_world *w, pbd_collider id, const float *p, const float *q) {
    for (int c = 0; c < soak_ncol; ++c)
        if (soak_col_id[c].id == id.id) soak_col_animated[c] = 1;
    return pbd_collider_set_pose(w, id, p, q);
}

/* A scene driven by an acceleration field (wind) gains energy by design:
   there the bound is on speed instead (SOAK_SPEED m/s for every particle). */
static int soak_driven = 0;
static inline pbd_result soak_set_field(pbd_world *w, pbd_acceleration_fn fn, void *user) {
    if (fn) soak_driven = 1;
    return pbd_world_set_acceleration_field(w, fn, user);
}

/* A tearing scene tears between every two steps, as the example does
   between its own: the soak's extra steps tear too (soak_world_step), and
   the example's pbd_world_tear reports the splits of all of them. Left to
   tear once per example step (56 soak steps), a hand drags a strip of
   flag 2 m from the pole before a split can let go, and the strip
   snaps back at 354 m/s when the hand releases it. */
static int soak_tears = 0, soak_pending_splits = 0;
static inline pbd_result soak_enable_tearing(pbd_world *w, const pbd_tearing_desc *d, pbd_tearing *out) {
    pbd_result r = pbd_add_tearing(w, d, out);
    if (r == PBD_OK) soak_tears = 1;
    return r;
}
static inline pbd_result soak_world_tear(pbd_world *w, int *splits) {
    pbd_result r = pbd_world_tear(w, splits);
    if (splits && r == PBD_OK) *splits += soak_pending_splits;
    soak_pending_splits = 0;
    return r;
}

static inline pbd_result soak_world_step(pbd_world *w, float dt);
static inline pbd_result soak_training_generate(const pbd_up_training_desc *desc, pbd_up_training *out);

/* the implementations come from the fuzz harnesses' objects (tests/fuzz/impl_*.c) */
#define PBD_IMPLEMENTATION_INCLUDED
#define PBD_SM_IMPLEMENTATION_INCLUDED
#define PBD_UPSAMPLE_IMPLEMENTATION_INCLUDED
#define pbd_world_create soak_world_create
#define pbd_world_set_gravity soak_set_gravity
#define pbd_world_set_acceleration_field soak_set_field
#define pbd_add_collider_plane soak_add_plane
#define pbd_add_collider_sphere soak_add_sphere
#define pbd_add_collider_capsule soak_add_capsule
#define pbd_add_collider_box soak_add_box
#define pbd_add_collider soak_add_collider
#define pbd_add_collider_mesh soak_add_mesh
#define pbd_collider_set_pose soak_set_pose
#define pbd_world_step soak_world_step
#define pbd_add_tearing soak_enable_tearing
#define pbd_world_tear soak_world_tear
#define pbd_up_training_generate soak_training_generate
#define main soak_example_main
#include SOAK_EXAMPLE
#undef main
#undef pbd_world_create
#undef pbd_world_set_gravity
#undef pbd_world_set_acceleration_field
#undef pbd_add_collider_plane
#undef pbd_add_collider_sphere
#undef pbd_add_collider_capsule
#undef pbd_add_collider_box
#undef pbd_add_collider
#undef pbd_add_collider_mesh
#undef pbd_collider_set_pose
#undef pbd_world_step
#undef pbd_add_tearing
#undef pbd_world_tear
#undef pbd_up_training_generate

#ifndef SOAK_CALLS
#define SOAK_CALLS STEPS /* the example's own step count */
#endif

static float soak_uniform(float lo, float hi) {
    soak_rng = soak_rng * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(soak_rng >> 8) * (1.0f / 16777216.0f);
}

static void soak_fail(const char *fmt, long step, double value) {
    if (soak_failed++ < 5) {
        fprintf(stderr, "soak %s: step %ld: ", soak_name, step);
        fprintf(stderr, fmt, value);
        fprintf(stderr, "\n");
    }
}

/* ---- the state of the hands on one world ---- */
typedef struct soak_state {
    pbd_world *w;
    double e0; /* starting energy */
    float yref;
    int grabbed;      /* particle held, -1 none */
    int released;     /* the particle last let go, -1 none */
    long released_at; /* and the step it was let go */
    int phase_left;   /* steps until the next grab / release */
    float from[3], vel[3];
    int held;
} soak_state;
static soak_state soak_s = {NULL, 0, 0, -1, -1, 0, 60, {0, 0, 0}, {0, 0, 0}, 0};

static double soak_energy(const pbd_world *w, float yref) {
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    double e = 0;
    for (int i = 0; i < n; ++i) {
        float im = x[4 * i + 3];
        if (!(im > 0)) continue;
        double m = 1.0 / im, g = 0;
        for (int k = 0; k < 3; ++k) {
            float d = x[4 * i + k] - (k == 1 ? yref : 0.0f);
            g -= (double)soak_gravity[k] * d;
        }
        e += m * (0.5 * ((double)v[4 * i] * v[4 * i] + (double)v[4 * i + 1] * v[4 * i + 1] +
                         (double)v[4 * i + 2] * v[4 * i + 2]) +
                  g);
    }
    return e;
}

static void soak_begin(pbd_world *w) {
    soak_s.w = w;
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w);
    float lo = 0;
    for (int i = 0; i < n; ++i)
        if (i == 0 || x[4 * i + 1] < lo) lo = x[4 * i + 1];
    soak_s.yref = lo - 1.0f;
    /* the reference is 1 m below everything: E0 >= m g for the dynamic mass */
    soak_s.e0 = soak_energy(w, soak_s.yref);
}

/* Grabs and releases, and the next kinematic target of the held particle. */
static void soak_hands(pbd_world *w, float dt) {
    int n = pbd_world_particle_count(w);
    if (soak_s.grabbed >= n) soak_s.grabbed = -1; /* cannot happen: particles are only added */
    if (--soak_s.phase_left <= 0) {
        if (soak_s.grabbed >= 0) {
            pbd_particle_set_kinematic(w, soak_s.grabbed, 0);
            soak_s.released = soak_s.grabbed;
            soak_s.released_at = soak_done;
            soak_s.grabbed = -1;
            soak_s.phase_left = 30 + (int)soak_uniform(0, 90);
        } else {
            const float *x = pbd_world_positions(w);
            for (int tries = 0; tries < 32 && soak_s.grabbed < 0 && n > 0; ++tries) {
                int i = (int)soak_uniform(0, (float)n);
                if (i >= n || !(x[4 * i + 3] > 0)) continue;
                const float *vi = pbd_world_velocities(w) + 4 * i;
                if (vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2] > SOAK_GRAB_SPEED * SOAK_GRAB_SPEED) continue;
                if (pbd_particle_set_kinematic(w, i, 1) != PBD_OK) continue;
                soak_s.grabbed = i;
                memcpy(soak_s.from, x + 4 * i, sizeof soak_s.from);
                float d[3] = {soak_uniform(-1, 1), soak_uniform(-0.3f, 1), soak_uniform(-1, 1)};
                float len = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) + 1e-6f, s = soak_uniform(0.5f, 2.0f) / len;
                for (int k = 0; k < 3; ++k) soak_s.vel[k] = s * d[k];
                soak_s.held = 0;
                ++soak_grabs;
            }
            soak_s.phase_left = 30 + (int)soak_uniform(0, 60);
        }
    }
    if (soak_s.grabbed >= 0) {
        float t = (float)(++soak_s.held) * dt, target[3];
        for (int k = 0; k < 3; ++k) target[k] = soak_s.from[k] + soak_s.vel[k] * t + 0.05f * sinf(6.0f * t + (float)k);
        for (int c = 0; c < soak_nplanes; ++c) { /* on the planes' side, as far as it was grabbed (5 cm at most) */
            const float *pl = soak_plane[c];
            const float *f = soak_s.from;
            float gap = (f[0] - pl[0]) * pl[3] + (f[1] - pl[1]) * pl[4] + (f[2] - pl[2]) * pl[5];
            gap = gap < 0 ? 0 : gap > 0.05f ? 0.05f : gap;
            float d = (target[0] - pl[0]) * pl[3] + (target[1] - pl[1]) * pl[4] + (target[2] - pl[2]) * pl[5] - gap;
            if (d < 0)
                for (int k = 0; k < 3; ++k) target[k] -= d * pl[3 + k];
        }
        pbd_particle_set_kinematic_target(w, soak_s.grabbed, target);
    }
}

static void soak_colliders(pbd_world *w, float t) {
    for (int c = 0; c < soak_ncol; ++c) {
        if (soak_col_animated[c]) continue;
        const float *h = soak_col_home[c];
        float p[3] = {h[0] + 0.1f * sinf(0.7f * t + (float)c), h[1] + 0.025f * (1.0f - cosf(1.1f * t)),
                      h[2] + 0.1f * sinf(0.5f * t)};
        pbd_collider_set_pose(w, soak_col_id[c], p, NULL);
    }
}

static void soak_check(pbd_world *w, pbd_result r) {
    ++soak_done;
    if (r != PBD_OK) soak_fail("pbd_world_step returned %g", soak_done, (double)r);
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    for (int i = 0; i < 4 * n; ++i)
        if (!isfinite(x[i]) || !isfinite(v[i])) {
            soak_fail("non-finite state (%g)", soak_done, (double)x[i]);
            break;
        }
    int releasing = soak_s.released >= 0 && soak_done - soak_s.released_at <= SOAK_RELEASE_STEPS;
    for (int i = 0; i < n; ++i) {
        float v2 = v[4 * i] * v[4 * i] + v[4 * i + 1] * v[4 * i + 1] + v[4 * i + 2] * v[4 * i + 2];
        double *max = releasing ? &soak_max_release : &soak_max_speed;
        if (v2 > *max * *max) *max = sqrt((double)v2);
        if (!releasing && !(v2 <= SOAK_SPEED * SOAK_SPEED)) {
            /* what the hand did last, to tell a release from the scene's own motion */
            fprintf(stderr, "soak %s: step %ld: particle %d at %.1f m/s; held %d, last released %d at step %ld\n",
                    soak_name, soak_done, i, sqrt((double)v2), soak_s.grabbed, soak_s.released, soak_s.released_at);
            soak_fail("a particle at %g m/s", soak_done, sqrt((double)v2));
            break;
        }
    }
    if (soak_s.e0 > 0) {
        double ratio = soak_energy(w, soak_s.yref) / soak_s.e0;
        if (ratio > soak_max_ratio) soak_max_ratio = ratio;
        if (!soak_driven && !(ratio <= SOAK_ENERGY)) soak_fail("energy %.3g x the start", soak_done, ratio);
    }
}

static inline pbd_result soak_world_step(pbd_world *w, float dt) {
    if (!soak_s.w) soak_begin(w);
    if (w != soak_s.w || soak_done >= soak_steps) return pbd_world_step(w, dt); /* another world, or done */
    long per_call = (soak_steps + SOAK_CALLS - 1) / SOAK_CALLS;
    pbd_result r = PBD_OK;
    for (long k = 0; k < per_call && soak_done < soak_steps; ++k) {
        soak_hands(w, dt);
        soak_colliders(w, (float)soak_done * dt);
        r = pbd_world_step(w, dt);
        soak_check(w, r);
        if (r != PBD_OK) break;
        int splits = 0; /* the example tears after the last one itself */
        if (soak_tears && k + 1 < per_call && soak_done < soak_steps) {
            r = pbd_world_tear(w, &splits);
            if (r != PBD_OK) {
                soak_fail("pbd_world_tear returned %g", soak_done, (double)r);
                break;
            }
            soak_pending_splits += splits;
        }
    }
    return r;
}

/* The upsample example: its training simulation, soak_steps steps long;
   the example gets the last frames it asked for. */
static inline pbd_result soak_training_generate(const pbd_up_training_desc *desc, pbd_up_training *out) {
    static int calls = 0;
    if (calls++ || !desc || !out) return pbd_up_training_generate(desc, out);
    pbd_up_training_desc d = *desc;
    long per_frame = d.steps_per_frame > 0 ? d.steps_per_frame : 1;
    d.frames = (int)((soak_steps + per_frame - 1) / per_frame);
    if (d.frames < desc->frames) d.frames = desc->frames;
    pbd_result r = pbd_up_training_generate(&d, out);
    soak_done = (long)d.frames * per_frame;
    if (r != PBD_OK) {
        soak_fail("pbd_up_training_generate returned %g", soak_done, (double)r);
        return r;
    }
    size_t nc = 3 * (size_t)out->coarse_count, nd = 3 * (size_t)out->detail_count, f = (size_t)out->frame_count;
    for (size_t i = 0; i < nc * f; ++i)
        if (!(fabsf(out->coarse[i]) < 100)) {
            soak_fail("coarse frame value %g", (long)(i / nc), out->coarse[i]);
            break;
        }
    for (size_t i = 0; i < nd * f; ++i)
        if (!(fabsf(out->detail[i]) < 100)) {
            soak_fail("detail frame value %g", (long)(i / nd), out->detail[i]);
            break;
        }
    size_t keep = (size_t)desc->frames;
    memmove(out->coarse, out->coarse + nc * (f - keep), sizeof(float) * nc * keep);
    memmove(out->detail, out->detail + nd * (f - keep), sizeof(float) * nd * keep);
    out->frame_count = desc->frames;
    return PBD_OK;
}

int main(int argc, char **argv) {
    const char *dir = "out/soak";
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "--steps") && a + 1 < argc) soak_steps = atol(argv[++a]);
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc) soak_rng = (unsigned)atol(argv[++a]);
        else dir = argv[a];
    }
    char *args[2] = {argv[0], (char *)dir};
    int status = soak_example_main(2, args);
    if (status != 0)
        fprintf(stderr, "soak %s: the example itself exited with %d (its own checks after the soak)\n", soak_name,
                status);
    if (soak_done < soak_steps) soak_fail("only %g steps were taken", soak_done, (double)soak_done);
    printf("soak %s: %ld steps, %d grabs, max energy ratio %.2f%s, max speed %.1f m/s (%.1f m/s just after releases), "
           "%s\n",
           soak_name, soak_done, soak_grabs, soak_max_ratio, soak_driven ? " (wind: speed bound only)" : "",
           soak_max_speed, soak_max_release, soak_failed ? "FAILED" : "ok");
    return soak_failed ? 1 : 0;
}
