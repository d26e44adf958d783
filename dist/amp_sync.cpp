// agree_on_overflow: the GradScaler's found-inf reducer as an all-reduce (max).
#include "dist/amp_sync.h"

namespace hg::dist {

void agree_on_overflow(amp::GradScaler& scaler, std::shared_ptr<ProcessGroup> group) {
  scaler.set_found_inf_reducer([group](Tensor& found_inf) {
    (group ? *group : *group_for(found_inf.device())).all_reduce(found_inf, ReduceOp::max);
  });
}

}  // namespace hg::dist
