/* bench/selfcollision.c - the cost of cloth self-collision: a 100 x 100
   cloth (1 m, 2 mm thickness, a fifth of an edge) draped over a sphere and folding onto the
   ground, stepped with and without self-collision (4 substeps x 4
   iterations, 1/60 s steps). The scenes are stepped 60 steps (1 s) before
   timing, so the cloth is in contact with itself. Prints JSON lines (see
   bench/bench.h); the target: self-collision at most doubles the
   cost of a step.
   Build and run: make bench BENCH=selfcollision */
#include "bench.h"

typedef struct sc_ctx { int n, self; } sc_ctx;

static pbd_world *make_scene(void *vctx) {
    const sc_ctx *c = (const sc_ctx *)vctx;
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float o[3] = {-0.3f, 0.35f, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    if (pbd_mesh_grid(c->n, c->n, o, u, v, &m) != PBD_OK) return NULL;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions; cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles; cd.triangle_count = m.triangle_count;
    cd.bending_compliance = 1e-3f;
    cd.thickness = 0.002f;
    pbd_object obj;
    pbd_result r = pbd_add_cloth(w, &cd, &obj);
    if (r == PBD_OK && c->self) r = pbd_add_cloth_self_collision(w, &obj, &cd, 0.002f, NULL);
    pbd_mesh_free(&m);
    float ctr[3] = {0, 0, 0}, p[3] = {0, -0.2f, 0}, n[3] = {0, 1, 0};
    if (r == PBD_OK) r = pbd_add_collider_sphere(w, ctr, 0.2f, 0.3f, NULL);
    if (r == PBD_OK) r = pbd_add_collider_plane(w, p, n, 0.5f, NULL);
    if (r != PBD_OK) return NULL;
    pbd_world_set_threads(w, 1);
    for (int s = 0; s < 60; ++s) pbd_world_step(w, 1.0f / 60.0f); /* drape it */
    return w;
}

int main(int argc, char **argv) {
    int steps = argc > 1 && strcmp(argv[1], "--quick") == 0 ? 3 : 10;
    sc_ctx off = {100, 0}, on = {100, 1};
    bench_scene("selfcollision", "cloth100_sphere", make_scene, &off, steps);
    bench_scene("selfcollision", "cloth100_sphere_self", make_scene, &on, steps);
    return 0;
}
