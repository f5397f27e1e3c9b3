/* tests/test_fluids.c - position based fluids (survey 3.4.6; Macklin and
   Mueller 2013): a resting column reaches the rest density, a dam break
   stays in its tank and its front moves as before, the particle count
   never changes, density corrections keep momentum (with solids in the
   fluid, and a fluid alone in a closed box), coupling floats a light box
   and sinks a heavy one, threads and SIMD change no bit, the neighbour
   lists equal brute force, snapshots are complete, and bad input changes
   nothing. */
#include "test.h"
#include <stdlib.h>

/* A tank [0, size] x [0, inf) x [0, size] of plane colliders. */
static void add_tank(pbd_world *w, float sx, float sz, float friction) {
    float planes[5][6] = {
        {0, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0}, {sx, 0, 0, -1, 0, 0}, {0, 0, 0, 0, 0, 1}, {0, 0, sz, 0, 0, -1}};
    for (int k = 0; k < 5; ++k) CHECK_OK(pbd_add_collider_plane(w, planes[k], planes[k] + 3, friction, NULL));
}

/* A block of nx x ny x nz particles at spacing d from o, kernel radius h
   (0: the default). */
static pbd_fluid add_block_h(pbd_world *w, int nx, int ny, int nz, float d, float h, const float *o, pbd_range *r) {
    float *p = pbdt_lattice(nx, ny, nz, d, o);
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = nx * ny * nz;
    fd.spacing = d;
    fd.kernel_radius = h;
    pbd_fluid f = {0};
    CHECK_OK(pbd_add_fluid(w, &fd, &f, r));
    free(p);
    return f;
}
static pbd_fluid add_block(pbd_world *w, int nx, int ny, int nz, float d, const float *o, pbd_range *r) {
    return add_block_h(w, nx, ny, nz, d, 0.0f, o, r);
}

/* The resting column: after settling, the density constraint error (the
   compression rho/rho_0 - 1 > 0 that the unilateral constraint removes)
   is below 2% at every particle and 0.5% on average, the column is at
   rest, and it keeps its volume: its height stays within 10% of the
   rest-density height. (Below rest density is not an error of the
   unilateral constraint: near the free surface and the walls the kernel
   sums are truncated, and where the pressure is low nothing pulls the
   particles together - which is what keeps a free surface from
   clumping.) */
TEST(fluid_resting_column_reaches_rest_density) {
    enum { NX = 6, NY = 8, NZ = 6, N = NX * NY * NZ };
    const float d = 0.05f, o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, NX * d, NZ * d, 0.0f);
    pbd_range r;
    pbd_fluid f = add_block(w, NX, NY, NZ, d, o, &r);
    for (int s = 0; s < 120; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    float rho[N];
    int nrho = 0;
    CHECK_OK(pbd_fluid_densities(w, f, rho, N, &nrho));
    CHECK(nrho == N);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    float top = 0;
    for (int i = 0; i < N; ++i) top = x[4 * i + 1] > top ? x[4 * i + 1] : top;
    double mean = 0, worst = 0, v2 = 0;
    for (int i = 0; i < N; ++i) {
        double e = rho[i] - 1.0, c = e > 0 ? e : 0;
        mean += c / N;
        worst = c > worst ? c : worst;
        v2 += (double)v[4 * i] * v[4 * i] + (double)v[4 * i + 1] * v[4 * i + 1] + (double)v[4 * i + 2] * v[4 * i + 2];
    }
    CHECK_MSG(worst < 0.02, "max density error %.4f", worst);
    CHECK_MSG(mean < 0.005, "mean density error %.4f", mean);
    CHECK_MSG(sqrt(v2 / N) < 0.05, "rms speed %.4f m/s", sqrt(v2 / N));
    CHECK_MSG(top > 0.9f * NY * d && top < 1.1f * NY * d, "column height %.3f m, rest %.3f m", (double)top,
              (double)(NY * d));
    pbd_world_destroy(w);
}

/* The substeps of a step with a fluid: the fewest with
   h sqrt(|g| / spacing) <= gravity_cfl (0.06), and at least the world's. */
TEST(fluid_substeps_follow_gravity_cfl) {
    const float ds[5] = {0.005f, 0.0067f, 0.01f, 0.05f, 0.1f}, dt = 1.0f / 60.0f, g = 9.81f;
    const int want[5] = {13, 11, 9, 4, 4}; /* 4: the world's own */
    for (int i = 0; i < 5; ++i) {
        pbd_world *w = pbdt_world(-g);
        const float o[3] = {0, 0, 0};
        pbd_range r;
        add_block(w, 2, 2, 2, ds[i], o, &r);
        int S = pbd_world_step_substeps(w, dt);
        CHECK_MSG(S == want[i], "spacing %g: %d substeps, want %d", (double)ds[i], S, want[i]);
        CHECK(dt / S * sqrtf(g / ds[i]) <= 0.06f);
        if (S > 4) CHECK(dt / (S - 1) * sqrtf(g / ds[i]) > 0.06f);
        const float zero[3] = {0, 0, 0};
        CHECK_OK(pbd_world_set_gravity(w, zero));
        CHECK(pbd_world_step_substeps(w, dt) == 4); /* no gravity: no bound */
        pbd_world_destroy(w);
    }
    CHECK(pbd_world_step_substeps(NULL, dt) == 0);
}

/* Water at rest in a closed tank of planes, 10 x 30 x 10 particles (30
   layers: the compression that holds a column up grows with its depth),
   with the defaults except the spacing, stepped 0.6 s at 60 Hz (1 cm also
   with 2 substeps asked for: it was thrown to 16x its height; the column
   has settled by then, bench/fluid_rest.c runs 2 s). Every step its fill
   height (twice the particles' mean height) stays within 2% of the
   height it was placed with and no particle rises above it by more than
   two spacings; at the end the density error (pbd_fluid_densities, the
   compression rho/rho_0 - 1 > 0) is at most 0.4% on average and 2% at any
   particle, and the column has lost at most 1% of its height (measured
   here at 0.6 s: mean 0.13-0.22%, max 0.78-1.44% over the spacings, AVX-512
   and scalar, lost 0.68-0.87%; in 2 s: 0.7-0.9%, density errors 0.22% /
   1.22%; was 1% / 3%; before the warm start
   of the pressure and gravity_cfl 0.06: 1.3%, 0.6% / 3.1%; with the warm
   start alone 0.96-1.01% at 5 mm, depending on the SIMD width; before
   the colliders contributed density,
   wall and floor particles packed: a 5 cm tank lost 9% of its height). */
static void resting_tank(float d, int substeps, int iterations) {
    enum { NX = 10, NY = 30, NZ = 10, N = NX * NY * NZ };
    const float o[3] = {0, 0, 0}, H = NY * d;
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, substeps, iterations));
    add_tank(w, NX * d, NZ * d, 0.0f);
    float lid[6] = {0, 4 * H, 0, 0, -1, 0};
    CHECK_OK(pbd_add_collider_plane(w, lid, lid + 3, 0.0f, NULL));
    pbd_range r;
    pbd_fluid f = add_block(w, NX, NY, NZ, d, o, &r);
    float fill_off = 0, rise = 0;
    for (int s = 0; s < 36; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w);
        double my = 0;
        float top = 0;
        for (int i = 0; i < N; ++i) {
            my += x[4 * i + 1] / N;
            top = x[4 * i + 1] > top ? x[4 * i + 1] : top;
        }
        float off = fabsf(2.0f * (float)my / H - 1.0f), up = (top + 0.5f * d - H) / d;
        fill_off = off > fill_off ? off : fill_off;
        rise = up > rise ? up : rise;
    }
    static float rho[N];
    int nrho = 0;
    CHECK_OK(pbd_fluid_densities(w, f, rho, N, &nrho));
    CHECK(nrho == N);
    const float *x = pbd_world_positions(w);
    double mean = 0, worst = 0, my = 0;
    for (int i = 0; i < N; ++i) {
        double e = rho[i] - 1.0, c = e > 0 ? e : 0;
        mean += c / N;
        worst = c > worst ? c : worst;
        my += x[4 * i + 1] / N;
    }
    double loss = 1.0 - 2.0 * my / H;
    printf("    spacing %g, %d substeps and %d iterations asked: density error mean %.3f%% max %.3f%%, height lost "
           "%.2f%%\n",
           (double)d, substeps, iterations, 100.0 * mean, 100.0 * worst, 100.0 * loss);
    CHECK_MSG(fill_off <= 0.02f, "spacing %g: the fill height moved by %.2f%%", (double)d, 100.0 * fill_off);
    CHECK_MSG(rise <= 2.0f, "spacing %g: a particle rose %.2f spacings above the surface", (double)d, (double)rise);
    CHECK_MSG(mean <= 0.004, "spacing %g: mean density error %.2f%%", (double)d, 100.0 * mean);
    CHECK_MSG(worst <= 0.02, "spacing %g: max density error %.2f%%", (double)d, 100.0 * worst);
    CHECK_MSG(loss <= 0.01, "spacing %g: lost %.2f%% of its height", (double)d, 100.0 * loss);
    pbd_world_destroy(w);
}
TEST(fluid_resting_tank_5mm) {
    LONG_SCENE();
    resting_tank(0.005f, 4, 4);
}
TEST(fluid_resting_tank_1cm_2_substeps) {
    LONG_SCENE();
    resting_tank(0.01f, 2, 4);
}
TEST(fluid_resting_tank_2_5cm) {
    LONG_SCENE();
    resting_tank(0.025f, 4, 4);
}
TEST(fluid_resting_tank_5cm) { resting_tank(0.05f, 4, 4); }
TEST(fluid_resting_tank_10cm) { resting_tank(0.1f, 4, 4); }
/* A world at 1 or 2 iterations (a multi-resolution cloth's, README): the
   fluid still gets PBD_FLUID_MIN_ITERATIONS (4), so the tank rests as at
   4 (it exploded: 5 cm, 1 iteration, within 2 s at 1e4 m/s). */
TEST(fluid_resting_tank_5cm_1_iteration) { resting_tank(0.05f, 4, 1); }
TEST(fluid_resting_tank_1cm_2_iterations) {
    LONG_SCENE();
    resting_tank(0.01f, 4, 2);
}

/* Counts the plugin projections: the world's iterations per substep. */
static void count_project(void *u, const pbd_solve_context *c) {
    (void)c;
    ++*(int *)u;
}

/* The extra fluid iterations are the fluid's and the contacts' alone: a
   plugin's projection (like the groups, strands, self-collision) still
   runs the world's 1 iteration per substep beside a fluid, and a world
   without a fluid takes no extra iteration (its step is bit-identical to
   the same world's step with the fluid removed before). */
TEST(fluid_min_iterations_leave_the_world_its_own) {
    const float o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 4, 1));
    add_tank(w, 4 * 0.05f, 4 * 0.05f, 0.0f);
    pbd_range r;
    add_block(w, 4, 4, 4, 0.05f, o, &r);
    int projects = 0;
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "count";
    pd.user = &projects;
    pd.project = count_project;
    CHECK_OK(pbd_add_plugin(w, &pd, NULL));
    int S = pbd_world_step_substeps(w, 1.0f / 60.0f);
    for (int k = 0; k < 3; ++k) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK_MSG(projects == 3 * S, "%d plugin projections in 3 steps of %d substeps at 1 iteration", projects, S);
    pbd_world_destroy(w);
}

/* The ends of the accepted kernel radius range: a 10 x 10 x 10 block at
   5 cm in a tank of planes, 2 s at 60 Hz, keeps its mean height within
   the bound below of where it was placed and comes to rest (max speed).
   Measured here: -0.29% at both ends, max speed 0.20 and 0.27 m/s
   (AVX-512; scalar 0.26 and 0.22 m/s); over
   1 cm, 5 cm, 10 cm and blocks of 10 x 10 x 10, 10 x 30 x 10, 20 x 8 x 20
   -1.6% to +0.05% in 3 s (bench/fluid_rest.c --kernels). The bound 2%
   takes every build; outside the range, before it was enforced, the same
   block lost 4.5% in 3 s at 1.4 spacings and gained 8.8% at 2.5. 0.5 m/s
   is half the speed of a fall of one spacing, sqrt(2 g d). */
static void block_at_kernel(float k, double max_change, double max_speed) {
    enum { NX = 10, NY = 10, NZ = 10, N = NX * NY * NZ };
    const float d = 0.05f, o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, NX * d, NZ * d, 0.0f);
    pbd_range r;
    add_block_h(w, NX, NY, NZ, d, k * d, o, &r);
    const float *x = pbd_world_positions(w);
    double h0 = 0, h1 = 0, vmax = 0;
    for (int i = 0; i < N; ++i) h0 += x[4 * (r.first + i) + 1] / N;
    for (int s = 0; s < 120; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    x = pbd_world_positions(w);
    const float *v = pbd_world_velocities(w);
    for (int i = 0; i < N; ++i) {
        const float *q = v + 4 * (r.first + i);
        double s = sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]);
        vmax = s > vmax ? s : vmax;
        h1 += x[4 * (r.first + i) + 1] / N;
    }
    double change = h1 / h0 - 1.0;
    printf("    kernel radius %g spacings: mean height changed by %.2f%%, max speed %.3f m/s\n", (double)k,
           100.0 * change, vmax);
    CHECK_MSG(fabs(change) <= max_change, "kernel %g spacings: mean height changed by %.2f%%", (double)k,
              100.0 * change);
    CHECK_MSG(vmax <= max_speed, "kernel %g spacings: max speed %.3f m/s", (double)k, vmax);
    pbd_world_destroy(w);
}
TEST(fluid_kernel_radius_range_ends_rest) {
    LONG_SCENE();
    block_at_kernel(PBD_FLUID_KERNEL_MIN, 0.02, 0.5);
    block_at_kernel(PBD_FLUID_KERNEL_MAX, 0.02, 0.5);
}

/* A dam break: every particle stays inside the tank in every step, and
   the particle count never changes. */
/* One short step among 1/60 s ones (a frame-time remainder): resting
   water at 5 cm (10 x 10 x 10 in a tank that fits it, 3 s), one step of
   0.1 ms, then 1/60 s steps, at a fixed 4 substeps (reference_dt 0: a
   world with a reference step carries so short a step over to the next,
   pbd_world_step). The short step turns the compression the
   water rests on into velocity (error / h: 13 m/s; the manual, "Time
   steps"), but the steps after it must not add to it: the pressure
   carried from the short substeps was scaled up by (h / h_before)^2 =
   2.8e4 into the first long one, and the water reached 2183 m/s and
   boiled for good. Now the carried pressure is only ever scaled down:
   the fastest is 20.7 m/s (particles thrown 22 m up fall back) and the
   water settles. */
TEST(fluid_one_short_step_is_not_amplified) {
    const float o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    CHECK_OK(pbd_world_set_reference_dt(w, 0));
    add_tank(w, 0.5f, 0.5f, 0.0f);
    pbd_range r;
    add_block(w, 10, 10, 10, 0.05f, o, &r);
    for (int s = 0; s < 180; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK_OK(pbd_world_step(w, 1e-4f));
    float jolt = pbdt_max_speed(w), after = 0;
    printf("    0.1 ms step: %.1f m/s right after it\n", (double)jolt);
    for (int s = 0; s < 120; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        float v = pbdt_max_speed(w);
        after = v > after ? v : after;
    }
    CHECK_MSG(jolt < 20.0f, "the short step threw a particle at %.1f m/s", (double)jolt);
    CHECK_MSG(after <= 1.5f * jolt, "%.1f m/s in the 2 s after the short step, %.1f m/s right after it", (double)after,
              (double)jolt);
    pbd_world_destroy(w);
}

TEST(fluid_dam_break_stays_in_tank) {
    const float d = 0.05f, o[3] = {0, 0, 0}, sx = 0.8f, sz = 0.2f;
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, sx, sz, 0.1f);
    pbd_range r;
    add_block(w, 5, 8, 4, d, o, &r);
    int n0 = pbd_world_particle_count(w), outside = 0, changed = 0;
    for (int s = 0; s < 90; ++s) {
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w);
        changed |= pbd_world_particle_count(w) != n0;
        for (int i = 0; i < n0; ++i) {
            const float *p = x + 4 * i;
            if (!(p[0] >= -1e-4f && p[0] <= sx + 1e-4f && p[1] >= -1e-4f && p[1] < 2.0f && p[2] >= -1e-4f &&
                  p[2] <= sz + 1e-4f))
                outside++;
        }
    }
    CHECK_MSG(outside == 0, "%d particle-steps outside the tank", outside);
    CHECK(!changed);
    const float *x = pbd_world_positions(w);
    float far = 0;
    for (int i = 0; i < n0; ++i) far = x[4 * i] > far ? x[4 * i] : far;
    CHECK_MSG(far > 0.6f, "the wave reached x = %.3f only", (double)far); /* the dam did break */
    pbd_world_destroy(w);
}

/* Density constraints and particle contacts are internal: without gravity
   and colliders, a compressed blob of fluid with loose solid particles in
   it keeps its linear momentum (sum m v; the masses differ). */
TEST(fluid_density_projection_keeps_momentum) {
    const float d = 0.05f, o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(0.0f);
    float *p = pbdt_lattice(5, 5, 5, 0.87f * d, o); /* 13% closer */
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = 125;
    fd.spacing = d;
    fd.viscosity = 0.1f; /* XSPH is pairwise: it keeps momentum (vorticity confinement is an external force) */
    float vel[3 * 125];
    unsigned seed = 3;
    for (int i = 0; i < 3 * 125; ++i) vel[i] = pbdt_rand(&seed) - 0.5f;
    fd.velocities = vel;
    CHECK_OK(pbd_add_fluid(w, &fd, NULL, NULL));
    float sp[6] = {0.1f, 0.1f, 0.1f, 0.12f, 0.2f, 0.1f};
    pbd_range solids = pbdt_add_colliding(w, sp, 2, 0.02f, 0.3f);
    CHECK(solids.count == 2);
    double m0[3] = {0, 0, 0}, m1[3] = {0, 0, 0}, scale = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const float *v = pbd_world_velocities(w);
        for (int i = 0; i < pbd_world_particle_count(w); ++i) {
            float m;
            pbd_particle_get_mass(w, i, &m);
            for (int a = 0; a < 3; ++a) (pass ? m1 : m0)[a] += (double)m * v[4 * i + a];
            if (pass)
                scale += m * sqrt((double)v[4 * i] * v[4 * i] + (double)v[4 * i + 1] * v[4 * i + 1] +
                                  (double)v[4 * i + 2] * v[4 * i + 2]);
        }
        if (!pass)
            for (int s = 0; s < 10; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    }
    CHECK(scale > 0);
    for (int a = 0; a < 3; ++a) CHECK_NEAR(m1[a], m0[a], 1e-5 * scale);
    free(p);
    pbd_world_destroy(w);
}

/* A fluid alone (one fluid, no solid: the neighbour build's one-fluid
   shortcut and the SIMD fast path of every pass) in a closed box without
   gravity: a blob compressed by 5% with random velocities keeps its
   linear momentum while it expands, as long as it stays away from the
   walls (checked: no particle comes within the kernel radius of a wall).
   The density corrections, s_corr and XSPH are pairwise (grad W_ab =
   -grad W_ba); a pass that broke that symmetry (lambda_a + lambda_a in
   place of lambda_a + lambda_b, say) would fail here. */
TEST(fluid_alone_in_closed_box_keeps_momentum) {
    enum { NB = 6, N = NB * NB * NB };
    const float d = 0.05f, box = 3.0f, h = 2.0f * d, o[3] = {1.36f, 1.36f, 1.36f};
    pbd_world *w = pbdt_world(0.0f);
    for (int k = 0; k < 6; ++k) { /* the six faces, normals inward */
        float p[3] = {0, 0, 0}, n[3] = {0, 0, 0};
        p[k % 3] = k < 3 ? 0.0f : box;
        n[k % 3] = k < 3 ? 1.0f : -1.0f;
        CHECK_OK(pbd_add_collider_plane(w, p, n, 0.1f, NULL));
    }
    float *p = pbdt_lattice(NB, NB, NB, 0.95f * d, o), vel[3 * N];
    unsigned seed = 7;
    for (int i = 0; i < 3 * N; ++i) vel[i] = 0.5f * (pbdt_rand(&seed) - 0.5f);
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.velocities = vel;
    fd.count = N;
    fd.spacing = d;
    fd.viscosity = 0.1f;
    CHECK_OK(pbd_add_fluid(w, &fd, NULL, NULL));
    double m0[3] = {0, 0, 0}, m1[3] = {0, 0, 0}, scale = 0;
    float nearest = box;
    for (int pass = 0; pass < 2; ++pass) {
        const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
        for (int i = 0; i < N; ++i)
            for (int a = 0; a < 3; ++a) {
                (pass ? m1 : m0)[a] += v[4 * i + a]; /* one fluid: one mass */
                if (pass) scale += fabs((double)v[4 * i + a]);
                nearest = x[4 * i + a] < nearest ? x[4 * i + a] : nearest;
                nearest = box - x[4 * i + a] < nearest ? box - x[4 * i + a] : nearest;
            }
        if (!pass)
            for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    }
    CHECK_MSG(nearest > h, "a particle came within %.3f of a wall", (double)nearest);
    CHECK(scale > 0);
    for (int a = 0; a < 3; ++a)
        CHECK_MSG(fabs(m1[a] - m0[a]) <= 1e-5 * scale, "momentum %d: %g -> %g (scale %g)", a, m0[a], m1[a], scale);
    free(p);
    pbd_world_destroy(w);
}

/* A dam break's front (the largest x of any particle) over time against
   the solver of 70b887f, so that a faster solver must move the fluid as
   that one did (measured with its AVX-512, AVX2, SSE and scalar builds:
   they agree within 1e-4 m): a 6 x 10 x 3 block of 5 cm spacing
   (0.3 x 0.5 m) released at the end of a 1.5 m tank. Each sample stays
   within 0.4 spacing (2 cm) of then: five times the viscosity moves the
   front at 0.5 s by 5.5 cm, no s_corr by up to 13 cm. (In the units of
   Martin and Moyce 1952, column width a = 0.3 m and T = t sqrt(2 g / a),
   the front is at 2.0 a at T = 1.6 and at 3.5 a at T = 3.2.) */
TEST(fluid_dam_break_front_as_before) {
    const float d = 0.05f, o[3] = {0, 0, 0}, before[5] = {0.3818f, 0.5911f, 0.8258f, 1.0526f, 1.3302f};
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 1.5f, 0.15f, 0.1f);
    pbd_range r;
    add_block(w, 6, 10, 3, d, o, &r);
    for (int k = 0; k < 5; ++k) {
        for (int s = 0; s < 6; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w);
        float front = 0;
        for (int i = 0; i < r.count; ++i) front = x[4 * (r.first + i)] > front ? x[4 * (r.first + i)] : front;
        CHECK_MSG(fabsf(front - before[k]) <= 0.4f * d, "t = %.1f s: front at %.4f m, before %.4f m", 0.1 * (k + 1),
                  (double)front, (double)before[k]);
    }
    pbd_world_destroy(w);
}

/* Two-way coupling: a soft box lighter than water floats on a pool, a
   heavier one sinks (3 s: it settles by 2.5 s on a layer of water a
   particle thick, pbd.h's fluids). */
static float box_bottom_after(float density) {
    const float d = 0.05f, o[3] = {0, 0, 0}, s = 0.4f;
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, s, s, 0.1f);
    pbd_range r;
    add_block(w, 8, 4, 8, d, o, &r); /* a 0.2 m deep pool */
    pbd_mesh m;
    float lo[3] = {0.125f, 0.3f, 0.125f}, hi[3] = {0.275f, 0.45f, 0.275f};
    CHECK_OK(pbd_mesh_tet_box(4, 4, 4, lo, hi, &m));
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = m.positions;
    sd.vertex_count = m.vertex_count;
    sd.tets = m.tets;
    sd.tet_count = m.tet_count;
    sd.density = density;
    sd.radius = 0.025f;
    pbd_object box;
    CHECK_OK(pbd_add_softbody(w, &sd, &box));
    CHECK_OK(pbd_object_set_particle_contact(w, box, 1));
    for (int k = 0; k < 180; ++k) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    const pbd_range bp = pbdt_parts(w, box).particles;
    float bottom = 1e30f;
    for (int i = 0; i < bp.count; ++i) {
        float y = x[4 * (bp.first + i) + 1];
        bottom = y < bottom ? y : bottom;
    }
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return bottom;
}

TEST(fluid_light_box_floats_heavy_box_sinks) {
    LONG_SCENE();
    float light = box_bottom_after(300.0f), heavy = box_bottom_after(4000.0f);
    /* the pool is 0.2 m deep: the light box rides at the surface (0.3 of
       its 0.15 m under water), the heavy one has sunk deep into it */
    CHECK_MSG(light > 0.14f, "light box bottom at %.3f m", (double)light);
    CHECK_MSG(heavy < 0.08f, "heavy box bottom at %.3f m", (double)heavy);
}

/* A dam break with a box: 1 and 2 threads, SIMD and scalar give the same
   bits; a snapshot restored into a fresh world continues bit for bit. */
static pbd_world *coupled_scene(pbd_fluid *fluid) {
    const float d = 0.05f, o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 0.6f, 0.25f, 0.2f);
    pbd_range r;
    pbd_fluid f = add_block(w, 4, 6, 5, d, o, &r);
    CHECK_OK(pbd_fluid_set_viscosity(w, f, 0.05f, 0.05f));
    if (fluid) *fluid = f;
    pbd_mesh m;
    float lo[3] = {0.4f, 0.02f, 0.05f}, hi[3] = {0.5f, 0.12f, 0.15f};
    CHECK_OK(pbd_mesh_tet_box(3, 3, 3, lo, hi, &m));
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = m.positions;
    sd.vertex_count = m.vertex_count;
    sd.tets = m.tets;
    sd.tet_count = m.tet_count;
    sd.density = 500.0f;
    sd.radius = 0.025f;
    pbd_object box;
    CHECK_OK(pbd_add_softbody(w, &sd, &box));
    CHECK_OK(pbd_object_set_particle_contact(w, box, 1));
    pbd_mesh_free(&m);
    return w;
}

static void run_steps(pbd_world *w, int n) {
    for (int s = 0; s < n; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
}

TEST(fluid_threads_and_simd_bit_identical) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    pbd_world *a = coupled_scene(NULL), *b = coupled_scene(NULL), *c = coupled_scene(NULL);
    CHECK_OK(pbd_world_set_threads(a, 1));
    CHECK_OK(pbd_world_set_threads(b, 2));
    CHECK_OK(pbd_world_set_threads(c, 2));
    CHECK_OK(pbd_world_set_simd(c, 0));
    run_steps(a, 12);
    run_steps(b, 12);
    run_steps(c, 12);
    size_t bytes = sizeof(float) * 4 * (size_t)pbd_world_particle_count(a);
    CHECK(memcmp(pbd_world_positions(a), pbd_world_positions(b), bytes) == 0);
    CHECK(memcmp(pbd_world_velocities(a), pbd_world_velocities(b), bytes) == 0);
    CHECK(memcmp(pbd_world_positions(a), pbd_world_positions(c), bytes) == 0);
    pbd_world_destroy(a);
    pbd_world_destroy(b);
    pbd_world_destroy(c);
}

/* Fluid alone (no solid taking part: the neighbour build's one-fluid
   shortcut, every particle on the SIMD fast path, partial last blocks):
   1 and 2 threads and scalar give the same bits. */
static pbd_world *fluid_scene(void) {
    const float d = 0.05f, o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 0.6f, 0.25f, 0.2f);
    pbd_range r;
    pbd_fluid f = add_block(w, 5, 7, 5, d, o, &r);
    CHECK_OK(pbd_fluid_set_viscosity(w, f, 0.05f, 0.05f));
    return w;
}

TEST(fluid_alone_threads_and_simd_bit_identical) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    pbd_world *w[3] = {fluid_scene(), fluid_scene(), fluid_scene()};
    CHECK_OK(pbd_world_set_threads(w[0], 1));
    CHECK_OK(pbd_world_set_threads(w[1], 2));
    CHECK_OK(pbd_world_set_threads(w[2], 2));
    CHECK_OK(pbd_world_set_simd(w[2], 0));
    for (int k = 0; k < 3; ++k) run_steps(w[k], 15);
    size_t bytes = sizeof(float) * 4 * (size_t)pbd_world_particle_count(w[0]);
    for (int k = 1; k < 3; ++k) {
        CHECK(memcmp(pbd_world_positions(w[0]), pbd_world_positions(w[k]), bytes) == 0);
        CHECK(memcmp(pbd_world_velocities(w[0]), pbd_world_velocities(w[k]), bytes) == 0);
    }
    for (int k = 0; k < 3; ++k) pbd_world_destroy(w[k]);
}

/* The colliders' density from every analytic kind: a fluid between a
   sphere, a capsule and a box that moves: 1 and 2 threads and scalar
   give the same bits. */
static pbd_world *walls_scene(void) {
    pbd_world *w = fluid_scene();
    const float c[3] = {0.4f, 0.1f, 0.1f}, a[3] = {0.3f, 0.05f, 0.05f}, b[3] = {0.3f, 0.05f, 0.15f};
    const float bc[3] = {0.5f, 0.05f, 0.1f}, he[3] = {0.04f, 0.04f, 0.06f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.06f, 0.2f, NULL));
    CHECK_OK(pbd_add_collider_capsule(w, a, b, 0.03f, 0.2f, NULL));
    pbd_collider box;
    CHECK_OK(pbd_add_collider_box(w, bc, he, NULL, 0.2f, &box));
    const float to[3] = {0.2f, 0.06f, 0.1f};
    CHECK_OK(pbd_collider_set_pose(w, box, to, NULL));
    return w;
}

TEST(fluid_walls_threads_and_simd_bit_identical) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    pbd_world *w[3] = {walls_scene(), walls_scene(), walls_scene()};
    CHECK_OK(pbd_world_set_threads(w[0], 1));
    CHECK_OK(pbd_world_set_threads(w[1], 2));
    CHECK_OK(pbd_world_set_threads(w[2], 2));
    CHECK_OK(pbd_world_set_simd(w[2], 0));
    for (int k = 0; k < 3; ++k) run_steps(w[k], 12);
    size_t bytes = sizeof(float) * 4 * (size_t)pbd_world_particle_count(w[0]);
    for (int k = 1; k < 3; ++k) {
        CHECK(memcmp(pbd_world_positions(w[0]), pbd_world_positions(w[k]), bytes) == 0);
        CHECK(memcmp(pbd_world_velocities(w[0]), pbd_world_velocities(w[k]), bytes) == 0);
    }
    for (int k = 0; k < 3; ++k) pbd_world_destroy(w[k]);
}

static int cmp_int(const void *a, const void *b) {
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* The neighbour lists of the fluid passes (built by the fast path: one
   candidate gather per cell, 16-wide distance tests, compressed writes;
   and by the general path next to the box) equal brute force: for every
   fluid particle, every other particle taking part within the kernel
   radius h (the search radius here: 3 x the box's radius is less), at the
   positions pbd_fluid_densities builds them from. The lists (order
   included) are the same with 1 and 2 threads and without SIMD. */
TEST(fluid_neighbor_lists_equal_brute_force) {
    pbdt_parity(PBDT_SIMD, PBDT_THREADS); /* brute force is compared in every build */
    pbd_fluid f[3];
    pbd_world *w[3] = {coupled_scene(&f[0]), coupled_scene(&f[1]), coupled_scene(&f[2])};
    CHECK_OK(pbd_world_set_threads(w[0], 1));
    CHECK_OK(pbd_world_set_threads(w[1], 2));
    CHECK_OK(pbd_world_set_simd(w[2], 0));
    enum { F = 4 * 6 * 5 };
    float rho[F];
    int nrho = 0;
    for (int k = 0; k < 3; ++k) {
        run_steps(w[k], 20); /* the dam breaks against the box */
        CHECK_OK(pbd_fluid_densities(w[k], f[k], rho, F, &nrho));
    }
    const int n = pbd_world_particle_count(w[0]);
    const float *x = pbd_world_positions(w[0]), h = 2.0f * 0.05f;
    int list[PBD_MAX_NEIGHBORS], other[PBD_MAX_NEIGHBORS], *want = (int *)malloc(sizeof(int) * (size_t)n);
    int with_box = 0, max_count = 0;
    for (int i = 0; i < F; ++i) {
        int count = 0, nw = 0, solid = 0;
        CHECK_OK(pbd_world_particle_neighbors(w[0], i, list, PBD_MAX_NEIGHBORS, &count));
        for (int k = 1; k < 3; ++k) {
            int c2 = 0;
            CHECK_OK(pbd_world_particle_neighbors(w[k], i, other, PBD_MAX_NEIGHBORS, &c2));
            CHECK(c2 == count && memcmp(list, other, sizeof(int) * (size_t)count) == 0);
        }
        for (int j = 0; j < n; ++j) {
            float d[3] = {x[4 * j] - x[4 * i], x[4 * j + 1] - x[4 * i + 1], x[4 * j + 2] - x[4 * i + 2]};
            if (j != i && d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < h * h) {
                want[nw++] = j;
                solid |= j >= F;
            }
        }
        CHECK_MSG(count == nw, "particle %d: %d neighbours, brute force %d", i, count, nw);
        if (count != nw) continue;
        qsort(list, (size_t)count, sizeof(int), cmp_int);
        for (int k = 0; k < count; ++k) CHECK(list[k] == want[k]);
        with_box += solid;
        max_count = count > max_count ? count : max_count;
    }
    /* both paths ran: some particles have the box around, and the lists
       are long enough to need several 16-wide blocks */
    CHECK_MSG(with_box > 0 && with_box < F, "%d of %d fluid particles next to the box", with_box, F);
    CHECK_MSG(max_count > 16, "at most %d neighbours", max_count);
    free(want);
    for (int k = 0; k < 3; ++k) pbd_world_destroy(w[k]);
}

TEST(fluid_snapshot_restores_everything) {
    pbd_fluid f;
    pbd_world *a = coupled_scene(&f);
    run_steps(a, 10);
    size_t n = pbd_world_snapshot_size(a);
    unsigned char *buf = (unsigned char *)malloc(n);
    CHECK_OK(pbd_world_save(a, buf, n));
    pbd_world *b = pbdt_world(0.0f);
    CHECK_OK(pbd_world_restore(b, buf, n));
    CHECK(pbd_world_fluid_count(b) == 1);
    run_steps(a, 15);
    run_steps(b, 15);
    size_t bytes = sizeof(float) * 4 * (size_t)pbd_world_particle_count(a);
    CHECK(pbd_world_particle_count(b) == pbd_world_particle_count(a));
    CHECK(memcmp(pbd_world_positions(a), pbd_world_positions(b), bytes) == 0);
    /* the fluid's parameters are part of it: a changed vorticity diverges */
    CHECK_OK(pbd_world_restore(b, buf, n));
    CHECK_OK(pbd_fluid_set_viscosity(b, f, 0.05f, 0.5f)); /* a's handle names b's restored fluid */
    run_steps(b, 15);
    CHECK(memcmp(pbd_world_positions(a), pbd_world_positions(b), bytes) != 0);
    free(buf);
    pbd_world_destroy(a);
    pbd_world_destroy(b);
}

/* ---- bad input: an error, and the snapshot byte for byte as before ---- */
#define EXPECT_UNCHANGED(w, expr, want)                                                                \
    do {                                                                                               \
        size_t n0_, n1_;                                                                               \
        unsigned char *s0_ = pbdt_save(w, &n0_);                                                       \
        CHECK_RESULT(expr, want);                                                                      \
        unsigned char *s1_ = pbdt_save(w, &n1_);                                                       \
        CHECK_MSG(n0_ > 0 && n0_ == n1_ && memcmp(s0_, s1_, n0_) == 0, "%s changed the world", #expr); \
        free(s0_);                                                                                     \
        free(s1_);                                                                                     \
    } while (0)

TEST(fluid_bad_input_changes_nothing) {
    const float o[3] = {0, 0, 0};
    pbd_fluid f, bad = {12345u}, none = {0};
    pbd_world *w = coupled_scene(&f);
    run_steps(w, 2);
    float *p = pbdt_lattice(3, 3, 3, 0.05f, o);
    pbd_fluid_desc good = pbd_fluid_desc_default(), d;
    good.positions = p;
    good.count = 27;
    float nan = NAN;
    d = good;
    d.rest_density = 0;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.rest_density = -1000;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_NEGATIVE_MASS);
    d = good;
    d.rest_density = nan;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_NOT_FINITE);
    d = good;
    d.spacing = 0;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.spacing = -0.05f;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.spacing = INFINITY;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_NOT_FINITE);
    d = good;
    d.spacing = 1e-20f; /* mass rho_0 d^3 underflows */
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_DEGENERATE);
    d = good;
    d.kernel_radius = 0.5f * good.spacing;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.kernel_radius = 5.0f * good.spacing;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    /* just outside [PBD_FLUID_KERNEL_MIN, _MAX] spacings (the old range
       [1, 4] took them: too few neighbours below, s_corr lifts the
       surface above; see pbd_fluid_desc) */
    d = good;
    d.kernel_radius = 0.99f * PBD_FLUID_KERNEL_MIN * good.spacing;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "kernel_radius") != NULL);
    d = good;
    d.kernel_radius = 1.01f * PBD_FLUID_KERNEL_MAX * good.spacing;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "kernel_radius") != NULL);
    d = good;
    d.kernel_radius = PBD_FLUID_KERNEL_MAX * good.spacing; /* the ends are in */
    pbd_world *w2 = pbdt_world(-9.81f);
    CHECK_OK(pbd_add_fluid(w2, &d, NULL, NULL));
    d.kernel_radius = PBD_FLUID_KERNEL_MIN * good.spacing;
    CHECK_OK(pbd_add_fluid(w2, &d, NULL, NULL));
    pbd_world_destroy(w2);
    d = good;
    d.viscosity = 2;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.relaxation = -1;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.scorr_dq = 1.5f;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "scorr_dq 1.5 outside (0, 1)") != NULL);
    /* each parameter is named (an audit: "a fluid parameter is NaN", "radius,
       relaxation, vorticity, scorr_k and gravity_cfl must be >= 0") */
    d = good;
    d.vorticity = nan;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_NOT_FINITE);
    CHECK(strstr(pbd_world_last_error(w), "fluid vorticity is not finite") != NULL);
    d = good;
    d.gravity_cfl = -0.5f;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "gravity_cfl -0.5 < 0") != NULL);
    d = good;
    d.scorr_n = 20;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "scorr_n 20 outside [1, 16]") != NULL);
    /* particle friction has no restitution to blame */
    EXPECT_UNCHANGED(w, pbd_world_set_particle_contact_friction(w, -0.5f, 0.4f), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_world_last_error(w), "static friction -0.5 < 0") != NULL &&
          strstr(pbd_world_last_error(w), "restitution") == NULL);
    d = good;
    d.count = 0;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.count = -5;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
    d = good;
    d.count = 0x7fffffff; /* overflow of the particle count */
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_OVERFLOW);
    d = good;
    d.positions = NULL;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, NULL, NULL, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_add_fluid(NULL, &good, NULL, NULL), PBD_ERROR_NULL_POINTER);
    p[4] = nan;
    EXPECT_UNCHANGED(w, pbd_add_fluid(w, &good, NULL, NULL), PBD_ERROR_NOT_FINITE);
    p[4] = 0.1f;
    float out[200];
    EXPECT_UNCHANGED(w, pbd_fluid_set_viscosity(w, bad, 0.1f, 0), PBD_ERROR_INVALID_HANDLE);
    EXPECT_UNCHANGED(w, pbd_fluid_set_viscosity(w, f, -0.1f, 0), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_fluid_set_viscosity(w, f, 0.1f, nan), PBD_ERROR_NOT_FINITE);
    int nd = 0;
    EXPECT_UNCHANGED(w, pbd_fluid_densities(w, none, out, 200, &nd), PBD_ERROR_INVALID_HANDLE);
    EXPECT_UNCHANGED(w, pbd_fluid_densities(w, f, out, -1, &nd), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_fluid_densities(w, f, NULL, 200, &nd), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_fluid_densities(w, f, out, 200, NULL), PBD_ERROR_NULL_POINTER);
    /* a short buffer is no error: the first 3, and the full count */
    float first[3] = {0, 0, 0};
    EXPECT_UNCHANGED(w, pbd_fluid_densities(w, f, first, 3, &nd), PBD_OK);
    CHECK(nd > 3 && first[0] > 0 && first[2] > 0);
    /* and a good one still works afterwards */
    int before = pbd_world_particle_count(w);
    pbd_range r;
    CHECK_OK(pbd_add_fluid(w, &good, NULL, &r));
    CHECK(r.first == before && r.count == 27 && pbd_world_fluid_count(w) == 2);
    run_steps(w, 2);
    free(p);
    pbd_world_destroy(w);
}

/* The parameters that feed energy in are bounded (PBD_FLUID_SCORR_MAX,
   PBD_FLUID_VORTICITY_MAX, radius <= spacing / 2: an audit blew up a
   resting tank with values the ranges took): a dam break of 10 x 10 x 10
   particles at 5 cm at the bounds' edge keeps its energy within 8% of its
   start for 3 s (at scorr_k 0.3, which the bound now refuses, it gained
   18%), and the values of the audit are refused, naming the bound. */
static double dam_break_energy_gain(float scorr_k, float vorticity) {
    const float d = 0.05f, o[3] = {0, 0, 0};
    pbd_world *w = pbdt_world(-9.81f);
    add_tank(w, 0.8f, 0.8f, 0.5f);
    float *p = pbdt_lattice(10, 10, 10, d, o);
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = 1000;
    fd.scorr_k = scorr_k;
    fd.vorticity = vorticity;
    pbd_range r = {0, 0};
    CHECK_OK(pbd_add_fluid(w, &fd, NULL, &r));
    free(p);
    double e0 = 0, most = 0;
    for (int s = 0; s <= 180; ++s) {
        if (s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
        double e = 0;
        for (int i = r.first; i < r.first + r.count; ++i) {
            const float *vi = v + 4 * i;
            e += 9.81 * x[4 * i + 1] + 0.5 * (vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2]); /* per kg */
        }
        if (s == 0) e0 = e;
        most = e > most ? e : most;
    }
    pbd_world_destroy(w);
    return most / e0;
}
TEST(fluid_parameters_that_feed_energy_in_are_bounded) {
    double gain = dam_break_energy_gain(0.15f, 0.0f); /* s_corr sums to 0.047 */
    CHECK_MSG(gain < 1.08, "scorr_k 0.15: energy %.3f of the start", gain);
    gain = dam_break_energy_gain(0.05f, 0.99f * PBD_FLUID_VORTICITY_MAX * sqrtf(9.81f * 0.05f));
    CHECK_MSG(gain < 1.08, "vorticity at its bound: energy %.3f of the start", gain);
    pbd_world *w = pbdt_world(-9.81f);
    const float o[3] = {0, 0, 0};
    float *p = pbdt_lattice(3, 3, 3, 0.05f, o);
    pbd_fluid_desc good = pbd_fluid_desc_default();
    good.positions = p;
    good.count = 27;
    static const struct {
        float scorr_k, scorr_n, scorr_dq, vorticity, radius;
        const char *says;
    } bad[] = {
        {0.05f, 4, 0.6f, 0, 0, "sums to 2.04 over a particle's neighbours"},
        {2.0f, 4, 0.2f, 0, 0, "above PBD_FLUID_SCORR_MAX = 0.05"},
        {0.05f, 1, 0.2f, 0, 0, "s_corr (scorr_k 0.05, scorr_n 1, scorr_dq 0.2) sums to 0.235"},
        {0.3f, 4, 0.2f, 0, 0, "lower scorr_k or scorr_dq, or raise scorr_n"},
        {0.05f, 4, 0.2f, 10, 0, "vorticity 10 m/s is above PBD_FLUID_VORTICITY_MAX sqrt(9.81 m/s^2 spacing) = 2.1"},
        {0.05f, 4, 0.2f, 0, 0.05f, "radius 0.05 m is above spacing / 2 = 0.025 m"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        pbd_fluid_desc d = good;
        d.scorr_k = bad[k].scorr_k;
        d.scorr_n = bad[k].scorr_n;
        d.scorr_dq = bad[k].scorr_dq;
        d.vorticity = bad[k].vorticity;
        d.radius = bad[k].radius;
        EXPECT_UNCHANGED(w, pbd_add_fluid(w, &d, NULL, NULL), PBD_ERROR_INVALID_ARGUMENT);
        CHECK_MSG(strstr(pbd_world_last_error(w), bad[k].says) != NULL, "%s", pbd_world_last_error(w));
    }
    pbd_fluid f;
    good.radius = 0.025f; /* the ends are in */
    CHECK_OK(pbd_add_fluid(w, &good, &f, NULL));
    EXPECT_UNCHANGED(w, pbd_fluid_set_viscosity(w, f, 0.01f, 3.0f), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_OK(pbd_fluid_set_viscosity(w, f, 0.01f, 2.0f));
    free(p);
    pbd_world_destroy(w);
}

void suite_fluids(void) {
    RUN(fluid_parameters_that_feed_energy_in_are_bounded);
    RUN(fluid_resting_column_reaches_rest_density);
    RUN(fluid_one_short_step_is_not_amplified);
    RUN(fluid_dam_break_stays_in_tank);
    RUN(fluid_density_projection_keeps_momentum);
    RUN(fluid_alone_in_closed_box_keeps_momentum);
    RUN(fluid_dam_break_front_as_before);
    RUN(fluid_light_box_floats_heavy_box_sinks);
    RUN(fluid_threads_and_simd_bit_identical);
    RUN(fluid_alone_threads_and_simd_bit_identical);
    RUN(fluid_neighbor_lists_equal_brute_force);
    RUN(fluid_snapshot_restores_everything);
    RUN(fluid_bad_input_changes_nothing);
    RUN(fluid_walls_threads_and_simd_bit_identical);
    RUN(fluid_substeps_follow_gravity_cfl);
    RUN(fluid_resting_tank_5mm);
    RUN(fluid_resting_tank_1cm_2_substeps);
    RUN(fluid_resting_tank_2_5cm);
    RUN(fluid_resting_tank_5cm);
    RUN(fluid_resting_tank_10cm);
    RUN(fluid_resting_tank_5cm_1_iteration);
    RUN(fluid_resting_tank_1cm_2_iterations);
    RUN(fluid_min_iterations_leave_the_world_its_own);
    RUN(fluid_kernel_radius_range_ends_rest);
}
