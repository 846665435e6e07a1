"""cuda_library: compiles .cu files with nvcc into a cc_library.

Bazel 4 has no CUDA rules and nothing can be downloaded, so this macro runs nvcc
from /usr/local/cuda in a genrule per source and wraps the position-independent
objects in a cc_library. The .cu sources may include only their own headers
(`hdrs`) and the CUDA toolkit's: that keeps the device code free of project
dependencies the genrule would have to list. With `include_prefix` (as
cc_library's) the headers are included as "<include_prefix>/<path in the
package>": the genrule copies them into such a tree for nvcc.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

# Hopper (H100/H200) machine code, plus PTX that later GPUs can JIT.
CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def _staged_headers(hdrs, include_prefix):
    """Shell lines copying `hdrs` to $$inc/<include_prefix>/<path in package>."""
    lines = []
    for hdr in hdrs:
        path = "%s/%s" % (include_prefix, hdr)
        lines.append("mkdir -p $$inc/%s && cp $(location %s) $$inc/%s" % (
            path.rsplit("/", 1)[0],
            hdr,
            path,
        ))
    return lines

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], include_prefix = None, **kwargs):
    objects = []
    staging = ["inc=$$(mktemp -d)"] + (_staged_headers(hdrs, include_prefix) if include_prefix else [])
    for src in srcs:
        obj = "_objs/%s/%s.pic.o" % (name, src.rsplit(".", 1)[0])
        native.genrule(
            name = "%s_%s_nvcc" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " && ".join(staging + [" ".join([
                NVCC,
                "-std=c++17 -O3 -Xcompiler=-fPIC -I. -I$$inc --expt-relaxed-constexpr",
                " ".join(CUDA_ARCH_FLAGS + nvcc_flags),
                "-c $(location %s) -o $@" % src,
            ]), "rm -rf $$inc"]),
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        include_prefix = include_prefix,
        deps = deps + ["@local_cuda//:cudart"],
        # Device code and the static CUDA runtime must land in the same link.
        linkstatic = True,
        **kwargs
    )
