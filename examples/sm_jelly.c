/* sm_jelly.c - jelly with plasticity (pbd_sm.h): three jelly blocks of
   lattice shape matching (Rivers and James 2007; survey 4.2, linear mode,
   region half-width 2) are dropped on the ground; then a heavy weight (a
   rigid shape-matched block, 20x denser) falls on each of them, rests there
   and is lifted off again. The blocks differ only in their plasticity
   (survey 4.5.2): the left one is elastic and springs back, the middle one
   creeps a little, the right one yields easily and keeps a deep dent. The
   weights touch the jellies through a small contact plugin written here,
   an example of a contact model of your own: each jelly particle inside a
   weight's box is pushed out along the nearest face, and the weight is
   pushed back by the opposite impulse (mass-weighted, so momentum is
   kept). pbd.h's particle contacts (pbd_particles_set_particle_contact) would
   work too, but they see spheres: the weight would be a lumpy box of
   balls, and a lattice's particles belong to no object, so a jelly's own
   touching neighbours would push each other apart as it is squeezed.

   Frames every 0.25 s and a contact sheet go to out/ (PNG with libstb-dev,
   else PPM); each frame prints the dent depth of every block (how far the
   centre of its top face sits below the undeformed height) and its largest
   plastic strain ||S_p - I||. Build and run from the repository root:

       cc -O2 -fopenmp -ffp-contract=off -I. examples/sm_jelly.c -o sm_jelly -lm -DPBD_HAVE_STB -I/usr/include/stb && ./sm_jelly out

   Exit status 0 when every step succeeded, the positions stayed finite and
   every image was written.
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
#ifdef _WIN32
#include <direct.h>
#define jelly_mkdir(d) _mkdir(d)
#else
#include <sys/stat.h>
#define jelly_mkdir(d) mkdir(d, 0755)
#endif

enum {
    STEPS = 240,      /* 4 s at 60 Hz */
    FRAME_EVERY = 15, /* 16 frames */
    FRAMES = STEPS / FRAME_EVERY,
    WIDTH = 640,
    HEIGHT = 360,
    JELLIES = 3,
    JN = 7, /* a jelly is JN^3 particles */
    WX = 3,
    WY = 2,            /* a weight is WX x WY x WX particles */
    RELEASE_STEP = 45, /* the weights fall from t = 0.75 s */
    LIFT_STEP = 135    /* and are lifted off from t = 2.25 s */
};

static const float SPACING = 0.05f;
static const float WEIGHT_DENSITY = 20.0f; /* times the jelly's: lead or so */

typedef struct box_lattice {
    int nx, ny, nz;
    pbd_range particles;
    pbd_sm_body body;
    int *tris; /* surface triangles over the particles */
    int tri_count;
} box_lattice;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int check(pbd_result r, const char *what) {
    if (r == PBD_OK) return 0;
    fprintf(stderr, "sm_jelly: %s failed: %s\n", what, pbd_result_string(r));
    return 1;
}

/* Index of cell (x, y, z) in pbd_sm_lattice_box's order (x fastest). */
static int cell(const box_lattice *b, int x, int y, int z) { return x + b->nx * (y + b->ny * z); }

/* The surface of the particle grid: two triangles per quad of the six faces. */
static int box_surface(box_lattice *b) {
    int nx = b->nx, ny = b->ny, nz = b->nz, k = 0;
    int quads = 2 * ((nx - 1) * (ny - 1) + (ny - 1) * (nz - 1) + (nx - 1) * (nz - 1));
    b->tris = (int *)malloc(sizeof(int) * 6 * (size_t)quads);
    if (!b->tris) return 1;
    for (int side = 0; side < 2; ++side) {
        for (int i = 0; i + 1 < nx; ++i) /* z = 0 / nz-1 */
            for (int j = 0; j + 1 < ny; ++j) {
                int z = side ? nz - 1 : 0;
                int a = cell(b, i, j, z), c = cell(b, i + 1, j, z), d = cell(b, i + 1, j + 1, z),
                    e = cell(b, i, j + 1, z);
                int q[6] = {a, c, d, a, d, e};
                memcpy(b->tris + k, q, sizeof q);
                k += 6;
            }
        for (int j = 0; j + 1 < ny; ++j) /* x = 0 / nx-1 */
            for (int l = 0; l + 1 < nz; ++l) {
                int x = side ? nx - 1 : 0;
                int a = cell(b, x, j, l), c = cell(b, x, j + 1, l), d = cell(b, x, j + 1, l + 1),
                    e = cell(b, x, j, l + 1);
                int q[6] = {a, c, d, a, d, e};
                memcpy(b->tris + k, q, sizeof q);
                k += 6;
            }
        for (int i = 0; i + 1 < nx; ++i) /* y = 0 / ny-1 */
            for (int l = 0; l + 1 < nz; ++l) {
                int y = side ? ny - 1 : 0;
                int a = cell(b, i, y, l), c = cell(b, i + 1, y, l), d = cell(b, i + 1, y, l + 1),
                    e = cell(b, i, y, l + 1);
                int q[6] = {a, c, d, a, d, e};
                memcpy(b->tris + k, q, sizeof q);
                k += 6;
            }
    }
    b->tri_count = k / 3;
    return 0;
}

/* A block of nx x ny x nz particles with its lower corner at `lo`. */
static int add_block(pbd_world *w, box_lattice *b, int nx, int ny, int nz, const float *lo, float mass,
                     const pbd_sm_body_desc *body, int half_width) {
    int n = nx * ny * nz;
    int *cells = (int *)malloc(sizeof(int) * 3 * (size_t)n);
    if (!cells) return 1;
    b->nx = nx;
    b->ny = ny;
    b->nz = nz;
    pbd_sm_lattice_box(nx, ny, nz, cells);
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = n;
    memcpy(ld.origin, lo, sizeof ld.origin);
    ld.spacing = SPACING;
    ld.particle_mass = mass;
    ld.half_width = half_width;
    ld.body = *body;
    pbd_result r = pbd_sm_add_lattice(w, &ld, &b->body, &b->particles);
    free(cells);
    return check(r, "pbd_sm_add_lattice") || box_surface(b);
}

/* --- weight-jelly contacts: a plugin ------------------------------------- */

typedef struct contacts {
    box_lattice *jelly, *weight;
    float weight_mass, jelly_mass, radius;
} contacts;

/* The weight's box from its particles: centre, orthonormal axes (from its
   corner particles) and half extents (particle grid plus radius). */
static void weight_box(const box_lattice *b, const float *p, double *c, double ax[3][3], double *half) {
    const float *o = p + 4 * (size_t)(b->particles.first + cell(b, 0, 0, 0));
    int corner[3] = {cell(b, b->nx - 1, 0, 0), cell(b, 0, b->ny - 1, 0), cell(b, 0, 0, b->nz - 1)};
    int dims[3] = {b->nx, b->ny, b->nz};
    c[0] = c[1] = c[2] = 0;
    for (int i = 0; i < b->particles.count; ++i)
        for (int a = 0; a < 3; ++a) c[a] += p[4 * (size_t)(b->particles.first + i) + a] / b->particles.count;
    for (int k = 0; k < 3; ++k) { /* Gram-Schmidt on the edge vectors */
        const float *q = p + 4 * (size_t)(b->particles.first + corner[k]);
        for (int a = 0; a < 3; ++a) ax[k][a] = q[a] - o[a];
        for (int j = 0; j < k; ++j) {
            double d = ax[k][0] * ax[j][0] + ax[k][1] * ax[j][1] + ax[k][2] * ax[j][2];
            for (int a = 0; a < 3; ++a) ax[k][a] -= d * ax[j][a];
        }
        double l = sqrt(ax[k][0] * ax[k][0] + ax[k][1] * ax[k][1] + ax[k][2] * ax[k][2]);
        for (int a = 0; a < 3; ++a) ax[k][a] /= l;
        half[k] = 0.5 * (dims[k] - 1) * SPACING;
    }
}

/* Every iteration after shape matching: a jelly particle (radius r) inside
   the weight's box is pushed out through the nearest face; the weight (a
   rigid block: all its particles) moves the opposite way, the split
   weighted by inverse masses. */
static void contacts_project(void *user, const pbd_solve_context *ctx) {
    contacts *cs = (contacts *)user;
    for (int j = 0; j < JELLIES; ++j) {
        box_lattice *wb = &cs->weight[j], *jb = &cs->jelly[j];
        /* a pinned or kinematic weight (inverse mass 0) pushes but is not pushed */
        int weight_moves = ctx->p[4 * (size_t)wb->particles.first + 3] > 0;
        double c[3], ax[3][3], half[3], shift[3] = {0, 0, 0};
        weight_box(wb, ctx->p, c, ax, half);
        for (int i = 0; i < jb->particles.count; ++i) {
            float *q = ctx->p + 4 * (size_t)(jb->particles.first + i);
            double d[3] = {q[0] - c[0], q[1] - c[1], q[2] - c[2]}, best = 1e30;
            int face = -1;
            double sgn = 1;
            for (int k = 0; k < 3; ++k) {
                double u = d[0] * ax[k][0] + d[1] * ax[k][1] + d[2] * ax[k][2];
                double pen = half[k] + cs->radius - fabs(u);
                if (pen <= 0) {
                    face = -1;
                    break;
                }
                if (pen < best) {
                    best = pen;
                    face = k;
                    sgn = u >= 0 ? 1 : -1;
                }
            }
            if (face < 0) continue;
            double wj = 1.0 / cs->jelly_mass, ww = weight_moves ? 1.0 / cs->weight_mass : 0.0;
            double fj = wj / (wj + ww), fw = ww / (wj + ww);
            for (int a = 0; a < 3; ++a) {
                q[a] = (float)(q[a] + sgn * ax[face][a] * best * fj);
                shift[a] -= sgn * ax[face][a] * best * fw;
            }
        }
        for (int i = 0; i < wb->particles.count && weight_moves; ++i) {
            float *q = ctx->p + 4 * (size_t)(wb->particles.first + i);
            for (int a = 0; a < 3; ++a) q[a] = (float)(q[a] + shift[a]);
        }
    }
}

/* Dent: how far the centre of the top face sits below the block's
   undeformed top (its lowest particle + height); and max ||S_p - I||. */
static void jelly_stats(const pbd_world *w, const box_lattice *b, const float *x, double *dent, double *plastic,
                        int *finite) {
    double lo = 1e30;
    for (int i = 0; i < b->particles.count; ++i) {
        const float *p = x + 4 * (size_t)(b->particles.first + i);
        if (!(fabsf(p[0]) < 1e30f && fabsf(p[1]) < 1e30f && fabsf(p[2]) < 1e30f)) *finite = 0;
        if (p[1] < lo) lo = p[1];
    }
    const float *top = x + 4 * (size_t)(b->particles.first + cell(b, b->nx / 2, b->ny - 1, b->nz / 2));
    *dent = lo + (b->ny - 1) * SPACING - top[1];
    *plastic = 0;
    int regions = 0;
    pbd_sm_body_region_count(w, b->body, &regions);
    for (int r = 0; r < regions; ++r) {
        float S[9];
        double s = 0;
        pbd_sm_body_plastic_state(w, b->body, r, S);
        for (int k = 0; k < 9; ++k) s += (S[k] - (k % 4 == 0)) * (S[k] - (k % 4 == 0));
        if (sqrt(s) > *plastic) *plastic = sqrt(s);
    }
}

int main(int argc, char **argv) {
    const char *outdir = argc > 1 ? argv[1] : "out";
    const float dt = 1.0f / 60.0f;
    /* plasticity per block: elastic, creeping, soft (survey 4.5.2) */
    const float creep[JELLIES] = {0.0f, 4.0f, 12.0f}, yield[JELLIES] = {0.1f, 0.05f, 0.04f};
    const float jelly_x[JELLIES] = {-0.55f, 0.0f, 0.55f};
    const float jelly_colour[JELLIES][3] = {{0.30f, 0.75f, 0.35f}, {0.95f, 0.60f, 0.15f}, {0.85f, 0.25f, 0.35f}};
    const float weight_colour[3] = {0.45f, 0.47f, 0.52f};
    const float jelly_mass = 1000.0f * SPACING * SPACING * SPACING; /* water-like jelly, kg per particle */
    box_lattice jelly[JELLIES], weight[JELLIES];
    contacts cs;
    render_image frames[FRAMES];
    char labels[FRAMES][32], base[1024], path[1100];
    double sim_total = 0;
    int failed = 0, frame = 0;
    memset(jelly, 0, sizeof jelly);
    memset(weight, 0, sizeof weight);
    memset(frames, 0, sizeof frames);
    jelly_mkdir(outdir);

    pbd_world_desc wd = pbd_world_desc_default();
    wd.substeps = 4;
    wd.iterations = 3;
    wd.point_damping = 1.5f; /* jelly is viscous: no bouncing weights */
    pbd_world *w = NULL;
    if (check(pbd_world_create(&wd, &w), "pbd_world_create")) return 1;
    float ground[3] = {0, 0, 0}, up[3] = {0, 1, 0};
    if (check(pbd_add_collider_plane(w, ground, up, 0.8f, NULL), "ground")) return 1;

    for (int j = 0; j < JELLIES; ++j) {
        pbd_sm_body_desc jd = pbd_sm_body_desc_default();
        jd.mode = PBD_SM_LINEAR;
        jd.beta = 0.3f;
        jd.stiffness = 0.6f;
        jd.yield = yield[j];
        jd.creep = creep[j];
        jd.max_plastic = 0.6f;
        float lo[3] = {jelly_x[j] - 0.5f * (JN - 1) * SPACING, 0.25f + 0.1f * j, -0.5f * (JN - 1) * SPACING};
        if (add_block(w, &jelly[j], JN, JN, JN, lo, jelly_mass, &jd, 2)) return 1;
        /* the weight: rigid (one region spans the block), 20x denser, held up until RELEASE_STEP */
        pbd_sm_body_desc rd = pbd_sm_body_desc_default();
        float wlo[3] = {jelly_x[j] - 0.5f * (WX - 1) * SPACING, 1.0f, -0.5f * (WX - 1) * SPACING};
        if (add_block(w, &weight[j], WX, WY, WX, wlo, WEIGHT_DENSITY * jelly_mass, &rd, 8)) return 1;
        for (int i = 0; i < weight[j].particles.count; ++i) pbd_particle_pin(w, weight[j].particles.first + i);
    }
    cs.jelly = jelly;
    cs.weight = weight;
    cs.weight_mass = WEIGHT_DENSITY * jelly_mass * WX * WY * WX;
    cs.jelly_mass = jelly_mass;
    cs.radius = 0.5f * SPACING;
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "weight contacts";
    pd.user = &cs;
    pd.particle_end = pbd_world_particle_count(w);
    pd.project = contacts_project;
    if (check(pbd_add_plugin(w, &pd, NULL), "pbd_add_plugin")) return 1;
    { /* the contacts couple the weights with the jellies */
        int all[JELLIES * 2];
        for (int j = 0; j < JELLIES; ++j) {
            all[2 * j] = jelly[j].particles.first;
            all[2 * j + 1] = weight[j].particles.first;
        }
        pbd_world_mark_coupled(w, all, JELLIES * 2);
    }

    printf("sm_jelly: %d particles (3 jellies of %d, 3 weights of %d), %d substeps x %d iterations, %d thread(s)\n",
           pbd_world_particle_count(w), JN * JN * JN, WX * WY * WX, wd.substeps, wd.iterations, pbd_max_threads());
    const float eye[3] = {0.0f, 1.25f, 1.45f}, target[3] = {0.0f, 0.1f, 0.0f}, cup[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(eye, target, cup, 40.0f);

    for (int step = 1; step <= STEPS && !failed; ++step) {
        if (step == RELEASE_STEP)
            for (int j = 0; j < JELLIES; ++j)
                for (int i = 0; i < weight[j].particles.count; ++i)
                    pbd_particle_unpin(w, weight[j].particles.first + i);
        if (step >= LIFT_STEP) { /* lift the weights straight up at 0.8 m/s */
            const float *x = pbd_world_positions(w);
            for (int j = 0; j < JELLIES; ++j)
                for (int i = 0; i < weight[j].particles.count; ++i) {
                    int k = weight[j].particles.first + i;
                    if (step == LIFT_STEP) pbd_particle_set_kinematic(w, k, 1);
                    float t[3] = {x[4 * k], x[4 * k + 1] + 0.8f * dt, x[4 * k + 2]};
                    pbd_particle_set_kinematic_target(w, k, t);
                }
        }
        double t0 = now_ms();
        if (check(pbd_world_step(w, dt), "pbd_world_step")) {
            failed = 1;
            break;
        }
        sim_total += now_ms() - t0;
        if (step % FRAME_EVERY) continue;

        const float *x = pbd_world_positions(w);
        render_image *img = &frames[frame];
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            failed = 1;
            break;
        }
        render_clear(img, NULL, NULL);
        render_draw_ground(img, &cam, 0.0f, 0.0f, 0.0f, 2.5f, 0.25f, NULL, NULL);
        for (int j = 0; j < JELLIES; ++j) {
            box_lattice *bs[2] = {&jelly[j], &weight[j]};
            for (int k = 0; k < 2; ++k)
                render_draw_mesh_shadow(img, &cam, x + 4 * (size_t)bs[k]->particles.first, 4, bs[k]->particles.count,
                                        bs[k]->tris, bs[k]->tri_count, 0.0f);
        }
        printf("frame %2d  t=%.2f s", frame, pbd_world_time(w));
        for (int j = 0; j < JELLIES; ++j) {
            double dent, plastic;
            int finite = 1;
            jelly_stats(w, &jelly[j], x, &dent, &plastic, &finite);
            if (!finite) failed = 1;
            printf("  [%s dent %.3f m, ||Sp-I|| %.2f]", j == 0 ? "elastic" : j == 1 ? "creep" : "soft", dent, plastic);
            render_draw_mesh(img, &cam, x + 4 * (size_t)jelly[j].particles.first, 4, jelly[j].particles.count,
                             jelly[j].tris, jelly[j].tri_count, jelly_colour[j], RENDER_SMOOTH | RENDER_SPECULAR);
            render_draw_mesh(img, &cam, x + 4 * (size_t)weight[j].particles.first, 4, weight[j].particles.count,
                             weight[j].tris, weight[j].tri_count, weight_colour, RENDER_FLAT);
        }
        snprintf(labels[frame], sizeof labels[frame], "T = %.2f S", pbd_world_time(w));
        render_text(img, 12, 12, 4, NULL, labels[frame]);
        snprintf(base, sizeof base, "%s/sm_jelly_%03d", outdir, frame);
        const char *written = render_image_save(img, base, path, sizeof path);
        printf("  -> %s\n", written ? written : "(write failed)");
        if (!written) failed = 1;
        ++frame;
    }
    if (frame > 0 && !failed) {
        snprintf(base, sizeof base, "%s/sm_jelly", outdir);
        const char *written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet (%d frames) -> %s\n", frame, written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    printf("summary: %.2f ms/step over %d steps\n", sim_total / STEPS, STEPS);
    for (int i = 0; i < FRAMES; ++i) render_image_free(&frames[i]);
    for (int j = 0; j < JELLIES; ++j) {
        free(jelly[j].tris);
        free(weight[j].tris);
    }
    pbd_world_destroy(w);
    return failed;
}
