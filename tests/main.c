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
static const char *pbdt_suite = "";                /* the suite now running */
#define PBDT_FILTERS 8                             /* T=a,b: the tests that a or b selects */
static char pbdt_filters[PBDT_FILTERS][128];       /* T's names, split at commas */
static char pbdt_suite_filters[PBDT_FILTERS][128]; /* each without "tests/", "test_", "suite_", ".c" */
static int pbdt_nfilters = 0;
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

/* T selects a test by its name, or its whole suite by the suite's name;
   T=a,b selects what a or b selects. */
static int pbdt_selected(const char *name) {
    if (!pbdt_filter) return 1;
    for (int i = 0; i < pbdt_nfilters; ++i) {
        if (strstr(name, pbdt_filters[i])) return 1;
        if (pbdt_suite_filters[i][0] && strstr(pbdt_suite, pbdt_suite_filters[i])) return 1;
    }
    return 0;
}

static void pbdt_set_filters(const char *t) {
    static const char *const prefixes[] = {"tests/", "test_", "suite_"};
    while (*t && pbdt_nfilters < PBDT_FILTERS) {
        size_t len = strcspn(t, ",");
        char *f = pbdt_filters[pbdt_nfilters], *sf = pbdt_suite_filters[pbdt_nfilters];
        snprintf(f, sizeof pbdt_filters[0], "%.*s", (int)len, t);
        t += len + (t[len] == ',');
        if (!f[0]) continue;
        const char *u = f;
        for (int i = 0; i < 3; ++i)
            if (!strncmp(u, prefixes[i], strlen(prefixes[i]))) u += strlen(prefixes[i]);
        snprintf(sf, sizeof pbdt_suite_filters[0], "%s", u);
        size_t n = strlen(sf);
        if (n > 2 && !strcmp(sf + n - 2, ".c")) sf[n - 2] = 0;
        pbdt_nfilters++;
    }
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
        pbdt_set_filters(argv[1]);
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
