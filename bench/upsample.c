/* bench/upsample.c - evaluation speed of the upsamplers of pbd_upsample.h
   (subdivision, wrinkle meshes, PIU, WPSD, PDM) for a detail mesh of about
   10 000 vertices (the cape size of Kavan et al. 2011) and about 100 000,
   scalar vs SIMD and 1 vs 2 threads in the same run. The coarse mesh is a
   grid, the detail mesh its Loop subdivision (2 levels); the learned
   methods are fitted to synthetic frames of a deforming sheet with
   wrinkles (fitting is not timed). JSON lines: bench, method,
   coarse_vertices, detail_vertices, path, threads, ms_per_eval (median of
   BENCH_RUNS runs), vertices_per_s. The models also get a path=cuda
   line (pbd_cuda.cu, a GPU model evaluating a GPU world's
   particles; issue 22's target: PIU at 5 G detail vertices/s on the
   100 489-vertex mesh), or one saying why they skip it.
   Build and run: make bench BENCH=upsample  (--quick: the small mesh only) */
#include "bench.h"
#define PBD_UPSAMPLE_IMPLEMENTATION
#include "../pbd_upsample.h"
#include <math.h>

typedef struct sheet {
    int nc, nd, frames;
    pbd_mesh grid, fine;
    pbd_up_model *sub;
    float *u, *X;
} sheet;

/* A sheet deformed by smooth fields with random amplitudes, plus wrinkles
   on the detail mesh driven by the same amplitudes. */
static void sheet_point(const float *a, float s, float t, int detail, float *p) {
    const float pi = 3.14159265f;
    p[0] = s + 0.08f * a[0] * sinf(pi * t);
    p[1] = 0.25f * a[1] * sinf(pi * s) * sinf(pi * t) + 0.15f * a[2] * cosf(pi * s) + 0.1f * a[3] * s * t;
    p[2] = t + 0.08f * a[4] * sinf(pi * s);
    if (detail) p[1] += 0.01f * (a[1] + 0.5f * a[2]) * sinf(12.0f * pi * s) * sinf(pi * t);
}

static int sheet_make(sheet *sh, int n, int frames) {
    float o[3] = {0, 0, 0}, du[3] = {1, 0, 0}, dv[3] = {0, 0, 1};
    unsigned seed = 12345;
    memset(sh, 0, sizeof *sh);
    if (pbd_mesh_grid(n, n, o, du, dv, &sh->grid) != PBD_OK) return 0;
    if (pbd_up_mesh_subdivide(&sh->grid, 2, 0, &sh->fine) != PBD_OK) return 0;
    if (pbd_up_subdivision_create(sh->grid.triangles, sh->grid.triangle_count, sh->grid.vertex_count, 2, &sh->sub) !=
        PBD_OK)
        return 0;
    sh->nc = sh->grid.vertex_count;
    sh->nd = sh->fine.vertex_count;
    sh->frames = frames;
    sh->u = (float *)malloc(sizeof(float) * 3 * (size_t)sh->nc * frames);
    sh->X = (float *)malloc(sizeof(float) * 3 * (size_t)sh->nd * frames);
    for (int f = 0; f < frames; ++f) {
        float a[6] = {0};
        for (int k = 0; k < 6 && f > 0; ++k) {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            a[k] = (float)(seed >> 8) * (2.0f / 16777216.0f) - 1.0f;
        }
        for (int v = 0; v < sh->nc; ++v)
            sheet_point(a, sh->grid.positions[3 * v], sh->grid.positions[3 * v + 2], 0,
                        sh->u + ((size_t)f * sh->nc + v) * 3);
        for (int i = 0; i < sh->nd; ++i)
            sheet_point(a, sh->fine.positions[3 * i], sh->fine.positions[3 * i + 2], 1,
                        sh->X + ((size_t)f * sh->nd + i) * 3);
    }
    return 1;
}

static void sheet_free(sheet *sh) {
    pbd_mesh_free(&sh->grid);
    pbd_up_mesh_free(&sh->fine);
    pbd_up_model_destroy(sh->sub);
    free(sh->u);
    free(sh->X);
}

typedef pbd_result (*eval_fn)(void *obj, const float *u, float *out);
typedef void (*config_fn)(void *obj, int simd, int threads);

static pbd_result model_eval(void *obj, const float *u, float *out) {
    return pbd_up_model_eval((pbd_up_model *)obj, u, out);
}
static void model_config(void *obj, int simd, int threads) {
    pbd_up_model_set_simd((pbd_up_model *)obj, simd);
    pbd_up_model_set_threads((pbd_up_model *)obj, threads);
}
static pbd_result wrinkle_eval(void *obj, const float *u, float *out) {
    return pbd_up_wrinkle_update((pbd_up_wrinkle *)obj, u, out);
}
static void wrinkle_config(void *obj, int simd, int threads) {
    pbd_up_wrinkle_set_simd((pbd_up_wrinkle *)obj, simd);
    pbd_up_wrinkle_set_threads((pbd_up_wrinkle *)obj, threads);
}

/* Median ms per evaluation; the coarse input cycles through the frames. */
static double time_evals(void *obj, eval_fn eval, const sheet *sh, float *out) {
    double t0 = bench_now();
    eval(obj, sh->u, out); /* warm-up */
    double once = bench_now() - t0;
    int reps = once > 0 ? (int)(0.02 / once) : 1000;
    if (reps < 3) reps = 3;
    if (reps > 5000) reps = 5000;
    double t[BENCH_RUNS];
    for (int r = 0; r < BENCH_RUNS; ++r) {
        double a = bench_now();
        for (int k = 0; k < reps; ++k)
            if (eval(obj, sh->u + (size_t)(k % sh->frames) * sh->nc * 3, out) != PBD_OK) {
                fprintf(stderr, "upsample: evaluation failed\n");
                exit(1);
            }
        t[r] = (bench_now() - a) * 1e3 / reps;
    }
    qsort(t, BENCH_RUNS, sizeof t[0], bench_cmp_double);
    return t[BENCH_RUNS / 2];
}

static void measure(const char *method, void *obj, eval_fn eval, config_fn config, const sheet *sh) {
    struct {
        int simd, threads;
    } cfg[3] = {{0, 1}, {1, 1}, {1, 2}};
    float *out = (float *)malloc(sizeof(float) * 3 * (size_t)sh->nd);
    for (int k = 0; k < 3; ++k) {
        if (cfg[k].threads > 1 && pbd_max_threads() == 1) continue;
        config(obj, cfg[k].simd, cfg[k].threads);
        double ms = time_evals(obj, eval, sh, out);
        printf("{\"bench\":\"upsample\",\"method\":\"%s\",\"coarse_vertices\":%d,\"detail_vertices\":%d,"
               "\"path\":\"%s\",\"threads\":%d,\"ms_per_eval\":%.4f,\"vertices_per_s\":%.4g}\n",
               method, sh->nc, sh->nd, cfg[k].simd ? pbd_simd_path() : "scalar", cfg[k].threads, ms,
               (double)sh->nd / (ms * 1e-3));
        fflush(stdout);
    }
    free(out);
}

/* The GPU line (pbd_cuda.cu): the model on the device, evaluated from a
   GPU world holding frame 0's coarse vertices as particles
   (pbd_up_model_eval_world); each run ends with a read of one float,
   which waits for the device. The CPU lines of the same run are the
   ratio's other side. */
static void measure_gpu(const char *method, pbd_up_model *m, const sheet *sh) {
    const char *skip = "built without PBD_CUDA (make bench builds with it where nvcc exists)";
#ifdef PBD_CUDA
    pbd_world *w = NULL;
    bench_device = PBD_DEVICE_GPU;
    pbd_world_desc d = bench_desc();
    bench_device = PBD_DEVICE_CPU;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = sh->u;
    pd.count = sh->nc;
    pd.mass = 0; /* pinned: the evaluation's input stays put */
    skip = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK || pbd_world_device(w) != PBD_DEVICE_GPU)
        skip = w ? "no GPU world" : pbd_last_error();
    else if (pbd_add_particles(w, &pd, NULL) != PBD_OK || pbd_up_model_set_device(m, PBD_DEVICE_GPU) != PBD_OK)
        skip = pbd_last_error()[0] ? pbd_last_error() : pbd_world_last_error(w);
    if (!skip) {
        const float *detail = NULL;
        float probe;
        double t[BENCH_RUNS];
        int reps = 200;
        pbd_up_model_eval_world(m, w, 0, &detail); /* warm-up */
        for (int r = 0; r < BENCH_RUNS; ++r) {
            double a = bench_now();
            for (int k = 0; k < reps; ++k) pbd_up_model_eval_world(m, w, 0, &detail);
            pbd__cuda_read(&probe, detail, sizeof probe);
            t[r] = (bench_now() - a) * 1e3 / reps;
        }
        qsort(t, BENCH_RUNS, sizeof t[0], bench_cmp_double);
        double ms = t[BENCH_RUNS / 2];
        printf("{\"bench\":\"upsample\",\"method\":\"%s\",\"coarse_vertices\":%d,\"detail_vertices\":%d,"
               "\"path\":\"cuda\",\"threads\":0,\"ms_per_eval\":%.4f,\"vertices_per_s\":%.4g}\n",
               method, sh->nc, sh->nd, ms, (double)sh->nd / (ms * 1e-3));
        pbd_up_model_set_device(m, PBD_DEVICE_CPU);
    }
    pbd_world_destroy(w);
    if (!skip) return;
#else
    (void)m;
#endif
    printf("{\"bench\":\"upsample\",\"method\":\"%s\",\"detail_vertices\":%d,\"path\":\"cuda\",\"skipped\":\"%s\"}\n",
           method, sh->nd, skip);
}

static void run(int n, int frames) {
    sheet sh;
    if (!sheet_make(&sh, n, frames)) {
        fprintf(stderr, "upsample: could not build the sheet\n");
        exit(1);
    }
    measure("subdivision", sh.sub, model_eval, model_config, &sh);
    measure_gpu("subdivision", sh.sub, &sh);

    pbd_up_wrinkle_desc wd = pbd_up_wrinkle_desc_default();
    wd.coarse_positions = sh.u;
    wd.coarse_count = sh.nc;
    wd.coarse_triangles = sh.grid.triangles;
    wd.coarse_triangle_count = sh.grid.triangle_count;
    wd.fine_positions = sh.X;
    wd.fine_count = sh.nd;
    wd.fine_triangles = sh.fine.triangles;
    wd.fine_triangle_count = sh.fine.triangle_count;
    pbd_up_wrinkle *wr = NULL;
    if (pbd_up_wrinkle_create(&wd, &wr) == PBD_OK) {
        measure("wrinkle", wr, wrinkle_eval, wrinkle_config, &sh);
        pbd_up_wrinkle_destroy(wr);
    }

    pbd_up_model *m = NULL;
    pbd_up_piu_desc pd = pbd_up_piu_desc_default();
    pd.coarse_count = sh.nc;
    pd.detail_count = sh.nd;
    pd.frame_count = sh.frames;
    pd.coarse_frames = sh.u;
    pd.detail_frames = sh.X;
    pd.subdivision = sh.sub;
    if (pbd_up_piu_fit(&pd, &m) == PBD_OK) {
        measure("piu", m, model_eval, model_config, &sh);
        measure_gpu("piu", m, &sh);
    }
    pbd_up_model_destroy(m);
    m = NULL;

    pbd_up_wpsd_desc ws = pbd_up_wpsd_desc_default();
    ws.subdivision = sh.sub;
    ws.coarse_triangles = sh.grid.triangles;
    ws.coarse_triangle_count = sh.grid.triangle_count;
    ws.frame_count = sh.frames;
    ws.coarse_count = sh.nc;
    ws.detail_count = sh.nd;
    ws.coarse_frames = sh.u;
    ws.detail_frames = sh.X;
    ws.max_poses = 6;
    if (pbd_up_wpsd_fit(&ws, &m) == PBD_OK) {
        measure("wpsd", m, model_eval, model_config, &sh);
        measure_gpu("wpsd", m, &sh);
    }
    pbd_up_model_destroy(m);
    m = NULL;

    pbd_up_pdm_desc pm = pbd_up_pdm_desc_default();
    pm.subdivision = sh.sub;
    pm.coarse_triangles = sh.grid.triangles;
    pm.coarse_triangle_count = sh.grid.triangle_count;
    pm.frame_count = sh.frames;
    pm.coarse_count = sh.nc;
    pm.detail_count = sh.nd;
    pm.coarse_frames = sh.u;
    pm.detail_frames = sh.X;
    if (pbd_up_pdm_fit(&pm, &m) == PBD_OK) {
        measure("pdm", m, model_eval, model_config, &sh);
        measure_gpu("pdm", m, &sh);
    }
    pbd_up_model_destroy(m);
    sheet_free(&sh);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    run(26, 12);             /* 26^2 = 676 coarse, 101^2 = 10201 detail vertices */
    if (!quick) run(80, 12); /* 6400 coarse, 317^2 = 100489 detail */
    return 0;
}
