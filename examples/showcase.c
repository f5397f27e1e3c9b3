/* showcase.c - pbd's headless showcase. One world, side by side on a
   ground plane: a 2 m cloth (60x60 vertices, isometric bending) draping
   over a sphere collider, a soft tetrahedral 0.5 m box (5x5x5 nodes, 320
   tets) falling on the ground, and a balloon (an icosphere of 642
   vertices) inflated by an overpressure of 1.3. It runs 3 s of simulated
   time at 60 Hz, writes a frame every 15 steps (12 frames) and a contact
   sheet of all of them, and prints the simulation time per step for every
   frame plus a summary. Needs no window and no GPU: the images come from
   the small software rasterizer in examples/common/render.h.

   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files instead of PNG; add
   -march=native for the wider SIMD path):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/showcase.c -o showcase -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./showcase out        # out/showcase_000.png ... out/showcase_011.png, out/showcase.png

   or simply `make demo`. The output folder (argument 1, default "out") is
   created when missing; its parent must exist. Exit status 0 when every
   step succeeded, the positions stayed finite and every image was written.
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
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#define showcase_mkdir(d) _mkdir(d)
#else
#include <sys/stat.h>
#define showcase_mkdir(d) mkdir(d, 0755)
#endif

enum {
    STEPS = 180,      /* 3 s at 60 Hz */
    FRAME_EVERY = 15, /* a frame every 0.25 s: 12 frames */
    FRAMES = STEPS / FRAME_EVERY,
    WIDTH = 640,
    HEIGHT = 360
};

static double now_ms(void) {
#ifdef _WIN32
    return 1000.0 * (double)clock() / CLOCKS_PER_SEC;
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
#endif
}

static int check(pbd_result r, const char *what, const pbd_world *w) {
    if (r == PBD_OK) return 0;
    fprintf(stderr, "showcase: %s failed: %s (%s)\n", what, pbd_result_string(r), w ? pbd_world_last_error(w) : "");
    return 1;
}

/* Rotate points about `centre`: about y by ay, then x by ax, then z by az. */
static void rotate_points(float *p, int n, const float *centre, float ay, float ax, float az) {
    float cy = cosf(ay), sy = sinf(ay), cx = cosf(ax), sx = sinf(ax), cz = cosf(az), sz = sinf(az);
    int i;
    for (i = 0; i < n; ++i) {
        float x = p[3 * i] - centre[0], y = p[3 * i + 1] - centre[1], z = p[3 * i + 2] - centre[2];
        float x0 = cy * x + sy * z, z0 = -sy * x + cy * z;
        float y1 = cx * y - sx * z0, z1 = sx * y + cx * z0;
        float x2 = cz * x0 - sz * y1, y2 = sz * x0 + cz * y1;
        p[3 * i] = centre[0] + x2;
        p[3 * i + 1] = centre[1] + y2;
        p[3 * i + 2] = centre[2] + z1;
    }
}

typedef struct object_stats {
    float min_y, max_y;
    int finite;
} object_stats;

static object_stats stats_of(const float *x, pbd_range r) {
    object_stats s;
    int i;
    s.min_y = 1e30f;
    s.max_y = -1e30f;
    s.finite = 1;
    for (i = r.first; i < r.first + r.count; ++i) {
        const float *p = x + 4 * (size_t)i;
        if (!(fabsf(p[0]) < 1e30f && fabsf(p[1]) < 1e30f && fabsf(p[2]) < 1e30f)) s.finite = 0;
        if (p[1] < s.min_y) s.min_y = p[1];
        if (p[1] > s.max_y) s.max_y = p[1];
    }
    return s;
}

int main(int argc, char **argv) {
    const char *outdir = argc > 1 ? argv[1] : "out";
    const float dt = 1.0f / 60.0f;
    const float ground_y = 0.0f;
    const float sphere_centre[3] = {-1.6f, 0.45f, 0.0f}, sphere_radius = 0.45f;
    pbd_world_desc wd = pbd_world_desc_default();
    pbd_world *w = NULL;
    pbd_mesh cloth_mesh, box_mesh, balloon_mesh;
    pbd_object cloth, box, balloon;
    pbd_object_parts cloth_parts, box_parts, balloon_parts;
    render_image frames[FRAMES];
    char labels[FRAMES][32];
    char base[1024], path[1100];
    double sim_total = 0.0, sim_min = 1e30, sim_max = 0.0, render_total = 0.0, window = 0.0;
    float balloon_rest_volume = 0.0f, balloon_volume = 0.0f;
    int step, steps_done = 0, frame = 0, rendered = 0, failed = 0, i;

    memset(&cloth_mesh, 0, sizeof cloth_mesh);
    memset(&box_mesh, 0, sizeof box_mesh);
    memset(&balloon_mesh, 0, sizeof balloon_mesh);
    memset(frames, 0, sizeof frames);
    showcase_mkdir(outdir); /* fails harmlessly when it exists */

    /* ---- the world: 8 substeps of 4 iterations per 1/60 s step ---------- */
    wd.substeps = 8;
    wd.iterations = 4;
    if (check(pbd_world_create(&wd, &w), "pbd_world_create", NULL)) return 1;
    {
        float point[3] = {0.0f, 0.0f, 0.0f}, normal[3] = {0.0f, 1.0f, 0.0f};
        point[1] = ground_y;
        if (check(pbd_add_collider_plane(w, point, normal, 0.6f, NULL), "ground plane", w)) return 1;
        if (check(pbd_add_collider_sphere(w, sphere_centre, sphere_radius, 0.3f, NULL), "sphere", w)) return 1;
    }

    /* ---- a 2 m square of cloth, 60x60 vertices, above the sphere -------- */
    {
        float o[3] = {-1.6f - 1.0f, 1.2f, -1.0f}, u[3] = {2.0f, 0.0f, 0.0f}, v[3] = {0.0f, 0.0f, 2.0f};
        pbd_cloth_desc c = pbd_cloth_desc_default();
        if (check(pbd_mesh_grid(60, 60, o, u, v, &cloth_mesh), "pbd_mesh_grid", w)) return 1;
        c.positions = cloth_mesh.positions;
        c.vertex_count = cloth_mesh.vertex_count;
        c.triangles = cloth_mesh.triangles;
        c.triangle_count = cloth_mesh.triangle_count;
        /* isometric bending (Bergou et al. 2006): cheap, and right for a
           cloth that is flat at rest */
        c.bending = PBD_BENDING_ISOMETRIC;
        c.bending_compliance = 1.0f; /* soft fabric: folds */
        c.thickness = 0.012f;
        c.damping = 0.5f;
        if (check(pbd_add_cloth(w, &c, &cloth), "pbd_add_cloth", w)) return 1;
        if (check(pbd_object_get_parts(w, cloth, &cloth_parts), "pbd_object_get_parts", w)) return 1;
    }

    /* ---- a soft 0.5 m box of 5x5x5 nodes, turned, dropped from 1 m ----- */
    {
        float lo[3] = {0.05f, 1.0f, -0.25f}, hi[3] = {0.55f, 1.5f, 0.25f};
        float centre[3] = {0.3f, 1.25f, 0.0f};
        pbd_softbody_desc s = pbd_softbody_desc_default();
        if (check(pbd_mesh_tet_box(5, 5, 5, lo, hi, &box_mesh), "pbd_mesh_tet_box", w)) return 1;
        /* turned about the vertical and tilted a little: a box that lands on
           an edge tumbles away (it is elastic), one that lands flat squashes
           and settles where it fell */
        rotate_points(box_mesh.positions, box_mesh.vertex_count, centre, 0.6f, 0.03f, 0.05f);
        s.positions = box_mesh.positions;
        s.vertex_count = box_mesh.vertex_count;
        s.tets = box_mesh.tets;
        s.tet_count = box_mesh.tet_count;
        s.density = 200.0f;         /* a foam block, 25 kg */
        s.edge_compliance = 1e-4f;  /* soft enough to squash visibly on impact */
        s.volume_compliance = 0.0f; /* but it keeps its volume */
        s.radius = 0.01f;
        s.damping = 1.0f;
        if (check(pbd_add_softbody(w, &s, &box), "pbd_add_softbody", w)) return 1;
        if (check(pbd_object_get_parts(w, box, &box_parts), "pbd_object_get_parts", w)) return 1;
    }

    /* ---- a balloon: an icosphere of radius 0.3 m, overpressure 1.3 ------ */
    {
        float centre[3] = {1.75f, 0.9f, 0.0f};
        pbd_balloon_desc b = pbd_balloon_desc_default();
        if (check(pbd_mesh_sphere(3, centre, 0.3f, &balloon_mesh), "pbd_mesh_sphere", w)) return 1;
        b.cloth.positions = balloon_mesh.positions;
        b.cloth.vertex_count = balloon_mesh.vertex_count;
        b.cloth.triangles = balloon_mesh.triangles;
        b.cloth.triangle_count = balloon_mesh.triangle_count;
        b.cloth.stretch_compliance = 1e-2f; /* rubber: the skin stretches as it inflates */
        b.cloth.bending_compliance = 1.0f;
        b.cloth.damping = 0.5f;
        b.pressure = 1.3f;
        if (check(pbd_add_balloon(w, &b, &balloon), "pbd_add_balloon", w)) return 1;
        if (check(pbd_object_get_parts(w, balloon, &balloon_parts), "pbd_object_get_parts", w)) return 1;
        pbd_group_mesh_volume(w, balloon_parts.volume, &balloon_rest_volume);
    }

    printf("showcase: %d particles (cloth %d, soft box %d in %d tets, balloon %d), "
           "%d substeps x %d iterations\n",
           pbd_world_particle_count(w), cloth_parts.particles.count, box_parts.particles.count, box_mesh.tet_count,
           balloon_parts.particles.count, wd.substeps, wd.iterations);
    if (pbd_world_device(w) == PBD_DEVICE_GPU) printf("showcase: on the GPU (built with PBD_CUDA and pbd_cuda.cu)\n");
    else
        printf("showcase: on the CPU, simd %s x%d, %d thread(s)\n", pbd_simd_path(), pbd_simd_width(),
               pbd_max_threads());

    /* ---- simulate and render -------------------------------------------- */
    {
        const float eye[3] = {-0.35f, 1.75f, 4.5f}, target[3] = {-0.35f, 0.3f, 0.0f}, up[3] = {0.0f, 1.0f, 0.0f};
        const float cloth_front[3] = {0.86f, 0.23f, 0.20f};
        const float box_colour[3] = {0.26f, 0.55f, 0.86f};
        const float balloon_colour[3] = {0.98f, 0.78f, 0.16f};
        const float sphere_colour[3] = {0.62f, 0.64f, 0.68f};
        render_camera cam = render_camera_look_at(eye, target, up, 40.0f);

        for (step = 1; step <= STEPS; ++step) {
            double t0 = now_ms(), ms;
            pbd_result r = pbd_world_step(w, dt);
            ms = now_ms() - t0;
            if (check(r, "pbd_world_step", w)) {
                failed = 1;
                break;
            }
            ++steps_done;
            sim_total += ms;
            window += ms;
            if (ms < sim_min) sim_min = ms;
            if (ms > sim_max) sim_max = ms;

            if (step % FRAME_EVERY == 0 && frame < FRAMES) {
                const float *x = pbd_world_positions(w);
                render_image *img = &frames[frame];
                const float *xc = x + 4 * (size_t)cloth_parts.particles.first;
                const float *xb = x + 4 * (size_t)box_parts.particles.first;
                const float *xl = x + 4 * (size_t)balloon_parts.particles.first;
                object_stats sc = stats_of(x, cloth_parts.particles), sb = stats_of(x, box_parts.particles),
                             sl = stats_of(x, balloon_parts.particles);
                double r0 = now_ms(), rms;
                const char *written;

                if (render_image_init(img, WIDTH, HEIGHT) != 0) {
                    fprintf(stderr, "out of memory\n");
                    failed = 1;
                    break;
                }
                render_clear(img, NULL, NULL);
                render_draw_ground(img, &cam, ground_y, 0.0f, -1.5f, 6.0f, 0.5f, NULL, NULL);
                render_draw_sphere_shadow(img, &cam, sphere_centre, sphere_radius, ground_y);
                render_draw_mesh_shadow(img, &cam, xc, 4, cloth_parts.particles.count, cloth_mesh.triangles,
                                        cloth_mesh.triangle_count, ground_y);
                render_draw_mesh_shadow(img, &cam, xb, 4, box_parts.particles.count, box_mesh.triangles,
                                        box_mesh.triangle_count, ground_y);
                render_draw_mesh_shadow(img, &cam, xl, 4, balloon_parts.particles.count, balloon_mesh.triangles,
                                        balloon_mesh.triangle_count, ground_y);
                render_draw_sphere(img, &cam, sphere_centre, sphere_radius, sphere_colour, RENDER_SMOOTH);
                render_draw_mesh(img, &cam, xc, 4, cloth_parts.particles.count, cloth_mesh.triangles,
                                 cloth_mesh.triangle_count, cloth_front, RENDER_SMOOTH);
                render_draw_mesh(img, &cam, xb, 4, box_parts.particles.count, box_mesh.triangles,
                                 box_mesh.triangle_count, box_colour, RENDER_WIREFRAME);
                render_draw_mesh(img, &cam, xl, 4, balloon_parts.particles.count, balloon_mesh.triangles,
                                 balloon_mesh.triangle_count, balloon_colour, RENDER_SMOOTH | RENDER_SPECULAR);
                /* scale 4: still crisp at half size in the contact sheet */
                snprintf(labels[frame], sizeof labels[frame], "T = %.2f S", pbd_world_time(w));
                render_text(img, 12, 12, 4, NULL, labels[frame]);
                rms = now_ms() - r0;
                render_total += rms;
                ++rendered;

                snprintf(base, sizeof base, "%s/showcase_%03d", outdir, frame);
                written = render_image_save(img, base, path, sizeof path);
                pbd_group_mesh_volume(w, balloon_parts.volume, &balloon_volume);
                printf("frame %2d  t=%.2f s  sim %.3f ms/step (last %d steps)  render %.1f ms  "
                       "min y: cloth %.3f box %.3f balloon %.3f  balloon volume x%.2f  -> %s\n",
                       frame, pbd_world_time(w), window / FRAME_EVERY, FRAME_EVERY, rms, sc.min_y, sb.min_y, sl.min_y,
                       balloon_rest_volume > 0.0f ? balloon_volume / balloon_rest_volume : 0.0f,
                       written ? written : "(write failed)");
                if (!written) {
                    fprintf(stderr, "showcase: cannot write %s.* (does the folder exist?)\n", base);
                    failed = 1;
                    break;
                }
                if (!sc.finite || !sb.finite || !sl.finite) {
                    fprintf(stderr, "showcase: non-finite positions at t=%.2f s (cloth %d box %d balloon %d)\n",
                            pbd_world_time(w), sc.finite, sb.finite, sl.finite);
                    failed = 1;
                }
                window = 0.0;
                ++frame;
            }
        }
    }

    /* ---- contact sheet and summary -------------------------------------- */
    if (frame > 0 && !failed) {
        const char *written;
        snprintf(base, sizeof base, "%s/showcase", outdir);
        /* the frames carry their time stamps already: no extra labels */
        written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet (%d frames) -> %s\n", frame, written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    if (steps_done > 0) {
        printf("summary: %d steps of %.4f s (%.2f s simulated), %d particles: sim %.3f ms/step "
               "(min %.3f, max %.3f), %.1f ms total; render %.1f ms/frame\n",
               steps_done, dt, steps_done * dt, pbd_world_particle_count(w), sim_total / steps_done, sim_min, sim_max,
               sim_total, rendered > 0 ? render_total / rendered : 0.0);
    }

    for (i = 0; i < FRAMES; ++i) render_image_free(&frames[i]);
    pbd_mesh_free(&cloth_mesh);
    pbd_mesh_free(&box_mesh);
    pbd_mesh_free(&balloon_mesh);
    pbd_world_destroy(w);
    return failed;
}
