// The batch API's registry (cuFileBatchIOSetUp ... Destroy live in batch.cpp).
#pragma once

namespace sluice::capi {

/// Cancels and destroys every batch; for cuFileDriverClose. Waits for running entries.
void destroy_all_batches();

}  // namespace sluice::capi
