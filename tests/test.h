/* tests/test.h - the tiny test framework of pbd's test suite.

   A test is a function `TEST(name) { CHECK(...); }`; a suite file lists its
   tests in a `void suite_<name>(void)` with RUN(test). CHECKs record the
   failure (file:line, message) and go on, so one run reports everything.
   SKIP(...) ends a test that has nothing to check in this build (it counts
   as skipped, never as passed); pbdt_part notes a part of a test that is
   vacuous in this build (see "parity tests" below).
   The runner (tests/main.c) ends with the line "N passed, N failed, N skipped"
   (.ci/run adds those lines up; keep them in step). */
#ifndef PBD_TEST_H
#define PBD_TEST_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../pbd.h"

#ifdef __cplusplus
extern "C" {
#endif
extern int pbdt_current_failed; /* failures in the running test */
extern const char *pbdt_filter; /* T: tests whose name, or whose suite's, contains it */
void pbdt_run(const char *name, void (*fn)(void));
void pbdt_fail(const char *file, int line, const char *fmt, ...);
void pbdt_skip(const char *fmt, ...);  /* the running test is skipped (use SKIP) */
void pbdt_skip_part(const char *what); /* a part of it was (use pbdt_part) */
#ifdef __cplusplus
}
#endif

#define TEST(name) static void name(void)
#define RUN(name) pbdt_run(#name, name)
/* Ends the test as skipped, with the reason printed on its line. */
#define SKIP(...)               \
    do {                        \
        pbdt_skip(__VA_ARGS__); \
        return;                 \
    } while (0)
/* Skips a long physics scene in the sanitizer build (make test SAN=1):
   ASan and UBSan look for memory errors and undefined behaviour, and such a
   scene runs the code of the suite's short tests there again, for seconds,
   at 2-10x the cost (CI's 15 minutes). It runs in every other build. */
#if defined(__SANITIZE_ADDRESS__)
#define PBDT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PBDT_SANITIZED 1
#endif
#endif
#ifndef PBDT_SANITIZED
#define PBDT_SANITIZED 0
#endif
#define LONG_SCENE()                                                                    \
    do {                                                                                \
        if (PBDT_SANITIZED) SKIP("a long physics scene, not run under the sanitizers"); \
    } while (0)
#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) pbdt_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); \
    } while (0)
#define CHECK_MSG(cond, ...)                                     \
    do {                                                         \
        if (!(cond)) pbdt_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
/* |a - b| <= tol, with both values printed on failure */
#define CHECK_NEAR(a, b, tol)                                                                                      \
    do {                                                                                                           \
        double pbdt_a_ = (double)(a), pbdt_b_ = (double)(b);                                                       \
        if (!(fabs(pbdt_a_ - pbdt_b_) <= (double)(tol)))                                                           \
            pbdt_fail(__FILE__, __LINE__, "CHECK_NEAR(%s, %s, %s): %.9g vs %.9g", #a, #b, #tol, pbdt_a_, pbdt_b_); \
    } while (0)
#define CHECK_OK(expr)                                                                                             \
    do {                                                                                                           \
        pbd_result pbdt_r_ = (expr);                                                                               \
        if (pbdt_r_ != PBD_OK) pbdt_fail(__FILE__, __LINE__, "%s returned %s", #expr, pbd_result_string(pbdt_r_)); \
    } while (0)
#define CHECK_RESULT(expr, want)                                                                          \
    do {                                                                                                  \
        pbd_result pbdt_r_ = (expr);                                                                      \
        if (pbdt_r_ != (want))                                                                            \
            pbdt_fail(__FILE__, __LINE__, "%s returned %s, wanted %s", #expr, pbd_result_string(pbdt_r_), \
                      pbd_result_string(want));                                                           \
    } while (0)

/* Error messages are for people (pbd.h CONVENTIONS): they name the
   public parameter or desc field and say what is wrong with it in words.
   pbdt_message_code_fragment returns the first fragment of msg that reads
   as C instead - the quoted condition of a check ("rejected because",
   "!=", "||", "->", "(size_t)") or an internal name (a double underscore)
   - or NULL; pbdt_message_reads_as_words(msg) is 1 when there is none.
   tests/check_error.h applies it to every message it checks. */
static inline const char *pbdt_message_code_fragment(const char *msg) {
    static const char *const code[] = {
        "rejected because", "__", "||", "&&", "!=", "==", "(size_t)", "->", "!(", ".failed"};
    if (!msg) return "(no message)";
    for (size_t i = 0; i < sizeof code / sizeof code[0]; ++i)
        if (strstr(msg, code[i])) return code[i];
    return NULL;
}
static inline int pbdt_message_reads_as_words(const char *msg) { return pbdt_message_code_fragment(msg) == NULL; }

/* Parity tests ("SIMD equals scalar", "threads agree") compare two
   execution paths of one build. In a build that has only one of them
   (SIMD=0, no SIMDe, OMP=0) that comparison compares a path with itself
   and proves nothing, so it must not be counted as passed:
     int simd = pbdt_part(PBDT_SIMD, "SIMD == scalar");
     int threads = pbdt_part(PBDT_THREADS, "2 threads == 1");
     if (!simd && !threads) SKIP("scalar build without OpenMP");
   or, for that pair, if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
   pbdt_part returns `have`; when it is 0 the runner prints "(not
   compared: what)" on the test's line. A test none of whose parts run
   calls SKIP. pbd_sm.h's and pbd_upsample.h's float kernels use pbd.h's
   width (PBDT_SIMD); pbd_sm.h's 4-double kernels (rotations, region sums)
   exist where that width is 8 or more (PBDT_SIMD_F64). */
#if defined(_OPENMP) && !defined(PBD_NO_OPENMP)
#define PBDT_THREADS 1 /* pbd_world_set_threads(w, 2) runs a team of 2 */
#else
#define PBDT_THREADS 0
#endif
#define PBDT_SIMD (pbd_simd_width() > 1)      /* pbd.h's SIMD path is compiled in */
#define PBDT_SIMD_F64 (pbd_simd_width() >= 8) /* and pbd_sm.h's 4-double kernels */
static inline int pbdt_part(int have, const char *what) {
    if (!have) pbdt_skip_part(what);
    return have;
}
/* Whether this program flushes subnormal floats to zero (linked with
   -ffast-math or -Ofast: make check-fast-math), where a subnormal input
   is 0 to the library as to the caller; PBDT_SUBNORMALS guards the checks
   of subnormal inputs (noting them as not compared there). */
static inline int pbdt_subnormals_flushed(void) {
    volatile float t = 1e-39f;
    return t * 1.0f == 0.0f;
}
#define PBDT_SUBNORMALS pbdt_part(!pbdt_subnormals_flushed(), "subnormal inputs (this program flushes them to 0)")
/* The usual pair in one test: 0 when neither can be compared (then SKIP). */
static inline int pbdt_parity(int have_simd, int have_threads) {
    int simd = pbdt_part(have_simd, "SIMD == scalar");
    int threads = pbdt_part(have_threads, "2 threads == 1");
    return simd || threads;
}
#define PBDT_NO_PARITY "scalar build without OpenMP: nothing to compare"

/* A deterministic random generator for tests (xorshift32). */
/* The rotation matrix (row-major 3x3) of a unit quaternion (x, y, z, w). */
static inline void pbdt_quat_to_mat(const double *q, double *R) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    R[0] = 1 - 2 * (y * y + z * z);
    R[1] = 2 * (x * y - z * w);
    R[2] = 2 * (x * z + y * w);
    R[3] = 2 * (x * y + z * w);
    R[4] = 1 - 2 * (x * x + z * z);
    R[5] = 2 * (y * z - x * w);
    R[6] = 2 * (x * z - y * w);
    R[7] = 2 * (y * z + x * w);
    R[8] = 1 - 2 * (x * x + y * y);
}

static inline float pbdt_rand(unsigned *state) {
    unsigned x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}
/* A cloth desc (defaults) over a generated mesh. */
/* An object's particles and groups (pbd_object_get_parts; all zero when
   the handle names nothing). */
static inline pbd_object_parts pbdt_parts(const pbd_world *w, pbd_object o) {
    pbd_object_parts p;
    memset(&p, 0, sizeof p);
    pbd_object_get_parts(w, o, &p);
    return p;
}

/* n loose particles (radius r, mass m each) with particle contact on; the range. */
static inline pbd_range pbdt_add_colliding(pbd_world *w, const float *pos, int n, float r, float m) {
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = n;
    pd.radius = r;
    pd.mass = m;
    pbd_range range = {0, 0};
    if (pbd_add_particles(w, &pd, &range) == PBD_OK) pbd_particles_set_particle_contact(w, range, 1);
    return range;
}
/* The largest particle speed of the world (m/s). */
static inline float pbdt_max_speed(const pbd_world *w) {
    const float *v = pbd_world_velocities(w);
    float m = 0;
    for (int i = 0; i < pbd_world_particle_count(w); ++i) {
        float s = sqrtf(v[4 * i] * v[4 * i] + v[4 * i + 1] * v[4 * i + 1] + v[4 * i + 2] * v[4 * i + 2]);
        m = s > m ? s : m;
    }
    return m;
}
static inline pbd_cloth_desc pbdt_cloth_desc(const pbd_mesh *m) {
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = m->positions;
    c.vertex_count = m->vertex_count;
    c.triangles = m->triangles;
    c.triangle_count = m->triangle_count;
    return c;
}

/* A cloth (the defaults) over a grid mesh of nx x ny vertices from o
   along u and v, kept in *m (free it); *cd (optional) gets its desc (for
   pbd_add_cloth_self_collision). The object, id 0 when a call failed. */
static inline pbd_object pbdt_grid_cloth(pbd_world *w, int nx, int ny, const float *o, const float *u, const float *v,
                                         pbd_mesh *m, pbd_cloth_desc *cd) {
    pbd_object obj = {0};
    if (pbd_mesh_grid(nx, ny, o, u, v, m) != PBD_OK) return obj;
    pbd_cloth_desc d = pbdt_cloth_desc(m);
    if (cd) *cd = d;
    if (pbd_add_cloth(w, &d, &obj) != PBD_OK) obj.id = 0;
    return obj;
}

/* A closed skin for surface volume tests: an icosphere (subdivided subdiv
   times) as a cloth with compliant stretch and isometric bending; *m
   keeps the mesh with its triangles in world particle indices (free it
   with pbd_mesh_free). */
static inline pbd_object pbdt_skin(pbd_world *w, int subdiv, const float *centre, float radius, pbd_mesh *m) {
    pbd_object skin = {0};
    pbd_mesh_sphere(subdiv, centre, radius, m);
    pbd_cloth_desc cd = pbdt_cloth_desc(m);
    cd.stretch_compliance = 1e-4f;
    cd.bending = PBD_BENDING_ISOMETRIC;
    cd.bending_compliance = 1.0f;
    cd.density = 1.0f;
    pbd_add_cloth(w, &cd, &skin);
    int first = pbdt_parts(w, skin).particles.first;
    for (int i = 0; i < 3 * m->triangle_count; ++i) m->triangles[i] += first;
    return skin;
}

static inline pbd_softbody_desc pbdt_softbody_desc(const pbd_mesh *m) {
    pbd_softbody_desc d = pbd_softbody_desc_default();
    d.positions = m->positions;
    d.vertex_count = m->vertex_count;
    d.tets = m->tets;
    d.tet_count = m->tet_count;
    return d;
}

/* One strand of n particles at positions (3n floats; velocities and mass
   optional: NULL / 0 for the defaults) with its root pinned; damping is
   the strand damping (< 0: the default). Returns the particles' range
   (count 0 when a call failed). */
static inline pbd_range pbdt_strand(pbd_world *w, const float *positions, const float *velocities, int n, float mass,
                                    float damping) {
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = positions;
    pd.velocities = velocities;
    pd.count = n;
    if (mass > 0) pd.mass = mass;
    pbd_range r = {-1, 0};
    if (pbd_add_particles(w, &pd, &r) != PBD_OK || pbd_particle_pin(w, r.first) != PBD_OK) return r;
    int *idx = (int *)malloc(sizeof(int) * (size_t)n), starts[2] = {0, n};
    for (int i = 0; idx && i < n; ++i) idx[i] = r.first + i;
    pbd_strands_desc sd = pbd_strands_desc_default();
    sd.particles = idx;
    sd.strand_starts = starts;
    sd.strand_count = 1;
    if (damping >= 0) sd.damping = damping;
    if (!idx || pbd_add_strands(w, &sd, NULL) != PBD_OK) r.count = 0;
    free(idx);
    return r;
}

/* nx * ny * nz points (3 floats each, malloc'd) at the centres of the
   cells of a lattice of spacing d from corner o, x fastest. */
static inline float *pbdt_lattice(int nx, int ny, int nz, float d, const float *o) {
    float *p = (float *)malloc(sizeof(float) * 3 * (size_t)(nx * ny * nz));
    for (int i = 0; p && i < nx * ny * nz; ++i) {
        p[3 * i + 0] = o[0] + (0.5f + (float)(i % nx)) * d;
        p[3 * i + 1] = o[1] + (0.5f + (float)((i / nx) % ny)) * d;
        p[3 * i + 2] = o[2] + (0.5f + (float)(i / (nx * ny))) * d;
    }
    return p;
}

/* A default fluid of n x n x n particles at its default spacing (5 cm)
   from corner o (pbdt_lattice); its particles, or {0, 0} on failure. */
static inline pbd_range pbdt_fluid_cube(pbd_world *w, int n, const float *o) {
    pbd_fluid_desc f = pbd_fluid_desc_default();
    float *p = pbdt_lattice(n, n, n, f.spacing, o);
    pbd_range r = {0, 0};
    f.positions = p;
    f.count = n * n * n;
    if (!p || pbd_add_fluid(w, &f, NULL, &r) != PBD_OK) r.count = 0;
    free(p);
    return r;
}

/* The world's snapshot (pbd_world_save) in a malloc'd buffer of *n bytes
   (*n 0 when the save failed): for "bad input changes nothing" checks. */
static inline unsigned char *pbdt_save(const pbd_world *w, size_t *n) {
    *n = pbd_world_snapshot_size(w);
    unsigned char *b = (unsigned char *)malloc(*n ? *n : 1);
    if (!b || pbd_world_save(w, b, *n) != PBD_OK) *n = 0;
    return b;
}

#ifdef PBD_UPSAMPLE_H_INCLUDED /* (a test that includes pbd_upsample.h before this file) */
/* A wrinkle mesh's desc with the defaults for coarse mesh c and fine mesh f. */
static inline pbd_up_wrinkle_desc pbdt_wrinkle_desc(const pbd_mesh *c, const pbd_mesh *f) {
    pbd_up_wrinkle_desc d = pbd_up_wrinkle_desc_default();
    d.coarse_positions = c->positions;
    d.coarse_count = c->vertex_count;
    d.coarse_triangles = c->triangles;
    d.coarse_triangle_count = c->triangle_count;
    d.fine_positions = f->positions;
    d.fine_count = f->vertex_count;
    d.fine_triangles = f->triangles;
    d.fine_triangle_count = f->triangle_count;
    return d;
}
#endif

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
