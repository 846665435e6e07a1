"""cuda_library: compiles .cu files with nvcc into a cc_library.

Bazel 4 has no CUDA rules and nothing can be downloaded, so this macro runs nvcc
from /usr/local/cuda in a genrule per source and wraps the position-independent
objects in a cc_library. The .cu sources may include only their own headers
(`hdrs`) and the CUDA toolkit's: that keeps the device code free of project
dependencies the genrule would have to list.
"""

NVCC = "/usr/local/cuda/bin/nvcc"

# Hopper (H100/H200) machine code, plus PTX that later GPUs can JIT.
CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], **kwargs):
    objects = []
    for src in srcs:
        obj = "_objs/%s/%s.pic.o" % (name, src.rsplit(".", 1)[0])
        native.genrule(
            name = "%s_%s_nvcc" % (name, src.replace("/", "_").replace(".", "_")),
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-std=c++17 -O3 -Xcompiler=-fPIC -I. --expt-relaxed-constexpr",
                " ".join(CUDA_ARCH_FLAGS + nvcc_flags),
                "-c $(location %s) -o $@" % src,
            ]),
        )
        objects.append(obj)
    native.cc_library(
        name = name,
        srcs = objects,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        # Device code and the static CUDA runtime must land in the same link.
        linkstatic = True,
        **kwargs
    )
