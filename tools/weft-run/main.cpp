// weft-run — the embedded launcher for one machine (see launcher.hpp).
#include "tools/weft-run/launcher.hpp"

int main(int argc, char** argv) {
    weft::run::Options opt;
    if (!weft::run::parse_options(argc, argv, opt)) return 2;
    if (opt.help) {
        weft::run::usage(stdout);
        return 0;
    }
    return weft::run::run(opt);
}
