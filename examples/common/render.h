/* render.h - a small software rasterizer for the headless pbd examples.

   MANUAL
   ======
   Do this in *one* C or C++ file (the example's):

       #define PBD_RENDER_IMPLEMENTATION
       #include "examples/common/render.h"

   It draws triangle meshes (flat or smooth Lambert shading with a fixed
   light, both sides lit, optional wireframe), a checkerboard ground, spheres
   and boxes, planar shadows on the ground and small text labels into an RGB8
   image with a z-buffer, and saves the image as PNG when PBD_HAVE_STB is
   defined (the Makefile passes -DPBD_HAVE_STB -I/usr/include/stb when
   Debian's libstb-dev is installed; stb_image_write's implementation is
   emitted here), else as binary PPM. Nothing allocates per pixel: an image
   owns its colour, depth and shadow-mask buffers, a mesh draw call
   allocates one scratch array for its vertices.

       render_image img;
       render_image_init(&img, 640, 360);
       float eye[3] = {0, 2, 5}, at[3] = {0, 0.5f, 0}, up[3] = {0, 1, 0};
       render_camera cam = render_camera_look_at(eye, at, up, 40.0f);
       float sky_top[3] = {0.55f, 0.7f, 0.9f}, sky_bottom[3] = {0.9f, 0.92f, 0.95f};
       render_clear(&img, sky_top, sky_bottom);
       render_draw_ground(&img, &cam, 0.0f, 0, 0, 4.0f, 0.5f, NULL, NULL);
       render_draw_mesh_shadow(&img, &cam, x, 4, n, tris, nt, 0.0f);      // before the meshes
       render_draw_mesh(&img, &cam, x, 4, n, tris, nt, colour, RENDER_SMOOTH);
       char path[512];
       render_image_save(&img, "out/frame_000", path, sizeof path);  // adds .png or .ppm

   Draw order per frame: clear, ground, shadows, then everything else
   (shadows only darken ground pixels that nothing else covers yet).

   Colours are floats in [0, 1]. Positions are read with a stride in floats
   (pbd particles: 4 floats x y z inv_mass; pbd meshes: 3 floats), triangles
   are 3 ints each, indexing those positions.

   CONFIG MACROS
       PBD_RENDER_IMPLEMENTATION  emit the implementation
       PBD_RENDER_STATIC          make every function static
       PBD_HAVE_STB               PNG output through <stb_image_write.h>

   LICENSE: MIT or public domain (your choice), like pbd.h.
*/
#ifndef PBD_RENDER_H_INCLUDED
#define PBD_RENDER_H_INCLUDED

#include <stddef.h>

#ifdef PBD_RENDER_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define RENDER_DEF static __attribute__((unused)) /* a program need not use them all */
#else
#define RENDER_DEF static
#endif
#else
#define RENDER_DEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct render_image {
    int width, height;
    unsigned char *rgb;  /* width*height*3, row 0 at the top */
    float *depth;        /* 1/z per pixel, 0 = nothing drawn (larger is nearer) */
    unsigned char *mask; /* 1 where a shadow darkened the pixel this frame */
} render_image;

/* A look-at pinhole camera. Build it with render_camera_look_at (it fills
   the orthonormal basis); fields may be read. */
typedef struct render_camera {
    float eye[3], target[3], up[3];
    float fov_y_degrees; /* vertical field of view */
    float znear;         /* near clip distance, default 0.05 */
    float right[3], true_up[3], forward[3];
} render_camera;

enum {
    RENDER_FLAT = 0,      /* one colour per triangle (face normal) */
    RENDER_SMOOTH = 1,    /* vertex normals averaged over the mesh, Gouraud */
    RENDER_WIREFRAME = 2, /* dark edges over the shaded triangles */
    RENDER_SPECULAR = 4   /* a white highlight (smooth shading only) */
};

/* 0 on success, -1 when out of memory or the size is not positive. */
RENDER_DEF int render_image_init(render_image *img, int width, int height);
RENDER_DEF void render_image_free(render_image *img);
/* Fill with a vertical gradient from `top` to `bottom` (NULL: a light sky)
   and reset depth and shadow mask. */
RENDER_DEF void render_clear(render_image *img, const float *top, const float *bottom);

RENDER_DEF render_camera render_camera_look_at(const float *eye, const float *target, const float *up,
                                               float fov_y_degrees);
/* The unit direction towards the fixed light (used for shading and shadows). */
RENDER_DEF void render_light_direction(float *out3);

/* A triangle mesh; positions[i*stride + 0..2] is vertex i (vertex_count of
   them); both sides are shaded. */
RENDER_DEF void render_draw_mesh(render_image *img, const render_camera *cam, const float *positions, int stride,
                                 int vertex_count, const int *triangles, int triangle_count, const float *rgb,
                                 int flags);
/* Checkerboard tiles on the plane y = height over the square of half size
   `half_extent` around (centre_x, centre_z). Colours NULL: light greys. */
RENDER_DEF void render_draw_ground(render_image *img, const render_camera *cam, float height, float centre_x,
                                   float centre_z, float half_extent, float tile_size, const float *rgb_a,
                                   const float *rgb_b);
RENDER_DEF void render_draw_sphere(render_image *img, const render_camera *cam, const float *centre, float radius,
                                   const float *rgb, int flags);
/* A box with half extents along the axes of the unit quaternion `rotation`
   (x y z w, NULL: identity). */
RENDER_DEF void render_draw_box(render_image *img, const render_camera *cam, const float *centre,
                                const float *half_extents, const float *rotation, const float *rgb, int flags);
/* Shadows cast along the light direction onto the ground plane y = height:
   they darken ground pixels drawn so far, once per pixel however many
   shadows overlap. */
RENDER_DEF void render_draw_mesh_shadow(render_image *img, const render_camera *cam, const float *positions, int stride,
                                        int vertex_count, const int *triangles, int triangle_count, float height);
RENDER_DEF void render_draw_sphere_shadow(render_image *img, const render_camera *cam, const float *centre,
                                          float radius, float height);

/* A 3x5 pixel font scaled by `scale` (digits, letters, " .:=-+/%(),_"); a
   dark outline keeps it readable. Returns the x after the text. */
RENDER_DEF int render_text(render_image *img, int x, int y, int scale, const float *rgb, const char *text);

/* Save as "<path_without_extension>.png" (PBD_HAVE_STB) or ".ppm". Writes
   the full path into path_out (may be NULL: an internal static buffer) and
   returns it, or NULL when the file could not be written. */
RENDER_DEF const char *render_image_save(const render_image *img, const char *path_without_extension, char *path_out,
                                         size_t path_out_size);

/* Paste `count` images of one size into a grid of `columns` columns, each
   scaled down by the integer `scale` (box filter), with `labels` (NULL or
   count strings, entries may be NULL) written into the cells, and save it
   like render_image_save. */
RENDER_DEF const char *render_contact_sheet(const render_image *images, int count, int columns, int scale,
                                            const char *const *labels, const char *path_without_extension,
                                            char *path_out, size_t path_out_size);

#ifdef __cplusplus
}
#endif
#endif /* PBD_RENDER_H_INCLUDED */

/* ========================================================================== */
#ifdef PBD_RENDER_IMPLEMENTATION
#ifndef PBD_RENDER_IMPLEMENTATION_DONE
#define PBD_RENDER_IMPLEMENTATION_DONE

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PBD_HAVE_STB
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#ifndef STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_IMPLEMENTATION
#endif
#ifdef PBD_RENDER_STATIC
#define STB_IMAGE_WRITE_STATIC
#endif
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- small vector helpers ------------------------------------------------ */

static float render__dot(const float *a, const float *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static void render__sub(const float *a, const float *b, float *o) {
    o[0] = a[0] - b[0];
    o[1] = a[1] - b[1];
    o[2] = a[2] - b[2];
}
static void render__cross(const float *a, const float *b, float *o) {
    float x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2], z = a[0] * b[1] - a[1] * b[0];
    o[0] = x;
    o[1] = y;
    o[2] = z;
}
static float render__normalize(float *a) {
    float l = sqrtf(render__dot(a, a));
    if (l > 1e-20f) {
        a[0] /= l;
        a[1] /= l;
        a[2] /= l;
    }
    return l;
}
static float render__clamp01(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static unsigned char render__byte(float x) { return (unsigned char)(render__clamp01(x) * 255.0f + 0.5f); }

/* The key light: from the upper left, slightly in front. */
static const float render__light[3] = {-0.424264f, 0.848528f, 0.316228f};
static const float render__ambient = 0.30f, render__diffuse = 0.70f;

RENDER_DEF void render_light_direction(float *out3) {
    out3[0] = render__light[0];
    out3[1] = render__light[1];
    out3[2] = render__light[2];
}

/* ---- image --------------------------------------------------------------- */

RENDER_DEF int render_image_init(render_image *img, int width, int height) {
    size_t n;
    memset(img, 0, sizeof *img);
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384) return -1;
    n = (size_t)width * (size_t)height;
    img->rgb = (unsigned char *)calloc(n * 3, 1);
    img->depth = (float *)calloc(n, sizeof(float));
    img->mask = (unsigned char *)calloc(n, 1);
    if (!img->rgb || !img->depth || !img->mask) {
        render_image_free(img);
        return -1;
    }
    img->width = width;
    img->height = height;
    return 0;
}

RENDER_DEF void render_image_free(render_image *img) {
    free(img->rgb);
    free(img->depth);
    free(img->mask);
    memset(img, 0, sizeof *img);
}

RENDER_DEF void render_clear(render_image *img, const float *top, const float *bottom) {
    static const float def_top[3] = {0.47f, 0.62f, 0.82f}, def_bottom[3] = {0.88f, 0.91f, 0.95f};
    int x, y;
    size_t n = (size_t)img->width * (size_t)img->height;
    if (!top) top = def_top;
    if (!bottom) bottom = def_bottom;
    for (y = 0; y < img->height; ++y) {
        float t = img->height > 1 ? (float)y / (float)(img->height - 1) : 0.0f;
        unsigned char c[3];
        unsigned char *row = img->rgb + (size_t)y * img->width * 3;
        c[0] = render__byte(top[0] + (bottom[0] - top[0]) * t);
        c[1] = render__byte(top[1] + (bottom[1] - top[1]) * t);
        c[2] = render__byte(top[2] + (bottom[2] - top[2]) * t);
        for (x = 0; x < img->width; ++x) {
            row[3 * x] = c[0];
            row[3 * x + 1] = c[1];
            row[3 * x + 2] = c[2];
        }
    }
    memset(img->depth, 0, n * sizeof(float));
    memset(img->mask, 0, n);
}

/* ---- camera -------------------------------------------------------------- */

RENDER_DEF render_camera render_camera_look_at(const float *eye, const float *target, const float *up,
                                               float fov_y_degrees) {
    render_camera c;
    int i;
    memset(&c, 0, sizeof c);
    for (i = 0; i < 3; ++i) {
        c.eye[i] = eye[i];
        c.target[i] = target[i];
        c.up[i] = up[i];
    }
    c.fov_y_degrees = fov_y_degrees > 1.0f && fov_y_degrees < 179.0f ? fov_y_degrees : 45.0f;
    c.znear = 0.05f;
    render__sub(target, eye, c.forward);
    if (render__normalize(c.forward) < 1e-20f) { c.forward[2] = -1.0f; }
    render__cross(c.forward, up, c.right);
    if (render__normalize(c.right) < 1e-12f) {
        /* up parallel to the view direction: pick any perpendicular */
        float alt[3] = {1.0f, 0.0f, 0.0f};
        if (fabsf(c.forward[0]) > 0.9f) {
            alt[0] = 0.0f;
            alt[2] = 1.0f;
        }
        render__cross(c.forward, alt, c.right);
        render__normalize(c.right);
    }
    render__cross(c.right, c.forward, c.true_up);
    return c;
}

/* Camera space: x right, y up, z along the view direction (z > 0 visible). */
static void render__to_camera(const render_camera *c, const float *p, float *o) {
    float d[3];
    render__sub(p, c->eye, d);
    o[0] = render__dot(d, c->right);
    o[1] = render__dot(d, c->true_up);
    o[2] = render__dot(d, c->forward);
}

/* ---- rasterizer ------------------------------------------------------------
   A clip-space vertex: camera-space position and two shading values
   (diffuse factor, specular). Triangles are clipped against the near plane
   in camera space, projected, and scanned over their screen bounding box
   with edge functions evaluated directly per pixel (no incremental
   stepping): a shared edge then gives bit-identical values in both
   triangles, so there are no cracks. Depth is 1/z, linear in screen space. */

typedef struct render__vertex {
    float c[3];
    float diff, spec;
} render__vertex;

typedef struct render__target {
    render_image *img;
    float focal, cx, cy, znear;
} render__target;

static render__target render__make_target(render_image *img, const render_camera *cam) {
    render__target t;
    t.img = img;
    t.focal = 0.5f * (float)img->height / tanf(0.5f * cam->fov_y_degrees * 3.14159265f / 180.0f);
    t.cx = 0.5f * (float)img->width;
    t.cy = 0.5f * (float)img->height;
    t.znear = cam->znear > 0.0f ? cam->znear : 0.05f;
    return t;
}

/* The edge a->b in a canonical vertex order (the lexicographically smaller
   end first), so that the neighbour's opposite edge b->a gives exactly the
   negated value at every pixel: no cracks, no double coverage gaps. */
typedef struct render__edge_fn {
    float ox, oy, dx, dy, sign;
} render__edge_fn;

static render__edge_fn render__edge_setup(const float *a, const float *b) {
    render__edge_fn e;
    int swap = !(a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]));
    const float *s = swap ? b : a, *t = swap ? a : b;
    e.ox = s[0];
    e.oy = s[1];
    e.dx = t[0] - s[0];
    e.dy = t[1] - s[1];
    e.sign = swap ? -1.0f : 1.0f;
    return e;
}

/* mode 0: shaded colour; mode 1: shadow (darken visible ground once);
   sv: three screen vertices (x, y, 1/z), shade: diffuse/spec per vertex. */
static void render__raster(const render__target *t, const float sv[3][3], const float diff[3], const float spec[3],
                           const float *rgb, int mode) {
    render_image *img = t->img;
    float area, inv_area, minx, maxx, miny, maxy;
    int x0, x1, y0, y1, x, y, i;
    const float *a = sv[0], *b = sv[1], *c = sv[2];
    render__edge_fn e0, e1, e2;
    area = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]);
    if (!(area > 1e-12f || area < -1e-12f)) return; /* also rejects NaN */
    inv_area = 1.0f / area;
    minx = maxx = a[0];
    miny = maxy = a[1];
    for (i = 1; i < 3; ++i) {
        if (sv[i][0] < minx) minx = sv[i][0];
        if (sv[i][0] > maxx) maxx = sv[i][0];
        if (sv[i][1] < miny) miny = sv[i][1];
        if (sv[i][1] > maxy) maxy = sv[i][1];
    }
    if (maxx < 0.0f || maxy < 0.0f || minx > (float)img->width || miny > (float)img->height) return;
    x0 = minx < 0.0f ? 0 : (int)floorf(minx);
    y0 = miny < 0.0f ? 0 : (int)floorf(miny);
    x1 = maxx >= (float)img->width ? img->width - 1 : (int)floorf(maxx);
    y1 = maxy >= (float)img->height ? img->height - 1 : (int)floorf(maxy);
    /* fold the orientation into the sign: all three are >= 0 inside */
    e0 = render__edge_setup(b, c);
    e0.sign *= inv_area;
    e1 = render__edge_setup(c, a);
    e1.sign *= inv_area;
    e2 = render__edge_setup(a, b);
    e2.sign *= inv_area;
    for (y = y0; y <= y1; ++y) {
        float py = (float)y + 0.5f;
        float r0 = e0.dx * (py - e0.oy), r1 = e1.dx * (py - e1.oy), r2 = e2.dx * (py - e2.oy);
        size_t row = (size_t)y * (size_t)img->width;
        for (x = x0; x <= x1; ++x) {
            float px = (float)x + 0.5f;
            float w0 = (r0 - e0.dy * (px - e0.ox)) * e0.sign;
            float w1 = (r1 - e1.dy * (px - e1.ox)) * e1.sign;
            float w2 = (r2 - e2.dy * (px - e2.ox)) * e2.sign;
            float iz;
            size_t k;
            if (w0 < 0.0f || w1 < 0.0f || w2 < 0.0f) continue;
            iz = w0 * a[2] + w1 * b[2] + w2 * c[2];
            k = row + (size_t)x;
            if (mode == 0) {
                float d, s;
                unsigned char *p;
                if (iz <= img->depth[k]) continue;
                img->depth[k] = iz;
                d = w0 * diff[0] + w1 * diff[1] + w2 * diff[2];
                s = w0 * spec[0] + w1 * spec[1] + w2 * spec[2];
                p = img->rgb + 3 * k;
                p[0] = render__byte(rgb[0] * d + s);
                p[1] = render__byte(rgb[1] * d + s);
                p[2] = render__byte(rgb[2] * d + s);
            } else {
                /* only where the ground (drawn before) is the visible
                   surface: the shadow lies on it, so its depth matches */
                float z = img->depth[k];
                unsigned char *p;
                if (img->mask[k] || z <= 0.0f || iz < z * 0.995f) continue;
                img->mask[k] = 1;
                p = img->rgb + 3 * k;
                p[0] = (unsigned char)((p[0] * 150) >> 8);
                p[1] = (unsigned char)((p[1] * 150) >> 8);
                p[2] = (unsigned char)((p[2] * 160) >> 8);
            }
        }
    }
}

static void render__lerp_vertex(const render__vertex *a, const render__vertex *b, float t, render__vertex *o) {
    int i;
    for (i = 0; i < 3; ++i) o->c[i] = a->c[i] + (b->c[i] - a->c[i]) * t;
    o->diff = a->diff + (b->diff - a->diff) * t;
    o->spec = a->spec + (b->spec - a->spec) * t;
}

/* Clip a camera-space triangle against z >= znear, project and raster. */
static void render__triangle(const render__target *t, const render__vertex *v0, const render__vertex *v1,
                             const render__vertex *v2, const float *rgb, int mode) {
    render__vertex in[3], out[4];
    int n = 0, i;
    in[0] = *v0;
    in[1] = *v1;
    in[2] = *v2;
    if (in[0].c[2] >= t->znear && in[1].c[2] >= t->znear && in[2].c[2] >= t->znear) {
        out[0] = in[0];
        out[1] = in[1];
        out[2] = in[2];
        n = 3;
    } else {
        for (i = 0; i < 3; ++i) {
            const render__vertex *p = &in[i], *q = &in[(i + 1) % 3];
            int pin = p->c[2] >= t->znear, qin = q->c[2] >= t->znear;
            if (pin) out[n++] = *p;
            if (pin != qin) {
                float s = (t->znear - p->c[2]) / (q->c[2] - p->c[2]);
                render__lerp_vertex(p, q, s, &out[n++]);
            }
        }
        if (n < 3) return;
    }
    {
        float sv[4][3], d[4], s[4];
        for (i = 0; i < n; ++i) {
            float iz = 1.0f / out[i].c[2];
            sv[i][0] = t->cx + out[i].c[0] * iz * t->focal;
            sv[i][1] = t->cy - out[i].c[1] * iz * t->focal;
            sv[i][2] = iz;
            d[i] = out[i].diff;
            s[i] = out[i].spec;
        }
        for (i = 1; i + 1 < n; ++i) {
            float tv[3][3], td[3], ts[3];
            int j;
            int idx[3];
            idx[0] = 0;
            idx[1] = i;
            idx[2] = i + 1;
            for (j = 0; j < 3; ++j) {
                tv[j][0] = sv[idx[j]][0];
                tv[j][1] = sv[idx[j]][1];
                tv[j][2] = sv[idx[j]][2];
                td[j] = d[idx[j]];
                ts[j] = s[idx[j]];
            }
            render__raster(t, (const float(*)[3])tv, td, ts, rgb, mode);
        }
    }
}

/* A depth-tested line for the wireframe, nudged towards the camera. */
static void render__line(const render__target *t, const float *ca, const float *cb, const float *rgb) {
    render_image *img = t->img;
    float a[3], b[3], pa[3], pb[3], dx, dy, len;
    int i, steps;
    a[0] = ca[0];
    a[1] = ca[1];
    a[2] = ca[2];
    b[0] = cb[0];
    b[1] = cb[1];
    b[2] = cb[2];
    if (a[2] < t->znear && b[2] < t->znear) return;
    if (a[2] < t->znear) {
        float s = (t->znear - a[2]) / (b[2] - a[2]);
        for (i = 0; i < 3; ++i) a[i] += (b[i] - a[i]) * s;
    }
    if (b[2] < t->znear) {
        float s = (t->znear - b[2]) / (a[2] - b[2]);
        for (i = 0; i < 3; ++i) b[i] += (a[i] - b[i]) * s;
    }
    pa[2] = 1.0f / a[2];
    pa[0] = t->cx + a[0] * pa[2] * t->focal;
    pa[1] = t->cy - a[1] * pa[2] * t->focal;
    pb[2] = 1.0f / b[2];
    pb[0] = t->cx + b[0] * pb[2] * t->focal;
    pb[1] = t->cy - b[1] * pb[2] * t->focal;
    dx = pb[0] - pa[0];
    dy = pb[1] - pa[1];
    len = fabsf(dx) > fabsf(dy) ? fabsf(dx) : fabsf(dy);
    if (!(len < 4.0f * (float)(img->width + img->height))) return; /* huge or NaN */
    steps = (int)len + 1;
    for (i = 0; i <= steps; ++i) {
        float s = (float)i / (float)steps;
        float x = pa[0] + dx * s, y = pa[1] + dy * s, iz = pa[2] + (pb[2] - pa[2]) * s;
        int xi = (int)floorf(x), yi = (int)floorf(y);
        size_t k;
        unsigned char *p;
        if (xi < 0 || yi < 0 || xi >= img->width || yi >= img->height) continue;
        k = (size_t)yi * (size_t)img->width + (size_t)xi;
        if (iz * 1.004f < img->depth[k]) continue;
        p = img->rgb + 3 * k;
        p[0] = (unsigned char)((p[0] + render__byte(rgb[0])) >> 1);
        p[1] = (unsigned char)((p[1] + render__byte(rgb[1])) >> 1);
        p[2] = (unsigned char)((p[2] + render__byte(rgb[2])) >> 1);
    }
}

/* Shading of a unit normal n seen from the side `sign` (+1 or -1). */
static void render__shade(const float *n, float sign, const float *view_dir, int specular, float *diff, float *spec) {
    float nl = sign * render__dot(n, render__light);
    float sky = 0.5f + 0.5f * sign * n[1]; /* a little hemispheric fill */
    *diff = render__ambient * (0.75f + 0.25f * sky) + render__diffuse * (nl > 0.0f ? nl : 0.0f);
    *spec = 0.0f;
    if (specular && nl > 0.0f) {
        float h[3], nh;
        h[0] = render__light[0] - view_dir[0];
        h[1] = render__light[1] - view_dir[1];
        h[2] = render__light[2] - view_dir[2];
        render__normalize(h);
        nh = sign * render__dot(n, h);
        if (nh > 0.0f) {
            float s2 = nh * nh, s4 = s2 * s2, s8 = s4 * s4, s16 = s8 * s8, s32 = s16 * s16;
            *spec = 0.35f * s32;
        }
    }
}

/* Generic mesh drawing: `normals` (3 floats per vertex, unit) or NULL for
   flat shading from face normals. */
static void render__draw(render_image *img, const render_camera *cam, const float *positions, int stride,
                         int vertex_count, const float *normals, const int *triangles, int triangle_count,
                         const float *rgb, int flags) {
    render__target t = render__make_target(img, cam);
    float *cs; /* camera-space positions, 3 per vertex */
    int i, k;
    static const float grey[3] = {0.7f, 0.7f, 0.7f};
    if (!rgb) rgb = grey;
    if (vertex_count <= 0 || triangle_count <= 0) return;
    cs = (float *)malloc((size_t)vertex_count * 3 * sizeof(float));
    if (!cs) return;
    for (i = 0; i < vertex_count; ++i) render__to_camera(cam, positions + (size_t)i * stride, cs + 3 * i);
    for (k = 0; k < triangle_count; ++k) {
        const int *tri = triangles + 3 * k;
        render__vertex v[3];
        float e1[3], e2[3], fn[3], toeye[3], sign;
        int j, bad = 0;
        for (j = 0; j < 3; ++j)
            if (tri[j] < 0 || tri[j] >= vertex_count) bad = 1;
        if (bad) continue;
        {
            const float *p0 = positions + (size_t)tri[0] * stride;
            const float *p1 = positions + (size_t)tri[1] * stride;
            const float *p2 = positions + (size_t)tri[2] * stride;
            render__sub(p1, p0, e1);
            render__sub(p2, p0, e2);
            render__cross(e1, e2, fn);
            render__normalize(fn);
            render__sub(cam->eye, p0, toeye);
            /* two-sided: light the side that faces the camera */
            sign = render__dot(fn, toeye) >= 0.0f ? 1.0f : -1.0f;
        }
        for (j = 0; j < 3; ++j) {
            const float *p = positions + (size_t)tri[j] * stride;
            float vd[3];
            const float *n = normals ? normals + 3 * tri[j] : fn;
            float s = sign;
            render__sub(p, cam->eye, vd);
            render__normalize(vd);
            /* a smooth normal pointing away from the face's side would light
               the wrong side at silhouettes: follow the face's side */
            if (normals && render__dot(n, fn) < 0.0f) s = -s;
            v[j].c[0] = cs[3 * tri[j]];
            v[j].c[1] = cs[3 * tri[j] + 1];
            v[j].c[2] = cs[3 * tri[j] + 2];
            render__shade(n, s, vd, (flags & RENDER_SPECULAR) != 0, &v[j].diff, &v[j].spec);
        }
        render__triangle(&t, &v[0], &v[1], &v[2], rgb, 0);
    }
    if (flags & RENDER_WIREFRAME) {
        float dark[3];
        dark[0] = rgb[0] * 0.35f;
        dark[1] = rgb[1] * 0.35f;
        dark[2] = rgb[2] * 0.35f;
        for (k = 0; k < triangle_count; ++k) {
            const int *tri = triangles + 3 * k;
            int j;
            for (j = 0; j < 3; ++j) {
                int a = tri[j], b = tri[(j + 1) % 3];
                if (a < 0 || b < 0 || a >= vertex_count || b >= vertex_count) continue;
                /* shared edges are drawn from both triangles: harmless,
                   and boundary edges need no adjacency search */
                render__line(&t, cs + 3 * a, cs + 3 * b, dark);
            }
        }
    }
    free(cs);
}

RENDER_DEF void render_draw_mesh(render_image *img, const render_camera *cam, const float *positions, int stride,
                                 int vertex_count, const int *triangles, int triangle_count, const float *rgb,
                                 int flags) {
    float *normals = NULL;
    int i, k;
    if (!img || !cam || !positions || !triangles || stride < 3) return;
    if ((flags & RENDER_SMOOTH) && vertex_count > 0) {
        normals = (float *)calloc((size_t)vertex_count * 3, sizeof(float));
        if (normals) {
            /* area-weighted vertex normals (the unnormalised cross product) */
            for (k = 0; k < triangle_count; ++k) {
                const int *tri = triangles + 3 * k;
                float e1[3], e2[3], n[3];
                int j;
                if (tri[0] < 0 || tri[1] < 0 || tri[2] < 0 || tri[0] >= vertex_count || tri[1] >= vertex_count ||
                    tri[2] >= vertex_count)
                    continue;
                render__sub(positions + (size_t)tri[1] * stride, positions + (size_t)tri[0] * stride, e1);
                render__sub(positions + (size_t)tri[2] * stride, positions + (size_t)tri[0] * stride, e2);
                render__cross(e1, e2, n);
                for (j = 0; j < 3; ++j) {
                    normals[3 * tri[j]] += n[0];
                    normals[3 * tri[j] + 1] += n[1];
                    normals[3 * tri[j] + 2] += n[2];
                }
            }
            for (i = 0; i < vertex_count; ++i) render__normalize(normals + 3 * i);
        }
    }
    render__draw(img, cam, positions, stride, vertex_count, normals, triangles, triangle_count, rgb, flags);
    free(normals);
}

/* ---- analytic shapes ----------------------------------------------------- */

#define RENDER__SPHERE_SLICES 32
#define RENDER__SPHERE_STACKS 20
#define RENDER__SPHERE_VERTS ((RENDER__SPHERE_STACKS + 1) * (RENDER__SPHERE_SLICES + 1))
#define RENDER__SPHERE_TRIS (2 * RENDER__SPHERE_STACKS * RENDER__SPHERE_SLICES)

/* A UV sphere of unit radius (positions are also the normals). */
static void render__unit_sphere(float *pos, int *tris) {
    int i, j, n = 0;
    for (i = 0; i <= RENDER__SPHERE_STACKS; ++i) {
        float th = 3.14159265f * (float)i / (float)RENDER__SPHERE_STACKS;
        for (j = 0; j <= RENDER__SPHERE_SLICES; ++j) {
            float ph = 2.0f * 3.14159265f * (float)j / (float)RENDER__SPHERE_SLICES;
            float *p = pos + 3 * (i * (RENDER__SPHERE_SLICES + 1) + j);
            p[0] = sinf(th) * cosf(ph);
            p[1] = cosf(th);
            p[2] = -sinf(th) * sinf(ph);
        }
    }
    for (i = 0; i < RENDER__SPHERE_STACKS; ++i) {
        for (j = 0; j < RENDER__SPHERE_SLICES; ++j) {
            int a = i * (RENDER__SPHERE_SLICES + 1) + j, b = a + 1;
            int c = a + RENDER__SPHERE_SLICES + 1, d = c + 1;
            tris[n++] = a;
            tris[n++] = c;
            tris[n++] = b;
            tris[n++] = b;
            tris[n++] = c;
            tris[n++] = d;
        }
    }
}

RENDER_DEF void render_draw_sphere(render_image *img, const render_camera *cam, const float *centre, float radius,
                                   const float *rgb, int flags) {
    float unit[RENDER__SPHERE_VERTS * 3], pos[RENDER__SPHERE_VERTS * 3];
    int tris[RENDER__SPHERE_TRIS * 3];
    int i;
    if (!img || !cam || !centre) return;
    render__unit_sphere(unit, tris);
    for (i = 0; i < RENDER__SPHERE_VERTS; ++i) {
        pos[3 * i] = centre[0] + radius * unit[3 * i];
        pos[3 * i + 1] = centre[1] + radius * unit[3 * i + 1];
        pos[3 * i + 2] = centre[2] + radius * unit[3 * i + 2];
    }
    render__draw(img, cam, pos, 3, RENDER__SPHERE_VERTS, (flags & RENDER_SMOOTH) ? unit : NULL, tris,
                 RENDER__SPHERE_TRIS, rgb, flags & ~RENDER_WIREFRAME);
}

static void render__rotate(const float *q, const float *v, float *o) {
    /* v + 2 w (u x v) + 2 u x (u x v), q = (u, w) */
    float u[3], t[3], t2[3];
    u[0] = q[0];
    u[1] = q[1];
    u[2] = q[2];
    render__cross(u, v, t);
    t[0] *= 2.0f;
    t[1] *= 2.0f;
    t[2] *= 2.0f;
    render__cross(u, t, t2);
    o[0] = v[0] + q[3] * t[0] + t2[0];
    o[1] = v[1] + q[3] * t[1] + t2[1];
    o[2] = v[2] + q[3] * t[2] + t2[2];
}

RENDER_DEF void render_draw_box(render_image *img, const render_camera *cam, const float *centre,
                                const float *half_extents, const float *rotation, const float *rgb, int flags) {
    /* 6 faces x 4 own corners, so that flat shading has one normal per face */
    static const int faces[6][4] = {{0, 2, 3, 1}, {4, 5, 7, 6}, {0, 1, 5, 4}, {2, 6, 7, 3}, {0, 4, 6, 2}, {1, 3, 7, 5}};
    static const float identity[4] = {0, 0, 0, 1};
    float corners[8][3], pos[24 * 3];
    int tris[12 * 3], i, f;
    if (!img || !cam || !centre || !half_extents) return;
    if (!rotation) rotation = identity;
    for (i = 0; i < 8; ++i) {
        float l[3];
        l[0] = (i & 1) ? half_extents[0] : -half_extents[0];
        l[1] = (i & 2) ? half_extents[1] : -half_extents[1];
        l[2] = (i & 4) ? half_extents[2] : -half_extents[2];
        render__rotate(rotation, l, corners[i]);
        corners[i][0] += centre[0];
        corners[i][1] += centre[1];
        corners[i][2] += centre[2];
    }
    for (f = 0; f < 6; ++f) {
        for (i = 0; i < 4; ++i) memcpy(pos + 3 * (4 * f + i), corners[faces[f][i]], 3 * sizeof(float));
        tris[6 * f + 0] = 4 * f;
        tris[6 * f + 1] = 4 * f + 1;
        tris[6 * f + 2] = 4 * f + 2;
        tris[6 * f + 3] = 4 * f;
        tris[6 * f + 4] = 4 * f + 2;
        tris[6 * f + 5] = 4 * f + 3;
    }
    render__draw(img, cam, pos, 3, 24, NULL, tris, 12, rgb, flags & RENDER_WIREFRAME);
}

RENDER_DEF void render_draw_ground(render_image *img, const render_camera *cam, float height, float centre_x,
                                   float centre_z, float half_extent, float tile_size, const float *rgb_a,
                                   const float *rgb_b) {
    static const float def_a[3] = {0.80f, 0.80f, 0.78f}, def_b[3] = {0.64f, 0.65f, 0.66f};
    render__target t;
    int n, i, j;
    float d, s;
    if (!img || !cam || !(half_extent > 0.0f) || !(tile_size > 0.0f)) return;
    if (!rgb_a) rgb_a = def_a;
    if (!rgb_b) rgb_b = def_b;
    t = render__make_target(img, cam);
    n = (int)ceilf(2.0f * half_extent / tile_size);
    if (n > 512) n = 512;
    {
        float up[3] = {0.0f, 1.0f, 0.0f}, vd[3];
        vd[0] = centre_x - cam->eye[0];
        vd[1] = height - cam->eye[1];
        vd[2] = centre_z - cam->eye[2];
        render__normalize(vd);
        render__shade(up, cam->eye[1] >= height ? 1.0f : -1.0f, vd, 0, &d, &s);
    }
    for (i = 0; i < n; ++i) {
        for (j = 0; j < n; ++j) {
            float x0 = centre_x - half_extent + tile_size * (float)i, x1 = x0 + tile_size;
            float z0 = centre_z - half_extent + tile_size * (float)j, z1 = z0 + tile_size;
            float w[4][3];
            render__vertex v[4];
            int q;
            if (x1 > centre_x + half_extent) x1 = centre_x + half_extent;
            if (z1 > centre_z + half_extent) z1 = centre_z + half_extent;
            w[0][0] = x0;
            w[0][1] = height;
            w[0][2] = z0;
            w[1][0] = x1;
            w[1][1] = height;
            w[1][2] = z0;
            w[2][0] = x1;
            w[2][1] = height;
            w[2][2] = z1;
            w[3][0] = x0;
            w[3][1] = height;
            w[3][2] = z1;
            for (q = 0; q < 4; ++q) {
                float dx = w[q][0] - centre_x, dz = w[q][2] - centre_z;
                /* fade towards the rim so the finite floor does not end in a hard line */
                float r = sqrtf(dx * dx + dz * dz) / half_extent, fade = 1.0f - 0.35f * r * r;
                render__to_camera(cam, w[q], v[q].c);
                v[q].diff = d * fade;
                v[q].spec = 0.0f;
            }
            {
                const float *rgb = ((i + j) & 1) ? rgb_b : rgb_a;
                render__triangle(&t, &v[0], &v[1], &v[2], rgb, 0);
                render__triangle(&t, &v[0], &v[2], &v[3], rgb, 0);
            }
        }
    }
}

/* ---- shadows ------------------------------------------------------------- */

static void render__shadow(render_image *img, const render_camera *cam, const float *positions, int stride,
                           int vertex_count, const int *triangles, int triangle_count, float height) {
    render__target t = render__make_target(img, cam);
    float *cs;
    int i, k;
    if (vertex_count <= 0 || triangle_count <= 0) return;
    cs = (float *)malloc((size_t)vertex_count * 3 * sizeof(float));
    if (!cs) return;
    for (i = 0; i < vertex_count; ++i) {
        const float *p = positions + (size_t)i * stride;
        float s = (p[1] - height) / render__light[1], q[3];
        if (s < 0.0f) s = 0.0f; /* below the ground: its shadow is itself */
        q[0] = p[0] - render__light[0] * s;
        q[1] = height;
        q[2] = p[2] - render__light[2] * s;
        render__to_camera(cam, q, cs + 3 * i);
    }
    for (k = 0; k < triangle_count; ++k) {
        const int *tri = triangles + 3 * k;
        render__vertex v[3];
        int j, bad = 0;
        for (j = 0; j < 3; ++j) {
            if (tri[j] < 0 || tri[j] >= vertex_count) {
                bad = 1;
                break;
            }
            v[j].c[0] = cs[3 * tri[j]];
            v[j].c[1] = cs[3 * tri[j] + 1];
            v[j].c[2] = cs[3 * tri[j] + 2];
            v[j].diff = v[j].spec = 0.0f;
        }
        if (!bad) render__triangle(&t, &v[0], &v[1], &v[2], NULL, 1);
    }
    free(cs);
}

RENDER_DEF void render_draw_mesh_shadow(render_image *img, const render_camera *cam, const float *positions, int stride,
                                        int vertex_count, const int *triangles, int triangle_count, float height) {
    if (!img || !cam || !positions || !triangles || stride < 3) return;
    render__shadow(img, cam, positions, stride, vertex_count, triangles, triangle_count, height);
}

RENDER_DEF void render_draw_sphere_shadow(render_image *img, const render_camera *cam, const float *centre,
                                          float radius, float height) {
    float unit[RENDER__SPHERE_VERTS * 3];
    int tris[RENDER__SPHERE_TRIS * 3];
    int i;
    if (!img || !cam || !centre) return;
    render__unit_sphere(unit, tris);
    for (i = 0; i < RENDER__SPHERE_VERTS; ++i) {
        unit[3 * i] = centre[0] + radius * unit[3 * i];
        unit[3 * i + 1] = centre[1] + radius * unit[3 * i + 1];
        unit[3 * i + 2] = centre[2] + radius * unit[3 * i + 2];
    }
    render__shadow(img, cam, unit, 3, RENDER__SPHERE_VERTS, tris, RENDER__SPHERE_TRIS, height);
}

/* ---- text ---------------------------------------------------------------- */

/* 3x5 glyphs, one row per entry, bit 2 = left column. */
static const unsigned char *render__glyph(char ch) {
    static const unsigned char digits[10][5] = {{7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7},
                                                {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1},
                                                {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}};
    static const unsigned char letters[26][5] = {
        {2, 5, 7, 5, 5}, {6, 5, 6, 5, 6}, {3, 4, 4, 4, 3}, {6, 5, 5, 5, 6}, {7, 4, 6, 4, 7}, {7, 4, 6, 4, 4},
        {3, 4, 5, 5, 3}, {5, 5, 7, 5, 5}, {7, 2, 2, 2, 7}, {1, 1, 1, 5, 2}, {5, 5, 6, 5, 5}, {4, 4, 4, 4, 7},
        {5, 7, 7, 5, 5}, {6, 5, 5, 5, 5}, {2, 5, 5, 5, 2}, {6, 5, 6, 4, 4}, {2, 5, 5, 6, 3}, {6, 5, 6, 5, 5},
        {3, 4, 2, 1, 6}, {7, 2, 2, 2, 2}, {5, 5, 5, 5, 7}, {5, 5, 5, 5, 2}, {5, 5, 7, 7, 5}, {5, 5, 2, 5, 5},
        {5, 5, 2, 2, 2}, {7, 1, 2, 4, 7}};
    static const char punct_chars[] = ".:=-/%()+,_";
    static const unsigned char punct[11][5] = {{0, 0, 0, 0, 2}, {0, 2, 0, 2, 0}, {0, 7, 0, 7, 0}, {0, 0, 7, 0, 0},
                                               {1, 1, 2, 4, 4}, {5, 1, 2, 4, 5}, {1, 2, 2, 2, 1}, {4, 2, 2, 2, 4},
                                               {0, 2, 7, 2, 0}, {0, 0, 0, 2, 4}, {0, 0, 0, 0, 7}};
    int i;
    if (ch >= '0' && ch <= '9') return digits[ch - '0'];
    if (ch >= 'a' && ch <= 'z') ch = (char)(ch - 'a' + 'A');
    if (ch >= 'A' && ch <= 'Z') return letters[ch - 'A'];
    for (i = 0; punct_chars[i]; ++i)
        if (punct_chars[i] == ch) return punct[i];
    return NULL;
}

static void render__text_pass(render_image *img, int x, int y, int scale, const unsigned char *c, const char *text,
                              int outline) {
    int cx = x;
    for (; *text; ++text) {
        const unsigned char *g = render__glyph(*text);
        int r, col, sy, sx;
        if (g) {
            for (r = 0; r < 5; ++r)
                for (col = 0; col < 3; ++col) {
                    if (!(g[r] & (4 >> col))) continue;
                    for (sy = -outline; sy < scale + outline; ++sy)
                        for (sx = -outline; sx < scale + outline; ++sx) {
                            int px = cx + col * scale + sx, py = y + r * scale + sy;
                            unsigned char *p;
                            if (px < 0 || py < 0 || px >= img->width || py >= img->height) continue;
                            p = img->rgb + 3 * ((size_t)py * (size_t)img->width + (size_t)px);
                            p[0] = c[0];
                            p[1] = c[1];
                            p[2] = c[2];
                        }
                }
        }
        cx += 4 * scale;
    }
}

RENDER_DEF int render_text(render_image *img, int x, int y, int scale, const float *rgb, const char *text) {
    static const float white[3] = {1, 1, 1};
    unsigned char c[3], dark[3] = {20, 20, 24};
    if (!img || !text) return x;
    if (scale < 1) scale = 1;
    if (!rgb) rgb = white;
    c[0] = render__byte(rgb[0]);
    c[1] = render__byte(rgb[1]);
    c[2] = render__byte(rgb[2]);
    render__text_pass(img, x, y, scale, dark, text, scale > 1 ? scale / 2 : 1);
    render__text_pass(img, x, y, scale, c, text, 0);
    return x + 4 * scale * (int)strlen(text);
}

/* ---- output -------------------------------------------------------------- */

static const char *render__save_rgb(const unsigned char *rgb, int w, int h, const char *path_without_extension,
                                    char *path_out, size_t path_out_size) {
    static char static_path[1024];
    int ok = 0, n;
    if (!rgb || w <= 0 || h <= 0 || !path_without_extension) return NULL;
    if (!path_out) {
        path_out = static_path;
        path_out_size = sizeof static_path;
    }
#ifdef PBD_HAVE_STB
    n = snprintf(path_out, path_out_size, "%s.png", path_without_extension);
    if (n < 0 || (size_t)n >= path_out_size) return NULL;
    ok = stbi_write_png(path_out, w, h, 3, rgb, w * 3) != 0;
#else
    n = snprintf(path_out, path_out_size, "%s.ppm", path_without_extension);
    if (n < 0 || (size_t)n >= path_out_size) return NULL;
    {
        FILE *f = fopen(path_out, "wb");
        if (f) {
            size_t bytes = (size_t)w * (size_t)h * 3;
            ok = fprintf(f, "P6\n%d %d\n255\n", w, h) > 0 && fwrite(rgb, 1, bytes, f) == bytes;
            if (fclose(f) != 0) ok = 0;
        }
    }
#endif
    return ok ? path_out : NULL;
}

RENDER_DEF const char *render_image_save(const render_image *img, const char *path_without_extension, char *path_out,
                                         size_t path_out_size) {
    if (!img) return NULL;
    return render__save_rgb(img->rgb, img->width, img->height, path_without_extension, path_out, path_out_size);
}

RENDER_DEF const char *render_contact_sheet(const render_image *images, int count, int columns, int scale,
                                            const char *const *labels, const char *path_without_extension,
                                            char *path_out, size_t path_out_size) {
    render_image sheet;
    const char *result;
    int rows, cw, ch, gap = 4, i, x, y, sw, sh;
    if (!images || count <= 0) return NULL;
    if (columns <= 0) columns = count;
    if (columns > count) columns = count;
    if (scale < 1) scale = 1;
    rows = (count + columns - 1) / columns;
    cw = images[0].width / scale;
    ch = images[0].height / scale;
    if (cw <= 0 || ch <= 0) return NULL;
    sw = columns * cw + (columns + 1) * gap;
    sh = rows * ch + (rows + 1) * gap;
    if (render_image_init(&sheet, sw, sh) != 0) return NULL;
    memset(sheet.rgb, 40, (size_t)sw * (size_t)sh * 3);
    for (i = 0; i < count; ++i) {
        const render_image *src = &images[i];
        int ox = gap + (i % columns) * (cw + gap), oy = gap + (i / columns) * (ch + gap);
        if (src->width != images[0].width || src->height != images[0].height || !src->rgb) continue;
        for (y = 0; y < ch; ++y) {
            unsigned char *dst = sheet.rgb + 3 * ((size_t)(oy + y) * (size_t)sw + (size_t)ox);
            for (x = 0; x < cw; ++x) {
                unsigned sum[3] = {0, 0, 0};
                int sx, sy, c;
                for (sy = 0; sy < scale; ++sy) {
                    const unsigned char *p =
                        src->rgb + 3 * ((size_t)(y * scale + sy) * (size_t)src->width + (size_t)(x * scale));
                    for (sx = 0; sx < scale; ++sx) {
                        sum[0] += p[0];
                        sum[1] += p[1];
                        sum[2] += p[2];
                        p += 3;
                    }
                }
                for (c = 0; c < 3; ++c) dst[3 * x + c] = (unsigned char)(sum[c] / (unsigned)(scale * scale));
            }
        }
        if (labels && labels[i]) {
            int ts = ch >= 120 ? 2 : 1;
            render_text(&sheet, ox + 3 * ts, oy + 3 * ts, ts, NULL, labels[i]);
        }
    }
    result = render__save_rgb(sheet.rgb, sw, sh, path_without_extension, path_out, path_out_size);
    render_image_free(&sheet);
    return result;
}

#ifdef __cplusplus
}
#endif
#endif /* PBD_RENDER_IMPLEMENTATION_DONE */
#endif /* PBD_RENDER_IMPLEMENTATION */
