/* tablecloth.c - a tablecloth (1.4 x 1.1 m, 36 x 28 vertices) lying on a
   table whose top is a triangle-mesh collider (BVH), pulled off by one edge
   (kinematic, 1 m/s sideways and down): it slides over the table with
   friction, falls and folds onto itself on the floor, its layers kept apart
   by self-collision (8 mm). 3 s at 60 Hz (12 substeps), a frame every 15
   steps and a contact sheet.

   Build and run from the repository root (one line; without libstb-dev drop
   the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/tablecloth.c -o tablecloth -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./tablecloth out      # out/tablecloth_000.png ... and out/tablecloth.png
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
    wd.substeps = 12;
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return 1;
    const float thickness = 0.008f, top = 0.75f;
    const float table_c[3] = {0, top - 0.025f, 0}, table_h[3] = {0.5f, 0.025f, 0.4f};
    pbd_mesh slab, m;
    float lo[3] = {-0.5f, top - 0.05f, -0.4f}, hi[3] = {0.5f, top, 0.4f};
    float o[3] = {-0.8f, top + 0.01f, -0.55f}, u[3] = {1.4f, 0, 0}, v[3] = {0, 0, 1.1f};
    if (pbd_mesh_tet_box(2, 2, 2, lo, hi, &slab) != PBD_OK || pbd_mesh_grid(36, 28, o, u, v, &m) != PBD_OK) return 1;
    pbd_mesh_collider_desc td = pbd_mesh_collider_desc_default();
    td.positions = slab.positions;
    td.vertex_count = slab.vertex_count;
    td.triangles = slab.triangles;
    td.triangle_count = slab.triangle_count;
    td.static_friction = 0.35f;
    td.dynamic_friction = 0.3f;
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
        pbd_add_collider_mesh(w, &td, NULL) != PBD_OK || pbd_add_collider_plane(w, ground, up, 0.6f, NULL) != PBD_OK ||
        pbd_object_get_parts(w, cloth, &parts) != PBD_OK) {
        fprintf(stderr, "setup failed: %s\n", pbd_world_last_error(w));
        return 1;
    }
    /* the pulled edge: the column of vertices at the cloth's +x side */
    for (int j = 0; j < 28; ++j) pbd_particle_set_kinematic(w, parts.particles.first + j * 36 + 35, 1);
    pbd_world_set_threads(w, 1); /* small: a thread team's barriers would cost more than they save */
    render_image frames[FRAMES];
    char labels[FRAMES][32];
    const char *label_ptr[FRAMES];
    float eye[3] = {0.6f, 1.6f, 2.6f}, at[3] = {0.5f, 0.45f, 0}, cam_up[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, at, cam_up, 40.0f);
    float sky_top[3] = {0.55f, 0.7f, 0.9f}, sky_bottom[3] = {0.9f, 0.93f, 0.97f};
    float cloth_rgb[3] = {0.9f, 0.88f, 0.8f}, table_rgb[3] = {0.55f, 0.38f, 0.22f};
    double total = 0;
    int ok = 1, f = 0, most = 0;
    for (int s = 1; s <= STEPS && ok; ++s) {
        for (int j = 0; j < 28; ++j) { /* pull: 1.5 m/s along +x, then down to the floor */
            int id = parts.particles.first + j * 36 + 35;
            const float *p = pbd_world_positions(w) + 4 * id;
            float target[3] = {p[0] + 1.0f / 60.0f, p[1] > 0.35f ? p[1] - 0.5f / 60.0f : p[1], p[2]};
            pbd_particle_set_kinematic_target(w, id, target);
        }
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
        render_draw_ground(img, &cam, 0.0f, 0.5f, 0, 2.0f, 0.25f, NULL, NULL);

        render_draw_mesh_shadow(img, &cam, x + 4 * parts.particles.first, 4, parts.particles.count, m.triangles,
                                m.triangle_count, 0.0f);
        render_draw_box(img, &cam, table_c, table_h, NULL, table_rgb, 0);
        render_draw_mesh(img, &cam, x + 4 * parts.particles.first, 4, parts.particles.count, m.triangles,
                         m.triangle_count, cloth_rgb, RENDER_SMOOTH);
        snprintf(labels[f], sizeof labels[f], "t = %.2f s", s / 60.0);
        label_ptr[f] = labels[f];
        char path[512];
        snprintf(path, sizeof path, "%s/tablecloth_%03d", dir, f);
        ok = ok && render_image_save(img, path, NULL, 0) != NULL;
        printf("frame %2d  t = %.2f s  %.2f ms/step  self-contact candidates %d\n", f, s / 60.0, total / s, c);
        ++f;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tablecloth", dir);
    ok = ok && render_contact_sheet(frames, f, 4, 2, label_ptr, path, NULL, 0) != NULL;
    printf("tablecloth: %d particles, %.2f ms per step (mean), up to %d self-contact candidates: %s\n",
           pbd_world_particle_count(w), total / STEPS, most, ok ? "ok" : "FAILED");
    for (int i = 0; i < f; ++i) render_image_free(&frames[i]);
    pbd_mesh_free(&m);
    pbd_mesh_free(&slab);
    pbd_world_destroy(w);
    return ok ? 0 : 1;
}
