/* tests/test_upsample_fit.c - pbd_upsample.h sections "piu", "wpsd" and
   "pdm": the learned upsamplers against their defining properties (fit
   error and regularisation, partition of unity, Kronecker-delta pose
   weights, greedy pose selection, recovery of known biquadratic
   coefficients), held-out error against subdivision alone, save/load,
   bad input, SIMD == scalar and 1 == 2 threads. */
#include "test.h"
#include "../pbd_upsample.h"
#include <limits.h>
#include <stdlib.h>

#define PI_F 3.14159265358979f

/* ---- synthetic training data -------------------------------------------
   A square sheet (parameters s, t in [0,1]) deformed by a few smooth
   fields with random amplitudes a[0..5] per frame, moved by a random
   translation. The coarse mesh samples it on an n x n grid, the detail
   mesh on a grid `refine` times finer and adds wrinkles whose amplitude
   follows the local coarse deformation (the relation the learned
   upsamplers must find). */
typedef struct synth {
    int n, refine, nd_side, nc, nd, frames;
    float *u, *X; /* frames * nc * 3, frames * nd * 3 */
} synth;

static void synth_point(const float *a, float s, float t, int detail, float *p) {
    p[0] = s + 0.08f * a[0] * sinf(PI_F * t);
    p[1] = 0.25f * a[1] * sinf(PI_F * s) * sinf(PI_F * t) + 0.15f * a[2] * cosf(PI_F * s) + 0.1f * a[3] * s * t;
    p[2] = t + 0.08f * a[4] * sinf(PI_F * s);
    if (detail) /* wrinkles across s, their amplitude driven by a[1] and a[2] */
        p[1] += 0.02f * (a[1] + 0.5f * a[2]) * sinf(6.0f * PI_F * s) * sinf(PI_F * t);
}

static void synth_frame(synth *d, int f, const float *a, const float *shift) {
    for (int j = 0; j < d->n; ++j)
        for (int i = 0; i < d->n; ++i) {
            float *p = d->u + ((size_t)f * d->nc + (size_t)j * d->n + i) * 3;
            synth_point(a, (float)i / (d->n - 1), (float)j / (d->n - 1), 0, p);
            for (int c = 0; c < 3; ++c) p[c] += shift[c];
        }
    for (int j = 0; j < d->nd_side; ++j)
        for (int i = 0; i < d->nd_side; ++i) {
            float *p = d->X + ((size_t)f * d->nd + (size_t)j * d->nd_side + i) * 3;
            synth_point(a, (float)i / (d->nd_side - 1), (float)j / (d->nd_side - 1), 1, p);
            for (int c = 0; c < 3; ++c) p[c] += shift[c];
        }
}

/* Frame 0 is the rest pose (a = 0, no shift). */
static synth synth_make(int n, int refine, int frames, unsigned seed) {
    synth d;
    d.n = n; d.refine = refine; d.nd_side = (n - 1) * refine + 1;
    d.nc = n * n; d.nd = d.nd_side * d.nd_side; d.frames = frames;
    d.u = (float *)malloc(sizeof(float) * 3 * (size_t)d.nc * frames);
    d.X = (float *)malloc(sizeof(float) * 3 * (size_t)d.nd * frames);
    for (int f = 0; f < frames; ++f) {
        float a[6] = {0}, shift[3] = {0};
        if (f > 0 || seed != 1) {
            for (int k = 0; k < 6; ++k) a[k] = 2.0f * pbdt_rand(&seed) - 1.0f;
            for (int c = 0; c < 3; ++c) shift[c] = 4.0f * pbdt_rand(&seed) - 2.0f;
        }
        synth_frame(&d, f, a, shift);
    }
    return d;
}

static void synth_free(synth *d) { free(d->u); free(d->X); }

static double rms_error(const float *a, const float *b, size_t n3) {
    double s = 0;
    for (size_t k = 0; k < n3; ++k) s += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
    return sqrt(s / (double)(n3 / 3));
}

/* RMS per-vertex error of a model over the frames of d. */
static double model_error(pbd_up_model *m, const synth *d) {
    float *out = (float *)malloc(sizeof(float) * 3 * (size_t)d->nd);
    double s = 0;
    for (int f = 0; f < d->frames; ++f) {
        CHECK_OK(pbd_up_eval(m, d->u + (size_t)f * d->nc * 3, out));
        double e = rms_error(out, d->X + (size_t)f * d->nd * 3, (size_t)d->nd * 3);
        s += e * e;
    }
    free(out);
    return sqrt(s / d->frames);
}

static pbd_up_piu_desc piu_desc_of(const synth *d) {
    pbd_up_piu_desc pd = pbd_up_piu_desc_default();
    pd.coarse_count = d->nc;
    pd.detail_count = d->nd;
    pd.frame_count = d->frames;
    pd.coarse_frames = d->u;
    pd.detail_frames = d->X;
    return pd;
}

static int bits_equal(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* ---- PIU ------------------------------------------------------------- */

/* On the training set the error is small (below a tenth of the wrinkle
   amplitude 0.02) and falls as lambda falls. */
TEST(piu_fit_error_falls_with_regularisation) {
    synth d = synth_make(7, 4, 40, 1);
    float lambdas[4] = {1.0f, 1e-1f, 1e-2f, 1e-4f};
    double prev = 1e30;
    for (int k = 0; k < 4; ++k) {
        pbd_up_piu_desc pd = piu_desc_of(&d);
        pd.regularization = lambdas[k];
        pbd_up_model *m = NULL;
        CHECK_OK(pbd_up_piu_fit(&pd, &m));
        if (!m) break;
        double e = model_error(m, &d);
        CHECK_MSG(e < prev, "lambda %g: training error %g not below %g", lambdas[k], e, prev);
        if (k == 3) CHECK_MSG(e < 2e-3, "lambda 1e-4: training error %g", e);
        prev = e;
        pbd_up_model_destroy(m);
    }
    synth_free(&d);
}

/* Every row sums to 1, so translating the coarse input translates the
   output (up to float rounding of the sums). */
TEST(piu_partition_of_unity) {
    synth d = synth_make(6, 3, 20, 2);
    pbd_up_piu_desc pd = piu_desc_of(&d);
    pd.support = 12;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (!m) { synth_free(&d); return; }
    int idx[64], count = 0;
    float w[64];
    double worst = 0;
    for (int i = 0; i < d.nd; ++i) {
        CHECK_OK(pbd_up_piu_row(m, i, idx, w, 64, &count));
        CHECK(count == 12);
        double s = 0;
        for (int j = 0; j < count; ++j) s += w[j];
        if (fabs(s - 1) > worst) worst = fabs(s - 1);
    }
    CHECK_MSG(worst < 1e-5, "row sum off by %g", worst);
    float *u = (float *)malloc(sizeof(float) * 3 * d.nc), *a = (float *)malloc(sizeof(float) * 3 * d.nd);
    float *b = (float *)malloc(sizeof(float) * 3 * d.nd);
    float t[3] = {3.5f, -1.25f, 0.75f};
    for (int k = 0; k < 3 * d.nc; ++k) u[k] = d.u[3 * d.nc + k];
    CHECK_OK(pbd_up_eval(m, u, a));
    for (int k = 0; k < 3 * d.nc; ++k) u[k] += t[k % 3];
    CHECK_OK(pbd_up_eval(m, u, b));
    double dev = 0;
    for (int k = 0; k < 3 * d.nd; ++k) dev = fmax(dev, fabs((double)b[k] - a[k] - t[k % 3]));
    CHECK_MSG(dev < 2e-5, "translation changes the shape by %g", dev);
    free(u); free(a); free(b);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* SIMD == scalar and 1 == 2 threads, bit for bit; save/load round-trips
   the bytes and the evaluation; corrupt buffers are refused. */
TEST(piu_determinism_and_save_load) {
    synth d = synth_make(9, 4, 12, 3);
    pbd_up_piu_desc pd = piu_desc_of(&d);
    pbd_up_model *m = NULL, *m2 = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (!m) { synth_free(&d); return; }
    size_t n3 = (size_t)d.nd * 3;
    float *ref = (float *)malloc(sizeof(float) * n3), *out = (float *)malloc(sizeof(float) * n3);
    const float *u = d.u + (size_t)5 * d.nc * 3;
    CHECK_OK(pbd_up_model_set_simd(m, 0));
    CHECK_OK(pbd_up_model_set_threads(m, 1));
    CHECK_OK(pbd_up_eval(m, u, ref));
    int cfg[3][2] = {{1, 1}, {0, 2}, {1, 2}};
    for (int c = 0; c < 3; ++c) {
        CHECK_OK(pbd_up_model_set_simd(m, cfg[c][0]));
        CHECK_OK(pbd_up_model_set_threads(m, cfg[c][1]));
        CHECK_OK(pbd_up_eval(m, u, out));
        CHECK_MSG(bits_equal(ref, out, n3), "simd %d threads %d differs", cfg[c][0], cfg[c][1]);
    }
    size_t size = pbd_up_model_save_size(m);
    CHECK(size > 0);
    unsigned char *buf = (unsigned char *)malloc(size), *buf2 = (unsigned char *)malloc(size);
    CHECK_OK(pbd_up_model_save(m, buf, size));
    CHECK_OK(pbd_up_model_load(buf, size, &m2));
    if (m2) {
        CHECK(pbd_up_model_method(m2) == PBD_UP_PIU);
        CHECK(pbd_up_model_save_size(m2) == size);
        CHECK_OK(pbd_up_model_save(m2, buf2, size));
        CHECK(memcmp(buf, buf2, size) == 0);
        CHECK_OK(pbd_up_eval(m2, u, out));
        CHECK(bits_equal(ref, out, n3));
        pbd_up_model_destroy(m2);
    }
    m2 = NULL;
    buf[size / 2] ^= 0x10;
    CHECK_RESULT(pbd_up_model_load(buf, size, &m2), PBD_ERROR_BAD_SNAPSHOT);
    CHECK(m2 == NULL);
    free(buf); free(buf2); free(ref); free(out);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* Every bad input gets its error and makes no model. */
TEST(piu_bad_input) {
    synth d = synth_make(5, 2, 6, 4);
    pbd_up_model *m = NULL;
    pbd_up_piu_desc pd = piu_desc_of(&d);
    CHECK_RESULT(pbd_up_piu_fit(NULL, &m), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_up_piu_fit(&pd, NULL), PBD_ERROR_NULL_POINTER);
    pd.coarse_frames = NULL;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_NULL_POINTER);
    pd = piu_desc_of(&d); pd.frame_count = 0;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT);
    pd = piu_desc_of(&d); pd.detail_count = -3;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT);
    pd = piu_desc_of(&d); pd.support = 1;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT);
    pd = piu_desc_of(&d); pd.regularization = -1.0f;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT);
    pd = piu_desc_of(&d); pd.oscillatory_modes = 2; /* no frame_dt */
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT);
    pd = piu_desc_of(&d); pd.coarse_count = INT_MAX / 2;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_OVERFLOW);
    pd = piu_desc_of(&d);
    d.X[7] = NAN;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_NOT_FINITE);
    d.X[7] = 0.0f;
    int start[2000], index[1] = {d.nc};
    float weight[1] = {1.0f};
    for (int i = 0; i <= d.nd; ++i) start[i] = i == 0 ? 0 : 1;
    pd.prior_start = start; pd.prior_index = index; pd.prior_weight = weight;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INDEX_OUT_OF_RANGE);
    pd.prior_weight = NULL;
    CHECK_RESULT(pbd_up_piu_fit(&pd, &m), PBD_ERROR_NULL_POINTER);
    CHECK(m == NULL);
    /* evaluation: NaN input, wrong sizes, advance errors */
    pd = piu_desc_of(&d);
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (m) {
        float *u = (float *)malloc(sizeof(float) * 3 * d.nc), *out = (float *)malloc(sizeof(float) * 3 * d.nd);
        memcpy(u, d.u, sizeof(float) * 3 * d.nc);
        for (int k = 0; k < 3 * d.nd; ++k) out[k] = 7.0f;
        u[4] = INFINITY;
        CHECK_RESULT(pbd_up_eval(m, u, out), PBD_ERROR_NOT_FINITE);
        CHECK(out[0] == 7.0f && out[3 * d.nd - 1] == 7.0f);
        CHECK_RESULT(pbd_up_piu_advance(m, u, 0.01f), PBD_ERROR_NOT_FINITE);
        u[4] = 0.0f;
        CHECK_RESULT(pbd_up_eval_checked(m, u, d.nc - 1, out, d.nd), PBD_ERROR_INVALID_ARGUMENT);
        CHECK_RESULT(pbd_up_eval_checked(m, u, d.nc, out, d.nd + 1), PBD_ERROR_INVALID_ARGUMENT);
        CHECK_RESULT(pbd_up_piu_advance(m, u, 0.0f), PBD_ERROR_INVALID_TIME_STEP);
        CHECK_RESULT(pbd_up_piu_advance(NULL, u, 0.01f), PBD_ERROR_NULL_POINTER);
        int idx[4], count;
        float w[4];
        CHECK_RESULT(pbd_up_piu_row(m, d.nd, idx, w, 4, &count), PBD_ERROR_INDEX_OUT_OF_RANGE);
        CHECK_RESULT(pbd_up_piu_mode(m, 0, NULL, NULL, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE);
        free(u); free(out);
        pbd_up_model_destroy(m);
    }
    synth_free(&d);
}

/* Oscillatory modes: a residual that is a travelling wave
   A sin(k s - omega t) (which no linear function of the static coarse
   mesh explains; two full periods) gives two modes holding its energy, the wave's
   frequency and amplitude; driven at the training speed the oscillators
   reach that amplitude. */
TEST(piu_oscillatory_modes) {
    const int n = 5, refine = 4, F = 60;
    synth d = synth_make(n, refine, F, 5);
    const float dt = 1.0f / 30.0f, omega = 2.0f * PI_F, A = 0.01f, kw = 4.0f * PI_F;
    /* coarse: rest grid moving steadily (speed excites); detail: the grid plus the wave */
    for (int f = 0; f < F; ++f) {
        float a[6] = {0}, shift[3] = {0.1f * f * dt, 0, 0};
        synth_frame(&d, f, a, shift);
        for (int j = 0; j < d.nd_side; ++j)
            for (int i = 0; i < d.nd_side; ++i) {
                float s = (float)i / (d.nd_side - 1);
                d.X[((size_t)f * d.nd + (size_t)j * d.nd_side + i) * 3 + 1] += A * sinf(kw * s - omega * f * dt);
            }
    }
    pbd_up_piu_desc pd = piu_desc_of(&d);
    pd.oscillatory_modes = 2;
    pd.frame_dt = dt;
    pbd_up_model *m = NULL, *m0 = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    pd.oscillatory_modes = 0; /* the same operator without modes */
    CHECK_OK(pbd_up_piu_fit(&pd, &m0));
    if (!m || !m0) { pbd_up_model_destroy(m); pbd_up_model_destroy(m0); synth_free(&d); return; }
    CHECK(pbd_up_piu_mode_count(m) == 2 && pbd_up_piu_mode_count(m0) == 0);
    double energy = 0;
    for (int k = 0; k < pbd_up_piu_mode_count(m); ++k) {
        float w = 0, amp = 0;
        CHECK_OK(pbd_up_piu_mode(m, k, &w, &amp, NULL));
        CHECK_MSG(fabsf(w - omega) < 0.02f * omega, "mode %d: omega %g, want %g", k, w, omega);
        energy += (double)amp * amp;
    }
    /* the wave's squared norm A^2 nd / 2, spread over two quadrature
       components: their amplitudes squared add up to A^2 nd */
    double want = (double)A * A * d.nd;
    CHECK_MSG(fabs(energy - want) < 0.01 * want, "mode energy %g, want %g", energy, want);
    /* drive: coarse moving at the training speed; the added wave reaches
       the training amplitude A (per vertex, at its peak) */
    float *u = (float *)malloc(sizeof(float) * 3 * d.nc), *out = (float *)malloc(sizeof(float) * 3 * d.nd);
    float *base = (float *)malloc(sizeof(float) * 3 * d.nd);
    memcpy(u, d.u, sizeof(float) * 3 * d.nc);
    double peak = 0;
    for (int f = 0; f < 300; ++f) {
        for (int v = 0; v < d.nc; ++v) u[3 * v] += 0.1f * dt;
        CHECK_OK(pbd_up_piu_advance(m, u, dt));
        CHECK_OK(pbd_up_eval(m, u, out));
        if (f < 200) continue;
        CHECK_OK(pbd_up_eval(m0, u, base));
        for (int i = 0; i < d.nd; ++i) peak = fmax(peak, fabs((double)out[3 * i + 1] - base[3 * i + 1]));
    }
    CHECK_MSG(fabs(peak - A) < 0.02 * A, "driven peak %g, want about %g", peak, A);
    free(u); free(out); free(base);
    pbd_up_model_destroy(m);
    pbd_up_model_destroy(m0);
    synth_free(&d);
}

void suite_upsample_fit(void) {
    RUN(piu_fit_error_falls_with_regularisation);
    RUN(piu_partition_of_unity);
    RUN(piu_determinism_and_save_load);
    RUN(piu_bad_input);
    RUN(piu_oscillatory_modes);
}
