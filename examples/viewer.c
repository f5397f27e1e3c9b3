/* viewer.c - pbd's interactive viewer: the example scenes in a window, in
   real time, grabbed with the mouse. One source for the desktop (GLFW 3 and
   OpenGL 3.3 core through libepoxy) and the browser (emscripten's GLFW and
   WebGL 2): the shaders keep to what GLSL 3.30 and GLSL ES 3.00 share.

   Build and run from the repository root (Debian: libglfw3-dev libepoxy-dev;
   `make play` installs them, builds and opens it):

       cc -O2 -march=native -fopenmp -ffp-contract=off -I. examples/viewer.c -o viewer -lglfw -lepoxy -lm -DPBD_HAVE_STB -I/usr/include/stb
       ./viewer                 # or ./viewer --scene tablecloth

   For the browser (Debian: emscripten node-acorn; `make web` does this,
   with SIMDe and stb linked into build/web/include, and copies
   examples/web/index.html next to it; `make serve` serves the page):

       NODE_PATH=/usr/share/nodejs emcc -O2 -msimd128 -ffp-contract=off -I. -Ibuild/web/include examples/viewer.c -sUSE_GLFW=3 -sMIN_WEBGL_VERSION=2 -sMAX_WEBGL_VERSION=2 -sALLOW_MEMORY_GROWTH=1 -o out/web/viewer.js

   Mouse: left-drag a particle to pull it (the nearest particle to the ray
   under the cursor is held by an attachment until the button is released;
   in the hair scene a drag on the head moves the head); left-drag
   elsewhere orbits, right-drag (or shift + left) pans, the wheel
   zooms. Keys: 1..9 and 0 scenes, space pause, N one step, R reset, W wireframe,
   up/down substeps, right/left iterations, P screenshot (out/viewer_NNN.png),
   G (built with PBD_CUDA and pbd_cuda.cu) moves the scene between the CPU
   and the GPU (its state goes along: pbd_world_save, then restore into the
   scene built on the other device, pbd_sm.h's state included: a jelly's
   plastic deformation, a plant's spin),
   Esc quit. Built with PBD_CUDA:

       cc -O2 -march=native -fopenmp -ffp-contract=off -I. -DPBD_CUDA -c examples/viewer.c -o viewer.o -DPBD_HAVE_STB -I/usr/include/stb
       nvcc -O3 --fmad=false -c pbd_cuda.cu -o pbd_cuda.o && nvcc -Xcompiler -fopenmp viewer.o pbd_cuda.o -o viewer -lglfw -lepoxy -lm The simulation runs at a fixed 1/60 s step with an accumulator
   (at most 4 steps per frame), so it does not depend on the frame rate.

   Scripted (what CI runs under Xvfb; the same options work everywhere):
       --scene NAME|N        start in that scene
       --frames N            quit after N frames, each stepping the scene once
       --drag X,Y:X2,Y2[@F]  from frame F (default 10) press at pixel (X, Y)
                             and move to (X2, Y2) over the next 60 frames,
                             then hold (--frames is at least F + 70); at
                             the end print where the held particle is drawn
                             (exit 1 if nothing was grabbed or it is drawn
                             3 pixels or more from the cursor)
       --screenshot FILE     save the last frame as FILE (.png; exit 1 if the
                             image is blank or uniform)
       --size WxH            window size (default 1280x720)
       --threads N           pbd_world_set_threads (default: the scene's)
       --record DIR          save every frame as DIR/frame_NNNN.png (for an
                             animation: docs/images/make.sh)
       --no-text             no text over the picture
       --switch F            press G at frame F (PBD_CUDA builds)
       --options "K=V ..."   the scenes' options (examples/common/scenes.h,
                             scene_create: levels=2 wrinkles=0 for the
                             multi-resolution cloth)
*/
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#define PBD_IMPLEMENTATION
#include "pbd.h"
#define PBD_SM_IMPLEMENTATION /* the scenes of pbd_sm.h */
#include "pbd_sm.h"
#define PBD_UPSAMPLE_IMPLEMENTATION /* the upsampling scene */
#include "pbd_upsample.h"
#define PBD_RENDER_IMPLEMENTATION /* its font and PNG writer */
#include "common/render.h"
#define SCENES_IMPLEMENTATION
#include "common/scenes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#define GLFW_INCLUDE_ES3
#include <GLFW/glfw3.h>
#define VIEWER_GLSL "#version 300 es\nprecision highp float;\n"
#else
#include <epoxy/gl.h>
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#define VIEWER_GLSL "#version 330 core\n"
#endif

/* ---- small vector and matrix helpers (column-major 4x4) ------------------------ */

static void v3_sub(const float *a, const float *b, float *o) {
    for (int i = 0; i < 3; ++i) o[i] = a[i] - b[i];
}
static float v3_dot(const float *a, const float *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
static void v3_cross(const float *a, const float *b, float *o) {
    float c[3] = {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
    memcpy(o, c, sizeof c);
}
static void v3_normalize(float *a) {
    float l = sqrtf(v3_dot(a, a));
    if (l > 0) {
        for (int i = 0; i < 3; ++i) a[i] /= l;
    }
}
static void m4_mul(const float *a, const float *b, float *o) {
    float r[16];
    for (int c = 0; c < 4; ++c)
        for (int rr = 0; rr < 4; ++rr) {
            float s = 0;
            for (int k = 0; k < 4; ++k) s += a[k * 4 + rr] * b[c * 4 + k];
            r[c * 4 + rr] = s;
        }
    memcpy(o, r, sizeof r);
}
static void m4_identity(float *m) {
    memset(m, 0, 16 * sizeof(float));
    m[0] = m[5] = m[10] = m[15] = 1;
}

/* ---- the camera: orbit about a target ---------------------------------------------- */

typedef struct camera {
    float target[3];
    float yaw, pitch, distance; /* radians, metres */
    float fov_y;                /* degrees */
} camera;

static camera camera_from(const float *eye, const float *target, float fov) {
    camera c;
    float d[3];
    v3_sub(eye, target, d);
    memcpy(c.target, target, sizeof c.target);
    c.distance = sqrtf(v3_dot(d, d));
    c.yaw = atan2f(d[0], d[2]);
    c.pitch = asinf(d[1] / (c.distance > 0 ? c.distance : 1));
    c.fov_y = fov;
    return c;
}

/* The eye and the orthonormal basis (right, up, forward) of the camera. */
static void camera_basis(const camera *c, float *eye, float *right, float *up, float *fwd) {
    float cp = cosf(c->pitch), world_up[3] = {0, 1, 0};
    float back[3] = {cp * sinf(c->yaw), sinf(c->pitch), cp * cosf(c->yaw)};
    for (int i = 0; i < 3; ++i) {
        eye[i] = c->target[i] + c->distance * back[i];
        fwd[i] = -back[i];
    }
    v3_cross(fwd, world_up, right);
    v3_normalize(right);
    v3_cross(right, fwd, up);
}

/* view-projection matrix for an aspect ratio */
static void camera_matrix(const camera *c, float aspect, float *vp) {
    float eye[3], r[3], u[3], f[3], view[16], proj[16];
    camera_basis(c, eye, r, u, f);
    m4_identity(view);
    for (int i = 0; i < 3; ++i) {
        view[i * 4 + 0] = r[i];
        view[i * 4 + 1] = u[i];
        view[i * 4 + 2] = -f[i];
    }
    view[12] = -v3_dot(r, eye);
    view[13] = -v3_dot(u, eye);
    view[14] = v3_dot(f, eye);
    float zn = 0.02f, zf = 200.0f, t = 1.0f / tanf(0.5f * c->fov_y * 3.14159265f / 180.0f);
    memset(proj, 0, sizeof proj);
    proj[0] = t / aspect;
    proj[5] = t;
    proj[10] = (zf + zn) / (zn - zf);
    proj[11] = -1;
    proj[14] = 2 * zf * zn / (zn - zf);
    m4_mul(proj, view, vp);
}

/* The ray through pixel (px, py) of a width x height window. */
static void camera_ray(const camera *c, double px, double py, int width, int height, float *origin, float *dir) {
    float r[3], u[3], f[3];
    camera_basis(c, origin, r, u, f);
    float t = tanf(0.5f * c->fov_y * 3.14159265f / 180.0f), aspect = (float)width / (float)height;
    float nx = (float)(2.0 * (px + 0.5) / width - 1.0), ny = (float)(1.0 - 2.0 * (py + 0.5) / height);
    for (int i = 0; i < 3; ++i) dir[i] = f[i] + nx * t * aspect * r[i] + ny * t * u[i];
    v3_normalize(dir);
}

/* ---- GL: one program for meshes, ground, lines and points; one for the text --------- */

static const char *vs_src = VIEWER_GLSL "layout(location = 0) in vec3 a_pos;\n"
                                        "layout(location = 1) in vec3 a_nrm;\n"
                                        "uniform mat4 u_vp;\n"
                                        "uniform mat4 u_model;\n"
                                        "uniform float u_point;\n"
                                        "out vec3 v_pos;\n"
                                        "out vec3 v_nrm;\n"
                                        "void main() {\n"
                                        "    vec4 w = u_model * vec4(a_pos, 1.0);\n"
                                        "    v_pos = w.xyz;\n"
                                        "    v_nrm = mat3(u_model) * a_nrm;\n"
                                        "    gl_Position = u_vp * w;\n"
                                        "    gl_PointSize = max(u_point / gl_Position.w, 1.0);\n"
                                        "}\n";

/* u_mode 0: lit (both sides), 1: the ground's checkerboard, 2: flat colour,
   3: a point drawn as a lit ball (its normal from gl_PointCoord), 4: a
   strand lit by its tangent (Kajiya and Kay 1989: a thin cylinder's diffuse
   term sin(T, L) and its highlight sin(T, H)^p), so that hair shows its
   flow instead of one flat colour */
static const char *fs_src = VIEWER_GLSL "in vec3 v_pos;\n"
                                        "in vec3 v_nrm;\n"
                                        "uniform int u_mode;\n"
                                        "uniform vec3 u_rgb;\n"
                                        "uniform vec3 u_light;\n"
                                        "uniform vec3 u_eye;\n"
                                        "uniform float u_spec;\n"
                                        "uniform float u_tile;\n"
                                        "out vec4 o_rgba;\n"
                                        "void main() {\n"
                                        "    if (u_mode == 2) { o_rgba = vec4(u_rgb, 1.0); return; }\n"
                                        "    if (u_mode == 3) {\n"
                                        "        vec2 q = 2.0 * gl_PointCoord - 1.0;\n"
                                        "        float r2 = dot(q, q);\n"
                                        "        if (r2 > 1.0) discard;\n"
                                        "        float k = 0.35 + 0.65 * max(dot(normalize(vec3(q.x, -q.y, sqrt(1.0 - "
                                        "r2))), normalize(vec3(0.3, 0.6, 0.75))), 0.0);\n"
                                        "        o_rgba = vec4(u_rgb * k, 1.0);\n"
                                        "        return;\n"
                                        "    }\n"
                                        "    if (u_mode == 4) {\n"
                                        "        float len = length(v_nrm);\n"
                                        "        vec3 t = len > 1e-12 ? v_nrm / len : vec3(0.0, 1.0, 0.0);\n"
                                        "        vec3 h = normalize(u_light + normalize(u_eye - v_pos));\n"
                                        "        float tl = dot(t, u_light), th = dot(t, h);\n"
                                        "        float diffuse = sqrt(max(1.0 - tl * tl, 0.0));\n"
                                        "        float s = 0.35 * pow(sqrt(max(1.0 - th * th, 0.0)), 80.0);\n"
                                        "        o_rgba = vec4(u_rgb * (0.2 + 0.8 * diffuse) + vec3(s), 1.0);\n"
                                        "        return;\n"
                                        "    }\n"
                                        "    if (u_mode == 1) {\n"
                                        "        vec2 c = floor(v_pos.xz / u_tile);\n"
                                        "        float k = mod(c.x + c.y, 2.0) < 0.5 ? 0.78 : 0.62;\n"
                                        "        float fade = clamp(length(v_pos - u_eye) / 40.0, 0.0, 1.0);\n"
                                        "        o_rgba = vec4(mix(vec3(k), vec3(0.85, 0.88, 0.92), fade), 1.0);\n"
                                        "        return;\n"
                                        "    }\n"
                                        "    vec3 n = normalize(v_nrm);\n"
                                        "    vec3 view = normalize(u_eye - v_pos);\n"
                                        "    if (dot(n, view) < 0.0) n = -n;\n"
                                        "    float diffuse = max(dot(n, u_light), 0.0);\n"
                                        "    vec3 h = normalize(u_light + view);\n"
                                        "    float s = u_spec * pow(max(dot(n, h), 0.0), 40.0);\n"
                                        "    o_rgba = vec4(u_rgb * (0.3 + 0.7 * diffuse) + vec3(s), 1.0);\n"
                                        "}\n";

static const char *text_vs_src = VIEWER_GLSL "layout(location = 0) in vec2 a_pos;\n"
                                             "out vec2 v_uv;\n"
                                             "uniform vec4 u_rect;\n" /* x0 y0 x1 y1 in clip space */
                                             "void main() {\n"
                                             "    v_uv = a_pos;\n"
                                             "    gl_Position = vec4(mix(u_rect.xy, u_rect.zw, a_pos), 0.0, 1.0);\n"
                                             "}\n";

/* the text panel: magenta is its transparent key */
static const char *text_fs_src = VIEWER_GLSL "in vec2 v_uv;\n"
                                             "uniform sampler2D u_tex;\n"
                                             "out vec4 o_rgba;\n"
                                             "void main() {\n"
                                             "    vec3 c = texture(u_tex, v_uv).rgb;\n"
                                             "    if (c.r > 0.9 && c.g < 0.1 && c.b > 0.9) discard;\n"
                                             "    o_rgba = vec4(c, 1.0);\n"
                                             "}\n";

typedef struct gl_state {
    GLuint prog, text_prog;
    GLint u_vp, u_model, u_point, u_mode, u_rgb, u_light, u_eye, u_spec, u_tile, u_rect, u_tex;
    GLuint vao, vbo, ibo; /* streamed: the items, the ground */
    GLuint shape_vao[2], shape_vbo[2], shape_ibo[2];
    int shape_index_count[2];
    GLuint text_vao, text_vbo, text_tex;
    float pixels_per_unit; /* a length of 1 at depth 1 on the screen: height / (2 tan(fov / 2)) */
    float *verts;          /* streaming scratch: 6 floats per vertex */
    int *lines;            /* wireframe edges */
    size_t verts_cap, lines_cap;
} gl_state;

static GLuint gl_shader(GLenum type, const char *src) {
    GLuint s = glCreateShader(type);
    glShaderSource(s, 1, &src, NULL);
    glCompileShader(s);
    GLint ok = 0;
    glGetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char log[1024];
        glGetShaderInfoLog(s, sizeof log, NULL, log);
        fprintf(stderr, "viewer: shader: %s\n", log);
    }
    return s;
}

static GLuint gl_program(const char *vs, const char *fs) {
    GLuint p = glCreateProgram(), a = gl_shader(GL_VERTEX_SHADER, vs), b = gl_shader(GL_FRAGMENT_SHADER, fs);
    glAttachShader(p, a);
    glAttachShader(p, b);
    glLinkProgram(p);
    glDeleteShader(a);
    glDeleteShader(b);
    GLint ok = 0;
    glGetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) {
        char log[1024];
        glGetProgramInfoLog(p, sizeof log, NULL, log);
        fprintf(stderr, "viewer: program: %s\n", log);
        return 0;
    }
    return p;
}

/* Interleaved position + normal buffers, bound to a VAO. */
static void gl_vertex_layout(void) {
    glEnableVertexAttribArray(0);
    glVertexAttribPointer(0, 3, GL_FLOAT, GL_FALSE, 6 * sizeof(float), (void *)0);
    glEnableVertexAttribArray(1);
    glVertexAttribPointer(1, 3, GL_FLOAT, GL_FALSE, 6 * sizeof(float), (void *)(3 * sizeof(float)));
}

/* p grown to hold n items of `size` bytes (its capacity in *cap), or NULL
   when out of memory (p is kept); p itself (NULL before the first use)
   when it holds them already. */
static void *gl_grow(void *p, size_t *cap, size_t n, size_t size) {
    if (n <= *cap) return p;
    void *q = realloc(p, size * n);
    if (q) *cap = n;
    return q;
}

static int gl_reserve(gl_state *g, size_t vertices, size_t lines) {
    float *v = (float *)gl_grow(g->verts, &g->verts_cap, vertices, 6 * sizeof(float));
    if (!v && vertices) return 0;
    g->verts = v;
    int *l = (int *)gl_grow(g->lines, &g->lines_cap, lines, 2 * sizeof(int));
    if (!l && lines) return 0;
    g->lines = l;
    return 1;
}

/* Positions (stride floats apart) and area-weighted smooth normals into
   g->verts. */
/* The vertices of an item (6 floats each: position, then the normal of a
   mesh summed over its triangles tri, or the tangent of a line set summed
   over its lines `lines`: what the shader lights a strand by). */
static void gl_fill_vertices(gl_state *g, const float *x, int stride, int n, const int *tri, int nt, const int *lines,
                             int nl) {
    float *v = g->verts;
    for (int i = 0; i < n; ++i) {
        memcpy(v + 6 * i, x + (size_t)stride * i, 3 * sizeof(float));
        memset(v + 6 * i + 3, 0, 3 * sizeof(float));
    }
    for (int l = 0; l < nl; ++l) {
        const int *k = lines + 2 * l;
        if (k[0] < 0 || k[1] < 0 || k[0] >= n || k[1] >= n) continue;
        float d[3];
        v3_sub(v + 6 * k[1], v + 6 * k[0], d);
        for (int j = 0; j < 2; ++j)
            for (int a = 0; a < 3; ++a) v[6 * k[j] + 3 + a] += d[a];
    }
    for (int t = 0; t < nt; ++t) {
        const int *k = tri + 3 * t;
        if (k[0] < 0 || k[1] < 0 || k[2] < 0 || k[0] >= n || k[1] >= n || k[2] >= n) continue;
        float e1[3], e2[3], c[3];
        v3_sub(v + 6 * k[1], v + 6 * k[0], e1);
        v3_sub(v + 6 * k[2], v + 6 * k[0], e2);
        v3_cross(e1, e2, c);
        for (int j = 0; j < 3; ++j)
            for (int a = 0; a < 3; ++a) v[6 * k[j] + 3 + a] += c[a];
    }
}

static void gl_upload_shape(gl_state *g, int which, const float *pos, const float *nrm, int n, const int *idx, int ni) {
    float *v = (float *)malloc(6 * sizeof(float) * (size_t)n);
    if (!v) return;
    for (int i = 0; i < n; ++i) {
        memcpy(v + 6 * i, pos + 3 * i, 3 * sizeof(float));
        memcpy(v + 6 * i + 3, nrm + 3 * i, 3 * sizeof(float));
    }
    glGenVertexArrays(1, &g->shape_vao[which]);
    glBindVertexArray(g->shape_vao[which]);
    glGenBuffers(1, &g->shape_vbo[which]);
    glBindBuffer(GL_ARRAY_BUFFER, g->shape_vbo[which]);
    glBufferData(GL_ARRAY_BUFFER, 6 * sizeof(float) * (GLsizeiptr)n, v, GL_STATIC_DRAW);
    glGenBuffers(1, &g->shape_ibo[which]);
    glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, g->shape_ibo[which]);
    glBufferData(GL_ELEMENT_ARRAY_BUFFER, sizeof(int) * (GLsizeiptr)ni, idx, GL_STATIC_DRAW);
    gl_vertex_layout();
    g->shape_index_count[which] = ni;
    free(v);
}

/* A unit sphere (pbd's icosphere) and a cube of half size 1 with flat faces. */
static void gl_make_shapes(gl_state *g) {
    pbd_mesh m;
    float origin[3] = {0, 0, 0};
    if (pbd_mesh_sphere(3, origin, 1.0f, &m) == PBD_OK) {
        gl_upload_shape(g, 0, m.positions, m.positions, m.vertex_count, m.triangles, 3 * m.triangle_count);
        pbd_mesh_free(&m);
    }
    float pos[24 * 3], nrm[24 * 3];
    int idx[36];
    for (int f = 0; f < 6; ++f) {
        int axis = f / 2;
        float sign = f % 2 ? -1.0f : 1.0f;
        int a = (axis + 1) % 3, b = (axis + 2) % 3;
        for (int k = 0; k < 4; ++k) {
            float *p = pos + 3 * (4 * f + k), *n = nrm + 3 * (4 * f + k);
            float ua = (k == 1 || k == 2) ? 1.0f : -1.0f, ub = k >= 2 ? 1.0f : -1.0f;
            p[axis] = sign;
            p[a] = ua * sign;
            p[b] = ub;
            n[0] = n[1] = n[2] = 0;
            n[axis] = sign;
        }
        int q[6] = {0, 1, 2, 0, 2, 3};
        for (int k = 0; k < 6; ++k) idx[6 * f + k] = 4 * f + q[k];
    }
    gl_upload_shape(g, 1, pos, nrm, 24, idx, 36);
}

static int gl_init(gl_state *g) {
    memset(g, 0, sizeof *g);
    g->prog = gl_program(vs_src, fs_src);
    g->text_prog = gl_program(text_vs_src, text_fs_src);
    if (!g->prog || !g->text_prog) return 0;
#define VIEWER_UNIFORM(name) g->name = glGetUniformLocation(g->prog, #name)
    VIEWER_UNIFORM(u_vp);
    VIEWER_UNIFORM(u_model);
    VIEWER_UNIFORM(u_point);
    VIEWER_UNIFORM(u_mode);
    VIEWER_UNIFORM(u_rgb);
    VIEWER_UNIFORM(u_light);
    VIEWER_UNIFORM(u_eye);
    VIEWER_UNIFORM(u_spec);
    VIEWER_UNIFORM(u_tile);
#undef VIEWER_UNIFORM
    g->u_rect = glGetUniformLocation(g->text_prog, "u_rect");
    g->u_tex = glGetUniformLocation(g->text_prog, "u_tex");
    glGenVertexArrays(1, &g->vao);
    glBindVertexArray(g->vao);
    glGenBuffers(1, &g->vbo);
    glGenBuffers(1, &g->ibo);
    glBindBuffer(GL_ARRAY_BUFFER, g->vbo);
    glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, g->ibo);
    gl_vertex_layout();
    gl_make_shapes(g);
    static const float quad[8] = {0, 0, 1, 0, 0, 1, 1, 1};
    glGenVertexArrays(1, &g->text_vao);
    glBindVertexArray(g->text_vao);
    glGenBuffers(1, &g->text_vbo);
    glBindBuffer(GL_ARRAY_BUFFER, g->text_vbo);
    glBufferData(GL_ARRAY_BUFFER, sizeof quad, quad, GL_STATIC_DRAW);
    glEnableVertexAttribArray(0);
    glVertexAttribPointer(0, 2, GL_FLOAT, GL_FALSE, 2 * sizeof(float), (void *)0);
    glGenTextures(1, &g->text_tex);
    glBindTexture(GL_TEXTURE_2D, g->text_tex);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glBindVertexArray(0);
    return 1;
}

static void gl_model(const gl_state *g, const float *centre, const float *half, const float *q) {
    float m[16];
    m4_identity(m);
    if (q) { /* rotation of the unit quaternion q (x y z w), columns scaled by half */
        float x = q[0], y = q[1], z = q[2], w = q[3];
        float r[9] = {1 - 2 * (y * y + z * z), 2 * (x * y + w * z),     2 * (x * z - w * y),
                      2 * (x * y - w * z),     1 - 2 * (x * x + z * z), 2 * (y * z + w * x),
                      2 * (x * z + w * y),     2 * (y * z - w * x),     1 - 2 * (x * x + y * y)};
        for (int c = 0; c < 3; ++c)
            for (int k = 0; k < 3; ++k) m[c * 4 + k] = r[c * 3 + k] * half[c];
    } else {
        m[0] = half[0];
        m[5] = half[1];
        m[10] = half[2];
    }
    m[12] = centre[0];
    m[13] = centre[1];
    m[14] = centre[2];
    glUniformMatrix4fv(g->u_model, 1, GL_FALSE, m);
}

/* Streams an item's vertices (and its index list) and draws it. */
static void gl_draw_item(gl_state *g, const scene_item *it, int wireframe) {
    int n = it->count, edges = it->kind == SCENE_TRIANGLES ? 3 * it->index_count : 0;
    if (n <= 0 || !gl_reserve(g, (size_t)n, (size_t)edges)) return;
    static const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    gl_model(g, zero, one, NULL);
    glBindVertexArray(g->vao);
    glBindBuffer(GL_ARRAY_BUFFER, g->vbo);
    glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, g->ibo);
    int tris = it->kind == SCENE_TRIANGLES, lines = it->kind == SCENE_LINES;
    gl_fill_vertices(g, it->x, it->stride, n, tris ? it->index : NULL, tris ? it->index_count : 0,
                     lines ? it->index : NULL, lines ? it->index_count : 0);
    glBufferData(GL_ARRAY_BUFFER, 6 * sizeof(float) * (GLsizeiptr)n, g->verts, GL_STREAM_DRAW);
    glUniform3fv(g->u_rgb, 1, it->rgb);
    glUniform1f(g->u_spec, it->flags & SCENE_SPECULAR ? 0.5f : 0.0f);
    if (it->kind == SCENE_POINTS) {
        glUniform1i(g->u_mode, 3);
        glUniform1f(g->u_point, 2.0f * it->radius * g->pixels_per_unit); /* its diameter in pixels at depth 1 */
        glDrawArrays(GL_POINTS, 0, n);
        return;
    }
    if (it->kind == SCENE_LINES) {
        glUniform1i(g->u_mode, 4);
        glBufferData(GL_ELEMENT_ARRAY_BUFFER, 2 * sizeof(int) * (GLsizeiptr)it->index_count, it->index, GL_STREAM_DRAW);
        glDrawElements(GL_LINES, 2 * it->index_count, GL_UNSIGNED_INT, 0);
        return;
    }
    glUniform1i(g->u_mode, 0);
    glBufferData(GL_ELEMENT_ARRAY_BUFFER, 3 * sizeof(int) * (GLsizeiptr)it->index_count, it->index, GL_STREAM_DRAW);
    glEnable(GL_POLYGON_OFFSET_FILL);
    glPolygonOffset(1, 1); /* the wireframe's lines in front of the faces */
    glDrawElements(GL_TRIANGLES, 3 * it->index_count, GL_UNSIGNED_INT, 0);
    glDisable(GL_POLYGON_OFFSET_FILL);
    if (wireframe || (it->flags & SCENE_WIREFRAME)) { /* GLES has no glPolygonMode: edges as lines */
        for (int t = 0; t < it->index_count; ++t)
            for (int e = 0; e < 3; ++e) {
                g->lines[2 * (3 * t + e)] = it->index[3 * t + e];
                g->lines[2 * (3 * t + e) + 1] = it->index[3 * t + (e + 1) % 3];
            }
        float dark[3] = {0.35f * it->rgb[0], 0.35f * it->rgb[1], 0.35f * it->rgb[2]};
        glUniform1i(g->u_mode, 2);
        glUniform3fv(g->u_rgb, 1, dark);
        glBufferData(GL_ELEMENT_ARRAY_BUFFER, 2 * sizeof(int) * (GLsizeiptr)edges, g->lines, GL_STREAM_DRAW);
        glDrawElements(GL_LINES, 2 * edges, GL_UNSIGNED_INT, 0);
    }
}

static void gl_draw_ground(gl_state *g, const scene *s) {
    float h = s->ground_half, y = s->ground_y, cx = s->ground_cx, cz = s->ground_cz;
    float v[24] = {cx - h, y, cz - h, 0, 1, 0, cx + h, y, cz - h, 0, 1, 0,
                   cx + h, y, cz + h, 0, 1, 0, cx - h, y, cz + h, 0, 1, 0};
    static const int idx[6] = {0, 1, 2, 0, 2, 3};
    static const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    gl_model(g, zero, one, NULL);
    glBindVertexArray(g->vao);
    glBindBuffer(GL_ARRAY_BUFFER, g->vbo);
    glBindBuffer(GL_ELEMENT_ARRAY_BUFFER, g->ibo);
    glBufferData(GL_ARRAY_BUFFER, sizeof v, v, GL_STREAM_DRAW);
    glBufferData(GL_ELEMENT_ARRAY_BUFFER, sizeof idx, idx, GL_STREAM_DRAW);
    glUniform1i(g->u_mode, 1);
    glUniform1f(g->u_tile, s->ground_tile);
    glDrawElements(GL_TRIANGLES, 6, GL_UNSIGNED_INT, 0);
}

static void gl_draw_shape(gl_state *g, const scene_shape *sh) {
    int which = sh->kind == SCENE_SPHERE ? 0 : 1;
    float r[3] = {sh->radius, sh->radius, sh->radius};
    gl_model(g, sh->centre, which == 0 ? r : sh->half, which == 0 ? NULL : sh->rotation);
    glUniform1i(g->u_mode, 0);
    glUniform3fv(g->u_rgb, 1, sh->rgb);
    glUniform1f(g->u_spec, 0.2f);
    glBindVertexArray(g->shape_vao[which]);
    /* behind what lies on it (a cloth on a table top touches it): items are
       offset by 1, shapes by 2 */
    glEnable(GL_POLYGON_OFFSET_FILL);
    glPolygonOffset(2, 2);
    glDrawElements(GL_TRIANGLES, g->shape_index_count[which], GL_UNSIGNED_INT, 0);
    glDisable(GL_POLYGON_OFFSET_FILL);
}

/* The text panel: drawn on the CPU with render.h's font, shown as a texture. */
static void gl_draw_text(gl_state *g, const render_image *panel, int width, int height) {
    glUseProgram(g->text_prog);
    glActiveTexture(GL_TEXTURE0);
    glBindTexture(GL_TEXTURE_2D, g->text_tex);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGB8, panel->width, panel->height, 0, GL_RGB, GL_UNSIGNED_BYTE, panel->rgb);
    glUniform1i(g->u_tex, 0);
    /* row 0 of the image at the top of the window */
    float x1 = -1 + 2.0f * (float)panel->width / (float)width, y1 = 1 - 2.0f * (float)panel->height / (float)height;
    glUniform4f(g->u_rect, -1, 1, x1, y1);
    glDisable(GL_DEPTH_TEST);
    glBindVertexArray(g->text_vao);
    glDrawArrays(GL_TRIANGLE_STRIP, 0, 4);
    glEnable(GL_DEPTH_TEST);
}

/* ---- the application ------------------------------------------------------------- */

typedef struct viewer {
    GLFWwindow *win;
    gl_state gl;
    scene s;
    int scene_index, threads;
    const char *options; /* --options: the scenes' key=value words */
    camera cam;
    int width, height; /* framebuffer pixels */
    int paused, single_step, wireframe;
    double accumulator, last_time;
    double sim_ms, draw_ms; /* smoothed, per step / per frame */
    double sim_total_ms;    /* every step's, for the mean of the closing line */
    int frame;
    /* the mouse */
    int dragging_particle, orbiting, panning;
    int moving_shape;      /* the collider shape a hand moves (the hair's head), or -1 */
    float shape_offset[3]; /* its centre less the point the hand holds */
    double mx, my;
    float grab_depth; /* the drag plane: through the held point, facing the camera */
    /* scripted */
    int frames_max;
    int drag_scripted;
    double drag_from[2], drag_to[2];
    int drag_frame;
    const char *screenshot_path;
    const char *record_dir; /* --record */
    int switch_frame;       /* --switch: G at this frame (-1: never) */
    int no_text;            /* --no-text */
    int shots;
    int status; /* exit status */
    render_image panel;
} viewer;

static double now_s(void) { return glfwGetTime(); }

static int viewer_load(viewer *v, int index) {
    scene next;
    if (scene_create(index, v->options, v->threads, &next) != PBD_OK) {
        fprintf(stderr, "viewer: scene %d: %s\n", index, next.error);
        return 0;
    }
    scene_destroy(&v->s);
    v->s = next;
    v->scene_index = index;
    v->cam = camera_from(v->s.eye, v->s.target, v->s.fov_y);
    v->accumulator = 0;
    v->sim_total_ms = 0;
    v->dragging_particle = v->orbiting = v->panning = 0;
    v->moving_shape = -1;
    printf("viewer: scene %d, %s: %s (%d particles)\n", index, v->s.name, v->s.title,
           pbd_world_particle_count(v->s.world));
    return 1;
}

#ifdef PBD_CUDA
static void viewer_release(viewer *v);

/* G: the scene to the other device, with its state: saved from this
   world, restored into the scene built again on the other device (the
   steps go on from the same state; the CPU emulation gives the same bits).
   Where that device cannot be had, the reason is printed and nothing
   changes. */
static void viewer_switch_device(viewer *v) {
    int to_gpu = pbd_world_device(v->s.world) != PBD_DEVICE_GPU;
    size_t n = pbd_world_snapshot_size(v->s.world);
    void *state = malloc(n ? n : 1);
    char options[256];
    scene next;
    snprintf(options, sizeof options, "%s device=%s", v->options ? v->options : "", to_gpu ? "gpu" : "cpu");
    if (!state || pbd_world_save(v->s.world, state, n) != PBD_OK) {
        fprintf(stderr, "viewer: cannot save the world to move it\n");
    } else if (scene_create(v->scene_index, options, v->threads, &next) != PBD_OK) {
        printf("viewer: stays on the %s: %s\n", to_gpu ? "CPU" : "GPU", next.error);
    } else if (pbd_world_restore(next.world, state, n) != PBD_OK) {
        printf("viewer: stays on the %s: %s\n", to_gpu ? "CPU" : "GPU", pbd_world_last_error(next.world));
        scene_destroy(&next);
    } else {
        viewer_release(v);
        next.steps = v->s.steps; /* the scene's own clock (its scripted motions) */
        scene_destroy(&v->s);
        v->s = next;
        scene_sync(&v->s);
        printf("viewer: %s now on the %s\n", v->s.name, to_gpu ? "GPU" : "CPU");
    }
    free(state);
}
#endif

static void viewer_change_solver(viewer *v, int dsub, int dit) {
    pbd_solver_mode mode;
    int sub, it;
    if (pbd_world_get_solver(v->s.world, &mode, &sub, &it) != PBD_OK) return;
    sub += dsub;
    it += dit;
    if (sub < 1) sub = 1;
    if (it < 1) it = 1;
    pbd_world_set_solver(v->s.world, mode, sub, it); /* refused beyond its limits: unchanged */
}

static void viewer_screenshot(viewer *v, const char *path_without_ext, int quiet) {
    render_image img;
    if (render_image_init(&img, v->width, v->height) != 0) return;
    unsigned char *row = (unsigned char *)malloc(4 * (size_t)v->width * (size_t)v->height);
    if (row) {
        glPixelStorei(GL_PACK_ALIGNMENT, 1);
        glReadPixels(0, 0, v->width, v->height, GL_RGBA, GL_UNSIGNED_BYTE, row);
        /* GL's row 0 is the bottom; the image's is the top */
        long sum = 0, sum2 = 0, n = (long)v->width * v->height;
        for (int y = 0; y < v->height; ++y)
            for (int x = 0; x < v->width; ++x) {
                const unsigned char *p = row + 4 * ((size_t)(v->height - 1 - y) * (size_t)v->width + (size_t)x);
                unsigned char *q = img.rgb + 3 * ((size_t)y * (size_t)v->width + (size_t)x);
                q[0] = p[0];
                q[1] = p[1];
                q[2] = p[2];
                int grey = (p[0] + p[1] + p[2]) / 3;
                sum += grey;
                sum2 += (long)grey * grey;
            }
        double mean = (double)sum / (double)n, sd = sqrt(fmax((double)sum2 / (double)n - mean * mean, 0.0));
        char path[1100];
        const char *written = render_image_save(&img, path_without_ext, path, sizeof path);
        if (!quiet || !written)
            printf("viewer: screenshot %s (%dx%d, mean grey %.1f, spread %.1f)\n", written ? written : "(write failed)",
                   v->width, v->height, mean, sd);
        if (!written || sd < 4.0) { /* blank or uniform: nothing was drawn */
            fprintf(stderr, "viewer: the screenshot is %s\n", written ? "blank or uniform" : "not written");
            v->status = 1;
        }
        free(row);
    }
    render_image_free(&img);
}

/* The point under the cursor on the drag plane (depth grab_depth along the view). */
static void viewer_drag_target(const viewer *v, double px, double py, float *out) {
    float o[3], d[3], r[3], u[3], f[3], eye[3];
    camera_ray(&v->cam, px, py, v->width, v->height, o, d);
    camera_basis(&v->cam, eye, r, u, f);
    float t = v->grab_depth / v3_dot(d, f);
    for (int i = 0; i < 3; ++i) out[i] = o[i] + t * d[i];
}

/* A press picks, in order: a movable shape under the cursor (the hair's
   head), the particle nearest the ray, else the camera orbits (pans). */
static void viewer_press(viewer *v, double px, double py, int pan) {
    float o[3], d[3], t = 0, eye[3], r[3], u[3], f[3];
    camera_ray(&v->cam, px, py, v->width, v->height, o, d);
    camera_basis(&v->cam, eye, r, u, f);
    int shape = pan ? -1 : scene_pick_shape(&v->s, o, d, &t);
    int p = pan || shape >= 0 ? -1 : scene_pick(&v->s, o, d, 0.03f * v->cam.distance, &t);
    if (shape >= 0) {
        for (int i = 0; i < 3; ++i) v->shape_offset[i] = v->s.shapes[shape].centre[i] - (o[i] + t * d[i]);
        v->grab_depth = t * v3_dot(d, f);
        v->moving_shape = shape;
    } else if (p >= 0 && scene_grab(&v->s, p) == PBD_OK) {
        v->grab_depth = t * v3_dot(d, f);
        v->dragging_particle = 1;
    } else if (pan) v->panning = 1;
    else v->orbiting = 1;
    v->mx = px;
    v->my = py;
}

static void viewer_release(viewer *v) {
    if (v->dragging_particle || v->moving_shape >= 0) scene_release(&v->s);
    v->dragging_particle = v->orbiting = v->panning = 0;
    v->moving_shape = -1;
}

/* Where the hand holds: the held particle's target or the moved shape's
   centre, under the cursor on the drag plane. */
static void viewer_hold(viewer *v) {
    float target[3];
    viewer_drag_target(v, v->mx, v->my, target);
    if (v->dragging_particle) scene_drag(&v->s, target);
    if (v->moving_shape >= 0) {
        for (int i = 0; i < 3; ++i) target[i] += v->shape_offset[i];
        scene_move_shape(&v->s, v->moving_shape, target);
    }
}

static void viewer_move(viewer *v, double px, double py) {
    double dx = px - v->mx, dy = py - v->my;
    v->mx = px;
    v->my = py;
    if (v->dragging_particle || v->moving_shape >= 0) viewer_hold(v);
    else if (v->orbiting) {
        v->cam.yaw -= (float)dx * 0.008f;
        v->cam.pitch += (float)dy * 0.008f;
        if (v->cam.pitch > 1.5f) v->cam.pitch = 1.5f;
        if (v->cam.pitch < -1.5f) v->cam.pitch = -1.5f;
    } else if (v->panning) {
        float eye[3], r[3], u[3], f[3], k = v->cam.distance * 0.0015f;
        camera_basis(&v->cam, eye, r, u, f);
        for (int i = 0; i < 3; ++i) v->cam.target[i] += k * ((float)-dx * r[i] + (float)dy * u[i]);
    }
}

static void on_key(GLFWwindow *win, int key, int scancode, int action, int mods) {
    (void)scancode;
    (void)mods;
    viewer *v = (viewer *)glfwGetWindowUserPointer(win);
    if (action != GLFW_PRESS && action != GLFW_REPEAT) return;
    if (key >= GLFW_KEY_1 && key <= GLFW_KEY_9 && key - GLFW_KEY_1 < scene_count()) viewer_load(v, key - GLFW_KEY_1);
    if (key == GLFW_KEY_0 && scene_count() > 9) viewer_load(v, 9);
    else if (key == GLFW_KEY_SPACE) v->paused = !v->paused;
    else if (key == GLFW_KEY_N) v->single_step = 1;
    else if (key == GLFW_KEY_R) viewer_load(v, v->scene_index);
    else if (key == GLFW_KEY_W) v->wireframe = !v->wireframe;
    else if (key == GLFW_KEY_UP) viewer_change_solver(v, 1, 0);
    else if (key == GLFW_KEY_DOWN) viewer_change_solver(v, -1, 0);
    else if (key == GLFW_KEY_RIGHT) viewer_change_solver(v, 0, 1);
    else if (key == GLFW_KEY_LEFT) viewer_change_solver(v, 0, -1);
#ifdef PBD_CUDA
    else if (key == GLFW_KEY_G) viewer_switch_device(v);
#endif
    else if (key == GLFW_KEY_P) {
        char base[64];
        snprintf(base, sizeof base, "out/viewer_%03d", v->shots++);
        viewer_screenshot(v, base, 0);
    } else if (key == GLFW_KEY_ESCAPE) glfwSetWindowShouldClose(win, 1);
}

static void on_button(GLFWwindow *win, int button, int action, int mods) {
    viewer *v = (viewer *)glfwGetWindowUserPointer(win);
    double px, py;
    if (v->drag_scripted) return; /* the script holds the mouse */
    glfwGetCursorPos(win, &px, &py);
    /* cursor positions are in window coordinates; the framebuffer may be larger */
    int ww, wh;
    glfwGetWindowSize(win, &ww, &wh);
    px *= (double)v->width / (ww > 0 ? ww : 1);
    py *= (double)v->height / (wh > 0 ? wh : 1);
    if (action == GLFW_PRESS && (button == GLFW_MOUSE_BUTTON_LEFT || button == GLFW_MOUSE_BUTTON_RIGHT))
        viewer_press(v, px, py, button == GLFW_MOUSE_BUTTON_RIGHT || (mods & GLFW_MOD_SHIFT));
    else if (action == GLFW_RELEASE) viewer_release(v);
}

static void on_cursor(GLFWwindow *win, double px, double py) {
    viewer *v = (viewer *)glfwGetWindowUserPointer(win);
    if (v->drag_scripted) return;
    int ww, wh;
    glfwGetWindowSize(win, &ww, &wh);
    viewer_move(v, px * (double)v->width / (ww > 0 ? ww : 1), py * (double)v->height / (wh > 0 ? wh : 1));
}

static void on_scroll(GLFWwindow *win, double dx, double dy) {
    (void)dx;
    viewer *v = (viewer *)glfwGetWindowUserPointer(win);
    v->cam.distance *= powf(0.9f, (float)dy);
    if (v->cam.distance < 0.1f) v->cam.distance = 0.1f;
}

/* The scripted drag of --drag: press at frame F, move over 60 frames, hold. */
static void viewer_script(viewer *v) {
#ifdef PBD_CUDA
    if (v->frame == v->switch_frame) viewer_switch_device(v);
#endif
    if (!v->drag_scripted) return;
    int f = v->frame - v->drag_frame;
    if (f == 0) viewer_press(v, v->drag_from[0], v->drag_from[1], 0);
    if (f > 0 && f <= 60) {
        double k = f / 60.0;
        viewer_move(v, v->drag_from[0] + k * (v->drag_to[0] - v->drag_from[0]),
                    v->drag_from[1] + k * (v->drag_to[1] - v->drag_from[1]));
    }
}

/* Where the held particle is drawn, against the cursor (the drag's check):
   projected by the view-projection matrix that draws the frame, so the
   check does not lean on the picking ray it checks. */
static void viewer_report_drag(viewer *v) {
    if (!v->drag_scripted) return;
    if (v->s.grabbed < 0 && v->moving_shape < 0) {
        fprintf(stderr, "viewer: --drag grabbed nothing at (%.0f, %.0f)\n", v->drag_from[0], v->drag_from[1]);
        v->status = 1;
        return;
    }
    float vp[16], clip[4], held[3];
    const float *p = held;
    if (v->moving_shape >= 0) /* the point of the shape the hand holds */
        for (int i = 0; i < 3; ++i) held[i] = v->s.shapes[v->moving_shape].centre[i] - v->shape_offset[i];
    else p = pbd_world_positions(v->s.world) + 4 * (size_t)v->s.grabbed;
    camera_matrix(&v->cam, (float)v->width / (float)v->height, vp);
    for (int r = 0; r < 4; ++r) clip[r] = vp[r] * p[0] + vp[4 + r] * p[1] + vp[8 + r] * p[2] + vp[12 + r];
    double px = 0.5 * (clip[0] / clip[3] + 1.0) * v->width, py = 0.5 * (1.0 - clip[1] / clip[3]) * v->height;
    double off = hypot(px - (v->drag_to[0] + 0.5), py - (v->drag_to[1] + 0.5));
    if (v->moving_shape >= 0)
        printf("viewer: the moved shape %d is drawn at (%.1f, %.1f), %.2f pixels from the cursor at (%.0f, %.0f)\n",
               v->moving_shape, px, py, off, v->drag_to[0], v->drag_to[1]);
    else
        printf("viewer: dragged particle %d is drawn at (%.1f, %.1f), %.2f pixels from the cursor at (%.0f, %.0f)\n",
               v->s.grabbed, px, py, off, v->drag_to[0], v->drag_to[1]);
    if (!(off < 3.0)) v->status = 1;
}

static void viewer_text(viewer *v) {
    render_image *p = &v->panel;
    static const float key[3] = {1, 0, 1}, yellow[3] = {1.0f, 0.9f, 0.4f};
    render_clear(p, key, key);
    pbd_solver_mode mode;
    int sub = 0, it = 0, y = 6;
    char line[256];
    pbd_world_get_solver(v->s.world, &mode, &sub, &it);
    snprintf(line, sizeof line, "%d %s: %s", (v->scene_index + 1) % 10, v->s.name, v->s.title); /* its key */
    render_text(p, 8, y, 2, yellow, line);
    y += 16;
    snprintf(line, sizeof line, "sim %.2f ms/step  draw %.2f ms/frame  %s%s", v->sim_ms, v->draw_ms,
             v->paused ? "paused" : "running", v->s.grabbed >= 0 ? "  (holding a particle)" : "");
    render_text(p, 8, y, 2, NULL, line);
    y += 16;
    snprintf(line, sizeof line, "%d particles  %d constraints  %d substeps x %d iterations",
             pbd_world_particle_count(v->s.world), scene_constraint_count(&v->s), sub, it);
    render_text(p, 8, y, 2, NULL, line);
    y += 16;
    snprintf(line, sizeof line, "%s  simd %s x%d  %d threads  %s",
             pbd_world_device(v->s.world) == PBD_DEVICE_GPU ? "GPU" : "CPU", pbd_simd_path(), pbd_simd_width(),
             pbd_world_thread_team(v->s.world), v->s.status);
    render_text(p, 8, y, 2, NULL, line);
    y += 16;
    render_text(p, 8, y, 2, NULL,
                "0-9 scene  space pause  n step  r reset  w wire  up/down substeps  "
                "left/right iterations  p screenshot  drag: pull (a head: move it)");
}

static void viewer_frame(viewer *v) {
    glfwGetFramebufferSize(v->win, &v->width, &v->height);
    if (v->width <= 0 || v->height <= 0) return;
    viewer_script(v);
    /* the simulation: a fixed step, as many as real time asks (at most 4) or
       exactly one per frame when scripted */
    double t = now_s();
    v->accumulator += t - v->last_time;
    v->last_time = t;
    int steps = 0;
    if (v->frames_max > 0) steps = 1;
    else if (v->single_step) steps = 1;
    else if (!v->paused) {
        while (v->accumulator >= v->s.dt && steps < 4) {
            v->accumulator -= v->s.dt;
            ++steps;
        }
        if (steps == 4) v->accumulator = 0; /* too slow for real time: run slower rather than spiral */
    }
    if (v->paused && !v->single_step && v->frames_max <= 0) v->accumulator = 0;
    v->single_step = 0;
    for (int i = 0; i < steps; ++i) {
        double t0 = now_s();
        if (scene_step(&v->s) != PBD_OK) {
            fprintf(stderr, "viewer: %s\n", v->s.error);
            v->paused = 1;
            v->status = 1;
            break;
        }
        double ms = 1e3 * (now_s() - t0);
        v->sim_ms = 0.9 * v->sim_ms + 0.1 * ms;
        v->sim_total_ms += ms;
    }
    if (v->dragging_particle || v->moving_shape >= 0) viewer_hold(v); /* under a still cursor too */
    /* the picture */
    double d0 = now_s();
    float vp[16], eye[3], r[3], u[3], f[3], light[3] = {0.35f, 0.85f, 0.4f};
    v3_normalize(light);
    camera_matrix(&v->cam, (float)v->width / (float)v->height, vp);
    camera_basis(&v->cam, eye, r, u, f);
    v->gl.pixels_per_unit = 0.5f * (float)v->height / tanf(0.5f * v->cam.fov_y * 3.14159265f / 180.0f);
    glViewport(0, 0, v->width, v->height);
    glClearColor(0.62f, 0.74f, 0.88f, 1);
    glClear(GL_COLOR_BUFFER_BIT | GL_DEPTH_BUFFER_BIT);
    glEnable(GL_DEPTH_TEST);
    glUseProgram(v->gl.prog);
    glUniformMatrix4fv(v->gl.u_vp, 1, GL_FALSE, vp);
    glUniform3fv(v->gl.u_light, 1, light);
    glUniform3fv(v->gl.u_eye, 1, eye);
    if (v->s.ground) gl_draw_ground(&v->gl, &v->s);
    for (int i = 0; i < v->s.shape_count; ++i) gl_draw_shape(&v->gl, &v->s.shapes[i]);
    for (int i = 0; i < v->s.item_count; ++i) gl_draw_item(&v->gl, &v->s.items[i], v->wireframe);
    if (v->panel.width != v->width) {
        render_image_free(&v->panel);
        render_image_init(&v->panel, v->width, 92);
    }
    if (!v->no_text) {
        viewer_text(v);
        gl_draw_text(&v->gl, &v->panel, v->width, v->height);
    }
    if (v->record_dir) {
        char base[1024];
        snprintf(base, sizeof base, "%s/frame_%04d", v->record_dir, v->frame);
        viewer_screenshot(v, base, 1);
    }
    v->draw_ms = 0.9 * v->draw_ms + 0.1 * 1e3 * (now_s() - d0);
    v->frame++;
    if (v->frames_max > 0 && v->frame >= v->frames_max) {
        viewer_report_drag(v);
        if (v->screenshot_path) {
            char base[1024];
            snprintf(base, sizeof base, "%s", v->screenshot_path);
            size_t n = strlen(base);
            if (n > 4 && !strcmp(base + n - 4, ".png")) base[n - 4] = 0;
            viewer_screenshot(v, base, 0);
        }
        /* FNV-1a of the positions' bits: equal runs give equal hashes */
        const unsigned char *bytes = (const unsigned char *)pbd_world_positions(v->s.world);
        unsigned long long hash = 1469598103934665603ull;
        for (size_t i = 0; i < 16 * (size_t)pbd_world_particle_count(v->s.world); ++i)
            hash = (hash ^ bytes[i]) * 1099511628211ull;
        printf("viewer: %s ends on the %s, positions hash %016llx\n", v->s.name,
               pbd_world_device(v->s.world) == PBD_DEVICE_GPU ? "GPU" : "CPU", hash);
        printf("viewer: %d frames of %s, %d steps, sim %.2f ms/step (mean), draw %.2f ms/frame: %s\n", v->frame,
               v->s.name, v->s.steps, v->s.steps > 0 ? v->sim_total_ms / v->s.steps : 0.0, v->draw_ms,
               v->status ? "FAILED" : "ok");
        glfwSetWindowShouldClose(v->win, 1);
#ifdef __EMSCRIPTEN__
        emscripten_cancel_main_loop(); /* the page stays; the run is over */
        return;
#endif
    }
    glfwSwapBuffers(v->win);
    glfwPollEvents();
}

static viewer app;

#ifdef __EMSCRIPTEN__
static void viewer_loop(void) { viewer_frame(&app); }
#endif

static int parse_args(viewer *v, int argc, char **argv, int *w, int *h) {
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--scene") && next) {
            v->scene_index = scene_find(next);
            if (v->scene_index < 0) {
                fprintf(stderr, "viewer: no scene \"%s\"\n", next);
                return 0;
            }
            ++i;
        } else if (!strcmp(a, "--frames") && next) {
            v->frames_max = atoi(next);
            ++i;
        } else if (!strcmp(a, "--drag") && next) {
            int n = sscanf(next, "%lf,%lf:%lf,%lf@%d", &v->drag_from[0], &v->drag_from[1], &v->drag_to[0],
                           &v->drag_to[1], &v->drag_frame);
            if (n < 4 || v->drag_frame < 0) {
                fprintf(stderr, "viewer: --drag X,Y:X2,Y2[@F]\n");
                return 0;
            }
            if (n == 4) v->drag_frame = 10;
            v->drag_scripted = 1;
            ++i;
        } else if (!strcmp(a, "--screenshot") && next) {
            v->screenshot_path = next;
            ++i;
        } else if (!strcmp(a, "--size") && next) {
            if (sscanf(next, "%dx%d", w, h) != 2 || *w < 64 || *h < 64) {
                fprintf(stderr, "viewer: --size WxH\n");
                return 0;
            }
            ++i;
        } else if (!strcmp(a, "--record") && next) {
            v->record_dir = next;
            ++i;
        } else if (!strcmp(a, "--switch") && next) {
            v->switch_frame = atoi(next);
            ++i;
        } else if (!strcmp(a, "--no-text")) {
            v->no_text = 1;
        } else if (!strcmp(a, "--options") && next) {
            v->options = next;
            ++i;
        } else if (!strcmp(a, "--threads") && next) {
            v->threads = atoi(next);
            ++i;
        } else {
            fprintf(stderr, "viewer: unknown option %s (see the top of examples/viewer.c)\n", a);
            return 0;
        }
    }
    if (v->drag_scripted && v->frames_max < v->drag_frame + 70) v->frames_max = v->drag_frame + 70;
    return 1;
}

int main(int argc, char **argv) {
    viewer *v = &app;
    int w = 1280, h = 720;
    v->threads = -1;
    v->moving_shape = -1;
    v->switch_frame = -1;
    v->s.grabbed = -1;
    if (!parse_args(v, argc, argv, &w, &h)) return 2;
    if (!glfwInit()) {
        fprintf(stderr, "viewer: no display (glfwInit failed)\n");
        return 3;
    }
#ifndef __EMSCRIPTEN__
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
#endif
    glfwWindowHint(GLFW_SAMPLES, 4);
    v->win = glfwCreateWindow(w, h, "pbd viewer", NULL, NULL);
    if (!v->win) {
        fprintf(stderr, "viewer: cannot open an OpenGL 3.3 window\n");
        glfwTerminate();
        return 3;
    }
    glfwMakeContextCurrent(v->win);
    glfwSwapInterval(v->frames_max > 0 ? 0 : 1);
    glfwSetWindowUserPointer(v->win, v);
    glfwSetKeyCallback(v->win, on_key);
    glfwSetMouseButtonCallback(v->win, on_button);
    glfwSetCursorPosCallback(v->win, on_cursor);
    glfwSetScrollCallback(v->win, on_scroll);
#ifndef __EMSCRIPTEN__
    glEnable(GL_PROGRAM_POINT_SIZE);
#endif
    if (!gl_init(&v->gl) || !viewer_load(v, v->scene_index)) {
        glfwTerminate();
        return 1;
    }
    printf("viewer: %s, simd %s x%d, %d thread(s)\n", (const char *)glGetString(GL_RENDERER), pbd_simd_path(),
           pbd_simd_width(), pbd_max_threads());
    v->last_time = now_s();
#ifdef __EMSCRIPTEN__
    /* requestAnimationFrame; a scripted run on timers instead (a headless
       browser may draw no animation frames, but runs timers) */
    emscripten_set_main_loop(viewer_loop, v->frames_max > 0 ? 1000 : 0, 1);
#else
    while (!glfwWindowShouldClose(v->win)) viewer_frame(v);
#endif
    scene_destroy(&v->s);
    render_image_free(&v->panel);
    free(v->gl.verts);
    free(v->gl.lines);
    glfwDestroyWindow(v->win);
    glfwTerminate();
    return v->status;
}
