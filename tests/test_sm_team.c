/* tests/test_sm_team.c - pbd_sm.h in the world's team: a shape-matching
   body runs on the threads the world's step runs on. A world stepping on
   one thread (pbd_world_set_threads(w, 1), or the default policy on a busy
   machine) opens no parallel region, and a body's region sums used to open
   a team of their own there (pbd_sm_plan_sum, for a plan of 512 regions or
   more): the "1-thread" step kept a second thread spinning. The sums are
   watched through the plan's private `sum` (a spy that records the team it
   runs in), so this file compiles its own static copy of the
   implementations (PBD_STATIC). */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define PBD_STATIC
#define PBD_IMPLEMENTATION
#include "../pbd.h"
#define PBD_SM_IMPLEMENTATION
#include "../pbd_sm.h"
#include "test.h"

#if PBD_SM__OPENMP
static void (*smt_sum)(pbd_sm_sum_plan *, const double *, int, double *);
static int smt_calls, smt_team;
static void smt_spy(pbd_sm_sum_plan *p, const double *values, int k, double *sums) {
    PBD_SM__PRAGMA(omp single) {
        ++smt_calls;
        if (omp_get_num_threads() > smt_team) smt_team = omp_get_num_threads();
    }
    smt_sum(p, values, k, sums);
}

/* An 8 x 8 x 8 lattice jelly (512 regions: the plan would take a team of
   its own) dropped on a plane, stepped with the world's threads = n;
   returns the largest team its sums ran in, *x (optional) its positions. */
static int smt_run(int threads, float *x) {
    pbd_world_desc wd = pbd_world_desc_default();
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&wd, &w));
    CHECK_OK(pbd_world_set_threads(w, threads));
    int cells[3 * 512];
    CHECK_OK(pbd_sm_lattice_box(8, 8, 8, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = 512;
    ld.spacing = 0.05f;
    ld.origin[1] = 0.1f;
    ld.body.mode = PBD_SM_LINEAR;
    pbd_sm_body b = {0};
    pbd_range r = {0, 0};
    CHECK_OK(pbd_sm_add_lattice(w, &ld, &b, &r));
    float p0[3] = {0, 0, 0}, n0[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p0, n0, 0.5f, NULL));
    pbd_sm_sum_plan *plan = NULL;
    CHECK_OK(pbd_sm_body_plan(w, b, &plan));
    CHECK(plan && plan->region_count >= 512);
    smt_sum = plan->sum;
    plan->sum = smt_spy;
    smt_calls = smt_team = 0;
    for (int s = 0; s < 10; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60));
    CHECK(smt_calls > 0);
    if (x) CHECK_OK(pbd_particles_get_positions(w, r, x));
    pbd_world_destroy(w);
    return smt_team;
}
#endif

TEST(sm_body_sums_keep_to_the_worlds_one_thread) {
#if PBD_SM__OPENMP
    int was = omp_get_max_threads();
    omp_set_num_threads(2); /* a plan left to itself would take 2 */
    static float x1[3 * 512], x2[3 * 512];
    int team1 = smt_run(1, x1);
    CHECK_MSG(team1 == 1, "world threads 1: the body's sums ran in a team of %d", team1);
    int team2 = smt_run(2, x2); /* a small body: thread 0 of the world's team alone */
    CHECK_MSG(team2 == 1, "world threads 2, small body: the sums ran in a team of %d", team2);
    CHECK(!memcmp(x1, x2, sizeof x1)); /* and the bits are those of 2 threads */
    omp_set_num_threads(was);
#else
    SKIP("no OpenMP: every step runs on one thread");
#endif
}

void suite_sm_team(void) { RUN(sm_body_sums_keep_to_the_worlds_one_thread); }
