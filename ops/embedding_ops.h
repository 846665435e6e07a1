#ifndef DTENSOR_OPS_EMBEDDING_OPS_H_
#define DTENSOR_OPS_EMBEDDING_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops/op_def.h"

namespace dtensor {
namespace ops {

// Embedding lookups into a table that may be sharded (by rows: vocab
// parallel), with the tensor layer's semantics
// (dtensor/tensor/nn_functional.h), on DTensors.
// Errors: what Embedding reports (an index out of range, shapes, dtypes),
// inputs on different meshes.
//
// embedding (indices, table [num, dim]) -> [indices..., dim]:
//   indices sharded on any dim    -> the output sharded on that dim;
//   table S(1) (columns)          -> S(last);
//   table S(0) (rows), indices R  -> Partial(sum), no communication: each rank
//                                    looks up the indices inside its row
//                                    block (offset by the block's start) and
//                                    gives zero rows for the others;
//   table Partial(any op), indices R -> the same Partial.
//
// embedding_backward (indices, grad [indices..., dim], table [num, dim]) ->
// [num, dim], embedding's table gradient as one scatter-add pass
// (dtensor/tensor/nn_functional.h EmbeddingBackward), what embedding's backward
// runs. The table gives only its shape and sharding (no data of it moves): each
// strategy prices the table sharded as the gradient it gives (Replicate where
// that is Partial), so the gradient comes out in the table's sharding where the
// indices and grad allow:
//   indices and grad sharded alike on an index dim -> Partial(sum);
//   grad S(last)                  -> S(1);
//   indices and grad R            -> S(0): each rank adds only the rows of its
//                                    block (a row-sharded table);
//   grad Partial(sum or avg), indices R -> the same Partial.
//
// Registry names and arguments: embedding (indices, table);
// embedding_backward (indices, grad, table).

absl::StatusOr<DTensor> Embedding(const DTensor& indices, const DTensor& table);
// The gradient of `table` for which Embedding(indices, table) gave `grad`
// (the table's values are not read, and no data of it moves:
// OpDef::spec_only_inputs). Errors: an index outside the table's rows.
absl::StatusOr<DTensor> EmbeddingBackward(const DTensor& indices,
                                          const DTensor& grad,
                                          const DTensor& table);

// The OpDefs of this family, for the registry.
std::vector<const OpDef*> EmbeddingOps();

}  // namespace ops
}  // namespace dtensor

#endif  // DTENSOR_OPS_EMBEDDING_OPS_H_
