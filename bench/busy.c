/* bench/busy.c - threads on a busy machine: per-step time of a few scenes
   built with the library's defaults, on 1 thread, on 2 threads and with
   the default thread policy (pbd_world_set_threads(w, 0)), each while the
   machine is otherwise idle and while a busy-loop process that this bench
   starts keeps one core saturated, all in the same run.

   Scenes (every setting at its default, 1/60 s steps):
     - cloth100: a 100 x 100, 1 m cloth hanging from two corners;
     - dam16000: 16 000 PBF particles (40 x 20 x 20, spacing 2.5 cm) in a
       plane-collider tank;
     - softbody30x10x10: a tetrahedral bar clamped at one end.

   Method: every (load, threads) pair steps its own world of the scene, all
   built alike and stepped in lockstep, so that each timing sees the same
   state. The busy-loop child is forked once, stopped (SIGSTOP) for the idle
   phases and continued (SIGCONT) for the busy ones, and killed at exit,
   also on the error paths (atexit, SIGINT/SIGTERM, and on Linux
   PR_SET_PDEATHSIG should this process die by a signal). The run: warm-up
   steps (timed: `warm_ms_per_step`, which includes the default policy's
   first probes), then BUSY_RUNS rounds of: idle phase (1, 2, default
   threads), busy phase (1, 2, default threads), `steps` steps each;
   ms_per_step is the median over the rounds. Alternating the phases
   keeps the ratios of a round comparable on a machine that other work
   shares. The child is not pinned (no taskset): the scheduler places it,
   as it places a game's other threads.

   JSON lines: the keys of bench/bench.h plus `load` ("idle", "busy"),
   `threads` (0 = the default policy) and `warm_ms_per_step`; then one line
   per scene and load with the ratios `two_over_one` and
   `default_over_one` (the target: default_over_one <= 1.3 when
   busy; on an idle machine the default keeps the speed-up of 2 threads).
   Build and run: make bench BENCH=busy (or build/.../bench/busy [--quick]
   [--scene NAME] [--runs N]) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* fork, kill, sigaction, nanosleep */
#endif
#include "bench.h"
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

/* --- the busy-loop child --------------------------------------------------- */

static volatile pid_t busy_pid = 0;

static void busy_kill(void) {
    pid_t p = busy_pid;
    if (p > 0) {
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
        busy_pid = 0;
    }
}

static void busy_on_signal(int sig) {
    pid_t p = busy_pid;
    if (p > 0) kill(p, SIGKILL); /* async-signal-safe; the re-raised signal ends us */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Forks the spinning child, stopped. Exits when it cannot. */
static void busy_start(void) {
    pid_t parent = getpid();
    pid_t p = fork();
    if (p < 0) {
        perror("busy: fork");
        exit(1);
    }
    if (p == 0) {
#if defined(__linux__)
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* die with the parent, whatever kills it */
#endif
        if (getppid() != parent) _exit(0); /* the parent died before prctl */
        volatile unsigned long spin = 0;
        for (;;) spin = spin + 1;
    }
    busy_pid = p;
    atexit(busy_kill);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = busy_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    kill(p, SIGSTOP);
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* busy 1: the child spins; 0: it is stopped. */
static void busy_set(int busy) {
    if (busy_pid > 0) kill(busy_pid, busy ? SIGCONT : SIGSTOP);
    sleep_ms(20); /* let the scheduler settle */
}

/* --- scenes ------------------------------------------------------------------ */

static pbd_world *make_cloth(void) {
    pbd_world_desc d = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    if (pbd_mesh_grid(100, 100, o, u, v, &m) != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions;
    cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    pbd_result r = pbd_add_cloth(w, &cd, NULL);
    pbd_mesh_free(&m);
    if (r == PBD_OK) r = pbd_particle_pin(w, 0);
    if (r == PBD_OK) r = pbd_particle_pin(w, 99);
    if (r != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

static pbd_world *make_fluid(void) {
    enum { NX = 40, NY = 20, NZ = 20 };
    pbd_world_desc d = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    const float s = 0.025f, sx = 2.0f * NX * s, sz = NZ * s;
    float planes[5][6] = {
        {0, 0, 0, 0, 1, 0}, {0, 0, 0, 1, 0, 0}, {sx, 0, 0, -1, 0, 0}, {0, 0, 0, 0, 0, 1}, {0, 0, sz, 0, 0, -1}};
    for (int k = 0; k < 5; ++k) pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.1f, NULL);
    int n = NX * NY * NZ;
    float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)n);
    if (!pos) {
        pbd_world_destroy(w);
        return NULL;
    }
    for (int i = 0; i < n; ++i) {
        pos[3 * i + 0] = (0.5f + (float)(i % NX)) * s;
        pos[3 * i + 1] = (0.5f + (float)((i / NX) % NY)) * s;
        pos[3 * i + 2] = (0.5f + (float)(i / (NX * NY))) * s;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = pos;
    fd.count = n;
    fd.spacing = s;
    pbd_result r = pbd_add_fluid(w, &fd, NULL, NULL);
    free(pos);
    if (r != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

static pbd_world *make_softbody(void) {
    pbd_world_desc d = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    float lo[3] = {0, 1, 0}, hi[3] = {1.45f, 1.45f, 0.45f};
    pbd_mesh m;
    if (pbd_mesh_tet_box(30, 10, 10, lo, hi, &m) != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = m.positions;
    sd.vertex_count = m.vertex_count;
    sd.tets = m.tets;
    sd.tet_count = m.tet_count;
    pbd_result r = pbd_add_softbody(w, &sd, NULL);
    for (int i = 0; r == PBD_OK && i < m.vertex_count; ++i)
        if (m.positions[3 * i] == 0.0f) r = pbd_particle_pin(w, i); /* clamp the x = 0 end */
    pbd_mesh_free(&m);
    if (r != PBD_OK) {
        pbd_world_destroy(w);
        return NULL;
    }
    return w;
}

typedef struct scene {
    const char *name;
    pbd_world *(*make)(void);
    int warm, steps;
} scene;

/* --- measurement -------------------------------------------------------------- */

enum { NCFG = 3, MAX_CHUNKS = 64 };
static const int cfg_threads[NCFG] = {1, 2, 0};

static double time_steps(pbd_world *w, int steps, double *worst) {
    double t0 = bench_now(), start = t0;
    for (int s = 0; s < steps; ++s) {
        if (pbd_world_step(w, 1.0f / 60.0f) != PBD_OK) {
            fprintf(stderr, "busy: step failed: %s\n", pbd_world_last_error(w));
            exit(1);
        }
        double t1 = bench_now();
        if (worst && t1 - t0 > *worst) *worst = t1 - t0;
        t0 = t1;
    }
    return (bench_now() - start) * 1e3 / steps;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof t[0], bench_cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* One scene: worlds[load][cfg]; the 1- and 2-thread worlds warm up on one
   thread (the same bits), the default ones under their own policy and
   load (timed). Then `chunks` rounds of: for each load, `steps` steps of
   every configuration (the 2-thread ones only in the first `two_chunks`
   rounds: they are the slow baseline). ms_per_step: the mean over all
   chunks for 1 thread and the default (the probes included, as a game
   would pay them), the median chunk for 2 threads. */
static void run_scene(const scene *sc, int chunks, int two_chunks) {
    pbd_world *w[2][NCFG];
    double warm[2] = {0, 0}, warm_worst[2] = {0, 0}, worst[2][NCFG], sum[2][NCFG], two[2][MAX_CHUNKS], ms[2][NCFG];
    memset(worst, 0, sizeof worst);
    memset(sum, 0, sizeof sum);
    for (int load = 0; load < 2; ++load)
        for (int k = 0; k < NCFG; ++k) {
            w[load][k] = sc->make();
            if (!w[load][k]) {
                fprintf(stderr, "busy: could not build %s\n", sc->name);
                exit(1);
            }
            pbd_world_set_threads(w[load][k], cfg_threads[k] == 0 ? 0 : 1);
        }
    for (int load = 0; load < 2; ++load) {
        busy_set(load);
        for (int k = 0; k < NCFG; ++k) {
            double ms_warm = time_steps(w[load][k], sc->warm, cfg_threads[k] == 0 ? &warm_worst[load] : NULL);
            if (cfg_threads[k] == 0) warm[load] = ms_warm;
            pbd_world_set_threads(w[load][k], cfg_threads[k]);
        }
    }
    for (int c = 0; c < chunks; ++c)
        for (int load = 0; load < 2; ++load) {
            busy_set(load);
            for (int k = 0; k < NCFG; ++k) {
                if (cfg_threads[k] == 2 && c >= two_chunks) continue;
                double t = time_steps(w[load][k], sc->steps, &worst[load][k]);
                sum[load][k] += t;
                if (cfg_threads[k] == 2) two[load][c] = t;
            }
        }
    busy_set(0);
    for (int load = 0; load < 2; ++load)
        for (int k = 0; k < NCFG; ++k) {
            pbd_world *x = w[load][k];
            ms[load][k] = cfg_threads[k] == 2 ? median(two[load], two_chunks) : sum[load][k] / chunks;
            long constraints;
            int colors, iterations = 0, substeps = 0;
            bench_count(x, &constraints, &colors);
            pbd_world_get_solver(x, NULL, &substeps, &iterations);
            printf("{\"bench\":\"busy\",\"scene\":\"%s\",\"load\":\"%s\",\"particles\":%d,\"constraints\":%ld,"
                   "\"colors\":%d,\"iterations\":%d,\"substeps\":%d,\"mode\":\"%s\",\"path\":\"%s\",\"threads\":%d,"
                   "\"ms_per_step\":%.3f,\"worst_ms\":%.1f,\"team_now\":%d,\"proj_per_s\":%.4g}\n",
                   sc->name, load ? "busy" : "idle", pbd_world_particle_count(x), constraints, colors, iterations,
                   substeps, bench_jacobi(x) ? "jacobi" : "gs", pbd_simd_path(), cfg_threads[k], ms[load][k],
                   worst[load][k] * 1e3, pbd_world_thread_team(x),
                   (double)constraints * iterations * substeps / (ms[load][k] * 1e-3));
        }
    for (int load = 0; load < 2; ++load)
        printf("{\"bench\":\"busy\",\"scene\":\"%s\",\"load\":\"%s\",\"two_over_one\":%.3f,\"default_over_one\":%.3f,"
               "\"warm_steps\":%d,\"warm_ms_per_step\":%.3f,\"warm_default_over_one\":%.3f,\"warm_worst_ms\":%.1f}\n",
               sc->name, load ? "busy" : "idle", ms[load][1] / ms[load][0], ms[load][2] / ms[load][0], sc->warm,
               warm[load], warm[load] / ms[load][0], warm_worst[load] * 1e3);
    fflush(stdout);
    for (int load = 0; load < 2; ++load)
        for (int k = 0; k < NCFG; ++k) pbd_world_destroy(w[load][k]);
}

int main(int argc, char **argv) {
    const scene scenes[] = {
        {"cloth100", make_cloth, 120, 10},
        {"dam16000", make_fluid, 60, 5},
        {"softbody30x10x10", make_softbody, 120, 20},
    };
    const char *only = NULL;
    int chunks = 12, two_chunks = 3;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) chunks = 4, two_chunks = 1;
        else if (strcmp(argv[i], "--scene") == 0 && i + 1 < argc) only = argv[++i];
        else if (strcmp(argv[i], "--chunks") == 0 && i + 1 < argc) chunks = atoi(argv[++i]);
    }
    if (chunks < 1) chunks = 1;
    if (chunks > MAX_CHUNKS) chunks = MAX_CHUNKS;
    if (two_chunks > chunks) two_chunks = chunks;
    if (pbd_max_threads() < 2)
        fprintf(stderr, "busy: OpenMP offers %d thread(s): the 2-thread rows run 2 anyway\n", pbd_max_threads());
    busy_start();
    for (size_t s = 0; s < sizeof scenes / sizeof scenes[0]; ++s)
        if (!only || strcmp(only, scenes[s].name) == 0) run_scene(&scenes[s], chunks, two_chunks);
    busy_kill();
    return 0;
}
