#include "llama-grammar.h"
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
static std::vector<uint32_t> cpts(const std::string & s) {
    std::vector<uint32_t> out; size_t i = 0;
    while (i < s.size()) {
        unsigned char c = s[i]; uint32_t cp; int n;
        if (c < 0x80) { cp = c; n = 1; } else if ((c >> 5) == 6) { cp = c & 0x1F; n = 2; } else if ((c >> 4) == 14) { cp = c & 0x0F; n = 3; } else { cp = c & 0x07; n = 4; }
        for (int k = 1; k < n && i + k < s.size(); k++) cp = (cp << 6) | (s[i+k] & 0x3F);
        out.push_back(cp); i += n;
    }
    return out;
}
int main(int argc, char ** argv) {
    std::ifstream gf(argv[1]); std::stringstream b; b << gf.rdbuf(); std::string g = b.str();
    std::ifstream inf(argv[2]); std::string line;
    // inputs: hex-encoded, one per line
    while (std::getline(inf, line)) {
        std::string s;
        for (size_t i = 0; i + 1 < line.size(); i += 2) s.push_back((char) std::stoi(line.substr(i, 2), nullptr, 16));
        llama_grammar * gr = llama_grammar_init_impl(nullptr, g.c_str(), "root", false, nullptr, 0, nullptr, 0);
        if (!gr) { printf("PARSEFAIL\n"); return 0; }
        auto & stacks = llama_grammar_get_stacks(gr);
        bool ok = true;
        for (auto cp : cpts(s)) { llama_grammar_accept(gr, cp); if (stacks.empty()) { ok = false; break; } }
        if (ok) { ok = false; for (auto & st : stacks) if (st.empty()) ok = true; }
        printf("%d\n", ok ? 1 : 0);
        llama_grammar_free_impl(gr);
    }
}
