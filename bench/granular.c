/* bench/granular.c - the cost of granular matter (pbd.h manual, PARTICLES,
   GRANULAR MATTER AND FLUIDS): 2000 grains of radius 1 cm (a 10 x 20 x 10
   block, 2.6 cm apart, jittered) poured onto a plane and left 2 s to
   slump into a heap, then timed at rest, with the defaults (the grains'
   substep bound pbd_world_desc.granular_cfl: 16 substeps at 60 Hz, scene
   "heap2000") and with the world's 4 substeps (granular_cfl 0, scene
   "heap2000_4substeps", the heap crushed to a 4 cm pancake: what 0.1 did).
   Prints JSON lines (see bench/bench.h); the extra key `heap_m` is the
   heap's height when the timing starts, and a fourth line per scene
   (`threads` "default") times the default thread policy
   (pbd_world_set_threads(w, 0)), which chooses 1 or 2 threads itself.
   Build and run: make bench BENCH=granular */
#include "bench.h"

typedef struct heap_ctx {
    float granular_cfl;
} heap_ctx;

static pbd_world *make_heap(void *vctx) {
    const heap_ctx *c = (const heap_ctx *)vctx;
    enum { NX = 10, NY = 20, NZ = 10, N = NX * NY * NZ };
    const float r = 0.01f;
    pbd_world_desc d = bench_desc();
    d.granular_cfl = c->granular_cfl;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    static float pos[3 * N];
    unsigned seed = 1;
    for (int i = 0; i < N; ++i) {
        int g[3] = {i % NX, (i / NX) % NY, i / (NX * NY)};
        for (int a = 0; a < 3; ++a) {
            seed = seed * 1664525u + 1013904223u;
            float jitter = a == 1 ? 0.5f * r : 0.2f * r * ((float)(seed >> 8) / 16777216.0f - 0.5f);
            pos[3 * i + a] = (float)g[a] * 2.6f * r + (a == 1 ? r : 0) + jitter;
        }
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = N;
    pd.radius = r;
    pd.mass = 0.01f;
    pbd_range range;
    float o[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (pbd_add_particles(w, &pd, &range) != PBD_OK || pbd_particles_set_particle_contact(w, range, 1) != PBD_OK ||
        pbd_add_collider_plane(w, o, up, 0.5f, NULL) != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    for (int s = 0; s < 120; ++s) pbd_world_step(w, 1.0f / 60.0f); /* poured: a heap */
    return w;
}

static void run(const char *scene, float granular_cfl) {
    heap_ctx c = {granular_cfl};
    pbd_world *w = make_heap(&c);
    if (!w) exit(1);
    const float *x = pbd_world_positions(w);
    float top = 0;
    for (int i = 0; i < pbd_world_particle_count(w); ++i) top = x[4 * i + 1] > top ? x[4 * i + 1] : top;
    pbd_world_destroy(w);
    printf("{\"bench\":\"granular\",\"scene\":\"%s\",\"heap_m\":%.3f}\n", scene, top);
    bench_scene("granular", scene, make_heap, &c, 10);
    w = make_heap(&c);
    if (!w) exit(1);
    pbd_world_set_threads(w, 0);
    double ms = bench_ms_per_step(w, 10);
    printf("{\"bench\":\"granular\",\"scene\":\"%s\",\"path\":\"%s\",\"threads\":\"default\","
           "\"team\":%d,\"ms_per_step\":%.3f}\n",
           scene, pbd_simd_path(), pbd_world_thread_team(w), ms);
    pbd_world_destroy(w);
}

int main(void) {
    run("heap2000", pbd_world_desc_default().granular_cfl);
    run("heap2000_4substeps", 0.0f);
    return 0;
}
