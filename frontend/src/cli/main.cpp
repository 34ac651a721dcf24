// The `kiln` command-line tool.
#include <cstring>
#include <iostream>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "demo") != 0) {
    std::cerr << "usage: kiln demo\n";
    return 2;
  }
  kiln::Tensor x = kiln::arange(6).reshape({2, 3}).to(kiln::kFloat32);
  std::cout << x << "\n";
  return 0;
}
