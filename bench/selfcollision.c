/* bench/selfcollision.c - the cost of cloth self-collision: a 100 x 100
   cloth (1 m, 2 mm thickness, a fifth of an edge) dropped over a sphere
   onto the ground, stepped with and without self-collision (4 substeps x
   4 iterations, 1/60 s steps), from two states reached with
   self-collision on:
     - drape: the flat cloth after 1 s, still falling over the sphere (the
       speed limit of self-collision holds it to a thickness per substep);
       many in-sheet neighbours within the padding, no contact yet;
     - folded: the cloth folded in half (two layers 1.5 thicknesses
       apart, the fold its rest shape) after 2 s, draped over the sphere
       with its layers pressed together: about 5 000 active contacts.
   Both runs of a state start from the same positions and velocities, so
   the ratio is the cost of self-collision for the same cloth. The states
   are stepped once (1 thread) and reused by every run. Prints JSON lines
   (see bench/bench.h); the target: self-collision at most doubles
   the cost of a step.
   Build and run: make bench BENCH=selfcollision */
#include "bench.h"

typedef struct sc_ctx {
    int n, self, folded, drape;
} sc_ctx;

/* Rows n/2 and up of an n x n grid laid back over the others, `gap` above. */
static void fold_in_half(pbd_mesh *m, int n, float gap) {
    for (int j = n / 2; j < n; ++j)
        for (int i = 0; i < n; ++i) {
            float *p = m->positions + 3 * ((size_t)j * n + i), *q = m->positions + 3 * ((size_t)(n - 1 - j) * n + i);
            p[1] = q[1] + gap;
            p[2] = q[2];
        }
}

static pbd_world *build(int n, int self, int folded) {
    pbd_world_desc d = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float o[3] = {-0.3f, 0.35f, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    if (folded) {
        o[0] = -0.5f;
        o[1] = 0.3f;
        o[2] = -0.25f;
    }
    pbd_mesh m;
    if (pbd_mesh_grid(n, n, o, u, v, &m) != PBD_OK) return NULL;
    if (folded) fold_in_half(&m, n, 1.5f * 0.002f);
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions;
    cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    cd.bending_compliance = 1e-3f;
    cd.thickness = 0.002f;
    pbd_object obj;
    pbd_result r = pbd_add_cloth(w, &cd, &obj);
    if (r == PBD_OK && self) r = pbd_add_cloth_self_collision(w, obj, &cd, 0.002f, NULL);
    pbd_mesh_free(&m);
    float ctr[3] = {0, 0, 0}, p[3] = {0, -0.2f, 0}, nrm[3] = {0, 1, 0};
    if (r == PBD_OK) r = pbd_add_collider_sphere(w, ctr, 0.2f, 0.3f, NULL);
    if (r == PBD_OK) r = pbd_add_collider_plane(w, p, nrm, 0.5f, NULL);
    if (r != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

/* The positions and velocities (3 floats each) after c->drape steps with
   self-collision, computed once per scene. */
static const float *drape_state(const sc_ctx *c) {
    static float *state[2];
    int k = c->folded != 0;
    if (state[k]) return state[k];
    pbd_world *w = build(c->n, 1, c->folded);
    if (!w) return NULL;
    int count = pbd_world_particle_count(w);
    float *s = (float *)malloc(sizeof(float) * 6 * (size_t)count);
    pbd_range all = {0, count};
    pbd_world_set_threads(w, 1);
    for (int i = 0; i < c->drape; ++i) pbd_world_step(w, 1.0f / 60.0f);
    int ok = s && pbd_particles_get_positions(w, all, s) == PBD_OK &&
             pbd_particles_get_velocities(w, all, s + 3 * count) == PBD_OK;
    pbd_world_destroy(w);
    if (!ok) {
        free(s);
        return NULL;
    }
    state[k] = s;
    return s;
}

/* One line per saved state: its mean height and speed. The states are
   stepped with the code under test, so a change that alters the physics
   alters them, and with them what the timed runs measure (issue 21: a
   clamp that held cloth on the sphere made both scenes stiller, and
   cheaper): compare these before comparing times. */
static void print_state(const sc_ctx *c, const char *scene) {
    const float *s = drape_state(c);
    pbd_world *w = s ? build(c->n, 0, c->folded) : NULL;
    if (!w) return;
    int n = pbd_world_particle_count(w);
    double y = 0, v = 0;
    for (int i = 0; i < n; ++i) {
        const float *q = s + 3 * (size_t)n + 3 * (size_t)i;
        y += s[3 * (size_t)i + 1] / n;
        v += sqrt((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]) / n;
    }
    printf("{\"bench\":\"selfcollision\",\"scene\":\"%s\",\"state_steps\":%d,\"state_mean_height\":%.5f,"
           "\"state_mean_speed\":%.5f}\n",
           scene, c->drape, y, v);
    pbd_world_destroy(w);
}

static pbd_world *make_scene(void *vctx) {
    const sc_ctx *c = (const sc_ctx *)vctx;
    const float *s = drape_state(c);
    pbd_world *w = s ? build(c->n, c->self, c->folded) : NULL;
    if (!w) return NULL;
    int count = pbd_world_particle_count(w);
    pbd_range all = {0, count};
    if (pbd_particles_set_positions(w, all, s) != PBD_OK ||
        pbd_particles_set_velocities(w, all, s + 3 * count) != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

int main(int argc, char **argv) {
    bench_with_cuda = 1;
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0, steps = quick ? 3 : 10;
    sc_ctx drape = {100, 0, 0, 60}, drape_self = {100, 1, 0, 60}, folded = {100, 0, 1, 120},
           folded_self = {100, 1, 1, 120};
    if (!bench_skip("cloth100_drape", 0)) print_state(&drape_self, "cloth100_drape");
    bench_scene("selfcollision", "cloth100_drape", make_scene, &drape, steps);
    bench_scene("selfcollision", "cloth100_drape_self", make_scene, &drape_self, steps);
    if (quick) return 0;
    if (!bench_skip("cloth100_folded", 0)) print_state(&folded_self, "cloth100_folded");
    bench_scene("selfcollision", "cloth100_folded", make_scene, &folded, steps);
    bench_scene("selfcollision", "cloth100_folded_self", make_scene, &folded_self, steps);
    return 0;
}
