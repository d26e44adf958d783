// Tour step 5 (docs/amp.md): the autocast policy, printed from amp/precision_table.cpp
// (the same table tests/amp/test_precision_table.cpp checks each op against).
#include <cstdio>

#include "halfgrad.h"

int main() {
  std::printf("%s", hg::amp::precision_table_markdown().c_str());
  return 0;
}
