#ifndef DTENSOR_PARALLEL_STYLE_REGISTRY_H_
#define DTENSOR_PARALLEL_STYLE_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dtensor/base/named_registry.h"
#include "dtensor/parallel/parallel_style.h"

namespace dtensor {
namespace parallel {

// Makes a style from a plan entry's options.
// Errors: InvalidArgument naming an option the style does not take
// (RejectOptions).
using StyleFactory =
    std::function<absl::StatusOr<std::shared_ptr<const ParallelStyle>>(
        const StyleOptions& options)>;

// Styles by the name plan files give them. Plan files
// (dtensor/parallel/plan.h), and so the `dtensor` CLI, `dtensor explain` and
// the examples, look names up in Global(), so a style a program registers there
// is usable wherever a plan file is read. Thread-safe.
class StyleRegistry {
 public:
  StyleRegistry() = default;
  StyleRegistry(const StyleRegistry&) = delete;
  StyleRegistry& operator=(const StyleRegistry&) = delete;

  // The process's registry. It starts with the built-in styles: PyTorch's
  // (colwise, rowwise, sequence_parallel, prepare_input, prepare_output,
  // loss_parallel: dtensor/parallel/parallel_style.h) and Hugging Face's
  // tp_plan names (colwise_rep, rowwise_rep, local_colwise, local_rowwise,
  // local, gather, replicate; docs/parallel.md), in that order.
  static StyleRegistry& Global();

  // Adds `factory` under `name`.
  // Errors: InvalidArgument: an empty name, a null factory; AlreadyExists: a
  //   name already registered.
  absl::Status Register(std::string name, StyleFactory factory);

  // The style `name` with `options`. Errors: NotFound naming `name` and the
  // known names; the factory's errors.
  absl::StatusOr<std::shared_ptr<const ParallelStyle>> Create(
      absl::string_view name, const StyleOptions& options) const;

  // Every registered name, in registration order.
  std::vector<std::string> Names() const;

 private:
  NamedRegistry<StyleFactory> factories_{"style"};
};

// Registers a style in StyleRegistry::Global() when constructed; a
// namespace-scope static of one makes a library's style known to every plan
// file read by a program the library is linked into (mark the cc_library
// `alwayslink = True`), the `dtensor` tool included:
//
//   const StyleRegistration kMine("my_style", MyStyleFactory);
//
// Registration never aborts: status() says whether it succeeded.
using StyleRegistration = GlobalRegistration<StyleRegistry, StyleFactory>;

// OK when `options` sets only options named in `accepted` ("input_layouts",
// "output_layouts", "use_local_output"; use_local_output counts as set when
// true); otherwise InvalidArgument naming `style` and the option.
absl::Status RejectOptions(absl::string_view style, const StyleOptions& options,
                           const std::vector<absl::string_view>& accepted);

}  // namespace parallel
}  // namespace dtensor

#endif  // DTENSOR_PARALLEL_STYLE_REGISTRY_H_
