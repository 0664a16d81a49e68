// Drives Ramulator 2 with an address trace as a saturating front end, like
// benchmarks/dram/dramsim3_driver.cc: every request is offered as soon as the controller accepts
// it, and the run ends when the last one completes. Prints the stats (YAML), a line "tx_bytes: N"
// (the bytes of one request, the device's access: get_tx_bytes), then a line: requests, cycles to
// the last completion, tCK (ns; one cycle is one tick of the controller), mean read latency
// (cycles from acceptance to data). Trace lines: "<hex address> R|W". Config: a YAML file from `python -m ramulator export`.
// Built by benchmarks/dram_validation.py; not a dependency.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "ramulator/base/config.h"
#include "ramulator/base/factory.h"
#include "ramulator/frontend/i_frontend.h"
#include "ramulator/memory_system/i_memory_system.h"

using namespace Ramulator;

int main(int argc, char **argv) {
    if (argc < 3) { std::cerr << "usage: driver config.yaml trace.txt\n"; return 2; }
    std::vector<std::pair<int64_t, bool>> reqs;
    std::ifstream in(argv[2]);
    std::string a, k;
    while (in >> a >> k) reqs.emplace_back((int64_t)std::stoull(a, nullptr, 16), k == "W");
    ConfigNode cfg = Config::parse_config_file(argv[1]);
    IFrontEnd *fe = Factory::create_frontend(cfg);
    IMemorySystem *ms = Factory::create_memory_system(cfg);
    fe->connect_memory_system(ms);
    ms->connect_frontend(fe);
    std::vector<uint64_t> accepted(reqs.size(), 0);
    uint64_t clk = 0, done = 0, last = 0, reads = 0;
    double lat = 0.0;
    size_t next = 0;
    while (done < reqs.size()) {
        while (next < reqs.size()) {
            size_t i = next;
            bool write = reqs[i].second;
            Request req(reqs[i].first, write ? Request::Type::Write : Request::Type::Read, 0,
                        [&, i, write](Request &) {
                            if (!write) { lat += double(clk - accepted[i]); ++reads; }
                            ++done;
                            last = clk;
                        });
            req.size_bytes = ms->get_tx_bytes();
            if (!ms->send(req)) break;
            accepted[i] = clk;
            ++next;
        }
        ms->tick();
        ++clk;
        if (clk > 4000000000ULL) break;
    }
    ms->update_stats_recursive();
    ms->print_stats(std::cout);
    std::printf("tx_bytes: %d\n", ms->get_tx_bytes());
    std::printf("%zu %llu %.6f %.6f\n", reqs.size(), (unsigned long long)last, ms->get_tCK(),
                reads ? lat / double(reads) : 0.0);
    return 0;
}
