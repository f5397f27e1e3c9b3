/* tests/main.c - the runner: holds the implementation of pbd.h and of the
   test framework (pbd_sm.h's and pbd_upsample.h's are in tests/impl_sm.c
   and tests/impl_upsample.c), runs every suite, ends with
   "N passed, N failed, N skipped" (.ci/run adds these lines up).
   Usage: pbd_tests [T]   run only the tests whose name contains T, and every
   test of the suites whose name contains T; T may be written as the suite's
   name ("tethers"), its function ("suite_tethers") or its file
   ("test_tethers", "tests/test_tethers.c"). No match at all is a failure.
   PBDT_SHARD=i/n (environment): run only the selected tests whose place in
   the run is i modulo n, so that n processes side by side run the suite
   once (tests/run.sh, on a machine with n cores; a shard may match none). */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#define PBD_IMPLEMENTATION
#include "../pbd.h"
#include "test.h"
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

int pbdt_current_failed = 0;
const char *pbdt_filter = NULL;
static int pbdt_passed = 0, pbdt_failed = 0, pbdt_skipped = 0;
static const char *pbdt_suite = "";          /* the suite now running */
static char pbdt_suite_filter[128] = "";     /* T without "tests/", "test_", "suite_", ".c" */
static int pbdt_current_skipped = 0;         /* SKIP called in the running test */
static char pbdt_skip_note[256];             /* why, or which parts were not compared */
static long pbdt_shard = 0, pbdt_shards = 1; /* PBDT_SHARD=i/n */
static long pbdt_place = 0;                  /* selected tests met so far */

void pbdt_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    pbdt_current_failed++;
}

static void pbdt_note(const char *sep, const char *text) {
    size_t n = strlen(pbdt_skip_note);
    snprintf(pbdt_skip_note + n, sizeof pbdt_skip_note - n, "%s%s", n ? sep : "", text);
}

void pbdt_skip(const char *fmt, ...) {
    char why[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pbdt_skip_note[0] = 0;
    pbdt_note("", why);
    pbdt_current_skipped = 1;
}

void pbdt_skip_part(const char *what) {
    if (strstr(pbdt_skip_note, what)) return; /* noted already */
    if (!pbdt_skip_note[0]) pbdt_note("", "not compared: ");
    else pbdt_note(", ", "");
    pbdt_note("", what);
}

/* T selects a test by its name, or its whole suite by the suite's name. */
static int pbdt_selected(const char *name) {
    if (!pbdt_filter) return 1;
    if (strstr(name, pbdt_filter)) return 1;
    return pbdt_suite_filter[0] && strstr(pbdt_suite, pbdt_suite_filter) != NULL;
}

static void pbdt_set_suite_filter(const char *t) {
    static const char *const prefixes[] = {"tests/", "test_", "suite_"};
    for (int i = 0; i < 3; ++i)
        if (!strncmp(t, prefixes[i], strlen(prefixes[i]))) t += strlen(prefixes[i]);
    snprintf(pbdt_suite_filter, sizeof pbdt_suite_filter, "%s", t);
    size_t n = strlen(pbdt_suite_filter);
    if (n > 2 && !strcmp(pbdt_suite_filter + n - 2, ".c")) pbdt_suite_filter[n - 2] = 0;
}

/* PBDT_SHARD=i/n, 0 <= i < n; anything else runs every test. */
static void pbdt_set_shard(const char *v) {
    long i, n;
    char end;
    if (v && sscanf(v, "%ld/%ld%c", &i, &n, &end) == 2 && n > 0 && i >= 0 && i < n) {
        pbdt_shard = i;
        pbdt_shards = n;
    }
}

void pbdt_run(const char *name, void (*fn)(void)) {
    if (!pbdt_selected(name)) return;
    if (pbdt_place++ % pbdt_shards != pbdt_shard) return;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pbdt_current_failed = 0;
    pbdt_current_skipped = 0;
    pbdt_skip_note[0] = 0;
    fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const char *sep = pbdt_skip_note[0] ? "; " : "";
    if (pbdt_current_failed) { /* a failure before a SKIP still counts */
        pbdt_failed++;
        printf("FAIL %s (%.2fs%s%s)\n", name, s, sep, pbdt_skip_note);
    } else if (pbdt_current_skipped) {
        pbdt_skipped++;
        printf("skip %s (%.2fs%s%s)\n", name, s, sep, pbdt_skip_note);
    } else {
        pbdt_passed++;
        printf("ok   %s (%.2fs%s%s)\n", name, s, sep, pbdt_skip_note);
    }
    fflush(stdout);
}

// clang-format off
#ifdef PBD_CUDA /* pbd_cuda_tests: the GPU companion's suite only */
#define PBDT_SUITES(X) X(cuda)
#else
#define PBDT_SUITES(X) \
    X(constraints) X(meshes) X(world) X(errors) X(solver) X(bodies) X(collisions) X(parallel) X(plugins) \
    X(sm) X(sm_oriented) X(sm_volume) X(upsample) X(upsample_fit) X(sm_shape) X(sm_cloth) X(sm_sum) \
    X(sm_rot4) X(sm_team) X(sm_rigid) X(sm_snapshot) X(particle_contact) X(fluids) X(strain) X(strands) X(tearing) X(damping) \
    X(mesh_colliders) X(selfcollision) X(sc_simd) X(contact_bounds) X(team) X(tethers) X(fluid_walls) \
    X(robust) X(fuzz) X(determinism) X(handles) X(sm_press) X(pp_lists) X(cuda)
#endif
// clang-format on
#define PBDT_DECLARE(s) void suite_##s(void);
PBDT_SUITES(PBDT_DECLARE)

int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0]) {
        pbdt_filter = argv[1];
        pbdt_set_suite_filter(argv[1]);
    }
    pbdt_set_shard(getenv("PBDT_SHARD"));
#define PBDT_CALL(s) \
    pbdt_suite = #s; \
    suite_##s();
    PBDT_SUITES(PBDT_CALL)
    if (pbdt_place == 0) {
        printf("no test or suite matches \"%s\"\n", pbdt_filter ? pbdt_filter : "");
        pbdt_failed = 1;
    }
    printf("%d passed, %d failed, %d skipped\n", pbdt_passed, pbdt_failed, pbdt_skipped);
    return pbdt_failed ? 1 : 0;
}
