// Drives DRAMsim3 with an address trace as a saturating front end: every request is offered
// as soon as the controller accepts it (as npusim's DMA offers a descriptor's bursts), and the
// run ends when the last one completes. Prints: requests, cycles to the last completion, tCK
// (ns), the mean latency (cycles from acceptance to completion), and the stats JSON path.
// Trace lines: "<hex address> R|W". Built by benchmarks/dram_validation.py; not a dependency.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <unordered_map>
#include <vector>
#include "memory_system.h"

int main(int argc, char **argv) {
    if (argc < 4) { std::cerr << "usage: driver config.ini trace.txt outdir\n"; return 2; }
    std::vector<std::pair<uint64_t, bool>> reqs;
    std::ifstream in(argv[2]);
    std::string a, k;
    while (in >> a >> k) reqs.emplace_back(std::stoull(a, nullptr, 16), k == "W");
    std::unordered_multimap<uint64_t, uint64_t> issued;  // address -> acceptance cycle
    uint64_t clk = 0, done = 0, last = 0;
    double lat = 0.0;
    auto cb = [&](uint64_t addr) {
        auto it = issued.find(addr);
        if (it != issued.end()) { lat += double(clk - it->second); issued.erase(it); }
        ++done; last = clk;
    };
    dramsim3::MemorySystem *m = dramsim3::GetMemorySystem(argv[1], argv[3], cb, cb);
    size_t next = 0;
    while (done < reqs.size()) {
        while (next < reqs.size() && m->WillAcceptTransaction(reqs[next].first, reqs[next].second)) {
            m->AddTransaction(reqs[next].first, reqs[next].second);
            issued.emplace(reqs[next].first, clk);
            ++next;
        }
        m->ClockTick();
        ++clk;
        if (clk > 4000000000ULL) break;
    }
    m->PrintStats();
    std::printf("%zu %llu %.6f %.6f\n", reqs.size(), (unsigned long long)last, m->GetTCK(),
                lat / double(reqs.size()));
    delete m;
    return 0;
}
