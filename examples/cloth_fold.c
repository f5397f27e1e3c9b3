/* cloth_fold.c - a 1.2 m cloth (40 x 40 vertices) dropped off-centre onto a
   sphere: it drapes, slides off and folds onto itself on the ground. Cloth
   self-collision (point-triangle and edge-edge constraints, 6 mm thick)
   keeps the layers apart. 3 s at 60 Hz (8 substeps), a frame every 15
   steps and a contact sheet; prints ms per step and the self-contact
   candidates.

   Build and run from the repository root (one line; without libstb-dev drop
   the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/cloth_fold.c -o cloth_fold -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./cloth_fold out      # out/cloth_fold_000.png ... and out/cloth_fold.png
*/
#define _POSIX_C_SOURCE 200809L
#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_RENDER_IMPLEMENTATION
#include "common/render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { STEPS = 180, FRAME_EVERY = 15, FRAMES = STEPS / FRAME_EVERY, WIDTH = 640, HEIGHT = 360 };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "out";
    mkdir(dir, 0755);
    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 8;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return 1;
    const float sphere_c[3] = {0, 0.35f, 0}, sphere_r = 0.3f, thickness = 0.006f;
    pbd_mesh m;
    float o[3] = {-0.35f, 0.75f, -0.6f}, u[3] = {1.2f, 0, 0}, v[3] = {0, 0.1f, 1.2f};
    if (pbd_mesh_grid(40, 40, o, u, v, &m) != PBD_OK) return 1;
    pbd_cloth_desc cd = pbd_cloth_desc_default();
    cd.positions = m.positions;
    cd.vertex_count = m.vertex_count;
    cd.triangles = m.triangles;
    cd.triangle_count = m.triangle_count;
    cd.bending_compliance = 2e-3f;
    cd.thickness = thickness;
    pbd_object cloth;
    pbd_object_parts parts;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (pbd_add_cloth(w, &cd, &cloth) != PBD_OK ||
        pbd_add_cloth_self_collision(w, cloth, &cd, thickness, NULL) != PBD_OK ||
        pbd_add_collider_sphere(w, sphere_c, sphere_r, 0.4f, NULL) != PBD_OK ||
        pbd_add_collider_plane(w, ground, up, 0.6f, NULL) != PBD_OK ||
        pbd_object_get_parts(w, cloth, &parts) != PBD_OK) {
        fprintf(stderr, "setup failed: %s\n", pbd_world_last_error(w));
        return 1;
    }
    pbd_world_set_threads(w, 1); /* small: a thread team's barriers would cost more than they save */
    render_image frames[FRAMES];
    char labels[FRAMES][32];
    const char *label_ptr[FRAMES];
    float eye[3] = {1.6f, 1.3f, 1.9f}, at[3] = {0.1f, 0.25f, 0}, cam_up[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, at, cam_up, 40.0f);
    float sky_top[3] = {0.55f, 0.7f, 0.9f}, sky_bottom[3] = {0.9f, 0.93f, 0.97f};
    float cloth_rgb[3] = {0.85f, 0.3f, 0.25f}, sphere_rgb[3] = {0.6f, 0.62f, 0.68f};
    double total = 0;
    int ok = 1, f = 0, most = 0;
    for (int s = 1; s <= STEPS && ok; ++s) {
        double t0 = now_ms();
        ok = pbd_world_step(w, 1.0f / 60.0f) == PBD_OK;
        total += now_ms() - t0;
        int c = pbd_world_self_contact_count(w);
        most = c > most ? c : most;
        if (s % FRAME_EVERY) continue;
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < 4 * pbd_world_particle_count(w); ++i) ok = ok && isfinite(x[i]);
        render_image *img = &frames[f];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) return 1;
        render_clear(img, sky_top, sky_bottom);
        render_draw_ground(img, &cam, 0.0f, 0, 0, 2.0f, 0.25f, NULL, NULL);
        render_draw_sphere_shadow(img, &cam, sphere_c, sphere_r, 0.0f);
        render_draw_mesh_shadow(img, &cam, x + 4 * parts.particles.first, 4, parts.particles.count, m.triangles,
                                m.triangle_count, 0.0f);
        render_draw_sphere(img, &cam, sphere_c, sphere_r, sphere_rgb, RENDER_SMOOTH);
        render_draw_mesh(img, &cam, x + 4 * parts.particles.first, 4, parts.particles.count, m.triangles,
                         m.triangle_count, cloth_rgb, RENDER_SMOOTH);
        snprintf(labels[f], sizeof labels[f], "t = %.2f s", s / 60.0);
        label_ptr[f] = labels[f];
        char path[512];
        snprintf(path, sizeof path, "%s/cloth_fold_%03d", dir, f);
        ok = ok && render_image_save(img, path, NULL, 0) != NULL;
        printf("frame %2d  t = %.2f s  %.2f ms/step  self-contact candidates %d\n", f, s / 60.0, total / s, c);
        ++f;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/cloth_fold", dir);
    ok = ok && render_contact_sheet(frames, f, 4, 2, label_ptr, path, NULL, 0) != NULL;
    printf("cloth_fold: %d particles, %.2f ms per step (mean), up to %d self-contact candidates: %s\n",
           pbd_world_particle_count(w), total / STEPS, most, ok ? "ok" : "FAILED");
    for (int i = 0; i < f; ++i) render_image_free(&frames[i]);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return ok ? 0 : 1;
}
