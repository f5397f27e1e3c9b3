/* tests/test_meshes.c - the mesh generators (pbd.h section "meshes"):
   counts, positions, orientation, closedness, volumes, bad arguments. */
#include "test.h"
#include <limits.h>
#include <stdlib.h>

#define PBDT_PI 3.14159265358979323846

static void m_sub(const float *a, const float *b, double *o) {
    o[0] = (double)a[0] - b[0];
    o[1] = (double)a[1] - b[1];
    o[2] = (double)a[2] - b[2];
}
static void m_cross(const double *a, const double *b, double *o) {
    o[0] = a[1] * b[2] - a[2] * b[1];
    o[1] = a[2] * b[0] - a[0] * b[2];
    o[2] = a[0] * b[1] - a[1] * b[0];
}
static double m_dot(const double *a, const double *b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

/* normal (a x b of the triangle's edges, not normalised) */
static void tri_normal(const pbd_mesh *m, int t, double *n) {
    const int *v = m->triangles + 3 * t;
    double a[3], b[3];
    m_sub(m->positions + 3 * v[1], m->positions + 3 * v[0], a);
    m_sub(m->positions + 3 * v[2], m->positions + 3 * v[0], b);
    m_cross(a, b, n);
}
/* divergence-theorem volume of the surface triangles */
static double surface_volume(const pbd_mesh *m) {
    double v = 0;
    for (int t = 0; t < m->triangle_count; ++t) {
        const int *i = m->triangles + 3 * t;
        const float *a = m->positions + 3 * i[0], *b = m->positions + 3 * i[1], *c = m->positions + 3 * i[2];
        double da[3] = {a[0], a[1], a[2]}, db[3] = {b[0], b[1], b[2]}, dc[3] = {c[0], c[1], c[2]}, x[3];
        m_cross(da, db, x);
        v += m_dot(x, dc);
    }
    return v / 6.0;
}
static double tet_volume(const pbd_mesh *m, int t) {
    const int *i = m->tets + 4 * t;
    double a[3], b[3], c[3], x[3];
    m_sub(m->positions + 3 * i[1], m->positions + 3 * i[0], a);
    m_sub(m->positions + 3 * i[2], m->positions + 3 * i[0], b);
    m_sub(m->positions + 3 * i[3], m->positions + 3 * i[0], c);
    m_cross(a, b, x);
    return m_dot(x, c) / 6.0;
}
static int indices_in_range(const int *idx, int n, int vertex_count) {
    for (int i = 0; i < n; ++i)
        if (idx[i] < 0 || idx[i] >= vertex_count) return 0;
    return 1;
}

/* Directed edge statistics of a triangle list: `max_use` is the largest
   number of triangles sharing an (undirected) edge, `dup_directed` counts
   directed edges used twice (inconsistent orientation), `unmatched` counts
   directed edges whose reverse does not exist (boundary). */
typedef struct edge_stats {
    int max_use, dup_directed, unmatched, degenerate;
} edge_stats;
static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}
static int count_key(const long long *sorted, int n, long long key) {
    int lo = 0, hi = n; /* first >= key */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (sorted[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    int c = 0;
    while (lo + c < n && sorted[lo + c] == key) ++c;
    return c;
}
static edge_stats triangle_edges(const int *tris, int nt, int nv) {
    edge_stats st = {0, 0, 0, 0};
    int ne = 3 * nt;
    long long *dir = (long long *)malloc(sizeof(long long) * (ne ? ne : 1));
    long long *und = (long long *)malloc(sizeof(long long) * (ne ? ne : 1));
    for (int t = 0; t < nt; ++t)
        for (int k = 0; k < 3; ++k) {
            long long a = tris[3 * t + k], b = tris[3 * t + (k + 1) % 3];
            if (a == b) st.degenerate++;
            dir[3 * t + k] = a * nv + b;
            und[3 * t + k] = a < b ? a * nv + b : b * nv + a;
        }
    qsort(dir, ne, sizeof *dir, cmp_ll);
    qsort(und, ne, sizeof *und, cmp_ll);
    for (int i = 0; i < ne;) {
        int j = i;
        while (j < ne && und[j] == und[i]) ++j;
        if (j - i > st.max_use) st.max_use = j - i;
        i = j;
    }
    for (int i = 0; i < ne; ++i) {
        if (i + 1 < ne && dir[i + 1] == dir[i]) st.dup_directed++;
        long long a = dir[i] / nv, b = dir[i] % nv;
        if (count_key(dir, ne, b * nv + a) == 0) st.unmatched++;
    }
    free(dir);
    free(und);
    return st;
}

/* ---- grid ----------------------------------------------------------------------- */
TEST(mesh_grid_counts_positions_orientation) {
    const int sizes[][2] = {{2, 2}, {3, 2}, {2, 5}, {7, 4}, {16, 16}};
    float o[3] = {0.5f, -1.0f, 2.0f}, u[3] = {2.0f, 0.0f, 0.5f}, v[3] = {0.25f, 0.0f, -3.0f};
    double uv[3], du[3] = {u[0], u[1], u[2]}, dv[3] = {v[0], v[1], v[2]};
    m_cross(du, dv, uv);
    double uvlen = sqrt(m_dot(uv, uv));
    for (unsigned c = 0; c < sizeof sizes / sizeof sizes[0]; ++c) {
        int nx = sizes[c][0], ny = sizes[c][1];
        pbd_mesh m;
        memset(&m, 0, sizeof m);
        CHECK_OK(pbd_mesh_grid(nx, ny, o, u, v, &m));
        if (!m.positions || !m.triangles) {
            CHECK(0);
            continue;
        }
        CHECK(m.vertex_count == nx * ny);
        CHECK(m.triangle_count == 2 * (nx - 1) * (ny - 1));
        CHECK(m.tet_count == 0);
        CHECK(indices_in_range(m.triangles, 3 * m.triangle_count, m.vertex_count));
        /* vertex j*nx + i at origin + u i/(nx-1) + v j/(ny-1) */
        for (int j = 0; j < ny; ++j)
            for (int i = 0; i < nx; ++i)
                for (int k = 0; k < 3; ++k) {
                    double want = o[k] + u[k] * (double)i / (nx - 1) + v[k] * (double)j / (ny - 1);
                    CHECK_NEAR(m.positions[3 * (j * nx + i) + k], want, 1e-6 * (1 + fabs(want)));
                }
        /* every triangle faces +(u x v) with the area of half a cell */
        double cell = uvlen / ((nx - 1) * (ny - 1)), total = 0;
        int flipped = 0, bad_area = 0;
        for (int t = 0; t < m.triangle_count; ++t) {
            double n[3];
            tri_normal(&m, t, n);
            double along = m_dot(n, uv) / uvlen;
            if (along <= 0) flipped++;
            if (fabs(along / 2 - cell / 2) > 1e-5 * cell) bad_area++;
            total += along / 2;
        }
        CHECK_MSG(flipped == 0, "%dx%d grid: %d triangles face -(u x v)", nx, ny, flipped);
        CHECK_MSG(bad_area == 0, "%dx%d grid: %d triangles are not half a cell", nx, ny, bad_area);
        CHECK_NEAR(total, uvlen, 1e-5 * uvlen);
        /* a manifold sheet: edges shared by at most 2, consistently oriented,
           boundary = perimeter */
        edge_stats st = triangle_edges(m.triangles, m.triangle_count, m.vertex_count);
        CHECK(st.max_use <= 2);
        CHECK(st.dup_directed == 0);
        CHECK(st.degenerate == 0);
        CHECK_MSG(st.unmatched == 2 * (nx - 1) + 2 * (ny - 1), "%dx%d grid: %d boundary edges", nx, ny, st.unmatched);
        /* alternating diagonals: both diagonal directions occur on larger grids */
        if (nx >= 3 && ny >= 3) {
            int d0 = 0, d1 = 0;
            for (int t = 0; t < m.triangle_count; ++t)
                for (int k = 0; k < 3; ++k) {
                    int a = m.triangles[3 * t + k], b = m.triangles[3 * t + (k + 1) % 3];
                    int ai = a % nx, aj = a / nx, bi = b % nx, bj = b / nx;
                    if (ai != bi && aj != bj) {
                        if ((bi - ai) * (bj - aj) > 0) d0++;
                        else d1++;
                    }
                }
            CHECK_MSG(d0 > 0 && d1 > 0, "%dx%d grid: diagonals do not alternate (%d / %d)", nx, ny, d0, d1);
        }
        pbd_mesh_free(&m);
    }
}

/* ---- tetrahedral box ----------------------------------------------------------- */
static int cmp_int3(const void *a, const void *b) {
    const int *x = (const int *)a, *y = (const int *)b;
    for (int k = 0; k < 3; ++k)
        if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
    return 0;
}
static void sort3(int *f) {
    int t;
    if (f[0] > f[1]) {
        t = f[0];
        f[0] = f[1];
        f[1] = t;
    }
    if (f[1] > f[2]) {
        t = f[1];
        f[1] = f[2];
        f[2] = t;
    }
    if (f[0] > f[1]) {
        t = f[0];
        f[0] = f[1];
        f[1] = t;
    }
}

TEST(mesh_tet_box_counts_volumes_surface) {
    const int sizes[][3] = {{2, 2, 2}, {3, 2, 2}, {4, 3, 5}, {5, 5, 5}};
    float lo[3] = {-1.0f, 0.0f, 2.0f}, hi[3] = {1.0f, 0.5f, 3.5f};
    double box = (double)(hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    for (unsigned c = 0; c < sizeof sizes / sizeof sizes[0]; ++c) {
        int nx = sizes[c][0], ny = sizes[c][1], nz = sizes[c][2];
        int cells = (nx - 1) * (ny - 1) * (nz - 1);
        pbd_mesh m;
        memset(&m, 0, sizeof m);
        CHECK_OK(pbd_mesh_tet_box(nx, ny, nz, lo, hi, &m));
        if (!m.positions || !m.tets || !m.triangles) {
            CHECK(0);
            continue;
        }
        CHECK(m.vertex_count == nx * ny * nz);
        CHECK(m.tet_count == 5 * cells);
        int quads = (nx - 1) * (ny - 1) + (ny - 1) * (nz - 1) + (nx - 1) * (nz - 1);
        CHECK_MSG(m.triangle_count == 4 * quads, "%dx%dx%d: %d surface triangles, want %d", nx, ny, nz,
                  m.triangle_count, 4 * quads);
        CHECK(indices_in_range(m.tets, 4 * m.tet_count, m.vertex_count));
        CHECK(indices_in_range(m.triangles, 3 * m.triangle_count, m.vertex_count));
        /* vertices: the lattice points, each exactly once */
        int *seen = (int *)calloc((size_t)m.vertex_count, sizeof(int));
        int off_lattice = 0;
        for (int i = 0; i < m.vertex_count; ++i) {
            int cell_idx[3], n3[3] = {nx, ny, nz};
            for (int k = 0; k < 3; ++k) {
                double f = (m.positions[3 * i + k] - lo[k]) / (hi[k] - lo[k]) * (n3[k] - 1);
                cell_idx[k] = (int)floor(f + 0.5);
                if (fabs(f - cell_idx[k]) > 1e-5 || cell_idx[k] < 0 || cell_idx[k] >= n3[k]) off_lattice++;
            }
            if (cell_idx[0] >= 0 && cell_idx[0] < nx && cell_idx[1] >= 0 && cell_idx[1] < ny && cell_idx[2] >= 0 &&
                cell_idx[2] < nz)
                seen[(cell_idx[2] * ny + cell_idx[1]) * nx + cell_idx[0]]++;
        }
        int missing = 0;
        for (int i = 0; i < m.vertex_count; ++i) missing += seen[i] != 1;
        free(seen);
        CHECK_MSG(off_lattice == 0 && missing == 0,
                  "%dx%dx%d: %d vertices off the lattice, %d lattice points not hit once", nx, ny, nz, off_lattice,
                  missing);
        /* tets: positive, sum to the box */
        double vol = 0, cellv = box / cells;
        int nonpos = 0;
        for (int t = 0; t < m.tet_count; ++t) {
            double tv = tet_volume(&m, t);
            if (!(tv > 1e-3 * cellv)) nonpos++;
            vol += tv;
        }
        CHECK_MSG(nonpos == 0, "%dx%dx%d: %d tets without positive volume", nx, ny, nz, nonpos);
        CHECK_NEAR(vol, box, 1e-4 * box);
        /* conforming: every tet face is shared by at most two tets, and the
           faces used once are exactly the surface triangles */
        int nf = 4 * m.tet_count;
        int *faces = (int *)malloc(sizeof(int) * 3 * nf);
        static const int fo[4][3] = {{0, 1, 2}, {0, 1, 3}, {0, 2, 3}, {1, 2, 3}};
        for (int t = 0; t < m.tet_count; ++t)
            for (int f = 0; f < 4; ++f) {
                int *d = faces + 3 * (4 * t + f);
                for (int k = 0; k < 3; ++k) d[k] = m.tets[4 * t + fo[f][k]];
                sort3(d);
            }
        qsort(faces, nf, 3 * sizeof(int), cmp_int3);
        int *bfaces = (int *)malloc(sizeof(int) * 3 * (nf ? nf : 1));
        int nb = 0, overused = 0;
        for (int i = 0; i < nf;) {
            int j = i;
            while (j < nf && cmp_int3(faces + 3 * i, faces + 3 * j) == 0) ++j;
            if (j - i > 2) overused++;
            if (j - i == 1) {
                memcpy(bfaces + 3 * nb, faces + 3 * i, 3 * sizeof(int));
                nb++;
            }
            i = j;
        }
        CHECK_MSG(overused == 0, "%dx%dx%d: %d faces shared by more than two tets", nx, ny, nz, overused);
        int *sfaces = (int *)malloc(sizeof(int) * 3 * (m.triangle_count ? m.triangle_count : 1));
        for (int t = 0; t < m.triangle_count; ++t) {
            memcpy(sfaces + 3 * t, m.triangles + 3 * t, 3 * sizeof(int));
            sort3(sfaces + 3 * t);
        }
        qsort(sfaces, m.triangle_count, 3 * sizeof(int), cmp_int3);
        CHECK_MSG(nb == m.triangle_count && memcmp(bfaces, sfaces, sizeof(int) * 3 * nb) == 0,
                  "%dx%dx%d: the surface triangles are not the boundary faces of the tets (%d vs %d)", nx, ny, nz,
                  m.triangle_count, nb);
        free(faces);
        free(bfaces);
        free(sfaces);
        /* surface: closed, consistently oriented, outward, encloses the box */
        edge_stats st = triangle_edges(m.triangles, m.triangle_count, m.vertex_count);
        CHECK(st.dup_directed == 0 && st.unmatched == 0 && st.max_use == 2 && st.degenerate == 0);
        CHECK_NEAR(surface_volume(&m), box, 1e-4 * box);
        pbd_mesh_free(&m);
    }
}

/* ---- sphere --------------------------------------------------------------------- */
TEST(mesh_sphere_closed_on_radius) {
    float centre[3] = {1.0f, -2.0f, 0.5f};
    float r = 0.75f;
    double exact = 4.0 / 3.0 * PBDT_PI * r * r * r, prev_err = 1e30;
    for (int s = 0; s <= 5; ++s) {
        pbd_mesh m;
        memset(&m, 0, sizeof m);
        CHECK_OK(pbd_mesh_sphere(s, centre, r, &m));
        if (!m.positions || !m.triangles) {
            CHECK(0);
            continue;
        }
        int nt = 20 << (2 * s);
        CHECK(m.triangle_count == nt);
        CHECK(m.vertex_count == nt / 2 + 2); /* Euler: V - E + F = 2 */
        CHECK(m.tet_count == 0);
        CHECK(indices_in_range(m.triangles, 3 * m.triangle_count, m.vertex_count));
        int off = 0;
        for (int i = 0; i < m.vertex_count; ++i) {
            double d[3];
            m_sub(m.positions + 3 * i, centre, d);
            if (fabs(sqrt(m_dot(d, d)) - r) > 1e-6 * r * 4) off++;
        }
        CHECK_MSG(off == 0, "subdivisions %d: %d vertices off the radius", s, off);
        edge_stats st = triangle_edges(m.triangles, m.triangle_count, m.vertex_count);
        CHECK_MSG(st.dup_directed == 0 && st.unmatched == 0 && st.max_use == 2 && st.degenerate == 0,
                  "subdivisions %d: not closed (dup %d, unmatched %d, max use %d)", s, st.dup_directed, st.unmatched,
                  st.max_use);
        /* outward: every normal points away from the centre */
        int inward = 0;
        for (int t = 0; t < m.triangle_count; ++t) {
            double n[3], c[3] = {0, 0, 0};
            tri_normal(&m, t, n);
            for (int k = 0; k < 3; ++k)
                for (int j = 0; j < 3; ++j) c[j] += (m.positions[3 * m.triangles[3 * t + k] + j] - centre[j]) / 3.0;
            if (m_dot(n, c) <= 0) inward++;
        }
        CHECK_MSG(inward == 0, "subdivisions %d: %d triangles face inward", s, inward);
        double v = surface_volume(&m), err = (exact - v) / exact;
        CHECK_MSG(v > 0 && v < exact, "subdivisions %d: volume %g, sphere %g", s, v, exact);
        /* the inscribed polyhedron converges quadratically in the edge length */
        if (s > 0) CHECK_MSG(err < 0.35 * prev_err, "subdivisions %d: volume error %g after %g", s, err, prev_err);
        prev_err = err;
        if (s == 0) CHECK_NEAR(v / exact, 0.60546, 1e-4); /* the icosahedron */
        if (s == 5) CHECK_MSG(err < 1e-3, "5 subdivisions: relative volume error %g", err);
        pbd_mesh_free(&m);
    }
}

/* ---- bad arguments ---------------------------------------------------------------- */
TEST(mesh_bad_arguments) {
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1}, lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1};
    float nan3[3] = {0, NAN, 0}, inf3[3] = {INFINITY, 0, 0};
    pbd_mesh m;
    memset(&m, 0, sizeof m);
    /* grid */
    CHECK_RESULT(pbd_mesh_grid(1, 4, o, u, v, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_grid(4, 1, o, u, v, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_grid(0, 4, o, u, v, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_grid(-3, 4, o, u, v, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_grid(4, 4, o, u, v, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_grid(4, 4, NULL, u, v, &m), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_grid(4, 4, o, NULL, v, &m), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_grid(4, 4, o, u, NULL, &m), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_grid(4, 4, nan3, u, v, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_grid(4, 4, o, inf3, v, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_grid(4, 4, o, u, nan3, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_grid(70000, 70000, o, u, v, &m), PBD_ERROR_OVERFLOW);
    CHECK_RESULT(pbd_mesh_grid(INT_MAX, 3, o, u, v, &m), PBD_ERROR_OVERFLOW);
    /* tet box */
    CHECK_RESULT(pbd_mesh_tet_box(1, 2, 2, lo, hi, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 0, lo, hi, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 2, lo, hi, NULL), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 2, NULL, hi, &m), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 2, lo, NULL, &m), PBD_ERROR_NULL_POINTER);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 2, nan3, hi, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 2, lo, inf3, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_tet_box(2000, 2000, 2000, lo, hi, &m), PBD_ERROR_OVERFLOW);
    { /* an empty box (lo == hi in one axis) has no positive-volume tets */
        float flat_hi[3] = {1, 0, 1};
        pbd_result r = pbd_mesh_tet_box(2, 2, 2, lo, flat_hi, &m);
        CHECK_MSG(r == PBD_ERROR_DEGENERATE || r == PBD_ERROR_INVALID_ARGUMENT, "flat box returned %s",
                  pbd_result_string(r));
        if (r == PBD_OK) pbd_mesh_free(&m);
    }
    /* sphere */
    { /* the header does not say which of the two a radius <= 0 is */
        const float radii[2] = {0.0f, -1.0f};
        for (int i = 0; i < 2; ++i) {
            pbd_result r = pbd_mesh_sphere(1, o, radii[i], &m);
            CHECK_MSG(r == PBD_ERROR_INVALID_ARGUMENT || r == PBD_ERROR_DEGENERATE, "radius %g returned %s", radii[i],
                      pbd_result_string(r));
            if (r == PBD_OK) pbd_mesh_free(&m);
        }
    }
    CHECK_RESULT(pbd_mesh_sphere(1, o, NAN, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_sphere(1, o, INFINITY, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_sphere(1, nan3, 1.0f, &m), PBD_ERROR_NOT_FINITE);
    CHECK_RESULT(pbd_mesh_sphere(-1, o, 1.0f, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_sphere(8, o, 1.0f, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK_RESULT(pbd_mesh_sphere(1, o, 1.0f, NULL), PBD_ERROR_NULL_POINTER);
    /* the biggest allowed sphere is fine (20 * 4^7 triangles) */
    CHECK_OK(pbd_mesh_sphere(7, o, 1.0f, &m));
    CHECK(m.triangle_count == 20 * 16384);
    pbd_mesh_free(&m);
    /* each failure says why in pbd_last_error(), naming the generator */
    CHECK_RESULT(pbd_mesh_grid(1, 4, o, u, v, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_last_error(), "pbd_mesh_grid: 1 x 4 vertices") != NULL);
    CHECK_RESULT(pbd_mesh_grid(4, 4, o, u, u, &m), PBD_ERROR_DEGENERATE);
    CHECK(strstr(pbd_last_error(), "parallel") != NULL);
    CHECK_RESULT(pbd_mesh_tet_box(2, 2, 2, hi, lo, &m), PBD_ERROR_DEGENERATE);
    CHECK(strstr(pbd_last_error(), "pbd_mesh_tet_box") != NULL);
    CHECK_RESULT(pbd_mesh_sphere(8, o, 1.0f, &m), PBD_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(pbd_last_error(), "subdivisions 8") != NULL);
    CHECK(pbdt_message_reads_as_words(pbd_last_error()));
}

/* a failed call leaves `out` alone (nothing to free, no stale pointers) */
TEST(mesh_failure_leaves_out_usable) {
    float o[3] = {0, 0, 0}, u[3] = {1, 0, 0}, v[3] = {0, 0, 1};
    pbd_mesh m;
    CHECK_OK(pbd_mesh_grid(3, 3, o, u, v, &m));
    pbd_mesh keep = m;
    CHECK(pbd_mesh_grid(1, 3, o, u, v, &m) != PBD_OK);
    /* either untouched or emptied; never half-filled */
    int untouched = memcmp(&keep, &m, sizeof m) == 0;
    int emptied = m.positions == NULL && m.triangles == NULL && m.tets == NULL && m.vertex_count == 0 &&
                  m.triangle_count == 0 && m.tet_count == 0;
    CHECK(untouched || emptied);
    pbd_mesh_free(&keep);
    pbd_mesh z;
    memset(&z, 0, sizeof z);
    pbd_mesh_free(&z); /* freeing an empty mesh is harmless */
}

void suite_meshes(void) {
    RUN(mesh_grid_counts_positions_orientation);
    RUN(mesh_tet_box_counts_volumes_surface);
    RUN(mesh_sphere_closed_on_radius);
    RUN(mesh_bad_arguments);
    RUN(mesh_failure_leaves_out_usable);
}
