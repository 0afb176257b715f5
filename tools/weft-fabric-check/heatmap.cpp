// heatmap.cpp — the latency and bandwidth matrices as one SVG picture, side
// by side (rows: origin, columns: target). Colours run from blue (best) over
// yellow to red (worst), scaled to each matrix's own min..max; flagged
// outliers are outlined in black, failed pairs are grey with an X, the
// diagonal is blank. Written by hand: no plotting dependency.
#include "fabric_check.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace fabric {

namespace {

// t in [0, 1]: 0 = best (blue), 0.5 = yellow, 1 = worst (red).
std::string colour(double t) {
    struct Rgb {
        double r, g, b;
    };
    const Rgb best{44, 123, 182}, mid{255, 255, 191}, worst{215, 25, 28};
    t = std::clamp(t, 0.0, 1.0);
    const Rgb& a = t < 0.5 ? best : mid;
    const Rgb& b = t < 0.5 ? mid : worst;
    const double u = t < 0.5 ? t * 2 : (t - 0.5) * 2;
    char buf[16];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", int(a.r + (b.r - a.r) * u), int(a.g + (b.g - a.g) * u),
                  int(a.b + (b.b - a.b) * u));
    return buf;
}

struct Panel {
    const char* title;
    const char* unit;
    bool higher_is_better;
    const std::vector<int>* flags;
};

void draw_panel(std::FILE* f, const Report& rep, const Panel& panel, double x0, double y0, int cell) {
    const uint32_t n = rep.size;
    const std::vector<uint32_t>& ranks = rep.pair_ranks;  // drawn in this order
    const uint32_t m = uint32_t(ranks.size());
    auto value = [&](uint32_t o, uint32_t t) {
        const PairResult& p = rep.pairs[size_t(o) * n + t];
        return panel.higher_is_better ? p.bw_gbs : p.lat_us;
    };
    auto usable = [&](uint32_t o, uint32_t t) {
        const PairResult& p = rep.pairs[size_t(o) * n + t];
        return o != t && p.measured && p.status == WEFT_OK && p.connected;
    };
    double lo = 0, hi = 0;
    bool any = false;
    for (uint32_t o : ranks)
        for (uint32_t t : ranks)
            if (usable(o, t)) {
                const double x = value(o, t);
                lo = any ? std::min(lo, x) : x;
                hi = any ? std::max(hi, x) : x;
                any = true;
            }
    const int digits = 3;
    std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"16\" font-weight=\"bold\">%s (%s)</text>\n", x0, y0 - 34,
                 panel.title, panel.unit);
    std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">target &#8594;</text>\n", x0 + m * cell / 2.0 - 20,
                 y0 - 18);
    std::fprintf(
        f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" transform=\"rotate(-90 %.0f %.0f)\">origin &#8594;</text>\n",
        x0 - 30, y0 + m * cell / 2.0 + 20, x0 - 30, y0 + m * cell / 2.0 + 20);
    for (uint32_t i = 0; i < m; ++i) {
        std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"middle\">%u</text>\n",
                     x0 + i * cell + cell / 2.0, y0 - 4, ranks[i]);
        std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">%u</text>\n", x0 - 4,
                     y0 + i * cell + cell / 2.0 + 4, ranks[i]);
    }
    for (uint32_t row = 0; row < m; ++row)
        for (uint32_t col = 0; col < m; ++col) {
            const uint32_t o = ranks[row], t = ranks[col];
            const double x = x0 + col * cell, y = y0 + row * cell;
            if (o == t) {
                std::fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#f0f0f0\"/>\n", x, y,
                             cell, cell);
                continue;
            }
            if (!usable(o, t)) {
                std::fprintf(
                    f,
                    "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"#808080\" stroke=\"white\"/>"
                    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\" fill=\"white\">X</text>\n",
                    x, y, cell, cell, x + cell / 2.0, y + cell / 2.0 + 4);
                continue;
            }
            const double v = value(o, t);
            double scaled = hi > lo ? (v - lo) / (hi - lo) : 0;
            if (panel.higher_is_better) scaled = 1 - scaled;
            const bool flagged = (*panel.flags)[size_t(o) * n + t];
            std::fprintf(f,
                         "<rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"%s\" "
                         "stroke-width=\"%d\"><title>%u-&gt;%u: %.*f %s%s</title></rect>\n",
                         x, y, cell, cell, colour(scaled).c_str(), flagged ? "black" : "white", flagged ? 3 : 1, o, t,
                         digits, v, panel.unit, flagged ? " (flagged)" : "");
            if (cell >= 40)
                std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\" text-anchor=\"middle\">%.*f</text>\n",
                             x + cell / 2.0, y + cell / 2.0 + 3, digits, v);
        }
    // Legend: the colour scale with its ends.
    const double ly = y0 + m * cell + 16;
    for (int i = 0; i < 20; ++i)
        std::fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.1f\" height=\"10\" fill=\"%s\"/>\n",
                     x0 + i * m * cell / 20.0, ly, m * cell / 20.0 + 0.5,
                     colour(panel.higher_is_better ? 1 - i / 19.0 : i / 19.0).c_str());
    std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">%.*f</text>\n", x0, ly + 24, digits, lo);
    std::fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\" text-anchor=\"end\">%.*f %s</text>\n", x0 + m * cell,
                 ly + 24, digits, hi, panel.unit);
}

}  // namespace

bool write_heatmap(const std::string& path, const Report& rep, const Verdict& v) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "weft-fabric-check: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return false;
    }
    const uint32_t n = std::max<uint32_t>(uint32_t(rep.pair_ranks.size()), 1);
    const int cell = int(std::clamp<uint32_t>(480 / n, 8, 56));
    // Each panel gets at least 300 px so that its title fits, however few the ranks.
    const double margin = 60, panel_w = double(n) * cell, span = std::max(panel_w, 300.0);
    const double width = 2 * span + 3 * margin, height = panel_w + 150;
    std::fprintf(f,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "font-family=\"sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                 width, height);
    std::fprintf(f,
                 "<text x=\"%.0f\" y=\"20\" font-size=\"13\">weft-fabric-check: %u ranks, transport %s; "
                 "outlined: flagged outlier; X: failed; %s</text>\n",
                 margin, rep.size, rep.transport.c_str(), v.pass ? "verdict PASS" : "verdict FAIL");
    draw_panel(f, rep, Panel{"latency, 8-byte get", "us", false, &v.lat_flag}, margin, 80, cell);
    draw_panel(f, rep, Panel{"bandwidth, put+flush", "GB/s", true, &v.bw_flag}, 2 * margin + span, 80, cell);
    std::fprintf(f, "</svg>\n");
    return close_output(f, path);
}

}  // namespace fabric
