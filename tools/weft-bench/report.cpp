// report.cpp — the table, JSON, CSV and SVG writers of report.hpp. The SVG
// is drawn here (no plotting package): two log-log panels, median latency
// against size and bandwidth against size, one line per operation; a PNG is
// that SVG converted by rsvg-convert.
#include "report.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace weft_bench {

namespace {

// The base and ratio columns: whenever a comparison was asked for, so that
// a baseline that could not run shows as n/a rather than vanishing.
bool has_compare(const Header& h, const std::vector<Row>& rows) {
    return !h.compare.empty() || std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.base_us > 0; });
}

// One number as every writer prints it.
std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return b;
}

// A row's base or ratio: "n/a" (JSON: null) where no baseline ran for it.
std::string base_num(const Row& r, double v, const char* none = "n/a") { return r.base_us > 0 ? num(v) : none; }

std::string json_string(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        if (static_cast<unsigned char>(c) < 0x20) continue;
        o += c;
    }
    return o + "\"";
}

std::FILE* open_or_say(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) std::fprintf(stderr, "weft-bench: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return f;
}

bool close_or_say(std::FILE* f, const std::string& path) {
    const bool ok = !std::ferror(f);
    if (std::fclose(f) != 0 || !ok) {
        std::fprintf(stderr, "weft-bench: writing %s failed\n", path.c_str());
        return false;
    }
    return true;
}

std::string size_label(double bytes) {
    char b[16];
    if (bytes >= 1 << 20)
        std::snprintf(b, sizeof b, "%gM", bytes / (1 << 20));
    else if (bytes >= 1 << 10)
        std::snprintf(b, sizeof b, "%gK", bytes / (1 << 10));
    else
        std::snprintf(b, sizeof b, "%g", bytes);
    return b;
}

// One log-log panel at (x0, y0), w x h, of series name -> (x, y) points.
void svg_panel(std::FILE* f, double x0, double y0, double w, double h, const char* title, const char* ylabel,
               const std::map<std::string, std::vector<std::pair<double, double>>>& series) {
    static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                   "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
    double xmin = 1e300, xmax = 0, ymin = 1e300, ymax = 0;
    for (const auto& [name, pts] : series)
        for (const auto& [x, y] : pts) {
            xmin = std::min(xmin, x), xmax = std::max(xmax, x);
            ymin = std::min(ymin, y), ymax = std::max(ymax, y);
        }
    std::fprintf(f, "<text x='%.0f' y='%.0f' font-size='15' text-anchor='middle'>%s</text>\n", x0 + w / 2, y0 - 12,
                 title);
    std::fprintf(f, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='#444'/>\n", x0, y0, w, h);
    if (series.empty() || xmax <= 0 || ymax <= 0) {
        std::fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle'>no rows</text>\n", x0 + w / 2, y0 + h / 2);
        return;
    }
    // Decades on y, powers of 4 on x; a single point still gets a range.
    const double lx0 = std::floor(std::log2(xmin)), lx1 = std::max(lx0 + 1, std::ceil(std::log2(xmax)));
    const double ly0 = std::floor(std::log10(ymin)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(ymax)));
    auto px = [&](double x) { return x0 + (std::log2(x) - lx0) / (lx1 - lx0) * w; };
    auto py = [&](double y) { return y0 + h - (std::log10(y) - ly0) / (ly1 - ly0) * h; };
    for (double e = lx0; e <= lx1; e += 2) {
        const double x = std::pow(2.0, e);
        std::fprintf(f,
                     "<line x1='%.1f' y1='%.0f' x2='%.1f' y2='%.0f' stroke='#ddd'/><text x='%.1f' y='%.0f' "
                     "font-size='11' text-anchor='middle'>%s</text>\n",
                     px(x), y0, px(x), y0 + h, px(x), y0 + h + 15, size_label(x).c_str());
    }
    for (double e = ly0; e <= ly1; e += 1) {
        const double y = std::pow(10.0, e);
        std::fprintf(f,
                     "<line x1='%.0f' y1='%.1f' x2='%.0f' y2='%.1f' stroke='#ddd'/><text x='%.0f' y='%.1f' "
                     "font-size='11' text-anchor='end'>%g</text>\n",
                     x0, py(y), x0 + w, py(y), x0 - 4, py(y) + 4, y);
    }
    std::fprintf(f, "<text x='%.0f' y='%.0f' font-size='12' text-anchor='middle'>message size (bytes)</text>\n",
                 x0 + w / 2, y0 + h + 32);
    std::fprintf(
        f, "<text x='%.0f' y='%.0f' font-size='12' text-anchor='middle' transform='rotate(-90 %.0f %.0f)'>%s</text>\n",
        x0 - 45, y0 + h / 2, x0 - 45, y0 + h / 2, ylabel);
    size_t i = 0;
    for (const auto& [name, pts] : series) {
        const char* c = colors[i % (sizeof colors / sizeof *colors)];
        std::fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", c);
        for (const auto& [x, y] : pts) std::fprintf(f, "%.1f,%.1f ", px(x), py(y));
        std::fprintf(f, "'/>\n");
        for (const auto& [x, y] : pts)
            std::fprintf(f, "<circle cx='%.1f' cy='%.1f' r='2.5' fill='%s'/>\n", px(x), py(y), c);
        std::fprintf(f, "<text x='%.0f' y='%.0f' font-size='12' fill='%s'>%s</text>\n", x0 + 8,
                     y0 + 16 + 15 * double(i), c, name.c_str());
        ++i;
    }
}

}  // namespace

void write_table(std::FILE* out, const Header& h, const std::vector<Row>& rows) {
    std::fprintf(
        out, "# weft-bench: transport %s, %u rank(s), %llu iterations (warm-up %llu), window %llu, sizes %llu:%llu B\n",
        h.transport.c_str(), h.ranks, static_cast<unsigned long long>(h.iterations),
        static_cast<unsigned long long>(h.warmup), static_cast<unsigned long long>(h.window),
        static_cast<unsigned long long>(h.min_size), static_cast<unsigned long long>(h.max_size));
    std::fprintf(out, "# cpu binding (sched_getaffinity):");
    for (size_t r = 0; r < h.cpu_binding.size(); ++r)
        std::fprintf(out, "%s rank %zu: %s", r ? "," : "", r, h.cpu_binding[r].c_str());
    std::fprintf(out, "\n");
    std::fprintf(out,
                 "# latency in us; unit: half = half a round trip (perftest write/send), full = a full round trip "
                 "(read/atomic), op = per operation of a window, call = per call (statistics over all ranks' samples), "
                 "round = one drain observation round, event = from a kill to a survivor's notice\n");
    if (!h.compare.empty()) std::fprintf(out, "# compare: %s\n", h.compare.c_str());
    const bool cmp = has_compare(h, rows);
    std::fprintf(out, "%-15s %-5s %8s %5s %9s %10s %10s %10s %10s %10s %10s %10s %8s", "op", "unit", "bytes", "ranks",
                 "iters", "min", "median", "mean", "p99", "p99.9", "max", "MB/s", "Mmsg/s");
    if (cmp) std::fprintf(out, " %10s %7s", "base", "ratio");
    std::fprintf(out, "\n");
    for (const Row& r : rows) {
        std::fprintf(out, "%-15s %-5s %8llu %5u %9llu %10s %10s %10s %10s %10s %10s %10s %8s", r.op.c_str(),
                     r.unit.c_str(), static_cast<unsigned long long>(r.bytes), r.ranks,
                     static_cast<unsigned long long>(r.iters), num(r.min_us).c_str(), num(r.median_us).c_str(),
                     num(r.mean_us).c_str(), num(r.p99_us).c_str(), num(r.p999_us).c_str(), num(r.max_us).c_str(),
                     num(r.mb_s).c_str(), num(r.mmsg_s).c_str());
        if (cmp) std::fprintf(out, " %10s %7s", base_num(r, r.base_us).c_str(), base_num(r, r.ratio).c_str());
        std::fprintf(out, "\n");
    }
}

bool write_json(const std::string& path, const Header& h, const std::vector<Row>& rows) {
    std::FILE* f = open_or_say(path);
    if (!f) return false;
    std::fprintf(f, "{\n  \"tool\": \"weft-bench\",\n  \"transport\": %s,\n  \"ranks\": %u,\n",
                 json_string(h.transport).c_str(), h.ranks);
    std::fprintf(f, "  \"iterations\": %llu,\n  \"warmup\": %llu,\n  \"window\": %llu,\n",
                 static_cast<unsigned long long>(h.iterations), static_cast<unsigned long long>(h.warmup),
                 static_cast<unsigned long long>(h.window));
    std::fprintf(f, "  \"min_size\": %llu,\n  \"max_size\": %llu,\n  \"compare\": %s,\n  \"cpu_binding\": [",
                 static_cast<unsigned long long>(h.min_size), static_cast<unsigned long long>(h.max_size),
                 json_string(h.compare).c_str());
    for (size_t r = 0; r < h.cpu_binding.size(); ++r)
        std::fprintf(f, "%s%s", r ? ", " : "", json_string(h.cpu_binding[r]).c_str());
    std::fprintf(f, "],\n  \"rows\": [\n");
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        std::fprintf(f,
                     "    {\"op\": %s, \"unit\": %s, \"bytes\": %llu, \"ranks\": %u, \"iters\": %llu, \"min_us\": %s, "
                     "\"median_us\": %s, \"mean_us\": %s, \"p99_us\": %s, \"p999_us\": %s, \"max_us\": %s, "
                     "\"mb_s\": %s, \"mmsg_s\": %s",
                     json_string(r.op).c_str(), json_string(r.unit).c_str(), static_cast<unsigned long long>(r.bytes),
                     r.ranks, static_cast<unsigned long long>(r.iters), num(r.min_us).c_str(), num(r.median_us).c_str(),
                     num(r.mean_us).c_str(), num(r.p99_us).c_str(), num(r.p999_us).c_str(), num(r.max_us).c_str(),
                     num(r.mb_s).c_str(), num(r.mmsg_s).c_str());
        if (has_compare(h, rows))
            std::fprintf(f, ", \"base_us\": %s, \"ratio\": %s", base_num(r, r.base_us, "null").c_str(),
                         base_num(r, r.ratio, "null").c_str());
        std::fprintf(f, "}%s\n", i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "  ]\n}\n");
    return close_or_say(f, path);
}

bool write_csv(const std::string& path, const Header& h, const std::vector<Row>& rows) {
    std::FILE* f = open_or_say(path);
    if (!f) return false;
    // The CSV always has the columns: without --compare they hold 0.000.
    const char* none = has_compare(h, rows) ? "n/a" : "0.000";
    std::fprintf(f,
                 "transport,op,unit,bytes,ranks,iters,min_us,median_us,mean_us,p99_us,p999_us,max_us,mb_s,mmsg_s,"
                 "base_us,ratio\n");
    for (const Row& r : rows)
        std::fprintf(f, "%s,%s,%s,%llu,%u,%llu,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", h.transport.c_str(), r.op.c_str(),
                     r.unit.c_str(), static_cast<unsigned long long>(r.bytes), r.ranks,
                     static_cast<unsigned long long>(r.iters), num(r.min_us).c_str(), num(r.median_us).c_str(),
                     num(r.mean_us).c_str(), num(r.p99_us).c_str(), num(r.p999_us).c_str(), num(r.max_us).c_str(),
                     num(r.mb_s).c_str(), num(r.mmsg_s).c_str(), base_num(r, r.base_us, none).c_str(),
                     base_num(r, r.ratio, none).c_str());
    return close_or_say(f, path);
}

bool write_svg(const std::string& path, const Header& h, const std::vector<Row>& rows) {
    // Latency: every row with a size (not barrier, comm, group, drain) and a
    // latency unit; bandwidth: the rows that measured MB/s.
    std::map<std::string, std::vector<std::pair<double, double>>> latency, bandwidth;
    for (const Row& r : rows) {
        if (r.bytes == 0) continue;
        if (r.mb_s > 0)
            bandwidth[r.op].emplace_back(double(r.bytes), r.mb_s);
        else if (r.median_us > 0)
            latency[r.op + " (" + r.unit + ")"].emplace_back(double(r.bytes), r.median_us);
    }
    std::FILE* f = open_or_say(path);
    if (!f) return false;
    std::fprintf(
        f,
        "<svg xmlns='http://www.w3.org/2000/svg' width='1100' height='470' font-family='sans-serif'>\n"
        "<rect width='1100' height='470' fill='white'/>\n"
        "<text x='550' y='22' font-size='16' text-anchor='middle'>weft-bench: transport %s, %u rank(s)</text>\n",
        h.transport.c_str(), h.ranks);
    svg_panel(f, 80, 70, 420, 330, "median latency vs size", "latency (us)", latency);
    svg_panel(f, 640, 70, 420, 330, "bandwidth vs size", "bandwidth (MB/s)", bandwidth);
    std::fprintf(f, "</svg>\n");
    return close_or_say(f, path);
}

bool write_png(const std::string& path, const Header& h, const std::vector<Row>& rows) {
    const std::string svg = path + ".svg";
    if (!write_svg(svg, h, rows)) return false;
    const char* argv[] = {"rsvg-convert", svg.c_str(), "-o", path.c_str(), nullptr};
    pid_t pid = -1;
    int status = 0;
    const bool ok =
        posix_spawnp(&pid, "rsvg-convert", nullptr, nullptr, const_cast<char* const*>(argv), environ) == 0 &&
        waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::remove(svg.c_str());
    if (!ok) std::fprintf(stderr, "weft-bench: rsvg-convert could not write %s\n", path.c_str());
    return ok;
}

}  // namespace weft_bench
