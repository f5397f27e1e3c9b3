/* hair.c - a head of hair shaken: 4000 follow-the-leader strands of 16
   particles (dynamic FTL, Mueller et al. 2012) rooted on a head that
   shakes side to side and nods, with the head as a sphere collider. Roots
   follow the head's pose (pbd_strands_set_transform); the first segment of
   every strand is clamped along the scalp normal. Writes 12 frames and a
   contact sheet; strands are drawn as thin camera-facing ribbons.

   Build and run from the repository root (without libstb-dev drop the last
   two flags and get PPM files):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/hair.c -o hair -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./hair out        # out/hair_000.png ... out/hair_011.png, out/hair.png
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

enum {
    STRANDS = 4000,
    PER = 16,
    STEPS = 180,
    FRAME_EVERY = 15,
    FRAMES = STEPS / FRAME_EVERY,
    WIDTH = 640,
    HEIGHT = 360
};

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

/* The head's pose at time t: shaken side to side, then nodding. */
static void head_pose(float t, float *pos, float *rot) {
    float yaw = 0.9f * sinf(7.0f * t) * (t < 1.5f ? 1.0f : 0.3f), pitch = t > 1.5f ? 0.35f * sinf(6.0f * t) : 0.0f;
    float cy = cosf(0.5f * yaw), sy = sinf(0.5f * yaw), cp = cosf(0.5f * pitch), sp = sinf(0.5f * pitch);
    /* q = yaw about y, then pitch about x */
    rot[0] = cy * sp;
    rot[1] = sy * cp;
    rot[2] = -sy * sp;
    rot[3] = cy * cp;
    pos[0] = 0.08f * sinf(7.0f * t) * (t < 1.5f ? 1.0f : 0.0f);
    pos[1] = 1.5f;
    pos[2] = 0;
}

int main(int argc, char **argv) {
    const char *outdir = argc > 1 ? argv[1] : "out";
    const float dt = 1.0f / 60.0f, head_r = 0.1f;
    mkdir(outdir, 0755);
    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 4;
    wd.iterations = 1; /* one FTL pass is exact */
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return 1;

    /* roots: a Fibonacci spiral over the scalp (the top and the back, not the face) */
    float *pos = (float *)malloc(sizeof(float) * 3 * STRANDS * 2),
          *nrm = (float *)malloc(sizeof(float) * 3 * STRANDS * 2);
    int ns = 0;
    for (int s = 0; s < 2 * STRANDS && ns < STRANDS; ++s) {
        float y = 1.0f - 2.0f * ((float)s + 0.5f) / (float)(2 * STRANDS), r = sqrtf(1 - y * y),
              phi = 2.39996323f * (float)s;
        float n[3] = {r * cosf(phi), y, r * sinf(phi)};
        if (n[1] < -0.1f || (n[2] > 0.35f && n[1] < 0.55f)) continue; /* the face and the neck */
        for (int k = 0; k < 3; ++k) {
            nrm[3 * ns + k] = n[k];
            pos[3 * ns + k] = head_r * n[k];
        }
        ns++;
    }
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = pos;
    hd.root_normals = nrm;
    hd.strand_count = ns;
    hd.particles_per_strand = PER;
    hd.length = 0.28f;
    hd.mass = 2e-5f;
    hd.radius = 0.003f;
    hd.damping = 0.9f;
    head_pose(0, hd.position, hd.rotation);
    pbd_strands hair;
    pbd_range hr;
    pbd_result res = pbd_add_hair(w, &hd, &hair, &hr);
    free(pos);
    free(nrm);
    if (res != PBD_OK) {
        fprintf(stderr, "hair: %s\n", pbd_world_last_error(w));
        return 1;
    }
    float hp[3], hq[4];
    head_pose(0, hp, hq);
    pbd_collider head;
    if (pbd_add_collider_sphere(w, hp, head_r, 0.2f, &head) != PBD_OK) return 1;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    pbd_add_collider_plane(w, ground, up, 0.5f, NULL);
    printf("hair: %d strands x %d particles = %d particles, %d substeps x %d iteration, simd %s, %d thread(s)\n", ns,
           PER, hr.count, wd.substeps, wd.iterations, pbd_simd_path(), pbd_max_threads());

    /* ribbons: two vertices per particle, two triangles per segment */
    int nv = 2 * hr.count, nt = 2 * ns * (PER - 1);
    float *rib = (float *)malloc(sizeof(float) * 3 * (size_t)nv);
    int *tri = (int *)malloc(sizeof(int) * 3 * (size_t)nt);
    for (int s = 0, t = 0; s < ns; ++s)
        for (int i = 0; i + 1 < PER; ++i) {
            int a = 2 * (s * PER + i), b = a + 2;
            tri[3 * t] = a;
            tri[3 * t + 1] = a + 1;
            tri[3 * t + 2] = b;
            ++t;
            tri[3 * t] = a + 1;
            tri[3 * t + 1] = b + 1;
            tri[3 * t + 2] = b;
            ++t;
        }
    render_image frames[FRAMES];
    memset(frames, 0, sizeof frames);
    const float eye[3] = {0.5f, 1.55f, 0.75f}, target[3] = {0, 1.4f, 0}, cup[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, target, cup, 40.0f);
    const float hair_rgb[3] = {0.45f, 0.28f, 0.12f}, skin[3] = {0.93f, 0.76f, 0.62f};
    double sim = 0;
    int frame = 0, failed = 0;
    for (int step = 1; step <= STEPS && !failed; ++step) {
        head_pose((float)step * dt, hp, hq);
        pbd_strands_set_transform(w, hair, hp, hq);
        pbd_collider_set_pose(w, head, hp, hq);
        double t0 = now_ms();
        if (pbd_world_step(w, dt) != PBD_OK) {
            failed = 1;
            break;
        }
        sim += now_ms() - t0;
        if (step % FRAME_EVERY) continue;
        const float *x = pbd_world_positions(w);
        for (int s = 0; s < ns; ++s)
            for (int i = 0; i < PER; ++i) {
                int k = s * PER + i;
                const float *p = x + 4 * (size_t)(hr.first + k);
                const float *q = x + 4 * (size_t)(hr.first + s * PER + (i + 1 < PER ? i + 1 : i - 1));
                float d[3] = {q[0] - p[0], q[1] - p[1], q[2] - p[2]},
                      v[3] = {eye[0] - p[0], eye[1] - p[1], eye[2] - p[2]};
                float side[3] = {d[1] * v[2] - d[2] * v[1], d[2] * v[0] - d[0] * v[2], d[0] * v[1] - d[1] * v[0]};
                float l = sqrtf(side[0] * side[0] + side[1] * side[1] + side[2] * side[2]);
                float hw = 0.0009f * (1.0f - 0.6f * (float)i / (float)PER) / (l > 1e-12f ? l : 1.0f);
                for (int c = 0; c < 3; ++c) {
                    if (!isfinite(p[c])) failed = 1;
                    rib[3 * (2 * k) + c] = p[c] - side[c] * hw;
                    rib[3 * (2 * k + 1) + c] = p[c] + side[c] * hw;
                }
            }
        render_image *img = &frames[frame];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            failed = 1;
            break;
        }
        render_clear(img, NULL, NULL);
        render_draw_ground(img, &cam, 0.0f, 0, 0, 3.0f, 0.25f, NULL, NULL);
        render_draw_sphere(img, &cam, hp, head_r * 0.985f, skin, RENDER_SMOOTH);
        render_draw_mesh(img, &cam, rib, 3, nv, tri, nt, hair_rgb, RENDER_FLAT);
        char label[32], base[1024], path[1100];
        snprintf(label, sizeof label, "T = %.2f S", pbd_world_time(w));
        render_text(img, 12, 12, 4, NULL, label);
        snprintf(base, sizeof base, "%s/hair_%03d", outdir, frame);
        if (!render_image_save(img, base, path, sizeof path)) {
            failed = 1;
            break;
        }
        printf("frame %2d  t=%.2f s  sim %.2f ms/step -> %s\n", frame, pbd_world_time(w), sim / step, path);
        frame++;
    }
    if (!failed && frame > 0) {
        char base[1024], path[1100];
        snprintf(base, sizeof base, "%s/hair", outdir);
        const char *written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet -> %s\n", written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    printf("summary: %d particles, %.2f ms per step (1/60 s)\n", hr.count, sim / STEPS);
    for (int i = 0; i < FRAMES; ++i) render_image_free(&frames[i]);
    free(rib);
    free(tri);
    pbd_world_destroy(w);
    return failed;
}
