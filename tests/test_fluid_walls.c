/* tests/test_fluid_walls.c - the colliders' density in a fluid (density
   maps, Koschier and Bender 2017, analytic for W_poly6 over the tangent
   half space): the closed form equals the kernel integrated numerically,
   its derivative is the gradient, and every collider kind (plane, box,
   sphere, capsule, triangle mesh, SDF grid) adds the same density to a
   particle at the same distance from a flat face. Uses the private
   implementation (tests/private.h). */
#include "private.h"

/* int over the half space beyond a plane at distance s of W_poly6(r, h),
   by the midpoint rule in cylinder coordinates (z along the normal). */
static double phi_numeric(double s, double h) {
    const int N = 400;
    double c6 = 315.0 / (64.0 * 3.14159265358979 * pow(h, 9)), sum = 0;
    double z0 = s > -h ? s : -h, dz = (h - z0) / N;
    for (int i = 0; i < N; ++i) {
        double z = z0 + (i + 0.5) * dz, R = sqrt(h * h - z * z), dr = R / N;
        for (int j = 0; j < N; ++j) {
            double r = (j + 0.5) * dr, u = h * h - z * z - r * r;
            sum += c6 * u * u * u * 2.0 * 3.14159265358979 * r * dr * dz;
        }
    }
    return sum;
}

TEST(fluid_wall_density_is_the_kernel_integral) {
    const float h = 0.1f;
    float worst = 0, worst_grad = 0;
    for (int k = -10; k <= 10; ++k) {
        float s = 0.1f * (float)k * h, dphi, dm, dp;
        float phi = pbd__wall_phi(s, h, &dphi);
        float e = fabsf(phi - (float)phi_numeric(s, h));
        worst = e > worst ? e : worst;
        float ds = 1e-3f * h, fm = pbd__wall_phi(s - ds, h, &dm), fp = pbd__wall_phi(s + ds, h, &dp);
        float g = fabsf((fp - fm) / (2 * ds) - dphi) * h; /* dPhi/dt */
        worst_grad = g > worst_grad ? g : worst_grad;
    }
    CHECK_MSG(worst < 2e-4f, "Phi off the numeric integral by %g", (double)worst);
    CHECK_MSG(worst_grad < 2e-3f, "Phi' off the difference quotient by %g (per unit t)", (double)worst_grad);
    float d;
    CHECK(pbd__wall_phi(-1.5f * h, h, &d) == 1.0f && d == 0.0f); /* deep inside: the whole kernel */
    CHECK(pbd__wall_phi(1.0f * h, h, &d) == 0.0f && d == 0.0f);  /* beyond h: nothing */
    CHECK(fabsf(pbd__wall_phi(0, h, &d) - 0.5f) < 1e-6f);        /* on the surface: half */
}

/* One fluid particle at distance s below a flat face of each collider
   kind (facing -y at y = 0 in the world): its density is its own
   m W(0) plus rho_0 Phi(s + shift) of the face, the same for every kind;
   a sphere and a capsule are big (radius 50 h) so their face is nearly
   flat. */
static float density_near(int kind, float s) {
    pbd_world *w = pbdt_world(0.0f);
    const float R = 5.0f, up[3] = {0, -1, 0}, o[3] = {0, 0, 0};
    static const float V[8][3] = {{-1, 0, -1}, {1, 0, -1}, {1, 2, -1}, {-1, 2, -1},
                                  {-1, 0, 1},  {1, 0, 1},  {1, 2, 1},  {-1, 2, 1}};
    static const int T[12][3] = {{0, 2, 1}, {0, 3, 2}, {4, 5, 6}, {4, 6, 7}, {0, 1, 5}, {0, 5, 4},
                                 {3, 6, 2}, {3, 7, 6}, {0, 4, 7}, {0, 7, 3}, {1, 2, 6}, {1, 6, 5}};
    if (kind == 0) CHECK_OK(pbd_add_collider_plane(w, o, up, 0, NULL));
    if (kind == 1) {
        float c[3] = {0, 1, 0}, he[3] = {1, 1, 1};
        CHECK_OK(pbd_add_collider_box(w, c, he, NULL, 0, NULL));
    }
    if (kind == 2) {
        float c[3] = {0, R, 0};
        CHECK_OK(pbd_add_collider_sphere(w, c, R, 0, NULL));
    }
    if (kind == 3) {
        float a[3] = {-1, R, 0}, b[3] = {1, R, 0};
        CHECK_OK(pbd_add_collider_capsule(w, a, b, R, 0, NULL));
    }
    if (kind >= 4) {
        pbd_mesh_collider_desc md = pbd_mesh_collider_desc_default();
        md.positions = &V[0][0];
        md.vertex_count = 8;
        md.triangles = &T[0][0];
        md.triangle_count = 12;
        md.sdf_resolution = kind == 5 ? 8 : 0;
        CHECK_OK(pbd_add_collider_mesh(w, &md, NULL));
    }
    float p[3] = {0, -s, 0};
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = 1;
    pbd_fluid f;
    CHECK_OK(pbd_add_fluid(w, &fd, &f, NULL));
    float rho = 0;
    int one = 0;
    CHECK_OK(pbd_fluid_densities(w, f, &rho, 1, &one));
    pbd_world_destroy(w);
    return rho;
}

TEST(fluid_every_collider_kind_adds_its_density) {
    pbd_world *w = pbdt_world(0.0f);
    float p[3] = {0, 0, 0};
    pbd_fluid_desc fd = pbd_fluid_desc_default();
    fd.positions = p;
    fd.count = 1;
    pbd_fluid f;
    CHECK_OK(pbd_add_fluid(w, &fd, &f, NULL));
    float alone = 0;
    int one = 0;
    CHECK_OK(pbd_fluid_densities(w, f, &alone, 1, &one));
    pbd__kern k = w->pp.fluids[0].kern;
    float rho0 = w->pp.fluids[0].rest_density;
    pbd_world_destroy(w);
    const char *names[6] = {"plane", "box", "sphere", "capsule", "mesh", "sdf grid"};
    const float ss[3] = {0.25f, 0.5f, 0.8f}; /* fractions of h */
    for (int i = 0; i < 3; ++i) {
        float s = ss[i] * k.h, dphi;
        float want = alone + rho0 * pbd__wall_phi(s + k.wall_shift, k.h, &dphi) * k.inv_rho0;
        for (int kind = 0; kind < 6; ++kind) {
            float got = density_near(kind, s);
            /* the sphere and capsule curve away by s^2 / 2R over the kernel; the grid is trilinear */
            float tol = kind == 2 || kind == 3 ? 5e-3f : kind == 5 ? 2e-3f : 1e-5f;
            CHECK_MSG(fabsf(got - want) < tol * want, "%s at s = %.2f h: density %.5f, want %.5f", names[kind],
                      (double)ss[i], (double)got, (double)want);
        }
    }
    CHECK(density_near(0, 1.5f * k.h) == alone); /* beyond the kernel: nothing */
}

void suite_fluid_walls(void) {
    RUN(fluid_wall_density_is_the_kernel_integral);
    RUN(fluid_every_collider_kind_adds_its_density);
}
