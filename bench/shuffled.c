/* bench/shuffled.c - the 400 x 400 cloth (distance + dihedral bending) with
   its vertices in random order, as a real mesh from a file may be, with and
   without pbd_cloth_desc.reorder (Morton order), next to the grid's own
   order. Prints JSON lines (see bench/bench.h).
   Build and run: make bench BENCH=shuffled */
#include "bench.h"

typedef struct shuffled_ctx {
    int n, shuffle, reorder;
} shuffled_ctx;

static pbd_world *make_shuffled(void *vctx) {
    const shuffled_ctx *c = (const shuffled_ctx *)vctx;
    pbd_world_desc d = bench_desc();
    d.substeps = 1;
    d.iterations = 10;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    if (pbd_mesh_grid(c->n, c->n, o, u, v, &m) != PBD_OK) return NULL;
    int nv = m.vertex_count;
    int *perm = (int *)malloc(sizeof(int) * (size_t)nv);
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)nv);
    for (int i = 0; i < nv; ++i) perm[i] = i;
    unsigned s = 12345;
    for (int i = nv - 1; c->shuffle && i > 0; --i) { /* Fisher-Yates */
        s = s * 1664525u + 1013904223u;
        int j = (int)((s >> 8) % (unsigned)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < nv; ++i) memcpy(pos + 3 * perm[i], m.positions + 3 * i, 3 * sizeof(float));
    for (int k = 0; k < 3 * m.triangle_count; ++k) m.triangles[k] = perm[m.triangles[k]];
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = pos;
    cd.vertex_count = nv;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    cd.stretch_compliance = 1e-8f;
    cd.reorder = c->reorder;
    pbd_object obj;
    pbd_result r = pbd_add_cloth(w, &cd, &obj);
    pbd_mesh_free(&m);
    free(perm);
    free(pos);
    return r == PBD_OK ? w : NULL;
}

int main(void) {
    shuffled_ctx grid = {400, 0, 0}, shuffled = {400, 1, 0}, reordered = {400, 1, 1};
    bench_scene("shuffled", "cloth400_grid_order", make_shuffled, &grid, 2);
    bench_scene("shuffled", "cloth400_shuffled", make_shuffled, &shuffled, 2);
    bench_scene("shuffled", "cloth400_shuffled_reordered", make_shuffled, &reordered, 2);
    return 0;
}
