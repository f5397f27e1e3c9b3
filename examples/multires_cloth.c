/* multires_cloth.c - a stiff tablecloth of pbd_sm.h's multi-resolution
   shape-matching cloth (Bender, Weber and Diziol 2013) drapes over a
   sphere and the ground. A 1.6 m square of 70 x 70 vertices (9 522
   triangles) falls from 0.9 m; the world's colliders and friction handle
   the contacts; one V-cycle per 1/240 s substep. Writes 12 frames and a
   contact sheet, and prints the cloth's strain and the time per step.

   Switches (any order): levels=N (1..8, default 4), wrinkles=0|1 (the
   coarse levels' wrinkle conservation, default 1), scheme=0|1 (two-pass or
   independent sets, default 1), and the output folder (default "out"). Compare
       ./multires_cloth out wrinkles=1   and   ./multires_cloth out wrinkles=0
   to see the coarse levels smooth the folds away without conservation
   (out/multires_cloth_w1.png and out/multires_cloth_w0.png).

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -fno-math-errno -I. examples/multires_cloth.c -o multires_cloth -lm -DPBD_HAVE_STB -I/usr/include/stb
*/
#define _POSIX_C_SOURCE 200809L

#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_SM_IMPLEMENTATION
#include "pbd_sm.h"
#define PBD_RENDER_IMPLEMENTATION
#include "common/render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

enum { STEPS = 180, FRAME_EVERY = 15, FRAMES = STEPS / FRAME_EVERY, WIDTH = 640, HEIGHT = 360, N = 70 };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int check(pbd_result r, const char *what, const pbd_world *w) {
    if (r == PBD_OK) return 0;
    fprintf(stderr, "multires_cloth: %s failed: %s (%s)\n", what, pbd_result_string(r),
            w ? pbd_world_last_error(w) : "");
    return 1;
}

int main(int argc, char **argv) {
    const char *outdir = "out";
    int levels = 4, wrinkles = 1, scheme = 1;
    for (int i = 1; i < argc; ++i) {
        if (strncmp(argv[i], "levels=", 7) == 0) levels = atoi(argv[i] + 7);
        else if (strncmp(argv[i], "wrinkles=", 9) == 0) wrinkles = atoi(argv[i] + 9);
        else if (strncmp(argv[i], "scheme=", 7) == 0) scheme = atoi(argv[i] + 7);
        else outdir = argv[i];
    }
    mkdir(outdir, 0755); /* fails harmlessly when it exists */
    const float sphere_centre[3] = {0.0f, 0.35f, 0.0f}, sphere_radius = 0.35f;

    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 4; /* one V-cycle per 1/240 s */
    wd.iterations = 1;
    pbd_world *w = NULL;
    if (check(pbd_world_create(&wd, &w), "pbd_world_create", NULL)) return 1;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (check(pbd_add_collider_plane(w, ground, up, 0.6f, NULL), "ground", w)) return 1;
    if (check(pbd_add_collider_sphere(w, sphere_centre, sphere_radius, 0.4f, NULL), "sphere", w)) return 1;

    pbd_mesh mesh;
    float o[3] = {-0.8f, 0.9f, -0.8f}, u[3] = {1.6f, 0, 0}, v[3] = {0, 0, 1.6f};
    if (check(pbd_mesh_grid(N, N, o, u, v, &mesh), "pbd_mesh_grid", w)) return 1;
    pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
    cd.positions = mesh.positions;
    cd.vertex_count = mesh.vertex_count;
    cd.triangles = mesh.triangles;
    cd.triangle_count = mesh.triangle_count;
    cd.levels = levels;
    cd.conserve_wrinkles = wrinkles;
    cd.scheme = (pbd_sm_cloth_scheme)scheme;
    cd.density = 0.2f;
    cd.bending_stiffness = 2e-5f;
    cd.damping = 0.1f;
    cd.thickness = 0.008f;
    pbd_sm_cloth cloth = {0};
    pbd_range r;
    if (check(pbd_sm_add_cloth(w, &cd, &cloth, &r), "pbd_sm_add_cloth", w)) return 1;
    printf("multires_cloth: %d vertices, %d triangles, %d levels (", mesh.vertex_count, mesh.triangle_count, levels);
    for (int l = 0; l < levels; ++l) {
        int nt = 0;
        pbd_sm_cloth_level(w, cloth, l, NULL, &nt, NULL, NULL);
        printf("%s%d", l ? " " : "", nt);
    }
    printf(" triangles), wrinkle conservation %s, %s, %d thread(s)\n", wrinkles ? "on" : "off",
           scheme ? "independent sets" : "two-pass", pbd_max_threads());

    render_image frames[FRAMES];
    memset(frames, 0, sizeof frames);
    const float eye[3] = {1.6f, 1.5f, 2.4f}, target[3] = {0, 0.3f, 0}, cam_up[3] = {0, 1, 0};
    const float colour[3] = {0.85f, 0.86f, 0.80f}, sphere_colour[3] = {0.35f, 0.45f, 0.70f};
    render_camera cam = render_camera_look_at(eye, target, cam_up, 40.0f);
    double sim = 0;
    int frame = 0, failed = 0;
    char labels[FRAMES][48], base[1024], path[1100];
    for (int step = 1; step <= STEPS && !failed; ++step) {
        double t0 = now_ms();
        if (check(pbd_world_step(w, 1.0f / 60.0f), "pbd_world_step", w)) {
            failed = 1;
            break;
        }
        sim += now_ms() - t0;
        if (step % FRAME_EVERY) continue;
        const float *x = pbd_world_positions(w) + 4 * (size_t)r.first;
        for (int i = 0; i < 4 * r.count; ++i)
            if (!(fabsf(x[i]) < 1e30f)) {
                fprintf(stderr, "multires_cloth: non-finite positions\n");
                failed = 1;
                break;
            }
        float avg = 0, mx = 0;
        pbd_sm_cloth_strain(w, cloth, &avg, &mx);
        render_image *img = &frames[frame];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            failed = 1;
            break;
        }
        render_clear(img, NULL, NULL);
        render_draw_ground(img, &cam, 0.0f, 0.0f, 0.0f, 3.0f, 0.4f, NULL, NULL);
        render_draw_sphere_shadow(img, &cam, sphere_centre, sphere_radius, 0.0f);
        render_draw_mesh_shadow(img, &cam, x, 4, r.count, mesh.triangles, mesh.triangle_count, 0.0f);
        render_draw_sphere(img, &cam, sphere_centre, sphere_radius, sphere_colour, RENDER_SMOOTH);
        render_draw_mesh(img, &cam, x, 4, r.count, mesh.triangles, mesh.triangle_count, colour,
                         RENDER_SMOOTH | RENDER_SPECULAR);
        snprintf(labels[frame], sizeof labels[frame], "T = %.2f S  L = %d  W = %d", pbd_world_time(w), levels,
                 wrinkles);
        render_text(img, 12, 12, 3, NULL, labels[frame]);
        printf("frame %2d  t=%.2f s  sim %.2f ms/step  strain avg %.2f%% max %.2f%%\n", frame, pbd_world_time(w),
               sim / step, 100 * avg, 100 * mx);
        ++frame;
    }
    if (!failed && frame > 0) {
        snprintf(base, sizeof base, "%s/multires_cloth_w%d", outdir, wrinkles);
        const char *written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet -> %s\n", written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    for (int i = 0; i < FRAMES; ++i) render_image_free(&frames[i]);
    pbd_mesh_free(&mesh);
    pbd_world_destroy(w);
    return failed;
}
