// Tour step 5 (docs/amp.md): the autocast policy, printed from amp/precision_table.cpp
// (the same table tests/amp/test_precision_table.cpp checks each op against), and what
// casts give for values their target cannot hold.
#include <cstdio>

#include "halfgrad.h"

int main() {
  std::printf("%s", hg::amp::precision_table_markdown().c_str());
  std::printf("\nWhat a cast (`to`, `copy_`) gives where the target cannot hold the value:\n\n%s",
              hg::amp::cast_table_markdown().c_str());
  return 0;
}
