"""static_archive: one archive of every object file a C++ target links.

For installing dtensor outside Bazel (tools/install.sh): the library targets'
own archives (position-independent where built so) merged with `ar`, so that a
shared library can take them whole. Libraries that come from the system
(Abseil, OpenBLAS, Gloo: linker flags, no archive of ours) stay out.
"""

def _archives(deps):
    archives = {}
    for dep in deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            for library in linker_input.libraries:
                archive = library.pic_static_library or library.static_library
                if archive:
                    archives[archive.path] = archive
    return archives.values()

def _static_archive_impl(ctx):
    archives = _archives(ctx.attr.deps)
    script = ctx.actions.declare_file(ctx.label.name + ".mri")
    ctx.actions.write(script, "\n".join(
        ["create " + ctx.outputs.out.path] +
        ["addlib " + archive.path for archive in archives] +
        ["save", "end", ""],
    ))
    ctx.actions.run_shell(
        inputs = archives + [script],
        outputs = [ctx.outputs.out],
        command = "ar -M < " + script.path,
        mnemonic = "StaticArchive",
        progress_message = "Merging %d archives into %s" %
                           (len(archives), ctx.outputs.out.short_path),
    )
    return [DefaultInfo(files = depset([ctx.outputs.out]))]

static_archive = rule(
    implementation = _static_archive_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "out": attr.output(mandatory = True),
    },
    doc = "Merges the archives that `deps` link into one archive, `out`.",
)
