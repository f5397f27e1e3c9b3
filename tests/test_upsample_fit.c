/* tests/test_upsample_fit.c - pbd_upsample.h sections "piu", "wpsd" and
   "pdm": the learned upsamplers against their defining properties (fit
   error and regularisation, partition of unity, Kronecker-delta pose
   weights, greedy pose selection, recovery of known biquadratic
   coefficients), held-out error against subdivision alone, save/load,
   bad input, SIMD == scalar and 1 == 2 threads. */
#include "test.h"
#include "check_error.h"
#include "../pbd_upsample.h"
#include <limits.h>
#include <stdlib.h>

#define PI_F 3.14159265358979f

/* ---- synthetic training data -------------------------------------------
   A square sheet (parameters s, t in [0,1]) deformed by a few smooth
   fields with random amplitudes a[0..5] per frame, moved by a random
   translation. The coarse mesh samples it on an n x n grid, the detail
   mesh at the vertices of `levels` of subdivision of that grid (the
   parameters from linear subdivision, the numbering of Loop's) and adds
   wrinkles whose amplitude follows the local coarse deformation (the
   relation the learned upsamplers must find). */
typedef struct synth {
    int n, nc, nd, frames;
    float *u, *X;  /* frames * nc * 3, frames * nd * 3 */
    pbd_mesh grid; /* the coarse grid in parameter space (s, 0, t) */
    float *param;  /* nd * 3: detail parameters */
    pbd_up_model *sub;
} synth;

static void synth_point(const float *a, float s, float t, int detail, float *p) {
    p[0] = s + 0.08f * a[0] * sinf(PI_F * t);
    p[1] = 0.25f * a[1] * sinf(PI_F * s) * sinf(PI_F * t) + 0.15f * a[2] * cosf(PI_F * s) + 0.1f * a[3] * s * t;
    p[2] = t + 0.08f * a[4] * sinf(PI_F * s);
    if (detail) /* wrinkles across s, their amplitude driven by a[1] and a[2] */
        p[1] += 0.02f * (a[1] + 0.5f * a[2]) * sinf(6.0f * PI_F * s) * sinf(PI_F * t);
}

static void synth_frame(synth *d, int f, const float *a, const float *shift) {
    for (int v = 0; v < d->nc; ++v) {
        float *p = d->u + ((size_t)f * d->nc + v) * 3;
        synth_point(a, d->grid.positions[3 * v], d->grid.positions[3 * v + 2], 0, p);
        for (int c = 0; c < 3; ++c) p[c] += shift[c];
    }
    for (int i = 0; i < d->nd; ++i) {
        float *p = d->X + ((size_t)f * d->nd + i) * 3;
        synth_point(a, d->param[3 * i], d->param[3 * i + 2], 1, p);
        for (int c = 0; c < 3; ++c) p[c] += shift[c];
    }
}

/* With seed 1, frame 0 is the rest pose (a = 0, no shift). */
static synth synth_make(int n, int levels, int frames, unsigned seed) {
    synth d;
    memset(&d, 0, sizeof d);
    float o[3] = {0, 0, 0}, du[3] = {1, 0, 0}, dv[3] = {0, 0, 1};
    pbd_mesh_grid(n, n, o, du, dv, &d.grid);
    pbd_mesh fine;
    pbd_up_mesh_subdivide(&d.grid, levels, 0, &fine);
    CHECK_OK(pbd_up_subdivision_create(d.grid.triangles, d.grid.triangle_count, d.grid.vertex_count, levels, &d.sub));
    d.n = n;
    d.nc = n * n;
    d.nd = fine.vertex_count;
    d.frames = frames;
    d.param = (float *)malloc(sizeof(float) * 3 * (size_t)d.nd);
    memcpy(d.param, fine.positions, sizeof(float) * 3 * (size_t)d.nd);
    pbd_up_mesh_free(&fine);
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

static void synth_free(synth *d) {
    free(d->u);
    free(d->X);
    free(d->param);
    pbd_mesh_free(&d->grid);
    pbd_up_model_destroy(d->sub);
}

static double rms_error(const float *a, const float *b, size_t n3) {
    double s = 0;
    for (size_t k = 0; k < n3; ++k) s += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
    return sqrt(s / (double)(n3 / 3));
}

/* RMS per-vertex error of a model over the frames of d. */
static double model_error(pbd_up_model *m, const synth *d) {
    float *out = (float *)malloc(sizeof(float) * 3 * (size_t)d->nd);
    pbd_up_model_set_threads(m, 1); /* small meshes: no thread team spinning on a busy machine */
    double s = 0;
    for (int f = 0; f < d->frames; ++f) {
        CHECK_OK(pbd_up_model_eval(m, d->u + (size_t)f * d->nc * 3, out));
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
static void check_roundtrip_and_determinism(pbd_up_model *m, const float *u, int nd);

/* ---- PIU ------------------------------------------------------------- */

/* On the training set the error is small (below a tenth of the wrinkle
   amplitude 0.02) and falls as lambda falls. */
TEST(piu_fit_error_falls_with_regularisation) {
    synth d = synth_make(7, 2, 40, 1);
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
    synth d = synth_make(6, 2, 20, 2);
    pbd_up_piu_desc pd = piu_desc_of(&d);
    pd.support = 12;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (!m) {
        synth_free(&d);
        return;
    }
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
    CHECK_OK(pbd_up_model_eval(m, u, a));
    for (int k = 0; k < 3 * d.nc; ++k) u[k] += t[k % 3];
    CHECK_OK(pbd_up_model_eval(m, u, b));
    double dev = 0;
    for (int k = 0; k < 3 * d.nd; ++k) dev = fmax(dev, fabs((double)b[k] - a[k] - t[k % 3]));
    CHECK_MSG(dev < 2e-5, "translation changes the shape by %g", dev);
    free(u);
    free(a);
    free(b);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* SIMD == scalar and 1 == 2 threads, bit for bit; save/load round-trips
   the bytes and the evaluation; corrupt buffers are refused. */
TEST(piu_determinism_and_save_load) {
    pbdt_parity(PBDT_SIMD, PBDT_THREADS); /* save/load is checked in every build */
    synth d = synth_make(9, 2, 12, 3);
    pbd_up_piu_desc pd = piu_desc_of(&d);
    pbd_up_model *m = NULL, *m2 = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (!m) {
        synth_free(&d);
        return;
    }
    size_t n3 = (size_t)d.nd * 3;
    float *ref = (float *)malloc(sizeof(float) * n3), *out = (float *)malloc(sizeof(float) * n3);
    const float *u = d.u + (size_t)5 * d.nc * 3;
    CHECK_OK(pbd_up_model_set_simd(m, 0));
    CHECK_OK(pbd_up_model_set_threads(m, 1));
    CHECK_OK(pbd_up_model_eval(m, u, ref));
    int cfg[3][2] = {{1, 1}, {0, 2}, {1, 2}};
    for (int c = 0; c < 3; ++c) {
        CHECK_OK(pbd_up_model_set_simd(m, cfg[c][0]));
        CHECK_OK(pbd_up_model_set_threads(m, cfg[c][1]));
        CHECK_OK(pbd_up_model_eval(m, u, out));
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
        CHECK_OK(pbd_up_model_eval(m2, u, out));
        CHECK(bits_equal(ref, out, n3));
        pbd_up_model_destroy(m2);
    }
    m2 = NULL;
    buf[size / 2] ^= 0x10;
    CHECK_ERROR(pbd_up_model_load(buf, size, &m2), PBD_ERROR_BAD_SNAPSHOT,
                "checksum mismatch: the model file is damaged (106840 bytes)");
    CHECK(m2 == NULL);
    free(buf);
    free(buf2);
    free(ref);
    free(out);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* Every bad input gets its error and makes no model. */
TEST(piu_bad_input) {
    synth d = synth_make(5, 1, 6, 4);
    pbd_up_model *m = NULL;
    pbd_up_piu_desc pd = piu_desc_of(&d);
    CHECK_ERROR(pbd_up_piu_fit(NULL, &m), PBD_ERROR_NULL_POINTER, "desc is NULL");
    CHECK_ERROR(pbd_up_piu_fit(&pd, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    pd.coarse_frames = NULL;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_NULL_POINTER, "pbd_up_piu_desc.coarse_frames is NULL");
    pd = piu_desc_of(&d);
    pd.frame_count = 0;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "frame_count 0 must be >= 1");
    pd = piu_desc_of(&d);
    pd.detail_count = -3;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "detail_count -3");
    pd = piu_desc_of(&d);
    pd.support = 1;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "support 1 outside 2..64");
    pd = piu_desc_of(&d);
    pd.regularization = -1.0f;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "regularization -1 must be finite and >= 0");
    pd = piu_desc_of(&d);
    pd.oscillatory_modes = 2; /* no frame_dt */
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "2 oscillatory_modes need frame_dt > 0 (0)");
    pd = piu_desc_of(&d);
    pd.coarse_count = INT_MAX / 2;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_OVERFLOW,
                "coarse_count 1073741823, detail_count 81 and frame_count 6 are too large for memory");
    pd = piu_desc_of(&d);
    d.X[7] = NAN;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_NOT_FINITE, "detail_frames contain NaN or infinity (6 frames)");
    d.X[7] = 0.0f;
    int start[2000], index[1] = {d.nc};
    float weight[1] = {1.0f};
    for (int i = 0; i <= d.nd; ++i) start[i] = i == 0 ? 0 : 1;
    pd.prior_start = start;
    pd.prior_index = index;
    pd.prior_weight = weight;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_INDEX_OUT_OF_RANGE,
                "prior_index[0] = 25 is not a coarse vertex (0..24)");
    pd.prior_weight = NULL;
    CHECK_ERROR(pbd_up_piu_fit(&pd, &m), PBD_ERROR_NULL_POINTER,
                "give all three of prior_start, prior_index and prior_weight, or none (2 given)");
    CHECK(m == NULL);
    /* evaluation: NaN input, wrong sizes, advance errors */
    pd = piu_desc_of(&d);
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (m) {
        float *u = (float *)malloc(sizeof(float) * 3 * d.nc), *out = (float *)malloc(sizeof(float) * 3 * d.nd);
        memcpy(u, d.u, sizeof(float) * 3 * d.nc);
        for (int k = 0; k < 3 * d.nd; ++k) out[k] = 7.0f;
        u[4] = INFINITY;
        CHECK_ERROR(pbd_up_model_eval(m, u, out), PBD_ERROR_NOT_FINITE,
                    "coarse_positions contain NaN or infinity (25 vertices)");
        CHECK(out[0] == 7.0f && out[3 * d.nd - 1] == 7.0f);
        CHECK_ERROR(pbd_up_piu_advance(m, u, 0.01f), PBD_ERROR_NOT_FINITE,
                    "coarse contains NaN or infinity (25 vertices)");
        u[4] = 0.0f;
        CHECK_ERROR(pbd_up_model_eval_checked(m, u, d.nc - 1, out, d.nd), PBD_ERROR_INVALID_ARGUMENT,
                    "coarse_count 24");
        CHECK_ERROR(pbd_up_model_eval_checked(m, u, d.nc, out, d.nd + 1), PBD_ERROR_INVALID_ARGUMENT,
                    "coarse_count 25");
        CHECK_ERROR(pbd_up_piu_advance(m, u, 0.0f), PBD_ERROR_INVALID_TIME_STEP, "dt 0");
        CHECK_ERROR(pbd_up_piu_advance(NULL, u, 0.01f), PBD_ERROR_NULL_POINTER, "m is NULL");
        int idx[4], count;
        float w[4];
        CHECK_ERROR(pbd_up_piu_row(m, d.nd, idx, w, 4, &count), PBD_ERROR_INDEX_OUT_OF_RANGE, "detail_vertex 81");
        CHECK_ERROR(pbd_up_piu_mode(m, 0, NULL, NULL, NULL), PBD_ERROR_INDEX_OUT_OF_RANGE,
                    "mode 0, but the model has 0 oscillatory modes");
        free(u);
        free(out);
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
    const int F = 60;
    synth d = synth_make(5, 2, F, 5);
    const float dt = 1.0f / 30.0f, omega = 2.0f * PI_F, A = 0.01f, kw = 4.0f * PI_F;
    /* coarse: rest grid moving steadily (speed excites); detail: the grid plus the wave */
    for (int f = 0; f < F; ++f) {
        float a[6] = {0}, shift[3] = {0.1f * f * dt, 0, 0};
        synth_frame(&d, f, a, shift);
        for (int i = 0; i < d.nd; ++i)
            d.X[((size_t)f * d.nd + i) * 3 + 1] += A * sinf(kw * d.param[3 * i] - omega * f * dt);
    }
    pbd_up_piu_desc pd = piu_desc_of(&d);
    pd.oscillatory_modes = 2;
    pd.frame_dt = dt;
    pbd_up_model *m = NULL, *m0 = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    pd.oscillatory_modes = 0; /* the same operator without modes */
    CHECK_OK(pbd_up_piu_fit(&pd, &m0));
    if (!m || !m0) {
        pbd_up_model_destroy(m);
        pbd_up_model_destroy(m0);
        synth_free(&d);
        return;
    }
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
        CHECK_OK(pbd_up_model_eval(m, u, out));
        if (f < 200) continue;
        CHECK_OK(pbd_up_model_eval(m0, u, base));
        for (int i = 0; i < d.nd; ++i) peak = fmax(peak, fabs((double)out[3 * i + 1] - base[3 * i + 1]));
    }
    CHECK_MSG(fabs(peak - A) < 0.02 * A, "driven peak %g, want about %g", peak, A);
    /* the oscillator state is part of the model: save/load and threads keep the bits */
    check_roundtrip_and_determinism(m, u, d.nd);
    free(u);
    free(out);
    free(base);
    pbd_up_model_destroy(m);
    pbd_up_model_destroy(m0);
    synth_free(&d);
}

/* On held-out frames the learned operator beats subdivision alone (which
   shrinks the sheet and has no wrinkles); the subdivision stencil is the
   prior. */
TEST(piu_held_out_beats_subdivision) {
    synth train = synth_make(7, 2, 40, 11), test = synth_make(7, 2, 10, 12);
    pbd_up_piu_desc pd = piu_desc_of(&train);
    pd.subdivision = train.sub;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    if (m) {
        double e_piu = model_error(m, &test), e_sub = model_error(test.sub, &test);
        CHECK_MSG(e_piu < 0.5 * e_sub, "held-out: piu %g, subdivision %g", e_piu, e_sub);
        pbd_up_model_destroy(m);
    }
    synth_free(&train);
    synth_free(&test);
}

/* ---- WPSD ------------------------------------------------------------ */

static pbd_up_wpsd_desc wpsd_desc_of(const synth *d) {
    pbd_up_wpsd_desc wd = pbd_up_wpsd_desc_default();
    wd.subdivision = d->sub;
    wd.coarse_triangles = d->grid.triangles;
    wd.coarse_triangle_count = d->grid.triangle_count;
    wd.frame_count = d->frames;
    wd.coarse_count = d->nc;
    wd.detail_count = d->nd;
    wd.coarse_frames = d->u;
    wd.detail_frames = d->X;
    return wd;
}

/* At the coarse configuration of each training pose the pose weights are
   Kronecker deltas, at the feature vertices and (through the subdivision
   weights, which sum to 1) at the detail vertices. */
TEST(wpsd_kronecker_pose_weights) {
    synth d = synth_make(6, 1, 16, 21);
    pbd_up_wpsd_desc wd = wpsd_desc_of(&d);
    wd.max_poses = 6;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_wpsd_fit(&wd, &m));
    if (!m) {
        synth_free(&d);
        return;
    }
    int frames[8], P = 0;
    CHECK_OK(pbd_up_wpsd_selection(m, frames, NULL, 8, &P));
    CHECK(P == 6);
    float *wc = (float *)malloc(sizeof(float) * (size_t)d.nc * P),
          *wdt = (float *)malloc(sizeof(float) * (size_t)d.nd * P);
    double worst = 0, worst_d = 0;
    for (int i = 0; i < P; ++i) {
        CHECK_OK(pbd_up_wpsd_weights(m, d.u + (size_t)frames[i] * d.nc * 3, wc, wdt));
        for (int v = 0; v < d.nc; ++v)
            for (int j = 0; j < P; ++j) worst = fmax(worst, fabs(wc[v * P + j] - (i == j)));
        for (int v = 0; v < d.nd; ++v)
            for (int j = 0; j < P; ++j) worst_d = fmax(worst_d, fabs(wdt[v * P + j] - (i == j)));
    }
    CHECK_MSG(worst < 1e-4, "feature vertices: weights off the Kronecker delta by %g", worst);
    CHECK_MSG(worst_d < 1e-4, "detail vertices: weights off the Kronecker delta by %g", worst_d);
    free(wc);
    free(wdt);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* Greedy selection stops as soon as the training error reaches the
   threshold: with the threshold between the errors after 3 and 4 poses it
   takes exactly 4; the errors reported are the model's real training
   errors. */
TEST(wpsd_greedy_selection_stops_at_threshold) {
    synth d = synth_make(6, 1, 16, 22);
    pbd_up_wpsd_desc wd = wpsd_desc_of(&d);
    wd.max_poses = 8;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_wpsd_fit(&wd, &m));
    if (!m) {
        synth_free(&d);
        return;
    }
    int P = 0, frames[8];
    float err[8];
    CHECK_OK(pbd_up_wpsd_selection(m, frames, err, 8, &P));
    CHECK(P == 8);
    CHECK(err[7] < err[0]);
    pbd_up_model_destroy(m);
    m = NULL;
    wd.error_threshold = 0.5f * (err[2] + err[3]);
    CHECK_MSG(err[2] > wd.error_threshold && err[3] <= wd.error_threshold, "errors %g %g", err[2], err[3]);
    CHECK_OK(pbd_up_wpsd_fit(&wd, &m));
    if (!m) {
        synth_free(&d);
        return;
    }
    int P2 = 0, frames2[8];
    float err2[8];
    CHECK_OK(pbd_up_wpsd_selection(m, frames2, err2, 8, &P2));
    CHECK(P2 == 4);
    for (int j = 0; j < P2 && j < 4; ++j) CHECK(frames2[j] == frames[j] && err2[j] == err[j]);
    /* the reported final error is the model's RMS error over the training frames */
    double e = model_error(m, &d);
    CHECK_MSG(fabs(e - err2[P2 - 1]) < 1e-4 + 1e-3 * e, "model error %g, reported %g", e, err2[P2 - 1]);
    CHECK(e <= wd.error_threshold * 1.001);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* Held-out frames: pose-space detail beats subdivision alone. */
TEST(wpsd_held_out_beats_subdivision) {
    synth train = synth_make(7, 2, 30, 23), test = synth_make(7, 2, 10, 24);
    pbd_up_wpsd_desc wd = wpsd_desc_of(&train);
    wd.max_poses = 12;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_wpsd_fit(&wd, &m));
    if (m) {
        double e_w = model_error(m, &test), e_sub = model_error(test.sub, &test);
        CHECK_MSG(e_w < 0.7 * e_sub, "held-out: wpsd %g, subdivision %g", e_w, e_sub);
        pbd_up_model_destroy(m);
    }
    synth_free(&train);
    synth_free(&test);
}

/* ---- PDM ------------------------------------------------------------- */

static pbd_up_pdm_desc pdm_desc_of(const synth *d) {
    pbd_up_pdm_desc pd = pbd_up_pdm_desc_default();
    pd.subdivision = d->sub;
    pd.coarse_triangles = d->grid.triangles;
    pd.coarse_triangle_count = d->grid.triangle_count;
    pd.frame_count = d->frames;
    pd.coarse_count = d->nc;
    pd.detail_count = d->nd;
    pd.coarse_frames = d->u;
    pd.detail_frames = d->X;
    return pd;
}

/* Detail generated from known biquadratic coefficients along the smooth
   normals (at the model's own strain coordinates) gives those
   coefficients back (relative 1e-4). */
TEST(pdm_recovers_known_coefficients) {
    synth d = synth_make(6, 1, 24, 31);
    for (int f = 0; f < d.frames; ++f) { /* near the origin: float positions resolve the heights */
        float *u = d.u + (size_t)f * d.nc * 3, o[3] = {u[0], u[1], u[2]};
        for (int k = 0; k < 3 * d.nc; ++k) u[k] -= o[k % 3];
    }
    pbd_up_pdm_desc pd = pdm_desc_of(&d);
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_pdm_fit(&pd, &m));
    if (!m) {
        synth_free(&d);
        return;
    }
    float *c = (float *)malloc(sizeof(float) * 6 * (size_t)d.nd);
    unsigned seed = 99;
    for (int k = 0; k < 6 * d.nd; ++k) c[k] = 0.2f * (2.0f * pbdt_rand(&seed) - 1.0f);
    float *uv = (float *)malloc(sizeof(float) * 2 * (size_t)d.nd),
          *x0 = (float *)malloc(sizeof(float) * 3 * (size_t)d.nd);
    float *n = (float *)malloc(sizeof(float) * 3 * (size_t)d.nd);
    double urange = 0;
    for (int f = 0; f < d.frames; ++f) {
        CHECK_OK(pbd_up_pdm_coordinates(m, d.u + (size_t)f * d.nc * 3, uv, x0, n));
        for (int i = 0; i < d.nd; ++i) {
            double a = uv[2 * i], b = uv[2 * i + 1];
            const float *ci = c + 6 * i;
            double h = ci[0] * a * a + ci[1] * b * b + ci[2] * a * b + ci[3] * a + ci[4] * b + ci[5];
            urange = fmax(urange, fmax(fabs(a), fabs(b)));
            for (int k = 0; k < 3; ++k) d.X[((size_t)f * d.nd + i) * 3 + k] = (float)(x0[3 * i + k] + h * n[3 * i + k]);
        }
    }
    CHECK(urange > 0.1); /* the coordinates vary: the fit is not trivial */
    pbd_up_model *m2 = NULL;
    CHECK_OK(pbd_up_pdm_fit(&pd, &m2));
    if (m2) {
        double worst = 0;
        for (int i = 0; i < d.nd; ++i) {
            float got[6];
            CHECK_OK(pbd_up_pdm_coefficients(m2, i, got));
            double num = 0, den = 0;
            for (int k = 0; k < 6; ++k) {
                num += ((double)got[k] - c[6 * i + k]) * ((double)got[k] - c[6 * i + k]);
                den += (double)c[6 * i + k] * c[6 * i + k];
            }
            worst = fmax(worst, sqrt(num / den));
        }
        CHECK_MSG(worst < 1e-4, "coefficients off by %g (relative)", worst);
        /* and evaluation reproduces the training detail */
        float *out = (float *)malloc(sizeof(float) * 3 * (size_t)d.nd);
        CHECK_OK(pbd_up_model_eval(m2, d.u + (size_t)3 * d.nc * 3, out));
        CHECK(rms_error(out, d.X + (size_t)3 * d.nd * 3, (size_t)d.nd * 3) < 1e-5);
        free(out);
        pbd_up_model_destroy(m2);
    }
    free(c);
    free(uv);
    free(x0);
    free(n);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

/* ---- common: save/load, determinism, bad input for wpsd and pdm ------- */

static void check_roundtrip_and_determinism(pbd_up_model *m, const float *u, int nd) {
    pbdt_parity(PBDT_SIMD, PBDT_THREADS); /* save/load is checked in every build */
    size_t n3 = (size_t)nd * 3;
    float *ref = (float *)malloc(sizeof(float) * n3), *out = (float *)malloc(sizeof(float) * n3);
    CHECK_OK(pbd_up_model_set_simd(m, 0));
    CHECK_OK(pbd_up_model_set_threads(m, 1));
    CHECK_OK(pbd_up_model_eval(m, u, ref));
    int cfg[3][2] = {{1, 1}, {0, 2}, {1, 2}};
    for (int c = 0; c < 3; ++c) {
        CHECK_OK(pbd_up_model_set_simd(m, cfg[c][0]));
        CHECK_OK(pbd_up_model_set_threads(m, cfg[c][1]));
        CHECK_OK(pbd_up_model_eval(m, u, out));
        CHECK_MSG(bits_equal(ref, out, n3), "%s: simd %d threads %d differs",
                  pbd_up_method_name(pbd_up_model_method(m)), cfg[c][0], cfg[c][1]);
    }
    size_t size = pbd_up_model_save_size(m);
    unsigned char *buf = (unsigned char *)malloc(size), *buf2 = (unsigned char *)malloc(size);
    pbd_up_model *m2 = NULL;
    CHECK_OK(pbd_up_model_save(m, buf, size));
    CHECK_OK(pbd_up_model_load(buf, size, &m2));
    if (m2) {
        CHECK(pbd_up_model_method(m2) == pbd_up_model_method(m));
        CHECK(pbd_up_model_save_size(m2) == size);
        CHECK_OK(pbd_up_model_save(m2, buf2, size));
        CHECK(memcmp(buf, buf2, size) == 0);
        CHECK_OK(pbd_up_model_eval(m2, u, out));
        CHECK(bits_equal(ref, out, n3));
        pbd_up_model_destroy(m2);
    }
    m2 = NULL;
    CHECK_ERROR(pbd_up_model_load(buf, size - 9, &m2), PBD_ERROR_BAD_SNAPSHOT, NULL);
    buf[size / 3] ^= 0x40;
    CHECK_ERROR(pbd_up_model_load(buf, size, &m2), PBD_ERROR_BAD_SNAPSHOT, NULL);
    CHECK(m2 == NULL);
    free(buf);
    free(buf2);
    free(ref);
    free(out);
}

TEST(wpsd_pdm_determinism_and_save_load) {
    synth d = synth_make(6, 2, 12, 41);
    pbd_up_wpsd_desc wd = wpsd_desc_of(&d);
    wd.max_poses = 5;
    pbd_up_model *m = NULL;
    CHECK_OK(pbd_up_wpsd_fit(&wd, &m));
    if (m) check_roundtrip_and_determinism(m, d.u + (size_t)7 * d.nc * 3, d.nd);
    pbd_up_model_destroy(m);
    m = NULL;
    pbd_up_pdm_desc pd = pdm_desc_of(&d);
    CHECK_OK(pbd_up_pdm_fit(&pd, &m));
    if (m) check_roundtrip_and_determinism(m, d.u + (size_t)7 * d.nc * 3, d.nd);
    pbd_up_model_destroy(m);
    synth_free(&d);
}

TEST(wpsd_pdm_bad_input) {
    synth d = synth_make(5, 1, 8, 42);
    pbd_up_model *m = NULL, *piu = NULL;
    pbd_up_wpsd_desc wd = wpsd_desc_of(&d);
    pbd_up_pdm_desc pd = pdm_desc_of(&d);
    CHECK_ERROR(pbd_up_wpsd_fit(NULL, &m), PBD_ERROR_NULL_POINTER, "d is NULL");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, NULL), PBD_ERROR_NULL_POINTER, "out is NULL");
    wd.subdivision = NULL;
    pd.subdivision = NULL;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_NULL_POINTER, "pbd_up_wpsd_fit: subdivision is NULL");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_NULL_POINTER, "pbd_up_pdm_fit: subdivision is NULL");
    /* a model that is not a subdivision */
    pbd_up_piu_desc qd = piu_desc_of(&d);
    CHECK_OK(pbd_up_piu_fit(&qd, &piu));
    wd = wpsd_desc_of(&d);
    pd = pdm_desc_of(&d);
    wd.subdivision = piu;
    pd.subdivision = piu;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_INVALID_ARGUMENT, "subdivision is not a trained subdivision model");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "subdivision is not a trained subdivision model");
    wd = wpsd_desc_of(&d);
    pd = pdm_desc_of(&d);
    wd.edges_per_vertex = 0;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_INVALID_ARGUMENT, "edges_per_vertex 0 (1..64)");
    wd = wpsd_desc_of(&d);
    wd.error_threshold = NAN;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_INVALID_ARGUMENT, "error_threshold nan (finite, >= 0)");
    wd = wpsd_desc_of(&d);
    wd.max_poses = 0;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_INVALID_ARGUMENT, "max_poses 0 (1..256)");
    pd.frame_count = 5; /* fewer than six coefficients */
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "frame_count 5 must be >= 6");
    pd = pdm_desc_of(&d);
    int bad_tris[3] = {0, 1, d.nc};
    wd = wpsd_desc_of(&d);
    wd.coarse_triangles = bad_tris;
    wd.coarse_triangle_count = 1;
    pd.coarse_triangles = bad_tris;
    pd.coarse_triangle_count = 1;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_INDEX_OUT_OF_RANGE, "triangle 0 names vertex 25, outside 0..24");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_INDEX_OUT_OF_RANGE, "triangle 0 names vertex 25, outside 0..24");
    /* coarse triangles that are not the subdivision model's mesh (an
       audit: one short, or one flipped, fitted with PBD_OK) */
    int *flipped = (int *)malloc(sizeof(int) * 3 * (size_t)d.grid.triangle_count);
    memcpy(flipped, d.grid.triangles, sizeof(int) * 3 * (size_t)d.grid.triangle_count);
    int t0 = flipped[0];
    flipped[0] = flipped[1];
    flipped[1] = t0;
    wd = wpsd_desc_of(&d);
    pd = pdm_desc_of(&d);
    wd.coarse_triangle_count -= 1;
    pd.coarse_triangles = flipped;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_INVALID_ARGUMENT, "not the mesh it was made from");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_INVALID_ARGUMENT, "subdivided triangles differ");
    free(flipped);
    wd = wpsd_desc_of(&d);
    pd = pdm_desc_of(&d);
    d.u[5 * d.nc * 3 + 4] = NAN;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_NOT_FINITE, "coarse_frames contain NaN or infinity (8 frames)");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_NOT_FINITE, "coarse_frames contain NaN or infinity (8 frames)");
    d.u[5 * d.nc * 3 + 4] = 0.0f;
    /* a rest pose with a zero-length edge */
    float *rest = (float *)malloc(sizeof(float) * 3 * d.nc);
    memcpy(rest, d.grid.positions, sizeof(float) * 3 * d.nc);
    memcpy(rest + 3, rest, sizeof(float) * 3);
    wd.coarse_rest = rest;
    pd.coarse_rest = rest;
    CHECK_ERROR(pbd_up_wpsd_fit(&wd, &m), PBD_ERROR_DEGENERATE, "coarse edge (0, 1) has zero rest length");
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_DEGENERATE, "coarse edge (0, 1) has zero rest length");
    free(rest);
    /* every training frame the rest pose: the features are float rounding
       (standard deviations about 1e-8 here), which the unit-variance
       scaling would have blown up to detail vertices kilometres off (an
       independent audit: 149 km on a training frame, PBD_OK) */
    pd = pdm_desc_of(&d);
    float *still = (float *)malloc(sizeof(float) * 3 * (size_t)d.nc * (size_t)d.frames);
    for (int f = 0; f < d.frames; ++f) memcpy(still + (size_t)f * 3 * d.nc, d.grid.positions, sizeof(float) * 3 * d.nc);
    pd.coarse_frames = still;
    pd.coarse_rest = d.grid.positions;
    CHECK_ERROR(pbd_up_pdm_fit(&pd, &m), PBD_ERROR_DEGENERATE, "directions above float rounding");
    free(still);
    CHECK(m == NULL);
    /* queries on the wrong kind of model, NaN input */
    int count;
    float w6[6];
    CHECK_ERROR(pbd_up_wpsd_selection(piu, NULL, NULL, 0, &count), PBD_ERROR_INVALID_ARGUMENT, "m is not a WPSD model");
    CHECK_ERROR(pbd_up_pdm_coefficients(piu, 0, w6), PBD_ERROR_INVALID_ARGUMENT, "m is not a PDM model");
    CHECK_ERROR(pbd_up_piu_advance(d.sub, d.u, 0.01f), PBD_ERROR_INVALID_ARGUMENT, "m is not a PIU model");
    pd = pdm_desc_of(&d);
    CHECK_OK(pbd_up_pdm_fit(&pd, &m));
    if (m) {
        float *uv = (float *)malloc(sizeof(float) * 2 * d.nd);
        d.u[2] = INFINITY;
        CHECK_ERROR(pbd_up_pdm_coordinates(m, d.u, uv, NULL, NULL), PBD_ERROR_NOT_FINITE,
                    "coarse_positions contain NaN or infinity (25 vertices)");
        d.u[2] = 0.0f;
        CHECK_ERROR(pbd_up_pdm_coefficients(m, d.nd, w6), PBD_ERROR_INDEX_OUT_OF_RANGE, "detail_vertex 81");
        free(uv);
        pbd_up_model_destroy(m);
    }
    pbd_up_model_destroy(piu);
    synth_free(&d);
}

/* Finite input whose result is not finite: one coarse coordinate of 1e30 m
   overflows WPSD's edge strains and PDM's features (squared). eval used to
   return PBD_OK with NaN/Inf in the output (618 and 315 values on the
   400 -> 5929 cape); it refuses with PBD_ERROR_NOT_FINITE and leaves the
   output as it was. The model still evaluates a sane pose afterwards. */
TEST(wpsd_pdm_eval_refuses_a_non_finite_result) {
    synth d = synth_make(5, 1, 8, 43);
    pbd_up_model *ms[2] = {NULL, NULL};
    pbd_up_wpsd_desc wd = wpsd_desc_of(&d);
    pbd_up_pdm_desc pd = pdm_desc_of(&d);
    CHECK_OK(pbd_up_wpsd_fit(&wd, &ms[0]));
    CHECK_OK(pbd_up_pdm_fit(&pd, &ms[1]));
    const size_t n3 = (size_t)d.nd * 3;
    float *out = (float *)malloc(sizeof(float) * n3), *good = (float *)malloc(sizeof(float) * n3);
    float *u = (float *)malloc(sizeof(float) * 3 * (size_t)d.nc);
    memcpy(u, d.u + (size_t)3 * d.nc * 3, sizeof(float) * 3 * (size_t)d.nc);
    static const char *const needle[2] = {"the wpsd model made detail vertex", "the pdm model made detail vertex"};
    for (int k = 0; k < 2; ++k) {
        if (!ms[k]) continue;
        CHECK_OK(pbd_up_model_eval(ms[k], u, good));
        for (size_t i = 0; i < n3; ++i) out[i] = 7.0f;
        u[4] = 1e30f;
        CHECK_ERROR(pbd_up_model_eval(ms[k], u, out), PBD_ERROR_NOT_FINITE, needle[k]);
        CHECK_MSG(strstr(pbd_last_error(), "largest coarse coordinate is 1e+30 m") != NULL, "%s", pbd_last_error());
        int touched = 0;
        for (size_t i = 0; i < n3; ++i) touched += out[i] != 7.0f;
        CHECK_MSG(touched == 0, "%s: %d output values changed by a refused eval", needle[k], touched);
        u[4] = d.u[(size_t)3 * d.nc * 3 + 4];
        CHECK_OK(pbd_up_model_eval(ms[k], u, out));
        CHECK(bits_equal(out, good, n3));
        pbd_up_model_destroy(ms[k]);
    }
    free(u);
    free(out);
    free(good);
    synth_free(&d);
}

/* ---- the simulated cape (section "training") ------------------------- */

/* A training set view: frames [f0, f1) of a simulation as a synth-like
   set (the subdivision model of its coarse mesh). */
typedef struct cape {
    pbd_up_training t;
    pbd_up_model *sub;
} cape;

static int cape_make(cape *c, int resolution, int levels, int frames, int scene) {
    memset(c, 0, sizeof *c);
    pbd_up_training_desc td = pbd_up_training_desc_default();
    td.scene = (pbd_up_scene)scene;
    td.coarse_resolution = resolution;
    td.levels = levels;
    td.frames = frames;
    if (pbd_up_training_generate(&td, &c->t) != PBD_OK) return 0;
    if (pbd_up_subdivision_create(c->t.coarse_triangles, c->t.coarse_triangle_count, c->t.coarse_count, levels,
                                  &c->sub) != PBD_OK)
        return 0;
    return 1;
}

static void cape_free(cape *c) {
    pbd_up_training_free(&c->t);
    pbd_up_model_destroy(c->sub);
}

/* RMS per-vertex error of a model over frames [f0, f1). */
static double cape_error(pbd_up_model *m, const cape *c, int f0, int f1) {
    const pbd_up_training *t = &c->t;
    float *out = (float *)malloc(sizeof(float) * 3 * (size_t)t->detail_count);
    pbd_up_model_set_threads(m, 1);
    double s = 0;
    for (int f = f0; f < f1; ++f) {
        CHECK_OK(pbd_up_model_eval(m, t->coarse + (size_t)f * t->coarse_count * 3, out));
        double e = rms_error(out, t->detail + (size_t)f * t->detail_count * 3, (size_t)t->detail_count * 3);
        s += e * e;
    }
    free(out);
    return sqrt(s / (f1 - f0));
}

/* Trained on the first frames of the swinging cape (pbd simulations,
   section "training"), PIU and WPSD beat subdivision alone on the later,
   held-out frames. */
TEST(cape_held_out_beats_subdivision) {
    cape c;
    const int F = 60, train = 40;
    if (!cape_make(&c, 8, 2, F, PBD_UP_SCENE_CAPE)) {
        CHECK(0);
        cape_free(&c);
        return;
    }
    const pbd_up_training *t = &c.t;
    double e_sub = cape_error(c.sub, &c, train, F);
    pbd_up_model *m = NULL;
    pbd_up_piu_desc pd = pbd_up_piu_desc_from(t, c.sub);
    pd.frame_count = train; /* the first frames: the rest test the fit */
    CHECK_OK(pbd_up_piu_fit(&pd, &m));
    double e_piu = m ? cape_error(m, &c, train, F) : 1e30, e_piu_train = m ? cape_error(m, &c, 0, train) : 1e30;
    pbd_up_model_destroy(m);
    m = NULL;
    pbd_up_wpsd_desc wd = pbd_up_wpsd_desc_from(t, c.sub);
    wd.frame_count = train;
    wd.max_poses = 12;
    CHECK_OK(pbd_up_wpsd_fit(&wd, &m));
    double e_wpsd = m ? cape_error(m, &c, train, F) : 1e30;
    pbd_up_model_destroy(m);
    m = NULL;
    pbd_up_pdm_desc qd = pbd_up_pdm_desc_from(t, c.sub);
    qd.frame_count = train;
    CHECK_OK(pbd_up_pdm_fit(&qd, &m));
    double e_pdm = m ? cape_error(m, &c, train, F) : 1e30;
    pbd_up_model_destroy(m);
    printf("    cape held-out RMS error (m): subdivision %.4g, piu %.4g (training %.4g), wpsd %.4g, pdm %.4g\n", e_sub,
           e_piu, e_piu_train, e_wpsd, e_pdm);
    CHECK(e_piu < e_sub);
    CHECK(e_wpsd < e_sub);
    /* PDM moves along the normals only: it cannot undo subdivision's
       in-plane shrinking, which dominates here; it must not add error */
    CHECK(e_pdm <= e_sub);
    cape_free(&c);
}

void suite_upsample_fit(void) {
    RUN(piu_fit_error_falls_with_regularisation);
    RUN(piu_partition_of_unity);
    RUN(piu_determinism_and_save_load);
    RUN(piu_bad_input);
    RUN(piu_oscillatory_modes);
    RUN(piu_held_out_beats_subdivision);
    RUN(wpsd_kronecker_pose_weights);
    RUN(wpsd_greedy_selection_stops_at_threshold);
    RUN(wpsd_held_out_beats_subdivision);
    RUN(pdm_recovers_known_coefficients);
    RUN(wpsd_pdm_determinism_and_save_load);
    RUN(wpsd_pdm_bad_input);
    RUN(wpsd_pdm_eval_refuses_a_non_finite_result);
    RUN(cape_held_out_beats_subdivision);
}
