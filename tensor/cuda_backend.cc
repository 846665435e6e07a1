// The CUDA backend over the CUDA runtime and cuBLAS (built with
// --config=cuda).
#include "dtensor/tensor/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dtensor/base/profiler.h"
#include "dtensor/base/status_macros.h"
#include "dtensor/tensor/cuda/copy_kernels.h"
#include "dtensor/tensor/cuda/out_of_memory.h"
#include "dtensor/tensor/cuda/upload_staging.h"
#include "dtensor/tensor/dispatch.h"

namespace dtensor::cuda {
namespace {

constexpr int kMaxDevices = 64;
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

absl::Status FromCuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

absl::Status FromCublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": cuBLAS status ", static_cast<int>(status)));
}

// Selects `device`, or says why it cannot be used.
absl::Status UseDevice(int device) {
  const int count = DeviceCount();
  if (count == 0) {
    return absl::FailedPreconditionError("no CUDA device is present");
  }
  if (device < 0 || device >= count || device >= kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ", device, " does not exist (", count, " present)"));
  }
  // Every allocation, free and launch selects its device: most find it
  // current on this thread already, and reading it is cheaper than setting.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) {
    return absl::OkStatus();
  }
  return FromCuda(cudaSetDevice(device), "cudaSetDevice");
}

// What one device owns: its stream, its caching allocator and its cuBLAS
// handle with the handle's workspace. Created on first use, never destroyed
// (the CUDA runtime tears down at exit).
struct DeviceState {
  cudaStream_t stream = nullptr;
  std::unique_ptr<CachingAllocator> allocator;
  std::unique_ptr<UploadStaging> staging;
  cublasHandle_t blas = nullptr;
  void* blas_workspace = nullptr;
  // Between BeginCapture and EndCapture: the stream is captured into a
  // graph whose memory comes from allocator pool `capture_pool`.
  std::atomic<bool> capturing{false};
  CachingAllocator::PoolId capture_pool = 0;
};

// FailedPrecondition naming `what` while the stream of `state` is captured.
absl::Status CheckNotCapturing(const DeviceState& state, const char* what) {
  if (!state.capturing.load(std::memory_order_acquire)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      what,
      " is not allowed while the device's stream is captured into a "
      "CUDA graph"));
}

// The device memory of a new allocator block. The calls run in the relaxed
// capture mode: during a capture (thread-local mode) cudaMalloc is refused
// otherwise, and a pool block is made once, not captured.
absl::StatusOr<void*> BackingMalloc(int device, size_t nbytes) {
  DT_RETURN_IF_ERROR(UseDevice(device));
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  DT_RETURN_IF_ERROR(FromCuda(cudaThreadExchangeStreamCaptureMode(&mode),
                              "cudaThreadExchangeStreamCaptureMode"));
  void* ptr = nullptr;
  const cudaError_t error = cudaMalloc(&ptr, nbytes);
  size_t free = 0;
  size_t total = 0;
  if (error == cudaErrorMemoryAllocation) {
    // Not a sticky error, but it stays the last error: cleared, so that the
    // next kernel launch's check does not report it.
    cudaGetLastError();
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) cudaGetLastError();
  }
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (error == cudaErrorMemoryAllocation) {
    return OutOfDeviceMemory(nbytes, free, total);
  }
  DT_RETURN_IF_ERROR(FromCuda(error, "cudaMalloc"));
  return ptr;
}

std::mutex& StatesMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

// Set once per device under StatesMutex() and never reset: the hot path
// (every allocation, free and launch) reads them without the lock.
std::array<std::atomic<DeviceState*>, kMaxDevices>& States() {
  static auto* states =
      new std::array<std::atomic<DeviceState*>, kMaxDevices>{};
  return *states;
}

absl::StatusOr<DeviceState*> CreateState(int device) {
  auto state = std::make_unique<DeviceState>();
  DT_RETURN_IF_ERROR(
      FromCuda(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags"));
  state->allocator = std::make_unique<CachingAllocator>(
      [device](size_t nbytes) { return BackingMalloc(device, nbytes); },
      [device](void* ptr) {
        if (UseDevice(device).ok()) cudaFree(ptr);
      });
  UploadStaging::Hooks staging;
  staging.allocate = MallocPinned;
  staging.make_fence = []() -> absl::StatusOr<void*> {
    cudaEvent_t event = nullptr;
    DT_RETURN_IF_ERROR(
        FromCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags"));
    return static_cast<void*>(event);
  };
  staging.passed = [](void* fence) {
    if (cudaEventQuery(static_cast<cudaEvent_t>(fence)) != cudaErrorNotReady) {
      return true;
    }
    // "Not ready" is no error, but it stays the last error: cleared, so that
    // the next launch's check does not report it.
    cudaGetLastError();
    return false;
  };
  state->staging = std::make_unique<UploadStaging>(std::move(staging));
  return state.release();
}

// The state of `device`, created on first use; selects the device.
absl::StatusOr<DeviceState*> State(int device) {
  DT_RETURN_IF_ERROR(UseDevice(device));
  std::atomic<DeviceState*>& slot = States()[device];
  DeviceState* state = slot.load(std::memory_order_acquire);
  if (state != nullptr) return state;
  std::lock_guard<std::mutex> lock(StatesMutex());
  state = slot.load(std::memory_order_relaxed);
  if (state == nullptr) {
    DT_ASSIGN_OR_RETURN(state, CreateState(device));
    slot.store(state, std::memory_order_release);
  }
  return state;
}

// The cuBLAS handle of `device`, bound to its stream and workspace.
absl::StatusOr<cublasHandle_t> BlasHandle(int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  std::lock_guard<std::mutex> lock(StatesMutex());
  if (state->blas == nullptr) {
    DT_RETURN_IF_ERROR(FromCublas(cublasCreate(&state->blas), "cublasCreate"));
    DT_RETURN_IF_ERROR(FromCublas(cublasSetStream(state->blas, state->stream),
                                  "cublasSetStream"));
    DT_RETURN_IF_ERROR(FromCuda(
        cudaMalloc(&state->blas_workspace, kBlasWorkspaceBytes), "cudaMalloc"));
    DT_RETURN_IF_ERROR(
        FromCublas(cublasSetWorkspace(state->blas, state->blas_workspace,
                                      kBlasWorkspaceBytes),
                   "cublasSetWorkspace"));
  }
  return state->blas;
}

cudaMemcpyKind ToCuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

// The cuBLAS element and compute types of `dtype`.
struct BlasTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

absl::StatusOr<BlasTypes> BlasTypesOf(DType dtype, bool allow_tf32) {
  return DispatchDType(dtype, [&](auto tag) -> absl::StatusOr<BlasTypes> {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      return BlasTypes{CUDA_R_32F, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                              : CUBLAS_COMPUTE_32F};
    } else if constexpr (std::is_same_v<T, double>) {
      return BlasTypes{CUDA_R_64F, CUBLAS_COMPUTE_64F};
    } else if constexpr (std::is_same_v<T, BFloat16>) {
      return BlasTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    } else if constexpr (std::is_same_v<T, Half>) {
      return BlasTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F};
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("Gemm: dtype ", std::string(DTypeName(dtype)),
                       " is not supported by cuBLAS (floating dtypes only)"));
    }
  });
}

absl::Status CheckGemmSizes(const GemmArgs& args) {
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  for (const int64_t value :
       {args.m, args.n, args.k, args.lda, args.ldb, args.ldc, args.batch}) {
    if (value < 0 || value > kIntMax) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gemm: sizes m=", args.m, " n=", args.n, " k=", args.k,
                       " lda=", args.lda, " ldb=", args.ldb, " ldc=", args.ldc,
                       " batch=", args.batch, " must lie in [0, 2^31)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  // Asked once: the devices a process sees are fixed when CUDA starts, and
  // every device selection checks the count.
  static const int count = [] {
    int found = 0;
    if (cudaGetDeviceCount(&found) != cudaSuccess) {
      cudaGetLastError();  // Clears the sticky "no device" error.
      return 0;
    }
    return found;
  }();
  return count;
}

std::string Describe() {
  const int count = DeviceCount();
  if (count == 0) return "no CUDA device";
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) {
    return absl::StrCat(count, " CUDA device(s)");
  }
  return absl::StrCat(count, " CUDA device(s), device 0: ", properties.name);
}

absl::StatusOr<void*> Malloc(size_t nbytes, int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  return state->allocator->Allocate(nbytes,
                                    reinterpret_cast<uintptr_t>(state->stream));
}

void Free(void* ptr, int device) {
  if (ptr == nullptr) return;
  absl::StatusOr<DeviceState*> state = State(device);
  if (state.ok()) (*state)->allocator->Free(ptr);
}

MemoryStats GetMemoryStats(int device) {
  if (device < 0 || device >= kMaxDevices) return {};
  const DeviceState* state = States()[device].load(std::memory_order_acquire);
  return state == nullptr ? MemoryStats{} : state->allocator->Stats();
}

absl::Status EmptyCache(int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  DT_RETURN_IF_ERROR(CheckNotCapturing(*state, "EmptyCache"));
  // Blocks freed while the stream still used them must not go back to the
  // driver before that work ran.
  DT_RETURN_IF_ERROR(
      FromCuda(cudaStreamSynchronize(state->stream), "cudaStreamSynchronize"));
  state->allocator->EmptyCache();
  return absl::OkStatus();
}

absl::Status Memcpy(void* dst, const void* src, size_t nbytes, CopyKind kind,
                    int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  if (kind != CopyKind::kDeviceToDevice) {
    // A graph would re-read an upload's reused staging buffer at every
    // replay; a download waits for the stream.
    DT_RETURN_IF_ERROR(CheckNotCapturing(
        *state, kind == CopyKind::kHostToDevice
                    ? "A host-to-device copy (copy the data to the device "
                      "before the capture)"
                    : "A device-to-host copy (it waits for the stream)"));
  }
  if (kind == CopyKind::kHostToDevice) {
    DT_ASSIGN_OR_RETURN(UploadStaging::Buffer * staged,
                        state->staging->Acquire(nbytes));
    if (staged != nullptr) {
      std::memcpy(staged->data, src, nbytes);
      return state->staging->Commit(staged, [&](void* fence) {
        DT_RETURN_IF_ERROR(
            FromCuda(cudaMemcpyAsync(dst, staged->data, nbytes,
                                     cudaMemcpyHostToDevice, state->stream),
                     "cudaMemcpyAsync"));
        return FromCuda(
            cudaEventRecord(static_cast<cudaEvent_t>(fence), state->stream),
            "cudaEventRecord");
      });
    }
  }
  DT_RETURN_IF_ERROR(
      FromCuda(cudaMemcpyAsync(dst, src, nbytes, ToCuda(kind), state->stream),
               "cudaMemcpyAsync"));
  if (kind == CopyKind::kDeviceToDevice) return absl::OkStatus();
  Profiler::NoteHostSync();
  return FromCuda(cudaStreamSynchronize(state->stream), "cudaMemcpy");
}

absl::Status CopyToPinnedAsync(void* dst, const void* src, size_t nbytes,
                               int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  return FromCuda(
      cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, state->stream),
      "cudaMemcpyAsync");
}

absl::StatusOr<void*> MallocPinned(size_t nbytes) {
  void* ptr = nullptr;
  DT_RETURN_IF_ERROR(FromCuda(cudaMallocHost(&ptr, nbytes), "cudaMallocHost"));
  return ptr;
}

absl::Status Fill(void* dst, size_t count, uint64_t bits, int element_bytes,
                  int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  return FromCuda(LaunchFill(dst, count, bits, element_bytes, state->stream),
                  "Fill launch");
}

absl::StatusOr<void*> CurrentStream(int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  return static_cast<void*>(state->stream);
}

absl::Status Synchronize(int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  DT_RETURN_IF_ERROR(CheckNotCapturing(*state, "Synchronize"));
  return FromCuda(cudaStreamSynchronize(state->stream),
                  "cudaStreamSynchronize");
}

absl::Status BeginCapture(int device) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  if (state->capturing.exchange(true, std::memory_order_acq_rel)) {
    return absl::FailedPreconditionError(
        absl::StrCat("BeginCapture: the stream of CUDA device ", device,
                     " is being captured already"));
  }
  CachingAllocator& allocator = *state->allocator;
  const auto stream = reinterpret_cast<uintptr_t>(state->stream);
  absl::StatusOr<CachingAllocator::PoolId> pool = allocator.BeginPool(stream);
  absl::Status begun = pool.status();
  if (begun.ok()) {
    begun = FromCuda(
        cudaStreamBeginCapture(state->stream, cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
    if (!begun.ok()) {
      allocator.EndPool(stream);
      allocator.ReleasePool(*pool);
    }
  }
  if (!begun.ok()) {
    state->capturing.store(false, std::memory_order_release);
    return begun;
  }
  state->capture_pool = *pool;
  return absl::OkStatus();
}

absl::StatusOr<CapturedGraph> EndCapture(int device, bool keep) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  if (!state->capturing.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        absl::StrCat("EndCapture: the stream of CUDA device ", device,
                     " is not being captured"));
  }
  cudaGraph_t graph = nullptr;
  absl::Status status = FromCuda(cudaStreamEndCapture(state->stream, &graph),
                                 "cudaStreamEndCapture");
  state->allocator->EndPool(reinterpret_cast<uintptr_t>(state->stream));
  state->capturing.store(false, std::memory_order_release);
  cudaGraphExec_t exec = nullptr;
  if (status.ok() && keep) {
    status =
        FromCuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  }
  // The executable graph keeps what it needs of the graph.
  if (graph != nullptr) cudaGraphDestroy(graph);
  if (status.ok() && keep) return CapturedGraph{exec, state->capture_pool};
  // An invalidated capture leaves its error as the last error: cleared, so
  // that the next launch's check does not report it.
  cudaGetLastError();
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  // Nothing captured ever ran: the pool's blocks are free to reuse.
  state->allocator->ReleasePool(state->capture_pool);
  DT_RETURN_IF_ERROR(status);
  return CapturedGraph{};
}

absl::Status LaunchGraph(const CapturedGraph& graph, int device) {
  if (graph.exec == nullptr) {
    return absl::InvalidArgumentError("LaunchGraph: the graph is empty");
  }
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  return FromCuda(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph.exec), state->stream),
      "cudaGraphLaunch");
}

void DestroyGraph(const CapturedGraph& graph, int device) {
  // Launches in flight finish first (cudaGraphExecDestroy does not cancel
  // them), and the released blocks serve only later work of the stream.
  if (graph.exec != nullptr) {
    cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph.exec));
  }
  absl::StatusOr<DeviceState*> state = State(device);
  if (state.ok()) (*state)->allocator->ReleasePool(graph.pool);
}

namespace {

// An event made with `flags`, recorded on the stream of `device`.
absl::StatusOr<cudaEvent_t> RecordEvent(int device, unsigned int flags) {
  DT_ASSIGN_OR_RETURN(DeviceState * state, State(device));
  cudaEvent_t event = nullptr;
  DT_RETURN_IF_ERROR(FromCuda(cudaEventCreateWithFlags(&event, flags),
                              "cudaEventCreateWithFlags"));
  const cudaError_t recorded = cudaEventRecord(event, state->stream);
  if (recorded != cudaSuccess) cudaEventDestroy(event);
  DT_RETURN_IF_ERROR(FromCuda(recorded, "cudaEventRecord"));
  return event;
}

}  // namespace

absl::StatusOr<Event> Event::Record(int device) {
  DT_ASSIGN_OR_RETURN(cudaEvent_t event,
                      RecordEvent(device, cudaEventDisableTiming));
  return Event(event, device);
}

absl::StatusOr<Event> Event::RecordTimed(int device) {
  DT_ASSIGN_OR_RETURN(cudaEvent_t event, RecordEvent(device, cudaEventDefault));
  return Event(event, device);
}

absl::StatusOr<double> Event::ElapsedUsSince(const Event& start) const {
  DT_RETURN_IF_ERROR(Wait());
  float ms = 0;
  DT_RETURN_IF_ERROR(
      FromCuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.event_),
                                    static_cast<cudaEvent_t>(event_)),
               "cudaEventElapsedTime"));
  return static_cast<double>(ms) * 1e3;
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

Event& Event::operator=(Event&& other) noexcept {
  std::swap(event_, other.event_);
  std::swap(device_, other.device_);
  return *this;
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

absl::Status Event::BlockStream(void* stream) const {
  return FromCuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                      static_cast<cudaEvent_t>(event_), 0),
                  "cudaStreamWaitEvent");
}

absl::Status Event::Wait() const {
  return FromCuda(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)),
                  "cudaEventSynchronize");
}

absl::Status Gemm(const GemmArgs& args, int device) {
  DT_RETURN_IF_ERROR(CheckGemmSizes(args));
  DT_ASSIGN_OR_RETURN(const BlasTypes types,
                      BlasTypesOf(args.dtype, args.allow_tf32));
  if (args.m == 0 || args.n == 0 || args.batch == 0) return absl::OkStatus();
  DT_ASSIGN_OR_RETURN(cublasHandle_t handle, BlasHandle(device));
  const float alpha_f = 1.0f;
  const float beta_f = 0.0f;
  const double alpha_d = 1.0;
  const double beta_d = 0.0;
  const bool f64 = args.dtype == DType::kF64;
  // Row-major C = A·B is column-major C^T = B^T·A^T: swap the operands.
  return FromCublas(
      cublasGemmStridedBatchedEx(
          handle, args.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
          args.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(args.n),
          static_cast<int>(args.m), static_cast<int>(args.k),
          f64 ? static_cast<const void*>(&alpha_d) : &alpha_f, args.b,
          types.data, static_cast<int>(args.ldb), args.stride_b, args.a,
          types.data, static_cast<int>(args.lda), args.stride_a,
          f64 ? static_cast<const void*>(&beta_d) : &beta_f, args.c, types.data,
          static_cast<int>(args.ldc), args.stride_c,
          static_cast<int>(args.batch), types.compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

}  // namespace dtensor::cuda
