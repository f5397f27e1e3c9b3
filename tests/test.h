/* tests/test.h - the tiny test framework of pbd's test suite.

   A test is a function `TEST(name) { CHECK(...); }`; a suite file lists its
   tests in a `void suite_<name>(void)` with RUN(test). CHECKs record the
   failure (file:line, message) and go on, so one run reports everything.
   The runner (tests/main.c) ends with the line "N passed, N failed". */
#ifndef PBD_TEST_H
#define PBD_TEST_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "../pbd.h"

#ifdef __cplusplus
extern "C" {
#endif
extern int pbdt_current_failed;     /* failures in the running test */
extern const char *pbdt_filter;     /* run only tests whose name contains this */
void pbdt_run(const char *name, void (*fn)(void));
void pbdt_fail(const char *file, int line, const char *fmt, ...);
#ifdef __cplusplus
}
#endif

#define TEST(name) static void name(void)
#define RUN(name) pbdt_run(#name, name)
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) pbdt_fail(__FILE__, __LINE__, "CHECK(%s)", #cond);          \
    } while (0)
#define CHECK_MSG(cond, ...)                                                     \
    do {                                                                         \
        if (!(cond)) pbdt_fail(__FILE__, __LINE__, __VA_ARGS__);                 \
    } while (0)
/* |a - b| <= tol, with both values printed on failure */
#define CHECK_NEAR(a, b, tol)                                                    \
    do {                                                                         \
        double pbdt_a_ = (double)(a), pbdt_b_ = (double)(b);                     \
        if (!(fabs(pbdt_a_ - pbdt_b_) <= (double)(tol)))                         \
            pbdt_fail(__FILE__, __LINE__, "CHECK_NEAR(%s, %s, %s): %.9g vs %.9g", \
                      #a, #b, #tol, pbdt_a_, pbdt_b_);                          \
    } while (0)
#define CHECK_OK(expr)                                                           \
    do {                                                                         \
        pbd_result pbdt_r_ = (expr);                                             \
        if (pbdt_r_ != PBD_OK)                                                   \
            pbdt_fail(__FILE__, __LINE__, "%s returned %s", #expr,               \
                      pbd_result_string(pbdt_r_));                               \
    } while (0)
#define CHECK_RESULT(expr, want)                                                 \
    do {                                                                         \
        pbd_result pbdt_r_ = (expr);                                             \
        if (pbdt_r_ != (want))                                                   \
            pbdt_fail(__FILE__, __LINE__, "%s returned %s, wanted %s", #expr,    \
                      pbd_result_string(pbdt_r_), pbd_result_string(want));      \
    } while (0)

/* A deterministic random generator for tests (xorshift32). */
static inline float pbdt_rand(unsigned *state) {
    unsigned x = *state;
    x ^= x << 13; x ^= x >> 17; x ^= x << 5;
    *state = x;
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}
/* A cloth desc (defaults) over a generated mesh. */
static inline pbd_cloth_desc pbdt_cloth_desc(const pbd_mesh *m) {
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = m->positions;
    c.vertex_count = m->vertex_count;
    c.triangles = m->triangles;
    c.triangle_count = m->triangle_count;
    return c;
}

/* A world with default settings but for gravity (0, gy, 0). */
static inline pbd_world *pbdt_world(float gy) {
    pbd_world_desc d = pbd_world_desc_default();
    d.gravity[0] = 0.0f;
    d.gravity[1] = gy;
    d.gravity[2] = 0.0f;
    pbd_world *w = NULL;
    if (pbd_world_create(&d, &w) != PBD_OK) return NULL;
    return w;
}
#endif
