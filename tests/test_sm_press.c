/* tests/test_sm_press.c - pbd_sm.h section "shape matching", "Volume": the
   README's elastic jelly (8 x 8 x 8 lattice, spacing 5 cm, regions of
   half-width 2, LINEAR, beta 0.3, stiffness 1, no plasticity) resting on
   the ground and pressed to 70% of its height by a kinematic box
   collider. With the regions' volume term (the default) it keeps its
   volume and bulges sideways; without it (volume = 0, the behaviour
   before) it lost 30% and hardly bulged. Then the box is lifted: slowly,
   the jelly follows it at the box's speed; at once, the stored
   compression throws it (a bound, see pbd_sm.h "Volume"). A RIGID body
   is unchanged by the volume term, and a plastic jelly still keeps a
   dent. */
#include "test.h"
#include "../pbd_sm.h"

enum { SMP_N = 8 };
static const float SMP_S = 0.05f, SMP_DT = 1.0f / 60;

/* Volume of a tetrahedron (a, b, c, d), signed. */
static double smp_tet(const float *a, const float *b, const float *c, const float *d) {
    double u[3], v[3], w[3];
    for (int k = 0; k < 3; ++k) {
        u[k] = b[k] - a[k];
        v[k] = c[k] - a[k];
        w[k] = d[k] - a[k];
    }
    return (u[0] * (v[1] * w[2] - v[2] * w[1]) - u[1] * (v[0] * w[2] - v[2] * w[0]) +
            u[2] * (v[0] * w[1] - v[1] * w[0])) /
           6;
}
/* The volume between the particle centres: each of the (N-1)^3 cells of
   the lattice as six tetrahedra around its diagonal 0-7 (Kuhn). */
static double smp_volume(const pbd_world *w, pbd_range r) {
    static const int path[6][2] = {{1, 3}, {1, 5}, {2, 3}, {2, 6}, {4, 5}, {4, 6}};
    const float *x = pbd_world_positions(w);
    double V = 0;
    for (int k = 0; k + 1 < SMP_N; ++k)
        for (int j = 0; j + 1 < SMP_N; ++j)
            for (int i = 0; i + 1 < SMP_N; ++i) {
                const float *c[8];
                for (int s = 0; s < 8; ++s) {
                    int ci = i + (s & 1), cj = j + ((s >> 1) & 1), ck = k + ((s >> 2) & 1);
                    c[s] = x + 4 * (r.first + ci + SMP_N * (cj + SMP_N * ck));
                }
                for (int t = 0; t < 6; ++t) V += fabs(smp_tet(c[0], c[path[t][0]], c[path[t][1]], c[7]));
            }
    return V;
}

typedef struct smp_result {
    double volume;  /* pressed, of the volume at rest before the press */
    double width;   /* pressed, the x extent of the particle centres, of rest */
    double overlap; /* pressed, how far the highest particle reaches into the box */
    double speed;   /* the fastest particle in the 2 s after the lift */
    double after;   /* its height 2 s after the lift, of the height before the press */
} smp_result;

/* The jelly (mode; the volume term as by default, or off; plastic: creep
   5, yield 0.05 as the README's)
   settles for 1 s, is pressed to frac of its height in 1 s, held 1 s, and
   the box is lifted by 0.27 m over lift_frames frames (1: at once). */
static smp_result smp_press(pbd_sm_mode mode, int volume_off, int plastic, int lift_frames, float frac) {
    smp_result out = {0, 0, 0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
    int cells[3 * SMP_N * SMP_N * SMP_N];
    CHECK_OK(pbd_sm_lattice_box(SMP_N, SMP_N, SMP_N, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = SMP_N * SMP_N * SMP_N;
    ld.spacing = SMP_S;
    ld.half_width = 2;
    ld.origin[0] = ld.origin[2] = -0.5f * SMP_S * (SMP_N - 1);
    ld.origin[1] = 0.026f;
    ld.body.mode = mode;
    ld.body.beta = 0.3f;
    if (volume_off) ld.body.volume = 0;
    if (plastic) {
        ld.body.yield = 0.05f;
        ld.body.creep = 5.0f;
    }
    pbd_range r;
    CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, &r));
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    double V0 = smp_volume(w, r);
    for (int f = 0; f < 60; ++f) CHECK_OK(pbd_world_step(w, SMP_DT));
    float top = 0;
    for (int i = 0; i < r.count; ++i) top = fmaxf(top, x[4 * (r.first + i) + 1]);
    float H = top + 0.5f * SMP_S, target = frac * H, half = 0.1f;
    pbd_collider_desc cd = pbd_collider_desc_default();
    cd.shape = PBD_COLLIDER_BOX;
    cd.half_extents[0] = cd.half_extents[2] = 0.5f;
    cd.half_extents[1] = half;
    cd.position[1] = H + half + 0.001f;
    pbd_collider box;
    CHECK_OK(pbd_add_collider(w, &cd, &box));
    for (int f = 1; f <= 60; ++f) {
        float p[3] = {0, H + half + 0.001f - (H + 0.001f - target) * (float)f / 60, 0};
        CHECK_OK(pbd_collider_set_pose(w, box, p, NULL));
        CHECK_OK(pbd_world_step(w, SMP_DT));
    }
    for (int f = 0; f < 60; ++f) CHECK_OK(pbd_world_step(w, SMP_DT));
    float lo = 1e9f, hi = -1e9f, ymax = -1e9f;
    for (int i = 0; i < r.count; ++i) {
        const float *p = x + 4 * (r.first + i);
        lo = fminf(lo, p[0]);
        hi = fmaxf(hi, p[0]);
        ymax = fmaxf(ymax, p[1]);
    }
    out.volume = smp_volume(w, r) / V0;
    out.width = (hi - lo) / (SMP_S * (SMP_N - 1));
    out.overlap = ymax + 0.5 * SMP_S - target;
    for (int f = 1; f <= 120; ++f) {
        float lift = 0.27f * (f < lift_frames ? (float)f / (float)lift_frames : 1.0f);
        float p[3] = {0, target + half + lift, 0};
        CHECK_OK(pbd_collider_set_pose(w, box, p, NULL));
        CHECK_OK(pbd_world_step(w, SMP_DT));
        for (int i = 0; i < r.count; ++i) {
            const float *u = v + 4 * (r.first + i);
            out.speed = fmax(out.speed, sqrt((double)u[0] * u[0] + (double)u[1] * u[1] + (double)u[2] * u[2]));
        }
    }
    ymax = -1e9f;
    for (int i = 0; i < r.count; ++i) ymax = fmaxf(ymax, x[4 * (r.first + i) + 1]);
    out.after = (ymax + 0.5 * SMP_S) / H;
    if (getenv("SMP_PRINT"))
        printf(
            "mode %d volume off %d plastic %d lift %d: pressed volume %.4f width %.4f overlap %.4f m, speed %.3f m/s, "
            "height after %.4f\n",
            (int)mode, volume_off, plastic, lift_frames, out.volume, out.width, out.overlap, out.speed, out.after);
    pbd_world_destroy(w);
    return out;
}

/* Pressed to 70% of its height, the elastic jelly keeps its volume
   within 5% (2.7% lost; 29.7% without the volume term, which fails
   here) and bulges: 27% wider (4% without), and the box does not sink
   into it (its contacts hold the top layer; the volume term moves the
   others). Lifted over 30 frames (0.54 m/s), it springs back and follows
   the box, no faster than 0.75 m/s (0.54). QUADRATIC keeps its volume too
   (2.7% lost; 34.5% without). */
TEST(sm_press_jelly_keeps_its_volume) {
    LONG_SCENE();
    smp_result on = smp_press(PBD_SM_LINEAR, 0, 0, 30, 0.7f);
    CHECK_MSG(on.volume > 0.95 && on.volume < 1.02, "pressed to 70%%: volume %.4f of rest", on.volume);
    CHECK_MSG(on.width > 1.15, "pressed to 70%%: width %.4f of rest, no bulge", on.width);
    CHECK_MSG(on.overlap < 0.005, "the box sinks %.4f m into the jelly's particles", on.overlap);
    CHECK_MSG(on.speed < 0.75, "lifted over 0.5 s: thrown at %.3f m/s", on.speed);
    smp_result off = smp_press(PBD_SM_LINEAR, 1, 0, 30, 0.7f);
    CHECK_MSG(off.volume < 0.8, "without the volume term: volume %.4f of rest (was 0.70)", off.volume);
    smp_result quad = smp_press(PBD_SM_QUADRATIC, 0, 0, 30, 0.7f);
    CHECK_MSG(quad.volume > 0.95 && quad.volume < 1.02, "quadratic, pressed to 70%%: volume %.4f", quad.volume);
}

/* Pressed to half its height (pbd_sm.h "Volume"): the jelly keeps 89.5%
   of its volume (without the term: 50.4%), and its highest particles
   reach 1.84 cm into the box at the end of a step. Lifted over 0.5 s, a
   corner particle pops out at 11.3 m/s in one frame (the body then
   follows the box at 0.54 m/s), bounded here so that it cannot grow
   unnoticed. */
TEST(sm_press_jelly_to_half_its_height) {
    LONG_SCENE();
    smp_result on = smp_press(PBD_SM_LINEAR, 0, 0, 30, 0.5f);
    CHECK_MSG(on.volume > 0.88 && on.volume < 0.92, "pressed to 50%%: volume %.4f of rest", on.volume);
    CHECK_MSG(on.overlap < 0.02, "pressed to 50%%: %.4f m into the box", on.overlap);
    CHECK_MSG(on.speed < 13.0, "lifted from 50%% over 0.5 s: thrown at %.3f m/s", on.speed);
    smp_result off = smp_press(PBD_SM_LINEAR, 1, 0, 30, 0.5f);
    CHECK_MSG(off.volume < 0.55, "without the volume term, pressed to 50%%: volume %.4f", off.volume);
}

/* Lifted at once, the compression stored in the pressed jelly comes
   free within a step and throws it: 7.0 m/s (6.8 m/s without the volume
   term: not its doing, pbd_sm.h "Volume"), bounded here so that it
   cannot grow unnoticed. */
TEST(sm_press_jelly_released_at_once) {
    LONG_SCENE();
    smp_result sudden = smp_press(PBD_SM_LINEAR, 0, 0, 1, 0.7f);
    CHECK_MSG(sudden.speed < 8.0, "lifted at once: thrown at %.3f m/s", sudden.speed);
}

/* The volume term acts in LINEAR and QUADRATIC mode only: a RIGID lattice
   (one cluster, a rigid body) and a RIGID lattice of regions (bending)
   give the same bits with volume 1 and 0. A plastic jelly (README's:
   yield 0.05, creep 5) pressed keeps its volume too (S_p keeps det 1) and
   keeps a dent after the lift (0.73 of its height 2 s later). */
TEST(sm_press_rigid_unchanged_plastic_dented) {
    LONG_SCENE();
    for (int hw = 0; hw <= 1; ++hw) {
        float *x[2];
        int n = 0;
        for (int vol = 0; vol < 2; ++vol) {
            pbd_world *w = pbdt_world(-9.81f);
            float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
            CHECK_OK(pbd_add_collider_plane(w, ground, up, 0.5f, NULL));
            int cells[3 * 4 * 4 * 4];
            CHECK_OK(pbd_sm_lattice_box(4, 4, 4, cells));
            pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
            ld.cells = cells;
            ld.cell_count = 64;
            ld.spacing = SMP_S;
            ld.half_width = hw;
            ld.origin[1] = 0.3f;
            ld.body.volume = (float)vol;
            CHECK_OK(pbd_sm_add_lattice(w, &ld, NULL, NULL));
            for (int f = 0; f < 40; ++f) CHECK_OK(pbd_world_step(w, SMP_DT));
            n = pbd_world_particle_count(w);
            x[vol] = (float *)malloc(sizeof(float) * 4 * (size_t)n);
            memcpy(x[vol], pbd_world_positions(w), sizeof(float) * 4 * (size_t)n);
            pbd_world_destroy(w);
        }
        CHECK_MSG(!memcmp(x[0], x[1], sizeof(float) * 4 * (size_t)n), "RIGID, half-width %d: volume changed it", hw);
        free(x[0]);
        free(x[1]);
    }
    smp_result plastic = smp_press(PBD_SM_LINEAR, 0, 1, 30, 0.7f);
    CHECK_MSG(plastic.volume > 0.95 && plastic.volume < 1.02, "plastic, pressed: volume %.4f", plastic.volume);
    CHECK_MSG(plastic.after < 0.95, "plastic: height %.4f of rest 2 s after the lift, no dent", plastic.after);
}

void suite_sm_press(void) {
    RUN(sm_press_jelly_keeps_its_volume);
    RUN(sm_press_jelly_to_half_its_height);
    RUN(sm_press_jelly_released_at_once);
    RUN(sm_press_rigid_unchanged_plastic_dented);
}
