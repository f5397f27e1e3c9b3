/* tests/test_parallel.c - the parallel solver: graph colouring, SIMD kernels
   against the scalar reference, 1 against 2 threads, averaged Jacobi,
   locality reordering (survey section 3.8, docs/DESIGN.md section 5.6). */
#include "test.h"
#include "check_error.h"
#include <stdlib.h>

/* No two constraints of a colour share a particle, except in the overflow
   colour; every constraint is in exactly one colour. */
static void check_coloring(pbd_world *w, pbd_group g, int arity, int total) {
    int ncol = 0, overflow = 0, seen = 0;
    CHECK_OK(pbd_group_colors(w, g, NULL, 0, &ncol, &overflow));
    int n = pbd_world_particle_count(w);
    int *mark = (int *)calloc((size_t)n, sizeof(int));
    int *buf = (int *)malloc(sizeof(int) * (size_t)total * (size_t)arity);
    for (int c = 0; c < ncol; ++c) {
        int count = 0;
        CHECK_OK(pbd_group_color_particles(w, g, c, buf, total * arity, &count));
        seen += count;
        if (overflow && c == ncol - 1) continue;
        for (int k = 0; k < count * arity; ++k) {
            int p = buf[k];
            if (p < 0) continue; /* an attachment to a world point */
            CHECK_MSG(mark[p] != c + 1, "colour %d uses particle %d twice", c, p);
            mark[p] = c + 1;
        }
    }
    CHECK_MSG(seen == total, "coloured %d of %d constraints", seen, total);
    free(mark);
    free(buf);
}

static pbd_world *new_world(int substeps, int iterations) {
    pbd_world_desc d = pbd_world_desc_default();
    d.substeps = substeps;
    d.iterations = iterations;
    pbd_world *w = NULL;
    CHECK_OK(pbd_world_create(&d, &w));
    return w;
}

TEST(coloring_is_valid_on_random_meshes) {
    unsigned seed = 7;
    for (int trial = 0; trial < 5; ++trial) {
        pbd_world *w = new_world(1, 1);
        int n = 200 + 100 * trial;
        float *pos = (float *)malloc(sizeof(float) * 3 * (size_t)n);
        for (int i = 0; i < 3 * n; ++i) pos[i] = pbdt_rand(&seed);
        pbd_particles_desc pd = pbd_particles_desc_default();
        pd.positions = pos;
        pd.count = n;
        CHECK_OK(pbd_add_particles(w, &pd, NULL));
        int types[3] = {PBD_CONSTRAINT_DISTANCE, PBD_CONSTRAINT_AREA, PBD_CONSTRAINT_TET_VOLUME};
        for (int t = 0; t < 3; ++t) {
            int arity = pbd_constraint_arity((pbd_constraint_type)types[t]), count = 3 * n;
            int *idx = (int *)malloc(sizeof(int) * (size_t)count * (size_t)arity);
            for (int c = 0; c < count; ++c)
                for (int i = 0; i < arity; ++i) {
                    int p;
                    do { /* distinct particles within a constraint */
                        p = (int)(pbdt_rand(&seed) * (float)n) % n;
                        for (int j = 0; j < i; ++j)
                            if (idx[c * arity + j] == p) p = -1;
                    } while (p < 0);
                    idx[c * arity + i] = p;
                }
            pbd_constraints_desc cd = pbd_constraints_desc_default();
            cd.type = (pbd_constraint_type)types[t];
            cd.count = count;
            cd.indices = idx;
            float *rest = (float *)malloc(sizeof(float) * (size_t)count);
            for (int c = 0; c < count; ++c) rest[c] = 0.1f;
            cd.rest = rest; /* random tets may be flat: give rest values */
            pbd_group g;
            CHECK_OK(pbd_add_constraints(w, &cd, &g));
            check_coloring(w, g, arity, count);
            free(idx);
            free(rest);
        }
        free(pos);
        pbd_world_destroy(w);
    }
}

TEST(coloring_overflows_into_a_serial_colour) {
    /* a star: 100 distance constraints share particle 0, so each needs its
       own colour; 63 fit, the rest go to the overflow colour */
    pbd_world *w = new_world(1, 4);
    float pos[101 * 3];
    for (int i = 0; i <= 100; ++i) {
        pos[3 * i] = cosf(0.1f * i) * (i > 0);
        pos[3 * i + 1] = sinf(0.1f * i) * (i > 0);
        pos[3 * i + 2] = 0;
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = pos;
    pd.count = 101;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    int idx[200];
    for (int c = 0; c < 100; ++c) {
        idx[2 * c] = 0;
        idx[2 * c + 1] = c + 1;
    }
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = 100;
    cd.indices = idx;
    pbd_group g;
    CHECK_OK(pbd_add_constraints(w, &cd, &g));
    int ncol = 0, overflow = 0, sizes[64];
    CHECK_OK(pbd_group_colors(w, g, sizes, 64, &ncol, &overflow));
    CHECK(overflow == 1);
    CHECK(ncol == 64);
    CHECK(sizes[ncol - 1] == 100 - 63);
    check_coloring(w, g, 2, 100);
    /* the overflow colour is solved too: every constraint ends satisfied */
    float zero[3] = {0, 0, 0};
    CHECK_OK(pbd_world_set_gravity(w, zero));
    for (int i = 1; i <= 100; ++i) pos[3 * i] *= 1.5f, pos[3 * i + 1] *= 1.5f;
    pbd_range all = {0, 101};
    CHECK_OK(pbd_particles_set_positions(w, all, pos));
    CHECK_OK(pbd_particle_pin(w, 0));
    for (int s = 0; s < 5; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    float mean = 1, mx = 1;
    CHECK_OK(pbd_group_error(w, g, &mean, &mx));
    CHECK_MSG(mx < 1e-5f, "max error %g", mx);
    pbd_world_destroy(w);
}

TEST(coloring_is_balanced) {
    /* a cloth's edges: the colours come out nearly equal in size, so every
       colour fills the SIMD lanes and both threads */
    pbd_world *w = new_world(1, 1);
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(40, 40, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    pbd_object obj;
    CHECK_OK(pbd_add_cloth(w, &cd, &obj));
    int ncol = 0, sizes[64], total = 0, mx = 0, mn = 1 << 30;
    CHECK_OK(pbd_group_colors(w, pbdt_parts(w, obj).stretch, sizes, 64, &ncol, NULL));
    for (int c = 0; c < ncol; ++c) {
        total += sizes[c];
        mx = sizes[c] > mx ? sizes[c] : mx;
        mn = sizes[c] < mn ? sizes[c] : mn;
    }
    CHECK_MSG(ncol <= 10, "%d colours for a grid's edges", ncol);
    CHECK_MSG(mx <= 1.1 * total / ncol && mn >= 0.9 * total / ncol, "colour sizes %d..%d, mean %d", mn, mx,
              total / ncol);
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
}

/* --- pbd_color_elements, the extension API's colouring ------------------- */

/* colors/starts describe a valid colouring of the elements: every element
   in one colour, the starts the prefix sums of the colour sizes, no empty
   colour, no two elements of a colour sharing a vertex (indices < 0 are
   none) except in the overflow colour, the last. */
static void check_element_coloring(const int *el, int n, int arity, int nv, const int *colors, const int *starts,
                                   int ncol, int overflow) {
    CHECK(ncol >= (n > 0) && ncol <= PBD_MAX_COLORS && starts[0] == 0 && starts[ncol] == n);
    CHECK(overflow == 0 || overflow == 1);
    int *size = (int *)calloc((size_t)ncol + 1, sizeof(int));
    int *mark = (int *)malloc(sizeof(int) * (size_t)(nv > 0 ? nv : 1));
    for (int e = 0; e < n; ++e) {
        CHECK_MSG(colors[e] >= 0 && colors[e] < ncol, "element %d has colour %d of %d", e, colors[e], ncol);
        if (colors[e] >= 0 && colors[e] < ncol) size[colors[e]]++;
    }
    for (int c = 0; c < ncol; ++c) {
        CHECK_MSG(starts[c + 1] - starts[c] == size[c] && size[c] > 0, "colour %d: starts %d..%d, %d elements", c,
                  starts[c], starts[c + 1], size[c]);
        if (overflow && c == ncol - 1) continue;
        for (int v = 0; v < nv; ++v) mark[v] = 0;
        for (int e = 0; e < n; ++e) {
            if (colors[e] != c) continue;
            for (int i = 0; i < arity; ++i) {
                int v = el[arity * e + i];
                if (v < 0) continue;
                CHECK_MSG(!mark[v], "colour %d uses vertex %d twice", c, v);
                mark[v] = 1;
            }
        }
    }
    free(size);
    free(mark);
}

static int shares_vertex(const int *a, const int *b, int arity) {
    for (int i = 0; i < arity; ++i)
        for (int j = 0; j < arity; ++j)
            if (a[i] >= 0 && a[i] == b[j]) return 1;
    return 0;
}

TEST(color_elements_first_fit_and_balanced) {
    /* a grid's triangles and edges, both rules */
    pbd_mesh m;
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    CHECK_OK(pbd_mesh_grid(24, 24, o, u, v, &m));
    int nt = m.triangle_count, nv = m.vertex_count;
    int *colors = (int *)malloc(sizeof(int) * (size_t)nt * 3);
    int starts[PBD_MAX_COLORS + 1], ncol = 0, overflow = -1;
    int spread[2];
    for (int balanced = 0; balanced <= 1; ++balanced) {
        CHECK_OK(pbd_color_elements(NULL, m.triangles, nt, 3, nv, balanced, colors, starts, PBD_MAX_COLORS + 1, &ncol,
                                    &overflow));
        CHECK(overflow == 0 && ncol <= 16);
        check_element_coloring(m.triangles, nt, 3, nv, colors, starts, ncol, overflow);
        int mx = 0, mn = nt;
        for (int c = 0; c < ncol; ++c) {
            int sz = starts[c + 1] - starts[c];
            mx = sz > mx ? sz : mx;
            mn = sz < mn ? sz : mn;
        }
        spread[balanced] = mx - mn;
        if (!balanced) /* first fit: an element of colour c meets every colour below c among those before it */
            for (int e = 0; e < nt; ++e)
                for (int c = 0; c < colors[e]; ++c) {
                    int met = 0;
                    for (int f = 0; f < e && !met; ++f)
                        met = colors[f] == c && shares_vertex(m.triangles + 3 * e, m.triangles + 3 * f, 3);
                    CHECK_MSG(met, "triangle %d took colour %d although %d was free", e, colors[e], c);
                }
    }
    printf("    grid triangles: colour sizes spread %d (first fit), %d (balanced)\n", spread[0], spread[1]);
    CHECK(spread[1] < spread[0]);
    /* the balanced rule is the constraint groups' own: the same colour sizes */
    int ne = 0;
    int *edges = (int *)malloc(sizeof(int) * (size_t)nt * 6);
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k) {
            int a = m.triangles[3 * t + k], b = m.triangles[3 * t + (k + 1) % 3];
            if (a < b) {
                edges[2 * ne] = a;
                edges[2 * ne + 1] = b;
                ++ne;
            }
        }
    pbd_world *w = new_world(1, 1);
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = m.positions;
    pd.count = nv;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    pbd_constraints_desc cd = pbd_constraints_desc_default();
    cd.type = PBD_CONSTRAINT_DISTANCE;
    cd.count = ne;
    cd.indices = edges;
    pbd_group g;
    CHECK_OK(pbd_add_constraints(w, &cd, &g));
    int gn = 0, gover = -1, sizes[PBD_MAX_COLORS];
    CHECK_OK(pbd_group_colors(w, g, sizes, PBD_MAX_COLORS, &gn, &gover));
    CHECK_OK(pbd_color_elements(w, edges, ne, 2, nv, 1, colors, starts, PBD_MAX_COLORS + 1, &ncol, &overflow));
    check_element_coloring(edges, ne, 2, nv, colors, starts, ncol, overflow);
    CHECK(gn == ncol && gover == overflow);
    for (int c = 0; c < gn && c < ncol; ++c)
        CHECK_MSG(sizes[c] == starts[c + 1] - starts[c], "colour %d: group %d, pbd_color_elements %d", c, sizes[c],
                  starts[c + 1] - starts[c]);
    pbd_world_destroy(w);
    free(edges);
    free(colors);
    pbd_mesh_free(&m);
}

TEST(color_elements_overflow_and_ignored_indices) {
    /* a star: 100 edges share vertex 0; 63 colours, the rest in the
       overflow colour, the last */
    int star[200], colors[100], starts[PBD_MAX_COLORS + 1], ncol = 0, overflow = 0;
    for (int e = 0; e < 100; ++e) {
        star[2 * e] = 0;
        star[2 * e + 1] = e + 1;
    }
    for (int balanced = 0; balanced <= 1; ++balanced) {
        CHECK_OK(pbd_color_elements(NULL, star, 100, 2, 101, balanced, colors, starts, PBD_MAX_COLORS + 1, &ncol,
                                    &overflow));
        CHECK(ncol == PBD_MAX_COLORS && overflow == 1);
        CHECK(starts[ncol] - starts[ncol - 1] == 100 - (PBD_MAX_COLORS - 1));
        for (int e = 0; e < 100; ++e) CHECK(colors[e] == (e < PBD_MAX_COLORS - 1 ? e : PBD_MAX_COLORS - 1));
        check_element_coloring(star, 100, 2, 101, colors, starts, ncol, overflow);
    }
    /* indices < 0 are no vertex: (0,-1) twice share 0, (-1,-1) shares nothing */
    int el[10] = {0, -1, 1, -1, 0, -1, -1, -1, -1, -1};
    int want[5] = {0, 0, 1, 0, 0};
    overflow = -1;
    CHECK_OK(pbd_color_elements(NULL, el, 5, 2, 2, 0, colors, starts, 6, &ncol, &overflow));
    CHECK(ncol == 2 && overflow == 0 && starts[0] == 0 && starts[1] == 4 && starts[2] == 5);
    for (int e = 0; e < 5; ++e) CHECK(colors[e] == want[e]);
    /* no elements: no colours; overflow may be NULL; max_starts only needs min(count, 64) + 1 */
    starts[0] = 7;
    CHECK_OK(pbd_color_elements(NULL, NULL, 0, 3, 0, 1, NULL, starts, 1, &ncol, NULL));
    CHECK(ncol == 0 && starts[0] == 0);
}

TEST(color_elements_rejects_bad_input) {
    int el[6] = {0, 1, 1, 2, 2, 3}, colors[3], starts[PBD_MAX_COLORS + 1], ncol, overflow;
    const int S = 12345;
#define PBDT_COLOR_FAILS(call, want, needle)                                   \
    do {                                                                       \
        for (int i_ = 0; i_ < 3; ++i_) colors[i_] = S;                         \
        for (int i_ = 0; i_ <= PBD_MAX_COLORS; ++i_) starts[i_] = S;           \
        ncol = overflow = S;                                                   \
        CHECK_ERROR(call, want, needle);                                       \
        int same_ = ncol == S && overflow == S;                                \
        for (int i_ = 0; i_ < 3; ++i_) same_ &= colors[i_] == S;               \
        for (int i_ = 0; i_ <= PBD_MAX_COLORS; ++i_) same_ &= starts[i_] == S; \
        CHECK_MSG(same_, "%s wrote its outputs", #call);                       \
    } while (0)
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, NULL, 3, 2, 4, 0, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_NULL_POINTER, "elements");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, 4, 0, NULL, starts, 4, &ncol, &overflow),
                     PBD_ERROR_NULL_POINTER, "colors");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, 4, 0, colors, NULL, 4, &ncol, &overflow),
                     PBD_ERROR_NULL_POINTER, "starts");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, 4, 0, colors, starts, 4, NULL, &overflow),
                     PBD_ERROR_NULL_POINTER, "color_count");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, -1, 2, 4, 0, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_INVALID_ARGUMENT, "count");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 0, 4, 0, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_INVALID_ARGUMENT, "arity");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, -2, 4, 0, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_INVALID_ARGUMENT, "arity");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, -1, 0, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_INVALID_ARGUMENT, "vertex_count");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, 4, 2, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_INVALID_ARGUMENT, "balanced");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, 4, 0, colors, starts, 3, &ncol, &overflow),
                     PBD_ERROR_INVALID_ARGUMENT, "max_starts");
    PBDT_COLOR_FAILS(pbd_color_elements(NULL, el, 3, 2, 3, 0, colors, starts, 4, &ncol, &overflow),
                     PBD_ERROR_INDEX_OUT_OF_RANGE, "elements[5] = 3");
    /* on a world the message is the world's too */
    pbd_world *w = new_world(1, 1);
    for (int i = 0; i < 3; ++i) colors[i] = S;
    CHECK_WORLD_ERROR(w, pbd_color_elements(w, el, 3, 2, 2, 1, colors, starts, 4, &ncol, &overflow),
                      PBD_ERROR_INDEX_OUT_OF_RANGE, "is not a vertex (0..1)");
    CHECK(colors[0] == S && colors[1] == S && colors[2] == S);
    pbd_world_destroy(w);
#undef PBDT_COLOR_FAILS
}

/* --- SIMD == scalar and 1 thread == 2 threads ---------------------------- */

typedef pbd_world *(*scene_fn)(void);

static pbd_world *cloth_scene(int bending) {
    pbd_world *w = new_world(2, 4);
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(16, 16, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.bending = (pbd_bending_model)bending;
    cd.stretch_compliance = 1e-6f;
    cd.area_constraints = 1;
    pbd_object obj;
    CHECK_OK(pbd_add_cloth(w, &cd, &obj));
    CHECK_OK(pbd_particle_pin(w, 0));
    int target[1] = {15};
    float point[3] = {1.0f, 1.2f, 0.0f};
    pbd_attachments_desc ad = pbd_attachments_desc_default();
    ad.count = 1;
    ad.particles = target;
    ad.target_points = point;
    ad.compliance = 1e-5f;
    CHECK_OK(pbd_add_attachments(w, &ad, NULL));
    float c[3] = {0.5f, 0.3f, 0.5f};
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.3f, 0.4f, NULL));
    pbd_mesh_free(&m);
    return w;
}
/* A cloth hanging from two pinned corners with the defaults (automatic
   tethers to both, damping towards the pins) and a kinematic third vertex:
   the tethers and the anchor-frame damping. */
static pbd_world *cloth_hanging(void) {
    pbd_world *w = new_world(4, 4);
    float o[3] = {0, 1, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(20, 20, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.damping = 1.0f;
    pbd_object obj;
    CHECK_OK(pbd_add_cloth(w, &cd, &obj));
    CHECK_OK(pbd_particle_pin(w, 0));
    CHECK_OK(pbd_particle_pin(w, 19));
    CHECK_OK(pbd_particle_set_kinematic(w, 10, 1));
    float target[3] = {0.5f, 1.2f, 0.0f};
    CHECK_OK(pbd_particle_set_kinematic_target(w, 10, target));
    pbd_mesh_free(&m);
    return w;
}
static pbd_world *cloth_dihedral(void) { return cloth_scene(PBD_BENDING_DIHEDRAL); }
static pbd_world *cloth_isometric(void) { return cloth_scene(PBD_BENDING_ISOMETRIC); }

static pbd_world *softbody_scene(void) {
    pbd_world *w = new_world(2, 4);
    float lo[3] = {0, 0.5f, 0}, hi[3] = {1.0f, 0.8f, 0.3f};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_tet_box(11, 4, 4, lo, hi, &m));
    pbd_softbody_desc sd = pbdt_softbody_desc(&m);
    sd.edge_compliance = 1e-6f;
    pbd_object obj;
    CHECK_OK(pbd_add_softbody(w, &sd, &obj));
    for (int i = 0; i < m.vertex_count; ++i)
        if (m.positions[3 * i] == 0.0f) CHECK_OK(pbd_particle_pin(w, i));
    float p[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p, n, 0.5f, NULL));
    pbd_mesh_free(&m);
    return w;
}

static pbd_world *balloon_scene(void) {
    pbd_world *w = new_world(2, 4);
    float c[3] = {0, 1, 0};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_sphere(2, c, 0.5f, &m));
    pbd_balloon_desc bd = pbd_balloon_desc_default();
    bd.cloth.positions = m.positions;
    bd.cloth.vertex_count = m.vertex_count;
    bd.cloth.triangles = m.triangles;
    bd.cloth.triangle_count = m.triangle_count;
    bd.cloth.stretch_compliance = 1e-4f;
    bd.pressure = 1.3f;
    pbd_object obj;
    CHECK_OK(pbd_add_balloon(w, &bd, &obj));
    float p[3] = {0, 0, 0}, n[3] = {0, 1, 0};
    CHECK_OK(pbd_add_collider_plane(w, p, n, 0.5f, NULL));
    pbd_mesh_free(&m);
    return w;
}

/* Runs a scene 60 steps with the given SIMD and thread choice and returns
   its snapshot (caller frees). */
static unsigned char *run_scene(scene_fn make, int simd, int threads, int jacobi, size_t *size) {
    pbd_world *w = make();
    CHECK_OK(pbd_world_set_simd(w, simd));
    CHECK_OK(pbd_world_set_threads(w, threads));
    if (jacobi) CHECK_OK(pbd_world_set_jacobi(w, 1, 1.0f));
    for (int s = 0; s < 60; ++s) CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    *size = pbd_world_snapshot_size(w);
    unsigned char *buf = (unsigned char *)malloc(*size);
    CHECK_OK(pbd_world_save(w, buf, *size));
    const float *x = pbd_world_positions(w);
    for (int i = 0; i < 4 * pbd_world_particle_count(w); ++i) CHECK_MSG(isfinite(x[i]), "NaN at particle %d", i / 4);
    pbd_world_destroy(w);
    return buf;
}

static void check_identical(scene_fn make, const char *name, int jacobi) {
    size_t s0, s1, s2;
    unsigned char *scalar = run_scene(make, 0, 1, jacobi, &s0);
    unsigned char *simd = run_scene(make, 1, 1, jacobi, &s1);
    unsigned char *two = run_scene(make, 1, 2, jacobi, &s2);
    CHECK_MSG(s0 == s1 && memcmp(scalar, simd, s0) == 0, "%s: SIMD (%s) differs from scalar", name, pbd_simd_path());
    CHECK_MSG(s1 == s2 && memcmp(simd, two, s1) == 0, "%s: 2 threads differ from 1", name);
    free(scalar);
    free(simd);
    free(two);
}

/* Loose particles (a count that leaves a partial SIMD block, some pinned)
   falling into a tray whose floor tilts and rises every step, beside a
   sphere: the contact generation tests the planes W particles at a time,
   with particles near and far from each plane in the same block, and
   the projection walks only the particles with contacts. Returns the
   snapshot after 90 steps (caller frees) and the contact count of every
   step (speculative contacts that never push leave no trace in the
   state, but are counted). */
/* Particles falling onto moving colliders, which the SIMD contact pass
   skips 16 (8, 4) particles at a time when they are far
   (pbd__vplane_far, pbd__vball_far) and the scalar one particle by
   particle. shape 0: two planes (one moving and turning) and a sphere;
   1, 2, 3: a sphere, a capsule or a box alone, moving and turning. The
   SIMD pass also computes the contacts of the particles that start
   within reach of a sphere, capsule or box (pbd__vshape_contacts). */
static unsigned char *moving_colliders_run(int shape, int simd, int threads, size_t *size, int *contacts) {
    pbd_world *w = new_world(2, 3);
    enum { N = 1000 + 7 };
    float *x = (float *)malloc(sizeof(float) * 3 * N), *m = (float *)malloc(sizeof(float) * N);
    for (int i = 0; i < N; ++i) {
        x[3 * i] = 0.05f * (float)(i % 13) - 0.3f;
        x[3 * i + 1] = 0.2f + 0.03f * (float)(i / 169);
        x[3 * i + 2] = 0.05f * (float)((i / 13) % 13) - 0.3f;
        m[i] = i % 97 == 5 ? 0.0f : 0.1f; /* pinned: never pushed */
    }
    pbd_particles_desc pd = pbd_particles_desc_default();
    pd.positions = x;
    pd.masses = m;
    pd.count = N;
    pd.radius = 0.02f;
    CHECK_OK(pbd_add_particles(w, &pd, NULL));
    pbd_collider moving = {0};
    float p0[3] = {0, 0, 0}, up[3] = {0, 1, 0}, pw[3] = {-0.35f, 0, 0}, nw[3] = {1, 0, 0}, c[3] = {0.2f, 0.1f, 0.1f};
    float base[3] = {0, 0, 0}, ca[3] = {-0.25f, 0.05f, 0}, cb[3] = {0.25f, 0.05f, 0}, half[3] = {0.22f, 0.08f, 0.17f},
          q0[4] = {0, 0, 0, 1};
    if (shape == 0) {
        CHECK_OK(pbd_add_collider_plane(w, p0, up, 0.4f, &moving));
        CHECK_OK(pbd_add_collider_plane(w, pw, nw, 0.2f, NULL));
        CHECK_OK(pbd_add_collider_sphere(w, c, 0.15f, 0.3f, NULL));
    } else if (shape == 1) {
        CHECK_OK(pbd_add_collider_sphere(w, p0, 0.25f, 0.3f, &moving));
        base[1] = -0.1f;
    } else if (shape == 2) {
        CHECK_OK(pbd_add_collider_capsule(w, ca, cb, 0.1f, 0.3f, &moving));
    } else { /* its top starts among the lowest layers: particles start inside it (every face) */
        base[1] = 0.15f;
        CHECK_OK(pbd_add_collider_box(w, base, half, q0, 0.3f, &moving));
    }
    if (shape)
        CHECK_OK(pbd_collider_set_friction(w, moving, 0.4f, 0.3f, 0.5f)); /* restitution reads the contacts' vn */
    CHECK_OK(pbd_world_set_simd(w, simd));
    CHECK_OK(pbd_world_set_threads(w, threads));
    for (int s = 0; s < 90; ++s) {
        float a = 0.004f * (float)s, rot[4] = {sinf(a), 0, 0, cosf(a)}; /* about x */
        float pos[3] = {base[0] + (shape ? 0.001f * (float)s : 0.0f), base[1] + 0.002f * (float)s, base[2]};
        if (shape) {
            rot[0] = 0;
            rot[1] = sinf(4 * a);
            rot[3] = cosf(4 * a);
        } /* the balls spin about y */
        CHECK_OK(pbd_collider_set_pose(w, moving, pos, rot));
        CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
        contacts[s] = pbd_world_contact_count(w);
    }
    int most = 0;
    for (int s = 0; s < 90; ++s) most = contacts[s] > most ? contacts[s] : most;
    CHECK_MSG(most > 100, "shape %d: at most %d contacts: the scene does not test them", shape, most);
    *size = pbd_world_snapshot_size(w);
    unsigned char *buf = (unsigned char *)malloc(*size);
    CHECK_OK(pbd_world_save(w, buf, *size));
    pbd_world_destroy(w);
    free(x);
    free(m);
    return buf;
}
TEST(simd_equals_scalar_and_threads_agree_moving_colliders) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    for (int shape = 0; shape < 4; ++shape) {
        size_t s0, s1, s2;
        int c0[90], c1[90], c2[90];
        unsigned char *scalar = moving_colliders_run(shape, 0, 1, &s0, c0),
                      *simd = moving_colliders_run(shape, 1, 1, &s1, c1),
                      *two = moving_colliders_run(shape, 1, 2, &s2, c2);
        CHECK_MSG(s0 == s1 && memcmp(scalar, simd, s0) == 0, "shape %d: SIMD (%s) differs from scalar", shape,
                  pbd_simd_path());
        CHECK_MSG(s1 == s2 && memcmp(simd, two, s1) == 0, "shape %d: 2 threads differ from 1", shape);
        for (int s = 0; s < 90; ++s) {
            CHECK_MSG(c0[s] == c1[s], "shape %d, step %d: %d contacts with SIMD, %d scalar", shape, s, c1[s], c0[s]);
            CHECK_MSG(c1[s] == c2[s], "shape %d, step %d: %d contacts on 2 threads, %d on 1", shape, s, c2[s], c1[s]);
        }
        free(scalar);
        free(simd);
        free(two);
    }
}

TEST(simd_equals_scalar_and_threads_agree_cloth) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    check_identical(cloth_dihedral, "cloth (dihedral)", 0);
    check_identical(cloth_isometric, "cloth (isometric)", 0);
    check_identical(cloth_hanging, "cloth hanging from two corners (tethers, damping)", 0);
}
TEST(simd_equals_scalar_and_threads_agree_softbody) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    check_identical(softbody_scene, "softbody", 0);
}
TEST(simd_equals_scalar_and_threads_agree_balloon) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    check_identical(balloon_scene, "balloon", 0);
}
TEST(jacobi_threads_agree) {
    if (!pbdt_parity(PBDT_SIMD, PBDT_THREADS)) SKIP(PBDT_NO_PARITY);
    check_identical(cloth_dihedral, "cloth jacobi", 1);
}

/* --- averaged Jacobi ------------------------------------------------------- */

/* Mean edge error of a stretched cloth after one step of k iterations. */
static float stretched_error(int jacobi, int iterations) {
    pbd_world *w = new_world(1, iterations);
    float zero[3] = {0, 0, 0};
    CHECK_OK(pbd_world_set_gravity(w, zero));
    if (jacobi) CHECK_OK(pbd_world_set_jacobi(w, 1, 1.0f));
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(16, 16, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    cd.bending = PBD_BENDING_NONE;
    pbd_object obj;
    CHECK_OK(pbd_add_cloth(w, &cd, &obj));
    const pbd_object_parts op = pbdt_parts(w, obj);
    for (int i = 0; i < 3 * m.vertex_count; ++i) m.positions[i] *= 1.3f; /* stretched by 30% */
    CHECK_OK(pbd_particles_set_positions(w, op.particles, m.positions));
    CHECK_OK(pbd_world_step(w, 1.0f / 60.0f));
    float mean = 0;
    CHECK_OK(pbd_group_error(w, op.stretch, &mean, NULL));
    pbd_mesh_free(&m);
    pbd_world_destroy(w);
    return mean;
}

TEST(jacobi_error_decreases_monotonically) {
    float prev = 1e30f, gs[2];
    for (int k = 1; k <= 12; ++k) {
        float e = stretched_error(1, k);
        CHECK_MSG(e < prev, "Jacobi error after %d iterations %g >= %g after %d", k, e, prev, k - 1);
        prev = e;
    }
    /* Gauss-Seidel converges faster per iteration: the reference point */
    gs[0] = stretched_error(0, 12);
    gs[1] = prev;
    CHECK_MSG(gs[0] < gs[1], "GS %g should beat Jacobi %g at 12 iterations", gs[0], gs[1]);
}

/* --- locality ------------------------------------------------------------------ */

TEST(reorder_hands_back_the_permutation) {
    pbd_world *a = new_world(2, 4), *b = new_world(2, 4);
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(20, 20, o, u, v, &m));
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    int *perm = (int *)malloc(sizeof(int) * (size_t)m.vertex_count);
    int *hit = (int *)calloc((size_t)m.vertex_count, sizeof(int));
    pbd_object oa, ob;
    CHECK_OK(pbd_add_cloth(a, &cd, &oa));
    cd.reorder = 1;
    cd.permutation = perm;
    CHECK_OK(pbd_add_cloth(b, &cd, &ob));
    const int first = pbdt_parts(b, ob).particles.first;
    int moved = 0;
    for (int i = 0; i < m.vertex_count; ++i) {
        CHECK(perm[i] >= 0 && perm[i] < m.vertex_count);
        if (perm[i] >= 0 && perm[i] < m.vertex_count) hit[perm[i]]++;
        moved += perm[i] != i;
        const float *x = pbd_world_positions(b) + 4 * (first + perm[i]);
        CHECK(x[0] == m.positions[3 * i] && x[1] == m.positions[3 * i + 1] && x[2] == m.positions[3 * i + 2]);
    }
    for (int i = 0; i < m.vertex_count; ++i) CHECK(hit[i] == 1);
    CHECK(moved > 0);
    /* the same cloth, pinned at the same vertices, comes to rest hanging the
       same way (a curtain, damped, so that the comparison is of one unique
       equilibrium, not of chaotic swings or of folds) */
    for (int i = 0; i < 20; ++i) { /* a curtain: the whole first row */
        CHECK_OK(pbd_particle_pin(a, i));
        CHECK_OK(pbd_particle_pin(b, perm[i]));
    }
    CHECK_OK(pbd_world_set_point_damping(a, 3.0f));
    CHECK_OK(pbd_world_set_point_damping(b, 3.0f));
    for (int s = 0; s < 180; ++s) {
        CHECK_OK(pbd_world_step(a, 1.0f / 60.0f));
        CHECK_OK(pbd_world_step(b, 1.0f / 60.0f));
    }
    /* a different Gauss-Seidel order, the same physics: the centres of mass
       agree closely, single vertices within the cloth's own wobble */
    double maxd = 0, ca[3] = {0, 0, 0}, cb[3] = {0, 0, 0};
    for (int i = 0; i < m.vertex_count; ++i) {
        const float *xa = pbd_world_positions(a) + 4 * i, *xb = pbd_world_positions(b) + 4 * perm[i];
        for (int k = 0; k < 3; ++k) {
            maxd = fmax(maxd, fabs((double)xa[k] - xb[k]));
            ca[k] += xa[k] / m.vertex_count;
            cb[k] += xb[k] / m.vertex_count;
        }
    }
    double dc =
        sqrt((ca[0] - cb[0]) * (ca[0] - cb[0]) + (ca[1] - cb[1]) * (ca[1] - cb[1]) + (ca[2] - cb[2]) * (ca[2] - cb[2]));
    printf("    reordered cloth: centre of mass %.3g m, largest vertex deviation %.3g m\n", dc, maxd);
    CHECK_MSG(dc < 0.005, "reordered cloth's centre of mass deviates by %g m", dc);
    CHECK_MSG(maxd < 0.05, "reordered cloth deviates by %g m", maxd);
    free(perm);
    free(hit);
    pbd_mesh_free(&m);
    pbd_world_destroy(a);
    pbd_world_destroy(b);
}

/* Worlds stepped from inside the caller's parallel region (each thread its
   own world, as a game's job system might): they finish, with the bits of
   the same worlds stepped one after the other, whatever their thread
   setting (a 1-thread step's orphaned worksharing must not bind to the
   caller's team: it deadlocked). */
static pbd_world *inner_world(int threads) {
    pbd_world *w = pbdt_world(-9.81f);
    float o[3] = {-0.5f, 1, -0.5f}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1}, c[3] = {0, 0.4f, 0};
    pbd_mesh m;
    pbd_mesh_grid(24, 24, o, u, v, &m);
    pbd_cloth_desc cd = pbdt_cloth_desc(&m);
    CHECK_OK(pbd_add_cloth(w, &cd, NULL));
    pbd_mesh_free(&m);
    CHECK_OK(pbd_add_collider_sphere(w, c, 0.3f, 0.5f, NULL));
    CHECK_OK(pbd_world_set_threads(w, threads));
    return w;
}
TEST(parallel_worlds_stepped_inside_a_callers_parallel_region) {
    if (!PBDT_THREADS) SKIP("no OpenMP: no caller's region to step in");
    enum { WORLDS = 4 };
    pbd_world *a[WORLDS], *b[WORLDS];
    for (int k = 0; k < WORLDS; ++k) {
        a[k] = inner_world(k % 3); /* 0 (the default policy), 1 and 2 threads */
        b[k] = inner_world(k % 3);
    }
    for (int k = 0; k < WORLDS; ++k)
        for (int s = 0; s < 20; ++s) CHECK_OK(pbd_world_step(a[k], 1.0f / 60.0f));
    int failed = 0;
#ifdef _OPENMP
#pragma omp parallel for num_threads(2) schedule(static, 1) reduction(+ : failed)
#endif
    for (int k = 0; k < WORLDS; ++k)
        for (int s = 0; s < 20; ++s) failed += pbd_world_step(b[k], 1.0f / 60.0f) != PBD_OK;
    CHECK(failed == 0);
    for (int k = 0; k < WORLDS; ++k) {
        int n = pbd_world_particle_count(a[k]);
        CHECK_MSG(!memcmp(pbd_world_positions(a[k]), pbd_world_positions(b[k]), sizeof(float) * 4 * (size_t)n),
                  "world %d", k);
        pbd_world_destroy(a[k]);
        pbd_world_destroy(b[k]);
    }
}

void suite_parallel(void) {
    RUN(parallel_worlds_stepped_inside_a_callers_parallel_region);
    RUN(coloring_is_valid_on_random_meshes);
    RUN(coloring_overflows_into_a_serial_colour);
    RUN(coloring_is_balanced);
    RUN(color_elements_first_fit_and_balanced);
    RUN(color_elements_overflow_and_ignored_indices);
    RUN(color_elements_rejects_bad_input);
    RUN(simd_equals_scalar_and_threads_agree_cloth);
    RUN(simd_equals_scalar_and_threads_agree_softbody);
    RUN(simd_equals_scalar_and_threads_agree_balloon);
    RUN(simd_equals_scalar_and_threads_agree_moving_colliders);
    RUN(jacobi_threads_agree);
    RUN(jacobi_error_decreases_monotonically);
    RUN(reorder_hands_back_the_permutation);
}
