/* scenes.h - the example scenes of pbd, built once and shown two ways: by
   the headless examples (examples/showcase.c, cloth_fold.c, tablecloth.c,
   flag_tear.c: frames through the software rasterizer of render.h) and by
   the interactive viewer (examples/viewer.c: OpenGL, native and WebGL 2).

   MANUAL
   ======
   Do this in *one* C or C++ file, after pbd.h's implementation:

       #define SCENES_IMPLEMENTATION
       #include "examples/common/scenes.h"

       scene s;
       if (scene_create(scene_find("showcase"), &s) != PBD_OK) ...   // s.error says why
       for (...) {
           scene_step(&s);              // the scene's kinematics, pbd_world_step(s.world, s.dt), its bookkeeping
           for (int i = 0; i < s.item_count; ++i) draw(&s.items[i]);   // meshes, points, lines
           for (int i = 0; i < s.shape_count; ++i) draw(&s.shapes[i]); // the colliders
       }
       scene_destroy(&s);

   A scene is a pbd world plus what a renderer needs to draw it: items
   (triangle meshes, points and line sets whose positions are refreshed by
   every scene_step; `first` names the world particle of point 0 when they
   are world particles, so that a viewer can grab them), shapes (the
   colliders a renderer draws: spheres and boxes), an optional ground plane,
   a camera, and a status line the scene writes about itself (the balloon's
   volume, the flag's splits). Each scene's builder below is also its
   cookbook: how the example sets up cloth, self-collision, tearing...

   Grabbing (what the viewer's mouse does): scene_pick finds the dynamic
   world particle nearest to a ray, scene_grab makes it kinematic
   (pbd_particle_set_kinematic: it goes where the hand puts it and drags the
   rest), scene_drag moves its target, scene_release gives it its mass back
   (it keeps its velocity: a throw). scene_pick_shape and scene_move_shape
   do the same for a movable collider (the hair scene's head).

   With render.h included before the implementation, scene_render draws the
   scene into a render_image, and scene_run_headless is the whole loop of a
   headless example (steps, frames, contact sheet, one line per frame).

   LICENSE: MIT or public domain (your choice), like pbd.h.
*/
#ifndef PBD_SCENES_H_INCLUDED
#define PBD_SCENES_H_INCLUDED

#include "../../pbd.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SCENE_MAX_ITEMS = 8, SCENE_MAX_SHAPES = 8, SCENE_MAX_MESHES = 8 };

typedef enum scene_item_kind { SCENE_TRIANGLES, SCENE_POINTS, SCENE_LINES } scene_item_kind;

/* drawing hints of an item */
enum { SCENE_SMOOTH = 1, SCENE_WIREFRAME = 2, SCENE_SPECULAR = 4 };

typedef struct scene_item {
    scene_item_kind kind;
    const float *x;   /* positions, x[i * stride + 0..2]; refreshed by scene_step */
    int stride;       /* 4 for world particles (x y z inverse mass), 3 for a mesh of the scene's own */
    int count;        /* points */
    const int *index; /* 3 per triangle or 2 per line (NULL for points) */
    int index_count;  /* triangles or lines */
    int first;        /* the world particle of point 0, or -1 when they are not world particles */
    float rgb[3];
    int flags;    /* SCENE_SMOOTH, SCENE_WIREFRAME, SCENE_SPECULAR */
    float radius; /* points: their size */
} scene_item;

typedef enum scene_shape_kind { SCENE_SPHERE, SCENE_BOX } scene_shape_kind;

typedef struct scene_shape {
    scene_shape_kind kind;
    float centre[3];
    float radius;      /* spheres */
    float half[3];     /* boxes: half extents along the axes of `rotation` */
    float rotation[4]; /* unit quaternion x y z w */
    float rgb[3];
    pbd_collider collider; /* the collider it draws (0: none) */
    int movable;           /* a hand may move it (scene_move_shape) */
} scene_shape;

typedef struct scene scene;
struct scene {
    const char *name;  /* the example's name: "showcase" */
    const char *title; /* one line for a viewer: "cloth on a sphere, a soft box, a balloon" */
    pbd_world *world;
    float dt;   /* the fixed time step of one scene_step (1/60 s) */
    int steps;  /* steps taken */
    int ground; /* a ground plane y = ground_y to draw, a square of ground_half around (ground_cx, ground_cz) */
    float ground_y, ground_cx, ground_cz, ground_half, ground_tile;
    float eye[3], target[3], fov_y; /* the camera it is best seen from */
    scene_item items[SCENE_MAX_ITEMS];
    int item_count;
    scene_shape shapes[SCENE_MAX_SHAPES];
    int shape_count;
    int extra_constraints; /* constraints outside the world's groups (strand segments) */
    char status[160];      /* what the scene says about itself after each step */
    char options[128];     /* "key=value ..." its builder reads (scene_create) */
    char output[64];       /* the base name of a headless run's images: the name, or with its options */
    char error[600];       /* why scene_create or scene_step failed (the library's whole message) */
    /* grabbing */
    int grabbed;    /* the held particle (kinematic while held), or -1 */
    int shape_held; /* the shape a hand moves (scene_move_shape), or -1 */
    /* the scene's own: meshes and state, hooks */
    pbd_mesh meshes[SCENE_MAX_MESHES];
    int mesh_count;
    void *data; /* freed with free() by scene_destroy */
    pbd_result (*before_step)(scene *s);
    pbd_result (*after_step)(scene *s);
    pbd_result (*shape_moved)(scene *s, int shape); /* what follows a moved shape (hair roots) */
    void (*release)(scene *s);                      /* frees what its data holds (before the data and the world go) */
    const char *(*verdict)(scene *s); /* after a headless run: NULL when it did what it shows, else why not */
};

int scene_count(void);
const char *scene_name(int index);  /* NULL when out of range */
const char *scene_title(int index); /* NULL when out of range */
int scene_find(const char *name);   /* the index of the scene of that name or number ("2"), or -1 */
/* Builds scene `index` (0 .. scene_count() - 1) into s; on failure s holds
   nothing to free and s->error says why. `options` (may be NULL): "key=value"
   words a scene reads (every scene: device=cpu|gpu, its world's
   pbd_world_desc.device, default auto; the multi-resolution cloth:
   levels=1..8, wrinkles=0|1, scheme=0|1); others are ignored. Threads: `threads` >= 0 is
   passed to pbd_world_set_threads (0: the world's default policy), -1
   keeps the scene's choice. The scenes of pbd_sm.h and pbd_upsample.h are
   there when those headers were included before this one (the viewer
   includes all three). */
pbd_result scene_create(int index, const char *options, int threads, scene *s);
pbd_result scene_step(scene *s);
void scene_destroy(scene *s);
/* Points the items at the world's particles again (after a state was
   restored into the world: pbd_world_restore). */
void scene_sync(scene *s);
/* The constraints of the world's groups (pbd_group_info) and the scene's
   others (strand segments), for a viewer's text. */
int scene_constraint_count(const scene *s);

/* The world particle nearest to the ray origin + t * dir (t > 0, dir need
   not be unit) within `tolerance` metres of it, among the items' world
   particles; -1 when none. *t_out (may be NULL) gets its ray parameter. */
int scene_pick(const scene *s, const float *origin, const float *dir, float tolerance, float *t_out);
/* Hold particle p where it is (not a pinned or kinematic one: then nothing
   is held); scene_drag moves the hold, scene_release lets go (each a no-op
   when nothing is held). */
pbd_result scene_grab(scene *s, int p);
pbd_result scene_drag(scene *s, const float *target);
pbd_result scene_release(scene *s);
/* The movable shape (a sphere) nearest along the ray that it hits, or -1;
   *t_out its ray parameter. scene_move_shape puts shape i's centre at
   `centre` (its collider follows over the next step, carrying what it
   touches), and holds it there: a scene's own motion of it (the hair
   scene's shaking head) stops until scene_release. */
int scene_pick_shape(const scene *s, const float *origin, const float *dir, float *t_out);
pbd_result scene_move_shape(scene *s, int i, const float *centre);

#ifdef PBD_RENDER_H_INCLUDED
/* Draws the scene as its camera sees it (ground, shadows, shapes, items). */
void scene_render(const scene *s, render_image *img, const render_camera *cam);
/* A headless example: runs `steps` steps of scene `name`, renders a frame
   every `frame_every` steps into <dir>/<output>_NNN and a contact sheet into
   <dir>/<output> (output: the name, or as the scene names it from its
   options), and prints one line per frame. The program's arguments: the
   folder (default "out"; created, its parent must exist) and key=value
   options (scene_create). Returns the exit status (0: every step
   succeeded, the positions stayed finite, every image was written and the
   scene's verdict, where it has one, is good). */
int scene_run_headless(const char *name, int argc, char **argv, int steps, int frame_every);
#endif

#ifdef __cplusplus
}
#endif
#endif /* PBD_SCENES_H_INCLUDED */

/* ========================================================================== */
#ifdef SCENES_IMPLEMENTATION

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#define scene__mkdir(d) _mkdir(d)
#else
#include <sys/stat.h>
#define scene__mkdir(d) mkdir(d, 0755)
#endif

/* ---- building blocks -------------------------------------------------------- */

static double scene__now_ms(void) {
#ifdef _WIN32
    return 1000.0 * (double)clock() / CLOCKS_PER_SEC;
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
#endif
}

static pbd_result scene__fail(scene *s, pbd_result r, const char *what) {
    if (r != PBD_OK && !s->error[0])
        snprintf(s->error, sizeof s->error, "%.80s: %s (%.480s)", what, pbd_result_string(r),
                 s->world ? pbd_world_last_error(s->world) : pbd_last_error());
    return r;
}

#define SCENE__TRY(s, call)                                               \
    do {                                                                  \
        pbd_result scene__r = (call);                                     \
        if (scene__r != PBD_OK) return scene__fail((s), scene__r, #call); \
    } while (0)

/* The integer option `key` of the scene's options, or `fallback`. */
static int scene__option(const scene *s, const char *key, int fallback) {
    size_t n = strlen(key);
    for (const char *p = s->options; (p = strstr(p, key)) != NULL; p += n)
        if ((p == s->options || p[-1] == ' ') && p[n] == '=') return atoi(p + n + 1);
    return fallback;
}

static void scene__set3(float *d, float x, float y, float z) {
    d[0] = x;
    d[1] = y;
    d[2] = z;
}

static pbd_mesh *scene__mesh(scene *s) {
    if (s->mesh_count >= SCENE_MAX_MESHES) return NULL;
    return &s->meshes[s->mesh_count++];
}

/* The world's description: the defaults, on the device the options name
   (device=cpu|gpu; default PBD_DEVICE_AUTO). */
static pbd_world_desc scene__world_desc(const scene *s) {
    pbd_world_desc wd = pbd_world_desc_default();
    const char *d = strstr(s->options, "device=");
    if (d && (d == s->options || d[-1] == ' ')) {
        if (!strncmp(d + 7, "gpu", 3)) wd.device = PBD_DEVICE_GPU;
        if (!strncmp(d + 7, "cpu", 3)) wd.device = PBD_DEVICE_CPU;
    }
    return wd;
}

static pbd_result scene__world(scene *s, int substeps, int iterations) {
    pbd_world_desc wd = scene__world_desc(s);
    if (substeps > 0) wd.substeps = substeps;
    if (iterations > 0) wd.iterations = iterations;
    SCENE__TRY(s, pbd_world_create(&wd, &s->world));
    return PBD_OK;
}

static pbd_result scene__ground(scene *s, float friction, float cx, float cz, float half, float tile) {
    float p[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    SCENE__TRY(s, pbd_add_collider_plane(s->world, p, n, friction, NULL));
    s->ground = 1;
    s->ground_y = 0;
    s->ground_cx = cx;
    s->ground_cz = cz;
    s->ground_half = half;
    s->ground_tile = tile;
    return PBD_OK;
}

static void scene__camera(scene *s, float ex, float ey, float ez, float tx, float ty, float tz, float fov) {
    scene__set3(s->eye, ex, ey, ez);
    scene__set3(s->target, tx, ty, tz);
    s->fov_y = fov;
}

static scene_shape *scene__shape(scene *s, scene_shape_kind kind, const float *c, float r, float g, float b) {
    scene_shape *sh = &s->shapes[s->shape_count++];
    memset(sh, 0, sizeof *sh);
    sh->kind = kind;
    memcpy(sh->centre, c, sizeof sh->centre);
    sh->rotation[3] = 1;
    scene__set3(sh->rgb, r, g, b);
    return sh;
}

static pbd_result scene__sphere(scene *s, const float *c, float radius, float friction) {
    pbd_collider id;
    SCENE__TRY(s, pbd_add_collider_sphere(s->world, c, radius, friction, &id));
    scene_shape *sh = scene__shape(s, SCENE_SPHERE, c, 0.62f, 0.64f, 0.68f);
    sh->radius = radius;
    sh->collider = id;
    return PBD_OK;
}

/* An item drawing world particles [first, first + count) with index. */
static scene_item *scene__item(scene *s, scene_item_kind kind, pbd_range r, const int *index, int index_count,
                               float red, float green, float blue, int flags) {
    scene_item *it = &s->items[s->item_count++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    it->stride = 4;
    it->first = r.first;
    it->count = r.count;
    it->index = index;
    it->index_count = index_count;
    scene__set3(it->rgb, red, green, blue);
    it->flags = flags;
    return it;
}

/* A cloth description over a mesh. */
static pbd_cloth_desc scene__cloth_desc(const pbd_mesh *m) {
    pbd_cloth_desc c = pbd_cloth_desc_default();
    c.positions = m->positions;
    c.vertex_count = m->vertex_count;
    c.triangles = m->triangles;
    c.triangle_count = m->triangle_count;
    return c;
}

static pbd_result scene__self_contacts(scene *s) {
    snprintf(s->status, sizeof s->status, "self-contact candidates %d", pbd_world_self_contact_count(s->world));
    return PBD_OK;
}

/* A self-colliding cloth over the grid mesh m of nx x ny vertices from o
   along u and v (bending compliance 2e-3, `thickness` apart: its
   point-triangle and edge-edge constraints keep the layers apart), drawn
   smooth in colour rgb. */
static pbd_result scene__self_colliding_cloth(scene *s, pbd_mesh *m, int nx, int ny, const float *o, const float *u,
                                              const float *v, float thickness, const float *rgb,
                                              pbd_object_parts *parts) {
    pbd_object cloth;
    SCENE__TRY(s, pbd_mesh_grid(nx, ny, o, u, v, m));
    pbd_cloth_desc cd = scene__cloth_desc(m);
    cd.bending_compliance = 2e-3f;
    cd.thickness = thickness;
    SCENE__TRY(s, pbd_add_cloth(s->world, &cd, &cloth));
    SCENE__TRY(s, pbd_add_cloth_self_collision(s->world, cloth, &cd, thickness, NULL));
    SCENE__TRY(s, pbd_object_get_parts(s->world, cloth, parts));
    scene__item(s, SCENE_TRIANGLES, parts->particles, m->triangles, m->triangle_count, rgb[0], rgb[1], rgb[2],
                SCENE_SMOOTH);
    s->after_step = scene__self_contacts;
    return PBD_OK;
}

/* Rotate points about `centre`: about y by ay, then x by ax, then z by az. */
static void scene__rotate_points(float *p, int n, const float *centre, float ay, float ax, float az) {
    float cy = cosf(ay), sy = sinf(ay), cx = cosf(ax), sx = sinf(ax), cz = cosf(az), sz = sinf(az);
    for (int i = 0; i < n; ++i) {
        float x = p[3 * i] - centre[0], y = p[3 * i + 1] - centre[1], z = p[3 * i + 2] - centre[2];
        float x0 = cy * x + sy * z, z0 = -sy * x + cy * z;
        float y1 = cx * y - sx * z0, z1 = sx * y + cx * z0;
        float x2 = cz * x0 - sz * y1, y2 = sz * x0 + cz * y1;
        p[3 * i] = centre[0] + x2;
        p[3 * i + 1] = centre[1] + y2;
        p[3 * i + 2] = centre[2] + z1;
    }
}

/* ---- showcase: cloth on a sphere, a soft box, a balloon ---------------------- */

typedef struct scene__showcase {
    pbd_group volume;
    float rest_volume;
} scene__showcase;

static pbd_result scene__showcase_after(scene *s) {
    scene__showcase *d = (scene__showcase *)s->data;
    float v = 0;
    pbd_group_mesh_volume(s->world, d->volume, &v);
    snprintf(s->status, sizeof s->status, "balloon volume x%.2f", d->rest_volume > 0 ? v / d->rest_volume : 0.0f);
    return PBD_OK;
}

static pbd_result scene__build_showcase(scene *s) {
    const float sphere_c[3] = {-1.6f, 0.45f, 0.0f};
    scene__showcase *d = (scene__showcase *)calloc(1, sizeof *d);
    pbd_mesh *cloth = scene__mesh(s), *box = scene__mesh(s), *balloon = scene__mesh(s);
    pbd_object obj;
    pbd_object_parts parts;
    s->data = d;
    if (!d) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    /* 8 substeps of 4 iterations per 1/60 s step */
    SCENE__TRY(s, scene__world(s, 8, 4));
    SCENE__TRY(s, scene__ground(s, 0.6f, 0.0f, -1.5f, 6.0f, 0.5f));
    SCENE__TRY(s, scene__sphere(s, sphere_c, 0.45f, 0.3f));
    scene__camera(s, -0.35f, 1.75f, 4.5f, -0.35f, 0.3f, 0.0f, 40.0f);

    { /* a 2 m square of cloth, 60x60 vertices, above the sphere */
        float o[3] = {-2.6f, 1.2f, -1.0f}, u[3] = {2.0f, 0.0f, 0.0f}, v[3] = {0.0f, 0.0f, 2.0f};
        SCENE__TRY(s, pbd_mesh_grid(60, 60, o, u, v, cloth));
        pbd_cloth_desc c = scene__cloth_desc(cloth);
        /* isometric bending (Bergou et al. 2006): cheap, and right for a
           cloth that is flat at rest */
        c.bending = PBD_BENDING_ISOMETRIC;
        c.bending_compliance = 1.0f; /* soft fabric: folds */
        c.thickness = 0.012f;
        c.damping = 0.5f;
        SCENE__TRY(s, pbd_add_cloth(s->world, &c, &obj));
        SCENE__TRY(s, pbd_object_get_parts(s->world, obj, &parts));
        scene__item(s, SCENE_TRIANGLES, parts.particles, cloth->triangles, cloth->triangle_count, 0.86f, 0.23f, 0.20f,
                    SCENE_SMOOTH);
    }
    { /* a soft 0.5 m box of 5x5x5 nodes, turned, dropped from 1 m */
        float lo[3] = {0.05f, 1.0f, -0.25f}, hi[3] = {0.55f, 1.5f, 0.25f}, centre[3] = {0.3f, 1.25f, 0.0f};
        SCENE__TRY(s, pbd_mesh_tet_box(5, 5, 5, lo, hi, box));
        /* turned about the vertical and tilted a little: a box that lands on
           an edge tumbles away (it is elastic), one that lands flat squashes
           and settles where it fell */
        scene__rotate_points(box->positions, box->vertex_count, centre, 0.6f, 0.03f, 0.05f);
        pbd_softbody_desc b = pbd_softbody_desc_default();
        b.positions = box->positions;
        b.vertex_count = box->vertex_count;
        b.tets = box->tets;
        b.tet_count = box->tet_count;
        b.density = 200.0f;         /* a foam block, 25 kg */
        b.edge_compliance = 1e-4f;  /* soft enough to squash visibly on impact */
        b.volume_compliance = 0.0f; /* but it keeps its volume */
        b.radius = 0.01f;
        b.damping = 1.0f;
        SCENE__TRY(s, pbd_add_softbody(s->world, &b, &obj));
        SCENE__TRY(s, pbd_object_get_parts(s->world, obj, &parts));
        scene__item(s, SCENE_TRIANGLES, parts.particles, box->triangles, box->triangle_count, 0.26f, 0.55f, 0.86f,
                    SCENE_WIREFRAME);
    }
    { /* a balloon: an icosphere of radius 0.3 m, overpressure 1.3 */
        float centre[3] = {1.75f, 0.9f, 0.0f};
        SCENE__TRY(s, pbd_mesh_sphere(3, centre, 0.3f, balloon));
        pbd_balloon_desc b = pbd_balloon_desc_default();
        b.cloth = scene__cloth_desc(balloon);
        b.cloth.stretch_compliance = 1e-2f; /* rubber: the skin stretches as it inflates */
        b.cloth.bending_compliance = 1.0f;
        b.cloth.damping = 0.5f;
        b.pressure = 1.3f;
        SCENE__TRY(s, pbd_add_balloon(s->world, &b, &obj));
        SCENE__TRY(s, pbd_object_get_parts(s->world, obj, &parts));
        scene__item(s, SCENE_TRIANGLES, parts.particles, balloon->triangles, balloon->triangle_count, 0.98f, 0.78f,
                    0.16f, SCENE_SMOOTH | SCENE_SPECULAR);
        d->volume = parts.volume;
        pbd_group_mesh_volume(s->world, parts.volume, &d->rest_volume);
    }
    s->after_step = scene__showcase_after;
    return PBD_OK;
}

/* ---- cloth_fold: a self-colliding cloth folds over a sphere ------------------ */

static pbd_result scene__build_cloth_fold(scene *s) {
    const float sphere_c[3] = {0, 0.35f, 0}, thickness = 0.006f;
    float o[3] = {-0.35f, 0.75f, -0.6f}, u[3] = {1.2f, 0, 0}, v[3] = {0, 0.1f, 1.2f};
    const float rgb[3] = {0.85f, 0.3f, 0.25f};
    pbd_mesh *m = scene__mesh(s);
    pbd_object_parts parts;
    SCENE__TRY(s, scene__world(s, 8, 0));
    SCENE__TRY(s, scene__sphere(s, sphere_c, 0.3f, 0.4f));
    SCENE__TRY(s, scene__ground(s, 0.6f, 0, 0, 2.0f, 0.25f));
    scene__camera(s, 1.6f, 1.3f, 1.9f, 0.1f, 0.25f, 0, 40.0f);
    /* a 1.2 m cloth (40 x 40 vertices), dropped off-centre */
    SCENE__TRY(s, scene__self_colliding_cloth(s, m, 40, 40, o, u, v, thickness, rgb, &parts));
    /* small: a thread team's barriers would cost more than they save */
    SCENE__TRY(s, pbd_world_set_threads(s->world, 1));
    return PBD_OK;
}

/* ---- tablecloth: pulled off a table ------------------------------------------- */

typedef struct scene__tablecloth {
    int first, nx, ny;
} scene__tablecloth;

/* The pulled edge (kinematic): 1 m/s along +x, and down to 0.35 m, until
   it is 1.6 m from the table (the cloth is off by then); there it stays. */
static pbd_result scene__tablecloth_pull(scene *s) {
    const scene__tablecloth *d = (const scene__tablecloth *)s->data;
    for (int j = 0; j < d->ny; ++j) {
        int id = d->first + j * d->nx + d->nx - 1;
        const float *p = pbd_world_positions(s->world) + 4 * (size_t)id;
        float target[3] = {p[0] < 2.1f ? p[0] + s->dt : p[0], p[1] > 0.35f ? p[1] - 0.5f * s->dt : p[1], p[2]};
        SCENE__TRY(s, pbd_particle_set_kinematic_target(s->world, id, target));
    }
    return PBD_OK;
}

static pbd_result scene__build_tablecloth(scene *s) {
    const float thickness = 0.008f, top = 0.75f, rounding = 0.01f;
    const float table_c[3] = {0, top - 0.025f, 0};
    float o[3] = {-0.8f, top + 0.01f, -0.55f}, u[3] = {1.4f, 0, 0}, v[3] = {0, 0, 1.1f};
    scene__tablecloth *d = (scene__tablecloth *)calloc(1, sizeof *d);
    const float rgb[3] = {0.9f, 0.88f, 0.8f};
    pbd_mesh *m = scene__mesh(s);
    pbd_object_parts parts;
    s->data = d;
    if (!d) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    SCENE__TRY(s, scene__world(s, 12, 0));
    SCENE__TRY(s, scene__ground(s, 0.6f, 0.8f, 0, 2.5f, 0.25f));
    scene__camera(s, 1.0f, 1.7f, 3.0f, 0.9f, 0.4f, 0, 40.0f);
    /* the table top: a box collider with edges rounded by 1 cm (pbd.h,
       colliders: at a sharp edge, static friction would hold the cloth
       pressed into the side face, and it would stretch instead of sliding) */
    pbd_collider_desc bd = pbd_collider_desc_default();
    bd.shape = PBD_COLLIDER_BOX;
    memcpy(bd.position, table_c, sizeof bd.position);
    scene__set3(bd.half_extents, 0.5f, 0.025f, 0.4f);
    bd.rounding = rounding; /* (the default: said here since the scene depends on it) */
    bd.static_friction = 0.35f;
    bd.dynamic_friction = 0.3f;
    SCENE__TRY(s, pbd_add_collider(s->world, &bd, NULL));
    scene_shape *table = scene__shape(s, SCENE_BOX, table_c, 0.55f, 0.38f, 0.22f);
    scene__set3(table->half, 0.5f, 0.025f, 0.4f);
    /* a 1.4 x 1.1 m cloth of 36 x 28 vertices, self-colliding (8 mm) */
    SCENE__TRY(s, scene__self_colliding_cloth(s, m, 36, 28, o, u, v, thickness, rgb, &parts));
    d->first = parts.particles.first;
    d->nx = 36;
    d->ny = 28;
    for (int j = 0; j < d->ny; ++j)
        SCENE__TRY(s, pbd_particle_set_kinematic(s->world, d->first + j * d->nx + d->nx - 1, 1));
    s->before_step = scene__tablecloth_pull;
    /* small: a thread team's barriers would cost more than they save */
    SCENE__TRY(s, pbd_world_set_threads(s->world, 1));
    return PBD_OK;
}

/* ---- flag_tear: a flag in a storm tears ---------------------------------------- */

typedef struct scene__flag {
    pbd_object flag;
    int max_triangles, triangle_count, splits;
    int triangles[1]; /* max_triangles * 3 */
} scene__flag;

/* Wind: an acceleration field pulling every particle towards the wind's
   velocity, with gusts that travel along the flag; a storm from 1.5 s. */
static void scene__wind(void *user, int particle, const float *x, const float *v, double time, float *a) {
    (void)user;
    (void)particle;
    float t = (float)time, storm = t > 1.5f ? 1.0f + 4.0f * fminf(t - 1.5f, 1.0f) : 1.0f;
    float gust = 1.0f + 0.6f * sinf(4.0f * t - 2.5f * x[0]) * sinf(1.7f * t + 3.0f * x[1]);
    float wv[3] = {7.0f * storm * gust, 0.8f * sinf(3.0f * t + x[0]), 3.0f * sinf(2.3f * t - 2.0f * x[0]) * storm};
    const float k = 1.2f; /* 1/s: drag per unit mass */
    for (int c = 0; c < 3; ++c) a[c] = k * (wv[c] - v[c]);
}

/* Edges stretched past the threshold split their vertices between steps;
   the flag's particles and triangles change, the item follows. */
static pbd_result scene__flag_after(scene *s) {
    scene__flag *d = (scene__flag *)s->data;
    int splits = 0;
    SCENE__TRY(s, pbd_world_tear(s->world, &splits));
    d->splits += splits;
    SCENE__TRY(s, pbd_object_triangles(s->world, d->flag, d->triangles, d->max_triangles, &d->triangle_count));
    s->items[0].count = pbd_world_particle_count(s->world);
    s->items[0].index_count = d->triangle_count;
    snprintf(s->status, sizeof s->status, "%d particles, %d splits", s->items[0].count, d->splits);
    return PBD_OK;
}

static pbd_result scene__build_flag_tear(scene *s) {
    enum { NX = 48, NY = 30 };
    float o[3] = {0, 2.0f, 0}, u[3] = {1.6f, 0, 0}, v[3] = {0, -1.0f, 0};
    const float pole_c[3] = {0, 1.2f, 0};
    pbd_mesh *m = scene__mesh(s);
    pbd_object_parts parts;
    SCENE__TRY(s, scene__world(s, 24, 1));
    SCENE__TRY(s, pbd_mesh_grid(NX, NY, o, u, v, m));
    scene__flag *d = (scene__flag *)calloc(1, sizeof *d + sizeof(int) * 3 * (size_t)m->triangle_count);
    s->data = d;
    if (!d) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    d->max_triangles = m->triangle_count;
    pbd_cloth_desc cd = scene__cloth_desc(m);
    cd.stretch_compliance = 0.0f; /* inextensible: small substeps keep it so (Macklin et al. 2019) */
    cd.bending_compliance = 2.0f;
    cd.density = 0.15f;
    cd.tethers = 0;    /* tethers to the pole would take the wind's pull off the edges: no tear */
    cd.damping = 0.0f; /* the default damps towards the pole's (zero) motion, as still air would */
    SCENE__TRY(s, pbd_add_cloth(s->world, &cd, &d->flag));
    SCENE__TRY(s, pbd_object_get_parts(s->world, d->flag, &parts));
    for (int j = 0; j < NY; ++j) SCENE__TRY(s, pbd_particle_pin(s->world, parts.particles.first + j * NX));
    pbd_tearing_desc td = pbd_tearing_desc_default();
    td.object = d->flag;
    td.triangles = m->triangles;
    td.triangle_count = m->triangle_count;
    td.threshold = 1.15f;
    td.max_splits = 24;
    SCENE__TRY(s, pbd_add_tearing(s->world, &td, NULL));
    SCENE__TRY(s, pbd_world_set_acceleration_field(s->world, scene__wind, NULL));
    SCENE__TRY(s, scene__ground(s, 0.6f, 2.0f, 0, 6.0f, 0.5f));
    scene__camera(s, 1.6f, 1.9f, 5.2f, 1.9f, 1.0f, 0, 50.0f);
    scene_shape *pole = scene__shape(s, SCENE_BOX, pole_c, 0.5f, 0.5f, 0.55f);
    scene__set3(pole->half, 0.02f, 1.2f, 0.02f);
    memcpy(d->triangles, m->triangles, sizeof(int) * 3 * (size_t)m->triangle_count);
    d->triangle_count = m->triangle_count;
    /* torn pieces get new particles after the flag's: the item draws from 0 */
    pbd_range all = {0, pbd_world_particle_count(s->world)};
    scene__item(s, SCENE_TRIANGLES, all, d->triangles, d->triangle_count, 0.85f, 0.15f, 0.18f, SCENE_SMOOTH);
    s->after_step = scene__flag_after;
    return PBD_OK;
}

/* ---- dam_break: position-based fluid and a floating soft box ------------------ */

enum { SCENE__DAM_NX = 12, SCENE__DAM_NY = 15, SCENE__DAM_NZ = 10 };
static const float scene__tank[3] = {1.6f, 1.0f, 0.4f}; /* x from 0, y from 0, z from 0 */

typedef struct scene__dam {
    pbd_range water, box;
    long outside; /* particle-steps outside the tank */
    float box_low;
} scene__dam;

static pbd_result scene__dam_after(scene *s) {
    scene__dam *d = (scene__dam *)s->data;
    const float *x = pbd_world_positions(s->world);
    for (int i = 0; i < pbd_world_particle_count(s->world); ++i)
        for (int a = 0; a < 3; ++a)
            if (!(x[4 * i + a] >= -1e-3f) || (a != 1 && !(x[4 * i + a] <= scene__tank[a] + 1e-3f))) d->outside++;
    d->box_low = 1e30f;
    for (int i = 0; i < d->box.count; ++i) d->box_low = fminf(d->box_low, x[4 * (d->box.first + i) + 1]);
    snprintf(s->status, sizeof s->status, "box bottom %.3f m, %ld outside the tank", d->box_low, d->outside);
    return PBD_OK;
}

/* The box floats (its lowest point above the floor, water under it) and
   nothing left the tank. */
static const char *scene__dam_verdict(scene *s) {
    const scene__dam *d = (const scene__dam *)s->data;
    if (d->outside) return "particles left the tank";
    return d->box_low > 0.02f ? NULL : "the box does not float";
}

static pbd_result scene__build_dam_break(scene *s) {
    const float spacing = 0.04f;
    const int n = SCENE__DAM_NX * SCENE__DAM_NY * SCENE__DAM_NZ;
    scene__dam *d = (scene__dam *)calloc(1, sizeof *d + sizeof(float) * 3 * (size_t)n);
    float *pos = (float *)(d + 1);
    pbd_mesh *box = scene__mesh(s);
    pbd_fluid fluid;
    pbd_object obj;
    pbd_object_parts parts;
    s->data = d;
    if (!d) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    SCENE__TRY(s, scene__world(s, 0, 0)); /* the defaults: 4 substeps x 4 iterations */
    /* the tank: floor and four walls (planes; the ground is its floor) */
    SCENE__TRY(s, scene__ground(s, 0.1f, 0.8f, 0.2f, 2.0f, 0.2f));
    const float planes[4][6] = {
        {0, 0, 0, 1, 0, 0}, {scene__tank[0], 0, 0, -1, 0, 0}, {0, 0, 0, 0, 0, 1}, {0, 0, scene__tank[2], 0, 0, -1}};
    for (int k = 0; k < 4; ++k) SCENE__TRY(s, pbd_add_collider_plane(s->world, planes[k], planes[k] + 3, 0.1f, NULL));
    const float back_c[3] = {0.8f, 0.3f, -0.01f};
    scene__set3(scene__shape(s, SCENE_BOX, back_c, 0.75f, 0.75f, 0.8f)->half, 0.8f, 0.3f, 0.01f);
    scene__camera(s, 0.8f, 1.3f, 2.6f, 0.8f, 0.2f, 0.2f, 40.0f);
    /* the water: a block of 0.48 x 0.6 x 0.4 m at the left end, 4 cm apart */
    for (int i = 0; i < n; ++i) {
        pos[3 * i + 0] = (0.5f + (float)(i % SCENE__DAM_NX)) * spacing;
        pos[3 * i + 1] = (0.5f + (float)((i / SCENE__DAM_NX) % SCENE__DAM_NY)) * spacing;
        pos[3 * i + 2] = (0.5f + (float)(i / (SCENE__DAM_NX * SCENE__DAM_NY))) * spacing;
    }
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = pos;
    fd.count = n;
    fd.spacing = spacing;
    fd.viscosity = 0.02f;
    fd.vorticity = 0.02f;
    SCENE__TRY(s, pbd_add_fluid(s->world, &fd, &fluid, &d->water));
    scene_item *water = scene__item(s, SCENE_POINTS, d->water, NULL, 0, 0.25f, 0.5f, 0.9f, 0);
    water->radius = 0.6f * spacing;
    /* a soft box, lighter than water (500 kg/m^3), at the right end */
    float lo[3] = {1.2f, 0.02f, 0.1f}, hi[3] = {1.4f, 0.22f, 0.3f};
    SCENE__TRY(s, pbd_mesh_tet_box(5, 5, 5, lo, hi, box));
    pbd_softbody_desc sd = pbd_softbody_desc_default();
    sd.positions = box->positions;
    sd.vertex_count = box->vertex_count;
    sd.tets = box->tets;
    sd.tet_count = box->tet_count;
    sd.density = 500.0f;
    sd.radius = 0.02f;
    sd.edge_compliance = 1e-6f;
    SCENE__TRY(s, pbd_add_softbody(s->world, &sd, &obj));
    SCENE__TRY(s, pbd_object_get_parts(s->world, obj, &parts));
    SCENE__TRY(s, pbd_object_set_particle_contact(s->world, obj, 1)); /* the water carries it */
    d->box = parts.particles;
    scene__item(s, SCENE_TRIANGLES, parts.particles, box->triangles, box->triangle_count, 0.9f, 0.55f, 0.2f,
                SCENE_SMOOTH | SCENE_WIREFRAME);
    s->after_step = scene__dam_after;
    s->verdict = scene__dam_verdict;
    return PBD_OK;
}

/* ---- hair: follow-the-leader strands on a head that shakes (or a hand moves) ---- */

enum { SCENE__HAIR_STRANDS = 4000, SCENE__HAIR_PER = 16 };

typedef struct scene__hair {
    pbd_strands strands;
    int head;        /* its shape */
    int segments[1]; /* 2 per segment */
} scene__hair;

/* The head shakes side to side for 1.5 s, then nods. */
static void scene__head_pose(float t, float *pos, float *rot) {
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

/* The roots follow the head's pose (pbd_strands_set_transform), the head
   collider too. */
static pbd_result scene__hair_follow(scene *s, int shape) {
    scene__hair *d = (scene__hair *)s->data;
    const scene_shape *h = &s->shapes[shape];
    SCENE__TRY(s, pbd_strands_set_transform(s->world, d->strands, h->centre, h->rotation));
    SCENE__TRY(s, pbd_collider_set_pose(s->world, h->collider, h->centre, h->rotation));
    return PBD_OK;
}

static pbd_result scene__hair_shake(scene *s) {
    scene__hair *d = (scene__hair *)s->data;
    if (s->shape_held == d->head) return PBD_OK; /* a hand moves it */
    scene_shape *h = &s->shapes[d->head];
    scene__head_pose((float)(s->steps + 1) * s->dt, h->centre, h->rotation);
    return scene__hair_follow(s, d->head);
}

static pbd_result scene__build_hair(scene *s) {
    const float head_r = 0.1f;
    /* one FTL pass is exact: 4 substeps of 1 iteration */
    SCENE__TRY(s, scene__world(s, 4, 1));
    SCENE__TRY(s, scene__ground(s, 0.5f, 0, 0, 3.0f, 0.25f));
    scene__camera(s, 0.5f, 1.55f, 0.75f, 0, 1.4f, 0, 40.0f);
    /* roots: a Fibonacci spiral over the scalp (the top and the back, not the face) */
    float *pos = (float *)malloc(sizeof(float) * 6 * SCENE__HAIR_STRANDS), *nrm = pos + 3 * SCENE__HAIR_STRANDS;
    int ns = 0;
    if (!pos) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "hair roots");
    for (int k = 0; k < 2 * SCENE__HAIR_STRANDS && ns < SCENE__HAIR_STRANDS; ++k) {
        float y = 1.0f - 2.0f * ((float)k + 0.5f) / (float)(2 * SCENE__HAIR_STRANDS), r = sqrtf(1 - y * y),
              phi = 2.39996323f * (float)k;
        float n[3] = {r * cosf(phi), y, r * sinf(phi)};
        if (n[1] < -0.1f || (n[2] > 0.35f && n[1] < 0.55f)) continue; /* the face and the neck */
        for (int a = 0; a < 3; ++a) {
            nrm[3 * ns + a] = n[a];
            pos[3 * ns + a] = head_r * n[a];
        }
        ns++;
    }
    int segs = ns * (SCENE__HAIR_PER - 1);
    scene__hair *d = (scene__hair *)calloc(1, sizeof *d + sizeof(int) * 2 * (size_t)segs);
    s->data = d;
    if (!d) {
        free(pos);
        return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    }
    pbd_hair_desc hd = pbd_hair_desc_default();
    hd.root_positions = pos;
    hd.root_normals = nrm;
    hd.strand_count = ns;
    hd.particles_per_strand = SCENE__HAIR_PER;
    hd.length = 0.28f;
    hd.mass = 2e-5f;
    hd.radius = 0.003f;
    hd.damping = 0.9f;
    scene__head_pose(0, hd.position, hd.rotation);
    pbd_range hr;
    pbd_result r = pbd_add_hair(s->world, &hd, &d->strands, &hr);
    free(pos);
    SCENE__TRY(s, r);
    int strand_count = 0, strand_particles = 0;
    SCENE__TRY(s, pbd_strands_info(s->world, d->strands, &strand_count, &strand_particles));
    s->extra_constraints = strand_particles - strand_count; /* the strands' segments */
    /* the head: a sphere collider a hand may move */
    SCENE__TRY(s, scene__sphere(s, hd.position, head_r, 0.2f));
    d->head = s->shape_count - 1;
    scene_shape *head = &s->shapes[d->head];
    memcpy(head->rotation, hd.rotation, sizeof head->rotation);
    scene__set3(head->rgb, 0.93f, 0.76f, 0.62f);
    head->movable = 1;
    /* the strands as lines: segment i of strand k joins particles i and i + 1 */
    for (int k = 0, t = 0; k < ns; ++k)
        for (int i = 0; i + 1 < SCENE__HAIR_PER; ++i, ++t) {
            d->segments[2 * t] = k * SCENE__HAIR_PER + i;
            d->segments[2 * t + 1] = k * SCENE__HAIR_PER + i + 1;
        }
    scene_item *lines = scene__item(s, SCENE_LINES, hr, d->segments, segs, 0.45f, 0.28f, 0.12f, 0);
    lines->radius = 0.0009f; /* drawn half width */
    s->before_step = scene__hair_shake;
    s->shape_moved = scene__hair_follow;
    return PBD_OK;
}

/* ---- multires_cloth: pbd_sm.h's multi-resolution shape-matching cloth ------------ */
#ifdef PBD_SM_H_INCLUDED

static pbd_result scene__multires_after(scene *s) {
    float avg = 0, mx = 0;
    SCENE__TRY(s, pbd_sm_cloth_strain(s->world, *(const pbd_sm_cloth *)s->data, &avg, &mx));
    snprintf(s->status, sizeof s->status, "strain avg %.2f%% max %.2f%%", 100 * avg, 100 * mx);
    return PBD_OK;
}

/* A stiff 1.6 m tablecloth of 70 x 70 vertices (Bender, Weber and Diziol
   2013) drapes over a sphere and the ground; one V-cycle per 1/240 s
   substep. Options: levels=N (1..8, default 4), wrinkles=0|1 (the coarse
   levels' wrinkle conservation, default 1), scheme=0|1 (two-pass or
   independent sets, default 1). */
static pbd_result scene__build_multires_cloth(scene *s) {
    const float sphere_c[3] = {0.0f, 0.35f, 0.0f};
    float o[3] = {-0.8f, 0.9f, -0.8f}, u[3] = {1.6f, 0, 0}, v[3] = {0, 0, 1.6f};
    int levels = scene__option(s, "levels", 4), wrinkles = scene__option(s, "wrinkles", 1);
    pbd_sm_cloth *cloth = (pbd_sm_cloth *)calloc(1, sizeof *cloth);
    pbd_mesh *m = scene__mesh(s);
    pbd_range r;
    s->data = cloth;
    if (!cloth) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    SCENE__TRY(s, scene__world(s, 4, 1)); /* one V-cycle per 1/240 s */
    SCENE__TRY(s, scene__ground(s, 0.6f, 0, 0, 3.0f, 0.4f));
    SCENE__TRY(s, scene__sphere(s, sphere_c, 0.35f, 0.4f));
    scene__set3(s->shapes[s->shape_count - 1].rgb, 0.35f, 0.45f, 0.70f);
    scene__camera(s, 1.6f, 1.5f, 2.4f, 0, 0.3f, 0, 40.0f);
    SCENE__TRY(s, pbd_mesh_grid(70, 70, o, u, v, m));
    pbd_sm_cloth_desc cd = pbd_sm_cloth_desc_default();
    cd.positions = m->positions;
    cd.vertex_count = m->vertex_count;
    cd.triangles = m->triangles;
    cd.triangle_count = m->triangle_count;
    cd.levels = levels;
    cd.conserve_wrinkles = wrinkles;
    cd.scheme = (pbd_sm_cloth_scheme)scene__option(s, "scheme", 1);
    cd.density = 0.2f;
    cd.bending_stiffness = 2e-5f;
    cd.damping = 0.1f;
    cd.thickness = 0.008f;
    SCENE__TRY(s, pbd_sm_add_cloth(s->world, &cd, cloth, &r));
    scene__item(s, SCENE_TRIANGLES, r, m->triangles, m->triangle_count, 0.85f, 0.86f, 0.80f,
                SCENE_SMOOTH | SCENE_SPECULAR);
    snprintf(s->output, sizeof s->output, "%s_w%d", s->name, wrinkles);
    snprintf(s->status, sizeof s->status, "%d levels, wrinkle conservation %s", levels, wrinkles ? "on" : "off");
    s->after_step = scene__multires_after;
    return PBD_OK;
}

/* ---- sm_jelly: plastic jellies dented by weights (pbd_sm.h) ----------------------- */

enum {
    SCENE__JELLIES = 3,
    SCENE__JN = 7, /* a jelly is JN^3 particles */
    SCENE__WX = 3,
    SCENE__WY = 2,                         /* a weight is WX x WY x WX particles */
    SCENE__JELLY_RELEASE = 45,             /* the weights fall from t = 0.75 s */
    SCENE__JELLY_LIFT = 135,               /* and are lifted off from t = 2.25 s */
    SCENE__JELLY_INTS = 6 * 6 * 6 * 2 * 3, /* a jelly's surface: 6 x 36 quads, 2 triangles each */
    SCENE__WEIGHT_INTS = 16 * 2 * 3        /* a weight's: 16 quads */
};
static const float scene__jelly_spacing = 0.05f;

typedef struct scene__lattice {
    int nx, ny, nz;
    pbd_range particles;
    pbd_sm_body body;
    int *tris; /* surface triangles over the particles */
    int tri_count;
} scene__lattice;

typedef struct scene__jelly {
    scene__lattice jelly[SCENE__JELLIES], weight[SCENE__JELLIES];
    float weight_mass, jelly_mass, radius; /* of a weight, of a jelly particle; the contact radius */
    double dent[SCENE__JELLIES];           /* after the last step */
    int jelly_tris[SCENE__JELLIES][SCENE__JELLY_INTS], weight_tris[SCENE__JELLIES][SCENE__WEIGHT_INTS];
} scene__jelly;

/* Index of cell (x, y, z) in pbd_sm_lattice_box's order (x fastest). */
static int scene__cell(const scene__lattice *b, int x, int y, int z) { return x + b->nx * (y + b->ny * z); }

/* The surface of the particle grid: two triangles per quad of the six faces. */
static void scene__lattice_surface(scene__lattice *b) {
    int k = 0;
    for (int axis = 0; axis < 3; ++axis) /* the faces across x, y, z */
        for (int side = 0; side < 2; ++side) {
            int dims[3] = {b->nx, b->ny, b->nz}, a1 = (axis + 1) % 3, a2 = (axis + 2) % 3;
            for (int i = 0; i + 1 < dims[a1]; ++i)
                for (int j = 0; j + 1 < dims[a2]; ++j) {
                    int c[4][3];
                    for (int q = 0; q < 4; ++q) {
                        c[q][axis] = side ? dims[axis] - 1 : 0;
                        c[q][a1] = i + (q == 1 || q == 2);
                        c[q][a2] = j + (q >= 2);
                    }
                    int v[4];
                    for (int q = 0; q < 4; ++q) v[q] = scene__cell(b, c[q][0], c[q][1], c[q][2]);
                    /* (a1, a2, axis) is right-handed: v0 v1 v2 faces +axis; the
                       low side turns round, so that every face looks out */
                    int up[6] = {v[0], v[1], v[2], v[0], v[2], v[3]}, down[6] = {v[0], v[2], v[1], v[0], v[3], v[2]};
                    const int *t = side ? up : down;
                    memcpy(b->tris + k, t, sizeof up);
                    k += 6;
                }
        }
    b->tri_count = k / 3;
}

/* A block of nx x ny x nz particles with its lower corner at `lo`: a
   lattice shape-matched body (Rivers and James 2007; survey 4.2). */
static pbd_result scene__block(scene *s, scene__lattice *b, int nx, int ny, int nz, const float *lo, float mass,
                               const pbd_sm_body_desc *body, int half_width, int *tris) {
    int cells[3 * SCENE__JN * SCENE__JN * SCENE__JN];
    b->nx = nx;
    b->ny = ny;
    b->nz = nz;
    b->tris = tris;
    SCENE__TRY(s, pbd_sm_lattice_box(nx, ny, nz, cells));
    pbd_sm_lattice_desc ld = pbd_sm_lattice_desc_default();
    ld.cells = cells;
    ld.cell_count = nx * ny * nz;
    memcpy(ld.origin, lo, sizeof ld.origin);
    ld.spacing = scene__jelly_spacing;
    ld.particle_mass = mass;
    ld.half_width = half_width;
    ld.body = *body;
    SCENE__TRY(s, pbd_sm_add_lattice(s->world, &ld, &b->body, &b->particles));
    scene__lattice_surface(b);
    return PBD_OK;
}

/* The weight's box from its particles: centre, orthonormal axes (from its
   corner particles) and half extents (the particle grid's). */
static void scene__weight_box(const scene__lattice *b, const float *p, double *c, double ax[3][3], double *half) {
    const float *o = p + 4 * (size_t)(b->particles.first + scene__cell(b, 0, 0, 0));
    int corner[3] = {scene__cell(b, b->nx - 1, 0, 0), scene__cell(b, 0, b->ny - 1, 0), scene__cell(b, 0, 0, b->nz - 1)};
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
        half[k] = 0.5 * (dims[k] - 1) * scene__jelly_spacing;
    }
}

/* A contact model of one's own, as a plugin: every iteration after shape
   matching, a jelly particle (radius r) inside the weight's box is pushed
   out through the nearest face, and the weight (a rigid block: all its
   particles) moves the opposite way, the split weighted by inverse masses
   (momentum is kept). pbd.h's particle contacts would see the weight as a
   lumpy box of balls, and push a lattice's own touching neighbours apart. */
static void scene__jelly_contacts(void *user, const pbd_solve_context *ctx) {
    scene__jelly *cs = (scene__jelly *)user;
    for (int j = 0; j < SCENE__JELLIES; ++j) {
        scene__lattice *wb = &cs->weight[j], *jb = &cs->jelly[j];
        /* a pinned or kinematic weight (inverse mass 0) pushes but is not pushed */
        int weight_moves = ctx->p[4 * (size_t)wb->particles.first + 3] > 0;
        double c[3], ax[3][3], half[3], shift[3] = {0, 0, 0};
        scene__weight_box(wb, ctx->p, c, ax, half);
        for (int i = 0; i < jb->particles.count; ++i) {
            float *q = ctx->p + 4 * (size_t)(jb->particles.first + i);
            double d[3] = {q[0] - c[0], q[1] - c[1], q[2] - c[2]}, best = 1e30, sgn = 1;
            int face = -1;
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
            double wj = q[3], ww = weight_moves ? 1.0 / cs->weight_mass : 0.0; /* a held jelly particle: w = 0 */
            if (!(wj + ww > 0)) continue;
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

/* The weights are held up until t = 0.75 s, then fall, and from 2.25 s are
   lifted straight up at 0.8 m/s to 1 m. */
static pbd_result scene__jelly_weights(scene *s) {
    scene__jelly *d = (scene__jelly *)s->data;
    int step = s->steps + 1;
    for (int j = 0; j < SCENE__JELLIES; ++j) {
        const float *x = pbd_world_positions(s->world);
        float rise = x[4 * (size_t)d->weight[j].particles.first + 1] < 1.0f ? 0.8f * s->dt : 0.0f; /* all alike */
        for (int i = 0; i < d->weight[j].particles.count; ++i) {
            int k = d->weight[j].particles.first + i;
            if (step == SCENE__JELLY_RELEASE) SCENE__TRY(s, pbd_particle_unpin(s->world, k));
            if (step < SCENE__JELLY_LIFT) continue;
            if (step == SCENE__JELLY_LIFT) SCENE__TRY(s, pbd_particle_set_kinematic(s->world, k, 1));
            float t[3] = {x[4 * (size_t)k], x[4 * (size_t)k + 1] + rise, x[4 * (size_t)k + 2]};
            SCENE__TRY(s, pbd_particle_set_kinematic_target(s->world, k, t));
        }
    }
    return PBD_OK;
}

/* Dent: how far the centre of a jelly's top face sits below its undeformed
   top (its lowest particle + height). */
static pbd_result scene__jelly_after(scene *s) {
    scene__jelly *d = (scene__jelly *)s->data;
    const float *x = pbd_world_positions(s->world);
    int n = snprintf(s->status, sizeof s->status, "dents (elastic, creeping, soft)");
    for (int j = 0; j < SCENE__JELLIES; ++j) {
        const scene__lattice *b = &d->jelly[j];
        double lo = 1e30;
        for (int i = 0; i < b->particles.count; ++i) lo = fmin(lo, x[4 * (size_t)(b->particles.first + i) + 1]);
        const float *top = x + 4 * (size_t)(b->particles.first + scene__cell(b, b->nx / 2, b->ny - 1, b->nz / 2));
        d->dent[j] = lo + (b->ny - 1) * scene__jelly_spacing - top[1];
        if (n < (int)sizeof s->status) n += snprintf(s->status + n, sizeof s->status - n, " %.3f", d->dent[j]);
    }
    if (n < (int)sizeof s->status) snprintf(s->status + n, sizeof s->status - n, " m");
    return PBD_OK;
}

/* Once the weights are off: the elastic jelly springs back (under 1 cm),
   the creeping one keeps a dent, the soft one a deeper one. */
static const char *scene__jelly_verdict(scene *s) {
    const scene__jelly *d = (const scene__jelly *)s->data;
    if (s->steps < SCENE__JELLY_LIFT + 60) return NULL; /* not yet lifted off */
    if (!(d->dent[0] < 0.01)) return "the elastic jelly kept a dent";
    return d->dent[1] > d->dent[0] && d->dent[2] > d->dent[1] ? NULL : "the dents do not grow with the plasticity";
}

/* Three jelly blocks of lattice shape matching (linear mode, region half
   width 2) that differ only in their plasticity (survey 4.5.2: elastic,
   creeping, soft) each get a heavy weight (a rigid shape-matched block, 20x
   denser) dropped on them, which is lifted off again. */
static pbd_result scene__build_sm_jelly(scene *s) {
    const float creep[SCENE__JELLIES] = {0.0f, 4.0f, 12.0f}, yield[SCENE__JELLIES] = {0.1f, 0.05f, 0.04f};
    const float jelly_x[SCENE__JELLIES] = {-0.55f, 0.0f, 0.55f};
    const float rgb[SCENE__JELLIES][3] = {{0.30f, 0.75f, 0.35f}, {0.95f, 0.60f, 0.15f}, {0.85f, 0.25f, 0.35f}};
    const float h = scene__jelly_spacing, weight_density = 20.0f; /* times the jelly's: lead or so */
    scene__jelly *d = (scene__jelly *)calloc(1, sizeof *d);
    s->data = d;
    if (!d) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    d->jelly_mass = 1000.0f * h * h * h; /* water-like jelly, kg per particle */
    d->weight_mass = weight_density * d->jelly_mass * SCENE__WX * SCENE__WY * SCENE__WX;
    d->radius = 0.5f * h;
    pbd_world_desc wd = scene__world_desc(s);
    wd.substeps = 4;
    wd.iterations = 3;
    wd.point_damping = 1.5f; /* jelly is viscous: no bouncing weights */
    SCENE__TRY(s, pbd_world_create(&wd, &s->world));
    SCENE__TRY(s, scene__ground(s, 0.8f, 0, 0, 2.5f, 0.25f));
    scene__camera(s, 0.0f, 1.25f, 1.45f, 0.0f, 0.1f, 0.0f, 40.0f);
    for (int j = 0; j < SCENE__JELLIES; ++j) {
        pbd_sm_body_desc jd = pbd_sm_body_desc_default();
        jd.mode = PBD_SM_LINEAR;
        jd.beta = 0.3f;
        jd.stiffness = 0.6f;
        jd.yield = yield[j];
        jd.creep = creep[j];
        jd.max_plastic = 0.6f;
        float lo[3] = {jelly_x[j] - 0.5f * (SCENE__JN - 1) * h, 0.25f + 0.1f * j, -0.5f * (SCENE__JN - 1) * h};
        SCENE__TRY(s, scene__block(s, &d->jelly[j], SCENE__JN, SCENE__JN, SCENE__JN, lo, d->jelly_mass, &jd, 2,
                                   d->jelly_tris[j]));
        /* the weight: rigid (one region spans the block), held up until the release */
        pbd_sm_body_desc rd = pbd_sm_body_desc_default();
        float wlo[3] = {jelly_x[j] - 0.5f * (SCENE__WX - 1) * h, 1.0f, -0.5f * (SCENE__WX - 1) * h};
        SCENE__TRY(s, scene__block(s, &d->weight[j], SCENE__WX, SCENE__WY, SCENE__WX, wlo,
                                   weight_density * d->jelly_mass, &rd, 8, d->weight_tris[j]));
        for (int i = 0; i < d->weight[j].particles.count; ++i)
            SCENE__TRY(s, pbd_particle_pin(s->world, d->weight[j].particles.first + i));
        scene__item(s, SCENE_TRIANGLES, d->jelly[j].particles, d->jelly[j].tris, d->jelly[j].tri_count, rgb[j][0],
                    rgb[j][1], rgb[j][2], SCENE_SMOOTH | SCENE_SPECULAR);
        scene__item(s, SCENE_TRIANGLES, d->weight[j].particles, d->weight[j].tris, d->weight[j].tri_count, 0.45f, 0.47f,
                    0.52f, 0);
    }
    pbd_plugin_desc pd = pbd_plugin_desc_default();
    pd.name = "weight contacts";
    pd.user = d;
    pd.particle_end = pbd_world_particle_count(s->world);
    pd.project = scene__jelly_contacts;
    SCENE__TRY(s, pbd_add_plugin(s->world, &pd, NULL));
    int coupled[2 * SCENE__JELLIES]; /* the contacts couple each weight with its jelly */
    for (int j = 0; j < SCENE__JELLIES; ++j) {
        coupled[2 * j] = d->jelly[j].particles.first;
        coupled[2 * j + 1] = d->weight[j].particles.first;
    }
    SCENE__TRY(s, pbd_world_mark_coupled(s->world, coupled, 2 * SCENE__JELLIES));
    s->before_step = scene__jelly_weights;
    s->after_step = scene__jelly_after;
    s->verdict = scene__jelly_verdict;
    return PBD_OK;
}

/* ---- sm_plant: oriented particles with a skinned mesh (pbd_sm.h) ------------------ */

enum { SCENE__PLANT_MAXP = 64, SCENE__PLANT_RING = 8 };

typedef struct scene__plant {
    float pos[3 * SCENE__PLANT_MAXP]; /* the skeleton at rest */
    int edges[2 * SCENE__PLANT_MAXP];
    int parent[SCENE__PLANT_MAXP]; /* -1 for the root */
    int n, ne;
    pbd_range particles;
    pbd_sm_skin *skin;
    int ball; /* its shape */
    /* the visual mesh: a tube around every edge, a leaf at every tip */
    float *rest, *now;
    int *tris;
    int nv, nt, cap_v, cap_t;
} scene__plant;

static int scene__plant_add(scene__plant *p, int parent, float x, float y, float z) {
    int i = p->n++;
    scene__set3(p->pos + 3 * i, x, y, z);
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
static void scene__plant_skeleton(scene__plant *p) {
    int stem[10];
    for (int i = 0; i < 10; ++i)
        stem[i] = scene__plant_add(p, i ? stem[i - 1] : -1, 0.02f * sinf(0.7f * (float)i), 0.15f * (float)i, 0);
    const int at[5] = {3, 4, 5, 7, 8}, len[5] = {4, 4, 3, 3, 3};
    for (int b = 0; b < 5; ++b) {
        float ang = 2.4f * (float)b, dx = cosf(ang), dz = sinf(ang);
        int prev = stem[at[b]];
        for (int k = 1; k <= len[b]; ++k) {
            const float *o = p->pos + 3 * stem[at[b]];
            prev = scene__plant_add(p, prev, o[0] + 0.13f * (float)k * dx, o[1] + 0.07f * (float)k,
                                    o[2] + 0.13f * (float)k * dz);
        }
    }
}

/* The rest orientation of particle i: body y along the segment to its
   parent (the stem direction for the root), as a quaternion turning y
   onto that direction. */
static void scene__plant_orientation(const scene__plant *p, int i, float *q) {
    int a = p->parent[i] >= 0 ? p->parent[i] : 1, b = p->parent[i] >= 0 ? i : 0;
    float d[3] = {p->pos[3 * b] - p->pos[3 * a], p->pos[3 * b + 1] - p->pos[3 * a + 1],
                  p->pos[3 * b + 2] - p->pos[3 * a + 2]};
    float sign = p->parent[i] < 0 ? -1.0f : 1.0f, l = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    for (int k = 0; k < 3; ++k) d[k] *= sign / l;
    /* half-way quaternion from (0,1,0) to d: axis y x d, w = 1 + y.d */
    float q0[4] = {d[2], 0, -d[0], 1 + d[1]}, n = sqrtf(q0[0] * q0[0] + q0[2] * q0[2] + q0[3] * q0[3]);
    for (int k = 0; k < 4; ++k) q[k] = q0[k] / n;
}

static int scene__plant_vertex(scene__plant *v, float x, float y, float z) {
    if (v->nv == v->cap_v) {
        int cap = v->cap_v ? 2 * v->cap_v : 256;
        float *r = (float *)realloc(v->rest, sizeof(float) * 3 * (size_t)cap);
        if (!r) return -1;
        v->rest = r;
        v->cap_v = cap;
    }
    scene__set3(v->rest + 3 * v->nv, x, y, z);
    return v->nv++;
}

static int scene__plant_tri(scene__plant *v, int a, int b, int c) {
    if (a < 0 || b < 0 || c < 0) return 0;
    if (v->nt == v->cap_t) {
        int cap = v->cap_t ? 2 * v->cap_t : 256;
        int *t = (int *)realloc(v->tris, sizeof(int) * 3 * (size_t)cap);
        if (!t) return 0;
        v->tris = t;
        v->cap_t = cap;
    }
    int *t = v->tris + 3 * v->nt++;
    t[0] = a;
    t[1] = b;
    t[2] = c;
    return 1;
}

/* Tubes (8 around, 4 rings) round every edge, thinner higher up. */
static int scene__plant_tubes(scene__plant *v) {
    for (int e = 0; e < v->ne; ++e) {
        const float *a = v->pos + 3 * v->edges[2 * e], *b = v->pos + 3 * v->edges[2 * e + 1];
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
            float f = (float)ring / 3.0f, r = ra + (rb - ra) * f;
            for (int k = 0; k < SCENE__PLANT_RING; ++k) {
                float ang = 6.2831853f * (float)k / SCENE__PLANT_RING, c = cosf(ang) * r, sn = sinf(ang) * r;
                if (scene__plant_vertex(v, a[0] + f * l * d[0] + c * u[0] + sn * w[0],
                                        a[1] + f * l * d[1] + c * u[1] + sn * w[1],
                                        a[2] + f * l * d[2] + c * u[2] + sn * w[2]) < 0)
                    return 0;
            }
        }
        for (int ring = 0; ring < 3; ++ring)
            for (int k = 0; k < SCENE__PLANT_RING; ++k) {
                int i0 = base + ring * SCENE__PLANT_RING + k, i1 = base + ring * SCENE__PLANT_RING + (k + 1) % 8;
                if (!scene__plant_tri(v, i0, i1, i0 + SCENE__PLANT_RING) ||
                    !scene__plant_tri(v, i1, i1 + SCENE__PLANT_RING, i0 + SCENE__PLANT_RING))
                    return 0;
            }
    }
    return 1;
}

/* A leaf at every tip: a diamond in the plane of the tip's segment and the
   horizontal. */
static int scene__plant_leaves(scene__plant *v) {
    for (int i = 0; i < v->n; ++i) {
        int child = 0;
        for (int e = 0; e < v->ne; ++e) child |= v->edges[2 * e] == i;
        if (child || v->parent[i] < 0) continue;
        const float *a = v->pos + 3 * v->parent[i], *b = v->pos + 3 * i;
        float d[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
        float l = sqrtf(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        for (int k = 0; k < 3; ++k) d[k] /= l;
        float sd[3] = {-d[2], 0, d[0]}, sl = sqrtf(sd[0] * sd[0] + sd[2] * sd[2]);
        for (int k = 0; k < 3; ++k) sd[k] /= sl;
        int v0 = scene__plant_vertex(v, b[0], b[1], b[2]);
        int v1 = scene__plant_vertex(v, b[0] + 0.08f * d[0] + 0.05f * sd[0], b[1] + 0.08f * d[1] + 0.02f,
                                     b[2] + 0.08f * d[2] + 0.05f * sd[2]);
        int v2 = scene__plant_vertex(v, b[0] + 0.18f * d[0], b[1] + 0.18f * d[1] + 0.03f, b[2] + 0.18f * d[2]);
        int v3 = scene__plant_vertex(v, b[0] + 0.08f * d[0] - 0.05f * sd[0], b[1] + 0.08f * d[1] + 0.02f,
                                     b[2] + 0.08f * d[2] - 0.05f * sd[2]);
        if (!scene__plant_tri(v, v0, v1, v2) || !scene__plant_tri(v, v0, v2, v3)) return 0;
    }
    return 1;
}

/* Wind: a gust from 0.3 s to 1.6 s on the plant's particles, stronger
   higher up. */
static void scene__plant_wind(void *user, int particle, const float *x, const float *v, double time, float *out) {
    const pbd_range *r = (const pbd_range *)user;
    (void)v;
    out[0] = out[1] = out[2] = 0;
    if (particle < r->first || particle >= r->first + r->count || time < 0.3 || time > 1.6) return;
    double gust = sin(3.14159265 * (time - 0.3) / 1.3);
    out[0] = (float)(14.0 * gust * gust * (0.3 + x[1]));
    out[2] = (float)(4.0 * sin(7.0 * time) * gust);
}

/* The ball sweeps through the crown from 1.8 s to 2.8 s (unless a hand holds it). */
static pbd_result scene__plant_ball(scene *s) {
    scene__plant *d = (scene__plant *)s->data;
    double t = (s->steps + 1) * (double)s->dt;
    if (t <= 1.8 || s->shape_held == d->ball) return PBD_OK;
    scene_shape *ball = &s->shapes[d->ball];
    float f = (float)((t - 1.8) / 1.0);
    ball->centre[0] = -1.2f + 2.4f * (f < 1 ? f : 1);
    SCENE__TRY(s, pbd_collider_set_pose(s->world, ball->collider, ball->centre, NULL));
    return PBD_OK;
}

/* The visual mesh follows the particles by linear blend skinning. */
static pbd_result scene__plant_after(scene *s) {
    scene__plant *d = (scene__plant *)s->data;
    SCENE__TRY(s, pbd_sm_skin_apply(d->skin, s->world, d->now));
    const float *x = pbd_world_positions(s->world) + 4 * (size_t)(d->particles.first + d->n - 1);
    const float *rest = d->pos + 3 * (d->n - 1);
    float dx = x[0] - rest[0], dy = x[1] - rest[1], dz = x[2] - rest[2];
    snprintf(s->status, sizeof s->status, "tip moved %.3f m", sqrtf(dx * dx + dy * dy + dz * dz));
    return PBD_OK;
}

static void scene__plant_release(scene *s) {
    scene__plant *d = (scene__plant *)s->data;
    pbd_sm_skin_destroy(d->skin);
    free(d->rest);
    free(d->now);
    free(d->tris);
}

/* A plant whose stem and branches are chains one particle wide (survey 4.4;
   Mueller and Chentanez 2011): every shape-matching group (a particle and
   its 1-ring) is collinear, which plain shape matching cannot rotate; the
   particles' ellipsoids make it well defined. Pinned at the root, swayed
   by a gust of wind, then hit by a ball that meets the ellipsoids. A visual
   mesh follows the particles by skinning, with the particles as bones. */
static pbd_result scene__build_sm_plant(scene *s) {
    scene__plant *d = (scene__plant *)calloc(1, sizeof *d);
    s->data = d;
    if (!d) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    s->release = scene__plant_release;
    scene__plant_skeleton(d);
    if (!scene__plant_tubes(d) || !scene__plant_leaves(d) ||
        !(d->now = (float *)calloc(3 * (size_t)d->nv, sizeof(float))))
        return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "the plant's mesh");
    SCENE__TRY(s, scene__world(s, 8, 4));
    SCENE__TRY(s, scene__ground(s, 0.5f, 0, 0, 3.0f, 0.25f));
    scene__camera(s, 1.6f, 1.2f, 2.6f, 0.1f, 0.7f, 0, 40.0f);
    const float ball_c[3] = {-1.2f, 0.95f, 0.05f};
    SCENE__TRY(s, scene__sphere(s, ball_c, 0.16f, 0.2f));
    d->ball = s->shape_count - 1;
    scene__set3(s->shapes[d->ball].rgb, 0.85f, 0.3f, 0.2f);
    s->shapes[d->ball].movable = 1;
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = d->pos;
    pd.count = d->n;
    pd.mass = 0.05f;
    pd.radius = 0.025f; /* the particle's own sphere; its ellipsoid reaches further */
    SCENE__TRY(s, pbd_add_particles(s->world, &pd, &d->particles));
    SCENE__TRY(s, pbd_particle_pin(s->world, d->particles.first));
    SCENE__TRY(s, pbd_particle_pin(s->world, d->particles.first + 1));
    SCENE__TRY(s, pbd_world_set_point_damping(s->world, 0.4f));
    SCENE__TRY(s, pbd_world_set_acceleration_field(s->world, scene__plant_wind, &d->particles));
    /* ellipsoids: long (0.075 = half a segment) along the segment, thin across */
    float radii[3 * SCENE__PLANT_MAXP], quats[4 * SCENE__PLANT_MAXP];
    for (int i = 0; i < d->n; ++i) {
        scene__set3(radii + 3 * i, 0.03f, 0.075f, 0.03f);
        scene__plant_orientation(d, i, quats + 4 * i);
    }
    pbd_sm_oriented_desc od = pbd_sm_oriented_desc_default();
    od.particles = d->particles;
    od.edges = d->edges;
    od.edge_count = d->ne;
    od.radii = radii;
    od.orientations = quats;
    od.stiffness = 0.8f;
    pbd_sm_oriented o = {0};
    SCENE__TRY(s, pbd_sm_add_oriented(s->world, &od, &o));
    pbd_sm_skin_desc sd = pbd_sm_skin_desc_default();
    sd.rest_vertices = d->rest;
    sd.vertex_count = d->nv;
    sd.influences = 2;
    SCENE__TRY(s, pbd_sm_skin_create(s->world, o, &sd, &d->skin));
    scene_item *mesh = scene__item(s, SCENE_TRIANGLES, d->particles, d->tris, d->nt, 0.42f, 0.62f, 0.22f, SCENE_SMOOTH);
    mesh->first = -1; /* the skinned mesh, not the particles */
    mesh->x = d->now;
    mesh->stride = 3;
    mesh->count = d->nv;
    scene_item *bones = scene__item(s, SCENE_POINTS, d->particles, NULL, 0, 0.25f, 0.35f, 0.12f, 0);
    bones->radius = 0.012f; /* the particles, small: a hand grabs them */
    s->before_step = scene__plant_ball;
    s->after_step = scene__plant_after;
    return PBD_OK;
}
#endif /* PBD_SM_H_INCLUDED */

#ifdef PBD_UPSAMPLE_H_INCLUDED
/* ---- upsampling: a live coarse cape and its PIU upsampling (pbd_upsample.h) ---- */

static const float scene__up_shift = 1.3f; /* metres along x between the coarse cape and its upsampling */

typedef struct scene__upsample {
    pbd_up_training_desc live; /* the held-out motion the live cape plays */
    pbd_range cloth;
    pbd_up_training training;
    pbd_up_model *sub, *piu;
    float *coarse, *detail; /* this step's coarse positions (xyz) and the PIU's detail mesh */
    double fit_ms, eval_ms;
} scene__upsample;

static pbd_result scene__upsample_drive(scene *s) {
    scene__upsample *u = (scene__upsample *)s->data;
    return pbd_up_training_drive(&u->live, s->world, u->cloth, (s->steps + 1) * (double)s->dt);
}

/* The detail mesh of this step's coarse cape, drawn beside it. */
static pbd_result scene__upsample_after(scene *s) {
    scene__upsample *u = (scene__upsample *)s->data;
    int nd = pbd_up_model_detail_count(u->piu);
    SCENE__TRY(s, pbd_particles_get_positions(s->world, u->cloth, u->coarse));
    double t0 = scene__now_ms();
    SCENE__TRY(s, pbd_up_model_eval(u->piu, u->coarse, u->detail));
    u->eval_ms = scene__now_ms() - t0;
    for (int i = 0; i < nd; ++i) u->detail[3 * i] += scene__up_shift;
    snprintf(s->status, sizeof s->status, "PIU: %d to %d vertices in %.2f ms (fitted in %.1f s)", u->cloth.count, nd,
             u->eval_ms, u->fit_ms / 1000);
    return PBD_OK;
}

/* The PIU surface keeps to the coarse cape it upsamples: Loop numbering
   keeps the coarse vertices first, so detail vertex i sits at coarse
   vertex i but for the detail PIU adds (a few centimetres at most). */
static const char *scene__upsample_verdict(scene *s) {
    scene__upsample *u = (scene__upsample *)s->data;
    float worst = 0;
    for (int i = 0; i < u->cloth.count; ++i)
        for (int k = 0; k < 3; ++k) {
            float d = fabsf(u->detail[3 * i + k] - (k == 0 ? scene__up_shift : 0) - u->coarse[3 * i + k]);
            worst = d > worst || d != d ? d : worst;
        }
    return worst < 0.05f ? NULL : "the PIU surface left the coarse cape it upsamples";
}

static void scene__upsample_release(scene *s) {
    scene__upsample *u = (scene__upsample *)s->data;
    pbd_up_model_destroy(u->sub);
    pbd_up_model_destroy(u->piu);
    pbd_up_training_free(&u->training);
    free(u->coarse);
    free(u->detail);
}

/* Physics-inspired upsampling (survey 5.2.3; Kavan et al. 2011), live: a
   12 x 12 cape (144 vertices) whose top edge swings is upsampled to the
   cape subdivided twice (2025 vertices) by a PIU model fitted when the
   scene starts, to 60 frames of pbd_upsample.h's training scene (the
   coarse cape and a finer, softer cloth that tracks it; about a second).
   The live cape plays another motion than the training (amplitude 0.35 m
   at 0.9 Hz, trained at 0.3 m and 0.7 Hz), and a hand may pull it
   anywhere: the detail mesh, drawn beside it, follows. */
static pbd_result scene__build_upsample(scene *s) {
    scene__upsample *u = (scene__upsample *)calloc(1, sizeof *u);
    s->data = u;
    if (!u) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    s->release = scene__upsample_release;
    pbd_up_training_desc td = pbd_up_training_desc_default();
    td.coarse_resolution = 12;
    td.levels = 2;
    td.frames = 60;
    td.threads = 1; /* offline: one thread never waits at a barrier */
    double t0 = scene__now_ms();
    SCENE__TRY(s, pbd_up_training_generate(&td, &u->training));
    const pbd_up_training *t = &u->training;
    SCENE__TRY(s, pbd_up_subdivision_create(t->coarse_triangles, t->coarse_triangle_count, t->coarse_count, td.levels,
                                            &u->sub));
    pbd_up_piu_desc pd = pbd_up_piu_desc_from(t, u->sub);
    SCENE__TRY(s, pbd_up_piu_fit(&pd, &u->piu));
    SCENE__TRY(s, pbd_up_model_set_threads(u->piu, 1)); /* 2025 vertices: a team would only wait */
    u->fit_ms = scene__now_ms() - t0;
    u->live = td;
    u->live.amplitude = 0.35f;
    u->live.frequency = 0.9f;
    u->live.device = scene__world_desc(s).device;
    u->live.threads = 0;
    SCENE__TRY(s, pbd_up_training_world(&u->live, &s->world, &u->cloth));
    u->coarse = (float *)malloc(sizeof(float) * 3 * (size_t)t->coarse_count);
    u->detail = (float *)malloc(sizeof(float) * 3 * (size_t)t->detail_count);
    if (!u->coarse || !u->detail) return scene__fail(s, PBD_ERROR_OUT_OF_MEMORY, "scene data");
    const int *fine_tris;
    int fine_count;
    SCENE__TRY(s, pbd_up_subdivision_triangles(u->sub, &fine_tris, &fine_count));
    scene__item(s, SCENE_TRIANGLES, u->cloth, t->coarse_triangles, t->coarse_triangle_count, 0.55f, 0.57f, 0.62f,
                SCENE_WIREFRAME);
    scene_item *fine = scene__item(s, SCENE_TRIANGLES, u->cloth, fine_tris, fine_count, 0.80f, 0.30f, 0.28f,
                                   SCENE_SMOOTH | SCENE_SPECULAR);
    fine->x = u->detail; /* the scene's own positions */
    fine->stride = 3;
    fine->count = t->detail_count;
    fine->first = -1;
    scene__camera(s, 0.2f, 1.1f, 3.0f, 0.65f, 0.45f, 0, 40.0f);
    s->before_step = scene__upsample_drive;
    s->after_step = scene__upsample_after;
    s->verdict = scene__upsample_verdict;
    return PBD_OK;
}
#endif /* PBD_UPSAMPLE_H_INCLUDED */

/* ---- the table of scenes ------------------------------------------------------- */

typedef struct scene__entry {
    const char *name;
    const char *title;
    pbd_result (*build)(scene *s);
} scene__entry;

static const scene__entry scene__table[] = {
    {"showcase", "cloth on a sphere, a soft box, a balloon", scene__build_showcase},
    {"cloth_fold", "self-collision: a cloth folds over a sphere", scene__build_cloth_fold},
    {"tablecloth", "a tablecloth pulled off a table", scene__build_tablecloth},
    {"flag_tear", "a flag in a storm tears", scene__build_flag_tear},
    {"dam_break", "a dam break: position-based fluid and a floating soft box", scene__build_dam_break},
    {"hair", "4000 strands of hair on a shaking head (drag the head)", scene__build_hair},
#ifdef PBD_SM_H_INCLUDED
    {"multires_cloth", "a stiff multi-resolution shape-matching cloth over a sphere", scene__build_multires_cloth},
    {"sm_jelly", "plastic jellies (elastic, creeping, soft) dented by weights", scene__build_sm_jelly},
    {"sm_plant", "oriented particles: a skinned plant in the wind, hit by a ball (drag the ball)",
     scene__build_sm_plant},
#endif
#ifdef PBD_UPSAMPLE_H_INCLUDED
    {"upsample", "upsampling live: a coarse cape (left, grab it) and its PIU detail mesh (right)",
     scene__build_upsample},
#endif
};

int scene_count(void) { return (int)(sizeof scene__table / sizeof scene__table[0]); }

const char *scene_name(int index) { return index >= 0 && index < scene_count() ? scene__table[index].name : NULL; }

const char *scene_title(int index) { return index >= 0 && index < scene_count() ? scene__table[index].title : NULL; }

int scene_find(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < scene_count(); ++i)
        if (!strcmp(name, scene__table[i].name)) return i;
    char *end;
    long k = strtol(name, &end, 10);
    return *name && !*end && k >= 0 && k < scene_count() ? (int)k : -1;
}

/* Points the items at the world's particles (the array may move when the
   world grows, as when it tears). */
static void scene__refresh(scene *s) {
    const float *x = pbd_world_positions(s->world);
    for (int i = 0; i < s->item_count; ++i)
        if (s->items[i].first >= 0) s->items[i].x = x + 4 * (size_t)s->items[i].first;
}

void scene_sync(scene *s) {
    if (s && s->world) scene__refresh(s);
}

pbd_result scene_create(int index, const char *options, int threads, scene *s) {
    if (!s) return PBD_ERROR_INVALID_ARGUMENT;
    memset(s, 0, sizeof *s);
    s->grabbed = s->shape_held = -1;
    if (index < 0 || index >= scene_count()) {
        snprintf(s->error, sizeof s->error, "no scene %d (0 .. %d)", index, scene_count() - 1);
        return PBD_ERROR_INVALID_ARGUMENT;
    }
    s->name = scene__table[index].name;
    s->title = scene__table[index].title;
    snprintf(s->options, sizeof s->options, "%s", options ? options : "");
    snprintf(s->output, sizeof s->output, "%s", s->name);
    s->dt = 1.0f / 60.0f;
    pbd_result r = scene__table[index].build(s);
    if (r == PBD_OK && threads >= 0) r = scene__fail(s, pbd_world_set_threads(s->world, threads), "threads");
    if (r != PBD_OK) {
        char why[sizeof s->error];
        memcpy(why, s->error, sizeof why);
        scene_destroy(s);
        memcpy(s->error, why, sizeof why);
        return r;
    }
    scene__refresh(s);
    if (s->after_step) s->after_step(s); /* the status of the start */
    return PBD_OK;
}

pbd_result scene_step(scene *s) {
    if (!s || !s->world) return PBD_ERROR_INVALID_ARGUMENT;
    if (s->before_step) SCENE__TRY(s, s->before_step(s));
    SCENE__TRY(s, pbd_world_step(s->world, s->dt));
    s->steps++;
    if (s->after_step) SCENE__TRY(s, s->after_step(s));
    scene__refresh(s);
    return PBD_OK;
}

void scene_destroy(scene *s) {
    if (!s) return;
    if (s->release && s->data) s->release(s);
    pbd_world_destroy(s->world);
    for (int i = 0; i < s->mesh_count; ++i) pbd_mesh_free(&s->meshes[i]);
    free(s->data);
    memset(s, 0, sizeof *s);
    s->grabbed = s->shape_held = -1;
}

int scene_constraint_count(const scene *s) {
    int total = s ? s->extra_constraints : 0;
    for (int i = 0; s && i < pbd_world_group_count(s->world); ++i) {
        int n = 0;
        if (pbd_group_info(s->world, pbd_world_group(s->world, i), NULL, &n) == PBD_OK) total += n;
    }
    return total;
}

/* ---- grabbing ----------------------------------------------------------------- */

int scene_pick(const scene *s, const float *origin, const float *dir, float tolerance, float *t_out) {
    if (!s || !s->world || !origin || !dir) return -1;
    float dd = dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2];
    if (!(dd > 0)) return -1;
    const float *x = pbd_world_positions(s->world);
    int best = -1;
    float best_t = 0, best_d2 = tolerance * tolerance;
    for (int i = 0; i < s->item_count; ++i) {
        const scene_item *it = &s->items[i];
        if (it->first < 0) continue;
        for (int k = 0; k < it->count; ++k) {
            const float *p = x + 4 * (size_t)(it->first + k);
            if (!(p[3] > 0)) continue; /* pinned or kinematic: not for the hand */
            float d[3] = {p[0] - origin[0], p[1] - origin[1], p[2] - origin[2]};
            float t = (d[0] * dir[0] + d[1] * dir[1] + d[2] * dir[2]) / dd;
            if (t <= 0) continue;
            float e[3] = {d[0] - t * dir[0], d[1] - t * dir[1], d[2] - t * dir[2]};
            float d2 = e[0] * e[0] + e[1] * e[1] + e[2] * e[2];
            /* the nearest to the ray; of those as near, the nearest to the eye */
            if (d2 < best_d2 || (d2 == best_d2 && best >= 0 && t < best_t)) {
                best = it->first + k;
                best_d2 = d2;
                best_t = t;
            }
        }
    }
    if (t_out) *t_out = best_t;
    return best;
}

pbd_result scene_grab(scene *s, int p) {
    if (!s || !s->world || p < 0 || p >= pbd_world_particle_count(s->world)) return PBD_ERROR_INVALID_ARGUMENT;
    SCENE__TRY(s, scene_release(s));
    const float *x = pbd_world_positions(s->world) + 4 * (size_t)p;
    if (!(x[3] > 0)) return PBD_OK; /* pinned or kinematic already: not the hand's */
    /* held as a kinematic particle (infinite mass, as in Mueller's demos):
       it goes exactly where the hand puts it and drags the rest */
    SCENE__TRY(s, pbd_particle_set_kinematic(s->world, p, 1));
    s->grabbed = p;
    return PBD_OK;
}

pbd_result scene_drag(scene *s, const float *target) {
    if (!s || !s->world || !target) return PBD_ERROR_INVALID_ARGUMENT;
    if (s->grabbed < 0) return PBD_OK;
    SCENE__TRY(s, pbd_particle_set_kinematic_target(s->world, s->grabbed, target));
    return PBD_OK;
}

/* Lets go: the particle gets its mass back and keeps its velocity (a throw). */
pbd_result scene_release(scene *s) {
    if (!s || !s->world) return PBD_ERROR_INVALID_ARGUMENT;
    s->shape_held = -1;
    if (s->grabbed < 0) return PBD_OK;
    int p = s->grabbed;
    s->grabbed = -1;
    SCENE__TRY(s, pbd_particle_set_kinematic(s->world, p, 0));
    return PBD_OK;
}

int scene_pick_shape(const scene *s, const float *origin, const float *dir, float *t_out) {
    if (!s || !origin || !dir) return -1;
    int best = -1;
    float best_t = 1e30f, dd = dir[0] * dir[0] + dir[1] * dir[1] + dir[2] * dir[2];
    if (!(dd > 0)) return -1;
    for (int i = 0; i < s->shape_count; ++i) {
        const scene_shape *sh = &s->shapes[i];
        if (!sh->movable || sh->kind != SCENE_SPHERE) continue;
        /* |o + t d - c| = r: the nearer root */
        float oc[3] = {origin[0] - sh->centre[0], origin[1] - sh->centre[1], origin[2] - sh->centre[2]};
        float b = (oc[0] * dir[0] + oc[1] * dir[1] + oc[2] * dir[2]) / dd;
        float c = (oc[0] * oc[0] + oc[1] * oc[1] + oc[2] * oc[2] - sh->radius * sh->radius) / dd;
        float disc = b * b - c;
        if (disc < 0) continue;
        float t = -b - sqrtf(disc);
        if (t > 0 && t < best_t) {
            best = i;
            best_t = t;
        }
    }
    if (t_out) *t_out = best_t;
    return best;
}

pbd_result scene_move_shape(scene *s, int i, const float *centre) {
    if (!s || !s->world || !centre || i < 0 || i >= s->shape_count || !s->shapes[i].movable)
        return PBD_ERROR_INVALID_ARGUMENT;
    scene_shape *sh = &s->shapes[i];
    memcpy(sh->centre, centre, sizeof sh->centre);
    s->shape_held = i;
    if (s->shape_moved) return s->shape_moved(s, i);
    SCENE__TRY(s, pbd_collider_set_pose(s->world, sh->collider, sh->centre, sh->rotation));
    return PBD_OK;
}

/* ---- headless: the software rasterizer ------------------------------------------ */
#ifdef PBD_RENDER_H_INCLUDED

/* Points as small octahedra, lines as ribbons facing the camera: the
   triangles render.h draws. Returns the vertex count (3 floats each) and
   sets *tri_count; NULL arrays: only the counts. */
static int scene__render_mesh(const scene_item *it, const render_camera *cam, float *v, int *tri, int *tri_count) {
    static const float dir[6][3] = {{1, 0, 0}, {-1, 0, 0}, {0, 1, 0}, {0, -1, 0}, {0, 0, 1}, {0, 0, -1}};
    static const int face[8][3] = {{0, 2, 4}, {2, 1, 4}, {1, 3, 4}, {3, 0, 4},
                                   {2, 0, 5}, {1, 2, 5}, {3, 1, 5}, {0, 3, 5}};
    if (it->kind == SCENE_POINTS) {
        *tri_count = 8 * it->count;
        for (int i = 0; v && i < it->count; ++i) {
            const float *p = it->x + (size_t)it->stride * i;
            for (int k = 0; k < 6; ++k)
                for (int a = 0; a < 3; ++a) v[3 * (6 * i + k) + a] = p[a] + it->radius * dir[k][a];
            for (int f = 0; f < 8; ++f)
                for (int a = 0; a < 3; ++a) tri[3 * (8 * i + f) + a] = 6 * i + face[f][a];
        }
        return 6 * it->count;
    }
    *tri_count = 2 * it->index_count;
    for (int l = 0; v && l < it->index_count; ++l) {
        const float *p = it->x + (size_t)it->stride * it->index[2 * l];
        const float *q = it->x + (size_t)it->stride * it->index[2 * l + 1];
        float d[3] = {q[0] - p[0], q[1] - p[1], q[2] - p[2]};
        float e[3] = {cam->eye[0] - p[0], cam->eye[1] - p[1], cam->eye[2] - p[2]};
        float side[3] = {d[1] * e[2] - d[2] * e[1], d[2] * e[0] - d[0] * e[2], d[0] * e[1] - d[1] * e[0]};
        float len = sqrtf(side[0] * side[0] + side[1] * side[1] + side[2] * side[2]);
        float k = it->radius / (len > 1e-12f ? len : 1.0f);
        for (int a = 0; a < 3; ++a) {
            v[3 * (4 * l + 0) + a] = p[a] - k * side[a];
            v[3 * (4 * l + 1) + a] = p[a] + k * side[a];
            v[3 * (4 * l + 2) + a] = q[a] - k * side[a];
            v[3 * (4 * l + 3) + a] = q[a] + k * side[a];
        }
        static const int quad[6] = {0, 1, 2, 1, 3, 2};
        for (int j = 0; j < 6; ++j) tri[6 * l + j] = 4 * l + quad[j];
    }
    return 4 * it->index_count;
}

void scene_render(const scene *s, render_image *img, const render_camera *cam) {
    render_clear(img, NULL, NULL);
    if (s->ground) {
        render_draw_ground(img, cam, s->ground_y, s->ground_cx, s->ground_cz, s->ground_half, s->ground_tile, NULL,
                           NULL);
        for (int i = 0; i < s->shape_count; ++i)
            if (s->shapes[i].kind == SCENE_SPHERE)
                render_draw_sphere_shadow(img, cam, s->shapes[i].centre, s->shapes[i].radius, s->ground_y);
        for (int i = 0; i < s->item_count; ++i)
            if (s->items[i].kind == SCENE_TRIANGLES)
                render_draw_mesh_shadow(img, cam, s->items[i].x, s->items[i].stride, s->items[i].count,
                                        s->items[i].index, s->items[i].index_count, s->ground_y);
    }
    for (int i = 0; i < s->shape_count; ++i) {
        const scene_shape *sh = &s->shapes[i];
        if (sh->kind == SCENE_SPHERE) render_draw_sphere(img, cam, sh->centre, sh->radius, sh->rgb, RENDER_SMOOTH);
        else render_draw_box(img, cam, sh->centre, sh->half, sh->rotation, sh->rgb, RENDER_SMOOTH);
    }
    for (int i = 0; i < s->item_count; ++i) {
        const scene_item *it = &s->items[i];
        int flags = (it->flags & SCENE_SMOOTH ? RENDER_SMOOTH : 0) |
                    (it->flags & SCENE_WIREFRAME ? RENDER_WIREFRAME : 0) |
                    (it->flags & SCENE_SPECULAR ? RENDER_SPECULAR : 0);
        if (it->kind == SCENE_TRIANGLES) {
            render_draw_mesh(img, cam, it->x, it->stride, it->count, it->index, it->index_count, it->rgb, flags);
            continue;
        }
        int nt, nv = scene__render_mesh(it, cam, NULL, NULL, &nt);
        float *v = (float *)malloc(sizeof(float) * 3 * (size_t)nv);
        int *tri = (int *)malloc(sizeof(int) * 3 * (size_t)nt);
        if (v && tri) {
            scene__render_mesh(it, cam, v, tri, &nt);
            render_draw_mesh(img, cam, v, 3, nv, tri, nt, it->rgb, flags);
        }
        free(v);
        free(tri);
    }
}

static int scene__finite(const scene *s) {
    const float *x = pbd_world_positions(s->world);
    for (int i = 0; i < 4 * pbd_world_particle_count(s->world); ++i)
        if (!isfinite(x[i])) return 0;
    return 1;
}

int scene_run_headless(const char *name, int argc, char **argv, int steps, int frame_every) {
    enum { WIDTH = 640, HEIGHT = 360, MAX_FRAMES = 64 };
    const char *dir = "out";
    char options[128] = "";
    for (int i = 1; i < argc; ++i) {
        if (!strchr(argv[i], '=')) dir = argv[i];
        else if (strlen(options) + strlen(argv[i]) + 2 < sizeof options) {
            if (options[0]) strcat(options, " ");
            strcat(options, argv[i]);
        }
    }
    scene s;
    if (scene_create(scene_find(name), options, -1, &s) != PBD_OK) {
        fprintf(stderr, "%s: %s\n", name, s.error);
        return 1;
    }
    printf("%s: %s; %d particles, simd %s x%d, %d thread(s), %s\n", s.name, s.title, pbd_world_particle_count(s.world),
           pbd_simd_path(), pbd_simd_width(), pbd_max_threads(),
           pbd_world_device(s.world) == PBD_DEVICE_GPU ? "on the GPU" : "on the CPU");
    static render_image frames[MAX_FRAMES];
    char label[48];
    scene__mkdir(dir); /* fails harmlessly when it exists; its parent must exist */
    const float up[3] = {0, 1, 0};
    render_camera cam = render_camera_look_at(s.eye, s.target, up, s.fov_y);
    double sim = 0;
    int failed = 0, frame = 0;
    for (int step = 1; step <= steps && !failed; ++step) {
        double t0 = scene__now_ms();
        if (scene_step(&s) != PBD_OK) {
            fprintf(stderr, "%s: %s\n", s.name, s.error);
            failed = 1;
            break;
        }
        sim += scene__now_ms() - t0;
        if (step % frame_every || frame >= MAX_FRAMES) continue;
        render_image *img = &frames[frame];
        char base[1024], path[1100];
        if (!scene__finite(&s)) {
            fprintf(stderr, "%s: non-finite positions at t = %.2f s\n", s.name, pbd_world_time(s.world));
            failed = 1;
        }
        if (render_image_init(img, WIDTH, HEIGHT) != 0) {
            fprintf(stderr, "out of memory\n");
            failed = 1;
            break;
        }
        scene_render(&s, img, &cam);
        snprintf(label, sizeof label, "T = %.2f S", pbd_world_time(s.world));
        render_text(img, 12, 12, 4, NULL, label); /* scale 4: crisp at half size in the contact sheet */
        snprintf(base, sizeof base, "%s/%s_%03d", dir, s.output, frame);
        const char *written = render_image_save(img, base, path, sizeof path);
        printf("frame %2d  t = %.2f s  sim %.3f ms/step  %s  -> %s\n", frame, pbd_world_time(s.world), sim / step,
               s.status, written ? written : "(write failed)");
        if (!written) failed = 1;
        ++frame;
    }
    if (!failed && frame > 0) {
        char base[1024], path[1100];
        snprintf(base, sizeof base, "%s/%s", dir, s.output);
        const char *written = render_contact_sheet(frames, frame, 4, 2, NULL, base, path, sizeof path);
        printf("contact sheet (%d frames) -> %s\n", frame, written ? written : "(write failed)");
        if (!written) failed = 1;
    }
    const char *why = !failed && s.verdict ? s.verdict(&s) : NULL;
    if (why) {
        fprintf(stderr, "%s: %s\n", s.name, why);
        failed = 1;
    }
    if (s.steps > 0)
        printf("summary: %s, %d steps of %.4f s, %d particles: %.3f ms per step (mean); %s\n", s.name, s.steps, s.dt,
               pbd_world_particle_count(s.world), sim / s.steps, failed ? "FAILED" : "ok");
    for (int i = 0; i < frame; ++i) render_image_free(&frames[i]);
    scene_destroy(&s);
    return failed;
}
#endif /* PBD_RENDER_H_INCLUDED */

#endif /* SCENES_IMPLEMENTATION */
