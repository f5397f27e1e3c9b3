/* bench/hair_head.c - hair on a head (pbd.h manual, "strands"): how
   stretched its strands get where the head's collider pushes them, and
   whether the hair gains energy. The numbers the manual quotes are this
   program's (simulation outputs, not timings).

   Scene: the manual's hair: 162 roots spread over a head sphere of radius
   0.1 m (a Fibonacci spiral), strands of 16 particles and 0.2 m grown
   along the normals (pbd_hair_desc defaults: 0.1 mg particles, damping
   0.9, first segment clamped), the head a sphere collider of the same
   radius (friction 0.3), world defaults, 1/60 s steps. Phases: `fall`
   (0-1 s, the head still: the hair falls onto it), `shake` (1-3 s: the
   head swings 5 cm side to side at 2 Hz, roots and collider together),
   `rest` (3-5 s, the head still again). Keys per phase: `worst_stretch`
   (the largest |l - l0| / l0 of any segment over the phase), `end_worst`
   and `mean_stretch` (the largest and the mean at the phase's last step), and for `rest` also
   `energy_gain` (the hair's largest kinetic plus potential energy during
   the rest phase above its value when the phase began, in J: a still head
   does no work, so this must be <= 0).

   Build and run: make bench BENCH=hair_head (or cc -std=c99 -O2 -I.
   bench/hair_head.c -lm); --damping S runs another s_damping, --hz F
   steps of 1/F s (default 60). */
#include "bench.h"
#include <math.h>

enum { ROOTS = 162, PER = 16 };

static double hair_energy(const pbd_world *w, pbd_range r, float m) {
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    double e = 0;
    for (int i = r.first; i < r.first + r.count; ++i) {
        const float *q = v + 4 * i;
        e += m * (0.5 * ((double)q[0] * q[0] + (double)q[1] * q[1] + (double)q[2] * q[2]) + 9.81 * x[4 * i + 1]);
    }
    return e;
}

/* the largest and the mean relative stretch of the strands' segments */
static void hair_stretch(const pbd_world *w, pbd_range r, float rest, double *worst, double *mean) {
    const float *x = pbd_world_positions(w);
    double sum = 0;
    *worst = 0;
    for (int s = 0; s < ROOTS; ++s)
        for (int k = 1; k < PER; ++k) {
            const float *a = x + 4 * (r.first + s * PER + k - 1), *b = a + 4;
            double d = sqrt((double)(b[0] - a[0]) * (b[0] - a[0]) + (double)(b[1] - a[1]) * (b[1] - a[1]) +
                            (double)(b[2] - a[2]) * (b[2] - a[2])),
                   e = fabs(d - rest) / rest;
            sum += e;
            if (e > *worst) *worst = e;
        }
    *mean = sum / (ROOTS * (PER - 1));
}

static void hair_run(float damping, int hz) {
    pbd_world_desc wd = bench_desc();
    pbd_world *w = NULL;
    if (pbd_world_create(&wd, &w) != PBD_OK) return;
    float pos[3 * ROOTS], nrm[3 * ROOTS], head[3] = {0, 1.5f, 0}, id[4] = {0, 0, 0, 1};
    for (int s = 0; s < ROOTS; ++s) {
        float y = 1 - 2 * ((float)s + 0.5f) / ROOTS, phi = 2.39996323f * (float)s, r = sqrtf(1 - y * y);
        nrm[3 * s] = r * cosf(phi);
        nrm[3 * s + 1] = y;
        nrm[3 * s + 2] = r * sinf(phi);
        for (int a = 0; a < 3; ++a) pos[3 * s + a] = 0.1f * nrm[3 * s + a];
    }
    pbd_collider headc;
    pbd_add_collider_sphere(w, head, 0.1f, 0.3f, &headc);
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = pos;
    hd.root_normals = nrm;
    hd.strand_count = ROOTS;
    hd.damping = damping;
    memcpy(hd.position, head, sizeof head);
    pbd_strands hair;
    pbd_range r;
    if (pbd_add_hair(w, &hd, &hair, &r) != PBD_OK) {
        fprintf(stderr, "hair_head: %s\n", pbd_world_last_error(w));
        return;
    }
    const char *phase[3] = {"fall", "shake", "rest"};
    float rest = hd.length / (PER - 1);
    for (int p = 0, f = 0; p < 3; ++p) {
        double worst = 0, end_worst = 0, mean = 0, e0 = hair_energy(w, r, hd.mass), emax = e0;
        int frames = (p == 0 ? 1 : 2) * hz;
        for (int k = 0; k < frames; ++k, ++f) {
            if (p == 1) {
                float c[3] = {head[0] + 0.05f * sinf(2 * 3.14159265f * 2 * (float)(k + 1) / (float)hz), head[1],
                              head[2]};
                pbd_collider_set_pose(w, headc, c, id);
                pbd_strands_set_transform(w, hair, c, id);
            }
            pbd_world_step(w, 1.0f / (float)hz);
            double wk, mk;
            hair_stretch(w, r, rest, &wk, &mk);
            if (wk > worst) worst = wk;
            end_worst = wk;
            mean = mk;
            double e = hair_energy(w, r, hd.mass);
            if (e > emax) emax = e;
        }
        printf("{\"bench\": \"hair_head\", \"hz\": %d, \"damping\": %g, \"phase\": \"%s\", \"worst_stretch\": %.4f, "
               "\"end_worst\": %.4f, \"mean_stretch\": %.5f",
               hz, (double)damping, phase[p], worst, end_worst, mean);
        if (p == 2) printf(", \"energy_gain\": %.3g", emax - e0);
        printf("}\n");
    }
    fflush(stdout);
    pbd_world_destroy(w);
}

int main(int argc, char **argv) {
    float damping = 0.9f;
    int hz = 60;
    for (int i = 1; i < argc; ++i)
        if (strcmp(argv[i], "--damping") == 0 && i + 1 < argc) damping = (float)atof(argv[++i]);
        else if (strcmp(argv[i], "--hz") == 0 && i + 1 < argc) hz = atoi(argv[++i]);
    if (hz < 1) hz = 60;
    hair_run(damping, hz);
    return 0;
}
