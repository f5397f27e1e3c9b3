/* tests/test_contact_bounds.c - pbd.h section "contacts": the cheap tests
   that skip a collider for a particle before the swept contact test
   (pbd__plane_far, pbd__ball_far, private) may only skip what
   pbd__collide would not find. Random segments against random spheres,
   capsules, boxes and planes, each moving and turning over the substep:
   whenever a bound says "far", pbd__collide finds no contact. Particles at
   rest that a fast collider sweeps past test the ball's bound where it is
   tight (the margin of a moving particle is its own motion, which covers
   the bound's slack), and a sphere that turns fast beside a particle at
   rest tests its rotation term; the counts show that the test meets every
   kind. To reach
   the private functions this file compiles its own static copy of the
   implementation (tests/private.h). */
#include "private.h"

static float cb_uniform(unsigned *st, float lo, float hi) { return lo + (hi - lo) * (float)pbdt_rand(st); }

static void cb_random_rotation(unsigned *st, float *q) {
    float n = 0;
    for (int k = 0; k < 4; ++k) {
        q[k] = cb_uniform(st, -1, 1);
        n += q[k] * q[k];
    }
    n = sqrtf(n);
    for (int k = 0; k < 4; ++k) q[k] /= n;
}

/* A sphere collider of a random radius in [lo, hi). */
static pbd__collider cb_sphere(unsigned *st, float lo, float hi) {
    pbd__collider c;
    memset(&c, 0, sizeof c);
    c.shape = PBD_COLLIDER_SPHERE;
    c.radius = cb_uniform(st, lo, hi);
    return c;
}

/* Pose b: pose a moved by up to `move` and turned by up to `turn` radians. */
static void cb_poses(unsigned *st, float move, float turn, pbd__pose *a, pbd__pose *b) {
    float q[4], axis[3], s = 0;
    cb_random_rotation(st, q);
    for (int k = 0; k < 3; ++k) {
        a->pos[k] = cb_uniform(st, -1, 1);
        b->pos[k] = a->pos[k] + cb_uniform(st, -move, move);
    }
    for (int k = 0; k < 3; ++k) {
        axis[k] = cb_uniform(st, -1, 1);
        s += axis[k] * axis[k];
    }
    float th = cb_uniform(st, 0, turn), f = sinf(0.5f * th) / sqrtf(s),
          d[4] = {axis[0] * f, axis[1] * f, axis[2] * f, cosf(0.5f * th)};
    /* b = d * q (Hamilton), then the frames' y axes */
    float r[4] = {
        d[3] * q[0] + d[0] * q[3] + d[1] * q[2] - d[2] * q[1], d[3] * q[1] - d[0] * q[2] + d[1] * q[3] + d[2] * q[0],
        d[3] * q[2] + d[0] * q[1] - d[1] * q[0] + d[2] * q[3], d[3] * q[3] - d[0] * q[0] - d[1] * q[1] - d[2] * q[2]};
    memcpy(a->rot, q, sizeof q);
    memcpy(b->rot, r, sizeof r);
    pbd__st(a->up, pbd__qrot(a->rot, pbd__v(0, 1, 0)));
    pbd__st(b->up, pbd__qrot(b->rot, pbd__v(0, 1, 0)));
}

TEST(contact_bounds_skip_only_what_collide_misses) {
    unsigned st = 2024u;
    pbd_world *w = NULL;
    pbd_world_desc d = pbd_world_desc_default();
    CHECK_OK(pbd_world_create(&d, &w));
    int far[4] = {0}, hits[4] = {0}, wrong[4] = {0}, tried = 0;
    for (int round = 0; round < 200000; ++round) {
        pbd__collider c;
        memset(&c, 0, sizeof c);
        c.shape = 1 + round % 4; /* sphere, capsule, box, plane (PBD_COLLIDER_PLANE is 0) */
        if (c.shape == 4) c.shape = PBD_COLLIDER_PLANE;
        c.radius = cb_uniform(&st, 0.02f, 0.3f);
        c.half_height = cb_uniform(&st, 0, 0.3f);
        for (int k = 0; k < 3; ++k) c.half[k] = cb_uniform(&st, 0.01f, 0.3f);
        pbd__pose a, b;
        int sweep = round % 3 == 1; /* a fast collider sweeping past a particle at rest */
        cb_poses(&st, sweep ? 1.5f : (round % 3 == 0 ? 0.0f : 0.2f), round % 5 == 0 ? 0.0f : 0.8f, &a, &b);
        /* a segment from somewhere near the collider, sometimes long (a
           fast particle crossing it) */
        pbd__v3 x, p;
        float R = pbd__collider_ball(&c);
        if (sweep) { /* near the middle of the collider's path */
            pbd__v3 mid = pbd__mul(pbd__add(pbd__ld(a.pos), pbd__ld(b.pos)), 0.5f);
            float off = cb_uniform(&st, 0, 1.6f * R + 0.1f);
            x = pbd__add(mid,
                         pbd__mul(pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)), off));
            p = pbd__add(x, pbd__v(cb_uniform(&st, -1e-3f, 1e-3f), 0, 0));
        } else if (round % 2) { /* a chord whose ends lie outside the ball and whose middle may not */
            pbd__v3 u = pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)), e;
            e = pbd__cross(u, pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)));
            u = pbd__mul(u, 1.0f / pbd__len(u));
            e = pbd__mul(e, 1.0f / pbd__len(e));
            pbd__v3 mid = pbd__add(pbd__mul(pbd__add(pbd__ld(a.pos), pbd__ld(b.pos)), 0.5f),
                                   pbd__mul(e, cb_uniform(&st, 0, 1.6f * R + 0.1f)));
            float half = cb_uniform(&st, 0, 2.0f * R + 0.2f);
            x = pbd__sub(mid, pbd__mul(u, half));
            p = pbd__add(mid, pbd__mul(u, half));
        } else {
            float span = round % 7 == 0 ? 1.5f : 0.15f;
            x = pbd__add(pbd__ld(a.pos),
                         pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)));
            p = pbd__add(
                x, pbd__v(cb_uniform(&st, -span, span), cb_uniform(&st, -span, span), cb_uniform(&st, -span, span)));
        }
        float r = cb_uniform(&st, 0.001f, 0.05f), reach = r + (r + pbd__len(pbd__sub(p, x))),
              tol = 1e-5f * (r > 1e-3f ? r : 1e-3f);
        int is_far = c.shape == PBD_COLLIDER_PLANE ? pbd__plane_far(&a, &b, x, p, reach + tol)
                                                   : pbd__ball_far(&a, &b, R, x, p, reach + tol);
        pbd__v3 q, n;
        int hit = pbd__collide(w, &c, &a, &b, x, p, r, reach, tol, &q, &n);
        int kind = c.shape == PBD_COLLIDER_PLANE ? 3 : c.shape - 1;
        far[kind] += is_far;
        hits[kind] += hit;
        wrong[kind] += is_far && hit;
        tried++;
    }
    /* a particle at rest beside a sphere that turns fast about its centre:
       in the sphere's frame the particle moves along a chord that dips
       into the ball though both ends lie outside, which the bound's
       rotation term must allow for */
    int turned = 0, turned_wrong = 0;
    for (int round = 0; round < 20000; ++round) {
        pbd__collider c = cb_sphere(&st, 0.05f, 0.3f);
        pbd__pose a, b;
        cb_poses(&st, 0.0f, 0.0f, &a, &b);
        float th = cb_uniform(&st, 0.5f, 1.5f); /* about z, from the identity */
        float q0[4] = {0, 0, 0, 1}, q1[4] = {0, 0, sinf(0.5f * th), cosf(0.5f * th)};
        memcpy(a.rot, q0, sizeof q0);
        memcpy(b.rot, q1, sizeof q1);
        float r = 0.01f, reach = r + r, tol = 1e-5f * r, ang = cb_uniform(&st, 0, 6.2831853f);
        float A = (c.radius + reach) * cb_uniform(&st, 1.0f, 1.25f);
        pbd__v3 x = pbd__add(pbd__ld(a.pos), pbd__v(A * cosf(ang), A * sinf(ang), 0)), p = x, qq, n;
        int is_far = pbd__ball_far(&a, &b, c.radius, x, p, reach + tol);
        int hit = pbd__collide(w, &c, &a, &b, x, p, r, reach, tol, &qq, &n);
        turned += hit && A > c.radius + reach + tol;
        turned_wrong += is_far && hit;
    }
    CHECK_MSG(turned_wrong == 0, "turning sphere: %d particles skipped that touch it", turned_wrong);
    CHECK_MSG(turned > 100, "turning sphere: only %d touches from outside the ball (the test is vacuous)", turned);
    const char *names[4] = {"sphere", "capsule", "box", "plane"};
    for (int k = 0; k < 4; ++k) {
        CHECK_MSG(wrong[k] == 0, "%s: %d segments skipped that touch it", names[k], wrong[k]);
        CHECK_MSG(far[k] > 100 && hits[k] > 100 && tried / 4 - hits[k] > 2 * far[k] / 3,
                  "%s: %d skipped, %d touching of %d (the test is vacuous)", names[k], far[k], hits[k], tried / 4);
    }
    pbd_world_destroy(w);
}

#if PBD__W > 1
/* The SIMD twins (pbd__vplane_far, pbd__vball_far: W particles at a time
   in the contact pass) decide exactly as the scalar bounds, lane by lane,
   for random moving and turning poses and segments whose ends lie about
   the bound's threshold (where a term left out or rounded differently
   would flip a decision). */
TEST(contact_bounds_simd_decide_as_scalar) {
    unsigned st = 77u;
    pbd_world *w = NULL;
    pbd_world_desc d = pbd_world_desc_default();
    CHECK_OK(pbd_world_create(&d, &w));
    float o[3] = {0, 0, 0};
    CHECK_OK(pbd_add_collider_sphere(w, o, 1.0f, 0.3f, NULL)); /* its poses are set below */
    int far[2] = {0, 0}, near[2] = {0, 0}, differ[2] = {0, 0};
    for (int round = 0; round < 20000; ++round) {
        pbd__pose *a = &w->pose_from[0], *b = &w->pose_to[0];
        cb_poses(&st, round % 3 ? 0.2f : 0.0f, round % 4 ? 0.8f : 0.0f, a, b);
        float R = cb_uniform(&st, 0.02f, 0.5f), lim[PBD__W];
        pbd__p4 xs[PBD__W], ps[PBD__W];
        int ids[PBD__W];
        for (int l = 0; l < PBD__W; ++l) {
            lim[l] = cb_uniform(&st, 0.0f, 0.1f);
            pbd__v3 u = pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1));
            pbd__v3 x = pbd__add(pbd__ld(a->pos),
                                 pbd__mul(u, (R + lim[l]) * cb_uniform(&st, 0.8f, 1.6f) / (pbd__len(u) + 1e-6f)));
            pbd__v3 p =
                pbd__add(x, pbd__mul(pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)),
                                     round % 2 ? 0.01f : 0.2f));
            xs[l].x = x.x;
            xs[l].y = x.y;
            xs[l].z = x.z;
            xs[l].w = 1;
            ps[l].x = p.x;
            ps[l].y = p.y;
            ps[l].z = p.z;
            ps[l].w = 1;
            ids[l] = l;
        }
        pbd__vp X = pbd__vgather(xs, ids), P = pbd__vgather(ps, ids);
        unsigned bits[2] = {pbd__vplane_far(w, 0, &X, &P, pbd__vload(lim)),
                            pbd__vball_far(w, 0, R, &X, &P, pbd__vload(lim))};
        for (int l = 0; l < PBD__W; ++l) {
            pbd__v3 x = pbd__p3(xs[l]), p = pbd__p3(ps[l]);
            int want[2] = {pbd__plane_far(a, b, x, p, lim[l]), pbd__ball_far(a, b, R, x, p, lim[l])};
            for (int k = 0; k < 2; ++k) {
                int got = (int)(bits[k] >> l & 1u);
                differ[k] += got != want[k];
                far[k] += want[k];
                near[k] += !want[k];
            }
        }
    }
    const char *names[2] = {"plane", "ball"};
    for (int k = 0; k < 2; ++k) {
        CHECK_MSG(differ[k] == 0, "%s: the SIMD bound differs from the scalar one for %d particles (%s)", names[k],
                  differ[k], pbd_simd_path());
        CHECK_MSG(far[k] > 1000 && near[k] > 1000, "%s: %d far, %d near (the test is vacuous)", names[k], far[k],
                  near[k]);
    }
    pbd_world_destroy(w);
}

/* pbd__vsphere_far (the SIMD contact pass's exact bound for spheres) may
   only skip what pbd__collide would not find: random moving and turning
   spheres and segments that pass the sphere at about the reach (grazing
   ones take the trace many steps), W at a time. */
TEST(contact_bounds_sphere_skip_only_what_collide_misses) {
    unsigned st = 99u;
    pbd_world *w = NULL;
    pbd_world_desc d = pbd_world_desc_default();
    CHECK_OK(pbd_world_create(&d, &w));
    int far = 0, hits = 0, wrong = 0, lanes = 0;
    for (int round = 0; round < 10000; ++round) {
        pbd__collider c = cb_sphere(&st, 0.02f, 0.3f);
        pbd__pose a, b;
        cb_poses(&st, round % 3 ? 0.1f : 0.0f, round % 4 ? 0.5f : 0.0f, &a, &b);
        pbd__p4 xs[PBD__W], ps[PBD__W];
        float r[PBD__W], reach[PBD__W], tol[PBD__W], lim[PBD__W];
        int ids[PBD__W];
        for (int l = 0; l < PBD__W; ++l) {
            r[l] = cb_uniform(&st, 0.001f, 0.03f);
            pbd__v3 u = pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)), e;
            e = pbd__cross(u, pbd__v(cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1), cb_uniform(&st, -1, 1)));
            u = pbd__mul(u, 1.0f / (pbd__len(u) + 1e-6f));
            e = pbd__mul(e, 1.0f / (pbd__len(e) + 1e-6f));
            float half = round % 2 ? cb_uniform(&st, 0, 0.02f) : cb_uniform(&st, 0, 0.5f); /* slow or sweeping past */
            pbd__v3 mid = pbd__add(pbd__ld(a.pos), pbd__mul(u, (c.radius + 3 * r[l]) * cb_uniform(&st, 0.9f, 1.3f)));
            pbd__v3 x = pbd__sub(mid, pbd__mul(e, half)), p = pbd__add(mid, pbd__mul(e, half));
            reach[l] = r[l] + (r[l] + pbd__len(pbd__sub(p, x)));
            tol[l] = 1e-5f * (r[l] > 1e-3f ? r[l] : 1e-3f);
            lim[l] = reach[l] + tol[l];
            xs[l].x = x.x;
            xs[l].y = x.y;
            xs[l].z = x.z;
            xs[l].w = 1;
            ps[l].x = p.x;
            ps[l].y = p.y;
            ps[l].z = p.z;
            ps[l].w = 1;
            ids[l] = l;
        }
        pbd__vp X = pbd__vgather(xs, ids), P = pbd__vgather(ps, ids);
        unsigned bits = pbd__vsphere_far(pbd__vto_local(&a, pbd__vvpos(X)), pbd__vto_local(&b, pbd__vvpos(P)),
                                         pbd__vset1(c.radius), pbd__vload(lim));
        for (int l = 0; l < PBD__W; ++l) {
            pbd__v3 q, n;
            int hit = pbd__collide(w, &c, &a, &b, pbd__p3(xs[l]), pbd__p3(ps[l]), r[l], reach[l], tol[l], &q, &n);
            int is_far = (int)(bits >> l & 1u);
            far += is_far;
            hits += hit;
            wrong += is_far && hit;
            lanes++;
        }
    }
    CHECK_MSG(wrong == 0, "sphere: %d segments skipped that touch it", wrong);
    /* some misses lie within the guard of the threshold, where the bound keeps them */
    CHECK_MSG(far > lanes / 10 && hits > lanes / 10 && lanes - hits - far > 0,
              "sphere: %d skipped, %d touching of %d (the test is vacuous)", far, hits, lanes);
    pbd_world_destroy(w);
}
#endif

#if PBD__W > 1
/* pbd__vsdf (the SIMD contact pass's distance to a plane, sphere,
   capsule or box) gives pbd__sdf's bits, value and normal, lane by lane: random
   points in and around each shape, and the points where pbd__sdf makes a
   choice: a sphere's centre, a capsule's axis, a box's faces, edges and
   corners, ties between faces (equal half extents), signed zeros. */
static int cb_same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }
TEST(contact_bounds_simd_distance_as_scalar) {
    unsigned st = 5u;
    int differ = 0, checked = 0, inside = 0;
    for (int round = 0; round < 3000; ++round) {
        pbd__collider c;
        memset(&c, 0, sizeof c);
        c.shape = round % 4; /* plane (0), sphere, capsule, box */
        c.radius = cb_uniform(&st, 0.05f, 0.3f);
        c.half_height = round % 6 < 3 ? cb_uniform(&st, 0.0f, 0.3f) : 0.0f;
        float e = cb_uniform(&st, 0.05f, 0.3f); /* equal extents half the time: ties between faces */
        for (int k = 0; k < 3; ++k) c.half[k] = round % 2 ? e : cb_uniform(&st, 0.05f, 0.3f);
        float ys[3][PBD__W];
        for (int l = 0; l < PBD__W; ++l) {
            int kind = (round + l) % 5;
            for (int k = 0; k < 3; ++k) {
                float h = c.shape == PBD_COLLIDER_BOX ? c.half[k] : c.radius + (k == 1 ? c.half_height : 0.0f);
                float v = cb_uniform(&st, -1.5f * h, 1.5f * h);
                if (kind == 1) v = (pbdt_rand(&st) < 0.5 ? -1.0f : 1.0f) * h; /* on a face, edge or corner */
                if (kind == 2) /* inside, two or three faces at equal depth */
                    v = (pbdt_rand(&st) < 0.5 ? -1.0f : 1.0f) * h * (k == l % 4 ? 0.2f : 0.5f);
                if (kind == 3) v = k == 1 ? v : (pbdt_rand(&st) < 0.5 ? -0.0f : 0.0f); /* an axis, signed zeros */
                ys[k][l] = v;
            }
            if (kind == 4 && l % 2) ys[0][l] = ys[1][l] = ys[2][l] = 0.0f; /* the centre */
        }
        pbd__vv y, n;
        y.x = pbd__vload(ys[0]);
        y.y = pbd__vload(ys[1]);
        y.z = pbd__vload(ys[2]);
        float d[PBD__W], nv[3][PBD__W];
        pbd__vstore(d, pbd__vsdf(&c, y, &n));
        pbd__vstore(nv[0], n.x);
        pbd__vstore(nv[1], n.y);
        pbd__vstore(nv[2], n.z);
        for (int l = 0; l < PBD__W; ++l) {
            pbd__v3 nn;
            float want = pbd__sdf(NULL, &c, pbd__v(ys[0][l], ys[1][l], ys[2][l]), &nn);
            differ += !cb_same(d[l], want) || !cb_same(nv[0][l], nn.x) || !cb_same(nv[1][l], nn.y) ||
                      !cb_same(nv[2][l], nn.z);
            inside += want < 0;
            checked++;
        }
    }
    CHECK_MSG(differ == 0, "%d of %d distances or normals differ from pbd__sdf (%s)", differ, checked, pbd_simd_path());
    CHECK_MSG(inside > checked / 5 && inside < checked - checked / 5, "%d of %d inside (the test is vacuous)", inside,
              checked);
}
#endif

#if PBD__W == 1 /* scalar build: the SIMD twins these tests compare do not exist */
TEST(contact_bounds_simd_decide_as_scalar) { SKIP("scalar build: no SIMD twin to compare"); }
TEST(contact_bounds_sphere_skip_only_what_collide_misses) { SKIP("scalar build: no SIMD twin to compare"); }
TEST(contact_bounds_simd_distance_as_scalar) { SKIP("scalar build: no SIMD twin to compare"); }
#endif

void suite_contact_bounds(void) {
    RUN(contact_bounds_skip_only_what_collide_misses);
    RUN(contact_bounds_simd_decide_as_scalar);
    RUN(contact_bounds_sphere_skip_only_what_collide_misses);
    RUN(contact_bounds_simd_distance_as_scalar);
}
