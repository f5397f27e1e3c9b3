/* upsample.c - pbd_upsample.h's example: a coarse 20x20 cape simulated
   live next to its upsampled versions and the fine ground truth.

   The library's training generator (pbd_upsample.h section "training")
   runs two simulations of a swinging cape: the coarse cloth (400
   vertices) and a fine cloth (77x77 = 5929 vertices, the coarse grid
   subdivided twice) whose vertices at the coarse vertices follow it. A
   held-out motion (another amplitude and frequency than the training
   motion) is shown; each frame's coarse configuration goes through every
   upsampler:
     SUBDIVISION  Loop subdivision only (survey 5.1), one sparse product
     WRINKLE      a wrinkle mesh (survey 3.6): the fine mesh attached to
                  the coarse one within a radius, solved statically
     PIU          physics-inspired upsampling (survey 5.2.3), a learned
                  sparse operator
     WPSD         weighted pose-space deformation (survey 5.2.1)
     PDM          polynomial displacement maps (survey 5.2.2)
   (the learned ones fitted on the training motion)
   and is compared with the fine simulation (TRUTH). It prints each
   method's evaluation time and its RMS distance to the truth per frame,
   and writes out/upsample.png: a contact sheet with one row per shown
   frame and one column per method.

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get a PPM file instead):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/upsample.c -o upsample -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./upsample out

   Exit status 0 when every step succeeded and the sheet was written. */
#define _POSIX_C_SOURCE 200809L

#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_UPSAMPLE_IMPLEMENTATION
#include "pbd_upsample.h"
#define PBD_RENDER_IMPLEMENTATION
#include "common/render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#define upsample_mkdir(d) _mkdir(d)
#else
#include <sys/stat.h>
#define upsample_mkdir(d) mkdir(d, 0755)
#endif

enum { SHOWN = 3, CELL = 300, MAX_COLUMNS = 8 };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int check(pbd_result r, const char *what) {
    if (r == PBD_OK) return 0;
    fprintf(stderr, "upsample: %s failed: %s\n", what, pbd_result_string(r));
    return 1;
}

/* One column of the sheet: a way to get a detail mesh from a coarse frame. */
typedef struct column {
    const char *name;
    pbd_up_model *model; /* a pbd_up_model, or NULL for the others */
    pbd_up_wrinkle *wrinkle;
    float *x;  /* this frame's output */
    int count; /* its vertices */
    const int *triangles;
    int triangle_count;
    double ms, rms_sum; /* totals over the frames */
    float rgb[3];
} column;

static double rms_distance(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < 3 * n; ++i) s += (double)(a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s / n);
}

int main(int argc, char **argv) {
    const char *outdir = argc > 1 ? argv[1] : "out";
    upsample_mkdir(outdir);
    int failed = 0;
    double t0 = now_ms();

    /* ---- the simulations: a training motion and a held-out one --------- */
    pbd_up_training_desc td = pbd_up_training_desc_default();
    td.scene = PBD_UP_SCENE_CAPE;
    td.coarse_resolution = 20;
    td.levels = 2;
    td.frames = 60;
    td.steps_per_frame = 2;
    td.threads = 1; /* offline: one thread never waits at a barrier on a busy machine */
    pbd_up_training train, shown;
    memset(&train, 0, sizeof train);
    memset(&shown, 0, sizeof shown);
    if (check(pbd_up_training_generate(&td, &train), "training simulation")) return 1;
    pbd_up_training_desc sd = td;
    sd.amplitude = 0.35f;
    sd.frequency = 0.9f;
    sd.frames = 45;
    sd.seed = 7;
    if (check(pbd_up_training_generate(&sd, &shown), "shown simulation")) return 1;
    int nc = shown.coarse_count, nd = shown.detail_count;
    printf("simulations: coarse %d vertices, fine %d vertices, %d + %d frames, %.0f ms\n", nc, nd, train.frame_count,
           shown.frame_count, now_ms() - t0);

    /* ---- the upsamplers ------------------------------------------------- */
    column cols[MAX_COLUMNS];
    int ncols = 0;
    memset(cols, 0, sizeof cols);
    column *coarse = &cols[ncols++];
    coarse->name = "COARSE";
    coarse->count = nc;
    coarse->triangles = shown.coarse_triangles;
    coarse->triangle_count = shown.coarse_triangle_count;
    coarse->rgb[0] = 0.55f;
    coarse->rgb[1] = 0.55f;
    coarse->rgb[2] = 0.6f;

    column *sub = &cols[ncols++];
    sub->name = "SUBDIVISION";
    failed |= check(
        pbd_up_subdivision_create(shown.coarse_triangles, shown.coarse_triangle_count, nc, td.levels, &sub->model),
        "subdivision model");
    if (failed) return 1;
    /* One thread per method here: on a shared machine OpenMP's barriers
       can stall; bench/upsample compares 1 and 2 threads. */
    failed |= check(pbd_up_model_set_threads(sub->model, 1), "threads");
    sub->count = nd;
    failed |= check(pbd_up_subdivision_triangles(sub->model, &sub->triangles, &sub->triangle_count), "triangles");
    sub->rgb[0] = 0.35f;
    sub->rgb[1] = 0.6f;
    sub->rgb[2] = 0.85f;

    column *wr = &cols[ncols++];
    wr->name = "WRINKLE";
    pbd_up_wrinkle_desc wd = pbd_up_wrinkle_desc_default();
    wd.coarse_positions = shown.coarse_rest;
    wd.coarse_count = nc;
    wd.coarse_triangles = shown.coarse_triangles;
    wd.coarse_triangle_count = shown.coarse_triangle_count;
    wd.fine_positions = shown.detail_rest;
    wd.fine_count = nd;
    wd.fine_triangles = shown.detail_triangles;
    wd.fine_triangle_count = shown.detail_triangle_count;
    wd.radius = 0.02f;
    wd.iterations = 6;
    wd.bending_compliance = td.fine_bending_compliance;
    failed |= check(pbd_up_wrinkle_create(&wd, &wr->wrinkle), "wrinkle mesh");
    if (failed) return 1;
    failed |= check(pbd_up_wrinkle_set_threads(wr->wrinkle, 1), "threads");
    wr->count = nd;
    wr->triangles = shown.detail_triangles;
    wr->triangle_count = shown.detail_triangle_count;
    wr->rgb[0] = 0.85f;
    wr->rgb[1] = 0.55f;
    wr->rgb[2] = 0.3f;

    /* The learned methods, fitted offline on the training motion. */
    double fit0 = now_ms();
    /* the training pairs, and the subdivision as the prior PIU's
       regularisation pulls towards (WPSD's and PDM's smooth operator) */
    pbd_up_piu_desc pd = pbd_up_piu_desc_from(&train, sub->model);
    column *piu = &cols[ncols++];
    piu->name = "PIU";
    failed |= check(pbd_up_piu_fit(&pd, &piu->model), "PIU fit");
    printf("fit PIU: %.0f ms\n", now_ms() - fit0);
    fit0 = now_ms();
    pbd_up_wpsd_desc wsd = pbd_up_wpsd_desc_from(&train, sub->model);
    wsd.error_threshold = 1e-3f;
    wsd.max_poses = 16;
    column *wpsd = &cols[ncols++];
    wpsd->name = "WPSD";
    if (!failed) failed |= check(pbd_up_wpsd_fit(&wsd, &wpsd->model), "WPSD fit");
    printf("fit WPSD: %.0f ms\n", now_ms() - fit0);
    fit0 = now_ms();
    pbd_up_pdm_desc dd = pbd_up_pdm_desc_from(&train, sub->model);
    column *pdm = &cols[ncols++];
    pdm->name = "PDM";
    if (!failed) failed |= check(pbd_up_pdm_fit(&dd, &pdm->model), "PDM fit");
    printf("fit PDM: %.0f ms\n", now_ms() - fit0);
    if (failed) return 1;
    column *learned[3] = {piu, wpsd, pdm};
    float palette[3][3] = {{0.75f, 0.4f, 0.75f}, {0.8f, 0.75f, 0.3f}, {0.4f, 0.75f, 0.8f}};
    for (int k = 0; k < 3; ++k) {
        failed |= check(pbd_up_model_set_threads(learned[k]->model, 1), "threads");
        learned[k]->count = nd;
        learned[k]->triangles = shown.detail_triangles;
        learned[k]->triangle_count = shown.detail_triangle_count;
        memcpy(learned[k]->rgb, palette[k], sizeof palette[k]);
    }

    column *truth = &cols[ncols++];
    truth->name = "TRUTH";
    truth->count = nd;
    truth->triangles = shown.detail_triangles;
    truth->triangle_count = shown.detail_triangle_count;
    truth->rgb[0] = 0.4f;
    truth->rgb[1] = 0.75f;
    truth->rgb[2] = 0.4f;
    for (int c = 0; c < ncols; ++c) {
        cols[c].x = (float *)malloc(sizeof(float) * 3 * (size_t)cols[c].count);
        if (!cols[c].x) {
            fprintf(stderr, "upsample: out of memory\n");
            return 1;
        }
    }

    /* ---- every frame through every method -------------------------------- */
    render_image images[SHOWN * MAX_COLUMNS];
    const char *labels[SHOWN * MAX_COLUMNS];
    char label_text[SHOWN * MAX_COLUMNS][48];
    int shown_frames[SHOWN] = {14, 29, 44}, nimg = 0;
    float eye[3] = {1.2f, 0.9f, 2.4f}, at[3] = {0.0f, 0.45f, 0.0f}, up[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, at, up, 38.0f);
    for (int f = 0; f < shown.frame_count && !failed; ++f) {
        const float *u = shown.coarse + (size_t)f * 3 * nc, *X = shown.detail + (size_t)f * 3 * nd;
        for (int c = 0; c < ncols && !failed; ++c) {
            column *col = &cols[c];
            double s = now_ms();
            if (col == coarse) memcpy(col->x, u, sizeof(float) * 3 * (size_t)nc);
            else if (col == truth) memcpy(col->x, X, sizeof(float) * 3 * (size_t)nd);
            else if (col->wrinkle) failed |= check(pbd_up_wrinkle_update(col->wrinkle, u, col->x), "wrinkle update");
            else failed |= check(pbd_up_model_eval(col->model, u, col->x), col->name);
            col->ms += now_ms() - s;
            if (col != coarse) col->rms_sum += rms_distance(col->x, X, nd);
        }
        int row = -1;
        for (int k = 0; k < SHOWN; ++k)
            if (shown_frames[k] == f) row = k;
        if (row < 0 || failed) continue;
        for (int c = 0; c < ncols; ++c) {
            render_image *img = &images[nimg];
            if (render_image_init(img, CELL, CELL) != 0) {
                failed = 1;
                break;
            }
            render_clear(img, NULL, NULL);
            render_draw_ground(img, &cam, -0.1f, 0.0f, 0.0f, 2.0f, 0.25f, NULL, NULL);
            render_draw_mesh_shadow(img, &cam, cols[c].x, 3, cols[c].count, cols[c].triangles, cols[c].triangle_count,
                                    -0.1f);
            render_draw_mesh(img, &cam, cols[c].x, 3, cols[c].count, cols[c].triangles, cols[c].triangle_count,
                             cols[c].rgb, RENDER_SMOOTH | (cols[c].count == nc ? RENDER_WIREFRAME : 0));
            snprintf(label_text[nimg], sizeof label_text[nimg], "%s F%d", cols[c].name, f + 1);
            labels[nimg] = label_text[nimg];
            ++nimg;
        }
    }

    /* ---- report ----------------------------------------------------------- */
    printf("%-12s %10s %14s %12s\n", "method", "vertices", "ms per eval", "rms to truth");
    for (int c = 1; c + 1 < ncols; ++c)
        printf("%-12s %10d %14.3f %12.5f\n", cols[c].name, cols[c].count, cols[c].ms / shown.frame_count,
               cols[c].rms_sum / shown.frame_count);
    if (!failed) {
        char base[512], path[600];
        snprintf(base, sizeof base, "%s/upsample", outdir);
        const char *written = render_contact_sheet(images, nimg, ncols, 1, labels, base, path, sizeof path);
        printf("contact sheet (%d frames x %d columns) -> %s\n", SHOWN, ncols, written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    printf("total %.0f ms\n", now_ms() - t0);

    for (int i = 0; i < nimg; ++i) render_image_free(&images[i]);
    for (int c = 0; c < ncols; ++c) {
        free(cols[c].x);
        pbd_up_model_destroy(cols[c].model);
        pbd_up_wrinkle_destroy(cols[c].wrinkle);
    }
    pbd_up_training_free(&train);
    pbd_up_training_free(&shown);
    return failed;
}
