/* bench/cloth.c - N x N cloth, XPBD distance (+ dihedral bending), pinned at
   two corners, 1/60 s steps. Prints JSON lines (see bench/bench.h).
   Build and run: make bench BENCH=cloth */
#include "bench.h"

typedef struct cloth_ctx {
    int n, bend, iterations, substeps, jacobi;
} cloth_ctx;

static pbd_world *make_cloth(void *vctx) {
    const cloth_ctx *c = (const cloth_ctx *)vctx;
    pbd_world_desc d = bench_desc();
    d.substeps = c->substeps;
    d.iterations = c->iterations;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    if (c->jacobi) pbd_world_set_jacobi(w, 1, 1.0f);
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    if (pbd_mesh_grid(c->n, c->n, o, u, v, &m) != PBD_OK) return NULL;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions;
    cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    cd.bending = c->bend ? PBD_BENDING_DIHEDRAL : PBD_BENDING_NONE;
    cd.stretch_compliance = 1e-8f;
    cd.gravity_cfl = 0; /* the substeps asked for: the solver's speed, not the cloth defaults' substep count */
    pbd_object obj;
    pbd_result r = pbd_add_cloth(w, &cd, &obj);
    pbd_mesh_free(&m);
    if (r != PBD_OK) return NULL;
    pbd_particle_pin(w, 0);
    pbd_particle_pin(w, c->n - 1);
    return w;
}

static void run(int n, int bend, int iterations, int substeps, int jacobi, int steps) {
    cloth_ctx c = {n, bend, iterations, substeps, jacobi};
    char scene[64];
    snprintf(scene, sizeof scene, "cloth%d_%s%s", n, bend ? "dist_bend" : "dist", jacobi ? "_jacobi" : "");
    bench_scene("cloth", scene, make_cloth, &c, steps);
}

int main(int argc, char **argv) {
    bench_with_cuda = 1;
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0) { /* the GPU companion's targets only */
        run(400, 1, 5, 1, 0, 5);
        run(1000, 0, 5, 1, 0, 1);
        return 0;
    }
    run(100, 0, 20, 1, 0, 20);
    run(100, 1, 20, 1, 0, 10);
    run(200, 0, 20, 1, 0, 10);
    run(200, 1, 5, 4, 0, 5);
    run(400, 0, 20, 1, 0, 5); /* the main target: >= 500 M projections/s */
    run(400, 0, 5, 4, 0, 5);  /* the same work in more, smaller substeps */
    run(400, 1, 20, 1, 0, 2);
    run(400, 1, 5, 1, 0, 5);
    run(400, 0, 20, 1, 1, 2); /* averaged Jacobi */
    if (!quick) {
        run(1000, 0, 5, 1, 0, 1);
        run(1000, 1, 5, 1, 0, 1);
    }
    return 0;
}
