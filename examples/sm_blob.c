/* sm_blob.c - a lattice-shape-matched blob (pbd_sm.h; Rivers and James
   2007, survey 4.2-4.3) with fast region sums: a voxelised ball of
   particles falls on a sphere and the ground. The region half-width w and
   the summation method come from the command line, so you can see the
   blob stiffen as w grows while the time per step stays flat with the
   lattice (FastLSM) sums and grows with naive ones:

       ./sm_blob out w=1            ./sm_blob out w=3
       ./sm_blob out w=3 sum=naive  ./sm_blob out w=3 sum=octree

   Writes 12 frames as out/sm_blob_w<w>_<sum>.png and prints ms per step.

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -fno-math-errno -I. examples/sm_blob.c -o sm_blob -lm -DPBD_HAVE_STB -I/usr/include/stb
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
#include <sys/stat.h>
#include <time.h>

enum { STEPS = 120, FRAME_EVERY = 10, FRAMES = STEPS / FRAME_EVERY, WIDTH = 480, HEIGHT = 320, MAX_CELLS = 20000 };

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int check(pbd_result r, const char *what) {
    if (r == PBD_OK) return 0;
    fprintf(stderr, "sm_blob: %s failed: %s\n", what, pbd_result_string(r));
    return 1;
}

int main(int argc, char **argv) {
    const char *outdir = "out", *sum = "lattice";
    int w = 2;
    for (int i = 1; i < argc; ++i) {
        if (strncmp(argv[i], "w=", 2) == 0) w = atoi(argv[i] + 2);
        else if (strncmp(argv[i], "sum=", 4) == 0) sum = argv[i] + 4;
        else outdir = argv[i];
    }
    mkdir(outdir, 0755);

    /* a ball of radius 0.3 m voxelised at 4 cm: about 1 800 particles */
    pbd_mesh ball;
    float centre[3] = {0.0f, 0.75f, 0.0f}, origin[3];
    if (check(pbd_mesh_sphere(3, centre, 0.3f, &ball), "pbd_mesh_sphere")) return 1;
    int *cells = (int *)malloc(sizeof(int) * 3 * MAX_CELLS), count = 0;
    if (!cells || check(pbd_sm_voxelize(ball.positions, ball.vertex_count, ball.triangles, ball.triangle_count, 0.04f,
                                        origin, cells, MAX_CELLS, &count),
                        "pbd_sm_voxelize"))
        return 1;

    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 2;
    wd.iterations = 2;
    pbd_world *world = NULL;
    if (check(pbd_world_create(&wd, &world), "pbd_world_create")) return 1;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0}, obstacle[3] = {0.0f, 0.0f, 0.0f};
    pbd_add_collider_plane(world, ground, up, 1.0f, NULL);
    pbd_add_collider_sphere(world, obstacle, 0.2f, 1.0f, NULL);

    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = count;
    memcpy(ld.origin, origin, sizeof ld.origin);
    ld.spacing = 0.04f;
    ld.particle_mass = 0.05f;
    ld.half_width = w;
    ld.body.mode = PBD_SM_LINEAR;
    ld.body.beta = 0.2f;
    ld.body.stiffness = 0.3f;
    /* the lattice's own plan is the fast one (bars, plates, cubes); naive
       and octree plans over the same regions are for comparison */
    pbd_sm_sum_plan *plan = NULL;
    if (strcmp(sum, "naive") == 0 || strcmp(sum, "octree") == 0) {
        pbd_sm_sum_plan *lat = NULL;
        if (check(pbd_sm_plan_lattice(count, cells, w, &lat), "pbd_sm_plan_lattice")) return 1;
        if (strcmp(sum, "naive") == 0) {
            int regions = pbd_sm_plan_region_count(lat), total = 0, got = 0;
            int *start = (int *)malloc(sizeof(int) * (size_t)(regions + 1));
            for (int r = 0; r < regions; ++r) {
                pbd_sm_plan_region(lat, r, NULL, 0, &got);
                total += got;
            }
            int *members = (int *)malloc(sizeof(int) * (size_t)total);
            start[0] = 0;
            for (int r = 0; r < regions; ++r) {
                pbd_sm_plan_region(lat, r, members + start[r], total - start[r], &got);
                start[r + 1] = start[r] + got;
            }
            if (check(pbd_sm_plan_naive(count, regions, start, members, &plan), "pbd_sm_plan_naive")) return 1;
            free(start);
            free(members);
        } else {
            int *oc = (int *)malloc(sizeof(int) * 4 * (size_t)count); /* x y z level: all leaves at level 0 */
            for (int i = 0; i < count; ++i) {
                memcpy(oc + 4 * i, cells + 3 * i, 3 * sizeof(int));
                oc[4 * i + 3] = 0;
            }
            if (check(pbd_sm_plan_octree(count, oc, NULL, w, &plan), "pbd_sm_plan_octree")) return 1;
            free(oc);
        }
        pbd_sm_plan_destroy(lat);
        ld.body.plan = plan;
        ld.body.owns_plan = 1;
    } else {
        sum = "lattice";
    }
    pbd_sm_body blob = {0};
    pbd_range r;
    if (check(pbd_sm_add_lattice(world, &ld, &blob, &r), "pbd_sm_add_lattice")) return 1;
    printf("sm_blob: %d particles, region half-width %d, %s sums, %d thread(s)\n", count, w, sum, pbd_max_threads());

    render_image frames[FRAMES];
    memset(frames, 0, sizeof frames);
    const float eye[3] = {1.2f, 1.0f, 1.8f}, target[3] = {0, 0.3f, 0};
    const float colour[3] = {0.35f, 0.75f, 0.45f}, grey[3] = {0.6f, 0.6f, 0.65f};
    render_camera cam = render_camera_look_at(eye, target, up, 40.0f);
    double sim = 0;
    int frame = 0, failed = 0;
    char label[64], base[1024], path[1100];
    for (int s = 1; s <= STEPS && !failed; ++s) {
        double t0 = now_ms();
        if (check(pbd_world_step(world, 1.0f / 60.0f), "pbd_world_step")) {
            failed = 1;
            break;
        }
        sim += now_ms() - t0;
        if (s % FRAME_EVERY) continue;
        const float *x = pbd_world_positions(world) + 4 * (size_t)r.first;
        render_image *img = &frames[frame];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            failed = 1;
            break;
        }
        render_clear(img, NULL, NULL);
        render_draw_ground(img, &cam, 0.0f, 0.0f, 0.0f, 2.0f, 0.25f, NULL, NULL);
        render_draw_sphere(img, &cam, obstacle, 0.2f, grey, RENDER_SMOOTH);
        for (int i = 0; i < r.count; ++i) {
            if (!(fabsf(x[4 * i + 1]) < 1e30f)) {
                failed = 1;
                break;
            }
            render_draw_sphere(img, &cam, x + 4 * i, 0.022f, colour, RENDER_FLAT);
        }
        snprintf(label, sizeof label, "W = %d  %s  %.1f MS", w, sum, sim / s);
        render_text(img, 10, 10, 2, NULL, label);
        printf("frame %2d  t=%.2f s  %.2f ms/step\n", frame, pbd_world_time(world), sim / s);
        ++frame;
    }
    if (!failed && frame > 0) {
        snprintf(base, sizeof base, "%s/sm_blob_w%d_%s", outdir, w, sum);
        const char *written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet -> %s\n", written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    for (int i = 0; i < FRAMES; ++i) render_image_free(&frames[i]);
    free(cells);
    pbd_mesh_free(&ball);
    pbd_world_destroy(world);
    return failed;
}
