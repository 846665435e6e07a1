// Views against an independent model: random chains of view ops over random
// shapes (size-0 and size-1 dims included, non-contiguous inputs arising
// along the way), checked element by element against index loops in
// reference_tensor.h, plus aliasing: writes through a view show in the base.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dtensor/tensor/tensor.h"
#include "gtest/gtest.h"
#include "tests/tensor/reference_tensor.h"

namespace dtensor {
namespace {

using testing::Generate;
using testing::RefAt;
using testing::RefTensor;
using testing::UnravelIndex;

// Checks shape and every element of `tensor` (by At and by ToVector).
void ExpectMatches(const Tensor& tensor, const RefTensor& ref,
                   const std::string& context) {
  ASSERT_EQ(tensor.shape(), ref.shape) << context;
  ASSERT_EQ(tensor.strides().size(), ref.shape.size()) << context;
  for (int64_t flat = 0; flat < ref.numel(); ++flat) {
    const std::vector<int64_t> index = UnravelIndex(flat, ref.shape);
    ASSERT_EQ(tensor.At(index), ref.values[flat])
        << context << " at " << ShapeToString(index);
  }
  EXPECT_EQ(tensor.ToVector<double>().value(), ref.values) << context;
}

// ---- Reference view ops: explicit index maps. ----

RefTensor RefNarrow(const RefTensor& in, int64_t dim, int64_t start,
                    int64_t length) {
  Shape shape = in.shape;
  shape[dim] = length;
  return Generate(shape, [&](std::vector<int64_t> index) {
    index[dim] += start;
    return RefAt(in, index);
  });
}

RefTensor RefTake(const RefTensor& in, int64_t dim,
                  const std::vector<int64_t>& positions) {
  Shape shape = in.shape;
  shape[dim] = static_cast<int64_t>(positions.size());
  return Generate(shape, [&](std::vector<int64_t> index) {
    index[dim] = positions[index[dim]];
    return RefAt(in, index);
  });
}

RefTensor RefSelect(const RefTensor& in, int64_t dim, int64_t position) {
  Shape shape = in.shape;
  shape.erase(shape.begin() + dim);
  return Generate(shape, [&](std::vector<int64_t> index) {
    index.insert(index.begin() + dim, position);
    return RefAt(in, index);
  });
}

// out[i_0, ..., i_n] = in[j] with j[perm[k]] = i_k.
RefTensor RefPermute(const RefTensor& in, const std::vector<int64_t>& perm) {
  Shape shape(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) shape[k] = in.shape[perm[k]];
  return Generate(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) source[perm[k]] = index[k];
    return RefAt(in, source);
  });
}

RefTensor RefExpand(const RefTensor& in, const Shape& shape) {
  const size_t leading = shape.size() - in.shape.size();
  return Generate(shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> source(in.shape.size());
    for (size_t k = 0; k < source.size(); ++k) {
      source[k] = in.shape[k] == 1 ? 0 : index[leading + k];
    }
    return RefAt(in, source);
  });
}

RefTensor RefReshape(const RefTensor& in, const Shape& shape) {
  return RefTensor{shape, in.values};
}

// The positions Python's range(start, stop, step) slicing picks from n items.
std::vector<int64_t> PythonSlice(int64_t n, int64_t start, int64_t stop,
                                 int64_t step) {
  auto clamp = [n](int64_t i) {
    if (i < 0) i += n;
    return std::min(std::max<int64_t>(i, 0), n);
  };
  std::vector<int64_t> positions;
  for (int64_t i = clamp(start); i < clamp(stop); i += step) {
    positions.push_back(i);
  }
  return positions;
}

// Whether some strides give the elements of `tensor` (row-major) when read as
// `shape`: true iff the map from a row-major index of `shape` to the storage
// position is affine. Brute force over every element.
bool Viewable(const Tensor& tensor, const Shape& shape) {
  int64_t numel = 1;
  for (int64_t size : shape) numel *= size;
  if (numel == 0) return true;
  std::vector<int64_t> positions;
  for (int64_t flat = 0; flat < numel; ++flat) {
    const std::vector<int64_t> index = UnravelIndex(flat, tensor.shape());
    int64_t position = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      position += index[d] * tensor.strides()[d];
    }
    positions.push_back(position);
  }
  // The candidate stride of a dim is the step to the next index along it.
  std::vector<int64_t> strides(shape.size(), 0);
  int64_t unit = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] > 1) strides[d] = positions[unit] - positions[0];
    unit *= shape[d];
  }
  for (int64_t flat = 0; flat < numel; ++flat) {
    const std::vector<int64_t> index = UnravelIndex(flat, shape);
    int64_t position = positions[0];
    for (size_t d = 0; d < index.size(); ++d) position += index[d] * strides[d];
    if (position != positions[flat]) return false;
  }
  return true;
}

// ---- Random parameters. ----

class RandomChain {
 public:
  explicit RandomChain(uint32_t seed) : rng_(seed) {}

  int64_t Uniform(int64_t low, int64_t high) {  // Inclusive.
    return std::uniform_int_distribution<int64_t>(low, high)(rng_);
  }
  bool Coin() { return Uniform(0, 1) == 1; }

  // A dim of a rank-`ndim` tensor, negative half of the time.
  int64_t Dim(int64_t ndim) {
    const int64_t dim = Uniform(0, ndim - 1);
    return Coin() ? dim - ndim : dim;
  }

  Shape RandomShape() {
    Shape shape(Uniform(0, 4));
    for (int64_t& size : shape) size = Uniform(0, 9) == 0 ? 0 : Uniform(1, 4);
    return shape;
  }

  // A random shape with `numel` elements, with one size replaced by -1 at
  // times.
  Shape ShapeWithNumel(int64_t numel, bool allow_infer) {
    Shape shape;
    if (numel == 0) {
      shape = {Uniform(1, 3), 0};
      if (Coin()) shape.push_back(2);
      std::shuffle(shape.begin(), shape.end(), rng_);
      return shape;
    }
    int64_t rest = numel;
    while (rest > 1 && shape.size() < 4) {
      std::vector<int64_t> divisors;
      for (int64_t d = 2; d <= rest; ++d) {
        if (rest % d == 0) divisors.push_back(d);
      }
      const int64_t size = divisors[Uniform(0, divisors.size() - 1)];
      shape.push_back(size);
      rest /= size;
    }
    if (rest > 1) shape.back() *= rest;
    const int64_t ones = Uniform(0, 1);
    for (int64_t i = 0; i < ones; ++i) {
      shape.insert(shape.begin() + Uniform(0, shape.size()), 1);
    }
    if (allow_infer && !shape.empty() && Coin()) {
      shape[Uniform(0, shape.size() - 1)] = -1;
    }
    return shape;
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

Shape Inferred(Shape shape, int64_t numel) {
  int64_t known = 1;
  for (int64_t size : shape) known *= size == -1 ? 1 : size;
  for (int64_t& size : shape) {
    if (size == -1) size = numel / known;
  }
  return shape;
}

// The sizes of torch.split(split_size) pieces of a dim of size n > 0.
std::vector<int64_t> TorchSplitSizes(int64_t n, int64_t split_size) {
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size) {
    sizes.push_back(std::min(split_size, n - start));
  }
  return sizes;
}

// The sizes of torch.chunk pieces of a dim of size n.
std::vector<int64_t> TorchChunkSizes(int64_t n, int64_t chunks) {
  if (n == 0) return std::vector<int64_t>(chunks, 0);
  return TorchSplitSizes(n, (n + chunks - 1) / chunks);
}

// Applies one random view op to `tensor` and `ref` alike; checks the result
// and whether it aliases the input's storage.
void ApplyRandomOp(RandomChain& random, Tensor& tensor, RefTensor& ref,
                   const std::string& context) {
  const int64_t ndim = tensor.dim();
  const int op = static_cast<int>(random.Uniform(0, 12));
  const std::shared_ptr<Storage> storage = tensor.storage();
  bool must_alias = true;
  std::string name;
  Tensor result;
  RefTensor expected;
  if (ndim == 0 && op < 9) {
    name = "Unsqueeze(0)";
    result = *tensor.Unsqueeze(random.Coin() ? 0 : -1);
    expected = RefReshape(ref, {1});
  } else if (op == 0) {
    const int64_t dim = random.Dim(ndim);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    const int64_t size = ref.shape[d];
    const int64_t start = random.Uniform(0, size);
    const int64_t length = random.Uniform(0, size - start);
    const int64_t passed_start =
        start < size && random.Coin() ? start - size : start;
    name = absl::StrCat("Narrow(", dim, ", ", passed_start, ", ", length, ")");
    result = *tensor.Narrow(dim, passed_start, length);
    expected = RefNarrow(ref, d, start, length);
  } else if (op == 1) {
    const int64_t dim = random.Dim(ndim);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    const int64_t size = ref.shape[d];
    const int64_t start = random.Uniform(-size - 2, size + 2);
    const int64_t end = random.Coin() ? std::numeric_limits<int64_t>::max()
                                      : random.Uniform(-size - 2, size + 2);
    const int64_t step = random.Uniform(1, 3);
    name = absl::StrCat("Slice(", dim, ", ", start, ", ", end, ", ", step, ")");
    result = *tensor.Slice(dim, start, end, step);
    expected = RefTake(ref, d, PythonSlice(size, start, end, step));
  } else if (op == 2) {
    const int64_t dim = random.Dim(ndim);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    const int64_t size = ref.shape[d];
    if (size == 0) {
      name = "Squeeze()";
      result = tensor.Squeeze();
      Shape shape;
      for (int64_t s : ref.shape) {
        if (s != 1) shape.push_back(s);
      }
      expected = RefReshape(ref, shape);
    } else {
      const int64_t index = random.Uniform(-size, size - 1);
      name = absl::StrCat("Select(", dim, ", ", index, ")");
      result = *tensor.Select(dim, index);
      expected = RefSelect(ref, d, index < 0 ? index + size : index);
    }
  } else if (op == 3) {
    const int64_t dim0 = random.Dim(ndim);
    const int64_t dim1 = random.Dim(ndim);
    std::vector<int64_t> perm(ndim);
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[dim0 < 0 ? dim0 + ndim : dim0],
              perm[dim1 < 0 ? dim1 + ndim : dim1]);
    name = absl::StrCat("Transpose(", dim0, ", ", dim1, ")");
    result = *tensor.Transpose(dim0, dim1);
    expected = RefPermute(ref, perm);
  } else if (op == 4) {
    std::vector<int64_t> perm(ndim);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), random.rng());
    std::vector<int64_t> passed = perm;
    for (int64_t& d : passed) d = random.Coin() ? d - ndim : d;
    name = absl::StrCat("Permute(", ShapeToString(passed), ")");
    result = *tensor.Permute(passed);
    expected = RefPermute(ref, perm);
  } else if (op == 5) {
    Shape shape, passed;
    if (ndim < 4 && random.Coin()) {
      shape.push_back(random.Uniform(0, 2));
      passed.push_back(shape.back());
    }
    for (int64_t size : ref.shape) {
      const int64_t target =
          size == 1 ? (random.Uniform(0, 9) == 0 ? 0 : random.Uniform(1, 3))
                    : size;
      shape.push_back(target);
      passed.push_back(target == size && random.Coin() ? -1 : target);
    }
    name = absl::StrCat("Expand(", ShapeToString(passed), ")");
    result = *tensor.Expand(passed);
    expected = RefExpand(ref, shape);
  } else if (op == 6) {
    const int64_t dim = random.Dim(ndim);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    Shape shape = ref.shape;
    if (shape[d] == 1) shape.erase(shape.begin() + d);
    name = absl::StrCat("Squeeze(", dim, ")");
    result = *tensor.Squeeze(dim);
    expected = RefReshape(ref, shape);
  } else if (op == 7) {
    const int64_t dim = random.Uniform(-ndim - 1, ndim);
    const int64_t d = dim < 0 ? dim + ndim + 1 : dim;
    Shape shape = ref.shape;
    shape.insert(shape.begin() + d, 1);
    name = absl::StrCat("Unsqueeze(", dim, ")");
    result = *tensor.Unsqueeze(dim);
    expected = RefReshape(ref, shape);
  } else if (op == 8) {
    // A piece of Chunk, ChunkExact or Split.
    const int64_t dim = random.Dim(ndim);
    const int64_t d = dim < 0 ? dim + ndim : dim;
    const int64_t size = ref.shape[d];
    const int64_t chunks = random.Uniform(1, 5);
    std::vector<int64_t> sizes;
    absl::StatusOr<std::vector<Tensor>> pieces;
    const int kind = static_cast<int>(random.Uniform(0, 3));
    if (kind == 0) {
      name = absl::StrCat("Chunk(", chunks, ", ", dim, ")");
      pieces = tensor.Chunk(chunks, dim);
      sizes = TorchChunkSizes(size, chunks);
    } else if (kind == 1) {
      name = absl::StrCat("ChunkExact(", chunks, ", ", dim, ")");
      pieces = tensor.ChunkExact(chunks, dim);
      sizes = TorchChunkSizes(size, chunks);
      sizes.resize(chunks, 0);
    } else if (kind == 2) {
      name = absl::StrCat("Split(", chunks, ", ", dim, ")");
      pieces = tensor.Split(chunks, dim);
      sizes =
          size == 0 ? std::vector<int64_t>{0} : TorchSplitSizes(size, chunks);
    } else {
      int64_t rest = size;
      while (rest > 0 || random.Coin()) {
        sizes.push_back(random.Uniform(0, rest));
        rest -= sizes.back();
        if (sizes.size() > 6) break;
      }
      sizes.push_back(rest);
      name = absl::StrCat("Split(", ShapeToString(sizes), ", ", dim, ")");
      pieces = tensor.Split(sizes, dim);
    }
    ASSERT_TRUE(pieces.ok()) << context << name << ": " << pieces.status();
    ASSERT_EQ(pieces->size(), sizes.size()) << context << name;
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const RefTensor piece = RefNarrow(ref, d, start, sizes[i]);
      ExpectMatches((*pieces)[i], piece, context + name);
      EXPECT_EQ((*pieces)[i].storage(), storage) << context << name;
      start += sizes[i];
    }
    const size_t pick = random.Uniform(0, sizes.size() - 1);
    result = (*pieces)[pick];
    expected = RefNarrow(
        ref, d,
        std::accumulate(sizes.begin(), sizes.begin() + pick, int64_t{0}),
        sizes[pick]);
  } else if (op <= 10) {
    const Shape shape = random.ShapeWithNumel(ref.numel(), true);
    const Shape inferred = Inferred(shape, ref.numel());
    const bool viewable = Viewable(tensor, inferred);
    expected = RefReshape(ref, inferred);
    if (op == 9) {
      name = absl::StrCat("View(", ShapeToString(shape), ")");
      auto view = tensor.View(shape);
      ASSERT_EQ(view.ok(), viewable) << context << name << view.status();
      if (!viewable) {
        EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
        return;
      }
      result = *view;
    } else {
      name = absl::StrCat("Reshape(", ShapeToString(shape), ")");
      result = *tensor.Reshape(shape);
      must_alias = viewable;
      if (!viewable) {
        EXPECT_NE(result.storage(), storage) << context << name;
        EXPECT_TRUE(result.is_contiguous()) << context << name;
      }
    }
  } else if (ndim == 0) {
    name = "Flatten()";
    result = *tensor.Flatten();
    expected = RefReshape(ref, {1});
  } else {
    const int64_t start = random.Dim(ndim);
    const int64_t end = random.Dim(ndim);
    const int64_t s = start < 0 ? start + ndim : start;
    const int64_t e = end < 0 ? end + ndim : end;
    name = absl::StrCat("Flatten(", start, ", ", end, ")");
    if (s > e) {
      EXPECT_FALSE(tensor.Flatten(start, end).ok()) << context << name;
      return;
    }
    Shape shape(ref.shape.begin(), ref.shape.begin() + s);
    int64_t merged = 1;
    for (int64_t d = s; d <= e; ++d) merged *= ref.shape[d];
    shape.push_back(merged);
    shape.insert(shape.end(), ref.shape.begin() + e + 1, ref.shape.end());
    const bool viewable = Viewable(tensor, shape);
    result = *tensor.Flatten(start, end);
    expected = RefReshape(ref, shape);
    must_alias = viewable;
  }
  ExpectMatches(result, expected, context + name);
  if (must_alias) {
    EXPECT_EQ(result.storage(), storage) << context << name;
  }
  tensor = result;
  ref = expected;
}

TEST(TensorViewTest, RandomChainsMatchTheIndexModel) {
  const DType dtypes[] = {DType::kF64, DType::kF32, DType::kI32, DType::kI64,
                          DType::kBF16};
  for (uint32_t trial = 0; trial < 2000; ++trial) {
    RandomChain random(trial);
    const DType dtype = dtypes[trial % 5];
    const Shape shape = random.RandomShape();
    int64_t numel = 1;
    for (int64_t size : shape) numel *= size;
    // Element values are their row-major positions (exact in every dtype
    // used: bf16 holds integers up to 256).
    auto base = Tensor::Arange(0, numel, 1, dtype);
    ASSERT_TRUE(base.ok()) << base.status();
    Tensor tensor = *base->View(shape);
    RefTensor ref = Generate(shape, [&](const std::vector<int64_t>& index) {
      return static_cast<double>(testing::RavelIndex(index, shape));
    });
    std::string context =
        absl::StrCat("trial ", trial, ", ", ShapeToString(shape), ": ");
    for (int step = 0; step < 5; ++step) {
      ApplyRandomOp(random, tensor, ref, context);
      if (::testing::Test::HasFatalFailure()) return;
      context += absl::StrCat(ShapeToString(tensor.shape()), " ");
    }
  }
}

// ---- Known answers. ----

std::vector<int64_t> PieceSizes(const std::vector<Tensor>& pieces,
                                int64_t dim) {
  std::vector<int64_t> sizes;
  for (const Tensor& piece : pieces) sizes.push_back(piece.size(dim));
  return sizes;
}

TEST(TensorViewTest, ChunkFollowsTorchAndChunkExactPads) {
  struct Case {
    int64_t size;
    int64_t chunks;
    std::vector<int64_t> chunk;
    std::vector<int64_t> chunk_exact;
  };
  const Case cases[] = {
      {5, 4, {2, 2, 1}, {2, 2, 1, 0}}, {6, 4, {2, 2, 2}, {2, 2, 2, 0}},
      {1, 3, {1}, {1, 0, 0}},          {8, 4, {2, 2, 2, 2}, {2, 2, 2, 2}},
      {0, 2, {0, 0}, {0, 0}},          {7, 1, {7}, {7}},
  };
  for (const Case& c : cases) {
    auto x = Tensor::Zeros({3, c.size}, DType::kF32);
    ASSERT_TRUE(x.ok());
    auto chunk = x->Chunk(c.chunks, -1);
    auto exact = x->ChunkExact(c.chunks, 1);
    ASSERT_TRUE(chunk.ok() && exact.ok());
    EXPECT_EQ(PieceSizes(*chunk, 1), c.chunk) << c.size << "/" << c.chunks;
    EXPECT_EQ(PieceSizes(*exact, 1), c.chunk_exact)
        << c.size << "/" << c.chunks;
  }
  auto x = Tensor::Zeros({5}, DType::kF32);
  EXPECT_EQ(PieceSizes(*x->Split(2, 0), 0), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(PieceSizes(*x->Split(std::vector<int64_t>{0, 5, 0}, 0), 0),
            (std::vector<int64_t>{0, 5, 0}));
}

TEST(TensorViewTest, ViewOfATransposeFailsAndReshapeCopies) {
  auto x = Tensor::Arange(0, 12, 1, DType::kF32);
  auto t = x->View({3, 4})->Transpose(0, 1);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->is_contiguous());
  EXPECT_FALSE(t->View({12}).ok());
  // Splitting the transposed dims keeps a view.
  auto split = t->View({2, 2, 3});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->strides(), (Strides{2, 1, 4}));
  auto flat = t->Reshape({-1});
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->ToVector<float>().value(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_NE(flat->storage(), x->storage());
}

TEST(TensorViewTest, ExpandGivesZeroStrides) {
  auto x = Tensor::Arange(0, 3, 1, DType::kI64)->View({3, 1});
  auto e = x->Expand({2, -1, 4});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e->strides(), (Strides{0, 1, 0}));
  EXPECT_EQ(e->At({1, 2, 3}), 2);
}

TEST(TensorViewTest, ScalarViews) {
  const Tensor s = Tensor::Scalar(4.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(*s.Item(), 4.5);
  auto flat = s.Flatten();
  ASSERT_TRUE(flat.ok());
  EXPECT_EQ(flat->shape(), (Shape{1}));
  auto expanded = s.Expand({2, 2});
  ASSERT_TRUE(expanded.ok());
  EXPECT_EQ(expanded->ToVector<double>().value(),
            (std::vector<double>(4, 4.5)));
  auto back = flat->View({});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dim(), 0);
  EXPECT_EQ(s.Squeeze().dim(), 0);
  EXPECT_EQ(s.Squeeze(-1)->dim(), 0);
  EXPECT_FALSE(s.Squeeze(1).ok());
  EXPECT_EQ(s.Flatten(0, -1)->shape(), (Shape{1}));
  EXPECT_FALSE(s.Flatten(0, 1).ok());
}

// ---- Aliasing. ----

TEST(TensorViewTest, WritesThroughViewsShowInTheBase) {
  for (uint32_t trial = 0; trial < 500; ++trial) {
    RandomChain random(1000 + trial);
    const Shape shape = random.RandomShape();
    int64_t numel = 1;
    for (int64_t size : shape) numel *= size;
    auto base = Tensor::Arange(0, numel, 1, DType::kF64);
    ASSERT_TRUE(base.ok());
    Tensor tensor = *base->View(shape);
    RefTensor ref = Generate(shape, [&](const std::vector<int64_t>& index) {
      return static_cast<double>(testing::RavelIndex(index, shape));
    });
    const std::string context = absl::StrCat("trial ", 1000 + trial, ": ");
    for (int step = 0; step < 3; ++step) {
      ApplyRandomOp(random, tensor, ref, context);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (tensor.storage() != base->storage()) continue;  // Reshape copied.
    // ref holds the base positions the view reaches; write distinct values
    // through the view, unless it reaches one position twice (Expand).
    std::vector<double> expected_base = base->ToVector<double>().value();
    std::vector<double> positions = ref.values;
    std::sort(positions.begin(), positions.end());
    const bool overlaps =
        std::adjacent_find(positions.begin(), positions.end()) !=
        positions.end();
    if (overlaps) {
      ASSERT_TRUE(tensor.Fill(-7).ok());
      for (double position : ref.values) expected_base[position] = -7;
    } else {
      std::vector<double> values(ref.numel());
      for (int64_t i = 0; i < ref.numel(); ++i) values[i] = -1.0 - i;
      auto source = Tensor::FromVector(values, ref.shape);
      ASSERT_TRUE(source.ok());
      ASSERT_TRUE(tensor.CopyFrom(*source).ok());
      for (int64_t i = 0; i < ref.numel(); ++i) {
        expected_base[ref.values[i]] = values[i];
      }
    }
    EXPECT_EQ(base->ToVector<double>().value(), expected_base) << context;
  }
}

}  // namespace
}  // namespace dtensor
