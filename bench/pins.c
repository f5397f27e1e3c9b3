/* bench/pins.c - the cost of pinning a cloth: its tethers (pbd_cloth_desc.tethers,
   long range attachments to the two nearest anchors) are rebuilt at every call
   that changes its anchors, so a row pinned one pbd_particle_pin at a time
   costs one rebuild per pin, and pbd_particles_pin over the row one rebuild.
   Scenes: N x N cloths (N = 100, 200) with both end rows pinned (2N pins),
   flat (straight tethers: the anchors' k-d tree) and with a small out-of-plane
   jitter (tethers along the mesh: one labelled Dijkstra per rebuild). The
   rebuild runs on one thread with no SIMD kernel, so each line is the scalar
   path on 1 thread; ms is the median of 3 builds of the world (extra keys
   `pins`, `calls` "one_by_one" or "range", `ms`, and per scene `ratio`). */
#include "bench.h"

static pbd_world *pins_cloth(int n, float jitter, pbd_mesh *m) {
    pbd_world_desc wd = bench_desc();
    pbd_world *w = NULL;
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    if (pbd_world_create(&wd, &w) != PBD_OK || pbd_mesh_grid(n, n, o, u, v, m) != PBD_OK) exit(1);
    for (int i = 0; i < m->vertex_count; ++i) m->positions[3 * i + 1] += jitter * (float)((i * 7919) % 101) / 101.0f;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m->positions;
    cd.vertex_count = m->vertex_count;
    cd.triangles = m->triangles;
    cd.triangle_count = m->triangle_count;
    if (pbd_add_cloth(w, &cd, NULL) != PBD_OK) exit(1);
    return w;
}

/* ms to pin rows 0 and n - 1 of a fresh cloth, one call per pin or one per row. */
static double pins_ms(int n, float jitter, int range) {
    double t[3];
    for (int run = 0; run < 3; ++run) {
        pbd_mesh m;
        pbd_world *w = pins_cloth(n, jitter, &m);
        double t0 = bench_now();
        for (int row = 0; row < 2; ++row) {
            pbd_range r = {row * n * (n - 1), n};
            if (range && pbd_particles_pin(w, r) != PBD_OK) exit(1);
            for (int i = 0; !range && i < n; ++i)
                if (pbd_particle_pin(w, r.first + i) != PBD_OK) exit(1);
        }
        t[run] = 1e3 * (bench_now() - t0);
        pbd_world_destroy(w);
        pbd_mesh_free(&m);
    }
    qsort(t, 3, sizeof t[0], bench_cmp_double);
    return t[1];
}

int main(void) {
    for (int n = 100; n <= 200; n += 100)
        for (int curved = 0; curved < 2; ++curved) {
            char scene[64];
            snprintf(scene, sizeof scene, "pins_%dx%d_%s", n, n, curved ? "curved" : "flat");
            if (bench_skip(scene, 0)) continue;
            double one = pins_ms(n, curved ? 0.01f : 0.0f, 0), row = pins_ms(n, curved ? 0.01f : 0.0f, 1);
            for (int k = 0; k < 2; ++k)
                printf("{\"bench\":\"pins\",\"scene\":\"%s\",\"particles\":%d,\"path\":\"scalar\",\"threads\":1,"
                       "\"pins\":%d,\"calls\":\"%s\",\"ms\":%.1f}\n",
                       scene, n * n, 2 * n, k ? "range" : "one_by_one", k ? row : one);
            printf("{\"bench\":\"pins\",\"scene\":\"%s\",\"ratio\":%.1f}\n", scene, one / row);
            fflush(stdout);
        }
    return 0;
}
