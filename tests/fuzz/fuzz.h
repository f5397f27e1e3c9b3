/* fuzz.h - shared by the fuzz harnesses in tests/fuzz/ (see the Makefile's
   `fuzz` target and README "Robustness").

   Each harness defines LLVMFuzzerTestOneInput. Built with clang
   -fsanitize=fuzzer it is a libFuzzer target; built without
   (-DPBD_FUZZ_REPLAY, any compiler) this header adds a main that replays
   files and folders of inputs (a corpus, a crash) and, with
   `--seeds DIR`, writes the harness's seed corpus into DIR.

   The bytes are read by a small decoder that never fails: past the end it
   reads zeros, so every input, even an empty one, is a scene. Seeds are
   written with the matching encoder (fz_put_*), so that they decode to
   meaningful scenes. */
#ifndef PBD_FUZZ_H
#define PBD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
    const uint8_t *d;
    size_t n, off;
} fz;

static inline fz fz_make(const uint8_t *d, size_t n) {
    fz f;
    f.d = d;
    f.n = n;
    f.off = 0;
    return f;
}
static inline int fz_left(const fz *f) { return f->off < f->n; }
static inline unsigned fz_u8(fz *f) { return f->off < f->n ? f->d[f->off++] : 0u; }
static inline unsigned fz_u16(fz *f) {
    unsigned lo = fz_u8(f);
    return lo | (fz_u8(f) << 8);
}
/* An int in [lo, hi] (hi - lo < 65536). */
static inline int fz_int(fz *f, int lo, int hi) {
    unsigned v = fz_u16(f);
    return lo + (int)(v % (unsigned)(hi - lo + 1));
}
/* A float in [lo, hi], or (tag byte 0xff) any 32 bits: NaN, Inf, huge,
   denormal - the values a builder must refuse or survive. */
static inline float fz_float(fz *f, float lo, float hi) {
    unsigned tag = fz_u8(f);
    if (tag == 0xffu) {
        uint32_t bits = fz_u16(f);
        bits |= (uint32_t)fz_u16(f) << 16;
        float x;
        memcpy(&x, &bits, sizeof x);
        return x;
    }
    return lo + (hi - lo) * ((float)fz_u16(f) / 65535.0f);
}
/* A float in [lo, hi] only (finite; the step harness's parameters). */
static inline float fz_range(fz *f, float lo, float hi) { return lo + (hi - lo) * ((float)fz_u16(f) / 65535.0f); }

/* ---- encoder for the seeds ---- */
typedef struct fz_buf {
    uint8_t d[1 << 16];
    size_t n;
} fz_buf;
static inline void fz_put_u8(fz_buf *b, unsigned v) {
    if (b->n < sizeof b->d) b->d[b->n++] = (uint8_t)v;
}
static inline void fz_put_u16(fz_buf *b, unsigned v) {
    fz_put_u8(b, v & 0xffu);
    fz_put_u8(b, (v >> 8) & 0xffu);
}
static inline void fz_put_int(fz_buf *b, int lo, int v) { fz_put_u16(b, (unsigned)(v - lo)); }
static inline unsigned fz_q16(float lo, float hi, float v) {
    float t = (v - lo) / (hi - lo);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return (unsigned)(t * 65535.0f + 0.5f);
}
static inline void fz_put_float(fz_buf *b, float lo, float hi, float v) {
    fz_put_u8(b, 0);
    fz_put_u16(b, fz_q16(lo, hi, v));
}
static inline void fz_put_range(fz_buf *b, float lo, float hi, float v) { fz_put_u16(b, fz_q16(lo, hi, v)); }

#ifdef PBD_FUZZ_REPLAY
#include <dirent.h>
#include <sys/stat.h>

static inline void fz_write(const char *dir, const char *name, const void *d, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(d, 1, n, fp) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    fclose(fp);
}
static inline void fz_write_buf(const char *dir, const char *name, const fz_buf *b) { fz_write(dir, name, b->d, b->n); }

/* Each harness: writes its seeds into dir. */
static void fuzz_seeds(const char *dir);

static int fz_replay_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *d = (uint8_t *)malloc(cap);
    size_t got;
    while (d && (got = fread(d + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            d = (uint8_t *)realloc(d, cap);
        }
    }
    fclose(fp);
    if (!d) return 1;
    LLVMFuzzerTestOneInput(d, n);
    free(d);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int a = 1; a < argc; ++a) {
        if (!strcmp(argv[a], "--seeds") && a + 1 < argc) {
            mkdir(argv[a + 1], 0755);
            fuzz_seeds(argv[++a]);
            continue;
        }
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            fprintf(stderr, "no such input %s\n", argv[a]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= fz_replay_file(argv[a]);
            ++files;
            continue;
        }
        DIR *dp = opendir(argv[a]);
        struct dirent *e;
        while (dp && (e = readdir(dp)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            bad |= fz_replay_file(path);
            ++files;
        }
        if (dp) closedir(dp);
    }
    printf("%s: replayed %d inputs\n", argv[0], files);
    return bad;
}
#endif /* PBD_FUZZ_REPLAY */

/* A finding that is not a memory error: the contract "on error nothing
   observable changes" broken, or a non-finite result where none may be. */
#define FZ_CHECK(cond, ...)                                                                 \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "fuzz check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fprintf(stderr, "\n");                                                          \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

#endif /* PBD_FUZZ_H */

/* ---- world helpers (harnesses include pbd.h before this header) ---- */
#ifdef PBD_H_INCLUDED
typedef struct fz_snap {
    unsigned char *d;
    size_t n;
} fz_snap;

static inline fz_snap fz_save(const pbd_world *w) {
    fz_snap s;
    s.n = pbd_world_snapshot_size(w);
    s.d = (unsigned char *)malloc(s.n ? s.n : 1);
    FZ_CHECK(s.d && pbd_world_save(w, s.d, s.n) == PBD_OK, "pbd_world_save of a valid world failed");
    return s;
}
/* 1 when the world's snapshot is byte-identical to s. */
static inline int fz_same(const pbd_world *w, fz_snap s) {
    fz_snap t = fz_save(w);
    int same = t.n == s.n && memcmp(t.d, s.d, s.n) == 0;
    free(t.d);
    return same;
}
/* The FNV-1a checksum snapshots and model files end with. */
static inline uint64_t fz_fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}
/* Positions and velocities finite and within `bound` (m, m/s). */
static inline int fz_world_sane(const pbd_world *w, float bound) {
    int n = pbd_world_particle_count(w);
    const float *x = pbd_world_positions(w), *v = pbd_world_velocities(w);
    for (int i = 0; i < 4 * n; ++i) {
        if ((i & 3) == 3) continue;
        if (!(x[i] > -bound && x[i] < bound) || !(v[i] > -bound && v[i] < bound)) return 0;
    }
    return 1;
}
#endif
