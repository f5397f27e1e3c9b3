/* tests/main.c - the runner: holds the implementation of pbd.h and of the
   test framework (pbd_sm.h's and pbd_upsample.h's are in tests/impl_sm.c
   and tests/impl_upsample.c), runs every suite, ends with "N passed, N failed".
   Usage: pbd_tests [substring]   (run only the tests whose name matches) */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c99 */
#define PBD_IMPLEMENTATION
#include "../pbd.h"
#include "test.h"
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

int pbdt_current_failed = 0;
const char *pbdt_filter = NULL;
static int pbdt_passed = 0, pbdt_failed = 0;

void pbdt_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "    %s:%d: ", file, line);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    pbdt_current_failed++;
}

void pbdt_run(const char *name, void (*fn)(void)) {
    if (pbdt_filter && !strstr(name, pbdt_filter)) return;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pbdt_current_failed = 0;
    fn();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (pbdt_current_failed) {
        pbdt_failed++;
        printf("FAIL %s (%.2fs)\n", name, s);
    } else {
        pbdt_passed++;
        printf("ok   %s (%.2fs)\n", name, s);
    }
    fflush(stdout);
}

#define PBDT_SUITES(X) X(constraints) X(meshes) X(world) X(errors) X(solver) X(bodies) X(collisions) X(parallel) X(plugins) X(sm) X(sm_oriented) X(sm_volume) X(upsample) X(upsample_fit) X(sm_shape) X(sm_cloth) X(sm_sum) X(sm_rot4) X(sm_rigid) X(particle_contact) X(fluids) X(strain) X(strands) X(tearing) X(damping) X(mesh_colliders) X(selfcollision) X(sc_simd) X(contact_bounds) X(team) X(tethers) X(fluid_walls) X(robust) X(fuzz)
#define PBDT_DECLARE(s) void suite_##s(void);
PBDT_SUITES(PBDT_DECLARE)

int main(int argc, char **argv) {
    if (argc > 1) pbdt_filter = argv[1];
#define PBDT_CALL(s) suite_##s();
    PBDT_SUITES(PBDT_CALL)
    printf("%d passed, %d failed\n", pbdt_passed, pbdt_failed);
    return pbdt_failed ? 1 : 0;
}
