/* dam_break.c - a dam break with a floating soft box (position based
   fluids, Macklin and Mueller 2013; survey 3.4.6). A block of water
   (0.5 x 0.6 x 0.4 m, spacing 4 cm: 1800 particles) stands at the left end
   of a 1.6 x 0.4 m tank whose floor and walls are plane colliders; a soft
   tetrahedral box (0.2 m, 500 kg/m^3, particle collision on) waits at the
   right end. The dam breaks, the wave runs down the tank, hits the box
   and floats it. 4 s at 60 Hz, a frame every 20 steps (12 frames), a
   contact sheet of them, and the simulation time per step.

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files instead of PNG):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/dam_break.c -o dam_break -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./dam_break out       # out/dam_break_000.png ... out/dam_break.png

   Exit status 0 when every step succeeded, every particle stayed inside
   the tank, the box floats at the end and the images were written. */
#define _POSIX_C_SOURCE 200809L

#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_RENDER_IMPLEMENTATION
#include "common/render.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

enum { STEPS = 240, FRAME_EVERY = 20, FRAMES = STEPS / FRAME_EVERY, WIDTH = 640, HEIGHT = 360 };

static const float TANK[3] = {1.6f, 1.0f, 0.4f}; /* x from 0, y from 0, z from 0 */

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* Each fluid particle drawn as a small octahedron (cheap in the software
   rasterizer): 6 vertices and 8 triangles per particle. */
static void octahedra(const float *x, int first, int count, float r, float *verts, int *tris) {
    static const float dir[6][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
    static const int face[8][3] = {{0, 2, 4}, {2, 1, 4}, {1, 3, 4}, {3, 0, 4},
                                   {2, 0, 5}, {1, 2, 5}, {3, 1, 5}, {0, 3, 5}};
    for (int i = 0; i < count; ++i) {
        const float *p = x + 4 * (first + i);
        for (int k = 0; k < 6; ++k)
            for (int a = 0; a < 3; ++a) verts[3 * (6 * i + k) + a] = p[a] + r * dir[k][a];
        for (int f = 0; f < 8; ++f)
            for (int a = 0; a < 3; ++a) tris[3 * (8 * i + f) + a] = 6 * i + face[f][a];
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "out";
    mkdir(dir, 0755);
    pbd_world_desc wd = pbd_world_desc_default(); /* 4 substeps x 4 iterations; the GPU where built with it */
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return 1;
    /* the tank: floor and four walls */
    float planes[5][6] = {{0, 0, 0, 0, 1, 0},
                          {0, 0, 0, 1, 0, 0},
                          {TANK[0], 0, 0, -1, 0, 0},
                          {0, 0, 0, 0, 0, 1},
                          {0, 0, TANK[2], 0, 0, -1}};
    for (int k = 0; k < 5; ++k) pbd_add_collider_plane(w, planes[k], planes[k] + 3, 0.1f, NULL);
    /* the water */
    const float d = 0.04f;
    const int nx = 12, ny = 15, nz = 10, n = nx * ny * nz;
    float *pos = (float *)malloc(sizeof(float) * 3 * n);
    for (int i = 0; i < n; ++i) {
        pos[3 * i + 0] = (0.5f + (float)(i % nx)) * d;
        pos[3 * i + 1] = (0.5f + (float)((i / nx) % ny)) * d;
        pos[3 * i + 2] = (0.5f + (float)(i / (nx * ny))) * d;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = pos;
    fd.count = n;
    fd.spacing = d;
    fd.viscosity = 0.02f;
    fd.vorticity = 0.02f;
    pbd_fluid fluid;
    pbd_range water;
    if (pbd_add_fluid(w, &fd, &fluid, &water) != PBD_OK) {
        fprintf(stderr, "%s\n", pbd_world_last_error(w));
        return 1;
    }
    /* the soft box, lighter than water */
    pbd_mesh box_mesh;
    float lo[3] = {1.2f, 0.02f, 0.1f}, hi[3] = {1.4f, 0.22f, 0.3f};
    if (pbd_mesh_tet_box(5, 5, 5, lo, hi, &box_mesh) != PBD_OK) return 1;
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = box_mesh.positions;
    sd.vertex_count = box_mesh.vertex_count;
    sd.tets = box_mesh.tets;
    sd.tet_count = box_mesh.tet_count;
    sd.density = 500.0f;
    sd.radius = 0.02f;
    sd.edge_compliance = 1e-6f;
    pbd_object box;
    pbd_object_parts box_parts;
    if (pbd_add_softbody(w, &sd, &box) != PBD_OK || pbd_object_get_parts(w, box, &box_parts) != PBD_OK) {
        fprintf(stderr, "%s\n", pbd_world_last_error(w));
        return 1;
    }
    pbd_object_set_particle_contact(w, box, 1);

    float *verts = (float *)malloc(sizeof(float) * 3 * 6 * (size_t)n);
    int *tris = (int *)malloc(sizeof(int) * 3 * 8 * (size_t)n);
    render_image frames[FRAMES];
    char labels[FRAMES][32];
    const char *label_ptr[FRAMES];
    float eye[3] = {0.8f, 1.3f, 2.6f}, target[3] = {0.8f, 0.2f, 0.2f}, up[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, target, up, 40.0f);
    float water_rgb[3] = {0.25f, 0.5f, 0.9f}, box_rgb[3] = {0.9f, 0.55f, 0.2f}, wall_rgb[3] = {0.75f, 0.75f, 0.8f};
    double sim_ms = 0;
    int failed = 0, frame = 0, outside = 0;
    for (int step = 1; step <= STEPS && !failed; ++step) {
        double t0 = now_ms();
        if (pbd_world_step(w, 1.0f / 60.0f) != PBD_OK) failed = 1;
        sim_ms += now_ms() - t0;
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < pbd_world_particle_count(w); ++i)
            for (int a = 0; a < 3; ++a)
                if (!(x[4 * i + a] >= -1e-3f) || (a != 1 && !(x[4 * i + a] <= TANK[a] + 1e-3f))) outside++;
        if (step % FRAME_EVERY) continue;
        render_image *img = &frames[frame];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            failed = 1;
            break;
        }
        render_clear(img, NULL, NULL);
        render_draw_ground(img, &cam, 0.0f, 0.8f, 0.2f, 2.0f, 0.2f, NULL, NULL);
        float back_c[3] = {0.8f, 0.3f, -0.01f}, back_h[3] = {0.8f, 0.3f, 0.01f};
        render_draw_box(img, &cam, back_c, back_h, NULL, wall_rgb, RENDER_FLAT);
        octahedra(x, water.first, water.count, 0.6f * d, verts, tris);
        render_draw_mesh(img, &cam, verts, 3, 6 * n, tris, 8 * n, water_rgb, RENDER_FLAT);
        render_draw_mesh(img, &cam, x + 4 * box_parts.particles.first, 4, box_parts.particles.count, box_mesh.triangles,
                         box_mesh.triangle_count, box_rgb, RENDER_SMOOTH | RENDER_WIREFRAME);
        snprintf(labels[frame], sizeof labels[frame], "T=%.2fS", step / 60.0);
        label_ptr[frame] = labels[frame];
        render_text(img, 12, 12, 4, NULL, labels[frame]);
        char base[512];
        snprintf(base, sizeof base, "%s/dam_break_%03d", dir, frame);
        if (!render_image_save(img, base, NULL, 0)) failed = 1;
        frame++;
    }
    /* the box floats: its lowest point is above the floor, water under it */
    const float *x = pbd_world_positions(w);
    float box_lo = 1e30f;
    for (int i = 0; i < box_parts.particles.count; ++i) {
        float y = x[4 * (box_parts.particles.first + i) + 1];
        box_lo = y < box_lo ? y : box_lo;
    }
    char base[512];
    snprintf(base, sizeof base, "%s/dam_break", dir);
    if (!failed && !render_contact_sheet(frames, frame, 4, 2, label_ptr, base, NULL, 0)) failed = 1;
    for (int i = 0; i < frame; ++i) render_image_free(&frames[i]);
    printf("dam_break: %d water particles, %d box particles, %.2f ms per step (%s, %d threads), "
           "particles outside the tank: %d, box bottom at %.3f m\n",
           n, box_parts.particles.count, sim_ms / STEPS, pbd_simd_path(), pbd_max_threads(), outside, (double)box_lo);
    pbd_mesh_free(&box_mesh);
    free(pos);
    free(verts);
    free(tris);
    pbd_world_destroy(w);
    return failed || outside || !(box_lo > 0.02f) ? 1 : 0;
}
