/* tests/test_particle_contact.c - the hash grid and particle-particle
   contact with friction (survey 3.4.3 / 3.8; Macklin et al. 2014). */
#include "test.h"
#include <stdlib.h>

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : (x > y);
}

/* n loose particles of radius r at the given positions, all colliding. */
static pbd_world *particle_world(const float *pos, int n, float r, float gy) {
    pbd_world *w = pbdt_world(gy);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = n;
    pd.radius = r;
    pbd_range range;
    CHECK_OK(pbd_add_particles(w, &pd, &range));
    CHECK_OK(pbd_particles_set_particle_contact(w, range, 1));
    return w;
}

/* pbd_world_query_particles (the grid's sphere query) returns exactly the
   brute-force set, for radii below, near and far above the cell. */
TEST(grid_query_equals_brute_force) {
    enum { N = 1500 };
    unsigned seed = 11;
    float *pos = (float *)malloc(sizeof(float) * 3 * N);
    for (int i = 0; i < N; ++i)
        for (int a = 0; a < 3; ++a) /* a cluster and a sparse cloud, some far away */
            pos[3 * i + a] =
                i < 500 ? 0.2f * pbdt_rand(&seed) : (i % 97 == 0 ? 50.0f : 2.0f) * (pbdt_rand(&seed) - 0.5f);
    pbd_world *w = particle_world(pos, N, 0.01f, 0);
    int *got = (int *)malloc(sizeof(int) * N), *want = (int *)malloc(sizeof(int) * N);
    float radii[6] = {0.0f, 0.03f, 0.1f, 0.5f, 40.0f, 1e-40f}; /* a denormal cell too */
    for (int t = 0; t < 40; ++t) {
        float q[3];
        for (int a = 0; a < 3; ++a) q[a] = t < 20 ? 0.2f * pbdt_rand(&seed) : 2.0f * (pbdt_rand(&seed) - 0.5f);
        if (t == 0) {
            q[0] = pos[0];
            q[1] = pos[1];
            q[2] = pos[2];
        } /* radius 0 on a particle */
        float r = radii[t % 6];
        int count = -1, nw = 0;
        CHECK_OK(pbd_world_query_particles(w, q, r, got, N, &count));
        for (int i = 0; i < N; ++i) {
            float d[3] = {pos[3 * i] - q[0], pos[3 * i + 1] - q[1], pos[3 * i + 2] - q[2]};
            if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= r * r) want[nw++] = i;
        }
        CHECK_MSG(count == nw, "query %d (r %g): grid %d, brute force %d", t, (double)r, count, nw);
        if (count != nw) continue;
        qsort(got, (size_t)count, sizeof(int), cmp_int);
        for (int k = 0; k < count; ++k) CHECK(got[k] == want[k]);
        if (t == 0) CHECK(count >= 1);
    }
    int c = 0;
    CHECK_OK(pbd_world_query_particles(w, pos, 0.1f, got, 3, &c)); /* max smaller than the count */
    CHECK(c > 3);
    free(got);
    free(want);
    free(pos);
    pbd_world_destroy(w);
}

/* The solver's neighbour lists (built from the predicted positions by the
   grid every substep) equal brute force within the search radius, 3 r for
   loose particles; a jittered lattice with gaps > 2 r keeps every contact
   open, so nothing moves. The order is deterministic: the same twice. */
TEST(grid_neighbor_lists_equal_brute_force) {
    enum { S = 9, N = S * S * S };
    float r = 0.01f, pos[3 * N];
    unsigned seed = 5;
    for (int i = 0; i < N; ++i) {
        int c[3] = {i % S, (i / S) % S, i / (S * S)};
        for (int a = 0; a < 3; ++a) pos[3 * i + a] = 2.5f * r * (float)c[a] + 0.2f * r * (pbdt_rand(&seed) - 0.5f);
    }
    pbd_world *w = particle_world(pos, N, r, 0);
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < 3 * N; ++i) CHECK(x[4 * (i / 3) + i % 3] == pos[i]);
    int list[PBD_MAX_NEIGHBORS], again[PBD_MAX_NEIGHBORS], want[N];
    long total = 0;
    for (int i = 0; i < N; ++i) {
        int count = 0, nw = 0, count2 = 0;
        CHECK_OK(pbd_world_particle_neighbors(w, i, list, PBD_MAX_NEIGHBORS, &count));
        CHECK_OK(pbd_world_particle_neighbors(w, i, again, PBD_MAX_NEIGHBORS, &count2));
        CHECK(count == count2 && memcmp(list, again, sizeof(int) * (size_t)count) == 0);
        for (int j = 0; j < N; ++j) {
            float d[3] = {pos[3 * j] - pos[3 * i], pos[3 * j + 1] - pos[3 * i + 1], pos[3 * j + 2] - pos[3 * i + 2]};
            if (j != i && d[0] * d[0] + d[1] * d[1] + d[2] * d[2] < 9 * r * r) want[nw++] = j;
        }
        CHECK_MSG(count == nw, "particle %d: %d neighbours, brute force %d", i, count, nw);
        if (count != nw) continue;
        qsort(list, (size_t)count, sizeof(int), cmp_int);
        for (int k = 0; k < count; ++k) CHECK(list[k] == want[k]);
        total += count;
    }
    CHECK(total >= 2L * 3 * S * S * (S - 1)); /* at least every lattice edge, both ways */
    pbd_world_destroy(w);
}

/* Two overlapping particles of different mass are pushed apart to the sum
   of their radii, by inverse mass (the centre of mass stays). */
TEST(contact_separates_overlap_by_inverse_mass) {
    float pos[6] = {0, 0, 0, 0.03f, 0, 0};
    pbd_world *w = particle_world(pos, 2, 0.02f, 0);
    CHECK_OK(pbd_particle_set_mass(w, 1, 3.0f));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    CHECK_NEAR(x[4] - x[0], 0.04f, 1e-6f);
    CHECK_NEAR((1.0f * x[0] + 3.0f * x[4]) / 4.0f, 0.0225f, 1e-6f);
    CHECK(x[1] == 0 && x[5] == 0);
    pbd_world_destroy(w);
}

/* Two particles added at one point have no contact normal; they used to
   be skipped and stayed merged for ever (a crushed pile's or a sunk
   shape-matched body's particles too). They part along a hashed
   direction, by inverse mass, the centre of mass kept. */
TEST(contact_separates_coincident_particles) {
    float pos[6] = {0.1f, 0.2f, 0.3f, 0.1f, 0.2f, 0.3f};
    pbd_world *w = particle_world(pos, 2, 0.02f, 0);
    CHECK_OK(pbd_particle_set_mass(w, 1, 3.0f));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    float d[3] = {x[4] - x[0], x[5] - x[1], x[6] - x[2]};
    CHECK_NEAR(sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]), 0.04f, 1e-6f);
    for (int a = 0; a < 3; ++a) CHECK_NEAR((1.0f * x[a] + 3.0f * x[4 + a]) / 4.0f, pos[a], 1e-6f);
    pbd_world_destroy(w);
}

/* Contacts are internal forces: two clusters of particles of different
   masses thrown at each other in zero gravity, with friction, keep the
   total linear momentum. */
TEST(contact_momentum_conserved) {
    enum { S = 4, N = 2 * S * S * S };
    float pos[3 * N], vel[3 * N], r = 0.02f;
    unsigned seed = 9;
    for (int i = 0; i < N; ++i) {
        int c = i % (S * S * S), side = i / (S * S * S);
        float o[3] = {side ? 0.25f : 0.0f, side ? 0.03f : 0.0f, 0};
        pos[3 * i + 0] = o[0] + 2.1f * r * (float)(c % S);
        pos[3 * i + 1] = o[1] + 2.1f * r * (float)((c / S) % S);
        pos[3 * i + 2] = o[2] + 2.1f * r * (float)(c / (S * S));
        vel[3 * i + 0] = (side ? -1.5f : 1.0f) + 0.2f * (pbdt_rand(&seed) - 0.5f);
        vel[3 * i + 1] = 0.2f * (pbdt_rand(&seed) - 0.5f);
        vel[3 * i + 2] = 0.2f * (pbdt_rand(&seed) - 0.5f);
    }
    pbd_world *w = particle_world(pos, N, r, 0);
    pbd_range all = {0, N};
    CHECK_OK(pbd_particles_set_velocities(w, all, vel));
    for (int i = 0; i < N; ++i) CHECK_OK(pbd_particle_set_mass(w, i, 0.5f + pbdt_rand(&seed)));
    CHECK_OK(pbd_world_set_particle_contact_friction(w, 0.6f, 0.5f));
    double P0[3] = {0, 0, 0}, P1[3] = {0, 0, 0}, scale = 0;
    int touched = 0;
    for (int pass = 0; pass < 2; ++pass) {
        const float *v = pbd_world_velocities(w);
        for (int i = 0; i < N; ++i) {
            float m;
            pbd_particle_get_mass(w, i, &m);
            for (int a = 0; a < 3; ++a) (pass ? P1 : P0)[a] += (double)m * v[4 * i + a];
            if (!pass) scale += m * 1.5;
        }
        for (int s = 0; !pass && s < 20; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    }
    const float *v = pbd_world_velocities(w);
    for (int i = 0; i < N / 2; ++i) touched += v[4 * i] < 0.5f; /* the left cluster was slowed down */
    CHECK(touched > N / 4);
    for (int a = 0; a < 3; ++a) CHECK_NEAR(P1[a], P0[a], 1e-5 * scale);
    pbd_world_destroy(w);
}

/* A granular heap: a column of particles collapses on a rough floor.
   Without particle friction it spreads into a flat layer (a few grains
   stay in the hollows between others, held by the floor's friction: its
   top 4 radii up, 0.167 of the spread at the defaults' 12 substeps); with
   friction it keeps a slope (height over the radius holding 90% of the
   grains), and more friction gives a steeper heap: the angle of repose
   grows. */
static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : (x > y);
}
static float heap_slope(float mu) {
    enum { S = 5, H = 12, N = S * S * H };
    float r = 0.02f, pos[3 * N], radial[N];
    unsigned seed = 1;
    for (int i = 0; i < N; ++i) {
        int c[3] = {i % S, (i / S) % H, i / (S * H)};
        for (int a = 0; a < 3; ++a)
            pos[3 * i + a] = (a == 1 ? (float)c[a] + 0.55f : (float)c[a] - 0.5f * (S - 1)) * 2.2f * r +
                             0.1f * r * (pbdt_rand(&seed) - 0.5f);
    }
    pbd_world *w = particle_world(pos, N, r, -9.81f);
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, o, up, 0.8f, NULL));
    CHECK_OK(pbd_world_set_particle_contact_friction(w, mu, mu));
    for (int s = 0; s < 90; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    float top = 0;
    for (int i = 0; i < N; ++i) {
        top = x[4 * i + 1] > top ? x[4 * i + 1] : top;
        radial[i] = sqrtf(x[4 * i] * x[4 * i] + x[4 * i + 2] * x[4 * i + 2]);
    }
    qsort(radial, N, sizeof(float), cmp_float);
    pbd_world_destroy(w);
    return top / radial[N * 9 / 10];
}

TEST(granular_angle_of_repose_grows_with_friction) {
    float s0 = heap_slope(0.0f), s1 = heap_slope(0.3f), s2 = heap_slope(0.8f);
    CHECK_MSG(s0 < 0.2f, "frictionless heap slope %.3f", (double)s0);
    CHECK_MSG(s1 > 2 * s0 && s1 > 0.2f, "slope %.3f at mu 0.3 (%.3f at 0)", (double)s1, (double)s0);
    CHECK_MSG(s2 > 1.1f * s1, "slope %.3f at mu 0.8, %.3f at 0.3", (double)s2, (double)s1);
}

/* A heap of 432 grains of 1 cm poured onto the ground, at rest after
   3 s at 60 Hz with the defaults (16 substeps): the grains keep apart
   (worst overlap 3.5% of a radius), the heap stands 7 cm high and has
   stopped as a whole (mean speed 1.6 mm/s; a grain at its foot may still
   tumble, at up to 0.4 m/s, until about 15 s). The world's 4 substeps
   (granular_cfl 0, as the defaults were until 0.2) crush it: overlaps
   of 19%, a 3.7 cm pancake (pbd__grain_substeps). */
static void pour_heap(float granular_cfl, float *worst, float *top, float *mean_speed) {
    enum { S = 6, H = 12, N = S * S * H };
    float r = 0.01f, pos[3 * N];
    unsigned seed = 3;
    for (int i = 0; i < N; ++i) {
        int c[3] = {i % S, (i / S) % H, i / (S * H)};
        for (int a = 0; a < 3; ++a)
            pos[3 * i + a] = (float)c[a] * 2.6f * r + (a == 1 ? 1.5f * r : 0.2f * r * (pbdt_rand(&seed) - 0.5f));
    }
    pbd_world_desc d = pbd_world_desc_default();
    d.granular_cfl = granular_cfl;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    *worst = *top = *mean_speed = -1;
    if (!w) return;
    pbdt_add_colliding(w, pos, N, r, 0.01f);
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, o, up, 0.5f, NULL));
    for (int s = 0; s < 180; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    *worst = *top = 0;
    for (int i = 0; i < N; ++i) {
        *top = x[4 * i + 1] > *top ? x[4 * i + 1] : *top;
        for (int j = i + 1; j < N; ++j) {
            float dx = x[4 * i] - x[4 * j], dy = x[4 * i + 1] - x[4 * j + 1], dz = x[4 * i + 2] - x[4 * j + 2];
            float o2 = (2 * r - sqrtf(dx * dx + dy * dy + dz * dz)) / r;
            *worst = o2 > *worst ? o2 : *worst;
        }
    }
    const float *v = pbd_world_velocities(w);
    double sum = 0;
    for (int i = 0; i < N; ++i)
        sum += sqrt(v[4 * i] * v[4 * i] + v[4 * i + 1] * v[4 * i + 1] + v[4 * i + 2] * v[4 * i + 2]);
    *mean_speed = (float)(sum / N);
    pbd_world_destroy(w);
}

TEST(granular_heap_keeps_its_grains_apart_at_the_defaults) {
    float worst, top, mean;
    pour_heap(pbd_world_desc_default().granular_cfl, &worst, &top, &mean);
    CHECK_MSG(worst < 0.06f && top > 0.055f && mean < 0.003f,
              "defaults: worst overlap %.1f%% of a radius, top %.3f m, mean speed %.4f m/s", 100.0 * worst, (double)top,
              (double)mean);
    pour_heap(0.0f, &worst, &top, &mean); /* the world's 4 substeps */
    CHECK_MSG(worst > 0.12f && top < 0.045f, "4 substeps: worst overlap %.1f%%, top %.3f m", 100.0 * worst,
              (double)top);
}

/* A cloth (an object) dropped on a bed of loose particles lands on it:
   particle contact works across objects, and no cloth vertex ends below
   the top of the bed. The same cloth without particle collision falls
   through to the floor. */
static float cloth_lowest_over_bed(int collide, float *bed_top) {
    enum { S = 8, N = S * S * 2 };
    float r = 0.03f, pos[3 * N];
    for (int i = 0; i < N; ++i) {
        int c[3] = {i % S, (i / S) % 2, i / (S * 2)};
        for (int a = 0; a < 3; ++a) pos[3 * i + a] = ((float)c[a] + (a == 1 ? 0.5f : -0.5f * (S - 1))) * 2.0f * r;
    }
    pbd_world *w = particle_world(pos, N, r, -9.81f);
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, o, up, 0.5f, NULL));
    for (int i = 0; i < 4; ++i) { /* walls keep the bed together */
        float p[3] = {0, 0, 0}, n[3] = {0, 0, 0};
        int a = i < 2 ? 0 : 2;
        p[a] = (i % 2 ? 1.0f : -1.0f) * S * r;
        n[a] = i % 2 ? -1.0f : 1.0f;
        CHECK_OK(pbd_add_collider_plane(w, p, n, 0.5f, NULL));
    }
    pbd_mesh m;
    float mo[3] = {-0.2f, 0.25f, -0.2f}, u[3] = {0.4f, 0, 0}, v[3] = {0, 0, 0.4f};
    CHECK_OK(pbd_mesh_grid(10, 10, mo, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.thickness = 0.02f;
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &cd, &cloth));
    if (collide) CHECK_OK(pbd_object_set_particle_contact(w, cloth, 1));
    const pbd_range cp = pbdt_parts(w, cloth).particles;
    for (int s = 0; s < 60; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    float lowest = 1e30f, top = 0;
    for (int i = 0; i < N; ++i) top = x[4 * i + 1] > top ? x[4 * i + 1] : top;
    for (int i = 0; i < cp.count; ++i) {
        float y = x[4 * (cp.first + i) + 1];
        lowest = y < lowest ? y : lowest;
    }
    *bed_top = top;
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return lowest;
}

TEST(contact_cloth_lands_on_granular_bed) {
    float top_on, top_off;
    float on = cloth_lowest_over_bed(1, &top_on), off = cloth_lowest_over_bed(0, &top_off);
    CHECK_MSG(on > top_on, "cloth at %.3f, bed top %.3f", (double)on, (double)top_on);
    CHECK_MSG(off < 0.05f, "without particle collision the cloth is at %.3f", (double)off);
}

/* 1 and 2 threads, SIMD on and off: the same bits. */
/* A heavy particle on light ones (pbd.h, particle contact: the pairs'
   scale is 1 / the larger contact load): a 15.6 g grain of 2.5 cm let down
   onto a 0.2 kg hammock of 48 x 48 vertices (0.09 g each) pinned at its
   corners, all defaults, stays on it; scaled by 1 / max(contact counts)
   (the grain has tens of candidates) it fell through within 0.4 s.
   Returns the grain's height less the hammock's lowest vertex after 0.7 s. */
static float grain_on_hammock(float *grain_y) {
    enum { N = 48 };
    pbd_world *w = pbdt_world(-9.81f);
    pbd_mesh m;
    float o[3] = {-0.5f, 0.5f, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(N, N, o, u, v, &m));
    float *mass = (float *)malloc(sizeof(float) * N * N);
    for (int i = 0; i < N * N; ++i) mass[i] = 0.2f / (N * N);
    mass[0] = mass[N - 1] = mass[N * N - N] = mass[N * N - 1] = 0; /* the corners pinned */
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.masses = mass;
    pbd_object cloth;
    CHECK_OK(pbd_add_cloth(w, &cd, &cloth));
    CHECK_OK(pbd_object_set_particle_contact(w, cloth, 1));
    float at[3] = {0, 0.5f + 0.025f + 0.02f, 0};
    pbd_range grain = pbdt_add_colliding(w, at, 1, 0.025f, 0.0156f);
    CHECK(grain.count == 1);
    for (int s = 0; s < 42; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    const float *x = pbd_world_positions(w);
    float low = 1e30f;
    for (int i = 0; i < N * N; ++i) low = fminf(low, x[4 * (pbdt_parts(w, cloth).particles.first + i) + 1]);
    *grain_y = x[4 * grain.first + 1];
    free(mass);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return *grain_y - low;
}

TEST(contact_heavy_grain_stays_on_a_light_hammock) {
    LONG_SCENE();
    float y, above = grain_on_hammock(&y);
    printf("    grain 15.6 g on a 0.2 kg hammock after 0.7 s: at %.3f m, %.3f m above its lowest vertex\n", (double)y,
           (double)above);
    CHECK_MSG(above > 0.02f && y > 0.35f, "the grain is at %.3f m, %.3f m above the hammock's lowest vertex", (double)y,
              (double)above);
}

TEST(contact_threads_and_simd_bit_identical) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    enum { N = 120 };
    float pos[3 * N], r = 0.02f;
    unsigned seed = 4;
    for (int i = 0; i < 3 * N; ++i) pos[i] = 0.3f * pbdt_rand(&seed) + (i % 3 == 1 ? 0.05f : 0.0f);
    pbd_world *w[3];
    for (int k = 0; k < 3; ++k) {
        w[k] = particle_world(pos, N, r, -9.81f);
        float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
        CHECK_OK(pbd_add_collider_plane(w[k], o, up, 0.5f, NULL));
        CHECK_OK(pbd_world_set_threads(w[k], k ? 2 : 1));
        if (k == 2) CHECK_OK(pbd_world_set_simd(w[k], 0));
        for (int s = 0; s < 10; ++s) CHECK_OK(pbd_world_step(w[k], 1.0f / 60.0f));
    }
    size_t bytes = sizeof(float) * 4 * N;
    CHECK(memcmp(pbd_world_positions(w[0]), pbd_world_positions(w[1]), bytes) == 0);
    CHECK(memcmp(pbd_world_velocities(w[0]), pbd_world_velocities(w[1]), bytes) == 0);
    CHECK(memcmp(pbd_world_positions(w[0]), pbd_world_positions(w[2]), bytes) == 0);
    for (int k = 0; k < 3; ++k) pbd_world_destroy(w[k]);
}

/* The switches and the friction are part of the snapshot. */
TEST(contact_snapshot_keeps_switches_and_friction) {
    float pos[6] = {0, 0, 0, 0.03f, 0, 0};
    pbd_world *w = particle_world(pos, 2, 0.02f, 0);
    CHECK_OK(pbd_world_set_particle_contact_friction(w, 0.9f, 0.7f));
    CHECK_OK(pbd_world_set_solver(w, PBD_SOLVER_XPBD, 1, 1)); /* the lists of the one substep: from the start */
    size_t n = pbd_world_snapshot_size(w);
    unsigned char *buf = (unsigned char *)malloc(n);
    CHECK_OK(pbd_world_save(w, buf, n));
    pbd_world *b = pbdt_world(0);
    CHECK_OK(pbd_world_restore(b, buf, n));
    CHECK_OK(pbd_world_step(b, 1.0f / 60.0f));
    const float *x = pbd_world_positions(b);
    CHECK(x[4] - x[0] > 0.0399f); /* still colliding after the restore */
    int nb[4], count = 0;
    CHECK_OK(pbd_world_particle_neighbors(b, 0, nb, 4, &count));
    CHECK_MSG(count == 1 && nb[0] == 1, "%d neighbours", count);
    /* friction restored: the same snapshot saved again is byte-identical */
    CHECK_OK(pbd_world_restore(b, buf, n));
    unsigned char *again = (unsigned char *)malloc(n);
    CHECK(pbd_world_snapshot_size(b) == n);
    CHECK_OK(pbd_world_save(b, again, n));
    CHECK(memcmp(buf, again, n) == 0);
    free(buf);
    free(again);
    pbd_world_destroy(w);
    pbd_world_destroy(b);
}

/* Bad input: an error, and nothing changes. */
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

TEST(contact_bad_input_changes_nothing) {
    float pos[9] = {0, 0, 0, 0.03f, 0, 0, 1, 1, 1};
    pbd_world *w = particle_world(pos, 3, 0.02f, 0);
    pbd_range bad1 = {-1, 2}, bad2 = {2, 2}, bad3 = {0, 0};
    EXPECT_UNCHANGED(w, pbd_particles_set_particle_contact(w, bad1, 0), PBD_ERROR_INDEX_OUT_OF_RANGE);
    EXPECT_UNCHANGED(w, pbd_particles_set_particle_contact(w, bad2, 0), PBD_ERROR_INDEX_OUT_OF_RANGE);
    EXPECT_UNCHANGED(w, pbd_particles_set_particle_contact(w, bad3, 0), PBD_ERROR_INDEX_OUT_OF_RANGE);
    CHECK_RESULT(pbd_particles_set_particle_contact(NULL, bad3, 1), PBD_ERROR_NULL_POINTER);
    pbd_object no_object = {12345u}; /* the world has none */
    EXPECT_UNCHANGED(w, pbd_object_set_particle_contact(w, no_object, 1), PBD_ERROR_INVALID_HANDLE);
    EXPECT_UNCHANGED(w, pbd_world_set_particle_contact_friction(w, -0.1f, 0), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_world_set_particle_contact_friction(w, 0.2f, 0.5f), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_world_set_particle_contact_friction(w, NAN, 0), PBD_ERROR_NOT_FINITE);
    int out[4], count;
    float q[3] = {0, 0, 0}, qn[3] = {0, NAN, 0};
    EXPECT_UNCHANGED(w, pbd_world_query_particles(w, qn, 0.1f, out, 4, &count), PBD_ERROR_NOT_FINITE);
    EXPECT_UNCHANGED(w, pbd_world_query_particles(w, q, -0.1f, out, 4, &count), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_world_query_particles(w, q, NAN, out, 4, &count), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_world_query_particles(w, q, 0.1f, NULL, 4, &count), PBD_ERROR_INVALID_ARGUMENT);
    EXPECT_UNCHANGED(w, pbd_world_query_particles(w, q, 0.1f, out, 4, NULL), PBD_ERROR_NULL_POINTER);
    EXPECT_UNCHANGED(w, pbd_world_particle_neighbors(w, 3, out, 4, &count), PBD_ERROR_INDEX_OUT_OF_RANGE);
    EXPECT_UNCHANGED(w, pbd_world_particle_neighbors(w, 0, out, -1, &count), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_OK(pbd_world_query_particles(w, q, 0.1f, out, 4, &count));
    CHECK(count == 2);
    pbd_world_destroy(w);
}

void suite_particle_contact(void) {
    RUN(grid_query_equals_brute_force);
    RUN(grid_neighbor_lists_equal_brute_force);
    RUN(contact_separates_overlap_by_inverse_mass);
    RUN(contact_separates_coincident_particles);
    RUN(contact_momentum_conserved);
    RUN(granular_angle_of_repose_grows_with_friction);
    RUN(granular_heap_keeps_its_grains_apart_at_the_defaults);
    RUN(contact_cloth_lands_on_granular_bed);
    RUN(contact_heavy_grain_stays_on_a_light_hammock);
    RUN(contact_threads_and_simd_bit_identical);
    RUN(contact_snapshot_keeps_switches_and_friction);
    RUN(contact_bad_input_changes_nothing);
}
