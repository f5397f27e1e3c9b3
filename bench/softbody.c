/* bench/softbody.c - tetrahedral bars of nx x ny x nz nodes (5 tets per
   cell), XPBD distance on the edges + tet volume, one end pinned, 1/60 s
   steps. Prints JSON lines (see bench/bench.h).
   Build and run: make bench BENCH=softbody */
#include "bench.h"

typedef struct bar_ctx {
    int nx, ny, nz, iterations, substeps;
} bar_ctx;

static pbd_world *make_bar(void *vctx) {
    const bar_ctx *c = (const bar_ctx *)vctx;
    pbd_world_desc d = bench_desc();
    d.substeps = c->substeps;
    d.iterations = c->iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float h = 0.05f;
    float lo[3] = {0, 0, 0}, hi[3] = {h * (c->nx - 1), h * (c->ny - 1), h * (c->nz - 1)};
    pbd_mesh m;
    if (pbd_mesh_tet_box(c->nx, c->ny, c->nz, lo, hi, &m) != PBD_OK) return NULL;
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = m.positions;
    sd.vertex_count = m.vertex_count;
    sd.tets = m.tets;
    sd.tet_count = m.tet_count;
    sd.edge_compliance = 1e-7f;
    pbd_object obj;
    pbd_result r = pbd_add_softbody(w, &sd, &obj);
    if (r == PBD_OK)
        for (int i = 0; i < m.vertex_count; ++i)
            if (m.positions[3 * i] == 0.0f) pbd_particle_pin(w, i); /* clamp the x = 0 end */
    pbd_mesh_free(&m);
    return r == PBD_OK ? w : NULL;
}

static void run(int nx, int ny, int nz, int iterations, int substeps, int steps) {
    bar_ctx c = {nx, ny, nz, iterations, substeps};
    char scene[64];
    snprintf(scene, sizeof scene, "softbody%dx%dx%d", nx, ny, nz);
    bench_scene("softbody", scene, make_bar, &c, steps);
}

int main(void) {
    run(30, 10, 10, 10, 2, 10);
    run(60, 20, 20, 10, 2, 3);
    return 0;
}
