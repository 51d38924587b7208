// emu_check.cpp: runs every stencilCore version, the layout kernels, BLAS-1 and the
// multi-pass reductions of kernels/*.cu on the CPU through cuda_emu.h, with the same
// launch geometry as src/cuda (stencil.rs, backend.rs), and compares with the oracle
// written by `cargo run --example emu_dump`. Prints one line per check; exit 1 on failure.
#include "emu_util.h"

extern "C" {
void build_seed_links(const double2*, double2*, int, int, int, int, int, int);
void build_move_table(int*, int, int, int, int, int);
void reorder_links_v16(const double2*, double2*, int);
void stencil_v1_0(const double2*, double2*, const double2*, const int*, double, int, int);
#define FINE(name) void name(const double2*, double2*, const double2*, const int*, double, int, int, int, int, int, int, int);
FINE(stencil_fine_v11) FINE(stencil_fine_v13) FINE(stencil_fine_v14) FINE(stencil_fine_v15) FINE(stencil_fine_v16)
FINE(stencil_fine_v161)
void xgemm34x44(const double2*, double2*, int, int, int, int, int, int);
void xgemm33x34(const double2*, const double2*, double2*, int, int, int);
void dslash_combine(const double2*, const double2*, double2*, double, int, int);
void xscal(double2*, double, double, int);
void xaxpy(const double2*, double2*, double, double, int);
void norm2_partial(const double2*, int, double*, double*, unsigned*, double*);
void dot_partial(const double2*, const double2*, int, double2*, double2*, unsigned*, double2*);
}
extern double2 c_li[128];
extern double2 c_li_v11[128];

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: emu_check DUMP\n");
        return 2;
    }
    report_width = 44;
    std::ifstream in(argv[1], std::ios::binary);
    const DumpHeader hd = read_header(in, "QCDEMU01", "an emu dump");
    const double kappa = hd.kappa;
    const int lx = hd.l[0], ly = hd.l[1], lz = hd.l[2], lt = hd.l[3];
    const int V = lx * ly * lz * lt;
    std::vector<double2> li(128), canon((size_t)V * 36), psi((size_t)V * 12), refd((size_t)V * 12),
        refg((size_t)V * 12);
    in.read((char*)li.data(), 128 * 16);
    in.read((char*)canon.data(), canon.size() * 16);
    in.read((char*)psi.data(), psi.size() * 16);
    in.read((char*)refd.data(), refd.size() * 16);
    in.read((char*)refg.data(), refg.size() * 16);
    double n2, dre, dim;
    in.read((char*)&n2, 8);
    in.read((char*)&dre, 8);
    in.read((char*)&dim, 8);
    if (!in) {
        std::fprintf(stderr, "short dump\n");
        return 2;
    }
    std::printf("lattice %dx%dx%dx%d (V = %d), kappa %g\n", lx, ly, lz, lt, V, kappa);
    for (int k = 0; k < 128; ++k)
        c_li[k] = c_li_v11[k] = li[k];

    const int mask = hd.mask;

    // Set-up layouts.
    std::vector<double2> seed((size_t)V * 72);
    emu_launch(blocks((size_t)V * 72, 256), 256, 0, false,
               [&] { build_seed_links(canon.data(), seed.data(), V, lx, ly, lz, lt, mask); });
    std::vector<int> move((size_t)V * 8);
    emu_launch(blocks((size_t)V * 8, 256), 256, 0, false,
               [&] { build_move_table(move.data(), V, lx, ly, lz, lt); });
    const int padded = (V + 1) / 2 * 2;
    std::vector<double2> reordered((size_t)padded * 72, double2{0, 0});
    emu_launch(blocks(padded, 32), 256, 0, true, [&] { reorder_links_v16(seed.data(), reordered.data(), V); });

    std::vector<double2> out((size_t)V * 12);
    auto check_op = [&](const std::string& name, auto run) {
        for (int g5 = 0; g5 < 2; ++g5) {
            std::fill(out.begin(), out.end(), double2{NAN, NAN});
            run(g5);
            report(name + (g5 ? " g5D" : " D"), rel_diff(out, g5 ? refg : refd), 1e-13);
        }
    };

    check_op("1.0 coarse", [&](int g5) {
        emu_launch(blocks(V, 256), 256, 0, false,
                   [&] { stencil_v1_0(psi.data(), out.data(), seed.data(), move.data(), kappa, g5, V); });
    });

    struct Fine {
        const char* name;
        void (*k)(const double2*, double2*, const double2*, const int*, double, int, int, int, int, int, int, int);
        int tmp1, in_shared, reordered;
    };
    const Fine fines[] = {
        {"1.2", stencil_fine_v11, 1, 0, 0}, {"1.3", stencil_fine_v13, 1, 0, 0},
        {"1.4", stencil_fine_v14, 1, 0, 0}, {"1.5", stencil_fine_v15, 2, 0, 0},
        {"1.6", stencil_fine_v16, 2, 1, 1}, {"1.6.1", stencil_fine_v161, 2, 0, 1},
    };
    // 1.1: one site per block of 16 threads.
    check_op("1.1 (16 threads, 1 site)", [&](int g5) {
        emu_launch(V, 16, 24 * 16, true, [&] {
            stencil_fine_v11(psi.data(), out.data(), seed.data(), move.data(), kappa, g5, V, lx, ly, lz, lt, 1);
        });
    });
    for (const Fine& f : fines) {
        for (int multiple : {1, 5, 16}) {
            const size_t complex = (size_t)multiple * 12 * (f.tmp1 + 1) + (f.in_shared ? 4 * (multiple / 2 + 1) * 36 : 0);
            const double2* links = f.reordered ? reordered.data() : seed.data();
            check_op(std::string(f.name) + " multiple " + std::to_string(multiple), [&](int g5) {
                emu_launch(blocks(V, multiple), 12 * multiple, complex * 16, true, [&] {
                    f.k(psi.data(), out.data(), links, move.data(), kappa, g5, V, lx, ly, lz, lt, multiple);
                });
            });
        }
    }

    // 2.0: 8 x (xgemm34x44, xgemm33x34), then the combine.
    check_op("2.0 split (multiple 16)", [&](int g5) {
        std::vector<double2> tmp1((size_t)V * 12), tmp2((size_t)V * 12, double2{NAN, NAN});
        const size_t n = (size_t)V * 12;
        for (int h = 0; h < 8; ++h) {
            emu_launch(blocks(n, 192), 192, 0, false,
                       [&] { xgemm34x44(psi.data(), tmp1.data(), h, V, lx, ly, lz, lt); });
            emu_launch(blocks(n, 192), 192, 0, false,
                       [&] { xgemm33x34(seed.data(), tmp1.data(), tmp2.data(), h, h > 0, V); });
        }
        emu_launch(blocks(n, 256), 256, 0, false,
                   [&] { dslash_combine(psi.data(), tmp2.data(), out.data(), kappa, g5, (int)n); });
    });

    // 3.0 (parity-major layout, every mode and precision): run_v3eo.sh / emu_v3eo.cpp.

    // BLAS-1: y = a y; y = y + b x.
    {
        const int n = V * 12;
        std::vector<double2> y = refd, want(n);
        const double ar = 0.3, ai = -1.7, br = -0.25, bi = 0.5;
        for (int k = 0; k < n; ++k) {
            const double2 s = {ar * y[k].x - ai * y[k].y, ar * y[k].y + ai * y[k].x};
            want[k] = {s.x + br * psi[k].x - bi * psi[k].y, s.y + br * psi[k].y + bi * psi[k].x};
        }
        emu_launch(blocks(n, 256), 256, 0, false, [&] { xscal(y.data(), ar, ai, n); });
        emu_launch(blocks(n, 256), 256, 0, false, [&] { xaxpy(psi.data(), y.data(), br, bi, n); });
        report("xscal + xaxpy", rel_diff(y, want), 1e-15);
    }

    // Reductions in one launch, as CudaBackend::norm2 / dot do them (kernels/reduce.cu):
    // the first pass into partial[block], then the blocks climb the summing tree (a
    // ticket per group of each level, the levels above the first in `upper`); the tickets
    // must be back to zero afterwards. On a lattice of several blocks (n > 512), so that
    // the climb runs.
    {
        const int n = V * 12;
        const int blocks0 = (n + 511) / 512;
        std::vector<double> partial(blocks0), upper(blocks0 + 8);
        std::vector<unsigned> tickets(blocks0 + 8, 0);
        double n2_gpu = NAN;
        emu_launch(blocks0, 256, 0, true,
                   [&] { norm2_partial(psi.data(), n, partial.data(), upper.data(), tickets.data(), &n2_gpu); });
        report("norm2 (" + std::to_string(blocks0) + " first-pass blocks) vs CPU", std::fabs(n2_gpu - n2) / n2, 1e-13);
        unsigned left = 0;
        for (unsigned t : tickets)
            left += t;
        report("norm2: tickets back to 0", left, 0);

        std::vector<double2> p2(blocks0), u2(blocks0 + 8);
        std::fill(tickets.begin(), tickets.end(), 0u);
        double2 d_gpu = {NAN, NAN};
        emu_launch(blocks0, 256, 0, true,
                   [&] { dot_partial(psi.data(), refd.data(), n, p2.data(), u2.data(), tickets.data(), &d_gpu); });
        const double dd = std::hypot(d_gpu.x - dre, d_gpu.y - dim) / std::hypot(dre, dim);
        report("dot vs CPU", dd, 1e-13);
    }

    std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "all checks passed", failures);
    return failures ? 1 : 0;
}
