/* tests/test_team.c - pbd.h section "threads": the default thread policy
   (pbd_world_set_threads(w, 0)) that runs each substep on the team or on
   fewer threads, whichever its timings say is faster. Its decisions are
   tested with synthetic timings (pbd__team_next, pbd__team_record and
   the gate's judgement are pure functions of the times they are given):
   an idle machine keeps the team, a lost core sends the substeps to one
   thread within a substep, a team must be clearly faster (PBD__TEAM_GAIN)
   to be kept, probing costs a bounded share of the run, the
   team comes back when the core does, and a 16-thread ladder settles on
   the team size that is fastest. Then a world under the policy with a
   scripted clock, which makes it switch between 1 and 2 threads many times
   in a run, gives the same bits as 1 and 2 threads. No timing is asserted:
   the clock of these tests is synthetic. To reach the private functions
   this file compiles its own static copy of the implementation
   (tests/private.h). */
#include "private.h"
#include <stdlib.h>

#if PBD__OPENMP

/* --- the decisions, with synthetic timings ----------------------------------- */

/* A machine for the policy: the seconds of a substep on n threads, and of
   the gate's barriers on n threads. */
typedef struct team_machine {
    double (*substep)(int n, void *u);
    double (*gate)(int n, void *u);
    void *u;
} team_machine;

/* Runs `count` substeps of the policy on machine m; returns the seconds
   they took (the gates included) and counts the substeps per team size. */
static double team_simulate(pbd__team *a, const team_machine *m, long count, long *per_size) {
    double total = 0;
    for (long i = 0; i < count; ++i) {
        int level = pbd__team_next(a);
        if (level < a->level) {
            double g = m->gate(pbd__team_size(a, level), m->u);
            total += g;
            if (!pbd__team_gate_passes(a, g)) {
                pbd__team_gate_failed(a, g);
                level = a->level;
            }
        }
        int n = pbd__team_size(a, level);
        double t = m->substep(n, m->u);
        total += t;
        if (per_size) per_size[n]++;
        pbd__team_record(a, level, t);
    }
    return total;
}

/* Two cores: 1 thread takes 1 ms; 2 threads 0.55 ms when both cores are
   free, 20 ms when another process holds one (a time slice at every
   barrier). The gate's barriers: 2 microseconds free, `busy_gate` busy. */
typedef struct two_cores {
    int busy;
    double busy_gate;
} two_cores;
static double two_substep(int n, void *u) {
    const two_cores *c = (const two_cores *)u;
    return n == 1 ? 1e-3 : (c->busy ? 20e-3 : 0.55e-3);
}
static double two_gate(int n, void *u) {
    const two_cores *c = (const two_cores *)u;
    (void)n;
    return c->busy ? c->busy_gate : 2e-6;
}

TEST(team_keeps_the_speedup_on_an_idle_machine) {
    pbd__team a;
    pbd__team_init(&a, 2);
    CHECK(a.levels == 2 && pbd__team_size(&a, 0) == 2 && pbd__team_size(&a, 1) == 1);
    two_cores c = {0, 0};
    team_machine m = {two_substep, two_gate, &c};
    long per[3] = {0, 0, 0};
    double t = team_simulate(&a, &m, 10000, per);
    CHECK_MSG(a.level == 0, "on level %d, not the team", a.level);
    /* the team's 0.55 ms plus the probes of 1 thread (0.45 ms lost each) */
    printf("    idle: %.4f ms per substep (team 0.55), %ld on 1 thread, %ld probes\n", t / 10000 * 1e3, per[1],
           a.probes);
    CHECK_MSG(t <= 1.03 * 10000 * 0.55e-3, "%g s for 10000 substeps of 0.55 ms", t);
    CHECK_MSG(per[2] > 9900, "only %ld of 10000 substeps on the team", per[2]);
}

/* Fixed costs: u points at {1 thread, 2 threads, gate} seconds. */
static double fixed_substep(int n, void *u) { return ((const double *)u)[n == 1 ? 0 : 1]; }
static double fixed_gate(int n, void *u) {
    (void)n;
    return ((const double *)u)[2];
}

TEST(team_needs_a_clear_gain) {
    /* 2 threads only 5% faster (a small scene, passive waits): not worth
       a core that the rest of the program could use; 15% faster: worth it */
    double costs[3] = {1e-3, 0.95e-3, 1e-6};
    team_machine m = {fixed_substep, fixed_gate, costs};
    pbd__team a;
    pbd__team_init(&a, 2);
    long per[3] = {0, 0, 0};
    team_simulate(&a, &m, 10000, per);
    CHECK_MSG(a.level == 1 && per[1] > 9500, "5%% faster: on level %d, %ld of 10000 substeps on 1 thread", a.level,
              per[1]);
    costs[1] = 0.85e-3;
    pbd__team_init(&a, 2);
    memset(per, 0, sizeof per);
    team_simulate(&a, &m, 10000, per);
    CHECK_MSG(a.level == 0 && per[2] > 9500, "15%% faster: on level %d, %ld of 10000 substeps on 2 threads", a.level,
              per[2]);
}

TEST(team_falls_back_when_a_core_is_lost) {
    pbd__team a;
    pbd__team_init(&a, 2);
    two_cores c = {0, 0};
    team_machine m = {two_substep, two_gate, &c};
    team_simulate(&a, &m, 1000, NULL);
    CHECK(a.level == 0);
    /* another process takes a core while the team runs: the first slow
       substep makes the next one probe 1 thread, which wins */
    c.busy = 1;
    c.busy_gate = 5e-3;
    long switches = a.switches;
    team_simulate(&a, &m, 2, NULL);
    CHECK_MSG(a.level == 1 && a.switches == switches + 1, "level %d after 2 busy substeps", a.level);
    /* busy for 100 000 substeps: the probes of the team cost little. With
       the gate failing (5 ms for its barriers)... */
    double t = team_simulate(&a, &m, 100000, NULL);
    printf("    busy, gate 5 ms: %.4f ms per substep (1 thread: 1), %ld probes\n", t / 100000 * 1e3, a.probes);
    CHECK_MSG(t <= 1.02 * 100000 * 1e-3, "%g s for 100000 substeps of 1 ms", t);
    CHECK(a.level == 1);
    /* ... and when the gate lets the probe through (the woken thread runs
       at once, then loses its core): each probe costs a 20 ms substep */
    pbd__team_init(&a, 2);
    c.busy_gate = 1e-6;
    long per[3] = {0, 0, 0};
    t = team_simulate(&a, &m, 100000, per);
    printf("    busy, gate open: %.4f ms per substep, %ld probes on the team\n", t / 100000 * 1e3, per[2]);
    CHECK_MSG(t <= 1.05 * 100000 * 1e-3, "%g s for 100000 substeps of 1 ms", t);
    CHECK(per[2] > 5); /* it kept looking */
    CHECK(a.level == 1);
    /* the core comes back: the team returns within the longest wait
       (PBD__PROBE_BACKOFF times the 19 ms a probe lost) */
    c.busy = 0;
    long n = 0;
    while (a.level != 0 && n < 100000) team_simulate(&a, &m, 1, NULL), ++n;
    CHECK_MSG(a.level == 0, "still on 1 thread %ld substeps after the core came back", n);
    CHECK_MSG(n * 1e-3 <= PBD__PROBE_BACKOFF * 19e-3 + 2e-3, "the team came back after %ld substeps", n);
}

/* 16 threads, one core lost: 16 threads wait at every barrier, 8 do not. */
static double ladder_substep(int n, void *u) {
    int lost = *(const int *)u;
    return 16e-3 / n + 0.1e-3 + (lost && n == 16 ? 10e-3 : 0);
}
static double ladder_gate(int n, void *u) { return *(const int *)u && n == 16 ? 2e-3 : 1e-6; }

TEST(team_ladder_settles_on_the_fastest_size) {
    pbd__team a;
    pbd__team_init(&a, 16);
    CHECK(a.levels == 5 && pbd__team_size(&a, 1) == 8 && pbd__team_size(&a, 4) == 1);
    pbd__team_init(&a, 5); /* halving rounds up: 5, 3, 2, 1 */
    CHECK(a.levels == 4 && pbd__team_size(&a, 1) == 3 && pbd__team_size(&a, 2) == 2 && pbd__team_size(&a, 3) == 1);
    pbd__team_init(&a, 1);
    CHECK(a.levels == 1 && pbd__team_next(&a) == 0);
    int lost = 0;
    team_machine m = {ladder_substep, ladder_gate, &lost};
    pbd__team_init(&a, 16);
    long per[17];
    memset(per, 0, sizeof per);
    team_simulate(&a, &m, 5000, per);
    CHECK_MSG(a.level == 0, "free cores: on %d threads", pbd__team_size(&a, a.level));
    lost = 1;
    memset(per, 0, sizeof per);
    team_simulate(&a, &m, 5000, per);
    CHECK_MSG(pbd__team_size(&a, a.level) == 8, "a core lost: on %d threads", pbd__team_size(&a, a.level));
    CHECK_MSG(per[8] > 4800, "%ld of 5000 substeps on 8 threads", per[8]);
}

TEST(team_ignores_nonsense_times) {
    pbd__team a;
    pbd__team_init(&a, 2);
    pbd__team_record(&a, a.level, -1.0); /* a clock that went backwards */
    CHECK(a.sec[a.level] == 0 && a.wait == 0);
    pbd__team_record(&a, a.level, (double)NAN);
    CHECK(a.sec[a.level] == 0);
    CHECK(pbd__team_next(&a) == a.level); /* no probe without a time to compare */
}

/* --- the same bits across switches ------------------------------------------ */

/* A scripted machine for a world: a serial plugin adds the cost of every
   substep to a virtual clock as the substep begins, by its team size: 1
   thread 1 ms; 2 threads 0.5 ms or, in phases of 5-12 substeps in which
   "another process holds a core", 1.5 ms. The policy's clock reads it, so
   its gate (no substep between two readings) always passes, and it probes
   and switches as on a machine whose load comes and goes, deterministically. */
typedef struct team_script {
    long per[4];
    double now;
    long substeps, phase_end;
    int busy;
    unsigned rng;
} team_script;
static team_script *team_active;
static double team_scripted_clock(void) { return team_active->now; }

static void team_script_substep(void *user, const pbd_solve_context *c) {
    team_script *s = (team_script *)user;
    s->per[c->thread_count > 2 ? 3 : c->thread_count]++;
    if (s->substeps++ == s->phase_end) {
        s->rng = s->rng * 1664525u + 1013904223u;
        s->phase_end = s->substeps + 5 + (long)(s->rng >> 29);
        s->busy = !s->busy;
    }
    s->now += c->thread_count == 1 ? 1e-3 : (s->busy ? 1.5e-3 : 0.5e-3);
}

/* A 40 x 40 cloth (large enough for the parallel path) on a sphere, 20
   steps; returns its snapshot (caller frees). threads -1: the default
   policy with the scripted clock. */
static unsigned char *team_run(int threads, size_t *size, team_script *script, long *switches) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(40, 40, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.gravity_cfl = 0; /* the world's 4 substeps a step, which the script counts (80) */
    pbd_object obj;
    CHECK_OK(pbd_add_cloth(w, &cd, &obj));
    pbd_mesh_free(&m);
    CHECK_OK(pbd_particle_pin(w, 0));
    float c[3] = {0.5f, 0.6f, 0.5f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.25f, 0.4f, NULL));
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "team sizes";
    pd.user = script;
    pd.begin_substep = team_script_substep;
    CHECK_OK(pbd_add_plugin(w, &pd, NULL));
    CHECK_OK(pbd_world_set_threads(w, threads < 0 ? 0 : threads));
    team_active = script;
    if (threads < 0) w->team_clock = team_scripted_clock;
    for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    if (switches) *switches = w->team.switches;
    *size = pbd_world_snapshot_size(w);
    unsigned char *buf = (unsigned char *)malloc(*size);
    CHECK_OK(pbd_world_save(w, buf, *size));
    pbd_world_destroy(w);
    return buf;
}

TEST(team_switches_keep_the_bits) {
    int max = omp_get_max_threads();
    if (max < 2) omp_set_num_threads(2); /* a 1-core machine still gets a team */
    size_t s1, s2, sd;
    team_script t1, t2, td;
    memset(&t1, 0, sizeof t1);
    t1.rng = 7;
    t1.phase_end = 5;
    t2 = td = t1;
    long switches = 0, *p1 = t1.per, *p2 = t2.per, *pd = td.per;
    unsigned char *one = team_run(1, &s1, &t1, NULL), *two = team_run(2, &s2, &t2, NULL),
                  *def = team_run(-1, &sd, &td, &switches);
    CHECK(p1[1] == 80 && p2[2] == 80);
    printf("    default policy, scripted clock: %ld substeps on 1 thread, %ld on 2, %ld switches\n", pd[1], pd[2],
           switches);
    CHECK_MSG(pd[1] > 10 && pd[2] > 10 && switches >= 6,
              "%ld / %ld substeps on 1 / 2 threads, %ld switches: the script does not test switching", pd[1], pd[2],
              switches);
    CHECK_MSG(s1 == s2 && memcmp(one, two, s1) == 0, "2 threads differ from 1");
    CHECK_MSG(s1 == sd && memcmp(one, def, s1) == 0, "the default policy differs from 1 thread");
    free(one);
    free(two);
    free(def);
    omp_set_num_threads(max);
}
#else /* without OpenMP every team has one thread: nothing to choose or compare */
#define PBDT_NO_TEAM "no OpenMP: one team size only"
TEST(team_keeps_the_speedup_on_an_idle_machine) { SKIP(PBDT_NO_TEAM); }
TEST(team_needs_a_clear_gain) { SKIP(PBDT_NO_TEAM); }
TEST(team_falls_back_when_a_core_is_lost) { SKIP(PBDT_NO_TEAM); }
TEST(team_ladder_settles_on_the_fastest_size) { SKIP(PBDT_NO_TEAM); }
TEST(team_ignores_nonsense_times) { SKIP(PBDT_NO_TEAM); }
TEST(team_switches_keep_the_bits) { SKIP(PBDT_NO_TEAM); }
#endif /* PBD__OPENMP */

TEST(team_reports_the_threads_of_the_last_substep) {
    pbd_world_desc d = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    CHECK(pbd_world_thread_team(w) == 0);
    CHECK(pbd_world_thread_team(NULL) == 0);
    float x[3] = {0, 1, 0};
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.count = 1;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK(pbd_world_thread_team(w) == 1); /* default: a small world runs serially */
    CHECK_OK(pbd_world_set_threads(w, 2));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    CHECK(pbd_world_thread_team(w) == (PBD__OPENMP ? 2 : 1));
#if PBD__OPENMP
    /* stepped from inside a parallel region of the caller's, where OpenMP
       nests no team: the step ran on one thread and says so (an audit: it
       said 2) */
    if (omp_get_max_active_levels() <= 1) {
        pbd_result r = PBD_OK;
        PBD__PRAGMA(omp parallel num_threads(2)) {
            PBD__PRAGMA(omp master)
            r = pbd_world_step(w, 1.0f / 60.0f);
        }
        CHECK_OK(r);
        CHECK(pbd_world_thread_team(w) == 1);
    }
#endif
    pbd_world_destroy(w);
}

/* Which worlds the default policy measures at all (below
   PBD__PARALLEL_MIN of work they run serially): a particle with particle
   contact or in a fluid counts PBD__PP_WORK, its neighbours' work. 1000
   grains counted as 1000 particles, and 2000 grains (then 45 ms a step on
   one thread, 22 on two: bench/granular.c) never left one thread. */
TEST(team_counts_the_particle_phase) {
    pbd_world *w = pbdt_world(-9.81f);
    const float corner[3] = {0, 0, 0};
    float *pos = pbdt_lattice(10, 10, 10, 0.02f, corner);
    pbd_range r = pbdt_add_colliding(w, pos, 1000, 0.01f, 1.0f);
    CHECK(r.count == 1000 && pbd__parallel_worth_it(w)); /* 1000 grains: 17 000 */
    CHECK_OK(pbd_particles_set_particle_contact(w, r, 0));
    CHECK(!pbd__parallel_worth_it(w)); /* 1000 free particles: serial */
    CHECK_OK(pbd_particles_set_particle_contact(w, r, 1));
    CHECK(pbd__parallel_worth_it(w));
    free(pos);
    pbd_world_destroy(w);
}

void suite_team(void) {
    RUN(team_keeps_the_speedup_on_an_idle_machine);
    RUN(team_needs_a_clear_gain);
    RUN(team_falls_back_when_a_core_is_lost);
    RUN(team_ladder_settles_on_the_fastest_size);
    RUN(team_ignores_nonsense_times);
    RUN(team_switches_keep_the_bits);
    RUN(team_reports_the_threads_of_the_last_substep);
    RUN(team_counts_the_particle_phase);
}
