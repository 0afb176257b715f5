// weft-fabric-check — a vendor-neutral fabric validator, run on every rank of
// a job (weft-run -n N weft-fabric-check, or any PMIx launcher). It checks
// every ordered pair of ranks through weft's public API (checks.cpp), and
// rank 0 judges the results (report.cpp), prints the summary, writes the
// JSON report and the SVG heat map (heatmap.cpp), and exits 1 naming the
// bad pairs when anything failed. docs/tools/weft-fabric-check.md.
#include "fabric_check.hpp"

int main(int argc, char** argv) {
    fabric::Options opt;
    std::string error;
    switch (fabric::parse_options(argc, argv, opt, error)) {
        case fabric::ParseOutcome::help:
            fabric::usage(stdout);
            return 0;
        case fabric::ParseOutcome::bad:
            std::fprintf(stderr, "weft-fabric-check: %s (--help for usage)\n", error.c_str());
            return 2;
        case fabric::ParseOutcome::run:
            break;
    }
    fabric::Report rep;
    uint32_t rank = 0;
    if (int rc = fabric::run_checks(opt, rep, rank); rc != 0) return rc;
    if (rank != 0) return 0;  // rank 0 judges and reports
    const fabric::Verdict verdict = fabric::judge(opt, rep);
    fabric::print_summary(stdout, opt, rep, verdict);
    std::fflush(stdout);
    bool written = true;
    if (!opt.json_path.empty()) written = fabric::write_json(opt.json_path, opt, rep, verdict) && written;
    if (!opt.heatmap_path.empty()) written = fabric::write_heatmap(opt.heatmap_path, rep, verdict) && written;
    if (!verdict.pass)
        for (const std::string& f : verdict.failures) std::fprintf(stderr, "weft-fabric-check: FAIL %s\n", f.c_str());
    return verdict.pass && written ? 0 : 1;
}
