/* sm_plant.c - oriented particles (pbd_sm.h, survey 4.4; Mueller and
   Chentanez 2011) on a sparse structure: a plant whose stem and branches
   are chains one particle wide, so every shape-matching group (a particle
   and its 1-ring) is collinear - plain shape matching cannot find its
   rotation there, the particles' ellipsoids make it well defined. The
   plant is pinned at the root, swayed by a gust of wind, then hit by a
   ball that sweeps through it (the ball meets the particles' ellipsoids,
   elongated along the branches, not just their small spheres). A visual
   mesh (tubes around the branches and a leaf at each tip) follows the
   particles by linear blend skinning with the particles as bones.

   3 s at 60 Hz, a frame every 15 steps (12 frames) and a contact sheet.
   Build and run from the repository root (one line; without libstb-dev
   drop the last two flags and get PPM files instead of PNG):

       cc -O2 -fopenmp -ffp-contract=off -I. examples/sm_plant.c -o sm_plant -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./sm_plant out        # out/sm_plant_000.png ... out/sm_plant_011.png, out/sm_plant.png

   Exit status 0 when every step succeeded, everything stayed finite and
   every image was written. */
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

enum { STEPS = 180, FRAME_EVERY = 15, FRAMES = STEPS / FRAME_EVERY, WIDTH = 640, HEIGHT = 480 };
enum { MAXP = 64, MAXE = 64, RING = 8 };

/* ---- the plant's skeleton: particles and edges -------------------------- */
typedef struct plant {
    float pos[3 * MAXP];
    int edges[2 * MAXE];
    int parent[MAXP]; /* -1 for the root */
    int n, ne;
} plant;

static int plant_add(plant *p, int parent, float x, float y, float z) {
    int i = p->n++;
    p->pos[3 * i] = x;
    p->pos[3 * i + 1] = y;
    p->pos[3 * i + 2] = z;
    p->parent[i] = parent;
    if (parent >= 0) {
        p->edges[2 * p->ne] = parent;
        p->edges[2 * p->ne + 1] = i;
        p->ne++;
    }
    return i;
}

/* A stem of 10 particles 0.15 apart and five branches of 3-4 particles,
   turning around the stem, going out and up. */
static void plant_build(plant *p) {
    memset(p, 0, sizeof *p);
    int stem[10];
    for (int i = 0; i < 10; ++i)
        stem[i] = plant_add(p, i ? stem[i - 1] : -1, 0.02f * sinf(0.7f * (float)i), 0.15f * (float)i, 0);
    const int at[5] = {3, 4, 5, 7, 8}, len[5] = {4, 4, 3, 3, 3};
    for (int b = 0; b < 5; ++b) {
        float ang = 2.4f * (float)b, dx = cosf(ang), dz = sinf(ang);
        int prev = stem[at[b]];
        for (int k = 1; k <= len[b]; ++k) {
            const float *o = p->pos + 3 * stem[at[b]];
            prev =
                plant_add(p, prev, o[0] + 0.13f * (float)k * dx, o[1] + 0.07f * (float)k, o[2] + 0.13f * (float)k * dz);
        }
    }
}

/* The rest orientation of particle i: body y along the segment to its
   parent (the stem direction for the root), as a quaternion turning y
   onto that direction. */
static void segment_orientation(const plant *p, int i, float *q) {
    int a = p->parent[i] >= 0 ? p->parent[i] : 1, b = p->parent[i] >= 0 ? i : 0;
    float d[3] = {p->pos[3 * b] - p->pos[3 * a], p->pos[3 * b + 1] - p->pos[3 * a + 1],
                  p->pos[3 * b + 2] - p->pos[3 * a + 2]};
    if (p->parent[i] < 0) {
        d[0] = -d[0];
        d[1] = -d[1];
        d[2] = -d[2];
    }
    float l = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    for (int k = 0; k < 3; ++k) d[k] /= l;
    /* half-way quaternion from (0,1,0) to d: axis y x d, w = 1 + y.d */
    float q0[4] = {d[2], 0, -d[0], 1 + d[1]}, n = sqrtf(q0[0] * q0[0] + q0[2] * q0[2] + q0[3] * q0[3]);
    for (int k = 0; k < 4; ++k) q[k] = q0[k] / n;
}

/* ---- the visual mesh: a tube around every edge, a leaf at every tip ---- */
typedef struct visual {
    float *rest; /* vertex_count*3 */
    float *now;
    int *tris;
    int nv, nt, cap_v, cap_t;
} visual;

static int vis_vertex(visual *v, float x, float y, float z) {
    if (v->nv == v->cap_v) {
        v->cap_v = v->cap_v ? 2 * v->cap_v : 256;
        v->rest = (float *)realloc(v->rest, sizeof(float) * 3 * (size_t)v->cap_v);
    }
    v->rest[3 * v->nv] = x;
    v->rest[3 * v->nv + 1] = y;
    v->rest[3 * v->nv + 2] = z;
    return v->nv++;
}
static void vis_tri(visual *v, int a, int b, int c) {
    if (v->nt == v->cap_t) {
        v->cap_t = v->cap_t ? 2 * v->cap_t : 256;
        v->tris = (int *)realloc(v->tris, sizeof(int) * 3 * (size_t)v->cap_t);
    }
    v->tris[3 * v->nt] = a;
    v->tris[3 * v->nt + 1] = b;
    v->tris[3 * v->nt + 2] = c;
    v->nt++;
}

static void visual_build(const plant *p, visual *v) {
    memset(v, 0, sizeof *v);
    for (int e = 0; e < p->ne; ++e) {
        const float *a = p->pos + 3 * p->edges[2 * e], *b = p->pos + 3 * p->edges[2 * e + 1];
        float d[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]}, u[3], w[3];
        float l = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        for (int k = 0; k < 3; ++k) d[k] /= l;
        /* u, w: an orthonormal pair across the segment */
        float t[3] = {fabsf(d[1]) < 0.9f ? 0.0f : 1.0f, fabsf(d[1]) < 0.9f ? 1.0f : 0.0f, 0};
        u[0] = d[1] * t[2] - d[2] * t[1];
        u[1] = d[2] * t[0] - d[0] * t[2];
        u[2] = d[0] * t[1] - d[1] * t[0];
        float ul = sqrtf(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        for (int k = 0; k < 3; ++k) u[k] /= ul;
        w[0] = d[1] * u[2] - d[2] * u[1];
        w[1] = d[2] * u[0] - d[0] * u[2];
        w[2] = d[0] * u[1] - d[1] * u[0];
        float ra = 0.028f - 0.0012f * a[1] * 10, rb = 0.028f - 0.0012f * b[1] * 10;
        int base = v->nv;
        for (int ring = 0; ring < 4; ++ring) {
            float s = (float)ring / 3.0f, r = ra + (rb - ra) * s;
            for (int k = 0; k < RING; ++k) {
                float ang = 6.2831853f * (float)k / RING, c = cosf(ang) * r, sn = sinf(ang) * r;
                vis_vertex(v, a[0] + s * l * d[0] + c * u[0] + sn * w[0], a[1] + s * l * d[1] + c * u[1] + sn * w[1],
                           a[2] + s * l * d[2] + c * u[2] + sn * w[2]);
            }
        }
        for (int ring = 0; ring < 3; ++ring)
            for (int k = 0; k < RING; ++k) {
                int i0 = base + ring * RING + k, i1 = base + ring * RING + (k + 1) % RING;
                vis_tri(v, i0, i1, i0 + RING);
                vis_tri(v, i1, i1 + RING, i0 + RING);
            }
    }
}

/* A leaf: a diamond in the plane of the tip's segment and the horizontal. */
static void leaves_build(const plant *p, visual *v) {
    for (int i = 0; i < p->n; ++i) {
        int child = 0;
        for (int e = 0; e < p->ne; ++e) child |= p->edges[2 * e] == i;
        if (child || p->parent[i] < 0) continue;
        const float *a = p->pos + 3 * p->parent[i], *b = p->pos + 3 * i;
        float d[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
        float l = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        for (int k = 0; k < 3; ++k) d[k] /= l;
        float s[3] = {-d[2], 0, d[0]}, sl = sqrtf(s[0] * s[0] + s[2] * s[2]);
        for (int k = 0; k < 3; ++k) s[k] /= sl;
        int v0 = vis_vertex(v, b[0], b[1], b[2]);
        int v1 = vis_vertex(v, b[0] + 0.08f * d[0] + 0.05f * s[0], b[1] + 0.08f * d[1] + 0.02f,
                            b[2] + 0.08f * d[2] + 0.05f * s[2]);
        int v2 = vis_vertex(v, b[0] + 0.18f * d[0], b[1] + 0.18f * d[1] + 0.03f, b[2] + 0.18f * d[2]);
        int v3 = vis_vertex(v, b[0] + 0.08f * d[0] - 0.05f * s[0], b[1] + 0.08f * d[1] + 0.02f,
                            b[2] + 0.08f * d[2] - 0.05f * s[2]);
        vis_tri(v, v0, v1, v2);
        vis_tri(v, v0, v2, v3);
    }
}

/* ---- wind: a gust from 0.3 s to 1.6 s on the plant's particles ---------- */
static void wind(void *user, int particle, const float *x, const float *v, double time, float *out) {
    const pbd_range *r = (const pbd_range *)user;
    (void)v;
    out[0] = out[1] = out[2] = 0;
    if (particle < r->first || particle >= r->first + r->count || time < 0.3 || time > 1.6) return;
    double gust = sin(3.14159265 * (time - 0.3) / 1.3);
    out[0] = (float)(14.0 * gust * gust * (0.3 + x[1])); /* stronger higher up */
    out[2] = (float)(4.0 * sin(7.0 * time) * gust);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int check(pbd_result r, const char *what) {
    if (r == PBD_OK) return 0;
    fprintf(stderr, "sm_plant: %s failed: %s\n", what, pbd_result_string(r));
    return 1;
}

int main(int argc, char **argv) {
    const char *outdir = argc > 1 ? argv[1] : "out";
    const float dt = 1.0f / 60.0f, ball_radius = 0.16f;
    plant pl;
    visual vis;
    render_image frames[FRAMES];
    char labels[FRAMES][48], base[1024], path[1100];
    int failed = 0, frame = 0;
    double sim_ms = 0, max_tip = 0;
    memset(frames, 0, sizeof frames);
    mkdir(outdir, 0755); /* fails harmlessly when it exists */

    plant_build(&pl);
    visual_build(&pl, &vis);
    leaves_build(&pl, &vis);
    vis.now = (float *)malloc(sizeof(float) * 3 * (size_t)vis.nv);

    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 8;
    wd.iterations = 4;
    pbd_world *w = NULL;
    if (check(pbd_world_create(&wd, &w), "pbd_world_create")) return 1;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (check(pbd_add_collider_plane(w, ground, up, 0.5f, NULL), "ground")) return 1;
    float ball[3] = {-1.2f, 0.95f, 0.05f};
    pbd_collider ball_id;
    if (check(pbd_add_collider_sphere(w, ball, ball_radius, 0.2f, &ball_id), "ball")) return 1;

    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pl.pos;
    pd.count = pl.n;
    pd.mass = 0.05f;
    pd.radius = 0.025f; /* the particle's own sphere; its ellipsoid reaches further */
    pbd_range r;
    if (check(pbd_add_particles(w, &pd, &r), "pbd_add_particles")) return 1;
    pbd_particle_pin(w, r.first);
    pbd_particle_pin(w, r.first + 1);
    pbd_world_set_point_damping(w, 0.4f);
    pbd_world_set_acceleration_field(w, wind, &r);

    /* ellipsoids: long (0.075 = half a segment) along the segment, thin across */
    float radii[3 * MAXP], quats[4 * MAXP];
    for (int i = 0; i < pl.n; ++i) {
        radii[3 * i] = 0.03f;
        radii[3 * i + 1] = 0.075f;
        radii[3 * i + 2] = 0.03f;
        segment_orientation(&pl, i, quats + 4 * i);
    }
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = r;
    od.edges = pl.edges;
    od.edge_count = pl.ne;
    od.radii = radii;
    od.orientations = quats;
    od.stiffness = 0.8f;
    pbd_sm_oriented o = {0};
    if (check(pbd_sm_add_oriented(w, &od, &o), "pbd_sm_add_oriented")) return 1;
    pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
    sd.rest_vertices = vis.rest;
    sd.vertex_count = vis.nv;
    sd.influences = 2;
    pbd_sm_skin *skin = NULL;
    if (check(pbd_sm_skin_create(w, o, &sd, &skin), "pbd_sm_skin_create")) return 1;
    printf("sm_plant: %d oriented particles, %d edges, visual mesh %d vertices / %d triangles, simd %s, %d thread(s)\n",
           pl.n, pl.ne, vis.nv, vis.nt, pbd_simd_path(), pbd_max_threads());

    const float eye[3] = {1.6f, 1.2f, 2.6f}, target[3] = {0.1f, 0.7f, 0}, cam_up[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, target, cam_up, 40.0f);
    const float stem_colour[3] = {0.42f, 0.62f, 0.22f}, ball_colour[3] = {0.85f, 0.3f, 0.2f};
    for (int step = 1; step <= STEPS && !failed; ++step) {
        double tsec = step * (double)dt;
        /* the ball sweeps through the crown from 1.8 s to 2.8 s */
        if (tsec > 1.8) {
            float s = (float)((tsec - 1.8) / 1.0);
            ball[0] = -1.2f + 2.4f * (s < 1 ? s : 1);
            if (check(pbd_collider_set_pose(w, ball_id, ball, NULL), "pbd_collider_set_pose")) {
                failed = 1;
                break;
            }
        }
        double t0 = now_ms();
        if (check(pbd_world_step(w, dt), "pbd_world_step")) {
            failed = 1;
            break;
        }
        sim_ms += now_ms() - t0;
        const float *x = pbd_world_positions(w);
        for (int i = 0; i < 4 * pl.n; ++i)
            if (!isfinite(x[4 * r.first + i])) failed = 1;
        int tip = pl.n - 1;
        double dx = x[4 * (r.first + tip)] - pl.pos[3 * tip], dy = x[4 * (r.first + tip) + 1] - pl.pos[3 * tip + 1],
               dz = x[4 * (r.first + tip) + 2] - pl.pos[3 * tip + 2], dd = sqrt(dx * dx + dy * dy + dz * dz);
        if (dd > max_tip) max_tip = dd;
        if (step % FRAME_EVERY) continue;
        pbd_sm_skin_apply(skin, w, vis.now);
        render_image *img = &frames[frame];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            failed = 1;
            break;
        }
        render_clear(img, NULL, NULL);
        render_draw_ground(img, &cam, 0, 0, 0, 3, 0.25f, NULL, NULL);
        render_draw_mesh_shadow(img, &cam, vis.now, 3, vis.nv, vis.tris, vis.nt, 0);
        render_draw_sphere_shadow(img, &cam, ball, ball_radius, 0);
        render_draw_mesh(img, &cam, vis.now, 3, vis.nv, vis.tris, vis.nt, stem_colour, RENDER_SMOOTH);
        render_draw_sphere(img, &cam, ball, ball_radius, ball_colour, RENDER_SMOOTH | RENDER_SPECULAR);
        snprintf(labels[frame], sizeof labels[frame], "T = %.2f S", tsec);
        render_text(img, 12, 12, 4, NULL, labels[frame]);
        snprintf(base, sizeof base, "%s/sm_plant_%03d", outdir, frame);
        const char *written = render_image_save(img, base, path, sizeof path);
        double energy = 0;
        pbd_sm_oriented_rotational_energy(w, o, &energy);
        printf("frame %2d  t=%.2f s  tip moved %.3f m  rotational energy %.2e J  -> %s\n", frame, tsec, dd, energy,
               written ? written : "(write failed)");
        if (!written) failed = 1;
        frame++;
    }
    if (!failed && frame > 0) {
        snprintf(base, sizeof base, "%s/sm_plant", outdir);
        const char *written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet (%d frames) -> %s\n", frame, written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    printf("summary: %d particles, %.3f ms/step, largest tip displacement %.3f m%s\n", pl.n, sim_ms / STEPS, max_tip,
           failed ? ", FAILED" : "");
    for (int i = 0; i < FRAMES; ++i) render_image_free(&frames[i]);
    pbd_sm_skin_destroy(skin);
    pbd_world_destroy(w);
    free(vis.rest);
    free(vis.now);
    free(vis.tris);
    return failed;
}
